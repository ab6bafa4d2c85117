//! Energy: joules from real power sources over the measured window, IOPS and bytes per joule,
//! and never an invented number. See docs/energy.md.
//!
//! Backends: RAPL through powercap sysfs (`rapl`), the perf `power` PMU (`perf`), the BMC
//! through `ipmitool dcmi power reading` (`ipmi`), Redfish (`redfish`), NVML (`nvml`) and an
//! external meter's log (`meter`), and for the drive and the server PowerSensor3 (`powersensor`,
//! the rails that feed the SSD), a NETIO PDU's outlets (`netio`) and any meter that prints
//! timestamped watts on a command's stdout or a socket (`generic`). Each reading carries one scope (cpu_package, dram, platform,
//! bmc_system, wall_ac, gpu) and its method; scopes are never added together. With no source the
//! report says "unavailable" with the reason per backend and carries no numbers: no TDP or
//! model-based estimate exists anywhere here.
//!
//! Sampling: one background thread per source (never an I/O thread), counters every
//! `sample_interval` (default 250 ms, at most 1 s so RAPL wraps are caught), BMCs about 1 Hz.
mod error;
pub mod generic;
pub mod integrate;
pub mod ipmi;
pub mod meterlog;
pub mod netio;
pub mod nvml;
pub mod perf_power;
pub mod powersensor;
pub mod rapl;
pub mod record;
pub mod redfish;
pub mod stream;

pub use error::EnergyError;
pub use meterlog::ClockCorrection;
pub use redfish::RedfishConfig;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What a reading covers. Different scopes overlap (psys contains the package, the BMC sees
/// the whole box) and are never added. `Ssd` is the drive's own rails (a sensor between slot and
/// drive); a PDU outlet feeding the server measures what a plug-in meter does, `WallAc`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    CpuPackage,
    Dram,
    Platform,
    BmcSystem,
    WallAc,
    Gpu,
    Ssd,
}

