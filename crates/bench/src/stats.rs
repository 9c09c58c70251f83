//! Summaries of many timing samples (or ratios): median and the 10th/90th
//! percentiles.

use std::time::Duration;

/// A summary of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// How many samples were summarised.
    pub n: usize,
    /// The 50th percentile.
    pub median: Duration,
    /// The 10th percentile.
    pub p10: Duration,
    /// The 90th percentile.
    pub p90: Duration,
}

impl Summary {
    /// Summarise `samples` (any order); `None` when there are none.
    pub fn of(samples: &[Duration]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        Some(Summary {
            n: sorted.len(),
            median: percentile(&sorted, 50),
            p10: percentile(&sorted, 10),
            p90: percentile(&sorted, 90),
        })
    }
}

/// A summary of a set of plain numbers, e.g. per-block ratios.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// How many values were summarised (NaNs left out).
    pub n: usize,
    /// The 50th percentile.
    pub median: f64,
    /// The 10th percentile.
    pub p10: f64,
    /// The 90th percentile.
    pub p90: f64,
}

impl Spread {
    /// Summarise `values` (any order, NaNs left out); `None` when none are left.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut sorted: Vec<f64> = values.iter().copied().filter(|v| !v.is_nan()).collect();
        if sorted.is_empty() {
            return None;
        }
        sorted.sort_by(f64::total_cmp);
        Some(Spread {
            n: sorted.len(),
            median: percentile(&sorted, 50),
            p10: percentile(&sorted, 10),
            p90: percentile(&sorted, 90),
        })
    }
}

/// The `p`th percentile (nearest rank) of `samples` (any order); `None`
/// when there are none.
pub fn percentile_of(samples: &[Duration], p: usize) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    Some(percentile(&sorted, p))
}

/// The `p`th percentile (nearest rank) of sorted, non-empty `sorted`.
fn percentile<T: Copy>(sorted: &[T], p: usize) -> T {
    // Nearest-rank: the smallest value with at least p% of samples at or below it.
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&x| Duration::from_micros(x)).collect()
    }

    #[test]
    fn empty_has_no_summary() {
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn one_sample_is_every_percentile() {
        let s = Summary::of(&us(&[7])).expect("summary");
        assert_eq!(
            (s.n, s.median, s.p10, s.p90),
            (1, us(&[7])[0], us(&[7])[0], us(&[7])[0])
        );
    }

    #[test]
    fn percentiles_of_one_to_hundred_in_any_order() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        v.swap(3, 70);
        let s = Summary::of(&us(&v)).expect("summary");
        assert_eq!(s.n, 100);
        assert_eq!(s.median, Duration::from_micros(50));
        assert_eq!(s.p10, Duration::from_micros(10));
        assert_eq!(s.p90, Duration::from_micros(90));
    }

    #[test]
    fn spread_of_ratios_skips_nan() {
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[f64::NAN]), None);
        let v: Vec<f64> = (1..=10).rev().map(|x| x as f64 / 10.0).collect();
        let s = Spread::of(&[&v[..], &[f64::NAN]].concat()).expect("spread");
        assert_eq!((s.n, s.median, s.p10, s.p90), (10, 0.5, 0.1, 0.9));
    }

    #[test]
    fn odd_count_median_is_the_middle() {
        let s = Summary::of(&us(&[5, 1, 3])).expect("summary");
        assert_eq!(s.median, Duration::from_micros(3));
        assert_eq!(s.p10, Duration::from_micros(1));
        assert_eq!(s.p90, Duration::from_micros(5));
    }
}
