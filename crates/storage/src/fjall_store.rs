//! [`FjallStore`]: the [`LogStore`] on fjall, with its group-commit writer thread.

use crate::codec::{self, GroupState, StateRef};
use crate::error::{Result, StorageError};
use crate::{
    Compacted, Durable, DurableBatch, DurableReceiver, LogStore, Recovered, RecoveredGroup, Shared, StorageOptions,
    StorageStats, SyncMode,
};
use causet_core::coordinator::BufferRecord;
use causet_core::group::{DurableState, Entry, HardState};
use causet_core::partition::Checkpoint;
use causet_core::record::{LogRecord, Lsn};
use causet_core::replica::{Hosting, InstalledSnapshot};
use causet_core::PartitionId;
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Durability reports waiting for the receiver at most; beyond, the writer coalesces them (one position per
/// partition) until there is room.
const NOTIFY_CAPACITY: usize = 64;
const _: () = assert!(NOTIFY_CAPACITY >= 2, "one slot of the report channel is kept for the final report");
/// How soon the writer retries handing reports to a receiver whose channel was full.
const NOTIFY_RETRY: Duration = Duration::from_millis(1);

/// The durable log and checkpoints of one node's partitions in a fjall database (layout and durability: see the
/// crate documentation).
pub struct FjallStore {
    db: Database,
    log: Keyspace,
    checkpoints: Keyspace,
    meta: Keyspace,
    raft: Keyspace,
    /// The writer's queue and each partition's positions, under one lock so that the order of the queue is the
    /// order of the checks; `None` once closed.
    queue: Mutex<Option<Queue>>,
    shared: Arc<Shared>,
    writer: Option<JoinHandle<()>>,
    /// Serialises [`LogStore::next_incarnation`]'s read-increment-write.
    incarnation: Mutex<()>,
}

#[derive(Debug)]
struct Queue {
    sender: SyncSender<Op>,
    cursors: HashMap<PartitionId, Cursor>,
}

/// What the enqueuing side knows of a partition, to refuse out-of-order writes before they reach the writer.
#[derive(Clone, Copy, Debug, Default)]
struct Cursor {
    /// The last lsn appended, or recovered from the log or the checkpoint.
    last: Lsn,
    /// The last checkpoint's lsn.
    checkpoint: Lsn,
    /// The last Raft entry index written or recovered (or the compaction point, with no entry left).
    group_last: Lsn,
    /// The last group Write number enqueued since open or [`LogStore::load_group`]; 0 for none.
    ready: u64,
}

/// A write for the writer thread, already encoded.
#[derive(Debug)]
enum Op {
    Append {
        partition: PartitionId,
        lsn: Lsn,
        value: Vec<u8>,
    },
    Checkpoint {
        partition: PartitionId,
        checkpoint: EncodedCheckpoint,
    },
    GroupWrite {
        partition: PartitionId,
        ready: u64,
        /// A snapshot to install before the entries.
        snapshot: Option<Box<EncodedSnapshot>>,
        /// Encoded entries by index, consecutive.
        entries: Vec<(Lsn, Vec<u8>)>,
        hard_state: Option<HardState>,
    },
    /// The replica this node runs for a partition; `left`: delete the partition's state first.
    Hosting {
        partition: PartitionId,
        value: Vec<u8>,
        left: bool,
    },
    /// A record of a coordinator's write-buffer log.
    BufferAppend {
        shard: u32,
        lsn: Lsn,
        value: Vec<u8>,
    },
    /// Deletes a write-buffer log's records before `before`.
    BufferTruncate {
        shard: u32,
        before: Lsn,
    },
    /// Makes the writer fail, as an engine error would.
    #[cfg(test)]
    Fail,
}

impl Op {
    /// The encoded bytes the op writes, to bound a batch.
    fn bytes(&self) -> usize {
        match self {
            Op::Append { value, .. } => codec::LOG_KEY_LEN + value.len(),
            Op::Checkpoint { checkpoint, .. } => checkpoint.bytes(),
            Op::GroupWrite { snapshot, entries, .. } => {
                // The group state is small next to a batch's bound; count it as a key.
                let snapshot = snapshot.as_ref().map_or(0, |s| s.checkpoint.bytes() + entries_bytes(&s.entries));
                codec::LOG_KEY_LEN + snapshot + entries_bytes(entries)
            }
            Op::Hosting { value, .. } | Op::BufferAppend { value, .. } => codec::LOG_KEY_LEN + value.len(),
            Op::BufferTruncate { .. } => codec::LOG_KEY_LEN,
            #[cfg(test)]
            Op::Fail => 0,
        }
    }
}

/// A checkpoint, encoded for the writer.
#[derive(Debug)]
struct EncodedCheckpoint {
    lsn: Lsn,
    state: Vec<u8>,
    /// Object images by key.
    objects: Vec<(Vec<u8>, Vec<u8>)>,
    /// The log from here on is kept.
    keep_from: Option<Lsn>,
}

impl EncodedCheckpoint {
    fn new(partition: PartitionId, checkpoint: &Checkpoint) -> Result<Self> {
        let state = codec::encode(&StateRef {
            lsn: checkpoint.lsn,
            clock: checkpoint.clock,
            frontier: &checkpoint.frontier,
            prepared: &checkpoint.prepared,
            recent_commits: &checkpoint.recent_commits,
            keep_log_from: checkpoint.keep_log_from,
            committed_through: checkpoint.committed_through,
            clock_bound: checkpoint.clock_bound,
            fenced: &checkpoint.fenced,
            peer_acked: &checkpoint.peer_acked,
            pvc: &checkpoint.pvc,
            remote_pending: &checkpoint.remote_pending,
            remote_applied: &checkpoint.remote_applied,
            decided: &checkpoint.decided,
            membership: &checkpoint.membership,
        })?;
        let objects = checkpoint
            .objects
            .iter()
            .map(|(object, image)| Ok((codec::object_key(partition, object)?, codec::encode(image)?)))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { lsn: checkpoint.lsn, state, objects, keep_from: checkpoint.keep_log_from })
    }

    fn bytes(&self) -> usize {
        self.state.len() + self.objects.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
    }
}

/// A snapshot to install ([`InstalledSnapshot`]), encoded for the writer.
#[derive(Debug)]
struct EncodedSnapshot {
    checkpoint: EncodedCheckpoint,
    compacted: Compacted,
    /// Encoded entries by index, consecutive from `compacted.index + 1` through `checkpoint.lsn`.
    entries: Vec<(Lsn, Vec<u8>)>,
}

fn encode_entries(entries: &[Entry]) -> Result<Vec<(Lsn, Vec<u8>)>> {
    entries.iter().map(|e| Ok((e.index, codec::encode_entry(e)?))).collect()
}

fn entries_bytes(entries: &[(Lsn, Vec<u8>)]) -> usize {
    entries.iter().map(|(_, v)| codec::LOG_KEY_LEN + v.len()).sum()
}

/// Why `entries` are not consecutive, if they are not.
fn gap(entries: &[Entry]) -> Option<String> {
    entries
        .windows(2)
        .find(|pair| pair[1].index.0 != pair[0].index.0.wrapping_add(1))
        .map(|pair| format!("entry {} follows entry {}", pair[1].index.0, pair[0].index.0))
}

/// Why a snapshot is not one a replica can install, whatever it holds: its entries must run from right after its
/// compaction point through its checkpoint's lsn.
fn malformed(snapshot: &InstalledSnapshot) -> Option<String> {
    let (lsn, compacted) = (snapshot.checkpoint.lsn, snapshot.compacted.index);
    if compacted > lsn {
        return Some(format!("snapshot compacted through {} beyond its checkpoint {}", compacted.0, lsn.0));
    }
    let (Some(first), Some(last)) = (snapshot.entries.first(), snapshot.entries.last()) else {
        return (compacted != lsn).then(|| {
            format!("snapshot without the entries after its compaction point {} through {}", compacted.0, lsn.0)
        });
    };
    if compacted.0.checked_add(1) != Some(first.index.0) {
        return Some(format!("snapshot entries from {} after compaction point {}", first.index.0, compacted.0));
    }
    if let Some(reason) = gap(&snapshot.entries) {
        return Some(format!("snapshot {reason}"));
    }
    (last.index != lsn).then(|| format!("snapshot entries end at {}, its checkpoint at {}", last.index.0, lsn.0))
}

/// The file fjall writes last when it creates a database (fjall's `VERSION_MARKER`): without it, no database was
/// ever created in the directory.
const ENGINE_VERSION_MARKER: &str = "version";

/// Removes what a process killed while fjall created the database in `dir` left behind, so that the next open
/// creates it afresh. fjall 3 creates its journal (`0.jnl`) and its `keyspaces` folder before it writes its
/// version marker last, and creates them with `create_new`: a kill between the two left a directory that never
/// opened again ("File exists", found by the crash test with a kill 6 ms after the start). Nothing was written to
/// such a database (the store writes only once `open` returned), so nothing is lost; with the marker present, this
/// touches nothing. The store's directory is the node's data directory: only fjall's own files go.
fn clear_unfinished_creation(dir: &Path) -> std::io::Result<()> {
    if !dir.exists() || dir.join(ENGINE_VERSION_MARKER).try_exists()? {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "jnl") && path.is_file() {
            std::fs::remove_file(&path)?;
        }
    }
    let keyspaces = dir.join("keyspaces");
    if keyspaces.is_dir() {
        std::fs::remove_dir_all(&keyspaces)?;
    }
    Ok(())
}

