//! `causet check`: a workload against a real local multi-DC cluster under injected faults, recorded as a history
//! and checked for Transactional Causal+ Consistency, lost acknowledged updates and convergence.
//!
//! 1. Start a cluster of real `causet start` processes ([`crate::cluster`]).
//! 2. Run client sessions at every DC (some move between DCs carrying their causal clock) through the client
//!    protocol for `--duration`, recording every transaction ([`session`]), while the nemesis applies a fault
//!    schedule derived from `--seed` ([`nemesis`]): kill -9 and restart, SIGSTOP/SIGCONT, cuts and heals of links
//!    between DCs and, with several nodes per DC, between two nodes of one DC, clock jumps.
//! 3. Heal everything, then read every object at every DC with a clock covering every session's clock, until the
//!    DCs agree or `--quiesce` runs out (final reads).
//! 4. Check: the TCC checker over the whole history (the final reads included), no acknowledged write missing
//!    from any final read, identical final reads at every DC. Write the history (with the final reads and the
//!    faults, `docs/history.md`) and print the report.

pub mod nemesis;
pub mod resources;
pub mod session;

use crate::cluster::{self, ClusterFile, StartOptions};
use anyhow::Context;
use causet_client::{Client, VectorClock};
use causet_core::Protocol;
use causet_sim::checker::{self, Report};
use causet_sim::history::{History, Outcome, TxRecord};
use causet_sim::workload::{Planned, Workload, WorkloadConfig};
use causet_sim::{final_read_problems, FinalRead};
use nemesis::{Applied, FaultKinds, Nemesis, ScheduleShape, Step};
use serde::{Deserialize, Serialize};
use session::{RequestStats, SessionConfig};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The session id of DC `dc`'s final reader: far above the workload's sessions.
const FINAL_READER_SESSION: u64 = 1 << 20;

/// A kind of checked object (`--kinds`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckedKind {
    /// Add-wins sets receiving unique elements.
    Sets,
    /// Last-writer-wins registers assigned unique values.
    Registers,
    /// Counters.
    Counters,
}

impl CheckedKind {
    fn kind(self) -> causet_sim::history::ObjectKind {
        match self {
            CheckedKind::Sets => causet_sim::history::ObjectKind::Set,
            CheckedKind::Registers => causet_sim::history::ObjectKind::Register,
            CheckedKind::Counters => causet_sim::history::ObjectKind::Counter,
        }
    }

    fn name(self) -> &'static str {
        match self {
            CheckedKind::Sets => "sets",
            CheckedKind::Registers => "registers",
            CheckedKind::Counters => "counters",
        }
    }
}

