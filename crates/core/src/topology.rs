//! Where everything lives: the one place that answers placement questions, computed from the cluster's shape
//! without asking anyone.
//!
//! - **object → partition**: a stable hash of bucket and key ([`Topology::partition_of`]);
//! - **partition → replica set** inside a DC: `replicas` consecutive nodes starting at partition `p`'s home node
//!   `p mod nodes` ([`Topology::replicas`]); with one replica the home node serves the partition alone, with more
//!   they form the partition's Raft group and [`Topology::home`] is where messages go while no leader is known.
//!   For a replicated partition this is only where a new cluster's groups start: after that the group's
//!   membership says where it lives (replicas move at run time, `crate::replica`), and nodes learn it from the
//!   leaders' notices ([`crate::node::Node::placement`]);
//! - **object → DCs**: which DCs hold an object ([`Topology::holds_object`], [`Topology::dcs_holding`]): every DC
//!   for a `full` bucket, one DC per ring for a bucket placed by rings ([`crate::placement`]); where a DC reads an
//!   object it does not hold ([`Topology::read_dc`]); and which DCs a partition's committed transactions go to
//!   ([`Topology::replication_targets`]: every other DC, each sent only the writes it holds).
//!
//! The node ([`crate::node`]), the replication sender and the stabilizer ask the topology; no other module
//! computes a placement. A placement policy (replicated partitions, Karma's rings) changes this module and nothing
//! that routes.

use crate::placement::Placement;
use crate::{DcId, ObjectId, PartitionId};
use serde::{Deserialize, Serialize};

/// A node's index inside its DC.
pub type NodeIndex = u16;

/// The nodes that hold one partition inside a DC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaSet {
    /// The replicas, the leader first.
    pub nodes: Vec<NodeIndex>,
}

impl ReplicaSet {
    /// The replica that serves the partition's prepares, commits and reads.
    pub fn leader(&self) -> NodeIndex {
        self.nodes[0]
    }
}

/// The shape of a cluster as one DC sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// This DC.
    dc: DcId,
    /// Partitions per DC (every DC has the same).
    partitions: u32,
    /// Nodes of each DC, by DC index; 0 while a peer DC's shape is unknown (it has not connected yet).
    nodes: Vec<NodeIndex>,
    /// Copies of each partition of this DC, on distinct nodes (1: not replicated inside the DC).
    #[serde(default = "one")]
    replicas: NodeIndex,
    /// How many nodes this DC's partitions were first placed over (0: all of them). A DC that grew keeps placing
    /// over its first nodes, so that every node, old and new, computes the same first voters for each group.
    #[serde(default)]
    first_nodes: NodeIndex,
    /// Which DCs hold which buckets (the same at every DC).
    #[serde(default)]
    placement: Placement,
}

fn one() -> NodeIndex {
    1
}

impl Topology {
    /// The topology of DC `dc` of `dcs`, with `nodes` nodes and `partitions` partitions. Peer DCs' node counts are
    /// unknown until [`Topology::set_dc_nodes`] gives them (a peer's configuration or descriptor does).
    pub fn new(dc: DcId, dcs: u16, partitions: u32, nodes: NodeIndex) -> Self {
        assert!(dc.0 < dcs, "dc {} outside 0..{dcs}", dc.0);
        assert!(partitions > 0, "a DC needs at least one partition");
        assert!(nodes > 0, "a DC needs at least one node");
        let mut all = vec![0; usize::from(dcs)];
        all[usize::from(dc.0)] = nodes;
        Self { dc, partitions, nodes: all, replicas: 1, first_nodes: 0, placement: Placement::full() }
    }

    /// The same topology with the buckets placed by `placement` (which must be valid for its DCs).
    pub fn with_placement(mut self, placement: Placement) -> Self {
        debug_assert_eq!(placement.validate(self.dcs()), Ok(()));
        self.placement = placement;
        self
    }

    /// How the cluster places its buckets.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The same topology, its partitions placed over its first `first_nodes` nodes (a DC that grew since its
    /// partitions were placed: the nodes added since hold replicas only once moved there). At most its nodes.
    pub fn with_first_nodes(mut self, first_nodes: NodeIndex) -> Self {
        assert!(first_nodes >= 1 && first_nodes <= self.nodes(self.dc), "first_nodes {first_nodes} out of range");
        self.first_nodes = if first_nodes == self.nodes(self.dc) { 0 } else { first_nodes };
        self.replicas = self.replicas.min(first_nodes);
        self
    }

