//! A job's pacing, as fio asks for it: a rate cap per direction (`rate`, `rate_iops`, issued
//! linearly or as a Poisson process), a floor the run fails below (`rate_min`, `rate_iops_min`,
//! checked every `rate_cycle`), and think time (`thinktime`, `thinktime_spin`,
//! `thinktime_blocks`, `thinktime_blocks_type`, `thinktime_iotime`), and fio's flow (`flow`,
//! `flow_id`, `flow_sleep`: jobs run together keep their I/O in the ratio of their weights
//! through a counter they share, `engine::pace::Flow`), and how a job's end stops the jobs run
//! together with it (`exitall`, `exit_what`, `exitall_on_error`, and `new_group`, which bounds
//! `exit_what=group`; `session::group`). Written as fio's words,
//! `rate_iops=300,300 thinktime=2ms`, on the command line (`--rate`, `--rate-iops`,
//! `--thinktime`, `--pace`), in a plan (`matrix.pace`) and in the stored spec (`pace`, left out
//! when unpaced); the engine's pacer is `engine::pace`.
use super::size::parse_size;
use super::PlanError;
use serde::{Deserialize, Serialize};

/// How rated I/O is spaced (fio's `rate_process`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RateProcess {
    /// I/O n is issued no earlier than n / rate after the start (catching up after a stall).
    #[default]
    Linear,
    /// Exponential gaps with the rate's mean (fio's lambda = 10^6 / IOPS).
    Poisson,
}

/// What a job's end stops among the jobs run together with it (fio's `exit_what`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExitWhat {
    /// The jobs of its reporting group (those run together with it, up to a `new_group`).
    #[default]
    Group,
    /// Every job running (past its start delay); the jobs after them still run.
    Stonewall,
    /// Every job: those running, and those not yet started never run.
    All,
}

impl ExitWhat {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ExitWhat::Group => "group",
            ExitWhat::Stonewall => "stonewall",
            ExitWhat::All => "all",
        }
    }
    fn is_group(&self) -> bool {
        *self == ExitWhat::Group
    }
}

/// Where a paced job's I/O is submitted from (fio's `io_submit_mode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubmitMode {
    /// The thread that paces the I/O submits and reaps it (fio's default).
    #[default]
    Inline,
    /// The thread paces the I/O and queues it to `qd` submission threads, each with its own
    /// interface at depth 1 (fio's `rate-submit.c`); an I/O's latency counts from when it was
    /// queued, so a device that falls behind the schedule shows it (`engine::offload`).
    Offload,
}

/// A job's pacing; every value 0 is "not asked". Rates are per thread (fio's per job clone),
/// `[reads, writes]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pace {
    /// Bytes per second cap per direction (fio's `rate`).
    #[serde(default, skip_serializing_if = "none2")]
    pub rate_bps: [u64; 2],
    /// I/Os per second cap per direction (fio's `rate_iops`).
    #[serde(default, skip_serializing_if = "none2")]
    pub rate_iops: [u64; 2],
    #[serde(default)]
    pub rate_process: RateProcess,
    /// The run fails when a direction's bytes per second over a cycle fall below (`rate_min`).
    #[serde(default, skip_serializing_if = "none2")]
    pub rate_min_bps: [u64; 2],
    /// The same in I/Os per second (`rate_iops_min`).
    #[serde(default, skip_serializing_if = "none2")]
    pub rate_min_iops: [u64; 2],
    /// The floor's averaging cycle, milliseconds (`rate_cycle`, fio's 1000).
    #[serde(default = "cycle_default")]
    pub rate_cycle_ms: u64,
    /// The stall, nanoseconds (`thinktime`).
    #[serde(default, skip_serializing_if = "zero")]
    pub thinktime_ns: u64,
    /// The part of the stall spent spinning on the CPU (`thinktime_spin`).
    #[serde(default, skip_serializing_if = "zero")]
    pub thinktime_spin_ns: u64,
    /// I/Os between stalls (`thinktime_blocks`); 0: fio's default, 1, unless
    /// `thinktime_iotime` is given (then time alone decides).
    #[serde(default, skip_serializing_if = "zero")]
    pub thinktime_blocks: u64,
    /// Count issued I/Os rather than completed ones (`thinktime_blocks_type=issue`).
    #[serde(default, skip_serializing_if = "no")]
    pub thinktime_issue: bool,
    /// Stall again after this long of I/O (`thinktime_iotime`), nanoseconds.
    #[serde(default, skip_serializing_if = "zero")]
    pub thinktime_iotime_ns: u64,
    /// This job's weight in its flow (`flow`, 1 to 1000; 0: in none): the jobs run together in
    /// one flow issue I/O in the ratio of their weights.
    #[serde(default, skip_serializing_if = "zero32")]
    pub flow: u32,
    /// Which flow (`flow_id`, fio's 0).
    #[serde(default, skip_serializing_if = "zero32")]
    pub flow_id: u32,
    /// How long a thread held back by its flow sleeps before it looks again (`flow_sleep`,
    /// fio's 0: at once), nanoseconds.
    #[serde(default, skip_serializing_if = "zero")]
    pub flow_sleep_ns: u64,
    /// fio's `exitall`: this job's end stops the jobs `exit_what` names among those run together.
    #[serde(default, skip_serializing_if = "no")]
    pub exitall: bool,
    /// fio's `exitall_on_error`: the same, only when the job's run fails.
    #[serde(default, skip_serializing_if = "no")]
    pub exitall_on_error: bool,
    /// What either stops (fio's `exit_what`, default `group`).
    #[serde(default, skip_serializing_if = "ExitWhat::is_group")]
    pub exit_what: ExitWhat,
    /// fio's `new_group`: the job starts a new reporting group among the jobs run together, which
    /// bounds what `exit_what=group` stops.
    #[serde(default, skip_serializing_if = "no")]
    pub new_group: bool,
    /// Submitted by the pacing thread or offloaded to submission threads (`io_submit_mode`).
    #[serde(default, skip_serializing_if = "inline")]
    pub submit_mode: SubmitMode,
}

