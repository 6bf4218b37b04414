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
