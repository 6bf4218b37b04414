//! The node layer, free of I/O: the state machines one driver task runs, and every routing decision between them.
//!
//! A Causet node (one server process) serves some partitions of one DC. It runs as `shards` independent
//! [`Node`]s, one per worker thread, each owning a disjoint part of the node's partitions, one coordinator, and, on
//! shard 0, the node's stabilizer. Every node of a DC runs one: partitions and coordinators report to all of them,
//! and each tells only its own node's machines the DC's stable snapshot, so the stable snapshot keeps moving while
//! any nodes are down (with replicated partitions, while a minority is). A [`Node`] routes every message its machines
//! emit, using the [`Topology`] and its [`Layout`]:
//! - to a machine of its own: delivered at once, inside the same input;
//! - to another shard of the node, another node of the DC, or a node of another DC:
//!   [`NodeOutput::Transmit`] with a [`Destination`], which the driver carries (an in-process channel, a link
//!   inside the DC, a WAN link);
//! - to a coordinator of this node's earlier incarnation (gone with it): a partition asking about its transaction
//!   is answered [`Message::CoordinatorGone`] on the coordinator's behalf, so the partitions settle it (the
//!   termination protocol of [`crate::partition`]).
//!
//! It also keeps the node's **session floor**: the largest local commit time it acknowledged to any client. A new
//! transaction's clock is raised to it, so a client sees every commit acknowledged before it started, from
//! whichever connection. Shards share the floor through [`NodeOutput::SessionFloor`], which the driver hands to
//! the node's other shards ([`Node::handle_session_floor`]) before it delivers the reply that follows it.
//!
//! Durability fans out here too: records to persist leave as [`NodeOutput::Persist`], and the driver reports them
//! durable with [`Node::handle_persisted`].
//!
//! Inputs: `handle_*` (each with `now`, the node's physical clock in µs). Outputs: [`Node::poll_output`], drained
//! after every input, and [`Node::poll_timeout`]. The server (tokio) and the simulator drive the same code.

use crate::coordinator::{BufferRecord, ClientReply, ClientRequest, ClientResponse, Coordinator};
use crate::coordinator::{CoordinatorOutput, TxError};
use crate::group::{DurableState, Entry, HardState, Membership, ReplicaId};
use crate::message::ReplicaMessage;
use crate::partition::{Checkpoint, Partition, PartitionOutput};
use crate::record::{LogRecord, Lsn};
use crate::replica::{replica_generation, replica_id_of, replica_node, Hosted, Hosting};
use crate::replica::{InstalledSnapshot, Replica, ReplicaOutput};
use crate::stabilizer::Stabilizer;
use crate::topology::{NodeIndex, Topology};
use crate::ObjectId;
use crate::{Address, ClientId, Config, CoordinatorId, DcId, Envelope, Message, PartitionId, RequestId, Timestamp};
use crate::{TxId, VectorClock};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Which node this is and how it runs: its index in the DC, its shards, and its incarnation (it advances at every
/// start of the node, so coordinators of earlier runs are told apart from live ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The node's index inside its DC.
    pub node: NodeIndex,
    /// How many shards (driver tasks) the node runs.
    pub shards: usize,
    /// The node's incarnation.
    pub incarnation: u64,
    /// The generation of the node's disk: 0 for a node of a new cluster, a new one whenever the node starts with
    /// an empty disk in a running cluster (its replicas then join their groups under new ids; see
    /// [`crate::replica`]).
    pub generation: u64,
}

/// Where a message goes, as seen from one shard of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Location {
    /// A shard of this node.
    Shard(usize),
    /// Another node of this DC.
    Node(NodeIndex),
    /// A node of another DC.
    Dc(DcId, NodeIndex),
    /// A coordinator of this node's earlier incarnation: gone for good.
    Gone(CoordinatorId),
    /// Nowhere known: a peer DC whose shape is not known yet, or a coordinator id this node never ran.
    Nowhere,
}

impl Layout {
    /// The layout of a node with `shards` shards.
    pub fn new(node: NodeIndex, shards: usize, incarnation: u64) -> Self {
        assert!(shards >= 1, "a node runs at least one shard");
        Self { node, shards, incarnation, generation: 0 }
    }

    /// The same layout with the disk in `generation`.
    pub fn with_generation(self, generation: u64) -> Self {
        Self { generation, ..self }
    }

    /// The coordinator of a shard, in this incarnation.
    pub fn coordinator(&self, shard: usize) -> CoordinatorId {
        CoordinatorId::compose(self.node, self.incarnation, shard as u32)
    }

    /// Every coordinator of this node.
    pub fn coordinators(&self) -> Vec<CoordinatorId> {
        (0..self.shards).map(|s| self.coordinator(s)).collect()
    }

    /// The shard of a coordinator of this node's incarnation (`None` for any other coordinator).
    pub fn coordinator_shard(&self, c: CoordinatorId) -> Option<usize> {
        let shard = c.shard() as usize;
        (shard < self.shards && c == self.coordinator(shard)).then_some(shard)
    }

    /// The shard of this node that owns a partition placed on it.
    pub fn shard_of(&self, topology: &Topology, p: PartitionId) -> usize {
        topology.index_on_node(p) as usize % self.shards
    }

    /// The partitions of this node that a shard owns, ascending.
    pub fn partitions_of_shard<'a>(
        &'a self,
        topology: &'a Topology,
        shard: usize,
    ) -> impl Iterator<Item = PartitionId> + 'a {
        topology.partitions_on(self.node).filter(move |p| self.shard_of(topology, *p) == shard)
    }

    /// Where the machine at `to` runs.
    pub fn locate(&self, topology: &Topology, to: Address) -> Location {
        let local = topology.dc();
        let in_dc = |p: PartitionId| {
            if p.0 >= topology.partition_count() {
                return Location::Nowhere;
            }
            match topology.home(local, p) {
                Some(n) if n == self.node => Location::Shard(self.shard_of(topology, p)),
                Some(n) => Location::Node(n),
                None => Location::Nowhere,
            }
        };
        match to {
            Address::Partition(p) => in_dc(p),
            Address::Peer(dc, p) if dc == local => in_dc(p),
            Address::Peer(dc, p) => match topology.home(dc, p) {
                Some(n) if p.0 < topology.partition_count() => Location::Dc(dc, n),
                _ => Location::Nowhere,
            },
            // (A node a client's buffer token names, which the DC does not have: nowhere.)
            Address::DcCoordinator(dc, c) if c.node() >= topology.nodes(dc) => Location::Nowhere,
            Address::DcCoordinator(dc, c) if dc == local => self.locate(topology, Address::Coordinator(c)),
            Address::DcCoordinator(dc, c) => Location::Dc(dc, c.node()),
            Address::Coordinator(c) if c.node() != self.node => Location::Node(c.node()),
            Address::Coordinator(c) => match self.coordinator_shard(c) {
                Some(shard) => Location::Shard(shard),
                None if c.incarnation() != self.coordinator(0).incarnation() => Location::Gone(c),
                None => Location::Nowhere,
            },
            Address::Replica(p, _) if p.0 >= topology.partition_count() => Location::Nowhere,
            Address::Replica(p, n) if n == self.node => Location::Shard(self.shard_of(topology, p)),
            Address::Replica(_, n) => Location::Node(n),
            // Every node runs a stabilizer on its shard 0; a report goes to each (`Node::route_own`).
            Address::Stabilizer => Location::Shard(0),
        }
    }

    /// The shard of this node that takes a message arriving from the network for `to`: for a partition of this
    /// DC the shard that runs it here, or would (with replicated partitions a node learns at run time which it
    /// holds: that shard passes on what it does not hold), else the one that runs its receiver, else shard 0,
    /// whose node passes it on or answers for a coordinator that is gone.
    pub fn arrival_shard(&self, topology: &Topology, to: Address) -> usize {
        let partition = match to {
            Address::Replica(p, _) => Some(p),
            other => dc_partition(other, topology.dc()),
        };
        let here = |p: &PartitionId| topology.replicated() || topology.holds(self.node, *p);
        match partition.filter(|p| p.0 < topology.partition_count() && here(p)) {
            Some(p) => self.shard_of(topology, p),
            None => match self.locate(topology, to) {
                Location::Shard(s) => s,
                // A coordinator of an earlier run: the shard of the same number, whose coordinator may have taken
                // over its decided handovers (`coordinator::durable`), else answers for it.
                Location::Gone(c) if (c.shard() as usize) < self.shards => c.shard() as usize,
                _ => 0,
            },
        }
    }

    /// The shard that serves a client request arriving on a connection whose own shard is `home`: the shard of
    /// the transaction's coordinator, or `home` for a request that starts a transaction.
    pub fn client_shard(&self, body: &ClientRequest, home: usize) -> Result<usize, TxError> {
        let tx = match body {
            ClientRequest::Read { tx, .. }
            | ClientRequest::Update { tx, .. }
            | ClientRequest::Commit { tx }
            | ClientRequest::Abort { tx } => *tx,
            ClientRequest::Start { .. } | ClientRequest::StaticRead { .. } | ClientRequest::StaticUpdate { .. } => {
                return Ok(home % self.shards)
            }
        };
        self.coordinator_shard(tx.coordinator).ok_or(TxError::UnknownTransaction(tx))
    }
}

/// The partition of DC `local` that `to` addresses (a partition, or the DC's own side of a peer link).
fn dc_partition(to: Address, local: DcId) -> Option<PartitionId> {
    match to {
        Address::Partition(p) => Some(p),
        Address::Peer(dc, p) if dc == local => Some(p),
        _ => None,
    }
}

/// Where the driver carries a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Destination {
    /// Another shard of this node.
    Shard(usize),
    /// Another node of this DC.
    Node(NodeIndex),
    /// A node of another DC.
    Dc(DcId, NodeIndex),
}

