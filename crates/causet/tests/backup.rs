//! `causet backup` and `causet restore` on real processes: DC 0 of a two-DC cluster of three nodes per DC (each
//! partition a Raft group of three) is backed up while both DCs keep writing; the backup must equal a read of the
//! same snapshot on the source (the backup's own transaction, still open, reads every object at it), and must not
//! be the latest state (the load went on); restored into a single new node — with the backup's partition count,
//! and with another — every object reads back as in the backup; restored into a DC of three nodes whose partitions
//! are Raft groups of three, it reads back the same, takes writes, and keeps serving with one node stopped. Damaged
//! or misplaced backups and non-empty directories are refused.

use causet::backup::{self, Source, Target};
use causet::cluster::{self, StartOptions};
use causet_client::{Client, Counter, Set, Value};
use causet_core::ObjectId;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The objects the load writes: 40 counters and 10 sets.
fn objects() -> Vec<ObjectId> {
    let counters = (0..40).map(|k| Counter::new(format!("c{k}"), "backup-test").key().clone());
    counters.chain((0..10).map(|k| Set::aw(format!("s{k}"), "backup-test").key().clone())).collect()
}

/// One session per DC writing as fast as it can until `stop`: an increment and a set add per transaction.
fn load(addr: std::net::SocketAddr, dc: usize, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        rt.block_on(async move {
            let mut client = Client::connect(addr).await.expect("connects");
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let counter = Counter::new(format!("c{}", n % 40), "backup-test");
                let set = Set::aw(format!("s{}", n % 10), "backup-test");
                let ops = vec![counter.increment(1), set.add(format!("dc{dc}-{n}"))];
                if client.static_update(None, ops).await.is_err() {
                    break;
                }
                n += 1;
            }
            n
        })
    })
}

/// Where two reads of `ids` differ: the first few keys, with a short view of each side (sets can be long).
fn differences(ids: &[ObjectId], a: &[Value], b: &[Value]) -> Vec<String> {
    let short = |v: &Value| match v {
        Value::Set(s) => format!("a set of {}", s.len()),
        other => format!("{other:?}"),
    };
    (ids.iter().zip(a.iter().zip(b)))
        .filter(|(_, (x, y))| x != y)
        .take(3)
        .map(|(id, (x, y))| format!("{}: {} against {}", String::from_utf8_lossy(&id.key), short(x), short(y)))
        .collect()
}

/// The values of `ids` in a new single node started from `data` (in this process), read at its stable snapshot.
async fn read_restored(data: &std::path::Path, dcs: u16, partitions: u32, ids: &[ObjectId]) -> Vec<Value> {
    let config = causet_server::config::ServerConfig {
        data_dir: data.to_path_buf(),
        client_bind: "127.0.0.1:0".parse().unwrap(),
        admin_bind: "127.0.0.1:0".parse().unwrap(),
        replication_bind: "127.0.0.1:0".parse().unwrap(),
        dc: 0,
        dcs,
        partitions,
        ..Default::default()
    };
    let node = causet_server::Node::start(config).await.expect("the restored node starts");
    let mut client = Client::connect(node.client_addr).await.expect("connects to the restored node");
    let (values, _) = client.static_read(None, ids).await.expect("reads the restored node");
    drop(client);
    node.shutdown().await.expect("stops");
    values
}

