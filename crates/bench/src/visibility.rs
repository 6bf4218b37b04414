//! Visibility latency across DCs, measured two ways during a run's measured window:
//! - from the client side: a prober commits a fresh set element at one DC and polls every other DC (static reads
//!   without the writer's clock, every millisecond) until the element shows; the latency runs from the commit's
//!   acknowledgement to the first read that shows it, so it includes up to one poll interval;
//! - from the server side: every 50 ms, each DC's `/metrics` gives `causet_stable_snapshot_age_seconds{dc}`,
//!   how far its stable snapshot's entry for each peer DC lags behind now (a commit of that DC becomes readable
//!   here once the entry passes it).

use crate::histogram::{new_histogram, HistogramSummary};
use crate::target::Target;
use causet_client::Client;
use causet_core::ObjectId;
use causet_crdt::{CrdtType, Op, Value};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Between two polls of a reader DC.
const POLL_INTERVAL: Duration = Duration::from_millis(1);
/// Between two scrapes of the server-side metric.
const SCRAPE_INTERVAL: Duration = Duration::from_millis(50);
/// A write not visible after this long counts as lost.
const GIVE_UP_AFTER: Duration = Duration::from_secs(10);
/// The server-side metric's name.
pub const SERVER_METRIC: &str = "causet_stable_snapshot_age_seconds";

/// Visibility from one DC to another.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PairVisibility {
    /// Where writes commit.
    pub from: u16,
    /// Where they are read.
    pub to: u16,
    /// Client side, µs.
    pub client: HistogramSummary,
    /// Server side (the reader's stable snapshot age for `from`), µs; empty without admin addresses.
    pub server: HistogramSummary,
    /// Writes that did not show within 10 s.
    pub lost: u64,
}

/// Visibility over every pair of DCs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VisibilityResult {
    /// All pairs together, client side, µs.
    pub client: HistogramSummary,
    /// All pairs together, server side, µs.
    pub server: HistogramSummary,
    /// Per ordered pair.
    pub pairs: Vec<PairVisibility>,
}

/// Probes for `duration`: one write at a time, from each DC in turn, read at all the others.
pub async fn probe(
    target: &Target,
    duration: Duration,
    pause: Duration,
    seed: u64,
) -> anyhow::Result<VisibilityResult> {
    let dcs = target.dcs.len();
    anyhow::ensure!(dcs >= 2, "visibility needs two DCs or more");
    let deadline = Instant::now() + duration;
    let scraper = {
        let target = target.clone();
        tokio::spawn(async move { scrape(&target, deadline).await })
    };
    let mut writers = Vec::with_capacity(dcs);
    let mut readers = Vec::with_capacity(dcs);
    for dc in &target.dcs {
        writers.push(Client::connect(dc.clients[0]).await?);
        readers.push(Client::connect(dc.clients[0]).await?);
    }
    let nonce = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos() ^ seed as u128;
    let sets: Vec<ObjectId> =
        (0..dcs).map(|a| ObjectId::new(format!("vis-{nonce}-{a}"), "bench-visibility", CrdtType::SetAw)).collect();
    let mut client: BTreeMap<(usize, usize), Histogram<u64>> = BTreeMap::new();
    let mut lost: BTreeMap<(usize, usize), u64> = BTreeMap::new();
    let mut sample = 0u64;
    while Instant::now() < deadline {
        let from = (sample % dcs as u64) as usize;
        let element = format!("{sample}").into_bytes();
        writers[from].static_update(None, [(sets[from].clone(), Op::Add(vec![element.clone()]))]).await?;
        let committed = Instant::now();
        let polls = readers.iter_mut().enumerate().filter(|(to, _)| *to != from).map(|(to, reader)| {
            let (set, element) = (&sets[from], &element);
            async move {
                loop {
                    // No clock handed over: the reader sees the write only through replication.
                    if let Ok((values, _)) = reader.static_read(None, std::slice::from_ref(set)).await {
                        if matches!(&values[0], Value::Set(e) if e.contains(element)) {
                            return (to, Some(committed.elapsed()));
                        }
                    }
                    if committed.elapsed() > GIVE_UP_AFTER {
                        return (to, None);
                    }
                    tokio::time::sleep(POLL_INTERVAL).await;
                }
            }
        });
        for (to, seen) in futures_join_all(polls).await {
            match seen {
                Some(d) => {
                    client.entry((from, to)).or_insert_with(new_histogram).saturating_record(d.as_micros() as u64)
                }
                None => *lost.entry((from, to)).or_default() += 1,
            }
        }
        sample += 1;
        tokio::time::sleep(pause).await;
    }
    let server = scraper.await?;
    let mut all_client = new_histogram();
    let mut all_server = new_histogram();
    let mut pairs = Vec::new();
    for from in 0..dcs {
        for to in (0..dcs).filter(|t| *t != from) {
            let c = client.remove(&(from, to)).unwrap_or_else(new_histogram);
            let s = server.get(&(from, to)).cloned().unwrap_or_else(new_histogram);
            all_client.add(&c)?;
            all_server.add(&s)?;
            pairs.push(PairVisibility {
                from: target.dcs[from].dc,
                to: target.dcs[to].dc,
                client: HistogramSummary::of(&c),
                server: HistogramSummary::of(&s),
                lost: lost.get(&(from, to)).copied().unwrap_or(0),
            });
        }
    }
    Ok(VisibilityResult { client: HistogramSummary::of(&all_client), server: HistogramSummary::of(&all_server), pairs })
}