/// Every scope, for parsing and listing.
pub const SCOPES: [Scope; 7] = [Scope::CpuPackage, Scope::Dram, Scope::Platform, Scope::BmcSystem, Scope::WallAc, Scope::Gpu, Scope::Ssd];

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::CpuPackage => "cpu_package",
            Scope::Dram => "dram",
            Scope::Platform => "platform",
            Scope::BmcSystem => "bmc_system",
            Scope::WallAc => "wall_ac",
            Scope::Gpu => "gpu",
            Scope::Ssd => "ssd",
        }
    }

    /// A scope by its name (`ssd`, `wall_ac`, ...); Err is one phrase naming the known ones.
    pub fn parse(text: &str) -> Result<Scope, EnergyError> {
        SCOPES.iter().copied().find(|s| s.as_str() == text.trim()).ok_or_else(|| {
            EnergyError::Invalid(format!(
                "'{text}' is not an energy scope (known: {})",
                SCOPES.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            ))
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ChannelKind {
    /// Cumulative counter: raw × scale_j = joules; wraps at `range` raw units if Some.
    Counter { scale_j: f64, range: Option<f64>, max_plausible_w: f64 },
    /// Instantaneous power, watts.
    Power { max_gap_s: f64, edge_hold_s: f64 },
}

/// One thing read per sample (a RAPL zone, a perf event on one CPU, a GPU, a BMC reading).
#[derive(Clone, Debug)]
pub struct Channel {
    pub scope: Scope,
    pub label: String,
    pub kind: ChannelKind,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reading {
    Raw(f64),
    Watts(f64),
}

/// A live backend. Channels of the same scope are disjoint parts (sockets, GPUs) and are summed.
pub trait Source: Send {
    fn name(&self) -> &'static str;
    fn method(&self, scope: Scope) -> String;
    fn channels(&self) -> &[Channel];
    /// One value per channel, in order; errors are gaps, their line what the record keeps
    /// (the first one, in a note or a reason).
    fn read(&mut self) -> Vec<Result<Reading, EnergyError>>;
    /// Cheap to read (sysfs, perf, NVML): read synchronously at start.
    fn fast(&self) -> bool {
        false
    }
    /// Own polling interval, if slower than the meter's.
    fn interval(&self) -> Duration {
        Duration::ZERO
    }
    /// A source that reads a stream on its own thread and integrates as samples arrive
    /// (`stream`): told the window's start (monotonic and UNIX), returns true, and is never
    /// polled; `finish` then gives its energy. The others return false.
    fn begin(&mut self, _t0: Instant, _start_unix: f64) -> bool {
        false
    }
    /// A streaming source's energy over [0, end] seconds of the window, and why a scope has none.
    fn finish(&mut self, _end: f64) -> (Vec<SourceEnergy>, Vec<String>) {
        (Vec::new(), Vec::new())
    }
}

pub const BACKENDS: [&str; 9] = ["rapl", "perf", "ipmi", "redfish", "nvml", "meter", "powersensor", "netio", "generic"];
/// Backends that measure only what the user wired and named: in auto mode, one not configured is
/// left out without a reason (as the meter without a log is).
const NEED_CONFIG: [&str; 4] = ["meter", "powersensor", "netio", "generic"];
/// Below this coverage a source still reports its joules and mean watts, but no per-joule ratio.
pub const MIN_COVERAGE_FOR_RATIOS: f64 = 0.9;

#[derive(Clone, Debug)]
pub struct EnergyConfig {
    /// Backends to use (see BACKENDS); empty = auto-detect all.
    pub sources: Vec<String>,
    pub meter_log: Option<PathBuf>,
    /// "hobo", "hobo-dmy" or "csv"; None = detect.
    pub meter_format: Option<String>,
    /// Added to the meter's timestamps (see meterlog::ClockCorrection).
    pub meter_offset_s: f64,
    /// Meter clock rate error, positive when the meter runs fast.
    pub meter_drift_ppm: f64,
    /// Two (meter time, host UNIX time) sync marks; overrides offset and drift when set.
    pub meter_sync: Option<((f64, f64), (f64, f64))>,
    /// "/sys", injectable for tests.
    pub sysfs_root: PathBuf,
    pub redfish: Option<RedfishConfig>,
    /// ipmitool binary; None = IOLAB_IPMITOOL, else looked up on PATH.
    pub ipmitool: Option<PathBuf>,
    /// Arguments before "dcmi power reading", e.g. -I lanplus -H bmc -U user -E (password via IPMI_PASSWORD).
    pub ipmitool_args: Vec<String>,
    /// NVML library; None = IOLAB_NVML_LIB, else libnvidia-ml.so.1.
    pub nvml_library: Option<PathBuf>,
    /// Counter sampling interval; clamped to [10 ms, 1 s].
    pub sample_interval: Duration,
    /// A PowerSensor3 and the rails (sensor pairs) that feed the drive.
    pub powersensor: Option<powersensor::PowerSensorConfig>,
    /// A NETIO PDU and the outlets that feed the server.
    pub netio: Option<netio::NetioConfig>,
    /// A meter that prints timestamped watts on a command's stdout or a TCP socket.
    pub generic: Option<generic::GenericConfig>,
}

impl Default for EnergyConfig {
    fn default() -> Self {
        EnergyConfig {
            sources: Vec::new(),
            meter_log: None,
            meter_format: None,
            meter_offset_s: 0.0,
            meter_drift_ppm: 0.0,
            meter_sync: None,
            sysfs_root: PathBuf::from("/sys"),
            redfish: None,
            ipmitool: None,
            ipmitool_args: Vec::new(),
            nvml_library: None,
            sample_interval: Duration::from_millis(250),
            powersensor: None,
            netio: None,
            generic: None,
        }
    }
}

impl EnergyConfig {
    /// Whether the user configured backend `b` (those in NEED_CONFIG need it).
    fn configured(&self, b: &str) -> bool {
        match b {
            "meter" => self.meter_log.is_some(),
            "powersensor" => self.powersensor.is_some(),
            "netio" => self.netio.is_some(),
            "generic" => self.generic.is_some(),
            _ => true,
        }
    }

    /// The meter clock's correction; Err (bad input) says which value cannot be used.
    fn clock_correction(&self) -> Result<ClockCorrection, EnergyError> {
        match self.meter_sync {
            Some((m1, m2)) => ClockCorrection::from_sync_marks(m1, m2),
            None => Ok(ClockCorrection { offset_s: self.meter_offset_s, drift_ppm: self.meter_drift_ppm, anchor_meter_s: None }),
        }
        .and_then(|c| {
            // Also for a config not made from the command line's checked options.
            if !(c.offset_s.is_finite() && c.offset_s.abs() <= MAX_CLOCK_OFFSET_S) {
                return Err(EnergyError::Invalid(format!("meter clock offset {} s is not a finite number within a year", c.offset_s)));
            }
            if !(c.drift_ppm.is_finite() && c.drift_ppm.abs() <= MAX_DRIFT_PPM) {
                return Err(EnergyError::Invalid(format!(
                    "meter clock drift {} ppm is not a finite number within ±{MAX_DRIFT_PPM} ppm",
                    c.drift_ppm
                )));
            }
            Ok(c)
        })
    }
}

/// One backend: available or why not.
#[derive(Clone, Debug, Serialize)]
pub struct SourceStatus {
    pub backend: String,
    pub available: bool,
    pub scopes: Vec<String>,
    /// What was found (method, zones, de-duplication) or why it is unavailable.
    pub detail: String,
    pub notes: Vec<String>,
}

type Opened = Result<(Box<dyn Source>, Vec<String>), EnergyError>;

fn open_backend(cfg: &EnergyConfig, b: &str) -> Opened {
    match b {
        "rapl" => rapl::Rapl::open(&cfg.sysfs_root).map(|(s, n)| (Box::new(s) as Box<dyn Source>, n)),
        "perf" => perf_power::PerfPower::open(&cfg.sysfs_root).map(|(s, n)| (Box::new(s) as Box<dyn Source>, n)),
        "ipmi" => {
            let prog = cfg.ipmitool.clone().or_else(|| std::env::var_os("IOLAB_IPMITOOL").map(PathBuf::from));
            ipmi::Ipmi::open(prog.as_deref(), &cfg.ipmitool_args).map(|(s, n)| (Box::new(s) as Box<dyn Source>, n))
        }
        "redfish" => match &cfg.redfish {
            Some(r) => redfish::Redfish::open(r).map(|(s, n)| (Box::new(s) as Box<dyn Source>, n)),
            None => Err(EnergyError::Invalid("no Redfish URL configured".into())),
        },
        "nvml" => {
            let lib = cfg.nvml_library.clone().or_else(|| std::env::var_os("IOLAB_NVML_LIB").map(PathBuf::from));
            nvml::Nvml::open(lib.as_deref()).map(|(s, n)| (Box::new(s) as Box<dyn Source>, n))
        }
        "powersensor" => match &cfg.powersensor {
            Some(p) => powersensor::PowerSensor::open(p).map(|(s, n)| (Box::new(s) as Box<dyn Source>, n)),
            None => Err(EnergyError::Invalid("no PowerSensor3 device given (--powersensor DEVICE --powersensor-rails PAIRS)".into())),
        },
        "netio" => match &cfg.netio {
            Some(n) => netio::Netio::open(n).map(|(s, n)| (Box::new(s) as Box<dyn Source>, n)),
            None => Err(EnergyError::Invalid("no NETIO PDU given (--netio-url URL --netio-outlets N)".into())),
        },
        "generic" => match &cfg.generic {
            Some(g) => generic::Generic::open(g).map(|(s, n)| (Box::new(s) as Box<dyn Source>, n)),
            None => {
                Err(EnergyError::Invalid("no meter command or socket given (--energy-command CMD or --energy-socket HOST:PORT)".into()))
            }
        },
        other => Err(EnergyError::Invalid(format!("unknown energy source {other:?} (known: {})", BACKENDS.join(", ")))),
    }
}

/// Open what the config asks for. Returns the live sources and one status per backend considered.
fn open_all(cfg: &EnergyConfig) -> (Vec<Box<dyn Source>>, Vec<SourceStatus>) {
    let mut live: Vec<Box<dyn Source>> = Vec::new();
    let mut st = Vec::new();
    let mut names: Vec<String> =
        if cfg.sources.is_empty() { BACKENDS.iter().map(|s| s.to_string()).collect() } else { cfg.sources.clone() };
    names.dedup();
    for b in &names {
        let b = b.as_str();
        if b == "meter" {
            st.push(match &cfg.meter_log {
                Some(p) => {
                    let (available, detail) = match meter_log_problem(p) {
                        Some(why) => (false, format!("meter log {why}")),
                        None if p.exists() => (true, format!("meter log {} (imported at the window's end)", p.display())),
                        None => (false, format!("meter log {} does not exist (yet)", p.display())),
                    };
                    SourceStatus { backend: "meter".into(), available, scopes: vec!["wall_ac".into()], detail, notes: vec![] }
                }
                None => SourceStatus {
                    backend: "meter".into(),
                    available: false,
                    scopes: vec![],
                    detail: "no meter log given".into(),
                    notes: vec![],
                },
            });
            continue;
        }
        if b == "perf" && cfg.sources.is_empty() && live.iter().any(|s| s.name() == "rapl") {
            st.push(SourceStatus {
                backend: "perf".into(),
                available: false,
                scopes: vec![],
                detail: "skipped: powercap RAPL already measures the same domains (ask for it explicitly to get both)".into(),
                notes: vec![],
            });
            continue;
        }
        if b == "redfish" && cfg.redfish.is_none() && cfg.sources.is_empty() {
            st.push(SourceStatus {
                backend: "redfish".into(),
                available: false,
                scopes: vec![],
                detail: "no Redfish URL configured".into(),
                notes: vec![],
            });
            continue;
        }
        match open_backend(cfg, b) {
            Ok((s, notes)) => {
                let mut scopes: Vec<Scope> = s.channels().iter().map(|c| c.scope).collect();
                scopes.sort();
                scopes.dedup();
                let detail = scopes.iter().map(|&sc| format!("{}: {}", sc.as_str(), s.method(sc))).collect::<Vec<_>>().join(" | ");
                st.push(SourceStatus {
                    backend: b.into(),
                    available: true,
                    scopes: scopes.iter().map(|s| s.as_str().to_string()).collect(),
                    detail,
                    notes,
                });
                live.push(s);
            }
            // Whatever its kind, an unavailable source is a reason in the record (`--require-energy`
            // decides what none measuring means).
            Err(why) => {
                st.push(SourceStatus { backend: b.into(), available: false, scopes: vec![], detail: why.to_string(), notes: vec![] })
            }
        }
    }
    (live, st)
}

/// Every backend: available or why not (for `iolab probe`).
pub fn probe(cfg: &EnergyConfig) -> Vec<SourceStatus> {
    open_all(cfg).1
}

/// Read back (`iolab energy import`) as leniently as old records need: a field they lack is its default.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SourceEnergy {
    pub source: String,
    pub scope: String,
    pub method: String,
    /// Energy measured over the covered parts of the window.
    pub joules: f64,
    /// joules / covered seconds.
    pub mean_watts: f64,
    pub window_s: f64,
    /// Fraction of the window covered by counted sample intervals.
    pub coverage: f64,
    pub largest_gap_s: f64,
    pub samples: usize,
    pub read_errors: usize,
    pub wraps: u64,
    /// I/Os per joule (= IOPS per watt): ios / (mean_watts × window_s). Set by `with_io`, only
    /// when coverage ≥ MIN_COVERAGE_FOR_RATIOS.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iops_per_joule: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_per_joule: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Mean power in each second of the window, from its start (the series' seconds); null for a
    /// second the samples do not cover.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_second_watts: Vec<Option<f64>>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EnergyReport {
    /// "measured" | "unavailable"
    pub status: String,
    /// Why backends gave nothing (per backend), also when others measured.
    pub reasons: Vec<String>,
    pub sources: Vec<SourceEnergy>,
    pub window_s: f64,
    /// The measured window in UNIX time (SystemTime), for aligning external meter logs later.
    pub window_start_unix_s: f64,
    pub window_end_unix_s: f64,
}

impl EnergyReport {
    pub fn unavailable(reasons: Vec<String>) -> EnergyReport {
        EnergyReport {
            status: "unavailable".into(),
            reasons,
            sources: Vec::new(),
            window_s: 0.0,
            window_start_unix_s: 0.0,
            window_end_unix_s: 0.0,
        }
    }

    /// Add I/Os per joule and bytes per joule to every source with enough coverage.
    pub fn with_io(&mut self, ios: u64, bytes: u64) {
        for s in &mut self.sources {
            let e = s.mean_watts * s.window_s;
            if s.coverage >= MIN_COVERAGE_FOR_RATIOS && e > 0.0 {
                s.iops_per_joule = Some(ios as f64 / e);
                s.bytes_per_joule = Some(bytes as f64 / e);
            } else {
                s.iops_per_joule = None;
                s.bytes_per_joule = None;
                let n = format!("no per-joule ratios: coverage {:.3} < {MIN_COVERAGE_FOR_RATIOS}", s.coverage);
                if !s.notes.contains(&n) {
                    s.notes.push(n);
                }
            }
        }
    }

    /// Import an external meter log for this report's window (e.g. after downloading the logger).
    pub fn import_meter_log(&mut self, cfg: &EnergyConfig) {
        let Some(path) = &cfg.meter_log else { return };
        match import_meter_log(path, cfg, (self.window_start_unix_s, self.window_end_unix_s)) {
            Ok(s) => self.sources.push(s),
            Err(e) => self.reasons.push(format!("meter: {e}")),
        }
        self.status = if self.sources.is_empty() { "unavailable" } else { "measured" }.into();
    }

    /// For `--require-energy`: Err with the reasons when nothing was measured, or when a meter
    /// log was given and gave nothing for the window (the user named that file: other sources
    /// measuring does not make up for it).
    pub fn require_measured(&self) -> Result<(), String> {
        if self.status != "measured" {
            return Err(format!("no energy was measured ({})", self.reasons.join("; ")));
        }
        // Never a number that is none (the integration refuses them; this holds whatever the source).
        if let Some(s) = self.sources.iter().find(|s| !(s.joules.is_finite() && s.mean_watts.is_finite() && s.coverage.is_finite())) {
            return Err(format!("{} {} measured {} J, not a finite number", s.source, s.scope, s.joules));
        }
        match self.reasons.iter().find(|r| r.starts_with("meter: ")) {
            Some(r) => Err(format!("the meter log gave no energy for the run ({r})")),
            None => Ok(()),
        }
    }
}

/// The largest meter clock rate error iolab takes, ppm: a quartz clock is off by tens of ppm; a
/// thousand is already a second every quarter of an hour. (-10^6 divided time by zero.)
pub const MAX_DRIFT_PPM: f64 = 1000.0;
/// The largest meter clock offset iolab takes, seconds: a year (a meter's clock never set).
pub const MAX_CLOCK_OFFSET_S: f64 = 366.0 * 86_400.0;
/// The largest power one meter sample may read, watts: a rack's worth. Larger is a parse error or
/// a glitch (one sample of 10^308 W made the mean infinite).
pub const MAX_SAMPLE_WATTS: f64 = 1e6;
/// The longest window energy is integrated over, seconds: the longest ramp and the longest
/// runtime (`plan::validate::MAX_SECONDS` each). A record's window beyond it, or one that is not
/// finite, is not a run's (a window of 10^13 s tried to allocate 160 TB).
pub const MAX_WINDOW_S: f64 = 2.0 * crate::plan::validate::MAX_SECONDS;

/// A finite number within ±`max`, for an option (clap's value parser); Err (bad input) is one phrase.
fn finite_within(text: &str, max: f64, unit: &str, what: &str) -> Result<f64, EnergyError> {
    let v: f64 = text.trim().parse().map_err(|_| EnergyError::Invalid(format!("'{text}' is not a number")))?;
    if !v.is_finite() {
        return Err(EnergyError::Invalid(format!("'{text}' is not a finite number")));
    }
    if v.abs() > max {
        return Err(EnergyError::Invalid(format!("{text} is beyond ±{max} {unit}, {what}")));
    }
    Ok(v)
}

/// `--meter-drift-ppm`, `energy import --drift-ppm`: finite, within ±[`MAX_DRIFT_PPM`].
pub(crate) fn parse_drift_ppm(text: &str) -> Result<f64, EnergyError> {
    finite_within(text, MAX_DRIFT_PPM, "ppm", "more than any meter's clock drifts")
}

/// `--meter-offset`, `energy import --clock-offset`: finite seconds within a year.
pub(crate) fn parse_clock_offset_s(text: &str) -> Result<f64, EnergyError> {
    finite_within(text, MAX_CLOCK_OFFSET_S, "s", "more than a year")
}

/// The command line's options for the drive's and the server's sources, as given (`EnergyArgs`).
#[derive(Clone, Debug, Default)]
pub struct SourceArgs {
    pub powersensor: Option<PathBuf>,
    pub powersensor_rails: Option<String>,
    pub netio_url: Option<String>,
    pub netio_outlets: Option<String>,
    pub netio_credentials: Option<PathBuf>,
    pub command: Option<String>,
    pub socket: Option<String>,
    pub scope: Option<String>,
}

fn number_list(flag: &str, text: &str, lo: u32, hi: u32) -> Result<Vec<u32>, EnergyError> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let n: u32 = part.parse().map_err(|_| EnergyError::Invalid(format!("{flag} '{text}': '{part}' is not a number")))?;
        if !(lo..=hi).contains(&n) {
            return Err(EnergyError::Invalid(format!("{flag} '{text}': {n} is not between {lo} and {hi}")));
        }
        if !out.contains(&n) {
            out.push(n);
        }
    }
    if out.is_empty() {
        return Err(EnergyError::Invalid(format!("{flag} '{text}' names none")));
    }
    Ok(out)
}

impl SourceArgs {
    /// Check the options and put them in `cfg`; Err (bad input) is one line naming the option.
    pub fn apply(&self, cfg: &mut EnergyConfig) -> Result<(), EnergyError> {
        let bad = |m: String| Err(EnergyError::Invalid(m));
        match (&self.powersensor, &self.powersensor_rails) {
            (Some(dev), Some(r)) => {
                let rails = number_list("--powersensor-rails", r, 0, powersensor::MAX_PAIRS as u32 - 1)?;
                cfg.powersensor =
                    Some(powersensor::PowerSensorConfig { device: dev.clone(), rails: rails.into_iter().map(|r| r as usize).collect() });
            }
            (Some(_), None) => return bad("--powersensor needs --powersensor-rails: the sensor pairs (0-3) that feed the drive".into()),
            (None, Some(_)) => return bad("--powersensor-rails needs --powersensor DEVICE".into()),
            (None, None) => {}
        }
        match (&self.netio_url, &self.netio_outlets) {
            (Some(url), Some(o)) => {
                let outlets = number_list("--netio-outlets", o, 1, 64)?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return bad(format!("--netio-url {} must start with http:// or https://", crate::secret::redact(url)));
                }
                let mut n = netio::NetioConfig {
                    url: url.clone(),
                    outlets,
                    username: std::env::var("IOLAB_NETIO_USER").ok(),
                    password: std::env::var("IOLAB_NETIO_PASSWORD").ok(),
                    credentials_file: self.netio_credentials.clone(),
                    timeout: None,
                };
                if n.credentials_file.is_none() {
                    n.credentials_file = std::env::var_os("IOLAB_NETIO_CREDENTIALS").map(PathBuf::from);
                }
                cfg.netio = Some(n);
            }
            (Some(_), None) => return bad("--netio-url needs --netio-outlets: the output IDs that feed the server".into()),
            (None, Some(_)) => return bad("--netio-outlets needs --netio-url URL".into()),
            (None, None) => {
                if self.netio_credentials.is_some() {
                    return bad("--netio-credentials needs --netio-url URL".into());
                }
            }
        }
        let scope =
            self.scope.as_deref().map(Scope::parse).transpose().map_err(|e| EnergyError::Invalid(format!("--energy-scope: {e}")))?;
        match (&self.command, &self.socket, scope) {
            (Some(_), Some(_), _) => return bad("--energy-command and --energy-socket: give one meter of the two".into()),
            (None, None, Some(_)) => return bad("--energy-scope needs --energy-command or --energy-socket".into()),
            (None, None, None) => {}
            (_, _, None) => {
                return bad("--energy-command/--energy-socket need --energy-scope: what the meter measures (ssd, wall_ac, cpu_package, dram, platform, bmc_system, gpu)".into())
            }
            (command, socket, Some(scope)) => {
                if let Some(s) = socket {
                    if s.rsplit_once(':').and_then(|(_, p)| p.parse::<u16>().ok()).is_none() {
                        return bad(format!("--energy-socket '{s}' is not HOST:PORT"));
                    }
                }
                cfg.generic = Some(generic::GenericConfig { command: command.clone(), socket: socket.clone(), scope });
            }
        }
        Ok(())
    }
}

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// The largest meter log iolab reads. A month of 1 Hz samples is about 130 MiB of CSV; anything
/// larger is refused, not read (a device such as /dev/zero never ends).
pub const MAX_METER_LOG_BYTES: u64 = 256 << 20;

