//! The deterministic simulator: one or more DCs, each of several nodes, and many client sessions, in one thread
//! with virtual time and one seeded random source. Each node runs the very code the server runs: one
//! [`causet_core::node::Node`] per shard, which routes every message by the DC's [`Topology`]; the simulator only
//! carries what the nodes hand it (between shards, nodes and DCs), stores their records, and injects faults.
//!
//! The network delays every message by a random amount (tiny between shards of a node, small inside a DC, a WAN
//! delay between DCs), reorders messages across links and keeps each link FIFO (Raft traffic between a
//! partition's replicas in a lane of its own). Links between DCs, and between two nodes of a DC, are cut and
//! healed. Every node has its own clock, skewed and drifting. Nodes crash and restart with a new incarnation;
//! their partitions' simulated disks (one per replica where partitions are Raft groups) lose everything not yet
//! synced, their coordinators' transactions are in doubt. Sessions may move to another DC, carrying their causal clock (Cure §IV-C). The run has a safety phase
//! (workload under faults) and a liveness phase: faults stop, links heal, crashed partitions restart, every session
//! must finish, and a final read at every DC must find every acknowledged write and the same values everywhere.

use crate::history::{HistOp, History, ObjectName, Outcome, TxRecord};
use crate::workload::{record_writes, Plan, Planned, Step, Workload, WorkloadConfig, RINGS_BUCKET};
use causet_core::coordinator::{
    BufferRecord, BufferToken, ClientClock, ClientRequest, ClientResponse, ReadFrom, TxError,
};
use causet_core::group::{DurableState, Entry, HardState};
use causet_core::node::{Destination, Layout, Node, NodeOutput, Stored};
use causet_core::partition::Checkpoint;
use causet_core::placement::{Placement, RingChoice};
use causet_core::record::{LogRecord, Lsn};
use causet_core::replica::{first_hosting, Hosting, InstalledSnapshot};
use causet_core::topology::{NodeIndex, Topology};
use causet_core::{
    Address, Bug, ClientId, ClockKind, Config, CoordinatorId, DcId, Envelope, ObjectId, PartitionId, RequestId,
    Timestamp, TxId, VectorClock,
};
use causet_crdt::Value;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

/// Virtual time starts here, so that negative clock offsets stay positive.
const EPOCH_US: u64 = 1_000_000_000;

/// Faults the simulator injects.
#[derive(Clone, Debug)]
pub struct Faults {
    /// Largest clock offset of a node from true time, either way.
    pub skew_us_max: u64,
    /// Largest clock drift, parts per million, either way.
    pub drift_ppm_max: u64,
    /// Smallest one-way message delay inside a DC.
    pub delay_us_min: u64,
    /// Largest one-way message delay inside a DC.
    pub delay_us_max: u64,
    /// Smallest one-way delay between DCs.
    pub wan_delay_us_min: u64,
    /// Largest one-way delay between DCs.
    pub wan_delay_us_max: u64,
    /// Mean time between node crashes that keep the node down for a while (0: none).
    pub crash_every_us: u64,
    /// Longest a crashed node stays down.
    pub downtime_us_max: u64,
    /// Longest an fsync takes.
    pub fsync_us_max: u64,
    /// Mean time between cuts of a link between two DCs (0: no cuts).
    pub cut_every_us: u64,
    /// Longest a cut lasts.
    pub cut_us_max: u64,
    /// Mean time between node crashes with an immediate restart (0: none): the node's coordinators lose their
    /// state and come back under new ids (a new incarnation); messages they sent before may still arrive late, and
    /// partitions holding their prepared transactions settle them with the termination protocol.
    pub coordinator_crash_every_us: u64,
    /// Mean time between cuts of a link between two nodes of one DC (0: none); a cut lasts up to `cut_us_max`.
    pub node_cut_every_us: u64,
    /// Mean time between disk losses (0: none): a node of a DC whose partitions are groups of three or more
    /// crashes, loses every disk, and comes back empty in a new generation; its replicas join their groups again.
    /// Only while every group of its DC has its whole membership (a second loss before the first was repaired
    /// could lose a majority's copy, which no protocol survives).
    ///
    /// (The node's record of which replicas it runs survives a disk loss in no form: it starts with none, and
    /// creates replicas as it hears which groups still count one of its earlier disk.)
    pub disk_loss_every_us: u64,
    /// Mean time between replica moves (0: none): the operator moves a partition's replica from one node of a DC
    /// (up or down) to a node that holds none, as `causet cluster move` does. Only in DCs with more nodes than
    /// replicas, and only for a partition whose group has the membership its last move asked for.
    pub move_every_us: u64,
}

impl Faults {
    /// No skew, tiny delays, no crashes, no cuts.
    pub fn none() -> Self {
        Self {
            skew_us_max: 0,
            drift_ppm_max: 0,
            delay_us_min: 10,
            delay_us_max: 100,
            wan_delay_us_min: 1_000,
            wan_delay_us_max: 2_000,
            crash_every_us: 0,
            downtime_us_max: 0,
            fsync_us_max: 100,
            cut_every_us: 0,
            cut_us_max: 0,
            coordinator_crash_every_us: 0,
            node_cut_every_us: 0,
            disk_loss_every_us: 0,
            move_every_us: 0,
        }
    }
}

/// One simulation's parameters. [`SimConfig::from_seed`] derives them all from the seed.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The seed of every random choice.
    pub seed: u64,
    /// Data centres.
    pub dcs: u16,
    /// Partitions in each DC.
    pub partitions: u32,
    /// Nodes in each DC.
    pub nodes: u16,
    /// Shards (driver tasks, each with a coordinator) of every node.
    pub shards: usize,
    /// Copies of each partition inside a DC, on distinct nodes (more than one: each partition is a Raft group).
    pub replicas: u16,
    /// Over how many of its nodes each DC's partitions start (0: all): a DC that grew, whose later nodes hold
    /// replicas only once moves bring them there.
    pub first_nodes: u16,
    /// When the nodes after the first `first_nodes` join their running DC (0: they run from the start, as if
    /// configured so): until then they are down and their DC's topology counts only the first nodes; then each
    /// starts with an empty disk of a new generation, and the DC's other nodes learn that the DC grew
    /// (`causet_core::node::Node::handle_dc_nodes`), as the server's nodes do from a newcomer's hello.
    pub join_at_us: u64,
    /// Most remote transactions a partition keeps waiting per origin.
    pub max_inbound_queue: usize,
    /// Most unacknowledged local transactions a partition keeps in memory; the rest are read back from the log.
    pub replication_window: usize,
    /// Client sessions.
    pub sessions: u32,
    /// Virtual duration of the safety phase.
    pub duration_us: u64,
    /// Largest think time of a session between transactions.
    pub think_us_max: u64,
    /// Probability that a session moves to another node or shard (of its DC) before a transaction.
    pub switch_coordinator: f64,
    /// Probability that a session moves to another DC before a transaction.
    pub switch_dc: f64,
    /// The clock partitions and coordinators run.
    pub clock: ClockKind,
    /// Write-write certification.
    pub certify_writes: bool,
    /// Static reads at the stable snapshot rather than the coordinator's clock.
    pub stable_reads: bool,
    /// Half the transactions read from the nearest replica ([`ReadFrom::Nearest`]).
    pub nearest_reads: bool,
    /// The coordinators' lease cache (HoneyPot), if on: transactions that do not read from the nearest replica
    /// read through it, except one in eight, which asks for fresh reads ([`ReadFrom::Fresh`]).
    pub cache: Option<causet_core::cache::CacheConfig>,
    /// Which DCs hold which buckets: in some seeds the workload's odd-numbered objects live in a bucket placed
    /// by rings ([`crate::workload::RINGS_BUCKET`]), held by one DC per ring.
    pub placement: Placement,
    /// A deliberate protocol bug (to validate the checker).
    pub bug: Option<Bug>,
    /// The protocol every DC runs.
    pub protocol: causet_core::Protocol,
    /// Snapshots larger than this go between replicas in parts (small in some seeds, so that they do).
    pub raft_part_bytes: usize,
    /// Faults.
    pub faults: Faults,
    /// The workload.
    pub workload: WorkloadConfig,
}

impl SimConfig {
    /// Parameters derived from a seed: topology, clocks, delays, crashes, cuts and workload all vary.
    pub fn from_seed(seed: u64) -> Self {
        Self::derive(seed, true)
    }

    /// The parameters `seed` derived before partitions could be Raft groups: the same draws, with one replica per
    /// partition and no cuts between nodes (seeds pinned for a failure found then keep testing what they found).
    pub fn from_seed_unreplicated(seed: u64) -> Self {
        Self::derive(seed, false)
    }

