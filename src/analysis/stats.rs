//! Statistics over replicates: summaries with a Student-t confidence interval of the mean,
//! outlier flags by median absolute deviation, Welch's and Student's two-sample t-tests, and
//! Holm's step-down correction for several p-values. Pure functions on `&[f64]`; the methods
//! and their references are in docs/statistics.md.
//!
//! Values must be finite; functions given a NaN or an infinity return `None` (or flag nothing)
//! rather than a number that looks measured.
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The confidence level of [`Summary`]'s interval.
pub const CONFIDENCE: f64 = 0.95;
/// A value whose modified z-score exceeds this (in absolute value) is an outlier
/// (Iglewicz & Hoaglin 1993; hyperfine uses the same threshold).
pub const OUTLIER_Z: f64 = 3.5;
/// The 0.75 quantile of the standard normal distribution: MAD / 0.6745 estimates σ for normal data.
pub const MAD_SCALE: f64 = 0.6745;
/// √(π/2): mean absolute deviation × 1.253314 estimates σ for normal data (the fallback when
/// MAD = 0, as in IBM SPSS's modified z-score).
pub const MEANAD_SCALE: f64 = 1.253314;

/// A replicate set summarised.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (divisor n − 1); None when n < 2.
    pub sd: Option<f64>,
    /// Half-width of the 95 % confidence interval of the mean, t(0.975, n−1) · sd / √n; None when n < 2.
    pub ci95_half_width: Option<f64>,
    /// The interval itself, mean ∓ half-width; None when n < 2.
    pub ci95: Option<(f64, f64)>,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// sd / mean; None when n < 2 or the mean is 0.
    pub cv: Option<f64>,
    /// Indices of the values flagged by [`mad_outliers`], in input order.
    pub outliers: Vec<usize>,
}

fn all_finite(xs: &[f64]) -> bool {
    xs.iter().all(|x| x.is_finite())
}

/// Arithmetic mean; None for an empty or non-finite sample.
pub fn mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || !all_finite(xs) {
        return None;
    }
    Some(xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample variance (divisor n − 1); None when n < 2.
pub(crate) fn variance(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let m = mean(xs)?;
    Some(xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64)
}

/// Geometric mean, exp(mean(ln x)): how FPL'18 averaged its 15 iterations of each configuration.
/// None for an empty sample or one with a value that is not positive and finite.
pub(crate) fn geometric_mean(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || !xs.iter().all(|x| x.is_finite() && *x > 0.0) {
        return None;
    }
    mean(&xs.iter().map(|x| x.ln()).collect::<Vec<_>>()).map(f64::exp)
}

/// Geometric standard deviation, exp(sd(ln x)): the factor a typical value lies within of the
/// geometric mean. None when n < 2 or a value is not positive and finite.
pub(crate) fn geometric_sd(xs: &[f64]) -> Option<f64> {
    geometric_mean(xs)?;
    sd(&xs.iter().map(|x| x.ln()).collect::<Vec<_>>()).map(f64::exp)
}

/// Sample standard deviation (divisor n − 1); None when n < 2.
pub fn sd(xs: &[f64]) -> Option<f64> {
    variance(xs).map(f64::sqrt)
}

/// Median (the mean of the two middle values for even n); None for an empty or non-finite sample.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || !all_finite(xs) {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 })
}

/// The `p` quantile of Student's t distribution with `df` degrees of freedom (0 < p < 1, df > 0).
pub fn t_quantile(p: f64, df: f64) -> Option<f64> {
    if !(p > 0.0 && p < 1.0 && df > 0.0) {
        return None;
    }
    Some(StudentsT::new(0.0, 1.0, df).ok()?.inverse_cdf(p))
}

/// Two-sided p-value of a t statistic with `df` degrees of freedom: 2 · P(T > |t|).
pub fn t_two_sided_p(t: f64, df: f64) -> Option<f64> {
    if t.is_nan() || df.is_nan() || df <= 0.0 {
        return None;
    }
    if t.is_infinite() {
        return Some(0.0);
    }
    let d = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((2.0 * d.sf(t.abs())).min(1.0))
}

/// Half-width of the two-sided confidence interval of the mean at `level` (e.g. 0.95):
/// t((1 + level)/2, n − 1) · sd / √n. None when n < 2.
pub(crate) fn ci_half_width(xs: &[f64], level: f64) -> Option<f64> {
    let s = sd(xs)?;
    let n = xs.len() as f64;
    Some(t_quantile((1.0 + level) / 2.0, n - 1.0)? * s / n.sqrt())
}

/// The modified z-score of every value: 0.6745 · (x − median) / MAD, where MAD is the median of
/// |x − median|. When MAD = 0 (more than half the values equal) the mean absolute deviation
/// stands in: (x − median) / (1.253314 · meanAD). When that is 0 too (all values equal) every
/// score is 0. None for an empty or non-finite sample.
pub fn modified_z_scores(xs: &[f64]) -> Option<Vec<f64>> {
    let med = median(xs)?;
    let dev: Vec<f64> = xs.iter().map(|x| (x - med).abs()).collect();
    let mad = median(&dev)?;
    let scale = if mad > 0.0 { mad / MAD_SCALE } else { MEANAD_SCALE * dev.iter().sum::<f64>() / dev.len() as f64 };
    if scale <= 0.0 {
        return Some(vec![0.0; xs.len()]);
    }
    Some(xs.iter().map(|x| (x - med) / scale).collect())
}

/// Outlier flags, one per value in input order: |modified z-score| > 3.5. All false for an
/// empty or non-finite sample (nothing can be judged).
pub fn mad_outliers(xs: &[f64]) -> Vec<bool> {
    match modified_z_scores(xs) {
        Some(z) => z.iter().map(|z| z.abs() > OUTLIER_Z).collect(),
        None => vec![false; xs.len()],
    }
}

