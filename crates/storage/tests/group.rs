//! The Raft group log on fjall: Writes round-trip through `load_group`, replace suffixes, share batches and
//! fsyncs with records, are reported durable in order, survive a drop, follow checkpoints' truncation, and install
//! snapshots.

mod common;

use causet_core::group::{Entry, EntryKind, HardState, ReplicaId};
use causet_core::partition::Checkpoint;
use causet_core::record::Lsn;
use causet_core::replica::InstalledSnapshot;
use causet_core::PartitionId;
use causet_storage::{
    Compacted, Durable, DurableReceiver, FjallStore, LogStore, StorageError, StorageOptions, SyncMode,
};
use common::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const P0: PartitionId = PartitionId(0);
const P1: PartitionId = PartitionId(1);

/// An entry whose data names its index and term.
fn entry(index: u64, term: u64) -> Entry {
    Entry { index: Lsn(index), term, kind: EntryKind::Normal, data: format!("{index}@{term}").into_bytes() }
}

fn entries(from: u64, to: u64, term: u64) -> Vec<Entry> {
    (from..=to).map(|i| entry(i, term)).collect()
}

fn hard_state(term: u64, commit: u64) -> HardState {
    HardState { term, vote: Some(ReplicaId(2)), commit: Lsn(commit) }
}

fn indexes(entries: &[Entry]) -> Vec<u64> {
    entries.iter().map(|e| e.index.0).collect()
}

/// Waits until every partition in `until` has its group Write reported durable; returns every report.
fn wait_group(rx: &mut DurableReceiver, until: &[(PartitionId, u64)]) -> Vec<(PartitionId, Durable)> {
    let mut durable: BTreeMap<PartitionId, u64> = BTreeMap::new();
    wait_reports(rx, |batch| {
        for (p, d) in batch {
            if let Some(ready) = d.group() {
                durable.insert(*p, ready);
            }
        }
        until.iter().all(|(p, ready)| durable.get(p).is_some_and(|d| d >= ready))
    })
}

fn truncating(dir: &Path) -> (FjallStore, DurableReceiver) {
    let options = StorageOptions { truncate_group_logs: true, ..StorageOptions::default() };
    FjallStore::open(dir, options).expect("open the store")
}

#[test]
fn writes_round_trip_through_load_group_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    // A new replica has nothing.
    let fresh = store.load_group(P0).unwrap();
    assert_eq!((fresh.checkpoint, fresh.durable), (None, Default::default()));

    store.write_group(P0, 1, None, vec![], Some(hard_state(1, 0))).unwrap();
    store.write_group(P0, 2, None, entries(1, 3, 1), None).unwrap();
    store.write_group(P0, 5, None, entries(4, 4, 1), Some(hard_state(1, 3))).unwrap();
    // Hard-state-only: the entries stay.
    store.write_group(P0, 6, None, vec![], Some(hard_state(2, 4))).unwrap();
    store.write_group(P1, 1, None, entries(1, 2, 7), Some(hard_state(7, 1))).unwrap();
    wait_group(&mut rx, &[(P0, 6), (P1, 1)]);

    let check = |store: &FjallStore| {
        let recovered = store.load_group(P0).unwrap();
        assert_eq!(recovered.durable.entries, entries(1, 4, 1));
        assert_eq!(recovered.durable.hard_state, hard_state(2, 4));
        assert_eq!(
            (recovered.durable.applied, recovered.checkpoint, recovered.durable.compacted),
            (Lsn(0), None, None)
        );
        let other = store.load_group(P1).unwrap();
        assert_eq!((other.durable.entries, other.durable.hard_state), (entries(1, 2, 7), hard_state(7, 1)));
        // Catch-up reads.
        assert_eq!(store.read_group_log(P0, Lsn(0), 100).unwrap(), entries(1, 4, 1));
        assert_eq!(store.read_group_log(P0, Lsn(1), 2).unwrap(), entries(2, 3, 1));
        assert!(store.read_group_log(P0, Lsn(4), 10).unwrap().is_empty());
        assert!(store.read_group_log(P0, Lsn(u64::MAX), 10).unwrap().is_empty());
        // The record log of the same partitions is untouched.
        assert!(store.load(P0).unwrap().1.is_empty());
    };
    check(&store);
    let stats = store.stats();
    assert_eq!((stats.group_writes, stats.entries_written, stats.entries_deleted), (5, 6, 0));
    assert_eq!(stats.group_logs[&P0].records, 4);
    store.close().unwrap();

    let (store, _rx) = open(dir.path());
    check(&store);
    assert_eq!(store.stats().group_logs[&P0].records, 4, "opening measures the group logs");
    // Writes are numbered afresh after a restart.
    store.write_group(P0, 1, None, entries(5, 5, 2), None).unwrap();
    store.close().unwrap();
    let (store, _rx) = open(dir.path());
    assert_eq!(indexes(&store.load_group(P0).unwrap().durable.entries), (1..=5).collect::<Vec<_>>());
    store.close().unwrap();
}

