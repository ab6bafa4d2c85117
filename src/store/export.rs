//! CSV export: one row per run, RFC 4180 quoting, empty cells for unknown values.

use super::RunRow;
use std::io::Write;

pub const CSV_COLUMNS: &[&str] = &[
    "run_id", "sweep_id", "planned_id", "replicate", "config_key", "status", "started_at", "hostname", "kernel",
    "iolab_version", "devices", "interface", "submit", "complete", "rw", "write_mix", "bs", "qd", "threads",
    "batch_submit", "batch_reap", "direct", "budget_kind", "budget_value", "targets", "window_s", "ios", "iops",
    "read_iops", "write_iops", "bw_bytes_per_s", "lat_mean_ns", "lat_p50_ns", "lat_p99_ns", "lat_p99_9_ns",
    "lat_p99_999_ns", "lat_max_ns", "errors", "cpu_cores", "busy_cores", "unaccounted_fraction",
    "completion_observed", "fell_back", "error",
];

fn cells(r: &RunRow) -> Vec<String> {
    fn o<T: ToString>(v: &Option<T>) -> String {
        v.as_ref().map(ToString::to_string).unwrap_or_default()
    }
    vec![
        r.id.to_string(),
        o(&r.sweep_id),
        o(&r.planned_id),
        o(&r.replicate),
        o(&r.config_key),
        r.status.clone(),
        r.started_at.to_string(),
        o(&r.hostname),
        o(&r.kernel),
        o(&r.iolab_version),
        o(&r.devices),
        r.interface.clone(),
        r.submit.clone(),
        r.complete.clone(),
        r.rw.clone(),
        r.write_mix.to_string(),
        r.bs.to_string(),
        r.qd.to_string(),
        r.threads.to_string(),
        r.batch_submit.to_string(),
        r.batch_reap.to_string(),
        r.direct.to_string(),
        o(&r.budget_kind),
        o(&r.budget_value),
        r.targets.join(";"),
        o(&r.window_s),
        o(&r.ios),
        o(&r.iops),
        o(&r.read_iops),
        o(&r.write_iops),
        o(&r.bw_bytes_per_s),
        o(&r.lat_mean_ns),
        o(&r.lat_p50_ns),
        o(&r.lat_p99_ns),
        o(&r.lat_p99_9_ns),
        o(&r.lat_p99_999_ns),
        o(&r.lat_max_ns),
        r.errors.to_string(),
        o(&r.cpu_cores),
        o(&r.busy_cores),
        o(&r.unaccounted_fraction),
        o(&r.completion_observed),
        o(&r.fell_back),
        o(&r.error),
    ]
}

/// RFC 4180 quoting of one cell.
pub fn quote(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

pub fn csv(rows: &[RunRow], out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut w = std::io::BufWriter::new(out);
    writeln!(w, "{}", CSV_COLUMNS.join(","))?;
    for r in rows {
        let c = cells(r);
        debug_assert_eq!(c.len(), CSV_COLUMNS.len());
        let line: Vec<_> = c.iter().map(|s| quote(s)).collect();
        writeln!(w, "{}", line.join(","))?;
    }
    w.flush()
}
