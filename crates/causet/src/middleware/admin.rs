//! `causet middleware --admin ADDR`: the proxies' HTTP endpoints for operators and for the benchmark.
//!
//! - `GET /metrics`: Prometheus text (OpenMetrics on request), one series per local set served;
//! - `GET /status`: JSON, what each instance did and where its feed and its followers stand;
//! - `GET /settled`: `200` when every instance served here is settled — its own writes are resolved in every
//!   other local set (nothing waits in its feed) and each of its followers has resolved every version of the
//!   feed it follows, as far as it knows the feed's end — and `503` otherwise, with the status as the body. A
//!   follower that does not know its writer's feed yet (the writer has not announced it) is not settled.
//!   `causet bench` asks it before each point, so that a measured window does not start with the backlog of the
//!   preload or of the point before (see docs/middleware.md, "Observing a running proxy");
//! - `GET /health`: `ok`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use causet_middleware::{LocalSet, Middleware, Store};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// What `/status` says of one instance.
#[derive(Clone, Debug, Serialize)]
pub struct InstanceStatus {
    /// The local set it serves.
    pub local_set: LocalSet,
    /// `causal` (the middleware) or `plain` (`--plain`: the store alone).
    pub mode: &'static str,
    /// Where its clients connect.
    pub listen: SocketAddr,
    /// Counters since it started, by name (the metrics' names without the prefix and suffix); none for `plain`.
    pub counters: BTreeMap<&'static str, u64>,
    /// Requests it made of its store since it started, by kind (see `causet_middleware::counted::KINDS`); none for
    /// `plain`.
    pub store_requests: BTreeMap<&'static str, u64>,
    /// Its own writes not yet resolved in every other local set; `None` without a feed (`--no-feed`, or `plain`).
    pub unsettled: Option<usize>,
    /// Its followers of the other local sets' feeds.
    pub following: Vec<Following>,
}

/// Where one follower stands on its writer's feed.
#[derive(Clone, Debug, Serialize)]
pub struct Following {
    /// The local set whose feed it follows.
    pub writer: LocalSet,
    /// Whether it knows the feed's epoch yet (the writer announced it).
    pub announced: bool,
    /// Versions of the feed it has resolved (its position in the feed).
    pub resolved: u64,
    /// Where the feed ends, as far as it knows (the writer's last announcement, read about once a second).
    pub end: u64,
    /// `end - resolved`.
    pub behind: u64,
}

impl InstanceStatus {
    /// The status of middleware instance `m`, serving local set `ls` on `listen`.
    pub fn of<S: Store>(ls: LocalSet, listen: SocketAddr, m: &Middleware<S>) -> InstanceStatus {
        let s = &m.stats;
        let (unfed, unmarked, unconfirmed) = m.dropped();
        let counters = BTreeMap::from([
            ("reads", s.reads.load(Relaxed)),
            ("read_cache_hits", s.read_cache_hits.load(Relaxed)),
            ("read_cache_fallbacks", s.read_cache_fallbacks.load(Relaxed)),
            ("failed_reads", s.failed_reads.load(Relaxed)),
            ("read_rounds", s.read_rounds.load(Relaxed)),
            ("read_records", s.read_records.load(Relaxed)),
            ("unresolved_reads", s.unresolved.load(Relaxed)),
            ("pulled", s.pulled.load(Relaxed)),
            ("pulls_failed", s.pulls_failed.load(Relaxed)),
            ("writes", s.writes.load(Relaxed)),
            ("written_bytes", s.written_bytes.load(Relaxed)),
            ("written_value_bytes", s.written_value_bytes.load(Relaxed)),
            ("cas_conflicts", s.conflicts.load(Relaxed)),
            ("cached_writes", s.cached_writes.load(Relaxed)),
            ("stabilized", s.stabilized.load(Relaxed)),
            ("feed_batches", s.feed_batches.load(Relaxed)),
            ("feed_versions", s.feed_versions.load(Relaxed)),
            ("followed", s.followed.load(Relaxed)),
            ("follow_missing", s.follow_missing.load(Relaxed)),
            ("follower_waits", s.follower_waits.load(Relaxed)),
            ("follower_waits_failed", s.follower_waits_failed.load(Relaxed)),
            ("follower_wait_ms", s.follower_wait_ms.load(Relaxed)),
            ("dropped_unfed", unfed),
            ("dropped_unmarked", unmarked),
            ("dropped_unconfirmed", unconfirmed),
        ]);
        let following = m
            .following()
            .into_iter()
            .map(|(writer, progress)| {
                let (resolved, end) = progress.unwrap_or((0, 0));
                Following { writer, announced: progress.is_some(), resolved, end, behind: end - resolved }
            })
            .collect();
        InstanceStatus {
            local_set: ls,
            mode: "causal",
            listen,
            counters,
            store_requests: m.store_requests().by_kind().into_iter().collect(),
            unsettled: m.unsettled(),
            following,
        }
    }

