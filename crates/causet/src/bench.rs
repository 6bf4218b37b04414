//! `causet bench`: runs a workload (a shipped one by name, or a TOML file) against an existing cluster (`--addr`,
//! `--cluster-dir`) or against fresh local clusters it starts itself, one per protocol of `--compare`, with the
//! same seed; writes `report.json`, `report.md` and SVG plots.

use crate::cluster::{self, ClusterFile, StartOptions};
use crate::wan_matrix::WanMatrix;
use anyhow::Context;
use causet_bench::report::{ClusterShape, Machine, Report};
use causet_bench::runner::RunResult;
use causet_bench::workload::{self, OneOrMany, Workload};
use causet_bench::{DcTarget, Target};
use causet_core::Protocol;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The arguments of `causet bench`.
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// A shipped workload (cure, visibility, honeypot-uniform, honeypot-pareto, karma, letting-it-be, smoke) or a
    /// workload TOML file (format: bench/workloads/README.md).
    #[arg(long, short, default_value = "cure")]
    pub workload: String,
    /// Drive an existing cluster: each DC's client address, comma-separated, in DC order (several nodes of one
    /// DC: `a+b`).
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["cluster_dir", "compare"])]
    pub addr: Vec<String>,
    /// With --addr: each DC's admin address, comma-separated, for the server-side metrics (visibility, time inside
    /// the servers); before each point the run also waits until every one that serves `/settled` (the causal
    /// middleware's proxies, `causet middleware --admin`) says the target has absorbed what came before.
    #[arg(long, value_delimiter = ',', requires = "addr")]
    pub admin: Vec<SocketAddr>,
    /// Drive an existing cluster started by `causet cluster start --dir DIR`.
    #[arg(long, conflicts_with = "compare")]
    pub cluster_dir: Option<PathBuf>,
    /// Start a fresh local cluster for each of these protocols in turn (cure, gentlerain, eventual) and run the
    /// same workload with the same seed on each; ratios are to the first. Without --addr, --cluster-dir or
    /// --compare, one local cluster runs `cure`.
    #[arg(long, value_delimiter = ',', value_parser = crate::cli::protocol())]
    pub compare: Vec<Protocol>,
    /// With --compare: run the whole comparison this many times (each protocol in turn, a fresh cluster each
    /// time); ratios are taken within a repetition and targets judged on their median.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub repeat: u32,
    /// Where the report goes [default: bench-results/WORKLOAD-UNIXTIME].
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Override the workload's measured seconds per run.
    #[arg(long)]
    pub duration_s: Option<f64>,
    /// Override the workload's warm-up seconds.
    #[arg(long)]
    pub warmup_s: Option<f64>,
    /// Override the workload's seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Override the workload's sessions per DC.
    #[arg(long)]
    pub sessions_per_dc: Option<usize>,
    /// Override the workload's open-loop rate (transactions per second; 0: closed loop).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Interactive transactions send their reads in one request and their updates in one (the workload's
    /// `mix.batched`), instead of one request per key.
    #[arg(long)]
    pub batched: bool,
    /// A shell command to run before each point's warm-up, once the preload is written and the target has settled;
    /// the run stops if it fails. bench/letting-it-be.sh passes `scripts/cassandra quiesce --dir DIR`, so that no
    /// point is measured while Cassandra compacts what the preload or the point before wrote.
    #[arg(long, value_name = "COMMAND")]
    pub before_point: Option<String>,
    /// Override the workload's update ratios (comma-separated: a sweep).
    #[arg(long, value_delimiter = ',')]
    pub update_ratio: Vec<f64>,
    /// Local clusters: override the workload's DCs.
    #[arg(long)]
    pub dcs: Option<u16>,
    /// Local clusters: override the workload's partitions per DC.
    #[arg(long)]
    pub partitions: Option<u32>,
    /// Local clusters: override the workload's nodes per DC (the DC's partitions and the sessions are spread over
    /// them).
    #[arg(long)]
    pub nodes_per_dc: Option<u16>,
    /// Local clusters: override the workload's copies of each partition inside a DC (Raft groups when more than
    /// one; at most the nodes per DC).
    #[arg(long)]
    pub replicas: Option<u16>,
    /// Local clusters: override the workload's one-way delay between DCs, ms.
    #[arg(long)]
    pub wan_delay_ms: Option<u64>,
    /// Local clusters: a delay for each pair of DCs (a matrix file, or `aws-8dc`), as `causet cluster start
    /// --wan-matrix`; `--dcs` follows the matrix unless given.
    #[arg(long, conflicts_with = "wan_delay_ms")]
    pub wan_matrix: Option<String>,
    /// Local clusters: override the workload's fsync policy (always or periodic).
    #[arg(long)]
    pub sync: Option<String>,
    /// Override where the workload's read-only transactions read: leader (the default: the node's lease cache
    /// where it has one), nearest (a partition's replica on the session's node), cache, or fresh (the leaders
    /// even where the node caches).
    #[arg(long)]
    pub read_from: Option<String>,
    /// Local clusters: lines of every node's configuration, replacing the workload's `node_config` (repeat the
    /// flag for several lines), e.g. `--node-config 'cache = { enabled = true, buffer_writes = true }'`.
    #[arg(long)]
    pub node_config: Vec<String>,
    /// Print the shipped workloads and exit.
    #[arg(long)]
    pub list: bool,
    /// Render the plots a JSON spec describes and exit, printing the files written: `{"plots": [{"file",
    /// "title", "x_label", "y_label", "log_x", "references": [{"y", "label"}], "series": [{"label", "points":
    /// [[x, y], ...]}]}]}`, each file relative to the spec's directory. The benchmark scripts that sweep several
    /// configurations (bench/honeypot.sh) plot their summaries this way.
    #[arg(long, value_name = "SPEC")]
    pub plot: Option<PathBuf>,
}