    /// How many nodes this DC's partitions are placed over: its first nodes.
    pub fn placed_nodes(&self) -> NodeIndex {
        if self.first_nodes == 0 {
            self.nodes(self.dc)
        } else {
            self.first_nodes
        }
    }

    /// The same topology with `replicas` copies of each of this DC's partitions (at most one per node: clamped to
    /// the DC's nodes).
    pub fn with_replicas(mut self, replicas: NodeIndex) -> Self {
        assert!(replicas >= 1, "a partition has at least one replica");
        self.replicas = replicas.min(self.placed_nodes());
        self
    }

    /// Copies of each partition of this DC.
    pub fn replica_count(&self) -> NodeIndex {
        self.replicas
    }

    /// Whether this DC's partitions are Raft groups (more than one replica each).
    pub fn replicated(&self) -> bool {
        self.replicas > 1
    }

    /// The topology of a DC whose nodes the configuration does not say (a state machine that addresses partitions
    /// logically and never places them on nodes).
    pub fn of_config(config: &crate::Config) -> Self {
        Self::new(config.dc, config.dcs, config.partitions, 1).with_placement(config.placement.clone())
    }

    /// Records how many nodes a DC has. Returns whether that changed anything.
    pub fn set_dc_nodes(&mut self, dc: DcId, nodes: NodeIndex) -> bool {
        let Some(slot) = self.nodes.get_mut(usize::from(dc.0)) else { return false };
        let changed = *slot != nodes;
        *slot = nodes;
        changed
    }

    /// This DC grew to `nodes` nodes while it runs (a node joined): routing, notices and the stabilizer reach the
    /// new nodes, and its partitions stay placed over the nodes it had, so that every node, old and new, keeps
    /// computing the same first voters. Never shrinks (a retired node keeps its index). Returns whether it changed
    /// anything.
    pub fn grow(&mut self, nodes: NodeIndex) -> bool {
        let had = self.nodes(self.dc);
        if nodes <= had {
            return false;
        }
        if self.first_nodes == 0 {
            self.first_nodes = had;
        }
        self.nodes[usize::from(self.dc.0)] = nodes;
        true
    }

    /// This DC.
    pub fn dc(&self) -> DcId {
        self.dc
    }

    /// The number of DCs.
    pub fn dcs(&self) -> u16 {
        self.nodes.len() as u16
    }

    /// Partitions per DC.
    pub fn partition_count(&self) -> u32 {
        self.partitions
    }

    /// Every partition of a DC.
    pub fn partitions(&self) -> impl Iterator<Item = PartitionId> {
        (0..self.partitions).map(PartitionId)
    }

    /// Nodes of a DC (0: not known yet).
    pub fn nodes(&self, dc: DcId) -> NodeIndex {
        self.nodes.get(usize::from(dc.0)).copied().unwrap_or(0)
    }

    /// The partition that owns an object: a stable hash of bucket and key (the type takes no part, as in
    /// AntidoteDB).
    pub fn partition_of(&self, object: &ObjectId) -> PartitionId {
        object.partition(self.partitions)
    }

    /// The nodes of this DC that hold partition `p`: its home node and the next `replicas - 1` nodes, wrapping
    /// around.
    pub fn replicas(&self, p: PartitionId) -> ReplicaSet {
        let nodes = self.placed_nodes();
        let home = (p.0 % u32::from(nodes)) as NodeIndex;
        ReplicaSet { nodes: (0..self.replicas).map(|k| (home + k) % nodes).collect() }
    }

    /// Whether node `node` of this DC holds a replica of partition `p`.
    pub fn holds(&self, node: NodeIndex, p: PartitionId) -> bool {
        let nodes = u32::from(self.placed_nodes());
        if u32::from(node) >= nodes {
            return false;
        }
        (u32::from(node) + nodes - p.0 % nodes) % nodes < u32::from(self.replicas)
    }

    /// The node of DC `dc` that serves partition `p` (`None` while the DC's shape is unknown).
    pub fn home(&self, dc: DcId, p: PartitionId) -> Option<NodeIndex> {
        let nodes = if dc == self.dc { self.placed_nodes() } else { self.nodes(dc) };
        (nodes > 0).then(|| (p.0 % u32::from(nodes)) as NodeIndex)
    }

