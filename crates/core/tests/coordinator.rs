//! Unit tests of the coordinator, with partitions and a stabilizer wired by an instant, in-order network and an
//! instant disk (the simulator covers delays, reordering and crashes).

use causet_core::coordinator::{
    BufferRecord, BufferToken, ClientClock, ClientRequest, ClientResponse, Coordinator, CoordinatorOutput, TxError,
};
use causet_core::partition::{Partition, PartitionOutput};
use causet_core::record::Lsn;
use causet_core::stabilizer::Stabilizer;
use causet_core::{Address, ClientId, Config, CoordinatorId, DcId, Envelope, Message, ObjectId, PartitionId};
use causet_core::{RequestId, Timestamp, TxId, VectorClock};
use causet_crdt::{CrdtError, CrdtType, Op, Value};
use std::collections::VecDeque;

/// One DC: a coordinator, partitions and a stabilizer, on one clock.
struct Dc {
    now: u64,
    coordinator: Coordinator,
    partitions: Vec<Partition>,
    stabilizer: Stabilizer,
    replies: VecDeque<(RequestId, Result<ClientResponse, TxError>)>,
    sent: Vec<Envelope>,
    /// Partitions whose messages are dropped (to simulate a dead partition).
    dead: Vec<u32>,
    /// Commit decisions are dropped on their way to the partitions (the coordinator dies as it sends them).
    drop_commits: bool,
    /// The next prepare to this partition is lost (a link between nodes broke with it on the wire).
    lose_next_prepare_to: Option<u32>,
    /// Likewise the next read.
    lose_next_read_to: Option<u32>,
    /// The coordinator's write-buffer log as its disk holds it.
    buffer_log: Vec<(Lsn, BufferRecord)>,
    /// The log's records become durable at once (else only at [`Dc::sync_buffer_log`]).
    sync_at_once: bool,
    /// The log's durable records end here.
    buffer_durable: Lsn,
    config: Config,
    next_request: u64,
}

impl Dc {
    fn new(partitions: u32) -> Self {
        Self::with_config(Config::new(1, DcId(0), partitions))
    }

    /// A DC just started: no partition reported yet, so the coordinator has not heard the stable snapshot (with
    /// several DCs, it begins no transaction before it has).
    fn with_config(config: Config) -> Self {
        let partitions = config.partitions;
        let now = 1_000_000;
        Dc {
            now,
            coordinator: Coordinator::new(CoordinatorId(0), config.clone(), now),
            partitions: (0..partitions).map(|p| Partition::new(PartitionId(p), config.clone(), now)).collect(),
            stabilizer: Stabilizer::new(config.clone(), vec![CoordinatorId(0)]),
            replies: VecDeque::new(),
            sent: Vec::new(),
            dead: Vec::new(),
            drop_commits: false,
            lose_next_prepare_to: None,
            lose_next_read_to: None,
            buffer_log: Vec::new(),
            sync_at_once: true,
            buffer_durable: Lsn(0),
            config: config.clone(),
            next_request: 0,
        }
    }

    /// Runs until no output is left.
    fn settle(&mut self) {
        let mut queue: VecDeque<Envelope> = VecDeque::new();
        loop {
            let mut durable = None;
            while let Some(out) = self.coordinator.poll_output() {
                match out {
                    CoordinatorOutput::Send(e) => queue.push_back(e),
                    CoordinatorOutput::Reply(r) => self.replies.push_back((r.request, r.result)),
                    CoordinatorOutput::Persist { lsn, record } => {
                        self.buffer_log.push((lsn, record));
                        durable = Some(lsn);
                    }
                    CoordinatorOutput::Truncate { before } => self.buffer_log.retain(|(lsn, _)| *lsn >= before),
                }
            }
            if let Some(lsn) = durable.filter(|_| self.sync_at_once) {
                self.buffer_durable = lsn;
                self.coordinator.handle_persisted(lsn);
                continue;
            }
            for p in &mut self.partitions {
                // Every record is durable at once; durability may release messages and log more records (a clock
                // bound a message waits for).
                loop {
                    let mut durable = None;
                    while let Some(out) = p.poll_output() {
                        match out {
                            PartitionOutput::Send(e) => queue.push_back(e),
                            PartitionOutput::Persist { lsn, .. } => durable = Some(lsn),
                            // One DC: replication never reads the log back.
                            PartitionOutput::ReadLog { .. } => unreachable!("one DC replicates nowhere"),
                        }
                    }
                    let Some(lsn) = durable else { break };
                    p.handle_persisted(self.now, lsn);
                }
            }
            while let Some(e) = self.stabilizer.poll_output() {
                queue.push_back(e);
            }
            let Some(e) = queue.pop_front() else { break };
            self.sent.push(e.clone());
            if self.drop_commits && matches!(e.msg, Message::Commit { .. }) {
                continue;
            }
            if let Address::Partition(PartitionId(p)) = e.to {
                let lose = match &e.msg {
                    Message::Prepare { .. } => &mut self.lose_next_prepare_to,
                    Message::Read { .. } => &mut self.lose_next_read_to,
                    _ => &mut None,
                };
                if lose.take_if(|lost| *lost == p).is_some() {
                    continue;
                }
            }
            match e.to {
                Address::Coordinator(_) => self.coordinator.handle_message(self.now, e.from, e.msg),
                // Another coordinator's: the test answers for it, from `sent`.
                Address::DcCoordinator(_, c) if c == self.coordinator.id() => {
                    self.coordinator.handle_message(self.now, e.from, e.msg)
                }
                Address::DcCoordinator(..) => {}
                Address::Partition(PartitionId(p)) if !self.dead.contains(&p) => {
                    self.partitions[p as usize].handle_message(self.now, e.from, e.msg)
                }
                Address::Partition(_) | Address::Peer(..) | Address::Replica(..) => {}
                Address::Stabilizer => self.stabilizer.handle_message(e.from, e.msg),
            }
        }
    }

    fn advance(&mut self, micros: u64) {
        self.now += micros;
        self.coordinator.handle_timeout(self.now);
        for p in &mut self.partitions {
            p.handle_timeout(self.now);
        }
        self.settle();
    }

    fn call(&mut self, body: ClientRequest) -> Result<ClientResponse, TxError> {
        let request = RequestId(self.next_request);
        self.next_request += 1;
        self.coordinator.handle_client(self.now, ClientId(1), request, body);
        self.settle();
        let (answered, result) = self.replies.pop_front().expect("a reply");
        assert_eq!(answered, request);
        result
    }

    fn start(&mut self, clock: Option<VectorClock>) -> TxId {
        match self.call(ClientRequest::Start { clock: clock.map(Into::into), reads: Default::default() }) {
            Ok(ClientResponse::Started { tx, .. }) => tx,
            other => panic!("start failed: {other:?}"),
        }
    }

    /// Sends a request and runs until nothing is left, without waiting for its answer.
    fn send(&mut self, request: RequestId, body: ClientRequest) {
        self.coordinator.handle_client(self.now, ClientId(1), request, body);
        self.settle();
    }

    /// Makes every record of the write-buffer log written so far durable.
    fn sync_buffer_log(&mut self) {
        if let Some(&(lsn, _)) = self.buffer_log.last() {
            self.buffer_durable = lsn;
            self.coordinator.handle_persisted(lsn);
        }
        self.settle();
    }

    /// The coordinator's node crashes and restarts: a new coordinator (a new id) recovers from the log's durable
    /// records. Partitions and the stabilizer stay.
    fn restart_coordinator(&mut self, id: u32) {
        let durable = self.buffer_durable;
        self.buffer_log.retain(|(lsn, _)| *lsn <= durable);
        let log = self.buffer_log.clone();
        self.coordinator = Coordinator::recover(CoordinatorId(id), self.config.clone(), self.now, log);
        self.stabilizer = Stabilizer::new(self.config.clone(), vec![CoordinatorId(id)]);
        self.replies.clear();
        self.settle();
    }

    /// Advances time 10 ms at a time until a reply comes or the transaction timeout passed; returns the time waited.
    fn wait_for_a_reply(&mut self) -> u64 {
        let mut waited = 0;
        while self.replies.is_empty() && waited < self.config.op_timeout_us {
            self.advance(10_000);
            waited += 10_000;
        }
        waited
    }

    fn prepares_sent(&self) -> usize {
        self.sent.iter().filter(|e| matches!(e.msg, Message::Prepare { .. })).count()
    }
}

fn set(key: &str) -> ObjectId {
    ObjectId::new(key, "b", CrdtType::SetAw)
}

fn add(e: &str) -> Op {
    Op::Add(vec![e.as_bytes().to_vec()])
}

fn committed(result: Result<ClientResponse, TxError>) -> VectorClock {
    match result {
        Ok(ClientResponse::Committed { commit, .. }) => commit,
        other => panic!("not committed: {other:?}"),
    }
}

#[test]
fn a_client_clock_from_a_commit_reads_that_commit_in_the_next_transaction() {
    let mut dc = Dc::new(4);
    let clock = committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(set("x"), add("a"))] }));
    match dc.call(ClientRequest::StaticRead {
        clock: Some(clock.clone().into()),
        objects: vec![set("x")],
        reads: Default::default(),
    }) {
        Ok(ClientResponse::StaticValues { values, commit, .. }) => {
            assert_eq!(values, vec![Value::Set(vec![b"a".to_vec()])]);
            assert!(clock.le(&commit), "the read's snapshot covers the client's clock");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_transaction_reads_its_own_writes_before_committing() {
    let mut dc = Dc::new(2);
    let tx = dc.start(None);
    assert_eq!(
        dc.call(ClientRequest::Update { tx, updates: vec![(set("x"), add("a")), (set("y"), add("b"))] }),
        Ok(ClientResponse::Updated)
    );
    let values = dc.call(ClientRequest::Read { tx, objects: vec![set("x"), set("y"), set("z")] });
    assert_eq!(
        values,
        Ok(ClientResponse::Values(vec![
            Value::Set(vec![b"a".to_vec()]),
            Value::Set(vec![b"b".to_vec()]),
            Value::Set(vec![])
        ]))
    );
    committed(dc.call(ClientRequest::Commit { tx }));
}

#[test]
fn cure_read_only_transactions_commit_without_two_phase_commit() {
    let mut dc = Dc::new(3);
    let tx = dc.start(None);
    dc.call(ClientRequest::Read { tx, objects: vec![set("x"), set("y")] }).expect("read");
    let snapshot = committed(dc.call(ClientRequest::Commit { tx }));
    assert_eq!(dc.prepares_sent(), 0);
    assert!(snapshot.get(DcId(0)) > Timestamp::ZERO);
}

#[test]
fn cure_alg1_the_commit_time_is_the_largest_prepare_time() {
    let mut dc = Dc::new(2);
    // Push partition 1's clock far ahead of partition 0's by reading there at a future snapshot.
    let ahead = VectorClock::from_entries(vec![Timestamp::from_micros(dc.now + 500_000)]);
    let far = (0..64).map(|i| set(&format!("k{i}"))).find(|o| o.partition(2) == PartitionId(1)).expect("a key");
    let near = (0..64).map(|i| set(&format!("k{i}"))).find(|o| o.partition(2) == PartitionId(0)).expect("a key");
    dc.partitions[1].handle_message(
        dc.now,
        Address::Coordinator(CoordinatorId(9)),
        Message::Read {
            tx: TxId { dc: DcId(0), coordinator: CoordinatorId(9), seq: 0 },
            request: 0,
            snapshot: ahead,
            objects: vec![],
            nearest: false,
        },
    );
    dc.settle();
    let commit = committed(
        dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(near, add("a")), (far, add("b"))] }),
    );
    let prepared: Vec<Timestamp> = dc
        .sent
        .iter()
        .filter_map(|e| match e.msg {
            Message::Prepared { prepare_time, .. } => Some(prepare_time),
            _ => None,
        })
        .collect();
    assert_eq!(prepared.len(), 2);
    assert_eq!(commit.get(DcId(0)), *prepared.iter().max().expect("two"));
    assert!(commit.get(DcId(0)) > Timestamp::from_micros(dc.now + 500_000));
}

