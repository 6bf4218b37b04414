//! What one CQL statement of each kind costs a real Cassandra in CPU: the statements Cassandra alone and the causal
//! middleware make in `bench/letting-it-be.sh`, one kind at a time, so that a change to the middleware's schema or
//! statements can be priced before it is built (`bench/RESULTS-letting-it-be.md`, run 22).
//!
//! Against the two nodes of `scripts/cassandra start --nodes 2 --wan-delay-ms 50` (one per datacenter), from dc1:
//!
//! ```text
//! cargo run --release -p causet-middleware --example cql_cost -- --node 127.0.0.1:9042 --pids "PID1 PID2" \
//!     --case schema,preload,plain-read,records-read-in [--seconds 20] [--warmup-s 5] [--in-flight 32]
//! ```
//!
//! `schema` creates keyspace `cql_cost` (one replica per datacenter) and its tables; `preload` writes every key
//! once into each table (local set 0's copy); every other case runs its statement with `--in-flight` statements
//! outstanding for `--warmup-s`, then for `--seconds`, and prints the CPU both nodes' processes spent in that window
//! (`/proc/PID/stat`, user and system time) per statement that succeeded and per partition it read or wrote, and
//! how many failed. Keys are drawn as the benchmark draws them (zipfian, θ = 0.99, 100,000 keys of 8 digits), values
//! are 1 KiB of one repeated byte.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use causet_bench::keys::{key_name, Distribution, KeyChooser};
use causet_middleware::cassandra::{create_plain, create_records};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::policies::load_balancing::DefaultPolicy;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::Consistency;

const KEYS: u64 = 100_000;
/// Keys per statement of case `records-read-many` (the middleware's `GET_MANY_KEYS`).
const MANY: usize = 128;

/// The schema: Cassandra alone's table and the middleware's (as the middleware creates them), and the middleware's
/// with a record in one cell.
fn schema() -> [String; 4] {
    [
        "CREATE KEYSPACE IF NOT EXISTS cql_cost WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 1, \
         'dc2': 1}"
            .into(),
        create_plain("cql_cost"),
        create_records("cql_cost"),
        "CREATE TABLE IF NOT EXISTS cql_cost.records1 (key blob, ls smallint, data blob, PRIMARY KEY ((key, ls))) \
         WITH read_repair = 'BLOCKING'"
            .into(),
    ]
}

/// One statement kind: its CQL, its consistency, and how many partitions one execution touches.
struct Case {
    name: &'static str,
    cql: &'static str,
    consistency: Consistency,
    partitions: usize,
}

const CASES: &[Case] = &[
    Case {
        name: "plain-read",
        cql: "SELECT value FROM cql_cost.plain WHERE key = ?",
        consistency: Consistency::LocalOne,
        partitions: 1,
    },
    Case {
        name: "plain-write",
        cql: "INSERT INTO cql_cost.plain (key, value) VALUES (?, ?)",
        consistency: Consistency::LocalOne,
        partitions: 1,
    },
    Case {
        name: "plain-write-ts",
        cql: "INSERT INTO cql_cost.plain (key, value) VALUES (?, ?) USING TIMESTAMP ?",
        consistency: Consistency::LocalQuorum,
        partitions: 1,
    },
    Case {
        name: "records-write",
        cql: "INSERT INTO cql_cost.records (key, ls, seq, head, meta) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?",
        consistency: Consistency::LocalQuorum,
        partitions: 1,
    },
    Case {
        name: "records1-write",
        cql: "INSERT INTO cql_cost.records1 (key, ls, data) VALUES (?, ?, ?) USING TIMESTAMP ?",
        consistency: Consistency::LocalQuorum,
        partitions: 1,
    },
    Case {
        name: "records-read-in",
        cql: "SELECT ls, head FROM cql_cost.records WHERE key = ? AND ls IN ?",
        consistency: Consistency::LocalOne,
        partitions: 2,
    },
    Case {
        name: "records-read-one",
        cql: "SELECT head FROM cql_cost.records WHERE key = ? AND ls = ?",
        consistency: Consistency::LocalOne,
        partitions: 1,
    },
    Case {
        name: "records1-read-in",
        cql: "SELECT ls, data FROM cql_cost.records1 WHERE key = ? AND ls IN ?",
        consistency: Consistency::LocalOne,
        partitions: 2,
    },
    Case {
        name: "records-read-many",
        cql: "SELECT key, meta FROM cql_cost.records WHERE key IN ? AND ls = ?",
        consistency: Consistency::LocalOne,
        partitions: MANY,
    },
];

