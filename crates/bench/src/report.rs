//! The report of a `causet bench` invocation: every figure, the histograms, the machine, the cluster shape and
//! every parameter, as JSON and as Markdown; the checks against Causet's performance targets, from the figures.

use crate::histogram::HistogramSummary;
use crate::keys::Distribution;
use crate::runner::RunResult;
use crate::workload::{Point, WorkloadFile};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The machine the run used.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    /// Cores available to this process.
    pub cores: usize,
    /// Physical memory, bytes (0 if unknown).
    pub memory_bytes: u64,
    /// The CPU model (empty if unknown).
    pub cpu: String,
    /// The operating system and kernel.
    pub os: String,
}

impl Machine {
    /// Describes this machine.
    pub fn detect() -> Machine {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
            .unwrap_or(0);
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let os = format!("{} {}", std::env::consts::OS, kernel.trim()).trim().to_string();
        Machine { cores, memory_bytes, cpu, os }
    }
}

/// The cluster the runs drove.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterShape {
    /// `local` (started by the tool, one per protocol) or `existing`.
    pub kind: String,
    /// DCs.
    pub dcs: usize,
    /// Nodes per DC.
    pub nodes_per_dc: usize,
    /// Partitions per DC.
    pub partitions: u32,
    /// One-way delay between DCs, ms, when known and the same for every pair.
    pub wan_delay_ms: Option<u64>,
    /// The WAN matrix that gave each pair of DCs its own delay, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wan_matrix: Option<String>,
    /// The fsync policy, when known.
    pub sync: Option<String>,
    /// The client addresses per DC (of the last cluster, for a local one).
    pub addresses: Vec<Vec<String>>,
}

/// One run against the first protocol's run at the same point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Comparison {
    /// The protocol compared.
    pub protocol: String,
    /// The baseline protocol (the first of `--compare`).
    pub baseline: String,
    /// The point.
    pub point: Point,
    /// The repetition both runs belong to.
    #[serde(default)]
    pub repeat: u32,
    /// Throughput ÷ the baseline's.
    pub throughput_ratio: f64,
    /// Median latency ÷ the baseline's.
    pub p50_ratio: f64,
    /// 99th percentile latency ÷ the baseline's.
    pub p99_ratio: f64,
}

/// A performance target of the project checked against the measured figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetCheck {
    /// What is checked.
    pub target: String,
    /// The measured figure.
    pub measured: f64,
    /// The bound.
    pub bound: f64,
    /// Whether the figure is within the bound.
    pub met: bool,
}

/// Everything one invocation measured.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// `causet bench` and its version.
    pub tool: String,
    /// The command line.
    pub command: Vec<String>,
    /// When it started, seconds since the Unix epoch.
    pub started_unix_s: u64,
    /// The machine.
    pub machine: Machine,
    /// The cluster.
    pub cluster: ClusterShape,
    /// The workload as run (after command-line overrides).
    pub workload: WorkloadFile,
    /// The key distribution.
    pub distribution: Distribution,
    /// The protocols, in order (the first is the baseline of the ratios).
    pub protocols: Vec<String>,
    /// Every run.
    pub runs: Vec<RunResult>,
    /// Ratios to the first protocol.
    pub comparisons: Vec<Comparison>,
    /// The project's performance targets, where the runs measure them.
    pub targets: Vec<TargetCheck>,
}

/// The median of some figures (the mean of the middle two for an even count); NaN for none.
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::NAN
    }
}

impl Report {
    /// How many times the comparison was repeated (`--repeat`).
    pub fn repeats(&self) -> u32 {
        self.runs.iter().map(|r| r.repeat + 1).max().unwrap_or(1)
    }

    /// A run's protocol, with its repetition when there are several.
    pub fn label(&self, run: &RunResult) -> String {
        match self.repeats() {
            1 => run.protocol.clone(),
            _ => format!("{} #{}", run.protocol, run.repeat + 1),
        }
    }

