//! Replies: each response round-trips, every CRDT type's value takes AntidoteDB's shape, and errors take the shape
//! AntidoteDB gives them.

use bytes::{Bytes, BytesMut};
use causet_core::coordinator::{BufferToken, ClientResponse, TxError};
use causet_core::{CoordinatorId, DcId, Timestamp, TxId, VectorClock};
use causet_crdt::{CrdtError, CrdtType, MapKey, Value};
use causet_wire::proto::{
    ApbCommitResp, ApbCreateDCResp, ApbErrorResp, ApbGetConnectionDescriptorResp, ApbOperationResp, ApbReadObjectResp,
    ApbReadObjectsResp, ApbStartTransactionResp, ApbStaticReadObjectsResp, ApbValidateOrReadObjectsResp, CRDT_type,
};
use causet_wire::response::{decode_reply, ErrorReply};
use causet_wire::{
    decode_frame, encode_reply, error_frame, not_supported, Frame, MessageCode, ProtocolError, ReplyKind,
};
use prost::Message;

fn tx() -> TxId {
    TxId { dc: DcId(0), coordinator: CoordinatorId(3), seq: 9 }
}

fn clock(entries: &[u64]) -> VectorClock {
    VectorClock::from_entries(entries.iter().map(|t| Timestamp(*t)).collect())
}

fn frame_of(bytes: &Bytes) -> Frame {
    let mut buf = BytesMut::from(&bytes[..]);
    let frame = decode_frame(&mut buf, 1 << 20).expect("valid framing").expect("a whole frame");
    assert!(buf.is_empty());
    frame
}

fn round_trip(kind: ReplyKind, response: ClientResponse) {
    let bytes = encode_reply(&kind, &Ok(response.clone()));
    let frame = frame_of(&bytes);
    assert_eq!(frame.message_code(), Some(kind.reply_code()), "{kind:?}");
    assert_eq!(decode_reply(&kind, &frame), Ok(Ok(response)));
}

/// One value of every type, with the type, in the shapes the core produces.
fn every_value() -> Vec<(CrdtType, Value)> {
    let key = |k: &str, ty| MapKey { key: k.as_bytes().to_vec(), ty };
    let nested = Value::Map(vec![
        (key("c", CrdtType::CounterFat), Value::Counter(-7)),
        (key("f", CrdtType::FlagDw), Value::Flag(false)),
        (key("m", CrdtType::MapRr), Value::Map(vec![(key("r", CrdtType::RegisterMv), Value::MvRegister(vec![]))])),
        (key("s", CrdtType::SetRw), Value::Set(vec![b"x".to_vec()])),
    ]);
    vec![
        (CrdtType::CounterPn, Value::Counter(42)),
        (CrdtType::CounterFat, Value::Counter(i64::from(i32::MIN))),
        (CrdtType::CounterB, Value::Counter(i64::from(i32::MAX))),
        (CrdtType::SetAw, Value::Set(vec![b"a".to_vec(), b"b".to_vec()])),
        (CrdtType::SetRw, Value::Set(vec![])),
        (CrdtType::RegisterLww, Value::Register(b"value".to_vec())),
        (CrdtType::RegisterLww, Value::Register(Vec::new())),
        (CrdtType::RegisterMv, Value::MvRegister(vec![b"v1".to_vec(), b"v1".to_vec(), b"v2".to_vec()])),
        (CrdtType::FlagEw, Value::Flag(true)),
        (CrdtType::FlagDw, Value::Flag(false)),
        (CrdtType::MapGo, Value::Map(vec![(key("lww", CrdtType::RegisterLww), Value::Register(b"r".to_vec()))])),
        (CrdtType::MapRr, nested),
        (CrdtType::MapRr, Value::Map(vec![])),
    ]
}

