//! Records a partition persists, and from which it recovers.

use crate::{ObjectId, Timestamp, TxId, VectorClock};
use causet_crdt::Effect;
use serde::{Deserialize, Serialize};

/// A log sequence number: the position of a record in a partition's log, from 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Lsn(pub u64);

/// One record of a partition's log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum LogRecord {
    /// The transaction is prepared here with these effects; acknowledged only once durable.
    Prepared {
        /// The transaction.
        tx: TxId,
        /// Its snapshot vector.
        snapshot: VectorClock,
        /// The partition's prepare time.
        prepare_time: Timestamp,
        /// Its effects on this partition.
        writes: Vec<(ObjectId, Effect)>,
        /// Its coordinator's oldest open transaction when it asked ([`crate::Message::Prepare`]): every replica
        /// that applies the record forgets what it remembers of that coordinator's older transactions.
        oldest_open: u64,
    },
    /// The transaction committed at this vector; visible and acknowledged only once durable.
    Committed {
        /// The transaction.
        tx: TxId,
        /// Its commit vector.
        commit: VectorClock,
    },
    /// A single-partition transaction prepared and committed in one record; visible once durable.
    CommittedAlone {
        /// The transaction.
        tx: TxId,
        /// Its snapshot vector.
        snapshot: VectorClock,
        /// Its commit vector (the local entry is the prepare time).
        commit: VectorClock,
        /// Its effects.
        writes: Vec<(ObjectId, Effect)>,
        /// As in [`LogRecord::Prepared`].
        oldest_open: u64,
    },
    /// A transaction of another DC, applied here; visible once durable.
    Remote {
        /// Its origin DC.
        origin: crate::DcId,
        /// The transaction.
        tx: crate::replication::ReplicatedTx,
    },
    /// The transaction aborted.
    Aborted {
        /// The transaction.
        tx: TxId,
    },
    /// A termination was told this partition's state of the transaction (its coordinator is gone), and the
    /// partition promised to stick to it: prepared here, it ignores the dead coordinator's decision from now on;
    /// not prepared here, it never prepares it. Written before the answer leaves, so the promise survives a crash.
    Fenced {
        /// The transaction.
        tx: TxId,
    },
    /// The partition's hybrid clock will not reach above `until` before a later bound is durable: nothing it
    /// exposes (a pvc, a read's snapshot, a prepare time) exceeds the largest durable bound, so a restarted
    /// partition starts its clock there and never issues a timestamp it may have exposed before the crash.
    ClockBound {
        /// The bound.
        until: crate::Timestamp,
    },
    /// What each peer DC acknowledged of this partition's transactions (a replicated partition's leader logs it
    /// when it changed while the last record left some local transaction out, at most every
    /// [`ACKS_LOG_INTERVAL_US`]; an idle partition logs none): followers forget what every peer has, so their
    /// checkpoints let the log be compacted, and a new leader resumes replication from there rather than from
    /// its last checkpoint.
    PeerAcked {
        /// Per peer DC, everything of this DC's commit time at or below it is durably applied there.
        acked: Vec<(crate::DcId, crate::Timestamp)>,
    },
}

/// How often, at most, a replicated partition's leader logs what its peer DCs acknowledged.
pub const ACKS_LOG_INTERVAL_US: u64 = 100_000;
