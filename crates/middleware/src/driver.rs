//! The middleware over a real store: [`Middleware`] runs the sans-I/O operations of [`crate::op`] against a
//! [`Store`], reading the copies each step asks for in parallel, and waits (up to a deadline) for a read whose
//! dependencies have not arrived yet.

use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::try_join_all;
use futures_util::StreamExt;

use crate::op::{
    Input, Marks, OwnWrites, Protocol, ReadOp, ReadOutcome, Session, StabilizeInput, StabilizeOp, StabilizeStep, Step,
    WriteCache, WriteOp,
};
pub use crate::record::Part;
use crate::record::{Copy, DecodeError, Encoded, LocalSet, Meta, Record, RecordPart, Vertex};

/// An eventually consistent store with per-copy compare-and-swap, as seen from one local set.
///
/// `get` reads the local set's own cluster (Cassandra: `LOCAL_ONE`); `cas` is linearizable among the local set's
/// middleware instances (Cassandra: a `LOCAL_SERIAL` lightweight transaction) and needs nothing from other local
/// sets. The store replicates every copy to every local set, last writer wins.
///
/// With [`Writers::Exclusive`], writes use `get_copies_to_write` and `put` instead of `cas`, and `lease` fences
/// the local set's one writer.
pub trait Store: Send + Sync {
    /// One part of the copy's stored record, if any. The two parts of a record are written together
    /// ([`Store::cas`], [`Store::put`]); a read of one part must return the part of some record the copy held.
    fn get(&self, copy: &Copy, part: Part) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send;

    /// One part of every copy of `key` (local sets `0..local_sets`, in order). Stores that keep a key's copies
    /// together answer with one read; the default reads them one by one, in parallel.
    fn get_copies(
        &self,
        key: &[u8],
        local_sets: usize,
        part: Part,
    ) -> impl Future<Output = Result<Vec<Option<Vec<u8>>>, StoreError>> + Send {
        async move {
            let copies: Vec<Copy> = (0..local_sets as LocalSet).map(|ls| Copy { key: key.to_vec(), ls }).collect();
            try_join_all(copies.iter().map(|c| self.get(c, part))).await
        }
    }

    /// Stores `record` (version `seq` of the copy, both parts at once) if the stored version is `expect` (`None`:
    /// nothing stored yet). Returns whether it applied.
    fn cas(
        &self,
        copy: &Copy,
        expect: Option<u64>,
        seq: u64,
        record: Encoded,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Exclusive writers: the [`Part::Meta`] of every copy of `key`, with this local set's own copy as of the
    /// latest [`Store::put`] acknowledged to this instance (stores whose reads may miss an acknowledged write of
    /// the same DC read more replicas here). The default is [`Store::get_copies`].
    fn get_copies_to_write(
        &self,
        key: &[u8],
        local_sets: usize,
    ) -> impl Future<Output = Result<Vec<Option<Vec<u8>>>, StoreError>> + Send {
        self.get_copies(key, local_sets, Part::Meta)
    }

    /// Exclusive writers: stores `record` (both parts at once) as version `seq` of the copy, unconditionally.
    /// Wherever the copy replicates, a later version must win over an earlier one, whatever the order of arrival.
    fn put(&self, copy: &Copy, seq: u64, record: Encoded) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Whether [`Store::stabilize`] can ever confirm; when not, the instance does not try (and the folded
    /// dependency sets are not bounded).
    const CONFIRMS_STABILITY: bool = false;

    /// Whether every local set's store holds version `seq` of the copy, or a later one — making it so if the store
    /// can (Cassandra: a read at consistency `ALL`, whose blocking read repair updates stale replicas before it
    /// answers). `false` when it cannot tell or cannot reach every local set; the default (a store that cannot
    /// tell) leaves the folded dependency sets unbounded.
    fn stabilize(&self, copy: &Copy, seq: u64) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (copy, seq);
        async { Ok(false) }
    }

    /// Whether [`Store::pull`] can ever bring a version here; when not, a waiting read only polls.
    const PULLS: bool = false;

    /// Brings version `seq` of the copy, or a later one, into this local set's store from another local set's,
    /// if the store can (Cassandra: the read at `ALL` of [`Store::stabilize`], whose blocking read repair writes
    /// the newest version into the stale replicas before it answers); returns whether this local set holds it
    /// now. A read whose dependency is late asks for it this way instead of waiting for the store's own
    /// replication. `false` when the store cannot, or cannot reach another local set.
    fn pull(&self, copy: &Copy, seq: u64) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let _ = (copy, seq);
        async { Ok(false) }
    }

