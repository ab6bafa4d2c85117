//! Comparing configurations from their replicates: per metric the ratio of means (b / a), a
//! Welch t-test, and a verdict; with more than two configurations a ranking against the best
//! with Holm-corrected p-values. The comparisons are pure functions on `&[f64]`; the helpers at
//! the end pull a metric's replicate values for one `config_key` out of a [`Store`].
//! Methods: docs/statistics.md.
use super::stats::{self, Summary, TTest};
use crate::record::read::{Energy, Record};
use crate::store::{RunFilter, RunRow, Store};
use serde::Serialize;

/// The significance level of the verdicts.
pub const ALPHA: f64 = 0.05;

/// What is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// I/Os per second over the measured window (higher is better).
    Iops,
    /// Mean completion latency, ns.
    LatMeanNs,
    /// 99th-percentile completion latency, ns.
    LatP99Ns,
    /// CPU time of iolab's threads per I/O, ns: `cpu_cores` / `iops` × 10⁹.
    CpuNsPerIo,
    /// Energy per I/O over the measured window, joules, when the record has an energy reading
    /// (see [`Metric::of_record`]).
    JoulesPerIo,
    /// I/Os per joule of the drive (`runs.ssd_iops_per_joule`, the record's `energy.efficiency`;
    /// higher is better).
    SsdIopsPerJoule,
    /// I/Os per joule of the CPU package (`runs.cpu_iops_per_joule`).
    CpuIopsPerJoule,
    /// I/Os per joule of the whole system (`runs.system_iops_per_joule`).
    SystemIopsPerJoule,
    /// Bytes per joule of each component (`runs.<component>_bytes_per_joule`).
    SsdBytesPerJoule,
    CpuBytesPerJoule,
    SystemBytesPerJoule,
    /// I/Os per joule above idle (`runs.<component>_iops_per_dynamic_joule`: with an idle
    /// baseline measured by the same source).
    SsdIopsPerDynamicJoule,
    CpuIopsPerDynamicJoule,
    SystemIopsPerDynamicJoule,
    /// Bytes per joule above idle (`runs.<component>_bytes_per_dynamic_joule`).
    SsdBytesPerDynamicJoule,
    CpuBytesPerDynamicJoule,
    SystemBytesPerDynamicJoule,
    /// A file-set run's median per-file latency, open to close (`runs.file_lat_p50_ns`).
    FileLatP50Ns,
    /// Its 99th-percentile per-file latency (`runs.file_lat_p99_ns`).
    FileLatP99Ns,
}

/// Which scope of an energy report counts, in order of preference. Scopes overlap and are never
/// added. Whole-system power comes first: the energy studies (S1 and S3) measured wall power with a
/// plug-in logger, and it is what the machine draws; a BMC's system reading sees the same box from
/// inside. Where no whole-system source covered the run, RAPL stands in (the platform, then the
/// CPU package), and every figure says which scope it used ([`scope_label`]).
pub const ENERGY_SCOPES: [&str; 6] = ["wall_ac", "bmc_system", "platform", "cpu_package", "dram", "gpu"];

/// The scopes that measure the whole machine (what the studies measured).
pub const WHOLE_SYSTEM_SCOPES: [&str; 2] = ["wall_ac", "bmc_system"];

/// The scope of a bare `{"joules": J}` (a record from before per-source reports).
pub const UNKNOWN_SCOPE: &str = "unknown";

/// What a scope measures, for the report and `compare`.
pub(crate) fn scope_label(scope: &str) -> &'static str {
    match scope {
        "wall_ac" => "wall power (meter)",
        "bmc_system" => "system power (BMC)",
        "platform" => "platform (RAPL psys)",
        "cpu_package" => "CPU package (RAPL)",
        "dram" => "DRAM (RAPL)",
        "gpu" => "GPU",
        _ => "unknown scope",
    }
}

/// Joules per I/O and the scope it was measured in, from a run record (see [`joules_per_io`]).
pub fn joules_per_io_with_scope(rec: &Record) -> Option<(f64, &'static str)> {
    joules_per_io(rec.energy.as_ref()?, rec.results.total.ios).filter(|(j, _)| j.is_finite())
}

