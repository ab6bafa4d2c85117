//! S5, FPL'18 FastPath: towards wire-speed NVMe. The kernel's block path (libaio, the paper's
//! fio baseline, plus psync and io_uring) against the fast path: iolab's own user-space NVMe
//! driver (`vfio-nvme`), which builds NVMe commands itself and polls them, bypassing the block
//! layer and the kernel's NVMe driver as FastPath does; the kernel's partial bypass
//! (nvme-passthru on the namespace's generic device: polled, and SQPOLL with polling) beside it:
//! latency at
//! 4 KiB for the four patterns (Table III, with the reduction against the baseline), bandwidth
//! and IOPS from 4 KiB to 128 KiB (Figs 4 and 5). Each run moves a fixed 1 MB and each
//! configuration is the geometric mean of its iterations, as the paper measured (15 at its scale).
use super::{pick, Budget, Devices, Part, Report, Runs, Study};
use crate::report::data::{Config, Run};
use crate::report::panels::{
    axis, bs_name, distinct, geometric_cell, lat_mean_us, num, paths_taken, per_overlay, plot_geometric, runs_of, Figure, Plot,
};
use crate::report::sections::Ctx;
use crate::report::svg::Scale;
use crate::report::tables::Table;

pub const STUDY: Study = Study {
    id: "S5",
    title: "FPL'18 FastPath: towards wire-speed NVMe", setup: &[],
    fills: None,
    parts: &[
        Part {
            name: "S5.1-breakdown",
            feeds: "latency breakdown of one 4 KiB I/O through the kernel",
            unsupported: &[(
                "the paper's platform",
                "FPL'18 measured a 32-bit ARM Cortex-A9 (Zynq-7000) with fio; iolab traces the machine it runs on, request by request, with kernel tracepoints",
            )],
            runs: Some(Runs {
                matrix: breakdown_matrix,
                full: (3, "1s", Budget::Runtime("10s")),
                quick: (1, "0s", Budget::Runtime("1s")),
                report: Report::Panels(breakdown_panels),
                profile: Some("stages"),
                devices: Devices::Together,
            }),
        },
        Part {
            name: "S5.2-fastpath",
            feeds: "Table III (4 KiB latency of seq/rand read/write, the block path's libaio baseline against the passthrough fast path, with the reduction) and Figs 4-5 (bandwidth and IOPS from 4 KiB to 128 KiB); 1 MB per run, geometric mean over the iterations",
            unsupported: &[(
                "FastPath itself",
                "the paper's fast path is an FPGA that builds and polls NVMe commands in hardware on a Zynq SoC; iolab's fast path is its own user-space NVMe driver (vfio-nvme), which builds the commands and polls them in software on the host CPU, bypassing the block layer and the kernel's NVMe driver as FastPath does; the kernel's NVMe passthrough (io_uring URING_CMD on /dev/ngXnY) stands beside it as a partial bypass (block layer bypassed, NVMe driver kept)",
            )],
            runs: Some(Runs {
                matrix: fastpath_matrix,
                full: (15, "0s", Budget::Bytes("1m")),
                quick: (3, "0s", Budget::Bytes("1m")),
                report: Report::Panels(fastpath_panels),
                profile: None,
                devices: Devices::Together,
            }),
        },
    ],
};

