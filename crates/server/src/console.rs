//! The web console, served on the admin port at `/`: one page (HTML, JavaScript and the vendored uPlot charting
//! library, all compiled into the binary) that reads `/status` for the cluster and `/series` for the history of the
//! last ten minutes, which [`sample`] records once a second from the same sources as `/metrics`.

use crate::NodeState;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often [`sample`] records a point.
pub const INTERVAL: Duration = Duration::from_secs(1);
/// How many points `/series` keeps: ten minutes.
pub const KEPT: usize = 600;

/// The page and its assets, as (path, content type, body).
const ASSETS: &[(&str, &str, &str)] = &[
    ("/", "text/html; charset=utf-8", include_str!("../console/index.html")),
    ("/console/console.js", "text/javascript; charset=utf-8", include_str!("../console/console.js")),
    ("/console/console.css", "text/css; charset=utf-8", include_str!("../console/console.css")),
    (
        "/console/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/vendor/uPlot.iife.min.js"),
    ),
    ("/console/uPlot.min.css", "text/css; charset=utf-8", include_str!("../console/vendor/uPlot.min.css")),
];

/// Adds the page, its assets and `/series` to the admin router.
pub fn routes(mut router: axum::Router<Arc<NodeState>>) -> axum::Router<Arc<NodeState>> {
    for &(path, content_type, body) in ASSETS {
        let serve =
            move || async move { ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body) };
        router = router.route(path, axum::routing::get(serve));
    }
    router.route("/series", axum::routing::get(series))
}

/// Client request latencies since the last sample: a histogram of atomic counters whose buckets grow by 2^(1/4)
/// (19%) from 1 µs, so a percentile read from it is off by at most half a bucket (±9%). It sits next to the
/// Prometheus histogram, whose buckets are too coarse for a percentile and cannot be read back.
pub struct RecentLatency {
    buckets: Vec<AtomicU64>,
}

/// Buckets per doubling.
const PER_OCTAVE: f64 = 4.0;
/// 1 µs · 2^(112/4) ≈ 268 s: everything longer counts in the last bucket.
const BUCKETS: usize = 112;

impl Default for RecentLatency {
    fn default() -> Self {
        RecentLatency { buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect() }
    }
}

impl RecentLatency {
    /// Counts one request that took `seconds`.
    pub fn observe(&self, seconds: f64) {
        let us = (seconds * 1e6).max(1.0);
        let i = ((us.log2() * PER_OCTAVE) as usize).min(BUCKETS - 1);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Takes the counts observed since the last call (and zeroes them).
    fn take(&self) -> Vec<u64> {
        self.buckets.iter().map(|b| b.swap(0, Ordering::Relaxed)).collect()
    }
}

/// The `q` quantile (0 < q ≤ 1) of the counts `take` returned, in ms: the middle of its bucket (geometric).
fn quantile_ms(counts: &[u64], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, &n) in counts.iter().enumerate() {
        seen += n;
        if seen >= rank {
            return Some(2f64.powf((i as f64 + 0.5) / PER_OCTAVE) / 1000.0);
        }
    }
    None
}

/// One point of the console's charts.
#[derive(Clone, Debug, Serialize)]
pub struct Sample {
    /// When, Unix ms.
    pub t_ms: u64,
    /// Transactions committed per second (static reads and updates count as transactions).
    pub commits_per_s: f64,
    /// Transactions aborted or failed per second.
    pub aborts_per_s: f64,
    /// Client requests per second.
    pub requests_per_s: f64,
    /// Client request latency percentiles over the interval, ms (none without requests).
    pub p50_ms: Option<f64>,
    /// 90th percentile.
    pub p90_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// Open transactions.
    pub open_transactions: u64,
    /// Per peer DC, how far the stable snapshot's entry lags behind now, ms: how old the newest of its
    /// transactions a reader here can see is, the remote visibility delay.
    pub visibility_ms: Vec<(u16, Option<f64>)>,
    /// How far the stable snapshot's entry for this DC lags behind now, ms: how old the newest local
    /// transaction every partition of the DC has made readable is.
    pub stable_lag_ms: Option<f64>,
    /// Local transactions some peer DC has not acknowledged yet, summed over this node's partitions.
    pub replication_backlog: u64,
    /// Remote transactions received and waiting for their dependencies, summed over partitions and origins.
    pub inbound_backlog: u64,
}

