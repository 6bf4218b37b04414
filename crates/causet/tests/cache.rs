//! The lease cache (HoneyPot) on real processes: a DC of three nodes, each caching the objects its clients read,
//! and buffering their writes when asked. Reads through a cache are atomic and monotonic, see the session's own
//! writes when it passes its clock, are never staler than a lease, and are served from the cache when they can be;
//! buffered writes are read back at their node at once and reach every node within a lease, a transaction at a
//! time.

use causet::cluster::{self, StartOptions};
use causet_client::{Client, Counter, ReadFrom, ValueExt, VectorClock};
use std::time::{Duration, Instant};

const LEASE_MS: u64 = 1_500;

fn metric(text: &str, name: &str) -> u64 {
    text.lines().find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok()).map_or(0, |v| v as u64)
}

/// Starts a DC of three nodes with `[cache]` set to `cache`.
fn start_dc<'a>(dir: &'a std::path::Path, cache: &str) -> (cluster::ClusterFile, cluster::StopOnDrop<'a>) {
    start_dcs(dir, 1, 3, cache)
}

/// Starts `dcs` DCs of `nodes` nodes with `[cache]` set to `cache`.
fn start_dcs<'a>(
    dir: &'a std::path::Path,
    dcs: u16,
    nodes: u16,
    cache: &str,
) -> (cluster::ClusterFile, cluster::StopOnDrop<'a>) {
    let options = StartOptions {
        dcs,
        nodes_per_dc: nodes,
        replicas: 1,
        partitions: 6,
        dir: dir.to_path_buf(),
        base_port: 0,
        exe: Some(env!("CARGO_BIN_EXE_causet").into()),
        extra_config: format!("cache = {{ {cache} }}"),
        ..Default::default()
    };
    let file = cluster::start(&options).expect("the cluster starts");
    (file, cluster::StopOnDrop(dir))
}

/// `n` counters named `{prefix}0`, `{prefix}1`, … in `bucket`, and their keys.
fn counters(n: usize, prefix: &str, bucket: &str) -> (Vec<Counter>, Vec<causet_client::ObjectId>) {
    let counters: Vec<Counter> = (0..n).map(|i| Counter::new(format!("{prefix}{i}"), bucket)).collect();
    let keys = counters.iter().map(|c| c.key().clone()).collect();
    (counters, keys)
}

/// The runtime the tests' clients run on.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime")
}

#[test]
fn a_dc_of_three_nodes_reads_through_lease_caches_atomically_monotonically_and_at_most_a_lease_stale() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _guard) = start_dc(dir.path(), &format!("enabled = true, lease_ms = {LEASE_MS}"));
    let clients = file.dc_clients(0);
    let (counters, keys) = counters(6, "c", "cache-test");
    let rt = runtime();
    rt.block_on(async {
        // A session writes at node 0 and reads at node 1 with its clock: it sees its write, even though node 1
        // serves from a cache.
        let mut writer = Client::connect(clients[0]).await.expect("connects to node 0");
        let increments = counters.iter().map(|c| c.increment(1)).collect::<Vec<_>>();
        let mut clock = Some(writer.static_update(None, increments.clone()).await.expect("writes"));
        let mut reader = Client::connect(clients[1]).await.expect("connects to node 1");
        let (values, _) = reader.static_read(clock.as_ref(), &keys).await.expect("reads");
        assert!(values.iter().all(|v| v.as_counter() == Some(1)), "the session's own write: {values:?}");

        // A writer keeps incrementing every counter in one transaction; readers at nodes 1 and 2 read them all
        // again and again without their own writes: every read shows one transaction's worth (all equal), and a
        // session carrying its clock never sees fewer than before.
        let writing = tokio::spawn(async move {
            for _ in 0..150 {
                clock = Some(writer.static_update(clock.as_ref(), increments.clone()).await.expect("writes"));
            }
            clock
        });
        let mut sessions = Vec::new();
        for &addr in &clients[1..] {
            let keys = keys.clone();
            sessions.push(tokio::spawn(async move {
                let mut c = Client::connect(addr).await.expect("connects");
                let (mut seen, mut clock) = (0, None::<VectorClock>);
                for _ in 0..300 {
                    let (values, commit) = c.static_read(clock.as_ref(), &keys).await.expect("reads");
                    let counts: Vec<i64> = values.iter().map(|v| v.as_counter().expect("a counter")).collect();
                    assert!(counts.iter().all(|n| *n == counts[0]), "{addr}: a fractured read {counts:?}");
                    assert!(counts[0] >= seen, "{addr}: went back from {seen} to {}", counts[0]);
                    seen = counts[0];
                    clock = Some(commit);
                }
                seen
            }));
        }
        let last_clock = writing.await.expect("the writer").expect("a clock");
        for s in sessions {
            s.await.expect("a reader");
        }
        // With the writer's clock, every node shows every write at once; without one, within a lease.
        for &addr in &clients {
            let mut c = Client::connect(addr).await.expect("connects");
            let (values, _) = c.static_read(Some(&last_clock), &keys).await.expect("reads");
            assert!(values.iter().all(|v| v.as_counter() == Some(151)), "{addr} with the clock: {values:?}");
        }
        tokio::time::sleep(Duration::from_millis(LEASE_MS + 500)).await;
        let deadline = Instant::now() + Duration::from_millis(LEASE_MS);
        for &addr in &clients {
            let mut c = Client::connect(addr).await.expect("connects");
            let (values, _) = c.static_read(None, &keys).await.expect("reads");
            assert!(values.iter().all(|v| v.as_counter() == Some(151)), "{addr} a lease later: {values:?}");
        }
        assert!(Instant::now() < deadline, "the reads a lease later were slow");
    });
    // The caches served reads, and /status shows them.
    let text = cluster::http_get(file.nodes[1].admin, "/metrics").expect("metrics");
    let hits = metric(&text, "causet_cache_reads_total{outcome=\"hit\"}");
    let misses = metric(&text, "causet_cache_reads_total{outcome=\"miss\"}");
    assert!(hits > 100, "node 1's cache served {hits} reads ({misses} missed):\n{text}");
    let status = cluster::http_get(file.nodes[1].admin, "/status").expect("status");
    assert!(status.contains("\"cache\":{\"hits\":"), "{status}");
}

