//! AntidoteDB's client protocol, as Causet speaks it, free of I/O.
//!
//! Causet answers AntidoteDB's published clients unchanged: same framing, same protobuf messages (written by hand in
//! [`proto`] with AntidoteDB's exact names, field numbers, types and labels), same response for each request, same
//! error codes. Where AntidoteDB puts Erlang terms into opaque bytes (clocks, transaction and DC descriptors),
//! Causet puts its own documented encodings ([`encoding`]). `docs/protocol.md` describes all of it byte by byte.
//!
//! - [`frame`]: length-prefixed frames, decoded incrementally with a size limit.
//! - [`request`]: a frame into a [`request::Request`] (server), and requests into frames (client).
//! - [`response`]: the coordinator's answer into the reply AntidoteDB's clients expect (server), and back (client).
//! - [`convert`]: objects, operations and values between the protocol's messages and Causet's types.
//!
//! Nothing here panics on input from the network: every malformed byte sequence is a typed error.

#![warn(missing_docs)]

pub mod convert;
pub mod encoding;
pub mod error;
pub mod frame;
pub mod proto;
pub mod request;
pub mod response;

pub use encoding::{DcDescriptor, EncodingError, TxDescriptor};
pub use error::{EncodeError, ProtocolError};
pub use frame::{decode_frame, encode_frame, Frame, FrameError};
pub use proto::MessageCode;
pub use request::{decode_request, encode_request, Request};
pub use response::{decode_reply, encode_reply, error_frame, not_supported, ErrorReply, ReplyKind};
