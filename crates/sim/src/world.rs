//! The deterministic simulator: one DC's partitions, coordinators and stabilizer, many client sessions, in one
//! thread with virtual time and one seeded random source.
//!
//! The network delays every message by a random amount, reorders messages across links and keeps each link FIFO.
//! Every node has its own clock, skewed and drifting. Partitions crash and restart; their simulated disk loses
//! every record not yet synced. The run has a safety phase (workload under faults) and a liveness phase (faults
//! stop, crashed partitions restart, every session must finish, and a final read must find every acknowledged
//! write).

use crate::history::{HistOp, History, ObjectKind, ObjectName, Observed, Outcome, TxRecord};
use crate::workload::{Plan, Planned, Step, Workload, WorkloadConfig};
use causet_core::coordinator::{ClientRequest, ClientResponse, Coordinator, CoordinatorOutput, TxError};
use causet_core::partition::{Checkpoint, Partition, PartitionOutput};
use causet_core::record::{LogRecord, Lsn};
use causet_core::stabilizer::Stabilizer;
use causet_core::{
    Address, Bug, ClientId, ClockKind, Config, CoordinatorId, DcId, Envelope, ObjectId, PartitionId, RequestId, TxId,
    VectorClock,
};
use causet_crdt::Value;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

/// Virtual time starts here, so that negative clock offsets stay positive.
const EPOCH_US: u64 = 1_000_000_000;

/// Faults the simulator injects.
#[derive(Clone, Debug)]
pub struct Faults {
    /// Largest clock offset of a node from true time, either way.
    pub skew_us_max: u64,
    /// Largest clock drift, parts per million, either way.
    pub drift_ppm_max: u64,
    /// Smallest one-way message delay.
    pub delay_us_min: u64,
    /// Largest one-way message delay.
    pub delay_us_max: u64,
    /// Mean time between partition crashes (0: no crashes).
    pub crash_every_us: u64,
    /// Longest a crashed partition stays down.
    pub downtime_us_max: u64,
    /// Longest an fsync takes.
    pub fsync_us_max: u64,
}

impl Faults {
    /// No skew, tiny delays, no crashes.
    pub fn none() -> Self {
        Self {
            skew_us_max: 0,
            drift_ppm_max: 0,
            delay_us_min: 10,
            delay_us_max: 100,
            crash_every_us: 0,
            downtime_us_max: 0,
            fsync_us_max: 100,
        }
    }
}

/// One simulation's parameters. [`SimConfig::from_seed`] derives them all from the seed.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The seed of every random choice.
    pub seed: u64,
    /// Partitions in the DC.
    pub partitions: u32,
    /// Coordinators in the DC.
    pub coordinators: u32,
    /// Client sessions.
    pub sessions: u32,
    /// Virtual duration of the safety phase.
    pub duration_us: u64,
    /// Largest think time of a session between transactions.
    pub think_us_max: u64,
    /// Probability that a session moves to another coordinator before a transaction.
    pub switch_coordinator: f64,
    /// The clock partitions and coordinators run.
    pub clock: ClockKind,
    /// Write-write certification.
    pub certify_writes: bool,
    /// A deliberate protocol bug (to validate the checker).
    pub bug: Option<Bug>,
    /// Faults.
    pub faults: Faults,
    /// The workload.
    pub workload: WorkloadConfig,
}