    /// The partitions of this DC that node `node` holds a replica of, ascending.
    pub fn partitions_on(&self, node: NodeIndex) -> impl Iterator<Item = PartitionId> + '_ {
        self.partitions().filter(move |p| self.holds(node, *p))
    }

    /// Where a partition sits among the partitions of its node (0, 1, 2, … in ascending partition order): a node
    /// spreads its partitions over its shards by this index.
    pub fn index_on_node(&self, p: PartitionId) -> u32 {
        p.0 / u32::from(self.placed_nodes().max(1))
    }

    /// Whether DC `dc` holds `object` (stores its state, receives its writes from the other DCs). Asked for every
    /// read and every write applied: an object of a full bucket is answered without hashing it.
    pub fn holds_object(&self, dc: DcId, object: &ObjectId) -> bool {
        !self.placed_by_rings(object) || self.placement.holds(dc, &object.bucket, self.partition_of(object))
    }

    /// The DCs that hold `object`: every DC, or one per ring for a bucket placed by rings.
    pub fn dcs_holding(&self, object: &ObjectId) -> Vec<DcId> {
        if !self.placed_by_rings(object) {
            return (0..self.dcs()).map(DcId).collect();
        }
        self.placement.holders(self.dcs(), &object.bucket, self.partition_of(object))
    }

    /// The DC where this DC reads `object`: itself if it holds it, else the holder in its own ring.
    pub fn read_dc(&self, object: &ObjectId) -> DcId {
        if !self.placed_by_rings(object) {
            return self.dc;
        }
        self.placement.read_from(self.dc, &object.bucket, self.partition_of(object))
    }

    fn placed_by_rings(&self, object: &ObjectId) -> bool {
        self.placement.of_bucket(&object.bucket) == crate::placement::BucketPlacement::Rings
    }

    /// The other DCs that read partition `p`'s objects from this DC (`read_dc`): its ring-mates, if it holds the
    /// partition's share of the buckets placed by rings; nobody without rings.
    pub fn readers(&self, p: PartitionId) -> impl Iterator<Item = DcId> + '_ {
        let pl = &self.placement;
        let ring = pl.ring_of(self.dc).filter(|r| pl.partial() && pl.home_in_ring(*r, p) == self.dc);
        let dc = self.dc;
        ring.into_iter().flat_map(move |r| pl.rings[r].iter().copied().filter(move |d| *d != dc))
    }

    /// The DCs of other rings that may read partition `p`'s objects from this DC: with reads from the nearest ring
    /// ([`RingChoice::Nearest`](crate::placement::RingChoice)), every DC of another ring that does not hold them,
    /// if this DC holds them; none otherwise. Unlike [`Topology::readers`] they read here only while this DC is
    /// the fastest holder they measure, so garbage collection waits for them only while they report.
    pub fn far_readers(&self, p: PartitionId) -> impl Iterator<Item = DcId> + '_ {
        let pl = &self.placement;
        let holds = pl.reads_nearest() && pl.holds_ring_share(self.dc, p);
        let (dc, dcs) = (self.dc, if holds { self.dcs() } else { 0 });
        (0..dcs).map(DcId).filter(move |d| *d != dc && !self.same_ring(dc, *d) && !pl.holds_ring_share(*d, p))
    }

    /// Whether this DC may read partition `p`'s objects from `peer`, and so tells it its garbage-collection
    /// frontier: a ring-mate (any partition, as [`Topology::readers`] expects), or, with reads from the nearest
    /// ring, a holder of another ring of a partition this DC does not hold.
    pub fn reads_from(&self, peer: DcId, p: PartitionId) -> bool {
        let pl = &self.placement;
        self.same_ring(self.dc, peer)
            || (pl.reads_nearest() && !pl.holds_ring_share(self.dc, p) && pl.holds_ring_share(peer, p))
    }

    /// Whether DCs `a` and `b` are in the same ring (partial replication; without rings, no two DCs are).
    pub fn same_ring(&self, a: DcId, b: DcId) -> bool {
        let pl = &self.placement;
        pl.partial() && pl.ring_of(a).is_some() && pl.ring_of(a) == pl.ring_of(b)
    }

    /// The DCs that receive partition `p`'s committed local transactions: every other DC. Under partial
    /// replication too: a DC is sent only the writes to objects it holds ([`Topology::holds_object`]), but every
    /// transaction's commit time, so that its pvc for this DC keeps moving (Cure's heartbeats), and with it its
    /// stable snapshot.
    pub fn replication_targets(&self, _p: PartitionId) -> Vec<DcId> {
        let local = self.dc;
        (0..self.dcs()).map(DcId).filter(|d| *d != local).collect()
    }

    /// The DCs that send partition `p` their committed transactions (its inbound streams).
    pub fn replication_sources(&self, p: PartitionId) -> Vec<DcId> {
        self.replication_targets(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::RingChoice;

    #[test]
    fn every_partition_has_exactly_one_home_node_and_nodes_share_the_partitions() {
        let t = Topology::new(DcId(0), 2, 7, 3);
        let mut seen = Vec::new();
        for node in 0..3 {
            seen.extend(t.partitions_on(node));
        }
        seen.sort();
        assert_eq!(seen, t.partitions().collect::<Vec<_>>());
        assert_eq!(t.home(DcId(0), PartitionId(4)), Some(1));
        assert_eq!(t.replicas(PartitionId(4)).leader(), 1);
    }

    #[test]
    fn replicas_sit_on_distinct_consecutive_nodes_and_every_node_holds_its_share() {
        let t = Topology::new(DcId(0), 1, 7, 4).with_replicas(3);
        for p in t.partitions() {
            let set = t.replicas(p).nodes;
            assert_eq!(set.len(), 3);
            assert_eq!(set[0], t.home(DcId(0), p).expect("known"), "the home node comes first");
            let distinct: std::collections::BTreeSet<_> = set.iter().collect();
            assert_eq!(distinct.len(), 3, "{set:?}");
            for n in 0..4 {
                assert_eq!(t.holds(n, p), set.contains(&n), "node {n}, partition {p:?}");
            }
        }
        // 7 partitions × 3 replicas over 4 nodes: 5 or 6 each.
        let held: Vec<usize> = (0..4).map(|n| t.partitions_on(n).count()).collect();
        assert_eq!(held.iter().sum::<usize>(), 21);
        assert!(held.iter().all(|h| (5..=6).contains(h)), "{held:?}");
        assert_eq!(Topology::new(DcId(0), 1, 2, 2).with_replicas(3).replica_count(), 2, "at most one per node");
    }

    #[test]
    fn a_peer_dc_has_no_placement_until_its_shape_is_known() {
        let mut t = Topology::new(DcId(0), 2, 4, 1);
        assert_eq!(t.home(DcId(1), PartitionId(3)), None);
        assert!(t.set_dc_nodes(DcId(1), 2));
        assert_eq!(t.home(DcId(1), PartitionId(3)), Some(1));
        assert!(!t.set_dc_nodes(DcId(1), 2));
        assert!(!t.set_dc_nodes(DcId(7), 2), "a DC outside the cluster is ignored");
    }

    #[test]
    fn full_replication_sends_every_partition_to_every_other_dc() {
        let t = Topology::new(DcId(1), 3, 4, 1);
        assert_eq!(t.replication_targets(PartitionId(2)), vec![DcId(0), DcId(2)]);
        let o = ObjectId::new("k", "bucket", causet_crdt::CrdtType::CounterPn);
        assert_eq!(t.dcs_holding(&o).len(), 3);
        assert_eq!(t.read_dc(&o), DcId(1));
    }

    #[test]
    fn under_rings_a_dc_holds_its_share_and_reads_the_rest_in_its_ring() {
        let rings = vec![vec![DcId(0), DcId(1)], vec![DcId(2)]];
        let placement = Placement::rings(rings, [b"r".to_vec()]);
        let at = |dc| Topology::new(DcId(dc), 3, 4, 1).with_placement(placement.clone());
        let (t0, t1, t2) = (at(0), at(1), at(2));
        assert_eq!(t0.replication_targets(PartitionId(2)), vec![DcId(1), DcId(2)], "heartbeats go everywhere");
        for i in 0..40 {
            let o = ObjectId::new(format!("k{i}"), "r", causet_crdt::CrdtType::CounterPn);
            let holders = t0.dcs_holding(&o);
            assert_eq!(holders.len(), 2, "one per ring");
            assert!(holders.contains(&DcId(2)), "DC 2 is a ring of its own");
            assert_ne!(t0.holds_object(DcId(0), &o), t0.holds_object(DcId(1), &o), "ring 0 holds it once");
            assert_eq!(t1.dcs_holding(&o), holders, "every DC computes the same");
            for t in [&t0, &t1, &t2] {
                assert!(holders.contains(&t.read_dc(&o)));
                assert_eq!(t.read_dc(&o) == t.dc(), t.holds_object(t.dc(), &o));
            }
            let full = ObjectId::new(format!("k{i}"), "f", causet_crdt::CrdtType::CounterPn);
            assert!((0..3).all(|d| t0.holds_object(DcId(d), &full)));
        }
        for p in t0.partitions() {
            // DC 0 and DC 1 read from each other what each holds; DC 2 holds everything and is read by nobody.
            let (r0, r1): (Vec<DcId>, Vec<DcId>) = (t0.readers(p).collect(), at(1).readers(p).collect());
            assert_eq!(r0.is_empty(), r1 == vec![DcId(0)]);
            assert_eq!(t2.readers(p).count(), 0);
        }
        assert_eq!(Topology::new(DcId(0), 3, 4, 1).readers(PartitionId(0)).count(), 0, "no rings: no readers");
        assert!(t0.same_ring(DcId(0), DcId(1)) && !t0.same_ring(DcId(1), DcId(2)));
        assert!(!Topology::new(DcId(0), 3, 4, 1).same_ring(DcId(0), DcId(1)), "no rings");
    }

    #[test]
    fn with_reads_from_the_nearest_ring_a_holder_expects_readers_from_every_ring() {
        // Rings [0, 1] and [2]: DC 2 holds every partition, DCs 0 and 1 one in two each.
        let rings = vec![vec![DcId(0), DcId(1)], vec![DcId(2)]];
        let at = |dc: u16, choice| {
            Topology::new(DcId(dc), 3, 4, 1)
                .with_placement(Placement::rings(rings.clone(), [b"r".to_vec()]).reading_from(choice))
        };
        for p in (0..4).map(PartitionId) {
            let (holder, other) = if p.0 % 2 == 0 { (0, 1) } else { (1, 0) };
            let nearest = at(2, RingChoice::Nearest);
            assert_eq!(nearest.far_readers(p).collect::<Vec<_>>(), vec![DcId(other)], "DC 2 holds {p:?}");
            assert_eq!(at(holder, RingChoice::Nearest).far_readers(p).count(), 0, "DC 2 holds it too");
            assert_eq!(at(other, RingChoice::Nearest).far_readers(p).count(), 0, "DC {other} does not hold it");
            assert!(at(other, RingChoice::Nearest).reads_from(DcId(2), p), "the other ring's holder");
            assert!(at(other, RingChoice::Nearest).reads_from(DcId(holder), p), "a ring-mate");
            assert!(!at(holder, RingChoice::Nearest).reads_from(DcId(2), p), "DC {holder} holds {p:?}");
            assert_eq!(at(2, RingChoice::Own).far_readers(p).count(), 0, "static ring binding");
            assert!(!at(other, RingChoice::Own).reads_from(DcId(2), p));
        }
    }

    #[test]
    fn a_dc_that_grows_while_it_runs_keeps_its_placement_and_never_shrinks() {
        let first = Topology::new(DcId(0), 2, 6, 3).with_replicas(3);
        let mut grown = first.clone();
        assert!(grown.grow(4));
        assert_eq!(grown.nodes(DcId(0)), 4, "routing and notices reach the new node");
        assert_eq!(grown.placed_nodes(), 3);
        assert_eq!(grown, Topology::new(DcId(0), 2, 6, 4).with_replicas(3).with_first_nodes(3), "as if configured so");
        for p in first.partitions() {
            assert_eq!(grown.replicas(p), first.replicas(p), "partition {p:?} keeps its first voters");
            assert_eq!(grown.home(DcId(0), p), first.home(DcId(0), p));
        }
        assert!(grown.grow(5), "a second node joins");
        assert_eq!(grown.placed_nodes(), 3, "the first count stays");
        assert!(!grown.grow(5) && !grown.grow(2), "the same count, or fewer, changes nothing");
        assert_eq!(grown.nodes(DcId(0)), 5);
    }

    #[test]
    fn a_dc_that_grew_places_its_partitions_over_its_first_nodes() {
        let first = Topology::new(DcId(0), 1, 6, 3).with_replicas(3);
        let grown = Topology::new(DcId(0), 1, 6, 4).with_replicas(3).with_first_nodes(3);
        for p in first.partitions() {
            assert_eq!(grown.replicas(p), first.replicas(p));
            assert_eq!(grown.home(DcId(0), p), first.home(DcId(0), p));
            assert_eq!(grown.index_on_node(p), first.index_on_node(p));
        }
        assert_eq!(grown.nodes(DcId(0)), 4, "routing and notices reach the new node");
        assert_eq!(grown.partitions_on(3).count(), 0, "the new node holds nothing until replicas move there");
        assert_eq!(Topology::new(DcId(0), 1, 6, 3).with_replicas(3).with_first_nodes(3), first, "all its nodes");
    }
}