#[test]
fn a_write_replaces_the_suffix_from_its_first_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    store.write_group(P0, 1, None, entries(1, 10, 1), Some(hard_state(1, 3))).unwrap();
    wait_group(&mut rx, &[(P0, 1)]);
    // A new leader of term 2 overwrote 6..=10 with two entries.
    store.write_group(P0, 2, None, entries(6, 7, 2), Some(hard_state(2, 3))).unwrap();
    wait_group(&mut rx, &[(P0, 2)]);
    let mut expected = entries(1, 5, 1);
    expected.extend(entries(6, 7, 2));
    assert_eq!(store.load_group(P0).unwrap().durable.entries, expected);
    assert_eq!(store.stats().group_logs[&P0].records, 7);
    assert_eq!(store.stats().entries_deleted, 5);
    store.close().unwrap();

    let (store, mut rx) = open(dir.path());
    let recovered = store.load_group(P0).unwrap();
    assert_eq!(recovered.durable.entries, expected);
    assert_eq!(recovered.durable.hard_state, hard_state(2, 3));
    // Replacements within one batch (enqueued back to back): the last one wins, and a longer one extends.
    store.write_group(P0, 1, None, entries(7, 9, 3), None).unwrap();
    store.write_group(P0, 2, None, entries(8, 8, 4), None).unwrap();
    store.write_group(P0, 3, None, entries(6, 6, 5), None).unwrap();
    store.write_group(P0, 4, None, entries(7, 12, 5), Some(hard_state(5, 5))).unwrap();
    wait_group(&mut rx, &[(P0, 4)]);
    let mut expected = entries(1, 5, 1);
    expected.extend(entries(6, 12, 5));
    assert_eq!(store.load_group(P0).unwrap().durable.entries, expected);
    assert_eq!(store.stats().group_logs[&P0].records, 12, "sizes follow replacements within a batch");
    store.close().unwrap();
    let (store, _rx) = open(dir.path());
    assert_eq!(store.load_group(P0).unwrap().durable.entries, expected);
    assert_eq!(store.stats().group_logs[&P0].records, 12);
    store.close().unwrap();
}

#[test]
fn out_of_order_writes_are_refused_and_leave_the_store_usable() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    store.write_group(P0, 3, None, entries(1, 4, 1), None).unwrap();
    let refused = |result: Result<(), StorageError>| {
        assert!(matches!(result, Err(StorageError::InvalidGroupWrite { partition: P0, .. })), "{result:?}");
    };
    refused(store.write_group(P0, 3, None, entries(5, 5, 1), None));
    refused(store.write_group(P0, 4, None, entries(6, 6, 1), None)); // a gap after 4
    refused(store.write_group(P0, 4, None, vec![entry(5, 1), entry(7, 1)], None)); // not consecutive
    refused(store.write_group(P0, 4, None, entries(0, 1, 1), None)); // index 0
    store.append(P0, Lsn(1), record(P0, Lsn(1))).unwrap();
    store.checkpoint(P0, checkpoint(Lsn(2), vec![])).unwrap();
    refused(store.write_group(P0, 4, None, entries(2, 2, 2), None)); // overwrites what the checkpoint applied
    assert!(matches!(
        store.checkpoint(P0, checkpoint(Lsn(5), vec![])),
        Err(StorageError::CheckpointOutOfOrder { lsn: Lsn(5), last: Lsn(4), .. })
    ));
    store.write_group(P0, 4, None, entries(3, 3, 2), None).unwrap();
    wait_group(&mut rx, &[(P0, 4)]);
    // load_group starts a new Group: Writes are numbered from 1 again.
    let recovered = store.load_group(P0).unwrap();
    assert_eq!(recovered.durable.applied, Lsn(2));
    assert_eq!(recovered.durable.entries, vec![entry(1, 1), entry(2, 1), entry(3, 2)]);
    store.write_group(P0, 1, None, entries(4, 4, 2), None).unwrap();
    wait_group(&mut rx, &[(P0, 1)]);
    store.close().unwrap();
}

/// The entries of Write `n` in the interleaving test, whose log ends at `last`: mostly one new entry; every tenth
/// Write instead replaces the last two entries by one of a new term; every tenth from the fifth writes only a hard
/// state.
fn nth_write(n: u64, last: &mut u64) -> Vec<Entry> {
    let term = n / 10 + 1;
    match n % 10 {
        5 => vec![],
        0 => {
            *last -= 1;
            vec![entry(*last, term)]
        }
        _ => {
            *last += 1;
            vec![entry(*last, term)]
        }
    }
}

