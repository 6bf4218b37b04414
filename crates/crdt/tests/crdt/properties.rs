//! Every type, three replicas, random operations and causal delivery: every replica agrees with the
//! specification at every step, and all converge to the same state.

use crate::sim::Sim;
use crate::strategies::{flush_picks, steps};
use causet_crdt::{Crdt, CrdtType, Effect};
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
