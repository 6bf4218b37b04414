//! The `causet` command.

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};

use causet::cluster;

/// Every `causet` process (server, load generator, middleware proxy) allocates through mimalloc: the servers allocate
/// and free many small buffers per message and per transaction, where glibc's allocator took about 15% of a loaded
/// cluster's CPU. One node ran 12% faster with it (median of 14 alternating pairs) at 8% more resident memory
/// (`bench/RESULTS-replication.md`, 2026-11-27).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "causet", version, about = "Causet: a geo-replicated database with transactional causal consistency")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a node (a DC of one node; a single DC by default): AntidoteDB's client protocol on 127.0.0.1:8087,
    /// `/metrics` and `/status` on 127.0.0.1:8088, data in ./causet-data. Flags override the config file; the file overrides the
    /// defaults. Every option is described in docs/configuration.md.
    Start(Box<StartArgs>),
    /// Make a CA and a certificate per node for a cluster's authenticated links (the `[tls]` table of each node's
    /// configuration; see docs/security.md). Adds certificates from an existing CA in --out when it holds one.
    Certs {
        /// The cluster's name: node N of DC D gets a certificate naming dcD-nN.<cluster>.
        #[arg(long)]
        cluster: String,
        /// DCs.
        #[arg(long)]
        dcs: u16,
        /// Nodes per DC.
        #[arg(long)]
        nodes_per_dc: u16,
        /// Where ca.pem, ca.key and each dcD-nN.pem and .key go (keep ca.key off the nodes).
        #[arg(long, default_value = "./causet-certs")]
        out: std::path::PathBuf,
    },
    /// A local multi-DC cluster of real processes on loopback: `start`, `stop`, `status`.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Run a workload (shipped by name, or a TOML file) on an existing cluster or on fresh local clusters, one
    /// per protocol with --compare; live progress on stderr; a JSON and Markdown report and SVG plots.
    Bench(Box<causet::bench::BenchArgs>),
    /// Run the causal middleware (Letting-It-Be) over an eventually consistent store — Cassandra, or an in-process
    /// store — behind AntidoteDB's protocol: one causal session per connection, single-key operations on
    /// register_lww objects. See docs/middleware.md.
    Middleware(Box<causet::middleware::MiddlewareArgs>),
    /// Check a real local multi-DC cluster under faults: a recorded client workload while kill -9, pauses, link
    /// cuts and clock jumps are injected on a seeded schedule; then heal, read everything at every DC, and check the
    /// history for TCC, lost acknowledged updates and convergence. Exits 1 when anything is found.
    Check(Box<causet::check::CheckArgs>),
    /// Back a DC up online, at one stable snapshot read by every partition (a causally consistent cut), into a new
    /// directory, with progress; the DC keeps serving. See docs/backup.md.
    Backup(Box<causet::backup::BackupArgs>),
    /// Build a new node's data directory from a backup (a single node holding everything by default, or one node
    /// of a DC of --nodes); it then starts with `causet start`. See docs/backup.md.
    Restore(Box<causet::backup::RestoreArgs>),
    /// Run the deterministic simulator: one seed (--seed), or many (--seeds) from a starting seed.
    ///
    /// Each seed derives its topology, clock skew and drift, message delays, node crashes and workload, runs
    /// the real protocol state machines in virtual time, and checks the recorded history for Transactional Causal+
    /// Consistency and for lost acknowledged writes. A failing seed prints the command that replays it.
    Sim {
        /// Replay exactly this seed.
        #[arg(long, conflicts_with = "seeds")]
        seed: Option<u64>,
        /// Run this many seeds, starting at --from.
        #[arg(long)]
        seeds: Option<u64>,
        /// The first seed of a --seeds run.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Inject a deliberate protocol bug (skip-read-wait, commit-at-min-prepare-time, ignore-prepared-in-pvc) to
        /// see the checker catch it.
        #[arg(long)]
        bug: Option<String>,
        /// Write the recorded history of a --seed run to this file as JSON (format: docs/history.md).
        #[arg(long, requires = "seed")]
        history: Option<std::path::PathBuf>,
        /// The protocol every DC runs: cure (default), gentlerain, or eventual (not causally consistent: the checker
        /// flags it on multi-DC seeds).
        #[arg(long, value_parser = causet::cli::protocol(), default_value = "cure")]
        protocol: causet_core::Protocol,
    },
}