/// Writes of several partitions, interleaved with record appends of others (and of the same ones), share batches
/// and fsyncs; each partition's reports come in order, at most one of each kind per partition per batch, and end
/// at the last Write and the last record.
#[test]
fn writes_and_appends_share_batches_and_are_reported_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    let store = Arc::new(store);
    const WRITES: u64 = 200;
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let store = store.clone();
            std::thread::spawn(move || {
                let group = PartitionId(t);
                let records = PartitionId(10 + t);
                let mut last = 0;
                for n in 1..=WRITES {
                    let entries = nth_write(n, &mut last);
                    store.write_group(group, n, None, entries, Some(hard_state(n / 10 + 1, 0))).unwrap();
                    store.append(records, Lsn(n), record(records, Lsn(n))).unwrap();
                    if t == 0 {
                        // A partition with both: its reports of each kind stay apart.
                        store.append(group, Lsn(n), record(group, Lsn(n))).unwrap();
                    }
                    if n % 10 == 0 {
                        // Spread the writes over many batches.
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut last_group: BTreeMap<PartitionId, u64> = BTreeMap::new();
    let mut last_log: BTreeMap<PartitionId, Lsn> = BTreeMap::new();
    let done = |last_group: &BTreeMap<PartitionId, u64>, last_log: &BTreeMap<PartitionId, Lsn>| {
        (0..4).all(|t| last_group.get(&PartitionId(t)) == Some(&WRITES))
            && (0..4).all(|t| last_log.get(&PartitionId(10 + t)) == Some(&Lsn(WRITES)))
            && last_log.get(&P0) == Some(&Lsn(WRITES))
    };
    wait_reports(&mut rx, |batch| {
        let mut seen = std::collections::BTreeSet::new();
        for (p, d) in batch {
            assert!(seen.insert((*p, d.group().is_some())), "two reports of one kind for {p:?} in {batch:?}");
            match d {
                Durable::Group(ready) => {
                    assert!(p.0 < 4, "a group report for a record partition");
                    let previous = last_group.insert(*p, *ready);
                    assert!(previous < Some(*ready), "{p:?}: Write {ready} reported after {previous:?}");
                }
                Durable::Log(lsn) => {
                    let previous = last_log.insert(*p, *lsn);
                    assert!(previous < Some(*lsn), "{p:?}: record {lsn:?} reported after {previous:?}");
                }
                Durable::Buffer(_) => panic!("no write-buffer log was written"),
            }
        }
        assert!(batch.windows(2).all(|w| w[0].0 <= w[1].0), "a batch ascends by partition: {batch:?}");
        done(&last_group, &last_log)
    });
    let store = Arc::into_inner(store).expect("the threads are done");
    let stats = store.stats();
    let ops = 4 * 2 * WRITES + WRITES;
    println!("{ops} writes and appends: {} batches, {} fsyncs", stats.batches, stats.fsyncs);
    assert!(stats.batches < ops / 2, "{} batches for {ops} writes", stats.batches);
    assert_eq!(stats.group_writes, 4 * WRITES);
    store.close().unwrap();

    // The log the Writes leave, replayed.
    let mut expected: Vec<Entry> = Vec::new();
    let mut last = 0;
    for n in 1..=WRITES {
        let written = nth_write(n, &mut last);
        if let Some(first) = written.first() {
            expected.truncate(first.index.0 as usize - 1);
        }
        expected.extend(written);
    }
    let (store, _rx) = open(dir.path());
    for t in 0..4 {
        let recovered = store.load_group(PartitionId(t)).unwrap();
        assert_eq!(recovered.durable.entries, expected);
        assert_eq!(recovered.durable.hard_state, hard_state(WRITES / 10 + 1, 0));
        assert_eq!(store.load(PartitionId(10 + t)).unwrap().1.len() as u64, WRITES);
    }
    assert_eq!(store.load(P0).unwrap().1.len() as u64, WRITES);
    store.close().unwrap();
}

/// Dropping the store without `close` (a node that stops without shutting down its storage) keeps every Write
/// that was reported durable. The SIGKILL case is in `crash.rs`.
#[test]
fn a_dropped_store_keeps_every_write_reported_durable() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    store.write_group(P0, 1, None, entries(1, 50, 1), Some(hard_state(1, 20))).unwrap();
    store.write_group(P0, 2, None, entries(40, 60, 2), Some(hard_state(2, 30))).unwrap();
    wait_group(&mut rx, &[(P0, 2)]);
    drop(store);
    let (store, _rx) = open(dir.path());
    let recovered = store.load_group(P0).unwrap();
    let mut expected = entries(1, 39, 1);
    expected.extend(entries(40, 60, 2));
    assert_eq!(recovered.durable.entries, expected);
    assert_eq!(recovered.durable.hard_state, hard_state(2, 30));
    store.close().unwrap();
}

#[test]
fn periodic_mode_reports_writes_once_written() {
    let dir = tempfile::tempdir().unwrap();
    let options =
        StorageOptions { sync: SyncMode::Periodic { interval: Duration::from_millis(20) }, ..Default::default() };
    let (store, mut rx) = FjallStore::open(dir.path(), options).unwrap();
    for n in 1..=20 {
        store.write_group(P1, n, None, entries(n, n, 1), Some(hard_state(1, n - 1))).unwrap();
    }
    wait_group(&mut rx, &[(P1, 20)]);
    store.close().unwrap();
    let (store, _rx) = open(dir.path());
    assert_eq!(store.load_group(P1).unwrap().durable.entries, entries(1, 20, 1));
    store.close().unwrap();
}

fn keeping(lsn: u64, keep: Option<u64>) -> Checkpoint {
    Checkpoint { keep_log_from: keep.map(Lsn), ..checkpoint(Lsn(lsn), vec![(object("a"), image(lsn as i64))]) }
}

/// By default checkpoints leave group entries alone.
#[test]
fn checkpoints_keep_group_entries_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    store.write_group(P0, 1, None, entries(1, 10, 1), Some(hard_state(1, 8))).unwrap();
    store.checkpoint(P0, keeping(6, None)).unwrap();
    store.write_group(P0, 2, None, entries(11, 12, 1), None).unwrap();
    wait_group(&mut rx, &[(P0, 2)]);
    store.close().unwrap();
    let (store, _rx) = open(dir.path());
    let recovered = store.load_group(P0).unwrap();
    assert_eq!(recovered.checkpoint.as_ref().map(|c| c.lsn), Some(Lsn(6)));
    assert_eq!(recovered.checkpoint.unwrap().objects, vec![(object("a"), image(6))]);
    assert_eq!(recovered.durable.applied, Lsn(6));
    assert_eq!(indexes(&recovered.durable.entries), (1..=12).collect::<Vec<_>>());
    assert_eq!(recovered.durable.compacted, None);
    assert_eq!(store.stats().entries_deleted, 0);
    store.close().unwrap();
}

/// With truncation on, checkpoints truncate group entries as they do records (never from `keep_log_from` on),
/// and the compaction point is kept with the hard state.
#[test]
fn checkpoints_truncate_group_entries_when_asked_and_keep_the_compaction_point() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = truncating(dir.path());
    store.write_group(P0, 1, None, entries(1, 5, 1), None).unwrap();
    store.write_group(P0, 2, None, entries(6, 10, 2), Some(hard_state(2, 9))).unwrap();
    store.checkpoint(P0, keeping(8, Some(4))).unwrap();
    barrier(&store, &mut rx, 1);
    let recovered = store.load_group(P0).unwrap();
    assert_eq!(indexes(&recovered.durable.entries), (4..=10).collect::<Vec<_>>(), "entries from keep_log_from on");
    assert_eq!(recovered.durable.compacted, Some(Compacted { index: Lsn(3), term: 1 }));
    assert_eq!(recovered.durable.applied, Lsn(8));
    assert_eq!(indexes(&store.read_group_log(P0, Lsn(0), 100).unwrap()), (4..=10).collect::<Vec<_>>());

    // A later checkpoint that keeps nothing truncates up to itself.
    store.checkpoint(P0, keeping(9, None)).unwrap();
    store.write_group(P0, 3, None, entries(11, 11, 2), Some(hard_state(2, 10))).unwrap();
    wait_group(&mut rx, &[(P0, 3)]);
    assert_eq!(store.stats().entries_deleted, 9);
    assert_eq!(store.stats().group_logs[&P0].records, 2);
    store.close().unwrap();

    let (store, mut rx) = truncating(dir.path());
    let recovered = store.load_group(P0).unwrap();
    assert_eq!(recovered.durable.entries, vec![entry(10, 2), entry(11, 2)]);
    assert_eq!(recovered.durable.compacted, Some(Compacted { index: Lsn(9), term: 2 }));
    assert_eq!(recovered.durable.hard_state, hard_state(2, 10));
    assert_eq!(recovered.checkpoint.map(|c| c.lsn), Some(Lsn(9)));
    // Writing continues after the compacted log, never at or below the checkpoint.
    assert!(matches!(
        store.write_group(P0, 1, None, entries(9, 9, 3), None),
        Err(StorageError::InvalidGroupWrite { .. })
    ));
    store.write_group(P0, 1, None, entries(11, 12, 3), None).unwrap();
    // Everything compacted: the compaction point alone says where the log continues.
    store.checkpoint(P0, keeping(12, None)).unwrap();
    store.write_group(P0, 2, None, vec![], Some(hard_state(3, 12))).unwrap();
    wait_group(&mut rx, &[(P0, 2)]);
    store.close().unwrap();
    let (store, _rx) = truncating(dir.path());
    let recovered = store.load_group(P0).unwrap();
    assert!(recovered.durable.entries.is_empty());
    assert_eq!(recovered.durable.compacted, Some(Compacted { index: Lsn(12), term: 3 }));
    assert!(matches!(
        store.write_group(P0, 1, None, entries(14, 14, 3), None),
        Err(StorageError::InvalidGroupWrite { .. })
    ));
    store.write_group(P0, 1, None, entries(13, 13, 3), None).unwrap();
    store.close().unwrap();
    let (store, _rx) = truncating(dir.path());
    assert_eq!(store.load_group(P0).unwrap().durable.entries, vec![entry(13, 3)]);
    store.close().unwrap();
}

