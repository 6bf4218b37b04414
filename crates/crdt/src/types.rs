//! The state types and their effects, one module per type, joined by the [`Crdt`] and [`Effect`] enums.
//!
//! Every type keeps its state in ordered collections (`BTreeMap`, `BTreeSet`), so two replicas that applied the
//! same effects hold equal states and encode them to equal bytes, whatever the order of delivery.
//!
//! Most types follow one pattern: each operation that must be observed later carries a fresh [`Tag`], and an
//! effect lists the tags it *observed* (those in the state it was generated against) together with the tags it
//! creates. Applying removes the observed tags and adds the new ones. Concurrent effects never observe each other's
//! tags, which is what makes "concurrent X survives Y" hold and makes concurrent effects commute.

mod codec;
mod counter_b;
mod counter_fat;
mod counter_pn;
mod flag;
mod map;
mod register_lww;
mod register_mv;
mod set_aw;
mod set_go;
mod set_rw;

pub use counter_b::{BCounter, BCounterChange, BCounterEffect};
pub use counter_fat::{FatCounter, FatCounterEffect};
pub use counter_pn::{PnCounter, PnCounterEffect};
pub use flag::{DwFlag, DwFlagEffect, EwFlag, EwFlagEffect};
pub use map::{GoMap, MapEffect, RrMap};
pub use register_lww::{LwwRegister, LwwRegisterEffect};
pub use register_mv::{MvRegister, MvRegisterEffect};
pub use set_aw::{AwSet, AwSetEffect};
pub use set_go::{GoSet, GoSetEffect};
pub use set_rw::{RwSet, RwSetEffect};

use crate::{CrdtError, CrdtType, EffectCtx, Op, Stamp, Tag, Value};
use serde::{Deserialize, Serialize};

/// How many maps may enclose an object: an operation nesting deeper is refused with
/// [`CrdtError::InvalidArgument`], and bytes nesting deeper are refused by the decoders. The bound keeps recursion
/// (generation, application, encoding, decoding, dropping) far from the stack's limit.
pub const MAX_NESTING_DEPTH: usize = 32;

/// The state of one object: one variant per [`CrdtType`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Crdt {
    /// `counter_pn`.
    CounterPn(PnCounter),
    /// `counter_fat`.
    CounterFat(FatCounter),
    /// `counter_b`.
    CounterB(BCounter),
    /// `set_aw`.
    SetAw(AwSet),
    /// `set_rw`.
    SetRw(RwSet),
    /// `set_go`.
    SetGo(GoSet),
    /// `register_lww`.
    RegisterLww(LwwRegister),
    /// `register_mv`.
    RegisterMv(MvRegister),
    /// `flag_ew`.
    FlagEw(EwFlag),
    /// `flag_dw`.
    FlagDw(DwFlag),
    /// `map_go`.
    MapGo(GoMap),
    /// `map_rr`.
    MapRr(RrMap),
}

/// An effect (AntidoteDB's "downstream operation"): what every replica applies. One variant per [`CrdtType`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Effect {
    /// `counter_pn`.
    CounterPn(PnCounterEffect),
    /// `counter_fat`.
    CounterFat(FatCounterEffect),
    /// `counter_b`.
    CounterB(BCounterEffect),
    /// `set_aw`.
    SetAw(AwSetEffect),
    /// `set_rw`.
    SetRw(RwSetEffect),
    /// `set_go`.
    SetGo(GoSetEffect),
    /// `register_lww`.
    RegisterLww(LwwRegisterEffect),
    /// `register_mv`.
    RegisterMv(MvRegisterEffect),
    /// `flag_ew`.
    FlagEw(EwFlagEffect),
    /// `flag_dw`.
    FlagDw(DwFlagEffect),
    /// `map_go`.
    MapGo(MapEffect),
    /// `map_rr`.
    MapRr(MapEffect),
}

impl Crdt {
    /// The type's initial (bottom) value: what an object that was never updated holds.
    pub fn new(ty: CrdtType) -> Crdt {
        match ty {
            CrdtType::CounterPn => Crdt::CounterPn(PnCounter::default()),
            CrdtType::CounterFat => Crdt::CounterFat(FatCounter::default()),
            CrdtType::CounterB => Crdt::CounterB(BCounter::default()),
            CrdtType::SetAw => Crdt::SetAw(AwSet::default()),
            CrdtType::SetRw => Crdt::SetRw(RwSet::default()),
            CrdtType::SetGo => Crdt::SetGo(GoSet::default()),
            CrdtType::RegisterLww => Crdt::RegisterLww(LwwRegister::default()),
            CrdtType::RegisterMv => Crdt::RegisterMv(MvRegister::default()),
            CrdtType::FlagEw => Crdt::FlagEw(EwFlag::default()),
            CrdtType::FlagDw => Crdt::FlagDw(DwFlag::default()),
            CrdtType::MapGo => Crdt::MapGo(GoMap::default()),
            CrdtType::MapRr => Crdt::MapRr(RrMap::default()),
        }
    }

