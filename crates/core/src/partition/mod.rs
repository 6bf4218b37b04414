//! The partition state machine (Cure Alg. 2): multi-version objects, snapshot reads, prepare, commit, abort, and
//! the partition's pvc.
//!
//! Inputs: [`Partition::handle_message`], [`Partition::handle_persisted`], [`Partition::handle_timeout`].
//! Outputs: [`Partition::poll_output`] (messages, and records to persist) and [`Partition::poll_timeout`].
//!
//! Durability is part of the contract: a `Prepared` answer and a `CommitAck` are released only after the driver
//! reports their log record durable, and a commit becomes visible to reads only then, so nothing a client saw can
//! be lost by a crash.
//!
//! The partition's concerns live in one private module each, all of them `impl Partition` blocks over the state
//! defined here: `reads` (snapshot reads and waiting requests), `participant` (the two-phase-commit participant),
//! `termination` (settling a transaction whose coordinator is gone, with its safety argument), `remote` (applying
//! other DCs' transactions and shipping this partition's own), and `recovery` (checkpoints and restoring from
//! them). `apply` is the one path by which a durable log record changes the state, live and at recovery; its
//! documentation says what each record does when written and once durable.

mod apply;
mod bound;
mod decided;
mod participant;
mod reads;
mod recovery;
mod remote;
mod termination;

use self::bound::BoundKeeper;
use self::decided::Decided;
pub use self::decided::{DecidedImage, Outcome};
pub use self::reads::ExportPage;
use self::reads::{Prepare, Request, Waiting};
use self::termination::Termination;
use crate::away;
use crate::bugs::{self, Bug};
use crate::record::{LogRecord, Lsn};
use crate::replication::{Inbound, ReplicatedTx, Replicator};
use crate::store::{ObjectImage, Store, StoreStats, VersionStore};
use crate::topology::Topology;
use crate::DcId;
use crate::{
    Address, Clock, ClockKind, Config, Envelope, Message, ObjectId, PartitionId, Timestamp, TxId, VectorClock,
};
use causet_crdt::Effect;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A partition renews its clock bound once the clock comes within `clock_bound_us / BOUND_RENEW_DIVISOR` of the
/// last one logged, so about every three quarters of `clock_bound_us` while the clock follows physical time. A
/// quarter (25 ms by default) leaves a new bound many times a log write's time to become durable before a
/// message would have to wait for it; renewing at half the distance, as before, logged half as many bounds again
/// (each a Raft entry written by every replica of a replicated partition, the larger part of an idle group's log).
pub const BOUND_RENEW_DIVISOR: u64 = 4;

/// A partition that logs a record anyway renews its clock bound with it once the clock comes within
/// `clock_bound_us / BOUND_RIDE_DIVISOR` of the last one: the bound then takes the same Raft round (one Write per
/// replica, one append message per follower) instead of a round of its own when the timer's quarter comes. A
/// partition that logs something every few milliseconds never reaches the quarter; an idle one renews on its timer
/// as before. The bound is still at most `clock_bound_us` past the clock, so a new leader's jump is unchanged.
pub const BOUND_RIDE_DIVISOR: u64 = 2;

/// Under partial replication a DC tells the holders it reads from its garbage-collection frontier every this many
/// stable intervals, with its replication stream.
pub const GC_REPORT_INTERVALS: u64 = 10;

/// A reader of another ring's garbage-collection frontier holds this partition's collection back while it is at
/// most this many of its report periods ([`GC_REPORT_INTERVALS`] stable intervals) old: a second at the default
/// 1 ms. A DC that stopped reading here, or cannot reach it, stops holding it back after that.
pub const FAR_READER_FRESH_INTERVALS: u64 = 100;

/// A transaction prepared at a partition, as a checkpoint keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreparedImage {
    /// The transaction.
    pub tx: TxId,
    /// Its snapshot.
    pub snapshot: VectorClock,
    /// The partition's prepare time.
    pub prepare_time: Timestamp,
    /// Its effects here.
    pub writes: Vec<(ObjectId, Effect)>,
    /// The commit vector, when the commit was decided and its record written before the checkpoint.
    pub commit: Option<VectorClock>,
    /// A termination was answered `Prepared` for it: the dead coordinator's decision is ignored.
    #[serde(default)]
    pub fenced: bool,
    /// The log position of its prepare record.
    pub lsn: Lsn,
}

