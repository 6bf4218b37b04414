//! A deterministic simulation of the middleware over an eventually consistent store: several local sets, each
//! with its own store and middleware instances, and replication between the stores that delays and reorders
//! record updates arbitrarily (last writer wins per copy, as Cassandra does). Operations advance one store action
//! at a time, interleaved with other sessions' actions and with replication, so compare-and-swap conflicts and
//! every order of arrival happen. The recorded history goes through Causet's TCC checker.
//!
//! With exclusive writers, each local set's writes of a key are ordered as the instance's lock orders them (a
//! write of a key starts only when the previous one has been stored) and stored without compare-and-swap; the
//! simulation asserts that the version a write read is still the stored one when it is stored, the invariant the
//! lock and the writer lease exist for. Exclusive writers also answer a write's read from the instance's
//! [`WriteCache`] when they can, so that assertion checks the cache's copy of the record, and the checker its
//! clocks.

use std::collections::HashMap;

use causet_sim::history::{HistOp, History, ObjectKind, ObjectName, Observed, Outcome, TxRecord, WriteId};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::driver::Writers;
use crate::feed::{Batch, FeedReader, FeedWriter, Frontier};
use crate::op::{
    Began, Check, Input, Marks, OwnWrites, Protocol, ReadCache, ReadOp, ReadOutcome, Resolution, Session, StabilizeOp,
    Step, WriteCache, WriteOp,
};
use crate::record::{Copy, Head, LocalSet, Meta, Record, RecordPart, Vertex};

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
    /// How a local set's writers exclude each other.
    pub writers: Writers,
    /// With `Some(cap)`, a write whose record folds more than `cap` vertices queues them to be made stable, and
    /// the schedule runs those walks between other steps (`None`: never, as the paper).
    pub folded_cap: Option<usize>,
    /// Whether instances also confirm their own writes in every local set and mark them stable ([`OwnWrites`]),
    /// between other steps, whatever replication has delivered by then.
    pub confirm_own: bool,
    /// Whether a read that finds a dependency missing pulls it (the newest version any local set holds of its
    /// copy is copied into the reader's store, as a read at `ALL` with read repair does) before it retries.
    pub pull: bool,
    /// Exclusive writers with one instance per local set: each keeps a feed of its writes, the other local sets
    /// follow it (resolving its versions ahead of reads) and publish their frontiers, and the writer marks stable
    /// what every other local set resolved ([`crate::feed`]). Feed batches and frontier rows replicate like records
    /// (delayed, reordered), and a restarted instance starts a new epoch.
    pub feed: bool,
    /// With [`SimConfig::feed`]: a read that has read more than this many records resolving a version of another
    /// local set stops and waits for its follower to mark that version (up to [`FOLLOWER_WAIT_STEPS`] of its turns,
    /// then it walks), as `walk_budget` in [`crate::Config`]. `usize::MAX`: never.
    pub walk_budget: usize,
    /// Where [`ReadCache::is_sound`] allows one: each instance keeps a read cache whose entries live this many
    /// steps (0: none), as `read_cache_ttl` in [`crate::Config`].
    pub read_cache_ttl: u64,
}

/// How many of its turns a simulated read waits for its follower before it walks the version's graph itself.
pub const FOLLOWER_WAIT_STEPS: u32 = 50;

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
            writers: Writers::Shared,
            folded_cap: None,
            confirm_own: false,
            pull: false,
            feed: false,
            walk_budget: usize::MAX,
            read_cache_ttl: 0,
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
    /// The largest folded dependency set written.
    pub max_folded: usize,
    /// Folded dependencies written, summed over writes.
    pub folded_written: u64,
    /// Versions made stable.
    pub stabilized: u64,
    /// Of those, versions marked stable after their writer confirmed them ([`OwnWrites`]).
    pub confirmed_own: u64,
    /// Missing dependencies a read pulled from another local set (with [`SimConfig::pull`]).
    pub pulled: u64,
    /// Exclusive writers: writes answered from the instance's cache.
    pub cached_writes: u64,
    /// Reads answered from an instance's read cache at once.
    pub read_cache_hits: u64,
    /// Reads answered from an instance's read cache instead of waiting for a newer version to be resolved.
    pub read_cache_fallbacks: u64,
    /// Versions marked stable by their writer after every other local set resolved them from its feed.
    pub stable_by_feed: u64,
    /// Versions resolved from other local sets' feeds.
    pub followed: u64,
    /// Reads that stopped walking to wait for their follower ([`SimConfig::walk_budget`]).
    pub follower_waits: u64,
    /// Of those, the ones whose version the follower marked while they waited.
    pub follower_waits_resolved: u64,
    /// After replication has quiesced, the value every local set reads for each key (must agree).
    pub converged: bool,
}

