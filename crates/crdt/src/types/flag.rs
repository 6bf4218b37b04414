//! `flag_ew` and `flag_dw`: enable-wins and disable-wins flags.

use super::{fresh_tag, unsupported};
use crate::{CrdtError, CrdtType, EffectCtx, Op, Tag, Value};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// `flag_ew` state: the tags of the enables that no later operation has observed. The flag is on iff there is
/// one, so an enable concurrent with a disable wins.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EwFlag {
    enables: BTreeSet<Tag>,
}

/// `flag_ew` effect: the tags observed (to drop) and, for an enable, a fresh tag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EwFlagEffect {
    observed: BTreeSet<Tag>,
    enable: Option<Tag>,
}

impl EwFlag {
    /// Whether the flag is on.
    pub fn enabled(&self) -> bool {
        !self.enables.is_empty()
    }

    pub(crate) fn value(&self) -> Value {
        Value::Flag(self.enabled())
    }

    pub(crate) fn is_bottom(&self) -> bool {
        !self.enabled()
    }

    pub(crate) fn generate(&self, op: &Op, ctx: &mut EffectCtx) -> Result<EwFlagEffect, CrdtError> {
        let observed = self.enables.clone();
        match op {
            Op::Enable => Ok(EwFlagEffect { observed, enable: Some(fresh_tag(ctx)?) }),
            // Off is the initial value, so a disable and a reset do the same: drop the enables they saw.
            Op::Disable | Op::Reset => Ok(EwFlagEffect { observed, enable: None }),
            other => Err(unsupported(CrdtType::FlagEw, other)),
        }
    }

    pub(crate) fn apply(&mut self, effect: &EwFlagEffect) {
        for tag in &effect.observed {
            self.enables.remove(tag);
        }
        self.enables.extend(effect.enable);
    }
}

/// `flag_dw` state: the tags of the enables and disables that no later operation has observed. The flag is on
/// iff there is an enable and no disable, so a disable concurrent with an enable wins.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DwFlag {
    enables: BTreeSet<Tag>,
    disables: BTreeSet<Tag>,
}

/// `flag_dw` effect: the tags observed (to drop) and a fresh enable or disable tag.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DwFlagEffect {
    observed: BTreeSet<Tag>,
    enable: Option<Tag>,
    disable: Option<Tag>,
}

impl DwFlag {
    /// Whether the flag is on.
    pub fn enabled(&self) -> bool {
        !self.enables.is_empty() && self.disables.is_empty()
    }

    pub(crate) fn value(&self) -> Value {
        Value::Flag(self.enabled())
    }

    pub(crate) fn is_bottom(&self) -> bool {
        !self.enabled()
    }

    pub(crate) fn generate(&self, op: &Op, ctx: &mut EffectCtx) -> Result<DwFlagEffect, CrdtError> {
        let observed: BTreeSet<Tag> = self.enables.union(&self.disables).copied().collect();
        match op {
            Op::Enable => Ok(DwFlagEffect { observed, enable: Some(fresh_tag(ctx)?), disable: None }),
            Op::Disable => Ok(DwFlagEffect { observed, enable: None, disable: Some(fresh_tag(ctx)?) }),
            Op::Reset => Ok(DwFlagEffect { observed, enable: None, disable: None }),
            other => Err(unsupported(CrdtType::FlagDw, other)),
        }
    }

    pub(crate) fn apply(&mut self, effect: &DwFlagEffect) {
        for tag in &effect.observed {
            self.enables.remove(tag);
            self.disables.remove(tag);
        }
        self.enables.extend(effect.enable);
        self.disables.extend(effect.disable);
    }
}