/// The engine's smallest bound on its journals (it refuses less).
pub const MIN_JOURNAL_BYTES: u64 = 64 << 20;

impl FjallStore {
    /// Opens (or creates) the store in `dir` and starts its writer thread. The receiver reports durability.
    ///
    /// Opening scans every partition's log and Raft group log once, to learn their sizes and last positions.
    pub fn open(dir: &Path, options: StorageOptions) -> Result<(FjallStore, DurableReceiver)> {
        validate(&options)?;
        clear_unfinished_creation(dir).map_err(fjall::Error::from)?;
        let db = Database::builder(dir)
            .cache_size(options.cache_bytes)
            .max_journaling_size(options.journal_bytes.max(MIN_JOURNAL_BYTES))
            .open()?;
        let memtable = options.memtable_bytes;
        let keyspace = move || KeyspaceCreateOptions::default().max_memtable_size(memtable);
        let log = db.keyspace("log", keyspace)?;
        let checkpoints = db.keyspace("checkpoint", keyspace)?;
        let meta = db.keyspace("meta", keyspace)?;
        let raft = db.keyspace("raft", keyspace)?;

        // What is on disk: each partition's log extent and size, and its checkpoint's lsn.
        let mut cursors: HashMap<PartitionId, Cursor> = HashMap::new();
        let mut first_lsns: HashMap<PartitionId, Lsn> = HashMap::new();
        let mut stats = StorageStats::default();
        for guard in log.iter() {
            let (key, value) = guard.into_inner()?;
            let (partition, lsn) = codec::parse_log_key(&key)?;
            first_lsns.entry(partition).or_insert(lsn);
            cursors.entry(partition).or_default().last = lsn;
            let size = stats.logs.entry(partition).or_default();
            size.records += 1;
            size.bytes += value.len() as u64;
        }
        for guard in checkpoints.prefix(codec::state_prefix()) {
            let (key, value) = guard.into_inner()?;
            let partition = codec::parse_state_key(&key)?;
            let state = codec::decode_state(partition, &value)?;
            let cursor = cursors.entry(partition).or_default();
            cursor.checkpoint = state.lsn;
            cursor.last = cursor.last.max(state.lsn);
        }
        // The same for Raft group logs, and each group's state.
        let mut first_indexes: HashMap<PartitionId, Lsn> = HashMap::new();
        for guard in raft.iter() {
            let (key, value) = guard.into_inner()?;
            let (partition, index) = codec::parse_entry_key(&key)?;
            first_indexes.entry(partition).or_insert(index);
            cursors.entry(partition).or_default().group_last = index;
            let size = stats.group_logs.entry(partition).or_default();
            size.records += 1;
            size.bytes += value.len() as u64;
        }
        let mut group_states: HashMap<PartitionId, GroupState> = HashMap::new();
        for guard in checkpoints.prefix(codec::group_state_prefix()) {
            let (key, value) = guard.into_inner()?;
            let partition = codec::parse_group_state_key(&key)?;
            let state = codec::decode_group_state(partition, &value)?;
            if let Some(compacted) = state.compacted {
                let cursor = cursors.entry(partition).or_default();
                cursor.group_last = cursor.group_last.max(compacted.index);
            }
            group_states.insert(partition, state);
        }
        let partitions = cursors
            .iter()
            .map(|(partition, cursor)| {
                // Everything below the first record still in the log was truncated; with no record left, nothing
                // at or below the last known lsn exists. Likewise for group entries.
                let truncated_through =
                    first_lsns.get(partition).map_or(cursor.last, |first| Lsn(first.0.saturating_sub(1)));
                let group_truncated_through =
                    first_indexes.get(partition).map_or(cursor.group_last, |first| Lsn(first.0.saturating_sub(1)));
                let state = WriterPartition {
                    checkpoint: cursor.checkpoint,
                    hold: None,
                    truncated_through,
                    group_truncated_through,
                    group_last: cursor.group_last,
                    group: group_states.get(partition).copied().unwrap_or_default(),
                };
                (*partition, state)
            })
            .collect();

        let shared = Arc::new(Shared { queue_capacity: options.queue_capacity, ..Shared::default() });
        *shared.stats() = stats.clone();
        let (sender, receiver) = mpsc::sync_channel(options.queue_capacity);
        let (notify, durable) = tokio::sync::mpsc::channel(NOTIFY_CAPACITY);
        let writer = Writer {
            db: db.clone(),
            log: log.clone(),
            checkpoints: checkpoints.clone(),
            raft: raft.clone(),
            meta: meta.clone(),
            receiver,
            notify,
            undelivered: BTreeMap::new(),
            buffer_truncated: HashMap::new(),
            shared: shared.clone(),
            next_sync: match options.sync {
                SyncMode::Always => None,
                SyncMode::Periodic { interval } => Some(Instant::now() + interval),
            },
            options,
            partitions,
            stats,
            unsynced_records: 0,
            unsynced: false,
        };
        let writer = std::thread::Builder::new()
            .name("causet-storage-writer".into())
            .spawn(move || writer.run())
            .map_err(|e| StorageError::WriterFailed(format!("cannot start the writer thread: {e}")))?;
        let store = FjallStore {
            db,
            log,
            checkpoints,
            meta,
            raft,
            queue: Mutex::new(Some(Queue { sender, cursors })),
            shared: shared.clone(),
            writer: Some(writer),
            incarnation: Mutex::new(()),
        };
        Ok((store, DurableReceiver { rx: durable, shared }))
    }

    /// Makes the writer fail at its next batch, as an engine error would.
    #[cfg(test)]
    pub(crate) fn inject_failure(&self) {
        let queue = self.lock_queue();
        if let Some(queue) = queue.as_ref() {
            let _ = queue.sender.send(Op::Fail);
        }
    }

    /// The engine, for tests that write bytes this crate never would.
    #[cfg(test)]
    pub(crate) fn keyspaces(&self) -> (&Keyspace, &Keyspace, &Keyspace) {
        (&self.log, &self.checkpoints, &self.meta)
    }

    /// The Raft entries' keyspace, for tests that write bytes this crate never would.
    #[cfg(test)]
    pub(crate) fn raft_keyspace(&self) -> &Keyspace {
        &self.raft
    }

    fn lock_queue(&self) -> MutexGuard<'_, Option<Queue>> {
        // The lock only guards plain data that every holder leaves consistent, even when it panics.
        self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `ops` more appends or checkpoints fit in the writer's queue now, so that enqueueing them does not
    /// wait. A caller on an async runtime that finds no room hands its writes to a blocking thread instead.
    pub fn has_room(&self, ops: usize) -> bool {
        self.shared.queued.load(Ordering::Relaxed) + ops <= self.shared.queue_capacity
    }

