//! The two-phase-commit participant: prepare (with certification), commit, abort, and the single-partition
//! prepare-and-commit.

use super::{AfterDurable, Outcome, Partition, Prepare, PreparedTx, Request};
use crate::bugs;
use crate::message::RemoteError;
use crate::record::{LogRecord, Lsn};
use crate::replication::ReplicatedTx;
use crate::store::VersionStore;
use crate::{Address, Message, ObjectId, Timestamp, TxId, VectorClock};
use causet_crdt::{CrdtType, Effect, Stamp};

impl<S: VersionStore> Partition<S> {
    /// A prepare arrives: screened (`admit_prepare`), then served or left waiting for its snapshot.
    pub(super) fn on_prepare(&mut self, now_us: u64, prepare: Prepare) {
        if self.admit_prepare(prepare.tx, &prepare.snapshot, prepare.oldest_open, prepare.alone) {
            self.on_request(now_us, Request::Prepare(prepare));
        }
    }

    /// Screens a prepare as it arrives (`decided.rs`): notes its coordinator's oldest open transaction, and turns
    /// away a duplicate of one that ended here (a resend after a leader change, or a copy passed on by a deposed
    /// leader), answering a duplicate prepare-and-commit of a committed one with its commit and a duplicate of a
    /// refused or aborted one with a refusal (the coordinator may be waiting for it: the first answer can be lost
    /// with a link or with a leader that lost its term; a coordinator that is not waiting ignores it). Returns
    /// whether the prepare goes on.
    fn admit_prepare(&mut self, tx: TxId, snapshot: &VectorClock, oldest_open: u64, alone: bool) -> bool {
        self.decided.note_open(tx.coordinator, oldest_open);
        if self.decided.is_finished(tx) {
            self.duplicate_prepares += 1;
            return false; // Its coordinator finished it and waits for nothing.
        }
        let outcome = self.decided.outcome(tx);
        self.duplicate_prepares += u64::from(outcome.is_some());
        match outcome {
            None => true,
            Some(Outcome::Committed(at)) => {
                if alone && snapshot.has_dcs(self.config.vector_len()) {
                    let mut commit = snapshot.clone();
                    commit.set(self.config.dc, at);
                    self.send(Address::Coordinator(tx.coordinator), Message::Committed { tx, commit });
                }
                false
            }
            Some(Outcome::Settled) => {
                let refused = Message::PrepareRefused { tx, reason: RemoteError::EndedBefore };
                self.send(Address::Coordinator(tx.coordinator), refused);
                false
            }
        }
    }

