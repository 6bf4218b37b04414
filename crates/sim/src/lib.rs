//! Causet's deterministic simulator, workload generator, history recorder and TCC checker.
//!
//! [`run_seed`] runs one seed end to end: it derives a topology, faults and a workload from the seed, runs the
//! real state machines of `causet-core` under them in virtual time, records the clients' history, checks it for
//! Transactional Causal+ Consistency and checks that every acknowledged write survived. A failure names its seed
//! and the command that replays it.

#![warn(missing_docs)]

pub mod checker;
pub mod history;
pub mod workload;
pub mod world;

use history::{HistOp, History, Observed, Outcome, WriteId};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;
pub use world::{Faults, Liveness, SimConfig, SimOutcome, SimStats, World};

/// The result of one seed.
#[derive(Debug)]
pub struct SeedResult {
    /// The seed.
    pub seed: u64,
    /// The configuration it ran.
    pub config: SimConfig,
    /// Counters.
    pub stats: SimStats,
    /// The checker's report.
    pub report: checker::Report,
    /// The liveness verdict.
    pub liveness: Liveness,
    /// Wall-clock time of the run and the check, seconds.
    pub wall_s: f64,
    /// The history, for writing out.
    pub history: History,
}

impl SeedResult {
    /// Whether the history is TCC and every acknowledged write survived.
    pub fn passed(&self) -> bool {
        self.report.is_ok() && self.liveness == Liveness::Ok
    }

    /// The command that replays this seed.
    pub fn replay_command(&self) -> String {
        let bug = match self.config.bug {
            Some(b) => format!(" --bug {}", bug_name(b)),
            None => String::new(),
        };
        let protocol = match self.config.protocol {
            causet_core::Protocol::Cure => String::new(),
            other => format!(" --protocol {}", other.name()),
        };
        format!("cargo run --release -p causet -- sim --seed {}{bug}{protocol}", self.seed)
    }

    /// A one-paragraph summary.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "seed {}: {} DCs × {} partitions on {} nodes{} × {} shards, {} replicas, {} sessions, {:?} clock, skew ≤ {} µs, drift ≤ {} ppm, \
             delay {}..{} µs, crashes {}, link cuts {}; {} committed, {} aborted, {} unknown, {} node crashes, {} instant restarts, \
             {} cuts, {} node cuts, {} checkpoints, {} log reads, {} resends to new leaders, {} duplicate prepares turned away, {} checkpoint loads, {} snapshots installed ({} parts sent, {} streams received), {} disk losses, {} joins, {} replica moves ({} replicas removed), {} membership changes, {} follower reads ({} passed on to leaders), {} messages, {:.1} s virtual, {:.2} s wall; {} reads checked; ",
            self.seed,
            c.dcs,
            c.partitions,
            c.nodes,
            match (c.first_nodes, c.join_at_us) {
                (0, _) => String::new(),
                (f, 0) => format!(" (placed on the first {f})"),
                (f, at) => format!(" (the first {f}, the others joining at {:.2} s)", at as f64 / 1e6),
            },
            c.shards,
            c.replicas,
            c.sessions,
            c.clock,
            c.faults.skew_us_max,
            c.faults.drift_ppm_max,
            c.faults.delay_us_min,
            c.faults.delay_us_max,
            if c.faults.crash_every_us > 0 { "on" } else { "off" },
            if c.faults.cut_every_us > 0 { "on" } else { "off" },
            self.stats.committed,
            self.stats.aborted,
            self.stats.unknown,
            self.stats.crashes,
            self.stats.coordinator_crashes,
            self.stats.cuts,
            self.stats.node_cuts,
            self.stats.checkpoints,
            self.stats.log_reads,
            self.stats.resends,
            self.stats.duplicate_prepares,
            self.stats.group_loads,
            self.stats.snapshots_installed,
            self.stats.snapshot_parts.0,
            self.stats.snapshot_parts.1,
            self.stats.disk_losses,
            self.stats.joins,
            self.stats.replica_moves,
            self.stats.replicas_removed,
            self.stats.membership_changes,
            self.stats.nearest_reads.0,
            self.stats.nearest_reads.1,
            self.stats.messages,
            self.stats.virtual_us as f64 / 1e6,
            self.wall_s,
            self.report.reads_checked,
        );
        if c.placement.partial() {
            let rings: Vec<Vec<u16>> = c.placement.rings.iter().map(|r| r.iter().map(|d| d.0).collect()).collect();
            let (remote, failovers, probes) =
                (self.stats.remote_reads.0, self.stats.remote_reads.1, self.stats.ring_probes);
            let from = match c.placement.read_from {
                causet_core::placement::RingChoice::Nearest => "the nearest holder",
                causet_core::placement::RingChoice::Own => "the own ring's holder",
            };
            out.push_str(&format!(
                "odd objects placed by rings {rings:?}, read from {from} ({remote} reads sent to another DC, {failovers} asked of another holder too, {probes} probes); "
            ));
        }
        if self.stats.buffered.0 > 0 {
            let (b, m) = (self.stats.buffered, self.stats.token_moves);
            out.push_str(&format!(
                "{} transactions buffered, {} handovers, {} starts after another coordinator's buffer ({} questions answered); ",
                b.0, b.1, m.0, m.1
            ));
        }
        if self.passed() {
            out.push_str("OK");
        } else {
            out.push_str(&format!("FAILED\n{}", self.report));
            if let Liveness::Failed(problems) = &self.liveness {
                for p in problems {
                    out.push_str(&format!("\n  liveness: {p}"));
                }
            }
            out.push_str(&format!("\nreproduce with: {}", self.replay_command()));
        }
        out
    }
}