    fn derive(seed: u64, replication: bool) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed_c0de);
        let crashes = rng.random_bool(0.6);
        let dcs = [1, 1, 2, 3][rng.random_range(0..4)];
        let faults = Faults {
            skew_us_max: [0, 1_000, 20_000][rng.random_range(0..3)],
            drift_ppm_max: [0, 100, 1_000][rng.random_range(0..3)],
            delay_us_min: rng.random_range(10..200),
            delay_us_max: rng.random_range(200..5_000),
            wan_delay_us_min: rng.random_range(1_000..20_000),
            wan_delay_us_max: rng.random_range(20_000..60_000),
            crash_every_us: if crashes { rng.random_range(100_000..500_000) } else { 0 },
            downtime_us_max: rng.random_range(10_000..200_000),
            fsync_us_max: rng.random_range(20..2_000),
            cut_every_us: if dcs > 1 && rng.random_bool(0.6) { rng.random_range(100_000..600_000) } else { 0 },
            cut_us_max: rng.random_range(50_000..500_000),
            coordinator_crash_every_us: 0,
            node_cut_every_us: 0,
            disk_loss_every_us: 0,
            move_every_us: 0,
        };
        let workload = WorkloadConfig {
            keys: rng.random_range(3..40),
            extra_keys: rng.random_range(0..10),
            interactive: rng.random_range(0.2..0.9),
            update: rng.random_range(0.2..0.8),
            ..WorkloadConfig::default()
        };
        // Drawn from a second generator, so the draws above (and seeds without coordinator crashes) stay as they were.
        let mut extra = ChaCha8Rng::seed_from_u64(seed ^ 0xc0de_dead);
        let mut faults = faults;
        if extra.random_bool(0.4) {
            faults.coordinator_crash_every_us = extra.random_range(100_000..500_000);
        }
        let stable_reads = extra.random_bool(0.7);
        let nodes = [1, 1, 2, 3][extra.random_range(0..4)];
        let shards = extra.random_range(1..=2);
        // A tiny inbound queue in some seeds: receivers drop what does not fit and the origins resend.
        let max_inbound_queue = if extra.random_bool(0.3) { extra.random_range(1..=4) } else { 100_000 };
        // A tiny replication window in some seeds: senders read what peers lack back from the log.
        let replication_window = if extra.random_bool(0.4) { extra.random_range(1..=16) } else { 8_192 };
        // Replicated partitions in about half the seeds with several nodes per DC, from a third generator so the
        // draws above stay as they were. Some of those seeds get three nodes per DC and three replicas.
        let mut groups = ChaCha8Rng::seed_from_u64(seed ^ 0x0a1f_7a11);
        let (nodes, replicas) = match groups.random_range(0..4) {
            _ if !replication => (nodes, 1),
            0 => (3, 3),
            1 if nodes > 1 => (nodes, nodes),
            _ => (nodes, 1),
        };
        // Cuts between the nodes of a DC, in most seeds with replicated partitions.
        if replicas > 1 && groups.random_bool(0.7) {
            faults.node_cut_every_us = groups.random_range(100_000..600_000);
        }
        // Disk losses in half the seeds with groups of three, from a fourth generator.
        let mut disks = ChaCha8Rng::seed_from_u64(seed ^ 0xd15c_1055);
        if replicas >= 3 && disks.random_bool(0.5) {
            faults.disk_loss_every_us = disks.random_range(300_000..900_000);
        }
        // Reads from the nearest replica in half the seeds (from the same fourth generator, drawn after).
        let nearest_reads = replication && disks.random_bool(0.5);
        // A fourth node and replica moves in some seeds with groups of three, from a fifth generator.
        let mut moves = ChaCha8Rng::seed_from_u64(seed ^ 0x3070_e5e5);
        let (nodes, first_nodes) = if replicas == 3 && moves.random_bool(0.3) {
            faults.move_every_us = moves.random_range(200_000..700_000);
            // Half of them start on three of the four nodes, as a DC that just grew.
            (4, if moves.random_bool(0.5) { 3 } else { 0 })
        } else {
            (nodes, 0)
        };
        // In half of those, from a tenth generator, the fourth node joins while the DC runs, in the first half of
        // the run.
        let mut joining = ChaCha8Rng::seed_from_u64(seed ^ 0x701e_701e);
        let join_at_us =
            if first_nodes > 0 && joining.random_bool(0.5) { joining.random_range(1..1_000_000) } else { 0 };
        // The lease cache in two seeds of five, from a sixth generator: leases from 20 ms to half a second of the
        // 2 s run, and in some seeds a memory bound of a few entries, so that eviction happens.
        let mut caching = ChaCha8Rng::seed_from_u64(seed ^ 0xca5e_ca5e);
        let mut cache = caching.random_bool(0.4).then(|| causet_core::cache::CacheConfig {
            lease_us: caching.random_range(20_000..500_000),
            memory_bytes: if caching.random_bool(0.3) { caching.random_range(100..2_000) } else { 1 << 20 },
            ..Default::default()
        });
        // Buffered writes in half the seeds with a cache, from an eighth generator, with components of 1 to 16
        // objects. Crashes stay (the buffer's log brings the writes back), and sessions move between nodes and DCs
        // with their clock's buffer token. The buffer lives on one node's disk until its handover: those seeds
        // have no disk losses (nor certification, which a buffer does not go with).
        let mut buffering = ChaCha8Rng::seed_from_u64(seed ^ 0xb0ff_e125);
        if let Some(cache) = cache.as_mut().filter(|_| buffering.random_bool(0.5)) {
            cache.buffer_writes = true;
            cache.max_component_objects = buffering.random_range(1..=16);
            faults.disk_loss_every_us = 0;
        }
        // The cache's gate, from a ninth generator: never bypassing, the default share, or a share that most
        // leases miss (so transactions switch between the cache and fresh reads, buffered writes handed over first).
        let mut gating = ChaCha8Rng::seed_from_u64(seed ^ 0x6a7e_6a7e);
        if let Some(cache) = cache.as_mut() {
            cache.bypass_below_percent = [0, 20, 20, 90][gating.random_range(0..4)];
        }
        // Snapshots in parts of a few hundred bytes in half the seeds with groups, from a seventh generator.
        let mut parting = ChaCha8Rng::seed_from_u64(seed ^ 0x9a27_5a27);
        let raft_part_bytes = if replicas > 1 && parting.random_bool(0.5) {
            parting.random_range(64..2_048)
        } else {
            causet_core::Config::new(1, DcId(0), 1).raft_part_bytes
        };
        let mut config = Self {
            seed,
            dcs,
            partitions: rng.random_range(1..=6),
            nodes,
            shards,
            replicas,
            first_nodes,
            join_at_us,
            max_inbound_queue,
            replication_window,
            sessions: {
                // The draw that once chose a number of coordinators, kept so that the draws after it stay as
                // they were.
                let _ = rng.random_range(1..=3u32);
                rng.random_range(2..=16)
            },
            duration_us: 2_000_000,
            think_us_max: rng.random_range(0..5_000),
            switch_coordinator: rng.random_range(0.0..0.3),
            switch_dc: if dcs > 1 { rng.random_range(0.0..0.2) } else { 0.0 },
            clock: if rng.random_bool(0.7) { ClockKind::Hybrid } else { ClockKind::Physical },
            certify_writes: rng.random_bool(0.2) && !cache.as_ref().is_some_and(|c| c.buffer_writes),
            stable_reads,
            nearest_reads,
            cache,
            placement: Placement::full(),
            bug: None,
            protocol: causet_core::Protocol::Cure,
            raft_part_bytes,
            faults,
            workload,
        };
        // Partial replication in half the seeds of several DCs without buffered writes or certification (neither
        // goes with it yet; the lease cache does, and caches objects held at other DCs), from a ninth generator:
        // rings of one, two or three DCs, and half the workload's objects in a bucket placed by them, so that
        // sessions use objects their DC does not hold.
        let mut placing = ChaCha8Rng::seed_from_u64(seed ^ 0x0091_a1ce);
        let buffers = config.cache.as_ref().is_some_and(|c| c.buffer_writes);
        if dcs > 1 && !buffers && !config.certify_writes && placing.random_bool(0.5) {
            let rings = match (dcs, placing.random_range(0..4)) {
                (2, 0) => vec![vec![0], vec![1]],
                (2, _) => vec![vec![0, 1]],
                (_, 0) => vec![vec![0, 1], vec![2]],
                (_, 1) => vec![vec![0], vec![1, 2]],
                (_, 2) => vec![vec![0, 2], vec![1]],
                _ => vec![vec![0, 1, 2]],
            };
            // Reads from the nearest ring (measured) in three seeds of four, static ring binding in the rest, from
            // a generator of their own (so that the other choices draw as before).
            let mut choosing = ChaCha8Rng::seed_from_u64(seed ^ 0x0091_c401);
            let choice = if choosing.random_bool(0.25) { RingChoice::Own } else { RingChoice::Nearest };
            config.placement = Placement::of_indices(&rings, [RINGS_BUCKET.to_vec()]).reading_from(choice);
            config.workload.rings_bucket = true;
        }
        config
    }

    /// The configuration the state machines of DC `dc` run with.
    pub fn dc_config(&self, dc: DcId) -> Config {
        let mut c = Config::new(self.dcs, dc, self.partitions);
        c.clock = self.clock;
        c.certify_writes = self.certify_writes;
        c.stable_reads = self.stable_reads;
        c.placement = self.placement.clone();
        c.cache = self.cache.clone().filter(|_| self.protocol == causet_core::Protocol::Cure);
        c.bug = self.bug;
        c.protocol = self.protocol;
        c.op_timeout_us = 500_000;
        c.ring_failover_us = 100_000;
        c.retry_interval_us = 20_000;
        c.wait_timeout_us = 400_000;
        c.tx_idle_timeout_us = 1_000_000;
        c.resend_after_us = 100_000;
        c.max_inbound_queue = self.max_inbound_queue;
        c.replication_window = self.replication_window;
        c.raft_part_bytes = self.raft_part_bytes;
        c
    }
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Transactions committed.
    pub committed: u64,
    /// Transactions aborted (by request, refusal or timeout).
    pub aborted: u64,
    /// Commits whose outcome the client could not learn (a timeout while committing).
    pub unknown: u64,
    /// Messages delivered.
    pub messages: u64,
    /// Messages dropped by a cut link.
    pub dropped: u64,
    /// Node crashes that kept the node down for a while.
    pub crashes: u64,
    /// Node crashes with an immediate restart.
    pub coordinator_crashes: u64,
    /// Link cuts between DCs.
    pub cuts: u64,
    /// Link cuts between two nodes of one DC.
    pub node_cuts: u64,
    /// Checkpoints taken.
    pub checkpoints: u64,
    /// Reads of a partition's log (replication catching a peer up from it).
    pub log_reads: u64,
    /// Events processed.
    pub events: u64,
    /// Virtual time simulated, µs.
    pub virtual_us: u64,
    /// Effects applied by partitions to serve reads.
    pub read_effects_applied: u64,
    /// Reads served by partitions.
    pub reads: u64,
    /// Requests coordinators sent again to a partition's new leader (coordinators alive at the end).
    pub resends: u64,
    /// Prepares partitions turned away as duplicates of transactions that had ended there (partitions serving at
    /// the end).
    pub duplicate_prepares: u64,
    /// Replicas' stored checkpoints read back (to rebuild a partition, or to send it as a snapshot).
    pub group_loads: u64,
    /// Snapshots installed by replicas (those alive at the end).
    pub snapshots_installed: u64,
    /// Parts of snapshots sent, and snapshot streams received whole (replicas alive at the end).
    pub snapshot_parts: (u64, u64),
    /// Nodes that lost their disks and came back empty.
    pub disk_losses: u64,
    /// Membership changes applied by replicas (those alive at the end).
    pub membership_changes: u64,
    /// Replica moves the operator asked for, and replicas that left their group (their state deleted).
    pub replica_moves: u64,
    /// See `replica_moves`.
    pub replicas_removed: u64,
    /// Nodes that joined their running DC.
    pub joins: u64,
    /// Reads served by followers for the nearest replica, and those they passed on to the leader (replicas alive
    /// at the end).
    pub nearest_reads: (u64, u64),
    /// Reads the coordinators' lease caches served, missed (not cached, or the lease ended) and fetched again (the
    /// cached box missed the transaction's window), over the coordinators alive at the end.
    pub cache_reads: (u64, u64, u64),
    /// Of the cache's hits, those on states held at another DC that were exact because their reader's DC had not
    /// written them since (partial replication, `causet_core::away`).
    pub cache_extended: u64,
    /// States of objects held elsewhere that writes made stale, fetched again in the background (asked, cached,
    /// and reads that waited for one in flight and were served by it), over the coordinators alive at the end.
    pub cache_refreshes: (u64, u64, u64),
    /// Transactions that read fresh because their coordinator's cache gate was bypassing a cache with too few hits,
    /// over the coordinators alive at the end.
    pub cache_bypassed: u64,
    /// Update transactions the coordinators buffered, components they handed over, and effects folded into an
    /// earlier one, over the coordinators alive at the end.
    pub buffered: (u64, u64, u64),
    /// Starts whose session's clock named another coordinator's write buffer (the session moved), and questions
    /// for a handover that coordinators answered.
    pub token_moves: (u64, u64),
    /// Reads sent to another DC, of objects their DC does not hold (partial replication), and those of them asked
    /// of another ring's holder too.
    pub remote_reads: (u64, u64),
    /// Copies of reads sent to other rings' holders only to measure them (reads from the nearest ring).
    pub ring_probes: u64,
}

/// The liveness phase's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Every session finished, every acknowledged write was found at every DC, and the DCs converged.
    Ok,
    /// Something did not finish, got lost, or diverged.
    Failed(Vec<String>),
}

/// A run's result.
#[derive(Debug)]
pub struct SimOutcome {
    /// The recorded history.
    pub history: History,
    /// Counters.
    pub stats: SimStats,
    /// The liveness phase's verdict.
    pub liveness: Liveness,
}

/// A node of some DC.
type NodeRef = (DcId, NodeIndex);
/// One shard of a node: where timers and client requests go.
type Site = (DcId, NodeIndex, usize);

#[derive(Debug)]
enum Event {
    /// A message to a node (its shards are picked on arrival, as the server's links do).
    Deliver(NodeRef, Envelope),
    /// A message of a crashed coordinator, held up on its way (it arrives late, in its link's order).
    DeliverLate(NodeRef, Envelope),
    /// The node's answer for a coordinator of its earlier incarnation ([`causet_core::Message::CoordinatorGone`]):
    /// it leaves after the crash, so it is not one of the crashed coordinator's messages that are held up.
    DeliverForGone(NodeRef, Envelope),
    /// A client request to a shard of a node (lost if that node crashed meanwhile).
    Request {
        site: Site,
        incarnation: u64,
        client: ClientId,
        request: RequestId,
        body: ClientRequest,
    },
    Reply(causet_core::coordinator::ClientReply),
    Timer(Site),
    Fsync {
        dc: DcId,
        partition: u32,
        incarnation: u64,
        lsn: Lsn,
    },
    /// A replica's first `count` pending Writes and checkpoints reached its disk, up to the Write `ready` (lost
    /// if its node crashed meanwhile).
    GroupFsync {
        node: NodeRef,
        partition: u32,
        incarnation: u64,
        epoch: u64,
        count: usize,
        ready: Option<u64>,
    },
    /// A coordinator's write-buffer log reached its disk up to `lsn` (lost if its node crashed meanwhile).
    BufferFsync {
        site: Site,
        incarnation: u64,
        lsn: Lsn,
    },
    /// A replica's checkpoint is read from its disk, for the node that asked (lost if it crashed meanwhile).
    GroupLoad {
        node: NodeRef,
        partition: u32,
        incarnation: u64,
        epoch: u64,
    },
    /// A node crashes; it restarts after this long (0: at once).
    Crash(NodeRef, u64),
    Restart(NodeRef),
    CrashNodeAtOnce(DcId, NodeIndex),
    Think(u64),
    Checkpoint(DcId, u32),
    /// Records read back from a partition's log, for the node that asked (lost if it crashed meanwhile).
    LogRead {
        dc: DcId,
        partition: u32,
        incarnation: u64,
        records: Vec<(Lsn, LogRecord)>,
    },
    Cut,
    Heal(DcId, DcId),
    /// Cut a link between two nodes of a DC.
    CutNodes,
    /// A node loses its disks (if its DC's groups are whole).
    LoseDisk,
    /// The operator moves a replica to another node.
    MoveReplica,
    /// The operator asks again for a move that has not happened yet (the target node was down, say), as
    /// `causet cluster move` does until the partition's membership shows it.
    MoveRetry(DcId, u32),
    HealNodes(DcId, NodeIndex, NodeIndex),
    /// The nodes after the DC's first join it ([`SimConfig::join_at_us`]).
    Join(DcId),
}

