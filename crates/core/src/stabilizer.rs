//! A stabilizer of one DC: the stable snapshot, the entry-wise minimum of every partition's pvc (Cure §IV-C,
//! Alg. 4 CalculateStableSnapshot), and the garbage-collection frontier, the minimum of that and of every
//! coordinator's oldest running snapshot.
//!
//! Every node of the DC runs one, and every partition and coordinator reports to all of them, so each computes the
//! DC's stable snapshot on its own and a dead node stops none of the others. It publishes a [`Message::Stable`]
//! whenever the stable snapshot moves, so stabilisation is event-driven: visibility waits for the slowest
//! partition's report, not for a gossip timer. It addresses every coordinator and partition it knows; its node
//! delivers only to its own machines (another node's are told by that node's stabilizer).
//!
//! The set of coordinators changes: a coordinator joins when it first reports ([`Message::OldestSnapshot`]) and
//! the driver retires the coordinators of a node that restarted ([`Stabilizer::retire`]). Until every expected
//! coordinator has reported, the frontier does not move.

use crate::away;
use crate::topology::Topology;
use crate::{Address, Config, CoordinatorId, Envelope, Message, PartitionId, VectorClock};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A stabilizer of one DC (one per node).
#[derive(Debug)]
pub struct Stabilizer {
    config: Config,
    /// The DC's partitions, whose pvc it takes the minimum of.
    topology: Topology,
    /// Nodes of the DC that must each have a coordinator report before the frontier moves (0: none required).
    nodes_expected: u16,
    /// Nodes retired for good: not expected, and their coordinators known at their retirement forgotten.
    retired: BTreeSet<u16>,
    coordinators: BTreeSet<CoordinatorId>,
    /// The latest incarnation heard of, per node.
    incarnations: BTreeMap<u16, u32>,
    pvcs: Vec<Option<VectorClock>>,
    oldest: BTreeMap<CoordinatorId, VectorClock>,
    stable: VectorClock,
    gc: VectorClock,
    /// The partitions' notices of writes to objects the DC does not hold, for the coordinators' caches.
    away: away::Merge,
    outputs: VecDeque<Envelope>,
}

impl Stabilizer {
    /// A stabilizer for the DC's partitions and the given coordinators (all of which must report before garbage
    /// collection starts).
    pub fn new(config: Config, coordinators: Vec<CoordinatorId>) -> Self {
        let dcs = config.vector_len();
        Self {
            pvcs: vec![None; config.partitions as usize],
            topology: Topology::of_config(&config),
            nodes_expected: 0,
            retired: config.retired_nodes.iter().copied().collect(),
            incarnations: coordinators.iter().map(|c| (c.node(), c.incarnation())).collect(),
            coordinators: coordinators.into_iter().collect(),
            oldest: BTreeMap::new(),
            stable: VectorClock::zero(dcs),
            gc: VectorClock::zero(dcs),
            away: away::Merge::new(config.partitions as usize, dcs),
            outputs: VecDeque::new(),
            config,
        }
    }

    /// The stable snapshot.
    pub fn stable_snapshot(&self) -> &VectorClock {
        &self.stable
    }

    /// The garbage-collection frontier.
    pub fn gc_frontier(&self) -> &VectorClock {
        &self.gc
    }

    /// Hands over the next message to deliver.
    pub fn poll_output(&mut self) -> Option<Envelope> {
        self.outputs.pop_front()
    }

    /// A report from a partition or a coordinator.
    pub fn handle_message(&mut self, from: Address, msg: Message) {
        let dcs = self.config.vector_len();
        match (from, msg) {
            (Address::Partition(PartitionId(p)), Message::PvcReport { pvc, away, .. }) if pvc.has_dcs(dcs) => {
                let Some(slot) = self.pvcs.get_mut(p as usize) else {
                    return;
                };
                if let Some(report) = away {
                    self.away.report(PartitionId(p), report);
                }
                match slot {
                    Some(old) => old.merge_max(&pvc),
                    None => *slot = Some(pvc),
                }
                self.recompute();
            }
            (Address::Coordinator(c), Message::OldestSnapshot { snapshot }) if snapshot.has_dcs(dcs) => {
                // A node runs one incarnation at a time, and incarnations only grow: a report from a newer one
                // retires the node's earlier coordinators; a late report from an earlier one is ignored.
                let latest = self.incarnations.entry(c.node()).or_insert(c.incarnation());
                if c.incarnation() < *latest {
                    return;
                }
                let restarted = c.incarnation() > *latest;
                *latest = c.incarnation();
                if self.coordinators.insert(c) && self.pvcs.iter().all(Option::is_some) {
                    // A coordinator that just joined learns where the DC stands.
                    // (Its first chunk of writes comes with the next stable snapshot: it starts above it.)
                    let msg = Message::Stable { stable: self.stable.clone(), gc: self.gc.clone(), away: None };
                    self.outputs.push_back(Envelope { from: Address::Stabilizer, to: Address::Coordinator(c), msg });
                }
                self.oldest.entry(c).and_modify(|o| o.merge_max(&snapshot)).or_insert(snapshot);
                if restarted {
                    self.retire(|old| old.node() == c.node() && old.incarnation() != c.incarnation());
                }
                self.recompute();
            }
            (_, Message::NodeRetired { node }) => self.retire_node(node),
            _ => {}
        }
    }

    /// Holds the garbage-collection frontier until a coordinator of every one of the DC's `nodes` nodes has
    /// reported. A stabilizer that starts afresh (its node restarted) knows only its own node's coordinators; the
    /// other nodes' coordinators may be running transactions at old snapshots, and a frontier that passed them
    /// would make their reads fail as too old.
    pub fn expect_nodes(&mut self, nodes: u16) {
        self.nodes_expected = nodes;
    }