    /// The object's type.
    pub fn ty(&self) -> CrdtType {
        match self {
            Crdt::CounterPn(_) => CrdtType::CounterPn,
            Crdt::CounterFat(_) => CrdtType::CounterFat,
            Crdt::CounterB(_) => CrdtType::CounterB,
            Crdt::SetAw(_) => CrdtType::SetAw,
            Crdt::SetRw(_) => CrdtType::SetRw,
            Crdt::SetGo(_) => CrdtType::SetGo,
            Crdt::RegisterLww(_) => CrdtType::RegisterLww,
            Crdt::RegisterMv(_) => CrdtType::RegisterMv,
            Crdt::FlagEw(_) => CrdtType::FlagEw,
            Crdt::FlagDw(_) => CrdtType::FlagDw,
            Crdt::MapGo(_) => CrdtType::MapGo,
            Crdt::MapRr(_) => CrdtType::MapRr,
        }
    }

    /// The value, in the shape AntidoteDB reads for the type:
    /// counters [`Value::Counter`], sets [`Value::Set`], `register_lww` [`Value::Register`], `register_mv`
    /// [`Value::MvRegister`] (one value per surviving concurrent assign, so equal concurrent assigns show twice, as
    /// in AntidoteDB), flags [`Value::Flag`], maps [`Value::Map`] (a `map_rr` hides entries whose nested value
    /// [`is_bottom`](Crdt::is_bottom)).
    pub fn value(&self) -> Value {
        match self {
            Crdt::CounterPn(c) => c.value(),
            Crdt::CounterFat(c) => c.value(),
            Crdt::CounterB(c) => c.value(),
            Crdt::SetAw(s) => s.value(),
            Crdt::SetRw(s) => s.value(),
            Crdt::SetGo(s) => s.value(),
            Crdt::RegisterLww(r) => r.value(),
            Crdt::RegisterMv(r) => r.value(),
            Crdt::FlagEw(f) => f.value(),
            Crdt::FlagDw(f) => f.value(),
            Crdt::MapGo(m) => m.value(),
            Crdt::MapRr(m) => m.value(),
        }
    }

    /// Turns a client operation into an effect against this state (the transaction's snapshot plus its own
    /// earlier effects). Never mutates `self`; on error `ctx` is left as it was.
    ///
    /// Operations each type accepts:
    /// - `counter_pn`: `Increment`.
    /// - `counter_fat`: `Increment`, `Reset`.
    /// - `counter_b`: `Increment` (a negative amount decrements and needs this DC's rights, else
    ///   [`CrdtError::NoPermissions`]), `Transfer` (needs rights; to another DC, else
    ///   [`CrdtError::InvalidArgument`]).
    /// - `set_aw`, `set_rw`: `Add`, `Remove`, `Reset`. `set_go`: `Add`.
    /// - `register_lww`: `Assign`. `register_mv`: `Assign`, `Reset`.
    /// - `flag_ew`, `flag_dw`: `Enable`, `Disable`, `Reset`.
    /// - `map_go`: `MapUpdate`. `map_rr`: `MapUpdate`, `MapRemove`, `Reset`; any type nests, and removing or
    ///   resetting resets the nested objects whose type has a reset (the others are left as they are).
    ///
    /// Any other operation is refused with [`CrdtError::UnsupportedOp`]. A `MapUpdate` naming one key twice, or
    /// nesting maps deeper than [`MAX_NESTING_DEPTH`], is refused with [`CrdtError::InvalidArgument`].
    pub fn generate(&self, op: &Op, ctx: &mut EffectCtx) -> Result<Effect, CrdtError> {
        let next_seq = ctx.next_seq;
        let result = self.generate_at(op, ctx, 0);
        if result.is_err() {
            ctx.next_seq = next_seq;
        }
        result
    }

