//! Timestamps, vector clocks and the two clocks a node can run.

use serde::{Deserialize, Serialize};

/// Bits of a [`Timestamp`] that hold the hybrid logical clock's counter.
pub const LOGICAL_BITS: u32 = 12;

/// A point in time: a hybrid logical clock value ⟨l, c⟩ packed as `l << 12 | c`, where `l` is physical time in
/// microseconds and `c` a counter. Physical-clock timestamps have `c = 0` except to separate events inside one
/// microsecond. 52 bits of microseconds last until the year 2112.
///
/// When `c` overflows its 12 bits the value carries into `l`: the clock then runs at most one microsecond
/// ahead per 4096 events in that microsecond, which keeps the order and stays within the HLC's drift bound in
/// practice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// The zero timestamp, before everything.
    pub const ZERO: Timestamp = Timestamp(0);

    /// The timestamp of a physical time, with counter 0.
    pub fn from_micros(micros: u64) -> Self {
        Timestamp(micros << LOGICAL_BITS)
    }

    /// The physical part, in microseconds.
    pub fn micros(self) -> u64 {
        self.0 >> LOGICAL_BITS
    }

    /// The next timestamp.
    pub fn next(self) -> Self {
        Timestamp(self.0.checked_add(1).expect("timestamp overflow"))
    }

    /// The previous timestamp (saturating at zero).
    pub fn prev(self) -> Self {
        Timestamp(self.0.saturating_sub(1))
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.micros(), self.0 & ((1 << LOGICAL_BITS) - 1))
    }
}

/// One timestamp per DC: a snapshot vector, a commit vector, a pvc or a stable snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VectorClock(Vec<Timestamp>);

impl VectorClock {
    /// The zero vector for `dcs` DCs.
    pub fn zero(dcs: usize) -> Self {
        VectorClock(vec![Timestamp::ZERO; dcs])
    }

    /// A vector from its entries.
    pub fn from_entries(entries: Vec<Timestamp>) -> Self {
        VectorClock(entries)
    }

    /// The entries.
    pub fn entries(&self) -> &[Timestamp] {
        &self.0
    }

    /// The number of entries (DCs).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the vector has no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entry of a DC.
    pub fn get(&self, dc: crate::DcId) -> Timestamp {
        self.0[usize::from(dc.0)]
    }

    /// Sets the entry of a DC.
    pub fn set(&mut self, dc: crate::DcId, ts: Timestamp) {
        self.0[usize::from(dc.0)] = ts;
    }

    /// Whether every entry is at most the other's: the snapshot `self` is contained in `other`.
    pub fn le(&self, other: &VectorClock) -> bool {
        debug_assert_eq!(self.0.len(), other.0.len());
        self.0.iter().zip(&other.0).all(|(a, b)| a <= b)
    }

    /// Entry-wise maximum, in place.
    pub fn merge_max(&mut self, other: &VectorClock) {
        debug_assert_eq!(self.0.len(), other.0.len());
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).max(*b);
        }
    }

    /// Entry-wise minimum, in place.
    pub fn merge_min(&mut self, other: &VectorClock) {
        debug_assert_eq!(self.0.len(), other.0.len());
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            *a = (*a).min(*b);
        }
    }

    /// The sum of the entries: strictly monotone along strict vector dominance, so ordering by it extends
    /// causality. Used as the last-writer-wins order of commits.
    pub fn sum(&self) -> u128 {
        self.0.iter().map(|t| u128::from(t.0)).sum()
    }

    /// Whether the vector has the shape of a configuration with `dcs` DCs.
    pub fn has_dcs(&self, dcs: usize) -> bool {
        self.0.len() == dcs
    }
}

impl std::fmt::Display for VectorClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[")?;
        for (i, t) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{t}")?;
        }
        f.write_str("]")
    }
}

