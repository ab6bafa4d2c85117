//! The building blocks of a section's panels: cells with replicate statistics, charts of one
//! measured quantity against a spec column, and the reasons a panel has no data here.
use super::ctx::Ctx;
use super::data::{Config, Run};
use super::svg::{self, Axis, Callout, Chart, Point, Scale, Series};
use crate::analysis::stats::{self, Summary};
use crate::plan::size::format_bytes;
use crate::store::RunRow;

pub(crate) fn runs_of<'a>(configs: &[&'a Config]) -> Vec<&'a Run> {
    configs.iter().flat_map(|c| c.runs.iter()).collect()
}

/// Distinct values in first-seen order, then sorted.
pub fn distinct<T: Ord + Clone>(configs: &[&Config], f: impl Fn(&RunRow) -> T) -> Vec<T> {
    let mut v: Vec<T> = configs.iter().map(|c| f(c.first())).collect();
    v.sort();
    v.dedup();
    v
}

/// Three significant digits, no exponent for everyday magnitudes; a whole number as an integer
/// (a queue depth of 16 is "16", never "16.0").
pub(crate) fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    if x == x.trunc() && x.abs() < 1e15 {
        return format!("{x:.0}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).clamp(0, 6) as usize;
    format!("{x:.digits$}")
}

pub(crate) fn mean_ci(s: &Summary) -> String {
    match s.ci95_half_width {
        Some(h) => format!("{} ± {}", num(s.mean), num(h)),
        None => num(s.mean),
    }
}

pub fn cell(c: &Config, f: &dyn Fn(&Run) -> Option<f64>) -> String {
    c.summary(f).map(|s| mean_ci(&s)).unwrap_or_else(|| "not measured".into())
}

/// A figure read from one part of a run record, e.g. `|l: &Latency| l.p99`.
pub type Figure<T> = fn(&T) -> Option<f64>;

/// A latency from the record (ns) in µs.
pub fn us(ns: Option<f64>) -> Option<f64> {
    ns.map(|ns| ns / 1e3)
}

pub fn iops(r: &Run) -> Option<f64> {
    r.row.metrics.iops
}

pub fn lat_mean_us(r: &Run) -> Option<f64> {
    r.row.metrics.lat_mean_ns.map(|x| x / 1e3)
}

pub fn cores(r: &Run) -> Option<f64> {
    r.row.metrics.cpu_cores
}

/// A block size as a reader says it: 4 KiB, 1 MiB.
pub(crate) fn bs_name(bs: u64) -> String {
    format_bytes(bs as f64).replace(".0 ", " ")
}

/// Each configuration's name in a panel that shows several (a bar, a row): the parts of its
/// whole configuration (interface, submission, completion, queue depth, block size, pattern,
/// threads, device and machine) that differ between them, and where two would still read the
/// same, the other parts of their keys that tell them apart. Never two the same for two
/// configurations; one alone is named by its design point and queue depth.
pub(crate) fn labels(configs: &[&Config]) -> Vec<String> {
    type Part = fn(&Config) -> String;
    let interface: Part = |c| if crate::interfaces::user_space(&c.first().interface) { c.method() } else { c.first().interface.clone() };
    let fields: [Part; 8] = [
        interface,
        |c| if c.first().submit == "syscall" { String::new() } else { c.first().submit.clone() },
        |c| c.first().complete.clone(),
        |c| format!("QD{}", c.first().qd),
        |c| bs_name(c.first().bs),
        |c| c.first().rw.clone(),
        |c| format!("{} threads", c.first().threads),
        |c| c.overlay().map(|o| format!("· {o}")).unwrap_or_default(),
    ];
    let varies = |f: &Part| configs.iter().any(|c| f(c) != f(configs[0]));
    let mut shown: Vec<usize> = (0..fields.len()).filter(|&i| varies(&fields[i])).collect();
    if shown.is_empty() {
        shown = vec![0, 1, 2, 3];
    } else if shown.iter().any(|&i| i == 1 || i == 2) && !shown.contains(&0) {
        // "sqpoll poll" alone does not say which interface.
        shown.insert(0, 0);
    }
    let mut out: Vec<String> =
        configs.iter().map(|c| shown.iter().map(|&i| fields[i](c)).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" ")).collect();
    // Key parts none of the fields above show (batching, NUMA, scheduler …).
    let keys: Vec<Vec<&str>> = configs.iter().map(|c| c.key.split(',').collect()).collect();
    for i in 0..out.len() {
        let same: Vec<usize> = (0..out.len()).filter(|&j| j != i && out[j] == out[i]).collect();
        if same.is_empty() {
            continue;
        }
        let own: Vec<&str> = keys[i].iter().filter(|kv| same.iter().any(|&j| !keys[j].contains(kv))).copied().collect();
        if !own.is_empty() {
            out[i] = format!("{} ({})", out[i], own.join(", "));
        }
    }
    out
}

