//! The middleware over a real store: [`Middleware`] runs the sans-I/O operations of [`crate::op`] against a
//! [`Store`], reading the copies each step asks for in parallel, and waits (up to a deadline) for a read whose
//! dependencies have not arrived yet.

use std::collections::HashMap;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::try_join_all;
use futures_util::StreamExt;

use crate::counted::{Counted, StoreRequests};
use crate::feed::Frontier;
use crate::feed::{Batch, FeedReader, FeedWriter};
use crate::op::{
    Check, Input, Marks, OwnWrites, Protocol, ReadCache, ReadOp, ReadOutcome, Resolution, Session, StabilizeInput,
    StabilizeOp, StabilizeStep, Step, WriteCache, WriteOp,
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

    /// Whether [`Store::get_many`] reads many copies in one request; when not, the default reads them one by one
    /// (and [`crate::counted`] counts each as a `get`).
    const GETS_MANY: bool = false;

    /// One part of each of `copies` (any keys, any local sets; in order, repeats allowed), from the local set's own
    /// cluster like [`Store::get`]. The default reads them one by one, at most [`FETCH_PARALLELISM`] at a time.
    fn get_many(
        &self,
        copies: &[Copy],
        part: Part,
    ) -> impl Future<Output = Result<Vec<Option<Vec<u8>>>, StoreError>> + Send {
        get_each(self, copies, part)
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

    /// Whether the store keeps feeds ([`crate::feed`]): [`Store::feed_append`], [`Store::feed_read`],
    /// [`Store::frontier_put`] and [`Store::frontier_get`]. Without them, exclusive writers confirm their writes one
    /// by one ([`Store::stabilize`]) and followers resolve nothing ahead of reads.
    const FEEDS: bool = false;

    /// Appends batch `number` of local set `ls`'s feed in `epoch` (this local set's own feed; replicated to every
    /// other local set like a record, and kept for at least a day). Idempotent: the same batch may be appended again
    /// after an error.
    fn feed_append(
        &self,
        ls: LocalSet,
        epoch: u64,
        number: u64,
        batch: Vec<u8>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (ls, epoch, number, batch);
        async { Err(StoreError("this store keeps no feeds".into())) }
    }

    /// Batches of local set `ls`'s feed in `epoch` numbered `from` and up, at most `limit`, in number order, as this
    /// local set's store has them (`everywhere`: also from other local sets' stores, bringing them here, for a
    /// batch that has not arrived; Cassandra: a read at `ALL`). A store may stop early at a boundary of its own
    /// (the caller reads again from the next number).
    fn feed_read(
        &self,
        ls: LocalSet,
        epoch: u64,
        from: u64,
        limit: usize,
        everywhere: bool,
    ) -> impl Future<Output = Result<Vec<(u64, Vec<u8>)>, StoreError>> + Send {
        let _ = (ls, epoch, from, limit, everywhere);
        async { Ok(Vec::new()) }
    }

    /// Publishes follower `reader`'s frontier on `writer`'s feed (`reader == writer`: the writer's announcement of
    /// its epoch), replicated to every local set; a later put replaces an earlier one.
    fn frontier_put(
        &self,
        reader: LocalSet,
        writer: LocalSet,
        frontier: Frontier,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (reader, writer, frontier);
        async { Err(StoreError("this store keeps no feeds".into())) }
    }

    /// Follower `reader`'s frontier on `writer`'s feed as this local set's store has it.
    fn frontier_get(
        &self,
        reader: LocalSet,
        writer: LocalSet,
    ) -> impl Future<Output = Result<Option<Frontier>, StoreError>> + Send {
        let _ = (reader, writer);
        async { Ok(None) }
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
    /// The key's latest version has a large graph still to check, and this local set's follower of its writer's
    /// feed had not resolved it within `resolve_wait`.
    #[error(
        "the latest version of the key ({version}) was not resolved by local set {local_set}'s follower of its \
         writer's feed within resolve_wait (waited {waited:?} for it after reading part of its graph): the follower \
         is behind, or the store's replication is"
    )]
    Unfollowed {
        /// The version that could not be returned.
        version: Vertex,
        /// This local set.
        local_set: LocalSet,
        /// How long the read waited for the follower.
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
    /// Copies whose resolved (and, apart, stable) version an instance remembers; when full it forgets a quarter
    /// of them and resolves those again when read. About 100 bytes each.
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
    /// Whether the instance keeps a feed of its writes (exclusive writers) and follows the other local sets' feeds
    /// ([`crate::feed`]; stores that keep feeds). An exclusive writer with a feed marks its writes stable when every
    /// other local set has resolved them, instead of confirming them one by one.
    pub feed: bool,
    /// Feeds: how many records a read may read while resolving a version of a followed local set before it stops
    /// walking that version's graph and waits (within `resolve_wait`) for this instance's follower, which resolves
    /// the feed's versions in order at about one record each. 0: wait at once; `usize::MAX`: never wait.
    pub walk_budget: usize,
    /// Exclusive writers with feeds and `k = 1`: how long a read's answer may be served again from the instance's
    /// read cache ([`ReadCache`]) while nothing newer of its key is known resolved here; zero: no read cache.
    pub read_cache_ttl: Duration,
    /// The read cache's size bound (keys, values and bookkeeping), in bytes.
    pub read_cache_bytes: usize,
}

impl Config {
    /// The defaults for local set `local_set` of `local_sets`: `k = 1`, 8 versions retained, 1,000,000 marks,
    /// reads wait up to 2 s for missing dependencies, and shared writers (compare-and-swap per write; a 12 s
    /// lease term if switched to exclusive writers).
    pub fn new(local_set: LocalSet, local_sets: usize) -> Config {
        Config {
            local_set,
            local_sets,
            levels: 1,
            retain: 8,
            mark_capacity: 1_000_000,
            resolve_wait: Duration::from_secs(2),
            pull_after: Some(Duration::from_millis(100)),
            writers: Writers::Shared,
            lease_term: Duration::from_secs(12),
            folded_cap: 16,
            confirm_after: Duration::from_millis(200),
            feed: true,
            walk_budget: 64,
            read_cache_ttl: Duration::from_secs(1),
            read_cache_bytes: 64 << 20,
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
    /// Batches appended to this instance's feed.
    pub feed_batches: AtomicU64,
    /// Versions appended to this instance's feed.
    pub feed_versions: AtomicU64,
    /// Of the versions made stable, those every other local set had resolved from this instance's feed.
    pub stable_by_feed: AtomicU64,
    /// Versions of other local sets' feeds resolved here ahead of reads.
    pub followed: AtomicU64,
    /// Attempts to resolve the next versions of a feed that found something missing (retried).
    pub follow_missing: AtomicU64,
    /// Versions that reads (answered or failed) expanded with a feed entry's own requirements.
    pub read_expanded_own: AtomicU64,
    /// Versions that reads (answered or failed) expanded with their records' requirements.
    pub read_expanded_records: AtomicU64,
    /// Reads that stopped walking a followed local set's version and waited for the follower (`walk_budget`).
    pub follower_waits: AtomicU64,
    /// Of those, the ones that the follower had not resolved within `resolve_wait` (they failed).
    pub follower_waits_failed: AtomicU64,
    /// Milliseconds reads spent waiting for the follower, summed.
    pub follower_wait_ms: AtomicU64,
    /// Reads answered from the read cache, without reading the store (counted in `reads` too).
    pub read_cache_hits: AtomicU64,
    /// Reads answered from the read cache after the store's newest version turned out not to be resolved yet
    /// (counted in `reads` too): they did not wait for it.
    pub read_cache_fallbacks: AtomicU64,
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

/// Copies a store that reads them one by one ([`Store::get_many`]'s default) reads at once.
pub const FETCH_PARALLELISM: usize = 64;

/// [`Store::get_many`] by single reads, at most [`FETCH_PARALLELISM`] in flight.
pub async fn get_each<S: Store + ?Sized>(
    store: &S,
    copies: &[Copy],
    part: Part,
) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    let mut raw = Vec::with_capacity(copies.len());
    for chunk in copies.chunks(FETCH_PARALLELISM) {
        raw.extend(try_join_all(chunk.iter().map(|c| store.get(c, part))).await?);
    }
    Ok(raw)
}

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

/// Exclusive writers: keys whose record the write cache keeps, at most (a record holds a value: the marks' capacity
/// would be too many).
const WRITE_CACHE_KEYS: usize = 100_000;

/// Versions a feed writer keeps waiting to be appended or marked stable, and a follower reads ahead, at most.
const FEED_CAPACITY: usize = 1 << 16;

/// Versions per feed batch, at most.
const FEED_BATCH: usize = 1024;

/// Feed batches a follower reads at once, at most.
const FEED_READ: usize = 64;

/// How often a feed writer appends what waits, and reads the followers' frontiers; how often a follower publishes
/// its frontier, at most.
const FEED_EVERY: Duration = Duration::from_millis(10);

/// How often a feed writer announces its epoch again, and a follower asks for it.
const EPOCH_EVERY: Duration = Duration::from_secs(1);

/// How long a follower waits for a batch that a later batch overtook before it reads it from every local set.
const FEED_GAP_PULL_AFTER: Duration = Duration::from_millis(500);

/// How long a follower waits for a missing version before it pulls it from another local set.
const FOLLOW_PULL_AFTER: Duration = Duration::from_millis(500);

/// Exclusive writers: lock stripes ordering the writes of a key inside the instance.
const STRIPES: usize = 1024;

/// A follower's state between its rounds ([`Middleware::follow`]).
struct Following {
    /// The local set whose feed this is.
    writer: LocalSet,
    /// When the writer's announcement was last asked for.
    asked: Option<Instant>,
    /// The frontier last published, and when.
    published: Option<Frontier>,
    published_at: Instant,
    /// Since when a batch is missing (overtaken by a later one, or announced and not arrived).
    gap_since: Option<Instant>,
    /// The version found missing at the front of the feed, and since when.
    missing_since: Option<(Vertex, Instant)>,
    /// Where the writer last said its feed ends (its epoch, the batch after its last).
    feed_end: Option<(u64, u64)>,
}

impl Following {
    fn new(writer: LocalSet) -> Following {
        Following {
            writer,
            asked: None,
            published: None,
            published_at: Instant::now(),
            gap_since: None,
            missing_since: None,
            feed_end: None,
        }
    }
}

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
    store: Counted<S>,
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
    /// Exclusive writers over a store that keeps feeds: this instance's feed.
    feed: Option<Mutex<FeedWriter>>,
    /// The other local sets' feeds, followed (stores that keep feeds).
    following: Vec<Mutex<FeedReader>>,
    /// The entries read from followed feeds and not resolved yet, by version: their own requirements, with which
    /// reads check them ([`Resolution::adopt`]).
    feed_entries: Mutex<HashMap<Vertex, Vec<Vertex>>>,
    /// Woken whenever a follower marks versions resolved (reads waiting for it, `walk_budget`).
    followed: tokio::sync::Notify,
    walk_budget: usize,
    folded_cap: usize,
    lease: Option<WriterLease>,
    /// Exclusive writers only.
    cache: Option<Mutex<WriteCache>>,
    /// Exclusive writers with feeds and `k = 1`, unless switched off; locked after `marks`, through
    /// [`Middleware::with_read_cache`] only.
    read_cache: Option<Mutex<ReadCache>>,
    read_cache_ttl_ms: u64,
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
        let feeds = S::FEEDS && config.feed && config.writers == Writers::Exclusive;
        Middleware {
            store: Counted::new(store),
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
            feed: feeds
                .then(|| Mutex::new(FeedWriter::new(config.local_set, config.local_sets, new_epoch(), FEED_CAPACITY))),
            following: (0..config.local_sets as LocalSet)
                .filter(|&w| S::FEEDS && config.feed && w != config.local_set)
                .map(|w| Mutex::new(FeedReader::new(config.local_set, w, FEED_CAPACITY)))
                .collect(),
            feed_entries: Mutex::new(HashMap::new()),
            followed: tokio::sync::Notify::new(),
            walk_budget: config.walk_budget,
            folded_cap: if S::CONFIRMS_STABILITY { config.folded_cap } else { usize::MAX },
            lease: (config.writers == Writers::Exclusive).then(|| WriterLease {
                owner: instance_name(config.local_set),
                term: config.lease_term.max(Duration::from_secs(3)),
                standing: Mutex::new(Standing::Lacking { holder: None }),
                stripes: (0..STRIPES).map(|_| tokio::sync::Mutex::new(())).collect(),
            }),
            cache: (config.writers == Writers::Exclusive && WriteCache::is_sound(feeds, S::CONFIRMS_STABILITY))
                .then(|| Mutex::new(WriteCache::new(config.mark_capacity.min(WRITE_CACHE_KEYS)))),
            read_cache: (ReadCache::is_sound(config.writers == Writers::Exclusive, feeds, config.levels.max(1))
                && !config.read_cache_ttl.is_zero())
            .then(|| Mutex::new(ReadCache::new(config.read_cache_bytes))),
            read_cache_ttl_ms: config.read_cache_ttl.as_millis() as u64,
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
            // Another instance may have written meanwhile: what the read cache holds may be older than the store.
            self.with_read_cache(|cache, _| cache.clear());
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
    /// lease ([`Middleware::keep_lease`]), keeping its feed and following the others' ([`Middleware::keep_feeding`],
    /// [`Middleware::keep_following`]), and making versions stable ([`Middleware::keep_confirming`] and
    /// [`Middleware::keep_stabilizing`]).
    pub async fn maintain(&self) {
        futures_util::future::join5(
            self.keep_lease(),
            self.keep_feeding(),
            self.keep_following(),
            self.keep_confirming(),
            self.keep_stabilizing(),
        )
        .await;
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
        &self.store.inner
    }

    /// What the instance has asked of its store since it started, by kind of request (background work included).
    pub fn store_requests(&self) -> &StoreRequests {
        &self.store.requests
    }

    /// One part ([`Head`](crate::record::Head) or [`Meta`]) of each of `copies` from the local store: all of a
    /// key's copies in one request when that is what is asked for, otherwise [`Store::get_many`]. `to_write`: a
    /// write's read of a whole key's metas ([`Store::get_copies_to_write`]).
    async fn fetch<T: RecordPart>(&self, copies: &[Copy], to_write: bool) -> Result<Vec<Option<T>>, Error> {
        let n = self.protocol.local_sets;
        let whole_key = copies.len() == n
            && copies.iter().zip(0..).all(|(c, ls): (&Copy, LocalSet)| c.ls == ls && c.key == copies[0].key);
        let raw = if whole_key && to_write {
            self.store.get_copies_to_write(&copies[0].key, n).await?
        } else if whole_key {
            self.store.get_copies(&copies[0].key, n, T::PART).await?
        } else {
            self.store.get_many(copies, T::PART).await?
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
        // A session that moved from another instance may have seen versions this instance never marked.
        let bound = session.bind(self.id);
        if let Some(value) = self.answer_from_read_cache(session, key, bound, Some(self.read_cache_ttl_ms)) {
            self.stats.read_cache_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(Some(value));
        }
        let began = self.with_read_cache(|cache, marks| cache.begin(marks));
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        // Missing versions this read has pulled already (each once: a failed pull is not repeated, the read waits).
        let mut pulled: Vec<Vertex> = Vec::new();
        // Whether this read has waited for a follower already (once: after that it walks).
        let mut waited_for_follower = false;
        loop {
            let (mut op, mut step) = ReadOp::start(&self.protocol, key);
            let outcome = loop {
                let input = match step {
                    Step::FetchHeads(copies) => Input::Heads(self.fetch(&copies, false).await?),
                    Step::Fetch(_) if !waited_for_follower && self.waits_for_follower(&op) => {
                        // Rather than wait for the newer version, the cached answer, if it still may be returned.
                        if let Some(value) = self.fall_back_to_read_cache(session, key, bound) {
                            self.count_expanded(&op);
                            return Ok(Some(value));
                        }
                        waited_for_follower = true;
                        let version = op.version().expect("metas are read after the heads");
                        if let Err(e) = self.wait_for_follower(&version, started).await {
                            self.count_expanded(&op);
                            return Err(e);
                        }
                        let entries = self.feed_entries.lock().expect("feed entries");
                        let own = |v: &Vertex| entries.get(v).cloned();
                        step = op.restart(&mut self.marks.lock().expect("marks lock"), session, &own);
                        continue;
                    }
                    // A non-zero `resolve_wait` bounds the whole read, also a resolution that is slow without missing
                    // anything (zero only makes a missing dependency fail at once).
                    Step::Fetch(_) if !self.resolve_wait.is_zero() && started.elapsed() > self.resolve_wait => {
                        self.stats.failed_reads.fetch_add(1, Ordering::Relaxed);
                        self.count_expanded(&op);
                        let version = op.version().expect("metas are read after the heads");
                        return Err(Error::Unfinished { version, read: op.work.reads, waited: started.elapsed() });
                    }
                    Step::Fetch(copies) => Input::Fetched(self.fetch(&copies, false).await?),
                    Step::Done(outcome) => break outcome,
                    Step::Cas { .. } => unreachable!("a read only fetches"),
                };
                let entries = self.feed_entries.lock().expect("feed entries");
                let own = |v: &Vertex| entries.get(v).cloned();
                step = op.resume_with(input, &mut self.marks.lock().expect("marks lock"), session, &own);
            };
            self.count_expanded(&op);
            match outcome {
                ReadOutcome::Unresolved { version, missing } => {
                    if let Some(value) = self.fall_back_to_read_cache(session, key, bound) {
                        return Ok(Some(value));
                    }
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
                        ReadOutcome::Value { value, version } => {
                            if let Some(began) = began {
                                let (found, now) = (op.found(), self.now_ms());
                                self.with_read_cache(|cache, marks| {
                                    cache.fill(key, began, found, version, value.clone(), marks, now)
                                });
                            }
                            Some(value)
                        }
                        _ => None,
                    });
                }
            }
        }
    }

    /// The read cache's answer to a read of `key` by `session` (bound to this instance or not), if it has one and
    /// may give it: younger than `ttl_ms`, or of any age (`None`). Counts the read.
    fn answer_from_read_cache(
        &self,
        session: &mut Session,
        key: &[u8],
        bound: bool,
        ttl_ms: Option<u64>,
    ) -> Option<Vec<u8>> {
        if !bound || !self.holds_lease() {
            return None;
        }
        let (ls, now) = (self.protocol.local_set, self.now_ms());
        let value = self.with_read_cache(|cache, marks| {
            let (version, value) = cache.lookup(ls, key, marks, now, ttl_ms)?;
            ReadCache::served(session, version);
            Some(value.to_vec())
        })??;
        self.stats.reads.fetch_add(1, Ordering::Relaxed);
        Some(value)
    }

    /// Whether no other instance of this local set can have written since this instance's read cache learnt what it
    /// holds: it holds the writer lease now (or writers are not fenced, or shared: then it keeps no read cache).
    /// Once the lease may have lapsed, another instance may take it and write, and a session here may see that
    /// write through another key before it reads this one: the cache answers nothing until the lease is held again
    /// (and a lease held again after a gap clears it, [`Middleware::renew_lease`]).
    fn holds_lease(&self) -> bool {
        self.lease.as_ref().is_none_or(|lease| self.check_lease(lease).is_ok())
    }

    /// The read cache's answer of any age, instead of waiting for the store's newer version: counted as a fallback.
    fn fall_back_to_read_cache(&self, session: &mut Session, key: &[u8], bound: bool) -> Option<Vec<u8>> {
        let value = self.answer_from_read_cache(session, key, bound, None)?;
        self.stats.read_cache_fallbacks.fetch_add(1, Ordering::Relaxed);
        Some(value)
    }

    /// Runs `f` on the read cache, if the instance keeps one, with the marks: locked in that order, marks first,
    /// here only (the other order deadlocked against it, 2026-11-30).
    fn with_read_cache<R>(&self, f: impl FnOnce(&mut ReadCache, &Marks) -> R) -> Option<R> {
        let cache = self.read_cache.as_ref()?;
        let marks = self.marks.lock().expect("marks lock");
        let mut cache = cache.lock().expect("read cache");
        Some(f(&mut cache, &marks))
    }

    /// Milliseconds since the instance started: the read cache's clock.
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Whether `op`, about to read more of its winner's graph, should rather wait for this instance's follower of
    /// the winner's local set: it has read more than `walk_budget` records, a non-zero `resolve_wait` bounds it,
    /// and that local set's feed is followed here.
    fn waits_for_follower(&self, op: &ReadOp) -> bool {
        let Some(writer) = op.walked_past(self.walk_budget) else { return false };
        !self.resolve_wait.is_zero()
            && self.following.iter().any(|f| {
                let f = f.lock().expect("feed reader");
                f.writer == writer && f.wants().is_some()
            })
    }

    /// Waits until the follower has marked `version` resolved, or fails when `resolve_wait` since `started` has
    /// passed first.
    async fn wait_for_follower(&self, version: &Vertex, started: Instant) -> Result<(), Error> {
        let since = Instant::now();
        let until = started + self.resolve_wait;
        self.stats.follower_waits.fetch_add(1, Ordering::Relaxed);
        let resolved = loop {
            // Created before the check, so that a mark made in between still wakes it.
            let notified = self.followed.notified();
            if self.marks.lock().expect("marks lock").covers(version) {
                break true;
            }
            if tokio::time::timeout_at(until.into(), notified).await.is_err() {
                break false;
            }
        };
        let waited = since.elapsed();
        self.stats.follower_wait_ms.fetch_add(waited.as_millis() as u64, Ordering::Relaxed);
        if resolved {
            return Ok(());
        }
        self.stats.follower_waits_failed.fetch_add(1, Ordering::Relaxed);
        self.stats.failed_reads.fetch_add(1, Ordering::Relaxed);
        Err(Error::Unfollowed { version: version.clone(), local_set: self.protocol.local_set, waited })
    }

    fn count_expanded(&self, op: &ReadOp) {
        let (own, records) = op.expanded();
        self.stats.read_expanded_own.fetch_add(u64::from(own), Ordering::Relaxed);
        self.stats.read_expanded_records.fetch_add(u64::from(records), Ordering::Relaxed);
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
        // Reads that began before this write do not fill the read cache with what it replaces.
        let began = self.with_read_cache(|cache, marks| cache.start_write(key, marks));
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
                if folded.len() > self.folded_cap && self.feed.is_none() {
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
                    // Nor do reads that began while it was in flight (they may have read the head it replaces); the
                    // write is what later reads of the key may be answered.
                    if let Some(began) = began {
                        let now = self.now_ms();
                        self.with_read_cache(|cache, marks| match &stored {
                            Ok(()) => {
                                let version = Vertex { key: key.to_vec(), ls: copy.ls, seq: record.seq() };
                                let (value, clock) = (record.value.clone(), &record.meta.clock);
                                cache.wrote_through(key, began, version, value, clock, marks, now);
                            }
                            Err(_) => cache.wrote(key),
                        });
                    }
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

    /// For each other local set's feed this instance follows: the position of its first unresolved version and the
    /// feed's end as its writer last announced it (`None` before the follower knows the writer's epoch).
    pub fn following(&self) -> Vec<(LocalSet, Option<(u64, u64)>)> {
        let readers = self.following.iter().map(|f| f.lock().expect("feed reader"));
        readers.map(|f| (f.writer, f.progress())).collect()
    }

    /// This instance's own writes not yet known resolved in every other local set (acknowledged and waiting to
    /// enter its feed, or in it and not yet past every follower's published frontier); `None` without a feed.
    pub fn unsettled(&self) -> Option<usize> {
        self.feed.as_ref().map(|f| f.lock().expect("feed lock").len())
    }

    /// Versions this instance dropped from bounded queues since it started: kept out of its feed (the store refused
    /// batches for long), in its feed but not kept for marking (a follower stayed behind for long), and own writes
    /// not queued for confirmation (the store could not confirm for long).
    pub fn dropped(&self) -> (u64, u64, u64) {
        let (unfed, unmarked) = self.feed.as_ref().map_or((0, 0), |f| {
            let f = f.lock().expect("feed lock");
            (f.unfed, f.unmarked)
        });
        (unfed, unmarked, self.own_writes.lock().expect("own writes").dropped)
    }

    /// Queues a version the store has just acknowledged for the feed ([`Middleware::keep_feeding`]), or else for
    /// its confirmation ([`Middleware::keep_confirming`]).
    fn own_stored(&self, copy: &Copy, record: &Record) {
        if let Some(feed) = &self.feed {
            feed.lock().expect("feed lock").stored(crate::feed::entry(copy, &record.meta));
        } else if S::CONFIRMS_STABILITY {
            let at = self.now_ms();
            self.own_writes.lock().expect("own writes").stored(copy, &record.meta, at);
        }
    }

    /// Makes the instance's own writes stable, for ever (run it as a task beside the instance; see [`OwnWrites`]):
    /// every few milliseconds, the writes acknowledged at least `confirm_after` ago are confirmed with the store,
    /// one request per distinct copy, a bounded number at once, and marked stable oldest first. A batch the store
    /// cannot confirm (another local set unreachable) is asked again after a pause.
    pub async fn keep_confirming(&self) {
        if !S::CONFIRMS_STABILITY || self.feed.is_some() {
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

    /// Keeps this instance's feed, for ever (run it as a task beside the instance; see [`crate::feed`]): announces
    /// the epoch, appends the acknowledged writes batch by batch (a batch the store refuses is appended again until
    /// it takes it), and reads the other local sets' frontiers, marking stable what every one of them resolved.
    pub async fn keep_feeding(&self) {
        let Some(feed) = &self.feed else { return };
        let ls = self.protocol.local_set;
        let mut announced: Option<Instant> = None;
        loop {
            // Only the lease holder announces: an instance that lost the lease (and so writes nothing) would
            // otherwise make the followers switch between its epoch and the holder's.
            let holds = self.lease.as_ref().is_none_or(|lease| self.check_lease(lease).is_ok());
            if holds && announced.is_none_or(|t| t.elapsed() >= EPOCH_EVERY) {
                let announcement = feed.lock().expect("feed lock").announcement();
                if self.store.frontier_put(ls, ls, announcement).await.is_ok() {
                    announced = Some(Instant::now());
                }
            }
            let (epoch, next) = {
                let mut feed = feed.lock().expect("feed lock");
                (feed.epoch, feed.next_batch(FEED_BATCH))
            };
            if let Some((number, batch)) = next {
                let (versions, bytes) = (batch.versions.len() as u64, batch.encode());
                while self.store.feed_append(ls, epoch, number, bytes.clone()).await.is_err() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                self.stats.feed_batches.fetch_add(1, Ordering::Relaxed);
                self.stats.feed_versions.fetch_add(versions, Ordering::Relaxed);
            }
            for reader in (0..self.protocol.local_sets as LocalSet).filter(|&r| r != ls) {
                let Ok(Some(frontier)) = self.store.frontier_get(reader, ls).await else { continue };
                let marked = {
                    let mut stable = self.stable.lock().expect("stable lock");
                    feed.lock().expect("feed lock").frontier(reader, frontier, &mut stable).len() as u64
                };
                self.stats.stabilized.fetch_add(marked, Ordering::Relaxed);
                self.stats.stable_by_feed.fetch_add(marked, Ordering::Relaxed);
            }
            tokio::time::sleep(FEED_EVERY).await;
        }
    }

    /// Follows every other local set's feed, for ever (run it as a task beside the instance; see [`crate::feed`]).
    pub async fn keep_following(&self) {
        futures_util::future::join_all(self.following.iter().map(|f| self.follow(f))).await;
    }

    /// Follows one feed: learns its epoch, reads its batches in order (a batch overtaken by a later one for long is
    /// read from every local set), resolves their versions many at a time, and publishes the frontier. A version
    /// missing for long is pulled, as a read does.
    async fn follow(&self, reader: &Mutex<FeedReader>) {
        let writer = reader.lock().expect("feed reader").writer;
        let mut state = Following::new(writer);
        let mut pause = Duration::from_millis(1);
        loop {
            self.learn_feed_end(reader, &mut state).await;
            let read = self.read_batches(reader, &mut state).await;
            let resolved = self.resolve_next(reader, &mut state).await;
            self.publish_frontier(reader, &mut state).await;
            if read || resolved {
                pause = Duration::from_millis(1);
            } else {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(FEED_EVERY * 2);
            }
        }
    }

    /// Asks the store, every [`EPOCH_EVERY`] (ten feed intervals while there is no epoch to follow), where the
    /// writer says its feed ends; on a new epoch, where this local set stood on it if it followed it before (a
    /// restart), dropping the previous epoch's entries.
    async fn learn_feed_end(&self, reader: &Mutex<FeedReader>, state: &mut Following) {
        let writer = state.writer;
        let following = reader.lock().expect("feed reader").wants().is_some();
        let every = if following { EPOCH_EVERY } else { FEED_EVERY * 10 };
        if state.asked.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        if let Ok(Some(announcement)) = self.store.frontier_get(writer, writer).await {
            state.feed_end = Some((announcement.epoch, announcement.batch));
            let follows = {
                let mut reader = reader.lock().expect("feed reader");
                reader.saw_end(announcement);
                reader.follows(announcement.epoch)
            };
            if !follows {
                if let Ok(own) = self.store.frontier_get(self.protocol.local_set, writer).await {
                    reader.lock().expect("feed reader").announced(announcement, own);
                    self.feed_entries.lock().expect("feed entries").retain(|v, _| v.ls != writer);
                }
            }
        }
        state.asked = Some(Instant::now());
    }

    /// Reads the next batches of the feed and hands their entries to reads. Returns whether it read any in order;
    /// a batch missing (overtaken by a later one, or announced and not arrived: the store may have dropped it)
    /// starts the clock after which batches are read from every local set.
    async fn read_batches(&self, reader: &Mutex<FeedReader>, state: &mut Following) -> bool {
        let Some((epoch, from)) = reader.lock().expect("feed reader").wants() else { return false };
        let everywhere = state.gap_since.is_some_and(|t| t.elapsed() >= FEED_GAP_PULL_AFTER);
        let Ok(rows) = self.store.feed_read(state.writer, epoch, from, FEED_READ, everywhere).await else {
            return false;
        };
        // A batch that cannot be decoded ends what is taken: the feed stops there, reads go on.
        let batches: Vec<(u64, Batch)> =
            rows.iter().map_while(|(n, b)| Batch::decode(b).ok().map(|b| (*n, b))).collect();
        let read = !batches.is_empty();
        {
            let mut entries = self.feed_entries.lock().expect("feed entries");
            for e in batches.iter().flat_map(|(_, b)| &b.versions) {
                entries.insert(e.version.clone(), e.requires.clone());
            }
        }
        let behind = !read && state.feed_end.is_some_and(|(e, end)| e == epoch && end > from);
        if reader.lock().expect("feed reader").batches(epoch, batches) || behind {
            state.gap_since.get_or_insert_with(Instant::now);
            false
        } else {
            state.gap_since = None;
            read
        }
    }

    /// Resolves the next versions of the feed against the local store. Returns whether it resolved any; a version
    /// that stays missing at the front of the feed is logged and pulled from another local set every
    /// [`FOLLOW_PULL_AFTER`].
    async fn resolve_next(&self, reader: &Mutex<FeedReader>, state: &mut Following) -> bool {
        let next = reader.lock().expect("feed reader").next();
        let Some((n, mut check)) = next else { return false };
        // A store error is no answer: the entries stay unresolved (the frontier must not pass them).
        let outcome = self.check(&mut check).await;
        let present = matches!(outcome, Ok(None));
        let missing = outcome.ok().flatten();
        let resolved = reader.lock().expect("feed reader").checked(n, present);
        if present {
            let mut entries = self.feed_entries.lock().expect("feed entries");
            for v in &resolved {
                entries.remove(v);
            }
            drop(entries);
            self.followed.notify_waiters();
            self.stats.followed.fetch_add(n as u64, Ordering::Relaxed);
            state.missing_since = None;
            return true;
        }
        self.stats.follow_missing.fetch_add(1, Ordering::Relaxed);
        let (Some(v), 1) = (missing, n) else { return false };
        match &state.missing_since {
            Some((m, since)) if *m == v && since.elapsed() >= FOLLOW_PULL_AFTER => {
                let position = reader.lock().expect("feed reader").frontier();
                tracing::warn!(
                    "following local set {}'s feed at {position:?}: {v} has not reached this local set for {:?}",
                    state.writer,
                    since.elapsed()
                );
                if S::PULLS && self.pull_after.is_some() {
                    let _ = self.store.pull(&v.copy(), v.seq).await;
                }
                state.missing_since = Some((v, Instant::now()));
            }
            Some((m, _)) if *m == v => {}
            _ => state.missing_since = Some((v, Instant::now())),
        }
        false
    }

    /// Publishes how far this local set resolved the feed, when that moved, at most every [`FEED_EVERY`].
    async fn publish_frontier(&self, reader: &Mutex<FeedReader>, state: &mut Following) {
        let frontier = reader.lock().expect("feed reader").frontier();
        let Some(f) = frontier.filter(|_| frontier != state.published && state.published_at.elapsed() >= FEED_EVERY)
        else {
            return;
        };
        if self.store.frontier_put(self.protocol.local_set, state.writer, f).await.is_ok() {
            (state.published, state.published_at) = (frontier, Instant::now());
        }
    }

    /// Runs `check` against the local store; on [`Check::Present`] marks what it checked resolved. Returns the
    /// version found missing, if one was.
    async fn check(&self, check: &mut Resolution) -> Result<Option<Vertex>, Error> {
        loop {
            let next = {
                let entries = self.feed_entries.lock().expect("feed entries");
                check.next_with(&self.marks.lock().expect("marks lock"), &|v: &Vertex| entries.get(v).cloned())
            };
            match next {
                Check::Fetch(copies) => check.fetched(self.fetch(&copies, false).await?),
                Check::Present => {
                    check.mark(&mut self.marks.lock().expect("marks lock"));
                    return Ok(None);
                }
                Check::Missing(missing) => return Ok(Some(missing)),
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
        if self.feed.is_some() {
            // The feed makes this instance's writes stable, and only versions every other local set has resolved
            // (which their instances fetched, so their write caches know those versions' clocks: see
            // `crate::feed`); a walk would mark versions no other instance has fetched.
            return;
        }
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

/// A feed epoch: different for every run of a writer (time and process), so that followers start over.
fn new_epoch() -> u64 {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (nanos, std::process::id(), INSTANCES.load(Ordering::Relaxed)).hash(&mut h);
    h.finish()
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
