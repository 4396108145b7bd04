//! The few statistics an evaluation needs, written here (each is a few
//! lines; the resampling uses `rand`'s seeded `StdRng`):
//! nearest-rank percentiles, the mean, a percentile bootstrap interval of a
//! mean, the paired bootstrap of a mean difference and the exact two-sided
//! sign test.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Resamples per bootstrap interval.
pub const BOOTSTRAP_RESAMPLES: usize = 4000;

/// The seed of every bootstrap, so every figure replays.
pub const BOOTSTRAP_SEED: u64 = 0xBA70_2026;

/// The nearest-rank percentile of `values` (`quantile` 0 to 1); `None`
/// when there are none.
pub fn percentile(values: &[f64], quantile: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = ((quantile * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

/// The arithmetic mean; `None` when there are no values.
pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// A mean with its 95 % percentile-bootstrap interval.
#[derive(
    Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct MeanInterval {
    pub mean: f64,
    pub low: f64,
    pub high: f64,
    /// How many values it rests on.
    pub count: usize,
}

/// The mean of `values` with a 95 % bootstrap interval (resampling the
/// values with replacement, [`BOOTSTRAP_RESAMPLES`] times, seeded). One
/// value gives an interval of that value alone; none gives `None`.
pub fn bootstrap_mean(values: &[f64]) -> Option<MeanInterval> {
    let mean = mean(values)?;
    let mut rng = StdRng::seed_from_u64(BOOTSTRAP_SEED);
    let means: Vec<f64> = (0..BOOTSTRAP_RESAMPLES)
        .map(|_| {
            let total: f64 = (0..values.len())
                .map(|_| values[rng.random_range(0..values.len())])
                .sum();
            total / values.len() as f64
        })
        .collect();
    Some(MeanInterval {
        mean,
        low: percentile(&means, 0.025).unwrap_or(mean),
        high: percentile(&means, 0.975).unwrap_or(mean),
        count: values.len(),
    })
}

/// The paired bootstrap: the mean of `after - before` over the pairs, with
/// its 95 % interval (the pairs resampled together).
pub fn paired_bootstrap(pairs: &[(f64, f64)]) -> Option<MeanInterval> {
    let differences: Vec<f64> = pairs.iter().map(|(before, after)| after - before).collect();
    bootstrap_mean(&differences)
}

/// The exact two-sided sign test over the pairs: ties are dropped, and the
/// p-value is the chance of a split at least this lopsided if up and down
/// were equally likely. `None` when every pair ties.
pub fn sign_test(pairs: &[(f64, f64)]) -> Option<SignTest> {
    let better = pairs
        .iter()
        .filter(|(before, after)| after > before)
        .count();
    let worse = pairs
        .iter()
        .filter(|(before, after)| after < before)
        .count();
    let trials = better + worse;
    if trials == 0 {
        return None;
    }
    let fewer = better.min(worse);
    // P(X <= fewer) for X ~ Binomial(trials, 1/2), doubled, at most 1.
    // Each term C(trials, k) / 2^trials is built in logarithms: past about
    // a thousand pairs both the coefficient and 2^trials overflow an f64.
    let mut log_term = -(trials as f64) * std::f64::consts::LN_2;
    let mut tail = log_term.exp();
    for successes in 1..=fewer {
        log_term += ((trials - successes + 1) as f64).ln() - (successes as f64).ln();
        tail += log_term.exp();
    }
    let p_value = (2.0 * tail).min(1.0);
    Some(SignTest {
        better,
        worse,
        p_value,
    })
}

/// The sign test's counts and two-sided p-value.
#[derive(
    Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct SignTest {
    pub better: usize,
    pub worse: usize,
    pub p_value: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let values = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(percentile(&values, 0.5), Some(3.0));
        assert_eq!(percentile(&values, 0.95), Some(5.0));
        assert_eq!(percentile(&values, 0.0), Some(1.0));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn the_bootstrap_interval_holds_the_mean_and_replays() {
        let values = [6.0, 7.0, 8.0, 7.5, 6.5, 7.0];
        let interval = bootstrap_mean(&values).unwrap();
        assert!((interval.mean - 7.0).abs() < 1e-9);
        assert!(interval.low < 7.0 && interval.high > 7.0, "{interval:?}");
        assert!(interval.low >= 6.0 && interval.high <= 8.0, "{interval:?}");
        assert_eq!(bootstrap_mean(&values), Some(interval), "seeded: replays");
        let single = bootstrap_mean(&[4.0]).unwrap();
        assert_eq!((single.low, single.high), (4.0, 4.0));
    }

    #[test]
    fn a_consistent_drop_lies_below_zero_and_noise_straddles_it() {
        let dropped: Vec<(f64, f64)> = (0..8).map(|at| (8.0 + at as f64 * 0.1, 5.0)).collect();
        let interval = paired_bootstrap(&dropped).unwrap();
        assert!(interval.high < 0.0, "{interval:?}");
        let noise = [(7.0, 7.2), (7.4, 7.1), (6.8, 7.0), (7.2, 6.9)];
        let interval = paired_bootstrap(&noise).unwrap();
        assert!(interval.low < 0.0 && interval.high > 0.0, "{interval:?}");
    }

    #[test]
    fn the_sign_test_matches_the_binomial_tail() {
        // 8 worse of 8: 2 * (1/2)^8.
        let all_worse: Vec<(f64, f64)> = (0..8).map(|_| (2.0, 1.0)).collect();
        let test = sign_test(&all_worse).unwrap();
        assert_eq!((test.better, test.worse), (0, 8));
        assert!((test.p_value - 2.0 / 256.0).abs() < 1e-12);
        // 1 better, 3 worse: 2 * (1 + 4) / 16 = 0.625.
        let mixed = [(1.0, 2.0), (2.0, 1.0), (2.0, 1.0), (2.0, 1.0), (3.0, 3.0)];
        assert!((sign_test(&mixed).unwrap().p_value - 0.625).abs() < 1e-12);
        assert_eq!(sign_test(&[(1.0, 1.0)]), None);
        // 2 and 2: p = 1 (capped).
        let even = [(1.0, 2.0), (1.0, 2.0), (2.0, 1.0), (2.0, 1.0)];
        assert_eq!(sign_test(&even).unwrap().p_value, 1.0);
    }

    #[test]
    fn the_sign_test_stays_right_past_a_thousand_pairs() {
        let pairs = |better: usize, worse: usize| -> Vec<(f64, f64)> {
            std::iter::repeat_n((1.0, 2.0), better)
                .chain(std::iter::repeat_n((2.0, 1.0), worse))
                .collect()
        };
        // An even split of 2,000 is no evidence at all.
        assert_eq!(sign_test(&pairs(1000, 1000)).unwrap().p_value, 1.0);
        // 940 of 2,000: the normal approximation (z = -2.66) gives 0.0078.
        let lopsided = sign_test(&pairs(940, 1060)).unwrap().p_value;
        assert!((0.006..0.0095).contains(&lopsided), "{lopsided}");
        // 5,000 pairs all one way: as small as an f64 goes, never NaN.
        let one_way = sign_test(&pairs(0, 5000)).unwrap().p_value;
        assert!(one_way.is_finite() && one_way < 1e-300, "{one_way}");
    }
}
