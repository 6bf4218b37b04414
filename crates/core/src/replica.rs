//! One replica of a replicated partition: a [`Partition`] whose log is its Raft [`Group`]'s log (NuKV: each
//! partition of a DC is a Raft group; `docs/design/raft-groups.md` §6).
//!
//! Every replica keeps the partition's state by applying the records its group commits, in log order, through
//! the same `apply` path recovery takes ([`Partition::apply_committed`]). Only the leader *serves*: it answers
//! reads, prepares and commits, terminates transactions and ships the partition's commits to other DCs, exactly as
//! an unreplicated partition does, except that each record it writes becomes a proposal to the group, and "the
//! record is durable" ([`Partition::handle_persisted`]) means "the group committed it": a majority of the replicas
//! hold it on disk, this one included. So nothing a client or another DC observed is lost while a majority of the
//! replicas keep their disks.
//!
//! # The leader's life
//!
//! - **Taking the lead.** A replica elected leader first applies everything committed before its term: raft
//!   commits a new leader's no-op entry, and with it every earlier entry of its log. Once that entry is applied
//!   ([`Group::applied_term`] is its term) the replica serves ([`Partition::take_lead`]): its clock starts above
//!   the largest clock bound in the log, which covers everything a previous leader exposed, because a leader's
//!   messages leave only under a committed bound (`partition/bound.rs`), whatever its clock's kind.
//! - **Log positions are raft indexes.** The serving partition numbers its records from the group's last index
//!   on, and each proposal must land at the position the partition gave it; a record that did not (the group
//!   took something else in between) is treated as lost.
//! - **Stepping down.** A leader that loses its term, or learns that one of its proposals was lost (another
//!   entry committed at its index), holds state that was staged for records that may never commit: prepared
//!   transactions, decisions, remote transactions received, the replication sender's window. It throws the
//!   partition away and rebuilds it as a follower from the committed log (`Replica::reload`), which is what a
//!   crash and recovery would do, without the crash. Messages it held for durability are dropped: their senders
//!   retry (a coordinator asks again or times out, a partition holding a prepared transaction queries its
//!   outcome, replication resends what was not acknowledged).
//! - **A deposed leader that does not know it yet** (cut off from the others) keeps serving reads from its state
//!   until its clock reaches its last committed bound, and then sends nothing more, since it can commit no new
//!   bound. Every transaction the new leader commits has a commit time above that bound, so the old leader's
//!   answers are at snapshots below every commit it missed: stale, and consistent. This is the leader's lease.
//! - **Followers serve and fold.** A follower applies every commit to its partition. Its leader's pvc reports,
//!   passed on by the follower's node with the log position they hold at (`ReplicaMessage::Closed`), say which
//!   snapshots it may serve once it applied that far; they also carry the DC's garbage-collection frontier, and
//!   the follower folds its old versions under it and under what it applied
//!   ([`Partition::collect_applied`]), so its memory stays bounded like its leader's.
//!
//! # Checkpoints, compaction and snapshots
//!
//! - **Checkpoints.** On the driver's timer ([`Replica::checkpoint`]) every replica hands out a checkpoint of its
//!   partition ([`ReplicaOutput::Checkpoint`]): a follower's partition is the committed state, so at once; a
//!   serving leader's runs ahead of the commit point (records proposed, not committed), so its checkpoint waits
//!   until the group committed everything it covers in the same term, and is dropped if the leader reloads first.
//! - **Compaction.** The log before a checkpoint goes, except from its `keep_log_from` on (geo-replication reads
//!   those records back). The driver truncates the stored log when it writes the checkpoint; the group's view is
//!   compacted once a Write handed out after the checkpoint is durable, which shows the checkpoint is on disk too
//!   (the driver writes in order). So the stored checkpoint always reaches the start of the group's view.
//! - **Rebuilding.** A step-down rebuilds the partition from memory while the log is whole; once compacted, from
//!   the stored checkpoint ([`ReplicaOutput::Load`], [`Replica::handle_loaded`]) and the entries after it. Until it
//!   is loaded the replica neither applies nor serves. A restart starts from the stored checkpoint likewise.
//! - **Snapshots.** A follower that needs compacted entries gets the leader's stored checkpoint, loaded the same
//!   way, with the entries it still keeps for geo-replication ([`InstalledSnapshot`]). Followers forget what the
//!   peer DCs acknowledged because the leader logs it ([`LogRecord::PeerAcked`]): their `keep_log_from` advances
//!   like the leader's, and one that takes the lead resumes replication from there.
//!
//! # A node that lost its disk, and replicas that move
//!
//! A replica's raft id names its node, its disk's generation and its incarnation on that disk
//! ([`replica_id_of`]): a node that comes back with an empty disk must not answer under its old id, since it
//! forgot its votes and its log (with one empty disk and everyone up, an entry held by the other two could be
//! outvoted by the empty one and a replica lacking it). The driver gives it a new generation instead, and each
//! replica a disk hosts for a partition takes the next incarnation, so an id the group removed never comes back.
//!
//! A replica that is to join a running group ([`Hosted::replaces`]: its node's old replica after a disk loss, or
//! another node's when the operator moves the replica here) asks every other node of the DC to make it a voter in
//! place of that node's replica ([`ReplicaMessage::Join`], every [`MEMBERSHIP_INTERVAL_US`] until it is one), and
//! whichever replica serves takes the next step (`Replica::admit`): it adds the newcomer as a learner (caught up
//! from the log, or by a snapshot written after the change, which the leader checkpoints for if its stored one is
//! older), then, once it holds every committed entry, makes it a voter in place of the replaced one in one joint
//! change, and leaves the joint configuration. A leader that is the replica replaced hands leadership to another
//! voter first. While this runs after a disk loss the old replica's vote is simply missing, as it was since the
//! disk was lost; a second disk lost before the first is replaced can lose a majority's copy, which no protocol
//! survives. A serving leader's membership entries take log positions its partition would otherwise give
//! records: it skips them ([`Partition::skip_log_position`]). A replica that applies a membership without itself
//! says so ([`ReplicaOutput::Removed`]) and its node drops it; one that never applied its removal (its node was
//! down) learns it from its leader's notice (`crate::node`).
//!
//! A snapshot (a partition's whole state) travels in parts, a few at a time, with other messages between them
//! ([`crate::parts`]); each end holds it whole in memory, up to [`MAX_SNAPSHOT_BYTES`].
//!
//! See `docs/design/raft-groups.md`, which also argues why the clock bound above is the leader's lease.

use crate::group::{Compacted, DurableState, Entry, Group, GroupConfig, GroupError, GroupOutput, HardState};
use crate::group::{MembershipChange, ReplicaId};
use crate::message::ReplicaMessage;
use crate::partition::{Checkpoint, Partition, PartitionOutput};
use crate::record::{LogRecord, Lsn};
use crate::replication::LOG_READ_RECORDS;
use crate::topology::{NodeIndex, Topology};
use crate::{Address, Config, Envelope, Message, PartitionId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};

/// How often a serving leader repeats its leadership notice, for nodes that missed it (a link to them was down
/// when it was elected, or they restarted since).
pub const LEADER_NOTICE_INTERVAL_US: u64 = 1_000_000;

/// The largest snapshot a leader sends, encoded. A snapshot travels in parts ([`crate::parts`]), but each end holds
/// it whole in memory, and Raft's message encoding (protobuf) is not meant for messages near 2 GiB. A larger one
/// is not sent (the follower stays behind; counted in [`ReplicaStats::snapshots_too_large`]), and the leader tries
/// again after [`SNAPSHOT_RETRY_US`].
pub const MAX_SNAPSHOT_BYTES: usize = 1 << 30;

/// How long a leader waits before it loads a snapshot again after one was too large to send.
pub const SNAPSHOT_RETRY_US: u64 = 10_000_000;

/// Disk generations are below this: a replica id holds the node (16 bits), the generation (31) and the
/// replica's incarnation on that disk (17).
pub const MAX_GENERATION: u64 = 1 << 31;

/// The raft id of the first replica on node `node` whose disk is in its `generation` (raft reserves 0): a node that
/// lost its disk comes back in a new generation, so its replicas have new ids (module documentation).
pub fn replica_id(node: NodeIndex, generation: u64) -> ReplicaId {
    replica_id_of(node, generation, 0)
}

/// The raft id of a replica on node `node`, disk `generation`, in its `incarnation` there: each replica of a
/// partition that a disk hosts gets a new one (a replica moved away and back is a new replica), so an id the
/// group removed never comes back.
pub fn replica_id_of(node: NodeIndex, generation: u64, incarnation: u16) -> ReplicaId {
    assert!(generation < MAX_GENERATION, "disk generation {generation} is not below {MAX_GENERATION}");
    ReplicaId((u64::from(node) + 1) | generation << 16 | u64::from(incarnation) << 47)
}

/// The node of a replica id.
pub fn replica_node(id: ReplicaId) -> NodeIndex {
    ((id.0 & 0xffff) - 1) as NodeIndex
}

/// The disk generation of a replica id.
pub fn replica_generation(id: ReplicaId) -> u64 {
    (id.0 >> 16) & (MAX_GENERATION - 1)
}

/// The incarnation of a replica id on its disk.
pub fn replica_incarnation(id: ReplicaId) -> u16 {
    (id.0 >> 47) as u16
}

/// The replica a node runs for a partition, as the node's store keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hosted {
    /// Its raft id.
    pub id: ReplicaId,
    /// Until it is a voter, the node whose replica it replaces: its own after a disk loss, another when the
    /// operator moves a replica here. `None` for the group's first voters.
    pub replaces: Option<NodeIndex>,
}

/// What a node's store says about one replicated partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hosting {
    /// The node runs this replica.
    Hosts(Hosted),
    /// The node's replica in this incarnation was removed from the group and its state deleted; a later one
    /// takes the next incarnation.
    Left {
        /// The incarnation of the replica that left.
        incarnation: u16,
    },
}

/// Which replicas a node whose store says nothing yet runs: at a cluster's first start (disk generation 0) the
/// topology's placement, as the groups' first voters; a node that joins with a new disk none (its replicas are
/// created as it hears which groups still count a replica of its earlier disk, [`crate::node::Node`]).
pub fn first_hosting(topology: &Topology, node: NodeIndex, generation: u64) -> BTreeMap<PartitionId, Hosting> {
    if !topology.replicated() || generation != 0 {
        return BTreeMap::new();
    }
    let hosted = |_| Hosting::Hosts(Hosted { id: replica_id(node, 0), replaces: None });
    topology.partitions_on(node).map(|p| (p, hosted(p))).collect()
}

/// The most pvc reports a follower keeps waiting for their log position to be applied.
const MAX_CLOSED_PENDING: usize = 256;

/// How often a follower folds away versions below the DC's garbage-collection frontier (on the group's ticks,
/// which come at least this often).
const FOLLOWER_COLLECT_INTERVAL_US: u64 = 10_000;

/// How often a replica that is not a member of its group asks to join, and a serving leader looks for a
/// membership step to take.
pub const MEMBERSHIP_INTERVAL_US: u64 = 500_000;

