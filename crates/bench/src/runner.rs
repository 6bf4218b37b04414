//! Runs one point of a workload against a target: concurrent sessions (one connection and one causal clock each),
//! in a closed loop or an open loop, a warm-up, a measured window, live progress, and visibility probes across DCs.

use crate::histogram::{new_histogram, HistogramSummary};
use crate::keys::{key_name, KeyChooser};
use crate::progress::{Live, Progress};
use crate::visibility::{self, VisibilityResult};
use crate::workload::{CrdtKind, Point, Workload};
use causet_client::{Client, ClientError};
use causet_core::{ObjectId, VectorClock};
use causet_crdt::{CrdtType, Op, Value};
use hdrhistogram::Histogram;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub use crate::target::{DcTarget, Target};

/// The kinds of transaction, as latency is reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TxKind {
    /// A single-operation static read.
    Read,
    /// A single-operation static update.
    Update,
    /// An interactive multi-key transaction.
    Interactive,
    /// A multi-key static update.
    StaticUpdate,
    /// A multi-key static read.
    StaticRead,
    /// A multi-key read-only static transaction.
    ReadOnly,
}

impl TxKind {
    const ALL: [TxKind; 6] =
        [TxKind::Read, TxKind::Update, TxKind::Interactive, TxKind::StaticUpdate, TxKind::StaticRead, TxKind::ReadOnly];

    fn index(self) -> usize {
        self as usize
    }

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            TxKind::Read => "read",
            TxKind::Update => "update",
            TxKind::Interactive => "interactive",
            TxKind::StaticUpdate => "static-update",
            TxKind::StaticRead => "static-read",
            TxKind::ReadOnly => "read-only",
        }
    }
}

/// The figures of one run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// The protocol label (`cure`, … or `existing` for a cluster the tool did not start).
    pub protocol: String,
    /// Which repetition of the comparison this run belongs to (`--repeat`), from 0.
    #[serde(default)]
    pub repeat: u32,
    /// The sweep point.
    pub point: Point,
    /// Sessions.
    pub sessions: usize,
    /// Length of the measured window, s.
    pub measured_s: f64,
    /// When the measured window began, in seconds since the Unix epoch (0 in reports written before
    /// 2026-12-02), so that samples taken beside the run (CPU per process, `bench/cpu-split.py`) can be cut to it.
    #[serde(default)]
    pub window_start_unix_s: f64,
    /// Transactions committed in the window.
    pub committed: u64,
    /// Transactions the server aborted in the window.
    pub aborted: u64,
    /// Other failures in the window (timeouts, lost connections, error replies).
    pub errors: u64,
    /// Committed transactions per second.
    pub throughput_per_s: f64,
    /// Operations (reads and updates of single keys) per second.
    pub operations_per_s: f64,
    /// Latency of every committed transaction, µs.
    pub latency: HistogramSummary,
    /// Latency by kind of transaction, µs.
    pub latency_by_kind: BTreeMap<String, HistogramSummary>,
    /// Visibility across DCs, when probed.
    pub visibility: Option<VisibilityResult>,
    /// The first errors seen, for the report.
    pub error_samples: Vec<String>,
    /// Time the servers spent per request kind in the window (from dispatch to the partition until the reply,
    /// `causet_request_duration_seconds` on every node's `/metrics`); empty without admin addresses.
    #[serde(default)]
    pub server_time: BTreeMap<String, ServerTime>,
    /// The lease caches' reads in the window per outcome (`hit`, `miss`, `refetch`), summed over every node's
    /// `causet_cache_reads_total`; empty without admin addresses or caches.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cache_reads: BTreeMap<String, u64>,
    /// The causal middleware's requests to its store in the window per kind (`get_copies`, `put`, `feed_read`, …),
    /// summed over every proxy's `causet_middleware_store_requests_total`; empty for other targets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub store_requests: BTreeMap<String, u64>,
    /// Transactions committed in the window by the sessions of each DC (by the DC a session started at, in the
    /// target's order; they sum to `committed`). In a closed loop a DC whose sessions never wait for another DC
    /// can commit most of the total, so the total alone can hide what happens at the others.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub committed_by_dc: Vec<u64>,
}