/// `causet check`'s options.
#[derive(Clone, Debug, clap::Args)]
pub struct CheckArgs {
    /// Seed of the fault schedule and of the workload's choices (printed first; same seed, same schedule).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Seconds of workload under faults.
    #[arg(long, default_value_t = 60.0)]
    pub duration: f64,
    /// The protocol every DC runs: cure, gentlerain, or eventual (a known-bad baseline the check must flag).
    #[arg(long, value_parser = crate::cli::protocol(), default_value = "cure")]
    pub protocol: Protocol,
    /// Data centres.
    #[arg(long, default_value_t = 3)]
    pub dcs: u16,
    /// Nodes per DC: the DC's partitions are spread over them, sessions connect to any of them, and the nemesis
    /// kills, pauses and skews single nodes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub nodes_per_dc: u16,
    /// Copies of each partition inside a DC, on distinct nodes (at most --nodes-per-dc): with 3, each partition
    /// is a Raft group and a DC keeps committing while one of its nodes is killed, paused or cut off [default: 3
    /// with 3 or more nodes per DC, else 1].
    #[arg(long)]
    pub replicas: Option<u16>,
    /// Partitions per DC.
    #[arg(long, default_value_t = 4)]
    pub partitions: u32,
    /// One-way WAN delay between DCs, ms.
    #[arg(long, default_value_t = 20)]
    pub wan_delay_ms: u64,
    /// Jitter on the WAN delay, ms.
    #[arg(long, default_value_t = 10)]
    pub jitter_ms: u64,
    /// Sessions homed at each DC.
    #[arg(long, default_value_t = 3)]
    pub sessions_per_dc: u16,
    /// Probability that a session runs a transaction at another DC (carrying its clock).
    #[arg(long, default_value_t = 0.2)]
    pub move_probability: f64,
    /// Checked objects (of the --kinds in turn).
    #[arg(long, default_value_t = 24)]
    pub keys: u32,
    /// Kinds of the checked objects, comma-separated: sets (add-wins sets that only grow: every read shows
    /// every element, so data and history grow with the run), registers (LWW), counters. Without sets the data
    /// stays bounded, for soaks.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "sets,registers,counters")]
    pub kinds: Vec<CheckedKind>,
    /// Longest pause between a session's transactions, ms.
    #[arg(long, default_value_t = 40)]
    pub think_ms: u64,
    /// Fault kinds to inject: comma-separated kill, pause, cut, clock; or all, or none.
    #[arg(long, default_value = "all")]
    pub faults: String,
    /// Mean time between fault starts, ms.
    #[arg(long, default_value_t = 3000)]
    pub fault_interval_ms: u64,
    /// How often each node checkpoints its partitions (and, with replicas, compacts their logs, so that a node
    /// back from a kill may be caught up by a snapshot), seconds [default: the server's, 60].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub checkpoint_interval_s: Option<u64>,
    /// Bound on every client request, ms: a reply later than this counts as lost.
    #[arg(long, default_value_t = 5000)]
    pub request_timeout_ms: u64,
    /// After healing, how long the DCs may take to return identical final reads with every acknowledged write,
    /// seconds.
    #[arg(long, default_value_t = 60.0)]
    pub quiesce: f64,
    /// Where the cluster's configs, data and logs go [default: a fresh temporary directory, removed after a
    /// passing run].
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Write the history (with final reads, faults and the report; docs/history.md) here [default:
    /// DIR/history.json].
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// The `causet` binary the nodes run [default: this one].
    #[arg(long)]
    pub exe: Option<PathBuf>,
    /// Run no cluster: check the history file a previous run wrote (or any history in the documented format,
    /// with or without `final_reads`) and print the report.
    #[arg(long)]
    pub recheck: Option<PathBuf>,
    /// How often every node's resident memory, threads, open files and data directory size are sampled, seconds
    /// (reported per node, and plotted next to the history).
    #[arg(long, default_value_t = 5.0)]
    pub sample_interval_s: f64,
    /// A line added to every node's configuration (repeatable), e.g. `--node-config 'memtable_mb = 8'`.
    #[arg(long)]
    pub node_config: Vec<String>,
    /// Partial replication (docs/placement.md): rings of DCs, `/` between rings and `,` between a ring's DCs
    /// (`0,1/2`: DCs 0 and 1 form one ring, DC 2 another). Every other checked object then lives in a bucket
    /// placed by them, so sessions use objects their DC does not hold.
    #[arg(long)]
    pub rings: Option<String>,
}

/// The `[placement]` line that `--rings` stands for, checked against a cluster of `dcs` DCs.
fn rings_config(rings: &str, dcs: u16) -> anyhow::Result<String> {
    let parsed: Vec<Vec<u16>> = rings
        .split('/')
        .map(|ring| ring.split(',').map(|d| d.trim().parse::<u16>()).collect::<Result<Vec<_>, _>>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("--rings {rings:?}: DC numbers, `,` inside a ring and `/` between rings"))?;
    let bucket = causet_sim::workload::RINGS_BUCKET;
    causet_core::placement::Placement::of_indices(&parsed, [bucket.to_vec()])
        .validate(dcs)
        .map_err(|e| anyhow::anyhow!("--rings {rings:?}: {e}"))?;
    let rings: Vec<String> =
        parsed.iter().map(|r| format!("[{}]", r.iter().map(u16::to_string).collect::<Vec<_>>().join(", "))).collect();
    Ok(format!("placement = {{ rings = [{}], buckets = [\"{}\"] }}", rings.join(", "), String::from_utf8_lossy(bucket)))
}

impl CheckArgs {
    /// The defaults, as the command line gives them.
    pub fn defaults() -> CheckArgs {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Wrapper {
            #[command(flatten)]
            args: CheckArgs,
        }
        Wrapper::parse_from(["check"]).args
    }
}

/// Counts of one run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunStats {
    /// Workload transactions recorded (final reads excluded).
    pub transactions: usize,
    /// Of those: committed, aborted, unknown.
    pub committed: usize,
    /// Aborted (by the plan, the server, or a failure before the commit request).
    pub aborted: usize,
    /// Outcome unknown (the commit's reply was lost).
    pub unknown: usize,
    /// Checked writes in committed transactions.
    pub acknowledged_writes: usize,
    /// Static reads that failed (not recorded).
    pub failed_reads: u64,
    /// Connection attempts that failed.
    pub connect_failures: u64,
    /// Requests that timed out.
    pub timeouts: u64,
    /// Requests whose connection broke.
    pub connection_errors: u64,
    /// Requests answered with an error.
    pub server_errors: u64,
    /// Rounds of final reads until the DCs agreed (or the quiesce time ran out).
    pub final_rounds: usize,
    /// Seconds from the workload's start to the end of the final reads.
    pub elapsed_s: f64,
    /// Seconds from healing to agreeing final reads.
    pub quiesce_s: f64,
    /// With lease caches on the nodes: their reads served from the cache, missed and fetched again, summed over
    /// the nodes as they report after the final reads (since each node's last start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_reads: Option<[u64; 3]>,
    /// With buffered writes: transactions buffered, components handed over, and questions for a handover
    /// answered to sessions that moved, summed over the nodes as they report after the final reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffered: Option<[u64; 3]>,
    /// With rings (`--rings`): reads sent to another DC, of objects their DC does not hold, and those failed over
    /// to another ring's holder, summed over the nodes as they report after the final reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_reads: Option<[u64; 2]>,
    /// Server errors by kind: AntidoteDB's code name and the message's first clause.
    #[serde(default)]
    pub server_error_kinds: BTreeMap<String, u64>,
}

