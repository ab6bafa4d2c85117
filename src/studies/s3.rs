//! S3, HotStorage'22: when poll is more energy efficient than interrupt. Synchronous random reads,
//! one outstanding I/O per thread: the 4 KiB table per completion method and the map of the most
//! energy-efficient method per (block size, threads) tile, with ties called by a t-test.
use super::{pick, Budget::Runtime, Devices, Part, Report, Runs, Study};
use crate::analysis::compare::{self, Metric, ALPHA};
use crate::analysis::stats::{self, TTest};
use crate::report::data::{Config, Run};
use crate::report::panels::{
    axis, bs_name, cell, cores, distinct, energy_gap, energy_scope, iops, lat_mean_us, mechanisms, num, paths_taken, per_overlay, plot,
    runs_of, Plot,
};
use crate::report::sections::Ctx;
use crate::report::svg::{self, Scale, Tile, TileMap};
use crate::report::tables::Table;
use serde::Serialize;

pub const STUDY: Study = Study { id: "S3", title: "HotStorage'22: when poll is more energy efficient than interrupt", setup: super::NO_SCHEDULER_FULL_SPEED, fills: None, parts: &[
    Part { name: "S3-map", feeds: "Table: 4 KiB latency/IOPS per completion method at 1 and 8 threads; energy-efficiency map of the three completion methods per (bs, threads), margin in bytes per joule; Figs 1a-d (MB/s, CPU, power, CPU against power) and Fig 2a (context switches per second) against threads",
        unsupported: &[
            ("an ext4 file as the target", "HotStorage'22 read a file on ext4; the suite reads the device given (or a temporary file when none is): give a file on ext4 as the target to match the paper"),
        ], runs: Some(Runs { matrix: map_matrix, full: (10, "10s", Runtime("120s")), quick: (2, "0.5s", Runtime("1s")), report: Report::Panels(map_panels), profile: None, devices: Devices::Together }) },
    Part { name: "S3-table2-loads-stores", feeds: "Table 2: load and store instructions per I/O by kernel part (layer of the stack), interrupt against classic and hybrid polling, 4 KiB random reads at one thread, through the PMU's memory events (profiled runs of their own)",
        unsupported: &[], runs: Some(Runs { matrix: table2_matrix, full: (3, "2s", Runtime("20s")), quick: (1, "0.5s", Runtime("1s")), report: Report::Panels(table2_panels), profile: Some("layers"), devices: Devices::Together }) },
]};

fn table2_matrix(_quick: bool) -> String {
    r#"[matrix]
interface = ["pvsync2", "io_uring"]
complete = ["irq", "poll", "hybrid"]
bs = ["4k"]
threads = [1]
qd = [1]
scheduler = ["none"]
"#
    .to_string()
}

/// Table 2's title: HotStorage'22's loads and stores per kernel part.
pub const TABLE2: &str = "Table 2: load and store instructions per I/O by kernel part, per completion method";

/// Layers that are not the kernel's: Table 2 counts the kernel's parts only.
const NOT_KERNEL: [&str; 4] = ["idle", "other processes (user)", "iolab", "user libraries"];

/// Per kernel layer: (layer, loads per I/O, stores per I/O).
type LoadsStores = Vec<(String, f64, f64)>;

/// A run's self loads and stores per I/O by kernel layer, where the PMU counted them.
fn loads_stores(r: &Run) -> Option<LoadsStores> {
    let p = r.record.cost.profile.as_ref()?;
    let rows: LoadsStores = p
        .layers
        .iter()
        .filter(|l| !NOT_KERNEL.contains(&l.layer.as_deref().unwrap_or("")))
        .filter_map(|l| Some((l.layer.clone()?, l.self_loads_per_io?, l.self_stores_per_io?)))
        .collect();
    (!rows.is_empty()).then_some(rows)
}

/// Why a profiled run has no loads and stores: no profile, no PMU, or the memory event the PMU refused.
fn why_no_loads(r: &Run) -> Option<String> {
    let Some(p) = r.record.cost.profile.as_ref() else { return Some("the run was not profiled (--profile layers)".into()) };
    if let Some(u) = &p.unavailable {
        return Some(u.clone());
    }
    let h = p.hardware.as_ref()?;
    h.unavailable.clone().or_else(|| h.memory_unavailable.clone())
}

