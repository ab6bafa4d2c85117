//! Where a profiled run's time went, per configuration: the latency of a request split into
//! stages of the stack (`--profile stages`, as FPL'18 Fig 2 split one 4 KiB read), and the CPU
//! time per I/O split into layers (`--profile layers`, as CHEOPS'23 Fig 4 split instructions per
//! I/O), and the run's own CPU by module and function (`--profile layers`, as IISWC'19 Fig 14
//! split it, interrupt against polled). Drawn for any sweep with profiled runs; where the
//! machine could not profile, the panel says why. Profiled runs' IOPS are not the ones to compare configurations by (the same job ran
//! unprofiled first; its numbers are in the record).
use super::ctx::Ctx;
use super::panels::runs_of;
use super::panels::{labels, num};
use super::svg::{stacked_bars, StackedBars};
use super::tables::Table;
use crate::record::read::{CpuPart, RunCpu};
use crate::report::data::{Config, Run};

/// (part, value: µs or instructions) of one bar.
type Parts = Vec<(String, f64)>;

/// The mean of `f` over a configuration's runs that have it.
fn mean_over(runs: &[&Run], f: fn(&Run) -> Option<Parts>) -> Option<Parts> {
    let per_run: Vec<Parts> = runs.iter().filter_map(|r| f(r)).collect();
    let n = per_run.len() as f64;
    let first = per_run.first()?;
    let mut parts: Parts = first.iter().map(|p| (p.0.clone(), 0.0)).collect();
    for run in &per_run {
        for (name, v) in run {
            match parts.iter_mut().find(|p| &p.0 == name) {
                Some(p) => p.1 += v / n,
                None => parts.push((name.clone(), v / n)),
            }
        }
    }
    Some(parts)
}

/// Each stage's time, in µs per request: its share of the traced end to end times the mean end
/// to end, so a bar's parts add up to the mean request.
fn stage_parts(r: &Run) -> Option<Parts> {
    let s = r.record.cost.stages.as_ref()?;
    let whole = s.end_to_end.as_ref()?.mean_ns?;
    Some(s.stages.iter().filter_map(|x| Some((x.layer.clone()?, x.share? * whole / 1000.0))).collect())
}

/// Each layer's self CPU time per I/O in µs, on the I/O path: idle and other processes' user
/// time are left out (their share is in the record).
fn layer_parts(r: &Run) -> Option<Parts> {
    let p = r.record.cost.profile.as_ref()?;
    Some(
        p.layers
            .iter()
            .filter(|l| !matches!(l.layer.as_deref(), Some("idle") | Some("other processes (user)")))
            .filter_map(|l| Some((l.layer.clone()?, l.self_ns_per_io? / 1000.0)))
            .collect(),
    )
}

/// Each layer's self instructions per I/O where the CPUs counted them, left out as the time is.
fn instruction_parts(r: &Run) -> Option<Parts> {
    let p = r.record.cost.profile.as_ref()?;
    let parts: Parts = p
        .layers
        .iter()
        .filter(|l| !matches!(l.layer.as_deref(), Some("idle") | Some("other processes (user)")))
        .filter_map(|l| Some((l.layer.clone()?, l.self_instructions_per_io?)))
        .collect();
    (!parts.is_empty()).then_some(parts)
}

/// Why none of these runs has the profile: the first reason a run recorded.
fn why_not(runs: &[&Run], reason: fn(&Run) -> Option<String>) -> Option<String> {
    runs.iter().find_map(|r| reason(r))
}

/// One stacked-bar panel: what each run contributes, whether it asked for it, and why not.
struct Panel {
    title: &'static str,
    y_label: &'static str,
    parts: fn(&Run) -> Option<Parts>,
    asked: fn(&Run) -> bool,
    reason: fn(&Run) -> Option<String>,
    note: &'static str,
}

