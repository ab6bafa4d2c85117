//! A plan's `[energy]` table: when its sweep measures the idle baseline (once, before any run
//! and any setting, or before each run's I/O after its settings) and for how long. The energy
//! layer (`energy::record::EnergyOptions::with_plan`) puts the command line's options over it.
use serde::{Deserialize, Serialize};

/// When a sweep measures its idle baseline (`--idle`, a plan's `[energy] idle`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdleWhen {
    /// Once, before the sweep's first run and before any run's settings: every run's baseline.
    #[default]
    Once,
    /// Before each run's I/O, after its settings are applied: each run's own (as `iolab run`).
    PerRun,
}

impl std::str::FromStr for IdleWhen {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "once" => Ok(IdleWhen::Once),
            "per-run" => Ok(IdleWhen::PerRun),
            _ => Err(format!("--idle {s:?}: give once (before a sweep's first run) or per-run (before each run, after its settings)")),
        }
    }
}

/// A plan's `[energy]` table: when its sweep measures the idle baseline, and for how long
/// (`--idle` and `--idle-baseline` replace either).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanEnergy {
    pub idle: Option<IdleWhen>,
    pub idle_baseline: Option<String>,
}

/// A plan's `[energy]` table checked: (when, seconds), either absent where the plan is silent.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PlanIdle {
    pub when: Option<IdleWhen>,
    pub seconds: Option<f64>,
}

impl PlanEnergy {
    /// Err: the table's bad value, one line.
    pub(crate) fn check(&self) -> Result<PlanIdle, String> {
        let seconds = self
            .idle_baseline
            .as_deref()
            .map(super::size::parse_seconds)
            .transpose()
            .map_err(|e| format!("plan energy.idle_baseline: {e}"))?;
        if let Some(s) = seconds {
            super::validate::check_duration("plan energy.idle_baseline", s).map_err(|e| e.to_string())?;
            if s <= 0.0 {
                return Err(format!("plan energy.idle_baseline: {s} s measures nothing: give a positive duration (e.g. \"5s\")"));
            }
        }
        Ok(PlanIdle { when: self.idle, seconds })
    }
}