impl SimConfig {
    /// Parameters derived from a seed: topology, clocks, delays, crashes and workload all vary.
    pub fn from_seed(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_c0de);
        let crashes = rng.random_bool(0.6);
        let faults = Faults {
            skew_us_max: [0, 1_000, 20_000][rng.random_range(0..3)],
            drift_ppm_max: [0, 100, 1_000][rng.random_range(0..3)],
            delay_us_min: rng.random_range(10..200),
            delay_us_max: rng.random_range(200..5_000),
            crash_every_us: if crashes { rng.random_range(100_000..500_000) } else { 0 },
            downtime_us_max: rng.random_range(10_000..200_000),
            fsync_us_max: rng.random_range(20..2_000),
        };
        let workload = WorkloadConfig {
            keys: rng.random_range(3..40),
            extra_keys: rng.random_range(0..10),
            interactive: rng.random_range(0.2..0.9),
            update: rng.random_range(0.2..0.8),
            ..WorkloadConfig::default()
        };
        Self {
            seed,
            partitions: rng.random_range(1..=6),
            coordinators: rng.random_range(1..=3),
            sessions: rng.random_range(2..=16),
            duration_us: 2_000_000,
            think_us_max: rng.random_range(0..5_000),
            switch_coordinator: rng.random_range(0.0..0.3),
            clock: if rng.random_bool(0.7) { ClockKind::Hybrid } else { ClockKind::Physical },
            certify_writes: rng.random_bool(0.2),
            bug: None,
            faults,
            workload,
        }
    }

    /// The DC configuration the state machines run with.
    pub fn dc_config(&self) -> Config {
        let mut c = Config::new(1, DcId(0), self.partitions);
        c.clock = self.clock;
        c.certify_writes = self.certify_writes;
        c.bug = self.bug;
        c.op_timeout_us = 500_000;
        c.retry_interval_us = 20_000;
        c.wait_timeout_us = 400_000;
        c.tx_idle_timeout_us = 1_000_000;
        c
    }
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Transactions committed.
    pub committed: u64,
    /// Transactions aborted (by request, refusal or timeout).
    pub aborted: u64,
    /// Commits whose outcome the client could not learn (a timeout while committing).
    pub unknown: u64,
    /// Messages delivered.
    pub messages: u64,
    /// Partition crashes.
    pub crashes: u64,
    /// Checkpoints taken.
    pub checkpoints: u64,
    /// Events processed.
    pub events: u64,
    /// Virtual time simulated, µs.
    pub virtual_us: u64,
    /// Effects applied by partitions to serve reads.
    pub read_effects_applied: u64,
    /// Reads served by partitions.
    pub reads: u64,
}

/// Why a run failed outside the history checker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Every session finished and every acknowledged write was found.
    Ok,
    /// Something did not finish or got lost.
    Failed(Vec<String>),
}

/// A run's result.
#[derive(Debug)]
pub struct SimOutcome {
    /// The recorded history.
    pub history: History,
    /// Counters.
    pub stats: SimStats,
    /// The liveness phase's verdict.
    pub liveness: Liveness,
}

#[derive(Debug)]
enum Event {
    Deliver(Envelope),
    Request { coordinator: u32, client: ClientId, request: RequestId, body: ClientRequest },
    Reply(causet_core::coordinator::ClientReply),
    Timer(Address),
    Fsync { partition: u32, incarnation: u64, lsn: Lsn },
    Crash(u32),
    Restart(u32),
    Think(u64),
    Checkpoint(u32),
}

#[derive(Debug, Clone, Copy)]
struct NodeClock {
    offset_us: i64,
    drift_ppm: i64,
}

impl NodeClock {
    fn local(&self, now: u64) -> u64 {
        let elapsed = (now - EPOCH_US) as i128;
        let drifted = elapsed + elapsed * i128::from(self.drift_ppm) / 1_000_000;
        (i128::from(EPOCH_US) + drifted + i128::from(self.offset_us)) as u64
    }

    /// The first virtual time at which the local clock reads at least `local`.
    fn virtual_at(&self, local: u64, now: u64) -> u64 {
        let target = i128::from(local) - i128::from(self.offset_us) - i128::from(EPOCH_US);
        let elapsed = target * 1_000_000 / (1_000_000 + i128::from(self.drift_ppm));
        let mut v = (i128::from(EPOCH_US) + elapsed).max(i128::from(now)) as u64;
        while self.local(v) < local {
            v += 1;
        }
        v
    }
}