/// Runs the futures concurrently and returns their outputs (in completion order).
async fn futures_join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut set = Vec::new();
    for f in futures {
        set.push(Box::pin(f));
    }
    let mut out = Vec::with_capacity(set.len());
    // Few futures (one per peer DC): poll them together with a select over the remaining ones.
    while !set.is_empty() {
        let (value, index) = std::future::poll_fn(|cx| {
            for (i, f) in set.iter_mut().enumerate() {
                if let std::task::Poll::Ready(v) = f.as_mut().poll(cx) {
                    return std::task::Poll::Ready((v, i));
                }
            }
            std::task::Poll::Pending
        })
        .await;
        drop(set.swap_remove(index));
        out.push(value);
    }
    out
}

/// Samples every reader DC's metric until `deadline`; per (from, to) index pair, µs.
async fn scrape(target: &Target, deadline: Instant) -> BTreeMap<(usize, usize), Histogram<u64>> {
    let mut out: BTreeMap<(usize, usize), Histogram<u64>> = BTreeMap::new();
    let index: BTreeMap<u16, usize> = target.dcs.iter().enumerate().map(|(i, d)| (d.dc, i)).collect();
    while Instant::now() < deadline {
        for (to, dc) in target.dcs.iter().enumerate() {
            for admin in &dc.admins {
                let Ok(text) = http_get(*admin, "/metrics").await else { continue };
                for (from_dc, age_us) in parse_stable_snapshot_ages(&text) {
                    if let Some(from) = index.get(&from_dc).copied().filter(|f| *f != to) {
                        out.entry((from, to)).or_insert_with(new_histogram).saturating_record(age_us.max(1));
                    }
                }
            }
        }
        tokio::time::sleep(SCRAPE_INTERVAL).await;
    }
    out
}

/// The samples of the metric `name` in a Prometheus text exposition: each line `name{labels} value`, as the labels
/// and the value.
fn samples<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    text.lines().filter_map(move |line| {
        let (labels, value) = line.strip_prefix(name)?.strip_prefix('{')?.split_once('}')?;
        Some((labels, value.trim().parse().ok()?))
    })
}

/// The value of the label `key` among a sample's labels.
fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(',').find_map(|l| l.trim().strip_prefix(key)?.strip_prefix("=\"")?.strip_suffix('"'))
}