/// Server-side time of one request kind over the measured window.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ServerTime {
    /// Requests served.
    pub requests: u64,
    /// Mean time per request, µs.
    pub mean_us: f64,
}

/// What one node's `/metrics` said at one moment, of what a run reports.
#[derive(Clone, Debug, Default)]
struct Scrape {
    /// `causet_request_duration_seconds` per kind: sum (s) and count.
    durations: BTreeMap<String, (f64, u64)>,
    /// `causet_cache_reads_total` per outcome.
    cache_reads: BTreeMap<String, u64>,
    /// `causet_middleware_store_requests_total` per kind.
    store_requests: BTreeMap<String, u64>,
}

/// Every node's scrape (`None` where it failed).
async fn scrape(target: &Target) -> Vec<Option<Scrape>> {
    let mut out = Vec::new();
    for admin in target.dcs.iter().flat_map(|d| &d.admins) {
        out.push(visibility::http_get(*admin, "/metrics").await.ok().map(|t| Scrape {
            durations: visibility::parse_request_durations(&t),
            cache_reads: visibility::parse_counter_by(&t, "causet_cache_reads_total", "outcome"),
            store_requests: visibility::parse_counter_by(&t, "causet_middleware_store_requests_total", "kind"),
        }));
    }
    out
}

/// Per label value, what one of the scrapes' counters (`counter`: `cache_reads` or `store_requests`) counted in the
/// window, over the nodes scraped both before and after it.
fn counted_between(
    before: &[Option<Scrape>],
    after: &[Option<Scrape>],
    counter: fn(&Scrape) -> &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    let mut total: BTreeMap<String, u64> = BTreeMap::new();
    for (b, a) in before.iter().zip(after) {
        let (Some(b), Some(a)) = (b, a) else { continue };
        for (value, n) in counter(a) {
            *total.entry(value.clone()).or_default() += n.saturating_sub(counter(b).get(value).copied().unwrap_or(0));
        }
    }
    total.retain(|_, n| *n > 0);
    total
}

/// Per kind, the requests and mean time in the window, over the nodes scraped both before and after it (a node
/// missing from either scrape is left out rather than mixed in).
fn server_time_between(before: &[Option<Scrape>], after: &[Option<Scrape>]) -> BTreeMap<String, ServerTime> {
    let mut total: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    for (b, a) in before.iter().zip(after) {
        let (Some(b), Some(a)) = (b, a) else { continue };
        for (kind, (sum, count)) in &a.durations {
            let (sum0, count0) = b.durations.get(kind).copied().unwrap_or_default();
            let e = total.entry(kind.clone()).or_default();
            e.0 += sum - sum0;
            e.1 += count.saturating_sub(count0);
        }
    }
    total
        .into_iter()
        .filter(|(_, (_, n))| *n > 0)
        .map(|(kind, (sum, n))| (kind, ServerTime { requests: n, mean_us: sum * 1e6 / n as f64 }))
        .collect()
}

struct Shared {
    workload: Workload,
    point: Point,
    chooser: KeyChooser,
    measuring: AtomicBool,
    stop: AtomicBool,
    live: Arc<Live>,
    error_samples: Mutex<Vec<String>>,
    /// Open loop: the interval between one session's intended starts.
    interval: Option<Duration>,
    started: Instant,
}

/// Where a session connects and whether it moves.
#[derive(Clone, Debug)]
struct SessionPlan {
    /// DC indices into the target, in the order a switching session visits them.
    route: Vec<usize>,
    switching: bool,
    node: usize,
}

struct SessionResult {
    /// The DC the session started at (its index in the target).
    home: usize,
    by_kind: Vec<Histogram<u64>>,
    aborted: u64,
    errors: u64,
    operations: u64,
}

