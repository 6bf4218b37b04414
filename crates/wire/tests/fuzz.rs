//! Input from the network never panics: random bytes through the frame decoder, the request decoder and the reply
//! decoder; and random well-formed requests and values round-trip.

use bytes::{Bytes, BytesMut};
use causet_core::coordinator::{BufferToken, ClientClock, ClientRequest, ClientResponse};
use causet_core::{CoordinatorId, DcId, ObjectId, Timestamp, TxId, VectorClock};
use causet_crdt::{CrdtType, MapKey, Op, Value};
use causet_wire::response::decode_reply;
use causet_wire::{decode_frame, decode_request, encode_reply, encode_request, Frame, ReplyKind, Request};
use proptest::prelude::*;

fn protocol_type() -> impl Strategy<Value = CrdtType> {
    prop::sample::select(CrdtType::ALL.iter().copied().filter(|t| *t != CrdtType::SetGo).collect::<Vec<_>>())
}

fn bytes_value() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..6)
}

/// An operation that fits `ty` and the protocol, maps nesting up to `depth` more levels.
fn op_for(ty: CrdtType, depth: u32) -> BoxedStrategy<Op> {
    match ty {
        CrdtType::CounterPn | CrdtType::CounterFat | CrdtType::CounterB => any::<i64>().prop_map(Op::Increment).boxed(),
        CrdtType::SetAw | CrdtType::SetRw | CrdtType::SetGo => prop_oneof![
            prop::collection::vec(bytes_value(), 0..3).prop_map(Op::Add),
            prop::collection::vec(bytes_value(), 0..3).prop_map(Op::Remove),
            Just(Op::Reset),
        ]
        .boxed(),
        CrdtType::RegisterLww | CrdtType::RegisterMv => bytes_value().prop_map(Op::Assign).boxed(),
        CrdtType::FlagEw | CrdtType::FlagDw => {
            prop_oneof![Just(Op::Enable), Just(Op::Disable), Just(Op::Reset)].boxed()
        }
        CrdtType::MapGo | CrdtType::MapRr => {
            // An empty removal is an empty update on the wire (AntidoteDB decodes it so), hence at least one key.
            let keys = prop::collection::vec(map_key(), 1..3);
            if depth == 0 {
                keys.prop_map(Op::MapRemove).boxed()
            } else {
                prop_oneof![
                    keys.prop_map(Op::MapRemove),
                    prop::collection::vec(
                        map_key().prop_flat_map(move |k| op_for(k.ty, depth - 1).prop_map(move |op| (k.clone(), op))),
                        0..3
                    )
                    .prop_map(Op::MapUpdate),
                ]
                .boxed()
            }
        }
    }
}

fn map_key() -> impl Strategy<Value = MapKey> {
    (bytes_value(), protocol_type()).prop_map(|(key, ty)| MapKey { key, ty })
}

fn object() -> impl Strategy<Value = ObjectId> {
    (bytes_value(), bytes_value(), protocol_type()).prop_map(|(k, b, ty)| ObjectId { key: k, bucket: b, ty })
}

fn update() -> impl Strategy<Value = (ObjectId, Op)> {
    object().prop_flat_map(|o| op_for(o.ty, 2).prop_map(move |op| (o.clone(), op)))
}

fn clock() -> impl Strategy<Value = Option<ClientClock>> {
    let tokens = prop::collection::vec(token(), 0..3).prop_map(|t| t.into_iter().flatten().collect());
    prop::option::of((prop::collection::vec(any::<u64>(), 0..4), tokens).prop_map(|(e, tokens)| ClientClock {
        vector: VectorClock::from_entries(e.into_iter().map(Timestamp).collect()),
        tokens,
    }))
}

fn token() -> impl Strategy<Value = Option<BufferToken>> {
    prop::option::of(
        (any::<u16>(), any::<u32>()).prop_map(|(dc, c)| BufferToken { dc: DcId(dc), coordinator: CoordinatorId(c) }),
    )
}

fn tx() -> impl Strategy<Value = TxId> {
    (any::<u16>(), any::<u32>(), any::<u64>()).prop_map(|(d, c, s)| TxId {
        dc: DcId(d),
        coordinator: CoordinatorId(c),
        seq: s,
    })
}

fn reads() -> impl Strategy<Value = causet_core::coordinator::ReadFrom> {
    use causet_core::coordinator::ReadFrom;
    prop_oneof![Just(ReadFrom::Leader), Just(ReadFrom::Nearest), Just(ReadFrom::Cache), Just(ReadFrom::Fresh)]
}

fn client_request() -> impl Strategy<Value = ClientRequest> {
    prop_oneof![
        (clock(), reads()).prop_map(|(clock, reads)| ClientRequest::Start { clock, reads }),
        (tx(), prop::collection::vec(object(), 0..4)).prop_map(|(tx, objects)| ClientRequest::Read { tx, objects }),
        (tx(), prop::collection::vec(update(), 0..4)).prop_map(|(tx, updates)| ClientRequest::Update { tx, updates }),
        tx().prop_map(|tx| ClientRequest::Commit { tx }),
        tx().prop_map(|tx| ClientRequest::Abort { tx }),
        (clock(), prop::collection::vec(object(), 0..4), reads())
            .prop_map(|(clock, objects, reads)| ClientRequest::StaticRead { clock, objects, reads }),
        (clock(), prop::collection::vec(update(), 0..4))
            .prop_map(|(clock, updates)| ClientRequest::StaticUpdate { clock, updates }),
    ]
}

