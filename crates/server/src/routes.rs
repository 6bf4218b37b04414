//! How a node's shards are reached: their inboxes, the node's [`Layout`] and the DC's [`Topology`]. Every placement
//! decision is the core's ([`Layout::locate`]); this module only carries inputs to the shard it names.

use crate::status::ShardStatus;
use causet_core::coordinator::{ClientRequest, ClientResponse, TxError};
use causet_core::node::{Layout, Location};
use causet_core::record::Lsn;
use causet_core::topology::Topology;
use causet_core::{ClientId, DcId, Envelope, PartitionId, Timestamp};
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
    /// Records up to these positions are durable.
    Durable(Vec<(PartitionId, Lsn)>),
    /// Another shard of the node acknowledged a commit at this local time.
    SessionFloor(Timestamp),
    /// A peer DC's shape became known: it has this many nodes.
    DcNodes(DcId, u16),
    /// Report the shard's state.
    Status(oneshot::Sender<ShardStatus>),
    /// Stop when no client waits for an answer, or when the grace period ends.
    Shutdown(oneshot::Sender<()>),
}

/// Where a node's shards are.
#[derive(Clone, Debug)]
pub struct Routes {
    /// Every shard's inbox.
    pub inboxes: Vec<mpsc::UnboundedSender<ShardInput>>,
    /// This node: its index, shards and incarnation.
    pub layout: Layout,
    /// The DC's shape, as configured (peer DCs' shapes may become known later: the shards learn them through
    /// [`ShardInput::DcNodes`]).
    pub topology: Topology,
}

impl Routes {
    /// Hands a message from the network to the shard that runs its receiver. A message for another node (a stale
    /// sender) goes to shard 0, whose node passes it on or answers for a coordinator that is gone.
    pub fn deliver(&self, envelope: Envelope) {
        let shard = match self.layout.locate(&self.topology, envelope.to) {
            Location::Shard(s) => s,
            _ => 0,
        };
        self.send(shard, ShardInput::Message(envelope));
    }

    /// Sends an input to a shard. A closed inbox means the node is shutting down; the input is moot.
    pub fn send(&self, shard: usize, input: ShardInput) {
        let _ = self.inboxes[shard].send(input);
    }

    /// Sends an input to every shard.
    pub fn broadcast(&self, input: impl Fn() -> ShardInput) {
        for inbox in &self.inboxes {
            let _ = inbox.send(input());
        }
    }

    /// The shard that owns a partition of this node.
    pub fn partition_shard(&self, p: PartitionId) -> usize {
        self.layout.shard_of(&self.topology, p)
    }

    /// Whether this node serves a partition.
    pub fn serves(&self, p: PartitionId) -> bool {
        p.0 < self.topology.partition_count() && self.topology.home(self.topology.dc(), p) == Some(self.layout.node)
    }
}