/// What a node asks its driver to do.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeOutput {
    /// Carry a message to another shard, node or DC; the receiver hands it to [`Node::handle_message`].
    Transmit(Destination, Envelope),
    /// Append a record to a partition's log; call [`Node::handle_persisted`] once it is durable.
    Persist {
        /// The partition.
        partition: PartitionId,
        /// The record's position (records of a partition become durable in order).
        lsn: Lsn,
        /// The record.
        record: LogRecord,
    },
    /// Read a partition's durable log from just after `after`, at most
    /// [`LOG_READ_RECORDS`](crate::replication::LOG_READ_RECORDS) records, and hand them to
    /// [`Node::handle_log_read`].
    ReadLog {
        /// The partition.
        partition: PartitionId,
        /// Read the records after this position.
        after: Lsn,
    },
    /// Answer a client.
    Reply(ClientReply),
    /// Append a record to this shard's coordinator's write-buffer log (HoneyPot's buffered writes); call
    /// [`Node::handle_buffer_persisted`] once it is durable. Records become durable in order; the log is handed
    /// back to [`Node::recover`] at the next start.
    PersistBuffer {
        /// The record's position (ascending over the log's life).
        lsn: Lsn,
        /// The record.
        record: BufferRecord,
    },
    /// Delete the shard's write-buffer log records before this position (every record written so far is durable).
    TruncateBuffer {
        /// The first record kept.
        before: Lsn,
    },
    /// The session floor rose to this local commit time: hand it to the node's other shards before delivering
    /// the replies that follow.
    SessionFloor(Timestamp),
    /// Make a replica's group Write durable (see [`GroupOutput::Write`](crate::group::GroupOutput::Write)), then
    /// call [`Node::handle_group_written`].
    GroupWrite {
        /// The replicated partition.
        partition: PartitionId,
        /// The Write's number.
        ready: u64,
        /// A snapshot from the leader to install first: it replaces the replica's stored log and checkpoint.
        snapshot: Option<Box<InstalledSnapshot>>,
        /// Entries replacing the log from `entries[0].index` on.
        entries: Vec<Entry>,
        /// The new hard state, if it changed.
        hard_state: Option<HardState>,
    },
    /// Write a replica's checkpoint, after every GroupWrite of the partition handed out before it (see
    /// [`ReplicaOutput::Checkpoint`]).
    Checkpoint {
        /// The replicated partition.
        partition: PartitionId,
        /// Its checkpoint (incremental).
        checkpoint: Box<Checkpoint>,
    },
    /// Load a replica's complete checkpoint as stored and hand it to [`Node::handle_checkpoint_loaded`].
    LoadCheckpoint {
        /// The replicated partition.
        partition: PartitionId,
    },
    /// A replicated partition's leader is on `node` from `term` on: hand it to the node's other shards
    /// ([`Node::handle_leader`]), which route the partition's messages there.
    Leader {
        /// The partition.
        partition: PartitionId,
        /// The leader's node.
        node: NodeIndex,
        /// Its term.
        term: u64,
        /// The group's membership as the leader applied it, from `conf_index` on.
        membership: Membership,
        /// See [`ReplicaMessage::Leader`].
        conf_index: Lsn,
    },
    /// Record which replica this node runs for a replicated partition, after every earlier write of it, before
    /// any later one. [`Hosting::Left`] also deletes the partition's stored group state (log, hard state,
    /// checkpoint): its replica was removed from the group.
    Hosting {
        /// The replicated partition.
        partition: PartitionId,
        /// What the node runs for it now.
        hosting: Hosting,
    },
}

/// One shard of a node: its partitions, its coordinator, maybe the stabilizer, and its routing.
#[derive(Debug)]
pub struct Node {
    config: Config,
    topology: Topology,
    layout: Layout,
    shard: usize,
    coordinator: Coordinator,
    partitions: BTreeMap<PartitionId, Partition>,
    /// This shard's replicas of replicated partitions (their Raft groups).
    replicas: BTreeMap<PartitionId, Replica>,
    /// The leader of each replicated partition as last heard, with its term: where its messages go.
    leaders: BTreeMap<PartitionId, (u64, NodeIndex)>,
    /// Where each replicated partition lives, as its leaders last said: the membership from a log index on.
    placements: BTreeMap<PartitionId, (Lsn, Membership)>,
    /// The last incarnation of each replicated partition's replicas on this node's disk (this shard's partitions).
    incarnations: BTreeMap<PartitionId, u16>,
    /// Messages for replicated partitions that arrived while no leader was known, oldest first.
    parked: BTreeMap<PartitionId, VecDeque<Envelope>>,
    stabilizer: Option<Stabilizer>,
    /// Messages between this shard's own machines, delivered inside the current input.
    local: VecDeque<Envelope>,
    outputs: VecDeque<NodeOutput>,
    session_floor: Timestamp,
}

/// The transaction a partition's message to a coordinator is about.
fn about_tx(msg: &Message) -> Option<TxId> {
    match msg {
        Message::QueryOutcome { tx }
        | Message::Prepared { tx, .. }
        | Message::PrepareRefused { tx, .. }
        | Message::CommitAck { tx }
        | Message::Committed { tx, .. }
        | Message::AbortAck { tx } => Some(*tx),
        _ => None,
    }
}

/// Most messages a shard parks per replicated partition while it knows no leader (an election lasts a few hundred
/// milliseconds).
const MAX_PARKED: usize = 4_096;

/// The node of a replicated partition's leader: the one its local replica follows, else the one last announced
/// (a replica that is not a member of its group yet hears from no leader).
fn leader_of(leaders: &BTreeMap<PartitionId, (u64, NodeIndex)>, replica: &Replica) -> Option<NodeIndex> {
    replica.leader_node().or_else(|| leaders.get(&replica.id()).map(|(_, n)| *n))
}

/// Starts node `layout.node`'s replica `hosted` of partition `p` from what its disk holds.
#[allow(clippy::too_many_arguments)]
fn start_replica(
    config: &Config,
    topology: &Topology,
    layout: Layout,
    p: PartitionId,
    now_us: u64,
    hosted: Hosted,
    durable: DurableState,
    checkpoint: Option<Checkpoint>,
) -> Replica {
    // Election jitter differs between replicas and between runs of a node, and replays exactly.
    let seed = (layout.incarnation << 16) | u64::from(layout.node);
    let seed = xxhash_rust::xxh3::xxh3_64_with_seed(&p.0.to_le_bytes(), seed);
    Replica::new(p, config.clone(), topology, layout.node, now_us, hosted, durable, checkpoint, seed)
        .unwrap_or_else(|e| panic!("partition {p:?}: the replica cannot start: {e}"))
}

/// A partition's durable state on this node, as the driver loads it.
#[derive(Clone, Debug, PartialEq)]
pub enum Stored {
    /// A partition that is not replicated: the last checkpoint and the log records after it.
    Partition(PartitionId, Option<Box<Checkpoint>>, Vec<(Lsn, LogRecord)>),
    /// This node's replica of a replicated partition: which one, what its group wrote, and its complete
    /// checkpoint.
    Replica(PartitionId, Hosted, DurableState, Option<Box<Checkpoint>>),
    /// A replicated partition whose replica on this node left its group in this incarnation.
    Left(PartitionId, u16),
}

impl Stored {
    /// The partition.
    pub fn partition(&self) -> PartitionId {
        match self {
            Stored::Partition(p, ..) | Stored::Replica(p, ..) | Stored::Left(p, _) => *p,
        }
    }

    /// What a node's store holds for its replicated partitions, for a shard ([`Node::recover`]): `hosting` as
    /// the store keeps it, with each hosted replica's state read by `load`.
    pub fn of_hosting<E>(
        hosting: &BTreeMap<PartitionId, Hosting>,
        mut load: impl FnMut(PartitionId) -> Result<(DurableState, Option<Checkpoint>), E>,
    ) -> Result<Vec<Stored>, E> {
        let mut stored = Vec::new();
        for (&p, h) in hosting {
            stored.push(match *h {
                Hosting::Hosts(hosted) => {
                    let (durable, checkpoint) = load(p)?;
                    Stored::Replica(p, hosted, durable, checkpoint.map(Box::new))
                }
                Hosting::Left { incarnation } => Stored::Left(p, incarnation),
            });
        }
        Ok(stored)
    }
}

impl Node {
    /// A shard of a node, with the partitions it owns rebuilt from `stored` (partitions missing there start
    /// empty) and its coordinator's write buffer from `buffer_log` (the shard's log as stored, ascending; empty if
    /// it has none). Transactions its partitions hold prepared without a decision ask their coordinator; those of
    /// this node's earlier incarnation learn at once that it is gone, unless the recovered coordinator claims them
    /// (a handover it must finish: [`Coordinator::recover`]).
    #[allow(clippy::too_many_arguments)]
    pub fn recover(
        config: Config,
        topology: Topology,
        layout: Layout,
        shard: usize,
        now_us: u64,
        stored: impl IntoIterator<Item = Stored>,
        buffer_log: Vec<(Lsn, BufferRecord)>,
    ) -> Self {
        assert!(shard < layout.shards, "shard {shard} outside 0..{}", layout.shards);
        assert_eq!(config.dc, topology.dc(), "a node's configuration and topology name the same DC");
        assert_eq!(config.partitions, topology.partition_count(), "configuration and topology agree on partitions");
        let mut stored: BTreeMap<PartitionId, Stored> = stored.into_iter().map(|s| (s.partition(), s)).collect();
        let mut partitions = BTreeMap::new();
        let mut replicas = BTreeMap::new();
        let mut incarnations = BTreeMap::new();
        if topology.replicated() {
            // The replicas the node's store says it runs (a fresh store: `replica::first_hosting`).
            for (p, s) in std::mem::take(&mut stored) {
                assert_eq!(layout.shard_of(&topology, p), shard, "stored partition {p:?} is not this shard's");
                match s {
                    Stored::Replica(_, hosted, durable, checkpoint) => {
                        incarnations.insert(p, crate::replica::replica_incarnation(hosted.id));
                        let replica = start_replica(
                            &config,
                            &topology,
                            layout,
                            p,
                            now_us,
                            hosted,
                            durable,
                            checkpoint.map(|c| *c),
                        );
                        replicas.insert(p, replica);
                    }
                    Stored::Left(_, incarnation) => {
                        incarnations.insert(p, incarnation);
                    }
                    Stored::Partition(..) => {
                        panic!("partition {p:?} is replicated, but its stored state is not a group's")
                    }
                }
            }
        }
        for p in layout.partitions_of_shard(&topology, shard).filter(|_| !topology.replicated()) {
            let (checkpoint, tail) = match stored.remove(&p) {
                Some(Stored::Partition(_, checkpoint, tail)) => (checkpoint, tail),
                None => (None, Vec::new()),
                Some(other) => panic!("partition {p:?} is not replicated, but its stored state is {other:?}"),
            };
            partitions.insert(p, Partition::restore(p, config.clone(), now_us, checkpoint.map(|c| *c), tail));
        }
        let strays: Vec<PartitionId> = stored.keys().copied().collect();
        assert!(strays.is_empty(), "stored partitions {strays:?} are not this shard's");
        let stabilizer = (shard == 0).then(|| {
            let mut s = Stabilizer::new(config.clone(), layout.coordinators());
            s.expect_nodes(topology.nodes(topology.dc()));
            s
        });
        let mut node = Self {
            coordinator: Coordinator::recover(layout.coordinator(shard), config.clone(), now_us, buffer_log),
            config,
            topology,
            layout,
            shard,
            partitions,
            replicas,
            leaders: BTreeMap::new(),
            placements: BTreeMap::new(),
            incarnations,
            parked: BTreeMap::new(),
            stabilizer,
            local: VecDeque::new(),
            outputs: VecDeque::new(),
            session_floor: Timestamp::ZERO,
        };
        let undecided: Vec<(PartitionId, TxId)> =
            node.partitions.values().flat_map(|p| p.undecided().into_iter().map(move |tx| (p.id(), tx))).collect();
        for (p, tx) in undecided {
            let to = Address::Coordinator(tx.coordinator);
            node.route(Envelope { from: Address::Partition(p), to, msg: Message::QueryOutcome { tx } });
        }
        node.pump(now_us);
        node
    }