#[test]
fn a_failed_update_leaves_the_transaction_unchanged() {
    let mut dc = Dc::new(2);
    let tx = dc.start(None);
    dc.call(ClientRequest::Update { tx, updates: vec![(set("x"), add("a"))] }).expect("update");
    let bad = dc
        .call(ClientRequest::Update { tx, updates: vec![(set("x"), add("b")), (set("y"), Op::Assign(b"v".to_vec()))] });
    assert!(matches!(bad, Err(TxError::Crdt(CrdtError::UnsupportedOp { .. }))), "{bad:?}");
    let values = dc.call(ClientRequest::Read { tx, objects: vec![set("x")] });
    assert_eq!(values, Ok(ClientResponse::Values(vec![Value::Set(vec![b"a".to_vec()])])));
    committed(dc.call(ClientRequest::Commit { tx }));
}

#[test]
fn finished_unknown_and_busy_transactions_get_precise_errors() {
    let mut dc = Dc::new(1);
    let tx = dc.start(None);
    committed(dc.call(ClientRequest::Commit { tx }));
    assert_eq!(dc.call(ClientRequest::Read { tx, objects: vec![] }), Err(TxError::AlreadyCommitted(tx)));
    let unknown = TxId { seq: 12345, ..tx };
    assert_eq!(dc.call(ClientRequest::Commit { tx: unknown }), Err(TxError::UnknownTransaction(unknown)));
    let tx = dc.start(None);
    assert_eq!(dc.call(ClientRequest::Abort { tx }), Ok(ClientResponse::Aborted));
    assert!(matches!(dc.call(ClientRequest::Commit { tx }), Err(TxError::AlreadyAborted { .. })));
}

#[test]
fn abandoned_transactions_abort_after_the_idle_timeout() {
    let mut dc = Dc::new(1);
    let tx = dc.start(None);
    assert_eq!(dc.coordinator.open_transactions(), 1);
    dc.advance(Config::new(1, DcId(0), 1).tx_idle_timeout_us + 1);
    assert_eq!(dc.coordinator.open_transactions(), 0);
    let err = dc.call(ClientRequest::Commit { tx }).expect_err("aborted");
    assert!(matches!(&err, TxError::AlreadyAborted { reason, .. } if reason.contains("idle")), "{err:?}");
    assert_eq!(err.code(), 3);
}

#[test]
fn a_prepare_a_partition_never_answers_times_out_and_aborts_everywhere() {
    let mut dc = Dc::new(2);
    // Counter increments need no read first, so the transaction goes straight to the prepare phase.
    let [a, b] = <[ObjectId; 2]>::try_from(counters_apart(2, 2)).expect("two keys");
    let live = a.partition(2).0 as usize;
    dc.dead.push(b.partition(2).0);
    let request = RequestId(77);
    let updates = vec![(a.clone(), Op::Increment(1)), (b, Op::Increment(1))];
    dc.coordinator.handle_client(dc.now, ClientId(1), request, ClientRequest::StaticUpdate { clock: None, updates });
    dc.settle();
    assert!(dc.replies.is_empty());
    assert_eq!(dc.partitions[live].prepared_count(), 1);
    dc.advance(Config::new(1, DcId(0), 2).op_timeout_us + 1);
    let (_, result) = dc.replies.pop_front().expect("a timeout reply");
    assert!(matches!(result, Err(TxError::Timeout(_))), "{result:?}");
    assert_eq!(dc.partitions[live].prepared_count(), 0, "the live participant was told to abort");
    let read = dc.call(ClientRequest::StaticRead { clock: None, objects: vec![a], reads: Default::default() });
    assert!(matches!(read, Ok(ClientResponse::StaticValues { ref values, .. }) if values[0] == Value::Counter(0)));
}

/// A prepare lost on the way (a link between nodes broke, a node restarted) is sent again long before the
/// transaction's timeout: the participant that did prepare would otherwise hold its pvc, and with it the DC's stable
/// snapshot, back until then (`causet check` seed 12 with buffered writes: a handover's prepare lost to a cut
/// between two nodes held a partition prepared for 74 s, as long as its retried handover's doubled timeout).
#[test]
fn a_lost_prepare_is_sent_again_and_the_transaction_commits_well_before_its_timeout() {
    let mut dc = Dc::new(2);
    let [a, b] = <[ObjectId; 2]>::try_from(counters_apart(2, 2)).expect("two keys");
    let live = a.partition(2).0 as usize;
    dc.lose_next_prepare_to = Some(b.partition(2).0);
    let request = RequestId(78);
    let updates = vec![(a.clone(), Op::Increment(1)), (b.clone(), Op::Increment(1))];
    dc.coordinator.handle_client(dc.now, ClientId(1), request, ClientRequest::StaticUpdate { clock: None, updates });
    dc.settle();
    assert!(dc.replies.is_empty() && dc.lose_next_prepare_to.is_none(), "the prepare to b's partition was lost");
    assert_eq!(dc.partitions[live].prepared_count(), 1);
    let (timeout, waited) = (dc.config.op_timeout_us, dc.wait_for_a_reply());
    let (_, result) = dc.replies.pop_front().expect("an answer before the timeout");
    committed(result);
    assert!(waited <= timeout / 5, "committed after {waited} µs of a {timeout} µs timeout");
    assert_eq!(dc.prepares_sent(), 3, "one prepare sent again");
    assert_eq!(dc.coordinator.prepare_resends(), 1);
    assert_eq!(dc.partitions[live].prepared_count(), 0);
    let read = dc.call(ClientRequest::StaticRead { clock: None, objects: vec![a, b], reads: Default::default() });
    let Ok(ClientResponse::StaticValues { values, .. }) = read else { panic!("{read:?}") };
    assert_eq!(values, vec![Value::Counter(1), Value::Counter(1)]);
}

/// A read lost on the way (a link between nodes broke with it, or with its answer) is sent again long before the
/// transaction's timeout, which it waited for before (fails without the resend: the read times out at 10 s).
#[test]
fn a_lost_read_is_sent_again_and_answered_well_before_its_timeout() {
    let mut dc = Dc::new(2);
    let [a, b] = <[ObjectId; 2]>::try_from(counters_apart(2, 2)).expect("two keys");
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(b.clone(), Op::Increment(4))] }));
    dc.lose_next_read_to = Some(b.partition(2).0);
    let request = RequestId(79);
    let read = ClientRequest::StaticRead { clock: None, objects: vec![a, b], reads: Default::default() };
    dc.coordinator.handle_client(dc.now, ClientId(1), request, read);
    dc.settle();
    assert!(dc.replies.is_empty() && dc.lose_next_read_to.is_none(), "the read of b's partition was lost");
    let (timeout, waited) = (dc.config.op_timeout_us, dc.wait_for_a_reply());
    let (answered, result) = dc.replies.pop_front().expect("an answer before the timeout");
    assert_eq!(answered, request);
    let Ok(ClientResponse::StaticValues { values, .. }) = result else { panic!("{result:?}") };
    assert_eq!(values, vec![Value::Counter(0), Value::Counter(4)]);
    assert!(waited <= timeout / 5, "answered after {waited} µs of a {timeout} µs timeout");
    assert_eq!(dc.coordinator.read_resends(), 1, "only the lost read is sent again");
}

#[test]
fn a_malformed_or_runaway_client_clock_is_refused() {
    let mut dc = Dc::new(1);
    let wrong = dc.call(ClientRequest::Start { clock: Some(VectorClock::zero(3).into()), reads: Default::default() });
    assert!(matches!(wrong, Err(TxError::InvalidClock(_))), "{wrong:?}");
    let far = VectorClock::from_entries(vec![Timestamp::from_micros(dc.now + 86_400_000_000)]);
    assert!(matches!(
        dc.call(ClientRequest::Start { clock: Some(far.into()), reads: Default::default() }),
        Err(TxError::InvalidClock(_))
    ));
}