#[derive(Debug, Default)]
struct Disk {
    records: Vec<(Lsn, LogRecord)>,
    durable: Lsn,
    syncing: bool,
    /// The merged, durable checkpoint: every object's latest image.
    checkpoint: Option<Checkpoint>,
    /// Checkpoints taken but not yet covered by an fsync.
    pending: Vec<Checkpoint>,
    /// Checkpoints the fsync in flight covers.
    in_sync: Vec<Checkpoint>,
}

impl Disk {
    /// A checkpoint became durable: merge it and truncate the log it covers.
    fn install(&mut self, c: Checkpoint) {
        let merged = match self.checkpoint.take() {
            None => c,
            Some(mut old) => {
                let mut objects: BTreeMap<ObjectId, _> = old.objects.drain(..).collect();
                objects.extend(c.objects);
                Checkpoint { objects: objects.into_iter().collect(), ..c }
            }
        };
        let lsn = merged.lsn;
        self.records.retain(|(l, _)| *l > lsn);
        self.checkpoint = Some(merged);
    }
}

#[derive(Debug)]
struct ActiveTx {
    record: TxRecord,
    plan: Plan,
    step: usize,
    tx: Option<TxId>,
    /// Writes of the request in flight, recorded once it succeeds.
    in_flight: Vec<Planned>,
}

#[derive(Debug)]
struct Session {
    id: u64,
    coordinator: u32,
    clock: Option<VectorClock>,
    next_request: u64,
    active: Option<ActiveTx>,
}

/// The simulated DC.
pub struct World {
    config: SimConfig,
    dc: Config,
    rng: ChaCha8Rng,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64, usize)>>,
    slots: Vec<Option<Event>>,
    free_slots: Vec<usize>,
    partitions: Vec<Option<Partition>>,
    incarnations: Vec<u64>,
    disks: Vec<Disk>,
    coordinators: Vec<Coordinator>,
    stabilizer: Stabilizer,
    clocks: BTreeMap<Address, NodeClock>,
    timers: BTreeMap<Address, u64>,
    links: BTreeMap<(Address, Address), u64>,
    sessions: Vec<Session>,
    workload: Workload,
    history: History,
    stats: SimStats,
    faults_on: bool,
    workload_on: bool,
}