/// A snapshot a follower installs, sent by its leader because the entries it lacked were compacted away: the
/// partition's complete checkpoint at `checkpoint.lsn` (every object), and the committed entries after `compacted`
/// through `checkpoint.lsn` that the leader still kept (geo-replication reads them back). The driver makes it
/// durable with the Write that carries it, atomically: the replica's stored log and checkpoint are replaced by it.
#[derive(Clone, Debug, PartialEq)]
pub struct InstalledSnapshot {
    /// The partition after every entry up to `checkpoint.lsn`, complete.
    pub checkpoint: Checkpoint,
    /// The last entry not kept: `entries` start right after it.
    pub compacted: Compacted,
    /// Committed entries from `compacted.index + 1` through `checkpoint.lsn`, consecutive (empty when
    /// `compacted.index == checkpoint.lsn`).
    pub entries: Vec<Entry>,
}

/// What a replica asks its node to do.
#[derive(Clone, Debug, PartialEq)]
pub enum ReplicaOutput {
    /// Deliver a message (the partition's, or Raft's to another replica).
    Send(Envelope),
    /// Make this durable, after every earlier Write and atomically, then call [`Replica::handle_written`] (see
    /// [`GroupOutput::Write`]).
    Write {
        /// The Write's number.
        ready: u64,
        /// A snapshot from the leader to install first: it replaces the stored log and checkpoint.
        snapshot: Option<Box<InstalledSnapshot>>,
        /// Entries replacing the log from `entries[0].index` on.
        entries: Vec<Entry>,
        /// The new hard state, if it changed.
        hard_state: Option<HardState>,
    },
    /// Write this checkpoint of the partition (incremental: the objects changed since the previous one), after
    /// every Write handed out before it; the stored log up to its lsn may then be truncated, but not from its
    /// `keep_log_from` on.
    Checkpoint(Box<Checkpoint>),
    /// Load the partition's complete checkpoint as stored (every object's latest image) and hand it to
    /// [`Replica::handle_loaded`]: the replica rebuilds from it, or offers it as a snapshot to a follower.
    Load,
    /// This replica serves as the partition's leader in `term`: tell the DC, so that messages come here. Emitted
    /// when it starts serving, and again every [`LEADER_NOTICE_INTERVAL_US`] while it does.
    Leading {
        /// The term.
        term: u64,
        /// The group's membership as this leader applied it.
        membership: crate::group::Membership,
        /// The log index from which that membership holds ([`Group::membership_index`]).
        conf_index: Lsn,
    },
    /// This replica applied a membership without itself in it: it was removed from the group (moved to another
    /// node). The node drops it and deletes its state.
    Removed,
}

/// Where a replica stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Applies what the group commits.
    Follower,
    /// Elected in `term`, applying what was committed before it.
    Elected { term: u64 },
    /// Serves the partition in `term`.
    Serving { term: u64 },
}

/// How many durations fell in each of a fixed set of buckets, cumulatively since the replica started, and their
/// sum: what a Prometheus histogram exposes. Bucket `i` holds the durations of at most
/// [`Durations::FIRST_BOUND_US`] · 2^i µs (100 µs to about 1.6 s); the last one holds everything longer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Durations {
    counts: [u64; Durations::BUCKETS],
    sum_us: u64,
}

impl Durations {
    /// The number of buckets, the last one unbounded.
    pub const BUCKETS: usize = 16;
    /// The upper bound of the first bucket, in µs.
    pub const FIRST_BOUND_US: u64 = 100;

    /// Counts one duration.
    pub fn record(&mut self, us: u64) {
        let bucket = (0..Self::BUCKETS - 1).find(|i| us <= Self::FIRST_BOUND_US << i).unwrap_or(Self::BUCKETS - 1);
        self.counts[bucket] += 1;
        self.sum_us = self.sum_us.saturating_add(us);
    }

    /// Adds another replica's counts to these.
    pub fn merge(&mut self, other: &Durations) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine += theirs;
        }
        self.sum_us = self.sum_us.saturating_add(other.sum_us);
    }

    /// The durations counted.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Their sum, in µs.
    pub fn sum_us(&self) -> u64 {
        self.sum_us
    }

    /// Each bucket's upper bound in µs (none: the last, unbounded one) with the durations counted in it.
    pub fn buckets(&self) -> impl Iterator<Item = (Option<u64>, u64)> + '_ {
        self.counts.iter().enumerate().map(|(i, n)| ((i < Self::BUCKETS - 1).then(|| Self::FIRST_BOUND_US << i), *n))
    }

    /// The durations counted that were longer than `bound_us`, one of the buckets' bounds.
    pub fn longer_than(&self, bound_us: u64) -> u64 {
        self.buckets().skip_while(|(b, _)| b.is_some_and(|b| b <= bound_us)).map(|(_, n)| n).sum()
    }
}

/// Counters of a replica, for status pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaStats {
    /// Times this replica started serving as leader.
    pub terms_led: u64,
    /// Times a serving leader threw its partition away and rebuilt it from the committed log.
    pub reloads: u64,
    /// Times this replica handed leadership back to the partition's home node.
    pub handovers: u64,
    /// Checkpoints handed to the driver.
    pub checkpoints: u64,
    /// Times the stored checkpoint was loaded (to rebuild the partition, or to send it as a snapshot).
    pub loads: u64,
    /// Snapshots not sent because they were larger than [`MAX_SNAPSHOT_BYTES`].
    pub snapshots_too_large: u64,
    /// Membership changes this replica proposed as leader.
    pub membership_proposals: u64,
    /// Requests to join the group this replica sent (while it is not a member).
    pub join_requests: u64,
    /// Reads served by this replica as a follower ([`Replica::read_nearest`]).
    pub nearest_reads: u64,
    /// Reads for the nearest replica that this follower passed on to the leader (it had not applied their
    /// snapshot yet).
    pub nearest_reads_passed_on: u64,
    /// Writes (entries, hard state or a snapshot made durable together) handed to the driver: one per round of
    /// the group that had something to store, however many entries it carried.
    pub writes: u64,
    /// Entries those Writes carried.
    pub written_entries: u64,
    /// Raft rounds as this replica led them: from proposing a record of its partition to learning it committed (a
    /// majority stored it), each record counted once.
    pub rounds: Durations,
    /// Writes from handing one to the driver to hearing it durable (the storage engine's queue and write, and the
    /// report's way back).
    pub write_durations: Durations,
}

/// One replica of a replicated partition. See the module documentation.
#[derive(Debug)]
pub struct Replica {
    id: PartitionId,
    node: NodeIndex,
    /// The node that should lead the partition whenever its replica can, so that leadership spreads over the
    /// nodes: the partition's home node, until the node says otherwise ([`Replica::prefer_leader`]).
    preferred: NodeIndex,
    config: Config,
    group: Group,
    partition: Partition,
    role: Role,
    outputs: VecDeque<ReplicaOutput>,
    stats: ReplicaStats,
    /// When a serving leader next repeats its notice.
    next_notice_us: u64,
    /// The partition is not the applied state: a reload waits for the stored checkpoint. It neither applies nor
    /// serves until [`Replica::handle_loaded`].
    stale: bool,
    /// A [`ReplicaOutput::Load`] is out.
    loading: bool,
    /// The group wants a snapshot for a follower: offer the checkpoint when it is loaded.
    snapshot_wanted: bool,
    /// No snapshot is loaded before this time (the last one was too large to send).
    next_snapshot_us: u64,
    /// A leader's checkpoint, taken beyond what the group committed: written once the group commits everything it
    /// covers in `term`, dropped if the leader reloads first.
    pending_checkpoint: Option<(u64, Checkpoint)>,
    /// The checkpoint of a snapshot being installed: the partition becomes it once the group reports it durable.
    installing: Option<Checkpoint>,
    /// The number of the last Write handed out.
    last_write: u64,
    /// When each Write not yet reported durable was handed out, by number ([`ReplicaStats::write_durations`]).
    writes_out: VecDeque<(u64, u64)>,
    /// When each record a serving leader proposed and has not seen commit was proposed, by log position
    /// ([`ReplicaStats::rounds`]); emptied when it stops serving.
    proposed_at: VecDeque<(Lsn, u64)>,
    /// The nodes of the DC.
    nodes: NodeIndex,
    /// Until this replica is a voter: the node whose replica it is to replace ([`Hosted::replaces`]).
    replaces: Option<NodeIndex>,
    /// Whether the membership applied so far holds this replica (a change without it removes it).
    member: bool,
    /// When this replica next asks to join (not a member), or looks for a membership step (a serving leader).
    next_membership_us: u64,
    /// The leader's pvc reports not yet usable here, oldest first: (term, index, pvc), usable once the entry at
    /// `index` of term `term` is applied ([`Partition::note_closed`]).
    closed: VecDeque<(u64, Lsn, crate::VectorClock)>,
    /// The DC's garbage-collection frontier, as the leader's reports last brought it (a follower's).
    gc: Option<crate::VectorClock>,
    /// When a follower next folds its old versions away.
    next_collect_us: u64,
    /// The log may be compacted through this index once a Write after the numbered one is durable (then so is
    /// the checkpoint handed out before it).
    compact_after: Option<(u64, Lsn)>,
    /// Raft messages too large for one message (snapshots), in parts, both ways.
    parts: crate::parts::Parts,
}

