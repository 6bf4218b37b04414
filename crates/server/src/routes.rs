//! How a node's shards are reached: their inboxes, the node's [`Layout`] and the DC's [`Topology`]. Every placement
//! decision is the core's ([`Layout::locate`]); this module only carries inputs to the shard it names.

use crate::status::ShardStatus;
use causet_core::coordinator::{ClientRequest, ClientResponse, TxError};
use causet_core::node::Layout;
use causet_core::record::Lsn;
use causet_core::topology::Topology;
use causet_core::{ClientId, DcId, Envelope, PartitionId, Timestamp};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// What a shard receives.
#[derive(Debug)]
pub enum ShardInput {
    /// A client request, and where to send its answer.
    Client {
        /// The connection.
        client: ClientId,
        /// The request.
        body: ClientRequest,
        /// The answer goes here.
        reply: oneshot::Sender<Result<ClientResponse, TxError>>,
    },
    /// A connection closed.
    Disconnect(ClientId),
    /// A message from another shard, node or DC.
    Message(Envelope),
    /// Records up to these positions (or replicas' group Writes up to these numbers) are durable.
    Durable(Vec<(PartitionId, causet_storage::Durable)>),
    /// A replicated partition's leader is on this node from this term on, with this membership from this log index
    /// on (another shard heard it).
    Leader(
        PartitionId,
        causet_core::topology::NodeIndex,
        u64,
        causet_core::group::Membership,
        causet_core::record::Lsn,
    ),
    /// Operator: this node of the DC is retired for good ([`causet_core::node::Node::retire_node`]).
    RetireNode(causet_core::topology::NodeIndex),
    /// Operator: move the partition's replica on node `from` to node `to` ([`causet_core::node::Node::move_replica`]).
    MoveReplica {
        /// The partition.
        partition: PartitionId,
        /// The node whose replica moves.
        from: causet_core::topology::NodeIndex,
        /// The node that takes it.
        to: causet_core::topology::NodeIndex,
    },
    /// Records read back from a partition's log, as the shard's node asked.
    LogRead(PartitionId, Vec<(Lsn, causet_core::record::LogRecord)>),
    /// A replica's complete checkpoint, read back from the log.
    CheckpointLoaded(PartitionId, Option<Box<causet_core::partition::Checkpoint>>),
    /// A peer DC's shape became known: it has this many nodes.
    DcNodes(DcId, u16),
    /// Report the shard's state.
    Status(oneshot::Sender<ShardStatus>),
    /// A page of a partition's objects at a snapshot, for a backup ([`causet_core::node::Node::export`]); `None`
    /// when this shard does not serve the partition.
    Export {
        /// The partition.
        partition: PartitionId,
        /// The snapshot.
        snapshot: causet_core::VectorClock,
        /// Objects above this id.
        after: Option<causet_core::ObjectId>,
        /// At most this many objects.
        limit: usize,
        /// The page goes here.
        reply: oneshot::Sender<Option<Result<causet_core::partition::ExportPage, causet_core::message::RemoteError>>>,
    },
    /// Stop when no client waits for an answer, or when the grace period ends.
    Shutdown(oneshot::Sender<()>),
}

/// Where a node's shards are.
///
/// Inboxes are bounded. Inputs from outside the shards wait for room ([`Routes::send`]): a connection stops reading
/// its client, a link stops reading its peer, the durability notifier stops, so a flood slows its source instead
/// of growing memory. Messages from one shard to another never wait (two shards waiting for each other's room
/// would deadlock): a full inbox drops them ([`Routes::try_send`]) and counts the drop, as a full link to another
/// node does; the protocol resends what matters (decisions, outcome queries, replication, reports), and a lost
/// read or prepare times out and aborts its transaction.
#[derive(Clone, Debug)]
pub struct Routes {
    /// Every shard's inbox.
    pub inboxes: Vec<mpsc::Sender<ShardInput>>,
    /// This node: its index, shards and incarnation.
    pub layout: Layout,
    /// The DC's shape, as configured (peer DCs' shapes may become known later: the shards learn them through
    /// [`ShardInput::DcNodes`]).
    pub topology: Topology,
    /// The node's session floor, shared by its shards: the largest local commit time any shard acknowledged
    /// ([`causet_core::node::NodeOutput::SessionFloor`]); a shard raises its node's floor to it before each client
    /// request.
    pub session_floor: Arc<AtomicU64>,
    /// Messages between shards dropped at a full inbox.
    pub dropped: Arc<AtomicU64>,
}

