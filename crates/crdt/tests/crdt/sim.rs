//! A three-replica simulation: operations are generated at a replica against its state, applied there at once,
//! and delivered to the other replicas in random orders that respect causality. Every step checks the replica it
//! changed against the specification; the end checks convergence.

use crate::spec::{spec_value, SpecOp};
use causet_crdt::{requires_state, Crdt, CrdtError, CrdtType, Effect, EffectCtx, Op, Stamp, TxTag};
use std::collections::BTreeSet;

pub const REPLICAS: usize = 3;

/// One step of a run.
#[derive(Clone, Debug)]
pub enum Step {
    /// Generate the operation at the replica (its own transaction) and apply it there.
    Generate { replica: usize, op: Op },
    /// Deliver one of the replica's deliverable pending effects, chosen by `pick`.
    Deliver { replica: usize, pick: usize },
}

/// An operation that produced an effect.
#[derive(Clone, Debug)]
pub struct Record {
    pub op: Op,
    pub effect: Effect,
    pub stamp: Stamp,
    /// The operations applied at the origin when it generated this one (its causal past).
    pub visible: BTreeSet<usize>,
}

pub struct Replica {
    pub state: Crdt,
    pub applied: BTreeSet<usize>,
    /// Lamport clock: stamps extend causality.
    pub clock: u128,
    pub pending: Vec<usize>,
}

pub struct Sim {
    pub ty: CrdtType,
    pub replicas: Vec<Replica>,
    pub records: Vec<Record>,
    /// Operations refused at generation (a bounded counter without rights, a transfer to oneself).
    pub refused: usize,
    /// Operations attempted, to give every attempt its own transaction tag.
    attempts: u128,
}

impl Sim {
    pub fn new(ty: CrdtType) -> Sim {
        let replicas = (0..REPLICAS)
            .map(|_| Replica { state: Crdt::new(ty), applied: BTreeSet::new(), clock: 0, pending: Vec::new() })
            .collect();
        Sim { ty, replicas, records: Vec::new(), refused: 0, attempts: 0 }
    }

    /// Runs the steps, then delivers everything, and checks convergence to the specification.
    pub fn run(ty: CrdtType, steps: &[Step], flush_picks: &[usize]) -> Sim {
        let mut sim = Sim::new(ty);
        for step in steps {
            match step {
                Step::Generate { replica, op } => sim.generate(*replica, op),
                Step::Deliver { replica, pick } => {
                    sim.deliver(*replica, *pick);
                }
            }
        }
        sim.flush(flush_picks);
        sim.check_converged();
        sim
    }

    pub fn generate(&mut self, r: usize, op: &Op) {
        let ty = self.ty;
        self.attempts += 1;
        let tx = TxTag(self.attempts);
        let dc = u16::try_from(r).expect("few replicas");
        let replica = &mut self.replicas[r];
        let before = replica.state.clone();
        let mut ctx = EffectCtx::new(tx, dc);
        let result = replica.state.generate(op, &mut ctx);
        assert_eq!(replica.state, before, "generate must not mutate the state");
        let effect = match result {
            Ok(effect) => effect,
            Err(error) => {
                assert_eq!(ctx.next_seq, 0, "a refused generate leaves the context as it was");
                assert!(is_expected_refusal(&error), "unexpected refusal of {op:?} at replica {r}: {error}");
                self.refused += 1;
                return;
            }
        };
        assert_eq!(effect.ty(), ty);
        if !requires_state(ty, op) {
            let mut fresh_ctx = EffectCtx::new(tx, dc);
            let from_bottom = Crdt::new(ty).generate(op, &mut fresh_ctx);
            assert_eq!(
                from_bottom.as_ref(),
                Ok(&effect),
                "requires_state is false for {op:?}, yet the effect depends on the state"
            );
        }
        assert_eq!(replica.state.validate_effect(&effect), Ok(()), "a fresh effect is covered by its own state");
        replica.clock += 1;
        let stamp = Stamp { time: replica.clock, tx };
        replica.state.apply(&effect, stamp).expect("types match");
        let id = self.records.len();
        let visible = replica.applied.clone();
        replica.applied.insert(id);
        for (other, replica) in self.replicas.iter_mut().enumerate() {
            if other != r {
                replica.pending.push(id);
            }
        }
        self.records.push(Record { op: op.clone(), effect, stamp, visible });
        self.check_replica(r);
    }

