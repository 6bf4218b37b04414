//! `causet middleware` behind AntidoteDB's protocol, driven by Causet's own client, over the in-process store and
//! over a real Causet cluster run in eventual mode.

mod common;

use std::time::{Duration, Instant};

use causet::middleware::{start, MiddlewareArgs};
use causet_client::{Client, ClientError};
use causet_core::ObjectId;
use causet_crdt::{CrdtType, Op, Value};

fn args(wan_delay_ms: u64, resolve_wait_ms: u64) -> MiddlewareArgs {
    MiddlewareArgs {
        listen: "127.0.0.1:0".parse().unwrap(),
        resolve_wait_ms,
        wan_delay_ms,
        ..MiddlewareArgs::defaults("memory")
    }
}

/// A port P of 127.0.0.1 such that P and P + 1 were both free a moment ago.
fn free_pair() -> std::net::SocketAddr {
    loop {
        let first = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = first.local_addr().unwrap();
        let Some(next) = addr.port().checked_add(1) else { continue };
        if std::net::TcpListener::bind(("127.0.0.1", next)).is_ok() {
            return addr;
        }
    }
}

#[tokio::test]
async fn a_failed_start_stops_what_it_had_started() {
    // Local set 1's port is taken: the start fails after local set 0's proxy is listening.
    let free = free_pair();
    let blocker = std::net::TcpListener::bind(("127.0.0.1", free.port() + 1)).unwrap();
    let mut a = args(0, 100);
    a.listen = free;
    let err = start(&a).await.err().expect("local set 1's port is taken");
    assert!(format!("{err:#}").contains("listening on"), "{err:#}");
    drop(blocker);
    // Local set 0's proxy was stopped before the error was returned: the same ports serve at once.
    let running = start(&a).await.expect("the same ports are free again");
    running.stop().await;
}

fn reg(key: &str) -> ObjectId {
    ObjectId::new(key, "b", CrdtType::RegisterLww)
}

async fn get(c: &mut Client, key: &str) -> Result<Vec<u8>, ClientError> {
    let (values, _) = c.static_read(None, &[reg(key)]).await?;
    match &values[0] {
        Value::Register(v) => Ok(v.clone()),
        other => panic!("a register read returned {other:?}"),
    }
}

async fn put(c: &mut Client, key: &str, value: &str) -> Result<(), ClientError> {
    c.static_update(None, [(reg(key), Op::Assign(value.as_bytes().to_vec()))]).await.map(|_| ())
}

/// Starts a memory-store middleware of two local sets. The memory store binds local set N to the --listen port +
/// N: find two free ports in a row, and try again on another pair if another test takes one between the probe and
/// the bind.
async fn start_two(mut a: MiddlewareArgs) -> causet::middleware::Running {
    let mut attempts = 0;
    loop {
        a.listen = free_pair();
        match start(&a).await {
            Ok(r) => return r,
            Err(e) if attempts < 20 => {
                attempts += 1;
                eprintln!("starting on {} failed ({e:#}); another pair", a.listen);
            }
            Err(e) => panic!("no free pair of ports in 20 attempts: {e:#}"),
        }
    }
}