/// The completion paths a configuration's runs took, with any fallback.
pub(crate) fn paths_taken(c: &Config) -> String {
    let mut paths: Vec<String> = c
        .runs
        .iter()
        .map(|r| {
            r.row.metrics.completion_observed.clone().unwrap_or("not observed".into())
                + if r.fell_back() { " (polling fell back)" } else { "" }
        })
        .collect();
    paths.sort();
    paths.dedup();
    paths.join(", ")
}

/// How each run's kernel carried out the requested completion (`completion_path.mechanism`, e.g.
/// "RWF_HIPRI: ignored since Linux 5.18, completes by interrupt"): the same method names a
/// different mechanism on different kernels, so a row says which one it measured.
pub fn mechanisms(c: &Config) -> String {
    let mut all: Vec<String> = c.runs.iter().map(|r| r.record.completion_path.mechanism.clone().unwrap_or("not recorded".into())).collect();
    all.sort();
    all.dedup();
    all.join("; ")
}

/// A chart of one measured quantity against a spec column, one series per group of configs.
pub struct Plot<'f> {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub x_of: &'f dyn Fn(&RunRow) -> f64,
    pub y_of: &'f dyn Fn(&Run) -> Option<f64>,
    pub series_of: &'f dyn Fn(&Config) -> String,
}

pub fn point(c: &Config, x: f64, series: &str, x_label: &str, y_label: &str, y_of: &dyn Fn(&Run) -> Option<f64>) -> Option<Point> {
    let s = c.summary(y_of)?;
    let mut tip = format!("{series} · {x_label} {} · {y_label} {} (n = {}", num(x), mean_ci(&s), s.n);
    if let Some(sd) = s.sd {
        tip += &format!(", sd {}", num(sd));
    }
    tip += ")";
    if !s.outliers.is_empty() {
        tip += &format!(
            " · MAD outlier replicate(s): {}",
            s.outliers.iter().map(|i| format!("run {}", c.runs[*i].row.id)).collect::<Vec<_>>().join(", ")
        );
    }
    if c.any_fell_back() {
        tip += " · polling fell back to interrupts";
    }
    Some(Point { x, y: s.mean, ci: s.ci95_half_width, tip, flagged: !s.outliers.is_empty() || c.any_fell_back() })
}

/// A point whose y is the geometric mean of the replicates (FPL'18's average over its 15
/// iterations): no confidence interval is drawn, the tooltip gives the geometric standard deviation.
pub(crate) fn geometric_point(
    c: &Config,
    x: f64,
    series: &str,
    x_label: &str,
    y_label: &str,
    y_of: &dyn Fn(&Run) -> Option<f64>,
) -> Option<Point> {
    let values = c.values(y_of);
    let y = stats::geometric_mean(&values)?;
    let mut tip = format!("{series} · {x_label} {} · {y_label} {} (geometric mean of n = {}", num(x), num(y), values.len());
    if let Some(g) = stats::geometric_sd(&values) {
        tip += &format!(", geometric sd ×{}", num(g));
    }
    tip += ")";
    if c.any_fell_back() {
        tip += " · polling fell back to interrupts";
    }
    Some(Point { x, y, ci: None, tip, flagged: c.any_fell_back() })
}

