//! The node's physical clock: wall-clock microseconds since the Unix epoch, read only here (the protocol core never
//! reads a clock). Readings never go backwards within a process, even if the system clock is stepped back.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A monotone wall clock.
#[derive(Debug, Default)]
pub struct WallClock {
    last_us: AtomicU64,
    /// An operator-set offset (fault injection: skew this node's clock), µs.
    offset_us: AtomicI64,
}

impl WallClock {
    /// A clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// Microseconds since the Unix epoch, never less than an earlier reading.
    pub fn now_us(&self) -> u64 {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0);
        let wall = wall.saturating_add_signed(self.offset_us.load(Ordering::Relaxed));
        let previous = self.last_us.fetch_max(wall, Ordering::Relaxed);
        previous.max(wall)
    }

    /// Skews this node's clock by `offset_us` from the system clock (fault injection). A backward skew makes the
    /// clock stand still until the system clock catches up: readings never go back.
    pub fn set_offset_us(&self, offset_us: i64) {
        self.offset_us.store(offset_us, Ordering::Relaxed);
    }

    /// The current offset.
    pub fn offset_us(&self) -> i64 {
        self.offset_us.load(Ordering::Relaxed)
    }

    /// The tokio instant at which this clock will read `at_us` (far in the future for `u64::MAX`).
    pub fn instant_at(&self, at_us: u64) -> tokio::time::Instant {
        let now = self.now_us();
        let wait = Duration::from_micros(at_us.saturating_sub(now).min(3_600_000_000));
        tokio::time::Instant::now() + wait
    }
}