#[test]
fn buffered_writes_are_read_back_at_their_node_at_once_and_reach_every_node_whole_within_a_lease() {
    const LEASE: u64 = 400;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (file, _guard) = start_dc(dir.path(), &format!("enabled = true, lease_ms = {LEASE}, buffer_writes = true"));
    let clients = file.dc_clients(0);
    let (counters, keys) = counters(6, "b", "buffer-test");
    let rt = runtime();
    const WRITES: i64 = 200;
    rt.block_on(async {
        // A session at node 0 increments every counter in one transaction, and reads them back at node 0 after
        // each write: it sees its own writes at once, although they wait in node 0's buffer.
        let writing = {
            let (addr, keys) = (clients[0], keys.clone());
            let increments = counters.iter().map(|c| c.increment(1)).collect::<Vec<_>>();
            tokio::spawn(async move {
                let mut c = Client::connect(addr).await.expect("connects to node 0");
                let mut clock = None::<VectorClock>;
                for i in 1..=WRITES {
                    clock = Some(c.static_update(clock.as_ref(), increments.clone()).await.expect("writes"));
                    let (values, commit) = c.static_read(clock.as_ref(), &keys).await.expect("reads");
                    let counts: Vec<i64> = values.iter().map(|v| v.as_counter().expect("a counter")).collect();
                    assert_eq!(counts, vec![i; counts.len()], "node 0 after its write #{i}");
                    clock = Some(commit);
                }
            })
        };
        // Readers at nodes 1 and 2 see the writes as they are handed over: whole transactions, never going back.
        let mut sessions = Vec::new();
        for &addr in &clients[1..] {
            let keys = keys.clone();
            sessions.push(tokio::spawn(async move {
                let mut c = Client::connect(addr).await.expect("connects");
                let (mut seen, mut clock) = (0, None::<VectorClock>);
                while seen < WRITES {
                    let (values, commit) = c.static_read(clock.as_ref(), &keys).await.expect("reads");
                    let counts: Vec<i64> = values.iter().map(|v| v.as_counter().expect("a counter")).collect();
                    assert!(counts.iter().all(|n| *n == counts[0]), "{addr}: a fractured read {counts:?}");
                    assert!(counts[0] >= seen, "{addr}: went back from {seen} to {}", counts[0]);
                    seen = counts[0];
                    clock = Some(commit);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }));
        }
        writing.await.expect("the writer");
        for s in sessions {
            tokio::time::timeout(Duration::from_secs(30), s).await.expect("readers see every write").expect("a reader");
        }
    });
    let text = cluster::http_get(file.nodes[0].admin, "/metrics").expect("metrics");
    let buffered = metric(&text, "causet_buffered_transactions_total");
    let handovers = metric(&text, "causet_handovers_total");
    assert_eq!(buffered, WRITES as u64, "node 0 buffered every write:\n{text}");
    assert!(handovers >= 1 && handovers < WRITES as u64 / 2, "{handovers} handovers for {buffered} writes");
    let status = cluster::http_get(file.nodes[0].admin, "/status").expect("status");
    assert!(status.contains("\"buffer\":{\"buffer\":{\"transactions\":"), "{status}");
}

/// Acknowledged buffered writes survive `kill -9` of their node: the restarted node recovers its write buffer from
/// its log and hands it over at once, and the DC's other nodes then read every write, whole and exactly once.
#[test]
fn buffered_writes_survive_a_kill_of_their_node_and_are_handed_over_once_when_it_restarts() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // The longest lease: nothing is handed over before the kill.
    let (mut file, _guard) = start_dc(dir.path(), "enabled = true, lease_ms = 60000, buffer_writes = true");
    let clients = file.dc_clients(0);
    let (counters, keys) = counters(4, "k", "buffer-crash");
    let increments = counters.iter().map(|c| c.increment(1)).collect::<Vec<_>>();
    let rt = runtime();
    const WRITES: i64 = 50;
    rt.block_on(async {
        let mut c = Client::connect(clients[0]).await.expect("connects to node 0");
        let mut clock = None::<VectorClock>;
        for _ in 0..WRITES {
            clock = Some(c.static_update(clock.as_ref(), increments.clone()).await.expect("writes"));
        }
    });
    let text = cluster::http_get(file.nodes[0].admin, "/metrics").expect("metrics");
    assert_eq!(metric(&text, "causet_buffered_transactions_total"), WRITES as u64, "buffered:\n{text}");
    assert_eq!(metric(&text, "causet_handovers_total"), 0, "nothing handed over yet:\n{text}");
    cluster::kill_node(&file, 0);
    cluster::restart_node(&mut file, dir.path(), 0).expect("node 0 restarts");
    let clients = file.dc_clients(0);
    rt.block_on(async {
        for &addr in &clients {
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                assert!(Instant::now() < deadline, "{addr}: the writes were not handed over after the restart");
                tokio::time::sleep(Duration::from_millis(20)).await;
                // (A connection made as node 0 comes back may be reset: the client connects again.)
                let Ok(mut c) = Client::connect(addr).await else { continue };
                let Ok((values, _)) = c.static_read_with(None, &keys, ReadFrom::Fresh).await else { continue };
                let counts: Vec<i64> = values.iter().map(|v| v.as_counter().expect("a counter")).collect();
                assert!(counts.iter().all(|n| *n == counts[0]), "{addr}: a fractured read {counts:?}");
                assert!(counts[0] == 0 || counts[0] == WRITES, "{addr}: {counts:?}: neither none nor every write");
                if counts[0] == WRITES {
                    break;
                }
            }
        }
    });
    let text = cluster::http_get(file.nodes[0].admin, "/metrics").expect("metrics");
    assert_eq!(metric(&text, "causet_handovers_total"), 1, "one handover, after the restart:\n{text}");
}

