//! Framing: a 4-byte big-endian length that does not count itself, one message-code byte, then the message.
//!
//! This is Erlang's `{packet, 4}` framing, which AntidoteDB's server sets on its sockets; the code byte is the first
//! byte of the packet. The decoder is pure: it takes what has arrived so far and says "here is a frame", "need more
//! bytes", or "the stream is broken". It never allocates for a length it has not accepted, so a peer that declares a
//! huge frame costs nothing.

use crate::proto::MessageCode;
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Bytes of the length prefix.
pub const LENGTH_PREFIX_BYTES: usize = 4;

/// A sensible limit on a frame's declared length (code byte and message), for servers and clients that have no
/// better one: 16 MiB.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// One frame: the message code and the message bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The message-code byte, as received (it may not be in AntidoteDB's table).
    pub code: u8,
    /// The protobuf-encoded message.
    pub body: Bytes,
}

impl Frame {
    /// A frame of a known code.
    pub fn new(code: MessageCode, body: impl Into<Bytes>) -> Frame {
        Frame { code: code.as_u8(), body: body.into() }
    }

    /// The message code, if AntidoteDB's table has it.
    pub fn message_code(&self) -> Option<MessageCode> {
        MessageCode::from_u8(self.code)
    }

    /// The frame's bytes on the wire.
    pub fn to_bytes(&self) -> Bytes {
        frame_bytes(self.code, &self.body)
    }
}

/// Why a byte stream does not hold valid frames. After [`FrameError::Empty`] the stream cannot be resynchronised:
/// the connection must be closed. After [`FrameError::TooLarge`] a reader may skip the length prefix and the declared
/// bytes to reach the next frame (Causet's server does, up to a bound, to answer the client with the reason).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The declared length is above the limit.
    #[error("frame of {declared_bytes} bytes exceeds the limit of {max_frame_bytes} bytes")]
    TooLarge {
        /// The length the prefix declared.
        declared_bytes: usize,
        /// The limit.
        max_frame_bytes: usize,
    },
    /// The declared length is zero: the frame has no message-code byte.
    #[error("frame of length zero has no message code")]
    Empty,
}

