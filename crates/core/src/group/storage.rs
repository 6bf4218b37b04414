//! The in-memory view of a replica's durable log that raft reads through its `Storage` trait.
//!
//! raft-rs reads its log synchronously (`Storage` methods take `&self` and return at once), while core does no
//! I/O. So the view holds everything the group handed to its driver to persist: the hard state and every entry
//! of every `Write`, applied here *before* raft is advanced past the Ready that produced them (raft reads entries
//! back from `Storage` as soon as `advance_append_async` moved them out of its unstable buffer, whether or not
//! the driver has made them durable yet).
//!
//! Compaction is not built, but the view is laid out for it: entries are kept from `first_index` on, and the
//! term of the entry just before (`base_term`, the snapshot's term) answers `term(first_index - 1)`. Today
//! `first_index` is always 1 and `base_term` 0.

use raft::prelude::{ConfState, Entry as RaftEntry, HardState as RaftHardState, Snapshot};
use raft::{GetEntriesContext, RaftState, Storage, StorageError};

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
}

impl LogView {
    /// A view over a recovered log: `entries` must start at index 1 and be consecutive (checked by the caller).
    pub(super) fn new(hard_state: RaftHardState, conf_state: ConfState, entries: Vec<RaftEntry>) -> Self {
        debug_assert!(entries.iter().enumerate().all(|(k, e)| e.index == k as u64 + 1));
        Self { hard_state, conf_state, first_index: 1, base_term: 0, entries }
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

    /// Never asked today: raft wants a snapshot only for a follower that needs entries before `first_index`,
    /// and nothing is compacted. When compaction comes, this is where a snapshot is requested from the driver
    /// (answering "temporarily unavailable" until it is built, as TiKV does; see the design memo §3).
    fn snapshot(&self, _request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        Err(raft::Error::Store(StorageError::SnapshotTemporarilyUnavailable))
    }
}
