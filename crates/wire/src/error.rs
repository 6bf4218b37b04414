//! The crate's errors: what a peer's bytes can get wrong ([`ProtocolError`]) and what a value can have that the
//! protocol cannot express ([`EncodeError`]).

use crate::encoding::EncodingError;
use crate::proto::MessageCode;
use causet_crdt::CrdtType;

/// A frame that is not a valid message, request or reply. The framing itself is intact, so a server answers with
/// an `ApbErrorResp` and carries on reading the connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    /// The code byte is not in AntidoteDB's table.
    #[error("unknown message code {0}")]
    UnknownCode(u8),
    /// The code is in the table but is not a request (a reply, or a message that only travels nested).
    #[error("message {0} is not a request")]
    NotARequest(MessageCode),
    /// The message bytes are not valid protobuf for the code's message.
    #[error("cannot decode {message}: {reason}")]
    Decode {
        /// The message being decoded.
        message: &'static str,
        /// The protobuf decoder's explanation.
        reason: String,
    },
    /// A `CRDT_type` number outside AntidoteDB's enum.
    #[error("unknown CRDT type {0} (AntidoteDB's CRDT_type numbers are 3, 4, 5, 6, 8, 10, 11, 12, 13, 14 and 15)")]
    UnknownCrdtType(i32),
    /// A set operation type other than ADD (1) and REMOVE (2).
    #[error("unknown set operation type {0} (ADD is 1, REMOVE is 2)")]
    UnknownSetOpType(i32),
    /// The operation's kind does not apply to the object's type.
    #[error("a {op} operation does not apply to an object of type {ty}")]
    OperationMismatch {
        /// The object's type.
        ty: CrdtType,
        /// The operation's kind (`counter`, `set`, `register`, `map`, `flag`).
        op: &'static str,
    },
    /// An `ApbUpdateOperation` with none of its operation fields set.
    #[error("an update operation for an object of type {0} carries no operation")]
    MissingOperation(CrdtType),
    /// A map operation nested inside a map both updates and removes keys. Causet accepts that combination only
    /// for top-level objects.
    #[error("a nested map operation both updates and removes keys; send the removals in a separate update")]
    NestedMapBatch,
    /// A map batch names one key both to update and to remove (AntidoteDB's type check refuses it too).
    #[error("a map update names key {0:?} both to update and to remove")]
    KeyUpdatedAndRemoved(String),
    /// Maps nest deeper than Causet allows.
    #[error("maps nest deeper than {0} levels")]
    TooDeep(usize),
    /// The start clock or commit time is not a Causet clock.
    #[error("invalid clock: {0}")]
    InvalidClock(EncodingError),
    /// The transaction descriptor is not one Causet handed out.
    #[error("invalid transaction descriptor: {0}")]
    InvalidTxDescriptor(EncodingError),
    /// A DC connection descriptor is not a Causet one.
    #[error("invalid DC descriptor: {0}")]
    InvalidDcDescriptor(EncodingError),
    /// A reply came with a code that does not answer the request.
    #[error("unexpected reply code {got} to a request answered by {expected}")]
    UnexpectedReply {
        /// The code that answers the request.
        expected: MessageCode,
        /// The code received.
        got: u8,
    },
    /// A reply decoded but does not have the shape the request calls for.
    #[error("malformed reply: {0}")]
    MalformedReply(String),
}

impl ProtocolError {
    pub(crate) fn decode(message: &'static str, err: prost::DecodeError) -> ProtocolError {
        ProtocolError::Decode { message, reason: err.to_string() }
    }
}

/// A value the protocol cannot express.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// The type has no number in AntidoteDB's `CRDT_type` enum (`set_go`).
    #[error("type {0} has no number in AntidoteDB's protocol")]
    UnrepresentableType(CrdtType),
    /// The operation has no encoding in AntidoteDB's protocol (the bounded counter's transfer).
    #[error("operation {0} has no encoding in AntidoteDB's protocol")]
    UnrepresentableOp(&'static str),
    /// A counter's value does not fit the protocol's 32-bit `ApbGetCounterResp.value`.
    #[error("counter value {0} does not fit the protocol's 32-bit counter field")]
    CounterOutOfRange(i64),
    /// A read value does not have the shape of its object's type.
    #[error("a {value} value cannot be the value of an object of type {ty}")]
    ValueMismatch {
        /// The object's type.
        ty: CrdtType,
        /// The value's kind.
        value: &'static str,
    },
    /// A reply does not fit the request it answers.
    #[error("a {response} response cannot answer {request}")]
    ResponseMismatch {
        /// The request kind.
        request: &'static str,
        /// The response's kind.
        response: &'static str,
    },
    /// A read answered a different number of values than objects asked for.
    #[error("{values} values answer a read of {objects} objects")]
    ValueCount {
        /// Objects read.
        objects: usize,
        /// Values answered.
        values: usize,
    },
    /// A map batch names one key both to update and to remove (AntidoteDB's type check refuses it too).
    #[error("a map update names key {0:?} both to update and to remove")]
    KeyUpdatedAndRemoved(String),
    /// Maps nest deeper than Causet allows.
    #[error("maps nest deeper than {0} levels")]
    TooDeep(usize),
    /// A clock or a descriptor could not be encoded.
    #[error("{0}")]
    Encoding(EncodingError),
}
