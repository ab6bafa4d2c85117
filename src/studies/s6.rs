//! S6, IISWC'26: energy trade-offs of the Linux storage stack on NVMe SSDs ("Characterizing
//! Energy Efficiency Trade-offs in the Linux Storage Stack for Flash-based NVMe SSDs", tool
//! nvme-energy-bench). I/Os and bytes per joule of each component a source measured (the SSD's
//! rails, the CPU package, the whole system) across request size, queue depth and threads,
//! polling against interrupts, the CPU's frequency (DVFS) and the NVMe power state. iolab runs
//! it natively: every run's completion path is verified (a polled run that fell back to
//! interrupts never stands as polled), its CPU is split by thread class, and each knob's value in
//! force is read back into the record. Energy is measured, never modelled: where no source covers
//! a component its figure says so.
use super::{pick, Budget, Devices, Part, Report, Runs, Study};
use crate::plan::matrix::{dimension, KeyValue};
use crate::report::data::{Config, Run};
use crate::report::panels::{axis, bs_name, cell, distinct, energy_gap, num, plot_by, runs_of, PlotBy};
use crate::report::sections::Ctx;
use crate::report::svg::Scale;
use crate::report::tables::Table;

pub const STUDY: Study = Study {
    id: "S6",
    title: "IISWC'26: energy efficiency trade-offs in the Linux storage stack on NVMe SSDs",
    setup: &[],
    fills: None,
    parts: &[
        Part {
            name: "S6.1-size-depth",
            feeds: "efficiency against request size, queue depth and threads: IOPS/J and bytes/J per component, and bytes/J against the bandwidth achieved (the paper: efficiency rises with bandwidth up to the device's saturation)",
            unsupported: &[WORKLOADS],
            runs: Some(Runs {
                matrix: size_depth_matrix,
                full: (3, "5s", Budget::Runtime("30s")),
                quick: (1, "0s", Budget::Runtime("1s")),
                report: Report::Panels(size_depth_panels),
                profile: None,
                devices: Devices::Each,
            }),
        },
        Part {
            name: "S6.2-polling",
            feeds: "the I/O interface's completion method: IOPS/J of interrupts, polling and hybrid polling by request size and queue depth (the paper: polling is most efficient for small requests at enough queue depth, interrupts for large ones)",
            unsupported: &[WORKLOADS],
            runs: Some(Runs {
                matrix: polling_matrix,
                full: (3, "5s", Budget::Runtime("30s")),
                quick: (1, "0s", Budget::Runtime("1s")),
                report: Report::Panels(polling_panels),
                profile: None,
                devices: Devices::Each,
            }),
        },
        Part {
            name: "S6.3-dvfs",
            feeds: "the CPU's frequency (DVFS: every cpufreq policy fixed at its lowest, intermediate and highest frequency): bandwidth and IOPS/J per component (the paper: a lower frequency helps only while the bandwidth holds)",
            unsupported: &[],
            runs: Some(Runs {
                matrix: dvfs_matrix,
                full: (3, "5s", Budget::Runtime("30s")),
                quick: (1, "0s", Budget::Runtime("1s")),
                report: Report::Panels(dvfs_panels),
                profile: None,
                devices: Devices::Each,
            }),
        },
        Part {
            name: "S6.4-power-states",
            feeds: "the NVMe power state under load (Set Features, Power Management; APST off so the state holds): performance, the SSD's power and IOPS/J per component per state (the paper: lower active states trade performance for device power and generally lose efficiency under load)",
            unsupported: &[(
                "idle power of the non-operational states",
                "iolab measures a sweep's idle baseline once, before any run and any setting, so the idle power of each inactive power state is not measured per state; the states under load are",
            )],
            runs: Some(Runs {
                matrix: power_state_matrix,
                full: (3, "5s", Budget::Runtime("30s")),
                quick: (1, "0s", Budget::Runtime("1s")),
                report: Report::Panels(power_state_panels),
                profile: None,
                devices: Devices::Each,
            }),
        },
    ],
};

/// The paper's applications, which iolab does not run.
const WORKLOADS: (&str, &str) = (
    "Filebench, YCSB on RocksDB and TPC-C",
    "the paper's application workloads; iolab drives the block and file interfaces directly, as its fio and SPDK runs did",
);

