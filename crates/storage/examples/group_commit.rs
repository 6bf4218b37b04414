//! Measures group commit: `clients` threads each commit in a closed loop (append a record to its own partition,
//! wait until it is reported durable, repeat), as prepares and commits do in the server. Prints commits per
//! second, fsyncs, records per fsync, fsync latency and commit latency, for several client counts.
//!
//! `cargo run --release -p causet-storage --example group_commit -- [seconds_per_step] [dir]`
//! (the directory defaults to a fresh temporary one; point it at the disk the server will use).

use causet_core::record::{LogRecord, Lsn};
use causet_core::{CoordinatorId, DcId, PartitionId, Timestamp, TxId, VectorClock};
use causet_storage::{FjallStore, LogStore, StorageOptions};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Durable positions reported so far, with a condition variable the clients wait on.
#[derive(Default)]
struct Durable {
    lsns: Mutex<HashMap<PartitionId, Lsn>>,
    changed: Condvar,
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let step = Duration::from_secs_f64(args.next().map(|s| s.parse()).transpose()?.unwrap_or(2.0));
    let temporary = tempfile::tempdir()?;
    let dir = args.next().map(std::path::PathBuf::from).unwrap_or_else(|| temporary.path().to_path_buf());
    println!("group commit on {} ({step:?} per step, SyncMode::Always)", dir.display());
    println!(
        "{:>7} {:>10} {:>7} {:>12} {:>14} {:>13} {:>13} {:>13}",
        "clients",
        "commits/s",
        "fsyncs",
        "records/fsync",
        "fsync mean us",
        "fsync max us",
        "commit p50 us",
        "commit p99 us"
    );
    for clients in [1u32, 4, 16, 64] {
        let step_dir = dir.join(format!("clients-{clients}"));
        let (store, mut rx) = FjallStore::open(&step_dir, StorageOptions::default())?;
        let store = Arc::new(store);
        let durable = Arc::new(Durable::default());
        let dispatcher = {
            let durable = durable.clone();
            std::thread::spawn(move || {
                while let Ok(Some(batch)) = rx.blocking_recv() {
                    let mut lsns = durable.lsns.lock().unwrap();
                    for (p, reported) in batch {
                        if let Some(lsn) = reported.log() {
                            lsns.insert(p, lsn);
                        }
                    }
                    durable.changed.notify_all();
                }
            })
        };
        let started = Instant::now();
        let threads: Vec<_> = (0..clients)
            .map(|c| {
                let (store, durable) = (store.clone(), durable.clone());
                std::thread::spawn(move || {
                    let partition = PartitionId(c);
                    let mut latencies_us = Vec::new();
                    let mut lsn = 0;
                    while started.elapsed() < step {
                        lsn += 1;
                        let tx = TxId { dc: DcId(0), coordinator: CoordinatorId(c), seq: lsn };
                        let commit = VectorClock::from_entries(vec![Timestamp(lsn), Timestamp(lsn), Timestamp(lsn)]);
                        let sent = Instant::now();
                        store.append(partition, Lsn(lsn), LogRecord::Committed { tx, commit }).expect("append");
                        let mut lsns = durable.lsns.lock().unwrap();
                        while lsns.get(&partition).is_none_or(|d| d.0 < lsn) {
                            lsns = durable.changed.wait(lsns).unwrap();
                        }
                        latencies_us.push(sent.elapsed().as_micros() as u64);
                    }
                    latencies_us
                })
            })
            .collect();
        let mut latencies_us: Vec<u64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        let elapsed = started.elapsed();
        latencies_us.sort_unstable();
        let percentile = |q: f64| latencies_us[((latencies_us.len() - 1) as f64 * q) as usize];
        let stats = store.stats();
        println!(
            "{:>7} {:>10.0} {:>7} {:>12.1} {:>14.0} {:>13} {:>13} {:>13}",
            clients,
            latencies_us.len() as f64 / elapsed.as_secs_f64(),
            stats.fsyncs,
            stats.records_per_fsync(),
            stats.fsync_latency_us_mean(),
            stats.fsync_latency_us_max,
            percentile(0.5),
            percentile(0.99),
        );
        Arc::into_inner(store).expect("clients are done").close()?;
        dispatcher.join().unwrap();
    }
    Ok(())
}