fn not_regular(path: &Path, ft: std::fs::FileType) -> String {
    use std::os::unix::fs::FileTypeExt;
    let what = if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else if ft.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    };
    format!(
        "{} is {what}, not a regular file: save the meter's log to a file and give that (it is read whole at the run's end)",
        path.display()
    )
}

fn too_big(path: &Path) -> String {
    format!(
        "{} is larger than {} MiB, the most a meter log may be: keep only the hours around the run",
        path.display(),
        MAX_METER_LOG_BYTES >> 20
    )
}

/// Why the meter log at `path` could not be read at the run's end, checked before the run: it
/// must be a regular file of at most MAX_METER_LOG_BYTES. None when it is fine, or does not exist
/// yet (a logger may write it during the run).
pub(crate) fn meter_log_problem(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return Some(not_regular(path, meta.file_type()));
    }
    (meta.len() > MAX_METER_LOG_BYTES).then(|| too_big(path))
}

/// A meter log's text: a regular file only (a FIFO or device is refused without blocking on
/// it), at most MAX_METER_LOG_BYTES (also when its size is not known up front, as in /proc).
/// Err (bad input): the file given cannot be read as a meter log.
pub(crate) fn read_meter_log(path: &Path) -> Result<String, EnergyError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let bad = |e: std::io::Error| EnergyError::Invalid(format!("{}: {e}", path.display()));
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(bad)?;
    let meta = f.metadata().map_err(bad)?;
    if !meta.is_file() {
        return Err(EnergyError::Invalid(not_regular(path, meta.file_type())));
    }
    let mut buf = Vec::new();
    f.take(MAX_METER_LOG_BYTES + 1).read_to_end(&mut buf).map_err(bad)?;
    if buf.len() as u64 > MAX_METER_LOG_BYTES {
        return Err(EnergyError::Invalid(too_big(path)));
    }
    String::from_utf8(buf).map_err(|_| EnergyError::Invalid(format!("{} is not UTF-8 text", path.display())))
}

