//! The nemesis: a fault schedule derived from a seed, and its execution against a running cluster.
//!
//! The schedule is a pure function of the seed, the cluster's shape and the run's length, computed before the
//! run starts (same seed, same schedule), so a failing run names the faults it saw and replays them. Each fault
//! that lasts (a kill, a pause, a link cut) is an interval with a start and an end event; intervals never overlap
//! on one target (a node is never both killed and paused; a link is cut once at a time). Clock jumps are
//! instantaneous: they set the node's clock offset, forward or backward of the current one.

use crate::cluster::{self, ClusterFile};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

/// One fault action, applied at a point of the run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// SIGKILL the node (no shutdown: whatever it did not sync is lost).
    Kill {
        /// Index into the cluster's nodes.
        node: usize,
    },
    /// SIGKILL the node and delete its data directory: its disk is lost. The restart that follows starts it empty,
    /// joining its DC (its replicas join their groups under new ids, and are caught up by the others).
    Wipe {
        /// Index into the cluster's nodes.
        node: usize,
    },
    /// Start the killed node again from its data directory.
    Restart {
        /// Index into the cluster's nodes.
        node: usize,
    },
    /// SIGSTOP the node: it stops answering, its connections stay open.
    Pause {
        /// Index into the cluster's nodes.
        node: usize,
    },
    /// SIGCONT the paused node.
    Resume {
        /// Index into the cluster's nodes.
        node: usize,
    },
    /// Cut the WAN link between two DCs, both ways (every node of each side is told).
    Cut {
        /// One DC.
        a: u16,
        /// The other DC.
        b: u16,
    },
    /// Heal the link.
    Heal {
        /// One DC.
        a: u16,
        /// The other DC.
        b: u16,
    },
    /// Cut the link between two nodes of one DC, both ways (each end is told).
    CutNodes {
        /// Index into the cluster's nodes.
        a: usize,
        /// Index into the cluster's nodes, in `a`'s DC.
        b: usize,
    },
    /// Heal the link between two nodes of one DC.
    HealNodes {
        /// Index into the cluster's nodes.
        a: usize,
        /// Index into the cluster's nodes, in `a`'s DC.
        b: usize,
    },
    /// Set the node's clock offset from the system clock (a jump by the difference from the previous offset; a
    /// restart keeps it, a wipe resets it to 0). A node's clock never reads backwards: a backward jump makes it stand still until
    /// the system clock catches up.
    Clock {
        /// Index into the cluster's nodes.
        node: usize,
        /// The new offset, ms.
        offset_ms: i64,
        /// The jump: the new offset minus the previous one, ms (0 in files written before it was recorded).
        #[serde(default)]
        jump_ms: i64,
    },
}

impl Fault {
    /// The kind's name in reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Kill { .. } => "kill -9",
            Fault::Wipe { .. } => "kill -9 and data directory deleted",
            Fault::Restart { .. } => "restart",
            Fault::Pause { .. } => "pause (SIGSTOP)",
            Fault::Resume { .. } => "resume (SIGCONT)",
            Fault::Cut { .. } => "link cut",
            Fault::Heal { .. } => "link heal",
            Fault::CutNodes { .. } => "node link cut",
            Fault::HealNodes { .. } => "node link heal",
            Fault::Clock { jump_ms, .. } if *jump_ms >= 0 => "clock jump forward",
            Fault::Clock { .. } => "clock jump backward",
        }
    }
}

/// A fault at an offset from the start of the workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// When, ms after the workload started.
    pub at_ms: u64,
    /// What.
    pub fault: Fault,
}

/// Which fault kinds the schedule draws from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultKinds {
    /// kill -9 and restart.
    pub kill: bool,
    /// SIGSTOP and SIGCONT.
    pub pause: bool,
    /// Link cuts and heals: between DCs, and between two nodes of one DC.
    pub cut: bool,
    /// Clock jumps.
    pub clock: bool,
    /// Disk losses (kill -9, data directory deleted, restart empty): only where partitions are groups of three
    /// or more, at most one node per DC per run.
    #[serde(default)]
    pub wipe: bool,
}

