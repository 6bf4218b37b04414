//! The workload generator: random interactive and static transactions over a key space of CRDT objects.
//!
//! Checked objects (sets, LWW registers, counters) receive unique write ids, so the history is exact. A few
//! unchecked objects of the other types (maps, multi-value registers, flags, remove-wins sets, fat and bounded
//! counters) receive random operations to exercise every type through the protocol.

use crate::history::{HistOp, ObjectKind, ObjectName, Observed, TxRecord, WriteId};
use causet_core::ObjectId;
use causet_crdt::{CrdtType, MapKey, Op, Value};
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// The bucket every workload object lives in (but those of [`RINGS_BUCKET`]).
pub const BUCKET: &[u8] = b"sim";

/// With [`WorkloadConfig::rings_bucket`]: the bucket of every other object, which the simulation places by rings.
pub const RINGS_BUCKET: &[u8] = b"simr";

/// One step of a planned transaction.
#[derive(Clone, Debug)]
pub enum Step {
    /// Read the objects.
    Read(Vec<Planned>),
    /// Write the objects.
    Update(Vec<Planned>),
}

/// A planned object access.
#[derive(Clone, Debug)]
pub struct Planned {
    /// The object.
    pub object: ObjectId,
    /// How the history names it (`None` for unchecked objects).
    pub name: Option<ObjectName>,
    /// The operation, for writes.
    pub op: Option<Op>,
    /// The unique write id, for checked writes.
    pub write: Option<(WriteId, i64)>,
}

/// A planned transaction.
#[derive(Clone, Debug)]
pub enum Plan {
    /// Start, run the steps one request each, then commit (or abort when `abort` is set).
    Interactive {
        /// The steps.
        steps: Vec<Step>,
        /// Abort instead of committing.
        abort: bool,
    },
    /// One static read request.
    StaticRead(Vec<Planned>),
    /// One static update request.
    StaticUpdate(Vec<Planned>),
}

/// Parameters of the workload.
#[derive(Clone, Debug)]
pub struct WorkloadConfig {
    /// Checked objects (one third each sets, registers and counters).
    pub keys: u32,
    /// Unchecked objects of the other types.
    pub extra_keys: u32,
    /// Probability a transaction is interactive (else static).
    pub interactive: f64,
    /// Probability a static transaction, or a step, updates (else reads).
    pub update: f64,
    /// Most objects one step touches.
    pub max_objects: usize,
    /// Most steps of an interactive transaction.
    pub max_steps: usize,
    /// Probability an interactive transaction ends with an abort.
    pub abort: f64,
    /// The kinds of the checked objects, in turn: key `k<i>` is of kind `kinds[i % len]`. All three by default;
    /// without sets (which only grow) the data a workload writes stays bounded, for long soaks.
    pub kinds: Vec<ObjectKind>,
    /// Every odd-numbered object lives in [`RINGS_BUCKET`] (but bounded counters, which a DC that does not hold
    /// them cannot update), so that transactions mix buckets placed by rings and fully replicated ones.
    pub rings_bucket: bool,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        Self {
            keys: 24,
            extra_keys: 8,
            interactive: 0.6,
            update: 0.5,
            max_objects: 4,
            max_steps: 4,
            abort: 0.05,
            kinds: ObjectKind::ALL.to_vec(),
            rings_bucket: false,
        }
    }
}

const EXTRA_TYPES: [CrdtType; 8] = [
    CrdtType::MapRr,
    CrdtType::MapGo,
    CrdtType::RegisterMv,
    CrdtType::FlagEw,
    CrdtType::FlagDw,
    CrdtType::SetRw,
    CrdtType::CounterFat,
    CrdtType::CounterB,
];

/// Generates transactions.
#[derive(Debug)]
pub struct Workload {
    config: WorkloadConfig,
    next_write: WriteId,
}

impl Workload {
    /// A generator.
    pub fn new(config: WorkloadConfig) -> Self {
        Self::starting_at(config, 1)
    }

    /// A generator whose write ids count up from `first_write`: several generators with disjoint ranges (one per
    /// concurrent client session) keep every write id unique.
    pub fn starting_at(config: WorkloadConfig, first_write: WriteId) -> Self {
        assert!(config.keys > 0 && config.max_objects > 0 && config.max_steps > 0 && !config.kinds.is_empty());
        Self { config, next_write: first_write }
    }

    /// The checked object with index `i`.
    pub fn checked(&self, i: u32) -> (ObjectId, ObjectName) {
        let kind = self.config.kinds[i as usize % self.config.kinds.len()];
        let ty = match kind {
            ObjectKind::Set => CrdtType::SetAw,
            ObjectKind::Register => CrdtType::RegisterLww,
            ObjectKind::Counter => CrdtType::CounterPn,
        };
        let key = format!("k{i}");
        (ObjectId::new(key.clone(), self.bucket(i, ty), ty), ObjectName { key, kind })
    }

    /// Every checked object.
    pub fn checked_objects(&self) -> Vec<(ObjectId, ObjectName)> {
        (0..self.config.keys).map(|i| self.checked(i)).collect()
    }

    /// Every unchecked object.
    pub fn extra_objects(&self) -> Vec<ObjectId> {
        (0..self.config.extra_keys).map(|i| self.extra(i)).collect()
    }

    fn extra(&self, i: u32) -> ObjectId {
        let ty = EXTRA_TYPES[i as usize % EXTRA_TYPES.len()];
        ObjectId::new(format!("x{i}"), self.bucket(i, ty), ty)
    }