/// Read a meter log and integrate it over a host UNIX-time window.
pub fn import_meter_log(path: &Path, cfg: &EnergyConfig, window_unix: (f64, f64)) -> Result<SourceEnergy, EnergyError> {
    MeterLogFile::load(path, cfg)?.over(window_unix).map_err(EnergyError::Failed)
}

/// A meter log read and parsed once, with its clock correction: `iolab energy import` matches
/// it against many runs' windows.
pub struct MeterLogFile {
    path: PathBuf,
    log: meterlog::MeterLog,
    corr: ClockCorrection,
    /// The log in host time, sorted once for every window.
    corrected: meterlog::CorrectedLog,
}

impl MeterLogFile {
    /// Err (bad input): a log that cannot be read or parsed, or a clock correction that cannot be used.
    pub fn load(path: &Path, cfg: &EnergyConfig) -> Result<MeterLogFile, EnergyError> {
        let text = read_meter_log(path)?;
        let log = meterlog::parse_meter_log(&text, cfg.meter_format.as_deref())?;
        let corr = cfg.clock_correction()?;
        let corrected = meterlog::CorrectedLog::new(&log, &corr);
        Ok(MeterLogFile { path: path.to_path_buf(), log, corr, corrected })
    }

    /// The log's samples in host UNIX time after the correction: (first, last).
    pub(crate) fn span_unix(&self) -> (f64, f64) {
        let (first, last) = (self.log.points[0].0, self.log.points[self.log.points.len() - 1].0);
        (self.corr.apply(first, first), self.corr.apply(last, first))
    }

