//! The transaction coordinator (Cure Alg. 1): interactive and static transactions, snapshot assignment, effect
//! generation against the transaction's snapshot, and two-phase commit over the touched partitions.
//!
//! Inputs: [`Coordinator::handle_client`], [`Coordinator::handle_message`], [`Coordinator::handle_timeout`].
//! Outputs: [`Coordinator::poll_output`] and [`Coordinator::poll_timeout`].
//!
//! A client reply for a committed update transaction leaves only after every touched partition has made the
//! commit durable, so an acknowledged commit survives any crash.

mod durable;
mod handover;
mod nearest;
mod refresh;
mod remote;
mod tokens;

pub use durable::BufferRecord;
pub use handover::HandoverStats;
pub use tokens::{BufferToken, ClientClock};

use crate::buffer::TxView;
use crate::bugs::{self, Bug};
use crate::cache::{Cache, CacheStats, Window};
use crate::message::{Fetched, RemoteError};
use crate::record::Lsn;
use crate::topology::Topology;
use crate::{
    Address, ClientId, Clock, Config, CoordinatorId, DetHashMap, Envelope, Message, ObjectId, PartitionId, RequestId,
    Timestamp, TxId, VectorClock,
};
use causet_crdt::{requires_state, Crdt, CrdtError, Effect, EffectCtx, Op, Stamp, Value};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Where a transaction's reads go (NuKV's per-transaction choice; the transaction is TCC either way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReadFrom {
    /// The default: the coordinator's cache when it has one ([`ReadFrom::Cache`]), else each partition's leader
    /// at a snapshot as fresh as the coordinator's clock.
    #[default]
    Leader,
    /// The replica on the coordinator's node, where a partition has one, at the DC's stable snapshot (or the
    /// client's clock, if later): no network hop and no load on the leader, for a snapshot a little older. A
    /// replica serves only a snapshot whose every transaction it has applied; otherwise the read goes on to the
    /// leader.
    Nearest,
    /// The coordinator's lease cache (HoneyPot; docs/design/honeypot.md), at a snapshot between the client's clock
    /// and the DC's stable snapshot, possibly up to a lease old; each partition's leader where the coordinator has
    /// no cache.
    Cache,
    /// Each partition's leader at a snapshot as fresh as the coordinator's clock, even where the coordinator has
    /// a cache.
    Fresh,
}

/// A client's request to the coordinator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ClientRequest {
    /// Start an interactive transaction after the client's causal clock, if any.
    Start {
        /// The client's causal clock: the largest commit or snapshot vector it has seen.
        clock: Option<ClientClock>,
        /// Where its reads go.
        reads: ReadFrom,
    },
    /// Read objects in an interactive transaction.
    Read {
        /// The transaction.
        tx: TxId,
        /// The objects.
        objects: Vec<ObjectId>,
    },
    /// Update objects in an interactive transaction.
    Update {
        /// The transaction.
        tx: TxId,
        /// The objects and operations, applied in order.
        updates: Vec<(ObjectId, Op)>,
    },
    /// Commit an interactive transaction.
    Commit {
        /// The transaction.
        tx: TxId,
    },
    /// Abort an interactive transaction.
    Abort {
        /// The transaction.
        tx: TxId,
    },
    /// Read objects in a transaction of its own.
    StaticRead {
        /// The client's causal clock.
        clock: Option<ClientClock>,
        /// The objects.
        objects: Vec<ObjectId>,
        /// Where the reads go.
        reads: ReadFrom,
    },
    /// Update objects in a transaction of its own.
    StaticUpdate {
        /// The client's causal clock.
        clock: Option<ClientClock>,
        /// The objects and operations, applied in order.
        updates: Vec<(ObjectId, Op)>,
    },
}

/// A successful answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ClientResponse {
    /// The interactive transaction started.
    Started {
        /// Its id (the client's transaction descriptor).
        tx: TxId,
        /// Its snapshot vector.
        snapshot: VectorClock,
        /// The write buffer the snapshot depends on (see [`ClientClock`]); not in AntidoteDB's descriptor.
        token: Option<BufferToken>,
    },
    /// The values read, in request order.
    Values(Vec<Value>),
    /// The updates were buffered.
    Updated,
    /// The transaction committed; the client's new causal clock.
    Committed {
        /// The commit vector (the snapshot vector for a read-only transaction).
        commit: VectorClock,
        /// The write buffer the client depends on, if the commit vector does not cover it (see [`ClientClock`]).
        token: Option<BufferToken>,
    },
    /// The transaction was aborted at the client's request.
    Aborted,
    /// A static read's values and the clock to carry on with.
    StaticValues {
        /// The values, in request order.
        values: Vec<Value>,
        /// The snapshot vector read.
        commit: VectorClock,
        /// The write buffer the client depends on, if the snapshot does not cover it (see [`ClientClock`]).
        token: Option<BufferToken>,
    },
}

/// Why a request failed. [`TxError::code`] maps it onto AntidoteDB's error codes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub enum TxError {
    /// No such transaction (never started here, or forgotten long ago).
    #[error("unknown transaction {0}")]
    UnknownTransaction(TxId),
    /// The transaction has already committed.
    #[error("transaction {0} has already committed")]
    AlreadyCommitted(TxId),
    /// The transaction has already aborted.
    #[error("transaction {tx} has already aborted: {reason}")]
    AlreadyAborted {
        /// The transaction.
        tx: TxId,
        /// Why it aborted.
        reason: String,
    },
    /// Another request of the transaction is still being served.
    #[error("transaction {0} is busy with another request")]
    Busy(TxId),
    /// The coordinator keeps too many open transactions.
    #[error("too many open transactions ({0}); retry later")]
    TooManyTransactions(usize),
    /// The client's clock is malformed or impossible.
    #[error("invalid clock: {0}")]
    InvalidClock(String),
    /// The request timed out; the transaction is aborted.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The transaction aborted (for example, certification failed, or a partition refused the prepare).
    #[error("transaction aborted: {0}")]
    Aborted(String),
    /// An operation did not fit its object, or a bounded counter lacks rights; the transaction is unchanged.
    #[error("{0}")]
    Crdt(CrdtError),
    /// The operation cannot run at this DC because of where its object is placed (a bounded counter of a bucket
    /// placed by rings, at a DC that does not hold it); the transaction is unchanged.
    #[error("{0}")]
    Misplaced(String),
}

impl TxError {
    /// AntidoteDB's error code: 0 unknown, 1 timeout, 2 no_permissions, 3 aborted.
    pub fn code(&self) -> u32 {
        match self {
            TxError::Timeout(_) => 1,
            TxError::Crdt(CrdtError::NoPermissions { .. }) => 2,
            TxError::Aborted(_) | TxError::AlreadyAborted { .. } => 3,
            _ => 0,
        }
    }
}

/// A reply to a client request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientReply {
    /// The client.
    pub client: ClientId,
    /// The request answered.
    pub request: RequestId,
    /// The answer.
    pub result: Result<ClientResponse, TxError>,
}

/// What a coordinator asks its driver to do.
#[derive(Clone, Debug, PartialEq)]
pub enum CoordinatorOutput {
    /// Deliver a message to another state machine.
    Send(Envelope),
    /// Answer a client.
    Reply(ClientReply),
    /// Append a record to this coordinator's write-buffer log; call [`Coordinator::handle_persisted`] once it is
    /// durable (records become durable in order).
    Persist {
        /// The record's position: 1, 2, 3, … over the log's life (truncation keeps the numbering).
        lsn: Lsn,
        /// The record.
        record: BufferRecord,
    },
    /// Delete the write-buffer log's records before this position (every record logged so far is durable).
    Truncate {
        /// The first record kept.
        before: Lsn,
    },
}