/// Summarise a replicate set; None for an empty or non-finite sample.
pub fn summarize(xs: &[f64]) -> Option<Summary> {
    let m = mean(xs)?;
    let median = median(xs)?;
    let (min, max) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    let sd = sd(xs);
    let hw = ci_half_width(xs, CONFIDENCE);
    Some(Summary {
        n: xs.len(),
        mean: m,
        sd,
        ci95_half_width: hw,
        ci95: hw.map(|h| (m - h, m + h)),
        median,
        min,
        max,
        cv: sd.filter(|_| m != 0.0).map(|s| s / m),
        outliers: mad_outliers(xs).iter().enumerate().filter(|(_, &o)| o).map(|(i, _)| i).collect(),
    })
}

/// A two-sample t-test's result. `t` is positive when the first sample's mean is the larger.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TTest {
    pub t: f64,
    /// Degrees of freedom (Welch–Satterthwaite for Welch's test, n₁ + n₂ − 2 for Student's).
    pub df: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// mean(a) − mean(b).
    pub mean_difference: f64,
}

/// When the standard error is 0 (both samples constant): equal means → t = 0, p = 1; different
/// means → t = ±∞, p = 0 (the difference is certain as far as the data can tell).
fn degenerate(diff: f64, df: f64) -> TTest {
    if diff == 0.0 {
        TTest { t: 0.0, df, p: 1.0, mean_difference: diff }
    } else {
        TTest { t: diff.signum() * f64::INFINITY, df, p: 0.0, mean_difference: diff }
    }
}

/// Welch's unequal-variance t-test: t = (m₁ − m₂) / √(s₁²/n₁ + s₂²/n₂), df by
/// Welch–Satterthwaite, two-sided p. None unless both samples have n ≥ 2 and are finite.
/// Matches `scipy.stats.ttest_ind(a, b, equal_var=False)`.
pub fn welch_t_test(a: &[f64], b: &[f64]) -> Option<TTest> {
    let (va, vb) = (variance(a)?, variance(b)?);
    let (ma, mb) = (mean(a)?, mean(b)?);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (qa, qb) = (va / na, vb / nb);
    let se2 = qa + qb;
    let diff = ma - mb;
    if se2 <= 0.0 {
        return Some(degenerate(diff, na + nb - 2.0));
    }
    let t = diff / se2.sqrt();
    let df = se2 * se2 / (qa * qa / (na - 1.0) + qb * qb / (nb - 1.0));
    Some(TTest { t, df, p: t_two_sided_p(t, df)?, mean_difference: diff })
}

/// Student's equal-variance t-test with the pooled variance, df = n₁ + n₂ − 2, two-sided p.
/// None unless both samples have n ≥ 2 and are finite.
/// Matches `scipy.stats.ttest_ind(a, b, equal_var=True)`.
pub fn student_t_test(a: &[f64], b: &[f64]) -> Option<TTest> {
    let (va, vb) = (variance(a)?, variance(b)?);
    let (ma, mb) = (mean(a)?, mean(b)?);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let df = na + nb - 2.0;
    let pooled = ((na - 1.0) * va + (nb - 1.0) * vb) / df;
    let se2 = pooled * (1.0 / na + 1.0 / nb);
    let diff = ma - mb;
    if se2 <= 0.0 {
        return Some(degenerate(diff, df));
    }
    let t = diff / se2.sqrt();
    Some(TTest { t, df, p: t_two_sided_p(t, df)?, mean_difference: diff })
}

/// Holm's step-down adjustment of m p-values (controls the family-wise error rate). Sort
/// ascending, p₍ᵢ₎ ↦ (m − i + 1) · p₍ᵢ₎ for i = 1..m, made monotone by a running maximum and
/// capped at 1; returned in input order. A NaN p-value is taken as 1. Equal p-values get equal
/// adjusted values whatever their order.
/// Matches `statsmodels.stats.multitest.multipletests(p, method="holm")[1]`.
pub fn holm(ps: &[f64]) -> Vec<f64> {
    let m = ps.len();
    let clean: Vec<f64> = ps.iter().map(|&p| if p.is_nan() { 1.0 } else { p.clamp(0.0, 1.0) }).collect();
    let mut order: Vec<usize> = (0..m).collect();
    // Stable sort: ties keep input order, and the running maximum gives ties the same value.
    order.sort_by(|&i, &j| clean[i].total_cmp(&clean[j]));
    let mut out = vec![0.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        let adj = ((m - rank) as f64 * clean[i]).min(1.0);
        running = running.max(adj);
        out[i] = running;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variance_by_hand() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squared deviations sum to 32, / 7.
        let x = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        assert_eq!(mean(&x), Some(5.0));
        assert!((variance(&x).unwrap() - 32.0 / 7.0).abs() < 1e-12);
        assert_eq!(median(&x), Some(4.5));
    }

    #[test]
    fn geometric_mean_by_hand() {
        // 1, 10, 100: ln mean = ln 10; sd of (0, ln 10, 2 ln 10) = ln 10.
        let x = [1.0, 10.0, 100.0];
        assert!((geometric_mean(&x).unwrap() - 10.0).abs() < 1e-9);
        assert!((geometric_sd(&x).unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(geometric_mean(&[4.0]), Some(4.0));
        assert_eq!(geometric_sd(&[4.0]), None);
        assert_eq!(geometric_mean(&[1.0, 0.0]), None, "a zero has no logarithm");
        assert_eq!(geometric_mean(&[]), None);
    }

    #[test]
    fn holm_of_one_is_itself() {
        assert_eq!(holm(&[0.3]), vec![0.3]);
        assert_eq!(holm(&[0.01, 0.01]), vec![0.02, 0.02]);
    }
}