enum Running {
    /// `waited`: the turns the read has waited for its follower so far (`Some(FOLLOWER_WAIT_STEPS)` once it
    /// stopped waiting).
    Read {
        op: Box<ReadOp>,
        step: Step<ReadOutcome>,
        waited: Option<u32>,
        /// Where the instance's read cache stood when the read started, if it has one.
        began: Option<Began>,
    },
    Write {
        op: WriteOp,
        step: Step<Vertex>,
        id: WriteId,
        /// Where the instance's read cache stood when the write started, if it has one.
        began: Option<Began>,
    },
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
    /// Per instance: the versions it knows stable, and those it has queued to make stable.
    stable: Vec<Vec<Marks>>,
    to_stabilize: Vec<Vec<Vec<Vertex>>>,
    /// Per instance: its own writes waiting to be confirmed.
    own: Vec<Vec<OwnWrites>>,
    /// Exclusive writers: each instance's write cache.
    caches: Vec<Vec<WriteCache>>,
    /// Each instance's read cache, where one is kept.
    read_caches: Vec<Vec<Option<ReadCache>>>,
    max_record_bytes: usize,
    /// Every version written, with what it truly depends on: the versions its writer's session had seen (as its
    /// record first stored them) and its copy's previous version. Records fold older versions' dependencies into an
    /// over-approximation, which may even name versions written after; this is the ground truth the stability
    /// check follows.
    truth: HashMap<Vertex, Vec<Vertex>>,
    /// With [`SimConfig::feed`]: per local set, its writer's feed and its followers of the others' feeds.
    feeds: Vec<FeedWriter>,
    following: Vec<Vec<FeedReader>>,
    /// Per local set's store: feed batches ((writer, epoch, number) → batch) and frontier rows ((reader, writer) →
    /// when written, frontier; the later write wins).
    batches: Vec<HashMap<(LocalSet, u64, u64), Batch>>,
    frontiers: Vec<HashMap<(LocalSet, LocalSet), (u64, Frontier)>>,
    /// Feed batches and frontier rows on their way to another local set's store.
    feed_in_flight: Vec<(LocalSet, FeedRow)>,
}

/// A row of the feed tables, replicated.
enum FeedRow {
    Batch { writer: LocalSet, epoch: u64, number: u64, batch: Batch },
    Frontier { reader: LocalSet, writer: LocalSet, at: u64, frontier: Frontier },
}

impl World {
    fn fetch(&self, ls: LocalSet, copies: &[Copy]) -> Vec<Option<Meta>> {
        copies.iter().map(|c| self.stores[ls as usize].get(c).map(|r| r.meta.clone())).collect()
    }

    fn heads(&self, ls: LocalSet, copies: &[Copy]) -> Vec<Option<Head>> {
        copies.iter().map(|c| self.stores[ls as usize].get(c).map(Record::head)).collect()
    }

    fn cas(&mut self, ls: LocalSet, copy: Copy, expect: Option<u64>, record: Record) -> bool {
        let store = &mut self.stores[ls as usize];
        if store.get(&copy).map(Record::seq) != expect {
            return false;
        }
        self.max_record_bytes = self.max_record_bytes.max(record.encode().len());
        if let Some(newest) = record.meta.versions.last() {
            let v = Vertex { key: copy.key.clone(), ls: copy.ls, seq: newest.seq };
            let mut deps: Vec<Vertex> = newest.deps.iter().map(|d| d.vertex.clone()).collect();
            deps.extend((v.seq > 1).then(|| Vertex { seq: v.seq - 1, ..v.clone() }));
            self.truth.insert(v, deps);
        }
        for to in 0..self.stores.len() as LocalSet {
            if to != ls {
                self.in_flight.push((to, copy.clone(), record.clone()));
            }
        }
        self.stores[ls as usize].insert(copy, record);
        true
    }

    /// An exclusive writer's plain write: the version it read must still be the stored one.
    fn put(&mut self, ls: LocalSet, copy: Copy, expect: Option<u64>, record: Record) -> bool {
        let stored = self.stores[ls as usize].get(&copy).map(Record::seq);
        assert_eq!(stored, expect, "exclusive writers: {copy:?} changed between a write's read and its store");
        self.cas(ls, copy, expect, record)
    }

