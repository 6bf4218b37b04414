//! Causet's node runtime: the tokio driver of the sans-I/O protocol state machines.
//!
//! A node serves every partition of one DC. Its partitions and coordinators are spread over shards (tasks, see
//! [`shard`]); the storage engine's writer thread makes log records durable with group commit and reports back;
//! client connections speak AntidoteDB's protocol ([`connection`]); the admin HTTP server serves `/metrics` and
//! `/status` ([`admin`]).

#![warn(missing_docs)]

pub mod admin;
pub mod backup;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod console;
pub mod faults;
pub mod members;
pub mod metrics;
pub mod routes;
pub mod shard;
pub mod shutdown;
pub mod status;
pub mod storage;
pub mod tls;
pub mod wan;

use crate::clock::WallClock;
use crate::config::{ServerConfig, SyncPolicy};
use crate::metrics::Metrics;
use crate::routes::{Routes, ShardInput};
use crate::shard::{Shard, ShardEnv};
use crate::status::ShardStatus;
use anyhow::Context;
use causet_core::group::{Entry, HardState};
use causet_core::node::{Layout, Stored};
use causet_core::partition::Checkpoint;
use causet_core::record::{LogRecord, Lsn};
use causet_core::PartitionId;
use causet_storage::{Durable, FjallStore, LogStore, StorageOptions, SyncMode};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tracing::{info, warn};

/// The storage engine seen as the shards' log.
struct StoreSink(Arc<FjallStore>);

impl storage::LogSink for StoreSink {
    fn append(&self, partition: PartitionId, lsn: Lsn, record: LogRecord) {
        // A failed store reports no more durability: commits stop being acknowledged, and the error is logged.
        if let Err(e) = self.0.append(partition, lsn, record) {
            tracing::error!(partition = partition.0, error = %e, "the log refused a record");
        }
    }

    fn checkpoint(&self, partition: PartitionId, checkpoint: Checkpoint) {
        if let Err(e) = self.0.checkpoint(partition, checkpoint) {
            tracing::error!(partition = partition.0, error = %e, "the log refused a checkpoint");
        }
    }

    fn write_group(
        &self,
        partition: PartitionId,
        ready: u64,
        snapshot: Option<Box<causet_core::replica::InstalledSnapshot>>,
        entries: Vec<Entry>,
        hard_state: Option<HardState>,
    ) {
        if let Err(e) = self.0.write_group(partition, ready, snapshot, entries, hard_state) {
            tracing::error!(partition = partition.0, error = %e, "the log refused a group write");
        }
    }

    fn set_hosting(&self, partition: PartitionId, hosting: causet_core::replica::Hosting) {
        if let Err(e) = self.0.set_hosting(partition, hosting) {
            tracing::error!(partition = partition.0, error = %e, "the log refused a hosting record");
        }
    }

    fn append_buffer(&self, shard: u32, lsn: Lsn, record: &causet_core::coordinator::BufferRecord) {
        if let Err(e) = self.0.append_buffer(shard, lsn, record) {
            tracing::error!(shard, error = %e, "the log refused a write-buffer record");
        }
    }

    fn truncate_buffer(&self, shard: u32, before: Lsn) {
        if let Err(e) = self.0.truncate_buffer(shard, before) {
            tracing::error!(shard, error = %e, "the log refused to truncate the write buffer's log");
        }
    }

    fn has_room(&self, writes: usize) -> bool {
        self.0.has_room(writes)
    }

    fn load_checkpoint(&self, partition: PartitionId) -> Result<Option<Checkpoint>, String> {
        self.0.load(partition).map(|(checkpoint, _)| checkpoint).map_err(|e| e.to_string())
    }

    fn read_log(&self, partition: PartitionId, after: Lsn) -> Vec<(Lsn, LogRecord)> {
        self.0.read_log(partition, after, causet_core::replication::LOG_READ_RECORDS).unwrap_or_else(|e| {
            tracing::error!(partition = partition.0, error = %e, "reading the log back failed");
            Vec::new()
        })
    }
}

/// What connections and the admin server share.
pub struct NodeState {
    /// The configuration.
    pub config: ServerConfig,
    /// Where the node's shards are.
    pub routes: Routes,
    /// Links to other nodes and DCs.
    pub wan: wan::Wan,
    /// Metrics.
    pub metrics: Metrics,
    /// The clock.
    pub clock: Arc<WallClock>,
    /// The storage engine.
    pub store: Arc<FjallStore>,
    /// Connections are numbered from here.
    pub next_client: std::sync::atomic::AtomicU64,
    /// Where this node accepts replication links (with several DCs).
    pub replication_addr: Option<SocketAddr>,
    /// The web console's history.
    pub series: console::Series,
}