/// What the transaction does once the objects it waits for arrive.
#[derive(Clone, Debug)]
enum Continuation {
    Read(Vec<ObjectId>),
    Update(Vec<(ObjectId, Op)>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Interactive,
    /// A static transaction: commit as soon as the read or update is done.
    Static,
    /// The handover of a component of buffered writes to its owners (no client waits for it).
    Handover,
}

#[derive(Clone, Debug)]
enum Phase {
    /// Waiting for the client.
    Idle { deadline_us: u64 },
    /// Fetching object states from partitions.
    Fetching {
        request: RequestId,
        then: Continuation,
        outstanding: BTreeSet<u64>,
        deadline_us: u64,
        /// When to send the reads of this DC's partitions still unanswered again, and how often that was done.
        resend_us: u64,
        resends: u32,
    },
    /// Two-phase commit, first phase.
    Preparing {
        request: RequestId,
        /// One participant, asked to prepare and commit at once.
        alone: bool,
        waiting: BTreeSet<PartitionId>,
        max_prepare: Timestamp,
        min_prepare: Timestamp,
        deadline_us: u64,
        /// When to send the prepares still unanswered again, and how often that was done.
        resend_us: u64,
        resends: u32,
    },
    /// Decided to commit; waiting for every partition to make it durable.
    Committing { request: RequestId, commit: VectorClock, unacked: BTreeSet<PartitionId>, retry_us: u64, resends: u32 },
    /// Decided to abort; waiting for prepared partitions to forget it.
    Aborting { unacked: BTreeSet<PartitionId>, retry_us: u64, resends: u32 },
    /// Waiting for a round of handovers of buffered writes before it commits.
    Flushing { request: RequestId, after_round: u64, deadline_us: u64 },
}

#[derive(Clone, Debug)]
struct Tx {
    client: ClientId,
    kind: Kind,
    snapshot: VectorClock,
    ctx: EffectCtx,
    phase: Phase,
    /// Object states at the snapshot with the transaction's own effects applied, for the objects read so far.
    cache: BTreeMap<ObjectId, Crdt>,
    /// The transaction's effects, in program order.
    writes: Vec<(ObjectId, Effect)>,
    /// Where its reads go.
    reads: ReadFrom,
    /// With the cache: the snapshots the transaction may still read at. Its reads are exact at each of them.
    window: Option<Window>,
    /// With the write buffer: the buffered effects it reads (those added before it started).
    view: Option<TxView>,
    /// It waited for the buffer to be handed over (and may now commit at the owners).
    flushed: bool,
}

#[derive(Clone, Debug)]
enum Finished {
    Committed,
    Aborted(String),
}

#[derive(Clone, Debug)]
struct PendingStart {
    client: ClientId,
    request: RequestId,
    clock: VectorClock,
    then: Option<StaticOp>,
    reads: ReadFrom,
    deadline_us: u64,
    /// It starts once this many rounds of handovers have ended (what was buffered before it is at the owners).
    after_round: u64,
    /// Its questions to the write buffers its client's clock names, until answered (`tokens`).
    questions: Vec<tokens::Question>,
}

#[derive(Clone, Debug)]
enum StaticOp {
    Read(Vec<ObjectId>),
    Update(Vec<(ObjectId, Op)>),
}

/// The wait before resending a decision for the `resends`-th time: the retry interval, doubled at each resend up
/// to 32 times it, so that a slow or congested link is not flooded with copies (simulator seed 862: resends every
/// retry interval kept a congested link congested, and handovers never got through).
fn backoff(retry_interval_us: u64, resends: u32) -> u64 {
    retry_interval_us.max(1) << resends.min(5)
}

/// A prepare unanswered for this many retry intervals (1 s by default) is sent again, and then again after twice as
/// long each time (`backoff`). A participant answers a prepare within milliseconds unless the prepare or its
/// answer was lost (a link between nodes broke, a node restarted); meanwhile the participants that did prepare
/// hold their pvc, and with it the DC's stable snapshot, back. Waiting for the transaction's timeout instead stalled
/// a DC for as long as it: 10 s, and up to 80 s for a handover that had failed before (`causet check` seed 12 with
/// buffered writes). Sending a prepare again is safe: a partition answers one it holds with the same answer, and
/// one of a transaction that ended there with its commit or a refusal. Reads of this DC's partitions left
/// unanswered are sent again on the same schedule (a read has no effect; the first answer wins, later ones find
/// the fetch gone): before, a read lost with a broken link waited for the transaction's timeout.
pub const PREPARE_RESEND_INTERVALS: u64 = 10;

/// The wait before sending unanswered prepares, or reads, again for the `resends`-th time.
fn resend_after(config: &Config, resends: u32) -> u64 {
    backoff(PREPARE_RESEND_INTERVALS * config.retry_interval_us, resends)
}

/// How many finished transactions the coordinator remembers, to answer late requests precisely.
const FINISHED_MEMORY: usize = 10_000;

/// A transaction coordinator of one DC.
#[derive(Debug)]
pub struct Coordinator {
    id: CoordinatorId,
    config: Config,
    /// Where objects live: the partition of each object the transaction touches.
    topology: Topology,
    clock: Clock,
    /// The DC's stable snapshot as last heard from the stabilizer.
    stable: VectorClock,
    /// Whether the stabilizer spoke yet. Until it does, `stable` is zero: with several DCs, a transaction begun
    /// then would read other DCs' entries at zero, below what a partition restored from a checkpoint has
    /// garbage-collected (its read would fail as too old), so transactions wait for the first word. (One DC has no
    /// such entries, and starts at once.)
    heard_stable: bool,
    next_seq: u64,
    next_fetch: u64,
    txs: BTreeMap<TxId, Tx>,
    /// Which fetch request belongs to which transaction, and for the cache, the snapshot it fetches at.
    fetches: DetHashMap<u64, (TxId, Vec<ObjectId>, Option<VectorClock>)>,
    /// The lease cache, if configured (HoneyPot).
    cache: Option<Cache>,
    /// The write buffer and its handovers, if the cache buffers writes.
    buffering: Option<handover::Buffering>,
    finished: DetHashMap<TxId, Finished>,
    finished_order: VecDeque<TxId>,
    starts: Vec<PendingStart>,
    outputs: VecDeque<CoordinatorOutput>,
    next_report_us: u64,
    /// Requests sent again to a partition's new leader.
    resends: u64,
    /// Prepares sent again because neither they nor their answers arrived in time.
    prepare_resends: u64,
    /// Reads of this DC's partitions sent again because neither they nor their answers arrived in time.
    read_resends: u64,
    /// Starts that asked another coordinator for its buffer's handover (`tokens`).
    moves: u64,
    /// Reads sent to another DC: of objects this DC does not hold (partial replication).
    remote_reads: u64,
    /// Reads asked of another ring's holder because the first did not answer in time, or refused (`remote`).
    ring_failovers: u64,
    /// Reads waiting at a holder at another DC, by fetch, to try another ring's if it does not answer (`remote`).
    away: BTreeMap<u64, remote::AwayRead>,
    /// Round trips of reads to other DCs' holders, which choose the ring a read goes to (`nearest`).
    latencies: nearest::Latencies,
    /// Background fetches of cached states that writes made stale, by request (`refresh`).
    refreshing: BTreeMap<u64, refresh::Refresh>,
    /// The background fetch in flight of each object in one (`refresh`).
    refresh_of: BTreeMap<ObjectId, u64>,
}

impl Coordinator {
    /// A coordinator with no transactions. `now_us` is the local physical clock.
    pub fn new(id: CoordinatorId, config: Config, now_us: u64) -> Self {
        let dcs = config.vector_len();
        Self {
            id,
            // Certification could refuse a handover of writes already acknowledged: the two do not go together
            // (the server's configuration refuses both at once).
            buffering: (config.cache.as_ref())
                .filter(|c| c.buffer_writes && !config.certify_writes)
                .map(handover::Buffering::new),
            topology: Topology::of_config(&config),
            clock: Clock::new(config.clock),
            stable: VectorClock::zero(dcs),
            heard_stable: config.dcs == 1,
            next_seq: 0,
            next_fetch: 0,
            txs: BTreeMap::new(),
            fetches: DetHashMap::default(),
            cache: config.cache.clone().map(|mut c| {
                if config.placement.partial() {
                    // Under partial replication a hit saves a round trip to another DC, not one inside this DC: the
                    // cache pays at any share of hits.
                    c.bypass_below_percent = 0;
                } else {
                    // Every object is held here: fetching one again saves no round trip to another DC.
                    c.refresh = false;
                }
                let mut cache = Cache::new(c, config.vector_len());
                cache.extend_blindly = bugs::has(&config, Bug::CacheExtendsOverWrites);
                cache
            }),
            finished: DetHashMap::default(),
            finished_order: VecDeque::new(),
            starts: Vec::new(),
            outputs: VecDeque::new(),
            next_report_us: now_us,
            resends: 0,
            prepare_resends: 0,
            read_resends: 0,
            moves: 0,
            remote_reads: 0,
            ring_failovers: 0,
            away: BTreeMap::new(),
            latencies: nearest::Latencies::new(usize::from(config.dcs)),
            refreshing: BTreeMap::new(),
            refresh_of: BTreeMap::new(),
            config,
        }
    }

    /// This coordinator's id.
    pub fn id(&self) -> CoordinatorId {
        self.id
    }

    /// Transactions open (interactive ones waiting for the client included).
    pub fn open_transactions(&self) -> usize {
        self.txs.len()
    }

    /// Open transactions that go on without their client (reading, preparing, committing, aborting, flushing):
    /// one its client gave up on may still commit. (An idle one waits for its client's next request.)
    pub fn progressing_transactions(&self) -> usize {
        self.txs.values().filter(|t| !matches!(t.phase, Phase::Idle { .. })).count()
    }

