//! How far a ratio of two quantiles can be trusted: a percentile bootstrap.
//!
//! With 100 repetitions a p99 is the second-largest sample, so one slow repetition moves a p99
//! ratio by tens of percent (two runs of the same code here differed by 0.4). A benchmark that
//! says "met" or "behind" on such a ratio says it with an interval, computed from the same
//! samples: both sides resampled with replacement, the ratio of their quantiles taken each time.

use hdrhistogram::Histogram;

/// Resamples per interval: enough for a stable 5th/95th percentile of the ratios.
const RESAMPLES: usize = 2000;

/// Fixed, so that the same samples always give the same interval.
const SEED: u64 = 0x6865_6164_726f_6f6d;

/// A ratio `peer / ours` at one quantile, and the central `confidence` interval of its bootstrap
/// distribution.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct RatioInterval {
    pub ratio: f64,
    pub low: f64,
    pub high: f64,
    pub confidence: f64,
    /// The smaller side's sample count: below a few dozen the interval says little.
    pub samples: usize,
}

impl RatioInterval {
    /// "0.93x (90% interval 0.62–1.41)".
    pub fn describe(&self) -> String {
        format!(
            "{:.2}x ({:.0}% interval {:.2}–{:.2})",
            self.ratio,
            self.confidence * 100.0,
            self.low,
            self.high
        )
    }

    /// Whether "peer's quantile ≥ ours" can be neither claimed nor ruled out from these samples.
    pub fn straddles_one(&self) -> bool {
        self.low < 1.0 && self.high >= 1.0
    }
}

/// `peer / ours` at `quantile` with its bootstrap interval; `None` when either side has no
/// samples or ours is zero at that quantile.
pub fn ratio_interval(
    ours: &Histogram<u64>,
    peer: &Histogram<u64>,
    quantile: f64,
    confidence: f64,
) -> Option<RatioInterval> {
    let (ours_samples, peer_samples) = (samples(ours), samples(peer));
    let ratio = quantile_ratio(&mut ours_samples.clone(), &mut peer_samples.clone(), quantile)?;
    let mut rng = fastrand::Rng::with_seed(SEED);
    let mut ours_resample = vec![0; ours_samples.len()];
    let mut peer_resample = vec![0; peer_samples.len()];
    let mut ratios: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            resample(&mut rng, &ours_samples, &mut ours_resample);
            resample(&mut rng, &peer_samples, &mut peer_resample);
            quantile_ratio(&mut ours_resample, &mut peer_resample, quantile)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence.clamp(0.0, 1.0)) / 2.0;
    Some(RatioInterval {
        ratio,
        low: *ratios.get(rank(ratios.len(), tail))?,
        high: *ratios.get(rank(ratios.len(), 1.0 - tail))?,
        confidence,
        samples: ours_samples.len().min(peer_samples.len()),
    })
}

/// Every recorded sample, each bucket at the value `value_at_quantile` reports for it.
fn samples(h: &Histogram<u64>) -> Vec<u64> {
    h.iter_recorded()
        .flat_map(|v| {
            let value = h.highest_equivalent(v.value_iterated_to());
            std::iter::repeat_n(value, usize::try_from(v.count_at_value()).unwrap_or(0))
        })
        .collect()
}

fn resample(rng: &mut fastrand::Rng, from: &[u64], into: &mut [u64]) {
    for slot in into.iter_mut() {
        *slot = from[rng.usize(..from.len())];
    }
}

/// Reorders both (the resamples are refilled before each use, so no copy is made for this).
fn quantile_ratio(ours: &mut [u64], peer: &mut [u64], quantile: f64) -> Option<f64> {
    let (o, p) = (quantile_of(ours, quantile)?, quantile_of(peer, quantile)?);
    // Display only: the precision lost does not matter.
    (o > 0).then(|| p as f64 / o as f64)
}

/// The `quantile` of `samples` as HdrHistogram counts it: the sample at rank ⌈q·n⌉ (1-based).
fn quantile_of(samples: &mut [u64], quantile: f64) -> Option<u64> {
    if samples.is_empty() {
        return None;
    }
    let index = rank(samples.len(), quantile);
    Some(*samples.select_nth_unstable(index).1)
}

/// The 0-based index of the sample at rank ⌈q·n⌉, at least the first.
fn rank(n: usize, quantile: f64) -> usize {
    // n is a sample count (at most millions): exact in an f64.
    let at = (quantile.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    at.clamp(1, n.max(1)) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(values: impl IntoIterator<Item = u64>) -> Histogram<u64> {
        let mut h = crate::new_histogram();
        for v in values {
            h.record(v).expect("in the histogram's bounds");
        }
        h
    }

    #[test]
    fn the_point_ratio_is_the_histograms_own() {
        let ours = histogram((1..=100).map(|i| i * 1_000_000));
        let peer = histogram((1..=100).map(|i| i * 1_500_000));
        let interval = ratio_interval(&ours, &peer, 0.99, 0.9).expect("samples on both sides");
        assert_eq!(interval.samples, 100);
        let expected = peer.value_at_quantile(0.99) as f64 / ours.value_at_quantile(0.99) as f64;
        assert_eq!(interval.ratio, expected);
        assert!(
            interval.low <= interval.ratio && interval.ratio <= interval.high,
            "{interval:?}"
        );
    }

    #[test]
    fn the_same_distribution_straddles_one_and_two_outliers_widen_it() {
        let ours = histogram((1..=100).map(|i| i * 100_000));
        let peer = histogram((1..=100).map(|i| i * 100_000 + 7));
        let same = ratio_interval(&ours, &peer, 0.99, 0.9).expect("samples on both sides");
        assert!(same.straddles_one(), "{same:?}");
        // Two slow repetitions on our side (a p99 of 100 is the second-largest): the point ratio
        // drops to a quarter, and the interval still reaches 1.
        let slowed = histogram((1..=98).map(|i| i * 100_000).chain([40_000_000, 41_000_000]));
        let outlier = ratio_interval(&slowed, &peer, 0.99, 0.9).expect("samples on both sides");
        assert!(outlier.ratio < 0.3, "{outlier:?}");
        assert!(outlier.straddles_one(), "{outlier:?}");
    }

    #[test]
    fn separated_distributions_do_not_straddle_one() {
        let ours = histogram((1..=100).map(|i| 1_000_000 + i));
        let peer = histogram((1..=100).map(|i| 3_000_000 + i));
        let interval = ratio_interval(&ours, &peer, 0.99, 0.9).expect("samples on both sides");
        assert!(!interval.straddles_one(), "{interval:?}");
        assert!(interval.low > 2.9 && interval.high < 3.1, "{interval:?}");
    }

    #[test]
    fn no_samples_no_interval() {
        let some = histogram([1_000]);
        assert_eq!(ratio_interval(&crate::new_histogram(), &some, 0.99, 0.9), None);
        assert_eq!(ratio_interval(&some, &crate::new_histogram(), 0.99, 0.9), None);
    }

    #[test]
    fn ranks_follow_hdrhistogram() {
        let values: Vec<u64> = (1..=100).map(|i| i * 1_000).collect();
        let h = histogram(values.iter().copied());
        for q in [0.0, 0.5, 0.9, 0.99, 0.999, 1.0] {
            assert_eq!(
                quantile_of(&mut samples(&h), q),
                Some(h.value_at_quantile(q)),
                "q {q}"
            );
        }
    }
}