/// HotStorage'22 Table 2: per kernel part, the load and store instructions per I/O of each
/// completion method as realised on this kernel (the map's rule), or why they were not counted.
fn table2_panels(ctx: &mut Ctx) {
    let all = ctx.configs(|_| true);
    for (on, cs) in per_overlay(&all) {
        let runs = runs_of(&cs);
        let title = format!("{TABLE2}{on}");
        let (chosen, not_realised) = realised_methods(&cs);
        // Each method: the mean over its runs that counted, per layer.
        let mut methods: Vec<(String, LoadsStores)> = Vec::new();
        for (name, c) in &chosen {
            let per_run: Vec<LoadsStores> = c.runs.iter().filter_map(loads_stores).collect();
            if per_run.is_empty() {
                continue;
            }
            let n = per_run.len() as f64;
            let mut mean: LoadsStores = Vec::new();
            for (layer, loads, stores) in per_run.iter().flatten() {
                match mean.iter_mut().find(|m| &m.0 == layer) {
                    Some(m) => (m.1, m.2) = (m.1 + loads / n, m.2 + stores / n),
                    None => mean.push((layer.clone(), loads / n, stores / n)),
                }
            }
            methods.push((name.clone(), mean));
        }
        if methods.is_empty() {
            let why = runs.iter().find_map(|r| why_no_loads(r)).unwrap_or_else(|| "no run counted loads and stores".into());
            ctx.unavailable(&title, &format!("unavailable: {why}"), &runs);
            continue;
        }
        let mut layers: Vec<(String, f64)> = Vec::new();
        for (layer, loads, _) in methods.iter().flat_map(|m| &m.1) {
            match layers.iter_mut().find(|l| &l.0 == layer) {
                Some(l) => l.1 = l.1.max(*loads),
                None => layers.push((layer.clone(), *loads)),
            }
        }
        layers.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut columns = vec!["kernel part".to_string()];
        for (name, _) in &methods {
            columns.push(format!("{name}: loads per I/O"));
            columns.push(format!("{name}: stores per I/O"));
        }
        let mut t = Table { title: title.clone(), columns, ..Default::default() };
        let mut total = vec![0.0; 2 * methods.len()];
        for (layer, _) in &layers {
            let mut row = vec![layer.clone()];
            for (i, (_, m)) in methods.iter().enumerate() {
                let (loads, stores) = m.iter().find(|x| &x.0 == layer).map(|x| (x.1, x.2)).unwrap_or((0.0, 0.0));
                total[2 * i] += loads;
                total[2 * i + 1] += stores;
                row.extend([format!("{loads:.0}"), format!("{stores:.0}")]);
            }
            t.rows.push(row);
        }
        let mut row = vec!["kernel (all parts)".to_string()];
        row.extend(total.iter().map(|v| format!("{v:.0}")));
        t.rows.push(row);
        t.notes.push("Retired load and store instructions (the PMU's generic L1-dcache-loads and L1-dcache-stores events: MEM_INST_RETIRED.ALL_LOADS/ALL_STORES on Intel) read at each cycles sample on every CPU (--profile layers), each sample's counts since the previous one charged to the kernel part (layer) of its innermost frame; user space, idle and other processes left out. HotStorage'22 split by kernel source directory; iolab's parts are the layers of docs/profiling.md.".into());
        if !not_realised.is_empty() {
            t.notes.push(format!("Not realised on this kernel, so not a column: {}.", not_realised.join(", ")));
        }
        ctx.table(t, &runs);
    }
}

