//! `causet cluster`: a local multi-DC cluster of real `causet start` processes on loopback, connected to each
//! other with an emulated WAN delay; a cluster file other commands read; `stop` and `status`.

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One DC of a local cluster.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterDc {
    /// The DC's index.
    pub dc: u16,
    /// AntidoteDB's client protocol.
    pub client: SocketAddr,
    /// Admin HTTP.
    pub admin: SocketAddr,
    /// Replication links from the other DCs.
    pub replication: SocketAddr,
    /// The process.
    pub pid: u32,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// Its log file.
    pub log: PathBuf,
}

/// The cluster file (`<dir>/cluster.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterFile {
    /// The DCs.
    pub dcs: Vec<ClusterDc>,
    /// The admin token of every node (fault injection).
    pub admin_token: String,
    /// One-way delay between DCs, ms.
    pub wan_delay_ms: u64,
}

/// Parameters of `causet cluster start`.
pub struct StartOptions {
    /// DCs.
    pub dcs: u16,
    /// Partitions per DC.
    pub partitions: u32,
    /// One-way delay between DCs, ms.
    pub wan_delay_ms: u64,
    /// Jitter, ms.
    pub jitter_ms: u64,
    /// Where configs, data, logs and the cluster file go.
    pub dir: PathBuf,
    /// DC d uses ports base + 10·d (client), + 1 (admin), + 2 (replication).
    pub base_port: u16,
    /// `always` or `periodic`.
    pub sync: String,
    /// `cure`, `gentlerain` or `eventual`.
    pub protocol: String,
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

/// Starts the processes, waits until every DC serves, writes the cluster file and prints the DCs' ports.
pub fn start(o: StartOptions) -> anyhow::Result<()> {
    if !(1..=16).contains(&o.dcs) {
        bail!("--dcs must be between 1 and 16");
    }
    if cluster_file(&o.dir).exists() {
        if let Ok(existing) = load(&o.dir) {
            if existing.dcs.iter().any(|d| process_alive(d.pid)) {
                bail!("a cluster is already running from {} (stop it with `causet cluster stop`)", o.dir.display());
            }
        }
    }
    std::fs::create_dir_all(&o.dir).with_context(|| format!("creating {}", o.dir.display()))?;
    let exe = std::env::current_exe().context("finding the causet binary")?;
    let token = format!(
        "{:x}{:x}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    );
    let port = |dc: u16, k: u16| -> anyhow::Result<SocketAddr> {
        let p = o.base_port.checked_add(dc * 10 + k).context("ports beyond 65535: lower --base-port")?;
        Ok(SocketAddr::from(([127, 0, 0, 1], p)))
    };
    let mut dcs = Vec::new();
    for dc in 0..o.dcs {
        for k in 0..3 {
            let addr = port(dc, k)?;
            if !free(addr) {
                bail!("port {addr} is in use: stop what holds it, or choose another --base-port");
            }
        }
    }
    for dc in 0..o.dcs {
        let data_dir = o.dir.join(format!("dc{dc}"));
        let log = o.dir.join(format!("dc{dc}.log"));
        let (client, admin, replication) = (port(dc, 0)?, port(dc, 1)?, port(dc, 2)?);
        let mut peers = String::new();
        for peer in (0..o.dcs).filter(|p| *p != dc) {
            peers.push_str(&format!(
                "\n[[peers]]\ndc = {peer}\naddr = \"{}\"\ndelay_ms = {}\njitter_ms = {}\n",
                port(peer, 2)?,
                o.wan_delay_ms,
                o.jitter_ms
            ));
        }
        let config = format!(
            "# Written by `causet cluster start`.\ndata_dir = \"{}\"\nclient_bind = \"{client}\"\nadmin_bind = \"{admin}\"\n\
             replication_bind = \"{replication}\"\ndc = {dc}\ndcs = {}\npartitions = {}\nsync = \"{}\"\nprotocol = \"{}\"\n\
             admin_token = \"{token}\"\n{peers}",
            data_dir.display(),
            o.dcs,
            o.partitions,
            o.sync,
            o.protocol
        );
        let config_path = o.dir.join(format!("dc{dc}.toml"));
        std::fs::write(&config_path, config).with_context(|| format!("writing {}", config_path.display()))?;
        let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let child = Command::new(&exe)
            .arg("start")
            .arg("--config")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .env("NO_COLOR", "1")
            .spawn()
            .with_context(|| format!("starting DC {dc}"))?;
        dcs.push(ClusterDc { dc, client, admin, replication, pid: child.id(), data_dir, log });
    }
    let file = ClusterFile { dcs: dcs.clone(), admin_token: token, wan_delay_ms: o.wan_delay_ms };
    std::fs::write(cluster_file(&o.dir), serde_json::to_string_pretty(&file)?)?;
    let deadline = Instant::now() + Duration::from_secs(30);
    for d in &dcs {
        while TcpStream::connect_timeout(&d.client, Duration::from_millis(200)).is_err() {
            if !process_alive(d.pid) {
                bail!("DC {} exited at start; see {}", d.dc, d.log.display());
            }
            if Instant::now() > deadline {
                bail!("DC {} did not start serving within 30 s; see {}", d.dc, d.log.display());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    println!(
        "a {}-DC cluster is running ({} ms one-way between DCs); cluster file {}",
        o.dcs,
        o.wan_delay_ms,
        cluster_file(&o.dir).display()
    );
    println!("{:>3}  {:<22} {:<22} {:>8}", "DC", "client (AntidoteDB)", "admin (HTTP)", "pid");
    for d in &dcs {
        println!("{:>3}  {:<22} {:<22} {:>8}", d.dc, d.client.to_string(), format!("http://{}", d.admin), d.pid);
    }
    println!("stop it with: causet cluster stop --dir {}", o.dir.display());
    Ok(())
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status();
}

/// Stops every DC: SIGTERM (graceful), then SIGKILL after 15 s.
pub fn stop(dir: &Path) -> anyhow::Result<()> {
    let file = load(dir)?;
    for d in &file.dcs {
        if process_alive(d.pid) {
            signal(d.pid, "TERM");
        }
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    for d in &file.dcs {
        while process_alive(d.pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        if process_alive(d.pid) {
            signal(d.pid, "KILL");
            println!("DC {} did not stop in time: killed", d.dc);
        } else {
            println!("DC {} stopped", d.dc);
        }
    }
    Ok(())
}

/// A GET over a plain socket (one request; no HTTP client dependency).
pub fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default())
}

/// Prints each DC's process state, stable snapshot and links.
pub fn status(dir: &Path) -> anyhow::Result<()> {
    let file = load(dir)?;
    for d in &file.dcs {
        if !process_alive(d.pid) {
            println!("DC {}: not running (pid {})", d.dc, d.pid);
            continue;
        }
        match http_get(d.admin, "/status").ok().and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok()) {
            None => println!("DC {}: running (pid {}), /status unreachable", d.dc, d.pid),
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
                                format!("DC {} {state}", l["dc"])
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                println!(
                    "DC {}: client {}, open transactions {}, stable snapshot age per DC [{}], links [{}]",
                    d.dc,
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
