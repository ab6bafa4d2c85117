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

/// RFC 4180 quoting of one cell. A text cell a spreadsheet would take for a formula (starting
/// with `=`, `+`, `-`, `@`, a tab or a carriage return; a host name or an error message from a
/// merged database can) gets a leading `'`, which spreadsheets show as text; a signed number
/// (-1.5, +3, -inf), one with a unit (+12.5 %, -3 µs) and a lone "-" stay as they are.
pub fn quote(s: &str) -> std::borrow::Cow<'_, str> {
    let number = |s: &str| {
        let (n, unit) = s.split_once(' ').unwrap_or((s, ""));
        n.parse::<f64>().is_ok() && unit.chars().all(|c| c.is_alphabetic() || c == '%' || c == '/' || c == ' ')
    };
    let formula = match s.chars().next() {
        Some('=' | '@' | '\t' | '\r') => true,
        Some('+' | '-') => s.len() > 1 && !number(s),
        _ => false,
    };
    let s: std::borrow::Cow<'_, str> = if formula { format!("'{s}").into() } else { s.into() };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s
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

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn formulas_are_neutralised_and_numbers_kept() {
        assert_eq!(quote("=cmd()"), "'=cmd()");
        assert_eq!(quote("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(quote("+1+cmd"), "'+1+cmd");
        assert_eq!(quote("-2+3,x"), "\"'-2+3,x\"");
        assert_eq!(quote("\tx"), "'\tx");
        assert_eq!(quote("\r=x"), "\"'\r=x\"");
        assert_eq!(quote("-1 +cmd|' /C calc'!A0"), "'-1 +cmd|' /C calc'!A0");
        for n in ["-1.5", "+3", "-1e-9", "-inf", "0", "psync", "a=b", "-", "+12.5 %", "-3 µs"] {
            assert_eq!(quote(n), n);
        }
    }
}