/// What a partition holds after every log record up to `lsn`: restoring it and replaying the records after `lsn`
/// rebuilds the partition, so the log up to `lsn` can be truncated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The last log record the checkpoint covers.
    pub lsn: Lsn,
    /// The clock's high-water mark.
    pub clock: Timestamp,
    /// The garbage-collection frontier.
    pub frontier: VectorClock,
    /// Object images. From [`Partition::take_checkpoint`], only the objects changed since the previous checkpoint
    /// (a storage engine keeps the latest image of each object); for [`Partition::restore`], every object.
    pub objects: Vec<(ObjectId, ObjectImage)>,
    /// Every transaction prepared and not yet visible.
    pub prepared: Vec<PreparedImage>,
    /// Recent commit decisions, newest last.
    pub recent_commits: Vec<(TxId, VectorClock)>,
    /// The log from this position on is still needed, though the checkpoint covers part of it: it holds local
    /// transactions some peer DC has not acknowledged (and prepared ones that may commit), which replication reads
    /// back. Truncation spares it.
    #[serde(default)]
    pub keep_log_from: Option<Lsn>,
    /// Every local transaction committed before the checkpoint has a commit time at or below this: the
    /// replicator reads back from the log those at or below it that a peer DC has not acknowledged.
    #[serde(default)]
    pub committed_through: Timestamp,
    /// The largest clock bound logged before the checkpoint (the log records holding it may be truncated).
    #[serde(default)]
    pub clock_bound: Timestamp,
    /// Transactions this partition promised a termination never to prepare, oldest first.
    #[serde(default)]
    pub fenced: Vec<TxId>,
    /// What each peer DC acknowledged.
    #[serde(default)]
    pub peer_acked: Vec<(DcId, Timestamp)>,
    /// The pvc: its remote entries say up to where each origin's transactions are applied.
    #[serde(default)]
    pub pvc: Option<VectorClock>,
    /// Remote transactions logged before the checkpoint but not yet applied when it was taken: their records are
    /// truncated with the log, so the checkpoint carries them (they are durable once the checkpoint is).
    #[serde(default)]
    pub remote_pending: Vec<(DcId, ReplicatedTx)>,
    /// Per origin, the stream position of the last remote transaction applied: pvc may lag behind it (it also waits
    /// for the origin's promise), and a restored partition must not apply it again when the origin resends.
    #[serde(default)]
    pub remote_applied: Vec<(DcId, Timestamp, TxId)>,
    /// What the partition remembers of its coordinators' transactions, so that no prepare is acted on twice
    /// (`decided.rs`).
    #[serde(default)]
    pub decided: Vec<DecidedImage>,
    /// A replicated partition's group membership as of `lsn` (set by the replica; `None` for a partition that
    /// is not replicated, or a group that kept its first voters).
    #[serde(default)]
    pub membership: Option<crate::group::Membership>,
}

impl Checkpoint {
    /// The last log position a driver may truncate once this checkpoint is durable: its `lsn`, but nothing from
    /// `keep_log_from` on (replication still reads those records back).
    pub fn truncate_through(&self) -> Lsn {
        self.keep_log_from.map_or(self.lsn, |k| Lsn(k.0.saturating_sub(1))).min(self.lsn)
    }

    /// This (incremental) checkpoint written over the one stored before it: every object's latest image, and the
    /// rest of this one. (For drivers that keep checkpoints in memory: the simulator, tests.)
    pub fn merged_onto(self, stored: Option<Checkpoint>) -> Checkpoint {
        let Some(mut old) = stored else { return self };
        let mut objects: std::collections::BTreeMap<ObjectId, ObjectImage> = old.objects.drain(..).collect();
        objects.extend(self.objects);
        Checkpoint { objects: objects.into_iter().collect(), ..self }
    }
}

/// What a partition asks its driver to do.
#[derive(Clone, Debug, PartialEq)]
pub enum PartitionOutput {
    /// Deliver a message.
    Send(Envelope),
    /// Append a record to this partition's log; call [`Partition::handle_persisted`] once it is durable.
    Persist {
        /// The record's position: records are numbered 1, 2, 3, … and become durable in that order.
        lsn: Lsn,
        /// The record.
        record: LogRecord,
    },
    /// Read this partition's durable log from just after `after`, at most
    /// [`LOG_READ_RECORDS`](crate::replication::LOG_READ_RECORDS) records, and hand them to
    /// [`Partition::handle_log_read`] (replication catching a peer DC up from the log).
    ReadLog {
        /// Read the records after this position.
        after: Lsn,
    },
}

#[derive(Clone, Debug)]
struct PreparedTx {
    snapshot: VectorClock,
    prepare_time: Timestamp,
    writes: Vec<(ObjectId, Effect)>,
    /// The commit vector, once the coordinator decided and the commit record is on its way to disk.
    committing: Option<VectorClock>,
    /// When to ask the coordinator about the outcome, should it not come.
    query_at_us: u64,
    /// The coordinator is gone and a termination asked about this transaction: the coordinator's decisions are
    /// ignored; the termination's decide.
    fenced: bool,
    /// The log position of its prepare record, from which replication reads it back.
    lsn: Lsn,
}