/// Fig 2: one 4 KiB request at a time through each interface (libaio as the paper's fio ran it),
/// the four patterns at full scale, random reads when quick; the user-space driver shows as one
/// user-space stage.
fn breakdown_matrix(q: bool) -> String {
    format!(
        "[matrix]\ninterface = [\"libaio\", \"psync\", \"io_uring\", \"nvme-passthru\", \"vfio-nvme\"]\ncomplete = [\"irq\", \"poll\"]\nrw = {}\nbs = [\"4k\"]\nqd = [1]\n\n[[rule]]\nwhen = {{ interface = [\"libaio\", \"psync\", \"io_uring\", \"nvme-passthru\"], complete = \"poll\" }}\naction = \"drop\"\nreason = \"FPL'18's baseline completes by interrupt; the user-space driver only polls\"\n",
        pick(q, r#"["read", "randread", "write", "randwrite"]"#, r#"["randread"]"#)
    )
}

/// Fig 2's point: the device's share of one request (9-10 % there), per configuration, from the
/// traced stages; the stacked bars of every stage follow (`report::profiles`).
fn breakdown_panels(ctx: &mut Ctx) {
    ctx.cite(crate::report::profiles::STAGES, "FPL'18 Fig 2");
    super::profiled_part(ctx);
    let cs = ctx.configs(|_| true);
    let mut t = Table::new(
        "The device's share of one 4 KiB request (FPL'18 Fig 2: 9-10 %)",
        &["configuration", "pattern", "requests matched (not)", "traced p50 (µs)", "iolab's p50 (µs)", "device share", "largest stage"],
    );
    for c in &cs {
        let Some(s) = c.runs.iter().find_map(|r| r.record.cost.stages.as_ref().filter(|s| s.end_to_end.is_some())) else {
            continue;
        };
        // The device's time: issue to interrupt, or issue to completion where nothing interrupts
        // (polled).
        let device: f64 = s
            .stages
            .iter()
            .filter(|x| x.layer.as_deref().is_some_and(|l| l.starts_with("device") || l.starts_with("driver and device")))
            .filter_map(|x| x.share)
            .sum();
        let largest = s.stages.iter().max_by(|a, b| a.share.unwrap_or(0.0).total_cmp(&b.share.unwrap_or(0.0)));
        t.rows.push(vec![
            c.method(),
            c.first().rw.clone(),
            format!("{} ({})", s.requests_matched.unwrap_or(0), s.requests_unmatched.unwrap_or(0)),
            s.end_to_end.as_ref().and_then(|e| e.p50_ns).map(|n| num(n / 1000.0)).unwrap_or_default(),
            s.iolab_p50_ns.map(|n| num(n / 1000.0)).unwrap_or_default(),
            // A user-space driver's request is one stage: its device time is not apart from it.
            if s.stages.iter().any(|x| x.layer.as_deref() == Some(crate::meters::stages::USER_SPACE_DRIVER)) {
                "in its one user-space stage".into()
            } else {
                format!("{:.1} %", 100.0 * device)
            },
            largest.map(|x| format!("{} ({:.1} %)", x.layer.as_deref().unwrap_or("?"), 100.0 * x.share.unwrap_or(0.0))).unwrap_or_default(),
        ]);
    }
    let runs = runs_of(&cs);
    if t.rows.is_empty() {
        let why = runs.iter().find_map(|r| r.record.cost.stages.as_ref().and_then(|s| s.unavailable.clone()));
        ctx.unavailable(&t.title.clone(), why.as_deref().unwrap_or("no run traced a request"), &runs);
        return;
    }
    t.notes.push("From kernel tracepoints, request by request (--profile stages): the traced end to end runs from the system call's entry to its exit and lacks only the user-space part of iolab's own measurement. The paper measured on a 32-bit ARM SoC, where the software's share is larger.".into());
    ctx.table(t, &runs);
}

/// The block path's interfaces; libaio is the paper's baseline.
const BLOCK_PATH: [&str; 3] = ["libaio", "psync", "io_uring"];
const BASELINE: &str = "libaio irq";
/// (rw, the paper's column name), in Table III's order.
const PATTERNS: [(&str, &str); 4] = [("read", "seq-read"), ("randread", "rand-read"), ("write", "seq-write"), ("randwrite", "rand-write")];

fn fastpath_matrix(q: bool) -> String {
    format!(
        r#"[matrix]
interface = ["libaio", "psync", "io_uring", "nvme-passthru", "vfio-nvme"]
submit = ["syscall", "sqpoll"]
complete = ["irq", "poll"]
rw = ["read", "randread", "write", "randwrite"]
bs = {}
qd = [1]

[[rule]]
when = {{ interface = ["libaio", "psync", "io_uring"], submit = "sqpoll" }}
action = "drop"
reason = "the block path runs as the paper's baseline did: a system call per I/O"

[[rule]]
when = {{ interface = ["libaio", "psync", "io_uring"], complete = "poll" }}
action = "drop"
reason = "the block path runs as the paper's baseline did: completion by interrupt"

[[rule]]
when = {{ interface = "nvme-passthru", submit = "sqpoll", complete = "irq" }}
action = "drop"
reason = "the fast path's SQPOLL variant polls for completions, as FastPath does"

[[rule]]
when = {{ interface = "vfio-nvme", submit = "sqpoll" }}
action = "drop"
reason = "the user-space driver submits by a doorbell write from the worker: no kernel thread to submit for it"

[[rule]]
when = {{ interface = "vfio-nvme", complete = "irq" }}
action = "drop"
reason = "the user-space driver polls its completion queue, as FastPath does: it has no interrupt"
"#,
        pick(q, r#"["4k", "8k", "16k", "32k", "64k", "128k"]"#, r#"["4k", "16k", "128k"]"#)
    )
}

/// The fast path's name in the table: how `Config::method` names the user-space driver.
const USER_SPACE: &str = "iolab user-space driver";

/// Which path a design point takes: the block layer, around it through the kernel's NVMe driver,
/// or around both (the user-space driver: FPL'18's fast path).
fn path_of(method: &str) -> &'static str {
    if method.starts_with(USER_SPACE) || method.split(' ').next().is_some_and(crate::interfaces::user_space) {
        "user-space driver (block layer and NVMe driver bypassed)"
    } else if BLOCK_PATH.iter().any(|i| method.split(' ').next() == Some(*i)) {
        "block layer"
    } else {
        "passthrough (block layer bypassed)"
    }
}

/// Short name of a path for series labels.
fn path_short(method: &str) -> &'static str {
    match path_of(method) {
        "block layer" => "block",
        p if p.starts_with("user-space") => "user space",
        _ => "passthrough",
    }
}

