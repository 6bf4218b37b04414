//! The `LogStore` contract on fjall: round trips, checkpoints, truncation, the incarnation counter, durability
//! reports and group commit.

mod common;

use causet_core::record::Lsn;
use causet_core::PartitionId;
use causet_storage::{FjallStore, LogStore, StorageError, StorageOptions, SyncMode};
use common::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

const P0: PartitionId = PartitionId(0);
const P1: PartitionId = PartitionId(1);

#[test]
fn appended_records_load_back_in_order_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    append_range(&store, P0, 1, 100);
    append_range(&store, P1, 1, 7);
    wait_durable(&mut rx, &[(P0, Lsn(100)), (P1, Lsn(7))]);
    // Durable records are readable before a restart too.
    let (checkpoint, records) = store.load(P0).unwrap();
    assert!(checkpoint.is_none());
    assert_eq!(lsns(&records), (1..=100).collect::<Vec<_>>());
    let stats = store.stats();
    assert_eq!(stats.logs[&P0].records, 100);
    assert_eq!(stats.logs[&P1].records, 7);
    store.close().unwrap();
    assert_eq!(rx.blocking_recv().unwrap(), None, "a closed store's receiver ends cleanly");

    let (store, _rx) = open(dir.path());
    for (partition, last) in [(P0, 100), (P1, 7)] {
        let (checkpoint, records) = store.load(partition).unwrap();
        assert!(checkpoint.is_none());
        assert_eq!(lsns(&records), (1..=last).collect::<Vec<_>>());
        for (lsn, r) in records {
            assert_eq!(r, record(partition, lsn));
        }
    }
    assert!(store.load(PartitionId(5)).unwrap().1.is_empty(), "an unknown partition has nothing");
    let stats = store.stats();
    assert_eq!(stats.logs[&P0], causet_storage::LogStats { records: 100, bytes: stats.logs[&P0].bytes });
    assert!(stats.logs[&P0].bytes > 100, "opening measures the logs it finds");
    store.close().unwrap();
}

#[test]
fn load_returns_the_checkpoint_and_only_the_records_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    append_range(&store, P0, 1, 10);
    let taken = checkpoint(Lsn(6), vec![(object("a"), image(1)), (object("b"), image(2))]);
    store.checkpoint(P0, taken.clone()).unwrap();
    append_range(&store, P0, 11, 12);
    wait_durable(&mut rx, &[(P0, Lsn(12))]);
    let stats = store.stats();
    assert_eq!(stats.checkpoints_written, 1);
    assert_eq!(stats.logs[&P0].records, 6, "records 1..=6 were truncated");
    store.close().unwrap();

    let (store, _rx) = open(dir.path());
    let (loaded, records) = store.load(P0).unwrap();
    assert_eq!(loaded.as_ref(), Some(&taken));
    assert_eq!(lsns(&records), vec![7, 8, 9, 10, 11, 12]);
    assert_eq!(lsns(&store.read_log(P0, Lsn(0), 100).unwrap()), vec![7, 8, 9, 10, 11, 12]);
    // Appending resumes above the recovered log.
    assert!(matches!(
        store.append(P0, Lsn(12), record(P0, Lsn(12))),
        Err(StorageError::LsnNotIncreasing { last: Lsn(12), .. })
    ));
    store.close().unwrap();
}

