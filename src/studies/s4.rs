//! S4, IISWC'19: system challenges of ultra-low-latency SSDs. libaio and pvsync2 at 4 KiB:
//! latency and bandwidth against queue depth, read latency under mixed-in writes, garbage
//! collection over time, and interrupt against polling against hybrid completion.
use super::{pick, Budget::Runtime, Devices, Part, Report, Runs, Study};
use crate::plan::size::format_bytes;
use crate::record::read::{Latency, SecondPoint};
use crate::report::data::{Config, Run};
use crate::report::panels::{
    axis, bs_name, cell, distinct, energy_gap, energy_scope, lat_mean_us, mechanisms, num, paths_taken, plot, runs_of, us, Figure, Plot,
};
use crate::report::sections::Ctx;
use crate::report::svg::{self, Chart, Point, Scale, Series};
use crate::report::tables::Table;

pub const STUDY: Study = Study {
    id: "S4",
    title: "IISWC'19: system challenges of ultra-low-latency SSDs",
    setup: super::NO_SCHEDULER_FULL_SPEED,
    // Fig 7b keeps "randomly writing 4KB data block after writing the entire address range of
    // the underlying SSD" (IISWC'19 §IV-D2): one sequential fill of each device before the parts.
    fills: Some((1, 1)),
    parts: &[
        Part {
            name: "S4.1-latency",
            feeds: "mean and p99.999 latency against QD, seq/rand read/write",
            unsupported: &[],
            runs: Some(Runs {
                matrix: latency_matrix,
                full: (3, "10s", Runtime("60s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(latency_panels),
                profile: None,
                devices: Devices::Each,
            }),
        },
        Part {
            name: "S4.2-bandwidth",
            feeds: "bandwidth against QD, normalised to the device maximum",
            unsupported: &[],
            runs: Some(Runs {
                matrix: bandwidth_matrix,
                full: (3, "10s", Runtime("60s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(bandwidth_panels),
                profile: None,
                devices: Devices::Each,
            }),
        },
        Part {
            name: "S4.3-interference",
            feeds: "read latency (mean, p99.999) with 0-80 % writes mixed in",
            unsupported: &[],
            runs: Some(Runs {
                matrix: interference_matrix,
                full: (3, "10s", Runtime("60s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(interference_panels),
                profile: None,
                devices: Devices::Each,
            }),
        },
        Part {
            name: "S4.4-gc",
            feeds: "Fig 7b and Fig 8: garbage collection, per-second mean (and p99) write latency, write IOPS and power of random writes after the study's fill of the whole device",
            unsupported: &[],
            runs: Some(Runs {
                matrix: gc_matrix,
                full: (1, "0s", Runtime("30m")),
                quick: (1, "0s", Runtime("3s")),
                report: Report::Panels(gc_panels),
                profile: None,
                devices: Devices::Each,
            }),
        },
        Part {
            name: "S4.5-completion",
            feeds: "interrupt vs polling vs hybrid: mean and p99.999 latency, CPU user and kernel",
            unsupported: &[],
            runs: Some(Runs {
                matrix: completion_matrix,
                full: (3, "10s", Runtime("60s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(completion_panels),
                profile: None,
                devices: Devices::Each,
            }),
        },
        Part {
            name: "S4.6-user-space",
            feeds: "kernel vs user-space driver (§VI, Figs 17-22): latency and CPU per I/O of the four patterns from 4 KiB to 1 MiB, and the latency the user-space driver saves (Figs 17-18)",
            unsupported: &[("loads and stores per I/O", "needs perf memory events, which iolab does not sample")],
            runs: Some(Runs {
                matrix: user_space_matrix,
                full: (3, "10s", Runtime("60s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(completion_panels),
                profile: None,
                devices: Devices::Each,
            }),
        },
        Part {
            name: "S4.8-cpu-by-module",
            feeds: "Figs 14-15: the CPU of a 4 KiB random read by kernel module and function, user against kernel, interrupt against polled completion",
            unsupported: &[(
                "Fig 15 (loads and stores)",
                "needs hardware memory-instruction counters per function, which iolab does not sample",
            )],
            runs: Some(Runs {
                matrix: by_module_matrix,
                full: (3, "10s", Runtime("30s")),
                quick: (1, "0.5s", Runtime("1s")),
                report: Report::Panels(by_module_panels),
                profile: Some("layers"),
                devices: Devices::Each,
            }),
        },
        Part {
            name: "S4.7-server-client",
            feeds: "Fig 23 (§VI-C): a file set on the client's ext4 over NBD, served by the kernel's stack (io_uring) and by iolab's user-space NVMe driver: per-file latency of reads and writes, sequential and random, 4-64 KiB files, and the server's CPU per request",
            unsupported: &[(
                "10 million files",
                "the quick scale makes 200 files and the full scale 20,000 (about 0.7 GB, created anew for each run), not the paper's 10 million",
            )],
            runs: Some(Runs {
                matrix: server_client_matrix,
                full: (3, "0s", Runtime("30s")),
                quick: (1, "0s", Runtime("2s")),
                report: Report::Panels(server_client_panels),
                profile: None,
                devices: Devices::First,
            }),
        },
    ],
};

fn latency_matrix(q: bool) -> String {
    format!(
        "[matrix]\ninterface = [\"libaio\"]\nrw = [\"read\", \"randread\", \"write\", \"randwrite\"]\nqd = {}\n",
        pick(q, "[1, 2, 4, 8, 16, 32]", "[1, 8]")
    )
}

fn bandwidth_matrix(q: bool) -> String {
    format!(
        "[matrix]\ninterface = [\"libaio\"]\nrw = [\"read\", \"randread\", \"write\", \"randwrite\"]\nqd = {}\n",
        pick(q, "[1, 2, 4, 8, 16, 32, 64, 128, 256]", "[1, 32]")
    )
}

fn interference_matrix(q: bool) -> String {
    format!(
        "[matrix]\ninterface = [\"libaio\"]\nrw = [\"randrw\"]\nwrite_mix = {}\nqd = [1]\n",
        pick(q, "[0, 20, 40, 60, 80]", "[0, 40, 80]")
    )
}

fn gc_matrix(_: bool) -> String {
    "[matrix]\ninterface = [\"libaio\"]\nrw = [\"randwrite\"]\nqd = [32]\n".to_string()
}

fn completion_matrix(q: bool) -> String {
    format!(
        r#"[matrix]
interface = ["pvsync2", "io_uring"]
complete = ["irq", "poll", "hybrid"]
rw = {}
bs = {}
qd = [1]
"#,
        pick(q, r#"["read", "randread", "write", "randwrite"]"#, r#"["randread", "randwrite"]"#),
        pick(q, r#"["4k", "8k", "16k", "32k"]"#, r#"["4k", "32k"]"#)
    )
}

/// Figs 14-15: the paper's two completion paths on its 4 KiB random reads (pvsync2 as its fio
/// ran them, and io_uring, whose polling every kernel since 5.18 keeps).
fn by_module_matrix(_: bool) -> String {
    "[matrix]\ninterface = [\"pvsync2\", \"io_uring\"]\ncomplete = [\"irq\", \"poll\"]\nrw = [\"randread\"]\nbs = [\"4k\"]\nqd = [1]\n"
        .to_string()
}

/// The paper's SPDK comparison: the kernel's fastest path (io_uring, by interrupt and polled)
/// against iolab's user-space driver (SPDK class), where the machine can run it.
fn user_space_matrix(q: bool) -> String {
    format!(
        r#"[matrix]
interface = ["io_uring", "vfio-nvme"]
complete = ["irq", "poll"]
rw = {}
bs = {}
qd = [1]
"#,
        pick(q, r#"["read", "randread", "write", "randwrite"]"#, r#"["randread", "randwrite"]"#),
        // Figs 17-18 at 4-32 KiB, Figs 19-22 at 64 KiB-1 MiB.
        pick(q, r#"["4k", "8k", "16k", "32k", "64k", "128k", "256k", "512k", "1m"]"#, r#"["4k", "128k"]"#)
    )
}

/// Fig 23's grid: a file set of 4-64 KiB files on the client's ext4, read and written whole,
/// in sequential and random order, through psync with O_DIRECT (fio's default engine), once per
/// server back end (`studies::served` serves, connects and mounts for each).
fn server_client_matrix(q: bool) -> String {
    format!(
        r#"[fileset]
files = {}
file_size = "4k-64k"
[matrix]
interface = ["psync"]
rw = ["read", "write"]
file_order = ["seq", "random"]
server = ["io_uring", "vfio-nvme"]
"#,
        pick(q, "20000", "200")
    )
}

/// Fig 23: per-file latency (open to close) of each pattern per server back end, the server's
/// CPU per request in the same window, and the latency the user-space server saves against the
/// kernel's (the paper: 38-39 % for reads, 3.7-4.6 % for writes).
fn server_client_panels(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let server = |c: &Config| c.runs[0].record.spec.fileset.server.clone().unwrap_or_else(|| "?".into());
    let order = |c: &Config| c.runs[0].record.spec.fileset.file_order.clone().unwrap_or_default();
    let file = |f: fn(&Latency) -> Option<f64>| move |r: &Run| us(f(&r.record.fileset.measured.file_lat_ns));
    let mut sorted = cs.clone();
    sorted.sort_by_key(|c| (c.first().rw.clone(), order(c), super::served::SERVERS.iter().position(|s| *s == server(c)), c.overlay()));
    let mut t = Table::new(
        "Fig 23: per-file latency on the client's ext4 over NBD, by server back end",
        &["rw", "file order", "server", "files", "file mean µs", "file p50 µs", "file p99 µs", "I/O mean µs", "server CPU µs per request"],
    );
    for c in &sorted {
        t.rows.push(vec![
            c.first().rw.clone(),
            order(c),
            server(c),
            cell(c, &|r| r.record.fileset.measured.files.map(|n| n as f64)),
            cell(c, &file(|l| l.mean)),
            cell(c, &file(|l| l.p50)),
            cell(c, &file(|l| l.p99)),
            cell(c, &lat_mean_us),
            cell(c, &|r| r.record.fileset.server.cpu_us_per_request),
        ]);
    }
    t.notes.push("A file's latency is open to close (the whole file read or written in 4 KiB I/Os, O_DIRECT); the server's CPU per request is its process's CPU in the run's window (connection threads and the rest, from /proc) over the requests the kernel's NBD client sent (/sys/block/nbdN/stat).".into());
    ctx.table(t, &runs_of(&cs));
    let mut r = Table::new(
        "Fig 23: per-file mean latency the user-space server saves against the kernel's",
        &["rw", "file order", "vfio-nvme µs", "io_uring µs", "reduction", "the paper"],
    );
    for c in sorted.iter().filter(|c| server(c) == "vfio-nvme") {
        let Some(base) = sorted
            .iter()
            .find(|b| server(b) == "io_uring" && b.first().rw == c.first().rw && order(b) == order(c) && b.overlay() == c.overlay())
        else {
            continue;
        };
        let (Some(m), Some(b)) = (c.summary(&file(|l| l.mean)), base.summary(&file(|l| l.mean))) else { continue };
        let reduction = if b.mean > 0.0 { format!("{:.1} %", 100.0 * (b.mean - m.mean) / b.mean) } else { "-".into() };
        let paper = if c.first().rw == "read" { "38-39 %" } else { "3.7-4.6 %" };
        r.rows.push(vec![c.first().rw.clone(), order(c), num(m.mean), num(b.mean), reduction, paper.into()]);
    }
    for (key, why) in ctx.skipped() {
        if super::s5::key_value(key, "server") != Some("vfio-nvme") {
            continue;
        }
        let (rw, fo) = (super::s5::key_value(key, "rw").unwrap_or("?"), super::s5::key_value(key, "file_order").unwrap_or("?"));
        if r.rows.iter().any(|row| row[0] == rw && row[1] == fo) {
            continue;
        }
        r.rows.push(vec![rw.into(), fo.into(), "not run here".into(), "-".into(), format!("not run: {why}"), "-".into()]);
    }
    r.notes.push("Reduction = (io_uring − vfio-nvme) / io_uring of the replicate-mean per-file latencies. This differs from the paper: the server and the client share one machine over loopback TCP (the paper's crossed a network), the device may be an emulated NVMe controller, and the set is 200 (quick) or 20,000 files, not 10 million.".into());
    if !r.rows.is_empty() {
        ctx.table(r, &runs_of(&cs));
    }
}

fn latency_panels(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let rw = |c: &Config| c.first().rw.clone();
    let figures: [(&str, Figure<Latency>); 2] = [("mean", |l| l.mean), ("p99.999", |l| l.p99_999)];
    for (name, lat) in figures {
        plot(
            ctx,
            &cs,
            Plot {
                title: format!("{name} latency against queue depth"),
                x: axis("queue depth", Scale::Log2),
                y: axis(&format!("{name} latency (µs)"), Scale::Linear),
                x_of: &|r| r.qd as f64,
                y_of: &|r| us(lat(&r.record.results.total.lat_ns)),
                series_of: &rw,
            },
            vec![],
        );
    }
    // Fig 7a: power per access pattern: the SSD's own (scope ssd) where a source measured it,
    // else the whole system's, said to differ from the paper.
    let runs = runs_of(&cs);
    let title = "Power per access pattern (Fig 7a)";
    let Some(scope) = power_scope(&runs) else {
        ctx.unavailable(title, &power_gap(&runs), &runs);
        return;
    };
    let mut t = Table::new(format!("{title}; {}", scope.label(&runs)), &["rw", "queue depth", "device", scope.column()]);
    let mut sorted = cs.clone();
    sorted.sort_by_key(|c| (c.first().rw.clone(), c.first().qd, c.overlay()));
    for c in &sorted {
        t.rows.push(vec![c.first().rw.clone(), c.first().qd.to_string(), device_of(c), cell(c, &|r| scope.source(&r.record)?.mean_watts)]);
    }
    t.notes.push(match scope {
        PowerScope::Ssd => "The drive's own power (scope ssd: a sensor between slot and drive, e.g. a PowerSensor3), as IISWC'19 Fig 7a; \"not measured\" where no ssd source covered a configuration's runs.".into(),
        PowerScope::System => format!("{} \"not measured\" where no whole-system source covered a configuration's runs.", PowerScope::DIFFERS),
    });
    ctx.table(t, &runs);
}

/// Where S4's power figures (Fig 7a, Fig 8) come from: the SSD's own power where a source
/// measured it, as the paper plotted; otherwise the whole system's, said to differ.
#[derive(Clone, Copy, Debug, PartialEq)]
enum PowerScope {
    Ssd,
    System,
}

impl PowerScope {
    /// The sentence beside a figure drawn from the whole system's power.
    const DIFFERS: &'static str = "This differs from the paper: IISWC'19 plotted the SSD's own power, which no source measured here (scope ssd: a PowerSensor3 or another meter between slot and drive, docs/energy.md); this is the whole system's power, CPU, memory, fans and power supply included.";

    /// A run's source in this scope that covered the window (the energy layer gives it per-joule
    /// ratios only then): its `ssd` source; the system's `wall_ac`, then `bmc_system`, then
    /// `platform` (the record's `efficiency` component `system`).
    fn source(self, r: &crate::record::read::Record) -> Option<&crate::record::read::EnergySource> {
        let sources = r.energy.as_ref()?.sources.as_ref()?;
        let scopes: &[&str] = match self {
            PowerScope::Ssd => &["ssd"],
            PowerScope::System => &["wall_ac", "bmc_system", "platform"],
        };
        scopes.iter().find_map(|sc| sources.iter().find(|s| s.scope.as_deref() == Some(sc) && s.iops_per_joule.is_some()))
    }

    /// The scope of the title: `ssd`, or the system scopes the runs' sources had.
    fn label(self, runs: &[&Run]) -> String {
        if self == PowerScope::Ssd {
            return "scope: ssd (the drive's own power)".into();
        }
        let mut scopes: Vec<&str> = runs.iter().filter_map(|r| self.source(&r.record)?.scope.as_deref()).collect();
        scopes.sort();
        scopes.dedup();
        let labels: Vec<&str> = scopes.iter().map(|s| crate::analysis::compare::scope_label(s)).collect();
        format!("scope: {}, the whole system, not the SSD", labels.join(" and "))
    }

    fn column(self) -> &'static str {
        match self {
            PowerScope::Ssd => "SSD power (W)",
            PowerScope::System => "system power (W)",
        }
    }
}

/// The scope of S4's power figures for these runs: ssd where a run's source measured the drive,
/// else the whole system where one measured it, else None.
fn power_scope(runs: &[&Run]) -> Option<PowerScope> {
    [PowerScope::Ssd, PowerScope::System].into_iter().find(|p| runs.iter().any(|r| p.source(&r.record).is_some()))
}

/// Why no run has the SSD's or the whole system's power: the runs' energy reasons, or (a CPU
/// package alone measured) that neither was.
fn power_gap(runs: &[&Run]) -> String {
    energy_gap(runs).unwrap_or_else(|| {
        format!(
            "no source measured the SSD (scope ssd) or the whole system (wall_ac, bmc_system, platform); the runs' energy is {}, which is neither",
            energy_scope(runs).trim_start_matches("scope: ")
        )
    })
}

/// The drive's own mean power in a run: its `ssd` source, where one covered the window (the
/// energy layer gives it per-joule ratios only then).
#[cfg(test)]
fn ssd_watts(r: &crate::record::read::Record) -> Option<f64> {
    PowerScope::Ssd.source(r)?.mean_watts
}

fn bandwidth_panels(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let bw = |r: &Run| r.row.metrics.bw_bytes_per_s;
    // Each device (and machine) normalised to its own maximum, as the paper normalised each SSD.
    let mut maxima: Vec<(Option<String>, f64)> = Vec::new();
    for c in &cs {
        let mean = c.summary(&bw).map_or(0.0, |s| s.mean);
        match maxima.iter_mut().find(|(o, _)| *o == c.overlay()) {
            Some((_, m)) => *m = m.max(mean),
            None => maxima.push((c.overlay(), mean)),
        }
    }
    if maxima.iter().all(|(_, m)| *m <= 0.0) {
        ctx.unavailable("Normalised bandwidth against queue depth", "no run here measured bandwidth", &runs_of(&cs));
        return;
    }
    let max_of: Vec<(i64, f64)> = cs
        .iter()
        .flat_map(|c| c.runs.iter().map(|r| (r.row.id, maxima.iter().find(|(o, _)| *o == c.overlay()).map_or(0.0, |m| m.1))))
        .collect();
    let rw = |c: &Config| c.first().rw.clone();
    let said: Vec<String> =
        maxima.iter().map(|(o, m)| format!("{}{}/s", o.as_ref().map(|o| format!("{o}: ")).unwrap_or_default(), format_bytes(*m))).collect();
    plot(
        ctx,
        &cs,
        Plot {
            title: "Normalised bandwidth against queue depth".into(),
            x: axis("queue depth", Scale::Log2),
            y: axis("bandwidth / highest measured", Scale::Linear),
            x_of: &|r| r.qd as f64,
            y_of: &|r| {
                let max = max_of.iter().find(|(id, _)| *id == r.row.id).map(|m| m.1).filter(|m| *m > 0.0)?;
                bw(r).map(|b| b / max)
            },
            series_of: &rw,
        },
        vec![format!(
            "Normalised to the highest mean bandwidth this sweep measured on each device ({}), the device maximum as far as the sweep saw it.",
            said.join(", ")
        )],
    );
}

fn interference_panels(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let series = |_: &Config| "random reads".to_string();
    let figures: [(&str, Figure<Latency>); 2] = [("mean", |l| l.mean), ("p99.999", |l| l.p99_999)];
    for (name, lat) in figures {
        plot(
            ctx,
            &cs,
            Plot {
                title: format!("Read latency ({name}) against the share of writes"),
                x: axis("writes mixed in (%)", Scale::Linear),
                y: axis(&format!("read {name} latency (µs)"), Scale::Linear),
                x_of: &|r| r.write_mix as f64,
                y_of: &|r| us(lat(&r.record.results.read.lat_ns)),
                series_of: &series,
            },
            vec![],
        );
    }
}

fn gc_panels(ctx: &mut Ctx) {
    let runs = ctx.all_runs();
    let mut mean = Vec::new();
    let mut lat = Vec::new();
    let mut rate = Vec::new();
    let mut power = Vec::new();
    let each: Vec<(&Config, &Run)> = ctx.configs(|_| true).into_iter().flat_map(|c| c.runs.iter().map(move |r| (c, r))).collect();
    // Fig 8's power: the SSD's own where a source measured it, else the whole system's.
    let scope = power_scope(&runs);
    for (c, r) in each {
        // One line per run, named with its device and machine where they are overlaid.
        let name = c.series(&format!("run {}", r.row.id));
        let per_second = scope.and_then(|p| p.source(&r.record)).map(|s| s.per_second_watts.as_slice()).filter(|w| !w.is_empty());
        if let Some(w) = per_second {
            let points = w
                .iter()
                .enumerate()
                .filter_map(|(t, w)| {
                    let (x, y) = (t as f64, (*w)?);
                    Some(Point { x, y, ci: None, tip: format!("run {} · t = {t} s · {} W", r.row.id, num(y)), flagged: r.fell_back() })
                })
                .collect();
            power.push(Series { name: name.clone(), points });
        }
        let Some(series) = &r.record.results.series else { continue };
        let pts = |field: fn(&SecondPoint) -> Option<f64>, scale: f64| -> Vec<Point> {
            series
                .iter()
                .filter_map(|p| {
                    let t = p.t?;
                    let v = field(p)? / scale;
                    Some(Point {
                        x: t, y: v, ci: None, tip: format!("run {} · t = {t} s · {}", r.row.id, num(v)), flagged: r.fell_back()
                    })
                })
                .collect()
        };
        mean.push(Series { name: name.clone(), points: pts(|p| p.mean_lat_ns, 1e3) });
        lat.push(Series { name: name.clone(), points: pts(|p| p.p99_lat_ns, 1e3) });
        rate.push(Series { name, points: pts(|p| p.write_iops, 1.0) });
    }
    let note = vec!["One point per second of the measured window, one line per run (the last second may be partial). The study fills each device it may write once before its parts (suite run --destructive), as the paper wrote the whole address range first; on a file or a device not named --destructive there was no fill.".into()];
    for (title, y, series) in [
        ("Garbage collection: per-second mean write latency (Fig 7b)", "mean latency (µs)", mean),
        ("Garbage collection: per-second p99 write latency", "p99 latency (µs)", lat),
        ("Garbage collection: per-second write IOPS", "write IOPS", rate),
    ] {
        if series.iter().all(|s| s.points.is_empty()) {
            ctx.unavailable(title, "the runs recorded no per-second series (per-second p99: records from iolab since it kept each second's own latency counts)", &runs);
        } else {
            let svg = svg::chart(&Chart {
                title: title.into(),
                x: axis("time in the window (s)", Scale::Linear),
                y: axis(y, Scale::Linear),
                series,
                callouts: vec![],
                lines: true,
            });
            ctx.figure(title, svg, &runs, note.clone());
        }
    }
    ctx.note("Fig 7b's values are per-second means, drawn first; each second's p99 (the next figure, not in the paper) comes from that second's own latency counts over every thread (buckets ≤ 3.2 % wide, the bucket's highest value).");
    let title = "Garbage collection: per-second power (Fig 8)";
    match scope {
        None => ctx.unavailable(title, &power_gap(&runs), &runs),
        Some(_) if power.iter().all(|s| s.points.is_empty()) => {
            ctx.unavailable(title, "the energy sources gave no per-second power (records from an iolab before it)", &runs)
        }
        Some(p) => {
            let scope = p.label(&runs);
            let w: Vec<String> =
                runs.iter().filter_map(|r| p.source(&r.record)?.mean_watts.map(|w| format!("run {}: {} W", r.row.id, num(w)))).collect();
            let svg = svg::chart(&Chart {
                title: format!("{title}; {scope}"),
                x: axis("time in the window (s)", Scale::Linear),
                y: axis("power (W)", Scale::Linear),
                series: power,
                callouts: vec![],
                lines: true,
            });
            let mut notes = vec![format!(
                "Each second's power integrated alone from the source's samples (a second less than half covered is left out, never drawn as 0 W); mean over the window: {}.",
                w.join(", ")
            )];
            if p == PowerScope::System {
                notes.insert(0, PowerScope::DIFFERS.into());
            }
            ctx.figure(&format!("{title}; {scope}"), svg, &runs, notes);
        }
    }
}

/// S4.8's panels are the profiled sweep's (report/profiles.rs): its module table is Figs 14-15.
fn by_module_panels(ctx: &mut Ctx) {
    ctx.cite(crate::report::profiles::MODULES, "IISWC'19 Figs 14-15");
    super::profiled_part(ctx);
}

/// A table row's device: the overlaid device (and machine) where there are several, else the
/// run's own devices.
fn device_of(c: &Config) -> String {
    let r = c.first();
    // The user-space driver's record names no block device (it took the controller from the
    // kernel): its target, the namespace, names it.
    let targets = || {
        (!r.targets.is_empty()).then(|| crate::report::data::devices_said(&r.targets.join(&crate::plan::matrix::TARGET_SET.to_string())))
    };
    c.overlay().unwrap_or_else(|| r.devices.clone().or_else(targets).unwrap_or("no device".into()))
}

fn completion_panels(ctx: &mut Ctx) {
    let cs = ctx.configs(|_| true);
    let mut sorted = cs.clone();
    sorted.sort_by_key(|c| (c.first().rw.clone(), c.first().bs, c.method(), c.overlay()));
    let mut t = Table::new(
        format!("{}: latency and CPU per I/O by completion method", ctx.name()),
        &[
            "rw",
            "bs",
            "method",
            "device",
            "mean latency µs",
            "p99.999 µs",
            "CPU user ns per I/O",
            "CPU kernel ns per I/O",
            "completion path taken",
            "mechanism on this kernel",
        ],
    );
    for c in &sorted {
        t.rows.push(vec![
            c.first().rw.clone(),
            bs_name(c.first().bs),
            c.method(),
            device_of(c),
            cell(c, &lat_mean_us),
            cell(c, &|r| us(r.record.results.total.lat_ns.p99_999)),
            cell(c, &|r| r.record.results.cpu.user_ns_per_io),
            cell(c, &|r| r.record.results.cpu.system_ns_per_io),
            paths_taken(c),
            mechanisms(c),
        ]);
    }
    ctx.table(t, &runs_of(&cs));
    reduction_table(ctx, &sorted);
    let method = |c: &Config| c.method();
    for rw in distinct(&cs, |r| r.rw.clone()) {
        let mine = ctx.configs(|r| r.rw == rw);
        plot(
            ctx,
            &mine,
            Plot {
                title: format!("Mean latency against block size ({rw})"),
                x: axis("block size", Scale::Bytes),
                y: axis("mean latency (µs)", Scale::Linear),
                x_of: &|r| r.bs as f64,
                y_of: &lat_mean_us,
                series_of: &method,
            },
            vec![],
        );
    }
}

/// The latency each method saves against the interrupt-driven kernel path of the same pattern,
/// block size and device: IISWC'19 Fig 16 (polled and hybrid-polled completion against
/// interrupts, S4.5) and Figs 17-18 (the user-space driver against the kernel, S4.6, where the
/// baseline is io_uring by interrupt). A method whose runs fell back is marked, never counted as
/// its method.
fn reduction_table(ctx: &mut Ctx, sorted: &[&Config]) {
    // The same target, by the plan's path: the user-space driver's runs record no block device
    // (the kernel's is gone while the driver holds the controller), the kernel's do.
    let same = |a: &Config, b: &Config| {
        let (x, y) = (a.first(), b.first());
        x.rw == y.rw && x.bs == y.bs && a.overlay() == b.overlay() && x.targets == y.targets
    };
    let base_interface = |c: &Config| if c.first().interface == "vfio-nvme" { "io_uring".to_string() } else { c.first().interface.clone() };
    let mut t = Table::new(
        format!("{}: mean latency saved against interrupt-driven completion", ctx.name()),
        &["rw", "bs", "method", "against", "mean latency µs", "baseline µs", "reduction"],
    );
    for c in sorted {
        let r = c.first();
        if r.complete == "irq" && r.interface != "vfio-nvme" {
            continue;
        }
        let Some(base) = sorted.iter().find(|b| same(c, b) && b.first().complete == "irq" && b.first().interface == base_interface(c))
        else {
            continue;
        };
        let (Some(m), Some(b)) = (c.summary(&lat_mean_us), base.summary(&lat_mean_us)) else { continue };
        let reduction = if b.mean > 0.0 { format!("{:.1} %", 100.0 * (b.mean - m.mean) / b.mean) } else { "-".into() };
        let flag = if c.any_fell_back() { " (fell back to interrupts: not its method)" } else { "" };
        t.rows.push(vec![r.rw.clone(), bs_name(r.bs), format!("{}{flag}", c.method()), base.method(), num(m.mean), num(b.mean), reduction]);
    }
    // A method this machine could not run stands in the table with the reason (the user-space
    // driver without an NVMe controller to take, polling without poll queues), never left out.
    let mut missing: Vec<(String, String, String)> = Vec::new();
    for (key, why) in ctx.skipped() {
        let value = |dim| super::s5::key_value(key, dim);
        let (Some(method), Some(rw), Some(bs)) = (super::s5::method_of_key(key), value("rw"), value("bs")) else { continue };
        let vfio = value("interface").is_some_and(crate::interfaces::user_space);
        if value("complete") == Some("irq") && !vfio {
            continue;
        }
        let bs = bs.parse::<u64>().map(bs_name).unwrap_or_else(|_| bs.to_string());
        let ran = sorted.iter().any(|c| c.first().rw == rw && bs_name(c.first().bs) == bs && c.method() == method);
        if ran || missing.iter().any(|(r, b, m)| r == rw && *b == bs && *m == method) {
            continue;
        }
        let against = if vfio { "io_uring irq".to_string() } else { format!("{} irq", value("interface").unwrap_or("?")) };
        t.rows.push(vec![
            rw.to_string(),
            bs.clone(),
            method.clone(),
            against,
            "not run here".into(),
            "-".into(),
            format!("not run: {why}"),
        ]);
        missing.push((rw.to_string(), bs, method));
    }
    if t.rows.is_empty() {
        return;
    }
    t.notes.push("Reduction = (baseline − method) / baseline of the replicate-mean latencies: IISWC'19 Fig 16 for polled and hybrid completion, Figs 17-18 for the user-space driver (baseline io_uring by interrupt).".into());
    let runs = runs_of(sorted);
    ctx.table(t, &runs);
}

#[cfg(test)]
mod ssd_power_tests {
    use super::ssd_watts;
    use crate::record::read::Record;
    use serde_json::json;

    /// Fig 7a takes the ssd scope only, and only where its source covered the window.
    #[test]
    fn ssd_power_is_the_ssd_scope_covered() {
        let rec = |sources| Record::of(&json!({"energy": {"sources": sources}}));
        let system = json!({"scope": "wall_ac", "mean_watts": 180.0, "iops_per_joule": 10.0});
        assert_eq!(ssd_watts(&rec(json!([system]))), None);
        let ssd = json!({"scope": "ssd", "mean_watts": 6.5, "iops_per_joule": 300.0});
        assert_eq!(ssd_watts(&rec(json!([system, ssd]))), Some(6.5));
        let uncovered = json!({"scope": "ssd", "mean_watts": 6.5});
        assert_eq!(ssd_watts(&rec(json!([uncovered]))), None);
    }

    /// Figs 7a and 8 fall back to the whole system (wall, then BMC, then psys), never to the CPU
    /// package alone.
    #[test]
    fn s4_power_is_the_ssd_s_else_the_whole_system_s() {
        use super::PowerScope;
        let rec = |sources| Record::of(&json!({"energy": {"sources": sources}}));
        let scope = |r: &Record, p: PowerScope| p.source(r).and_then(|s| s.scope.clone());
        let cpu = json!({"scope": "cpu_package", "mean_watts": 40.0, "iops_per_joule": 50.0});
        let psys = json!({"scope": "platform", "mean_watts": 60.0, "iops_per_joule": 30.0});
        let wall = json!({"scope": "wall_ac", "mean_watts": 180.0, "iops_per_joule": 10.0});
        let r = rec(json!([cpu, psys, wall]));
        assert_eq!((scope(&r, PowerScope::Ssd), scope(&r, PowerScope::System)), (None, Some("wall_ac".into())));
        assert_eq!(scope(&rec(json!([cpu, psys])), PowerScope::System), Some("platform".into()));
        assert_eq!(scope(&rec(json!([cpu])), PowerScope::System), None);
        assert!(PowerScope::DIFFERS.starts_with("This differs from the paper") && PowerScope::DIFFERS.ends_with('.'));
    }
}
