//! The human summary of one run, in the spirit of hyperfine: the few numbers that matter, with
//! units people read at a glance. The JSON holds everything else.
use crate::plan::size::format_bytes;
use crate::plan::validate::name_complete;
use crate::record::{DirectionResult, RunRecord};
use std::fmt::Write;

pub fn format_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

pub fn format_count(x: f64) -> String {
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
    let _ = writeln!(out, "  {name:<6} {:>9} IOPS  {:>11}/s  {} I/Os{}", format_count(d.iops), format_bytes(d.bw_bytes_per_s), d.ios,
        if d.errors > 0 { format!(", {} ERRORS", d.errors) } else { String::new() });
    if let Some(l) = &d.lat_ns {
        let _ = writeln!(out, "         latency  mean {} ± {}   min {}   max {}", format_ns(l.mean), format_ns(l.stdev), format_ns(l.min as f64), format_ns(l.max as f64));
        let _ = writeln!(out, "                  p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  p99.999 {}",
            format_ns(l.p50 as f64), format_ns(l.p90 as f64), format_ns(l.p99 as f64), format_ns(l.p99_9 as f64), format_ns(l.p99_99 as f64), format_ns(l.p99_999 as f64));
    }
}

pub fn render(rec: &RunRecord) -> String {
    let s = &rec.spec;
    let mut out = String::new();
    let targets: Vec<String> = rec.environment.targets.iter().map(|t| {
        let dev = t.device.as_deref().map(|d| format!(" on {d}")).unwrap_or_default();
        let fs = t.filesystem.as_deref().map(|f| format!("{f} "))
            .unwrap_or_default();
        format!("{} ({}{}{})", t.path, fs, t.kind, dev)
    }).collect();
    let submit = if s.submit == crate::plan::Submit::Sqpoll { "sqpoll" } else { "syscall" };
    let _ = writeln!(out, "{} [{} submit, {} completion] {} {} QD{} x {} thread{} on {}", s.interface, submit, name_complete(s.complete),
        s.rw.name(), format_bytes(s.bs as f64), s.qd, s.threads, if s.threads == 1 { "" } else { "s" }, targets.join(", "));
    let Some(r) = &rec.results else {
        return out;
    };
    let _ = writeln!(out, "  window {:.2} s measured (after {} s ramp){}", r.window_s, s.ramp_s, if rec.status == "interrupted" { ", INTERRUPTED" } else { "" });
    direction(&mut out, "read", &r.read);
    direction(&mut out, "write", &r.write);
    let c = &r.cpu;
    let per_io = match (c.user_ns_per_io, c.system_ns_per_io) {
        (Some(u), Some(k)) => format!("; per I/O {} user + {} system", format_ns(u), format_ns(k)),
        _ => String::new(),
    };
    let _ = writeln!(out, "  cpu    {:.2} cores (user {:.2} s, system {:.2} s){per_io}", c.cores, c.user_s, c.system_s);
    if let Some(v) = &r.verify {
        let _ = writeln!(out, "  verify {} reads checked, {} written blocks read back and checked", v.reads_checked, v.written_blocks_read_back);
    }
    let p = &rec.completion_path;
    if let Some(reason) = &p.reason {
        let _ = writeln!(out, "  warning: asked for {} completion, expect {}: {reason}", p.requested, p.expected);
    }
    out
}