    /// Exclusive writers: takes, or renews, local set `ls`'s writer lease for `owner`, for `term` from now. The
    /// store must make it expire on its own after `term` (measured by the store), so that a holder that stops
    /// renewing loses it. A zero `term` gives the lease up if `owner` holds it (answering [`Lease::Held`] either
    /// way).
    fn lease(
        &self,
        ls: LocalSet,
        owner: &str,
        term: Duration,
    ) -> impl Future<Output = Result<Lease, StoreError>> + Send;
}

/// The store's answer to a lease request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lease {
    /// The caller holds the lease for the term asked.
    Held,
    /// Another instance holds it.
    HeldBy(String),
    /// The store cannot fence writers (it has no compare-and-swap): the caller must be the only instance of its
    /// local set by deployment.
    Unfenced,
}

/// How the writers of one local set exclude each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writers {
    /// Any number of instances per local set; every write is a compare-and-swap on the copy in the store (the
    /// paper's design; on Cassandra a lightweight transaction, Paxos, per write).
    Shared,
    /// One instance per local set: it holds the local set's writer lease in the store (taken and renewed with
    /// compare-and-swap, expiring on its own), orders the writes of a key with a lock inside the process, and
    /// stores them with plain writes. A second instance of the local set is refused while the lease is held.
    Exclusive,
}

/// A store adapter's failure, described for the operator.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key's latest version still depends on a version that has not reached this local set.
    #[error(
        "the latest version of the key ({version}) depends on {missing}, which has not reached local set {local_set} \
         after waiting {waited:?} (resolve_wait); the store's replication is behind or cut"
    )]
    Unresolved {
        /// The version that could not be returned.
        version: Vertex,
        /// A dependency not present locally.
        missing: Vertex,
        /// This local set.
        local_set: LocalSet,
        /// How long the read waited.
        waited: Duration,
    },
    /// Resolving the key's latest version (a large dependency graph, read level by level) did not finish within
    /// `resolve_wait`.
    #[error(
        "resolving the latest version of the key ({version}) did not finish within resolve_wait: {read} records \
         read in {waited:?} and more of its dependency graph left to check"
    )]
    Unfinished {
        /// The version being resolved.
        version: Vertex,
        /// Records (heads and metas) the last attempt read.
        read: u32,
        /// How long the read took.
        waited: Duration,
    },
    /// Exclusive writers: this instance does not hold its local set's writer lease, so it refuses to write.
    #[error(
        "this instance does not hold local set {local_set}'s writer lease{}, so it refuses writes: two instances \
         writing one local set's copies without compare-and-swap would lose writes",
        holder.as_ref().map(|h| format!(" (held by {h})")).unwrap_or_default()
    )]
    NoLease {
        /// This local set.
        local_set: LocalSet,
        /// Who holds the lease, if known.
        holder: Option<String>,
    },
    /// The store failed.
    #[error("store: {0}")]
    Store(#[from] StoreError),
    /// The store returned something the middleware cannot read.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// The middleware's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// This instance's local set (0-based; every instance of a deployment must number local sets alike).
    pub local_set: LocalSet,
    /// How many local sets the deployment has.
    pub local_sets: usize,
    /// Embedded dependency-graph levels, `k` (1 = the paper's base protocol; 2 is the paper's best for
    /// write-heavy mixes).
    pub levels: u8,
    /// Versions whose dependency information a record keeps before folding the oldest into one compacted set.
    pub retain: usize,
    /// Copies whose resolved version an instance remembers (when full, it forgets all and re-resolves).
    pub mark_capacity: usize,
    /// How long a read may take to resolve, waiting for missing dependencies included, before it fails; zero fails
    /// at once when a dependency is missing (the paper's behaviour) and puts no bound on the reading of a graph
    /// that is all present.
    pub resolve_wait: Duration,
    /// How long a read waits for a missing dependency to arrive by the store's own replication before it pulls
    /// it from another local set ([`Store::pull`]; stores that can); `None`: never, only wait (the paper's
    /// behaviour).
    pub pull_after: Option<Duration>,
    /// How the local set's writers exclude each other.
    pub writers: Writers,
    /// Exclusive writers: the writer lease's term. The holder renews it every quarter term and stops writing when
    /// less than a third of the term is left, so a write in flight has a third of the term to land.
    pub lease_term: Duration,
    /// When a record's folded dependency set exceeds this many vertices, the instance makes them stable in the
    /// background ([`Middleware::keep_stabilizing`]), and later writes of the key leave them out.
    pub folded_cap: usize,
    /// How long after the store acknowledged one of its writes the instance asks the store to confirm it in every
    /// local set ([`Middleware::keep_confirming`]): long enough for the store's own replication to have delivered
    /// it (the confirmation then repairs nothing), short enough that records soon leave it out.
    pub confirm_after: Duration,
}

