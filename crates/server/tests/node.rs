//! The node runtime end to end, in process: real sockets on loopback, the real storage engine in a temporary
//! directory, the Rust client.

use causet_client::{Client, Counter, Set};
use causet_crdt::Value;
use causet_server::config::ServerConfig;
use causet_server::Node;
use std::time::Duration;

fn config(dir: &std::path::Path) -> ServerConfig {
    ServerConfig {
        data_dir: dir.to_path_buf(),
        client_bind: "127.0.0.1:0".parse().expect("address"),
        admin_bind: "127.0.0.1:0".parse().expect("address"),
        partitions: 4,
        shards: 2,
        ..ServerConfig::default()
    }
}

async fn with_timeout<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), f).await.expect("the test finished in time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_commits_survive_a_restart_and_clocks_keep_moving_forward() {
    with_timeout(async {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let node = Node::start(config(dir.path())).await.expect("the node starts");
        let mut client = Client::connect(node.client_addr).await.expect("connects");
        let counter = Counter::new("visits", "test");
        let set = Set::aw("tags", "test");
        for i in 0..20 {
            let mut tx = client.start_transaction(None).await.expect("starts");
            // Two objects on (most likely) two partitions: a two-phase commit across shards.
            tx.update([counter.increment(1), set.add(format!("t{i}"))]).await.expect("updates");
            tx.commit().await.expect("commits");
        }
        let clock_before = client.causal_clock().cloned().expect("a clock after commits");
        drop(client);
        node.shutdown().await.expect("shuts down cleanly");

        let node = Node::start(config(dir.path())).await.expect("the node restarts");
        let mut client = Client::connect(node.client_addr).await.expect("connects");
        let (values, clock) =
            client.static_read(Some(&clock_before), &[counter.key().clone(), set.key().clone()]).await.expect("reads");
        assert_eq!(values[0], Value::Counter(20));
        match &values[1] {
            Value::Set(elements) => assert_eq!(elements.len(), 20),
            other => panic!("{other:?}"),
        }
        assert!(clock_before.le(&clock), "the snapshot after a restart covers the clock from before");
        node.shutdown().await.expect("shuts down cleanly");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_increments_all_count() {
    with_timeout(async {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let node = Node::start(config(dir.path())).await.expect("the node starts");
        let addr = node.client_addr;
        let mut tasks = Vec::new();
        for _ in 0..8 {
            tasks.push(tokio::spawn(async move {
                let mut client = Client::connect(addr).await.expect("connects");
                let counter = Counter::new("shared", "test");
                for _ in 0..25 {
                    client.static_update(None, vec![counter.increment(1)]).await.expect("updates");
                }
            }));
        }
        for t in tasks {
            t.await.expect("a client task");
        }
        let mut client = Client::connect(addr).await.expect("connects");
        let (values, _) =
            client.static_read(None, &[Counter::new("shared", "test").key().clone()]).await.expect("reads");
        // A fresh client has no clock, but the stable snapshot covers every acknowledged commit of this node soon;
        // read until it does (bounded).
        let mut value = values[0].clone();
        for _ in 0..100 {
            if value == Value::Counter(200) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            value = client.static_read(None, &[Counter::new("shared", "test").key().clone()]).await.expect("reads").0
                [0]
            .clone();
        }
        assert_eq!(value, Value::Counter(200));
        let status = reqwest_status(node.admin_addr).await;
        assert!(status.contains("\"partitions\":4"), "{status}");
        node.shutdown().await.expect("shuts down cleanly");
    })
    .await;
}

/// A minimal HTTP GET of `/status` over a raw socket (no HTTP client dependency for one request).
async fn reqwest_status(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("admin connects");
    s.write_all(b"GET /status HTTP/1.0\r\nHost: x\r\n\r\n").await.expect("writes");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("reads");
    out
}

/// A minimal HTTP request over a raw socket, with the admin token; returns the whole answer.
async fn admin_request(addr: std::net::SocketAddr, method: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("admin connects");
    let request =
        format!("{method} {path} HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer secret\r\nContent-Length: 0\r\n\r\n");
    s.write_all(request.as_bytes()).await.expect("writes");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("reads");
    out
}

/// An operator's link cuts, delays and clock skew stay in force across a restart, and so do heals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_faults_survive_a_restart() {
    with_timeout(async {
        let dir = tempfile::tempdir().expect("a temporary directory");
        // A node of a DC of two, with one peer DC; nothing listens at the other addresses, which is fine here.
        let unused = |port| std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let config = || ServerConfig {
            dcs: 2,
            nodes: vec![unused(1), unused(2)],
            replication_bind: "127.0.0.1:0".parse().expect("address"),
            peers: vec![causet_server::wan::PeerConfig {
                dc: 1,
                addr: causet_server::wan::PeerAddrs::One(unused(3)),
                delay_ms: 5,
                jitter_ms: 0,
            }],
            admin_token: Some("secret".into()),
            ..config(dir.path())
        };
        let status = |addr| async move {
            let answer = reqwest_status(addr).await;
            let body = answer.split("\r\n\r\n").nth(1).expect("a body").to_string();
            serde_json::from_str::<serde_json::Value>(&body).expect("JSON")
        };
        let link = |s: &serde_json::Value, dc: u64, node: u64| {
            s["links"]
                .as_array()
                .expect("links")
                .iter()
                .find(|l| l["dc"] == dc && l["node"] == node)
                .cloned()
                .expect("the link")
        };

        let node = Node::start(config()).await.expect("the node starts");
        for path in ["/admin/links/1/cut", "/admin/links/1/delay?ms=40&jitter_ms=2", "/admin/nodes/1/cut"] {
            let answer = admin_request(node.admin_addr, "POST", path).await;
            assert!(answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
        }
        let answer = admin_request(node.admin_addr, "POST", "/admin/clock?offset_ms=-2000").await;
        assert!(answer.contains(" 200 "), "{answer}");
        node.shutdown().await.expect("shuts down cleanly");

        let node = Node::start(config()).await.expect("the node restarts");
        let s = status(node.admin_addr).await;
        assert_eq!(link(&s, 1, 0)["cut"], true, "{s}");
        assert_eq!(link(&s, 1, 0)["delay_ms"], 40.0, "{s}");
        assert_eq!(link(&s, 1, 0)["jitter_ms"], 2.0, "{s}");
        assert_eq!(link(&s, 0, 1)["cut"], true, "{s}");
        assert_eq!(s["clock_offset_ms"], -2000.0, "{s}");
        // Heals are kept too.
        for path in ["/admin/links/1/heal", "/admin/nodes/1/heal", "/admin/clock?offset_ms=0"] {
            assert!(admin_request(node.admin_addr, "POST", path).await.contains(" 200 "), "{path}");
        }
        node.shutdown().await.expect("shuts down cleanly");

        let node = Node::start(config()).await.expect("the node restarts again");
        let s = status(node.admin_addr).await;
        assert_eq!(link(&s, 1, 0)["cut"], false, "{s}");
        assert_eq!(link(&s, 0, 1)["cut"], false, "{s}");
        assert_eq!(link(&s, 1, 0)["delay_ms"], 40.0, "the operator's delay stays: {s}");
        assert_eq!(s["clock_offset_ms"], 0.0, "{s}");
        node.shutdown().await.expect("shuts down cleanly");

        // A damaged file stops the start with a clear reason instead of silently healing everything.
        std::fs::write(dir.path().join(causet_server::faults::FILE), b"{").expect("writes");
        let e = Node::start(config()).await.err().expect("refused");
        assert!(format!("{e:#}").contains("faults.json is damaged"), "{e:#}");
    })
    .await;
}
