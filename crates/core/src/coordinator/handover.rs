//! The coordinator's side of HoneyPot's write buffer (docs/design/honeypot.md §3): update transactions that read
//! through the cache are acknowledged once buffered ([`crate::buffer::WriteBuffer`]), their effects are read back by
//! later transactions here, and each component is handed over to its owners in one Cure commit when its lease ends.
//!
//! **Rounds.** Handovers go in rounds: when a component's lease ends (or something asks for a flush), every pending
//! component is taken out of the buffer and committed in one transaction. Not only the component whose lease
//! ended: a session's later transaction may sit in a younger component than its earlier one (they need not share
//! an object), and it must not become visible anywhere before the earlier one; a round commits above every earlier
//! round (below), so buffer order holds. (HoneyPot hands each component over on its own; the paper does not say
//! how a session's order across components is kept.)
//!
//! **Who reads a handed-over component.** A handover commits at `c`, above its round's snapshot `s`, whose local
//! entry is the coordinator's clock when the round starts (a partition's prepare time exceeds the snapshot's local
//! entry). Every transaction that started before the round has its window's top below `s`; one that starts during
//! the round has its window's top lowered to `s` (or waits for the round's end, if the client's clock is above
//! `s`). So `c[local]` exceeds the top of the window of every transaction open during the round: none of them can
//! read the handover at the owners, and they go on reading its effects from the buffer. After the round, the component is
//! *retired*: kept readable while a transaction may still exclude `c`. A transaction reading one of its objects
//! settles the question once: if its window's least snapshot covers `c` it reads the owner's state (which holds
//! the handover); otherwise its window's top is lowered below `c` and it reads the effects from the buffer. Windows
//! only narrow, so the choice stands for the rest of the transaction. A retired component goes once the cache floor
//! covers `c` (every new window starts above it) and every open window's least snapshot does too.
//!
//! **Order across handovers.** Every handover commits above every earlier one (its snapshot joins their commit
//! vectors), so a transaction that read a handed-over effect from the buffer and was buffered itself commits, at
//! its own handover, above what it read — also at other DCs, which apply one origin's commits in vector order.
//!
//! **Who bypasses the buffer.** Transactions that spend a bounded counter's rights commit at the owners (after the
//! buffer is handed over, so that the increments they may rely on are there), as do transactions that do not read
//! through the cache: they start once what was buffered before them is handed over, with their clock raised above
//! it, so a session's fresh reads see its buffered writes.

use super::durable::BufferRecord;
use super::{Coordinator, Kind, Phase, Tx};
use crate::buffer::{BufferConfig, BufferStats, BufferedTx, Component, TxView, WriteBuffer};
use crate::bugs::{self, Bug};
use crate::cache::{CacheConfig, Window};
use crate::{DcId, ObjectId, RequestId, Timestamp, TxId, VectorClock};
use causet_crdt::{Effect, EffectCtx, Stamp};
use std::collections::{BTreeMap, VecDeque};

/// While a round of handovers is under way, components may grow up to this many times
/// [`BufferConfig::max_component_objects`] before transactions wait for the round (the next round starts as soon
/// as this one ends).
pub(super) const OVER_CAP: usize = 4;

/// Counters of the handovers, with the buffer's.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct HandoverStats {
    /// The buffer's counters and sizes.
    pub buffer: BufferStats,
    /// Rounds of handovers started.
    pub rounds: u64,
    /// Components handed over (committed at their owners).
    pub handovers: u64,
    /// Handover transactions that failed (a prepare refused or timed out) and were sent again as new ones.
    pub retries: u64,
    /// Time from the start of a round to each of its handovers' commits, summed (µs), and the largest.
    pub handover_us_total: u64,
    /// See `handover_us_total`.
    pub handover_us_max: u64,
    /// Objects handed over, summed over handovers (their mean size is `handed_objects / handovers`).
    pub handed_objects: u64,
    /// Handed-over components still readable from the buffer now.
    pub retired: usize,
    /// Components in the round of handovers under way, not yet committed.
    pub in_flight: usize,
    /// Transactions that waited for a handover before they could start or commit.
    pub waits: u64,
    /// Other coordinators' questions for a handover answered (their clients saw this buffer: `tokens`).
    pub asked: u64,
}

/// A component whose handover is decided: readable by the transactions whose window excludes its commit.
#[derive(Debug)]
struct Retired {
    commit: VectorClock,
    /// The transaction that carried it (its effects took its stamp).
    tx: TxId,
    component: Component,
}

