//! A shard: one tokio task that drives one [`Node`] (a part of the node's partitions and one coordinator). It
//! carries the node's outputs: messages to other shards through their inboxes, to other nodes and DCs through the
//! [`Wan`], records to the log, replies to the connections that wait for them. Every routing decision is the
//! node's.
//!
//! The inbox is bounded ([`Routes`] says who waits for room and what is dropped).

use crate::clock::WallClock;
use crate::routes::{Routes, ShardInput};
use crate::status::ShardStatus;
use crate::storage::LogSink;
use crate::wan::Wan;
use causet_core::coordinator::{ClientResponse, TxError};
use causet_core::node::{Destination, Node, NodeOutput};
use causet_core::partition::Checkpoint;
use causet_core::record::{LogRecord, Lsn};
use causet_core::{ClientId, PartitionId, RequestId};
use causet_storage::Durable;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// What every shard of a node shares.
#[derive(Clone)]
pub struct ShardEnv {
    /// Where the node's shards are.
    pub routes: Routes,
    /// Links to other nodes and DCs.
    pub wan: Wan,
    /// The node's clock.
    pub clock: Arc<WallClock>,
    /// The log.
    pub log: Arc<dyn LogSink>,
    /// How often partitions checkpoint.
    pub checkpoint_interval: Duration,
    /// How long a shutdown waits for clients still waiting for an answer.
    pub shutdown_grace: Duration,
}

/// A write for the log, held until the shard hands its batch over.
enum LogWrite {
    Append(PartitionId, Lsn, LogRecord),
    Checkpoint(PartitionId, Box<Checkpoint>),
    Group(
        PartitionId,
        u64,
        Option<Box<causet_core::replica::InstalledSnapshot>>,
        Vec<causet_core::group::Entry>,
        Option<causet_core::group::HardState>,
    ),
    Hosting(PartitionId, causet_core::replica::Hosting),
    /// A record of this shard's coordinator write-buffer log.
    Buffer(u32, Lsn, Box<causet_core::coordinator::BufferRecord>),
    /// The write-buffer log's records before this position go.
    TruncateBuffer(u32, Lsn),
}

/// One shard's node and driver state.
pub struct Shard {
    env: ShardEnv,
    node: Node,
    /// Writes of the current pass, handed to the log after it ([`Shard::write_log`]).
    unwritten: Vec<LogWrite>,
    pending: HashMap<(ClientId, RequestId), oneshot::Sender<Result<ClientResponse, TxError>>>,
    next_request: u64,
}

impl Shard {
    /// A shard driving `node`.
    pub fn new(env: ShardEnv, node: Node) -> Self {
        let mut shard = Self { env, node, unwritten: Vec::new(), pending: HashMap::new(), next_request: 0 };
        shard.carry_out();
        shard
    }

    /// This shard's number, as the store keys its write-buffer log.
    fn shard_number(&self) -> u32 {
        u32::try_from(self.node.shard()).expect("at most 256 shards")
    }

    /// Runs until the inbox closes.
    pub async fn run(mut self, mut inbox: mpsc::Receiver<ShardInput>) {
        let checkpoint_interval = self.env.checkpoint_interval;
        let mut next_checkpoint = tokio::time::Instant::now() + checkpoint_interval;
        let mut shutdown: Option<(oneshot::Sender<()>, tokio::time::Instant)> = None;
        let mut ran_due = false;
        loop {
            self.write_log().await;
            let timeout = self.node.poll_timeout().unwrap_or(u64::MAX);
            // A timer already due runs at once: tokio rounds a deadline up to its next millisecond tick, which would
            // add up to a millisecond to every step that a node schedules for "now" (a pump, a flush).
            // At most once in a row, so that a timer the node keeps due cannot spin this loop.
            let due = timeout <= self.env.clock.now_us() && !ran_due;
            ran_due = false;
            let deadline = self.env.clock.instant_at(timeout);
            tokio::select! {
                () = std::future::ready(()), if due => {
                    ran_due = true;
                    self.node.handle_timeout(self.env.clock.now_us());
                }
                input = inbox.recv() => {
                    let Some(input) = input else { break };
                    // Take what else is queued before carrying out: one pass routes a whole batch.
                    for input in std::iter::once(input).chain(std::iter::from_fn(|| inbox.try_recv().ok()).take(256)) {
                        if let Some(done) = self.handle(input) {
                            shutdown = Some((done, tokio::time::Instant::now() + self.env.shutdown_grace));
                        }
                    }
                }
                _ = tokio::time::sleep_until(deadline) => self.node.handle_timeout(self.env.clock.now_us()),
                _ = tokio::time::sleep_until(next_checkpoint) => {
                    next_checkpoint = tokio::time::Instant::now() + checkpoint_interval;
                    self.checkpoint();
                }
            }
            self.carry_out();
            if let Some((_, until)) = &shutdown {
                if self.pending.is_empty() || tokio::time::Instant::now() >= *until {
                    self.checkpoint();
                    self.write_log().await;
                    let (done, _) = shutdown.take().expect("checked");
                    let _ = done.send(());
                    // Keep serving durability notifications and messages until the node drops the inboxes.
                }
            }
        }
    }