#[test]
fn bounded_counter_without_rights_refuses_with_no_permissions() {
    let mut dc = Dc::new(1);
    let bc = ObjectId::new("bc", "b", CrdtType::CounterB);
    let err = dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(bc.clone(), Op::Increment(-1))] });
    let err = err.expect_err("no rights yet");
    assert_eq!(err.code(), 2, "{err:?}");
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(bc.clone(), Op::Increment(3))] }));
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(bc.clone(), Op::Increment(-2))] }));
    match dc.call(ClientRequest::StaticRead { clock: None, objects: vec![bc], reads: Default::default() }) {
        Ok(ClientResponse::StaticValues { values, .. }) => assert_eq!(values, vec![Value::Counter(1)]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn antidote_348_a_disconnected_clients_open_transactions_are_aborted_at_once() {
    let mut dc = Dc::new(1);
    let tx = dc.start(None);
    dc.coordinator.handle_disconnect(ClientId(1));
    assert_eq!(dc.coordinator.open_transactions(), 0);
    let err = dc.call(ClientRequest::Commit { tx }).expect_err("aborted");
    assert!(matches!(&err, TxError::AlreadyAborted { reason, .. } if reason.contains("disconnected")), "{err:?}");
}

#[test]
fn a_single_partition_transaction_commits_in_one_round_and_one_record() {
    let mut dc = Dc::new(1);
    let commit = committed(dc.call(ClientRequest::StaticUpdate {
        clock: None,
        updates: vec![(ObjectId::new("c", "b", CrdtType::CounterPn), Op::Increment(2))],
    }));
    assert_eq!(dc.prepares_sent(), 0, "no two-phase commit for one participant");
    let alone = dc.sent.iter().filter(|e| matches!(e.msg, Message::PrepareAndCommit { .. })).count();
    assert_eq!(alone, 1);
    match dc.call(ClientRequest::StaticRead {
        clock: Some(commit.into()),
        objects: vec![ObjectId::new("c", "b", CrdtType::CounterPn)],
        reads: Default::default(),
    }) {
        Ok(ClientResponse::StaticValues { values, .. }) => assert_eq!(values, vec![Value::Counter(2)]),
        other => panic!("{other:?}"),
    }
}

/// Puts a transaction of another coordinator in the prepared state at `partition`, and never decides it.
fn prepare_elsewhere(dc: &mut Dc, partition: u32, key: &str) {
    let other = CoordinatorId(7);
    let tx = TxId { dc: DcId(0), coordinator: other, seq: 0 };
    let snapshot = VectorClock::from_entries(vec![Timestamp::from_micros(dc.now)]);
    let mut ctx = causet_crdt::EffectCtx::new(tx.tag(), 0);
    let effect = causet_crdt::Crdt::new(CrdtType::SetAw).generate(&add("z"), &mut ctx).expect("add fits a set");
    let writes = vec![(set(key), effect)];
    dc.partitions[partition as usize].handle_message(
        dc.now,
        Address::Coordinator(other),
        Message::Prepare { tx, snapshot, writes, oldest_open: 0 },
    );
    dc.settle();
    assert_eq!(dc.partitions[partition as usize].prepared_count(), 1);
}

/// Departure 13 (`stable_reads`): a static read takes the stable snapshot's local entry, where no partition can
/// hold a prepared transaction, so it is served at once; Cure's Alg. 1 (the clock) waits for the prepared
/// transaction's decision.
#[test]
fn a_static_read_at_the_stable_snapshot_does_not_wait_for_a_later_prepare() {
    for stable_reads in [true, false] {
        let mut config = Config::new(1, DcId(0), 1);
        config.stable_reads = stable_reads;
        let mut dc = Dc::with_config(config);
        let before =
            committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(set("x"), add("a"))] }));
        dc.advance(2_000); // Partitions report; the stable snapshot moves past the commit.
        assert!(before.le(dc.coordinator.stable_snapshot()), "the commit is stable");
        dc.advance(1);
        prepare_elsewhere(&mut dc, 0, "x");
        dc.now += 100; // The coordinator's clock passes the prepare time.
        let request = RequestId(999);
        dc.coordinator.handle_client(
            dc.now,
            ClientId(1),
            request,
            ClientRequest::StaticRead {
                clock: Some(before.clone().into()),
                objects: vec![set("x")],
                reads: Default::default(),
            },
        );
        dc.settle();
        if stable_reads {
            match dc.replies.pop_front() {
                Some((r, Ok(ClientResponse::StaticValues { values, commit, .. }))) => {
                    assert_eq!(r, request);
                    assert_eq!(values, vec![Value::Set(vec![b"a".to_vec()])], "the client's own write is read");
                    assert!(before.le(&commit), "the snapshot includes the client's clock");
                }
                other => panic!("the read should be served at once: {other:?}"),
            }
        } else {
            assert!(dc.replies.is_empty(), "Cure's read waits for the transaction prepared below its snapshot");
        }
    }
}

/// A coordinator that has not heard a stable snapshot within `stable_read_max_lag_us` reads at its clock: a
/// restarted node must not serve reads at an empty snapshot.
#[test]
fn without_a_fresh_stable_snapshot_a_static_read_falls_back_to_the_clock() {
    let mut dc = Dc::new(1);
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(set("y"), add("b"))] }));
    assert_eq!(dc.coordinator.stable_snapshot().get(DcId(0)), Timestamp::ZERO, "no stable snapshot heard yet");
    match dc.call(ClientRequest::StaticRead { clock: None, objects: vec![set("y")], reads: Default::default() }) {
        Ok(ClientResponse::StaticValues { values, commit, .. }) => {
            assert_eq!(values, vec![Value::Set(vec![b"b".to_vec()])]);
            assert!(commit.get(DcId(0)).micros() >= dc.now, "read at the clock: {commit:?}");
        }
        other => panic!("{other:?}"),
    }
    // The stable snapshot is heard, then goes quiet for longer than the bound: reads use the clock again.
    dc.advance(2_000);
    let stable = dc.coordinator.stable_snapshot().get(DcId(0));
    let bound = Config::new(1, DcId(0), 1).stable_read_max_lag_us;
    dc.now += bound + 1_000; // No timers run: no new stable snapshot.
    match dc.call(ClientRequest::StaticRead { clock: None, objects: vec![set("y")], reads: Default::default() }) {
        Ok(ClientResponse::StaticValues { commit, .. }) => {
            assert!(commit.get(DcId(0)) > stable, "not at the stale stable snapshot");
            assert!(commit.get(DcId(0)).micros() >= dc.now, "at the clock");
        }
        other => panic!("{other:?}"),
    }
}

/// A coordinator that just started has not heard the stable snapshot: a transaction begun then would read the other
/// DCs' entries at zero, below what a partition restored from a checkpoint has garbage-collected, and fail as too
/// old (a static update at a DC restarted by kill -9 once aborted so, in the geo test). It begins nothing until the
/// stabilizer speaks, then begins at the stable snapshot.
#[test]
fn a_coordinator_begins_no_transaction_before_it_heard_the_stable_snapshot() {
    let mut dc = Dc::with_config(Config::new(2, DcId(0), 2));
    dc.coordinator.handle_client(
        dc.now,
        ClientId(1),
        RequestId(7),
        ClientRequest::StaticRead { clock: None, objects: vec![set("x")], reads: Default::default() },
    );
    dc.settle();
    assert!(dc.replies.is_empty(), "no answer before the stable snapshot: {:?}", dc.replies);
    assert!(!dc.sent.iter().any(|e| matches!(e.msg, Message::Read { .. })), "no read before the stable snapshot");
    dc.advance(1_000);
    let stable = dc.coordinator.stable_snapshot().clone();
    let read = dc.sent.iter().find_map(|e| match &e.msg {
        Message::Read { snapshot, .. } => Some(snapshot.clone()),
        _ => None,
    });
    let read = read.expect("the read left once the stable snapshot was heard");
    assert_eq!(read.get(DcId(1)), stable.get(DcId(1)), "the remote entry is the stable snapshot's");
    assert!(matches!(dc.replies.pop_front(), Some((RequestId(7), Ok(ClientResponse::StaticValues { .. })))));
}

/// One DC of two partitions whose coordinator caches reads (100 ms leases), after its first stable snapshots.
fn caching_dc() -> Dc {
    let mut config = Config::new(1, DcId(0), 2);
    config.cache =
        Some(causet_core::cache::CacheConfig { lease_us: 100_000, memory_bytes: 1 << 20, ..Default::default() });
    let mut dc = Dc::with_config(config);
    for _ in 0..5 {
        dc.advance(1_000);
    }
    dc
}

/// A cached transaction whose window narrowed to an old cached state must still be able to fetch at the top of
/// its window: the coordinator holds garbage collection at the bottom of every open window, even once the cache
/// floor has moved past it (found by the HoneyPot benchmark: about 0.5% of read-only transactions aborted with
/// their fetch refused as too old).
#[test]
fn a_cached_transaction_fetches_at_its_window_after_the_cache_floor_moved_past_it() {
    let mut dc = caching_dc();
    // Two objects on different partitions; the first is cached now.
    let x = set("x");
    let y = (0..).map(|i| set(&format!("y{i}"))).find(|y| y.partition(2) != x.partition(2)).expect("another partition");
    let first = dc.start(None);
    assert!(dc.call(ClientRequest::Read { tx: first, objects: vec![x.clone()] }).is_ok());
    assert!(dc.call(ClientRequest::Commit { tx: first }).is_ok());
    // 90 ms later (within the lease) a transaction reads the cached x: its window narrows to x's old box.
    for _ in 0..90 {
        dc.advance(1_000);
    }
    let second = dc.start(None);
    assert!(dc.call(ClientRequest::Read { tx: second, objects: vec![x] }).is_ok());
    assert_eq!(dc.coordinator.cache_stats().map(|s| s.hits), Some(1));
    // Another 50 ms: the cache floor (the stable snapshot of one lease ago) passes x's box.
    for _ in 0..50 {
        dc.advance(1_000);
    }
    let read = dc.call(ClientRequest::Read { tx: second, objects: vec![y] });
    assert!(matches!(read, Ok(ClientResponse::Values(_))), "the fetch at the window's top failed: {read:?}");
}

/// A DC whose coordinator caches and buffers writes, with leases of `lease_ms`, after its first stable snapshots.
fn buffering_dc(partitions: u32, lease_ms: u64) -> Dc {
    buffering_dc_with(partitions, lease_ms, |_| {})
}

/// [`buffering_dc`], with `tweak` applied to the configuration first.
fn buffering_dc_with(partitions: u32, lease_ms: u64, tweak: impl FnOnce(&mut Config)) -> Dc {
    let mut config = Config::new(1, DcId(0), partitions);
    let lease_us = lease_ms * 1_000;
    config.cache = Some(causet_core::cache::CacheConfig { lease_us, buffer_writes: true, ..Default::default() });
    tweak(&mut config);
    let mut dc = Dc::with_config(config);
    for _ in 0..5 {
        dc.advance(1_000);
    }
    dc
}

fn counter(key: &str) -> ObjectId {
    ObjectId::new(key, "b", CrdtType::CounterPn)
}

fn read_one(dc: &mut Dc, object: &ObjectId, reads: causet_core::coordinator::ReadFrom) -> Value {
    let body = ClientRequest::StaticRead { clock: None, objects: vec![object.clone()], reads };
    match dc.call(body) {
        Ok(ClientResponse::StaticValues { mut values, .. }) => values.remove(0),
        other => panic!("read failed: {other:?}"),
    }
}

/// Keys on `n` different partitions of `partitions`.
fn counters_apart(n: usize, partitions: u32) -> Vec<ObjectId> {
    let mut found: Vec<ObjectId> = Vec::new();
    for i in 0.. {
        let o = counter(&format!("k{i}"));
        if !found.iter().any(|f| f.partition(partitions) == o.partition(partitions)) {
            found.push(o);
        }
        if found.len() == n {
            return found;
        }
    }
    unreachable!()
}

#[test]
fn a_buffered_update_is_acknowledged_at_once_read_here_and_handed_over_in_one_commit_when_its_lease_ends() {
    use causet_core::coordinator::ReadFrom;
    let mut dc = buffering_dc(2, 100);
    let [x, y] = <[ObjectId; 2]>::try_from(counters_apart(2, 2)).expect("two keys");
    let updates = vec![(x.clone(), Op::Increment(3)), (y.clone(), Op::Increment(4))];
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates }));
    assert_eq!(dc.prepares_sent(), 0, "acknowledged without a commit at the owners");
    assert_eq!(read_one(&mut dc, &x, ReadFrom::Cache), Value::Counter(3), "read back from the buffer");
    let stats = dc.coordinator.handover_stats().expect("buffering");
    assert_eq!((stats.buffer.transactions, stats.buffer.objects, stats.handovers), (1, 2, 0));
    // The lease ends: one transaction carries both effects to both owners.
    for _ in 0..110 {
        dc.advance(1_000);
    }
    let prepares: Vec<&Envelope> = dc.sent.iter().filter(|e| matches!(e.msg, Message::Prepare { .. })).collect();
    assert_eq!(prepares.len(), 2, "one prepare per owner");
    let txs: std::collections::BTreeSet<TxId> = prepares
        .iter()
        .map(|e| match &e.msg {
            Message::Prepare { tx, .. } => *tx,
            _ => unreachable!(),
        })
        .collect();
    assert_eq!(txs.len(), 1, "both effects in one transaction");
    assert_eq!(dc.coordinator.handover_stats().map(|s| (s.handovers, s.buffer.objects)), Some((1, 0)));
    // Fresh reads go to the owners, which hold the effects once; so do cached reads (from the owners or the
    // buffer, never both).
    assert_eq!(read_one(&mut dc, &y, ReadFrom::Fresh), Value::Counter(4));
    assert_eq!(read_one(&mut dc, &x, ReadFrom::Cache), Value::Counter(3));
    assert_eq!(read_one(&mut dc, &x, ReadFrom::Fresh), Value::Counter(3));
}

