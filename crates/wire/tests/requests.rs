//! Requests: every kind round-trips through encoding and decoding, and AntidoteDB's encodings of each operation
//! decode into the right Causet operation.

use bytes::BytesMut;
use causet_core::coordinator::{ClientRequest, ReadFrom};
use causet_core::{CoordinatorId, DcId, ObjectId, Timestamp, TxId, VectorClock};
use causet_crdt::{CrdtType, MapKey, Op};
use causet_wire::proto::{
    apb_set_update::SetOpType, ApbBoundObject, ApbCounterUpdate, ApbCrdtReset, ApbFlagUpdate, ApbMapKey,
    ApbMapNestedUpdate, ApbMapUpdate, ApbReadObjects, ApbRegUpdate, ApbSetUpdate, ApbStartTransaction,
    ApbStaticUpdateObjects, ApbTxnProperties, ApbUpdateObjects, ApbUpdateOp, ApbUpdateOperation, CRDT_type,
};
use causet_wire::{
    decode_frame, decode_request, encode_frame, encode_request, DcDescriptor, EncodeError, Frame, MessageCode,
    ProtocolError, Request, TxDescriptor,
};

fn tx() -> TxId {
    TxId { dc: DcId(1), coordinator: CoordinatorId(7), seq: 42 }
}

fn clock(entries: &[u64]) -> VectorClock {
    VectorClock::from_entries(entries.iter().map(|t| Timestamp(*t)).collect())
}

fn frame_of(bytes: &[u8]) -> Frame {
    let mut buf = BytesMut::from(bytes);
    let frame = decode_frame(&mut buf, 1 << 20).expect("valid framing").expect("a whole frame");
    assert!(buf.is_empty(), "one frame exactly");
    frame
}

fn round_trip(request: Request) {
    let bytes = encode_request(&request).expect("encodable");
    let frame = frame_of(&bytes);
    assert_eq!(frame.message_code(), Some(request.code()));
    assert_eq!(decode_request(&frame).expect("decodable"), request);
}

fn every_op_kind() -> Vec<(ObjectId, Op)> {
    let nested = vec![
        (MapKey { key: b"c".to_vec(), ty: CrdtType::CounterFat }, Op::Increment(-3)),
        (MapKey { key: b"s".to_vec(), ty: CrdtType::SetRw }, Op::Remove(vec![b"x".to_vec()])),
        (MapKey { key: b"r".to_vec(), ty: CrdtType::RegisterMv }, Op::Reset),
        (MapKey { key: b"f".to_vec(), ty: CrdtType::FlagDw }, Op::Disable),
        (
            MapKey { key: b"m".to_vec(), ty: CrdtType::MapRr },
            Op::MapUpdate(vec![(MapKey { key: b"e".to_vec(), ty: CrdtType::FlagEw }, Op::Enable)]),
        ),
        (
            MapKey { key: b"m2".to_vec(), ty: CrdtType::MapRr },
            Op::MapRemove(vec![MapKey { key: b"gone".to_vec(), ty: CrdtType::SetAw }]),
        ),
    ];
    vec![
        (ObjectId::new("pn", "b", CrdtType::CounterPn), Op::Increment(5)),
        (ObjectId::new("fat", "b", CrdtType::CounterFat), Op::Reset),
        (ObjectId::new("bc", "b", CrdtType::CounterB), Op::Increment(-2)),
        (ObjectId::new("aw", "b", CrdtType::SetAw), Op::Add(vec![b"1".to_vec(), b"2".to_vec()])),
        (ObjectId::new("rw", "b", CrdtType::SetRw), Op::Remove(vec![b"1".to_vec()])),
        (ObjectId::new("aw", "b", CrdtType::SetAw), Op::Add(vec![])),
        (ObjectId::new("lww", "b", CrdtType::RegisterLww), Op::Assign(b"hello".to_vec())),
        (ObjectId::new("mv", "b", CrdtType::RegisterMv), Op::Assign(Vec::new())),
        (ObjectId::new("ew", "b", CrdtType::FlagEw), Op::Enable),
        (ObjectId::new("dw", "b", CrdtType::FlagDw), Op::Disable),
        (ObjectId::new("go", "b", CrdtType::MapGo), Op::MapUpdate(vec![])),
        (ObjectId::new("rr", "b", CrdtType::MapRr), Op::MapUpdate(nested)),
        (
            ObjectId::new("rr", "b", CrdtType::MapRr),
            Op::MapRemove(vec![MapKey { key: b"k".to_vec(), ty: CrdtType::CounterFat }]),
        ),
    ]
}

