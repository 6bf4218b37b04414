//! [`FjallStore`]: the [`LogStore`] on fjall, with its group-commit writer thread.

use crate::codec::{self, StateRef};
use crate::error::{Result, StorageError};
use crate::{DurableBatch, DurableReceiver, LogStore, Recovered, Shared, StorageOptions, StorageStats, SyncMode};
use causet_core::partition::Checkpoint;
use causet_core::record::{LogRecord, Lsn};
use causet_core::PartitionId;
use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable};
use std::collections::{BTreeMap, HashMap};
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
        lsn: Lsn,
        state: Vec<u8>,
        objects: Vec<(Vec<u8>, Vec<u8>)>,
        /// The log from here on is kept.
        keep_from: Option<Lsn>,
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
            Op::Checkpoint { state, objects, .. } => {
                state.len() + objects.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
            }
            #[cfg(test)]
            Op::Fail => 0,
        }
    }
}

impl FjallStore {
    /// Opens (or creates) the store in `dir` and starts its writer thread. The receiver reports durability.
    ///
    /// Opening scans every partition's log once, to learn its size and last lsn.
    pub fn open(dir: &Path, options: StorageOptions) -> Result<(FjallStore, DurableReceiver)> {
        validate(&options)?;
        let db = Database::builder(dir).cache_size(options.cache_bytes).open()?;
        let log = db.keyspace("log", KeyspaceCreateOptions::default)?;
        let checkpoints = db.keyspace("checkpoint", KeyspaceCreateOptions::default)?;
        let meta = db.keyspace("meta", KeyspaceCreateOptions::default)?;

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
        let partitions = cursors
            .iter()
            .map(|(partition, cursor)| {
                // Everything below the first record still in the log was truncated; with no record left, nothing
                // at or below the last known lsn exists.
                let truncated_through =
                    first_lsns.get(partition).map_or(cursor.last, |first| Lsn(first.0.saturating_sub(1)));
                let state = WriterPartition { checkpoint: cursor.checkpoint, hold: None, truncated_through };
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
            receiver,
            notify,
            undelivered: BTreeMap::new(),
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
        partition: PartitionId,
        check: impl FnOnce(&mut Cursor) -> Result<()>,
        op: impl FnOnce() -> Op,
    ) -> Result<()> {
        if let Some(failure) = self.shared.failure() {
            return Err(failure);
        }
        let mut guard = self.lock_queue();
        let queue = guard.as_mut().ok_or(StorageError::Closed)?;
        let cursor = queue.cursors.entry(partition).or_default();
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
            *queue.cursors.entry(partition).or_default() = before;
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
}

fn validate(options: &StorageOptions) -> Result<()> {
    let invalid = |what: &str| Err(StorageError::InvalidOptions(what.to_string()));
    if options.queue_capacity == 0 {
        return invalid("queue_capacity must be at least 1");
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
        let checkpoint = match snapshot.get(&self.checkpoints, codec::state_key(partition))? {
            None => None,
            Some(bytes) => {
                let state = codec::decode_state(partition, &bytes)?;
                let prefix = codec::object_prefix(partition);
                let mut objects = Vec::new();
                for guard in snapshot.prefix(&self.checkpoints, &prefix) {
                    let (key, value) = guard.into_inner()?;
                    let object = codec::parse_object_key(partition, &prefix, &key)?;
                    objects.push((object, codec::decode_image(partition, &value)?));
                }
                Some(Checkpoint {
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
                })
            }
        };
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
            partition,
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
        })?;
        let objects = checkpoint
            .objects
            .iter()
            .map(|(object, image)| Ok((codec::object_key(partition, object)?, codec::encode(image)?)))
            .collect::<Result<Vec<_>>>()?;
        let (lsn, keep_from) = (checkpoint.lsn, checkpoint.keep_log_from);
        self.enqueue(
            partition,
            |cursor| {
                if lsn < cursor.checkpoint || lsn > cursor.last {
                    let (previous, last) = (cursor.checkpoint, cursor.last);
                    return Err(StorageError::CheckpointOutOfOrder { partition, lsn, previous, last });
                }
                cursor.checkpoint = lsn;
                Ok(())
            },
            || Op::Checkpoint { partition, lsn, state, objects, keep_from },
        )
    }

    fn read_log(&self, partition: PartitionId, after: Lsn, max_records: usize) -> Result<Vec<(Lsn, LogRecord)>> {
        if after.0 == u64::MAX {
            return Ok(Vec::new());
        }
        let range = codec::log_key(partition, Lsn(after.0 + 1))..=codec::log_key(partition, Lsn(u64::MAX));
        Self::decode_log(self.log.range(range), partition, max_records)
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

/// What the writer knows of a partition, to truncate its log.
#[derive(Clone, Copy, Debug)]
struct WriterPartition {
    /// The last checkpoint's lsn.
    checkpoint: Lsn,
    /// The truncation hold: records above it are kept (the last checkpoint's `keep_log_from`, less one).
    hold: Option<Lsn>,
    /// Every log record up to here is deleted (or never existed).
    truncated_through: Lsn,
}

/// Which keyspace a write goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Space {
    Log,
    Checkpoint,
}

/// One batch under construction: the last write to each key wins (so a record appended and truncated in the
/// same batch is simply not written), and the highest lsn appended to each partition.
#[derive(Debug, Default)]
struct Batch {
    writes: BTreeMap<(Space, Vec<u8>), Option<Vec<u8>>>,
    durable: BTreeMap<PartitionId, Lsn>,
    records: u64,
}

/// The group-commit writer: the only thread that writes log records and checkpoints.
struct Writer {
    db: Database,
    log: Keyspace,
    checkpoints: Keyspace,
    receiver: Receiver<Op>,
    notify: tokio::sync::mpsc::Sender<DurableBatch>,
    /// Durable positions not yet handed to the receiver (its channel was full), coalesced per partition: at most
    /// one entry per partition, so a slow receiver costs no memory beyond that.
    undelivered: BTreeMap<PartitionId, Lsn>,
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
        let batch: DurableBatch = self.undelivered.iter().map(|(p, l)| (*p, *l)).collect();
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
                Op::Checkpoint { partition, lsn, state, objects, keep_from } => {
                    batch.writes.insert((Space::Checkpoint, codec::state_key(partition)), Some(state));
                    for (key, image) in objects {
                        batch.writes.insert((Space::Checkpoint, key), Some(image));
                    }
                    let written = self.partition(partition);
                    written.checkpoint = lsn;
                    written.hold = keep_from.map(|from| Lsn(from.0.saturating_sub(1)));
                    self.stats.checkpoints_written += 1;
                    self.truncate(partition, &mut batch)?;
                }
                #[cfg(test)]
                Op::Fail => return Err(StorageError::WriterFailed("injected failure".into())),
            }
        }
        Ok(batch)
    }

    fn partition(&mut self, partition: PartitionId) -> &mut WriterPartition {
        self.partitions.entry(partition).or_insert(WriterPartition {
            checkpoint: Lsn(0),
            hold: None,
            truncated_through: Lsn(0),
        })
    }

    /// Deletes the partition's log records covered by its checkpoint and not held, both those in the engine and
    /// those still in this batch.
    fn truncate(&mut self, partition: PartitionId, batch: &mut Batch) -> Result<()> {
        let state = *self.partition(partition);
        let target = state.checkpoint.min(state.hold.unwrap_or(Lsn(u64::MAX)));
        if target <= state.truncated_through {
            return Ok(());
        }
        let from = codec::log_key(partition, Lsn(state.truncated_through.0 + 1));
        let to = codec::log_key(partition, target);
        let mut deleted: Vec<(Vec<u8>, usize)> = batch
            .writes
            .range((Space::Log, from.clone())..=(Space::Log, to.clone()))
            .filter_map(|((_, key), value)| value.as_ref().map(|v| (key.clone(), v.len())))
            .collect();
        for guard in self.log.range(from..=to) {
            let (key, value) = guard.into_inner()?;
            deleted.push((key.to_vec(), value.len()));
        }
        let size = self.stats.logs.entry(partition).or_default();
        for (key, len) in deleted {
            batch.writes.insert((Space::Log, key), None);
            size.records = size.records.saturating_sub(1);
            size.bytes = size.bytes.saturating_sub(len as u64);
            self.stats.records_truncated += 1;
        }
        self.partition(partition).truncated_through = target;
        Ok(())
    }

    /// Writes a batch, fsyncs as the mode says, and reports durability.
    fn write(&mut self, batch: Batch) -> Result<()> {
        if !batch.writes.is_empty() {
            let mut engine = self.db.batch();
            for ((space, key), value) in batch.writes {
                let keyspace = match space {
                    Space::Log => &self.log,
                    Space::Checkpoint => &self.checkpoints,
                };
                match value {
                    Some(value) => engine.insert(keyspace, key, value),
                    None => engine.remove(keyspace, key),
                }
            }
            engine.commit()?;
            self.stats.batches += 1;
            self.stats.records_written += batch.records;
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
            let slot = self.undelivered.entry(partition).or_insert(lsn);
            *slot = (*slot).max(lsn);
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
    use causet_core::{CoordinatorId, DcId, TxId, VectorClock};

    fn record(seq: u64) -> LogRecord {
        LogRecord::Aborted { tx: TxId { dc: DcId(0), coordinator: CoordinatorId(0), seq } }
    }

    fn open(dir: &Path) -> (FjallStore, DurableReceiver) {
        FjallStore::open(dir, StorageOptions::default()).unwrap()
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
            for (p, lsn) in batch {
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
        assert_eq!(rx.blocking_recv().unwrap(), Some(vec![(p, Lsn(1))]));
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
            durable = rx.blocking_recv().unwrap().unwrap().into_iter().map(|(_, lsn)| lsn).max().unwrap();
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
