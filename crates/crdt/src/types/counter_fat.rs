//! `counter_fat`: a counter whose reset removes only the increments it has seen.

use super::{fresh_tag, unsupported};
use crate::{CrdtError, CrdtType, EffectCtx, Op, Tag, Value};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// `counter_fat` state: every increment not yet removed by a reset that saw it, by its tag. The value is their
/// sum, exact in 128 bits and read saturated at `i64`'s limits (as `counter_pn`'s).
///
/// The state holds one entry per increment since the last reset that saw it, as AntidoteDB's does. Folding
/// observed increments into a new entry would bound it, but a concurrent reset that saw the folded increments
/// would then no longer remove them, breaking "a reset removes what it has seen".
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FatCounter {
    increments: BTreeMap<Tag, i64>,
}

/// `counter_fat` effect: an increment under a fresh tag, or a reset removing the increments it observed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FatCounterEffect {
    increment: Option<(Tag, i64)>,
    observed: BTreeSet<Tag>,
}

impl FatCounterEffect {
    /// Folds `later` into this effect when neither is a reset (`Effect::absorb`): two increments become one under
    /// this one's tag, and an increment by zero (no tag, nothing observed) changes nothing.
    pub(crate) fn absorb(&mut self, later: &FatCounterEffect) -> bool {
        if !later.observed.is_empty() {
            return false;
        }
        let Some((_, delta)) = later.increment else { return true };
        if !self.observed.is_empty() {
            return false;
        }
        match &mut self.increment {
            None => {
                self.increment = later.increment;
                true
            }
            Some((_, mine)) => match mine.checked_add(delta) {
                Some(sum) => {
                    *mine = sum;
                    true
                }
                None => false,
            },
        }
    }
}

impl FatCounter {
    /// The counter's value, saturated at `i64`'s limits.
    pub fn total(&self) -> i64 {
        super::counter_pn::saturate(self.increments.values().map(|&delta| i128::from(delta)).sum())
    }

    /// How many increments the state holds.
    pub fn increment_count(&self) -> usize {
        self.increments.len()
    }

    pub(crate) fn value(&self) -> Value {
        Value::Counter(self.total())
    }

    pub(crate) fn is_bottom(&self) -> bool {
        self.increments.values().map(|&delta| i128::from(delta)).sum::<i128>() == 0
    }

    pub(crate) fn generate(&self, op: &Op, ctx: &mut EffectCtx) -> Result<FatCounterEffect, CrdtError> {
        match op {
            // An increment by zero would add an entry that changes nothing.
            Op::Increment(0) => Ok(FatCounterEffect { increment: None, observed: BTreeSet::new() }),
            Op::Increment(delta) => {
                Ok(FatCounterEffect { increment: Some((fresh_tag(ctx)?, *delta)), observed: BTreeSet::new() })
            }
            Op::Reset => Ok(FatCounterEffect { increment: None, observed: self.increments.keys().copied().collect() }),
            other => Err(unsupported(CrdtType::CounterFat, other)),
        }
    }

    pub(crate) fn apply(&mut self, effect: &FatCounterEffect) {
        for tag in &effect.observed {
            self.increments.remove(tag);
        }
        if let Some((tag, delta)) = effect.increment {
            self.increments.insert(tag, delta);
        }
    }
}