#[derive(Subcommand)]
enum ClusterCommand {
    /// Start `causet start` processes (nodes) for each DC, connect them with an emulated WAN delay, and print each DC's ports.
    Start {
        /// Data centres [default: 3, or as many as --wan-matrix has].
        #[arg(long)]
        dcs: Option<u16>,
        /// Nodes per DC; the DC's partitions are spread over them.
        #[arg(long, default_value_t = 1)]
        nodes_per_dc: u16,
        /// Copies of each partition inside a DC, on distinct nodes (at most --nodes-per-dc); more than one makes
        /// each partition a Raft group that survives the loss of a minority of its nodes [default: 3 with 3 or more
        /// nodes per DC, else 1].
        #[arg(long)]
        replicas: Option<u16>,
        /// Partitions per DC.
        #[arg(long, default_value_t = 8)]
        partitions: u32,
        /// One-way delay between DCs, ms.
        #[arg(long, default_value_t = 50)]
        wan_delay_ms: u64,
        /// Jitter on that delay, ms.
        #[arg(long, default_value_t = 0)]
        jitter_ms: u64,
        /// A delay for each pair of DCs instead of --wan-delay-ms: a TOML file of round-trip times (`rtt_ms`) or
        /// one-way delays (`one_way_ms`), or the name of a shipped matrix (`aws-8dc`: Karma's eight AWS regions).
        /// See docs/configuration.md ("A delay for each pair of DCs").
        #[arg(long, conflicts_with = "wan_delay_ms")]
        wan_matrix: Option<String>,
        /// Plain TCP between nodes and DCs instead of mutually authenticated TLS (by default the cluster gets its
        /// own CA and a certificate per node, in <dir>/certs; see docs/security.md).
        #[arg(long)]
        no_tls: bool,
        /// A line added to every node's configuration (repeatable), e.g. `--node-config 'cache = { enabled = true }'`
        /// (see docs/configuration.md).
        #[arg(long)]
        node_config: Vec<String>,
        /// Where configs, data, logs and the cluster file go.
        #[arg(long, default_value = "./causet-cluster")]
        dir: std::path::PathBuf,
        /// Node i, counted DC by DC, listens on base+3i (client), base+3i+1 (admin), base+3i+2 (replication);
        /// 0 picks free ports.
        #[arg(long, default_value_t = 8087)]
        base_port: u16,
        /// `always` or `periodic`.
        #[arg(long, default_value = "always")]
        sync: String,
        /// The protocol every DC runs.
        #[arg(long, value_parser = causet::cli::protocol(), default_value = "cure")]
        protocol: causet_core::Protocol,
    },
    /// Connect running DCs to each other through AntidoteDB's cluster-management messages: fetch every DC's
    /// connection descriptor (ApbGetConnectionDescriptor) and hand all of them to every DC (ApbConnectToDCs).
    /// Each DC must have been started with the same `dcs` and `partitions` and its own `dc` index.
    Connect {
        /// The DCs' client addresses, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        addrs: Vec<std::net::SocketAddr>,
    },
    /// Stop every DC of the cluster (gracefully).
    Stop {
        /// The cluster's directory.
        #[arg(long, default_value = "./causet-cluster")]
        dir: std::path::PathBuf,
    },
    /// Replace a node's disk: kill the node, delete its data directory, and start it again empty, joining its DC
    /// (with replicated partitions, its replicas join their groups under new ids and are caught up by the others;
    /// watch `/status` for the membership).
    ReplaceDisk {
        /// The cluster's directory.
        #[arg(long, default_value = "./causet-cluster")]
        dir: std::path::PathBuf,
        /// The node's DC.
        #[arg(long)]
        dc: u16,
        /// The node's index in its DC.
        #[arg(long)]
        node: u16,
    },
    /// Move a partition's replica from one node of a DC to another that holds none (replicated partitions): the
    /// new replica is caught up, then replaces the old one in the partition's Raft group, online. The old node may
    /// be down. Prints progress until the group shows the move.
    Move {
        /// The cluster's directory.
        #[arg(long, default_value = "./causet-cluster")]
        dir: std::path::PathBuf,
        /// The DC.
        #[arg(long)]
        dc: u16,
        /// The partition.
        #[arg(long)]
        partition: u32,
        /// The node whose replica moves.
        #[arg(long)]
        from: u16,
        /// The node that takes it.
        #[arg(long)]
        to: u16,
        /// Give up waiting after this many seconds (0: ask and return).
        #[arg(long, default_value_t = 120)]
        wait_s: u64,
    },
    /// Retire a node of a DC (replicated partitions): every replica it holds moves to another node of the DC that
    /// holds none of that partition, the least loaded first. The node may be down (a dead node is re-replicated
    /// onto the others). Prints progress until no group counts the node.
    Retire {
        /// The cluster's directory.
        #[arg(long, default_value = "./causet-cluster")]
        dir: std::path::PathBuf,
        /// The DC.
        #[arg(long)]
        dc: u16,
        /// The node to retire.
        #[arg(long)]
        node: u16,
        /// Give up waiting after this many seconds (0: ask and return).
        #[arg(long, default_value_t = 300)]
        wait_s: u64,
    },
    /// Add a node to a running DC (replicated partitions), online: start it; the DC's nodes admit it as it
    /// announces itself (no restart). It holds no replica until some move there (`--rebalance`, `move`,
    /// `retire`). Peer DCs are not told of it: they reach the DC through its other nodes.
    AddNode {
        /// The cluster's directory.
        #[arg(long, default_value = "./causet-cluster")]
        dir: std::path::PathBuf,
        /// The DC.
        #[arg(long)]
        dc: u16,
        /// Give up waiting for the DC's nodes to admit it (and for each move) after this many seconds.
        #[arg(long, default_value_t = 120)]
        wait_s: u64,
        /// Then move replicas onto it from the busiest nodes until it holds its share of the DC's.
        #[arg(long)]
        rebalance: bool,
    },
    /// Show each DC's state: stable snapshot age per DC, links.
    Status {
        /// The cluster's directory.
        #[arg(long, default_value = "./causet-cluster")]
        dir: std::path::PathBuf,
    },
}