impl FaultKinds {
    /// Every kind.
    pub const ALL: FaultKinds = FaultKinds { kill: true, pause: true, cut: true, clock: true, wipe: true };
    /// None: a fault-free run.
    pub const NONE: FaultKinds = FaultKinds { kill: false, pause: false, cut: false, clock: false, wipe: false };

    /// Parses a comma-separated list of `kill`, `pause`, `cut`, `clock`, `wipe`, or `all` or `none`.
    pub fn parse(text: &str) -> Result<FaultKinds, String> {
        let mut kinds = FaultKinds::NONE;
        for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "all" => kinds = FaultKinds::ALL,
                "none" => {}
                "kill" => kinds.kill = true,
                "pause" => kinds.pause = true,
                "cut" => kinds.cut = true,
                "clock" => kinds.clock = true,
                "wipe" => kinds.wipe = true,
                other => {
                    return Err(format!("unknown fault kind {other:?}: use kill, pause, cut, clock, wipe, all or none"))
                }
            }
        }
        Ok(kinds)
    }

    fn any(&self) -> bool {
        self.kill || self.pause || self.cut || self.clock || self.wipe
    }
}

/// The shape the schedule is drawn for.
#[derive(Clone, Debug)]
pub struct ScheduleShape {
    /// The DC of each node (index = node index in the cluster file).
    pub node_dcs: Vec<u16>,
    /// DCs.
    pub dcs: u16,
    /// The workload's length, ms; every fault ends before it does.
    pub duration_ms: u64,
    /// Mean time between fault starts, ms.
    pub interval_ms: u64,
    /// The kinds to draw from.
    pub kinds: FaultKinds,
    /// Partitions are Raft groups of three or more: a DC survives one node's disk loss.
    pub replicated: bool,
}

/// A lasting fault's interval on its target.
struct Busy {
    target: Target,
    from_ms: u64,
    until_ms: u64,
}

#[derive(PartialEq, Eq)]
enum Target {
    Node(usize),
    Link(u16, u16),
    NodeLink(usize, usize),
}