/// A snapshot at `lsn` whose checkpoint holds `objects`, compacted through `compacted` (of term 1), with the
/// entries after it of term `term`.
fn snapshot(lsn: u64, objects: &[(&str, i64)], compacted: u64, term: u64) -> Box<InstalledSnapshot> {
    let objects = objects.iter().map(|(name, base)| (object(name), image(*base))).collect();
    Box::new(InstalledSnapshot {
        checkpoint: checkpoint(Lsn(lsn), objects),
        compacted: Compacted { index: Lsn(compacted), term: 1 },
        entries: entries(compacted + 1, lsn, term),
    })
}

/// A snapshot replaces the stored log (entries below and above its index alike) and the checkpoint (objects it
/// does not hold are gone, with those of a checkpoint enqueued just before it), in the batch of its Write, whose
/// entries and hard state follow it; all of it survives a reopen.
#[test]
fn a_snapshot_replaces_the_log_and_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    store.write_group(P0, 1, None, entries(1, 10, 1), Some(hard_state(1, 6))).unwrap();
    store.checkpoint(P0, checkpoint(Lsn(4), vec![(object("a"), image(1)), (object("b"), image(2))])).unwrap();
    barrier(&store, &mut rx, 1);
    // Enqueued back to back with the snapshot, so most likely in its batch; correct either way.
    store.checkpoint(P0, checkpoint(Lsn(6), vec![(object("z"), image(3))])).unwrap();
    let installed = snapshot(7, &[("b", 70), ("c", 71)], 5, 2);
    store.write_group(P0, 2, Some(installed.clone()), entries(8, 9, 3), Some(hard_state(3, 7))).unwrap();
    let reports = wait_group(&mut rx, &[(P0, 2)]);
    assert!(reports.contains(&(P0, Durable::Group(2))), "{reports:?}");

    let mut expected = installed.entries.clone();
    expected.extend(entries(8, 9, 3));
    let check = |store: &FjallStore| {
        let recovered = store.load_group(P0).unwrap();
        assert_eq!(recovered.checkpoint.as_ref(), Some(&installed.checkpoint));
        assert_eq!(recovered.durable.compacted, Some(installed.compacted));
        assert_eq!(recovered.durable.entries, expected);
        assert_eq!(recovered.durable.hard_state, hard_state(3, 7));
        assert_eq!(recovered.durable.applied, Lsn(7));
        assert_eq!(store.read_group_log(P0, Lsn(0), 100).unwrap(), expected);
        assert_eq!(store.read_group_log(P0, Lsn(7), 100).unwrap(), entries(8, 9, 3));
        assert_eq!(store.load(P0).unwrap().0.as_ref(), Some(&installed.checkpoint));
        assert_eq!(store.stats().group_logs[&P0].records, 4);
    };
    check(&store);
    let stats = store.stats();
    assert_eq!((stats.snapshots_installed, stats.checkpoints_written, stats.group_writes), (1, 2, 2));
    assert_eq!((stats.entries_written, stats.entries_deleted), (14, 10));
    store.close().unwrap();

    let (store, _rx) = open(dir.path());
    check(&store);
    store.close().unwrap();
}

