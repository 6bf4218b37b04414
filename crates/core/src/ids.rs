//! Identifiers, as newtypes.

use causet_crdt::{CrdtType, TxTag};
use serde::{Deserialize, Serialize};

/// A data centre's index, `0..dcs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct DcId(pub u16);

/// A partition's index inside a DC, `0..partitions`. Every DC has the same partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionId(pub u32);

/// A coordinator's identity inside a DC. The driver must never reuse one across restarts, since transaction ids
/// (and so CRDT tags) are built from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CoordinatorId(pub u32);

impl CoordinatorId {
    /// Bits of the shard (a coordinator per shard of a node).
    pub const SHARD_BITS: u32 = 8;
    /// Bits of the node's incarnation (it advances at every start of the node).
    pub const INCARNATION_BITS: u32 = 18;
    /// Bits of the node's index inside its DC.
    pub const NODE_BITS: u32 = 6;

    /// The id of shard `shard`'s coordinator on node `node` in its incarnation `incarnation` (taken modulo
    /// 2^18): unique among the DC's coordinators, and different from every coordinator of the node's earlier
    /// incarnations (until 2^18 restarts wrap around).
    pub fn compose(node: u16, incarnation: u64, shard: u32) -> Self {
        assert!(u32::from(node) < 1 << Self::NODE_BITS, "at most {} nodes per DC", 1 << Self::NODE_BITS);
        assert!(shard < 1 << Self::SHARD_BITS, "at most {} shards per node", 1 << Self::SHARD_BITS);
        let incarnation = (incarnation % (1 << Self::INCARNATION_BITS)) as u32;
        CoordinatorId(
            (u32::from(node) << (Self::INCARNATION_BITS + Self::SHARD_BITS))
                | (incarnation << Self::SHARD_BITS)
                | shard,
        )
    }

    /// The node it runs on.
    pub fn node(self) -> u16 {
        (self.0 >> (Self::INCARNATION_BITS + Self::SHARD_BITS)) as u16
    }

    /// Its node's incarnation (modulo 2^18).
    pub fn incarnation(self) -> u32 {
        (self.0 >> Self::SHARD_BITS) & ((1 << Self::INCARNATION_BITS) - 1)
    }

    /// Its shard.
    pub fn shard(self) -> u32 {
        self.0 & ((1 << Self::SHARD_BITS) - 1)
    }
}

/// A client connection or session, as the driver numbers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClientId(pub u64);

/// A request of one client, echoed in the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId(pub u64);

/// A transaction: its DC, its coordinator and the coordinator's sequence number. Unique across the system.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TxId {
    /// The DC it runs in.
    pub dc: DcId,
    /// The coordinator that runs it.
    pub coordinator: CoordinatorId,
    /// The coordinator's sequence number.
    pub seq: u64,
}

impl TxId {
    /// The CRDT tag identity of the transaction.
    pub fn tag(self) -> TxTag {
        TxTag((u128::from(self.dc.0) << 112) | (u128::from(self.coordinator.0) << 64) | u128::from(self.seq))
    }
}

impl std::fmt::Display for TxId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tx{}.{}.{}", self.dc.0, self.coordinator.0, self.seq)
    }
}

/// An object: key, bucket and type. Objects are never created or deleted; a missing one reads as its type's
/// initial value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ObjectId {
    /// The key.
    pub key: Vec<u8>,
    /// The bucket.
    pub bucket: Vec<u8>,
    /// The CRDT type.
    pub ty: CrdtType,
}

impl ObjectId {
    /// An object id.
    pub fn new(key: impl Into<Vec<u8>>, bucket: impl Into<Vec<u8>>, ty: CrdtType) -> Self {
        Self { key: key.into(), bucket: bucket.into(), ty }
    }

    /// The partition that owns the object among `partitions`: a stable hash of bucket and key (the type does not
    /// take part, as in AntidoteDB).
    pub fn partition(&self, partitions: u32) -> PartitionId {
        assert!(partitions > 0, "a DC has at least one partition");
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(&(self.bucket.len() as u64).to_le_bytes());
        h.update(&self.bucket);
        h.update(&self.key);
        PartitionId((h.digest() % u64::from(partitions)) as u32)
    }

    /// A 32-bit fingerprint of the object (bucket, key and type), the same at every DC: names it where its id
    /// would weigh too much (partial replication's notices of writes, [`crate::away`]). Two objects may share one
    /// (a notice then only keeps a cached state of the other from being raised).
    pub fn fingerprint(&self) -> u32 {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        h.update(&(self.bucket.len() as u64).to_le_bytes());
        h.update(&self.bucket);
        h.update(&(self.key.len() as u64).to_le_bytes());
        h.update(&self.key);
        h.update(&[self.ty as u8]);
        h.digest() as u32
    }
}
