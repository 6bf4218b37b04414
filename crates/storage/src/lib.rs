//! Causet's durable storage: each partition's operation log and checkpoints, on the embedded engine fjall.
//!
//! The partition state machine (`causet_core::partition::Partition`) numbers its log records 1, 2, 3, … and asks
//! its driver to persist them; it releases a prepare acknowledgement or a commit only once the driver reports
//! the record durable. This crate is that persistence for the server:
//!
//! - [`LogStore::append`] enqueues a record for one **group-commit writer** thread, which takes everything
//!   queued (blocking for the first item, then draining the queue up to a bound), writes it as one atomic engine
//!   batch, runs one fsync ([`SyncMode::Always`]), and then reports on the [`DurableReceiver`], for each partition
//!   in the batch, the highest lsn now durable ([`Durable::Log`]). Concurrent appends of many partitions share
//!   one fsync.
//! - [`LogStore::checkpoint`] enqueues a checkpoint; it is written in one batch, after every record enqueued
//!   before it, and lets the writer delete the log records it covers, but never those from the checkpoint's
//!   `keep_log_from` on, which geo-replication still reads back for other DCs that have not acknowledged them
//!   ([`LogStore::read_log`]).
//! - [`LogStore::load`] recovers a partition: its complete checkpoint and the log records after it.
//!
//! # Raft groups
//! A partition whose replicas form a Raft group (`causet_core::group`, and `docs/design/raft-groups.md` §6)
//! persists the group's log instead of records: [`LogStore::write_group`] enqueues one
//! `GroupOutput::Write` for the same writer, so it shares batches and fsyncs with every other partition's
//! records. A Write is one op, hence in one engine batch (all of it or none), and ops are written in the order
//! they were enqueued, so it lands after every earlier write of its partition. It **replaces** the log from its
//! first entry on: a new leader may overwrite a conflicting uncommitted suffix, so the writer deletes the stored
//! entries at and after that index before inserting the new ones (cheap in the usual case: the writer knows each
//! partition's last index and scans only when a Write starts at or below it). The durability report
//! ([`Durable::Group`]) carries the number of the latest durable Write, which is what `Group::handle_written`
//! takes. [`LogStore::load_group`] recovers the checkpoint, the hard state and every stored entry, as a
//! `DurableState` for `Group::new`; [`LogStore::read_group_log`] reads entries back for catch-up.
//!
//! **Snapshots.** A Write may carry a snapshot to install (`causet_core::replica::InstalledSnapshot`: a leader's
//! complete checkpoint, its compaction point and the committed entries after it through the checkpoint's lsn).
//! The writer applies it in the Write's batch, before the Write's own entries and hard state: it deletes every
//! stored entry of the partition and every stored object image, then writes the snapshot's entries, its
//! checkpoint (state and every image) and its compaction point. So the replica's stored state becomes exactly the
//! snapshot's, atomically, and the Write's entries continue right after the snapshot's checkpoint.
//!
//! A node holds at most one replica of each partition of its DC, so the group log is keyed by partition like
//! the record log. A partition uses one or the other: a checkpoint's lsn is then the group's applied index, and
//! its truncation applies to whichever log the partition has.
//!
//! **Compaction.** A checkpoint makes the group entries it covers unnecessary for recovery. Truncating them is
//! off by default ([`StorageOptions::truncate_group_logs`]); when it is on, it follows checkpoints exactly as for
//! records (up to the checkpoint's lsn, never from `keep_log_from` on), and the writer records, atomically with
//! the deletion, the **compaction point** ([`Compacted`]: index and term of the last entry removed), which raft
//! needs to answer `term(first_index - 1)`. An installed snapshot sets the compaction point to its own, and later
//! checkpoints truncate after it. [`LogStore::load_group`] returns it in `DurableState::compacted`.
//!
//! # On-disk layout
//! One fjall database per node, in the directory given to [`FjallStore::open`], with three keyspaces shared by
//! all partitions (a partition prefix in the keys rather than keyspaces per partition, so the set of LSM trees is
//! fixed and no keyspace is ever created while records are being written):
//!
//! | keyspace | key | value |
//! |---|---|---|
//! | `log` | partition (u32 BE) ‖ lsn (u64 BE) | `LogRecord` |
//! | `checkpoint` | `0x00` ‖ partition (u32 BE) | checkpoint state: lsn, clock, frontier, prepared set, recent commits |
//! | `checkpoint` | `0x01` ‖ partition (u32 BE) ‖ postcard(`ObjectId`) | `ObjectImage`, the latest of that object |
//! | `checkpoint` | `0x02` ‖ partition (u32 BE) | group state: the Raft hard state and the compaction point |
//! | `raft` | partition (u32 BE) ‖ index (u64 BE) | a Raft entry: (term, kind, data) |
//! | `meta` | `incarnation` | u64, the last value [`LogStore::next_incarnation`] returned |
//! | `meta` | `generation` | u64, the disk's generation ([`LogStore::generation`]) |
//! | `meta` | `hosting` | u16, the nodes the DC's partitions were first placed over; also marks that the replicas this node runs are recorded ([`LogStore::init_hosting`]) |
//! | `meta` | `hosting/` ‖ partition (u32 BE) | `Hosting`: the replica this node runs for a replicated partition, or the incarnation of the one that left ([`LogStore::set_hosting`]) |
//! | `meta` | `buffer/` ‖ shard (u32 BE) ‖ lsn (u64 BE) | `BufferRecord`: a record of that shard's coordinator write-buffer log ([`LogStore::append_buffer`]) |
//!
//! Every value is a format-version byte (currently 6) followed by postcard; a value with an unknown version byte
//! or that does not decode is reported as [`StorageError::CorruptRecord`] (with partition and lsn),
//! [`StorageError::CorruptEntry`] (with partition and index), [`StorageError::CorruptCheckpoint`] or
//! [`StorageError::CorruptGroupState`], never a panic. The group state lies in the `checkpoint` keyspace because
//! it is, like the checkpoint state, one small value per partition that recovery reads; the entries get a
//! keyspace of their own, shaped like `log`. Adding them changed no existing value (format 4 is for the checkpoint's clock bound, format 5 for the
//! coordinator marks in prepare records and the checkpoint's memory of decided transactions, format 6 for replica
//! ids with an incarnation and generations below 2^31, with the hosting records). Big-endian keys make the engine's order the numeric order,
//! so a partition's log is one range scan and a checkpoint's objects one prefix scan. Incremental checkpoints
//! upsert only the objects they carry: the `checkpoint` keyspace always holds the latest image of every object.
//!
//! # Durability, and what fjall guarantees
//! fjall writes every batch to a journal (a write-ahead log) before its memtables; a batch is atomic across
//! keyspaces, and on recovery a torn last batch is discarded (the journal is checksummed per batch and
//! truncated to its last complete batch). A committed batch is only in the OS page cache until
//! `Database::persist(PersistMode::SyncAll)` fsyncs the journal: once committed it survives a process kill
//! (fjall flushes its journal buffer to the OS at every commit), but only an fsync makes it survive an OS crash or
//! power loss. The journal is one sequential, preallocated file at a time (a full journal is fsynced before the
//! next one is used), and recovery stops at the first entry that does not decode, so a crash loses at most a
//! suffix of batches, never a batch in the middle.
//!
//! Caveats from fjall's documentation and source (version 3.1): a batch whose framing decodes but whose checksum
//! does not match is reported as an error on open (`JournalRecoveryError::ChecksumMismatch`) rather than dropped;
//! after a power loss without fsync (only possible in [`SyncMode::Periodic`]) that could need an operator. fjall's
//! advice for I/O errors is to crash and restart, which is what a poisoned database forces.
//!
//! - [`SyncMode::Always`] (the default): the writer fsyncs after every batch and reports records durable only
//!   after the fsync that covers them returned. Acknowledged commits survive `kill -9` and power loss.
//! - [`SyncMode::Periodic`]: for benchmarks. Records are reported durable as soon as their batch is written to the
//!   engine (in the page cache, so they survive a process crash), and the journal is fsynced on a timer: an OS
//!   crash or power loss can lose the last interval of acknowledged commits.
//!
//! If a write or an fsync fails, fjall poisons the database; the writer stops, records the failure, reports no
//! further durability, and [`DurableReceiver::recv`] and every later [`LogStore::append`] return
//! [`StorageError::WriterFailed`]: the node must stop and recover (retrying an fsync after a failure is unsafe).
//!
//! A single fjall database must not be opened by two processes at once; fjall enforces this with a lock file
//! (released by the OS when a process dies, so a killed node can restart at once).

