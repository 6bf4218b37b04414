//! `set_rw`: remove-wins set.

use super::{fresh_tag, unsupported};
use crate::{CrdtError, CrdtType, EffectCtx, Op, Tag, Value};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The tags of one `set_rw` element that no later operation on it has observed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct RwEntry {
    adds: BTreeSet<Tag>,
    removes: BTreeSet<Tag>,
}

/// `set_rw` state: per element, the tags of the adds and removes no later operation on it has observed. An
/// element is present iff it has an add tag and no remove tag, so a remove concurrent with an add wins. Elements
/// without tags are not stored; a removed element keeps its remove tag until a later add or reset observes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RwSet {
    elements: BTreeMap<Vec<u8>, RwEntry>,
}

/// What a `set_rw` effect does to one element.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct RwChange {
    /// Every tag of the element the operation observed, to drop.
    observed: BTreeSet<Tag>,
    /// An add's fresh tag.
    add: Option<Tag>,
    /// A remove's fresh tag.
    remove: Option<Tag>,
}

/// `set_rw` effect: per element, the observed tags to drop and the fresh add or remove tag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RwSetEffect {
    changes: BTreeMap<Vec<u8>, RwChange>,
}

impl RwEntry {
    fn is_present(&self) -> bool {
        !self.adds.is_empty() && self.removes.is_empty()
    }

    fn tags(&self) -> BTreeSet<Tag> {
        self.adds.union(&self.removes).copied().collect()
    }
}

impl RwSet {
    /// Whether the element is present.
    pub fn contains(&self, element: &[u8]) -> bool {
        self.elements.get(element).is_some_and(RwEntry::is_present)
    }

    /// The present elements, in ascending order.
    pub fn elements(&self) -> impl Iterator<Item = &[u8]> {
        self.elements.iter().filter(|(_, entry)| entry.is_present()).map(|(element, _)| element.as_slice())
    }

    pub(crate) fn value(&self) -> Value {
        Value::Set(self.elements().map(<[u8]>::to_vec).collect())
    }

    pub(crate) fn is_bottom(&self) -> bool {
        !self.elements.values().any(RwEntry::is_present)
    }

    fn observed(&self, element: &[u8]) -> BTreeSet<Tag> {
        self.elements.get(element).map(RwEntry::tags).unwrap_or_default()
    }

    pub(crate) fn generate(&self, op: &Op, ctx: &mut EffectCtx) -> Result<RwSetEffect, CrdtError> {
        let mut changes = BTreeMap::new();
        match op {
            Op::Add(elements) | Op::Remove(elements) => {
                let is_add = matches!(op, Op::Add(_));
                // Tags are drawn in ascending element order so the effect does not depend on the list's order.
                let elements: BTreeSet<&Vec<u8>> = elements.iter().collect();
                for element in elements {
                    let tag = fresh_tag(ctx)?;
                    let change = RwChange {
                        observed: self.observed(element),
                        add: is_add.then_some(tag),
                        remove: (!is_add).then_some(tag),
                    };
                    changes.insert(element.clone(), change);
                }
            }
            Op::Reset => {
                for (element, entry) in &self.elements {
                    changes.insert(element.clone(), RwChange { observed: entry.tags(), add: None, remove: None });
                }
            }
            other => return Err(unsupported(CrdtType::SetRw, other)),
        }
        Ok(RwSetEffect { changes })
    }

    pub(crate) fn apply(&mut self, effect: &RwSetEffect) {
        for (element, change) in &effect.changes {
            let entry = self.elements.entry(element.clone()).or_default();
            for tag in &change.observed {
                entry.adds.remove(tag);
                entry.removes.remove(tag);
            }
            entry.adds.extend(change.add);
            entry.removes.extend(change.remove);
            if entry.adds.is_empty() && entry.removes.is_empty() {
                self.elements.remove(element);
            }
        }
    }
}
