//! The statistics layer against known answers.
//!
//! Reference values were computed independently of this code and pasted as constants:
//! - t-tests, quantiles, confidence intervals and MAD: Python 3.11 with SciPy 1.17.1
//!   (`scipy.stats.ttest_ind(a, b, equal_var=False/True)`, `stats.t.ppf`, `stats.t.interval`,
//!   `stats.median_abs_deviation`), the exact call beside each constant;
//! - Holm: by hand (shown in the comments) and checked with statsmodels 0.14
//!   (`statsmodels.stats.multitest.multipletests(p, method="holm")[1]`);
//! - J-curves: closed forms worked out in the comments.
use iolab::analysis::compare::{self, Metric, Replicates, Verdict, ALPHA};
use iolab::analysis::saturation::{saturation_point, CurvePoint, SaturationRule};
use iolab::analysis::stats;
use iolab::store::{RunFilter, Store};
use serde_json::{json, Value};

/// |x − want| ≤ rel · |want| (or ≤ rel when want is 0).
fn close(x: f64, want: f64, rel: f64) -> bool {
    (x - want).abs() <= rel * want.abs().max(1e-300) || (want == 0.0 && x.abs() <= rel)
}

macro_rules! assert_close {
    ($x:expr, $want:expr, $rel:expr) => {{
        let (x, w): (f64, f64) = ($x, $want);
        assert!(close(x, w, $rel), "{} = {x:e}, want {w:e} (rel {})", stringify!($x), $rel);
    }};
}

// Two replicate sets of IOPS (thousands), unequal sizes so Welch and Student differ.
const A: [f64; 5] = [101.2, 99.8, 100.5, 102.1, 98.9];
const B: [f64; 6] = [97.1, 98.3, 96.4, 99.0, 95.8, 97.7];
// Unequal variances and sizes, no real difference.
const C: [f64; 4] = [250.0, 262.0, 241.0, 270.0];
const D: [f64; 8] = [255.0, 249.0, 251.0, 253.0, 252.0, 248.0, 254.0, 250.0];

// ---- summaries ----

#[test]
fn summary_matches_scipy() {
    let s = stats::summarize(&A).unwrap();
    assert_eq!(s.n, 5);
    // numpy: np.mean(A) = 100.5, np.std(A, ddof=1) = 1.234908903522844, np.median(A) = 100.5
    assert_close!(s.mean, 100.5, 1e-12);
    assert_close!(s.sd.unwrap(), 1.234908903522844, 1e-12);
    assert_close!(s.median, 100.5, 1e-12);
    assert_eq!((s.min, s.max), (98.9, 102.1));
    // stats.t.ppf(0.975, 4) * np.std(A, ddof=1) / sqrt(5) = 1.533341926565601
    assert_close!(s.ci95_half_width.unwrap(), 1.533341926565601, 1e-9);
    // stats.t.interval(0.95, 4, loc=mean, scale=stats.sem(A)) = (98.9666580734344, 102.0333419265656)
    let (lo, hi) = s.ci95.unwrap();
    assert_close!(lo, 98.9666580734344, 1e-11);
    assert_close!(hi, 102.0333419265656, 1e-11);
    assert_close!(s.cv.unwrap(), 1.234908903522844 / 100.5, 1e-12);
    assert!(s.outliers.is_empty());
}

#[test]
fn t_quantile_and_two_sided_p_match_scipy() {
    // stats.t.ppf(0.975, 4) = 2.7764451051977934
    assert_close!(stats::t_quantile(0.975, 4.0).unwrap(), 2.7764451051977934, 1e-9);
    // 2 * stats.t.sf(3, 10) = 0.01334365502256957
    assert_close!(stats::t_two_sided_p(3.0, 10.0).unwrap(), 0.01334365502256957, 1e-9);
    assert_close!(stats::t_two_sided_p(-3.0, 10.0).unwrap(), 0.01334365502256957, 1e-9);
    assert_eq!(stats::t_two_sided_p(0.0, 10.0).unwrap(), 1.0);
    assert!(stats::t_quantile(1.0, 4.0).is_none() && stats::t_quantile(0.5, 0.0).is_none());
}