impl NodeState {
    /// Every shard's status.
    pub async fn status(&self) -> Vec<ShardStatus> {
        let mut out = Vec::new();
        for inbox in &self.routes.inboxes {
            let (tx, rx) = oneshot::channel();
            if inbox.send(ShardInput::Status(tx)).await.is_ok() {
                if let Ok(s) = rx.await {
                    out.push(s);
                }
            }
        }
        out
    }
}

/// A running node.
pub struct Node {
    /// The client protocol's bound address.
    pub client_addr: SocketAddr,
    /// The admin HTTP server's bound address.
    pub admin_addr: SocketAddr,
    /// The replication listener's bound address, with several DCs.
    pub replication_addr: Option<SocketAddr>,
    state: Arc<NodeState>,
    stop: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    shard_tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Node {
    /// Opens the data directory, recovers every partition, and starts serving.
    pub async fn start(config: ServerConfig) -> anyhow::Result<Node> {
        config.validate()?;
        std::fs::create_dir_all(&config.data_dir)
            .with_context(|| format!("creating the data directory {}", config.data_dir.display()))?;
        let sync = match config.sync {
            SyncPolicy::Always => SyncMode::Always,
            SyncPolicy::Periodic => SyncMode::Periodic { interval: Duration::from_millis(config.sync_interval_ms) },
        };
        // A replica's log is compacted after its checkpoints like a record log; followers that need what was
        // compacted get a snapshot.
        let options = StorageOptions {
            sync,
            truncate_group_logs: true,
            cache_bytes: config.cache_mb << 20,
            memtable_bytes: config.memtable_mb << 20,
            journal_bytes: config.journal_mb << 20,
            ..StorageOptions::default()
        };
        let (store, mut durable) = FjallStore::open(&config.data_dir, options)
            .with_context(|| format!("opening the store in {}", config.data_dir.display()))?;
        let store = Arc::new(store);
        // The disk's generation first: a joining node's new data directory must never start as generation 0,
        // even if it crashes before anything else is written.
        let generation = store
            .generation(if config.join { new_generation() } else { 0 })
            .context("reading the disk's generation")?;
        let incarnation = store.next_incarnation().context("advancing the node's incarnation")?;
        // Faults an operator set before a restart stay set: the clock's offset now, the links' as they start.
        let faults = Arc::new(faults::FaultFile::load(&config.data_dir)?);
        let clock = Arc::new(WallClock::new());
        let kept = faults.current();
        if kept.clock_offset_us != 0 {
            tracing::warn!(
                offset_ms = kept.clock_offset_us / 1000,
                "this node's clock stays skewed, as an operator left it before this node restarted"
            );
            clock.set_offset_us(kept.clock_offset_us);
        }
        let protocol = config.protocol();
        let shards = config.shard_count();

        let (stop, stopped) = watch::channel(false);
        let dc = causet_core::DcId(config.dc);
        let tls = config.tls.as_ref().map(tls::PeerTls::load).transpose().map_err(|e| anyhow::anyhow!("[tls]: {e}"))?;
        let client_tls = config
            .client_tls
            .as_ref()
            .map(tls::ClientTls::load)
            .transpose()
            .map_err(|e| anyhow::anyhow!("[client_tls]: {e}"))?;
        if tls.is_none() && (config.dcs > 1 || config.node_count() > 1) {
            tracing::warn!(
                "links to other nodes and DCs are plain TCP, unauthenticated: anyone who reaches the replication \
                 port can pose as a node (configure [tls], see docs/security.md)"
            );
        }
        // The DC's nodes: as configured, and those that joined it while it ran (recorded in the data directory).
        let members = {
            let recorded = store.members().context("reading the DC's nodes")?;
            let store = store.clone();
            let keep: members::Keep = Box::new(move |addrs| Ok(store.set_members(addrs)?));
            members::Members::new(&config.nodes, recorded, keep).context("recording the DC's nodes")?
        };
        let nodes = members.count();
        if nodes > config.node_count() {
            info!(nodes, configured = config.node_count(), "this DC has nodes that joined it since it was configured");
        }
        let wan = wan::Wan::start(dc, config.node, members, &config.peers, tls, faults, stopped.clone());
        let mut topology = config.topology();
        topology.grow(nodes);
        for peer in &config.peers {
            topology.set_dc_nodes(causet_core::DcId(peer.dc), peer.addr.nodes().len() as u16);
        }
        let layout = Layout::new(config.node, shards, incarnation).with_generation(generation);
        if generation != 0 {
            tracing::info!(
                generation,
                "this node's disk is in generation {generation}: its replicas join their groups under new ids"
            );
        }
        let (routes, receivers) = Routes::new(layout, topology.clone(), config.shard_inbox);
        // The replicas this node runs: as recorded, or at a cluster's first start the topology's placement.
        let (hosting, placed_nodes) = store
            .init_hosting(
                causet_core::replica::first_hosting(&topology, config.node, generation),
                config.placed_nodes(),
            )
            .context("reading which replicas this node runs")?;
        anyhow::ensure!(
            placed_nodes == config.placed_nodes(),
            "this data directory's DC placed its partitions over its first {placed_nodes} nodes, but the configuration \
             says {}: set first_nodes = {placed_nodes} (a DC that grew keeps its first count)",
            config.placed_nodes()
        );

        // Recovery: every shard's partitions from their checkpoints and log tails. Transactions left prepared
        // without a decision ask their coordinator; those of this node's earlier incarnation learn it is gone and
        // are settled with the DC's other partitions (the termination protocol of `causet_core::partition`).
        let started = std::time::Instant::now();
        let sink: Arc<dyn storage::LogSink> = Arc::new(StoreSink(store.clone()));
        let env = ShardEnv {
            routes: routes.clone(),
            wan: wan.clone(),
            clock: clock.clone(),
            log: sink.clone(),
            checkpoint_interval: Duration::from_secs(config.checkpoint_interval_s.max(1)),
            shutdown_grace: Duration::from_millis(config.shutdown_grace_ms),
        };
        let mut shard_tasks = Vec::new();
        let mut recovered = 0;
        // The coordinators' write-buffer logs: acknowledged writes not yet handed over to their owners.
        let mut buffer_logs = store.load_buffers().context("loading the write buffers' logs")?;
        for (shard, log) in &buffer_logs {
            info!(shard, records = log.len(), "replaying the write buffer's log: its writes are handed over first");
        }
        if let Some((&shard, log)) = buffer_logs.range(u32::try_from(shards).unwrap_or(u32::MAX)..).next() {
            anyhow::bail!(
                "shard {shard}'s write buffer holds {} records of acknowledged writes not yet handed over, but this \
                 node now runs {shards} shards: start it with `shards = {}` or more (the writes are handed over at \
                 once; then the shard count may change)",
                log.len(),
                shard + 1
            );
        }
        for (index, inbox) in receivers.into_iter().enumerate() {
            let shard_hosting = hosting.iter().filter(|(p, _)| layout.shard_of(&topology, **p) == index);
            let mut stored: Vec<Stored> = Stored::of_hosting(&shard_hosting.map(|(p, h)| (*p, *h)).collect(), |id| {
                let group = store.load_group(id).with_context(|| format!("loading partition {}", id.0))?;
                anyhow::Ok((group.durable, group.checkpoint))
            })?;
            for id in layout.partitions_of_shard(&topology, index).filter(|_| !topology.replicated()) {
                let (checkpoint, tail) = store.load(id).with_context(|| format!("loading partition {}", id.0))?;
                if !tail.is_empty() {
                    info!(partition = id.0, records = tail.len(), "replaying the log tail");
                }
                stored.push(Stored::Partition(id, checkpoint.map(Box::new), tail));
            }
            recovered += stored.len();
            let node = causet_core::node::Node::recover(
                protocol.clone(),
                topology.clone(),
                layout,
                index,
                clock.now_us(),
                stored,
                buffer_logs.remove(&u32::try_from(index).expect("few shards")).unwrap_or_default(),
            );
            let shard = Shard::new(env.clone(), node);
            shard_tasks.push(tokio::spawn(shard.run(inbox)));
        }
        info!(partitions = recovered, elapsed_ms = started.elapsed().as_millis() as u64, "recovered");

        // Durability notifications go to the shards that own the partitions.
        let durable_routes = routes.clone();
        let mut tasks = Vec::new();
        tasks.push(tokio::spawn(async move {
            loop {
                let batch = match durable.recv().await {
                    Ok(Some(batch)) => batch,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!(error = %e, "the log writer failed: no commit can be acknowledged any more");
                        break;
                    }
                };
                let mut by_shard: Vec<Vec<(PartitionId, Durable)>> = vec![Vec::new(); durable_routes.inboxes.len()];
                for (p, durable) in batch {
                    // A write-buffer log's report names its shard.
                    let shard = match durable {
                        Durable::Buffer(_) => usize::try_from(p.0).expect("few shards"),
                        _ => durable_routes.partition_shard(p),
                    };
                    by_shard[shard].push((p, durable));
                }
                for (s, positions) in by_shard.into_iter().enumerate() {
                    if !positions.is_empty() {
                        durable_routes.send(s, ShardInput::Durable(positions)).await;
                    }
                }
            }
        }));

        let replication_addr = if config.dcs > 1 || nodes > 1 {
            let listener = TcpListener::bind(config.replication_bind)
                .await
                .with_context(|| format!("binding the replication port {}", config.replication_bind))?;
            let addr = listener.local_addr()?;
            tasks.push(tokio::spawn(wan::accept_peers(listener, routes.clone(), wan.clone(), stopped.clone())));
            Some(addr)
        } else {
            None
        };
        let state = Arc::new(NodeState {
            config: config.clone(),
            routes,
            wan,
            metrics: Metrics::new(),
            clock,
            store,
            next_client: std::sync::atomic::AtomicU64::new(1),
            replication_addr,
            series: console::Series::default(),
        });

        // The admin port is bound before the client port: whoever waits for the client port to accept (scripts,
        // `causet cluster start`, the tests) may use the admin API next. Bound the other way round, a test once
        // reached a just-restarted node's admin port in the instant between the two binds and was refused.
        let admin = TcpListener::bind(config.admin_bind)
            .await
            .with_context(|| format!("binding the admin port {}", config.admin_bind))?;
        let admin_addr = admin.local_addr()?;
        let listener = TcpListener::bind(config.client_bind)
            .await
            .with_context(|| format!("binding the client port {}", config.client_bind))?;
        let client_addr = listener.local_addr()?;
        tasks.push(tokio::spawn(connection::accept_loop(listener, state.clone(), client_tls, stopped.clone())));

        tasks.push(tokio::spawn(console::sample(state.clone(), stopped.clone())));
        tasks.push(tokio::spawn(admin::serve(admin, state.clone(), stopped)));
        info!(%client_addr, %admin_addr, ?replication_addr, dc = config.dc, dcs = config.dcs, shards, partitions = config.partitions, "serving");
        Ok(Node { client_addr, admin_addr, replication_addr, state, stop, tasks, shard_tasks })
    }