/// Takes one frame off the front of `buf`, if a whole one has arrived.
///
/// Returns `Ok(None)` when more bytes are needed (and then reserves room for the rest of a frame whose length is
/// known and accepted). The limit applies to the declared length, that is the code byte plus the message; a
/// larger declaration is refused before anything is allocated for it.
pub fn decode_frame(buf: &mut BytesMut, max_frame_bytes: usize) -> Result<Option<Frame>, FrameError> {
    if buf.len() < LENGTH_PREFIX_BYTES {
        return Ok(None);
    }
    let declared = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    // A u32 always fits a usize on the 32- and 64-bit targets Causet builds for; saturate elsewhere.
    let declared_bytes = usize::try_from(declared).unwrap_or(usize::MAX);
    if declared_bytes == 0 {
        return Err(FrameError::Empty);
    }
    if declared_bytes > max_frame_bytes {
        return Err(FrameError::TooLarge { declared_bytes, max_frame_bytes });
    }
    let total = LENGTH_PREFIX_BYTES + declared_bytes;
    if buf.len() < total {
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    buf.advance(LENGTH_PREFIX_BYTES);
    let mut frame = buf.split_to(declared_bytes).freeze();
    let code = frame.get_u8();
    Ok(Some(Frame { code, body: frame }))
}

/// Encodes a message into one frame, in a single contiguous buffer (so a writer can send it with one write; some
/// AntidoteDB clients read a reply with a single `recv`).
///
/// # Panics
/// If the message is 4 GiB or more, which the length prefix cannot express. Callers bound what they encode far
/// below that.
pub fn encode_frame(code: MessageCode, message: &impl prost::Message) -> Bytes {
    let body_bytes = message.encoded_len();
    let mut buf = BytesMut::with_capacity(LENGTH_PREFIX_BYTES + 1 + body_bytes);
    buf.put_u32(frame_length(body_bytes));
    buf.put_u8(code.as_u8());
    message.encode_raw(&mut buf);
    debug_assert_eq!(buf.len(), LENGTH_PREFIX_BYTES + 1 + body_bytes);
    buf.freeze()
}

/// The bytes of a frame with any code byte and an already encoded body.
///
/// # Panics
/// If the body is 4 GiB or more.
pub fn frame_bytes(code: u8, body: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(LENGTH_PREFIX_BYTES + 1 + body.len());
    buf.put_u32(frame_length(body.len()));
    buf.put_u8(code);
    buf.put_slice(body);
    buf.freeze()
}

fn frame_length(body_bytes: usize) -> u32 {
    u32::try_from(body_bytes + 1).expect("a frame must be shorter than 4 GiB: its length prefix has 32 bits")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::ApbCommitTransaction;

    fn commit_frame(descriptor: &[u8]) -> Bytes {
        encode_frame(
            MessageCode::ApbCommitTransaction,
            &ApbCommitTransaction { transaction_descriptor: descriptor.to_vec() },
        )
    }

    #[test]
    fn a_frame_arriving_byte_by_byte_is_decoded_once_complete() {
        let wire = commit_frame(b"tx");
        let mut buf = BytesMut::new();
        for (i, byte) in wire.iter().enumerate() {
            assert_eq!(decode_frame(&mut buf, 1024), Ok(None), "after {i} bytes");
            buf.put_u8(*byte);
        }
        let frame = decode_frame(&mut buf, 1024).expect("valid").expect("complete");
        assert_eq!(frame.message_code(), Some(MessageCode::ApbCommitTransaction));
        assert_eq!(&frame.body[..], &[0x0a, 2, b't', b'x']);
        assert!(buf.is_empty());
    }

    #[test]
    fn several_frames_in_one_buffer_come_out_in_order() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&commit_frame(b"a"));
        buf.extend_from_slice(&commit_frame(b"bb"));
        buf.extend_from_slice(&commit_frame(b"ccc")[..5]);
        let a = decode_frame(&mut buf, 1024).unwrap().unwrap();
        let b = decode_frame(&mut buf, 1024).unwrap().unwrap();
        assert_eq!(a.body.len(), 3);
        assert_eq!(b.body.len(), 4);
        assert_eq!(decode_frame(&mut buf, 1024), Ok(None));
        buf.extend_from_slice(&commit_frame(b"ccc")[5..]);
        let c = decode_frame(&mut buf, 1024).unwrap().unwrap();
        assert_eq!(&c.body[2..], b"ccc");
        assert!(buf.is_empty());
    }

    #[test]
    fn an_oversized_declared_length_is_refused_without_allocating_it() {
        let mut buf = BytesMut::with_capacity(8);
        buf.put_u32(u32::MAX);
        buf.put_u8(116);
        let capacity = buf.capacity();
        assert_eq!(
            decode_frame(&mut buf, DEFAULT_MAX_FRAME_BYTES),
            Err(FrameError::TooLarge { declared_bytes: u32::MAX as usize, max_frame_bytes: DEFAULT_MAX_FRAME_BYTES })
        );
        assert_eq!(buf.capacity(), capacity, "nothing was reserved for the refused frame");
    }

    #[test]
    fn the_limit_counts_the_code_byte_and_the_message() {
        let wire = commit_frame(b"12345");
        let declared = wire.len() - LENGTH_PREFIX_BYTES;
        let mut at_limit = BytesMut::from(&wire[..]);
        assert!(decode_frame(&mut at_limit, declared).unwrap().is_some());
        let mut over = BytesMut::from(&wire[..]);
        assert!(matches!(decode_frame(&mut over, declared - 1), Err(FrameError::TooLarge { .. })));
    }

    #[test]
    fn a_zero_length_frame_is_refused() {
        let mut buf = BytesMut::from(&[0u8, 0, 0, 0, 116][..]);
        assert_eq!(decode_frame(&mut buf, 1024), Err(FrameError::Empty));
    }

    #[test]
    fn a_frame_with_only_a_code_has_an_empty_body() {
        let mut buf = BytesMut::from(&[0u8, 0, 0, 1, 133][..]);
        let frame = decode_frame(&mut buf, 1024).unwrap().unwrap();
        assert_eq!(frame, Frame::new(MessageCode::ApbGetConnectionDescriptor, Bytes::new()));
        assert_eq!(frame.to_bytes(), Bytes::from_static(&[0, 0, 0, 1, 133]));
    }
}