/// The `(dc, age µs)` samples of the server-side metric (in seconds) in a Prometheus text exposition.
pub fn parse_stable_snapshot_ages(text: &str) -> Vec<(u16, u64)> {
    samples(text, SERVER_METRIC)
        .filter_map(|(labels, value)| Some((label(labels, "dc")?.parse().ok()?, (value.max(0.0) * 1e6).round() as u64)))
        .collect()
}

/// Per request kind, the sum (seconds) and count of `causet_request_duration_seconds` in an exposition.
pub fn parse_request_durations(text: &str) -> BTreeMap<String, (f64, u64)> {
    let mut out: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    for (labels, value) in samples(text, "causet_request_duration_seconds_sum") {
        if let Some(kind) = label(labels, "kind") {
            out.entry(kind.to_string()).or_default().0 += value;
        }
    }
    for (labels, value) in samples(text, "causet_request_duration_seconds_count") {
        if let Some(kind) = label(labels, "kind") {
            out.entry(kind.to_string()).or_default().1 += value as u64;
        }
    }
    out
}

/// Per value of the label `by`, the sum of the counter `name` over its series in an exposition (e.g.
/// `causet_cache_reads_total` by `outcome`).
pub fn parse_counter_by(text: &str, name: &str, by: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (labels, value) in samples(text, name) {
        if let Some(v) = label(labels, by) {
            *out.entry(v.to_string()).or_default() += value as u64;
        }
    }
    out
}

/// One HTTP/1.0 GET; the body.
pub async fn http_get(addr: SocketAddr, path: &str) -> anyhow::Result<String> {
    Ok(http_get_status(addr, path).await?.1)
}

/// One HTTP/1.0 GET; the status code and the body.
pub async fn http_get_status(addr: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let fetch = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes()).await?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await?;
        let text = String::from_utf8_lossy(&out).into_owned();
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        let code = head.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        anyhow::Ok((code, body.to_string()))
    };
    tokio::time::timeout(Duration::from_secs(5), fetch).await?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_metric_is_read_per_dc_from_the_exposition() {
        let text = "# HELP causet_stable_snapshot_age_seconds Per DC\n\
                    # TYPE causet_stable_snapshot_age_seconds gauge\n\
                    causet_stable_snapshot_age_seconds{dc=\"0\"} 0.00012\n\
                    causet_stable_snapshot_age_seconds{dc=\"2\"} 0.051234\n\
                    causet_transactions_committed_total 5\n";
        assert_eq!(parse_stable_snapshot_ages(text), vec![(0, 120), (2, 51_234)]);
    }

    #[test]
    fn request_durations_are_summed_per_kind() {
        let text = "causet_request_duration_seconds_sum{kind=\"static_read\"} 0.5\n\
                    causet_request_duration_seconds_count{kind=\"static_read\"} 1000\n\
                    causet_request_duration_seconds_bucket{le=\"0.001\",kind=\"static_read\"} 900\n\
                    causet_request_duration_seconds_sum{kind=\"commit\"} 2.0\n\
                    causet_request_duration_seconds_count{kind=\"commit\"} 400\n";
        let d = parse_request_durations(text);
        assert_eq!(d.get("static_read"), Some(&(0.5, 1000)));
        assert_eq!(d.get("commit"), Some(&(2.0, 400)));
    }

    #[test]
    fn counters_are_summed_per_label_value() {
        let text = "causet_cache_reads_total{outcome=\"hit\"} 50\n\
                    causet_cache_reads_total{outcome=\"miss\"} 3\n\
                    causet_cache_reads_total{shard=\"1\",outcome=\"hit\"} 7\n\
                    causet_cache_reads_total_other{outcome=\"hit\"} 1000\n\
                    causet_cache_open_hits_total{outcome=\"raised\"} 9\n";
        let c = parse_counter_by(text, "causet_cache_reads_total", "outcome");
        assert_eq!(c, BTreeMap::from([("hit".to_string(), 57), ("miss".to_string(), 3)]));
    }
}
