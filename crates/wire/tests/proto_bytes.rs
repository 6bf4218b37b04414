//! The hand-written messages produce the bytes `antidote.proto` prescribes: encodings compared with protobuf bytes
//! computed by hand from the field numbers and types, and every message through an encode/decode round trip.

use causet_wire::proto::*;
use causet_wire::{encode_frame, MessageCode};
use prost::Message;

fn bytes(m: &impl Message) -> Vec<u8> {
    m.encode_to_vec()
}

#[test]
fn bound_object_fields_are_key_1_type_2_bucket_3() {
    let m = ApbBoundObject { key: b"k".to_vec(), r#type: CRDT_type::COUNTER as i32, bucket: b"b".to_vec() };
    assert_eq!(bytes(&m), [0x0a, 0x01, b'k', 0x10, 0x03, 0x1a, 0x01, b'b']);
}

#[test]
fn counter_fields_are_zigzag_encoded() {
    // sint64: zigzag(-1) = 1, zigzag(5) = 10.
    assert_eq!(bytes(&ApbCounterUpdate { inc: Some(-1) }), [0x08, 0x01]);
    assert_eq!(bytes(&ApbCounterUpdate { inc: Some(5) }), [0x08, 0x0a]);
    assert_eq!(bytes(&ApbCounterUpdate { inc: None }), [] as [u8; 0]);
    // sint32: zigzag(-2) = 3.
    assert_eq!(bytes(&ApbGetCounterResp { value: -2 }), [0x08, 0x03]);
}

#[test]
fn required_fields_are_written_even_at_their_default() {
    assert_eq!(bytes(&ApbOperationResp { success: false, errorcode: Some(3) }), [0x08, 0x00, 0x10, 0x03]);
    assert_eq!(bytes(&ApbGetCounterResp { value: 0 }), [0x08, 0x00]);
    assert_eq!(
        bytes(&ApbCommitResp { success: false, commit_time: None, errorcode: Some(3) }),
        [0x08, 0x00, 0x18, 0x03]
    );
}

#[test]
fn update_operation_fields_skip_number_4() {
    let flag = ApbUpdateOperation { flagop: Some(ApbFlagUpdate { value: true }), ..Default::default() };
    assert_eq!(bytes(&flag), [0x3a, 0x02, 0x08, 0x01]); // field 7, length-delimited
    let reset = ApbUpdateOperation { resetop: Some(ApbCrdtReset {}), ..Default::default() };
    assert_eq!(bytes(&reset), [0x32, 0x00]); // field 6
    let map = ApbUpdateOperation { mapop: Some(ApbMapUpdate::default()), ..Default::default() };
    assert_eq!(bytes(&map), [0x2a, 0x00]); // field 5
    let reg = ApbUpdateOperation { regop: Some(ApbRegUpdate { value: b"v".to_vec() }), ..Default::default() };
    assert_eq!(bytes(&reg), [0x1a, 0x03, 0x0a, 0x01, b'v']); // field 3
}

#[test]
fn set_update_fields_are_optype_1_adds_2_rems_3() {
    let m = ApbSetUpdate {
        optype: apb_set_update::SetOpType::REMOVE as i32,
        adds: vec![b"a".to_vec()],
        rems: vec![b"x".to_vec()],
    };
    assert_eq!(bytes(&m), [0x08, 0x02, 0x12, 0x01, b'a', 0x1a, 0x01, b'x']);
}

#[test]
fn map_messages_use_removed_keys_2_and_entry_value_2() {
    let key = ApbMapKey { key: b"a".to_vec(), r#type: CRDT_type::RRMAP as i32 };
    assert_eq!(bytes(&key), [0x0a, 0x01, b'a', 0x10, 0x0b]);
    let update = ApbMapUpdate { updates: vec![], removedKeys: vec![key.clone()] };
    assert_eq!(bytes(&update), [0x12, 0x05, 0x0a, 0x01, b'a', 0x10, 0x0b]);
    let entry = ApbMapEntry {
        key,
        value: ApbReadObjectResp { flag: Some(ApbGetFlagResp { value: true }), ..Default::default() },
    };
    assert_eq!(bytes(&entry), [0x0a, 0x05, 0x0a, 0x01, b'a', 0x10, 0x0b, 0x12, 0x04, 0x3a, 0x02, 0x08, 0x01]);
}

#[test]
fn read_object_resp_fields_skip_number_5() {
    let map = ApbReadObjectResp { map: Some(ApbGetMapResp::default()), ..Default::default() };
    assert_eq!(bytes(&map), [0x32, 0x00]);
    let mvreg =
        ApbReadObjectResp { mvreg: Some(ApbGetMVRegResp { values: vec![b"m".to_vec()] }), ..Default::default() };
    assert_eq!(bytes(&mvreg), [0x22, 0x03, 0x0a, 0x01, b'm']);
}

#[test]
fn error_and_static_read_responses_have_their_field_numbers() {
    let m = ApbErrorResp { errmsg: b"no".to_vec(), errcode: 3 };
    assert_eq!(bytes(&m), [0x0a, 0x02, b'n', b'o', 0x10, 0x03]);
    let m = ApbStaticReadObjectsResp {
        objects: ApbReadObjectsResp { success: true, objects: vec![], errorcode: None },
        committime: ApbCommitResp { success: true, commit_time: Some(vec![1, 0, 0]), errorcode: None },
    };
    assert_eq!(bytes(&m), [0x0a, 0x02, 0x08, 0x01, 0x12, 0x07, 0x08, 0x01, 0x12, 0x03, 0x01, 0x00, 0x00]);
    let m = ApbValidateOrReadObjectsResp { success: false, objects: vec![], tokens: vec![], errorcode: Some(0) };
    assert_eq!(bytes(&m), [0x08, 0x00, 0x20, 0x00]);
    let m = ApbGetConnectionDescriptorResp { success: false, descriptor: Some(b"d".to_vec()), errorcode: Some(0) };
    assert_eq!(bytes(&m), [0x08, 0x00, 0x12, 0x01, b'd', 0x18, 0x00]);
}

#[test]
fn transaction_messages_have_their_field_numbers() {
    let m = ApbStartTransaction {
        timestamp: None,
        properties: Some(ApbTxnProperties { read_write: Some(1), ..Default::default() }),
    };
    assert_eq!(bytes(&m), [0x12, 0x02, 0x08, 0x01]);
    let m = ApbTxnProperties {
        read_write: None,
        red_blue: Some(1),
        shared_locks: vec![b"s".to_vec()],
        exclusive_locks: vec![b"x".to_vec()],
        read_from: None,
    };
    assert_eq!(bytes(&m), [0x10, 0x01, 0x1a, 0x01, b's', 0x22, 0x01, b'x']);
    // Causet's extension: field 100, varint (key 100 << 3 = 800 = 0xa0 0x06).
    let m = ApbTxnProperties { read_from: Some(1), ..Default::default() };
    assert_eq!(bytes(&m), [0xa0, 0x06, 0x01]);
    let m = ApbValidateOrReadObjects {
        boundobjects: vec![],
        object_tokens: vec![b"t".to_vec()],
        transaction_descriptor: b"d".to_vec(),
    };
    assert_eq!(bytes(&m), [0x12, 0x01, b't', 0x1a, 0x01, b'd']);
    let m = ApbStaticUpdateObjects { transaction: ApbStartTransaction::default(), updates: vec![] };
    assert_eq!(bytes(&m), [0x0a, 0x00]);
    assert_eq!(bytes(&ApbCreateDC { nodes: vec!["n".into()] }), [0x0a, 0x01, b'n']);
}

#[test]
fn a_frame_is_length_then_code_then_message() {
    let frame = encode_frame(
        MessageCode::ApbCommitTransaction,
        &ApbCommitTransaction { transaction_descriptor: b"t".to_vec() },
    );
    assert_eq!(&frame[..], [0x00, 0x00, 0x00, 0x04, 121, 0x0a, 0x01, b't']);
}

#[test]
fn message_codes_are_antidotedbs() {
    let expected: &[(u8, &str)] = &[
        (0, "ApbErrorResp"),
        (107, "ApbRegUpdate"),
        (108, "ApbGetRegResp"),
        (109, "ApbCounterUpdate"),
        (110, "ApbGetCounterResp"),
        (111, "ApbOperationResp"),
        (112, "ApbSetUpdate"),
        (113, "ApbGetSetResp"),
        (114, "ApbTxnProperties"),
        (115, "ApbBoundObject"),
        (116, "ApbReadObjects"),
        (117, "ApbUpdateOp"),
        (118, "ApbUpdateObjects"),
        (119, "ApbStartTransaction"),
        (120, "ApbAbortTransaction"),
        (121, "ApbCommitTransaction"),
        (122, "ApbStaticUpdateObjects"),
        (123, "ApbStaticReadObjects"),
        (124, "ApbStartTransactionResp"),
        (125, "ApbReadObjectResp"),
        (126, "ApbReadObjectsResp"),
        (127, "ApbCommitResp"),
        (128, "ApbStaticReadObjectsResp"),
        (129, "ApbCreateDC"),
        (130, "ApbCreateDCResp"),
        (131, "ApbConnectToDCs"),
        (132, "ApbConnectToDCsResp"),
        (133, "ApbGetConnectionDescriptor"),
        (134, "ApbGetConnectionDescriptorResp"),
        (135, "ApbValidateOrReadObjects"),
        (136, "ApbValidateOrReadObjectsResp"),
    ];
    assert_eq!(MessageCode::ALL.len(), expected.len());
    for (code, name) in expected {
        let c = MessageCode::from_u8(*code).expect("known");
        assert_eq!((c.as_u8(), c.name()), (*code, *name));
        assert_eq!(MessageCode::try_from(*code), Ok(c));
    }
    assert_eq!(MessageCode::try_from(137), Err(137));
}

#[test]
fn crdt_type_numbers_are_antidotedbs() {
    let expected = [
        (CRDT_type::COUNTER, 3),
        (CRDT_type::ORSET, 4),
        (CRDT_type::LWWREG, 5),
        (CRDT_type::MVREG, 6),
        (CRDT_type::GMAP, 8),
        (CRDT_type::RWSET, 10),
        (CRDT_type::RRMAP, 11),
        (CRDT_type::FATCOUNTER, 12),
        (CRDT_type::FLAG_EW, 13),
        (CRDT_type::FLAG_DW, 14),
        (CRDT_type::BCOUNTER, 15),
    ];
    for (ty, n) in expected {
        assert_eq!(ty as i32, n);
        assert_eq!(CRDT_type::try_from(n), Ok(ty));
    }
    for n in [0, 1, 2, 7, 9, 16, -1] {
        assert!(CRDT_type::try_from(n).is_err());
    }
}

fn check<M: Message + Default + PartialEq + std::fmt::Debug>(m: M) {
    let decoded = M::decode(&m.encode_to_vec()[..]).expect("decodes");
    assert_eq!(decoded, m);
}

#[test]
fn every_message_encodes_and_decodes() {
    let key = ApbMapKey { key: b"k".to_vec(), r#type: CRDT_type::MVREG as i32 };
    let bound = ApbBoundObject { key: b"o".to_vec(), r#type: CRDT_type::RRMAP as i32, bucket: b"b".to_vec() };
    let counter_op = ApbUpdateOperation { counterop: Some(ApbCounterUpdate { inc: Some(-9) }), ..Default::default() };
    let set_update = ApbSetUpdate {
        optype: apb_set_update::SetOpType::ADD as i32,
        adds: vec![b"a".to_vec(), b"b".to_vec()],
        rems: vec![b"c".to_vec()],
    };
    let nested = ApbMapNestedUpdate { key: key.clone(), update: counter_op.clone() };
    let map_update = ApbMapUpdate { updates: vec![nested.clone()], removedKeys: vec![key.clone()] };
    let operation = ApbUpdateOperation {
        counterop: Some(ApbCounterUpdate { inc: None }),
        setop: Some(set_update.clone()),
        regop: Some(ApbRegUpdate { value: b"r".to_vec() }),
        mapop: Some(map_update.clone()),
        resetop: Some(ApbCrdtReset {}),
        flagop: Some(ApbFlagUpdate { value: false }),
    };
    let update_op = ApbUpdateOp { boundobject: bound.clone(), operation: operation.clone() };
    let properties = ApbTxnProperties {
        read_write: Some(2),
        red_blue: Some(0),
        shared_locks: vec![b"s".to_vec()],
        exclusive_locks: vec![],
        read_from: Some(1),
    };
    let start = ApbStartTransaction { timestamp: Some(vec![1, 0, 0]), properties: Some(properties.clone()) };
    let leaf = ApbReadObjectResp {
        counter: Some(ApbGetCounterResp { value: i32::MIN }),
        set: Some(ApbGetSetResp { value: vec![b"e".to_vec()] }),
        reg: Some(ApbGetRegResp { value: b"v".to_vec() }),
        mvreg: Some(ApbGetMVRegResp { values: vec![b"1".to_vec(), b"2".to_vec()] }),
        map: None,
        flag: Some(ApbGetFlagResp { value: true }),
    };
    let entry = ApbMapEntry { key: key.clone(), value: leaf.clone() };
    let read_resp =
        ApbReadObjectResp { map: Some(ApbGetMapResp { entries: vec![entry.clone()] }), ..Default::default() };
    let objects_resp =
        ApbReadObjectsResp { success: true, objects: vec![read_resp.clone(), leaf.clone()], errorcode: Some(1) };
    let commit_resp = ApbCommitResp { success: true, commit_time: Some(vec![1, 2]), errorcode: Some(3) };

    check(ApbErrorResp { errmsg: b"m".to_vec(), errcode: 2 });
    check(ApbCounterUpdate { inc: Some(i64::MIN) });
    check(ApbGetCounterResp { value: i32::MAX });
    check(set_update);
    check(ApbGetSetResp { value: vec![vec![], b"x".to_vec()] });
    check(ApbRegUpdate { value: vec![0, 255] });
    check(ApbGetRegResp { value: vec![] });
    check(ApbGetMVRegResp { values: vec![b"a".to_vec()] });
    check(key.clone());
    check(map_update);
    check(nested);
    check(ApbGetMapResp { entries: vec![entry.clone()] });
    check(entry);
    check(ApbFlagUpdate { value: true });
    check(ApbGetFlagResp { value: false });
    check(ApbCrdtReset {});
    check(ApbOperationResp { success: false, errorcode: Some(0) });
    check(properties);
    check(bound.clone());
    check(ApbReadObjects { boundobjects: vec![bound.clone()], transaction_descriptor: b"d".to_vec() });
    check(ApbValidateOrReadObjects {
        boundobjects: vec![bound.clone()],
        object_tokens: vec![b"t".to_vec()],
        transaction_descriptor: b"d".to_vec(),
    });
    check(update_op.clone());
    check(operation);
    check(ApbUpdateObjects { updates: vec![update_op.clone()], transaction_descriptor: b"d".to_vec() });
    check(start.clone());
    check(ApbAbortTransaction { transaction_descriptor: b"d".to_vec() });
    check(ApbCommitTransaction { transaction_descriptor: b"d".to_vec() });
    check(ApbStaticUpdateObjects { transaction: start.clone(), updates: vec![update_op] });
    check(ApbStaticReadObjects { transaction: start, objects: vec![bound] });
    check(ApbStartTransactionResp { success: true, transaction_descriptor: Some(b"d".to_vec()), errorcode: None });
    check(read_resp.clone());
    check(objects_resp.clone());
    check(ApbValidateOrReadObjectsResp {
        success: true,
        objects: vec![read_resp],
        tokens: vec![b"t".to_vec()],
        errorcode: Some(0),
    });
    check(commit_resp.clone());
    check(ApbStaticReadObjectsResp { objects: objects_resp, committime: commit_resp });
    check(ApbCreateDC { nodes: vec!["antidote@a".into(), "antidote@b".into()] });
    check(ApbCreateDCResp { success: true, errorcode: None });
    check(ApbGetConnectionDescriptor {});
    check(ApbGetConnectionDescriptorResp { success: true, descriptor: Some(vec![0x21]), errorcode: None });
    check(ApbConnectToDCs { descriptors: vec![vec![1], vec![2]] });
    check(ApbConnectToDCsResp { success: false, errorcode: Some(3) });
}