/// A table cell with the geometric mean of the replicates and, over two or more, the geometric
/// standard deviation.
pub(crate) fn geometric_cell(c: &Config, f: &dyn Fn(&Run) -> Option<f64>) -> String {
    let values = c.values(f);
    match (stats::geometric_mean(&values), stats::geometric_sd(&values)) {
        (Some(m), Some(g)) => format!("{} (×{} gsd)", num(m), num(g)),
        (Some(m), None) => num(m),
        _ => "not measured".into(),
    }
}

/// How a point is made of a configuration's replicates: [`point`] or [`geometric_point`].
type PointOf = fn(&Config, f64, &str, &str, &str, &dyn Fn(&Run) -> Option<f64>) -> Option<Point>;

pub(crate) fn plot(ctx: &mut Ctx, configs: &[&Config], p: Plot, notes: Vec<String>) {
    plot_with(ctx, configs, p, notes, Vec::new());
}

pub(crate) fn plot_with(ctx: &mut Ctx, configs: &[&Config], p: Plot, notes: Vec<String>, callouts: Vec<Callout>) {
    let x_of = |c: &Config| Some((p.x_of)(c.first()));
    let by = PlotBy { title: p.title, x: p.x, y: p.y, x_of: &x_of, y_of: p.y_of, series_of: p.series_of };
    plot_by(ctx, configs, by, notes, callouts);
}

/// [`plot`] with each point the geometric mean of its replicates.
pub(crate) fn plot_geometric(ctx: &mut Ctx, configs: &[&Config], p: Plot, notes: Vec<String>) {
    let x_of = |c: &Config| Some((p.x_of)(c.first()));
    let by = PlotBy { title: p.title, x: p.x, y: p.y, x_of: &x_of, y_of: p.y_of, series_of: p.series_of };
    plot_points(ctx, configs, by, notes, Vec::new(), geometric_point);
}

/// A [`Plot`] whose x is read from the configuration (e.g. a dimension of its key); a
/// configuration without an x is left out.
pub struct PlotBy<'f> {
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub x_of: &'f dyn Fn(&Config) -> Option<f64>,
    pub y_of: &'f dyn Fn(&Run) -> Option<f64>,
    pub series_of: &'f dyn Fn(&Config) -> String,
}

pub(crate) fn plot_by(ctx: &mut Ctx, configs: &[&Config], p: PlotBy, notes: Vec<String>, callouts: Vec<Callout>) {
    plot_points(ctx, configs, p, notes, callouts, point);
}

fn plot_points(ctx: &mut Ctx, configs: &[&Config], p: PlotBy, notes: Vec<String>, callouts: Vec<Callout>, point: PointOf) {
    let mut series: Vec<Series> = Vec::new();
    let mut used: Vec<&Run> = Vec::new();
    for c in configs {
        // Devices and machines overlaid: each its own line, named in the legend.
        let name = c.series(&(p.series_of)(c));
        let Some(x) = (p.x_of)(c) else { continue };
        let Some(pt) = point(c, x, &name, &p.x.label, &p.y.label, p.y_of) else { continue };
        used.extend(c.runs.iter());
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push(pt),
            None => series.push(Series { name, points: vec![pt] }),
        }
    }
    if series.is_empty() {
        let reason = format!("no run here measured {}", p.y.label);
        ctx.unavailable(&p.title, &reason, &runs_of(configs));
        return;
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.x.total_cmp(&b.x));
    }
    // By name: sibling figures of the same series (randread, randwrite …) colour each alike.
    series.sort_by(|a, b| a.name.cmp(&b.name));
    let mut notes = notes;
    if let Some(o) = overlaid(configs) {
        notes.push(o);
    }
    // One x for every series: a line has nothing to join, so each series is a bar.
    let xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.x)).collect();
    if xs.iter().all(|x| *x == xs[0]) && series.iter().all(|s| s.points.len() == 1) {
        let bars = series.iter().map(|s| (s.name.clone(), vec![(p.y.label.clone(), s.points[0].y)])).collect();
        notes.push(format!("Every bar is at {} {}: one value per series, so bars rather than lines.", p.x.label, num(xs[0])));
        let svg = svg::stacked_bars(&svg::StackedBars { title: p.title.clone(), y_label: p.y.label.clone(), bars });
        ctx.figure(&p.title, svg, &used, notes);
        return;
    }
    let svg = svg::chart(&Chart { title: p.title.clone(), x: p.x, y: p.y, series, callouts, lines: true });
    ctx.figure(&p.title, svg, &used, notes);
}