/// Starts the restored DC of three nodes (in this process), every partition a Raft group of three, from `dirs`;
/// reads `ids` through node 1; then writes `extra` through node 2, stops node 0 and reads `extra` back through
/// node 1 (a majority of each group is left). Returns the first read and the value of `extra` read at the end.
async fn read_restored_groups(
    dirs: &[std::path::PathBuf],
    dcs: u16,
    partitions: u32,
    ids: &[ObjectId],
    extra: &Counter,
) -> (Vec<Value>, Value) {
    let free = || std::net::TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("an address");
    let nodes: Vec<std::net::SocketAddr> = dirs.iter().map(|_| free()).collect();
    let mut started = Vec::new();
    for (node, data) in dirs.iter().enumerate() {
        let config = causet_server::config::ServerConfig {
            data_dir: data.clone(),
            client_bind: "127.0.0.1:0".parse().unwrap(),
            admin_bind: "127.0.0.1:0".parse().unwrap(),
            replication_bind: nodes[node],
            nodes: nodes.clone(),
            node: node as u16,
            replicas: 3,
            dc: 0,
            dcs,
            partitions,
            ..Default::default()
        };
        started.push(causet_server::Node::start(config).await.expect("a restored node starts"));
    }
    let mut client = Client::connect(started[1].client_addr).await.expect("connects to node 1");
    let (values, _) = client.static_read(None, ids).await.expect("reads the restored DC");
    let mut writer = Client::connect(started[2].client_addr).await.expect("connects to node 2");
    let clock = writer.static_update(None, vec![extra.increment(5)]).await.expect("the restored DC takes a write");
    drop(writer);
    let mut nodes = started.into_iter();
    nodes.next().expect("node 0").shutdown().await.expect("node 0 stops");
    let (after, _) = client.static_read(Some(&clock), std::slice::from_ref(extra.key())).await.expect("reads");
    drop(client);
    for node in nodes {
        node.shutdown().await.expect("stops");
    }
    (values, after.into_iter().next().expect("one value"))
}

