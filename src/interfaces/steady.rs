//! Steady state's criterion as a run asks it (fio's `ss`, `ss_dur`, `ss_ramp`; `--steadystate`,
//! a plan's `options.steadystate`): an options part of the interfaces' table, parsed, checked and
//! written back here; the engine's `steady::Detector` judges it.
use crate::interfaces::IoChoice;
use serde::{Deserialize, Serialize};

/// What steady state is judged on, and how.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SteadyState {
    /// Bandwidth (bytes per second) rather than IOPS.
    pub bw: bool,
    /// The least-squares slope rather than the largest deviation from the mean.
    pub slope: bool,
    pub limit: f64,
    /// The limit is a percentage of the mean.
    pub percent: bool,
    /// The rolling window judged, whole seconds (fio's ss_dur).
    pub dur_s: u32,
    /// Seconds of the measured window before the first second is taken (fio's ss_ramp).
    pub ramp_s: u32,
}

impl SteadyState {
    /// fio's `ss` word: `iops`, `iops_slope`, `bw`, `bw_slope`.
    pub fn metric(&self) -> &'static str {
        match (self.bw, self.slope) {
            (false, false) => "iops",
            (false, true) => "iops_slope",
            (true, false) => "bw",
            (true, true) => "bw_slope",
        }
    }
}

impl std::str::FromStr for SteadyState {
    type Err = String;
    /// `METRIC:LIMIT[%] dur=SECONDS [ramp=SECONDS]`, e.g. `iops:10% dur=30 ramp=10`.
    fn from_str(s: &str) -> Result<SteadyState, String> {
        let bad = |why: String| {
            format!("--steadystate '{s}': {why}: write METRIC:LIMIT[%] dur=SECONDS [ramp=SECONDS], METRIC iops, iops_slope, bw or bw_slope")
        };
        let mut words = s.split_whitespace();
        let (metric, limit) = words.next().and_then(|w| w.split_once(':')).ok_or_else(|| bad("no METRIC:LIMIT".into()))?;
        let (bw, slope) = match metric {
            "iops" => (false, false),
            "iops_slope" => (false, true),
            "bw" => (true, false),
            "bw_slope" => (true, true),
            other => return Err(bad(format!("'{other}' is not a metric"))),
        };
        let percent = limit.ends_with('%');
        let limit: f64 = limit
            .trim_end_matches('%')
            .parse()
            .ok()
            .filter(|l: &f64| l.is_finite() && *l >= 0.0)
            .ok_or_else(|| bad(format!("'{limit}' is not a limit")))?;
        let (mut dur_s, mut ramp_s) = (None, 0);
        for w in words {
            let secs = |v: &str| -> Result<u32, String> {
                let s = seconds(v).map_err(bad)?;
                if s.fract() != 0.0 || !(0.0..=86_400.0).contains(&s) {
                    return Err(bad(format!("'{v}' is not whole seconds (up to a day)")));
                }
                Ok(s as u32)
            };
            match w.split_once('=') {
                Some(("dur", v)) => dur_s = Some(secs(v)?),
                Some(("ramp", v)) => ramp_s = secs(v)?,
                _ => return Err(bad(format!("'{w}' is not dur= or ramp="))),
            }
        }
        let dur_s = dur_s.ok_or_else(|| bad("no dur=".into()))?;
        if dur_s < 2 {
            return Err(bad("dur= must be at least 2 s: one second has nothing to compare".into()));
        }
        Ok(SteadyState { bw, slope, limit, percent, dur_s, ramp_s })
    }
}

impl std::fmt::Display for SteadyState {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}:{}{} dur={}s", self.metric(), self.limit, if self.percent { "%" } else { "" }, self.dur_s)?;
        if self.ramp_s > 0 {
            write!(f, " ramp={}s", self.ramp_s)?;
        }
        Ok(())
    }
}

impl Serialize for SteadyState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SteadyState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// `--steadystate` (fio's ss, ss_dur, ss_ramp), a plan's `options.steadystate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct SteadyOptions {
    /// End the run once it is steady (fio's ss, ss_dur, ss_ramp): METRIC:LIMIT[%] dur=SECONDS
    /// [ramp=SECONDS], METRIC iops, iops_slope, bw or bw_slope (`iops:10% dur=30 ramp=10`).
    #[arg(long, value_name = "CRITERION")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steadystate: Option<SteadyState>,
}

impl crate::interfaces::OptionsPart for SteadyOptions {
    const PLAN_KEYS: &'static [&'static str] = &["steadystate"];

    fn plan_value<'de, A: serde::de::MapAccess<'de>>(&mut self, _: &str, map: &mut A) -> Result<(), A::Error> {
        self.steadystate = Some(map.next_value()?);
        Ok(())
    }

    fn check(&self, _: &IoChoice) -> Result<(), String> {
        Ok(())
    }
}

/// A duration as the plan's parser reads one (`10`, `10s`, `500ms`, `2m`, `1h`), in seconds; kept
/// here because the plan sits above the interfaces.
fn seconds(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("'{text}' is not a duration: use e.g. 10s, 500ms, 2m"))?;
    let mult = match suffix {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("'{text}' has an unknown unit '{suffix}': use ms, s, m or h")),
    };
    if !(n * mult).is_finite() || n < 0.0 {
        return Err(format!("'{text}' is not a valid duration"));
    }
    Ok(n * mult)
}