/// The last [`KEPT`] samples.
#[derive(Default)]
pub struct Series {
    samples: Mutex<VecDeque<Sample>>,
}

impl Series {
    fn push(&self, sample: Sample) {
        let mut samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        if samples.len() == KEPT {
            samples.pop_front();
        }
        samples.push_back(sample);
    }

    /// The samples taken after `since_ms` (all with 0).
    pub fn since(&self, since_ms: u64) -> Vec<Sample> {
        let samples = self.samples.lock().unwrap_or_else(|e| e.into_inner());
        samples.iter().filter(|s| s.t_ms > since_ms).cloned().collect()
    }
}

/// How old a timestamp of the HLC (µs shifted left by the logical bits) is at `now_us`, ms; none for 0 (a stable
/// snapshot entry before the first one is known).
pub fn age_ms(now_us: u64, stamp: u64) -> Option<f64> {
    (stamp > 0).then(|| now_us.saturating_sub(stamp >> causet_core::time::LOGICAL_BITS) as f64 / 1000.0)
}

/// Records a sample every [`INTERVAL`] until `stop` turns true.
pub async fn sample(state: Arc<NodeState>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let m = &state.metrics;
    let totals = |m: &crate::metrics::Metrics| (m.committed.get(), m.aborted.get());
    let mut last = (totals(m), std::time::Instant::now());
    state.metrics.recent_latency.take();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = crate::shutdown::stopped(&mut stop) => return,
        }
        let shards = state.status().await;
        let now = (totals(m), std::time::Instant::now());
        let seconds = now.1.duration_since(last.1).as_secs_f64().max(1e-3);
        let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / seconds;
        let latency = m.recent_latency.take();
        let own = state.config.protocol().dc.0;
        let now_us = state.clock.now_us();
        let stable = shards.first().map(|s| s.stable_snapshot.clone()).unwrap_or_default();
        let partitions = || shards.iter().flat_map(|s| &s.partitions);
        state.series.push(Sample {
            t_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            commits_per_s: rate(now.0 .0, last.0 .0),
            aborts_per_s: rate(now.0 .1, last.0 .1),
            requests_per_s: latency.iter().sum::<u64>() as f64 / seconds,
            p50_ms: quantile_ms(&latency, 0.5),
            p90_ms: quantile_ms(&latency, 0.9),
            p99_ms: quantile_ms(&latency, 0.99),
            open_transactions: shards.iter().map(|s| s.open_transactions as u64).sum(),
            visibility_ms: (stable.iter().enumerate())
                .filter(|&(dc, _)| dc as u16 != own)
                .map(|(dc, &t)| (dc as u16, age_ms(now_us, t)))
                .collect(),
            stable_lag_ms: stable.get(own as usize).and_then(|&t| age_ms(now_us, t)),
            replication_backlog: partitions().map(|p| p.replication_backlog as u64).sum(),
            inbound_backlog: partitions().flat_map(|p| &p.inbound_backlog).map(|&(_, n)| n as u64).sum(),
        });
        last = now;
    }
}

#[derive(Deserialize)]
struct SeriesQuery {
    /// Only samples after this time, Unix ms (the page asks for what it has not drawn yet).
    #[serde(default)]
    since: u64,
}

/// `/series`: the samples, oldest first, with the interval between them.
async fn series(State(state): State<Arc<NodeState>>, Query(q): Query<SeriesQuery>) -> impl IntoResponse {
    Json(serde_json::json!({
        "interval_ms": INTERVAL.as_millis() as u64,
        "kept": KEPT,
        "samples": state.series.since(q.since),
    }))
}

/// How a link to a peer DC stands, as the console and `/status` show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkState {
    /// An operator cut every link to the DC.
    Cut,
    /// An operator cut some of the links to the DC's nodes.
    PartlyCut,
    /// No link to the DC is connected.
    Down,
    /// Connected, but the DC's transactions are becoming visible here much later than the link's delay explains,
    /// or it has not acknowledged this node's for as long: a backlog is draining (after a cut or an outage).
    CatchingUp,
    /// Connected, and remote visibility is within a few delays.
    Up,
}

