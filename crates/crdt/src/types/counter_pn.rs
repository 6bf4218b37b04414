//! `counter_pn`: an integer counter with increments and decrements, no reset.

use super::unsupported;
use crate::{CrdtError, CrdtType, Op, Value};
use serde::{Deserialize, Serialize};

/// `counter_pn` state: the sum of every increment applied. Arithmetic wraps, so application commutes and never
/// panics even past `i64`'s range.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PnCounter {
    total: i64,
}

/// `counter_pn` effect: the amount to add (negative to decrement).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PnCounterEffect {
    delta: i64,
}

impl PnCounter {
    /// The counter's value.
    pub fn total(&self) -> i64 {
        self.total
    }

    pub(crate) fn value(&self) -> Value {
        Value::Counter(self.total)
    }

    pub(crate) fn is_bottom(&self) -> bool {
        self.total == 0
    }

    pub(crate) fn generate(&self, op: &Op) -> Result<PnCounterEffect, CrdtError> {
        match op {
            Op::Increment(delta) => Ok(PnCounterEffect { delta: *delta }),
            other => Err(unsupported(CrdtType::CounterPn, other)),
        }
    }

    pub(crate) fn apply(&mut self, effect: &PnCounterEffect) {
        self.total = self.total.wrapping_add(effect.delta);
    }
}

impl PnCounterEffect {
    /// The amount the effect adds.
    pub fn delta(&self) -> i64 {
        self.delta
    }
}
