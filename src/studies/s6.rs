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
use crate::report::panels::{axis, bs_name, cell, distinct, energy_gap, mean_ci, num, plot_by, runs_of, PlotBy};
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
            feeds: "the NVMe power state (Set Features, Power Management; APST off so the state holds): its idle power, measured before each run's I/O with the state in force, per component, and under load performance, the SSD's power and IOPS/J per component per state (the paper: lower active states trade performance for device power and generally lose efficiency under load; inactive states cut idle power)",
            unsupported: &[],
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
/// is not an NVMe namespace. Each run measures its own idle baseline after its state is set and
/// before its I/O (`[energy] idle = "per-run"`): the idle power of each state, the non-operational
/// ones (which no I/O can hold) included, and the run's energy above it.
fn power_state_matrix(q: bool) -> String {
    format!(
        "[matrix]\ninterface = [\"io_uring\"]\nnvme_apst = [\"off\"]\nnvme_power_state = {}\nrw = {}\nbs = [\"4k\", \"128k\"]\nqd = [32]\n\n[energy]\nidle = \"per-run\"\nidle_baseline = \"{}\"\n",
        pick(q, "[0, 1, 2, 3, 4]", "[0, 1]"),
        pick(q, r#"["randread", "randwrite"]"#, r#"["randread"]"#),
        pick(q, "10s", "2s"),
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
    idle_panels(ctx, &cs);
    efficiency_table(
        ctx,
        "Efficiency per component by NVMe power state under load (IISWC'26)",
        &cs,
        &[("power state", &state_of), ("rw", &rw_of), ("block size", &bs_of)],
    );
    dynamic_table(ctx, &cs);
    ctx.note("Each run records the controller's power states as Identify Controller gives them (max power, entry and exit latency) and the state in force; APST is off so that the state set holds through the run. A non-operational state (NOPS) processes no I/O: the controller leaves it at the first command, so its runs under load measure the operational state it went to; its idle power is the run's own baseline, taken with the state in force before any I/O.");
}

/// The idle power of one component in a run, from the run's own baseline (taken after its
/// power state was set): the first of the component's scopes whose source covered the idle
/// window. None for a baseline the sweep took once, before any state was set.
fn own_idle_watts(r: &Run, component: &str) -> Option<f64> {
    let e = r.record.energy.as_ref()?;
    if e.idle_baseline_taken.as_deref() != Some("per_run") {
        return None;
    }
    let scopes = crate::energy::record::COMPONENTS.iter().find(|(c, _)| *c == component)?.1;
    scopes.iter().find_map(|scope| {
        e.idle_baseline
            .iter()
            .find(|i| i.scope.as_deref() == Some(*scope) && i.coverage.is_some_and(|c| c >= crate::energy::MIN_COVERAGE_FOR_RATIOS))
            .and_then(|i| i.idle_watts.filter(|w| w.is_finite()))
    })
}

/// Why none of `runs` has its own idle baseline of any component.
fn idle_gap(runs: &[&Run]) -> String {
    let taken: Vec<Option<&str>> = runs.iter().map(|r| r.record.energy.as_ref().and_then(|e| e.idle_baseline_taken.as_deref())).collect();
    if runs.is_empty() {
        "no run of this part ran here".into()
    } else if taken.contains(&Some("once_per_sweep")) {
        "the runs carry the sweep's idle baseline, taken once before any power state was set (--idle once): run S6.4 with its own plan's per-run baseline (the default) to measure each state's".into()
    } else if taken.contains(&Some("per_run")) {
        format!(
            "no source of the SSD's, the CPU's or the system's scope covered the idle baseline ({})",
            energy_gap(runs).unwrap_or_else(|| "the sources measured the runs but not the idle windows".into())
        )
    } else {
        format!("no idle baseline was taken ({})", energy_gap(runs).unwrap_or_else(|| "no energy source measured the runs".into()))
    }
}

/// Whether the controller lists `state` as non-operational, from the run's read-back of the
/// controller's power states; None where it was not read.
fn non_operational(c: &Config, state: &str) -> Option<bool> {
    let n: u64 = state.parse().ok()?;
    c.runs.iter().find_map(|r| {
        r.record.environment.device_settings.iter().find_map(|d| {
            let states = d.get("nvme_power")?.get("power_states")?.as_array()?;
            states.iter().find(|s| s.get("state").and_then(|v| v.as_u64()) == Some(n))?.get("non_operational")?.as_bool()
        })
    })
}

/// S6.4's idle power per power state and component (the run's own baseline, never the sweep's
/// once-for-all one): a table, each state a row (its configurations' runs together), and a figure
/// per component measured.
fn idle_panels(ctx: &mut Ctx, cs: &[&Config]) {
    let title = "Idle power per NVMe power state and component (IISWC'26)";
    let runs = runs_of(cs);
    let have: Vec<&Component> = COMPONENTS.iter().filter(|c| runs.iter().any(|r| own_idle_watts(r, c.0).is_some())).collect();
    if have.is_empty() {
        let mut why = idle_gap(&runs);
        if let Some(s) = skip_note(ctx) {
            why += &format!("; {s}");
        }
        ctx.unavailable(title, &why, &runs);
        return;
    }
    let overlaid = cs.iter().any(|c| c.overlay().is_some());
    let mut head: Vec<String> = vec!["power state".into(), "kind".into()];
    if overlaid {
        head.push("device".into());
    }
    head.push("runs".into());
    head.extend(have.iter().map(|(_, name, _, _)| format!("{name} idle W")));
    let head_refs: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = Table::new(title, &head_refs);
    let mut rows: Vec<(String, Option<String>)> = cs.iter().map(|c| (state_of(c), c.overlay())).collect();
    // By the state's number (10 after 9), then the device.
    rows.sort_by(|a, b| {
        let by_number = match (a.0.parse::<f64>(), b.0.parse::<f64>()) {
            (Ok(x), Ok(y)) => x.total_cmp(&y),
            _ => a.0.cmp(&b.0),
        };
        by_number.then_with(|| a.1.cmp(&b.1))
    });
    rows.dedup();
    for (state, overlay) in &rows {
        let mine: Vec<&&Config> = cs.iter().filter(|c| state_of(c) == *state && c.overlay() == *overlay).collect();
        let kind = match mine.iter().find_map(|c| non_operational(c, state)) {
            Some(true) => "non-operational",
            Some(false) => "operational",
            None => "not read",
        };
        let mine_runs: Vec<&Run> = mine.iter().flat_map(|c| c.runs.iter()).collect();
        let own = mine_runs.iter().filter(|r| have.iter().any(|c| own_idle_watts(r, c.0).is_some())).count();
        let mut row = vec![state.clone(), kind.to_string()];
        if overlaid {
            row.push(overlay.clone().unwrap_or_default());
        }
        row.push(format!("{own} of {}", mine_runs.len()));
        for (component, _, _, _) in &have {
            let values: Vec<f64> = mine_runs.iter().filter_map(|r| own_idle_watts(r, component)).collect();
            row.push(crate::analysis::stats::summarize(&values).map(|s| mean_ci(&s)).unwrap_or_else(|| "not measured".into()));
        }
        t.rows.push(row);
    }
    t.notes.push("Each run's own idle baseline, taken after its power state was set (APST off) and before its I/O, for the baseline's seconds; a row is every run of that state (its configurations together: no I/O ran yet). Mean ± 95 % CI of the runs; \"not measured\" where no source of the component's scope covered the idle window.".into());
    let missing: Vec<&str> = COMPONENTS.iter().filter(|c| !have.iter().any(|h| h.0 == c.0)).map(|c| c.1).collect();
    if !missing.is_empty() {
        t.notes.push(format!(
            "Not measured: {} (no source of that scope covered the runs' idle baselines; docs/energy.md names the sources). The paper measured all three.",
            missing.join(", ")
        ));
    }
    t.notes.extend(skip_note(ctx));
    ctx.table(t, &runs);
    for (component, name, _, _) in have {
        let x_of = |c: &Config| state_of(c).parse::<f64>().ok();
        let y_of = |r: &Run| own_idle_watts(r, component);
        let series_of = |c: &Config| format!("before {} {}", c.first().rw, bs_name(c.first().bs));
        plot_by(
            ctx,
            cs,
            PlotBy {
                title: format!("{name} idle power per NVMe power state"),
                x: axis("NVMe power state", Scale::Linear),
                y: axis(&format!("{name} idle power (W)"), Scale::Linear),
                x_of: &x_of,
                y_of: &y_of,
                series_of: &series_of,
            },
            vec!["Each point is the mean of a configuration's runs' own idle baselines, taken with the state in force before the run's I/O: the series differ only in the I/O that came after. The paper: inactive (non-operational) states cut idle power.".into()],
            Vec::new(),
        );
    }
}

/// I/Os and MiB per joule above idle per component, where the idle baseline is the run's own
/// (the state's); the sweep's once-for-all baseline would mix states.
fn dynamic_table(ctx: &mut Ctx, cs: &[&Config]) {
    let title = "Efficiency above idle per component by NVMe power state (each run's own baseline, IISWC'26)";
    let own = |r: &Run| r.record.energy.as_ref().is_some_and(|e| e.idle_baseline_taken.as_deref() == Some("per_run"));
    let dynamic = |r: &Run, component: &str, bytes: bool| -> Option<f64> {
        let e = r.record.energy.as_ref().filter(|_| own(r))?;
        let eff = e.efficiency.iter().find(|x| x.component.as_deref() == Some(component))?;
        if bytes {
            eff.bytes_per_dynamic_joule.map(|b| b / 1_048_576.0)
        } else {
            eff.iops_per_dynamic_joule
        }
    };
    let runs = runs_of(cs);
    let have: Vec<&Component> = COMPONENTS.iter().filter(|c| runs.iter().any(|r| dynamic(r, c.0, false).is_some())).collect();
    if have.is_empty() {
        let why = if runs.iter().any(|r| own(r)) {
            "no run drew more than its idle power over a covered window, or no source covered both".to_string()
        } else {
            idle_gap(&runs)
        };
        ctx.note(format!("{title}: not measured here: {why}."));
        return;
    }
    let mut head: Vec<String> = vec!["power state".into(), "rw".into(), "block size".into()];
    let overlaid = cs.iter().any(|c| c.overlay().is_some());
    if overlaid {
        head.push("device".into());
    }
    for (_, name, _, _) in &have {
        head.push(format!("{name} IOPS per dynamic J"));
        head.push(format!("{name} MiB per dynamic J"));
    }
    let head_refs: Vec<&str> = head.iter().map(String::as_str).collect();
    let mut t = Table::new(title, &head_refs);
    for c in cs {
        let mut row = vec![state_of(c), rw_of(c), bs_of(c)];
        if overlaid {
            row.push(c.overlay().unwrap_or_default());
        }
        for (component, _, _, _) in &have {
            row.push(cell(c, &|r: &Run| dynamic(r, component, false)));
            row.push(cell(c, &|r: &Run| dynamic(r, component, true)));
        }
        t.rows.push(row);
    }
    t.notes.push("Above idle: the run's joules less its own idle power (the same source and scope, taken with the state in force) over the covered window; \"not measured\" where the baseline was the sweep's, the source covered less than 90 % of either window, or the run drew no more than idle.".into());
    ctx.table(t, &runs);
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

    /// S6.4 measures each state's idle power: every run's own baseline, after its state is set.
    #[test]
    fn power_states_take_an_idle_baseline_per_run() {
        use crate::energy::record::{IdleWhen, PlanIdle};
        let part = STUDY.parts.iter().find(|p| p.name == "S6.4-power-states").unwrap();
        assert!(part.unsupported.is_empty(), "the idle power of every state is measured now");
        for (q, s) in [(true, 2.0), (false, 10.0)] {
            let plan = part.plan(q, &Default::default()).unwrap().unwrap();
            let e = crate::plan::sweep::expand(&plan, &[]).unwrap();
            assert_eq!(e.idle, PlanIdle { when: Some(IdleWhen::PerRun), seconds: Some(s) }, "quick={q}");
            // The command line's length replaces the plan's; `--idle once` its per-run.
            let cli = crate::energy::record::EnergyOptions { idle_baseline_s: Some(1.0), ..Default::default() };
            let both = cli.with_plan(e.idle).unwrap();
            assert!(both.idle_per_run() && both.idle_baseline_s == Some(1.0));
            let once = crate::energy::record::EnergyOptions { idle_when: Some(IdleWhen::Once), ..Default::default() };
            assert!(!once.with_plan(e.idle).unwrap().idle_per_run());
        }
        for other in STUDY.parts.iter().filter(|p| p.name != part.name) {
            let e = crate::plan::sweep::expand(&other.plan(true, &Default::default()).unwrap().unwrap(), &[]).unwrap();
            assert_eq!(e.idle, PlanIdle::default(), "{}", other.name);
        }
    }
}