impl World {
    /// Builds the DC for a configuration.
    pub fn new(config: SimConfig) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let dc = config.dc_config();
        let now = EPOCH_US;
        let mut clocks = BTreeMap::new();
        let node_clock = |rng: &mut ChaCha8Rng| {
            let skew = config.faults.skew_us_max as i64;
            let drift = config.faults.drift_ppm_max as i64;
            NodeClock { offset_us: rng.random_range(-skew..=skew), drift_ppm: rng.random_range(-drift..=drift) }
        };
        let coordinator_ids: Vec<CoordinatorId> = (0..config.coordinators).map(CoordinatorId).collect();
        let mut partitions = Vec::new();
        for p in 0..config.partitions {
            let clock = node_clock(&mut rng);
            clocks.insert(Address::Partition(PartitionId(p)), clock);
            partitions.push(Some(Partition::new(PartitionId(p), dc.clone(), clock.local(now))));
        }
        let mut coordinators = Vec::new();
        for c in &coordinator_ids {
            let clock = node_clock(&mut rng);
            clocks.insert(Address::Coordinator(*c), clock);
            coordinators.push(Coordinator::new(*c, dc.clone(), clock.local(now)));
        }
        clocks.insert(Address::Stabilizer, NodeClock { offset_us: 0, drift_ppm: 0 });
        let sessions = (0..u64::from(config.sessions))
            .map(|id| Session {
                id,
                coordinator: (id % u64::from(config.coordinators)) as u32,
                clock: None,
                next_request: 0,
                active: None,
            })
            .collect();
        let mut world = World {
            stabilizer: Stabilizer::new(dc.clone(), coordinator_ids),
            workload: Workload::new(config.workload.clone()),
            partitions,
            incarnations: vec![0; config.partitions as usize],
            disks: (0..config.partitions).map(|_| Disk::default()).collect(),
            coordinators,
            clocks,
            timers: BTreeMap::new(),
            links: BTreeMap::new(),
            sessions,
            history: History::default(),
            stats: SimStats::default(),
            faults_on: true,
            workload_on: true,
            rng,
            dc,
            now,
            seq: 0,
            events: BinaryHeap::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            config,
        };
        for p in 0..world.config.partitions {
            world.arm(Address::Partition(PartitionId(p)));
        }
        for c in 0..world.config.coordinators {
            world.arm(Address::Coordinator(CoordinatorId(c)));
        }
        for s in 0..world.sessions.len() as u64 {
            let think = world.rng.random_range(0..=world.config.think_us_max);
            world.schedule(think, Event::Think(s));
        }
        for p in 0..world.config.partitions {
            let at = world.rng.random_range(10_000..300_000);
            world.schedule(at, Event::Checkpoint(p));
        }
        if world.config.faults.crash_every_us > 0 {
            let at = world.rng.random_range(0..world.config.faults.crash_every_us * 2);
            let victim = world.rng.random_range(0..world.config.partitions);
            world.schedule(at, Event::Crash(victim));
        }
        world
    }

    /// Runs the safety phase, then the liveness phase, and returns the history.
    pub fn run(mut self) -> SimOutcome {
        let end = self.now + self.config.duration_us;
        self.drive_until(end);
        // Liveness: no more faults or new transactions; restart what is down; everything must finish.
        self.faults_on = false;
        self.workload_on = false;
        for p in 0..self.config.partitions {
            if self.partitions[p as usize].is_none() {
                self.schedule(0, Event::Restart(p));
            }
        }
        let mut problems = Vec::new();
        let deadline = self.now + 30_000_000;
        while self.sessions.iter().any(|s| s.active.is_some()) && self.now < deadline {
            if !self.step() {
                break;
            }
        }
        for s in &self.sessions {
            if let Some(active) = &s.active {
                problems.push(format!(
                    "session {} never finished transaction #{} (stuck at step {})",
                    s.id, active.record.index, active.step
                ));
            }
        }
        if problems.is_empty() {
            problems.extend(self.final_read());
        }
        self.collect_stats();
        self.stats.virtual_us = self.now - EPOCH_US;
        let liveness = if problems.is_empty() { Liveness::Ok } else { Liveness::Failed(problems) };
        SimOutcome { history: self.history, stats: self.stats, liveness }
    }

    fn collect_stats(&mut self) {
        for p in self.partitions.iter().flatten() {
            self.stats.read_effects_applied += p.store_stats().effects_applied;
            self.stats.reads += p.store_stats().reads;
        }
    }

    /// A final session reads every checked object with a clock that covers every commit; every acknowledged write
    /// must be there.
    fn final_read(&mut self) -> Vec<String> {
        let mut clock = VectorClock::zero(1);
        for s in &self.sessions {
            if let Some(c) = &s.clock {
                clock.merge_max(c);
            }
        }
        let objects: Vec<(ObjectId, ObjectName)> = self.workload.checked_objects();
        let id = self.sessions.len() as u64;
        let plan = Plan::StaticRead(
            objects
                .iter()
                .map(|(o, n)| Planned { object: o.clone(), name: Some(n.clone()), op: None, write: None })
                .collect(),
        );
        self.sessions.push(Session { id, coordinator: 0, clock: Some(clock), next_request: 0, active: None });
        self.begin_tx(id, plan);
        let deadline = self.now + 10_000_000;
        while self.sessions[id as usize].active.is_some() && self.now < deadline {
            if !self.step() {
                break;
            }
        }
        let Some(last) = self.history.txs.last() else {
            return vec!["no final read".into()];
        };
        if last.session != id || last.outcome != Outcome::Committed {
            return vec![format!("the final read did not commit ({:?})", last.outcome)];
        }
        crate::lost_writes(&self.history, last.index)
    }

    fn drive_until(&mut self, end: u64) {
        while self.events.peek().is_some_and(|Reverse((t, _, _))| *t <= end) {
            self.step();
        }
        self.now = self.now.max(end);
    }

    /// Processes one event; false when none is left.
    fn step(&mut self) -> bool {
        let Some(Reverse((t, _, slot))) = self.events.pop() else {
            return false;
        };
        let event = self.slots[slot].take().expect("a scheduled slot holds its event");
        self.free_slots.push(slot);
        assert!(t >= self.now, "virtual time never goes back");
        self.now = t;
        self.stats.events += 1;
        assert!(self.stats.events < 200_000_000, "seed {}: the simulation does not quiesce", self.config.seed);
        self.handle(event);
        true
    }

    fn schedule(&mut self, after_us: u64, event: Event) {
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s] = Some(event);
                s
            }
            None => {
                self.slots.push(Some(event));
                self.slots.len() - 1
            }
        };
        self.seq += 1;
        self.events.push(Reverse((self.now + after_us, self.seq, slot)));
    }

    fn local(&self, node: Address) -> u64 {
        self.clocks[&node].local(self.now)
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Deliver(envelope) => {
                self.stats.messages += 1;
                let to = envelope.to;
                let now = self.local(to);
                match to {
                    Address::Partition(PartitionId(p)) => {
                        let Some(partition) = self.partitions[p as usize].as_mut() else {
                            return;
                        };
                        partition.handle_message(now, envelope.from, envelope.msg);
                    }
                    Address::Coordinator(CoordinatorId(c)) => {
                        self.coordinators[c as usize].handle_message(now, envelope.from, envelope.msg)
                    }
                    Address::Stabilizer => self.stabilizer.handle_message(envelope.from, envelope.msg),
                }
                self.drain(to);
            }
            Event::Request { coordinator, client, request, body } => {
                let node = Address::Coordinator(CoordinatorId(coordinator));
                let now = self.local(node);
                self.coordinators[coordinator as usize].handle_client(now, client, request, body);
                self.drain(node);
            }
            Event::Reply(reply) => self.on_reply(reply),
            Event::Timer(node) => {
                self.timers.remove(&node);
                let now = self.local(node);
                match node {
                    Address::Partition(PartitionId(p)) => {
                        let Some(partition) = self.partitions[p as usize].as_mut() else {
                            return;
                        };
                        if partition.poll_timeout().is_some_and(|t| t <= now) {
                            partition.handle_timeout(now);
                        }
                    }
                    Address::Coordinator(CoordinatorId(c)) => {
                        let coordinator = &mut self.coordinators[c as usize];
                        if coordinator.poll_timeout().is_some_and(|t| t <= now) {
                            coordinator.handle_timeout(now);
                        }
                    }
                    Address::Stabilizer => {}
                }
                self.drain(node);
            }
            Event::Fsync { partition, incarnation, lsn } => {
                if self.incarnations[partition as usize] != incarnation {
                    return; // The partition crashed meanwhile: this sync never completed.
                }
                let disk = &mut self.disks[partition as usize];
                disk.durable = disk.durable.max(lsn);
                disk.syncing = false;
                for c in std::mem::take(&mut disk.in_sync) {
                    disk.install(c);
                }
                let node = Address::Partition(PartitionId(partition));
                let now = self.local(node);
                if let Some(p) = self.partitions[partition as usize].as_mut() {
                    p.handle_persisted(now, lsn);
                }
                self.start_sync(partition);
                self.drain(node);
            }
            Event::Crash(p) => self.crash(p),
            Event::Checkpoint(p) => {
                if let Some(partition) = self.partitions[p as usize].as_mut() {
                    let checkpoint = partition.take_checkpoint();
                    self.stats.checkpoints += 1;
                    self.disks[p as usize].pending.push(checkpoint);
                    self.start_sync(p);
                }
                let next = self.rng.random_range(10_000..300_000);
                self.schedule(next, Event::Checkpoint(p));
            }
            Event::Restart(p) => self.restart(p),
            Event::Think(s) => {
                if self.workload_on && self.sessions[s as usize].active.is_none() {
                    let plan = self.workload.next(&mut self.rng);
                    self.begin_tx(s, plan);
                }
            }
        }
    }

    fn crash(&mut self, p: u32) {
        if !self.faults_on {
            return;
        }
        if self.partitions[p as usize].take().is_some() {
            self.stats.crashes += 1;
            self.incarnations[p as usize] += 1;
            let disk = &mut self.disks[p as usize];
            let durable = disk.durable;
            disk.records.retain(|(lsn, _)| *lsn <= durable);
            disk.syncing = false;
            disk.pending.clear();
            disk.in_sync.clear();
            let down = self.rng.random_range(1..=self.config.faults.downtime_us_max.max(1));
            self.schedule(down, Event::Restart(p));
        }
        let every = self.config.faults.crash_every_us;
        let next = self.rng.random_range(every / 2..=every * 3 / 2);
        let victim = self.rng.random_range(0..self.config.partitions);
        self.schedule(next, Event::Crash(victim));
    }

    fn restart(&mut self, p: u32) {
        if self.partitions[p as usize].is_some() {
            return;
        }
        let node = Address::Partition(PartitionId(p));
        let now = self.local(node);
        let disk = &self.disks[p as usize];
        let (checkpoint, records) = (disk.checkpoint.clone(), disk.records.clone());
        let partition = Partition::restore(PartitionId(p), self.dc.clone(), now, checkpoint, records);
        self.partitions[p as usize] = Some(partition);
        self.timers.remove(&node);
        self.drain(node);
    }

    fn start_sync(&mut self, p: u32) {
        let disk = &mut self.disks[p as usize];
        let Some((last, _)) = disk.records.last() else {
            return;
        };
        if disk.syncing || *last <= disk.durable {
            return;
        }
        let lsn = *last;
        disk.syncing = true;
        let took = self.rng.random_range(1..=self.config.faults.fsync_us_max.max(1));
        let incarnation = self.incarnations[p as usize];
        self.schedule(took, Event::Fsync { partition: p, incarnation, lsn });
    }

    /// Carries out a node's outputs and arms its timer.
    fn drain(&mut self, node: Address) {
        let mut sends = Vec::new();
        match node {
            Address::Partition(PartitionId(p)) => {
                let Some(partition) = self.partitions[p as usize].as_mut() else {
                    return;
                };
                let mut persisted = false;
                while let Some(out) = partition.poll_output() {
                    match out {
                        PartitionOutput::Send(e) => sends.push(e),
                        PartitionOutput::Persist { lsn, record } => {
                            self.disks[p as usize].records.push((lsn, record));
                            persisted = true;
                        }
                    }
                }
                if persisted {
                    self.start_sync(p);
                }
            }
            Address::Coordinator(CoordinatorId(c)) => {
                while let Some(out) = self.coordinators[c as usize].poll_output() {
                    match out {
                        CoordinatorOutput::Send(e) => sends.push(e),
                        CoordinatorOutput::Reply(r) => {
                            let delay = self.delay();
                            self.schedule(delay, Event::Reply(r));
                        }
                    }
                }
            }
            Address::Stabilizer => {
                while let Some(e) = self.stabilizer.poll_output() {
                    sends.push(e);
                }
            }
        }
        if node != Address::Stabilizer {
            self.arm(node);
        }
        for e in sends {
            self.send(e);
        }
    }

    fn delay(&mut self) -> u64 {
        let f = &self.config.faults;
        self.rng.random_range(f.delay_us_min..=f.delay_us_max.max(f.delay_us_min))
    }

    /// Sends over the link from sender to receiver: random delay, FIFO per link.
    fn send(&mut self, envelope: Envelope) {
        let delay = self.delay();
        let link = (envelope.from, envelope.to);
        let last = self.links.get(&link).copied().unwrap_or(0);
        let at = (self.now + delay).max(last + 1);
        self.links.insert(link, at);
        self.schedule(at - self.now, Event::Deliver(envelope));
    }

    fn arm(&mut self, node: Address) {
        let deadline = match node {
            Address::Partition(PartitionId(p)) => match &self.partitions[p as usize] {
                Some(partition) => partition.poll_timeout(),
                None => None,
            },
            Address::Coordinator(CoordinatorId(c)) => self.coordinators[c as usize].poll_timeout(),
            Address::Stabilizer => None,
        };
        let Some(local_deadline) = deadline else {
            return;
        };
        let at = self.clocks[&node].virtual_at(local_deadline, self.now);
        if self.timers.get(&node).is_some_and(|armed| *armed <= at) {
            return;
        }
        self.timers.insert(node, at);
        self.schedule(at - self.now, Event::Timer(node));
    }

    fn begin_tx(&mut self, s: u64, plan: Plan) {
        let index = self.history.txs.len();
        let session = &mut self.sessions[s as usize];
        if self.config.switch_coordinator > 0.0 && self.rng.random_bool(self.config.switch_coordinator) {
            session.coordinator = self.rng.random_range(0..self.config.coordinators);
        }
        let record = TxRecord {
            index,
            session: s,
            dc: 0,
            start_us: self.now,
            end_us: self.now,
            ops: Vec::new(),
            outcome: Outcome::Unknown,
        };
        session.active = Some(ActiveTx { record, plan, step: 0, tx: None, in_flight: Vec::new() });
        self.next_request(s);
    }

    /// Sends the session's next request for its active transaction.
    fn next_request(&mut self, s: u64) {
        let session = &mut self.sessions[s as usize];
        let active = session.active.as_mut().expect("a session with a request has a transaction");
        let clock = session.clock.clone();
        let body = match (&active.plan, active.tx) {
            (Plan::StaticRead(objects), _) => {
                ClientRequest::StaticRead { clock, objects: objects.iter().map(|p| p.object.clone()).collect() }
            }
            (Plan::StaticUpdate(writes), _) => {
                active.in_flight = writes.clone();
                ClientRequest::StaticUpdate { clock, updates: updates_of(writes) }
            }
            (Plan::Interactive { .. }, None) => ClientRequest::Start { clock },
            (Plan::Interactive { steps, abort }, Some(tx)) => match steps.get(active.step) {
                Some(Step::Read(objects)) => {
                    ClientRequest::Read { tx, objects: objects.iter().map(|p| p.object.clone()).collect() }
                }
                Some(Step::Update(writes)) => {
                    active.in_flight = writes.clone();
                    ClientRequest::Update { tx, updates: updates_of(writes) }
                }
                None if *abort => ClientRequest::Abort { tx },
                None => ClientRequest::Commit { tx },
            },
        };
        let request = RequestId(session.next_request);
        session.next_request += 1;
        let coordinator = session.coordinator;
        let delay = self.delay();
        self.schedule(delay, Event::Request { coordinator, client: ClientId(s), request, body });
    }

    fn on_reply(&mut self, reply: causet_core::coordinator::ClientReply) {
        let s = reply.client.0;
        let session = &mut self.sessions[s as usize];
        let Some(active) = session.active.as_mut() else {
            return;
        };
        let committing = match &active.plan {
            Plan::StaticUpdate(_) => true,
            Plan::Interactive { steps, abort } => active.tx.is_some() && active.step >= steps.len() && !abort,
            Plan::StaticRead(_) => false,
        };
        let outcome = match reply.result {
            // A commit that timed out may have happened: only the partitions know.
            Err(TxError::Timeout(_)) if committing => Some(Outcome::Unknown),
            Err(_) => Some(Outcome::Aborted),
            Ok(ClientResponse::Started { tx, snapshot }) => {
                active.tx = Some(tx);
                merge(&mut session.clock, &snapshot);
                None
            }
            Ok(ClientResponse::Values(values)) => {
                let Plan::Interactive { steps, .. } = &active.plan else { unreachable!("values answer reads") };
                let Some(Step::Read(objects)) = steps.get(active.step) else { unreachable!("values answer reads") };
                record_reads(&mut active.record, objects, &values);
                active.step += 1;
                None
            }
            Ok(ClientResponse::Updated) => {
                record_writes(&mut active.record, &active.in_flight);
                active.step += 1;
                None
            }
            Ok(ClientResponse::Committed { commit }) => {
                if let Plan::StaticUpdate(_) = active.plan {
                    record_writes(&mut active.record, &active.in_flight);
                }
                merge(&mut session.clock, &commit);
                Some(Outcome::Committed)
            }
            Ok(ClientResponse::Aborted) => Some(Outcome::Aborted),
            Ok(ClientResponse::StaticValues { values, commit }) => {
                let Plan::StaticRead(objects) = &active.plan else { unreachable!("static values answer reads") };
                record_reads(&mut active.record, objects, &values);
                merge(&mut session.clock, &commit);
                Some(Outcome::Committed)
            }
        };
        match outcome {
            None => self.next_request(s),
            Some(outcome) => {
                let mut active = session.active.take().expect("checked above");
                active.record.outcome = outcome;
                active.record.end_us = self.now;
                active.record.index = self.history.txs.len();
                match outcome {
                    Outcome::Committed => self.stats.committed += 1,
                    Outcome::Aborted => self.stats.aborted += 1,
                    Outcome::Unknown => self.stats.unknown += 1,
                }
                self.history.txs.push(active.record);
                if self.workload_on {
                    let think = self.rng.random_range(0..=self.config.think_us_max);
                    self.schedule(think, Event::Think(s));
                }
            }
        }
    }
}

