//! Prometheus metrics, served on the admin port at `/metrics`.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

type Labels = Vec<(&'static str, &'static str)>;

/// The node's metrics.
pub struct Metrics {
    registry: Registry,
    /// Transactions started (interactive and static).
    pub started: Counter,
    /// Transactions committed.
    pub committed: Counter,
    /// Transactions aborted or failed.
    pub aborted: Counter,
    /// Client requests by kind.
    pub requests: Family<Labels, Counter>,
    /// Client request latency by kind, seconds.
    pub latency: Family<Labels, Histogram>,
    /// Open client connections.
    pub connections: Gauge,
    /// Connections refused at the limit.
    pub connections_refused: Counter,
    /// Frames refused as malformed, oversized or unknown.
    pub protocol_errors: Counter,
    /// Open transactions, summed over shards at scrape time.
    pub open_transactions: Gauge,
    /// Log records kept, summed over partitions at scrape time.
    pub log_records: Gauge<u64, AtomicU64>,
    /// Log bytes kept, summed over partitions at scrape time.
    pub log_bytes: Gauge<u64, AtomicU64>,
    /// fsyncs done.
    pub fsyncs: Gauge<u64, AtomicU64>,
    /// Per DC, microseconds between now and the stable snapshot's entry for that DC, at scrape time. For a peer DC
    /// it bounds remote visibility: a commit of that DC becomes readable here once the entry passes its time.
    pub stable_snapshot_age_us: Family<Vec<(&'static str, String)>, Gauge>,
    /// Messages between this node's shards dropped at a full inbox, at scrape time.
    pub shard_messages_dropped: Gauge<u64, AtomicU64>,
    /// Messages sent and dropped on each link to a peer DC, at scrape time.
    pub link_messages: Family<Vec<(&'static str, String)>, Gauge<u64, AtomicU64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("causet");
        let started = Counter::default();
        let committed = Counter::default();
        let aborted = Counter::default();
        let requests = Family::<Labels, Counter>::default();
        let latency = Family::<Labels, Histogram>::new_with_constructor(
            (|| Histogram::new(exponential_buckets(0.000_025, 2.0, 18))) as fn() -> Histogram,
        );
        let connections = Gauge::default();
        let connections_refused = Counter::default();
        let protocol_errors = Counter::default();
        let open_transactions = Gauge::default();
        let log_records = Gauge::<u64, AtomicU64>::default();
        let log_bytes = Gauge::<u64, AtomicU64>::default();
        let fsyncs = Gauge::<u64, AtomicU64>::default();
        let stable_snapshot_age_us = Family::<Vec<(&'static str, String)>, Gauge>::default();
        let link_messages = Family::<Vec<(&'static str, String)>, Gauge<u64, AtomicU64>>::default();
        let shard_messages_dropped = Gauge::<u64, AtomicU64>::default();
        registry.register(
            "shard_messages_dropped",
            "Messages between the node's shards dropped at a full inbox",
            shard_messages_dropped.clone(),
        );
        registry.register("transactions_started", "Transactions started", started.clone());
        registry.register("transactions_committed", "Transactions committed", committed.clone());
        registry.register("transactions_aborted", "Transactions aborted or failed", aborted.clone());
        registry.register("requests", "Client requests by kind", requests.clone());
        registry.register("request_duration_seconds", "Client request latency by kind", latency.clone());
        registry.register("connections", "Open client connections", connections.clone());
        registry.register("connections_refused", "Connections refused at the limit", connections_refused.clone());
        registry.register("protocol_errors", "Malformed, oversized or unknown frames", protocol_errors.clone());
        registry.register("open_transactions", "Open transactions", open_transactions.clone());
        registry.register("log_records", "Log records kept", log_records.clone());
        registry.register("log_bytes", "Log bytes kept", log_bytes.clone());
        registry.register("fsyncs", "fsyncs of the log", fsyncs.clone());
        registry.register(
            "stable_snapshot_age_microseconds",
            "Per DC, how far the stable snapshot's entry lags behind now (for a peer DC: the remote visibility delay)",
            stable_snapshot_age_us.clone(),
        );
        registry.register("link_messages", "Messages on each link to a peer DC, by outcome", link_messages.clone());
        Self {
            registry,
            started,
            committed,
            aborted,
            requests,
            latency,
            connections,
            connections_refused,
            protocol_errors,
            open_transactions,
            log_records,
            log_bytes,
            fsyncs,
            stable_snapshot_age_us,
            link_messages,
            shard_messages_dropped,
        }
    }

    /// The Prometheus text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        prometheus_client::encoding::text::encode(&mut out, &self.registry).expect("encoding to a String");
        out
    }
}