/// A snapshot that kept no entry: the compaction point alone says where the log continues.
#[test]
fn a_snapshot_without_entries_leaves_only_the_compaction_point() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    let installed = snapshot(5, &[("a", 5)], 5, 2);
    assert!(installed.entries.is_empty());
    // A replica with nothing stored yet, as after a node was replaced.
    store.write_group(P1, 1, Some(installed.clone()), vec![], Some(hard_state(2, 5))).unwrap();
    wait_group(&mut rx, &[(P1, 1)]);
    let recovered = store.load_group(P1).unwrap();
    assert_eq!(recovered.checkpoint.as_ref(), Some(&installed.checkpoint));
    assert_eq!(recovered.durable.compacted, Some(Compacted { index: Lsn(5), term: 1 }));
    assert!(recovered.durable.entries.is_empty());
    assert_eq!((recovered.durable.hard_state, recovered.durable.applied), (hard_state(2, 5), Lsn(5)));
    assert!(store.read_group_log(P1, Lsn(0), 10).unwrap().is_empty());
    store.write_group(P1, 1, None, entries(6, 6, 2), None).unwrap();
    wait_group(&mut rx, &[(P1, 1)]);
    store.close().unwrap();

    let (store, _rx) = open(dir.path());
    let recovered = store.load_group(P1).unwrap();
    assert_eq!(recovered.durable.entries, entries(6, 6, 2));
    assert_eq!(recovered.durable.compacted, Some(Compacted { index: Lsn(5), term: 1 }));
    assert_eq!(recovered.checkpoint, Some(installed.checkpoint));
    // Opening finds the log's end after the compaction point.
    assert!(matches!(
        store.write_group(P1, 1, None, entries(8, 8, 2), None),
        Err(StorageError::InvalidGroupWrite { .. })
    ));
    store.close().unwrap();
}