    /// [`Crdt::generate`] for an object enclosed by `depth` maps.
    pub(crate) fn generate_at(&self, op: &Op, ctx: &mut EffectCtx, depth: usize) -> Result<Effect, CrdtError> {
        Ok(match self {
            Crdt::CounterPn(c) => Effect::CounterPn(c.generate(op)?),
            Crdt::CounterFat(c) => Effect::CounterFat(c.generate(op, ctx)?),
            Crdt::CounterB(c) => Effect::CounterB(c.generate(op, ctx)?),
            Crdt::SetAw(s) => Effect::SetAw(s.generate(op, ctx)?),
            Crdt::SetRw(s) => Effect::SetRw(s.generate(op, ctx)?),
            Crdt::SetGo(s) => Effect::SetGo(s.generate(op)?),
            Crdt::RegisterLww(r) => Effect::RegisterLww(r.generate(op, ctx)?),
            Crdt::RegisterMv(r) => Effect::RegisterMv(r.generate(op, ctx)?),
            Crdt::FlagEw(f) => Effect::FlagEw(f.generate(op, ctx)?),
            Crdt::FlagDw(f) => Effect::FlagDw(f.generate(op, ctx)?),
            Crdt::MapGo(m) => Effect::MapGo(m.generate(op, ctx, depth)?),
            Crdt::MapRr(m) => Effect::MapRr(m.generate(op, ctx, depth)?),
        })
    }

    /// Applies an effect. Effects may arrive in any order that respects causality; concurrent effects commute.
    /// `stamp` is the committing transaction's [`Stamp`] ([`Stamp::PENDING`] for a transaction reading its own
    /// writes); only last-writer-wins decisions use it, and maps pass it to their nested objects.
    ///
    /// Fails only with [`CrdtError::TypeMismatch`] (the effect, or an effect nested in it, is for another type),
    /// and then leaves `self` unchanged.
    pub fn apply(&mut self, effect: &Effect, stamp: Stamp) -> Result<(), CrdtError> {
        if effect.ty() != self.ty() {
            return Err(CrdtError::TypeMismatch { effect: effect.ty(), object: self.ty() });
        }
        // Checking the whole effect first means the application below cannot fail halfway.
        effect.check_nested_types()?;
        self.apply_checked(effect, stamp)
    }

    /// [`Crdt::apply`] for an effect whose nested types were checked.
    pub(crate) fn apply_checked(&mut self, effect: &Effect, stamp: Stamp) -> Result<(), CrdtError> {
        match (self, effect) {
            (Crdt::CounterPn(c), Effect::CounterPn(e)) => c.apply(e),
            (Crdt::CounterFat(c), Effect::CounterFat(e)) => c.apply(e),
            (Crdt::CounterB(c), Effect::CounterB(e)) => c.apply(e),
            (Crdt::SetAw(s), Effect::SetAw(e)) => s.apply(e),
            (Crdt::SetRw(s), Effect::SetRw(e)) => s.apply(e),
            (Crdt::SetGo(s), Effect::SetGo(e)) => s.apply(e),
            (Crdt::RegisterLww(r), Effect::RegisterLww(e)) => r.apply(e, stamp),
            (Crdt::RegisterMv(r), Effect::RegisterMv(e)) => r.apply(e),
            (Crdt::FlagEw(f), Effect::FlagEw(e)) => f.apply(e),
            (Crdt::FlagDw(f), Effect::FlagDw(e)) => f.apply(e),
            (Crdt::MapGo(m), Effect::MapGo(e)) => return m.apply(e, stamp),
            (Crdt::MapRr(m), Effect::MapRr(e)) => return m.apply(e, stamp),
            (state, effect) => return Err(CrdtError::TypeMismatch { effect: effect.ty(), object: state.ty() }),
        }
        Ok(())
    }

    /// Whether this state reads as the type's initial value (used by `map_rr` to hide entries). This is about
    /// reads only: a state may read as bottom yet hold tags that still matter for concurrent effects (a
    /// `set_rw` remove, a `flag_dw` disable), so it is never discarded on that ground.
    pub fn is_bottom(&self) -> bool {
        match self {
            Crdt::CounterPn(c) => c.is_bottom(),
            Crdt::CounterFat(c) => c.is_bottom(),
            Crdt::CounterB(c) => c.is_bottom(),
            Crdt::SetAw(s) => s.is_bottom(),
            Crdt::SetRw(s) => s.is_bottom(),
            Crdt::SetGo(s) => s.is_bottom(),
            Crdt::RegisterLww(r) => r.is_bottom(),
            Crdt::RegisterMv(r) => r.is_bottom(),
            Crdt::FlagEw(f) => f.is_bottom(),
            Crdt::FlagDw(f) => f.is_bottom(),
            Crdt::MapGo(m) => m.is_bottom(),
            Crdt::MapRr(m) => m.is_bottom(),
        }
    }