/// A configuration key's value of `dim` (`interface=libaio,submit=...`).
pub(super) fn key_value<'k>(key: &'k str, dim: &str) -> Option<&'k str> {
    key.split(',').find_map(|kv| kv.strip_prefix(dim)?.strip_prefix('='))
}

/// The design point a configuration key names, as `Config::method` says it.
pub(super) fn method_of_key(key: &str) -> Option<String> {
    let (i, s, c) = (key_value(key, "interface")?, key_value(key, "submit").unwrap_or("syscall"), key_value(key, "complete")?);
    if crate::interfaces::user_space(i) {
        return Some(crate::report::data::USER_SPACE_METHOD.to_string());
    }
    Some(if s == "syscall" { format!("{i} {c}") } else { format!("{i} {s} {c}") })
}

const DIFFERS: &str = "Where iolab's method differs from the paper's: FastPath is an FPGA on a Zynq-7000 (two Cortex-A9 cores at 667 MHz, Samsung PM953, Linux 4.4, fio 2.99) that builds NVMe commands and polls their completions in hardware, taking the block layer and the NVMe driver out of the path; iolab's fast path is its own user-space NVMe driver doing the same in software on this machine's CPU and device (vfio-pci, a queue pair per thread, doorbell writes, a polled completion queue), with the kernel's NVMe passthrough beside it as the partial bypass (block layer out, NVMe driver and, without SQPOLL, a system call in). The paper does not give fio's queue depth (its default is 1): iolab runs QD 1. Latency is from submission to completion of each I/O, as the paper's Table III (the request's preparation is outside it); bandwidth and IOPS count the whole run, preparation included, as fio does. Each configuration is the geometric mean of its runs of 1 MB each (the paper: 15 iterations; --quick: 3).";

/// FPL'18 Table I: FastPath's minimal API, and what realises each operation in iolab's fast
/// path (the user-space driver's run).
const TABLE_ONE: [(&str, &str, &str); 5] = [
    ("alloc", "allocate DMA buffers and reserve the LBA range", "each thread's slot buffers, allocated and registered with the IOMMU (or in 2 MiB hugepages without one) before the first I/O, and the run's LBA range (--offset, --size) on the namespace"),
    ("read", "build an NVMe Read command and ring the doorbell", "an NVMe Read built by the driver into its submission queue, one doorbell write per submitted batch"),
    ("write", "build an NVMe Write command and ring the doorbell", "an NVMe Write, likewise (writes need --destructive naming the namespace)"),
    ("poll", "poll the completion queue", "reap all: every completion queue entry whose phase bit flipped, then one completion doorbell write"),
    ("free", "release the buffers", "the queue pair deleted, buffers unmapped and the controller given back to the kernel's nvme driver at the run's end (journaled)"),
];

