//! Where a profiled run's time went, per configuration: the latency of a request split into
//! stages of the stack (`--profile stages`, as FPL'18 Fig 2 split one 4 KiB read), and the CPU
//! time per I/O split into layers (`--profile layers`, as CHEOPS'23 Fig 4 split instructions per
//! I/O). Drawn for any sweep with profiled runs; where the machine could not profile, the panel
//! says why. Profiled runs' IOPS are not the ones to compare configurations by (the same job ran
//! unprofiled first; its numbers are in the record).
use super::panels::runs_of;
use super::sections::Ctx;
use super::svg::{stacked_bars, StackedBars};
use crate::report::data::{Config, Run};

/// (part, µs) of one bar.
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

const PANELS: [Panel; 2] = [
    Panel {
        title: "One request's latency by stage of the stack (FPL'18 Fig 2)",
        y_label: "µs per request (mean)",
        parts: stage_parts,
        asked: |r| r.record.cost.stages.is_some(),
        reason: |r| r.record.cost.stages.as_ref().and_then(|s| s.unavailable.clone()),
        note: "Traced with kernel tracepoints (--profile stages), request by request; each part is the stage's share of the traced end-to-end time times its mean, so a bar is the mean traced request. Tracing slows the run; the record compares it with the same job untraced.",
    },
    Panel {
        title: "CPU time per I/O by layer of the stack (CHEOPS'23 Fig 4)",
        y_label: "CPU µs per I/O (self, system-wide)",
        parts: layer_parts,
        asked: |r| r.record.cost.profile.is_some(),
        reason: |r| r.record.cost.profile.as_ref().and_then(|p| p.unavailable.clone()),
        note: "cpu-clock samples on every CPU (--profile layers), each put in the layer of its innermost frame; idle and other processes' user time left out. CHEOPS'23 counted instructions, which need a PMU; this is CPU time.",
    },
];

/// The panels of a sweep with profiled runs, one bar per configuration.
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
            .filter_map(|c| {
                let rs: Vec<&Run> = c.runs.iter().collect();
                let r = c.first();
                Some((format!("{} QD{}", r.interface, r.qd), mean_over(&rs, p.parts)?))
            })
            .collect();
        if bars.is_empty() {
            let why = why_not(&profiled, p.reason).unwrap_or_else(|| "no run recorded this profile".into());
            ctx.unavailable(p.title, &why, &profiled);
            continue;
        }
        let svg = stacked_bars(&StackedBars { title: p.title.into(), y_label: p.y_label.into(), bars });
        ctx.figure(p.title, svg, &profiled, vec![p.note.into()]);
    }
}