const MAX_ERROR_SAMPLES: usize = 5;
/// A transaction that takes longer fails (and its connection is replaced), so a stuck server cannot hang the run.
const TX_TIMEOUT: Duration = Duration::from_secs(10);
/// How often an open-loop session waiting for its next start checks for the end of the run.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// Runs one point: warm-up, then the measured window. `label` names the run in the progress line.
pub async fn run_point(
    workload: &Workload,
    point: Point,
    target: &Target,
    protocol: &str,
    label: &str,
) -> anyhow::Result<RunResult> {
    let w = &workload.file;
    let home_dcs: Vec<usize> = if w.clients.dcs.is_empty() {
        (0..target.dcs.len()).collect()
    } else {
        w.clients.dcs.iter().map(|d| *d as usize).filter(|d| *d < target.dcs.len()).collect()
    };
    anyhow::ensure!(!home_dcs.is_empty(), "clients.dcs {:?}: none of these DCs is in the target", w.clients.dcs);
    let sessions = w.clients.sessions_per_dc * home_dcs.len();
    let mut plan_rng = ChaCha8Rng::seed_from_u64(w.run.seed ^ 0x5e55_1045);
    let mut plans = Vec::with_capacity(sessions);
    for s in 0..sessions {
        let home = home_dcs[s % home_dcs.len()];
        let dcs = target.dcs.len();
        let roll: f64 = plan_rng.random();
        let (start, switching) = if dcs > 1 && roll < w.clients.remote_fraction {
            ((home + 1) % dcs, false)
        } else if dcs > 1 && roll < w.clients.remote_fraction + w.clients.switch_fraction {
            (home, true)
        } else {
            (home, false)
        };
        let route = (0..dcs).map(|i| (start + i) % dcs).collect();
        plans.push(SessionPlan { route, switching, node: s / home_dcs.len() });
    }
    let rate = w.clients.rate;
    let live =
        Arc::new(Live { recent: (0..sessions).map(|_| Mutex::new(new_histogram())).collect(), ..Default::default() });
    let shared = Arc::new(Shared {
        workload: workload.clone(),
        point,
        chooser: KeyChooser::new(workload.distribution, point.keys),
        measuring: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        live: live.clone(),
        error_samples: Mutex::new(Vec::new()),
        interval: (rate > 0.0).then(|| Duration::from_secs_f64(sessions as f64 / rate)),
        started: Instant::now(),
    });
    let mut clients = Vec::with_capacity(sessions);
    for plan in &plans {
        let dc = &target.dcs[plan.route[0]];
        let addr = dc.clients[plan.node % dc.clients.len()];
        clients.push(
            Client::connect(addr).await.map_err(|e| anyhow::anyhow!("connecting to DC {} at {addr}: {e}", dc.dc))?,
        );
    }
    let mut tasks = Vec::with_capacity(sessions);
    for (id, (client, plan)) in clients.into_iter().zip(plans).enumerate() {
        let (shared, target) = (shared.clone(), target.clone());
        tasks.push(tokio::spawn(async move { session(shared, target, id, plan, client).await }));
    }
    let warmup = Duration::from_secs_f64(w.run.warmup_s);
    let duration = Duration::from_secs_f64(w.run.duration_s);
    let mut progress = Progress::new(label, warmup, duration, live.clone());
    let ticker = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            tick.tick().await;
            progress.tick();
        }
    });
    tokio::time::sleep(warmup).await;
    let probe = if w.visibility.enabled && target.dcs.len() > 1 {
        let (target, interval) = (target.clone(), Duration::from_millis(w.visibility.interval_ms));
        let seed = w.run.seed;
        Some(tokio::spawn(async move { visibility::probe(&target, duration, interval, seed).await }))
    } else {
        None
    };
    let before = scrape(target).await;
    shared.measuring.store(true, Ordering::Relaxed);
    let window = Instant::now();
    let window_start_unix_s = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    tokio::time::sleep(duration).await;
    shared.measuring.store(false, Ordering::Relaxed);
    let measured = window.elapsed();
    let after = scrape(target).await;
    let server_time = server_time_between(&before, &after);
    let cache_reads = counted_between(&before, &after, |s| &s.cache_reads);
    let store_requests = counted_between(&before, &after, |s| &s.store_requests);
    shared.stop.store(true, Ordering::Relaxed);
    ticker.abort();
    Progress::finish();
    let mut by_kind: Vec<Histogram<u64>> = TxKind::ALL.iter().map(|_| new_histogram()).collect();
    let (mut aborted, mut errors, mut operations) = (0, 0, 0);
    let mut committed_by_dc = vec![0; target.dcs.len()];
    for t in tasks {
        let r = t.await?;
        committed_by_dc[r.home] += r.by_kind.iter().map(Histogram::len).sum::<u64>();
        for (total, h) in by_kind.iter_mut().zip(&r.by_kind) {
            total.add(h)?;
        }
        aborted += r.aborted;
        errors += r.errors;
        operations += r.operations;
    }
    let visibility = match probe {
        Some(p) => Some(p.await??),
        None => None,
    };
    let mut all = new_histogram();
    let mut latency_by_kind = BTreeMap::new();
    for (kind, h) in TxKind::ALL.iter().zip(&by_kind) {
        all.add(h)?;
        if !h.is_empty() {
            latency_by_kind.insert(kind.name().to_string(), HistogramSummary::of(h));
        }
    }
    let committed = all.len();
    let secs = measured.as_secs_f64();
    let error_samples = shared.error_samples.lock().map(|e| e.clone()).unwrap_or_default();
    Ok(RunResult {
        protocol: protocol.to_string(),
        repeat: 0,
        point,
        sessions,
        measured_s: secs,
        window_start_unix_s,
        committed,
        aborted,
        errors,
        throughput_per_s: committed as f64 / secs,
        operations_per_s: operations as f64 / secs,
        latency: HistogramSummary::of(&all),
        latency_by_kind,
        visibility,
        error_samples,
        server_time,
        cache_reads,
        store_requests,
        committed_by_dc,
    })
}