    /// The status of a `--plain` proxy: the store alone, nothing to settle.
    pub fn plain(ls: LocalSet, listen: SocketAddr) -> InstanceStatus {
        InstanceStatus {
            local_set: ls,
            mode: "plain",
            listen,
            counters: BTreeMap::new(),
            store_requests: BTreeMap::new(),
            unsettled: None,
            following: Vec::new(),
        }
    }

    /// Whether nothing this instance wrote waits to be resolved elsewhere and its followers are at their feeds'
    /// ends.
    pub fn settled(&self) -> bool {
        self.unsettled.unwrap_or(0) == 0 && self.following.iter().all(|f| f.announced && f.behind == 0)
    }
}

/// The instances one process serves, each asked afresh.
pub type Instances = Arc<Vec<Arc<dyn Fn() -> InstanceStatus + Send + Sync>>>;

/// Serves the endpoints on `listener` until `stop` turns true.
pub async fn serve(listener: TcpListener, instances: Instances, mut stop: watch::Receiver<bool>) {
    let app = Router::new()
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route("/settled", get(settled))
        .route("/health", get(|| async { "ok\n" }))
        .with_state(instances);
    let shutdown = async move {
        let _ = stop.wait_for(|s| *s).await;
    };
    if let Err(e) = axum::serve(listener, app).with_graceful_shutdown(shutdown).await {
        eprintln!("the middleware's admin server failed: {e}");
    }
}

fn statuses(instances: &Instances) -> Vec<InstanceStatus> {
    instances.iter().map(|i| i()).collect()
}

async fn status(State(instances): State<Instances>) -> Json<Vec<InstanceStatus>> {
    Json(statuses(&instances))
}

