//! Key choice: uniform, zipfian (YCSB's θ), Pareto and hotspot distributions over key ranks `0..n`, each drawn
//! from a seeded generator so a run's sequence of keys follows from its seed.

use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

/// How keys are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Distribution {
    /// Every key equally likely.
    Uniform,
    /// Key of rank r (from 0) drawn with probability proportional to 1 / (r + 1)^θ.
    Zipfian {
        /// Skew (YCSB: 0.99).
        theta: f64,
    },
    /// Rank r = ⌊x⌋ − 1 for x drawn from a Pareto distribution of scale 1 and shape α, redrawn when beyond the
    /// key space: a power law over ranks (α = 1.16 gives roughly the 80/20 rule).
    Pareto {
        /// Shape α.
        shape: f64,
    },
    /// A fraction `hot_ops` of the draws falls uniformly on the first `hot_keys` fraction of the keys, the rest
    /// uniformly on the others (YCSB's hotspot).
    Hotspot {
        /// Fraction of keys that are hot.
        hot_keys: f64,
        /// Fraction of draws on hot keys.
        hot_ops: f64,
    },
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distribution::Uniform => write!(f, "uniform"),
            Distribution::Zipfian { theta } => write!(f, "zipfian θ={theta}"),
            Distribution::Pareto { shape } => write!(f, "Pareto α={shape}"),
            Distribution::Hotspot { hot_keys, hot_ops } => {
                write!(f, "hotspot {:.0}% of ops on {:.0}% of keys", hot_ops * 100.0, hot_keys * 100.0)
            }
        }
    }
}

/// Draws key ranks in `0..keys` from a distribution.
#[derive(Clone, Debug)]
pub struct KeyChooser {
    keys: u64,
    sampler: Sampler,
}

#[derive(Clone, Debug)]
enum Sampler {
    Uniform,
    Zipfian(rand_distr::Zipf<f64>),
    Pareto(rand_distr::Pareto<f64>),
    Hotspot { hot: u64, hot_ops: f64 },
}

/// Redraws of a Pareto sample beyond the key space before folding it back in.
const PARETO_REDRAWS: usize = 32;

impl KeyChooser {
    /// A chooser over `keys` keys (at least 1).
    pub fn new(distribution: Distribution, keys: u64) -> KeyChooser {
        assert!(keys >= 1, "a key space has at least one key");
        let sampler = match distribution {
            Distribution::Uniform => Sampler::Uniform,
            // The workload parser admits only finite positive θ and α, for which both constructors succeed.
            Distribution::Zipfian { theta } => {
                Sampler::Zipfian(rand_distr::Zipf::new(keys as f64, theta).expect("θ checked positive and finite"))
            }
            Distribution::Pareto { shape } => {
                Sampler::Pareto(rand_distr::Pareto::new(1.0, shape).expect("α checked positive and finite"))
            }
            Distribution::Hotspot { hot_keys, hot_ops } => {
                let hot = ((hot_keys * keys as f64).ceil() as u64).clamp(1, keys);
                Sampler::Hotspot { hot, hot_ops }
            }
        };
        KeyChooser { keys, sampler }
    }

    /// Keys in the space.
    pub fn keys(&self) -> u64 {
        self.keys
    }

    /// One key rank in `0..keys`.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let rank = match &self.sampler {
            Sampler::Uniform => rng.random_range(0..self.keys),
            Sampler::Zipfian(z) => (rng.sample(z) as u64).saturating_sub(1),
            Sampler::Pareto(p) => {
                let mut rank = 0;
                for attempt in 0..PARETO_REDRAWS {
                    rank = (rng.sample(p).floor() as u64).saturating_sub(1);
                    if rank < self.keys || attempt + 1 == PARETO_REDRAWS {
                        break;
                    }
                }
                rank % self.keys
            }
            Sampler::Hotspot { hot, hot_ops } => {
                if *hot == self.keys || rng.random_bool(*hot_ops) {
                    rng.random_range(0..*hot)
                } else {
                    rng.random_range(*hot..self.keys)
                }
            }
        };
        debug_assert!(rank < self.keys);
        rank.min(self.keys - 1)
    }

    /// `n` distinct key ranks (n ≤ keys), drawn from the distribution; when the draws keep repeating (a skewed
    /// distribution over few keys), the rest are the next unused ranks after a random one.
    pub fn sample_distinct<R: Rng + ?Sized>(&self, rng: &mut R, n: usize, out: &mut Vec<u64>) {
        assert!(n as u64 <= self.keys, "{n} distinct keys from {}", self.keys);
        out.clear();
        let mut attempts = 0;
        while out.len() < n && attempts < 32 * n {
            let k = self.sample(rng);
            if !out.contains(&k) {
                out.push(k);
            }
            attempts += 1;
        }
        let mut next = rng.random_range(0..self.keys);
        while out.len() < n {
            if !out.contains(&next) {
                out.push(next);
            }
            next = (next + 1) % self.keys;
        }
    }
}

