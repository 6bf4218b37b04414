//! `causet cluster`: a local multi-DC cluster of real `causet start` processes on loopback, connected to each
//! other with an emulated WAN delay (one for every pair, or a matrix, [`crate::wan_matrix`]); a cluster file other commands read; `stop` and `status`.
//!
//! Other commands (`causet bench --compare`, `causet check`) drive clusters through this module: [`start`] returns
//! the [`ClusterFile`], [`kill_node`] and [`restart_node`] are the nemesis's process faults, [`stop`] ends it.

use crate::wan_matrix::WanMatrix;
use anyhow::{bail, Context};
use causet_core::Protocol;
use causet_server::tls::LocalCa;
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One node (a `causet start` process) of a local cluster.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterNode {
    /// The node's DC.
    pub dc: u16,
    /// The node's index inside its DC.
    #[serde(default)]
    pub node: u16,
    /// AntidoteDB's client protocol.
    pub client: SocketAddr,
    /// Admin HTTP.
    pub admin: SocketAddr,
    /// Links from the other DCs and from the other nodes of this DC.
    pub replication: SocketAddr,
    /// The process.
    pub pid: u32,
    /// Its configuration file.
    pub config: PathBuf,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// Its log file (appended to across restarts).
    pub log: PathBuf,
}

/// The cluster file (`<dir>/cluster.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterFile {
    /// Every node, DC by DC (nodes added to a running DC last).
    pub nodes: Vec<ClusterNode>,
    /// DCs.
    pub dcs: u16,
    /// Nodes per DC.
    pub nodes_per_dc: u16,
    /// Partitions per DC.
    pub partitions: u32,
    /// The protocol every DC runs.
    pub protocol: Protocol,
    /// The admin token of every node (fault injection).
    pub admin_token: String,
    /// One-way delay between DCs, ms (every pair, unless `wan_matrix` gives each its own).
    pub wan_delay_ms: u64,
    /// Per DC-pair one-way delays, when the cluster was started with a matrix.
    #[serde(default)]
    pub wan_matrix: Option<WanMatrix>,
    /// The cluster's name in its nodes' certificates, when its links are TLS (certificates in `<dir>/certs`).
    #[serde(default)]
    pub tls_cluster: Option<String>,
    /// The `causet` binary the nodes run.
    pub exe: PathBuf,
}

impl ClusterFile {
    /// The client addresses of a DC's nodes.
    pub fn dc_clients(&self, dc: u16) -> Vec<SocketAddr> {
        self.nodes.iter().filter(|n| n.dc == dc).map(|n| n.client).collect()
    }

    /// Writes the file to `<dir>/cluster.json`, and `<dir>/prometheus-targets.json`: every node's admin address
    /// with `causet_dc` and `causet_node` labels, in Prometheus' file-based discovery format
    /// (`deploy/prometheus.yml` reads it).
    pub fn save(&self, dir: &Path) -> anyhow::Result<()> {
        let path = cluster_file(dir);
        std::fs::write(&path, serde_json::to_string_pretty(self)?)
            .with_context(|| format!("writing {}", path.display()))?;
        let targets: Vec<serde_json::Value> = self
            .nodes
            .iter()
            .map(|n| {
                serde_json::json!({
                    "targets": [n.admin.to_string()],
                    "labels": { "causet_dc": n.dc.to_string(), "causet_node": n.node.to_string() },
                })
            })
            .collect();
        let path = dir.join("prometheus-targets.json");
        std::fs::write(&path, serde_json::to_string_pretty(&targets)?)
            .with_context(|| format!("writing {}", path.display()))
    }
}

/// The replicas a DC of `nodes_per_dc` nodes gets unless told otherwise: 3 (Raft groups that survive the loss of
/// one node, or of one node's disk) when it has 3 nodes or more, else 1. (Two replicas would keep a second copy
/// of every commit but stop the partition whenever either node is down.)
pub fn default_replicas(nodes_per_dc: u16) -> u16 {
    if nodes_per_dc >= 3 {
        3
    } else {
        1
    }
}

/// Parameters of `causet cluster start`.
#[derive(Clone, Debug)]
pub struct StartOptions {
    /// DCs.
    pub dcs: u16,
    /// Nodes per DC.
    pub nodes_per_dc: u16,
    /// Copies of each partition inside a DC (Raft groups when more than one).
    pub replicas: u16,
    /// Partitions per DC.
    pub partitions: u32,
    /// One-way delay between DCs, ms.
    pub wan_delay_ms: u64,
    /// Jitter, ms.
    pub jitter_ms: u64,
    /// Per DC-pair one-way delays instead of `wan_delay_ms`; it must have `dcs` DCs.
    pub wan_matrix: Option<WanMatrix>,
    /// Mutually authenticated TLS between nodes and DCs, with a CA and certificates made for this cluster in
    /// `<dir>/certs` (on by default; a cluster of one node has no links).
    pub tls: bool,
    /// Where configs, data, logs and the cluster file go.
    pub dir: PathBuf,
    /// Node i (counting DC by DC) uses ports base + 3·i (client), + 1 (admin), + 2 (replication).
    pub base_port: u16,
    /// `always` or `periodic`.
    pub sync: String,
    /// The protocol every DC runs.
    pub protocol: Protocol,
    /// Extra lines appended to every node's TOML configuration (e.g. `checkpoint_interval_s = 5`).
    pub extra_config: String,
    /// The `causet` binary to run [default: this process's own executable; tests pass
    /// `env!("CARGO_BIN_EXE_causet")`].
    pub exe: Option<PathBuf>,
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            dcs: 3,
            nodes_per_dc: 1,
            replicas: 1,
            partitions: 8,
            wan_delay_ms: 50,
            jitter_ms: 0,
            wan_matrix: None,
            tls: true,
            dir: PathBuf::from("./causet-cluster"),
            base_port: 8087,
            sync: "always".into(),
            protocol: Protocol::Cure,
            extra_config: String::new(),
            exe: None,
        }
    }
}

