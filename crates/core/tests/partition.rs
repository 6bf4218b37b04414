//! Unit tests of the partition state machine, driven message by message.

use causet_core::message::{RemoteError, TxKnowledge};
use causet_core::partition::{Partition, PartitionOutput};
use causet_core::record::{LogRecord, Lsn};
use causet_core::{Address, ClockKind, Config, CoordinatorId, DcId, Message, ObjectId, PartitionId, Timestamp, TxId};
use causet_core::{Envelope, VectorClock};
use causet_crdt::{Crdt, CrdtType, Effect, EffectCtx, Op, Value};

const COORD: Address = Address::Coordinator(CoordinatorId(0));

fn config(clock: ClockKind) -> Config {
    let mut c = Config::new(1, DcId(0), 1);
    c.clock = clock;
    c
}

fn tx(seq: u64) -> TxId {
    TxId { dc: DcId(0), coordinator: CoordinatorId(0), seq }
}

fn vc(micros: u64) -> VectorClock {
    VectorClock::from_entries(vec![Timestamp::from_micros(micros)])
}

fn set(key: &str) -> ObjectId {
    ObjectId::new(key, "b", CrdtType::SetAw)
}

fn add(t: TxId, elem: &str) -> Effect {
    let mut ctx = EffectCtx::new(t.tag(), 0);
    Crdt::new(CrdtType::SetAw).generate(&Op::Add(vec![elem.as_bytes().to_vec()]), &mut ctx).expect("add fits a set")
}

/// Drains outputs: messages sent, and records persisted.
fn drain(p: &mut Partition) -> (Vec<Envelope>, Vec<(Lsn, LogRecord)>) {
    let (mut sent, mut persisted) = (Vec::new(), Vec::new());
    while let Some(out) = p.poll_output() {
        match out {
            PartitionOutput::Send(e) => sent.push(e),
            PartitionOutput::Persist { lsn, record } => persisted.push((lsn, record)),
            PartitionOutput::ReadLog { .. } => panic!("these tests keep replication within its window"),
        }
    }
    (sent, persisted)
}

/// A new partition at 1 ms whose first clock bound (a hybrid clock logs one at once) is durable.
fn fresh(id: PartitionId, config: Config) -> Partition {
    bound_durable(Partition::new(id, config, 1_000), 1_000)
}

/// A partition just built or recovered, after the clock bound it logs at once (a hybrid clock) is durable.
fn bound_durable(mut p: Partition, now: u64) -> Partition {
    let (sent, persisted) = drain(&mut p);
    assert!(sent.is_empty(), "a new or recovered partition sends nothing before its bound: {sent:?}");
    if let Some((lsn, _)) = persisted.last() {
        assert!(persisted.iter().all(|(_, r)| matches!(r, LogRecord::ClockBound { .. })), "{persisted:?}");
        p.handle_persisted(now, *lsn);
    }
    p
}

/// Drains outputs, making every record durable at `now` as soon as it is logged; returns the messages sent.
fn drain_durable(p: &mut Partition, now: u64) -> Vec<Envelope> {
    let mut all = Vec::new();
    loop {
        let (sent, persisted) = drain(p);
        all.extend(sent);
        let Some((lsn, _)) = persisted.last() else { return all };
        p.handle_persisted(now, *lsn);
    }
}

fn read(p: &mut Partition, now: u64, snapshot: VectorClock, objects: Vec<ObjectId>) {
    p.handle_message(now, COORD, Message::Read { tx: tx(99), request: 1, snapshot, objects, nearest: false });
}

fn read_reply(sent: &[Envelope]) -> Option<Result<Vec<Crdt>, RemoteError>> {
    sent.iter().find_map(|e| match &e.msg {
        Message::ReadReply { result, .. } => Some(result.clone()),
        _ => None,
    })
}

/// Prepares and makes durable; returns the prepare time.
fn prepare(p: &mut Partition, now: u64, t: TxId, snapshot: VectorClock, writes: Vec<(ObjectId, Effect)>) -> Timestamp {
    p.handle_message(now, COORD, Message::Prepare { tx: t, snapshot, writes, oldest_open: 0 });
    let (sent, persisted) = drain(p);
    assert!(sent.iter().all(|e| !matches!(e.msg, Message::Prepared { .. })), "prepared before durable");
    let lsn = persisted.last().expect("a prepare record").0;
    p.handle_persisted(now, lsn);
    let (sent, _) = drain(p);
    sent.iter()
        .find_map(|e| match e.msg {
            Message::Prepared { prepare_time, .. } => Some(prepare_time),
            _ => None,
        })
        .expect("prepared once durable")
}

fn commit(p: &mut Partition, now: u64, t: TxId, commit: VectorClock) -> Vec<Envelope> {
    p.handle_message(now, COORD, Message::Commit { tx: t, commit });
    let (sent, persisted) = drain(p);
    assert!(sent.iter().all(|e| !matches!(e.msg, Message::CommitAck { .. })), "acknowledged before durable");
    p.handle_persisted(now, persisted.last().expect("a commit record").0);
    drain(p).0
}

#[test]
fn cure_alg2_a_read_waits_for_an_earlier_prepared_transaction_then_sees_it() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    let pt = prepare(&mut p, 1_000, tx(1), vc(900), vec![(set("x"), add(tx(1), "a"))]);
    // A snapshot at the prepare time may contain the transaction: the read must wait.
    read(&mut p, 1_100, VectorClock::from_entries(vec![pt]), vec![set("x")]);
    assert_eq!(read_reply(&drain(&mut p).0), None, "served while an earlier prepare could still commit below");
    assert_eq!(p.waiting_count(), 1);
    let sent = commit(&mut p, 1_200, tx(1), VectorClock::from_entries(vec![pt]));
    let states = read_reply(&sent).expect("served once committed").expect("ok");
    assert_eq!(states[0].value(), Value::Set(vec![b"a".to_vec()]));
}

#[test]
fn cure_alg2_pvc_stays_below_the_smallest_prepare_time() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    let pt = prepare(&mut p, 1_000, tx(1), vc(900), vec![(set("x"), add(tx(1), "a"))]);
    p.handle_timeout(50_000);
    assert!(p.pvc().get(DcId(0)) < pt, "pvc {} passed a prepared transaction at {pt}", p.pvc());
    let ct = Timestamp::from_micros(50_001);
    commit(&mut p, 50_001, tx(1), VectorClock::from_entries(vec![ct.max(pt)]));
    p.handle_timeout(60_000);
    assert!(p.pvc().get(DcId(0)) >= Timestamp::from_micros(60_000));
}