    /// Shared state (metrics, status).
    pub fn state(&self) -> &Arc<NodeState> {
        &self.state
    }

    /// Graceful shutdown: stop accepting, let connections finish their request, let transactions in their commit
    /// phase finish (up to the grace period), checkpoint, flush and fsync the log.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        info!("shutting down");
        let _ = self.stop.send(true);
        let grace = Duration::from_millis(self.state.config.shutdown_grace_ms);
        let mut waits = Vec::new();
        for inbox in &self.state.routes.inboxes {
            let (tx, rx) = oneshot::channel();
            if inbox.send(ShardInput::Shutdown(tx)).await.is_ok() {
                waits.push(rx);
            }
        }
        for w in waits {
            if tokio::time::timeout(grace, w).await.is_err() {
                warn!("a shard did not finish its transactions within the grace period");
            }
        }
        for t in self.shard_tasks.into_iter().chain(self.tasks) {
            t.abort();
            let _ = t.await;
        }
        self.state.wan.stop().await;
        let mut store = self.state.store.clone();
        drop(self.state);
        // Connections still finishing hold the node's state for a moment.
        let deadline = std::time::Instant::now() + grace;
        loop {
            match Arc::try_unwrap(store) {
                Ok(owned) => {
                    tokio::task::spawn_blocking(move || owned.close()).await?.context("closing the store")?;
                    break;
                }
                Err(shared) if std::time::Instant::now() < deadline => {
                    store = shared;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(_) => {
                    warn!("connections still hold the store; its writer stops when they end");
                    break;
                }
            }
        }
        info!("stopped");
        Ok(())
    }
}

/// A new disk generation for a node that joins a running DC: random, non-zero, below
/// [`MAX_GENERATION`](causet_core::replica::MAX_GENERATION) (replica ids hold the node, the generation and the
/// replica's incarnation), so that no two incarnations of a disk share one.
fn new_generation() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // The standard library's hasher keys come from the operating system's random source.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    (h.finish() % (causet_core::replica::MAX_GENERATION - 1)) + 1
}
