//! The server's configuration: a TOML file, overridden by command-line flags. Every option is documented here
//! and in `docs/configuration.md`; the defaults serve a single node out of the box.

use causet_core::ClockKind;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;

/// When the log is fsynced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SyncPolicy {
    /// Every acknowledged commit is on disk: a commit is acknowledged only after an fsync covers it (group commit
    /// shares one fsync among concurrent commits). The default.
    #[default]
    Always,
    /// fsync on a timer (`sync_interval_ms`). Faster, but a crash loses the commits of the last interval even
    /// though they were acknowledged. For benchmarks only.
    Periodic,
}

/// The cores this process may run on (one if that cannot be told).
pub fn machine_cores() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// The whole configuration.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Where the log and checkpoints live.
    pub data_dir: PathBuf,
    /// The client protocol (AntidoteDB's protocol buffers) listens here.
    pub client_bind: SocketAddr,
    /// The admin HTTP server (`/metrics`, `/status`) listens here.
    pub admin_bind: SocketAddr,
    /// Most client connections at once; more are refused with an error message.
    pub max_connections: usize,
    /// Largest client frame accepted, in bytes; a larger one is read to its end, discarded and answered with an
    /// error that names this option, and the connection goes on.
    pub max_frame_bytes: usize,
    /// Partitions of the DC. Fixed at creation: a data directory remembers its count.
    pub partitions: u32,
    /// Tasks that run the protocol state machines (0: one per worker thread, at most one per partition).
    pub shards: usize,
    /// The runtime's worker threads, which run the shards, the connections and the links (0: one per core). Set it
    /// lower when several nodes share one machine (`causet cluster start` does), so that they do not oversubscribe
    /// its cores.
    pub worker_threads: usize,
    /// Most inputs waiting in one shard's inbox. When it is full, client connections, links from other nodes and
    /// the durability notifier wait for room (back-pressure), and messages between the node's shards are dropped
    /// and counted (`causet_shard_messages_dropped_total`; the protocol resends).
    pub shard_inbox: usize,
    /// `hybrid` (default) or `physical`.
    pub clock: ClockKind,
    /// How far ahead of a hybrid clock each partition logs a bound on it, ms: a restarted partition starts its
    /// clock at most this far past what it exposed before the crash; a smaller value logs bounds more often
    /// (about two per interval per partition).
    pub clock_bound_ms: u64,
    /// `cure` (default), or the baselines `gentlerain` and `eventual` (not causally consistent), for comparisons.
    pub protocol: causet_core::Protocol,
    /// `always` (default) or `periodic`.
    pub sync: SyncPolicy,
    /// fsync interval with `sync = "periodic"`, ms.
    pub sync_interval_ms: u64,
    /// The storage engine's block cache, MiB.
    pub cache_mb: u64,
    /// The most each of the storage engine's four memtables holds before it is flushed, MiB: resident memory grows
    /// by up to this per memtable under writes. Smaller bounds memory at some cost in write throughput.
    pub memtable_mb: u64,
    /// The most journal (the storage engine's write-ahead log) kept on disk, MiB, at least 64: past it, the engine
    /// flushes the memtables that hold the oldest journal back, so that it can be deleted.
    pub journal_mb: u64,
    /// How often each partition writes a checkpoint (which bounds recovery time and lets the log be truncated), s.
    pub checkpoint_interval_s: u64,
    /// How often partitions report their pvc and the stable snapshot is recomputed, ms.
    pub stable_interval_ms: u64,
    /// An interactive transaction idle for this long is aborted, ms.
    pub tx_idle_timeout_ms: u64,
    /// A read or prepare not answered within this time aborts its transaction, ms.
    pub op_timeout_ms: u64,
    /// Write-write certification of concurrent updates to one object (AntidoteDB's `txn_cert`), off by default.
    pub certify_writes: bool,
    /// Static reads at the DC's stable snapshot (never waiting for a transaction prepared since), on by default;
    /// off, at the coordinator's clock as in Cure.
    pub stable_reads: bool,
    /// How long a graceful shutdown waits for transactions in their commit phase, ms.
    pub shutdown_grace_ms: u64,
    /// This node's DC index, `0..dcs`.
    pub dc: u16,
    /// Number of DCs (every DC runs the same number of partitions).
    pub dcs: u16,
    /// This node's index inside its DC, `0..len(nodes)`.
    pub node: u16,
    /// The replication addresses of every node of this DC, by node index (this node's included); empty for a DC
    /// of one node. The DC's partitions are spread over them: partition `p` lives on node `p mod len(nodes)`.
    pub nodes: Vec<SocketAddr>,
    /// With replicated partitions, over how many of `nodes` (the first ones) the DC's partitions were placed when
    /// the DC started; the default, none, means all of them. A DC that grew (`causet cluster add-node`) keeps its
    /// first count here on every node: the new nodes hold replicas only once they are moved there. A node refuses
    /// to start if its data directory recorded another count.
    pub first_nodes: Option<u16>,
    /// Nodes of this DC retired for good (`causet cluster retire` adds them here on every node): garbage
    /// collection of old versions does not wait for their coordinators.
    pub retired_nodes: Vec<u16>,
    /// Copies of each partition inside this DC, on distinct nodes (at most the number of nodes). With more than
    /// one, each partition is a Raft group: a commit is acknowledged once a majority of its replicas hold it, and
    /// the DC keeps serving it while a majority is up. 1 (the default): each partition lives on one node.
    pub replicas: u16,
    /// With `replicas` above 1: how long a partition's replica hears from no leader before it campaigns (plus a
    /// random part of as much again), and a leader from no quorum before it steps down, ms.
    pub election_timeout_ms: u64,
    /// Where this node accepts links from other DCs and from the other nodes of its DC.
    pub replication_bind: SocketAddr,
    /// The other DCs' nodes, with the emulated WAN delay towards each.
    pub peers: Vec<crate::wan::PeerConfig>,
    /// How often partitions ship their committed transactions (or a heartbeat) to the other DCs, ms.
    pub replication_interval_ms: u64,
    /// Most local transactions each partition keeps in memory for other DCs that have not acknowledged them;
    /// beyond, the oldest are read back from the log when a DC needs them (the log keeps them until every DC
    /// acknowledged).
    pub replication_window: usize,
    /// The token the admin API's fault-injection endpoints require (`Authorization: Bearer <token>`); without
    /// one they are disabled.
    pub admin_token: Option<String>,
    /// This node joins a running DC: if its data directory is new (say, it replaces a disk that was lost), its
    /// disk starts a new generation, and its partitions' replicas join their Raft groups under new ids, caught up
    /// by the others, instead of acting as the groups' first members. Only matters for a new data directory; a
    /// node that starts with its own data carries on in the generation it has. Off: a new data directory is one
    /// of a new cluster's first nodes.
    pub join: bool,
    /// Mutually authenticated TLS on every link between nodes and DCs (`[tls]`: `ca`, `cert`, `key`, `cluster`;
    /// see docs/security.md). Without it, links are plain TCP and anyone who reaches the replication port can
    /// pose as a node.
    pub tls: Option<crate::tls::TlsConfig>,
    /// TLS on the client port (`[client_tls]`: `cert`, `key`), off by default: AntidoteDB's clients speak plain
    /// TCP. With it, the port accepts TLS only.
    pub client_tls: Option<crate::tls::ClientTlsConfig>,
    /// The lease cache of objects other nodes own (HoneyPot; `[cache]`: `enabled`, `lease_ms`, `memory_bytes`,
    /// `buffer_writes`, `max_component_objects`, `bypass_below_percent`, `refresh`),
    /// off by default. See docs/cache.md.
    pub cache: LeaseCache,
    /// Partial geo-replication (`[placement]`: `rings`, `buckets`): the buckets named are held by one DC per ring
    /// instead of every DC. Off by default (every DC holds everything). The same at every node of every DC. See
    /// docs/placement.md.
    pub placement: PlacementConfig,
}