/// Joules per I/O from an energy report: the first scope of [`ENERGY_SCOPES`] with a source that
/// has `iops_per_joule` (which the energy layer sets only when the source covered enough of the
/// window) gives 1 / iops_per_joule; a bare `joules` gives joules / `ios`, scope unknown.
fn joules_per_io(energy: &Energy, ios: Option<u64>) -> Option<(f64, &'static str)> {
    if let Some(sources) = &energy.sources {
        return ENERGY_SCOPES.iter().find_map(|scope| {
            sources
                .iter()
                .filter(|s| s.scope.as_deref() == Some(scope))
                .find_map(|s| s.iops_per_joule.filter(|&x| x > 0.0))
                .map(|ipj| (1.0 / ipj, *scope))
        });
    }
    Some((energy.joules? / ios.filter(|&n| n > 0)? as f64, UNKNOWN_SCOPE))
}

/// CPU time of iolab's threads per I/O, ns, from the cores it kept busy and its IOPS.
fn cpu_ns_per_io(cores: Option<f64>, iops: Option<f64>) -> Option<f64> {
    match (cores, iops) {
        (Some(c), Some(i)) if i > 0.0 => Some(c / i * 1e9),
        _ => None,
    }
}

impl Metric {
    /// The performance and cost metrics.
    pub const ALL: [Metric; 5] = [Metric::Iops, Metric::LatMeanNs, Metric::LatP99Ns, Metric::CpuNsPerIo, Metric::JoulesPerIo];

    /// The energy efficiencies the store keeps per component (schema version 7), compared after
    /// `ALL` where both sides have them: I/Os, then bytes, per joule, then the same above idle,
    /// each for the drive, the CPU and the whole system.
    pub const EFFICIENCY: [Metric; 12] = [
        Metric::SsdIopsPerJoule,
        Metric::CpuIopsPerJoule,
        Metric::SystemIopsPerJoule,
        Metric::SsdBytesPerJoule,
        Metric::CpuBytesPerJoule,
        Metric::SystemBytesPerJoule,
        Metric::SsdIopsPerDynamicJoule,
        Metric::CpuIopsPerDynamicJoule,
        Metric::SystemIopsPerDynamicJoule,
        Metric::SsdBytesPerDynamicJoule,
        Metric::CpuBytesPerDynamicJoule,
        Metric::SystemBytesPerDynamicJoule,
    ];

    /// A file-set run's per-file latencies (schema version 8), compared last where both sides
    /// have them.
    pub const FILESET: [Metric; 2] = [Metric::FileLatP50Ns, Metric::FileLatP99Ns];

