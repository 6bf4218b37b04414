//! An in-process store with one map per local set and delayed replication between them: the middleware's
//! reference store for tests and local experiments (not a database: nothing is persisted).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::driver::{Lease, Part, Store, StoreError};
use crate::feed::Frontier;
use crate::record::{Copy, Encoded, LocalSet};

type Copies = HashMap<Copy, (u64, Encoded)>;

/// An update held back by [`MemoryCluster::pause`]: destination, copy, version, record.
pub type Held = (LocalSet, Copy, u64, Encoded);

/// Every local set's store; replication from one to another takes `delay`, and can be paused.
#[derive(Clone)]
pub struct MemoryCluster {
    sets: Arc<Vec<Mutex<Copies>>>,
    delay: Duration,
    paused: Arc<Mutex<Option<Vec<Held>>>>,
    /// Writer leases: local set → holder and end.
    leases: Arc<Mutex<HashMap<LocalSet, (String, Instant)>>>,
    /// Feed batches and frontier rows, shared by every local set: each is visible in another local set than the
    /// writer's `delay` after it was written, and not while replication is paused.
    feeds: Arc<Mutex<Feeds>>,
    /// Local sets whose record reads fail (bit `ls`), to test what errors do.
    failing: Arc<std::sync::atomic::AtomicU64>,
    /// Local sets that read no feed batches (bit `ls`), as if none had arrived, to test waiting for a follower.
    holding_feeds: Arc<std::sync::atomic::AtomicU64>,
}

/// Feed batches ((writer, epoch, number) → written at, batch) and frontier rows ((reader, writer) → every put, when).
#[derive(Default)]
struct Feeds {
    batches: std::collections::BTreeMap<(LocalSet, u64, u64), (Instant, Vec<u8>)>,
    frontiers: HashMap<(LocalSet, LocalSet), Vec<(Instant, Frontier)>>,
    /// Since when replication is paused, if it is.
    paused_at: Option<Instant>,
}

/// One local set's view of a [`MemoryCluster`].
#[derive(Clone)]
pub struct MemoryStore {
    cluster: MemoryCluster,
    ls: LocalSet,
}

impl MemoryCluster {
    /// `local_sets` empty stores replicating to each other after `delay`.
    pub fn new(local_sets: usize, delay: Duration) -> MemoryCluster {
        MemoryCluster {
            sets: Arc::new((0..local_sets).map(|_| Mutex::new(HashMap::new())).collect()),
            delay,
            paused: Arc::new(Mutex::new(None)),
            leases: Arc::new(Mutex::new(HashMap::new())),
            feeds: Arc::new(Mutex::new(Feeds::default())),
            failing: Arc::new(std::sync::atomic::AtomicU64::new(0)),
            holding_feeds: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        }
    }

    /// Whether something local set `from` wrote at `at` is visible in local set `to` now.
    fn visible(&self, feeds: &Feeds, from: LocalSet, to: LocalSet, at: Instant) -> bool {
        from == to || (at + self.delay <= Instant::now() && feeds.paused_at.is_none_or(|p| at + self.delay < p))
    }

    /// Local set `ls`'s store.
    pub fn store(&self, ls: LocalSet) -> MemoryStore {
        assert!((ls as usize) < self.sets.len(), "local set {ls} of {}", self.sets.len());
        MemoryStore { cluster: self.clone(), ls }
    }

    /// Makes local set `ls`'s record reads fail (`true`) or work again.
    pub fn fail_reads(&self, ls: LocalSet, fail: bool) {
        set_bit(&self.failing, ls, fail);
    }

    /// Makes local set `ls` read no feed batches (`true`: as if none had arrived since) or read them again.
    pub fn hold_feeds(&self, ls: LocalSet, hold: bool) {
        set_bit(&self.holding_feeds, ls, hold);
    }

    /// Holds back replication until [`MemoryCluster::resume`] (a network partition between every local set).
    pub fn pause(&self) {
        self.paused.lock().unwrap().get_or_insert_with(Vec::new);
        self.feeds.lock().unwrap().paused_at.get_or_insert_with(Instant::now);
    }

    /// Delivers what was held back and replicates normally again.
    pub fn resume(&self) {
        let held = self.paused.lock().unwrap().take().unwrap_or_default();
        self.feeds.lock().unwrap().paused_at = None;
        self.deliver(held);
    }