    fn handle(&mut self, input: ShardInput) -> Option<oneshot::Sender<()>> {
        let now = self.env.clock.now_us();
        match input {
            ShardInput::Client { client, body, reply } => {
                let request = RequestId(self.next_request);
                self.next_request += 1;
                self.pending.insert((client, request), reply);
                // Whatever another shard acknowledged before this request arrived.
                self.node.handle_session_floor(self.env.routes.session_floor());
                self.node.handle_client(now, client, request, body);
            }
            ShardInput::Disconnect(client) => self.node.handle_disconnect(now, client),
            ShardInput::Message(envelope) => self.node.handle_message(now, envelope),
            ShardInput::Durable(positions) => {
                for (p, durable) in positions {
                    match durable {
                        Durable::Log(lsn) => self.node.handle_persisted(now, p, lsn),
                        Durable::Group(ready) => self.node.handle_group_written(now, p, ready),
                        // (The id of a write-buffer log's report is the shard's.)
                        Durable::Buffer(lsn) => self.node.handle_buffer_persisted(now, lsn),
                    }
                }
            }
            ShardInput::Leader(p, node, term, membership, conf_index) => {
                self.node.handle_leader(now, p, node, term, membership, conf_index)
            }
            ShardInput::MoveReplica { partition, from, to } => self.node.move_replica(now, partition, from, to),
            ShardInput::RetireNode(node) => self.node.retire_node(now, node),
            ShardInput::LogRead(p, records) => self.node.handle_log_read(now, p, records),
            ShardInput::CheckpointLoaded(p, checkpoint) => {
                self.node.handle_checkpoint_loaded(now, p, checkpoint.map(|c| *c))
            }
            ShardInput::DcNodes(dc, nodes) => self.node.handle_dc_nodes(dc, nodes),
            ShardInput::Status(reply) => {
                let _ = reply.send(ShardStatus::of(&self.node));
            }
            ShardInput::Export { partition, snapshot, after, limit, reply } => {
                let _ = reply.send(self.node.export(partition, &snapshot, after.as_ref(), limit));
            }
            ShardInput::Shutdown(done) => return Some(done),
        }
        None
    }

    fn checkpoint(&mut self) {
        for (p, checkpoint) in self.node.take_checkpoints(self.env.clock.now_us()) {
            self.unwritten.push(LogWrite::Checkpoint(p, Box::new(checkpoint)));
        }
    }

    /// Hands the pass's writes to the log. When the log's queue has no room (the disk is behind), the writes wait
    /// on a blocking thread, never on a runtime worker, and this shard takes no input until they are queued: the
    /// back-pressure reaches whoever fills its inbox.
    async fn write_log(&mut self) {
        if self.unwritten.is_empty() {
            return;
        }
        let writes = std::mem::take(&mut self.unwritten);
        if self.env.log.has_room(writes.len()) {
            write_all(&*self.env.log, writes);
        } else {
            let log = self.env.log.clone();
            // A failed join means the blocking thread panicked; the log reports its own failures.
            let _ = tokio::task::spawn_blocking(move || write_all(&*log, writes)).await;
        }
    }

    /// Reads a partition's log on a blocking thread and hands the records back through the inbox. The node asks
    /// for one read at a time per partition, so these are few.
    fn read_log(&self, partition: PartitionId, after: Lsn) {
        let (log, routes, shard) = (self.env.log.clone(), self.env.routes.clone(), self.node.shard());
        tokio::spawn(async move {
            let read = tokio::task::spawn_blocking(move || log.read_log(partition, after)).await;
            // A failed join means the blocking thread panicked: the read ends with nothing, and the node reads
            // again when it next needs to.
            routes.send(shard, ShardInput::LogRead(partition, read.unwrap_or_default())).await;
        });
    }