    /// How many nodes' coordinators must each have reported before the frontier moves.
    pub fn expected_nodes(&self) -> u16 {
        self.nodes_expected
    }

    /// Node `node` is retired for good: the frontier no longer waits for a report of its coordinators, and forgets
    /// those it knows (their last reports would hold it back). A coordinator of it that reports later (the node
    /// came back after all) counts again.
    pub fn retire_node(&mut self, node: u16) {
        if self.retired.insert(node) {
            self.retire(|c| c.node() == node);
            if self.pvcs.iter().all(Option::is_some) {
                self.recompute();
            }
        }
    }

    /// Forgets the coordinators `gone` says are gone for good (a node restarted: its earlier coordinators died
    /// with it), so the frontier no longer waits for them.
    pub fn retire(&mut self, gone: impl Fn(CoordinatorId) -> bool) {
        let before = self.coordinators.len();
        self.coordinators.retain(|c| !gone(*c));
        self.oldest.retain(|c, _| !gone(*c));
        if self.coordinators.len() != before && self.pvcs.iter().all(Option::is_some) {
            self.recompute();
        }
    }

    /// The coordinators the frontier accounts for.
    pub fn coordinators(&self) -> impl Iterator<Item = CoordinatorId> + '_ {
        self.coordinators.iter().copied()
    }

    fn recompute(&mut self) {
        let mut stable: Option<VectorClock> = None;
        for pvc in &self.pvcs {
            let Some(pvc) = pvc else { return };
            match &mut stable {
                Some(s) => s.merge_min(pvc),
                None => stable = Some(pvc.clone()),
            }
        }
        let stable = stable.expect("a DC has at least one partition");
        let mut gc = stable.clone();
        let every_node = (0..self.nodes_expected)
            .filter(|n| !self.retired.contains(n))
            .all(|n| self.oldest.keys().any(|c| c.node() == n));
        let all_reported = every_node && self.coordinators.iter().all(|c| self.oldest.contains_key(c));
        if all_reported {
            for o in self.oldest.values() {
                gc.merge_min(o);
            }
        } else {
            gc = self.gc.clone();
        }
        gc.merge_max(&self.gc);
        assert!(self.stable.le(&stable), "cure: the stable snapshot never moves backwards");
        if stable == self.stable && gc == self.gc {
            return;
        }
        self.stable = stable;
        self.gc = gc;
        // Coordinators also hear the notices of writes to objects the DC does not hold, for their caches.
        let away = self.away.chunk(&self.stable);
        let msg = Message::Stable { stable: self.stable.clone(), gc: self.gc.clone(), away };
        for c in &self.coordinators {
            let to = Address::Coordinator(*c);
            self.outputs.push_back(Envelope { from: Address::Stabilizer, to, msg: msg.clone() });
        }
        let msg = Message::Stable { stable: self.stable.clone(), gc: self.gc.clone(), away: None };
        for to in self.topology.partitions().map(Address::Partition) {
            self.outputs.push_back(Envelope { from: Address::Stabilizer, to, msg: msg.clone() });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DcId, Timestamp};

    fn at(t: u64) -> VectorClock {
        VectorClock::from_entries(vec![Timestamp(t)])
    }

    /// Three nodes are expected; node 2 reported once and died. Its last report holds the garbage-collection
    /// frontier back (and, from a stabilizer that never heard it, its silence does), until the node is retired;
    /// then the frontier is the others' oldest snapshot.
    #[test]
    fn a_retired_node_no_longer_holds_garbage_collection_back() {
        let (c0, c1, c2) =
            (CoordinatorId::compose(0, 1, 0), CoordinatorId::compose(1, 1, 0), CoordinatorId::compose(2, 1, 0));
        let mut s = Stabilizer::new(Config::new(1, DcId(0), 2), vec![c0]);
        s.expect_nodes(3);
        for p in 0..2 {
            s.handle_message(
                Address::Partition(PartitionId(p)),
                Message::PvcReport { pvc: at(100), at: None, committed: None, frontier: None, away: None },
            );
        }
        let report = |s: &mut Stabilizer, c: CoordinatorId, t: u64| {
            s.handle_message(Address::Coordinator(c), Message::OldestSnapshot { snapshot: at(t) })
        };
        report(&mut s, c0, 90);
        report(&mut s, c1, 80);
        assert_eq!(s.gc_frontier(), &at(0), "node 2 never reported");
        report(&mut s, c2, 10);
        assert_eq!(s.gc_frontier(), &at(10), "node 2's last report holds the frontier");
        report(&mut s, c0, 95);
        assert_eq!(s.gc_frontier(), &at(10));
        s.handle_message(Address::Stabilizer, Message::NodeRetired { node: 2 });
        assert_eq!(s.gc_frontier(), &at(80), "the others' oldest snapshot");
        // A stabilizer that starts with node 2 retired in its configuration does not wait for it.
        let mut config = Config::new(1, DcId(0), 2);
        config.retired_nodes = vec![2];
        let mut fresh = Stabilizer::new(config, vec![c0]);
        fresh.expect_nodes(3);
        for p in 0..2 {
            fresh.handle_message(
                Address::Partition(PartitionId(p)),
                Message::PvcReport { pvc: at(100), at: None, committed: None, frontier: None, away: None },
            );
        }
        report(&mut fresh, c0, 90);
        report(&mut fresh, c1, 80);
        assert_eq!(fresh.gc_frontier(), &at(80));
    }
}
