//! Client sessions of the checked workload: each runs transactions one after another through the client protocol
//! and records exactly what it read, wrote and learned about each outcome.
//!
//! Outcomes are recorded as the client knows them. A commit (or static update) that the server acknowledged is
//! `Committed`; one the server answered with "aborted" is `Aborted`; one whose reply never came (timeout, lost
//! connection, any other error after the commit request was sent) is `Unknown`. A transaction that failed before
//! its commit request was sent can never commit (the server aborts transactions of closed connections), so it is
//! `Aborted`. Every client call is bounded by a timeout, so a killed or paused node cannot stall a session.

use causet_client::{Client, ClientClock, ClientError, Value, VectorClock};
use causet_sim::history::{HistOp, ObjectKind, Observed, Outcome, TxRecord, WriteId};
use causet_sim::workload::{observed, record_writes, Plan, Planned, Step, Workload, WorkloadConfig};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Counters of one run's client requests.
#[derive(Debug, Default)]
pub struct RequestStats {
    /// Connection attempts that failed or timed out.
    pub connect_failures: AtomicU64,
    /// Requests that timed out on the client (the connection is then dropped).
    pub timeouts: AtomicU64,
    /// Requests whose connection broke.
    pub connection_errors: AtomicU64,
    /// Requests the server answered with an error.
    pub server_errors: AtomicU64,
    /// The same, by kind ([`error_kind`]).
    pub server_error_kinds: std::sync::Mutex<std::collections::BTreeMap<String, u64>>,
    /// Static reads that failed (nothing to record: they have no effect).
    pub failed_reads: AtomicU64,
}

/// What one session needs.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// The session's id in the history.
    pub id: u64,
    /// The DC it uses unless it moves.
    pub home: u16,
    /// The client address of each DC's nodes (the session picks one per DC).
    pub dc_clients: Vec<Vec<SocketAddr>>,
    /// Probability that a transaction runs at a random other DC, carrying the session's clock.
    pub move_probability: f64,
    /// The workload's shape.
    pub workload: WorkloadConfig,
    /// Seed of this session's choices.
    pub seed: u64,
    /// Pause between transactions, ms (uniform in 0..=think_ms).
    pub think_ms: u64,
    /// Bound on every client call.
    pub request_timeout: Duration,
    /// When to stop starting transactions.
    pub stop_at: Instant,
    /// Time zero of the history's `start_us` and `end_us`.
    pub epoch: Instant,
}

/// A finished session: its records (indexes not yet assigned) and its final causal clock.
#[derive(Debug)]
pub struct SessionResult {
    /// The session's transactions in order.
    pub records: Vec<TxRecord>,
    /// The largest clock the session saw.
    pub clock: Option<VectorClock>,
}

/// The first write id of session `id`: each session owns 2^40 ids.
pub fn first_write_of(id: u64) -> WriteId {
    (id + 1) << 40
}

fn micros(epoch: Instant) -> u64 {
    epoch.elapsed().as_micros() as u64
}

/// Runs one session until `stop_at`.
pub async fn run(config: SessionConfig, stats: Arc<RequestStats>) -> SessionResult {
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let mut workload = Workload::starting_at(config.workload.clone(), first_write_of(config.id));
    let dcs = config.dc_clients.len();
    let mut clients: Vec<Option<Client>> = (0..dcs).map(|_| None).collect();
    let mut clock: Option<VectorClock> = None;
    let mut tokens = Vec::new();
    let mut records = Vec::new();
    while Instant::now() < config.stop_at {
        let dc = if dcs > 1 && rng.random_bool(config.move_probability) {
            let other = rng.random_range(1..dcs);
            (config.home as usize + other) % dcs
        } else {
            config.home as usize
        };
        let plan = workload.next(&mut rng);
        let slot = &mut clients[dc];
        if slot.is_none() {
            let addrs = &config.dc_clients[dc];
            let addr = addrs[rng.random_range(0..addrs.len())];
            match tokio::time::timeout(config.request_timeout, Client::connect(addr)).await {
                Ok(Ok(client)) => *slot = Some(client),
                _ => {
                    stats.connect_failures.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(100 + rng.random_range(0..100))).await;
                    continue;
                }
            }
        }
        let Some(client) = slot.as_mut() else { continue };
        // The session's clock, with the write buffer it depends on (a node that buffers writes names itself in
        // the commit's clock, and a transaction elsewhere asks it for their handover first).
        if let Some(c) = &clock {
            client.observe_session_clock(&ClientClock { vector: c.clone(), tokens: tokens.clone() });
        }
        let mut record = TxRecord {
            index: 0,
            session: config.id,
            dc: dc as u16,
            start_us: micros(config.epoch),
            end_us: 0,
            ops: Vec::new(),
            outcome: Outcome::Aborted,
        };
        let (keep, connection_ok) = run_plan(client, plan, &mut record, &config, &stats).await;
        record.end_us = micros(config.epoch);
        tokens = client.session_clock().map(|c| c.tokens).unwrap_or_default();
        if let Some(seen) = client.causal_clock() {
            match &mut clock {
                Some(own) if own.len() == seen.len() => own.merge_max(seen),
                _ => clock = Some(seen.clone()),
            }
        }
        if !connection_ok {
            *slot = None;
        }
        if keep {
            records.push(record);
        }
        if config.think_ms > 0 {
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..=config.think_ms))).await;
        }
    }
    SessionResult { records, clock }
}

