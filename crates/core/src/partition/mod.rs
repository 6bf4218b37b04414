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
//! # Termination of a transaction whose coordinator is gone
//!
//! Cure's two-phase commit blocks a prepared participant until its coordinator decides; in Cure (and AntidoteDB)
//! a coordinator that dies leaves its prepared transactions holding pvc back for good. Here a partition that
//! learns its transaction's coordinator is gone ([`Message::CoordinatorGone`], from the driver, which knows the
//! coordinator's node restarted) settles it with the DC's other partitions, a cooperative termination protocol
//! that needs no participant list:
//!
//! 1. it asks every other partition of the DC [`Message::TxStatus`];
//! 2. each answers from what it has, and promises to stick to it: `Committed(vector)` (durably committed, or
//!    remembered as such), `Prepared` (and from now on ignores the dead coordinator's commit or abort), or
//!    `Absent` (and from now on refuses to prepare it);
//! 3. one `Committed` answer decides commit at that vector; `Prepared` or `Absent` from every partition decides
//!    abort, and the asker sends its decision to the partitions that answered `Prepared`.
//!
//! Safety: a coordinator acknowledges a commit to its client only after every participant logged the commit, and
//! sends a commit only after every participant prepared; so if no partition has committed when all have been
//! fenced, no client was told the transaction committed and no partition can commit it any more: abort is safe.
//! A commit answer is given only once the commit record is durable, so it survives the answerer's crash, and a
//! partition remembers its commits until the DC's stable snapshot passes them (then no partition still holds the
//! transaction prepared, since a prepared transaction holds its partition's pvc below its commit time).

use crate::config::Bug;
use crate::message::{RemoteError, TxKnowledge};
use crate::record::{LogRecord, Lsn};
use crate::replication::{Inbound, ReplicatedTx, Sender};
use crate::store::{ObjectImage, Store, StoreStats};
use crate::DcId;
use crate::{
    Address, Clock, ClockKind, Config, Envelope, Message, ObjectId, PartitionId, Timestamp, TxId, VectorClock,
};
use causet_crdt::{CrdtType, Effect, Stamp};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// How many transactions a partition remembers it promised never to prepare (termination answers `Absent`). The
/// promise guards against a dead coordinator's prepare still in flight; messages are not in flight for long, so
/// the oldest promises are dropped beyond this many.
const FENCE_MEMORY: usize = 100_000;

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
    /// Local transactions some peer DC has not acknowledged yet.
    #[serde(default)]
    pub unreplicated: Vec<ReplicatedTx>,
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
}

/// A termination in progress at the partition that started it.
#[derive(Clone, Debug, Default)]
struct Termination {
    /// Partitions that answered (this one included).
    answered: BTreeSet<PartitionId>,
    /// Partitions that answered `Prepared` (this one included): they wait for the decision.
    prepared: BTreeSet<PartitionId>,
}

#[derive(Clone, Debug)]
enum Request {
    Read { from: Address, tx: TxId, request: u64, snapshot: VectorClock, objects: Vec<ObjectId> },
    Prepare { from: Address, tx: TxId, snapshot: VectorClock, writes: Vec<(ObjectId, Effect)>, alone: bool },
}

impl Request {
    fn snapshot(&self) -> &VectorClock {
        match self {
            Request::Read { snapshot, .. } | Request::Prepare { snapshot, .. } => snapshot,
        }
    }
}

#[derive(Clone, Debug)]
struct Waiting {
    request: Request,
    /// When the request gives up.
    deadline_us: u64,
}

/// What happens once a log position is durable.
#[derive(Clone, Debug)]
enum AfterDurable {
    Send(Envelope),
    /// Make the commit visible, then tell the coordinator.
    ApplyCommit(TxId, Message),
    /// Make the first pending remote transaction of this origin visible.
    ApplyRemote(DcId),
}

/// A partition of one DC.
#[derive(Debug)]
pub struct Partition {
    id: PartitionId,
    config: Config,
    clock: Clock,
    /// The latest snapshot this partition can serve (Cure Table II).
    pvc: VectorClock,
    store: Store,
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
    sender: Sender,
    inbound: BTreeMap<DcId, Inbound>,
    /// Origin commit times of remote transactions persisted but not yet applied, per origin.
    remote_pending: BTreeMap<DcId, VecDeque<ReplicatedTx>>,
    /// Per origin, the stream position of the last remote transaction applied.
    remote_applied: BTreeMap<DcId, (Timestamp, TxId)>,
    next_replication_us: u64,
}