/// A value of type `ty`, maps nesting up to `depth` more levels.
fn value_for(ty: CrdtType, depth: u32) -> BoxedStrategy<Value> {
    match ty {
        CrdtType::CounterPn | CrdtType::CounterFat | CrdtType::CounterB => {
            any::<i32>().prop_map(|n| Value::Counter(i64::from(n))).boxed()
        }
        CrdtType::SetAw | CrdtType::SetRw | CrdtType::SetGo => {
            prop::collection::vec(bytes_value(), 0..3).prop_map(Value::Set).boxed()
        }
        CrdtType::RegisterLww => bytes_value().prop_map(Value::Register).boxed(),
        CrdtType::RegisterMv => prop::collection::vec(bytes_value(), 0..3).prop_map(Value::MvRegister).boxed(),
        CrdtType::FlagEw | CrdtType::FlagDw => any::<bool>().prop_map(Value::Flag).boxed(),
        CrdtType::MapGo | CrdtType::MapRr if depth == 0 => Just(Value::Map(vec![])).boxed(),
        CrdtType::MapGo | CrdtType::MapRr => prop::collection::vec(
            map_key().prop_flat_map(move |k| value_for(k.ty, depth - 1).prop_map(move |v| (k.clone(), v))),
            0..3,
        )
        .prop_map(Value::Map)
        .boxed(),
    }
}

fn typed_values() -> impl Strategy<Value = Vec<(CrdtType, Value)>> {
    prop::collection::vec(protocol_type().prop_flat_map(|ty| value_for(ty, 2).prop_map(move |v| (ty, v))), 0..4)
}

fn frame_of(bytes: &Bytes) -> Frame {
    let mut buf = BytesMut::from(&bytes[..]);
    decode_frame(&mut buf, usize::MAX).expect("valid framing").expect("a whole frame")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_request_bodies_never_panic(code in any::<u8>(), body in prop::collection::vec(any::<u8>(), 0..96)) {
        let frame = Frame { code, body: Bytes::from(body) };
        let _ = decode_request(&frame);
    }

    #[test]
    fn random_bodies_for_request_codes_never_panic(
        code in prop::sample::select(vec![116u8, 118, 119, 120, 121, 122, 123, 129, 131, 133, 135]),
        body in prop::collection::vec(any::<u8>(), 0..96),
    ) {
        let _ = decode_request(&Frame { code, body: Bytes::from(body) });
    }

    #[test]
    fn random_replies_never_panic(code in any::<u8>(), body in prop::collection::vec(any::<u8>(), 0..96)) {
        let frame = Frame { code, body: Bytes::from(body) };
        let kinds = [
            ReplyKind::Start,
            ReplyKind::Read(vec![CrdtType::MapRr, CrdtType::CounterPn]),
            ReplyKind::Update,
            ReplyKind::Abort,
            ReplyKind::Commit,
            ReplyKind::StaticRead(vec![CrdtType::SetAw]),
            ReplyKind::StaticUpdate,
        ];
        for kind in &kinds {
            let _ = decode_reply(kind, &frame);
        }
    }

    #[test]
    fn random_byte_streams_never_panic_the_frame_decoder(
        chunks in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..16), 0..8),
        max in 0usize..64,
    ) {
        let mut buf = BytesMut::new();
        'feed: for chunk in chunks {
            buf.extend_from_slice(&chunk);
            loop {
                match decode_frame(&mut buf, max) {
                    Ok(Some(frame)) => {
                        prop_assert!(frame.body.len() < max);
                        let _ = decode_request(&frame);
                    }
                    Ok(None) => break,
                    Err(_) => break 'feed,
                }
            }
        }
    }

    #[test]
    fn well_formed_requests_round_trip(request in client_request()) {
        let request = Request::Client(request);
        let frame = frame_of(&encode_request(&request).expect("representable"));
        prop_assert_eq!(decode_request(&frame).expect("decodable"), request);
    }

    #[test]
    fn well_formed_values_round_trip(
        values in typed_values(),
        commit in prop::collection::vec(any::<u64>(), 0..4),
        token in token(),
    ) {
        let (types, values): (Vec<_>, Vec<_>) = values.into_iter().unzip();
        let kind = ReplyKind::Read(types.clone());
        let response = ClientResponse::Values(values.clone());
        let frame = frame_of(&encode_reply(&kind, &Ok(response.clone())));
        prop_assert_eq!(decode_reply(&kind, &frame), Ok(Ok(response)));

        let kind = ReplyKind::StaticRead(types);
        let commit = VectorClock::from_entries(commit.into_iter().map(Timestamp).collect());
        let response = ClientResponse::StaticValues { values, commit, token };
        let frame = frame_of(&encode_reply(&kind, &Ok(response.clone())));
        prop_assert_eq!(decode_reply(&kind, &frame), Ok(Ok(response)));
    }
}