#[test]
fn physical_clock_read_ahead_of_the_clock_waits_until_the_clock_passes_it() {
    let mut p = Partition::new(PartitionId(0), config(ClockKind::Physical), 1_000);
    read(&mut p, 1_000, vc(5_000), vec![set("x")]);
    assert_eq!(read_reply(&drain(&mut p).0), None);
    p.handle_timeout(1_000); // the pvc report due at start
    assert_eq!(read_reply(&drain(&mut p).0), None);
    let wake = p.poll_timeout().expect("a deadline");
    assert!(wake > 1_000 && wake <= 5_001, "wakes at {wake}, when the clock passes the snapshot");
    p.handle_timeout(5_001);
    assert!(read_reply(&drain(&mut p).0).expect("served").is_ok());
}

#[test]
fn hybrid_clock_read_ahead_of_the_clock_is_served_at_once_by_advancing_the_clock() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    read(&mut p, 1_000, vc(500_000), vec![set("x")]);
    // Served at once, but the reply exposes the clock at 500 ms, past the durable clock bound: it leaves once a new
    // bound is durable (one record, no waiting for the clock).
    let (sent, persisted) = drain(&mut p);
    assert_eq!(read_reply(&sent), None);
    assert!(matches!(persisted[..], [(_, LogRecord::ClockBound { until })] if until > Timestamp::from_micros(500_000)));
    p.handle_persisted(1_000, persisted[0].0);
    assert!(read_reply(&drain(&mut p).0).expect("served once the bound is durable").is_ok());
    // Every later prepare lands above the snapshot it served.
    let pt = prepare(&mut p, 1_001, tx(1), vc(10), vec![(set("x"), add(tx(1), "a"))]);
    assert!(pt > Timestamp::from_micros(500_000));
}

#[test]
fn a_snapshot_far_ahead_of_the_clock_is_refused_as_invalid() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    read(&mut p, 1_000, vc(1_000 + 3_600_000_000), vec![set("x")]);
    assert!(matches!(read_reply(&drain(&mut p).0), Some(Err(RemoteError::InvalidSnapshot(_)))));
    read(&mut p, 1_000, VectorClock::zero(2), vec![set("x")]);
    assert!(matches!(read_reply(&drain(&mut p).0), Some(Err(RemoteError::InvalidSnapshot(_)))));
}

#[test]
fn a_commit_becomes_visible_only_once_its_record_is_durable() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    let pt = prepare(&mut p, 1_000, tx(1), vc(900), vec![(set("x"), add(tx(1), "a"))]);
    p.handle_message(1_100, COORD, Message::Commit { tx: tx(1), commit: VectorClock::from_entries(vec![pt]) });
    let (_, persisted) = drain(&mut p);
    read(&mut p, 1_100, VectorClock::from_entries(vec![pt]), vec![set("x")]);
    assert_eq!(read_reply(&drain(&mut p).0), None, "a commit not yet durable must not be read");
    p.handle_persisted(1_200, persisted[0].0);
    let sent = drain(&mut p).0;
    assert!(sent.iter().any(|e| matches!(e.msg, Message::CommitAck { .. })));
    assert_eq!(read_reply(&sent).expect("served").expect("ok")[0].value(), Value::Set(vec![b"a".to_vec()]));
}

#[test]
fn resent_decisions_are_acknowledged_again_and_change_nothing() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    let pt = prepare(&mut p, 1_000, tx(1), vc(900), vec![(set("x"), add(tx(1), "a"))]);
    commit(&mut p, 1_100, tx(1), VectorClock::from_entries(vec![pt]));
    p.handle_message(1_200, COORD, Message::Commit { tx: tx(1), commit: VectorClock::from_entries(vec![pt]) });
    let (sent, persisted) = drain(&mut p);
    assert!(persisted.is_empty());
    assert!(matches!(sent[0].msg, Message::CommitAck { .. }));
    p.handle_message(1_300, COORD, Message::Abort { tx: tx(7) });
    assert!(matches!(drain(&mut p).0[0].msg, Message::AbortAck { .. }));
}

#[test]
fn recovery_restores_committed_effects_and_keeps_undecided_prepares_blocking() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    let mut log = Vec::new();
    p.handle_message(
        1_000,
        COORD,
        Message::Prepare { tx: tx(1), snapshot: vc(900), writes: vec![(set("x"), add(tx(1), "a"))], oldest_open: 0 },
    );
    log.extend(drain(&mut p).1);
    let pt1 = match &log[0].1 {
        LogRecord::Prepared { prepare_time, .. } => *prepare_time,
        other => panic!("{other:?}"),
    };
    p.handle_persisted(1_000, log[0].0);
    drain(&mut p);
    p.handle_message(1_100, COORD, Message::Commit { tx: tx(1), commit: VectorClock::from_entries(vec![pt1]) });
    log.extend(drain(&mut p).1);
    p.handle_message(
        1_200,
        COORD,
        Message::Prepare { tx: tx(2), snapshot: vc(1_150), writes: vec![(set("x"), add(tx(2), "b"))], oldest_open: 0 },
    );
    log.extend(drain(&mut p).1);
    // Crash here: all three records were synced; tx 2 has no decision.
    let mut r = bound_durable(Partition::recover(PartitionId(0), config(ClockKind::Hybrid), 2_000, log), 2_000);
    assert_eq!(r.prepared_count(), 1);
    read(&mut r, 2_000, VectorClock::from_entries(vec![pt1]), vec![set("x")]);
    let states = read_reply(&drain(&mut r).0).expect("tx 1 is below the undecided prepare").expect("ok");
    assert_eq!(states[0].value(), Value::Set(vec![b"a".to_vec()]));
    // The undecided transaction blocks later snapshots until its coordinator answers; the partition asks.
    read(&mut r, 2_000, vc(2_000), vec![set("x")]);
    assert_eq!(read_reply(&drain(&mut r).0), None);
    let mut ask = 2_000;
    let mut asked = false;
    while !asked && ask < 60_000_000 {
        ask = r.poll_timeout().expect("a deadline");
        r.handle_timeout(ask);
        asked =
            drain_durable(&mut r, ask).iter().any(|e| e.msg == Message::QueryOutcome { tx: tx(2) } && e.to == COORD);
    }
    assert!(asked, "the partition never asked the coordinator about the undecided transaction");
    r.handle_message(ask, COORD, Message::Abort { tx: tx(2) });
    drain(&mut r);
    assert_eq!(r.prepared_count(), 0);
    read(&mut r, ask, vc(2_000), vec![set("x")]);
    assert!(read_reply(&drain(&mut r).0).expect("served after the abort").is_ok());
}