    /// Checks and enqueues one op; `check` sees the partition's cursor and may refuse.
    fn enqueue(
        &self,
        partition: Option<PartitionId>,
        check: impl FnOnce(&mut Cursor) -> Result<()>,
        op: impl FnOnce() -> Op,
    ) -> Result<()> {
        if let Some(failure) = self.shared.failure() {
            return Err(failure);
        }
        let mut guard = self.lock_queue();
        let queue = guard.as_mut().ok_or(StorageError::Closed)?;
        let mut unchecked = Cursor::default();
        let cursor = match partition {
            Some(p) => queue.cursors.entry(p).or_default(),
            None => &mut unchecked,
        };
        let before = *cursor;
        check(cursor)?;
        // Counted before the op can reach the writer, which uncounts it on receipt.
        self.shared.queued.fetch_add(1, Ordering::Relaxed);
        let sent = match queue.sender.try_send(op()) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(op)) => {
                // The disk is behind: wait for room (the writer never takes this lock, so it drains the queue).
                self.shared.queue_full_waits.fetch_add(1, Ordering::Relaxed);
                queue.sender.send(op).map_err(|_| ())
            }
            Err(TrySendError::Disconnected(_)) => Err(()),
        };
        if sent.is_err() {
            self.shared.queued.fetch_sub(1, Ordering::Relaxed);
        }
        if sent.is_err() {
            if let Some(p) = partition {
                *queue.cursors.entry(p).or_default() = before;
            }
            // The writer is gone, which it only is after recording its failure (or a panic).
            return Err(self.shared.failure().unwrap_or_else(|| StorageError::WriterFailed("writer stopped".into())));
        }
        Ok(())
    }

    /// Stops the writer after it wrote and fsynced everything enqueued.
    fn shutdown(&mut self) -> Result<()> {
        // Dropping the only sender lets the writer drain the queue, fsync and return.
        drop(self.lock_queue().take());
        if let Some(writer) = self.writer.take() {
            if writer.join().is_err() {
                self.shared.fail("the writer thread panicked".into());
            }
        }
        self.shared.failure().map_or(Ok(()), Err)
    }

    fn decode_log(iter: fjall::Iter, partition: PartitionId, max_records: usize) -> Result<Vec<(Lsn, LogRecord)>> {
        let mut records = Vec::new();
        for guard in iter.take(max_records) {
            let (key, value) = guard.into_inner()?;
            let (in_partition, lsn) = codec::parse_log_key(&key)?;
            if in_partition != partition {
                return Err(StorageError::CorruptKey { keyspace: "log", key: key.to_vec() });
            }
            records.push((lsn, codec::decode_record(partition, lsn, &value)?));
        }
        Ok(records)
    }

    /// Decodes up to `max_entries` Raft entries of `partition`, checking that they are consecutive (the first
    /// one at `first`, if given).
    fn decode_entries(
        iter: fjall::Iter,
        partition: PartitionId,
        mut first: Option<Lsn>,
        max_entries: usize,
    ) -> Result<Vec<Entry>> {
        let mut entries: Vec<Entry> = Vec::new();
        for guard in iter.take(max_entries) {
            let (key, value) = guard.into_inner()?;
            let (in_partition, index) = codec::parse_entry_key(&key)?;
            if in_partition != partition {
                return Err(StorageError::CorruptKey { keyspace: "raft", key: key.to_vec() });
            }
            let expected = entries.last().map(|e| Lsn(e.index.0.saturating_add(1))).or(first.take());
            if let Some(expected) = expected {
                if index != expected {
                    let reason = format!("expected index {} (the stored entries have a gap)", expected.0);
                    return Err(StorageError::CorruptEntry { partition, index, reason });
                }
            }
            entries.push(codec::decode_entry(partition, index, &value)?);
        }
        Ok(entries)
    }

    /// The complete checkpoint of a partition as `snapshot` sees it (every object's latest image).
    fn load_checkpoint(&self, snapshot: &fjall::Snapshot, partition: PartitionId) -> Result<Option<Checkpoint>> {
        let Some(bytes) = snapshot.get(&self.checkpoints, codec::state_key(partition))? else {
            return Ok(None);
        };
        let state = codec::decode_state(partition, &bytes)?;
        let prefix = codec::object_prefix(partition);
        let mut objects = Vec::new();
        for guard in snapshot.prefix(&self.checkpoints, &prefix) {
            let (key, value) = guard.into_inner()?;
            let object = codec::parse_object_key(partition, &prefix, &key)?;
            objects.push((object, codec::decode_image(partition, &value)?));
        }
        Ok(Some(Checkpoint {
            lsn: state.lsn,
            clock: state.clock,
            frontier: state.frontier,
            objects,
            prepared: state.prepared,
            recent_commits: state.recent_commits,
            keep_log_from: state.keep_log_from,
            committed_through: state.committed_through,
            clock_bound: state.clock_bound,
            fenced: state.fenced,
            peer_acked: state.peer_acked,
            pvc: state.pvc,
            remote_pending: state.remote_pending,
            remote_applied: state.remote_applied,
            decided: state.decided,
            membership: state.membership,
        }))
    }
}

fn validate(options: &StorageOptions) -> Result<()> {
    let invalid = |what: &str| Err(StorageError::InvalidOptions(what.to_string()));
    if options.queue_capacity == 0 {
        return invalid("queue_capacity must be at least 1");
    }
    if options.memtable_bytes < 1 << 20 {
        return invalid("memtable_bytes must be at least 1 MiB");
    }
    if options.batch_writes_max == 0 {
        return invalid("batch_writes_max must be at least 1");
    }
    if options.batch_bytes_max == 0 {
        return invalid("batch_bytes_max must be at least 1");
    }
    if let SyncMode::Periodic { interval } = options.sync {
        if interval.is_zero() {
            return invalid("the periodic sync interval must be positive");
        }
    }
    Ok(())
}

impl LogStore for FjallStore {
    fn append_buffer(&self, shard: u32, lsn: Lsn, record: &BufferRecord) -> Result<()> {
        let value = codec::encode(record)?;
        self.enqueue(None, |_| Ok(()), || Op::BufferAppend { shard, lsn, value })
    }

    fn truncate_buffer(&self, shard: u32, before: Lsn) -> Result<()> {
        self.enqueue(None, |_| Ok(()), || Op::BufferTruncate { shard, before })
    }

    fn load_buffers(&self) -> Result<BTreeMap<u32, Vec<(Lsn, BufferRecord)>>> {
        let mut logs: BTreeMap<u32, Vec<(Lsn, BufferRecord)>> = BTreeMap::new();
        for guard in self.meta.prefix(codec::BUFFER_PREFIX) {
            let (key, value) = guard.into_inner()?;
            let (shard, lsn) = codec::parse_buffer_key(&key)?;
            let record = codec::decode::<BufferRecord>(&value)
                .map_err(|reason| StorageError::CorruptMeta { what: "write-buffer log record", reason })?;
            logs.entry(shard).or_default().push((lsn, record));
        }
        Ok(logs)
    }

    fn generation(&self, new: u64) -> Result<u64> {
        let _serial = self.incarnation.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(bytes) = self.meta.get(codec::GENERATION_KEY)? {
            return codec::decode::<u64>(&bytes)
                .map_err(|reason| StorageError::CorruptMeta { what: "generation", reason });
        }
        let fresh = self.meta.get(codec::INCARNATION_KEY)?.is_none();
        let generation = if fresh { new } else { 0 };
        let mut batch = self.db.batch().durability(Some(PersistMode::SyncAll));
        batch.insert(&self.meta, codec::GENERATION_KEY, codec::encode(&generation)?);
        batch.commit()?;
        Ok(generation)
    }

    fn init_hosting(
        &self,
        first: BTreeMap<PartitionId, Hosting>,
        placed_nodes: u16,
    ) -> Result<(BTreeMap<PartitionId, Hosting>, u16)> {
        let _serial = self.incarnation.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(marker) = self.meta.get(codec::HOSTING_KEY)? {
            let placed = codec::decode::<u16>(&marker)
                .map_err(|reason| StorageError::CorruptMeta { what: "hosting", reason })?;
            let mut hosting = BTreeMap::new();
            for guard in self.meta.prefix(codec::HOSTING_PREFIX) {
                let (key, value) = guard.into_inner()?;
                let partition = codec::parse_hosting_key(&key)?;
                let h = codec::decode::<Hosting>(&value)
                    .map_err(|reason| StorageError::CorruptMeta { what: "hosting", reason })?;
                hosting.insert(partition, h);
            }
            return Ok((hosting, placed));
        }
        let mut batch = self.db.batch().durability(Some(PersistMode::SyncAll));
        for (p, h) in &first {
            batch.insert(&self.meta, codec::hosting_key(*p), codec::encode(h)?);
        }
        batch.insert(&self.meta, codec::HOSTING_KEY, codec::encode(&placed_nodes)?);
        batch.commit()?;
        Ok((first, placed_nodes))
    }

    fn members(&self) -> Result<Vec<std::net::SocketAddr>> {
        match self.meta.get(codec::MEMBERS_KEY)? {
            None => Ok(Vec::new()),
            Some(bytes) => codec::decode::<Vec<std::net::SocketAddr>>(&bytes)
                .map_err(|reason| StorageError::CorruptMeta { what: "members", reason }),
        }
    }

    fn set_members(&self, members: &[std::net::SocketAddr]) -> Result<()> {
        let _serial = self.incarnation.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut batch = self.db.batch().durability(Some(PersistMode::SyncAll));
        batch.insert(&self.meta, codec::MEMBERS_KEY, codec::encode(members)?);
        batch.commit()?;
        Ok(())
    }

    fn set_hosting(&self, partition: PartitionId, hosting: Hosting) -> Result<()> {
        let value = codec::encode(&hosting)?;
        let left = matches!(hosting, Hosting::Left { .. });
        self.enqueue(
            Some(partition),
            |cursor| {
                *cursor = Cursor::default();
                Ok(())
            },
            || Op::Hosting { partition, value, left },
        )
    }

    fn next_incarnation(&self) -> Result<u64> {
        let _serial = self.incarnation.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let last = match self.meta.get(codec::INCARNATION_KEY)? {
            None => 0,
            Some(bytes) => codec::decode::<u64>(&bytes)
                .map_err(|reason| StorageError::CorruptMeta { what: "incarnation", reason })?,
        };
        let next = last
            .checked_add(1)
            .ok_or_else(|| StorageError::CorruptMeta { what: "incarnation", reason: "counter exhausted".into() })?;
        let mut batch = self.db.batch().durability(Some(PersistMode::SyncAll));
        batch.insert(&self.meta, codec::INCARNATION_KEY, codec::encode(&next)?);
        batch.commit()?;
        Ok(next)
    }

    fn load(&self, partition: PartitionId) -> Result<Recovered> {
        // One snapshot, so that a checkpoint (and the truncation it allows) written meanwhile is seen whole or
        // not at all.
        let snapshot = self.db.snapshot();
        let checkpoint = self.load_checkpoint(&snapshot, partition)?;
        let after = checkpoint.as_ref().map_or(Lsn(0), |c| c.lsn);
        let range =
            codec::log_key(partition, Lsn(after.0.saturating_add(1)))..=codec::log_key(partition, Lsn(u64::MAX));
        let tail = if after.0 == u64::MAX {
            Vec::new()
        } else {
            Self::decode_log(snapshot.range(&self.log, range), partition, usize::MAX)?
        };
        Ok((checkpoint, tail))
    }