/// Derives the fault schedule from `seed`: faults start every `interval_ms` on average after a quiet first
/// second, last 0.5–4 s each, and all end at least a second before the workload does. Sorted by time.
pub fn schedule(seed: u64, shape: &ScheduleShape) -> Vec<Step> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x6e65_6d65_7369_7321);
    let mut steps = Vec::new();
    if !shape.kinds.any() || shape.node_dcs.is_empty() || shape.interval_ms == 0 {
        return steps;
    }
    let mut busy: Vec<Busy> = Vec::new();
    let last_end_ms = shape.duration_ms.saturating_sub(1000);
    let mut kinds = Vec::new();
    if shape.kinds.kill {
        kinds.push(0);
    }
    if shape.kinds.pause {
        kinds.push(1);
    }
    if shape.kinds.cut && shape.dcs > 1 {
        kinds.push(2);
    }
    if shape.kinds.clock {
        kinds.push(3);
    }
    // Pairs of nodes that share a DC.
    let node_pairs: Vec<(usize, usize)> = (0..shape.node_dcs.len())
        .flat_map(|a| (a + 1..shape.node_dcs.len()).map(move |b| (a, b)))
        .filter(|(a, b)| shape.node_dcs[*a] == shape.node_dcs[*b])
        .collect();
    if shape.kinds.cut && !node_pairs.is_empty() {
        kinds.push(4);
    }
    if shape.kinds.wipe && shape.replicated {
        kinds.push(5);
    }
    // DCs that lost a node's disk in this run: one each, since a second loss before the first node is caught up
    // again could lose a majority's copy.
    let mut wiped_dcs = BTreeSet::new();
    if kinds.is_empty() {
        return steps;
    }
    let mut offsets = vec![0i64; shape.node_dcs.len()];
    let mut at_ms = 1000;
    loop {
        at_ms += rng.random_range(shape.interval_ms / 2..=shape.interval_ms * 3 / 2);
        if at_ms + 500 > last_end_ms {
            break;
        }
        let length_ms = rng.random_range(500..=4000).min(last_end_ms - at_ms);
        let until_ms = at_ms + length_ms;
        let free = |target: &Target, busy: &[Busy]| {
            !busy.iter().any(|b| b.target == *target && b.from_ms <= until_ms && at_ms <= b.until_ms)
        };
        // A node is down (killed or paused) while it is busy: a clock jump needs it up.
        let kind = kinds[rng.random_range(0..kinds.len())];
        match kind {
            0 | 1 | 5 => {
                let node = rng.random_range(0..shape.node_dcs.len());
                if !free(&Target::Node(node), &busy) || (kind == 5 && wiped_dcs.contains(&shape.node_dcs[node])) {
                    continue;
                }
                busy.push(Busy { target: Target::Node(node), from_ms: at_ms, until_ms });
                let (start, end) = if kind == 5 {
                    wiped_dcs.insert(shape.node_dcs[node]);
                    offsets[node] = 0;
                    (Fault::Wipe { node }, Fault::Restart { node })
                } else if kind == 0 {
                    // A restart keeps the node's clock offset (it is in the data directory); a wipe loses it.
                    (Fault::Kill { node }, Fault::Restart { node })
                } else {
                    (Fault::Pause { node }, Fault::Resume { node })
                };
                steps.push(Step { at_ms, fault: start });
                steps.push(Step { at_ms: until_ms, fault: end });
            }
            2 => {
                let a = rng.random_range(0..shape.dcs);
                let b = (a + rng.random_range(1..shape.dcs)) % shape.dcs;
                let (a, b) = (a.min(b), a.max(b));
                if !free(&Target::Link(a, b), &busy) {
                    continue;
                }
                busy.push(Busy { target: Target::Link(a, b), from_ms: at_ms, until_ms });
                steps.push(Step { at_ms, fault: Fault::Cut { a, b } });
                steps.push(Step { at_ms: until_ms, fault: Fault::Heal { a, b } });
            }
            4 => {
                let (a, b) = node_pairs[rng.random_range(0..node_pairs.len())];
                if !free(&Target::NodeLink(a, b), &busy) {
                    continue;
                }
                busy.push(Busy { target: Target::NodeLink(a, b), from_ms: at_ms, until_ms });
                steps.push(Step { at_ms, fault: Fault::CutNodes { a, b } });
                steps.push(Step { at_ms: until_ms, fault: Fault::HealNodes { a, b } });
            }
            _ => {
                let node = rng.random_range(0..shape.node_dcs.len());
                let up =
                    !busy.iter().any(|b| b.target == Target::Node(node) && b.from_ms <= at_ms && at_ms <= b.until_ms);
                if !up {
                    continue;
                }
                // Jump by up to 3 s either way from the current offset, staying within ±5 s of true time.
                let offset_ms = (offsets[node] + rng.random_range(-3000..=3000i64)).clamp(-5000, 5000);
                let jump_ms = offset_ms - offsets[node];
                offsets[node] = offset_ms;
                steps.push(Step { at_ms, fault: Fault::Clock { node, offset_ms, jump_ms } });
            }
        }
    }
    steps.sort_by_key(|s| s.at_ms);
    steps
}

/// What happened when a step ran.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Applied {
    /// The step.
    pub step: Step,
    /// When it actually ran, ms after the workload started.
    pub ran_at_ms: u64,
    /// Empty when it took effect; else what went wrong (e.g. an admin request a node did not answer).
    pub error: String,
}

/// Applies faults to a running cluster and remembers what is broken, so that it can heal everything at the end.
pub struct Nemesis<'a> {
    file: &'a mut ClusterFile,
    dir: &'a Path,
    killed: BTreeSet<usize>,
    paused: BTreeSet<usize>,
    cut: BTreeSet<(u16, u16)>,
    /// Links between two nodes of one DC that are cut.
    node_cuts: BTreeSet<(usize, usize)>,
    /// Nodes whose clock offset is not 0, and the offset.
    skewed: BTreeMap<usize, i64>,
}

impl<'a> Nemesis<'a> {
    /// A nemesis over the cluster started from `dir`.
    pub fn new(file: &'a mut ClusterFile, dir: &'a Path) -> Self {
        Nemesis {
            file,
            dir,
            killed: BTreeSet::new(),
            paused: BTreeSet::new(),
            cut: BTreeSet::new(),
            node_cuts: BTreeSet::new(),
            skewed: BTreeMap::new(),
        }
    }

