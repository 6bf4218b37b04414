//! The fuzz targets: each takes arbitrary bytes, must never panic, and asserts what must hold of whatever the
//! decoder accepts (it re-encodes to something that decodes to the same value).

use bytes::BytesMut;
use causet_crdt::{Crdt, Effect, Stamp, TxTag};
use causet_wire::frame::{decode_frame, frame_bytes, Frame};
use causet_wire::request::{decode_request, encode_client_request, Request};

/// A target's name and function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: [Target; 4] = [("frame", frame), ("request", request), ("effect", effect), ("state", state)];

/// The client protocol's framing: the first byte picks the frame size limit and how the rest arrives (in what
/// chunk sizes); every frame taken off the stream must re-encode to exactly the bytes it was taken from, and none
/// may exceed the limit.
pub fn frame(data: &[u8]) {
    let Some((&shape, stream)) = data.split_first() else { return };
    let max_frame_bytes = 1usize << (4 + (shape & 0x0f));
    let chunk = 1 + (shape >> 4) as usize * 7;
    let mut buf = BytesMut::new();
    let mut fed = 0;
    let mut consumed = 0;
    while fed < stream.len() || !buf.is_empty() {
        if fed < stream.len() {
            let end = (fed + chunk).min(stream.len());
            buf.extend_from_slice(&stream[fed..end]);
            fed = end;
        }
        let before = buf.len();
        match decode_frame(&mut buf, max_frame_bytes) {
            Ok(Some(Frame { code, body })) => {
                let taken = before - buf.len();
                assert!(taken - 4 <= max_frame_bytes, "a frame above the limit was accepted");
                let again = frame_bytes(code, &body);
                assert_eq!(&again[..], &stream[consumed..consumed + taken], "a frame re-encodes differently");
                consumed += taken;
            }
            Ok(None) => {
                if fed == stream.len() {
                    break;
                }
            }
            Err(_) => break,
        }
    }
}

/// Request decoding: the first byte is the message code, the rest the body. A transaction request that decodes
/// re-encodes (descriptors naming the transaction only) to a frame that decodes to the same request.
pub fn request(data: &[u8]) {
    let Some((&code, body)) = data.split_first() else { return };
    let frame = Frame { code, body: bytes::Bytes::copy_from_slice(body) };
    let Ok(Request::Client(decoded)) = decode_request(&frame) else { return };
    let Ok(encoded) = encode_client_request(&decoded) else { return };
    let mut buf = BytesMut::from(&encoded[..]);
    let again = decode_frame(&mut buf, usize::MAX)
        .expect("an encoded request frames")
        .expect("an encoded request is a whole frame");
    let redecoded = decode_request(&again).expect("an encoded request decodes");
    assert_eq!(redecoded, Request::Client(decoded), "a request changed across encode and decode");
}

/// CRDT effects as replication and the log carry them: one that decodes re-encodes to the same bytes' meaning,
/// and is validated and applied to its type's initial state without a panic, and the state reads.
pub fn effect(data: &[u8]) {
    let Ok(effect) = Effect::decode(data) else { return };
    let again = Effect::decode(&effect.encode()).expect("an encoded effect decodes");
    assert_eq!(again, effect, "an effect changed across encode and decode");
    let mut crdt = Crdt::new(effect.ty());
    if crdt.validate_effect(&effect).is_ok() {
        crdt.apply(&effect, Stamp { time: 1, tx: TxTag(1) }).expect("a validated effect of the right type applies");
        let _ = crdt.value();
    }
}

/// CRDT states as checkpoints carry them: the first byte splits the rest into a state and an effect; a state that
/// decodes round-trips and reads, and an effect of its type that it validates applies to it.
pub fn state(data: &[u8]) {
    let Some((&split, rest)) = data.split_first() else { return };
    let split = (split as usize).min(rest.len());
    let (state_bytes, effect_bytes) = rest.split_at(rest.len() - split);
    let Ok(mut crdt) = Crdt::decode(state_bytes) else { return };
    let again = Crdt::decode(&crdt.encode()).expect("an encoded state decodes");
    assert_eq!(again, crdt, "a state changed across encode and decode");
    let _ = crdt.value();
    if let Ok(effect) = Effect::decode(effect_bytes) {
        if effect.ty() == crdt.ty() && crdt.validate_effect(&effect).is_ok() {
            crdt.apply(&effect, Stamp { time: 2, tx: TxTag(2) }).expect("a validated effect of the right type applies");
            let _ = crdt.value();
        }
    }
}