    fn append(&self, partition: PartitionId, lsn: Lsn, record: LogRecord) -> Result<()> {
        let value = codec::encode(&record)?;
        self.enqueue(
            Some(partition),
            |cursor| {
                if lsn <= cursor.last {
                    return Err(StorageError::LsnNotIncreasing { partition, lsn, last: cursor.last });
                }
                cursor.last = lsn;
                Ok(())
            },
            || Op::Append { partition, lsn, value },
        )
    }

    fn checkpoint(&self, partition: PartitionId, checkpoint: Checkpoint) -> Result<()> {
        let checkpoint = EncodedCheckpoint::new(partition, &checkpoint)?;
        let lsn = checkpoint.lsn;
        self.enqueue(
            Some(partition),
            |cursor| {
                // A group partition's checkpoint is at an entry index, a record partition's at a record's lsn.
                if lsn < cursor.checkpoint || lsn > cursor.last.max(cursor.group_last) {
                    let (previous, last) = (cursor.checkpoint, cursor.last.max(cursor.group_last));
                    return Err(StorageError::CheckpointOutOfOrder { partition, lsn, previous, last });
                }
                cursor.checkpoint = lsn;
                Ok(())
            },
            || Op::Checkpoint { partition, checkpoint },
        )
    }

    fn read_log(&self, partition: PartitionId, after: Lsn, max_records: usize) -> Result<Vec<(Lsn, LogRecord)>> {
        if after.0 == u64::MAX {
            return Ok(Vec::new());
        }
        let range = codec::log_key(partition, Lsn(after.0 + 1))..=codec::log_key(partition, Lsn(u64::MAX));
        Self::decode_log(self.log.range(range), partition, max_records)
    }

    fn write_group(
        &self,
        partition: PartitionId,
        ready: u64,
        snapshot: Option<Box<InstalledSnapshot>>,
        entries: Vec<Entry>,
        hard_state: Option<HardState>,
    ) -> Result<()> {
        let invalid = |reason: String| StorageError::InvalidGroupWrite { partition, ready, reason };
        if let Some(reason) = gap(&entries).or_else(|| snapshot.as_deref().and_then(malformed)) {
            return Err(invalid(reason));
        }
        let encoded = encode_entries(&entries)?;
        let span = entries.first().zip(entries.last()).map(|(first, last)| (first.index, last.index));
        let snapshot = match snapshot {
            Some(snapshot) => Some(Box::new(EncodedSnapshot {
                checkpoint: EncodedCheckpoint::new(partition, &snapshot.checkpoint)?,
                compacted: snapshot.compacted,
                entries: encode_entries(&snapshot.entries)?,
            })),
            None => None,
        };
        let installs = snapshot.as_ref().map(|s| s.checkpoint.lsn);
        self.enqueue(
            Some(partition),
            |cursor| {
                if ready <= cursor.ready {
                    return Err(invalid(format!("not above the last write {}", cursor.ready)));
                }
                // The log and checkpoint the entries follow: the snapshot's, if one is installed first.
                let (mut checkpoint, mut group_last) = (cursor.checkpoint, cursor.group_last);
                if let Some(lsn) = installs {
                    if lsn < checkpoint {
                        return Err(invalid(format!("snapshot at {} below checkpoint {}", lsn.0, checkpoint.0)));
                    }
                    (checkpoint, group_last) = (lsn, lsn);
                }
                if let Some((first, last)) = span {
                    if first.0 == 0 || first.0 > group_last.0.saturating_add(1) {
                        let reason = format!("entries from {} leave a gap after {}", first.0, group_last.0);
                        return Err(invalid(reason));
                    }
                    if first <= checkpoint {
                        let reason = format!("entries from {} overwrite checkpoint {}", first.0, checkpoint.0);
                        return Err(invalid(reason));
                    }
                    group_last = last;
                }
                (cursor.checkpoint, cursor.group_last, cursor.ready) = (checkpoint, group_last, ready);
                Ok(())
            },
            || Op::GroupWrite { partition, ready, snapshot, entries: encoded, hard_state },
        )
    }

    fn load_group(&self, partition: PartitionId) -> Result<RecoveredGroup> {
        // The Writes of a new `Group` are numbered from 1 again.
        if let Some(queue) = self.lock_queue().as_mut() {
            queue.cursors.entry(partition).or_default().ready = 0;
        }
        // One snapshot: a checkpoint, its truncation and the compaction point are seen whole or not at all.
        let snapshot = self.db.snapshot();
        let checkpoint = self.load_checkpoint(&snapshot, partition)?;
        let state = match snapshot.get(&self.checkpoints, codec::group_state_key(partition))? {
            Some(bytes) => codec::decode_group_state(partition, &bytes)?,
            None => GroupState::default(),
        };
        let first = Lsn(state.compacted.map_or(0, |c| c.index.0).saturating_add(1));
        let range = codec::entry_key(partition, Lsn(0))..=codec::entry_key(partition, Lsn(u64::MAX));
        let entries = Self::decode_entries(snapshot.range(&self.raft, range), partition, Some(first), usize::MAX)?;
        let applied = checkpoint.as_ref().map_or(Lsn(0), |c| c.lsn);
        Ok(RecoveredGroup {
            checkpoint,
            // The membership as of `applied` is the checkpoint's, which the replica takes from it.
            durable: DurableState {
                hard_state: state.hard_state,
                compacted: state.compacted,
                entries,
                applied,
                membership: None,
            },
        })
    }

    fn read_group_log(&self, partition: PartitionId, after: Lsn, max_entries: usize) -> Result<Vec<Entry>> {
        if after.0 == u64::MAX {
            return Ok(Vec::new());
        }
        let range = codec::entry_key(partition, Lsn(after.0 + 1))..=codec::entry_key(partition, Lsn(u64::MAX));
        Self::decode_entries(self.raft.range(range), partition, None, max_entries)
    }

    fn stats(&self) -> StorageStats {
        let mut stats = self.shared.stats().clone();
        stats.queue_full_waits = self.shared.queue_full_waits.load(Ordering::Relaxed);
        stats
    }

    fn close(mut self) -> Result<()> {
        self.shutdown()
    }
}

impl Drop for FjallStore {
    fn drop(&mut self) {
        // A store dropped without `close` still writes and fsyncs what was enqueued; a failure was already
        // reported to the durability receiver.
        let _ = self.shutdown();
    }
}

impl std::fmt::Debug for FjallStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FjallStore").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

/// What the writer knows of a partition, to truncate its logs and replace its group log's suffixes.
#[derive(Clone, Copy, Debug, Default)]
struct WriterPartition {
    /// The last checkpoint's lsn.
    checkpoint: Lsn,
    /// The truncation hold: records above it are kept (the last checkpoint's `keep_log_from`, less one).
    hold: Option<Lsn>,
    /// Every log record up to here is deleted (or never existed).
    truncated_through: Lsn,
    /// Every Raft entry up to here is deleted (or never existed).
    group_truncated_through: Lsn,
    /// The last Raft entry index written (or the compaction point, with no entry left): a Write starting above
    /// it deletes nothing, so the writer looks for entries to replace only when a Write starts at or below it.
    group_last: Lsn,
    /// The group state as last written.
    group: GroupState,
}

/// Which keyspace a write goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Space {
    Log,
    Checkpoint,
    Raft,
    Meta,
}

/// One batch under construction: the last write to each key wins (so a record appended and truncated in the
/// same batch is simply not written), the highest lsn appended to each partition, and its latest group Write.
#[derive(Debug, Default)]
struct Batch {
    writes: BTreeMap<(Space, Vec<u8>), Option<Vec<u8>>>,
    durable: BTreeMap<PartitionId, Lsn>,
    group_durable: BTreeMap<PartitionId, u64>,
    /// The highest write-buffer log record appended, by shard.
    buffer_durable: BTreeMap<u32, Lsn>,
    /// Partitions whose group state changed, written once at the end of the batch.
    group_states: BTreeSet<PartitionId>,
    records: u64,
    group_writes: u64,
    entries: u64,
}

/// Durable positions of a partition not yet handed to the receiver.
#[derive(Clone, Copy, Debug, Default)]
struct Undelivered {
    log: Option<Lsn>,
    group: Option<u64>,
    /// For a shard's write-buffer log (the key is then the shard's number: [`Durable::Buffer`]).
    buffer: Option<Lsn>,
}

/// The group-commit writer: the only thread that writes log records and checkpoints.
struct Writer {
    db: Database,
    log: Keyspace,
    checkpoints: Keyspace,
    raft: Keyspace,
    meta: Keyspace,
    receiver: Receiver<Op>,
    notify: tokio::sync::mpsc::Sender<DurableBatch>,
    /// Durable positions not yet handed to the receiver (its channel was full), coalesced per partition: at most
    /// one entry per partition, so a slow receiver costs no memory beyond that.
    undelivered: BTreeMap<PartitionId, Undelivered>,
    shared: Arc<Shared>,
    options: StorageOptions,
    partitions: HashMap<PartitionId, WriterPartition>,
    stats: StorageStats,
    /// [`SyncMode::Periodic`]: when the next fsync is due.
    next_sync: Option<Instant>,
    /// Records written since the last fsync.
    unsynced_records: u64,
    /// Whether anything was written since the last fsync.
    unsynced: bool,
    /// Per shard's write-buffer log, the position below which this writer has deleted every record: a truncation
    /// scans the log from there, not from its start. (Deleted records stay as tombstones until compaction, and a
    /// scan from the start stepped over all of them: with a round of handovers every few milliseconds, a quarter
    /// of a node's CPU, 2026-11-30.)
    buffer_truncated: HashMap<u32, Lsn>,
}

