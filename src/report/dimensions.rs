//! Figures for a sweep that is not a study part, as fio-plot users expect them: for each swept
//! numeric dimension (one whose configurations take more than one value: bs, qd, threads, batch,
//! write_mix), each measured quantity against it, one series per combination of the swept
//! categorical dimensions (interface, submit, complete, rw, scheduler; a target, and a machine
//! of a merged database, are named as every study figure names them, `Config::overlay`). The other swept
//! numeric dimensions are held: one figure per held value, so that every figure reads as "this
//! quantity against this dimension, one line per method". Points are replicate means with the
//! 95 % CI as error bars, hollow where a replicate is a MAD outlier or polling fell back.
use super::ctx::Ctx;
use super::data::{Config, Run};
use super::panels::{axis, bs_name, energy_gap, iops, lat_mean_us, plot_by, us, PlotBy};
use super::svg::Scale;
use crate::analysis::compare::{Metric, ENERGY_SCOPES};
use crate::plan::matrix::{KeyValue, DIMENSIONS};

/// A quantity drawn against each swept dimension.
struct Quantity {
    name: &'static str,
    unit: &'static str,
    of: fn(&Run) -> Option<f64>,
}

const QUANTITIES: [Quantity; 6] = [
    Quantity { name: "IOPS", unit: "", of: iops },
    Quantity { name: "Bandwidth", unit: "MB/s", of: |r| r.row.metrics.bw_bytes_per_s.map(|b| b / 1e6) },
    Quantity { name: "Mean latency", unit: "µs", of: lat_mean_us },
    Quantity { name: "p99 latency", unit: "µs", of: |r| us(r.row.metrics.lat_p99_ns) },
    Quantity { name: "CPU time per I/O", unit: "µs of iolab's process", of: |r| Metric::CpuNsPerIo.of_row(&r.row).map(|ns| ns / 1e3) },
    Quantity { name: "Energy per I/O", unit: "µJ", of: |r| Metric::JoulesPerIo.of_record(&r.record).map(|j| j * 1e6) },
];

/// The first four are drawn always (a figure without data says why); CPU and energy only where
/// some run of the sweep has them, and otherwise a note says why not.
const ALWAYS: usize = 4;

/// A numeric dimension on an axis: its label and how a key's value maps to it.
fn x_axis(dim: usize) -> (&'static str, f64) {
    match DIMENSIONS[dim].name {
        "bs" => ("block size", 1.0),
        "qd" => ("queue depth", 1.0),
        "threads" => ("threads", 1.0),
        "batch" => ("requests per submission", 1.0),
        "write_mix" => ("writes (% of I/Os)", 1.0),
        other => (other, 1.0),
    }
}

/// A dimension's value as a reader says it: `qd 8`, `bs 4 KiB`, `io_uring`.
fn said(dim: usize, v: &KeyValue) -> String {
    let name = DIMENSIONS[dim].name;
    match (name, v) {
        ("bs", KeyValue::Number(n)) => format!("bs {}", bs_name(*n as u64)),
        ("write_mix", KeyValue::Number(n)) => format!("{n} % writes"),
        (_, KeyValue::Number(n)) => format!("{name} {n}"),
        ("interface" | "submit" | "complete" | "rw", KeyValue::Text(t)) => t.clone(),
        (_, KeyValue::Text(t)) => format!("{name} {t}"),
    }
}

fn number(c: &Config, dim: usize) -> Option<f64> {
    match c.dim(dim)? {
        KeyValue::Number(n) => Some(*n),
        KeyValue::Text(_) => None,
    }
}

/// The dimensions whose configurations take more than one value, numeric ones apart (a numeric
/// dimension with a value that is not a number is categorical here).
pub(crate) fn swept(configs: &[&Config]) -> (Vec<usize>, Vec<usize>) {
    let mut numeric = Vec::new();
    let mut categorical = Vec::new();
    for (d, dim) in DIMENSIONS.iter().enumerate() {
        let mut values: Vec<&KeyValue> = Vec::new();
        for v in configs.iter().filter_map(|c| c.dim(d)) {
            if !values.contains(&v) {
                values.push(v);
            }
        }
        if values.len() < 2 {
            continue;
        }
        if dim.numeric() && values.iter().all(|v| matches!(v, KeyValue::Number(_))) {
            numeric.push(d);
        } else {
            categorical.push(d);
        }
    }
    (numeric, categorical)
}