fn merge(clock: &mut Option<VectorClock>, other: &VectorClock) {
    match clock {
        Some(c) => c.merge_max(other),
        None => *clock = Some(other.clone()),
    }
}

fn updates_of(writes: &[Planned]) -> Vec<(ObjectId, causet_crdt::Op)> {
    writes.iter().map(|p| (p.object.clone(), p.op.clone().expect("planned writes carry an op"))).collect()
}

fn record_writes(record: &mut TxRecord, writes: &[Planned]) {
    for p in writes {
        if let (Some(object), Some((id, amount))) = (&p.name, p.write) {
            record.ops.push(HistOp::Write { object: object.clone(), id, amount });
        }
    }
}

fn record_reads(record: &mut TxRecord, objects: &[Planned], values: &[Value]) {
    for (p, value) in objects.iter().zip(values) {
        let Some(object) = &p.name else { continue };
        let observed = match (object.kind, value) {
            (ObjectKind::Set, Value::Set(elems)) => Observed::Set(elems.iter().map(|e| write_id(e)).collect()),
            (ObjectKind::Register, Value::Register(bytes)) => {
                Observed::Register(if bytes.is_empty() { None } else { Some(write_id(bytes)) })
            }
            (ObjectKind::Counter, Value::Counter(n)) => Observed::Counter(*n),
            (kind, value) => panic!("a {kind:?} object answered {value:?}"),
        };
        record.ops.push(HistOp::Read { object: object.clone(), observed });
    }
}

/// Decodes a written value; a value of the wrong shape maps to an id no write has (a phantom).
fn write_id(bytes: &[u8]) -> u64 {
    match <[u8; 8]>::try_from(bytes) {
        Ok(b) => u64::from_be_bytes(b),
        Err(_) => u64::MAX,
    }
}
