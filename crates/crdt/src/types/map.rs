//! `map_go` and `map_rr`: maps of nested objects keyed by (key, type).
//!
//! A map effect is a set of nested effects, one per key. A `map_rr` remove of a key is the nested object's reset
//! effect, so it removes only what the remover observed: a concurrent nested update survives it.

use super::codec::deserialize_nested;
use super::{unsupported, Crdt, Effect, MAX_NESTING_DEPTH};
use crate::{CrdtError, CrdtType, EffectCtx, MapKey, Op, Stamp, Value};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `map_go` state: every nested object ever updated, by key. Entries are never removed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoMap {
    #[serde(deserialize_with = "deserialize_nested")]
    entries: BTreeMap<MapKey, Crdt>,
}

/// `map_rr` state: the nested objects, by key, of resettable types only. A nested object back at exactly its
/// initial state is dropped (nothing is lost: an absent entry behaves as the initial state). One that merely
/// reads as its initial value is kept, since its tags still matter for concurrent effects, but hidden from reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RrMap {
    #[serde(deserialize_with = "deserialize_nested")]
    entries: BTreeMap<MapKey, Crdt>,
}

/// `map_go` and `map_rr` effect: the nested effects, by key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MapEffect {
    #[serde(deserialize_with = "deserialize_nested")]
    updates: BTreeMap<MapKey, Effect>,
}

impl MapEffect {
    /// The nested effects, in ascending key order.
    pub fn updates(&self) -> impl Iterator<Item = (&MapKey, &Effect)> {
        self.updates.iter()
    }

    /// Checks every nested effect's type against its key.
    pub(crate) fn check_nested_types(&self, _map: CrdtType) -> Result<(), CrdtError> {
        for (key, effect) in &self.updates {
            if effect.ty() != key.ty {
                return Err(CrdtError::TypeMismatch { effect: effect.ty(), object: key.ty });
            }
            effect.check_nested_types()?;
        }
        Ok(())
    }
}

impl GoMap {
    /// The nested object at `key`, if it was ever updated.
    pub fn get(&self, key: &MapKey) -> Option<&Crdt> {
        self.entries.get(key)
    }

    /// The entries, in ascending key order.
    pub fn entries(&self) -> impl Iterator<Item = (&MapKey, &Crdt)> {
        self.entries.iter()
    }

    pub(crate) fn value(&self) -> Value {
        Value::Map(self.entries.iter().map(|(key, nested)| (key.clone(), nested.value())).collect())
    }

    pub(crate) fn is_bottom(&self) -> bool {
        self.entries.is_empty()
    }

    pub(crate) fn generate(&self, op: &Op, ctx: &mut EffectCtx, depth: usize) -> Result<MapEffect, CrdtError> {
        match op {
            Op::MapUpdate(updates) => generate_updates(&self.entries, updates, ctx, depth, CrdtType::MapGo),
            other => Err(unsupported(CrdtType::MapGo, other)),
        }
    }

    pub(crate) fn apply(&mut self, effect: &MapEffect, stamp: Stamp) -> Result<(), CrdtError> {
        for (key, nested) in &effect.updates {
            self.entries.entry(key.clone()).or_insert_with(|| Crdt::new(key.ty)).apply_checked(nested, stamp)?;
        }
        Ok(())
    }

    pub(crate) fn validate_effect(&self, effect: &MapEffect) -> Result<(), CrdtError> {
        validate_nested(&self.entries, effect)
    }

    pub(crate) fn check_nested_types(&self) -> Result<(), CrdtError> {
        check_entries(&self.entries, CrdtType::MapGo)
    }
}

impl RrMap {
    /// The nested object at `key`, if its state differs from the initial one (it may still read as bottom).
    pub fn get(&self, key: &MapKey) -> Option<&Crdt> {
        self.entries.get(key)
    }

    /// The stored entries, in ascending key order, including those that read as bottom.
    pub fn entries(&self) -> impl Iterator<Item = (&MapKey, &Crdt)> {
        self.entries.iter()
    }

    pub(crate) fn value(&self) -> Value {
        Value::Map(
            self.entries
                .iter()
                .filter(|(_, nested)| !nested.is_bottom())
                .map(|(key, nested)| (key.clone(), nested.value()))
                .collect(),
        )
    }