impl Default for Pace {
    fn default() -> Pace {
        Pace {
            rate_bps: [0, 0],
            rate_iops: [0, 0],
            rate_process: RateProcess::Linear,
            rate_min_bps: [0, 0],
            rate_min_iops: [0, 0],
            rate_cycle_ms: 1000,
            thinktime_ns: 0,
            thinktime_spin_ns: 0,
            thinktime_blocks: 0,
            thinktime_issue: false,
            thinktime_iotime_ns: 0,
            flow: 0,
            flow_id: 0,
            flow_sleep_ns: 0,
            exitall: false,
            exitall_on_error: false,
            exit_what: ExitWhat::Group,
            new_group: false,
            submit_mode: SubmitMode::Inline,
        }
    }
}

fn none2(v: &[u64; 2]) -> bool {
    *v == [0, 0]
}
fn zero(v: &u64) -> bool {
    *v == 0
}
fn zero32(v: &u32) -> bool {
    *v == 0
}
fn no(v: &bool) -> bool {
    !*v
}
fn inline(v: &SubmitMode) -> bool {
    *v == SubmitMode::Inline
}
fn cycle_default() -> u64 {
    1000
}

/// fio's `a[,b[,c]]` per direction: one value for both, `a,` reads only, `,b` writes only (the
/// third, trims', is accepted: iolab issues no trims).
fn per_direction(v: &str, one: impl Fn(&str) -> Result<u64, String>) -> Result<[u64; 2], String> {
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    if parts.len() > 3 {
        return Err(format!("'{v}' has more than three values (reads, writes, trims)"));
    }
    let at = |i: usize| parts.get(i).filter(|p| !p.is_empty()).map(|p| one(p)).transpose();
    Ok(match parts.len() {
        1 => {
            let a = at(0)?.unwrap_or(0);
            [a, a]
        }
        _ => [at(0)?.unwrap_or(0), at(1)?.unwrap_or(0)],
    })
}

/// A duration as fio writes one: a number with `ns`, `us`, `ms`, `s`, `m` or `h`; a bare number
/// in `bare` nanoseconds (fio's microseconds for think time, seconds for thinktime_iotime).
fn duration_ns(v: &str, bare: u64) -> Result<u64, String> {
    let v = v.trim().to_ascii_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("'{v}' is not a duration"))?;
    let scale = match unit {
        "" => bare as f64,
        "ns" => 1.0,
        "us" | "usec" => 1e3,
        "ms" | "msec" => 1e6,
        "s" | "sec" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        _ => return Err(format!("'{v}': unknown unit '{unit}' (ns, us, ms, s, m, h)")),
    };
    let ns = n * scale;
    if !ns.is_finite() || ns > 1e18 {
        return Err(format!("'{v}' is out of range"));
    }
    Ok(ns.round() as u64)
}

