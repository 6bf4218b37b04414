//! Conversions between the protocol's messages and Causet's types: objects, map keys, operations and read values.
//!
//! Types: `CRDT_type` numbers map one to one onto [`CrdtType`], except `set_go`, which AntidoteDB's enum lacks.
//!
//! Operations (`ApbUpdateOperation` → [`Op`]), in AntidoteDB's order of precedence when a client sets several
//! fields (its codec reads `counterop`, `setop`, `regop`, `mapop`, `flagop`, then `resetop`):
//! - `counterop {inc}` → `Increment(inc)`, `inc` absent meaning 1; a negative `inc` decrements, for the bounded
//!   counter too. Counters only.
//! - `setop {ADD, adds}` → `Add(adds)`; `setop {REMOVE, rems}` → `Remove(rems)`. Sets only.
//! - `regop {value}` → `Assign(value)`. Registers only.
//! - `mapop {updates, removedKeys}` → `MapUpdate` (updates only, or neither), `MapRemove` (removed keys only).
//!   Both at once is AntidoteDB's `batch`, which [`updates_from_proto`] turns into a `MapRemove` followed by a
//!   `MapUpdate` on the same object: each removal resets only what the object held before the request, and the
//!   updates survive, as in AntidoteDB. Inside a nested map that split is impossible (a map update names each key
//!   once), so a nested batch is refused. Maps only.
//! - `flagop {value}` → `Enable` (true) or `Disable` (false). Flags only.
//! - `resetop {}` → `Reset`. Whether the type supports it is left to the core, which refuses it cleanly.
//!
//! Values ([`Value`] → `ApbReadObjectResp`) take the field AntidoteDB fills for the type: counters (all three,
//! the bounded counter included) `counter`, sets `set`, `register_lww` `reg`, `register_mv` `mvreg`, flags `flag`,
//! maps `map` with one entry per key, each with its key, its type and its nested value.

use crate::error::{EncodeError, ProtocolError};
use crate::proto::{
    apb_set_update::SetOpType, ApbBoundObject, ApbCounterUpdate, ApbCrdtReset, ApbFlagUpdate, ApbGetCounterResp,
    ApbGetFlagResp, ApbGetMVRegResp, ApbGetMapResp, ApbGetRegResp, ApbGetSetResp, ApbMapEntry, ApbMapKey,
    ApbMapNestedUpdate, ApbMapUpdate, ApbReadObjectResp, ApbRegUpdate, ApbSetUpdate, ApbUpdateOp, ApbUpdateOperation,
    CRDT_type,
};
use causet_core::ObjectId;
use causet_crdt::{CrdtType, MapKey, Op, Value, MAX_NESTING_DEPTH};

/// The Causet type of a `CRDT_type` number.
pub fn crdt_type_from_proto(number: i32) -> Result<CrdtType, ProtocolError> {
    let ty = CRDT_type::try_from(number).map_err(|_| ProtocolError::UnknownCrdtType(number))?;
    Ok(match ty {
        CRDT_type::COUNTER => CrdtType::CounterPn,
        CRDT_type::ORSET => CrdtType::SetAw,
        CRDT_type::LWWREG => CrdtType::RegisterLww,
        CRDT_type::MVREG => CrdtType::RegisterMv,
        CRDT_type::GMAP => CrdtType::MapGo,
        CRDT_type::RWSET => CrdtType::SetRw,
        CRDT_type::RRMAP => CrdtType::MapRr,
        CRDT_type::FATCOUNTER => CrdtType::CounterFat,
        CRDT_type::FLAG_EW => CrdtType::FlagEw,
        CRDT_type::FLAG_DW => CrdtType::FlagDw,
        CRDT_type::BCOUNTER => CrdtType::CounterB,
    })
}

/// The `CRDT_type` of a Causet type; `set_go` has none.
pub fn crdt_type_to_proto(ty: CrdtType) -> Result<CRDT_type, EncodeError> {
    Ok(match ty {
        CrdtType::CounterPn => CRDT_type::COUNTER,
        CrdtType::CounterFat => CRDT_type::FATCOUNTER,
        CrdtType::CounterB => CRDT_type::BCOUNTER,
        CrdtType::SetAw => CRDT_type::ORSET,
        CrdtType::SetRw => CRDT_type::RWSET,
        CrdtType::SetGo => return Err(EncodeError::UnrepresentableType(ty)),
        CrdtType::RegisterLww => CRDT_type::LWWREG,
        CrdtType::RegisterMv => CRDT_type::MVREG,
        CrdtType::FlagEw => CRDT_type::FLAG_EW,
        CrdtType::FlagDw => CRDT_type::FLAG_DW,
        CrdtType::MapGo => CRDT_type::GMAP,
        CrdtType::MapRr => CRDT_type::RRMAP,
    })
}