    /// Each DC's sessions' throughput in the measured window.
    fn write_throughput_by_dc(&self, md: &mut String) {
        let _ = writeln!(md, "\n### Throughput by DC\n");
        let _ = writeln!(
            md,
            "Transactions per second committed by the sessions of each DC (the DC a session started at). In a closed \
             loop a DC whose sessions never wait for another DC can commit most of the total.\n"
        );
        let dcs = self.runs.iter().map(|r| r.committed_by_dc.len()).max().unwrap_or(0);
        let header: Vec<String> = (0..dcs).map(|d| format!("DC {d}")).collect();
        let _ = writeln!(md, "| protocol | updates | keys | {} |", header.join(" | "));
        let _ = writeln!(md, "|---|---:|---:|{}", "---:|".repeat(dcs));
        for r in self.runs.iter().filter(|r| r.committed_by_dc.len() > 1) {
            let per_dc: Vec<String> =
                (r.committed_by_dc.iter()).map(|&n| format!("{:.0}", n as f64 / r.measured_s.max(1e-9))).collect();
            let (label, updates, keys) = (self.label(r), r.point.update_ratio * 100.0, r.point.keys);
            let _ = writeln!(md, "| {label} | {updates:.0}% | {keys} | {} |", per_dc.join(" | "));
        }
    }

    /// The causal middleware's store requests per committed transaction in the measured window, in all and by kind
    /// (Cassandra alone makes one per transaction of a single-key workload).
    fn write_store_requests(&self, md: &mut String) {
        let _ = writeln!(md, "\n### The causal middleware's store requests\n");
        let _ = writeln!(
            md,
            "Requests the proxies made of their stores in the measured window (on Cassandra, one statement each), \
             summed over every proxy's `causet_middleware_store_requests_total`, per committed transaction; \
             background work (feeds, frontiers, leases) included.\n"
        );
        let _ = writeln!(md, "| protocol | updates | keys | requests | per transaction | per transaction, by kind |");
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---|");
        for r in self.runs.iter().filter(|r| !r.store_requests.is_empty()) {
            let per = |n: u64| n as f64 / r.committed.max(1) as f64;
            let total: u64 = r.store_requests.values().sum();
            let kinds: Vec<String> = (r.store_requests.iter())
                .filter(|(_, n)| **n > 0)
                .map(|(kind, n)| format!("{kind} {:.3}", per(*n)))
                .collect();
            let _ = writeln!(
                md,
                "| {} | {:.0}% | {} | {total} | {:.3} | {} |",
                self.label(r),
                r.point.update_ratio * 100.0,
                r.point.keys,
                per(total),
                kinds.join(", ")
            );
        }
    }