    /// Whether this state is exactly the type's initial state, so that forgetting it loses nothing: applying any
    /// effect to it gives the same as applying it to [`Crdt::new`].
    pub(crate) fn is_initial(&self) -> bool {
        *self == Crdt::new(self.ty())
    }

    /// Checks that applying `effect` to this (possibly newer) state keeps the type's invariant. For the bounded
    /// counter (also nested in maps): the effect's decrement or transfer must still be covered by its origin DC's
    /// rights in this state, else [`CrdtError::NoPermissions`]. Every other effect is accepted. An effect for
    /// another type gives [`CrdtError::TypeMismatch`].
    pub fn validate_effect(&self, effect: &Effect) -> Result<(), CrdtError> {
        match (self, effect) {
            (Crdt::CounterB(c), Effect::CounterB(e)) => c.validate_effect(e),
            (Crdt::MapGo(m), Effect::MapGo(e)) => m.validate_effect(e),
            (Crdt::MapRr(m), Effect::MapRr(e)) => m.validate_effect(e),
            (state, effect) if state.ty() == effect.ty() => Ok(()),
            (state, effect) => Err(CrdtError::TypeMismatch { effect: effect.ty(), object: state.ty() }),
        }
    }

    /// The state as compact bytes (postcard, after a format version byte).
    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self)
    }

    /// Reads bytes written by [`Crdt::encode`]. Never panics: garbage gives [`CrdtError::Decode`].
    pub fn decode(bytes: &[u8]) -> Result<Crdt, CrdtError> {
        let state: Crdt = codec::decode(bytes, "state")?;
        state.check_nested_types().map_err(|e| CrdtError::Decode { what: "state".into(), reason: e.to_string() })?;
        Ok(state)
    }

    /// Checks that every nested object has its key's type and that a `map_rr` nests only resettable types.
    pub(crate) fn check_nested_types(&self) -> Result<(), CrdtError> {
        match self {
            Crdt::MapGo(m) => m.check_nested_types(),
            Crdt::MapRr(m) => m.check_nested_types(),
            _ => Ok(()),
        }
    }
}

impl Effect {
    /// The type of object the effect applies to.
    pub fn ty(&self) -> CrdtType {
        match self {
            Effect::CounterPn(_) => CrdtType::CounterPn,
            Effect::CounterFat(_) => CrdtType::CounterFat,
            Effect::CounterB(_) => CrdtType::CounterB,
            Effect::SetAw(_) => CrdtType::SetAw,
            Effect::SetRw(_) => CrdtType::SetRw,
            Effect::SetGo(_) => CrdtType::SetGo,
            Effect::RegisterLww(_) => CrdtType::RegisterLww,
            Effect::RegisterMv(_) => CrdtType::RegisterMv,
            Effect::FlagEw(_) => CrdtType::FlagEw,
            Effect::FlagDw(_) => CrdtType::FlagDw,
            Effect::MapGo(_) => CrdtType::MapGo,
            Effect::MapRr(_) => CrdtType::MapRr,
        }
    }

    /// The effect as compact bytes (postcard, after a format version byte).
    pub fn encode(&self) -> Vec<u8> {
        codec::encode(self)
    }

    /// Reads bytes written by [`Effect::encode`]. Never panics: garbage gives [`CrdtError::Decode`].
    pub fn decode(bytes: &[u8]) -> Result<Effect, CrdtError> {
        let effect: Effect = codec::decode(bytes, "effect")?;
        effect.check_nested_types().map_err(|e| CrdtError::Decode { what: "effect".into(), reason: e.to_string() })?;
        Ok(effect)
    }

    /// Folds `later`, an effect generated after this one against a state that includes this one, into this one,
    /// when one effect does exactly what the two do in order: applied at one stamp, to any state, alone or with
    /// any concurrent effects, the folded effect gives the same state as the pair. Returns whether it folded; if
    /// not, both must be kept, in order. (A buffer of not yet committed effects keeps one effect per run this way.)
    ///
    /// What folds: two `counter_pn` deltas (while their sum fits in an `i64`); two `counter_fat` increments (the
    /// sum under the first one's tag: both are committed together, so no reset anywhere can have seen one without
    /// the other) and an increment by zero into anything, but never a reset (it removes what it saw: an increment
    /// before it must stay apart from one after it); and two `register_lww` assigns (the later one wins). Nothing
    /// else folds.
    pub fn absorb(&mut self, later: &Effect) -> bool {
        match (self, later) {
            (Effect::CounterPn(a), Effect::CounterPn(b)) => a.absorb(b),
            (Effect::CounterFat(a), Effect::CounterFat(b)) => a.absorb(b),
            (Effect::RegisterLww(a), Effect::RegisterLww(b)) => {
                a.absorb(b);
                true
            }
            _ => false,
        }
    }

