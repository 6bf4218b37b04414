//! A deterministic simulation of the middleware over an eventually consistent store: several local sets, each
//! with its own store and middleware instances, and replication between the stores that delays and reorders
//! record updates arbitrarily (last writer wins per copy, as Cassandra does). Operations advance one store action
//! at a time, interleaved with other sessions' actions and with replication, so compare-and-swap conflicts and
//! every order of arrival happen. The recorded history goes through Causet's TCC checker.

use std::collections::HashMap;

use causet_sim::history::{HistOp, History, ObjectKind, ObjectName, Observed, Outcome, TxRecord, WriteId};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::op::{Input, Marks, Protocol, ReadOp, ReadOutcome, Session, Step, WriteOp};
use crate::record::{Copy, LocalSet, Record, Vertex};

/// What reads do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The middleware: resolution on read.
    Middleware,
    /// The store alone: a read returns the causally latest copy present, without resolving its dependencies
    /// (what an application gets from the eventually consistent store by itself). Expected to violate causality.
    StoreAlone,
}

/// The simulated world's shape.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Local sets (emulated DCs).
    pub local_sets: usize,
    /// Client sessions per local set.
    pub sessions_per_set: usize,
    /// Middleware instances per local set (sessions are spread over them; instances share nothing but the store).
    pub instances_per_set: usize,
    /// Keys, chosen uniformly.
    pub keys: usize,
    /// Operations per session.
    pub ops_per_session: usize,
    /// Fraction of operations that write.
    pub write_ratio: f64,
    /// Embedded graph levels (`k`).
    pub levels: u8,
    /// Versions a record keeps before folding the oldest.
    pub retain: usize,
    /// Mark capacity per instance (small values exercise forgetting).
    pub mark_capacity: usize,
    /// Probability per scheduling step that an instance restarts and forgets its marks.
    pub restart_probability: f64,
    /// How reads behave.
    pub mode: Mode,
}

impl Default for SimConfig {
    fn default() -> SimConfig {
        SimConfig {
            local_sets: 3,
            sessions_per_set: 3,
            instances_per_set: 2,
            keys: 6,
            ops_per_session: 40,
            write_ratio: 0.4,
            levels: 1,
            retain: 3,
            mark_capacity: 64,
            restart_probability: 0.002,
            mode: Mode::Middleware,
        }
    }
}

/// What a run produced.
#[derive(Debug)]
pub struct SimOutcome {
    /// Every completed operation, one transaction each.
    pub history: History,
    /// Reads that found the latest version unresolved and were retried.
    pub unresolved: u64,
    /// Compare-and-swaps that lost to another instance.
    pub conflicts: u64,
    /// Store round trips of reads that returned a value, summed.
    pub read_rounds: u64,
    /// Reads that returned a value or found nothing.
    pub reads: u64,
    /// The largest encoded record seen, in bytes.
    pub max_record_bytes: usize,
    /// After replication has quiesced, the value every local set reads for each key (must agree).
    pub converged: bool,
}

enum Running {
    Read { op: ReadOp, step: Step<ReadOutcome> },
    Write { op: WriteOp, step: Step<Vertex>, id: WriteId },
}

struct Client {
    id: u64,
    ls: LocalSet,
    instance: usize,
    session: Session,
    done: usize,
    running: Option<(Running, u64)>,
}

struct World {
    protocol: Vec<Protocol>,
    stores: Vec<HashMap<Copy, Record>>,
    in_flight: Vec<(LocalSet, Copy, Record)>,
    marks: Vec<Vec<Marks>>,
    max_record_bytes: usize,
}

impl World {
    fn fetch(&self, ls: LocalSet, copies: &[Copy]) -> Vec<Option<Record>> {
        copies.iter().map(|c| self.stores[ls as usize].get(c).cloned()).collect()
    }