#[test]
fn small_and_bad_samples() {
    assert!(stats::summarize(&[]).is_none());
    assert!(stats::summarize(&[1.0, f64::NAN]).is_none());
    let one = stats::summarize(&[7.0]).unwrap();
    assert_eq!((one.n, one.mean, one.median), (1, 7.0, 7.0));
    assert!(one.sd.is_none() && one.ci95.is_none() && one.ci95_half_width.is_none());
    // Even n: the median is the mean of the two middle values.
    assert_eq!(stats::median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    // A constant sample: sd 0, interval of width 0.
    let k = stats::summarize(&[3.0, 3.0, 3.0]).unwrap();
    assert_eq!((k.sd, k.ci95), (Some(0.0), Some((3.0, 3.0))));
}

// ---- outliers ----

#[test]
fn mad_flags_a_planted_outlier_and_only_it() {
    let x = [10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 14.0];
    // stats.median_abs_deviation(x) = 0.1 (median 10.0); 0.6745 * (x - 10.0) / 0.1 =
    // [0.6745, -0.6745, 0, 1.349, -1.349, 0, 26.98]
    let z = stats::modified_z_scores(&x).unwrap();
    for (got, want) in z.iter().zip([0.6745, -0.6745, 0.0, 1.349, -1.349, 0.0, 26.98]) {
        assert!((got - want).abs() < 1e-9, "{z:?}");
    }
    assert_eq!(stats::mad_outliers(&x), vec![false, false, false, false, false, false, true]);
    assert_eq!(stats::summarize(&x).unwrap().outliers, vec![6]);
    // A low outlier too.
    let y = [10.1, 9.9, 10.0, 10.2, 9.8, 10.0, 6.0];
    assert_eq!(stats::summarize(&y).unwrap().outliers, vec![6]);
}

#[test]
fn mad_zero_falls_back_to_mean_absolute_deviation() {
    // Median 5, MAD 0 (four of five values equal). Mean absolute deviation = 4/5 = 0.8, so the
    // 9 scores (9 - 5) / (1.253314 * 0.8) = 3.98943 > 3.5: flagged. The 5s score 0.
    let x = [5.0, 5.0, 9.0, 5.0, 5.0];
    let z = stats::modified_z_scores(&x).unwrap();
    assert!((z[2] - 4.0 / (1.253314 * 0.8)).abs() < 1e-9, "{z:?}");
    assert_eq!(stats::mad_outliers(&x), vec![false, false, true, false, false]);
    // A smaller excursion under the fallback is not flagged: [5,5,5,6,6,5] has median 5, MAD 0,
    // meanAD 2/6, so z(6) = 1 / (1.253314 / 3) = 2.394 < 3.5.
    assert_eq!(stats::mad_outliers(&[5.0, 5.0, 5.0, 6.0, 6.0, 5.0]), vec![false; 6]);
    // All equal: nothing is an outlier, no division by zero.
    assert_eq!(stats::mad_outliers(&[2.0; 4]), vec![false; 4]);
    assert_eq!(stats::modified_z_scores(&[2.0; 4]).unwrap(), vec![0.0; 4]);
}

// ---- t-tests ----

#[test]
fn welch_matches_scipy() {
    // stats.ttest_ind(A, B, equal_var=False):
    //   statistic 4.233630700504275, pvalue 0.002485011772032868, df 8.5169094080678
    let w = stats::welch_t_test(&A, &B).unwrap();
    assert_close!(w.t, 4.233630700504275, 1e-10);
    assert_close!(w.df, 8.5169094080678, 1e-10);
    assert_close!(w.p, 0.002485011772032868, 1e-8);
    // Swapping the samples flips t, keeps df and p.
    let s = stats::welch_t_test(&B, &A).unwrap();
    assert_close!(s.t, -4.233630700504275, 1e-10);
    assert_close!(s.p, w.p, 1e-12);
    // stats.ttest_ind(C, D, equal_var=False):
    //   statistic 0.6572579720730002, pvalue 0.5564074315953828, df 3.110145186508823
    let w = stats::welch_t_test(&C, &D).unwrap();
    assert_close!(w.t, 0.6572579720730002, 1e-10);
    assert_close!(w.df, 3.110145186508823, 1e-10);
    assert_close!(w.p, 0.5564074315953828, 1e-8);
}

#[test]
fn student_matches_scipy() {
    // stats.ttest_ind(A, B, equal_var=True): statistic 4.24865909446104, pvalue 0.002146709116399349, df 9
    let s = stats::student_t_test(&A, &B).unwrap();
    assert_close!(s.t, 4.24865909446104, 1e-10);
    assert_eq!(s.df, 9.0);
    assert_close!(s.p, 0.002146709116399349, 1e-8);
    // stats.ttest_ind(C, D, equal_var=True): statistic 0.9490692437773878, pvalue 0.3649572884780081, df 10
    let s = stats::student_t_test(&C, &D).unwrap();
    assert_close!(s.t, 0.9490692437773878, 1e-10);
    assert_eq!(s.df, 10.0);
    assert_close!(s.p, 0.3649572884780081, 1e-8);
}

#[test]
fn t_tests_on_degenerate_samples() {
    assert!(stats::welch_t_test(&[1.0], &A).is_none());
    assert!(stats::student_t_test(&A, &[]).is_none());
    let same = stats::welch_t_test(&[2.0, 2.0], &[2.0, 2.0, 2.0]).unwrap();
    assert_eq!((same.t, same.p), (0.0, 1.0));
    let apart = stats::welch_t_test(&[2.0, 2.0], &[3.0, 3.0]).unwrap();
    assert_eq!((apart.t, apart.p), (f64::NEG_INFINITY, 0.0));
}

// ---- Holm ----

#[test]
fn holm_known_vectors() {
    // m = 4, sorted 0.005, 0.01, 0.03, 0.04 → ×4, ×3, ×2, ×1 = 0.02, 0.03, 0.06, 0.04; running
    // max → 0.02, 0.03, 0.06, 0.06; in input order [0.03, 0.06, 0.06, 0.02]
    // (statsmodels multipletests(..., method="holm") gives the same).
    let h = stats::holm(&[0.01, 0.04, 0.03, 0.005]);
    for (g, w) in h.iter().zip([0.03, 0.06, 0.06, 0.02]) {
        assert!((g - w).abs() < 1e-15, "{h:?}");
    }
    // Ties: [0.02, 0.02, 0.5] → 0.06, max(0.04, 0.06) = 0.06, 0.5 (statsmodels: [0.06 0.06 0.5]).
    let h = stats::holm(&[0.02, 0.02, 0.5]);
    for (g, w) in h.iter().zip([0.06, 0.06, 0.5]) {
        assert!((g - w).abs() < 1e-15, "{h:?}");
    }
    // Capped at 1; monotone in the raw p-values; NaN counts as 1.
    assert_eq!(stats::holm(&[0.6, 0.7, 0.4]), vec![1.0, 1.0, 1.0]);
    assert_eq!(stats::holm(&[f64::NAN, 0.01]), vec![1.0, 0.02]);
    assert!(stats::holm(&[]).is_empty());
    let raw = [0.001, 0.2, 0.03, 0.04, 0.0005, 0.5];
    let adj = stats::holm(&raw);
    for i in 0..raw.len() {
        assert!(adj[i] >= raw[i] && adj[i] <= 1.0);
        for j in 0..raw.len() {
            if raw[i] <= raw[j] {
                assert!(adj[i] <= adj[j], "not monotone: {adj:?}");
            }
        }
    }
}

// ---- saturation ----

fn curve(qds: &[f64], iops: impl Fn(f64) -> f64) -> Vec<CurvePoint> {
    // A closed loop obeys Little's law: mean latency = queue depth / IOPS.
    qds.iter().map(|&q| CurvePoint { qd: q, iops: iops(q), mean_lat: q / iops(q) }).collect()
}

#[test]
fn j_curve_with_a_known_heel() {
    // Service time s = 100 µs, device maximum 120 000 IOPS: IOPS = QD / s = 10 000 · QD up to
    // QD 12, then flat; latency = s = 100 µs up to QD 12, then QD / 120 000 s. The heel is QD 12
    // (index 6): the step 12 → 16 gains 0 % IOPS and its latency grows 16/12 = 1.33×, which is
    // 2× (+100 %) per doubling (log2(16/12) = 0.415 doublings). Every earlier step gains +100 %
    // per doubling.
    let qds = [1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0];
    let pts = curve(&qds, |q| (q * 10_000.0).min(120_000.0));
    let s = saturation_point(&pts, SaturationRule::default()).unwrap();
    assert_eq!(s.index, Some(6), "{}", s.reason);
    assert_eq!(s.qd, Some(12.0));
    assert!(s.reason.contains("queue depth 12"), "{}", s.reason);
    assert!((s.steps[6].0 - 0.0).abs() < 1e-12 && (s.steps[6].1 - 1.0).abs() < 1e-12, "{:?}", s.steps);
    for &(g, _) in &s.steps[..6] {
        assert!((g - 1.0).abs() < 1e-12);
    }
    // The answer does not move when the sweep stops earlier or goes deeper.
    let short = saturation_point(&pts[..8], SaturationRule::default()).unwrap();
    assert_eq!(short.index, Some(6));
    let mut long = pts.clone();
    long.extend(curve(&[64.0, 128.0, 256.0], |_| 120_000.0));
    assert_eq!(saturation_point(&long, SaturationRule::default()).unwrap().index, Some(6));
    // Stopping at the heel: nothing beyond it shows saturation yet.
    let none = saturation_point(&pts[..7], SaturationRule::default()).unwrap();
    assert_eq!(none.index, None);
    assert!(none.reason.starts_with("not saturated up to queue depth 12"), "{}", none.reason);
}

#[test]
fn smooth_j_curve_saturates_where_the_closed_form_says() {
    // IOPS = 200 000 · q / (q + 8), doubling sweep 1..256. Per doubling the IOPS ratio is
    // (q + 8) / (q + 4), a gain of 4 / (q + 4): 5.88 % at q = 64, 3.03 % at q = 128 (< 5 %).
    // Latency (Little) grows 2 (q + 4) / (q + 8) − 1 = 94 % at q = 128 (> 20 %). So QD 128, index 7.
    let qds: Vec<f64> = (0..9).map(|i| (1u32 << i) as f64).collect();
    let pts = curve(&qds, |q| 200_000.0 * q / (q + 8.0));
    let s = saturation_point(&pts, SaturationRule::default()).unwrap();
    assert_eq!((s.index, s.qd), (Some(7), Some(128.0)), "{}", s.reason);
    assert!((s.steps[6].0 - 4.0 / 68.0).abs() < 1e-12 && (s.steps[7].0 - 4.0 / 132.0).abs() < 1e-12);
    // A looser rule (10 % gain) stops earlier: 4/(q+4) < 0.1 ⇔ q > 36 → QD 64, index 6.
    let loose = SaturationRule { min_iops_gain: 0.10, ..Default::default() };
    assert_eq!(saturation_point(&pts, loose).unwrap().index, Some(6));
}

#[test]
fn flat_iops_without_latency_growth_is_not_saturation() {
    // A rate-limited (open-loop) workload: IOPS and latency both flat. No queueing, no heel.
    let pts: Vec<CurvePoint> = [1.0, 2.0, 4.0, 8.0].iter().map(|&q| CurvePoint { qd: q, iops: 5000.0, mean_lat: 80_000.0 }).collect();
    assert_eq!(saturation_point(&pts, SaturationRule::default()).unwrap().index, None);
}

#[test]
fn saturation_rejects_bad_curves() {
    let p = |qd: f64| CurvePoint { qd, iops: 1.0, mean_lat: 1.0 };
    assert!(saturation_point(&[p(1.0)], SaturationRule::default()).is_err());
    assert!(saturation_point(&[p(2.0), p(1.0)], SaturationRule::default()).is_err());
    assert!(saturation_point(&[p(1.0), p(1.0)], SaturationRule::default()).is_err());
    let bad = CurvePoint { qd: 2.0, iops: f64::NAN, mean_lat: 1.0 };
    assert!(saturation_point(&[p(1.0), bad], SaturationRule::default()).is_err());
}

// ---- comparisons ----

#[test]
fn compare_two_configurations() {
    // b = B is slower in IOPS (Welch p = 0.002485, see welch_matches_scipy), ratio 97.3833/100.5.
    let c = compare::compare_metric(Metric::Iops, &A, &B, ALPHA).unwrap();
    assert_close!(c.ratio.unwrap(), (584.3 / 6.0) / 100.5, 1e-12);
    assert_close!(c.welch.unwrap().p, 0.002485011772032868, 1e-8);
    assert_eq!(c.verdict, Verdict::Slower);
    // Swapped, b = A is faster.
    assert_eq!(compare::compare_metric(Metric::Iops, &B, &A, ALPHA).unwrap().verdict, Verdict::Faster);
    // For latency lower is better: b with the lower mean is faster.
    assert_eq!(compare::compare_metric(Metric::LatMeanNs, &A, &B, ALPHA).unwrap().verdict, Verdict::Faster);
    assert_eq!(compare::compare_metric(Metric::CpuNsPerIo, &B, &A, ALPHA).unwrap().verdict, Verdict::Slower);
    // C vs D: p = 0.556 > 0.05.
    let t = compare::compare_metric(Metric::LatP99Ns, &C, &D, ALPHA).unwrap();
    assert_eq!(t.verdict, Verdict::Tie);
    assert_eq!(t.verdict.describe(ALPHA), "tie (p > 0.05)");
    // One replicate: no test.
    let u = compare::compare_metric(Metric::Iops, &[1.0], &A, ALPHA).unwrap();
    assert_eq!((u.verdict, u.welch), (Verdict::Untested, None));
    // Several metrics at once, only those both sides have, in Metric::ALL order.
    let ra = Replicates { config_key: "a".into(), values: vec![(Metric::LatMeanNs, C.to_vec()), (Metric::Iops, A.to_vec())] };
    let rb = Replicates {
        config_key: "b".into(),
        values: vec![(Metric::Iops, B.to_vec()), (Metric::LatMeanNs, D.to_vec()), (Metric::JoulesPerIo, vec![1.0, 2.0])],
    };
    let all = compare::compare(&ra, &rb, ALPHA);
    assert_eq!(
        all.iter().map(|m| (m.metric, m.verdict)).collect::<Vec<_>>(),
        vec![(Metric::Iops, Verdict::Slower), (Metric::LatMeanNs, Verdict::Tie)]
    );
}

#[test]
fn ranking_holm_corrects_against_the_best() {
    let a = vec![100.5, 101.0, 99.8, 100.9, 100.2];
    let b = vec![99.9, 100.8, 100.1, 100.6, 99.7];
    let c = vec![95.1, 94.8, 95.9, 95.3, 94.6];
    // stats.ttest_ind(a, b, equal_var=False).pvalue = 0.41830775792578223
    // stats.ttest_ind(a, c, equal_var=False).pvalue = 1.5356963438417604e-07
    // Holm over the two (statsmodels): [0.41830775792578223, 3.071392687683521e-07]
    let r = compare::rank(Metric::Iops, &[("c".into(), c), ("a".into(), a), ("b".into(), b)], ALPHA);
    assert_eq!(r.iter().map(|x| x.config_key.as_str()).collect::<Vec<_>>(), vec!["a", "b", "c"]);
    assert_eq!((r[0].p, r[0].p_holm, r[0].verdict), (None, None, Verdict::Tie));
    assert_close!(r[1].p.unwrap(), 0.41830775792578223, 1e-8);
    assert_close!(r[1].p_holm.unwrap(), 0.41830775792578223, 1e-8);
    assert_eq!(r[1].verdict, Verdict::Tie);
    assert_close!(r[2].p.unwrap(), 1.5356963438417604e-07, 1e-6);
    assert_close!(r[2].p_holm.unwrap(), 3.071392687683521e-07, 1e-6);
    assert_eq!(r[2].verdict, Verdict::Slower);
    assert_close!(r[2].ratio_to_best.unwrap(), 95.14 / 100.48, 1e-12);
    // Lower is better for latency: the same numbers as latencies rank the other way round.
    let l = compare::rank(Metric::LatMeanNs, &[("x".into(), vec![3.0, 3.1, 2.9]), ("y".into(), vec![1.0, 1.1, 0.9])], ALPHA);
    assert_eq!(l[0].config_key, "y");
    assert!(compare::rank(Metric::Iops, &[], ALPHA).is_empty());
}

// ---- from the store ----

/// A minimal run record the store accepts, with the metrics the comparisons read.
fn record(status: &str, iops: f64, lat_mean: f64, p99: f64, cores: f64, joules: Option<f64>) -> Value {
    let mut r = json!({
        "schema_version": 1,
        "status": status,
        "spec": {"interface": "psync", "submit": "default", "complete": "interrupt", "rw": "randread",
                 "write_mix": 0, "bs": 4096, "qd": 1, "threads": 1, "batch_submit": 1, "batch_reap": 1,
                 "direct": true, "targets": []},
        "results": {"window_s": 2.0,
                    "total": {"ios": (iops * 2.0) as u64, "iops": iops, "lat_ns": {"mean": lat_mean, "p99": p99}},
                    "cpu": {"cores": cores}},
    });
    if let Some(j) = joules {
        // As the energy layer reports it: per source and scope, I/Os per joule when covered.
        let ios = iops * 2.0;
        r["energy"] = json!({"status": "measured", "sources": [
            {"scope": "wall_ac", "joules": j * 5.0, "iops_per_joule": ios / (j * 5.0)},
            {"scope": "cpu_package", "joules": j, "iops_per_joule": ios / j}]});
    }
    r
}

#[test]
fn replicate_values_come_from_the_store_by_config_key() {
    let dir = tempfile::Builder::new().prefix("iolab-analysis-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let mut s = Store::open(&dir.path().join("t.db")).unwrap();
    let spec = json!({"interface": "psync"});
    let plan: Vec<(i64, u32, String, Value)> =
        (0..7).map(|i| (i, (i % 4) as u32, if i < 4 { "cfg-a".to_string() } else { "cfg-b".to_string() }, spec.clone())).collect();
    let sweep = s.create_sweep("t", "plan", "hash", 1, &plan).unwrap();
    let planned = s.planned_runs(sweep).unwrap();
    let recs = [
        record("ok", 1000.0, 900.0, 2000.0, 0.5, Some(0.02)),
        record("ok", 1100.0, 850.0, 1900.0, 0.55, Some(0.022)),
        record("failed", 0.0, 0.0, 0.0, 0.0, None),
        record("ok", 1050.0, 870.0, 1950.0, 0.42, None),
        record("ok", 2000.0, 450.0, 1000.0, 0.5, None),
        record("ok", 2100.0, 440.0, 990.0, 0.5, None),
        record("ok", 2050.0, 445.0, 995.0, 0.5, None),
    ];
    for (p, r) in planned.iter().zip(&recs) {
        s.record_run(Some(p.id), r).unwrap();
    }
    // A lone run with no config key is never counted.
    s.record_run(None, &record("ok", 1.0, 1.0, 1.0, 1.0, None)).unwrap();

    // The failed run is left out; values come oldest first.
    assert_eq!(compare::config_values(&s, "cfg-a", Metric::Iops).unwrap(), vec![1000.0, 1100.0, 1050.0]);
    assert_eq!(compare::config_values(&s, "cfg-a", Metric::LatP99Ns).unwrap(), vec![2000.0, 1900.0, 1950.0]);
    // CPU per I/O = cores / IOPS, in ns: 0.5 / 1000 s = 500 000 ns.
    let cpu = compare::config_values(&s, "cfg-a", Metric::CpuNsPerIo).unwrap();
    assert_close!(cpu[0], 500_000.0, 1e-12);
    assert_close!(cpu[2], 0.42 / 1050.0 * 1e9, 1e-12);
    // Joules per I/O (the wall scope, preferred over the package: the studies measured wall
    // power) only where the record has energy: 5 x 0.02 J / 2000 I/Os.
    let j = compare::config_values(&s, "cfg-a", Metric::JoulesPerIo).unwrap();
    assert_eq!(j.len(), 2);
    assert_close!(j[0], 0.02 * 5.0 / 2000.0, 1e-12);
    assert!(compare::config_values(&s, "cfg-b", Metric::JoulesPerIo).unwrap().is_empty());
    assert!(compare::config_values(&s, "nope", Metric::Iops).unwrap().is_empty());
    // Naming a status in the filter overrides the ok-only default.
    let failed = RunFilter { config_key: Some("cfg-a".into()), status: Some("failed".into()), ..Default::default() };
    assert_eq!(compare::metric_values(&s, &failed, Metric::Iops).unwrap(), vec![0.0]);

    let a = compare::config_replicates(&s, "cfg-a").unwrap();
    let b = compare::config_replicates(&s, "cfg-b").unwrap();
    assert_eq!(a.values.iter().map(|(m, _)| *m).collect::<Vec<_>>(), Metric::ALL.to_vec());
    assert!(b.get(Metric::JoulesPerIo).is_none());
    let cmp = compare::compare(&a, &b, ALPHA);
    let iops = cmp.iter().find(|c| c.metric == Metric::Iops).unwrap();
    assert_close!(iops.ratio.unwrap(), 2050.0 / 1050.0, 1e-12);
    assert_eq!(iops.verdict, Verdict::Faster);
    assert_eq!(cmp.iter().find(|c| c.metric == Metric::LatMeanNs).unwrap().verdict, Verdict::Faster);
    assert!(cmp.iter().all(|c| c.metric != Metric::JoulesPerIo));
}

// ---- study reductions: slowdown table and the map's tiles ----

#[test]
fn slowdown_table_against_the_fastest_per_column() {
    use iolab::studies::s1::slowdown_table;
    // Columns: read p50, read p99, write p50, write p99 (µs).
    let rows = vec![
        ("slow".to_string(), vec![Some(20.0), Some(40.0), Some(30.0), Some(60.0)]),
        ("fast".to_string(), vec![Some(10.0), Some(20.0), Some(15.0), Some(30.0)]),
        ("mixed".to_string(), vec![Some(10.0), Some(40.0), None, Some(30.0)]),
        ("empty".to_string(), vec![None, None, None, None]),
    ];
    let t = slowdown_table(&rows);
    let names: Vec<&str> = t.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["fast", "mixed", "slow", "empty"]);
    assert_eq!(t[0].slowdown, Some(1.0));
    // mixed: (10/10 + 40/20 + 30/30) / 3 = 4/3, over the three columns it has.
    assert_close!(t[1].slowdown.unwrap(), 4.0 / 3.0, 1e-12);
    assert_eq!(t[2].slowdown, Some(2.0));
    assert_eq!(t[3].slowdown, None);
}

#[test]
fn percent_slower_than_the_user_space_baseline_per_column() {
    use iolab::studies::s1::percent_slower;
    let spdk = [Some(10.0), Some(20.0), Some(10.0), Some(40.0)];
    // (20 % + 50 % + 0 % + (−25 %)) / 4 = 11.25 %.
    assert_close!(percent_slower(&[Some(12.0), Some(30.0), Some(10.0), Some(30.0)], &spdk).unwrap(), 11.25, 1e-12);
    // Only the columns both have count; none in common is no value.
    assert_close!(percent_slower(&[Some(15.0), None, None, None], &spdk).unwrap(), 50.0, 1e-12);
    assert_eq!(percent_slower(&[None, None, None, None], &spdk), None);
    assert_eq!(percent_slower(&[Some(1.0)], &[Some(0.0)]), None);
}

#[test]
fn a_fallen_back_run_never_stands_for_the_method_it_asked_for() {
    use iolab::studies::s3::realises;
    // pvsync2's RWF_HIPRI on Linux >= 5.18: asked to poll, completed by interrupt.
    assert!(!realises("poll", Some("interrupt"), Some("interrupt"), false));
    assert!(!realises("hybrid", Some("polled"), Some("polled"), true));
    assert!(realises("poll", Some("polled"), Some("polled"), false));
    // Nothing observable (a device without queue interrupts): what the kernel was expected to do.
    assert!(realises("poll", Some("unknown"), Some("polled"), false));
    assert!(!realises("poll", None, Some("interrupt"), false));
    assert!(realises("irq", Some("interrupt"), Some("interrupt"), false));
    assert!(!realises("irq", Some("polled"), Some("interrupt"), false));
}

#[test]
fn tile_winner_margin_and_tie() {
    use iolab::studies::s3::{tile_winner, TileCall};
    // Joules per I/O, lower is better. "poll" is clearly cheaper than "irq": both sds are
    // √(0.02 / 3) = 0.0816, se = √(2 · 0.00667 / 4) = 0.0577, t = 1.0 / 0.0577 = 17.3 on 6 df.
    let clear = vec![
        ("irq".to_string(), vec![2.0, 2.1, 1.9, 2.0]),
        ("poll".to_string(), vec![1.0, 1.1, 0.9, 1.0]),
        ("hybrid".to_string(), vec![3.0, 3.2, 2.8, 3.0]),
    ];
    let w = tile_winner(Metric::JoulesPerIo, &clear, ALPHA).unwrap();
    assert_eq!((w.best.as_str(), w.second.as_deref()), ("poll", Some("irq")));
    assert_close!(w.margin.unwrap(), 1.0, 1e-12); // second / best − 1 = 2.0 / 1.0 − 1
    assert_eq!(w.call, TileCall::Clear);
    assert!(w.welch.unwrap().p < 1e-4);
    // Overlapping replicates C and D: Welch p = 0.556 > 0.05 → tie (scipy values in welch_matches_scipy).
    let tie = vec![("irq".to_string(), C.to_vec()), ("poll".to_string(), D.to_vec())];
    let w = tile_winner(Metric::Iops, &tie, ALPHA).unwrap();
    assert_eq!(w.call, TileCall::Tie);
    assert_eq!(w.best, "irq"); // mean 255.75 > 251.5
    assert_close!(w.margin.unwrap(), 255.75 / 251.5 - 1.0, 1e-12);
    assert_close!(w.welch.unwrap().p, 0.5564074315953828, 1e-8);
    // Student's p (0.365, student_matches_scipy) differs from Welch's and is kept beside it.
    assert_close!(w.student.unwrap().p, 0.3649572884780081, 1e-8);
    // One replicate a side: untested; one method: alone.
    let single = vec![("irq".to_string(), vec![1.0]), ("poll".to_string(), vec![2.0])];
    assert_eq!(tile_winner(Metric::Iops, &single, ALPHA).unwrap().call, TileCall::Untested);
    let alone = vec![("irq".to_string(), vec![1.0, 1.2])];
    let w = tile_winner(Metric::Iops, &alone, ALPHA).unwrap();
    assert_eq!((w.call, w.margin), (TileCall::Alone, None));
    assert!(tile_winner(Metric::Iops, &[], ALPHA).is_none());
}
