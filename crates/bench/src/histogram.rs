//! HDR histograms of latencies in microseconds, and their summary as reports carry it.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Largest latency recorded, µs (10 minutes); larger values saturate.
pub const MAX_LATENCY_US: u64 = 600_000_000;

/// An empty histogram of latencies in µs, 3 significant digits.
pub fn new_histogram() -> Histogram<u64> {
    // The bounds are constants that satisfy the constructor's conditions (low ≥ 1, high ≥ 2·low, sigfig ≤ 5).
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// A histogram's percentiles and its recorded buckets.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct HistogramSummary {
    /// Samples.
    pub count: u64,
    /// Smallest, µs.
    pub min_us: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Median, µs.
    pub p50_us: u64,
    /// 90th percentile, µs.
    pub p90_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// 99.9th percentile, µs.
    pub p999_us: u64,
    /// Largest, µs.
    pub max_us: u64,
    /// The full histogram: `[value_us, count]` for every non-empty bucket (value = the bucket's highest
    /// equivalent value), enough to rebuild it or draw its CDF.
    pub buckets: Vec<[u64; 2]>,
}

impl HistogramSummary {
    /// Summarises a histogram.
    pub fn of(h: &Histogram<u64>) -> HistogramSummary {
        if h.is_empty() {
            return HistogramSummary::default();
        }
        HistogramSummary {
            count: h.len(),
            min_us: h.min(),
            mean_us: h.mean(),
            p50_us: h.value_at_quantile(0.5),
            p90_us: h.value_at_quantile(0.9),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            buckets: h.iter_recorded().map(|v| [v.value_iterated_to(), v.count_at_value()]).collect(),
        }
    }

    /// The cumulative distribution: `(value_us, fraction of samples ≤ value)` per bucket.
    pub fn cdf(&self) -> Vec<(u64, f64)> {
        let mut seen = 0u64;
        self.buckets
            .iter()
            .map(|[v, c]| {
                seen += c;
                (*v, seen as f64 / self.count.max(1) as f64)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_keeps_every_sample_in_its_buckets_and_the_cdf_ends_at_one() {
        let mut h = new_histogram();
        for v in 1..=1_000u64 {
            h.record(v).expect("in range");
        }
        let s = HistogramSummary::of(&h);
        assert_eq!(s.count, 1_000);
        assert_eq!(s.buckets.iter().map(|[_, c]| c).sum::<u64>(), 1_000);
        assert!((499..=501).contains(&s.p50_us), "p50 {}", s.p50_us);
        let cdf = s.cdf();
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(cdf.last().map(|p| p.1), Some(1.0));
    }
}
