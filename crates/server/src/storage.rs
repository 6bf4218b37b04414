//! The shards' view of the log: append records, write checkpoints. The storage engine's writer thread batches
//! them and reports durability back to the owning shards.

use causet_core::partition::Checkpoint;
use causet_core::record::{LogRecord, Lsn};
use causet_core::PartitionId;

/// Where shards send what must become durable.
pub trait LogSink: Send + Sync {
    /// Appends a record; its durability is reported later.
    fn append(&self, partition: PartitionId, lsn: Lsn, record: LogRecord);
    /// Writes a checkpoint after every record appended before it.
    fn checkpoint(&self, partition: PartitionId, checkpoint: Checkpoint);
    /// Whether `writes` more appends or checkpoints are taken now without waiting for the disk.
    fn has_room(&self, writes: usize) -> bool;
}
