//! `register_mv`: multi-value register.

use super::{fresh_tag, unsupported};
use crate::{CrdtError, CrdtType, EffectCtx, Op, Tag, Value};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// `register_mv` state: the values of the assigns that no later assign or reset has observed, by tag.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MvRegister {
    versions: BTreeMap<Tag, Vec<u8>>,
}

/// `register_mv` effect: the versions observed (to drop) and, for an assign, the new version.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MvRegisterEffect {
    observed: BTreeSet<Tag>,
    assign: Option<(Tag, Vec<u8>)>,
}

impl MvRegister {
    /// The concurrent values in ascending byte order (a value assigned by several concurrent assigns appears once
    /// per assign, as AntidoteDB reads it).
    pub fn values(&self) -> Vec<Vec<u8>> {
        let mut values: Vec<Vec<u8>> = self.versions.values().cloned().collect();
        values.sort();
        values
    }

    pub(crate) fn value(&self) -> Value {
        Value::MvRegister(self.values())
    }

    pub(crate) fn is_bottom(&self) -> bool {
        self.versions.is_empty()
    }

    pub(crate) fn generate(&self, op: &Op, ctx: &mut EffectCtx) -> Result<MvRegisterEffect, CrdtError> {
        let observed = || self.versions.keys().copied().collect();
        match op {
            Op::Assign(value) => {
                Ok(MvRegisterEffect { assign: Some((fresh_tag(ctx)?, value.clone())), observed: observed() })
            }
            Op::Reset => Ok(MvRegisterEffect { assign: None, observed: observed() }),
            other => Err(unsupported(CrdtType::RegisterMv, other)),
        }
    }

    pub(crate) fn apply(&mut self, effect: &MvRegisterEffect) {
        for tag in &effect.observed {
            self.versions.remove(tag);
        }
        if let Some((tag, value)) = &effect.assign {
            self.versions.insert(*tag, value.clone());
        }
    }
}