/// A session that saw its writes buffered at one node keeps reading them when it moves, with its clock, to another
/// node of the DC or to another DC, long before their lease ends: the clock names the buffer, and the start there
/// asks for its handover first (HoneyPot's obligation for sessions that move; `coordinator::tokens`).
#[test]
fn a_session_that_moves_to_another_node_or_dc_reads_its_buffered_writes_there_at_once() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // The longest lease: nothing is handed over for its lease during the test.
    let (file, _guard) = start_dcs(dir.path(), 2, 2, "enabled = true, lease_ms = 60000, buffer_writes = true");
    let (counters, keys) = counters(3, "m", "buffer-moves");
    let increments = counters.iter().map(|c| c.increment(1)).collect::<Vec<_>>();
    // Node 0 and node 1 of DC 0, node 0 and node 1 of DC 1, and round again.
    let route: Vec<std::net::SocketAddr> = (0..8).map(|i| file.dc_clients(i / 2 % 2)[usize::from(i % 2)]).collect();
    let rt = runtime();
    rt.block_on(async {
        let mut clock = None;
        for (i, addr) in route.iter().enumerate() {
            let mut c = Client::connect(addr).await.expect("connects");
            if let Some(clock) = &clock {
                c.observe_session_clock(clock);
            }
            // What it wrote at its previous node, still in that node's buffer, is here at once.
            let began = Instant::now();
            let (values, _) = tokio::time::timeout(Duration::from_secs(20), c.static_read(None, &keys))
                .await
                .expect("the read does not wait for a lease")
                .expect("reads");
            let stop = match i {
                0 => "the first read",
                _ if i % 2 == 1 => "a read after a move in the DC",
                _ => "a read after a move to the other DC",
            };
            eprintln!("stop {i}: {stop} took {:?}", began.elapsed());
            let counts: Vec<i64> = values.iter().map(|v| v.as_counter().expect("a counter")).collect();
            assert_eq!(counts, vec![i as i64; counts.len()], "at stop {i} ({addr})");
            c.static_update(None, increments.clone()).await.expect("writes");
            clock = c.session_clock();
            assert!(clock.as_ref().is_some_and(|c| !c.tokens.is_empty()), "the write is buffered: {clock:?}");
        }
    });
    let mut questions = 0;
    for node in &file.nodes {
        let text = cluster::http_get(node.admin, "/metrics").expect("metrics");
        questions += metric(&text, "causet_handover_questions_total");
    }
    assert!(questions >= route.len() as u64 - 1, "{questions} questions answered for {} moves", route.len() - 1);
}