#[derive(Debug, Clone, Copy)]
struct NodeClock {
    offset_us: i64,
    drift_ppm: i64,
}

impl NodeClock {
    fn local(&self, now: u64) -> u64 {
        let elapsed = (now - EPOCH_US) as i128;
        let drifted = elapsed + elapsed * i128::from(self.drift_ppm) / 1_000_000;
        (i128::from(EPOCH_US) + drifted + i128::from(self.offset_us)) as u64
    }

    /// The first virtual time at which the local clock reads at least `local`.
    fn virtual_at(&self, local: u64, now: u64) -> u64 {
        let target = i128::from(local) - i128::from(self.offset_us) - i128::from(EPOCH_US);
        let elapsed = target * 1_000_000 / (1_000_000 + i128::from(self.drift_ppm));
        let mut v = (i128::from(EPOCH_US) + elapsed).max(i128::from(now)) as u64;
        while self.local(v) < local {
            v += 1;
        }
        v
    }
}

#[derive(Debug, Default)]
struct Disk {
    records: Vec<(Lsn, LogRecord)>,
    durable: Lsn,
    syncing: bool,
    /// The merged, durable checkpoint: every object's latest image.
    checkpoint: Option<Checkpoint>,
    /// Checkpoints taken but not yet covered by an fsync.
    pending: Vec<Checkpoint>,
    /// Checkpoints the fsync in flight covers.
    in_sync: Vec<Checkpoint>,
}

impl Disk {
    /// A checkpoint became durable: merge it and truncate the log it covers.
    fn install(&mut self, c: Checkpoint) {
        let merged = c.merged_onto(self.checkpoint.take());
        // Truncate what the checkpoint covers, but not what it keeps for replication to read back.
        let through = merged.truncate_through();
        self.records.retain(|(l, _)| *l > through);
        self.checkpoint = Some(merged);
    }
}

/// The disk of a coordinator's write-buffer log.
#[derive(Debug, Default)]
struct BufferDisk {
    records: Vec<(Lsn, BufferRecord)>,
    durable: Lsn,
    syncing: bool,
}

/// The disk of one replica of a replicated partition: what its group wrote, and its checkpoints.
#[derive(Debug, Default)]
struct GroupDisk {
    /// Bumped when the replica leaves its group and its state is deleted: a sync or load of the replica that
    /// left never reaches the next one.
    epoch: u64,
    /// What survives a crash: the log (its `applied` is the checkpoint's lsn), and the merged checkpoint.
    durable: DurableState,
    checkpoint: Option<Checkpoint>,
    /// Writes and checkpoints not yet synced, in order: lost by a crash.
    unsynced: Vec<GroupPending>,
    syncing: bool,
}

/// What a replica's disk was given to write.
#[derive(Debug)]
enum GroupPending {
    Write(u64, Option<Box<InstalledSnapshot>>, Vec<Entry>, Option<HardState>),
    Checkpoint(Box<Checkpoint>),
}

impl GroupDisk {
    /// The sync in flight covered the first `count` items: they reached the disk, in order, each atomically.
    fn sync(&mut self, count: usize) {
        self.syncing = false;
        for item in self.unsynced.drain(..count) {
            match item {
                GroupPending::Write(_, snapshot, entries, hard_state) => {
                    if let Some(s) = snapshot {
                        // The snapshot replaces the log and the checkpoint.
                        self.durable.install(s.compacted, s.entries, s.checkpoint.lsn);
                        self.checkpoint = Some(s.checkpoint);
                    }
                    self.durable.apply_write(None, entries, hard_state);
                }
                GroupPending::Checkpoint(c) => {
                    // Truncate the entries it covers, but not those it keeps for replication to read back.
                    self.durable.compact(c.truncate_through());
                    self.durable.applied = c.lsn;
                    self.checkpoint = Some((*c).merged_onto(self.checkpoint.take()));
                }
            }
        }
    }
}

#[derive(Debug)]
struct ActiveTx {
    record: TxRecord,
    plan: Plan,
    step: usize,
    tx: Option<TxId>,
    /// Writes of the request in flight, recorded once it succeeds.
    in_flight: Vec<Planned>,
}

#[derive(Debug)]
struct Session {
    id: u64,
    dc: DcId,
    /// The node and shard the session talks to.
    node: NodeIndex,
    shard: usize,
    clock: Option<VectorClock>,
    /// The write buffer its clock depends on (the last reply's; see `causet_core::coordinator::ClientClock`).
    token: Option<BufferToken>,
    next_request: u64,
    /// The request whose reply the session waits for.
    awaiting: Option<RequestId>,
    active: Option<ActiveTx>,
}

/// One simulated server process.
#[derive(Debug)]
struct SimNode {
    /// Its shards, each the server's own node code; empty while the node is down.
    shards: Vec<Node>,
    incarnation: u64,
    /// Its disks' generation: a new one after each disk loss.
    generation: u64,
}

impl SimNode {
    fn is_up(&self) -> bool {
        !self.shards.is_empty()
    }
}

/// One simulated DC.
struct Dc {
    config: Config,
    topology: Topology,
    /// Shards of every node.
    shards: usize,
    nodes: Vec<SimNode>,
    /// Each partition's disk, by partition index (partitions that are not replicated).
    disks: Vec<Disk>,
    /// Each replica's disk, by node and partition (replicated partitions).
    group_disks: BTreeMap<(NodeIndex, u32), GroupDisk>,
    /// Each coordinator's write-buffer log, by node and shard.
    buffer_disks: BTreeMap<(NodeIndex, usize), BufferDisk>,
    /// Which replica each node runs for each replicated partition, by node, as its store records it (written at
    /// once: the server writes it before the replica's own writes, in order).
    hosting: Vec<BTreeMap<PartitionId, Hosting>>,
    /// Where each replicated partition is to live: the topology's placement, changed by each move.
    placement: BTreeMap<u32, Vec<NodeIndex>>,
}

impl Dc {
    fn layout(&self, node: NodeIndex) -> Layout {
        let n = &self.nodes[usize::from(node)];
        Layout::new(node, self.shards, n.incarnation).with_generation(n.generation)
    }

    /// Why the DC's groups are not whole, one line per group (empty when they are): each group's leader sees
    /// every node of the placement in its membership, as a voter of the node's current disk generation, and no
    /// joint configuration or learner. Every node must be up.
    fn unwhole_groups(&self) -> Vec<String> {
        if self.nodes.iter().take(usize::from(self.topology.nodes(self.topology.dc()))).any(|n| !n.is_up()) {
            return vec!["a node is down".into()];
        }
        let mut reasons = Vec::new();
        let leaders = self.nodes.iter().flat_map(|n| &n.shards).flat_map(Node::replicas).filter(|r| r.serving());
        let mut led = BTreeSet::new();
        for r in leaders {
            led.insert(r.id().0);
            if !self.whole(r) {
                reasons.push(format!("partition {}: membership {:?}", r.id().0, r.group().membership()));
            }
        }
        reasons.extend(
            (0..self.config.partitions).filter(|p| !led.contains(p)).map(|p| format!("partition {p}: no leader")),
        );
        reasons
    }

    /// Whether serving replica `r`'s group has the membership the placement asks for: a voter on each node of it,
    /// of the node's current disk generation, and no joint configuration or learner.
    fn whole(&self, r: &causet_core::replica::Replica) -> bool {
        use causet_core::replica::{replica_generation, replica_node};
        let m = r.group().membership();
        let placement = &self.placement[&r.id().0];
        let current = |id: &causet_core::group::ReplicaId| {
            let node = replica_node(*id);
            placement.contains(&node) && replica_generation(*id) == self.nodes[usize::from(node)].generation
        };
        !m.is_joint() && m.learners.is_empty() && m.voters.len() == placement.len() && m.voters.iter().all(current)
    }

    /// The partitions whose serving leader has the membership the placement asks for ([`Dc::whole`]).
    fn settled(&self) -> impl Iterator<Item = u32> + '_ {
        (self.nodes.iter().flat_map(|n| &n.shards).flat_map(Node::replicas))
            .filter(|r| r.serving() && self.whole(r))
            .map(|r| r.id().0)
    }

    /// The DC's stable snapshot: the least of its running nodes' stabilizers (each node runs one), `None` while
    /// every node is down.
    fn stable_snapshot(&self) -> Option<VectorClock> {
        let mut stables = self.nodes.iter().filter_map(|n| n.shards.first()?.stabilizer()).map(|s| s.stable_snapshot());
        let first = stables.next()?.clone();
        Some(stables.fold(first, |mut least, s| {
            least.merge_min(s);
            least
        }))
    }

    /// The partitions running on the DC's nodes that are up.
    fn partitions(&self) -> impl Iterator<Item = &causet_core::partition::Partition> {
        self.nodes.iter().flat_map(|n| &n.shards).flat_map(Node::partitions)
    }

    /// A partition's home node.
    fn home(&self, p: u32) -> NodeIndex {
        self.topology.home(self.config.dc, PartitionId(p)).expect("a DC knows its own shape")
    }

    /// A partition's home node and the shard of that node that runs it.
    fn site_of(&self, p: u32) -> (NodeIndex, usize) {
        let n = self.home(p);
        (n, self.layout(n).shard_of(&self.topology, PartitionId(p)))
    }
}

/// The simulated world.
pub struct World {
    config: SimConfig,
    rng: ChaCha8Rng,
    /// Draws of the immediate node restarts (apart, so seeds without them draw everything else as before).
    coordinator_rng: ChaCha8Rng,
    /// Draws of disk losses (apart likewise).
    disk_rng: ChaCha8Rng,
    /// Draws of replica moves (apart likewise).
    move_rng: ChaCha8Rng,
    /// Moves not done yet: (DC, partition) → (from, to).
    pending_moves: BTreeMap<(DcId, u32), (NodeIndex, NodeIndex)>,
    /// Crashed coordinators whose messages still in flight are held up, by how long.
    held_up: BTreeMap<(DcId, CoordinatorId), u64>,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64, usize)>>,
    slots: Vec<Option<Event>>,
    free_slots: Vec<usize>,
    dcs: Vec<Dc>,
    clocks: BTreeMap<NodeRef, NodeClock>,
    timers: BTreeMap<Site, u64>,
    /// The last delivery time on each link (FIFO): from a shard to a node.
    /// Raft traffic between a partition's replicas has a lane of its own (a FIFO link apart), as it would on its
    /// own connection: a straggling coordinator message holds up its link, and an election cannot wait that long.
    links: BTreeMap<(Site, NodeRef, bool), u64>,
    cut: BTreeSet<(DcId, DcId)>,
    /// Links cut between two nodes of one DC: (DC, lower node, higher node).
    node_cuts: BTreeSet<(DcId, NodeIndex, NodeIndex)>,
    sessions: Vec<Session>,
    workload: Workload,
    history: History,
    stats: SimStats,
    faults_on: bool,
    workload_on: bool,
    /// The values of the last static read answered (for the final reads).
    last_values: Option<Vec<Value>>,
    /// Debugging aids, read from the environment once: `CAUSET_SIM_TRACE=<substring>` prints replication
    /// traffic, crashes, cuts and checkpoints whose description contains the substring; `CAUSET_SIM_MSGS` prints
    /// every message delivered (Raft messages decoded).
    trace: Option<String>,
    trace_messages: bool,
}

fn pair(a: DcId, b: DcId) -> (DcId, DcId) {
    (a.min(b), a.max(b))
}

