//! S2, CHEOPS'23: performance characterization of storage stacks. psync, libaio, iou (irq), iou-c
//! (IOPOLL) and iou-s (SQPOLL + IOPOLL): CPU counters per I/O at QD1, J-curves with their
//! saturation points, IOPS against cores, and the I/O schedulers compared.
use super::{pick, AtSaturation, Budget::Runtime, Devices, Part, Report, Runs, Study};
use crate::analysis::compare::{self, Metric, Verdict, ALPHA};
use crate::plan::matrix::TARGET_SET;
use crate::record::read::Counters;
use crate::report::data::{devices_said, Config};
use crate::report::panels::{
    axis, cell, cores, counters_gap, distinct, iops, lat_mean_us, mean_ci, num, plot, plot_with, point, runs_of, Figure, Plot,
};
use crate::report::sections::Ctx;
use crate::report::svg::{self, Callout, Chart, Scale, Series};
use crate::report::tables::Table;

pub const STUDY: Study = Study {
    id: "S2",
    title: "CHEOPS'23: performance characterization of storage stacks",
    // "All devices ... are written completely 10 times" (CHEOPS'23 §3).
    fills: Some((10, 1)),
    // Scheduler none in every part, the paper's baseline ("comparing their IOPS performance with
    // a none scheduler", §3.3): S2.4's scheduler axis sets its own per run.
    setup: &["scheduler=none"],
    parts: &[
        Part {
            name: "S2.1-qd1",
            feeds: "IOPS, instructions per I/O (process and system-wide), IPC, cache-miss rate at QD1 on one core",
            unsupported: &[],
            runs: Some(Runs {
                matrix: qd1_matrix,
                full: (3, "20s", Runtime("120s")),
                quick: (2, "0.5s", Runtime("2s")),
                report: Report::Panels(qd1_panels),
                profile: None,
                devices: Devices::First,
            }),
        },
        Part {
            name: "S2.2-jcurve",
            feeds: "Fig 5: J-curves (mean latency against IOPS) with the saturation point, one core",
            unsupported: &[],
            runs: Some(Runs {
                matrix: jcurve_matrix,
                full: (3, "20s", Runtime("120s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(jcurve_panels),
                profile: None,
                devices: Devices::OneAndAll,
            }),
        },
        Part {
            name: "S2.3-cores",
            feeds: "Fig 6: IOPS against cores at QD128 (iou-s charged a core for each SQ-poll thread), spread over the NUMA nodes and restricted to the device's; cores to peak",
            unsupported: &[],
            runs: Some(Runs {
                matrix: cores_matrix,
                full: (3, "20s", Runtime("120s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(cores_panels),
                profile: None,
                devices: Devices::Together,
            }),
        },
        Part {
            name: "S2.4-schedulers",
            feeds: "Table 2: IOPS per scheduler and ratio to none; Fig 8: thread scaling per scheduler; each stack at its own saturation point, found in S2.2's stored runs",
            unsupported: &[(
                "Fig 8's lock profile (mq-deadline's share of CPU cycles spinning on the hardware context's lock)",
                "the part's runs are not profiled, so that its IOPS stay unperturbed; profile the mq-deadline configurations at 12-16 threads with --profile layers for the functions' shares",
            )],
            runs: Some(Runs {
                matrix: schedulers_matrix,
                full: (3, "20s", Runtime("120s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(schedulers_panels),
                profile: None,
                devices: Devices::Together,
            }),
        },
        Part {
            name: "S2.5-where-the-time-goes",
            feeds: "Fig 4: CPU per I/O split by layer of the stack (iolab, user libraries, io_uring/libaio, block layer, driver, rest of kernel), in % as the paper draws it, every interface at QD1 and at its own saturation point (found in S2.2's stored runs), one core; layers profiled alone (stages in S2.6, so neither tracer is charged to the other)",
            unsupported: &[],
            runs: Some(Runs {
                matrix: where_the_time_goes_matrix,
                full: (2, "10s", Runtime("30s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(where_the_time_goes_panels),
                profile: Some("layers"),
                devices: Devices::First,
            }),
        },
        Part {
            name: "S2.6-request-stages",
            feeds: "Each request's latency by stage of the stack (Fig 5c's breakdown), every interface at QD1 and at its own saturation point (found in S2.2's stored runs), one core, traced in runs of their own",
            unsupported: &[],
            runs: Some(Runs {
                matrix: where_the_time_goes_matrix,
                full: (2, "10s", Runtime("30s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(request_stages_panels),
                profile: Some("stages"),
                devices: Devices::First,
            }),
        },
    ],
};

/// The parts measured at each stack's saturation point, as CHEOPS'23 measured Fig 5c and Table 2:
/// planned from S2.2's stored J-curves (`Part::plan_at`), S2.5 and S2.6 keeping QD1 beside it.
pub const AT_SATURATION: &[(&str, AtSaturation)] = &[
    ("S2.4-schedulers", AtSaturation { of: "S2.2-jcurve", keep: &[] }),
    ("S2.5-where-the-time-goes", AtSaturation { of: "S2.2-jcurve", keep: &[1] }),
    ("S2.6-request-stages", AtSaturation { of: "S2.2-jcurve", keep: &[1] }),
];

/// S2.5's panels are the profiled sweep's (report/profiles.rs); its layer split stands for Fig 4.
fn where_the_time_goes_panels(ctx: &mut Ctx) {
    use crate::report::profiles::{INSTRUCTIONS, LAYERS};
    ctx.cite(LAYERS, "CHEOPS'23 Fig 4, in CPU time");
    ctx.cite(INSTRUCTIONS, "CHEOPS'23 Fig 4");
    super::profiled_part(ctx);
    let cs = ctx.configs(|_| true);
    ctx.note(at_saturation_said(&cs, &[1]));
}

/// S2.6: the request stages, traced in runs of their own so that the tracer's own CPU never
/// lands in S2.5's layer split.
fn request_stages_panels(ctx: &mut Ctx) {
    use crate::report::profiles::STAGES;
    ctx.cite(STAGES, "CHEOPS'23 Fig 5c's breakdown by stage");
    super::profiled_part(ctx);
    let cs = ctx.configs(|_| true);
    ctx.note(at_saturation_said(&cs, &[1]));
}

/// What queue depth each stack of a part measured at saturation (`AT_SATURATION`) ran at, from
/// its runs (besides `keep`): each at its own point, as the suite plans it from S2.2's stored
/// J-curves; every stack at QD128 (an older suite's plan, which let QD128 stand for the point);
/// or several per stack (a plan not made from S2.2's result).
fn at_saturation_said(cs: &[&Config], keep: &[u32]) -> String {
    let mut stacks: Vec<(String, Vec<u32>)> = Vec::new();
    for c in cs {
        let (m, qd) = (c.labelled(), c.first().qd);
        match stacks.iter_mut().find(|(s, _)| *s == m) {
            Some((_, qds)) if qds.contains(&qd) => {}
            Some((_, qds)) => qds.push(qd),
            None => stacks.push((m, vec![qd])),
        }
    }
    for (_, qds) in &mut stacks {
        qds.sort();
        // QD1 is the other figure's (Fig 4's) unless it is all there is.
        if qds.iter().any(|q| !keep.contains(q)) {
            qds.retain(|q| !keep.contains(q));
        }
    }
    let qds = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    let each: Vec<String> = stacks.iter().map(|(m, v)| format!("{m} QD {}", qds(v))).collect();
    if stacks.is_empty() {
        "No runs here to say at which queue depth each stack was measured.".into()
    } else if stacks.iter().all(|(_, v)| v == &[128]) {
        "Every stack ran at QD128, which stands for its saturation point here: it is at or past every interface's J-curve heel in S2.2 (see its saturation table), where CHEOPS'23 measured at the heel itself (a suite run now plans this part at each stack's own point).".into()
    } else if stacks.iter().all(|(_, v)| v.len() == 1) {
        format!("Each stack ran at its own saturation point, as CHEOPS'23 measured at each stack's J-curve heel: the queue depth S2.2-jcurve's stored runs gave it by the rule of its saturation table (S2.2's deepest where a stack did not saturate within its sweep). From the runs here: {}.", each.join("; "))
    } else {
        format!(
            "Not measured at one saturation point per stack (this part's plan was not made from S2.2's stored runs): {}.",
            each.join("; ")
        )
    }
}

// CHEOPS'23 names: psync, libaio, iou (irq), iou-c (IOPOLL), iou-s (SQPOLL + IOPOLL).
const CHEOPS_RULES: &str = r#"
[[rule]]
when = { interface = ["psync", "libaio"], complete = "poll" }
action = "drop"
reason = "CHEOPS'23 polls only with io_uring"
[[rule]]
when = { interface = ["psync", "libaio"], submit = "sqpoll" }
action = "drop"
reason = "only io_uring has a submission-polling thread"
[[rule]]
when = { submit = "sqpoll", complete = "irq" }
action = "drop"
reason = "CHEOPS'23's iou-s is SQPOLL with IOPOLL"
"#;

// Every part pinned to the device's node, as the paper pinned fio to node 1 (with iou-s's SQ
// thread on a second core of it).
fn qd1_matrix(_: bool) -> String {
    format!("[matrix]\ninterface = [\"psync\", \"libaio\", \"io_uring\", \"vfio-nvme\"]\nsubmit = [\"syscall\", \"sqpoll\"]\ncomplete = [\"irq\", \"poll\"]\nqd = [1]\n[options]\nnuma = \"local\"\n{CHEOPS_RULES}")
}

/// The J-curves' queue depths (S2.2), which the parts measured at saturation choose from.
fn jcurve_qds(q: bool) -> String {
    pick(q, "[1, 2, 4, 8, 16, 32, 64, 128]", "[1, 4, 16, 64]")
}

fn jcurve_matrix(q: bool) -> String {
    format!("[matrix]\ninterface = [\"libaio\", \"io_uring\", \"vfio-nvme\"]\nsubmit = [\"syscall\", \"sqpoll\"]\ncomplete = [\"irq\", \"poll\"]\nqd = {}\n[options]\nnuma = \"local\"\n{CHEOPS_RULES}",
        jcurve_qds(q))
}

// One core at a time up to the machine's, so 5 cores to peak can be told from 13 (the paper's
// SPDK and iou-c). Unrestricted, so threads past one node's CPUs spread to the next node as the
// paper's did on its 2 x 10 cores, and restricted to the device's node beside it where the
// machine has nodes to tell apart (Fig 8's dotted lines); on one node both are the same CPUs.
fn cores_matrix(q: bool) -> String {
    let steps: Vec<String> = (1..=crate::host::online_cpus()).map(|n| n.to_string()).collect();
    let numa = if crate::host::numa_nodes().len() > 1 { "[\"off\", \"local\"]" } else { "[\"local\"]" };
    format!("[matrix]\ninterface = [\"libaio\", \"io_uring\", \"vfio-nvme\"]\nsubmit = [\"syscall\", \"sqpoll\"]\ncomplete = [\"irq\", \"poll\"]\nqd = [128]\nthreads = {}\nnuma = {numa}\n{CHEOPS_RULES}",
        pick(q, &format!("[{}]", steps.join(", ")), "[1, 2]"))
}

/// Fig 4 (QD1) and Fig 5c (at each stack's saturation point, which S2.2's J-curves find): every
/// queue depth of S2.2's here, each stack's own kept by `Part::plan_at`.
fn where_the_time_goes_matrix(q: bool) -> String {
    format!("[matrix]\ninterface = [\"psync\", \"libaio\", \"io_uring\", \"vfio-nvme\"]\nsubmit = [\"syscall\", \"sqpoll\"]\ncomplete = [\"irq\", \"poll\"]\nqd = {}\n[options]\ncpus = [0]\n{CHEOPS_RULES}", jcurve_qds(q))
}

// Fig 8: each scheduler node-local and unrestricted where the machine has nodes to tell apart;
// on one node the two are the same CPUs, so only the node-local runs are made. Table 2 at each
// stack's saturation point: every queue depth of S2.2's here, each stack's own kept by
// `Part::plan_at`.
fn schedulers_matrix(q: bool) -> String {
    let numa = if crate::host::numa_nodes().len() > 1 { "[\"local\", \"off\"]" } else { "[\"local\"]" };
    format!("[matrix]\ninterface = [\"io_uring\"]\nsubmit = [\"syscall\", \"sqpoll\"]\ncomplete = [\"irq\", \"poll\"]\nqd = {}\nthreads = {}\nscheduler = [\"none\", \"mq-deadline\", \"kyber\", \"bfq\"]\nnuma = {numa}\n{CHEOPS_RULES}",
        jcurve_qds(q), pick(q, "[1, 2, 4, 8, 16, 20]", "[1]"))
}

fn qd1_panels(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let runs = runs_of(&cs);
    let gap = counters_gap(&runs);
    let mut t = Table::new(
        "S2 QD1 on one core: IOPS (Fig 2) and CPU counters per I/O, process and system-wide (Fig 3)",
        &[
            "configuration",
            "IOPS",
            "instructions per I/O (iolab)",
            "instructions per I/O (system)",
            "IPC (iolab)",
            "IPC (system)",
            "cache-miss rate (iolab)",
            "cache-miss rate (system)",
            "CPU cores",
        ],
    );
    for c in &cs {
        t.rows.push(vec![
            c.labelled(),
            cell(c, &iops),
            cell(c, &|r| r.counter(|k| k.workload_per_io.instructions)),
            cell(c, &|r| r.counter(|k| k.system_per_io.instructions)),
            cell(c, &|r| r.counter(|k| k.workload_per_io.ipc)),
            cell(c, &|r| r.counter(|k| k.system_per_io.ipc)),
            cell(c, &|r| r.counter(|k| k.workload_per_io.cache_miss_rate)),
            cell(c, &|r| r.counter(|k| k.system_per_io.cache_miss_rate)),
            cell(c, &cores),
        ]);
    }
    if let Some(reason) = &gap {
        t.notes.push(format!("Counters not available here: {reason}"));
    }
    ctx.table(t, &runs);
    if let Some(reason) = gap {
        ctx.unavailable("Instructions per I/O and IPC at QD1", &reason, &runs);
    } else {
        let method = |c: &Config| c.method();
        plot(
            ctx,
            &cs,
            Plot {
                title: "Instructions per I/O at QD1".into(),
                x: axis("threads", Scale::Log2),
                y: axis("instructions per I/O", Scale::Linear),
                x_of: &|r| r.threads as f64,
                y_of: &|r| r.counter(|k| k.workload_per_io.instructions),
                series_of: &method,
            },
            vec![],
        );
    }
}

/// Fig 5: the J-curves of one device (5a) and of all the devices given together (5b), from one
/// suite run (`Devices::OneAndAll`), each with its saturation points; then 1 against N.
fn jcurve_panels(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let runs = runs_of(&cs);
    let gap = counters_gap(&runs);
    // Fewest devices first: 5a, then 5b.
    let mut targets: Vec<Option<&str>> = cs.iter().map(|c| c.target()).collect();
    targets.sort_by_key(|t| (t.map_or(1, |t| t.split(TARGET_SET).count()), *t));
    targets.dedup();
    let mut t = Table::new(
        "S2 saturation points (J-curve heel) and the CPU's efficiency there (Fig 7)",
        &[
            "configuration",
            "devices",
            "saturation QD",
            "IOPS there",
            "mean latency µs there",
            "instructions per I/O there",
            "IPC there",
            "cache-miss rate there",
            "rule",
        ],
    );
    // (method and machine, devices) -> the highest mean IOPS and its queue depth.
    let mut peaks: Vec<(String, usize, f64, u32)> = Vec::new();
    for (n, target) in targets.iter().enumerate() {
        let mine: Vec<&Config> = cs.iter().filter(|c| c.target() == *target).copied().collect();
        let devices = target.map_or("the target".to_string(), devices_counted);
        let (series, callouts) =
            jcurves(&mine, &devices, &gap, &mut t, &mut |name, iops, qd| match peaks.iter_mut().find(|p| p.0 == name && p.1 == n) {
                Some(p) if p.2 >= iops => {}
                Some(p) => (p.2, p.3) = (iops, qd),
                None => peaks.push((name.to_string(), n, iops, qd)),
            });
        let fig = match (targets.len(), n) {
            (1, _) => "",
            (_, 0) => "Fig 5a, ",
            _ => "Fig 5b, ",
        };
        let title = match target {
            None => format!("J-curves, {fig}mean latency against IOPS"),
            Some(_) => format!("J-curves, {fig}{devices}: mean latency against IOPS"),
        };
        let svg = svg::chart(&Chart {
            title: format!("{title} (circled: saturation point)"),
            x: axis("IOPS", Scale::Linear),
            y: axis("mean latency (µs)", Scale::Linear),
            series,
            callouts,
            lines: true,
        });
        let notes =
            vec!["Each point is one queue depth (hover for it); circled points are saturation points by the documented rule.".into()];
        ctx.figure(&title, svg, &runs_of(&mine), notes);
    }
    t.notes.push("Saturation rule: the first queue depth whose next step gains < 5 % IOPS per doubling while mean latency grows > 20 % per doubling (docs/statistics.md), applied to the replicate means.".into());
    if let Some(reason) = &gap {
        t.notes.push(format!("Counters not available here: {reason}"));
    }
    ctx.table(t, &runs);
    if targets.len() < 2 {
        ctx.note("CHEOPS'23 Fig 5 draws one device against all of them (7 in the paper); this suite run was given one device, so only its J-curves are drawn: give several (iolab suite run S2 DEV1 DEV2 ...) for the first alone against all together.");
        return;
    }
    let all = targets.len() - 1;
    let mut one_n = Table::new(
        format!("S2 one device against {}: peak IOPS", targets[all].map_or("all".to_string(), devices_counted)),
        &["configuration", "1 device: peak IOPS (QD)", "all together: peak IOPS (QD)", "all / 1"],
    );
    let mut names: Vec<&String> = peaks.iter().map(|p| &p.0).collect();
    names.sort();
    names.dedup();
    for name in names {
        let at = |n: usize| peaks.iter().find(|p| p.0 == *name && p.1 == n);
        let said = |p: Option<&(String, usize, f64, u32)>| p.map_or("not measured".to_string(), |p| format!("{} ({})", num(p.2), p.3));
        let ratio = match (at(0), at(all)) {
            (Some(a), Some(b)) if a.2 > 0.0 => format!("{}×", num(b.2 / a.2)),
            _ => "-".into(),
        };
        one_n.rows.push(vec![name.clone(), said(at(0)), said(at(all)), ratio]);
    }
    one_n.notes.push("Peak: the highest replicate-mean IOPS over the queue depths, as the J-curves reach it.".into());
    ctx.table(one_n, &runs);
}

/// A target's devices counted: "1 device (nvme0n1)", "7 devices together (nvme0n1+...)".
fn devices_counted(target: &str) -> String {
    match target.split(TARGET_SET).count() {
        1 => format!("1 device ({})", devices_said(target)),
        n => format!("{n} devices together ({})", devices_said(target)),
    }
}

/// One J-curve per method (and machine) of `configs`, all on `devices`, with its row of the
/// saturation table and each point's IOPS handed to `peak` (name, mean IOPS, queue depth).
fn jcurves(
    configs: &[&Config],
    devices: &str,
    gap: &Option<String>,
    t: &mut Table,
    peak: &mut dyn FnMut(&str, f64, u32),
) -> (Vec<Series>, Vec<Callout>) {
    // The figure is one target's: the machine alone tells its lines apart.
    let name = |c: &Config| c.machine.as_ref().map_or(c.method(), |m| format!("{} · {m}", c.method()));
    let mut methods: Vec<String> = configs.iter().map(|c| name(c)).collect();
    methods.sort();
    methods.dedup();
    let mut series = Vec::new();
    let mut callouts = Vec::new();
    for m in &methods {
        let mine: Vec<&Config> = configs.iter().filter(|c| &name(c) == m).copied().collect();
        // The rule as `Part::plan_at` applies it to plan the parts measured at saturation.
        let curve = super::curve(&mine);
        let mut pts = Vec::new();
        for (c, p) in curve.configs.iter().zip(&curve.points) {
            let (Some(i), Some(l)) = (c.summary(&iops), c.summary(&lat_mean_us)) else { continue };
            let mut pt = point(c, i.mean, m, "IOPS", "mean latency µs", &lat_mean_us).expect("summary exists");
            pt.tip = format!("{m} · {devices} · QD {} · IOPS {} · mean latency {} µs", p.qd, mean_ci(&i), mean_ci(&l));
            pts.push(pt);
            peak(m, i.mean, c.first().qd);
        }
        let (sat_qd, there, reason) = match &curve.saturation {
            Ok(s) => (
                s.qd.map(num).unwrap_or("not within the sweep".into()),
                s.index.map(|i| (curve.configs[i], curve.points[i])),
                s.reason.clone(),
            ),
            Err(e) => ("-".into(), None, e.clone()),
        };
        if let Some((c, p)) = there {
            callouts.push(Callout { x: p.iops, y: p.mean_lat, text: format!("QD {}", p.qd) });
            t.rows.push(vec![
                m.clone(),
                devices.to_string(),
                sat_qd,
                num(p.iops),
                num(p.mean_lat),
                counter_cell(c, |k| k.workload_per_io.instructions, gap),
                counter_cell(c, |k| k.workload_per_io.ipc, gap),
                counter_cell(c, |k| k.workload_per_io.cache_miss_rate, gap),
                reason,
            ]);
        } else {
            t.rows.push(vec![m.clone(), devices.to_string(), sat_qd, "-".into(), "-".into(), "-".into(), "-".into(), "-".into(), reason]);
        }
        series.push(Series { name: m.clone(), points: pts });
    }
    (series, callouts)
}

fn counter_cell(c: &Config, counter: Figure<Counters>, gap: &Option<String>) -> String {
    match gap {
        Some(_) => "not available here".into(),
        None => cell(c, &|r| r.counter(counter)),
    }
}

fn cores_panels(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let mut methods: Vec<String> = cs.iter().map(|c| c.labelled()).collect();
    methods.sort();
    methods.dedup();
    let mut t =
        Table::new("S2 cores to peak", &["configuration", "peak IOPS", "cores at the peak", "cores to peak", "IOPS there", "how decided"]);
    let (mut callouts, mut found) = (Vec::new(), Vec::new());
    for m in &methods {
        let mine: Vec<&Config> = cs.iter().filter(|c| &c.labelled() == m).copied().collect();
        let by_threads: Vec<(String, Vec<f64>)> =
            mine.iter().map(|c| (cores_charged(c.first().threads, &c.first().submit).to_string(), c.values(&iops))).collect();
        let ranked = compare::rank(Metric::Iops, &by_threads, ALPHA);
        let Some(best) = ranked.first() else { continue };
        let testable = ranked.iter().skip(1).all(|r| r.verdict != Verdict::Untested);
        // The best itself is a Tie, so there is always a candidate.
        let (to_peak, how) = if testable {
            let fewest = ranked
                .iter()
                .filter(|r| r.verdict == Verdict::Tie)
                .min_by_key(|r| r.config_key.parse::<u32>().unwrap_or(u32::MAX))
                .unwrap_or(best);
            (fewest, "fewest cores not significantly below the peak (Welch against the peak, Holm-corrected, α = 0.05)")
        } else {
            (best, "untested (n < 2): the cores of the highest mean")
        };
        let cores: f64 = to_peak.config_key.parse().unwrap_or(0.0);
        found.push(format!("{m}: {cores}"));
        callouts.push(Callout { x: cores, y: to_peak.summary.mean, text: format!("{m}: {cores} to peak") });
        t.rows.push(vec![
            m.clone(),
            mean_ci(&best.summary),
            best.config_key.clone(),
            to_peak.config_key.clone(),
            mean_ci(&to_peak.summary),
            how.to_string(),
        ]);
    }
    if !found.is_empty() {
        ctx.note(format!("Cores to peak found (one worker thread at a time; iou-s is charged two cores per thread, its own and its SQ-poll thread's, as CHEOPS'23 counted it): {}.", found.join("; ")));
    }
    let method = |c: &Config| c.method();
    plot_with(
        ctx,
        &cs,
        Plot {
            title: "IOPS against cores (threads at QD128)".into(),
            x: axis("cores (worker threads, and iou-s's SQ-poll threads)", Scale::Linear),
            y: axis("IOPS", Scale::Linear),
            x_of: &|r| cores_charged(r.threads, &r.submit) as f64,
            y_of: &iops,
            series_of: &method,
        },
        vec!["Circled: cores to peak per configuration (see the table).".into()],
        callouts,
    );
    let runs = runs_of(&cs);
    ctx.table(t, &runs);
}

/// The cores a configuration takes: a worker thread each, and with SQPOLL each worker's
/// submission-polling kernel thread on a core of its own (`host::cpus_on_node`).
fn cores_charged(threads: u32, submit: &str) -> u32 {
    if submit == "sqpoll" {
        2 * threads
    } else {
        threads
    }
}

fn schedulers_panels(ctx: &mut Ctx) {
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
    t.notes.push(at_saturation_said(&cs, &[]));
    // Fig 8's dotted lines: the same runs restricted to the device's NUMA node.
    let variants: Vec<&str> = {
        let mut v: Vec<&str> = cs.iter().map(|c| c.runs[0].numa()).collect();
        v.sort();
        v.dedup();
        v
    };
    let mut groups: Vec<(String, u32, &str)> = cs.iter().map(|c| (c.labelled(), c.first().threads, c.runs[0].numa())).collect();
    groups.sort();
    groups.dedup();
    for (m, th, numa) in &groups {
        let of = |s: &str| {
            cs.iter().find(|c| &c.labelled() == m && c.first().threads == *th && c.runs[0].numa() == *numa && sched(c) == s).copied()
        };
        let none = of("none");
        let label = if variants.len() > 1 { format!("{m} ({numa})") } else { m.clone() };
        let mut row = vec![label, th.to_string()];
        for s in &schedulers {
            let c = of(s);
            row.push(c.map(|c| cell(c, &iops)).unwrap_or("not run".into()));
            if s != "none" {
                row.push(match (none, c) {
                    (Some(n), Some(c)) => match compare::compare_metric(Metric::Iops, &n.values(&iops), &c.values(&iops), ALPHA) {
                        Some(cmp) => format!(
                            "{} ({})",
                            cmp.ratio.map(|r| format!("{r:.3}")).unwrap_or("-".into()),
                            cmp.welch.map(|w| format!("p = {}", num(w.p))).unwrap_or("untested, n < 2".into())
                        ),
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
    let nodes = cs.iter().flat_map(|c| &c.runs).filter_map(|r| r.record.environment.placement.nodes).max();
    if variants.len() < 2 {
        let why = match nodes {
            Some(1) => "the machine has one NUMA node, so a node-local run and an unrestricted one use the same CPUs and only the node-local runs were made".to_string(),
            Some(n) => format!("the runs here are {} only (the machine has {n} NUMA nodes)", variants.first().copied().unwrap_or("unrestricted")),
            None => "the runs record no NUMA placement (made by an iolab before --numa)".to_string(),
        };
        ctx.note(format!("CHEOPS'23 Fig 8 draws each scheduler NUMA-restricted (dotted) beside unrestricted; not here: {why}."));
    }
    if distinct(&cs, |r| r.threads).len() > 1 {
        let numa = variants.len() > 1;
        let series = move |c: &Config| {
            let v = if numa { format!(" ({})", c.runs[0].numa()) } else { String::new() };
            format!("{} {}{v}", c.method(), c.runs[0].scheduler())
        };
        plot(
            ctx,
            &cs,
            Plot {
                title: "IOPS against threads per scheduler".into(),
                x: axis("threads", Scale::Log2),
                y: axis("IOPS", Scale::Linear),
                x_of: &|r| r.threads as f64,
                y_of: &iops,
                series_of: &series,
            },
            vec![],
        );
    }
}