    /// Every metric `compare` compares: `ALL`, then `EFFICIENCY`, then `FILESET`.
    pub fn compared() -> impl Iterator<Item = Metric> {
        Metric::ALL.into_iter().chain(Metric::EFFICIENCY).chain(Metric::FILESET)
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::Iops => "iops",
            Metric::LatMeanNs => "lat_mean_ns",
            Metric::LatP99Ns => "lat_p99_ns",
            Metric::CpuNsPerIo => "cpu_ns_per_io",
            Metric::JoulesPerIo => "joules_per_io",
            Metric::SsdIopsPerJoule => "ssd_iops_per_joule",
            Metric::CpuIopsPerJoule => "cpu_iops_per_joule",
            Metric::SystemIopsPerJoule => "system_iops_per_joule",
            Metric::SsdBytesPerJoule => "ssd_bytes_per_joule",
            Metric::CpuBytesPerJoule => "cpu_bytes_per_joule",
            Metric::SystemBytesPerJoule => "system_bytes_per_joule",
            Metric::SsdIopsPerDynamicJoule => "ssd_iops_per_dynamic_joule",
            Metric::CpuIopsPerDynamicJoule => "cpu_iops_per_dynamic_joule",
            Metric::SystemIopsPerDynamicJoule => "system_iops_per_dynamic_joule",
            Metric::SsdBytesPerDynamicJoule => "ssd_bytes_per_dynamic_joule",
            Metric::CpuBytesPerDynamicJoule => "cpu_bytes_per_dynamic_joule",
            Metric::SystemBytesPerDynamicJoule => "system_bytes_per_dynamic_joule",
            Metric::FileLatP50Ns => "file_lat_p50_ns",
            Metric::FileLatP99Ns => "file_lat_p99_ns",
        }
    }

    /// An efficiency's value among a run's metric columns (None for the other metrics).
    fn efficiency(self, m: &crate::store::columns::Metrics) -> Option<f64> {
        match self {
            Metric::SsdIopsPerJoule => m.ssd_iops_per_joule,
            Metric::CpuIopsPerJoule => m.cpu_iops_per_joule,
            Metric::SystemIopsPerJoule => m.system_iops_per_joule,
            Metric::SsdBytesPerJoule => m.ssd_bytes_per_joule,
            Metric::CpuBytesPerJoule => m.cpu_bytes_per_joule,
            Metric::SystemBytesPerJoule => m.system_bytes_per_joule,
            Metric::SsdIopsPerDynamicJoule => m.ssd_iops_per_dynamic_joule,
            Metric::CpuIopsPerDynamicJoule => m.cpu_iops_per_dynamic_joule,
            Metric::SystemIopsPerDynamicJoule => m.system_iops_per_dynamic_joule,
            Metric::SsdBytesPerDynamicJoule => m.ssd_bytes_per_dynamic_joule,
            Metric::CpuBytesPerDynamicJoule => m.cpu_bytes_per_dynamic_joule,
            Metric::SystemBytesPerDynamicJoule => m.system_bytes_per_dynamic_joule,
            Metric::Iops
            | Metric::LatMeanNs
            | Metric::LatP99Ns
            | Metric::CpuNsPerIo
            | Metric::JoulesPerIo
            | Metric::FileLatP50Ns
            | Metric::FileLatP99Ns => None,
        }
    }

    /// One of [`Metric::EFFICIENCY`].
    pub(crate) fn is_efficiency(self) -> bool {
        Metric::EFFICIENCY.contains(&self)
    }

    /// Bytes rather than I/Os per joule.
    pub(crate) fn is_bytes_per_joule(self) -> bool {
        self.is_efficiency() && self.name().contains("_bytes_per_")
    }

    /// True for throughput and I/Os per joule; false for latencies and costs, where lower is
    /// better.
    pub(crate) fn higher_is_better(self) -> bool {
        self == Metric::Iops || self.is_efficiency()
    }

    /// The metric's value in a stored run's row; None when the run did not measure it (and
    /// always for [`Metric::JoulesPerIo`], which lives in the record: see [`Metric::of_record`]).
    pub(crate) fn of_row(self, r: &RunRow) -> Option<f64> {
        let v = match self {
            Metric::Iops => r.metrics.iops,
            Metric::LatMeanNs => r.metrics.lat_mean_ns,
            Metric::LatP99Ns => r.metrics.lat_p99_ns,
            Metric::CpuNsPerIo => cpu_ns_per_io(r.metrics.cpu_cores, r.metrics.iops),
            Metric::JoulesPerIo => None,
            Metric::FileLatP50Ns => r.metrics.file_lat_p50_ns,
            Metric::FileLatP99Ns => r.metrics.file_lat_p99_ns,
            m => m.efficiency(&r.metrics),
        };
        v.filter(|x| x.is_finite())
    }

    /// The metric's value in a run record. For [`Metric::JoulesPerIo`]: of the energy report's
    /// sources the first scope of [`ENERGY_SCOPES`] with an `iops_per_joule` gives
    /// 1 / iops_per_joule; a bare `{"joules": J}` gives J / `results.total.ios`. None when there
    /// is no usable reading.
    pub(crate) fn of_record(self, rec: &Record) -> Option<f64> {
        let total = &rec.results.total;
        let v = match self {
            Metric::Iops => total.iops,
            Metric::LatMeanNs => total.lat_ns.mean,
            Metric::LatP99Ns => total.lat_ns.p99,
            Metric::CpuNsPerIo => cpu_ns_per_io(rec.results.cpu.cores, total.iops),
            Metric::JoulesPerIo => joules_per_io(rec.energy.as_ref()?, total.ios).map(|(j, _)| j),
            Metric::FileLatP50Ns => rec.fileset.measured.file_lat_ns.p50,
            Metric::FileLatP99Ns => rec.fileset.measured.file_lat_ns.p99,
            m => m.efficiency(&crate::store::columns::Metrics::of(rec)),
        };
        v.filter(|x| x.is_finite())
    }
}

/// How configuration b stands against a in one metric. "Faster" means better in the metric's
/// direction (more IOPS or I/Os per joule; less latency, CPU or energy per I/O).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    /// No significant difference (p > α).
    Tie,
    /// Not testable: fewer than two replicates on a side.
    Untested,
}

