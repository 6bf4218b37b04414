//! The node's physical clock: wall-clock microseconds since the Unix epoch, read only here (the protocol core never
//! reads a clock). Readings never go backwards within a process, even if the system clock is stepped back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A monotone wall clock.
#[derive(Debug, Default)]
pub struct WallClock {
    last_us: AtomicU64,
}

impl WallClock {
    /// A clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// Microseconds since the Unix epoch, never less than an earlier reading.
    pub fn now_us(&self) -> u64 {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0);
        let previous = self.last_us.fetch_max(wall, Ordering::Relaxed);
        previous.max(wall)
    }

    /// The tokio instant at which this clock will read `at_us` (far in the future for `u64::MAX`).
    pub fn instant_at(&self, at_us: u64) -> tokio::time::Instant {
        let now = self.now_us();
        let wait = Duration::from_micros(at_us.saturating_sub(now).min(3_600_000_000));
        tokio::time::Instant::now() + wait
    }
}
