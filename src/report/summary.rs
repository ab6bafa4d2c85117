//! The human summary of one run, in the spirit of hyperfine: the few numbers that matter, with
//! units people read at a glance. The JSON holds everything else.
use crate::meters::profile::{Hardware, LayerProfile, ProfileResult};
use crate::meters::stages::StagesResult;
use crate::plan::size::format_bytes;
pub use crate::plan::size::format_ns;
use crate::record::{DirectionResult, RunRecord};
use std::fmt::Write;

pub(crate) fn format_count(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

fn direction(out: &mut String, name: &str, d: &DirectionResult) {
    if d.ios == 0 && d.errors == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "  {name:<6} {:>9} IOPS  {:>11}/s  {} I/Os{}",
        format_count(d.iops),
        format_bytes(d.bw_bytes_per_s),
        d.ios,
        if d.errors > 0 { format!(", {} ERRORS", d.errors) } else { String::new() }
    );
    if let Some(l) = &d.lat_ns {
        let _ = writeln!(
            out,
            "         latency  mean {} ± {}   min {}   max {}",
            format_ns(l.mean),
            format_ns(l.stdev),
            format_ns(l.min as f64),
            format_ns(l.max as f64)
        );
        let _ = writeln!(
            out,
            "                  p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  p99.999 {}",
            format_ns(l.p50 as f64),
            format_ns(l.p90 as f64),
            format_ns(l.p99 as f64),
            format_ns(l.p99_9 as f64),
            format_ns(l.p99_99 as f64),
            format_ns(l.p99_999 as f64)
        );
    }
}

pub fn render(rec: &RunRecord) -> String {
    let s = &rec.spec;
    let mut out = String::new();
    let targets: Vec<String> = rec
        .environment
        .targets
        .iter()
        .map(|t| {
            let dev = t.device.as_deref().map(|d| format!(" on {d}")).unwrap_or_default();
            let fs = t.filesystem.as_deref().map(|f| format!("{f} ")).unwrap_or_default();
            format!("{} ({}{}{})", t.path, fs, t.kind, dev)
        })
        .collect();
    let submit = if s.io.submit == crate::plan::Submit::Sqpoll { "sqpoll" } else { "syscall" };
    let _ = writeln!(
        out,
        "{} [{} submit, {} completion] {} {} QD{} x {} thread{} on {}",
        s.io.interface,
        submit,
        s.io.complete.name(),
        s.workload.rw.name(),
        format_bytes(s.workload.bs as f64),
        s.workload.qd,
        s.workload.threads,
        if s.workload.threads == 1 { "" } else { "s" },
        targets.join(", ")
    );
    let Some(r) = &rec.results else {
        return out;
    };
    // A time with a count: which came first.
    let ended = match r.ended_by {
        Some("seconds") => ", ended by the time limit".to_string(),
        Some(count) => format!(", ended by its {count} before the time limit"),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "  window {:.2} s measured (after {} s ramp){ended}{}",
        r.window_s,
        s.timing.ramp_s,
        if rec.status == crate::record::RunStatus::Interrupted { ", INTERRUPTED" } else { "" }
    );
    direction(&mut out, "read", &r.read);
    direction(&mut out, "write", &r.write);
    let c = &r.cpu;
    let per_io = match (c.user_ns_per_io, c.system_ns_per_io) {
        (Some(u), Some(k)) => format!("; per I/O {} user + {} system", format_ns(u), format_ns(k)),
        _ => String::new(),
    };
    let _ = writeln!(out, "  cpu    {:.2} cores (user {:.2} s, system {:.2} s){per_io}", c.cores, c.user_s, c.system_s);
    let diskless = s.io.interface.info().diskless;
    if let (true, Some(u), Some(k)) = (diskless, c.user_ns_per_io, c.system_ns_per_io) {
        let _ = writeln!(
            out,
            "  harness {} of CPU per I/O: {} does no I/O, so this is iolab's own cost (hot loop, clock, recorder)",
            format_ns(u + k),
            s.io.interface
        );
    }
    if let Some(v) = &r.verify {
        let _ = writeln!(
            out,
            "  verify {} reads checked, {} written blocks read back and checked",
            v.reads_checked, v.written_blocks_read_back
        );
    }
    if let Some(c) = &rec.cost {
        cost(&mut out, c);
    }
    if let Some(e) = &rec.energy {
        energy(&mut out, e);
    }
    let p = &rec.completion_path;
    if p.fell_back {
        let _ = writeln!(
            out,
            "  WARNING: asked for {} completion but completions came by interrupt ({}){}",
            p.requested,
            p.evidence.as_deref().unwrap_or(""),
            p.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default()
        );
    } else if let Some(reason) = p.reason.as_ref().filter(|_| !diskless) {
        let _ = writeln!(out, "  warning: asked for {} completion, expect {}: {reason}", p.requested, p.expected);
    }
    if !diskless {
        let _ = writeln!(out, "  path   {}", p.mechanism);
    }
    if let (Some(o), Some(e)) = (&p.observed, &p.evidence) {
        let _ = writeln!(out, "  path   completion observed: {o} ({e})");
    }
    out
}