/// `[placement]`: rings of nearby DCs, and the buckets each ring holds one copy of (Karma's partial
/// replication). Every other bucket is held by every DC.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlacementConfig {
    /// Rings of DC indices, every DC in exactly one: `rings = [[0, 1, 2], [3, 4], [5, 6, 7]]`.
    pub rings: Vec<Vec<u16>>,
    /// The buckets placed by rings, by name.
    pub buckets: Vec<String>,
    /// Which ring's holder a DC reads an object it does not hold from: `"nearest"` (the default: the holder its
    /// reads have measured fastest lately, its own ring's until another is measured faster) or `"own"` (always its
    /// own ring's, another only when that one does not answer: static ring binding).
    pub read_from: causet_core::placement::RingChoice,
}

impl PlacementConfig {
    /// The placement the state machines use.
    pub fn placement(&self) -> causet_core::placement::Placement {
        causet_core::placement::Placement::of_indices(&self.rings, self.buckets.iter().map(|b| b.as_bytes().to_vec()))
            .reading_from(self.read_from)
    }
}

/// `[cache]`: each coordinator caches the objects its transactions read, for a lease, and serves reads from it
/// at a snapshot up to a lease old (HoneyPot).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaseCache {
    /// Transactions that do not say otherwise read through the cache.
    pub enabled: bool,
    /// How long a cached state may be served after it was fetched, ms: the bound on how stale a cached read is.
    pub lease_ms: u64,
    /// Most bytes of cached states per coordinator (one per shard); the least recently used go first.
    pub memory_bytes: u64,
    /// Update transactions that read through the cache are acknowledged once buffered at their coordinator and
    /// handed over to the owners in one commit per component when the lease ends (HoneyPot's write buffer).
    /// Logged in the node's data directory and handed over after a crash; a session must stay on its node to read
    /// its buffered writes, and losing the node's disk loses what it had not handed over (docs/cache.md).
    pub buffer_writes: bool,
    /// Most objects whose buffered writes one handover carries: a transaction that would link more hands the
    /// components it touches over first.
    pub max_component_objects: usize,
    /// Transactions that do not choose where they read bypass the cache for eight leases once fewer than this
    /// percentage of its reads over a lease were hits (a cache that does not pay costs more than it saves); then
    /// it is tried again for a lease. 0 never bypasses. Not applied with buckets placed by rings, where a hit
    /// saves a round trip to another DC.
    pub bypass_below_percent: u8,
    /// With buckets placed by rings: a cached state of an object held at another DC that transactions read here
    /// is fetched again in the background as soon as a write makes it stale, so that the next transaction finds
    /// it cached instead of waiting a round trip for it.
    pub refresh: bool,
}