/// What happens once a log position is durable.
#[derive(Clone, Debug)]
enum AfterDurable {
    /// Release a message that promises what the record holds.
    Send(Envelope),
    /// Apply a record this partition wrote (and staged when it wrote it: see the `apply` module), then release
    /// the reply, if any.
    Apply(LogRecord, Option<Envelope>),
    /// A remote transaction from this origin, applied when it was logged, is durable: it may be acknowledged.
    RemoteDurable(DcId),
}

/// A partition of one DC, over a multi-version object store `S` (the in-memory [`Store`] unless built with
/// [`Partition::with_store`]).
#[derive(Debug)]
pub struct Partition<S = Store> {
    id: PartitionId,
    config: Config,
    /// Where the DC's other partitions and the peer DCs are: who a termination asks, who replication ships to
    /// and hears from.
    topology: Topology,
    clock: Clock,
    /// The latest snapshot this partition can serve (Cure Table II).
    pvc: VectorClock,
    /// The DC's garbage-collection frontier as last published (sent to peer DCs under partial replication).
    dc_gc: Option<VectorClock>,
    /// The peer DCs' frontiers, from their replication streams (partial replication: `collect`), with when the
    /// last one arrived.
    peer_gc: BTreeMap<DcId, (VectorClock, u64)>,
    /// When this DC's frontier next goes to its ring-mates.
    next_gc_us: u64,
    /// Writes shipped to other DCs (each write once per DC it went to, resends included), and their encoded bytes.
    shipped: (u64, u64),
    /// With caches: notices of writes (to objects this DC does not hold; without partial replication, of every
    /// write), for the coordinators' caches ([`crate::away`]).
    away: Option<away::Stream>,
    store: S,
    prepared: BTreeMap<TxId, PreparedTx>,
    /// Prepare times of `prepared`, to find the smallest quickly.
    prepare_times: BTreeSet<(Timestamp, TxId)>,
    waiting: Vec<Waiting>,
    last_lsn: Lsn,
    durable_lsn: Lsn,
    after_durable: VecDeque<(Lsn, AfterDurable)>,
    outputs: VecDeque<PartitionOutput>,
    next_report_us: u64,
    recent_commits: VecDeque<(TxId, VectorClock)>,
    /// Terminations this partition leads.
    terminations: BTreeMap<TxId, Termination>,
    /// Transactions this partition promised never to prepare, oldest first.
    fenced: VecDeque<TxId>,
    /// How its coordinators' recent transactions ended here (`decided.rs`).
    decided: Decided,
    /// Prepares turned away as duplicates of transactions that had ended here.
    duplicate_prepares: u64,
    replicator: Replicator,
    inbound: BTreeMap<DcId, Inbound>,
    /// Per origin, the commit times of the remote transactions this partition logged (and applied) whose records
    /// are not durable yet, in log order: what it may not acknowledge yet (`Partition::durable_from`).
    remote_pending: BTreeMap<DcId, VecDeque<Timestamp>>,
    /// Per origin, the stream position of the last remote transaction applied.
    remote_applied: BTreeMap<DcId, (Timestamp, TxId)>,
    next_replication_us: u64,
    /// The durable bound on the hybrid clock, and the messages waiting for it (`bound.rs`).
    bound: BoundKeeper,
    /// A replica of a Raft group (`crate::replica`): its log is the group's, its records durable once committed,
    /// and its clock is bounded whatever its kind (a new leader starts above what the old one exposed).
    replicated: bool,
    /// A replica that does not lead: the snapshot it may serve reads at ([`Partition::read_applied`]).
    closed: Option<VectorClock>,
    /// The largest prepare or commit time of the records applied: a replica that takes the lead starts its clock
    /// above it.
    exposed: Timestamp,
    /// What the peer DCs acknowledged, as last logged (replicated partitions: [`LogRecord::PeerAcked`]), and when
    /// a leader may next log it.
    acks_logged: Vec<(DcId, Timestamp)>,
    next_acks_log_us: u64,
}

// The constructors that name no store build a partition over the in-memory `Store`; they live in their own impl
// block so that `Partition::new(..)` infers the default store, as `HashMap::new` does its default hasher.
impl Partition {
    /// A new, empty partition. `now_us` is the local physical clock.
    pub fn new(id: PartitionId, config: Config, now_us: u64) -> Self {
        let store = Store::new(config.vector_len());
        Self::with_store(id, config, now_us, store)
    }

    /// A replica of a replicated partition, empty, as a follower: it only applies committed records
    /// ([`Partition::apply_committed`]) until [`Partition::take_lead`] makes it serve.
    pub fn replica(id: PartitionId, config: Config, now_us: u64) -> Self {
        let store = Store::new(config.vector_len());
        let mut p = Self::blank(id, config, now_us, store);
        p.replicated = true;
        p
    }

