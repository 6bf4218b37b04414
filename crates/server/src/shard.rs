//! A shard: one tokio task that owns some partitions and one coordinator of the node, and drives their state
//! machines. Messages between machines of one shard are delivered in a local queue; messages to other shards go
//! through their inboxes. Durability notifications come from the storage writer.
//!
//! Inbox bounds: client requests arrive at most one per connection at a time (the protocol is request/response),
//! so they are bounded by the connection limit; internal messages are bounded by the open-transaction limit of the
//! coordinators times the partitions a transaction touches.

use crate::clock::WallClock;
use crate::storage::LogSink;
use causet_core::coordinator::{ClientReply, ClientRequest, ClientResponse, Coordinator, CoordinatorOutput, TxError};
use causet_core::partition::{Partition, PartitionOutput};
use causet_core::record::Lsn;
use causet_core::stabilizer::Stabilizer;
use causet_core::{Address, ClientId, CoordinatorId, Envelope, Message, PartitionId, RequestId};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
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
    /// A message from a machine of another shard.
    Message(Envelope),
    /// Records up to these positions are durable.
    Durable(Vec<(PartitionId, Lsn)>),
    /// Report the shard's state.
    Status(oneshot::Sender<ShardStatus>),
    /// Stop when no transaction is in its commit phase, or when the grace period ends.
    Shutdown(oneshot::Sender<()>),
}

/// A shard's state, for `/status`.
#[derive(Clone, Debug, Serialize)]
pub struct ShardStatus {
    /// The shard's index.
    pub shard: usize,
    /// The coordinator's open transactions.
    pub open_transactions: usize,
    /// The stable snapshot as the coordinator knows it.
    pub stable_snapshot: Vec<u64>,
    /// The partitions.
    pub partitions: Vec<PartitionStatus>,
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
    /// Remote transactions received and waiting for their dependencies, per origin DC.
    pub inbound_backlog: Vec<(u16, usize)>,
}

/// Where each machine lives.
///
/// A DC's partitions are spread over its nodes: partition `p` lives on node `p mod nodes`, and on that node in
/// shard `(p div nodes) mod shards`. Each shard runs a coordinator, whose id names its node and the node's
/// incarnation ([`CoordinatorId::compose`]). The stabilizer runs on node 0, shard 0.
#[derive(Clone, Debug)]
pub struct Routes {
    /// Every shard's inbox.
    pub inboxes: Vec<mpsc::UnboundedSender<ShardInput>>,
    /// This incarnation of the node.
    pub incarnation: u64,
    /// This node's DC.
    pub dc: causet_core::DcId,
    /// This node's index inside its DC.
    pub node: u16,
    /// Nodes of the DC.
    pub nodes: u16,
    /// Partitions of the DC.
    pub partitions: u32,
    /// Links to other DCs and to this DC's other nodes.
    pub wan: crate::wan::Wan,
}

impl Routes {
    /// The node of the DC that owns a partition.
    pub fn partition_node(&self, p: PartitionId) -> u16 {
        (p.0 % u32::from(self.nodes)) as u16
    }

    /// The shard of its node that owns a partition.
    pub fn partition_shard(&self, p: PartitionId) -> usize {
        (p.0 / u32::from(self.nodes)) as usize % self.inboxes.len()
    }