/// fio's largest flow weight (`FLOW_MAX_WEIGHT`).
pub(crate) const FLOW_MAX_WEIGHT: u32 = 1000;

/// fio's boolean: 1 or 0 (an empty value, a bare word, is 1).
fn boolean(v: &str) -> Result<bool, String> {
    match v.trim() {
        "" | "1" => Ok(true),
        "0" => Ok(false),
        o => Err(format!("'{o}' is not 1 or 0")),
    }
}

fn count(v: &str) -> Result<u64, String> {
    v.trim().parse().map_err(|_| format!("'{v}' is not a whole number"))
}

fn bytes(v: &str) -> Result<u64, String> {
    parse_size(v).map_err(|e| e.to_string())
}

fn pair(v: [u64; 2]) -> String {
    let w = |n: u64| if n == 0 { String::new() } else { n.to_string() };
    if v[0] == v[1] {
        w(v[0])
    } else {
        format!("{},{}", w(v[0]), w(v[1]))
    }
}

impl Pace {
    /// Nothing asked: the loop runs unpaced.
    pub(crate) fn is_none(&self) -> bool {
        *self == Pace::default()
    }

    /// Nothing asked of the job's own loop: at most a flow (which paces only where shared with
    /// jobs run together) and what its end stops. Such a job's loop runs unpaced alone.
    pub(crate) fn is_group_only(&self) -> bool {
        Pace {
            flow: 0,
            flow_id: 0,
            flow_sleep_ns: 0,
            exitall: false,
            exitall_on_error: false,
            exit_what: ExitWhat::Group,
            new_group: false,
            ..self.clone()
        }
        .is_none()
    }

    /// Its end stops jobs run together with it: at every end (exitall), or at a failed one.
    pub(crate) fn exits(&self) -> bool {
        self.exitall || self.exitall_on_error
    }

    /// Sets one of fio's words (`rate`, `rate_iops`, ...) from its value, as fio reads it.
    pub(crate) fn set(&mut self, key: &str, v: &str) -> Result<(), String> {
        match key {
            "rate" => self.rate_bps = per_direction(v, bytes)?,
            "rate_iops" => self.rate_iops = per_direction(v, count)?,
            "rate_min" | "ratemin" => self.rate_min_bps = per_direction(v, bytes)?,
            "rate_iops_min" => self.rate_min_iops = per_direction(v, count)?,
            "rate_cycle" | "ratecycle" => self.rate_cycle_ms = duration_ns(v, 1_000_000)? / 1_000_000,
            "rate_process" => {
                self.rate_process = match v.trim() {
                    "linear" => RateProcess::Linear,
                    "poisson" => RateProcess::Poisson,
                    o => return Err(format!("'{o}' is not a rate process (linear, poisson)")),
                }
            }
            "thinktime" => self.thinktime_ns = duration_ns(v, 1_000)?,
            "thinktime_spin" => self.thinktime_spin_ns = duration_ns(v, 1_000)?,
            "thinktime_blocks" => self.thinktime_blocks = count(v)?,
            "thinktime_blocks_type" => {
                self.thinktime_issue = match v.trim() {
                    "complete" => false,
                    "issue" => true,
                    o => return Err(format!("'{o}' is not a thinktime_blocks_type (complete, issue)")),
                }
            }
            "thinktime_iotime" => self.thinktime_iotime_ns = duration_ns(v, 1_000_000_000)?,
            "flow" => self.flow = u32::try_from(count(v)?).map_err(|_| format!("'{v}' is out of range"))?,
            "flow_id" => self.flow_id = u32::try_from(count(v)?).map_err(|_| format!("'{v}' is out of range"))?,
            "flow_sleep" => self.flow_sleep_ns = duration_ns(v, 1_000)?,
            "exitall" => self.exitall = boolean(v)?,
            "exitall_on_error" => self.exitall_on_error = boolean(v)?,
            "new_group" => self.new_group = boolean(v)?,
            "exit_what" => {
                self.exit_what = match v.trim() {
                    "group" => ExitWhat::Group,
                    "stonewall" => ExitWhat::Stonewall,
                    "all" => ExitWhat::All,
                    o => return Err(format!("'{o}' is not what exitall stops (group, stonewall, all)")),
                }
            }
            "io_submit_mode" => {
                self.submit_mode = match v.trim() {
                    "inline" => SubmitMode::Inline,
                    "offload" => SubmitMode::Offload,
                    o => return Err(format!("'{o}' is not a submit mode (inline, offload)")),
                }
            }
            other => return Err(format!("'{other}' is not a pacing word (rate, rate_iops, rate_process, rate_min, rate_iops_min, rate_cycle, thinktime, thinktime_spin, thinktime_blocks, thinktime_blocks_type, thinktime_iotime, flow, flow_id, flow_sleep, exitall, exitall_on_error, exit_what, new_group, io_submit_mode)")),
        }
        Ok(())
    }

