//! What a partition remembers of its coordinators' transactions, so that no prepare is acted on twice.
//!
//! A coordinator resends a `Prepare` or `PrepareAndCommit` when the partition's Raft leader changes (the first
//! copy may have died with the old leader), and a deposed leader passes on what still reaches it. So a partition
//! may receive a prepare of a transaction it already committed. Acting on it would prepare the transaction again,
//! and the coordinator, still committing at other partitions, would answer the outcome query with a second commit;
//! a `PrepareAndCommit` would simply commit twice.
//!
//! Every prepare carries its coordinator's *oldest open* transaction: a coordinator never sends anything for an
//! older one again (it has finished them), so a prepare below the mark is a stale duplicate and is dropped. For
//! the transactions at or above the mark, the partition remembers how each ended here (`Outcome`), answers a
//! duplicate `PrepareAndCommit` of a committed one with its commit, and drops the rest. The memory is bounded by
//! what each coordinator has open (at most its idle timeout's worth of transactions).
//!
//! Commits are remembered through [`Partition::apply`](super::Partition), so every replica of a group, and
//! recovery, rebuild the same memory from the log; the marks travel in the prepare records. So are refusals of a
//! prepare-and-commit, which are its transaction's abort (an `Aborted` record, logged before the refusal leaves):
//! a late copy committed by the next leader would commit a transaction its client was told aborted. Other aborts
//! and refusals are remembered where they happen, on the leader: forgetting one costs liveness only (a duplicate
//! two-phase prepare is held until its outcome query is answered with an abort), never safety.

use crate::{CoordinatorId, Timestamp, TxId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a transaction at or above its coordinator's mark ended at this partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Committed here; the local entry of its commit vector (the rest is its snapshot).
    Committed(Timestamp),
    /// Aborted or refused here: nothing more will be asked of it.
    Settled,
}

/// One coordinator's part of the memory, as a checkpoint keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecidedImage {
    /// The coordinator.
    pub coordinator: CoordinatorId,
    /// Its oldest open transaction, as last heard.
    pub oldest_open: u64,
    /// The outcomes of its transactions at or above the mark, by sequence number.
    pub outcomes: Vec<(u64, Outcome)>,
}

#[derive(Clone, Debug, Default)]
struct Memory {
    oldest_open: u64,
    outcomes: BTreeMap<u64, Outcome>,
}

/// The memory: per coordinator, its mark and the outcomes at or above it.
#[derive(Clone, Debug, Default)]
pub(super) struct Decided {
    by_coordinator: BTreeMap<CoordinatorId, Memory>,
}

impl Decided {
    /// The coordinator has finished every transaction below `oldest_open`: forget them.
    pub(super) fn note_open(&mut self, coordinator: CoordinatorId, oldest_open: u64) {
        let memory = self.by_coordinator.entry(coordinator).or_default();
        if oldest_open > memory.oldest_open {
            memory.oldest_open = oldest_open;
            memory.outcomes = memory.outcomes.split_off(&oldest_open);
        }
    }

    /// The transaction is below its coordinator's mark: its coordinator waits for nothing about it.
    pub(super) fn is_finished(&self, tx: TxId) -> bool {
        self.by_coordinator.get(&tx.coordinator).is_some_and(|m| tx.seq < m.oldest_open)
    }

    /// How the transaction ended here, if it did and is at or above its coordinator's mark.
    pub(super) fn outcome(&self, tx: TxId) -> Option<Outcome> {
        self.by_coordinator.get(&tx.coordinator)?.outcomes.get(&tx.seq).copied()
    }

    /// Remembers how the transaction ended here (a commit is never overwritten).
    pub(super) fn record(&mut self, tx: TxId, outcome: Outcome) {
        self.insert(tx.coordinator, tx.seq, outcome);
    }

    fn insert(&mut self, coordinator: CoordinatorId, seq: u64, outcome: Outcome) {
        let memory = self.by_coordinator.entry(coordinator).or_default();
        if seq < memory.oldest_open {
            return;
        }
        let slot = memory.outcomes.entry(seq).or_insert(outcome);
        if let Outcome::Committed(_) = outcome {
            *slot = outcome;
        }
    }

    /// Outcomes remembered, over every coordinator.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_coordinator.values().map(|m| m.outcomes.len()).sum()
    }

    pub(super) fn image(&self) -> Vec<DecidedImage> {
        (self.by_coordinator.iter())
            .map(|(c, m)| DecidedImage {
                coordinator: *c,
                oldest_open: m.oldest_open,
                outcomes: m.outcomes.iter().map(|(s, o)| (*s, *o)).collect(),
            })
            .collect()
    }

    pub(super) fn restore(&mut self, images: Vec<DecidedImage>) {
        for DecidedImage { coordinator, oldest_open, outcomes } in images {
            self.note_open(coordinator, oldest_open);
            for (seq, outcome) in outcomes {
                self.insert(coordinator, seq, outcome);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tx(c: u32, seq: u64) -> TxId {
        TxId { dc: crate::DcId(0), coordinator: CoordinatorId(c), seq }
    }

    #[test]
    fn outcomes_below_the_mark_are_forgotten_and_their_prepares_are_stale() {
        let mut d = Decided::default();
        d.record(tx(1, 5), Outcome::Committed(Timestamp(50)));
        d.record(tx(1, 7), Outcome::Settled);
        d.record(tx(2, 3), Outcome::Committed(Timestamp(30)));
        assert_eq!(d.outcome(tx(1, 5)), Some(Outcome::Committed(Timestamp(50))));
        assert!(!d.is_finished(tx(1, 5)));

        d.note_open(CoordinatorId(1), 6);
        assert!(d.is_finished(tx(1, 5)), "below the mark");
        assert_eq!(d.outcome(tx(1, 5)), None, "forgotten");
        assert_eq!(d.outcome(tx(1, 7)), Some(Outcome::Settled), "at or above the mark: kept");
        assert_eq!(d.outcome(tx(2, 3)), Some(Outcome::Committed(Timestamp(30))), "another coordinator's: kept");

        d.note_open(CoordinatorId(1), 4);
        assert!(d.is_finished(tx(1, 5)), "a mark never goes back (messages arrive out of order)");
        d.record(tx(1, 5), Outcome::Committed(Timestamp(50)));
        assert_eq!(d.len(), 2, "nothing is remembered below the mark");
    }

    #[test]
    fn a_commit_is_never_overwritten_and_the_image_restores_the_memory() {
        let mut d = Decided::default();
        d.record(tx(1, 2), Outcome::Committed(Timestamp(20)));
        d.record(tx(1, 2), Outcome::Settled);
        d.record(tx(1, 3), Outcome::Settled);
        d.record(tx(1, 3), Outcome::Committed(Timestamp(31)));
        assert_eq!(d.outcome(tx(1, 2)), Some(Outcome::Committed(Timestamp(20))));
        assert_eq!(d.outcome(tx(1, 3)), Some(Outcome::Committed(Timestamp(31))));
        d.note_open(CoordinatorId(1), 3);

        let mut r = Decided::default();
        r.restore(d.image());
        assert_eq!(r.image(), d.image());
        assert!(r.is_finished(tx(1, 2)));
    }
}