#[test]
fn incremental_checkpoints_merge_to_the_latest_image_of_each_object() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    append_range(&store, P0, 1, 8);
    store.checkpoint(P0, checkpoint(Lsn(5), vec![(object("a"), image(1)), (object("b"), image(1))])).unwrap();
    // The second checkpoint carries only what changed: a new image of `a`, and a new object `c`.
    let second = checkpoint(Lsn(8), vec![(object("a"), image(2)), (object("c"), image(1))]);
    store.checkpoint(P0, second.clone()).unwrap();
    // Another partition's objects of the same name stay apart.
    append_range(&store, P1, 1, 1);
    store.checkpoint(P1, checkpoint(Lsn(1), vec![(object("a"), image(9))])).unwrap();
    wait_durable(&mut rx, &[(P0, Lsn(8)), (P1, Lsn(1))]);
    store.close().unwrap();

    let (store, _rx) = open(dir.path());
    let (loaded, records) = store.load(P0).unwrap();
    let loaded = loaded.expect("a checkpoint was written");
    let objects: BTreeMap<_, _> = loaded.objects.iter().cloned().collect();
    assert_eq!(objects.len(), 3);
    assert_eq!(objects[&object("a")], image(2), "the later checkpoint's image wins");
    assert_eq!(objects[&object("b")], image(1), "an object unchanged since the first checkpoint is kept");
    assert_eq!(objects[&object("c")], image(1));
    assert_eq!((loaded.lsn, loaded.clock, &loaded.frontier), (second.lsn, second.clock, &second.frontier));
    assert_eq!((&loaded.prepared, &loaded.recent_commits), (&second.prepared, &second.recent_commits));
    assert!(records.is_empty());
    let (other, _) = store.load(P1).unwrap();
    assert_eq!(other.unwrap().objects, vec![(object("a"), image(9))]);
    store.close().unwrap();
}

#[test]
fn truncation_spares_the_log_a_checkpoint_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    let keeping = |lsn: u64, objects, keep: Option<u64>| causet_core::partition::Checkpoint {
        keep_log_from: keep.map(Lsn),
        ..checkpoint(Lsn(lsn), objects)
    };
    append_range(&store, P0, 1, 10);
    store.checkpoint(P0, keeping(8, vec![(object("a"), image(1))], Some(4))).unwrap();
    barrier(&store, &mut rx, 1);
    let kept = |store: &FjallStore| lsns(&store.read_log(P0, Lsn(0), 100).unwrap());
    assert_eq!(kept(&store), (4..=10).collect::<Vec<_>>(), "records from keep_log_from on stay");
    // Recovery still starts from the checkpoint.
    assert_eq!(lsns(&store.load(P0).unwrap().1), vec![9, 10]);
    assert_eq!(store.stats().logs[&P0].records, 7);

    // A later checkpoint that keeps less lets truncation catch up, up to the checkpoint.
    store.checkpoint(P0, keeping(8, vec![], Some(7))).unwrap();
    barrier(&store, &mut rx, 2);
    assert_eq!(kept(&store), vec![7, 8, 9, 10]);
    store.checkpoint(P0, keeping(8, vec![], None)).unwrap();
    barrier(&store, &mut rx, 3);
    assert_eq!(kept(&store), vec![9, 10], "keeping nothing, the checkpoint bounds truncation");
    assert_eq!(store.stats().logs[&P0].records, 2);
    assert_eq!(store.stats().records_truncated, 8);

    // What a checkpoint keeps stays kept across a restart, and is read back from where it is asked.
    append_range(&store, P0, 11, 14);
    store.checkpoint(P0, keeping(14, vec![], Some(11))).unwrap();
    wait_durable(&mut rx, &[(P0, Lsn(14))]);
    store.close().unwrap();
    let (store, _rx) = open(dir.path());
    assert_eq!(kept(&store), vec![11, 12, 13, 14]);
    assert_eq!(lsns(&store.read_log(P0, Lsn(11), 2).unwrap()), vec![12, 13]);
    assert!(store.load(P0).unwrap().1.is_empty());
    assert_eq!(store.load(P0).unwrap().0.unwrap().keep_log_from, Some(Lsn(11)));
    store.close().unwrap();
}

#[test]
fn incarnation_counter_increments_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _rx) = open(dir.path());
    assert_eq!(store.next_incarnation().unwrap(), 1);
    assert_eq!(store.next_incarnation().unwrap(), 2);
    store.close().unwrap();
    let (store, _rx) = open(dir.path());
    assert_eq!(store.next_incarnation().unwrap(), 3);
    // Dropping without `close` keeps it too.
    drop(store);
    let (store, _rx) = open(dir.path());
    assert_eq!(store.next_incarnation().unwrap(), 4);
    store.close().unwrap();
}