/// Stops a local cluster when the run ends, fails or is interrupted.
struct Running(ClusterFile);

impl Drop for Running {
    fn drop(&mut self) {
        cluster::stop_nodes(&self.0, false);
        for n in &self.0.nodes {
            // The data of a benchmark's cluster is of no further use; its logs and configs stay for inspection.
            let _ = std::fs::remove_dir_all(&n.data_dir);
        }
    }
}

fn apply_overrides(w: &mut workload::WorkloadFile, a: &BenchArgs) -> anyhow::Result<()> {
    if let Some(v) = a.duration_s {
        w.run.duration_s = v;
    }
    if let Some(v) = a.warmup_s {
        w.run.warmup_s = v;
    }
    if let Some(v) = a.seed {
        w.run.seed = v;
    }
    if let Some(v) = a.sessions_per_dc {
        w.clients.sessions_per_dc = v;
    }
    if let Some(v) = a.rate {
        w.clients.rate = v;
    }
    if !a.update_ratio.is_empty() {
        w.update_ratio = OneOrMany::Many(a.update_ratio.clone());
    }
    if a.batched {
        w.mix.batched = true;
    }
    if let Some(v) = a.dcs {
        w.cluster.dcs = v;
    }
    if let Some(v) = a.partitions {
        w.cluster.partitions = v;
    }
    if let Some(v) = a.nodes_per_dc {
        w.cluster.nodes_per_dc = v;
    }
    if let Some(v) = a.replicas {
        w.cluster.replicas = v;
    }
    if let Some(v) = a.wan_delay_ms {
        w.cluster.wan_delay_ms = v;
        w.cluster.wan_matrix = None;
    }
    if let Some(v) = &a.wan_matrix {
        w.cluster.wan_matrix = Some(v.clone());
        if a.dcs.is_none() {
            w.cluster.dcs = WanMatrix::load(v)?.dcs();
        }
    }
    if let Some(v) = &a.sync {
        w.cluster.sync = v.clone();
    }
    if !a.node_config.is_empty() {
        w.cluster.node_config.clone_from(&a.node_config);
    }
    if let Some(v) = &a.read_from {
        w.clients.read_from = match v.as_str() {
            "leader" => workload::ReadFromName::Leader,
            "nearest" => workload::ReadFromName::Nearest,
            "cache" => workload::ReadFromName::Cache,
            "fresh" => workload::ReadFromName::Fresh,
            other => anyhow::bail!("--read-from {other}: expected leader, nearest, cache or fresh"),
        };
    }
    Ok(())
}

fn target_of(file: &ClusterFile) -> Target {
    let dcs = (0..file.dcs)
        .map(|dc| DcTarget {
            dc,
            clients: file.dc_clients(dc),
            admins: file.nodes.iter().filter(|n| n.dc == dc).map(|n| n.admin).collect(),
        })
        .collect();
    Target { dcs, partitions: file.partitions }
}

