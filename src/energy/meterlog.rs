//! Import of an external meter's log, aligned to the run's window by wall-clock time.
//!
//! Formats:
//! * `hobo` (HOBOware CSV export; `hobo-dmy` for day/month/year dates): line 1 `"Plot Title: …"`,
//!   line 2 the header `"#","Date Time, GMT-05:00","Active Power, W (LGR S/N: …)",…`; the
//!   separator (`,` `;` tab) is detected; dates `%m/%d/%y %I:%M:%S %p` (12 h) or 24 h, 2- or
//!   4-digit years; the GMT offset comes from the header. A cumulative "Active Energy" (Wh or
//!   kWh) series is preferred over point "Active Power" (W or kW) samples.
//! * `csv`: `timestamp,watts` with an optional header; timestamps are UNIX seconds or ISO 8601
//!   (`2025-03-06T19:30:35.250Z`, `+01:00` offsets; no zone = UTC).
//!
//! Clock correction (meter time → host UNIX time): `host = m0 + offset_s + (m − m0) / (1 + drift_ppm·1e-6)`,
//! with m0 the anchor (the first sample, or the first sync mark). drift_ppm > 0 means the
//! meter's clock runs fast. Two sync marks (meter time, host time) determine both.
use super::integrate::{per_second_watts, CounterSeries, Integrated, PowerSeries};
use super::EnergyError;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SeriesKind {
    /// Point power samples, watts.
    Watts,
    /// Cumulative energy, joules.
    CumulativeJoules,
}