#[test]
fn a_fresh_store_takes_the_generation_given_and_keeps_it_and_an_older_store_is_generation_0() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _rx) = open(dir.path());
    assert_eq!(store.generation(77).unwrap(), 77);
    assert_eq!(store.next_incarnation().unwrap(), 1);
    assert_eq!(store.generation(5).unwrap(), 77, "a stored generation is kept");
    drop(store);
    let (store, _rx) = open(dir.path());
    assert_eq!(store.generation(5).unwrap(), 77, "and survives a restart");
    store.close().unwrap();
    // A store that has run before without a generation (made before generations existed) is generation 0.
    let old = tempfile::tempdir().unwrap();
    let (store, _rx) = open(old.path());
    assert_eq!(store.next_incarnation().unwrap(), 1);
    assert_eq!(store.generation(9).unwrap(), 0);
    assert_eq!(store.generation(9).unwrap(), 0);
    store.close().unwrap();
}

#[test]
fn the_dcs_members_are_recorded_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _rx) = open(dir.path());
    assert_eq!(store.members().unwrap(), Vec::<std::net::SocketAddr>::new(), "a fresh store knows none");
    let three: Vec<std::net::SocketAddr> =
        ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.2:7003"].iter().map(|a| a.parse().unwrap()).collect();
    store.set_members(&three).unwrap();
    let mut four = three.clone();
    four.push("[::1]:7004".parse().unwrap());
    store.set_members(&four).unwrap();
    drop(store);
    let (store, _rx) = open(dir.path());
    assert_eq!(store.members().unwrap(), four);
    store.close().unwrap();
}