#![warn(missing_docs)]

mod codec;
mod error;
mod fjall_store;

pub use error::{Result, StorageError};
pub use fjall_store::FjallStore;

use causet_core::coordinator::BufferRecord;
pub use causet_core::group::Compacted;
use causet_core::group::{DurableState, Entry, HardState};
use causet_core::partition::Checkpoint;
use causet_core::record::{LogRecord, Lsn};
use causet_core::replica::{Hosting, InstalledSnapshot};
use causet_core::PartitionId;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// What recovery finds for one partition: the complete checkpoint (every object's latest image), if one was
/// written, and the log records after its lsn, ascending.
pub type Recovered = (Option<Checkpoint>, Vec<(Lsn, LogRecord)>);

/// What recovery finds for a partition's Raft group replica ([`LogStore::load_group`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RecoveredGroup {
    /// The complete checkpoint, as [`LogStore::load`] returns it.
    pub checkpoint: Option<Checkpoint>,
    /// The stored hard state (the default if none was written), the compaction point (the last entry truncation
    /// removed, if any: [`StorageOptions::truncate_group_logs`]), every stored entry (consecutive, from
    /// `compacted.index + 1`, or from 1 when nothing was compacted), and `applied`: the checkpoint's lsn (0
    /// without one), since the checkpoint holds every entry up to it applied.
    pub durable: DurableState,
}