/// The command-line name of a deliberate bug.
pub fn bug_name(bug: causet_core::Bug) -> &'static str {
    match bug {
        causet_core::Bug::SkipReadWait => "skip-read-wait",
        causet_core::Bug::CommitAtMinPrepareTime => "commit-at-min-prepare-time",
        causet_core::Bug::IgnorePreparedInPvc => "ignore-prepared-in-pvc",
        causet_core::Bug::CacheIgnoresBoxes => "cache-ignores-boxes",
        causet_core::Bug::SplitHandover => "split-handover",
        causet_core::Bug::IgnoreBufferTokens => "ignore-buffer-tokens",
        causet_core::Bug::ReadsIgnorePlacement => "reads-ignore-placement",
        causet_core::Bug::CacheExtendsOverWrites => "cache-extends-over-writes",
    }
}

/// Parses a bug's command-line name.
pub fn parse_bug(name: &str) -> Option<causet_core::Bug> {
    causet_core::Bug::ALL.into_iter().find(|b| bug_name(*b) == name)
}

/// Runs a configuration and checks its history.
pub fn run_config(config: SimConfig) -> SeedResult {
    // Wall-clock time is measured here, in the simulator's driver, never inside the state machines.
    let started = Instant::now();
    let outcome = World::new(config.clone()).run();
    let report = checker::check(&outcome.history);
    SeedResult {
        seed: config.seed,
        config,
        stats: outcome.stats,
        report,
        liveness: outcome.liveness,
        wall_s: started.elapsed().as_secs_f64(),
        history: outcome.history,
    }
}

/// Runs the seed with the parameters it derives, optionally with a deliberate bug.
pub fn run_seed(seed: u64, bug: Option<causet_core::Bug>) -> SeedResult {
    run_seed_with(seed, bug, causet_core::Protocol::Cure)
}

/// Runs the seed with the parameters it derives under a protocol, optionally with a deliberate bug.
pub fn run_seed_with(seed: u64, bug: Option<causet_core::Bug>, protocol: causet_core::Protocol) -> SeedResult {
    let mut config = SimConfig::from_seed(seed);
    config.bug = bug;
    config.protocol = protocol;
    run_config(config)
}

/// The sums a counter may show beyond its acknowledged increments: any subset of the in-doubt increments may have
/// committed. Exact up to a few thousand distinct sums, then the range between the extremes.
fn possible_extra_sums(in_doubt: &[i64]) -> impl Fn(i64) -> bool {
    const EXACT: usize = 4096;
    let mut sums: BTreeSet<i64> = BTreeSet::from([0]);
    for a in in_doubt {
        if sums.len() > EXACT {
            break;
        }
        let shifted: Vec<i64> = sums.iter().map(|s| s + a).collect();
        sums.extend(shifted);
    }
    let exact = sums.len() <= EXACT;
    let low: i64 = in_doubt.iter().filter(|a| **a < 0).sum();
    let high: i64 = in_doubt.iter().filter(|a| **a > 0).sum();
    move |extra| if exact { sums.contains(&extra) } else { (low..=high).contains(&extra) }
}