    /// Whether every local set holds version `seq` of the copy or a later one (what a store confirms).
    fn everywhere(&self, v: &Vertex) -> bool {
        self.stores.iter().all(|s| s.get(&v.copy()).is_some_and(|r| r.seq() >= v.seq))
    }

    /// The first version of `v`'s causal past, `v` included, that some local set does not hold (following the
    /// ground truth, not the records), not looking past versions `known` covers (made stable before, and checked
    /// then).
    fn missing_past(&self, v: &Vertex, known: &Marks) -> Option<Vertex> {
        let (mut stack, mut seen) = (vec![v.clone()], std::collections::HashSet::new());
        while let Some(x) = stack.pop() {
            if !seen.insert(x.clone()) {
                continue;
            }
            if !self.everywhere(&x) {
                return Some(x);
            }
            stack.extend(self.truth.get(&x).into_iter().flatten().filter(|d| !known.covers(d)).cloned());
        }
        None
    }

    /// The invariant that lets records leave stable versions out, after a walk or a batch of confirmations: each of
    /// `confirmed` that `after` covers and `before` did not (newly marked stable) is, with its whole causal past, in
    /// every local set's store. Returns how many were newly marked.
    fn assert_marked_stable_hold(&self, confirmed: &[Vertex], before: &Marks, after: &Marks) -> u64 {
        let mut marked = 0;
        for v in confirmed.iter().filter(|v| after.covers(v) && !before.covers(v)) {
            if let Some(missing) = self.missing_past(v, before) {
                panic!("{v} was marked stable, but {missing} in its causal past is not in every local set");
            }
            marked += 1;
        }
        marked
    }

    /// A pull of `v` into local set `to`: the newest record of its copy any local set holds replaces an older one
    /// there (what a read at `ALL` with read repair does). Whether `to` holds `v` now.
    fn pull(&mut self, to: LocalSet, v: &Vertex) -> bool {
        let copy = v.copy();
        let newest = self.stores.iter().filter_map(|s| s.get(&copy)).max_by_key(|r| r.seq()).cloned();
        let Some(newest) = newest.filter(|r| r.seq() >= v.seq) else { return false };
        let store = &mut self.stores[to as usize];
        if store.get(&copy).is_none_or(|r| r.seq() < newest.seq()) {
            store.insert(copy, newest);
        }
        true
    }

    /// Stores a feed row in local set `at`'s store (last writer wins for frontier rows).
    fn store_row(&mut self, at: LocalSet, row: FeedRow) {
        match row {
            FeedRow::Batch { writer, epoch, number, batch } => {
                self.batches[at as usize].insert((writer, epoch, number), batch);
            }
            FeedRow::Frontier { reader, writer, at: when, frontier } => {
                let row = self.frontiers[at as usize].entry((reader, writer)).or_insert((when, frontier));
                if row.0 <= when {
                    *row = (when, frontier);
                }
            }
        }
    }