fn object(w: &Workload, rank: u64) -> ObjectId {
    let ty = match w.file.values.crdt {
        CrdtKind::LwwRegister => CrdtType::RegisterLww,
        CrdtKind::MvRegister => CrdtType::RegisterMv,
        CrdtKind::Counter => CrdtType::CounterPn,
        CrdtKind::AwSet => CrdtType::SetAw,
    };
    ObjectId::new(key_name(rank, w.file.keys.key_bytes), "bench", ty)
}

fn update_op(w: &Workload, value: &[u8]) -> Op {
    match w.file.values.crdt {
        CrdtKind::LwwRegister | CrdtKind::MvRegister => Op::Assign(value.to_vec()),
        CrdtKind::Counter => Op::Increment(1),
        CrdtKind::AwSet => Op::Add(vec![value.to_vec()]),
    }
}

/// One transaction; returns its kind and the number of single-key operations it did.
async fn transaction(
    shared: &Shared,
    client: &mut Client,
    rng: &mut ChaCha8Rng,
    value: &[u8],
    ranks: &mut Vec<u64>,
) -> (TxKind, u64, Result<(), ClientError>) {
    let w = &shared.workload;
    let m = &w.file.mix;
    let ratio = shared.point.update_ratio;
    let reads = w.file.clients.read_from.read_from();
    let weights = [m.single, m.interactive, m.static_, m.read_only];
    let mut pick = rng.random::<f64>() * weights.iter().sum::<f64>();
    // Rounding can leave `pick` just above the last weight: fall back on the last kind that has a weight.
    let mut choice = weights.iter().rposition(|w| *w > 0.0).unwrap_or(0);
    for (i, w) in weights.iter().enumerate() {
        if *w > 0.0 && pick < *w {
            choice = i;
            break;
        }
        pick -= w;
    }
    let n = m.keys_per_transaction;
    if choice == 0 {
        let o = object(w, shared.chooser.sample(rng));
        if rng.random_bool(ratio) {
            (TxKind::Update, 1, client.static_update(None, [(o, update_op(w, value))]).await.map(|_| ()))
        } else {
            let read = client.static_read_with(None, std::slice::from_ref(&o), reads).await;
            (TxKind::Read, 1, read.map(|_| ()))
        }
    } else if choice == 1 {
        shared.chooser.sample_distinct(rng, n, ranks);
        let updates: Vec<bool> = ranks.iter().map(|_| rng.random_bool(ratio)).collect();
        let result = async {
            let mut tx = client.start_transaction_with(None, reads).await?;
            if m.batched {
                // The reads in one request, then the updates in one.
                let keys =
                    |u: bool| ranks.iter().zip(&updates).filter(move |(_, x)| **x == u).map(|(r, _)| object(w, *r));
                let read: Vec<ObjectId> = keys(false).collect();
                let written: Vec<(ObjectId, Op)> = keys(true).map(|o| (o, update_op(w, value))).collect();
                let mut done = Ok(());
                if !read.is_empty() {
                    done = tx.read(&read).await.map(|_| ());
                }
                if done.is_ok() && !written.is_empty() {
                    done = tx.update(written).await;
                }
                if let Err(e) = done {
                    let _ = tx.abort().await;
                    return Err(e);
                }
                return tx.commit().await.map(|_| ());
            }
            for (rank, update) in ranks.iter().zip(&updates) {
                let o = object(w, *rank);
                let step = if *update {
                    tx.update([(o, update_op(w, value))]).await
                } else {
                    tx.read(std::slice::from_ref(&o)).await.map(|_| ())
                };
                if let Err(e) = step {
                    // The server may have dropped the transaction already; the abort is best effort.
                    let _ = tx.abort().await;
                    return Err(e);
                }
            }
            tx.commit().await.map(|_| ())
        }
        .await;
        (TxKind::Interactive, n as u64, result)
    } else if choice == 2 {
        shared.chooser.sample_distinct(rng, n, ranks);
        if rng.random_bool(ratio) {
            let updates: Vec<(ObjectId, Op)> = ranks.iter().map(|r| (object(w, *r), update_op(w, value))).collect();
            (TxKind::StaticUpdate, n as u64, client.static_update(None, updates).await.map(|_| ()))
        } else {
            let objects: Vec<ObjectId> = ranks.iter().map(|r| object(w, *r)).collect();
            (TxKind::StaticRead, n as u64, client.static_read_with(None, &objects, reads).await.map(|_| ()))
        }
    } else {
        shared.chooser.sample_distinct(rng, n, ranks);
        let objects: Vec<ObjectId> = ranks.iter().map(|r| object(w, *r)).collect();
        (TxKind::ReadOnly, n as u64, client.static_read_with(None, &objects, reads).await.map(|_| ()))
    }
}