#[test]
fn recovered_hybrid_clock_never_reissues_a_timestamp_it_may_have_exposed() {
    // The clock was pushed ahead by a snapshot, and pvc exposed it.
    let mut p = Partition::new(PartitionId(0), config(ClockKind::Hybrid), 1_000);
    let mut log = drain(&mut p).1;
    read(&mut p, 1_000, vc(900_000), vec![set("x")]);
    let (sent, persisted) = drain(&mut p);
    assert_eq!(read_reply(&sent), None, "the reply waits for a clock bound above 900 ms");
    log.extend(persisted);
    p.handle_persisted(1_000, log.last().expect("a bound").0);
    assert!(read_reply(&drain(&mut p).0).expect("served").is_ok());
    let exposed = p.pvc().get(DcId(0));
    assert!(exposed >= Timestamp::from_micros(900_000));
    // A crash; the restart starts above the durable bound, and no further past it than the bound's distance
    // (before: a second past physical time, whatever had been exposed).
    let mut r = bound_durable(Partition::recover(PartitionId(0), config(ClockKind::Hybrid), 1_500, log), 1_500);
    let pt = prepare(&mut r, 1_500, tx(3), vc(1_000), vec![(set("x"), add(tx(3), "c"))]);
    assert!(pt > exposed, "prepare time {pt} at or below {exposed}, exposed before the crash");
    let distance = config(ClockKind::Hybrid).clock_bound_us;
    assert!(pt.micros() <= exposed.micros() + distance + 1, "prepare time {pt}, exposed {exposed}");
}

#[test]
fn antidote_68_read_cost_stays_bounded_as_writes_to_a_key_grow() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    let key = ObjectId::new("c", "b", CrdtType::CounterPn);
    let mut now = 1_000;
    let mut applied_per_read = Vec::new();
    for i in 0..2_000u64 {
        now += 10;
        let t = tx(i);
        let mut ctx = EffectCtx::new(t.tag(), 0);
        let effect = Crdt::new(key.ty).generate(&Op::Increment(1), &mut ctx).expect("fits");
        let pt = prepare(&mut p, now, t, vc(now - 5), vec![(key.clone(), effect)]);
        commit(&mut p, now, t, VectorClock::from_entries(vec![pt]));
        // The stabilizer lets the partition fold what no transaction can read below.
        p.handle_message(
            now,
            Address::Stabilizer,
            Message::Stable { stable: vc(now - 20), gc: vc(now - 20), away: None },
        );
        if i % 100 == 99 {
            let before = p.store_stats().effects_applied;
            read(&mut p, now, VectorClock::from_entries(vec![pt]), vec![key.clone()]);
            let reply = read_reply(&drain(&mut p).0).expect("served").expect("ok");
            assert_eq!(reply[0].value(), Value::Counter(i as i64 + 1));
            applied_per_read.push(p.store_stats().effects_applied - before);
        }
    }
    let worst = *applied_per_read.iter().max().expect("reads happened");
    assert!(worst <= 5, "a read applied {worst} effects after 2,000 writes: {applied_per_read:?}");
    assert!(p.store_size().1 <= 5, "unfolded versions kept: {}", p.store_size().1);
}

/// However many objects hold versions above the frontier (a lease cache holds it a lease back), each stable
/// snapshot folds at once what it passes: a collection visits only the objects with something to fold.
#[test]
fn many_unfolded_objects_are_folded_as_the_frontier_passes_them() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    let objects = 3_000u64;
    let mut now = 1_000;
    let mut commits = Vec::new();
    for i in 0..objects {
        now += 10;
        let key = ObjectId::new(format!("c{i}"), "b", CrdtType::CounterPn);
        let mut ctx = EffectCtx::new(tx(i).tag(), 0);
        let effect = Crdt::new(key.ty).generate(&Op::Increment(1), &mut ctx).expect("fits");
        let pt = prepare(&mut p, now, tx(i), vc(now - 5), vec![(key, effect)]);
        commit(&mut p, now, tx(i), VectorClock::from_entries(vec![pt]));
        commits.push(pt);
    }
    assert_eq!(p.store_size().1, objects as usize);
    // Frontiers rising through the commits, a thousand at a time: each folds exactly the versions it passed.
    for passed in [1_000usize, 2_000, 3_000] {
        let at = VectorClock::from_entries(vec![commits[passed - 1]]);
        now += 1;
        p.handle_message(now, Address::Stabilizer, Message::Stable { stable: at.clone(), gc: at, away: None });
        assert_eq!(p.store_size().1, objects as usize - passed, "a frontier past {passed} commits");
    }
}

#[test]
fn bounded_counter_double_spending_by_concurrent_transactions_is_refused_at_prepare() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    let key = ObjectId::new("bc", "b", CrdtType::CounterB);
    let mut ctx = EffectCtx::new(tx(1).tag(), 0);
    let inc = Crdt::new(key.ty).generate(&Op::Increment(5), &mut ctx).expect("increment");
    let pt = prepare(&mut p, 1_000, tx(1), vc(900), vec![(key.clone(), inc.clone())]);
    commit(&mut p, 1_000, tx(1), VectorClock::from_entries(vec![pt]));
    // Two transactions both saw 5 rights and each decrements 4.
    let mut state = Crdt::new(key.ty);
    state.apply(&inc, causet_crdt::Stamp { time: 1, tx: tx(1).tag() }).expect("apply");
    let dec = |t: TxId| state.generate(&Op::Increment(-4), &mut EffectCtx::new(t.tag(), 0)).expect("rights");
    let snapshot = VectorClock::from_entries(vec![pt]);
    prepare(&mut p, 1_100, tx(2), snapshot.clone(), vec![(key.clone(), dec(tx(2)))]);
    p.handle_message(
        1_200,
        COORD,
        Message::Prepare { tx: tx(3), snapshot, writes: vec![(key.clone(), dec(tx(3)))], oldest_open: 0 },
    );
    let sent = drain(&mut p).0;
    assert!(
        sent.iter().any(|e| matches!(&e.msg, Message::PrepareRefused { reason: RemoteError::Crdt(_), .. })),
        "the second decrement must be refused: {sent:?}"
    );
}