#[test]
fn every_successful_response_round_trips() {
    let (types, values): (Vec<_>, Vec<_>) = every_value().into_iter().unzip();
    round_trip(ReplyKind::Start, ClientResponse::Started { tx: tx(), snapshot: clock(&[4, 5]), token: None });
    round_trip(ReplyKind::Read(types.clone()), ClientResponse::Values(values.clone()));
    round_trip(ReplyKind::Read(vec![]), ClientResponse::Values(vec![]));
    round_trip(ReplyKind::Update, ClientResponse::Updated);
    round_trip(ReplyKind::Abort, ClientResponse::Aborted);
    round_trip(ReplyKind::Commit, ClientResponse::Committed { commit: clock(&[7, 8]), token: None });
    round_trip(ReplyKind::StaticUpdate, ClientResponse::Committed { commit: clock(&[1]), token: None });
    // A commit's clock, and a start's descriptor, name the write buffer the client depends on.
    let token = Some(BufferToken { dc: DcId(1), coordinator: CoordinatorId(0x0004_0002) });
    round_trip(ReplyKind::Commit, ClientResponse::Committed { commit: clock(&[7, 8]), token });
    round_trip(ReplyKind::Start, ClientResponse::Started { tx: tx(), snapshot: clock(&[4, 5]), token });
    round_trip(ReplyKind::StaticRead(types), ClientResponse::StaticValues { values, commit: clock(&[3, 3]), token });
}

fn read_reply(ty: CrdtType, value: Value) -> ApbReadObjectResp {
    let bytes = encode_reply(&ReplyKind::Read(vec![ty]), &Ok(ClientResponse::Values(vec![value])));
    let frame = frame_of(&bytes);
    assert_eq!(frame.message_code(), Some(MessageCode::ApbReadObjectsResp));
    let mut m = ApbReadObjectsResp::decode(frame.body).unwrap();
    assert!(m.success);
    assert_eq!(m.objects.len(), 1);
    m.objects.pop().unwrap()
}