impl Retired {
    /// The stamp its effects committed with (as the partitions stamp a commit).
    fn stamp(&self) -> Stamp {
        Stamp { time: self.commit.sum(), tx: self.tx.tag() }
    }
}

/// A round of handovers under way.
#[derive(Debug)]
struct Round {
    started_us: u64,
    /// Its snapshot: its commit lies above it (in the local entry strictly).
    snapshot: VectorClock,
    /// The components not yet committed, by the transaction handing each over.
    open: BTreeMap<TxId, Component>,
    /// Components whose handover failed, to send again at a time with the same snapshot.
    again: Vec<(u64, VectorClock, Component)>,
    decided: Vec<Retired>,
    /// Handovers of the round that failed: each attempt after one waits longer for its prepares (a link slower
    /// than the timeout would otherwise fail every attempt).
    retries: u32,
}

impl Round {
    /// Every component of the round, committed or not (waiting for a retry included: readers must still see it;
    /// simulator seed 363 found a session's writes missing while their handover waited to go again).
    fn components(&self) -> impl Iterator<Item = &Component> {
        let decided = self.decided.iter().map(|d| &d.component);
        decided.chain(self.open.values()).chain(self.again.iter().map(|(_, _, c)| c))
    }
}

/// The coordinator's write buffer and its handovers.
#[derive(Debug)]
pub(super) struct Buffering {
    pub(super) buffer: WriteBuffer,
    retired: VecDeque<Retired>,
    round: Option<Round>,
    rounds_started: u64,
    rounds_done: u64,
    /// The join of every decided handover's commit vector: later handovers commit above it.
    pub(super) handed: Option<VectorClock>,
    /// Hand everything over at the next chance.
    pub(super) flush: bool,
    /// After a restart: every handover of the earlier runs (their retired components, which windows below them
    /// read, are not logged), so that every window starts above them.
    pub(super) recovered_floor: Option<VectorClock>,
    /// New transactions may be buffered (false: a log left by an earlier run is handed over, and this run does
    /// not buffer writes).
    pub(super) accepting: bool,
    /// The buffer's log: outputs wait for its records.
    pub(super) log: super::durable::Log,
    /// Other coordinators' questions (`tokens`): where to answer, their number, and the round that answers them.
    pub(super) asked: Vec<(crate::Address, u64, u64)>,
    /// Rounds for leases start no earlier (rounds are spaced so that starts rarely wait for one).
    next_round_us: u64,
    lease_us: u64,
    memory_bytes: usize,
    pub(super) stats: HandoverStats,
}

impl Buffering {
    pub(super) fn new(config: &CacheConfig) -> Self {
        let buffer_config =
            BufferConfig { lease_us: config.lease_us, max_component_objects: config.max_component_objects.max(1) };
        Self {
            buffer: WriteBuffer::new(buffer_config),
            accepting: true,
            recovered_floor: None,
            log: super::durable::Log::default(),
            retired: VecDeque::new(),
            asked: Vec::new(),
            round: None,
            rounds_started: 0,
            rounds_done: 0,
            handed: None,
            flush: false,
            next_round_us: 0,
            lease_us: config.lease_us,
            memory_bytes: config.memory_bytes,
            stats: HandoverStats::default(),
        }
    }

    /// Puts back the round that was under way when an earlier run of the node stopped (recovery): its handover
    /// `decided` commits (the coordinator sends the commit again), or, undecided, goes again at once as a new
    /// transaction.
    pub(super) fn restore_round(
        &mut self,
        now_us: u64,
        snapshot: VectorClock,
        decided: Option<TxId>,
        component: Component,
    ) {
        self.rounds_started += 1;
        self.stats.rounds += 1;
        let mut round = Round {
            started_us: now_us,
            snapshot,
            open: BTreeMap::new(),
            again: Vec::new(),
            decided: Vec::new(),
            retries: 0,
        };
        match decided {
            Some(tx) => {
                round.open.insert(tx, component);
            }
            None => round.again.push((now_us, round.snapshot.clone(), component)),
        }
        self.round = Some(round);
    }

    /// The snapshot of the round of handovers under way, if any: a transaction that reads through the cache and
    /// starts during the round reads at or below it (so it cannot see the round's commit at the owners, and reads
    /// the round's effects from the buffer), or waits for the round's end if its clock is above it.
    pub(super) fn round_snapshot(&self) -> Option<&VectorClock> {
        self.round.as_ref().map(|r| &r.snapshot)
    }

