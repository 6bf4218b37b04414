//! Causet's load generator: many concurrent client sessions over the client protocol, each on its own connection
//! and carrying its causal clock, in a closed loop; latency histograms (HDR) and throughput.
//!
//! This is the measuring core behind `causet bench`; workloads are single-operation static transactions over a
//! key space (the Cure paper's shape).

#![warn(missing_docs)]

use causet_client::Client;
use causet_core::ObjectId;
use causet_crdt::{CrdtType, Op};
use hdrhistogram::Histogram;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What each transaction does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Operation {
    /// Static read of one LWW register.
    RegisterRead,
    /// Static update of one LWW register (assign a value of `value_bytes`).
    RegisterUpdate,
    /// Static update of one counter (increment).
    CounterUpdate,
    /// The Cure paper's mix: single-operation transactions on LWW registers, each an update with probability
    /// `update_ratio` (else a read).
    RegisterMix,
}

impl std::str::FromStr for Operation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "register-read" => Ok(Operation::RegisterRead),
            "register-update" => Ok(Operation::RegisterUpdate),
            "counter-update" => Ok(Operation::CounterUpdate),
            "register-mix" => Ok(Operation::RegisterMix),
            other => Err(format!(
                "unknown operation {other:?}: use register-read, register-update, counter-update or register-mix"
            )),
        }
    }
}

/// A run's parameters.
#[derive(Clone, Debug, Serialize)]
pub struct BenchConfig {
    /// The server's client address.
    pub addr: SocketAddr,
    /// Concurrent sessions, one connection each.
    pub connections: usize,
    /// Measured time.
    pub duration: Duration,
    /// Unmeasured time first.
    pub warmup: Duration,
    /// The operation.
    pub operation: Operation,
    /// Keys, chosen uniformly.
    pub keys: u64,
    /// Bytes per written value.
    pub value_bytes: usize,
    /// Seed of the key choices.
    pub seed: u64,
    /// Probability that a `register-mix` transaction is an update.
    pub update_ratio: f64,
}

/// A run's figures.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The parameters.
    pub config: BenchConfig,
    /// Transactions committed in the measured window.
    pub committed: u64,
    /// Failed transactions in the measured window.
    pub errors: u64,
    /// Committed transactions per second.
    pub throughput_per_s: f64,
    /// Median latency, µs.
    pub p50_us: u64,
    /// 99th percentile latency, µs.
    pub p99_us: u64,
    /// 99.9th percentile latency, µs.
    pub p999_us: u64,
    /// Largest latency, µs.
    pub max_us: u64,
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?}: {} connections, {:.1} s: {:.0} txn/s, p50 {} µs, p99 {} µs, p99.9 {} µs, max {} µs, {} errors",
            self.config.operation,
            self.config.connections,
            self.config.duration.as_secs_f64(),
            self.throughput_per_s,
            self.p50_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
            self.errors
        )
    }
}

fn object(operation: Operation, key: u64) -> ObjectId {
    let ty = match operation {
        Operation::CounterUpdate => CrdtType::CounterPn,
        _ => CrdtType::RegisterLww,
    };
    ObjectId::new(format!("{key:08}"), "bench", ty)
}