impl Verdict {
    pub fn describe(self, alpha: f64) -> String {
        match self {
            Verdict::Faster => "faster".into(),
            Verdict::Slower => "slower".into(),
            Verdict::Tie => format!("tie (p > {alpha})"),
            Verdict::Untested => "untested (n < 2)".into(),
        }
    }
}

/// The verdict for b against a from a p-value and the difference of means (b − a).
pub fn verdict(metric: Metric, p: Option<f64>, b_minus_a: f64, alpha: f64) -> Verdict {
    match p {
        None => Verdict::Untested,
        Some(p) if p > alpha || b_minus_a == 0.0 => Verdict::Tie,
        Some(_) => {
            if (b_minus_a > 0.0) == metric.higher_is_better() {
                Verdict::Faster
            } else {
                Verdict::Slower
            }
        }
    }
}

/// One metric compared between configurations a and b.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricComparison {
    pub metric: Metric,
    pub a: Summary,
    pub b: Summary,
    /// mean(b) / mean(a); None when mean(a) is 0.
    pub ratio: Option<f64>,
    /// Welch's test of a against b (t > 0 when a's mean is the larger); None when n < 2 on a side.
    pub welch: Option<TTest>,
    /// b against a.
    pub verdict: Verdict,
}

/// Compare one metric's replicates of a and b. None when either side is empty or non-finite.
pub fn compare_metric(metric: Metric, a: &[f64], b: &[f64], alpha: f64) -> Option<MetricComparison> {
    let sa = stats::summarize(a)?;
    let sb = stats::summarize(b)?;
    let welch = stats::welch_t_test(a, b);
    let ratio = if sa.mean != 0.0 { Some(sb.mean / sa.mean) } else { None };
    let v = verdict(metric, welch.map(|t| t.p), sb.mean - sa.mean, alpha);
    Some(MetricComparison { metric, a: sa, b: sb, ratio, welch, verdict: v })
}

/// A configuration's replicate values, per metric (a metric it lacks is simply absent).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Replicates {
    pub config_key: String,
    pub values: Vec<(Metric, Vec<f64>)>,
}

impl Replicates {
    pub fn get(&self, m: Metric) -> Option<&[f64]> {
        self.values.iter().find(|(k, _)| *k == m).map(|(_, v)| v.as_slice())
    }
}

/// Compare every metric both configurations have, in [`Metric::compared`] order.
pub fn compare(a: &Replicates, b: &Replicates, alpha: f64) -> Vec<MetricComparison> {
    Metric::compared()
        .filter_map(|m| match (a.get(m), b.get(m)) {
            (Some(x), Some(y)) => compare_metric(m, x, y, alpha),
            _ => None,
        })
        .collect()
}

/// One configuration's place in a ranking.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ranked {
    pub config_key: String,
    pub summary: Summary,
    /// mean / the best's mean.
    pub ratio_to_best: Option<f64>,
    /// Welch p-value against the best, unadjusted; None for the best itself or when untestable.
    pub p: Option<f64>,
    /// Holm-adjusted over the k − 1 comparisons with the best.
    pub p_holm: Option<f64>,
    /// This configuration against the best: Slower when the adjusted p ≤ α, otherwise Tie
    /// (Untested when n < 2); the best itself is Tie.
    pub verdict: Verdict,
}

/// Rank configurations by the mean of one metric, best first (ties in the mean keep input order),
/// and test every other against the best with Welch's test, Holm-correcting the k − 1 p-values.
/// Configurations with no usable values are left out.
pub fn rank(metric: Metric, configs: &[(String, Vec<f64>)], alpha: f64) -> Vec<Ranked> {
    let mut s: Vec<(&String, &Vec<f64>, Summary)> = configs.iter().filter_map(|(k, v)| stats::summarize(v).map(|s| (k, v, s))).collect();
    s.sort_by(|x, y| {
        let o = x.2.mean.total_cmp(&y.2.mean);
        if metric.higher_is_better() {
            o.reverse()
        } else {
            o
        }
    });
    let Some((_, best_values, best)) = s.first().map(|(k, v, s)| (*k, *v, s.clone())) else {
        return Vec::new();
    };
    let tests: Vec<Option<TTest>> = s.iter().skip(1).map(|(_, v, _)| stats::welch_t_test(best_values, v)).collect();
    // Holm over the testable comparisons only.
    let testable: Vec<f64> = tests.iter().flatten().map(|t| t.p).collect();
    let mut adjusted = stats::holm(&testable).into_iter();
    let mut out = Vec::with_capacity(s.len());
    for (i, (k, _, sum)) in s.iter().enumerate() {
        let ratio_to_best = if best.mean != 0.0 { Some(sum.mean / best.mean) } else { None };
        let (p, p_holm, v) = if i == 0 {
            (None, None, Verdict::Tie)
        } else {
            match tests[i - 1] {
                None => (None, None, Verdict::Untested),
                Some(t) => {
                    let adj = adjusted.next();
                    (Some(t.p), adj, verdict(metric, adj, sum.mean - best.mean, alpha))
                }
            }
        };
        out.push(Ranked { config_key: (*k).clone(), summary: sum.clone(), ratio_to_best, p, p_holm, verdict: v });
    }
    out
}

