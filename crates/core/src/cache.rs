//! HoneyPot's lease cache of objects at a coordinator (docs/design/honeypot.md): object states fetched from their
//! owners, each with its visibility box, kept for a lease and served to transactions whose snapshot window meets
//! the box.
//!
//! A cached transaction does not fix one snapshot: it carries a [`Window`] of snapshots it may still read at,
//! from the client's clock (raised to the cache floor) to the snapshot Cure would have chosen. A hit narrows the
//! window to the part the entry's box covers; a miss is fetched at the window's top, and its box (which holds that
//! point) narrows it the same way. Every state a transaction read is then exact at every snapshot of its final
//! window: the reads form one causally consistent snapshot, as Cure's do, only possibly up to a lease older.
//!
//! Under partial replication a state fetched from a holder at another DC is exact in this DC's own entry only up
//! to what the holder had applied from here; the cache raises that entry while this DC has not written the object
//! since ([`crate::away`]), or its entries of objects held elsewhere would miss every later transaction's window.
//! With every object held everywhere the partitions tell of every write, and the cache raises the boxes of states
//! fetched here the same way: a box ends at the owner's pvc when it was fetched, and every commit moves its session
//! past that.
//!
//! An entry whose box is open lives until a notice of a write closes it (Karma's cache: stable values kept until
//! invalidated), or until memory runs short; one whose box is closed, for a lease. When a write closes an entry
//! that transactions read, the coordinator fetches the object again in the background (`refresh`), so that the
//! next transaction finds the new state here instead of waiting a round trip for it: HoneyPot's and Karma's
//! invalidations made updates, for the objects read here.
//!
//! Invariants (asserted in debug builds and tested): a window is never empty (`lo ≤ hi`); an entry is served only
//! before its lease ends; and an entry open in entry `k` is exact there up to what notices are known to
//! ([`Known::to`]): no notice of a write of origin `k` to it after `hi[k]` has arrived (a notice that does closes
//! it at once, [`Cache::learn_away`]).

use crate::away::{self, Known};
use crate::message::Fetched;
use crate::{DcId, DetHashMap, ObjectId, Timestamp, VectorClock};
use causet_crdt::Crdt;
use std::collections::{BTreeMap, VecDeque};

/// The cache's settings.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CacheConfig {
    /// How long an entry may be served after it was fetched, µs: the bound on how stale a hit is.
    pub lease_us: u64,
    /// Most bytes of cached states (their encoded size); the least recently used go first. Buffered writes are
    /// handed over early when they take more than half of it.
    pub memory_bytes: usize,
    /// Whether update transactions that read through the cache are buffered at the coordinator and handed over to
    /// the owners one lease later (HoneyPot's write buffer, [`crate::buffer`]), rather than committed at once.
    #[serde(default)]
    pub buffer_writes: bool,
    /// Most objects in one component of buffered writes: a transaction that would grow one past it hands it over
    /// first.
    #[serde(default = "default_max_component_objects")]
    pub max_component_objects: usize,
    /// Transactions that leave the choice to the node ([`crate::coordinator::ReadFrom::Leader`]) bypass the cache
    /// while fewer than this share of its reads, in percent, are hits ([`Cache::bypassing`]); 0 never bypasses.
    #[serde(default = "default_bypass_below_percent")]
    pub bypass_below_percent: u8,
    /// Whether a state of an object held at another DC that transactions read here is fetched again in the
    /// background when a notice of a write closes its entry ([`Cache::take_stale`]), rather than by the next
    /// transaction that reads it.
    #[serde(default = "default_refresh")]
    pub refresh: bool,
}

/// How many leases notices of writes are kept: a state fetched from a holder is checked against those that came
/// between the end of its box (the holder's pvc, about a one-way delay back) and what this DC knows when it arrives
/// ([`Cache::insert`]); after that each notice closes the open entries it concerns as it arrives, and is not read
/// again. A box that ends further back is cached closed.
const NOTICE_LEASES: u64 = 4;

/// How many background fetches a hit on an entry buys before the next hit: two, because the state a background
/// fetch brings is often stale at once for a hot object (the holder had a later write than the snapshot asked
/// for, and cut the box below it), and the notice of that write should have it fetched again; without a read in
/// between, no more.
const REFRESH_CREDIT: u8 = 2;

fn default_refresh() -> bool {
    true
}

fn default_max_component_objects() -> usize {
    64
}

fn default_bypass_below_percent() -> u8 {
    20
}

/// How many leases the cache is bypassed for once a lease of reads through it had too few hits, before it is
/// tried again for a lease: at most one lease in `BYPASS_LEASES + 1` runs through a cache that does not pay.
const BYPASS_LEASES: u64 = 8;

/// A lease with fewer reads through the cache than this says nothing about its hits: no verdict.
const BYPASS_MIN_READS: u64 = 64;

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            lease_us: 1_000_000,
            memory_bytes: 64 << 20,
            buffer_writes: false,
            max_component_objects: default_max_component_objects(),
            bypass_below_percent: default_bypass_below_percent(),
            refresh: default_refresh(),
        }
    }
}

/// The snapshots a cached transaction may still read at: every `W` with `lo ≤ W ≤ hi` (componentwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    /// The least snapshot: at or above the client's clock.
    pub lo: VectorClock,
    /// The greatest: at or below what the DC has stable (remote entries) and the coordinator's clock.
    pub hi: VectorClock,
}

