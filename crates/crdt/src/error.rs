//! Errors of CRDT operations and decoding.

use crate::CrdtType;

/// Why an operation could not be turned into an effect, or bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, thiserror::Error)]
pub enum CrdtError {
    /// The operation does not fit the object's type.
    #[error("operation {op} is not supported by type {ty}")]
    UnsupportedOp {
        /// The object's type.
        ty: CrdtType,
        /// The operation's name.
        op: String,
    },
    /// A bounded counter decrement or transfer needs more rights than this DC holds.
    #[error("bounded counter: not enough rights at DC {dc}: {requested} requested, {available} available")]
    NoPermissions {
        /// The DC that tried to spend.
        dc: u16,
        /// Rights asked for.
        requested: u64,
        /// Rights this DC holds.
        available: u64,
    },
    /// A reset was asked of a type that has none. (No longer raised for `map_rr` nesting, which accepts any type,
    /// as AntidoteDB does; kept for callers that match on it.)
    #[error("type {0} cannot be nested in a map_rr: it has no reset")]
    NotResettable(CrdtType),
    /// An effect was applied to an object of another type.
    #[error("effect for {effect} applied to an object of type {object}")]
    TypeMismatch {
        /// The effect's type.
        effect: CrdtType,
        /// The object's type.
        object: CrdtType,
    },
    /// An argument is out of range (for example a negative bounded-counter increment amount overflowing).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Bytes did not decode into a state or an effect.
    #[error("cannot decode {what}: {reason}")]
    Decode {
        /// What was being decoded.
        what: String,
        /// The decoder's message.
        reason: String,
    },
}