/// The durable log and checkpoints of the partitions of one node.
///
/// Writes are asynchronous: [`LogStore::append`], [`LogStore::write_group`] and [`LogStore::checkpoint`] enqueue
/// and return; they take effect in the order they were called. Durability is reported separately, by the receiver
/// the store was opened with (for [`FjallStore`], a [`DurableReceiver`]), as batches of `(partition, Durable)`:
/// [`Durable::Log`]`(lsn)`, every record of that partition up to that lsn is durable; [`Durable::Group`]`(ready)`,
/// the group Write numbered `ready` and every earlier one of the partition are durable. Reports of records for one
/// partition are strictly increasing, and so are those of Writes as long as their numbers are (they are numbered
/// afresh after [`LogStore::load_group`]); every append and Write is eventually covered by one, unless the store
/// fails.
pub trait LogStore: Send + Sync {
    /// Increments a durable counter and returns its new value (1 on a fresh store). The server builds its
    /// coordinator ids from it so that they are unique across restarts. Synchronous: the new value is durable
    /// when this returns.
    fn next_incarnation(&self) -> Result<u64>;

    /// The generation of this store's disk: the one stored; else, on a fresh store (no incarnation yet), `new`;
    /// else 0 (a store written before generations existed). Stored either way, durably, before it returns. Call
    /// it before [`LogStore::next_incarnation`]. A node that lost its disk must come back in a new generation, so
    /// that its Raft replicas get new ids (`causet_core::replica`).
    fn generation(&self, new: u64) -> Result<u64>;

    /// The replica this node runs for each replicated partition (or the incarnation of the one that left it), and
    /// over how many nodes the DC's partitions were first placed: as recorded; on a store that recorded none yet,
    /// `first` (`causet_core::replica::first_hosting`) and `placed_nodes`, recorded durably before it returns.
    /// Synchronous; call it before writing to any partition.
    fn init_hosting(
        &self,
        first: BTreeMap<PartitionId, Hosting>,
        placed_nodes: u16,
    ) -> Result<(BTreeMap<PartitionId, Hosting>, u16)>;