    /// The wall energy of a host UNIX-time window; Err says why the log gives none for it (the
    /// run's reason, or the import's for that run: the message is what is kept).
    pub fn over(&self, window_unix: (f64, f64)) -> Result<SourceEnergy, String> {
        let (log, corr) = (&self.log, &self.corr);
        let (lo, hi) = self.span_unix();
        // A record's window is read from its JSON: one that is no run's (not finite, backwards,
        // longer than any run may be) gives no energy, at once (+10^9 s hung the import).
        let len = window_unix.1 - window_unix.0;
        if !(window_unix.0.is_finite() && window_unix.1.is_finite() && len > 0.0 && len <= MAX_WINDOW_S) {
            return Err(format!(
                "the window UNIX {}..{} is not a run's window (it must be finite, forwards and at most {} s long)",
                window_unix.0, window_unix.1, MAX_WINDOW_S
            ));
        }
        let (r, per_second_watts) = self.corrected.integrate(window_unix);
        if let Some(why) = r.invalid {
            return Err(format!(
                "{} ({} samples spanning UNIX {lo:.1}..{hi:.1} after correction; window {:.1}..{:.1}): {why}",
                self.path.display(),
                log.points.len(),
                window_unix.0,
                window_unix.1
            ));
        }
        let window_s = window_unix.1 - window_unix.0;
        let method = format!(
            "meter log {} ({}, series {:?}, {}), clock offset {:+.3} s drift {:+.1} ppm",
            self.path.display(),
            log.format,
            log.series,
            match log.kind {
                meterlog::SeriesKind::Watts => "power samples, trapezoid rule",
                meterlog::SeriesKind::CumulativeJoules => "cumulative energy differences",
            },
            corr.offset_s,
            corr.drift_ppm
        );
        Ok(SourceEnergy {
            source: "meter".into(),
            scope: Scope::WallAc.as_str().into(),
            method,
            joules: r.joules,
            mean_watts: if r.covered_s > 0.0 { r.joules / r.covered_s } else { 0.0 },
            window_s,
            coverage: if window_s > 0.0 { (r.covered_s / window_s).min(1.0) } else { 0.0 },
            largest_gap_s: r.largest_gap_s,
            samples: r.samples,
            read_errors: 0,
            wraps: 0,
            iops_per_joule: None,
            bytes_per_joule: None,
            notes: Vec::new(),
            per_second_watts,
        })
    }
}

