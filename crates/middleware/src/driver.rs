//! The middleware over a real store: [`Middleware`] runs the sans-I/O operations of [`crate::op`] against a
//! [`Store`], reading the copies each step asks for in parallel, and waits (up to a deadline) for a read whose
//! dependencies have not arrived yet.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::future::try_join_all;

use crate::op::{Input, Marks, Protocol, ReadOp, ReadOutcome, Session, Step, WriteOp};
use crate::record::{Copy, DecodeError, LocalSet, Record, Vertex};

/// An eventually consistent store with per-copy compare-and-swap, as seen from one local set.
///
/// `get` reads the local set's own cluster (Cassandra: `LOCAL_ONE`); `cas` is linearizable among the local set's
/// middleware instances (Cassandra: a `LOCAL_SERIAL` lightweight transaction) and needs nothing from other local
/// sets. The store replicates every copy to every local set, last writer wins.
pub trait Store: Send + Sync {
    /// The copy's stored record, if any.
    fn get(&self, copy: &Copy) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send;

    /// Every copy of `key` (local sets `0..local_sets`, in order). Stores that keep a key's copies together
    /// answer with one read; the default reads them one by one, in parallel.
    fn get_copies(
        &self,
        key: &[u8],
        local_sets: usize,
    ) -> impl Future<Output = Result<Vec<Option<Vec<u8>>>, StoreError>> + Send {
        async move {
            let copies: Vec<Copy> = (0..local_sets as LocalSet).map(|ls| Copy { key: key.to_vec(), ls }).collect();
            try_join_all(copies.iter().map(|c| self.get(c))).await
        }
    }

    /// Stores `data` (version `seq` of the copy) if the stored version is `expect` (`None`: nothing stored yet).
    /// Returns whether it applied.
    fn cas(
        &self,
        copy: &Copy,
        expect: Option<u64>,
        seq: u64,
        data: Vec<u8>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;
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
    /// How long a read waits for a missing dependency before failing; zero fails at once (the paper's behaviour).
    pub resolve_wait: Duration,
}

impl Config {
    /// The defaults for local set `local_set` of `local_sets`: `k = 1`, 8 versions retained, 100,000 marks, and
    /// reads wait up to 2 s for missing dependencies.
    pub fn new(local_set: LocalSet, local_sets: usize) -> Config {
        Config {
            local_set,
            local_sets,
            levels: 1,
            retain: 8,
            mark_capacity: 100_000,
            resolve_wait: Duration::from_secs(2),
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
    /// Compare-and-swaps lost to another instance.
    pub conflicts: AtomicU64,
    /// Bytes of records written (value and metadata), summed.
    pub written_bytes: AtomicU64,
    /// Bytes of written values alone, summed.
    pub written_value_bytes: AtomicU64,
}

/// One middleware instance of a local set over a store.
pub struct Middleware<S> {
    store: S,
    protocol: Protocol,
    resolve_wait: Duration,
    marks: Mutex<Marks>,
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
            marks: Mutex::new(Marks::new(config.mark_capacity)),
            stats: Stats::default(),
        }
    }

    /// The store underneath.
    pub fn store(&self) -> &S {
        &self.store
    }

    async fn fetch(&self, copies: &[Copy]) -> Result<Vec<Option<Record>>, Error> {
        let n = self.protocol.local_sets;
        let whole_key = copies.len() == n
            && copies.iter().zip(0..).all(|(c, ls): (&Copy, LocalSet)| c.ls == ls && c.key == copies[0].key);
        let raw = if whole_key {
            self.store.get_copies(&copies[0].key, n).await?
        } else {
            try_join_all(copies.iter().map(|c| self.store.get(c))).await?
        };
        Ok(raw.into_iter().map(|r| r.map(|b| Record::decode(&b)).transpose()).collect::<Result<_, _>>()?)
    }

    /// Reads `key` for `session`: the causally latest version whose dependencies are all present locally, or
    /// `None` if the key was never written. Waits up to `resolve_wait` for missing dependencies.
    pub async fn read(&self, session: &mut Session, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let started = Instant::now();
        let mut pause = Duration::from_millis(1);
        loop {
            let (mut op, mut step) = ReadOp::start(&self.protocol, key);
            let outcome = loop {
                match step {
                    Step::Fetch(copies) => {
                        let input = Input::Fetched(self.fetch(&copies).await?);
                        let mut marks = self.marks.lock().expect("marks lock");
                        step = op.resume(input, &mut marks, session);
                    }
                    Step::Done(outcome) => break outcome,
                    Step::Cas { .. } => unreachable!("a read only fetches"),
                }
            };
            match outcome {
                ReadOutcome::Unresolved { version, missing } => {
                    self.stats.unresolved.fetch_add(1, Ordering::Relaxed);
                    let waited = started.elapsed();
                    if waited + pause > self.resolve_wait {
                        self.stats.failed_reads.fetch_add(1, Ordering::Relaxed);
                        return Err(Error::Unresolved { version, missing, local_set: self.protocol.local_set, waited });
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_millis(50));
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
        let (mut op, mut step) = WriteOp::start(&self.protocol, session, key, value);
        loop {
            let input = match step {
                Step::Fetch(copies) => Input::Fetched(self.fetch(&copies).await?),
                Step::Cas { copy, expect, record } => {
                    let data = record.encode();
                    let len = data.len() as u64;
                    let applied = self.store.cas(&copy, expect, record.seq(), data).await?;
                    if applied {
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
            step = op.resume(&self.protocol, input, session);
        }
    }
}