const PANELS: [Panel; 3] = [
    Panel {
        title: STAGES,
        y_label: "µs per request (mean)",
        parts: stage_parts,
        asked: |r| r.record.cost.stages.is_some(),
        reason: |r| r.record.cost.stages.as_ref().and_then(|s| s.unavailable.clone()),
        note: "Traced with kernel tracepoints (--profile stages), request by request; each part is the stage's share of the traced end-to-end time times its mean, so a bar is the mean traced request. Tracing slows the run; the record compares it with the same job untraced.",
    },
    Panel {
        title: LAYERS,
        y_label: "CPU µs per I/O (self, system-wide)",
        parts: layer_parts,
        asked: |r| r.record.cost.profile.is_some(),
        reason: |r| r.record.cost.profile.as_ref().and_then(|p| p.unavailable.clone()),
        note: "cpu-clock samples on every CPU (--profile layers), each put in the layer of its innermost frame; idle and other processes' user time left out. Instructions need a PMU: the next panel, where the machine has one.",
    },
    Panel {
        title: INSTRUCTIONS,
        y_label: "instructions per I/O (self, system-wide)",
        parts: instruction_parts,
        asked: |r| r.record.cost.profile.is_some(),
        reason: |r| {
            let p = r.record.cost.profile.as_ref()?;
            p.unavailable.clone().or_else(|| p.hardware.as_ref().and_then(|h| h.unavailable.clone()))
        },
        note: "Cycles sampled on every CPU with instructions read at each sample ({cycles,instructions}:S, --profile layers), each sample's instructions since the previous one put in the layer of its innermost frame; idle and other processes' user time left out.",
    },
];

/// The panels of a sweep with profiled runs, one bar per configuration.
/// The titles of the panels drawn for any profiled sweep, for a study part to cite its paper's
/// figure by (`Ctx::cite`).
pub const STAGES: &str = "One request's latency by stage of the stack";
pub const LAYERS: &str = "CPU time per I/O by layer of the stack";
pub const INSTRUCTIONS: &str = "Instructions per I/O by layer of the stack";
pub const MODULES: &str = "The run's CPU by kernel module and function, user against kernel";

pub fn panels(ctx: &mut Ctx) {
    let configs: Vec<&Config> = ctx.configs(|_| true);
    let runs = runs_of(&configs);
    for p in &PANELS {
        let profiled: Vec<&Run> = runs.iter().copied().filter(|r| (p.asked)(r)).collect();
        if profiled.is_empty() {
            continue;
        }
        let bars: Vec<(String, Parts)> = configs
            .iter()
            .zip(labels(&configs))
            .filter_map(|(c, label)| {
                let rs: Vec<&Run> = c.runs.iter().collect();
                Some((label, mean_over(&rs, p.parts)?))
            })
            .collect();
        let title = ctx.cited(p.title);
        if bars.is_empty() {
            let why = why_not(&profiled, p.reason).unwrap_or_else(|| "no run recorded this profile".into());
            ctx.unavailable(&title, &why, &profiled);
            continue;
        }
        let shares = (p.title != STAGES).then(|| shares_table(&title, p.y_label, &bars));
        let svg = stacked_bars(&StackedBars { title: title.clone(), y_label: p.y_label.into(), bars });
        ctx.figure(&title, svg, &profiled, vec![p.note.into()]);
        if let Some(t) = shares {
            ctx.table(t, &profiled);
        }
    }
    modules_table(ctx, &configs);
    cost_table(ctx, &configs);
    flame_graphs(ctx, &configs);
}

