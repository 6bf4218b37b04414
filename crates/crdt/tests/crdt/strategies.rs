//! Random operations for each type, over small domains so that operations often conflict.

use crate::sim::{Step, REPLICAS};
use causet_crdt::{CrdtType, MapKey, Op};
use proptest::prelude::*;
use proptest::sample::{select, subsequence};

fn element() -> impl Strategy<Value = Vec<u8>> {
    select(vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()])
}

fn elements() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(element(), 0..3)
}

fn register_value() -> impl Strategy<Value = Vec<u8>> {
    select(vec![b"x".to_vec(), b"y".to_vec(), b"z".to_vec(), Vec::new()])
}

fn key(name: &str, ty: CrdtType) -> MapKey {
    MapKey { key: name.as_bytes().to_vec(), ty }
}

/// The keys the maps in the tests use: a few nested types, and one nested map at the top level.
pub fn map_keys(ty: CrdtType, depth: usize) -> Vec<MapKey> {
    match (ty, depth) {
        (CrdtType::MapGo, 0) => vec![
            key("a", CrdtType::CounterPn),
            key("b", CrdtType::SetAw),
            key("c", CrdtType::RegisterLww),
            key("d", CrdtType::MapGo),
        ],
        (CrdtType::MapGo, _) => vec![key("a", CrdtType::CounterPn), key("e", CrdtType::CounterB)],
        (CrdtType::MapRr, 0) => vec![
            key("a", CrdtType::SetAw),
            key("b", CrdtType::CounterFat),
            key("c", CrdtType::FlagDw),
            key("d", CrdtType::RegisterMv),
            key("e", CrdtType::MapRr),
        ],
        (_, _) => vec![key("a", CrdtType::SetRw), key("b", CrdtType::FlagEw)],
    }
}

fn map_update(ty: CrdtType, depth: usize) -> BoxedStrategy<Op> {
    subsequence(map_keys(ty, depth), 1..=2)
        .prop_flat_map(move |keys| {
            keys.into_iter().map(|key| op(key.ty, depth + 1).prop_map(move |op| (key.clone(), op))).collect::<Vec<_>>()
        })
        .prop_map(Op::MapUpdate)
        .boxed()
}

/// An operation the type accepts (a bounded counter may still refuse it for want of rights).
pub fn op(ty: CrdtType, depth: usize) -> BoxedStrategy<Op> {
    match ty {
        CrdtType::CounterPn => (-5i64..=5).prop_map(Op::Increment).boxed(),
        CrdtType::CounterFat => prop_oneof![3 => (-5i64..=5).prop_map(Op::Increment), 1 => Just(Op::Reset)].boxed(),
        CrdtType::CounterB => prop_oneof![
            2 => (1i64..=5).prop_map(Op::Increment),
            2 => (1i64..=6).prop_map(|n| Op::Increment(-n)),
            1 => (1u64..=4, 0..REPLICAS as u16).prop_map(|(amount, to)| Op::Transfer { amount, to }),
        ]
        .boxed(),
        CrdtType::SetAw | CrdtType::SetRw => prop_oneof![
            2 => elements().prop_map(Op::Add),
            2 => elements().prop_map(Op::Remove),
            1 => Just(Op::Reset),
        ]
        .boxed(),
        CrdtType::SetGo => elements().prop_map(Op::Add).boxed(),
        CrdtType::RegisterLww => register_value().prop_map(Op::Assign).boxed(),
        CrdtType::RegisterMv => prop_oneof![3 => register_value().prop_map(Op::Assign), 1 => Just(Op::Reset)].boxed(),
        CrdtType::FlagEw | CrdtType::FlagDw => {
            prop_oneof![Just(Op::Enable), Just(Op::Disable), Just(Op::Reset)].boxed()
        }
        CrdtType::MapGo => map_update(ty, depth),
        CrdtType::MapRr => {
            let keys = map_keys(ty, depth);
            prop_oneof![
                4 => map_update(ty, depth),
                2 => subsequence(keys, 1..=2).prop_map(Op::MapRemove),
                1 => Just(Op::Reset),
            ]
            .boxed()
        }
    }
}

/// A run's steps: operations at random replicas interleaved with deliveries.
pub fn steps(ty: CrdtType, max_len: usize) -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        2 => (0..REPLICAS, op(ty, 0)).prop_map(|(replica, op)| Step::Generate { replica, op }),
        3 => (0..REPLICAS, any::<usize>()).prop_map(|(replica, pick)| Step::Deliver { replica, pick }),
    ];
    prop::collection::vec(step, 1..max_len)
}

/// The choices the final delivery of everything makes.
pub fn flush_picks() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(any::<usize>(), 1..8)
}