    /// The addresses of the nodes of this node's DC, by node index, as [`LogStore::set_members`] last recorded
    /// them (empty on a store that recorded none).
    fn members(&self) -> Result<Vec<std::net::SocketAddr>>;

    /// Records the addresses of the nodes of this node's DC, by node index (a node joined the running DC).
    /// Synchronous: durable when this returns.
    fn set_members(&self, members: &[std::net::SocketAddr]) -> Result<()>;

    /// Enqueues a change of the replica this node runs for a partition, written after every write enqueued before
    /// it. [`Hosting::Left`] deletes, in the same batch, everything stored for the partition (its log records,
    /// group entries and state, checkpoint and object images): its replica was removed from its group. Either
    /// way the partition's next Writes and entries are numbered afresh, as for a new `Group`. Fails like
    /// [`LogStore::append`].
    fn set_hosting(&self, partition: PartitionId, hosting: Hosting) -> Result<()>;

    /// Recovers a partition: its complete checkpoint (merging every incremental checkpoint: the latest image of
    /// each object) and the log records after the checkpoint's lsn, ascending. Reads what the engine holds: call
    /// it before appending to the partition.
    fn load(&self, partition: PartitionId) -> Result<Recovered>;

    /// Enqueues a record for the group-commit writer. `lsn` must be above every lsn appended to or recovered for
    /// the partition ([`StorageError::LsnNotIncreasing`] otherwise). Returns at once unless the queue is full
    /// (then it waits for room: the disk is behind; counted in [`StorageStats::queue_full_waits`]). Fails with
    /// [`StorageError::WriterFailed`] once the writer has failed.
    fn append(&self, partition: PartitionId, lsn: Lsn, record: LogRecord) -> Result<()>;

    /// Enqueues a checkpoint. It is written atomically (object images upserted by object id, prepared set,
    /// recent commits, lsn, clock and frontier in one batch), strictly after every record enqueued before it.
    /// Afterwards the log records up to `checkpoint.lsn` are deleted, but none from `checkpoint.keep_log_from` on
    /// (the checkpoint's truncation hold, which the next checkpoint replaces); so are the partition's Raft group
    /// entries if [`StorageOptions::truncate_group_logs`]. Its lsn must lie between the previous checkpoint's and
    /// the last appended lsn or group entry index ([`StorageError::CheckpointOutOfOrder`] otherwise). Encoding
    /// happens in the caller: a large checkpoint belongs on a blocking thread.
    fn checkpoint(&self, partition: PartitionId, checkpoint: Checkpoint) -> Result<()>;

    /// Up to `max_records` log records of the partition after `after`, ascending, as written to the engine (for
    /// resending to other DCs what they have not acknowledged).
    fn read_log(&self, partition: PartitionId, after: Lsn, max_records: usize) -> Result<Vec<(Lsn, LogRecord)>>;