#[derive(Clone, Debug)]
pub struct MeterLog {
    pub format: String,
    pub series: String,
    pub kind: SeriesKind,
    /// (meter UNIX time s, value in W or J)
    pub points: Vec<(f64, f64)>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClockCorrection {
    pub offset_s: f64,
    pub drift_ppm: f64,
    /// Meter time the offset refers to; None = the log's first sample.
    pub anchor_meter_s: Option<f64>,
}

impl ClockCorrection {
    /// From two sync marks (meter time, host time), e.g. a load step seen by both.
    pub(crate) fn from_sync_marks(m1: (f64, f64), m2: (f64, f64)) -> Result<ClockCorrection, EnergyError> {
        let (dm, dh) = (m2.0 - m1.0, m2.1 - m1.1);
        if dm <= 0.0 || dh <= 0.0 {
            return Err(EnergyError::Invalid("sync marks must be in increasing time order on both clocks".into()));
        }
        Ok(ClockCorrection { offset_s: m1.1 - m1.0, drift_ppm: (dm / dh - 1.0) * 1e6, anchor_meter_s: Some(m1.0) })
    }
    pub fn apply(&self, m: f64, first: f64) -> f64 {
        let m0 = self.anchor_meter_s.unwrap_or(first);
        m0 + self.offset_s + (m - m0) / (1.0 + self.drift_ppm * 1e-6)
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (H. Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// The proleptic Gregorian date (year, month, day) of a count of days since 1970-01-01, the
/// inverse of [`days_from_civil`] (H. Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn hms(s: &str) -> Option<f64> {
    let mut it = s.split(':');
    let h: f64 = it.next()?.trim().parse().ok()?;
    let m: f64 = it.next()?.trim().parse().ok()?;
    let sec: f64 = it.next().map(|x| x.trim().parse().ok()).unwrap_or(Some(0.0))?;
    if it.next().is_some() || !(0.0..24.0).contains(&h) || !(0.0..60.0).contains(&m) || !(0.0..61.0).contains(&sec) {
        return None;
    }
    Some(h * 3600.0 + m * 60.0 + sec)
}

/// ISO 8601 / RFC 3339 or UNIX seconds → UNIX seconds.
pub(crate) fn parse_timestamp(s: &str) -> Option<f64> {
    let s = s.trim().trim_matches('"');
    if let Ok(v) = s.parse::<f64>() {
        // "nan" and "inf" parse as numbers but are no time: a line that has one is a bad line.
        return v.is_finite().then_some(v);
    }
    if s.len() < 19 {
        return None;
    }
    let (date, rest) = (s.get(0..10)?, s.get(11..)?);
    let mut d = date.split('-');
    let (y, mo, da): (i64, i64, i64) = (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    let (time, zone_s) = if let Some(t) = rest.strip_suffix('Z') {
        (t, 0.0)
    } else if let Some(i) = rest.rfind(['+', '-']).filter(|&i| i >= 8) {
        let z = &rest[i + 1..];
        let (zh, zm) = z.split_once(':').unwrap_or((z.get(0..2)?, z.get(2..).unwrap_or("0")));
        let off = zh.parse::<f64>().ok()? * 3600.0 + zm.parse::<f64>().unwrap_or(0.0) * 60.0;
        (&rest[..i], if &rest[i..i + 1] == "-" { -off } else { off })
    } else {
        (rest, 0.0)
    };
    Some(days_from_civil(y, mo, da) as f64 * 86400.0 + hms(time)? - zone_s)
}

/// "03/06/25 07:30:35 PM", "03/06/2025 19:30:35" → seconds since the epoch of the local clock.
pub(crate) fn parse_hobo_date(s: &str, dmy: bool) -> Option<f64> {
    let s = s.trim().trim_matches('"');
    let mut parts = s.split_whitespace();
    let date = parts.next()?;
    let time = parts.next()?;
    let ampm = parts.next();
    let mut d = date.split('/');
    let (a, b, y): (i64, i64, i64) = (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    let (mo, da) = if dmy { (b, a) } else { (a, b) };
    let y = if y < 100 { 2000 + y } else { y };
    let mut t = hms(time)?;
    match ampm.map(|x| x.to_ascii_uppercase()) {
        Some(p) if p == "PM" && t < 12.0 * 3600.0 => t += 12.0 * 3600.0,
        Some(p) if p == "AM" && t >= 12.0 * 3600.0 => t -= 12.0 * 3600.0,
        Some(_) => return None,
        None => {}
    }
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) {
        return None;
    }
    Some(days_from_civil(y, mo, da) as f64 * 86400.0 + t)
}

/// Split one CSV line on `sep`, honouring double quotes.
pub(crate) fn split_csv(line: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut q = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if q && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => q = !q,
            c if c == sep && !q => out.push(std::mem::take(&mut cur)),
            c => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter().map(|f| f.trim().to_string()).collect()
}

fn parse_number(s: &str) -> Option<f64> {
    let s = s.trim();
    s.parse::<f64>().ok().or_else(|| s.replace(',', ".").parse().ok()).filter(|v: &f64| v.is_finite())
}

/// "GMT-05:00" inside a header → seconds east of UTC.
fn gmt_offset(h: &str) -> Option<f64> {
    let i = h.find("GMT")?;
    let z = &h[i + 3..];
    let sign = match z.chars().next()? {
        '+' => 1.0,
        '-' => -1.0,
        _ => return Some(0.0),
    };
    let z = &z[1..];
    let (hh, mm) = z.split_once(':').unwrap_or((z, "0"));
    let mm: String = mm.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some(sign * (hh.trim().parse::<f64>().ok()? * 3600.0 + mm.parse::<f64>().unwrap_or(0.0) * 60.0))
}

pub(crate) fn parse_hobo(text: &str, dmy: bool) -> Result<MeterLog, EnergyError> {
    let mut lines = text.lines().map(|l| l.trim_start_matches('\u{feff}')).filter(|l| !l.trim().is_empty());
    let first = lines.next().ok_or_else(|| EnergyError::Invalid("empty HOBOware file".into()))?;
    let header = if first.contains("Plot Title") {
        lines.next().ok_or_else(|| EnergyError::Invalid("HOBOware file has no header line".into()))?
    } else {
        first
    };
    let sep = [',', ';', '\t'].into_iter().max_by_key(|&c| split_csv(header, c).len()).unwrap();
    let cols = split_csv(header, sep);
    let date_col = cols
        .iter()
        .position(|c| c.starts_with("Date Time"))
        .ok_or_else(|| EnergyError::Invalid(format!("no \"Date Time\" column in {header:?}")))?;
    let tz = gmt_offset(&cols[date_col]).unwrap_or(0.0);
    let unit_of = |c: &str| -> Option<String> { c.split_once(',').map(|(_, u)| u.split_whitespace().next().unwrap_or("").to_string()) };
    let mut pick: Option<(usize, SeriesKind, f64)> = None;
    for (i, c) in cols.iter().enumerate() {
        let lc = c.to_ascii_lowercase();
        let unit = unit_of(c).unwrap_or_default();
        if lc.contains("energy") && (unit == "Wh" || unit == "kWh") {
            pick = Some((i, SeriesKind::CumulativeJoules, if unit == "kWh" { 3.6e6 } else { 3600.0 }));
            break;
        }
        if lc.contains("power") && !lc.contains("factor") && (unit == "W" || unit == "kW") && pick.is_none() {
            pick = Some((i, SeriesKind::Watts, if unit == "kW" { 1000.0 } else { 1.0 }));
        }
    }
    let (col, kind, mult) =
        pick.ok_or_else(|| EnergyError::Invalid(format!("no Active Energy (Wh) or Active Power (W) series in {header:?}")))?;
    let mut points = Vec::new();
    for (n, line) in lines.enumerate() {
        let f = split_csv(line, sep);
        let (Some(d), Some(v)) = (f.get(date_col), f.get(col)) else { continue };
        if v.is_empty() {
            continue; // event rows (Started, Stopped, Line Loss) carry no value
        }
        let t = parse_hobo_date(d, dmy).ok_or_else(|| {
            EnergyError::Invalid(format!("line {}: cannot parse date {d:?} (use format hobo-dmy for day/month/year)", n + 3))
        })?;
        let v = parse_number(v).ok_or_else(|| EnergyError::Invalid(format!("line {}: not a number: {v:?}", n + 3)))?;
        points.push((t - tz, v * mult));
    }
    Ok(MeterLog { format: if dmy { "hobo-dmy".into() } else { "hobo".into() }, series: cols[col].clone(), kind, points })
}

pub(crate) fn parse_plain_csv(text: &str) -> Result<MeterLog, EnergyError> {
    let mut points = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let f = split_csv(l, if l.contains(';') && !l.contains(',') { ';' } else { ',' });
        if f.len() < 2 {
            return Err(EnergyError::Invalid(format!("line {}: expected timestamp,watts: {l:?}", n + 1)));
        }
        match (parse_timestamp(&f[0]), parse_number(&f[1])) {
            (Some(t), Some(w)) => points.push((t, w)),
            _ if points.is_empty() && n == 0 => continue, // header
            _ => return Err(EnergyError::Invalid(format!("line {}: cannot parse {l:?} as timestamp,watts", n + 1))),
        }
    }
    Ok(MeterLog { format: "csv".into(), series: "watts".into(), kind: SeriesKind::Watts, points })
}

/// The names `--meter-format` takes ("hoboware" is also accepted for "hobo").
pub const FORMATS: [&str; 3] = ["hobo", "hobo-dmy", "csv"];

pub fn parse_meter_log(text: &str, format: Option<&str>) -> Result<MeterLog, EnergyError> {
    let fmt = match format {
        Some(f) => f.to_string(),
        None if text.lines().next().is_some_and(|l| l.contains("Plot Title") || l.contains("Date Time")) => "hobo".into(),
        None => "csv".into(),
    };
    let log = match fmt.as_str() {
        "hobo" | "hoboware" => parse_hobo(text, false)?,
        "hobo-dmy" => parse_hobo(text, true)?,
        "csv" => parse_plain_csv(text)?,
        other => return Err(EnergyError::Invalid(format!("unknown meter log format {other:?} ({})", FORMATS.join(", ")))),
    };
    if log.points.len() < 2 {
        return Err(EnergyError::Invalid(format!("meter log has {} samples; at least two are needed", log.points.len())));
    }
    if let Some(p) = log.points.iter().find(|p| p.1 < 0.0) {
        return Err(EnergyError::Invalid(format!("meter log has a negative value {} at {}", p.1, p.0)));
    }
    if let Some(p) = log.points.iter().find(|p| log.kind == SeriesKind::Watts && p.1 > super::MAX_SAMPLE_WATTS) {
        return Err(EnergyError::Invalid(format!(
            "meter log has a sample of {:e} W at {}, more than the {:e} W a meter reads: check the log's unit and series",
            p.1,
            p.0,
            super::MAX_SAMPLE_WATTS
        )));
    }
    if let Some(p) = log.points.iter().find(|p| !p.0.is_finite() || p.0.abs() > MAX_TIMESTAMP_S) {
        return Err(EnergyError::Invalid(format!(
            "meter log has a timestamp {:e} that is not a time (UNIX seconds before the year 5000)",
            p.0
        )));
    }
    Ok(log)
}

/// The largest meter timestamp taken, UNIX seconds (about the year 5000).
pub const MAX_TIMESTAMP_S: f64 = 1e11;

/// A log in host time, sorted, with its typical sample interval: made once for a log matched
/// against many windows (`iolab energy import` over every stored run).
pub struct CorrectedLog {
    kind: SeriesKind,
    /// (host UNIX time s, value), sorted by time.
    points: Vec<(f64, f64)>,
    /// The median interval between samples, seconds.
    median_s: f64,
}

impl CorrectedLog {
    pub fn new(log: &MeterLog, corr: &ClockCorrection) -> CorrectedLog {
        let first = log.points.first().map(|p| p.0).unwrap_or(0.0);
        let mut points: Vec<(f64, f64)> = log.points.iter().map(|&(t, v)| (corr.apply(t, first), v)).collect();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut dts: Vec<f64> = points.windows(2).map(|w| w[1].0 - w[0].0).filter(|d| *d > 0.0).collect();
        dts.sort_by(f64::total_cmp);
        let median_s = dts.get(dts.len() / 2).copied().unwrap_or(1.0);
        CorrectedLog { kind: log.kind, points, median_s }
    }

    /// The log over a host UNIX-time window, and its power in each second of the window. Costs
    /// the window's own samples (found by binary search) and its seconds, not the whole log.
    pub fn integrate(&self, window_unix: (f64, f64)) -> (Integrated, Vec<Option<f64>>) {
        // Relative to the window start, for precision; only the samples the window needs.
        let a = window_unix.0;
        let from = self.points.partition_point(|p| p.0 <= a).saturating_sub(1);
        let to = (self.points.partition_point(|p| p.0 < window_unix.1) + 1).min(self.points.len());
        let samples: Vec<(f64, Option<f64>)> = self.points.get(from..to).unwrap_or(&[]).iter().map(|&(t, v)| (t - a, Some(v))).collect();
        let end = window_unix.1 - a;
        match self.kind {
            SeriesKind::Watts => {
                let series = PowerSeries::new(&samples);
                let (gap, hold) = ((2.5 * self.median_s).max(1.0), self.median_s / 2.0);
                (series.over(gap, hold, (0.0, end)), per_second_watts(end, |w| series.over(gap, hold, w)))
            }
            SeriesKind::CumulativeJoules => {
                let series = CounterSeries::new(&samples);
                (series.over(1.0, None, 100_000.0, (0.0, end)), per_second_watts(end, |w| series.over(1.0, None, 100_000.0, w)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        for (y, m, d) in [(1970, 1, 1), (2000, 2, 29), (2026, 11, 23), (1969, 12, 31), (2100, 3, 1)] {
            assert_eq!(civil_from_days(days_from_civil(y, m, d)), (y, m, d));
        }
        assert_eq!(parse_timestamp("2025-03-06T19:30:35Z"), Some(1741289435.0));
        assert_eq!(parse_timestamp("2025-03-06T20:30:35.5+01:00"), Some(1741289435.5));
        assert_eq!(parse_timestamp("2025-03-06 14:30:35-05:00"), Some(1741289435.0));
        assert_eq!(parse_hobo_date("03/06/25 07:30:35 PM", false), Some(1741289435.0));
        assert_eq!(parse_hobo_date("06/03/2025 19:30:35", true), Some(1741289435.0));
        assert_eq!(parse_hobo_date("03/06/25 12:00:00 AM", false), Some(1741219200.0));
    }

    #[test]
    fn sync_marks_roundtrip() {
        let c = ClockCorrection::from_sync_marks((1000.0, 1010.0), (2000.0, 2009.99)).unwrap();
        assert!((c.apply(1000.0, 0.0) - 1010.0).abs() < 1e-9);
        assert!((c.apply(2000.0, 0.0) - 2009.99).abs() < 1e-9);
        assert!(c.drift_ppm > 0.0); // meter ran fast
    }

    #[test]
    fn csv_split_quotes() {
        assert_eq!(split_csv("\"#\",\"Date Time, GMT-05:00\",\"x\"", ','), vec!["#", "Date Time, GMT-05:00", "x"]);
        assert_eq!(gmt_offset("Date Time, GMT-05:00"), Some(-18000.0));
        assert_eq!(gmt_offset("Date Time, GMT+05:30"), Some(19800.0));
    }
}