fn cluster_file(dir: &Path) -> PathBuf {
    dir.join("cluster.json")
}

/// Reads a cluster file.
pub fn load(dir: &Path) -> anyhow::Result<ClusterFile> {
    let path = cluster_file(dir);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} (start a cluster with `causet cluster start`)", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

fn free(addr: SocketAddr) -> bool {
    std::net::TcpListener::bind(addr).is_ok()
}

/// A port nothing listens on now and none of `taken`. It is drawn below the kernel's range of ports for outgoing
/// connections: a port the kernel hands out (port 0) is free only until the kernel hands it out again, to another
/// pick or to one of the starting nodes' connections to its peers, which once made a node fail to bind its port
/// while the start went on.
fn ephemeral(rng: &mut impl rand::RngExt, taken: &[SocketAddr]) -> anyhow::Result<SocketAddr> {
    let outgoing_from = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let range = (outgoing_from / 2).max(1024)..outgoing_from.max(2048);
    for _ in 0..1000 {
        let addr = SocketAddr::from(([127, 0, 0, 1], rng.random_range(range.clone())));
        if !taken.contains(&addr) && free(addr) {
            return Ok(addr);
        }
    }
    // Almost everything below the range is in use: fall back on the kernel's choice.
    Ok(std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?.local_addr()?)
}

/// A port of 127.0.0.1 nothing listens on now and none of `taken`, drawn as a cluster's ports are (below the
/// kernel's range for outgoing connections, so that no connection takes it before a server binds it): for tests
/// and tools that start servers of their own.
pub fn free_port(taken: &[u16]) -> anyhow::Result<u16> {
    let taken: Vec<SocketAddr> = taken.iter().map(|p| SocketAddr::from(([127, 0, 0, 1], *p))).collect();
    Ok(ephemeral(&mut rand::rng(), &taken)?.port())
}

