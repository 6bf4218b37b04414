//! `set_go`: grow-only set.

use super::unsupported;
use crate::{CrdtError, CrdtType, Op, Value};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// `set_go` state: the elements ever added.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoSet {
    elements: BTreeSet<Vec<u8>>,
}

/// `set_go` effect: the elements to add.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoSetEffect {
    added: BTreeSet<Vec<u8>>,
}

impl GoSet {
    /// Whether the element is present.
    pub fn contains(&self, element: &[u8]) -> bool {
        self.elements.contains(element)
    }

    pub(crate) fn value(&self) -> Value {
        Value::Set(self.elements.iter().cloned().collect())
    }

    pub(crate) fn is_bottom(&self) -> bool {
        self.elements.is_empty()
    }

    pub(crate) fn generate(&self, op: &Op) -> Result<GoSetEffect, CrdtError> {
        match op {
            Op::Add(elements) => Ok(GoSetEffect { added: elements.iter().cloned().collect() }),
            other => Err(unsupported(CrdtType::SetGo, other)),
        }
    }

    pub(crate) fn apply(&mut self, effect: &GoSetEffect) {
        self.elements.extend(effect.added.iter().cloned());
    }
}
