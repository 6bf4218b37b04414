//! Crash tests of the `causet` binary: the real server as a child process, SIGKILLed in the middle of a workload of
//! multi-partition transactions, restarted on the same data directory, and checked:
//!
//! 1. every acknowledged transaction is present in every set it wrote (no acknowledged commit is lost);
//! 2. every attempted transaction (acknowledged or in doubt) is present in all the sets it wrote or in none (no
//!    transaction is partly visible after recovery);
//! 3. no element appears that was never attempted (or in a set its transaction did not write);
//! 4. outcomes are stable: an in-doubt transaction found committed after a restart stays committed, one found
//!    absent at a snapshot past every timestamp of the stopped run never comes back.
//!
//! One round stops the server gracefully (SIGTERM) instead and checks that it exits with success.
//!
//! `cargo test -p causet --test crash -- --nocapture` prints the seed, each round and a summary.
//! `CAUSET_CRASH_ROUNDS=N` sets the number of SIGKILL rounds (default 5); `CAUSET_CRASH_SEED=S` replays a seed's
//! choices (keys, transaction kinds, kill delays); thread and disk timing still vary.

use causet_client::{Client, ClientError, ObjectId, Op, Set, ValueExt, VectorClock};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BUCKET: &str = "crash";
/// Objects written: 16 `set_aw` objects over 8 partitions, so most transactions of 2–3 objects span partitions.
const KEYS: usize = 16;
const CLIENTS: usize = 8;
const PARTITIONS: u32 = 8;
const DEFAULT_ROUNDS: usize = 5;
const ROUNDS_VAR: &str = "CAUSET_CRASH_ROUNDS";
const SEED_VAR: &str = "CAUSET_CRASH_SEED";
/// The kill comes this long after the clients start: 200–1500 ms.
const MIN_DELAY_MS: u64 = 200;
const MAX_DELAY_MS: u64 = 1_500;
/// How long a started server may take to accept connections (recovery included).
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a stopped server may take to exit.
const EXIT_TIMEOUT: Duration = Duration::from_secs(20);
/// How long clients may take to notice their server is gone.
const CLIENT_EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the verification read retries until the restarted server answers.
const READ_TIMEOUT: Duration = Duration::from_secs(20);
/// The whole test may take this long, plus [`TEST_TIMEOUT_PER_ROUND`] per round.
const TEST_TIMEOUT_BASE: Duration = Duration::from_secs(60);
const TEST_TIMEOUT_PER_ROUND: Duration = Duration::from_secs(15);
/// A hybrid clock runs at most `max_clock_ahead_us` (1 s) ahead of physical time, so every timestamp the stopped run
/// handed out is below the physical time this long after the stop: a snapshot taken then covers all of them.
const SETTLE: Duration = Duration::from_millis(1_500);

/// SplitMix64: small, seeded, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn set(key: usize) -> Set {
    Set::aw(format!("k{key:02}"), BUCKET)
}

/// How many partitions a transaction writing `keys` touches.
fn partitions_of(keys: &[usize]) -> usize {
    keys.iter().map(|&k| set(k).key().partition(PARTITIONS)).collect::<BTreeSet<_>>().len()
}

fn key_names(keys: &[usize]) -> String {
    let names: Vec<String> = keys.iter().map(|k| format!("k{k:02}")).collect();
    format!("[{}]", names.join(", "))
}

/// One transaction the clients attempted: it adds `element` to the sets `keys`.
#[derive(Clone, Debug)]
struct Attempt {
    element: String,
    keys: Vec<usize>,
    round: usize,
    /// Whether commit returned Ok. Otherwise the transaction is in doubt.
    acked: bool,
}

#[derive(Default)]
struct Ledger {
    attempts: Vec<Attempt>,
    /// The largest commit vector acknowledged: the clients' causal clock.
    clock: Option<VectorClock>,
}