    /// A replica of a replicated partition restored from its complete checkpoint (none: empty), as a follower,
    /// like [`Partition::replica`]: its clock starts when it takes the lead, above everything the checkpoint shows
    /// exposed.
    pub fn restore_replica(id: PartitionId, config: Config, now_us: u64, checkpoint: Option<Checkpoint>) -> Self {
        let store = Store::new(config.vector_len());
        let mut p = Self::blank(id, config, now_us, store);
        p.replicated = true;
        Self::rebuild(p, now_us, checkpoint, [])
    }

    /// Rebuilds a partition from its durable log, in log order. Prepared transactions without a decision stay
    /// prepared (holding pvc back) until their coordinator answers [`Message::QueryOutcome`] or the node resolves
    /// them ([`Partition::undecided`]).
    pub fn recover(
        id: PartitionId,
        config: Config,
        now_us: u64,
        records: impl IntoIterator<Item = (Lsn, LogRecord)>,
    ) -> Self {
        Self::restore(id, config, now_us, None, records)
    }

    /// Rebuilds a partition from a complete checkpoint (every object) and the log records after it.
    pub fn restore(
        id: PartitionId,
        config: Config,
        now_us: u64,
        checkpoint: Option<Checkpoint>,
        tail: impl IntoIterator<Item = (Lsn, LogRecord)>,
    ) -> Self {
        let store = Store::new(config.vector_len());
        Self::restore_with_store(id, config, now_us, store, checkpoint, tail)
    }
}

impl<S: VersionStore> Partition<S> {
    /// A new partition over `store`, which must be empty and hold vectors of [`Config::vector_len`] entries.
    /// `now_us` is the local physical clock.
    pub fn with_store(id: PartitionId, config: Config, now_us: u64, store: S) -> Self {
        let mut p = Self::blank(id, config, now_us, store);
        // A hybrid clock's first bound, so that the first messages need not wait for one (`bound.rs`).
        p.renew_bound();
        p
    }

    /// A partition over `store` that has logged nothing.
    fn blank(id: PartitionId, config: Config, now_us: u64, store: S) -> Self {
        assert!(id.0 < config.partitions, "partition {} outside 0..{}", id.0, config.partitions);
        let dcs = config.vector_len();
        let topology = Topology::of_config(&config);
        Self {
            id,
            clock: Clock::new(config.clock),
            pvc: VectorClock::zero(dcs),
            dc_gc: None,
            peer_gc: BTreeMap::new(),
            next_gc_us: now_us,
            shipped: (0, 0),
            away: config.cache.is_some().then(|| away::Stream::new(dcs)),
            store,
            prepared: BTreeMap::new(),
            prepare_times: BTreeSet::new(),
            waiting: Vec::new(),
            last_lsn: Lsn(0),
            durable_lsn: Lsn(0),
            after_durable: VecDeque::new(),
            outputs: VecDeque::new(),
            next_report_us: now_us,
            recent_commits: VecDeque::new(),
            terminations: BTreeMap::new(),
            fenced: VecDeque::new(),
            decided: Decided::default(),
            duplicate_prepares: 0,
            replicator: Replicator::new(
                config.dc,
                topology.replication_targets(id),
                config.resend_after_us,
                config.replication_window,
            ),
            inbound: topology.replication_sources(id).into_iter().map(|d| (d, Inbound::default())).collect(),
            topology,
            remote_pending: BTreeMap::new(),
            remote_applied: BTreeMap::new(),
            next_replication_us: now_us,
            bound: BoundKeeper::default(),
            replicated: false,
            closed: None,
            exposed: Timestamp::ZERO,
            acks_logged: Vec::new(),
            next_acks_log_us: now_us,
            config,
        }
    }

    /// [`Partition::restore`] over `store`, which must be empty and hold vectors of [`Config::vector_len`]
    /// entries.
    pub fn restore_with_store(
        id: PartitionId,
        config: Config,
        now_us: u64,
        store: S,
        checkpoint: Option<Checkpoint>,
        tail: impl IntoIterator<Item = (Lsn, LogRecord)>,
    ) -> Self {
        Self::rebuild(Self::blank(id, config, now_us, store), now_us, checkpoint, tail)
    }

    /// A checkpoint of everything up to the last record handed out. Its object images cover only the objects
    /// changed since the previous call. The driver must make it durable after every record up to its `lsn`.
    pub fn take_checkpoint(&mut self) -> Checkpoint {
        self.checkpoint()
    }

    /// Local transactions some peer DC has not acknowledged, in memory (at most about
    /// [`Config::replication_window`]; the rest are read back from the log).
    pub fn replication_backlog(&self) -> usize {
        self.replicator.backlog()
    }