#[test]
fn a_backup_under_load_is_the_snapshot_it_names_and_restores_to_the_same_values() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    // Three nodes per DC, every partition a Raft group of three: the backup asks each partition's leader.
    let options = StartOptions {
        dcs: 2,
        nodes_per_dc: 3,
        replicas: 3,
        partitions: 4,
        wan_delay_ms: 5,
        dir: dir.path().join("cluster"),
        base_port: 0,
        exe: Some(env!("CARGO_BIN_EXE_causet").into()),
        ..Default::default()
    };
    let file = cluster::start(&options).expect("the cluster starts");
    let _guard = cluster::StopOnDrop(&options.dir);
    let stop = Arc::new(AtomicBool::new(false));
    let loads = [load(file.dc_clients(0)[0], 0, stop.clone()), load(file.dc_clients(1)[1], 1, stop.clone())];
    std::thread::sleep(Duration::from_secs(2));

    let out = dir.path().join("backup");
    let ids = objects();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    let source = Source {
        client: file.dc_clients(0)[1],
        admins: file.nodes.iter().filter(|n| n.dc == 0).map(|n| n.admin).collect(),
        token: file.admin_token.clone(),
        page: 7, // small pages: many round trips while the load goes on
    };
    let (manifest, at_snapshot) = rt.block_on(async {
        let mut client = Client::connect(source.client).await.expect("connects to DC 0");
        let mut tx = client.start_transaction(None).await.expect("the backup's transaction");
        let mut lines = Vec::new();
        let manifest = backup::backup_at(&mut tx, &source, &out, &mut |l| lines.push(l.to_string()))
            .await
            .expect("the backup succeeds");
        assert_eq!(lines.len(), 4, "a progress line per partition: {lines:?}");
        // The same snapshot, read on the source by the transaction that held it.
        let at_snapshot = tx.read(&ids).await.expect("reads at the snapshot");
        tx.abort().await.expect("ends the transaction");
        (manifest, at_snapshot)
    });
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let written: Vec<u64> = loads.map(|l| l.join().expect("a load thread")).into();
    assert!(written.iter().all(|&n| n > 50), "both DCs wrote throughout: {written:?}");

    assert_eq!((manifest.dc, manifest.dcs, manifest.partitions), (0, 2, 4));
    assert_eq!(backup::read_manifest(&out).expect("the manifest reads back"), manifest);
    let backed_up: BTreeMap<ObjectId, Value> = backup::read_objects(&out, &manifest)
        .expect("the backup reads back")
        .into_iter()
        .map(|(id, state)| (id, state.value()))
        .collect();
    assert_eq!(backed_up.len() as u64, manifest.objects());
    assert!(
        backed_up.values().any(|v| matches!(v, Value::Set(s) if s.iter().any(|e| e.starts_with(b"dc1-")))),
        "DC 1's writes replicated into the backup"
    );
    let expected: Vec<Value> = ids
        .iter()
        .map(|id| backed_up.get(id).cloned().unwrap_or_else(|| causet_crdt::Crdt::new(id.ty).value()))
        .collect();
    let differ = differences(&ids, &expected, &at_snapshot);
    assert!(differ.is_empty(), "the backup is not the source's state at its snapshot: {differ:?}");

    // Not simply the latest state: the load went on after the snapshot.
    let latest = rt.block_on(async {
        let mut client = Client::connect(file.dc_clients(0)[0]).await.expect("connects");
        client.static_read(None, &ids).await.expect("reads").0
    });
    assert!(!differences(&ids, &latest, &at_snapshot).is_empty(), "the writes after the snapshot are not in it");

    // Restored into one new node, with the backup's partitions and with others: the same values.
    for partitions in [4, 3] {
        let data = dir.path().join(format!("restored-{partitions}"));
        let target = Target { data_dir: data.clone(), node: 0, nodes: 1, partitions, replicas: 1 };
        assert_eq!(backup::restore(&out, &target).expect("restores"), manifest.objects());
        let restored = rt.block_on(read_restored(&data, 2, partitions, &ids));
        let differ = differences(&ids, &restored, &at_snapshot);
        assert!(differ.is_empty(), "restored with {partitions} partitions: {differ:?}");
        let again = backup::restore(&out, &target).expect_err("a non-empty data directory is refused");
        assert!(again.to_string().contains("not empty"), "{again:#}");
    }
    // Two nodes of a restored DC split the objects between them.
    let halves: u64 = (0..2)
        .map(|node| {
            let data = dir.path().join(format!("restored-node{node}"));
            backup::restore(&out, &Target { data_dir: data, node, nodes: 2, partitions: 4, replicas: 1 })
                .expect("restores")
        })
        .sum();
    assert_eq!(halves, manifest.objects(), "every object on exactly one of the two nodes");
    // A DC of three nodes whose partitions are Raft groups of three: every node holds every object, the groups
    // elect leaders over the restored state, take writes and survive a node's loss.
    let dirs: Vec<_> = (0..3).map(|node| dir.path().join(format!("restored-group{node}"))).collect();
    for (node, data) in dirs.iter().enumerate() {
        let target = Target { data_dir: data.clone(), node: node as u16, nodes: 3, partitions: 4, replicas: 3 };
        assert_eq!(backup::restore(&out, &target).expect("restores"), manifest.objects(), "node {node}: everything");
    }
    let extra = Counter::new("after-restore", "backup-test");
    let (restored, after) = rt.block_on(read_restored_groups(&dirs, 2, 4, &ids, &extra));
    let differ = differences(&ids, &restored, &at_snapshot);
    assert!(differ.is_empty(), "restored into Raft groups: {differ:?}");
    assert_eq!(after, Value::Counter(5), "the write made in the restored DC, read with one node stopped");
    let too_many = Target { data_dir: dir.path().join("too-many"), node: 0, nodes: 2, partitions: 4, replicas: 3 };
    let refused = backup::restore(&out, &too_many).expect_err("more replicas than nodes is refused");
    assert!(refused.to_string().contains("replicas"), "{refused:#}");

    // Refusals: a backup into a non-empty directory, a damaged file, an unfinished backup.
    let again = rt.block_on(backup::backup(&source, &out)).expect_err("a non-empty directory is refused");
    assert!(again.to_string().contains("not empty"), "{again:#}");
    let damaged = dir.path().join("damaged");
    std::fs::create_dir(&damaged).unwrap();
    for entry in std::fs::read_dir(&out).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), damaged.join(entry.file_name())).unwrap();
    }
    let first = damaged.join(&manifest.files[0].file);
    let bytes = std::fs::read(&first).unwrap();
    std::fs::write(&first, &bytes[..bytes.len() - 3]).unwrap();
    let target = Target { data_dir: dir.path().join("from-damaged"), node: 0, nodes: 1, partitions: 4, replicas: 1 };
    let refused = backup::restore(&damaged, &target).expect_err("a damaged backup is refused");
    assert!(refused.to_string().contains("damaged"), "{refused:#}");
    std::fs::remove_file(damaged.join("manifest.json")).unwrap();
    let refused = backup::restore(&damaged, &target).expect_err("an unfinished backup is refused");
    assert!(format!("{refused:#}").contains("unfinished"), "{refused:#}");
}