/// The file `causet check` writes: a [`History`] (the `txs` field) plus what the run did and found. Readers that
/// only want the history can parse it as one; unknown fields are ignored.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckFile {
    /// The transactions, final reads included, in start order.
    pub txs: Vec<TxRecord>,
    /// The final reads: one per DC, of the last round.
    pub final_reads: Vec<FinalRead>,
    /// The fault schedule as it ran (plus the final healing).
    pub faults: Vec<Applied>,
    /// The run's parameters.
    pub run: RunInfo,
    /// Counts.
    pub stats: RunStats,
    /// The TCC checker's report.
    pub report: Report,
    /// Lost acknowledged writes and divergence found by the final reads.
    pub final_problems: Vec<String>,
    /// Every node's resources, sampled over the run.
    #[serde(default)]
    pub resources: Vec<resources::Sample>,
}

/// The parameters of a run, to reproduce it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunInfo {
    /// The seed.
    pub seed: u64,
    /// The protocol.
    pub protocol: String,
    /// DCs.
    pub dcs: u16,
    /// Nodes per DC.
    #[serde(default = "one")]
    pub nodes_per_dc: u16,
    /// Partitions per DC.
    pub partitions: u32,
    /// Workload seconds.
    pub duration_s: f64,
    /// Fault kinds.
    pub faults: FaultKinds,
    /// The command that reruns it.
    pub command: String,
}

fn one() -> u16 {
    1
}

/// A finished check.
#[derive(Debug)]
pub struct CheckOutcome {
    /// Everything written to the history file.
    pub file: CheckFile,
    /// Where it was written.
    pub history_path: PathBuf,
    /// The plot of every node's resources over the run, if sampled.
    pub resources_plot: Option<PathBuf>,
}

impl CheckOutcome {
    /// Whether the history passed every check.
    pub fn passed(&self) -> bool {
        self.file.report.is_ok() && self.file.final_problems.is_empty()
    }