    /// A client request (the driver picked this shard with [`Layout::client_shard`]).
    pub fn handle_client(&mut self, now_us: u64, client: ClientId, request: RequestId, mut body: ClientRequest) {
        self.raise_to_session_floor(&mut body);
        self.coordinator.handle_client(now_us, client, request, body);
        self.pump(now_us);
    }

    /// A client connection closed: its idle transactions abort.
    pub fn handle_disconnect(&mut self, now_us: u64, client: ClientId) {
        self.coordinator.handle_disconnect(client);
        self.pump(now_us);
    }

    /// A message from another shard, node or DC (or one that reached the wrong shard: it is passed on). A message
    /// for a replicated partition this shard holds a replica of goes to that replica, which serves it or passes
    /// it on to the leader it follows: routing it again by the leader this node last heard of could send it back
    /// where it came from, and two nodes with stale notices would bounce it between them.
    pub fn handle_message(&mut self, now_us: u64, envelope: Envelope) {
        let held_here = dc_partition(envelope.to, self.topology.dc()).is_some_and(|p| self.replicas.contains_key(&p));
        if held_here {
            self.local.push_back(envelope);
        } else {
            self.route(envelope);
        }
        self.pump(now_us);
    }

    /// Records of `partition` up to `lsn` are durable.
    pub fn handle_persisted(&mut self, now_us: u64, partition: PartitionId, lsn: Lsn) {
        if let Some(p) = self.partitions.get_mut(&partition) {
            p.handle_persisted(now_us, lsn);
        }
        self.pump(now_us);
    }

    /// Records of this shard's write-buffer log up to `lsn` are durable.
    pub fn handle_buffer_persisted(&mut self, now_us: u64, lsn: Lsn) {
        self.coordinator.handle_persisted(lsn);
        self.pump(now_us);
    }

    /// The driver read a partition's log as a [`NodeOutput::ReadLog`] asked: the records after its position,
    /// ascending, fewer than asked (or none) where the log ends.
    pub fn handle_log_read(&mut self, now_us: u64, partition: PartitionId, records: Vec<(Lsn, LogRecord)>) {
        if let Some(p) = self.partitions.get_mut(&partition) {
            p.handle_log_read(records);
        }
        self.pump(now_us);
    }

    /// A replica's group Write numbered up to `ready` is durable.
    pub fn handle_group_written(&mut self, now_us: u64, partition: PartitionId, ready: u64) {
        if let Some(r) = self.replicas.get_mut(&partition) {
            r.handle_written(now_us, ready);
        }
        self.pump(now_us);
    }

    /// A replica's complete checkpoint as stored, which [`NodeOutput::LoadCheckpoint`] asked for.
    pub fn handle_checkpoint_loaded(&mut self, now_us: u64, partition: PartitionId, checkpoint: Option<Checkpoint>) {
        if let Some(r) = self.replicas.get_mut(&partition) {
            r.handle_loaded(now_us, checkpoint);
        }
        self.pump(now_us);
    }

    /// Another shard of this node heard that a replicated partition's leader is on `node` from `term` on, with
    /// the group's `membership` from `conf_index` on.
    pub fn handle_leader(
        &mut self,
        now_us: u64,
        partition: PartitionId,
        node: NodeIndex,
        term: u64,
        membership: Membership,
        conf_index: Lsn,
    ) {
        self.note_leader(partition, node, term);
        self.note_placement(now_us, partition, membership, conf_index);
        self.pump(now_us);
    }

    /// Operator: move partition `p`'s replica on node `from` to node `to` (which holds none). Node `to` starts a
    /// new replica, which joins the group in place of `from`'s: first as a learner brought up to date, then as a
    /// voter in one joint change that removes `from`'s replica, which deletes its state once it applied that.
    /// Progress shows in the membership the partition's leader announces ([`Node::placement`]).
    pub fn move_replica(&mut self, now_us: u64, p: PartitionId, from: NodeIndex, to: NodeIndex) {
        let me = self.layout.node;
        let msg = Message::Replica(ReplicaMessage::Host { replaces: from });
        self.route(Envelope { from: Address::Replica(p, me), to: Address::Replica(p, to), msg });
        self.pump(now_us);
    }

    /// Operator: node `node` of the DC is retired for good (its replicas moved away): every node's stabilizer stops
    /// waiting for its coordinators before it collects old versions.
    pub fn retire_node(&mut self, now_us: u64, node: NodeIndex) {
        let msg = Message::NodeRetired { node };
        self.route_own(Envelope { from: Address::Stabilizer, to: Address::Stabilizer, msg });
        self.pump(now_us);
    }

    /// Where a replicated partition lives, as its leaders last announced: its group's membership and the log
    /// index from which it holds. `None` before any announcement reached this shard.
    pub fn placement(&self, p: PartitionId) -> Option<(Lsn, &Membership)> {
        self.placements.get(&p).map(|(index, membership)| (*index, membership))
    }