    /// While paused: the updates held back so far, removed from the queue (to deliver selectively).
    pub fn take_held(&self) -> Vec<Held> {
        self.paused.lock().unwrap().as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Applies held updates at their destinations, in the order given.
    pub fn deliver(&self, held: Vec<Held>) {
        for (to, copy, seq, data) in held {
            self.apply(to, copy, seq, data);
        }
    }

    fn apply(&self, to: LocalSet, copy: Copy, seq: u64, data: Encoded) {
        let mut set = self.sets[to as usize].lock().unwrap();
        // Last writer wins: an older version arriving late is ignored.
        if set.get(&copy).is_none_or(|(s, _)| *s < seq) {
            set.insert(copy, (seq, data));
        }
    }

    /// Holds `update` back while paused; otherwise gives it back to be applied.
    fn hold(&self, update: Held) -> Option<Held> {
        match self.paused.lock().unwrap().as_mut() {
            Some(held) => {
                held.push(update);
                None
            }
            None => Some(update),
        }
    }

    fn replicate(&self, from: LocalSet, copy: Copy, seq: u64, data: Encoded) {
        for to in (0..self.sets.len() as LocalSet).filter(|&to| to != from) {
            // Checked when sent and again when due: a pause in between holds the update too.
            let Some(update) = self.hold((to, copy.clone(), seq, data.clone())) else { continue };
            let cluster = self.clone();
            tokio::spawn(async move {
                tokio::time::sleep(cluster.delay).await;
                if let Some((to, copy, seq, data)) = cluster.hold(update) {
                    cluster.apply(to, copy, seq, data);
                }
            });
        }
    }
}

fn set_bit(mask: &std::sync::atomic::AtomicU64, ls: LocalSet, on: bool) {
    use std::sync::atomic::Ordering::Relaxed;
    match on {
        true => mask.fetch_or(1 << ls, Relaxed),
        false => mask.fetch_and(!(1 << ls), Relaxed),
    };
}

impl Store for MemoryStore {
    async fn get(&self, copy: &Copy, part: Part) -> Result<Option<Vec<u8>>, StoreError> {
        if self.cluster.failing.load(std::sync::atomic::Ordering::Relaxed) & (1 << self.ls) != 0 {
            return Err(StoreError(format!("local set {}: reads fail (MemoryCluster::fail_reads)", self.ls)));
        }
        let set = self.cluster.sets[self.ls as usize].lock().unwrap();
        Ok(set.get(copy).map(|(_, d)| match part {
            Part::Head => d.head.clone(),
            Part::Meta => d.meta.clone(),
        }))
    }

    async fn cas(&self, copy: &Copy, expect: Option<u64>, seq: u64, data: Encoded) -> Result<bool, StoreError> {
        {
            let mut set = self.cluster.sets[self.ls as usize].lock().unwrap();
            if set.get(copy).map(|(s, _)| *s) != expect {
                return Ok(false);
            }
            set.insert(copy.clone(), (seq, data.clone()));
        }
        self.cluster.replicate(self.ls, copy.clone(), seq, data);
        Ok(true)
    }

    const CONFIRMS_STABILITY: bool = true;

    async fn stabilize(&self, copy: &Copy, seq: u64) -> Result<bool, StoreError> {
        Ok(self.cluster.sets.iter().all(|set| set.lock().unwrap().get(copy).is_some_and(|(s, _)| *s >= seq)))
    }

    const PULLS: bool = true;

    /// Copies the newest version any local set holds into this one (what a read at `ALL` with read repair does);
    /// nothing while [`MemoryCluster::pause`] partitions the local sets.
    async fn pull(&self, copy: &Copy, seq: u64) -> Result<bool, StoreError> {
        if self.cluster.paused.lock().unwrap().is_some() {
            return Ok(false);
        }
        let newest =
            (self.cluster.sets.iter()).filter_map(|set| set.lock().unwrap().get(copy).cloned()).max_by_key(|(s, _)| *s);
        let Some((newest, data)) = newest.filter(|(s, _)| *s >= seq) else { return Ok(false) };
        self.cluster.apply(self.ls, copy.clone(), newest, data);
        Ok(true)
    }

    async fn put(&self, copy: &Copy, seq: u64, data: Encoded) -> Result<(), StoreError> {
        self.cluster.apply(self.ls, copy.clone(), seq, data.clone());
        self.cluster.replicate(self.ls, copy.clone(), seq, data);
        Ok(())
    }

    const FEEDS: bool = true;

    async fn feed_append(&self, ls: LocalSet, epoch: u64, number: u64, batch: Vec<u8>) -> Result<(), StoreError> {
        let mut feeds = self.cluster.feeds.lock().unwrap();
        feeds.batches.entry((ls, epoch, number)).or_insert((Instant::now(), batch));
        Ok(())
    }

    async fn feed_read(
        &self,
        ls: LocalSet,
        epoch: u64,
        from: u64,
        limit: usize,
        everywhere: bool,
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        if self.cluster.holding_feeds.load(std::sync::atomic::Ordering::Relaxed) & (1 << self.ls) != 0 {
            return Ok(Vec::new());
        }
        let feeds = self.cluster.feeds.lock().unwrap();
        let everywhere = everywhere && feeds.paused_at.is_none();
        Ok((feeds.batches.range((ls, epoch, from)..=(ls, epoch, u64::MAX)))
            .filter(|(_, (at, _))| everywhere || self.cluster.visible(&feeds, ls, self.ls, *at))
            .take(limit)
            .map(|((_, _, n), (_, b))| (*n, b.clone()))
            .collect())
    }

