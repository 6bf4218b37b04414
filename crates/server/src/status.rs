//! What `/status` shows of a shard.

use causet_core::node::Node;
use serde::Serialize;

/// A shard's state, for `/status`.
#[derive(Clone, Debug, Serialize)]
pub struct ShardStatus {
    /// The shard's index.
    pub shard: usize,
    /// The coordinator's open transactions.
    pub open_transactions: usize,
    /// Requests the coordinator sent again to a replicated partition's new leader.
    pub resends_to_new_leaders: u64,
    /// Prepares the coordinator sent again because they, or their answers, did not arrive in time.
    pub prepare_resends: u64,
    /// Reads of this DC's partitions the coordinator sent again because they, or their answers, did not arrive in
    /// time.
    pub read_resends: u64,
    /// Reads of objects this DC does not hold sent to another DC, and those failed over to another ring.
    pub remote_reads: (u64, u64),
    /// Reads sent to other rings' holders only to measure them (reads from the nearest ring).
    pub ring_probes: u64,
    /// The smoothed round trip of the coordinator's reads to each DC's holders, ms (`null`: never measured).
    pub ring_round_trip_ms: Vec<Option<f64>>,
    /// The coordinator's lease cache, if it has one: reads by outcome, entries dropped, size now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache: Option<causet_core::cache::CacheStats>,
    /// The coordinator's write buffer, if it buffers writes: transactions buffered, components and their sizes,
    /// handovers and their latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub buffer: Option<causet_core::coordinator::HandoverStats>,
    /// The stable snapshot as the coordinator knows it.
    pub stable_snapshot: Vec<u64>,
    /// The garbage-collection frontier, on the shard that runs the node's stabilizer: versions below it may go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gc_frontier: Option<Vec<u64>>,
    /// The partitions this shard serves (those not replicated, and those whose replica here leads).
    pub partitions: Vec<PartitionStatus>,
    /// This shard's replicas of replicated partitions (Raft groups).
    pub replicas: Vec<ReplicaStatus>,
    /// Where each replicated partition lives, as its leaders announced (every shard hears every announcement:
    /// `/status` shows shard 0's at the top level).
    #[serde(skip)]
    pub placements: Vec<PlacementStatus>,
}

impl ShardStatus {
    /// Objects this shard's partitions store: each replica's copy (a node holds one per replicated partition it
    /// has a replica of), and each partition that is not replicated.
    pub fn stored_objects(&self) -> usize {
        let replicated = |id: u32| self.replicas.iter().any(|r| r.id == id);
        let alone = self.partitions.iter().filter(|p| !replicated(p.id)).map(|p| p.objects);
        self.replicas.iter().map(|r| r.objects).chain(alone).sum()
    }
}

/// Where a replicated partition lives, for `/status` (`placement`) and the operator's moves.
#[derive(Clone, Debug, Serialize)]
pub struct PlacementStatus {
    /// The partition.
    pub partition: u32,
    /// The node of its leader, as last announced.
    pub leader: Option<u16>,
    /// The log index from which this membership holds.
    pub conf_index: u64,
    /// Voters (of the incoming configuration during a joint change).
    pub voters: Vec<MemberStatus>,
    /// Learners: replicas being caught up before they vote (a replica moving in).
    pub learners: Vec<MemberStatus>,
    /// During a joint change, the voters of the configuration being left.
    pub outgoing: Vec<MemberStatus>,
}

impl PlacementStatus {
    /// The nodes with a replica of the partition, in any role, ascending.
    pub fn nodes(&self) -> Vec<u16> {
        let mut nodes: Vec<u16> =
            self.voters.iter().chain(&self.learners).chain(&self.outgoing).map(|m| m.node).collect();
        nodes.sort_unstable();
        nodes.dedup();
        nodes
    }
}