#[derive(clap::Args)]
struct StartArgs {
    /// A TOML configuration file (see docs/configuration.md).
    #[arg(long, short)]
    config: Option<std::path::PathBuf>,
    /// Where the log and checkpoints live [default: ./causet-data].
    #[arg(long)]
    data_dir: Option<std::path::PathBuf>,
    /// Address of the client protocol [default: 127.0.0.1:8087].
    #[arg(long)]
    client_bind: Option<std::net::SocketAddr>,
    /// Address of the admin HTTP server [default: 127.0.0.1:8088].
    #[arg(long)]
    admin_bind: Option<std::net::SocketAddr>,
    /// Partitions of the DC [default: 8].
    #[arg(long)]
    partitions: Option<u32>,
    /// Tasks running the protocol (0: one per worker thread) [default: 0].
    #[arg(long)]
    shards: Option<usize>,
    /// `always` (every acknowledged commit is fsynced; default) or `periodic` (fsync on a timer; benchmarks only).
    #[arg(long)]
    sync: Option<String>,
    /// fsync interval with --sync periodic, ms [default: 10].
    #[arg(long)]
    sync_interval_ms: Option<u64>,
    /// `hybrid` (default) or `physical`.
    #[arg(long)]
    clock: Option<String>,
    /// Most client connections [default: 1024].
    #[arg(long)]
    max_connections: Option<usize>,
    /// Largest client frame, bytes [default: 16777216].
    #[arg(long)]
    max_frame_bytes: Option<usize>,
    /// An idle interactive transaction aborts after this long, ms [default: 30000].
    #[arg(long)]
    tx_idle_timeout_ms: Option<u64>,
    /// Checkpoint interval, seconds [default: 60].
    #[arg(long)]
    checkpoint_interval_s: Option<u64>,
    /// Write-write certification of concurrent updates to one object (AntidoteDB's txn_cert).
    #[arg(long)]
    certify_writes: bool,
    /// Join a running DC: with a new data directory (a node whose disk was lost), the node's replicas join their
    /// Raft groups under new ids instead of starting them.
    #[arg(long)]
    join: bool,
    /// Log filter, e.g. `info` or `causet_server=debug` [default: info, or RUST_LOG].
    #[arg(long)]
    log: Option<String>,
}

