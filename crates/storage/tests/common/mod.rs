//! Helpers shared by the storage tests: records and checkpoints whose content names their position, and waits
//! bounded in time.

#![allow(dead_code)] // Each test binary uses a different subset.

use causet_core::group::ReplicaId;
use causet_core::partition::{Checkpoint, DecidedImage, Outcome, PreparedImage};
use causet_core::record::{LogRecord, Lsn};
use causet_core::store::{ObjectImage, Version};
use causet_core::{CoordinatorId, DcId, ObjectId, PartitionId, Timestamp, TxId, VectorClock};
use causet_crdt::{Crdt, CrdtType, EffectCtx, Op, Stamp, TxTag};
use causet_storage::{DurableBatch, DurableReceiver, FjallStore, LogStore, StorageOptions};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a test waits for a durability report before failing (rather than hanging).
pub const WAIT: Duration = Duration::from_secs(30);

pub fn tx(seq: u64) -> TxId {
    TxId { dc: DcId(0), coordinator: CoordinatorId(1), seq }
}

/// A record whose content identifies its partition and lsn, so a test can tell records apart. Every third one is
/// a `Prepared` with a real CRDT effect, so effects go through the encoding too.
pub fn record(partition: PartitionId, lsn: Lsn) -> LogRecord {
    let commit = VectorClock::from_entries(vec![Timestamp(lsn.0), Timestamp(u64::from(partition.0))]);
    match lsn.0 % 3 {
        0 => {
            let object = ObjectId::new(format!("k{}", lsn.0).into_bytes(), b"bucket".to_vec(), CrdtType::CounterPn);
            let effect = increment(tx(lsn.0), lsn.0 as i64);
            LogRecord::Prepared {
                tx: tx(lsn.0),
                snapshot: commit,
                prepare_time: Timestamp(lsn.0),
                writes: vec![(object, effect)],
                oldest_open: lsn.0 / 2,
            }
        }
        1 => LogRecord::Committed { tx: tx(lsn.0), commit },
        _ => LogRecord::Aborted { tx: tx(lsn.0 + u64::from(partition.0) * 1_000_000) },
    }
}

pub fn increment(tx: TxId, by: i64) -> causet_crdt::Effect {
    let mut ctx = EffectCtx::new(tx.tag(), 0);
    Crdt::new(CrdtType::CounterPn).generate(&Op::Increment(by), &mut ctx).expect("counters take increments")
}

pub fn object(name: &str) -> ObjectId {
    ObjectId::new(name.as_bytes().to_vec(), b"bucket".to_vec(), CrdtType::CounterPn)
}

/// A counter image: `base` folded into the base state, and one unfolded version of `+1`.
pub fn image(base: i64) -> ObjectImage {
    let mut state = Crdt::new(CrdtType::CounterPn);
    state.apply(&increment(tx(1), base), Stamp { time: 1, tx: TxTag(1) }).expect("same type");
    let version = Version {
        commit: VectorClock::from_entries(vec![Timestamp(7)]),
        stamp: Stamp { time: 2, tx: TxTag(2) },
        effect: increment(tx(2), 1),
    };
    ObjectImage { base: state, versions: vec![version] }
}

pub fn checkpoint(lsn: Lsn, objects: Vec<(ObjectId, ObjectImage)>) -> Checkpoint {
    Checkpoint {
        lsn,
        clock: Timestamp(lsn.0 * 10),
        frontier: VectorClock::from_entries(vec![Timestamp(lsn.0)]),
        objects,
        prepared: vec![PreparedImage {
            tx: tx(lsn.0),
            snapshot: VectorClock::from_entries(vec![Timestamp(1)]),
            prepare_time: Timestamp(lsn.0),
            writes: vec![(object("p"), increment(tx(lsn.0), 3))],
            commit: None,
            fenced: true,
            lsn,
        }],
        recent_commits: vec![(tx(lsn.0), VectorClock::from_entries(vec![Timestamp(lsn.0)]))],
        keep_log_from: None,
        committed_through: Timestamp(lsn.0 * 10),
        clock_bound: Timestamp(lsn.0 * 20),
        fenced: vec![tx(lsn.0 + 1)],
        peer_acked: Vec::new(),
        pvc: None,
        remote_pending: Vec::new(),
        remote_applied: Vec::new(),
        decided: vec![DecidedImage {
            coordinator: CoordinatorId(1),
            oldest_open: lsn.0,
            outcomes: vec![(lsn.0, Outcome::Committed(Timestamp(lsn.0 * 10))), (lsn.0 + 1, Outcome::Settled)],
        }],
        membership: Some(causet_core::group::Membership {
            voters: vec![ReplicaId(1), ReplicaId(3), ReplicaId(65538)],
            learners: vec![ReplicaId(lsn.0 + 4)],
            outgoing: vec![ReplicaId(1), ReplicaId(2), ReplicaId(3)],
            learners_next: Vec::new(),
        }),
    }
}

pub fn open(dir: &Path) -> (FjallStore, DurableReceiver) {
    FjallStore::open(dir, StorageOptions::default()).expect("open the store")
}

/// Appends `from..=to` to a partition.
pub fn append_range(store: &impl LogStore, partition: PartitionId, from: u64, to: u64) {
    for lsn in from..=to {
        store.append(partition, Lsn(lsn), record(partition, Lsn(lsn))).expect("append");
    }
}

/// Collects reports until every partition in `until` is reported durable up to its lsn; returns every record
/// report (group Write reports are left out).
pub fn wait_durable(rx: &mut DurableReceiver, until: &[(PartitionId, Lsn)]) -> Vec<(PartitionId, Lsn)> {
    let mut durable: BTreeMap<PartitionId, Lsn> = BTreeMap::new();
    let reports = wait_reports(rx, |batch| {
        for (p, d) in batch {
            if let Some(lsn) = d.log() {
                durable.insert(*p, lsn);
            }
        }
        until.iter().all(|(p, lsn)| durable.get(p).is_some_and(|d| d >= lsn))
    });
    reports.into_iter().filter_map(|batch| batch.1.log().map(|lsn| (batch.0, lsn))).collect()
}

/// Collects report batches until `done` (which sees each batch) is true; returns every report, in order.
pub fn wait_reports(rx: &mut DurableReceiver, mut done: impl FnMut(&DurableBatch) -> bool) -> DurableBatch {
    let deadline = Instant::now() + WAIT;
    let mut reports = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "no awaited durability report within {WAIT:?}; got {reports:?}");
        match rx.try_recv().expect("the store is running") {
            Some(batch) => {
                let finished = done(&batch);
                reports.extend(batch);
                if finished {
                    return reports;
                }
            }
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

/// Waits until every write enqueued before it has been processed by the writer, by appending a record to a
/// partition of its own and waiting for its report.
pub fn barrier(store: &impl LogStore, rx: &mut DurableReceiver, lsn: u64) {
    let partition = PartitionId(u32::MAX);
    store.append(partition, Lsn(lsn), record(partition, Lsn(lsn))).expect("append");
    wait_durable(rx, &[(partition, Lsn(lsn))]);
}

pub fn lsns(records: &[(Lsn, LogRecord)]) -> Vec<u64> {
    records.iter().map(|(lsn, _)| lsn.0).collect()
}
