//! Recorded client histories: what every transaction read and wrote, as its client saw it.
//!
//! The format is exact by construction: every write carries a value no other write carries (a [`WriteId`]), so
//! a read tells precisely which writes it observed. Sets are the most informative objects (a read returns every
//! visible add), registers show one write (the winner), counters only a sum.
//!
//! The format is serialised as JSON (serde) so that other checkers can read it; see `docs/history.md`.

use serde::{Deserialize, Serialize};

/// A globally unique written value. Writes encode it as 8 big-endian bytes in the object.
pub type WriteId = u64;

/// An object of the checked workload, named by its key (bucket and type are implied by [`ObjectKind`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectName {
    /// The key.
    pub key: String,
    /// The object's kind.
    pub kind: ObjectKind,
}

/// Which CRDT the object is, as far as the checker cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObjectKind {
    /// An add-wins set that only ever receives adds of unique elements: a read shows every visible write.
    Set,
    /// A last-writer-wins register assigned unique values: a read shows the winning visible write.
    Register,
    /// A counter incremented by each write: a read shows the sum of the visible writes' amounts.
    Counter,
}

impl ObjectKind {
    /// Every kind.
    pub const ALL: [ObjectKind; 3] = [ObjectKind::Set, ObjectKind::Register, ObjectKind::Counter];
}

/// One operation of a transaction, in program order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum HistOp {
    /// A write: for a set, add `id`; for a register, assign `id`; for a counter, add `amount`.
    Write {
        /// The object written.
        object: ObjectName,
        /// The unique id of this write.
        id: WriteId,
        /// For counters, the amount added (ignored for sets and registers).
        amount: i64,
    },
    /// A read and what it returned.
    Read {
        /// The object read.
        object: ObjectName,
        /// What the read returned.
        observed: Observed,
    },
}

/// What a read returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Observed {
    /// A set's elements (unique write ids), in any order.
    Set(Vec<WriteId>),
    /// A register's value: `None` when never assigned.
    Register(Option<WriteId>),
    /// A counter's value.
    Counter(i64),
}

/// How a transaction ended, as its client knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// The client received a commit acknowledgement.
    Committed,
    /// The client received an abort or an error, and the transaction's writes must never be visible.
    Aborted,
    /// The client does not know (the reply was lost, the server crashed): the writes may or may not be visible.
    Unknown,
}

/// One transaction as its client saw it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxRecord {
    /// Index of this record in [`History::txs`].
    pub index: usize,
    /// The client session that ran it. A session runs its transactions one after another.
    pub session: u64,
    /// The DC the session used for this transaction (sessions may switch DCs).
    pub dc: u16,
    /// When the client started it (microseconds, simulated or wall-clock time).
    pub start_us: u64,
    /// When the client learned the outcome.
    pub end_us: u64,
    /// Its operations in program order.
    pub ops: Vec<HistOp>,
    /// How it ended.
    pub outcome: Outcome,
}

/// A whole history: every transaction of every session, in the order they ended (a session's order is given by
/// `start_us`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    /// The transactions.
    pub txs: Vec<TxRecord>,
}