impl Partition {
    /// A new, empty partition. `now_us` is the local physical clock.
    pub fn new(id: PartitionId, config: Config, now_us: u64) -> Self {
        assert!(id.0 < config.partitions, "partition {} outside 0..{}", id.0, config.partitions);
        let dcs = config.vector_len();
        Self {
            id,
            clock: Clock::new(config.clock),
            pvc: VectorClock::zero(dcs),
            store: Store::new(dcs),
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
            sender: Sender::new(config.dc, config.dcs, config.resend_after_us),
            inbound: (0..config.dcs).map(DcId).filter(|d| *d != config.dc).map(|d| (d, Inbound::default())).collect(),
            remote_pending: BTreeMap::new(),
            remote_applied: BTreeMap::new(),
            next_replication_us: now_us,
            config,
        }
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
        let mut p = Partition::new(id, config, now_us);
        let mut floor = Timestamp::ZERO;
        let local = p.config.dc;
        if let Some(c) = checkpoint {
            p.last_lsn = c.lsn;
            floor = c.clock;
            p.store.restore_frontier(c.frontier);
            for (object, image) in c.objects {
                p.store.load(object, image);
            }
            for (tx, commit) in c.recent_commits {
                p.remember_commit(tx, commit);
            }
            p.sender.restore(c.unreplicated, c.peer_acked);
            if let Some(pvc) = c.pvc.filter(|v| v.has_dcs(p.config.vector_len())) {
                for (dc, inbound) in p.inbound.iter_mut() {
                    inbound.received_through(pvc.get(*dc));
                }
                let local_entry = p.pvc.get(local);
                p.pvc = pvc;
                p.pvc.set(local, local_entry);
            }
            for (origin, at, tx) in c.remote_applied {
                if let Some(inbound) = p.inbound.get_mut(&origin) {
                    inbound.received = inbound.received.max((at, Some(tx)));
                }
                p.remote_applied.insert(origin, (at, tx));
            }
            for (origin, tx) in c.remote_pending {
                p.replay_remote(origin, tx);
            }
            for image in c.prepared {
                floor = floor.max(image.prepare_time);
                p.insert_prepared(image.tx, image.snapshot, image.prepare_time, image.writes, now_us);
                if let Some(commit) = image.commit {
                    p.prepared.get_mut(&image.tx).expect("just inserted").committing = Some(commit);
                    p.apply_commit(image.tx);
                }
            }
        }
        for (lsn, record) in tail {
            if lsn <= p.last_lsn {
                continue; // Covered by the checkpoint (truncation may lag behind it).
            }
            p.last_lsn = lsn;
            match record {
                LogRecord::Prepared { tx, snapshot, prepare_time, writes } => {
                    floor = floor.max(prepare_time);
                    p.insert_prepared(tx, snapshot, prepare_time, writes, now_us);
                }
                LogRecord::Committed { tx, commit } => {
                    floor = floor.max(commit.get(local));
                    if let Some(prepared) = p.prepared.get_mut(&tx) {
                        prepared.committing = Some(commit);
                        p.apply_commit(tx);
                    }
                }
                LogRecord::CommittedAlone { tx, snapshot, commit, writes } => {
                    let prepare_time = commit.get(local);
                    floor = floor.max(prepare_time);
                    p.insert_prepared(tx, snapshot, prepare_time, writes, now_us);
                    p.prepared.get_mut(&tx).expect("just inserted").committing = Some(commit);
                    p.apply_commit(tx);
                }
                LogRecord::Remote { origin, tx } => p.replay_remote(origin, tx),
                LogRecord::Aborted { tx } => {
                    p.remove_prepared(tx);
                }
            }
        }
        p.durable_lsn = p.last_lsn;
        // Before the crash this partition may have exposed (in pvc reports and reads) timestamps up to its clock,
        // which a hybrid clock may have pushed up to `max_clock_ahead_us` past physical time. Never issue a prepare
        // time at or below those: start above both the log and that bound.
        if p.config.clock == ClockKind::Hybrid {
            floor = floor.max(Timestamp::from_micros(now_us.saturating_add(p.config.max_clock_ahead_us)));
        }
        p.clock.raise_floor(floor);
        p.refresh_pvc(now_us);
        p
    }

