//! Every type, three replicas, random operations and causal delivery: every replica agrees with the
//! specification at every step, and all converge to the same state.

use crate::sim::Sim;
use crate::strategies::{flush_picks, steps};
use causet_crdt::{Crdt, CrdtType, Effect, EffectCtx, Op, Stamp, TxTag};
use proptest::prelude::*;

const STEPS_MAX: usize = 80;

fn config() -> ProptestConfig {
    ProptestConfig { cases: 256, ..ProptestConfig::default() }
}

macro_rules! convergence_property {
    ($($name:ident: $ty:expr;)*) => {$(
        proptest! {
            #![proptest_config(config())]
            #[test]
            fn $name(steps in steps($ty, STEPS_MAX), picks in flush_picks()) {
                Sim::run($ty, &steps, &picks);
            }
        }
    )*};
}

convergence_property! {
    counter_pn_replicas_converge_to_the_sum_of_increments: CrdtType::CounterPn;
    counter_fat_replicas_converge_to_the_increments_no_reset_saw: CrdtType::CounterFat;
    counter_b_replicas_converge_and_never_go_negative: CrdtType::CounterB;
    set_aw_replicas_converge_to_add_wins: CrdtType::SetAw;
    set_rw_replicas_converge_to_remove_wins: CrdtType::SetRw;
    set_go_replicas_converge_to_the_union_of_adds: CrdtType::SetGo;
    register_lww_replicas_converge_to_the_largest_stamp: CrdtType::RegisterLww;
    register_mv_replicas_converge_to_the_assigns_not_superseded: CrdtType::RegisterMv;
    flag_ew_replicas_converge_to_enable_wins: CrdtType::FlagEw;
    flag_dw_replicas_converge_to_disable_wins: CrdtType::FlagDw;
    map_go_replicas_converge_to_the_nested_specifications: CrdtType::MapGo;
    map_rr_replicas_converge_to_the_nested_specifications_with_recursive_reset: CrdtType::MapRr;
}

fn any_type() -> impl Strategy<Value = CrdtType> {
    prop::sample::select(CrdtType::ALL.to_vec())
}

proptest! {
    #![proptest_config(config())]

    /// Every state a run reaches and every effect it generates decode back to themselves.
    #[test]
    fn encode_decode_round_trips_states_and_effects_of_every_type(
        (ty, steps) in any_type().prop_flat_map(|ty| (Just(ty), steps(ty, 30))),
        picks in flush_picks(),
    ) {
        let sim = Sim::run(ty, &steps, &picks);
        for replica in &sim.replicas {
            prop_assert_eq!(Crdt::decode(&replica.state.encode()), Ok(replica.state.clone()));
        }
        for record in &sim.records {
            prop_assert_eq!(Effect::decode(&record.effect.encode()), Ok(record.effect.clone()));
        }
    }
}

/// Folds a buffer of effects the way a cache's write buffer does: each effect into the one before it when
/// [`Effect::absorb`] allows, else kept after it.
fn fold(effects: &[Effect]) -> Vec<Effect> {
    let mut folded: Vec<Effect> = Vec::new();
    for effect in effects {
        if !folded.last_mut().is_some_and(|last| last.absorb(effect)) {
            folded.push(effect.clone());
        }
    }
    folded
}

/// Generates `ops` in order against `state`, each applied at `stamp` (skipping refused ones), with transaction
/// tags from `tag` on; one transaction per op unless `seq` carries sequence numbers on (a buffer's transactions).
fn generate_all(state: &mut Crdt, ops: &[Op], tag: u128, stamp: impl Fn(u128) -> Stamp, seq: &mut u32) -> Vec<Effect> {
    generate_rewound(state, ops, tag, stamp, seq, &[])
}

/// [`generate_all`], where transaction `i` starts its sequence numbers `rewind[i]` below where the previous one
/// ended: a buffer's concurrent transactions, each numbered from where the buffer stood when it started.
fn generate_rewound(
    state: &mut Crdt,
    ops: &[Op],
    tag: u128,
    stamp: impl Fn(u128) -> Stamp,
    seq: &mut u32,
    rewind: &[u32],
) -> Vec<Effect> {
    let mut effects = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let tx = TxTag(tag + i as u128);
        let back = rewind.get(i).copied().unwrap_or(0);
        let mut ctx = EffectCtx { tx, dc: 0, next_seq: seq.saturating_sub(back) };
        if let Ok(effect) = state.generate(op, &mut ctx) {
            state.apply(&effect, stamp(tx.0)).expect("a generated effect applies");
            effects.push(effect);
            *seq = (*seq).max(ctx.next_seq);
        }
    }
    effects
}