#[test]
fn certification_refuses_a_concurrent_update_to_the_same_object_when_enabled() {
    let mut c = config(ClockKind::Hybrid);
    c.certify_writes = true;
    let mut p = fresh(PartitionId(0), c);
    let pt = prepare(&mut p, 1_000, tx(1), vc(900), vec![(set("x"), add(tx(1), "a"))]);
    commit(&mut p, 1_000, tx(1), VectorClock::from_entries(vec![pt]));
    // tx 2's snapshot (900) does not include tx 1's commit.
    p.handle_message(
        1_100,
        COORD,
        Message::Prepare { tx: tx(2), snapshot: vc(900), writes: vec![(set("x"), add(tx(2), "b"))], oldest_open: 0 },
    );
    let sent = drain(&mut p).0;
    assert!(sent.iter().any(|e| matches!(&e.msg, Message::PrepareRefused { reason: RemoteError::Conflict, .. })));
    // A snapshot that includes tx 1 certifies.
    let pt3 = prepare(&mut p, 1_200, tx(3), VectorClock::from_entries(vec![pt]), vec![(set("x"), add(tx(3), "c"))]);
    assert!(pt3 > pt);
}

#[test]
fn restoring_a_checkpoint_plus_the_log_tail_rebuilds_the_same_partition() {
    use causet_core::partition::Checkpoint;
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    let mut log = Vec::new();
    let step = |p: &mut Partition, log: &mut Vec<(Lsn, LogRecord)>, now: u64, t: TxId, elem: &str| {
        p.handle_message(
            now,
            COORD,
            Message::Prepare { tx: t, snapshot: vc(now - 1), writes: vec![(set("x"), add(t, elem))], oldest_open: 0 },
        );
        let (_, records) = drain(p);
        let pt = match &records[0].1 {
            LogRecord::Prepared { prepare_time, .. } => *prepare_time,
            other => panic!("{other:?}"),
        };
        log.extend(records);
        p.handle_persisted(now, log.last().expect("records").0);
        drain(p);
        p.handle_message(now, COORD, Message::Commit { tx: t, commit: VectorClock::from_entries(vec![pt]) });
        log.extend(drain(p).1);
        p.handle_persisted(now, log.last().expect("records").0);
        drain(p);
        pt
    };
    step(&mut p, &mut log, 2_000, tx(1), "a");
    let first: Checkpoint = p.take_checkpoint();
    let pt2 = step(&mut p, &mut log, 3_000, tx(2), "b");
    // A second, incremental checkpoint holds only what changed; here the node crashes before writing it, and the
    // prepare of tx 3 is logged but undecided.
    p.handle_message(
        4_000,
        COORD,
        Message::Prepare { tx: tx(3), snapshot: vc(3_999), writes: vec![(set("y"), add(tx(3), "c"))], oldest_open: 0 },
    );
    log.extend(drain(&mut p).1);
    let tail: Vec<_> = log.iter().filter(|(lsn, _)| *lsn > first.lsn).cloned().collect();
    let mut r =
        bound_durable(Partition::restore(PartitionId(0), config(ClockKind::Hybrid), 5_000, Some(first), tail), 5_000);
    assert_eq!(r.undecided(), vec![tx(3)]);
    assert!(r.recent_commit(tx(2)).is_some() && r.recent_commit(tx(1)).is_some());
    read(&mut r, 5_000, VectorClock::from_entries(vec![pt2]), vec![set("x"), set("y")]);
    let states = read_reply(&drain(&mut r).0).expect("served").expect("ok");
    assert_eq!(states[0].value(), Value::Set(vec![b"a".to_vec(), b"b".to_vec()]));
    assert_eq!(states[1].value(), Value::Set(vec![]));
}

#[test]
fn a_prepare_and_commit_is_one_durable_record_that_recovery_replays() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    p.handle_message(
        1_000,
        COORD,
        Message::PrepareAndCommit {
            tx: tx(1),
            snapshot: vc(900),
            writes: vec![(set("x"), add(tx(1), "a"))],
            oldest_open: 0,
        },
    );
    let (sent, records) = drain(&mut p);
    assert!(sent.iter().all(|e| !matches!(e.msg, Message::Committed { .. })), "answered before durable");
    assert_eq!(records.len(), 1);
    let commit = match &records[0].1 {
        LogRecord::CommittedAlone { commit, .. } => commit.clone(),
        other => panic!("{other:?}"),
    };
    read(&mut p, 1_000, commit.clone(), vec![set("x")]);
    assert_eq!(read_reply(&drain(&mut p).0), None, "visible before durable");
    p.handle_persisted(1_000, records[0].0);
    let sent = drain(&mut p).0;
    assert!(sent.iter().any(|e| e.msg == Message::Committed { tx: tx(1), commit: commit.clone() }));
    let mut r = bound_durable(Partition::recover(PartitionId(0), config(ClockKind::Hybrid), 2_000, records), 2_000);
    read(&mut r, 2_000, commit, vec![set("x")]);
    assert_eq!(read_reply(&drain(&mut r).0).expect("served").expect("ok")[0].value(), Value::Set(vec![b"a".to_vec()]));
}

/// A DC of `n` partitions whose messages between partitions are delivered at once and whose records are durable
/// at once; messages to coordinators are collected.
struct Dc {
    parts: Vec<Partition>,
    to_coordinators: Vec<Envelope>,
}

impl Dc {
    fn new(n: u32) -> Self {
        let mut c = config(ClockKind::Hybrid);
        c.partitions = n;
        Dc { parts: (0..n).map(|p| fresh(PartitionId(p), c.clone())).collect(), to_coordinators: vec![] }
    }

    /// Delivers `msg` to partition `to` and then every message between partitions until none is left.
    fn deliver(&mut self, from: Address, to: u32, msg: Message) {
        let mut queue =
            std::collections::VecDeque::from([Envelope { from, to: Address::Partition(PartitionId(to)), msg }]);
        while let Some(e) = queue.pop_front() {
            let Address::Partition(PartitionId(p)) = e.to else {
                self.to_coordinators.push(e);
                continue;
            };
            let part = &mut self.parts[p as usize];
            part.handle_message(1_000, e.from, e.msg);
            loop {
                let (sent, persisted) = drain(part);
                if let Some((lsn, _)) = persisted.last() {
                    part.handle_persisted(1_000, *lsn);
                }
                if sent.is_empty() && persisted.is_empty() {
                    break;
                }
                queue.extend(sent);
            }
        }
    }