/// The run's cost: CPU, devices, perf counters, then the layer profile and the stages where taken.
fn cost(out: &mut String, c: &crate::meters::Cost) {
    cores(out, c);
    devices(out, c);
    counters(out, c);
    match &c.profile {
        Some(ProfileResult::Measured(p)) => {
            layers(out, p);
            layers_cost(out, p);
        }
        Some(ProfileResult::Unavailable { unavailable }) => {
            let _ = writeln!(out, "  layers unavailable: {unavailable}");
        }
        None => {}
    }
    match &c.stages {
        Some(StagesResult::Measured(p)) => stages(out, p),
        Some(StagesResult::Unavailable { unavailable }) => {
            let _ = writeln!(out, "  stages unavailable: {unavailable}");
        }
        None => {}
    }
}

/// The `cores` line (CPU by thread class) and the system-wide one, then the workload's context
/// switches.
fn cores(out: &mut String, c: &crate::meters::Cost) {
    let classes: Vec<String> = c
        .classes
        .iter()
        .filter(|k| k.cpu_s > 0.0 || k.class == "workload")
        .map(|k| {
            let per = k.ns_per_io.map(|n| format!(" {}/IO", format_ns(n))).unwrap_or_default();
            format!("{} {:.2}{per}", k.class.replace('_', "-"), k.cores)
        })
        .collect();
    let _ = writeln!(out, "  cores  {}", classes.join(", "));
    if let Some(s) = &c.system {
        let pct = |x: f64| if s.busy_s > 0.0 { 100.0 * x / s.busy_s } else { 0.0 };
        let _ = writeln!(
            out,
            "         system-wide {:.2} of {} cores busy{} (user {:.0}%, system {:.0}%, irq {:.0}%, softirq {:.0}%, steal {:.0}%)",
            s.busy_cores,
            s.cpus,
            s.busy_ns_per_io.map(|n| format!(", {}/IO", format_ns(n))).unwrap_or_default(),
            pct(s.cpu.user_s + s.cpu.nice_s),
            pct(s.cpu.system_s),
            pct(s.cpu.irq_s),
            pct(s.cpu.softirq_s),
            pct(s.cpu.steal_s)
        );
    }
    if let Some(w) = c.classes.iter().find(|k| k.class == "workload") {
        if let Some(x) = w.ctx_switches_per_io {
            let _ = writeln!(
                out,
                "  ctxsw  workload {x:.3}/IO ({} voluntary, {} involuntary)",
                w.voluntary_ctx_switches.unwrap_or(0),
                w.involuntary_ctx_switches.unwrap_or(0)
            );
        }
    }
}