impl Default for LeaseCache {
    fn default() -> Self {
        Self {
            enabled: false,
            lease_ms: 1_000,
            memory_bytes: 64 << 20,
            buffer_writes: false,
            max_component_objects: 64,
            bypass_below_percent: 20,
            refresh: true,
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./causet-data"),
            client_bind: "127.0.0.1:8087".parse().expect("a valid address"),
            admin_bind: "127.0.0.1:8088".parse().expect("a valid address"),
            max_connections: 1024,
            max_frame_bytes: 16 * 1024 * 1024,
            partitions: 8,
            shards: 0,
            worker_threads: 0,
            shard_inbox: 65_536,
            clock: ClockKind::Hybrid,
            clock_bound_ms: 100,
            protocol: causet_core::Protocol::Cure,
            sync: SyncPolicy::Always,
            sync_interval_ms: 10,
            cache_mb: 64,
            memtable_mb: 64,
            journal_mb: 64,
            checkpoint_interval_s: 60,
            stable_interval_ms: 1,
            tx_idle_timeout_ms: 30_000,
            op_timeout_ms: 10_000,
            certify_writes: false,
            stable_reads: true,
            shutdown_grace_ms: 5_000,
            dc: 0,
            dcs: 1,
            node: 0,
            nodes: Vec::new(),
            first_nodes: None,
            retired_nodes: Vec::new(),
            replicas: 1,
            election_timeout_ms: 300,
            replication_bind: "127.0.0.1:8089".parse().expect("a valid address"),
            peers: Vec::new(),
            replication_interval_ms: 1,
            replication_window: 8_192,
            admin_token: None,
            join: false,
            tls: None,
            client_tls: None,
            cache: LeaseCache::default(),
            placement: PlacementConfig::default(),
        }
    }
}