/// Each bar of a layer split as shares of its whole, in %: CHEOPS'23 Fig 4 draws the split in
/// % of instructions, so the µs or instructions per I/O of the figure are also given that way.
fn shares_table(title: &str, of: &str, bars: &[(String, Parts)]) -> Table {
    let mut layers: Vec<&str> = Vec::new();
    for (_, parts) in bars {
        for (layer, _) in parts {
            if !layers.contains(&layer.as_str()) {
                layers.push(layer);
            }
        }
    }
    let mut columns = vec!["configuration".to_string()];
    columns.extend(layers.iter().map(|l| format!("{l} (%)")));
    let mut t = Table { title: format!("{title}: each layer's share in %"), columns, ..Default::default() };
    for (label, parts) in bars {
        let whole: f64 = parts.iter().map(|(_, v)| v).sum();
        let mut row = vec![label.clone()];
        for l in &layers {
            row.push(match parts.iter().find(|(p, _)| p == l) {
                Some((_, v)) if whole > 0.0 => format!("{:.1}", 100.0 * v / whole),
                Some(_) => "–".into(),
                None => "0.0".into(),
            });
        }
        t.rows.push(row);
    }
    t.notes.push(format!("Each layer's part of the bar's whole ({of}), so the columns of a row add up to 100 %."));
    t
}

/// A flame graph of each profiled configuration's own CPU, from its first replicate that has one
/// (replicates' stacks are not merged: each is one run's).
fn flame_graphs(ctx: &mut Ctx, configs: &[&Config]) {
    for (c, label) in configs.iter().zip(labels(configs)) {
        let Some((run, flame)) = c.runs.iter().find_map(|r| Some((r, r.record.cost.profile.as_ref()?.flame.as_ref()?))) else {
            continue;
        };
        let title = format!("Flame graph of the run's own CPU: {label}");
        if let Some(svg) = super::flame::flame_graph(&title, flame) {
            let note = "cpu-clock samples of iolab's threads and of interrupt work on idle CPUs (--profile layers), each stack root at the bottom; a frame's width is its share of those samples, its colour its layer. Hover for counts.";
            ctx.figure(&title, svg, &[run], vec![note.into()]);
        }
    }
}

/// A module's row is kept when it holds at least this share of the run's CPU; the rest are
/// summed into one row, so a table stays a page (a psync run on virtio: ~25 modules, 8 above 2 %).
const MODULE_FLOOR: f64 = 0.02;

/// Each configuration's own CPU by user and kernel space, module (with its layer) and busiest
/// functions: IISWC'19 Fig 14 (a) and (b), for whatever completion paths the sweep ran.
fn modules_table(ctx: &mut Ctx, configs: &[&Config]) {
    let profiled = |c: &&Config| c.runs.iter().any(|r| run_cpu(r).is_some());
    let rows: Vec<&Config> = configs.iter().copied().filter(profiled).collect();
    if rows.is_empty() {
        return;
    }
    let mut t = Table::new(
        ctx.cited(MODULES),
        &["configuration", "space", "module", "layer", "share of the run's CPU", "CPU µs per I/O", "busiest functions (share)"],
    );
    let pct = |x: f64| format!("{:.1} %", 100.0 * x);
    let us = |ns: Option<f64>| ns.map(|n| num(n / 1000.0)).unwrap_or_else(|| "–".into());
    for (c, name) in rows.iter().zip(labels(&rows)) {
        // The first replicate with the profile: modules do not average across runs cleanly (a
        // module below the floor in one run is absent from another's list).
        let Some(cpu) = c.runs.iter().find_map(run_cpu) else { continue };
        t.rows.push(vec![
            name.clone(),
            format!("user {} / kernel {}", pct(cpu.user_share.unwrap_or(0.0)), pct(cpu.kernel_share.unwrap_or(0.0))),
            "(all)".into(),
            "".into(),
            "100 %".into(),
            us(cpu.ns_per_io),
            format!("{} samples", cpu.samples.unwrap_or(0)),
        ]);
        let (kept, rest): (Vec<&CpuPart>, Vec<&CpuPart>) = cpu.modules.iter().partition(|m| m.share.unwrap_or(0.0) >= MODULE_FLOOR);
        for m in kept {
            let same = |f: &&CpuPart| f.space == m.space && f.module == m.module && f.layer == m.layer;
            let top: Vec<String> = cpu
                .functions
                .iter()
                .filter(same)
                .take(3)
                .map(|f| format!("{} ({})", f.function.as_deref().unwrap_or("?"), pct(f.share.unwrap_or(0.0))))
                .collect();
            t.rows.push(vec![
                name.clone(),
                m.space.clone().unwrap_or_default(),
                m.module.clone().unwrap_or_default(),
                m.layer.clone().unwrap_or_default(),
                pct(m.share.unwrap_or(0.0)),
                us(m.ns_per_io),
                top.join(", "),
            ]);
        }
        if !rest.is_empty() {
            let share: f64 = rest.iter().filter_map(|m| m.share).sum();
            let ns: Option<f64> = rest.iter().map(|m| m.ns_per_io).sum();
            t.rows.push(vec![name, "".into(), format!("({} more modules)", rest.len()), "".into(), pct(share), us(ns), "".into()]);
        }
    }
    t.notes.push(format!(
        "cpu-clock samples (--profile layers) of iolab's threads and of interrupt work on idle CPUs, by the innermost frame: its module from /proc/kallsyms (vmlinux: built in, split by layer, so blk-mq and the I/O scheduler show apart) or its mapped file in user space. Modules under {} % of the run's CPU are summed. Counted as CPU time, not cycles; loads and stores per function need hardware memory-instruction counters, which iolab does not sample.",
        100.0 * MODULE_FLOOR
    ));
    let runs = runs_of(&rows);
    ctx.table(t, &runs);
}