#[test]
fn a_transaction_reads_the_effects_buffered_before_it_started_and_none_after() {
    let mut dc = buffering_dc(2, 100);
    let x = counter("x");
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(x.clone(), Op::Increment(1))] }));
    let early = dc.start(None);
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(x.clone(), Op::Increment(10))] }));
    let late = dc.start(None);
    let read = |dc: &mut Dc, tx| dc.call(ClientRequest::Read { tx, objects: vec![x.clone()] });
    assert_eq!(read(&mut dc, early), Ok(ClientResponse::Values(vec![Value::Counter(1)])));
    assert_eq!(read(&mut dc, late), Ok(ClientResponse::Values(vec![Value::Counter(11)])));
    // Its own update is buffered after both.
    let update = ClientRequest::Update { tx: early, updates: vec![(x.clone(), Op::Increment(100))] };
    assert_eq!(dc.call(update), Ok(ClientResponse::Updated));
    assert_eq!(read(&mut dc, early), Ok(ClientResponse::Values(vec![Value::Counter(101)])));
    committed(dc.call(ClientRequest::Commit { tx: early }));
    committed(dc.call(ClientRequest::Commit { tx: late }));
    assert_eq!(read_one(&mut dc, &x, causet_core::coordinator::ReadFrom::Cache), Value::Counter(111));
    for _ in 0..110 {
        dc.advance(1_000);
    }
    assert_eq!(read_one(&mut dc, &x, causet_core::coordinator::ReadFrom::Fresh), Value::Counter(111));
}

/// A transaction open while its node hands a component over reads the component's effects exactly once: from the
/// buffer if its window excludes the handover's commit, from the owner if it includes it.
#[test]
fn a_transaction_open_across_a_handover_counts_the_handed_over_effects_once() {
    let mut dc = buffering_dc(2, 50);
    let [x, y] = <[ObjectId; 2]>::try_from(counters_apart(2, 2)).expect("two keys");
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(x.clone(), Op::Increment(5))] }));
    let across = dc.start(None);
    let read = |dc: &mut Dc, tx, o: &ObjectId| dc.call(ClientRequest::Read { tx, objects: vec![o.clone()] });
    assert_eq!(read(&mut dc, across, &y), Ok(ClientResponse::Values(vec![Value::Counter(0)])));
    for _ in 0..60 {
        dc.advance(1_000);
    }
    assert_eq!(dc.coordinator.handover_stats().map(|s| s.handovers), Some(1), "handed over");
    assert_eq!(read(&mut dc, across, &x), Ok(ClientResponse::Values(vec![Value::Counter(5)])));
    committed(dc.call(ClientRequest::Commit { tx: across }));
    // A transaction begun after the handover, with no clock: its window may exclude the handover or not.
    let after = dc.start(None);
    assert_eq!(read(&mut dc, after, &x), Ok(ClientResponse::Values(vec![Value::Counter(5)])));
    assert_eq!(read(&mut dc, after, &y), Ok(ClientResponse::Values(vec![Value::Counter(0)])));
    committed(dc.call(ClientRequest::Commit { tx: after }));
    // Long after: the handover is below the cache floor and the owners serve it.
    for _ in 0..200 {
        dc.advance(1_000);
    }
    assert_eq!(dc.coordinator.handover_stats().map(|s| s.retired), Some(0), "the handed-over component went");
    assert_eq!(read_one(&mut dc, &x, causet_core::coordinator::ReadFrom::Cache), Value::Counter(5));
}

#[test]
fn a_bounded_counter_decrement_commits_at_the_owner_after_the_buffered_increments() {
    let mut dc = buffering_dc(2, 1_000);
    let b = ObjectId::new("b", "b", CrdtType::CounterB);
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(b.clone(), Op::Increment(5))] }));
    assert_eq!(dc.prepares_sent(), 0, "an increment is buffered");
    let tx = dc.start(None);
    assert_eq!(
        dc.call(ClientRequest::Read { tx, objects: vec![b.clone()] }),
        Ok(ClientResponse::Values(vec![Value::Counter(5)]))
    );
    assert_eq!(
        dc.call(ClientRequest::Update { tx, updates: vec![(b.clone(), Op::Increment(-3))] }),
        Ok(ClientResponse::Updated)
    );
    // The decrement spends rights the owner holds only once the increment is there: the buffer goes first.
    let clock = committed(dc.call(ClientRequest::Commit { tx }));
    assert_eq!(dc.coordinator.handover_stats().map(|s| (s.handovers, s.waits)), Some((1, 1)));
    let body = ClientRequest::StaticRead {
        clock: Some(clock.into()),
        objects: vec![b],
        reads: causet_core::coordinator::ReadFrom::Fresh,
    };
    match dc.call(body) {
        Ok(ClientResponse::StaticValues { values, .. }) => assert_eq!(values, vec![Value::Counter(2)]),
        other => panic!("read failed: {other:?}"),
    }
}

#[test]
fn a_component_at_its_cap_is_handed_over_before_it_grows() {
    let mut dc = buffering_dc_with(2, 1_000, |c| {
        c.cache.as_mut().expect("a cache").max_component_objects = 2;
    });
    let keys: Vec<ObjectId> = (0..3).map(|i| counter(&format!("c{i}"))).collect();
    let update = |dc: &mut Dc, objects: &[&ObjectId]| {
        let updates = objects.iter().map(|o| ((*o).clone(), Op::Increment(1))).collect();
        committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates }))
    };
    update(&mut dc, &[&keys[0], &keys[1]]);
    update(&mut dc, &[&keys[1]]);
    assert_eq!(dc.coordinator.handover_stats().map(|s| (s.handovers, s.buffer.objects)), Some((0, 2)));
    // Linking keys[2] would make three: the component goes in a round of its own, and the transaction, without
    // waiting for that round, starts the next component.
    update(&mut dc, &[&keys[1], &keys[2]]);
    let stats = dc.coordinator.handover_stats().expect("buffering");
    assert_eq!((stats.rounds, stats.handovers, stats.buffer.objects, stats.waits), (1, 1, 2, 0));
    assert_eq!(read_one(&mut dc, &keys[1], causet_core::coordinator::ReadFrom::Cache), Value::Counter(3));
    assert_eq!(read_one(&mut dc, &keys[1], causet_core::coordinator::ReadFrom::Fresh), Value::Counter(3));
}

/// While a round of handovers is under way, a component may grow past its cap up to `OVER_CAP` (4) times it
/// without anyone waiting; past that, transactions wait for the round; every buffered write arrives at its owner.
#[test]
fn a_component_grows_past_its_cap_while_a_round_is_under_way_then_waits_for_it() {
    let mut dc = buffering_dc_with(2, 50, |c| {
        c.op_timeout_us = 200_000;
        c.cache.as_mut().expect("a cache").max_component_objects = 2;
    });
    let late = &counter("late");
    let rest: Vec<ObjectId> =
        (0..).map(|i| counter(&format!("k{i}"))).filter(|o| o.partition(2) != late.partition(2)).take(9).collect();
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(late.clone(), Op::Increment(1))] }));
    // The owner of `late` stops answering; its lease ends and the round waits for it.
    dc.dead = vec![late.partition(2).0];
    for _ in 0..60 {
        dc.advance(1_000);
    }
    assert_eq!(dc.coordinator.handover_stats().map(|s| (s.rounds, s.in_flight)), Some((1, 1)), "the round waits");
    // One component, grown an object at a time past the cap of 2, up to 8 objects, none waiting.
    for pair in rest[..8].windows(2) {
        let updates = pair.iter().map(|o| ((*o).clone(), Op::Increment(1))).collect();
        committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates }));
    }
    let stats = dc.coordinator.handover_stats().expect("buffering");
    assert_eq!((stats.buffer.components, stats.buffer.objects, stats.waits), (1, 8, 0), "{stats:?}");
    // A ninth object would pass 4 x 2: the transaction waits for the round (which waits for the dead owner).
    let tx = dc.start(None);
    let updates = vec![(rest[7].clone(), Op::Increment(1)), (rest[8].clone(), Op::Increment(1))];
    assert_eq!(dc.call(ClientRequest::Update { tx, updates }), Ok(ClientResponse::Updated));
    dc.send(RequestId(100), ClientRequest::Commit { tx });
    assert!(dc.replies.is_empty(), "the commit waits for the round");
    assert_eq!(dc.coordinator.handover_stats().map(|s| s.waits), Some(1));
    // The owner returns. The round's prepare timed out meanwhile and goes again; the waiting transaction's deadline
    // (as long as a prepare's) passes first, and it fails as any transaction waiting for a stuck round does.
    dc.dead.clear();
    for _ in 0..600 {
        dc.advance(1_000);
    }
    let stats = dc.coordinator.handover_stats().expect("buffering");
    assert!(stats.in_flight == 0 && stats.rounds >= 2 && stats.retries >= 1, "{stats:?}");
    let reply = dc.replies.pop_front();
    assert!(matches!(reply, Some((RequestId(100), Err(TxError::Timeout(_))))), "{reply:?}");
    // Everything buffered reached its owner: `late`, and the component that grew to 8 objects.
    assert_eq!(read_one(&mut dc, late, causet_core::coordinator::ReadFrom::Fresh), Value::Counter(1));
    for (i, o) in rest[..9].iter().enumerate() {
        let expected = match i {
            0 | 7 => 1,
            8 => 0,
            _ => 2,
        };
        assert_eq!(read_one(&mut dc, o, causet_core::coordinator::ReadFrom::Fresh), Value::Counter(expected), "{i}");
    }
}

