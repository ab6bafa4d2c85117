//! Steady state by the SNIA Solid State Storage Performance Test Specification rule: over a
//! measurement window of 5 rounds, the range of the values is within 20 % of their mean, and
//! the excursion of the least-squares line across the window within 10 % of the mean.
use serde::Serialize;

pub const WINDOW: usize = 5;
pub const MAX_RANGE: f64 = 0.20;
pub const MAX_SLOPE_EXCURSION: f64 = 0.10;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SteadyState {
    pub steady: bool,
    pub mean: f64,
    /// (max - min) / mean over the window.
    pub range_fraction: f64,
    /// |slope| x (window - 1) / mean: how far the fitted line moves across the window.
    pub slope_fraction: f64,
}

/// Judge the last `WINDOW` values; None until there are that many.
pub fn check(values: &[f64]) -> Option<SteadyState> {
    if values.len() < WINDOW {
        return None;
    }
    let w = &values[values.len() - WINDOW..];
    let n = w.len() as f64;
    let mean = w.iter().sum::<f64>() / n;
    if mean <= 0.0 {
        return Some(SteadyState { steady: false, mean, range_fraction: f64::INFINITY, slope_fraction: f64::INFINITY });
    }
    let (min, max) = w.iter().fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    let xm = (n - 1.0) / 2.0;
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for (i, v) in w.iter().enumerate() {
        let dx = i as f64 - xm;
        sxy += dx * (v - mean);
        sxx += dx * dx;
    }
    let slope = sxy / sxx;
    let range_fraction = (max - min) / mean;
    let slope_fraction = slope.abs() * (n - 1.0) / mean;
    Some(SteadyState { steady: range_fraction <= MAX_RANGE && slope_fraction <= MAX_SLOPE_EXCURSION, mean, range_fraction, slope_fraction })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needs_a_full_window() {
        assert!(check(&[1.0, 2.0, 3.0, 4.0]).is_none());
    }

    #[test]
    fn flat_series_is_steady() {
        let s = check(&[100.0, 102.0, 98.0, 101.0, 99.0]).unwrap();
        assert!(s.steady);
        assert!((s.mean - 100.0).abs() < 1e-9);
        assert!((s.range_fraction - 0.04).abs() < 1e-9);
    }

    #[test]
    fn known_slope() {
        // 100, 102, ..., 108: slope 2 per round, excursion 8 over mean 104 = 7.7 %; range 7.7 %.
        let s = check(&[50.0, 100.0, 102.0, 104.0, 106.0, 108.0]).unwrap();
        assert!((s.slope_fraction - 8.0 / 104.0).abs() < 1e-9);
        assert!(s.steady);
        // 100..120 in steps of 5: excursion 20 / 110 = 18 % > 10 %, range 18 % < 20 %.
        let t = check(&[100.0, 105.0, 110.0, 115.0, 120.0]).unwrap();
        assert!(!t.steady && t.range_fraction < MAX_RANGE && t.slope_fraction > MAX_SLOPE_EXCURSION);
    }

    #[test]
    fn wide_range_is_not_steady() {
        // No trend but a 30 % spread.
        let s = check(&[100.0, 130.0, 100.0, 130.0, 100.0]).unwrap();
        assert!(s.slope_fraction < MAX_SLOPE_EXCURSION);
        assert!(!s.steady);
    }
}