    pub(crate) fn is_bottom(&self) -> bool {
        self.entries.values().all(Crdt::is_bottom)
    }

    pub(crate) fn generate(&self, op: &Op, ctx: &mut EffectCtx, depth: usize) -> Result<MapEffect, CrdtError> {
        let keys: Vec<&MapKey> = match op {
            Op::MapUpdate(updates) => {
                return generate_updates(&self.entries, updates, ctx, depth, CrdtType::MapRr);
            }
            // As in AntidoteDB, a map_rr nests any type; removing (resetting) a key whose type has no reset leaves
            // that entry as it is.
            Op::MapRemove(keys) => keys.iter().filter(|key| key.ty.supports_reset()).collect(),
            Op::Reset => self.entries.keys().filter(|key| key.ty.supports_reset()).collect(),
            other => return Err(unsupported(CrdtType::MapRr, other)),
        };
        // Removing a key resets its nested object; an absent one has nothing to reset.
        let mut updates = BTreeMap::new();
        for key in keys {
            if let Some(nested) = self.entries.get(key) {
                updates.insert(key.clone(), nested.generate_at(&Op::Reset, ctx, nested_depth(depth)?)?);
            }
        }
        Ok(MapEffect { updates })
    }

    pub(crate) fn apply(&mut self, effect: &MapEffect, stamp: Stamp) -> Result<(), CrdtError> {
        for (key, nested) in &effect.updates {
            let entry = self.entries.entry(key.clone()).or_insert_with(|| Crdt::new(key.ty));
            entry.apply_checked(nested, stamp)?;
            if entry.is_initial() {
                self.entries.remove(key);
            }
        }
        Ok(())
    }

    pub(crate) fn validate_effect(&self, effect: &MapEffect) -> Result<(), CrdtError> {
        validate_nested(&self.entries, effect)
    }

    pub(crate) fn check_nested_types(&self) -> Result<(), CrdtError> {
        check_entries(&self.entries, CrdtType::MapRr)
    }
}

/// The depth of a map's nested objects, refused past [`MAX_NESTING_DEPTH`].
fn nested_depth(depth: usize) -> Result<usize, CrdtError> {
    let nested = depth.saturating_add(1);
    if nested > MAX_NESTING_DEPTH {
        return Err(CrdtError::InvalidArgument(format!("maps nested deeper than {MAX_NESTING_DEPTH}")));
    }
    Ok(nested)
}

/// Generates the nested effects of a `MapUpdate`, each against its entry's state (or the initial state).
fn generate_updates(
    entries: &BTreeMap<MapKey, Crdt>,
    updates: &[(MapKey, Op)],
    ctx: &mut EffectCtx,
    depth: usize,
    map: CrdtType,
) -> Result<MapEffect, CrdtError> {
    let depth = nested_depth(depth)?;
    let mut effects = BTreeMap::new();
    for (key, op) in updates {
        // Two operations on one key would each be generated against the same state, so the second would not see
        // the first (two bounded-counter decrements could spend the same rights): refused, as AntidoteDB does.
        if effects.contains_key(key) {
            return Err(CrdtError::InvalidArgument(format!("{map} update names one key twice")));
        }
        let effect = match entries.get(key) {
            Some(nested) => nested.generate_at(op, ctx, depth)?,
            None => Crdt::new(key.ty).generate_at(op, ctx, depth)?,
        };
        effects.insert(key.clone(), effect);
    }
    Ok(MapEffect { updates: effects })
}

/// Validates each nested effect against its entry's state (or the initial state).
fn validate_nested(entries: &BTreeMap<MapKey, Crdt>, effect: &MapEffect) -> Result<(), CrdtError> {
    for (key, nested) in &effect.updates {
        match entries.get(key) {
            Some(state) => state.validate_effect(nested)?,
            None => Crdt::new(key.ty).validate_effect(nested)?,
        }
    }
    Ok(())
}

/// Checks every nested object's type against its key.
fn check_entries(entries: &BTreeMap<MapKey, Crdt>, _map: CrdtType) -> Result<(), CrdtError> {
    for (key, nested) in entries {
        if nested.ty() != key.ty {
            return Err(CrdtError::TypeMismatch { effect: key.ty, object: nested.ty() });
        }
        nested.check_nested_types()?;
    }
    Ok(())
}