/// The section's figures; nothing when no numeric dimension is swept.
pub fn figures(ctx: &mut Ctx) -> bool {
    let configs = ctx.configs(|_| true);
    let (numeric, mut categorical) = swept(&configs);
    if numeric.is_empty() {
        return false;
    }
    // Targets are overlaid like machines: each series names its devices (`Config::overlay`).
    categorical.retain(|&d| DIMENSIONS[d].name != "target");
    let runs = ctx.all_runs();
    let mut quantities: Vec<&Quantity> = QUANTITIES[..ALWAYS].iter().collect();
    for q in &QUANTITIES[ALWAYS..] {
        if runs.iter().any(|r| (q.of)(r).is_some()) {
            quantities.push(q);
        }
    }
    if runs.iter().all(|r| Metric::CpuNsPerIo.of_row(&r.row).is_none()) {
        ctx.note("CPU time per I/O is not drawn: no run of this sweep recorded iolab's CPU use and IOPS.");
    }
    if let Some(why) = energy_gap(&runs) {
        ctx.note(format!("Energy per I/O is not drawn: no run of this sweep measured energy ({why})."));
    }
    let mut scopes: Vec<&str> = runs.iter().filter_map(|r| r.energy_scope()).collect();
    scopes.sort();
    scopes.dedup();

    let series_of = |c: &Config| {
        let parts: Vec<String> = categorical.iter().filter_map(|&d| c.dim(d).map(|v| said(d, v))).collect();
        if parts.is_empty() {
            "measured".to_string()
        } else {
            parts.join(" ")
        }
    };
    let mut by: Vec<&str> = categorical.iter().map(|&d| DIMENSIONS[d].name).collect();
    by.extend(configs.iter().any(|c| c.target().is_some()).then_some("target"));
    by.extend(configs.iter().any(|c| c.machine.is_some()).then_some("machine"));
    for &x in &numeric {
        let (label, scale_by) = x_axis(x);
        let held: Vec<usize> = numeric.iter().copied().filter(|&d| d != x).collect();
        // One figure per combination of the held dimensions' values, in their order.
        let mut groups: Vec<(Vec<Option<f64>>, Vec<&Config>)> = Vec::new();
        for c in configs.iter().filter(|c| number(c, x).is_some()) {
            let at: Vec<Option<f64>> = held.iter().map(|&d| number(c, d)).collect();
            match groups.iter_mut().find(|(v, _)| *v == at) {
                Some((_, members)) => members.push(c),
                None => groups.push((at, vec![c])),
            }
        }
        groups.sort_by(|(a, _), (b, _)| {
            a.iter()
                .zip(b)
                .map(|(x, y)| x.unwrap_or(f64::NEG_INFINITY).total_cmp(&y.unwrap_or(f64::NEG_INFINITY)))
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let xs: Vec<f64> = configs.iter().filter_map(|c| number(c, x)).map(|v| v * scale_by).collect();
        let (lo, hi) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| (a.min(v), b.max(v)));
        // A size gets binary ticks on a log-2 axis, whatever its span.
        let scale = match DIMENSIONS[x].name {
            "bs" if lo > 0.0 => Scale::Bytes,
            "write_mix" => Scale::Linear,
            _ if lo > 0.0 && hi / lo >= 4.0 => Scale::Log2,
            _ => Scale::Linear,
        };
        for (at, members) in &groups {
            let held_said: Vec<String> = held.iter().zip(at).filter_map(|(&d, v)| v.map(|n| said(d, &KeyValue::Number(n)))).collect();
            let suffix = if held_said.is_empty() { String::new() } else { format!(" at {}", held_said.join(", ")) };
            for q in &quantities {
                let mut notes = vec![format!(
                    "One series per {}; {}. Replicate means with the 95 % confidence interval as error bars.",
                    if by.is_empty() { "sweep (no categorical dimension varies)".to_string() } else { by.join(" × ") },
                    if held_said.is_empty() {
                        "no other numeric dimension varies".to_string()
                    } else {
                        format!("held at {}", held_said.join(", "))
                    }
                )];
                if q.name == "Energy per I/O" {
                    notes.push(format!(
                        "Energy scope: {} (per run the first of {} with a source that covered the window).",
                        if scopes.is_empty() { "a bare total in the record".to_string() } else { scopes.join(", ") },
                        ENERGY_SCOPES.join(", ")
                    ));
                }
                let x_of = |c: &Config| number(c, x).map(|v| v * scale_by);
                let p = PlotBy {
                    title: format!("{} against {}{suffix}", q.name, DIMENSIONS[x].name),
                    x: axis(label, scale),
                    y: axis(&if q.unit.is_empty() { q.name.to_string() } else { format!("{} ({})", q.name, q.unit) }, Scale::Linear),
                    x_of: &x_of,
                    y_of: &q.of,
                    series_of: &series_of,
                };
                plot_by(ctx, members, p, notes, Vec::new());
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::matrix::{dimension, read_key};

    #[test]
    fn swept_dimensions_numeric_apart() {
        let keys = [
            "interface=libaio,bs=4096,qd=1,threads=1,scheduler=none",
            "interface=io_uring,bs=4096,qd=4,threads=1,scheduler=none",
            "interface=io_uring,bs=65536,qd=1,threads=1,scheduler=none",
            "interface=io_uring,rw=randrw,write_mix=30,bs=65536,qd=x,threads=1,scheduler=none",
        ];
        let configs: Vec<Config> =
            keys.iter().map(|k| Config { key: k.to_string(), dims: read_key(k), runs: Vec::new(), machine: None }).collect();
        let refs: Vec<&Config> = configs.iter().collect();
        let (numeric, categorical) = swept(&refs);
        let d = |n| dimension(n).unwrap();
        // threads and scheduler do not vary, write_mix has one value, qd has a value that is no number.
        assert_eq!(numeric, vec![d("bs")]);
        assert_eq!(categorical, vec![d("interface"), d("qd")]);
        assert_eq!(said(d("bs"), &KeyValue::Number(65536.0)), "bs 64 KiB");
        assert_eq!(said(d("qd"), &KeyValue::Number(8.0)), "qd 8");
        assert_eq!(said(d("scheduler"), &KeyValue::Text("none".into())), "scheduler none");
        assert_eq!(said(d("interface"), &KeyValue::Text("io_uring".into())), "io_uring");
    }
}