impl Writer {
    fn run(mut self) {
        if let Err(e) = self.serve() {
            // Record the failure before the notification sender drops (with `self`), so that a receiver that
            // sees the channel close finds it.
            self.shared.fail(e.to_string());
        }
    }

    /// Hands the undelivered durable positions to the receiver if its channel has room; a dropped receiver only
    /// means nobody listens any more. While the writer runs it leaves the channel's last slot free, so that its
    /// final report at close always finds room, whether or not the receiver still reads.
    fn deliver(&mut self, closing: bool) {
        if self.undelivered.is_empty() || (!closing && self.notify.capacity() <= 1) {
            return;
        }
        let batch: DurableBatch = self
            .undelivered
            .iter()
            .flat_map(|(p, u)| {
                let log = u.log.map(|lsn| (*p, Durable::Log(lsn)));
                let group = u.group.map(|ready| (*p, Durable::Group(ready)));
                let buffer = u.buffer.map(|lsn| (*p, Durable::Buffer(lsn)));
                log.into_iter().chain(group).chain(buffer)
            })
            .collect();
        match self.notify.try_send(batch) {
            Ok(()) | Err(tokio::sync::mpsc::error::TrySendError::Closed(_)) => self.undelivered.clear(),
            Err(tokio::sync::mpsc::error::TrySendError::Full(_)) => {}
        }
    }