impl LinkState {
    /// Classifies the links to one DC: `cut` and `connected` count its links, `lag_ms` is the worse of the remote
    /// visibility delay and the replication acknowledgement lag, `delay_ms` the emulated one-way delay.
    pub fn of(links: usize, cut: usize, connected: usize, lag_ms: f64, delay_ms: f64) -> LinkState {
        if links > 0 && cut == links {
            LinkState::Cut
        } else if cut > 0 {
            LinkState::PartlyCut
        } else if connected == 0 {
            LinkState::Down
        } else if lag_ms > CATCHING_UP_SLACK_MS + 3.0 * delay_ms {
            LinkState::CatchingUp
        } else {
            LinkState::Up
        }
    }
}

/// Lag past three one-way delays (a round trip and a heartbeat) by more than this counts as catching up.
const CATCHING_UP_SLACK_MS: f64 = 1000.0;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_fall_within_half_a_bucket() {
        let recent = RecentLatency::default();
        // 90 requests of 1 ms, 9 of 10 ms, 1 of 200 ms.
        for _ in 0..90 {
            recent.observe(0.001);
        }
        for _ in 0..9 {
            recent.observe(0.010);
        }
        recent.observe(0.200);
        let counts = recent.take();
        let near = |got: Option<f64>, want: f64| {
            let got = got.expect("a quantile");
            assert!((got / want - 1.0).abs() < 0.1, "{got} ms is not within 10% of {want} ms");
        };
        near(quantile_ms(&counts, 0.5), 1.0);
        near(quantile_ms(&counts, 0.9), 1.0);
        near(quantile_ms(&counts, 0.95), 10.0);
        near(quantile_ms(&counts, 0.99), 10.0);
        near(quantile_ms(&counts, 1.0), 200.0);
        assert_eq!(recent.take().iter().sum::<u64>(), 0, "take zeroes the counts");
        assert_eq!(quantile_ms(&recent.take(), 0.5), None);
    }

    #[test]
    fn extreme_latencies_land_in_the_end_buckets() {
        let recent = RecentLatency::default();
        recent.observe(0.0);
        recent.observe(1e9);
        let counts = recent.take();
        assert_eq!((counts[0], counts[BUCKETS - 1]), (1, 1));
    }

    #[test]
    fn the_series_keeps_the_last_ten_minutes() {
        let series = Series::default();
        let sample = |t_ms| Sample {
            t_ms,
            commits_per_s: 0.0,
            aborts_per_s: 0.0,
            requests_per_s: 0.0,
            p50_ms: None,
            p90_ms: None,
            p99_ms: None,
            open_transactions: 0,
            visibility_ms: vec![],
            stable_lag_ms: None,
            replication_backlog: 0,
            inbound_backlog: 0,
        };
        for t in 1..=(KEPT as u64 + 5) {
            series.push(sample(t));
        }
        let all = series.since(0);
        assert_eq!(all.len(), KEPT);
        assert_eq!((all[0].t_ms, all[KEPT - 1].t_ms), (6, KEPT as u64 + 5));
        assert_eq!(series.since(KEPT as u64 + 3).len(), 2);
    }

    #[test]
    fn link_states() {
        assert_eq!(LinkState::of(2, 2, 0, 0.0, 50.0), LinkState::Cut);
        assert_eq!(LinkState::of(2, 1, 2, 0.0, 50.0), LinkState::PartlyCut);
        assert_eq!(LinkState::of(2, 0, 0, 0.0, 50.0), LinkState::Down);
        assert_eq!(LinkState::of(1, 0, 1, 5_000.0, 50.0), LinkState::CatchingUp);
        assert_eq!(LinkState::of(1, 0, 1, 1_100.0, 50.0), LinkState::Up);
        assert_eq!(LinkState::of(1, 0, 1, 1_200.0, 50.0), LinkState::CatchingUp);
    }
}
