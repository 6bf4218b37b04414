//! Protocol configuration shared by the state machines of one DC.

// Re-exported so that `crate::config::Bug`, which the partition imports, keeps resolving now that the `bugs`
// module owns the deliberate bugs.
pub use crate::bugs::Bug;
use crate::{ClockKind, DcId};
use serde::{Deserialize, Serialize};

/// The configuration of one DC's state machines.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Config {
    /// Number of DCs (the length of every vector clock).
    pub dcs: u16,
    /// This DC.
    pub dc: DcId,
    /// Partitions per DC.
    pub partitions: u32,
    /// Which clock partitions and coordinators run.
    pub clock: ClockKind,
    /// Which consistency protocol the DC runs: Cure (default), or the GentleRain and eventual baselines.
    pub protocol: crate::Protocol,
    /// How often a partition reports its pvc to the stabilizer and the stabilizer publishes the stable snapshot.
    pub stable_interval_us: u64,
    /// How long a partition lets a read or prepare wait for its snapshot before answering with a timeout.
    pub wait_timeout_us: u64,
    /// How long an interactive transaction may stay idle (no client request) before it is aborted.
    pub tx_idle_timeout_us: u64,
    /// How long the coordinator waits for partitions to answer a read or a prepare before aborting.
    pub op_timeout_us: u64,
    /// Partial replication: how long a read of an object this DC does not hold waits for the holder in this DC's
    /// ring before it is asked of the holder in the next ring too (a holder cut off, down, or slow to catch up).
    #[serde(default = "default_ring_failover_us")]
    pub ring_failover_us: u64,
    /// How often the coordinator resends a commit or abort decision that a partition has not acknowledged, and how
    /// often a partition asks about a prepared transaction whose decision it has not heard.
    pub retry_interval_us: u64,
    /// The largest step a client clock or snapshot may ask a hybrid clock to jump ahead of physical time; further
    /// ahead is refused as an invalid clock.
    pub max_clock_ahead_us: u64,
    /// How far ahead of a hybrid clock the partition logs its clock bound ([`crate::record::LogRecord::ClockBound`]):
    /// a restarted partition starts its clock at most this far past what it exposed before the crash. A new bound
    /// is logged when the clock comes within a quarter of this of the last one (so about every three quarters of
    /// this interval while the clock follows physical time; [`crate::partition::BOUND_RENEW_DIVISOR`]).
    pub clock_bound_us: u64,
    /// Write-write certification of concurrent local updates to one object (AntidoteDB's `txn_cert`): a
    /// transaction that updates an object another transaction updated after its snapshot aborts. Off by default:
    /// CRDTs merge concurrent updates.
    pub certify_writes: bool,
    /// How often a partition ships its committed transactions (or a heartbeat) to the other DCs, and acknowledges
    /// what it applied from them.
    pub replication_interval_us: u64,
    /// Most local transactions a partition keeps in memory for peer DCs that have not acknowledged them; beyond,
    /// the oldest are read back from the log when a peer needs them, so a DC that is away costs the others disk,
    /// not memory.
    pub replication_window: usize,
    /// A peer that acknowledged nothing for this long is resent everything it has not acknowledged. (Also the
    /// stall after which a snapshot's stream of parts is sent again from what its receiver holds.)
    pub resend_after_us: u64,
    /// Static read-only transactions read at the DC's stable snapshot, raised to the client's clock, instead of at
    /// the coordinator's clock (Cure Alg. 1). Every partition's pvc is at or past that snapshot, so no read waits
    /// for a transaction prepared after it: CausalSpartanX's non-blocking read-only transactions (ROTX, Alg. 5.4).
    /// A read still includes everything its client's clock holds; the server raises that clock to every commit
    /// the node acknowledged.
    pub stable_reads: bool,
    /// Static reads fall back to the coordinator's clock while the stable snapshot's local entry lags it by more
    /// than this (a coordinator that has not heard the stable snapshot yet, or a DC whose stabilisation is stuck),
    /// so a read is never staler than this.
    pub stable_read_max_lag_us: u64,
    /// Most transactions one coordinator keeps open at once.
    pub max_open_transactions: usize,
    /// Most requests (reads and prepares) one partition keeps waiting at once.
    pub max_waiting_requests: usize,
    /// Most remote transactions one partition keeps waiting for their dependencies, per origin DC; beyond, it asks
    /// the origin to resend later.
    pub max_inbound_queue: usize,
    /// Nodes of this DC retired for good (`causet cluster retire`): the garbage-collection frontier does not wait for
    /// a report of their coordinators (a dead node's last report would hold it back for ever).
    pub retired_nodes: Vec<u16>,
    /// The coordinators' lease cache (HoneyPot; docs/design/honeypot.md), off when `None` (the default). Only
    /// with the Cure protocol: the cache needs snapshots that hold still.
    #[serde(default)]
    pub cache: Option<crate::cache::CacheConfig>,
    /// Which DCs hold which buckets: every DC (the default), or one DC per ring for the buckets placed by rings
    /// (Karma; [`crate::placement`]). The same at every DC.
    #[serde(default)]
    pub placement: crate::placement::Placement,
    /// Snapshots larger than this travel between replicas in parts of this size, a few at a time
    /// ([`crate::parts`]), so that other messages go between them.
    #[serde(default = "default_raft_part_bytes")]
    pub raft_part_bytes: usize,
    /// A replicated partition's election timeout: a follower that hears from no leader for this long (plus a
    /// random part of as much again) campaigns, and a leader that hears from no quorum for this long steps down.
    /// Rounded up to whole Raft ticks of 10 ms, at least three.
    #[serde(default = "default_raft_election_timeout_us")]
    pub raft_election_timeout_us: u64,
    /// A deliberate bug, for checker validation only. Honoured only where the build allows it; the state machines
    /// ask [`crate::bugs`] rather than reading this.
    pub bug: Option<Bug>,
}

fn default_ring_failover_us() -> u64 {
    500_000
}

fn default_raft_part_bytes() -> usize {
    1 << 20
}

fn default_raft_election_timeout_us() -> u64 {
    300_000
}

impl Config {
    /// Defaults for a DC of the given shape.
    pub fn new(dcs: u16, dc: DcId, partitions: u32) -> Self {
        assert!(dcs > 0 && dc.0 < dcs, "dc {} outside 0..{dcs}", dc.0);
        assert!(partitions > 0, "a DC needs at least one partition");
        Self {
            dcs,
            dc,
            partitions,
            clock: ClockKind::Hybrid,
            protocol: crate::Protocol::Cure,
            stable_interval_us: 1_000,
            wait_timeout_us: 5_000_000,
            tx_idle_timeout_us: 30_000_000,
            op_timeout_us: 10_000_000,
            ring_failover_us: default_ring_failover_us(),
            retry_interval_us: 100_000,
            max_clock_ahead_us: 1_000_000,
            clock_bound_us: 100_000,
            certify_writes: false,
            replication_interval_us: 1_000,
            replication_window: 8_192,
            resend_after_us: 500_000,
            stable_reads: true,
            stable_read_max_lag_us: 10_000,
            max_open_transactions: 100_000,
            max_waiting_requests: 100_000,
            max_inbound_queue: 100_000,
            retired_nodes: Vec::new(),
            cache: None,
            placement: crate::placement::Placement::full(),
            raft_part_bytes: default_raft_part_bytes(),
            raft_election_timeout_us: default_raft_election_timeout_us(),
            bug: None,
        }
    }

    /// The number of DCs as a vector length.
    pub fn vector_len(&self) -> usize {
        usize::from(self.dcs)
    }
}
