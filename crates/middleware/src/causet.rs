//! The store adapter for Causet itself, run with `protocol = "eventual"`, so that the middleware can be compared
//! with Causet's own Transactional Causal+ Consistency on the same machine.
//!
//! A copy is a `register_lww` object (bucket `causet-middleware`, key = the copy's key and local set); its value is
//! the version (8 bytes, big-endian), the length of the record's head (4 bytes, big-endian), the head and the meta
//! (one register, so that the two parts are always of one version; a read of either part reads both). Causet in
//! eventual mode replicates every DC's writes to the others, last writer wins, like Cassandra. It has no
//! compare-and-swap, so it serves exclusive writers only ([`crate::Writers::Exclusive`]) and cannot fence them: run
//! **one middleware instance per local set** over Causet.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use causet_client::Client;
use causet_core::ObjectId;
use causet_crdt::{CrdtType, Op, Value};
use tokio::sync::Mutex;

use crate::driver::{Lease, Part, Store, StoreError};
use crate::record::{Copy, Encoded};

/// The bucket the middleware's objects live in.
pub const BUCKET: &[u8] = b"causet-middleware";

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

    async fn read(&self, copy: &Copy) -> Result<Option<Encoded>, StoreError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len();
        let mut client = self.pool[i].lock().await;
        let (values, _) = client.static_read(None, &[object(copy)]).await.map_err(err("read"))?;
        let foreign =
            |v: &dyn std::fmt::Debug| StoreError(format!("causet: a copy read as {v:?}, not a middleware record"));
        match values.into_iter().next() {
            Some(Value::Register(v)) if v.is_empty() => Ok(None),
            Some(Value::Register(v)) if v.len() >= 12 => {
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
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len();
        let mut client = self.pool[i].lock().await;
        client.static_update(None, [(object(copy), Op::Assign(value))]).await.map_err(err("write"))?;
        Ok(())
    }

    async fn lease(&self, _: crate::record::LocalSet, _: &str, _: Duration) -> Result<Lease, StoreError> {
        Ok(Lease::Unfenced)
    }
}