    /// The cluster as it is now (restarts change pids).
    pub fn file(&self) -> &ClusterFile {
        self.file
    }

    /// Applies one fault. Errors are returned as text: a fault that could not be applied is reported, not fatal.
    pub fn apply(&mut self, fault: &Fault) -> Result<(), String> {
        match *fault {
            Fault::Kill { node } => {
                // The node's clock offset is in its data directory: it keeps it when it restarts.
                cluster::kill_node(self.file, node);
                self.killed.insert(node);
                Ok(())
            }
            Fault::Wipe { node } => {
                cluster::wipe_node(self.file, node).map_err(|e| format!("{e:#}"))?;
                self.killed.insert(node);
                self.skewed.remove(&node);
                Ok(())
            }
            Fault::Restart { node } => self.restart(node),
            Fault::Pause { node } => {
                cluster::pause_node(self.file, node, true);
                self.paused.insert(node);
                Ok(())
            }
            Fault::Resume { node } => {
                cluster::pause_node(self.file, node, false);
                self.paused.remove(&node);
                Ok(())
            }
            Fault::Cut { a, b } => {
                self.cut.insert((a, b));
                self.link(a, b, "cut")
            }
            Fault::Heal { a, b } => {
                self.cut.remove(&(a, b));
                self.link(a, b, "heal")
            }
            Fault::CutNodes { a, b } => {
                self.node_cuts.insert((a, b));
                self.node_link(a, b, "cut")
            }
            Fault::HealNodes { a, b } => {
                self.node_cuts.remove(&(a, b));
                self.node_link(a, b, "heal")
            }
            Fault::Clock { node, offset_ms, .. } => {
                if offset_ms != 0 {
                    self.skewed.insert(node, offset_ms);
                } else {
                    self.skewed.remove(&node);
                }
                self.admin(node, &format!("/admin/clock?offset_ms={offset_ms}"))
            }
        }
    }

    fn restart(&mut self, node: usize) -> Result<(), String> {
        cluster::restart_node(self.file, self.dir, node).map_err(|e| format!("{e:#}"))?;
        self.killed.remove(&node);
        // A restarted node keeps the cuts it was told about in its data directory (a wiped one has none), but missed
        // what changed while it was down: tell it every link's state.
        let dc = self.file.nodes[node].dc;
        let mut errors = Vec::new();
        for peer in (0..self.file.dcs).filter(|&d| d != dc) {
            let action = if self.cut.contains(&(dc.min(peer), dc.max(peer))) { "cut" } else { "heal" };
            if let Err(e) = self.admin(node, &format!("/admin/links/{peer}/{action}")) {
                errors.push(e);
            }
        }
        for other in (0..self.file.nodes.len()).filter(|&o| o != node && self.file.nodes[o].dc == dc) {
            let cut = self.node_cuts.contains(&(node, other)) || self.node_cuts.contains(&(other, node));
            let action = if cut { "cut" } else { "heal" };
            if let Err(e) = self.admin(node, &format!("/admin/nodes/{}/{action}", self.file.nodes[other].node)) {
                errors.push(e);
            }
        }
        all_ok(errors)
    }

    /// Cuts or heals the link between nodes `a` and `b` of one DC at both ends that run (a node that is down is
    /// told when it restarts; the cut is symmetric anyway, since a cut end also drops what arrives).
    fn node_link(&mut self, a: usize, b: usize, action: &str) -> Result<(), String> {
        let mut errors = Vec::new();
        for (node, other) in [(a, b), (b, a)] {
            if self.killed.contains(&node) || self.paused.contains(&node) {
                continue;
            }
            if let Err(e) = self.admin(node, &format!("/admin/nodes/{}/{action}", self.file.nodes[other].node)) {
                errors.push(e);
            }
        }
        all_ok(errors)
    }

    /// Cuts or heals the link between DCs `a` and `b` on every running node of both (a node that is down is told
    /// when it restarts; the cut is symmetric anyway, since a cut side also drops what arrives).
    fn link(&mut self, a: u16, b: u16, action: &str) -> Result<(), String> {
        let mut errors = Vec::new();
        for node in 0..self.file.nodes.len() {
            let Some(peer) = other_end(self.file.nodes[node].dc, a, b) else { continue };
            if self.killed.contains(&node) || self.paused.contains(&node) {
                continue;
            }
            if let Err(e) = self.admin(node, &format!("/admin/links/{peer}/{action}")) {
                errors.push(e);
            }
        }
        all_ok(errors)
    }

