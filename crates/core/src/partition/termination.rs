//! Termination of a transaction whose coordinator is gone.
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
//!    `Absent` (and from now on refuses to prepare it). A promise is logged ([`LogRecord::Fenced`]) and the
//!    answer leaves once it is durable, so a crash of the answerer cannot break it (a restarted partition that
//!    forgot it could take the dead coordinator's late commit after answering `Prepared` to a termination that
//!    then aborts). The asker logs its own promise before it asks;
//! 3. one `Committed` answer decides commit at that vector; `Prepared` or `Absent` from every partition decides
//!    abort, and the asker sends its decision to the partitions that answered `Prepared`.
//!
//! Safety: a coordinator acknowledges a commit to its client only after every participant logged the commit, and
//! sends a commit only after every participant prepared; so if no partition has committed when all have been
//! fenced, no client was told the transaction committed and no partition can commit it any more: abort is safe.
//! A commit answer is given only once the commit record is durable, so it survives the answerer's crash, and a
//! partition remembers its commits until the DC's stable snapshot passes them (then no partition still holds the
//! transaction prepared, since a prepared transaction holds its partition's pvc below its commit time).

use super::Partition;
use crate::message::TxKnowledge;
use crate::record::LogRecord;
use crate::store::VersionStore;
use crate::{Address, Message, PartitionId, TxId};
use std::collections::BTreeSet;

/// How many transactions a partition remembers it promised never to prepare (termination answers `Absent`). The
/// promise guards against a dead coordinator's prepare still in flight; messages are not in flight for long, so
/// the oldest promises are dropped beyond this many.
const FENCE_MEMORY: usize = 100_000;

/// A termination in progress at the partition that started it.
#[derive(Clone, Debug, Default)]
pub(super) struct Termination {
    /// Partitions that answered (this one included).
    answered: BTreeSet<PartitionId>,
    /// Partitions that answered `Prepared` (this one included): they wait for the decision.
    prepared: BTreeSet<PartitionId>,
}

impl<S: VersionStore> Partition<S> {
    /// The termination protocol, step 1 (see the module documentation).
    pub(super) fn on_coordinator_gone(&mut self, now_us: u64, tx: TxId) {
        let Some(p) = self.prepared.get_mut(&tx) else { return };
        if p.committing.is_some() || self.terminations.contains_key(&tx) {
            return;
        }
        p.query_at_us = now_us.saturating_add(self.config.retry_interval_us.max(1));
        let mut t = Termination::default();
        t.answered.insert(self.id);
        t.prepared.insert(self.id);
        self.terminations.insert(tx, t);
        // This partition ignores the dead coordinator from now on, durably before anyone hears of a decision: the
        // questions (and so the decision, which needs their answers) wait for the record.
        self.fence_and_log(tx);
        self.ask_status(tx);
        self.decide_if_complete(now_us, tx);
    }

    /// Keeps a termination's promise about `tx` (see [`LogRecord::Fenced`]) and logs it, unless already kept. The
    /// caller sends what depends on it once the log's last record is durable.
    pub(super) fn fence_and_log(&mut self, tx: TxId) {
        if self.fence(tx) {
            self.persist(LogRecord::Fenced { tx });
        }
    }

    /// Keeps a termination's promise about `tx`; says whether it is new. (Recovery applies a logged promise
    /// through this; it must not log it again.)
    pub(super) fn fence(&mut self, tx: TxId) -> bool {
        if let Some(p) = self.prepared.get_mut(&tx) {
            if p.fenced {
                return false;
            }
            p.fenced = true;
        } else {
            if self.fenced.contains(&tx) {
                return false;
            }
            if self.fenced.len() >= FENCE_MEMORY {
                self.fenced.pop_front();
            }
            self.fenced.push_back(tx);
        }
        true
    }

    /// Asks every partition that has not answered yet, once everything logged so far is durable.
    pub(super) fn ask_status(&mut self, tx: TxId) {
        let Some(t) = self.terminations.get(&tx) else { return };
        let missing: Vec<PartitionId> = self.topology.partitions().filter(|q| !t.answered.contains(q)).collect();
        for q in missing {
            self.send_after_durable(self.last_lsn, Address::Partition(q), Message::TxStatus { tx });
        }
    }

    /// Step 2: answer, and keep the promise the answer makes.
    pub(super) fn on_status_query(&mut self, from: Address, tx: TxId) {
        if let Some(p) = self.prepared.get_mut(&tx) {
            match p.committing.clone() {
                Some(commit) => {
                    // Answer once the commit record is durable: a commit answer must survive this partition.
                    let msg = Message::TxStatusReply { tx, status: TxKnowledge::Committed(commit) };
                    self.send_after_durable(self.last_lsn, from, msg);
                }
                None => {
                    // The promise must survive this partition: answer once it is durable.
                    self.fence_and_log(tx);
                    let msg = Message::TxStatusReply { tx, status: TxKnowledge::Prepared };
                    self.send_after_durable(self.last_lsn, from, msg);
                }
            }
            return;
        }
        if let Some(commit) = self.recent_commit(tx).cloned() {
            self.send(from, Message::TxStatusReply { tx, status: TxKnowledge::Committed(commit) });
            return;
        }
        // A prepare of it still waiting for the clock is refused when served (see `prepare`).
        self.fence_and_log(tx);
        self.send_after_durable(self.last_lsn, from, Message::TxStatusReply { tx, status: TxKnowledge::Absent });
    }

    /// Step 3: collect the answers; decide.
    pub(super) fn on_status_reply(&mut self, now_us: u64, from: PartitionId, tx: TxId, status: TxKnowledge) {
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
        if t.answered.len() < self.topology.partition_count() as usize {
            return;
        }
        let t = self.terminations.remove(&tx).expect("checked");
        let me = self.id;
        for q in t.prepared.into_iter().filter(|q| *q != me) {
            self.send(Address::Partition(q), Message::Abort { tx });
        }
        self.on_abort(now_us, Address::Partition(self.id), tx);
    }
}
