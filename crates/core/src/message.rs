//! Messages exchanged by the state machines of a DC. The driver carries [`Envelope`]s from one state machine's
//! outputs to another's inputs; state machines never hold references to each other.

use crate::{CoordinatorId, ObjectId, PartitionId, Timestamp, TxId, VectorClock};
use causet_crdt::{Crdt, CrdtError, Effect};
use serde::{Deserialize, Serialize};

/// A state machine inside a DC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Address {
    /// A partition.
    Partition(PartitionId),
    /// A transaction coordinator.
    Coordinator(CoordinatorId),
    /// The DC's stabilizer.
    Stabilizer,
    /// A partition of another DC (the same partition index: replication pairs partition m of every DC).
    Peer(crate::DcId, PartitionId),
    /// One replica of a replicated partition of this DC: the copy on that node (Raft traffic between replicas,
    /// and leadership notices).
    Replica(PartitionId, crate::topology::NodeIndex),
    /// A coordinator named with its DC: a write buffer's questions and answers travel between DCs too
    /// (`coordinator::tokens`).
    DcCoordinator(crate::DcId, crate::CoordinatorId),
}

/// A message with its sender and receiver.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// The sender.
    pub from: Address,
    /// The receiver.
    pub to: Address,
    /// The message.
    pub msg: Message,
}

/// Why a partition refused a request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum RemoteError {
    /// The snapshot did not become available in time.
    #[error("timed out waiting for the snapshot to become available")]
    Timeout,
    /// The snapshot is older than what the partition still keeps.
    #[error("snapshot too old: versions below it were garbage collected")]
    SnapshotTooOld,
    /// The snapshot is malformed or too far ahead of the partition's clock.
    #[error("invalid snapshot: {0}")]
    InvalidSnapshot(String),
    /// The partition has too many waiting requests.
    #[error("partition overloaded: too many waiting requests")]
    Busy,
    /// A CRDT refused the transaction's effect (for example a bounded counter without rights).
    #[error("{0}")]
    Crdt(CrdtError),
    /// Write-write certification failed on an object.
    #[error("write-write conflict on an object updated concurrently")]
    Conflict,
    /// The transaction's coordinator is gone, and the DC settled the transaction without it.
    #[error("the transaction's coordinator is gone")]
    CoordinatorGone,
    /// A request that does not wait (a backup's export) asked for a snapshot this partition has not applied yet:
    /// asked again a little later, it is served.
    #[error("not applied here yet: {0}")]
    NotYetApplied(String),
    /// A read of an object this DC does not hold (a bucket placed by rings): read it at a DC that does.
    #[error("not held at this DC: {0}")]
    NotHeld(String),
    /// A prepare sent again for a transaction this partition refused or aborted before: the first answer was lost
    /// on its way (with a link, or with a leader that lost its term), and the reason it gave is not kept.
    #[error("refused by a participant (the transaction ended there before; its first answer was lost)")]
    EndedBefore,
}

/// A partition's answer to [`Message::TxStatus`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TxKnowledge {
    /// Committed here at this commit vector (durably).
    Committed(VectorClock),
    /// Prepared here without a decision; from now on this partition ignores the coordinator's decision and waits
    /// for the termination's.
    Prepared,
    /// Not prepared here (never, or aborted); from now on this partition refuses to prepare it.
    Absent,
}

/// An object's state as a partition serves it to a cache: the state at the requested snapshot, and the box of
/// snapshots `[lo, hi]` (componentwise) at which the object reads exactly the same
/// ([`crate::store::visibility_box`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fetched {
    /// The state.
    pub state: Crdt,
    /// Every effect the state holds has a commit vector at or below `lo`.
    pub lo: VectorClock,
    /// Every effect it does not hold, known or still to come, has an entry above `hi`.
    pub hi: VectorClock,
    /// For a reader whose DC hears of the writes to the object (at another DC under partial replication; any
    /// reader with caches otherwise), bit `k`: entry `k` of `hi` is only what this partition had applied from DC
    /// `k`, and every effect left out is left out by another entry, so the reader's DC may raise it over a stretch
    /// in which DC `k` did not write the object ([`crate::store::visibility_box`],
    /// [`crate::away`]).
    pub open: u64,
}