/// Runs a closed-loop benchmark: every session sends its next transaction as soon as the previous one answers.
pub async fn run(config: BenchConfig) -> anyhow::Result<BenchReport> {
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(AtomicU64::new(0));
    let mut sessions = Vec::new();
    for s in 0..config.connections {
        let mut client = Client::connect(config.addr).await?;
        let (measuring, stop, errors, config) = (measuring.clone(), stop.clone(), errors.clone(), config.clone());
        sessions.push(tokio::spawn(async move {
            let mut rng = ChaCha8Rng::seed_from_u64(config.seed.wrapping_add(s as u64));
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
            let value = vec![b'v'; config.value_bytes];
            while !stop.load(Ordering::Relaxed) {
                let key = rng.random_range(0..config.keys);
                let o = object(config.operation, key);
                let started = Instant::now();
                let result = match config.operation {
                    Operation::RegisterRead => client.static_read(None, std::slice::from_ref(&o)).await.map(|_| ()),
                    Operation::RegisterUpdate => {
                        client.static_update(None, vec![(o, Op::Assign(value.clone()))]).await.map(|_| ())
                    }
                    Operation::CounterUpdate => {
                        client.static_update(None, vec![(o, Op::Increment(1))]).await.map(|_| ())
                    }
                    Operation::RegisterMix if rng.random_bool(config.update_ratio) => {
                        client.static_update(None, vec![(o, Op::Assign(value.clone()))]).await.map(|_| ())
                    }
                    Operation::RegisterMix => client.static_read(None, std::slice::from_ref(&o)).await.map(|_| ()),
                };
                let took = started.elapsed().as_micros() as u64;
                if measuring.load(Ordering::Relaxed) {
                    match result {
                        Ok(()) => hist.saturating_record(took.max(1)),
                        Err(_) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                if let Err(e) = &result {
                    if e.is_connection_lost() {
                        break;
                    }
                }
            }
            hist
        }));
    }
    tokio::time::sleep(config.warmup).await;
    measuring.store(true, Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(config.duration).await;
    measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let mut total = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
    for s in sessions {
        total.add(s.await?)?;
    }
    let committed = total.len();
    Ok(BenchReport {
        committed,
        errors: errors.load(Ordering::Relaxed),
        throughput_per_s: committed as f64 / elapsed.as_secs_f64(),
        p50_us: total.value_at_quantile(0.5),
        p99_us: total.value_at_quantile(0.99),
        p999_us: total.value_at_quantile(0.999),
        max_us: total.max(),
        config,
    })
}

/// Remote visibility measured from the client side: commit at one DC, then read at another until the write shows.
#[derive(Clone, Debug, Serialize)]
pub struct VisibilityReport {
    /// Where writes commit.
    pub writer: SocketAddr,
    /// Where they are read.
    pub reader: SocketAddr,
    /// Samples taken.
    pub samples: usize,
    /// Median time from the commit's acknowledgement to the first read that shows it, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Largest, µs.
    pub max_us: u64,
}

impl std::fmt::Display for VisibilityReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "visibility {} -> {}: {} samples, p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            self.writer,
            self.reader,
            self.samples,
            self.p50_us as f64 / 1000.0,
            self.p99_us as f64 / 1000.0,
            self.max_us as f64 / 1000.0
        )
    }
}

/// Measures remote visibility: each sample adds a fresh element to a set at `writer`'s DC, then polls `reader`'s DC
/// (a static read without a client clock, every 0.5 ms) until the element is there. The latency runs from the
/// commit's acknowledgement, so it includes one poll interval at most.
pub async fn visibility(writer: SocketAddr, reader: SocketAddr, samples: usize) -> anyhow::Result<VisibilityReport> {
    let mut w = Client::connect(writer).await?;
    let mut r = Client::connect(reader).await?;
    let set = ObjectId::new("visibility", "bench", CrdtType::SetAw);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 600_000_000, 3)?;
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos();
    for i in 0..samples {
        let elem = format!("{nonce}-{i}").into_bytes();
        w.static_update(None, vec![(set.clone(), Op::Add(vec![elem.clone()]))]).await?;
        let committed = Instant::now();
        loop {
            // A fresh client clock each time: the reader must not inherit the writer's, only see replication.
            let (values, _) = r.static_read(None, std::slice::from_ref(&set)).await?;
            if matches!(&values[0], causet_crdt::Value::Set(e) if e.contains(&elem)) {
                break;
            }
            anyhow::ensure!(committed.elapsed() < Duration::from_secs(30), "a write never became visible at {reader}");
            tokio::time::sleep(Duration::from_micros(500)).await;
        }
        hist.saturating_record(committed.elapsed().as_micros() as u64);
        // Space the samples so they do not all align with the same heartbeat.
        tokio::time::sleep(Duration::from_millis(7)).await;
    }
    Ok(VisibilityReport {
        writer,
        reader,
        samples,
        p50_us: hist.value_at_quantile(0.5),
        p99_us: hist.value_at_quantile(0.99),
        max_us: hist.max(),
    })
}