fn every_object() -> Vec<ObjectId> {
    CrdtType::ALL
        .iter()
        .filter(|ty| **ty != CrdtType::SetGo)
        .map(|ty| ObjectId::new(ty.name(), "bucket", *ty))
        .collect()
}

#[test]
fn every_transaction_request_round_trips() {
    let requests = vec![
        ClientRequest::Start { clock: None, reads: ReadFrom::Leader },
        ClientRequest::Start { clock: Some(clock(&[1, 2, 3]).into()), reads: ReadFrom::Leader },
        ClientRequest::Start { clock: None, reads: ReadFrom::Nearest },
        ClientRequest::Start { clock: None, reads: ReadFrom::Cache },
        ClientRequest::Start { clock: Some(clock(&[4]).into()), reads: ReadFrom::Fresh },
        ClientRequest::Read { tx: tx(), objects: every_object() },
        ClientRequest::Read { tx: tx(), objects: vec![] },
        ClientRequest::Update { tx: tx(), updates: every_op_kind() },
        ClientRequest::Commit { tx: tx() },
        ClientRequest::Abort { tx: tx() },
        ClientRequest::StaticRead { clock: Some(clock(&[9]).into()), objects: every_object(), reads: ReadFrom::Leader },
        ClientRequest::StaticRead { clock: None, objects: vec![], reads: ReadFrom::Leader },
        ClientRequest::StaticRead { clock: None, objects: every_object(), reads: ReadFrom::Nearest },
        ClientRequest::StaticRead { clock: None, objects: every_object(), reads: ReadFrom::Cache },
        ClientRequest::StaticRead { clock: None, objects: every_object(), reads: ReadFrom::Fresh },
        ClientRequest::StaticUpdate { clock: Some(clock(&[0, u64::MAX]).into()), updates: every_op_kind() },
        ClientRequest::StaticUpdate { clock: None, updates: vec![] },
    ];
    for request in requests {
        round_trip(Request::Client(request));
    }
}

#[test]
fn every_cluster_request_round_trips() {
    round_trip(Request::CreateDc { nodes: vec!["antidote@host1".into(), "antidote@host2".into()] });
    round_trip(Request::ConnectToDcs {
        descriptors: vec![
            DcDescriptor { dc: DcId(0), dcs: 2, partitions: 8, addresses: vec!["10.0.0.1:8086".into()] },
            DcDescriptor { dc: DcId(1), dcs: 2, partitions: 8, addresses: vec![] },
        ],
    });
    round_trip(Request::GetConnectionDescriptor);
    round_trip(Request::ValidateOrReadObjects {
        tx: tx(),
        objects: every_object(),
        tokens: vec![b"t1".to_vec(), Vec::new()],
    });
}

fn update_request(object: ApbBoundObject, operation: ApbUpdateOperation) -> Frame {
    let descriptor = TxDescriptor::id_only(tx()).encode().unwrap();
    let m = ApbUpdateObjects {
        updates: vec![ApbUpdateOp { boundobject: object, operation }],
        transaction_descriptor: descriptor,
    };
    frame_of(&encode_frame(MessageCode::ApbUpdateObjects, &m))
}