/// After a snapshot, Writes continue after its checkpoint (in the same batch or later, and after a reopen), and
/// never at or below it.
#[test]
fn writes_continue_after_a_snapshot_and_never_at_or_below_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    let refused = |result: Result<(), StorageError>| {
        assert!(matches!(result, Err(StorageError::InvalidGroupWrite { partition: P0, .. })), "{result:?}");
    };
    store.write_group(P0, 1, None, entries(1, 3, 1), None).unwrap();
    store.write_group(P0, 2, Some(snapshot(20, &[("a", 20)], 17, 2)), vec![], None).unwrap();
    // Back to back: most likely the snapshot's batch.
    store.write_group(P0, 3, None, entries(21, 22, 2), None).unwrap();
    refused(store.write_group(P0, 4, None, entries(20, 21, 3), None));
    refused(store.write_group(P0, 4, None, entries(4, 4, 3), None));
    refused(store.write_group(P0, 4, None, entries(24, 24, 3), None));
    store.write_group(P0, 4, None, entries(23, 25, 2), Some(hard_state(2, 22))).unwrap();
    // A new leader replaces a suffix after the snapshot.
    store.write_group(P0, 5, None, entries(22, 22, 3), Some(hard_state(3, 21))).unwrap();
    wait_group(&mut rx, &[(P0, 5)]);
    let mut expected = entries(18, 21, 2);
    expected.push(entry(22, 3));
    assert_eq!(store.load_group(P0).unwrap().durable.entries, expected);
    assert_eq!(store.stats().group_logs[&P0].records, 5);
    store.close().unwrap();

    let (store, mut rx) = open(dir.path());
    let recovered = store.load_group(P0).unwrap();
    assert_eq!((recovered.durable.entries, recovered.durable.hard_state), (expected, hard_state(3, 21)));
    refused(store.write_group(P0, 1, None, entries(20, 20, 3), None));
    store.write_group(P0, 1, None, entries(23, 23, 3), None).unwrap();
    wait_group(&mut rx, &[(P0, 1)]);
    assert_eq!(indexes(&store.load_group(P0).unwrap().durable.entries), (18..=23).collect::<Vec<_>>());
    store.close().unwrap();
}