/// How a failed call leaves the connection.
fn classify(error: &ClientError, stats: &RequestStats) -> bool {
    if error.is_connection_lost() {
        stats.connection_errors.fetch_add(1, Ordering::Relaxed);
        false
    } else {
        stats.server_errors.fetch_add(1, Ordering::Relaxed);
        let mut kinds = stats.server_error_kinds.lock().unwrap_or_else(|e| e.into_inner());
        *kinds.entry(error_kind(error)).or_default() += 1;
        true
    }
}

/// A server error's kind, for counting: AntidoteDB's code name and the message up to its second colon (or its
/// first parenthesis or semicolon), with numbers replaced by `#` (so that "partition 3 ..." and "partition 1 ..."
/// count together).
pub fn error_kind(error: &ClientError) -> String {
    let ClientError::Server { code, message } = error else {
        let text = error.to_string();
        return text.split(':').next().unwrap_or(&text).to_string();
    };
    let head = message.split(['(', ';']).next().unwrap_or(message);
    let clause = head.splitn(3, ':').take(2).collect::<Vec<_>>().join(":");
    let clause = clause.trim();
    let mut kind = String::with_capacity(clause.len());
    for c in clause.chars() {
        if c.is_ascii_digit() {
            if !kind.ends_with('#') {
                kind.push('#');
            }
        } else {
            kind.push(c);
        }
    }
    kind.truncate(80);
    format!("{}: {kind}", causet_wire::response::error_code_name(*code))
}

/// The outcome of a commit request that did not succeed.
fn failed_commit(error: &ClientError) -> Outcome {
    if error.is_aborted() {
        Outcome::Aborted
    } else {
        Outcome::Unknown
    }
}

/// Records how a commit request ended: acknowledged, refused (aborted, or unknown when the error leaves it open), or
/// unanswered in time (unknown). Returns (keep the record, whether the connection is still usable).
fn commit_outcome<T>(
    result: Result<Result<T, ClientError>, tokio::time::error::Elapsed>,
    record: &mut TxRecord,
    stats: &RequestStats,
) -> (bool, bool) {
    match result {
        Ok(Ok(_)) => {
            record.outcome = Outcome::Committed;
            (true, true)
        }
        Ok(Err(e)) => {
            record.outcome = failed_commit(&e);
            (true, classify(&e, stats))
        }
        Err(_) => {
            stats.timeouts.fetch_add(1, Ordering::Relaxed);
            record.outcome = Outcome::Unknown;
            (true, false)
        }
    }
}