    /// Rounds finished.
    pub(super) fn rounds_done(&self) -> u64 {
        self.rounds_done
    }

    /// Asks for everything buffered now to be handed over; returns the round after whose end it is.
    pub(super) fn request_flush(&mut self) -> u64 {
        if self.buffer.stats().components > 0 {
            self.flush = true;
            self.rounds_started + 1
        } else {
            self.rounds_started
        }
    }

    /// Something buffered or in a round of handovers: not handed over yet.
    pub(super) fn holds_pending(&self) -> bool {
        self.buffer.stats().components > 0 || self.round.is_some()
    }

    /// The join of every handed-over commit: a transaction that does not read the buffer starts above it.
    pub(super) fn handed(&self) -> Option<&VectorClock> {
        self.handed.as_ref()
    }

    /// The join of the dependencies of everything readable from the buffer: a window starts at or above it, so
    /// that a transaction reading a buffered effect also sees what that effect depends on.
    pub(super) fn deps(&self) -> Option<VectorClock> {
        let mut deps = self.buffer.deps().cloned();
        let round = self.round.iter().flat_map(Round::components);
        for component in self.retired.iter().map(|r| &r.component).chain(round) {
            match &mut deps {
                Some(d) => d.merge_max(&component.deps),
                None => deps = Some(component.deps.clone()),
            }
        }
        deps
    }

    /// What a transaction starting now records.
    pub(super) fn start(&self) -> TxView {
        self.buffer.start()
    }

    /// Settles, before a transaction reads `object`, whether its window includes each retired handover of the
    /// object or excludes it (lowering the window's top below the commit). See the module's documentation.
    pub(super) fn settle(&self, local: DcId, object: &ObjectId, window: &mut Window) {
        for r in self.retired.iter().filter(|r| r.component.objects.contains_key(object)) {
            if r.commit.le(&window.lo) || !r.commit.le(&window.hi) {
                continue;
            }
            // Lower one entry where the commit exceeds the window's bottom (one exists: the commit is not below
            // it), the local one if it can.
            let entries = r.commit.entries().iter().zip(window.lo.entries()).enumerate();
            let (k, c) = entries
                .filter(|(_, (c, lo))| c > lo)
                .map(|(k, (c, _))| (k, *c))
                .max_by_key(|(k, _)| *k == usize::from(local.0))
                .expect("a commit not below the window's bottom exceeds it somewhere");
            let k = DcId(u16::try_from(k).expect("few DCs"));
            let lowered = Timestamp(c.0 - 1).min(window.hi.get(k));
            window.hi.set(k, lowered);
            debug_assert!(window.lo.le(&window.hi), "settling keeps the window open");
        }
    }

    /// The buffered effects of `object` a transaction reads, in the order they apply, each with the stamp to apply
    /// it with: handed-over components its window excludes (with their commit's stamp, so that last-writer-wins
    /// decides between them and the owner's state as the owner does), the round under way, then the pending ones
    /// (pending: their handover will commit above every snapshot a window here reads at); each up to the
    /// transaction's start position.
    pub(super) fn effects<'a>(
        &'a self,
        object: &'a ObjectId,
        position: u64,
        window: &'a Window,
    ) -> impl Iterator<Item = (Stamp, &'a Effect)> + 'a {
        let retired = self.retired.iter().filter(move |r| {
            debug_assert!(
                r.commit.le(&window.lo) || !r.commit.le(&window.hi) || !r.component.objects.contains_key(object),
                "a retired handover read before it was settled"
            );
            !r.commit.le(&window.hi)
        });
        let retired = retired.flat_map(move |r| {
            let stamp = r.stamp();
            r.component.effects(object, position).map(move |e| (stamp, e))
        });
        let round = self.round.iter().flat_map(Round::components).flat_map(move |c| c.effects(object, position));
        let pending = round.chain(self.buffer.effects(object, position)).map(|e| (Stamp::PENDING, e));
        retired.chain(pending)
    }

    /// Drops retired handovers no window can exclude any more: the cache floor and every open window's bottom
    /// cover their commit.
    pub(super) fn forget_retired<'a>(
        &mut self,
        floor: Option<&VectorClock>,
        windows: impl Iterator<Item = &'a Window>,
    ) {
        let Some(floor) = floor else { return };
        let windows: Vec<&Window> = windows.collect();
        while let Some(r) = self.retired.front() {
            if !(r.commit.le(floor) && windows.iter().all(|w| r.commit.le(&w.lo))) {
                break;
            }
            self.retired.pop_front();
        }
    }

    /// The local time of the next round for leases, if anything is buffered.
    pub(super) fn next_round(&self) -> Option<u64> {
        if let Some(round) = &self.round {
            return round.again.iter().map(|(at, _, _)| *at).min();
        }
        if self.flush {
            return Some(0);
        }
        self.buffer.next_due().map(|due| due.max(self.next_round_us))
    }

    pub(super) fn stats(&self) -> HandoverStats {
        HandoverStats {
            buffer: self.buffer.stats(),
            retired: self.retired.len(),
            in_flight: self.round.as_ref().map_or(0, |r| r.open.len() + r.again.len()),
            ..self.stats.clone()
        }
    }
}

