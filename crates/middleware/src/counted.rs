//! What an instance asks of its store, counted by kind of request: a [`Store`] that forwards every request to the
//! store underneath and counts it ([`StoreRequests`]).
//!
//! The middleware's cost against the store alone is, above all, the store's extra work per client operation (on
//! Cassandra: statements, each a request to the node). Its own counters say what reads and writes did; these say
//! what the store was asked for, background work included (feeds, frontiers, leases), so that the requests per
//! client operation can be read from one run's report. One relaxed atomic addition per request.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::driver::{get_each, Lease, Store, StoreError};
use crate::feed::Frontier;
use crate::record::{Copy, Encoded, LocalSet, Part};

/// The kinds of store request, one per [`Store`] method; `KINDS[kind as usize]` is its name.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Get,
    GetMany,
    GetCopies,
    GetCopiesToWrite,
    Put,
    Cas,
    Stabilize,
    Pull,
    FeedAppend,
    FeedRead,
    FrontierPut,
    FrontierGet,
    Lease,
}

/// The names of the kinds of store request, in the order of the private `Kind` (the order
/// [`StoreRequests::by_kind`] gives them); each is one request to the store adapter (on Cassandra, one statement;
/// a `get_many` is one statement per local set and [`crate::cassandra::GET_MANY_KEYS`] keys among its copies, and a
/// store that cannot read many copies at once has its copies counted as `get`s instead).
pub const KINDS: [&str; 13] = [
    "get",
    "get_many",
    "get_copies",
    "get_copies_to_write",
    "put",
    "cas",
    "stabilize",
    "pull",
    "feed_append",
    "feed_read",
    "frontier_put",
    "frontier_get",
    "lease",
];

/// Requests made of the store since the instance started, by kind ([`KINDS`]).
#[derive(Debug, Default)]
pub struct StoreRequests([AtomicU64; KINDS.len()]);

impl StoreRequests {
    /// Every kind with its count, in the order of [`KINDS`].
    pub fn by_kind(&self) -> [(&'static str, u64); KINDS.len()] {
        std::array::from_fn(|i| (KINDS[i], self.0[i].load(Ordering::Relaxed)))
    }

    /// All requests.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

/// `S`, with its requests counted.
#[derive(Debug)]
pub(crate) struct Counted<S> {
    pub(crate) inner: S,
    pub(crate) requests: StoreRequests,
}

impl<S> Counted<S> {
    pub(crate) fn new(inner: S) -> Counted<S> {
        Counted { inner, requests: StoreRequests::default() }
    }

    /// Counts a request of `kind` and returns the request.
    fn counted<F>(&self, kind: Kind, request: F) -> F {
        self.requests.0[kind as usize].fetch_add(1, Ordering::Relaxed);
        request
    }
}

// Each method counts its kind and forwards; the constants are the inner store's.
impl<S: Store> Store for Counted<S> {
    fn get(&self, copy: &Copy, part: Part) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send {
        self.counted(Kind::Get, self.inner.get(copy, part))
    }

    const GETS_MANY: bool = S::GETS_MANY;

    async fn get_many(&self, copies: &[Copy], part: Part) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        if S::GETS_MANY {
            self.counted(Kind::GetMany, self.inner.get_many(copies, part)).await
        } else {
            get_each(self, copies, part).await
        }
    }

    fn get_copies(
        &self,
        key: &[u8],
        local_sets: usize,
        part: Part,
    ) -> impl Future<Output = Result<Vec<Option<Vec<u8>>>, StoreError>> + Send {
        self.counted(Kind::GetCopies, self.inner.get_copies(key, local_sets, part))
    }

    fn get_copies_to_write(
        &self,
        key: &[u8],
        local_sets: usize,
    ) -> impl Future<Output = Result<Vec<Option<Vec<u8>>>, StoreError>> + Send {
        self.counted(Kind::GetCopiesToWrite, self.inner.get_copies_to_write(key, local_sets))
    }

    fn put(&self, copy: &Copy, seq: u64, record: Encoded) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.counted(Kind::Put, self.inner.put(copy, seq, record))
    }

    fn cas(
        &self,
        copy: &Copy,
        expect: Option<u64>,
        seq: u64,
        record: Encoded,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        self.counted(Kind::Cas, self.inner.cas(copy, expect, seq, record))
    }

    const CONFIRMS_STABILITY: bool = S::CONFIRMS_STABILITY;

    fn stabilize(&self, copy: &Copy, seq: u64) -> impl Future<Output = Result<bool, StoreError>> + Send {
        self.counted(Kind::Stabilize, self.inner.stabilize(copy, seq))
    }

    const PULLS: bool = S::PULLS;

    fn pull(&self, copy: &Copy, seq: u64) -> impl Future<Output = Result<bool, StoreError>> + Send {
        self.counted(Kind::Pull, self.inner.pull(copy, seq))
    }

    const FEEDS: bool = S::FEEDS;

    fn feed_append(
        &self,
        ls: LocalSet,
        epoch: u64,
        number: u64,
        batch: Vec<u8>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.counted(Kind::FeedAppend, self.inner.feed_append(ls, epoch, number, batch))
    }

    fn feed_read(
        &self,
        ls: LocalSet,
        epoch: u64,
        from: u64,
        limit: usize,
        everywhere: bool,
    ) -> impl Future<Output = Result<Vec<(u64, Vec<u8>)>, StoreError>> + Send {
        self.counted(Kind::FeedRead, self.inner.feed_read(ls, epoch, from, limit, everywhere))
    }

    fn frontier_put(
        &self,
        reader: LocalSet,
        writer: LocalSet,
        frontier: Frontier,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        self.counted(Kind::FrontierPut, self.inner.frontier_put(reader, writer, frontier))
    }

    fn frontier_get(
        &self,
        reader: LocalSet,
        writer: LocalSet,
    ) -> impl Future<Output = Result<Option<Frontier>, StoreError>> + Send {
        self.counted(Kind::FrontierGet, self.inner.frontier_get(reader, writer))
    }

    fn lease(
        &self,
        ls: LocalSet,
        owner: &str,
        term: Duration,
    ) -> impl Future<Output = Result<Lease, StoreError>> + Send {
        self.counted(Kind::Lease, self.inner.lease(ls, owner, term))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryCluster;

    #[tokio::test]
    async fn each_request_is_counted_under_its_own_kind_and_forwarded() {
        let store = Counted::new(MemoryCluster::new(2, Duration::ZERO).store(0));
        let copy = Copy { key: b"k".to_vec(), ls: 0 };
        assert_eq!(store.get(&copy, Part::Meta).await.unwrap(), None);
        // The memory store reads many copies one by one: each is counted as a `get`.
        assert_eq!(store.get_many(&[copy.clone(), copy.clone()], Part::Head).await.unwrap(), [None, None]);
        assert!(store.get_copies(b"k", 2, Part::Head).await.unwrap().iter().all(Option::is_none));
        store.feed_append(0, 1, 0, vec![1, 2]).await.unwrap();
        assert_eq!(store.feed_read(0, 1, 0, 8, false).await.unwrap(), vec![(0, vec![1, 2])], "forwarded");
        assert_eq!(store.feed_read(0, 1, 1, 8, false).await.unwrap(), vec![]);
        let counts: Vec<(&str, u64)> = store.requests.by_kind().into_iter().filter(|&(_, n)| n > 0).collect();
        assert_eq!(counts, [("get", 3), ("get_copies", 1), ("feed_append", 1), ("feed_read", 2)]);
        assert_eq!(store.requests.total(), 7);
    }
}