/// Runs one plan and records it. Returns whether to keep the record (a transaction that never started, or a
/// failed static read, has nothing to check) and whether the connection is still usable.
async fn run_plan(
    client: &mut Client,
    plan: Plan,
    record: &mut TxRecord,
    config: &SessionConfig,
    stats: &RequestStats,
) -> (bool, bool) {
    let limit = config.request_timeout;
    let timed_out = || {
        stats.timeouts.fetch_add(1, Ordering::Relaxed);
    };
    match plan {
        Plan::StaticRead(objects) => {
            let ids: Vec<_> = objects.iter().map(|p| p.object.clone()).collect();
            match tokio::time::timeout(limit, client.static_read(None, &ids)).await {
                Ok(Ok((values, _))) => {
                    record_reads(record, &objects, &values);
                    record.outcome = Outcome::Committed;
                    (true, true)
                }
                Ok(Err(e)) => {
                    stats.failed_reads.fetch_add(1, Ordering::Relaxed);
                    (false, classify(&e, stats))
                }
                Err(_) => {
                    stats.failed_reads.fetch_add(1, Ordering::Relaxed);
                    timed_out();
                    (false, false)
                }
            }
        }
        Plan::StaticUpdate(objects) => {
            record_writes(record, &objects);
            let updates: Vec<_> = objects.iter().filter_map(|p| Some((p.object.clone(), p.op.clone()?))).collect();
            commit_outcome(tokio::time::timeout(limit, client.static_update(None, updates)).await, record, stats)
        }
        Plan::Interactive { steps, abort } => {
            let mut tx = match tokio::time::timeout(limit, client.start_transaction(None)).await {
                Ok(Ok(tx)) => tx,
                Ok(Err(e)) => return (false, classify(&e, stats)),
                Err(_) => {
                    timed_out();
                    return (false, false);
                }
            };
            // Before the commit request is sent, the transaction cannot commit: any failure is an abort.
            record.outcome = Outcome::Aborted;
            for step in steps {
                let result = match step {
                    Step::Read(objects) => {
                        let ids: Vec<_> = objects.iter().map(|p| p.object.clone()).collect();
                        match tokio::time::timeout(limit, tx.read(&ids)).await {
                            Ok(Ok(values)) => {
                                record_reads(record, &objects, &values);
                                Ok(())
                            }
                            Ok(Err(e)) => Err(Some(e)),
                            Err(_) => Err(None),
                        }
                    }
                    Step::Update(objects) => {
                        // Recorded before sending: if a read anywhere ever shows one of these writes without a
                        // commit, the checker must see it as the aborted write it is.
                        record_writes(record, &objects);
                        let updates: Vec<_> =
                            objects.iter().filter_map(|p| Some((p.object.clone(), p.op.clone()?))).collect();
                        match tokio::time::timeout(limit, tx.update(updates)).await {
                            Ok(Ok(())) => Ok(()),
                            Ok(Err(e)) => Err(Some(e)),
                            Err(_) => Err(None),
                        }
                    }
                };
                match result {
                    Ok(()) => {}
                    Err(Some(e)) => {
                        let ok = classify(&e, stats);
                        if ok {
                            // Best effort: the server aborts it anyway when it idles out.
                            let _ = tokio::time::timeout(limit, tx.abort()).await;
                        }
                        return (true, ok);
                    }
                    Err(None) => {
                        timed_out();
                        return (true, false);
                    }
                }
            }
            if abort {
                let ok = matches!(tokio::time::timeout(limit, tx.abort()).await, Ok(Ok(())));
                return (true, ok);
            }
            commit_outcome(tokio::time::timeout(limit, tx.commit()).await, record, stats)
        }
    }
}

/// Records what the reads of a step returned. A value of the wrong type or shape is recorded as a write id
/// nobody wrote, so the checker reports it as a phantom read.
pub fn record_reads(record: &mut TxRecord, objects: &[Planned], values: &[Value]) {
    for (p, value) in objects.iter().zip(values) {
        let Some(object) = &p.name else { continue };
        let observed = observed(object.kind, value).unwrap_or(match object.kind {
            ObjectKind::Set => Observed::Set(vec![WriteId::MAX]),
            ObjectKind::Register => Observed::Register(Some(WriteId::MAX)),
            ObjectKind::Counter => Observed::Counter(i64::MIN),
        });
        record.ops.push(HistOp::Read { object: object.clone(), observed });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_of_one_kind_count_together_whatever_their_numbers() {
        let server = |code, message: &str| ClientError::Server { code, message: message.to_string() };
        let a = error_kind(&server(3, "read failed: partition 3 timed out: at 17"));
        let b = error_kind(&server(3, "read failed: partition 12 timed out: at 9"));
        assert_eq!(a, b);
        assert_eq!(a, "aborted: read failed: partition # timed out");
        assert_eq!(
            error_kind(&server(1, "snapshot 1234 (of 2 DCs) not stable")),
            error_kind(&server(1, "snapshot 99 (of 2 DCs) not stable"))
        );
        assert_ne!(error_kind(&server(1, "timeout")), error_kind(&server(3, "timeout")));
    }
}
