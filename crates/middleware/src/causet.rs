//! The store adapter for Causet itself, run with `protocol = "eventual"`, so that the middleware can be compared
//! with Causet's own Transactional Causal+ Consistency on the same machine.
//!
//! A copy is a `register_lww` object (bucket `causet-middleware`, key = the copy's key and local set); its value is
//! the version (8 bytes, big-endian) followed by the record. Causet in eventual mode replicates every DC's writes
//! to the others, last writer wins, like Cassandra. It has no compare-and-swap, so it serves exclusive writers only
//! ([`crate::Writers::Exclusive`]) and cannot fence them: run **one middleware instance per local set** over Causet.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use causet_client::Client;
use causet_core::ObjectId;
use causet_crdt::{CrdtType, Op, Value};
use tokio::sync::Mutex;

use crate::driver::{Lease, Store, StoreError};
use crate::record::Copy;

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

    async fn read(&self, copy: &Copy) -> Result<Option<(u64, Vec<u8>)>, StoreError> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len();
        let mut client = self.pool[i].lock().await;
        let (values, _) = client.static_read(None, &[object(copy)]).await.map_err(err("read"))?;
        match values.into_iter().next() {
            Some(Value::Register(v)) if v.is_empty() => Ok(None),
            Some(Value::Register(v)) if v.len() >= 8 => {
                Ok(Some((u64::from_be_bytes(v[..8].try_into().expect("8 bytes")), v[8..].to_vec())))
            }
            other => Err(StoreError(format!("causet: a copy read as {other:?}, not a middleware record"))),
        }
    }
}

impl Store for CausetStore {
    async fn get(&self, copy: &Copy) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.read(copy).await?.map(|(_, data)| data))
    }

    async fn cas(&self, _: &Copy, _: Option<u64>, _: u64, _: Vec<u8>) -> Result<bool, StoreError> {
        Err(StoreError("causet: the store has no compare-and-swap; run the middleware with exclusive writers".into()))
    }

    async fn put(&self, copy: &Copy, seq: u64, data: Vec<u8>) -> Result<(), StoreError> {
        let mut value = seq.to_be_bytes().to_vec();
        value.extend_from_slice(&data);
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len();
        let mut client = self.pool[i].lock().await;
        client.static_update(None, [(object(copy), Op::Assign(value))]).await.map_err(err("write"))?;
        Ok(())
    }

    async fn lease(&self, _: crate::record::LocalSet, _: &str, _: Duration) -> Result<Lease, StoreError> {
        Ok(Lease::Unfenced)
    }
}