    /// Enqueues a Raft group's `GroupOutput::Write` for the group-commit writer, which writes it atomically (all
    /// of it or none), after every write enqueued before it: the partition's stored entries at and after
    /// `entries[0].index` are deleted (a new leader overwrote a conflicting suffix) and `entries` inserted, then
    /// `hard_state`, if given, replaces the stored one. `entries` may be empty (a hard-state-only Write). Once
    /// durable, it is reported as [`Durable::Group`]`(ready)`.
    ///
    /// With a `snapshot` (a follower installs its leader's, `causet_core::replica::InstalledSnapshot`), the same
    /// batch first replaces the partition's stored state by it: every stored entry of the partition goes
    /// (whatever its index) and the snapshot's entries are inserted; the compaction point becomes
    /// `snapshot.compacted`; every stored object image goes and the snapshot's checkpoint is written (state and
    /// images), so that the stored checkpoint is exactly the snapshot's, with its truncation hold. The Write's own
    /// entries and hard state then apply on top, and [`LogStore::load_group`] returns the snapshot's checkpoint,
    /// its compaction point, its entries followed by the Write's, and the hard state. The snapshot does not
    /// truncate anything itself: the next checkpoint truncates after `snapshot.compacted` as usual.
    ///
    /// Refused with [`StorageError::InvalidGroupWrite`] (nothing enqueued) if `ready` is not above the last Write
    /// number enqueued for the partition since it was opened or [`LogStore::load_group`]ed, if the entries are not
    /// consecutive, if they would leave a gap after the partition's last entry, or if they start at or below its
    /// checkpoint (raft never overwrites an applied entry). With a snapshot, "last entry" and "checkpoint" are the
    /// snapshot's (its `checkpoint.lsn`, so the Write's entries must start right after it), and it is refused too if
    /// its checkpoint's lsn is below the partition's current checkpoint, if `compacted.index` is above
    /// `checkpoint.lsn`, or if its entries are not consecutive from `compacted.index + 1` through exactly
    /// `checkpoint.lsn` (no entries: `compacted.index` must equal `checkpoint.lsn`). Waits for room and fails like
    /// [`LogStore::append`].
    fn write_group(
        &self,
        partition: PartitionId,
        ready: u64,
        snapshot: Option<Box<InstalledSnapshot>>,
        entries: Vec<Entry>,
        hard_state: Option<HardState>,
    ) -> Result<()>;

    /// Recovers a partition's Raft group replica: its complete checkpoint (as [`LogStore::load`]), its hard state
    /// and every stored entry. Stored entries that are not consecutive, or do not start right after the
    /// compaction point, are reported as [`StorageError::CorruptEntry`]. Call it before writing to the partition;
    /// the Writes after it are numbered afresh (a new `Group` starts from 1).
    fn load_group(&self, partition: PartitionId) -> Result<RecoveredGroup>;

    /// Up to `max_entries` entries of the partition's group log after index `after`, ascending, as written to the
    /// engine (for catch-up reads; the caller decodes the entries' data).
    fn read_group_log(&self, partition: PartitionId, after: Lsn, max_entries: usize) -> Result<Vec<Entry>>;

    /// Enqueues a record of shard `shard`'s coordinator write-buffer log (HoneyPot's buffered writes:
    /// `causet_core::coordinator::BufferRecord`), for the same writer, batches and fsyncs as every other write,
    /// after every write enqueued before it. Once durable it is reported as `(PartitionId(shard),
    /// Durable::Buffer(lsn))`. Fails like [`LogStore::append`].
    fn append_buffer(&self, shard: u32, lsn: Lsn, record: &BufferRecord) -> Result<()>;

    /// Enqueues the deletion of shard `shard`'s write-buffer log records before `before`, after every write
    /// enqueued before it. Fails like [`LogStore::append`].
    fn truncate_buffer(&self, shard: u32, before: Lsn) -> Result<()>;

    /// Every shard's write-buffer log as the engine holds it, records ascending (shards with none are absent).
    /// Call it before appending to them.
    fn load_buffers(&self) -> Result<BTreeMap<u32, Vec<(Lsn, BufferRecord)>>>;

    /// Counters, as of the last batch written.
    fn stats(&self) -> StorageStats;

    /// Writes everything enqueued, fsyncs, and stops the writer; blocks until it has (in async code, call it where
    /// blocking is allowed). Returns the writer's failure, if it failed. Dropping the store does the same and
    /// ignores the result.
    fn close(self) -> Result<()>
    where
        Self: Sized;
}

/// When the writer fsyncs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncMode {
    /// After every batch; a record is reported durable only after an fsync covers it. Acknowledged commits
    /// survive a crash of the process, of the OS, or of the power.
    #[default]
    Always,
    /// **For benchmarks.** Records are reported durable once written to the engine (the OS page cache), and the
    /// journal is fsynced every `interval`. A process crash loses nothing acknowledged, but an OS crash or a power
    /// loss can lose the last `interval` of acknowledged commits.
    Periodic {
        /// Time between fsyncs.
        interval: Duration,
    },
}