/// The key of rank `rank`: zero-padded decimal of `width` bytes (wider if the rank needs more digits).
pub fn key_name(rank: u64, width: usize) -> Vec<u8> {
    format!("{rank:0width$}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn distributions() -> impl Strategy<Value = Distribution> {
        prop_oneof![
            Just(Distribution::Uniform),
            (0.1f64..2.0).prop_map(|theta| Distribution::Zipfian { theta }),
            (0.5f64..3.0).prop_map(|shape| Distribution::Pareto { shape }),
            (0.01f64..1.0, 0.0f64..1.0).prop_map(|(hot_keys, hot_ops)| Distribution::Hotspot { hot_keys, hot_ops }),
        ]
    }

    fn counts(d: Distribution, keys: u64, draws: usize, seed: u64) -> Vec<u64> {
        let chooser = KeyChooser::new(d, keys);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut c = vec![0u64; keys as usize];
        for _ in 0..draws {
            c[chooser.sample(&mut rng) as usize] += 1;
        }
        c
    }

    proptest! {
        #[test]
        fn every_draw_is_inside_the_key_space(d in distributions(), keys in 1u64..5_000, seed: u64) {
            let chooser = KeyChooser::new(d, keys);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            for _ in 0..200 {
                prop_assert!(chooser.sample(&mut rng) < keys);
            }
        }

        #[test]
        fn the_same_seed_draws_the_same_keys(d in distributions(), keys in 1u64..100_000, seed: u64) {
            let chooser = KeyChooser::new(d, keys);
            let draw = |seed| {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                (0..100).map(|_| chooser.sample(&mut rng)).collect::<Vec<_>>()
            };
            prop_assert_eq!(draw(seed), draw(seed));
        }

        #[test]
        fn distinct_draws_are_distinct_and_in_range(d in distributions(), keys in 1u64..50, n in 1usize..50, seed: u64) {
            let n = n.min(keys as usize);
            let chooser = KeyChooser::new(d, keys);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut out = Vec::new();
            chooser.sample_distinct(&mut rng, n, &mut out);
            prop_assert_eq!(out.len(), n);
            let mut sorted = out.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), n);
            prop_assert!(out.iter().all(|k| *k < keys));
        }

        #[test]
        fn zipfian_draws_low_ranks_more_often_than_high_ones(theta in 0.5f64..1.5, seed: u64) {
            let c = counts(Distribution::Zipfian { theta }, 1_000, 20_000, seed);
            let head: u64 = c[..10].iter().sum();
            let tail: u64 = c[990..].iter().sum();
            // Under θ ≥ 0.5 the first 10 ranks carry at least 10^0.5 ≈ 3× the last 10's mass; uniform would give equal.
            prop_assert!(head > 2 * tail.max(1), "head {head}, tail {tail}");
            prop_assert!(c[0] > c[500], "rank 0 {} vs rank 500 {}", c[0], c[500]);
        }
    }

    #[test]
    fn zipfian_with_theta_0_99_matches_its_probability_mass_on_rank_0() {
        // P(rank 0) = 1 / H(n, θ); for n = 1000, θ = 0.99, H ≈ 7.1, so about 14% of draws.
        let n = 1_000u64;
        let h: f64 = (1..=n).map(|r| 1.0 / (r as f64).powf(0.99)).sum();
        let c = counts(Distribution::Zipfian { theta: 0.99 }, n, 100_000, 7);
        let share = c[0] as f64 / 100_000.0;
        assert!((share - 1.0 / h).abs() < 0.01, "rank 0 share {share}, expected {}", 1.0 / h);
    }

    #[test]
    fn uniform_spreads_draws_evenly() {
        let c = counts(Distribution::Uniform, 10, 100_000, 3);
        for (k, n) in c.iter().enumerate() {
            assert!((9_000..11_000).contains(n), "key {k} drawn {n} times of 100000");
        }
    }

    #[test]
    fn hotspot_puts_its_share_of_draws_on_the_hot_keys() {
        let c = counts(Distribution::Hotspot { hot_keys: 0.2, hot_ops: 0.8 }, 100, 100_000, 5);
        let hot: u64 = c[..20].iter().sum();
        assert!((78_000..82_000).contains(&hot), "{hot} of 100000 draws on the hot 20%");
    }

    #[test]
    fn pareto_with_the_80_20_shape_concentrates_on_the_first_ranks() {
        let c = counts(Distribution::Pareto { shape: 1.16 }, 10_000, 100_000, 9);
        let first: u64 = c[..10].iter().sum();
        assert!(first > 60_000, "the first 10 of 10000 ranks got {first} of 100000 draws");
    }

    #[test]
    fn key_names_have_the_requested_width() {
        assert_eq!(key_name(42, 8), b"00000042".to_vec());
        assert_eq!(key_name(123_456_789, 8), b"123456789".to_vec());
    }
}