fn server_config(args: &StartArgs) -> anyhow::Result<causet_server::config::ServerConfig> {
    use causet_server::config::{ServerConfig, SyncPolicy};
    let mut c = match &args.config {
        Some(path) => ServerConfig::from_file(path)?,
        None => ServerConfig::default(),
    };
    if let Some(v) = &args.data_dir {
        c.data_dir = v.clone();
    }
    if let Some(v) = args.client_bind {
        c.client_bind = v;
    }
    if let Some(v) = args.admin_bind {
        c.admin_bind = v;
    }
    if let Some(v) = args.partitions {
        c.partitions = v;
    }
    if let Some(v) = args.shards {
        c.shards = v;
    }
    if let Some(v) = &args.sync {
        c.sync = match v.as_str() {
            "always" => SyncPolicy::Always,
            "periodic" => SyncPolicy::Periodic,
            other => bail!("--sync takes always or periodic, not {other:?}"),
        };
    }
    if let Some(v) = args.sync_interval_ms {
        c.sync_interval_ms = v;
    }
    if let Some(v) = &args.clock {
        c.clock = match v.as_str() {
            "hybrid" => causet_core::ClockKind::Hybrid,
            "physical" => causet_core::ClockKind::Physical,
            other => bail!("--clock takes hybrid or physical, not {other:?}"),
        };
    }
    if let Some(v) = args.max_connections {
        c.max_connections = v;
    }
    if let Some(v) = args.max_frame_bytes {
        c.max_frame_bytes = v;
    }
    if let Some(v) = args.tx_idle_timeout_ms {
        c.tx_idle_timeout_ms = v;
    }
    if let Some(v) = args.checkpoint_interval_s {
        c.checkpoint_interval_s = v;
    }
    if args.join {
        c.join = true;
    }
    if args.certify_writes {
        c.certify_writes = true;
    }
    c.validate()?;
    Ok(c)
}

