//! CSV export: one row per run, RFC 4180 quoting, empty cells for unknown values.

use super::columns::csv_layout;
use super::RunRow;
use std::io::Write;

/// The CSV header (`columns::csv_layout`): identity, spec and environment, the metrics, the
/// error, as released; then the columns of later schema versions (`tool`, `tool_version`, the
/// energy efficiencies).
pub fn csv_columns() -> Vec<&'static str> {
    csv_layout().into_iter().map(|c| c.header).collect()
}

fn cells(r: &RunRow) -> Vec<String> {
    r.cells()
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