    /// The stable snapshot as last heard.
    pub fn stable_snapshot(&self) -> &VectorClock {
        &self.stable
    }

    /// The lease cache's counters, if it has one.
    pub fn cache_stats(&self) -> Option<CacheStats> {
        self.cache.as_ref().map(Cache::stats)
    }

    /// Requests this coordinator sent again to a partition's new leader ([`Coordinator::handle_leader_change`]).
    pub fn resends(&self) -> u64 {
        self.resends
    }

    /// Prepares this coordinator sent again because they, or their answers, did not arrive in time (a link
    /// between nodes broke, a node restarted): see [`PREPARE_RESEND_INTERVALS`].
    pub fn prepare_resends(&self) -> u64 {
        self.prepare_resends
    }

    /// Reads of this DC's partitions this coordinator sent again because they, or their answers, did not arrive in
    /// time: see [`PREPARE_RESEND_INTERVALS`].
    pub fn read_resends(&self) -> u64 {
        self.read_resends
    }

    /// Reads sent to another DC, of objects this DC does not hold (partial replication), and how many of them
    /// were asked of another ring's holder too.
    pub fn remote_reads(&self) -> (u64, u64) {
        (self.remote_reads, self.ring_failovers)
    }

    /// Reads sent to other rings' holders only to measure them (reads from the nearest ring), and the smoothed
    /// round trip of this coordinator's reads to each DC, µs (`None`: never measured).
    pub fn ring_probes(&self) -> (u64, Vec<Option<u64>>) {
        (self.latencies.probes(), self.latencies.smoothed())
    }

    /// Hands over the next output, if any. Drain after every input.
    pub fn poll_output(&mut self) -> Option<CoordinatorOutput> {
        self.outputs.pop_front()
    }

    /// The local time at which [`Coordinator::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        let mut next = self.next_report_us;
        for tx in self.txs.values() {
            next = next.min(match &tx.phase {
                Phase::Idle { deadline_us } | Phase::Flushing { deadline_us, .. } => *deadline_us,
                Phase::Fetching { deadline_us, resend_us, .. } | Phase::Preparing { deadline_us, resend_us, .. } => {
                    (*deadline_us).min(*resend_us)
                }
                Phase::Committing { retry_us, .. } | Phase::Aborting { retry_us, .. } => *retry_us,
            });
        }
        for s in &self.starts {
            next = next.min(s.deadline_us);
        }
        if let Some(question) = self.next_question_us() {
            next = next.min(question);
        }
        if let Some(round) = self.buffering.as_ref().and_then(|b| b.next_round()) {
            next = next.min(round);
        }
        if let Some(failover) = self.next_failover_us().into_iter().chain(self.next_unjoin_us()).min() {
            next = next.min(failover);
        }
        Some(next)
    }

    /// A client request.
    pub fn handle_client(&mut self, now_us: u64, client: ClientId, request: RequestId, body: ClientRequest) {
        match body {
            ClientRequest::Start { clock, reads } => self.on_start(now_us, client, request, clock, None, reads),
            ClientRequest::StaticRead { clock, objects, reads } => {
                self.on_start(now_us, client, request, clock, Some(StaticOp::Read(objects)), reads)
            }
            ClientRequest::StaticUpdate { clock, updates } => {
                self.on_start(now_us, client, request, clock, Some(StaticOp::Update(updates)), ReadFrom::Leader)
            }
            ClientRequest::Read { tx, objects } => {
                if self.idle_tx(client, request, tx) {
                    self.run(now_us, tx, request, Continuation::Read(objects));
                }
            }
            ClientRequest::Update { tx, updates } => {
                if self.idle_tx(client, request, tx) {
                    self.run(now_us, tx, request, Continuation::Update(updates));
                }
            }
            ClientRequest::Commit { tx } => {
                if self.idle_tx(client, request, tx) {
                    self.commit(now_us, tx, request);
                }
            }
            ClientRequest::Abort { tx } => {
                if self.idle_tx(client, request, tx) {
                    self.txs.remove(&tx);
                    self.finish(tx, Finished::Aborted("aborted by the client".into()));
                    self.reply(client, request, Ok(ClientResponse::Aborted));
                }
            }
        }
    }

    /// The client went away: its interactive transactions waiting for it are aborted at once rather than at the
    /// idle timeout (AntidoteDB #348: abandoned transactions leaked coordinators). Transactions in their commit
    /// phase finish on their own.
    pub fn handle_disconnect(&mut self, client: ClientId) {
        let abandoned: Vec<TxId> = self
            .txs
            .iter()
            .filter(|(_, tx)| tx.client == client && matches!(tx.phase, Phase::Idle { .. }))
            .map(|(id, _)| *id)
            .collect();
        for id in abandoned {
            self.txs.remove(&id);
            self.finish(id, Finished::Aborted("the client disconnected".into()));
        }
        self.starts.retain(|s| s.client != client);
    }

    /// A message from a partition or the stabilizer.
    pub fn handle_message(&mut self, now_us: u64, from: Address, msg: Message) {
        match msg {
            Message::FlushBuffer { query } => return self.on_flush_asked(now_us, from, query),
            Message::BufferFlushed { query, handed } => return self.on_flushed(now_us, query, handed),
            _ => {}
        }
        let partition = match (from, &msg) {
            (Address::Partition(p), _) => p,
            // A holder at another DC answers a read of an object this DC does not hold.
            (Address::Peer(dc, p), Message::ReadReply { .. } | Message::Fetched { .. }) if dc != self.config.dc => {
                self.timed_away(now_us, dc, &msg);
                p
            }
            _ => {
                if let Message::Stable { stable, away, .. } = msg {
                    self.on_stable(now_us, stable, away);
                }
                return;
            }
        };
        match msg {
            Message::ReadReply { tx, request, result } => self.on_read_reply(now_us, tx, request, result),
            Message::Fetched { request, result, .. } if self.on_refreshed(now_us, request, &result) => {}
            Message::Fetched { tx, request, result } => self.on_fetched(now_us, tx, request, result),
            Message::Prepared { tx, prepare_time } => self.on_prepared(now_us, tx, partition, prepare_time),
            Message::PrepareRefused { tx, reason } => self.on_prepare_refused(now_us, tx, partition, reason),
            Message::CommitAck { tx } => self.on_commit_ack(now_us, tx, partition),
            Message::Committed { tx, commit } => self.on_committed_alone(tx, partition, commit),
            Message::AbortAck { tx } => self.on_abort_ack(tx, partition),
            Message::QueryOutcome { tx } => self.on_query(tx, partition),
            _ => {}
        }
    }

    /// Timers: give up on slow requests, abort idle transactions, resend decisions, report the oldest snapshot.
    pub fn handle_timeout(&mut self, now_us: u64) {
        if now_us >= self.next_report_us {
            self.next_report_us = now_us + self.config.stable_interval_us.max(1);
            // New transactions take their remote entries from the protocol's view of the stable snapshot (lower than
            // it under GentleRain): that is the floor of what this coordinator may still read.
            let mut oldest = self.config.protocol.rules().remote_snapshot(&self.stable, self.config.dc);
            for tx in self.txs.values() {
                // A cached transaction fetches at the top of its window, which may have narrowed below its
                // snapshot and below today's cache floor: hold collection at the window's bottom.
                oldest.merge_min(tx.window.as_ref().map_or(&tx.snapshot, |w| &w.lo));
            }
            // New cached transactions start at or above the cache floor: the owners keep what they may fetch.
            if let Some(floor) = self.cache.as_ref().and_then(Cache::floor) {
                oldest.merge_min(floor);
            }
            if let Some(b) = &mut self.buffering {
                let floor = self.cache.as_ref().and_then(Cache::floor);
                b.forget_retired(floor, self.txs.values().filter_map(|tx| tx.window.as_ref()));
            }
            self.send(Address::Stabilizer, Message::OldestSnapshot { snapshot: oldest });
        }
        let starts = std::mem::take(&mut self.starts);
        for s in starts {
            if now_us >= s.deadline_us {
                let why = if s.questions.is_empty() {
                    "the DC's stable snapshot did not reach the client's clock in time"
                } else {
                    "the coordinator holding writes this client saw in its buffer did not hand them over in time"
                };
                self.reply(s.client, s.request, Err(TxError::Timeout(why.into())));
            } else {
                self.starts.push(s);
            }
        }
        let due: Vec<TxId> =
            self.txs
                .iter()
                .filter(|(_, tx)| match &tx.phase {
                    Phase::Idle { deadline_us } | Phase::Flushing { deadline_us, .. } => now_us >= *deadline_us,
                    Phase::Fetching { deadline_us, resend_us, .. }
                    | Phase::Preparing { deadline_us, resend_us, .. } => now_us >= (*deadline_us).min(*resend_us),
                    Phase::Committing { retry_us, .. } | Phase::Aborting { retry_us, .. } => now_us >= *retry_us,
                })
                .map(|(id, _)| *id)
                .collect();
        for id in due {
            self.on_due(now_us, id);
        }
        self.ask_again(now_us);
        self.fail_over_reads(now_us);
        self.unjoin_late(now_us);
        self.forget_refreshes(now_us);
        self.start_round(now_us);
    }