/// How a [`FjallStore`] runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageOptions {
    /// When to fsync.
    pub sync: SyncMode,
    /// The most writes (appends and checkpoints) waiting for the writer; an append beyond it waits.
    pub queue_capacity: usize,
    /// The most writes in one batch (one fsync).
    pub batch_writes_max: usize,
    /// The most encoded bytes in one batch; a single larger checkpoint makes a batch of its own.
    pub batch_bytes_max: usize,
    /// The engine's block cache.
    pub cache_bytes: u64,
    /// The most bytes each keyspace's memtable holds before it is flushed to disk (the engine has four: log,
    /// Raft log, checkpoints, metadata). Resident memory grows by up to this per keyspace under writes.
    pub memtable_bytes: u64,
    /// The most bytes of journal (the engine's write-ahead log) kept on disk, at least 64 MiB. The engine starts a
    /// new journal file when the current one passes 64 MB, and frees an old one once every keyspace has flushed
    /// what it holds; past this bound, it flushes the keyspaces that hold the oldest one back (rarely written
    /// ones, whose memtables would otherwise keep every journal for ever). Disk use stays within about this plus
    /// one journal file plus the tables.
    pub journal_bytes: u64,
    /// Whether checkpoints truncate the Raft group entries they cover (as they do records). Off by default (crate
    /// documentation, "Compaction").
    pub truncate_group_logs: bool,
}

impl Default for StorageOptions {
    fn default() -> Self {
        Self {
            sync: SyncMode::Always,
            queue_capacity: 65_536,
            batch_writes_max: 8_192,
            batch_bytes_max: 16 << 20,
            cache_bytes: 64 << 20,
            memtable_bytes: 64 << 20,
            journal_bytes: 64 << 20,
            truncate_group_logs: false,
        }
    }
}

/// The size of one partition's log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Records in the log (written and not truncated).
    pub records: u64,
    /// Their encoded size.
    pub bytes: u64,
}

/// Counters of a store, since it was opened (log sizes: in total).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageStats {
    /// The log of each partition that has one.
    pub logs: BTreeMap<PartitionId, LogStats>,
    /// The Raft group log of each partition that has one (`records` counts entries).
    pub group_logs: BTreeMap<PartitionId, LogStats>,
    /// Records written since open.
    pub records_written: u64,
    /// Checkpoints written since open.
    pub checkpoints_written: u64,
    /// Log records deleted by truncation since open.
    pub records_truncated: u64,
    /// Raft group Writes written since open.
    pub group_writes: u64,
    /// Snapshots installed by group Writes since open (not counted in `checkpoints_written`).
    pub snapshots_installed: u64,
    /// Raft entries written since open.
    pub entries_written: u64,
    /// Raft entries deleted since open: replaced by a Write that overwrote them or by an installed snapshot, or
    /// truncated by a checkpoint.
    pub entries_deleted: u64,
    /// Engine batches written.
    pub batches: u64,
    /// Journal fsyncs.
    pub fsyncs: u64,
    /// Records the fsyncs covered, added up: `records_synced / fsyncs` is the mean number of records per fsync.
    pub records_synced: u64,
    /// The most records one fsync covered.
    pub records_per_fsync_max: u64,
    /// How long the last fsync took.
    pub fsync_latency_us_last: u64,
    /// How long the slowest fsync took.
    pub fsync_latency_us_max: u64,
    /// All fsyncs' time, added up.
    pub fsync_latency_us_total: u64,
    /// Appends that found the queue full and waited.
    pub queue_full_waits: u64,
}

impl StorageStats {
    /// The mean number of records one fsync covered (group commit's gain), 0 before the first fsync.
    pub fn records_per_fsync(&self) -> f64 {
        if self.fsyncs == 0 {
            return 0.0;
        }
        self.records_synced as f64 / self.fsyncs as f64
    }

    /// The mean fsync latency in microseconds, 0 before the first fsync.
    pub fn fsync_latency_us_mean(&self) -> f64 {
        if self.fsyncs == 0 {
            return 0.0;
        }
        self.fsync_latency_us_total as f64 / self.fsyncs as f64
    }
}

