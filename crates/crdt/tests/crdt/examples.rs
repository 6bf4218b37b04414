//! Hand-written examples of each type's conflict semantics and of the API's edges.

use causet_crdt::{
    requires_state, Crdt, CrdtError, CrdtType, DcIndex, Effect, EffectCtx, MapKey, Op, Stamp, TxTag, Value,
    MAX_NESTING_DEPTH,
};

fn stamp(time: u128, tx: u128) -> Stamp {
    Stamp { time, tx: TxTag(tx) }
}

/// Generates `op` against `state` in transaction `tx` at DC `dc`.
fn generate(state: &Crdt, op: Op, tx: u128, dc: DcIndex) -> Effect {
    state.generate(&op, &mut EffectCtx::new(TxTag(tx), dc)).expect("operation accepted")
}

/// `state` after applying the effects in order.
fn applied(state: &Crdt, effects: &[(&Effect, Stamp)]) -> Crdt {
    let mut state = state.clone();
    for (effect, stamp) in effects {
        state.apply(effect, *stamp).expect("types match");
    }
    state
}

/// Applies two concurrent effects in both orders, checks both orders agree, and returns the result.
fn both_orders(state: &Crdt, a: (&Effect, Stamp), b: (&Effect, Stamp)) -> Crdt {
    let ab = applied(state, &[a, b]);
    let ba = applied(state, &[b, a]);
    assert_eq!(ab, ba, "concurrent effects commute");
    ab
}

