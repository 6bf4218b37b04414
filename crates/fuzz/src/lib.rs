//! Fuzzing of every decoder that faces the network or the disk: the client protocol's framing
//! ([`targets::frame`]), request decoding ([`targets::request`]), CRDT effects as replication and the log carry
//! them ([`targets::effect`]) and CRDT states as checkpoints carry them ([`targets::state`]).
//!
//! The targets are plain functions of a byte slice, so two engines drive them:
//! - [`run`], a seeded mutation fuzzer on stable Rust (no coverage feedback): it starts from valid encodings
//!   produced by the project's own encoders ([`corpus`]) and mutates them (bit flips, interesting values,
//!   insertions, deletions, duplications, truncations, splices). `cargo run --release -p causet-fuzz -- all
//!   --seconds 60`; CI runs a short smoke test (`tests/smoke.rs`).
//! - cargo-fuzz / libFuzzer with coverage feedback, for long runs on nightly: `fuzz/` at the repository root
//!   (`cargo +nightly fuzz run request`).
//!
//! A panic in a target is a finding: the runner reports the seed and the input in hex, and saves the input.

#![warn(missing_docs)]

pub mod corpus;
pub mod targets;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

/// The longest input the mutator builds.
pub const MAX_INPUT_BYTES: usize = 4096;

/// How long a run goes on.
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    /// This many inputs.
    Iterations(u64),
    /// This long.
    Time(Duration),
}

/// An input that made a target panic.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The target.
    pub target: &'static str,
    /// The input.
    pub input: Vec<u8>,
    /// The panic's message.
    pub message: String,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct RunStats {
    /// Inputs tried.
    pub inputs: u64,
    /// Seconds.
    pub seconds: f64,
}

/// Runs `target` on the corpus and on mutations of it until the budget is spent or an input panics.
pub fn run(name: &'static str, target: fn(&[u8]), seed: u64, budget: Budget) -> Result<RunStats, Finding> {
    let corpus = corpus::seeds(name);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let started = Instant::now();
    let mut stats = RunStats::default();
    let previous_hook = std::panic::take_hook();
    // Silence the default hook while running: a finding is reported once, with its input.
    std::panic::set_hook(Box::new(|_| {}));
    let result = (|| {
        let mut index = 0u64;
        loop {
            match budget {
                Budget::Iterations(n) if index >= n => break,
                Budget::Time(d) if index.is_multiple_of(256) && started.elapsed() >= d => break,
                _ => {}
            }
            let input = if (index as usize) < corpus.len() {
                corpus[index as usize].clone()
            } else {
                mutate(&mut rng, &corpus)
            };
            index += 1;
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| target(&input))) {
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a panic without a message".into());
                return Err(Finding { target: name, input, message });
            }
        }
        stats.inputs = index;
        Ok(())
    })();
    std::panic::set_hook(previous_hook);
    stats.seconds = started.elapsed().as_secs_f64();
    result.map(|()| stats)
}

/// Values that often sit on a boundary.
const INTERESTING: [u8; 10] = [0x00, 0x01, 0x02, 0x7f, 0x80, 0x81, 0xfe, 0xff, 0x40, 0x10];

/// One input: a corpus entry (or random bytes) with one to eight mutations.
pub fn mutate(rng: &mut ChaCha8Rng, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut input = if corpus.is_empty() || rng.random_bool(0.02) {
        let n = rng.random_range(0..64);
        (0..n).map(|_| rng.random()).collect()
    } else {
        corpus[rng.random_range(0..corpus.len())].clone()
    };
    for _ in 0..rng.random_range(1..=8) {
        let len = input.len();
        match rng.random_range(0..9) {
            0 if len > 0 => {
                let i = rng.random_range(0..len);
                input[i] ^= 1 << rng.random_range(0..8);
            }
            1 if len > 0 => {
                let i = rng.random_range(0..len);
                input[i] = INTERESTING[rng.random_range(0..INTERESTING.len())];
            }
            2 if len > 0 => {
                let i = rng.random_range(0..len);
                input[i] = rng.random();
            }
            3 => {
                let i = rng.random_range(0..=len);
                let n = rng.random_range(1..=8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                input.splice(i..i, bytes);
            }
            4 if len > 0 => {
                let i = rng.random_range(0..len);
                let n = rng.random_range(1..=(len - i).min(16));
                input.drain(i..i + n);
            }
            5 if len > 0 => {
                let i = rng.random_range(0..len);
                let n = rng.random_range(1..=(len - i).min(32));
                let copy = input[i..i + n].to_vec();
                let at = rng.random_range(0..=len);
                input.splice(at..at, copy);
            }
            6 if len > 0 => input.truncate(rng.random_range(0..len)),
            7 if !corpus.is_empty() => {
                // Splice: the head of this input, the tail of another.
                let other = &corpus[rng.random_range(0..corpus.len())];
                let cut = rng.random_range(0..=len);
                let from = rng.random_range(0..=other.len());
                input.truncate(cut);
                input.extend_from_slice(&other[from..]);
            }
            8 if len >= 4 => {
                // A varint or length that claims a lot.
                let i = rng.random_range(0..len - 3);
                let v: u32 = match rng.random_range(0..3) {
                    0 => u32::MAX,
                    1 => 0x8000_0000,
                    _ => rng.random_range(0..1 << 20),
                };
                input[i..i + 4].copy_from_slice(&v.to_be_bytes());
            }
            _ => {}
        }
    }
    input.truncate(MAX_INPUT_BYTES);
    input
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