/// One line per device: its queue interrupts and what it counted against iolab.
fn devices(out: &mut String, c: &crate::meters::Cost) {
    for d in &c.devices {
        let irq = match (d.queue_interrupts, d.queue_interrupts_per_io) {
            (Some(n), Some(p)) if d.irq_shared_with.is_empty() => {
                format!("{n} queue interrupts ({p:.3}/IO) on {}", d.controller.as_deref().unwrap_or("?"))
            }
            (Some(n), Some(p)) => format!(
                "{n} queue interrupts ({p:.3}/IO, the same lines as {}) on {}",
                d.irq_shared_with.join(", "),
                d.controller.as_deref().unwrap_or("?")
            ),
            _ => "no device interrupts to count".to_string(),
        };
        let stat = match (d.device_ios, d.difference) {
            (Some(n), Some(diff)) => format!("; device counted {n} I/Os ({diff:+} vs iolab)"),
            _ => String::new(),
        };
        let _ = writeln!(out, "  device {}: {irq}{stat}", d.device.as_deref().unwrap_or(&d.target));
    }
}

/// The `perf` line: instructions and IPC per I/O, the workload's task clock.
fn counters(out: &mut String, c: &crate::meters::Cost) {
    if let Some(k) = &c.counters {
        let w = &k.workload_per_io;
        let hw = match (&k.hardware_unavailable, w.instructions, w.ipc) {
            (Some(_), _, _) => "no hardware counters on this machine".to_string(),
            (None, Some(i), ipc) => format!("{i:.0} instructions/IO, IPC {}", ipc.map(|x| format!("{x:.2}")).unwrap_or("-".into())),
            _ => "hardware counters not read".to_string(),
        };
        let sw = w.task_clock_ns.map(|t| format!("; workload task clock {}/IO", format_ns(t))).unwrap_or_default();
        let _ = writeln!(out, "  perf   {hw}{sw}");
    }
}

/// `--profile layers`: the sampling and each layer's self share, CPU, instructions and cycles per I/O.
fn layers(out: &mut String, p: &LayerProfile) {
    let _ = writeln!(
        out,
        "  layers {} samples every {} (cpu-clock), {} lost; self share, CPU per I/O:",
        p.samples,
        format_ns(p.period_ns as f64),
        p.lost
    );
    for l in p.layers.iter().filter(|l| l.self_share >= 0.005) {
        let per_io = l.self_ns_per_io.map(|n| format!(" {}/IO", format_ns(n))).unwrap_or_default();
        let counted = match (l.self_instructions_per_io, l.self_cycles_per_io) {
            (Some(i), Some(c)) => format!(" {i:.0} instructions, {c:.0} cycles/IO"),
            _ => String::new(),
        };
        let top = l.top_functions.first().map(|(f, _)| format!(" (top: {f})")).unwrap_or_default();
        let _ = writeln!(out, "         {:>5.1} %{per_io}{counted}  {}{top}", l.self_share * 100.0, l.layer);
    }
}

/// `--profile layers`, what follows the layers: the hardware sampler, the run's own CPU by
/// module, and what profiling cost against the same job unprofiled.
fn layers_cost(out: &mut String, p: &LayerProfile) {
    match &p.hardware {
        Hardware::Counted(h) => {
            let per_io = match (h.instructions_per_io, h.cycles_per_io) {
                (Some(i), Some(c)) => format!(": {i:.0} instructions, {c:.0} cycles per I/O over every CPU"),
                _ => format!(": {} instructions, {} cycles over every CPU", h.instructions, h.cycles),
            };
            let _ = writeln!(out, "         {} {} samples, {} lost{per_io}", h.event, h.samples, h.lost);
        }
        Hardware::Unavailable { unavailable } => {
            let _ = writeln!(out, "         no cycles or instructions per layer: {unavailable}");
        }
    }
    let r = &p.run;
    if r.samples > 0 {
        let per_io = r.ns_per_io.map(|n| format!(" {}/IO", format_ns(n))).unwrap_or_default();
        let modules: Vec<String> =
            r.modules.iter().take(4).map(|m| format!("{} {} ({}) {:.1} %", m.space, m.module, m.layer, m.share * 100.0)).collect();
        let _ = writeln!(
            out,
            "         the run's own CPU{per_io}: user {:.1} %, kernel {:.1} %; by module: {}",
            r.user_share * 100.0,
            r.kernel_share * 100.0,
            modules.join(", ")
        );
    }
    if let Some(u) = &p.unprofiled {
        let lat = u.mean_latency_change.map(|c| format!(", mean latency {:+.1} %", c * 100.0)).unwrap_or_default();
        let _ = writeln!(
            out,
            "         profiling cost: IOPS {:+.1} %{lat} against the same job unprofiled ({} IOPS)",
            u.iops_change * 100.0,
            format_count(u.iops)
        );
    }
}