    /// The partitions this node owns.
    pub fn own_partitions(&self) -> impl Iterator<Item = PartitionId> + '_ {
        (0..self.partitions).map(PartitionId).filter(|p| self.partition_node(*p) == self.node)
    }

    /// The coordinator id of a shard.
    pub fn coordinator(&self, shard: usize) -> CoordinatorId {
        CoordinatorId::compose(self.node, self.incarnation, shard as u32)
    }

    /// The shard of a coordinator of this node's incarnation (`None` for any other coordinator).
    pub fn coordinator_shard(&self, c: CoordinatorId) -> Option<usize> {
        let shard = c.shard() as usize;
        (c == self.coordinator(shard) && shard < self.inboxes.len()).then_some(shard)
    }

    /// The shard of this node that owns an address (`None`: another node or DC, or a coordinator of an earlier
    /// incarnation).
    pub fn owner(&self, to: Address) -> Option<usize> {
        let own = |p: PartitionId| (self.partition_node(p) == self.node).then(|| self.partition_shard(p));
        match to {
            Address::Partition(p) => own(p),
            // A message from another DC to one of this DC's partitions.
            Address::Peer(dc, p) if dc == self.dc => own(p),
            Address::Peer(..) => None,
            Address::Coordinator(c) => self.coordinator_shard(c),
            Address::Stabilizer => (self.node == 0).then_some(0),
        }
    }

    /// Delivers a message to whichever shard, node or DC owns its receiver. A question to a coordinator of this
    /// node's earlier incarnation (gone with it) is answered for it: [`Message::CoordinatorGone`].
    pub fn dispatch(&self, e: Envelope) {
        if let Some(shard) = self.owner(e.to) {
            // A closed inbox means the node is shutting down; the message is moot.
            let _ = self.inboxes[shard].send(ShardInput::Message(e));
            return;
        }
        match e.to {
            Address::Peer(dc, p) if dc != self.dc => self.wan.send(dc, p, e),
            Address::Partition(p) | Address::Peer(_, p) => self.wan.send_member(self.partition_node(p), e),
            Address::Stabilizer => self.wan.send_member(0, e),
            Address::Coordinator(c) if c.node() != self.node => self.wan.send_member(c.node(), e),
            Address::Coordinator(c) => {
                if let (Message::QueryOutcome { tx }, Address::Partition(p)) = (&e.msg, e.from) {
                    tracing::info!(%tx, partition = p.0, "the transaction's coordinator died with an earlier run of \
                        this node: its partitions settle it among themselves");
                    let msg = Message::CoordinatorGone { tx: *tx };
                    self.dispatch(Envelope { from: Address::Coordinator(c), to: e.from, msg });
                }
            }
        }
    }
}

/// What every shard of a node shares.
#[derive(Clone)]
pub struct ShardEnv {
    /// Where machines live.
    pub routes: Routes,
    /// The node's clock.
    pub clock: Arc<WallClock>,
    /// The log.
    pub log: Arc<dyn LogSink>,
    /// How often partitions checkpoint.
    pub checkpoint_interval: Duration,
}

/// One shard's machines and driver state.
pub struct Shard {
    index: usize,
    routes: Routes,
    clock: Arc<WallClock>,
    log: Arc<dyn LogSink>,
    coordinator: Coordinator,
    partitions: HashMap<PartitionId, Partition>,
    stabilizer: Option<Stabilizer>,
    pending: HashMap<(ClientId, RequestId), oneshot::Sender<Result<ClientResponse, TxError>>>,
    next_request: u64,
    local: VecDeque<Envelope>,
    checkpoint_interval: Duration,
}

impl Shard {
    /// A shard with its machines. Shard 0 also runs the stabilizer.
    pub fn new(
        index: usize,
        env: ShardEnv,
        coordinator: Coordinator,
        partitions: Vec<Partition>,
        stabilizer: Option<Stabilizer>,
    ) -> Self {
        let ShardEnv { routes, clock, log, checkpoint_interval } = env;
        Self {
            index,
            routes,
            clock,
            log,
            coordinator,
            partitions: partitions.into_iter().map(|p| (p.id(), p)).collect(),
            stabilizer,
            pending: HashMap::new(),
            next_request: 0,
            local: VecDeque::new(),
            checkpoint_interval,
        }
    }

    /// Runs until shutdown.
    pub async fn run(mut self, mut inbox: mpsc::UnboundedReceiver<ShardInput>) {
        let mut next_checkpoint = tokio::time::Instant::now() + self.checkpoint_interval;
        let mut shutdown: Option<(oneshot::Sender<()>, tokio::time::Instant)> = None;
        loop {
            let deadline = self.next_deadline();
            tokio::select! {
                input = inbox.recv() => {
                    let Some(input) = input else { break };
                    if let Some(done) = self.handle(input) {
                        shutdown = Some((done, tokio::time::Instant::now() + Duration::from_secs(5)));
                    }
                    // Take what else is queued before pumping: one pass routes a whole batch.
                    for _ in 0..256 {
                        match inbox.try_recv() {
                            Ok(input) => {
                                if let Some(done) = self.handle(input) {
                                    shutdown = Some((done, tokio::time::Instant::now() + Duration::from_secs(5)));
                                }
                            }
                            Err(_) => break,
                        }
                    }
                }
                _ = tokio::time::sleep_until(deadline) => self.on_timeout(),
                _ = tokio::time::sleep_until(next_checkpoint) => {
                    next_checkpoint = tokio::time::Instant::now() + self.checkpoint_interval;
                    self.checkpoint();
                }
            }
            self.pump();
            if let Some((_, until)) = &shutdown {
                if self.pending.is_empty() || tokio::time::Instant::now() >= *until {
                    self.checkpoint();
                    let (done, _) = shutdown.take().expect("checked");
                    let _ = done.send(());
                    // Keep serving durability notifications and messages until the node drops the inboxes.
                }
            }
        }
    }