    fn on_due(&mut self, now_us: u64, id: TxId) {
        let tx = self.txs.get_mut(&id).expect("due transactions are open");
        if let Phase::Preparing { waiting, deadline_us, resend_us, resends, .. } = &mut tx.phase {
            if now_us < *deadline_us {
                *resends += 1;
                *resend_us = now_us + resend_after(&self.config, *resends);
                let waiting = waiting.clone();
                self.prepare_resends += waiting.len() as u64;
                for p in waiting {
                    self.prepare_again(id, p);
                }
                return;
            }
        }
        if let Phase::Fetching { outstanding, deadline_us, resend_us, resends, .. } = &mut tx.phase {
            if now_us < *deadline_us {
                *resends += 1;
                *resend_us = now_us + resend_after(&self.config, *resends);
                let outstanding = outstanding.clone();
                return self.read_again(outstanding);
            }
        }
        match &mut tx.phase {
            Phase::Idle { .. } => {
                self.txs.remove(&id);
                self.finish(id, Finished::Aborted("idle for longer than the transaction timeout".into()));
            }
            Phase::Fetching { request, .. } => {
                let request = *request;
                self.time_out(id, request, "partitions did not answer the read in time");
            }
            Phase::Preparing { request, alone: true, .. } => {
                // The partition decides a single-partition commit: it may have committed. The outcome is unknown
                // and no abort is sent.
                let (client, request) = (tx.client, *request);
                self.txs.remove(&id);
                let reason = "the partition did not answer the commit in time: the outcome is unknown";
                self.reply(client, request, Err(TxError::Timeout(reason.into())));
            }
            Phase::Preparing { .. } if tx.kind == Kind::Handover => {
                self.abort_prepared(now_us, id);
                self.retry_handover(now_us, id);
            }
            Phase::Preparing { request, .. } => {
                let (client, request) = (tx.client, *request);
                let reason = "partitions did not answer the prepare in time";
                self.abort_prepared(now_us, id);
                self.reply(client, request, Err(TxError::Timeout(reason.into())));
            }
            Phase::Flushing { request, .. } => {
                let request = *request;
                self.time_out(id, request, "the buffered writes it depends on were not handed over in time");
            }
            Phase::Committing { commit, unacked, retry_us, resends, .. } => {
                *retry_us = now_us + backoff(self.config.retry_interval_us, *resends);
                *resends += 1;
                let (commit, unacked) = (commit.clone(), unacked.clone());
                for p in unacked {
                    self.send(Address::Partition(p), Message::Commit { tx: id, commit: commit.clone() });
                }
            }
            Phase::Aborting { unacked, retry_us, resends } => {
                *retry_us = now_us + backoff(self.config.retry_interval_us, *resends);
                *resends += 1;
                for p in unacked.clone() {
                    self.send(Address::Partition(p), Message::Abort { tx: id });
                }
            }
        }
    }

    /// Aborts an open transaction whose request timed out before it reached any partition's decision.
    fn time_out(&mut self, id: TxId, request: RequestId, reason: &str) {
        let tx = self.txs.remove(&id).expect("a transaction times out while open");
        self.finish(id, Finished::Aborted(reason.into()));
        self.reply(tx.client, request, Err(TxError::Timeout(reason.into())));
    }

    fn on_start(
        &mut self,
        now_us: u64,
        client: ClientId,
        request: RequestId,
        clock: Option<ClientClock>,
        then: Option<StaticOp>,
        reads: ReadFrom,
    ) {
        let ClientClock { vector: clock, tokens } =
            clock.unwrap_or_else(|| VectorClock::zero(self.config.vector_len()).into());
        if let Err(e) = self.validate_clock(now_us, &clock).and_then(|()| self.validate_tokens(&tokens)) {
            self.reply(client, request, Err(e));
            return;
        }
        if self.txs.len() + self.starts.len() >= self.config.max_open_transactions {
            self.reply(client, request, Err(TxError::TooManyTransactions(self.txs.len())));
            return;
        }
        let deadline_us = now_us + self.config.op_timeout_us;
        // A transaction that leaves the choice to the node reads past a cache that does not pay (`Cache::bypassing`).
        let bypass = reads == ReadFrom::Leader && self.cache.as_mut().is_some_and(|c| c.bypassing(now_us));
        let reads = if bypass { ReadFrom::Fresh } else { reads };
        // A transaction that does not read the buffer starts once what was buffered before it is at the owners.
        let reads_buffer = self.reads_buffer(reads);
        let after_round = match &mut self.buffering {
            Some(b) if !reads_buffer => b.request_flush(),
            _ => 0,
        };
        let mut start =
            PendingStart { client, request, clock, then, reads, deadline_us, after_round, questions: Vec::new() };
        self.ask_for_handovers(now_us, &mut start, tokens);
        if self.ready(&start) {
            self.begin(now_us, start);
        } else {
            // Cure Alg. 1 line 11: wait until the stable snapshot covers the client's clock for remote DCs (and,
            // at a coordinator that just started, until it heard the stable snapshot at all).
            self.starts.push(start);
            self.start_round(now_us);
        }
    }

    /// Whether a transaction reading from `reads` reads through the write buffer.
    fn reads_buffer(&self, reads: ReadFrom) -> bool {
        // Through the cache's window (a buffer recovered from an earlier run may have no cache now: then nobody
        // reads it, and transactions wait for its handover).
        self.buffering.is_some() && self.cache.is_some() && matches!(reads, ReadFrom::Leader | ReadFrom::Cache)
    }

    /// Whether a start may begin: the stable snapshot covers the client's clock (Cure), and with the write buffer,
    /// no round of handovers is under way (for a transaction reading the buffer) or what was buffered before it is
    /// handed over (for one that does not).
    fn ready(&self, start: &PendingStart) -> bool {
        let floor = self.start_floor(start);
        let buffer = match &self.buffering {
            // During a round, its window (from `floor`) must fit below the round's snapshot (see `handover`).
            Some(b) if self.reads_buffer(start.reads) => b.round_snapshot().is_none_or(|s| floor.le(s)),
            Some(b) => b.rounds_done() >= start.after_round,
            None => true,
        };
        buffer && start.questions.is_empty() && self.heard_stable && self.remote_entries_stable(&floor)
    }

    /// What a start's snapshot must cover: the client's clock, raised, with the write buffer, to what the
    /// transaction must see of it (the buffer's dependencies for one that reads it, every handover for one that
    /// does not). Those lie below the stable snapshot as this coordinator heard it, except after a restart (a
    /// recovered buffer, and a stable snapshot heard anew, which may lag): then the start waits for it.
    fn start_floor(&self, start: &PendingStart) -> VectorClock {
        let Some(b) = &self.buffering else { return start.clock.clone() };
        if self.reads_buffer(start.reads) {
            return self.window_bottom(&start.clock);
        }
        let mut floor = start.clock.clone();
        if let Some(handed) = b.handed() {
            floor.merge_max(handed);
        }
        floor
    }

    /// Begins the starts that may begin now.
    fn release_starts(&mut self, now_us: u64) {
        let starts = std::mem::take(&mut self.starts);
        for s in starts {
            if self.ready(&s) {
                self.begin(now_us, s);
            } else {
                self.starts.push(s);
            }
        }
    }

    fn validate_clock(&self, now_us: u64, clock: &VectorClock) -> Result<(), TxError> {
        if !clock.has_dcs(self.config.vector_len()) {
            return Err(TxError::InvalidClock(format!(
                "{} entries, but the cluster has {} DCs",
                clock.len(),
                self.config.dcs
            )));
        }
        let local = clock.get(self.config.dc);
        if local.micros() > now_us.saturating_add(self.config.max_clock_ahead_us) && local > self.clock.last() {
            return Err(TxError::InvalidClock(format!(
                "entry {local} of this DC is ahead of its clock by more than {} µs",
                self.config.max_clock_ahead_us
            )));
        }
        Ok(())
    }

    fn remote_entries_stable(&self, clock: &VectorClock) -> bool {
        if !self.config.protocol.rules().read_waits_for_snapshot() {
            return true; // Eventual consistency promises nothing to a client's clock.
        }
        let local = usize::from(self.config.dc.0);
        let snapshot = self.config.protocol.rules().remote_snapshot(&self.stable, self.config.dc);
        let pairs = clock.entries().iter().zip(snapshot.entries()).enumerate();
        pairs.filter(|(i, _)| *i != local).all(|(_, (c, s))| c <= s)
    }