    fn serve(&mut self) -> Result<()> {
        loop {
            // While reports wait for room in the receiver's channel, wake up soon to retry.
            let next_sync = match (self.next_sync, self.undelivered.is_empty()) {
                (next, true) => next,
                (next, false) => {
                    let retry = Instant::now() + NOTIFY_RETRY;
                    Some(next.map_or(retry, |n| n.min(retry)))
                }
            };
            let first = match next_sync {
                None => match self.receiver.recv() {
                    Ok(op) => op,
                    Err(_) => break,
                },
                Some(due) => match self.receiver.recv_timeout(due.saturating_duration_since(Instant::now())) {
                    Ok(op) => op,
                    Err(RecvTimeoutError::Timeout) => {
                        if self.next_sync.is_some_and(|due| Instant::now() >= due) {
                            self.periodic_sync()?;
                        }
                        self.deliver(false);
                        continue;
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                },
            };
            let mut bytes = first.bytes();
            let mut ops = vec![first];
            while ops.len() < self.options.batch_writes_max && bytes < self.options.batch_bytes_max {
                match self.receiver.try_recv() {
                    Ok(op) => {
                        bytes += op.bytes();
                        ops.push(op);
                    }
                    Err(_) => break,
                }
            }
            self.shared.queued.fetch_sub(ops.len(), Ordering::Relaxed);
            let batch = self.build(ops)?;
            self.write(batch)?;
        }
        // Closing: every enqueued write is written; make it durable.
        if self.unsynced {
            self.sync()?;
            self.publish_stats();
        }
        // The last report takes the slot kept free for it.
        self.deliver(true);
        Ok(())
    }

    /// Turns ops into one batch, in queue order.
    fn build(&mut self, ops: Vec<Op>) -> Result<Batch> {
        let mut batch = Batch::default();
        for op in ops {
            match op {
                Op::Append { partition, lsn, value } => {
                    let size = self.stats.logs.entry(partition).or_default();
                    size.records += 1;
                    size.bytes += value.len() as u64;
                    batch.writes.insert((Space::Log, codec::log_key(partition, lsn)), Some(value));
                    let durable = batch.durable.entry(partition).or_insert(lsn);
                    assert!(lsn >= *durable, "appends of {partition:?} out of order");
                    *durable = lsn;
                    batch.records += 1;
                }
                Op::Checkpoint { partition, checkpoint } => {
                    self.write_checkpoint(partition, checkpoint, &mut batch);
                    self.stats.checkpoints_written += 1;
                    self.truncate(partition, &mut batch)?;
                }
                Op::GroupWrite { partition, ready, snapshot, entries, hard_state } => {
                    if let Some(snapshot) = snapshot {
                        self.install(partition, *snapshot, &mut batch)?;
                    }
                    if let Some((first, _)) = entries.first() {
                        if *first <= self.partition(partition).group_last {
                            // A new leader overwrote a suffix: what is stored from here on goes.
                            let deleted = self.deletions(partition, Space::Raft, *first, Lsn(u64::MAX), &batch)?;
                            self.delete(partition, Space::Raft, deleted, &mut batch);
                        }
                    }
                    self.insert_entries(partition, entries, &mut batch);
                    if let Some(hard_state) = hard_state {
                        self.partition(partition).group.hard_state = hard_state;
                        batch.group_states.insert(partition);
                    }
                    // The latest Write covers every earlier one.
                    batch.group_durable.insert(partition, ready);
                    batch.group_writes += 1;
                }
                Op::Hosting { partition, value, left } => {
                    if left {
                        self.drop_partition(partition, &mut batch)?;
                    }
                    // Reports for the replica that left must not reach the next one (its Writes are numbered afresh).
                    self.undelivered.remove(&partition);
                    batch.writes.insert((Space::Meta, codec::hosting_key(partition)), Some(value));
                }
                Op::BufferAppend { shard, lsn, value } => {
                    batch.writes.insert((Space::Meta, codec::buffer_key(shard, lsn)), Some(value));
                    let durable = batch.buffer_durable.entry(shard).or_insert(lsn);
                    *durable = (*durable).max(lsn);
                    batch.records += 1;
                }
                Op::BufferTruncate { shard, before } => {
                    let (from, to) = (codec::buffer_key(shard, Lsn(0)), codec::buffer_key(shard, before));
                    let floor = self.buffer_truncated.get(&shard).copied().unwrap_or(Lsn(0));
                    for guard in self.meta.range(codec::buffer_key(shard, floor)..to.clone()) {
                        let key = guard.key()?;
                        batch.writes.insert((Space::Meta, key.to_vec()), None);
                    }
                    // The batch commits, or the writer stops: the floor holds for the rest of its life.
                    self.buffer_truncated.insert(shard, floor.max(before));
                    for ((space, key), value) in batch.writes.iter_mut() {
                        if *space == Space::Meta && *key >= from && *key < to {
                            *value = None;
                        }
                    }
                }
                #[cfg(test)]
                Op::Fail => return Err(StorageError::WriterFailed("injected failure".into())),
            }
        }
        for partition in std::mem::take(&mut batch.group_states) {
            let value = codec::encode(&self.partition(partition).group)?;
            batch.writes.insert((Space::Checkpoint, codec::group_state_key(partition)), Some(value));
        }
        Ok(batch)
    }

    /// Writes a checkpoint's state and object images (upserted) in the batch, and takes its lsn and truncation
    /// hold; truncates nothing.
    fn write_checkpoint(&mut self, partition: PartitionId, checkpoint: EncodedCheckpoint, batch: &mut Batch) {
        batch.writes.insert((Space::Checkpoint, codec::state_key(partition)), Some(checkpoint.state));
        for (key, image) in checkpoint.objects {
            batch.writes.insert((Space::Checkpoint, key), Some(image));
        }
        let written = self.partition(partition);
        written.checkpoint = checkpoint.lsn;
        written.hold = checkpoint.keep_from.map(|from| Lsn(from.0.saturating_sub(1)));
    }

    /// Inserts encoded entries in the batch, counted into the group log's size.
    fn insert_entries(&mut self, partition: PartitionId, entries: Vec<(Lsn, Vec<u8>)>, batch: &mut Batch) {
        let size = self.stats.group_logs.entry(partition).or_default();
        for (index, value) in entries {
            size.records += 1;
            size.bytes += value.len() as u64;
            batch.writes.insert((Space::Raft, codec::entry_key(partition, index)), Some(value));
            self.partitions.entry(partition).or_default().group_last = index;
            batch.entries += 1;
        }
    }

    /// Replaces the partition's checkpoint and group log by a snapshot: every object image and every entry that
    /// exists once the batch so far is written goes, then the snapshot's checkpoint, entries and compaction point
    /// are written. Truncates nothing beyond that: the next checkpoint truncates after the compaction point.
    fn install(&mut self, partition: PartitionId, snapshot: EncodedSnapshot, batch: &mut Batch) -> Result<()> {
        let images = self.object_images(partition, batch)?;
        self.delete(partition, Space::Checkpoint, images, batch);
        let lsn = snapshot.checkpoint.lsn;
        self.write_checkpoint(partition, snapshot.checkpoint, batch);
        let entries = self.deletions(partition, Space::Raft, Lsn(0), Lsn(u64::MAX), batch)?;
        self.delete(partition, Space::Raft, entries, batch);
        self.insert_entries(partition, snapshot.entries, batch);
        let state = self.partition(partition);
        state.group.compacted = Some(snapshot.compacted);
        state.group_truncated_through = snapshot.compacted.index;
        state.group_last = lsn;
        batch.group_states.insert(partition);
        self.stats.snapshots_installed += 1;
        Ok(())
    }

    /// Deletes everything stored for the partition in the batch: log records, group entries and state, checkpoint
    /// state and object images. Its replica left its group; a later one starts from nothing.
    fn drop_partition(&mut self, partition: PartitionId, batch: &mut Batch) -> Result<()> {
        let images = self.object_images(partition, batch)?;
        self.delete(partition, Space::Checkpoint, images, batch);
        for space in [Space::Log, Space::Raft] {
            let keys = self.deletions(partition, space, Lsn(0), Lsn(u64::MAX), batch)?;
            self.delete(partition, space, keys, batch);
        }
        batch.writes.insert((Space::Checkpoint, codec::state_key(partition)), None);
        batch.writes.insert((Space::Checkpoint, codec::group_state_key(partition)), None);
        batch.group_states.remove(&partition);
        batch.durable.remove(&partition);
        batch.group_durable.remove(&partition);
        self.partitions.remove(&partition);
        self.stats.logs.remove(&partition);
        self.stats.group_logs.remove(&partition);
        Ok(())
    }

    fn partition(&mut self, partition: PartitionId) -> &mut WriterPartition {
        self.partitions.entry(partition).or_default()
    }

    fn keyspace(&self, space: Space) -> &Keyspace {
        match space {
            Space::Log => &self.log,
            Space::Checkpoint => &self.checkpoints,
            Space::Raft => &self.raft,
            Space::Meta => &self.meta,
        }
    }

    /// The keys of `space` (log or raft) of `partition` from `from` to `to` that exist once the batch so far is
    /// written, with their values' sizes, ascending: those the batch writes, and those in the engine that the
    /// batch does not touch.
    fn deletions(
        &self,
        partition: PartitionId,
        space: Space,
        from: Lsn,
        to: Lsn,
        batch: &Batch,
    ) -> Result<Vec<(Vec<u8>, usize)>> {
        let (from, to) = (codec::log_key(partition, from), codec::log_key(partition, to));
        let engine = self.keyspace(space).range(from.clone()..=to.clone());
        Self::existing(space, from, |key| key <= to.as_slice(), engine, batch)
    }

    /// The keys of the partition's object images that exist once the batch so far is written, as
    /// [`Writer::deletions`] finds log keys.
    fn object_images(&self, partition: PartitionId, batch: &Batch) -> Result<Vec<(Vec<u8>, usize)>> {
        let prefix = codec::object_prefix(partition);
        let engine = self.checkpoints.prefix(&prefix);
        Self::existing(Space::Checkpoint, prefix.clone(), |key| key.starts_with(&prefix), engine, batch)
    }

    /// The keys of `space` from `from` on, as long as `within` holds, that exist once the batch so far is written,
    /// with their values' sizes, ascending; `engine` iterates over the same keys in the engine.
    fn existing(
        space: Space,
        from: Vec<u8>,
        within: impl Fn(&[u8]) -> bool,
        engine: fjall::Iter,
        batch: &Batch,
    ) -> Result<Vec<(Vec<u8>, usize)>> {
        let mut found: Vec<(Vec<u8>, usize)> = batch
            .writes
            .range((space, from)..)
            .take_while(|((in_space, key), _)| *in_space == space && within(key))
            .filter_map(|((_, key), value)| value.as_ref().map(|v| (key.clone(), v.len())))
            .collect();
        for guard in engine {
            let (key, value) = guard.into_inner()?;
            if !batch.writes.contains_key(&(space, key.to_vec())) {
                found.push((key.to_vec(), value.len()));
            }
        }
        found.sort_unstable();
        Ok(found)
    }

    /// Deletes `keys` (found by [`Writer::deletions`] or [`Writer::object_images`]) in the batch, and counts
    /// deleted records and entries out of their log's size.
    fn delete(&mut self, partition: PartitionId, space: Space, keys: Vec<(Vec<u8>, usize)>, batch: &mut Batch) {
        let (sizes, deleted) = match space {
            Space::Raft => (&mut self.stats.group_logs, &mut self.stats.entries_deleted),
            Space::Log => (&mut self.stats.logs, &mut self.stats.records_truncated),
            Space::Checkpoint | Space::Meta => {
                for (key, _) in keys {
                    batch.writes.insert((space, key), None);
                }
                return;
            }
        };
        let size = sizes.entry(partition).or_default();
        for (key, len) in keys {
            batch.writes.insert((space, key), None);
            size.records = size.records.saturating_sub(1);
            size.bytes = size.bytes.saturating_sub(len as u64);
            *deleted += 1;
        }
    }

    /// Deletes the partition's log records covered by its checkpoint and not held, both those in the engine and
    /// those still in this batch; and its Raft entries likewise if [`StorageOptions::truncate_group_logs`], noting
    /// the last one removed as the compaction point.
    fn truncate(&mut self, partition: PartitionId, batch: &mut Batch) -> Result<()> {
        let state = *self.partition(partition);
        let target = state.checkpoint.min(state.hold.unwrap_or(Lsn(u64::MAX)));
        if target > state.truncated_through {
            let deleted = self.deletions(partition, Space::Log, Lsn(state.truncated_through.0 + 1), target, batch)?;
            self.delete(partition, Space::Log, deleted, batch);
            self.partition(partition).truncated_through = target;
        }
        if self.options.truncate_group_logs && target > state.group_truncated_through {
            let from = Lsn(state.group_truncated_through.0 + 1);
            let deleted = self.deletions(partition, Space::Raft, from, target, batch)?;
            if let Some((last, _)) = deleted.last() {
                let (_, index) = codec::parse_entry_key(last)?;
                let term = match batch.writes.get(&(Space::Raft, last.clone())) {
                    Some(Some(value)) => codec::decode_entry_term(partition, index, value)?,
                    _ => match self.raft.get(last)? {
                        Some(value) => codec::decode_entry_term(partition, index, &value)?,
                        None => {
                            let reason = "vanished from the engine while being truncated".to_string();
                            return Err(StorageError::CorruptEntry { partition, index, reason });
                        }
                    },
                };
                self.partition(partition).group.compacted = Some(Compacted { index, term });
                batch.group_states.insert(partition);
            }
            self.delete(partition, Space::Raft, deleted, batch);
            self.partition(partition).group_truncated_through = target;
        }
        Ok(())
    }

    /// Writes a batch, fsyncs as the mode says, and reports durability.
    fn write(&mut self, batch: Batch) -> Result<()> {
        if !batch.writes.is_empty() {
            let mut engine = self.db.batch();
            for ((space, key), value) in batch.writes {
                let keyspace = self.keyspace(space);
                match value {
                    Some(value) => engine.insert(keyspace, key, value),
                    None => engine.remove(keyspace, key),
                }
            }
            engine.commit()?;
            self.stats.batches += 1;
            self.stats.records_written += batch.records;
            self.stats.group_writes += batch.group_writes;
            self.stats.entries_written += batch.entries;
            self.unsynced_records += batch.records;
            self.unsynced = true;
            match self.next_sync {
                None => self.sync()?,
                Some(due) if Instant::now() >= due => self.periodic_sync()?,
                Some(_) => {}
            }
        }
        self.publish_stats();
        for (partition, lsn) in batch.durable {
            let slot = self.undelivered.entry(partition).or_default();
            slot.log = slot.log.max(Some(lsn));
        }
        for (partition, ready) in batch.group_durable {
            // The latest Write, not the highest number: a new `Group` numbers its Writes from 1 again.
            self.undelivered.entry(partition).or_default().group = Some(ready);
        }
        for (shard, lsn) in batch.buffer_durable {
            let slot = self.undelivered.entry(PartitionId(shard)).or_default();
            slot.buffer = slot.buffer.max(Some(lsn));
        }
        self.deliver(false);
        Ok(())
    }

    fn periodic_sync(&mut self) -> Result<()> {
        if self.unsynced {
            self.sync()?;
            self.publish_stats();
        }
        let interval = match self.options.sync {
            SyncMode::Periodic { interval } => interval,
            SyncMode::Always => Duration::ZERO,
        };
        self.next_sync = Some(Instant::now() + interval);
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let started = Instant::now();
        self.db.persist(PersistMode::SyncAll)?;
        let latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let stats = &mut self.stats;
        stats.fsyncs += 1;
        stats.fsync_latency_us_last = latency_us;
        stats.fsync_latency_us_max = stats.fsync_latency_us_max.max(latency_us);
        stats.fsync_latency_us_total = stats.fsync_latency_us_total.saturating_add(latency_us);
        stats.records_synced += self.unsynced_records;
        stats.records_per_fsync_max = stats.records_per_fsync_max.max(self.unsynced_records);
        self.unsynced_records = 0;
        self.unsynced = false;
        Ok(())
    }

    fn publish_stats(&self) {
        *self.shared.stats() = self.stats.clone();
    }
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("partitions", &self.partitions).finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Compacted, Durable};
    use causet_core::{CoordinatorId, DcId, TxId, VectorClock};

    fn record(seq: u64) -> LogRecord {
        LogRecord::Aborted { tx: TxId { dc: DcId(0), coordinator: CoordinatorId(0), seq } }
    }

    fn open(dir: &Path) -> (FjallStore, DurableReceiver) {
        FjallStore::open(dir, StorageOptions::default()).unwrap()
    }