/// One replica of a replicated partition, for `/status`.
#[derive(Clone, Debug, Serialize)]
pub struct ReplicaStatus {
    /// The partition.
    pub id: u32,
    /// `leader` (serving), `elected` (catching up before it serves) or `follower`.
    pub role: &'static str,
    /// The current Raft term.
    pub term: u64,
    /// The node of the leader this replica follows (or its own), if known.
    pub leader: Option<u16>,
    /// The highest log index known committed.
    pub commit: u64,
    /// The last log index applied.
    pub applied: u64,
    /// The last log index held (durable or not).
    pub last_index: u64,
    /// The first log index held: the entries before it were compacted after a checkpoint.
    pub first_index: u64,
    /// Checkpoints this replica wrote.
    pub checkpoints: u64,
    /// Snapshots this replica sent to followers that needed compacted entries.
    pub snapshots_sent: u64,
    /// Snapshots this replica installed from its leader.
    pub snapshots_installed: u64,
    /// Snapshots this replica did not send because they were larger than a snapshot may be (1 GiB).
    pub snapshots_too_large: u64,
    /// Parts of snapshots this replica sent (snapshots go in parts of 1 MiB; resent parts included).
    pub snapshot_parts_sent: u64,
    /// Snapshot streams this replica sent again from the receiver's position (a part lost, or the receiver
    /// restarted).
    pub snapshot_part_resends: u64,
    /// Snapshots this replica received whole in parts.
    pub snapshot_streams_received: u64,
    /// On a leader, the other replicas: how far behind its log each one is.
    pub followers: Vec<FollowerStatus>,
    /// Terms this replica started serving as leader.
    pub terms_led: u64,
    /// Writes this replica handed to the storage engine (one per group round with something to store).
    pub writes: u64,
    /// Log entries those Writes carried.
    pub written_entries: u64,
    /// Raft rounds this replica led, timed (`/metrics` only: `causet_replica_round_seconds`).
    #[serde(skip)]
    pub rounds: causet_core::replica::Durations,
    /// Its Writes, timed (`/metrics` only: `causet_replica_write_seconds`).
    #[serde(skip)]
    pub write_durations: causet_core::replica::Durations,
    /// Times a serving leader stepped down and rebuilt its partition from the committed log.
    pub reloads: u64,
    /// Times this replica handed leadership back to the partition's home node.
    pub handovers: u64,
    /// The group's membership as this replica applied it.
    pub membership: MembershipStatus,
    /// Membership changes this replica applied.
    pub membership_changes: u64,
    /// Elections it started (it heard from no leader for an election timeout).
    pub campaigns: u64,
    /// Times it stopped leading because it had not heard from a quorum for an election timeout.
    pub quorum_lost: u64,
    /// Times it stopped leading because it saw a later term.
    pub deposed: u64,
    /// Membership changes it proposed as leader.
    pub membership_proposals: u64,
    /// Requests to join it sent while not a member (its node came back with an empty disk).
    pub join_requests: u64,
    /// Reads it served as a follower for the nearest replica.
    pub nearest_reads: u64,
    /// Reads for the nearest replica it passed on to the leader (it had not applied their snapshot).
    pub nearest_reads_passed_on: u64,
    /// Objects its partition holds (a follower's too: it applies every commit).
    pub objects: usize,
    /// Effects its partition keeps unfolded (above the garbage-collection frontier, or not applied to its base
    /// yet); on a follower, folded under the frontier and under what it applied.
    pub versions: usize,
}

/// A group's membership, for `/status`: each replica as its node and disk generation.
#[derive(Clone, Debug, Serialize)]
pub struct MembershipStatus {
    /// This replica's own generation.
    pub generation: u64,
    /// Voters (of the incoming configuration during a joint change).
    pub voters: Vec<MemberStatus>,
    /// Learners (being caught up before they vote).
    pub learners: Vec<MemberStatus>,
    /// During a joint change, the voters of the configuration being left; empty otherwise.
    pub outgoing: Vec<MemberStatus>,
}

/// One replica of a group, for `/status`.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct MemberStatus {
    /// Its node.
    pub node: u16,
    /// Its node's disk generation.
    pub generation: u64,
    /// Its incarnation on that disk (a replica moved to a node gets the next one).
    pub incarnation: u16,
}

/// Each replica id as its node, generation and incarnation.
fn members(ids: &[causet_core::group::ReplicaId]) -> Vec<MemberStatus> {
    use causet_core::replica::{replica_generation, replica_incarnation, replica_node};
    (ids.iter())
        .map(|id| MemberStatus {
            node: replica_node(*id),
            generation: replica_generation(*id),
            incarnation: replica_incarnation(*id),
        })
        .collect()
}

impl MembershipStatus {
    fn of(r: &causet_core::replica::Replica) -> Self {
        let m = r.group().membership();
        Self {
            generation: causet_core::replica::replica_generation(r.group().id()),
            voters: members(&m.voters),
            learners: members(&m.learners),
            outgoing: members(&m.outgoing),
        }
    }
}

/// Another replica as the leader sees it, for `/status`.
#[derive(Clone, Debug, Serialize)]
pub struct FollowerStatus {
    /// Its node.
    pub node: u16,
    /// The last log index it is known to hold.
    pub matched: u64,
    /// Entries of the leader's log it is not known to hold.
    pub lag: u64,
    /// It is being sent a snapshot.
    pub snapshot: bool,
}

/// A partition's state, for `/status`.
#[derive(Clone, Debug, Serialize)]
pub struct PartitionStatus {
    /// The partition.
    pub id: u32,
    /// Its pvc, one timestamp per DC (HLC, microseconds shifted left by 12 bits).
    pub pvc: Vec<u64>,
    /// Prepared transactions.
    pub prepared: usize,
    /// Requests waiting for their snapshot.
    pub waiting: usize,
    /// Objects ever written.
    pub objects: usize,
    /// Effects kept unfolded.
    pub versions: usize,
    /// Local transactions some peer DC has not acknowledged yet.
    pub replication_backlog: usize,
    /// Some local transactions a peer DC has not acknowledged no longer fit the replication window: they are in
    /// the log only, and read back from it when the peer needs them.
    pub replication_spilled: bool,
    /// Per peer DC: how far its acknowledgement lags this partition's clock, ms. It keeps growing while the peer is
    /// away, past the window where `replication_backlog` stops: the backlog is about this lag times the write rate.
    pub replication_lag_ms: Vec<(u16, u64)>,
    /// Remote transactions received and waiting for their dependencies, per origin DC.
    pub inbound_backlog: Vec<(u16, usize)>,
    /// Prepares turned away since this partition started serving here, as duplicates of transactions that had
    /// ended (resent to a new leader, or passed on by a deposed one).
    pub duplicate_prepares: u64,
    /// Writes shipped to other DCs (once per DC), and their bytes.
    pub shipped_writes: (u64, u64),
    /// Times it sent another DC everything after what that DC acknowledged again: the DC fell silent, it asked.
    pub replication_go_backs: (u64, u64),
}

