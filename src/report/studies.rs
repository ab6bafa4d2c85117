//! Per-study sections built from stored runs through the analysis layer: each part of a suite
//! (a sweep named after it, e.g. `S3-map`) gets the tables and figures its paper has; any other
//! sweep gets the generic configuration table. What the machine could not measure stays in
//! place as a "not available here" panel or note with the reason. Rules: docs/report.md.
use super::data::{Config, Run, SweepRuns};
use super::svg::{self, Axis, Callout, Chart, Point, Scale, Series, Tile, TileMap};
use super::tables::Table;
use crate::analysis::compare::{self, Metric, Verdict, ALPHA};
use crate::analysis::saturation::{saturation_point, CurvePoint, SaturationRule};
use crate::analysis::stats::Summary;
use crate::analysis::study::{slowdown_table, tile_winner, TileCall};
use crate::plan::size::format_bytes;
use crate::store::RunRow;
use std::collections::BTreeMap;

pub struct Figure {
    pub id: String,
    pub title: String,
    pub svg: String,
    pub notes: Vec<String>,
    pub provenance: String,
}

pub struct TableItem {
    pub id: String,
    pub table: Table,
    pub provenance: String,
}

pub enum Item {
    Figure(Figure),
    Table(TableItem),
    Note(String),
}

pub struct Section {
    pub id: String,
    pub title: String,
    pub about: String,
    pub items: Vec<Item>,
}

/// What one sweep's section is built with.
struct Ctx<'a> {
    sweep: &'a SweepRuns,
    prefix: String,
    items: Vec<Item>,
}

pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

impl<'a> Ctx<'a> {
    fn id(&self, title: &str) -> String {
        let base = format!("{}-{}", self.prefix, slug(title));
        let taken = |id: &str| self.items.iter().any(|i| matches!(i, Item::Figure(f) if f.id == id) || matches!(i, Item::Table(t) if t.id == id));
        let mut id = base.clone();
        let mut n = 2;
        while taken(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        id
    }

    fn figure(&mut self, title: &str, svg: String, runs: &[&Run], mut notes: Vec<String>) {
        let fell_back = runs.iter().filter(|r| r.fell_back()).count();
        if fell_back > 0 {
            notes.push(format!("Polling was asked for but completions came by interrupt in {fell_back} of these runs (hollow marks): those points measure the interrupt path."));
        }
        let id = self.id(title);
        self.items.push(Item::Figure(Figure { id, title: title.to_string(), svg, notes, provenance: provenance(runs) }));
    }

    fn unavailable(&mut self, title: &str, reason: &str, runs: &[&Run]) {
        let (svg, fits) = svg::unavailable(title, reason);
        let notes = if fits { Vec::new() } else { vec![format!("Not available here: {reason}")] };
        self.figure(title, svg, runs, notes);
    }

    fn table(&mut self, table: Table, runs: &[&Run]) {
        let id = self.id(&table.title);
        self.items.push(Item::Table(TableItem { id, table, provenance: provenance(runs) }));
    }

    fn note(&mut self, s: impl Into<String>) {
        self.items.push(Item::Note(s.into()));
    }

    fn all_runs(&self) -> Vec<&'a Run> {
        self.sweep.configs.iter().flat_map(|c| c.runs.iter()).collect()
    }

    fn configs(&self, keep: impl Fn(&RunRow) -> bool) -> Vec<&'a Config> {
        self.sweep.configs.iter().filter(|c| keep(c.first())).collect()
    }
}

fn runs_of<'a>(configs: &[&'a Config]) -> Vec<&'a Run> {
    configs.iter().flat_map(|c| c.runs.iter()).collect()
}

/// Distinct values in first-seen order, then sorted.
fn distinct<T: Ord + Clone>(configs: &[&Config], f: impl Fn(&RunRow) -> T) -> Vec<T> {
    let mut v: Vec<T> = configs.iter().map(|c| f(c.first())).collect();
    v.sort();
    v.dedup();
    v
}

