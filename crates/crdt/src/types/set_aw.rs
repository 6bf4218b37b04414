//! `set_aw`: add-wins observed-remove set.

use super::{fresh_tag, unsupported};
use crate::{CrdtError, CrdtType, EffectCtx, Op, Tag, Value};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// `set_aw` state: each present element with the tags of the adds that no remove has observed yet. An element is
/// present iff it has a tag; elements without tags are not stored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AwSet {
    elements: BTreeMap<Vec<u8>, BTreeSet<Tag>>,
}

/// What a `set_aw` effect does to one element.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct AwChange {
    /// The add's fresh tag (none for a remove).
    add: Option<Tag>,
    /// The element's tags the operation observed, to drop.
    observed: BTreeSet<Tag>,
}

/// `set_aw` effect: per element, the observed tags to drop and, for an add, a fresh tag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AwSetEffect {
    changes: BTreeMap<Vec<u8>, AwChange>,
}

impl AwSet {
    /// Whether the element is present.
    pub fn contains(&self, element: &[u8]) -> bool {
        self.elements.contains_key(element)
    }

    /// The present elements, in ascending order.
    pub fn elements(&self) -> impl Iterator<Item = &[u8]> {
        self.elements.keys().map(Vec::as_slice)
    }

    pub(crate) fn value(&self) -> Value {
        Value::Set(self.elements.keys().cloned().collect())
    }

    pub(crate) fn is_bottom(&self) -> bool {
        self.elements.is_empty()
    }

    fn observed(&self, element: &[u8]) -> BTreeSet<Tag> {
        self.elements.get(element).cloned().unwrap_or_default()
    }

    pub(crate) fn generate(&self, op: &Op, ctx: &mut EffectCtx) -> Result<AwSetEffect, CrdtError> {
        let mut changes = BTreeMap::new();
        match op {
            Op::Add(elements) => {
                // Tags are drawn in ascending element order so the effect does not depend on the list's order.
                let elements: BTreeSet<&Vec<u8>> = elements.iter().collect();
                for element in elements {
                    let change = AwChange { add: Some(fresh_tag(ctx)?), observed: self.observed(element) };
                    changes.insert(element.clone(), change);
                }
            }
            Op::Remove(elements) => {
                for element in elements {
                    if let Some(tags) = self.elements.get(element) {
                        changes.insert(element.clone(), AwChange { add: None, observed: tags.clone() });
                    }
                }
            }
            Op::Reset => {
                for (element, tags) in &self.elements {
                    changes.insert(element.clone(), AwChange { add: None, observed: tags.clone() });
                }
            }
            other => return Err(unsupported(CrdtType::SetAw, other)),
        }
        Ok(AwSetEffect { changes })
    }

    pub(crate) fn apply(&mut self, effect: &AwSetEffect) {
        for (element, change) in &effect.changes {
            let tags = self.elements.entry(element.clone()).or_default();
            for tag in &change.observed {
                tags.remove(tag);
            }
            if let Some(tag) = change.add {
                tags.insert(tag);
            }
            if tags.is_empty() {
                self.elements.remove(element);
            }
        }
    }
}