/// A command that prints for a reader ends quietly when the reader stops reading (`causet cluster status | head`),
/// as any Unix tool does, instead of panicking at its next line. Not for the servers and the load generator, whose
/// own sockets must see a closed peer as an error, not a signal.
fn quiet_when_stdout_closes() {
    // SAFETY: called first in `main`, before any other thread runs; it only restores SIGPIPE's default action,
    // which Rust's runtime set to "ignore" at start (processes this one starts set it again themselves).
    #[cfg(unix)]
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn start(args: StartArgs) -> anyhow::Result<()> {
    let filter = args.log.clone().or_else(|| std::env::var("RUST_LOG").ok()).unwrap_or_else(|| "info".into());
    tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new(filter)).init();
    let config = server_config(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.worker_thread_count())
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let node = causet_server::Node::start(config).await?;
        println!(
            "causet is serving AntidoteDB's protocol on {} (web console, /status and /metrics: http://{}/)",
            node.client_addr, node.admin_addr
        );
        shutdown_signal().await;
        node.shutdown().await
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// `causet certs`: a CA (or the one already in `out`) and every member's certificate.
fn certs(cluster: &str, dcs: u16, nodes_per_dc: u16, out: &std::path::Path) -> anyhow::Result<()> {
    use causet_server::tls::{every_member, valid_cluster_name, LocalCa};
    anyhow::ensure!(
        valid_cluster_name(cluster),
        "--cluster {cluster:?}: letters, digits, '-' and '.', as in a DNS name"
    );
    anyhow::ensure!(dcs >= 1 && nodes_per_dc >= 1, "--dcs and --nodes-per-dc must be at least 1");
    let ca = if out.join("ca.key").exists() {
        println!("using the CA in {}", out.display());
        LocalCa::open(out).map_err(anyhow::Error::msg)?
    } else {
        LocalCa::create().map_err(anyhow::Error::msg)?
    };
    let configs = ca.write_cluster(out, cluster, &every_member(dcs, nodes_per_dc)).map_err(anyhow::Error::msg)?;
    println!("wrote {} and {} node certificates to {}", out.join("ca.pem").display(), configs.len(), out.display());
    println!("each node's configuration takes (node N of DC D):\n");
    println!("[tls]\nca = \"ca.pem\"\ncert = \"dcD-nN.pem\"\nkey = \"dcD-nN.key\"\ncluster = \"{cluster}\"\n");
    println!("copy ca.pem and the node's own .pem and .key to it; keep ca.key elsewhere");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if !matches!(cli.command, Command::Start(_) | Command::Middleware(_) | Command::Bench(_) | Command::Check(_)) {
        quiet_when_stdout_closes();
    }
    match cli.command {
        Command::Start(args) => start(*args)?,
        Command::Check(args) => std::process::exit(causet::check::main(*args)?),
        Command::Certs { cluster, dcs, nodes_per_dc, out } => certs(&cluster, dcs, nodes_per_dc, &out)?,
        Command::Cluster { command } => match command {
            ClusterCommand::Start {
                dcs,
                nodes_per_dc,
                replicas,
                partitions,
                wan_delay_ms,
                jitter_ms,
                wan_matrix,
                no_tls,
                node_config,
                dir,
                base_port,
                sync,
                protocol,
            } => {
                let wan_matrix = wan_matrix.as_deref().map(causet::wan_matrix::WanMatrix::load).transpose()?;
                let dcs = match (dcs, &wan_matrix) {
                    (Some(dcs), _) => dcs,
                    (None, Some(m)) => m.dcs(),
                    (None, None) => 3,
                };
                let options = cluster::StartOptions {
                    dcs,
                    wan_matrix,
                    tls: !no_tls,
                    nodes_per_dc,
                    replicas: replicas.unwrap_or(cluster::default_replicas(nodes_per_dc)),
                    partitions,
                    wan_delay_ms,
                    jitter_ms,
                    dir,
                    base_port,
                    sync,
                    protocol,
                    extra_config: node_config.iter().map(|line| format!("{line}\n")).collect(),
                    ..Default::default()
                };
                let file = cluster::start(&options)?;
                cluster::print_started(&file, &options.dir);
            }
            ClusterCommand::Stop { dir } => cluster::stop(&dir)?,
            ClusterCommand::Connect { addrs } => {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
                runtime.block_on(async {
                    let mut descriptors = Vec::new();
                    for a in &addrs {
                        let mut c =
                            causet_client::Client::connect(a).await.with_context(|| format!("connecting to {a}"))?;
                        descriptors.push(c.connection_descriptor().await.with_context(|| format!("describing {a}"))?);
                    }
                    for a in &addrs {
                        let mut c =
                            causet_client::Client::connect(a).await.with_context(|| format!("connecting to {a}"))?;
                        c.connect_dcs(descriptors.clone())
                            .await
                            .with_context(|| format!("connecting {a} to the others"))?;
                        println!("{a}: connected to the other {} DCs", addrs.len() - 1);
                    }
                    anyhow::Ok(())
                })?;
            }
            ClusterCommand::ReplaceDisk { dir, dc, node } => {
                let mut file = cluster::load(&dir)?;
                let i = (file.nodes.iter().position(|n| n.dc == dc && n.node == node))
                    .ok_or_else(|| anyhow::anyhow!("the cluster in {} has no node {node} in DC {dc}", dir.display()))?;
                cluster::wipe_node(&file, i)?;
                cluster::restart_node(&mut file, &dir, i)?;
                println!("DC {dc} node {node} restarted with an empty disk; it joins its DC (see its /status)");
            }
            ClusterCommand::Move { dir, dc, partition, from, to, wait_s } => {
                cluster::move_replica(&dir, dc, partition, from, to, std::time::Duration::from_secs(wait_s))?
            }
            ClusterCommand::Retire { dir, dc, node, wait_s } => {
                cluster::retire(&dir, dc, node, std::time::Duration::from_secs(wait_s))?
            }
            ClusterCommand::AddNode { dir, dc, wait_s, rebalance } => {
                let node = cluster::add_node(&dir, dc, std::time::Duration::from_secs(wait_s), rebalance)?;
                if !rebalance {
                    println!("DC {dc} node {node} added; move replicas to it with `--rebalance`, `move` or `retire`");
                }
            }
            ClusterCommand::Status { dir } => cluster::status(&dir)?,
        },
        Command::Bench(args) => {
            causet::bench::main(*args)?;
        }
        Command::Backup(args) => causet::backup::main_backup(*args)?,
        Command::Restore(args) => causet::backup::main_restore(*args)?,
        Command::Middleware(args) => {
            tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::new("warn")).init();
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(causet::middleware::run(*args, shutdown_signal()))?;
        }
        Command::Sim { seed, seeds, from, bug, history, protocol } => {
            let bug = match bug.as_deref() {
                None => None,
                Some(name) => match causet_sim::parse_bug(name) {
                    Some(b) => Some(b),
                    None => {
                        let names: Vec<&str> = causet_core::Bug::ALL.into_iter().map(causet_sim::bug_name).collect();
                        bail!("unknown bug {name:?}: use one of {}", names.join(", "))
                    }
                },
            };
            match (seed, seeds) {
                (Some(seed), _) => {
                    println!("seed {seed}");
                    let result = causet_sim::run_seed_with(seed, bug, protocol);
                    println!("{}", result.summary());
                    if let Some(path) = history {
                        let json = serde_json::to_string_pretty(&result.history)?;
                        std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
                        println!("history written to {}", path.display());
                    }
                    if !result.passed() {
                        std::process::exit(1);
                    }
                }
                (None, count) => {
                    let count = count.unwrap_or(100);
                    let started = std::time::Instant::now();
                    let (mut failed, mut committed, mut reads) = (Vec::new(), 0u64, 0usize);
                    for seed in from..from + count {
                        let result = causet_sim::run_seed_with(seed, bug, protocol);
                        committed += result.stats.committed;
                        reads += result.report.reads_checked;
                        if !result.passed() {
                            println!("{}", result.summary());
                            failed.push(seed);
                        }
                        let done = seed - from + 1;
                        if done % 10 == 0 || done == count {
                            let secs = started.elapsed().as_secs_f64();
                            eprintln!(
                                "{done}/{count} seeds, {} failed, {committed} transactions committed and checked \
                                 ({:.0} per second), {reads} reads checked, {secs:.0} s",
                                failed.len(),
                                committed as f64 / secs
                            );
                        }
                    }
                    if !failed.is_empty() {
                        bail!("{} of {count} seeds failed: {failed:?}", failed.len());
                    }
                    println!("all {count} seeds passed");
                }
            }
        }
    }
    Ok(())
}