/// Each malformed or misplaced snapshot is refused at once, enqueuing nothing: the store is unchanged and takes
/// the next Write as if the refused ones had not been tried.
#[test]
fn malformed_or_misplaced_snapshots_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = open(dir.path());
    store.write_group(P0, 1, None, entries(1, 8, 1), Some(hard_state(1, 8))).unwrap();
    store.checkpoint(P0, checkpoint(Lsn(6), vec![(object("a"), image(6))])).unwrap();
    let refused = |snapshot: Box<InstalledSnapshot>, entries: Vec<Entry>, because: &str| match store.write_group(
        P0,
        2,
        Some(snapshot),
        entries,
        None,
    ) {
        Err(StorageError::InvalidGroupWrite { partition: P0, ready: 2, reason }) => {
            assert!(reason.contains(because), "{reason:?} does not say {because:?}")
        }
        other => panic!("expected a refusal for {because:?}, got {other:?}"),
    };
    // Below the current checkpoint.
    refused(snapshot(5, &[], 3, 2), vec![], "below checkpoint 6");
    // Compacted beyond the checkpoint.
    refused(
        Box::new(InstalledSnapshot { compacted: Compacted { index: Lsn(11), term: 1 }, ..*snapshot(10, &[], 10, 2) }),
        vec![],
        "beyond its checkpoint",
    );
    // Entries not consecutive.
    let mut gap = snapshot(10, &[], 7, 2);
    gap.entries.remove(1);
    refused(gap, vec![], "entry 10 follows entry 8");
    // Entries not right after the compaction point.
    let mut late = snapshot(10, &[], 7, 2);
    late.entries.remove(0);
    refused(late, vec![], "from 9 after compaction point 7");
    // Entries ending before or after the checkpoint.
    let mut short = snapshot(10, &[], 7, 2);
    short.entries.pop();
    refused(short, vec![], "end at 9");
    let mut long = snapshot(10, &[], 7, 2);
    long.entries.push(entry(11, 2));
    refused(long, vec![], "end at 11");
    // No entries, though the compaction point is below the checkpoint.
    let mut empty = snapshot(10, &[], 7, 2);
    empty.entries.clear();
    refused(empty, vec![], "without the entries");
    // The Write's own entries not right after the snapshot.
    refused(snapshot(10, &[], 7, 2), entries(12, 12, 2), "gap after 10");
    refused(snapshot(10, &[], 7, 2), entries(10, 11, 2), "overwrite checkpoint 10");
    refused(snapshot(10, &[], 7, 2), entries(7, 7, 2), "overwrite checkpoint 10");
    refused(snapshot(10, &[], 7, 2), vec![entry(11, 2), entry(13, 2)], "entry 13 follows entry 11");
    // Not above the last Write.
    assert!(matches!(
        store.write_group(P0, 1, Some(snapshot(10, &[], 7, 2)), vec![], None),
        Err(StorageError::InvalidGroupWrite { ready: 1, .. })
    ));

    // Nothing was enqueued: the log, the checkpoint and the enqueuing side's positions are as before.
    store.write_group(P0, 2, None, entries(7, 9, 2), None).unwrap();
    wait_group(&mut rx, &[(P0, 2)]);
    let recovered = store.load_group(P0).unwrap();
    assert_eq!(indexes(&recovered.durable.entries), (1..=9).collect::<Vec<_>>());
    assert_eq!(recovered.checkpoint.map(|c| (c.lsn, c.objects)), Some((Lsn(6), vec![(object("a"), image(6))])));
    assert_eq!(recovered.durable.compacted, None);
    assert_eq!(store.stats().snapshots_installed, 0);
    // A snapshot at the current checkpoint is not below it.
    store.write_group(P0, 1, Some(snapshot(6, &[], 6, 2)), entries(7, 7, 3), None).unwrap();
    wait_group(&mut rx, &[(P0, 1)]);
    assert_eq!(store.load_group(P0).unwrap().durable.entries, entries(7, 7, 3));
    store.close().unwrap();
}

/// With truncation on, a snapshot replaces the compaction point (even with one below the truncated log's: its
/// leader kept more entries), and the checkpoints after it truncate from there (never from their `keep_log_from`
/// on).
#[test]
fn checkpoints_after_a_snapshot_truncate_after_its_compaction_point() {
    let dir = tempfile::tempdir().unwrap();
    let (store, mut rx) = truncating(dir.path());
    store.write_group(P0, 1, None, entries(1, 9, 1), None).unwrap();
    store.checkpoint(P0, keeping(9, None)).unwrap();
    barrier(&store, &mut rx, 1);
    assert_eq!(store.load_group(P0).unwrap().durable.compacted, Some(Compacted { index: Lsn(9), term: 1 }));
    store.write_group(P0, 2, Some(snapshot(10, &[("b", 10)], 6, 2)), entries(11, 12, 3), None).unwrap();
    wait_group(&mut rx, &[(P0, 2)]);
    let recovered = store.load_group(P0).unwrap();
    assert_eq!(recovered.durable.compacted, Some(Compacted { index: Lsn(6), term: 1 }));
    assert_eq!(indexes(&recovered.durable.entries), (7..=12).collect::<Vec<_>>());
    assert_eq!(recovered.checkpoint.unwrap().objects, vec![(object("b"), image(10))], "the earlier \"a\" is gone");

    store.checkpoint(P0, keeping(12, Some(9))).unwrap();
    store.write_group(P0, 3, None, vec![], Some(hard_state(3, 12))).unwrap();
    wait_group(&mut rx, &[(P0, 3)]);
    let recovered = store.load_group(P0).unwrap();
    assert_eq!(recovered.durable.compacted, Some(Compacted { index: Lsn(8), term: 2 }));
    assert_eq!(indexes(&recovered.durable.entries), (9..=12).collect::<Vec<_>>());
    let objects = recovered.checkpoint.unwrap().objects;
    assert_eq!(objects, vec![(object("a"), image(12)), (object("b"), image(10))]);
    // 1..=9 by the first checkpoint, 7..=8 by the last.
    assert_eq!((store.stats().entries_deleted, store.stats().group_logs[&P0].records), (11, 4));
    store.close().unwrap();

    let (store, mut rx) = truncating(dir.path());
    store.checkpoint(P0, keeping(12, None)).unwrap();
    store.write_group(P0, 1, None, entries(13, 13, 3), None).unwrap();
    wait_group(&mut rx, &[(P0, 1)]);
    let recovered = store.load_group(P0).unwrap();
    assert_eq!(recovered.durable.compacted, Some(Compacted { index: Lsn(12), term: 3 }));
    assert_eq!(recovered.durable.entries, entries(13, 13, 3));
    assert_eq!(store.stats().group_logs[&P0].records, 1);
    store.close().unwrap();
    let (store, _rx) = truncating(dir.path());
    assert_eq!(store.load_group(P0).unwrap().durable.entries, entries(13, 13, 3));
    store.close().unwrap();
}