/// Checks the final read (history index `final_read`), taken with a clock covering every commit, against every
/// acknowledged write: each must be visible. A counter must read the acknowledged increments' sum plus those of
/// some writes of unknown outcome (their commit reply was lost, so they may have committed): the sum plus the sum of
/// some subset of the unknown amounts. Returns one line per lost write.
pub fn lost_writes(history: &History, final_read: usize) -> Vec<String> {
    #[derive(Default)]
    struct Written {
        acknowledged: BTreeSet<WriteId>,
        sum: i64,
        unknown: Vec<i64>,
    }
    let mut written: BTreeMap<&str, Written> = BTreeMap::new();
    for tx in history.txs.iter().filter(|t| t.outcome != Outcome::Aborted) {
        for op in &tx.ops {
            if let HistOp::Write { object, id, amount } = op {
                let entry = written.entry(&object.key).or_default();
                if tx.outcome == Outcome::Committed {
                    entry.acknowledged.insert(*id);
                    entry.sum += amount;
                } else {
                    entry.unknown.push(*amount);
                }
            }
        }
    }
    let mut problems = Vec::new();
    for op in &history.txs[final_read].ops {
        let HistOp::Read { object, observed } = op else {
            continue;
        };
        let Some(w) = written.get(object.key.as_str()) else {
            continue;
        };
        match observed {
            Observed::Set(seen) => {
                let seen: BTreeSet<WriteId> = seen.iter().copied().collect();
                for lost in w.acknowledged.difference(&seen) {
                    problems
                        .push(format!("acknowledged write {lost} to {} is missing from the final read", object.key));
                }
            }
            Observed::Counter(value) if !possible_extra_sums(&w.unknown)(value - w.sum) => {
                problems.push(format!(
                    "counter {} reads {value} at the end, but acknowledged increments sum to {} and no subset of the \
                     {} of unknown outcome makes up the difference",
                    object.key,
                    w.sum,
                    w.unknown.len()
                ));
            }
            Observed::Register(None) if !w.acknowledged.is_empty() => {
                problems.push(format!("register {} reads empty at the end despite acknowledged writes", object.key))
            }
            _ => {}
        }
    }
    problems
}

/// One final read: a committed read of every checked object at one DC, after the faults were healed and the
/// cluster quiesced, with a clock that covers every acknowledged commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FinalRead {
    /// The DC read.
    pub dc: u16,
    /// The read's index in the history.
    pub tx: usize,
}

/// Checks the final reads of a real or simulated run: every acknowledged write is in each of them (no lost
/// update, via [`lost_writes`]), and every DC returned the same value for every object (convergence). Returns one
/// line per problem; an empty list passes.
pub fn final_read_problems(history: &History, reads: &[FinalRead]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut values: Vec<(u16, BTreeMap<&history::ObjectName, Observed>)> = Vec::new();
    for read in reads {
        let Some(tx) = history.txs.get(read.tx) else {
            problems.push(format!("DC {}: final read T{} is not in the history", read.dc, read.tx));
            continue;
        };
        if tx.outcome != Outcome::Committed {
            problems.push(format!("DC {}: final read T{} did not commit ({:?})", read.dc, read.tx, tx.outcome));
            continue;
        }
        problems.extend(lost_writes(history, read.tx).into_iter().map(|p| format!("DC {}: {p}", read.dc)));
        let mut seen = BTreeMap::new();
        for op in &tx.ops {
            if let HistOp::Read { object, observed } = op {
                // A set's order carries no meaning: compare sorted.
                let observed = match observed {
                    Observed::Set(ids) => {
                        let mut ids = ids.clone();
                        ids.sort_unstable();
                        Observed::Set(ids)
                    }
                    other => other.clone(),
                };
                seen.insert(object, observed);
            }
        }
        values.push((read.dc, seen));
    }
    if let Some(((first_dc, first), rest)) = values.split_first().map(|(f, r)| ((f.0, &f.1), r)) {
        for (dc, other) in rest {
            for (object, a) in first {
                match other.get(object) {
                    Some(b) if b == a => {}
                    Some(b) => problems.push(format!(
                        "DCs {first_dc} and {dc} diverged on {:?} {}: {}",
                        object.kind,
                        object.key,
                        describe_difference(a, b)
                    )),
                    None => problems.push(format!("DC {dc}'s final read did not read {}", object.key)),
                }
            }
        }
    }
    problems
}

fn describe_difference(a: &Observed, b: &Observed) -> String {
    match (a, b) {
        (Observed::Set(a), Observed::Set(b)) => {
            let a: BTreeSet<WriteId> = a.iter().copied().collect();
            let b: BTreeSet<WriteId> = b.iter().copied().collect();
            let only_a: Vec<WriteId> = a.difference(&b).take(5).copied().collect();
            let only_b: Vec<WriteId> = b.difference(&a).take(5).copied().collect();
            format!("only the first has {only_a:?}, only the second has {only_b:?} (at most 5 listed each)")
        }
        _ => format!("{a:?} vs {b:?}"),
    }
}