    /// Delivers a pending effect whose causal past the replica has applied; does nothing when none is.
    pub fn deliver(&mut self, r: usize, pick: usize) -> bool {
        let records = &self.records;
        let replica = &mut self.replicas[r];
        let deliverable: Vec<usize> = (0..replica.pending.len())
            .filter(|&i| records[replica.pending[i]].visible.is_subset(&replica.applied))
            .collect();
        if deliverable.is_empty() {
            return false;
        }
        let id = replica.pending.remove(deliverable[pick % deliverable.len()]);
        let record = &records[id];
        replica.state.apply(&record.effect, record.stamp).expect("types match");
        replica.applied.insert(id);
        replica.clock = replica.clock.max(record.stamp.time);
        self.check_replica(r);
        true
    }

    /// Delivers every pending effect everywhere, choosing among the deliverable ones by the picks in turn.
    pub fn flush(&mut self, picks: &[usize]) {
        let mut turn = 0usize;
        for r in 0..REPLICAS {
            while !self.replicas[r].pending.is_empty() {
                let pick = if picks.is_empty() { 0 } else { picks[turn % picks.len()] };
                turn += 1;
                // Every effect's past was applied at its origin and is itself delivered to the other replicas, so
                // with causal delivery something is always deliverable.
                assert!(self.deliver(r, pick), "causal delivery stalled");
            }
        }
    }

    /// The specification's operations over the replica's applied effects.
    pub fn spec_ops(&self, applied: &BTreeSet<usize>) -> Vec<SpecOp> {
        applied
            .iter()
            .map(|&id| {
                let record = &self.records[id];
                SpecOp { id, op: record.op.clone(), visible: record.visible.clone(), stamp: record.stamp }
            })
            .collect()
    }

    /// The replica's value matches the specification over what it applied, and the type's invariants hold.
    pub fn check_replica(&self, r: usize) {
        let replica = &self.replicas[r];
        let state = &replica.state;
        let expected = spec_value(self.ty, &self.spec_ops(&replica.applied));
        assert_eq!(state.value(), expected, "replica {r} disagrees with the specification");
        assert_eq!(state.is_bottom(), state.value() == Crdt::new(self.ty).value(), "is_bottom is about reads");
        if let Crdt::CounterB(counter) = state {
            // Rights sum to the value when none is negative; clamping a negative one would break the equality.
            let rights: i128 = (0..REPLICAS as u16).map(|dc| i128::from(counter.local_rights(dc))).sum();
            assert!(counter.total() >= 0, "bounded counter went negative: {counter:?}");
            assert_eq!(rights, counter.total(), "some DC's rights went negative: {counter:?}");
        }
    }

    /// All replicas applied everything, hold equal states, and read the specification's value.
    pub fn check_converged(&self) {
        let all: BTreeSet<usize> = (0..self.records.len()).collect();
        let expected = spec_value(self.ty, &self.spec_ops(&all));
        let first = self.replicas[0].state.encode();
        for (r, replica) in self.replicas.iter().enumerate() {
            assert_eq!(replica.applied, all, "replica {r} missed effects");
            assert_eq!(replica.state.value(), expected, "replica {r} converged off the specification");
            assert_eq!(replica.state.encode(), first, "replica {r} holds another state");
        }
    }
}

/// Refusals the generated operations may legitimately meet.
fn is_expected_refusal(error: &CrdtError) -> bool {
    match error {
        CrdtError::NoPermissions { requested, available, .. } => requested > available,
        CrdtError::InvalidArgument(reason) => reason.contains("itself"),
        _ => false,
    }
}
