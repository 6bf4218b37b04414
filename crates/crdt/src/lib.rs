//! AntidoteDB's CRDT types with AntidoteDB's semantics, as pure operation-based state machines.
//!
//! Every type follows the same life cycle:
//! 1. At the origin, a client [`Op`] is turned into an [`Effect`] by [`Crdt::generate`], against the state the
//!    transaction reads (its snapshot plus its own earlier effects). Unique tags come from the [`EffectCtx`]
//!    (the transaction's id and a sequence number), never from a random source or a clock.
//! 2. Every replica applies the effect with [`Crdt::apply`], in an order that respects causality; concurrent
//!    effects commute. Last-writer-wins decisions use the [`Stamp`] the transaction received at commit.
//! 3. [`Crdt::value`] reads the value in the shape AntidoteDB returns for the type.
//!
//! The crate is pure: no I/O, no clock, no randomness.

#![warn(missing_docs)]

pub mod error;
pub use error::CrdtError;

mod types;
pub use types::*;

use serde::{Deserialize, Serialize};

/// The CRDT types, numbered as in AntidoteDB's `antidote.proto` (`CRDT_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum CrdtType {
    /// `counter_pn` (COUNTER = 3): increments and decrements, no reset.
    CounterPn,
    /// `counter_fat` (FATCOUNTER = 12): a counter whose reset removes only the increments it has seen.
    CounterFat,
    /// `counter_b` (BCOUNTER = 15): a non-negative counter with per-DC rights.
    CounterB,
    /// `set_aw` (ORSET = 4): add-wins observed-remove set.
    SetAw,
    /// `set_rw` (RWSET = 10): remove-wins set.
    SetRw,
    /// `set_go`: grow-only set (not in AntidoteDB's protocol enum; reachable from the Rust API).
    SetGo,
    /// `register_lww` (LWWREG = 5): last-writer-wins register.
    RegisterLww,
    /// `register_mv` (MVREG = 6): multi-value register.
    RegisterMv,
    /// `flag_ew` (FLAG_EW = 13): enable-wins flag.
    FlagEw,
    /// `flag_dw` (FLAG_DW = 14): disable-wins flag.
    FlagDw,
    /// `map_go` (GMAP = 8): grow-only map of nested CRDTs.
    MapGo,
    /// `map_rr` (RRMAP = 11): recursive-reset map.
    MapRr,
}

impl CrdtType {
    /// Every type, in a fixed order.
    pub const ALL: [CrdtType; 12] = [
        CrdtType::CounterPn,
        CrdtType::CounterFat,
        CrdtType::CounterB,
        CrdtType::SetAw,
        CrdtType::SetRw,
        CrdtType::SetGo,
        CrdtType::RegisterLww,
        CrdtType::RegisterMv,
        CrdtType::FlagEw,
        CrdtType::FlagDw,
        CrdtType::MapGo,
        CrdtType::MapRr,
    ];

    /// AntidoteDB's name for the type (`antidote_crdt_*` without the prefix).
    pub fn name(self) -> &'static str {
        match self {
            CrdtType::CounterPn => "counter_pn",
            CrdtType::CounterFat => "counter_fat",
            CrdtType::CounterB => "counter_b",
            CrdtType::SetAw => "set_aw",
            CrdtType::SetRw => "set_rw",
            CrdtType::SetGo => "set_go",
            CrdtType::RegisterLww => "register_lww",
            CrdtType::RegisterMv => "register_mv",
            CrdtType::FlagEw => "flag_ew",
            CrdtType::FlagDw => "flag_dw",
            CrdtType::MapGo => "map_go",
            CrdtType::MapRr => "map_rr",
        }
    }

    /// Whether the type supports the `reset` operation (removing it from a `map_rr` resets it; without a reset, a
    /// removal leaves it as it is).
    pub fn supports_reset(self) -> bool {
        matches!(
            self,
            CrdtType::CounterFat
                | CrdtType::SetAw
                | CrdtType::SetRw
                | CrdtType::RegisterMv
                | CrdtType::FlagEw
                | CrdtType::FlagDw
                | CrdtType::MapRr
        )
    }
}