    /// Per protocol and point, over the repetitions: the median, least and greatest throughput, and the median of
    /// the per-repetition ratios to the first protocol.
    fn write_medians(&self, md: &mut String) {
        let baseline = self.protocols.first().map(String::as_str).unwrap_or("first");
        let _ = writeln!(md, "\n### Over {} repetitions\n", self.repeats());
        let _ = writeln!(
            md,
            "Each repetition ran every protocol in turn on a fresh cluster; ratios are taken within a repetition, \
             then their median.\n"
        );
        let _ = writeln!(
            md,
            "| protocol | updates | keys | runs | median txn/s | least | greatest | median ratio to {baseline} |"
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
        let mut seen: Vec<(&str, Point)> = Vec::new();
        for r in &self.runs {
            if seen.contains(&(r.protocol.as_str(), r.point)) {
                continue;
            }
            seen.push((r.protocol.as_str(), r.point));
            let same: Vec<&RunResult> =
                self.runs.iter().filter(|o| o.protocol == r.protocol && o.point == r.point).collect();
            let txn: Vec<f64> = same.iter().map(|o| o.throughput_per_s).collect();
            let ratios: Vec<f64> = self
                .comparisons
                .iter()
                .filter(|c| c.protocol == r.protocol && c.point == r.point)
                .map(|c| c.throughput_ratio)
                .collect();
            let _ = writeln!(
                md,
                "| {} | {:.0}% | {} | {} | {:.0} | {:.0} | {:.0} | {} |",
                r.protocol,
                r.point.update_ratio * 100.0,
                r.point.keys,
                same.len(),
                median(&txn),
                txn.iter().copied().fold(f64::INFINITY, f64::min),
                txn.iter().copied().fold(0.0, f64::max),
                if ratios.is_empty() { "1".to_string() } else { format!("{:.3}", median(&ratios)) }
            );
        }
    }

    /// `protocol`'s run at the same point in the same repetition as `run`.
    fn same_run(&self, protocol: &str, run: &RunResult) -> Option<&RunResult> {
        self.runs.iter().find(|r| r.protocol == protocol && r.point == run.point && r.repeat == run.repeat)
    }

    /// Fills `comparisons` and `targets` from the runs.
    pub fn derive(&mut self) {
        self.comparisons.clear();
        self.targets.clear();
        if let Some(baseline) = self.protocols.first().cloned() {
            for run in self.runs.iter().filter(|r| r.protocol != baseline) {
                if let Some(base) = self.same_run(&baseline, run) {
                    self.comparisons.push(Comparison {
                        protocol: run.protocol.clone(),
                        baseline: baseline.clone(),
                        point: run.point,
                        repeat: run.repeat,
                        throughput_ratio: ratio(run.throughput_per_s, base.throughput_per_s),
                        p50_ratio: ratio(run.latency.p50_us as f64, base.latency.p50_us as f64),
                        p99_ratio: ratio(run.latency.p99_us as f64, base.latency.p99_us as f64),
                    });
                }
            }
        }
        // Cure at least 0.9× eventual throughput on every mix, same run; with repetitions, the median of the
        // per-repetition ratios.
        let mut points: Vec<Point> = Vec::new();
        for cure in self.runs.iter().filter(|r| r.protocol == "cure") {
            if !points.contains(&cure.point) {
                points.push(cure.point);
            }
        }
        for point in points {
            let ratios: Vec<f64> = self
                .runs
                .iter()
                .filter(|r| r.protocol == "cure" && r.point == point)
                .filter_map(|cure| {
                    self.same_run("eventual", cure).map(|ev| ratio(cure.throughput_per_s, ev.throughput_per_s))
                })
                .collect();
            if ratios.is_empty() {
                continue;
            }
            let measured = median(&ratios);
            let runs = match ratios.len() {
                1 => String::new(),
                n => format!(
                    " (median of {n} runs: {})",
                    ratios.iter().map(|r| format!("{r:.2}")).collect::<Vec<_>>().join(", ")
                ),
            };
            self.targets.push(TargetCheck {
                target: format!(
                    "cure ÷ eventual throughput, {:.0}% updates, {} keys{runs}",
                    point.update_ratio * 100.0,
                    point.keys
                ),
                measured,
                bound: 0.9,
                met: measured >= 0.9,
            });
        }
        // Remote visibility at 50 ms one-way: p50 ≤ 65 ms, p99 ≤ 80 ms.
        if self.cluster.wan_delay_ms == Some(50) {
            for run in &self.runs {
                let Some(v) = &run.visibility else { continue };
                if v.client.count == 0 {
                    continue;
                }
                let what = format!("{} at {:.0}% updates", self.label(run), run.point.update_ratio * 100.0);
                for (name, value, bound) in [("p50", v.client.p50_us, 65.0), ("p99", v.client.p99_us, 80.0)] {
                    let measured = value as f64 / 1000.0;
                    self.targets.push(TargetCheck {
                        target: format!("remote visibility {name} (client side, ms), {what}"),
                        measured,
                        bound,
                        met: measured <= bound,
                    });
                }
            }
        }
    }

    /// The JSON form (compact: the histograms make it long).
    pub fn to_json(&self) -> String {
        // Every field is plain data; serialisation to a String cannot fail except on NaN-free floats, which
        // serde_json writes as null.
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The Markdown form.
    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
        let w = &self.workload;
        let _ = writeln!(md, "# causet bench: {}\n", w.name);
        if !w.description.is_empty() {
            let _ = writeln!(md, "{}\n", w.description);
        }
        let _ = writeln!(md, "Command: `{}`\n", self.command.join(" "));
        let m = &self.machine;
        let _ = writeln!(
            md,
            "Machine: {} cores ({}), {:.1} GiB, {}. The load generator and every node of the cluster share these \
             cores.\n",
            m.cores,
            if m.cpu.is_empty() { "CPU unknown" } else { &m.cpu },
            m.memory_bytes as f64 / (1u64 << 30) as f64,
            m.os
        );
        let c = &self.cluster;
        let _ = writeln!(
            md,
            "Cluster: {} ({}), {} DC{} × {} node{}, {} partitions per DC, {} one-way between DCs, sync {}.\n",
            c.kind,
            if c.kind == "local" { "a fresh one per protocol, same seed" } else { "driven as found" },
            c.dcs,
            if c.dcs == 1 { "" } else { "s" },
            c.nodes_per_dc,
            if c.nodes_per_dc == 1 { "" } else { "s" },
            c.partitions,
            match (&c.wan_matrix, c.wan_delay_ms) {
                (Some(m), _) => format!("per-pair delays (WAN matrix {m})"),
                (None, Some(d)) => format!("{d} ms"),
                (None, None) => "unknown".into(),
            },
            c.sync.as_deref().unwrap_or("unknown")
        );
        let _ = writeln!(
            md,
            "Workload: {} key distribution, {}-byte keys, {}-byte values, {:?}; mix single {} / interactive {}{} / \
             static {} / read-only {} ({} keys per multi-key transaction); {} sessions per DC, {}; {} s measured \
             after {} s warm-up; seed {}.\n",
            self.distribution,
            w.keys.key_bytes,
            w.values.bytes,
            w.values.crdt,
            w.mix.single,
            w.mix.interactive,
            if w.mix.batched { " (reads and updates batched)" } else { "" },
            w.mix.static_,
            w.mix.read_only,
            w.mix.keys_per_transaction,
            w.clients.sessions_per_dc,
            if w.clients.rate > 0.0 { format!("open loop at {} txn/s", w.clients.rate) } else { "closed loop".into() },
            w.run.duration_s,
            w.run.warmup_s,
            w.run.seed
        );
        let _ = writeln!(md, "## Throughput and latency\n");
        let _ = writeln!(
            md,
            "| protocol | updates | keys | txn/s | txn/s per core | ops/s | ratio to {} | p50 ms | p99 ms | p99.9 ms | \
             aborts | errors |",
            self.protocols.first().map(String::as_str).unwrap_or("first")
        );
        let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &self.runs {
            let cmp = self
                .comparisons
                .iter()
                .find(|c| c.protocol == r.protocol && c.point == r.point && c.repeat == r.repeat)
                .map(|c| format!("{:.3}", c.throughput_ratio))
                .unwrap_or_else(|| "1".into());
            let _ = writeln!(
                md,
                "| {} | {:.0}% | {} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} |",
                self.label(r),
                r.point.update_ratio * 100.0,
                r.point.keys,
                r.throughput_per_s,
                r.throughput_per_s / m.cores.max(1) as f64,
                r.operations_per_s,
                cmp,
                ms(r.latency.p50_us),
                ms(r.latency.p99_us),
                ms(r.latency.p999_us),
                r.aborted,
                r.errors
            );
        }
        if self.repeats() > 1 {
            self.write_medians(&mut md);
        }
        let _ = writeln!(md, "\n### Latency by kind of transaction\n");
        let _ = writeln!(md, "| protocol | updates | keys | kind | count | p50 ms | p99 ms | max ms |");
        let _ = writeln!(md, "|---|---:|---:|---|---:|---:|---:|---:|");
        for r in &self.runs {
            for (kind, h) in &r.latency_by_kind {
                let _ = writeln!(
                    md,
                    "| {} | {:.0}% | {} | {kind} | {} | {} | {} | {} |",
                    self.label(r),
                    r.point.update_ratio * 100.0,
                    r.point.keys,
                    h.count,
                    ms(h.p50_us),
                    ms(h.p99_us),
                    ms(h.max_us)
                );
            }
        }
        if self.runs.iter().any(|r| !r.server_time.is_empty()) {
            let _ = writeln!(md, "\n### Time inside the servers\n");
            let _ = writeln!(
                md,
                "Mean time per request from its dispatch to a partition until the reply, summed over every node's \
                 `causet_request_duration_seconds` in the measured window; the rest of the client-side latency is \
                 decoding, encoding, the socket and the scheduling of the load generator and the servers.\n"
            );
            let _ = writeln!(md, "| protocol | updates | keys | request | requests | mean µs |");
            let _ = writeln!(md, "|---|---:|---:|---|---:|---:|");
            for r in &self.runs {
                for (kind, t) in &r.server_time {
                    let _ = writeln!(
                        md,
                        "| {} | {:.0}% | {} | {kind} | {} | {:.0} |",
                        self.label(r),
                        r.point.update_ratio * 100.0,
                        r.point.keys,
                        t.requests,
                        t.mean_us
                    );
                }
            }
        }
        if self.runs.iter().any(|r| !r.cache_reads.is_empty()) {
            let _ = writeln!(md, "\n### The lease caches\n");
            let _ = writeln!(
                md,
                "Reads through the coordinators' caches in the measured window, summed over every node's \
                 `causet_cache_reads_total`: served from the cache, fetched (not cached), and fetched again (cached, \
                 but its box missed the transaction's window).\n"
            );
            let _ = writeln!(md, "| protocol | updates | keys | hits | misses | refetches | hit share |");
            let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|");
            for r in self.runs.iter().filter(|r| !r.cache_reads.is_empty()) {
                let n = |k: &str| r.cache_reads.get(k).copied().unwrap_or(0);
                let all = (n("hit") + n("miss") + n("refetch")).max(1);
                let _ = writeln!(
                    md,
                    "| {} | {:.0}% | {} | {} | {} | {} | {:.1}% |",
                    self.label(r),
                    r.point.update_ratio * 100.0,
                    r.point.keys,
                    n("hit"),
                    n("miss"),
                    n("refetch"),
                    100.0 * n("hit") as f64 / all as f64
                );
            }
        }
        if self.runs.iter().any(|r| !r.store_requests.is_empty()) {
            self.write_store_requests(&mut md);
        }
        if self.runs.iter().any(|r| r.committed_by_dc.len() > 1) {
            self.write_throughput_by_dc(&mut md);
        }
        if self.runs.iter().any(|r| r.visibility.is_some()) {
            let _ = writeln!(md, "\n## Visibility across DCs\n");
            let _ = writeln!(
                md,
                "Client side: commit at one DC, poll another every 1 ms until the write shows (from the commit's \
                 acknowledgement). Server side: the reader's `{}` for the writer's DC, sampled every 50 ms.\n",
                crate::visibility::SERVER_METRIC
            );
            let _ = writeln!(
                md,
                "| protocol | updates | from → to | samples | client p50 ms | client p99 ms | client max ms | \
                 server p50 ms | server p99 ms | lost |"
            );
            let _ = writeln!(md, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|");
            for r in &self.runs {
                let Some(v) = &r.visibility else { continue };
                let row = |md: &mut String, pair: String, c: &HistogramSummary, s: &HistogramSummary, lost: u64| {
                    let _ = writeln!(
                        md,
                        "| {} | {:.0}% | {pair} | {} | {} | {} | {} | {} | {} | {lost} |",
                        self.label(r),
                        r.point.update_ratio * 100.0,
                        c.count,
                        ms(c.p50_us),
                        ms(c.p99_us),
                        ms(c.max_us),
                        ms(s.p50_us),
                        ms(s.p99_us)
                    );
                };
                for p in &v.pairs {
                    row(&mut md, format!("{} → {}", p.from, p.to), &p.client, &p.server, p.lost);
                }
                row(&mut md, "all".into(), &v.client, &v.server, v.pairs.iter().map(|p| p.lost).sum());
            }
        }
        if !self.targets.is_empty() {
            let _ = writeln!(md, "\n## Targets\n");
            let _ = writeln!(md, "| target | measured | bound | met |");
            let _ = writeln!(md, "|---|---:|---:|---|");
            for t in &self.targets {
                let _ = writeln!(
                    md,
                    "| {} | {:.3} | {} | {} |",
                    t.target,
                    t.measured,
                    t.bound,
                    if t.met { "yes" } else { "**no**" }
                );
            }
        }
        let cure_1: Vec<f64> = self
            .runs
            .iter()
            .filter(|r| r.protocol == "cure" && r.point.update_ratio == 0.01)
            .map(|r| r.operations_per_s)
            .collect();
        if !cure_1.is_empty() {
            let operations_per_s = median(&cure_1);
            // The Cure paper (§VI, Fig. 2): 111,196 ops/s at 99% reads on 3 DCs × 3 servers × 8 cores.
            let paper_per_core = CURE_PAPER_OPS_PER_S / CURE_PAPER_CORES;
            let ours = operations_per_s / m.cores.max(1) as f64;
            let _ = writeln!(
                md,
                "\n## Beside the Cure paper\n\nAt 99% reads the paper reaches {CURE_PAPER_OPS_PER_S:.0} ops/s on 3 DCs × 3 servers \
                 × 8 cores = {CURE_PAPER_CORES:.0} cores: {paper_per_core:.0} ops/s per core. Here: {:.0} ops/s on {} cores \
                 shared by all {} DCs and the load generator: {ours:.0} ops/s per core ({:.2}× the paper's per-core \
                 figure; a different machine, language and network, so an order of magnitude only).",
                operations_per_s,
                m.cores,
                self.cluster.dcs,
                ours / paper_per_core
            );
        }
        let samples: Vec<&String> = self.runs.iter().flat_map(|r| &r.error_samples).collect();
        if !samples.is_empty() {
            let _ = writeln!(md, "\n## First errors\n");
            for s in samples {
                let _ = writeln!(md, "- {s}");
            }
        }
        let _ = writeln!(
            md,
            "\n## Plots\n\n![throughput](throughput.svg)\n\n![latency CDF](latency-cdf.svg)\n{}",
            if self.runs.iter().any(|r| r.visibility.is_some()) {
                "\n![visibility CDF](visibility-cdf.svg)\n"
            } else {
                ""
            }
        );
        let _ = writeln!(md, "\nEvery figure and the full HDR histograms are in `report.json`.");
        md
    }
}

/// The Cure paper's throughput at 99% reads, 3 DCs × 3 servers (§VI).
const CURE_PAPER_OPS_PER_S: f64 = 111_196.0;
/// Its cores: 3 DCs × 3 servers × 8 cores.
const CURE_PAPER_CORES: f64 = 72.0;

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn run(protocol: &str, repeat: u32, update_ratio: f64, txn: f64) -> RunResult {
        RunResult {
            protocol: protocol.into(),
            repeat,
            point: Point { update_ratio, keys: 80_000 },
            sessions: 48,
            measured_s: 10.0,
            window_start_unix_s: 0.0,
            committed: (txn * 10.0) as u64,
            aborted: 0,
            errors: 0,
            throughput_per_s: txn,
            operations_per_s: txn,
            latency: HistogramSummary::default(),
            latency_by_kind: BTreeMap::new(),
            visibility: None,
            error_samples: Vec::new(),
            server_time: BTreeMap::new(),
            cache_reads: BTreeMap::new(),
            store_requests: BTreeMap::new(),
            committed_by_dc: Vec::new(),
        }
    }

    fn report(runs: Vec<RunResult>) -> Report {
        Report {
            tool: "test".into(),
            command: Vec::new(),
            started_unix_s: 0,
            machine: Machine { cores: 2, memory_bytes: 0, cpu: String::new(), os: String::new() },
            cluster: ClusterShape {
                kind: "local".into(),
                dcs: 3,
                nodes_per_dc: 1,
                partitions: 8,
                wan_delay_ms: None,
                wan_matrix: None,
                sync: None,
                addresses: Vec::new(),
            },
            workload: crate::workload::load("cure").expect("shipped").file,
            distribution: crate::keys::Distribution::Uniform,
            protocols: vec!["cure".into(), "eventual".into()],
            runs,
            comparisons: Vec::new(),
            targets: Vec::new(),
        }
    }

    #[test]
    fn medians_of_odd_and_even_counts_skip_nan() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
        assert!(median(&[]).is_nan());
    }

