//! The storage crate's errors.

use causet_core::record::Lsn;
use causet_core::PartitionId;

/// A storage result.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// What can go wrong in the storage layer.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The storage engine failed (an I/O error, a failed fsync, a corrupt engine file). fjall poisons the database
    /// after a failed write or fsync: every later write fails too, and the node must restart and recover.
    #[error("storage engine: {0}")]
    Engine(#[from] fjall::Error),
    /// A log record could not be decoded.
    #[error("corrupt log record of partition {partition:?} at {lsn:?}: {reason}")]
    CorruptRecord {
        /// The record's partition.
        partition: PartitionId,
        /// The record's position.
        lsn: Lsn,
        /// What is wrong with it.
        reason: String,
    },
    /// A Raft group entry could not be decoded, or the stored entries are not consecutive.
    #[error("corrupt raft entry of partition {partition:?} at index {index:?}: {reason}")]
    CorruptEntry {
        /// The entry's partition.
        partition: PartitionId,
        /// The entry's index (for a gap: the first entry after it).
        index: Lsn,
        /// What is wrong with it.
        reason: String,
    },
    /// A partition's group state (Raft hard state and compaction point) could not be decoded.
    #[error("corrupt group state of partition {partition:?}: {reason}")]
    CorruptGroupState {
        /// The partition.
        partition: PartitionId,
        /// What is wrong with it.
        reason: String,
    },
    /// Part of a partition's checkpoint could not be decoded.
    #[error("corrupt checkpoint of partition {partition:?} ({what}): {reason}")]
    CorruptCheckpoint {
        /// The checkpoint's partition.
        partition: PartitionId,
        /// Which part: `state`, `object key` or `object image`.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A key that this crate never writes.
    #[error("corrupt key in keyspace {keyspace}: {key:?}")]
    CorruptKey {
        /// The keyspace it lies in.
        keyspace: &'static str,
        /// The key.
        key: Vec<u8>,
    },
    /// The store's own metadata (the incarnation counter) could not be decoded.
    #[error("corrupt store metadata ({what}): {reason}")]
    CorruptMeta {
        /// Which entry.
        what: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A value could not be encoded.
    #[error("encoding: {0}")]
    Encode(postcard::Error),
    /// An append whose lsn is not above the partition's last appended (or recovered) lsn: a driver bug. Nothing
    /// was enqueued.
    #[error("append of {lsn:?} to partition {partition:?} is not above its last lsn {last:?}")]
    LsnNotIncreasing {
        /// The partition.
        partition: PartitionId,
        /// The refused lsn.
        lsn: Lsn,
        /// The last lsn appended or recovered.
        last: Lsn,
    },
    /// A checkpoint below the previous one, or above the last appended record: a driver bug. Nothing was enqueued.
    #[error(
        "checkpoint at {lsn:?} of partition {partition:?} is outside [{previous:?}, {last:?}] (previous checkpoint, \
         last appended)"
    )]
    CheckpointOutOfOrder {
        /// The partition.
        partition: PartitionId,
        /// The refused checkpoint's lsn.
        lsn: Lsn,
        /// The previous checkpoint's lsn.
        previous: Lsn,
        /// The last lsn appended or recovered.
        last: Lsn,
    },
    /// A group Write that does not follow the partition's earlier ones: a driver bug. Nothing was enqueued.
    #[error("group write {ready} of partition {partition:?} refused: {reason}")]
    InvalidGroupWrite {
        /// The partition.
        partition: PartitionId,
        /// The refused Write's number.
        ready: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// The writer thread failed; nothing enqueued after the failure is written, and no further record is reported
    /// durable. The node must stop serving and recover from the store.
    #[error("storage writer failed: {0}")]
    WriterFailed(String),
    /// [`crate::StorageOptions`] out of range.
    #[error("invalid storage options: {0}")]
    InvalidOptions(String),
    /// The store was closed.
    #[error("the store is closed")]
    Closed,
}