impl World {
    /// Builds the DCs for a configuration.
    pub fn new(config: SimConfig) -> Self {
        assert!(config.dcs >= 1 && config.nodes >= 1 && config.shards >= 1 && config.partitions >= 1);
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let now = EPOCH_US;
        let mut clocks = BTreeMap::new();
        let mut dcs = Vec::new();
        // Nodes that join later are not the DC's yet: its topology (and its peers') counts its first nodes.
        let joins = config.join_at_us > 0 && config.first_nodes > 0 && config.first_nodes < config.nodes;
        let known = if joins { config.first_nodes } else { config.nodes };
        for d in 0..config.dcs {
            let dc = DcId(d);
            let mut topology = Topology::new(dc, config.dcs, config.partitions, known)
                .with_replicas(config.replicas)
                .with_placement(config.placement.clone());
            if config.first_nodes > 0 && !joins {
                topology = topology.with_first_nodes(config.first_nodes);
            }
            for other in (0..config.dcs).filter(|o| *o != d) {
                topology.set_dc_nodes(DcId(other), known);
            }
            for n in 0..config.nodes {
                let skew = config.faults.skew_us_max as i64;
                let drift = config.faults.drift_ppm_max as i64;
                let clock = NodeClock {
                    offset_us: rng.random_range(-skew..=skew),
                    drift_ppm: rng.random_range(-drift..=drift),
                };
                clocks.insert((dc, n), clock);
            }
            dcs.push(Dc {
                config: config.dc_config(dc),
                shards: config.shards,
                nodes: (0..config.nodes)
                    .map(|_| SimNode { shards: Vec::new(), incarnation: 0, generation: 0 })
                    .collect(),
                disks: (0..config.partitions).map(|_| Disk::default()).collect(),
                group_disks: BTreeMap::new(),
                buffer_disks: BTreeMap::new(),
                hosting: (0..config.nodes).map(|n| first_hosting(&topology, n, 0)).collect(),
                placement: (0..config.partitions)
                    .filter(|_| topology.replicated())
                    .map(|p| (p, topology.replicas(PartitionId(p)).nodes))
                    .collect(),
                topology,
            });
        }
        let sessions = (0..u64::from(config.sessions))
            .map(|id| Session {
                id,
                dc: DcId((id % u64::from(config.dcs)) as u16),
                node: (id % u64::from(config.nodes)) as NodeIndex,
                shard: (id / u64::from(config.nodes)) as usize % config.shards,
                clock: None,
                token: None,
                next_request: 0,
                awaiting: None,
                active: None,
            })
            .collect();
        let mut world = World {
            workload: Workload::new(config.workload.clone()),
            dcs,
            clocks,
            timers: BTreeMap::new(),
            links: BTreeMap::new(),
            cut: BTreeSet::new(),
            node_cuts: BTreeSet::new(),
            sessions,
            history: History::default(),
            stats: SimStats::default(),
            faults_on: true,
            workload_on: true,
            last_values: None,
            trace: std::env::var("CAUSET_SIM_TRACE").ok(),
            trace_messages: std::env::var_os("CAUSET_SIM_MSGS").is_some(),
            coordinator_rng: ChaCha8Rng::seed_from_u64(config.seed ^ 0xdead_c0de),
            disk_rng: ChaCha8Rng::seed_from_u64(config.seed ^ 0xd15c_d15c),
            move_rng: ChaCha8Rng::seed_from_u64(config.seed ^ 0x3070_e5e5),
            pending_moves: BTreeMap::new(),
            held_up: BTreeMap::new(),
            rng,
            now,
            seq: 0,
            events: BinaryHeap::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            config,
        };
        for d in 0..world.config.dcs {
            for n in 0..world.config.nodes.min(known) {
                world.start_node((DcId(d), n));
            }
            if joins {
                world.schedule(world.config.join_at_us, Event::Join(DcId(d)));
            }
            for p in 0..world.config.partitions {
                let at = world.rng.random_range(10_000..300_000);
                world.schedule(at, Event::Checkpoint(DcId(d), p));
            }
        }
        for s in 0..world.sessions.len() as u64 {
            let think = world.rng.random_range(0..=world.config.think_us_max);
            world.schedule(think, Event::Think(s));
        }
        if world.config.faults.crash_every_us > 0 {
            let at = world.rng.random_range(0..world.config.faults.crash_every_us * 2);
            let victim = world.victim();
            let down = world.downtime();
            world.schedule(at, Event::Crash(victim, down));
        }
        if world.config.faults.cut_every_us > 0 {
            let at = world.rng.random_range(0..world.config.faults.cut_every_us * 2);
            world.schedule(at, Event::Cut);
        }
        if world.config.faults.coordinator_crash_every_us > 0 {
            world.schedule_coordinator_crash();
        }
        if world.config.faults.node_cut_every_us > 0 {
            let at = world.coordinator_rng.random_range(0..world.config.faults.node_cut_every_us * 2);
            world.schedule(at, Event::CutNodes);
        }
        if world.config.faults.disk_loss_every_us > 0 {
            let at = world.disk_rng.random_range(0..world.config.faults.disk_loss_every_us * 2);
            world.schedule(at, Event::LoseDisk);
        }
        if world.config.faults.move_every_us > 0 {
            let at = world.move_rng.random_range(0..world.config.faults.move_every_us * 2);
            world.schedule(at, Event::MoveReplica);
        }
        world
    }

    fn schedule_coordinator_crash(&mut self) {
        let every = self.config.faults.coordinator_crash_every_us;
        let at = self.coordinator_rng.random_range(every / 2..=every * 3 / 2);
        let dc = DcId(self.coordinator_rng.random_range(0..self.config.dcs));
        let node = self.coordinator_rng.random_range(0..self.config.nodes);
        self.schedule(at, Event::CrashNodeAtOnce(dc, node));
    }

    fn victim(&mut self) -> NodeRef {
        (DcId(self.rng.random_range(0..self.config.dcs)), self.rng.random_range(0..self.config.nodes))
    }

    fn downtime(&mut self) -> u64 {
        self.rng.random_range(1..=self.config.faults.downtime_us_max.max(1))
    }

    /// Starts a node (again): every shard recovers its partitions from their disks, under the node's current
    /// incarnation.
    fn start_node(&mut self, node: NodeRef) {
        let (dc, n) = node;
        let now = self.local(node);
        let shards = self.config.shards;
        let d = &mut self.dcs[usize::from(dc.0)];
        assert!(!d.nodes[usize::from(n)].is_up(), "a node starts only when it is down");
        let layout = d.layout(n);
        let mut started = Vec::new();
        for shard in 0..shards {
            // A replica that never wrote starts empty, as the node starts any partition missing here.
            let hosting = (d.hosting[usize::from(n)].iter())
                .filter(|(p, _)| layout.shard_of(&d.topology, **p) == shard)
                .map(|(p, h)| (*p, *h))
                .collect();
            let mut stored = Stored::of_hosting(&hosting, |p| {
                let disk = d.group_disks.get(&(n, p.0));
                Ok::<_, ()>(disk.map_or_else(Default::default, |disk| (disk.durable.clone(), disk.checkpoint.clone())))
            })
            .expect("a simulated disk reads");
            stored.extend(layout.partitions_of_shard(&d.topology, shard).filter(|_| !d.topology.replicated()).map(
                |p| {
                    let disk = &d.disks[p.0 as usize];
                    Stored::Partition(p, disk.checkpoint.clone().map(Box::new), disk.records.clone())
                },
            ));
            let buffer_log = d.buffer_disks.get(&(n, shard)).map_or_else(Vec::new, |disk| disk.records.clone());
            started.push(Node::recover(d.config.clone(), d.topology.clone(), layout, shard, now, stored, buffer_log));
        }
        d.nodes[usize::from(n)].shards = started;
        for shard in 0..shards {
            self.timers.remove(&(dc, n, shard));
            self.drain((dc, n, shard));
        }
    }

    /// A node crashes: every shard's state is lost (coordinators, prepared transactions not yet durable, the
    /// stabilizer if it ran there), its partitions' disks lose what was not synced, and it restarts after
    /// `down_us` under its next incarnation. Requests in flight to it are lost; its sessions learn nothing of their
    /// open transactions: a commit requested is in doubt, anything else never committed.
    fn crash(&mut self, node: NodeRef, down_us: u64) {
        if !self.faults_on {
            return;
        }
        let (dc, n) = node;
        let d = &mut self.dcs[usize::from(dc.0)];
        if !d.nodes[usize::from(n)].is_up() {
            return;
        }
        let old = d.layout(n);
        d.nodes[usize::from(n)].shards.clear();
        d.nodes[usize::from(n)].incarnation += 1;
        for ((_, _), disk) in d.group_disks.range_mut((n, 0)..=(n, u32::MAX)) {
            disk.unsynced.clear();
            disk.syncing = false;
        }
        for ((_, _), disk) in d.buffer_disks.range_mut((n, 0)..=(n, usize::MAX)) {
            let durable = disk.durable;
            disk.records.retain(|(lsn, _)| *lsn <= durable);
            disk.syncing = false;
        }
        for p in d.topology.partitions_on(n).filter(|_| !d.topology.replicated()).collect::<Vec<_>>() {
            let disk = &mut d.disks[p.0 as usize];
            let durable = disk.durable;
            disk.records.retain(|(lsn, _)| *lsn <= durable);
            disk.syncing = false;
            disk.pending.clear();
            disk.in_sync.clear();
        }
        if down_us == 0 && self.coordinator_rng.random_bool(0.5) {
            // Its coordinators' last messages (a commit decision sent just before the crash, say) arrive late:
            // after the partitions ran a termination without them. The fences must make them harmless.
            let late = self.coordinator_rng.random_range(100_000..1_200_000);
            for c in old.coordinators() {
                self.held_up.insert((dc, c), late);
            }
        }
        for s in 0..self.sessions.len() {
            let session = &mut self.sessions[s];
            if session.dc != dc || session.node != n {
                continue;
            }
            let Some(mut active) = session.active.take() else { continue };
            session.awaiting = None;
            let committing = match &active.plan {
                Plan::StaticUpdate(_) => true,
                Plan::Interactive { steps, abort } => active.tx.is_some() && active.step >= steps.len() && !abort,
                Plan::StaticRead(_) => false,
            };
            active.record.outcome = if committing { Outcome::Unknown } else { Outcome::Aborted };
            if matches!(active.plan, Plan::StaticUpdate(_)) {
                record_writes(&mut active.record, &active.in_flight);
            }
            self.finish(s as u64, active);
        }
        if down_us == 0 {
            self.stats.coordinator_crashes += 1;
            self.start_node(node);
        } else {
            self.stats.crashes += 1;
            self.schedule(down_us, Event::Restart(node));
        }
    }

    /// Runs the safety phase, then the liveness phase, and returns the history.
    pub fn run(mut self) -> SimOutcome {
        let end = self.now + self.config.duration_us;
        self.drive_until(end);
        // Liveness: no more faults or new transactions; heal, restart what is down; everything must finish.
        self.faults_on = false;
        self.workload_on = false;
        self.cut.clear();
        self.node_cuts.clear();
        for d in 0..self.config.dcs {
            for n in 0..self.config.nodes {
                if !self.dcs[usize::from(d)].nodes[usize::from(n)].is_up() {
                    self.schedule(0, Event::Restart((DcId(d), n)));
                }
            }
        }
        let mut problems = Vec::new();
        let deadline = self.now + 30_000_000;
        while self.sessions.iter().any(|s| s.active.is_some()) && self.now < deadline {
            if !self.step() {
                break;
            }
        }
        for s in &self.sessions {
            if let Some(active) = &s.active {
                problems.push(format!(
                    "session {} never finished transaction #{} (stuck at step {})",
                    s.id, active.record.index, active.step
                ));
            }
        }
        if problems.is_empty() {
            problems.extend(self.settle());
        }
        if problems.is_empty() {
            problems.extend(self.final_reads());
        }
        if problems.is_empty() {
            problems.extend(self.collected());
        }
        problems.extend(self.misplaced());
        self.collect_stats();
        self.stats.virtual_us = self.now - EPOCH_US;
        let liveness = if problems.is_empty() { Liveness::Ok } else { Liveness::Failed(problems) };
        SimOutcome { history: self.history, stats: self.stats, liveness }
    }

    /// Drives until nothing can commit any more, and every DC's stable snapshot covers every commit of the DC, so
    /// that the final reads, one DC after another, all see the same transactions: every node is up, no
    /// coordinator's message to a partition is on its way (a straggler, or a crashed coordinator's message held up,
    /// may still prepare or commit), and no partition holds a transaction prepared (its termination may still
    /// commit it, and it holds the DC's stable snapshot below commits made after its prepare). A partition's clock
    /// then exceeds each of its commits (a hybrid clock may run well ahead of physical time); once its pvc caught
    /// up with it, the DC's stable snapshot must reach the largest of its partitions' pvcs. Returns what did not
    /// settle in time.
    fn settle(&mut self) -> Vec<String> {
        let deadline = self.now + 30_000_000;
        let unsettled = self.drive_while(deadline, Self::unsettled);
        if !unsettled.is_empty() {
            return unsettled;
        }
        self.drive_until(self.now + 10_000);
        let targets: Vec<Timestamp> = (self.dcs.iter().enumerate())
            .map(|(d, dc)| dc.partitions().map(|p| p.pvc().get(DcId(d as u16))).max().unwrap_or(Timestamp::ZERO))
            .collect();
        self.drive_while(deadline, |world| {
            (world.dcs.iter().enumerate())
                .filter_map(|(d, dc)| {
                    let stable = dc.stable_snapshot().map_or(Timestamp::ZERO, |s| s.get(DcId(d as u16)));
                    (stable < targets[d]).then(|| {
                        format!(
                            "DC {d}: the stable snapshot stays at {stable}, below its partitions' pvc {}",
                            targets[d]
                        )
                    })
                })
                .collect()
        })
    }