/// A configuration that cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this configuration.
    #[error("invalid configuration in {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A value is out of range.
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl ServerConfig {
    /// Reads a TOML file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        toml::from_str(&text).map_err(|e| ConfigError::Parse { path: path.to_owned(), message: e.to_string() })
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(m.to_string()));
        if self.partitions == 0 || self.partitions > 4096 {
            return bad("partitions must be between 1 and 4096");
        }
        if self.shard_inbox < 64 {
            return bad("shard_inbox must be at least 64");
        }
        if self.max_connections == 0 {
            return bad("max_connections must be at least 1");
        }
        if self.max_frame_bytes < 1024 {
            return bad("max_frame_bytes must be at least 1024");
        }
        if self.stable_interval_ms == 0 || self.tx_idle_timeout_ms == 0 || self.op_timeout_ms == 0 {
            return bad("intervals and timeouts must be positive");
        }
        if self.dcs == 0 || self.dc >= self.dcs {
            return bad("dc must be below dcs");
        }
        let mut seen = std::collections::BTreeSet::new();
        for p in &self.peers {
            if p.dc >= self.dcs || p.dc == self.dc || !seen.insert(p.dc) {
                return bad("each peer names a distinct other DC below dcs");
            }
            if p.addr.nodes().is_empty() || p.addr.nodes().len() > 64 {
                return bad("each peer names between 1 and 64 node addresses");
            }
        }
        if self.nodes.len() > 64 {
            return bad("a DC has at most 64 nodes");
        }
        if usize::from(self.node) >= self.nodes.len().max(1) {
            return bad("node must be below the number of nodes listed in `nodes`");
        }
        if self.nodes.len() as u32 > self.partitions {
            return bad("a DC needs at least one partition per node");
        }
        if self.retired_nodes.iter().any(|n| *n >= self.node_count()) {
            return bad("retired_nodes must name nodes listed in `nodes`");
        }
        if self.first_nodes.is_some_and(|f| f == 0 || f > self.node_count()) {
            return bad("first_nodes must be between 1 and the number of nodes listed in `nodes`");
        }
        if self.replicas == 0 || self.replicas > self.placed_nodes() {
            return bad(
                "replicas must be between 1 and the number of nodes listed in `nodes` (in `first_nodes`, if set)",
            );
        }
        if self.clock_bound_ms == 0 || self.clock_bound_ms > 10_000 {
            return bad("clock_bound_ms must be between 1 and 10000");
        }
        if !(30..=60_000).contains(&self.election_timeout_ms) {
            return bad("election_timeout_ms must be between 30 and 60000");
        }
        if self.cache_mb == 0 || self.cache_mb > 1 << 20 {
            return bad("cache_mb must be between 1 and 1048576");
        }
        if self.memtable_mb == 0 || self.memtable_mb > 1024 {
            return bad("memtable_mb must be between 1 and 1024");
        }
        if self.journal_mb < 64 || self.journal_mb > 1 << 20 {
            return bad("journal_mb must be between 64 and 1048576");
        }
        if self.replication_window == 0 {
            return bad("replication_window must be positive");
        }
        if self.replication_interval_ms == 0 {
            return bad("replication_interval_ms must be positive");
        }
        if self.cache.enabled {
            if self.protocol != causet_core::Protocol::Cure {
                return bad("the lease cache ([cache] enabled) needs protocol = \"cure\"");
            }
            if self.cache.lease_ms == 0 || self.cache.lease_ms > 60_000 {
                return bad("[cache] lease_ms must be between 1 and 60000");
            }
            if self.cache.memory_bytes < 1024 {
                return bad("[cache] memory_bytes must be at least 1024");
            }
            if self.cache.buffer_writes && self.certify_writes {
                return bad("[cache] buffer_writes does not go with certify_writes: a handover of acknowledged writes cannot be refused");
            }
            if self.cache.max_component_objects == 0 {
                return bad("[cache] max_component_objects must be at least 1");
            }
            if self.cache.bypass_below_percent > 100 {
                return bad("[cache] bypass_below_percent is a percentage: 0 to 100 (0 never bypasses)");
            }
        }
        let placement = self.placement.placement();
        if let Err(e) = placement.validate(self.dcs) {
            return bad(&format!("[placement]: {e}"));
        }
        if placement.partial() && self.cache.enabled && self.cache.buffer_writes {
            return bad("[cache] buffer_writes does not work with buckets placed by rings yet");
        }
        if placement.partial() && self.certify_writes {
            return bad("certify_writes does not work with buckets placed by rings: a DC that does not hold an object cannot certify writes to it");
        }
        if self.sync == SyncPolicy::Periodic && self.sync_interval_ms == 0 {
            return bad("sync_interval_ms must be positive with sync = \"periodic\"");
        }
        Ok(())
    }

    /// The runtime's worker threads: `worker_threads`, or one per core.
    pub fn worker_thread_count(&self) -> usize {
        match self.worker_threads {
            0 => machine_cores(),
            n => n,
        }
    }

    /// The number of shards to run.
    pub fn shard_count(&self) -> usize {
        // More shards than threads to run them would only add hops between shards.
        let wanted = if self.shards == 0 { self.worker_thread_count() } else { self.shards };
        // A node of a replicated DC may come to hold any partition (replicas move), whatever it holds at first.
        let most = if self.replicas > 1 { self.partitions as usize } else { self.own_partitions() };
        wanted.clamp(1, most.clamp(1, 1 << causet_core::CoordinatorId::SHARD_BITS))
    }

    /// Nodes in this DC.
    pub fn node_count(&self) -> u16 {
        self.nodes.len().max(1) as u16
    }

    /// The nodes the DC's partitions are placed over: `first_nodes`, or all of them.
    pub fn placed_nodes(&self) -> u16 {
        self.first_nodes.unwrap_or(self.node_count())
    }

    /// How many partitions this node holds (serves, or keeps a replica of).
    pub fn own_partitions(&self) -> usize {
        self.topology().partitions_on(self.node).count()
    }

    /// This DC's topology as configured (peer DCs' shapes are added from `peers`).
    pub fn topology(&self) -> causet_core::topology::Topology {
        let dc = causet_core::DcId(self.dc);
        causet_core::topology::Topology::new(dc, self.dcs, self.partitions, self.node_count())
            .with_replicas(self.replicas)
            .with_first_nodes(self.placed_nodes())
            .with_placement(self.placement.placement())
    }

    /// The protocol configuration of this (single-DC) node.
    pub fn protocol(&self) -> causet_core::Config {
        let mut c = causet_core::Config::new(self.dcs, causet_core::DcId(self.dc), self.partitions);
        c.replication_interval_us = self.replication_interval_ms * 1_000;
        c.replication_window = self.replication_window;
        c.retired_nodes = self.retired_nodes.clone();
        c.clock = self.clock;
        c.clock_bound_us = self.clock_bound_ms * 1_000;
        c.raft_election_timeout_us = self.election_timeout_ms * 1_000;
        c.protocol = self.protocol;
        c.certify_writes = self.certify_writes;
        c.placement = self.placement.placement();
        c.stable_reads = self.stable_reads;
        c.stable_interval_us = self.stable_interval_ms * 1_000;
        c.tx_idle_timeout_us = self.tx_idle_timeout_ms * 1_000;
        c.op_timeout_us = self.op_timeout_ms * 1_000;
        c.max_open_transactions = self.max_connections.max(1) * 64;
        c.cache = self.cache.enabled.then(|| causet_core::cache::CacheConfig {
            lease_us: self.cache.lease_ms * 1_000,
            memory_bytes: usize::try_from(self.cache.memory_bytes).unwrap_or(usize::MAX),
            buffer_writes: self.cache.buffer_writes,
            max_component_objects: self.cache.max_component_objects,
            bypass_below_percent: self.cache.bypass_below_percent,
            refresh: self.cache.refresh,
        });
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_by_rings_parses_validates_and_reaches_the_state_machines() {
        let text = "dcs = 3\n[placement]\nrings = [[0, 1], [2]]\nbuckets = [\"r\"]\n";
        let c: ServerConfig = toml::from_str(text).expect("parses");
        c.validate().expect("valid");
        assert!(c.protocol().placement.partial());
        assert_eq!(c.topology().placement(), &c.protocol().placement);
        let refused =
            |text: &str| toml::from_str::<ServerConfig>(text).expect("parses").validate().unwrap_err().to_string();
        assert!(refused("dcs = 3\n[placement]\nrings = [[0, 1]]\nbuckets = [\"r\"]\n").contains("DC 2 is in no ring"));
        let cached = "dcs = 2\n[cache]\nenabled = true\n[placement]\nrings = [[0, 1]]\nbuckets = [\"r\"]\n";
        toml::from_str::<ServerConfig>(cached).expect("parses").validate().expect("the cache goes with rings");
        let buffered = cached.replace("enabled = true", "enabled = true\nbuffer_writes = true");
        assert!(refused(&buffered).contains("buffer_writes"));
        let certified = "dcs = 2\ncertify_writes = true\n[placement]\nrings = [[0, 1]]\nbuckets = [\"r\"]\n";
        assert!(refused(certified).contains("certify_writes"));
        assert!(toml::from_str::<ServerConfig>("[placement]\nring = []\n").is_err(), "unknown keys are refused");
        use causet_core::placement::RingChoice;
        assert_eq!(c.protocol().placement.read_from, RingChoice::Nearest, "the default");
        let own: ServerConfig = toml::from_str(&format!("{text}read_from = \"own\"\n")).expect("parses");
        assert_eq!(own.protocol().placement.read_from, RingChoice::Own);
        assert!(toml::from_str::<ServerConfig>(&format!("{text}read_from = \"near\"\n")).is_err(), "a typo");
    }

    #[test]
    fn defaults_are_valid_and_serve_out_of_the_box() {
        let c = ServerConfig::default();
        c.validate().expect("defaults validate");
        assert_eq!(c.client_bind.port(), 8087);
        assert_eq!(c.sync, SyncPolicy::Always);
    }

    #[test]
    fn a_toml_file_overrides_defaults_and_unknown_keys_are_refused() {
        let c: ServerConfig =
            toml::from_str("partitions = 4\nsync = \"periodic\"\nclock = \"physical\"").expect("parses");
        assert_eq!((c.partitions, c.sync, c.clock), (4, SyncPolicy::Periodic, ClockKind::Physical));
        assert!(toml::from_str::<ServerConfig>("partitons = 4").is_err());
        let zero = ServerConfig { partitions: 0, ..ServerConfig::default() };
        assert!(zero.validate().is_err());
        let c: ServerConfig = toml::from_str("clock_bound_ms = 20").expect("parses");
        assert_eq!(c.protocol().clock_bound_us, 20_000);
        assert!(ServerConfig { clock_bound_ms: 0, ..ServerConfig::default() }.validate().is_err());
        let c: ServerConfig = toml::from_str("election_timeout_ms = 1000").expect("parses");
        assert_eq!(c.protocol().raft_election_timeout_us, 1_000_000);
        assert!(ServerConfig { election_timeout_ms: 20, ..ServerConfig::default() }.validate().is_err());
        let c: ServerConfig = toml::from_str("memtable_mb = 8\ncache_mb = 32").expect("parses");
        assert_eq!((c.memtable_mb, c.cache_mb), (8, 32));
        assert!(ServerConfig { memtable_mb: 0, ..ServerConfig::default() }.validate().is_err());
        let tls: ServerConfig =
            toml::from_str("[tls]\nca = \"a\"\ncert = \"c\"\nkey = \"k\"\ncluster = \"x\"").expect("parses");
        assert_eq!(tls.tls.map(|t| t.cluster), Some("x".to_string()));
    }

    #[test]
    fn shards_follow_the_worker_threads_unless_set() {
        let cores = machine_cores();
        let c = ServerConfig { partitions: 64, ..ServerConfig::default() };
        assert_eq!((c.worker_thread_count(), c.shard_count()), (cores, cores), "by default, one of each per core");
        let one: ServerConfig = toml::from_str("partitions = 64\nworker_threads = 1").expect("parses");
        assert_eq!((one.worker_thread_count(), one.shard_count()), (1, 1));
        let set: ServerConfig = toml::from_str("partitions = 64\nworker_threads = 1\nshards = 4").expect("parses");
        assert_eq!(set.shard_count(), 4, "an explicit shard count stands");
        let few: ServerConfig = toml::from_str("partitions = 2\nworker_threads = 8").expect("parses");
        assert_eq!(few.shard_count(), 2, "never more shards than partitions");
    }

    #[test]
    fn replicas_must_fit_on_the_dcs_nodes_and_place_every_partition_on_that_many() {
        let nodes: Vec<SocketAddr> =
            (0..3).map(|i| format!("127.0.0.1:{}", 9000 + i).parse().expect("an address")).collect();
        let three =
            ServerConfig { nodes: nodes.clone(), node: 1, replicas: 3, partitions: 6, ..ServerConfig::default() };
        three.validate().expect("three replicas on three nodes");
        assert_eq!(three.own_partitions(), 6, "with three replicas on three nodes, every node holds every partition");
        assert_eq!(three.topology().replicas(causet_core::PartitionId(4)).nodes, vec![1, 2, 0]);
        let err = ServerConfig { replicas: 4, ..three.clone() }.validate().expect_err("more replicas than nodes");
        assert!(err.to_string().contains("replicas"), "{err}");
        assert!(ServerConfig { replicas: 0, ..three }.validate().is_err());
        assert!(ServerConfig { replicas: 2, ..ServerConfig::default() }.validate().is_err(), "one node, two replicas");
    }
}