    pub(super) fn prepare(&mut self, now_us: u64, prepare: Prepare) {
        let Prepare { from, tx, snapshot, writes, alone, oldest_open } = prepare;
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
            self.refuse_prepare(from, tx, alone, reason);
            return;
        }
        let prepare_time = self.clock.tick(now_us);
        let local = self.config.dc;
        assert!(prepare_time > snapshot.get(local), "cure: a prepare time exceeds the snapshot's local entry");
        if bugs::checks_invariants(&self.config) {
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
                oldest_open,
            };
            // Staged: prepared with its commit decided. Once durable, the record's prepare half is already here, so
            // what is left to apply is its commit half (see the `apply` module).
            let lsn = self.persist(record);
            self.insert_prepared(tx, snapshot, prepare_time, writes, now_us, lsn);
            self.prepared.get_mut(&tx).expect("just inserted").committing = Some(commit.clone());
            let reply =
                self.envelope(Address::Coordinator(tx.coordinator), Message::Committed { tx, commit: commit.clone() });
            let durable = LogRecord::Committed { tx, commit };
            self.after_durable.push_back((lsn, AfterDurable::Apply(durable, Some(reply))));
            return;
        }
        let record =
            LogRecord::Prepared { tx, snapshot: snapshot.clone(), prepare_time, writes: writes.clone(), oldest_open };
        let lsn = self.persist(record);
        self.insert_prepared(tx, snapshot, prepare_time, writes, now_us, lsn);
        self.send_after_durable(lsn, from, Message::Prepared { tx, prepare_time });
    }

    /// Refuses a prepare, and remembers that the transaction ended here. A prepare-and-commit's refusal is the
    /// transaction's abort, which its client learns at once: it is logged before the answer leaves, so that every
    /// later leader turns away a copy of the prepare that arrives late (passed on by a deposed leader, parked at a
    /// node that did not know the leader) instead of committing it. Before, only this leader remembered it: seed
    /// 750 of the simulator, with bounds renewed at a quarter, committed such a copy a second after its client was
    /// told the transaction aborted. A two-phase prepare's refusal needs no record: a late copy is prepared and
    /// then asks its coordinator, which answers with the abort.
    pub(super) fn refuse_prepare(&mut self, from: Address, tx: TxId, alone: bool, reason: RemoteError) {
        self.decided.record(tx, Outcome::Settled);
        let msg = Message::PrepareRefused { tx, reason };
        if alone {
            let lsn = self.persist(LogRecord::Aborted { tx });
            self.send_after_durable(lsn, from, msg);
        } else {
            self.send(from, msg);
        }
    }

    /// Checks that the transaction's effects may commit on top of what is already committed or prepared here:
    /// write-write certification when configured, and the bounded counter's rights in any case.
    fn certify(&self, tx: TxId, snapshot: &VectorClock, writes: &[(ObjectId, Effect)]) -> Result<(), RemoteError> {
        let local = self.config.dc;
        if self.config.certify_writes {
            if !writes.is_empty() && self.store.frontier().get(local) > snapshot.get(local) {
                // Versions this DC committed after the snapshot may already be folded into their objects' base
                // states, where certification cannot see them: a snapshot below the frontier cannot be certified.
                // No running transaction's snapshot is (the frontier waits for every coordinator's oldest); a late
                // copy of a prepare can be.
                return Err(RemoteError::SnapshotTooOld);
            }
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

    pub(super) fn insert_prepared(
        &mut self,
        tx: TxId,
        snapshot: VectorClock,
        prepare_time: Timestamp,
        writes: Vec<(ObjectId, Effect)>,
        now_us: u64,
        lsn: Lsn,
    ) {
        let query_at_us = now_us.saturating_add(self.config.op_timeout_us.max(self.config.retry_interval_us));
        let prepared = PreparedTx { snapshot, prepare_time, writes, committing: None, query_at_us, fenced: false, lsn };
        self.prepared.insert(tx, prepared);
        self.prepare_times.insert((prepare_time, tx));
    }

    pub(super) fn remove_prepared(&mut self, tx: TxId) -> Option<PreparedTx> {
        let p = self.prepared.remove(&tx)?;
        self.prepare_times.remove(&(p.prepare_time, tx));
        Some(p)
    }

    pub(super) fn on_commit(&mut self, from: Address, tx: TxId, commit: VectorClock) {
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
        if bugs::checks_invariants(&self.config) {
            assert!(commit.get(local) >= p.prepare_time, "cure: the commit time is the largest prepare time");
            assert!(p.snapshot.le(&commit), "cure: a commit vector dominates the snapshot");
        }
        // Staged: the decision is recorded now, so that a resent decision or a termination's question finds it;
        // the effects become visible once the record is durable.
        p.committing = Some(commit.clone());
        let lsn = self.persist(LogRecord::Committed { tx, commit: commit.clone() });
        let ack = self.envelope(Address::Coordinator(tx.coordinator), Message::CommitAck { tx });
        self.after_durable.push_back((lsn, AfterDurable::Apply(LogRecord::Committed { tx, commit }, Some(ack))));
    }

    /// Makes a committed transaction's effects visible. Called by `apply` once its commit record is durable.
    pub(super) fn apply_commit(&mut self, tx: TxId) {
        self.terminations.remove(&tx);
        let p = self.remove_prepared(tx).expect("a committing transaction is prepared");
        let commit = p.committing.expect("apply_commit follows a commit decision");
        if bugs::checks_invariants(&self.config) {
            assert!(
                !commit.le(self.store.frontier()),
                "cure: a commit lands above the garbage-collection frontier, where every future snapshot sees it"
            );
        }
        let stamp = Stamp { time: commit.sum(), tx: tx.tag() };
        if self.config.dcs > 1 && !p.writes.is_empty() {
            let shipped =
                ReplicatedTx { tx, snapshot: p.snapshot.clone(), commit: commit.clone(), writes: p.writes.clone() };
            self.replicator.committed(shipped, p.lsn, self.pvc.get(self.config.dc));
        }
        // Objects another DC holds (partial replication) are not stored here: the replicator ships them there. The
        // caches hear of writes to them, and, without partial replication, of every write (`crate::away`).
        for (id, effect) in p.writes {
            self.notice_write(self.config.dc, &id, commit.get(self.config.dc));
            if self.holds(&id) {
                self.store.insert(&id, &commit, stamp, effect);
            }
        }
        self.clock.observe(commit.get(self.config.dc));
        self.decided.record(tx, Outcome::Committed(commit.get(self.config.dc)));
        self.remember_commit(tx, commit);
    }

    pub(super) fn on_abort(&mut self, now_us: u64, from: Address, tx: TxId) {
        if self.prepared.get(&tx).is_some_and(|p| p.committing.is_some()) {
            return; // A decided commit cannot be aborted; a stray abort is ignored.
        }
        if matches!(from, Address::Coordinator(_)) && self.prepared.get(&tx).is_some_and(|p| p.fenced) {
            return; // The dead coordinator's decision, overtaken by the termination's.
        }
        self.terminations.remove(&tx);
        self.decided.record(tx, Outcome::Settled);
        if self.remove_prepared(tx).is_some() {
            // The abort record need not be durable: a prepared record without a decision is resolved by asking.
            self.persist(LogRecord::Aborted { tx });
            self.serve_waiting(now_us);
        }
        // A prepare still waiting for the clock is dropped too.
        self.waiting.retain(|w| !matches!(&w.request, Request::Prepare(Prepare { tx: t, .. }) if *t == tx));
        self.send(from, Message::AbortAck { tx });
    }

    pub(super) fn remember_commit(&mut self, tx: TxId, commit: VectorClock) {
        self.recent_commits.push_back((tx, commit));
    }
}