    /// Ratios are taken within a repetition (never across), and the target is judged on their median.
    #[test]
    fn with_repetitions_ratios_pair_runs_of_one_repetition_and_the_target_takes_their_median() {
        // Repetition ratios cure ÷ eventual: 0.8, 1.0, 1.2 (the medians of each protocol alone would give 1.0 too,
        // so the per-repetition pairing is checked through the comparisons).
        let mut r = report(vec![
            run("cure", 0, 0.25, 80.0),
            run("eventual", 0, 0.25, 100.0),
            run("cure", 1, 0.25, 200.0),
            run("eventual", 1, 0.25, 200.0),
            run("cure", 2, 0.25, 120.0),
            run("eventual", 2, 0.25, 100.0),
        ]);
        r.derive();
        assert_eq!(r.repeats(), 3);
        let mut ratios: Vec<(u32, f64)> = r.comparisons.iter().map(|c| (c.repeat, c.throughput_ratio)).collect();
        ratios.sort_by_key(|c| c.0);
        assert_eq!(ratios, vec![(0, 1.25), (1, 1.0), (2, 100.0 / 120.0)], "eventual ÷ cure within each repetition");
        assert_eq!(r.targets.len(), 1);
        let t = &r.targets[0];
        assert!((t.measured - 1.0).abs() < 1e-9, "median of 0.8, 1.0, 1.2: {}", t.measured);
        assert!(t.met && t.target.contains("median of 3 runs: 0.80, 1.00, 1.20"), "{}", t.target);
        let md = r.to_markdown();
        assert!(md.contains("### Over 3 repetitions"), "{md}");
        assert!(md.contains("| cure #2 | 25% |"), "runs are labelled with their repetition");
        // A repetition missing its eventual run contributes no ratio.
        let mut lone =
            report(vec![run("cure", 0, 0.5, 50.0), run("eventual", 1, 0.5, 100.0), run("cure", 1, 0.5, 45.0)]);
        lone.derive();
        assert!((lone.targets[0].measured - 0.45).abs() < 1e-9 && !lone.targets[0].met, "{:?}", lone.targets);
    }