impl Coordinator {
    /// Buffers a committing transaction that read through the cache, if it can be: `Ok(true)` it was buffered and
    /// answered, `Ok(false)` it must commit at the owners, `Err(round)` it waits for that round first.
    pub(super) fn try_buffer(&mut self, now_us: u64, id: TxId, request: RequestId) -> Result<bool, u64> {
        let newest_open = self.newest_open_view(id);
        let tx = self.txs.get(&id).expect("a committing transaction is open");
        let (Some(b), Some(view)) = (&mut self.buffering, tx.view) else { return Ok(false) };
        if tx.writes.iter().any(|(_, e)| e.spends_rights()) || !b.accepting {
            // Rights are checked where the effect commits: commit at the owners, after the increments buffered so
            // far, which it may count on, are there. (Likewise when this run does not buffer: it may have read
            // effects an earlier run buffered.)
            return if tx.flushed { Ok(false) } else { Err(b.request_flush()) };
        }
        let read: Vec<ObjectId> = tx.cache.keys().filter(|o| b.buffer.holds(o)).cloned().collect();
        let objects = || tx.writes.iter().map(|(o, _)| o).chain(&read);
        if b.buffer.admit(objects()).is_err() {
            // The components it would join are full: everything pending goes in a round of handovers, and the
            // transaction then starts a component of its own, as any transaction committing during a round does
            // (the round's effects it read stay readable, and the round commits below its own handover). Until
            // 2026-11-30 the transaction waited for that round instead, and rounds go one at a time: with keys
            // few enough that every transaction joins one component (uniform over 100 keys, all updates), a
            // round's worth of transactions ran per round, 0.42x the throughput of no buffering.
            if b.round.is_none() {
                b.flush = true;
                self.start_round(now_us);
                let b = self.buffering.as_mut().expect("buffering");
                return if b.round.is_some() { self.try_buffer(now_us, id, request) } else { Err(b.request_flush()) };
            }
            // A round is under way: the next goes as soon as it ends, and components may grow meanwhile up to
            // OVER_CAP times the cap; past that, the transaction waits for the round.
            if b.buffer.admit_up_to(objects(), b.buffer.config().max_component_objects * OVER_CAP).is_err() {
                return Err(b.request_flush());
            }
            b.flush = true;
        }
        let tx = self.txs.remove(&id).expect("checked above");
        let (client, deps, seq_end) = (tx.client, tx.snapshot, tx.ctx.next_seq);
        let record =
            BufferRecord::Buffered { writes: tx.writes.clone(), read: read.clone(), deps: deps.clone(), seq_end };
        let buffered = BufferedTx { writes: tx.writes, read, deps: deps.clone(), seq_end, newest_open };
        debug_assert!(view.position <= b.buffer.start().position);
        b.buffer.add(now_us, buffered);
        if b.buffer.bytes() > b.memory_bytes / 2 {
            b.flush = true;
        }
        // Durable before the client hears of it (the reply waits for the record).
        self.persist(record);
        self.finish(id, super::Finished::Committed);
        self.reply(client, request, Ok(super::ClientResponse::Committed { commit: deps, token: None }));
        self.start_round(now_us);
        Ok(true)
    }

    /// The latest start position among the open transactions other than `except` that read the buffer.
    fn newest_open_view(&self, except: TxId) -> Option<u64> {
        self.txs.iter().filter(|(id, _)| **id != except).filter_map(|(_, tx)| tx.view.map(|v| v.position)).max()
    }