/// Many threads append to several partitions each; every partition's reports rise strictly and reach its last
/// lsn, and every append is covered.
#[test]
fn durability_reports_are_monotone_and_cover_every_append() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    let store = Arc::new(store);
    const PARTITIONS: u32 = 8;
    const RECORDS: u64 = 300;
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                for lsn in 1..=RECORDS {
                    for p in [t * 2, t * 2 + 1] {
                        store.append(PartitionId(p), Lsn(lsn), record(PartitionId(p), Lsn(lsn))).unwrap();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let until: Vec<_> = (0..PARTITIONS).map(|p| (PartitionId(p), Lsn(RECORDS))).collect();
    let reports = wait_durable(&mut rx, &until);
    let mut last: BTreeMap<PartitionId, Lsn> = BTreeMap::new();
    for (p, lsn) in reports {
        if let Some(previous) = last.insert(p, lsn) {
            assert!(lsn > previous, "{p:?}: report {lsn:?} after {previous:?}");
        }
    }
    assert_eq!(last, until.iter().copied().collect());
    let store = Arc::into_inner(store).expect("the threads are done");
    assert_eq!(store.stats().records_written, u64::from(PARTITIONS) * RECORDS);
    store.close().unwrap();
    assert_eq!(rx.try_recv().unwrap_err().to_string(), StorageError::Closed.to_string());
}

/// Group commit: appends from several threads share fsyncs, so there are far fewer fsyncs than records.
#[test]
fn concurrent_appends_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    let store = Arc::new(store);
    const THREADS: u32 = 8;
    const RECORDS: u64 = 250;
    let started = Instant::now();
    let threads: Vec<_> = (0..THREADS)
        .map(|p| {
            let store = store.clone();
            std::thread::spawn(move || append_range(&*store, PartitionId(p), 1, RECORDS))
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let until: Vec<_> = (0..THREADS).map(|p| (PartitionId(p), Lsn(RECORDS))).collect();
    wait_durable(&mut rx, &until);
    let elapsed = started.elapsed();
    let stats = store.stats();
    let records = u64::from(THREADS) * RECORDS;
    println!(
        "group commit: {records} records, {} fsyncs, {:.1} records/fsync (max {}), fsync mean {:.0} us, max {} us, \
         {:.0} records/s",
        stats.fsyncs,
        stats.records_per_fsync(),
        stats.records_per_fsync_max,
        stats.fsync_latency_us_mean(),
        stats.fsync_latency_us_max,
        records as f64 / elapsed.as_secs_f64(),
    );
    assert_eq!(stats.records_synced, records);
    assert!(stats.fsyncs < records / 2, "{} fsyncs for {records} records", stats.fsyncs);
    Arc::into_inner(store).unwrap().close().unwrap();
}

#[test]
fn out_of_order_writes_are_refused_and_leave_the_store_usable() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    append_range(&store, P0, 1, 3);
    assert!(matches!(
        store.append(P0, Lsn(3), record(P0, Lsn(3))),
        Err(StorageError::LsnNotIncreasing { partition: P0, lsn: Lsn(3), last: Lsn(3) })
    ));
    assert!(matches!(
        store.checkpoint(P0, checkpoint(Lsn(4), vec![])),
        Err(StorageError::CheckpointOutOfOrder { lsn: Lsn(4), previous: Lsn(0), last: Lsn(3), .. })
    ));
    store.checkpoint(P0, checkpoint(Lsn(2), vec![])).unwrap();
    assert!(matches!(
        store.checkpoint(P0, checkpoint(Lsn(1), vec![])),
        Err(StorageError::CheckpointOutOfOrder { lsn: Lsn(1), previous: Lsn(2), .. })
    ));
    // Gaps are allowed: lsns only have to rise.
    store.append(P0, Lsn(9), record(P0, Lsn(9))).unwrap();
    wait_durable(&mut rx, &[(P0, Lsn(9))]);
    store.close().unwrap();
    let (store, _rx) = open(dir.path());
    assert_eq!(lsns(&store.load(P0).unwrap().1), vec![3, 9]);
    store.close().unwrap();
}

#[test]
fn periodic_mode_reports_once_written_and_fsyncs_on_its_timer() {
    let dir = tempfile::tempdir().unwrap();
    let options =
        StorageOptions { sync: SyncMode::Periodic { interval: Duration::from_millis(20) }, ..Default::default() };
    let (store, mut rx) = FjallStore::open(dir.path(), options).unwrap();
    append_range(&store, P0, 1, 50);
    wait_durable(&mut rx, &[(P0, Lsn(50))]);
    let deadline = Instant::now() + WAIT;
    while store.stats().records_synced < 50 {
        assert!(Instant::now() < deadline, "the timer never fsynced: {:?}", store.stats());
        std::thread::sleep(Duration::from_millis(5));
    }
    // Idle: no further fsync while nothing is written.
    let fsyncs = store.stats().fsyncs;
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(store.stats().fsyncs, fsyncs);
    store.close().unwrap();
    let (store, _rx) = open(dir.path());
    assert_eq!(store.load(P0).unwrap().1.len(), 50);
    store.close().unwrap();
}

#[test]
fn invalid_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let zero = StorageOptions { queue_capacity: 0, ..Default::default() };
    assert!(matches!(FjallStore::open(dir.path(), zero), Err(StorageError::InvalidOptions(_))));
    let never = StorageOptions { sync: SyncMode::Periodic { interval: Duration::ZERO }, ..Default::default() };
    assert!(matches!(FjallStore::open(dir.path(), never), Err(StorageError::InvalidOptions(_))));
}

/// A tiny queue still takes every append: a full queue makes `append` wait, and counts it.
#[test]
fn a_full_queue_makes_appends_wait_not_fail() {
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions { queue_capacity: 1, batch_writes_max: 2, ..Default::default() };
    let (store, mut rx) = FjallStore::open(dir.path(), options).unwrap();
    append_range(&store, P0, 1, 200);
    wait_durable(&mut rx, &[(P0, Lsn(200))]);
    assert!(store.stats().queue_full_waits > 0);
    assert!(store.stats().records_per_fsync_max <= 2);
    store.close().unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn the_receiver_serves_async_callers() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    append_range(&store, P0, 1, 3);
    let mut durable = Lsn(0);
    while durable < Lsn(3) {
        let batch = tokio::time::timeout(WAIT, rx.recv()).await.expect("a report").unwrap().expect("open");
        for (p, reported) in batch {
            assert_eq!(p, P0);
            durable = reported.log().expect("a record position");
        }
    }
    // Closing joins the writer: a blocking call, but short.
    store.close().unwrap();
    assert!(rx.recv().await.unwrap().is_none());
}

