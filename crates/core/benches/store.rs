//! The version store's garbage collection in steady state under a lease cache: every object written in the last
//! lease keeps versions above the frontier (the cache holds the frontier a lease back), the frontier moves by one
//! stable interval per step, and each step commits a few new versions. A step's cost should follow what it folds,
//! not how many objects hold unfolded versions.
//!
//! With three DCs, a third of the commits come from each, and the frontier's entries of the other two trail its own
//! by a WAN delay.
//!
//! `cargo bench -p causet-core --bench store`

use causet_core::store::{Store, VersionStore};
use causet_core::{ObjectId, Timestamp, VectorClock};
use causet_crdt::{Crdt, CrdtType, EffectCtx, Op, Stamp, TxTag};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

/// One stable interval, in microseconds.
const STEP_US: u64 = 1_000;
/// The lease: how far the frontier trails the newest commits.
const LEASE_US: u64 = 5_000_000;
/// With several DCs: how far the frontier's entries of the other DCs trail its own (a one-way WAN delay and more).
const WAN_US: u64 = 100_000;

struct Steady {
    store: Store,
    keys: Vec<ObjectId>,
    now: u64,
    seq: u64,
    rng: u64,
    effect: causet_crdt::Effect,
    /// DCs whose commits arrive here (1: only this one's).
    dcs: usize,
}

impl Steady {
    /// A store over `objects` keys, written at `per_step` versions per step for one lease.
    fn new(objects: usize, per_step: usize, dcs: usize) -> Self {
        let keys = (0..objects).map(|k| ObjectId::new(format!("{k:08}"), "bench", CrdtType::RegisterLww)).collect();
        let mut ctx = EffectCtx::new(TxTag(1), 0);
        let effect = Crdt::new(CrdtType::RegisterLww).generate(&Op::Assign(b"0123456789".to_vec()), &mut ctx).unwrap();
        let mut s = Steady { store: Store::new(3), keys, now: LEASE_US + WAN_US, seq: 0, rng: 1, effect, dcs };
        for _ in 0..LEASE_US / STEP_US {
            s.step(per_step);
        }
        s
    }

    /// A commit vector cut at DC `origin` at `at` (the other entries a WAN delay older), or, for `origin` 0 with
    /// one DC, only entry 0.
    fn vector(&self, origin: usize, at: u64) -> VectorClock {
        let other = if self.dcs == 1 { 0 } else { at - WAN_US };
        let entries = (0..3).map(|d| Timestamp::from_micros(if d == origin { at } else { other })).collect();
        VectorClock::from_entries(entries)
    }

    /// Commits `writes` versions to random keys at the present, then collects a lease back.
    fn step(&mut self, writes: usize) {
        self.now += STEP_US;
        for _ in 0..writes {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            self.seq += 1;
            let id = &self.keys[(self.rng % self.keys.len() as u64) as usize];
            let origin = (self.rng >> 32) as usize % self.dcs;
            let stamp =
                Stamp { time: u128::from(self.now) << 20 | u128::from(self.seq), tx: TxTag(u128::from(self.seq)) };
            let commit = self.vector(origin, self.now);
            self.store.insert(id, &commit, stamp, self.effect.clone());
        }
        // The frontier: this DC's entry a lease back, the others' a WAN delay further.
        let frontier = self.vector(0, self.now - LEASE_US);
        self.store.collect(&frontier);
    }
}

fn collect(c: &mut Criterion) {
    let mut group = c.benchmark_group("store_collect_step");
    // A partition of the HoneyPot benchmark at 10,000 keys (about 800 keys, a third of a write per millisecond)
    // and one ten times larger.
    for (objects, per_step, dcs) in [(800usize, 1usize, 1usize), (8_000, 3, 1), (8_000, 3, 3)] {
        let mut s = Steady::new(objects, per_step, dcs);
        let id = BenchmarkId::new(format!("dcs_{dcs}_objects"), objects);
        group.bench_with_input(id, &per_step, |b, &w| b.iter(|| s.step(w)));
    }
    group.finish();
}

criterion_group!(benches, collect);
criterion_main!(benches);