/// What a durability report says is durable for its partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Durable {
    /// Every log record up to this lsn.
    Log(Lsn),
    /// The group Write with this number, and every Write enqueued before it (`Group::handle_written`).
    Group(u64),
    /// Every record of a coordinator's write-buffer log up to this lsn ([`LogStore::append_buffer`]). The report's
    /// id is then the coordinator's shard number, not a partition.
    Buffer(Lsn),
}

impl Durable {
    /// The lsn of a [`Durable::Log`] report.
    pub fn log(self) -> Option<Lsn> {
        match self {
            Durable::Log(lsn) => Some(lsn),
            Durable::Group(_) | Durable::Buffer(_) => None,
        }
    }

    /// The Write number of a [`Durable::Group`] report.
    pub fn group(self) -> Option<u64> {
        match self {
            Durable::Log(_) | Durable::Buffer(_) => None,
            Durable::Group(ready) => Some(ready),
        }
    }
}

/// A batch of durability reports, ascending by partition: at most one [`Durable::Log`] and one
/// [`Durable::Group`] per partition (the highest position; a partition uses only one of them in practice).
pub type DurableBatch = Vec<(PartitionId, Durable)>;

/// State the store's handles and its writer share.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    /// Why the writer failed, once it did.
    failure: OnceLock<String>,
    /// The counters, updated once per batch.
    stats: Mutex<StorageStats>,
    /// Appends that found the queue full (counted by the enqueuing side, so kept apart from `stats`).
    queue_full_waits: AtomicU64,
    /// Ops enqueued and not yet taken by the writer.
    queued: std::sync::atomic::AtomicUsize,
    /// The writer queue's capacity.
    queue_capacity: usize,
}

impl Shared {
    fn failure(&self) -> Option<StorageError> {
        self.failure.get().map(|reason| StorageError::WriterFailed(reason.clone()))
    }

    fn fail(&self, reason: String) {
        // The first failure is the one to report; a later one is its consequence.
        let _ = self.failure.set(reason);
    }

    fn stats(&self) -> std::sync::MutexGuard<'_, StorageStats> {
        // A panic while holding the lock leaves plain counters behind, still worth reading.
        self.stats.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Durability reports of a store (see [`LogStore`]). Reports of one kind for one partition increase.
#[derive(Debug)]
pub struct DurableReceiver {
    rx: tokio::sync::mpsc::Receiver<DurableBatch>,
    shared: Arc<Shared>,
}

impl DurableReceiver {
    /// The next batch of reports; `Ok(None)` once the store was closed and every report delivered;
    /// [`StorageError::WriterFailed`] once the writer failed (after the reports it made before failing).
    pub async fn recv(&mut self) -> Result<Option<DurableBatch>> {
        let next = self.rx.recv().await;
        self.after(next)
    }

    /// [`DurableReceiver::recv`] for synchronous callers. Panics if called inside an async runtime.
    pub fn blocking_recv(&mut self) -> Result<Option<DurableBatch>> {
        let next = self.rx.blocking_recv();
        self.after(next)
    }

    /// The next batch of reports if one is ready: `Ok(None)` if none is yet, [`StorageError::Closed`] once the
    /// store was closed and every report delivered, [`StorageError::WriterFailed`] once the writer failed.
    pub fn try_recv(&mut self) -> Result<Option<DurableBatch>> {
        use tokio::sync::mpsc::error::TryRecvError;
        match self.rx.try_recv() {
            Ok(batch) => Ok(Some(batch)),
            Err(TryRecvError::Empty) => Ok(None),
            Err(TryRecvError::Disconnected) => Err(self.shared.failure().unwrap_or(StorageError::Closed)),
        }
    }

    fn after(&self, next: Option<DurableBatch>) -> Result<Option<DurableBatch>> {
        match next {
            Some(batch) => Ok(Some(batch)),
            // The writer records its failure before it drops the sender, so this sees it.
            None => self.shared.failure().map_or(Ok(None), Err),
        }
    }
}