/// The `causet` child process; SIGKILLed on drop, so no server outlives the test even when an assertion fails.
struct Server {
    child: Child,
    client_addr: SocketAddr,
    log: PathBuf,
    /// From spawn until the client port accepted a connection.
    startup: Duration,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port(taken: &[u16]) -> u16 {
    causet::cluster::free_port(taken).expect("a free port")
}

fn log_tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Starts `causet start` on `data` with fresh loopback ports and waits until the client port accepts. A port taken
/// between picking and binding makes the server exit; it is retried on other ports.
async fn start_server(data: &Path, logs: &Path, label: &str, checkpoint_s: u64) -> Server {
    const ATTEMPTS: usize = 5;
    for attempt in 0..ATTEMPTS {
        let client_port = free_port(&[]);
        let admin_port = free_port(&[client_port]);
        let client_addr = SocketAddr::from(([127, 0, 0, 1], client_port));
        let log = logs.join(format!("{label}-{attempt}.log"));
        let out = std::fs::File::create(&log).expect("create the server log");
        let err = out.try_clone().expect("clone the server log");
        let started = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_causet"))
            .arg("start")
            .arg("--data-dir")
            .arg(data)
            .args(["--client-bind", &client_addr.to_string()])
            .args(["--admin-bind", &format!("127.0.0.1:{admin_port}")])
            .args(["--partitions", &PARTITIONS.to_string(), "--sync", "always", "--log", "info"])
            .args(["--checkpoint-interval-s", &checkpoint_s.to_string()])
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn the causet binary");
        let mut server = Server { child, client_addr, log, startup: Duration::ZERO };
        let deadline = started + READY_TIMEOUT;
        loop {
            if let Some(status) = server.child.try_wait().expect("poll the server") {
                let tail = log_tail(&server.log, 30);
                if tail.contains("binding the") && attempt + 1 < ATTEMPTS {
                    println!("{label}: a port was taken before the server bound it; retrying on other ports");
                    break;
                }
                panic!("{label}: the server exited with {status} before accepting connections; its log ends:\n{tail}");
            }
            let probe = tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(client_addr));
            if let Ok(Ok(_)) = probe.await {
                if server.child.try_wait().expect("poll the server").is_none() {
                    server.startup = started.elapsed();
                    return server;
                }
                continue;
            }
            assert!(
                Instant::now() < deadline,
                "{label}: the server did not accept connections within {READY_TIMEOUT:?}; its log ends:\n{}",
                log_tail(&server.log, 30)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    unreachable!("every attempt either returns, retries or panics")
}

/// Waits (bounded) for the child to exit.
async fn wait_exit(child: &mut Child, what: &str) -> Result<ExitStatus, String> {
    let deadline = Instant::now() + EXIT_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait().map_err(|e| format!("{what}: waiting for the server: {e}"))? {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            return Err(format!("{what}: the server did not exit within {EXIT_TIMEOUT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn interactive(client: &mut Client, updates: Vec<(ObjectId, Op)>) -> Result<VectorClock, ClientError> {
    let mut tx = client.start_transaction(None).await?;
    tx.update(updates).await?;
    tx.commit().await
}

/// How a client ended: the error that stopped it, and whether it came before the server was stopped (which nothing
/// explains but a server bug).
struct ClientEnd {
    error: String,
    before_stop: bool,
}

/// One client: commits transactions until a request fails.
async fn client_loop(
    addr: SocketAddr,
    round: usize,
    client_no: usize,
    seed: u64,
    ledger: Arc<Mutex<Ledger>>,
    stopping: Arc<AtomicBool>,
) -> ClientEnd {
    let mut rng = Rng(seed);
    let end = |error: String| ClientEnd { error, before_stop: !stopping.load(Ordering::SeqCst) };
    let mut client = match Client::connect(addr).await {
        Ok(c) => c,
        Err(e) => return end(format!("client {client_no} could not connect: {e}")),
    };
    let mut n = 0u64;
    loop {
        let count = 2 + rng.below(2) as usize;
        let mut keys = Vec::with_capacity(count);
        while keys.len() < count {
            let k = rng.below(KEYS as u64) as usize;
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
        let element = format!("r{round}-c{client_no}-{n}");
        n += 1;
        let index = {
            let mut l = ledger.lock().expect("ledger");
            l.attempts.push(Attempt { element: element.clone(), keys: keys.clone(), round, acked: false });
            l.attempts.len() - 1
        };
        let updates: Vec<(ObjectId, Op)> = keys.iter().map(|&k| set(k).add(element.as_str())).collect();
        let (kind, result) = if rng.below(2) == 0 {
            ("static update", client.static_update(None, updates).await)
        } else {
            ("interactive transaction", interactive(&mut client, updates).await)
        };
        match result {
            Ok(commit) => {
                let mut l = ledger.lock().expect("ledger");
                l.attempts[index].acked = true;
                match &mut l.clock {
                    Some(clock) => clock.merge_max(&commit),
                    None => l.clock = Some(commit),
                }
            }
            Err(e) => {
                return end(format!("client {client_no}, {kind} adding {element} to {}: {e}", key_names(&keys)));
            }
        }
    }
}

async fn read_once(addr: SocketAddr, clock: Option<&VectorClock>) -> Result<Vec<BTreeSet<String>>, String> {
    let objects: Vec<ObjectId> = (0..KEYS).map(|k| set(k).key().clone()).collect();
    let mut client = Client::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
    let (values, _) = client.static_read(clock, &objects).await.map_err(|e| format!("static read: {e}"))?;
    if values.len() != KEYS {
        return Err(format!("the read returned {} values for {KEYS} objects", values.len()));
    }
    let mut sets = Vec::with_capacity(KEYS);
    for (k, value) in values.iter().enumerate() {
        let elements = value.as_set().ok_or_else(|| format!("k{k:02} read as {value:?}, not a set"))?;
        sets.push(elements.iter().map(|e| String::from_utf8_lossy(e).into_owned()).collect());
    }
    Ok(sets)
}

/// Reads every set with a fresh client, retrying (bounded) until the restarted server answers.
async fn read_all(addr: SocketAddr, clock: Option<&VectorClock>) -> Result<Vec<BTreeSet<String>>, String> {
    let deadline = Instant::now() + READ_TIMEOUT;
    loop {
        let error = match tokio::time::timeout(Duration::from_secs(10), read_once(addr, clock)).await {
            Ok(Ok(sets)) => return Ok(sets),
            Ok(Err(e)) => e,
            Err(_) => "no answer within 10 s".to_string(),
        };
        if Instant::now() >= deadline {
            return Err(format!("the restarted server did not answer a read within {READ_TIMEOUT:?}: {error}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Violations of the checks, by kind.
#[derive(Default)]
struct Violations {
    lost: Vec<String>,
    partial: Vec<String>,
    unknown: Vec<String>,
    unstable: Vec<String>,
}

impl Violations {
    fn is_empty(&self) -> bool {
        self.lost.is_empty() && self.partial.is_empty() && self.unknown.is_empty() && self.unstable.is_empty()
    }

    fn report(&self, out: &mut String, read: &str) {
        let kinds = [
            ("acknowledged transactions lost (missing from sets they wrote)", &self.lost),
            ("transactions partly visible (in some of their sets, not all)", &self.partial),
            ("elements never attempted, or in a set their transaction did not write", &self.unknown),
            ("outcomes that changed since an earlier restart", &self.unstable),
        ];
        for (title, list) in kinds {
            if list.is_empty() {
                continue;
            }
            let _ = writeln!(out, "  {read}: {} {title}:", list.len());
            for line in list.iter().take(20) {
                let _ = writeln!(out, "    {line}");
            }
            if list.len() > 20 {
                let _ = writeln!(out, "    … and {} more", list.len() - 20);
            }
        }
    }
}

/// Checks one read of every set against what the clients attempted, and against the outcomes of in-doubt
/// transactions settled by earlier restarts (`decided`: true = committed, false = aborted).
fn check(attempts: &[Attempt], decided: &BTreeMap<String, bool>, sets: &[BTreeSet<String>]) -> Violations {
    let mut v = Violations::default();
    let by_element: BTreeMap<&str, &Attempt> = attempts.iter().map(|a| (a.element.as_str(), a)).collect();
    for (k, elements) in sets.iter().enumerate() {
        for e in elements {
            match by_element.get(e.as_str()) {
                None => v.unknown.push(format!("{e} in k{k:02}: never attempted")),
                Some(a) if !a.keys.contains(&k) => {
                    v.unknown.push(format!("{e} in k{k:02}: its transaction wrote only {}", key_names(&a.keys)))
                }
                Some(_) => {}
            }
        }
    }
    for a in attempts {
        let (present, missing): (Vec<usize>, Vec<usize>) =
            a.keys.iter().partition(|&&k| sets[k].contains(a.element.as_str()));
        let status = if a.acked { "acknowledged" } else { "in doubt" };
        let detail = format!(
            "{} (round {}, {status}) wrote {}: present in {}, missing from {}",
            a.element,
            a.round,
            key_names(&a.keys),
            key_names(&present),
            key_names(&missing)
        );
        if a.acked && !missing.is_empty() {
            v.lost.push(detail);
        } else if !present.is_empty() && !missing.is_empty() {
            v.partial.push(detail);
        } else {
            match decided.get(&a.element) {
                Some(true) if !missing.is_empty() => v.unstable.push(format!("{detail}; an earlier restart had it")),
                Some(false) if !present.is_empty() => {
                    v.unstable.push(format!("{detail}; an earlier restart had found it aborted"))
                }
                _ => {}
            }
        }
    }
    v
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Stop {
    Kill,
    Term,
}

struct RoundStats {
    stop: Stop,
    checkpoint_s: u64,
    delay: Duration,
    attempted: usize,
    acked: usize,
    in_doubt: usize,
    in_doubt_found: usize,
    multi_partition: usize,
    recovery: Duration,
    elements: usize,
}

struct Failure {
    report: String,
}

async fn run(seed: u64, crash_rounds: usize, dir: &Path) -> Result<Vec<RoundStats>, Failure> {
    let fail = |round: usize, report: String| Failure { report: format!("seed {seed}, round {round}: {report}") };
    let data = dir.join("data");
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).expect("create the log directory");
    let mut rng = Rng(seed);
    // The SIGKILL rounds, with one graceful stop among them.
    let mut plan = vec![Stop::Kill; crash_rounds];
    plan.insert(crash_rounds.min(2), Stop::Term);
    // Every other run checkpoints each second, so recovery also starts from checkpoints and truncated logs.
    let checkpoint_for = |run: usize| if run % 2 == 1 { 1 } else { 60 };

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut decided: BTreeMap<String, bool> = BTreeMap::new();
    let mut stats = Vec::new();
    let mut server = start_server(&data, &logs, "run-00-start", checkpoint_for(0)).await;
    println!("run 0 started in {:?}", server.startup);

    for (round, &stop) in plan.iter().enumerate() {
        let checkpoint_s = checkpoint_for(round);
        let stopping = Arc::new(AtomicBool::new(false));
        let first_attempt = ledger.lock().expect("ledger").attempts.len();
        let clients: Vec<_> = (0..CLIENTS)
            .map(|c| {
                let task = client_loop(server.client_addr, round, c, rng.next(), ledger.clone(), stopping.clone());
                tokio::spawn(task)
            })
            .collect();
        let delay = Duration::from_millis(MIN_DELAY_MS + rng.below(MAX_DELAY_MS - MIN_DELAY_MS + 1));
        tokio::time::sleep(delay).await;

        if let Ok(Some(status)) = server.child.try_wait() {
            let tail = log_tail(&server.log, 40);
            return Err(fail(round, format!("the server exited on its own ({status}) during the workload:\n{tail}")));
        }
        stopping.store(true, Ordering::SeqCst);
        match stop {
            Stop::Kill => {
                server.child.kill().expect("SIGKILL the server");
                wait_exit(&mut server.child, "SIGKILL").await.map_err(|e| fail(round, e))?;
            }
            Stop::Term => {
                let pid = server.child.id().to_string();
                let sent = Command::new("kill").args(["-TERM", &pid]).status().expect("run kill -TERM");
                assert!(sent.success(), "kill -TERM {pid} failed: {sent}");
                let status = wait_exit(&mut server.child, "SIGTERM").await.map_err(|e| fail(round, e))?;
                if !status.success() {
                    let tail = log_tail(&server.log, 40);
                    return Err(fail(round, format!("after SIGTERM the server exited with {status}:\n{tail}")));
                }
            }
        }
        let stopped_at = Instant::now();

        let mut unexpected = Vec::new();
        let mut after_stop = BTreeSet::new();
        for (c, task) in clients.into_iter().enumerate() {
            match tokio::time::timeout(CLIENT_EXIT_TIMEOUT, task).await {
                Ok(Ok(ClientEnd { error, before_stop: true })) => unexpected.push(error),
                Ok(Ok(ClientEnd { error, before_stop: false })) => {
                    // "client 3, static update adding r0-c3-17 to [k01, k02]: the server closed the connection"
                    after_stop.insert(error.split_once(": ").map_or(error.clone(), |(_, e)| e.to_string()));
                }
                Ok(Err(e)) => return Err(fail(round, format!("client {c} panicked: {e}"))),
                Err(_) => {
                    return Err(fail(round, format!("client {c} still running {CLIENT_EXIT_TIMEOUT:?} after the stop")))
                }
            }
        }
        if !unexpected.is_empty() {
            let tail = log_tail(&server.log, 40);
            let errors = unexpected.join("\n  ");
            return Err(fail(
                round,
                format!("requests failed before the server was stopped:\n  {errors}\nserver log:\n{tail}"),
            ));
        }

        // Restart on the same data directory and verify.
        let label = format!("run-{:02}-after-{}", round + 1, if stop == Stop::Kill { "sigkill" } else { "sigterm" });
        let stopped_log = server.log.clone();
        server = start_server(&data, &logs, &label, checkpoint_for(round + 1)).await;
        let recovery = server.startup;
        let (attempts, clock) = {
            let l = ledger.lock().expect("ledger");
            (l.attempts.clone(), l.clock.clone())
        };
        // A session that carries the clients' causal clock must see every acknowledged commit at once.
        let with_clock = read_all(server.client_addr, clock.as_ref()).await.map_err(|e| fail(round, e))?;
        let first = check(&attempts, &decided, &with_clock);
        // Past every timestamp of the stopped run, a fresh session sees every outcome recovery settled.
        let settle_until = stopped_at + SETTLE;
        tokio::time::sleep(settle_until.saturating_duration_since(Instant::now())).await;
        let settled = read_all(server.client_addr, None).await.map_err(|e| fail(round, e))?;
        let mut second = check(&attempts, &decided, &settled);
        for (k, (before, after)) in with_clock.iter().zip(&settled).enumerate() {
            for e in before.difference(after) {
                second.unstable.push(format!("{e} in k{k:02} at the first read, gone at the later one"));
            }
        }
        if !first.is_empty() || !second.is_empty() {
            let mut report = format!(
                "{} of {} transactions acknowledged so far; after {:?} of workload, a {stop:?} and a restart:\n",
                attempts.iter().filter(|a| a.acked).count(),
                attempts.len(),
                delay
            );
            first.report(&mut report, "read with the clients' causal clock");
            second.report(&mut report, "read by a fresh session 1.5 s after the stop");
            let _ = writeln!(report, "log of the stopped server ends:\n{}", log_tail(&stopped_log, 25));
            let _ = writeln!(report, "log of the restarted server ends:\n{}", log_tail(&server.log, 25));
            return Err(fail(round, report));
        }

        let this_round = &attempts[first_attempt..];
        let mut in_doubt_found = 0;
        for a in attempts.iter().filter(|a| !a.acked) {
            let present = settled[a.keys[0]].contains(a.element.as_str());
            if a.round == round && present {
                in_doubt_found += 1;
            }
            decided.entry(a.element.clone()).or_insert(present);
        }
        let round_stats = RoundStats {
            stop,
            checkpoint_s,
            delay,
            attempted: this_round.len(),
            acked: this_round.iter().filter(|a| a.acked).count(),
            in_doubt: this_round.iter().filter(|a| !a.acked).count(),
            in_doubt_found,
            multi_partition: this_round.iter().filter(|a| partitions_of(&a.keys) > 1).count(),
            recovery,
            elements: settled.iter().map(BTreeSet::len).sum(),
        };
        println!("round {round}: the clients' errors after the {stop:?}: {after_stop:?}");
        let r = &round_stats;
        println!(
            "round {round}: {:?} after {:?} (checkpoints every {} s): {} transactions attempted ({} over several \
             partitions), {} acknowledged, {} in doubt ({} found after recovery); restart took {:?}; the sets hold {} \
             elements; checks passed",
            r.stop,
            r.delay,
            r.checkpoint_s,
            r.attempted,
            r.multi_partition,
            r.acked,
            r.in_doubt,
            r.in_doubt_found,
            r.recovery,
            r.elements
        );
        stats.push(round_stats);
    }
    Ok(stats)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_commits_survive_sigkill_and_transactions_stay_atomic() {
    let seed = match std::env::var(SEED_VAR) {
        Ok(s) => s.parse().unwrap_or_else(|_| panic!("{SEED_VAR} must be a number, not {s:?}")),
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("time").as_nanos() as u64,
    };
    let rounds = match std::env::var(ROUNDS_VAR) {
        Ok(s) => s.parse().unwrap_or_else(|_| panic!("{ROUNDS_VAR} must be a number, not {s:?}")),
        Err(_) => DEFAULT_ROUNDS,
    };
    println!("crash test seed {seed} (replay with {SEED_VAR}={seed}; timing still varies), {rounds} SIGKILL rounds");
    let placement: Vec<String> =
        (0..KEYS).map(|k| format!("k{k:02}→p{}", set(k).key().partition(PARTITIONS).0)).collect();
    println!("objects over the {PARTITIONS} partitions: {}", placement.join(" "));
    let used: BTreeSet<_> = (0..KEYS).map(|k| set(k).key().partition(PARTITIONS)).collect();
    assert!(used.len() >= 4, "the {KEYS} objects fall on only {} partitions: too few two-phase commits", used.len());
    let test_timeout = TEST_TIMEOUT_BASE + TEST_TIMEOUT_PER_ROUND * (rounds as u32 + 1);
    let mut dir = tempfile::tempdir().expect("a temporary directory");
    let started = Instant::now();
    let outcome = tokio::time::timeout(test_timeout, run(seed, rounds, dir.path())).await;
    let stats = match outcome {
        Ok(Ok(stats)) => stats,
        Ok(Err(failure)) => {
            dir.disable_cleanup(true);
            panic!("{}\ndata directory and server logs kept in {}", failure.report, dir.path().display());
        }
        Err(_) => {
            dir.disable_cleanup(true);
            panic!(
                "seed {seed}: the crash test did not finish within {test_timeout:?}; data directory and server logs \
                 kept in {}",
                dir.path().display()
            );
        }
    };

    let attempted: usize = stats.iter().map(|s| s.attempted).sum();
    let acked: usize = stats.iter().map(|s| s.acked).sum();
    let in_doubt: usize = stats.iter().map(|s| s.in_doubt).sum();
    let found: usize = stats.iter().map(|s| s.in_doubt_found).sum();
    let multi: usize = stats.iter().map(|s| s.multi_partition).sum();
    let recoveries: Vec<String> = stats.iter().map(|s| format!("{} ms", s.recovery.as_millis())).collect();
    let max_recovery = stats.iter().map(|s| s.recovery).max().unwrap_or_default();
    println!(
        "summary (seed {seed}): {} rounds ({} SIGKILL, 1 SIGTERM) in {:?}; {attempted} transactions attempted \
         ({multi} of them over several partitions), {acked} acknowledged (all found after recovery), {in_doubt} in \
         doubt ({found} found committed, {} absent, none partly); restart times {} (max {:?}); {} elements in the sets \
         at the end",
        stats.len(),
        stats.iter().filter(|s| s.stop == Stop::Kill).count(),
        started.elapsed(),
        in_doubt - found,
        recoveries.join(", "),
        max_recovery,
        stats.last().map_or(0, |s| s.elements)
    );
    assert!(acked > 0, "no transaction was acknowledged: the workload did not run");
}