    /// Reads a replica's complete checkpoint on a blocking thread and hands it back through the inbox. A read that
    /// fails is logged and tried again a second later: the replica waits for it (it neither applies nor serves
    /// while it rebuilds, or cannot send a follower its snapshot).
    fn load_checkpoint(&self, partition: PartitionId) {
        let (log, routes, shard) = (self.env.log.clone(), self.env.routes.clone(), self.node.shard());
        tokio::spawn(async move {
            loop {
                let log = log.clone();
                match tokio::task::spawn_blocking(move || log.load_checkpoint(partition)).await {
                    Ok(Ok(checkpoint)) => {
                        let loaded = ShardInput::CheckpointLoaded(partition, checkpoint.map(Box::new));
                        return routes.send(shard, loaded).await;
                    }
                    Ok(Err(e)) => tracing::error!(partition = partition.0, error = %e, "loading a checkpoint failed"),
                    Err(e) => tracing::error!(partition = partition.0, error = %e, "loading a checkpoint panicked"),
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
    }

    /// Carries out the node's outputs, in order.
    fn carry_out(&mut self) {
        while let Some(out) = self.node.poll_output() {
            match out {
                NodeOutput::Transmit(Destination::Shard(s), e) => self.env.routes.try_send(s, ShardInput::Message(e)),
                NodeOutput::Transmit(Destination::Node(n), e) => self.env.wan.send_member(n, e),
                NodeOutput::Transmit(Destination::Dc(dc, n), e) => self.env.wan.send_to(dc, n, e),
                NodeOutput::Persist { partition, lsn, record } => {
                    self.unwritten.push(LogWrite::Append(partition, lsn, record))
                }
                NodeOutput::ReadLog { partition, after } => self.read_log(partition, after),
                NodeOutput::PersistBuffer { lsn, record } => {
                    self.unwritten.push(LogWrite::Buffer(self.shard_number(), lsn, Box::new(record)))
                }
                NodeOutput::TruncateBuffer { before } => {
                    self.unwritten.push(LogWrite::TruncateBuffer(self.shard_number(), before))
                }
                NodeOutput::Reply(reply) => {
                    if let Some(waiting) = self.pending.remove(&(reply.client, reply.request)) {
                        let _ = waiting.send(reply.result);
                    }
                }
                // Before the reply that follows: a client told of this commit reaches any shard after it.
                NodeOutput::SessionFloor(at) => self.env.routes.raise_session_floor(at),
                NodeOutput::GroupWrite { partition, ready, snapshot, entries, hard_state } => {
                    self.unwritten.push(LogWrite::Group(partition, ready, snapshot, entries, hard_state))
                }
                NodeOutput::Checkpoint { partition, checkpoint } => {
                    self.unwritten.push(LogWrite::Checkpoint(partition, checkpoint))
                }
                NodeOutput::LoadCheckpoint { partition } => self.load_checkpoint(partition),
                NodeOutput::Leader { partition, node, term, membership, conf_index } => {
                    self.env.routes.announce_leader(self.node.shard(), partition, node, term, membership, conf_index)
                }
                NodeOutput::Hosting { partition, hosting } => {
                    tracing::info!(partition = partition.0, ?hosting, "this node's replica of the partition changed");
                    self.unwritten.push(LogWrite::Hosting(partition, hosting))
                }
            }
        }
    }
}

fn write_all(log: &dyn LogSink, writes: Vec<LogWrite>) {
    for w in writes {
        match w {
            LogWrite::Append(p, lsn, record) => log.append(p, lsn, record),
            LogWrite::Checkpoint(p, checkpoint) => log.checkpoint(p, *checkpoint),
            LogWrite::Group(p, ready, snapshot, entries, hard_state) => {
                log.write_group(p, ready, snapshot, entries, hard_state)
            }
            LogWrite::Hosting(p, hosting) => log.set_hosting(p, hosting),
            LogWrite::Buffer(shard, lsn, record) => log.append_buffer(shard, lsn, &record),
            LogWrite::TruncateBuffer(shard, before) => log.truncate_buffer(shard, before),
        }
    }
}