    #[test]
    fn throughput_by_dc_is_given_when_sessions_ran_at_several_dcs() {
        let mut r = report(vec![run("cops-pr", 0, 0.05, 100.0), run("karma", 0, 0.05, 100.0)]);
        r.runs[0].committed_by_dc = vec![1000];
        assert!(!r.to_markdown().contains("Throughput by DC"), "one DC, no section");
        r.runs[0].committed_by_dc = vec![100, 900];
        r.runs[1].committed_by_dc = vec![250, 750];
        let md = r.to_markdown();
        assert!(md.contains("| protocol | updates | keys | DC 0 | DC 1 |"), "{md}");
        assert!(md.contains("| cops-pr | 5% | 80000 | 10 | 90 |"), "{md}");
        assert!(md.contains("| karma | 5% | 80000 | 25 | 75 |"), "{md}");
    }

    #[test]
    fn the_middlewares_store_requests_are_given_per_transaction_and_only_when_counted() {
        let mut r = report(vec![run("cure", 0, 0.5, 100.0), run("eventual", 0, 0.5, 100.0)]);
        assert!(!r.to_markdown().contains("store requests"), "no middleware run, no section");
        r.runs[1].store_requests = BTreeMap::from([("get_copies".into(), 1500), ("feed_read".into(), 250)]);
        let md = r.to_markdown();
        assert!(md.contains("### The causal middleware's store requests"), "{md}");
        assert!(md.contains("| eventual | 50% | 80000 | 1750 | 1.750 | feed_read 0.250, get_copies 1.500 |"), "{md}");
        assert!(!md.contains("| cure | 50% | 80000 | 0 |"), "a run without counts has no row: {md}");
    }
}