fn bytes(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn set(elements: &[&str]) -> Value {
    Value::Set(elements.iter().map(|e| bytes(e)).collect())
}

#[test]
fn set_aw_concurrent_add_and_remove_keeps_the_element() {
    let start = Crdt::new(CrdtType::SetAw);
    let added = applied(&start, &[(&generate(&start, Op::Add(vec![bytes("x")]), 1, 0), stamp(1, 1))]);
    let remove = generate(&added, Op::Remove(vec![bytes("x")]), 2, 0);
    let add = generate(&added, Op::Add(vec![bytes("x")]), 3, 1);
    assert_eq!(both_orders(&added, (&remove, stamp(2, 2)), (&add, stamp(2, 3))).value(), set(&["x"]));
    // Without the concurrent add, the remove removes.
    assert_eq!(applied(&added, &[(&remove, stamp(2, 2))]).value(), set(&[]));
}

#[test]
fn set_rw_concurrent_add_and_remove_drops_the_element() {
    let start = Crdt::new(CrdtType::SetRw);
    let added = applied(&start, &[(&generate(&start, Op::Add(vec![bytes("x")]), 1, 0), stamp(1, 1))]);
    let remove = generate(&added, Op::Remove(vec![bytes("x")]), 2, 0);
    let add = generate(&added, Op::Add(vec![bytes("x"), bytes("y")]), 3, 1);
    let merged = both_orders(&added, (&remove, stamp(2, 2)), (&add, stamp(2, 3)));
    assert_eq!(merged.value(), set(&["y"]));
    // A remove concurrent with the very first add also wins.
    let first_add = generate(&start, Op::Add(vec![bytes("z")]), 4, 0);
    let blind_remove = generate(&start, Op::Remove(vec![bytes("z")]), 5, 1);
    assert_eq!(both_orders(&start, (&first_add, stamp(1, 4)), (&blind_remove, stamp(1, 5))).value(), set(&[]));
}

#[test]
fn set_rw_add_after_remove_makes_the_element_present_again() {
    let start = Crdt::new(CrdtType::SetRw);
    let added = applied(&start, &[(&generate(&start, Op::Add(vec![bytes("x")]), 1, 0), stamp(1, 1))]);
    let removed = applied(&added, &[(&generate(&added, Op::Remove(vec![bytes("x")]), 2, 0), stamp(2, 2))]);
    assert_eq!(removed.value(), set(&[]));
    let readded = applied(&removed, &[(&generate(&removed, Op::Add(vec![bytes("x")]), 3, 0), stamp(3, 3))]);
    assert_eq!(readded.value(), set(&["x"]));
}

#[test]
fn set_resets_remove_only_what_they_saw() {
    for ty in [CrdtType::SetAw, CrdtType::SetRw] {
        let start = Crdt::new(ty);
        let added = applied(&start, &[(&generate(&start, Op::Add(vec![bytes("x"), bytes("y")]), 1, 0), stamp(1, 1))]);
        let reset = generate(&added, Op::Reset, 2, 0);
        let add = generate(&added, Op::Add(vec![bytes("z")]), 3, 1);
        assert_eq!(both_orders(&added, (&reset, stamp(2, 2)), (&add, stamp(2, 3))).value(), set(&["z"]), "{ty}");
    }
}

#[test]
fn set_go_only_adds() {
    let start = Crdt::new(CrdtType::SetGo);
    let added = applied(&start, &[(&generate(&start, Op::Add(vec![bytes("b"), bytes("a")]), 1, 0), stamp(1, 1))]);
    assert_eq!(added.value(), set(&["a", "b"]));
    let refused = added.generate(&Op::Remove(vec![bytes("a")]), &mut EffectCtx::new(TxTag(2), 0));
    assert_eq!(refused, Err(CrdtError::UnsupportedOp { ty: CrdtType::SetGo, op: "remove".into() }));
}

fn key(name: &str, ty: CrdtType) -> MapKey {
    MapKey { key: bytes(name), ty }
}

#[test]
fn map_rr_remove_keeps_a_concurrent_nested_update_and_drops_removed_only_entries() {
    let tags = key("tags", CrdtType::SetAw);
    let flag = key("flag", CrdtType::FlagEw);
    let start = Crdt::new(CrdtType::MapRr);
    let setup = Op::MapUpdate(vec![(tags.clone(), Op::Add(vec![bytes("a")])), (flag.clone(), Op::Enable)]);
    let filled = applied(&start, &[(&generate(&start, setup, 1, 0), stamp(1, 1))]);
    assert_eq!(filled.value(), Value::Map(vec![(flag.clone(), Value::Flag(true)), (tags.clone(), set(&["a"]))]));

    let remove = generate(&filled, Op::MapRemove(vec![tags.clone(), flag.clone()]), 2, 0);
    let update = generate(&filled, Op::MapUpdate(vec![(tags.clone(), Op::Add(vec![bytes("b")]))]), 3, 1);
    let merged = both_orders(&filled, (&remove, stamp(2, 2)), (&update, stamp(2, 3)));
    // The concurrent add of "b" survives the remove; "a", which the remove saw, does not; the flag, only removed,
    // disappears from the value and from the state.
    assert_eq!(merged.value(), Value::Map(vec![(tags.clone(), set(&["b"]))]));
    let Crdt::MapRr(map) = &merged else { panic!("a map_rr") };
    assert!(map.get(&flag).is_none());

    // Removing without a concurrent update leaves an empty map, at bottom.
    let removed = applied(&filled, &[(&remove, stamp(2, 2))]);
    assert_eq!(removed.value(), Value::Map(Vec::new()));
    assert!(removed.is_bottom());
    assert_eq!(removed, Crdt::new(CrdtType::MapRr));
}

#[test]
fn map_rr_reset_resets_every_entry_recursively() {
    let inner = key("inner", CrdtType::MapRr);
    let counter = key("n", CrdtType::CounterFat);
    let start = Crdt::new(CrdtType::MapRr);
    let nested = Op::MapUpdate(vec![(counter.clone(), Op::Increment(4))]);
    let filled =
        applied(&start, &[(&generate(&start, Op::MapUpdate(vec![(inner.clone(), nested)]), 1, 0), stamp(1, 1))]);
    let reset = generate(&filled, Op::Reset, 2, 0);
    let concurrent = generate(
        &filled,
        Op::MapUpdate(vec![(inner.clone(), Op::MapUpdate(vec![(counter.clone(), Op::Increment(1))]))]),
        3,
        1,
    );
    let merged = both_orders(&filled, (&reset, stamp(2, 2)), (&concurrent, stamp(2, 3)));
    assert_eq!(merged.value(), Value::Map(vec![(inner, Value::Map(vec![(counter, Value::Counter(1))]))]));
}

#[test]
fn map_rr_nests_types_without_reset_and_removing_them_leaves_them_as_they_are() {
    // AntidoteDB's map_rr accepts any nested type (its client tutorial nests a counter and an LWW register); a
    // remove resets what can be reset.
    let mut map = Crdt::new(CrdtType::MapRr);
    let mut ctx = EffectCtx::new(TxTag(1), 0);
    let (n, r) = (key("n", CrdtType::CounterPn), key("r", CrdtType::RegisterLww));
    let update = Op::MapUpdate(vec![(n.clone(), Op::Increment(2)), (r.clone(), Op::Assign(b"v".to_vec()))]);
    let effect = map.generate(&update, &mut ctx).expect("any nested type");
    map.apply(&effect, stamp(1, 1)).expect("applies");
    let remove = Op::MapRemove(vec![n.clone(), r.clone()]);
    let effect = map.generate(&remove, &mut ctx).expect("remove is accepted");
    map.apply(&effect, stamp(2, 1)).expect("applies");
    assert_eq!(map.value(), Value::Map(vec![(n, Value::Counter(2)), (r, Value::Register(b"v".to_vec()))]));
}

#[test]
fn map_go_shows_every_entry_and_nests_any_type() {
    let start = Crdt::new(CrdtType::MapGo);
    let counter = key("n", CrdtType::CounterPn);
    let register = key("r", CrdtType::RegisterLww);
    let empty = key("s", CrdtType::SetAw);
    let op = Op::MapUpdate(vec![
        (counter.clone(), Op::Increment(2)),
        (register.clone(), Op::Assign(bytes("v"))),
        (empty.clone(), Op::Add(Vec::new())),
    ]);
    let filled = applied(&start, &[(&generate(&start, op, 1, 0), stamp(1, 1))]);
    assert_eq!(
        filled.value(),
        Value::Map(vec![
            (counter, Value::Counter(2)),
            (register, Value::Register(bytes("v"))),
            (empty, Value::Set(Vec::new())),
        ])
    );
    let mut ctx = EffectCtx::new(TxTag(2), 0);
    assert_eq!(
        filled.generate(&Op::Reset, &mut ctx),
        Err(CrdtError::UnsupportedOp { ty: CrdtType::MapGo, op: "reset".into() })
    );
}

#[test]
fn map_update_naming_one_key_twice_is_refused() {
    let n = key("n", CrdtType::CounterFat);
    let op = Op::MapUpdate(vec![(n.clone(), Op::Increment(1)), (n, Op::Increment(2))]);
    for ty in [CrdtType::MapGo, CrdtType::MapRr] {
        let result = Crdt::new(ty).generate(&op, &mut EffectCtx::new(TxTag(1), 0));
        assert!(matches!(result, Err(CrdtError::InvalidArgument(_))), "{ty}: {result:?}");
    }
}

fn bcounter(state: &Crdt) -> &causet_crdt::BCounter {
    let Crdt::CounterB(counter) = state else { panic!("a counter_b") };
    counter
}

#[test]
fn counter_b_refuses_to_go_negative() {
    let start = Crdt::new(CrdtType::CounterB);
    let five = applied(&start, &[(&generate(&start, Op::Increment(5), 1, 0), stamp(1, 1))]);
    assert_eq!(five.value(), Value::Counter(5));
    let mut ctx = EffectCtx::new(TxTag(2), 0);
    assert_eq!(
        five.generate(&Op::Increment(-6), &mut ctx),
        Err(CrdtError::NoPermissions { dc: 0, requested: 6, available: 5 })
    );
    // DC 1 holds no rights, although the value is 5.
    let mut ctx = EffectCtx::new(TxTag(3), 1);
    assert_eq!(
        five.generate(&Op::Increment(-1), &mut ctx),
        Err(CrdtError::NoPermissions { dc: 1, requested: 1, available: 0 })
    );
    let zero = applied(&five, &[(&generate(&five, Op::Increment(-5), 4, 0), stamp(2, 4))]);
    assert_eq!(zero.value(), Value::Counter(0));
    assert_eq!(bcounter(&zero).local_rights(0), 0);
}

/// What spends a bounded counter's rights, also nested in a map: the effects a write buffer must not hold.
#[test]
fn only_decrements_and_transfers_spend_rights() {
    let start = Crdt::new(CrdtType::CounterB);
    let five = applied(&start, &[(&generate(&start, Op::Increment(5), 1, 0), stamp(1, 1))]);
    assert!(!generate(&five, Op::Increment(2), 2, 0).spends_rights());
    assert!(generate(&five, Op::Increment(-2), 2, 0).spends_rights());
    assert!(generate(&five, Op::Transfer { amount: 1, to: 1 }, 2, 0).spends_rights());
    assert!(!generate(&Crdt::new(CrdtType::CounterPn), Op::Increment(-2), 2, 0).spends_rights());
    let b = key("b", CrdtType::CounterB);
    let map = Crdt::new(CrdtType::MapGo);
    let up = Op::MapUpdate(vec![(b.clone(), Op::Increment(3))]);
    let filled = applied(&map, &[(&generate(&map, up.clone(), 3, 0), stamp(2, 3))]);
    assert!(!generate(&filled, up, 4, 0).spends_rights());
    assert!(generate(&filled, Op::MapUpdate(vec![(b, Op::Increment(-1))]), 5, 0).spends_rights());
}

#[test]
fn counter_b_transfer_moves_rights_so_the_other_dc_can_decrement() {
    let start = Crdt::new(CrdtType::CounterB);
    let five = applied(&start, &[(&generate(&start, Op::Increment(5), 1, 0), stamp(1, 1))]);
    let transfer = generate(&five, Op::Transfer { amount: 3, to: 1 }, 2, 0);
    let moved = applied(&five, &[(&transfer, stamp(2, 2))]);
    assert_eq!(moved.value(), Value::Counter(5), "a transfer does not change the value");
    assert_eq!((bcounter(&moved).local_rights(0), bcounter(&moved).local_rights(1)), (2, 3));
    let mut ctx = EffectCtx::new(TxTag(3), 1);
    assert_eq!(
        moved.generate(&Op::Increment(-4), &mut ctx),
        Err(CrdtError::NoPermissions { dc: 1, requested: 4, available: 3 })
    );
    let spent = applied(&moved, &[(&generate(&moved, Op::Increment(-3), 4, 1), stamp(3, 4))]);
    assert_eq!(spent.value(), Value::Counter(2));
    assert_eq!(bcounter(&spent).local_rights(1), 0);
    // Transferring more than one holds, or to oneself, is refused.
    let mut ctx = EffectCtx::new(TxTag(5), 0);
    assert!(matches!(
        spent.generate(&Op::Transfer { amount: 3, to: 1 }, &mut ctx),
        Err(CrdtError::NoPermissions { .. })
    ));
    assert!(matches!(spent.generate(&Op::Transfer { amount: 1, to: 0 }, &mut ctx), Err(CrdtError::InvalidArgument(_))));
}

#[test]
fn counter_b_validate_effect_refuses_double_spending_by_concurrent_transactions_of_one_dc() {
    let start = Crdt::new(CrdtType::CounterB);
    let five = applied(&start, &[(&generate(&start, Op::Increment(5), 1, 0), stamp(1, 1))]);
    // Two transactions of DC 0 each spend 4 of the same 5 rights, both against the same snapshot.
    let first = generate(&five, Op::Increment(-4), 2, 0);
    let second = generate(&five, Op::Transfer { amount: 4, to: 1 }, 3, 0);
    assert_eq!(five.validate_effect(&second), Ok(()));
    let after_first = applied(&five, &[(&first, stamp(2, 2))]);
    assert_eq!(
        after_first.validate_effect(&second),
        Err(CrdtError::NoPermissions { dc: 0, requested: 4, available: 1 })
    );
    // Increments are always valid; nested counters are validated too.
    assert_eq!(after_first.validate_effect(&generate(&five, Op::Increment(1), 4, 0)), Ok(()));
    let n = key("n", CrdtType::CounterB);
    let map = Crdt::new(CrdtType::MapGo);
    let map =
        applied(&map, &[(&generate(&map, Op::MapUpdate(vec![(n.clone(), Op::Increment(2))]), 5, 0), stamp(1, 5))]);
    let spend = generate(&map, Op::MapUpdate(vec![(n.clone(), Op::Increment(-2))]), 6, 0);
    let spent = applied(&map, &[(&spend, stamp(2, 6))]);
    assert!(matches!(spent.validate_effect(&spend), Err(CrdtError::NoPermissions { .. })));
}

#[test]
fn counter_fat_reset_keeps_a_concurrent_increment() {
    let start = Crdt::new(CrdtType::CounterFat);
    let five = applied(&start, &[(&generate(&start, Op::Increment(5), 1, 0), stamp(1, 1))]);
    let reset = generate(&five, Op::Reset, 2, 0);
    let increment = generate(&five, Op::Increment(3), 3, 1);
    assert_eq!(both_orders(&five, (&reset, stamp(2, 2)), (&increment, stamp(2, 3))).value(), Value::Counter(3));
    assert_eq!(applied(&five, &[(&reset, stamp(2, 2))]), start, "a reset that saw everything returns to bottom");
}

#[test]
fn counter_pn_adds_and_refuses_reset() {
    let start = Crdt::new(CrdtType::CounterPn);
    let up = generate(&start, Op::Increment(7), 1, 0);
    let down = generate(&start, Op::Increment(-9), 2, 1);
    assert_eq!(both_orders(&start, (&up, stamp(1, 1)), (&down, stamp(1, 2))).value(), Value::Counter(-2));
    let mut ctx = EffectCtx::new(TxTag(3), 0);
    assert_eq!(
        start.generate(&Op::Reset, &mut ctx),
        Err(CrdtError::UnsupportedOp { ty: CrdtType::CounterPn, op: "reset".into() })
    );
}

#[test]
fn counters_sum_exactly_past_64_bits_and_read_saturated_never_wrapped() {
    for ty in [CrdtType::CounterPn, CrdtType::CounterFat] {
        let start = Crdt::new(ty);
        let max = |tx| generate(&start, Op::Increment(i64::MAX), tx, 0);
        let (a, b) = (max(1), max(2));
        let twice = both_orders(&start, (&a, stamp(1, 1)), (&b, stamp(1, 2)));
        assert_eq!(twice.value(), Value::Counter(i64::MAX), "{ty:?}: 2·i64::MAX reads saturated, not as -2");
        let down = generate(&twice, Op::Increment(-i64::MAX), 3, 1);
        let back = applied(&twice, &[(&down, stamp(2, 3))]);
        assert_eq!(back.value(), Value::Counter(i64::MAX), "{ty:?}: the sum stayed exact beyond the range");
        let mins = [generate(&start, Op::Increment(i64::MIN), 4, 0), generate(&start, Op::Increment(i64::MIN), 5, 1)];
        let low = applied(&start, &[(&mins[0], stamp(1, 4)), (&mins[1], stamp(1, 5))]);
        assert_eq!(low.value(), Value::Counter(i64::MIN), "{ty:?}: saturates downwards too");
    }
}

#[test]
fn register_mv_keeps_concurrent_assigns_and_a_later_assign_supersedes_them() {
    let start = Crdt::new(CrdtType::RegisterMv);
    let x = generate(&start, Op::Assign(bytes("x")), 1, 0);
    let y = generate(&start, Op::Assign(bytes("y")), 2, 1);
    let both = both_orders(&start, (&y, stamp(1, 2)), (&x, stamp(1, 1)));
    assert_eq!(both.value(), Value::MvRegister(vec![bytes("x"), bytes("y")]));
    let z = applied(&both, &[(&generate(&both, Op::Assign(bytes("z")), 3, 0), stamp(2, 3))]);
    assert_eq!(z.value(), Value::MvRegister(vec![bytes("z")]));
    let reset = applied(&z, &[(&generate(&z, Op::Reset, 4, 0), stamp(3, 4))]);
    assert_eq!(reset.value(), Value::MvRegister(Vec::new()));
    assert!(reset.is_bottom());
}

#[test]
fn flag_ew_concurrent_enable_and_disable_is_enabled() {
    let start = Crdt::new(CrdtType::FlagEw);
    let on = applied(&start, &[(&generate(&start, Op::Enable, 1, 0), stamp(1, 1))]);
    let enable = generate(&on, Op::Enable, 2, 0);
    let disable = generate(&on, Op::Disable, 3, 1);
    assert_eq!(both_orders(&on, (&enable, stamp(2, 2)), (&disable, stamp(2, 3))).value(), Value::Flag(true));
    assert_eq!(applied(&on, &[(&disable, stamp(2, 3))]).value(), Value::Flag(false));
    assert_eq!(applied(&on, &[(&generate(&on, Op::Reset, 4, 0), stamp(2, 4))]), start, "reset returns to bottom");
}

#[test]
fn flag_dw_concurrent_enable_and_disable_is_disabled() {
    let start = Crdt::new(CrdtType::FlagDw);
    let enable = generate(&start, Op::Enable, 1, 0);
    let disable = generate(&start, Op::Disable, 2, 1);
    let merged = both_orders(&start, (&enable, stamp(1, 1)), (&disable, stamp(1, 2)));
    assert_eq!(merged.value(), Value::Flag(false));
    // A later enable, having seen the disable, turns it on; a reset turns it back to bottom.
    let on = applied(&merged, &[(&generate(&merged, Op::Enable, 3, 0), stamp(2, 3))]);
    assert_eq!(on.value(), Value::Flag(true));
    assert_eq!(applied(&on, &[(&generate(&on, Op::Reset, 4, 0), stamp(3, 4))]), start);
}

#[test]
fn register_lww_larger_stamp_wins_whatever_the_delivery_order() {
    let start = Crdt::new(CrdtType::RegisterLww);
    assert_eq!(start.value(), Value::Register(Vec::new()));
    let early = generate(&start, Op::Assign(bytes("early")), 1, 0);
    let late = generate(&start, Op::Assign(bytes("late")), 2, 1);
    let merged = both_orders(&start, (&late, stamp(5, 2)), (&early, stamp(3, 1)));
    assert_eq!(merged.value(), Value::Register(bytes("late")));
    // Equal times: the transaction tag breaks the tie.
    let merged = both_orders(&start, (&late, stamp(5, 2)), (&early, stamp(5, 1)));
    assert_eq!(merged.value(), Value::Register(bytes("late")));
}

#[test]
fn register_lww_later_assign_of_one_transaction_wins() {
    let start = Crdt::new(CrdtType::RegisterLww);
    let mut ctx = EffectCtx::new(TxTag(1), 0);
    let first = start.generate(&Op::Assign(bytes("first")), &mut ctx).expect("accepted");
    // The transaction reads its own write (at the pending stamp) and writes again.
    let own = applied(&start, &[(&first, Stamp::PENDING)]);
    assert_eq!(own.value(), Value::Register(bytes("first")));
    let second = own.generate(&Op::Assign(bytes("second")), &mut ctx).expect("accepted");
    let committed = stamp(9, 1);
    let merged = both_orders(&start, (&second, committed), (&first, committed));
    assert_eq!(merged.value(), Value::Register(bytes("second")));
}

#[test]
fn pending_stamp_reads_own_writes_above_every_committed_write() {
    let start = Crdt::new(CrdtType::RegisterLww);
    let committed = applied(&start, &[(&generate(&start, Op::Assign(bytes("old")), 1, 0), stamp(u128::MAX - 1, 1))]);
    let own = generate(&committed, Op::Assign(bytes("mine")), 2, 0);
    assert_eq!(applied(&committed, &[(&own, Stamp::PENDING)]).value(), Value::Register(bytes("mine")));
}

#[test]
fn unsupported_ops_are_refused_with_their_name_and_leave_the_context_unchanged() {
    let cases = [
        (CrdtType::CounterPn, Op::Enable, "enable"),
        (CrdtType::CounterFat, Op::Transfer { amount: 1, to: 1 }, "transfer"),
        (CrdtType::CounterB, Op::Reset, "reset"),
        (CrdtType::SetAw, Op::Assign(Vec::new()), "assign"),
        (CrdtType::SetRw, Op::Increment(1), "increment"),
        (CrdtType::SetGo, Op::Reset, "reset"),
        (CrdtType::RegisterLww, Op::Reset, "reset"),
        (CrdtType::RegisterMv, Op::Disable, "disable"),
        (CrdtType::FlagEw, Op::Add(Vec::new()), "add"),
        (CrdtType::FlagDw, Op::MapRemove(Vec::new()), "map_remove"),
        (CrdtType::MapGo, Op::MapRemove(Vec::new()), "map_remove"),
        (CrdtType::MapRr, Op::Increment(1), "increment"),
    ];
    for (ty, op, name) in cases {
        assert!(!requires_state(ty, &op), "{ty} refuses {name} whatever its state");
        let mut ctx = EffectCtx::new(TxTag(1), 0);
        ctx.next_seq = 7;
        assert_eq!(Crdt::new(ty).generate(&op, &mut ctx), Err(CrdtError::UnsupportedOp { ty, op: name.into() }));
        assert_eq!(ctx.next_seq, 7);
    }
    // A refusal deep in a map rolls back the tags drawn before it.
    let op = Op::MapUpdate(vec![
        (key("a", CrdtType::SetAw), Op::Add(vec![bytes("x")])),
        (key("b", CrdtType::SetAw), Op::Enable),
    ]);
    let mut ctx = EffectCtx::new(TxTag(1), 0);
    assert!(Crdt::new(CrdtType::MapGo).generate(&op, &mut ctx).is_err());
    assert_eq!(ctx.next_seq, 0);
}

#[test]
fn empty_add_and_remove_lists_are_no_op_effects() {
    for ty in [CrdtType::SetAw, CrdtType::SetRw, CrdtType::SetGo] {
        let start = Crdt::new(ty);
        for op in [Op::Add(Vec::new()), Op::Remove(Vec::new())] {
            if ty == CrdtType::SetGo && matches!(op, Op::Remove(_)) {
                continue;
            }
            let effect = generate(&start, op, 1, 0);
            assert_eq!(applied(&start, &[(&effect, stamp(1, 1))]), start, "{ty}");
        }
    }
}

#[test]
fn apply_of_an_effect_for_another_type_fails_and_changes_nothing() {
    let set = Crdt::new(CrdtType::SetAw);
    let filled = applied(&set, &[(&generate(&set, Op::Add(vec![bytes("x")]), 1, 0), stamp(1, 1))]);
    let counter = Crdt::new(CrdtType::CounterPn);
    let increment = generate(&counter, Op::Increment(1), 2, 0);
    let mut target = filled.clone();
    assert_eq!(
        target.apply(&increment, stamp(2, 2)),
        Err(CrdtError::TypeMismatch { effect: CrdtType::CounterPn, object: CrdtType::SetAw })
    );
    assert_eq!(target, filled);
    assert!(matches!(filled.validate_effect(&increment), Err(CrdtError::TypeMismatch { .. })));
}

#[test]
fn requires_state_is_false_exactly_for_blind_writes() {
    use CrdtType::*;
    assert!(!requires_state(CounterPn, &Op::Increment(-3)));
    assert!(!requires_state(CounterFat, &Op::Increment(3)));
    assert!(requires_state(CounterFat, &Op::Reset));
    assert!(!requires_state(CounterB, &Op::Increment(3)));
    assert!(requires_state(CounterB, &Op::Increment(-3)));
    assert!(requires_state(CounterB, &Op::Transfer { amount: 1, to: 2 }));
    assert!(requires_state(SetAw, &Op::Add(vec![bytes("x")])));
    assert!(!requires_state(SetGo, &Op::Add(vec![bytes("x")])));
    assert!(!requires_state(RegisterLww, &Op::Assign(bytes("v"))));
    assert!(requires_state(RegisterMv, &Op::Assign(bytes("v"))));
    assert!(requires_state(FlagEw, &Op::Enable));
    let blind =
        Op::MapUpdate(vec![(key("n", CounterPn), Op::Increment(1)), (key("r", RegisterLww), Op::Assign(bytes("v")))]);
    assert!(!requires_state(MapGo, &blind));
    let reading = Op::MapUpdate(vec![(key("s", SetAw), Op::Add(vec![bytes("x")]))]);
    assert!(requires_state(MapGo, &reading));
    assert!(requires_state(MapRr, &reading));
    assert!(requires_state(MapRr, &Op::MapRemove(vec![key("s", SetAw)])));
}

/// An operation nesting `depth` maps around a counter increment: the counter is enclosed by `depth` maps.
fn nested_op(depth: usize) -> Op {
    let mut op = Op::Increment(1);
    let mut ty = CrdtType::CounterPn;
    for _ in 1..depth {
        op = Op::MapUpdate(vec![(key("k", ty), op)]);
        ty = CrdtType::MapGo;
    }
    Op::MapUpdate(vec![(key("k", ty), op)])
}

#[test]
fn operations_nesting_maps_past_the_limit_are_refused() {
    let map = Crdt::new(CrdtType::MapGo);
    let deepest = generate(&map, nested_op(MAX_NESTING_DEPTH), 1, 0);
    let state = applied(&map, &[(&deepest, stamp(1, 1))]);
    assert_eq!(Crdt::decode(&state.encode()), Ok(state.clone()));
    assert_eq!(Effect::decode(&deepest.encode()), Ok(deepest));
    let mut ctx = EffectCtx::new(TxTag(2), 0);
    assert!(matches!(map.generate(&nested_op(MAX_NESTING_DEPTH + 1), &mut ctx), Err(CrdtError::InvalidArgument(_))));
}

#[test]
fn every_type_starts_at_bottom_and_reads_antidotes_initial_value() {
    for ty in CrdtType::ALL {
        let state = Crdt::new(ty);
        assert_eq!(state.ty(), ty);
        assert!(state.is_bottom(), "{ty}");
        let expected = match ty {
            CrdtType::CounterPn | CrdtType::CounterFat | CrdtType::CounterB => Value::Counter(0),
            CrdtType::SetAw | CrdtType::SetRw | CrdtType::SetGo => Value::Set(Vec::new()),
            CrdtType::RegisterLww => Value::Register(Vec::new()),
            CrdtType::RegisterMv => Value::MvRegister(Vec::new()),
            CrdtType::FlagEw | CrdtType::FlagDw => Value::Flag(false),
            CrdtType::MapGo | CrdtType::MapRr => Value::Map(Vec::new()),
        };
        assert_eq!(state.value(), expected, "{ty}");
    }
}

#[test]
fn sequential_operations_keep_the_state_bounded() {
    let ops: [(CrdtType, Op); 7] = [
        (CrdtType::SetAw, Op::Add(vec![bytes("x")])),
        (CrdtType::SetRw, Op::Add(vec![bytes("x")])),
        (CrdtType::SetRw, Op::Remove(vec![bytes("x")])),
        (CrdtType::RegisterMv, Op::Assign(bytes("v"))),
        (CrdtType::FlagEw, Op::Enable),
        (CrdtType::FlagDw, Op::Disable),
        (CrdtType::FlagDw, Op::Enable),
    ];
    for (ty, op) in ops {
        let mut state = Crdt::new(ty);
        let mut sizes = Vec::new();
        for tx in 1..=20u128 {
            let effect = generate(&state, op.clone(), tx, 0);
            state.apply(&effect, stamp(tx, tx)).expect("types match");
            sizes.push(state.encode().len());
        }
        assert!(sizes.iter().all(|&size| size == sizes[0]), "{ty} grows under repeated {op:?}: {sizes:?}");
    }
}

#[test]
fn requires_state_and_generate_stop_at_the_nesting_limit() {
    let mut op = Op::Add(vec![bytes("x")]);
    let mut ty = CrdtType::SetAw;
    for _ in 0..1000 {
        op = Op::MapUpdate(vec![(key("k", ty), op)]);
        ty = CrdtType::MapRr;
    }
    assert!(!requires_state(CrdtType::MapRr, &op), "refused whatever the state");
    let mut ctx = EffectCtx::new(TxTag(1), 0);
    assert!(matches!(Crdt::new(CrdtType::MapRr).generate(&op, &mut ctx), Err(CrdtError::InvalidArgument(_))));
}