fn shape(kind: &str, target: &Target, wan: Option<(u64, Option<&WanMatrix>)>, sync: Option<String>) -> ClusterShape {
    ClusterShape {
        kind: kind.into(),
        dcs: target.dcs.len(),
        nodes_per_dc: target.dcs.iter().map(|d| d.clients.len()).max().unwrap_or(0),
        partitions: target.partitions,
        wan_delay_ms: wan.filter(|(_, m)| m.is_none()).map(|(d, _)| d),
        wan_matrix: wan.and_then(|(_, m)| m).map(|m| m.origin.clone()),
        sync,
        addresses: target.dcs.iter().map(|d| d.clients.iter().map(|a| a.to_string()).collect()).collect(),
    }
}

/// Runs `causet bench`; returns the report directory.
pub fn main(args: BenchArgs) -> anyhow::Result<PathBuf> {
    if args.list {
        for (name, text) in workload::SHIPPED {
            let w = Workload::parse(text, name)?;
            println!("{name:<18} {}", w.file.description);
        }
        return Ok(PathBuf::new());
    }
    if let Some(spec) = &args.plot {
        for path in causet_bench::plot::render_specs(spec)? {
            println!("{}", path.display());
        }
        return Ok(PathBuf::new());
    }
    let mut w = workload::load(&args.workload)?;
    apply_overrides(&mut w.file, &args)?;
    let w = Workload::check(w.file, &args.workload)?;
    let started_unix_s =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let out =
        args.out.clone().unwrap_or_else(|| PathBuf::from(format!("bench-results/{}-{started_unix_s}", w.file.name)));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut report = Report {
        tool: format!("causet bench {}", env!("CARGO_PKG_VERSION")),
        command: std::env::args().collect(),
        started_unix_s,
        machine: Machine::detect(),
        cluster: shape("existing", &Target { dcs: Vec::new(), partitions: 0 }, None, None),
        workload: w.file.clone(),
        distribution: w.distribution,
        protocols: Vec::new(),
        runs: Vec::new(),
        comparisons: Vec::new(),
        targets: Vec::new(),
    };
    eprintln!(
        "causet bench: workload {} ({} cores; the load generator and the cluster share them); report in {}",
        w.file.name,
        report.machine.cores,
        out.display()
    );
    if !args.addr.is_empty() {
        let mut dcs = Vec::new();
        for (i, dc) in args.addr.iter().enumerate() {
            let clients = dc
                .split('+')
                .map(|a| a.parse::<SocketAddr>().with_context(|| format!("--addr: {a:?} is not an address")))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let admins = args.admin.get(i).copied().into_iter().collect();
            dcs.push(DcTarget { dc: i as u16, clients, admins });
        }
        let target = Target { dcs, partitions: w.file.cluster.partitions };
        report.cluster = shape("existing", &target, None, None);
        report.protocols = vec!["existing".into()];
        run_all(&runtime, &w, &target, "existing", 0, args.before_point.as_deref(), &mut report)?;
    } else if let Some(dir) = &args.cluster_dir {
        let file = cluster::load(dir)?;
        let target = target_of(&file);
        report.cluster = shape("existing", &target, Some((file.wan_delay_ms, file.wan_matrix.as_ref())), None);
        report.protocols = vec![file.protocol.to_string()];
        run_all(&runtime, &w, &target, file.protocol.name(), 0, args.before_point.as_deref(), &mut report)?;
    } else {
        let protocols = if args.compare.is_empty() { vec![Protocol::default()] } else { args.compare.clone() };
        report.protocols = protocols.iter().map(Protocol::to_string).collect();
        let rounds = (0..args.repeat).flat_map(|r| protocols.iter().map(move |p| (r, p)));
        let wan_matrix = w.file.cluster.wan_matrix.as_deref().map(WanMatrix::load).transpose()?;
        for (repeat, protocol) in rounds {
            let c = &w.file.cluster;
            let options = StartOptions {
                wan_matrix: wan_matrix.clone(),
                dcs: c.dcs,
                nodes_per_dc: c.nodes_per_dc,
                replicas: c.replicas,
                partitions: c.partitions,
                wan_delay_ms: c.wan_delay_ms,
                dir: out.join(format!("cluster-{protocol}")),
                base_port: 0,
                sync: c.sync.clone(),
                protocol: *protocol,
                extra_config: c.node_config.iter().map(|line| format!("{line}\n")).collect(),
                ..Default::default()
            };
            eprintln!("starting a local {}-DC cluster running {protocol} in {}", c.dcs, options.dir.display());
            let running = Running(cluster::start(&options)?);
            let target = target_of(&running.0);
            let wan = Some((c.wan_delay_ms, wan_matrix.as_ref()));
            report.cluster = shape("local", &target, wan, Some(c.sync.clone()));
            run_all(&runtime, &w, &target, protocol.name(), repeat, args.before_point.as_deref(), &mut report)?;
            drop(running);
        }
    }
    report.derive();
    let files = causet_bench::write_outputs(&report, &out)?;
    println!("{}", summary(&report));
    for f in files {
        println!("wrote {}", f.display());
    }
    Ok(out)
}