    /// Per peer DC, how far behind this partition's clock its acknowledgement is, in microseconds
    /// ([`crate::replication::Replicator::ack_lag_us`]).
    pub fn replication_lag_us(&self) -> Vec<(DcId, u64)> {
        self.replicator.ack_lag_us(self.pvc.get(self.config.dc))
    }

    /// Times this partition sent another DC everything after what it acknowledged again (go-back-N), since it
    /// was built: because the DC fell silent, and because it asked.
    pub fn replication_go_backs(&self) -> (u64, u64) {
        self.replicator.go_backs()
    }

    /// Whether some local transactions a peer DC has not acknowledged are in the log only.
    pub fn replication_spilled(&self) -> bool {
        self.replicator.spilled()
    }

    /// The driver read the log as a [`PartitionOutput::ReadLog`] asked: the records after its position, ascending,
    /// fewer than asked (or none) where the log ends.
    pub fn handle_log_read(&mut self, records: Vec<(Lsn, LogRecord)>) {
        self.replicator.log_read(records);
        self.ask_log_read();
    }

    /// Remote transactions received and not yet applied, per origin DC.
    pub fn inbound_backlog(&self) -> Vec<(DcId, usize)> {
        self.inbound.iter().map(|(d, i)| (*d, i.queue.len())).collect()
    }

    /// Transactions prepared here whose decision is unknown: their coordinator's answer (or, when it is gone, a
    /// termination) settles them.
    pub fn undecided(&self) -> Vec<TxId> {
        self.prepared.iter().filter(|(_, p)| p.committing.is_none()).map(|(tx, _)| *tx).collect()
    }

    /// The commit vector of a transaction committed here recently.
    pub fn recent_commit(&self, tx: TxId) -> Option<&VectorClock> {
        self.recent_commits.iter().rev().find(|(t, _)| *t == tx).map(|(_, c)| c)
    }

    /// This partition's id.
    pub fn id(&self) -> PartitionId {
        self.id
    }

    /// The clock's last timestamp, and the largest clock bound logged (`bound.rs`).
    pub fn clock_and_bound(&self) -> (Timestamp, Timestamp) {
        (self.clock.last(), self.bound.logged())
    }

    /// The pvc as last computed.
    pub fn pvc(&self) -> &VectorClock {
        &self.pvc
    }

    /// Transactions prepared and not yet decided (or whose commit is not yet durable).
    pub fn prepared_count(&self) -> usize {
        self.prepared.len()
    }

    /// Requests waiting for their snapshot.
    pub fn waiting_count(&self) -> usize {
        self.waiting.len()
    }

    /// Prepares turned away since this partition was built, as duplicates of transactions that had ended here
    /// (resent after a leader change, or passed on by a deposed leader).
    pub fn duplicate_prepares(&self) -> u64 {
        self.duplicate_prepares
    }

    /// Writes shipped to other DCs since this partition was built (each once per DC it went to, resends
    /// included), and their encoded bytes: what replication carries beyond its bookkeeping.
    pub fn shipped_writes(&self) -> (u64, u64) {
        self.shipped
    }

    /// Counters of the object store.
    pub fn store_stats(&self) -> &StoreStats {
        self.store.stats()
    }

    /// Objects ever written, and effects kept unfolded.
    pub fn store_size(&self) -> (usize, usize) {
        (self.store.objects(), self.store.versions())
    }

    /// The objects this partition stores that its DC does not hold (partial replication): none, ever.
    pub fn misplaced_objects(&self) -> Vec<crate::ObjectId> {
        let all = self.store.ids_after(None, usize::MAX);
        all.into_iter().filter(|o| !self.holds(o)).collect()
    }

    /// The last log position handed out, and the last reported durable.
    pub fn lsns(&self) -> (Lsn, Lsn) {
        (self.last_lsn, self.durable_lsn)
    }

    /// Hands over the next output, if any. Drain after every input.
    pub fn poll_output(&mut self) -> Option<PartitionOutput> {
        self.outputs.pop_front()
    }

    /// The local time at which [`Partition::handle_timeout`] must next be called.
    pub fn poll_timeout(&self) -> Option<u64> {
        let mut next = self.next_report_us;
        if self.config.dcs > 1 {
            next = next.min(self.next_replication_us);
        }
        for w in &self.waiting {
            next = next.min(w.deadline_us);
            if let Some(at) = self.clock_wait_us(&w.request) {
                next = next.min(at);
            }
        }
        for p in self.prepared.values() {
            if p.committing.is_none() {
                next = next.min(p.query_at_us);
            }
        }
        Some(next)
    }

