//! The write buffer's log and its recovery (docs/design/honeypot.md §4): what makes a buffered write, acknowledged
//! before it reached its owners, survive a crash of its node.
//!
//! A coordinator that buffers writes keeps a log of its own, beside its node's partition logs. Each record is
//! durable before what it guards leaves the coordinator:
//!
//! - [`BufferRecord::Buffered`]: a transaction's effects, before its client hears it committed;
//! - [`BufferRecord::RoundStarted`]: a round of handovers takes everything buffered before it, with its snapshot;
//! - [`BufferRecord::Decided`]: the handover commits, with its commit vector, before the first `Commit` leaves (the
//!   coordinator decides a two-phase commit: once a commit may have reached one owner it must reach all, and the
//!   effects must never go again under another transaction);
//! - [`BufferRecord::RoundDone`]: the round committed at every owner; it carries what is still buffered (written
//!   during the round) and the join of every handover's commit, so the log before it goes.
//!
//! The rule is one barrier: while a record is not yet durable, every later output of the coordinator that could
//! reveal or act on it (replies, prepares, commits, aborts, the log's truncation) waits for it; reads go at once.
//! So no client, owner or reader ever sees what a crash could take back. (A transaction that read a buffered
//! effect is answered after that effect's record is durable too: its client must not see a write that then
//! vanishes.)
//!
//! **Recovery** replays the log before the node serves anyone. Buffered transactions after the last completed
//! round become pending again (positions, sequence numbers, dependencies as they were) and go at once, in a new
//! round. A round that was under way when the node died:
//! - decided: its commit is sent again to every owner, by the recovered coordinator, which *claims* the old
//!   transaction: the node routes the owners' acknowledgements and outcome queries about it to the recovered
//!   coordinator (its own id is new, the transaction's is the dead one's), which answers with the commit. A
//!   partition acknowledges a commit it already applied. The round's effects stay readable from the buffer until
//!   the commit is acknowledged everywhere, as for any round.
//! - not decided: no `Commit` ever left, so no owner can have committed it. Its attempts are left to the
//!   termination protocol, which aborts them (the node answers queries about them `CoordinatorGone`), and its
//!   effects go again, first, as a new transaction of the round, with the round's snapshot.

use super::{Coordinator, Phase, Tx};
use crate::buffer::Component;
use crate::record::Lsn;
use crate::{ObjectId, RequestId, TxId, VectorClock};
use causet_crdt::Effect;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, VecDeque};

/// A record of a coordinator's write-buffer log (see the module documentation).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum BufferRecord {
    /// A transaction was buffered.
    Buffered {
        /// Its effects, in the order it generated them.
        writes: Vec<(ObjectId, Effect)>,
        /// The buffered objects it read.
        read: Vec<ObjectId>,
        /// Its dependency vector.
        deps: VectorClock,
        /// The sequence number after its last effect's.
        seq_end: u32,
    },
    /// A round of handovers started: it takes everything buffered before it, in one component.
    RoundStarted {
        /// The round's snapshot.
        snapshot: VectorClock,
    },
    /// A handover transaction commits at this vector.
    Decided {
        /// The handover transaction.
        tx: TxId,
        /// Its commit vector.
        commit: VectorClock,
    },
    /// The round under way committed everywhere. Everything logged before this record may go.
    RoundDone {
        /// The join of every handover's commit vector so far.
        handed: Option<VectorClock>,
        /// The next transaction's first sequence number.
        seq: u32,
        /// What is buffered now (written while the round was under way).
        pending: Vec<Component>,
    },
}

/// The log's positions, and the outputs waiting for it.
#[derive(Debug, Default)]
pub(super) struct Log {
    /// The last record written.
    last: Lsn,
    /// Every record up to this one is durable.
    durable: Lsn,
    /// Outputs waiting for the record last written before them.
    held: VecDeque<(Lsn, super::CoordinatorOutput)>,
}

/// A round under way when the log ends (recovery).
struct Unfinished {
    snapshot: VectorClock,
    taken: Vec<Component>,
    decided: Option<(TxId, VectorClock)>,
}

impl Coordinator {
    /// Appends a record to the write buffer's log; every later output waits until it is durable.
    pub(super) fn persist(&mut self, record: BufferRecord) {
        let Some(log) = self.buffering.as_mut().map(|b| &mut b.log) else { return };
        log.last = Lsn(log.last.0 + 1);
        self.outputs.push_back(super::CoordinatorOutput::Persist { lsn: log.last, record });
    }

    /// Hands an output out, or, if it could reveal or act on a record not yet durable, holds it until every record
    /// written before it is durable: replies (a client must not learn of a write a crash could take back),
    /// prepares, commits and aborts (a handover's effects, its decision), and the log's truncation. Reads and other
    /// messages go at once (they reveal nothing of the buffer).
    pub(super) fn emit(&mut self, out: super::CoordinatorOutput) {
        use super::CoordinatorOutput::{Reply, Send, Truncate};
        use crate::Message::{Abort, Commit, Prepare, PrepareAndCommit};
        let guarded = match &out {
            Reply(_) | Truncate { .. } => true,
            // (Aborts too, so that none overtakes its transaction's prepare.)
            Send(e) => matches!(e.msg, Prepare { .. } | PrepareAndCommit { .. } | Commit { .. } | Abort { .. }),
            _ => false,
        };
        match self.buffering.as_mut().map(|b| &mut b.log) {
            Some(log) if guarded && log.durable < log.last => log.held.push_back((log.last, out)),
            _ => self.outputs.push_back(out),
        }
    }