/// Table I as the workload's vocabulary: the paper's operations and their counterparts here.
fn table_one(ctx: &mut Ctx) {
    let mut t = Table::new(
        "Table I: FastPath's minimal API and iolab's user-space driver",
        &["operation", "FastPath (FPL'18)", "iolab's fast path (vfio-nvme)"],
    );
    t.rows = TABLE_ONE.iter().map(|(op, theirs, ours)| vec![op.to_string(), theirs.to_string(), ours.to_string()]).collect();
    let cs = ctx.configs(|r| crate::interfaces::user_space(&r.interface));
    if cs.is_empty() {
        let why = ctx
            .skipped()
            .iter()
            .find(|(key, _)| key_value(key, "interface").is_some_and(crate::interfaces::user_space))
            .map(|(_, why)| why.clone());
        t.notes.push(format!(
            "The user-space driver did not run in this sweep: {}.",
            why.as_deref()
                .unwrap_or("no run of it is stored (the suite's target is not an NVMe namespace whose controller iolab may take)")
        ));
    }
    let runs = runs_of(&cs);
    ctx.table(t, &runs);
}

fn fastpath_panels(ctx: &mut Ctx) {
    ctx.note(DIFFERS);
    latency_table(ctx);
    table_one(ctx);
    let method = |c: &Config| format!("{} ({})", c.method(), path_short(&c.method()));
    let all = ctx.configs(|_| true);
    let figures: [(&str, &str, Figure<Run>); 2] = [
        ("Fig 4: bandwidth", "bandwidth (MB/s)", |r| r.row.metrics.bw_bytes_per_s.map(|b| b / 1e6)),
        ("Fig 5: IOPS", "IOPS", |r| r.row.metrics.iops),
    ];
    for (title, y, y_of) in figures {
        for (rw, name) in PATTERNS {
            let cs = ctx.configs(|r| r.rw == rw);
            if cs.is_empty() {
                continue;
            }
            plot_geometric(
                ctx,
                &cs,
                Plot {
                    title: format!("{title} against block size ({name})"),
                    x: axis("block size", Scale::Bytes),
                    y: axis(y, Scale::Linear),
                    x_of: &|r| r.bs as f64,
                    y_of: &y_of,
                    series_of: &method,
                },
                vec!["Geometric mean of each configuration's runs (1 MB each); the tooltips give the geometric standard deviation.".into()],
            );
        }
    }
    if distinct(&all, |r| r.bs).len() < 2 {
        ctx.note("Figs 4 and 5 need more than one block size: this sweep ran one.");
    }
}

/// Table III: 4 KiB latency per pattern, one row per design point, each cell with its reduction
/// against the libaio baseline; then the fast-path rows that did not run here, with the reason.
fn latency_table(ctx: &mut Ctx) {
    let four_k = ctx.configs(|r| r.bs == 4096);
    if four_k.is_empty() {
        let title = "Table III: 4 KiB latency (µs), block path against passthrough, with the reduction against the libaio baseline";
        ctx.unavailable(title, "no 4 KiB run here", &runs_of(&ctx.configs(|_| true)));
        return;
    }
    // Each device or machine overlaid against its own baseline: a table each.
    for (on, cs) in per_overlay(&four_k) {
        latency_table_of(ctx, cs, &on);
    }
    let sizes: Vec<String> = distinct(&ctx.configs(|_| true), |r| r.bs).into_iter().map(bs_name).collect();
    ctx.note(format!("Block sizes run: {}.", sizes.join(", ")));
}