/// Machine, kernel, device, iolab version, run ids, replicate count and the completion path
/// actually taken, for the runs behind one figure or table.
pub fn provenance(runs: &[&Run]) -> String {
    fn join(mut v: Vec<String>) -> String {
        v.sort();
        v.dedup();
        if v.is_empty() { "unknown".into() } else { v.join(", ") }
    }
    let s = |r: &Run, p: &str| r.record.pointer(p).and_then(serde_json::Value::as_str).map(str::to_string);
    let machine = join(runs.iter().map(|r| {
        let host = r.row.hostname.clone().unwrap_or("?".into());
        let cpu = s(r, "/environment/cpu_model").unwrap_or("unknown CPU".into());
        let n = r.record.pointer("/environment/cpu_count").and_then(serde_json::Value::as_u64).map(|n| format!(", {n} CPUs")).unwrap_or_default();
        format!("{host} ({cpu}{n})")
    }).collect());
    let kernel = join(runs.iter().filter_map(|r| r.row.kernel.clone()).collect());
    let device = join(runs.iter().map(|r| {
        let dev = r.row.devices.clone().unwrap_or("no device".into());
        let model = s(r, "/environment/targets/0/model").map(|m| format!(" {m}")).unwrap_or_default();
        let kind = s(r, "/environment/targets/0/kind").map(|k| format!(" ({k})")).unwrap_or_default();
        format!("{dev}{model}{kind}")
    }).collect());
    let version = join(runs.iter().filter_map(|r| r.row.iolab_version.clone()).collect());
    let mut ids: Vec<i64> = runs.iter().map(|r| r.row.id).collect();
    ids.sort();
    ids.dedup();
    let mut per_config: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs {
        *per_config.entry(r.row.config_key.as_deref().unwrap_or("")).or_default() += 1;
    }
    let (lo, hi) = (per_config.values().min().copied().unwrap_or(0), per_config.values().max().copied().unwrap_or(0));
    let replicates = if lo == hi { format!("{lo}") } else { format!("{lo}–{hi}") };
    let mut paths: BTreeMap<String, usize> = BTreeMap::new();
    for r in runs {
        let req = s(r, "/completion_path/requested").unwrap_or(r.row.complete.clone());
        let obs = r.row.metrics.completion_observed.clone().unwrap_or("not observed".into());
        let fb = if r.fell_back() { ", fell back" } else { "" };
        *paths.entry(format!("{req} → {obs}{fb}")).or_default() += 1;
    }
    let paths: Vec<String> = paths.into_iter().map(|(k, n)| format!("{k} ×{n}")).collect();
    format!("machine {machine} · kernel {kernel} · device {device} · iolab {version} · runs {} · replicates {replicates} per configuration · completion path (asked → taken) {}",
        id_ranges(&ids), paths.join("; "))
}

/// 1,2,3,5 → "1–3, 5".
fn id_ranges(ids: &[i64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}–{}", ids[i], ids[j]) } else { ids[i].to_string() });
        i = j + 1;
    }
    if out.is_empty() { "none".into() } else { out.join(", ") }
}

/// Three significant digits, no exponent for everyday magnitudes.
pub fn num(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).clamp(0, 6) as usize;
    format!("{x:.digits$}")
}

fn mean_ci(s: &Summary) -> String {
    match s.ci95_half_width {
        Some(h) => format!("{} ± {}", num(s.mean), num(h)),
        None => num(s.mean),
    }
}

fn cell(c: &Config, f: &dyn Fn(&Run) -> Option<f64>) -> String {
    c.summary(f).map(|s| mean_ci(&s)).unwrap_or_else(|| "not measured".into())
}

fn us(r: &Run, p: &str) -> Option<f64> {
    r.f(p).map(|ns| ns / 1e3)
}

fn iops(r: &Run) -> Option<f64> {
    r.row.metrics.iops
}

fn lat_mean_us(r: &Run) -> Option<f64> {
    r.row.metrics.lat_mean_ns.map(|x| x / 1e3)
}

fn cores(r: &Run) -> Option<f64> {
    r.row.metrics.cpu_cores
}

fn bs_name(bs: u64) -> String {
    format_bytes(bs as f64).replace(".0 ", " ").replace(" ", "")
}

/// A chart of one measured quantity against a spec column, one series per group of configs.
struct Plot<'f> {
    title: String,
    x: Axis,
    y: Axis,
    x_of: &'f dyn Fn(&RunRow) -> f64,
    y_of: &'f dyn Fn(&Run) -> Option<f64>,
    series_of: &'f dyn Fn(&Config) -> String,
}

fn point(c: &Config, x: f64, series: &str, x_label: &str, y_label: &str, y_of: &dyn Fn(&Run) -> Option<f64>) -> Option<Point> {
    let s = c.summary(y_of)?;
    let mut tip = format!("{series} · {x_label} {} · {y_label} {} (n = {}", num(x), mean_ci(&s), s.n);
    if let Some(sd) = s.sd {
        tip += &format!(", sd {}", num(sd));
    }
    tip += ")";
    if !s.outliers.is_empty() {
        tip += &format!(" · MAD outlier replicate(s): {}", s.outliers.iter().map(|i| format!("run {}", c.runs[*i].row.id)).collect::<Vec<_>>().join(", "));
    }
    if c.any_fell_back() {
        tip += " · polling fell back to interrupts";
    }
    Some(Point { x, y: s.mean, ci: s.ci95_half_width, tip, flagged: !s.outliers.is_empty() || c.any_fell_back() })
}

fn plot(ctx: &mut Ctx, configs: &[&Config], p: Plot, notes: Vec<String>) {
    plot_with(ctx, configs, p, notes, Vec::new());
}