impl Config {
    /// The defaults for local set `local_set` of `local_sets`: `k = 1`, 8 versions retained, 100,000 marks,
    /// reads wait up to 2 s for missing dependencies, and shared writers (compare-and-swap per write; a 12 s
    /// lease term if switched to exclusive writers).
    pub fn new(local_set: LocalSet, local_sets: usize) -> Config {
        Config {
            local_set,
            local_sets,
            levels: 1,
            retain: 8,
            mark_capacity: 100_000,
            resolve_wait: Duration::from_secs(2),
            pull_after: Some(Duration::from_millis(100)),
            writers: Writers::Shared,
            lease_term: Duration::from_secs(12),
            folded_cap: 16,
            confirm_after: Duration::from_millis(200),
        }
    }
}

/// Counters since the instance started.
#[derive(Debug, Default)]
pub struct Stats {
    /// Reads answered.
    pub reads: AtomicU64,
    /// Writes acknowledged.
    pub writes: AtomicU64,
    /// Store round trips of answered reads, summed.
    pub read_rounds: AtomicU64,
    /// Records read from the store by reads, summed.
    pub read_records: AtomicU64,
    /// Read attempts that found a dependency missing (each is retried until `resolve_wait`).
    pub unresolved: AtomicU64,
    /// Reads that failed after `resolve_wait`.
    pub failed_reads: AtomicU64,
    /// Missing dependencies pulled from another local set ([`Store::pull`]) that were then present here.
    pub pulled: AtomicU64,
    /// Pulls that did not bring the dependency (another local set unreachable, or it did not have it either).
    pub pulls_failed: AtomicU64,
    /// Compare-and-swaps lost to another instance.
    pub conflicts: AtomicU64,
    /// Bytes of records written (value and metadata), summed.
    pub written_bytes: AtomicU64,
    /// Bytes of written values alone, summed.
    pub written_value_bytes: AtomicU64,
    /// The largest folded dependency set written.
    pub max_folded: AtomicU64,
    /// Exclusive writers: writes that took their copy's record from the instance's cache instead of the store.
    pub cached_writes: AtomicU64,
    /// Versions made stable.
    pub stabilized: AtomicU64,
    /// Attempts to make a version stable that stopped short (the store could not confirm, or the walk's budget
    /// ran out; what was confirmed stays stable).
    pub unstabilized: AtomicU64,
    /// Of the versions made stable, those marked after the store confirmed the instance's own write
    /// ([`Middleware::keep_confirming`]), not by a walk.
    pub confirmed_own: AtomicU64,
    /// Confirmations asked of the store for the instance's own writes (one per distinct copy of a batch).
    pub confirmations: AtomicU64,
}

/// Versions waiting to be made stable, at most [`STABILIZE_QUEUE`].
#[derive(Default)]
struct StabilizeQueue {
    queue: std::collections::VecDeque<Vertex>,
    queued: std::collections::HashSet<Vertex>,
}

/// The most versions waiting to be made stable (more are dropped: a later write of the key queues them again).
const STABILIZE_QUEUE: usize = 4096;

/// The most versions one attempt to make a version stable visits.
const STABILIZE_BUDGET: usize = 512;

/// Copies one level of a resolution reads from the store at once.
const FETCH_PARALLELISM: usize = 64;

/// Walks making versions stable at once.
const STABILIZE_WALKS: usize = 16;

/// Own writes waiting for their confirmation, at most (more are not queued: a walk can still make them stable).
const OWN_WRITES: usize = 1 << 16;

/// Distinct copies one batch of own writes confirms, at most.
const CONFIRM_BATCH: usize = 256;