/// A message between a DC's state machines.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Message {
    /// Coordinator → partition: read objects at a snapshot (Cure Alg. 2 READKEY).
    Read {
        /// The reading transaction.
        tx: TxId,
        /// The coordinator's request number, echoed.
        request: u64,
        /// The snapshot vector.
        snapshot: VectorClock,
        /// The objects, all owned by the partition.
        objects: Vec<ObjectId>,
        /// A replica of the partition near the coordinator (on its node) may serve it, if it applied everything the
        /// snapshot covers; else the leader does.
        #[serde(default)]
        nearest: bool,
    },
    /// Partition → coordinator: the objects' states at the snapshot, in request order.
    ReadReply {
        /// The reading transaction.
        tx: TxId,
        /// The request number.
        request: u64,
        /// The states, or why not.
        result: Result<Vec<Crdt>, RemoteError>,
    },
    /// Coordinator → partition: read objects at a snapshot for the coordinator's cache (HoneyPot's FetchKey):
    /// served like [`Message::Read`], answered with each state's visibility box.
    Fetch {
        /// The reading transaction.
        tx: TxId,
        /// The coordinator's request number, echoed.
        request: u64,
        /// The snapshot vector.
        snapshot: VectorClock,
        /// The objects, all owned by the partition.
        objects: Vec<ObjectId>,
    },
    /// Partition → coordinator: the objects' states at the snapshot with their visibility boxes, in request order.
    Fetched {
        /// The reading transaction.
        tx: TxId,
        /// The request number.
        request: u64,
        /// The states, or why not.
        result: Result<Vec<Fetched>, RemoteError>,
    },
    /// Coordinator → partition: prepare the transaction's effects on this partition.
    Prepare {
        /// The transaction.
        tx: TxId,
        /// Its snapshot vector.
        snapshot: VectorClock,
        /// Its effects on objects of this partition, in program order.
        writes: Vec<(ObjectId, Effect)>,
        /// The coordinator's oldest open transaction (its sequence number): it has finished every older one, so a
        /// prepare of an older one that arrives later is a stale duplicate (a resend after a leader change, or a
        /// copy passed on by a deposed leader), and the partition forgets what it decided for them.
        oldest_open: u64,
    },
    /// Coordinator → partition: the transaction touches only this partition: prepare and commit at once at the
    /// prepare time (a two-phase commit with one participant, in one log record).
    PrepareAndCommit {
        /// The transaction.
        tx: TxId,
        /// Its snapshot vector.
        snapshot: VectorClock,
        /// Its effects, in program order.
        writes: Vec<(ObjectId, Effect)>,
        /// As in [`Message::Prepare`].
        oldest_open: u64,
    },
    /// Partition → coordinator: a [`Message::PrepareAndCommit`] is durable and visible at this commit vector.
    Committed {
        /// The transaction.
        tx: TxId,
        /// Its commit vector.
        commit: VectorClock,
    },
    /// Partition → coordinator: prepared, durably, at this time.
    Prepared {
        /// The transaction.
        tx: TxId,
        /// The partition's proposed commit time.
        prepare_time: Timestamp,
    },
    /// Partition → coordinator: the transaction cannot commit here.
    PrepareRefused {
        /// The transaction.
        tx: TxId,
        /// Why.
        reason: RemoteError,
    },
    /// Coordinator → partition: commit at this commit vector.
    Commit {
        /// The transaction.
        tx: TxId,
        /// Its commit vector.
        commit: VectorClock,
    },
    /// Partition → coordinator: the commit is durable and visible.
    CommitAck {
        /// The transaction.
        tx: TxId,
    },
    /// Coordinator → partition: forget the prepared transaction.
    Abort {
        /// The transaction.
        tx: TxId,
    },
    /// Partition → coordinator: aborted.
    AbortAck {
        /// The transaction.
        tx: TxId,
    },
    /// Partition → coordinator: a transaction has been prepared here for long; what was decided?
    QueryOutcome {
        /// The transaction.
        tx: TxId,
    },
    /// Driver → partition: the coordinator of `tx` is gone for good (its node restarted with a new incarnation), so
    /// it will never decide; messages it sent before it died may still arrive. The partition settles the
    /// transaction with the DC's other partitions (see [`crate::partition`]'s termination protocol).
    CoordinatorGone {
        /// The transaction.
        tx: TxId,
    },
    /// Partition → every other partition of the DC, terminating a transaction whose coordinator is gone: what do
    /// you know of `tx`? Answering fences the transaction against its dead coordinator.
    TxStatus {
        /// The transaction.
        tx: TxId,
    },
    /// Partition → the partition that asked [`Message::TxStatus`].
    TxStatusReply {
        /// The transaction.
        tx: TxId,
        /// What the answering partition knows, and has promised.
        status: TxKnowledge,
    },
    /// Partition → the same partition of another DC (Cure Alg. 3): committed local transactions in commit order,
    /// and the promise that no other local transaction commits at or below `up_to` (a heartbeat when empty).
    Replicate {
        /// Everything at or below this was sent before: a receiver that has less lost messages.
        since: Timestamp,
        /// Transactions, ascending by origin commit time.
        txs: Vec<crate::replication::ReplicatedTx>,
        /// The origin's promise.
        up_to: Timestamp,
        /// Under partial replication: the origin DC's garbage-collection frontier, below which none of its
        /// transactions reads. A DC its ring-mates read objects from keeps their versions above it
        /// (`Topology::readers`).
        gc: Option<VectorClock>,
        /// Under partial replication with caches: for each write of `txs` to an object the receiver does not hold
        /// (and so not sent), its transaction's index in `txs` and the object's fingerprint — a notice for the receiver's
        /// caches ([`crate::away`]).
        #[serde(default)]
        away: Vec<(u32, u32)>,
    },
    /// Partition → the origin partition: everything of yours at or below `up_to` is durably applied here.
    ReplicateAck {
        /// Applied position, in the origin's commit time.
        up_to: Timestamp,
        /// Messages were lost: resend everything after `up_to`.
        gap: bool,
    },
    /// Partition → stabilizer: my pvc.
    PvcReport {
        /// The partition's pvc.
        pvc: VectorClock,
        /// A replicated partition's leader: the term and the last log position it had proposed when it computed
        /// `pvc`. Every record that `pvc` depends on is at or before it, so a follower that applied that entry
        /// (of that term) holds every transaction `pvc` covers, and may serve reads at snapshots within it.
        #[serde(default)]
        at: Option<(u64, crate::record::Lsn)>,
        /// A replicated partition's leader: its group's commit point ([`crate::group::Group::commit_point`]), which
        /// its followers learn from here within a report interval (raft itself tells them with its next append or
        /// heartbeat only).
        #[serde(default)]
        committed: Option<(u64, crate::record::Lsn)>,
        /// Under partial replication, a partition other DCs read from: its garbage-collection frontier, which
        /// stays below their readers' snapshots (`Partition::collect`). A follower of a replicated partition
        /// folds no further.
        #[serde(default)]
        frontier: Option<VectorClock>,
        /// With caches: the notices of writes (to objects this DC does not hold; without partial replication, of
        /// every write) that the partition collected since its last report ([`crate::away`]).
        #[serde(default)]
        away: Option<crate::away::Report>,
    },
    /// Coordinator → stabilizer: no transaction of mine will read below this snapshot, now or later.
    OldestSnapshot {
        /// The lower bound.
        snapshot: VectorClock,
    },
    /// Operator → every node's stabilizer: node `node` of the DC is retired for good; the garbage-collection
    /// frontier no longer waits for its coordinators.
    NodeRetired {
        /// The node.
        node: u16,
    },
    /// Stabilizer → coordinators and partitions: the DC's stable snapshot and the garbage-collection frontier.
    Stable {
        /// The stable snapshot: minimum of all partitions' pvc.
        stable: VectorClock,
        /// No running or future transaction of the DC reads below this snapshot.
        gc: VectorClock,
        /// To coordinators, with caches: the notices of writes the partitions collected, in the stretch since the
        /// last stable snapshot ([`crate::away`]).
        #[serde(default)]
        away: Option<crate::away::Chunk>,
    },
    /// Between the replicas of a replicated partition.
    Replica(ReplicaMessage),
    /// Coordinator → coordinator, of any DC: hand over everything your write buffer holds now (a client's clock
    /// names it), and answer with [`Message::BufferFlushed`].
    FlushBuffer {
        /// The asker's number for the question, echoed.
        query: u64,
    },
    /// Coordinator → coordinator: what was buffered when [`Message::FlushBuffer`] arrived is at its owners, under
    /// commit vectors at or below `handed`.
    BufferFlushed {
        /// The question answered.
        query: u64,
        /// The join of every handover's commit vector (zero if the buffer never handed anything over).
        handed: VectorClock,
    },
}

