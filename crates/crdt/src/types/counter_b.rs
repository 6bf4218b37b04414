//! `counter_b`: a non-negative counter whose rights to decrement are held per DC and moved between DCs.
//!
//! Each DC may decrement only what its own rights cover, checked against the state it generates from. Because a
//! DC's rights only shrink through its own decrements and transfers, which every replica applies in causal order
//! after the increments and transfers they relied on, no replica ever sees a DC's rights, nor the value, go
//! negative. Concurrent transactions of one DC could still both spend the same rights; the core refuses the
//! second at prepare time with [`Crdt::validate_effect`](crate::Crdt::validate_effect).

use super::unsupported;
use crate::{CrdtError, CrdtType, DcIndex, EffectCtx, Op, Value};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `counter_b` state.
///
/// `transfers[(i, i)]` holds the increments made at DC `i`; `transfers[(i, j)]` for `i != j` the rights DC `i`
/// gave DC `j`; `decrements[i]` the decrements made at DC `i`. Amounts add saturating (commutative for
/// non-negative amounts) and zero amounts are never stored, so equal histories give equal states.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BCounter {
    transfers: BTreeMap<(DcIndex, DcIndex), u64>,
    decrements: BTreeMap<DcIndex, u64>,
}

/// What a `counter_b` effect does at its origin DC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BCounterChange {
    /// Adds rights (and value) at the origin.
    Increment(u64),
    /// Spends the origin's rights (and value).
    Decrement(u64),
    /// Moves rights from the origin to DC `to`.
    Transfer {
        /// Rights moved.
        amount: u64,
        /// Receiving DC (never the origin).
        to: DcIndex,
    },
}

/// `counter_b` effect: a change made at an origin DC.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BCounterEffect {
    origin: DcIndex,
    change: BCounterChange,
}

impl BCounter {
    /// The rights DC `dc` holds: its increments, plus the rights it received, minus those it gave away and its
    /// decrements. Never negative in a state built by causal application; clamped at zero otherwise.
    pub fn local_rights(&self, dc: DcIndex) -> u64 {
        let rights = self.rights_balance(dc);
        u64::try_from(rights.max(0)).unwrap_or(u64::MAX)
    }

    /// DC `dc`'s rights as a signed number, without clamping.
    fn rights_balance(&self, dc: DcIndex) -> i128 {
        let mut rights: i128 = 0;
        for (&(from, to), &amount) in &self.transfers {
            if to == dc {
                rights += i128::from(amount);
            } else if from == dc {
                rights -= i128::from(amount);
            }
        }
        rights - i128::from(self.decrements.get(&dc).copied().unwrap_or(0))
    }

    /// The counter's value, unclamped: every increment minus every decrement.
    pub fn total(&self) -> i128 {
        let increments: i128 =
            self.transfers.iter().filter(|((from, to), _)| from == to).map(|(_, &amount)| i128::from(amount)).sum();
        let decrements: i128 = self.decrements.values().map(|&amount| i128::from(amount)).sum();
        increments - decrements
    }

    /// The increments made at DC `dc`.
    pub fn increments(&self, dc: DcIndex) -> u64 {
        self.transfers.get(&(dc, dc)).copied().unwrap_or(0)
    }

    /// The decrements made at DC `dc`.
    pub fn decrements(&self, dc: DcIndex) -> u64 {
        self.decrements.get(&dc).copied().unwrap_or(0)
    }

    /// The rights DC `from` gave DC `to` (for `from != to`).
    pub fn transferred(&self, from: DcIndex, to: DcIndex) -> u64 {
        if from == to {
            return 0;
        }
        self.transfers.get(&(from, to)).copied().unwrap_or(0)
    }

    /// Every DC the state mentions, in ascending order.
    pub fn dcs(&self) -> Vec<DcIndex> {
        let mut dcs: Vec<DcIndex> =
            self.transfers.keys().flat_map(|&(from, to)| [from, to]).chain(self.decrements.keys().copied()).collect();
        dcs.sort_unstable();
        dcs.dedup();
        dcs
    }

    pub(crate) fn value(&self) -> Value {
        let total = self.total().clamp(i128::from(i64::MIN), i128::from(i64::MAX));
        Value::Counter(i64::try_from(total).unwrap_or(i64::MAX))
    }

    pub(crate) fn is_bottom(&self) -> bool {
        self.total() == 0
    }

    /// Refuses to spend more than `dc` holds.
    fn check_rights(&self, dc: DcIndex, requested: u64) -> Result<(), CrdtError> {
        let available = self.local_rights(dc);
        if requested > available {
            return Err(CrdtError::NoPermissions { dc, requested, available });
        }
        Ok(())
    }

    pub(crate) fn generate(&self, op: &Op, ctx: &mut EffectCtx) -> Result<BCounterEffect, CrdtError> {
        let origin = ctx.dc;
        let change = match *op {
            Op::Increment(n) if n >= 0 => BCounterChange::Increment(n.unsigned_abs()),
            Op::Increment(n) => {
                let amount = n.unsigned_abs();
                self.check_rights(origin, amount)?;
                BCounterChange::Decrement(amount)
            }
            Op::Transfer { amount, to } => {
                if to == origin {
                    return Err(CrdtError::InvalidArgument(format!(
                        "bounded counter: DC {origin} cannot transfer rights to itself"
                    )));
                }
                self.check_rights(origin, amount)?;
                BCounterChange::Transfer { amount, to }
            }
            ref other => return Err(unsupported(CrdtType::CounterB, other)),
        };
        Ok(BCounterEffect { origin, change })
    }

    pub(crate) fn validate_effect(&self, effect: &BCounterEffect) -> Result<(), CrdtError> {
        match effect.change {
            BCounterChange::Increment(_) => Ok(()),
            BCounterChange::Decrement(amount) | BCounterChange::Transfer { amount, .. } => {
                self.check_rights(effect.origin, amount)
            }
        }
    }

    pub(crate) fn apply(&mut self, effect: &BCounterEffect) {
        let origin = effect.origin;
        match effect.change {
            BCounterChange::Increment(amount) => add_to(&mut self.transfers, (origin, origin), amount),
            BCounterChange::Decrement(amount) => add_to(&mut self.decrements, origin, amount),
            // A decoded effect might name its origin as receiver; that would mint rights, so it does nothing.
            BCounterChange::Transfer { to, .. } if to == origin => {}
            BCounterChange::Transfer { amount, to } => add_to(&mut self.transfers, (origin, to), amount),
        }
    }
}

/// Adds `amount` to the entry at `key`, saturating, storing nothing for zero.
fn add_to<K: Ord>(entries: &mut BTreeMap<K, u64>, key: K, amount: u64) {
    if amount == 0 {
        return;
    }
    let entry = entries.entry(key).or_insert(0);
    *entry = entry.saturating_add(amount);
}

impl BCounterEffect {
    /// The DC whose rights the effect changes.
    pub fn origin(&self) -> DcIndex {
        self.origin
    }

    /// What the effect does.
    pub fn change(&self) -> BCounterChange {
        self.change
    }
}