    #[test]
    fn a_store_whose_creation_was_cut_short_opens_afresh_and_one_with_data_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        // Something of the node's own in its data directory, which must survive.
        std::fs::write(dir.path().join("faults.json"), "{}").unwrap();
        let (store, _rx) = open(dir.path());
        drop(store);
        // What a kill during the engine's creation of the database leaves: its journal and folders, and not the
        // version marker it writes last. The open used to fail ("File exists": the journal is created new).
        std::fs::remove_file(dir.path().join(ENGINE_VERSION_MARKER)).unwrap();
        let (store, mut rx) = FjallStore::open(dir.path(), StorageOptions::default()).expect("opens afresh");
        let p = PartitionId(0);
        store.append(p, Lsn(1), record(1)).unwrap();
        assert_eq!(rx.blocking_recv().unwrap(), Some(vec![(p, Durable::Log(Lsn(1)))]), "and takes writes");
        store.close().unwrap();
        assert!(dir.path().join("faults.json").exists(), "the node's own files stay");
        // A store that was created keeps what it holds.
        let (store, _rx) = open(dir.path());
        let log = store.read_log(p, Lsn(0), 10).unwrap();
        assert_eq!(log, vec![(Lsn(1), record(1))], "the record written after the fresh start is there");
    }

    #[test]
    fn corrupt_log_records_are_errors_naming_partition_and_lsn() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _rx) = open(dir.path());
        let p = PartitionId(4);
        let (log, _, _) = store.keyspaces();
        log.insert(codec::log_key(p, Lsn(1)), codec::encode(&record(1)).unwrap()).unwrap();
        // A version byte this build does not know.
        log.insert(codec::log_key(p, Lsn(2)), vec![codec::FORMAT_VERSION + 1, 0, 0]).unwrap();
        match store.load(p) {
            Err(StorageError::CorruptRecord { partition, lsn, reason }) => {
                assert_eq!((partition, lsn), (p, Lsn(2)));
                assert!(reason.contains("version"), "{reason}");
            }
            other => panic!("expected a corrupt record, got {other:?}"),
        }
        // The right version byte, then bytes that are no record.
        log.insert(codec::log_key(p, Lsn(2)), vec![codec::FORMAT_VERSION, 0xff, 0xff, 0xff]).unwrap();
        assert!(matches!(store.load(p), Err(StorageError::CorruptRecord { lsn: Lsn(2), .. })));
        assert!(matches!(store.read_log(p, Lsn(0), 10), Err(StorageError::CorruptRecord { lsn: Lsn(2), .. })));
        // A record with trailing garbage.
        let mut long = codec::encode(&record(2)).unwrap();
        long.push(0);
        log.insert(codec::log_key(p, Lsn(2)), long).unwrap();
        assert!(matches!(store.load(p), Err(StorageError::CorruptRecord { lsn: Lsn(2), .. })));
        // An empty value.
        log.insert(codec::log_key(p, Lsn(2)), Vec::new()).unwrap();
        assert!(matches!(store.load(p), Err(StorageError::CorruptRecord { lsn: Lsn(2), .. })));
        // Other partitions are unaffected.
        assert!(store.load(PartitionId(3)).unwrap().1.is_empty());
        store.close().unwrap();
    }

    #[test]
    fn a_receiver_that_stops_reading_holds_neither_the_writer_nor_more_than_one_report_per_partition() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut rx) = open(dir.path());
        // Many more batches than the report channel holds, while nobody reads: every append is taken.
        let batches = (NOTIFY_CAPACITY * 4) as u64;
        for lsn in 1..=batches {
            for p in 0..3 {
                store.append(PartitionId(p), Lsn(lsn), record(lsn)).unwrap();
            }
            // Let the writer make this a batch of its own and report it.
            while !store.has_room(store.shared.queue_capacity) {
                std::thread::yield_now();
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        store.close().unwrap();
        // Every position is reported, the last ones coalesced, and the channel held at most its capacity.
        let mut last = BTreeMap::new();
        let mut reports = 0;
        while let Some(batch) = rx.blocking_recv().unwrap() {
            reports += 1;
            for (p, durable) in batch {
                let lsn = durable.log().expect("only records were appended");
                let previous = last.insert(p, lsn);
                assert!(previous < Some(lsn), "reports for {p:?} are strictly increasing");
            }
        }
        assert!(reports <= NOTIFY_CAPACITY + 1, "{reports} reports for a channel of {NOTIFY_CAPACITY}");
        assert_eq!(last.values().copied().collect::<Vec<_>>(), vec![Lsn(batches); 3]);
    }

    #[test]
    fn corrupt_checkpoints_and_metadata_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _rx) = open(dir.path());
        let p = PartitionId(1);
        let (_, checkpoints, meta) = store.keyspaces();
        let state = codec::encode(&StateRef {
            lsn: Lsn(0),
            clock: causet_core::Timestamp(0),
            frontier: &VectorClock::zero(1),
            prepared: &[],
            recent_commits: &[],
            keep_log_from: None,
            committed_through: causet_core::Timestamp::ZERO,
            clock_bound: causet_core::Timestamp::ZERO,
            fenced: &[],
            peer_acked: &[],
            pvc: &None,
            remote_pending: &[],
            remote_applied: &[],
            decided: &[],
            membership: &None,
        })
        .unwrap();
        checkpoints.insert(codec::state_key(p), state).unwrap();
        let object = causet_core::ObjectId::new(b"k".to_vec(), b"b".to_vec(), causet_crdt::CrdtType::CounterPn);
        checkpoints.insert(codec::object_key(p, &object).unwrap(), vec![codec::FORMAT_VERSION, 0xff]).unwrap();
        assert!(matches!(
            store.load(p),
            Err(StorageError::CorruptCheckpoint { partition, what: "object image", .. }) if partition == p
        ));
        let mut bad_key = codec::object_prefix(p);
        bad_key.push(0xff);
        checkpoints.remove(codec::object_key(p, &object).unwrap()).unwrap();
        checkpoints.insert(bad_key, codec::encode(&0u8).unwrap()).unwrap();
        assert!(matches!(store.load(p), Err(StorageError::CorruptCheckpoint { what: "object key", .. })));
        checkpoints.insert(codec::state_key(p), vec![9]).unwrap();
        assert!(matches!(store.load(p), Err(StorageError::CorruptCheckpoint { what: "state", .. })));
        meta.insert(codec::INCARNATION_KEY, vec![codec::FORMAT_VERSION]).unwrap();
        assert!(matches!(store.next_incarnation(), Err(StorageError::CorruptMeta { .. })));
        store.close().unwrap();
        // Opening reads every checkpoint state, so it reports the corrupt one.
        assert!(matches!(
            FjallStore::open(dir.path(), StorageOptions::default()),
            Err(StorageError::CorruptCheckpoint { what: "state", .. })
        ));
    }

    #[test]
    fn a_failed_writer_is_reported_to_the_receiver_appends_and_close() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut rx) = open(dir.path());
        let p = PartitionId(0);
        store.append(p, Lsn(1), record(1)).unwrap();
        assert_eq!(rx.blocking_recv().unwrap(), Some(vec![(p, Durable::Log(Lsn(1)))]));
        store.inject_failure();
        // Whatever follows the failure is never reported durable.
        let _ = store.append(p, Lsn(2), record(2));
        assert!(matches!(rx.blocking_recv(), Err(StorageError::WriterFailed(_))));
        assert!(matches!(store.append(p, Lsn(3), record(3)), Err(StorageError::WriterFailed(_))));
        assert!(matches!(store.checkpoint(p, checkpoint(Lsn(1))), Err(StorageError::WriterFailed(_))));
        assert!(matches!(store.close(), Err(StorageError::WriterFailed(_))));
        // What was durable before the failure is still there.
        let (store, _rx) = open(dir.path());
        assert_eq!(store.load(p).unwrap().1, vec![(Lsn(1), record(1))]);
        store.close().unwrap();
    }

    fn entry(index: u64, term: u64) -> Entry {
        Entry { index: Lsn(index), term, kind: causet_core::group::EntryKind::Normal, data: vec![index as u8; 3] }
    }

    /// Waits for the report of group Write `ready` of `p`.
    fn wait_group(rx: &mut DurableReceiver, p: PartitionId, ready: u64) {
        loop {
            let batch = rx.blocking_recv().unwrap().expect("the store is open");
            if batch.contains(&(p, Durable::Group(ready))) {
                return;
            }
        }
    }

    #[test]
    fn corrupt_entries_gaps_and_group_states_are_errors_naming_partition_and_index() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut rx) = open(dir.path());
        let p = PartitionId(6);
        let hard_state = HardState { term: 1, vote: None, commit: Lsn(2) };
        store.write_group(p, 1, None, (1..=4).map(|i| entry(i, 1)).collect(), Some(hard_state)).unwrap();
        wait_group(&mut rx, p, 1);
        let raft = store.raft_keyspace();
        let good = raft.get(codec::entry_key(p, Lsn(2))).unwrap().unwrap().to_vec();
        // Bytes that are no entry.
        raft.insert(codec::entry_key(p, Lsn(2)), vec![codec::FORMAT_VERSION, 0xff, 0xff]).unwrap();
        match store.load_group(p) {
            Err(StorageError::CorruptEntry { partition, index, .. }) => assert_eq!((partition, index), (p, Lsn(2))),
            other => panic!("expected a corrupt entry, got {other:?}"),
        }
        assert!(matches!(store.read_group_log(p, Lsn(1), 10), Err(StorageError::CorruptEntry { index: Lsn(2), .. })));
        assert_eq!(store.read_group_log(p, Lsn(2), 10).unwrap().len(), 2, "entries after it still read");
        // A version byte this build does not know.
        raft.insert(codec::entry_key(p, Lsn(2)), vec![codec::FORMAT_VERSION + 1, 1, 0, 0]).unwrap();
        assert!(matches!(store.load_group(p), Err(StorageError::CorruptEntry { index: Lsn(2), .. })));
        // A gap: the entry after it is named.
        raft.remove(codec::entry_key(p, Lsn(2))).unwrap();
        match store.load_group(p) {
            Err(StorageError::CorruptEntry { partition, index, reason }) => {
                assert_eq!((partition, index), (p, Lsn(3)));
                assert!(reason.contains("gap"), "{reason}");
            }
            other => panic!("expected a gap, got {other:?}"),
        }
        assert!(matches!(store.read_group_log(p, Lsn(0), 10), Err(StorageError::CorruptEntry { index: Lsn(3), .. })));
        // A log that does not start at 1 although nothing was compacted.
        raft.insert(codec::entry_key(p, Lsn(2)), good).unwrap();
        raft.remove(codec::entry_key(p, Lsn(1))).unwrap();
        assert!(matches!(store.load_group(p), Err(StorageError::CorruptEntry { index: Lsn(2), .. })));
        // Other partitions are unaffected.
        assert_eq!(store.load_group(PartitionId(7)).unwrap().durable, DurableState::default());
        // A corrupt group state, which opening reads too.
        let (_, checkpoints, _) = store.keyspaces();
        checkpoints.insert(codec::group_state_key(p), vec![codec::FORMAT_VERSION, 0xff]).unwrap();
        assert!(
            matches!(store.load_group(p), Err(StorageError::CorruptGroupState { partition, .. }) if partition == p)
        );
        store.close().unwrap();
        assert!(matches!(
            FjallStore::open(dir.path(), StorageOptions::default()),
            Err(StorageError::CorruptGroupState { .. })
        ));
    }

    /// The hosting records: the first call records what it is given, later ones (and later runs) return what is
    /// recorded; a replica that left has everything of its partition deleted with its record, other partitions
    /// untouched, and the partition's next replica writes from Write 1 and entry 1 again.
    #[test]
    fn hosting_is_recorded_once_and_a_replica_that_left_takes_its_state_with_it() {
        use causet_core::replica::{replica_id, Hosted};
        let dir = tempfile::tempdir().unwrap();
        let (store, mut rx) = open(dir.path());
        let (p, q) = (PartitionId(2), PartitionId(3));
        let hosts = |incarnation| Hosting::Hosts(Hosted { id: replica_id(1, incarnation), replaces: None });
        let first: BTreeMap<_, _> = [(p, hosts(0)), (q, hosts(0))].into();
        assert_eq!(store.init_hosting(first.clone(), 3).unwrap(), (first.clone(), 3));
        assert_eq!(store.init_hosting(BTreeMap::new(), 4).unwrap(), (first, 3), "recorded once");
        let hard_state = HardState { term: 1, vote: None, commit: Lsn(3) };
        for (partition, ready) in [(p, 1), (q, 1)] {
            store
                .write_group(partition, ready, None, (1..=3).map(|i| entry(i, 1)).collect(), Some(hard_state))
                .unwrap();
            wait_group(&mut rx, partition, ready);
            store.checkpoint(partition, checkpoint(Lsn(2))).unwrap();
        }
        store.set_hosting(p, Hosting::Left { incarnation: 0 }).unwrap();
        store.close().unwrap();

        let (store, mut rx) = open(dir.path());
        let (recorded, placed) = store.init_hosting(BTreeMap::new(), 4).unwrap();
        assert_eq!(recorded, [(p, Hosting::Left { incarnation: 0 }), (q, hosts(0))].into());
        assert_eq!(placed, 3);
        let gone = store.load_group(p).unwrap();
        assert_eq!((gone.durable, gone.checkpoint), (DurableState::default(), None), "the state of {p:?} is left");
        assert_eq!(store.load_group(q).unwrap().durable.entries.len(), 3, "the other partition lost its entries");
        // A new replica of p on this node: Writes and entries from 1 again.
        store.set_hosting(p, Hosting::Hosts(Hosted { id: replica_id(1, 0), replaces: Some(0) })).unwrap();
        store.write_group(p, 1, None, vec![entry(1, 2)], Some(hard_state)).unwrap();
        wait_group(&mut rx, p, 1);
        assert_eq!(store.load_group(p).unwrap().durable.entries, vec![entry(1, 2)]);
        store.close().unwrap();
    }

    #[test]
    fn a_failed_writer_fails_group_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (store, mut rx) = open(dir.path());
        let p = PartitionId(0);
        let hard_state = HardState { term: 1, vote: None, commit: Lsn(0) };
        store.write_group(p, 1, None, vec![entry(1, 1)], Some(hard_state)).unwrap();
        assert_eq!(rx.blocking_recv().unwrap(), Some(vec![(p, Durable::Group(1))]));
        store.inject_failure();
        let _ = store.write_group(p, 2, None, vec![entry(2, 1)], None);
        assert!(matches!(rx.blocking_recv(), Err(StorageError::WriterFailed(_))));
        assert!(matches!(store.write_group(p, 3, None, vec![entry(3, 1)], None), Err(StorageError::WriterFailed(_))));
        assert!(matches!(store.write_group(p, 4, None, vec![], Some(hard_state)), Err(StorageError::WriterFailed(_))));
        assert!(matches!(store.close(), Err(StorageError::WriterFailed(_))));
        let (store, _rx) = open(dir.path());
        let recovered = store.load_group(p).unwrap();
        assert_eq!(recovered.durable.entries, vec![entry(1, 1)]);
        assert_eq!(recovered.durable.hard_state, hard_state);
        store.close().unwrap();
    }

    #[test]
    fn truncation_takes_the_compaction_term_from_an_entry_written_in_the_same_batch() {
        let dir = tempfile::tempdir().unwrap();
        let options = StorageOptions { truncate_group_logs: true, ..StorageOptions::default() };
        let (store, mut rx) = FjallStore::open(dir.path(), options.clone()).unwrap();
        let p = PartitionId(3);
        // Enqueued back to back, so most likely one batch; correct either way.
        store.write_group(p, 1, None, (1..=5).map(|i| entry(i, 2)).collect(), None).unwrap();
        store.write_group(p, 2, None, vec![entry(4, 3)], None).unwrap();
        store.checkpoint(p, checkpoint(Lsn(4))).unwrap();
        store.write_group(p, 3, None, vec![entry(5, 3)], None).unwrap();
        wait_group(&mut rx, p, 3);
        store.close().unwrap();
        let (store, _rx) = FjallStore::open(dir.path(), options).unwrap();
        let recovered = store.load_group(p).unwrap();
        assert_eq!(recovered.durable.compacted, Some(Compacted { index: Lsn(4), term: 3 }));
        assert_eq!(recovered.durable.entries, vec![entry(5, 3)]);
        assert_eq!(recovered.durable.applied, Lsn(4));
        assert_eq!(store.stats().group_logs[&p].records, 1);
        store.close().unwrap();
    }

    fn checkpoint(lsn: Lsn) -> Checkpoint {
        Checkpoint {
            lsn,
            clock: causet_core::Timestamp(0),
            frontier: VectorClock::zero(1),
            objects: Vec::new(),
            prepared: Vec::new(),
            recent_commits: Vec::new(),
            keep_log_from: None,
            committed_through: causet_core::Timestamp::ZERO,
            clock_bound: causet_core::Timestamp::ZERO,
            fenced: Vec::new(),
            peer_acked: Vec::new(),
            pvc: None,
            remote_pending: Vec::new(),
            remote_applied: Vec::new(),
            decided: Vec::new(),
            membership: None,
        }
    }

    #[test]
    fn a_record_appended_and_truncated_in_one_batch_is_reported_and_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        // Everything below lands in one batch: the queue is drained while the writer sleeps on nothing.
        let (store, mut rx) = open(dir.path());
        let p = PartitionId(2);
        for lsn in 1..=5 {
            store.append(p, Lsn(lsn), record(lsn)).unwrap();
        }
        store.checkpoint(p, checkpoint(Lsn(5))).unwrap();
        let mut durable = Lsn(0);
        while durable < Lsn(5) {
            durable = rx.blocking_recv().unwrap().unwrap().into_iter().filter_map(|(_, d)| d.log()).max().unwrap();
        }
        store.close().unwrap();
        let (store, _rx) = open(dir.path());
        assert!(store.read_log(p, Lsn(0), 10).unwrap().is_empty());
        assert_eq!(store.stats().logs.get(&p), None);
        let (loaded, tail) = store.load(p).unwrap();
        assert_eq!((loaded.unwrap().lsn, tail.len()), (Lsn(5), 0));
        // The cursor continues above the checkpoint.
        assert!(matches!(store.append(p, Lsn(5), record(5)), Err(StorageError::LsnNotIncreasing { .. })));
        store.append(p, Lsn(6), record(6)).unwrap();
        store.close().unwrap();
    }
}
