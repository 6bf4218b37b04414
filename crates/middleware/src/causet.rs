//! The store adapter for Causet itself, run with `protocol = "eventual"`, so that the middleware can be compared
//! with Causet's own Transactional Causal+ Consistency on the same machine.
//!
//! A copy is a `register_lww` object (bucket `causet-middleware`, key = the copy's key and local set); its value is
//! the version (8 bytes, big-endian) followed by the record. Causet in eventual mode replicates every DC's writes
//! to the others, last writer wins, like Cassandra. It has no compare-and-swap: this adapter makes one by locking
//! the copy inside the process, which excludes writers only within one middleware process — run **one middleware
//! instance per local set** over Causet (Cassandra's lightweight transactions have no such limit).

use std::sync::atomic::{AtomicUsize, Ordering};

use causet_client::Client;
use causet_core::ObjectId;
use causet_crdt::{CrdtType, Op, Value};
use tokio::sync::Mutex;

use crate::driver::{Store, StoreError};
use crate::record::Copy;

/// The bucket the middleware's objects live in.
pub const BUCKET: &[u8] = b"causet-middleware";

/// Lock stripes for compare-and-swap.
const STRIPES: usize = 256;

/// One DC of a Causet cluster (one node's client port), through a pool of connections.
pub struct CausetStore {
    pool: Vec<Mutex<Client>>,
    next: AtomicUsize,
    stripes: Vec<Mutex<()>>,
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
        Ok(CausetStore { pool, next: AtomicUsize::new(0), stripes: (0..STRIPES).map(|_| Mutex::new(())).collect() })
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

    async fn cas(&self, copy: &Copy, expect: Option<u64>, seq: u64, data: Vec<u8>) -> Result<bool, StoreError> {
        let stripe = {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            copy.hash(&mut h);
            h.finish() as usize % STRIPES
        };
        let _locked = self.stripes[stripe].lock().await;
        if self.read(copy).await?.map(|(s, _)| s) != expect {
            return Ok(false);
        }
        let mut value = seq.to_be_bytes().to_vec();
        value.extend_from_slice(&data);
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len();
        let mut client = self.pool[i].lock().await;
        client.static_update(None, [(object(copy), Op::Assign(value))]).await.map_err(err("write"))?;
        Ok(true)
    }
}
