//! Energy efficiency per component: I/Os per joule of the drive, the CPU package and the whole
//! system for each configuration of a sweep, one figure per component a run measured (the
//! record's `energy.efficiency`, the store's `<component>_iops_per_joule` columns). Components
//! are never added to each other or drawn on one axis (a drive's I/Os per joule are ten to a
//! hundred times the system's); a configuration whose runs did not measure a component has no bar
//! (never a zero) and is named under the figure with the reason.
use super::ctx::Ctx;
use super::data::{Config, Run};
use super::panels::{labels, num, runs_of};
use super::svg;
use crate::analysis::compare::Metric;

/// The components, as the record names them: (component, what it measures, its I/Os per joule,
/// its I/Os per joule above idle).
const COMPONENTS: [(&str, &str, Metric, Metric); 3] = [
    ("ssd", "the SSD's own power (scope ssd)", Metric::SsdIopsPerJoule, Metric::SsdIopsPerDynamicJoule),
    ("cpu", "the CPU package (scope cpu_package)", Metric::CpuIopsPerJoule, Metric::CpuIopsPerDynamicJoule),
    ("system", "the whole system (scope wall_ac, bmc_system or platform)", Metric::SystemIopsPerJoule, Metric::SystemIopsPerDynamicJoule),
];

/// Why a run has no I/Os per joule of `component`: what its energy report says.
fn missing_reason(r: &Run, component: &str) -> String {
    let Some(e) = &r.record.energy else {
        return "the record has no energy report".into();
    };
    if e.efficiency.iter().any(|x| x.component.as_deref() == Some(component)) {
        return "its source covered less than 90 % of the measured window".into();
    }
    let mut why = format!("no source measured the {component}");
    if !e.reasons.is_empty() {
        why += &format!(" ({})", e.reasons.join("; "));
    }
    why
}

/// The section's efficiency figures, when some run of it measured some component; nothing when
/// none measured energy (the parts' own energy panels say why).
pub(crate) fn panels(ctx: &mut Ctx) {
    let configs = ctx.configs(|_| true);
    let runs = runs_of(&configs);
    let measured = |m: Metric| runs.iter().any(|r| m.of_row(&r.row).is_some());
    if !COMPONENTS.iter().any(|c| measured(c.2)) {
        return;
    }
    let names = labels(&configs);
    let mut unmeasured = Vec::new();
    for (component, what, per_joule, dynamic) in COMPONENTS {
        if !measured(per_joule) {
            let mut why: Vec<String> = runs.iter().map(|r| missing_reason(r, component)).collect();
            why.sort();
            why.dedup();
            unmeasured.push(format!("{component}: {}", why.join(" | ")));
            continue;
        }
        figure(ctx, &configs, &names, component, what, per_joule, dynamic);
    }
    if !unmeasured.is_empty() {
        ctx.note(format!("I/Os per joule not measured in this sweep (no figure, never a zero): {}.", unmeasured.join("; ")));
    }
}

fn figure(ctx: &mut Ctx, configs: &[&Config], names: &[String], component: &str, what: &str, per_joule: Metric, dynamic: Metric) {
    let title = format!("{}: I/Os per joule of {what}", ctx.name());
    let mut bars = Vec::new();
    let mut missing = Vec::new();
    let mut above_idle = Vec::new();
    for (c, name) in configs.iter().zip(names) {
        match c.summary(&|r| per_joule.of_row(&r.row)) {
            Some(s) => {
                bars.push((name.clone(), vec![(per_joule.name().to_string(), s.mean)]));
                if let Some(d) = c.summary(&|r| dynamic.of_row(&r.row)) {
                    above_idle.push(format!("{name}: {}", num(d.mean)));
                }
            }
            None => {
                let mut why: Vec<String> = c.runs.iter().map(|r| missing_reason(r, component)).collect();
                why.sort();
                why.dedup();
                missing.push(format!("{name}: not measured ({})", why.join(" | ")));
            }
        }
    }
    let svg = svg::stacked_bars(&svg::StackedBars {
        title: title.clone(),
        y_label: format!("I/Os per joule ({component}, mean of the replicates)"),
        bars,
    });
    let mut notes = vec![format!(
        "Each bar: the mean over the configuration's replicates of `{}` (I/Os ÷ the energy {what} drew over the measured window; none below 90 % coverage). Components are never added: the drive, the CPU package and the whole system each have their own figure.",
        per_joule.name()
    )];
    if !missing.is_empty() {
        notes.push(format!("No bar: {}.", missing.join("; ")));
    }
    if !above_idle.is_empty() {
        notes.push(format!("Above idle (`{}`, the idle baseline measured by the same source): {}.", dynamic.name(), above_idle.join(", ")));
    }
    let runs = runs_of(configs);
    ctx.figure(&title, svg, &runs, notes);
}
