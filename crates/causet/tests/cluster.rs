//! `causet::cluster` drives real processes: start a local cluster on free ports, write at one DC and read at
//! another, kill -9 and restart a node, stop everything.

use causet::cluster::{self, ClusterFile, StartOptions};
use causet_client::{Client, Set, ValueExt};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Stops the cluster even when an assertion fails.
struct Running<'a>(&'a ClusterFile);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        cluster::stop_nodes(self.0, false);
    }
}

async fn read_set_until(addr: SocketAddr, set: &Set, want: &str) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let seen = match Client::connect(addr).await {
            Ok(mut c) => match c.static_read(None, &[set.key().clone()]).await {
                Ok((values, _)) => values[0].as_set().map(|s| s.to_vec()).unwrap_or_default(),
                Err(_) => Vec::new(),
            },
            Err(_) => Vec::new(),
        };
        if seen.iter().any(|e| e == want.as_bytes()) || Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn exercise(nodes_per_dc: u16) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let options = StartOptions {
        dcs: 2,
        nodes_per_dc,
        partitions: 4,
        wan_delay_ms: 5,
        dir: dir.path().to_path_buf(),
        base_port: 0,
        exe: Some(env!("CARGO_BIN_EXE_causet").into()),
        ..Default::default()
    };
    let mut file = cluster::start(&options).expect("the cluster starts");
    assert_eq!(file.nodes.len(), 2 * nodes_per_dc as usize);
    assert_eq!(cluster::load(dir.path()).expect("the cluster file reads back").nodes.len(), file.nodes.len());
    let running = file.clone();
    let guard = Running(&running);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let set = Set::aw("s", "cluster-test");
    rt.block_on(async {
        let mut writer = Client::connect(file.dc_clients(0)[0]).await.expect("connects to DC 0");
        writer.static_update(None, vec![set.add("a")]).await.expect("writes at DC 0");
        for addr in file.dc_clients(1) {
            let seen = read_set_until(addr, &set, "a").await;
            assert!(seen.iter().any(|e| e == b"a"), "DC 1 ({addr}) never showed DC 0's write: {seen:?}");
        }
    });
    // kill -9 the last node of DC 1 and start it again: the write is still there.
    let last = file.nodes.len() - 1;
    let old_pid = file.nodes[last].pid;
    cluster::kill_node(&file, last);
    assert!(!cluster::process_alive(old_pid), "the killed node is gone");
    cluster::restart_node(&mut file, dir.path(), last).expect("the node restarts");
    assert_ne!(file.nodes[last].pid, old_pid);
    assert_eq!(cluster::load(dir.path()).expect("reads back").nodes[last].pid, file.nodes[last].pid);
    rt.block_on(async {
        let seen = read_set_until(file.nodes[last].client, &set, "a").await;
        assert!(seen.iter().any(|e| e == b"a"), "the restarted node lost the write: {seen:?}");
    });
    drop(guard);
    cluster::stop_nodes(&file, false);
    assert!(file.nodes.iter().all(|n| !cluster::process_alive(n.pid)), "every node stopped");
}

#[test]
fn a_two_dc_cluster_starts_serves_survives_a_kill_and_stops() {
    exercise(1);
}

#[test]
fn a_cluster_of_two_dcs_with_two_nodes_each_replicates_and_survives_a_node_kill() {
    exercise(2);
}