    /// The human report.
    pub fn render(&self) -> String {
        let f = &self.file;
        let s = &f.stats;
        let mut out = String::new();
        out.push_str(&format!(
            "causet check: seed {}, protocol {}, {} DCs × {} node{} × {} partitions, {:.0} s of workload\n",
            f.run.seed,
            f.run.protocol,
            f.run.dcs,
            f.run.nodes_per_dc,
            if f.run.nodes_per_dc == 1 { "" } else { "s" },
            f.run.partitions,
            f.run.duration_s
        ));
        out.push_str(&format!(
            "operations: {} transactions ({} committed, {} aborted, {} unknown outcome), {} acknowledged writes; \
             {} failed static reads, {} timeouts, {} broken connections, {} server errors, {} failed connects\n",
            s.transactions,
            s.committed,
            s.aborted,
            s.unknown,
            s.acknowledged_writes,
            s.failed_reads,
            s.timeouts,
            s.connection_errors,
            s.server_errors,
            s.connect_failures
        ));
        let mut by_kind: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
        for a in &f.faults {
            let entry = by_kind.entry(a.step.fault.kind()).or_default();
            entry.0 += 1;
            if !a.error.is_empty() {
                entry.1 += 1;
            }
        }
        let faults: Vec<String> = by_kind
            .iter()
            .map(
                |(k, (n, failed))| {
                    if *failed > 0 {
                        format!("{k} {n} ({failed} partly failed)")
                    } else {
                        format!("{k} {n}")
                    }
                },
            )
            .collect();
        out.push_str(&format!("faults (final healing included): {}\n", faults.join(", ")));
        let agreed = if f.final_problems.is_empty() { "to agreement" } else { "without agreement" };
        out.push_str(&format!(
            "final reads: {} round(s), {:.1} s from healing {agreed}\n",
            s.final_rounds, s.quiesce_s
        ));
        if !s.server_error_kinds.is_empty() {
            let mut kinds: Vec<(&String, &u64)> = s.server_error_kinds.iter().collect();
            kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            let shown: Vec<String> = kinds.iter().take(8).map(|(k, n)| format!("{n} {k}")).collect();
            let rest: u64 = kinds.iter().skip(8).map(|(_, n)| **n).sum();
            let more = if rest > 0 { format!(", {rest} of {} other kinds", kinds.len() - 8) } else { String::new() };
            out.push_str(&format!("server errors by kind: {}{more}\n", shown.join(", ")));
        }
        if let Some([hits, misses, refetches]) = s.cache_reads {
            out.push_str(&format!(
                "lease caches: {hits} reads served from a cache, {misses} missed, {refetches} fetched again \
                 (since each node's last start)\n"
            ));
        }
        if let Some([remote, failed_over]) = s.remote_reads {
            out.push_str(&format!(
                "remote reads: {remote} reads of objects held elsewhere sent to another DC, {failed_over} asked of \
                 another ring's holder too (since each node's last start)\n"
            ));
        }
        if let Some([buffered, handovers, questions]) = s.buffered {
            out.push_str(&format!(
                "write buffers: {buffered} transactions buffered, {handovers} handovers, {questions} handovers asked \
                 for by sessions that moved (since each node's last start)\n"
            ));
        }
        out.push_str(&f.report.to_string());
        if f.final_problems.is_empty() {
            out.push_str("final reads: every acknowledged write is at every DC and every DC returns the same values\n");
        } else {
            out.push_str(&format!("final reads: {} problems\n", f.final_problems.len()));
            for p in f.final_problems.iter().take(20) {
                out.push_str(&format!("  {p}\n"));
            }
        }
        if !f.resources.is_empty() {
            // The first sample after a warm-up (a tenth of the run, at most a minute): the start-up allocations
            // are not growth.
            let warm_s = (f.run.duration_s / 10.0).min(60.0);
            out.push_str(&format!("resources per node (first sample after {warm_s:.0} s → max → last):\n"));
            out.push_str(&resources::table(&f.resources, warm_s));
            if let Some(plot) = &self.resources_plot {
                out.push_str(&format!("resources over time: {}\n", plot.display()));
            }
        }
        out.push_str(&format!("history: {}\n", self.history_path.display()));
        out.push_str(if self.passed() { "PASSED\n" } else { "FAILED\n" });
        if !self.passed() {
            out.push_str(&format!("reproduce the schedule with: {}\n", f.run.command));
        }
        out
    }
}

/// Stops the cluster however the run ends.
struct Running(Option<ClusterFile>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(file) = self.0.take() {
            cluster::stop_nodes(&file, false);
        }
    }
}

/// Starts the cluster, up to three times: free ports are chosen before the nodes bind them, so another process
/// can take one in between, and the node then exits at start. A failed attempt's nodes are stopped (the cluster
/// file is written before the nodes are awaited).
fn start_cluster(options: &StartOptions, progress: &mut dyn FnMut(&str)) -> anyhow::Result<ClusterFile> {
    let mut attempt = 1;
    loop {
        match cluster::start(options) {
            Ok(file) => return Ok(file),
            Err(e) => {
                if let Ok(file) = cluster::load(&options.dir) {
                    cluster::stop_nodes(&file, false);
                }
                if attempt == 3 {
                    return Err(e.context("starting the cluster (3 attempts)"));
                }
                progress(&format!("starting the cluster failed ({e:#}); trying again"));
                attempt += 1;
            }
        }
    }
}