/// Runs `--before-point`'s command through `sh -c`, saying how long it took; an error if it fails.
async fn run_before_point(command: &str, label: &str) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .status()
        .await
        .with_context(|| format!("--before-point: running {command:?}"))?;
    anyhow::ensure!(status.success(), "--before-point {command:?} failed ({status})");
    eprintln!("{label}: --before-point ran in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

fn run_all(
    runtime: &tokio::runtime::Runtime,
    w: &Workload,
    target: &Target,
    protocol: &str,
    repeat: u32,
    before_point: Option<&str>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let points = w.points(target.partitions);
    let mut preloaded = 0;
    for (i, point) in points.iter().enumerate() {
        let run = if repeat > 0 { format!(" #{}", repeat + 1) } else { String::new() };
        let label = format!(
            "{protocol}{run} {}/{} ({:.0}% updates, {} keys)",
            i + 1,
            points.len(),
            point.update_ratio * 100.0,
            point.keys
        );
        let result = runtime.block_on(async {
            tokio::select! {
                r = async {
                    if w.file.run.preload && point.keys > preloaded {
                        eprintln!("{label}: writing {} keys first", point.keys);
                        causet_bench::runner::preload(w, point.keys, target).await?;
                    }
                    let waited = causet_bench::runner::settle(target, &label).await;
                    if waited >= std::time::Duration::from_secs(2) {
                        eprintln!("{label}: the target settled in {:.1} s", waited.as_secs_f64());
                    }
                    if let Some(command) = before_point {
                        run_before_point(command, &label).await?;
                    }
                    causet_bench::run_point(w, *point, target, protocol, &label).await
                } => r,
                _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
            }
        })?;
        preloaded = preloaded.max(point.keys);
        eprintln!(
            "{label}: {:.0} txn/s, p50 {:.2} ms, p99 {:.2} ms, {} aborts, {} errors{}",
            result.throughput_per_s,
            result.latency.p50_us as f64 / 1000.0,
            result.latency.p99_us as f64 / 1000.0,
            result.aborted,
            result.errors,
            result
                .visibility
                .as_ref()
                .map(|v| format!(
                    "; visibility p50 {:.1} ms, p99 {:.1} ms (server metric p50 {:.1} ms)",
                    v.client.p50_us as f64 / 1000.0,
                    v.client.p99_us as f64 / 1000.0,
                    v.server.p50_us as f64 / 1000.0
                ))
                .unwrap_or_default()
        );
        report.runs.push(RunResult { repeat, ..result });
    }
    Ok(())
}

/// A few lines for the terminal: per run, throughput and ratio; the targets.
fn summary(r: &Report) -> String {
    let mut s = String::new();
    for run in &r.runs {
        let ratio = r
            .comparisons
            .iter()
            .find(|c| c.protocol == run.protocol && c.point == run.point && c.repeat == run.repeat)
            .map(|c| format!(" ({:.3}× {})", c.throughput_ratio, c.baseline))
            .unwrap_or_default();
        s.push_str(&format!(
            "{:<10} {:>3.0}% updates {:>6} keys: {:>8.0} txn/s{ratio}, {:.0} per core\n",
            r.label(run),
            run.point.update_ratio * 100.0,
            run.point.keys,
            run.throughput_per_s,
            run.throughput_per_s / r.machine.cores.max(1) as f64
        ));
    }
    for t in &r.targets {
        s.push_str(&format!(
            "target {}: {:.3} (bound {}) {}\n",
            t.target,
            t.measured,
            t.bound,
            if t.met { "met" } else { "MISSED" }
        ));
    }
    s.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::run_before_point;

    #[tokio::test]
    async fn before_point_runs_its_command_and_fails_the_run_when_the_command_fails() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        run_before_point(&format!("touch '{}'", marker.display()), "test").await.unwrap();
        assert!(marker.exists(), "the command ran");
        let err = run_before_point("exit 3", "test").await.unwrap_err().to_string();
        assert!(err.contains("exit 3") && err.contains("failed"), "{err}");
    }
}