    /// Writes a feed row in local set `ls`'s store and sends it to the others.
    fn put_row(&mut self, ls: LocalSet, row: impl Fn() -> FeedRow) {
        self.store_row(ls, row());
        for to in (0..self.stores.len() as LocalSet).filter(|&to| to != ls) {
            self.feed_in_flight.push((to, row()));
        }
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
        stable: (0..cfg.local_sets)
            .map(|_| (0..cfg.instances_per_set).map(|_| Marks::new(cfg.mark_capacity)).collect())
            .collect(),
        to_stabilize: vec![vec![Vec::new(); cfg.instances_per_set]; cfg.local_sets],
        own: (0..cfg.local_sets)
            .map(|_| (0..cfg.instances_per_set).map(|_| OwnWrites::new(1 << 12)).collect())
            .collect(),
        caches: (0..cfg.local_sets)
            .map(|_| (0..cfg.instances_per_set).map(|_| WriteCache::new(cfg.mark_capacity)).collect())
            .collect(),
        read_caches: (0..cfg.local_sets)
            .map(|_| {
                let sound = ReadCache::is_sound(cfg.writers == Writers::Exclusive, cfg.feed, cfg.levels)
                    && cfg.read_cache_ttl > 0;
                // Small, so that it evicts too.
                (0..cfg.instances_per_set).map(|_| sound.then(|| ReadCache::new(2048))).collect()
            })
            .collect(),
        max_record_bytes: 0,
        truth: HashMap::new(),
        feeds: (0..cfg.local_sets as LocalSet).map(|ls| FeedWriter::new(ls, cfg.local_sets, 0, 1 << 12)).collect(),
        following: (0..cfg.local_sets as LocalSet)
            .map(|ls| {
                let writers = (0..cfg.local_sets as LocalSet).filter(|&w| w != ls);
                writers.map(|w| FeedReader::new(ls, w, 1 << 12)).collect()
            })
            .collect(),
        batches: vec![HashMap::new(); cfg.local_sets],
        frontiers: vec![HashMap::new(); cfg.local_sets],
        feed_in_flight: Vec::new(),
    };
    let feeding = cfg.feed && cfg.writers == Writers::Exclusive && cfg.instances_per_set == 1;
    assert_eq!(feeding, cfg.feed, "feeds are kept by exclusive writers, one instance per local set");
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
        max_folded: 0,
        folded_written: 0,
        stabilized: 0,
        confirmed_own: 0,
        pulled: 0,
        cached_writes: 0,
        read_cache_hits: 0,
        read_cache_fallbacks: 0,
        stable_by_feed: 0,
        followed: 0,
        follower_waits: 0,
        follower_waits_resolved: 0,
        converged: false,
    };
    let mut next_write: WriteId = 1;
    let mut now: u64 = 0;
    loop {
        now += 1;
        let active: Vec<usize> = (0..clients.len()).filter(|&i| clients[i].done < cfg.ops_per_session).collect();
        if active.is_empty() && world.in_flight.is_empty() && world.feed_in_flight.is_empty() {
            break;
        }
        if rng.random_bool(cfg.restart_probability) {
            let ls = rng.random_range(0..cfg.local_sets);
            let i = rng.random_range(0..cfg.instances_per_set);
            world.marks[ls][i].clear();
            world.stable[ls][i].clear();
            world.own[ls][i].clear();
            world.caches[ls][i].clear();
            if let Some(cache) = &mut world.read_caches[ls][i] {
                cache.clear();
            }
            // A new run of the instance: a new feed epoch, and its followers start over.
            world.feeds[ls] = FeedWriter::new(ls as LocalSet, cfg.local_sets, now, 1 << 12);
            for f in &mut world.following[ls] {
                *f = FeedReader::new(ls as LocalSet, f.writer, 1 << 12);
            }
        }
        if cfg.feed && !active.is_empty() && rng.random_bool(0.5) {
            feed_step(&mut world, cfg, &mut rng, now, &mut out);
        }
        if !world.feed_in_flight.is_empty() && (active.is_empty() || rng.random_bool(0.2)) {
            let (to, row) = world.feed_in_flight.swap_remove(rng.random_range(0..world.feed_in_flight.len()));
            world.store_row(to, row);
            continue;
        }
        if cfg.folded_cap.is_some() && rng.random_bool(0.1) {
            stabilize_one(&mut world, cfg, &mut rng, &mut out);
        }
        if cfg.confirm_own && rng.random_bool(0.1) {
            confirm_own(&mut world, cfg, &mut rng, &mut out);
        }
        // Replication competes with client steps; it is sometimes starved for long stretches.
        let replicate = !world.in_flight.is_empty() && (active.is_empty() || rng.random_bool(0.3));
        if replicate {
            let i = rng.random_range(0..world.in_flight.len());
            world.deliver(i);
            continue;
        }
        let chosen = active[rng.random_range(0..active.len())];
        let writing = writing_keys(&clients);
        let c = &mut clients[chosen];
        step_client(c, &mut world, cfg, &mut rng, &mut next_write, now, &mut out, &writing);
    }
    out.max_record_bytes = world.max_record_bytes;
    out.converged = converged(&world, cfg);
    out
}

