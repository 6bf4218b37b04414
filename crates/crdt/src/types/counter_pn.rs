//! `counter_pn`: an integer counter with increments and decrements, no reset.

use super::unsupported;
use crate::{CrdtError, CrdtType, Op, Value};
use serde::{Deserialize, Serialize};

/// `counter_pn` state: the sum of every increment applied, exact in 128 bits (AntidoteDB's counters are unbounded:
/// 2^64 increments of `i64::MAX` would be needed to leave the range, and even then the arithmetic wraps rather than
/// panics, so application always commutes). Reads saturate at `i64`'s limits, which no 32-bit protocol field
/// takes anyway: a sum past them is refused as too large instead of read as a wrapped, wrong number.
///
/// Postcard encodes `i64` and `i128` alike (zigzag varints), so states written when the sum was an `i64` decode
/// unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PnCounter {
    total: i128,
}

/// `counter_pn` effect: the amount to add (negative to decrement).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PnCounterEffect {
    delta: i64,
}

impl PnCounterEffect {
    /// Adds `later`'s delta to this one's, if the sum fits (`Effect::absorb`).
    pub(crate) fn absorb(&mut self, later: &PnCounterEffect) -> bool {
        match self.delta.checked_add(later.delta) {
            Some(sum) => {
                self.delta = sum;
                true
            }
            None => false,
        }
    }
}

impl PnCounter {
    /// The counter's value, saturated at `i64`'s limits.
    pub fn total(&self) -> i64 {
        saturate(self.total)
    }

    pub(crate) fn value(&self) -> Value {
        Value::Counter(self.total())
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
        self.total = self.total.wrapping_add(i128::from(effect.delta));
    }
}

impl PnCounterEffect {
    /// The amount the effect adds.
    pub fn delta(&self) -> i64 {
        self.delta
    }
}

/// `total` clamped into `i64`.
pub(crate) fn saturate(total: i128) -> i64 {
    i64::try_from(total).unwrap_or(if total < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    /// States stored when the sum was an `i64` decode as the same `i128` sum.
    #[test]
    fn an_i64_sum_encodes_as_the_same_i128_sum() {
        for v in [0, 1, -2, 300, -70_000, i64::MAX, i64::MIN] {
            let old = postcard::to_allocvec(&v).expect("encodes");
            assert_eq!(old, postcard::to_allocvec(&i128::from(v)).expect("encodes"), "{v}");
            assert_eq!(postcard::from_bytes::<i128>(&old).expect("decodes"), i128::from(v));
        }
    }
}