    /// Records of the write buffer's log up to `lsn` are durable: what waited for them goes.
    pub fn handle_persisted(&mut self, lsn: Lsn) {
        let Some(log) = self.buffering.as_mut().map(|b| &mut b.log) else { return };
        log.durable = log.durable.max(lsn);
        while log.held.front().is_some_and(|(at, _)| *at <= log.durable) {
            let (_, out) = log.held.pop_front().expect("checked");
            self.outputs.push_back(out);
        }
    }

    /// Whether this coordinator speaks for `tx` although it is not its own: a handover of an earlier run of this
    /// node that was decided, recovered from the log (see the module documentation).
    pub fn claims(&self, tx: TxId) -> bool {
        tx.coordinator != self.id && self.txs.contains_key(&tx)
    }

    /// A coordinator rebuilt from its write buffer's log, as the node's store holds it (records ascending). With
    /// an empty log it is [`Coordinator::new`]. A log left by a run that buffered writes is recovered even if
    /// this run does not buffer: its writes are handed over, and nothing new is buffered.
    pub fn recover(
        id: crate::CoordinatorId,
        config: crate::Config,
        now_us: u64,
        log: Vec<(Lsn, BufferRecord)>,
    ) -> Self {
        let mut c = Self::new(id, config, now_us);
        let Some(&(last, _)) = log.last() else { return c };
        if c.buffering.is_none() {
            let cache = c.config.cache.clone().unwrap_or_default();
            let mut b = super::handover::Buffering::new(&cache);
            b.accepting = false;
            c.buffering = Some(b);
        }
        let b = c.buffering.as_mut().expect("set above");
        b.log = Log { last, durable: last, held: VecDeque::new() };
        let mut unfinished: Option<Unfinished> = None;
        for (_, record) in log {
            match record {
                BufferRecord::Buffered { writes, read, deps, seq_end } => {
                    let tx = crate::buffer::BufferedTx { writes, read, deps, seq_end, newest_open: None };
                    b.buffer.add(now_us, tx);
                }
                BufferRecord::RoundStarted { snapshot } => {
                    let taken = b.buffer.take_all();
                    unfinished = Some(Unfinished { snapshot, taken, decided: None });
                }
                BufferRecord::Decided { tx, commit } => {
                    let round = unfinished.as_mut().expect("a handover is decided in a round under way");
                    debug_assert!(round.decided.is_none(), "one handover per round is decided");
                    round.decided = Some((tx, commit));
                }
                BufferRecord::RoundDone { handed, seq, pending } => {
                    unfinished = None;
                    b.handed = handed;
                    b.buffer = crate::buffer::WriteBuffer::new(b.buffer.config().clone());
                    b.buffer.restore(pending, seq);
                }
            }
        }
        b.flush = b.buffer.stats().components > 0;
        b.recovered_floor = b.handed.clone();
        let Some(Unfinished { snapshot, taken, decided }) = unfinished.filter(|r| !r.taken.is_empty()) else {
            return c;
        };
        let component = super::handover::union(taken);
        if let Some((tx, commit)) = &decided {
            c.claim(now_us, *tx, snapshot.clone(), commit.clone(), &component);
        }
        let b = c.buffering.as_mut().expect("set above");
        b.restore_round(now_us, snapshot, decided.as_ref().map(|(tx, _)| *tx), component);
        if decided.is_none() {
            // Sent again first thing, as a new transaction: no owner committed the old one.
            c.start_round(now_us);
        }
        c
    }

    /// Takes a decided handover of an earlier run over: it is committing, and the commit goes to every owner again.
    fn claim(&mut self, now_us: u64, tx: TxId, snapshot: VectorClock, commit: VectorClock, component: &Component) {
        let writes = super::handover::writes_of(component);
        let unacked: BTreeSet<_> = writes.iter().map(|(o, _)| self.topology.partition_of(o)).collect();
        let retry_us = now_us + self.config.retry_interval_us.max(1);
        let phase = Phase::Committing {
            request: RequestId(0),
            commit: commit.clone(),
            unacked: unacked.clone(),
            retry_us,
            resends: 0,
        };
        self.txs.insert(tx, Tx::handover(tx, snapshot, writes, phase));
        for p in unacked {
            self.send(crate::Address::Partition(p), crate::Message::Commit { tx, commit: commit.clone() });
        }
    }

    /// Logs the end of the round under way, with what is buffered now; the log before it goes once it is durable.
    pub(super) fn log_round_done(&mut self) {
        let Some(b) = &self.buffering else { return };
        let record = BufferRecord::RoundDone {
            handed: b.handed.clone(),
            seq: b.buffer.next_seq(),
            pending: b.buffer.components().cloned().collect(),
        };
        self.persist(record);
        let before = self.buffering.as_ref().expect("checked above").log.last;
        self.emit(super::CoordinatorOutput::Truncate { before });
    }
}
