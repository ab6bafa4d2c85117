//! S1, HotStorage'23: energy implications of I/O interface design choices. The latency table
//! with each configuration's slowdown against the fastest (the paper's Table 2), and IOPS, power,
//! IOPS per joule and cores against queue depth and against threads.
use super::{pick, Budget::Runtime, Devices, Part, Report, Runs, Study};
use crate::analysis::compare::{self, Metric, Verdict, ALPHA};
use crate::analysis::stats;
use crate::record::read::Latency;
use crate::report::data::{Config, Run};
use crate::report::panels::{
    axis, bs_name, cell, cores, distinct, energy_gap, energy_scope, iops, num, paths_taken, plot, runs_of, us, Figure, Plot,
};
use crate::report::sections::Ctx;
use crate::report::svg::Scale;
use crate::report::tables::Table;
use crate::store::RunRow;
use serde::Serialize;

pub const STUDY: Study = Study {
    id: "S1",
    title: "HotStorage'23: energy implications of I/O interface design choices",
    setup: super::NO_SCHEDULER_FULL_SPEED,
    fills: None,
    parts: &[
        Part {
            name: "S1.1-latency",
            feeds: "Table 2: p50/p99 latency per (interface, submission, completion), slowdown vs fastest",
            unsupported: &[],
            runs: Some(Runs {
                matrix: latency_matrix,
                full: (5, "60s", Runtime("120s")),
                quick: (2, "0.5s", Runtime("2s")),
                report: Report::Panels(latency_panels),
                profile: None,
                devices: Devices::Together,
            }),
        },
        Part {
            name: "S1.2-queue-depth",
            feeds: "IOPS, W and IOPS/J against queue depth per block size; cores used",
            unsupported: &[],
            runs: Some(Runs {
                matrix: depth_matrix,
                full: (5, "60s", Runtime("120s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(depth_panels),
                profile: None,
                devices: Devices::Together,
            }),
        },
        Part {
            name: "S1.3-threads",
            feeds: "multithreaded panels: IOPS, W, IOPS/J against threads; cores used",
            unsupported: &[],
            runs: Some(Runs {
                matrix: threads_matrix,
                full: (5, "60s", Runtime("120s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(threads_panels),
                profile: None,
                devices: Devices::Together,
            }),
        },
    ],
};

const ALL_MODES: &str = r#"
[[rule]]
when = { interface = ["psync", "libaio", "posixaio"], submit = "sqpoll" }
action = "drop"
reason = "only io_uring has a submission-polling thread"
"#;

fn latency_matrix(_: bool) -> String {
    format!(
        r#"[matrix]
interface = ["psync", "pvsync2", "posixaio", "libaio", "io_uring", "vfio-nvme"]
submit = ["syscall", "sqpoll"]
complete = ["irq", "poll", "hybrid"]
rw = ["randread", "randwrite"]
bs = ["4k"]
qd = [1]
{ALL_MODES}"#
    )
}

fn depth_matrix(q: bool) -> String {
    format!(
        r#"[matrix]
interface = ["posixaio", "libaio", "io_uring", "vfio-nvme"]
submit = ["syscall", "sqpoll"]
complete = ["irq", "poll"]
rw = ["randread", "randwrite"]
bs = {}
qd = {}
{ALL_MODES}"#,
        pick(q, r#"["4k", "16k", "128k"]"#, r#"["4k", "128k"]"#),
        pick(q, "[1, 2, 4, 8, 16, 31]", "[1, 8]")
    )
}

fn threads_matrix(q: bool) -> String {
    format!(
        r#"[matrix]
interface = ["psync", "pvsync2", "posixaio", "libaio", "io_uring", "vfio-nvme"]
submit = ["syscall", "sqpoll"]
complete = ["irq", "poll"]
rw = ["randread", "randwrite"]
bs = {}
threads = {}
qd = [1]
{ALL_MODES}"#,
        pick(q, r#"["4k", "16k", "128k"]"#, r#"["4k"]"#),
        pick(q, "[1, 2, 4, 8, 16, 31]", "[1, 2]")
    )
}

fn latency_panels(ctx: &mut Ctx) {
    let columns: [(&str, &str, Figure<Latency>); 4] =
        [("randread", "p50", |l| l.p50), ("randread", "p99", |l| l.p99), ("randwrite", "p50", |l| l.p50), ("randwrite", "p99", |l| l.p99)];
    // A column's latency of a run, µs.
    let lat_us = |lat: Figure<Latency>| move |r: &Run| us(lat(&r.record.results.total.lat_ns));
    let configs = ctx.configs(|_| true);
    let mut methods: Vec<String> = configs.iter().map(|c| c.labelled()).collect();
    methods.dedup();
    methods.sort();
    methods.dedup();
    let find = |m: &str, rw: &str| configs.iter().find(|c| c.labelled() == m && c.first().rw == rw).copied();
    let rows: Vec<(String, Vec<Option<f64>>)> = methods
        .iter()
        .map(|m| {
            (m.clone(), columns.iter().map(|(rw, _, lat)| find(m, rw).and_then(|c| c.summary(&lat_us(*lat))).map(|s| s.mean)).collect())
        })
        .collect();
    // Welch against the fastest in randread p50, Holm-corrected over the ranking.
    let p50: Vec<(String, Vec<f64>)> =
        methods.iter().filter_map(|m| Some((m.clone(), find(m, "randread")?.values(&lat_us(|l| l.p50))))).collect();
    let ranked = compare::rank(Metric::LatP99Ns, &p50, ALPHA);
    let mut t = Table::new(
        "HotStorage'23 Table 2: p50/p99 latency (µs), % slower than the user-space driver, and the completion mechanism this kernel used",
        &[
            "configuration",
            "mechanism (this kernel)",
            "randread p50",
            "randread p99",
            "randwrite p50",
            "randwrite p99",
            "% slower than the user-space driver",
            "× the fastest",
            "randread p50 vs fastest (Welch, Holm)",
            "completion path taken",
        ],
    );
    // The paper's baseline: the user-space driver's row (SPDK there) on the same device/machine.
    let baseline_of = |m: &str| {
        let c = columns.iter().find_map(|(rw, _, _)| find(m, rw))?;
        let name = c.series(crate::report::data::USER_SPACE_METHOD);
        rows.iter().find(|(n, _)| *n == name).map(|(_, v)| v.clone())
    };
    let mut any_baseline = false;
    for row in slowdown_table(&rows) {
        let mine: Vec<&Config> = columns.iter().filter_map(|(rw, _, _)| find(&row.name, rw)).collect();
        let mut mechanisms: Vec<String> = mine.iter().map(|c| crate::report::panels::mechanisms(c)).collect();
        mechanisms.sort();
        mechanisms.dedup();
        let mut cells = vec![row.name.clone(), mechanisms.join("; ")];
        for (i, (rw, _, lat)) in columns.iter().enumerate() {
            cells.push(match (row.values[i], find(&row.name, rw)) {
                (Some(_), Some(c)) => cell(c, &lat_us(*lat)),
                _ => "not measured".into(),
            });
        }
        let baseline = baseline_of(&row.name);
        any_baseline |= baseline.is_some();
        cells.push(match baseline {
            None => "no user-space row".into(),
            Some(b) if b == row.values => "baseline".into(),
            Some(b) => percent_slower(&row.values, &b).map(|p| format!("{} %", num(p))).unwrap_or("-".into()),
        });
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
        let mut paths: Vec<String> = mine.iter().map(|c| paths_taken(c)).collect();
        paths.sort();
        paths.dedup();
        cells.push(paths.join(", "));
        t.rows.push(cells);
    }
    t.notes.push("% slower than the user-space driver: for each of the four latency columns, (the configuration's mean − the user-space driver's mean) / the user-space driver's mean, averaged over the columns both have, as HotStorage'23 Table 2 set each interface against SPDK. × the fastest: the configuration's mean over the fastest configuration's in each column, averaged; rows sorted by it.".into());
    t.notes.push("Mechanism: how this kernel carried out the requested completion, from each run's record (pvsync2's RWF_HIPRI poll completes by interrupt since Linux 5.18, so such a row is an interrupt row whatever its name).".into());
    if !any_baseline {
        let why = ctx
            .skipped()
            .iter()
            .find(|(key, _)| key.split(',').any(|kv| kv.strip_prefix("interface=").is_some_and(crate::interfaces::user_space)))
            .map(|(_, why)| why.clone());
        let why = why.as_deref().unwrap_or("no run of iolab's user-space driver is stored in this sweep");
        // The baseline's row stands in the table, saying why it has no numbers.
        let mut cells = vec![crate::report::data::USER_SPACE_METHOD.to_string(), "-".into()];
        cells.extend(columns.iter().map(|_| "not run here".to_string()));
        cells.extend([format!("not run: {why}"), "-".into(), "-".into(), "-".into()]);
        t.rows.push(cells);
        t.notes.push(format!(
            "The paper's baseline, the user-space driver (SPDK there), did not run here, so no row has its % slower: {why}."
        ));
    }
    let runs = ctx.all_runs();
    ctx.table(t, &runs);
}

fn scaling(ctx: &mut Ctx, x_name: &str, x_of: &dyn Fn(&RunRow) -> f64) {
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
            plot(
                ctx,
                &cs,
                Plot {
                    title: format!("IOPS against {x_name} ({tag})"),
                    x: axis(x_name, x_scale),
                    y: axis("IOPS", Scale::Linear),
                    x_of,
                    y_of: &iops,
                    series_of: &method,
                },
                vec![],
            );
            match energy_gap(&runs_of(&cs)) {
                Some(reason) => ctx.unavailable(&format!("Power and IOPS per joule against {x_name} ({tag})"), &reason, &runs_of(&cs)),
                None => {
                    let scope = energy_scope(&runs_of(&cs));
                    plot(
                        ctx,
                        &cs,
                        Plot {
                            title: format!("Power against {x_name} ({tag}; {scope})"),
                            x: axis(x_name, x_scale),
                            y: axis("W", Scale::Linear),
                            x_of,
                            y_of: &|r| r.watts(),
                            series_of: &method,
                        },
                        vec![],
                    );
                    plot(
                        ctx,
                        &cs,
                        Plot {
                            title: format!("IOPS per joule against {x_name} ({tag}; {scope})"),
                            x: axis(x_name, x_scale),
                            y: axis("IOPS per joule", Scale::Linear),
                            x_of,
                            y_of: &|r| r.iops_per_joule(),
                            series_of: &method,
                        },
                        vec![],
                    );
                }
            }
            plot(
                ctx,
                &cs,
                Plot {
                    title: format!("CPU cores used against {x_name} ({tag})"),
                    x: axis(x_name, x_scale),
                    y: axis("CPU cores (iolab's threads)", Scale::Linear),
                    x_of,
                    y_of: &cores,
                    series_of: &method,
                },
                vec![],
            );
        }
    }
}

fn depth_panels(ctx: &mut Ctx) {
    scaling(ctx, "queue depth", &|r| r.qd as f64);
}

fn threads_panels(ctx: &mut Ctx) {
    scaling(ctx, "threads", &|r| r.threads as f64);
}

// The S1 table's reduction, a pure function on replicate means (rules in docs/report.md).

/// One configuration's row of a slowdown table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlowdownRow {
    pub name: String,
    /// The row's value in each column (e.g. read p50, read p99, write p50, write p99); None where
    /// the configuration has no measurement.
    pub values: Vec<Option<f64>>,
    /// Mean over the columns the row has of value / the column's smallest value; None when the
    /// row has no column with a positive smallest value.
    pub slowdown: Option<f64>,
}

/// How much slower `values` are than `baseline`, in %: per column (baseline − value is negative
/// when slower) the relative difference, averaged over the columns both have (lower is better).
pub fn percent_slower(values: &[Option<f64>], baseline: &[Option<f64>]) -> Option<f64> {
    let per_column: Vec<f64> = values
        .iter()
        .zip(baseline)
        .filter_map(|(v, b)| {
            let (v, b) = ((*v)?, (*b)?);
            (v.is_finite() && b.is_finite() && b > 0.0).then(|| 100.0 * (v - b) / b)
        })
        .collect();
    stats::mean(&per_column)
}

/// Slowdown of each configuration against the fastest, column by column (lower is better in
/// every column), averaged over the columns the configuration has. Sorted by slowdown, fastest
/// first; rows without a slowdown last, in input order.
pub fn slowdown_table(rows: &[(String, Vec<Option<f64>>)]) -> Vec<SlowdownRow> {
    let columns = rows.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    let fastest: Vec<Option<f64>> = (0..columns)
        .map(|c| rows.iter().filter_map(|(_, v)| v.get(c).copied().flatten()).filter(|x| x.is_finite() && *x > 0.0).reduce(f64::min))
        .collect();
    let mut out: Vec<SlowdownRow> = rows
        .iter()
        .map(|(name, values)| {
            let ratios: Vec<f64> = values.iter().zip(&fastest).filter_map(|(v, f)| Some(v.filter(|x| x.is_finite())? / (*f)?)).collect();
            SlowdownRow { name: name.clone(), values: values.clone(), slowdown: stats::mean(&ratios) }
        })
        .collect();
    // Stable sort: equal slowdowns keep input order; None sorts after every number.
    out.sort_by(|a, b| match (a.slowdown, b.slowdown) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    out
}