impl std::fmt::Display for CrdtType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A globally unique transaction identity, opaque to this crate. The core packs its transaction id into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxTag(pub u128);

/// A unique tag: the transaction that generated it and a sequence number inside that transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Tag {
    /// The generating transaction.
    pub tx: TxTag,
    /// Position among the tags the transaction generated.
    pub seq: u32,
}

/// A data centre's index, as the bounded counter's rights are kept per DC.
pub type DcIndex = u16;

/// Context for generating effects: where unique tags and the origin DC come from.
#[derive(Clone, Debug)]
pub struct EffectCtx {
    /// The transaction generating effects.
    pub tx: TxTag,
    /// The DC the transaction runs in (the bounded counter spends this DC's rights).
    pub dc: DcIndex,
    /// The next tag sequence number; [`EffectCtx::next_tag`] advances it.
    pub next_seq: u32,
}

impl EffectCtx {
    /// A context for a transaction, starting at sequence number 0.
    pub fn new(tx: TxTag, dc: DcIndex) -> Self {
        Self { tx, dc, next_seq: 0 }
    }

    /// A fresh tag, unique across all transactions.
    pub fn next_tag(&mut self) -> Tag {
        let tag = Tag { tx: self.tx, seq: self.next_seq };
        self.next_seq = self.next_seq.checked_add(1).expect("more than 2^32 tags in one transaction");
        tag
    }
}

/// The total order a committed transaction's effects take in last-writer-wins decisions.
///
/// The core sets `time` so that the order extends causality (if T1 happened before T2, T1's stamp is smaller):
/// it uses the sum of the entries of the commit vector, which grows strictly along causality because a
/// transaction's commit vector strictly dominates its snapshot. Ties between concurrent transactions are broken
/// by the transaction tag, identically everywhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Stamp {
    /// Causality-extending time.
    pub time: u128,
    /// Tie-break.
    pub tx: TxTag,
}

impl Stamp {
    /// The stamp a transaction's own, not yet committed effects take when it reads them: above every committed
    /// effect in its snapshot, since its commit will be too.
    pub const PENDING: Stamp = Stamp { time: u128::MAX, tx: TxTag(u128::MAX) };
}

/// A key of a nested object in a map: the nested key and its type.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MapKey {
    /// The nested key.
    pub key: Vec<u8>,
    /// The nested object's type.
    pub ty: CrdtType,
}

/// A client operation, as AntidoteDB's protocol expresses them. Which operations a type accepts is documented on
/// [`Crdt::generate`]; any other is refused with [`CrdtError::UnsupportedOp`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Counters: add `n` (negative to decrement).
    Increment(i64),
    /// Bounded counter: move `amount` rights from this DC to DC `to`.
    Transfer {
        /// Rights to move.
        amount: u64,
        /// Receiving DC.
        to: DcIndex,
    },
    /// Sets: add the elements (AntidoteDB's `add` and `add_all`).
    Add(Vec<Vec<u8>>),
    /// Sets: remove the elements (AntidoteDB's `remove` and `remove_all`).
    Remove(Vec<Vec<u8>>),
    /// Registers: assign the value.
    Assign(Vec<u8>),
    /// Flags: enable.
    Enable,
    /// Flags: disable.
    Disable,
    /// Maps: apply each nested operation to the nested object at its key.
    MapUpdate(Vec<(MapKey, Op)>),
    /// `map_rr`: remove the keys (reset their nested objects).
    MapRemove(Vec<MapKey>),
    /// Reset to the initial value, for the types that support it.
    Reset,
}

/// A read value, in the shape AntidoteDB answers for each type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Value {
    /// Counters.
    Counter(i64),
    /// Sets: the elements in ascending byte order.
    Set(Vec<Vec<u8>>),
    /// `register_lww`: the value (empty when never assigned, as AntidoteDB answers).
    Register(Vec<u8>),
    /// `register_mv`: the concurrent values in ascending byte order (empty when never assigned).
    MvRegister(Vec<Vec<u8>>),
    /// Flags.
    Flag(bool),
    /// Maps: the entries in ascending key order.
    Map(Vec<(MapKey, Value)>),
}