    /// Where every replicated partition lives, as announced ([`Node::placement`]), with its leader as last heard.
    pub fn placements(&self) -> impl Iterator<Item = (PartitionId, Lsn, &Membership, Option<NodeIndex>)> + '_ {
        self.placements.iter().map(|(p, (index, m))| (*p, *index, m, self.leader_of_partition(*p)))
    }

    /// Another shard of this node acknowledged a commit at this local time.
    pub fn handle_session_floor(&mut self, at: Timestamp) {
        self.session_floor = self.session_floor.max(at);
    }

    /// A DC's shape became known: a peer DC's (its configuration, or a descriptor received at run time), or this
    /// DC's own after a node joined it while it runs ([`Topology::grow`]: it never shrinks). From then on the
    /// stabilizer waits for the new node's coordinators too before it collects old versions, and reports, leader
    /// notices and replicas' requests to join reach it.
    pub fn handle_dc_nodes(&mut self, dc: DcId, nodes: NodeIndex) {
        if dc != self.topology.dc() {
            self.topology.set_dc_nodes(dc, nodes);
            return;
        }
        if !self.topology.grow(nodes) {
            return;
        }
        if let Some(s) = self.stabilizer.as_mut() {
            s.expect_nodes(nodes);
        }
        for r in self.replicas.values_mut() {
            r.set_nodes(nodes);
        }
    }

    /// Timers of every machine that are due.
    pub fn handle_timeout(&mut self, now_us: u64) {
        if self.coordinator.poll_timeout().is_some_and(|t| t <= now_us) {
            self.coordinator.handle_timeout(now_us);
        }
        for p in self.partitions.values_mut() {
            if p.poll_timeout().is_some_and(|t| t <= now_us) {
                p.handle_timeout(now_us);
            }
        }
        for r in self.replicas.values_mut() {
            if r.poll_timeout().is_some_and(|t| t <= now_us) {
                r.handle_timeout(now_us);
            }
        }
        self.pump(now_us);
    }

    /// The earliest local time at which [`Node::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        let machines = self.partitions.values().filter_map(Partition::poll_timeout);
        let replicas = self.replicas.values().filter_map(Replica::poll_timeout);
        machines.chain(replicas).chain(self.coordinator.poll_timeout()).min()
    }

    /// Hands over the next output, if any. Drain after every input, in order.
    pub fn poll_output(&mut self) -> Option<NodeOutput> {
        self.outputs.pop_front()
    }

    /// A checkpoint of every partition of this shard that is not replicated (see [`Partition::take_checkpoint`]);
    /// replicas hand theirs out as [`NodeOutput::Checkpoint`] when they can ([`Replica::checkpoint`]).
    pub fn take_checkpoints(&mut self, now_us: u64) -> Vec<(PartitionId, Checkpoint)> {
        for r in self.replicas.values_mut() {
            r.checkpoint();
        }
        self.pump(now_us);
        self.partitions.values_mut().map(|p| (p.id(), p.take_checkpoint())).collect()
    }

    /// A checkpoint of one partition of this shard (not of a replicated one: its log is its group's).
    pub fn take_checkpoint(&mut self, p: PartitionId) -> Option<Checkpoint> {
        self.partitions.get_mut(&p).map(Partition::take_checkpoint)
    }

    /// One page of a partition's export at `snapshot` ([`Partition::export`]), if this shard serves the partition
    /// (it is not replicated, or its replica here leads).
    pub fn export(
        &mut self,
        p: PartitionId,
        snapshot: &VectorClock,
        after: Option<&ObjectId>,
        limit: usize,
    ) -> Option<Result<crate::partition::ExportPage, crate::message::RemoteError>> {
        let partition = match self.partitions.get_mut(&p) {
            Some(partition) => partition,
            None => self.replicas.get_mut(&p).filter(|r| r.serving())?.partition_mut(),
        };
        Some(partition.export(snapshot, after, limit))
    }

    /// The partitions this shard serves, ascending: those not replicated, and those whose replica here leads.
    pub fn partitions(&self) -> impl Iterator<Item = &Partition> {
        let serving = self.replicas.values().filter(|r| r.serving()).map(Replica::partition);
        self.partitions.values().chain(serving)
    }

    /// The shard's replicas of replicated partitions, ascending.
    pub fn replicas(&self) -> impl Iterator<Item = &Replica> {
        self.replicas.values()
    }

    /// The shard's coordinator.
    pub fn coordinator(&self) -> &Coordinator {
        &self.coordinator
    }

    /// The DC's stabilizer, on the shard that runs it.
    pub fn stabilizer(&self) -> Option<&Stabilizer> {
        self.stabilizer.as_ref()
    }

    /// This shard's index.
    pub fn shard(&self) -> usize {
        self.shard
    }

    /// The session floor: the largest local commit time acknowledged by this node, as this shard knows it.
    pub fn session_floor(&self) -> Timestamp {
        self.session_floor
    }

    /// Raises the local entry of a new transaction's clock to the session floor: a client without a clock (or
    /// with an older one) still sees what the node acknowledged before it asked.
    fn raise_to_session_floor(&self, body: &mut ClientRequest) {
        let clock = match body {
            ClientRequest::Start { clock, .. }
            | ClientRequest::StaticRead { clock, .. }
            | ClientRequest::StaticUpdate { clock, .. } => clock,
            _ => return,
        };
        if self.session_floor == Timestamp::ZERO {
            return;
        }
        let (dc, dcs) = (self.config.dc, self.config.vector_len());
        let c = &mut clock.get_or_insert_with(|| VectorClock::zero(dcs).into()).vector;
        if c.has_dcs(dcs) && c.get(dc) < self.session_floor {
            c.set(dc, self.session_floor);
        }
    }

    /// Where a message goes: [`Layout::locate`], except that a replicated partition's messages go to its leader
    /// as last heard of (its home node while none is known).
    fn locate(&self, to: Address) -> Location {
        let leader = dc_partition(to, self.topology.dc()).and_then(|p| Some((p, self.leaders.get(&p)?.1)));
        match leader {
            Some((p, n)) => self.layout.locate(&self.topology, Address::Replica(p, n)),
            None => self.layout.locate(&self.topology, to),
        }
    }

    /// Records where a replicated partition's leader is, unless a later term is known. A leader newly heard of
    /// may not have what was sent to the one before: the coordinator asks again what it waits for from `p`.
    fn leader_of(&self, replica: &Replica) -> Option<NodeIndex> {
        leader_of(&self.leaders, replica)
    }

    /// The node leading partition `p`, as last announced.
    fn leader_of_partition(&self, p: PartitionId) -> Option<NodeIndex> {
        self.leaders.get(&p).map(|(_, n)| *n)
    }

    /// Records where a replicated partition lives, unless a later membership is known, and acts on it here: a
    /// replica of this shard that the group no longer counts, while the older membership it applied still does, was
    /// removed while it was away (it never applied its removal) and goes; a member on this node from an earlier
    /// disk means this node lost that disk, and a new replica takes its place.
    fn note_placement(&mut self, now_us: u64, p: PartitionId, membership: Membership, conf_index: Lsn) {
        if self.placements.get(&p).is_some_and(|(known, _)| *known > conf_index) {
            return;
        }
        if let Some(r) = self.replicas.get(&p) {
            let (id, group) = (r.group().id(), r.group());
            if !membership.contains(id) && group.membership().contains(id) && conf_index > group.membership_index() {
                self.drop_replica(p);
            }
        }
        let lost = membership.iter().any(|id| self.of_earlier_disk(id));
        if lost && self.layout.shard_of(&self.topology, p) == self.shard && !self.replicas.contains_key(&p) {
            self.host(now_us, p, self.layout.node);
        }
        let nodes = |m: &Membership| m.voters.iter().map(|id| replica_node(*id)).collect::<BTreeSet<_>>();
        let moved = self.placements.get(&p).is_none_or(|(_, known)| nodes(known) != nodes(&membership));
        self.placements.insert(p, (conf_index, membership));
        if moved {
            self.spread_leaders();
        }
    }

    /// Which node should lead each replicated partition, by partition, so that leadership spreads over the nodes
    /// holding voters: its home node where that holds a voter (every partition, in a DC whose replicas never
    /// moved); then, partition by partition, the voters' node that leads the fewest so far (the lowest on a tie).
    /// A replica that moves off its home node thus hands the lead to a node that leads few (one that joined the
    /// DC, say), and no other partition's leader changes. Every node computes it from the same leaders' notices
    /// (before a partition's first notice, from its first placement), so all agree once those have reached them.
    pub fn preferred_leaders(&self) -> Vec<NodeIndex> {
        let (topology, dc) = (&self.topology, self.topology.dc());
        let voters: Vec<Vec<NodeIndex>> = (topology.partitions())
            .map(|p| match self.placements.get(&p) {
                Some((_, m)) => m.voters.iter().map(|id| replica_node(*id)).collect(),
                None => topology.replicas(p).nodes,
            })
            .collect();
        let mut led: BTreeMap<NodeIndex, usize> = BTreeMap::new();
        let mut preferred: Vec<Option<NodeIndex>> = Vec::with_capacity(voters.len());
        for (p, v) in topology.partitions().zip(&voters) {
            let home = topology.home(dc, p).filter(|h| v.contains(h));
            if let Some(h) = home {
                *led.entry(h).or_default() += 1;
            }
            preferred.push(home);
        }
        for (choice, v) in preferred.iter_mut().zip(&voters) {
            if choice.is_none() {
                *choice = v.iter().copied().min_by_key(|n| (led.get(n).copied().unwrap_or(0), *n));
                if let Some(n) = *choice {
                    *led.entry(n).or_default() += 1;
                }
            }
        }
        preferred.into_iter().map(|n| n.unwrap_or(0)).collect()
    }

    /// Tells this shard's replicas which node should lead their partitions ([`Node::preferred_leaders`]).
    fn spread_leaders(&mut self) {
        if self.replicas.is_empty() {
            return;
        }
        let preferred = self.preferred_leaders();
        for (p, r) in &mut self.replicas {
            if let Some(n) = preferred.get(p.0 as usize) {
                r.prefer_leader(*n);
            }
        }
    }

    /// Whether replica `id` is this node's, from a disk it has since lost.
    fn of_earlier_disk(&self, id: ReplicaId) -> bool {
        replica_node(id) == self.layout.node && replica_generation(id) != self.layout.generation
    }

    /// A replicated partition's leader is on `node` from `term` on, with `membership` from `conf_index` on: route
    /// its messages there, tell this node's other shards, and act on where the partition lives.
    fn heard_leader(&mut self, now_us: u64, p: PartitionId, node: NodeIndex, notice: (u64, Membership, Lsn)) {
        let (term, membership, conf_index) = notice;
        self.note_leader(p, node, term);
        let m = membership.clone();
        self.outputs.push_back(NodeOutput::Leader { partition: p, node, term, membership: m, conf_index });
        self.note_placement(now_us, p, membership, conf_index);
    }

    /// Starts a new replica of `p` on this shard, in the partition's next incarnation on this disk, to replace
    /// node `replaces`'s replica: it asks the group's leader to admit it.
    fn host(&mut self, now_us: u64, p: PartitionId, replaces: NodeIndex) {
        let Some(incarnation) = self.incarnations.get(&p).map_or(Some(1), |i| i.checked_add(1)) else {
            return; // 65535 replicas of one partition on one disk: it takes a new disk (generation) to host more.
        };
        let hosted = Hosted {
            id: replica_id_of(self.layout.node, self.layout.generation, incarnation),
            replaces: Some(replaces),
        };
        self.incarnations.insert(p, incarnation);
        self.outputs.push_back(NodeOutput::Hosting { partition: p, hosting: Hosting::Hosts(hosted) });
        let durable = DurableState::default();
        let mut replica = start_replica(&self.config, &self.topology, self.layout, p, now_us, hosted, durable, None);
        if let Some(n) = self.preferred_leaders().get(p.0 as usize) {
            replica.prefer_leader(*n);
        }
        self.replicas.insert(p, replica);
    }

    /// Drops this shard's replica of `p`, removed from its group, and has the driver delete its state.
    fn drop_replica(&mut self, p: PartitionId) {
        let Some(r) = self.replicas.remove(&p) else { return };
        let incarnation = crate::replica::replica_incarnation(r.group().id());
        self.incarnations.insert(p, incarnation);
        if self.leader_of_partition(p) == Some(self.layout.node) {
            self.leaders.remove(&p);
        }
        self.outputs.push_back(NodeOutput::Hosting { partition: p, hosting: Hosting::Left { incarnation } });
    }

    fn note_leader(&mut self, p: PartitionId, node: NodeIndex, term: u64) {
        let known = self.leaders.get(&p).copied();
        if known.is_none_or(|(t, n)| term > t || (term == t && node != n)) {
            self.leaders.insert(p, (term, node));
            self.coordinator.handle_leader_change(p);
        }
    }

    /// Sends a message one of this shard's machines emitted: a report to the stabilizer goes to every node's
    /// (each node runs one), anything else where its receiver runs.
    fn route_own(&mut self, e: Envelope) {
        if e.to == Address::Stabilizer {
            let me = self.layout.node;
            for n in (0..self.topology.nodes(self.topology.dc())).filter(|n| *n != me) {
                self.outputs.push_back(NodeOutput::Transmit(Destination::Node(n), e.clone()));
            }
        }
        self.route(e);
    }

    /// Sends a message to wherever its receiver runs.
    fn route(&mut self, e: Envelope) {
        // A read that the nearest replica may serve goes to this node's, if it has one (it passes the read on to
        // the leader if it has not applied what the snapshot covers).
        if let (Address::Partition(p), Message::Read { nearest: true, .. }) = (e.to, &e.msg) {
            // (The shard that would run this node's replica passes the read on if the node holds none.)
            if p.0 < self.topology.partition_count() && self.topology.replicated() {
                let shard = self.layout.shard_of(&self.topology, p);
                if shard == self.shard {
                    self.local.push_back(e);
                } else {
                    self.outputs.push_back(NodeOutput::Transmit(Destination::Shard(shard), e));
                }
                return;
            }
        }
        match self.locate(e.to) {
            Location::Shard(s) if s == self.shard => self.local.push_back(e),
            Location::Shard(s) => self.outputs.push_back(NodeOutput::Transmit(Destination::Shard(s), e)),
            Location::Node(n) => self.outputs.push_back(NodeOutput::Transmit(Destination::Node(n), e)),
            Location::Dc(dc, n) => self.outputs.push_back(NodeOutput::Transmit(Destination::Dc(dc, n), e)),
            Location::Gone(c) => {
                // A handover of the write buffer that the dead coordinator decided is finished by the coordinator
                // of its shard now, which claims it (`coordinator::durable`): what concerns it goes there.
                let shard = usize::try_from(c.shard()).expect("small");
                if shard != self.shard && shard < self.layout.shards {
                    self.outputs.push_back(NodeOutput::Transmit(Destination::Shard(shard), e));
                    return;
                }
                // So are questions about its write buffer, which the coordinator of its shard recovered (or, with
                // fewer shards than before, never had: nothing was buffered there, `coordinator::tokens`).
                let asks = matches!(e.msg, Message::FlushBuffer { .. });
                if asks || about_tx(&e.msg).is_some_and(|tx| self.coordinator.claims(tx)) {
                    self.local.push_back(Envelope { to: Address::Coordinator(self.coordinator.id()), ..e });
                    return;
                }
                // The coordinator died with an earlier run of this node and will never decide: a partition asking
                // learns so, and settles the transaction with the DC's other partitions. Anything else is moot.
                if let (Message::QueryOutcome { tx }, Address::Partition(_)) = (&e.msg, e.from) {
                    let msg = Message::CoordinatorGone { tx: *tx };
                    self.route(Envelope { from: Address::Coordinator(c), to: e.from, msg });
                }
            }
            // A peer DC not connected yet: replication resends once it is.
            Location::Nowhere => {}
        }
    }

    /// Delivers a message to one of this shard's machines.
    fn deliver(&mut self, now_us: u64, e: Envelope) {
        match e.to {
            Address::Partition(p) | Address::Peer(_, p) => {
                if let Some(partition) = self.partitions.get_mut(&p) {
                    partition.handle_message(now_us, e.from, e.msg);
                } else if let Some(replica) = self.replicas.get_mut(&p) {
                    if replica.serving() {
                        replica.handle_message(now_us, e.from, e.msg);
                        return;
                    }
                    // A read for the nearest replica: served here if this follower applied what it covers.
                    let Some(e) = replica.read_nearest(e) else { return };
                    let leader = leader_of(&self.leaders, replica);
                    self.pass_on(p, leader, e);
                } else if self.topology.replicated() {
                    // A replicated partition this node holds no replica of (it moved away, or never was here).
                    self.pass_on(p, self.leader_of_partition(p), e);
                }
            }
            Address::Replica(p, _) => {
                if let Message::Replica(ReplicaMessage::Leader { term, membership, conf_index }) = e.msg {
                    if let Address::Replica(_, n) = e.from {
                        self.heard_leader(now_us, p, n, (term, membership, conf_index));
                    }
                } else if let Message::Replica(ReplicaMessage::Host { replaces }) = e.msg {
                    let me = self.layout.node;
                    // A replica here that is no voter and joins to replace another node (a move that never
                    // finished, say its target lost its disk meanwhile): the operator's latest move replaces it.
                    // Not while this node's replica of an earlier disk still votes: this one is its replacement.
                    let old_self_votes = (self.placements.get(&p))
                        .is_some_and(|(_, m)| m.voters.iter().chain(&m.outgoing).any(|id| self.of_earlier_disk(*id)));
                    let other_move = |r: &Replica| {
                        !r.group().membership().is_voter(r.group().id())
                            && r.replaces() != Some(replaces)
                            && !old_self_votes
                    };
                    if self.replicas.get(&p).is_some_and(other_move) {
                        self.drop_replica(p);
                    }
                    if !self.replicas.contains_key(&p)
                        && replaces != me
                        && replaces < self.topology.nodes(self.topology.dc())
                    {
                        self.host(now_us, p, replaces);
                    }
                } else if let Some(replica) = self.replicas.get_mut(&p) {
                    replica.handle_message(now_us, e.from, e.msg);
                }
            }
            Address::Coordinator(c) | Address::DcCoordinator(_, c) if c == self.coordinator.id() => {
                self.coordinator.handle_message(now_us, e.from, e.msg)
            }
            Address::Coordinator(_) | Address::DcCoordinator(..) => {}
            Address::Stabilizer => {
                // A leader's pvc report, with its log position: this node's replica of the partition, if it
                // follows, may serve reads within that pvc once it applied that far.
                if let (
                    Address::Partition(p),
                    Message::PvcReport { pvc, at: Some((term, index)), committed, frontier, .. },
                ) = (e.from, &e.msg)
                {
                    let me = self.layout.node;
                    // Every leader reports every few milliseconds: no allocation unless a follower here takes it.
                    let held = self.placements.get(&p).is_some_and(|(_, m)| m.iter().any(|id| replica_node(id) == me));
                    // The report reaches the shard that runs this node's stabilizer (`Layout::locate`).
                    let stabilizer =
                        self.stabilizer.as_ref().filter(|_| held && self.leader_of_partition(p) != Some(me));
                    if let Some(s) = stabilizer {
                        let (term, index, pvc, mut gc) = (*term, *index, pvc.clone(), s.gc_frontier().clone());
                        // Other DCs read from this partition (partial replication): no further than its leader.
                        if let Some(f) = frontier {
                            gc.merge_min(f);
                        }
                        let committed = *committed;
                        let msg = Message::Replica(ReplicaMessage::Closed { term, index, pvc, committed, gc });
                        self.route(Envelope { from: e.from, to: Address::Replica(p, me), msg });
                    }
                }
                if let Some(s) = self.stabilizer.as_mut() {
                    s.handle_message(e.from, e.msg);
                }
            }
        }
    }

    /// A message for a partition that this shard's replica does not serve (or that has no replica here): on to
    /// `leader`, else (no leader known: an election, or elected here and still catching up) parked until there is
    /// one ([`Node::unpark`]).
    fn pass_on(&mut self, p: PartitionId, leader: Option<NodeIndex>, e: Envelope) {
        if let Some(n) = leader.filter(|n| *n != self.layout.node) {
            self.outputs.push_back(NodeOutput::Transmit(Destination::Node(n), e));
            return;
        }
        let parked = self.parked.entry(p).or_default();
        if parked.len() >= MAX_PARKED {
            parked.pop_front(); // The oldest's sender has likely given up already.
        }
        parked.push_back(e);
    }

    /// Messages parked until their partition has a leader this node knows of (`Node::pass_on`): still on their
    /// way (a transaction's prepare among them may commit when it arrives).
    pub fn parked_messages(&self) -> usize {
        self.parked.values().map(VecDeque::len).sum()
    }

    /// Hands parked messages to their partition's replica once it serves, or on to the leader once one is known.
    /// Returns whether any moved.
    fn unpark(&mut self) -> bool {
        let me = self.layout.node;
        let ready: Vec<PartitionId> = (self.parked.keys())
            .filter(|p| match self.replicas.get(p) {
                Some(r) => r.serving() || self.leader_of(r).is_some_and(|n| n != me),
                None => self.leader_of_partition(**p).is_some_and(|n| n != me),
            })
            .copied()
            .collect();
        for p in &ready {
            let messages = self.parked.remove(p).unwrap_or_default();
            self.local.extend(messages);
        }
        !ready.is_empty()
    }

    /// This node's replica of `p` leads from `term` on, with `membership` from `conf_index` on: tell this node's
    /// other shards and the DC's other nodes.
    fn announce_leader(
        &mut self,
        now_us: u64,
        p: PartitionId,
        (term, membership, conf_index): (u64, Membership, Lsn),
        sends: &mut Vec<Envelope>,
    ) {
        let me = self.layout.node;
        for n in (0..self.topology.nodes(self.topology.dc())).filter(|n| *n != me) {
            let msg = Message::Replica(ReplicaMessage::Leader { term, membership: membership.clone(), conf_index });
            sends.push(Envelope { from: Address::Replica(p, me), to: Address::Replica(p, n), msg });
        }
        self.heard_leader(now_us, p, me, (term, membership, conf_index));
    }

    /// Carries out every machine's outputs until nothing is left.
    fn pump(&mut self, now_us: u64) {
        loop {
            let mut progressed = false;
            while let Some(out) = self.coordinator.poll_output() {
                progressed = true;
                match out {
                    CoordinatorOutput::Send(e) => self.route_own(e),
                    CoordinatorOutput::Persist { lsn, record } => {
                        self.outputs.push_back(NodeOutput::PersistBuffer { lsn, record })
                    }
                    CoordinatorOutput::Truncate { before } => {
                        self.outputs.push_back(NodeOutput::TruncateBuffer { before })
                    }
                    CoordinatorOutput::Reply(reply) => {
                        if let Ok(ClientResponse::Committed { commit, .. }) = &reply.result {
                            let at = commit.get(self.config.dc);
                            if at > self.session_floor {
                                self.session_floor = at;
                                self.outputs.push_back(NodeOutput::SessionFloor(at));
                            }
                        }
                        self.outputs.push_back(NodeOutput::Reply(reply));
                    }
                }
            }
            let mut sends = Vec::new();
            for p in self.partitions.values_mut() {
                while let Some(out) = p.poll_output() {
                    progressed = true;
                    match out {
                        PartitionOutput::Send(e) => sends.push(e),
                        PartitionOutput::Persist { lsn, record } => {
                            self.outputs.push_back(NodeOutput::Persist { partition: p.id(), lsn, record })
                        }
                        PartitionOutput::ReadLog { after } => {
                            self.outputs.push_back(NodeOutput::ReadLog { partition: p.id(), after })
                        }
                    }
                }
            }
            let mut leading = Vec::new();
            let mut removed = Vec::new();
            for r in self.replicas.values_mut() {
                while let Some(out) = r.poll_output() {
                    progressed = true;
                    match out {
                        ReplicaOutput::Send(e) => sends.push(e),
                        ReplicaOutput::Write { ready, snapshot, entries, hard_state } => {
                            let partition = r.id();
                            self.outputs.push_back(NodeOutput::GroupWrite {
                                partition,
                                ready,
                                snapshot,
                                entries,
                                hard_state,
                            })
                        }
                        ReplicaOutput::Checkpoint(checkpoint) => {
                            self.outputs.push_back(NodeOutput::Checkpoint { partition: r.id(), checkpoint })
                        }
                        ReplicaOutput::Load => self.outputs.push_back(NodeOutput::LoadCheckpoint { partition: r.id() }),
                        ReplicaOutput::Leading { term, membership, conf_index } => {
                            leading.push((r.id(), (term, membership, conf_index)))
                        }
                        ReplicaOutput::Removed => removed.push(r.id()),
                    }
                }
            }
            for p in removed {
                self.drop_replica(p);
            }
            for (p, notice) in leading {
                self.announce_leader(now_us, p, notice, &mut sends);
            }
            progressed |= self.unpark();
            let mut told = Vec::new();
            if let Some(s) = self.stabilizer.as_mut() {
                told.extend(std::iter::from_fn(|| s.poll_output()));
            }
            progressed |= !sends.is_empty() || !told.is_empty();
            for e in sends {
                self.route_own(e);
            }
            for e in told {
                // This node's stabilizer speaks for this node's machines; every other node has its own.
                if matches!(self.locate(e.to), Location::Shard(_)) {
                    self.route(e);
                }
            }
            while let Some(e) = self.local.pop_front() {
                progressed = true;
                self.deliver(now_us, e);
            }
            if !progressed {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObjectId;
    use causet_crdt::{CrdtType, Op};

    fn config(dcs: u16, partitions: u32) -> Config {
        Config::new(dcs, DcId(0), partitions)
    }

    fn drain(node: &mut Node) -> Vec<NodeOutput> {
        std::iter::from_fn(|| node.poll_output()).collect()
    }

    #[test]
    fn locate_places_partitions_coordinators_and_the_stabilizer() {
        let mut t = Topology::new(DcId(0), 2, 6, 2);
        let l = Layout::new(1, 2, 7);
        // Node 1 serves partitions 1, 3, 5; by index on the node 0, 1, 2: shards 0, 1, 0.
        assert_eq!(l.locate(&t, Address::Partition(PartitionId(3))), Location::Shard(1));
        assert_eq!(l.locate(&t, Address::Partition(PartitionId(5))), Location::Shard(0));
        assert_eq!(l.locate(&t, Address::Partition(PartitionId(2))), Location::Node(0));
        assert_eq!(l.locate(&t, Address::Partition(PartitionId(6))), Location::Nowhere, "no such partition");
        assert_eq!(l.locate(&t, Address::Stabilizer), Location::Shard(0), "every node runs a stabilizer");
        assert_eq!(l.locate(&t, Address::Peer(DcId(1), PartitionId(3))), Location::Nowhere, "shape unknown");
        t.set_dc_nodes(DcId(1), 3);
        assert_eq!(l.locate(&t, Address::Peer(DcId(1), PartitionId(4))), Location::Dc(DcId(1), 1));
        assert_eq!(l.locate(&t, Address::Peer(DcId(0), PartitionId(3))), Location::Shard(1));
        assert_eq!(l.locate(&t, Address::Coordinator(l.coordinator(1))), Location::Shard(1));
        let earlier = CoordinatorId::compose(1, 6, 1);
        assert_eq!(l.locate(&t, Address::Coordinator(earlier)), Location::Gone(earlier));
        let elsewhere = CoordinatorId::compose(0, 7, 0);
        assert_eq!(l.locate(&t, Address::Coordinator(elsewhere)), Location::Node(0));
    }

    #[test]
    fn a_request_for_a_transaction_of_another_incarnation_is_refused() {
        let l = Layout::new(0, 2, 3);
        let tx = TxId { dc: DcId(0), coordinator: CoordinatorId::compose(0, 2, 1), seq: 0 };
        assert_eq!(l.client_shard(&ClientRequest::Commit { tx }, 0), Err(TxError::UnknownTransaction(tx)));
        let live = TxId { coordinator: l.coordinator(1), ..tx };
        assert_eq!(l.client_shard(&ClientRequest::Commit { tx: live }, 0), Ok(1));
        assert_eq!(l.client_shard(&ClientRequest::Start { clock: None, reads: Default::default() }, 5), Ok(1));
    }

    /// A one-node, one-shard DC: a static update travels coordinator → partition → log → coordinator → client
    /// inside the node, and its commit raises the session floor before the reply leaves.
    #[test]
    fn a_commit_is_replied_after_its_record_is_durable_and_raises_the_session_floor_first() {
        let c = config(1, 2);
        let t = Topology::new(DcId(0), 1, 2, 1);
        let mut node = Node::recover(c, t, Layout::new(0, 1, 0), 0, 1_000, Vec::new(), Vec::new());
        drain(&mut node);
        let object = ObjectId::new("k", "b", CrdtType::CounterPn);
        let updates = vec![(object.clone(), Op::Increment(1))];
        node.handle_client(2_000, ClientId(1), RequestId(1), ClientRequest::StaticUpdate { clock: None, updates });
        let out = drain(&mut node);
        let persisted: Vec<_> = out
            .iter()
            .filter_map(|o| match o {
                NodeOutput::Persist { partition, lsn, .. } => Some((*partition, *lsn)),
                _ => None,
            })
            .collect();
        assert_eq!(persisted.len(), 1, "one record for a single-partition commit: {out:?}");
        assert!(!out.iter().any(|o| matches!(o, NodeOutput::Reply(_))), "no reply before the record is durable");
        let (p, lsn) = persisted[0];
        node.handle_persisted(3_000, p, lsn);
        let out = drain(&mut node);
        let floor = out.iter().position(|o| matches!(o, NodeOutput::SessionFloor(_)));
        let reply = out.iter().position(|o| matches!(o, NodeOutput::Reply(_)));
        assert!(floor.is_some() && floor < reply, "the floor leaves before the reply: {out:?}");
        assert!(node.session_floor() > Timestamp::ZERO);
    }

    #[test]
    fn a_new_transaction_starts_at_or_above_the_session_floor() {
        let c = config(1, 1);
        let now_us = 10_000_000;
        let mut node =
            Node::recover(c, Topology::new(DcId(0), 1, 1, 1), Layout::new(0, 1, 0), 0, now_us, Vec::new(), Vec::new());
        // Another shard acknowledged a commit half a second ahead of this shard's clock (a hybrid clock may run
        // ahead of physical time).
        let floor = Timestamp::from_micros(now_us + 500_000);
        node.handle_session_floor(floor);
        node.handle_client(
            now_us,
            ClientId(1),
            RequestId(1),
            ClientRequest::Start { clock: None, reads: Default::default() },
        );
        let started = drain(&mut node).into_iter().find_map(|o| match o {
            NodeOutput::Reply(ClientReply { result: Ok(ClientResponse::Started { snapshot, .. }), .. }) => {
                Some(snapshot)
            }
            _ => None,
        });
        // One DC: no remote entry to wait for, so the start answers at once.
        let snapshot = started.expect("a start in a one-DC node answers at once");
        assert!(snapshot.get(DcId(0)) >= floor, "snapshot {snapshot} below the floor {floor}");
    }

    #[test]
    fn a_transaction_left_prepared_by_an_earlier_incarnation_is_settled_at_recovery() {
        let c = config(1, 1);
        let t = Topology::new(DcId(0), 1, 1, 1);
        let dead = CoordinatorId::compose(0, 4, 0);
        let tx = TxId { dc: DcId(0), coordinator: dead, seq: 9 };
        let record = LogRecord::Prepared {
            tx,
            snapshot: VectorClock::zero(1),
            prepare_time: Timestamp::from_micros(500),
            writes: Vec::new(),
            oldest_open: 0,
        };
        let stored = vec![Stored::Partition(PartitionId(0), None, vec![(Lsn(1), record)])];
        let mut node = Node::recover(c, t, Layout::new(0, 1, 5), 0, 1_000, stored, Vec::new());
        // Its coordinator is gone with incarnation 4: the question never leaves the node, the lone partition's
        // termination finds nobody committed it, and it aborts.
        let out = drain(&mut node);
        assert!(out.iter().all(|o| !matches!(o, NodeOutput::Transmit(..))), "{out:?}");
        assert!(out
            .iter()
            .any(|o| matches!(o, NodeOutput::Persist { record: LogRecord::Aborted { tx: t }, .. } if *t == tx)));
        assert!(node.partitions().all(|p| p.undecided().is_empty()));
    }

    /// Three one-shard nodes of one DC whose partitions are Raft groups of three; messages between nodes arrive
    /// at once, group Writes are durable at once, time moves 1 ms per step.
    struct Dc {
        nodes: Vec<Node>,
        now: u64,
        replies: Vec<ClientReply>,
        /// A node that is down: it gets no message and no timer, and what it sends is lost.
        down: Option<usize>,
        /// Messages dropped on their way (and kept here) when this returns true.
        lose: fn(from: usize, &Envelope) -> bool,
        lost: Vec<Envelope>,
        /// What each node told its store it runs: (node, partition, hosting), in order.
        hosting: Vec<(usize, PartitionId, Hosting)>,
    }

    impl Dc {
        fn new(partitions: u32) -> Self {
            Self::with_nodes(partitions, 3)
        }

        /// `nodes` nodes, partitions in groups of three.
        fn with_nodes(partitions: u32, nodes: NodeIndex) -> Self {
            let t = Topology::new(DcId(0), 1, partitions, nodes).with_replicas(3);
            let nodes = (0..nodes)
                .map(|n| {
                    let hosting = crate::replica::first_hosting(&t, n, 0);
                    let stored = Stored::of_hosting(&hosting, |_| Ok::<_, ()>((DurableState::default(), None)));
                    let stored = stored.expect("nothing to load");
                    Node::recover(
                        config(1, partitions),
                        t.clone(),
                        Layout::new(n, 1, 0),
                        0,
                        1_000_000,
                        stored,
                        Vec::new(),
                    )
                })
                .collect();
            let (replies, lost, hosting) = (Vec::new(), Vec::new(), Vec::new());
            Self { nodes, now: 1_000_000, replies, down: None, lose: |_, _| false, lost, hosting }
        }

        /// The node whose replica of `p` serves as its leader.
        fn leader(&self, p: PartitionId) -> Option<usize> {
            (0..self.nodes.len()).find(|n| self.down != Some(*n) && self.nodes[*n].partitions().any(|q| q.id() == p))
        }

        /// Carries every node's outputs until all are quiet.
        fn settle(&mut self) {
            loop {
                let mut moved = false;
                for n in (0..self.nodes.len()).filter(|n| self.down != Some(*n)) {
                    for out in drain(&mut self.nodes[n]) {
                        moved = true;
                        match out {
                            NodeOutput::Transmit(Destination::Node(to), e) => {
                                if (self.lose)(n, &e) {
                                    self.lost.push(e);
                                } else if self.down != Some(usize::from(to)) {
                                    self.nodes[usize::from(to)].handle_message(self.now, e)
                                }
                            }
                            NodeOutput::GroupWrite { partition, ready, .. } => {
                                self.nodes[n].handle_group_written(self.now, partition, ready)
                            }
                            NodeOutput::Reply(r) => self.replies.push(r),
                            NodeOutput::Hosting { partition, hosting } => self.hosting.push((n, partition, hosting)),
                            _ => {}
                        }
                    }
                }
                if !moved {
                    return;
                }
            }
        }

        fn run(&mut self, us: u64) {
            let end = self.now + us;
            while self.now < end {
                self.now += 1_000;
                for (n, node) in self.nodes.iter_mut().enumerate() {
                    if self.down != Some(n) && node.poll_timeout().is_some_and(|t| t <= self.now) {
                        node.handle_timeout(self.now);
                    }
                }
                self.settle();
            }
        }
    }

    /// The commit of the static update `request` sent to node 0, after running the DC for a while.
    fn commit_at(dc: &mut Dc, request: u64, updates: Vec<(ObjectId, Op)>) -> VectorClock {
        let body = ClientRequest::StaticUpdate { clock: None, updates };
        dc.nodes[0].handle_client(dc.now, ClientId(1), RequestId(request), body);
        dc.run(200_000);
        (dc.replies.iter())
            .find_map(|r| match &r.result {
                Ok(ClientResponse::Committed { commit, .. }) if r.request == RequestId(request) => Some(commit.clone()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("request {request} committed: {:?}", dc.replies))
    }

    /// A backup's export: every partition's objects at a snapshot, from the node that leads it, page by page. It
    /// shows each object as of the snapshot (not the later commit), leaves out objects written only after it,
    /// pages to the same result however small the pages, and refuses a snapshot the partition has not applied.
    #[test]
    fn an_export_shows_every_object_as_of_the_snapshot_page_by_page() {
        let mut dc = Dc::new(3);
        dc.run(1_000_000);
        let counter = |name: String| ObjectId::new(name, "b", CrdtType::CounterPn);
        let first = commit_at(&mut dc, 1, (0..10).map(|k| (counter(format!("k{k}")), Op::Increment(1))).collect());
        // The backup's transaction: open at a snapshot that includes the first commit, it holds garbage collection
        // there (without it the export is refused: SnapshotTooOld) while the later commit goes on.
        let start = ClientRequest::Start { clock: Some(first.clone().into()), reads: Default::default() };
        dc.nodes[0].handle_client(dc.now, ClientId(2), RequestId(9), start);
        dc.run(10_000);
        let snapshot = (dc.replies.iter())
            .find_map(|r| match &r.result {
                Ok(ClientResponse::Started { snapshot, .. }) if r.request == RequestId(9) => Some(snapshot.clone()),
                _ => None,
            })
            .expect("the transaction started");
        let later: Vec<(ObjectId, Op)> = (0..5)
            .map(|k| (counter(format!("k{k}")), Op::Increment(10)))
            .chain((0..3).map(|k| (counter(format!("new{k}")), Op::Increment(1))))
            .collect();
        commit_at(&mut dc, 2, later);
        for limit in [1000, 3, 1] {
            let mut exported = std::collections::BTreeMap::new();
            for p in (0..3).map(PartitionId) {
                let leader = dc.leader(p).expect("a leader");
                let mut after = None;
                loop {
                    let page = dc.nodes[leader].export(p, &snapshot, after.as_ref(), limit).expect("served here");
                    let page = page.expect("the snapshot is applied here");
                    assert!(page.objects.len() <= limit);
                    exported.extend(page.objects.into_iter().map(|(id, state)| (id.key, state.value())));
                    match page.next {
                        Some(next) => after = Some(next),
                        None => break,
                    }
                }
                let follower = (0..3).find(|n| Some(*n) != dc.leader(p)).expect("a follower");
                assert!(dc.nodes[follower].export(p, &snapshot, None, limit).is_none(), "only the leader exports");
            }
            let want: std::collections::BTreeMap<Vec<u8>, causet_crdt::Value> =
                (0..10).map(|k| (format!("k{k}").into_bytes(), causet_crdt::Value::Counter(1))).collect();
            assert_eq!(exported, want, "pages of {limit}");
        }
        let mut future = snapshot.clone();
        future.set(DcId(0), Timestamp(snapshot.get(DcId(0)).0 + (3_600_000_000 << crate::time::LOGICAL_BITS)));
        let p = PartitionId(0);
        let leader = dc.leader(p).expect("a leader");
        let refused = dc.nodes[leader].export(p, &future, None, 10).expect("served here");
        assert!(matches!(refused, Err(crate::message::RemoteError::NotYetApplied(_))), "{refused:?}");
    }

    /// At a cold start each partition's home replica campaigns at once and leads, so no leadership is handed back
    /// later (fails without the campaign: whoever timed out first leads, and hands over a second later).
    #[test]
    fn at_a_cold_start_each_partition_is_led_by_its_home_node_without_a_handover() {
        let mut dc = Dc::new(6);
        dc.run(2_000_000);
        for p in (0..6).map(PartitionId) {
            let home = dc.nodes[0].topology.home(DcId(0), p).map(usize::from);
            assert_eq!(dc.leader(p), home, "partition {p:?}");
        }
        let handovers: u64 = dc.nodes.iter().flat_map(|n| n.replicas()).map(|r| r.stats().handovers).sum();
        assert_eq!(handovers, 0);
    }

    /// A request sent before the partitions' first elections is parked where it arrives and served once they
    /// have leaders, rather than dropped (a load started right after a cluster once timed out on that).
    #[test]
    fn a_request_sent_before_any_leader_is_elected_is_served_once_one_is() {
        let mut dc = Dc::new(3);
        let updates: Vec<(ObjectId, Op)> =
            (0..6).map(|k| (ObjectId::new(format!("k{k}"), "b", CrdtType::CounterPn), Op::Increment(1))).collect();
        let partitions: std::collections::BTreeSet<u32> = updates.iter().map(|(o, _)| o.partition(3).0).collect();
        assert!(partitions.len() > 1, "the update spans partitions");
        let body = ClientRequest::StaticUpdate { clock: None, updates };
        // The home replicas campaign as they start: lose their first votes, so that the request arrives first.
        dc.lose = |_, e| matches!(e.msg, Message::Replica(ReplicaMessage::Raft { .. }));
        dc.nodes[0].handle_client(dc.now, ClientId(1), RequestId(1), body);
        dc.settle();
        assert!(dc.nodes.iter().all(|n| n.partitions().next().is_none()), "no partition has a leader yet");
        dc.lose = |_, _| false;
        // Elections take 100–200 ms; the request's own timeout (op_timeout) is far longer.
        dc.run(1_000_000);
        let committed = dc.replies.iter().any(|r| matches!(r.result, Ok(ClientResponse::Committed { .. })));
        assert!(committed, "the update never committed: {:?}", dc.replies);
        let leaders: usize = dc.nodes.iter().map(|n| n.partitions().count()).sum();
        assert_eq!(leaders, 3, "every partition has exactly one serving leader");
    }

    /// A leader that committed a single-partition update dies before its answer reaches the coordinator: the
    /// coordinator asks the new leader again as soon as it hears of it, and the new leader answers with the commit
    /// the old one made rather than committing it a second time (fails without the resend: the client waits for
    /// `op_timeout`; fails without the partition's memory of decided transactions: the counter reads 2).
    #[test]
    fn a_commit_whose_answer_died_with_its_leader_is_answered_by_the_next_leader_and_applied_once() {
        let mut dc = Dc::new(3);
        dc.run(1_000_000);
        // A key of a partition led by a node other than node 0, whose coordinator runs the transaction.
        let (key, old) = (0..100)
            .map(|k| ObjectId::new(format!("k{k}"), "b", CrdtType::CounterPn))
            .find_map(|o| dc.leader(o.partition(3)).filter(|n| *n != 0).map(|n| (o, n)))
            .expect("some partition is led away from node 0");
        dc.lose = |_, e| matches!(e.msg, Message::Committed { .. });
        let body = ClientRequest::StaticUpdate { clock: None, updates: vec![(key.clone(), Op::Increment(1))] };
        dc.nodes[0].handle_client(dc.now, ClientId(1), RequestId(1), body);
        dc.settle();
        let Some(Message::Committed { commit: first, .. }) = dc.lost.first().map(|e| e.msg.clone()) else {
            panic!("the old leader committed and answered: {:?}", dc.lost);
        };
        assert!(dc.replies.is_empty(), "the answer was lost");

        dc.down = Some(old);
        dc.lose = |_, _| false;
        // An election takes a few hundred milliseconds; op_timeout is ten seconds.
        dc.run(1_000_000);
        let new = dc.leader(key.partition(3)).expect("a new leader");
        assert_ne!(new, old);
        let commit = dc.replies.iter().find_map(|r| match &r.result {
            Ok(ClientResponse::Committed { commit, .. }) if r.request == RequestId(1) => Some(commit.clone()),
            _ => None,
        });
        assert_eq!(commit, Some(first), "answered with the old leader's commit: {:?}", dc.replies);

        let body =
            ClientRequest::StaticRead { clock: commit.map(Into::into), objects: vec![key], reads: Default::default() };
        dc.nodes[0].handle_client(dc.now, ClientId(1), RequestId(2), body);
        dc.run(100_000);
        let values = dc.replies.iter().find_map(|r| match &r.result {
            Ok(ClientResponse::StaticValues { values, .. }) if r.request == RequestId(2) => Some(values.clone()),
            _ => None,
        });
        assert_eq!(values, Some(vec![causet_crdt::Value::Counter(1)]), "the increment applied exactly once");
    }

    /// Every node runs a stabilizer: with node 0 down, the other nodes' coordinators still see the DC's stable
    /// snapshot pass a commit made after it went down (fails with a stabilizer on node 0 only: it stands still).
    #[test]
    fn the_stable_snapshot_keeps_moving_while_node_0_is_down() {
        let mut dc = Dc::new(3);
        dc.run(1_000_000);
        dc.down = Some(0);
        // Node 0's partitions fail over to the others.
        dc.run(1_000_000);
        let updates: Vec<(ObjectId, Op)> =
            (0..6).map(|k| (ObjectId::new(format!("k{k}"), "b", CrdtType::CounterPn), Op::Increment(1))).collect();
        let body = ClientRequest::StaticUpdate { clock: None, updates };
        dc.nodes[1].handle_client(dc.now, ClientId(1), RequestId(1), body);
        dc.run(200_000);
        let commit = dc.replies.iter().find_map(|r| match &r.result {
            Ok(ClientResponse::Committed { commit, .. }) => Some(commit.clone()),
            _ => None,
        });
        let commit = commit.unwrap_or_else(|| panic!("the update committed without node 0: {:?}", dc.replies));
        for n in [1, 2] {
            let stable = dc.nodes[n].coordinator().stable_snapshot();
            assert!(commit.le(stable), "node {n}: the stable snapshot {stable} stays below the commit {commit}");
        }
    }

    /// Leadership spreads over the nodes: a partition that failed over while its home node was away is handed back
    /// to the home node once that node is back and has caught up, and keeps committing (without the handover, the
    /// node that took over leads it for ever, and after a few failovers one node leads everything).
    #[test]
    fn a_partition_returns_to_its_home_node_once_that_node_is_back_and_caught_up() {
        let mut dc = Dc::new(3);
        dc.run(3_000_000);
        let homes: Vec<Option<usize>> = (0..3).map(|p| dc.leader(PartitionId(p))).collect();
        assert_eq!(homes, vec![Some(0), Some(1), Some(2)], "each partition is led by its home node");
        let p = PartitionId(1);
        dc.down = Some(1);
        dc.run(1_000_000);
        let deputy = dc.leader(p).expect("another node took over");
        dc.down = None;
        dc.run(3_000_000);
        assert_eq!(dc.leader(p), Some(1), "the home node leads again (node {deputy} took over meanwhile)");
        let handed = dc.nodes[deputy].replicas().find(|r| r.id() == p).map(|r| r.stats().handovers);
        assert_eq!(handed, Some(1));
        let key = (0..100)
            .map(|k| ObjectId::new(format!("k{k}"), "b", CrdtType::CounterPn))
            .find(|o| o.partition(3) == p)
            .expect("a key of the partition");
        let body = ClientRequest::StaticUpdate { clock: None, updates: vec![(key, Op::Increment(1))] };
        dc.nodes[0].handle_client(dc.now, ClientId(1), RequestId(1), body);
        dc.run(100_000);
        assert!(
            dc.replies.iter().any(|r| matches!(r.result, Ok(ClientResponse::Committed { .. }))),
            "{:?}",
            dc.replies
        );
    }

    /// The operator moves a dead node's replica to a fourth node: the newcomer joins in its place, the DC keeps
    /// committing with the dead node still down, and when that node comes back, its replica (which never applied
    /// its removal and still counts itself a member) learns from the leader's notice that it was removed and is
    /// dropped, its state deleted. A client of that node is still served, through the leader.
    #[test]
    fn a_dead_nodes_replica_moves_to_another_node_and_is_dropped_when_the_node_comes_back() {
        let mut dc = Dc::with_nodes(2, 4);
        dc.run(1_000_000);
        let p = PartitionId(0);
        assert_eq!(dc.nodes[0].topology.replicas(p).nodes, vec![0, 1, 2]);
        let increment = |k: &str| ClientRequest::StaticUpdate {
            clock: None,
            updates: vec![(ObjectId::new(k, "b", CrdtType::CounterPn), Op::Increment(1))],
        };
        let key = (0..)
            .map(|k| format!("k{k}"))
            .find(|k| ObjectId::new(k.as_str(), "b", CrdtType::CounterPn).partition(2) == p);
        let key = key.expect("a key of partition 0");
        dc.down = Some(2);
        dc.nodes[1].move_replica(dc.now, p, 2, 3);
        dc.run(4_000_000);
        let nodes_of = |m: &Membership| m.members().iter().map(|id| replica_node(*id)).collect::<Vec<_>>();
        let (_, membership) = dc.nodes[0].placement(p).expect("announced");
        assert_eq!(nodes_of(membership), vec![0, 1, 3], "{membership:?}");
        assert!(matches!(dc.hosting.as_slice(), [(3, q, Hosting::Hosts(Hosted { replaces: Some(2), .. }))] if *q == p));
        let newcomer = dc.nodes[3].replicas().find(|r| r.id() == p).expect("node 3 runs a replica");
        assert!(newcomer.group().membership().is_voter(newcomer.group().id()));
        // The group of 0, 1 and 3 commits with node 2 down.
        dc.nodes[0].handle_client(dc.now, ClientId(1), RequestId(1), increment(&key));
        dc.run(200_000);
        assert!(matches!(dc.replies.pop().map(|r| r.result), Some(Ok(ClientResponse::Committed { .. }))));
        // Node 2 comes back: its replica is dropped at the next leader notice.
        dc.down = None;
        dc.run(2_000_000);
        assert!(dc.nodes[2].replicas().all(|r| r.id() != p), "node 2 still runs its removed replica");
        assert!(
            matches!(dc.hosting.last(), Some((2, q, Hosting::Left { incarnation: 0 })) if *q == p),
            "{:?}",
            dc.hosting
        );
        dc.nodes[2].handle_client(dc.now, ClientId(2), RequestId(2), increment(&key));
        dc.run(200_000);
        assert!(matches!(dc.replies.pop().map(|r| r.result), Some(Ok(ClientResponse::Committed { .. }))));
        let (_, membership) = dc.nodes[2].placement(p).expect("announced");
        assert_eq!(nodes_of(membership), vec![0, 1, 3]);
    }

    /// A fourth node (a new disk) joins the running DC of three whose `partitions` partitions are groups of three:
    /// until the others hear that the DC grew, nothing they send reaches it; then they do
    /// ([`Node::handle_dc_nodes`]), and keep placing the partitions over their first three.
    fn join_fourth(dc: &mut Dc, partitions: u32) {
        let grown = Topology::new(DcId(0), 1, partitions, 4).with_replicas(3).with_first_nodes(3);
        let layout = Layout::new(3, 1, 0).with_generation(7);
        let joiner = Node::recover(config(1, partitions), grown, layout, 0, dc.now, Vec::new(), Vec::new());
        dc.nodes.push(joiner);
        dc.run(1_500_000);
        assert!(dc.nodes[3].placements().next().is_none(), "a notice reached a node the DC does not know yet");
        for n in 0..3 {
            dc.nodes[n].handle_dc_nodes(DcId(0), 4);
            assert_eq!(dc.nodes[n].topology.nodes(DcId(0)), 4);
            assert_eq!(dc.nodes[n].topology.placed_nodes(), 3, "node {n} keeps placing over its first three");
            let expected = dc.nodes[n].stabilizer().map(Stabilizer::expected_nodes);
            assert_eq!(expected, Some(4), "node {n}'s stabilizer waits for node 3's coordinators too");
        }
        dc.run(1_500_000);
    }

    /// Leadership spreads over a DC that grew: with every replica where it started, each partition's home node
    /// leads it; as replicas move off their home nodes onto the new node, each such partition's lead goes to a
    /// node that leads few (the new one first), the others' leaders stay, and every node computes the same.
    #[test]
    fn leadership_spreads_onto_a_node_that_joined_as_replicas_move_there() {
        let mut dc = Dc::with_nodes(6, 3);
        dc.run(1_000_000);
        join_fourth(&mut dc, 6);
        let leaders = |dc: &Dc| {
            let mut l: Vec<Option<NodeIndex>> = vec![None; 6];
            for (p, _, _, leader) in dc.nodes[3].placements() {
                l[p.0 as usize] = leader;
            }
            l
        };
        assert_eq!(dc.nodes[0].preferred_leaders(), vec![0, 1, 2, 0, 1, 2], "the home nodes");
        assert_eq!(leaders(&dc), vec![Some(0), Some(1), Some(2), Some(0), Some(1), Some(2)]);
        for (p, from) in [(0, 0), (1, 1), (2, 2)] {
            dc.nodes[1].move_replica(dc.now, PartitionId(p), from, 3);
            dc.run(4_000_000);
        }
        let handed: u64 = dc.nodes.iter().flat_map(|n| n.replicas()).map(|r| r.stats().handovers).sum();
        // Partition 0 goes to node 3 (it leads none); then 1 and 2 to nodes 0 and 1, which lead one each.
        let spread = vec![3, 0, 1, 0, 1, 2];
        for n in 0..4 {
            assert_eq!(dc.nodes[n].preferred_leaders(), spread, "node {n}'s view");
        }
        dc.run(2_000_000);
        let expected: Vec<Option<NodeIndex>> = spread.iter().map(|n| Some(*n)).collect();
        assert_eq!(leaders(&dc), expected, "after {handed} handovers");
    }

    /// A node joins a running DC of three: before the others hear that the DC grew, nothing they send reaches it;
    /// after, their leaders' notices, stabilizer reports and requests to join do, its coordinator commits, and a
    /// replica moves onto it. The groups keep their first voters (the DC places over the nodes it had).
    #[test]
    fn a_node_joins_a_running_dc_and_a_replica_moves_onto_it() {
        let mut dc = Dc::with_nodes(2, 3);
        dc.run(1_000_000);
        join_fourth(&mut dc, 2);
        assert_eq!(dc.nodes[3].placements().count(), 2, "node 3 hears where every partition lives");
        let p = PartitionId(1);
        let increment = |k: &str| ClientRequest::StaticUpdate {
            clock: None,
            updates: vec![(ObjectId::new(k, "b", CrdtType::CounterPn), Op::Increment(1))],
        };
        dc.nodes[3].handle_client(dc.now, ClientId(1), RequestId(1), increment("a"));
        dc.run(300_000);
        assert!(
            matches!(dc.replies.pop().map(|r| r.result), Some(Ok(ClientResponse::Committed { .. }))),
            "node 3's coordinator commits"
        );
        dc.nodes[0].move_replica(dc.now, p, 2, 3);
        dc.run(4_000_000);
        let nodes_of = |m: &Membership| m.members().iter().map(|id| replica_node(*id)).collect::<Vec<_>>();
        let (_, membership) = dc.nodes[1].placement(p).expect("announced");
        let mut voters = nodes_of(membership);
        voters.sort();
        assert_eq!(voters, vec![0, 1, 3], "{membership:?}");
        assert!(dc.nodes[3].replicas().any(|r| r.id() == p && r.group().membership().is_voter(r.group().id())));
        assert!(dc.nodes[2].replicas().all(|r| r.id() != p), "node 2 still runs its moved replica");
        dc.nodes[0].handle_client(dc.now, ClientId(2), RequestId(2), increment("b"));
        dc.run(300_000);
        assert!(matches!(dc.replies.pop().map(|r| r.result), Some(Ok(ClientResponse::Committed { .. }))));
    }

    /// A move whose new replica cannot join (its requests are lost) is replaced by the operator's next move to the
    /// same node: the stuck replica, never a voter, is dropped, and the next one (its next incarnation) joins in
    /// place of the node the latest move names.
    #[test]
    fn a_later_move_to_the_same_node_replaces_a_replica_that_never_joined() {
        let mut dc = Dc::with_nodes(2, 4);
        dc.run(1_000_000);
        let p = PartitionId(0);
        dc.lose = |from, e| from == 3 && matches!(e.msg, Message::Replica(ReplicaMessage::Join { .. }));
        dc.nodes[0].move_replica(dc.now, p, 1, 3);
        dc.run(2_000_000);
        let stuck = dc.nodes[3].replicas().find(|r| r.id() == p).expect("node 3 runs a replica").group().id();
        assert_eq!(crate::replica::replica_incarnation(stuck), 1);
        let member = |r: &Replica| r.group().membership().contains(r.group().id());
        assert!(!dc.nodes[3].replicas().any(|r| r.id() == p && member(r)), "it joined although its requests are lost");
        dc.lose = |_, _| false;
        dc.nodes[0].move_replica(dc.now, p, 2, 3);
        dc.run(3_000_000);
        let (_, membership) = dc.nodes[0].placement(p).expect("announced");
        let nodes: Vec<NodeIndex> = membership.voters.iter().map(|id| replica_node(*id)).collect();
        assert_eq!(nodes, vec![0, 1, 3], "{membership:?}");
        let joined = dc.nodes[3].replicas().find(|r| r.id() == p).expect("node 3 runs a replica").group().id();
        assert_eq!(crate::replica::replica_incarnation(joined), 2);
        assert!(membership.voters.contains(&joined));
        let left = dc.hosting.iter().any(|(n, q, h)| *n == 3 && *q == p && *h == Hosting::Left { incarnation: 1 });
        assert!(left, "{:?}", dc.hosting);
        assert!(dc.nodes[2].replicas().all(|r| r.id() != p), "node 2 still runs the moved replica");
    }
}