    /// Runs the world in steps of 10 ms while `reasons` gives any, until `deadline`; returns the reasons left.
    fn drive_while(&mut self, deadline: u64, reasons: impl Fn(&Self) -> Vec<String>) -> Vec<String> {
        loop {
            let left = reasons(self);
            if left.is_empty() || self.now >= deadline {
                return left;
            }
            self.drive_until(self.now + 10_000);
        }
    }

    /// Why the DCs may still commit something: one line per reason (empty once settled).
    fn unsettled(&self) -> Vec<String> {
        let mut reasons = Vec::new();
        for (d, dc) in self.dcs.iter().enumerate() {
            for (n, node) in dc.nodes.iter().enumerate() {
                if !node.is_up() {
                    reasons.push(format!("DC {d}: node {n} never restarted"));
                }
            }
            if dc.topology.replicated() {
                let serving: BTreeSet<u32> = dc.partitions().map(|p| p.id().0).collect();
                for p in 0..dc.config.partitions {
                    if !serving.contains(&p) {
                        let replicas: Vec<String> = (dc.nodes.iter().enumerate())
                            .flat_map(|(n, node)| node.shards.iter().map(move |s| (n, s)))
                            .flat_map(|(n, s)| s.replicas().filter(|r| r.id().0 == p).map(move |r| (n, r)))
                            .map(|(n, r)| format!("node {n}: {:?} {:?}", r.role(), r.group()))
                            .collect();
                        reasons
                            .push(format!("DC {d}: replicated partition {p} has no leader serving it: {replicas:?}"));
                    }
                }
                // Every replica catches up: it applied its leader's whole log (new entries come now and then, a
                // clock bound or acknowledgements, so this holds between them).
                let replicas: Vec<(usize, &causet_core::replica::Replica)> = (dc.nodes.iter().enumerate())
                    .flat_map(|(n, node)| node.shards.iter().map(move |s| (n, s)))
                    .flat_map(|(n, s)| s.replicas().map(move |r| (n, r)))
                    .collect();
                // Every group has its whole membership again: a node back from a disk loss replaced its old self.
                reasons.extend(dc.unwhole_groups().into_iter().map(|r| format!("DC {d}: {r}")));
                for (n, leader) in replicas.iter().filter(|(_, r)| r.serving()) {
                    let last = leader.group().last_index();
                    for (m, r) in replicas.iter().filter(|(m, r)| r.id() == leader.id() && m != n) {
                        if r.group().applied() < last {
                            reasons.push(format!(
                                "DC {d}: node {m}'s replica of partition {} applied through {:?}, its leader's (node \
                                 {n}) log ends at {last:?}",
                                r.id().0,
                                r.group().applied()
                            ));
                        }
                    }
                }
            }
            for (n, node) in dc.nodes.iter().enumerate() {
                let (mut progressing, mut parked) = (0, 0);
                for shard in &node.shards {
                    if let Some(h) =
                        shard.coordinator().handover_stats().filter(|h| h.buffer.components + h.in_flight > 0)
                    {
                        let objects = h.buffer.objects;
                        reasons.push(format!("DC {d}: node {n} still buffers writes to {objects} objects"));
                    }
                    progressing += shard.coordinator().progressing_transactions();
                    parked += shard.parked_messages();
                }
                // A transaction whose client gave up (in doubt) may still commit, its prepare parked at a node
                // that has not heard of its partition's leader yet, say: every DC's final read must come after it,
                // or one DC reads it and another does not (seed 871).
                if progressing + parked > 0 {
                    reasons.push(format!(
                        "DC {d}: node {n} still runs {progressing} transactions and holds {parked} messages parked"
                    ));
                }
            }
            for p in dc.partitions() {
                if p.prepared_count() > 0 {
                    let undecided = p.undecided();
                    reasons.push(format!(
                        "DC {d}: partition {} still holds {} transactions prepared, undecided: {undecided:?}",
                        p.id().0,
                        p.prepared_count()
                    ));
                }
            }
        }
        let (mut in_flight, mut requests) = (0, 0);
        for event in self.slots.iter().flatten() {
            match event {
                Event::Deliver(_, e) | Event::DeliverLate(_, e) | Event::DeliverForGone(_, e) => {
                    in_flight += usize::from(matches!((e.from, e.to), (Address::Coordinator(_), Address::Partition(_))))
                }
                Event::Request { .. } => requests += 1,
                _ => {}
            }
        }
        if in_flight > 0 {
            reasons.push(format!("{in_flight} messages of coordinators to partitions still on their way"));
        }
        if requests > 0 {
            reasons.push(format!("{requests} client requests still on their way"));
        }
        reasons
    }

    /// Once nothing runs, garbage collection folds every version away, on every replica, leader or follower: the
    /// DC's frontier passes every commit (no transaction holds an old snapshot), and a follower folds under it
    /// once it applied its leader's log. Returns the replicas and partitions that still keep versions unfolded.
    fn collected(&mut self) -> Vec<String> {
        let deadline = self.now + 5_000_000;
        self.drive_while(deadline, |world| {
            let mut unfolded = Vec::new();
            for (d, dc) in world.dcs.iter().enumerate() {
                for (n, node) in dc.nodes.iter().enumerate() {
                    for shard in &node.shards {
                        // Serving leaders are among the partitions; the replicas that do not serve, besides.
                        let partitions = shard.partitions().map(|p| (p.id().0, "partition", p));
                        let replicas =
                            shard.replicas().filter(|r| !r.serving()).map(|r| (r.id().0, r.role(), r.partition()));
                        for (p, role, partition) in partitions.chain(replicas) {
                            let versions = partition.store_size().1;
                            if versions > 0 {
                                unfolded.push(format!(
                                    "DC {d}: node {n}'s {role} of partition {p} keeps {versions} versions unfolded"
                                ));
                            }
                        }
                    }
                }
            }
            unfolded
        })
    }

    /// Partial replication: no replica of any partition stores an object its DC does not hold (the origin ships
    /// each DC only what it holds, and a DC applies nothing else). Returns the partitions that do.
    fn misplaced(&self) -> Vec<String> {
        let mut found = Vec::new();
        for (d, dc) in self.dcs.iter().enumerate() {
            for (n, node) in dc.nodes.iter().enumerate() {
                for shard in &node.shards {
                    let partitions = shard.partitions().chain(shard.replicas().map(|r| r.partition()));
                    for p in partitions {
                        if let Some(o) = p.misplaced_objects().first() {
                            let key = String::from_utf8_lossy(&o.key);
                            found.push(format!(
                                "DC {d}: node {n}'s partition {} stores {key:?}, which DC {d} does not hold",
                                p.id().0
                            ));
                        }
                    }
                }
            }
        }
        found
    }

    fn collect_stats(&mut self) {
        for dc in &self.dcs {
            for p in dc.partitions() {
                self.stats.read_effects_applied += p.store_stats().effects_applied;
                self.stats.reads += p.store_stats().reads;
                self.stats.duplicate_prepares += p.duplicate_prepares();
            }
            for shard in dc.nodes.iter().flat_map(|n| &n.shards) {
                self.stats.resends += shard.coordinator().resends();
                let (remote, failovers) = shard.coordinator().remote_reads();
                self.stats.remote_reads.0 += remote;
                self.stats.remote_reads.1 += failovers;
                self.stats.ring_probes += shard.coordinator().ring_probes().0;
                self.stats.token_moves.0 += shard.coordinator().moves();
                if let Some(c) = shard.coordinator().cache_stats() {
                    self.stats.cache_reads.0 += c.hits;
                    self.stats.cache_reads.1 += c.misses;
                    self.stats.cache_reads.2 += c.refetches;
                    self.stats.cache_extended += c.extended;
                    self.stats.cache_refreshes.0 += c.refreshes;
                    self.stats.cache_refreshes.1 += c.refreshed;
                    self.stats.cache_refreshes.2 += c.joined_served;
                    self.stats.cache_bypassed += c.bypassed;
                }
                if let Some(h) = shard.coordinator().handover_stats() {
                    self.stats.buffered.0 += h.buffer.transactions;
                    self.stats.buffered.1 += h.handovers;
                    self.stats.buffered.2 += h.buffer.folded;
                    self.stats.token_moves.1 += h.asked;
                }
                for r in shard.replicas() {
                    self.stats.snapshots_installed += r.group().stats().snapshots_installed;
                    self.stats.snapshot_parts.0 += r.part_stats().parts_sent;
                    self.stats.snapshot_parts.1 += r.part_stats().streams_received;
                    self.stats.membership_changes += r.group().stats().membership_changes;
                    self.stats.nearest_reads.0 += r.stats().nearest_reads;
                    self.stats.nearest_reads.1 += r.stats().nearest_reads_passed_on;
                }
            }
        }
    }

    /// At every DC, a final session reads every object with a clock that covers every commit: every acknowledged
    /// write must be there, and every DC must return the same values (convergence).
    fn final_reads(&mut self) -> Vec<String> {
        let mut clock = VectorClock::zero(usize::from(self.config.dcs));
        for s in &self.sessions {
            if let Some(c) = &s.clock {
                clock.merge_max(c);
            }
        }
        // Commits in doubt (their client never heard) may lie beyond every session's clock: each DC's own entry of
        // its stable snapshot, once the DCs settled (see `settle`), covers every commit there, acknowledged or not,
        // so every DC reads the same set of transactions.
        for (d, dc) in self.dcs.iter().enumerate() {
            let own = DcId(d as u16);
            let local = dc.stable_snapshot().map_or(Timestamp::ZERO, |s| s.get(own));
            if local > clock.get(own) {
                clock.set(own, local);
            }
        }
        let checked: Vec<(ObjectId, ObjectName)> = self.workload.checked_objects();
        let mut planned: Vec<Planned> = checked
            .iter()
            .map(|(o, n)| Planned { object: o.clone(), name: Some(n.clone()), op: None, write: None })
            .collect();
        planned.extend(self.workload.extra_objects().into_iter().map(|object| Planned {
            object,
            name: None,
            op: None,
            write: None,
        }));
        let mut problems = Vec::new();
        let mut values_by_dc: Vec<(DcId, Vec<Value>)> = Vec::new();
        for d in 0..self.config.dcs {
            let dc = DcId(d);
            let id = self.sessions.len() as u64;
            self.sessions.push(Session {
                id,
                dc,
                node: 0,
                shard: 0,
                clock: Some(clock.clone()),
                token: None,
                next_request: 0,
                awaiting: None,
                active: None,
            });
            // The DC may need a moment to receive everything (a start waits until its stable snapshot covers the
            // clock, and times out otherwise): retry a few times.
            let mut done = None;
            for _ in 0..20 {
                let recorded = self.history.txs.len();
                self.begin_tx(id, Plan::StaticRead(planned.clone()));
                let deadline = self.now + 10_000_000;
                while self.sessions[id as usize].active.is_some() && self.now < deadline {
                    if !self.step() {
                        break;
                    }
                }
                // The attempt is recorded only if it began (`begin_tx` does not begin one while every node of its
                // DC is down). Nothing else records meanwhile: the workload's sessions have finished, faults are off.
                let attempt = self.history.txs[recorded..].last().map(|t| (t.index, t.outcome));
                if let Some((index, Outcome::Committed)) = attempt {
                    done = Some(index);
                    break;
                }
                // A failed attempt is not part of the workload's history (and when there was none, the last record
                // is a workload transaction, the in-doubt one of a crashed node's session, say: it stays).
                if std::env::var("CAUSET_SIM_DEBUG").is_ok() {
                    let stables: Vec<String> =
                        self.dcs.iter().map(|d| d.stable_snapshot().map_or("down".into(), |s| s.to_string())).collect();
                    eprintln!(
                        "final read at DC {d} failed: {:?}; clock {clock}; stable snapshots {stables:?}",
                        attempt.map(|(_, outcome)| outcome)
                    );
                }
                self.history.txs.truncate(recorded);
                self.drive_until(self.now + 200_000);
            }
            let Some(index) = done else {
                problems.push(format!("DC {d}: the final read never committed (the DC did not catch up)"));
                continue;
            };
            problems.extend(crate::lost_writes(&self.history, index).into_iter().map(|p| format!("DC {d}: {p}")));
            values_by_dc.push((dc, self.last_values.take().unwrap_or_default()));
        }
        if let Some((first_dc, first)) = values_by_dc.first() {
            for (dc, values) in &values_by_dc[1..] {
                for ((p, a), b) in planned.iter().zip(first).zip(values) {
                    if a != b {
                        problems.push(format!(
                            "DCs {} and {} diverged on {}: {a:?} vs {b:?}",
                            first_dc.0,
                            dc.0,
                            String::from_utf8_lossy(&p.object.key)
                        ));
                    }
                }
            }
        }
        problems
    }