#[test]
fn each_type_is_answered_in_the_field_antidotedb_uses() {
    for ty in [CrdtType::CounterPn, CrdtType::CounterFat, CrdtType::CounterB] {
        let r = read_reply(ty, Value::Counter(-3));
        assert_eq!(r.counter.map(|c| c.value), Some(-3), "{ty}: the bounded counter reads as a counter too");
        assert!(r.set.is_none() && r.reg.is_none() && r.mvreg.is_none() && r.map.is_none() && r.flag.is_none());
    }
    for ty in [CrdtType::SetAw, CrdtType::SetRw] {
        assert_eq!(read_reply(ty, Value::Set(vec![b"e".to_vec()])).set.unwrap().value, vec![b"e".to_vec()]);
    }
    assert_eq!(read_reply(CrdtType::RegisterLww, Value::Register(b"v".to_vec())).reg.unwrap().value, b"v");
    assert_eq!(
        read_reply(CrdtType::RegisterMv, Value::MvRegister(vec![b"a".to_vec()])).mvreg.unwrap().values,
        vec![b"a".to_vec()]
    );
    for ty in [CrdtType::FlagEw, CrdtType::FlagDw] {
        assert!(read_reply(ty, Value::Flag(true)).flag.unwrap().value);
    }
    let map = read_reply(
        CrdtType::MapRr,
        Value::Map(vec![(MapKey { key: b"k".to_vec(), ty: CrdtType::SetAw }, Value::Set(vec![b"z".to_vec()]))]),
    )
    .map
    .unwrap();
    assert_eq!(map.entries.len(), 1);
    assert_eq!(map.entries[0].key.key, b"k");
    assert_eq!(map.entries[0].key.r#type, CRDT_type::ORSET as i32);
    assert_eq!(map.entries[0].value.set.as_ref().unwrap().value, vec![b"z".to_vec()]);
}

#[test]
fn a_started_transaction_hands_out_a_causet_descriptor() {
    let bytes =
        encode_reply(&ReplyKind::Start, &Ok(ClientResponse::Started { tx: tx(), snapshot: clock(&[1]), token: None }));
    let m = ApbStartTransactionResp::decode(frame_of(&bytes).body).unwrap();
    assert!(m.success);
    let d = causet_wire::TxDescriptor::decode(m.transaction_descriptor.as_deref().unwrap()).unwrap();
    assert_eq!(d.tx, tx());
    assert_eq!(d.snapshot, clock(&[1]));
}

fn aborted() -> TxError {
    TxError::Aborted("certification failed".into())
}

#[test]
fn errors_with_antidotedb_codes_get_the_typed_response() {
    let cases: Vec<(ReplyKind, TxError, u32)> = vec![
        (ReplyKind::Start, TxError::Timeout("clock".into()), 1),
        (ReplyKind::Read(vec![CrdtType::CounterPn]), aborted(), 3),
        (ReplyKind::Update, TxError::Crdt(CrdtError::NoPermissions { dc: 0, requested: 5, available: 1 }), 2),
        (ReplyKind::Abort, TxError::Timeout("slow".into()), 1),
        (ReplyKind::Commit, aborted(), 3),
        (ReplyKind::StaticUpdate, TxError::AlreadyAborted { tx: tx(), reason: "idle".into() }, 3),
    ];
    for (kind, error, code) in cases {
        let frame = frame_of(&encode_reply(&kind, &Err(error.clone())));
        assert_eq!(frame.message_code(), Some(kind.reply_code()), "{kind:?}");
        let (success, errorcode) = match kind {
            ReplyKind::Start => {
                let m = ApbStartTransactionResp::decode(frame.body.clone()).unwrap();
                assert!(m.transaction_descriptor.is_none());
                (m.success, m.errorcode)
            }
            ReplyKind::Read(_) => {
                let m = ApbReadObjectsResp::decode(frame.body.clone()).unwrap();
                assert!(m.objects.is_empty());
                (m.success, m.errorcode)
            }
            ReplyKind::Update | ReplyKind::Abort => {
                let m = ApbOperationResp::decode(frame.body.clone()).unwrap();
                (m.success, m.errorcode)
            }
            ReplyKind::Commit | ReplyKind::StaticUpdate => {
                let m = ApbCommitResp::decode(frame.body.clone()).unwrap();
                assert!(m.commit_time.is_none());
                (m.success, m.errorcode)
            }
            ReplyKind::StaticRead(_) => unreachable!("not in the cases"),
        };
        assert!(!success);
        assert_eq!(errorcode, Some(code));
        assert_eq!(error.code(), code);
        let reply = decode_reply(&kind, &frame).unwrap().unwrap_err();
        assert_eq!(reply.code, code);
    }
}

#[test]
fn errors_without_an_antidotedb_code_get_an_error_response_with_the_message() {
    let errors = vec![
        TxError::UnknownTransaction(tx()),
        TxError::AlreadyCommitted(tx()),
        TxError::Busy(tx()),
        TxError::TooManyTransactions(1000),
        TxError::InvalidClock("3 entries for 2 DCs".into()),
        TxError::Crdt(CrdtError::UnsupportedOp { ty: CrdtType::CounterPn, op: "reset".into() }),
    ];
    let kinds = [
        ReplyKind::Start,
        ReplyKind::Read(vec![]),
        ReplyKind::Update,
        ReplyKind::Abort,
        ReplyKind::Commit,
        ReplyKind::StaticUpdate,
    ];
    for error in errors {
        assert_eq!(error.code(), 0);
        for kind in &kinds {
            let frame = frame_of(&encode_reply(kind, &Err(error.clone())));
            assert_eq!(frame.message_code(), Some(MessageCode::ApbErrorResp));
            let m = ApbErrorResp::decode(frame.body.clone()).unwrap();
            assert_eq!(m.errcode, 0);
            assert_eq!(String::from_utf8(m.errmsg).unwrap(), error.to_string());
            assert_eq!(decode_reply(kind, &frame), Ok(Err(ErrorReply { code: 0, message: error.to_string() })));
        }
    }
}

#[test]
fn a_failed_static_read_is_an_error_response_with_its_code() {
    let kind = ReplyKind::StaticRead(vec![CrdtType::SetAw]);
    for (error, code) in [(aborted(), 3), (TxError::Timeout("t".into()), 1), (TxError::Busy(tx()), 0)] {
        let frame = frame_of(&encode_reply(&kind, &Err(error.clone())));
        assert_eq!(frame.message_code(), Some(MessageCode::ApbErrorResp));
        let m = ApbErrorResp::decode(frame.body).unwrap();
        assert_eq!((m.errcode, String::from_utf8(m.errmsg).unwrap()), (code, error.to_string()));
    }
}

#[test]
fn a_counter_beyond_32_bits_is_answered_with_an_explanation_not_a_wrong_value() {
    let frame = frame_of(&encode_reply(
        &ReplyKind::Read(vec![CrdtType::CounterPn]),
        &Ok(ClientResponse::Values(vec![Value::Counter(1 << 40)])),
    ));
    assert_eq!(frame.message_code(), Some(MessageCode::ApbErrorResp));
    let m = ApbErrorResp::decode(frame.body).unwrap();
    assert!(String::from_utf8(m.errmsg).unwrap().contains("1099511627776"));
}

#[test]
fn a_response_that_does_not_fit_the_request_is_an_error_response() {
    let cases = [
        (ReplyKind::Commit, ClientResponse::Updated),
        (ReplyKind::Read(vec![CrdtType::CounterPn]), ClientResponse::Values(vec![])),
        (ReplyKind::Read(vec![CrdtType::CounterPn]), ClientResponse::Values(vec![Value::Flag(true)])),
        // A map entry's type must have a protocol number; set_go has none.
        (
            ReplyKind::Read(vec![CrdtType::MapGo]),
            ClientResponse::Values(vec![Value::Map(vec![(
                MapKey { key: b"g".to_vec(), ty: CrdtType::SetGo },
                Value::Set(vec![]),
            )])]),
        ),
    ];
    for (kind, response) in cases {
        let frame = frame_of(&encode_reply(&kind, &Ok(response)));
        assert_eq!(frame.message_code(), Some(MessageCode::ApbErrorResp), "{kind:?}");
    }
}

#[test]
fn requests_not_supported_yet_get_their_typed_failure() {
    let f = frame_of(&not_supported(MessageCode::ApbCreateDC));
    assert_eq!(f.message_code(), Some(MessageCode::ApbCreateDCResp));
    assert_eq!(ApbCreateDCResp::decode(f.body).unwrap(), ApbCreateDCResp { success: false, errorcode: Some(0) });
    let f = frame_of(&not_supported(MessageCode::ApbConnectToDCs));
    assert_eq!(f.message_code(), Some(MessageCode::ApbConnectToDCsResp));
    let f = frame_of(&not_supported(MessageCode::ApbGetConnectionDescriptor));
    assert_eq!(f.message_code(), Some(MessageCode::ApbGetConnectionDescriptorResp));
    assert!(!ApbGetConnectionDescriptorResp::decode(f.body).unwrap().success);
    let f = frame_of(&not_supported(MessageCode::ApbValidateOrReadObjects));
    assert_eq!(f.message_code(), Some(MessageCode::ApbValidateOrReadObjectsResp));
    assert!(!ApbValidateOrReadObjectsResp::decode(f.body).unwrap().success);
    let f = frame_of(&not_supported(MessageCode::ApbReadObjects));
    assert_eq!(f.message_code(), Some(MessageCode::ApbErrorResp));
}

#[test]
fn an_error_frame_carries_message_and_code() {
    let f = frame_of(&error_frame("bad request", 0));
    assert_eq!(f.message_code(), Some(MessageCode::ApbErrorResp));
    assert_eq!(ApbErrorResp::decode(f.body).unwrap(), ApbErrorResp { errmsg: b"bad request".to_vec(), errcode: 0 });
}

#[test]
fn the_client_refuses_replies_that_do_not_answer_its_request() {
    let commit = frame_of(&encode_reply(
        &ReplyKind::Commit,
        &Ok(ClientResponse::Committed { commit: clock(&[1]), token: None }),
    ));
    assert_eq!(
        decode_reply(&ReplyKind::Update, &commit),
        Err(ProtocolError::UnexpectedReply { expected: MessageCode::ApbOperationResp, got: 127 })
    );
    // A successful commit without a commit time, and values of the wrong shape.
    let bare = Frame::new(
        MessageCode::ApbCommitResp,
        ApbCommitResp { success: true, commit_time: None, errorcode: None }.encode_to_vec(),
    );
    assert!(matches!(decode_reply(&ReplyKind::Commit, &bare), Err(ProtocolError::MalformedReply(_))));
    let values = frame_of(&encode_reply(
        &ReplyKind::Read(vec![CrdtType::FlagEw]),
        &Ok(ClientResponse::Values(vec![Value::Flag(true)])),
    ));
    assert!(decode_reply(&ReplyKind::Read(vec![CrdtType::CounterPn]), &values).is_err());
    assert!(decode_reply(&ReplyKind::Read(vec![]), &values).is_err());
    // A typed failure without a code reads as unknown.
    let failed = Frame::new(
        MessageCode::ApbStaticReadObjectsResp,
        ApbStaticReadObjectsResp {
            objects: ApbReadObjectsResp { success: false, objects: vec![], errorcode: None },
            committime: ApbCommitResp { success: false, commit_time: None, errorcode: None },
        }
        .encode_to_vec(),
    );
    assert_eq!(decode_reply(&ReplyKind::StaticRead(vec![]), &failed).unwrap().unwrap_err().code, 0);
}