    fn admin(&self, node: usize, path: &str) -> Result<(), String> {
        let n = &self.file.nodes[node];
        admin_post(n.admin, &self.file.admin_token, path)
            .map_err(|e| format!("DC {} node {}: {path}: {e}", n.dc, n.node))
    }

    /// Ends every fault: resumes paused nodes, restarts killed ones, heals every link on every node and sets every
    /// clock offset back to 0. Returns the actions taken and their errors.
    pub fn heal_all(&mut self) -> Vec<(Fault, Result<(), String>)> {
        let mut done = Vec::new();
        for node in std::mem::take(&mut self.paused) {
            let fault = Fault::Resume { node };
            let result = self.apply(&fault);
            done.push((fault, result));
        }
        for node in self.killed.clone() {
            let fault = Fault::Restart { node };
            let result = self.apply(&fault);
            done.push((fault, result));
        }
        // Heal every pair, not only the ones this nemesis knows it cut: cheap, and certain.
        self.cut.clear();
        let dcs = self.file.dcs;
        for a in 0..dcs {
            for b in a + 1..dcs {
                let fault = Fault::Heal { a, b };
                let result = self.apply(&fault);
                done.push((fault, result));
            }
        }
        for (a, b) in std::mem::take(&mut self.node_cuts) {
            let fault = Fault::HealNodes { a, b };
            let result = self.apply(&fault);
            done.push((fault, result));
        }
        for (node, offset_ms) in std::mem::take(&mut self.skewed) {
            let fault = Fault::Clock { node, offset_ms: 0, jump_ms: -offset_ms };
            let result = self.apply(&fault);
            done.push((fault, result));
        }
        done
    }
}

/// POSTs to a node's admin API with the cluster's token; errors on a non-2xx answer or no answer within 3 s.
pub fn admin_post(addr: SocketAddr, token: &str, path: &str) -> Result<(), String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(3))).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(Duration::from_secs(3))).map_err(|e| e.to_string())?;
    write!(s, "POST {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nContent-Length: 0\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    let status = out.split_whitespace().nth(1).unwrap_or("");
    if status.starts_with('2') {
        Ok(())
    } else {
        Err(format!("answered {:?}", out.lines().next().unwrap_or("nothing")))
    }
}

/// The other DC of the link `a`–`b`, seen from `dc`; `None` if `dc` is on neither end.
fn other_end(dc: u16, a: u16, b: u16) -> Option<u16> {
    if dc == a {
        Some(b)
    } else if dc == b {
        Some(a)
    } else {
        None
    }
}