async fn session(shared: Arc<Shared>, target: Target, id: usize, plan: SessionPlan, client: Client) -> SessionResult {
    let w = &shared.workload.file;
    let mut rng = ChaCha8Rng::seed_from_u64(w.run.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(id as u64));
    let mut result = SessionResult {
        home: plan.route[0],
        by_kind: TxKind::ALL.iter().map(|_| new_histogram()).collect(),
        aborted: 0,
        errors: 0,
        operations: 0,
    };
    // Values differ per session so set elements stay few (one per session) and registers see distinct writes.
    let mut value = format!("s{id}-").into_bytes();
    value.resize(w.values.bytes.max(value.len()), b'v');
    value.truncate(w.values.bytes);
    let mut client = Some(client);
    let mut hop = 0usize;
    let mut done: u64 = 0;
    let mut ranks = Vec::new();
    // Open loop: evenly spaced intended starts, this session offset within the interval.
    let mut intended = shared.interval.map(|i| shared.started + i.mul_f64(id as f64 / target_sessions(&shared)));
    while !shared.stop.load(Ordering::Relaxed) {
        let scheduled = match (intended, shared.interval) {
            (Some(at), Some(interval)) => {
                // Wait for the intended start, but notice the end of the run within 100 ms.
                while Instant::now() < at && !shared.stop.load(Ordering::Relaxed) {
                    tokio::time::sleep_until(at.min(Instant::now() + STOP_CHECK).into()).await;
                }
                if shared.stop.load(Ordering::Relaxed) {
                    break;
                }
                intended = Some(at + interval);
                Some(at)
            }
            _ => None,
        };
        let Some(c) = client.as_mut() else {
            // Reconnect after a lost connection, at the DC the session is at now.
            let dc = &target.dcs[plan.route[hop % plan.route.len()]];
            match Client::connect(dc.clients[plan.node % dc.clients.len()]).await {
                Ok(c) => client = Some(c),
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
            continue;
        };
        // Open loop: latency counts from the intended start, so a backlog shows as latency (no coordinated omission).
        let started = scheduled.unwrap_or_else(Instant::now);
        let (kind, ops, outcome) =
            match tokio::time::timeout(TX_TIMEOUT, transaction(&shared, c, &mut rng, &value, &mut ranks)).await {
                Ok(done) => done,
                // The connection's state is unknown after a cancelled request: count an error and reconnect.
                Err(_) => {
                    shared.live.errors.fetch_add(1, Ordering::Relaxed);
                    if shared.measuring.load(Ordering::Relaxed) {
                        result.errors += 1;
                        if let Ok(mut samples) = shared.error_samples.lock() {
                            if samples.len() < MAX_ERROR_SAMPLES {
                                samples.push(format!("a transaction took longer than {TX_TIMEOUT:?}"));
                            }
                        }
                    }
                    client = None;
                    continue;
                }
            };
        let took_us = (started.elapsed().as_micros() as u64).max(1);
        let measuring = shared.measuring.load(Ordering::Relaxed);
        match &outcome {
            Ok(()) => {
                shared.live.committed.fetch_add(1, Ordering::Relaxed);
                if let Ok(mut h) = shared.live.recent[id].lock() {
                    h.saturating_record(took_us);
                }
                if measuring {
                    result.by_kind[kind.index()].saturating_record(took_us);
                    result.operations += ops;
                }
            }
            Err(e) => {
                shared.live.errors.fetch_add(1, Ordering::Relaxed);
                if measuring {
                    if e.is_aborted() {
                        result.aborted += 1;
                    } else {
                        result.errors += 1;
                    }
                    if let Ok(mut samples) = shared.error_samples.lock() {
                        if samples.len() < MAX_ERROR_SAMPLES {
                            samples.push(format!("{}: {e}", kind.name()));
                        }
                    }
                }
                if e.is_connection_lost() {
                    client = None;
                    continue;
                }
            }
        }
        done += 1;
        if plan.switching && done.is_multiple_of(w.clients.switch_every) {
            // Move to the next DC, carrying the causal clock: the session keeps reading its own writes there.
            hop += 1;
            let dc = &target.dcs[plan.route[hop % plan.route.len()]];
            // (With its buffer token: writes it left in a node's buffer are handed over before it reads there.)
            let clock = client.as_ref().and_then(Client::session_clock);
            match Client::connect(dc.clients[plan.node % dc.clients.len()]).await {
                Ok(mut next) => {
                    if let Some(clock) = clock {
                        next.observe_session_clock(&clock);
                    }
                    client = Some(next);
                }
                Err(_) => client = None,
            }
        }
    }
    result
}

fn target_sessions(shared: &Shared) -> f64 {
    shared.live.recent.len().max(1) as f64
}

/// Concurrent connections of the preload.
const PRELOAD_CONNECTIONS: u64 = 8;

/// How long the preload may take to become visible at every DC.
const PRELOAD_SETTLE: Duration = Duration::from_secs(120);

/// The last key each of `connections` preload connections writes (connection `c` writes batches starting at
/// `c * batch`, every `batch * connections` keys): the stragglers of the preload.
fn last_preloaded(keys: u64, batch: u64, connections: u64) -> Vec<u64> {
    let stride = batch * connections;
    (0..connections)
        .filter(|c| c * batch < keys)
        .map(|c| {
            let last_start = c * batch + (keys - 1 - c * batch) / stride * stride;
            (last_start + batch).min(keys) - 1
        })
        .collect()
}

/// How long [`settle`] waits for a target before measuring anyway.
const SETTLE_LIMIT: Duration = Duration::from_secs(300);

/// How long every admin address must have answered `/settled` with 200 in a row.
const SETTLED_FOR: Duration = Duration::from_secs(1);

/// Waits, before a point is measured, until the target has absorbed what came before it (the preload, or the
/// point before): every admin address that serves `/settled` (the causal middleware's proxies with `--admin`)
/// answers 200 for `SETTLED_FOR` in a row. Addresses that answer anything but 200 or 503 (Causet's nodes: 404),
/// or nothing, are not asked again. A target that has not settled after `SETTLE_LIMIT` is measured anyway, with
/// a warning. Returns how long it waited.
pub async fn settle(target: &Target, label: &str) -> Duration {
    let started = Instant::now();
    let mut asked: Vec<std::net::SocketAddr> = target.dcs.iter().flat_map(|d| d.admins.iter().copied()).collect();
    let (mut settled_since, mut said) = (None::<Instant>, started);
    loop {
        let (mut waiting, mut unasked) = (Vec::new(), Vec::new());
        for &admin in &asked {
            match visibility::http_get_status(admin, "/settled").await {
                Ok((200, _)) => {}
                Ok((503, body)) => waiting.push((admin, body)),
                Ok(_) | Err(_) => unasked.push(admin),
            }
        }
        asked.retain(|a| !unasked.contains(a));
        if waiting.is_empty() {
            let since = *settled_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= SETTLED_FOR || asked.is_empty() {
                return started.elapsed();
            }
        } else {
            settled_since = None;
            if said.elapsed() >= Duration::from_secs(5) {
                said = Instant::now();
                let (admin, body) = &waiting[0];
                let body: String = body.chars().take(300).collect();
                eprintln!(
                    "{label}: waiting {:.0} s for the target to settle ({admin}/settled: {body})",
                    started.elapsed().as_secs_f64()
                );
            }
            if started.elapsed() >= SETTLE_LIMIT {
                eprintln!("{label}: the target did not settle within {SETTLE_LIMIT:?}; measuring anyway");
                return started.elapsed();
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Writes every key in `0..keys` once, at the target's first DC, in static updates of `preload_batch` keys on 8
/// connections at a time (a new connection, so a new session, for every transaction)
/// (not measured), so the run's reads find values; then waits until every DC's snapshot includes all of it, so
/// the first point's warm-up does not share the machine with the other DCs applying the preload. Targets that
/// ignore clocks (the causal middleware's proxy, which has no snapshots) are waited for by reading, at every DC,
/// the last key each preload connection wrote until it has a value.
pub async fn preload(workload: &Workload, keys: u64, target: &Target) -> anyhow::Result<()> {
    let addr = target.dcs.first().and_then(|d| d.clients.first()).copied();
    let addr = addr.ok_or_else(|| anyhow::anyhow!("the target has no DC"))?;
    let mut value = b"preload-".to_vec();
    value.resize(workload.file.values.bytes.max(value.len()), b'p');
    value.truncate(workload.file.values.bytes);
    let batch = workload.file.run.preload_batch.max(1);
    let mut tasks = Vec::new();
    for c in 0..PRELOAD_CONNECTIONS {
        let (workload, value) = (workload.clone(), value.clone());
        tasks.push(tokio::spawn(async move {
            let mut start = c * batch;
            let mut last = None;
            while start < keys {
                // A fresh session for every transaction: a bulk load is not application causality, and a causal
                // middleware would otherwise chain each preloaded key to the one before it (and a reader would walk
                // those chains).
                let mut client = Client::connect(addr).await?;
                let end = (start + batch).min(keys);
                let updates: Vec<(ObjectId, Op)> =
                    (start..end).map(|r| (object(&workload, r), update_op(&workload, &value))).collect();
                last = Some(client.static_update(None, updates).await?);
                start += batch * PRELOAD_CONNECTIONS;
            }
            anyhow::Ok(last)
        }));
    }
    let mut clock: Option<VectorClock> = None;
    let last_keys = last_preloaded(keys, batch, PRELOAD_CONNECTIONS);
    for t in tasks {
        if let Some(c) = t.await?? {
            match clock.as_mut() {
                Some(joined) => joined.merge_max(&c),
                None => clock = Some(c),
            }
        }
    }
    // A read whose clock holds every preload commit starts at a DC only once its stable snapshot covers them (the
    // eventual baseline promises nothing to a clock and answers at once).
    let deadline = Instant::now() + PRELOAD_SETTLE;
    for dc in &target.dcs {
        let Some(addr) = dc.clients.first().copied() else { continue };
        loop {
            let read = async {
                let mut client = Client::connect(addr).await?;
                client.static_read(clock.as_ref(), &[object(workload, 0)]).await?;
                let mut all_there = true;
                if workload.file.values.crdt == CrdtKind::LwwRegister {
                    for &k in &last_keys {
                        let (values, _) = client.static_read(None, &[object(workload, k)]).await?;
                        all_there &= matches!(values.first(), Some(Value::Register(v)) if !v.is_empty());
                    }
                }
                Ok::<_, ClientError>(all_there)
            };
            match tokio::time::timeout(Duration::from_secs(15), read).await {
                Ok(Ok(true)) => break,
                _ if Instant::now() >= deadline => {
                    anyhow::bail!("the preload did not become visible at {addr} within {PRELOAD_SETTLE:?}")
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::DcTarget;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An admin address answering `/settled` with the given status codes in turn (the last one for ever); counts
    /// the requests.
    async fn fake_admin(codes: Vec<u16>) -> (std::net::SocketAddr, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = asked.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut s, _)) = listener.accept().await else { return };
                let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let code = codes[n.min(codes.len() - 1)];
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let reply = format!("HTTP/1.0 {code} X\r\nContent-Length: 8\r\n\r\nbehind 3");
                let _ = s.write_all(reply.as_bytes()).await;
            }
        });
        (addr, asked)
    }

    fn target(admins: Vec<std::net::SocketAddr>) -> Target {
        let dcs = admins
            .into_iter()
            .enumerate()
            .map(|(i, a)| DcTarget { dc: i as u16, clients: Vec::new(), admins: vec![a] })
            .collect();
        Target { dcs, partitions: 1 }
    }

    #[tokio::test]
    async fn a_point_waits_until_every_admin_address_has_settled_for_a_while() {
        let (settling, asked) = fake_admin(vec![503, 503, 503, 200]).await;
        let (causet_node, _) = fake_admin(vec![404]).await;
        let waited = settle(&target(vec![settling, causet_node]), "test").await;
        assert!(asked.load(std::sync::atomic::Ordering::SeqCst) >= 4 + 10, "asked until settled, then for a while");
        assert!(waited >= SETTLED_FOR, "{waited:?}");
        // A target without `/settled` anywhere is not waited for.
        let (only_404, asked) = fake_admin(vec![404]).await;
        assert!(settle(&target(vec![only_404]), "test").await < SETTLED_FOR);
        assert_eq!(asked.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn the_last_preloaded_key_of_each_connection() {
        assert_eq!(last_preloaded(100_000, 1, 8), (99_992..100_000).collect::<Vec<_>>());
        // Batches of 100 over 8 connections: connection 0 writes 0..100, 800..900, …; 1000 keys end in 1's batch.
        assert_eq!(last_preloaded(1_000, 100, 8), vec![899, 999, 299, 399, 499, 599, 699, 799]);
        assert_eq!(last_preloaded(3, 1, 8), vec![0, 1, 2], "connections with nothing to write are left out");
    }

    #[test]
    fn server_time_counts_only_the_window_and_only_nodes_scraped_twice() {
        let node = |sum: f64, n: u64| {
            Some(Scrape { durations: BTreeMap::from([("static_read".to_string(), (sum, n))]), ..Scrape::default() })
        };
        let before = vec![node(1.0, 1_000), node(5.0, 10), None];
        let after = vec![node(1.5, 2_000), None, node(9.0, 99)];
        let t = server_time_between(&before, &after);
        assert_eq!(t.len(), 1);
        let read = &t["static_read"];
        assert_eq!(read.requests, 1_000, "only the first node was scraped before and after");
        assert!((read.mean_us - 500.0).abs() < 1e-6, "0.5 s over 1000 requests: {}", read.mean_us);
    }

    #[test]
    fn cache_reads_count_only_the_window() {
        let node = |hit: u64, miss: u64| {
            let cache_reads = BTreeMap::from([("hit".to_string(), hit), ("miss".to_string(), miss)]);
            Some(Scrape { cache_reads, ..Scrape::default() })
        };
        let c = counted_between(&[node(10, 5), node(0, 0), None], &[node(25, 5), node(3, 1), node(99, 99)], |s| {
            &s.cache_reads
        });
        assert_eq!(c, BTreeMap::from([("hit".to_string(), 18), ("miss".to_string(), 1)]));
        assert!(counted_between(&[node(1, 1)], &[node(2, 2)], |s| &s.store_requests).is_empty(), "another counter");
    }
}