    /// Timers: pvc reports, requests waiting for the clock or giving up, outcome queries.
    pub fn handle_timeout(&mut self, now_us: u64) {
        self.refresh_pvc(now_us);
        self.renew_bound();
        if self.replicated && now_us >= self.next_acks_log_us {
            self.next_acks_log_us = now_us + crate::record::ACKS_LOG_INTERVAL_US;
            let acked = self.replicator.acked_image();
            // Only while the logged image leaves some local transaction out: once it covers every commit, the
            // acknowledgements that keep moving with the peers' heartbeats tell a follower or a new leader nothing
            // it does not know (no transaction lies between), and an idle group's log takes no record for them.
            let logged =
                |peer: DcId| self.acks_logged.iter().find(|(d, _)| *d == peer).map_or(Timestamp::ZERO, |a| a.1);
            let newest = self.replicator.newest();
            let uncovered = acked.iter().any(|(peer, _)| logged(*peer) < newest);
            if acked != self.acks_logged && uncovered {
                self.persist(LogRecord::PeerAcked { acked: acked.clone() });
                self.acks_logged = acked;
            }
        }
        if now_us >= self.next_report_us {
            let read_here =
                self.topology.readers(self.id).next().is_some() || self.topology.far_readers(self.id).next().is_some();
            let frontier = read_here.then(|| self.store.frontier().clone());
            let away = self.away.as_mut().map(|a| a.report(&self.pvc, self.config.dc, self.clock.last()));
            self.send(
                Address::Stabilizer,
                Message::PvcReport { pvc: self.pvc.clone(), at: None, committed: None, frontier, away },
            );
            self.next_report_us = now_us + self.config.stable_interval_us.max(1);
        }
        if self.config.dcs > 1 && now_us >= self.next_replication_us {
            self.next_replication_us = now_us + self.config.replication_interval_us.max(1);
            self.replicate(now_us);
        }
        let mut queries = Vec::new();
        for (tx, p) in self.prepared.iter_mut() {
            if p.committing.is_none() && now_us >= p.query_at_us {
                p.query_at_us = now_us + self.config.retry_interval_us.max(1);
                queries.push(*tx);
            }
        }
        for tx in queries {
            if self.terminations.contains_key(&tx) {
                self.ask_status(tx);
            } else {
                self.send(Address::Coordinator(tx.coordinator), Message::QueryOutcome { tx });
            }
        }
        self.serve_waiting(now_us);
    }

    /// The driver reports every record up to `lsn` durable.
    pub fn handle_persisted(&mut self, now_us: u64, lsn: Lsn) {
        assert!(lsn <= self.last_lsn, "durable position {lsn:?} was never handed out");
        if lsn <= self.durable_lsn {
            return;
        }
        self.durable_lsn = lsn;
        for envelope in self.bound.release(lsn) {
            self.outputs.push_back(PartitionOutput::Send(envelope));
        }
        let mut applied = false;
        while self.after_durable.front().is_some_and(|(at, _)| *at <= lsn) {
            let (lsn_of_action, action) = self.after_durable.pop_front().expect("front exists");
            match action {
                AfterDurable::Send(envelope) => self.emit(envelope),
                AfterDurable::RemoteDurable(origin) => self.remote_durable(origin),
                AfterDurable::Apply(record, reply) => {
                    self.apply(now_us, lsn_of_action, record);
                    if let Some(envelope) = reply {
                        self.emit(envelope);
                    }
                    applied = true;
                }
            }
        }
        if applied {
            self.process_inbound(now_us);
            self.serve_waiting(now_us);
        }
    }

    /// A message from another state machine of the DC.
    pub fn handle_message(&mut self, now_us: u64, from: Address, msg: Message) {
        match msg {
            Message::Read { tx, request, snapshot, objects, .. } => {
                self.on_request(now_us, Request::Read { from, tx, request, snapshot, objects, boxes: false })
            }
            Message::Fetch { tx, request, snapshot, objects } => {
                self.on_request(now_us, Request::Read { from, tx, request, snapshot, objects, boxes: true })
            }
            Message::Prepare { tx, snapshot, writes, oldest_open } => {
                self.on_prepare(now_us, Prepare { from, tx, snapshot, writes, alone: false, oldest_open })
            }
            Message::PrepareAndCommit { tx, snapshot, writes, oldest_open } => {
                self.on_prepare(now_us, Prepare { from, tx, snapshot, writes, alone: true, oldest_open })
            }
            Message::Commit { tx, commit } => self.on_commit(from, tx, commit),
            Message::Abort { tx } => self.on_abort(now_us, from, tx),
            Message::Stable { stable, gc, .. } => self.on_stable(now_us, stable, gc),
            Message::CoordinatorGone { tx } => self.on_coordinator_gone(now_us, tx),
            Message::TxStatus { tx } => {
                if let Address::Partition(_) = from {
                    self.on_status_query(from, tx);
                }
            }
            Message::TxStatusReply { tx, status } => {
                if let Address::Partition(q) = from {
                    self.on_status_reply(now_us, q, tx, status);
                }
            }
            Message::Replicate { since, txs, up_to, gc, away } => {
                if let Address::Peer(origin, _) = from {
                    self.note_peer_gc(now_us, origin, gc);
                    // Notices go to the stream as they arrive, before pvc passes their transactions.
                    if let Some(stream) = &mut self.away {
                        for (i, fingerprint) in away {
                            if let Some(t) = txs.get(i as usize) {
                                stream.notice(origin, fingerprint, t.commit.get(origin));
                            }
                        }
                    }
                    self.on_replicate(now_us, origin, since, txs, up_to);
                }
            }
            Message::ReplicateAck { up_to, gap } => {
                if let Address::Peer(peer, _) = from {
                    self.replicator.acked(peer, up_to, gap, now_us);
                }
            }
            // Messages for other state machines: a misrouted message is dropped, never a crash.
            _ => {}
        }
    }

