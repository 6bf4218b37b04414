//! The causal middleware over a real Apache Cassandra: two nodes in two datacenters started by the repository's
//! own `scripts/cassandra`, with an emulated WAN between them. The same workload runs through `causet middleware
//! --plain` (Cassandra alone) and through the middleware, and both histories go through the same TCC checker:
//! Cassandra alone shows causality anomalies, the middleware none.
//!
//! Needs Java 17, Maven (first run: about 70 MB of jars from Maven Central, cached) and about 1.5 GB of memory;
//! starting the two nodes takes 25–40 s.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use causet::middleware::{start, MiddlewareArgs, WritersArg};
use causet_middleware::cassandra::{CassandraOptions, CassandraStore};
use causet_middleware::driver::{Part, Store};
use causet_middleware::record::{Copy, Encoded};
use causet_sim::checker::check;
use causet_sim::history::HistOp;
use common::photo_album;

/// A two-node Cassandra under a temporary directory, stopped on drop.
struct Cassandra {
    dir: tempfile::TempDir,
    port: u16,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/cassandra")
}

/// A port free on both 127.0.0.1 and 127.0.0.2 (and, for the emulated WAN, 127.0.0.11 and 127.0.0.12).
fn free_port() -> u16 {
    loop {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let free = |ip: &str| std::net::TcpListener::bind((ip, port)).is_ok();
        if port < 60000 && ["127.0.0.2", "127.0.0.11", "127.0.0.12"].iter().all(|ip| free(ip)) {
            return port;
        }
    }
}

impl Cassandra {
    fn start(wan_delay_ms: u64, wan_jitter_ms: u64) -> Cassandra {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (port, storage, jmx) = (free_port(), free_port(), free_port());
        let status = Command::new(script())
            .args(["start", "--dir"])
            .arg(dir.path())
            .args(["--nodes", "2", "--port", &port.to_string(), "--storage-port", &storage.to_string()])
            .args(["--jmx-port", &jmx.to_string(), "--timeout", "180"])
            .args(["--wan-delay-ms", &wan_delay_ms.to_string(), "--wan-jitter-ms", &wan_jitter_ms.to_string()])
            .status()
            .expect("running scripts/cassandra");
        let cassandra = Cassandra { dir, port };
        assert!(status.success(), "scripts/cassandra start failed");
        cassandra
    }

    fn node(&self, i: u8) -> String {
        format!("127.0.0.{i}:{}", self.port)
    }
}

impl Drop for Cassandra {
    fn drop(&mut self) {
        let _ = Command::new(script()).args(["stop", "--dir"]).arg(self.dir.path()).status();
    }
}

/// The number just before `what` in a proxy's report.
fn count_before(report: &str, what: &str) -> u64 {
    let number = report.split(what).next().and_then(|s| s.rsplit(' ').next()).and_then(|n| n.parse().ok());
    number.unwrap_or_else(|| panic!("no count of{what} in {report:?}"))
}