impl Routes {
    /// The shards' inboxes, each holding at most `capacity` inputs, and their receiving ends.
    pub fn new(layout: Layout, topology: Topology, capacity: usize) -> (Routes, Vec<mpsc::Receiver<ShardInput>>) {
        let (inboxes, receivers) = (0..layout.shards).map(|_| mpsc::channel(capacity.max(1))).unzip();
        let routes = Routes {
            inboxes,
            layout,
            topology,
            session_floor: Arc::new(AtomicU64::new(0)),
            dropped: Arc::new(AtomicU64::new(0)),
        };
        (routes, receivers)
    }

    /// Hands a message from the network to the shard that runs its receiver, waiting for room. A message for
    /// another node (a stale sender) goes to shard 0, whose node passes it on or answers for a coordinator that is
    /// gone.
    pub async fn deliver(&self, envelope: Envelope) {
        let shard = self.layout.arrival_shard(&self.topology, envelope.to);
        self.send(shard, ShardInput::Message(envelope)).await;
    }

    /// Sends an input to a shard, waiting for room. A closed inbox means the node is shutting down; the input is
    /// moot.
    pub async fn send(&self, shard: usize, input: ShardInput) {
        let _ = self.inboxes[shard].send(input).await;
    }

    /// Sends an input from one shard to another without waiting: a full inbox drops it, counted.
    pub fn try_send(&self, shard: usize, input: ShardInput) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.inboxes[shard].try_send(input) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Sends an input to every shard, waiting for room.
    pub async fn broadcast(&self, input: impl Fn() -> ShardInput) {
        for inbox in &self.inboxes {
            let _ = inbox.send(input()).await;
        }
    }

    /// Raises the node's session floor.
    pub fn raise_session_floor(&self, at: Timestamp) {
        self.session_floor.fetch_max(at.0, Ordering::Relaxed);
    }

    /// The node's session floor.
    pub fn session_floor(&self) -> Timestamp {
        Timestamp(self.session_floor.load(Ordering::Relaxed))
    }

    /// The shard that owns a partition of this node.
    pub fn partition_shard(&self, p: PartitionId) -> usize {
        self.layout.shard_of(&self.topology, p)
    }

    /// Whether this node takes messages for a partition of its DC: it serves it, or the partition is replicated
    /// (whichever node's replica leads it, a node passes its messages on to the leader).
    pub fn serves(&self, p: PartitionId) -> bool {
        p.0 < self.topology.partition_count()
            && (self.topology.replicated() || self.topology.holds(self.layout.node, p))
    }

    /// This node's DC.
    pub fn dc(&self) -> DcId {
        self.topology.dc()
    }

    /// Whether this DC's partitions are Raft groups.
    pub fn replicated(&self) -> bool {
        self.topology.replicated()
    }

    /// Hands a replicated partition's leader to every shard but `from`.
    pub fn announce_leader(
        &self,
        from: usize,
        p: PartitionId,
        node: causet_core::topology::NodeIndex,
        term: u64,
        membership: causet_core::group::Membership,
        conf_index: causet_core::record::Lsn,
    ) {
        for shard in (0..self.inboxes.len()).filter(|s| *s != from) {
            self.try_send(shard, ShardInput::Leader(p, node, term, membership.clone(), conf_index));
        }
    }
}