#[tokio::test]
async fn single_key_operations_replicate_between_local_sets() {
    let running = start_two(args(20, 2000)).await;
    let addrs: Vec<_> = running.listening.iter().map(|(_, a)| *a).collect();
    let mut here = Client::connect(addrs[0]).await.unwrap();
    let mut there = Client::connect(addrs[1]).await.unwrap();
    assert_eq!(get(&mut here, "never").await.unwrap(), b"");
    put(&mut here, "k", "v1").await.unwrap();
    assert_eq!(get(&mut here, "k").await.unwrap(), b"v1", "read your writes");
    let deadline = Instant::now() + Duration::from_secs(5);
    while get(&mut there, "k").await.unwrap() != b"v1" {
        assert!(Instant::now() < deadline, "the write never reached the other local set");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // An interactive transaction on one key: its reads see its own assignment, the commit writes it.
    let mut tx = there.start_transaction(None).await.unwrap();
    tx.update([(reg("k"), Op::Assign(b"v2".to_vec()))]).await.unwrap();
    assert_eq!(tx.read_one(&reg("k")).await.unwrap(), Value::Register(b"v2".to_vec()));
    tx.commit().await.unwrap();
    assert_eq!(get(&mut there, "k").await.unwrap(), b"v2");
    running.stop().await;
}

/// `GET path` on the admin address: the status code and the body.
async fn admin_get(addr: std::net::SocketAddr, path: &'static str) -> (u16, String) {
    let (code, body) = tokio::task::spawn_blocking(move || {
        causet::cluster::http_request(addr, "GET", path, None, &[], Duration::from_secs(5))
    })
    .await
    .unwrap()
    .unwrap();
    (code, String::from_utf8(body).unwrap())
}

#[tokio::test]
async fn the_admin_endpoints_say_when_every_write_is_resolved_everywhere() {
    // 400 ms between the local sets: a write cannot be resolved at the other one for that long.
    let running = start_two(MiddlewareArgs { admin: Some("127.0.0.1:0".parse().unwrap()), ..args(400, 5000) }).await;
    let admin = running.admin.expect("--admin serves");
    assert_eq!(admin_get(admin, "/health").await, (200, "ok\n".to_string()));
    // Both feeds are announced and empty before anything is written.
    let deadline = Instant::now() + Duration::from_secs(10);
    while admin_get(admin, "/settled").await.0 != 200 {
        assert!(Instant::now() < deadline, "never settled with nothing written: {:?}", running.status());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut here = Client::connect(running.listening[0].1).await.unwrap();
    for i in 0..20 {
        put(&mut here, &format!("k{i}"), "v").await.unwrap();
    }
    // Acknowledged here, not yet resolved at local set 1: local set 0 waits on it.
    let (code, body) = admin_get(admin, "/settled").await;
    assert_eq!(code, 503, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status[0]["local_set"], 0);
    assert!(status[0]["unsettled"].as_u64().unwrap() > 0, "{body}");
    assert_eq!(status[0]["counters"]["writes"], 20);
    // Settles once local set 1's follower has resolved all 20 and local set 0 has heard so.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (code, body) = admin_get(admin, "/settled").await;
        if code == 200 {
            let status: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(status[1]["following"][0]["writer"], 0);
            assert_eq!(status[1]["following"][0]["behind"], 0, "{body}");
            assert!(status[1]["following"][0]["resolved"].as_u64().unwrap() >= 20, "{body}");
            assert_eq!(status[0]["unsettled"], 0, "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "never settled after 20 writes: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, metrics) = admin_get(admin, "/metrics").await;
    assert_eq!(code, 200);
    assert!(metrics.contains("causet_middleware_writes_total{local_set=\"0\"} 20"), "{metrics}");
    assert!(
        metrics.contains("causet_middleware_follower_behind_versions{local_set=\"1\",writer=\"0\"} 0"),
        "{metrics}"
    );
    running.stop().await;
}

#[tokio::test]
async fn what_the_middleware_cannot_do_is_refused_with_the_reason() {
    let running = start(&MiddlewareArgs { local_sets: 1, ..args(0, 100) }).await.unwrap();
    let mut c = Client::connect(running.listening[0].1).await.unwrap();
    let err = c.static_read(None, &[reg("x"), reg("y")]).await.unwrap_err();
    assert!(err.to_string().contains("not multi-key transactions"), "{err}");
    let mut tx = c.start_transaction(None).await.unwrap();
    tx.update([(reg("x"), Op::Assign(b"1".to_vec()))]).await.unwrap();
    let err = tx.update([(reg("y"), Op::Assign(b"2".to_vec()))]).await.unwrap_err();
    assert!(err.to_string().contains("already uses x"), "{err}");
    tx.commit().await.unwrap();
    assert_eq!(get(&mut c, "x").await.unwrap(), b"1", "the transaction's first key was kept");
    assert_eq!(get(&mut c, "y").await.unwrap(), b"", "the refused update was not applied");
    let counter = ObjectId::new("n", "b", CrdtType::CounterPn);
    let err = c.static_update(None, [(counter, Op::Increment(1))]).await.unwrap_err();
    assert!(err.to_string().contains("register_lww"), "{err}");
    running.stop().await;
}

/// The middleware over Causet run with `protocol = "eventual"` (two DCs, 30 ± 25 ms apart): the photo-and-album
/// workload's history passes the TCC checker.
#[test]
fn the_middleware_over_causet_eventual_is_causal() {
    use causet::cluster::{self, StartOptions};
    let dir = tempfile::tempdir().expect("a temporary directory");
    let options = StartOptions {
        dcs: 2,
        nodes_per_dc: 1,
        partitions: 4,
        wan_delay_ms: 30,
        jitter_ms: 25,
        tls: false,
        dir: dir.path().to_path_buf(),
        base_port: 0,
        protocol: causet_core::Protocol::Eventual,
        exe: Some(env!("CARGO_BIN_EXE_causet").into()),
        ..Default::default()
    };
    let file = cluster::start(&options).expect("the cluster starts");
    struct Stop<'a>(&'a std::path::Path);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = causet::cluster::stop(self.0);
        }
    }
    let _stop = Stop(dir.path());
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let proxy = |ls: u16| MiddlewareArgs {
            store: format!("causet://{}", file.dc_clients(ls)[0]),
            local_set: ls,
            ..args(0, 5000)
        };
        let (a, b) = (start(&proxy(0)).await.unwrap(), start(&proxy(1)).await.unwrap());
        let history = common::photo_album(a.listening[0].1, b.listening[0].1, 30, 1).await;
        let report = causet_sim::checker::check(&history);
        assert!(report.is_ok(), "{report}");
        let reads = history.txs.iter().filter(|t| matches!(t.ops[0], causet_sim::history::HistOp::Read { .. })).count();
        assert!(reads > 50, "the readers read ({reads} reads)");
        for line in b.report() {
            eprintln!("{line}");
        }
        a.stop().await;
        b.stop().await;
    });
}
