//! Starting inputs for each target: valid encodings produced by the project's own encoders, so that mutations
//! reach past the first checks of each decoder.

use causet_core::coordinator::{BufferToken, ClientClock, ReadFrom};
use causet_core::{CoordinatorId, DcId, ObjectId, Timestamp, TxId, VectorClock};
use causet_crdt::{Crdt, CrdtType, Effect, EffectCtx, MapKey, Op, Stamp, TxTag};
use causet_wire::request::{
    encode_abort, encode_commit, encode_read, encode_start, encode_static_read, encode_static_update, encode_update,
};
use causet_wire::TxDescriptor;

/// An operation of each kind that fits `ty`.
fn ops_for(ty: CrdtType) -> Vec<Op> {
    let elems = || vec![b"a".to_vec(), b"bc".to_vec()];
    match ty {
        CrdtType::CounterPn | CrdtType::CounterFat => vec![Op::Increment(5), Op::Increment(-3), Op::Reset],
        CrdtType::CounterB => vec![Op::Increment(7), Op::Increment(-1), Op::Transfer { amount: 2, to: 1 }],
        CrdtType::SetAw | CrdtType::SetRw | CrdtType::SetGo => {
            vec![Op::Add(elems()), Op::Remove(vec![b"a".to_vec()]), Op::Reset]
        }
        CrdtType::RegisterLww | CrdtType::RegisterMv => vec![Op::Assign(b"value".to_vec()), Op::Reset],
        CrdtType::FlagEw | CrdtType::FlagDw => vec![Op::Enable, Op::Disable, Op::Reset],
        CrdtType::MapGo | CrdtType::MapRr => {
            let set = MapKey { key: b"s".to_vec(), ty: CrdtType::SetAw };
            let counter = MapKey { key: b"c".to_vec(), ty: CrdtType::CounterFat };
            let inner = MapKey { key: b"m".to_vec(), ty: CrdtType::MapRr };
            vec![
                Op::MapUpdate(vec![(set.clone(), Op::Add(elems())), (counter.clone(), Op::Increment(2))]),
                Op::MapUpdate(vec![(inner, Op::MapUpdate(vec![(set.clone(), Op::Add(elems()))]))]),
                Op::MapRemove(vec![set, counter]),
                Op::Reset,
            ]
        }
    }
}

/// For every type, a few states (built by applying generated effects) and the effects that built them.
fn states_and_effects() -> Vec<(Crdt, Vec<Effect>)> {
    let mut out = Vec::new();
    for (t, ty) in CrdtType::ALL.into_iter().enumerate() {
        let mut crdt = Crdt::new(ty);
        let mut effects = Vec::new();
        let mut ctx = EffectCtx::new(TxTag(t as u128 + 1), 0);
        for (i, op) in ops_for(ty).iter().enumerate() {
            if let Ok(effect) = crdt.generate(op, &mut ctx) {
                if crdt.apply(&effect, Stamp { time: i as u128 + 1, tx: TxTag(t as u128 + 1) }).is_ok() {
                    effects.push(effect);
                }
            }
        }
        out.push((crdt, effects));
    }
    out
}

fn objects() -> Vec<ObjectId> {
    vec![
        ObjectId::new("k", "b", CrdtType::SetAw),
        ObjectId::new("counter", "bucket", CrdtType::CounterPn),
        ObjectId::new("m", "b", CrdtType::MapRr),
        ObjectId::new(vec![0u8, 255], vec![], CrdtType::RegisterLww),
    ]
}

fn updates() -> Vec<(ObjectId, Op)> {
    let mut out = Vec::new();
    for ty in CrdtType::ALL {
        for op in ops_for(ty) {
            out.push((ObjectId::new(format!("k{}", ty.name()), "b", ty), op));
        }
    }
    out
}

/// Whole request frames (length prefix included), one or more of each kind.
fn request_frames() -> Vec<Vec<u8>> {
    let vector = VectorClock::from_entries(vec![Timestamp(1 << 20), Timestamp(0), Timestamp(u64::MAX >> 1)]);
    let clock = ClientClock::from(vector.clone());
    // A clock naming two write buffers (format 0x02), in the static read's frame.
    let token = BufferToken { dc: DcId(1), coordinator: CoordinatorId(0x0004_0003) };
    let with_token = ClientClock { vector, tokens: vec![token, BufferToken { dc: DcId(0), ..token }] };
    let tx = TxDescriptor {
        tx: TxId { dc: DcId(1), coordinator: CoordinatorId(2), seq: 3 },
        snapshot: clock.vector.clone(),
        token: Some(token),
    };
    let updates = updates();
    let mut frames = vec![
        encode_start(None, ReadFrom::Leader),
        encode_start(Some(&clock), ReadFrom::Leader),
        encode_start(Some(&clock), ReadFrom::Nearest),
        encode_read(&tx, &objects()),
        encode_update(&tx, &updates[..4]),
        encode_update(&tx, &updates),
        encode_commit(&tx),
        encode_abort(&tx),
        encode_static_read(Some(&with_token), &objects(), ReadFrom::Leader),
        encode_static_read(None, &objects(), ReadFrom::Nearest),
        encode_static_update(None, &updates),
    ];
    frames.extend(updates.iter().map(|u| encode_static_update(Some(&clock), std::slice::from_ref(u))));
    frames.into_iter().filter_map(Result::ok).map(|b| b.to_vec()).collect()
}

/// The starting inputs of the target `name`.
pub fn seeds(name: &str) -> Vec<Vec<u8>> {
    match name {
        "frame" => {
            let frames = request_frames();
            let stream: Vec<u8> = frames.iter().take(6).flatten().copied().collect();
            let mut out = vec![vec![0x0f], [&[0x3f][..], &stream].concat(), [&[0xf8][..], &stream].concat()];
            out.extend(frames.iter().map(|f| [&[0x2c][..], f].concat()));
            out
        }
        // Code byte and body: the frame without its length prefix.
        "request" => request_frames().into_iter().map(|f| f[4..].to_vec()).collect(),
        "effect" => states_and_effects().into_iter().flat_map(|(_, effects)| effects).map(|e| e.encode()).collect(),
        "state" => {
            let mut out = Vec::new();
            for (crdt, effects) in states_and_effects() {
                let state = crdt.encode();
                out.push([&[0u8][..], &state].concat());
                for e in effects {
                    let e = e.encode();
                    if e.len() <= 255 {
                        out.push([&[e.len() as u8][..], &state, &e].concat());
                    }
                }
            }
            out
        }
        _ => Vec::new(),
    }
}