fn map_matrix(q: bool) -> String {
    format!(
        r#"[matrix]
interface = ["pvsync2", "io_uring"]
complete = ["irq", "poll", "hybrid"]
bs = {}
threads = {}
qd = [1]
scheduler = ["none"]
"#,
        pick(q, r#"["1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k"]"#, r#"["4k", "64k"]"#),
        pick(q, "[1, 2, 4, 8, 16, 32, 64]", "[1, 2]")
    )
}

fn map_panels(ctx: &mut Ctx) {
    let all = ctx.configs(|_| true);
    let four_k = ctx.configs(|r| r.bs == 4096);
    let mut t = Table::new(
        "S3 4 KiB: latency and IOPS per completion method",
        &[
            "threads",
            "method",
            "mean latency µs",
            "IOPS",
            "MB/s",
            "CPU cores",
            "context switches per I/O",
            "completion path taken",
            "mechanism on this kernel",
        ],
    );
    let mut sorted = four_k.clone();
    sorted.sort_by_key(|c| (c.first().threads, c.labelled()));
    for c in &sorted {
        t.rows.push(vec![
            c.first().threads.to_string(),
            c.labelled(),
            cell(c, &lat_mean_us),
            cell(c, &iops),
            cell(c, &|r| r.row.metrics.bw_bytes_per_s.map(|b| b / 1e6)),
            cell(c, &cores),
            cell(c, &Run::ctx_switches_per_io),
            paths_taken(c),
            mechanisms(c),
        ]);
    }
    if !sorted.is_empty() {
        ctx.table(t, &runs_of(&four_k));
    }
    // A tile ranks the methods of one machine on one device: a map per device or machine
    // overlaid (a map has no lines to overlay).
    for (on, all) in per_overlay(&all) {
        let runs = runs_of(&all);
        match energy_gap(&runs) {
            Some(reason) => {
                ctx.unavailable(&format!("Energy-efficiency map{on}: best completion method per block size and threads"), &reason, &runs);
                ctx.note("The map below ranks the methods by CPU time per I/O instead: a measured cost, but not energy.");
                let title = format!("CPU-cost map{on}: cheapest method per block size and threads (CPU time per I/O)");
                efficiency_map(ctx, &all, Metric::CpuNsPerIo, &title);
            }
            None => {
                let title =
                    format!("Energy-efficiency map{on}: best completion method per block size and threads ({})", energy_scope(&runs));
                efficiency_map(ctx, &all, Metric::JoulesPerIo, &title)
            }
        }
    }
    figures_one_two(ctx, &all);
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
    let mut tiles = Vec::new();
    let mut t = efficiency_table(metric, title);
    let mut disagreements = 0;
    for (col, bs) in bss.iter().enumerate() {
        for (row, th) in threads.iter().enumerate() {
            let here: Vec<&Config> = all.iter().filter(|c| c.first().bs == *bs && c.first().threads == *th).copied().collect();
            let Some(cell) = efficiency_tile(metric, &here, *bs, *th, (col, row)) else { continue };
            disagreements += usize::from(cell.disagree);
            tiles.push(cell.tile);
            t.rows.push(cell.row);
        }
    }
    let runs = runs_of(all);
    if tiles.is_empty() {
        ctx.unavailable(title, &format!("no run here measured {}", metric.name()), &runs);
        return;
    }
    let map = TileMap {
        title: title.to_string(),
        x_label: "block size".into(),
        y_label: "threads".into(),
        cols: bss.iter().map(|b| bs_name(*b)).collect(),
        rows: threads.iter().map(|t| t.to_string()).collect(),
        tiles,
    };
    ctx.figure(title, svg::tile_map(&map), &runs, efficiency_notes(metric));
    t.notes.push(format!("HotStorage'22 called a tie with a two-sample t-test; iolab decides with Welch's test (unequal variances) and lists Student's pooled test beside it. The two calls differ in {disagreements} tile(s)."));
    ctx.table(t, &runs);
}

/// The efficiency map's table, one row per tile: its columns.
fn efficiency_table(metric: Metric, title: &str) -> Table {
    let best_mean = format!("best's mean {}", metric.name());
    Table::new(
        format!("{title} (table)"),
        &[
            "bs",
            "threads",
            "best",
            &best_mean,
            "second",
            "margin",
            "not realised here",
            "Welch p",
            "call (Welch)",
            "Student p",
            "call (Student)",
        ],
    )
}

/// One tile of the efficiency map, its table row, and whether Welch's and Student's calls differ.
struct TileCell {
    tile: Tile,
    row: Vec<String>,
    disagree: bool,
}

/// The tile at (`col`, `row`) of block size `bs` and `th` threads over the configurations
/// `here`: the method realised with the best mean, its margin over the second and the tests'
/// calls. None where no method measured the metric.
fn efficiency_tile(metric: Metric, here: &[&Config], bs: u64, th: u32, (col, row): (usize, usize)) -> Option<TileCell> {
    let value = metric_value(metric);
    let (chosen, not_realised) = realised_methods(here);
    let methods: Vec<(String, Vec<f64>)> =
        chosen.iter().map(|(name, c)| (name.clone(), c.values(&value))).filter(|(_, v)| !v.is_empty()).collect();
    let w = tile_winner(metric, &methods, ALPHA)?;
    // The paper's margin is in bytes per joule: best's minus second's.
    let bytes_per_joule = |mean: f64| (mean > 0.0).then(|| bs as f64 / mean);
    let margin = match (metric, w.second_mean.and_then(bytes_per_joule), bytes_per_joule(w.best_mean)) {
        (Metric::JoulesPerIo, Some(s), Some(b)) => format!("+{} B/J", num(b - s)),
        _ => w.margin.map(|m| format!("+{:.1} %", m * 100.0)).unwrap_or("-".into()),
    };
    let call = |p: Option<f64>| match (w.call, p) {
        (TileCall::Alone, _) => "only method".to_string(),
        (_, None) => "untested (n < 2)".to_string(),
        (_, Some(p)) if p > ALPHA => "tie".to_string(),
        _ => "clear".to_string(),
    };
    let student_call = call(w.student.map(|s| s.p));
    let welch_call = call(w.welch.map(|s| s.p));
    let disagree = student_call != welch_call;
    let p = w.welch.map(|x| format!("p = {}", num(x.p))).unwrap_or_default();
    let second = w.second.clone().unwrap_or_default();
    let mut sub = match w.call {
        TileCall::Tie => vec![format!("tie with {second}"), format!("{margin}, {p}")],
        TileCall::Untested => vec![format!("{margin} over {second}"), "untested, n < 2".into()],
        TileCall::Alone => vec!["only method".into()],
        TileCall::Clear => vec![format!("{margin} over {second}"), p.clone()],
    };
    // A method whose runs fell back stands in no tile as itself: the tile says so.
    if !not_realised.is_empty() {
        sub.push(format!("not realised here: {}", not_realised.join(", ")));
    }
    let (text, key) =
        if w.call == TileCall::Tie { (format!("tie: {}", w.best), svg::TIE_KEY.to_string()) } else { (w.best.clone(), w.best.clone()) };
    let tile = Tile {
        col,
        row,
        text,
        key,
        tip: format!("{} · {} threads · best {} ({} {}) · {}", bs_name(bs), th, w.best, num(w.best_mean), metric.name(), sub.join(", ")),
        sub,
    };
    let row = vec![
        bs_name(bs),
        th.to_string(),
        w.best.clone(),
        num(w.best_mean),
        w.second.clone().unwrap_or("-".into()),
        margin,
        if not_realised.is_empty() { "-".into() } else { not_realised.join(", ") },
        w.welch.map(|x| num(x.p)).unwrap_or("-".into()),
        welch_call,
        w.student.map(|x| num(x.p)).unwrap_or("-".into()),
        student_call,
    ];
    Some(TileCell { tile, row, disagree })
}

/// The efficiency map's notes: what a tile says and how each method is realised.
fn efficiency_notes(metric: Metric) -> Vec<String> {
    let margin_unit = if metric == Metric::JoulesPerIo {
        "in bytes per joule (best's minus second's), as HotStorage'22 gave it"
    } else {
        "in % (no energy was measured, so not the paper's bytes per joule)"
    };
    vec![
        format!("Each tile: the completion method (interrupt, classic polling, hybrid polling, as HotStorage'22 compared them) with the best mean {} and its margin over the second {margin_unit}; \"tie\" where Welch's two-sample test of best against second gives p > 0.05.", metric.name()),
        "Each method is realised by the interface that really carried it out on this kernel: pvsync2 (the paper's) where its runs completed as asked, else io_uring; a run that fell back (e.g. pvsync2's RWF_HIPRI, completed by interrupt since Linux 5.18) never stands for the method it asked for, and its tile lists it under \"not realised here\".".into(),
    ]
}

/// HotStorage'22's three completion methods, by the `complete` value that asks for each.
pub const METHODS: [(&str, &str); 3] = [("irq", "interrupt"), ("poll", "classic polling"), ("hybrid", "hybrid polling")];

/// Whether a run asking for completion `complete` was carried out that way: an interrupt run
/// observed no polling; a polled run (classic or hybrid) was observed polled, or, where nothing
/// could be observed, was expected to poll; and it did not fall back.
pub fn realises(complete: &str, observed: Option<&str>, expected: Option<&str>, fell_back: bool) -> bool {
    if fell_back {
        return false;
    }
    match complete {
        "irq" => observed != Some("polled"),
        _ => match observed {
            Some("polled") => true,
            Some("interrupt") => false,
            _ => expected == Some("polled"),
        },
    }
}

fn config_realises(c: &Config) -> bool {
    c.runs.iter().all(|r| {
        let expected = r.record.completion_path.expected.map(|p| p.name());
        realises(&c.first().complete, r.row.metrics.completion_observed.as_deref(), expected, r.fell_back())
    })
}

/// The tile's configurations as the three methods: for each method the first interface (pvsync2,
/// the paper's, before io_uring) whose runs realised it, named "method (interface)"; and the
/// requests that did not realise their method, named "method (interface: what ran)".
fn realised_methods<'c>(here: &[&'c Config]) -> (Vec<(String, &'c Config)>, Vec<String>) {
    let mut chosen = Vec::new();
    let mut not_realised = Vec::new();
    for (complete, name) in METHODS {
        let mut asked: Vec<&Config> = here.iter().filter(|c| c.first().complete == complete).copied().collect();
        asked.sort_by_key(|c| (c.first().interface != "pvsync2", c.first().interface.clone()));
        match asked.iter().find(|c| config_realises(c)) {
            Some(c) => chosen.push((c.series(&format!("{name} ({})", c.first().interface)), *c)),
            None => not_realised.extend(asked.iter().map(|c| {
                let ran = c.runs.iter().find_map(|r| r.row.metrics.completion_observed.clone()).unwrap_or("not observed".into());
                format!("{name} ({}: {ran})", c.first().interface)
            })),
        }
    }
    (chosen, not_realised)
}

/// The label of a configuration in Figs 1-2: its method as realised, marked when it was not.
fn realised_label(c: &Config) -> String {
    let name = METHODS.iter().find(|(k, _)| *k == c.first().complete).map(|(_, n)| *n).unwrap_or("?");
    let mark = if config_realises(c) { "" } else { ", not realised" };
    format!("{name} ({}{mark})", c.first().interface)
}

/// A measured value of one run.
type RunValue = dyn Fn(&Run) -> Option<f64>;

/// HotStorage'22 Figs 1a-d and 2a against threads, per block size: MB/s, CPU, power, CPU
/// against power, and context switches per second.
fn figures_one_two(ctx: &mut Ctx, all: &[&Config]) {
    let label = |c: &Config| realised_label(c);
    for bs in distinct(all, |r| r.bs) {
        let cs = ctx.configs(|r| r.bs == bs);
        let tag = bs_name(bs);
        let per_thread: [(&str, &str, &RunValue); 3] = [
            ("Fig 1a: throughput", "MB/s", &|r: &Run| r.row.metrics.bw_bytes_per_s.map(|b| b / 1e6)),
            ("Fig 1b: CPU", "CPU cores (iolab's threads)", &cores),
            ("Fig 2a: context switches per second", "context switches per second (worker threads)", &|r: &Run| {
                Some(r.ctx_switches_per_io()? * r.row.metrics.iops?)
            }),
        ];
        for (title, y, y_of) in per_thread {
            plot(
                ctx,
                &cs,
                Plot {
                    title: format!("{title} against threads ({tag})"),
                    x: axis("threads", Scale::Log2),
                    y: axis(y, Scale::Linear),
                    x_of: &|r| r.threads as f64,
                    y_of,
                    series_of: &label,
                },
                vec![],
            );
        }
        let runs = runs_of(&cs);
        match energy_gap(&runs) {
            Some(reason) => {
                ctx.unavailable(&format!("Fig 1c: power against threads ({tag})"), &reason, &runs);
                ctx.unavailable(&format!("Fig 1d: CPU against power ({tag})"), &reason, &runs);
            }
            None => {
                let scope = energy_scope(&runs);
                plot(
                    ctx,
                    &cs,
                    Plot {
                        title: format!("Fig 1c: power against threads ({tag}; {scope})"),
                        x: axis("threads", Scale::Log2),
                        y: axis("W", Scale::Linear),
                        x_of: &|r| r.threads as f64,
                        y_of: &|r| r.watts(),
                        series_of: &label,
                    },
                    vec![],
                );
                scatter_cpu_power(ctx, &cs, &tag, &scope);
            }
        }
    }
}

/// Fig 1d: each configuration's CPU cores against its power, one point per configuration.
fn scatter_cpu_power(ctx: &mut Ctx, cs: &[&Config], tag: &str, scope: &str) {
    let label = |c: &Config| realised_label(c);
    let watts = |c: &Config| c.summary(&|r: &Run| r.watts()).map(|s| s.mean);
    let by = crate::report::panels::PlotBy {
        title: format!("Fig 1d: CPU against power ({tag}; {scope})"),
        x: axis("W", Scale::Linear),
        y: axis("CPU cores (iolab's threads)", Scale::Linear),
        x_of: &watts,
        y_of: &cores,
        series_of: &label,
    };
    crate::report::panels::plot_by(ctx, cs, by, vec!["One point per configuration: its mean power and mean CPU cores.".into()], Vec::new());
}

// The map's reduction, a pure function on replicate values (rules in docs/report.md).

/// How sure the winner of a tile is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TileCall {
    /// Only one method measured in this tile.
    Alone,
    /// Best and second differ: Welch's p ≤ α.
    Clear,
    /// Best and second are not distinguishable: Welch's p > α.
    Tie,
    /// A side has fewer than two replicates: no test possible.
    Untested,
}

