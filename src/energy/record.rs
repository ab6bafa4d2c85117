//! The energy part of a run record: the window's report, and with `--idle-baseline` the idle
//! power measured before the run (once for a sweep, or each run's own after its settings:
//! [`IdleWhen`]), which of the two it is, and the dynamic part of the run's energy.
use super::{EnergyConfig, EnergyError, EnergyMeter, EnergyReport};
pub use crate::plan::idle::{IdleWhen, PlanEnergy, PlanIdle};
use serde::{Deserialize, Serialize};

/// How a run measures energy.
#[derive(Clone, Debug, Default)]
pub struct EnergyOptions {
    pub config: EnergyConfig,
    /// Refuse to run when no source can measure.
    pub require: bool,
    /// Seconds of idle measurement before the run.
    pub idle_baseline_s: Option<f64>,
    /// `--idle`: when a sweep measures it (None: not said; a plan's `[energy] idle`, else once).
    pub idle_when: Option<IdleWhen>,
}

impl EnergyOptions {
    /// These options with a plan's `[energy]` under them: the command line's `--idle-baseline`
    /// and `--idle` where given, else the plan's. Err, one line: a baseline per run without a
    /// length (nothing would be measured).
    pub fn with_plan(&self, plan: PlanIdle) -> Result<EnergyOptions, EnergyError> {
        let mut out = self.clone();
        out.idle_baseline_s = self.idle_baseline_s.or(plan.seconds);
        out.idle_when = self.idle_when.or(plan.when);
        if out.idle_when == Some(IdleWhen::PerRun) && out.idle_baseline_s.is_none() {
            return Err(EnergyError::Invalid("an idle baseline per run needs its length: --idle-baseline DURATION (e.g. 5s), or the plan's [energy] idle_baseline = \"5s\"".into()));
        }
        Ok(out)
    }

    /// The baseline is measured before each run, after its settings (else once for a sweep).
    pub fn idle_per_run(&self) -> bool {
        self.idle_baseline_s.is_some() && self.idle_when == Some(IdleWhen::PerRun)
    }
}

/// Which idle baseline a record carries (`energy.idle_baseline_taken`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdleTaken {
    /// The sweep's, measured once before its first run and before any run's settings.
    OncePerSweep,
    /// This run's own, measured after its settings were applied and before its I/O.
    PerRun,
}

/// An idle baseline and which one it is.
#[derive(Clone, Debug)]
pub struct IdleBaseline {
    pub taken: IdleTaken,
    pub power: Vec<IdlePower>,
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
    /// Which baseline `idle_baseline` is: the sweep's, taken once before any run and setting,
    /// or this run's own, after its settings (null without a baseline, and in older records).
    pub idle_baseline_taken: Option<IdleTaken>,
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
pub fn finish(mut report: EnergyReport, idle: Option<IdleBaseline>, ios: u64, bytes: u64) -> EnergyRecord {
    report.with_io(ios, bytes);
    let mut dynamic = Vec::new();
    let (taken, idle) = match idle {
        Some(b) => (Some(b.taken), Some(b.power)),
        None => (None, None),
    };
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
    EnergyRecord { report, idle_baseline: idle, idle_baseline_taken: taken, dynamic, efficiency }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_s_idle_baseline_is_checked_and_the_command_line_s_replaces_it() {
        let plan = |idle: Option<&str>, len: Option<&str>| {
            PlanEnergy { idle: idle.map(|i| i.parse().unwrap()), idle_baseline: len.map(str::to_string) }.check()
        };
        assert_eq!(plan(Some("per-run"), Some("5s")), Ok(PlanIdle { when: Some(IdleWhen::PerRun), seconds: Some(5.0) }));
        assert_eq!(plan(None, None), Ok(PlanIdle::default()));
        for (len, says) in [("0s", "measures nothing"), ("soon", "plan energy.idle_baseline: "), ("200h", "longer than a week")] {
            let e = plan(None, Some(len)).unwrap_err();
            assert!(e.contains(says) && !e.contains('\n'), "{len}: {e}");
        }
        let e = "always".parse::<IdleWhen>().unwrap_err();
        assert!(e.contains("once") && e.contains("per-run"), "{e}");
        // Per run with no length anywhere: refused, one line.
        let per_run = EnergyOptions { idle_when: Some(IdleWhen::PerRun), ..Default::default() };
        let e = per_run.with_plan(PlanIdle::default()).unwrap_err().to_string();
        assert!(e.contains("--idle-baseline") && e.contains("idle_baseline"), "{e}");
        // The plan's length with the command line's per-run; the plan's per-run with its length.
        let p = PlanIdle { when: Some(IdleWhen::PerRun), seconds: Some(3.0) };
        assert!(per_run.with_plan(p).unwrap().idle_per_run());
        let none = EnergyOptions::default().with_plan(p).unwrap();
        assert!(none.idle_per_run() && none.idle_baseline_s == Some(3.0));
        // No baseline at all is never "per run".
        assert!(!EnergyOptions::default().with_plan(PlanIdle::default()).unwrap().idle_per_run());
    }

    #[test]
    fn the_record_says_which_baseline_it_carries() {
        let idle = IdleBaseline {
            taken: IdleTaken::PerRun,
            power: vec![IdlePower { source: "generic".into(), scope: "ssd".into(), idle_watts: 2.0, idle_window_s: 1.0, coverage: 1.0 }],
        };
        let rec = finish(EnergyReport::default(), Some(idle), 10, 40960);
        let v = serde_json::to_value(&rec).unwrap();
        assert_eq!(v["idle_baseline_taken"], "per_run");
        assert_eq!(v["idle_baseline"][0]["idle_watts"], 2.0);
        let sweep = IdleBaseline { taken: IdleTaken::OncePerSweep, power: vec![] };
        assert_eq!(
            serde_json::to_value(finish(EnergyReport::default(), Some(sweep), 1, 1)).unwrap()["idle_baseline_taken"],
            "once_per_sweep"
        );
        let none = serde_json::to_value(finish(EnergyReport::default(), None, 1, 1)).unwrap();
        assert!(none["idle_baseline_taken"].is_null() && none["idle_baseline"].is_null());
        // An older record, without the field, reads back.
        let old: EnergyRecord = serde_json::from_value(serde_json::json!({"status": "measured", "idle_baseline": []})).unwrap();
        assert_eq!(old.idle_baseline_taken, None);
    }
}