/// Starts the processes, waits until every node serves and writes the cluster file. `base_port = 0` picks free
/// ports; since another process may take a port between the pick and the node's bind, a start on picked ports that
/// fails is retried (up to three times) on new ones. A start that fails stops the nodes it started.
pub fn start(o: &StartOptions) -> anyhow::Result<ClusterFile> {
    let attempts = if o.base_port == 0 { 3 } else { 1 };
    let mut last = None;
    for _ in 0..attempts {
        match start_once(o) {
            Ok(file) => return Ok(file),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("at least one attempt"))
}

fn start_once(o: &StartOptions) -> anyhow::Result<ClusterFile> {
    if !(1..=16).contains(&o.dcs) {
        bail!("--dcs must be between 1 and 16");
    }
    if !(1..=16).contains(&o.nodes_per_dc) {
        bail!("--nodes-per-dc must be between 1 and 16");
    }
    if o.replicas == 0 || o.replicas > o.nodes_per_dc {
        bail!("--replicas ({}) must be between 1 and --nodes-per-dc ({})", o.replicas, o.nodes_per_dc);
    }
    if o.nodes_per_dc as u32 > o.partitions {
        bail!("--nodes-per-dc ({}) exceeds --partitions ({}): a node would own none", o.nodes_per_dc, o.partitions);
    }
    if !["always", "periodic"].contains(&o.sync.as_str()) {
        bail!("--sync takes always or periodic, not {:?}", o.sync);
    }
    if let Some(m) = o.wan_matrix.as_ref().filter(|m| m.dcs() != o.dcs) {
        bail!("the WAN matrix {} has {} DCs, but the cluster has {}", m.origin, m.dcs(), o.dcs);
    }
    let delay = |from: u16, to: u16| o.wan_matrix.as_ref().map_or(o.wan_delay_ms, |m| m.one_way(from, to));
    if cluster_file(&o.dir).exists() {
        if let Ok(existing) = load(&o.dir) {
            if existing.nodes.iter().any(|n| process_alive(n.pid)) {
                bail!("a cluster is already running from {} (stop it with `causet cluster stop`)", o.dir.display());
            }
        }
    }
    std::fs::create_dir_all(&o.dir).with_context(|| format!("creating {}", o.dir.display()))?;
    let exe = match &o.exe {
        Some(exe) => exe.clone(),
        None => std::env::current_exe().context("finding the causet binary")?,
    };
    let token = format!(
        "{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    );
    // Ports of node i (DC by DC): client, admin, replication.
    let count = o.dcs as usize * o.nodes_per_dc as usize;
    let mut ports: Vec<[SocketAddr; 3]> = Vec::with_capacity(count);
    let mut picked = Vec::with_capacity(3 * count);
    let mut rng = rand::rng();
    for i in 0..count {
        let mut p = [SocketAddr::from(([127, 0, 0, 1], 0)); 3];
        for (k, slot) in p.iter_mut().enumerate() {
            *slot = if o.base_port == 0 {
                let addr = ephemeral(&mut rng, &picked)?;
                picked.push(addr);
                addr
            } else {
                let port = u16::try_from(o.base_port as usize + 3 * i + k)
                    .ok()
                    .context("ports beyond 65535: lower --base-port")?;
                let addr = SocketAddr::from(([127, 0, 0, 1], port));
                if !free(addr) {
                    bail!("port {addr} is in use: stop what holds it, or choose another --base-port");
                }
                addr
            };
        }
        ports.push(p);
    }
    let index = |dc: u16, node: u16| dc as usize * o.nodes_per_dc as usize + node as usize;
    let tls_cluster = (o.tls && count > 1).then(|| LOCAL_CLUSTER.to_string());
    let mut tls_sections = std::collections::BTreeMap::new();
    if let Some(cluster) = &tls_cluster {
        let members = causet_server::tls::every_member(o.dcs, o.nodes_per_dc);
        let certs = o.dir.join("certs");
        // A new cluster, a new CA: certificates of an earlier cluster in this directory must not let it in.
        let _ = std::fs::remove_dir_all(&certs);
        let ca = LocalCa::create().map_err(anyhow::Error::msg)?;
        for (member, tls) in ca.write_cluster(&certs, cluster, &members).map_err(anyhow::Error::msg)? {
            tls_sections.insert(member, tls_section(&tls));
        }
    }
    let workers = worker_threads_line(count, &o.extra_config);
    let mut nodes = Vec::with_capacity(count);
    for dc in 0..o.dcs {
        for node in 0..o.nodes_per_dc {
            let name = if o.nodes_per_dc == 1 { format!("dc{dc}") } else { format!("dc{dc}n{node}") };
            let data_dir = o.dir.join(&name);
            let log = o.dir.join(format!("{name}.log"));
            let [client, admin, replication] = ports[index(dc, node)];
            let mut peers = String::new();
            for peer in (0..o.dcs).filter(|p| *p != dc) {
                let addrs: Vec<String> =
                    (0..o.nodes_per_dc).map(|n| format!("\"{}\"", ports[index(peer, n)][2])).collect();
                peers.push_str(&format!(
                    "\n[[peers]]\ndc = {peer}\naddr = {}\ndelay_ms = {}\njitter_ms = {}\n",
                    if o.nodes_per_dc == 1 { addrs[0].clone() } else { format!("[{}]", addrs.join(", ")) },
                    delay(dc, peer),
                    o.jitter_ms
                ));
            }
            let members = if o.nodes_per_dc == 1 {
                String::new()
            } else {
                let addrs: Vec<String> =
                    (0..o.nodes_per_dc).map(|n| format!("\"{}\"", ports[index(dc, n)][2])).collect();
                format!("node = {node}\nnodes = [{}]\nreplicas = {}\n", addrs.join(", "), o.replicas)
            };
            let config = format!(
                "# Written by `causet cluster start`.\ndata_dir = \"{}\"\nclient_bind = \"{client}\"\n\
                 admin_bind = \"{admin}\"\nreplication_bind = \"{replication}\"\ndc = {dc}\ndcs = {}\n{members}\
                 partitions = {}\nsync = \"{}\"\nprotocol = \"{}\"\nadmin_token = \"{token}\"\n{workers}{}\n{}{peers}",
                data_dir.display(),
                o.dcs,
                o.partitions,
                o.sync,
                o.protocol,
                o.extra_config,
                tls_sections.get(&(dc, node)).map(String::as_str).unwrap_or("")
            );
            let config_path = o.dir.join(format!("{name}.toml"));
            std::fs::write(&config_path, config).with_context(|| format!("writing {}", config_path.display()))?;
            let mut n =
                ClusterNode { dc, node, client, admin, replication, pid: 0, config: config_path, data_dir, log };
            n.pid = match spawn(&exe, &n) {
                Ok(pid) => pid,
                Err(e) => {
                    for started in &nodes {
                        let started: &ClusterNode = started;
                        signal(started.pid, "KILL");
                    }
                    return Err(e);
                }
            };
            nodes.push(n);
        }
    }
    let file = ClusterFile {
        nodes,
        dcs: o.dcs,
        nodes_per_dc: o.nodes_per_dc,
        partitions: o.partitions,
        protocol: o.protocol,
        admin_token: token,
        wan_delay_ms: o.wan_delay_ms,
        wan_matrix: o.wan_matrix.clone(),
        tls_cluster,
        exe,
    };
    file.save(&o.dir)?;
    for n in &file.nodes {
        if let Err(e) = wait_serving(n, Duration::from_secs(30)) {
            stop_nodes(&file, false);
            return Err(e);
        }
    }
    // Something else answering on a node's port must not pass for the node: every process is still there.
    if let Some(n) = file.nodes.iter().find(|n| !process_alive(n.pid)) {
        let e = anyhow::anyhow!("DC {} node {} exited at start; see {}", n.dc, n.node, n.log.display());
        stop_nodes(&file, false);
        return Err(e);
    }
    Ok(file)
}

/// Prints what `causet cluster start` prints about a running cluster.
pub fn print_started(file: &ClusterFile, dir: &Path) {
    let delays = match &file.wan_matrix {
        Some(m) => format!("one-way delays from the WAN matrix {}", m.origin),
        None => format!("{} ms one-way between DCs", file.wan_delay_ms),
    };
    println!(
        "a cluster of {} DC{} ({} node{} per DC) is running ({delays}); cluster file {}",
        file.dcs,
        if file.dcs == 1 { "" } else { "s" },
        file.nodes_per_dc,
        if file.nodes_per_dc == 1 { "" } else { "s" },
        cluster_file(dir).display()
    );
    if let Some(m) = &file.wan_matrix {
        println!("{}", m.table());
    }
    println!("{:>3} {:>4}  {:<22} {:<28} {:>8}", "DC", "node", "client (AntidoteDB)", "admin (HTTP)", "pid");
    for n in &file.nodes {
        println!(
            "{:>3} {:>4}  {:<22} {:<28} {:>8}",
            n.dc,
            n.node,
            n.client.to_string(),
            format!("http://{}", n.admin),
            n.pid
        );
    }
    if let Some(first) = file.nodes.first() {
        println!(
            "web console: http://{}/ (every node's admin address serves its own; the admin token that unlocks cutting \
             and healing links is `admin_token` in the cluster file)",
            first.admin
        );
    }
    println!("stop it with: causet cluster stop --dir {}", dir.display());
}

/// The `worker_threads` line of every node's configuration: the machine's cores shared out among the `nodes` that
/// run on it (at least one each), so that a local cluster does not run more busy threads than there are cores;
/// nothing when the caller's own lines (`--node-config`) set it.
fn worker_threads_line(nodes: usize, extra_config: &str) -> String {
    let set = toml::from_str::<toml::Table>(extra_config).is_ok_and(|t| t.contains_key("worker_threads"));
    if set {
        return String::new();
    }
    format!("worker_threads = {}\n", (causet_server::config::machine_cores() / nodes.max(1)).max(1))
}

fn spawn(exe: &Path, n: &ClusterNode) -> anyhow::Result<u32> {
    let out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&n.log)
        .with_context(|| format!("opening {}", n.log.display()))?;
    let child = Command::new(exe)
        .arg("start")
        .arg("--config")
        .arg(&n.config)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .env("NO_COLOR", "1")
        .spawn()
        .with_context(|| format!("starting DC {} node {}", n.dc, n.node))?;
    let pid = child.id();
    // Reap the node when it exits (killed by the nemesis, or stopped), so that it does not linger as a zombie
    // while this process runs; a process that exits before its nodes leaves them to init.
    std::thread::Builder::new()
        .name(format!("reap-{pid}"))
        .spawn(move || {
            let mut child = child;
            let _ = child.wait();
        })
        .context("starting a thread to reap the node")?;
    Ok(pid)
}

fn wait_serving(n: &ClusterNode, within: Duration) -> anyhow::Result<()> {
    wait_until(n, within, || TcpStream::connect_timeout(&n.client, Duration::from_millis(200)).is_ok())
}

/// Waits until `serving` holds for node `n`, failing if its process exits first or `within` passes.
fn wait_until(n: &ClusterNode, within: Duration, serving: impl Fn() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    while !serving() {
        if !process_alive(n.pid) {
            bail!("DC {} node {} exited at start; see {}", n.dc, n.node, n.log.display());
        }
        if Instant::now() > deadline {
            bail!("DC {} node {} did not start serving within {within:?}; see {}", n.dc, n.node, n.log.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Kills node `i` of the cluster with SIGKILL (no shutdown: unsynced writes are lost) and waits until it is gone.
pub fn kill_node(file: &ClusterFile, i: usize) {
    let pid = file.nodes[i].pid;
    signal(pid, "KILL");
    let deadline = Instant::now() + Duration::from_secs(10);
    while process_alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Node `i` loses its disk: it is killed (SIGKILL), its data directory deleted, and its configuration told to
/// join the DC when it starts again (`join = true`: an empty data directory then starts a new disk generation,
/// and its replicas join their groups under new ids rather than claim to be the ones that were lost). Start it
/// with [`restart_node`].
pub fn wipe_node(file: &ClusterFile, i: usize) -> anyhow::Result<()> {
    kill_node(file, i);
    let n = &file.nodes[i];
    if process_alive(n.pid) {
        bail!("DC {} node {} did not die", n.dc, n.node);
    }
    if n.data_dir.exists() {
        std::fs::remove_dir_all(&n.data_dir).with_context(|| format!("deleting {}", n.data_dir.display()))?;
    }
    let config = std::fs::read_to_string(&n.config).with_context(|| format!("reading {}", n.config.display()))?;
    std::fs::write(&n.config, with_key(&config, "join", "true"))
        .with_context(|| format!("writing {}", n.config.display()))?;
    Ok(())
}

/// The name of a local cluster in its nodes' certificates (each local cluster has its own CA).
const LOCAL_CLUSTER: &str = "local";

/// A node configuration's `[tls]` table.
fn tls_section(tls: &causet_server::tls::TlsConfig) -> String {
    #[derive(serde::Serialize)]
    struct Section<'a> {
        tls: &'a causet_server::tls::TlsConfig,
    }
    // Paths and names are strings: serializing them cannot fail.
    toml::to_string(&Section { tls }).expect("a TLS configuration is TOML")
}

/// A configuration (TOML text) whose `[tls]` table is `section`.
fn with_tls(config: &str, section: &str) -> String {
    let (start, end) = match config.find("\n[tls]\n") {
        Some(start) => (start, config[start + 1..].find("\n[").map_or(config.len(), |e| start + 1 + e)),
        // Before the first table, after the top-level keys.
        None => {
            let at = config.find("\n[").unwrap_or(config.len());
            (at, at)
        }
    };
    format!("{}\n{}{}", &config[..start], section, &config[end..])
}

/// A configuration with the top-level `key` set to `value` (TOML text): its line replaced, or a line added before
/// the tables that follow the top-level keys.
fn with_key(config: &str, key: &str, value: &str) -> String {
    let prefix = format!("{key} = ");
    let top_level = config.find("\n[").unwrap_or(config.len());
    let (top, tables) = config.split_at(top_level);
    let mut lines: Vec<String> = top.lines().filter(|l| !l.starts_with(&prefix)).map(str::to_string).collect();
    lines.push(format!("{key} = {value}"));
    lines.join("\n") + tables
}

/// Adds a node to DC `dc` of a running local cluster with replicated partitions (`causet cluster add-node`),
/// online: the new node starts with the DC's nodes plus itself, `first_nodes` (the partitions stay placed over the
/// DC's first nodes) and `join`, holding no replica; it announces itself on its links, and every node of the DC
/// admits it (records it in its data directory and links back) without a restart. This waits until every running
/// node of the DC counts it (a node that is down learns of it when it is back: the new node's link keeps trying),
/// then writes it into the other nodes' configuration files too, for their next start. With `rebalance`, replicas
/// then move onto it from the nodes holding the most, one partition at a time, until it holds its share. Peer DCs
/// keep the addresses they have: they reach the DC's partitions through its first nodes. Returns the new node's
/// index.
pub fn add_node(dir: &Path, dc: u16, wait: Duration, rebalance: bool) -> anyhow::Result<u16> {
    let mut file = load(dir)?;
    let mut members: Vec<usize> = (0..file.nodes.len()).filter(|i| file.nodes[*i].dc == dc).collect();
    members.sort_by_key(|i| file.nodes[*i].node);
    anyhow::ensure!(!members.is_empty(), "the cluster in {} has no DC {dc}", dir.display());
    let first = std::fs::read_to_string(&file.nodes[members[0]].config)?;
    let value = |key: &str| first.lines().find_map(|l| l.strip_prefix(&format!("{key} = ")).map(str::to_string));
    let replicas: usize = value("replicas").and_then(|r| r.parse().ok()).unwrap_or(1);
    anyhow::ensure!(replicas > 1, "DC {dc}'s partitions are not replicated: a node cannot take any of them over");
    let first_nodes = value("first_nodes").unwrap_or_else(|| members.len().to_string());
    let index = members.len() as u16;
    // The new node's ports, unlike any of the cluster's.
    let taken: Vec<SocketAddr> = file.nodes.iter().flat_map(|n| [n.client, n.admin, n.replication]).collect();
    let mut rng = rand::rng();
    let mut picked = taken.clone();
    let mut port = || -> anyhow::Result<SocketAddr> {
        let addr = ephemeral(&mut rng, &picked)?;
        picked.push(addr);
        Ok(addr)
    };
    let (client, admin, replication) = (port()?, port()?, port()?);
    let mut addrs: Vec<String> = members.iter().map(|i| format!("\"{}\"", file.nodes[*i].replication)).collect();
    addrs.push(format!("\"{replication}\""));
    let nodes = format!("[{}]", addrs.join(", "));
    let name = format!("dc{dc}n{index}");
    let data_dir = dir.join(&name);
    let mut config = first.clone();
    for (key, value) in [
        ("data_dir", format!("\"{}\"", data_dir.display())),
        ("client_bind", format!("\"{client}\"")),
        ("admin_bind", format!("\"{admin}\"")),
        ("replication_bind", format!("\"{replication}\"")),
        ("node", index.to_string()),
        ("nodes", nodes.clone()),
        ("first_nodes", first_nodes.clone()),
        ("join", "true".into()),
    ] {
        config = with_key(&config, key, &value);
    }
    if let Some(cluster) = &file.tls_cluster {
        // The new node's own certificate, from the cluster's CA.
        let certs = dir.join("certs");
        let ca = LocalCa::open(&certs).map_err(anyhow::Error::msg)?;
        let (_, tls) = ca.write_cluster(&certs, cluster, &[(dc, index)]).map_err(anyhow::Error::msg)?.remove(0);
        config = with_tls(&config, &tls_section(&tls));
    }
    let config_path = dir.join(format!("{name}.toml"));
    std::fs::write(&config_path, config).with_context(|| format!("writing {}", config_path.display()))?;
    let log = dir.join(format!("{name}.log"));
    let mut n = ClusterNode { dc, node: index, client, admin, replication, pid: 0, config: config_path, data_dir, log };
    n.pid = spawn(&file.exe, &n)?;
    file.nodes.push(n);
    file.save(dir)?;
    let new = file.nodes.len() - 1;
    wait_serving(&file.nodes[new], Duration::from_secs(30))?;
    println!("DC {dc} node {index} started (client {client}, admin {admin}); waiting for the DC's nodes to admit it");
    wait_admitted(&file, &members, index, wait)?;
    // For the other nodes' next start (they would know it from their data directories anyway).
    for &i in &members {
        let path = &file.nodes[i].config;
        let config = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let config = with_key(&with_key(&config, "nodes", &nodes), "first_nodes", &first_nodes);
        std::fs::write(path, config).with_context(|| format!("writing {}", path.display()))?;
    }
    println!("DC {dc} has {} nodes", index + 1);
    if rebalance {
        rebalance_onto(dir, dc, index, wait)?;
    }
    Ok(index)
}

/// Waits until every running node of `members` reports at least `index + 1` nodes in its `/status`, printing
/// which are left every few seconds.
fn wait_admitted(file: &ClusterFile, members: &[usize], index: u16, within: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + within;
    let mut said = Instant::now();
    loop {
        let counts = |i: &usize| {
            let status = status_of(file.nodes[*i].admin);
            status.and_then(|v| v["nodes"].as_u64()).is_some_and(|n| n > u64::from(index))
        };
        let left: Vec<u16> = (members.iter())
            .filter(|i| process_alive(file.nodes[**i].pid) && !counts(i))
            .map(|i| file.nodes[*i].node)
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "nodes {left:?} did not admit node {index} within {} s (see their logs)",
            within.as_secs()
        );
        if said.elapsed() >= Duration::from_secs(5) {
            said = Instant::now();
            println!("  waiting for nodes {left:?} to admit node {index}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Moves replicas of DC `dc` onto node `to` from the nodes holding the most, one partition at a time
/// ([`next_move`]), until `to` holds its share.
fn rebalance_onto(dir: &Path, dc: u16, to: u16, wait: Duration) -> anyhow::Result<()> {
    let file = load(dir)?;
    loop {
        let (_, entries) = placement(&file, dc)?;
        let Some((p, from)) = next_move(&entries, to) else {
            let load = voters_per_node(&entries, usize::from(to) + 1);
            println!("node {to} holds {} replicas; per node: {load:?}", load[usize::from(to)]);
            return Ok(());
        };
        println!("partition {p}: moving its replica from node {from} to node {to}");
        move_replica(dir, dc, p, from, to, wait)?;
    }
}

/// How many voters each of the first `nodes` nodes holds, over every partition of a placement.
fn voters_per_node(entries: &[serde_json::Value], nodes: usize) -> Vec<usize> {
    let mut load = vec![0usize; nodes];
    for n in entries.iter().flat_map(|e| placed(e, "voters")) {
        if let Some(l) = load.get_mut(n as usize) {
            *l += 1;
        }
    }
    load
}

/// The next replica to move onto node `to` (the highest node index of the DC) to even the load: `(partition,
/// from)`, from the node holding the most voters (the lowest partition, then node, first), of a partition `to`
/// does not hold and that is not changing its membership. `None` once `to` holds its share (the DC's voters over
/// its nodes, rounded down) or no node holds two more than it.
fn next_move(entries: &[serde_json::Value], to: u16) -> Option<(u32, u16)> {
    let load = voters_per_node(entries, usize::from(to) + 1);
    let (share, mine) = (load.iter().sum::<usize>() / load.len(), load[usize::from(to)]);
    if mine >= share {
        return None;
    }
    let settled = |e: &&serde_json::Value| placed(e, "learners").is_empty() && placed(e, "outgoing").is_empty();
    (entries.iter().filter(settled))
        .filter(|e| !placed(e, "voters").contains(&u64::from(to)))
        .flat_map(|e| placed(e, "voters").into_iter().map(move |n| (n, e["partition"].as_u64())))
        .filter(|(n, p)| p.is_some() && load.get(*n as usize).is_some_and(|l| *l > mine + 1))
        .max_by_key(|(n, p)| (load[*n as usize], std::cmp::Reverse(*p), std::cmp::Reverse(*n)))
        .map(|(n, p)| (p.unwrap_or_default() as u32, n as u16))
}

/// Starts node `i` again from its configuration and data (after [`kill_node`] or a crash), waits until it serves,
/// and records its new pid in the cluster file.
pub fn restart_node(file: &mut ClusterFile, dir: &Path, i: usize) -> anyhow::Result<()> {
    if process_alive(file.nodes[i].pid) {
        bail!("DC {} node {} is still running (pid {})", file.nodes[i].dc, file.nodes[i].node, file.nodes[i].pid);
    }
    // The log is appended to: only what this start writes after `from` counts.
    let from = std::fs::metadata(&file.nodes[i].log).map_or(0, |m| m.len());
    let pid = spawn(&file.exe, &file.nodes[i])?;
    file.nodes[i].pid = pid;
    file.save(dir)?;
    // Not an answer on the node's port: another process may have taken it while the node was down, and answer in
    // its place (the node then fails to bind it and exits). The node's own word that it serves, in its log (it
    // says so once its listeners are bound).
    let n = &file.nodes[i];
    wait_until(n, Duration::from_secs(60), || said_serving_since(n, from))
}

/// Whether node `n`'s log, from byte `from` on, says it serves clients on its address.
fn said_serving_since(n: &ClusterNode, from: u64) -> bool {
    use std::io::Seek;
    let line = format!("causet is serving AntidoteDB's protocol on {}", n.client);
    let mut tail = Vec::new();
    let read = std::fs::File::open(&n.log)
        .and_then(|mut f| f.seek(std::io::SeekFrom::Start(from)).and_then(|_| f.read_to_end(&mut tail)));
    read.is_ok() && String::from_utf8_lossy(&tail).contains(&line)
}

/// Sends SIGSTOP (`pause = true`) or SIGCONT to node `i`: a process pause.
pub fn pause_node(file: &ClusterFile, i: usize, pause: bool) {
    signal(file.nodes[i].pid, if pause { "STOP" } else { "CONT" });
}

/// Whether the process `pid` runs (and is not a zombie).
pub fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
}

/// Stops every node: SIGCONT (a paused node cannot stop), SIGTERM (graceful), then SIGKILL after 15 s.
pub fn stop(dir: &Path) -> anyhow::Result<()> {
    let file = load(dir)?;
    stop_nodes(&file, true);
    Ok(())
}

/// Stops the cluster started from a directory when dropped, even while a test's assertion unwinds: every node the
/// cluster file names then (restarted nodes included: `restart_node` records their pids there).
pub struct StopOnDrop<'a>(pub &'a Path);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        if let Ok(file) = load(self.0) {
            stop_nodes(&file, false);
        }
    }
}

/// Stops the cluster's processes; `verbose` prints each node's outcome.
pub fn stop_nodes(file: &ClusterFile, verbose: bool) {
    for n in &file.nodes {
        if process_alive(n.pid) {
            signal(n.pid, "CONT");
            signal(n.pid, "TERM");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    for n in &file.nodes {
        while process_alive(n.pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let outcome = if process_alive(n.pid) {
            signal(n.pid, "KILL");
            "did not stop in time: killed"
        } else {
            "stopped"
        };
        if verbose {
            println!("DC {} node {} {outcome}", n.dc, n.node);
        }
    }
}

/// A POST with the admin token over a plain socket: the status code and the body.
pub fn http_post(addr: SocketAddr, path: &str, token: &str) -> anyhow::Result<(u16, String)> {
    let (code, body) = http_request(addr, "POST", path, Some(token), &[], Duration::from_secs(10))?;
    Ok((code, String::from_utf8_lossy(&body).into_owned()))
}

/// One HTTP/1.0 request over a plain socket (the admin API's few calls need no HTTP client): the status code and
/// the body's bytes. `token` goes in `Authorization: Bearer`; `timeout` bounds each read.
pub fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: &[u8],
    timeout: Duration,
) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(timeout))?;
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    write!(s, "{method} {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}Content-Length: {}\r\n\r\n", body.len())?;
    s.write_all(body)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let split = out.windows(4).position(|w| w == b"\r\n\r\n").map_or(out.len(), |i| i + 4);
    let head = String::from_utf8_lossy(&out[..split]);
    let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    Ok((code, out[split..].to_vec()))
}

/// Where DC `dc`'s replicated partitions live, as a running node of it reports (`placement` in its `/status`),
/// and that node.
pub fn placement(file: &ClusterFile, dc: u16) -> anyhow::Result<(usize, Vec<serde_json::Value>)> {
    for (i, n) in file.nodes.iter().enumerate().filter(|(_, n)| n.dc == dc && process_alive(n.pid)) {
        if let Some(p) = status_of(n.admin).and_then(|v| v["placement"].as_array().cloned()) {
            return Ok((i, p));
        }
    }
    anyhow::bail!("no node of DC {dc} answers /status")
}

/// The nodes of a placement entry in one role (`voters`, `learners`, `outgoing`).
fn placed(entry: &serde_json::Value, role: &str) -> Vec<u64> {
    entry[role].as_array().into_iter().flatten().filter_map(|m| m["node"].as_u64()).collect()
}

/// Asks a running node of DC `dc` for `path` (a move or a retirement), then, unless `wait` is zero, repeats the
/// request every few seconds (it is idempotent: a node that was down meanwhile is asked again) and prints the
/// placement of the partitions `watch` names until `done` holds for every one, or `wait` passes.
fn operate(
    file: &ClusterFile,
    dc: u16,
    path: &str,
    wait: Duration,
    watch: impl Fn(&serde_json::Value) -> bool,
    done: impl Fn(&serde_json::Value) -> bool,
) -> anyhow::Result<()> {
    let ask = || -> anyhow::Result<()> {
        let (i, _) = placement(file, dc)?;
        let (code, body) = http_post(file.nodes[i].admin, path, &file.admin_token)?;
        anyhow::ensure!(
            (200..300).contains(&code),
            "DC {dc} node {} refused ({code}): {}",
            file.nodes[i].node,
            body.trim()
        );
        print!("{body}");
        Ok(())
    };
    ask()?;
    if wait.is_zero() {
        return Ok(());
    }
    let (started, mut asked) = (Instant::now(), Instant::now());
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let (_, entries) = placement(file, dc)?;
        let watched: Vec<&serde_json::Value> = entries.iter().filter(|e| watch(e)).collect();
        let left: Vec<String> = (watched.iter().filter(|e| !done(e)))
            .map(|e| {
                let (v, l, o) = (placed(e, "voters"), placed(e, "learners"), placed(e, "outgoing"));
                format!("partition {}: voters {v:?} learners {l:?} leaving {o:?}", e["partition"])
            })
            .collect();
        if left.is_empty() {
            println!("done in {:.1} s", started.elapsed().as_secs_f64());
            return Ok(());
        }
        println!("{:.0} s: {} to go; {}", started.elapsed().as_secs_f64(), left.len(), left.join("; "));
        anyhow::ensure!(started.elapsed() < wait, "not done within {} s", wait.as_secs());
        if asked.elapsed() >= Duration::from_secs(5) {
            asked = Instant::now();
            // Again: a target that was down, or a leader that changed meanwhile, gets the request anew.
            let (i, _) = placement(file, dc)?;
            let _ = http_post(file.nodes[i].admin, path, &file.admin_token);
        }
    }
}

/// Moves partition `p`'s replica in DC `dc` from node `from` to node `to` (`causet cluster move`), waiting up to
/// `wait` for the group to show it.
pub fn move_replica(dir: &Path, dc: u16, p: u32, from: u16, to: u16, wait: Duration) -> anyhow::Result<()> {
    let file = load(dir)?;
    let path = format!("/admin/partitions/{p}/move?from={from}&to={to}");
    let this = |e: &serde_json::Value| e["partition"].as_u64() == Some(u64::from(p));
    let done = |e: &serde_json::Value| {
        let voters = placed(e, "voters");
        voters.contains(&u64::from(to))
            && !voters.contains(&u64::from(from))
            && placed(e, "learners").is_empty()
            && placed(e, "outgoing").is_empty()
    };
    operate(&file, dc, &path, wait, this, done)
}

/// Moves every replica off node `node` of DC `dc` (`causet cluster retire`; the node may be down), waiting up to
/// `wait` until no group counts it.
pub fn retire(dir: &Path, dc: u16, node: u16, wait: Duration) -> anyhow::Result<()> {
    let file = load(dir)?;
    let on = |e: &serde_json::Value| {
        ["voters", "learners", "outgoing"].iter().any(|r| placed(e, r).contains(&u64::from(node)))
    };
    let off = |e: &serde_json::Value| !on(e);
    // Every partition: one that still counts the node is not done.
    operate(&file, dc, &format!("/admin/nodes/{node}/retire"), wait, |_| true, off)?;
    // For good: every node of the DC keeps it retired across restarts.
    for n in file.nodes.iter().filter(|n| n.dc == dc) {
        let config = std::fs::read_to_string(&n.config).with_context(|| format!("reading {}", n.config.display()))?;
        let listed = config.lines().find_map(|l| l.strip_prefix("retired_nodes = ")).unwrap_or("[]");
        let mut retired: Vec<u16> =
            listed.trim_matches(['[', ']']).split(',').filter_map(|s| s.trim().parse().ok()).collect();
        if !retired.contains(&node) {
            retired.push(node);
            retired.sort_unstable();
            let value = format!("{retired:?}");
            std::fs::write(&n.config, with_key(&config, "retired_nodes", &value))
                .with_context(|| format!("writing {}", n.config.display()))?;
        }
    }
    Ok(())
}

/// A node's `/status`, parsed; `None` if it does not answer with JSON.
fn status_of(admin: SocketAddr) -> Option<serde_json::Value> {
    http_get(admin, "/status").ok().and_then(|b| serde_json::from_str(&b).ok())
}

/// A GET over a plain socket (one request; no HTTP client dependency).
pub fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    let (_, body) = http_request(addr, "GET", path, None, &[], Duration::from_secs(5))?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Prints each DC's process state, stable snapshot and links.
pub fn status(dir: &Path) -> anyhow::Result<()> {
    let file = load(dir)?;
    for d in &file.nodes {
        if !process_alive(d.pid) {
            println!("DC {} node {}: not running (pid {})", d.dc, d.node, d.pid);
            continue;
        }
        match status_of(d.admin) {
            None => println!("DC {} node {}: running (pid {}), /status unreachable", d.dc, d.node, d.pid),
            Some(v) => {
                let now = v["now_us"].as_u64().unwrap_or(0);
                let ages: Vec<String> = v["stable_snapshot"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|t| {
                                let us = t.as_u64().unwrap_or(0) >> causet_core::time::LOGICAL_BITS;
                                format!("{:.1} ms", now.saturating_sub(us) as f64 / 1000.0)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let links: Vec<String> = v["links"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|l| {
                                let state = if l["cut"].as_bool() == Some(true) {
                                    "cut"
                                } else if l["connected"].as_bool() == Some(true) {
                                    "up"
                                } else {
                                    "down"
                                };
                                format!("DC {} node {} {state}", l["dc"], l["node"])
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                println!(
                    "DC {} node {}: client {}, open transactions {}, stable snapshot age per DC [{}], links [{}]",
                    d.dc,
                    d.node,
                    d.client,
                    v["open_transactions"],
                    ages.join(", "),
                    links.join(", ")
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A placement as `/status` shows it: each partition's voters, learners and outgoing voters, by node.
    fn placement_of(groups: &[(&[u64], &[u64])]) -> Vec<serde_json::Value> {
        let members = |nodes: &[u64]| nodes.iter().map(|n| serde_json::json!({ "node": n, "generation": 0 })).collect();
        let entry = |(p, (voters, learners)): (usize, &(&[u64], &[u64]))| {
            let (v, l): (Vec<serde_json::Value>, Vec<serde_json::Value>) = (members(voters), members(learners));
            serde_json::json!({ "partition": p, "leader": voters[0], "voters": v, "learners": l, "outgoing": [] })
        };
        groups.iter().enumerate().map(entry).collect()
    }

    #[test]
    fn a_new_node_takes_replicas_from_the_busiest_nodes_until_it_holds_its_share() {
        // Six partitions in groups of three over nodes 0..3, node 3 new: 18 voters, a share of 4 for node 3.
        let mut groups: Vec<(Vec<u64>, Vec<u64>)> =
            (0..6u64).map(|p| ((0..3).map(|k| (p + k) % 3).collect(), Vec::new())).collect();
        let view = |g: &[(Vec<u64>, Vec<u64>)]| {
            let borrowed: Vec<(&[u64], &[u64])> = g.iter().map(|(v, l)| (&v[..], &l[..])).collect();
            placement_of(&borrowed)
        };
        let mut moves = Vec::new();
        while let Some((p, from)) = next_move(&view(&groups), 3) {
            let voters = &mut groups[p as usize].0;
            assert!(!voters.contains(&3), "partition {p} moved onto node 3 twice");
            let at = voters.iter().position(|n| *n == u64::from(from)).expect("from holds a voter");
            voters[at] = 3;
            moves.push((p, from));
            assert!(moves.len() <= 6, "no end to the moves: {moves:?}");
        }
        let load = voters_per_node(&view(&groups), 4);
        assert_eq!(load[3], 4, "node 3 holds its share: {moves:?}");
        assert!(load.iter().max().unwrap() - load.iter().min().unwrap() <= 1, "uneven: {load:?} after {moves:?}");
        assert_eq!(moves[0], (0, 0), "the busiest node first, the lowest partition first");
        // A group that is changing its membership is left alone.
        let busy = placement_of(&[(&[0, 1, 2], &[3]), (&[1, 2, 0], &[])]);
        assert_eq!(next_move(&busy, 3), Some((1, 0)));
        // A DC already even: nothing to move.
        let even = placement_of(&[(&[0, 1, 3], &[]), (&[1, 2, 3], &[]), (&[2, 0, 1], &[])]);
        assert_eq!(next_move(&even, 3), None);
    }

    #[test]
    fn local_nodes_share_the_cores_unless_told_otherwise() {
        let cores = causet_server::config::machine_cores();
        let line = |nodes, extra| {
            let line = worker_threads_line(nodes, extra);
            let table: toml::Table = toml::from_str(&format!("{line}{extra}")).expect("one valid TOML table");
            table["worker_threads"].as_integer().expect("set")
        };
        assert_eq!(line(1, ""), cores as i64, "one node gets every core");
        assert_eq!(line(cores * 4, ""), 1, "at least one thread each");
        assert_eq!(line(9, "worker_threads = 3\nshards = 1\n"), 3, "--node-config's value, written once");
        assert_eq!(worker_threads_line(9, "worker_threads = 3\n"), "");
    }

    #[test]
    fn a_configurations_keys_and_tls_table_are_replaced_in_place() {
        let config = "dc = 0\nnode = 0\n\n[tls]\nca = \"a\"\ncert = \"c0\"\nkey = \"k0\"\ncluster = \"local\"\n\n[[peers]]\ndc = 1\n";
        let tls = causet_server::tls::TlsConfig {
            ca: "a".into(),
            cert: "c1".into(),
            key: "k1".into(),
            cluster: "local".into(),
        };
        let changed = with_key(&with_tls(config, &tls_section(&tls)), "node", "1");
        let parsed: toml::Value = toml::from_str(&changed).expect("still TOML");
        assert_eq!(parsed["node"].as_integer(), Some(1));
        assert_eq!(parsed["tls"]["cert"].as_str(), Some("c1"));
        assert_eq!(parsed["tls"]["key"].as_str(), Some("k1"));
        assert_eq!(parsed["peers"][0]["dc"].as_integer(), Some(1));
        // A configuration without TLS gains the table before its peers.
        let plain = "dc = 0\n\n[[peers]]\ndc = 1\n";
        let parsed: toml::Value = toml::from_str(&with_tls(plain, &tls_section(&tls))).expect("TOML");
        assert_eq!((parsed["tls"]["cert"].as_str(), parsed["peers"][0]["dc"].as_integer()), (Some("c1"), Some(1)));
    }
}
