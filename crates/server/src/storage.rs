//! The shards' view of the log: append records, write checkpoints, read the log back for replication. The storage engine's writer thread batches
//! them and reports durability back to the owning shards.

use causet_core::partition::Checkpoint;
use causet_core::record::{LogRecord, Lsn};
use causet_core::PartitionId;

/// Where shards send what must become durable, and read the log back from.
pub trait LogSink: Send + Sync {
    /// Appends a record; its durability is reported later.
    fn append(&self, partition: PartitionId, lsn: Lsn, record: LogRecord);
    /// Writes a checkpoint after every record appended before it.
    fn checkpoint(&self, partition: PartitionId, checkpoint: Checkpoint);
    /// Writes a replica's group Write after everything handed over before it; its durability is reported later.
    fn write_group(
        &self,
        partition: PartitionId,
        ready: u64,
        snapshot: Option<Box<causet_core::replica::InstalledSnapshot>>,
        entries: Vec<causet_core::group::Entry>,
        hard_state: Option<causet_core::group::HardState>,
    );
    /// Records the replica this node runs for a replicated partition, after everything handed over before it;
    /// [`Hosting::Left`](causet_core::replica::Hosting::Left) deletes the partition's stored state too.
    fn set_hosting(&self, partition: PartitionId, hosting: causet_core::replica::Hosting);
    /// Appends a record to shard `shard`'s coordinator write-buffer log, after everything handed over before it;
    /// its durability is reported later.
    fn append_buffer(&self, shard: u32, lsn: Lsn, record: &causet_core::coordinator::BufferRecord);
    /// Deletes shard `shard`'s write-buffer log records before `before`, after everything handed over before it.
    fn truncate_buffer(&self, shard: u32, before: Lsn);
    /// Whether `writes` more appends or checkpoints are taken now without waiting for the disk.
    fn has_room(&self, writes: usize) -> bool;
    /// Up to [`LOG_READ_RECORDS`](causet_core::replication::LOG_READ_RECORDS) durable records of a partition's log after `after`, ascending. Blocking: call it
    /// on a blocking thread. A failed read is logged and returns nothing (the read ends there).
    fn read_log(&self, partition: PartitionId, after: Lsn) -> Vec<(Lsn, LogRecord)>;
    /// A partition's complete checkpoint as stored (every object's latest image), if one was written. Blocking.
    fn load_checkpoint(&self, partition: PartitionId) -> Result<Option<Checkpoint>, String>;
}