/// Messages between the replicas of a replicated partition (its Raft group) and about them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ReplicaMessage {
    /// Replica → replica: a Raft message, as the group encoded it (checksummed; see [`crate::group`]).
    Raft {
        /// The encoded message.
        bytes: Vec<u8>,
    },
    /// Replica → every node of the DC: this replica leads the partition in `term`, so route its messages here.
    Leader {
        /// The leader's term: a notice of an older term than one known is ignored.
        term: u64,
        /// The group's membership as the leader applied it: where the partition lives. A node whose replica is
        /// not in it, while a membership older than `conf_index` still holds it, learns that it was removed.
        membership: crate::group::Membership,
        /// The log index from which that membership holds.
        conf_index: crate::record::Lsn,
    },
    /// Leader → a follower (passed on by the follower's node from the leader's pvc report): once the follower
    /// applied the entry at `index` of term `term`, it may serve reads at snapshots within `pvc`.
    Closed {
        /// The term of the entry at `index`.
        term: u64,
        /// The log position.
        index: crate::record::Lsn,
        /// What the leader's pvc covered then.
        pvc: VectorClock,
        /// The leader's commit point then: the term of its entry at the index, and the index.
        #[serde(default)]
        committed: Option<(u64, crate::record::Lsn)>,
        /// The DC's garbage-collection frontier as the follower's node knows it: no read will come below it, so
        /// the follower folds away the versions it holds under it and under what it applied
        /// ([`crate::partition::Partition::collect_applied`]).
        gc: VectorClock,
    },
    /// Replica → the other nodes of the DC: this replica, not a voter of the group (its node came back with an
    /// empty disk, or the operator moved the partition's replica here), asks the leader to make it one in place
    /// of node `replaces`'s replica.
    Join {
        /// The replica asking.
        replica: crate::group::ReplicaId,
        /// The node whose replica it replaces.
        replaces: crate::topology::NodeIndex,
    },
    /// Operator → the node that is to take over node `replaces`'s replica of the partition: start a new replica
    /// there, which joins the group in its place (a replica move; `causet cluster move`).
    Host {
        /// The node whose replica moves.
        replaces: crate::topology::NodeIndex,
    },
    /// Replica → replica: part of a Raft message too large for one (a snapshot; [`crate::parts`]).
    RaftPart {
        /// The sender's stream (one per destination node at a time; a newer one replaces it).
        stream: u64,
        /// Where the part starts in the message.
        offset: u64,
        /// The whole message's length.
        total: u64,
        /// The part.
        bytes: Vec<u8>,
    },
    /// Replica → the sender of a stream: how much of the stream it holds, from the start.
    RaftPartAck {
        /// The stream.
        stream: u64,
        /// Bytes held.
        received: u64,
    },
}