/// A coordinator's write-buffer log: records of two shards are reported durable by shard, truncation keeps the
/// records from its position on, and what survives loads back after a restart, per shard, in order.
#[test]
fn write_buffer_logs_are_reported_durable_truncated_and_loaded_back_per_shard() {
    use causet_core::coordinator::BufferRecord;
    use causet_core::VectorClock;
    use causet_storage::Durable;
    let round =
        |n: u64| BufferRecord::RoundStarted { snapshot: VectorClock::from_entries(vec![causet_core::Timestamp(n)]) };
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    for lsn in 1..=10 {
        store.append_buffer(0, Lsn(lsn), &round(lsn)).unwrap();
    }
    store.append_buffer(3, Lsn(1), &round(100)).unwrap();
    // A partition's log is not a buffer's: its report stays apart.
    store.append(P0, Lsn(1), record(P0, Lsn(1))).unwrap();
    let mut buffers: BTreeMap<u32, Lsn> = BTreeMap::new();
    wait_reports(&mut rx, |batch| {
        for (id, d) in batch {
            if let Durable::Buffer(lsn) = d {
                buffers.insert(id.0, *lsn);
            }
        }
        buffers.get(&0) == Some(&Lsn(10)) && buffers.get(&3) == Some(&Lsn(1))
    });
    store.truncate_buffer(0, Lsn(8)).unwrap();
    store.append_buffer(0, Lsn(11), &round(11)).unwrap();
    wait_reports(&mut rx, |batch| batch.iter().any(|(id, d)| id.0 == 0 && *d == Durable::Buffer(Lsn(11))));
    store.close().unwrap();

    let (store, _rx) = open(dir.path());
    let logs = store.load_buffers().unwrap();
    let lsns = |shard: u32| logs[&shard].iter().map(|(lsn, _)| lsn.0).collect::<Vec<_>>();
    assert_eq!(lsns(0), vec![8, 9, 10, 11]);
    assert_eq!(logs[&0][0].1, round(8));
    assert_eq!(lsns(3), vec![1]);
    assert_eq!(logs.len(), 2);
    assert_eq!(store.load(P0).unwrap().1.len(), 1, "the partition's log is untouched");
    // Truncations one after another (each scans from where the last one ended), with appends between them, and
    // one below a truncation already done (a no-op); after a restart the first truncation starts from the log's
    // start again.
    for lsn in 12..=20 {
        store.append_buffer(0, Lsn(lsn), &round(lsn)).unwrap();
    }
    store.truncate_buffer(0, Lsn(10)).unwrap();
    store.truncate_buffer(0, Lsn(9)).unwrap();
    store.truncate_buffer(0, Lsn(15)).unwrap();
    store.append_buffer(0, Lsn(21), &round(21)).unwrap();
    store.truncate_buffer(0, Lsn(18)).unwrap();
    store.truncate_buffer(3, Lsn(2)).unwrap();
    store.close().unwrap();
    let (store, _rx) = open(dir.path());
    let logs = store.load_buffers().unwrap();
    assert_eq!(logs[&0].iter().map(|(lsn, _)| lsn.0).collect::<Vec<_>>(), vec![18, 19, 20, 21]);
    assert!(!logs.contains_key(&3), "shard 3's log is empty");
    store.truncate_buffer(0, Lsn(20)).unwrap();
    store.close().unwrap();
    let (store, _rx) = open(dir.path());
    assert_eq!(store.load_buffers().unwrap()[&0].iter().map(|(lsn, _)| lsn.0).collect::<Vec<_>>(), vec![20, 21]);
    store.close().unwrap();
}