async fn settled(State(instances): State<Instances>) -> impl IntoResponse {
    let all = statuses(&instances);
    let code = if all.iter().all(InstanceStatus::settled) { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (code, Json(all))
}

async fn metrics(State(instances): State<Instances>, headers: HeaderMap) -> impl IntoResponse {
    let registry = registry(&statuses(&instances));
    let (openmetrics, content_type) = causet_server::metrics::content_type(&headers);
    ([(header::CONTENT_TYPE, content_type)], causet_server::metrics::encode(&registry, openmetrics))
}

type Labels = Vec<(&'static str, String)>;

/// The counters' help texts, by the names [`InstanceStatus::of`] gives them.
const HELP: &[(&str, &str)] = &[
    ("reads", "Reads answered"),
    ("read_cache_hits", "Reads answered from the read cache at once, without reading the store (counted in reads too)"),
    (
        "read_cache_fallbacks",
        "Reads answered from the read cache instead of waiting for the store's newest version to be resolved",
    ),
    ("failed_reads", "Reads that failed (resolution did not finish within --resolve-wait-ms)"),
    ("read_rounds", "Store round trips of answered reads, summed"),
    ("read_records", "Records read from the store by answered reads, summed"),
    ("unresolved_reads", "Read attempts that found a dependency missing (retried until --resolve-wait-ms)"),
    ("pulled", "Missing dependencies pulled from another local set"),
    ("pulls_failed", "Pulls that did not bring the dependency"),
    ("writes", "Writes acknowledged"),
    ("written_bytes", "Bytes of records written (values and metadata)"),
    ("written_value_bytes", "Bytes of written values alone"),
    ("cas_conflicts", "Compare-and-swaps lost to another instance (shared writers)"),
    ("cached_writes", "Exclusive writers: writes that took their copy's record from the write cache"),
    ("stabilized", "Versions made stable (resolved in every local set)"),
    ("feed_batches", "Batches appended to this instance's feed"),
    ("feed_versions", "Versions appended to this instance's feed"),
    ("followed", "Versions of other local sets' feeds resolved here ahead of reads"),
    ("follow_missing", "Follower checks that found a version missing (retried)"),
    ("follower_waits", "Reads that waited for a follower instead of walking a version's graph (--walk-budget)"),
    ("follower_waits_failed", "Reads that waited for a follower in vain"),
    ("dropped_unfed", "Versions kept out of the feed because the store refused feed batches for long"),
    ("dropped_unmarked", "Versions in the feed not kept for marking stable (a follower stayed behind for long)"),
    ("dropped_unconfirmed", "Own writes not queued for confirmation (the store could not confirm for long)"),
];

/// A registry holding, as of now, every instance's counters and gauges.
fn registry(all: &[InstanceStatus]) -> Registry {
    let mut registry = Registry::with_prefix("causet_middleware");
    for &(name, help) in HELP {
        let family = Family::<Labels, Counter>::default();
        for s in all {
            if let Some(&v) = s.counters.get(name) {
                family.get_or_create(&vec![("local_set", s.local_set.to_string())]).inc_by(v);
            }
        }
        registry.register(name, help, family);
    }
    let requests = Family::<Labels, Counter>::default();
    for s in all {
        for (&kind, &n) in &s.store_requests {
            requests.get_or_create(&vec![("local_set", s.local_set.to_string()), ("kind", kind.to_owned())]).inc_by(n);
        }
    }
    registry.register(
        "store_requests",
        "Requests made of the store (on Cassandra, statements), by kind, background work included",
        requests,
    );
    // In seconds, as Prometheus names durations.
    let waited = Family::<Labels, Counter<f64, AtomicU64>>::default();
    for s in all {
        if let Some(&ms) = s.counters.get("follower_wait_ms") {
            waited.get_or_create(&vec![("local_set", s.local_set.to_string())]).inc_by(ms as f64 / 1000.0);
        }
    }
    registry.register("follower_wait_seconds", "Time reads spent waiting for a follower, summed", waited);
    let unsettled = Family::<Labels, Gauge>::default();
    let behind = Family::<Labels, Gauge>::default();
    let announced = Family::<Labels, Gauge>::default();
    for s in all {
        if let Some(n) = s.unsettled {
            unsettled.get_or_create(&vec![("local_set", s.local_set.to_string())]).set(n as i64);
        }
        for f in &s.following {
            let labels = vec![("local_set", s.local_set.to_string()), ("writer", f.writer.to_string())];
            behind.get_or_create(&labels).set(f.behind as i64);
            announced.get_or_create(&labels).set(i64::from(f.announced));
        }
    }
    registry.register("unsettled_versions", "Own writes not yet resolved in every other local set", unsettled);
    registry.register(
        "follower_behind_versions",
        "Versions of the writer's feed this local set's follower has not resolved yet, as far as it knows the end",
        behind,
    );
    registry.register("follower_announced", "1 once the follower knows its writer's feed (epoch announced)", announced);
    registry
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(unsettled: Option<usize>, following: Vec<Following>) -> InstanceStatus {
        InstanceStatus {
            local_set: 1,
            mode: "causal",
            listen: "127.0.0.1:1".parse().unwrap(),
            counters: BTreeMap::from([("reads", 7), ("writes", 3)]),
            store_requests: BTreeMap::from([("get_copies", 5), ("feed_read", 2)]),
            unsettled,
            following,
        }
    }

    fn following(announced: bool, resolved: u64, end: u64) -> Following {
        Following { writer: 0, announced, resolved, end, behind: end - resolved }
    }

    #[test]
    fn settled_means_nothing_waits_here_or_at_the_followers() {
        assert!(status(Some(0), vec![following(true, 10, 10)]).settled());
        assert!(status(None, vec![]).settled(), "no feed and nothing followed");
        assert!(InstanceStatus::plain(0, "127.0.0.1:1".parse().unwrap()).settled());
        assert!(!status(Some(1), vec![following(true, 10, 10)]).settled(), "an own write not resolved elsewhere");
        assert!(!status(Some(0), vec![following(true, 9, 10)]).settled(), "a follower behind");
        assert!(!status(Some(0), vec![following(false, 0, 0)]).settled(), "a feed not announced yet");
    }

    #[test]
    fn every_counter_has_a_help_text_and_the_metrics_carry_the_local_set() {
        let s = status(Some(2), vec![following(true, 4, 10)]);
        let text = causet_server::metrics::encode(&registry(&[s]), false);
        assert!(text.contains("causet_middleware_reads_total{local_set=\"1\"} 7"), "{text}");
        assert!(text.contains("causet_middleware_unsettled_versions{local_set=\"1\"} 2"), "{text}");
        assert!(text.contains("causet_middleware_follower_behind_versions{local_set=\"1\",writer=\"0\"} 6"), "{text}");
        assert!(
            text.contains("causet_middleware_store_requests_total{local_set=\"1\",kind=\"feed_read\"} 2"),
            "{text}"
        );
        // The names InstanceStatus::of gives are the ones described, and only those; each is exposed.
        let store = causet_middleware::memory::MemoryCluster::new(2, std::time::Duration::ZERO).store(1);
        let m = Middleware::new(store, &causet_middleware::Config::new(1, 2));
        let of = InstanceStatus::of(1, "127.0.0.1:1".parse().unwrap(), &m);
        let given: Vec<&str> = of.counters.keys().copied().filter(|&n| n != "follower_wait_ms").collect();
        let mut described: Vec<&str> = HELP.iter().map(|(n, _)| *n).collect();
        described.sort_unstable();
        assert_eq!(given, described);
        let text = causet_server::metrics::encode(&registry(&[of]), false);
        for (name, _) in HELP {
            assert!(text.contains(&format!("causet_middleware_{name}_total{{local_set=\"1\"}} 0")), "{name}: {text}");
        }
        assert!(text.contains("causet_middleware_follower_wait_seconds_total{local_set=\"1\"} 0.0"), "{text}");
    }
}
