//! The live progress line, on stderr: the transactions per second, p50 and p99, errors and the time left. On a
//! terminal it is refreshed in place once a second, over the last second; otherwise a plain line every few seconds
//! covers every transaction since the line before.

use crate::histogram::new_histogram;
use hdrhistogram::Histogram;
use std::io::{IsTerminal, Write};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Counters shared by the sessions and the progress line.
#[derive(Default)]
pub(crate) struct Live {
    pub committed: AtomicU64,
    pub errors: AtomicU64,
    /// Latencies since the last progress tick, one histogram per session (locked once per tick by the printer).
    pub recent: Vec<Mutex<Histogram<u64>>>,
}

/// Seconds between plain lines when stderr is not a terminal.
const PLAIN_EVERY_S: u64 = 5;

pub(crate) struct Progress {
    label: String,
    started: Instant,
    warmup: Duration,
    total: Duration,
    live: Arc<Live>,
    last_committed: u64,
    last_tick: Instant,
    ticks: u64,
    terminal: bool,
    /// Latencies since the last plain line, and when it was printed with how many committed.
    window: Histogram<u64>,
    window_start: (Instant, u64),
}

impl Progress {
    pub(crate) fn new(label: &str, warmup: Duration, duration: Duration, live: Arc<Live>) -> Progress {
        Progress {
            label: label.to_string(),
            started: Instant::now(),
            warmup,
            total: warmup + duration,
            live,
            last_committed: 0,
            last_tick: Instant::now(),
            ticks: 0,
            terminal: std::io::stderr().is_terminal(),
            window: new_histogram(),
            window_start: (Instant::now(), 0),
        }
    }

    pub(crate) fn tick(&mut self) {
        self.ticks += 1;
        let now = Instant::now();
        let committed = self.live.committed.load(Ordering::Relaxed);
        let rate = (committed - self.last_committed) as f64 / now.duration_since(self.last_tick).as_secs_f64();
        self.last_committed = committed;
        self.last_tick = now;
        let mut recent = new_histogram();
        for h in &self.live.recent {
            if let Ok(mut h) = h.lock() {
                // Both histograms have the same bounds, so adding cannot fail.
                let _ = recent.add(&*h);
                h.reset();
            }
        }
        let elapsed = self.started.elapsed();
        let phase = if elapsed < self.warmup { "warm-up" } else { "measuring" };
        let left = self.total.saturating_sub(elapsed).as_secs();
        let line = |rate: f64, h: &Histogram<u64>| {
            format!(
                "{} [{phase}] {:>8.0} txn/s  p50 {:>7.2} ms  p99 {:>7.2} ms  errors {}  {}s left",
                self.label,
                rate,
                h.value_at_quantile(0.5) as f64 / 1000.0,
                h.value_at_quantile(0.99) as f64 / 1000.0,
                self.live.errors.load(Ordering::Relaxed),
                left
            )
        };
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{}", line(rate, &recent));
            let _ = err.flush();
            return;
        }
        let _ = self.window.add(&recent);
        if self.ticks.is_multiple_of(PLAIN_EVERY_S) {
            let (since, before) = self.window_start;
            let rate = (committed - before) as f64 / now.duration_since(since).as_secs_f64();
            let _ = writeln!(err, "{}", line(rate, &self.window));
            self.window.reset();
            self.window_start = (now, committed);
        }
    }

    /// Ends the refreshed line.
    pub(crate) fn finish() {
        if std::io::stderr().is_terminal() {
            let _ = writeln!(std::io::stderr());
        }
    }
}
