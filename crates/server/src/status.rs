//! What `/status` shows of a shard.

use causet_core::node::Node;
use serde::Serialize;

/// A shard's state, for `/status`.
#[derive(Clone, Debug, Serialize)]
pub struct ShardStatus {
    /// The shard's index.
    pub shard: usize,
    /// The coordinator's open transactions.
    pub open_transactions: usize,
    /// The stable snapshot as the coordinator knows it.
    pub stable_snapshot: Vec<u64>,
    /// The partitions.
    pub partitions: Vec<PartitionStatus>,
}

/// A partition's state, for `/status`.
#[derive(Clone, Debug, Serialize)]
pub struct PartitionStatus {
    /// The partition.
    pub id: u32,
    /// Its pvc, one timestamp per DC (HLC, microseconds shifted left by 12 bits).
    pub pvc: Vec<u64>,
    /// Prepared transactions.
    pub prepared: usize,
    /// Requests waiting for their snapshot.
    pub waiting: usize,
    /// Objects ever written.
    pub objects: usize,
    /// Effects kept unfolded.
    pub versions: usize,
    /// Local transactions some peer DC has not acknowledged yet.
    pub replication_backlog: usize,
    /// Some local transactions a peer DC has not acknowledged no longer fit the replication window: they are in
    /// the log only, and read back from it when the peer needs them.
    pub replication_spilled: bool,
    /// Remote transactions received and waiting for their dependencies, per origin DC.
    pub inbound_backlog: Vec<(u16, usize)>,
}

impl ShardStatus {
    /// The status of one shard's node.
    pub fn of(node: &Node) -> Self {
        let partitions = node
            .partitions()
            .map(|p| {
                let (objects, versions) = p.store_size();
                PartitionStatus {
                    id: p.id().0,
                    pvc: p.pvc().entries().iter().map(|t| t.0).collect(),
                    prepared: p.prepared_count(),
                    waiting: p.waiting_count(),
                    objects,
                    versions,
                    replication_backlog: p.replication_backlog(),
                    replication_spilled: p.replication_spilled(),
                    inbound_backlog: p.inbound_backlog().into_iter().map(|(d, n)| (d.0, n)).collect(),
                }
            })
            .collect();
        let coordinator = node.coordinator();
        ShardStatus {
            shard: node.shard(),
            open_transactions: coordinator.open_transactions(),
            stable_snapshot: coordinator.stable_snapshot().entries().iter().map(|t| t.0).collect(),
            partitions,
        }
    }
}