/// Confirmations of own writes in flight at once. Each costs the store a read in every local set (Cassandra: at
/// `ALL`, across the WAN): on two shared cores, 32 at once (1,500 a second) cost a third of the foreground's
/// throughput where 4 cost nothing measurable (bench/RESULTS-letting-it-be.md, run 4). The queue then drains slowly
/// after a burst of writes (a preload); what it has not confirmed stays in records, as without it.
const CONFIRM_PARALLELISM: usize = 4;

/// Exclusive writers: lock stripes ordering the writes of a key inside the instance.
const STRIPES: usize = 1024;

/// Exclusive writers: the instance's writer lease.
struct WriterLease {
    owner: String,
    term: Duration,
    standing: Mutex<Standing>,
    stripes: Vec<tokio::sync::Mutex<()>>,
}

/// Where the instance stands with its writer lease.
enum Standing {
    /// Not held; `holder` held it when it was last refused.
    Lacking { holder: Option<String> },
    /// Held: the instance may start store writes until then (the lease's end as the instance sees it, less a
    /// third of the term).
    WritableUntil(Instant),
    /// The store cannot fence writers ([`Lease::Unfenced`]).
    Unfenced,
}

/// Distinguishes middleware instances inside one process (for [`Session::bind`]).
static INSTANCES: AtomicU64 = AtomicU64::new(1);

/// One middleware instance of a local set over a store.
pub struct Middleware<S> {
    store: S,
    protocol: Protocol,
    resolve_wait: Duration,
    pull_after: Option<Duration>,
    marks: Mutex<Marks>,
    /// Versions known stable (present with their causal past in every local set).
    stable: Mutex<Marks>,
    to_stabilize: Mutex<StabilizeQueue>,
    stabilize_wake: tokio::sync::Notify,
    /// The instance's own writes, waiting to be confirmed in every local set (stores that can confirm).
    own_writes: Mutex<OwnWrites>,
    confirm_after: Duration,
    /// The instance's start: [`OwnWrites`] counts time in milliseconds since.
    started: Instant,
    folded_cap: usize,
    lease: Option<WriterLease>,
    /// Exclusive writers only.
    cache: Option<Mutex<WriteCache>>,
    id: u64,
    /// What the instance has done.
    pub stats: Stats,
}

impl<S: Store> Middleware<S> {
    /// An instance over `store`.
    pub fn new(store: S, config: &Config) -> Middleware<S> {
        assert!(
            (config.local_set as usize) < config.local_sets,
            "local set {} of {}",
            config.local_set,
            config.local_sets
        );
        Middleware {
            store,
            protocol: Protocol {
                local_set: config.local_set,
                local_sets: config.local_sets,
                levels: config.levels.max(1),
                retain: config.retain.max(1),
            },
            resolve_wait: config.resolve_wait,
            pull_after: config.pull_after,
            marks: Mutex::new(Marks::new(config.mark_capacity)),
            stable: Mutex::new(Marks::new(config.mark_capacity)),
            to_stabilize: Mutex::new(StabilizeQueue::default()),
            stabilize_wake: tokio::sync::Notify::new(),
            own_writes: Mutex::new(OwnWrites::new(OWN_WRITES)),
            confirm_after: config.confirm_after,
            started: Instant::now(),
            folded_cap: if S::CONFIRMS_STABILITY { config.folded_cap } else { usize::MAX },
            lease: (config.writers == Writers::Exclusive).then(|| WriterLease {
                owner: instance_name(config.local_set),
                term: config.lease_term.max(Duration::from_secs(3)),
                standing: Mutex::new(Standing::Lacking { holder: None }),
                stripes: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
            }),
            cache: (config.writers == Writers::Exclusive).then(|| Mutex::new(WriteCache::new(config.mark_capacity))),
            id: INSTANCES.fetch_add(1, Ordering::Relaxed),
            stats: Stats::default(),
        }
    }