    fn drive_until(&mut self, end: u64) {
        while self.events.peek().is_some_and(|Reverse((t, _, _))| *t <= end) {
            self.step();
        }
        self.now = self.now.max(end);
    }

    /// Processes one event; false when none is left.
    fn step(&mut self) -> bool {
        let Some(Reverse((t, _, slot))) = self.events.pop() else { return false };
        let event = self.slots[slot].take().expect("a scheduled slot holds its event");
        self.free_slots.push(slot);
        assert!(t >= self.now, "virtual time never goes back");
        self.now = t;
        self.stats.events += 1;
        assert!(self.stats.events < 400_000_000, "seed {}: the simulation does not quiesce", self.config.seed);
        self.handle(event);
        true
    }

    fn schedule(&mut self, after_us: u64, event: Event) {
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s] = Some(event);
                s
            }
            None => {
                self.slots.push(Some(event));
                self.slots.len() - 1
            }
        };
        self.seq += 1;
        self.events.push(Reverse((self.now + after_us, self.seq, slot)));
    }

    fn local(&self, node: NodeRef) -> u64 {
        self.clocks[&node].local(self.now)
    }

    fn handle(&mut self, event: Event) {
        if let Some(filter) = &self.trace {
            let text = match &event {
                Event::Deliver(
                    dc,
                    Envelope { from, to, msg: causet_core::Message::Replicate { since, txs, up_to, .. } },
                ) => {
                    let ids: Vec<String> = txs.iter().map(|t| format!("{}@{}", t.tx, t.commit)).collect();
                    format!("Replicate to DC {} {from:?}->{to:?} since {since} up_to {up_to} txs {ids:?}", dc.0 .0)
                }
                other => format!("{other:?}"),
            };
            let shown = match &event {
                Event::Deliver(_, e) => {
                    matches!(e.msg, causet_core::Message::Replicate { .. } | causet_core::Message::ReplicateAck { .. })
                }
                Event::Crash(..) | Event::Restart(..) | Event::Cut | Event::Heal(..) | Event::Checkpoint(..) => true,
                _ => false,
            };
            if shown && text.contains(filter.as_str()) {
                eprintln!("{} {}", self.now - EPOCH_US, &text[..text.len().min(600)]);
            }
        }
        let event = match event {
            Event::Deliver(node, envelope) => match envelope.from {
                Address::Coordinator(c) if self.held_up.contains_key(&(node.0, c)) => {
                    let late = self.held_up[&(node.0, c)];
                    self.schedule(late, Event::DeliverLate(node, envelope));
                    return;
                }
                _ => Event::Deliver(node, envelope),
            },
            Event::DeliverLate(node, envelope) | Event::DeliverForGone(node, envelope) => {
                Event::Deliver(node, envelope)
            }
            other => other,
        };
        match event {
            Event::DeliverLate(..) | Event::DeliverForGone(..) => unreachable!("turned into a delivery above"),
            Event::Deliver((dc, n), envelope) => {
                let now = self.local((dc, n));
                let d = &mut self.dcs[usize::from(dc.0)];
                if !d.nodes[usize::from(n)].is_up() {
                    return; // Lost with the node.
                }
                self.stats.messages += 1;
                if self.trace_messages {
                    let detail = match &envelope.msg {
                        causet_core::Message::Replica(causet_core::message::ReplicaMessage::Raft { bytes }) => {
                            causet_core::group::describe_message(bytes).unwrap_or_default()
                        }
                        other => other.name().to_owned(),
                    };
                    eprintln!(
                        "{} {:?} {:?} -> {:?} {detail}",
                        self.now - EPOCH_US,
                        (dc, n),
                        envelope.from,
                        envelope.to
                    );
                }
                // The receiving node picks the shard, as the server's links do; a message for another shard or
                // node is passed on by the shard that gets it.
                let layout = d.layout(n);
                let shard = layout.arrival_shard(&d.topology, envelope.to);
                d.nodes[usize::from(n)].shards[shard].handle_message(now, envelope);
                self.drain((dc, n, shard));
            }
            Event::Request { site, incarnation, client, request, body } => {
                let (dc, n, shard) = site;
                let now = self.local((dc, n));
                let node = &mut self.dcs[usize::from(dc.0)].nodes[usize::from(n)];
                if !node.is_up() || node.incarnation != incarnation {
                    return; // Lost with the node.
                }
                node.shards[shard].handle_client(now, client, request, body);
                self.drain(site);
            }
            Event::Reply(reply) => self.on_reply(reply),
            Event::Timer(site) => {
                self.timers.remove(&site);
                let (dc, n, shard) = site;
                let now = self.local((dc, n));
                let node = &mut self.dcs[usize::from(dc.0)].nodes[usize::from(n)];
                let Some(machine) = node.shards.get_mut(shard) else { return };
                if machine.poll_timeout().is_some_and(|t| t <= now) {
                    machine.handle_timeout(now);
                }
                self.drain(site);
            }
            Event::Fsync { dc, partition, incarnation, lsn } => {
                let d = &mut self.dcs[usize::from(dc.0)];
                let (n, shard) = d.site_of(partition);
                if d.nodes[usize::from(n)].incarnation != incarnation {
                    return; // The node crashed meanwhile: this sync never completed.
                }
                let disk = &mut d.disks[partition as usize];
                disk.durable = disk.durable.max(lsn);
                disk.syncing = false;
                for c in std::mem::take(&mut disk.in_sync) {
                    disk.install(c);
                }
                let now = self.local((dc, n));
                let d = &mut self.dcs[usize::from(dc.0)];
                if let Some(machine) = d.nodes[usize::from(n)].shards.get_mut(shard) {
                    machine.handle_persisted(now, PartitionId(partition), lsn);
                }
                self.start_sync(dc, partition);
                self.drain((dc, n, shard));
            }
            Event::BufferFsync { site, incarnation, lsn } => {
                let (dc, n, shard) = site;
                let d = &mut self.dcs[usize::from(dc.0)];
                if d.nodes[usize::from(n)].incarnation != incarnation {
                    return; // The node crashed meanwhile: this sync never completed.
                }
                let disk = d.buffer_disks.entry((n, shard)).or_default();
                disk.durable = disk.durable.max(lsn);
                disk.syncing = false;
                let now = self.local((dc, n));
                if let Some(machine) = self.dcs[usize::from(dc.0)].nodes[usize::from(n)].shards.get_mut(shard) {
                    machine.handle_buffer_persisted(now, lsn);
                }
                self.drain(site);
                self.start_buffer_sync(site);
            }
            Event::GroupFsync { node, partition, incarnation, epoch, count, ready } => {
                let (dc, n) = node;
                let d = &mut self.dcs[usize::from(dc.0)];
                if d.nodes[usize::from(n)].incarnation != incarnation {
                    return; // The node crashed meanwhile: this sync never completed.
                }
                let Some(disk) = d.group_disks.get_mut(&(n, partition)).filter(|disk| disk.epoch == epoch) else {
                    return; // The replica left its group meanwhile: its state is gone.
                };
                disk.sync(count);
                let now = self.local(node);
                let d = &mut self.dcs[usize::from(dc.0)];
                let shard = d.layout(n).shard_of(&d.topology, PartitionId(partition));
                if let (Some(machine), Some(ready)) = (d.nodes[usize::from(n)].shards.get_mut(shard), ready) {
                    machine.handle_group_written(now, PartitionId(partition), ready);
                }
                self.start_group_sync(node, partition);
                self.drain((dc, n, shard));
            }
            Event::GroupLoad { node, partition, incarnation, epoch } => {
                let (dc, n) = node;
                let d = &mut self.dcs[usize::from(dc.0)];
                if d.nodes[usize::from(n)].incarnation != incarnation {
                    return; // The node crashed meanwhile: its new incarnation did not ask.
                }
                if d.group_disks.get(&(n, partition)).map_or(0, |disk| disk.epoch) != epoch {
                    return; // The replica that asked left its group meanwhile.
                }
                let checkpoint = d.group_disks.get(&(n, partition)).and_then(|disk| disk.checkpoint.clone());
                let shard = d.layout(n).shard_of(&d.topology, PartitionId(partition));
                self.stats.group_loads += 1;
                let now = self.local(node);
                let d = &mut self.dcs[usize::from(dc.0)];
                if let Some(machine) = d.nodes[usize::from(n)].shards.get_mut(shard) {
                    machine.handle_checkpoint_loaded(now, PartitionId(partition), checkpoint);
                }
                self.drain((dc, n, shard));
            }
            Event::LogRead { dc, partition, incarnation, records } => {
                let d = &mut self.dcs[usize::from(dc.0)];
                let (n, shard) = d.site_of(partition);
                if d.nodes[usize::from(n)].incarnation != incarnation {
                    return; // The node crashed meanwhile: its new incarnation did not ask.
                }
                let now = self.local((dc, n));
                let d = &mut self.dcs[usize::from(dc.0)];
                if let Some(machine) = d.nodes[usize::from(n)].shards.get_mut(shard) {
                    machine.handle_log_read(now, PartitionId(partition), records);
                }
                self.drain((dc, n, shard));
            }
            Event::Crash(node, down_us) => {
                self.crash(node, down_us);
                if self.faults_on {
                    let every = self.config.faults.crash_every_us;
                    let next = self.rng.random_range(every / 2..=every * 3 / 2);
                    let victim = self.victim();
                    let down = self.downtime();
                    self.schedule(next, Event::Crash(victim, down));
                }
            }
            Event::CrashNodeAtOnce(dc, n) => {
                self.crash((dc, n), 0);
                if self.faults_on {
                    self.schedule_coordinator_crash();
                }
            }
            Event::Restart(node) => {
                if !self.dcs[usize::from(node.0 .0)].nodes[usize::from(node.1)].is_up() {
                    self.start_node(node);
                }
            }
            Event::Checkpoint(dc, p) if self.dcs[usize::from(dc.0)].topology.replicated() => {
                // Every replica checkpoints on its own timer; here, one replica's shard at a time.
                let nodes = self.dcs[usize::from(dc.0)].placement[&p].clone();
                let n = nodes[self.rng.random_range(0..nodes.len())];
                let d = &mut self.dcs[usize::from(dc.0)];
                let shard = d.layout(n).shard_of(&d.topology, PartitionId(p));
                let now = self.local((dc, n));
                let d = &mut self.dcs[usize::from(dc.0)];
                if let Some(machine) = d.nodes[usize::from(n)].shards.get_mut(shard) {
                    let unreplicated = machine.take_checkpoints(now);
                    debug_assert!(unreplicated.is_empty());
                    self.drain((dc, n, shard));
                }
                let next = self.rng.random_range(10_000..300_000);
                self.schedule(next, Event::Checkpoint(dc, p));
            }
            Event::Checkpoint(dc, p) => {
                let d = &mut self.dcs[usize::from(dc.0)];
                let (n, shard) = d.site_of(p);
                let checkpoint =
                    d.nodes[usize::from(n)].shards.get_mut(shard).and_then(|m| m.take_checkpoint(PartitionId(p)));
                if let Some(checkpoint) = checkpoint {
                    if self.trace.is_some() {
                        eprintln!(
                            "{} take checkpoint {dc:?}/{p}: lsn {:?} pvc {:?}",
                            self.now - EPOCH_US,
                            checkpoint.lsn,
                            checkpoint.pvc.as_ref().map(|v| v.to_string())
                        );
                    }
                    self.stats.checkpoints += 1;
                    d.disks[p as usize].pending.push(checkpoint);
                    self.start_sync(dc, p);
                }
                let next = self.rng.random_range(10_000..300_000);
                self.schedule(next, Event::Checkpoint(dc, p));
            }
            Event::Cut => {
                if !self.faults_on {
                    return;
                }
                let a = DcId(self.rng.random_range(0..self.config.dcs));
                let b = DcId(self.rng.random_range(0..self.config.dcs));
                if a != b && self.cut.insert(pair(a, b)) {
                    self.stats.cuts += 1;
                    let heal = self.rng.random_range(1..=self.config.faults.cut_us_max.max(1));
                    self.schedule(heal, Event::Heal(a, b));
                }
                let every = self.config.faults.cut_every_us;
                let next = self.rng.random_range(every / 2..=every * 3 / 2);
                self.schedule(next, Event::Cut);
            }
            Event::Heal(a, b) => {
                self.cut.remove(&pair(a, b));
            }
            Event::CutNodes => {
                if !self.faults_on {
                    return;
                }
                let dc = DcId(self.coordinator_rng.random_range(0..self.config.dcs));
                let a = self.coordinator_rng.random_range(0..self.config.nodes);
                let b = self.coordinator_rng.random_range(0..self.config.nodes);
                if a != b && self.node_cuts.insert((dc, a.min(b), a.max(b))) {
                    self.stats.node_cuts += 1;
                    let heal = self.coordinator_rng.random_range(1..=self.config.faults.cut_us_max.max(1));
                    self.schedule(heal, Event::HealNodes(dc, a.min(b), a.max(b)));
                }
                let every = self.config.faults.node_cut_every_us;
                let next = self.coordinator_rng.random_range(every / 2..=every * 3 / 2);
                self.schedule(next, Event::CutNodes);
            }
            Event::HealNodes(dc, a, b) => {
                self.node_cuts.remove(&(dc, a, b));
            }
            Event::LoseDisk => {
                if !self.faults_on {
                    return;
                }
                let dc = DcId(self.disk_rng.random_range(0..self.config.dcs));
                let n = self.disk_rng.random_range(0..self.config.nodes);
                let down = self.disk_rng.random_range(1..=self.config.faults.downtime_us_max.max(1));
                let d = &self.dcs[usize::from(dc.0)];
                if n < d.topology.nodes(dc) && d.unwhole_groups().is_empty() {
                    self.crash((dc, n), down);
                    let d = &mut self.dcs[usize::from(dc.0)];
                    d.group_disks.retain(|(node, _), _| *node != n);
                    d.buffer_disks.retain(|(node, _), _| *node != n);
                    d.nodes[usize::from(n)].generation += 1;
                    d.hosting[usize::from(n)] = first_hosting(&d.topology, n, d.nodes[usize::from(n)].generation);
                    self.stats.disk_losses += 1;
                    if self.trace.is_some() {
                        println!("{} lose disk DC {} node {n}", self.now, dc.0);
                    }
                }
                let every = self.config.faults.disk_loss_every_us;
                let next = self.disk_rng.random_range(every / 2..=every * 3 / 2);
                self.schedule(next, Event::LoseDisk);
            }
            Event::MoveReplica => {
                if !self.faults_on {
                    return;
                }
                self.move_replica();
                let every = self.config.faults.move_every_us;
                let next = self.move_rng.random_range(every / 2..=every * 3 / 2);
                self.schedule(next, Event::MoveReplica);
            }
            Event::Join(dc) => self.join(dc),
            Event::MoveRetry(dc, p) => {
                let Some(&(from, to)) = self.pending_moves.get(&(dc, p)) else { return };
                let d = &self.dcs[usize::from(dc.0)];
                if d.settled().any(|q| q == p) {
                    self.pending_moves.remove(&(dc, p));
                    return;
                }
                if let Some(via) = (0..self.config.nodes).find(|n| d.nodes[usize::from(*n)].is_up()) {
                    self.send_move(dc, via, p, from, to);
                }
                self.schedule(1_000_000, Event::MoveRetry(dc, p));
            }
            Event::Think(s) => {
                if self.workload_on && self.sessions[s as usize].active.is_none() {
                    let plan = self.workload.next(&mut self.rng);
                    self.begin_tx(s, plan);
                }
            }
        }
    }

    /// The operator moves a replica: in a random DC, a partition whose group has the membership its placement asks
    /// for (its serving leader says so), from one of its nodes (up or down: a dead node's replica is moved away
    /// the same way) to a node that holds none, through a node that is up, as `causet cluster move` does.
    fn move_replica(&mut self) {
        let dc = DcId(self.move_rng.random_range(0..self.config.dcs));
        let d = &self.dcs[usize::from(dc.0)];
        let settled: Vec<u32> = d.settled().collect();
        let up: Vec<NodeIndex> = (0..self.config.nodes).filter(|n| d.nodes[usize::from(*n)].is_up()).collect();
        if settled.is_empty() || up.is_empty() {
            return;
        }
        let p = settled[self.move_rng.random_range(0..settled.len())];
        let placement = d.placement[&p].clone();
        let spare: Vec<NodeIndex> = (0..d.topology.nodes(dc)).filter(|n| !placement.contains(n)).collect();
        if spare.is_empty() {
            return;
        }
        let from = placement[self.move_rng.random_range(0..placement.len())];
        let to = spare[self.move_rng.random_range(0..spare.len())];
        let via = up[self.move_rng.random_range(0..up.len())];
        let d = &mut self.dcs[usize::from(dc.0)];
        let placement = d.placement.get_mut(&p).expect("a replicated partition");
        *placement = placement.iter().map(|n| if *n == from { to } else { *n }).collect();
        self.stats.replica_moves += 1;
        self.pending_moves.insert((dc, p), (from, to));
        self.schedule(1_000_000, Event::MoveRetry(dc, p));
        self.send_move(dc, via, p, from, to);
    }

    /// The nodes of DC `dc` after its first join it: each starts with an empty disk of a new generation (a
    /// joining node's, `join = true`), holding no replica, and the DC's nodes that are up learn that it grew; those
    /// down learn it when they restart (a server's data directory records the DC's nodes).
    fn join(&mut self, dc: DcId) {
        let nodes = self.config.nodes;
        let d = &mut self.dcs[usize::from(dc.0)];
        let first = d.topology.nodes(dc);
        if !d.topology.grow(nodes) {
            return;
        }
        for n in 0..first {
            for shard in &mut d.nodes[usize::from(n)].shards {
                shard.handle_dc_nodes(dc, nodes);
            }
        }
        for n in first..nodes {
            let d = &mut self.dcs[usize::from(dc.0)];
            d.nodes[usize::from(n)].generation = 1;
            d.hosting[usize::from(n)] = first_hosting(&d.topology, n, 1);
            if self.trace.is_some() {
                println!("{} DC {} node {n} joins", self.now, dc.0);
            }
            self.stats.joins += 1;
            self.start_node((dc, n));
        }
    }

    /// Asks node `via` of DC `dc` to move partition `p`'s replica from node `from` to node `to`.
    fn send_move(&mut self, dc: DcId, via: NodeIndex, p: u32, from: NodeIndex, to: NodeIndex) {
        if self.trace.is_some() {
            println!("{} move DC {} partition {p} from node {from} to node {to} via node {via}", self.now, dc.0);
        }
        let now = self.local((dc, via));
        let d = &mut self.dcs[usize::from(dc.0)];
        let shard = d.layout(via).shard_of(&d.topology, PartitionId(p));
        d.nodes[usize::from(via)].shards[shard].move_replica(now, PartitionId(p), from, to);
        self.drain((dc, via, shard));
    }

    /// Starts an fsync covering everything written so far, unless one is in flight (group commit).
    fn start_sync(&mut self, dc: DcId, p: u32) {
        let d = &mut self.dcs[usize::from(dc.0)];
        let incarnation = d.nodes[usize::from(d.home(p))].incarnation;
        let disk = &mut d.disks[p as usize];
        let last = disk.records.last().map(|(l, _)| *l).unwrap_or(disk.durable);
        if disk.syncing || (last <= disk.durable && disk.pending.is_empty()) {
            return;
        }
        let lsn = last.max(disk.durable);
        disk.syncing = true;
        disk.in_sync = std::mem::take(&mut disk.pending);
        let took = self.rng.random_range(1..=self.config.faults.fsync_us_max.max(1));
        self.schedule(took, Event::Fsync { dc, partition: p, incarnation, lsn });
    }

    /// Starts an fsync of a coordinator's write-buffer log covering every record so far, unless one is in flight.
    fn start_buffer_sync(&mut self, site: Site) {
        let (dc, n, shard) = site;
        let d = &mut self.dcs[usize::from(dc.0)];
        let incarnation = d.nodes[usize::from(n)].incarnation;
        let Some(disk) = d.buffer_disks.get_mut(&(n, shard)) else { return };
        let last = disk.records.last().map_or(disk.durable, |(lsn, _)| *lsn);
        if disk.syncing || last <= disk.durable {
            return;
        }
        disk.syncing = true;
        let took = self.rng.random_range(1..=self.config.faults.fsync_us_max.max(1));
        self.schedule(took, Event::BufferFsync { site, incarnation, lsn: last });
    }

    /// Starts an fsync of a replica's disk covering every Write so far, unless one is in flight.
    fn start_group_sync(&mut self, node: NodeRef, p: u32) {
        let (dc, n) = node;
        let d = &mut self.dcs[usize::from(dc.0)];
        let incarnation = d.nodes[usize::from(n)].incarnation;
        let disk = d.group_disks.entry((n, p)).or_default();
        if disk.unsynced.is_empty() || disk.syncing {
            return;
        }
        let count = disk.unsynced.len();
        let epoch = disk.epoch;
        let ready = disk.unsynced.iter().rev().find_map(|item| match item {
            GroupPending::Write(ready, ..) => Some(*ready),
            GroupPending::Checkpoint(_) => None,
        });
        disk.syncing = true;
        let took = self.rng.random_range(1..=self.config.faults.fsync_us_max.max(1));
        self.schedule(took, Event::GroupFsync { node, partition: p, incarnation, epoch, count, ready });
    }

    /// Carries out a shard's outputs and arms its timer.
    fn drain(&mut self, site: Site) {
        let (dc, n, shard) = site;
        let mut outputs = Vec::new();
        {
            let node = &mut self.dcs[usize::from(dc.0)].nodes[usize::from(n)];
            let Some(machine) = node.shards.get_mut(shard) else { return };
            outputs.extend(std::iter::from_fn(|| machine.poll_output()));
        }
        let mut synced = BTreeSet::new();
        let mut group_synced = BTreeSet::new();
        let mut buffer_synced = false;
        // Other shards of the node that a notice handed work to (the server's shards drain after every input).
        let mut redrain = BTreeSet::new();
        for out in outputs {
            match out {
                NodeOutput::GroupWrite { partition, ready, snapshot, entries, hard_state } => {
                    let d = &mut self.dcs[usize::from(dc.0)];
                    let write = GroupPending::Write(ready, snapshot, entries, hard_state);
                    d.group_disks.entry((n, partition.0)).or_default().unsynced.push(write);
                    group_synced.insert(partition.0);
                }
                NodeOutput::Checkpoint { partition, checkpoint } => {
                    let d = &mut self.dcs[usize::from(dc.0)];
                    let pending = GroupPending::Checkpoint(checkpoint);
                    d.group_disks.entry((n, partition.0)).or_default().unsynced.push(pending);
                    self.stats.checkpoints += 1;
                    group_synced.insert(partition.0);
                }
                NodeOutput::LoadCheckpoint { partition } => {
                    let d = &self.dcs[usize::from(dc.0)];
                    let incarnation = d.nodes[usize::from(n)].incarnation;
                    let epoch = d.group_disks.get(&(n, partition.0)).map_or(0, |disk| disk.epoch);
                    let delay = self.delay(false);
                    let partition = partition.0;
                    self.schedule(delay, Event::GroupLoad { node: (dc, n), partition, incarnation, epoch });
                }
                NodeOutput::Leader { partition, node: leader, term, membership, conf_index } => {
                    // The server hands it to the node's other shards, as it does the session floor.
                    let now = self.local((dc, n));
                    let node = &mut self.dcs[usize::from(dc.0)].nodes[usize::from(n)];
                    for (i, other) in node.shards.iter_mut().enumerate() {
                        if i != shard {
                            other.handle_leader(now, partition, leader, term, membership.clone(), conf_index);
                        }
                    }
                    redrain.extend((0..node.shards.len()).filter(|i| *i != shard));
                }
                NodeOutput::Hosting { partition, hosting } => {
                    let d = &mut self.dcs[usize::from(dc.0)];
                    if let Hosting::Left { .. } = hosting {
                        // Its state goes with it; a sync or load still on its way belongs to the replica that left.
                        let epoch = d.group_disks.get(&(n, partition.0)).map_or(0, |disk| disk.epoch) + 1;
                        d.group_disks.insert((n, partition.0), GroupDisk { epoch, ..GroupDisk::default() });
                        self.stats.replicas_removed += 1;
                    }
                    d.hosting[usize::from(n)].insert(partition, hosting);
                }
                NodeOutput::Transmit(to, e) => self.send(site, to, e),
                NodeOutput::PersistBuffer { lsn, record } => {
                    let d = &mut self.dcs[usize::from(dc.0)];
                    d.buffer_disks.entry((n, shard)).or_default().records.push((lsn, record));
                    buffer_synced = true;
                }
                NodeOutput::TruncateBuffer { before } => {
                    // Issued once everything written before it is durable.
                    let d = &mut self.dcs[usize::from(dc.0)];
                    let disk = d.buffer_disks.entry((n, shard)).or_default();
                    assert!(disk.durable.0 + 1 >= before.0, "a truncation waits for what it keeps");
                    disk.records.retain(|(lsn, _)| *lsn >= before);
                }
                NodeOutput::Persist { partition, lsn, record } => {
                    self.dcs[usize::from(dc.0)].disks[partition.0 as usize].records.push((lsn, record));
                    synced.insert(partition.0);
                }
                NodeOutput::ReadLog { partition, after } => {
                    let d = &self.dcs[usize::from(dc.0)];
                    let disk = &d.disks[partition.0 as usize];
                    let records: Vec<(Lsn, LogRecord)> = disk
                        .records
                        .iter()
                        .filter(|(lsn, _)| *lsn > after && *lsn <= disk.durable)
                        .take(causet_core::replication::LOG_READ_RECORDS)
                        .cloned()
                        .collect();
                    let incarnation = d.nodes[usize::from(n)].incarnation;
                    self.stats.log_reads += 1;
                    let delay = self.delay(false);
                    self.schedule(delay, Event::LogRead { dc, partition: partition.0, incarnation, records });
                }
                NodeOutput::Reply(r) => {
                    let delay = self.delay(false);
                    self.schedule(delay, Event::Reply(r));
                }
                NodeOutput::SessionFloor(at) => {
                    // The server hands the floor to the node's other shards before the reply that follows leaves.
                    let node = &mut self.dcs[usize::from(dc.0)].nodes[usize::from(n)];
                    for (i, other) in node.shards.iter_mut().enumerate() {
                        if i != shard {
                            other.handle_session_floor(at);
                        }
                    }
                }
            }
        }
        for p in synced {
            self.start_sync(dc, p);
        }
        for p in group_synced {
            self.start_group_sync((dc, n), p);
        }
        if buffer_synced {
            self.start_buffer_sync(site);
        }
        self.arm(site);
        for other in redrain {
            self.drain((dc, n, other));
        }
    }

    fn delay(&mut self, wan: bool) -> u64 {
        let f = &self.config.faults;
        let (lo, hi) = if wan { (f.wan_delay_us_min, f.wan_delay_us_max) } else { (f.delay_us_min, f.delay_us_max) };
        self.rng.random_range(lo..=hi.max(lo))
    }

    /// Sends over the link from a shard to a node: random delay, FIFO per link; a cut link between DCs drops the
    /// message.
    fn send(&mut self, from: Site, to: Destination, envelope: Envelope) {
        let (from_dc, from_node, _) = from;
        let target = match to {
            Destination::Shard(_) => (from_dc, from_node),
            Destination::Node(n) => (from_dc, n),
            Destination::Dc(dc, n) => (dc, n),
        };
        if target.0 != from_dc && self.cut.contains(&pair(from_dc, target.0)) {
            self.stats.dropped += 1;
            return;
        }
        let (a, b) = (from_node.min(target.1), from_node.max(target.1));
        if target.0 == from_dc && self.node_cuts.contains(&(from_dc, a, b)) {
            self.stats.dropped += 1;
            return;
        }
        let mut delay = match to {
            // Between shards of one process: an in-process channel.
            Destination::Shard(_) => self.rng.random_range(1..=self.config.faults.delay_us_min.max(1)),
            Destination::Node(_) => self.delay(false),
            Destination::Dc(..) => self.delay(true),
        };
        if self.config.faults.coordinator_crash_every_us > 0
            && matches!((envelope.from, envelope.to), (Address::Coordinator(_), Address::Partition(_)))
            && self.coordinator_rng.random_bool(0.02)
        {
            // A straggler: the coordinator's message (and its link behind it) is held up long enough to arrive
            // after the coordinator crashed and a termination ran: the fences must make it harmless.
            delay += self.coordinator_rng.random_range(100_000..1_200_000);
        }
        let raft = matches!(envelope.msg, causet_core::Message::Replica(_));
        let link = (from, target, raft);
        let last = self.links.get(&link).copied().unwrap_or(0);
        let at = (self.now + delay).max(last + 1);
        self.links.insert(link, at);
        // A crashed coordinator's messages still on their way are held up where they arrive (see `held_up`); one
        // that leaves in its name now is the node answering for it, after the crash, and arrives in time.
        let event = match envelope.from {
            Address::Coordinator(c) if self.held_up.contains_key(&(target.0, c)) => {
                Event::DeliverForGone(target, envelope)
            }
            _ => Event::Deliver(target, envelope),
        };
        self.schedule(at - self.now, event);
    }

    fn arm(&mut self, site: Site) {
        let (dc, n, shard) = site;
        let node = &self.dcs[usize::from(dc.0)].nodes[usize::from(n)];
        let Some(local_deadline) = node.shards.get(shard).and_then(Node::poll_timeout) else { return };
        let at = self.clocks[&(dc, n)].virtual_at(local_deadline, self.now);
        if self.timers.get(&site).is_some_and(|armed| *armed <= at) {
            return;
        }
        self.timers.insert(site, at);
        self.schedule(at - self.now, Event::Timer(site));
    }

    fn begin_tx(&mut self, s: u64, plan: Plan) {
        let index = self.history.txs.len();
        let session = &mut self.sessions[s as usize];
        if self.config.switch_coordinator > 0.0 && self.rng.random_bool(self.config.switch_coordinator) {
            session.node = self.rng.random_range(0..self.config.nodes);
            session.shard = self.rng.random_range(0..self.config.shards);
        }
        if self.config.switch_dc > 0.0 && self.rng.random_bool(self.config.switch_dc) {
            // Cure §IV-C: the session moves to another DC with its clock; its start waits for that DC to catch up.
            session.dc = DcId(self.rng.random_range(0..self.config.dcs));
        }
        let d = &self.dcs[usize::from(session.dc.0)];
        if !d.nodes[usize::from(session.node)].is_up() {
            // A client whose node is down connects to another node of its DC, or waits while the DC has none (with
            // buffered writes there, its clock's token makes its start wait for the node's return).
            match (0..self.config.nodes).find(|n| d.nodes[usize::from(*n)].is_up()) {
                Some(n) => session.node = n,
                None => {
                    let think = self.rng.random_range(1_000..=20_000);
                    self.schedule(think, Event::Think(s));
                    return;
                }
            }
        }
        let record = TxRecord {
            index,
            session: s,
            dc: session.dc.0,
            start_us: self.now,
            end_us: self.now,
            ops: Vec::new(),
            outcome: Outcome::Unknown,
        };
        session.active = Some(ActiveTx { record, plan, step: 0, tx: None, in_flight: Vec::new() });
        self.next_request(s);
    }

    /// Sends the session's next request for its active transaction.
    fn next_request(&mut self, s: u64) {
        let session = &mut self.sessions[s as usize];
        let active = session.active.as_mut().expect("a session with a request has a transaction");
        let clock = session.clock.clone().map(|vector| ClientClock::new(vector, session.token));
        let nearest = self.config.nearest_reads && (session.id + active.record.index as u64).is_multiple_of(2);
        let fresh = self.config.cache.is_some() && (session.id + active.record.index as u64).is_multiple_of(8);
        let reads = if nearest {
            ReadFrom::Nearest
        } else if fresh {
            ReadFrom::Fresh
        } else {
            ReadFrom::Leader
        };
        let body = match (&active.plan, active.tx) {
            (Plan::StaticRead(objects), _) => {
                let objects = objects.iter().map(|p| p.object.clone()).collect();
                ClientRequest::StaticRead { clock, objects, reads }
            }
            (Plan::StaticUpdate(writes), _) => {
                active.in_flight = writes.clone();
                ClientRequest::StaticUpdate { clock, updates: updates_of(writes) }
            }
            (Plan::Interactive { .. }, None) => ClientRequest::Start { clock, reads },
            (Plan::Interactive { steps, abort }, Some(tx)) => match steps.get(active.step) {
                Some(Step::Read(objects)) => {
                    ClientRequest::Read { tx, objects: objects.iter().map(|p| p.object.clone()).collect() }
                }
                Some(Step::Update(writes)) => {
                    active.in_flight = writes.clone();
                    ClientRequest::Update { tx, updates: updates_of(writes) }
                }
                None if *abort => ClientRequest::Abort { tx },
                None => ClientRequest::Commit { tx },
            },
        };
        let request = RequestId(session.next_request);
        session.next_request += 1;
        session.awaiting = Some(request);
        let (dc, n) = (session.dc, session.node);
        let d = &self.dcs[usize::from(dc.0)];
        let layout = d.layout(n);
        // The server's connection picks the shard the same way: the transaction's coordinator, or the session's own.
        let shard = layout.client_shard(&body, session.shard).expect("a session talks to the node that runs its tx");
        let incarnation = d.nodes[usize::from(n)].incarnation;
        let delay = self.delay(false);
        let site = (dc, n, shard);
        self.schedule(delay, Event::Request { site, incarnation, client: ClientId(s), request, body });
    }

    fn on_reply(&mut self, reply: causet_core::coordinator::ClientReply) {
        let s = reply.client.0;
        let session = &mut self.sessions[s as usize];
        if session.awaiting != Some(reply.request) {
            return; // The answer to a request of a transaction already given up on.
        }
        let Some(active) = session.active.as_mut() else {
            return;
        };
        let committing = match &active.plan {
            Plan::StaticUpdate(_) => true,
            Plan::Interactive { steps, abort } => active.tx.is_some() && active.step >= steps.len() && !abort,
            Plan::StaticRead(_) => false,
        };
        let outcome = match reply.result {
            // A commit that timed out may have happened: only the partitions know. Its writes may become visible.
            Err(TxError::Timeout(_)) if committing => {
                if let Plan::StaticUpdate(_) = active.plan {
                    record_writes(&mut active.record, &active.in_flight);
                }
                Some(Outcome::Unknown)
            }
            Err(_) => Some(Outcome::Aborted),
            // A reply's clock with its token covers what the session saw: the token replaces the one it had.
            Ok(ClientResponse::Started { tx, snapshot, token }) => {
                active.tx = Some(tx);
                merge(&mut session.clock, &snapshot);
                session.token = token;
                None
            }
            Ok(ClientResponse::Values(values)) => {
                let Plan::Interactive { steps, .. } = &active.plan else { unreachable!("values answer reads") };
                let Some(Step::Read(objects)) = steps.get(active.step) else { unreachable!("values answer reads") };
                record_reads(&mut active.record, objects, &values);
                active.step += 1;
                None
            }
            Ok(ClientResponse::Updated) => {
                record_writes(&mut active.record, &active.in_flight);
                active.step += 1;
                None
            }
            Ok(ClientResponse::Committed { commit, token }) => {
                if let Plan::StaticUpdate(_) = active.plan {
                    record_writes(&mut active.record, &active.in_flight);
                }
                merge(&mut session.clock, &commit);
                session.token = token;
                Some(Outcome::Committed)
            }
            Ok(ClientResponse::Aborted) => Some(Outcome::Aborted),
            Ok(ClientResponse::StaticValues { values, commit, token }) => {
                let Plan::StaticRead(objects) = &active.plan else { unreachable!("static values answer reads") };
                record_reads(&mut active.record, objects, &values);
                merge(&mut session.clock, &commit);
                session.token = token;
                self.last_values = Some(values);
                Some(Outcome::Committed)
            }
        };
        match outcome {
            None => self.next_request(s),
            Some(outcome) => {
                let mut active = session.active.take().expect("checked above");
                session.awaiting = None;
                active.record.outcome = outcome;
                self.finish(s, active);
            }
        }
    }

    /// Records a finished transaction (its outcome set) and lets the session think before its next.
    fn finish(&mut self, s: u64, mut active: ActiveTx) {
        active.record.end_us = self.now;
        active.record.index = self.history.txs.len();
        match active.record.outcome {
            Outcome::Committed => self.stats.committed += 1,
            Outcome::Aborted => self.stats.aborted += 1,
            Outcome::Unknown => self.stats.unknown += 1,
        }
        self.history.txs.push(active.record);
        if self.workload_on {
            let think = self.rng.random_range(0..=self.config.think_us_max);
            self.schedule(think, Event::Think(s));
        }
    }
}

fn merge(clock: &mut Option<VectorClock>, other: &VectorClock) {
    match clock {
        Some(c) => c.merge_max(other),
        None => *clock = Some(other.clone()),
    }
}

fn updates_of(writes: &[Planned]) -> Vec<(ObjectId, causet_crdt::Op)> {
    writes.iter().map(|p| (p.object.clone(), p.op.clone().expect("planned writes carry an op"))).collect()
}

fn record_reads(record: &mut TxRecord, objects: &[Planned], values: &[Value]) {
    for (p, value) in objects.iter().zip(values) {
        let Some(object) = &p.name else { continue };
        let observed = crate::workload::observed(object.kind, value)
            .unwrap_or_else(|| panic!("a {:?} object answered {value:?}", object.kind));
        record.ops.push(HistOp::Read { object: object.clone(), observed });
    }
}