/// A round of handovers held up by an owner that does not answer holds up no transaction reading through the
/// cache: one that starts during the round reads below the round's snapshot, and may itself be buffered.
#[test]
fn transactions_start_and_buffer_while_a_round_of_handovers_waits_for_an_owner() {
    let mut dc = buffering_dc_with(2, 50, |c| c.op_timeout_us = 200_000);
    let [x, y] = <[ObjectId; 2]>::try_from(counters_apart(2, 2)).expect("two keys");
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(y.clone(), Op::Increment(1))] }));
    // y's owner stops answering; the lease ends and the round waits for it.
    dc.dead = vec![y.partition(2).0];
    for _ in 0..60 {
        dc.advance(1_000);
    }
    let stats = dc.coordinator.handover_stats().expect("buffering");
    assert_eq!((stats.rounds, stats.handovers, stats.in_flight), (1, 0, 1), "the round waits");
    // A transaction reads x and buffers an update to it meanwhile.
    let tx = dc.start(None);
    let read = dc.call(ClientRequest::Read { tx, objects: vec![x.clone()] });
    assert_eq!(read, Ok(ClientResponse::Values(vec![Value::Counter(0)])));
    assert_eq!(
        dc.call(ClientRequest::Update { tx, updates: vec![(x.clone(), Op::Increment(2))] }),
        Ok(ClientResponse::Updated)
    );
    committed(dc.call(ClientRequest::Commit { tx }));
    // The owner answers again: the round's prepare times out, goes again, commits; then the next round.
    dc.dead.clear();
    for _ in 0..600 {
        dc.advance(1_000);
    }
    let stats = dc.coordinator.handover_stats().expect("buffering");
    assert!(stats.retries >= 1 && stats.handovers == 2 && stats.in_flight == 0, "{stats:?}");
    assert_eq!(read_one(&mut dc, &y, causet_core::coordinator::ReadFrom::Fresh), Value::Counter(1));
    assert_eq!(read_one(&mut dc, &x, causet_core::coordinator::ReadFrom::Fresh), Value::Counter(2));
}

/// A transaction that starts during a round reads the round's effects as pending, ordered by their sequence
/// numbers: its own assign must number after them (found by the simulator, seed 31: the numbers restarted when the
/// round took the buffer, and a transaction's own assign lost to the round's).
#[test]
fn a_transaction_started_during_a_round_reads_its_own_assign_over_the_rounds() {
    let mut dc = buffering_dc(2, 50);
    let r = ObjectId::new("r", "b", CrdtType::RegisterLww);
    let assign = |v: &str| Op::Assign(v.as_bytes().to_vec());
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(r.clone(), assign("old"))] }));
    for _ in 0..45 {
        dc.advance(1_000);
    }
    // r is cached (the read below needs no owner), then its owner stops answering and the round waits.
    assert_eq!(read_one(&mut dc, &r, causet_core::coordinator::ReadFrom::Cache), Value::Register(b"old".to_vec()));
    dc.dead = vec![r.partition(2).0];
    for _ in 0..10 {
        dc.advance(1_000);
    }
    assert_eq!(dc.coordinator.handover_stats().map(|s| s.in_flight), Some(1), "the round waits for r's owner");
    let tx = dc.start(None);
    assert_eq!(
        dc.call(ClientRequest::Update { tx, updates: vec![(r.clone(), assign("mine"))] }),
        Ok(ClientResponse::Updated)
    );
    let read = dc.call(ClientRequest::Read { tx, objects: vec![r.clone()] });
    assert_eq!(read, Ok(ClientResponse::Values(vec![Value::Register(b"mine".to_vec())])));
}

/// Effects whose handover failed and waits to go again are still read from the buffer (found by the simulator,
/// seed 363: a session's own writes vanished from its reads while their handover waited for its retry).
#[test]
fn a_handover_waiting_for_its_retry_is_still_read_from_the_buffer() {
    let mut dc = buffering_dc_with(2, 400, |c| {
        c.op_timeout_us = 200_000;
        c.retry_interval_us = 100_000;
    });
    let y = counter("y");
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(y.clone(), Op::Increment(1))] }));
    for _ in 0..390 {
        dc.advance(1_000);
    }
    assert_eq!(read_one(&mut dc, &y, causet_core::coordinator::ReadFrom::Cache), Value::Counter(1), "cached");
    // y's owner stops answering: the round starts at the lease's end, its prepare times out 200 ms later, and the
    // handover waits 100 ms to go again.
    dc.dead = vec![y.partition(2).0];
    for _ in 0..260 {
        dc.advance(1_000);
    }
    let stats = dc.coordinator.handover_stats().expect("buffering");
    assert_eq!((stats.retries, stats.in_flight, stats.handovers), (1, 1, 0), "waiting to go again: {stats:?}");
    assert_eq!(read_one(&mut dc, &y, causet_core::coordinator::ReadFrom::Cache), Value::Counter(1));
}

/// A bounded-counter decrement with nothing buffered commits at once (it waited for a round that never came).
#[test]
fn a_bounded_counter_decrement_with_nothing_buffered_commits_at_once() {
    let mut dc = buffering_dc(2, 50);
    let b = ObjectId::new("b", "b", CrdtType::CounterB);
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(b.clone(), Op::Increment(5))] }));
    for _ in 0..60 {
        dc.advance(1_000);
    }
    assert_eq!(dc.coordinator.handover_stats().map(|s| (s.handovers, s.buffer.components)), Some((1, 0)));
    let tx = dc.start(None);
    let read = dc.call(ClientRequest::Read { tx, objects: vec![b.clone()] });
    assert_eq!(read, Ok(ClientResponse::Values(vec![Value::Counter(5)])));
    let update = ClientRequest::Update { tx, updates: vec![(b.clone(), Op::Increment(-2))] };
    assert_eq!(dc.call(update), Ok(ClientResponse::Updated));
    committed(dc.call(ClientRequest::Commit { tx }));
}

/// Fresh reads of `objects` at the owners.
fn read_fresh(dc: &mut Dc, objects: &[ObjectId]) -> Vec<Value> {
    let body = ClientRequest::StaticRead { clock: None, objects: objects.to_vec(), reads: ReadFrom::Fresh };
    match dc.call(body) {
        Ok(ClientResponse::StaticValues { values, .. }) => values,
        other => panic!("read failed: {other:?}"),
    }
}

use causet_core::coordinator::ReadFrom;

/// A buffered commit is answered once its record in the buffer's log is durable, and what was acknowledged survives
/// a crash of the coordinator's node: the coordinator recovered from the log hands it over. A commit whose record
/// was not durable was never acknowledged, and is gone.
#[test]
fn a_buffered_write_is_acknowledged_once_logged_and_survives_a_crash_before_its_handover() {
    let mut dc = buffering_dc(2, 100);
    dc.sync_at_once = false;
    let [x, y] = <[ObjectId; 2]>::try_from(counters_apart(2, 2)).expect("two");
    let updates = vec![(x.clone(), Op::Increment(1)), (y.clone(), Op::Increment(2))];
    dc.send(RequestId(100), ClientRequest::StaticUpdate { clock: None, updates });
    assert!(dc.replies.is_empty(), "answered before its record was durable");
    dc.sync_buffer_log();
    let (request, result) = dc.replies.pop_front().expect("answered once durable");
    assert_eq!(request, RequestId(100));
    committed(result);
    let updates = vec![(x.clone(), Op::Increment(10))];
    dc.send(RequestId(101), ClientRequest::StaticUpdate { clock: None, updates });
    assert!(dc.replies.is_empty(), "answered before its record was durable");
    assert_eq!(dc.prepares_sent(), 0, "nothing handed over yet");
    dc.restart_coordinator(1);
    dc.sync_at_once = true;
    for _ in 0..20 {
        dc.advance(1_000);
    }
    assert_eq!(read_fresh(&mut dc, &[x.clone(), y.clone()]), vec![Value::Counter(1), Value::Counter(2)]);
    let stats = dc.coordinator.handover_stats().expect("a recovered coordinator buffers");
    assert_eq!((stats.handovers, stats.buffer.components), (1, 0), "{stats:?}");
    // The round's end truncated the log to one record: the buffer (empty) and the handovers' join.
    assert!(
        matches!(dc.buffer_log.as_slice(), [(_, BufferRecord::RoundDone { pending, handed: Some(_), .. })] if pending.is_empty()),
        "{:?}",
        dc.buffer_log
    );
}

/// A handover decided before the crash (its commit logged, the commits lost on the way) is committed by the
/// recovered coordinator, under the dead one's transaction, and exactly once: it is not prepared again.
#[test]
fn a_handover_decided_before_a_crash_is_committed_once_by_the_recovered_coordinator() {
    let mut dc = buffering_dc(2, 50);
    let [x, y] = <[ObjectId; 2]>::try_from(counters_apart(2, 2)).expect("two");
    let updates = vec![(x.clone(), Op::Increment(1)), (y.clone(), Op::Increment(2))];
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates }));
    dc.drop_commits = true;
    for _ in 0..60 {
        dc.advance(1_000);
    }
    assert!(dc.buffer_log.iter().any(|(_, r)| matches!(r, BufferRecord::Decided { .. })), "{:?}", dc.buffer_log);
    let prepares = dc.prepares_sent();
    assert_eq!(prepares, 2, "one handover, prepared at both owners");
    assert!(dc.partitions.iter().all(|p| p.prepared_count() == 1), "held prepared at both owners");
    dc.drop_commits = false;
    dc.restart_coordinator(1);
    assert!(dc.partitions.iter().all(|p| p.prepared_count() == 0), "the recovered coordinator committed it");
    assert_eq!(read_one(&mut dc, &x, ReadFrom::Cache), Value::Counter(1), "readable at the caching node meanwhile");
    for _ in 0..20 {
        dc.advance(1_000);
    }
    assert_eq!(read_fresh(&mut dc, &[x.clone(), y.clone()]), vec![Value::Counter(1), Value::Counter(2)]);
    assert_eq!(read_one(&mut dc, &y, ReadFrom::Cache), Value::Counter(2));
    assert_eq!(dc.prepares_sent(), prepares, "never prepared again");
    let stats = dc.coordinator.handover_stats().expect("buffering");
    assert_eq!((stats.handovers, stats.in_flight), (1, 0), "{stats:?}");
}

/// A handover not decided at the crash (an owner did not answer its prepare) goes again as a new transaction of
/// the recovered coordinator; the old one, prepared at the other owner, is aborted there: applied once.
#[test]
fn a_handover_undecided_at_a_crash_goes_again_and_commits_once() {
    let mut dc = buffering_dc_with(2, 50, |c| c.op_timeout_us = 200_000);
    let [x, y] = <[ObjectId; 2]>::try_from(counters_apart(2, 2)).expect("two");
    let updates = vec![(x.clone(), Op::Increment(1)), (y.clone(), Op::Increment(2))];
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates }));
    dc.dead = vec![y.partition(2).0];
    for _ in 0..60 {
        dc.advance(1_000);
    }
    assert!(!dc.buffer_log.iter().any(|(_, r)| matches!(r, BufferRecord::Decided { .. })), "{:?}", dc.buffer_log);
    assert_eq!(dc.partitions[x.partition(2).0 as usize].prepared_count(), 1, "prepared where the owner answered");
    dc.dead.clear();
    dc.restart_coordinator(1);
    for _ in 0..100 {
        dc.advance(10_000);
    }
    assert!(dc.partitions.iter().all(|p| p.prepared_count() == 0), "the old handover was aborted");
    assert_eq!(read_fresh(&mut dc, &[x.clone(), y.clone()]), vec![Value::Counter(1), Value::Counter(2)]);
    let stats = dc.coordinator.handover_stats().expect("buffering");
    assert_eq!((stats.handovers, stats.in_flight, stats.buffer.components), (1, 0, 0), "{stats:?}");
}

/// The questions for a handover the coordinator sent to `to`, by number.
fn questions_to(dc: &Dc, to: CoordinatorId) -> Vec<u64> {
    (dc.sent.iter())
        .filter_map(|e| match (e.to, &e.msg) {
            (Address::DcCoordinator(_, c), Message::FlushBuffer { query }) if c == to => Some(*query),
            _ => None,
        })
        .collect()
}