    /// What is wrong with it, in one line naming the word.
    pub(crate) fn check(&self) -> Result<(), String> {
        for d in 0..2 {
            if self.rate_bps[d] > 0 && self.rate_iops[d] > 0 {
                return Err("give rate or rate_iops for a direction, not both (as fio)".into());
            }
        }
        if self.thinktime_spin_ns > self.thinktime_ns {
            return Err("thinktime_spin is part of thinktime: give at most thinktime".into());
        }
        if self.thinktime_ns == 0 && (self.thinktime_spin_ns > 0 || self.thinktime_blocks > 0 || self.thinktime_iotime_ns > 0) {
            return Err("thinktime_spin, thinktime_blocks and thinktime_iotime shape thinktime: give thinktime".into());
        }
        if self.submit_mode == SubmitMode::Offload {
            if none2(&self.rate_bps) && none2(&self.rate_iops) {
                return Err("io_submit_mode=offload: iolab offloads paced I/O only: give rate or rate_iops".into());
            }
            if self.thinktime_ns > 0 {
                return Err("io_submit_mode=offload: iolab's submission threads do not stall for thinktime: drop one".into());
            }
        }
        if self.rate_cycle_ms == 0 && !(none2(&self.rate_min_bps) && none2(&self.rate_min_iops)) {
            return Err("rate_cycle 0: give the floor's cycle in milliseconds (fio's 1000)".into());
        }
        if self.flow > FLOW_MAX_WEIGHT {
            return Err(format!("flow {} is above fio's largest weight, {FLOW_MAX_WEIGHT}", self.flow));
        }
        if self.flow == 0 && (self.flow_id > 0 || self.flow_sleep_ns > 0) {
            return Err("flow_id and flow_sleep shape a flow: give the job's weight in it, flow".into());
        }
        Ok(())
    }
}

impl std::fmt::Display for Pace {
    /// fio's words, space-separated, each only where asked.
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let mut w: Vec<String> = Vec::new();
        if !none2(&self.rate_bps) {
            w.push(format!("rate={}", pair(self.rate_bps)));
        }
        if !none2(&self.rate_iops) {
            w.push(format!("rate_iops={}", pair(self.rate_iops)));
        }
        if self.rate_process == RateProcess::Poisson {
            w.push("rate_process=poisson".into());
        }
        if !none2(&self.rate_min_bps) {
            w.push(format!("rate_min={}", pair(self.rate_min_bps)));
        }
        if !none2(&self.rate_min_iops) {
            w.push(format!("rate_iops_min={}", pair(self.rate_min_iops)));
        }
        if self.rate_cycle_ms != 1000 {
            w.push(format!("rate_cycle={}ms", self.rate_cycle_ms));
        }
        if self.thinktime_ns > 0 {
            w.push(format!("thinktime={}ns", self.thinktime_ns));
        }
        if self.thinktime_spin_ns > 0 {
            w.push(format!("thinktime_spin={}ns", self.thinktime_spin_ns));
        }
        if self.thinktime_blocks > 0 {
            w.push(format!("thinktime_blocks={}", self.thinktime_blocks));
        }
        if self.thinktime_issue {
            w.push("thinktime_blocks_type=issue".into());
        }
        if self.thinktime_iotime_ns > 0 {
            w.push(format!("thinktime_iotime={}ns", self.thinktime_iotime_ns));
        }
        if self.flow > 0 {
            w.push(format!("flow={}", self.flow));
        }
        if self.flow_id > 0 {
            w.push(format!("flow_id={}", self.flow_id));
        }
        if self.flow_sleep_ns > 0 {
            w.push(format!("flow_sleep={}ns", self.flow_sleep_ns));
        }
        if self.exitall {
            w.push("exitall=1".into());
        }
        if self.exitall_on_error {
            w.push("exitall_on_error=1".into());
        }
        if self.exit_what != ExitWhat::Group {
            w.push(format!("exit_what={}", self.exit_what.name()));
        }
        if self.new_group {
            w.push("new_group=1".into());
        }
        if self.submit_mode == SubmitMode::Offload {
            w.push("io_submit_mode=offload".into());
        }
        write!(f, "{}", w.join(" "))
    }
}