fn size_depth_matrix(q: bool) -> String {
    format!(
        "[matrix]\ninterface = [\"io_uring\"]\nrw = {}\nbs = {}\nqd = {}\nthreads = {}\n",
        pick(q, r#"["randread", "randwrite", "read", "write"]"#, r#"["randread"]"#),
        pick(q, r#"["4k", "16k", "64k", "128k", "256k", "1m"]"#, r#"["4k", "128k"]"#),
        pick(q, "[1, 4, 16, 64, 256]", "[1, 16]"),
        pick(q, "[1, 4]", "[1]"),
    )
}

fn polling_matrix(q: bool) -> String {
    format!(
        "[matrix]\ninterface = [\"io_uring\"]\ncomplete = [\"irq\", \"poll\", \"hybrid\"]\nrw = [\"randread\"]\nbs = {}\nqd = {}\n",
        pick(q, r#"["4k", "16k", "64k", "128k"]"#, r#"["4k", "128k"]"#),
        pick(q, "[1, 4, 16, 64]", "[1, 16]"),
    )
}

/// `min`, `max` and shares of each policy's hardware range, resolved per policy when a run
/// applies them (settings::cpu): one plan for any machine.
fn dvfs_matrix(q: bool) -> String {
    format!(
        "[matrix]\ninterface = [\"io_uring\"]\ncpu_freq_khz = {}\nrw = [\"randread\"]\nbs = {}\nqd = {}\n",
        pick(q, r#"["min", "25%", "50%", "75%", "max"]"#, r#"["min", "max"]"#),
        pick(q, r#"["4k", "128k"]"#, r#"["4k"]"#),
        pick(q, "[1, 32]", "[16]"),
    )
}

/// States above the controller's last (NPSS) are skipped with that reason, as on a target that
/// is not an NVMe namespace.
fn power_state_matrix(q: bool) -> String {
    format!(
        "[matrix]\ninterface = [\"io_uring\"]\nnvme_apst = [\"off\"]\nnvme_power_state = {}\nrw = {}\nbs = [\"4k\", \"128k\"]\nqd = [32]\n",
        pick(q, "[0, 1, 2, 3, 4]", "[0, 1]"),
        pick(q, r#"["randread", "randwrite"]"#, r#"["randread"]"#),
    )
}

/// The components the efficiency columns hold: (component, its name in a figure, IOPS/J, bytes/J).
type PerJoule = fn(&Run) -> Option<f64>;
type Component = (&'static str, &'static str, PerJoule, PerJoule);
/// A configuration's column in a table: its heading and its text.
type Column<'f> = (&'f str, &'f dyn Fn(&Config) -> String);
const COMPONENTS: [Component; 3] = [
    ("ssd", "SSD", |r| r.row.metrics.ssd_iops_per_joule, |r| r.row.metrics.ssd_bytes_per_joule),
    ("cpu", "CPU", |r| r.row.metrics.cpu_iops_per_joule, |r| r.row.metrics.cpu_bytes_per_joule),
    ("system", "system", |r| r.row.metrics.system_iops_per_joule, |r| r.row.metrics.system_bytes_per_joule),
];

/// The components some run measured; the sentence saying which were not, and why.
fn measured(runs: &[&Run]) -> (Vec<&'static Component>, Option<String>) {
    let have: Vec<_> = COMPONENTS.iter().filter(|(_, _, iops, _)| runs.iter().any(|r| iops(r).is_some())).collect();
    let missing: Vec<&str> = COMPONENTS.iter().filter(|c| !have.iter().any(|h| h.0 == c.0)).map(|c| c.1).collect();
    let note = (!missing.is_empty()).then(|| {
        format!(
            "Not measured: {} (no source of that scope covered the runs; docs/energy.md names the sources: a PowerSensor3 or another meter between slot and drive for the SSD, RAPL for the CPU, a PDU, IPMI or Redfish for the system). The paper measured all three.",
            missing.join(", ")
        )
    });
    (have, note)
}

/// Why no run has a per-joule figure of any component; None when some run has one.
fn gap(runs: &[&Run]) -> Option<String> {
    if !measured(runs).0.is_empty() {
        return None;
    }
    Some(energy_gap(runs).unwrap_or_else(|| "no source measured the SSD, the CPU package or the whole system".into()))
}

fn bw_mb(r: &Run) -> Option<f64> {
    r.row.metrics.bw_bytes_per_s.map(|b| b / 1e6)
}

fn mib_per_joule(f: PerJoule) -> impl Fn(&Run) -> Option<f64> {
    move |r| f(r).map(|b| b / 1_048_576.0)
}

/// The skipped runs' reasons, once each: what the machine lacked for a knob.
fn skip_note(ctx: &Ctx) -> Option<String> {
    let mut reasons: Vec<&str> = ctx.skipped().iter().map(|(_, why)| why.as_str()).collect();
    reasons.sort();
    reasons.dedup();
    (!reasons.is_empty()).then(|| format!("Skipped here ({} runs): {}", ctx.skipped().len(), reasons.join(" | ")))
}

/// A table of each configuration's bandwidth, IOPS and per-joule figures of every component
/// measured, with `cols` naming the configuration; or the reason there is none.
fn efficiency_table(ctx: &mut Ctx, title: &str, cs: &[&Config], cols: &[Column]) {
    let runs = runs_of(cs);
    if let Some(reason) = gap(&runs) {
        let mut why = reason;
        if let Some(s) = skip_note(ctx) {
            why += &format!("; {s}");
        }
        ctx.unavailable(title, &why, &runs);
        return;
    }
    let (have, missing) = measured(&runs);
    // Devices or machines overlaid: a column says which.
    let overlaid = cs.iter().any(|c| c.overlay().is_some());
    let mut head: Vec<String> = cols.iter().map(|(h, _)| h.to_string()).collect();
    if overlaid {
        head.push("device".into());
    }
    head.extend(["bandwidth (MB/s)".to_string(), "IOPS".to_string()]);
    for (_, name, _, _) in &have {
        head.push(format!("{name} IOPS/J"));
        head.push(format!("{name} MiB/J"));
    }
    let head_refs: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = Table::new(title, &head_refs);
    for c in cs {
        let mut row: Vec<String> = cols.iter().map(|(_, f)| f(c)).collect();
        if overlaid {
            row.push(c.overlay().unwrap_or_default());
        }
        row.push(cell(c, &bw_mb));
        row.push(cell(c, &crate::report::panels::iops));
        for (_, _, iops, bytes) in &have {
            row.push(cell(c, iops));
            row.push(cell(c, &mib_per_joule(*bytes)));
        }
        if c.any_fell_back() {
            row[0] += " (polling fell back to interrupts)";
        }
        t.rows.push(row);
    }
    t.notes.extend(missing);
    t.notes.extend(skip_note(ctx));
    ctx.table(t, &runs);
}

fn rw_of(c: &Config) -> String {
    c.first().rw.clone()
}
fn bs_of(c: &Config) -> String {
    bs_name(c.first().bs)
}
fn qd_of(c: &Config) -> String {
    c.first().qd.to_string()
}
fn threads_of(c: &Config) -> String {
    c.first().threads.to_string()
}

fn size_depth_panels(ctx: &mut Ctx) {
    let mut cs = ctx.configs(|_| true);
    cs.sort_by_key(|c| (c.first().rw.clone(), c.first().bs, c.first().qd, c.first().threads, c.overlay()));
    efficiency_table(
        ctx,
        "Efficiency per component by request size, queue depth and threads (IISWC'26)",
        &cs,
        &[("rw", &rw_of), ("block size", &bs_of), ("queue depth", &qd_of), ("threads", &threads_of)],
    );
    let runs = runs_of(&cs);
    if gap(&runs).is_some() {
        return;
    }
    let (have, _) = measured(&runs);
    for (_, name, _, bytes) in have {
        let x_of = |c: &Config| c.summary(&bw_mb).map(|s| s.mean);
        let y_of = mib_per_joule(*bytes);
        let series_of = |c: &Config| format!("{} {}", c.first().rw, bs_name(c.first().bs));
        plot_by(
            ctx,
            &cs,
            PlotBy {
                title: format!("{name} MiB per joule against the bandwidth achieved"),
                x: axis("bandwidth achieved (MB/s)", Scale::Linear),
                y: axis(&format!("{name} MiB/J"), Scale::Linear),
                x_of: &x_of,
                y_of: &y_of,
                series_of: &series_of,
            },
            vec!["One point per queue depth and thread count; the paper's finding is that efficiency rises with the bandwidth achieved until the device saturates.".into()],
            Vec::new(),
        );
    }
}

fn method_of(c: &Config) -> String {
    c.method()
}

fn polling_panels(ctx: &mut Ctx) {
    let mut cs = ctx.configs(|_| true);
    cs.sort_by_key(|c| (c.first().bs, c.first().qd, c.first().complete.clone(), c.overlay()));
    efficiency_table(
        ctx,
        "Efficiency per component: interrupts, polling and hybrid polling (IISWC'26)",
        &cs,
        &[("method", &method_of), ("block size", &bs_of), ("queue depth", &qd_of)],
    );
    // Which completion method is the most efficient per cell, among runs that completed the
    // way they asked.
    let runs = runs_of(&cs);
    if gap(&runs).is_some() {
        return;
    }
    let (have, _) = measured(&runs);
    let mut t = Table::new(
        "The most efficient completion method per request size and queue depth (IOPS/J)",
        &["block size", "queue depth", "component", "best", "IOPS/J", "runner-up"],
    );
    for bs in distinct(&cs, |r| r.bs) {
        for qd in distinct(&cs, |r| r.qd) {
            let cell_cs: Vec<&&Config> = cs.iter().filter(|c| c.first().bs == bs && c.first().qd == qd && !c.any_fell_back()).collect();
            for (_, name, iops, _) in &have {
                let mut ranked: Vec<(String, f64)> =
                    cell_cs.iter().filter_map(|c| c.summary(iops).map(|s| (c.labelled(), s.mean))).collect();
                ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
                let Some((best, v)) = ranked.first().cloned() else { continue };
                let second = ranked.get(1).map(|(m, v2)| format!("{m} ({})", num(*v2))).unwrap_or_else(|| "none measured".into());
                t.rows.push(vec![bs_name(bs), qd.to_string(), name.to_string(), best, num(v), second]);
            }
        }
    }
    t.notes.push("Runs whose polling fell back to interrupts are left out of the ranking (their completion path, verified by the interrupt counters, was not the one asked for).".into());
    ctx.table(t, &runs);
}

/// The value a configuration's key gives a dimension, as text.
fn dim_text(c: &Config, name: &str) -> String {
    match dimension(name).and_then(|d| c.dim(d)) {
        Some(KeyValue::Text(t)) => t.clone(),
        Some(KeyValue::Number(n)) => num(*n),
        None => "default".into(),
    }
}

fn freq_of(c: &Config) -> String {
    dim_text(c, "cpu_freq_khz")
}

fn dvfs_panels(ctx: &mut Ctx) {
    let mut cs = ctx.configs(|_| true);
    cs.sort_by_key(|c| (c.first().bs, c.first().qd, freq_of(c), c.overlay()));
    efficiency_table(
        ctx,
        "Efficiency per component by CPU frequency (IISWC'26 DVFS)",
        &cs,
        &[("cpu_freq_khz asked", &freq_of), ("block size", &bs_of), ("queue depth", &qd_of)],
    );
    ctx.note("`min`, `max` and `P%` name a share of each cpufreq policy's hardware range (cpuinfo_min_freq to cpuinfo_max_freq); each run's record gives the limits in force after the kernel's clamping (settings_changed).");
}

fn state_of(c: &Config) -> String {
    dim_text(c, "nvme_power_state")
}

fn power_state_panels(ctx: &mut Ctx) {
    let mut cs = ctx.configs(|_| true);
    cs.sort_by_key(|c| (c.first().rw.clone(), c.first().bs, state_of(c), c.overlay()));
    efficiency_table(
        ctx,
        "Efficiency per component by NVMe power state under load (IISWC'26)",
        &cs,
        &[("power state", &state_of), ("rw", &rw_of), ("block size", &bs_of)],
    );
    ctx.note("Each run records the controller's power states as Identify Controller gives them (max power, entry and exit latency) and the state in force; APST is off so that the state set holds through the run.");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_plans_at_both_scales() {
        for p in STUDY.parts {
            for q in [true, false] {
                let plan = p.plan(q, &Default::default()).unwrap().unwrap();
                crate::plan::sweep::expand(&plan, &[]).unwrap_or_else(|e| panic!("{} quick={q}: {e}\n{plan}", p.name));
            }
        }
    }
}
