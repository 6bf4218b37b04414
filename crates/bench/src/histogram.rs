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

/// The V2 deflate encoding of a histogram, base64.
fn encode(h: &Histogram<u64>) -> String {
    use base64::Engine as _;
    use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
    let mut bytes = Vec::new();
    match V2DeflateSerializer::new().serialize(h, &mut bytes) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(bytes),
        // Serialising into memory fails only on a histogram too large to encode; the buckets still describe it.
        Err(_) => String::new(),
    }
}

/// Decodes [`HistogramSummary::hdr`].
pub fn decode(hdr: &str) -> anyhow::Result<Histogram<u64>> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(hdr)?;
    Ok(hdrhistogram::serialization::Deserializer::new().deserialize(&mut bytes.as_slice())?)
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
    /// The distribution in logarithmic buckets (each 5% wider than the last): `[upper bound µs, count]` for every
    /// non-empty bucket; the counts add up to `count`. Enough to draw the CDF.
    pub buckets: Vec<[u64; 2]>,
    /// The exact histogram in HdrHistogram's V2 compressed encoding, base64 (readable by every HdrHistogram
    /// implementation, e.g. `HistogramLogProcessor`); empty when there are no samples.
    pub hdr: String,
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
            buckets: h
                .iter_log(1, 1.05)
                .filter(|v| v.count_since_last_iteration() > 0)
                .map(|v| [v.value_iterated_to(), v.count_since_last_iteration()])
                .collect(),
            hdr: encode(h),
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
        assert!(s.buckets.len() < 200, "log buckets keep the summary small: {}", s.buckets.len());
        let back = decode(&s.hdr).expect("the encoding decodes");
        assert_eq!(back, h, "the encoded histogram is the histogram");
        let cdf = s.cdf();
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(cdf.last().map(|p| p.1), Some(1.0));
    }
}