    fn cas(&mut self, ls: LocalSet, copy: Copy, expect: Option<u64>, record: Record) -> bool {
        let store = &mut self.stores[ls as usize];
        if store.get(&copy).map(Record::seq) != expect {
            return false;
        }
        self.max_record_bytes = self.max_record_bytes.max(record.encode().len());
        for to in 0..self.stores.len() as LocalSet {
            if to != ls {
                self.in_flight.push((to, copy.clone(), record.clone()));
            }
        }
        self.stores[ls as usize].insert(copy, record);
        true
    }

    /// Delivers one replication message; a record older than the one present is ignored (last writer wins).
    fn deliver(&mut self, i: usize) {
        let (to, copy, record) = self.in_flight.swap_remove(i);
        let store = &mut self.stores[to as usize];
        if store.get(&copy).is_none_or(|r| r.seq() < record.seq()) {
            store.insert(copy, record);
        }
    }
}

fn key_name(k: usize) -> Vec<u8> {
    format!("k{k}").into_bytes()
}

fn object(key: &[u8]) -> ObjectName {
    ObjectName { key: String::from_utf8_lossy(key).into_owned(), kind: ObjectKind::Register }
}

/// Runs one seed.
pub fn run(seed: u64, cfg: &SimConfig) -> SimOutcome {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let protocol: Vec<Protocol> = (0..cfg.local_sets as LocalSet)
        .map(|ls| Protocol { local_set: ls, local_sets: cfg.local_sets, levels: cfg.levels, retain: cfg.retain })
        .collect();
    let mut world = World {
        protocol,
        stores: vec![HashMap::new(); cfg.local_sets],
        in_flight: Vec::new(),
        marks: (0..cfg.local_sets)
            .map(|_| (0..cfg.instances_per_set).map(|_| Marks::new(cfg.mark_capacity)).collect())
            .collect(),
        max_record_bytes: 0,
    };
    let mut clients: Vec<Client> = (0..cfg.local_sets * cfg.sessions_per_set)
        .map(|i| Client {
            id: i as u64,
            ls: (i / cfg.sessions_per_set) as LocalSet,
            instance: i % cfg.instances_per_set,
            session: Session::new(),
            done: 0,
            running: None,
        })
        .collect();
    let mut out = SimOutcome {
        history: History::default(),
        unresolved: 0,
        conflicts: 0,
        read_rounds: 0,
        reads: 0,
        max_record_bytes: 0,
        converged: false,
    };
    let mut next_write: WriteId = 1;
    let mut now: u64 = 0;
    loop {
        now += 1;
        let active: Vec<usize> = (0..clients.len()).filter(|&i| clients[i].done < cfg.ops_per_session).collect();
        if active.is_empty() && world.in_flight.is_empty() {
            break;
        }
        if rng.random_bool(cfg.restart_probability) {
            let ls = rng.random_range(0..cfg.local_sets);
            let i = rng.random_range(0..cfg.instances_per_set);
            world.marks[ls][i].clear();
        }
        // Replication competes with client steps; it is sometimes starved for long stretches.
        let replicate = !world.in_flight.is_empty() && (active.is_empty() || rng.random_bool(0.3));
        if replicate {
            let i = rng.random_range(0..world.in_flight.len());
            world.deliver(i);
            continue;
        }
        let c = &mut clients[active[rng.random_range(0..active.len())]];
        step_client(c, &mut world, cfg, &mut rng, &mut next_write, now, &mut out);
    }
    out.max_record_bytes = world.max_record_bytes;
    out.converged = converged(&world, cfg);
    out
}