/// Table III of the configurations `cs` (4 KiB, one device and machine), titled with `on`.
fn latency_table_of(ctx: &mut Ctx, cs: Vec<&Config>, on: &str) {
    let title =
        format!("Table III{on}: 4 KiB latency (µs), block path against passthrough, with the reduction against the libaio baseline");
    let find = |m: &str, rw: &str| cs.iter().find(|c| c.method() == m && c.first().rw == rw).copied();
    let geo = |c: &Config| crate::analysis::stats::geometric_mean(&c.values(&lat_mean_us));
    let mut methods: Vec<String> = cs.iter().map(|c| c.method()).collect();
    // Block path (baseline first), then the kernel's passthrough, then the user-space driver.
    methods.sort_by_key(|m| (path_of(m) != "block layer", path_of(m).starts_with("user-space"), m != BASELINE, m.clone()));
    methods.dedup();
    let mut header = vec!["configuration", "path"];
    header.extend(PATTERNS.iter().map(|(_, n)| *n));
    header.extend(["mean reduction against libaio", "completion path taken"]);
    let mut t = Table::new(&title, &header);
    for m in &methods {
        let mut row = vec![m.clone(), path_of(m).to_string()];
        let mut reductions = Vec::new();
        for (rw, _) in PATTERNS {
            row.push(match find(m, rw) {
                None => "not run".into(),
                Some(c) => {
                    let base = find(BASELINE, rw).and_then(geo);
                    match (geo(c), base) {
                        (Some(v), Some(b)) if m != BASELINE => {
                            let cut = 100.0 * (b - v) / b;
                            reductions.push(cut);
                            format!("{} ({}{} %)", geometric_cell(c, &lat_mean_us), if cut >= 0.0 { "−" } else { "+" }, num(cut.abs()))
                        }
                        _ => geometric_cell(c, &lat_mean_us),
                    }
                }
            });
        }
        row.push(match (m.as_str(), crate::analysis::stats::mean(&reductions)) {
            (BASELINE, _) => "baseline".into(),
            (_, Some(r)) => format!("{} %", num(r)),
            (_, None) => "no baseline".into(),
        });
        let mut paths: Vec<String> = PATTERNS.iter().filter_map(|(rw, _)| find(m, rw)).map(paths_taken).collect();
        paths.sort();
        paths.dedup();
        row.push(paths.join(", "));
        t.rows.push(row);
    }
    // The fast path's rows that could not run stand in the table with the reason.
    let mut missing: Vec<(String, String)> = Vec::new();
    for (key, why) in ctx.skipped() {
        let Some(m) = method_of_key(key) else { continue };
        if key_value(key, "bs") == Some("4096") && !methods.contains(&m) && !missing.iter().any(|(x, _)| *x == m) {
            missing.push((m, why.clone()));
        }
    }
    for (m, why) in missing {
        let mut row = vec![m.clone(), path_of(&m).to_string()];
        row.extend(PATTERNS.iter().map(|_| "not run here".to_string()));
        row.extend([format!("not run: {why}"), String::new()]);
        t.rows.push(row);
    }
    t.notes.push("Each cell: the geometric mean of the configuration's runs' mean latencies (its geometric standard deviation), then its reduction against libaio's in the same column, (baseline − it) / baseline; the mean reduction averages the columns it has.".into());
    t.notes.push("The paper (FPL'18 Table III, Zynq-7000 and Samsung PM953): baseline 328.9, 321.8, 350.6, 352.3 µs; FastPath 105.4, 105.7, 100, 100.67 µs (seq-read, rand-read, seq-write, rand-write), 67 to 71 % less.".into());
    if !methods.iter().any(|m| path_of(m) != "block layer") {
        t.notes.push("No passthrough or user-space run here: both need an NVMe namespace as the suite's target (the passthrough its generic device /dev/ngXnY, found from the block device; the user-space driver its controller, taken from the kernel).".into());
    }
    let runs = runs_of(&cs);
    ctx.table(t, &runs);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_compares_the_block_path_with_passthrough() {
        let part = &STUDY.parts[1];
        // With no target the passthrough rows are dropped (the temporary target is a file).
        let e =
            crate::plan::sweep::expand(&part.plan(false, &crate::studies::Given::default()).unwrap().unwrap(), &["/dev/nvme0n1".into()])
                .unwrap();
        let mut methods: Vec<String> = e.configs.iter().map(|c| method_of_key(&c.key).unwrap()).collect();
        methods.sort();
        methods.dedup();
        assert_eq!(
            methods,
            [
                "io_uring irq",
                crate::report::data::USER_SPACE_METHOD,
                "libaio irq",
                "nvme-passthru irq",
                "nvme-passthru poll",
                "nvme-passthru sqpoll poll",
                "psync irq"
            ],
            "{:?}",
            e.dropped.len()
        );
        // 7 design points x 4 patterns x 6 block sizes, 15 iterations of 1 MB each.
        assert_eq!(e.configs.len(), 7 * 4 * 6);
        assert_eq!(e.replicates, 15);
        assert!(e.configs.iter().all(|c| c.job.timing.budget == crate::plan::Budget::Bytes(1 << 20) && c.job.workload.qd == 1));
        assert_eq!(path_of("nvme-passthru sqpoll poll"), "passthrough (block layer bypassed)");
        assert_eq!(path_of(BASELINE), "block layer");
        // The user-space driver is FPL'18's fast path, not the kernel's passthrough.
        assert!(path_of(crate::report::data::USER_SPACE_METHOD).starts_with("user-space driver"));
        assert_eq!(
            method_of_key("interface=vfio-nvme,submit=syscall,complete=poll").as_deref(),
            Some(crate::report::data::USER_SPACE_METHOD)
        );
        assert_eq!(key_value("interface=psync,rw=read,bs=4096", "bs"), Some("4096"));
    }
}
