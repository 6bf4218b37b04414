//! An in-process store with one map per local set and delayed replication between them: the middleware's
//! reference store for tests and local experiments (not a database: nothing is persisted).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::driver::{Store, StoreError};
use crate::record::{Copy, LocalSet};

type Copies = HashMap<Copy, (u64, Vec<u8>)>;

/// An update held back by [`MemoryCluster::pause`]: destination, copy, version, record.
pub type Held = (LocalSet, Copy, u64, Vec<u8>);

/// Every local set's store; replication from one to another takes `delay`, and can be paused.
#[derive(Clone)]
pub struct MemoryCluster {
    sets: Arc<Vec<Mutex<Copies>>>,
    delay: Duration,
    paused: Arc<Mutex<Option<Vec<Held>>>>,
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
        }
    }

    /// Local set `ls`'s store.
    pub fn store(&self, ls: LocalSet) -> MemoryStore {
        assert!((ls as usize) < self.sets.len(), "local set {ls} of {}", self.sets.len());
        MemoryStore { cluster: self.clone(), ls }
    }

    /// Holds back replication until [`MemoryCluster::resume`] (a network partition between every local set).
    pub fn pause(&self) {
        self.paused.lock().unwrap().get_or_insert_with(Vec::new);
    }

    /// Delivers what was held back and replicates normally again.
    pub fn resume(&self) {
        let held = self.paused.lock().unwrap().take().unwrap_or_default();
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

    fn apply(&self, to: LocalSet, copy: Copy, seq: u64, data: Vec<u8>) {
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

    fn replicate(&self, from: LocalSet, copy: Copy, seq: u64, data: Vec<u8>) {
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

impl Store for MemoryStore {
    async fn get(&self, copy: &Copy) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.cluster.sets[self.ls as usize].lock().unwrap().get(copy).map(|(_, d)| d.clone()))
    }

    async fn cas(&self, copy: &Copy, expect: Option<u64>, seq: u64, data: Vec<u8>) -> Result<bool, StoreError> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::{Config, Error, Middleware};
    use crate::op::Session;

    fn pair(cluster: &MemoryCluster, wait: Duration) -> (Middleware<MemoryStore>, Middleware<MemoryStore>) {
        let cfg = |ls| Config { resolve_wait: wait, ..Config::new(ls, 2) };
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

    #[tokio::test]
    async fn concurrent_writers_of_one_local_set_lose_nothing_of_the_graph() {
        let cluster = MemoryCluster::new(2, Duration::from_millis(1));
        let a = std::sync::Arc::new(Middleware::new(cluster.store(0), &Config::new(0, 2)));
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
        let stored = cluster.store(0).get(&Copy { key: b"hot".to_vec(), ls: 0 }).await.unwrap().unwrap();
        assert_eq!(crate::record::Record::decode(&stored).unwrap().seq(), 160, "every write got its own version");
    }
}