    fn value(&mut self, p: u32, object: &str) -> Value {
        let part = &mut self.parts[p as usize];
        let snapshot = part.pvc().clone();
        read(part, 1_000, snapshot, vec![set(object)]);
        read_reply(&drain(part).0).expect("served").expect("ok")[0].value()
    }
}

fn elems(v: Value) -> Vec<Vec<u8>> {
    match v {
        Value::Set(e) => e,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_transaction_whose_coordinator_is_gone_commits_if_any_partition_committed_it() {
    let mut dc = Dc::new(3);
    // tx 1 prepared on p0 and p1; its commit reached p0 only before the coordinator died. p2 never saw it.
    let t0 = prepare(&mut dc.parts[0], 1_000, tx(1), vc(900), vec![(set("x"), add(tx(1), "a"))]);
    let t1 = prepare(&mut dc.parts[1], 1_000, tx(1), vc(900), vec![(set("y"), add(tx(1), "b"))]);
    let c = VectorClock::from_entries(vec![t0.max(t1)]);
    commit(&mut dc.parts[0], 1_000, tx(1), c.clone());
    assert_eq!(dc.parts[1].undecided(), vec![tx(1)]);
    dc.deliver(COORD, 1, Message::CoordinatorGone { tx: tx(1) });
    assert!(dc.parts[1].undecided().is_empty(), "the termination settled it");
    assert!(dc.parts[1].pvc().get(DcId(0)) >= c.get(DcId(0)), "p1's pvc moved past the commit");
    assert_eq!(elems(dc.value(1, "y")), vec![b"b".to_vec()], "committed at p1 too, at p0's commit vector");
}

#[test]
fn a_transaction_whose_coordinator_is_gone_aborts_when_no_partition_committed_it_and_stays_aborted() {
    let mut dc = Dc::new(3);
    // tx 2 prepared on p0 and p1, no decision anywhere; p2 never saw it (its prepare is still "in flight").
    prepare(&mut dc.parts[0], 1_000, tx(2), vc(900), vec![(set("x"), add(tx(2), "a"))]);
    let t1 = prepare(&mut dc.parts[1], 1_000, tx(2), vc(900), vec![(set("y"), add(tx(2), "b"))]);
    dc.deliver(COORD, 0, Message::CoordinatorGone { tx: tx(2) });
    assert!(dc.parts[0].undecided().is_empty() && dc.parts[1].undecided().is_empty(), "aborted at both");
    // The dead coordinator's messages still in flight change nothing: its late prepare at p2 is refused, its
    // commit at p1 is ignored (p1 no longer holds the transaction: it acknowledges without applying).
    let snapshot = vc(900);
    dc.deliver(
        COORD,
        2,
        Message::Prepare { tx: tx(2), snapshot, writes: vec![(set("z"), add(tx(2), "c"))], oldest_open: 0 },
    );
    assert!(dc.to_coordinators.iter().any(|e| matches!(
        &e.msg,
        Message::PrepareRefused { tx: t, reason: RemoteError::CoordinatorGone } if *t == tx(2)
    )));
    assert!(dc.parts[2].undecided().is_empty(), "p2 did not prepare it");
    dc.deliver(COORD, 1, Message::Commit { tx: tx(2), commit: VectorClock::from_entries(vec![t1]) });
    assert!(elems(dc.value(1, "y")).is_empty(), "the aborted transaction never became visible");
    assert!(elems(dc.value(0, "x")).is_empty());
}

#[test]
fn a_partition_fenced_by_a_termination_ignores_the_dead_coordinators_late_commit() {
    let mut dc = Dc::new(2);
    let t0 = prepare(&mut dc.parts[0], 1_000, tx(3), vc(900), vec![(set("x"), add(tx(3), "a"))]);
    prepare(&mut dc.parts[1], 1_000, tx(3), vc(900), vec![(set("y"), add(tx(3), "b"))]);
    // p0 answers p1's termination first (Prepared, fenced), once its promise is durable ...
    dc.parts[0].handle_message(1_000, Address::Partition(PartitionId(1)), Message::TxStatus { tx: tx(3) });
    let (sent, persisted) = drain(&mut dc.parts[0]);
    assert!(sent.is_empty(), "answered before the promise is durable: {sent:?}");
    assert!(matches!(persisted[..], [(_, LogRecord::Fenced { tx: t })] if t == tx(3)));
    dc.parts[0].handle_persisted(1_000, persisted[0].0);
    let (sent, _) = drain(&mut dc.parts[0]);
    assert!(sent.iter().any(|e| matches!(&e.msg, Message::TxStatusReply { status: TxKnowledge::Prepared, .. })));
    // ... then the dead coordinator's commit arrives at p0: ignored, so p0 cannot commit what p1 will abort.
    dc.deliver(COORD, 0, Message::Commit { tx: tx(3), commit: VectorClock::from_entries(vec![t0]) });
    assert_eq!(dc.parts[0].undecided(), vec![tx(3)], "the fenced partition waits for the termination");
    dc.deliver(COORD, 1, Message::CoordinatorGone { tx: tx(3) });
    assert!(dc.parts[0].undecided().is_empty() && dc.parts[1].undecided().is_empty());
    assert!(elems(dc.value(0, "x")).is_empty() && elems(dc.value(1, "y")).is_empty(), "aborted everywhere");
}

#[test]
fn a_termination_waits_for_every_partition_and_asks_again() {
    let mut dc = Dc::new(2);
    prepare(&mut dc.parts[0], 1_000, tx(4), vc(900), vec![(set("x"), add(tx(4), "a"))]);
    // p1 does not answer (its node is down): the question is lost; p0 keeps the transaction prepared.
    dc.parts[0].handle_message(1_000, COORD, Message::CoordinatorGone { tx: tx(4) });
    let (_, persisted) = drain(&mut dc.parts[0]);
    dc.parts[0].handle_persisted(1_000, persisted.last().expect("the asker's own promise").0);
    let (sent, _) = drain(&mut dc.parts[0]);
    assert!(sent
        .iter()
        .any(|e| e.to == Address::Partition(PartitionId(1)) && e.msg == Message::TxStatus { tx: tx(4) }));
    assert_eq!(dc.parts[0].undecided(), vec![tx(4)], "no decision without every partition's answer");
    // Later, its timer asks again; now p1 answers (Absent) and p0 aborts.
    let retry = Config::new(1, DcId(0), 2).retry_interval_us;
    dc.parts[0].handle_timeout(1_000 + retry);
    let sent = drain_durable(&mut dc.parts[0], 1_000 + retry);
    let ask = sent.into_iter().find(|e| e.msg == Message::TxStatus { tx: tx(4) }).expect("asked again");
    dc.deliver(ask.from, 1, ask.msg);
    assert!(dc.parts[0].undecided().is_empty(), "aborted once p1 answered");
}

#[test]
fn a_termination_promise_survives_the_crash_of_the_partition_that_made_it() {
    // tx 5 prepared on p0 and p1; the coordinator decided commit and died, its commits held up in the network.
    let mut dc = Dc::new(2);
    let mut log0 = Vec::new();
    dc.parts[0].handle_message(
        1_000,
        COORD,
        Message::Prepare { tx: tx(5), snapshot: vc(900), writes: vec![(set("x"), add(tx(5), "a"))], oldest_open: 0 },
    );
    let (_, persisted) = drain(&mut dc.parts[0]);
    log0.extend(persisted);
    dc.parts[0].handle_persisted(1_000, log0.last().expect("the prepare").0);
    let t0 = match &log0[0].1 {
        LogRecord::Prepared { prepare_time, .. } => *prepare_time,
        other => panic!("{other:?}"),
    };
    drain(&mut dc.parts[0]);
    let t1 = prepare(&mut dc.parts[1], 1_000, tx(5), vc(900), vec![(set("y"), add(tx(5), "b"))]);
    let late_commit = Message::Commit { tx: tx(5), commit: VectorClock::from_entries(vec![t0.max(t1)]) };
    // p0 answers p1's termination: Prepared, a promise to ignore the dead coordinator, logged before the answer.
    dc.parts[0].handle_message(1_000, Address::Partition(PartitionId(1)), Message::TxStatus { tx: tx(5) });
    let (_, persisted) = drain(&mut dc.parts[0]);
    log0.extend(persisted);
    dc.parts[0].handle_persisted(1_000, log0.last().expect("the promise").0);
    let (sent, _) = drain(&mut dc.parts[0]);
    let answer = sent.into_iter().find(|e| matches!(e.msg, Message::TxStatusReply { .. })).expect("answered");
    // p0 crashes and restarts from its log; then the dead coordinator's late commit reaches it.
    let mut c = config(ClockKind::Hybrid);
    c.partitions = 2;
    dc.parts[0] = Partition::recover(PartitionId(0), c, 2_000, log0);
    let (_, relogged) = drain(&mut dc.parts[0]);
    assert!(
        relogged.iter().all(|(_, r)| matches!(r, LogRecord::ClockBound { .. })),
        "recovery logs nothing but a clock bound (a promise applied from the log is not logged again): {relogged:?}"
    );
    dc.parts[0].handle_persisted(2_000, relogged.last().expect("a hybrid clock's bound").0);
    dc.deliver(COORD, 0, late_commit);
    assert_eq!(dc.parts[0].undecided(), vec![tx(5)], "the restarted partition kept its promise");
    // p1 hears the answer, every partition answered Prepared: abort, everywhere.
    dc.parts[1].handle_message(1_000, COORD, Message::CoordinatorGone { tx: tx(5) });
    dc.deliver(answer.from, 1, answer.msg);
    for (p, key) in [(0, "x"), (1, "y")] {
        assert!(dc.parts[p].undecided().is_empty());
        assert!(elems(dc.value(p as u32, key)).is_empty(), "p{p} committed what the termination aborted");
    }
}

#[test]
fn a_restarted_partition_still_ships_a_transaction_committed_above_its_clock() {
    // A commit time is the largest prepare time of the transaction's partitions, so with a physical clock it can
    // lie far above this partition's clock. The replicator restarted its window at the checkpoint's clock and so
    // neither held the transaction nor read it back from the log: the peer DC never got it (simulator seed 5067).
    let mut config = Config::new(2, DcId(0), 1);
    config.clock = ClockKind::Physical;
    let mut p = fresh(PartitionId(0), config.clone());
    let mut log = Vec::new();
    p.handle_message(
        2_000,
        COORD,
        Message::Prepare {
            tx: tx(1),
            snapshot: VectorClock::zero(2),
            writes: vec![(set("x"), add(tx(1), "a"))],
            oldest_open: 0,
        },
    );
    log.extend(drain(&mut p).1);
    p.handle_persisted(2_000, log.last().expect("the prepare").0);
    let ahead = VectorClock::from_entries(vec![Timestamp::from_micros(50_000), Timestamp::ZERO]);
    p.handle_message(2_000, COORD, Message::Commit { tx: tx(1), commit: ahead });
    log.extend(drain(&mut p).1);
    p.handle_persisted(2_000, log.last().expect("the commit").0);
    drain(&mut p);
    // A checkpoint at 3 ms, before any replication went out; then a crash and a restart from it.
    let checkpoint = p.take_checkpoint();
    assert!(checkpoint.clock < Timestamp::from_micros(50_000));
    assert!(checkpoint.keep_log_from.is_some(), "the log the peer still needs is kept");
    let log: Vec<_> = log.into_iter().filter(|(lsn, _)| Some(*lsn) >= checkpoint.keep_log_from).collect();
    let mut r = Partition::restore(PartitionId(0), config, 3_000, Some(checkpoint), Vec::new());
    // Time passes beyond the commit time; the replicator ships, reading the log where it asks to.
    let mut shipped = Vec::new();
    for now in (60_000..=200_000).step_by(10_000) {
        r.handle_timeout(now);
        while let Some(out) = r.poll_output() {
            match out {
                PartitionOutput::Send(Envelope {
                    to: Address::Peer(DcId(1), _),
                    msg: Message::Replicate { txs, .. },
                    ..
                }) => shipped.extend(txs.into_iter().map(|t| t.tx)),
                PartitionOutput::ReadLog { after } => {
                    r.handle_log_read(log.iter().filter(|(lsn, _)| *lsn > after).cloned().collect())
                }
                _ => {}
            }
        }
    }
    assert_eq!(shipped, vec![tx(1)]);
}

fn counter(key: &str) -> ObjectId {
    ObjectId::new(key, "b", CrdtType::CounterPn)
}

fn increment(t: TxId) -> Effect {
    let mut ctx = EffectCtx::new(t.tag(), 0);
    Crdt::new(CrdtType::CounterPn).generate(&Op::Increment(1), &mut ctx).expect("an increment fits a counter")
}

/// Delivers a message and makes every record it logs durable at once; returns what was sent and logged.
fn deliver_durable(p: &mut Partition, now: u64, msg: Message) -> (Vec<Message>, Vec<(Lsn, LogRecord)>) {
    p.handle_message(now, COORD, msg);
    let (mut sent, mut logged) = (Vec::new(), Vec::new());
    loop {
        let (s, persisted) = drain(p);
        sent.extend(s.into_iter().map(|e| e.msg));
        let Some((lsn, _)) = persisted.last().cloned() else { return (sent, logged) };
        p.handle_persisted(now, lsn);
        logged.extend(persisted);
    }
}

/// A prepare that arrives again for a transaction that ended here (a coordinator resends after a leader change, a
/// deposed leader passes on what still reaches it) is never acted on twice: a prepare-and-commit of a committed one
/// is answered with its commit, even once the stable snapshot passed it (which trims the recent commits); a
/// prepare of a committed one leaves nothing prepared; and once the coordinator's oldest open transaction passes
/// them, their prepares are dropped. A partition rebuilt from its log or from a checkpoint remembers the same, as
/// a replica that takes the lead does.
#[test]
fn a_prepare_that_arrives_again_for_a_transaction_that_ended_here_is_not_acted_on_twice() {
    let mut p = fresh(PartitionId(0), config(ClockKind::Hybrid));
    let mut log = Vec::new();
    let pac = |t: TxId, oldest_open| Message::PrepareAndCommit {
        tx: t,
        snapshot: vc(900),
        writes: vec![(counter("c"), increment(t))],
        oldest_open,
    };
    let (sent, logged) = deliver_durable(&mut p, 1_000, pac(tx(1), 1));
    log.extend(logged);
    let first = sent.iter().find_map(|m| match m {
        Message::Committed { commit, .. } => Some(commit.clone()),
        _ => None,
    });
    let first = first.expect("tx 1 committed");
    let writes = vec![(counter("c"), increment(tx(2)))];
    let (sent, logged) =
        deliver_durable(&mut p, 1_100, Message::Prepare { tx: tx(2), snapshot: vc(900), writes, oldest_open: 1 });
    log.extend(logged);
    let prepare_time = sent.iter().find_map(|m| match m {
        Message::Prepared { prepare_time, .. } => Some(*prepare_time),
        _ => None,
    });
    let second = VectorClock::from_entries(vec![prepare_time.expect("tx 2 prepared")]);
    let (_, logged) = deliver_durable(&mut p, 1_200, Message::Commit { tx: tx(2), commit: second.clone() });
    log.extend(logged);
    p.handle_message(
        1_300,
        Address::Stabilizer,
        Message::Stable { stable: second.clone(), gc: VectorClock::zero(1), away: None },
    );
    assert_eq!(p.recent_commit(tx(1)), None, "the stable snapshot trimmed the recent commits");

    let checkpoint = p.take_checkpoint();
    let restored = Partition::restore(PartitionId(0), config(ClockKind::Hybrid), 2_000, Some(checkpoint), Vec::new());
    let recovered = Partition::recover(PartitionId(0), config(ClockKind::Hybrid), 2_000, log);
    let rebuilt = [("restored from a checkpoint", restored), ("recovered from the log", recovered)];
    let rebuilt = rebuilt.map(|(name, q)| (name, bound_durable(q, 2_000)));
    for (name, mut q) in std::iter::once(("live", p)).chain(rebuilt) {
        let (sent, logged) = deliver_durable(&mut q, 2_000, pac(tx(1), 1));
        assert!(logged.is_empty(), "{name}: nothing logged for a duplicate: {logged:?}");
        assert_eq!(sent, vec![Message::Committed { tx: tx(1), commit: first.clone() }], "{name}");
        let msg = Message::Prepare { tx: tx(2), snapshot: vc(900), writes: vec![], oldest_open: 1 };
        let (sent, logged) = deliver_durable(&mut q, 2_000, msg);
        assert!(sent.is_empty() && logged.is_empty(), "{name}: a duplicate prepare is dropped: {sent:?} {logged:?}");
        assert_eq!(q.prepared_count(), 0, "{name}");
        q.handle_timeout(3_000);
        drain_durable(&mut q, 3_000);
        read(&mut q, 3_000, second.clone(), vec![counter("c")]);
        let reply = read_reply(&drain_durable(&mut q, 3_000));
        let values = reply.map(|r| r.map(|states| states.iter().map(Crdt::value).collect::<Vec<_>>()));
        assert_eq!(values, Some(Ok(vec![Value::Counter(2)])), "{name}: each transaction applied once");

        // The coordinator finished both: their prepares are stale now, and nothing answers them.
        let (sent, logged) = deliver_durable(&mut q, 3_000, pac(tx(1), 3));
        assert!(sent.is_empty() && logged.is_empty(), "{name}: {sent:?} {logged:?}");
        let (sent, logged) = deliver_durable(&mut q, 3_000, pac(tx(2), 0));
        assert!(sent.is_empty() && logged.is_empty(), "{name}: a mark never goes back: {sent:?} {logged:?}");
    }
}

/// Partial replication with caches: a write to an object this DC does not hold is reported to the stabilizer as a
/// notice (for the coordinators' caches), and a DC that does not hold an object is shipped a notice of each write
/// to it instead of the write; the notices of a peer's writes it receives go to its own reports. A new stream
/// starts above what the partition had seen.
#[test]
fn writes_to_objects_held_elsewhere_become_notices_for_the_caches() {
    // Three DCs, rings [0, 1] and [2], two partitions: partition 1's objects of bucket "r" are held by DCs 1 and 2.
    let mut config = Config::new(3, DcId(0), 2);
    config.placement = causet_core::placement::Placement::of_indices(&[vec![0, 1], vec![2]], [b"r".to_vec()]);
    config.cache = Some(Default::default());
    let of_partition = |p: u32| {
        (0..).map(|i| ObjectId::new(format!("k{i}"), "r", CrdtType::CounterPn)).find(|o| o.partition(2).0 == p)
    };
    // Commits, at a partition of DC 0, a transaction writing `object`.
    let commit = |p: &mut Partition, seq: u64, object: &ObjectId| {
        let (t, snapshot) = (tx(seq), VectorClock::zero(3));
        let msg =
            Message::PrepareAndCommit { tx: t, snapshot, writes: vec![(object.clone(), increment(t))], oldest_open: 1 };
        deliver_durable(p, 2_000, msg);
    };
    let object = of_partition(1).expect("an object of partition 1");
    let reports = |sent: &[Envelope]| -> Vec<causet_core::away::Report> {
        (sent.iter())
            .filter_map(|e| match &e.msg {
                Message::PvcReport { away, .. } => away.clone(),
                _ => None,
            })
            .collect()
    };
    let mut p = fresh(PartitionId(1), config.clone());
    p.handle_timeout(1_000);
    let (sent, _) = drain(&mut p);
    let first = reports(&sent);
    assert_eq!(first.len(), 1, "a report with a stream: {sent:?}");
    assert!(first[0].notices.is_empty() && first[0].seq == 0);
    // DC 0 commits a write to the object, which it does not hold.
    commit(&mut p, 1, &object);
    // Later, DC 2 (a holder) ships a transaction of its own with a notice of a write to another object.
    let at = VectorClock::from_entries(vec![Timestamp::ZERO, Timestamp::ZERO, Timestamp::from_micros(1_500)]);
    let theirs = (7u32, at.get(DcId(2)));
    let remote = causet_core::replication::ReplicatedTx {
        tx: TxId { dc: DcId(2), coordinator: CoordinatorId(0), seq: 1 },
        snapshot: VectorClock::zero(3),
        commit: at,
        writes: Vec::new(),
    };
    let replicate = Message::Replicate {
        since: Timestamp::ZERO,
        txs: vec![remote],
        up_to: Timestamp::from_micros(1_600),
        gc: None,
        away: vec![(0, theirs.0)],
    };
    p.handle_message(2_100, Address::Peer(DcId(2), PartitionId(1)), replicate);
    let mut sent = Vec::new();
    for now in (3_000..=40_000).step_by(1_000) {
        p.handle_timeout(now);
        sent.extend(drain(&mut p).0);
    }
    let notices: Vec<_> = reports(&sent).into_iter().flat_map(|r| r.notices).collect();
    assert!(notices.iter().any(|(dc, fp, _)| *dc == DcId(0) && *fp == object.fingerprint()), "{notices:?}");
    assert!(notices.contains(&(DcId(2), theirs.0, theirs.1)), "the peer's notice is passed on: {notices:?}");
    assert_eq!(p.store_size().0, 0, "DC 0 stores none of it");

    // Partition 0's objects of "r" are held by DCs 0 and 2: a write here is shipped to DC 2, and DC 1 is sent a
    // notice in its place.
    let mine = of_partition(0).expect("an object of partition 0");
    let mut q = fresh(PartitionId(0), config);
    commit(&mut q, 2, &mine);
    let mut shipped = Vec::new();
    for now in (3_000..=40_000).step_by(1_000) {
        q.handle_timeout(now);
        shipped.extend(drain(&mut q).0);
    }
    let to_peers: Vec<(DcId, usize, Vec<u32>)> = (shipped.iter())
        .filter_map(|e| match (&e.msg, e.to) {
            (Message::Replicate { txs, away, .. }, Address::Peer(dc, _)) if !txs.is_empty() => {
                Some((dc, txs.iter().map(|t| t.writes.len()).sum(), away.iter().map(|(_, fp)| *fp).collect()))
            }
            _ => None,
        })
        .collect();
    assert!(to_peers.contains(&(DcId(2), 1, vec![])), "the holder gets the write: {to_peers:?}");
    assert!(to_peers.contains(&(DcId(1), 0, vec![mine.fingerprint()])), "the other DC a notice: {to_peers:?}");
    assert_eq!(q.store_size().0, 1, "DC 0 stores its own");
}

/// Reads from the nearest ring: a holder's garbage collection waits for the frontier of a DC of another ring that
/// may read from it while that DC keeps reporting it, and stops waiting once its reports are a second old (a read
/// of its below the frontier is then refused and asked of another ring). With static ring binding it never waits.
#[test]
fn a_holder_waits_for_other_rings_readers_only_while_they_report() {
    use causet_core::placement::{Placement, RingChoice};
    // Rings [0, 1] and [2]: partition 1 is held by DCs 1 and 2, so DC 0 may read it from DC 2.
    let vc = |t: u64| VectorClock::from_entries(vec![Timestamp::from_micros(t); 3]);
    let frontier_after = |choice: RingChoice, last_report_us: u64| {
        let mut config = Config::new(3, DcId(2), 2);
        config.placement = Placement::of_indices(&[vec![0, 1], vec![2]], [b"r".to_vec()]).reading_from(choice);
        let mut p = fresh(PartitionId(1), config);
        let heartbeat = |gc: Option<VectorClock>| Message::Replicate {
            since: Timestamp::ZERO,
            txs: Vec::new(),
            up_to: Timestamp::from_micros(10_000),
            gc,
            away: Vec::new(),
        };
        p.handle_message(1_000, Address::Peer(DcId(1), PartitionId(1)), heartbeat(None));
        p.handle_message(last_report_us, Address::Peer(DcId(0), PartitionId(1)), heartbeat(Some(vc(100))));
        let now = 1_500_000;
        p.handle_message(now, Address::Stabilizer, Message::Stable { stable: vc(1_000), gc: vc(500), away: None });
        let mut sent = drain_durable(&mut p, now);
        p.handle_timeout(now + 10_000);
        sent.extend(drain_durable(&mut p, now + 10_000));
        let reports: Vec<Option<VectorClock>> = (sent.into_iter())
            .filter_map(|e| match e.msg {
                Message::PvcReport { frontier, .. } => Some(frontier),
                _ => None,
            })
            .collect();
        reports.last().cloned().expect("a report")
    };
    assert_eq!(frontier_after(RingChoice::Nearest, 1_000_000), Some(vc(100)), "DC 0 reported 0.5 s ago");
    assert_eq!(frontier_after(RingChoice::Nearest, 400_000), Some(vc(500)), "DC 0's report is 1.1 s old");
    assert_eq!(frontier_after(RingChoice::Own, 1_000_000), None, "static binding: nobody else reads here");
}