    /// Cure Alg. 1 GetSnapshotTime: remote entries from the stable snapshot, the local entry from the clock (at
    /// least the client's and the stable snapshot's, so reads never go back in time).
    ///
    /// Departure (`stable_reads`, on by default): a static read takes the stable snapshot's local entry instead of
    /// the clock, raised to the client's, as CausalSpartanX's ROTX does, so no partition holds it back for a
    /// transaction prepared since. The stabilizer's garbage-collection frontier stays at or below this
    /// coordinator's reported stable snapshot, so the versions such a read needs are still there.
    fn begin(&mut self, now_us: u64, mut start: PendingStart) {
        let local = self.config.dc;
        let reads_buffer = self.reads_buffer(start.reads);
        // The least snapshot it may read at: the client's clock, raised to what it must see of the write buffer (a
        // buffer recovered after a restart may lie above this run's clock and above the stable snapshot it heard).
        let floor = self.start_floor(&start);
        if !reads_buffer {
            // It reads none of the buffer: it starts above every handover (which holds what was buffered before).
            start.clock = floor.clone();
        }
        let mut snapshot = self.config.protocol.rules().remote_snapshot(&self.stable, local);
        let floor = floor.get(local);
        self.clock.observe(floor);
        let (clock, stable) = (self.clock.current(now_us), self.stable.get(local));
        let fresh_stable = stable.micros().saturating_add(self.config.stable_read_max_lag_us) >= clock.micros();
        let own = match start.then {
            // Reads from the nearest replica are at the stable snapshot: a follower has applied it (or will soon),
            // never the coordinator's clock, which is ahead of everything any replica applied.
            _ if start.reads == ReadFrom::Nearest => floor.max(stable),
            Some(StaticOp::Read(_)) if self.config.stable_reads && fresh_stable => floor.max(stable),
            _ => clock.max(floor).max(stable),
        };
        snapshot.set(local, own);
        let id = TxId { dc: local, coordinator: self.id, seq: self.next_seq };
        self.next_seq += 1;
        let kind = if start.then.is_some() { Kind::Static } else { Kind::Interactive };
        let window = self.window_for(&start, &snapshot);
        let window_lo = window.as_ref().map(|w| w.lo.clone());
        let view = self.buffering.as_ref().filter(|_| reads_buffer && window.is_some()).map(|b| b.start());
        let mut ctx = EffectCtx::new(id.tag(), local.0);
        if let Some(view) = view {
            // Numbered after every buffered effect: one handover may carry it with them (crate::buffer).
            ctx.next_seq = view.seq;
        }
        let tx = Tx {
            client: start.client,
            kind,
            snapshot: snapshot.clone(),
            ctx,
            phase: Phase::Idle { deadline_us: now_us + self.config.tx_idle_timeout_us },
            cache: BTreeMap::new(),
            writes: Vec::new(),
            reads: start.reads,
            window,
            view,
            flushed: false,
        };
        self.txs.insert(id, tx);
        match start.then {
            // A cached transaction's snapshot is not fixed yet: the client learns the least it may be, which is
            // all the clock it may carry on with (the top of the window would make its next reads miss the cache).
            None => {
                let snapshot = window_lo.unwrap_or(snapshot);
                self.reply(start.client, start.request, Ok(ClientResponse::Started { tx: id, snapshot, token: None }))
            }
            Some(StaticOp::Read(objects)) => self.run(now_us, id, start.request, Continuation::Read(objects)),
            Some(StaticOp::Update(updates)) => self.run(now_us, id, start.request, Continuation::Update(updates)),
        }
    }

    /// A cached transaction's window: from the client's clock, raised to the cache floor and the buffer's
    /// dependencies, up to the snapshot Cure chose (`snapshot`); `None` when its reads do not go through the cache.
    fn window_for(&self, start: &PendingStart, snapshot: &VectorClock) -> Option<Window> {
        if self.cache.is_none() || !matches!(start.reads, ReadFrom::Leader | ReadFrom::Cache) {
            return None;
        }
        let lo = self.window_bottom(&start.clock);
        let mut hi = snapshot.clone();
        // During a round of handovers, it reads below the round's commit (see `handover`; `ready` let it start only
        // if its bottom fits).
        if let Some(round) = self.buffering.as_ref().and_then(|b| b.round_snapshot()) {
            hi.merge_min(round);
        }
        // The client's clock is below the snapshot (remote entries wait for the stable snapshot to cover it, the
        // local entry is raised to it), and so are the floor (a stable snapshot of the past) and the buffer's
        // dependencies (earlier windows' bottoms).
        let window = Window::new(lo, hi);
        debug_assert!(window.is_some(), "the window from the client's clock to the snapshot is not empty");
        window
    }

    /// The bottom of a cached transaction's window: the client's clock, raised to the cache floor and to the
    /// dependencies of everything readable from the write buffer (a transaction reading a buffered effect sees
    /// what it depends on).
    fn window_bottom(&self, clock: &VectorClock) -> VectorClock {
        let mut lo = clock.clone();
        if let Some(floor) = self.cache.as_ref().and_then(Cache::floor) {
            lo.merge_max(floor);
        }
        if let Some(b) = &self.buffering {
            if let Some(deps) = b.deps() {
                lo.merge_max(&deps);
            }
            // A run that recovered its buffer forgot which handovers of the earlier run a window may still exclude
            // (they are read from the buffer until every window covers them): windows start above them all.
            if let Some(handed) = &b.recovered_floor {
                lo.merge_max(handed);
            }
        }
        lo
    }

    fn on_stable(&mut self, now_us: u64, stable: VectorClock, away: Option<crate::away::Chunk>) {
        if !stable.has_dcs(self.config.vector_len()) {
            return;
        }
        self.stable.merge_max(&stable);
        if let Some(cache) = &mut self.cache {
            // Notices of writes (`crate::away`), before the window's stable moves on.
            if let Some(chunk) = away {
                cache.learn_away(now_us, chunk, &stable);
            }
            cache.observe_stable(now_us, &self.stable);
        }
        self.refresh_stale(now_us);
        self.heard_stable = true;
        self.clock.observe(stable.get(self.config.dc));
        self.release_starts(now_us);
    }

    /// Checks that the request is for an open interactive transaction of this client that waits for the client.
    fn idle_tx(&mut self, client: ClientId, request: RequestId, id: TxId) -> bool {
        let err = match self.txs.get_mut(&id) {
            Some(tx) if tx.kind == Kind::Interactive && matches!(tx.phase, Phase::Idle { .. }) => {
                // A descriptor may travel between connections: answer whoever asked last.
                tx.client = client;
                return true;
            }
            Some(_) => TxError::Busy(id),
            None => match self.finished.get(&id) {
                Some(Finished::Committed) => TxError::AlreadyCommitted(id),
                Some(Finished::Aborted(reason)) => TxError::AlreadyAborted { tx: id, reason: reason.clone() },
                None => TxError::UnknownTransaction(id),
            },
        };
        self.reply(client, request, Err(err));
        false
    }