    /// Starts a round of handovers if one is due (a lease ended, or a flush was asked for) and none is under way.
    pub(super) fn start_round(&mut self, now_us: u64) {
        self.resend_handovers(now_us);
        if self.buffering.as_ref().is_none_or(|b| b.round.is_some() || b.next_round().is_none_or(|at| at > now_us)) {
            return;
        }
        let clock = self.clock.current(now_us);
        let stable = self.config.protocol.rules().remote_snapshot(&self.stable, self.config.dc);
        let b = self.buffering.as_mut().expect("checked above");
        // Every pending component goes, in one commit, whichever lease ended: a session's later transaction may sit
        // in a younger component than its earlier one (they need not share an object), and must not become visible
        // before it anywhere. One commit per round, and each round above the last, keeps buffer order.
        let ids = b.buffer.due(u64::MAX);
        b.flush = false;
        b.next_round_us = now_us + (b.lease_us / 8).max(1);
        if ids.is_empty() {
            return;
        }
        b.rounds_started += 1;
        b.stats.rounds += 1;
        let taken: Vec<Component> = ids.into_iter().filter_map(|c| b.buffer.take(c)).collect();
        let all = union(taken);
        // Above every earlier handover, and above every snapshot a window here ever read at (remote entries up to
        // the stable snapshot, the local one up to the clock): every version a reader of these effects saw under
        // them precedes the handover, at every replica's last-writer-wins too.
        let mut snapshot = all.deps.clone();
        snapshot.merge_max(&stable);
        if let Some(handed) = &b.handed {
            snapshot.merge_max(handed);
        }
        let local = self.config.dc;
        snapshot.set(local, snapshot.get(local).max(clock));
        let mut components = vec![all];
        if bugs::has(&self.config, Bug::SplitHandover) {
            components = components.into_iter().flat_map(split).collect();
        }
        b.round = Some(Round {
            started_us: now_us,
            snapshot: snapshot.clone(),
            open: BTreeMap::new(),
            again: Vec::new(),
            decided: Vec::new(),
            retries: 0,
        });
        self.persist(BufferRecord::RoundStarted { snapshot: snapshot.clone() });
        for component in components {
            let id = self.hand_over(now_us, snapshot.clone(), &component);
            self.buffering.as_mut().expect("buffering").round.as_mut().expect("a round").open.insert(id, component);
        }
    }

    /// Sends one component's effects to its owners as a transaction of its own, in two phases.
    fn hand_over(&mut self, now_us: u64, snapshot: VectorClock, component: &Component) -> TxId {
        let id = TxId { dc: self.config.dc, coordinator: self.id, seq: self.next_seq };
        self.next_seq += 1;
        let writes = writes_of(component);
        self.txs.insert(id, Tx::handover(id, snapshot, writes, Phase::Idle { deadline_us: 0 }));
        // After failed attempts, a longer wait for the prepares: the timeout doubled per failure, up to 8 times.
        let retries = self.buffering.as_ref().and_then(|b| b.round.as_ref()).map_or(0, |r| r.retries);
        // Never prepared and committed in one step: a timeout would leave its outcome unknown, and a handover must
        // be retried exactly when it did not commit.
        self.prepare_all(now_us, id, RequestId(0), false, self.config.op_timeout_us << retries.min(3));
        id
    }

    /// A handover committed at every owner.
    pub(super) fn on_handover_committed(&mut self, now_us: u64, id: TxId, commit: VectorClock) {
        let Some(b) = &mut self.buffering else { return };
        let Some(round) = &mut b.round else { return };
        let Some(component) = round.open.remove(&id) else { return };
        let took = now_us.saturating_sub(round.started_us);
        b.stats.handovers += 1;
        b.stats.handover_us_total += took;
        b.stats.handover_us_max = b.stats.handover_us_max.max(took);
        b.stats.handed_objects += component.objects.len() as u64;
        match &mut b.handed {
            Some(h) => h.merge_max(&commit),
            None => b.handed = Some(commit.clone()),
        }
        round.decided.push(Retired { commit, tx: id, component });
        if !round.open.is_empty() || !round.again.is_empty() {
            return;
        }
        let round = b.round.take().expect("checked above");
        b.retired.extend(round.decided);
        b.rounds_done += 1;
        let done = b.rounds_done;
        // Retired effects are read with their commit's stamp, below every pending one: only open transactions and
        // pending effects hold numbers now. (Restarting while a round's effects were still read as pending let a
        // transaction's own assign lose to one of them: simulator seed 31.)
        let open = self.txs.values().any(|tx| tx.view.is_some());
        self.buffering.as_mut().expect("buffering").buffer.restart_seq(open);
        self.log_round_done();
        self.answer_asked();
        self.release_starts(now_us);
        let waiting: Vec<(TxId, RequestId)> = self
            .txs
            .iter()
            .filter_map(|(id, tx)| match tx.phase {
                Phase::Flushing { request, after_round, .. } if after_round <= done => Some((*id, request)),
                _ => None,
            })
            .collect();
        for (id, request) in waiting {
            let tx = self.txs.get_mut(&id).expect("listed above");
            tx.flushed = true;
            tx.phase = Phase::Idle { deadline_us: 0 };
            self.commit(now_us, id, request);
        }
        self.start_round(now_us);
    }