#[test]
fn a_buffered_commit_names_its_buffer_and_another_coordinators_question_hands_it_over_first() {
    let mut dc = buffering_dc(2, 10_000);
    let x = counter("x");
    let reply = dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(x.clone(), Op::Increment(3))] });
    let Ok(ClientResponse::Committed { token, .. }) = reply else { panic!("not committed: {reply:?}") };
    assert_eq!(
        token,
        Some(BufferToken { dc: DcId(0), coordinator: dc.coordinator.id() }),
        "the clock names the buffer"
    );
    assert_eq!(dc.prepares_sent(), 0, "buffered, long before its lease ends");
    // The client moved: a coordinator elsewhere asks, long before the lease ends.
    let asker = Address::DcCoordinator(DcId(0), CoordinatorId(9));
    dc.coordinator.handle_message(dc.now, asker, Message::FlushBuffer { query: 7 });
    dc.settle();
    assert_eq!(dc.prepares_sent(), 1, "handed over at once, long before its lease ends");
    let answers: Vec<&VectorClock> = (dc.sent.iter())
        .filter_map(|e| match &e.msg {
            Message::BufferFlushed { query: 7, handed } if e.to == asker => Some(handed),
            _ => None,
        })
        .collect();
    let [handed] = answers[..] else { panic!("one answer expected: {answers:?}") };
    // At the answer's vector, the owners show the write.
    let read = ClientRequest::StaticRead {
        clock: Some(handed.clone().into()),
        objects: vec![x],
        reads: causet_core::coordinator::ReadFrom::Fresh,
    };
    match dc.call(read) {
        Ok(ClientResponse::StaticValues { values, .. }) => assert_eq!(values, vec![Value::Counter(3)]),
        other => panic!("{other:?}"),
    }
    assert_eq!(dc.coordinator.handover_stats().map(|s| s.asked), Some(1));
}