/// The configurations apart by their device and machine, for what cannot overlay them (a map, a
/// table against a baseline): (" on nvme0n1 · node-b", or "" where nothing is overlaid; its
/// configurations), in the overlays' order.
pub(crate) fn per_overlay<'a>(configs: &[&'a Config]) -> Vec<(String, Vec<&'a Config>)> {
    let mut overlays: Vec<Option<String>> = configs.iter().map(|c| c.overlay()).collect();
    overlays.sort();
    overlays.dedup();
    overlays
        .into_iter()
        .map(|o| {
            let mine = configs.iter().filter(|c| c.overlay() == o).copied().collect();
            (o.map(|o| format!(" on {o}")).unwrap_or_default(), mine)
        })
        .collect()
}

/// The note of a figure that overlays devices or machines: what each series' name ends with.
pub fn overlaid(configs: &[&Config]) -> Option<String> {
    let targets = configs.iter().any(|c| c.target().is_some());
    let machines = configs.iter().any(|c| c.machine.is_some());
    let what = match (targets, machines) {
        (false, false) => return None,
        (true, false) => "its device (a set joined by '+' is driven together)",
        (false, true) => "the machine its runs were made on",
        (true, true) => "its device (a set joined by '+' is driven together) and the machine its runs were made on",
    };
    Some(format!("One line per device or machine overlaid: each series' name ends with {what}."))
}

pub fn axis(label: &str, scale: Scale) -> Axis {
    Axis { label: label.to_string(), scale }
}

/// Why none of `runs` has a figure, from their records' own reasons; None when some run has one.
fn gap(runs: &[&Run], has: impl Fn(&Run) -> bool, why: impl Fn(&Run) -> Option<String>, fallback: &str) -> Option<String> {
    if runs.iter().any(|r| has(r)) {
        return None;
    }
    let mut reasons: Vec<String> = runs.iter().filter_map(|r| why(r)).collect();
    reasons.sort();
    reasons.dedup();
    Some(if reasons.is_empty() { fallback.into() } else { reasons.join(" | ") })
}

pub(crate) fn energy_gap(runs: &[&Run]) -> Option<String> {
    gap(runs, |r| r.iops_per_joule().is_some(), Run::energy_missing_reason, "no runs")
}

/// The energy scope of the runs' figures, for their titles: the scope when it is one; with no
/// whole-system source, which scope stands in for the wall power the studies measured; the
/// scopes and their run counts when the runs differ (scopes are never added or converted).
pub(crate) fn energy_scope(runs: &[&Run]) -> String {
    use crate::analysis::compare::{scope_label, WHOLE_SYSTEM_SCOPES};
    let mut scopes: Vec<(&str, usize)> = Vec::new();
    for s in runs.iter().filter_map(|r| r.energy_scope()) {
        match scopes.iter_mut().find(|(x, _)| *x == s) {
            Some((_, n)) => *n += 1,
            None => scopes.push((s, 1)),
        }
    }
    match scopes.as_slice() {
        [] => "no energy scope".into(),
        [(s, _)] if WHOLE_SYSTEM_SCOPES.contains(s) => format!("scope: {}", scope_label(s)),
        [(s, _)] => format!("scope: {}, standing in for whole-system wall power, which no source measured", scope_label(s)),
        many => format!(
            "scopes differ by run: {}",
            many.iter().map(|(s, n)| format!("{} ({n} runs)", scope_label(s))).collect::<Vec<_>>().join(", ")
        ),
    }
}

pub(crate) fn counters_gap(runs: &[&Run]) -> Option<String> {
    gap(runs, |r| r.counter(|c| c.workload_per_io.instructions).is_some(), Run::counters_missing_reason, "instructions were not counted")
}