    /// A checkpoint of everything up to the last record handed out. Its object images cover only the objects
    /// changed since the previous call. The driver must make it durable after every record up to its `lsn`.
    pub fn take_checkpoint(&mut self) -> Checkpoint {
        Checkpoint {
            lsn: self.last_lsn,
            clock: self.clock.last(),
            frontier: self.store.frontier().clone(),
            objects: self.store.take_dirty_images(),
            prepared: self
                .prepared
                .iter()
                .map(|(tx, p)| PreparedImage {
                    tx: *tx,
                    snapshot: p.snapshot.clone(),
                    prepare_time: p.prepare_time,
                    writes: p.writes.clone(),
                    commit: p.committing.clone(),
                })
                .collect(),
            recent_commits: self.recent_commits.iter().cloned().collect(),
            unreplicated: self.sender.image().0,
            peer_acked: self.sender.image().1,
            pvc: Some(self.pvc.clone()),
            remote_applied: self.remote_applied.iter().map(|(d, (at, tx))| (*d, *at, *tx)).collect(),
            remote_pending: self
                .remote_pending
                .iter()
                .flat_map(|(origin, txs)| txs.iter().map(|tx| (*origin, tx.clone())))
                .collect(),
        }
    }

    /// Local transactions some peer DC has not acknowledged.
    pub fn replication_backlog(&self) -> usize {
        self.sender.backlog()
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

    fn remember_commit(&mut self, tx: TxId, commit: VectorClock) {
        self.recent_commits.push_back((tx, commit));
    }

    /// This partition's id.
    pub fn id(&self) -> PartitionId {
        self.id
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

    /// Counters of the object store.
    pub fn store_stats(&self) -> &StoreStats {
        self.store.stats()
    }

    /// Objects ever written, and effects kept unfolded.
    pub fn store_size(&self) -> (usize, usize) {
        (self.store.len(), self.store.versions())
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
        if now_us >= self.next_report_us {
            self.send(Address::Stabilizer, Message::PvcReport { pvc: self.pvc.clone() });
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
        let mut applied = false;
        while self.after_durable.front().is_some_and(|(at, _)| *at <= lsn) {
            let (_, action) = self.after_durable.pop_front().expect("front exists");
            match action {
                AfterDurable::Send(envelope) => self.outputs.push_back(PartitionOutput::Send(envelope)),
                AfterDurable::ApplyCommit(tx, reply) => {
                    self.apply_commit(tx);
                    self.send(Address::Coordinator(tx.coordinator), reply);
                    applied = true;
                }
                AfterDurable::ApplyRemote(origin) => {
                    let tx = self.remote_pending.get_mut(&origin).and_then(|p| p.pop_front());
                    let tx = tx.expect("a remote transaction is pending until applied, in order");
                    self.apply_remote(origin, tx);
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
            Message::Read { tx, request, snapshot, objects } => {
                self.on_request(now_us, Request::Read { from, tx, request, snapshot, objects })
            }
            Message::Prepare { tx, snapshot, writes } => {
                self.on_request(now_us, Request::Prepare { from, tx, snapshot, writes, alone: false })
            }
            Message::PrepareAndCommit { tx, snapshot, writes } => {
                self.on_request(now_us, Request::Prepare { from, tx, snapshot, writes, alone: true })
            }
            Message::Commit { tx, commit } => self.on_commit(from, tx, commit),
            Message::Abort { tx } => self.on_abort(now_us, from, tx),
            Message::Stable { stable, gc } => self.on_stable(stable, gc),
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
            Message::Replicate { since, txs, up_to } => {
                let Address::Peer(origin, _) = from else { return };
                let Some(inbound) = self.inbound.get_mut(&origin) else { return };
                if txs.iter().any(|t| {
                    !t.commit.has_dcs(self.config.vector_len()) || !t.snapshot.has_dcs(self.config.vector_len())
                }) {
                    return; // Malformed: dropped; the sender resends.
                }
                inbound.receive(origin, since, txs, up_to);
                self.process_inbound(now_us);
                self.serve_waiting(now_us);
            }
            Message::ReplicateAck { up_to, gap } => {
                if let Address::Peer(peer, _) = from {
                    self.sender.acked(peer, up_to, gap, now_us);
                }
            }
            // Messages for other state machines: a misrouted message is dropped, never a crash.
            _ => {}
        }
    }

    fn on_request(&mut self, now_us: u64, request: Request) {
        let snapshot = request.snapshot();
        if let Err(e) = self.validate_snapshot(now_us, snapshot) {
            self.refuse(&request, e);
            return;
        }
        if let Some(request) = self.try_serve(now_us, request) {
            if self.waiting.len() >= self.config.max_waiting_requests {
                self.refuse(&request, RemoteError::Busy);
                return;
            }
            let deadline_us = now_us.saturating_add(self.config.wait_timeout_us);
            self.waiting.push(Waiting { request, deadline_us });
        }
    }

    fn validate_snapshot(&self, now_us: u64, snapshot: &VectorClock) -> Result<(), RemoteError> {
        if !snapshot.has_dcs(self.config.vector_len()) {
            return Err(RemoteError::InvalidSnapshot(format!(
                "{} entries for {} DCs",
                snapshot.len(),
                self.config.dcs
            )));
        }
        let local = snapshot.get(self.config.dc);
        let limit = now_us.saturating_add(self.config.max_clock_ahead_us);
        if local.micros() > limit && local > self.clock.last() {
            return Err(RemoteError::InvalidSnapshot(format!(
                "local entry {local} is more than {} µs ahead of this partition's clock",
                self.config.max_clock_ahead_us
            )));
        }
        Ok(())
    }

    /// Serves the request if its snapshot is available, else hands it back to wait.
    fn try_serve(&mut self, now_us: u64, request: Request) -> Option<Request> {
        let local = self.config.dc;
        let is_read = matches!(request, Request::Read { .. });
        let skip_wait =
            is_read && (self.config.bug == Some(Bug::SkipReadWait) || !self.config.protocol.reads_snapshots());
        let snapshot = request.snapshot();
        if !skip_wait {
            // With a hybrid clock the partition moves its clock up to the snapshot instead of waiting for physical
            // time to get there; only the wait for earlier prepared transactions remains.
            self.clock.observe(snapshot.get(local));
            self.refresh_pvc(now_us);
            let available = match &request {
                // Cure Alg. 2 line 6: the whole snapshot must be available here.
                Request::Read { .. } => snapshot.le(&self.pvc),
                // A prepare time must exceed the snapshot's local entry, so the commit lands above the snapshot.
                Request::Prepare { .. } => self.clock.current(now_us) >= snapshot.get(local),
            };
            if !available {
                return Some(request);
            }
        }
        match request {
            Request::Read { from, tx, request, snapshot, objects } => {
                let result = if self.config.protocol.reads_snapshots() {
                    objects.iter().map(|id| self.store.read(id, &snapshot)).collect()
                } else {
                    // Eventual consistency: the latest applied state, whatever the snapshot.
                    Ok(objects.iter().map(|id| self.store.latest(id)).collect())
                };
                self.send(from, Message::ReadReply { tx, request, result });
            }
            Request::Prepare { from, tx, snapshot, writes, alone } => {
                self.prepare(now_us, from, tx, snapshot, writes, alone)
            }
        }
        None
    }

    fn serve_waiting(&mut self, now_us: u64) {
        if self.waiting.is_empty() {
            return;
        }
        let waiting = std::mem::take(&mut self.waiting);
        for w in waiting {
            if let Some(request) = self.try_serve(now_us, w.request) {
                if now_us >= w.deadline_us {
                    self.refuse(&request, RemoteError::Timeout);
                } else {
                    self.waiting.push(Waiting { request, deadline_us: w.deadline_us });
                }
            }
        }
    }

    /// When a request waiting on the physical clock can next be served (physical clocks only).
    fn clock_wait_us(&self, request: &Request) -> Option<u64> {
        if self.config.clock != ClockKind::Physical {
            return None;
        }
        let snapshot = request.snapshot();
        let local = snapshot.get(self.config.dc);
        (local >= self.clock.last()).then(|| local.micros() + 1)
    }

    fn refuse(&mut self, request: &Request, reason: RemoteError) {
        match request {
            Request::Read { from, tx, request, .. } => {
                let msg = Message::ReadReply { tx: *tx, request: *request, result: Err(reason) };
                self.send(*from, msg);
            }
            Request::Prepare { from, tx, .. } => self.send(*from, Message::PrepareRefused { tx: *tx, reason }),
        }
    }

    fn prepare(
        &mut self,
        now_us: u64,
        from: Address,
        tx: TxId,
        snapshot: VectorClock,
        writes: Vec<(ObjectId, Effect)>,
        alone: bool,
    ) {
        if alone && self.prepared.contains_key(&tx) {
            return; // Already committing; the answer follows.
        }
        if self.fenced.contains(&tx) {
            // A termination was told this partition never prepared it: the dead coordinator's late prepare.
            let reason = RemoteError::CoordinatorGone;
            self.send(from, Message::PrepareRefused { tx, reason });
            return;
        }
        if let Some(p) = self.prepared.get(&tx) {
            // A resent prepare: answer again once the first record is durable (it may already be).
            let msg = Message::Prepared { tx, prepare_time: p.prepare_time };
            self.send_after_durable(self.last_lsn, from, msg);
            return;
        }
        if let Err(reason) = self.certify(tx, &snapshot, &writes) {
            self.send(from, Message::PrepareRefused { tx, reason });
            return;
        }
        let prepare_time = self.clock.tick(now_us);
        let local = self.config.dc;
        assert!(prepare_time > snapshot.get(local), "cure: a prepare time exceeds the snapshot's local entry");
        if self.config.bug.is_none() {
            assert!(prepare_time > self.pvc.get(local), "cure: a prepare time exceeds every pvc already exposed");
        }
        if alone {
            // One participant: its prepare time is the largest, so the transaction commits at it (Cure Alg. 1
            // line 33) in the same record; it stays prepared, holding pvc back, until the record is durable.
            let mut commit = snapshot.clone();
            commit.set(local, prepare_time);
            let record = LogRecord::CommittedAlone {
                tx,
                snapshot: snapshot.clone(),
                commit: commit.clone(),
                writes: writes.clone(),
            };
            self.insert_prepared(tx, snapshot, prepare_time, writes, now_us);
            self.prepared.get_mut(&tx).expect("just inserted").committing = Some(commit.clone());
            let lsn = self.persist(record);
            self.after_durable.push_back((lsn, AfterDurable::ApplyCommit(tx, Message::Committed { tx, commit })));
            return;
        }
        let record = LogRecord::Prepared { tx, snapshot: snapshot.clone(), prepare_time, writes: writes.clone() };
        self.insert_prepared(tx, snapshot, prepare_time, writes, now_us);
        let lsn = self.persist(record);
        self.send_after_durable(lsn, from, Message::Prepared { tx, prepare_time });
    }

    /// Checks that the transaction's effects may commit on top of what is already committed or prepared here:
    /// write-write certification when configured, and the bounded counter's rights in any case.
    fn certify(&self, tx: TxId, snapshot: &VectorClock, writes: &[(ObjectId, Effect)]) -> Result<(), RemoteError> {
        let local = self.config.dc;
        if self.config.certify_writes {
            for (id, _) in writes {
                let prepared_conflict =
                    self.prepared.iter().any(|(other, p)| *other != tx && p.writes.iter().any(|(o, _)| o == id));
                if prepared_conflict || self.store.written_by_dc_after(id, local, snapshot.get(local)) {
                    return Err(RemoteError::Conflict);
                }
            }
        }
        // Two transactions of this DC may both have spent the same bounded-counter rights in their snapshots:
        // validate against everything committed and prepared here, in order.
        let mut checked: Vec<&ObjectId> = Vec::new();
        for (id, _) in writes {
            if id.ty != CrdtType::CounterB || checked.contains(&id) {
                continue;
            }
            checked.push(id);
            let mut state = self.store.latest(id);
            let pending = self.prepared.values().flat_map(|p| p.writes.iter());
            for (_, effect) in pending.filter(|(o, _)| o == id) {
                state.apply(effect, Stamp::PENDING).map_err(RemoteError::Crdt)?;
            }
            for (_, effect) in writes.iter().filter(|(o, _)| o == id) {
                state.validate_effect(effect).map_err(RemoteError::Crdt)?;
                state.apply(effect, Stamp::PENDING).map_err(RemoteError::Crdt)?;
            }
        }
        Ok(())
    }

    fn insert_prepared(
        &mut self,
        tx: TxId,
        snapshot: VectorClock,
        prepare_time: Timestamp,
        writes: Vec<(ObjectId, Effect)>,
        now_us: u64,
    ) {
        let query_at_us = now_us.saturating_add(self.config.op_timeout_us.max(self.config.retry_interval_us));
        self.prepared
            .insert(tx, PreparedTx { snapshot, prepare_time, writes, committing: None, query_at_us, fenced: false });
        self.prepare_times.insert((prepare_time, tx));
    }

    fn remove_prepared(&mut self, tx: TxId) -> Option<PreparedTx> {
        let p = self.prepared.remove(&tx)?;
        self.prepare_times.remove(&(p.prepare_time, tx));
        Some(p)
    }

    fn on_commit(&mut self, from: Address, tx: TxId, commit: VectorClock) {
        let local = self.config.dc;
        if matches!(from, Address::Coordinator(_)) && self.prepared.get(&tx).is_some_and(|p| p.fenced) {
            return; // The dead coordinator's decision, overtaken by the termination's.
        }
        let Some(p) = self.prepared.get_mut(&tx) else {
            // Not prepared here: the commit was applied before (a resent decision). Acknowledge again.
            self.send(from, Message::CommitAck { tx });
            return;
        };
        if p.committing.is_some() {
            return; // Already on its way to disk; the acknowledgement follows.
        }
        if !commit.has_dcs(self.config.vector_len()) {
            return; // A malformed decision is dropped; the coordinator resends.
        }
        if self.config.bug.is_none() {
            assert!(commit.get(local) >= p.prepare_time, "cure: the commit time is the largest prepare time");
            assert!(p.snapshot.le(&commit), "cure: a commit vector dominates the snapshot");
        }
        p.committing = Some(commit.clone());
        let lsn = self.persist(LogRecord::Committed { tx, commit });
        self.after_durable.push_back((lsn, AfterDurable::ApplyCommit(tx, Message::CommitAck { tx })));
    }

    /// Makes a committed transaction's effects visible. Called once its commit record is durable.
    fn apply_commit(&mut self, tx: TxId) {
        self.terminations.remove(&tx);
        let p = self.remove_prepared(tx).expect("a committing transaction is prepared");
        let commit = p.committing.expect("apply_commit follows a commit decision");
        if self.config.bug.is_none() {
            assert!(
                !commit.le(self.store.frontier()),
                "cure: a commit lands above the garbage-collection frontier, where every future snapshot sees it"
            );
        }
        let stamp = Stamp { time: commit.sum(), tx: tx.tag() };
        if self.config.dcs > 1 && !p.writes.is_empty() {
            let shipped =
                ReplicatedTx { tx, snapshot: p.snapshot.clone(), commit: commit.clone(), writes: p.writes.clone() };
            self.sender.committed(shipped);
        }
        for (id, effect) in p.writes {
            self.store.insert(&id, &commit, stamp, effect);
        }
        self.clock.observe(commit.get(self.config.dc));
        self.remember_commit(tx, commit);
    }

    /// Applies a durable remote transaction found at recovery. Remote records are logged in the origin's order,
    /// contiguously after what the checkpoint holds, so the stream is complete up to just below this one (another
    /// transaction may share its commit time); a resend brings the rest.
    fn replay_remote(&mut self, origin: DcId, tx: ReplicatedTx) {
        let Some(inbound) = self.inbound.get_mut(&origin) else { return };
        let position = (tx.commit.get(origin), Some(tx.tx));
        if position > inbound.received {
            inbound.received = position;
            inbound.up_to = inbound.up_to.max(position.0.prev());
            self.apply_remote(origin, tx);
        }
    }

    /// Makes a remote transaction visible (its record is durable). pvc for its origin advances in
    /// [`Partition::refresh_pvc`]: Cure Alg. 4 line 17 sets pvc[i] = T.c[i], which assumes commit times unique per
    /// origin; here another transaction of the same origin may share T's commit time and still be queued, so pvc[i]
    /// stops just below the first transaction not yet applied.
    fn apply_remote(&mut self, origin: DcId, tx: ReplicatedTx) {
        let position = (tx.commit.get(origin), tx.tx);
        let last = self.remote_applied.entry(origin).or_insert(position);
        *last = (*last).max(position);
        let stamp = Stamp { time: tx.commit.sum(), tx: tx.tx.tag() };
        for (id, effect) in tx.writes {
            self.store.insert(&id, &tx.commit, stamp, effect);
        }
    }

    /// Cure Alg. 4 ProcessQueue: applies the head of each origin's queue once its dependencies are here.
    fn process_inbound(&mut self, now_us: u64) {
        let local = self.config.dc;
        let origins: Vec<DcId> = self.inbound.keys().copied().collect();
        for origin in origins {
            loop {
                let inbound = self.inbound.get_mut(&origin).expect("origins come from the map");
                let Some(head) = inbound.queue.front() else { break };
                // The dependencies from the origin itself are the queue order; every other entry must be here.
                // The local entry is a clock: a hybrid clock moves up to it.
                self.clock.observe(head.snapshot.get(local));
                let mut needed = head.snapshot.clone();
                needed.set(origin, Timestamp::ZERO);
                self.refresh_pvc(now_us);
                if self.config.protocol.tracks_dependencies() && !needed.le(&self.pvc) {
                    break;
                }
                let inbound = self.inbound.get_mut(&origin).expect("origins come from the map");
                let tx = inbound.queue.pop_front().expect("head exists");
                let lsn = self.persist(LogRecord::Remote { origin, tx: tx.clone() });
                self.remote_pending.entry(origin).or_default().push_back(tx);
                self.after_durable.push_back((lsn, AfterDurable::ApplyRemote(origin)));
            }
        }
        self.refresh_pvc(now_us);
    }

    /// Ships committed local transactions (or a heartbeat) to every peer DC, and acknowledges what arrived.
    fn replicate(&mut self, now_us: u64) {
        self.refresh_pvc(now_us);
        let local = self.config.dc;
        let from = Address::Peer(local, self.id);
        for o in self.sender.poll(self.pvc.get(local), now_us) {
            let msg = Message::Replicate { since: o.since, txs: o.txs, up_to: o.up_to };
            self.outputs.push_back(PartitionOutput::Send(Envelope { from, to: Address::Peer(o.to, self.id), msg }));
        }
        let mut acks = Vec::new();
        for (d, inbound) in self.inbound.iter_mut() {
            acks.push((*d, self.pvc.get(*d), std::mem::take(&mut inbound.gap)));
        }
        for (origin, up_to, gap) in acks {
            let msg = Message::ReplicateAck { up_to, gap };
            self.outputs.push_back(PartitionOutput::Send(Envelope { from, to: Address::Peer(origin, self.id), msg }));
        }
    }

    fn on_abort(&mut self, now_us: u64, from: Address, tx: TxId) {
        if self.prepared.get(&tx).is_some_and(|p| p.committing.is_some()) {
            return; // A decided commit cannot be aborted; a stray abort is ignored.
        }
        if matches!(from, Address::Coordinator(_)) && self.prepared.get(&tx).is_some_and(|p| p.fenced) {
            return; // The dead coordinator's decision, overtaken by the termination's.
        }
        self.terminations.remove(&tx);
        if self.remove_prepared(tx).is_some() {
            // The abort record need not be durable: a prepared record without a decision is resolved by asking.
            self.persist(LogRecord::Aborted { tx });
            self.serve_waiting(now_us);
        }
        // A prepare still waiting for the clock is dropped too.
        self.waiting.retain(|w| !matches!(&w.request, Request::Prepare { tx: t, .. } if *t == tx));
        self.send(from, Message::AbortAck { tx });
    }

    fn on_stable(&mut self, stable: VectorClock, gc: VectorClock) {
        if gc.has_dcs(self.config.vector_len()) {
            self.store.collect(&gc);
        }
        if stable.has_dcs(self.config.vector_len()) {
            // Every partition's pvc passed these commits, so none still holds them prepared: no termination will
            // ask about them again.
            let local = stable.get(self.config.dc);
            self.recent_commits.retain(|(_, commit)| commit.get(self.config.dc) > local);
        }
    }

    /// The termination protocol, step 1 (see the module documentation).
    fn on_coordinator_gone(&mut self, now_us: u64, tx: TxId) {
        let Some(p) = self.prepared.get_mut(&tx) else { return };
        if p.committing.is_some() || self.terminations.contains_key(&tx) {
            return;
        }
        p.fenced = true;
        p.query_at_us = now_us.saturating_add(self.config.retry_interval_us.max(1));
        let mut t = Termination::default();
        t.answered.insert(self.id);
        t.prepared.insert(self.id);
        self.terminations.insert(tx, t);
        self.ask_status(tx);
        self.decide_if_complete(now_us, tx);
    }

    /// Asks every partition that has not answered yet.
    fn ask_status(&mut self, tx: TxId) {
        let Some(t) = self.terminations.get(&tx) else { return };
        let missing: Vec<PartitionId> =
            (0..self.config.partitions).map(PartitionId).filter(|q| !t.answered.contains(q)).collect();
        for q in missing {
            self.send(Address::Partition(q), Message::TxStatus { tx });
        }
    }

    /// Step 2: answer, and keep the promise the answer makes.
    fn on_status_query(&mut self, from: Address, tx: TxId) {
        if let Some(p) = self.prepared.get_mut(&tx) {
            match p.committing.clone() {
                Some(commit) => {
                    // Answer once the commit record is durable: a commit answer must survive this partition.
                    let msg = Message::TxStatusReply { tx, status: TxKnowledge::Committed(commit) };
                    self.send_after_durable(self.last_lsn, from, msg);
                }
                None => {
                    p.fenced = true;
                    self.send(from, Message::TxStatusReply { tx, status: TxKnowledge::Prepared });
                }
            }
            return;
        }
        if let Some(commit) = self.recent_commit(tx).cloned() {
            self.send(from, Message::TxStatusReply { tx, status: TxKnowledge::Committed(commit) });
            return;
        }
        if !self.fenced.contains(&tx) {
            if self.fenced.len() >= FENCE_MEMORY {
                self.fenced.pop_front();
            }
            self.fenced.push_back(tx);
        }
        // A prepare of it still waiting for the clock is refused when served (see `prepare`).
        self.send(from, Message::TxStatusReply { tx, status: TxKnowledge::Absent });
    }

    /// Step 3: collect the answers; decide.
    fn on_status_reply(&mut self, now_us: u64, from: PartitionId, tx: TxId, status: TxKnowledge) {
        let Some(t) = self.terminations.get_mut(&tx) else { return };
        match status {
            TxKnowledge::Committed(commit) => {
                let waiting = std::mem::take(&mut t.prepared);
                self.terminations.remove(&tx);
                let me = self.id;
                for q in waiting.into_iter().filter(|q| *q != me) {
                    self.send(Address::Partition(q), Message::Commit { tx, commit: commit.clone() });
                }
                self.on_commit(Address::Partition(self.id), tx, commit);
            }
            TxKnowledge::Prepared => {
                t.answered.insert(from);
                t.prepared.insert(from);
                self.decide_if_complete(now_us, tx);
            }
            TxKnowledge::Absent => {
                t.answered.insert(from);
                self.decide_if_complete(now_us, tx);
            }
        }
    }

    /// Every partition answered and none committed: abort, here and at every partition holding it prepared.
    fn decide_if_complete(&mut self, now_us: u64, tx: TxId) {
        let Some(t) = self.terminations.get(&tx) else { return };
        if t.answered.len() < self.config.partitions as usize {
            return;
        }
        let t = self.terminations.remove(&tx).expect("checked");
        let me = self.id;
        for q in t.prepared.into_iter().filter(|q| *q != me) {
            self.send(Address::Partition(q), Message::Abort { tx });
        }
        self.on_abort(now_us, Address::Partition(self.id), tx);
    }

    /// Cure Alg. 2 UpdateClock: pvc[j] follows the clock but stays below the smallest prepare time.
    fn refresh_pvc(&mut self, now_us: u64) {
        let local = self.config.dc;
        let mut candidate = self.clock.current(now_us);
        if self.config.bug != Some(Bug::IgnorePreparedInPvc) {
            if let Some((min_prepared, _)) = self.prepare_times.first() {
                candidate = candidate.min(min_prepared.prev());
            }
        }
        let old = self.pvc.get(local);
        if self.config.bug.is_none() {
            assert!(candidate >= old, "cure: pvc never moves backwards ({candidate} < {old})");
        }
        self.pvc.set(local, candidate.max(old));
        // Remote entries: everything of an origin below its queue's head (or below a persisted transaction not yet
        // applied) is applied, and nothing else is coming at or below the origin's promise.
        for (origin, inbound) in &self.inbound {
            let mut bound = inbound.up_to;
            if let Some(head) = inbound.queue.front() {
                bound = bound.min(head.commit.get(*origin).prev());
            }
            if let Some(first) = self.remote_pending.get(origin).and_then(|p| p.front()) {
                bound = bound.min(first.commit.get(*origin).prev());
            }
            if bound > self.pvc.get(*origin) {
                self.pvc.set(*origin, bound);
            }
        }
    }

    fn persist(&mut self, record: LogRecord) -> Lsn {
        self.last_lsn = Lsn(self.last_lsn.0 + 1);
        self.outputs.push_back(PartitionOutput::Persist { lsn: self.last_lsn, record });
        self.last_lsn
    }

    fn send(&mut self, to: Address, msg: Message) {
        let from = Address::Partition(self.id);
        self.outputs.push_back(PartitionOutput::Send(Envelope { from, to, msg }));
    }

    fn send_after_durable(&mut self, lsn: Lsn, to: Address, msg: Message) {
        let envelope = Envelope { from: Address::Partition(self.id), to, msg };
        if lsn <= self.durable_lsn {
            self.outputs.push_back(PartitionOutput::Send(envelope));
        } else {
            self.after_durable.push_back((lsn, AfterDurable::Send(envelope)));
        }
    }
}