/// The most efficient method of one tile and how far ahead of the second it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TileWinner {
    pub best: String,
    pub best_mean: f64,
    pub second: Option<String>,
    pub second_mean: Option<f64>,
    /// How much better the best is than the second, as a fraction: best / second − 1 when higher
    /// is better, second / best − 1 when lower is better (so 0.12 = 12 % better either way).
    pub margin: Option<f64>,
    /// Welch's test of best against second (the decision).
    pub welch: Option<TTest>,
    /// Student's pooled test of the same pair, for papers that used it; never the decision.
    pub student: Option<TTest>,
    pub call: TileCall,
}

/// The winner of a tile: methods ranked by the mean of `metric` (its direction decides "best"),
/// then best against second with Welch's two-sample test — one comparison, so no multiple-test
/// correction. A tie when p > α. None when no method has a usable value.
pub fn tile_winner(metric: Metric, methods: &[(String, Vec<f64>)], alpha: f64) -> Option<TileWinner> {
    let ranked = compare::rank(metric, methods, alpha);
    let best = ranked.first()?;
    let values = |key: &str| methods.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_slice()).unwrap_or(&[]);
    let Some(second) = ranked.get(1) else {
        return Some(TileWinner {
            best: best.config_key.clone(),
            best_mean: best.summary.mean,
            second: None,
            second_mean: None,
            margin: None,
            welch: None,
            student: None,
            call: TileCall::Alone,
        });
    };
    let (b, s) = (best.summary.mean, second.summary.mean);
    let margin = if metric.higher_is_better() { (s != 0.0).then(|| b / s - 1.0) } else { (b != 0.0).then(|| s / b - 1.0) };
    let welch = stats::welch_t_test(values(&best.config_key), values(&second.config_key));
    let student = stats::student_t_test(values(&best.config_key), values(&second.config_key));
    let call = match welch {
        None => TileCall::Untested,
        Some(t) if t.p > alpha => TileCall::Tie,
        Some(_) => TileCall::Clear,
    };
    Some(TileWinner {
        best: best.config_key.clone(),
        best_mean: b,
        second: Some(second.config_key.clone()),
        second_mean: Some(s),
        margin,
        welch,
        student,
        call,
    })
}
