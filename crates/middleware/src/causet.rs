//! The store adapter for Causet itself, run with `protocol = "eventual"`, so that the middleware can be compared
//! with Causet's own Transactional Causal+ Consistency on the same machine.
//!
//! A copy is a `register_lww` object (bucket `causet-middleware`, key = the copy's key and local set); its value is
//! the version (8 bytes, big-endian), the length of the record's head (4 bytes, big-endian), the head and the meta
//! (one register, so that the two parts are always of one version; a read of either part reads both). Causet in
//! eventual mode replicates every DC's writes to the others, last writer wins, like Cassandra. It has no
//! compare-and-swap, so it serves exclusive writers only ([`crate::Writers::Exclusive`]) and cannot fence them: run
//! **one middleware instance per local set** over Causet.
//!
//! Feeds ([`crate::feed`]) are registers too, in bucket `causet-middleware-feeds`: one per batch (key: writer,
//! epoch, number) and one per frontier row (key: follower, writer). Causet has no TTL: a feed's batches stay (about
//! 30 bytes per write; a new epoch leaves the old one's behind).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use causet_client::Client;
use causet_core::ObjectId;
use causet_crdt::{CrdtType, Op, Value};
use tokio::sync::Mutex;

use crate::driver::{Lease, Part, Store, StoreError};
use crate::feed::Frontier;
use crate::record::{Copy, Encoded, LocalSet};

/// The bucket the middleware's objects live in.
pub const BUCKET: &[u8] = b"causet-middleware";

/// The bucket of feed batches and frontier rows.
pub const FEED_BUCKET: &[u8] = b"causet-middleware-feeds";

fn feed_object(parts: &[u64]) -> ObjectId {
    let key: Vec<u8> = parts.iter().flat_map(|p| p.to_be_bytes()).collect();
    ObjectId::new(key, FEED_BUCKET, CrdtType::RegisterLww)
}

/// One DC of a Causet cluster (one node's client port), through a pool of connections.
pub struct CausetStore {
    pool: Vec<Mutex<Client>>,
    next: AtomicUsize,
}

fn object(copy: &Copy) -> ObjectId {
    let mut key = copy.key.clone();
    key.extend_from_slice(&copy.ls.to_be_bytes());
    ObjectId::new(key, BUCKET, CrdtType::RegisterLww)
}

fn err(what: &str) -> impl Fn(causet_client::ClientError) -> StoreError + '_ {
    move |e| StoreError(format!("causet: {what}: {e}"))
}

impl CausetStore {
    /// Opens `connections` connections to the node at `addr`.
    pub async fn connect(addr: &str, connections: usize) -> Result<CausetStore, StoreError> {
        let mut pool = Vec::new();
        for _ in 0..connections.max(1) {
            pool.push(Mutex::new(Client::connect(addr).await.map_err(err("connect"))?));
        }
        Ok(CausetStore { pool, next: AtomicUsize::new(0) })
    }

    /// The values of registers (empty: never written), in order.
    async fn registers(&self, objects: &[ObjectId]) -> Result<Vec<Vec<u8>>, StoreError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len();
        let mut client = self.pool[i].lock().await;
        let (values, _) = client.static_read(None, objects).await.map_err(err("read"))?;
        values
            .into_iter()
            .map(|v| match v {
                Value::Register(v) => Ok(v),
                other => Err(StoreError(format!("causet: a middleware object read as {other:?}, not a register"))),
            })
            .collect()
    }

    async fn assign(&self, object: ObjectId, value: Vec<u8>) -> Result<(), StoreError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len();
        let mut client = self.pool[i].lock().await;
        client.static_update(None, [(object, Op::Assign(value))]).await.map_err(err("write"))?;
        Ok(())
    }

    async fn read(&self, copy: &Copy) -> Result<Option<Encoded>, StoreError> {
        let values = self.registers(&[object(copy)]).await?;
        let foreign =
            |v: &dyn std::fmt::Debug| StoreError(format!("causet: a copy read as {v:?}, not a middleware record"));
        match values.into_iter().next() {
            Some(v) if v.is_empty() => Ok(None),
            Some(v) if v.len() >= 12 => {
                let head_len = u32::from_be_bytes(v[8..12].try_into().expect("4 bytes")) as usize;
                let Some(head) = v.get(12..12 + head_len) else { return Err(foreign(&v)) };
                Ok(Some(Encoded { head: head.to_vec(), meta: v[12 + head_len..].to_vec() }))
            }
            other => Err(foreign(&other)),
        }
    }
}

impl Store for CausetStore {
    async fn get(&self, copy: &Copy, part: Part) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.read(copy).await?.map(|record| match part {
            Part::Head => record.head,
            Part::Meta => record.meta,
        }))
    }

    async fn cas(&self, _: &Copy, _: Option<u64>, _: u64, _: Encoded) -> Result<bool, StoreError> {
        Err(StoreError("causet: the store has no compare-and-swap; run the middleware with exclusive writers".into()))
    }

    async fn put(&self, copy: &Copy, seq: u64, record: Encoded) -> Result<(), StoreError> {
        let mut value = seq.to_be_bytes().to_vec();
        value.extend_from_slice(&(record.head.len() as u32).to_be_bytes());
        value.extend_from_slice(&record.head);
        value.extend_from_slice(&record.meta);
        self.assign(object(copy), value).await
    }

    const FEEDS: bool = true;

    async fn feed_append(&self, ls: LocalSet, epoch: u64, number: u64, batch: Vec<u8>) -> Result<(), StoreError> {
        self.assign(feed_object(&[u64::from(ls), epoch, number]), batch).await
    }

    /// Reads `limit` consecutive batches' registers at once and returns those written. Causet cannot read another
    /// DC's copy: `everywhere` reads this DC's, as always.
    async fn feed_read(
        &self,
        ls: LocalSet,
        epoch: u64,
        from: u64,
        limit: usize,
        _everywhere: bool,
    ) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let numbers: Vec<u64> = (from..from + limit as u64).collect();
        let objects: Vec<ObjectId> = numbers.iter().map(|&n| feed_object(&[u64::from(ls), epoch, n])).collect();
        let values = self.registers(&objects).await?;
        Ok(numbers.into_iter().zip(values).filter(|(_, v)| !v.is_empty()).collect())
    }

    async fn frontier_put(&self, reader: LocalSet, writer: LocalSet, frontier: Frontier) -> Result<(), StoreError> {
        let Frontier { epoch, start, position, batch } = frontier;
        let value = [epoch, start, position, batch].iter().flat_map(|p| p.to_be_bytes()).collect();
        self.assign(feed_object(&[u64::from(reader), u64::from(writer)]), value).await
    }

    async fn frontier_get(&self, reader: LocalSet, writer: LocalSet) -> Result<Option<Frontier>, StoreError> {
        let value = self.registers(&[feed_object(&[u64::from(reader), u64::from(writer)])]).await?;
        let Some(v) = value.first().filter(|v| v.len() == 32) else { return Ok(None) };
        let at = |i: usize| u64::from_be_bytes(v[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        Ok(Some(Frontier { epoch: at(0), start: at(1), position: at(2), batch: at(3) }))
    }

    async fn lease(&self, _: LocalSet, _: &str, _: Duration) -> Result<Lease, StoreError> {
        Ok(Lease::Unfenced)
    }
}
