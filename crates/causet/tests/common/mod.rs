//! A workload shared by the middleware's tests over Cassandra and over Causet.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use causet_client::Client;
use causet_core::ObjectId;
use causet_crdt::{CrdtType, Op, Value};
use causet_sim::history::{HistOp, History, ObjectKind, ObjectName, Observed, Outcome, TxRecord};

fn reg(key: &str) -> ObjectId {
    ObjectId::new(key, "b", CrdtType::RegisterLww)
}

fn object(key: &str) -> ObjectName {
    ObjectName { key: key.into(), kind: ObjectKind::Register }
}

/// A value carrying write id `id`: 8 big-endian bytes, padded to `len`.
fn value(id: u64, len: usize) -> Vec<u8> {
    let mut v = id.to_be_bytes().to_vec();
    v.resize(len.max(8), b'.');
    v
}

/// The photo-and-album workload: writers in DC 1 write a large `photo` value and then a small `album` value that
/// refers to it; readers in DC 2 read the album and then the photo. Cassandra carries large and small messages
/// between nodes on different connections, which the emulated WAN delays differently, so an album can arrive
/// before its photo. Returns the recorded history.
pub async fn photo_album(dc1: std::net::SocketAddr, dc2: std::net::SocketAddr, rounds: u64, base: u64) -> History {
    let mut writer = Client::connect(dc1).await.unwrap();
    let mut readers = Vec::new();
    for _ in 0..2 {
        readers.push(Client::connect(dc2).await.unwrap());
    }
    let mut history = History::default();
    let mut record = |session: u64, dc: u16, started: Instant, ops: Vec<HistOp>, ok: bool, epoch: Instant| {
        let index = history.txs.len();
        history.txs.push(TxRecord {
            index,
            session,
            dc,
            start_us: started.duration_since(epoch).as_micros() as u64,
            end_us: epoch.elapsed().as_micros() as u64,
            ops,
            outcome: if ok { Outcome::Committed } else { Outcome::Unknown },
        });
    };
    let epoch = Instant::now();
    let reader_task = |mut c: Client, session: u64, stop: Arc<AtomicBool>| async move {
        let mut seen = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            for key in ["album", "photo"] {
                let started = Instant::now();
                if let Ok((values, _)) = c.static_read(None, &[reg(key)]).await {
                    let Value::Register(v) = &values[0] else { panic!("register") };
                    let id = (!v.is_empty()).then(|| u64::from_be_bytes(v[..8].try_into().unwrap()));
                    seen.push((session, started, key, id));
                }
            }
        }
        seen
    };
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = readers
        .into_iter()
        .enumerate()
        .map(|(i, c)| tokio::spawn(reader_task(c, 1 + i as u64, stop.clone())))
        .collect();
    for r in 0..rounds {
        let (photo, album) = (base + 2 * r + 1, base + 2 * r + 2);
        for (key, id, len) in [("photo", photo, 200 * 1024), ("album", album, 64)] {
            let started = Instant::now();
            let ok = writer.static_update(None, [(reg(key), Op::Assign(value(id, len)))]).await.is_ok();
            record(0, 0, started, vec![HistOp::Write { object: object(key), id, amount: 0 }], ok, epoch);
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        for (session, started, key, id) in t.await.unwrap() {
            let read = HistOp::Read { object: object(key), observed: Observed::Register(id) };
            record(session, 1, started, vec![read], true, epoch);
        }
    }
    history
}