fn plot_with(ctx: &mut Ctx, configs: &[&Config], p: Plot, notes: Vec<String>, callouts: Vec<Callout>) {
    let mut series: Vec<Series> = Vec::new();
    let mut used: Vec<&Run> = Vec::new();
    for c in configs {
        let name = (p.series_of)(c);
        let x = (p.x_of)(c.first());
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
    let svg = svg::chart(&Chart { title: p.title.clone(), x: p.x, y: p.y, series, callouts, lines: true });
    ctx.figure(&p.title, svg, &used, notes);
}

fn axis(label: &str, scale: Scale) -> Axis {
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

fn energy_gap(runs: &[&Run]) -> Option<String> {
    gap(runs, |r| r.iops_per_joule().is_some(), Run::energy_missing_reason, "no runs")
}

fn counters_gap(runs: &[&Run]) -> Option<String> {
    gap(runs, |r| r.f("/cost/counters/workload_per_io/instructions").is_some(), Run::counters_missing_reason, "instructions were not counted")
}

/// Build the sections for the selected sweeps.
pub fn sections(sweeps: &[SweepRuns]) -> Vec<Section> {
    sweeps.iter().filter(|s| !s.configs.is_empty() || !s.skipped.is_empty()).map(section).collect()
}

fn section(sweep: &SweepRuns) -> Section {
    let prefix = slug(&match sweep.id {
        Some(id) => format!("{}-{id}", sweep.name),
        None => "lone".into(),
    });
    let mut ctx = Ctx { sweep, prefix: prefix.clone(), items: Vec::new() };
    let part = crate::plan::suites::SUITES.iter().flat_map(|s| s.parts.iter()).find(|p| p.name == sweep.name);
    for (what, why) in part.map(|p| p.unsupported).unwrap_or_default() {
        ctx.note(format!("Not run by iolab: {what}: {why}."));
    }
    if !sweep.skipped.is_empty() {
        let mut why: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, reason) in &sweep.skipped {
            *why.entry(reason.as_str()).or_default() += 1;
        }
        let list: Vec<String> = why.into_iter().map(|(r, n)| format!("{n} × {r}")).collect();
        ctx.note(format!("{} planned runs could not run on this machine and are in no figure: {}", sweep.skipped.len(), list.join(" · ")));
    }
    if sweep.not_ok > 0 {
        ctx.note(format!("{} selected runs did not finish ok (failed or interrupted) and are left out.", sweep.not_ok));
    }
    if !sweep.configs.is_empty() {
        match sweep.name.as_str() {
            "S1.1-latency" => s1_latency(&mut ctx),
            "S1.2-queue-depth" => s1_scaling(&mut ctx, "queue depth", &|r| r.qd as f64),
            "S1.3-threads" => s1_scaling(&mut ctx, "threads", &|r| r.threads as f64),
            "S2.1-qd1" => s2_qd1(&mut ctx),
            "S2.2-jcurve" => s2_jcurve(&mut ctx),
            "S2.3-cores" => s2_cores(&mut ctx),
            "S2.4-schedulers" => s2_schedulers(&mut ctx),
            "S3-map" => s3(&mut ctx),
            "S4.1-latency" => s4_latency(&mut ctx),
            "S4.2-bandwidth" => s4_bandwidth(&mut ctx),
            "S4.3-interference" => s4_interference(&mut ctx),
            "S4.4-gc" => s4_gc(&mut ctx),
            "S4.5-completion" => s4_completion(&mut ctx),
            _ => {}
        }
        configurations(&mut ctx);
    }
    let title = match sweep.id {
        Some(id) => format!("{} (sweep {id})", sweep.name),
        None => "Runs outside any sweep".into(),
    };
    Section { id: prefix, title, about: part.map(|p| p.feeds.to_string()).unwrap_or_else(|| "Not a suite part: every configuration with its replicate statistics.".into()), items: ctx.items }
}

/// Every section ends with its configurations and their replicate statistics.
fn configurations(ctx: &mut Ctx) {
    let mut t = Table::new(format!("{}: configurations and replicate statistics", ctx.sweep.name),
        &["configuration", "n", "IOPS mean", "IOPS sd", "IOPS 95 % CI", "MAD outliers", "mean latency µs", "p99 µs", "CPU cores", "completion path taken"]);
    let (names, common) = short_names(&ctx.sweep.configs);
    for (c, name) in ctx.sweep.configs.iter().zip(names) {
        let s = c.summary(&iops);
        let (mean, sd, ci, out) = match &s {
            Some(s) => (num(s.mean), s.sd.map(num).unwrap_or("n < 2".into()),
                s.ci95.map(|(a, b)| format!("{} – {}", num(a), num(b))).unwrap_or("n < 2".into()),
                if s.outliers.is_empty() { "none".into() } else { s.outliers.iter().map(|i| format!("run {}", c.runs[*i].row.id)).collect::<Vec<_>>().join(", ") }),
            None => ("not measured".into(), String::new(), String::new(), String::new()),
        };
        t.rows.push(vec![name, c.runs.len().to_string(), mean, sd, ci, out, cell(c, &lat_mean_us), cell(c, &|r| us(r, "/results/total/lat_ns/p99")), cell(c, &cores), paths_taken(c)]);
    }
    if !common.is_empty() {
        t.notes.push(format!("Common to every configuration: {common}."));
    }
    t.notes.push("Mean ± half-width of the 95 % confidence interval of the mean (Student t, n − 1 df) over the replicates; MAD outliers are flagged, never dropped.".into());
    let runs = ctx.all_runs();
    ctx.table(t, &runs);
}

/// Each configuration named by the `key=value` parts of its key that vary within the sweep, and
/// the parts common to all (said once, under the table).
fn short_names(configs: &[Config]) -> (Vec<String>, String) {
    let parts: Vec<Vec<&str>> = configs.iter().map(|c| c.key.split(',').collect()).collect();
    let common: Vec<&str> = parts.first().map(|p| p.iter().filter(|kv| parts.iter().all(|o| o.contains(kv))).copied().collect()).unwrap_or_default();
    let names = parts.iter().map(|p| {
        let varying: Vec<&str> = p.iter().filter(|kv| !common.contains(kv)).copied().collect();
        if varying.is_empty() { "(the only configuration)".to_string() } else { varying.join(", ") }
    }).collect();
    (names, common.join(", "))
}

fn paths_taken(c: &Config) -> String {
    let mut paths: Vec<String> = c.runs.iter().map(|r| r.row.metrics.completion_observed.clone().unwrap_or("not observed".into()) + if r.fell_back() { " (polling fell back)" } else { "" }).collect();
    paths.sort();
    paths.dedup();
    paths.join(", ")
}

fn s1_latency(ctx: &mut Ctx) {
    let columns = [("randread", "p50", "/results/total/lat_ns/p50"), ("randread", "p99", "/results/total/lat_ns/p99"),
        ("randwrite", "p50", "/results/total/lat_ns/p50"), ("randwrite", "p99", "/results/total/lat_ns/p99")];
    let configs = ctx.configs(|_| true);
    let mut methods: Vec<String> = configs.iter().map(|c| c.method()).collect();
    methods.dedup();
    methods.sort();
    methods.dedup();
    let find = |m: &str, rw: &str| configs.iter().find(|c| c.method() == m && c.first().rw == rw).copied();
    let rows: Vec<(String, Vec<Option<f64>>)> = methods.iter().map(|m| {
        (m.clone(), columns.iter().map(|(rw, _, p)| find(m, rw).and_then(|c| c.summary(&|r| us(r, p))).map(|s| s.mean)).collect())
    }).collect();
    // Welch against the fastest in randread p50, Holm-corrected over the ranking.
    let p50: Vec<(String, Vec<f64>)> = methods.iter().filter_map(|m| Some((m.clone(), find(m, "randread")?.values(&|r| us(r, "/results/total/lat_ns/p50"))))).collect();
    let ranked = compare::rank(Metric::LatP99Ns, &p50, ALPHA);
    let mut t = Table::new("S1 latency table: p50/p99 (µs) and mean slowdown against the fastest configuration",
        &["configuration", "randread p50", "randread p99", "randwrite p50", "randwrite p99", "slowdown", "randread p50 vs fastest (Welch, Holm)", "completion path taken"]);
    for row in slowdown_table(&rows) {
        let mut cells = vec![row.name.clone()];
        for (i, (rw, _, p)) in columns.iter().enumerate() {
            cells.push(match (row.values[i], find(&row.name, rw)) {
                (Some(_), Some(c)) => cell(c, &|r| us(r, p)),
                _ => "not measured".into(),
            });
        }
        cells.push(row.slowdown.map(|s| format!("{s:.2}×")).unwrap_or("-".into()));
        cells.push(match ranked.iter().position(|r| r.config_key == row.name) {
            Some(0) => "fastest".into(),
            Some(i) => {
                let r = &ranked[i];
                match (r.verdict, r.p_holm) {
                    (Verdict::Untested, _) | (_, None) => "untested (n < 2)".into(),
                    (v, Some(p)) => format!("{} (p = {})", if v == Verdict::Slower { "slower" } else { "tie" }, num(p)),
                }
            }
            None => "-".into(),
        });
        let mine: Vec<&Config> = columns.iter().filter_map(|(rw, _, _)| find(&row.name, rw)).collect();
        let mut paths: Vec<String> = mine.iter().map(|c| paths_taken(c)).collect();
        paths.sort();
        paths.dedup();
        cells.push(paths.join(", "));
        t.rows.push(cells);
    }
    t.notes.push("Slowdown: for each of the four latency columns, the configuration's mean divided by the fastest configuration's mean in that column, averaged over the columns it has; rows sorted by it (HotStorage'23 Table 2).".into());
    let runs = ctx.all_runs();
    ctx.table(t, &runs);
}

fn s1_scaling(ctx: &mut Ctx, x_name: &str, x_of: &dyn Fn(&RunRow) -> f64) {
    let method = |c: &Config| c.method();
    let x_scale = Scale::Log2;
    let all = ctx.configs(|_| true);
    for bs in distinct(&all, |r| r.bs) {
        for rw in distinct(&all, |r| r.rw.clone()) {
            let cs = ctx.configs(|r| r.bs == bs && r.rw == rw);
            if cs.is_empty() {
                continue;
            }
            let tag = format!("{rw}, {}", bs_name(bs));
            plot(ctx, &cs, Plot { title: format!("IOPS against {x_name} ({tag})"), x: axis(x_name, x_scale), y: axis("IOPS", Scale::Linear), x_of, y_of: &iops, series_of: &method }, vec![]);
            match energy_gap(&runs_of(&cs)) {
                Some(reason) => ctx.unavailable(&format!("Power and IOPS per joule against {x_name} ({tag})"), &reason, &runs_of(&cs)),
                None => {
                    plot(ctx, &cs, Plot { title: format!("Power against {x_name} ({tag})"), x: axis(x_name, x_scale), y: axis("W", Scale::Linear), x_of, y_of: &|r| r.watts(), series_of: &method }, vec![]);
                    plot(ctx, &cs, Plot { title: format!("IOPS per joule against {x_name} ({tag})"), x: axis(x_name, x_scale), y: axis("IOPS per joule", Scale::Linear), x_of, y_of: &|r| r.iops_per_joule(), series_of: &method }, vec![]);
                }
            }
            plot(ctx, &cs, Plot { title: format!("CPU cores used against {x_name} ({tag})"), x: axis(x_name, x_scale), y: axis("CPU cores (iolab's threads)", Scale::Linear), x_of, y_of: &cores, series_of: &method }, vec![]);
        }
    }
}

fn counter(r: &Run, name: &str) -> Option<f64> {
    r.f(&format!("/cost/counters/{name}"))
}

fn s2_qd1(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let runs = runs_of(&cs);
    let gap = counters_gap(&runs);
    let mut t = Table::new("S2 QD1 on one core: IOPS and CPU counters per I/O",
        &["configuration", "IOPS", "instructions per I/O (iolab)", "instructions per I/O (system)", "IPC (iolab)", "cache-miss rate (iolab)", "CPU cores"]);
    for c in &cs {
        t.rows.push(vec![c.method(), cell(c, &iops), cell(c, &|r| counter(r, "workload_per_io/instructions")), cell(c, &|r| counter(r, "system_per_io/instructions")),
            cell(c, &|r| counter(r, "workload_per_io/ipc")), cell(c, &|r| counter(r, "workload_per_io/cache_miss_rate")), cell(c, &cores)]);
    }
    if let Some(reason) = &gap {
        t.notes.push(format!("Counters not available here: {reason}"));
    }
    ctx.table(t, &runs);
    if let Some(reason) = gap {
        ctx.unavailable("Instructions per I/O and IPC at QD1", &reason, &runs);
    } else {
        let method = |c: &Config| c.method();
        plot(ctx, &cs, Plot { title: "Instructions per I/O at QD1".into(), x: axis("threads", Scale::Log2), y: axis("instructions per I/O", Scale::Linear),
            x_of: &|r| r.threads as f64, y_of: &|r| counter(r, "workload_per_io/instructions"), series_of: &method }, vec![]);
    }
}

fn s2_jcurve(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let mut methods: Vec<String> = cs.iter().map(|c| c.method()).collect();
    methods.sort();
    methods.dedup();
    let mut series = Vec::new();
    let mut callouts = Vec::new();
    let mut t = Table::new("S2 saturation points (J-curve heel)", &["configuration", "saturation QD", "IOPS there", "mean latency µs there", "instructions per I/O there", "IPC there", "rule"]);
    let runs = runs_of(&cs);
    let gap = counters_gap(&runs);
    for m in &methods {
        let mut mine: Vec<&Config> = cs.iter().filter(|c| &c.method() == m).copied().collect();
        mine.sort_by_key(|c| c.first().qd);
        let mut pts = Vec::new();
        let mut curve = Vec::new();
        for c in &mine {
            let (Some(i), Some(l)) = (c.summary(&iops), c.summary(&lat_mean_us)) else { continue };
            let qd = c.first().qd as f64;
            let mut p = point(c, l.mean, m, "mean latency µs", "IOPS", &iops).expect("summary exists");
            p.tip = format!("{m} · QD {qd} · IOPS {} · mean latency {} µs", mean_ci(&i), mean_ci(&l));
            pts.push(p);
            curve.push((c, CurvePoint { qd, iops: i.mean, mean_lat: l.mean }));
        }
        let points: Vec<CurvePoint> = curve.iter().map(|(_, p)| *p).collect();
        let (sat_qd, there, reason) = match saturation_point(&points, SaturationRule::default()) {
            Ok(s) => (s.qd.map(num).unwrap_or("not within the sweep".into()), s.index.map(|i| curve[i]), s.reason),
            Err(e) => ("-".into(), None, e),
        };
        if let Some((c, p)) = there {
            callouts.push(Callout { x: p.mean_lat, y: p.iops, text: format!("QD {}", p.qd) });
            t.rows.push(vec![m.clone(), sat_qd, num(p.iops), num(p.mean_lat), counter_cell(c, "workload_per_io/instructions", &gap), counter_cell(c, "workload_per_io/ipc", &gap), reason]);
        } else {
            t.rows.push(vec![m.clone(), sat_qd, "-".into(), "-".into(), "-".into(), "-".into(), reason]);
        }
        series.push(Series { name: m.clone(), points: pts });
    }
    t.notes.push("Saturation rule: the first queue depth whose next step gains < 5 % IOPS per doubling while mean latency grows > 20 % per doubling (docs/statistics.md), applied to the replicate means.".into());
    if let Some(reason) = &gap {
        t.notes.push(format!("Counters not available here: {reason}"));
    }
    let svg = svg::chart(&Chart { title: "J-curves: IOPS against mean latency (circled: saturation point)".into(), x: axis("mean latency (µs)", Scale::Linear),
        y: axis("IOPS", Scale::Linear), series, callouts, lines: true });
    ctx.figure("J-curves: IOPS against mean latency", svg, &runs, vec!["Each point is one queue depth (hover for it); circled points are saturation points by the documented rule.".into()]);
    ctx.table(t, &runs);
}

fn counter_cell(c: &Config, name: &str, gap: &Option<String>) -> String {
    match gap {
        Some(_) => "not available here".into(),
        None => cell(c, &|r| counter(r, name)),
    }
}

fn s2_cores(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let mut methods: Vec<String> = cs.iter().map(|c| c.method()).collect();
    methods.sort();
    methods.dedup();
    let mut t = Table::new("S2 cores to peak", &["configuration", "peak IOPS", "threads at the peak", "cores to peak", "IOPS there", "how decided"]);
    let mut callouts = Vec::new();
    for m in &methods {
        let mine: Vec<&Config> = cs.iter().filter(|c| &c.method() == m).copied().collect();
        let by_threads: Vec<(String, Vec<f64>)> = mine.iter().map(|c| (c.first().threads.to_string(), c.values(&iops))).collect();
        let ranked = compare::rank(Metric::Iops, &by_threads, ALPHA);
        let Some(best) = ranked.first() else { continue };
        let testable = ranked.iter().skip(1).all(|r| r.verdict != Verdict::Untested);
        // The best itself is a Tie, so there is always a candidate.
        let (to_peak, how) = if testable {
            let fewest = ranked.iter().filter(|r| r.verdict == Verdict::Tie).min_by_key(|r| r.config_key.parse::<u32>().unwrap_or(u32::MAX)).unwrap_or(best);
            (fewest, "fewest threads not significantly below the peak (Welch against the peak, Holm-corrected, α = 0.05)")
        } else {
            (best, "untested (n < 2): the threads of the highest mean")
        };
        let threads: f64 = to_peak.config_key.parse().unwrap_or(0.0);
        callouts.push(Callout { x: threads, y: to_peak.summary.mean, text: format!("{m}: {threads} to peak") });
        t.rows.push(vec![m.clone(), mean_ci(&best.summary), best.config_key.clone(), to_peak.config_key.clone(), mean_ci(&to_peak.summary), how.to_string()]);
    }
    let method = |c: &Config| c.method();
    plot_with(ctx, &cs, Plot { title: "IOPS against cores (threads at QD128)".into(), x: axis("cores (threads)", Scale::Log2), y: axis("IOPS", Scale::Linear),
        x_of: &|r| r.threads as f64, y_of: &iops, series_of: &method }, vec!["Circled: cores to peak per configuration (see the table).".into()], callouts);
    let runs = runs_of(&cs);
    ctx.table(t, &runs);
}

fn s2_schedulers(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let sched = |c: &Config| c.runs[0].scheduler();
    let mut schedulers: Vec<String> = cs.iter().map(|c| sched(c)).collect();
    schedulers.sort_by_key(|s| (s != "none", s.clone()));
    schedulers.dedup();
    let mut columns = vec!["configuration".to_string(), "threads".to_string()];
    for s in &schedulers {
        columns.push(format!("{s} IOPS"));
        if s != "none" {
            columns.push(format!("{s} / none (Welch p)"));
        }
    }
    let mut t = Table { title: "S2 schedulers: IOPS and ratio to none".into(), columns, ..Default::default() };
    let mut groups: Vec<(String, u32)> = cs.iter().map(|c| (c.method(), c.first().threads)).collect();
    groups.sort();
    groups.dedup();
    for (m, th) in &groups {
        let of = |s: &str| cs.iter().find(|c| &c.method() == m && c.first().threads == *th && sched(c) == s).copied();
        let none = of("none");
        let mut row = vec![m.clone(), th.to_string()];
        for s in &schedulers {
            let c = of(s);
            row.push(c.map(|c| cell(c, &iops)).unwrap_or("not run".into()));
            if s != "none" {
                row.push(match (none, c) {
                    (Some(n), Some(c)) => match compare::compare_metric(Metric::Iops, &n.values(&iops), &c.values(&iops), ALPHA) {
                        Some(cmp) => format!("{} ({})", cmp.ratio.map(|r| format!("{r:.3}")).unwrap_or("-".into()),
                            cmp.welch.map(|w| format!("p = {}", num(w.p))).unwrap_or("untested, n < 2".into())),
                        None => "not measured".into(),
                    },
                    _ => "-".into(),
                });
            }
        }
        t.rows.push(row);
    }
    let runs = runs_of(&cs);
    ctx.table(t, &runs);
    if distinct(&cs, |r| r.threads).len() > 1 {
        let series = |c: &Config| format!("{} {}", c.method(), c.runs[0].scheduler());
        plot(ctx, &cs, Plot { title: "IOPS against threads per scheduler".into(), x: axis("threads", Scale::Log2), y: axis("IOPS", Scale::Linear),
            x_of: &|r| r.threads as f64, y_of: &iops, series_of: &series }, vec![]);
    }
}

fn s3(ctx: &mut Ctx) {
    let all = ctx.configs(|_| true);
    let four_k = ctx.configs(|r| r.bs == 4096);
    let mut t = Table::new("S3 4 KiB: latency and IOPS per completion method", &["threads", "method", "mean latency µs", "IOPS", "MB/s", "CPU cores", "context switches per I/O", "completion path taken"]);
    let mut sorted = four_k.clone();
    sorted.sort_by_key(|c| (c.first().threads, c.method()));
    for c in &sorted {
        t.rows.push(vec![c.first().threads.to_string(), c.method(), cell(c, &lat_mean_us), cell(c, &iops), cell(c, &|r| r.row.metrics.bw_bytes_per_s.map(|b| b / 1e6)),
            cell(c, &cores), cell(c, &Run::ctx_switches_per_io), paths_taken(c)]);
    }
    if !sorted.is_empty() {
        ctx.table(t, &runs_of(&four_k));
    }
    let runs = runs_of(&all);
    match energy_gap(&runs) {
        Some(reason) => {
            ctx.unavailable("Energy-efficiency map: best completion method per block size and threads", &reason, &runs);
            ctx.note("The map below ranks the methods by CPU time per I/O instead: a measured cost, but not energy.");
            efficiency_map(ctx, &all, Metric::CpuNsPerIo, "CPU-cost map: cheapest method per block size and threads (CPU time per I/O)");
        }
        None => efficiency_map(ctx, &all, Metric::JoulesPerIo, "Energy-efficiency map: best completion method per block size and threads"),
    }
    let method = |c: &Config| c.method();
    for bs in distinct(&all, |r| r.bs) {
        let cs = ctx.configs(|r| r.bs == bs);
        plot(ctx, &cs, Plot { title: format!("Context switches per I/O against threads ({})", bs_name(bs)), x: axis("threads", Scale::Log2),
            y: axis("context switches per I/O (worker threads)", Scale::Linear), x_of: &|r| r.threads as f64, y_of: &Run::ctx_switches_per_io, series_of: &method }, vec![]);
    }
}

fn metric_value(m: Metric) -> impl Fn(&Run) -> Option<f64> {
    move |r: &Run| match m {
        Metric::JoulesPerIo => m.of_record(&r.record),
        _ => m.of_row(&r.row),
    }
}

fn efficiency_map(ctx: &mut Ctx, all: &[&Config], metric: Metric, title: &str) {
    let bss = distinct(all, |r| r.bs);
    let threads = distinct(all, |r| r.threads);
    let value = metric_value(metric);
    let mut tiles = Vec::new();
    let best_mean = format!("best's mean {}", metric.name());
    let mut t = Table::new(format!("{title} (table)"), &["bs", "threads", "best", &best_mean, "second", "margin", "Welch p", "call (Welch)", "Student p", "call (Student)"]);
    let mut disagreements = 0;
    for (col, bs) in bss.iter().enumerate() {
        for (row, th) in threads.iter().enumerate() {
            let methods: Vec<(String, Vec<f64>)> = all.iter().filter(|c| c.first().bs == *bs && c.first().threads == *th)
                .map(|c| (c.method(), c.values(&value))).filter(|(_, v)| !v.is_empty()).collect();
            let Some(w) = tile_winner(metric, &methods, ALPHA) else { continue };
            let margin = w.margin.map(|m| format!("+{:.1} %", m * 100.0)).unwrap_or("-".into());
            let call = |p: Option<f64>| match (w.call, p) {
                (TileCall::Alone, _) => "only method".to_string(),
                (_, None) => "untested (n < 2)".to_string(),
                (_, Some(p)) if p > ALPHA => "tie".to_string(),
                _ => "clear".to_string(),
            };
            let student_call = call(w.student.map(|s| s.p));
            let welch_call = call(w.welch.map(|s| s.p));
            if student_call != welch_call {
                disagreements += 1;
            }
            let p = w.welch.map(|x| format!("p = {}", num(x.p))).unwrap_or_default();
            let second = w.second.clone().unwrap_or_default();
            let sub = match w.call {
                TileCall::Tie => vec![format!("tie with {second}"), format!("{margin}, {p}")],
                TileCall::Untested => vec![format!("{margin} over {second}"), "untested, n < 2".into()],
                TileCall::Alone => vec!["only method".into()],
                TileCall::Clear => vec![format!("{margin} over {second}"), p.clone()],
            };
            let (text, key) = if w.call == TileCall::Tie { (format!("tie: {}", w.best), svg::TIE_KEY.to_string()) } else { (w.best.clone(), w.best.clone()) };
            tiles.push(Tile { col, row, text, key,
                tip: format!("{} · {} threads · best {} ({} {}) · {}", bs_name(*bs), th, w.best, num(w.best_mean), metric.name(), sub.join(", ")), sub });
            t.rows.push(vec![bs_name(*bs), th.to_string(), w.best.clone(), num(w.best_mean), w.second.clone().unwrap_or("-".into()), margin,
                w.welch.map(|x| num(x.p)).unwrap_or("-".into()), welch_call, w.student.map(|x| num(x.p)).unwrap_or("-".into()), student_call]);
        }
    }
    let runs = runs_of(all);
    if tiles.is_empty() {
        ctx.unavailable(title, &format!("no run here measured {}", metric.name()), &runs);
        return;
    }
    let map = TileMap { title: title.to_string(), x_label: "block size".into(), y_label: "threads".into(), cols: bss.iter().map(|b| bs_name(*b)).collect(),
        rows: threads.iter().map(|t| t.to_string()).collect(), tiles };
    let notes = vec![format!("Each tile: the method with the best mean {} and its margin over the second; \"tie\" where Welch's two-sample test of best against second gives p > 0.05.", metric.name())];
    ctx.figure(title, svg::tile_map(&map), &runs, notes);
    t.notes.push(format!("HotStorage'22 called a tie with a two-sample t-test; iolab decides with Welch's test (unequal variances) and lists Student's pooled test beside it. The two calls differ in {disagreements} tile(s)."));
    ctx.table(t, &runs);
}

fn s4_latency(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let rw = |c: &Config| c.first().rw.clone();
    for (name, p) in [("mean", "/results/total/lat_ns/mean"), ("p99.999", "/results/total/lat_ns/p99_999")] {
        plot(ctx, &cs, Plot { title: format!("{name} latency against queue depth"), x: axis("queue depth", Scale::Log2), y: axis(&format!("{name} latency (µs)"), Scale::Linear),
            x_of: &|r| r.qd as f64, y_of: &|r| us(r, p), series_of: &rw }, vec![]);
    }
}

fn s4_bandwidth(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let bw = |r: &Run| r.row.metrics.bw_bytes_per_s;
    let max = cs.iter().filter_map(|c| c.summary(&bw)).map(|s| s.mean).fold(0.0, f64::max);
    if max <= 0.0 {
        ctx.unavailable("Normalised bandwidth against queue depth", "no run here measured bandwidth", &runs_of(&cs));
        return;
    }
    let rw = |c: &Config| c.first().rw.clone();
    plot(ctx, &cs, Plot { title: "Normalised bandwidth against queue depth".into(), x: axis("queue depth", Scale::Log2), y: axis("bandwidth / highest measured", Scale::Linear),
        x_of: &|r| r.qd as f64, y_of: &|r| bw(r).map(|b| b / max), series_of: &rw },
        vec![format!("Normalised to the highest mean bandwidth this sweep measured ({}/s), the device maximum as far as the sweep saw it.", format_bytes(max))]);
}

fn s4_interference(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let series = |_: &Config| "random reads".to_string();
    for (name, p) in [("mean", "/results/read/lat_ns/mean"), ("p99.999", "/results/read/lat_ns/p99_999")] {
        plot(ctx, &cs, Plot { title: format!("Read latency ({name}) against the share of writes"), x: axis("writes mixed in (%)", Scale::Linear),
            y: axis(&format!("read {name} latency (µs)"), Scale::Linear), x_of: &|r| r.write_mix as f64, y_of: &|r| us(r, p), series_of: &series }, vec![]);
    }
}

fn s4_gc(ctx: &mut Ctx) {
    let runs = ctx.all_runs();
    let mut lat = Vec::new();
    let mut rate = Vec::new();
    for r in &runs {
        let Some(series) = r.record.pointer("/results/series").and_then(serde_json::Value::as_array) else { continue };
        let pts = |field: &str, scale: f64| -> Vec<Point> {
            series.iter().filter_map(|p| {
                let t = p.get("t")?.as_f64()?;
                let v = p.get(field)?.as_f64()? / scale;
                Some(Point { x: t, y: v, ci: None, tip: format!("run {} · t = {t} s · {}", r.row.id, num(v)), flagged: r.fell_back() })
            }).collect()
        };
        let name = format!("run {}", r.row.id);
        lat.push(Series { name: name.clone(), points: pts("mean_lat_ns", 1e3) });
        rate.push(Series { name, points: pts("write_iops", 1.0) });
    }
    let note = vec!["One point per second of the measured window, one line per run (the last second may be partial). Precondition the device first (iolab precondition) for the garbage-collection regime.".into()];
    for (title, y, series) in [("Garbage collection: per-second mean write latency", "mean latency (µs)", lat), ("Garbage collection: per-second write IOPS", "write IOPS", rate)] {
        if series.iter().all(|s| s.points.is_empty()) {
            ctx.unavailable(title, "the runs recorded no per-second series", &runs);
        } else {
            let svg = svg::chart(&Chart { title: title.into(), x: axis("time in the window (s)", Scale::Linear), y: axis(y, Scale::Linear), series, callouts: vec![], lines: true });
            ctx.figure(title, svg, &runs, note.clone());
        }
    }
    match energy_gap(&runs) {
        Some(reason) => ctx.unavailable("Garbage collection: power", &reason, &runs),
        None => {
            let w: Vec<String> = runs.iter().filter_map(|r| r.watts().map(|w| format!("run {}: {} W", r.row.id, num(w)))).collect();
            ctx.note(format!("Mean power over the window (iolab records energy per window, not per second): {}", w.join(", ")));
        }
    }
}

fn s4_completion(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let mut sorted = cs.clone();
    sorted.sort_by_key(|c| (c.first().rw.clone(), c.first().bs, c.method()));
    let mut t = Table::new("S4 completion methods: latency and CPU per I/O", &["rw", "bs", "method", "mean latency µs", "p99.999 µs", "CPU user ns per I/O", "CPU kernel ns per I/O", "completion path taken"]);
    for c in &sorted {
        t.rows.push(vec![c.first().rw.clone(), bs_name(c.first().bs), c.method(), cell(c, &lat_mean_us), cell(c, &|r| us(r, "/results/total/lat_ns/p99_999")),
            cell(c, &|r| r.f("/results/cpu/user_ns_per_io")), cell(c, &|r| r.f("/results/cpu/system_ns_per_io")), paths_taken(c)]);
    }
    ctx.table(t, &runs_of(&cs));
    let method = |c: &Config| c.method();
    for rw in distinct(&cs, |r| r.rw.clone()) {
        let mine = ctx.configs(|r| r.rw == rw);
        plot(ctx, &mine, Plot { title: format!("Mean latency against block size ({rw})"), x: axis("block size (bytes)", Scale::Log2), y: axis("mean latency (µs)", Scale::Linear),
            x_of: &|r| r.bs as f64, y_of: &lat_mean_us, series_of: &method }, vec![]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(id_ranges(&[1, 2, 3, 5, 7, 8]), "1–3, 5, 7–8");
        assert_eq!(slug("S1.1-latency: IOPS (4k)"), "s1-1-latency-iops-4k");
        assert_eq!(num(123456.0), "123456");
        assert_eq!(num(1.23456), "1.23");
        assert_eq!(num(0.012345), "0.0123");
    }
}