    /// Runs a read or an update: fetches the objects it needs that the transaction has not read yet, then
    /// continues in [`Coordinator::resume`].
    fn run(&mut self, now_us: u64, id: TxId, request: RequestId, then: Continuation) {
        let tx = self.txs.get_mut(&id).expect("run is called on open transactions");
        let mut needed: BTreeMap<Address, Vec<ObjectId>> = BTreeMap::new();
        let topology = &self.topology;
        let ignore_placement = bugs::has(&self.config, Bug::ReadsIgnorePlacement);
        let ignore_boxes = bugs::has(&self.config, Bug::CacheIgnoresBoxes);
        let (buffering, local) = (self.buffering.as_ref(), self.config.dc);
        let (refresh_of, refreshing) = (&self.refresh_of, &self.refreshing);
        let failover_us = self.config.ring_failover_us;
        // Reads that wait for a background fetch of their object in flight (`refresh`), with its request.
        let mut joined: Vec<(ObjectId, u64)> = Vec::new();
        let mut add = |o: &ObjectId| {
            if tx.cache.contains_key(o) {
                return;
            }
            if let (Some(b), Some(window), Some(_)) = (buffering, &mut tx.window, tx.view) {
                // Whether it reads the object's handed-over effects from the owner or from the buffer.
                b.settle(local, o, window);
            }
            // A cached transaction reads what the lease cache holds within its window (narrowing it).
            if let (Some(window), Some(cache)) = (&mut tx.window, &mut self.cache) {
                let cached = Self::caches(topology, local, o);
                if let Some(state) = cached.then(|| cache.read(now_us, o, window, ignore_boxes)).flatten() {
                    tx.cache.insert(o.clone(), Self::overlay(buffering, tx, o, state));
                    return;
                }
                let refreshes = (refresh_of, refreshing);
                let join = cached.then(|| Self::joinable(refreshes, cache, (failover_us, now_us), o, &window.hi));
                let join = join.flatten();
                if let Some(request) = join {
                    if !joined.iter().any(|(j, _)| j == o) {
                        joined.push((o.clone(), request));
                    }
                    return;
                }
            }
            let objects = needed.entry(Self::read_address(topology, o, ignore_placement)).or_default();
            if !objects.contains(o) {
                objects.push(o.clone());
            }
        };
        match &then {
            Continuation::Read(objects) => objects.iter().for_each(&mut add),
            Continuation::Update(updates) => {
                for (o, op) in updates {
                    if requires_state(o.ty, op) {
                        add(o);
                    }
                }
            }
        }
        if needed.is_empty() && joined.is_empty() {
            self.resume(now_us, id, request, then);
            return;
        }
        // A cached transaction fetches at the top of its window (after the hits above narrowed it): the freshest
        // snapshot every state read so far is exact at. Each answer's box holds it, so the window stays open.
        let cached_at = tx.window.as_ref().map(|w| w.hi.clone());
        let snapshot = cached_at.clone().unwrap_or_else(|| tx.snapshot.clone());
        let mut outstanding = BTreeSet::new();
        let mut sends = Vec::new();
        for (to, objects) in needed {
            let fetch = self.next_fetch;
            self.next_fetch += 1;
            outstanding.insert(fetch);
            self.fetches.insert(fetch, (id, objects.clone(), cached_at.clone()));
            let msg = Self::fetch_message(id, fetch, &tx.reads, &snapshot, cached_at.is_some(), objects);
            sends.push((fetch, to, msg));
        }
        let mut joins = Vec::new();
        for (object, refresh) in joined {
            let fetch = self.next_fetch;
            self.next_fetch += 1;
            outstanding.insert(fetch);
            self.fetches.insert(fetch, (id, vec![object], cached_at.clone()));
            joins.push((refresh, fetch));
        }
        tx.phase = Phase::Fetching {
            request,
            then,
            outstanding,
            deadline_us: now_us + self.config.op_timeout_us,
            resend_us: now_us + resend_after(&self.config, 0),
            resends: 0,
        };
        for (fetch, to, msg) in sends {
            let to = self.note_away(now_us, fetch, to, &msg);
            self.send(to, msg);
        }
        for (refresh, fetch) in joins {
            self.join(refresh, fetch);
        }
    }

    /// The read `fetch` as it was sent, to send again, if its transaction still waits for it.
    fn fetch_again(&self, fetch: u64) -> Option<Message> {
        let (id, objects, cached_at) = self.fetches.get(&fetch)?;
        let tx = self.txs.get(id)?;
        let Phase::Fetching { outstanding, .. } = &tx.phase else { return None };
        outstanding.contains(&fetch).then(|| {
            let snapshot = cached_at.as_ref().unwrap_or(&tx.snapshot);
            Self::fetch_message(*id, fetch, &tx.reads, snapshot, cached_at.is_some(), objects.clone())
        })
    }

    /// Sends again the reads among `fetches` that went to this DC's partitions (a read of an object held at another
    /// DC has its own timer: it is asked of the next ring's holder, `remote.rs`).
    fn read_again(&mut self, fetches: BTreeSet<u64>) {
        for fetch in fetches {
            if let Some((p, msg)) = self.local_read_again(fetch) {
                self.read_resends += 1;
                self.send(Address::Partition(p), msg);
            }
        }
    }

    /// The read `fetch`, to send again, with its partition, if it went to one of this DC's partitions (not to a
    /// holder at another DC) and its transaction still waits for it.
    fn local_read_again(&self, fetch: u64) -> Option<(PartitionId, Message)> {
        let ignore = bugs::has(&self.config, Bug::ReadsIgnorePlacement);
        let object = self.fetches.get(&fetch)?.1.first()?;
        let Address::Partition(p) = Self::read_address(&self.topology, object, ignore) else { return None };
        Some((p, self.fetch_again(fetch)?))
    }

    /// Whether the lease cache keeps `object`: every object, unless buckets are placed by rings; then only those
    /// held at other DCs (Karma's cache: a state held here is read here at no more cost than a cache lookup, and the
    /// memory is better spent on states a WAN round trip away). Its reads are fetched with boxes all the same, for
    /// the window.
    fn caches(topology: &Topology, local: crate::DcId, object: &ObjectId) -> bool {
        !topology.placement().partial() || !topology.holds_object(local, object)
    }

    /// The message that reads `objects` for a transaction: a cache's fetch (with visibility boxes) or a read.
    fn fetch_message(
        tx: TxId,
        request: u64,
        reads: &ReadFrom,
        snapshot: &VectorClock,
        cached: bool,
        objects: Vec<ObjectId>,
    ) -> Message {
        let snapshot = snapshot.clone();
        if cached {
            Message::Fetch { tx, request, snapshot, objects }
        } else {
            Message::Read { tx, request, snapshot, objects, nearest: *reads == ReadFrom::Nearest }
        }
    }

    /// `state` with the buffered effects the transaction reads and its own effects on `object` applied: a
    /// transaction reads what its node acknowledged before it started, and its own writes.
    fn overlay(buffering: Option<&handover::Buffering>, tx: &Tx, object: &ObjectId, mut state: Crdt) -> Crdt {
        if let (Some(b), Some(view), Some(window)) = (buffering, tx.view, &tx.window) {
            for (stamp, effect) in b.effects(object, view.position, window) {
                state.apply(effect, stamp).expect("buffered effects match the object's type");
            }
        }
        for (o, effect) in &tx.writes {
            if o == object {
                state.apply(effect, Stamp::PENDING).expect("own effects match the object's type");
            }
        }
        state
    }

    /// A partition's answer to a cache's fetch: cache each state with its box, narrow the transaction's window to
    /// the boxes, and go on as a read does.
    fn on_fetched(&mut self, now_us: u64, id: TxId, fetch: u64, result: Result<Vec<Fetched>, RemoteError>) {
        if self.answered_away(now_us, fetch, result.is_err()) {
            return; // Refused at a holder at another DC: asked at the next ring's.
        }
        let states = match result {
            Ok(fetched) => {
                let Some((owner, objects, _)) = self.fetches.get(&fetch) else { return };
                if *owner != id || fetched.len() != objects.len() {
                    return self.on_read_reply(now_us, id, fetch, Ok(Vec::new()));
                }
                let tx = self.txs.get_mut(&id);
                let (Some(tx), Some(cache)) = (tx, &mut self.cache) else {
                    return self.on_read_reply(now_us, id, fetch, Ok(fetched.into_iter().map(|f| f.state).collect()));
                };
                let mut states = Vec::with_capacity(fetched.len());
                for (object, f) in objects.iter().zip(fetched) {
                    if let Some(window) = &mut tx.window {
                        match window.meet(&f.lo, &f.hi) {
                            Some(narrowed) => *window = narrowed,
                            None => {
                                // Every box holds the snapshot fetched at, which the window held: a broken box.
                                debug_assert!(
                                    !bugs::checks_invariants(&self.config),
                                    "a fetched box misses the window it was fetched in"
                                );
                                let e =
                                    RemoteError::InvalidSnapshot("a fetched state is not exact in the window".into());
                                return self.on_read_reply(now_us, id, fetch, Err(e));
                            }
                        }
                    }
                    states.push(f.state.clone());
                    if Self::caches(&self.topology, self.config.dc, object) {
                        cache.insert(now_us, object.clone(), f);
                    }
                }
                Ok(states)
            }
            Err(e) => Err(e),
        };
        self.on_read_reply(now_us, id, fetch, states)
    }

    fn on_read_reply(&mut self, now_us: u64, id: TxId, fetch: u64, result: Result<Vec<Crdt>, RemoteError>) {
        if self.answered_away(now_us, fetch, result.is_err()) {
            return; // Refused at a holder at another DC: asked at the next ring's.
        }
        let Some((owner, objects, _)) = self.fetches.remove(&fetch) else {
            return; // A late reply for a transaction that gave up.
        };
        if owner != id {
            return;
        }
        let Some(tx) = self.txs.get_mut(&id) else {
            return;
        };
        let Phase::Fetching { request, outstanding, .. } = &mut tx.phase else {
            return;
        };
        outstanding.remove(&fetch);
        let (client, request, done) = (tx.client, *request, outstanding.is_empty());
        let states = match result {
            Ok(states) if states.len() == objects.len() => states,
            Ok(_) => {
                let e = RemoteError::InvalidSnapshot("a partition answered a different number of objects".into());
                self.fail_fetch(id, client, request, e);
                return;
            }
            Err(e) => {
                self.fail_fetch(id, client, request, e);
                return;
            }
        };
        let tx = self.txs.get_mut(&id).expect("still open");
        for (object, state) in objects.into_iter().zip(states) {
            // Overlay the buffered and the transaction's own effects.
            let state = Self::overlay(self.buffering.as_ref(), tx, &object, state);
            tx.cache.insert(object, state);
        }
        if done {
            let Phase::Fetching { then, .. } = std::mem::replace(&mut tx.phase, Phase::Idle { deadline_us: 0 }) else {
                unreachable!("checked above")
            };
            self.resume(now_us, id, request, then);
        }
    }