    fn handle(&mut self, input: ShardInput) -> Option<oneshot::Sender<()>> {
        let now = self.clock.now_us();
        match input {
            ShardInput::Client { client, body, reply } => {
                let request = RequestId(self.next_request);
                self.next_request += 1;
                self.pending.insert((client, request), reply);
                self.coordinator.handle_client(now, client, request, body);
            }
            ShardInput::Disconnect(client) => self.coordinator.handle_disconnect(client),
            ShardInput::Message(envelope) => self.local.push_back(envelope),
            ShardInput::Durable(positions) => {
                for (p, lsn) in positions {
                    if let Some(partition) = self.partitions.get_mut(&p) {
                        partition.handle_persisted(now, lsn);
                    }
                }
            }
            ShardInput::Status(reply) => {
                let _ = reply.send(self.status());
            }
            ShardInput::Shutdown(done) => return Some(done),
        }
        None
    }

    fn status(&self) -> ShardStatus {
        let mut partitions: Vec<PartitionStatus> = self
            .partitions
            .values()
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
                    inbound_backlog: p.inbound_backlog().into_iter().map(|(d, n)| (d.0, n)).collect(),
                }
            })
            .collect();
        partitions.sort_by_key(|p| p.id);
        ShardStatus {
            shard: self.index,
            open_transactions: self.coordinator.open_transactions(),
            stable_snapshot: self.coordinator.stable_snapshot().entries().iter().map(|t| t.0).collect(),
            partitions,
        }
    }

    fn next_deadline(&self) -> tokio::time::Instant {
        let mut next = self.coordinator.poll_timeout().unwrap_or(u64::MAX);
        for p in self.partitions.values() {
            next = next.min(p.poll_timeout().unwrap_or(u64::MAX));
        }
        self.clock.instant_at(next)
    }

    fn on_timeout(&mut self) {
        let now = self.clock.now_us();
        if self.coordinator.poll_timeout().is_some_and(|t| t <= now) {
            self.coordinator.handle_timeout(now);
        }
        for p in self.partitions.values_mut() {
            if p.poll_timeout().is_some_and(|t| t <= now) {
                p.handle_timeout(now);
            }
        }
    }

    fn checkpoint(&mut self) {
        for p in self.partitions.values_mut() {
            let checkpoint = p.take_checkpoint();
            self.log.checkpoint(p.id(), checkpoint);
        }
    }

    /// Carries out every machine's outputs until nothing is left.
    fn pump(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(out) = self.coordinator.poll_output() {
                progressed = true;
                match out {
                    CoordinatorOutput::Send(e) => self.route(e),
                    CoordinatorOutput::Reply(ClientReply { client, request, result }) => {
                        if let Some(reply) = self.pending.remove(&(client, request)) {
                            let _ = reply.send(result);
                        }
                    }
                }
            }
            let mut sends = Vec::new();
            for p in self.partitions.values_mut() {
                while let Some(out) = p.poll_output() {
                    match out {
                        PartitionOutput::Send(e) => sends.push(e),
                        PartitionOutput::Persist { lsn, record } => self.log.append(p.id(), lsn, record),
                    }
                    progressed = true;
                }
            }
            if let Some(s) = self.stabilizer.as_mut() {
                sends.extend(std::iter::from_fn(|| s.poll_output()));
            }
            progressed |= !sends.is_empty();
            for e in sends {
                self.route(e);
            }
            while let Some(e) = self.local.pop_front() {
                progressed = true;
                self.deliver_local(e);
            }
            if !progressed {
                break;
            }
        }
    }

    fn route(&mut self, e: Envelope) {
        if self.routes.owner(e.to) == Some(self.index) {
            self.local.push_back(e);
        } else {
            self.routes.dispatch(e);
        }
    }

    fn deliver_local(&mut self, e: Envelope) {
        let now = self.clock.now_us();
        match e.to {
            Address::Partition(p) => {
                if let Some(partition) = self.partitions.get_mut(&p) {
                    partition.handle_message(now, e.from, e.msg);
                }
            }
            Address::Coordinator(c) if c == self.coordinator.id() => {
                self.coordinator.handle_message(now, e.from, e.msg)
            }
            Address::Coordinator(_) => {} // A coordinator of an earlier incarnation: gone.
            Address::Stabilizer => {
                if let Some(s) = self.stabilizer.as_mut() {
                    s.handle_message(e.from, e.msg);
                }
            }
            Address::Peer(_, p) => {
                if let Some(partition) = self.partitions.get_mut(&p) {
                    partition.handle_message(now, e.from, e.msg);
                }
            }
        }
    }
}