impl Window {
    /// A window; `None` if it holds no snapshot.
    pub fn new(lo: VectorClock, hi: VectorClock) -> Option<Window> {
        lo.le(&hi).then_some(Window { lo, hi })
    }

    /// The part of the window inside the box `[lo, hi]`, if any.
    pub fn meet(&self, lo: &VectorClock, hi: &VectorClock) -> Option<Window> {
        let mut low = self.lo.clone();
        low.merge_max(lo);
        let mut high = self.hi.clone();
        high.merge_min(hi);
        Window::new(low, high)
    }
}

/// Counters of the cache's work.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheStats {
    /// Reads served from the cache.
    pub hits: u64,
    /// Reads of objects not cached (or whose lease ended): fetched.
    pub misses: u64,
    /// Reads of cached objects whose box missed the transaction's window: fetched again.
    pub refetches: u64,
    /// Entries dropped because their lease ended.
    pub expired: u64,
    /// Entries dropped to stay within the memory bound.
    pub evicted: u64,
    /// Hits on states whose boxes are open (notices of writes may raise them, [`crate::away`]): fetched from another
    /// DC under partial replication, or any state when every object is held everywhere.
    pub open_hits: u64,
    /// Hits on states whose box notices raised at that read, having shown nobody wrote the object since it was
    /// fetched or last raised ([`crate::away`]).
    pub extended: u64,
    /// Transactions that read past the cache because it was being bypassed ([`Cache::bypassing`]).
    pub bypassed: u64,
    /// Times the cache's hits fell below `bypass_below_percent` over a lease, so that it was bypassed.
    pub bypasses: u64,
    /// Entries closed by a write that transactions had read, handed to the coordinator to fetch again in the
    /// background ([`Cache::take_stale`]).
    pub refreshes: u64,
    /// States fetched again in the background that were cached.
    pub refreshed: u64,
    /// Reads that missed (counted there) while a background fetch of their object was in flight, and waited for
    /// it instead of fetching the object themselves.
    pub joined: u64,
    /// Of those, the reads the background fetch's state served (the others fetched the object after all).
    pub joined_served: u64,
    /// Whether it is being bypassed now.
    pub bypassing: bool,
    /// Entries now.
    pub entries: usize,
    /// Bytes of cached states now.
    pub bytes: usize,
}

/// Why [`Cache::lookup`] found no state to serve.
enum Lookup {
    /// Not cached, or its lease ended.
    Missing,
    /// Its box misses the window.
    Disjoint,
}

#[derive(Clone, Debug)]
struct Entry {
    state: Crdt,
    lo: VectorClock,
    hi: VectorClock,
    /// Bit `k`: the state is exact in entry `k` up to what notices are known to (no notice of a write of origin
    /// `k` after `hi[k]` came): it is raised there when read.
    open: u64,
    /// The object's fingerprint, which notices of writes name it by.
    fingerprint: u32,
    /// `u64::MAX` while open.
    expires_us: u64,
    bytes: usize,
    /// Position in the recency order.
    used: u64,
    /// How many more times a write that makes it stale has it fetched again in the background
    /// ([`Cache::take_stale`]): [`REFRESH_CREDIT`] once a transaction read it, none when a transaction's fetch
    /// cached it, and what its predecessor had left when it comes from a background fetch.
    credit: u8,
    /// Handed to the coordinator to be fetched again ([`Cache::take_stale`]).
    refreshing: bool,
}

/// The cache of one coordinator.
#[derive(Debug)]
pub struct Cache {
    config: CacheConfig,
    entries: DetHashMap<ObjectId, Entry>,
    /// Recency order: the least recently used first.
    recency: BTreeMap<u64, ObjectId>,
    next_use: u64,
    bytes: usize,
    /// The DC's stable snapshot as heard over the last lease, oldest first, with when.
    samples: VecDeque<(u64, VectorClock)>,
    /// When expired entries are next swept out (reads refuse them at once; the sweep frees their memory).
    next_sweep_us: u64,
    /// The notices of writes, as its stabilizer told.
    known: Known,
    /// The entries by fingerprint, for the notices to find them.
    by_fingerprint: DetHashMap<u32, Vec<ObjectId>>,
    /// Entries closed by writes, to be fetched again ([`Cache::take_stale`]).
    stale: Vec<ObjectId>,
    /// The deliberate bug [`crate::Bug::CacheExtendsOverWrites`].
    pub extend_blindly: bool,
    gate: Gate,
    stats: CacheStats,
}

/// Whether the cache pays: a read through it that hits saves a fetch, but one that misses costs more than a plain
/// read (a visibility box at the owner, the entry kept). Over each lease the cache is used, the gate counts its
/// hits; a lease with fewer than `bypass_below_percent` makes transactions that leave the choice to the node
/// read past it for [`BYPASS_LEASES`], and then it is tried again for a lease (it fills anew: a workload whose keys
/// grew hot finds it useful again). Hits are the measure because they are what a lease of reads through the cache
/// buys; uniform reads over many keys, or keys written faster than they are read, bring few.
#[derive(Debug, Default)]
struct Gate {
    /// Bypassed before then, µs.
    until_us: u64,
    /// The lease being measured: since when, and the hits and reads counted then.
    measuring: Option<(u64, u64, u64)>,
}