    fn on_stable(&mut self, now_us: u64, stable: VectorClock, gc: VectorClock) {
        if gc.has_dcs(self.config.vector_len()) {
            self.collect(now_us, gc);
        }
        if stable.has_dcs(self.config.vector_len()) {
            // Every partition's pvc passed these commits, so none still holds them prepared: no termination will
            // ask about them again.
            let local = stable.get(self.config.dc);
            self.recent_commits.retain(|(_, commit)| commit.get(self.config.dc) > local);
        }
    }

    /// Cure Alg. 2 UpdateClock: pvc[j] follows the clock but stays below the smallest prepare time.
    fn refresh_pvc(&mut self, now_us: u64) {
        let local = self.config.dc;
        let mut candidate = self.clock.current(now_us);
        if !bugs::has(&self.config, Bug::IgnorePreparedInPvc) {
            if let Some((min_prepared, _)) = self.prepare_times.first() {
                candidate = candidate.min(min_prepared.prev());
            }
        }
        let old = self.pvc.get(local);
        if bugs::checks_invariants(&self.config) {
            assert!(candidate >= old, "cure: pvc never moves backwards ({candidate} < {old})");
        }
        self.pvc.set(local, candidate.max(old));
        // Remote entries: everything of an origin below its queue's head is applied, and nothing else is coming at
        // or below the origin's promise.
        for (origin, inbound) in &self.inbound {
            let mut bound = inbound.up_to;
            if let Some(head) = inbound.queue.front() {
                bound = bound.min(head.commit.get(*origin).prev());
            }
            if bound > self.pvc.get(*origin) {
                self.pvc.set(*origin, bound);
            }
        }
    }

    fn persist(&mut self, record: LogRecord) -> Lsn {
        let upkeep = matches!(record, LogRecord::ClockBound { .. } | LogRecord::PeerAcked { .. });
        self.last_lsn = Lsn(self.last_lsn.0 + 1);
        let lsn = self.last_lsn;
        self.outputs.push_back(PartitionOutput::Persist { lsn, record });
        if !upkeep {
            self.renew_bound_within(BOUND_RIDE_DIVISOR);
        }
        lsn
    }

    fn send(&mut self, to: Address, msg: Message) {
        let envelope = self.envelope(to, msg);
        self.emit(envelope);
    }

    /// The one way a message leaves: at once if a durable clock bound covers the clock (`bound.rs`), else once
    /// one does, in the order sent.
    fn emit(&mut self, envelope: Envelope) {
        let clock = self.clock.last();
        if !self.keeps_bound() || self.bound.may_send(clock) {
            self.outputs.push_back(PartitionOutput::Send(envelope));
            return;
        }
        if clock > self.bound.logged() {
            self.log_bound(clock);
        }
        self.bound.hold(clock, envelope);
    }

    /// Logs a clock bound `clock_bound_us` past `clock`.
    fn log_bound(&mut self, clock: Timestamp) {
        let until = Timestamp::from_micros(clock.micros().saturating_add(self.config.clock_bound_us.max(1)));
        let lsn = self.persist(LogRecord::ClockBound { until });
        self.bound.logged_at(lsn, until);
    }

    /// Renews the clock bound ahead of the clock, so that messages need not wait for one.
    fn renew_bound(&mut self) {
        self.renew_bound_within(BOUND_RENEW_DIVISOR);
    }

    /// Logs a new clock bound if the clock is within `clock_bound_us / divisor` of the last one: at a quarter on the
    /// timer ([`BOUND_RENEW_DIVISOR`]), at half right after a record the partition logs anyway
    /// ([`BOUND_RIDE_DIVISOR`]).
    fn renew_bound_within(&mut self, divisor: u64) {
        let clock = self.clock.last();
        if self.keeps_bound() && self.bound.due(clock, self.config.clock_bound_us / divisor) {
            self.log_bound(clock);
        }
    }