impl ShardStatus {
    /// The status of one shard's node.
    pub fn of(node: &Node) -> Self {
        let partitions = node
            .partitions()
            .map(|p| {
                let (objects, versions) = p.store_size();
                PartitionStatus {
                    id: p.id().0,
                    pvc: p.pvc().entries().iter().map(|t| t.0).collect(),
                    prepared: p.prepared_count(),
                    waiting: p.waiting_count(),
                    objects,
                    versions,
                    replication_backlog: p.replication_backlog(),
                    replication_spilled: p.replication_spilled(),
                    replication_lag_ms: p.replication_lag_us().into_iter().map(|(d, us)| (d.0, us / 1_000)).collect(),
                    inbound_backlog: p.inbound_backlog().into_iter().map(|(d, n)| (d.0, n)).collect(),
                    duplicate_prepares: p.duplicate_prepares(),
                    shipped_writes: p.shipped_writes(),
                    replication_go_backs: p.replication_go_backs(),
                }
            })
            .collect();
        let replicas = node
            .replicas()
            .map(|r| {
                let g = r.group();
                let (objects, versions) = r.partition().store_size();
                ReplicaStatus {
                    id: r.id().0,
                    role: r.role(),
                    term: g.term(),
                    leader: r.leader_node(),
                    commit: g.committed().0,
                    applied: g.applied().0,
                    last_index: g.last_index().0,
                    first_index: g.first_index().0,
                    checkpoints: r.stats().checkpoints,
                    snapshots_sent: g.stats().snapshots_sent,
                    snapshots_installed: g.stats().snapshots_installed,
                    snapshots_too_large: r.stats().snapshots_too_large,
                    snapshot_parts_sent: r.part_stats().parts_sent,
                    snapshot_part_resends: r.part_stats().resends,
                    snapshot_streams_received: r.part_stats().streams_received,
                    followers: g
                        .followers()
                        .into_iter()
                        .map(|f| FollowerStatus {
                            node: causet_core::replica::replica_node(f.id),
                            matched: f.matched.0,
                            lag: g.last_index().0.saturating_sub(f.matched.0),
                            snapshot: f.snapshot,
                        })
                        .collect(),
                    terms_led: r.stats().terms_led,
                    writes: r.stats().writes,
                    written_entries: r.stats().written_entries,
                    rounds: r.stats().rounds,
                    write_durations: r.stats().write_durations,
                    reloads: r.stats().reloads,
                    handovers: r.stats().handovers,
                    membership: MembershipStatus::of(r),
                    membership_changes: g.stats().membership_changes,
                    campaigns: g.stats().campaigns,
                    quorum_lost: g.stats().quorum_lost,
                    deposed: g.stats().deposed,
                    membership_proposals: r.stats().membership_proposals,
                    join_requests: r.stats().join_requests,
                    nearest_reads: r.stats().nearest_reads,
                    nearest_reads_passed_on: r.stats().nearest_reads_passed_on,
                    objects,
                    versions,
                }
            })
            .collect();
        let coordinator = node.coordinator();
        let (ring_probes, round_trips_us) = coordinator.ring_probes();
        ShardStatus {
            replicas,
            shard: node.shard(),
            open_transactions: coordinator.open_transactions(),
            resends_to_new_leaders: coordinator.resends(),
            prepare_resends: coordinator.prepare_resends(),
            read_resends: coordinator.read_resends(),
            remote_reads: coordinator.remote_reads(),
            ring_probes,
            ring_round_trip_ms: round_trips_us
                .iter()
                .map(|us| us.map(|us| (us as f64 / 100.0).round() / 10.0))
                .collect(),
            cache: coordinator.cache_stats(),
            buffer: coordinator.handover_stats(),
            stable_snapshot: coordinator.stable_snapshot().entries().iter().map(|t| t.0).collect(),
            gc_frontier: node.stabilizer().map(|s| s.gc_frontier().entries().iter().map(|t| t.0).collect()),
            partitions,
            placements: node
                .placements()
                .map(|(p, index, m, leader)| PlacementStatus {
                    partition: p.0,
                    leader,
                    conf_index: index.0,
                    voters: members(&m.voters),
                    learners: members(&m.learners),
                    outgoing: members(&m.outgoing),
                })
                .collect(),
        }
    }
}