/// The keys each local set is writing now (local set, key).
fn writing_keys(clients: &[Client]) -> Vec<(LocalSet, Vec<u8>)> {
    clients
        .iter()
        .filter_map(|c| match &c.running {
            Some((Running::Write { op, .. }, _)) => Some((c.ls, op.key().to_vec())),
            _ => None,
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn step_client(
    c: &mut Client,
    world: &mut World,
    cfg: &SimConfig,
    rng: &mut ChaCha8Rng,
    next_write: &mut WriteId,
    now: u64,
    out: &mut SimOutcome,
    writing: &[(LocalSet, Vec<u8>)],
) {
    let protocol = world.protocol[c.ls as usize].clone();
    let (running, started) = match c.running.take() {
        Some(r) => r,
        None => {
            let key = key_name(rng.random_range(0..cfg.keys));
            let write = rng.random_bool(cfg.write_ratio);
            if write && cfg.writers == Writers::Exclusive && writing.iter().any(|(ls, k)| *ls == c.ls && *k == key) {
                // The instance's lock on the key is taken: the write waits (and this session does nothing now).
                return;
            }
            let (ls, i) = (c.ls as usize, c.instance);
            let running = if write {
                let id = *next_write;
                *next_write += 1;
                let marks = &world.marks[ls][i];
                let began = world.read_caches[ls][i].as_mut().map(|cache| cache.start_write(&key, marks));
                let (op, step) = WriteOp::start(&protocol, &c.session, &key, id.to_be_bytes().to_vec());
                Running::Write { op, step, id, began }
            } else {
                if answer_from_read_cache(c, world, &key, Some(cfg.read_cache_ttl), now, now, out) {
                    out.read_cache_hits += 1;
                    return;
                }
                let began = world.read_caches[ls][i].as_ref().map(|cache| cache.begin(&world.marks[ls][i]));
                let (op, step) = ReadOp::start(&protocol, &key);
                Running::Read { op: Box::new(op), step, waited: None, began }
            };
            (running, now)
        }
    };
    let record = |c: &mut Client, out: &mut SimOutcome, ops: Vec<HistOp>| record_op(c, out, started, now, ops);
    match running {
        Running::Write { mut op, step, id, began } => {
            let (ls, i) = (c.ls as usize, c.instance);
            let input = match step {
                // As the driver: the cache only where stability cannot outrun what its instance fetched.
                Step::Fetch(copies)
                    if cfg.writers == Writers::Exclusive
                        && WriteCache::is_sound(cfg.feed, cfg.confirm_own || cfg.folded_cap.is_some()) =>
                {
                    let key = &copies[0].key;
                    match world.caches[ls][i].copies_for_write(&protocol, key) {
                        Some(records) => {
                            out.cached_writes += 1;
                            Input::Fetched(records)
                        }
                        None => {
                            let records = world.fetch(c.ls, &copies);
                            world.caches[ls][i].fetched(&protocol, key, &records);
                            Input::Fetched(records)
                        }
                    }
                }
                Step::Fetch(copies) => Input::Fetched(world.fetch(c.ls, &copies)),
                Step::Cas { copy, expect, record } if cfg.writers == Writers::Exclusive => {
                    world.caches[ls][i].stored(&copy.key, &record);
                    world.own[ls][i].stored(&copy, &record.meta, now);
                    if cfg.feed {
                        world.feeds[ls].stored(crate::feed::entry(&copy, &record.meta));
                    }
                    let (key, seq, value, clock) =
                        (copy.key.clone(), record.seq(), record.value.clone(), record.meta.clock.clone());
                    let applied = world.put(c.ls, copy, expect, record);
                    if let (Some(cache), Some(began)) = (&mut world.read_caches[ls][i], began) {
                        let version = Vertex { key: key.clone(), ls: c.ls, seq };
                        cache.wrote_through(&key, began, version, value, &clock, &world.marks[ls][i], now);
                    }
                    Input::Swapped(applied)
                }
                Step::Cas { copy, expect, record } => {
                    let applied = world.cas(c.ls, copy.clone(), expect, record.clone());
                    if applied {
                        world.own[ls][i].stored(&copy, &record.meta, now);
                    }
                    Input::Swapped(applied)
                }
                Step::Done(_) => unreachable!("a finished write is not resumed"),
                Step::FetchHeads(_) => unreachable!("a write reads metas"),
            };
            let step = op.resume(&protocol, input, &mut c.session, &world.stable[c.ls as usize][c.instance]);
            if let Step::Cas { record, .. } = &step {
                out.max_folded = out.max_folded.max(record.meta.folded.len());
                out.folded_written += record.meta.folded.len() as u64;
                if cfg.folded_cap.is_some_and(|cap| record.meta.folded.len() > cap) {
                    world.to_stabilize[c.ls as usize][c.instance].extend(record.meta.folded.iter().cloned());
                }
            }
            match step {
                Step::Done(vertex) => {
                    out.conflicts += u64::from(op.work.conflicts);
                    let ops = vec![HistOp::Write { object: object(&vertex.key), id, amount: 0 }];
                    record(c, out, ops);
                }
                step => c.running = Some((Running::Write { op, step, id, began }, started)),
            }
        }
        Running::Read { mut op, mut step, mut waited, began } => {
            // Versions waiting in the instance's followers' queues are checked with their own requirements.
            let following = &world.following[c.ls as usize];
            let own = |v: &Vertex| following.iter().find_map(|f| f.requirements(v)).filter(|_| cfg.feed);
            if let (true, Step::Fetch(_), Some(v)) = (cfg.feed, &step, op.version()) {
                let followed = following.iter().any(|f| f.writer == v.ls && f.wants().is_some());
                let turns = waited.unwrap_or(0);
                let over = op.walked_past(cfg.walk_budget).is_some();
                if followed && turns < FOLLOWER_WAIT_STEPS && (waited.is_some() || over) {
                    // As the driver: rather than wait for the newer version, the cached answer if it may be given.
                    if waited.is_none() && answer_from_read_cache(c, world, &v.key, None, started, now, out) {
                        out.read_cache_fallbacks += 1;
                        return;
                    }
                    let marks = &mut world.marks[c.ls as usize][c.instance];
                    if waited.is_none() {
                        out.follower_waits += 1;
                    }
                    if marks.covers(&v) || turns + 1 == FOLLOWER_WAIT_STEPS {
                        // Resolved by the follower (the read returns the head it read first), or waited long
                        // enough: start again from the winner, walking if it is still not marked.
                        out.follower_waits_resolved += u64::from(marks.covers(&v));
                        step = op.restart(marks, &mut c.session, &own);
                        waited = Some(FOLLOWER_WAIT_STEPS);
                    } else {
                        c.running = Some((Running::Read { op, step, waited: Some(turns + 1), began }, started));
                        return;
                    }
                }
            }
            let (copies, result) = match step {
                Step::Done(outcome) => (Vec::new(), Step::Done(outcome)),
                step => {
                    let (copies, input) = match step {
                        Step::FetchHeads(copies) => {
                            let heads = world.heads(c.ls, &copies);
                            world.caches[c.ls as usize][c.instance]
                                .observe(&copies, heads.iter().map(|h| h.as_ref().map(Head::clock)));
                            (copies, Input::Heads(heads))
                        }
                        Step::Fetch(copies) => {
                            let metas = world.fetch(c.ls, &copies);
                            world.caches[c.ls as usize][c.instance]
                                .observe(&copies, metas.iter().map(|m| m.as_ref().map(Meta::clock)));
                            (copies, Input::Fetched(metas))
                        }
                        _ => unreachable!("a read only fetches"),
                    };
                    let marks = &mut world.marks[c.ls as usize][c.instance];
                    let result = match (cfg.mode, input) {
                        (Mode::StoreAlone, Input::Heads(heads)) => Step::Done(latest_unresolved(&copies, heads)),
                        (_, input) => op.resume_with(input, marks, &mut c.session, &own),
                    };
                    (copies, result)
                }
            };
            match result {
                Step::Done(ReadOutcome::Unresolved { version, .. })
                    if answer_from_read_cache(c, world, &version.key, None, started, now, out) =>
                {
                    out.read_cache_fallbacks += 1;
                }
                Step::Done(ReadOutcome::Unresolved { missing, .. }) => {
                    // The client waits and retries (the real middleware does so up to its deadline), pulling the
                    // missing version first if it may.
                    out.unresolved += 1;
                    if cfg.pull && world.pull(c.ls, &missing) {
                        out.pulled += 1;
                    }
                }
                Step::Done(outcome) => {
                    out.reads += 1;
                    out.read_rounds += u64::from(op.work.rounds);
                    let (key, observed) = match outcome {
                        ReadOutcome::Value { value, version } => {
                            let (ls, i) = (c.ls as usize, c.instance);
                            if let (Some(cache), Some(began)) = (&mut world.read_caches[ls][i], began) {
                                let marks = &world.marks[ls][i];
                                cache.fill(&version.key, began, op.found(), version.clone(), value.clone(), marks, now);
                            }
                            let id = WriteId::from_be_bytes(value.try_into().expect("values are write ids"));
                            (version.key, Some(id))
                        }
                        ReadOutcome::Missing => (copies[0].key.clone(), None),
                        ReadOutcome::Unresolved { .. } => unreachable!(),
                    };
                    let ops = vec![HistOp::Read { object: object(&key), observed: Observed::Register(observed) }];
                    record(c, out, ops);
                }
                step => c.running = Some((Running::Read { op, step, waited, began }, started)),
            }
        }
    }
}

/// Answers a read of `key` by client `c`, started at step `started`, from its instance's read cache if that may
/// (entries younger than `ttl` steps, or of any age): records it in the history and returns true.
fn answer_from_read_cache(
    c: &mut Client,
    world: &World,
    key: &[u8],
    ttl: Option<u64>,
    started: u64,
    now: u64,
    out: &mut SimOutcome,
) -> bool {
    let (ls, i) = (c.ls as usize, c.instance);
    let Some(cache) = &world.read_caches[ls][i] else { return false };
    let Some((version, value)) = cache.lookup(c.ls, key, &world.marks[ls][i], now, ttl) else { return false };
    ReadCache::served(&mut c.session, version);
    let id = WriteId::from_be_bytes(value.try_into().expect("values are write ids"));
    out.reads += 1;
    record_op(c, out, started, now, vec![HistOp::Read { object: object(key), observed: Observed::Register(Some(id)) }]);
    true
}

/// Client `c` completed an operation (one transaction in the history) that started at step `started`.
fn record_op(c: &mut Client, out: &mut SimOutcome, started: u64, now: u64, ops: Vec<HistOp>) {
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
}

/// One instance makes one queued version stable (the walk runs against the stores as they are at this step).
fn stabilize_one(world: &mut World, cfg: &SimConfig, rng: &mut ChaCha8Rng, out: &mut SimOutcome) {
    let queued: Vec<(usize, usize)> = (0..cfg.local_sets)
        .flat_map(|ls| (0..cfg.instances_per_set).map(move |i| (ls, i)))
        .filter(|&(ls, i)| !world.to_stabilize[ls][i].is_empty())
        .collect();
    if queued.is_empty() {
        return;
    }
    let (ls, i) = queued[rng.random_range(0..queued.len())];
    let q = &mut world.to_stabilize[ls][i];
    let root = q.swap_remove(rng.random_range(0..q.len()));
    let mut stable = std::mem::replace(&mut world.stable[ls][i], Marks::new(1));
    let store = &world.stores[ls];
    let before = stable.clone();
    let mut confirmed = Vec::new();
    StabilizeOp::run(
        root,
        64,
        &mut stable,
        |copy| store.get(copy).map(|r| r.meta.clone()),
        |v| {
            let ok = world.everywhere(v);
            if ok {
                confirmed.push(v.clone());
            }
            ok
        },
    );
    out.stabilized += world.assert_marked_stable_hold(&confirmed, &before, &stable);
    world.stable[ls][i] = stable;
}

/// One instance confirms a batch of its own writes against the stores as they are at this step (a version not yet
/// replicated everywhere is not confirmed; the simulated store does not repair), and marks what it may.
fn confirm_own(world: &mut World, cfg: &SimConfig, rng: &mut ChaCha8Rng, out: &mut SimOutcome) {
    let (ls, i) = (rng.random_range(0..cfg.local_sets), rng.random_range(0..cfg.instances_per_set));
    let (count, copies) = world.own[ls][i].due(u64::MAX, rng.random_range(1..=4));
    if count == 0 {
        return;
    }
    let answers: Vec<(Vertex, bool)> = copies.into_iter().map(|v| (v.clone(), world.everywhere(&v))).collect();
    let before = world.stable[ls][i].clone();
    let outcome = world.own[ls][i].confirmed(count, &answers, &mut world.stable[ls][i]);
    let confirmed: Vec<Vertex> = answers.into_iter().filter(|(_, ok)| *ok).map(|(v, _)| v).collect();
    world.assert_marked_stable_hold(&confirmed, &before, &world.stable[ls][i]);
    out.stabilized += outcome.marked as u64;
    out.confirmed_own += outcome.marked as u64;
}

/// One step of the feeds in one local set (the instance's only one): append a batch, read the followers' frontiers
/// and mark stable what every one resolved (checking each mark against the ground truth), or follow another local
/// set's feed one step (learn its epoch, read batches, resolve the next versions, publish the frontier).
fn feed_step(world: &mut World, cfg: &SimConfig, rng: &mut ChaCha8Rng, now: u64, out: &mut SimOutcome) {
    let ls = rng.random_range(0..cfg.local_sets) as LocalSet;
    match rng.random_range(0..3) {
        0 => {
            let feed = &mut world.feeds[ls as usize];
            let (epoch, announcement) = (feed.epoch, feed.announcement());
            let next = feed.next_batch(rng.random_range(1..=3));
            if world.frontiers[ls as usize].get(&(ls, ls)).is_none_or(|&(_, f)| f != announcement) {
                world.put_row(ls, || FeedRow::Frontier { reader: ls, writer: ls, at: now, frontier: announcement });
            }
            if let Some((number, batch)) = next {
                world.put_row(ls, || FeedRow::Batch { writer: ls, epoch, number, batch: batch.clone() });
            }
        }
        1 => {
            let before = world.stable[ls as usize][0].clone();
            let mut marked = Vec::new();
            for reader in (0..cfg.local_sets as LocalSet).filter(|&r| r != ls) {
                if let Some(&(_, frontier)) = world.frontiers[ls as usize].get(&(reader, ls)) {
                    let stable = &mut world.stable[ls as usize][0];
                    marked.extend(world.feeds[ls as usize].frontier(reader, frontier, stable));
                }
            }
            out.stable_by_feed += world.assert_marked_stable_hold(&marked, &before, &world.stable[ls as usize][0]);
        }
        _ => {
            let f = rng.random_range(0..cfg.local_sets - 1);
            let writer = world.following[ls as usize][f].writer;
            if let Some(&(_, announced)) = world.frontiers[ls as usize].get(&(writer, writer)) {
                let own = world.frontiers[ls as usize].get(&(ls, writer)).map(|&(_, f)| f);
                world.following[ls as usize][f].announced(announced, own);
            }
            let reader = &mut world.following[ls as usize][f];
            if let Some((epoch, from)) = reader.wants() {
                let rows = &world.batches[ls as usize];
                let read: Vec<(u64, Batch)> =
                    (from..from + 4).filter_map(|n| rows.get(&(writer, epoch, n)).map(|b| (n, b.clone()))).collect();
                reader.batches(epoch, read);
            }
            if let Some((n, mut check)) = reader.next() {
                let mut marks = std::mem::replace(&mut world.marks[ls as usize][0], Marks::new(1));
                let present = resolve(world, ls, &mut check, &mut marks);
                world.marks[ls as usize][0] = marks;
                out.followed += world.following[ls as usize][f].checked(n, present).len() as u64;
            }
            let published = world.frontiers[ls as usize].get(&(ls, writer)).map(|&(_, f)| f);
            match world.following[ls as usize][f].frontier() {
                Some(frontier) if published != Some(frontier) => {
                    world.put_row(ls, || FeedRow::Frontier { reader: ls, writer, at: now, frontier });
                }
                _ => {}
            }
        }
    }
}

/// Runs a [`Resolution`] against local set `ls`'s store as it is now, for instance 0; marks and returns whether all
/// was present. Its fetches raise the clocks of the instance's write cache, as every fetch of the driver does (a
/// version marked resolved may enter a session's causal past without the session fetching it).
fn resolve(world: &mut World, ls: LocalSet, check: &mut Resolution, marks: &mut Marks) -> bool {
    loop {
        match check.next(marks) {
            Check::Fetch(copies) => {
                let metas = world.fetch(ls, &copies);
                world.caches[ls as usize][0].observe(&copies, metas.iter().map(|m| m.as_ref().map(Meta::clock)));
                check.fetched(metas);
            }
            Check::Present => {
                check.mark(marks);
                return true;
            }
            Check::Missing(_) => return false,
        }
    }
}

fn latest_unresolved(copies: &[Copy], heads: Vec<Option<Head>>) -> ReadOutcome {
    copies.iter().zip(heads).filter_map(|(c, h)| h.map(|h| (c, h))).max_by_key(|(c, h)| h.rank(c.ls)).map_or(
        ReadOutcome::Missing,
        |(c, h)| ReadOutcome::Value {
            version: Vertex { key: c.key.clone(), ls: c.ls, seq: h.seq(c.ls) },
            value: h.value,
        },
    )
}

/// With replication quiesced, every local set resolves every key, and all read the same value.
fn converged(world: &World, cfg: &SimConfig) -> bool {
    (0..cfg.keys).all(|k| {
        let key = key_name(k);
        let values: Vec<ReadOutcome> = (0..cfg.local_sets as LocalSet)
            .map(|ls| {
                let protocol = &world.protocol[ls as usize];
                ReadOp::run(
                    protocol,
                    &key,
                    &mut Marks::new(1024),
                    &mut Session::new(),
                    |copies| world.heads(ls, copies),
                    |copies| world.fetch(ls, copies),
                )
            })
            .collect();
        values.iter().all(|v| !matches!(v, ReadOutcome::Unresolved { .. }))
            && values.windows(2).all(|w| match (&w[0], &w[1]) {
                (ReadOutcome::Value { value: a, .. }, ReadOutcome::Value { value: b, .. }) => a == b,
                (a, b) => a == b,
            })
    })
}