/// Runs a check. `progress` receives one line per phase and per fault.
pub fn run(args: &CheckArgs, progress: &mut dyn FnMut(&str)) -> anyhow::Result<CheckOutcome> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
            % 1_000_000_007
    });
    let kinds = FaultKinds::parse(&args.faults).map_err(anyhow::Error::msg)?;
    let replicas = args.replicas.unwrap_or(crate::cluster::default_replicas(args.nodes_per_dc));
    anyhow::ensure!(args.duration > 0.0, "--duration must be positive");
    anyhow::ensure!(args.sessions_per_dc > 0, "--sessions-per-dc must be at least 1");
    anyhow::ensure!(args.keys >= 3, "--keys must be at least 3");
    anyhow::ensure!(!args.kinds.is_empty(), "--kinds needs at least one kind");
    anyhow::ensure!((0.0..=1.0).contains(&args.move_probability), "--move-probability is a probability");
    let mut command = format!(
        "causet check --seed {seed} --protocol {} --duration {} --dcs {} --nodes-per-dc {} --replicas {} \
         --partitions {} --faults {} --fault-interval-ms {} --sessions-per-dc {} --keys {}",
        args.protocol,
        args.duration,
        args.dcs,
        args.nodes_per_dc,
        replicas,
        args.partitions,
        args.faults,
        args.fault_interval_ms,
        args.sessions_per_dc,
        args.keys
    );
    command.push_str(&format!(
        " --think-ms {} --move-probability {} --wan-delay-ms {} --jitter-ms {}",
        args.think_ms, args.move_probability, args.wan_delay_ms, args.jitter_ms
    ));
    let object_kinds: Vec<&str> = args.kinds.iter().map(|k| k.name()).collect();
    command.push_str(&format!(" --kinds {}", object_kinds.join(",")));
    if let Some(s) = args.checkpoint_interval_s {
        command.push_str(&format!(" --checkpoint-interval-s {s}"));
    }
    for line in &args.node_config {
        command.push_str(&format!(" --node-config '{line}'"));
    }
    let placement = args.rings.as_deref().map(|r| rings_config(r, args.dcs)).transpose()?;
    if let Some(rings) = &args.rings {
        command.push_str(&format!(" --rings {rings}"));
    }
    progress(&format!("seed {seed} (rerun: {command})"));
    let (dir, temporary) = match &args.dir {
        Some(dir) => (dir.clone(), None),
        None => {
            let t = std::env::temp_dir().join(format!("causet-check-{}-{seed}", std::process::id()));
            (t.clone(), Some(t))
        }
    };
    let options = StartOptions {
        dcs: args.dcs,
        nodes_per_dc: args.nodes_per_dc,
        replicas,
        partitions: args.partitions,
        wan_delay_ms: args.wan_delay_ms,
        jitter_ms: args.jitter_ms,
        dir: dir.clone(),
        base_port: 0,
        protocol: args.protocol,
        exe: args.exe.clone(),
        extra_config: args.checkpoint_interval_s.map(|s| format!("checkpoint_interval_s = {s}\n")).unwrap_or_default()
            + &args.node_config.iter().chain(&placement).map(|line| format!("{line}\n")).collect::<String>(),
        ..Default::default()
    };
    let mut file = start_cluster(&options, progress)?;
    let mut running = Running(Some(file.clone()));
    progress(&format!("cluster of {} nodes running in {}", file.nodes.len(), dir.display()));

    let duration_ms = (args.duration * 1000.0) as u64;
    let shape = ScheduleShape {
        node_dcs: file.nodes.iter().map(|n| n.dc).collect(),
        dcs: file.dcs,
        duration_ms,
        interval_ms: args.fault_interval_ms,
        kinds,
        replicated: replicas >= 3,
    };
    let steps = nemesis::schedule(seed, &shape);
    progress(&format!("{} fault steps scheduled", steps.len()));

    let workload = WorkloadConfig {
        keys: args.keys,
        extra_keys: 0,
        kinds: args.kinds.iter().map(|k| k.kind()).collect(),
        rings_bucket: args.rings.is_some(),
        ..Default::default()
    };
    let dc_clients: Vec<_> = (0..file.dcs).map(|dc| file.dc_clients(dc)).collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the client runtime")?;
    let epoch = Instant::now();
    let sampler =
        resources::Sampler::start(dir.clone(), Duration::from_secs_f64(args.sample_interval_s.max(0.1)), epoch);
    let stop_at = epoch + Duration::from_millis(duration_ms);
    let stats = Arc::new(RequestStats::default());
    let request_timeout = Duration::from_millis(args.request_timeout_ms);
    let mut handles = Vec::new();
    for dc in 0..file.dcs {
        for k in 0..args.sessions_per_dc {
            let id = u64::from(dc) * u64::from(args.sessions_per_dc) + u64::from(k);
            let config = SessionConfig {
                id,
                home: dc,
                dc_clients: dc_clients.clone(),
                move_probability: args.move_probability,
                workload: workload.clone(),
                seed: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(id),
                think_ms: args.think_ms,
                request_timeout,
                stop_at,
                epoch,
            };
            handles.push(runtime.spawn(session::run(config, stats.clone())));
        }
    }

    // The nemesis runs on this thread: its actions block (kill waits for the process to go, restart until the
    // node serves).
    let mut applied = Vec::new();
    {
        let mut nemesis = Nemesis::new(&mut file, &dir);
        for step in steps {
            let at = epoch + Duration::from_millis(step.at_ms);
            if let Some(wait) = at.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let ran_at_ms = epoch.elapsed().as_millis() as u64;
            let error = nemesis.apply(&step.fault).err().unwrap_or_default();
            progress(&format!(
                "{:>7.1} s  {:?}{}",
                ran_at_ms as f64 / 1000.0,
                step.fault,
                if error.is_empty() { String::new() } else { format!(" (error: {error})") }
            ));
            applied.push(Applied { step, ran_at_ms, error });
            running.0 = Some(nemesis.file().clone());
        }
        if let Some(wait) = stop_at.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        // Sessions finish their current transaction (each call is bounded), then stop.
        let results: Vec<_> = runtime.block_on(async {
            let mut results = Vec::new();
            for h in handles {
                results.push(h.await);
            }
            results
        });
        progress("workload done; healing every fault");
        let heal_start_ms = epoch.elapsed().as_millis() as u64;
        for (fault, result) in nemesis.heal_all() {
            let error = result.err().unwrap_or_default();
            if !error.is_empty() {
                progress(&format!("healing {fault:?} failed: {error}"));
            }
            applied.push(Applied { step: Step { at_ms: heal_start_ms, fault }, ran_at_ms: heal_start_ms, error });
        }
        running.0 = Some(nemesis.file().clone());
        let healed_at = Instant::now();

        let mut records = Vec::new();
        let mut clock: Option<VectorClock> = None;
        for r in results {
            let r = r.context("a session task panicked")?;
            records.extend(r.records);
            if let Some(c) = r.clock {
                match &mut clock {
                    Some(own) if own.len() == c.len() => own.merge_max(&c),
                    _ => clock = Some(c),
                }
            }
        }
        let workload_records = records.len();

        // Final reads: every DC, a clock covering every session's, until the DCs agree and hold every
        // acknowledged write, or the quiesce time runs out. Every round stays in the history: each is a committed
        // read the TCC checker checks too.
        let objects: Vec<Planned> = Workload::new(workload.clone())
            .checked_objects()
            .into_iter()
            .map(|(object, name)| Planned { object, name: Some(name), op: None, write: None })
            .collect();
        let quiesce_until = healed_at + Duration::from_secs_f64(args.quiesce);
        let mut final_reads;
        let mut final_problems;
        let mut rounds = 0;
        let mut readers: Vec<Option<Client>> = (0..file.dcs).map(|_| None).collect();
        loop {
            rounds += 1;
            final_reads = Vec::new();
            final_problems = Vec::new();
            for dc in 0..file.dcs {
                let start_us = epoch.elapsed().as_micros() as u64;
                let read = runtime.block_on(final_read(
                    &mut readers[dc as usize],
                    &dc_clients[dc as usize],
                    clock.as_ref(),
                    &objects,
                    request_timeout.max(Duration::from_secs(10)),
                ));
                match read {
                    Ok(values) => {
                        let mut record = TxRecord {
                            index: 0,
                            session: FINAL_READER_SESSION + u64::from(dc),
                            dc,
                            start_us,
                            end_us: epoch.elapsed().as_micros() as u64,
                            ops: Vec::new(),
                            outcome: Outcome::Committed,
                        };
                        session::record_reads(&mut record, &objects, &values);
                        final_reads.push((dc, records.len()));
                        records.push(record);
                    }
                    Err(e) => {
                        readers[dc as usize] = None;
                        final_problems.push(format!("DC {dc}: the final read failed: {e}"));
                    }
                }
            }
            if final_problems.is_empty() {
                let history = History { txs: std::mem::take(&mut records) };
                let reads: Vec<FinalRead> = final_reads.iter().map(|&(dc, tx)| FinalRead { dc, tx }).collect();
                final_problems = final_read_problems(&history, &reads);
                records = history.txs;
            }
            if final_problems.is_empty() || Instant::now() >= quiesce_until {
                break;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let quiesce_s = healed_at.elapsed().as_secs_f64();
        progress(&format!("final reads: {rounds} round(s) in {quiesce_s:.1} s"));

        // Order by start time (a session's order), then number.
        records.sort_by_key(|r| (r.start_us, r.session));
        for (index, r) in records.iter_mut().enumerate() {
            r.index = index;
        }
        // Map the last round's reads to their new indexes.
        let mut last_round = Vec::new();
        for (dc, _) in &final_reads {
            let index = records
                .iter()
                .rev()
                .find(|r| r.session == FINAL_READER_SESSION + u64::from(*dc))
                .map(|r| r.index)
                .context("the final read was recorded")?;
            last_round.push(FinalRead { dc: *dc, tx: index });
        }
        let history = History { txs: records };
        progress("checking the history");
        let report = checker::check(&history);
        let workload_txs = || history.txs.iter().filter(|t| t.session < FINAL_READER_SESSION);
        let acknowledged_writes = workload_txs()
            .filter(|t| t.outcome == Outcome::Committed)
            .map(|t| t.ops.iter().filter(|op| matches!(op, causet_sim::history::HistOp::Write { .. })).count())
            .sum();
        let run_stats = RunStats {
            transactions: workload_records,
            committed: workload_txs().filter(|t| t.outcome == Outcome::Committed).count(),
            aborted: workload_txs().filter(|t| t.outcome == Outcome::Aborted).count(),
            unknown: workload_txs().filter(|t| t.outcome == Outcome::Unknown).count(),
            acknowledged_writes,
            failed_reads: stats.failed_reads.load(Ordering::Relaxed),
            connect_failures: stats.connect_failures.load(Ordering::Relaxed),
            timeouts: stats.timeouts.load(Ordering::Relaxed),
            connection_errors: stats.connection_errors.load(Ordering::Relaxed),
            server_errors: stats.server_errors.load(Ordering::Relaxed),
            final_rounds: rounds,
            elapsed_s: epoch.elapsed().as_secs_f64(),
            quiesce_s,
            cache_reads: cache_reads(running.0.as_ref()),
            buffered: node_totals(
                running.0.as_ref(),
                &["causet_buffered_transactions_total", "causet_handovers_total", "causet_handover_questions_total"],
            )
            .filter(|[buffered, ..]| *buffered > 0),
            remote_reads: node_totals(
                running.0.as_ref(),
                &["causet_remote_reads_total{outcome=\"sent\"}", "causet_remote_reads_total{outcome=\"failed_over\"}"],
            ),
            server_error_kinds: stats.server_error_kinds.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        };
        let resources = sampler.finish();
        let check_file = CheckFile {
            txs: history.txs,
            final_reads: last_round,
            faults: applied,
            run: RunInfo {
                seed,
                protocol: args.protocol.to_string(),
                dcs: args.dcs,
                nodes_per_dc: args.nodes_per_dc,
                partitions: args.partitions,
                duration_s: args.duration,
                faults: kinds,
                command,
            },
            stats: run_stats,
            report,
            final_problems,
            resources,
        };
        drop(running);
        let history_path = args.history.clone().unwrap_or_else(|| dir.join("history.json"));
        if let Some(parent) = history_path.parent() {
            std::fs::create_dir_all(parent).ok();
        }
        let out = std::io::BufWriter::new(
            std::fs::File::create(&history_path).with_context(|| format!("writing {}", history_path.display()))?,
        );
        serde_json::to_writer(out, &check_file).context("writing the history")?;
        let resources_plot = (!check_file.resources.is_empty()).then(|| {
            let stem = history_path.file_stem().map_or("history".into(), |s| s.to_string_lossy().into_owned());
            history_path.with_file_name(format!("{stem}-resources.svg"))
        });
        if let Some(plot) = &resources_plot {
            resources::plot(&check_file.resources, plot)?;
        }
        let outcome = CheckOutcome { file: check_file, history_path, resources_plot };
        // A passing run's cluster directory is not worth keeping; the history is kept if it was asked for
        // elsewhere.
        if let (Some(t), true) = (temporary, outcome.passed()) {
            if args.history.is_some() {
                std::fs::remove_dir_all(&t).ok();
            }
        }
        Ok(outcome)
    }
}

/// A history file as `recheck` reads it: everything but `txs` is optional, so a bare [`History`] works too.
#[derive(Deserialize)]
struct AnyHistory {
    txs: Vec<TxRecord>,
    #[serde(default)]
    final_reads: Vec<FinalRead>,
    #[serde(default)]
    faults: Vec<Applied>,
    run: Option<RunInfo>,
    #[serde(default)]
    stats: RunStats,
    #[serde(default)]
    resources: Vec<resources::Sample>,
}

/// Checks a history file again (TCC, and the final reads if it has them) without running anything.
pub fn recheck(path: &std::path::Path) -> anyhow::Result<CheckOutcome> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let any: AnyHistory = serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let history = History { txs: any.txs };
    let report = checker::check(&history);
    let final_problems = final_read_problems(&history, &any.final_reads);
    let run = any.run.unwrap_or(RunInfo {
        seed: 0,
        protocol: "unknown".into(),
        dcs: 0,
        nodes_per_dc: 0,
        partitions: 0,
        duration_s: 0.0,
        faults: FaultKinds::NONE,
        command: format!("causet check --recheck {}", path.display()),
    });
    let file = CheckFile {
        txs: history.txs,
        final_reads: any.final_reads,
        faults: any.faults,
        run,
        stats: any.stats,
        report,
        final_problems,
        resources: any.resources,
    };
    Ok(CheckOutcome { file, history_path: path.to_path_buf(), resources_plot: None })
}