    /// Whether the effect spends a bounded counter's rights (a decrement or a transfer, also nested in a map): it
    /// holds only where the origin's rights are checked at the moment it commits, so it must not wait in a write
    /// buffer whose handover could meet rights spent meanwhile.
    pub fn spends_rights(&self) -> bool {
        match self {
            Effect::CounterB(e) => !matches!(e.change(), BCounterChange::Increment(_)),
            Effect::MapGo(e) | Effect::MapRr(e) => e.updates().any(|(_, nested)| nested.spends_rights()),
            _ => false,
        }
    }

    /// Checks that every nested effect has its key's type and that a `map_rr` effect nests only resettable types,
    /// so that applying it cannot fail halfway.
    pub(crate) fn check_nested_types(&self) -> Result<(), CrdtError> {
        match self {
            Effect::MapGo(e) => e.check_nested_types(CrdtType::MapGo),
            Effect::MapRr(e) => e.check_nested_types(CrdtType::MapRr),
            _ => Ok(()),
        }
    }
}

impl Op {
    /// The operation's name, as [`CrdtError::UnsupportedOp`] reports it.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Increment(_) => "increment",
            Op::Transfer { .. } => "transfer",
            Op::Add(_) => "add",
            Op::Remove(_) => "remove",
            Op::Assign(_) => "assign",
            Op::Enable => "enable",
            Op::Disable => "disable",
            Op::MapUpdate(_) => "map_update",
            Op::MapRemove(_) => "map_remove",
            Op::Reset => "reset",
        }
    }
}

/// Whether [`Crdt::generate`] reads the state for this operation. When false, generating against
/// [`Crdt::new`]`(ty)` gives the same effect (or the same error) as against any state, so the coordinator may skip
/// reading the object first.
pub fn requires_state(ty: CrdtType, op: &Op) -> bool {
    requires_state_at(ty, op, 0)
}

/// [`requires_state`] for an object enclosed by `depth` maps.
fn requires_state_at(ty: CrdtType, op: &Op, depth: usize) -> bool {
    if depth > MAX_NESTING_DEPTH {
        // Generation refuses operations nesting this deep, whatever the state.
        return false;
    }
    match (ty, op) {
        (CrdtType::CounterPn, Op::Increment(_)) => false,
        (CrdtType::CounterFat, Op::Increment(_)) => false,
        (CrdtType::CounterFat, Op::Reset) => true,
        // Adding rights never needs to know the current ones; spending them does.
        (CrdtType::CounterB, Op::Increment(n)) => *n < 0,
        (CrdtType::CounterB, Op::Transfer { .. }) => true,
        // An add drops the element's observed tags (keeping the state bounded), so it reads them.
        (CrdtType::SetAw | CrdtType::SetRw, Op::Add(_) | Op::Remove(_) | Op::Reset) => true,
        (CrdtType::SetGo, Op::Add(_)) => false,
        (CrdtType::RegisterLww, Op::Assign(_)) => false,
        (CrdtType::RegisterMv, Op::Assign(_) | Op::Reset) => true,
        (CrdtType::FlagEw | CrdtType::FlagDw, Op::Enable | Op::Disable | Op::Reset) => true,
        (CrdtType::MapGo | CrdtType::MapRr, Op::MapUpdate(updates)) => {
            updates.iter().any(|(key, nested)| requires_state_at(key.ty, nested, depth + 1))
        }
        (CrdtType::MapRr, Op::MapRemove(_) | Op::Reset) => true,
        // Every other pair is refused whatever the state.
        _ => false,
    }
}

/// The error for an operation the type does not accept.
pub(crate) fn unsupported(ty: CrdtType, op: &Op) -> CrdtError {
    CrdtError::UnsupportedOp { ty, op: op.name().into() }
}

/// A fresh tag from the context, refusing (instead of panicking) when the transaction has used every sequence
/// number.
pub(crate) fn fresh_tag(ctx: &mut EffectCtx) -> Result<Tag, CrdtError> {
    if ctx.next_seq == u32::MAX {
        return Err(CrdtError::InvalidArgument("the transaction has used every tag sequence number".into()));
    }
    Ok(ctx.next_tag())
}
