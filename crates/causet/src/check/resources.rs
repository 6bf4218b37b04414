//! What every node of a checked cluster holds over the run: resident memory, threads, open files and its data
//! directory's size, sampled from `/proc` and the disk at a fixed interval (the node processes are local). A soak
//! (`causet check --duration 30m`) must show each bounded: the report gives, per node, the first sample after
//! warm-up, the largest and the last, and a plot over time.

use crate::cluster::{self, ClusterNode};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One node at one moment.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Sample {
    /// Seconds since the workload started.
    pub t_s: f64,
    /// The node's DC.
    pub dc: u16,
    /// The node.
    pub node: u16,
    /// Its process then (a restarted node has a new one).
    pub pid: u32,
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// Threads.
    pub threads: u64,
    /// Open file descriptors (files, sockets, the storage engine's files).
    pub open_files: u64,
    /// Bytes allocated on disk under its data directory (blocks, not apparent sizes: the storage engine
    /// preallocates its journal).
    pub disk_bytes: u64,
}

/// The node's sample, if its process is alive (a killed node has none until it restarts).
pub fn sample(n: &ClusterNode, t_s: f64) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", n.pid)).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok())
    };
    let open_files = std::fs::read_dir(format!("/proc/{}/fd", n.pid)).ok()?.count() as u64;
    Some(Sample {
        t_s,
        dc: n.dc,
        node: n.node,
        pid: n.pid,
        rss_bytes: field("VmRSS:")? * 1024,
        threads: field("Threads:")?,
        open_files,
        disk_bytes: dir_size(&n.data_dir),
    })
}

/// Bytes allocated to the files under `dir` (what can be read of them: the engine adds and removes files as it
/// goes).
fn dir_size(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => todo.push(e.path()),
                Ok(m) => total += m.blocks() * 512,
                Err(_) => {}
            }
        }
    }
    total
}

/// A thread sampling every node of the cluster in `dir` (its cluster file names the current processes) every
/// `interval` until stopped.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Vec<Sample>>,
}

impl Sampler {
    /// Starts sampling now; times are counted from `epoch`.
    pub fn start(dir: PathBuf, interval: Duration, epoch: Instant) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut samples = Vec::new();
            let mut next = Instant::now();
            while !flag.load(Ordering::Relaxed) {
                if Instant::now() >= next {
                    let t_s = epoch.elapsed().as_secs_f64();
                    if let Ok(file) = cluster::load(&dir) {
                        samples.extend(file.nodes.iter().filter_map(|n| sample(n, t_s)));
                    }
                    next += interval;
                }
                std::thread::sleep(Duration::from_millis(100).min(interval));
            }
            samples
        });
        Sampler { stop, handle }
    }

    /// Stops and returns the samples.
    pub fn finish(self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// The nodes sampled, ascending.
fn nodes(samples: &[Sample]) -> Vec<(u16, u16)> {
    let mut nodes: Vec<(u16, u16)> = samples.iter().map(|s| (s.dc, s.node)).collect();
    nodes.sort_unstable();
    nodes.dedup();
    nodes
}

/// Per node: the first sample at or after `warm_s` (or the first), the largest of each measure, and the last.
pub fn table(samples: &[Sample], warm_s: f64) -> String {
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    let mut out = String::from(
        "| node | samples | RSS MiB first → max → last | threads first → max → last | open files first → max → last | disk MiB first → max → last |\n|---|---:|---|---|---|---|\n",
    );
    for (dc, node) in nodes(samples) {
        let mine: Vec<&Sample> = samples.iter().filter(|s| (s.dc, s.node) == (dc, node)).collect();
        let first = mine.iter().find(|s| s.t_s >= warm_s).or(mine.first()).copied();
        let (Some(first), Some(last)) = (first, mine.last().copied()) else { continue };
        let max = |f: fn(&Sample) -> u64| mine.iter().map(|s| f(s)).max().unwrap_or(0);
        out.push_str(&format!(
            "| dc{dc}-n{node} | {} | {:.0} → {:.0} → {:.0} | {} → {} → {} | {} → {} → {} | {:.1} → {:.1} → {:.1} |\n",
            mine.len(),
            mb(first.rss_bytes),
            mb(max(|s| s.rss_bytes)),
            mb(last.rss_bytes),
            first.threads,
            max(|s| s.threads),
            last.threads,
            first.open_files,
            max(|s| s.open_files),
            last.open_files,
            mb(first.disk_bytes),
            mb(max(|s| s.disk_bytes)),
            mb(last.disk_bytes),
        ));
    }
    out
}

/// An SVG of every node's RSS, threads, open files and disk over the run.
pub fn plot(samples: &[Sample], path: &Path) -> anyhow::Result<()> {
    let nodes = nodes(samples);
    let series = |f: &dyn Fn(&Sample) -> f64| -> Vec<causet_bench::plot::Line> {
        (nodes.iter())
            .map(|&(dc, node)| {
                let points = samples.iter().filter(|s| (s.dc, s.node) == (dc, node)).map(|s| (s.t_s, f(s))).collect();
                (format!("dc{dc}-n{node}"), points)
            })
            .collect()
    };
    let mib = (1u64 << 20) as f64;
    let panels = [
        ("resident memory (MiB)", series(&|s| s.rss_bytes as f64 / mib)),
        ("threads", series(&|s| s.threads as f64)),
        ("open files", series(&|s| s.open_files as f64)),
        ("data directory (MiB)", series(&|s| s.disk_bytes as f64 / mib)),
    ];
    causet_bench::plot::time_panels(path, "causet check: every node's resources over the run", &panels)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_s: f64, rss_mib: u64) -> Sample {
        Sample {
            t_s,
            dc: 0,
            node: 1,
            pid: 7,
            rss_bytes: rss_mib << 20,
            threads: 9,
            open_files: 40,
            disk_bytes: 3 << 20,
        }
    }

    #[test]
    fn the_table_gives_first_after_warm_up_max_and_last() {
        let table = table(&[at(1.0, 50), at(20.0, 100), at(40.0, 180), at(60.0, 120)], 10.0);
        assert!(
            table.contains("| dc0-n1 | 4 | 100 → 180 → 120 | 9 → 9 → 9 | 40 → 40 → 40 | 3.0 → 3.0 → 3.0 |"),
            "{table}"
        );
    }

    #[test]
    fn this_process_can_be_sampled() {
        let me = ClusterNode {
            dc: 0,
            node: 0,
            client: "127.0.0.1:1".parse().unwrap(),
            admin: "127.0.0.1:2".parse().unwrap(),
            replication: "127.0.0.1:3".parse().unwrap(),
            pid: std::process::id(),
            config: PathBuf::new(),
            data_dir: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src"),
            log: PathBuf::new(),
        };
        let s = sample(&me, 0.0).expect("this process is alive");
        assert!(s.rss_bytes > 1 << 20 && s.threads >= 1 && s.open_files >= 3 && s.disk_bytes > 10_000, "{s:?}");
        let gone = ClusterNode { pid: u32::MAX, ..me };
        assert_eq!(sample(&gone, 0.0), None, "no process, no sample");
    }
}