    /// A partition could not serve a read: the transaction aborts.
    fn fail_fetch(&mut self, id: TxId, client: ClientId, request: RequestId, reason: RemoteError) {
        self.fetches.retain(|_, (owner, _, _)| *owner != id);
        self.txs.remove(&id);
        let text = format!("read failed: {reason}");
        self.finish(id, Finished::Aborted(text.clone()));
        let err = match reason {
            RemoteError::Timeout => TxError::Timeout(text),
            _ => TxError::Aborted(text),
        };
        self.reply(client, request, Err(err));
    }

    /// Continues a read or an update once every object it needs is in the transaction's cache.
    fn resume(&mut self, now_us: u64, id: TxId, request: RequestId, then: Continuation) {
        let misplaced = match &then {
            Continuation::Update(updates) => self.misplaced(updates),
            Continuation::Read(_) => None,
        };
        let tx = self.txs.get_mut(&id).expect("resume is called on open transactions");
        tx.phase = Phase::Idle { deadline_us: now_us + self.config.tx_idle_timeout_us };
        let result = match then {
            Continuation::Read(objects) => {
                let values: Vec<Value> = objects.iter().map(|o| tx.cache[o].value()).collect();
                if tx.kind == Kind::Static {
                    // A cached read is exact at every snapshot of its window: the least is the clock to carry on.
                    let commit = tx.window.as_ref().map_or_else(|| tx.snapshot.clone(), |w| w.lo.clone());
                    let client = tx.client;
                    self.txs.remove(&id);
                    self.finish(id, Finished::Committed);
                    let response = ClientResponse::StaticValues { values, commit, token: None };
                    self.reply(client, request, Ok(response));
                    return;
                }
                Ok(ClientResponse::Values(values))
            }
            Continuation::Update(updates) => match misplaced {
                Some(e) => Err(e),
                None => Self::generate(tx, &updates).map(|()| ClientResponse::Updated),
            },
        };
        let client = tx.client;
        match (tx.kind, result) {
            (Kind::Interactive | Kind::Handover, result) => self.reply(client, request, result),
            (Kind::Static, Ok(_)) => self.commit(now_us, id, request),
            (Kind::Static, Err(e)) => {
                self.txs.remove(&id);
                self.finish(id, Finished::Aborted(e.to_string()));
                self.reply(client, request, Err(e));
            }
        }
    }

    /// Turns operations into effects against the transaction's snapshot and own effects. All or nothing: on an
    /// error the transaction is unchanged.
    fn generate(tx: &mut Tx, updates: &[(ObjectId, Op)]) -> Result<(), TxError> {
        let mut ctx = tx.ctx.clone();
        let mut touched: BTreeMap<ObjectId, Crdt> = BTreeMap::new();
        let mut effects = Vec::with_capacity(updates.len());
        for (object, op) in updates {
            let effect = match touched.get_mut(object) {
                Some(state) => {
                    let effect = state.generate(op, &mut ctx).map_err(TxError::Crdt)?;
                    state.apply(&effect, Stamp::PENDING).map_err(TxError::Crdt)?;
                    effect
                }
                None => {
                    let mut state = match tx.cache.get(object) {
                        Some(state) => state.clone(),
                        // Not read: the op does not need the state (requires_state is false).
                        None => Crdt::new(object.ty),
                    };
                    let effect = state.generate(op, &mut ctx).map_err(TxError::Crdt)?;
                    state.apply(&effect, Stamp::PENDING).map_err(TxError::Crdt)?;
                    touched.insert(object.clone(), state);
                    effect
                }
            };
            effects.push((object.clone(), effect));
        }
        tx.ctx = ctx;
        for (object, state) in touched {
            if tx.cache.contains_key(&object) {
                tx.cache.insert(object, state);
            }
        }
        tx.writes.extend(effects);
        Ok(())
    }

    /// Commit: a read-only transaction commits at its snapshot with no 2PC; otherwise prepare everywhere.
    fn commit(&mut self, now_us: u64, id: TxId, request: RequestId) {
        let tx = self.txs.get_mut(&id).expect("commit is called on open transactions");
        if let Some(window) = tx.window.take() {
            // What a cached transaction read is exact at the window's least snapshot: it commits from there (its
            // dependencies). The cached copies of what it wrote stay: they are exact in their boxes, which end
            // below its commit, so its session (whose clock the commit raises) fetches them again.
            tx.snapshot = window.lo;
        }
        if tx.writes.is_empty() {
            let (client, commit) = (tx.client, tx.snapshot.clone());
            self.txs.remove(&id);
            self.finish(id, Finished::Committed);
            self.reply(client, request, Ok(ClientResponse::Committed { commit, token: None }));
            return;
        }
        match self.try_buffer(now_us, id, request) {
            Ok(true) => return,
            Ok(false) => {}
            Err(after_round) => return self.wait_for_round(now_us, id, request, after_round),
        }
        if let Some(handed) = self.buffering.as_ref().and_then(|b| b.handed()) {
            // It may have read handed-over effects from the buffer: it commits above them.
            let handed = handed.clone();
            self.txs.get_mut(&id).expect("open").snapshot.merge_max(&handed);
        }
        // A transaction that touches one partition needs no second phase: that partition's prepare time is the
        // largest. The deliberate bugs keep the full protocol so that they stay observable.
        let alone = bugs::active(&self.config).is_none();
        self.prepare_all(now_us, id, request, alone, self.config.op_timeout_us);
    }

    /// Asks every participant to prepare (or, if there is only one and `alone_allowed`, to prepare and commit).
    fn prepare_all(&mut self, now_us: u64, id: TxId, request: RequestId, alone_allowed: bool, timeout_us: u64) {
        let tx = self.txs.get_mut(&id).expect("prepare_all is called on open transactions");
        let mut by_partition: BTreeMap<PartitionId, Vec<(ObjectId, Effect)>> = BTreeMap::new();
        for (object, effect) in &tx.writes {
            let p = self.topology.partition_of(object);
            by_partition.entry(p).or_default().push((object.clone(), effect.clone()));
        }
        let waiting = by_partition.keys().copied().collect();
        let alone = by_partition.len() == 1 && alone_allowed;
        tx.phase = Phase::Preparing {
            request,
            alone,
            waiting,
            max_prepare: Timestamp::ZERO,
            min_prepare: Timestamp(u64::MAX),
            deadline_us: now_us + timeout_us,
            resend_us: now_us + resend_after(&self.config, 0),
            resends: 0,
        };
        for (p, writes) in by_partition {
            self.send_prepare(id, p, writes);
        }
    }

    /// Asks partition `p` to prepare (or, alone, to prepare and commit) the transaction's effects on it.
    fn send_prepare(&mut self, id: TxId, p: PartitionId, writes: Vec<(ObjectId, Effect)>) {
        let oldest_open = self.oldest_open();
        let tx = self.txs.get(&id).expect("a prepare is sent for an open transaction");
        let snapshot = tx.snapshot.clone();
        let msg = match tx.phase {
            Phase::Preparing { alone: true, .. } => Message::PrepareAndCommit { tx: id, snapshot, writes, oldest_open },
            _ => Message::Prepare { tx: id, snapshot, writes, oldest_open },
        };
        self.send(Address::Partition(p), msg);
    }

    /// The sequence number of the oldest transaction still open here: every older one is finished, and nothing is
    /// sent for it again (a partition drops a late prepare of one as a duplicate).
    fn oldest_open(&self) -> u64 {
        // (A handover of an earlier run, recovered from the log, is not this coordinator's: it has its own numbers.)
        self.txs.keys().find(|t| t.coordinator == self.id).map_or(self.next_seq, |t| t.seq)
    }

    /// The effects of the transaction on partition `p`, in program order.
    fn writes_on(&self, tx: &Tx, p: PartitionId) -> Vec<(ObjectId, Effect)> {
        tx.writes.iter().filter(|(o, _)| self.topology.partition_of(o) == p).cloned().collect()
    }