/// `--profile stages`: each stage's p50, p99 and share of the end-to-end time.
fn stages(out: &mut String, p: &crate::meters::stages::StageProfile) {
    let iolab = p.iolab_p50_ns.map(|n| format!("; iolab's own p50 {}", format_ns(n))).unwrap_or_default();
    let whole = p.end_to_end.as_ref().map(|e| format!(", traced end to end p50 {} p99 {}", format_ns(e.p50_ns), format_ns(e.p99_ns)));
    let _ = writeln!(
        out,
        "  stages {} requests matched, {} not{}{iolab}; p50, p99, share:",
        format_count(p.requests_matched as f64),
        format_count(p.requests_unmatched as f64),
        whole.unwrap_or_default()
    );
    for s in &p.stages {
        let _ = writeln!(
            out,
            "         {:>9} {:>9} {:>5.1} %  {} ({} -> {})",
            format_ns(s.p50_ns),
            format_ns(s.p99_ns),
            s.share * 100.0,
            s.layer,
            s.from,
            s.to
        );
    }
    if p.requests_split > 0 {
        let _ = writeln!(
            out,
            "         {} of them split by the block layer into parts, each ended by its last part",
            format_count(p.requests_split as f64)
        );
    }
    if p.requests_completion_untraced > 0 {
        let _ = writeln!(
            out,
            "         {} of them completed with no completion record (an interrupt on an idle CPU): device, interrupt and return are one stage",
            format_count(p.requests_completion_untraced as f64)
        );
    }
    if p.lost > 0 || p.capped_after_s.is_some() {
        let cap = p.capped_after_s.map(|s| format!(", traced only the first {s:.1} s")).unwrap_or_default();
        let _ = writeln!(out, "         {} records lost{cap}", p.lost);
    }
    if let Some(u) = &p.unprofiled {
        let lat = u.mean_latency_change.map(|c| format!(", mean latency {:+.1} %", c * 100.0)).unwrap_or_default();
        let _ = writeln!(out, "         tracing cost: IOPS {:+.1} %{lat} against the same job untraced", u.iops_change * 100.0);
    }
}

fn energy(out: &mut String, e: &crate::energy::record::EnergyRecord) {
    let r = &e.report;
    if r.sources.is_empty() {
        let backends: Vec<&str> = r.reasons.iter().filter_map(|x| x.split(':').next()).collect();
        let _ =
            writeln!(out, "  energy unavailable: no energy source can measure here (checked {}; reasons in the JSON)", backends.join(", "));
        return;
    }
    for s in &r.sources {
        let per = s.iops_per_joule.map(|x| format!(", {x:.0} I/Os per joule")).unwrap_or_default();
        let _ = writeln!(
            out,
            "  energy {} {}: {:.2} J, {:.2} W mean{per} (coverage {:.0} %)",
            s.source,
            s.scope,
            s.joules,
            s.mean_watts,
            s.coverage * 100.0
        );
    }
    for d in &e.dynamic {
        let per = d.ios_per_dynamic_joule.map(|x| format!(", {x:.0} I/Os per dynamic joule")).unwrap_or_default();
        let _ = writeln!(out, "         {} {} above idle: {:.2} J, {:.2} W{per}", d.source, d.scope, d.dynamic_joules, d.dynamic_watts);
    }
}