/// Which clock a node runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockKind {
    /// Cure's physical clock: a partition asked for a snapshot ahead of its clock waits until its clock gets there.
    Physical,
    /// A hybrid logical clock (CausalSpartanX §2.5, Alg. 2.1): a partition that sees a timestamp ahead of its clock
    /// advances the clock instead of waiting. The default.
    #[default]
    Hybrid,
}

/// A node's clock. Both kinds hand out strictly increasing timestamps from [`Clock::tick`] and never go back.
///
/// The HLC rules of the thesis map onto the packed [`Timestamp`]: a local or send event is
/// `max(pt, last + 1)` (if physical time moved on, the counter restarts at 0; otherwise it increments), and a
/// receive event first raises `last` to the received timestamp ([`Clock::observe`]).
#[derive(Clone, Debug)]
pub struct Clock {
    kind: ClockKind,
    last: Timestamp,
}

impl Clock {
    /// A clock of the given kind that has issued nothing yet.
    pub fn new(kind: ClockKind) -> Self {
        Self { kind, last: Timestamp::ZERO }
    }

    /// The clock's kind.
    pub fn kind(&self) -> ClockKind {
        self.kind
    }

    /// The current time, without an event: at least every timestamp issued so far. Reading it fixes a floor: a
    /// later [`Clock::tick`] is strictly greater.
    pub fn current(&mut self, now_us: u64) -> Timestamp {
        self.last = self.last.max(Timestamp::from_micros(now_us));
        self.last
    }

    /// A new event's timestamp, strictly greater than every timestamp this clock issued or observed.
    pub fn tick(&mut self, now_us: u64) -> Timestamp {
        self.last = self.last.next().max(Timestamp::from_micros(now_us));
        self.last
    }

    /// Receives a timestamp from elsewhere. A hybrid clock moves up to it and returns true; a physical clock
    /// cannot move and returns whether it is already there.
    pub fn observe(&mut self, ts: Timestamp) -> bool {
        match self.kind {
            ClockKind::Hybrid => {
                self.last = self.last.max(ts);
                true
            }
            ClockKind::Physical => self.last >= ts,
        }
    }

    /// Raises the floor of the clock (recovery: never issue a timestamp at or below one issued before a crash).
    pub fn raise_floor(&mut self, ts: Timestamp) {
        self.last = self.last.max(ts);
    }

    /// The last timestamp issued or observed.
    pub fn last(&self) -> Timestamp {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hlc_tick_is_strictly_monotone_when_physical_time_stands_still() {
        let mut c = Clock::new(ClockKind::Hybrid);
        let a = c.tick(100);
        let b = c.tick(100);
        let d = c.tick(99);
        assert!(a < b && b < d);
        assert_eq!(a, Timestamp::from_micros(100));
        assert_eq!(d.micros(), 100);
    }

    #[test]
    fn hlc_observe_advances_instead_of_waiting() {
        let mut c = Clock::new(ClockKind::Hybrid);
        assert!(c.observe(Timestamp::from_micros(5_000)));
        assert!(c.tick(10) > Timestamp::from_micros(5_000));
    }

    #[test]
    fn physical_clock_refuses_to_jump_ahead() {
        let mut c = Clock::new(ClockKind::Physical);
        assert!(!c.observe(Timestamp::from_micros(5_000)));
        assert_eq!(c.tick(10), Timestamp::from_micros(10));
        c.current(5_000);
        assert!(c.observe(Timestamp::from_micros(5_000)));
    }

    #[test]
    fn tick_exceeds_every_current_reading() {
        let mut c = Clock::new(ClockKind::Physical);
        let cur = c.current(42);
        assert!(c.tick(42) > cur);
    }

    #[test]
    fn vector_sum_extends_dominance() {
        let a = VectorClock::from_entries(vec![Timestamp(3), Timestamp(5)]);
        let mut b = a.clone();
        b.set(crate::DcId(1), Timestamp(6));
        assert!(a.le(&b) && !b.le(&a));
        assert!(a.sum() < b.sum());
    }
}