    /// The bucket of the object numbered `i`, of type `ty`.
    fn bucket(&self, i: u32, ty: CrdtType) -> &'static [u8] {
        if self.config.rings_bucket && i % 2 == 1 && ty != CrdtType::CounterB {
            RINGS_BUCKET
        } else {
            BUCKET
        }
    }

    fn pick_read(&self, rng: &mut ChaCha8Rng) -> Planned {
        if self.config.extra_keys > 0 && rng.random_bool(0.15) {
            let object = self.extra(rng.random_range(0..self.config.extra_keys));
            return Planned { object, name: None, op: None, write: None };
        }
        let (object, name) = self.checked(rng.random_range(0..self.config.keys));
        Planned { object, name: Some(name), op: None, write: None }
    }

    fn pick_write(&mut self, rng: &mut ChaCha8Rng) -> Planned {
        if self.config.extra_keys > 0 && rng.random_bool(0.15) {
            let object = self.extra(rng.random_range(0..self.config.extra_keys));
            let op = random_op(object.ty, rng);
            return Planned { object, name: None, op: Some(op), write: None };
        }
        let (object, name) = self.checked(rng.random_range(0..self.config.keys));
        let id = self.next_write;
        self.next_write += 1;
        let bytes = id.to_be_bytes().to_vec();
        let (op, amount) = match name.kind {
            ObjectKind::Set => (Op::Add(vec![bytes]), 0),
            ObjectKind::Register => (Op::Assign(bytes), 0),
            ObjectKind::Counter => {
                let amount = rng.random_range(1..=9);
                (Op::Increment(amount), amount)
            }
        };
        Planned { object, name: Some(name), op: Some(op), write: Some((id, amount)) }
    }

    fn step(&mut self, rng: &mut ChaCha8Rng, update: bool) -> Vec<Planned> {
        let n = rng.random_range(1..=self.config.max_objects);
        (0..n).map(|_| if update { self.pick_write(rng) } else { self.pick_read(rng) }).collect()
    }

    /// The next transaction.
    pub fn next(&mut self, rng: &mut ChaCha8Rng) -> Plan {
        if rng.random_bool(self.config.interactive) {
            let steps = rng.random_range(1..=self.config.max_steps);
            let steps = (0..steps)
                .map(|_| {
                    if rng.random_bool(self.config.update) {
                        Step::Update(self.step(rng, true))
                    } else {
                        Step::Read(self.step(rng, false))
                    }
                })
                .collect();
            Plan::Interactive { steps, abort: rng.random_bool(self.config.abort) }
        } else if rng.random_bool(self.config.update) {
            Plan::StaticUpdate(self.step(rng, true))
        } else {
            Plan::StaticRead(self.step(rng, false))
        }
    }
}

/// A random operation that fits the type (bounded-counter decrements may be refused for lack of rights).
fn random_op(ty: CrdtType, rng: &mut ChaCha8Rng) -> Op {
    let elem = |rng: &mut ChaCha8Rng| vec![b'a' + rng.random_range(0..4u8)];
    match ty {
        CrdtType::CounterPn | CrdtType::CounterFat | CrdtType::CounterB => match rng.random_range(0..5) {
            0 if ty == CrdtType::CounterFat => Op::Reset,
            0 | 1 => Op::Increment(-rng.random_range(1..4)),
            _ => Op::Increment(rng.random_range(1..4)),
        },
        CrdtType::SetAw | CrdtType::SetRw | CrdtType::SetGo => match rng.random_range(0..5) {
            0 if ty != CrdtType::SetGo => Op::Reset,
            1 | 2 if ty != CrdtType::SetGo => Op::Remove(vec![elem(rng)]),
            _ => Op::Add(vec![elem(rng)]),
        },
        CrdtType::RegisterLww => Op::Assign(elem(rng)),
        CrdtType::RegisterMv => match rng.random_range(0..4) {
            0 => Op::Reset,
            _ => Op::Assign(elem(rng)),
        },
        CrdtType::FlagEw | CrdtType::FlagDw => match rng.random_range(0..5) {
            0 => Op::Reset,
            1 | 2 => Op::Disable,
            _ => Op::Enable,
        },
        CrdtType::MapGo | CrdtType::MapRr => {
            let nested = if ty == CrdtType::MapRr { CrdtType::SetAw } else { CrdtType::CounterPn };
            let key = MapKey { key: elem(rng), ty: nested };
            match rng.random_range(0..4) {
                0 if ty == CrdtType::MapRr => Op::MapRemove(vec![key]),
                _ => {
                    let op = random_op(nested, rng);
                    Op::MapUpdate(vec![(key, op)])
                }
            }
        }
    }
}

/// Records the checked writes of a step (those with a name and a write id) in a transaction's history record.
pub fn record_writes(record: &mut TxRecord, writes: &[Planned]) {
    for p in writes {
        if let (Some(object), Some((id, amount))) = (&p.name, p.write) {
            record.ops.push(HistOp::Write { object: object.clone(), id, amount });
        }
    }
}

/// What a read of a checked object of this kind observed, or `None` when the value is not of the object's type.
pub fn observed(kind: ObjectKind, value: &Value) -> Option<Observed> {
    Some(match (kind, value) {
        (ObjectKind::Set, Value::Set(elems)) => Observed::Set(elems.iter().map(|e| write_id(e)).collect()),
        (ObjectKind::Register, Value::Register(bytes)) => {
            Observed::Register(if bytes.is_empty() { None } else { Some(write_id(bytes)) })
        }
        (ObjectKind::Counter, Value::Counter(n)) => Observed::Counter(*n),
        _ => return None,
    })
}

/// Decodes a written value; a value of the wrong shape maps to an id no write has (a phantom).
pub fn write_id(bytes: &[u8]) -> WriteId {
    match <[u8; 8]>::try_from(bytes) {
        Ok(b) => u64::from_be_bytes(b),
        Err(_) => WriteId::MAX,
    }
}