proptest! {
    #![proptest_config(config())]

    /// A write buffer's effects, generated one transaction after another against the cached copy (each seeing the
    /// earlier ones) and committed together at one stamp, give the same value folded as unfolded — whether an
    /// effect from another node, generated against the same base, lands before or after them, and whichever stamp
    /// wins — and the value the cached copy showed is the value the commit makes when nothing else interleaves.
    /// Transactions may number their effects below earlier ones (`rewind`: concurrent transactions of the buffer,
    /// which started before the earlier ones were buffered); found by the simulator, where a last-writer-wins
    /// assign with a lower number folded over a higher one and the higher one's value was lost.
    #[test]
    fn folding_a_write_buffer_changes_no_value(
        (ty, base, concurrent, buffered) in any_type().prop_flat_map(|ty| (
            Just(ty),
            prop::collection::vec(crate::strategies::op(ty, 0), 0..8),
            prop::collection::vec(crate::strategies::op(ty, 0), 0..3),
            prop::collection::vec(crate::strategies::op(ty, 0), 1..12),
        )),
        concurrent_first in any::<bool>(),
        concurrent_later in any::<bool>(),
        rewind in prop::collection::vec(prop_oneof![3 => Just(0u32), 1 => 1u32..4], 12),
    ) {
        let mut seq = 0;
        let mut start = Crdt::new(ty);
        generate_all(&mut start, &base, 1, |t| Stamp { time: t, tx: TxTag(t) }, &mut 0);
        let mut other = start.clone();
        let concurrent = generate_all(&mut other, &concurrent, 1000, |_| Stamp::PENDING, &mut 0);
        let mut cached = start.clone();
        let buffer = generate_rewound(&mut cached, &buffered, 2000, |_| Stamp::PENDING, &mut seq, &rewind);
        let folded = fold(&buffer);
        prop_assert!(folded.len() <= buffer.len());
        let handover = Stamp { time: 600, tx: TxTag(3000) };
        let elsewhere = Stamp { time: if concurrent_later { 700 } else { 500 }, tx: TxTag(1000) };
        let commit = |effects: &[Effect], with_concurrent: bool| {
            let mut state = start.clone();
            if with_concurrent && concurrent_first {
                concurrent.iter().for_each(|e| state.apply(e, elsewhere).expect("applies"));
            }
            effects.iter().for_each(|e| state.apply(e, handover).expect("applies"));
            if with_concurrent && !concurrent_first {
                concurrent.iter().for_each(|e| state.apply(e, elsewhere).expect("applies"));
            }
            state.value()
        };
        prop_assert_eq!(commit(&folded, true), commit(&buffer, true), "{:?} folded into {:?}", buffer, folded);
        prop_assert_eq!(commit(&folded, false), cached.value(), "the cache showed what the commit makes");
    }
}

#[test]
fn counter_increments_fold_but_never_across_a_reset() {
    let mut state = Crdt::new(CrdtType::CounterFat);
    let ops = [Op::Increment(2), Op::Increment(3), Op::Reset, Op::Increment(4), Op::Increment(0), Op::Increment(1)];
    let effects = generate_all(&mut state, &ops, 1, |_| Stamp::PENDING, &mut 0);
    let folded = fold(&effects);
    assert_eq!(folded.len(), 3, "2+3, the reset, 4+0+1: {folded:?}");
    let mut pn = Crdt::new(CrdtType::CounterPn);
    let effects = generate_all(
        &mut pn,
        &[Op::Increment(i64::MAX), Op::Increment(1), Op::Increment(-5)],
        1,
        |_| Stamp::PENDING,
        &mut 0,
    );
    assert_eq!(fold(&effects).len(), 2, "a sum past i64 is not folded");
    let mut sets = Crdt::new(CrdtType::SetAw);
    let ops = [Op::Add(vec![b"a".to_vec()]), Op::Add(vec![b"b".to_vec()])];
    let effects = generate_all(&mut sets, &ops, 1, |_| Stamp::PENDING, &mut 0);
    assert_eq!(fold(&effects).len(), 2, "sets never fold");
}