fn step_client(
    c: &mut Client,
    world: &mut World,
    cfg: &SimConfig,
    rng: &mut ChaCha8Rng,
    next_write: &mut WriteId,
    now: u64,
    out: &mut SimOutcome,
) {
    let protocol = world.protocol[c.ls as usize].clone();
    let (running, started) = match c.running.take() {
        Some(r) => r,
        None => {
            let key = key_name(rng.random_range(0..cfg.keys));
            let running = if rng.random_bool(cfg.write_ratio) {
                let id = *next_write;
                *next_write += 1;
                let (op, step) = WriteOp::start(&protocol, &c.session, &key, id.to_be_bytes().to_vec());
                Running::Write { op, step, id }
            } else {
                let (op, step) = ReadOp::start(&protocol, &key);
                Running::Read { op, step }
            };
            (running, now)
        }
    };
    let record = |c: &mut Client, out: &mut SimOutcome, ops: Vec<HistOp>| {
        let index = out.history.txs.len();
        out.history.txs.push(TxRecord {
            index,
            session: c.id,
            dc: c.ls,
            start_us: started,
            end_us: now,
            ops,
            outcome: Outcome::Committed,
        });
        c.done += 1;
    };
    match running {
        Running::Write { mut op, step, id } => {
            let input = match step {
                Step::Fetch(copies) => Input::Fetched(world.fetch(c.ls, &copies)),
                Step::Cas { copy, expect, record } => Input::Swapped(world.cas(c.ls, copy, expect, record)),
                Step::Done(_) => unreachable!("a finished write is not resumed"),
            };
            match op.resume(&protocol, input, &mut c.session) {
                Step::Done(vertex) => {
                    out.conflicts += u64::from(op.work.conflicts);
                    let ops = vec![HistOp::Write { object: object(&vertex.key), id, amount: 0 }];
                    record(c, out, ops);
                }
                step => c.running = Some((Running::Write { op, step, id }, started)),
            }
        }
        Running::Read { mut op, step } => {
            let Step::Fetch(copies) = step else { unreachable!("a read only fetches") };
            let fetched = world.fetch(c.ls, &copies);
            let result = match cfg.mode {
                Mode::Middleware => {
                    op.resume(Input::Fetched(fetched), &mut world.marks[c.ls as usize][c.instance], &mut c.session)
                }
                Mode::StoreAlone => Step::Done(latest_unresolved(&copies, fetched)),
            };
            match result {
                Step::Done(ReadOutcome::Unresolved { .. }) => {
                    // The client waits and retries (the real middleware does so up to its deadline).
                    out.unresolved += 1;
                }
                Step::Done(outcome) => {
                    out.reads += 1;
                    out.read_rounds += u64::from(op.work.rounds);
                    let (key, observed) = match outcome {
                        ReadOutcome::Value { value, version } => {
                            let id = WriteId::from_be_bytes(value.try_into().expect("values are write ids"));
                            (version.key, Some(id))
                        }
                        ReadOutcome::Missing => (copies[0].key.clone(), None),
                        ReadOutcome::Unresolved { .. } => unreachable!(),
                    };
                    let ops = vec![HistOp::Read { object: object(&key), observed: Observed::Register(observed) }];
                    record(c, out, ops);
                }
                step => c.running = Some((Running::Read { op, step }, started)),
            }
        }
    }
}

fn latest_unresolved(copies: &[Copy], fetched: Vec<Option<Record>>) -> ReadOutcome {
    copies.iter().zip(fetched).filter_map(|(c, r)| r.map(|r| (c, r))).max_by_key(|(c, r)| r.rank(c.ls)).map_or(
        ReadOutcome::Missing,
        |(c, r)| ReadOutcome::Value { version: Vertex { key: c.key.clone(), ls: c.ls, seq: r.seq() }, value: r.value },
    )
}

/// With replication quiesced, every local set resolves every key, and all read the same value.
fn converged(world: &World, cfg: &SimConfig) -> bool {
    (0..cfg.keys).all(|k| {
        let key = key_name(k);
        let values: Vec<ReadOutcome> = (0..cfg.local_sets as LocalSet)
            .map(|ls| {
                let protocol = &world.protocol[ls as usize];
                ReadOp::run(protocol, &key, &mut Marks::new(1024), &mut Session::new(), |copies| {
                    world.fetch(ls, copies)
                })
            })
            .collect();
        values.iter().all(|v| !matches!(v, ReadOutcome::Unresolved { .. }))
            && values.windows(2).all(|w| match (&w[0], &w[1]) {
                (ReadOutcome::Value { value: a, .. }, ReadOutcome::Value { value: b, .. }) => a == b,
                (a, b) => a == b,
            })
    })
}