/// With 1 MiB memtables, a group log of several MiB goes through many flushes to disk and still reads back whole,
/// before and after a reopen.
#[test]
fn a_log_larger_than_small_memtables_reads_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let small = || StorageOptions { memtable_bytes: 1 << 20, ..StorageOptions::default() };
    let (store, mut rx) = FjallStore::open(dir.path(), small()).expect("open the store");
    let big = |index: u64| Entry { index: Lsn(index), term: 1, kind: EntryKind::Normal, data: vec![index as u8; 4096] };
    for (ready, chunk) in (1..=1000u64).collect::<Vec<_>>().chunks(100).enumerate() {
        store.write_group(P0, ready as u64 + 1, None, chunk.iter().map(|i| big(*i)).collect(), None).unwrap();
    }
    wait_group(&mut rx, &[(P0, 10)]);
    let check = |store: &FjallStore| {
        let entries = store.load_group(P0).unwrap().durable.entries;
        assert_eq!(indexes(&entries), (1..=1000).collect::<Vec<_>>());
        assert!(entries.iter().all(|e| e.data == vec![e.index.0 as u8; 4096]));
    };
    check(&store);
    store.close().unwrap();
    let (store, _rx) = FjallStore::open(dir.path(), small()).expect("reopen");
    check(&store);
    store.close().unwrap();
}

/// Journal bytes in a data directory, and how many journal files.
fn journals(dir: &Path) -> (u64, usize) {
    let files: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".jnl"))
        // Allocated blocks: the engine preallocates each journal file to its full length.
        .map(|e| std::os::unix::fs::MetadataExt::blocks(&e.metadata().unwrap()) * 512)
        .collect();
    (files.iter().sum(), files.len())
}

/// Writes about 140 MB of group entries to one keyspace while another holds one small record (as the metadata and
/// checkpoint keyspaces do between their rare writes); returns the journals' size once the engine settled.
fn journals_after_heavy_writes(journal_bytes: u64) -> (u64, usize) {
    let dir = tempfile::tempdir().unwrap();
    let options = StorageOptions {
        sync: SyncMode::Periodic { interval: Duration::from_millis(50) },
        memtable_bytes: 8 << 20,
        journal_bytes,
        ..StorageOptions::default()
    };
    let (store, mut rx) = FjallStore::open(dir.path(), options).expect("open the store");
    append_range(&store, P1, 1, 1);
    // Incompressible data (xorshift), so that the journal holds what is written.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = || {
        (0..(64 << 10) / 8)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_le_bytes()
            })
            .collect::<Vec<u8>>()
    };
    let writes = 2_200u64;
    for w in 1..=writes {
        let entry = Entry { index: Lsn(w), term: 1, kind: EntryKind::Normal, data: noise() };
        store.write_group(P0, w, None, vec![entry], None).unwrap();
    }
    wait_group(&mut rx, &[(P0, writes)]);
    // Flushes and journal deletions run in the engine's background threads: give them a few seconds.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while journals(dir.path()).0 > 100 << 20 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let measured = journals(dir.path());
    store.close().unwrap();
    measured
}

/// With `journal_bytes` at 64 MiB, a rarely written keyspace no longer keeps every journal: about 140 MB written
/// leave the current journal and at most part of one more; with the engine's default of 512 MiB they all stay.
#[test]
fn journals_stay_within_their_bound_when_a_keyspace_is_rarely_written() {
    let (bounded, files) = journals_after_heavy_writes(64 << 20);
    let (unbounded, all) = journals_after_heavy_writes(512 << 20);
    eprintln!(
        "journals: {} MB in {files} files bounded, {} MB in {all} files with 512 MiB",
        bounded >> 20,
        unbounded >> 20
    );
    assert!(bounded <= 100 << 20, "{} MB of journals in {files} files", bounded >> 20);
    assert!(unbounded >= 130 << 20, "the control kept only {} MB: the test shows nothing", unbounded >> 20);
}
