//! `register_lww`: last-writer-wins register.

use super::{fresh_tag, unsupported};
use crate::{CrdtError, CrdtType, EffectCtx, Op, Stamp, Value};
use serde::{Deserialize, Serialize};

/// `register_lww` state: the winning value and the position of its write, `(stamp, seq)`: the committing
/// transaction's [`Stamp`], then the assign's sequence number inside the transaction, so that a later assign of
/// the same transaction wins. Stamps are unique per transaction, so two different writes never tie.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LwwRegister {
    value: Vec<u8>,
    written: Option<(Stamp, u32)>,
}

/// `register_lww` effect: the value and the assign's sequence number inside its transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LwwRegisterEffect {
    value: Vec<u8>,
    seq: u32,
}

impl LwwRegister {
    /// The current value (empty when never assigned).
    pub fn current(&self) -> &[u8] {
        &self.value
    }

    /// The stamp and sequence number of the winning write, if any.
    pub fn written(&self) -> Option<(Stamp, u32)> {
        self.written
    }

    pub(crate) fn value(&self) -> Value {
        Value::Register(self.value.clone())
    }

    pub(crate) fn is_bottom(&self) -> bool {
        self.value.is_empty()
    }

    pub(crate) fn generate(&self, op: &Op, ctx: &mut EffectCtx) -> Result<LwwRegisterEffect, CrdtError> {
        match op {
            Op::Assign(value) => Ok(LwwRegisterEffect { value: value.clone(), seq: fresh_tag(ctx)?.seq }),
            other => Err(unsupported(CrdtType::RegisterLww, other)),
        }
    }

    pub(crate) fn apply(&mut self, effect: &LwwRegisterEffect, stamp: Stamp) {
        let position = (stamp, effect.seq);
        if self.written.is_none_or(|written| position > written) {
            self.value.clone_from(&effect.value);
            self.written = Some(position);
        }
    }
}

impl LwwRegisterEffect {
    /// Folds `later` (applied after this one, at the same stamp) into this one: what applying both leaves. The
    /// higher sequence number wins; at equal ones, the first applied stays. A later effect may carry a lower
    /// number: a write buffer's concurrent transactions number their effects from where the buffer stood when
    /// each started.
    pub(crate) fn absorb(&mut self, later: &LwwRegisterEffect) {
        if later.seq > self.seq {
            self.clone_from(later);
        }
    }
}