struct Args {
    node: String,
    pids: Vec<u32>,
    cases: Vec<String>,
    seconds: u64,
    warmup_s: u64,
    in_flight: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args =
        Args { node: String::new(), pids: Vec::new(), cases: Vec::new(), seconds: 20, warmup_s: 5, in_flight: 32 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--node" => args.node = value()?,
            "--pids" => {
                args.pids = value()?
                    .split_whitespace()
                    .map(|p| p.parse().map_err(|e| format!("--pids: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--case" => args.cases = value()?.split(',').map(str::to_owned).collect(),
            "--seconds" => args.seconds = value()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--warmup-s" => args.warmup_s = value()?.parse().map_err(|e| format!("--warmup-s: {e}"))?,
            "--in-flight" => args.in_flight = value()?.parse().map_err(|e| format!("--in-flight: {e}"))?,
            other => return Err(format!("unknown option {other}")),
        }
    }
    if args.node.is_empty() || args.cases.is_empty() || args.pids.is_empty() {
        return Err("--node, --pids (the Cassandra nodes' process ids) and --case are required".into());
    }
    for case in &args.cases {
        if !matches!(case.as_str(), "schema" | "preload") && !CASES.iter().any(|c| c.name == case) {
            let known: Vec<_> = CASES.iter().map(|c| c.name).collect();
            return Err(format!("unknown case {case:?}: schema, preload, {}", known.join(", ")));
        }
    }
    Ok(args)
}

/// User plus system CPU time of the processes, in µs.
fn cpu_us(pids: &[u32]) -> Result<u64, String> {
    let tick_us = 1_000_000 / 100; // USER_HZ is 100 on Linux.
    let mut total = 0;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(|e| format!("process {pid}: {e}"))?;
        // Fields after the command name (which may hold spaces), from field 3: utime and stime are fields 14, 15.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |i: usize| fields.get(i - 3).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
        total += (field(14) + field(15)) * tick_us;
    }
    Ok(total)
}

fn value(len: usize) -> Vec<u8> {
    vec![b'v'; len]
}

/// A record's parts as the middleware writes them: the head (a clock, then the value) and the meta (a clock and a
/// few dependencies; about the 29-83 bytes per write the proxies report).
fn head_and_meta(seq: u64) -> (Vec<u8>, Vec<u8>) {
    let clock = seq.to_le_bytes();
    let mut head = clock.repeat(2);
    head.extend(value(1024));
    let mut meta = clock.repeat(2);
    meta.extend((0..48u8).map(|i| i.wrapping_mul(37) ^ clock[0]));
    (head, meta)
}

/// Runs `case`'s statement once for the key of rank `rank` (`n`: the statement's number, a write's `seq`; a write
/// or a read of many keys is of local set 1's copy if `other_copy`, else of local set 0's); whether it succeeded.
async fn run_one(
    session: &Session,
    statement: &PreparedStatement,
    case: &str,
    rank: u64,
    n: u64,
    other_copy: bool,
) -> bool {
    let key = key_name(rank, 8);
    let ls: i16 = if other_copy { 1 } else { 0 };
    let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_micros() as i64;
    let both: Vec<i16> = vec![0, 1];
    let result = match case {
        "plain-read" => session.execute_unpaged(statement, (&key,)).await.map(drop),
        "plain-write" => session.execute_unpaged(statement, (&key, value(1024))).await.map(drop),
        "plain-write-ts" => session.execute_unpaged(statement, (&key, value(1024), at)).await.map(drop),
        "records-write" => {
            let (head, meta) = head_and_meta(n);
            session.execute_unpaged(statement, (&key, ls, n as i64, head, meta, at)).await.map(drop)
        }
        "records1-write" => {
            let (mut data, meta) = head_and_meta(n);
            data.extend(meta);
            session.execute_unpaged(statement, (&key, ls, data, at)).await.map(drop)
        }
        "records-read-in" | "records1-read-in" => session.execute_unpaged(statement, (&key, &both)).await.map(drop),
        "records-read-one" => session.execute_unpaged(statement, (&key, 0i16)).await.map(drop),
        "records-read-many" => {
            let keys: Vec<Vec<u8>> = (0..MANY as u64).map(|i| key_name((rank + i * 769) % KEYS, 8)).collect();
            session.execute_unpaged(statement, (&keys, ls)).await.map(drop)
        }
        _ => unreachable!("checked by parse_args"),
    };
    match result {
        Ok(()) => true,
        Err(e) => {
            eprintln!("{case}: {e}");
            false
        }
    }
}

/// Runs `case` with `in_flight` statements outstanding until `until`; the statements that succeeded and those
/// that failed.
async fn drive(
    session: &Arc<Session>,
    statement: &Arc<PreparedStatement>,
    case: &str,
    in_flight: usize,
    until: Instant,
) -> (u64, u64) {
    let (done, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = Vec::new();
    for t in 0..in_flight {
        let (session, statement, case) = (session.clone(), statement.clone(), case.to_owned());
        let (done, failed) = (done.clone(), failed.clone());
        tasks.push(tokio::spawn(async move {
            let chooser = KeyChooser::new(Distribution::Zipfian { theta: 0.99 }, KEYS);
            let mut rng = ChaCha8Rng::seed_from_u64(t as u64);
            let mut n = t as u64;
            while Instant::now() < until {
                let rank = chooser.sample(&mut rng);
                let ok = run_one(&session, &statement, &case, rank, n, rand::RngExt::random(&mut rng)).await;
                (if ok { &done } else { &failed }).fetch_add(1, Ordering::Relaxed);
                n += in_flight as u64;
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed))
}

/// Case `name`'s statement, prepared with its consistency.
async fn prepare(session: &Session, name: &str) -> Result<PreparedStatement, String> {
    let case = CASES.iter().find(|c| c.name == name).ok_or(format!("no case {name}"))?;
    let mut statement = session.prepare(case.cql).await.map_err(|e| format!("prepare {}: {e}", case.cql))?;
    statement.set_consistency(case.consistency);
    Ok(statement)
}

/// Writes every key once with each table's write case (local set 0's copy, `seq` = the key's rank).
async fn preload(session: &Arc<Session>) -> Result<(), String> {
    for case in ["plain-write", "records-write", "records1-write"] {
        let statement = Arc::new(prepare(session, case).await?);
        let (next, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut tasks = Vec::new();
        for _ in 0..64 {
            let (session, statement, next, failed) = (session.clone(), statement.clone(), next.clone(), failed.clone());
            tasks.push(tokio::spawn(async move {
                loop {
                    let rank = next.fetch_add(1, Ordering::Relaxed);
                    if rank >= KEYS {
                        break;
                    }
                    if !run_one(&session, &statement, case, rank, rank, false).await {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
        }
        for t in tasks {
            let _ = t.await;
        }
        match failed.load(Ordering::Relaxed) {
            0 => eprintln!("preloaded {KEYS} keys ({case})"),
            f => return Err(format!("{case}: {f} of {KEYS} writes failed")),
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let args = parse_args().unwrap_or_else(|e| {
        eprintln!("cql_cost: {e}");
        std::process::exit(2);
    });
    let policy = DefaultPolicy::builder().prefer_datacenter("dc1".into()).permit_dc_failover(false).build();
    let profile = ExecutionProfile::builder().load_balancing_policy(policy).consistency(Consistency::LocalOne).build();
    let session = SessionBuilder::new()
        .known_node(&args.node)
        .default_execution_profile_handle(profile.into_handle())
        .build()
        .await
        .unwrap_or_else(|e| panic!("connect to {}: {e}", args.node));
    let session = Arc::new(session);
    println!("| case | statements/s | CPU µs per statement | CPU µs per partition | failed |");
    println!("|---|---:|---:|---:|---:|");
    for name in &args.cases {
        match name.as_str() {
            "schema" => {
                for s in schema() {
                    session.query_unpaged(s.as_str(), &[]).await.unwrap_or_else(|e| panic!("{s}: {e}"));
                }
                session.await_schema_agreement().await.expect("schema agreement");
                continue;
            }
            "preload" => {
                preload(&session).await.expect("preload");
                continue;
            }
            _ => {}
        }
        let case = CASES.iter().find(|c| c.name == name).expect("checked by parse_args");
        let statement = Arc::new(prepare(&session, name).await.unwrap_or_else(|e| panic!("{e}")));
        let start = Instant::now() + Duration::from_secs(args.warmup_s);
        drive(&session, &statement, name, args.in_flight, start).await;
        let cpu_before = cpu_us(&args.pids).expect("CPU time");
        let measured_from = Instant::now();
        let until = measured_from + Duration::from_secs(args.seconds);
        let (n, failed) = drive(&session, &statement, name, args.in_flight, until).await;
        let elapsed = measured_from.elapsed().as_secs_f64();
        let cpu = (cpu_us(&args.pids).expect("CPU time") - cpu_before) as f64;
        let per = cpu / n.max(1) as f64;
        let rate = n as f64 / elapsed;
        println!("| {name} | {rate:.0} | {per:.0} | {:.1} | {failed} |", per / case.partitions as f64);
    }
}