type Samples = Vec<(f64, Vec<Result<Reading, EnergyError>>)>;

struct Running {
    handle: JoinHandle<(Box<dyn Source>, Samples)>,
}

/// Started at the window's start, sampled from background threads, stopped at its end.
pub struct EnergyMeter {
    cfg: EnergyConfig,
    t0: Instant,
    start_unix: f64,
    stop_tx: Vec<mpsc::Sender<()>>,
    running: Vec<Running>,
    /// Sources that read and integrate on their own threads (`Source::begin`).
    streaming: Vec<Box<dyn Source>>,
    reasons: Vec<String>,
}

fn sample(src: &mut dyn Source, t0: Instant) -> (f64, Vec<Result<Reading, EnergyError>>) {
    let a = t0.elapsed().as_secs_f64();
    let v = src.read();
    let b = t0.elapsed().as_secs_f64();
    ((a + b) / 2.0, v)
}

/// Sources opened ahead of the window (probing ipmitool or a BMC takes time).
pub struct PreparedEnergy {
    cfg: EnergyConfig,
    live: Vec<Box<dyn Source>>,
    reasons: Vec<String>,
}

impl PreparedEnergy {
    pub fn prepare(cfg: &EnergyConfig) -> PreparedEnergy {
        let (live, st) = open_all(cfg);
        let reasons = st
            .iter()
            .filter(|s| {
                !(s.available || NEED_CONFIG.contains(&s.backend.as_str()) && !cfg.configured(&s.backend) && cfg.sources.is_empty())
            })
            .map(|s| format!("{}: {}", s.backend, s.detail))
            .collect();
        PreparedEnergy { cfg: cfg.clone(), live, reasons }
    }

