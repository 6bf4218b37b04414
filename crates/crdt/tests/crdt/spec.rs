//! Each type's value computed directly from the operations and their visibility, independently of the
//! implementation's tags: an operation `a` is visible to `b` when `a` was applied at `b`'s origin when `b` was
//! generated (so visibility is causality).

use causet_crdt::{Crdt, CrdtType, MapKey, Op, Stamp, Value};
use std::collections::{BTreeMap, BTreeSet};

/// An operation as the specification sees it.
#[derive(Clone, Debug)]
pub struct SpecOp {
    pub id: usize,
    pub op: Op,
    pub visible: BTreeSet<usize>,
    pub stamp: Stamp,
}

impl SpecOp {
    /// Whether `self` happened before `later` (was visible when it was generated).
    fn seen_by(&self, later: &SpecOp) -> bool {
        later.visible.contains(&self.id)
    }

    /// Whether some operation matching `by` saw `self`.
    fn seen_by_any(&self, ops: &[SpecOp], by: impl Fn(&SpecOp) -> bool) -> bool {
        ops.iter().any(|other| by(other) && self.seen_by(other))
    }
}

fn has(elements: &[Vec<u8>], element: &[u8]) -> bool {
    elements.iter().any(|e| e == element)
}

fn adds(op: &Op, element: &[u8]) -> bool {
    matches!(op, Op::Add(elements) if has(elements, element))
}

fn removes(op: &Op, element: &[u8]) -> bool {
    matches!(op, Op::Remove(elements) if has(elements, element))
}

/// Every element any operation names.
fn universe(ops: &[SpecOp]) -> BTreeSet<Vec<u8>> {
    ops.iter()
        .flat_map(|o| match &o.op {
            Op::Add(elements) | Op::Remove(elements) => elements.clone(),
            _ => Vec::new(),
        })
        .collect()
}

/// The value of an object of type `ty` after the operations (a causally closed set).
pub fn spec_value(ty: CrdtType, ops: &[SpecOp]) -> Value {
    match ty {
        CrdtType::CounterPn => Value::Counter(
            ops.iter().map(|o| if let Op::Increment(n) = o.op { n } else { 0 }).fold(0, i64::wrapping_add),
        ),
        // counter_fat: the increments no reset saw.
        CrdtType::CounterFat => Value::Counter(
            ops.iter()
                .filter(|o| !o.seen_by_any(ops, |r| r.op == Op::Reset))
                .map(|o| if let Op::Increment(n) = o.op { n } else { 0 })
                .fold(0, i64::wrapping_add),
        ),
        // counter_b: increments minus decrements; transfers move rights, not value.
        CrdtType::CounterB => Value::Counter(ops.iter().map(|o| if let Op::Increment(n) = o.op { n } else { 0 }).sum()),
        // set_aw: present iff some add of it was seen by no remove of it nor reset.
        CrdtType::SetAw => Value::Set(
            universe(ops)
                .into_iter()
                .filter(|e| {
                    ops.iter()
                        .any(|a| adds(&a.op, e) && !a.seen_by_any(ops, |r| removes(&r.op, e) || r.op == Op::Reset))
                })
                .collect(),
        ),
        // set_rw: among the adds and removes of it that no later add, remove or reset of it saw, some add and no
        // remove.
        CrdtType::SetRw => Value::Set(
            universe(ops)
                .into_iter()
                .filter(|e| {
                    let touches = |o: &SpecOp| adds(&o.op, e) || removes(&o.op, e) || o.op == Op::Reset;
                    let surviving: Vec<&SpecOp> = ops
                        .iter()
                        .filter(|o| (adds(&o.op, e) || removes(&o.op, e)) && !o.seen_by_any(ops, touches))
                        .collect();
                    surviving.iter().any(|o| adds(&o.op, e)) && !surviving.iter().any(|o| removes(&o.op, e))
                })
                .collect(),
        ),
        CrdtType::SetGo => Value::Set(universe(ops).into_iter().collect()),
        // register_lww: the assign with the largest stamp.
        CrdtType::RegisterLww => Value::Register(
            ops.iter()
                .filter_map(|o| if let Op::Assign(v) = &o.op { Some((o.stamp, v.clone())) } else { None })
                .max()
                .map(|(_, v)| v)
                .unwrap_or_default(),
        ),
        // register_mv: the assigns no later assign or reset saw.
        CrdtType::RegisterMv => {
            let mut values: Vec<Vec<u8>> = ops
                .iter()
                .filter(|o| !o.seen_by_any(ops, |_| true))
                .filter_map(|o| if let Op::Assign(v) = &o.op { Some(v.clone()) } else { None })
                .collect();
            values.sort();
            Value::MvRegister(values)
        }
        // Flags: decided by the operations no other one saw.
        CrdtType::FlagEw => {
            let latest: Vec<&SpecOp> = ops.iter().filter(|o| !o.seen_by_any(ops, |_| true)).collect();
            Value::Flag(latest.iter().any(|o| o.op == Op::Enable))
        }
        CrdtType::FlagDw => {
            let latest: Vec<&SpecOp> = ops.iter().filter(|o| !o.seen_by_any(ops, |_| true)).collect();
            Value::Flag(latest.iter().any(|o| o.op == Op::Enable) && !latest.iter().any(|o| o.op == Op::Disable))
        }
        // map_go: every key ever updated, with its nested value.
        CrdtType::MapGo => Value::Map(
            nested_ops(ops).into_iter().map(|(key, nested)| (key.clone(), spec_value(key.ty, &nested))).collect(),
        ),
        // map_rr: removing a key or resetting the map resets the nested objects; entries at bottom are hidden.
        CrdtType::MapRr => Value::Map(
            nested_ops(ops)
                .into_iter()
                .map(|(key, nested)| (key.clone(), spec_value(key.ty, &nested)))
                .filter(|(key, value)| *value != Crdt::new(key.ty).value())
                .collect(),
        ),
    }
}

/// Each key's nested operations: the nested op of an update, a reset for a remove of the key or a map reset.
fn nested_ops(ops: &[SpecOp]) -> BTreeMap<MapKey, Vec<SpecOp>> {
    // A key only ever removed holds nothing: absent from a map_go (never updated), at bottom in a map_rr.
    let keys: BTreeSet<MapKey> = ops
        .iter()
        .flat_map(|o| match &o.op {
            Op::MapUpdate(updates) => updates.iter().map(|(key, _)| key.clone()).collect(),
            _ => Vec::new(),
        })
        .collect();
    let mut nested: BTreeMap<MapKey, Vec<SpecOp>> = BTreeMap::new();
    for key in keys {
        let key_ops = ops
            .iter()
            .filter_map(|o| {
                let op = match &o.op {
                    Op::MapUpdate(updates) => updates.iter().find(|(k, _)| *k == key).map(|(_, op)| op.clone()),
                    Op::MapRemove(keys) => keys.contains(&key).then_some(Op::Reset),
                    Op::Reset => Some(Op::Reset),
                    _ => None,
                }?;
                Some(SpecOp { id: o.id, op, visible: o.visible.clone(), stamp: o.stamp })
            })
            .collect();
        nested.insert(key, key_ops);
    }
    nested
}