    /// Whether messages wait for a durable clock bound: a hybrid clock may run ahead of physical time, and a
    /// replica's successor may have a slower clock (`bound.rs`).
    fn keeps_bound(&self) -> bool {
        self.config.clock == ClockKind::Hybrid || self.replicated
    }

    /// An envelope from this partition.
    pub(crate) fn envelope(&self, to: Address, msg: Message) -> Envelope {
        // An answer to another DC's coordinator (a read of an object only some DCs hold) names this DC.
        let from = match to {
            Address::DcCoordinator(dc, _) if dc != self.config.dc => Address::Peer(self.config.dc, self.id),
            _ => Address::Partition(self.id),
        };
        Envelope { from, to, msg }
    }

    /// Garbage collection up to the DC's frontier `gc` (the stabilizer's) — and, where other DCs read objects
    /// from this one (partial replication), no further than any of their frontiers, the lowest snapshot they read
    /// at. Ring-mates ([`Topology::readers`]) read here whenever they read these objects: until every one of them
    /// has told its frontier, nothing is collected. Readers of other rings ([`Topology::far_readers`]: reads from
    /// the nearest ring) read here only while this DC is the fastest holder they measure: their frontiers count
    /// while fresh ([`FAR_READER_FRESH_INTERVALS`] report periods), and a read of theirs at a snapshot already
    /// collected is refused, and asked of another ring (never served wrong).
    fn collect(&mut self, now_us: u64, gc: VectorClock) {
        let mut lowered: Option<VectorClock> = None;
        for reader in self.topology.readers(self.id) {
            match self.peer_gc.get(&reader) {
                Some((theirs, _)) => lowered.get_or_insert_with(|| gc.clone()).merge_min(theirs),
                None => return,
            }
        }
        let fresh_us = FAR_READER_FRESH_INTERVALS * GC_REPORT_INTERVALS * self.config.stable_interval_us.max(100);
        for reader in self.topology.far_readers(self.id) {
            if let Some((theirs, at)) = self.peer_gc.get(&reader) {
                if now_us.saturating_sub(*at) <= fresh_us {
                    lowered.get_or_insert_with(|| gc.clone()).merge_min(theirs);
                }
            }
        }
        // Never past this partition's own pvc. The DC's frontier is below every pvc reported, but this partition's
        // may have fallen back below what its predecessor reported (a new leader, a restart: remote transactions
        // applied before their records were durable come again, `process_inbound`); a version that arrives below
        // the store's frontier would miss the versions already folded.
        let mut frontier = lowered.unwrap_or_else(|| gc.clone());
        frontier.merge_min(&self.pvc);
        self.store.collect(&frontier);
        self.dc_gc = Some(gc);
    }

    /// A peer's garbage-collection frontier, from its replication stream.
    fn note_peer_gc(&mut self, now_us: u64, peer: DcId, gc: Option<VectorClock>) {
        if let Some(gc) = gc.filter(|g| g.has_dcs(self.config.vector_len())) {
            let slot = self.peer_gc.entry(peer).or_insert_with(|| (gc.clone(), now_us));
            slot.0.merge_max(&gc);
            slot.1 = now_us;
        }
    }

    /// Whether this DC holds `object` (stores it): every object, unless its bucket is placed by rings
    /// ([`crate::placement`]).
    pub(super) fn holds(&self, object: &crate::ObjectId) -> bool {
        self.topology.holds_object(self.config.dc, object)
    }

    /// Whether the caches hear of writes to objects this DC holds too (`crate::away`): with caches and every
    /// object held everywhere, so that a cached state stays exact for as long as nobody wrote it. With partial
    /// replication the caches keep only objects held elsewhere, and hear only of those.
    pub(super) fn notices_held_writes(&self) -> bool {
        self.away.is_some() && !self.topology.placement().partial()
    }

    /// A write of origin `origin` to `object`, committed at `at` there, applied or left out here: a notice for the
    /// caches if they hear of it ([`Partition::notices_held_writes`]; writes to objects held elsewhere always).
    pub(super) fn notice_write(&mut self, origin: DcId, object: &crate::ObjectId, at: Timestamp) {
        let heard = self.notices_held_writes() || !self.holds(object);
        if let Some(stream) = self.away.as_mut().filter(|_| heard) {
            stream.notice(origin, object.fingerprint(), at);
        }
    }

    fn send_after_durable(&mut self, lsn: Lsn, to: Address, msg: Message) {
        let envelope = self.envelope(to, msg);
        if lsn <= self.durable_lsn {
            self.emit(envelope);
        } else {
            self.after_durable.push_back((lsn, AfterDurable::Send(envelope)));
        }
    }
}
