//! CSV export: one row per run, RFC 4180 quoting, empty cells for unknown values.

use super::columns::{cell as o, RUN_METRICS};
use super::RunRow;
use std::io::Write;

/// The CSV header: identity, spec and environment, the metrics (`RUN_METRICS`), the error last.
pub fn csv_columns() -> Vec<&'static str> {
    let head = [
        "run_id",
        "sweep_id",
        "planned_id",
        "replicate",
        "config_key",
        "status",
        "started_at",
        "hostname",
        "kernel",
        "iolab_version",
        "devices",
        "interface",
        "submit",
        "complete",
        "rw",
        "write_mix",
        "bs",
        "qd",
        "threads",
        "batch_submit",
        "batch_reap",
        "direct",
        "budget_kind",
        "budget_value",
        "targets",
    ];
    head.into_iter().chain(RUN_METRICS.iter().map(|c| c.name)).chain(["error"]).collect()
}

fn cells(r: &RunRow) -> Vec<String> {
    [
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
    ]
    .into_iter()
    .chain(r.metrics.cells())
    .chain([o(&r.error)])
    .collect()
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
    let header = csv_columns();
    writeln!(w, "{}", header.join(","))?;
    for r in rows {
        let c = cells(r);
        debug_assert_eq!(c.len(), header.len());
        let line: Vec<_> = c.iter().map(|s| quote(s)).collect();
        writeln!(w, "{}", line.join(","))?;
    }
    w.flush()
}