impl Message {
    /// The message's name, for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Message::Read { .. } => "read",
            Message::ReadReply { .. } => "read_reply",
            Message::Fetch { .. } => "fetch",
            Message::Fetched { .. } => "fetched",
            Message::Prepare { .. } => "prepare",
            Message::PrepareAndCommit { .. } => "prepare_and_commit",
            Message::Committed { .. } => "committed",
            Message::Prepared { .. } => "prepared",
            Message::PrepareRefused { .. } => "prepare_refused",
            Message::Commit { .. } => "commit",
            Message::CommitAck { .. } => "commit_ack",
            Message::Abort { .. } => "abort",
            Message::AbortAck { .. } => "abort_ack",
            Message::QueryOutcome { .. } => "query_outcome",
            Message::CoordinatorGone { .. } => "coordinator_gone",
            Message::TxStatus { .. } => "tx_status",
            Message::TxStatusReply { .. } => "tx_status_reply",
            Message::Replicate { .. } => "replicate",
            Message::ReplicateAck { .. } => "replicate_ack",
            Message::PvcReport { .. } => "pvc_report",
            Message::OldestSnapshot { .. } => "oldest_snapshot",
            Message::NodeRetired { .. } => "node_retired",
            Message::Stable { .. } => "stable",
            Message::Replica(ReplicaMessage::Raft { .. }) => "raft",
            Message::Replica(ReplicaMessage::Leader { .. }) => "leader",
            Message::Replica(ReplicaMessage::Join { .. }) => "join",
            Message::Replica(ReplicaMessage::Host { .. }) => "host",
            Message::Replica(ReplicaMessage::Closed { .. }) => "closed",
            Message::Replica(ReplicaMessage::RaftPart { .. }) => "raft_part",
            Message::Replica(ReplicaMessage::RaftPartAck { .. }) => "raft_part_ack",
            Message::FlushBuffer { .. } => "flush_buffer",
            Message::BufferFlushed { .. } => "buffer_flushed",
        }
    }
}