    /// Start at the window's start.
    pub fn start(self) -> EnergyMeter {
        let interval = self.cfg.sample_interval.clamp(Duration::from_millis(10), Duration::from_secs(1));
        let start_unix = unix_now();
        let t0 = Instant::now();
        let mut stop_tx = Vec::new();
        let mut running = Vec::new();
        let mut streaming = Vec::new();
        for mut src in self.live {
            if src.begin(t0, start_unix) {
                streaming.push(src);
                continue;
            }
            let mut samples: Samples = Vec::new();
            if src.fast() {
                samples.push(sample(src.as_mut(), t0));
            }
            let (tx, rx) = mpsc::channel::<()>();
            stop_tx.push(tx);
            let every = src.interval().max(interval);
            let handle = std::thread::Builder::new()
                .name(format!("energy-{}", src.name()))
                .spawn(move || {
                    let mut next = if samples.is_empty() { Duration::ZERO } else { every };
                    loop {
                        let wait = next.saturating_sub(t0.elapsed());
                        match rx.recv_timeout(wait) {
                            Err(mpsc::RecvTimeoutError::Timeout) => {
                                samples.push(sample(src.as_mut(), t0));
                                // Keep the cadence; after a slow read, sample again at once rather than drift.
                                next += every;
                                if next < t0.elapsed() {
                                    next = t0.elapsed();
                                }
                            }
                            _ => break,
                        }
                    }
                    samples.push(sample(src.as_mut(), t0)); // the window's end
                    (src, samples)
                })
                .expect("spawn energy sampler");
            running.push(Running { handle });
        }
        EnergyMeter { cfg: self.cfg, t0, start_unix, stop_tx, running, streaming, reasons: self.reasons }
    }
}

impl EnergyMeter {
    /// Open the sources and start sampling now (the window's start).
    pub fn start(cfg: &EnergyConfig) -> EnergyMeter {
        PreparedEnergy::prepare(cfg).start()
    }

    /// Stop at the window's end and integrate.
    pub fn stop(self) -> EnergyReport {
        let end = self.t0.elapsed().as_secs_f64();
        let end_unix = self.start_unix + end;
        for tx in &self.stop_tx {
            let _ = tx.send(());
        }
        let mut sources = Vec::new();
        let mut reasons = self.reasons;
        for r in self.running {
            let Ok((src, samples)) = r.handle.join() else {
                reasons.push("a sampler thread panicked".into());
                continue;
            };
            let (mut s, mut why) = summarise(src.as_ref(), &samples, end);
            sources.append(&mut s);
            reasons.append(&mut why);
        }
        for mut src in self.streaming {
            let (mut s, mut why) = src.finish(end);
            sources.append(&mut s);
            reasons.append(&mut why);
        }
        let mut report = EnergyReport {
            status: String::new(),
            reasons,
            sources,
            window_s: end,
            window_start_unix_s: self.start_unix,
            window_end_unix_s: end_unix,
        };
        report.import_meter_log(&self.cfg);
        report.status = if report.sources.is_empty() { "unavailable" } else { "measured" }.into();
        report
    }
}

