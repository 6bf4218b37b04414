//! A partition's hot path without I/O: static reads at the stable snapshot and single-partition commits of LWW
//! registers over 10,000 keys (the Cure workload's shape for one partition), with the stabilizer's messages moving
//! the garbage-collection frontier every 20 operations, as in a loaded DC (3 DCs in the vectors).
//!
//! `cargo bench -p causet-core --bench partition`
//!
//! Timings on a shared 2-core VM vary by ±30% between identical runs, and criterion's iteration count changes the
//! partition's state. For before/after comparisons, run a fixed amount of work on a fresh partition instead and
//! count instructions: `CAUSET_BENCH_OPS=200000 perf stat -e instructions:u target/release/deps/partition-…`.

use causet_core::partition::{Partition, PartitionOutput};
use causet_core::{Address, Config, CoordinatorId, DcId, Message, ObjectId, PartitionId, Timestamp};
use causet_core::{TxId, VectorClock};
use causet_crdt::{Crdt, CrdtType, EffectCtx, Op};
use criterion::{criterion_group, BenchmarkId, Criterion};
use std::hint::black_box;

const KEYS: u64 = 10_000;
const COORD: Address = Address::Coordinator(CoordinatorId(0));

struct Bench {
    p: Partition,
    now: u64,
    seq: u64,
    rng: u64,
    ops: u64,
    keys: Vec<ObjectId>,
}

impl Bench {
    fn new() -> Self {
        let config = Config::new(3, DcId(0), 1);
        let now = 1_000_000;
        let keys = (0..KEYS).map(|k| ObjectId::new(format!("{k:08}"), "bench", CrdtType::RegisterLww)).collect();
        let mut b = Bench { p: Partition::new(PartitionId(0), config, now), now, seq: 0, rng: 1, ops: 0, keys };
        for k in 0..KEYS {
            b.commit(k);
        }
        b.stable();
        b
    }

    fn next(&mut self) -> u64 {
        // xorshift64: cheap, deterministic.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }

    fn vector(&self, local: u64) -> VectorClock {
        VectorClock::from_entries(vec![Timestamp::from_micros(local), Timestamp::ZERO, Timestamp::ZERO])
    }

    fn drain(&mut self) {
        let mut durable = None;
        while let Some(out) = self.p.poll_output() {
            match out {
                PartitionOutput::Persist { lsn, .. } => durable = Some(lsn),
                // No timer runs here, so replication never ships, nor reads the log back.
                PartitionOutput::ReadLog { .. } => {}
                PartitionOutput::Send(e) => {
                    black_box(e);
                }
            }
        }
        if let Some(lsn) = durable {
            self.p.handle_persisted(self.now, lsn);
            while let Some(out) = self.p.poll_output() {
                black_box(out);
            }
        }
    }

    fn commit(&mut self, key: u64) {
        self.seq += 1;
        let tx = TxId { dc: DcId(0), coordinator: CoordinatorId(0), seq: self.seq };
        let mut ctx = EffectCtx::new(tx.tag(), 0);
        let effect = Crdt::new(CrdtType::RegisterLww)
            .generate(&Op::Assign(b"0123456789".to_vec()), &mut ctx)
            .expect("an assignment fits a register");
        let writes = vec![(self.keys[key as usize].clone(), effect)];
        let snapshot = self.vector(self.now - 1);
        self.p.handle_message(self.now, COORD, Message::PrepareAndCommit { tx, snapshot, writes, oldest_open: tx.seq });
        self.drain();
        self.now += 10;
    }

    fn read(&mut self, key: u64) {
        let tx = TxId { dc: DcId(0), coordinator: CoordinatorId(0), seq: u64::MAX };
        let snapshot = self.vector(self.now.saturating_sub(2_000));
        let objects = vec![self.keys[key as usize].clone()];
        self.p.handle_message(
            self.now,
            COORD,
            Message::Read { tx, request: self.ops, snapshot, objects, nearest: false },
        );
        self.drain();
        self.now += 10;
    }

    /// What the stabilizer sends: the stable snapshot and the frontier, 2 ms behind; and both peer DCs'
    /// acknowledgements of what was shipped to them up to then, so the replication backlog stays bounded.
    fn stable(&mut self) {
        let behind = Timestamp::from_micros(self.now.saturating_sub(2_000));
        for peer in [DcId(1), DcId(2)] {
            let from = Address::Peer(peer, PartitionId(0));
            self.p.handle_message(self.now, from, Message::ReplicateAck { up_to: behind, gap: false });
        }
        let v = self.vector(self.now.saturating_sub(2_000));
        self.p.handle_message(self.now, Address::Stabilizer, Message::Stable { stable: v.clone(), gc: v, away: None });
        self.p.handle_timeout(self.now);
        self.drain();
    }

    fn op(&mut self, update_percent: u64) {
        self.ops += 1;
        let key = self.next() % KEYS;
        if self.next() % 100 < update_percent {
            self.commit(key);
        } else {
            self.read(key);
        }
        if self.ops.is_multiple_of(20) {
            self.stable();
        }
    }
}

fn partition(c: &mut Criterion) {
    let mut group = c.benchmark_group("partition_op");
    for updates in [10u64, 50] {
        let mut b = Bench::new();
        group.bench_with_input(BenchmarkId::new("updates_percent", updates), &updates, |bencher, &u| {
            bencher.iter(|| b.op(u))
        });
    }
    group.finish();
}

/// `CAUSET_BENCH_OPS` operations at 10% and at 50% updates, each on a fresh partition.
fn fixed_work(ops: u64) {
    for updates in [10u64, 50] {
        let mut b = Bench::new();
        let started = std::time::Instant::now();
        for _ in 0..ops {
            b.op(updates);
        }
        let per_op = started.elapsed().as_nanos() as f64 / ops as f64;
        println!("{ops} operations at {updates}% updates: {per_op:.0} ns per operation");
    }
}

criterion_group!(benches, partition);

fn main() {
    if let Some(ops) = std::env::var("CAUSET_BENCH_OPS").ok().and_then(|v| v.parse().ok()) {
        fixed_work(ops);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