    /// Exclusive writers: asks the store for the writer lease once; returns whether the instance holds it (or the
    /// store cannot fence, [`Lease::Unfenced`]). Shared writers: nothing to do.
    pub async fn renew_lease(&self) -> Result<Lease, Error> {
        let Some(lease) = &self.lease else { return Ok(Lease::Unfenced) };
        let asked = Instant::now();
        // Held without a gap since the last renewal? Otherwise another instance may have written meanwhile.
        let continuous = match *lease.standing.lock().expect("lease lock") {
            Standing::WritableUntil(until) => asked < until + lease.term / 3,
            Standing::Unfenced => true,
            Standing::Lacking { .. } => false,
        };
        let answer = self.store.lease(self.protocol.local_set, &lease.owner, lease.term).await?;
        if !continuous || answer != Lease::Held {
            if let Some(cache) = &self.cache {
                cache.lock().expect("write cache").clear();
            }
        }
        *lease.standing.lock().expect("lease lock") = match &answer {
            // The store counts the term from when it granted it, after `asked`: the instance's view ends earlier.
            Lease::Held => Standing::WritableUntil(asked + lease.term - lease.term / 3),
            Lease::Unfenced => Standing::Unfenced,
            Lease::HeldBy(h) => Standing::Lacking { holder: Some(h.clone()) },
        };
        Ok(answer)
    }