/// Integrate one source's samples over [0, end]: one SourceEnergy per scope, or reasons.
pub(crate) fn summarise(src: &dyn Source, samples: &Samples, end: f64) -> (Vec<SourceEnergy>, Vec<String>) {
    let chans = src.channels();
    let mut scopes: Vec<Scope> = chans.iter().map(|c| c.scope).collect();
    scopes.sort();
    scopes.dedup();
    let mut out = Vec::new();
    let mut reasons = Vec::new();
    for scope in scopes {
        let mut joules = 0.0;
        let mut watts = 0.0;
        let mut coverage: f64 = 1.0;
        let mut gap: f64 = 0.0;
        let mut n = usize::MAX;
        let (mut errs, mut wraps) = (0usize, 0u64);
        let mut bad = Vec::new();
        let mut first_err: Option<String> = None;
        let mut per_second = None;
        for (i, ch) in chans.iter().enumerate().filter(|(_, c)| c.scope == scope) {
            let series: Vec<(f64, Option<f64>)> = samples
                .iter()
                .map(|(t, v)| {
                    let x = match v.get(i) {
                        Some(Ok(Reading::Raw(x))) | Some(Ok(Reading::Watts(x))) => Some(*x),
                        Some(Err(e)) => {
                            first_err.get_or_insert_with(|| e.to_string());
                            None
                        }
                        None => None,
                    };
                    (*t, x)
                })
                .collect();
            // Read once; each window (the whole, then every second) costs only its own samples.
            let (counter, power) = (integrate::CounterSeries::new(&series), integrate::PowerSeries::new(&series));
            let over = |window| match ch.kind {
                ChannelKind::Counter { scale_j, range, max_plausible_w } => counter.over(scale_j, range, max_plausible_w, window),
                ChannelKind::Power { max_gap_s, edge_hold_s } => power.over(max_gap_s, edge_hold_s, window),
            };
            let r = over((0.0, end));
            integrate::add_per_second(&mut per_second, integrate::per_second_watts(end, over));
            if let Some(why) = &r.invalid {
                bad.push(format!("{}: {why}", ch.label));
                continue;
            }
            joules += r.joules;
            watts += if r.covered_s > 0.0 { r.joules / r.covered_s } else { 0.0 };
            coverage = coverage.min(if end > 0.0 { (r.covered_s / end).min(1.0) } else { 0.0 });
            gap = gap.max(r.largest_gap_s);
            n = n.min(r.samples);
            errs += r.read_errors;
            wraps += r.wraps;
        }
        if !bad.is_empty() {
            // A scope missing one of its parts would under-count: no number for it.
            let mut why = format!("{} {}: {}", src.name(), scope.as_str(), bad.join("; "));
            if let Some(e) = first_err {
                why.push_str(&format!(" (first read error: {e})"));
            }
            reasons.push(why);
            continue;
        }
        let mut notes = Vec::new();
        if let Some(e) = first_err {
            notes.push(format!("{errs} failed reads counted as gaps; first: {e}"));
        }
        out.push(SourceEnergy {
            source: src.name().into(),
            scope: scope.as_str().into(),
            method: src.method(scope),
            joules,
            mean_watts: watts,
            window_s: end,
            coverage,
            largest_gap_s: gap,
            samples: if n == usize::MAX { 0 } else { n },
            read_errors: errs,
            wraps,
            iops_per_joule: None,
            bytes_per_joule: None,
            notes,
            per_second_watts: per_second.unwrap_or_default(),
        });
    }
    (out, reasons)
}

/// A credentials file of a networked source (`what`: redfish, netio): "user:password" on one
/// line, or the user and the password on two lines (a password may then hold ':').
/// Err (bad input): the file cannot be read or holds no credentials.
pub(crate) fn read_credentials_file(what: &str, f: &Path) -> Result<(String, String), EnergyError> {
    let bad = |why: String| EnergyError::Invalid(format!("{what} credentials file {}{why}", f.display()));
    let text = std::fs::read_to_string(f).map_err(|e| bad(format!(": {e}")))?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().ok_or_else(|| bad(" is empty".into()))?;
    match (first.split_once(':'), lines.next()) {
        (_, Some(p)) => Ok((first.trim().to_string(), p.trim_end().to_string())),
        (Some((u, p)), None) => Ok((u.to_string(), p.to_string())),
        (None, None) => Err(bad(": expected user:password or two lines".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The import at the run's end does not wait on a FIFO put in the log's place during the run.
    #[test]
    fn meter_log_read_refuses_a_fifo_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("meter.fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_meter_log(&fifo).unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        assert_eq!(crate::failure::Kinded::kind(&e), crate::failure::FailureKind::Invalid);
        assert!(read_meter_log(Path::new("/dev/zero")).unwrap_err().to_string().contains("character device"));
    }
}
