//! Human sizes: `4k`, `128K`, `1m`, `1GiB`, `512`. Binary multiples, as fio and storage people use.

use super::PlanError;

/// Parse a byte count with an optional binary suffix (k, m, g, t; optional "i"/"b").
pub(crate) fn parse_size(text: &str) -> Result<u64, PlanError> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return PlanError::value(format!("'{text}' is not a size: use a number with an optional k/m/g/t suffix, e.g. 4k"));
    }
    let n: u64 = num.parse().map_err(|_| PlanError::Value(format!("'{text}' is too large")))?;
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return PlanError::value(format!("'{text}' has an unknown suffix '{suffix}': use k, m, g or t (binary multiples)")),
    };
    n.checked_mul(mult).ok_or_else(|| PlanError::Value(format!("'{text}' is too large")))
}

/// Parse a duration: `10` or `10s`, `500ms`, `2m`, `1h`.
pub(crate) fn parse_seconds(text: &str) -> Result<f64, PlanError> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| PlanError::Value(format!("'{text}' is not a duration: use e.g. 10s, 500ms, 2m")))?;
    let mult = match suffix {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return PlanError::value(format!("'{text}' has an unknown unit '{suffix}': use ms, s, m or h")),
    };
    if !(n * mult).is_finite() || n < 0.0 {
        return PlanError::value(format!("'{text}' is not a valid duration"));
    }
    Ok(n * mult)
}

/// Format bytes with a binary unit for people.
pub(crate) fn format_bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A duration in nanoseconds as people read it: "850 ns", "12.3 µs", "4.56 ms", "1.20 s" (the
/// terminal summary, reports and probe's lines).
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

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sizes() {
        assert_eq!(parse_size("512").unwrap(), 512);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("128K").unwrap(), 131072);
        assert_eq!(parse_size("1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert!(parse_size("4q").unwrap_err().to_string().contains("unknown suffix"));
        assert!(parse_size("k").is_err());
        assert!(parse_size("99999999999999999999t").is_err());
    }
    #[test]
    fn durations() {
        assert_eq!(parse_seconds("10").unwrap(), 10.0);
        assert_eq!(parse_seconds("500ms").unwrap(), 0.5);
        assert_eq!(parse_seconds("2m").unwrap(), 120.0);
        assert!(parse_seconds("3 days").is_err());
    }
    #[test]
    fn formats() {
        assert_eq!(format_bytes(4096.0), "4.0 KiB");
        assert_eq!(format_bytes(100.0), "100 B");
    }
}