    /// Exclusive writers: takes the writer lease, waiting up to one term (plus a second) for a previous holder's
    /// lease to lapse; fails with [`Error::NoLease`] if another instance still holds it then.
    pub async fn take_lease(&self) -> Result<(), Error> {
        let Some(lease) = &self.lease else { return Ok(()) };
        let deadline = Instant::now() + lease.term + Duration::from_secs(1);
        loop {
            match self.renew_lease().await? {
                Lease::Held | Lease::Unfenced => return Ok(()),
                Lease::HeldBy(holder) if Instant::now() >= deadline => {
                    return Err(Error::NoLease { local_set: self.protocol.local_set, holder: Some(holder) })
                }
                Lease::HeldBy(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// Exclusive writers: renews the lease every quarter term, for ever (run it as a task beside the instance). A
    /// renewal that fails leaves the lease to lapse on its own; one refused (another instance took it after a
    /// lapse) stops this instance's writes until it gets the lease back.
    pub async fn keep_lease(&self) {
        let Some(lease) = &self.lease else { return };
        loop {
            tokio::time::sleep(lease.term / 4).await;
            // Errors: the lease lapses at its end unless a later renewal succeeds; writes check it.
            let _ = self.renew_lease().await;
        }
    }

    /// The instance's background work, for ever (run it as a task beside the instance): renewing the writer
    /// lease ([`Middleware::keep_lease`]) and making versions stable ([`Middleware::keep_confirming`] and
    /// [`Middleware::keep_stabilizing`]).
    pub async fn maintain(&self) {
        futures_util::future::join3(self.keep_lease(), self.keep_confirming(), self.keep_stabilizing()).await;
    }

    /// Exclusive writers: stops writing, waits for the writes in flight, and gives the lease up, so that a new
    /// instance of the local set need not wait for it to lapse.
    pub async fn release_lease(&self) -> Result<(), Error> {
        let Some(lease) = &self.lease else { return Ok(()) };
        *lease.standing.lock().expect("lease lock") = Standing::Lacking { holder: None };
        for s in &lease.stripes {
            drop(s.lock().await);
        }
        self.store.lease(self.protocol.local_set, &lease.owner, Duration::ZERO).await?;
        Ok(())
    }

    /// Exclusive writers: whether a store write may start now.
    fn check_lease(&self, lease: &WriterLease) -> Result<(), Error> {
        let holder = match &*lease.standing.lock().expect("lease lock") {
            Standing::WritableUntil(until) if Instant::now() < *until => return Ok(()),
            Standing::Unfenced => return Ok(()),
            Standing::WritableUntil(_) => None,
            Standing::Lacking { holder } => holder.clone(),
        };
        Err(Error::NoLease { local_set: self.protocol.local_set, holder })
    }

    /// The store underneath.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// One part ([`Head`](crate::record::Head) or [`Meta`]) of each of `copies` from the local store: all of a
    /// key's copies in one request when that is what is asked for, otherwise at most [`FETCH_PARALLELISM`] single
    /// copies at a time. `to_write`: a write's read of a whole key's metas ([`Store::get_copies_to_write`]).
    async fn fetch<T: RecordPart>(&self, copies: &[Copy], to_write: bool) -> Result<Vec<Option<T>>, Error> {
        let n = self.protocol.local_sets;
        let whole_key = copies.len() == n
            && copies.iter().zip(0..).all(|(c, ls): (&Copy, LocalSet)| c.ls == ls && c.key == copies[0].key);
        let raw = if whole_key && to_write {
            self.store.get_copies_to_write(&copies[0].key, n).await?
        } else if whole_key {
            self.store.get_copies(&copies[0].key, n, T::PART).await?
        } else {
            let mut raw = Vec::with_capacity(copies.len());
            for chunk in copies.chunks(FETCH_PARALLELISM) {
                raw.extend(try_join_all(chunk.iter().map(|c| self.store.get(c, T::PART))).await?);
            }
            raw
        };
        let parts: Vec<Option<T>> =
            raw.into_iter().map(|r| r.map(|b| T::decode(&b)).transpose()).collect::<Result<_, _>>()?;
        if let (Some(cache), false) = (&self.cache, to_write) {
            cache.lock().expect("write cache").observe(copies, parts.iter().map(|p| p.as_ref().map(T::clock)));
        }
        Ok(parts)
    }

    /// One copy's meta in the local store.
    async fn get_meta(&self, copy: &Copy) -> Result<Option<Meta>, Error> {
        Ok(self.store.get(copy, Part::Meta).await?.map(|b| Meta::decode(&b)).transpose()?)
    }

    /// Reads `key` for `session`: the causally latest version whose dependencies are all present locally, or
    /// `None` if the key was never written. Waits up to `resolve_wait` for missing dependencies.
    pub async fn read(&self, session: &mut Session, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        session.bind(self.id);
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        // Missing versions this read has pulled already (each once: a failed pull is not repeated, the read waits).
        let mut pulled: Vec<Vertex> = Vec::new();
        loop {
            let (mut op, mut step) = ReadOp::start(&self.protocol, key);
            let outcome = loop {
                let input = match step {
                    Step::FetchHeads(copies) => Input::Heads(self.fetch(&copies, false).await?),
                    // A non-zero `resolve_wait` bounds the whole read, also a resolution that is slow without missing
                    // anything (zero only makes a missing dependency fail at once).
                    Step::Fetch(_) if !self.resolve_wait.is_zero() && started.elapsed() > self.resolve_wait => {
                        self.stats.failed_reads.fetch_add(1, Ordering::Relaxed);
                        let version = op.version().expect("metas are read after the heads");
                        return Err(Error::Unfinished { version, read: op.work.reads, waited: started.elapsed() });
                    }
                    Step::Fetch(copies) => Input::Fetched(self.fetch(&copies, false).await?),
                    Step::Done(outcome) => break outcome,
                    Step::Cas { .. } => unreachable!("a read only fetches"),
                };
                step = op.resume(input, &mut self.marks.lock().expect("marks lock"), session);
            };
            match outcome {
                ReadOutcome::Unresolved { version, missing } => {
                    self.stats.unresolved.fetch_add(1, Ordering::Relaxed);
                    // Wait for the missing version alone (one read per poll), then resolve again from the start: a
                    // large graph is not fetched again on every poll. A version still missing after `pull_after`
                    // is pulled from another local set, once.
                    loop {
                        let waited = started.elapsed();
                        if waited + pause > self.resolve_wait {
                            self.stats.failed_reads.fetch_add(1, Ordering::Relaxed);
                            let local_set = self.protocol.local_set;
                            return Err(Error::Unresolved { version, missing, local_set, waited });
                        }
                        if self.pull_after.is_some_and(|after| S::PULLS && waited >= after)
                            && !pulled.contains(&missing)
                        {
                            pulled.push(missing.clone());
                            let copy = missing.copy();
                            let pull = self.store.pull(&copy, missing.seq);
                            let here = tokio::time::timeout(self.resolve_wait - waited, pull).await;
                            if matches!(here, Ok(Ok(true))) {
                                self.stats.pulled.fetch_add(1, Ordering::Relaxed);
                                break;
                            }
                            self.stats.pulls_failed.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(50));
                        if self.get_meta(&missing.copy()).await?.is_some_and(|m| m.seq() >= missing.seq) {
                            break;
                        }
                    }
                }
                outcome => {
                    self.stats.reads.fetch_add(1, Ordering::Relaxed);
                    self.stats.read_rounds.fetch_add(u64::from(op.work.rounds), Ordering::Relaxed);
                    self.stats.read_records.fetch_add(u64::from(op.work.reads), Ordering::Relaxed);
                    return Ok(match outcome {
                        ReadOutcome::Value { value, .. } => Some(value),
                        _ => None,
                    });
                }
            }
        }
    }

    /// Writes `value` to `key` for `session`, with the session's dependencies; returns the version written.
    pub async fn write(&self, session: &mut Session, key: &[u8], value: Vec<u8>) -> Result<Vertex, Error> {
        let value_len = value.len() as u64;
        // Exclusive writers: the instance is the local set's only writer, and this lock orders its writes of the
        // key, so the copy read below stays the latest until the write that follows it is stored.
        let _ordered = match &self.lease {
            Some(lease) => {
                self.check_lease(lease)?;
                Some(lease.stripes[stripe(key)].lock().await)
            }
            None => None,
        };
        // A session that moved from another instance may have seen versions this instance's cache never saw.
        let bound = session.bind(self.id);
        let mut cached = match &self.cache {
            Some(cache) if bound => cache.lock().expect("write cache").copies_for_write(&self.protocol, key),
            _ => None,
        };
        if cached.is_some() {
            self.stats.cached_writes.fetch_add(1, Ordering::Relaxed);
        }
        let (mut op, mut step) = WriteOp::start(&self.protocol, session, key, value);
        loop {
            if let Step::Cas { record, .. } = &step {
                let folded = &record.meta.folded;
                self.stats.max_folded.fetch_max(folded.len() as u64, Ordering::Relaxed);
                if folded.len() > self.folded_cap {
                    self.queue_stabilize(folded);
                }
            }
            let input = match step {
                Step::FetchHeads(_) => unreachable!("a write reads metas"),
                Step::Fetch(copies) => match cached.take() {
                    Some(records) => Input::Fetched(records),
                    None => {
                        let records = self.fetch(&copies, self.lease.is_some()).await?;
                        if let Some(cache) = &self.cache {
                            cache.lock().expect("write cache").fetched(&self.protocol, key, &records);
                        }
                        Input::Fetched(records)
                    }
                },
                Step::Cas { copy, expect: _, record } if self.lease.is_some() => {
                    self.check_lease(self.lease.as_ref().expect("exclusive"))?;
                    let data = record.encode();
                    let len = data.len() as u64;
                    let stored = self.store.put(&copy, record.seq(), data).await;
                    if let Some(cache) = &self.cache {
                        let mut cache = cache.lock().expect("write cache");
                        match &stored {
                            Ok(()) => cache.stored(key, &record),
                            // Stored or not, nobody knows: the next write reads the store.
                            Err(_) => cache.forget(key),
                        }
                    }
                    stored?;
                    self.own_stored(&copy, &record);
                    self.stats.written_bytes.fetch_add(len, Ordering::Relaxed);
                    self.stats.written_value_bytes.fetch_add(value_len, Ordering::Relaxed);
                    Input::Swapped(true)
                }
                Step::Cas { copy, expect, record } => {
                    let data = record.encode();
                    let len = data.len() as u64;
                    let applied = self.store.cas(&copy, expect, record.seq(), data).await?;
                    if applied {
                        self.own_stored(&copy, &record);
                        self.stats.written_bytes.fetch_add(len, Ordering::Relaxed);
                        self.stats.written_value_bytes.fetch_add(value_len, Ordering::Relaxed);
                    }
                    Input::Swapped(applied)
                }
                Step::Done(vertex) => {
                    self.stats.writes.fetch_add(1, Ordering::Relaxed);
                    self.stats.conflicts.fetch_add(u64::from(op.work.conflicts), Ordering::Relaxed);
                    return Ok(vertex);
                }
            };
            let stable = self.stable.lock().expect("stable lock");
            step = op.resume(&self.protocol, input, session, &stable);
        }
    }

    /// Queues a version the store has just acknowledged for its confirmation ([`Middleware::keep_confirming`]).
    fn own_stored(&self, copy: &Copy, record: &Record) {
        if S::CONFIRMS_STABILITY {
            let at = self.started.elapsed().as_millis() as u64;
            self.own_writes.lock().expect("own writes").stored(copy, &record.meta, at);
        }
    }

    /// Makes the instance's own writes stable, for ever (run it as a task beside the instance; see [`OwnWrites`]):
    /// every few milliseconds, the writes acknowledged at least `confirm_after` ago are confirmed with the store,
    /// one request per distinct copy, a bounded number at once, and marked stable oldest first. A batch the store
    /// cannot confirm (another local set unreachable) is asked again after a pause.
    pub async fn keep_confirming(&self) {
        if !S::CONFIRMS_STABILITY {
            return;
        }
        loop {
            let before = self.started.elapsed().saturating_sub(self.confirm_after).as_millis() as u64;
            let (count, copies) = self.own_writes.lock().expect("own writes").due(before, CONFIRM_BATCH);
            if count == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            self.stats.confirmations.fetch_add(copies.len() as u64, Ordering::Relaxed);
            let answers: Vec<(Vertex, bool)> = futures_util::stream::iter(copies)
                .map(|v| async move {
                    // An error is an unconfirmed version: asked again with the next batch.
                    let ok = self.store.stabilize(&v.copy(), v.seq).await.unwrap_or(false);
                    (v, ok)
                })
                .buffer_unordered(CONFIRM_PARALLELISM)
                .collect()
                .await;
            let outcome = {
                let mut stable = self.stable.lock().expect("stable lock");
                self.own_writes.lock().expect("own writes").confirmed(count, &answers, &mut stable)
            };
            self.stats.stabilized.fetch_add(outcome.marked as u64, Ordering::Relaxed);
            self.stats.confirmed_own.fetch_add(outcome.marked as u64, Ordering::Relaxed);
            if outcome.stopped {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    /// Queues versions to be made stable by [`Middleware::keep_stabilizing`].
    fn queue_stabilize(&self, versions: &[Vertex]) {
        let mut q = self.to_stabilize.lock().expect("stabilize queue");
        for v in versions {
            if q.queue.len() >= STABILIZE_QUEUE {
                break;
            }
            if q.queued.insert(v.clone()) {
                q.queue.push_back(v.clone());
            }
        }
        drop(q);
        self.stabilize_wake.notify_waiters();
    }

    /// Makes queued versions stable, for ever (run it as a task beside the instance; see [`StabilizeOp`]). This is
    /// what bounds the folded dependency sets of the records this instance writes.
    pub async fn keep_stabilizing(&self) {
        // Each walk waits on the store's cross-DC confirmations: several run at once.
        futures_util::future::join_all((0..STABILIZE_WALKS).map(|_| self.stabilize_queued())).await;
    }

    /// One of [`Middleware::keep_stabilizing`]'s walkers.
    async fn stabilize_queued(&self) {
        loop {
            let next = {
                let mut q = self.to_stabilize.lock().expect("stabilize queue");
                let v = q.queue.pop_front();
                if let Some(v) = &v {
                    q.queued.remove(v);
                }
                v
            };
            let Some(root) = next else {
                // Woken by the next queued version (or after a second, should the wake-up go to another walker).
                let _ = tokio::time::timeout(Duration::from_secs(1), self.stabilize_wake.notified()).await;
                continue;
            };
            match self.stabilize(root).await {
                Ok(true) => {}
                Ok(false) | Err(_) => {
                    self.stats.unstabilized.fetch_add(1, Ordering::Relaxed);
                    // The store could not confirm (another local set unreachable, or replication behind): pause
                    // before the next attempt rather than spin.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }

    /// Makes `root` stable: one [`StabilizeOp`] walk against the store.
    pub async fn stabilize(&self, root: Vertex) -> Result<bool, Error> {
        let (mut op, mut step) =
            StabilizeOp::start(root, STABILIZE_BUDGET, &mut self.stable.lock().expect("stable lock"));
        loop {
            let input = match step {
                StabilizeStep::Fetch(copy) => StabilizeInput::Fetched(self.get_meta(&copy).await?),
                StabilizeStep::Confirm(v) => StabilizeInput::Confirmed(self.store.stabilize(&v.copy(), v.seq).await?),
                StabilizeStep::Done(done) => {
                    self.stats.stabilized.fetch_add(op.marked as u64, Ordering::Relaxed);
                    return Ok(done);
                }
            };
            step = op.resume(input, &mut self.stable.lock().expect("stable lock"));
        }
    }
}

fn stripe(key: &[u8]) -> usize {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut h);
    h.finish() as usize % STRIPES
}

/// A name for this instance in the writer lease: local set, host, process and start time, so that an operator
/// told "held by …" can find the holder.
fn instance_name(ls: LocalSet) -> String {
    let host = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()).unwrap_or_else(|| "localhost".into());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("local set {ls} instance {host}/pid {}/{nanos:x}", std::process::id())
}