fn proxy_args(cassandra: &Cassandra, ls: u16, plain: bool, writers: WritersArg) -> MiddlewareArgs {
    MiddlewareArgs {
        local_set: ls,
        listen: "127.0.0.1:0".parse().unwrap(),
        // A keyspace per way of writing, so that one phase of the test does not read the other's values.
        keyspace: format!("causet_test_{writers:?}").to_lowercase(),
        create_schema: ls == 0,
        resolve_wait_ms: 5000,
        plain,
        writers,
        lease_ms: 3000,
        ..MiddlewareArgs::defaults(&format!("cassandra://{}", cassandra.node(ls as u8 + 1)))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cassandra_alone_breaks_causality_and_the_middleware_over_it_does_not() {
    let cassandra = Cassandra::start(50, 0);
    // Cassandra alone, through the same proxy in its plain mode.
    let plain: Vec<_> = [
        start(&proxy_args(&cassandra, 0, true, WritersArg::Shared)).await.unwrap(),
        start(&proxy_args(&cassandra, 1, true, WritersArg::Shared)).await.unwrap(),
    ]
    .into();
    let (dc1, dc2) = (plain[0].listening[0].1, plain[1].listening[0].1);
    let mut anomalies = 0;
    for attempt in 0..5 {
        let history = photo_album(dc1, dc2, 40, 1_000_000 * (attempt + 1)).await;
        let report = check(&history);
        eprintln!("Cassandra alone, attempt {attempt}: {report}");
        anomalies += report.anomalies.len();
        if anomalies > 0 {
            break;
        }
    }
    assert!(anomalies > 0, "Cassandra alone never showed an album before its photo in 5 attempts");
    for p in plain {
        p.stop().await;
    }
    // The middleware over the same Cassandra, with both ways of excluding a local set's writers.
    for (writers, first_id) in [(WritersArg::Shared, 100_000_000), (WritersArg::Exclusive, 200_000_000)] {
        // Exclusive writers keep feeds and one version's dependency information: the other local set resolves
        // each write from the feed, the writer marks it stable and leaves it out of later records; reads of a
        // version the follower has not resolved yet wait for it (no walk budget). (Shared writers confirm their
        // writes and walk folded sets with reads at ALL.)
        let args = |ls| match writers {
            WritersArg::Exclusive => MiddlewareArgs {
                folded_cap: 0,
                retain: 1,
                walk_budget: 0,
                ..proxy_args(&cassandra, ls, false, writers)
            },
            WritersArg::Shared => proxy_args(&cassandra, ls, false, writers),
        };
        let causal = [start(&args(0)).await.unwrap(), start(&args(1)).await.unwrap()];
        let (dc1, dc2) = (causal[0].listening[0].1, causal[1].listening[0].1);
        let history = photo_album(dc1, dc2, 40, first_id).await;
        let report = check(&history);
        eprintln!("middleware over Cassandra, {writers:?} writers: {report}");
        assert!(report.is_ok(), "{writers:?} writers: {report}");
        let reads = history.txs.iter().filter(|t| matches!(t.ops[0], HistOp::Read { .. })).count();
        assert!(reads > 100, "the readers read ({reads} reads)");
        for line in causal[1].report() {
            eprintln!("{line}");
        }
        if writers == WritersArg::Exclusive {
            let report = causal[0].report().join(" ");
            eprintln!("{report}");
            let stable = count_before(&report, " versions made stable");
            assert!(stable > 0, "the writer made no version stable: {report}");
            let followed = count_before(&causal[1].report().join(" "), " versions of other local sets' feeds");
            assert!(followed > 0, "local set 1 followed none of local set 0's writes");
            // The writer lease fences a second instance of a local set off, naming the holder.
            let err = start(&proxy_args(&cassandra, 0, false, writers)).await.err().expect("a second writer");
            let err = format!("{err:#}");
            assert!(err.contains("writer lease") && err.contains("held by local set 0 instance"), "{err}");
        }
        for c in causal {
            c.stop().await;
        }
    }
    // A stopped instance gives its lease back: a new one starts at once.
    let started = std::time::Instant::now();
    let again = start(&proxy_args(&cassandra, 0, false, WritersArg::Exclusive)).await.unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "took {:?}", started.elapsed());
    again.stop().await;
    many_copies_in_one_read_answer_as_single_reads(&cassandra).await;
}

/// The store's read of many copies at once (`IN` lists, one statement per local set and 128 keys) answers each
/// copy, in order, as reading it alone does: present or missing, asked twice, of either local set.
async fn many_copies_in_one_read_answer_as_single_reads(cassandra: &Cassandra) {
    let options = CassandraOptions {
        nodes: vec![cassandra.node(1)],
        datacenter: "dc1".into(),
        keyspace: "causet_test_store".into(),
        create_in: Some(vec!["dc1".into(), "dc2".into()]),
    };
    let store = CassandraStore::connect(&options, 0).await.unwrap();
    // 300 keys: every one written in local set 0, every third in local set 1 too.
    let copy = |i: u32, ls| Copy { key: format!("key-{i}").into_bytes(), ls };
    for i in 0..300u32 {
        for ls in [0, 1].into_iter().filter(|&ls| ls == 0 || i % 3 == 0) {
            let record =
                Encoded { head: format!("head {i}/{ls}").into_bytes(), meta: format!("meta {i}/{ls}").into_bytes() };
            store.put(&copy(i, ls), 1, record).await.unwrap();
        }
    }
    // Present and missing copies of both local sets, repeats, more keys than one statement reads; and nothing.
    let mut copies: Vec<Copy> = (0..330u32).rev().flat_map(|i| [copy(i, 0), copy(i, 1)]).collect();
    copies.extend([copy(7, 0), copy(9, 1), copy(7, 0)]);
    for part in [Part::Meta, Part::Head] {
        let many = store.get_many(&copies, part).await.unwrap();
        let mut single = Vec::new();
        for c in &copies {
            single.push(store.get(c, part).await.unwrap());
        }
        assert_eq!(many, single, "{part:?}");
        assert_eq!(many.iter().flatten().count(), 300 + 100 + 3, "{part:?}: present copies, repeats included");
        assert_eq!(store.get_many(&[], part).await.unwrap(), Vec::<Option<Vec<u8>>>::new());
    }
}