    /// Partition `p` has a new leader (a replicated partition failed over, or its leader was re-elected after
    /// losing what it had not committed): what this coordinator asked of `p` and is still waiting for may have been
    /// lost with the old leader, so it asks again at once rather than at its timeout. Resending is safe: reads have
    /// no effect, a partition answers a prepare it holds with the same answer, and a duplicate of one that ended
    /// there with its commit or a refusal (see the partition's `decided` memory), and decisions are resent on a timer anyway.
    pub fn handle_leader_change(&mut self, p: PartitionId) {
        // Only reads of this DC's partition `p` (not those sent to a holder at another DC, whose leader is not this
        // one).
        let mut reads: Vec<(u64, Message)> = (self.fetches.keys())
            .filter_map(|fetch| self.local_read_again(*fetch).filter(|(q, _)| *q == p).map(|(_, msg)| (*fetch, msg)))
            .collect();
        reads.sort_by_key(|(fetch, _)| *fetch);
        let mut sends: Vec<Message> = reads.into_iter().map(|(_, msg)| msg).collect();
        let mut prepares = Vec::new();
        for (id, tx) in &self.txs {
            match &tx.phase {
                Phase::Preparing { waiting, .. } if waiting.contains(&p) => prepares.push(*id),
                Phase::Committing { commit, unacked, .. } if unacked.contains(&p) => {
                    sends.push(Message::Commit { tx: *id, commit: commit.clone() })
                }
                Phase::Aborting { unacked, .. } if unacked.contains(&p) => sends.push(Message::Abort { tx: *id }),
                _ => {}
            }
        }
        self.resends += (sends.len() + prepares.len()) as u64;
        for msg in sends {
            self.send(Address::Partition(p), msg);
        }
        for id in prepares {
            self.prepare_again(id, p);
        }
    }

    /// Asks partition `p` again to prepare transaction `id`'s effects on it (the prepare, or its answer, may have
    /// been lost).
    fn prepare_again(&mut self, id: TxId, p: PartitionId) {
        let writes = self.writes_on(&self.txs[&id], p);
        self.send_prepare(id, p, writes);
    }

    fn on_prepared(&mut self, now_us: u64, id: TxId, partition: PartitionId, prepare_time: Timestamp) {
        let Some(tx) = self.txs.get_mut(&id) else {
            return;
        };
        let Phase::Preparing { request, waiting, max_prepare, min_prepare, .. } = &mut tx.phase else {
            return;
        };
        if !waiting.remove(&partition) {
            return;
        }
        *max_prepare = (*max_prepare).max(prepare_time);
        *min_prepare = (*min_prepare).min(prepare_time);
        if !waiting.is_empty() {
            return;
        }
        // Cure Alg. 1 line 33: the commit time is the largest prepare time.
        let commit_time =
            if bugs::has(&self.config, Bug::CommitAtMinPrepareTime) { *min_prepare } else { *max_prepare };
        let request = *request;
        let mut commit = tx.snapshot.clone();
        commit.set(self.config.dc, commit_time);
        assert!(tx.snapshot.le(&commit), "cure: the commit vector dominates the snapshot");
        let participants: BTreeSet<PartitionId> =
            tx.writes.iter().map(|(o, _)| self.topology.partition_of(o)).collect();
        tx.phase = Phase::Committing {
            request,
            commit: commit.clone(),
            unacked: participants.clone(),
            retry_us: now_us + self.config.retry_interval_us.max(1),
            resends: 0,
        };
        let kind = tx.kind;
        self.clock.observe(commit_time);
        if kind == Kind::Handover {
            // Decided: durable before the first commit leaves (the barrier holds the commits for it).
            self.persist(BufferRecord::Decided { tx: id, commit: commit.clone() });
        }
        for p in participants {
            self.send(Address::Partition(p), Message::Commit { tx: id, commit: commit.clone() });
        }
    }

    fn on_prepare_refused(&mut self, now_us: u64, id: TxId, partition: PartitionId, reason: RemoteError) {
        let Some(tx) = self.txs.get(&id) else { return };
        let Phase::Preparing { request, waiting, .. } = &tx.phase else {
            return;
        };
        if !waiting.contains(&partition) {
            return;
        }
        if tx.kind == Kind::Handover {
            self.abort_prepared(now_us, id);
            return self.retry_handover(now_us, id);
        }
        let (client, request) = (tx.client, *request);
        let err = match reason {
            RemoteError::Crdt(e) => TxError::Crdt(e),
            RemoteError::Timeout => TxError::Timeout(reason.to_string()),
            other => TxError::Aborted(other.to_string()),
        };
        self.abort_prepared(now_us, id);
        self.reply(client, request, Err(err));
    }

    /// Aborts a transaction in its prepare phase: every participant is told, until each acknowledges.
    fn abort_prepared(&mut self, now_us: u64, id: TxId) {
        let tx = self.txs.get_mut(&id).expect("abort_prepared is called on open transactions");
        let participants: BTreeSet<PartitionId> =
            tx.writes.iter().map(|(o, _)| self.topology.partition_of(o)).collect();
        let retry_us = now_us + self.config.retry_interval_us.max(1);
        tx.phase = Phase::Aborting { unacked: participants.clone(), retry_us, resends: 0 };
        self.finish(id, Finished::Aborted("the prepare phase failed".into()));
        for p in participants {
            self.send(Address::Partition(p), Message::Abort { tx: id });
        }
    }

    fn on_committed_alone(&mut self, id: TxId, partition: PartitionId, commit: VectorClock) {
        let Some(tx) = self.txs.get(&id) else { return };
        let Phase::Preparing { request, alone: true, waiting, .. } = &tx.phase else { return };
        if !waiting.contains(&partition) {
            return;
        }
        assert!(tx.snapshot.le(&commit), "cure: the commit vector dominates the snapshot");
        let (client, request) = (tx.client, *request);
        self.clock.observe(commit.get(self.config.dc));
        self.txs.remove(&id);
        self.finish(id, Finished::Committed);
        self.reply(client, request, Ok(ClientResponse::Committed { commit, token: None }));
    }

    fn on_commit_ack(&mut self, now_us: u64, id: TxId, partition: PartitionId) {
        let Some(tx) = self.txs.get_mut(&id) else {
            return;
        };
        let Phase::Committing { request, commit, unacked, .. } = &mut tx.phase else {
            return;
        };
        unacked.remove(&partition);
        if unacked.is_empty() {
            let (client, request, commit, kind) = (tx.client, *request, commit.clone(), tx.kind);
            self.txs.remove(&id);
            self.finish(id, Finished::Committed);
            if kind == Kind::Handover {
                return self.on_handover_committed(now_us, id, commit);
            }
            self.reply(client, request, Ok(ClientResponse::Committed { commit, token: None }));
        }
    }

    fn on_abort_ack(&mut self, id: TxId, partition: PartitionId) {
        let Some(tx) = self.txs.get_mut(&id) else {
            return;
        };
        let Phase::Aborting { unacked, .. } = &mut tx.phase else {
            return;
        };
        unacked.remove(&partition);
        if unacked.is_empty() {
            self.txs.remove(&id);
        }
    }

    /// A partition holds the transaction prepared and has not heard the decision.
    fn on_query(&mut self, id: TxId, partition: PartitionId) {
        match self.txs.get(&id).map(|tx| &tx.phase) {
            Some(Phase::Committing { commit, .. }) => {
                let commit = commit.clone();
                self.send(Address::Partition(partition), Message::Commit { tx: id, commit });
            }
            // Still deciding: the answer follows.
            Some(Phase::Preparing { .. }) => {}
            // Aborting, or unknown: a transaction this coordinator does not hold open never committed (it forgets a
            // committed one only after every participant acknowledged the commit).
            _ => self.send(Address::Partition(partition), Message::Abort { tx: id }),
        }
    }

    fn finish(&mut self, id: TxId, outcome: Finished) {
        if self.finished.insert(id, outcome).is_none() {
            self.finished_order.push_back(id);
            if self.finished_order.len() > FINISHED_MEMORY {
                let old = self.finished_order.pop_front().expect("non-empty");
                self.finished.remove(&old);
            }
        }
    }

    fn reply(&mut self, client: ClientId, request: RequestId, result: Result<ClientResponse, TxError>) {
        let result = result.map(|r| self.with_token(r));
        self.emit(CoordinatorOutput::Reply(ClientReply { client, request, result }));
    }

    fn send(&mut self, to: Address, msg: Message) {
        // A read at another DC (an object this DC does not hold) names this DC, so the answer finds its way back.
        let from = match to {
            Address::Peer(dc, _) if dc != self.config.dc => Address::DcCoordinator(self.config.dc, self.id),
            _ => Address::Coordinator(self.id),
        };
        self.emit(CoordinatorOutput::Send(Envelope { from, to, msg }));
    }
}