#[test]
fn a_start_whose_clock_names_another_buffer_waits_for_its_handover_and_starts_above_it() {
    let mut dc = Dc::new(2);
    // What the other coordinator's handover committed at, as its answer will say.
    let handed = committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(set("x"), add("a"))] }));
    let elsewhere = CoordinatorId(9);
    let token = Some(BufferToken { dc: DcId(0), coordinator: elsewhere });
    let clock = ClientClock::new(VectorClock::zero(1), token);
    dc.send(RequestId(100), ClientRequest::Start { clock: Some(clock.clone()), reads: Default::default() });
    assert!(dc.replies.is_empty(), "the start waits for the handover");
    assert_eq!(questions_to(&dc, elsewhere).len(), 1);
    // Unanswered, the question goes again.
    dc.advance(dc.config.retry_interval_us);
    let asked = questions_to(&dc, elsewhere);
    assert_eq!(asked.len(), 2, "asked again");
    assert!(dc.replies.is_empty());
    let from = Address::DcCoordinator(DcId(0), elsewhere);
    dc.coordinator.handle_message(dc.now, from, Message::BufferFlushed { query: asked[0], handed: handed.clone() });
    dc.settle();
    match dc.replies.pop_front() {
        Some((RequestId(100), Ok(ClientResponse::Started { snapshot, token, .. }))) => {
            assert!(handed.le(&snapshot), "the snapshot {snapshot} covers the handover {handed}");
            assert_eq!(token, None, "this coordinator buffers nothing");
        }
        other => panic!("{other:?}"),
    }
    // A token of this coordinator itself, or of an earlier run of its node's shard (whose buffer it recovered),
    // needs no question.
    dc.start(Some(clock.vector.clone()));
    for (i, own) in [dc.coordinator.id(), CoordinatorId::compose(0, 7, 0)].into_iter().enumerate() {
        let own = ClientClock::new(clock.vector.clone(), Some(BufferToken { dc: DcId(0), coordinator: own }));
        let request = RequestId(200 + i as u64);
        dc.send(request, ClientRequest::Start { clock: Some(own), reads: Default::default() });
        assert!(matches!(dc.replies.pop_front(), Some((r, Ok(ClientResponse::Started { .. }))) if r == request));
    }
    assert_eq!(questions_to(&dc, dc.coordinator.id()).len(), 0);
    // Several tokens (a client merged sessions' clocks): the start waits for every answer.
    let (a, b) = (CoordinatorId(11), CoordinatorId(12));
    let tokens = [a, b].map(|coordinator| BufferToken { dc: DcId(0), coordinator }).to_vec();
    let two = ClientClock { vector: VectorClock::zero(1), tokens };
    dc.send(RequestId(250), ClientRequest::Start { clock: Some(two), reads: Default::default() });
    let answer = |dc: &mut Dc, c: CoordinatorId| {
        let query = questions_to(dc, c)[0];
        let msg = Message::BufferFlushed { query, handed: handed.clone() };
        dc.coordinator.handle_message(dc.now, Address::DcCoordinator(DcId(0), c), msg);
        dc.settle();
    };
    answer(&mut dc, a);
    assert!(dc.replies.is_empty(), "one answer of two");
    answer(&mut dc, b);
    assert!(matches!(dc.replies.pop_front(), Some((RequestId(250), Ok(ClientResponse::Started { .. })))));
    // A token that names no coordinator of the cluster is refused.
    let bogus = ClientClock::new(VectorClock::zero(1), Some(BufferToken { dc: DcId(3), coordinator: a }));
    match dc.call(ClientRequest::Start { clock: Some(bogus), reads: Default::default() }) {
        Err(TxError::InvalidClock(why)) => assert!(why.contains("buffer token"), "{why}"),
        other => panic!("{other:?}"),
    }
    // One nobody answers times out.
    let gone =
        ClientClock::new(VectorClock::zero(1), Some(BufferToken { dc: DcId(0), coordinator: CoordinatorId(10) }));
    dc.send(RequestId(300), ClientRequest::Start { clock: Some(gone), reads: Default::default() });
    for _ in 0..=dc.config.op_timeout_us / dc.config.retry_interval_us {
        dc.advance(dc.config.retry_interval_us);
    }
    match dc.replies.pop_front() {
        Some((RequestId(300), Err(TxError::Timeout(why)))) => assert!(why.contains("hand them over"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// A decision that gets no acknowledgement is sent again, backing off: the retry interval doubled at each resend up
/// to 32 times it, not a copy every interval (simulator seed 862: copies every interval kept a congested link
/// congested). The commit still lands once the partitions hear it.
#[test]
fn an_unacknowledged_commit_is_resent_with_back_off_until_it_lands() {
    let mut dc = Dc::new(2);
    let [x, y] = <[ObjectId; 2]>::try_from(counters_apart(2, 2)).expect("two");
    let interval = dc.config.retry_interval_us;
    dc.drop_commits = true;
    let updates = vec![(x.clone(), Op::Increment(1)), (y.clone(), Op::Increment(2))];
    dc.send(RequestId(100), ClientRequest::StaticUpdate { clock: None, updates });
    let commits = |dc: &Dc| dc.sent.iter().filter(|e| matches!(e.msg, Message::Commit { .. })).count();
    assert_eq!(commits(&dc), 2, "sent to both owners, and dropped");
    // Over 63 intervals: resends after 1, 2, 4, 8, 16 and 32 intervals (every interval would be 63 rounds).
    for _ in 0..63 {
        dc.advance(interval);
    }
    assert_eq!(commits(&dc), 2 * 7, "one first copy and six resends per owner");
    dc.drop_commits = false;
    for _ in 0..32 {
        dc.advance(interval);
    }
    let reply = dc.replies.pop_front();
    assert!(matches!(reply, Some((RequestId(100), Ok(ClientResponse::Committed { .. })))), "{reply:?}");
    assert!(dc.partitions.iter().all(|p| p.prepared_count() == 0), "committed at both owners");
}

/// Partial replication with static ring binding: a read of an object this DC does not hold goes to the holder in
/// its ring; when that holder does not answer in time, or refuses, the same read goes to the next ring's holder,
/// and the first answer wins.
#[test]
fn a_read_of_an_object_held_elsewhere_goes_to_the_ring_and_fails_over_to_the_next_ring() {
    let mut config = Config::new(3, DcId(0), 2);
    config.placement = causet_core::placement::Placement::of_indices(&[vec![0, 1], vec![2]], [b"r".to_vec()])
        .reading_from(causet_core::placement::RingChoice::Own);
    let mut dc = Dc::with_config(config.clone());
    dc.advance(1_000);
    let held_elsewhere = |i: u32| {
        let o = ObjectId::new(format!("r{i}"), "r", CrdtType::SetAw);
        (o.partition(2).0 % 2 == 1).then_some(o)
    };
    let objects: Vec<ObjectId> = (0..).filter_map(held_elsewhere).take(2).collect();
    let reads_to = |dc: &Dc, to: DcId| -> Vec<(u64, Address, VectorClock)> {
        (dc.sent.iter())
            .filter_map(|e| match (&e.msg, e.to) {
                (Message::Read { request, snapshot, .. }, Address::Peer(d, _)) if d == to => {
                    Some((*request, e.from, snapshot.clone()))
                }
                _ => None,
            })
            .collect()
    };
    // The holder in DC 0's ring (DC 1) is asked, as this DC's coordinator, and does not answer.
    dc.send(
        RequestId(1),
        ClientRequest::StaticRead { clock: None, objects: vec![objects[0].clone()], reads: Default::default() },
    );
    let first = reads_to(&dc, DcId(1));
    assert_eq!(first.len(), 1, "one read to DC 1: {:?}", dc.sent);
    assert_eq!(first[0].1, Address::DcCoordinator(DcId(0), dc.coordinator.id()), "the answer must find its way back");
    assert!(reads_to(&dc, DcId(2)).is_empty(), "the other ring is not asked at first");
    dc.advance(config.ring_failover_us / 2);
    assert!(reads_to(&dc, DcId(2)).is_empty(), "nor before the failover interval");
    dc.advance(config.ring_failover_us);
    let second = reads_to(&dc, DcId(2));
    assert_eq!(second.len(), 1, "the next ring's holder is asked the same read");
    assert_eq!((second[0].0, &second[0].2), (first[0].0, &first[0].2), "same fetch, same snapshot");
    // DC 2 answers; DC 1's late answer is ignored.
    let p = objects[0].partition(2);
    let tx = dc.sent.iter().find_map(|e| match e.msg {
        Message::Read { tx, .. } => Some(tx),
        _ => None,
    });
    let tx = tx.expect("a read");
    let answer = |v: &str| {
        let mut set = causet_crdt::Crdt::new(CrdtType::SetAw);
        let mut ctx = causet_crdt::EffectCtx::new(causet_crdt::TxTag(7), 2);
        let effect = set.generate(&add(v), &mut ctx).expect("an add");
        set.apply(&effect, causet_crdt::Stamp::PENDING).expect("applies");
        Message::ReadReply { tx, request: first[0].0, result: Ok(vec![set]) }
    };
    dc.coordinator.handle_message(dc.now, Address::Peer(DcId(2), p), answer("from-2"));
    dc.coordinator.handle_message(dc.now, Address::Peer(DcId(1), p), answer("from-1"));
    dc.settle();
    let replies: Vec<_> = dc.replies.drain(..).collect();
    assert_eq!(replies.len(), 1, "one answer to the client: {replies:?}");
    match &replies[0] {
        (RequestId(1), Ok(ClientResponse::StaticValues { values, .. })) => {
            assert_eq!(values, &vec![Value::Set(vec![b"from-2".to_vec()])]);
        }
        other => panic!("unexpected {other:?}"),
    }
    // A refusal (the snapshot is below what the holder keeps) goes to the next ring at once.
    let before = reads_to(&dc, DcId(2)).len();
    dc.send(
        RequestId(2),
        ClientRequest::StaticRead { clock: None, objects: vec![objects[1].clone()], reads: Default::default() },
    );
    let asked = reads_to(&dc, DcId(1));
    let (request, _, _) = asked.last().cloned().expect("asked DC 1");
    let tx = dc.sent.iter().rev().find_map(|e| match e.msg {
        Message::Read { tx, .. } => Some(tx),
        _ => None,
    });
    let refused = Message::ReadReply {
        tx: tx.expect("a read"),
        request,
        result: Err(causet_core::message::RemoteError::SnapshotTooOld),
    };
    dc.coordinator.handle_message(dc.now, Address::Peer(DcId(1), objects[1].partition(2)), refused);
    dc.settle();
    assert!(dc.replies.is_empty(), "no error for the client while another ring may answer: {:?}", dc.replies);
    assert_eq!(reads_to(&dc, DcId(2)).len(), before + 1, "DC 2 asked at once");
    assert_eq!(dc.coordinator.remote_reads(), (2, 2));
}

/// A counter of bucket `r` that DC 1 holds, with rings `[[0, 1], [2]]` over two partitions (the odd partition).
fn counter_dc1_holds() -> ObjectId {
    (0..)
        .map(|i| ObjectId::new(format!("r{i}"), "r", CrdtType::CounterPn))
        .find(|o| o.partition(2).0 % 2 == 1)
        .expect("an object DC 1 holds")
}

/// Reads from the nearest ring: the first read of an object held elsewhere goes to the own ring's holder, and
/// the other ring's holder is sent a copy to measure it (a probe, whose answer the transaction does not take);
/// once both answered, reads go to the faster; a holder whose read is late loses the next reads at once.
#[test]
fn reads_go_to_the_holder_measured_fastest_and_leave_one_that_stops_answering() {
    let mut config = Config::new(3, DcId(0), 2);
    config.placement = causet_core::placement::Placement::of_indices(&[vec![0, 1], vec![2]], [b"r".to_vec()]);
    let mut dc = Dc::with_config(config.clone());
    dc.advance(1_000);
    let o = counter_dc1_holds();
    let p = o.partition(2);
    // Reads sent to other DCs since the `from`-th message: (holder, tx, request).
    let reads_since = |dc: &Dc, from: usize| -> Vec<(DcId, TxId, u64)> {
        (dc.sent.iter().skip(from))
            .filter_map(|e| match (&e.msg, e.to) {
                (Message::Read { tx, request, .. }, Address::Peer(d, _)) => Some((d, *tx, *request)),
                _ => None,
            })
            .collect()
    };
    let read = |dc: &mut Dc, id: u64| {
        let at = dc.sent.len();
        let objects = vec![o.clone()];
        dc.send(RequestId(id), ClientRequest::StaticRead { clock: None, objects, reads: Default::default() });
        reads_since(dc, at)
    };
    let answer = |dc: &mut Dc, from: DcId, tx: TxId, request: u64| {
        let msg = Message::ReadReply { tx, request, result: Ok(vec![causet_crdt::Crdt::new(CrdtType::CounterPn)]) };
        dc.coordinator.handle_message(dc.now, Address::Peer(from, p), msg);
        dc.settle();
    };
    // First: DC 1 (the own ring's) for the transaction, and a probe of DC 2 with a request of its own.
    let sent = read(&mut dc, 1);
    assert_eq!(sent.len(), 2, "{sent:?}");
    let at = |d: u16| *sent.iter().find(|s| s.0 == DcId(d)).expect("a read to each holder");
    let (own, probe) = (at(1), at(2));
    assert_ne!(own.2, probe.2, "the probe's answer is not the transaction's");
    // DC 2 answers the probe in 20 ms; the transaction still waits for DC 1, which answers in 80.
    dc.advance(20_000);
    answer(&mut dc, DcId(2), probe.1, probe.2);
    assert!(dc.replies.is_empty(), "a probe's answer is not the transaction's: {:?}", dc.replies);
    dc.advance(60_000);
    answer(&mut dc, DcId(1), own.1, own.2);
    assert_eq!(dc.replies.drain(..).count(), 1);
    assert_eq!(dc.coordinator.ring_probes().1, vec![None, Some(80_000), Some(20_000)]);
    // Now DC 2 is the nearest: the next read goes there, with no probe (DC 1 answered just now).
    let sent = read(&mut dc, 2);
    assert_eq!(sent.iter().map(|s| s.0).collect::<Vec<_>>(), vec![DcId(2)]);
    // DC 2 stops answering: once its read is later than DC 1's 80 ms, reads go to DC 1 again.
    dc.advance(50_000);
    assert_eq!(read(&mut dc, 3).iter().map(|s| s.0).collect::<Vec<_>>(), vec![DcId(2)], "50 ms late is not yet");
    dc.advance(40_000);
    assert_eq!(read(&mut dc, 4).iter().map(|s| s.0).collect::<Vec<_>>(), vec![DcId(1)], "90 ms late");
    assert_eq!(dc.coordinator.remote_reads().0, 4, "probes are not counted as reads");
    assert_eq!(dc.coordinator.ring_probes().0, 1);
}

/// A lease in which few reads through the cache hit makes the transactions that leave the choice to the node read
/// fresh for the next leases (the cache's gate); one that asks for the cache still gets it. A session's buffered
/// write is handed over before its first bypassing read, which sees it.
#[test]
fn a_cache_that_does_not_pay_is_bypassed_and_buffered_writes_are_handed_over_first() {
    let mut dc = buffering_dc(2, 100);
    let x = counter("x");
    // A lease of reads of keys never read before: every one a miss. Near its end, a buffered write.
    for i in 0..80 {
        read_one(&mut dc, &counter(&format!("cold{i}")), ReadFrom::Leader);
    }
    for _ in 0..90 {
        dc.advance(1_000);
    }
    committed(dc.call(ClientRequest::StaticUpdate { clock: None, updates: vec![(x.clone(), Op::Increment(3))] }));
    assert_eq!(dc.prepares_sent(), 0, "buffered");
    assert!(!dc.sent.iter().any(|e| matches!(e.msg, Message::Read { .. })), "all through the cache so far");
    for _ in 0..15 {
        dc.advance(1_000);
    }
    let stats = dc.coordinator.cache_stats().expect("a cache");
    assert_eq!((stats.bypasses, stats.bypassing, stats.hits), (1, true, 0));
    assert_eq!(dc.coordinator.handover_stats().map(|s| s.handovers), Some(0), "the lease of x's write is not over");
    // The next read that leaves the choice to the node reads fresh, once x's write is at its owner.
    dc.sent.clear();
    let request = RequestId(1_000);
    dc.send(request, ClientRequest::StaticRead { clock: None, objects: vec![x.clone()], reads: ReadFrom::Leader });
    for _ in 0..5 {
        dc.advance(1_000);
    }
    match dc.replies.pop_front() {
        Some((r, Ok(ClientResponse::StaticValues { values, .. }))) if r == request => {
            assert_eq!(values, vec![Value::Counter(3)], "the buffered write, read fresh after its handover")
        }
        other => panic!("the bypassing read did not finish: {other:?}"),
    }
    assert_eq!(dc.coordinator.handover_stats().map(|s| s.handovers), Some(1), "handed over first");
    assert!(dc.sent.iter().any(|e| matches!(e.msg, Message::Read { .. })), "a plain read");
    assert!(!dc.sent.iter().any(|e| matches!(e.msg, Message::Fetch { .. })), "no fetch with boxes");
    assert_eq!(dc.coordinator.cache_stats().map(|s| s.bypassed), Some(1));
    // A transaction that asks for the cache still reads through it.
    dc.sent.clear();
    assert_eq!(read_one(&mut dc, &x, ReadFrom::Cache), Value::Counter(3));
    assert!(dc.sent.iter().any(|e| matches!(e.msg, Message::Fetch { .. })), "fetched with its box");
    // Eight leases later the cache is tried again.
    for _ in 0..800 {
        dc.advance(1_000);
    }
    dc.sent.clear();
    read_one(&mut dc, &counter("new"), ReadFrom::Leader);
    assert!(!dc.coordinator.cache_stats().expect("a cache").bypassing);
    assert!(dc.sent.iter().any(|e| matches!(e.msg, Message::Fetch { .. })), "through the cache again");
}

/// With the cache on and every object held here, the partitions tell the coordinators of every write (notices,
/// `causet_core::away`): a cached state stays usable, above the clock a later commit gave the session, for as long
/// as nobody wrote its object; once somebody did, it is fetched again.
#[test]
fn a_cached_state_nobody_wrote_since_serves_a_session_whose_clock_moved_past_its_box() {
    let mut dc = caching_dc();
    let [x, y] = <[ObjectId; 2]>::try_from(counters_apart(2, 2)).expect("two keys");
    let read = |dc: &mut Dc, clock: &VectorClock, object: &ObjectId| {
        let body = ClientRequest::StaticRead {
            clock: Some(clock.clone().into()),
            objects: vec![object.clone()],
            reads: ReadFrom::Leader,
        };
        match dc.call(body) {
            Ok(ClientResponse::StaticValues { mut values, .. }) => values.remove(0),
            other => panic!("read failed: {other:?}"),
        }
    };
    let update = |dc: &mut Dc, clock: &VectorClock, object: &ObjectId| {
        let updates = vec![(object.clone(), Op::Increment(1))];
        committed(dc.call(ClientRequest::StaticUpdate { clock: Some(clock.clone().into()), updates }))
    };
    let zero = VectorClock::zero(1);
    assert_eq!(read(&mut dc, &zero, &x), Value::Counter(0), "fetched and cached");
    // The session commits a write of y: its clock is now above x's box.
    let clock = update(&mut dc, &zero, &y);
    for _ in 0..3 {
        dc.advance(1_000);
    }
    assert_eq!(read(&mut dc, &clock, &x), Value::Counter(0));
    let stats = dc.coordinator.cache_stats().expect("a cache");
    assert_eq!((stats.hits, stats.extended, stats.refetches), (1, 1, 0), "raised over a stretch nobody wrote x in");
    // Now x is written: the cached state is stale for a session that saw the write.
    let clock = update(&mut dc, &clock, &x);
    for _ in 0..3 {
        dc.advance(1_000);
    }
    assert_eq!(read(&mut dc, &clock, &x), Value::Counter(1), "fetched again, with the write");
    let stats = dc.coordinator.cache_stats().expect("a cache");
    assert_eq!((stats.hits, stats.refetches), (1, 1));
}

/// A DC of three in rings `[[0, 1], [2]]` whose coordinator caches states of `o`, an object DC 1 holds and reads
/// from DC 1 (the own ring's holder): the setting of the background fetch tests.
struct RingCache {
    dc: Dc,
    o: ObjectId,
    p: PartitionId,
}

impl RingCache {
    fn new() -> Self {
        let mut config = Config::new(3, DcId(0), 2);
        config.placement = causet_core::placement::Placement::of_indices(&[vec![0, 1], vec![2]], [b"r".to_vec()])
            .reading_from(causet_core::placement::RingChoice::Own);
        config.cache =
            Some(causet_core::cache::CacheConfig { lease_us: 100_000, memory_bytes: 1 << 20, ..Default::default() });
        let mut dc = Dc::with_config(config);
        for _ in 0..5 {
            dc.advance(1_000);
        }
        let o = counter_dc1_holds();
        let p = o.partition(2);
        RingCache { dc, o, p }
    }

    /// A transaction fetches `o` (a counter at 1) from DC 1 and caches it; a second reads it from the cache, which
    /// buys the entry background fetches.
    fn fetch_then_hit(&mut self) {
        let at = self.dc.sent.len();
        self.read(1, None);
        let first = self.fetches_since(at);
        assert_eq!(first.len(), 1, "{:?}", self.dc.sent);
        self.answer(first[0].clone(), 1, VectorClock::zero(3), 0b111);
        assert_eq!(self.value(), Value::Counter(1));
        self.read(2, None);
        assert_eq!(self.value(), Value::Counter(1));
        assert!(self.fetches_since(at).len() == 1, "a hit");
    }

    /// The fetches sent to DC 1 since the `from`-th message: (tx, request, snapshot).
    fn fetches_since(&self, from: usize) -> Vec<(TxId, u64, VectorClock)> {
        (self.dc.sent.iter().skip(from))
            .filter_map(|e| match (&e.msg, e.to) {
                (Message::Fetch { tx, request, snapshot, .. }, Address::Peer(d, q)) if d == DcId(1) && q == self.p => {
                    Some((*tx, *request, snapshot.clone()))
                }
                _ => None,
            })
            .collect()
    }

    /// DC 1 answers a fetch with a counter at `n`, exact from `lo` up to the snapshot fetched at, open or not.
    fn answer(&mut self, (tx, request, snapshot): (TxId, u64, VectorClock), n: i64, lo: VectorClock, open: u64) {
        let mut state = causet_crdt::Crdt::new(CrdtType::CounterPn);
        let mut ctx = causet_crdt::EffectCtx::new(causet_crdt::TxTag(7), 1);
        let effect = state.generate(&Op::Increment(n), &mut ctx).expect("an increment");
        state.apply(&effect, causet_crdt::Stamp::PENDING).expect("applies");
        let f = causet_core::message::Fetched { state, lo, hi: snapshot, open };
        let msg = Message::Fetched { tx, request, result: Ok(vec![f]) };
        self.dc.coordinator.handle_message(self.dc.now, Address::Peer(DcId(1), self.p), msg);
        self.dc.settle();
    }

    /// A static read of `o` by a session at `clock`.
    fn read(&mut self, id: u64, clock: Option<VectorClock>) {
        let objects = vec![self.o.clone()];
        let body = ClientRequest::StaticRead { clock: clock.map(Into::into), objects, reads: Default::default() };
        self.dc.send(RequestId(id), body);
    }

    fn value(&mut self) -> Value {
        match self.dc.replies.pop_front() {
            Some((_, Ok(ClientResponse::StaticValues { values, .. }))) => values[0].clone(),
            other => panic!("no value: {other:?}"),
        }
    }

    /// DC 1 writes `o` at `at` (its entry): the notice comes with a stable snapshot that holds the write, which
    /// this returns.
    fn write_at_dc1(&mut self, at: u64) -> VectorClock {
        self.stable_at_dc1(at, true)
    }

    /// The DC's stable snapshot reaches `at` in DC 1's entry, with the notices of the stretch up to it: one of a
    /// write of `o` at `at`, or none.
    fn stable_at_dc1(&mut self, at: u64, write: bool) -> VectorClock {
        let mut stable = self.dc.coordinator.stable_snapshot().clone();
        let from = stable.clone();
        stable.set(DcId(1), Timestamp(at));
        let notices = if write { vec![(DcId(1), self.o.fingerprint(), Timestamp(at))] } else { Vec::new() };
        let chunk = causet_core::away::Chunk { from, notices };
        let msg = Message::Stable { stable: stable.clone(), gc: stable.clone(), away: Some(chunk) };
        self.dc.coordinator.handle_message(self.dc.now, Address::Stabilizer, msg);
        self.dc.settle();
        stable
    }
}

/// Partial replication with the cache: a state of an object held elsewhere that transactions read, made stale by
/// a notice of a write, is fetched again at once in the background (not by a transaction: a request of its own, at
/// the stable snapshot that holds the write), and the next transaction of a session that saw the write reads the
/// new state from the cache without a round trip.
#[test]
fn a_cached_state_a_write_made_stale_is_fetched_again_in_the_background_and_the_next_read_hits() {
    let mut t = RingCache::new();
    t.fetch_then_hit();
    // DC 1 writes o at 50 ms.
    let at = t.dc.sent.len();
    let stable = t.write_at_dc1(50_000);
    let refresh = t.fetches_since(at);
    assert_eq!(refresh.len(), 1, "fetched again at once: {:?}", &t.dc.sent[at..]);
    assert_eq!(refresh[0].0.seq, u64::MAX, "for no transaction");
    assert_eq!(refresh[0].2.get(DcId(1)), Timestamp(50_000), "at the stable snapshot, which holds the write");
    assert!(t.dc.replies.is_empty());
    t.answer(refresh[0].clone(), 5, refresh[0].2.clone(), 0b111);
    let stats = t.dc.coordinator.cache_stats().expect("a cache");
    assert_eq!((stats.refreshes, stats.refreshed), (1, 1));
    // A session that saw the write reads the new state from the cache.
    let at = t.dc.sent.len();
    t.dc.advance(1_000);
    t.read(3, Some(stable));
    assert_eq!(t.value(), Value::Counter(5));
    assert!(t.fetches_since(at).is_empty(), "no round trip");
    assert_eq!(t.dc.coordinator.cache_stats().map(|s| (s.hits, s.misses, s.refetches)), Some((2, 1, 0)));
}

/// A read that misses while a background fetch of its object is in flight waits for it instead of fetching the
/// object itself, and is served by its answer when that is exact at the snapshot the transaction fetches at;
/// when it is not, or no answer comes within `ring_failover_us`, the read is sent as any other.
#[test]
fn a_read_that_misses_while_its_object_is_fetched_in_the_background_waits_for_that_fetch() {
    let mut t = RingCache::new();
    t.fetch_then_hit();
    // DC 1 writes o; before the background fetch is answered, a session that saw the write reads o.
    let at = t.dc.sent.len();
    let stable = t.write_at_dc1(50_000);
    let refresh = t.fetches_since(at);
    assert_eq!(refresh.len(), 1);
    t.read(3, Some(stable.clone()));
    assert!(t.dc.replies.is_empty(), "it waits");
    assert_eq!(t.fetches_since(at).len(), 1, "and sends no fetch of its own");
    t.dc.advance(1_000);
    t.answer(refresh[0].clone(), 5, refresh[0].2.clone(), 0b111);
    assert_eq!(t.value(), Value::Counter(5), "served by the background fetch");
    assert_eq!(t.fetches_since(at).len(), 1, "still no fetch of its own");
    let stats = t.dc.coordinator.cache_stats().expect("a cache");
    assert_eq!((stats.joined, stats.joined_served), (1, 1));
    // Another write, then the stable snapshot moves on with no notice of o; a session that saw the write waits for
    // the background fetch, which comes back exact only at the snapshot it asked for (DC 1 had a write after it
    // whose notice is not here yet): not where the transaction fetches, so the read is sent after all.
    t.read(4, Some(stable));
    assert_eq!(t.value(), Value::Counter(5), "a hit: buys more background fetches");
    let at = t.dc.sent.len();
    let stable = t.write_at_dc1(60_000);
    let refresh = t.fetches_since(at);
    assert_eq!(refresh.len(), 1);
    let later = t.stable_at_dc1(70_000, false);
    t.read(5, Some(stable));
    assert!(t.dc.replies.is_empty() && t.fetches_since(at).len() == 1, "it waits");
    t.answer(refresh[0].clone(), 6, refresh[0].2.clone(), 0);
    let own = t.fetches_since(at);
    assert_eq!(own.len(), 2, "sent after all: {own:?}");
    assert_eq!(own[1].2, later, "at the top of its window");
    assert!(t.dc.replies.is_empty());
    t.answer(own[1].clone(), 7, own[1].2.clone(), 0b111);
    assert_eq!(t.value(), Value::Counter(7));
    let stats = t.dc.coordinator.cache_stats().expect("a cache");
    assert_eq!((stats.joined, stats.joined_served), (2, 1));
    // A background fetch in flight when a later write's notice came: a read of a session that saw that write does
    // not wait for it (it could not serve the read) and fetches at once.
    t.read(6, Some(later.clone()));
    assert_eq!(t.value(), Value::Counter(7));
    let at = t.dc.sent.len();
    t.write_at_dc1(80_000);
    assert_eq!(t.fetches_since(at).len(), 1, "the background fetch");
    let later = t.write_at_dc1(90_000);
    t.read(7, Some(later.clone()));
    let own = t.fetches_since(at);
    assert_eq!(own.len(), 2, "fetched at once: {own:?}");
    t.answer(own[1].clone(), 8, own[1].2.clone(), 0b111);
    assert_eq!(t.value(), Value::Counter(8));
    assert_eq!(t.dc.coordinator.cache_stats().map(|s| s.joined), Some(2));
    // A write whose background fetch DC 1 never answers: the read that waits for it is sent once
    // `ring_failover_us` has passed since that fetch.
    t.read(8, Some(later));
    assert_eq!(t.value(), Value::Counter(8));
    let (at, sent_us) = (t.dc.sent.len(), t.dc.now);
    let stable = t.write_at_dc1(100_000);
    assert_eq!(t.fetches_since(at).len(), 1, "the background fetch");
    t.read(9, Some(stable));
    assert_eq!(t.fetches_since(at).len(), 1, "it waits");
    while t.fetches_since(at).len() == 1 {
        assert!(t.dc.now < sent_us + 10_000_000, "never sent");
        t.dc.advance(10_000);
    }
    let failover = Config::new(3, DcId(0), 2).ring_failover_us;
    assert!(t.dc.now >= sent_us + failover && t.dc.now < sent_us + failover + 20_000, "sent at {}", t.dc.now);
    let own = t.fetches_since(at);
    assert_ne!(own[1].0.seq, u64::MAX, "the transaction's own fetch");
    assert!(t.dc.replies.is_empty());
    t.answer(own[1].clone(), 9, own[1].2.clone(), 0b111);
    assert_eq!(t.value(), Value::Counter(9));
}