impl std::str::FromStr for Pace {
    type Err = PlanError;
    /// fio's words, `KEY=VALUE` separated by spaces (`rate_iops=300 thinktime=2ms`).
    fn from_str(s: &str) -> Result<Pace, PlanError> {
        let bad = |why: String| PlanError::Value(format!("pace '{s}': {why}"));
        let mut p = Pace::default();
        for word in s.split_whitespace() {
            let (k, v) = word.split_once('=').ok_or_else(|| bad(format!("'{word}' is not KEY=VALUE")))?;
            p.set(k, v).map_err(|e| bad(format!("{k}: {e}")))?;
        }
        p.check().map_err(bad)?;
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fios_words_read_and_written_back() {
        let p: Pace = "rate=1m,500k rate_process=poisson thinktime=2000 thinktime_spin=1ms thinktime_blocks=4".parse().unwrap();
        assert_eq!(p.rate_bps, [1 << 20, 500 << 10]);
        assert_eq!((p.thinktime_ns, p.thinktime_spin_ns, p.thinktime_blocks), (2_000_000, 1_000_000, 4));
        assert_eq!(p.to_string().parse::<Pace>().unwrap(), p);
        let p: Pace = "rate_iops=,300 thinktime_iotime=9 thinktime=1s".parse().unwrap();
        assert_eq!((p.rate_iops, p.thinktime_iotime_ns), ([0, 300], 9_000_000_000));
        assert_eq!("rate=300,300,300".parse::<Pace>().unwrap().rate_bps, [300, 300]);
        assert!("".parse::<Pace>().unwrap().is_none());
        let e = "rate=1m rate_iops=10".parse::<Pace>().unwrap_err().to_string();
        assert!(e.contains("not both"), "{e}");
        assert!("thinktime=1ms thinktime_spin=2ms".parse::<Pace>().is_err());
        assert!("thinktime_blocks=2".parse::<Pace>().is_err());
        assert!("bogus=1".parse::<Pace>().is_err());
        let p: Pace = "flow=8 flow_id=2 flow_sleep=1000".parse().unwrap();
        assert_eq!((p.flow, p.flow_id, p.flow_sleep_ns), (8, 2, 1_000_000));
        assert!(p.is_group_only() && !p.is_none());
        assert_eq!(p.to_string().parse::<Pace>().unwrap(), p);
        assert!("flow=1001".parse::<Pace>().unwrap_err().to_string().contains("largest weight"));
        assert!("flow_sleep=10".parse::<Pace>().unwrap_err().to_string().contains("give the job's weight"));
        assert!(!"flow=1 rate_iops=5".parse::<Pace>().unwrap().is_group_only());
        let p: Pace = "exitall=1 exit_what=stonewall new_group=1 exitall_on_error=1".parse().unwrap();
        assert!(p.exitall && p.exitall_on_error && p.new_group && p.exit_what == ExitWhat::Stonewall && p.is_group_only());
        assert_eq!(p.to_string().parse::<Pace>().unwrap(), p);
        assert!("exit_what=some".parse::<Pace>().is_err());
    }
    /// fio's io_submit_mode: offload is a word of the pacing, read and written back, and needs
    /// a rate (iolab offloads paced I/O) and no think time.
    #[test]
    fn io_submit_mode_offload_is_a_pacing_word() {
        let p: Pace = "rate_iops=1000 io_submit_mode=offload".parse().unwrap();
        assert_eq!(p.submit_mode, SubmitMode::Offload);
        assert_eq!(p.to_string().parse::<Pace>().unwrap(), p);
        assert!("io_submit_mode=inline".parse::<Pace>().unwrap().is_none());
        let e = "io_submit_mode=offload".parse::<Pace>().unwrap_err().to_string();
        assert!(e.contains("give rate or rate_iops"), "{e}");
        assert!("rate=1m io_submit_mode=offload thinktime=1ms".parse::<Pace>().is_err());
        assert!("rate=1m io_submit_mode=later".parse::<Pace>().is_err());
    }
}