impl Cache {
    /// An empty cache, for vectors of `dcs` entries.
    pub fn new(config: CacheConfig, dcs: usize) -> Self {
        Self {
            config,
            entries: DetHashMap::default(),
            recency: BTreeMap::new(),
            next_use: 0,
            bytes: 0,
            samples: VecDeque::new(),
            next_sweep_us: 0,
            known: Known::new(dcs),
            by_fingerprint: DetHashMap::default(),
            stale: Vec::new(),
            extend_blindly: false,
            gate: Gate::default(),
            stats: CacheStats::default(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    /// Whether a transaction that leaves the choice to the node should read past the cache now, because over the
    /// last lease it was used, too few of its reads were hits (counted as a bypassed transaction).
    pub fn bypassing(&mut self, now_us: u64) -> bool {
        let bypass = now_us < self.gate.until_us;
        self.stats.bypassed += u64::from(bypass);
        bypass
    }

    /// The gate's verdict at the end of each lease the cache is used ([`Gate`]).
    fn judge(&mut self, now_us: u64) {
        let below = u64::from(self.config.bypass_below_percent);
        if below == 0 || now_us < self.gate.until_us {
            return;
        }
        let (hits, reads) = (self.stats.hits, self.stats.hits + self.stats.misses + self.stats.refetches);
        match self.gate.measuring {
            Some((since, hits0, reads0)) if now_us.saturating_sub(since) >= self.config.lease_us => {
                let (lease_hits, lease_reads) = (hits - hits0, reads - reads0);
                if lease_reads >= BYPASS_MIN_READS && lease_hits * 100 < below * lease_reads {
                    self.gate.until_us = now_us.saturating_add(BYPASS_LEASES * self.config.lease_us);
                    self.gate.measuring = None;
                    self.stats.bypasses += 1;
                } else {
                    self.gate.measuring = Some((now_us, hits, reads));
                }
            }
            Some(_) => {}
            None => self.gate.measuring = Some((now_us, hits, reads)),
        }
    }

    /// The state of `id` if an unexpired entry's box meets `window`, which narrows to it; `None` counts a miss or
    /// a refetch, and the caller fetches the object at `window.hi`. `ignore_boxes` serves any unexpired entry and
    /// leaves the window as it is: only for the deliberate bug [`crate::Bug::CacheIgnoresBoxes`].
    pub fn read(&mut self, now_us: u64, id: &ObjectId, window: &mut Window, ignore_boxes: bool) -> Option<Crdt> {
        match self.lookup(now_us, id, window, ignore_boxes) {
            Ok(state) => {
                self.stats.hits += 1;
                Some(state)
            }
            Err(Lookup::Missing) => {
                self.stats.misses += 1;
                None
            }
            Err(Lookup::Disjoint) => {
                self.stats.refetches += 1;
                None
            }
        }
    }

    /// [`Cache::read`] for a read that missed and waited for the background fetch of `id` in flight
    /// ([`Cache::take_stale`]) instead of fetching the object itself, once that fetch is answered: the state if
    /// its box holds `at` (where the transaction's other reads were fetched) and meets `window`, which narrows to
    /// it. Counted as served by the background fetch, not as a second read.
    pub fn read_joined(&mut self, now_us: u64, id: &ObjectId, window: &mut Window, at: &VectorClock) -> Option<Crdt> {
        let mut narrowed = window.clone();
        let state = self.lookup(now_us, id, &mut narrowed, false).ok()?;
        if !(narrowed.lo.le(at) && at.le(&narrowed.hi)) {
            return None;
        }
        *window = narrowed;
        self.stats.joined_served += 1;
        Some(state)
    }

    /// Whether notices here tell of a write to `id` after `snapshot` in some entry (`snapshot` up to `at` there):
    /// a state fetched at `snapshot` is then closed below that write, and not exact at `at`.
    pub fn written_between(&self, id: &ObjectId, snapshot: &VectorClock, at: &VectorClock) -> bool {
        let fingerprint = id.fingerprint();
        (0..snapshot.len().min(at.len()) as u16).map(DcId).any(|dc| {
            let from = snapshot.get(dc);
            from < at.get(dc) && self.known.exact_until(dc, fingerprint, from, self.extend_blindly) < at.get(dc)
        })
    }

    /// Counts a read that missed and waits for the background fetch of its object in flight.
    pub fn count_joined(&mut self) {
        self.stats.joined += 1;
    }

    fn lookup(&mut self, now_us: u64, id: &ObjectId, window: &mut Window, ignore_boxes: bool) -> Result<Crdt, Lookup> {
        let Some(entry) = self.entries.get_mut(id) else {
            return Err(Lookup::Missing);
        };
        if now_us >= entry.expires_us {
            self.remove(id);
            self.stats.expired += 1;
            return Err(Lookup::Missing);
        }
        if !ignore_boxes {
            // An open entry is exact up to what notices are known to (the invariant): raise it first (for good:
            // that is a fact about the state), so that it meets the window if it can and narrows it no more than it
            // must (a later read of the transaction meets a higher top).
            let mut raised = false;
            if let Some(to) = self.known.to() {
                for dc in open_dcs(entry.open, entry.hi.len()) {
                    if to.get(dc) > entry.hi.get(dc) {
                        entry.hi.set(dc, to.get(dc));
                        raised = true;
                    }
                }
            }
            let narrowed = window.meet(&entry.lo, &entry.hi);
            if raised && narrowed.is_some() {
                self.stats.extended += 1;
            }
            let Some(narrowed) = narrowed else {
                return Err(Lookup::Disjoint);
            };
            *window = narrowed;
        }
        let state = entry.state.clone();
        entry.credit = REFRESH_CREDIT;
        self.stats.open_hits += u64::from(entry.open != 0);
        self.touch(id);
        Ok(state)
    }

    /// Caches a state fetched at `now_us` (replacing any older entry) and makes room for it.
    pub fn insert(&mut self, now_us: u64, id: ObjectId, fetched: Fetched) {
        self.insert_with(now_us, id, fetched, 0);
    }

    /// [`Cache::insert`], for an entry that may be fetched again `credit` times without being read.
    fn insert_with(&mut self, now_us: u64, id: ObjectId, fetched: Fetched, credit: u8) {
        self.remove(&id);
        let bytes = fetched.state.encode().len() + id.key.len() + 16 * fetched.lo.len();
        if bytes > self.config.memory_bytes {
            return;
        }
        let used = self.next_use;
        self.next_use += 1;
        let Fetched { state, lo, mut hi, mut open } = fetched;
        let fingerprint = id.fingerprint();
        // Notices already here of writes after the box's end: the entry stays open only where none came and what
        // came is still known (the invariant), raised to where notices are known.
        let mut stale = false;
        if let Some(to) = self.known.to() {
            for dc in open_dcs(open, hi.len()) {
                if hi.get(dc) >= to.get(dc) {
                    continue;
                }
                let exact = self.known.exact_until(dc, fingerprint, hi.get(dc), self.extend_blindly);
                if exact >= to.get(dc) {
                    hi.set(dc, exact);
                } else {
                    open &= !bit(dc);
                    stale = true;
                }
            }
        }
        let expires_us = if open != 0 { u64::MAX } else { now_us.saturating_add(self.config.lease_us) };
        self.by_fingerprint.entry(fingerprint).or_default().push(id.clone());
        let entry = Entry { state, lo, hi, open, fingerprint, expires_us, bytes, used, credit, refreshing: false };
        self.recency.insert(used, id.clone());
        self.entries.insert(id.clone(), entry);
        if stale {
            // Written since the snapshot it was fetched at, as the notices here already tell.
            self.queue_refresh(&id);
        }
        self.bytes += bytes;
        while self.bytes > self.config.memory_bytes {
            let Some((_, victim)) = self.recency.pop_first() else { break };
            self.remove(&victim);
            self.stats.evicted += 1;
        }
    }

    /// The DC's stable snapshot, heard at `now_us` (every stable interval, about a millisecond); drops entries
    /// whose lease ended, sweeping at most four times a lease rather than at every call.
    pub fn observe_stable(&mut self, now_us: u64, stable: &VectorClock) {
        if self.samples.back().is_none_or(|(_, s)| s != stable) {
            self.samples.push_back((now_us, stable.clone()));
        }
        self.judge(now_us);
        // Keep the newest sample at least a lease old, and every one after it.
        let cutoff = now_us.saturating_sub(self.config.lease_us);
        while self.samples.len() > 1 && self.samples[1].0 <= cutoff {
            self.samples.pop_front();
        }
        if now_us < self.next_sweep_us {
            return;
        }
        self.next_sweep_us = now_us.saturating_add((self.config.lease_us / 4).max(1));
        let expired: Vec<ObjectId> =
            self.entries.iter().filter(|(_, e)| now_us >= e.expires_us).map(|(id, _)| id.clone()).collect();
        for id in expired {
            self.remove(&id);
            self.stats.expired += 1;
        }
    }

    /// Notices of writes (to objects held elsewhere, or every write), in the stretch up to the stable snapshot `stable`
    /// ([`crate::away`]), heard at `now_us`: each closes the open entries of its object that end below it, and
    /// a stretch no chunk told of (one went missing, or the first) closes those that end below its start.
    pub fn learn_away(&mut self, now_us: u64, chunk: away::Chunk, stable: &VectorClock) {
        let n = chunk.from.len();
        if n != stable.len() || n != self.known.floor().len() {
            return;
        }
        let before = self.known.to().cloned();
        let gap: Vec<DcId> = (0..n as u16)
            .map(DcId)
            .filter(|&dc| before.as_ref().is_none_or(|b| chunk.from.get(dc) > b.get(dc)))
            .collect();
        if !gap.is_empty() && !self.extend_blindly {
            let ids: Vec<ObjectId> =
                (self.entries.iter()).filter(|(_, e)| e.open != 0).map(|(id, _)| id.clone()).collect();
            for id in ids {
                for &dc in &gap {
                    let Some(e) = self.entries.get(&id).filter(|e| e.open & bit(dc) != 0) else { continue };
                    let valid = before.as_ref().map_or(e.hi.get(dc), |b| b.get(dc).max(e.hi.get(dc)));
                    if valid < chunk.from.get(dc) {
                        self.close(now_us, &id, dc, valid);
                        self.queue_refresh(&id);
                    }
                }
            }
        }
        if !self.extend_blindly {
            for &(origin, fingerprint, at) in &chunk.notices {
                let Some(ids) = self.by_fingerprint.get(&fingerprint) else { continue };
                for id in ids.clone() {
                    let Some(e) = self.entries.get(&id) else { continue };
                    if at <= e.hi.get(origin) {
                        continue;
                    }
                    if e.open & bit(origin) != 0 {
                        // Exact up to where notices were known, and below the write.
                        let valid = before.as_ref().map_or(e.hi.get(origin), |b| {
                            b.get(origin).min(Timestamp(at.0.saturating_sub(1))).max(e.hi.get(origin))
                        });
                        self.close(now_us, &id, origin, valid);
                    }
                    self.queue_refresh(&id);
                }
            }
        }
        self.known.learn(chunk, stable);
        let keep = NOTICE_LEASES * self.config.lease_us;
        let ago = |t: &Timestamp, by: u64| Timestamp::from_micros(t.micros().saturating_sub(by));
        let due = (self.known.floor().entries().iter().zip(stable.entries()))
            .any(|(floor, now)| *floor < ago(now, keep + self.config.lease_us));
        if due {
            let cutoff = VectorClock::from_entries(stable.entries().iter().map(|t| ago(t, keep)).collect());
            self.known.forget(&cutoff);
        }
    }

    /// Closes entry `dc` of `id`'s box at `valid` (where it stays exact): a write of that origin came after. An
    /// entry closed everywhere lives one more lease (it may still meet older windows).
    fn close(&mut self, now_us: u64, id: &ObjectId, dc: DcId, valid: Timestamp) {
        let Some(e) = self.entries.get_mut(id) else { return };
        if valid > e.hi.get(dc) {
            e.hi.set(dc, valid);
        }
        e.open &= !bit(dc);
        if e.open == 0 {
            e.expires_us = e.expires_us.min(now_us.saturating_add(self.config.lease_us));
        }
    }

    /// Hands `id`, which a write made stale, to the coordinator to fetch again, if it has credit left and is not
    /// being fetched already.
    fn queue_refresh(&mut self, id: &ObjectId) {
        let Some(e) = self.entries.get_mut(id) else { return };
        if self.config.refresh && e.credit > 0 && !e.refreshing {
            e.credit -= 1;
            e.refreshing = true;
            self.stale.push(id.clone());
        }
    }

    /// The objects whose entries writes closed since the last call and that transactions had read: the
    /// coordinator fetches them again ([`Cache::refreshed`]).
    pub fn take_stale(&mut self) -> Vec<ObjectId> {
        let entries = &self.entries;
        let mut stale = std::mem::take(&mut self.stale);
        stale.retain(|id| entries.get(id).is_some_and(|e| e.refreshing));
        self.stats.refreshes += stale.len() as u64;
        stale
    }

    /// A state fetched again in the background ([`Cache::take_stale`]), or `None` if that failed. It replaces the
    /// entry it was asked for (or none, if that one was dropped meanwhile), not one a transaction's fetch cached
    /// since.
    pub fn refreshed(&mut self, now_us: u64, id: ObjectId, fetched: Option<Fetched>) {
        let (replaced, credit) = self.entries.get(&id).map_or((false, 0), |e| (!e.refreshing, e.credit));
        match fetched {
            Some(f) if !replaced => {
                self.insert_with(now_us, id, f, credit);
                self.stats.refreshed += 1;
            }
            _ => {
                if let Some(e) = self.entries.get_mut(&id) {
                    e.refreshing = false;
                }
            }
        }
    }

    /// The cache floor: the stable snapshot of about one lease ago (the oldest heard, early on). A cached
    /// transaction's window starts at or above it, so it never fetches below it, and the coordinator holds garbage
    /// collection there.
    pub fn floor(&self) -> Option<&VectorClock> {
        self.samples.front().map(|(_, s)| s)
    }

    /// Counters, with the current size.
    pub fn stats(&self) -> CacheStats {
        let bypassing = self.stats.bypasses > 0 && self.gate.measuring.is_none();
        CacheStats { entries: self.entries.len(), bytes: self.bytes, bypassing, ..self.stats.clone() }
    }

    fn touch(&mut self, id: &ObjectId) {
        let used = self.next_use;
        self.next_use += 1;
        if let Some(entry) = self.entries.get_mut(id) {
            self.recency.remove(&entry.used);
            entry.used = used;
            self.recency.insert(used, id.clone());
        }
    }

    fn remove(&mut self, id: &ObjectId) {
        if let Some(entry) = self.entries.remove(id) {
            self.recency.remove(&entry.used);
            self.bytes -= entry.bytes;
            self.unindex(entry.fingerprint, id);
        }
    }

    fn unindex(&mut self, fingerprint: u32, id: &ObjectId) {
        if let Some(ids) = self.by_fingerprint.get_mut(&fingerprint) {
            ids.retain(|i| i != id);
            if ids.is_empty() {
                self.by_fingerprint.remove(&fingerprint);
            }
        }
    }
}

/// DC `dc`'s bit in a box's `open` (none past the 64th DC: such entries are never open).
fn bit(dc: DcId) -> u64 {
    1u64.checked_shl(u32::from(dc.0)).unwrap_or(0)
}

/// The DCs of the open entries `open` of a vector of `len` entries.
fn open_dcs(open: u64, len: usize) -> impl Iterator<Item = DcId> {
    (0..len.min(64) as u16).map(DcId).filter(move |&dc| open & bit(dc) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Timestamp;
    use causet_crdt::CrdtType;

    fn v(entries: &[u64]) -> VectorClock {
        VectorClock::from_entries(entries.iter().map(|&t| Timestamp(t)).collect())
    }

    fn counter(n: i64) -> Crdt {
        let mut c = Crdt::new(CrdtType::CounterPn);
        let mut ctx = causet_crdt::EffectCtx::new(causet_crdt::TxTag(1), 0);
        let effect = c.generate(&causet_crdt::Op::Increment(n), &mut ctx).unwrap();
        c.apply(&effect, causet_crdt::Stamp::PENDING).unwrap();
        c
    }

    fn id(key: &str) -> ObjectId {
        ObjectId::new(key, "b", CrdtType::CounterPn)
    }

    fn fetched(n: i64, lo: &[u64], hi: &[u64]) -> Fetched {
        Fetched { state: counter(n), lo: v(lo), hi: v(hi), open: 0 }
    }

    #[test]
    fn a_hit_narrows_the_window_to_the_box_and_a_disjoint_box_is_refetched() {
        let mut cache = Cache::new(CacheConfig::default(), 2);
        cache.insert(0, id("a"), fetched(1, &[10, 5], &[40, 30]));
        cache.insert(0, id("b"), fetched(2, &[50, 5], &[90, 30]));
        let mut window = Window::new(v(&[0, 0]), v(&[100, 20])).unwrap();
        assert_eq!(cache.read(1, &id("a"), &mut window, false), Some(counter(1)));
        assert_eq!(window, Window { lo: v(&[10, 5]), hi: v(&[40, 20]) });
        // b's box starts above a's end: the two cannot be read together.
        assert_eq!(cache.read(1, &id("b"), &mut window, false), None);
        assert_eq!(window, Window { lo: v(&[10, 5]), hi: v(&[40, 20]) }, "a refused read leaves the window");
        assert_eq!(cache.read(1, &id("c"), &mut window, false), None);
        let s = cache.stats();
        assert_eq!((s.hits, s.refetches, s.misses, s.entries), (1, 1, 1, 2));
    }

    #[test]
    fn an_open_box_is_raised_in_each_entry_whose_dc_did_not_write_the_object_since() {
        let t = Timestamp;
        // DC 0's coordinator caches states fetched from a holder at another DC, which had applied DC 0's writes up
        // to 5 and DC 1's up to 7: a and b open in both entries, c in none, d only in entry 1.
        let mut cache = Cache::new(CacheConfig::default(), 2);
        let open = |mask: u64| Fetched { open: mask, ..fetched(1, &[2, 3], &[5, 7]) };
        for (key, mask) in [("a", 0b11), ("b", 0b11), ("c", 0), ("d", 0b10)] {
            cache.insert(0, id(key), open(mask));
        }
        let window = || Window::new(v(&[8, 10]), v(&[50, 20])).unwrap();
        assert_eq!(cache.read(1, &id("a"), &mut window(), false), None, "nothing is known of the writes yet");
        // DC 0 wrote b at 7, and nobody wrote anything else up to (12, 15) (the first chunk says nothing below 4).
        let notices = vec![(DcId(0), id("b").fingerprint(), t(7))];
        cache.learn_away(1, away::Chunk { from: v(&[4, 4]), notices }, &v(&[12, 15]));
        let mut w = window();
        assert!(cache.read(1, &id("a"), &mut w, false).is_some());
        assert_eq!(w, Window { lo: v(&[8, 10]), hi: v(&[12, 15]) }, "exact up to what the notices cover");
        assert_eq!(cache.read(1, &id("b"), &mut window(), false), None, "DC 0 wrote b at 7, after its box");
        assert_eq!(cache.read(1, &id("c"), &mut window(), false), None, "c's box is closed");
        assert_eq!(cache.read(1, &id("d"), &mut window(), false), None, "d's box is closed in entry 0");
        let s = cache.stats();
        assert_eq!((s.hits, s.open_hits, s.extended, s.refetches), (1, 1, 1, 4));
    }

    #[test]
    fn an_open_entry_lives_until_a_notice_closes_it_and_one_that_was_read_is_handed_over_to_fetch_again() {
        let t = Timestamp;
        let lease = 1_000;
        let mut cache = Cache::new(CacheConfig { lease_us: lease, ..Default::default() }, 2);
        let open = |n| Fetched { open: 0b11, ..fetched(n, &[2, 3], &[5, 7]) };
        cache.learn_away(0, away::Chunk { from: v(&[4, 4]), notices: vec![] }, &v(&[5, 7]));
        cache.insert(0, id("a"), open(1));
        cache.insert(0, id("b"), open(2));
        cache.insert(0, id("c"), open(3));
        // Much later, nobody wrote a or c: exact up to the notices' end, whenever they are read.
        let stable = v(&[100_000, 100_000]);
        cache.learn_away(50 * lease, away::Chunk { from: v(&[5, 7]), notices: vec![] }, &stable);
        let window = || Window::new(v(&[90_000, 90_000]), v(&[100_000, 100_000])).unwrap();
        assert!(cache.read(50 * lease, &id("a"), &mut window(), false).is_some(), "no lease ends an open entry");
        assert!(cache.read(50 * lease, &id("b"), &mut window(), false).is_some());
        assert!(cache.take_stale().is_empty(), "nothing written");
        // DC 1 writes a, both write b, DC 0 writes c; a and b were read, c was not.
        let notices = vec![
            (DcId(1), id("a").fingerprint(), t(100_010)),
            (DcId(1), id("b").fingerprint(), t(100_010)),
            (DcId(0), id("b").fingerprint(), t(100_030)),
            (DcId(0), id("c").fingerprint(), t(100_020)),
        ];
        cache.learn_away(51 * lease, away::Chunk { from: stable.clone(), notices }, &v(&[100_050, 100_050]));
        assert_eq!(cache.take_stale().len(), 2, "a and b, which transactions read");
        assert!(cache.take_stale().is_empty(), "handed over once");
        let mut w = Window::new(v(&[90_000, 90_000]), v(&[100_050, 100_050])).unwrap();
        assert!(cache.read(51 * lease, &id("a"), &mut w, false).is_some(), "still exact below the write");
        assert_eq!(w.hi, v(&[100_050, 100_000]), "closed in entry 1 where notices were known before the write");
        let above = || Window::new(v(&[100_030, 100_010]), v(&[100_050, 100_050])).unwrap();
        assert_eq!(cache.read(51 * lease, &id("c"), &mut above(), false), None, "c's entry 0 ended at 100,000");
        // The background fetch of a comes back at the stable snapshot, open again; b's failed.
        cache.refreshed(
            51 * lease,
            id("a"),
            Some(Fetched { open: 0b11, ..fetched(4, &[100_010, 100_010], &[100_050, 100_050]) }),
        );
        cache.refreshed(51 * lease, id("b"), None);
        assert_eq!(cache.read(51 * lease, &id("a"), &mut above(), false), Some(counter(4)));
        assert_eq!(cache.read(51 * lease, &id("b"), &mut above(), false), None, "b stays stale");
        // A closed entry lives one more lease.
        assert_eq!(cache.read(52 * lease, &id("b"), &mut window(), false), None, "b's closed entry expired");
        let s = cache.stats();
        assert_eq!((s.refreshes, s.refreshed, s.expired), (2, 1, 1));
    }

    #[test]
    fn a_hit_buys_two_background_fetches_so_a_state_that_comes_back_stale_is_fetched_once_more() {
        let t = Timestamp;
        let mut cache = Cache::new(CacheConfig::default(), 2);
        cache.learn_away(0, away::Chunk { from: v(&[0, 0]), notices: vec![] }, &v(&[10, 10]));
        cache.insert(0, id("x"), Fetched { open: 0b11, ..fetched(1, &[2, 2], &[10, 10]) });
        assert!(cache.read(1, &id("x"), &mut Window::new(v(&[5, 5]), v(&[10, 10])).unwrap(), false).is_some());
        let write = |cache: &mut Cache, at: u64, to: u64| {
            let notices = vec![(DcId(1), id("x").fingerprint(), t(at))];
            cache.learn_away(at, away::Chunk { from: v(&[to - 10, to - 10]), notices }, &v(&[to, to]));
        };
        write(&mut cache, 15, 20);
        assert_eq!(cache.take_stale(), vec![id("x")]);
        // The holder had a later write (at 25) than the snapshot asked for, and cut entry 1 below it.
        cache.refreshed(20, id("x"), Some(Fetched { open: 0b01, ..fetched(2, &[15, 15], &[20, 24]) }));
        write(&mut cache, 25, 30);
        assert_eq!(cache.take_stale(), vec![id("x")], "its notice has it fetched once more");
        cache.refreshed(30, id("x"), Some(Fetched { open: 0b11, ..fetched(3, &[25, 25], &[30, 30]) }));
        write(&mut cache, 35, 40);
        assert!(cache.take_stale().is_empty(), "no read since: no more");
        assert!(cache.read(41, &id("x"), &mut Window::new(v(&[26, 26]), v(&[30, 34])).unwrap(), false).is_some());
        write(&mut cache, 45, 50);
        assert_eq!(cache.take_stale(), vec![id("x")], "a read buys more");
        assert_eq!((cache.stats().refreshes, cache.stats().refreshed), (3, 2));
    }

    #[test]
    fn a_state_is_cached_closed_where_notices_already_here_tell_of_a_later_write_or_a_stretch_is_unknown() {
        let t = Timestamp;
        let mut cache = Cache::new(CacheConfig::default(), 2);
        // Notices known over (4, 4] to (20, 20]: DC 0 wrote x at 12.
        let notices = vec![(DcId(0), id("x").fingerprint(), t(12))];
        cache.learn_away(0, away::Chunk { from: v(&[4, 4]), notices }, &v(&[20, 20]));
        // States fetched from a holder whose pvc was (10, 10): x's entry 0 closes at once, y's stay open.
        cache.insert(1, id("x"), Fetched { open: 0b11, ..fetched(1, &[2, 2], &[10, 10]) });
        cache.insert(1, id("y"), Fetched { open: 0b11, ..fetched(1, &[2, 2], &[10, 10]) });
        let window = || Window::new(v(&[15, 15]), v(&[20, 20])).unwrap();
        assert_eq!(cache.read(2, &id("x"), &mut window(), false), None, "written at 12, after its box");
        assert!(cache.read(2, &id("y"), &mut window(), false).is_some());
        // A chunk went missing: y is exact up to (20, 20) and nothing is known of (20, 30].
        cache.learn_away(3, away::Chunk { from: v(&[30, 30]), notices: vec![] }, &v(&[40, 40]));
        let later = Window::new(v(&[25, 25]), v(&[40, 40])).unwrap();
        assert_eq!(cache.read(3, &id("y"), &mut later.clone(), false), None, "closed below the gap");
        let mut below = Window::new(v(&[15, 15]), v(&[40, 40])).unwrap();
        assert!(cache.read(3, &id("y"), &mut below, false).is_some());
        assert_eq!(below.hi, v(&[20, 20]), "exact up to where notices were known before the gap");
        assert_eq!(cache.take_stale(), vec![id("y")], "y was read before the gap closed it");
    }

    #[test]
    fn entries_end_with_their_lease_and_the_least_recently_used_go_first() {
        let config =
            CacheConfig { lease_us: 100, memory_bytes: 3 * (counter(1).encode().len() + 1 + 32), ..Default::default() };
        let mut cache = Cache::new(config, 2);
        for (t, key) in ["a", "b", "c"].iter().enumerate() {
            cache.insert(t as u64, id(key), fetched(1, &[0, 0], &[9, 9]));
        }
        let mut window = Window::new(v(&[0, 0]), v(&[5, 5])).unwrap();
        assert!(cache.read(10, &id("a"), &mut window, false).is_some(), "a is now the most recently used");
        cache.insert(11, id("d"), fetched(1, &[0, 0], &[9, 9]));
        assert_eq!(cache.stats().evicted, 1);
        assert!(cache.read(12, &id("b"), &mut window, false).is_none(), "b was the least recently used");
        assert!(cache.read(12, &id("a"), &mut window, false).is_some());
        assert!(cache.read(100, &id("a"), &mut window, false).is_none(), "a's lease ended at 100");
        cache.observe_stable(200, &v(&[1, 1]));
        assert_eq!(cache.stats().entries, 0, "every lease ended");
        assert!(cache.stats().bytes == 0);
    }

    #[test]
    fn the_floor_is_the_stable_snapshot_of_one_lease_ago() {
        let mut cache = Cache::new(CacheConfig { lease_us: 100, memory_bytes: 1 << 20, ..Default::default() }, 2);
        assert_eq!(cache.floor(), None);
        cache.observe_stable(0, &v(&[1, 1]));
        cache.observe_stable(50, &v(&[2, 2]));
        assert_eq!(cache.floor(), Some(&v(&[1, 1])), "early on: the oldest heard");
        cache.observe_stable(120, &v(&[3, 3]));
        assert_eq!(cache.floor(), Some(&v(&[1, 1])), "the sample at 0 is the newest one at least 100 old at 120");
        cache.observe_stable(160, &v(&[4, 4]));
        assert_eq!(cache.floor(), Some(&v(&[2, 2])));
    }

    #[test]
    fn a_lease_with_too_few_hits_bypasses_the_cache_for_eight_leases_then_it_is_tried_again() {
        let lease = 1_000;
        let mut cache = Cache::new(CacheConfig { lease_us: lease, ..Default::default() }, 2);
        // One lease of reads, `hits` of every 10 of them served, then the gate's verdict at its end.
        let lease_of = |cache: &mut Cache, start: u64, hits: u64| {
            cache.insert(start, id("hot"), fetched(1, &[0, 0], &[9, 9]));
            cache.observe_stable(start, &v(&[1, 1]));
            for i in 0..100 {
                let key = if i % 10 < hits { "hot".to_string() } else { format!("cold{start}-{i}") };
                cache.read(start + 1, &id(&key), &mut Window::new(v(&[0, 0]), v(&[5, 5])).unwrap(), false);
            }
            cache.observe_stable(start + lease, &v(&[1, 1]));
        };
        lease_of(&mut cache, 0, 3);
        assert!(!cache.bypassing(lease), "30% hits pay (the default is 20%)");
        lease_of(&mut cache, lease, 1);
        assert_eq!(cache.stats().bypasses, 1, "10% do not");
        assert!(cache.bypassing(2 * lease) && cache.bypassing(10 * lease - 1));
        assert!(cache.stats().bypassing);
        assert!(!cache.bypassing(10 * lease), "after eight leases it is tried again");
        cache.observe_stable(10 * lease, &v(&[1, 1]));
        assert!(!cache.stats().bypassing);
        lease_of(&mut cache, 10 * lease + 1, 5);
        assert!(!cache.bypassing(11 * lease + 2), "a lease of 50% hits keeps it");
        assert_eq!(cache.stats().bypassed, 2, "the transactions told to bypass it");

        // Too few reads for a verdict, and a gate that never bypasses.
        let mut quiet = Cache::new(CacheConfig { lease_us: lease, ..Default::default() }, 2);
        quiet.observe_stable(0, &v(&[1, 1]));
        quiet.read(1, &id("x"), &mut Window::new(v(&[0, 0]), v(&[5, 5])).unwrap(), false);
        quiet.observe_stable(lease, &v(&[1, 1]));
        assert!(!quiet.bypassing(lease + 1), "one read in a lease: no verdict");
        let mut never = Cache::new(CacheConfig { lease_us: lease, bypass_below_percent: 0, ..Default::default() }, 2);
        lease_of(&mut never, 0, 0);
        assert!(!never.bypassing(lease + 1));
    }
}