    /// A handover's prepare failed (refused, or timed out): it did not commit (the coordinator decides, and
    /// decided to abort); its component goes again as a new transaction of the same round, one retry interval
    /// later. Buffered writes were acknowledged: they are never dropped, however often this happens.
    pub(super) fn retry_handover(&mut self, now_us: u64, id: TxId) {
        let snapshot = self.txs.get(&id).map(|tx| tx.snapshot.clone()).expect("an aborting handover is open");
        let at = now_us + self.config.retry_interval_us.max(1);
        let Some(b) = &mut self.buffering else { return };
        let Some(round) = &mut b.round else { return };
        let Some(component) = round.open.remove(&id) else { return };
        b.stats.retries += 1;
        round.retries += 1;
        round.again.push((at, snapshot, component));
    }

    /// Sends again the handovers whose retry is due.
    fn resend_handovers(&mut self, now_us: u64) {
        let Some(round) = self.buffering.as_mut().and_then(|b| b.round.as_mut()) else { return };
        let (due, later) = std::mem::take(&mut round.again).into_iter().partition(|(at, _, _)| *at <= now_us);
        round.again = later;
        for (_, snapshot, component) in due {
            let id = self.hand_over(now_us, snapshot, &component);
            let round = self.buffering.as_mut().and_then(|b| b.round.as_mut()).expect("the round is under way");
            round.open.insert(id, component);
        }
    }

    /// Lets a transaction wait for a round of handovers before it commits.
    pub(super) fn wait_for_round(&mut self, now_us: u64, id: TxId, request: RequestId, after_round: u64) {
        let deadline_us = now_us + self.config.op_timeout_us;
        let tx = self.txs.get_mut(&id).expect("an open transaction waits");
        if self.buffering.as_ref().is_some_and(|b| b.rounds_done >= after_round) {
            // Nothing was buffered nor under way: nothing to wait for.
            tx.flushed = true;
            return self.commit(now_us, id, request);
        }
        tx.phase = Phase::Flushing { request, after_round, deadline_us };
        if let Some(b) = &mut self.buffering {
            b.stats.waits += 1;
        }
        self.start_round(now_us);
    }

    /// The buffer's and its handovers' counters, if the coordinator buffers writes.
    pub fn handover_stats(&self) -> Option<HandoverStats> {
        self.buffering.as_ref().map(Buffering::stats)
    }
}

/// One component per object of `component` (only for the deliberate bug [`Bug::SplitHandover`]).
fn split(component: Component) -> Vec<Component> {
    let Component { ids, objects, deps, due_us, transactions, bytes } = component;
    objects
        .into_iter()
        .map(|(object, list)| Component {
            ids: ids.clone(),
            objects: BTreeMap::from([(object, list)]),
            deps: deps.clone(),
            due_us,
            transactions,
            bytes,
        })
        .collect()
}

impl Tx {
    /// A handover transaction of `writes` at `snapshot` (no client waits for it).
    pub(super) fn handover(id: TxId, snapshot: VectorClock, writes: Vec<(ObjectId, Effect)>, phase: Phase) -> Self {
        Tx {
            client: crate::ClientId(u64::MAX),
            kind: Kind::Handover,
            snapshot,
            ctx: EffectCtx::new(id.tag(), id.dc.0),
            phase,
            cache: BTreeMap::new(),
            writes,
            reads: super::ReadFrom::Fresh,
            window: None,
            view: None,
            flushed: false,
        }
    }
}

/// A component's effects as a transaction's writes, object by object in order.
pub(super) fn writes_of(component: &Component) -> Vec<(ObjectId, Effect)> {
    let objects = component.objects.iter();
    objects.flat_map(|(o, list)| list.iter().map(move |b| (o.clone(), b.effect.clone()))).collect()
}

/// One component holding every object of `components` (each object is in one of them).
pub(super) fn union(components: Vec<Component>) -> Component {
    let mut all = components.into_iter();
    let mut union = all.next().expect("a round takes at least one component");
    all.for_each(|c| union.absorb(c));
    union
}