/// The lease caches' reads over every node (hit, miss, refetch), from `/metrics`; `None` if no node caches.
fn cache_reads(file: Option<&ClusterFile>) -> Option<[u64; 3]> {
    let names = ["hit", "miss", "refetch"].map(|outcome| format!("causet_cache_reads_total{{outcome=\"{outcome}\"}}"));
    node_totals(file, &names.each_ref().map(String::as_str))
}

/// The sums over every node of `/metrics` samples named exactly `names`; `None` if no node reports any.
fn node_totals<const N: usize>(file: Option<&ClusterFile>, names: &[&str; N]) -> Option<[u64; N]> {
    let mut total = [0u64; N];
    let mut any = false;
    for node in file.map(|f| &f.nodes[..]).unwrap_or_default() {
        let Ok(text) = crate::cluster::http_get(node.admin, "/metrics") else { continue };
        for (i, name) in names.iter().enumerate() {
            let sample = |l: &str| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<f64>().ok();
            if let Some(v) = text.lines().find_map(sample) {
                total[i] += v as u64;
                any = true;
            }
        }
    }
    any.then_some(total)
}

/// One final read of every checked object at a DC, with `clock`.
async fn final_read(
    reader: &mut Option<Client>,
    addrs: &[std::net::SocketAddr],
    clock: Option<&VectorClock>,
    objects: &[Planned],
    limit: Duration,
) -> anyhow::Result<Vec<causet_client::Value>> {
    if reader.is_none() {
        let client = tokio::time::timeout(limit, Client::connect(addrs[0])).await.context("connect timed out")??;
        *reader = Some(client);
    }
    let Some(client) = reader.as_mut() else { anyhow::bail!("no connection") };
    if let Some(c) = clock {
        client.observe_clock(c);
    }
    let ids: Vec<_> = objects.iter().map(|p| p.object.clone()).collect();
    let (values, _) = tokio::time::timeout(limit, client.static_read(None, &ids)).await.context("timed out")??;
    Ok(values)
}

/// The `causet check` command: runs, prints the report, and returns the process's exit code (0 passed, 1 an
/// anomaly or a final-read problem was found).
pub fn main(args: CheckArgs) -> anyhow::Result<i32> {
    if let Some(path) = &args.recheck {
        let outcome = recheck(path)?;
        print!("{}", outcome.render());
        return Ok(if outcome.passed() { 0 } else { 1 });
    }
    let outcome = run(&args, &mut |line| println!("{line}"))?;
    print!("{}", outcome.render());
    Ok(if outcome.passed() { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::rings_config;

    #[test]
    fn rings_become_the_placement_line_or_a_clear_error() {
        assert_eq!(
            rings_config("0,1/2", 3).expect("valid"),
            "placement = { rings = [[0, 1], [2]], buckets = [\"simr\"] }"
        );
        assert!(rings_config("0,1", 3).unwrap_err().to_string().contains("DC 2 is in no ring"));
        assert!(rings_config("0;1/2", 3).unwrap_err().to_string().contains("DC numbers"));
    }
}
