//! Prometheus metrics, served on the admin port at `/metrics`.

use crate::status::ShardStatus;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

type Labels = Vec<(&'static str, &'static str)>;
/// A replicated partition's label.
type PartitionLabel = Vec<(&'static str, String)>;

/// The node's metrics.
pub struct Metrics {
    registry: Registry,
    /// The node's replicas' Raft rounds and Writes, timed, summed over its replicas at scrape time.
    replica_durations: std::sync::Arc<ReplicaDurations>,
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
    /// Client request latency since the web console's last sample.
    pub recent_latency: crate::console::RecentLatency,
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
    pub fsyncs: Counter,
    /// Per DC, seconds between now and the stable snapshot's entry for that DC, at scrape time. For a peer DC it
    /// bounds remote visibility: a commit of that DC becomes readable here once the entry passes its time.
    pub stable_snapshot_age: Family<Vec<(&'static str, String)>, Gauge<f64, AtomicU64>>,
    /// Messages between this node's shards dropped at a full inbox, raised to the total at scrape time.
    pub shard_messages_dropped: Counter,
    /// Messages sent and dropped on the links to each DC (its nodes summed), raised to the links' totals at scrape time.
    pub link_messages: Family<Vec<(&'static str, String)>, Counter>,
    /// Bytes sent on the links to each DC (its nodes summed): what replication and remote reads cost the WAN.
    pub link_bytes: Family<Vec<(&'static str, String)>, Counter>,
    /// Reads of objects this DC does not hold, sent to another DC, and those asked of another ring's holder too.
    pub remote_reads: Family<Vec<(&'static str, String)>, Counter>,
    /// Go-back-N resends of geo-replication, by cause.
    pub replication_go_backs: Family<Vec<(&'static str, String)>, Counter>,
    /// Objects stored by this node's partitions (under partial replication, only those its DC holds).
    pub stored_objects: Gauge<u64, AtomicU64>,
    /// Writes shipped to other DCs (once per DC they went to).
    pub shipped_writes: Counter,
    /// The encoded bytes of those writes.
    pub shipped_write_bytes: Counter,
    /// Per peer DC, the largest lag of its acknowledgement over the partitions here, seconds, at scrape time.
    pub replication_ack_lag: Family<Vec<(&'static str, String)>, Gauge<f64, AtomicU64>>,
    /// Per replica held here: whether it leads (1) or not (0).
    pub replica_leader: Family<PartitionLabel, Gauge>,
    /// Per replica: its Raft term.
    pub replica_term: Family<PartitionLabel, Gauge<u64, AtomicU64>>,
    /// Per replica: the highest log index it knows committed, and the last it applied.
    pub replica_index: Family<Vec<(&'static str, String)>, Gauge<u64, AtomicU64>>,
    /// Per replica: committed entries not applied yet.
    pub replica_apply_lag: Family<PartitionLabel, Gauge<u64, AtomicU64>>,
    /// Per replica: times it started serving as leader (elections won).
    pub replica_terms_led: Family<PartitionLabel, Counter>,
    /// Per replica: Writes handed to the storage engine (one per Raft round with something to store).
    pub replica_writes: Family<PartitionLabel, Counter>,
    /// Per replica: log entries its Writes carried.
    pub replica_written_entries: Family<PartitionLabel, Counter>,
    /// Per replica: times a serving leader stepped down and rebuilt its partition.
    pub replica_step_downs: Family<PartitionLabel, Counter>,
    /// Per replica: times it handed leadership back to the partition's home node.
    pub replica_handovers: Family<PartitionLabel, Counter>,
    /// Per replica: checkpoints written.
    pub replica_checkpoints: Family<PartitionLabel, Counter>,
    /// Per partition this node leads and follower node: entries of the leader's log the follower is not known to
    /// hold.
    pub replica_follower_lag: Family<Vec<(&'static str, String)>, Gauge<u64, AtomicU64>>,
    /// Per replica and direction (`sent`, `installed`): snapshots transferred.
    pub replica_snapshots: Family<Vec<(&'static str, String)>, Counter>,
    /// Per replica: the voters of its group as it applied the membership.
    pub replica_voters: Family<PartitionLabel, Gauge<u64, AtomicU64>>,
    /// Per replica: membership changes applied.
    pub replica_membership_changes: Family<PartitionLabel, Counter>,
    /// Elections this node's replica started, per partition.
    pub replica_campaigns: Family<PartitionLabel, Counter>,
    /// Times this node's replica stopped leading, per partition and reason (`quorum`, `deposed`).
    pub replica_leadership_lost: Family<Vec<(&'static str, String)>, Counter>,
    /// Per replica and outcome (`served`, `passed_on`): reads for the nearest replica that reached it as a
    /// follower.
    pub replica_nearest_reads: Family<Vec<(&'static str, String)>, Counter>,
    /// Requests coordinators sent again to a partition's new leader.
    pub resends_to_new_leaders: Counter,
    /// Prepares coordinators sent again because they, or their answers, did not arrive in time.
    pub prepare_resends: Counter,
    /// Reads of this DC's partitions coordinators sent again because they, or their answers, did not arrive in time.
    pub read_resends: Counter,
    /// Prepares partitions turned away as duplicates of transactions that had ended there (answered with the
    /// commit or a refusal, not acted on).
    pub duplicate_prepares: Counter,
    /// The lease cache's reads by outcome: `hit`, `miss` (not cached, or its lease ended), `refetch` (its box
    /// missed the transaction's window).
    pub cache_reads: Family<Labels, Counter>,
    /// Entries the lease cache dropped, by reason: `expired` (lease ended), `evicted` (memory bound).
    pub cache_dropped: Family<Labels, Counter>,
    /// Cache hits on states whose boxes notices of writes may raise (fetched from another DC under partial
    /// replication; any, with every object held everywhere), by whether notices raised them at that read
    /// (`raised`) or not (`as_fetched`).
    pub cache_open_hits: Family<Labels, Counter>,
    /// Cached states of objects held at other DCs that a write made stale, fetched again in the background, by
    /// outcome: `sent` (asked), `cached` (answered and kept).
    pub cache_refreshes: Family<Labels, Counter>,
    /// Transactions that read past a lease cache that did not pay (its gate; docs/cache.md).
    pub cache_bypassed_transactions: Counter,
    /// Coordinators' caches bypassed now, for too few hits over their last lease.
    pub cache_bypassing: Gauge,
    /// Entries in the lease caches now.
    pub cache_entries: Gauge,
    /// Bytes of states in the lease caches now.
    pub cache_bytes: Gauge,
    /// Update transactions acknowledged once buffered (HoneyPot's write buffer).
    pub buffered_transactions: Counter,
    /// Components of buffered writes handed over to their owners.
    pub handovers: Counter,
    /// Handover transactions sent again after a failed prepare.
    pub handover_retries: Counter,
    /// Objects handed over, summed over handovers.
    pub handed_objects: Counter,
    /// Time from the start of a round of handovers to each handover's commit, summed, seconds.
    pub handover_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    /// Other coordinators' questions for a handover answered (their sessions moved with a buffer token).
    pub handover_questions: Counter,
    /// Components of buffered writes waiting for their handover now, and the bytes of their effects.
    pub buffer_components: Gauge,
    /// See `buffer_components`.
    pub buffer_bytes: Gauge,
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
        let fsyncs = Counter::default();
        let stable_snapshot_age = Family::<Vec<(&'static str, String)>, Gauge<f64, AtomicU64>>::default();
        let link_messages = Family::<Vec<(&'static str, String)>, Counter>::default();
        let link_bytes = Family::<Vec<(&'static str, String)>, Counter>::default();
        let remote_reads = Family::<Vec<(&'static str, String)>, Counter>::default();
        let replication_go_backs = Family::<Vec<(&'static str, String)>, Counter>::default();
        let stored_objects = Gauge::<u64, AtomicU64>::default();
        let shipped_writes = Counter::default();
        let shipped_write_bytes = Counter::default();
        let shard_messages_dropped = Counter::default();
        let replica_leader = Family::<PartitionLabel, Gauge>::default();
        let replica_term = Family::<PartitionLabel, Gauge<u64, AtomicU64>>::default();
        let replica_index = Family::<Vec<(&'static str, String)>, Gauge<u64, AtomicU64>>::default();
        let replica_apply_lag = Family::<PartitionLabel, Gauge<u64, AtomicU64>>::default();
        let replica_terms_led = Family::<PartitionLabel, Counter>::default();
        let replica_writes = Family::<PartitionLabel, Counter>::default();
        let replica_written_entries = Family::<PartitionLabel, Counter>::default();
        let replica_step_downs = Family::<PartitionLabel, Counter>::default();
        let replica_handovers = Family::<PartitionLabel, Counter>::default();
        let replica_checkpoints = Family::<PartitionLabel, Counter>::default();
        let replica_snapshots = Family::<Vec<(&'static str, String)>, Counter>::default();
        let replica_voters = Family::<PartitionLabel, Gauge<u64, AtomicU64>>::default();
        let replica_membership_changes = Family::<PartitionLabel, Counter>::default();
        let replica_campaigns = Family::<PartitionLabel, Counter>::default();
        let replica_leadership_lost = Family::<Vec<(&'static str, String)>, Counter>::default();
        let replica_nearest_reads = Family::<Vec<(&'static str, String)>, Counter>::default();
        let replica_follower_lag = Family::<Vec<(&'static str, String)>, Gauge<u64, AtomicU64>>::default();
        let resends_to_new_leaders = Counter::default();
        let prepare_resends = Counter::default();
        let read_resends = Counter::default();
        let duplicate_prepares = Counter::default();
        let cache_reads = Family::<Labels, Counter>::default();
        let cache_dropped = Family::<Labels, Counter>::default();
        let cache_open_hits = Family::<Labels, Counter>::default();
        let cache_refreshes = Family::<Labels, Counter>::default();
        let cache_bypassed_transactions = Counter::default();
        let cache_bypassing = Gauge::default();
        let cache_entries = Gauge::default();
        let cache_bytes = Gauge::default();
        let buffered_transactions = Counter::default();
        let handovers = Counter::default();
        let handover_retries = Counter::default();
        let handed_objects = Counter::default();
        let handover_seconds = Counter::<f64, std::sync::atomic::AtomicU64>::default();
        let handover_questions = Counter::default();
        let buffer_components = Gauge::default();
        let buffer_bytes = Gauge::default();
        registry.register(
            "buffered_transactions",
            "Update transactions acknowledged once buffered at their coordinator",
            buffered_transactions.clone(),
        );
        registry.register("handovers", "Components of buffered writes handed over to their owners", handovers.clone());
        registry.register("handover_retries", "Handovers sent again after a failed prepare", handover_retries.clone());
        registry.register("handed_objects", "Objects handed over, summed over handovers", handed_objects.clone());
        registry.register(
            "handover_seconds",
            "Time from the start of a round of handovers to each handover's commit, summed",
            handover_seconds.clone(),
        );
        registry.register(
            "handover_questions",
            "Questions for a handover answered to another coordinator, whose session saw this buffer and moved",
            handover_questions.clone(),
        );
        registry.register("buffer_components", "Components of buffered writes waiting", buffer_components.clone());
        registry.register("buffer_bytes", "Bytes of buffered effects waiting", buffer_bytes.clone());
        registry.register(
            "cache_reads",
            "Reads through the lease cache: hit, miss (not cached or lease ended), refetch (box outside the window)",
            cache_reads.clone(),
        );
        registry.register(
            "cache_dropped",
            "Lease cache entries dropped: expired (lease ended) or evicted (memory bound)",
            cache_dropped.clone(),
        );
        registry.register(
            "cache_open_hits",
            "Cache hits on states whose boxes notices of writes may raise: as fetched, or raised at that read",
            cache_open_hits.clone(),
        );
        registry.register(
            "cache_refreshes",
            "Cached states of objects held elsewhere that a write made stale, fetched again in the background: sent, cached; reads that waited for one in flight (joined), and those it served (joined_served)",
            cache_refreshes.clone(),
        );
        registry.register(
            "cache_bypassed_transactions",
            "Transactions that read past the lease cache because too few of its reads over its last lease were hits",
            cache_bypassed_transactions.clone(),
        );
        registry.register(
            "cache_bypassing",
            "Coordinators whose lease cache is bypassed now (too few hits over its last lease)",
            cache_bypassing.clone(),
        );
        registry.register("cache_entries", "Entries in the lease caches", cache_entries.clone());
        registry.register("cache_bytes", "Bytes of states in the lease caches", cache_bytes.clone());
        registry.register("replica_leader", "Whether this node's replica leads the partition", replica_leader.clone());
        registry.register("replica_term", "The Raft term of this node's replica", replica_term.clone());
        registry.register(
            "replica_index",
            "Log indexes of this node's replica: the highest known committed, the last applied, the first kept",
            replica_index.clone(),
        );
        registry.register(
            "replica_apply_lag_entries",
            "Committed entries this node's replica has not applied yet",
            replica_apply_lag.clone(),
        );
        registry.register("replica_terms_led", "Terms this node's replica served as leader", replica_terms_led.clone());
        registry.register(
            "replica_writes",
            "Writes this node's replica handed to the storage engine (one per Raft round with something to store)",
            replica_writes.clone(),
        );
        registry.register(
            "replica_written_entries",
            "Raft log entries carried by this node's replica's Writes",
            replica_written_entries.clone(),
        );
        let replica_durations = std::sync::Arc::new(ReplicaDurations::default());
        registry.register_collector(Box::new(replica_durations.clone()));
        registry.register(
            "replica_step_downs",
            "Times a serving leader here stepped down and rebuilt its partition from the log",
            replica_step_downs.clone(),
        );
        registry.register(
            "replica_campaigns",
            "Elections this node's replica started: it heard from no leader for an election timeout",
            replica_campaigns.clone(),
        );
        registry.register(
            "replica_leadership_lost",
            "Times this node's replica stopped leading: reason quorum (no word from a majority for an election timeout) or deposed (a later term seen)",
            replica_leadership_lost.clone(),
        );
        registry.register(
            "replica_handovers",
            "Times a leader here handed leadership back to the partition's home node",
            replica_handovers.clone(),
        );
        registry.register("replica_checkpoints", "Checkpoints this node's replica wrote", replica_checkpoints.clone());
        registry.register(
            "replica_follower_lag_entries",
            "For partitions this node leads: entries of the leader's log each follower is not known to hold",
            replica_follower_lag.clone(),
        );
        registry.register(
            "replica_snapshots",
            "Snapshots this node's replica sent to followers that needed compacted entries, or installed",
            replica_snapshots.clone(),
        );
        registry.register("replica_voters", "Voters of the group of this node's replica", replica_voters.clone());
        registry.register(
            "replica_membership_changes",
            "Membership changes this node's replica applied (a node that lost its disk replaced, say)",
            replica_membership_changes.clone(),
        );
        registry.register(
            "replica_nearest_reads",
            "Reads for the nearest replica this node's replica served as a follower, or passed on to the leader",
            replica_nearest_reads.clone(),
        );
        registry.register(
            "resends_to_new_leaders",
            "Requests coordinators sent again to a partition's new leader",
            resends_to_new_leaders.clone(),
        );
        registry.register(
            "prepare_resends",
            "Prepares coordinators sent again because they, or their answers, did not arrive in time",
            prepare_resends.clone(),
        );
        registry.register(
            "read_resends",
            "Reads of this DC's partitions coordinators sent again because they, or their answers, did not arrive in time",
            read_resends.clone(),
        );
        registry.register(
            "duplicate_prepares",
            "Prepares turned away (answered, not acted on) as duplicates of transactions that had ended at their partition",
            duplicate_prepares.clone(),
        );
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
            "stable_snapshot_age_seconds",
            "Per DC, how far the stable snapshot's entry lags behind now (for a peer DC: the remote visibility delay)",
            stable_snapshot_age.clone(),
        );
        registry.register("link_messages", "Messages on the links to each DC, by outcome", link_messages.clone());
        registry.register("link_bytes", "Bytes sent on the links to each DC", link_bytes.clone());
        registry.register(
            "remote_reads",
            "Reads of objects this DC does not hold (partial replication): sent to another DC, failed over to \
             another ring's holder, and copies sent to other rings' holders only to measure them (probes)",
            remote_reads.clone(),
        );
        registry.register(
            "replication_go_backs",
            "Times a partition sent another DC everything after what that DC acknowledged again (go-back-N): the DC \
             fell silent (cause silence), or asked after a gap in what it received (cause gap)",
            replication_go_backs.clone(),
        );
        registry.register("stored_objects", "Objects stored by this node's partitions", stored_objects.clone());
        registry.register(
            "shipped_writes",
            "Writes shipped to other DCs, once per DC they went to (resends included)",
            shipped_writes.clone(),
        );
        registry.register(
            "shipped_write_bytes",
            "Encoded bytes of the writes shipped to other DCs (objects' ids and effects; not the protocol's bookkeeping)",
            shipped_write_bytes.clone(),
        );
        let replication_ack_lag = Family::<Vec<(&'static str, String)>, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "replication_ack_lag_seconds",
            "Per peer DC: how far its acknowledgement of this node's transactions lags, the most over the partitions \
             here (it grows for as long as the peer is away; the backlog is about this times the write rate)",
            replication_ack_lag.clone(),
        );
        Self {
            registry,
            replica_durations,
            started,
            committed,
            aborted,
            requests,
            latency,
            recent_latency: Default::default(),
            connections,
            connections_refused,
            protocol_errors,
            open_transactions,
            log_records,
            log_bytes,
            fsyncs,
            stable_snapshot_age,
            link_messages,
            link_bytes,
            remote_reads,
            replication_go_backs,
            stored_objects,
            shipped_writes,
            shipped_write_bytes,
            replication_ack_lag,
            shard_messages_dropped,
            replica_leader,
            replica_term,
            replica_index,
            replica_apply_lag,
            replica_terms_led,
            replica_writes,
            replica_written_entries,
            replica_step_downs,
            replica_handovers,
            replica_checkpoints,
            replica_snapshots,
            replica_voters,
            replica_membership_changes,
            replica_campaigns,
            replica_leadership_lost,
            replica_nearest_reads,
            replica_follower_lag,
            resends_to_new_leaders,
            prepare_resends,
            read_resends,
            duplicate_prepares,
            cache_reads,
            cache_dropped,
            cache_open_hits,
            cache_refreshes,
            cache_bypassed_transactions,
            cache_bypassing,
            cache_entries,
            cache_bytes,
            buffered_transactions,
            handovers,
            handover_retries,
            handed_objects,
            handover_seconds,
            handover_questions,
            buffer_components,
            buffer_bytes,
        }
    }

    /// Sets the replica, resend and duplicate metrics from the shards' status, taken at scrape time. The status
    /// holds totals since the process started; a counter is raised to its total.
    pub fn observe_shards(&self, shards: &[ShardStatus]) {
        // Only what this node leads now: a partition that moved away leaves no stale follower lag behind.
        self.replica_follower_lag.clear();
        let mut rounds = causet_core::replica::Durations::default();
        let mut writes = causet_core::replica::Durations::default();
        for r in shards.iter().flat_map(|s| &s.replicas) {
            rounds.merge(&r.rounds);
            writes.merge(&r.write_durations);
            let label = vec![("partition", r.id.to_string())];
            for f in &r.followers {
                let labels = vec![("partition", r.id.to_string()), ("follower", f.node.to_string())];
                self.replica_follower_lag.get_or_create(&labels).set(f.lag);
            }
            self.replica_leader.get_or_create(&label).set(i64::from(r.role == "leader"));
            self.replica_term.get_or_create(&label).set(r.term);
            for (kind, index) in [("committed", r.commit), ("applied", r.applied), ("first", r.first_index)] {
                let labels = vec![("partition", r.id.to_string()), ("kind", kind.to_string())];
                self.replica_index.get_or_create(&labels).set(index);
            }
            self.replica_apply_lag.get_or_create(&label).set(r.commit.saturating_sub(r.applied));
            raise(&self.replica_terms_led.get_or_create(&label), r.terms_led);
            raise(&self.replica_writes.get_or_create(&label), r.writes);
            raise(&self.replica_written_entries.get_or_create(&label), r.written_entries);
            raise(&self.replica_step_downs.get_or_create(&label), r.reloads);
            raise(&self.replica_handovers.get_or_create(&label), r.handovers);
            raise(&self.replica_checkpoints.get_or_create(&label), r.checkpoints);
            for (direction, total) in [("sent", r.snapshots_sent), ("installed", r.snapshots_installed)] {
                let labels = vec![("partition", r.id.to_string()), ("direction", direction.to_string())];
                raise(&self.replica_snapshots.get_or_create(&labels), total);
            }
            self.replica_voters.get_or_create(&label).set(r.membership.voters.len() as u64);
            raise(&self.replica_membership_changes.get_or_create(&label), r.membership_changes);
            raise(&self.replica_campaigns.get_or_create(&label), r.campaigns);
            for (reason, total) in [("quorum", r.quorum_lost), ("deposed", r.deposed)] {
                let labels = vec![("partition", r.id.to_string()), ("reason", reason.to_string())];
                raise(&self.replica_leadership_lost.get_or_create(&labels), total);
            }
            for (outcome, total) in [("served", r.nearest_reads), ("passed_on", r.nearest_reads_passed_on)] {
                let labels = vec![("partition", r.id.to_string()), ("outcome", outcome.to_string())];
                raise(&self.replica_nearest_reads.get_or_create(&labels), total);
            }
        }
        *self.replica_durations.0.lock().expect("not poisoned") = (rounds, writes);
        let mut lag = std::collections::BTreeMap::new();
        for (peer, ms) in shards.iter().flat_map(|s| &s.partitions).flat_map(|p| &p.replication_lag_ms) {
            let most = lag.entry(*peer).or_insert(0);
            *most = (*most).max(*ms);
        }
        for (peer, ms) in lag {
            self.replication_ack_lag.get_or_create(&vec![("peer", peer.to_string())]).set(ms as f64 / 1000.0);
        }
        raise(&self.resends_to_new_leaders, shards.iter().map(|s| s.resends_to_new_leaders).sum());
        raise(&self.prepare_resends, shards.iter().map(|s| s.prepare_resends).sum());
        raise(&self.read_resends, shards.iter().map(|s| s.read_resends).sum());
        let (remote, failovers) = shards.iter().fold((0, 0), |(r, f), s| (r + s.remote_reads.0, f + s.remote_reads.1));
        if remote > 0 {
            raise(&self.remote_reads.get_or_create(&vec![("outcome", "sent".into())]), remote);
            raise(&self.remote_reads.get_or_create(&vec![("outcome", "failed_over".into())]), failovers);
            let probes = shards.iter().map(|s| s.ring_probes).sum();
            raise(&self.remote_reads.get_or_create(&vec![("outcome", "probe".into())]), probes);
        }
        self.stored_objects.set(shards.iter().map(crate::status::ShardStatus::stored_objects).sum::<usize>() as u64);
        let caches: Vec<_> = shards.iter().filter_map(|s| s.cache.as_ref()).collect();
        if !caches.is_empty() {
            let sum = |f: fn(&causet_core::cache::CacheStats) -> u64| caches.iter().map(|c| f(c)).sum::<u64>();
            raise(&self.cache_reads.get_or_create(&vec![("outcome", "hit")]), sum(|c| c.hits));
            raise(&self.cache_reads.get_or_create(&vec![("outcome", "miss")]), sum(|c| c.misses));
            raise(&self.cache_reads.get_or_create(&vec![("outcome", "refetch")]), sum(|c| c.refetches));
            raise(&self.cache_dropped.get_or_create(&vec![("reason", "expired")]), sum(|c| c.expired));
            raise(&self.cache_dropped.get_or_create(&vec![("reason", "evicted")]), sum(|c| c.evicted));
            if sum(|c| c.open_hits) > 0 {
                let (raised, fetched) = (sum(|c| c.extended), sum(|c| c.open_hits - c.extended));
                raise(&self.cache_open_hits.get_or_create(&vec![("outcome", "raised")]), raised);
                raise(&self.cache_open_hits.get_or_create(&vec![("outcome", "as_fetched")]), fetched);
            }
            if sum(|c| c.refreshes) > 0 {
                raise(&self.cache_refreshes.get_or_create(&vec![("outcome", "sent")]), sum(|c| c.refreshes));
                raise(&self.cache_refreshes.get_or_create(&vec![("outcome", "cached")]), sum(|c| c.refreshed));
                raise(&self.cache_refreshes.get_or_create(&vec![("outcome", "joined")]), sum(|c| c.joined));
                let served = sum(|c| c.joined_served);
                raise(&self.cache_refreshes.get_or_create(&vec![("outcome", "joined_served")]), served);
            }
            raise(&self.cache_bypassed_transactions, sum(|c| c.bypassed));
            self.cache_bypassing.set(sum(|c| u64::from(c.bypassing)) as i64);
            self.cache_entries.set(sum(|c| c.entries as u64) as i64);
            self.cache_bytes.set(sum(|c| c.bytes as u64) as i64);
        }
        let buffers: Vec<_> = shards.iter().filter_map(|s| s.buffer.as_ref()).collect();
        if !buffers.is_empty() {
            let sum =
                |f: fn(&causet_core::coordinator::HandoverStats) -> u64| buffers.iter().map(|b| f(b)).sum::<u64>();
            raise(&self.buffered_transactions, sum(|b| b.buffer.transactions));
            raise(&self.handovers, sum(|b| b.handovers));
            raise(&self.handover_retries, sum(|b| b.retries));
            raise(&self.handed_objects, sum(|b| b.handed_objects));
            raise(&self.handover_questions, sum(|b| b.asked));
            let seconds = sum(|b| b.handover_us_total) as f64 / 1e6;
            self.handover_seconds.inc_by((seconds - self.handover_seconds.get()).max(0.0));
            self.buffer_components.set(sum(|b| b.buffer.components as u64) as i64);
            self.buffer_bytes.set(sum(|b| b.buffer.bytes as u64) as i64);
        }
        let shipped = shards.iter().flat_map(|s| &s.partitions).map(|p| p.shipped_writes);
        let (writes, bytes) = shipped.fold((0, 0), |(w, b), (pw, pb)| (w + pw, b + pb));
        raise(&self.shipped_writes, writes);
        raise(&self.shipped_write_bytes, bytes);
        let go_backs = shards.iter().flat_map(|s| &s.partitions).map(|p| p.replication_go_backs);
        let (silence, gap) = go_backs.fold((0, 0), |(s, g), (ps, pg)| (s + ps, g + pg));
        raise(&self.replication_go_backs.get_or_create(&vec![("cause", "silence".into())]), silence);
        raise(&self.replication_go_backs.get_or_create(&vec![("cause", "gap".into())]), gap);
        let duplicates = shards.iter().flat_map(|s| &s.partitions).map(|p| p.duplicate_prepares).sum();
        raise(&self.duplicate_prepares, duplicates);
    }

    /// The exposition: OpenMetrics text (`openmetrics`), or else Prometheus' text format 0.0.4, which scrapers and
    /// `promtool` take when they do not ask for OpenMetrics.
    pub fn encode(&self, openmetrics: bool) -> String {
        encode(&self.registry, openmetrics)
    }
}

/// `registry` as a scrape's body: OpenMetrics text, or Prometheus' text format 0.0.4 (see [`content_type`]).
pub fn encode(registry: &Registry, openmetrics: bool) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    prometheus_client::encoding::text::encode(&mut out, registry).expect("encoding to a String");
    if openmetrics {
        out
    } else {
        prometheus_text(&out)
    }
}

/// Whether a scrape asked for OpenMetrics (Prometheus asks for it first in its Accept header; a plain request gets
/// the classic text format), and the content type of the answer.
pub fn content_type(headers: &axum::http::HeaderMap) -> (bool, &'static str) {
    let openmetrics = headers
        .get(axum::http::header::ACCEPT)
        .and_then(|a| a.to_str().ok())
        .is_some_and(|a| a.contains("application/openmetrics-text"));
    let content_type = if openmetrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    };
    (openmetrics, content_type)
}

/// The node's replicas' Raft rounds and Writes, timed in the core ([`causet_core::replica::Durations`]) and
/// exposed as two histograms. The core counts since each replica started: a replica that leaves the node takes its
/// counts with it, so these may fall (the status is summed afresh at every scrape).
#[derive(Debug, Default)]
struct ReplicaDurations(std::sync::Mutex<(causet_core::replica::Durations, causet_core::replica::Durations)>);

impl prometheus_client::collector::Collector for ReplicaDurations {
    fn encode(&self, mut encoder: prometheus_client::encoding::DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (rounds, writes) = *self.0.lock().expect("not poisoned");
        let described = [
            (
                "replica_round_seconds",
                "Raft rounds led by this node's replicas: from proposing a record to learning that a majority stored \
                 it",
                rounds,
            ),
            (
                "replica_write_seconds",
                "Writes of this node's replicas: from handing one to the storage engine to hearing it durable",
                writes,
            ),
        ];
        for (name, help, d) in described {
            // Per bucket: the encoder sums them up.
            let buckets: Vec<(f64, u64)> =
                d.buckets().map(|(us, n)| (us.map_or(f64::INFINITY, |us| us as f64 / 1e6), n)).collect();
            let mut metric =
                encoder.encode_descriptor(name, help, None, prometheus_client::metrics::MetricType::Histogram)?;
            metric.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                d.sum_us() as f64 / 1e6,
                d.count(),
                &buckets,
                None,
            )?;
        }
        Ok(())
    }
}

/// Raises a counter to a total kept elsewhere (the node's status, the storage engine's statistics), read at scrape
/// time: totals only grow while the process runs, and so does the counter.
pub fn raise(counter: &Counter, total: u64) {
    counter.inc_by(total.saturating_sub(counter.get()));
}

/// OpenMetrics text as Prometheus' text format 0.0.4: a counter's `# HELP` and `# TYPE` name its samples' name
/// (`x_total`, where OpenMetrics names the family `x`), and the OpenMetrics-only lines (`# UNIT`, `# EOF`) go.
fn prometheus_text(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "].into_iter().find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let name = rest.split(' ').next().unwrap_or_default();
                if counters.contains(name) {
                    out.push_str(&format!("{prefix}{name}_total{}", &rest[name.len()..]));
                } else {
                    out.push_str(line);
                }
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::{PartitionStatus, ReplicaStatus};

    fn durations(us: &[u64]) -> causet_core::replica::Durations {
        let mut d = causet_core::replica::Durations::default();
        for u in us {
            d.record(*u);
        }
        d
    }

    fn shard(terms_led: u64, resends: u64, duplicates: u64) -> ShardStatus {
        let replica = ReplicaStatus {
            id: 3,
            role: "leader",
            term: 7,
            leader: Some(1),
            commit: 40,
            applied: 37,
            last_index: 41,
            first_index: 12,
            checkpoints: 4,
            snapshots_sent: terms_led,
            snapshots_installed: 1,
            snapshots_too_large: 0,
            snapshot_parts_sent: 0,
            snapshot_part_resends: 0,
            snapshot_streams_received: 0,
            followers: vec![crate::status::FollowerStatus { node: 2, matched: 38, lag: 3, snapshot: false }],
            terms_led,
            writes: 11,
            written_entries: 29,
            rounds: durations(&[150, 3_000]),
            write_durations: durations(&[80]),
            reloads: 1,
            handovers: 0,
            membership: crate::status::MembershipStatus {
                generation: 0,
                voters: [1, 2, 3]
                    .map(|node| crate::status::MemberStatus { node, generation: 0, incarnation: 0 })
                    .to_vec(),
                learners: Vec::new(),
                outgoing: Vec::new(),
            },
            membership_changes: 3,
            campaigns: 2,
            quorum_lost: 1,
            deposed: 0,
            membership_proposals: 0,
            join_requests: 0,
            nearest_reads: 9,
            nearest_reads_passed_on: 1,
            objects: 5,
            versions: 2,
        };
        let partition = PartitionStatus {
            id: 3,
            pvc: vec![0],
            prepared: 0,
            waiting: 0,
            objects: 0,
            versions: 0,
            replication_backlog: 0,
            replication_spilled: false,
            replication_lag_ms: vec![(1, 12)],
            inbound_backlog: Vec::new(),
            duplicate_prepares: duplicates,
            shipped_writes: (4 * duplicates, 300 * duplicates),
            replication_go_backs: (duplicates, 5 * duplicates),
        };
        ShardStatus {
            shard: 0,
            open_transactions: 0,
            resends_to_new_leaders: resends,
            prepare_resends: 2 * resends,
            read_resends: 3 * resends,
            remote_reads: (7 * resends, resends),
            ring_probes: 2 * resends,
            ring_round_trip_ms: vec![None, Some(12.5)],
            cache: Some(causet_core::cache::CacheStats {
                hits: 10 * resends,
                misses: 3,
                refetches: 2,
                expired: 4,
                evicted: 1,
                open_hits: 7,
                extended: 5,
                refreshes: 3,
                refreshed: 2,
                joined: 4,
                joined_served: 3,
                bypassed: 8 * resends,
                bypasses: 1,
                bypassing: true,
                entries: 6,
                bytes: 600,
            }),
            buffer: None,
            stable_snapshot: vec![0],
            gc_frontier: None,
            partitions: vec![partition],
            replicas: vec![replica],
            placements: Vec::new(),
        }
    }

    #[test]
    fn round_and_write_times_are_summed_over_the_nodes_replicas() {
        let m = Metrics::new();
        m.observe_shards(&[shard(1, 2, 0), shard(1, 2, 0)]);
        let text = m.encode(false);
        for line in [
            "causet_replica_round_seconds_count 4",
            "causet_replica_round_seconds_bucket{le=\"0.0002\"} 2",
            "causet_replica_write_seconds_count 2",
            "# TYPE causet_replica_round_seconds histogram",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in:\n{text}");
        }
    }

    #[test]
    fn replica_metrics_follow_the_status_and_counters_rise_to_its_totals() {
        let m = Metrics::new();
        m.observe_shards(&[shard(1, 2, 0)]);
        m.observe_shards(&[shard(2, 5, 1)]);
        let text = m.encode(false);
        for line in [
            "causet_replica_leader{partition=\"3\"} 1",
            "causet_replica_term{partition=\"3\"} 7",
            "causet_replica_index{partition=\"3\",kind=\"committed\"} 40",
            "causet_replica_index{partition=\"3\",kind=\"applied\"} 37",
            "causet_replica_apply_lag_entries{partition=\"3\"} 3",
            "causet_replica_terms_led_total{partition=\"3\"} 2",
            "causet_replica_writes_total{partition=\"3\"} 11",
            // One replica: rounds of 150 µs and 3 ms, a Write of 80 µs.
            "causet_replica_round_seconds_count 2",
            "causet_replica_round_seconds_sum 0.00315",
            "causet_replica_round_seconds_bucket{le=\"0.0001\"} 0",
            "causet_replica_round_seconds_bucket{le=\"0.0002\"} 1",
            "causet_replica_round_seconds_bucket{le=\"0.0032\"} 2",
            "causet_replica_round_seconds_bucket{le=\"+Inf\"} 2",
            "causet_replica_write_seconds_bucket{le=\"0.0001\"} 1",
            "causet_replica_written_entries_total{partition=\"3\"} 29",
            "causet_replica_step_downs_total{partition=\"3\"} 1",
            "causet_replica_index{partition=\"3\",kind=\"first\"} 12",
            "causet_replica_checkpoints_total{partition=\"3\"} 4",
            "causet_replica_follower_lag_entries{partition=\"3\",follower=\"2\"} 3",
            "causet_replica_snapshots_total{partition=\"3\",direction=\"sent\"} 2",
            "causet_replica_snapshots_total{partition=\"3\",direction=\"installed\"} 1",
            "causet_replica_voters{partition=\"3\"} 3",
            "causet_replica_membership_changes_total{partition=\"3\"} 3",
            "causet_replica_campaigns_total{partition=\"3\"} 2",
            "causet_replica_leadership_lost_total{partition=\"3\",reason=\"quorum\"} 1",
            "causet_replica_leadership_lost_total{partition=\"3\",reason=\"deposed\"} 0",
            "causet_replica_nearest_reads_total{partition=\"3\",outcome=\"served\"} 9",
            "causet_replica_nearest_reads_total{partition=\"3\",outcome=\"passed_on\"} 1",
            "causet_resends_to_new_leaders_total 5",
            "causet_prepare_resends_total 10",
            "causet_read_resends_total 15",
            "causet_duplicate_prepares_total 1",
            "causet_replication_go_backs_total{cause=\"silence\"} 1",
            "causet_replication_go_backs_total{cause=\"gap\"} 5",
            "causet_replication_ack_lag_seconds{peer=\"1\"} 0.012",
            "causet_cache_reads_total{outcome=\"hit\"} 50",
            "causet_cache_reads_total{outcome=\"miss\"} 3",
            "causet_cache_reads_total{outcome=\"refetch\"} 2",
            "causet_cache_dropped_total{reason=\"expired\"} 4",
            "causet_cache_dropped_total{reason=\"evicted\"} 1",
            "causet_cache_open_hits_total{outcome=\"raised\"} 5",
            "causet_cache_open_hits_total{outcome=\"as_fetched\"} 2",
            "causet_cache_refreshes_total{outcome=\"sent\"} 3",
            "causet_cache_refreshes_total{outcome=\"cached\"} 2",
            "causet_cache_refreshes_total{outcome=\"joined\"} 4",
            "causet_cache_refreshes_total{outcome=\"joined_served\"} 3",
            "causet_cache_bypassed_transactions_total 40",
            "causet_cache_bypassing 1",
            "causet_cache_entries 6",
            "causet_cache_bytes 600",
            "causet_remote_reads_total{outcome=\"sent\"} 35",
            "causet_remote_reads_total{outcome=\"probe\"} 10",
            "causet_remote_reads_total{outcome=\"failed_over\"} 5",
            "causet_stored_objects 5",
            "causet_shipped_writes_total 4",
            "causet_shipped_write_bytes_total 300",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        // Prometheus' text format: a counter's metadata names its samples; nothing OpenMetrics-only.
        assert!(text.contains("# TYPE causet_resends_to_new_leaders_total counter\n"), "{text}");
        assert!(text.contains("# HELP causet_resends_to_new_leaders_total "), "{text}");
        assert!(!text.contains("# EOF") && !text.contains("# UNIT"), "{text}");
        let openmetrics = m.encode(true);
        assert!(openmetrics.contains("# TYPE causet_resends_to_new_leaders counter\n"), "{openmetrics}");
        assert!(openmetrics.trim_end().ends_with("# EOF"), "{openmetrics}");
    }
}