impl Replica {
    /// Starts node `node`'s replica of partition `id` from what its disk holds (`durable` and the complete
    /// `checkpoint`; empty for a new replica). The partition starts from the checkpoint, and every committed
    /// entry after it is applied again. `election_seed` randomizes its elections (the driver draws it from its
    /// random source).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: PartitionId,
        config: Config,
        topology: &Topology,
        node: NodeIndex,
        now_us: u64,
        hosted: Hosted,
        durable: DurableState,
        checkpoint: Option<Checkpoint>,
        election_seed: u64,
    ) -> Result<Self, GroupError> {
        // A new group's voters are the first generation's replicas of the topology's placement; any other replica
        // joins a running group.
        let voters = topology.replicas(id).nodes.iter().map(|n| replica_id(*n, 0)).collect();
        let mut group_config = GroupConfig::new(hosted.id, voters);
        group_config.election_seed = election_seed;
        group_config.election_ticks =
            config.raft_election_timeout_us.div_ceil(group_config.tick_us).max(group_config.heartbeat_ticks as u64 + 1)
                as usize;
        // Snapshots that go in parts are reported to raft when they arrived (or did not), not when they left.
        group_config.report_snapshots_above = config.raft_part_bytes;
        // The checkpoint holds every entry up to its lsn applied, and the membership as of it; the group hands out
        // the ones after it.
        let applied = checkpoint.as_ref().map_or(Lsn(0), |c| c.lsn);
        let membership = checkpoint.as_ref().and_then(|c| c.membership.clone());
        let durable = DurableState { applied, membership, ..durable };
        let group = Group::new(group_config, now_us, durable)?;
        let home = topology.home(topology.dc(), id).expect("a DC knows its own shape");
        let parts = crate::parts::Parts::new(config.raft_part_bytes, config.resend_after_us);
        let mut replica = Self {
            partition: Partition::restore_replica(id, config.clone(), now_us, checkpoint),
            id,
            node,
            preferred: home,
            config,
            group,
            role: Role::Follower,
            outputs: VecDeque::new(),
            stats: ReplicaStats::default(),
            next_notice_us: 0,
            stale: false,
            loading: false,
            snapshot_wanted: false,
            next_snapshot_us: 0,
            pending_checkpoint: None,
            installing: None,
            parts,
            last_write: 0,
            writes_out: VecDeque::new(),
            proposed_at: VecDeque::new(),
            compact_after: None,
            nodes: topology.nodes(topology.dc()),
            replaces: hosted.replaces,
            member: false,
            next_membership_us: now_us,
            closed: VecDeque::new(),
            gc: None,
            next_collect_us: now_us,
        };
        replica.member = replica.group.membership().contains(hosted.id);
        if node == home && replica.member {
            // The home replica asks for the lead at once: at a cold start it is elected before the others time
            // out, so leadership need not be handed back to it later (a handover stalls what is in flight). In a
            // running group its pre-vote is refused while the others hear from their leader.
            replica.group.campaign();
        }
        replica.pump(now_us);
        Ok(replica)
    }

    /// The node that should lead this partition whenever its replica there holds the whole log
    /// (`crate::node::Node`'s spread of leadership over the nodes).
    pub fn prefer_leader(&mut self, node: NodeIndex) {
        self.preferred = node;
    }

    /// The DC grew to `nodes` nodes while it runs: requests to join reach the new ones too.
    pub fn set_nodes(&mut self, nodes: NodeIndex) {
        self.nodes = self.nodes.max(nodes);
    }

    /// The partition.
    pub fn id(&self) -> PartitionId {
        self.id
    }

    /// The partition's state machine: the leader's while this replica serves, else the state applied so far.
    pub fn partition(&self) -> &Partition {
        &self.partition
    }

    /// The partition's state machine, for reads that change nothing but its read cache (a backup's export).
    pub(crate) fn partition_mut(&mut self) -> &mut Partition {
        &mut self.partition
    }

    /// The Raft group.
    pub fn group(&self) -> &Group {
        &self.group
    }

    /// Counters.
    pub fn stats(&self) -> ReplicaStats {
        self.stats
    }

    /// Where this replica stands, for status pages: `follower`, `elected` (catching up before it serves) or
    /// `leader`.
    pub fn role(&self) -> &'static str {
        match self.role {
            Role::Follower => "follower",
            Role::Elected { .. } => "elected",
            Role::Serving { .. } => "leader",
        }
    }

    /// Until it is a voter, the node whose replica this one is to replace ([`Hosted::replaces`]).
    pub fn replaces(&self) -> Option<NodeIndex> {
        self.replaces
    }

    /// Whether this replica serves the partition (its leader, caught up).
    pub fn serving(&self) -> bool {
        matches!(self.role, Role::Serving { .. })
    }

    /// The node of the leader this replica follows (or this one), if it knows one.
    pub fn leader_node(&self) -> Option<NodeIndex> {
        self.group.leader().map(replica_node)
    }

    /// The id of the group's voter on node `node`, if it has one (its latest generation; a learner cannot take
    /// leadership over).
    fn voter_on(&self, node: NodeIndex) -> Option<ReplicaId> {
        let membership = self.group.membership();
        membership.voters.iter().filter(|id| replica_node(**id) == node).max().copied()
    }

    /// A message for this replica: Raft's, or the partition's (only while serving; the node forwards the
    /// partition's messages to the leader otherwise).
    pub fn handle_message(&mut self, now_us: u64, from: Address, msg: Message) {
        match msg {
            Message::Replica(ReplicaMessage::Raft { bytes }) => self.group.handle_message(now_us, &bytes),
            Message::Replica(ReplicaMessage::RaftPart { stream, offset, total, bytes }) => {
                if let Address::Replica(_, sender) = from {
                    let (ack, whole) = self.parts.on_part(now_us, sender, stream, offset, total, bytes);
                    if let Some(ack) = ack {
                        self.send_replica(sender, ack);
                    }
                    if let Some(whole) = whole {
                        self.group.handle_message(now_us, &whole);
                    }
                }
            }
            Message::Replica(ReplicaMessage::RaftPartAck { stream, received }) => {
                if let Address::Replica(_, receiver) = from {
                    for part in self.parts.on_ack(now_us, receiver, stream, received) {
                        self.send_replica(receiver, part);
                    }
                    self.report_streams();
                }
            }
            Message::Replica(ReplicaMessage::Leader { .. } | ReplicaMessage::Host { .. }) => {}
            Message::Replica(ReplicaMessage::Join { replica, replaces }) if self.serving() => {
                self.admit(now_us, replica, replaces)
            }
            Message::Replica(ReplicaMessage::Join { .. }) => {}
            Message::Replica(ReplicaMessage::Closed { term, index, pvc, committed, gc }) if !self.serving() => {
                // The leader's commit point: raft tells a follower only with its next append or heartbeat
                // (`GroupConfig::broadcast_commits`), this within a report interval.
                if let Some((commit_term, commit_index)) = committed {
                    self.group.learn_commit(commit_term, commit_index);
                }
                if self.closed.len() >= MAX_CLOSED_PENDING {
                    self.closed.pop_front();
                }
                self.closed.push_back((term, index, pvc));
                match &mut self.gc {
                    Some(known) => known.merge_max(&gc),
                    None => self.gc = Some(gc),
                }
            }
            Message::Replica(ReplicaMessage::Closed { .. }) => {}
            msg if self.serving() => self.partition.handle_message(now_us, from, msg),
            _ => {}
        }
        self.pump(now_us);
    }

    /// A read that the replica nearest its coordinator may serve ([`Message::Read`] with `nearest`), arriving at this
    /// replica while it does not serve as the leader: answered from what it applied if that covers the read's
    /// snapshot, else handed back, to go on to the leader.
    pub fn read_nearest(&mut self, e: Envelope) -> Option<Envelope> {
        let Message::Read { tx, request, snapshot, objects, nearest: true } = &e.msg else { return Some(e) };
        if self.stale || self.installing.is_some() {
            return Some(e);
        }
        match self.partition.read_applied(snapshot, objects) {
            Some(result) => {
                self.stats.nearest_reads += 1;
                let msg = Message::ReadReply { tx: *tx, request: *request, result };
                self.outputs.push_back(ReplicaOutput::Send(self.partition.envelope(e.from, msg)));
                None
            }
            None => {
                self.stats.nearest_reads_passed_on += 1;
                Some(e)
            }
        }
    }

    /// The leader's pvc reports whose log position this replica applied become what it may serve reads at; one
    /// whose entry there has another term (that leader's entries were overwritten) is dropped.
    fn take_closed(&mut self) {
        let applied = self.group.applied();
        while self.closed.front().is_some_and(|(_, index, _)| *index <= applied) {
            let (term, index, pvc) = self.closed.pop_front().expect("a front");
            if !self.serving() && !self.stale && self.group.term_of(index) == Some(term) {
                self.partition.note_closed(&pvc);
            }
        }
    }

    /// The driver made every Write up to `ready` durable.
    pub fn handle_written(&mut self, now_us: u64, ready: u64) {
        // A Write this replica never handed out: a late report for an earlier replica of the partition on this
        // node, which left its group (Writes of each replica are numbered from 1).
        if ready > self.last_write {
            return;
        }
        while let Some((_, at)) = self.writes_out.pop_front_if(|(number, _)| *number <= ready) {
            self.stats.write_durations.record(now_us.saturating_sub(at));
        }
        self.group.handle_written(ready);
        if let Some((_, through)) = self.compact_after.take_if(|(after, _)| ready > *after) {
            // The checkpoint handed out before this Write is on disk too (the driver writes in order).
            self.group.compact(through);
        }
        self.pump(now_us);
    }

    /// Takes a checkpoint of the partition for the driver ([`ReplicaOutput::Checkpoint`]): at once on a replica
    /// that does not serve (its partition is the committed state), and on a serving leader once the group has
    /// committed every record it covers (a leader's partition runs ahead of the log's commit point). Nothing while
    /// the partition is being rebuilt, or while a leader's previous checkpoint still waits.
    pub fn checkpoint(&mut self) {
        if self.stale || self.installing.is_some() || self.pending_checkpoint.is_some() {
            return;
        }
        let checkpoint = self.partition.take_checkpoint();
        match self.role {
            Role::Serving { term } if checkpoint.lsn > self.group.applied() => {
                self.pending_checkpoint = Some((term, checkpoint));
            }
            _ if checkpoint.lsn == Lsn(0) => {}
            _ => self.hand_out_checkpoint(checkpoint),
        }
    }

    /// The partition's complete checkpoint as stored (asked by [`ReplicaOutput::Load`]).
    pub fn handle_loaded(&mut self, now_us: u64, checkpoint: Option<Checkpoint>) {
        self.loading = false;
        self.stats.loads += 1;
        if std::mem::take(&mut self.snapshot_wanted) {
            if checkpoint.as_ref().is_some_and(|c| c.lsn < self.group.membership_index()) {
                // The stored checkpoint predates the last membership change: the follower that wants it may be
                // newer than it and would drop it. Write a newer one; a later request loads that.
                self.checkpoint();
                self.next_snapshot_us = now_us + SNAPSHOT_RETRY_US / 100;
            } else if let Some(c) = &checkpoint {
                let keep_after = c.truncate_through();
                let state = postcard::to_allocvec(c).expect("a checkpoint serializes");
                let kept = self.group.read_entries(keep_after, c.lsn, usize::MAX);
                let size = state.len() + kept.iter().map(|(_, data)| data.len()).sum::<usize>();
                if size > MAX_SNAPSHOT_BYTES {
                    self.stats.snapshots_too_large += 1;
                    self.next_snapshot_us = now_us + SNAPSHOT_RETRY_US;
                } else {
                    self.group.offer_snapshot(c.lsn, keep_after, state);
                }
            }
        }
        if self.stale {
            let first = self.group.first_index();
            let c = checkpoint.filter(|c| c.lsn.0 + 1 >= first.0).unwrap_or_else(|| {
                panic!("partition {:?}: the stored checkpoint does not reach the log's start {first:?}", self.id)
            });
            self.rebuild(now_us, Some(c));
        }
        self.pump(now_us);
    }

    /// Timers: the group's ticks, and the serving partition's.
    pub fn handle_timeout(&mut self, now_us: u64) {
        if self.group.poll_timeout().is_some_and(|t| t <= now_us) {
            self.group.handle_timeout(now_us);
        }
        if self.serving() && self.partition.poll_timeout().is_some_and(|t| t <= now_us) {
            self.partition.handle_timeout(now_us);
        }
        if self.parts.poll_timeout().is_some_and(|t| t <= now_us) {
            for (to, part) in self.parts.handle_timeout(now_us) {
                self.send_replica(to, part);
            }
            self.report_streams();
        }
        if now_us >= self.next_collect_us {
            // A follower folds its old versions away as a leader does on the stabilizer's word, once per interval (the
            // leader's reports bring the frontier on the group's ticks), and only under what it applied.
            self.next_collect_us = now_us + FOLLOWER_COLLECT_INTERVAL_US;
            if let Some(gc) = self.gc.as_ref().filter(|_| !self.serving() && !self.stale) {
                self.partition.collect_applied(gc);
            }
        }
        if now_us >= self.next_membership_us {
            self.next_membership_us = now_us + MEMBERSHIP_INTERVAL_US;
            let me = self.group.id();
            if let Some(replaces) = self.replaces.filter(|_| !self.group.membership().is_voter(me)) {
                self.ask_to_join(replaces);
            } else if self.serving() {
                // What the partition's timers just staged is proposed first: a membership entry takes the next
                // log position, which must not be one the partition gave a record.
                self.pump(now_us);
                self.next_membership_step(now_us);
            }
        }
        if let Role::Serving { term } = self.role {
            if now_us >= self.next_notice_us {
                self.next_notice_us = now_us + LEADER_NOTICE_INTERVAL_US;
                let preferred = self.voter_on(self.preferred).filter(|h| self.group.caught_up(*h));
                match preferred {
                    Some(to) if self.node != self.preferred => {
                        self.hand_over(now_us, to);
                        self.stats.handovers += 1;
                    }
                    _ => self.lead(term),
                }
            }
        }
        self.pump(now_us);
    }

    /// The local time at which [`Replica::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        let serving = self.serving();
        let partition = self.partition.poll_timeout().filter(|_| serving);
        let notice = Some(self.next_notice_us).filter(|_| serving);
        let membership = Some(self.next_membership_us);
        let parts = self.parts.poll_timeout();
        self.group.poll_timeout().into_iter().chain(partition).chain(notice).chain(membership).chain(parts).min()
    }

    /// Hands over the next output, if any. Drain after every input.
    pub fn poll_output(&mut self) -> Option<ReplicaOutput> {
        self.outputs.pop_front()
    }

    /// Sends a message to this partition's replica on node `to`.
    fn send_replica(&mut self, to: NodeIndex, msg: ReplicaMessage) {
        let envelope = Envelope {
            from: Address::Replica(self.id, self.node),
            to: Address::Replica(self.id, to),
            msg: Message::Replica(msg),
        };
        self.outputs.push_back(ReplicaOutput::Send(envelope));
    }

    /// Tells the group which snapshots sent in parts arrived whole, and which did not (replaced, or given up).
    fn report_streams(&mut self) {
        for (to, delivered) in self.parts.take_ended() {
            self.group.report_snapshot(crate::group::ReplicaId(to), delivered);
        }
    }

    /// The streams of large Raft messages (snapshots) in parts.
    pub fn part_stats(&self) -> &crate::parts::PartStats {
        self.parts.stats()
    }

    /// Moves outputs between the partition and the group until neither has anything more to say.
    fn pump(&mut self, now_us: u64) {
        loop {
            let mut progressed = false;
            while let Some(out) = self.partition.poll_output() {
                progressed = true;
                if !self.serving() {
                    continue; // A follower's partition only applies; it has nothing to say.
                }
                match out {
                    PartitionOutput::Send(mut envelope) => {
                        if let (Message::PvcReport { at, committed, .. }, Role::Serving { term }) =
                            (&mut envelope.msg, self.role)
                        {
                            // Every record this pvc depends on is at or before the last position handed out.
                            *at = Some((term, self.partition.lsns().0));
                            *committed = self.group.commit_point();
                        }
                        self.outputs.push_back(ReplicaOutput::Send(envelope))
                    }
                    PartitionOutput::Persist { lsn, record } => self.propose(now_us, lsn, &record),
                    PartitionOutput::ReadLog { after } => {
                        // The log the partition may read back is in memory (compaction spares it: it keeps the
                        // checkpoints' `keep_log_from` on): answer at once, committed records only.
                        let records = self.committed_records(after, LOG_READ_RECORDS);
                        self.partition.handle_log_read(records);
                    }
                }
            }
            while let Some(out) = self.group.poll_output() {
                progressed = true;
                match out {
                    GroupOutput::Write { ready, snapshot, entries, hard_state } => {
                        self.last_write = ready;
                        self.writes_out.push_back((ready, now_us));
                        self.stats.writes += 1;
                        self.stats.written_entries += entries.len() as u64;
                        let snapshot = snapshot.map(|s| Box::new(self.install(*s)));
                        self.outputs.push_back(ReplicaOutput::Write { ready, snapshot, entries, hard_state })
                    }
                    GroupOutput::Restored { index } => {
                        let c = self.installing.take().expect("a snapshot restored was installed");
                        assert_eq!(c.lsn, index, "the snapshot restored is the one installed");
                        self.rebuild(now_us, Some(c));
                        self.pending_checkpoint = None;
                    }
                    GroupOutput::SnapshotWanted if now_us >= self.next_snapshot_us => {
                        self.snapshot_wanted = true;
                        self.load();
                    }
                    GroupOutput::SnapshotWanted => {}
                    GroupOutput::Send { to, bytes, in_parts: true } => {
                        for part in self.parts.send(now_us, replica_node(to), to.0, bytes) {
                            self.send_replica(replica_node(to), part);
                        }
                        self.report_streams();
                    }
                    GroupOutput::Send { to, bytes, in_parts: false } => {
                        self.send_replica(replica_node(to), ReplicaMessage::Raft { bytes })
                    }
                    GroupOutput::Committed { index, term, data } => self.committed(now_us, index, term, &data),
                    GroupOutput::ProposalLost { .. } => {
                        if self.serving() {
                            self.reload(now_us);
                        }
                    }
                    // Judged by the group's current state, which may be ahead of the queued report.
                    GroupOutput::Role { .. } => match self.role {
                        Role::Serving { term } if self.group.is_leader() && self.group.term() == term => {}
                        Role::Serving { .. } => self.reload(now_us),
                        Role::Follower | Role::Elected { .. } => self.role = self.unserved_role(),
                    },
                }
            }
            if let Some((term, c)) = self.pending_checkpoint.take() {
                match self.role {
                    Role::Serving { term: led } if led == term && self.group.applied() >= c.lsn => {
                        self.hand_out_checkpoint(c);
                        progressed = true;
                    }
                    Role::Serving { term: led } if led == term => self.pending_checkpoint = Some((term, c)),
                    _ => {} // The leader reloaded: what it covered may not have committed.
                }
            }
            if let Role::Elected { term } = self.role {
                // Serve once every entry of the log is applied: the ones before this term committed with its
                // first entry, and a leader that reloaded waits for its own proposals still in flight.
                let last = self.group.last_index();
                let caught_up = self.group.applied_term() == term && self.group.applied() == last;
                let leading = self.group.is_leader() && self.group.term() == term && !self.group.transferring();
                if leading && caught_up && !self.stale && self.installing.is_none() {
                    self.role = Role::Serving { term };
                    self.stats.terms_led += 1;
                    self.partition.take_lead(now_us, last);
                    self.lead(term);
                    self.next_notice_us = now_us + LEADER_NOTICE_INTERVAL_US;
                    progressed = true;
                }
            }
            if !progressed {
                break;
            }
        }
        self.take_closed();
        let member = self.group.membership().contains(self.group.id());
        if self.member && !member {
            self.outputs.push_back(ReplicaOutput::Removed);
        }
        self.member = member;
    }

    /// Tells the DC that this replica serves in `term`, with the membership it applied.
    fn lead(&mut self, term: u64) {
        let membership = self.group.membership().clone();
        let conf_index = self.group.membership_index();
        self.outputs.push_back(ReplicaOutput::Leading { term, membership, conf_index });
    }

    /// The serving partition wrote a record at `lsn`: propose it. It must land at that index.
    fn propose(&mut self, now_us: u64, lsn: Lsn, record: &LogRecord) {
        let data = postcard::to_allocvec(record).expect("a log record serializes");
        match self.group.propose(data) {
            Ok(proposal) if proposal.index == lsn => self.proposed_at.push_back((lsn, now_us)),
            // Deposed (the role change follows), over the group's uncommitted limit, or the log took another
            // entry at this index: the record will not commit where the partition staged it. Start over from the
            // committed log; the senders of what the record answered retry.
            _ => self.reload(now_us),
        }
    }

    /// The group committed an entry.
    fn committed(&mut self, now_us: u64, index: Lsn, term: u64, data: &[u8]) {
        if let Role::Serving { term: led } = self.role {
            if term == led {
                while let Some((_, at)) = self.proposed_at.pop_front_if(|(lsn, _)| *lsn <= index) {
                    self.stats.rounds.record(now_us.saturating_sub(at));
                }
                self.partition.handle_persisted(now_us, index);
                return;
            }
            // A later term's entry: this leader was deposed (its role change is on its way). Start over.
            self.reload(now_us);
        }
        // A partition being rebuilt applies the entries after the stored checkpoint once it is loaded.
        if self.stale {
            return;
        }
        // A reload applied every entry handed out so far, some of which may still be on their way here.
        if index > self.partition.lsns().0 {
            self.partition.apply_committed(now_us, index, self.decode(index, data));
        }
    }

    /// Throws the partition away and rebuilds it from the committed log: from memory while the group's log is
    /// whole, else from the stored checkpoint and the entries after it (a round trip to the driver, during which
    /// the replica neither applies nor serves). A replica that still leads waits, as an elected one, for its
    /// proposals in flight to commit or be lost before it serves again.
    fn reload(&mut self, now_us: u64) {
        if self.serving() {
            self.stats.reloads += 1;
        }
        self.role = self.unserved_role();
        self.pending_checkpoint = None;
        self.proposed_at.clear();
        if self.group.first_index() > Lsn(1) {
            self.stale = true;
            self.load();
            return;
        }
        self.rebuild(now_us, None);
    }

    /// The partition becomes `checkpoint` (none: empty) and every committed entry after it.
    fn rebuild(&mut self, now_us: u64, checkpoint: Option<Checkpoint>) {
        let after = checkpoint.as_ref().map_or(Lsn(0), |c| c.lsn);
        let mut partition = Partition::restore_replica(self.id, self.config.clone(), now_us, checkpoint);
        for (lsn, record) in self.committed_records(after, usize::MAX) {
            partition.apply_committed(now_us, lsn, record);
        }
        while partition.poll_output().is_some() {}
        self.partition = partition;
        self.stale = false;
    }

    /// Asks the driver for the stored checkpoint, unless a request is out.
    fn load(&mut self) {
        if !self.loading {
            self.loading = true;
            self.outputs.push_back(ReplicaOutput::Load);
        }
    }

    /// Hands a checkpoint to the driver, and compacts the group's log through what it covers (but not from its
    /// `keep_log_from` on, which geo-replication reads back) once it is on disk.
    fn hand_out_checkpoint(&mut self, mut checkpoint: Checkpoint) {
        checkpoint.membership = Some(self.group.membership_at(checkpoint.lsn).clone());
        self.compact_after = Some((self.last_write, checkpoint.truncate_through()));
        self.stats.checkpoints += 1;
        self.outputs.push_back(ReplicaOutput::Checkpoint(Box::new(checkpoint)));
    }

    /// A snapshot from the leader, in a Write: the driver stores its checkpoint with the Write, and the partition
    /// becomes it once the Write is durable ([`GroupOutput::Restored`]).
    fn install(&mut self, snapshot: crate::group::GroupSnapshot) -> InstalledSnapshot {
        let mut checkpoint: Checkpoint = postcard::from_bytes(&snapshot.state).unwrap_or_else(|e| {
            panic!("partition {:?}: the snapshot at {:?} is not a checkpoint: {e}", self.id, snapshot.index)
        });
        checkpoint.membership = Some(snapshot.membership);
        self.installing = Some(checkpoint.clone());
        self.pending_checkpoint = None;
        InstalledSnapshot { checkpoint, compacted: snapshot.compacted, entries: snapshot.entries }
    }

    /// Not a voter yet (a replica of a node back with an empty disk, or one the operator moved here): ask the
    /// leader to make it one in place of node `replaces`'s replica. The request goes to every other node of the
    /// DC, since a replica that is not a member hears from no leader; the serving one acts on it
    /// ([`Replica::admit`]). Repeated every [`MEMBERSHIP_INTERVAL_US`] until it is a voter: each step of the
    /// change is taken by whichever replica serves then.
    fn ask_to_join(&mut self, replaces: NodeIndex) {
        self.stats.join_requests += 1;
        let replica = self.group.id();
        let (me, nodes) = (self.node, self.nodes);
        for n in (0..nodes).filter(|n| *n != me) {
            self.send_replica(n, ReplicaMessage::Join { replica, replaces });
        }
    }

    /// A serving leader hears that `replica` asks to replace node `replaces`'s voter. Step by step, one step per
    /// request: it becomes a learner (caught up by the log or a snapshot, which the leader checkpoints for if its
    /// stored one is older), then, once it holds every committed entry, a voter in place of the replaced one in
    /// one joint change, which [`Replica::next_membership_step`] leaves. Refused unless node `replaces` has a
    /// voter and the newcomer's node has no other voter: a group never grows or shrinks this way, and a node holds
    /// one replica of a group.
    fn admit(&mut self, now_us: u64, replica: ReplicaId, replaces: NodeIndex) {
        let membership = self.group.membership().clone();
        if membership.is_joint() {
            return;
        }
        let node = replica_node(replica);
        // A voter of the newcomer's node from an earlier disk is gone with that disk: the newcomer replaces it,
        // whatever it was asked to replace (a move to a node that then lost its disk ends up here).
        let replaces = match self.voter_on(node) {
            Some(v) if replica_generation(v) != replica_generation(replica) => node,
            _ => replaces,
        };
        let Some(old) = self.voter_on(replaces).filter(|v| *v != replica) else { return };
        let others: Vec<ReplicaId> = membership
            .members()
            .into_iter()
            .filter(|id| replica_node(*id) == node && *id != replica && *id != old)
            .collect();
        if others.iter().any(|id| membership.is_voter(*id)) {
            return;
        }
        if !membership.contains(replica) {
            // An earlier learner of its node (say, it lost its disk again while catching up) goes in the same step.
            let mut changes = vec![MembershipChange::AddLearner(replica)];
            changes.extend(others.iter().map(|id| MembershipChange::Remove(*id)));
            self.change_membership(changes);
        } else if membership.learners.contains(&replica) && self.group.holds_committed(replica) {
            if old == self.group.id() {
                // This leader is the replica to replace: another voter takes over and finishes the change.
                if let Some(next) = self.caught_up_voter(old) {
                    self.hand_over(now_us, next);
                }
                return;
            }
            self.change_membership(vec![MembershipChange::AddVoter(replica), MembershipChange::Remove(old)]);
        }
    }

    /// A voter other than `except` that holds the whole log (a leader can hand leadership to it at once).
    fn caught_up_voter(&self, except: ReplicaId) -> Option<ReplicaId> {
        let membership = self.group.membership();
        membership.voters.iter().copied().find(|v| *v != except && *v != self.group.id() && self.group.caught_up(*v))
    }

    /// A serving leader leaves a joint configuration. If it is not a voter of the configuration it leaves for (its
    /// replica is the one replaced), it hands leadership to one first: a leader must not remove itself.
    fn next_membership_step(&mut self, now_us: u64) {
        let membership = self.group.membership().clone();
        if !membership.is_joint() {
            return;
        }
        let me = self.group.id();
        if !membership.voters.contains(&me) {
            if let Some(next) = membership.voters.iter().copied().find(|v| self.group.caught_up(*v)) {
                self.hand_over(now_us, next);
            }
            return;
        }
        self.change_membership(Vec::new());
    }

    /// Proposes a membership change as the serving leader. The entry takes a log position the partition would
    /// otherwise give its next record, so the partition skips it.
    fn change_membership(&mut self, changes: Vec<MembershipChange>) {
        // Only between records: a record the partition staged and has not proposed yet owns the next position
        // (the partition's timers may just have staged one). The next interval tries again.
        if self.partition.lsns().0 != self.group.last_index() {
            return;
        }
        if let Ok(proposal) = self.group.change_membership(&changes) {
            self.partition.skip_log_position(proposal.index);
            self.stats.membership_proposals += 1;
        }
    }

    /// Hands leadership to replica `to`: the leader stops serving first, dropping what it staged (senders retry
    /// with the next leader), so that no proposal meets the transfer; should raft give the transfer up, it
    /// serves again. Leadership spreads over the nodes: a leader that is not on the partition's preferred node
    /// (its home, unless moves took the home's replica away), and has served for a while (a notice interval),
    /// hands leadership to the preferred replica once that one holds the whole log (say, after it restarted).
    fn hand_over(&mut self, now_us: u64, to: ReplicaId) {
        self.reload(now_us);
        self.group.transfer_leadership(to);
    }

    /// The role of a replica that does not serve (yet), from the group's state.
    fn unserved_role(&self) -> Role {
        if self.group.is_leader() {
            Role::Elected { term: self.group.term() }
        } else {
            Role::Follower
        }
    }

    /// Committed records after `after`, at most `max`.
    fn committed_records(&self, after: Lsn, max: usize) -> Vec<(Lsn, LogRecord)> {
        let applied = self.group.applied();
        self.group
            .read_entries(after, applied, max)
            .into_iter()
            .map(|(lsn, data)| (lsn, self.decode(lsn, data)))
            .collect()
    }

    /// The record a committed entry holds (the leader's serving partition wrote it; anything else is a damaged
    /// log).
    fn decode(&self, index: Lsn, data: &[u8]) -> LogRecord {
        postcard::from_bytes(data)
            .unwrap_or_else(|e| panic!("partition {:?}: committed entry {index:?} is not a record: {e}", self.id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CoordinatorId, DcId, ObjectId, Timestamp, TxId, VectorClock};
    use causet_crdt::{Crdt, CrdtType, EffectCtx, Op};
    use std::collections::BTreeSet;

    const P: PartitionId = PartitionId(0);

    /// A Write not yet on disk: its number, snapshot, entries and hard state.
    type Unsynced = (u64, Option<Box<InstalledSnapshot>>, Vec<Entry>, Option<HardState>);
    const COORD: Address = Address::Coordinator(CoordinatorId(0));

    /// Three replicas of one partition, a network that delivers at once (except from cut-off nodes), and disks
    /// that sync at once (except for nodes whose writes are held).
    struct Cluster {
        replicas: Vec<Option<Replica>>,
        disks: Vec<DurableState>,
        /// Each node's stored checkpoint, merged (every object's latest image).
        checkpoints: Vec<Option<Checkpoint>>,
        unsynced: Vec<Vec<Unsynced>>,
        hold_writes: BTreeSet<usize>,
        cut: BTreeSet<usize>,
        /// Messages to anyone but a replica (the coordinator, the stabilizer).
        out: Vec<Envelope>,
        /// Stored checkpoints each node read back.
        loads: Vec<u64>,
        /// Each node's disk generation.
        generations: Vec<u64>,
        /// The replica each node runs (`None`: none).
        hosted: Vec<Option<Hosted>>,
        /// Nodes whose replica was removed from the group (and dropped, its disk cleared).
        removed: BTreeSet<usize>,
        /// Nodes of the DC (the group's first three are its first voters).
        nodes: usize,
        /// The partitions' clock bound, µs ahead of the clock.
        clock_bound_us: u64,
        election_timeout_us: u64,
        /// Raft messages larger than this travel in parts.
        part_bytes: usize,
        /// Parts of large messages lost on the way, while this is above zero (one each).
        lose_parts: usize,
        /// DCs in the world (this one is DC 0; the others only send replication messages by hand).
        dcs: u16,
        now: u64,
    }

    impl Cluster {
        fn new() -> Self {
            Self::with_nodes(3)
        }

        /// A DC of `nodes` nodes, whose group of three starts on nodes 0, 1 and 2.
        fn with_nodes(nodes: usize) -> Self {
            let mut c = Self {
                replicas: Vec::new(),
                disks: vec![DurableState::default(); nodes],
                checkpoints: vec![None; nodes],
                unsynced: vec![Vec::new(); nodes],
                hold_writes: BTreeSet::new(),
                cut: BTreeSet::new(),
                out: Vec::new(),
                loads: vec![0; nodes],
                generations: vec![0; nodes],
                hosted: (0..nodes)
                    .map(|n| (n < 3).then(|| Hosted { id: replica_id(n as NodeIndex, 0), replaces: None }))
                    .collect(),
                removed: BTreeSet::new(),
                nodes,
                clock_bound_us: 2_000_000,
                election_timeout_us: Config::new(1, DcId(0), 1).raft_election_timeout_us,
                part_bytes: Config::new(1, DcId(0), 1).raft_part_bytes,
                lose_parts: 0,
                dcs: 1,
                now: 1_000_000,
            };
            for n in 0..nodes {
                let r = c.hosted[n].is_some().then(|| c.start(n));
                c.replicas.push(r);
            }
            c
        }

        /// Node `n` starts a new replica (incarnation 1 of its disk) to take node `replaces`'s place.
        fn host(&mut self, n: usize, replaces: usize) {
            let id = replica_id_of(n as NodeIndex, self.generations[n], 1);
            self.hosted[n] = Some(Hosted { id, replaces: Some(replaces as NodeIndex) });
            self.restart(n);
        }

        fn start(&self, n: usize) -> Replica {
            let mut config = Config::new(self.dcs, DcId(0), 1);
            // A bound far ahead of the clock, so that a new leader's clock is above it only if it was raised there.
            config.clock_bound_us = self.clock_bound_us;
            config.raft_part_bytes = self.part_bytes;
            config.raft_election_timeout_us = self.election_timeout_us;
            let topology = Topology::new(DcId(0), self.dcs, 1, self.nodes as NodeIndex).with_replicas(3);
            let durable = self.disks[n].clone();
            let checkpoint = self.checkpoints[n].clone();
            let generation = self.generations[n];
            let seed = 7 * n as u64 + 1 + generation;
            let hosted = self.hosted[n].expect("node hosts a replica");
            Replica::new(P, config, &topology, n as NodeIndex, self.now, hosted, durable, checkpoint, seed)
                .expect("starts")
        }

        fn crash(&mut self, n: usize) {
            self.replicas[n] = None;
            self.unsynced[n].clear();
        }

        fn restart(&mut self, n: usize) {
            self.replicas[n] = Some(self.start(n));
        }

        /// Node `n` loses its disk and comes back empty, in its next generation: its replica replaces its old one.
        fn wipe(&mut self, n: usize) {
            self.crash(n);
            self.disks[n] = DurableState::default();
            self.checkpoints[n] = None;
            self.generations[n] += 1;
            let id = replica_id(n as NodeIndex, self.generations[n]);
            self.hosted[n] = Some(Hosted { id, replaces: Some(n as NodeIndex) });
            self.restart(n);
        }

        fn sync(&mut self, n: usize) {
            let Some(ready) = self.unsynced[n].last().map(|(r, ..)| *r) else { return };
            for (_, snapshot, entries, hard_state) in self.unsynced[n].drain(..) {
                if let Some(s) = snapshot {
                    self.disks[n].install(s.compacted, s.entries, s.checkpoint.lsn);
                    self.checkpoints[n] = Some(s.checkpoint);
                }
                self.disks[n].apply_write(None, entries, hard_state);
            }
            if let Some(r) = self.replicas[n].as_mut() {
                r.handle_written(self.now, ready);
            }
        }

        /// A checkpoint reaches node `n`'s disk after every Write before it: merged into the stored one, and the
        /// log truncated through it (not from its `keep_log_from` on).
        fn write_checkpoint(&mut self, n: usize, c: Checkpoint) {
            self.sync(n);
            self.disks[n].compact(c.truncate_through());
            self.disks[n].applied = c.lsn;
            self.checkpoints[n] = Some(c.merged_onto(self.checkpoints[n].take()));
        }

        /// Carries every output until the replicas are quiet.
        fn settle(&mut self) {
            loop {
                let mut moved = false;
                for n in 0..self.nodes {
                    let Some(r) = self.replicas[n].as_mut() else { continue };
                    let outputs: Vec<ReplicaOutput> = std::iter::from_fn(|| r.poll_output()).collect();
                    for out in outputs {
                        moved = true;
                        match out {
                            ReplicaOutput::Send(e) => match e.to {
                                Address::Replica(_, to) => {
                                    let to = usize::from(to);
                                    if self.cut.contains(&n) || self.cut.contains(&to) {
                                        continue;
                                    }
                                    if self.lose_parts > 0
                                        && matches!(e.msg, Message::Replica(ReplicaMessage::RaftPart { offset, .. }) if offset > 0)
                                    {
                                        self.lose_parts -= 1;
                                        continue;
                                    }
                                    if let Some(r) = self.replicas[to].as_mut() {
                                        r.handle_message(self.now, e.from, e.msg);
                                    }
                                }
                                _ => self.out.push(e),
                            },
                            ReplicaOutput::Write { ready, snapshot, entries, hard_state } => {
                                self.unsynced[n].push((ready, snapshot, entries, hard_state))
                            }
                            ReplicaOutput::Checkpoint(c) => self.write_checkpoint(n, *c),
                            ReplicaOutput::Load => {
                                self.loads[n] += 1;
                                let c = self.checkpoints[n].clone();
                                let now = self.now;
                                if let Some(r) = self.replicas[n].as_mut() {
                                    r.handle_loaded(now, c);
                                }
                            }
                            ReplicaOutput::Leading { .. } => {}
                            ReplicaOutput::Removed => {
                                // The node drops the replica and deletes its state.
                                self.removed.insert(n);
                                self.crash(n);
                                self.disks[n] = DurableState::default();
                                self.checkpoints[n] = None;
                                self.hosted[n] = None;
                                break;
                            }
                        }
                    }
                    if !self.hold_writes.contains(&n) && !self.unsynced[n].is_empty() {
                        self.sync(n);
                        moved = true;
                    }
                }
                if !moved {
                    return;
                }
            }
        }

        /// Runs `us` microseconds of time in 1 ms steps.
        fn run(&mut self, us: u64) {
            let end = self.now + us;
            while self.now < end {
                self.now += 1_000;
                for r in self.replicas.iter_mut().flatten() {
                    if r.poll_timeout().is_some_and(|t| t <= self.now) {
                        r.handle_timeout(self.now);
                    }
                }
                self.settle();
            }
        }

        fn leader(&self) -> Option<usize> {
            (0..self.nodes).find(|n| self.replicas[*n].as_ref().is_some_and(|r| r.serving()))
        }

        fn elect(&mut self) -> usize {
            for _ in 0..100 {
                if let Some(l) = self.leader() {
                    return l;
                }
                self.run(10_000);
            }
            panic!("no leader after 1 s")
        }

        /// Runs until a replica other than `old` serves (the others elect a leader), at most 2 s.
        fn elect_other(&mut self, old: usize) -> usize {
            for _ in 0..200 {
                if let Some(l) = self.leader().filter(|l| *l != old) {
                    return l;
                }
                self.run(10_000);
            }
            panic!("the others elected no leader in 2 s")
        }

        fn send(&mut self, n: usize, msg: Message) {
            self.send_from(n, COORD, msg);
        }

        fn send_from(&mut self, n: usize, from: Address, msg: Message) {
            let r = self.replicas[n].as_mut().expect("up");
            r.handle_message(self.now, from, msg);
            self.settle();
        }

        fn replies(&mut self) -> Vec<Message> {
            self.out.drain(..).filter(|e| e.to == COORD).map(|e| e.msg).collect()
        }
    }

    fn tx(seq: u64) -> TxId {
        TxId { dc: DcId(0), coordinator: CoordinatorId(0), seq }
    }

    fn increment(t: TxId) -> Message {
        let mut ctx = EffectCtx::new(t.tag(), 0);
        let object = ObjectId::new("k", "b", CrdtType::CounterPn);
        let effect = Crdt::new(CrdtType::CounterPn).generate(&Op::Increment(1), &mut ctx).expect("fits");
        Message::PrepareAndCommit {
            tx: t,
            snapshot: VectorClock::zero(1),
            writes: vec![(object, effect)],
            oldest_open: 0,
        }
    }

    fn committed_at(replies: &[Message], t: TxId) -> Option<Timestamp> {
        replies.iter().find_map(|m| match m {
            Message::Committed { tx, commit } if *tx == t => Some(commit.get(DcId(0))),
            _ => None,
        })
    }

    #[test]
    fn a_commit_is_acknowledged_only_once_a_majority_holds_its_record() {
        let mut c = Cluster::new();
        let leader = c.elect();
        c.replies();
        let followers: Vec<usize> = (0..3).filter(|n| *n != leader).collect();
        // The leader's own disk is fast; both followers' writes hang.
        c.hold_writes.extend(followers.iter().copied());
        c.send(leader, increment(tx(1)));
        c.run(50_000);
        assert_eq!(committed_at(&c.replies(), tx(1)), None, "acknowledged with only the leader's copy durable");
        // One follower's disk catches up: two of three hold the record.
        c.hold_writes.remove(&followers[0]);
        c.run(20_000);
        assert!(committed_at(&c.replies(), tx(1)).is_some(), "a majority holds it: acknowledged");
    }

    #[test]
    fn durations_fall_in_doubling_buckets() {
        let mut d = Durations::default();
        for us in [0, 100, 101, 250, 3_000_000, 10_000_000] {
            d.record(us);
        }
        assert_eq!(d.count(), 6);
        assert_eq!(d.sum_us(), 13_000_451);
        let buckets: Vec<_> = d.buckets().collect();
        assert_eq!(buckets.len(), Durations::BUCKETS);
        assert_eq!(buckets[0], (Some(100), 2), "0 and 100 µs: at or below the first bound");
        assert_eq!(buckets[1], (Some(200), 1));
        assert_eq!(buckets[2], (Some(400), 1));
        assert_eq!(buckets[Durations::BUCKETS - 2], (Some(100 << 14), 0));
        assert_eq!(buckets.last().copied(), Some((None, 2)), "3 s and 10 s are above every bound (1.6 s)");
        assert_eq!((d.longer_than(100), d.longer_than(200), d.longer_than(100 << 14)), (4, 3, 2));
        let mut merged = d;
        merged.merge(&d);
        assert_eq!((merged.count(), merged.sum_us(), merged.longer_than(100)), (12, 26_000_902, 8));
    }

    #[test]
    fn a_leader_times_its_rounds_and_each_replica_its_writes() {
        let mut c = Cluster::new();
        let leader = c.elect();
        c.replies();
        let stats = |c: &Cluster, n: usize| c.replicas[n].as_ref().expect("running").stats();
        let followers: Vec<usize> = (0..3).filter(|n| *n != leader).collect();
        assert_eq!(stats(&c, leader).rounds.longer_than(25_600), 0, "nothing held yet: every round is quick");
        assert!(stats(&c, leader).rounds.count() > 0, "the election's entries were timed");
        // Both followers' disks hang for 50 ms: the round of the increment's record takes that long.
        c.hold_writes.extend(followers.iter().copied());
        c.send(leader, increment(tx(1)));
        c.run(50_000);
        c.hold_writes.clear();
        c.run(20_000);
        assert!(committed_at(&c.replies(), tx(1)).is_some());
        assert!(stats(&c, leader).rounds.longer_than(25_600) >= 1, "the held round was timed as such");
        assert_eq!(stats(&c, leader).write_durations.longer_than(25_600), 0, "the leader's own disk never hung");
        for f in followers {
            assert!(stats(&c, f).write_durations.longer_than(25_600) >= 1, "follower {f}'s held Write was timed");
            assert_eq!(stats(&c, f).rounds.count(), 0, "a follower proposes nothing");
        }
    }

    #[test]
    fn a_new_leader_has_every_acknowledged_commit_and_starts_its_clock_above_the_old_leaders_bound() {
        let mut c = Cluster::new();
        let old = c.elect();
        c.replies();
        c.send(old, increment(tx(1)));
        c.run(20_000);
        let commit = committed_at(&c.replies(), tx(1)).expect("acknowledged");
        let (_, bound) = c.replicas[old].as_ref().map(|r| r.partition.clock_and_bound()).expect("up");
        c.crash(old);
        let new = c.elect();
        assert_ne!(new, old);
        let p = &c.replicas[new].as_ref().expect("up").partition;
        assert!(p.recent_commit(tx(1)).is_some(), "the new leader lost an acknowledged commit");
        let (clock, _) = p.clock_and_bound();
        assert!(clock >= bound, "new leader's clock {clock} below the old leader's bound {bound}");
        assert!(p.pvc().get(DcId(0)) >= commit);
        // The old leader comes back as a follower and applies what it missed.
        c.restart(old);
        c.send(new, increment(tx(2)));
        c.run(50_000);
        let back = &c.replicas[old].as_ref().expect("up").partition;
        assert!(back.recent_commit(tx(1)).is_some() && back.recent_commit(tx(2)).is_some());
    }

    #[test]
    fn followers_wait_the_configured_election_timeout_before_they_replace_a_dead_leader() {
        for (timeout_us, quiet_us) in [(100_000, 90_000), (1_000_000, 950_000)] {
            let mut c = Cluster::new();
            c.election_timeout_us = timeout_us;
            for n in 0..3 {
                c.restart(n);
            }
            let old = c.elect();
            c.run(100_000);
            c.crash(old);
            // A follower campaigns after the timeout and a random part of as much again.
            c.run(quiet_us);
            assert_eq!(c.leader(), None, "timeout {timeout_us} µs: elected too soon");
            for _ in 0..(2 * timeout_us / 10_000 + 50) {
                if c.leader().is_some() {
                    break;
                }
                c.run(10_000);
            }
            assert!(c.leader().is_some_and(|l| l != old), "timeout {timeout_us} µs: no new leader");
        }
    }

    /// Every live replica checkpoints; one more commit makes the checkpoints' compaction reach memory (a
    /// replica compacts once a Write after its checkpoint is durable, which shows the checkpoint is too).
    fn checkpoint_all(c: &mut Cluster, leader: usize, t: TxId) {
        for r in c.replicas.iter_mut().flatten() {
            r.checkpoint();
        }
        c.settle();
        c.send(leader, increment(t));
        c.run(20_000);
        assert!(committed_at(&c.replies(), t).is_some());
    }

    /// A snapshot larger than a part goes in parts, a window at a time; parts lost on the way are sent again after
    /// the stream stalls, and the replica installs the whole snapshot (fails if parts were not reassembled, or a
    /// loss stalled the stream for good).
    #[test]
    fn a_snapshot_larger_than_a_part_arrives_in_parts_even_when_some_are_lost() {
        let mut c = Cluster::new();
        c.part_bytes = 64;
        for n in 0..3 {
            c.crash(n);
            c.restart(n);
        }
        let leader = c.elect();
        c.replies();
        let behind = (leader + 1) % 3;
        c.crash(behind);
        for seq in 1..=40 {
            c.send(leader, increment(tx(seq)));
            c.run(5_000);
        }
        checkpoint_all(&mut c, leader, tx(41));
        c.lose_parts = 3;
        c.restart(behind);
        c.run(3 * Config::new(1, DcId(0), 1).resend_after_us + 100_000);
        assert_eq!(c.lose_parts, 0, "parts were lost");
        let sender = c.replicas[leader].as_ref().expect("up").part_stats().clone();
        assert!(sender.parts_sent > 2 * crate::parts::WINDOW, "the snapshot went in parts: {sender:?}");
        assert!(sender.resends > 0, "the losses were repaired by sending again: {sender:?}");
        let r = c.replicas[behind].as_ref().expect("up");
        assert_eq!(r.group().stats().snapshots_installed, 1);
        assert_eq!(r.part_stats().streams_received, 1);
        for seq in 1..=41 {
            assert!(r.partition().recent_commit(tx(seq)).is_some(), "the snapshot lacks tx {seq}");
        }
    }

    #[test]
    fn a_replica_back_after_compaction_gets_a_snapshot_and_a_deposed_leader_rebuilds_from_its_checkpoint() {
        let mut c = Cluster::new();
        let leader = c.elect();
        c.replies();
        let behind = (leader + 1) % 3;
        c.crash(behind);
        for seq in 1..=5 {
            c.send(leader, increment(tx(seq)));
            c.run(10_000);
        }
        checkpoint_all(&mut c, leader, tx(6));
        let first = c.replicas[leader].as_ref().expect("up").group().first_index();
        assert!(first > Lsn(5), "the leader's log still starts at {first:?}");
        assert!(c.disks[leader].compacted.is_some(), "the leader's stored log was not truncated");
        // Back, the replica lacks compacted entries: the leader loads its checkpoint and sends it as a snapshot.
        c.restart(behind);
        c.run(300_000);
        let r = c.replicas[behind].as_ref().expect("up");
        assert_eq!(r.group().stats().snapshots_installed, 1);
        assert!(c.loads[leader] >= 1, "the leader never read its checkpoint back");
        for seq in 1..=6 {
            assert!(r.partition().recent_commit(tx(seq)).is_some(), "the snapshot lacks tx {seq}");
        }
        assert!(c.checkpoints[behind].as_ref().is_some_and(|k| k.lsn >= Lsn(5)), "the snapshot was not stored");
        // It restarts from the snapshot it stored.
        c.crash(behind);
        c.restart(behind);
        c.run(100_000);
        let r = c.replicas[behind].as_ref().expect("up");
        assert!((1..=6).all(|seq| r.partition().recent_commit(tx(seq)).is_some()));
        // A leader cut off and deposed after compaction rebuilds from its stored checkpoint and the log after it.
        let loads = c.loads[leader];
        c.cut.insert(leader);
        c.send(leader, increment(tx(7)));
        let new = c.elect_other(leader);
        c.send(new, increment(tx(8)));
        c.run(20_000);
        c.cut.clear();
        c.run(300_000);
        let old = c.replicas[leader].as_ref().expect("up");
        assert!(!old.serving() && old.stats().reloads == 1);
        assert!(c.loads[leader] > loads, "the deposed leader did not rebuild from its checkpoint");
        assert!(old.partition().recent_commit(tx(7)).is_none(), "the staged transaction survived the step-down");
        assert!((1..=6).chain([8]).all(|seq| old.partition().recent_commit(tx(seq)).is_some()));
    }

    #[test]
    fn a_deposed_leader_forgets_what_it_staged_and_never_acknowledges_it() {
        let mut c = Cluster::new();
        let old = c.elect();
        c.replies();
        // Cut the leader off, then hand it a transaction: it stages and proposes it, and nobody else gets it.
        c.cut.insert(old);
        c.send(old, increment(tx(1)));
        assert_eq!(c.replicas[old].as_ref().map(|r| r.partition.prepared_count()), Some(1), "staged");
        let new = c.elect_other(old);
        c.send(new, increment(tx(2)));
        c.run(20_000);
        assert!(committed_at(&c.replies(), tx(2)).is_some());
        // Healed, the old leader learns the new term, steps down, and rebuilds from the committed log.
        c.cut.clear();
        c.run(200_000);
        let r = c.replicas[old].as_ref().expect("up");
        assert!(!r.serving());
        assert_eq!(r.stats().reloads, 1);
        assert_eq!(r.partition.prepared_count(), 0, "the staged transaction survived the step-down");
        assert!(r.partition.recent_commit(tx(1)).is_none() && r.partition.recent_commit(tx(2)).is_some());
        assert_eq!(committed_at(&c.replies(), tx(1)), None, "a commit that never reached a majority was acknowledged");
    }

    #[test]
    fn a_remote_transaction_a_deposed_leader_made_visible_comes_again_and_reads_wait_for_it() {
        const PEER: DcId = DcId(1);
        let mut c = Cluster::new();
        c.dcs = 2;
        for n in 0..3 {
            c.restart(n);
        }
        let old = c.elect();
        c.replies();
        // DC 1's increment of `k`, durable there, reaches a leader cut off from its followers.
        let t = TxId { dc: PEER, coordinator: CoordinatorId(0), seq: 1 };
        let effect =
            Crdt::new(CrdtType::CounterPn).generate(&Op::Increment(1), &mut EffectCtx::new(t.tag(), 0)).expect("fits");
        let at = Timestamp::from_micros(c.now - 100_000);
        let commit = VectorClock::from_entries(vec![Timestamp::ZERO, at]);
        let object = ObjectId::new("k", "b", CrdtType::CounterPn);
        let remote = crate::replication::ReplicatedTx {
            tx: t,
            snapshot: VectorClock::zero(2),
            commit,
            writes: vec![(object, effect)],
        };
        let replicate =
            Message::Replicate { since: Timestamp::ZERO, txs: vec![remote], up_to: at, gc: None, away: Vec::new() };
        let origin = Address::Peer(PEER, P);
        c.cut.insert(old);
        c.send_from(old, origin, replicate.clone());
        // Visible at once where it was logged, though only this replica holds its record.
        assert!(c.replicas[old].as_ref().expect("up").partition.pvc().get(PEER) >= at, "visible when logged");
        let acked = |c: &mut Cluster| -> Vec<Timestamp> {
            let acks = c.out.iter().filter(|e| e.to == origin).filter_map(|e| match &e.msg {
                Message::ReplicateAck { up_to, .. } => Some(*up_to),
                _ => None,
            });
            let acks = acks.collect();
            c.out.retain(|e| e.to != origin);
            acks
        };
        let new = c.elect_other(old);
        let early = acked(&mut c);
        assert!(
            !early.is_empty() && early.iter().all(|a| *a < at),
            "acknowledged before a majority held it: {early:?}"
        );
        // The new leader has not got it: a read at a snapshot that covers it waits.
        let snapshot = VectorClock::from_entries(vec![Timestamp::from_micros(c.now), at]);
        c.send(new, read(snapshot).msg);
        c.run(20_000);
        assert!(!c.replies().iter().any(|m| matches!(m, Message::ReadReply { .. })), "served without the transaction");
        // The origin resends from what this DC acknowledged: the read is served, with it.
        c.send_from(new, origin, replicate);
        c.run(20_000);
        assert!(acked(&mut c).iter().any(|a| *a >= at), "durable at the new leader's majority: acknowledged");
        let value = c.replies().into_iter().find_map(|m| match m {
            Message::ReadReply { result, .. } => Some(result.expect("a value")[0].value()),
            _ => None,
        });
        assert_eq!(value, Some(causet_crdt::Value::Counter(1)));
    }

    /// Elects a leader and commits transactions 1 to 5 through it (and 6, and compacts every log, if `compacted`).
    fn commit_five(c: &mut Cluster, compacted: bool) -> usize {
        let leader = c.elect();
        c.replies();
        for seq in 1..=5 {
            c.send(leader, increment(tx(seq)));
            c.run(10_000);
        }
        if compacted {
            checkpoint_all(c, leader, tx(6));
        }
        leader
    }

    #[test]
    fn a_replica_that_lost_its_disk_joins_again_replaces_its_old_self_and_counts_towards_the_majority() {
        for (compacted, clock_bound_us) in [(false, 2_000_000), (true, 2_000_000), (false, 1_000)] {
            let mut c = Cluster::new();
            if clock_bound_us != c.clock_bound_us {
                // A bound renewed at nearly every partition timer: the leader's partition has a record to propose
                // whenever its membership timer fires too (a membership change once took the record's position).
                c.clock_bound_us = clock_bound_us;
                for n in 0..3 {
                    c.restart(n);
                }
            }
            let leader = commit_five(&mut c, compacted);
            let (lost, other) = ((leader + 1) % 3, (leader + 2) % 3);
            c.wipe(lost);
            let (old_id, new_id) = (replica_id(lost as NodeIndex, 0), replica_id(lost as NodeIndex, 1));
            // It asks to join, is caught up as a learner, then replaces its old self in one joint change, which the
            // leader leaves: all within a few membership intervals.
            c.run(3_000_000);
            let l = c.replicas[leader].as_ref().expect("up");
            let m = l.group().membership();
            assert!(m.voters.contains(&new_id) && !m.contains(old_id) && !m.is_joint(), "{compacted}: {m:?}");
            assert!(l.stats().membership_proposals >= 3, "{compacted}: {:?}", l.stats());
            let joined = c.replicas[lost].as_ref().expect("up");
            assert!(joined.stats().join_requests >= 1);
            assert_eq!(joined.group().stats().snapshots_installed > 0, compacted);
            // The snapshot it got was written after it was added (an older one would name no such member).
            let stored = c.checkpoints[leader].as_ref().and_then(|k| k.membership.as_ref());
            assert!(!compacted || stored.is_some_and(|m| m.contains(new_id)), "{stored:?}");
            // With the other original replica down, the leader and the newcomer make a majority.
            c.crash(other);
            c.send(leader, increment(tx(10)));
            c.run(50_000);
            assert!(committed_at(&c.replies(), tx(10)).is_some(), "{compacted}: the newcomer does not count");
            // The leader goes too; the newcomer, restarted from what it stored, and the other elect a leader that
            // has every acknowledged commit.
            c.crash(leader);
            c.crash(lost);
            c.restart(lost);
            c.restart(other);
            let new = c.elect();
            assert_ne!(new, leader);
            let p = c.replicas[new].as_ref().expect("up").partition();
            let seqs = (1..=5).chain(compacted.then_some(6)).chain([10]);
            for seq in seqs {
                assert!(p.recent_commit(tx(seq)).is_some(), "{compacted}: tx {seq} lost after the disk loss");
            }
        }
    }

    /// A replica moves to a fourth node: the newcomer is caught up (from the log, or a snapshot once the log was
    /// compacted), becomes a voter in place of the moved one, which applies its removal and is dropped, and the
    /// group keeps every acknowledged commit and counts the newcomer towards its majority. Also when the replica
    /// that moves is the leader's own (leadership goes to another voter first), and when its node is down (a
    /// dead node's replica is re-replicated; a majority is still up).
    #[test]
    fn a_replica_moves_to_another_node_and_the_group_keeps_every_commit() {
        for (compacted, which, down) in [(false, 1, false), (true, 1, false), (false, 0, false), (false, 2, true)] {
            let case = format!("compacted {compacted}, moving the leader's {which}th successor, down {down}");
            let mut c = Cluster::with_nodes(4);
            let leader = commit_five(&mut c, compacted);
            let from = (leader + which) % 3;
            let old_id = c.replicas[from].as_ref().expect("up").group().id();
            if down {
                c.crash(from);
            }
            c.host(3, from);
            let new_id = replica_id_of(3, 0, 1);
            c.run(4_000_000);
            let l = c.leader().expect("a leader");
            let m = c.replicas[l].as_ref().expect("up").group().membership().clone();
            assert!(m.voters.contains(&new_id) && !m.contains(old_id) && !m.is_joint(), "{case}: {m:?}");
            assert_eq!(m.voters.len(), 3, "{case}: {m:?}");
            assert!(m.learners.is_empty(), "{case}: {m:?}");
            if !down {
                assert!(c.removed.contains(&from), "{case}: the moved replica was not dropped");
                assert!(c.replicas[from].is_none());
            }
            if which == 0 {
                assert_ne!(l, from, "{case}: the old leader still leads without a voter");
            }
            let newcomer = c.replicas[3].as_ref().expect("up");
            assert_eq!(newcomer.group().stats().snapshots_installed > 0, compacted, "{case}");
            // The newcomer and one of the others make a majority.
            let other = (0..3).find(|n| *n != from && *n != l).expect("a third voter");
            c.crash(other);
            c.send(l, increment(tx(10)));
            c.run(50_000);
            assert!(committed_at(&c.replies(), tx(10)).is_some(), "{case}: the newcomer does not count");
            // Everything acknowledged is on the newcomer: with the leader gone, it and the third one elect a
            // leader that has it all.
            c.crash(l);
            c.restart(other);
            let new = c.elect();
            assert!(new == 3 || new == other, "{case}: {new}");
            let p = c.replicas[new].as_ref().expect("up").partition();
            for seq in (1..=5).chain(compacted.then_some(6)).chain([10]) {
                assert!(p.recent_commit(tx(seq)).is_some(), "{case}: tx {seq} lost after the move");
            }
        }
    }

    /// A newcomer on a node whose replica of an earlier disk still votes replaces that one, whatever node it was
    /// asked to replace: here a replica moved to node 3, node 3 lost its disk, and its new replica is asked again
    /// to replace the node the replica came from (a stale move), which votes no more.
    #[test]
    fn a_newcomer_replaces_its_own_nodes_replica_of_a_lost_disk_first() {
        let mut c = Cluster::with_nodes(4);
        let leader = commit_five(&mut c, false);
        let from = (leader + 1) % 3;
        c.host(3, from);
        c.run(4_000_000);
        let moved = replica_id_of(3, 0, 1);
        let l = c.leader().expect("a leader");
        assert!(c.replicas[l].as_ref().expect("up").group().membership().is_voter(moved));
        c.crash(3);
        c.disks[3] = DurableState::default();
        c.checkpoints[3] = None;
        c.generations[3] += 1;
        let id = replica_id_of(3, c.generations[3], 1);
        c.hosted[3] = Some(Hosted { id, replaces: Some(from as NodeIndex) });
        c.restart(3);
        c.run(4_000_000);
        let l = c.leader().expect("a leader");
        let m = c.replicas[l].as_ref().expect("up").group().membership().clone();
        assert!(m.is_voter(id) && !m.contains(moved) && m.voters.len() == 3 && !m.is_joint(), "{m:?}");
    }

    fn read(snapshot: VectorClock) -> Envelope {
        let object = ObjectId::new("k", "b", CrdtType::CounterPn);
        let msg = Message::Read { tx: tx(99), request: 7, snapshot, objects: vec![object], nearest: true };
        Envelope { from: COORD, to: Address::Partition(P), msg }
    }

    /// The leader's last pvc report, with its log position.
    fn last_report(c: &mut Cluster) -> (VectorClock, u64, Lsn) {
        c.out
            .drain(..)
            .filter_map(|e| match e.msg {
                Message::PvcReport { pvc, at: Some((term, index)), .. } => Some((pvc, term, index)),
                _ => None,
            })
            .next_back()
            .expect("the leader reported its pvc with its log position")
    }

    /// What [`one_follower_behind`] leaves: the cluster, the two followers (up to date, slow), both commit times
    /// and the leader's last pvc report (covering both) with its log position.
    struct BehindFollower {
        c: Cluster,
        f: usize,
        slow: usize,
        first: Timestamp,
        second: Timestamp,
        report: (VectorClock, u64, Lsn),
    }

    /// Two increments committed while one follower's disk hangs: the other follower and the leader apply both,
    /// the slow one only the first.
    fn one_follower_behind() -> BehindFollower {
        let mut c = Cluster::new();
        let leader = c.elect();
        c.replies();
        let (f, slow) = ((leader + 1) % 3, (leader + 2) % 3);
        c.send(leader, increment(tx(1)));
        c.run(20_000);
        let first = committed_at(&c.replies(), tx(1)).expect("acknowledged");
        c.out.clear();
        // One follower's disk hangs: it does not apply the next commit, which the other follower and the leader do.
        c.hold_writes.insert(slow);
        c.send(leader, increment(tx(2)));
        c.run(20_000);
        let second = committed_at(&c.replies(), tx(2)).expect("acknowledged by the leader and the other follower");
        c.run(10_000);
        let report = last_report(&mut c);
        assert!(report.0.get(DcId(0)) >= second, "the report covers the second commit");
        BehindFollower { c, f, slow, first, second, report }
    }

    /// The leader's report as the follower's node passes it on, with the DC's frontier `gc`.
    fn closed(report: &(VectorClock, u64, Lsn), gc: Timestamp) -> Message {
        closed_committed(report, gc, None)
    }

    /// [`closed`], carrying the leader's commit point `committed`.
    fn closed_committed(
        (pvc, term, index): &(VectorClock, u64, Lsn),
        gc: Timestamp,
        committed: Option<(u64, Lsn)>,
    ) -> Message {
        let gc = VectorClock::from_entries(vec![gc]);
        Message::Replica(ReplicaMessage::Closed { term: *term, index: *index, pvc: pvc.clone(), committed, gc })
    }

    /// The counter a follower serves at `snapshot` for the nearest replica.
    fn served_counter(r: &mut Replica, snapshot: VectorClock) -> causet_crdt::Value {
        assert!(r.read_nearest(read(snapshot)).is_none(), "served");
        let reply = std::iter::from_fn(|| r.poll_output()).find_map(|o| match o {
            ReplicaOutput::Send(Envelope { msg: Message::ReadReply { result, .. }, .. }) => Some(result),
            _ => None,
        });
        reply.expect("a reply").expect("a value")[0].value()
    }

    #[test]
    fn a_follower_serves_a_read_only_once_it_applied_what_the_leaders_report_covers() {
        let BehindFollower { mut c, f, slow, first, second, report } = one_follower_behind();
        let at = |t: Timestamp| VectorClock::from_entries(vec![t]);
        for n in [f, slow] {
            c.replicas[n].as_mut().expect("up").handle_message(
                c.now,
                Address::Partition(P),
                closed(&report, Timestamp::ZERO),
            );
        }
        c.settle();
        // The follower that applied the report's position serves a snapshot within it, with both increments.
        let r = c.replicas[f].as_mut().expect("up");
        assert_eq!(served_counter(r, at(second)), causet_crdt::Value::Counter(2));
        // A snapshot beyond the report goes on to the leader.
        let beyond = Timestamp(report.0.get(DcId(0)).0 + 1_000_000);
        assert!(r.read_nearest(read(at(beyond))).is_some(), "a snapshot beyond the report was served");
        // The follower whose disk hangs has not applied the position: it passes even the first commit's snapshot on.
        let s = c.replicas[slow].as_mut().expect("up");
        assert!(s.read_nearest(read(at(first))).is_some(), "served by a follower that had not applied the report");
        assert_eq!((s.stats().nearest_reads, s.stats().nearest_reads_passed_on), (0, 1));
        // Its disk back, it applies the position and serves.
        c.hold_writes.clear();
        c.run(20_000);
        let s = c.replicas[slow].as_mut().expect("up");
        assert!(s.read_nearest(read(at(second))).is_none(), "served once applied");
    }

    /// Raft tells followers of a commit only with the leader's next append or heartbeat; the leader's pvc report
    /// carries its commit point, and a follower given it applies the entry and serves reads within the report
    /// at once.
    #[test]
    fn a_follower_applies_what_the_leaders_report_says_is_committed_before_raft_tells_it() {
        let mut c = Cluster::new();
        let leader = c.elect();
        c.run(30_000);
        c.out.clear();
        c.send(leader, increment(tx(1)));
        let mut waited = 0;
        while committed_at(&c.replies(), tx(1)).is_none() {
            c.run(1_000);
            waited += 1;
            assert!(waited < 20, "the leader committed within 20 ms");
        }
        let report = (0..5)
            .find_map(|_| {
                c.run(1_000);
                c.out.drain(..).rev().find_map(|e| match e.msg {
                    Message::PvcReport { pvc, at: Some((term, index)), committed: Some(point), .. } => {
                        Some(((pvc, term, index), point))
                    }
                    _ => None,
                })
            })
            .expect("the leader reported its pvc with its commit point");
        let (closed_at, point) = report;
        let (pvc, index) = (closed_at.0.clone(), closed_at.2);
        assert!(point.1 >= index, "the report's position is committed");
        let applied = |c: &Cluster, n: usize| c.replicas[n].as_ref().expect("up").group.applied();
        let behind: Vec<usize> = (0..3).filter(|n| *n != leader && applied(&c, *n) < index).collect();
        assert!(!behind.is_empty(), "raft told every follower of the commit at once");
        for n in behind {
            let msg = closed_committed(&closed_at, Timestamp::ZERO, Some(point));
            c.replicas[n].as_mut().expect("up").handle_message(c.now, Address::Partition(P), msg);
            c.settle();
            assert!(applied(&c, n) >= index, "follower {n} applied what the report says is committed");
            let r = c.replicas[n].as_mut().expect("up");
            assert_eq!(served_counter(r, pvc.clone()), causet_crdt::Value::Counter(1));
        }
    }

    /// A follower folds its old versions away under the DC's garbage-collection frontier its leader's reports
    /// bring, but never above what it applied: without `collect_applied` its versions pile up for as long as it
    /// follows; folding under the frontier alone would fold a follower that has not applied everything below it.
    #[test]
    fn a_follower_folds_versions_under_the_frontier_and_what_it_applied() {
        let BehindFollower { mut c, f, slow, first, report, .. } = one_follower_behind();
        let versions = |c: &Cluster, n: usize| c.replicas[n].as_ref().expect("up").partition().store_size().1;
        assert_eq!((versions(&c, f), versions(&c, slow)), (2, 1), "what each follower applied");
        // The frontier passes the first commit only: one version folds.
        c.replicas[f].as_mut().expect("up").handle_message(c.now, Address::Partition(P), closed(&report, first));
        c.run(20_000);
        assert_eq!(versions(&c, f), 1);
        // A frontier beyond both: the follower that applied the report's position folds both; the one whose disk
        // hangs has not applied it, so it folds nothing, not even the first commit it holds.
        let beyond = Timestamp(report.0.get(DcId(0)).0 + 1_000_000);
        for n in [f, slow] {
            c.replicas[n].as_mut().expect("up").handle_message(c.now, Address::Partition(P), closed(&report, beyond));
        }
        c.run(20_000);
        assert_eq!((versions(&c, f), versions(&c, slow)), (0, 1));
        // It still serves a snapshot at or above its frontier (no read comes below the DC's), with both effects.
        let r = c.replicas[f].as_mut().expect("up");
        assert_eq!(served_counter(r, report.0.clone()), causet_crdt::Value::Counter(2));
        // Its disk back, the slow follower applies the position and folds both.
        c.hold_writes.clear();
        c.run(40_000);
        assert_eq!(versions(&c, slow), 0);
    }
}
