//! The energy part of a run record: the window's report, and with `--idle-baseline` the idle
//! power measured before the run and the dynamic part of the run's energy.
use super::{EnergyConfig, EnergyMeter, EnergyReport};
use serde::{Deserialize, Serialize};

/// How a run measures energy.
#[derive(Clone, Debug, Default)]
pub struct EnergyOptions {
    pub config: EnergyConfig,
    /// Refuse to run when no source can measure.
    pub require: bool,
    /// Seconds of idle measurement before the run.
    pub idle_baseline_s: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct IdlePower {
    pub source: String,
    pub scope: String,
    pub idle_watts: f64,
    pub idle_window_s: f64,
    pub coverage: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DynamicEnergy {
    pub source: String,
    pub scope: String,
    /// joules - idle_watts x covered seconds of the run.
    pub dynamic_joules: f64,
    pub dynamic_watts: f64,
    pub ios_per_dynamic_joule: Option<f64>,
    pub bytes_per_dynamic_joule: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EnergyRecord {
    #[serde(flatten)]
    pub report: EnergyReport,
    /// Null unless --idle-baseline was given.
    pub idle_baseline: Option<Vec<IdlePower>>,
    pub dynamic: Vec<DynamicEnergy>,
    /// I/Os and bytes per joule of each component a source measured (`COMPONENTS`): the drive,
    /// the CPU, the whole system; above idle too where an idle baseline was taken.
    pub efficiency: Vec<ComponentEfficiency>,
}

/// The components efficiency is given for, each with the scopes that measure it, first preferred:
/// the drive's own rails, the CPU package, the whole system (at the wall, the BMC's, RAPL psys).
pub const COMPONENTS: [(&str, &[&str]); 3] =
    [("ssd", &["ssd"]), ("cpu", &["cpu_package"]), ("system", &["wall_ac", "bmc_system", "platform"])];

/// One component's efficiency over the run's window, from one source and scope (never a sum of
/// scopes). A ratio is None where the source covered less than MIN_COVERAGE_FOR_RATIOS of the
/// window, or (dynamic) where no idle baseline was taken or the run drew no more than idle.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ComponentEfficiency {
    /// ssd, cpu or system.
    pub component: String,
    pub source: String,
    pub scope: String,
    pub mean_watts: f64,
    pub iops_per_joule: Option<f64>,
    pub bytes_per_joule: Option<f64>,
    pub iops_per_dynamic_joule: Option<f64>,
    pub bytes_per_dynamic_joule: Option<f64>,
}

/// Per component, the first of its scopes a source measured (one that gave ratios preferred).
pub fn efficiency(report: &EnergyReport, dynamic: &[DynamicEnergy]) -> Vec<ComponentEfficiency> {
    let mut out = Vec::new();
    for (component, scopes) in COMPONENTS {
        let found = scopes.iter().flat_map(|sc| report.sources.iter().filter(move |s| s.scope == *sc));
        let pick = found.clone().find(|s| s.iops_per_joule.is_some()).or_else(|| found.clone().next());
        let Some(s) = pick else { continue };
        let d = dynamic.iter().find(|d| d.source == s.source && d.scope == s.scope);
        out.push(ComponentEfficiency {
            component: component.into(),
            source: s.source.clone(),
            scope: s.scope.clone(),
            mean_watts: s.mean_watts,
            iops_per_joule: s.iops_per_joule,
            bytes_per_joule: s.bytes_per_joule,
            iops_per_dynamic_joule: d.and_then(|d| d.ios_per_dynamic_joule),
            bytes_per_dynamic_joule: d.and_then(|d| d.bytes_per_dynamic_joule),
        });
    }
    out
}

/// Measure idle power for `seconds` (nothing of iolab's runs meanwhile).
/// Ends early once `cancel` is set (Ctrl-C); the caller then does no I/O.
pub(crate) fn measure_idle(cfg: &EnergyConfig, seconds: f64, cancel: crate::cancel::Cancel) -> Vec<IdlePower> {
    let meter = EnergyMeter::start(cfg);
    let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(seconds);
    while !cancel.is_cancelled() && std::time::Instant::now() < until {
        std::thread::sleep(until.saturating_duration_since(std::time::Instant::now()).min(std::time::Duration::from_millis(50)));
    }
    let r = meter.stop();
    r.sources
        .iter()
        .filter(|s| s.coverage > 0.0)
        .map(|s| IdlePower {
            source: s.source.clone(),
            scope: s.scope.clone(),
            idle_watts: s.mean_watts,
            idle_window_s: s.window_s,
            coverage: s.coverage,
        })
        .collect()
}

/// The run's record, with per-joule ratios and, given an idle baseline, the dynamic part.
/// The meter log was imported by `EnergyMeter::stop` (importing it here too listed it twice).
pub fn finish(mut report: EnergyReport, idle: Option<Vec<IdlePower>>, ios: u64, bytes: u64) -> EnergyRecord {
    report.with_io(ios, bytes);
    let mut dynamic = Vec::new();
    if let Some(idle) = &idle {
        for s in &report.sources {
            let Some(i) = idle.iter().find(|i| i.source == s.source && i.scope == s.scope) else { continue };
            let covered = s.window_s * s.coverage;
            let dj = s.joules - i.idle_watts * covered;
            // A dynamic part within floating-point rounding of zero is no energy: dividing by it
            // would print an absurd ratio.
            let ok = s.coverage >= super::MIN_COVERAGE_FOR_RATIOS && dj > s.joules * 1e-9;
            dynamic.push(DynamicEnergy {
                source: s.source.clone(),
                scope: s.scope.clone(),
                dynamic_joules: dj,
                dynamic_watts: if covered > 0.0 { dj / covered } else { 0.0 },
                ios_per_dynamic_joule: ok.then(|| ios as f64 / (dj / s.coverage)),
                bytes_per_dynamic_joule: ok.then(|| bytes as f64 / (dj / s.coverage)),
            });
        }
    }
    let efficiency = efficiency(&report, &dynamic);
    EnergyRecord { report, idle_baseline: idle, dynamic, efficiency }
}