/// `Ok` if nothing failed, else every failure in one message.
fn all_ok(errors: Vec<String>) -> Result<(), String> {
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(kinds: FaultKinds) -> ScheduleShape {
        ScheduleShape {
            node_dcs: vec![0, 1, 2],
            dcs: 3,
            duration_ms: 60_000,
            interval_ms: 2000,
            kinds,
            replicated: false,
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
        let a = schedule(7, &shape(FaultKinds::ALL));
        assert_eq!(a, schedule(7, &shape(FaultKinds::ALL)));
        assert_ne!(a, schedule(8, &shape(FaultKinds::ALL)));
        assert!(a.len() > 20, "a minute with a fault every 2 s has many steps: {}", a.len());
    }

    #[test]
    fn every_lasting_fault_ends_before_the_workload_and_targets_never_overlap() {
        for seed in 0..50 {
            let steps = schedule(seed, &shape(FaultKinds::ALL));
            let mut down: BTreeSet<usize> = BTreeSet::new();
            let mut cut: BTreeSet<(u16, u16)> = BTreeSet::new();
            let mut node_cuts: BTreeSet<(usize, usize)> = BTreeSet::new();
            // A node's clock offset as its data directory keeps it: a kill keeps it, a wipe loses it.
            let mut offsets: BTreeMap<usize, i64> = BTreeMap::new();
            for s in &steps {
                assert!(s.at_ms <= 59_000, "seed {seed}: {s:?} is too late");
                match s.fault {
                    Fault::Kill { node } | Fault::Pause { node } => assert!(down.insert(node), "seed {seed}: {s:?}"),
                    Fault::Wipe { node } => {
                        assert!(down.insert(node), "seed {seed}: {s:?}");
                        offsets.remove(&node);
                    }
                    Fault::Restart { node } | Fault::Resume { node } => {
                        assert!(down.remove(&node), "seed {seed}: {s:?}")
                    }
                    Fault::Cut { a, b } => assert!(cut.insert((a, b)) && a < b, "seed {seed}: {s:?}"),
                    Fault::Heal { a, b } => assert!(cut.remove(&(a, b)), "seed {seed}: {s:?}"),
                    Fault::CutNodes { a, b } => assert!(node_cuts.insert((a, b)), "seed {seed}: {s:?}"),
                    Fault::HealNodes { a, b } => assert!(node_cuts.remove(&(a, b)), "seed {seed}: {s:?}"),
                    Fault::Clock { node, offset_ms, jump_ms } => {
                        assert!(!down.contains(&node), "seed {seed}: clock jump on a down node: {s:?}");
                        assert!(offset_ms.abs() <= 5000);
                        let before = offsets.insert(node, offset_ms).unwrap_or(0);
                        assert_eq!(jump_ms, offset_ms - before, "seed {seed}: {s:?}");
                    }
                }
            }
            assert!(down.is_empty() && cut.is_empty() && node_cuts.is_empty(), "seed {seed}: every fault ends");
        }
    }

    /// Disk losses only where partitions are replicated, and one node per DC at most.
    #[test]
    fn disks_are_lost_only_in_replicated_dcs_and_once_per_dc() {
        let wipes = |shape: &ScheduleShape, seed| {
            schedule(seed, shape).into_iter().filter(|s| matches!(s.fault, Fault::Wipe { .. })).collect::<Vec<_>>()
        };
        let mut replicated = shape(FaultKinds::ALL);
        replicated.node_dcs = vec![0, 0, 0, 1, 1, 1];
        replicated.dcs = 2;
        replicated.replicated = true;
        let mut any = 0;
        for seed in 0..20 {
            let steps = wipes(&replicated, seed);
            let dcs: BTreeSet<u16> = steps
                .iter()
                .map(|s| if let Fault::Wipe { node } = s.fault { replicated.node_dcs[node] } else { 9 })
                .collect();
            assert_eq!(dcs.len(), steps.len(), "seed {seed}: two disks lost in one DC: {steps:?}");
            any += steps.len();
            assert!(wipes(&ScheduleShape { replicated: false, ..replicated.clone() }, seed).is_empty());
        }
        assert!(any > 0, "no seed loses a disk");
    }

    #[test]
    fn nodes_of_one_dc_are_cut_from_each_other_only_when_a_dc_has_several() {
        let mut multi = shape(FaultKinds::parse("cut").expect("parses"));
        multi.node_dcs = vec![0, 0, 0, 1, 1, 1];
        multi.dcs = 2;
        let steps = schedule(5, &multi);
        let pairs: Vec<(usize, usize)> = steps
            .iter()
            .filter_map(|s| match s.fault {
                Fault::CutNodes { a, b } => Some((a, b)),
                _ => None,
            })
            .collect();
        assert!(!pairs.is_empty(), "{steps:?}");
        assert!(pairs.iter().all(|(a, b)| a < b && multi.node_dcs[*a] == multi.node_dcs[*b]), "{pairs:?}");
        let single = schedule(5, &shape(FaultKinds::parse("cut").expect("parses")));
        assert!(single.iter().all(|s| !matches!(s.fault, Fault::CutNodes { .. })), "one node per DC: {single:?}");
    }

    #[test]
    fn only_the_chosen_kinds_are_drawn() {
        let steps = schedule(3, &shape(FaultKinds::parse("cut").expect("parses")));
        assert!(!steps.is_empty());
        assert!(steps.iter().all(|s| matches!(s.fault, Fault::Cut { .. } | Fault::Heal { .. })), "{steps:?}");
        assert!(schedule(3, &shape(FaultKinds::NONE)).is_empty());
        assert!(FaultKinds::parse("kill,bogus").is_err());
    }
}