/// A metric's values over the runs a filter selects, oldest first, skipping runs that did not
/// measure it. Only runs whose status is `ok` count unless the filter names another status.
pub fn metric_values(store: &Store, filter: &RunFilter, metric: Metric) -> Result<Vec<f64>, crate::store::StoreError> {
    let mut f = filter.clone();
    if f.status.is_none() {
        f.status = Some("ok".into());
    }
    let rows = store.list_runs(&f)?;
    let mut out = Vec::with_capacity(rows.len());
    for r in &rows {
        let v = match metric {
            Metric::JoulesPerIo => store.run_record(r.id)?.and_then(|rec| metric.of_record(&Record::of(&rec))),
            m => m.of_row(r),
        };
        out.extend(v);
    }
    Ok(out)
}

/// The replicate values of one metric for one configuration (`config_key`), from its `ok` runs.
pub fn config_values(store: &Store, config_key: &str, metric: Metric) -> Result<Vec<f64>, crate::store::StoreError> {
    metric_values(store, &RunFilter { config_key: Some(config_key.to_string()), ..Default::default() }, metric)
}

/// Every metric a configuration has at least one value of, in [`Metric::compared`] order.
pub fn config_replicates(store: &Store, config_key: &str) -> Result<Replicates, crate::store::StoreError> {
    replicates_where(store, &RunFilter { config_key: Some(config_key.to_string()), ..Default::default() })
}