fn bound(key: &str, ty: CRDT_type) -> ApbBoundObject {
    ApbBoundObject { key: key.as_bytes().to_vec(), r#type: ty as i32, bucket: b"b".to_vec() }
}

fn decoded_updates(frame: &Frame) -> Result<Vec<(ObjectId, Op)>, ProtocolError> {
    match decode_request(frame)? {
        Request::Client(ClientRequest::Update { updates, .. }) => Ok(updates),
        other => panic!("not an update: {other:?}"),
    }
}

#[test]
fn a_counter_update_without_amount_increments_by_one() {
    let op = ApbUpdateOperation { counterop: Some(ApbCounterUpdate { inc: None }), ..Default::default() };
    let updates = decoded_updates(&update_request(bound("c", CRDT_type::COUNTER), op)).unwrap();
    assert_eq!(updates, vec![(ObjectId::new("c", "b", CrdtType::CounterPn), Op::Increment(1))]);
}

#[test]
fn a_negative_bounded_counter_increment_is_a_decrement() {
    let op = ApbUpdateOperation { counterop: Some(ApbCounterUpdate { inc: Some(-4) }), ..Default::default() };
    let updates = decoded_updates(&update_request(bound("c", CRDT_type::BCOUNTER), op)).unwrap();
    assert_eq!(updates, vec![(ObjectId::new("c", "b", CrdtType::CounterB), Op::Increment(-4))]);
}

#[test]
fn a_set_add_uses_adds_and_a_remove_uses_rems() {
    let both = |optype: SetOpType| ApbUpdateOperation {
        setop: Some(ApbSetUpdate { optype: optype as i32, adds: vec![b"a".to_vec()], rems: vec![b"r".to_vec()] }),
        ..Default::default()
    };
    let add = decoded_updates(&update_request(bound("s", CRDT_type::ORSET), both(SetOpType::ADD))).unwrap();
    assert_eq!(add[0].1, Op::Add(vec![b"a".to_vec()]));
    let remove = decoded_updates(&update_request(bound("s", CRDT_type::RWSET), both(SetOpType::REMOVE))).unwrap();
    assert_eq!(remove[0].1, Op::Remove(vec![b"r".to_vec()]));
    let bad = ApbUpdateOperation {
        setop: Some(ApbSetUpdate { optype: 3, adds: vec![], rems: vec![] }),
        ..Default::default()
    };
    assert_eq!(
        decoded_updates(&update_request(bound("s", CRDT_type::ORSET), bad)),
        Err(ProtocolError::UnknownSetOpType(3))
    );
}

#[test]
fn a_top_level_map_batch_becomes_a_remove_then_an_update() {
    let key = |k: &str, ty: CRDT_type| ApbMapKey { key: k.as_bytes().to_vec(), r#type: ty as i32 };
    let op = ApbUpdateOperation {
        mapop: Some(ApbMapUpdate {
            updates: vec![ApbMapNestedUpdate {
                key: key("n", CRDT_type::FATCOUNTER),
                update: ApbUpdateOperation { counterop: Some(ApbCounterUpdate { inc: Some(2) }), ..Default::default() },
            }],
            removedKeys: vec![key("old", CRDT_type::ORSET)],
        }),
        ..Default::default()
    };
    let updates = decoded_updates(&update_request(bound("m", CRDT_type::RRMAP), op.clone())).unwrap();
    let object = ObjectId::new("m", "b", CrdtType::MapRr);
    let n = MapKey { key: b"n".to_vec(), ty: CrdtType::CounterFat };
    let old = MapKey { key: b"old".to_vec(), ty: CrdtType::SetAw };
    assert_eq!(
        updates,
        vec![(object.clone(), Op::MapRemove(vec![old])), (object, Op::MapUpdate(vec![(n, Op::Increment(2))]))]
    );

    // A batch naming one key both to update and to remove is refused, as AntidoteDB's type check does.
    let mut both = op.clone();
    both.mapop.as_mut().expect("a map op").removedKeys.push(key("n", CRDT_type::FATCOUNTER));
    let refused = decoded_updates(&update_request(bound("m", CRDT_type::RRMAP), both));
    assert!(matches!(refused, Err(ProtocolError::KeyUpdatedAndRemoved(ref k)) if k == "n"), "{refused:?}");

    // The same batch one map deeper cannot be split, and is refused.
    let nested = ApbUpdateOperation {
        mapop: Some(ApbMapUpdate {
            updates: vec![ApbMapNestedUpdate { key: key("inner", CRDT_type::RRMAP), update: op }],
            removedKeys: vec![],
        }),
        ..Default::default()
    };
    assert_eq!(
        decoded_updates(&update_request(bound("m", CRDT_type::RRMAP), nested)),
        Err(ProtocolError::NestedMapBatch)
    );
}

#[test]
fn an_operation_that_does_not_fit_the_type_is_refused() {
    let flag = ApbUpdateOperation { flagop: Some(ApbFlagUpdate { value: true }), ..Default::default() };
    assert_eq!(
        decoded_updates(&update_request(bound("c", CRDT_type::COUNTER), flag)),
        Err(ProtocolError::OperationMismatch { ty: CrdtType::CounterPn, op: "flag" })
    );
    let reg = ApbUpdateOperation { regop: Some(ApbRegUpdate { value: vec![1] }), ..Default::default() };
    let err = decoded_updates(&update_request(bound("s", CRDT_type::ORSET), reg)).unwrap_err();
    assert_eq!(err.to_string(), "a register operation does not apply to an object of type set_aw");
    let empty = ApbUpdateOperation::default();
    assert_eq!(
        decoded_updates(&update_request(bound("f", CRDT_type::FLAG_EW), empty)),
        Err(ProtocolError::MissingOperation(CrdtType::FlagEw))
    );
}

#[test]
fn several_operation_fields_follow_antidotedbs_precedence() {
    let op = ApbUpdateOperation {
        regop: Some(ApbRegUpdate { value: b"v".to_vec() }),
        resetop: Some(ApbCrdtReset {}),
        ..Default::default()
    };
    let updates = decoded_updates(&update_request(bound("r", CRDT_type::MVREG), op)).unwrap();
    assert_eq!(updates[0].1, Op::Assign(b"v".to_vec()));
}

#[test]
fn an_unknown_crdt_type_is_refused_with_a_readable_message() {
    let op = ApbUpdateOperation { resetop: Some(ApbCrdtReset {}), ..Default::default() };
    let object = ApbBoundObject { key: b"k".to_vec(), r#type: 7, bucket: b"b".to_vec() };
    let err = decoded_updates(&update_request(object, op)).unwrap_err();
    assert_eq!(err, ProtocolError::UnknownCrdtType(7));
    assert!(err.to_string().contains("unknown CRDT type 7"), "{err}");

    let read = ApbReadObjects {
        boundobjects: vec![ApbBoundObject { key: vec![], r#type: 0, bucket: vec![] }],
        transaction_descriptor: TxDescriptor::id_only(tx()).encode().unwrap(),
    };
    let frame = frame_of(&encode_frame(MessageCode::ApbReadObjects, &read));
    assert_eq!(decode_request(&frame), Err(ProtocolError::UnknownCrdtType(0)));
}

#[test]
fn maps_nested_too_deep_are_refused() {
    let mut op = ApbUpdateOperation { flagop: Some(ApbFlagUpdate { value: true }), ..Default::default() };
    let mut ty = CRDT_type::FLAG_EW;
    for _ in 0..40 {
        op = ApbUpdateOperation {
            mapop: Some(ApbMapUpdate {
                updates: vec![ApbMapNestedUpdate {
                    key: ApbMapKey { key: b"k".to_vec(), r#type: ty as i32 },
                    update: op,
                }],
                removedKeys: vec![],
            }),
            ..Default::default()
        };
        ty = CRDT_type::GMAP;
    }
    let err = decoded_updates(&update_request(bound("m", CRDT_type::GMAP), op)).unwrap_err();
    assert!(matches!(err, ProtocolError::TooDeep(_) | ProtocolError::Decode { .. }), "{err}");
}

#[test]
fn a_start_clock_that_is_absent_or_empty_means_none_and_properties_are_ignored() {
    let properties = Some(ApbTxnProperties {
        read_write: Some(1),
        red_blue: Some(1),
        shared_locks: vec![b"l".to_vec()],
        exclusive_locks: vec![b"x".to_vec()],
        read_from: None,
    });
    for timestamp in [None, Some(Vec::new()), Some(b"\x83\x64\x00\x06ignore".to_vec())] {
        let m = ApbStartTransaction { timestamp, properties: properties.clone() };
        let frame = frame_of(&encode_frame(MessageCode::ApbStartTransaction, &m));
        let start = ClientRequest::Start { clock: None, reads: ReadFrom::Leader };
        assert_eq!(decode_request(&frame), Ok(Request::Client(start)));
    }
    let m = ApbStaticUpdateObjects {
        transaction: ApbStartTransaction { timestamp: Some(b"garbage".to_vec()), properties },
        updates: vec![],
    };
    let frame = frame_of(&encode_frame(MessageCode::ApbStaticUpdateObjects, &m));
    assert!(matches!(decode_request(&frame), Err(ProtocolError::InvalidClock(_))));
}

#[test]
fn a_descriptor_is_accepted_with_or_without_its_snapshot_and_token() {
    let token = Some(causet_core::coordinator::BufferToken { dc: DcId(0), coordinator: CoordinatorId(4) });
    let descriptors = [
        TxDescriptor::id_only(tx()),
        TxDescriptor { tx: tx(), snapshot: clock(&[5, 6]), token: None },
        TxDescriptor { tx: tx(), snapshot: clock(&[5, 6]), token },
    ];
    for descriptor in descriptors {
        let m = causet_wire::proto::ApbCommitTransaction { transaction_descriptor: descriptor.encode().unwrap() };
        let frame = frame_of(&encode_frame(MessageCode::ApbCommitTransaction, &m));
        assert_eq!(decode_request(&frame), Ok(Request::Client(ClientRequest::Commit { tx: tx() })));
    }
    let m = causet_wire::proto::ApbCommitTransaction { transaction_descriptor: b"\x83h\x02".to_vec() };
    let frame = frame_of(&encode_frame(MessageCode::ApbCommitTransaction, &m));
    assert!(matches!(decode_request(&frame), Err(ProtocolError::InvalidTxDescriptor(_))));
}

#[test]
fn replies_nested_messages_and_unknown_codes_are_not_requests() {
    for code in MessageCode::ALL {
        let is_request = matches!(code.as_u8(), 116 | 118..=123 | 129 | 131 | 133 | 135);
        let result = decode_request(&Frame::new(code, bytes::Bytes::new()));
        if !is_request {
            assert_eq!(result, Err(ProtocolError::NotARequest(code)), "{code}");
        }
    }
    for code in (1u8..107).chain(137..=255) {
        assert_eq!(decode_request(&Frame { code, body: bytes::Bytes::new() }), Err(ProtocolError::UnknownCode(code)));
    }
}

#[test]
fn what_the_protocol_cannot_express_is_refused_when_encoding() {
    let set_go = ObjectId::new("g", "b", CrdtType::SetGo);
    assert_eq!(
        encode_request(&Request::Client(ClientRequest::Read { tx: tx(), objects: vec![set_go] })),
        Err(EncodeError::UnrepresentableType(CrdtType::SetGo))
    );
    let transfer = (ObjectId::new("c", "b", CrdtType::CounterB), Op::Transfer { amount: 1, to: 2 });
    assert_eq!(
        encode_request(&Request::Client(ClientRequest::StaticUpdate { clock: None, updates: vec![transfer] })),
        Err(EncodeError::UnrepresentableOp("transfer"))
    );
}