    async fn frontier_put(&self, reader: LocalSet, writer: LocalSet, frontier: Frontier) -> Result<(), StoreError> {
        let mut feeds = self.cluster.feeds.lock().unwrap();
        let puts = feeds.frontiers.entry((reader, writer)).or_default();
        puts.push((Instant::now(), frontier));
        // Older puts than the newest one every local set sees are never read again.
        let delay = self.cluster.delay;
        if let Some(seen) = puts.iter().rposition(|(at, _)| *at + delay <= Instant::now()) {
            puts.drain(..seen);
        }
        Ok(())
    }

    async fn frontier_get(&self, reader: LocalSet, writer: LocalSet) -> Result<Option<Frontier>, StoreError> {
        let feeds = self.cluster.feeds.lock().unwrap();
        let puts = feeds.frontiers.get(&(reader, writer));
        Ok(puts
            .and_then(|p| p.iter().rev().find(|(at, _)| self.cluster.visible(&feeds, reader, self.ls, *at)))
            .map(|(_, f)| *f))
    }

    async fn lease(&self, ls: LocalSet, owner: &str, term: Duration) -> Result<Lease, StoreError> {
        let mut leases = self.cluster.leases.lock().unwrap();
        let now = Instant::now();
        if term.is_zero() {
            if leases.get(&ls).is_some_and(|(holder, _)| holder == owner) {
                leases.remove(&ls);
            }
            return Ok(Lease::Held);
        }
        match leases.get(&ls) {
            Some((holder, until)) if holder != owner && *until > now => Ok(Lease::HeldBy(holder.clone())),
            _ => {
                leases.insert(ls, (owner.to_owned(), now + term));
                Ok(Lease::Held)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{Config, Error, Middleware};
    use crate::op::Session;

    fn pair(cluster: &MemoryCluster, wait: Duration) -> (Middleware<MemoryStore>, Middleware<MemoryStore>) {
        let pull_after = Some(Duration::from_millis(20));
        let cfg = |ls| Config { resolve_wait: wait, pull_after, ..Config::new(ls, 2) };
        (Middleware::new(cluster.store(0), &cfg(0)), Middleware::new(cluster.store(1), &cfg(1)))
    }

    /// One session writes `first`, then `second` (which depends on it), with replication held back; only the
    /// second is delivered. Returns the held first write.
    async fn second_arrives_first(
        cluster: &MemoryCluster,
        writer: &Middleware<MemoryStore>,
        first: (&[u8], &[u8]),
        second: (&[u8], &[u8]),
    ) -> Vec<Held> {
        let mut session = Session::new();
        cluster.pause();
        writer.write(&mut session, first.0, first.1.to_vec()).await.unwrap();
        let held = cluster.take_held();
        writer.write(&mut session, second.0, second.1.to_vec()).await.unwrap();
        cluster.deliver(cluster.take_held());
        held
    }

    #[tokio::test]
    async fn a_read_waits_for_a_missing_dependency_then_answers() {
        let cluster = MemoryCluster::new(2, Duration::ZERO);
        let (a, b) = pair(&cluster, Duration::from_secs(5));
        let held_photo = second_arrives_first(&cluster, &a, (b"photo", b"p1"), (b"album", b"has p1")).await;
        let reader = tokio::spawn(async move {
            let mut bob = Session::new();
            let album = b.read(&mut bob, b"album").await.unwrap();
            let photo = b.read(&mut bob, b"photo").await.unwrap();
            (album, photo, b)
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!reader.is_finished(), "the album must wait for the photo it depends on");
        cluster.deliver(held_photo);
        let (album, photo, b) = reader.await.unwrap();
        assert_eq!((album.as_deref(), photo.as_deref()), (Some(&b"has p1"[..]), Some(&b"p1"[..])));
        assert!(b.stats.unresolved.load(std::sync::atomic::Ordering::Relaxed) > 0);
        assert!(b.stats.pulls_failed.load(std::sync::atomic::Ordering::Relaxed) > 0, "partitioned: no pull works");
    }

    /// `resolve_wait` bounds a resolution that is slow without missing anything (here: any that reads a meta,
    /// with a one-microsecond bound); zero bounds nothing but a missing dependency.
    #[tokio::test]
    async fn a_resolution_longer_than_resolve_wait_fails_with_a_clear_error() {
        let cluster = MemoryCluster::new(2, Duration::ZERO);
        let writer = Middleware::new(cluster.store(0), &Config::new(0, 2));
        let mut alice = Session::new();
        for key in [b"x", b"y"] {
            writer.write(&mut alice, key, b"v".to_vec()).await.unwrap(); // y depends on x
        }
        for key in [b"x", b"y"] {
            let copy = Copy { key: key.to_vec(), ls: 0 };
            while cluster.store(1).get(&copy, Part::Head).await.unwrap().is_none() {
                tokio::time::sleep(Duration::from_millis(1)).await; // replication's tasks
            }
        }
        for (wait, resolves) in [(Duration::from_micros(1), false), (Duration::ZERO, true)] {
            let reader = Middleware::new(cluster.store(1), &Config { resolve_wait: wait, ..Config::new(1, 2) });
            let read = reader.read(&mut Session::new(), b"y").await;
            match resolves {
                true => assert_eq!(read.unwrap().as_deref(), Some(&b"v"[..])),
                false => {
                    let err = read.unwrap_err();
                    assert!(matches!(err, Error::Unfinished { .. }), "{err}");
                    assert!(err.to_string().contains("y@0.1") && err.to_string().contains("resolve_wait"), "{err}");
                }
            }
        }
        // A version this local set wrote needs no resolution: within any bound.
        let own =
            Middleware::new(cluster.store(0), &Config { resolve_wait: Duration::from_micros(1), ..Config::new(0, 2) });
        assert_eq!(own.read(&mut Session::new(), b"y").await.unwrap().as_deref(), Some(&b"v"[..]));
    }

    /// A dependency the store's replication lost (Cassandra drops a mutation that waited past its timeout, and
    /// hint replay is slow): the read pulls it from the local set that wrote it, instead of failing after
    /// `resolve_wait`.
    #[tokio::test]
    async fn a_read_pulls_a_dependency_replication_lost_and_answers() {
        for pull_after in [Some(Duration::from_millis(20)), None] {
            let cluster = MemoryCluster::new(2, Duration::ZERO);
            let cfg = |ls| Config { resolve_wait: Duration::from_millis(500), pull_after, ..Config::new(ls, 2) };
            let (a, b) = (Middleware::new(cluster.store(0), &cfg(0)), Middleware::new(cluster.store(1), &cfg(1)));
            let lost = second_arrives_first(&cluster, &a, (b"photo", b"p1"), (b"album", b"has p1")).await;
            cluster.resume(); // the link is up again; the photo's update stays lost
            let mut bob = Session::new();
            let album = b.read(&mut bob, b"album").await;
            let pulled = b.stats.pulled.load(std::sync::atomic::Ordering::Relaxed);
            match pull_after {
                Some(_) => {
                    assert_eq!((album.unwrap().as_deref(), pulled), (Some(&b"has p1"[..]), 1));
                    assert_eq!(b.read(&mut bob, b"photo").await.unwrap().as_deref(), Some(&b"p1"[..]));
                }
                None => assert!(matches!(album, Err(Error::Unresolved { .. })) && pulled == 0, "{album:?}"),
            }
            drop(lost);
        }
    }

    #[tokio::test]
    async fn after_the_deadline_the_read_fails_with_a_clear_error() {
        let cluster = MemoryCluster::new(2, Duration::ZERO);
        let (a, b) = pair(&cluster, Duration::from_millis(30));
        let held = second_arrives_first(&cluster, &a, (b"x", b"1"), (b"y", b"2")).await;
        let err = b.read(&mut Session::new(), b"y").await.unwrap_err();
        assert!(matches!(err, Error::Unresolved { .. }));
        let msg = err.to_string();
        assert!(msg.contains("x@0.1") && msg.contains("resolve_wait"), "{msg}");
        drop(held);
    }

    /// Eight sessions write one key of local set 0 twenty times each, at once; every write must get its own
    /// version.
    async fn hammer_one_key(cluster: &MemoryCluster, a: std::sync::Arc<Middleware<MemoryStore>>) {
        let mut tasks = Vec::new();
        for w in 0..8u8 {
            let a = a.clone();
            tasks.push(tokio::spawn(async move {
                let mut s = Session::new();
                for i in 0..20u8 {
                    a.write(&mut s, b"hot", vec![w, i]).await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let stored = cluster.store(0).get(&Copy { key: b"hot".to_vec(), ls: 0 }, Part::Meta).await.unwrap().unwrap();
        assert_eq!(
            <crate::record::Meta as crate::record::RecordPart>::decode(&stored).unwrap().seq(),
            160,
            "every write got its own version"
        );
    }

    #[tokio::test]
    async fn concurrent_writers_of_one_local_set_lose_nothing_of_the_graph() {
        let cluster = MemoryCluster::new(2, Duration::from_millis(1));
        let a = std::sync::Arc::new(Middleware::new(cluster.store(0), &Config::new(0, 2)));
        hammer_one_key(&cluster, a).await;
    }

    #[tokio::test]
    async fn exclusive_writers_order_a_hot_key_without_compare_and_swap() {
        let cluster = MemoryCluster::new(2, Duration::from_millis(1));
        let cfg = Config { writers: crate::Writers::Exclusive, ..Config::new(0, 2) };
        let a = std::sync::Arc::new(Middleware::new(cluster.store(0), &cfg));
        let err = a.write(&mut Session::new(), b"hot", vec![0]).await.unwrap_err();
        assert!(matches!(err, Error::NoLease { .. }), "no write before the lease is taken: {err}");
        a.take_lease().await.unwrap();
        hammer_one_key(&cluster, a.clone()).await;
        assert_eq!(a.stats.conflicts.load(std::sync::atomic::Ordering::Relaxed), 0);
        assert_eq!(a.stats.cached_writes.load(std::sync::atomic::Ordering::Relaxed), 159, "all but the first");
    }

    #[tokio::test]
    async fn the_writer_lease_fences_a_second_instance_until_the_first_gives_it_up() {
        let cluster = MemoryCluster::new(2, Duration::ZERO);
        let cfg =
            Config { writers: crate::Writers::Exclusive, lease_term: Duration::from_secs(3), ..Config::new(1, 2) };
        let first = std::sync::Arc::new(Middleware::new(cluster.store(1), &cfg));
        first.take_lease().await.unwrap();
        let keeper = first.clone();
        let renewing = tokio::spawn(async move { keeper.keep_lease().await });
        first.write(&mut Session::new(), b"k", b"1".to_vec()).await.unwrap();
        let second = Middleware::new(cluster.store(1), &cfg);
        let started = std::time::Instant::now();
        let err = second.take_lease().await.unwrap_err();
        assert!(started.elapsed() >= Duration::from_secs(4), "it waited a term (and a second) for a lapse");
        let msg = err.to_string();
        assert!(msg.contains("local set 1's writer lease") && msg.contains("held by local set 1 instance"), "{msg}");
        assert!(matches!(second.write(&mut Session::new(), b"k", b"2".to_vec()).await, Err(Error::NoLease { .. })));
        // The renewed lease outlived its first term; the first now gives it up (as `causet middleware` does when
        // it stops): it refuses writes from then on, and the second takes the lease at once.
        first.write(&mut Session::new(), b"k", b"1b".to_vec()).await.unwrap();
        renewing.abort();
        first.release_lease().await.unwrap();
        assert!(matches!(first.write(&mut Session::new(), b"k", b"3".to_vec()).await, Err(Error::NoLease { .. })));
        let started = std::time::Instant::now();
        second.take_lease().await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(1));
        second.write(&mut Session::new(), b"k", b"2".to_vec()).await.unwrap();
        assert_eq!(second.read(&mut Session::new(), b"k").await.unwrap().as_deref(), Some(&b"2"[..]));
    }

    /// Two instances of the only local set, exclusive writers with a lease of three seconds (the shortest).
    fn two_exclusive_instances_of_one_local_set() -> (Middleware<MemoryStore>, Middleware<MemoryStore>) {
        let cluster = MemoryCluster::new(1, Duration::ZERO);
        let cfg =
            Config { writers: crate::Writers::Exclusive, lease_term: Duration::from_secs(3), ..Config::new(0, 1) };
        (Middleware::new(cluster.store(0), &cfg), Middleware::new(cluster.store(0), &cfg))
    }

    #[tokio::test]
    async fn a_lease_that_is_not_renewed_lapses_and_another_instance_takes_it() {
        let (first, second) = two_exclusive_instances_of_one_local_set();
        let started = std::time::Instant::now();
        first.take_lease().await.unwrap();
        first.write(&mut Session::new(), b"k", b"1".to_vec()).await.unwrap();
        // Nobody renews: the holder stops writing when a third of the term is left, before the store lets the
        // lease go, so its writes and the next holder's never overlap.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        assert!(matches!(first.write(&mut Session::new(), b"k", b"2".to_vec()).await, Err(Error::NoLease { .. })));
        second.take_lease().await.unwrap();
        assert!(started.elapsed() >= Duration::from_secs(3), "the lease lapsed at its end, not before");
        second.write(&mut Session::new(), b"k", b"3".to_vec()).await.unwrap();
        // The first, renewing now, is told who holds the lease.
        assert!(matches!(first.renew_lease().await.unwrap(), crate::Lease::HeldBy(h) if h.contains("local set 0")));
    }

    /// Found 2026-12-03 by reading the read cache's soundness argument: it rests on the instance being its copies'
    /// only writer, but an instance whose lease lapsed went on answering reads from its read cache. Another instance
    /// takes the lease and writes `k`, then `j`; a session at the first reads `j`, and must then read that `k`, not
    /// the one the first cached.
    #[tokio::test]
    async fn an_instance_whose_lease_lapsed_answers_nothing_from_its_read_cache() {
        let (first, second) = two_exclusive_instances_of_one_local_set();
        first.take_lease().await.unwrap();
        first.write(&mut Session::new(), b"k", b"1".to_vec()).await.unwrap();
        // Nobody renews the first's lease; the second takes it when it lapses, and the first's read just before
        // fills its read cache with `k` = 1.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        second.take_lease().await.unwrap();
        assert_eq!(first.read(&mut Session::new(), b"k").await.unwrap().as_deref(), Some(&b"1"[..]));
        let mut writer = Session::new();
        second.write(&mut writer, b"k", b"3".to_vec()).await.unwrap();
        second.write(&mut writer, b"j", b"x".to_vec()).await.unwrap();
        let mut reader = Session::new();
        assert_eq!(first.read(&mut reader, b"j").await.unwrap().as_deref(), Some(&b"x"[..]));
        assert_eq!(first.read(&mut reader, b"k").await.unwrap().as_deref(), Some(&b"3"[..]), "j's past has k = 3");
    }

    /// Found 2026-11-30 in the benchmark (both proxies stopped answering): a read took the read cache's lock and then
    /// the marks', while fills and writes take the marks' first. Many sessions reading and writing a few keys at
    /// once on several threads, with the followers running, must all finish.
    #[test]
    fn concurrent_reads_and_writes_with_the_read_cache_never_deadlock() {
        // On a thread of its own, so that a deadlock (which blocks the runtime's threads) fails the test in time.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
            let hits = rt.block_on(async {
                let cluster = MemoryCluster::new(2, Duration::from_millis(1));
                let cfg = |ls| Config { writers: crate::Writers::Exclusive, ..Config::new(ls, 2) };
                let instances: Vec<std::sync::Arc<Middleware<MemoryStore>>> =
                    (0..2).map(|ls| std::sync::Arc::new(Middleware::new(cluster.store(ls), &cfg(ls)))).collect();
                for m in &instances {
                    m.take_lease().await.unwrap();
                    let m = m.clone();
                    tokio::spawn(async move { m.maintain().await });
                }
                let mut sessions = Vec::new();
                for s in 0..32u32 {
                    let m = instances[s as usize % 2].clone();
                    sessions.push(tokio::spawn(async move {
                        let mut session = Session::new();
                        for i in 0..3000u32 {
                            let key = format!("k{}", (i * 7 + s) % 5).into_bytes();
                            if (i + s) % 4 == 0 {
                                m.write(&mut session, &key, i.to_be_bytes().to_vec()).await.unwrap();
                            } else {
                                m.read(&mut session, &key).await.unwrap();
                            }
                        }
                    }));
                }
                futures_util::future::try_join_all(sessions).await.unwrap();
                let hits = instances.iter().map(|m| m.stats.read_cache_hits.load(std::sync::atomic::Ordering::Relaxed));
                hits.sum::<u64>()
            });
            let _ = done.send(hits);
        });
        let hits = finished.recv_timeout(Duration::from_secs(60)).expect("every session finished within 60 s");
        assert!(hits > 0, "the read cache answered nothing");
    }

    #[tokio::test]
    async fn an_exclusive_writer_answers_writes_from_its_cache_and_ranks_them_above_what_its_sessions_read() {
        use std::sync::atomic::Ordering::Relaxed;
        let cluster = MemoryCluster::new(2, Duration::ZERO);
        // No read cache: nothing follows the feeds here, so b's read cache would answer b1 (legitimately: a2 is not
        // resolved at b) where this test wants the store's newest.
        let cfg =
            |ls| Config { writers: crate::Writers::Exclusive, read_cache_ttl: Duration::ZERO, ..Config::new(ls, 2) };
        let (a, b) = (Middleware::new(cluster.store(0), &cfg(0)), Middleware::new(cluster.store(1), &cfg(1)));
        a.take_lease().await.unwrap();
        b.take_lease().await.unwrap();
        cluster.pause();
        b.write(&mut Session::new(), b"x", b"b1".to_vec()).await.unwrap(); // b's cache now holds x
        let mut alice = Session::new();
        a.write(&mut alice, b"x", b"a1".to_vec()).await.unwrap();
        a.write(&mut alice, b"x", b"a2".to_vec()).await.unwrap();
        assert_eq!(a.stats.cached_writes.load(Relaxed), 1, "a's second write of x needed no read");
        cluster.deliver(cluster.take_held());
        // At b, a2 (clock [2, 0]) ranks above b1 ([0, 1]); a session reads it and then writes x at b.
        let mut bob = Session::new();
        assert_eq!(b.read(&mut bob, b"x").await.unwrap().as_deref(), Some(&b"a2"[..]));
        b.write(&mut bob, b"x", b"b2".to_vec()).await.unwrap();
        assert_eq!(b.stats.cached_writes.load(Relaxed), 1, "b wrote x from its cache");
        // The cached clock had learnt a2's from the read: b2 ranks above a2, so bob reads his own write.
        assert_eq!(b.read(&mut bob, b"x").await.unwrap().as_deref(), Some(&b"b2"[..]));
        // A session that moved from a to b is served without b's cache.
        b.write(&mut alice, b"x", b"from a's session".to_vec()).await.unwrap();
        assert_eq!(b.stats.cached_writes.load(Relaxed), 1);
    }

    #[tokio::test]
    async fn an_exclusive_writer_without_a_feed_keeps_no_write_cache() {
        // It confirms its writes with the store, so records leave out versions no instance of another local set
        // fetched, and a cached write could rank below one of them (`WriteCache::is_sound`).
        use std::sync::atomic::Ordering::Relaxed;
        let cluster = MemoryCluster::new(2, Duration::ZERO);
        let cfg = Config { writers: crate::Writers::Exclusive, feed: false, ..Config::new(0, 2) };
        let a = Middleware::new(cluster.store(0), &cfg);
        a.take_lease().await.unwrap();
        let mut alice = Session::new();
        for v in 0..3u8 {
            a.write(&mut alice, b"x", vec![v]).await.unwrap();
        }
        assert_eq!(a.stats.cached_writes.load(Relaxed), 0, "every write read the store");
        assert_eq!(a.read(&mut alice, b"x").await.unwrap(), Some(vec![2]));
    }

    async fn eventually(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < deadline, "not within 10 s: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Exclusive writers of both local sets of `cluster`, holding their leases, with their background work running
    /// (feeds kept and followed; no walks): the feed tests' base. Abort the tasks at the end.
    async fn feeding_pair(
        cluster: &MemoryCluster,
    ) -> (Arc<Middleware<MemoryStore>>, Arc<Middleware<MemoryStore>>, Vec<tokio::task::JoinHandle<()>>) {
        feeding_pair_with(cluster, |_| {}).await
    }

    /// [`feeding_pair`], with `tune` applied to the second instance's configuration.
    async fn feeding_pair_with(
        cluster: &MemoryCluster,
        tune: impl Fn(&mut Config),
    ) -> (Arc<Middleware<MemoryStore>>, Arc<Middleware<MemoryStore>>, Vec<tokio::task::JoinHandle<()>>) {
        let cfg = |ls| Config { writers: crate::Writers::Exclusive, folded_cap: usize::MAX, ..Config::new(ls, 2) };
        let a = Arc::new(Middleware::new(cluster.store(0), &cfg(0)));
        let mut b_config = cfg(1);
        tune(&mut b_config);
        let b = Arc::new(Middleware::new(cluster.store(1), &b_config));
        a.take_lease().await.unwrap();
        b.take_lease().await.unwrap();
        let background =
            [a.clone(), b.clone()].into_iter().map(|m| tokio::spawn(async move { m.maintain().await })).collect();
        (a, b, background)
    }

    /// Exclusive writers keep feeds (`crate::feed`): the other local set resolves the writes ahead of its reads (a
    /// read of the last one reads no dependency information), and the writer marks them stable once it has, so its
    /// next record leaves them out; while the local sets are partitioned nothing more becomes stable.
    #[tokio::test]
    async fn a_feed_resolves_writes_ahead_of_reads_and_makes_them_stable() {
        use std::sync::atomic::Ordering::Relaxed;
        let cluster = MemoryCluster::new(2, Duration::from_millis(5));
        let (a, b, background) = feeding_pair(&cluster).await;
        let mut alice = Session::new();
        for i in 0..50 {
            a.write(&mut alice, format!("k{}", i % 10).as_bytes(), vec![i]).await.unwrap();
            // each on the last
        }
        eventually("b follows a's 50 writes", || b.stats.followed.load(Relaxed) >= 50).await;
        eventually("a marks them stable", || a.stats.stable_by_feed.load(Relaxed) >= 50).await;
        let rounds = b.stats.read_rounds.load(Relaxed);
        assert_eq!(b.read(&mut Session::new(), b"k9").await.unwrap(), Some(vec![49]));
        assert_eq!(b.stats.read_rounds.load(Relaxed) - rounds, 1, "resolved ahead: the heads only");
        // The next write depends on alice's last (stable now): its record requires nothing.
        a.write(&mut alice, b"k0", vec![50]).await.unwrap();
        let meta = cluster.store(0).get(&Copy { key: b"k0".to_vec(), ls: 0 }, Part::Meta).await.unwrap().unwrap();
        let meta = <crate::record::Meta as crate::record::RecordPart>::decode(&meta).unwrap();
        assert!(meta.requirements(meta.seq()).next().is_none(), "stable versions left out: {meta:?}");
        // Partitioned: b cannot see the feed's next batches, so nothing more becomes stable.
        cluster.pause();
        let stable = a.stats.stable_by_feed.load(Relaxed);
        for i in 51..60 {
            a.write(&mut alice, b"k1", vec![i]).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(a.stats.stable_by_feed.load(Relaxed), stable, "nothing new is stable during a partition");
        cluster.resume();
        eventually("stable again after the partition", || a.stats.stable_by_feed.load(Relaxed) >= stable + 9).await;
        for task in background {
            task.abort();
        }
    }

    /// A follower whose store fails its reads resolves nothing, so its frontier does not move and the writer marks
    /// nothing stable; once reads work again, it catches up. (Until this test, an error in a follower's check
    /// counted as "nothing missing": the frontier passed versions never checked, and the writer marked them stable.)
    #[tokio::test]
    async fn a_follower_whose_reads_fail_does_not_move_its_frontier() {
        use std::sync::atomic::Ordering::Relaxed;
        let cluster = MemoryCluster::new(2, Duration::from_millis(5));
        cluster.fail_reads(1, true);
        let (a, b, background) = feeding_pair(&cluster).await;
        let mut alice = Session::new();
        for i in 0..20 {
            a.write(&mut alice, format!("k{i}").as_bytes(), vec![i]).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(b.stats.followed.load(Relaxed), 0, "nothing can be checked while reads fail");
        assert_eq!(a.stats.stable_by_feed.load(Relaxed), 0, "so nothing is stable");
        cluster.fail_reads(1, false);
        eventually("b catches up", || b.stats.followed.load(Relaxed) >= 20).await;
        eventually("a marks the writes stable", || a.stats.stable_by_feed.load(Relaxed) >= 20).await;
        for task in background {
            task.abort();
        }
    }

    /// An instance that gave its writer lease up stops announcing its feed's epoch, so followers keep to the new
    /// holder's feed instead of switching between the two every second.
    #[tokio::test]
    async fn only_the_lease_holder_announces_its_feed() {
        let cluster = MemoryCluster::new(2, Duration::from_millis(5));
        let cfg = |ls| Config { writers: crate::Writers::Exclusive, ..Config::new(ls, 2) };
        let old = Arc::new(Middleware::new(cluster.store(0), &cfg(0)));
        old.take_lease().await.unwrap();
        let m = old.clone();
        let old_task = tokio::spawn(async move { m.keep_feeding().await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        old.release_lease().await.unwrap();
        let new = Arc::new(Middleware::new(cluster.store(0), &cfg(0)));
        new.take_lease().await.unwrap();
        let m = new.clone();
        let new_task = tokio::spawn(async move { m.keep_feeding().await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut epochs = std::collections::HashSet::new();
        for _ in 0..25 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Some(f) = cluster.store(1).frontier_get(0, 0).await.unwrap() {
                epochs.insert(f.epoch);
            }
        }
        assert_eq!(epochs.len(), 1, "the announced epoch changed while only the new instance held the lease");
        old_task.abort();
        new_task.abort();
    }

    /// The second local set reads the last of a chain of 40 writes of the first, whose data has arrived but whose
    /// feed batches it cannot read (held); the follower then gets them if `release`. Returns the read's result and
    /// the reading instance.
    async fn read_ahead_of_the_follower(
        walk_budget: usize,
        resolve_wait: Duration,
        release: bool,
    ) -> (Result<Option<Vec<u8>>, crate::Error>, Arc<Middleware<MemoryStore>>) {
        use std::sync::atomic::Ordering::Relaxed;
        let cluster = MemoryCluster::new(2, Duration::from_millis(5));
        let (a, b, background) = feeding_pair_with(&cluster, |c| {
            c.walk_budget = walk_budget;
            c.resolve_wait = resolve_wait;
        })
        .await;
        let mut alice = Session::new();
        a.write(&mut alice, b"k0", vec![0]).await.unwrap();
        eventually("b follows a's feed", || b.stats.followed.load(Relaxed) >= 1).await;
        cluster.hold_feeds(1, true);
        for i in 1..=40u8 {
            a.write(&mut alice, format!("k{}", i % 10).as_bytes(), vec![i]).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        let reader = b.clone();
        let read = tokio::spawn(async move { reader.read(&mut Session::new(), b"k0").await });
        if release {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if walk_budget == 0 {
                assert!(!read.is_finished(), "the read waits for the follower");
                assert_eq!(b.stats.follower_waits.load(Relaxed), 1);
            }
            cluster.hold_feeds(1, false);
        }
        let result = read.await.unwrap();
        for task in background {
            task.abort();
        }
        (result, b)
    }

    /// With feeds, a read whose version has a graph longer than `walk_budget` to check waits for its local set's
    /// follower, which resolves the feed's versions in order, instead of walking the graph; once the follower has
    /// resolved it, the read returns the version it read first without checking anything more.
    #[tokio::test]
    async fn a_read_waits_for_the_follower_instead_of_walking_a_long_graph() {
        use std::sync::atomic::Ordering::Relaxed;
        let (result, b) = read_ahead_of_the_follower(0, Duration::from_secs(5), true).await;
        assert_eq!(result.unwrap(), Some(vec![40]));
        assert_eq!(b.stats.follower_waits.load(Relaxed), 1);
        assert_eq!(b.stats.follower_waits_failed.load(Relaxed), 0);
        let expanded = b.stats.read_expanded_own.load(Relaxed) + b.stats.read_expanded_records.load(Relaxed);
        assert_eq!(expanded, 0, "the read checked none of the graph itself");
        assert!(b.stats.followed.load(Relaxed) >= 41);
    }

    /// The same read with no budget (`usize::MAX`, the paper's resolution) walks the graph itself.
    #[tokio::test]
    async fn a_read_without_a_walk_budget_checks_the_graph_itself() {
        use std::sync::atomic::Ordering::Relaxed;
        let (result, b) = read_ahead_of_the_follower(usize::MAX, Duration::from_secs(5), false).await;
        assert_eq!(result.unwrap(), Some(vec![40]));
        assert_eq!(b.stats.follower_waits.load(Relaxed), 0);
        assert!(b.stats.read_expanded_records.load(Relaxed) >= 10, "the read walked the chain");
    }

    /// A follower that does not resolve the version within `resolve_wait` fails the read with an error naming it.
    #[tokio::test]
    async fn a_read_whose_follower_does_not_come_fails_after_resolve_wait() {
        use std::sync::atomic::Ordering::Relaxed;
        let (result, b) = read_ahead_of_the_follower(0, Duration::from_millis(300), false).await;
        let error = result.unwrap_err();
        assert!(matches!(error, crate::Error::Unfollowed { .. }), "{error}");
        assert!(error.to_string().contains("follower"), "{error}");
        assert_eq!(b.stats.follower_waits_failed.load(Relaxed), 1);
        assert_eq!(b.stats.failed_reads.load(Relaxed), 1);
    }
}