/// Every metric the runs a filter selects have at least one value of (e.g. one configuration's
/// runs on one host), in [`Metric::compared`] order.
pub(crate) fn replicates_where(store: &Store, filter: &RunFilter) -> Result<Replicates, crate::store::StoreError> {
    let mut values = Vec::new();
    for m in Metric::compared() {
        let v = metric_values(store, filter, m)?;
        if !v.is_empty() {
            values.push((m, v));
        }
    }
    Ok(Replicates { config_key: filter.config_key.clone().unwrap_or_default(), values })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the store and analysis compute from a record as the session writes it.
    #[test]
    fn metrics_of_a_written_record() {
        let r = crate::record::read::Record::of(&serde_json::to_value(crate::record::read::tests::written()).unwrap());
        let m = crate::store::columns::Metrics::of(&r);
        assert_eq!((m.iops, m.completion_observed.as_deref(), m.busy_cores), (Some(1000.0), Some("polled"), Some(0.5)));
        assert_eq!(Metric::JoulesPerIo.of_record(&r), Some(0.01));
    }

    /// The efficiencies the store keeps are compared as metrics, higher being better, read alike
    /// from a row and from a record.
    #[test]
    fn efficiency_is_a_metric_read_from_the_row_and_the_record() {
        let rec = Record::of(&serde_json::json!({"energy": {"efficiency": [
            {"component": "ssd", "iops_per_joule": 900.0}, {"component": "system", "iops_per_joule": 30.0}]}}));
        assert_eq!(Metric::SsdIopsPerJoule.of_record(&rec), Some(900.0));
        assert_eq!(Metric::SystemIopsPerJoule.of_record(&rec), Some(30.0));
        assert_eq!(Metric::CpuIopsPerJoule.of_record(&rec), None);
        assert_eq!(verdict(Metric::SsdIopsPerJoule, Some(0.01), 5.0, ALPHA), Verdict::Faster);
        let a = Replicates { config_key: "a".into(), values: vec![(Metric::SystemIopsPerJoule, vec![10.0, 11.0, 10.5])] };
        let b = Replicates { config_key: "b".into(), values: vec![(Metric::SystemIopsPerJoule, vec![20.0, 21.0, 20.5])] };
        let c = compare(&a, &b, ALPHA);
        assert_eq!((c.len(), c[0].metric, c[0].verdict), (1, Metric::SystemIopsPerJoule, Verdict::Faster));
    }

    #[test]
    fn verdict_follows_the_metric_direction() {
        assert_eq!(verdict(Metric::Iops, Some(0.01), 5.0, ALPHA), Verdict::Faster);
        assert_eq!(verdict(Metric::LatP99Ns, Some(0.01), 5.0, ALPHA), Verdict::Slower);
        assert_eq!(verdict(Metric::JoulesPerIo, Some(0.01), -1.0, ALPHA), Verdict::Faster);
        assert_eq!(verdict(Metric::Iops, Some(0.2), 5.0, ALPHA), Verdict::Tie);
        assert_eq!(verdict(Metric::Iops, None, 5.0, ALPHA), Verdict::Untested);
    }

    #[test]
    fn energy_per_io_from_the_record() {
        let of = |v: serde_json::Value| Record::of(&v);
        let rec = of(serde_json::json!({"results": {"total": {"ios": 1000, "iops": 500.0}, "cpu": {"cores": 0.25}},
                                        "energy": {"joules": 3.0}}));
        assert_eq!(Metric::JoulesPerIo.of_record(&rec), Some(0.003));
        assert_eq!(Metric::CpuNsPerIo.of_record(&rec), Some(0.25 / 500.0 * 1e9));
        assert_eq!(Metric::JoulesPerIo.of_record(&of(serde_json::json!({"results": {}}))), None);
        // An energy report: the wall wins over the package (the studies measured wall power); a
        // source without a ratio (too little coverage) is passed over.
        let rep = of(serde_json::json!({"results": {"total": {"ios": 1000}}, "energy": {"status": "measured", "sources": [
            {"scope": "wall_ac", "joules": 50.0, "iops_per_joule": 20.0},
            {"scope": "cpu_package", "joules": 9.0},
            {"scope": "cpu_package", "joules": 10.0, "iops_per_joule": 100.0}]}}));
        assert_eq!(Metric::JoulesPerIo.of_record(&rep), Some(0.05));
        assert_eq!(joules_per_io_with_scope(&rep), Some((0.05, "wall_ac")));
        assert_eq!(joules_per_io_with_scope(&rec), Some((0.003, UNKNOWN_SCOPE)));
        let none = of(serde_json::json!({"energy": {"status": "unavailable", "sources": []}}));
        assert_eq!(Metric::JoulesPerIo.of_record(&none), None);
    }

    /// The scope preference on hand-made records: each whole-system source beats RAPL; a wall
    /// meter that did not cover the window (no ratio) hands over to the next scope.
    #[test]
    fn whole_system_scopes_come_first_and_rapl_stands_in() {
        let of = |sources: serde_json::Value| {
            Record::of(&serde_json::json!({"results": {"total": {"ios": 1000}}, "energy": {"status": "measured", "sources": sources}}))
        };
        let src = |scope: &str, ipj: Option<f64>| serde_json::json!({"scope": scope, "joules": 1.0, "iops_per_joule": ipj});
        let cases = [
            (vec![src("cpu_package", Some(100.0)), src("bmc_system", Some(10.0))], (0.1, "bmc_system")),
            (vec![src("bmc_system", Some(10.0)), src("wall_ac", Some(4.0))], (0.25, "wall_ac")),
            (vec![src("wall_ac", None), src("cpu_package", Some(100.0)), src("dram", Some(1000.0))], (0.01, "cpu_package")),
            (vec![src("cpu_package", Some(100.0)), src("platform", Some(50.0))], (0.02, "platform")),
            (vec![src("dram", Some(1000.0))], (0.001, "dram")),
        ];
        for (sources, want) in cases {
            assert_eq!(joules_per_io_with_scope(&of(serde_json::Value::Array(sources.clone()))), Some(want), "{sources:?}");
        }
        assert_eq!(joules_per_io_with_scope(&of(serde_json::json!([src("wall_ac", None)]))), None);
        assert_eq!(scope_label("wall_ac"), "wall power (meter)");
        assert!(WHOLE_SYSTEM_SCOPES.iter().all(|s| ENERGY_SCOPES[..2].contains(s)));
    }
}