/// What profiling cost each configuration: its unprofiled run (made just before the profiled
/// one) beside the profiled run, whose numbers are in no figure that compares configurations.
fn cost_table(ctx: &mut Ctx, configs: &[&Config]) {
    let unprofiled = |r: &Run| {
        let c = &r.record.cost;
        c.profile.as_ref().and_then(|p| p.unprofiled.clone()).or_else(|| c.stages.as_ref().and_then(|s| s.unprofiled.clone()))
    };
    let rows: Vec<&Config> = configs.iter().copied().filter(|c| c.runs.iter().any(|r| unprofiled(r).is_some())).collect();
    if rows.is_empty() {
        return;
    }
    let mut t = Table::new(
        "What profiling cost: each configuration unprofiled and profiled",
        &[
            "configuration",
            "IOPS unprofiled",
            "IOPS profiled",
            "IOPS change",
            "mean latency unprofiled (µs)",
            "mean latency profiled (µs)",
            "latency change",
        ],
    );
    let change = |x: Option<f64>| x.map(|v| format!("{:+.1} %", 100.0 * v)).unwrap_or_else(|| "–".into());
    let mean = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let show = |x: Option<f64>| x.map(num).unwrap_or_else(|| "–".into());
    for (c, name) in rows.iter().zip(labels(&rows)) {
        let pairs: Vec<(&Run, crate::record::read::Unprofiled)> = c.runs.iter().filter_map(|r| Some((r, unprofiled(r)?))).collect();
        let of = |f: &dyn Fn(&(&Run, crate::record::read::Unprofiled)) -> Option<f64>| mean(pairs.iter().filter_map(f).collect());
        t.rows.push(vec![
            name,
            show(of(&|p| p.1.iops)),
            show(of(&|p| super::panels::iops(p.0))),
            change(of(&|p| p.1.iops_change)),
            show(of(&|p| p.1.mean_latency_ns).map(|n| n / 1000.0)),
            show(of(&|p| super::panels::lat_mean_us(p.0))),
            change(of(&|p| p.1.mean_latency_change)),
        ]);
    }
    t.notes.push("Profiling perturbs what it measures (a timer interrupt per CPU every 250 µs for layers, a record per tracepoint hit for stages), so every profiled run is made twice: unprofiled, then profiled. Means over the replicates. Figures comparing configurations use unprofiled parts' runs, never these.".into());
    let runs = runs_of(&rows);
    ctx.table(t, &runs);
}

fn run_cpu(r: &Run) -> Option<&RunCpu> {
    r.record.cost.profile.as_ref()?.run.as_ref().filter(|c| c.samples.unwrap_or(0) > 0)
}
