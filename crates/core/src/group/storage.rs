//! The in-memory view of a replica's durable log that raft reads through its `Storage` trait.
//!
//! raft-rs reads its log synchronously (`Storage` methods take `&self` and return at once), while core does no
//! I/O. So the view holds everything the group handed to its driver to persist: the hard state and every entry
//! of every `Write`, applied here *before* raft is advanced past the Ready that produced them (raft reads entries
//! back from `Storage` as soon as `advance_append_async` moved them out of its unstable buffer, whether or not
//! the driver has made them durable yet).
//!
//! Compaction: entries are kept from `first_index` on, and the term of the entry just before (`base_term`)
//! answers `term(first_index - 1)`. A snapshot for a follower that needs entries before `first_index` is
//! offered by the driver ([`LogView::offer`]); until one is, [`Storage::snapshot`] answers "temporarily
//! unavailable" and notes that one is wanted (raft asks again on the follower's next heartbeat response), as TiKV
//! does.

use raft::prelude::{ConfState, Entry as RaftEntry, HardState as RaftHardState, Snapshot};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};
use std::cell::Cell;

/// A replica's log as raft sees it.
#[derive(Debug, Default)]
pub(super) struct LogView {
    hard_state: RaftHardState,
    conf_state: ConfState,
    /// The index of `entries[0]`.
    first_index: u64,
    /// The term of the entry at `first_index - 1` (0 without compaction).
    base_term: u64,
    entries: Vec<RaftEntry>,
    /// The snapshot the driver offered last, for followers that need compacted entries.
    offered: Option<Snapshot>,
    /// Raft asked for a snapshot that is not here (none offered, or the one offered is older than the log's
    /// start): the driver should offer one.
    wanted: Cell<bool>,
}

impl LogView {
    /// A view over a recovered log: `entries` must start right after `base` (index and term; `(0, 0)` without
    /// compaction) and be consecutive (checked by the caller).
    pub(super) fn new(
        hard_state: RaftHardState,
        conf_state: ConfState,
        base: (u64, u64),
        entries: Vec<RaftEntry>,
    ) -> Self {
        debug_assert!(entries.iter().enumerate().all(|(k, e)| e.index == base.0 + k as u64 + 1));
        Self { hard_state, conf_state, first_index: base.0 + 1, base_term: base.1, entries, ..Self::default() }
    }

    /// The index of the first entry kept.
    pub(super) fn first_index(&self) -> u64 {
        self.first_index
    }

    /// The term of the entry at `index`, if the view knows it (kept, or the one just before the first kept).
    pub(super) fn term_of(&self, index: u64) -> Option<u64> {
        self.term(index).ok()
    }

    /// Drops the entries up to `through` (at most the last index; the caller keeps it at or below what it
    /// applied).
    pub(super) fn compact(&mut self, through: u64) {
        if through < self.first_index {
            return;
        }
        let through = through.min(self.last_index());
        let Some(term) = self.term_of(through) else { return };
        self.entries.drain(..(through + 1 - self.first_index) as usize);
        self.first_index = through + 1;
        self.base_term = term;
    }

    /// Replaces the whole log by a snapshot's: entries after `base` (index, term), ending at the snapshot.
    pub(super) fn restore(&mut self, base: (u64, u64), entries: Vec<RaftEntry>) {
        self.first_index = base.0 + 1;
        self.base_term = base.1;
        self.entries = entries;
        self.offered = None;
    }

    /// A snapshot for followers that need compacted entries.
    pub(super) fn offer(&mut self, snapshot: Snapshot) {
        self.offered = Some(snapshot);
        self.wanted.set(false);
    }

    /// Whether raft asked for a snapshot that is not here since the last call.
    pub(super) fn take_wanted(&self) -> bool {
        self.wanted.replace(false)
    }

    /// The index of the last entry (`first_index - 1` when the log is empty).
    pub(super) fn last_index(&self) -> u64 {
        self.first_index + self.entries.len() as u64 - 1
    }

    /// Appends `entries`, first truncating the suffix from `entries[0].index` on (a new leader overwrote it).
    pub(super) fn append(&mut self, entries: &[RaftEntry]) {
        let Some(first) = entries.first().map(|e| e.index) else { return };
        // Raft never overwrites a compacted or committed entry, nor leaves a gap.
        assert!(
            first >= self.first_index && first <= self.last_index() + 1,
            "append at {first} outside [{}, {}]",
            self.first_index,
            self.last_index() + 1
        );
        assert!(first > self.hard_state.commit, "append at {first} overwrites committed {}", self.hard_state.commit);
        self.entries.truncate((first - self.first_index) as usize);
        self.entries.extend_from_slice(entries);
    }

    /// Application data after index `after`, up to `through`, at most `max` entries (no-ops and membership
    /// entries skipped).
    pub(super) fn read_data(&self, after: u64, through: u64, max: usize) -> Vec<(crate::record::Lsn, &[u8])> {
        let from = after.saturating_add(1).max(self.first_index);
        let to = through.min(self.last_index());
        if from > to {
            return Vec::new();
        }
        let slice = &self.entries[(from - self.first_index) as usize..=(to - self.first_index) as usize];
        slice
            .iter()
            .filter(|e| e.get_entry_type() == raft::prelude::EntryType::EntryNormal && !e.data.is_empty())
            .take(max)
            .map(|e| (crate::record::Lsn(e.index), &e.data[..]))
            .collect()
    }

    /// Records the hard state raft handed out.
    pub(super) fn set_hard_state(&mut self, hard_state: RaftHardState) {
        self.hard_state = hard_state;
    }
}

impl Storage for LogView {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(self.hard_state.clone(), self.conf_state.clone()))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<RaftEntry>> {
        if low < self.first_index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if high > self.last_index() + 1 || low > high {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        let from = (low - self.first_index) as usize;
        let to = (high - self.first_index) as usize;
        let mut entries = self.entries[from..to].to_vec();
        raft::util::limit_size(&mut entries, max_size.into());
        Ok(entries)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        if index == self.first_index - 1 {
            return Ok(self.base_term);
        }
        if index < self.first_index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        if index > self.last_index() {
            return Err(raft::Error::Store(StorageError::Unavailable));
        }
        Ok(self.entries[(index - self.first_index) as usize].term)
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(self.first_index)
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(LogView::last_index(self))
    }

    /// Raft wants a snapshot for a follower that needs entries before `first_index`: the one offered, if it
    /// reaches the log's start (the follower continues from the entries after it) and the index raft asks for,
    /// and names the follower as a member (raft drops a snapshot whose membership lacks its receiver: one older
    /// than the change that added it is of no use). Otherwise one is wanted, and raft asks again on the
    /// follower's next heartbeat response.
    fn snapshot(&self, request_index: u64, to: u64) -> raft::Result<Snapshot> {
        if let Some(s) = &self.offered {
            let index = s.get_metadata().index;
            let conf = s.get_metadata().get_conf_state();
            let member = [&conf.voters, &conf.learners, &conf.voters_outgoing, &conf.learners_next]
                .into_iter()
                .any(|ids| ids.contains(&to));
            if index + 1 >= self.first_index && index >= request_index && member {
                return Ok(s.clone());
            }
        }
        self.wanted.set(true);
        Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable))
    }
}