/// An `ApbBoundObject` as an [`ObjectId`].
pub fn object_id(object: &ApbBoundObject) -> Result<ObjectId, ProtocolError> {
    Ok(ObjectId { key: object.key.clone(), bucket: object.bucket.clone(), ty: crdt_type_from_proto(object.r#type)? })
}

/// An [`ObjectId`] as an `ApbBoundObject`.
pub fn bound_object(object: &ObjectId) -> Result<ApbBoundObject, EncodeError> {
    Ok(ApbBoundObject {
        key: object.key.clone(),
        r#type: crdt_type_to_proto(object.ty)? as i32,
        bucket: object.bucket.clone(),
    })
}

/// An `ApbMapKey` as a [`MapKey`].
pub fn map_key_from_proto(key: &ApbMapKey) -> Result<MapKey, ProtocolError> {
    Ok(MapKey { key: key.key.clone(), ty: crdt_type_from_proto(key.r#type)? })
}

/// A [`MapKey`] as an `ApbMapKey`.
pub fn map_key_to_proto(key: &MapKey) -> Result<ApbMapKey, EncodeError> {
    Ok(ApbMapKey { key: key.key.clone(), r#type: crdt_type_to_proto(key.ty)? as i32 })
}

fn is_counter(ty: CrdtType) -> bool {
    matches!(ty, CrdtType::CounterPn | CrdtType::CounterFat | CrdtType::CounterB)
}

fn is_set(ty: CrdtType) -> bool {
    matches!(ty, CrdtType::SetAw | CrdtType::SetRw | CrdtType::SetGo)
}

fn is_register(ty: CrdtType) -> bool {
    matches!(ty, CrdtType::RegisterLww | CrdtType::RegisterMv)
}

fn is_flag(ty: CrdtType) -> bool {
    matches!(ty, CrdtType::FlagEw | CrdtType::FlagDw)
}

fn is_map(ty: CrdtType) -> bool {
    matches!(ty, CrdtType::MapGo | CrdtType::MapRr)
}

fn expect_family(ty: CrdtType, fits: bool, op: &'static str) -> Result<(), ProtocolError> {
    if fits {
        Ok(())
    } else {
        Err(ProtocolError::OperationMismatch { ty, op })
    }
}

/// The update operations of a request, each as one or two `(object, op)` pairs (two for a top-level map batch),
/// in request order.
pub fn updates_from_proto(updates: &[ApbUpdateOp]) -> Result<Vec<(ObjectId, Op)>, ProtocolError> {
    let mut out = Vec::with_capacity(updates.len());
    for update in updates {
        let object = object_id(&update.boundobject)?;
        let operation = &update.operation;
        let top_level_batch = operation.counterop.is_none()
            && operation.setop.is_none()
            && operation.regop.is_none()
            && operation.mapop.as_ref().is_some_and(|m| !m.updates.is_empty() && !m.removedKeys.is_empty());
        if top_level_batch && is_map(object.ty) {
            let map = operation.mapop.as_ref().expect("checked by top_level_batch");
            let removed: Vec<MapKey> = map.removedKeys.iter().map(map_key_from_proto).collect::<Result<_, _>>()?;
            let nested = nested_updates_from_proto(&map.updates, 0)?;
            // AntidoteDB's type check refuses a batch that names one key both to update and to remove.
            if let Some((key, _)) = nested.iter().find(|(k, _)| removed.contains(k)) {
                return Err(ProtocolError::KeyUpdatedAndRemoved(String::from_utf8_lossy(&key.key).into_owned()));
            }
            out.push((object.clone(), Op::MapRemove(removed)));
            out.push((object, Op::MapUpdate(nested)));
        } else {
            let op = op_from_proto(object.ty, operation, 0)?;
            out.push((object, op));
        }
    }
    Ok(out)
}

/// One operation on an object of type `ty` enclosed by `depth` maps.
pub fn op_from_proto(ty: CrdtType, operation: &ApbUpdateOperation, depth: usize) -> Result<Op, ProtocolError> {
    if let Some(counter) = &operation.counterop {
        expect_family(ty, is_counter(ty), "counter")?;
        return Ok(Op::Increment(counter.inc.unwrap_or(1)));
    }
    if let Some(set) = &operation.setop {
        expect_family(ty, is_set(ty), "set")?;
        return match SetOpType::try_from(set.optype) {
            Ok(SetOpType::ADD) => Ok(Op::Add(set.adds.clone())),
            Ok(SetOpType::REMOVE) => Ok(Op::Remove(set.rems.clone())),
            Err(_) => Err(ProtocolError::UnknownSetOpType(set.optype)),
        };
    }
    if let Some(reg) = &operation.regop {
        expect_family(ty, is_register(ty), "register")?;
        return Ok(Op::Assign(reg.value.clone()));
    }
    if let Some(map) = &operation.mapop {
        expect_family(ty, is_map(ty), "map")?;
        return match (map.updates.is_empty(), map.removedKeys.is_empty()) {
            (_, true) => Ok(Op::MapUpdate(nested_updates_from_proto(&map.updates, depth)?)),
            (true, false) => {
                Ok(Op::MapRemove(map.removedKeys.iter().map(map_key_from_proto).collect::<Result<_, _>>()?))
            }
            (false, false) => Err(ProtocolError::NestedMapBatch),
        };
    }
    if let Some(flag) = &operation.flagop {
        expect_family(ty, is_flag(ty), "flag")?;
        return Ok(if flag.value { Op::Enable } else { Op::Disable });
    }
    if operation.resetop.is_some() {
        return Ok(Op::Reset);
    }
    Err(ProtocolError::MissingOperation(ty))
}

/// The nested updates of a map enclosed by `depth` maps.
fn nested_updates_from_proto(updates: &[ApbMapNestedUpdate], depth: usize) -> Result<Vec<(MapKey, Op)>, ProtocolError> {
    if depth >= MAX_NESTING_DEPTH {
        return Err(ProtocolError::TooDeep(MAX_NESTING_DEPTH));
    }
    updates
        .iter()
        .map(|u| {
            let key = map_key_from_proto(&u.key)?;
            let op = op_from_proto(key.ty, &u.update, depth + 1)?;
            Ok((key, op))
        })
        .collect()
}

/// An `(object, op)` pair as an `ApbUpdateOp`.
pub fn update_op(object: &ObjectId, op: &Op) -> Result<ApbUpdateOp, EncodeError> {
    Ok(ApbUpdateOp { boundobject: bound_object(object)?, operation: op_to_proto(op, 0)? })
}

/// An operation as an `ApbUpdateOperation`, enclosed by `depth` maps.
pub fn op_to_proto(op: &Op, depth: usize) -> Result<ApbUpdateOperation, EncodeError> {
    let mut out = ApbUpdateOperation::default();
    match op {
        Op::Increment(n) => out.counterop = Some(ApbCounterUpdate { inc: Some(*n) }),
        Op::Transfer { .. } => return Err(EncodeError::UnrepresentableOp("transfer")),
        Op::Add(elements) => {
            out.setop = Some(ApbSetUpdate { optype: SetOpType::ADD as i32, adds: elements.clone(), rems: Vec::new() })
        }
        Op::Remove(elements) => {
            out.setop =
                Some(ApbSetUpdate { optype: SetOpType::REMOVE as i32, adds: Vec::new(), rems: elements.clone() })
        }
        Op::Assign(value) => out.regop = Some(ApbRegUpdate { value: value.clone() }),
        Op::Enable => out.flagop = Some(ApbFlagUpdate { value: true }),
        Op::Disable => out.flagop = Some(ApbFlagUpdate { value: false }),
        Op::MapUpdate(nested) => {
            if depth >= MAX_NESTING_DEPTH {
                return Err(EncodeError::TooDeep(MAX_NESTING_DEPTH));
            }
            let updates = nested
                .iter()
                .map(|(key, op)| {
                    Ok(ApbMapNestedUpdate { key: map_key_to_proto(key)?, update: op_to_proto(op, depth + 1)? })
                })
                .collect::<Result<_, EncodeError>>()?;
            out.mapop = Some(ApbMapUpdate { updates, removedKeys: Vec::new() });
        }
        Op::MapRemove(keys) => {
            let removed = keys.iter().map(map_key_to_proto).collect::<Result<_, _>>()?;
            out.mapop = Some(ApbMapUpdate { updates: Vec::new(), removedKeys: removed });
        }
        Op::Reset => out.resetop = Some(ApbCrdtReset {}),
    }
    Ok(out)
}

fn value_kind(value: &Value) -> &'static str {
    match value {
        Value::Counter(_) => "counter",
        Value::Set(_) => "set",
        Value::Register(_) => "register",
        Value::MvRegister(_) => "multi-value register",
        Value::Flag(_) => "flag",
        Value::Map(_) => "map",
    }
}

/// The `ApbReadObjectResp` AntidoteDB answers for an object of type `ty` holding `value`.
pub fn read_object_resp(ty: CrdtType, value: &Value) -> Result<ApbReadObjectResp, EncodeError> {
    read_object_resp_at(ty, value, 0)
}

fn read_object_resp_at(ty: CrdtType, value: &Value, depth: usize) -> Result<ApbReadObjectResp, EncodeError> {
    let mismatch = || EncodeError::ValueMismatch { ty, value: value_kind(value) };
    let mut out = ApbReadObjectResp::default();
    match value {
        Value::Counter(n) if is_counter(ty) => {
            let value = i32::try_from(*n).map_err(|_| EncodeError::CounterOutOfRange(*n))?;
            out.counter = Some(ApbGetCounterResp { value });
        }
        Value::Set(elements) if is_set(ty) => out.set = Some(ApbGetSetResp { value: elements.clone() }),
        Value::Register(v) if ty == CrdtType::RegisterLww => out.reg = Some(ApbGetRegResp { value: v.clone() }),
        Value::MvRegister(vs) if ty == CrdtType::RegisterMv => out.mvreg = Some(ApbGetMVRegResp { values: vs.clone() }),
        Value::Flag(b) if is_flag(ty) => out.flag = Some(ApbGetFlagResp { value: *b }),
        Value::Map(entries) if is_map(ty) => {
            if depth >= MAX_NESTING_DEPTH {
                return Err(EncodeError::TooDeep(MAX_NESTING_DEPTH));
            }
            let entries = entries
                .iter()
                .map(|(key, nested)| {
                    Ok(ApbMapEntry {
                        key: map_key_to_proto(key)?,
                        value: read_object_resp_at(key.ty, nested, depth + 1)?,
                    })
                })
                .collect::<Result<_, EncodeError>>()?;
            out.map = Some(ApbGetMapResp { entries });
        }
        _ => return Err(mismatch()),
    }
    Ok(out)
}

/// The value of an object of type `ty` from an `ApbReadObjectResp`: the field for the type must be set.
pub fn value_from_proto(ty: CrdtType, resp: &ApbReadObjectResp) -> Result<Value, ProtocolError> {
    value_from_proto_at(ty, resp, 0)
}

fn value_from_proto_at(ty: CrdtType, resp: &ApbReadObjectResp, depth: usize) -> Result<Value, ProtocolError> {
    let missing =
        |field: &str| ProtocolError::MalformedReply(format!("the value of a {ty} object has no {field} field"));
    if is_counter(ty) {
        let c = resp.counter.as_ref().ok_or_else(|| missing("counter"))?;
        Ok(Value::Counter(i64::from(c.value)))
    } else if is_set(ty) {
        Ok(Value::Set(resp.set.as_ref().ok_or_else(|| missing("set"))?.value.clone()))
    } else if ty == CrdtType::RegisterLww {
        Ok(Value::Register(resp.reg.as_ref().ok_or_else(|| missing("reg"))?.value.clone()))
    } else if ty == CrdtType::RegisterMv {
        Ok(Value::MvRegister(resp.mvreg.as_ref().ok_or_else(|| missing("mvreg"))?.values.clone()))
    } else if is_flag(ty) {
        Ok(Value::Flag(resp.flag.as_ref().ok_or_else(|| missing("flag"))?.value))
    } else {
        debug_assert!(is_map(ty));
        if depth >= MAX_NESTING_DEPTH {
            return Err(ProtocolError::TooDeep(MAX_NESTING_DEPTH));
        }
        let map = resp.map.as_ref().ok_or_else(|| missing("map"))?;
        let entries = map
            .entries
            .iter()
            .map(|e| {
                let key = map_key_from_proto(&e.key)?;
                let value = value_from_proto_at(key.ty, &e.value, depth + 1)?;
                Ok((key, value))
            })
            .collect::<Result<_, ProtocolError>>()?;
        Ok(Value::Map(entries))
    }
}
