//! Frames exactly as AntidoteDB's Python client (`antidotedb` 0.1.3, with the `protobuf` 3.20 runtime) writes them,
//! captured from its `sendMessage`, decode into the requests it means.

use bytes::BytesMut;
use causet_core::coordinator::ClientRequest;
use causet_core::{CoordinatorId, DcId, ObjectId, Timestamp, TxId, VectorClock};
use causet_crdt::{CrdtType, MapKey, Op};
use causet_wire::{decode_frame, decode_request, Request};

fn decode_hex(hex: &str) -> Request {
    let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect();
    let mut buf = BytesMut::from(&bytes[..]);
    let frame = decode_frame(&mut buf, 1 << 20).unwrap().expect("a whole frame");
    assert!(buf.is_empty());
    decode_request(&frame).expect("the Python client's request decodes")
}

#[test]
fn start_transaction_with_default_properties() {
    // AntidoteClient.start_transaction(): properties {read_write: 0, red_blue: 0}, no timestamp.
    assert_eq!(
        decode_hex("0000000777120408001000"),
        Request::Client(ClientRequest::Start { clock: None, reads: Default::default() })
    );
}

#[test]
fn update_objects_with_counter_and_map_operations() {
    // InteractiveTransaction.update_objects([Counter.IncOp(hits, -3), Map.UpdateOp(m, [Set.AddOp(b"s", [b"e"],
    // "ORSET")]), Map.RemoveOp(m, [Key("", "s", "ORSET")])]) with a Causet descriptor for tx 0.1.2.
    let request = decode_hex(concat!(
        "00000062760a130a0b0a046869747310031a016212040a0208050a200a080a016d100b1a016212142a120a100a050a017310041207",
        "120508011201650a150a080a016d100b1a016212092a0712050a0173100412111100000000000100000000000000020000"
    ));
    let map = ObjectId::new("m", "b", CrdtType::MapRr);
    let s = MapKey { key: b"s".to_vec(), ty: CrdtType::SetAw };
    assert_eq!(
        request,
        Request::Client(ClientRequest::Update {
            tx: TxId { dc: DcId(0), coordinator: CoordinatorId(1), seq: 2 },
            updates: vec![
                (ObjectId::new("hits", "b", CrdtType::CounterPn), Op::Increment(-3)),
                (map.clone(), Op::MapUpdate(vec![(s.clone(), Op::Add(vec![b"e".to_vec()]))])),
                (map, Op::MapRemove(vec![s])),
            ],
        })
    );
}

#[test]
fn static_read_with_a_min_snapshot() {
    // StaticTransaction(min_snapshot=<Causet clock [5]>).read_objects([Key("b", "f", "FLAG_EW")]).
    assert_eq!(
        decode_hex("000000207b0a130a0b010001000000000000000512040801100012080a0166100d1a0162"),
        Request::Client(ClientRequest::StaticRead {
            clock: Some(VectorClock::from_entries(vec![Timestamp(5)]).into()),
            objects: vec![ObjectId::new("f", "b", CrdtType::FlagEw)],
            reads: Default::default(),
        })
    );
}
