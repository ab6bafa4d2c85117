//! Sweep plans: a TOML file describing a matrix of configurations, replicates and rules,
//! expanded into the ordered list of runs a sweep executes. The `[matrix]` dimensions, and the
//! order the configurations come in, are defined once in `matrix::DIMENSIONS`.
//!
//! ```toml
//! name = "poll-vs-interrupt"
//! replicates = 5
//! ramp = "10s"
//! runtime = "2m"
//! cooldown = "5s"
//! targets = ["/dev/nvme0n1"]
//! profile = "layers"      # every run profiled too (after an unprofiled run of the same job)
//! [matrix]
//! interface = ["pvsync2", "io_uring"]
//! complete = ["irq", "poll"]
//! bs = ["4k", "16k"]
//! threads = [1, 8]
//! [[rule]]
//! when = { interface = "pvsync2", complete = "poll" }
//! action = "drop"
//! reason = "RWF_HIPRI is ignored for sync I/O"
//! ```
use super::matrix::{dimension, target_set, Matrix, DIMENSIONS};
use super::profile::Profile;
use super::size::{parse_seconds, parse_size};
use super::validate::validate;
use super::{Budget, Job, PlanError, Policy, Timing, Workload};
use crate::device::Targets;
use crate::interfaces::{self, IoChoice};
use crate::rng::Rng;
use crate::settings::Requested;
use serde::Deserialize;

/// Options every run of the plan shares: the plan's own, and the interfaces' (`sq_cpu`, ...),
/// which their options parts read (`interfaces::Options::plan_value`).
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub buffered: bool,
    pub cpus: Option<Vec<usize>>,
    /// `local`, a node's number or `off` (`iolab run --numa`).
    pub numa: Option<super::Numa>,
    pub verify: bool,
    /// fio's verify form, fio's words (`verify_fio = "verify=meta verify_pattern=0xaa555aa5"`).
    pub verify_fio: Option<crate::verify::FioForm>,
    pub continue_on_error: bool,
    pub allow_fallback: bool,
    pub strict: bool,
    pub batch_reap: Option<u32>,
    /// System settings for every run, "name=value" (see `iolab run --set`).
    pub set: Vec<String>,
    /// A study's set-up, "name=value": applied where the machine offers it, recorded where not
    /// (`settings::Requested::setup`).
    pub setup: Vec<String>,
    /// The interfaces' own options.
    pub io: interfaces::Options,
}

/// The plan's own `[options]` keys (the interfaces' come after them in an error's list).
const OWN_OPTIONS: &[&str] =
    &["buffered", "cpus", "numa", "verify", "verify_fio", "continue_on_error", "allow_fallback", "strict", "batch_reap", "set", "setup"];

impl<'de> Deserialize<'de> for Options {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Options, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Options;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a table of options")
            }
            // Each value read typed as its key is met, so a wrong one names its line.
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Options, A::Error> {
                let mut o = Options::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "buffered" => o.buffered = map.next_value()?,
                        "cpus" => o.cpus = Some(map.next_value()?),
                        "numa" => o.numa = Some(map.next_value()?),
                        "verify" => o.verify = map.next_value()?,
                        "verify_fio" => o.verify_fio = Some(map.next_value()?),
                        "continue_on_error" => o.continue_on_error = map.next_value()?,
                        "allow_fallback" => o.allow_fallback = map.next_value()?,
                        "strict" => o.strict = map.next_value()?,
                        "batch_reap" => o.batch_reap = Some(map.next_value()?),
                        "set" => o.set = map.next_value()?,
                        "setup" => o.setup = map.next_value()?,
                        k if o.io.plan_value(k, &mut map)? => {}
                        k => {
                            let keys: Vec<String> =
                                OWN_OPTIONS.iter().copied().chain(interfaces::Options::plan_keys()).map(|k| format!("`{k}`")).collect();
                            return Err(serde::de::Error::custom(format!("unknown field `{k}`, expected one of {}", keys.join(", "))));
                        }
                    }
                }
                Ok(o)
            }
        }
        d.deserialize_map(V)
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    pub when: toml::Table,
    /// "drop" leaves the matching configurations out; "reject" refuses the whole plan.
    pub action: String,
    pub reason: String,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    pub name: Option<String>,
    pub description: Option<String>,
    /// What preconditioning the targets had before the sweep, in words (a suite writes it: done,
    /// or not done and why), kept with the stored plan.
    pub preconditioned: Option<String>,
    #[serde(default = "one")]
    pub replicates: u32,
    #[serde(default = "one_u64")]
    pub seed: u64,
    pub ramp: Option<String>,
    pub runtime: Option<String>,
    pub ios: Option<u64>,
    pub bytes: Option<String>,
    pub cooldown: Option<String>,
    #[serde(default)]
    pub targets: Vec<String>,
    #[serde(default)]
    pub destructive: Vec<String>,
    pub size: Option<String>,
    pub offset: Option<String>,
    /// `layers`, `stages` or `layers,stages`: every run profiled as `--profile` does.
    pub profile: Option<String>,
    #[serde(default)]
    pub matrix: Matrix,
    #[serde(default)]
    pub options: Options,
    #[serde(default, rename = "rule")]
    pub rules: Vec<Rule>,
    /// `[fileset]`: every run is a file-set run (`files`, and `file_size`, `file_order`,
    /// `fsync` unless the matrix lists them), in the plan's one target directory.
    pub fileset: Option<super::fileset::FileSet>,
    /// `[energy]`: when the sweep measures its idle baseline (`idle = "once"` or `"per-run"`)
    /// and for how long (`idle_baseline = "5s"`); `--idle` and `--idle-baseline` replace either.
    pub energy: Option<super::idle::PlanEnergy>,
}

fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}

/// One configuration of the matrix: a job plus the key naming it across replicates.
#[derive(Debug, Clone)]
pub struct PlannedConfig {
    pub key: String,
    pub job: Job,
}

#[derive(Debug)]
pub struct Expansion {
    pub name: String,
    pub configs: Vec<PlannedConfig>,
    /// (configuration key, why it was left out).
    pub dropped: Vec<(String, String)>,
    /// (replicate, index into configs) in execution order.
    pub order: Vec<(u32, usize)>,
    pub replicates: u32,
    pub cooldown_s: f64,
    /// Seconds per run (the plan's idle baseline per run, ramp and runtime) when the budget has a
    /// time (at most that, with a count); None for count budgets.
    pub seconds_per_run: Option<f64>,
    /// What the plan asks to profile in every run (`--profile` may add to it).
    pub profile: Profile,
    /// The plan's `[energy]`: when its idle baseline is measured, and how long.
    pub idle: super::idle::PlanIdle,
}

impl Expansion {
    /// Every configuration may also write to `devices` (the command line's `--destructive`, beside
    /// the plan's `destructive`).
    pub(crate) fn allow_writing(&mut self, devices: &[String]) {
        for c in &mut self.configs {
            let d = &mut c.job.targets.destructive;
            d.extend(devices.iter().filter(|x| !d.contains(x)).cloned().collect::<Vec<_>>());
        }
    }

    /// Estimated wall time of the remaining `runs` runs (adds a second per run for set-up; a
    /// profiled run is made twice, unprofiled first).
    pub(crate) fn estimate_s(&self, runs: usize) -> Option<f64> {
        let made = if self.profile.any() { 2.0 } else { 1.0 };
        self.seconds_per_run.map(|s| runs as f64 * (made * s + self.cooldown_s + 1.0))
    }
}

/// A job's value of the dimension `key`, as rules compare it; None when there is no such dimension.
fn value_of(job: &Job, key: &str) -> Option<toml::Value> {
    dimension(key).map(|d| (DIMENSIONS[d].value)(job))
}

/// Does `actual` satisfy the rule's condition (a value, a list of values, or a comparison
/// string such as ">1", "<=4k", "!=io_uring")?
fn matches(cond: &toml::Value, actual: &toml::Value) -> Result<bool, PlanError> {
    use toml::Value;
    match cond {
        Value::Array(items) => {
            for i in items {
                if matches(i, actual)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Value::String(s) => {
            let ops = [">=", "<=", "!=", ">", "<", "="];
            if let Some(op) = ops.iter().find(|o| s.starts_with(**o)) {
                let rhs = s[op.len()..].trim();
                if let Value::Integer(a) = actual {
                    let b = parse_size(rhs).map_err(|e| PlanError::Plan(format!("rule condition '{s}': {e}")))? as i64;
                    return Ok(match *op {
                        ">=" => *a >= b,
                        "<=" => *a <= b,
                        "!=" => *a != b,
                        ">" => *a > b,
                        "<" => *a < b,
                        _ => *a == b,
                    });
                }
                let a = actual.as_str().unwrap_or("");
                return Ok(match *op {
                    "!=" => a != rhs,
                    "=" => a == rhs,
                    _ => return PlanError::plan(format!("rule condition '{s}' compares a text value")),
                });
            }
            match actual {
                Value::Integer(a) => Ok(parse_size(s).map(|b| b as i64 == *a).unwrap_or(false)),
                _ => Ok(actual.as_str() == Some(s.as_str())),
            }
        }
        Value::Integer(i) => Ok(actual.as_integer() == Some(*i)),
        other => PlanError::plan(format!("rule condition {other} is not a value, list or comparison")),
    }
}

/// The most runs (configurations x replicates) a plan may expand to. At a second a run, the
/// shortest sensible, that is over a day of measuring and about 100 MB of planned runs in the
/// database; anything bigger is a typo or a plan to split, and expanding it would exhaust memory
/// first (2 x 10^9 configurations did, even with --dry-run).
pub const MAX_RUNS: u64 = 100_000;
/// The longest cooldown between runs: room for thermal settling or a drive's garbage
/// collection, and still a sleep a person would wait for.
pub const MAX_COOLDOWN_S: f64 = 3600.0;

/// A TOML error as one line, with the plan's line number and, where the line sets one, the
/// key it is about ("matrix.qd"), since type errors alone do not name it.
fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().replace('\n', "; ");
    let Some(span) = e.span() else { return format!("plan: {msg}") };
    let start = span.start.min(text.len());
    let line_no = text[..start].matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
    let key = line.split_once('=').map(|(k, _)| k.trim().trim_matches('"')).filter(|k| !k.is_empty() && !k.starts_with(['[', '#']));
    let table = text[..start].lines().rev().map(str::trim).find(|l| l.starts_with('[')).map(|h| h.trim_matches(['[', ']']).trim());
    match (key, table) {
        (Some(k), Some(t)) => format!("plan line {line_no}, {t}.{k}: {msg}"),
        (Some(k), None) => format!("plan line {line_no}, {k}: {msg}"),
        _ => format!("plan line {line_no}: {msg}"),
    }
}

/// A sweep plan, parsed once: the plan file's values, and the text they were read from. The
/// text is the plan's identity: stored with its sweep, and hashed ([`Plan::hash`]) to find that
/// sweep again to resume it. An edit (`--numa`, a suite's preconditioning) changes the values and
/// the text together, the text written as iolab always wrote it, so an edited plan's stored
/// sweep is found again too.
#[derive(Clone, Debug)]
pub struct Plan {
    file: PlanFile,
    text: String,
}

impl Plan {
    /// Read a plan's TOML. Errors are one line, with the plan's line number and key.
    pub(crate) fn parse(text: &str) -> Result<Plan, PlanError> {
        let file = toml::from_str(text).map_err(|e| PlanError::Plan(toml_error(text, &e)))?;
        Ok(Plan { file, text: text.to_string() })
    }

    /// The plan's text: what a sweep of it stores, and its identity.
    pub(crate) fn text(&self) -> &str {
        &self.text
    }

    /// The fingerprint of the plan and the command line's targets that finds its sweep.
    pub(crate) fn hash(&self, targets: &[String]) -> String {
        plan_hash(&self.text, targets)
    }

    /// Every run's `options.numa` set to `numa` (`iolab sweep --numa`, `iolab suite run --numa`);
    /// false, and the plan left as it is, when its matrix varies numa. The text is the plan's
    /// TOML written out again with the option in it, as iolab always stored such a plan.
    pub(crate) fn override_numa(&mut self, numa: super::Numa) -> Result<bool, PlanError> {
        if self.file.matrix.lists(dimension("numa").expect("numa is a dimension")) {
            return Ok(false);
        }
        let text = &self.text;
        let mut table: toml::Table = toml::from_str(text).map_err(|e| PlanError::Plan(toml_error(text, &e)))?;
        let options = table.entry("options").or_insert_with(|| toml::Value::Table(Default::default()));
        let toml::Value::Table(options) = options else { return PlanError::plan("plan: options is not a table") };
        options.insert("numa".into(), toml::Value::String(numa.to_string()));
        self.text = toml::to_string(&table).map_err(|e| PlanError::Plan(format!("plan: {e}")))?;
        self.file.options.numa = Some(numa);
        Ok(true)
    }

    /// What preconditioning the targets had, in words (a suite's), kept with the stored plan: a
    /// top-level key written first, as iolab always wrote it. Err: the plan says it already.
    pub(crate) fn set_preconditioned(&mut self, said: &str) -> Result<(), PlanError> {
        if self.file.preconditioned.is_some() {
            return PlanError::plan("plan: preconditioned is written by the suite, and this plan gives it already: leave it out");
        }
        self.text = format!("preconditioned = {}\n{}", toml::Value::String(said.to_string()), self.text);
        self.file.preconditioned = Some(said.to_string());
        Ok(())
    }

    /// The plan expanded into its configurations and their order. `cli_targets`, the command
    /// line's, replace the plan's `targets` and its `[matrix] target`: each is a target or a set
    /// driven together (joined by '+'); one value is every run's, as the plan's `targets`, unless
    /// the matrix lists targets; several are the `target` dimension's values, a configuration
    /// each. Errors are one line.
    pub(crate) fn expand(&self, cli_targets: &[String]) -> Result<Expansion, PlanError> {
        expand_file(&self.file, cli_targets)
    }
}

/// Parse and expand plan text (a plan file's, or a stored sweep's): [`Plan::parse`], then
/// [`Plan::expand`].
pub fn expand(text: &str, cli_targets: &[String]) -> Result<Expansion, PlanError> {
    Plan::parse(text)?.expand(cli_targets)
}

/// [`Plan::expand`] of the parsed plan file, in its steps: the command line's targets, the
/// plan's timing and bounds checked, the job every configuration shares, the configurations the
/// matrix and the rules leave, and their order.
fn expand_file(plan: &PlanFile, cli_targets: &[String]) -> Result<Expansion, PlanError> {
    let (targets, with_targets) = command_line_targets(plan, cli_targets)?;
    let m = with_targets.as_ref().unwrap_or(&plan.matrix);
    let timing = PlanTiming::of(plan)?;
    check_bounds(plan, m)?;
    m.check_sizes()?; // before size and offset: the first error the plan has is the one said
    let size = plan.size.as_deref().map(parse_size).transpose().map_err(|e| PlanError::Plan(format!("plan size: {e}")))?;
    let offset = plan.offset.as_deref().map(parse_size).transpose().map_err(|e| PlanError::Plan(format!("plan offset: {e}")))?.unwrap_or(0);
    let profile = plan
        .profile
        .as_deref()
        .map(Profile::parse)
        .transpose()
        .map_err(|e| PlanError::Plan(format!("plan profile: {e}")))?
        .unwrap_or_default();
    let idle = plan.energy.as_ref().map(|e| e.check()).transpose().map_err(PlanError::Plan)?.unwrap_or_default();
    // A setting no machine takes (no such name, cpu_freq_khz=NaN) refuses the plan before the
    // sweep is stored; what this machine lacks is each run's to find out.
    for spec in &plan.options.set {
        crate::settings::Change::parse(spec, None).map_err(|e| PlanError::Plan(format!("plan options.set: {e}")))?;
    }
    let base = base_job(plan, Targets { paths: targets, size, offset, destructive: plan.destructive.clone() }, &timing);
    let (configs, dropped) = configurations(plan, m, &base)?;
    if configs.is_empty() {
        return Err(all_dropped(&dropped));
    }
    let order = interleaved(plan, configs.len());
    // A time with a count: at most that long; an idle baseline per run adds its seconds.
    let per_run_idle = idle.seconds.filter(|_| idle.when == Some(super::idle::IdleWhen::PerRun)).unwrap_or(0.0);
    let seconds_per_run = timing.budget.seconds().map(|s| per_run_idle + timing.ramp_s + s);
    Ok(Expansion {
        name: plan.name.clone().unwrap_or_else(|| "sweep".into()),
        configs,
        dropped,
        order,
        replicates: plan.replicates,
        cooldown_s: timing.cooldown_s,
        seconds_per_run,
        profile,
        idle,
    })
}

/// Every run's targets, and the matrix with the command line's targets in it where they are
/// several (the matrix's `target` values, in a copy of it): none given, the plan's `targets`;
/// one, every run's (unless the matrix lists targets).
fn command_line_targets(plan: &PlanFile, cli_targets: &[String]) -> Result<(Vec<String>, Option<Matrix>), PlanError> {
    let listed = plan.matrix.lists(dimension("target").expect("target is a dimension"));
    Ok(match cli_targets {
        [] => (plan.targets.clone(), None),
        [one] if !listed => (target_set(one)?, None),
        many => {
            let mut m = plan.matrix.clone();
            m.set_targets(many)?;
            (Vec::new(), Some(m))
        }
    })
}

/// A plan's timing: each run's budget (a time, a count, or whichever of the two comes first)
/// and ramp, and the cooldown between runs.
struct PlanTiming {
    budget: Budget,
    ramp_s: f64,
    cooldown_s: f64,
}

impl PlanTiming {
    fn of(plan: &PlanFile) -> Result<PlanTiming, PlanError> {
        let seconds = |what: &str, v: &Option<String>| {
            v.as_deref().map(parse_seconds).transpose().map_err(|e| PlanError::Plan(format!("plan {what}: {e}")))
        };
        let runtime = seconds("runtime", &plan.runtime)?;
        let bytes = plan.bytes.as_deref().map(parse_size).transpose().map_err(|e| PlanError::Plan(format!("plan bytes: {e}")))?;
        let Some(budget) = Budget::of(runtime, plan.ios, bytes) else {
            return PlanError::plan("plan: give only one of ios and bytes (each with runtime ends a run at whichever comes first)");
        };
        let ramp_s = seconds("ramp", &plan.ramp)?.unwrap_or(0.0);
        let cooldown_s = seconds("cooldown", &plan.cooldown)?.unwrap_or(0.0);
        if cooldown_s > MAX_COOLDOWN_S {
            return PlanError::plan(format!(
                "plan cooldown: {} is longer than the {MAX_COOLDOWN_S} s iolab waits between runs: give at most 1h",
                plan.cooldown.as_deref().unwrap_or("")
            ));
        }
        Ok(PlanTiming { budget, ramp_s, cooldown_s })
    }
}

/// The plan's replicates, name and rules well formed, and its runs and rule checks within
/// bounds, counted before anything is expanded (so a runaway plan costs nothing); a file set's
/// dimension only with a file set.
fn check_bounds(plan: &PlanFile, m: &Matrix) -> Result<(), PlanError> {
    if plan.replicates == 0 {
        return PlanError::plan("plan: replicates must be at least 1");
    }
    if let Some(name) = &plan.name {
        check_name(name)?;
    }
    for r in &plan.rules {
        if r.action != "drop" && r.action != "reject" {
            return PlanError::plan(format!("plan rule action '{}' is not 'drop' or 'reject'", r.action));
        }
        if let Some(k) = r.when.keys().find(|k| dimension(k).is_none()) {
            return PlanError::plan(format!("plan rule names '{k}', which is not a matrix dimension"));
        }
    }
    let matrix = m.configurations();
    let runs = matrix.saturating_mul(plan.replicates as u128);
    if runs > MAX_RUNS as u128 {
        return PlanError::plan(format!("plan: {matrix} configurations x {} replicates = {runs} runs, more than the {MAX_RUNS} a sweep may have (counted before rules drop any): narrow the matrix, fewer replicates, or split the plan", plan.replicates));
    }
    // Every configuration is checked against every rule's every value: bounded, as the runs are
    // (10 000 configurations x 20 000 rules took 17 s of a dry run).
    let checks = matrix.saturating_mul(plan.rules.iter().map(|r| r.when.values().map(condition_values).sum::<u128>().max(1)).sum::<u128>());
    if checks > MAX_RULE_CHECKS {
        return PlanError::plan(format!(
            "plan: {matrix} configurations x {} rules = {checks} rule checks, more than the {MAX_RULE_CHECKS} a plan may need: fewer rules (a list of values in one rule does the work of many), or a narrower matrix",
            plan.rules.len()
        ));
    }
    if let (None, Some(d)) = (&plan.fileset, super::matrix::FILESET_DIMENSIONS.iter().find(|d| m.lists(dimension(d).expect("a dimension"))))
    {
        return PlanError::plan(format!("plan [matrix] {d} is a file set's: add a [fileset] table with files = N"));
    }
    Ok(())
}

/// What every configuration shares: the plan's options, timing and targets; the dimensions the
/// matrix lists are set on it.
fn base_job(plan: &PlanFile, targets: Targets, timing: &PlanTiming) -> Job {
    let o = &plan.options;
    let defaults = Job::default();
    Job {
        io: IoChoice { direct: !o.buffered, options: o.io.clone(), ..defaults.io },
        workload: Workload {
            cpus: o.cpus.clone().unwrap_or_default(),
            numa: o.numa.unwrap_or_default(),
            seed: plan.seed,
            // A file set is read or written whole: reads unless the matrix says otherwise.
            rw: if plan.fileset.is_some() { super::Rw::Read } else { defaults.workload.rw },
            ..defaults.workload
        },
        timing: Timing { ramp_s: timing.ramp_s, budget: timing.budget },
        targets,
        policy: Policy {
            verify: o.verify,
            continue_on_error: o.continue_on_error,
            allow_fallback: o.allow_fallback,
            strict: o.strict,
            verify_fio: o.verify_fio,
        },
        system: Requested { set: o.set.clone(), setup: o.setup.clone(), ..defaults.system },
        fileset: plan.fileset.clone(),
    }
}

/// The matrix's configurations over `base`, each once: those the rules keep and validation
/// passes, and (key, reason) for each one dropped.
#[allow(clippy::type_complexity)]
fn configurations(plan: &PlanFile, m: &Matrix, base: &Job) -> Result<(Vec<PlannedConfig>, Vec<(String, String)>), PlanError> {
    let mut configs = Vec::new();
    let mut dropped = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for mut job in m.jobs(base)? {
        job.workload.batch_reap = plan.options.batch_reap.unwrap_or(job.workload.batch_submit).min(job.workload.qd.max(1));
        let key = m.key(&job);
        // A dimension that does not apply to a job (poll_delay without hybrid polling, write_mix
        // without randrw) leaves it as another value already made it: one configuration.
        if !seen.insert(key.clone()) {
            continue;
        }
        if let Some(reason) = rule_verdict(&plan.rules, &job)? {
            dropped.push((key, reason));
            continue;
        }
        if let Err(reason) = validate(&job) {
            dropped.push((key, reason.to_string()));
            continue;
        }
        configs.push(PlannedConfig { key, job });
    }
    Ok((configs, dropped))
}

/// The error of a plan whose every configuration was dropped: each distinct reason once, with
/// how many it dropped (the first three).
fn all_dropped(dropped: &[(String, String)]) -> PlanError {
    let mut why: Vec<(&str, usize)> = Vec::new();
    for (_, r) in dropped {
        match why.iter_mut().find(|(w, _)| w == r) {
            Some((_, n)) => *n += 1,
            None => why.push((r, 1)),
        }
    }
    let mut why: Vec<String> = why.iter().map(|(w, n)| format!("{n} by: {w}")).collect();
    if why.len() > 3 {
        let more = why.len() - 3;
        why.truncate(3);
        why.push(format!("and {more} other reasons (`iolab sweep --dry-run` lists each)"));
    }
    PlanError::Plan(format!(
        "plan: every configuration was dropped, nothing is left to run ({}): change the matrix or the rules",
        why.join("; ")
    ))
}

/// The runs' order over `configs` configurations: replicates interleaved, each round running
/// every configuration once, in an order seeded by the plan's seed and the round.
fn interleaved(plan: &PlanFile, configs: usize) -> Vec<(u32, usize)> {
    let mut order = Vec::with_capacity(configs * plan.replicates as usize);
    for r in 0..plan.replicates {
        let mut idx: Vec<usize> = (0..configs).collect();
        let mut rng = Rng::for_thread(plan.seed, r);
        for i in (1..idx.len()).rev() {
            idx.swap(i, rng.below(i as u64 + 1) as usize);
        }
        order.extend(idx.into_iter().map(|i| (r, i)));
    }
    order
}

/// The most rule checks (configurations x the values the rules compare) a plan may need: about a
/// second of expanding.
pub const MAX_RULE_CHECKS: u128 = 10_000_000;
/// The longest plan name: it heads reports and stored sweeps.
pub const MAX_NAME_CHARS: usize = 200;

/// How many values a rule's condition compares (a list's items, each counted).
fn condition_values(cond: &toml::Value) -> u128 {
    match cond {
        toml::Value::Array(items) => items.iter().map(condition_values).sum::<u128>().max(1),
        _ => 1,
    }
}

/// Characters that reorder or hide text where the name is shown (U+202E turned a report's
/// provenance line around): the bidirectional controls and marks.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// A plan's name is one printable line of at most [`MAX_NAME_CHARS`] characters.
fn check_name(name: &str) -> Result<(), PlanError> {
    let n = name.chars().count();
    if n > MAX_NAME_CHARS {
        return PlanError::plan(format!("plan name is {n} characters long, more than the {MAX_NAME_CHARS} a name may have: give a shorter name (the description can say more)"));
    }
    if let Some(c) = name.chars().find(|&c| c.is_control() || is_bidi_control(c)) {
        return PlanError::plan(format!(
            "plan name holds the control character U+{:04X}: a name is one line of printable text (no newline, NUL or bidirectional control)",
            c as u32
        ));
    }
    if name.trim().is_empty() {
        return PlanError::plan("plan name is empty: give it a name, or leave name out (\"sweep\")");
    }
    Ok(())
}

/// Some(reason) when a drop rule matches; Err when a reject rule does.
fn rule_verdict(rules: &[Rule], job: &Job) -> Result<Option<String>, PlanError> {
    for r in rules {
        let mut all = true;
        for (k, cond) in &r.when {
            if !matches(cond, &value_of(job, k).unwrap())? {
                all = false;
                break;
            }
        }
        if all {
            if r.action == "reject" {
                return PlanError::plan(format!("plan rejected: {} ({})", r.reason, Matrix::default().key(job)));
            }
            return Ok(Some(r.reason.clone()));
        }
    }
    Ok(None)
}

/// A stable fingerprint of the plan text and targets, to find the sweep to resume.
pub fn plan_hash(text: &str, targets: &[String]) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in text.bytes().chain(targets.join("\0").bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Numa;

    const PLAN: &str = r#"
name = "t"
replicates = 3
seed = 7
ramp = "1s"
runtime = "2s"
cooldown = "1s"
targets = ["/tmp/x"]
[matrix]
interface = ["psync", "io_uring"]
complete = ["irq", "poll"]
bs = ["4k", 16384]
qd = [1, 8]
[[rule]]
when = { interface = "io_uring", qd = "<2" }
action = "drop"
reason = "io_uring at QD1 is covered elsewhere"
"#;

    #[test]
    fn expands_matrix_with_validation_and_rules() {
        let e = expand(PLAN, &[]).unwrap();
        // psync: irq only, qd 1 only -> 2 bs = 2 configs. io_uring: 2 complete x 2 bs x qd 8 = 4.
        assert_eq!(e.configs.len(), 6, "{:?}", e.configs.iter().map(|c| &c.key).collect::<Vec<_>>());
        let reasons: Vec<&str> = e.dropped.iter().map(|d| d.1.as_str()).collect();
        assert!(reasons.iter().any(|r| r.contains("--threads")), "psync qd 8 dropped with the reason: {reasons:?}");
        assert!(reasons.iter().any(|r| r.contains("cannot complete by poll")));
        assert!(reasons.contains(&"io_uring at QD1 is covered elsewhere"));
        assert_eq!(e.order.len(), 18);
        assert_eq!(e.estimate_s(18), Some(18.0 * (3.0 + 1.0 + 1.0)));
        let j = &e.configs[0].job;
        assert_eq!((j.timing.ramp_s, j.timing.budget, j.targets.paths.clone()), (1.0, Budget::Seconds(2.0), vec!["/tmp/x".to_string()]));
    }

    /// A plan's runtime beside its ios or bytes ends each run at whichever comes first, and the
    /// sweep's estimate takes the time as each run's longest.
    #[test]
    fn a_plans_runtime_with_a_count_is_whichever_comes_first() {
        let e = expand("runtime = \"2s\"\nbytes = \"1m\"\n[matrix]\ninterface = [\"null\"]\n", &[]).unwrap();
        assert_eq!(e.configs[0].job.timing.budget, Budget::SecondsOrBytes { seconds: 2.0, bytes: 1 << 20 });
        assert_eq!(e.seconds_per_run, Some(2.0));
        let e = expand("runtime = \"2s\"\nios = 5\n[matrix]\ninterface = [\"null\"]\n", &[]).unwrap();
        assert_eq!(e.configs[0].job.timing.budget, Budget::SecondsOrIos { seconds: 2.0, ios: 5 });
        let e = expand("ios = 5\nbytes = \"1m\"\n", &[]).unwrap_err().to_string();
        assert!(e.contains("give only one of ios and bytes"), "{e}");
    }

    /// The energy knobs vary as `[matrix]` dimensions: each value a `set` entry of its
    /// configuration, over the plan's `options.set` entry of the same setting; a value no machine
    /// takes refuses the plan (options) or drops its configuration with the reason (matrix).
    #[test]
    fn energy_knobs_are_matrix_dimensions_over_options_set() {
        let plan = "ios = 5\ntargets = [\"/tmp/x\"]\n[matrix]\ncpu_freq_khz = [\"1200000\", \"800000-3000000\"]\ncpuidle_max_state = [0, 9000]\nnvme_apst = [\"off\"]\n[options]\nset = [\"governor=performance\", \"cpu_freq_khz=2000000\"]\n";
        let e = expand(plan, &[]).unwrap();
        let keys: Vec<&str> = e.configs.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys.len(), 2, "cpuidle_max_state 9000 dropped: {keys:?} {:?}", e.dropped);
        assert!(keys[0].ends_with(",cpu_freq_khz=1200000,cpuidle_max_state=0,nvme_apst=off"), "{keys:?}");
        assert_eq!(
            e.configs[1].job.system.set,
            ["governor=performance", "cpu_freq_khz=800000-3000000", "cpuidle_max_state=0", "nvme_apst=off"]
        );
        assert!(e.dropped.iter().all(|(_, why)| why.contains("cpuidle_max_state must be")), "{:?}", e.dropped);
        let e = expand("ios = 5\n[options]\nset = [\"cpu_freq_khz=NaN\"]\n", &[]).unwrap_err().to_string();
        assert!(e.starts_with("plan options.set: cpu_freq_khz must be a frequency in kHz"), "{e}");
    }

    #[test]
    fn replicates_are_interleaved_in_a_seeded_order() {
        let e = expand(PLAN, &[]).unwrap();
        let n = e.configs.len();
        for round in 0..3 {
            let mut seen: Vec<usize> = e.order[round * n..(round + 1) * n]
                .iter()
                .map(|(r, i)| {
                    assert_eq!(*r as usize, round);
                    *i
                })
                .collect();
            seen.sort();
            assert_eq!(seen, (0..n).collect::<Vec<_>>(), "each round runs every configuration once");
        }
        assert_eq!(expand(PLAN, &[]).unwrap().order, e.order, "same seed, same order");
        let other = expand(&PLAN.replace("seed = 7", "seed = 8"), &[]).unwrap();
        assert_ne!(other.order, e.order);
        let first_round: Vec<usize> = e.order[..n].iter().map(|x| x.1).collect();
        assert_ne!(first_round, (0..n).collect::<Vec<_>>(), "shuffled, not matrix order");
    }

    #[test]
    fn keys_name_the_varying_dimensions() {
        let e = expand(PLAN, &[]).unwrap();
        let keys: Vec<&str> = e.configs.iter().map(|c| c.key.as_str()).collect();
        assert!(keys.contains(&"interface=io_uring,submit=syscall,complete=poll,rw=randread,bs=16384,qd=8,threads=1"), "{keys:?}");
        let mut uniq = keys.clone();
        uniq.dedup();
        assert_eq!(uniq.len(), keys.len());
    }

    #[test]
    fn reject_rules_and_bad_plans_fail_with_one_line() {
        let rej = PLAN.replace("action = \"drop\"", "action = \"reject\"");
        assert!(expand(&rej, &[]).unwrap_err().to_string().starts_with("plan rejected: io_uring at QD1"));
        for bad in [
            "replicates = 0",
            "[matrix]\nqd = [\"x\"]",
            "bytes = \"1m\"\nios = 5",
            "colour = 1",
            "[[rule]]\nwhen = { color = 1 }\naction = \"drop\"\nreason = \"x\"",
            "name = \"x\nios = 5",
        ] {
            let e = expand(bad, &[]).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
        }
    }

    /// An empty axis, a name that is not one printable line, and more rule checks than a plan
    /// may need are each one line (`qd = []` ran QD 1; U+202E reversed the report's provenance;
    /// 10 000 configurations x 20 000 rules took 17 s of a dry run).
    #[test]
    fn empty_axes_bad_names_and_runaway_rules_are_refused() {
        let e = expand("ios = 5\n[matrix]\nqd = []\n", &[]).unwrap_err().to_string();
        assert!(e.starts_with("plan line 3, matrix.qd: ") && e.contains("qd = [] lists no value"), "{e}");
        let e = expand("ios = 5\n[matrix]\nqd = [1]\ninterface = []\n", &[]).unwrap_err().to_string();
        assert!(e.contains("interface = [] lists no value"), "{e}");
        for name in ["a\\u0000b", "evil\\u202Egnp.exe", "two\\nlines", "tab\\there", "\\u2066x", "   "] {
            let e = expand(&format!("name = \"{name}\"\nios = 5\n"), &[]).unwrap_err().to_string();
            assert!(e.starts_with("plan name ") && !e.contains('\n'), "{name}: {e}");
        }
        let long = "n".repeat(100_000);
        let e = expand(&format!("name = \"{long}\"\nios = 5\n"), &[]).unwrap_err().to_string();
        assert!(e.contains("100000 characters") && e.len() < 300, "{}", &e[..e.len().min(300)]);
        assert_eq!(
            expand(&format!("name = \"{}\"\nios = 5\n", "é".repeat(MAX_NAME_CHARS)), &[]).unwrap().name.chars().count(),
            MAX_NAME_CHARS
        );
        // 10 000 configurations and 2 000 rules: refused before any is checked.
        let qd: Vec<String> = (1..=100).map(|q| q.to_string()).collect();
        let mut plan = format!("ios = 5\n[matrix]\ninterface = [\"null\"]\nqd = [{}]\nthreads = [{}]\n", qd.join(","), qd.join(","));
        for i in 0..2_000 {
            plan.push_str(&format!("[[rule]]\nwhen = {{ qd = {} }}\naction = \"drop\"\nreason = \"r{i}\"\n", 100_000 + i));
        }
        let t = std::time::Instant::now();
        let e = expand(&plan, &[]).unwrap_err().to_string();
        assert!(e.starts_with("plan: 10000 configurations x 2000 rules = 20000000 rule checks"), "{e}");
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "refused only after {:?}", t.elapsed());
    }

    #[test]
    fn toml_errors_give_the_line_and_the_key() {
        let e = expand("ios = 5\n[matrix]\nqd = [\"x\"]\n", &[]).unwrap_err().to_string();
        assert!(e.starts_with("plan line 3, matrix.qd: ") && e.contains("expected u32"), "{e}");
        let e = expand("ios = \"5\"\n", &[]).unwrap_err().to_string();
        assert!(e.starts_with("plan line 1, ios: "), "{e}");
        let e = expand("name = \"x\nios = 5\n", &[]).unwrap_err().to_string();
        assert!(e.starts_with("plan line 1"), "{e}");
    }

    /// The `[matrix]` table's errors, word for word: the line, the key and serde's message.
    #[test]
    fn matrix_errors_name_the_line_and_key() {
        for (plan, want) in [
            ("[matrix]\ncolor = [1]\n", "plan line 2, matrix.color: unknown field `color`, expected one of `interface`, `submit`, `complete`, `poll_delay`, `rw`, `write_mix`, `bs`, `bssplit`, `distribution`, `stride`, `ios_per_offset`, `blockalign`, `zones`, `random_generator`, `pace`, `qd`, `threads`, `batch`, `target`, `scheduler`, `numa`, `cpu_freq_khz`, `cpuidle_max_state`, `nvme_power_state`, `nvme_apst`, `iowait`, `file_size`, `file_order`, `fsync`, `server`"),
            ("ios = 5\n[matrix]\nqd = [\n  1,\n  \"x\",\n]\n", "plan line 5: invalid type: string \"x\", expected u32"),
            ("[matrix]\nsubmit = [\"sideways\"]\n", "plan line 2, matrix.submit: unknown variant `sideways`, expected `syscall` or `sqpoll`"),
            (
                "[matrix]\ninterface = [\"nope\"]\n",
                "plan line 2, matrix.interface: unknown interface 'nope': choose one of psync, pvsync2, posixaio, libaio, io_uring, nvme-passthru, vfio-nvme, null (see `iolab interfaces`)",
            ),
            ("[matrix]\nwrite_mix = [300]\n", "plan line 2, matrix.write_mix: invalid value: integer `300`, expected u8"),
            ("[matrix]\nbs = [true]\n", "plan line 2, matrix.bs: data did not match any variant of untagged enum SizeValue"),
            ("[matrix]\nqd = 4\n", "plan line 2, matrix.qd: invalid type: integer `4`, expected a sequence"),
            ("ios = 5\n[matrix]\nbs = [\"4q\"]\n", "plan bs: '4q' has an unknown suffix 'q': use k, m, g or t (binary multiples)"),
            ("matrix = { qd = [\"x\"] }\n", "plan line 1, matrix: invalid type: string \"x\", expected u32"),
        ] {
            assert_eq!(expand(plan, &[]).unwrap_err().to_string(), want);
        }
    }

    #[test]
    fn runaway_plans_are_refused_before_expanding() {
        // 4294967295 replicates, and about 2 x 10^9 configurations: refused at once, in one line.
        let e = expand("ios = 5\nreplicates = 4294967295\n", &[]).unwrap_err().to_string();
        assert!(e.contains("4294967295 runs, more than the 100000"), "{e}");
        let values = |n: u32| (1..=n).map(|v| v.to_string()).collect::<Vec<_>>().join(", ");
        let big = format!(
            "ios = 5\n[matrix]\nqd = [{}]\nthreads = [{}]\nbatch = [{}]\nwrite_mix = [{}]\n",
            values(1024),
            values(1000),
            values(100),
            values(20)
        );
        let t = std::time::Instant::now();
        let e = expand(&big, &[]).unwrap_err().to_string();
        assert!(e.contains("2048000000 configurations"), "{e}");
        assert!(t.elapsed().as_secs() < 5, "refused only after {:?}", t.elapsed());
        assert!(expand("ios = 5\ncooldown = \"100000h\"\n", &[]).unwrap_err().to_string().starts_with("plan cooldown: 100000h is longer"));
        assert!(expand("ios = 5\ncooldown = \"1h\"\n", &[]).is_ok());
    }

    #[test]
    fn every_configuration_dropped_says_why() {
        let e = expand("ios = 5\n[matrix]\ninterface = [\"psync\"]\nqd = [2, 4]\n", &[]).unwrap_err().to_string();
        assert!(e.contains("1 by: psync is synchronous") && e.contains("--qd 4 makes no sense"), "{e}");
    }

    /// Every dimension with two values, options, and rules over several dimensions.
    const WIDE: &str = r#"
name = "wide"
replicates = 2
seed = 3
ios = 100
targets = ["/tmp/p"]
[matrix]
interface = ["psync", "io_uring"]
submit = ["syscall", "sqpoll"]
complete = ["irq", "poll"]
rw = ["randread", "randrw"]
write_mix = [30, 70]
bs = ["4k", 8192]
qd = [1, 4]
threads = [1, 2]
batch = [1, 2]
target = ["/tmp/a", "/tmp/b"]
scheduler = ["none", "mq-deadline"]
[options]
cpus = [0]
batch_reap = 4
[[rule]]
when = { interface = "io_uring", rw = "randrw", write_mix = ">50" }
action = "drop"
reason = "mostly writes"
[[rule]]
when = { bs = "<=4k", qd = 4, scheduler = "!=none", target = ["/tmp/b"], batch = 2 }
action = "drop"
reason = "small blocks on b"
"#;

    /// The expansion as a sweep stores it: each run in order with its replicate, key and job
    /// (JSON), then each dropped configuration with its reason.
    fn stored_plan(e: &Expansion) -> String {
        let mut out = String::new();
        for (n, (rep, i)) in e.order.iter().enumerate() {
            let c = &e.configs[*i];
            // The job as a JSON value: keys sorted, so the pin holds what is stored, not its order.
            out += &format!("{n} {rep} {} {}\n", c.key, serde_json::to_value(&c.job).unwrap());
        }
        for (key, why) in &e.dropped {
            out += &format!("dropped {key}: {why}\n");
        }
        out
    }

    /// Pins the order of the configurations, their keys and the stored plan of a small plan
    /// and of one over every dimension, as they were before the dimensions became one table.
    #[test]
    fn expansion_order_keys_and_stored_plan_are_pinned() {
        let e = expand(PLAN, &[]).unwrap();
        let keys: Vec<&str> = e.configs.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "interface=psync,submit=syscall,complete=irq,rw=randread,bs=4096,qd=1,threads=1",
                "interface=psync,submit=syscall,complete=irq,rw=randread,bs=16384,qd=1,threads=1",
                "interface=io_uring,submit=syscall,complete=irq,rw=randread,bs=4096,qd=8,threads=1",
                "interface=io_uring,submit=syscall,complete=irq,rw=randread,bs=16384,qd=8,threads=1",
                "interface=io_uring,submit=syscall,complete=poll,rw=randread,bs=4096,qd=8,threads=1",
                "interface=io_uring,submit=syscall,complete=poll,rw=randread,bs=16384,qd=8,threads=1",
            ]
        );
        assert_eq!(
            e.order,
            [
                (0, 4),
                (0, 1),
                (0, 0),
                (0, 3),
                (0, 2),
                (0, 5),
                (1, 0),
                (1, 1),
                (1, 2),
                (1, 3),
                (1, 5),
                (1, 4),
                (2, 2),
                (2, 0),
                (2, 5),
                (2, 1),
                (2, 4),
                (2, 3),
            ]
        );
        let dropped: Vec<&str> = e.dropped.iter().map(|d| d.0.as_str()).collect();
        assert_eq!(
            dropped,
            [
                "interface=psync,submit=syscall,complete=irq,rw=randread,bs=4096,qd=8,threads=1",
                "interface=psync,submit=syscall,complete=irq,rw=randread,bs=16384,qd=8,threads=1",
                "interface=psync,submit=syscall,complete=poll,rw=randread,bs=4096,qd=1,threads=1",
                "interface=psync,submit=syscall,complete=poll,rw=randread,bs=4096,qd=8,threads=1",
                "interface=psync,submit=syscall,complete=poll,rw=randread,bs=16384,qd=1,threads=1",
                "interface=psync,submit=syscall,complete=poll,rw=randread,bs=16384,qd=8,threads=1",
                "interface=io_uring,submit=syscall,complete=irq,rw=randread,bs=4096,qd=1,threads=1",
                "interface=io_uring,submit=syscall,complete=irq,rw=randread,bs=16384,qd=1,threads=1",
                "interface=io_uring,submit=syscall,complete=poll,rw=randread,bs=4096,qd=1,threads=1",
                "interface=io_uring,submit=syscall,complete=poll,rw=randread,bs=16384,qd=1,threads=1",
            ]
        );
        assert_eq!(plan_hash(&stored_plan(&e), &[]), "f088bc1230bfd917", "{}", stored_plan(&e));

        // Every dimension listed: the matrix order is interface outermost, scheduler innermost.
        let w = expand(WIDE, &[]).unwrap();
        // rw=randread takes no write_mix: its two write_mix values are one configuration.
        assert_eq!((w.configs.len(), w.dropped.len(), w.order.len()), (416, 1120, 832));
        let keys: Vec<&str> = w.configs.iter().take(3).chain(w.configs.last()).map(|c| c.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "interface=psync,submit=syscall,complete=irq,rw=randread,bs=4096,qd=1,threads=1,batch=1,target=/tmp/a,scheduler=none",
                "interface=psync,submit=syscall,complete=irq,rw=randread,bs=4096,qd=1,threads=1,batch=1,target=/tmp/a,scheduler=mq-deadline",
                "interface=psync,submit=syscall,complete=irq,rw=randread,bs=4096,qd=1,threads=1,batch=1,target=/tmp/b,scheduler=none",
                "interface=io_uring,submit=sqpoll,complete=poll,rw=randrw,write_mix=30,bs=8192,qd=4,threads=2,batch=2,target=/tmp/b,scheduler=mq-deadline",
            ]
        );
        assert_eq!(
            w.dropped[0],
            (
                "interface=psync,submit=syscall,complete=irq,rw=randread,bs=4096,qd=1,threads=1,batch=2,target=/tmp/a,scheduler=none"
                    .to_string(),
                "--batch-submit and --batch-reap must be between 1 and --qd (1)".to_string()
            )
        );
        assert_eq!(
            serde_json::to_value(&w.configs[w.order[0].1].job).unwrap(),
            serde_json::from_str::<serde_json::Value>(r#"{"interface":"io_uring","submit":"syscall","complete":"irq","rw":"randrw","write_mix":30,"bs":4096,"qd":1,"threads":1,"batch_submit":1,"batch_reap":1,"ramp_s":0.0,"budget":{"kind":"ios","value":100},"size":null,"offset":0,"direct":true,"cpus":[0],"seed":3,"targets":["/tmp/b"],"sq_cpu":null,"sq_idle_ms":1000,"register_buffers":true,"register_files":true,"force_async":false,"verify":false,"continue_on_error":false,"allow_fallback":false,"strict":false,"destructive":[],"scheduler":"mq-deadline","set":[]}"#).unwrap()
        );
        assert_eq!(plan_hash(&stored_plan(&w), &[]), "bf27bcd7986d8453");
        let rej = WIDE.replacen("action = \"drop\"", "action = \"reject\"", 1);
        assert_eq!(
            expand(&rej, &[]).unwrap_err().to_string(),
            "plan rejected: mostly writes (interface=io_uring,submit=syscall,complete=irq,rw=randrw,write_mix=70,bs=4096,qd=1,threads=1)"
        );

        // Without batch, target and scheduler: the command line's set of targets, driven
        // together in every run, keys without them.
        let narrow = WIDE
            .replace("batch = [1, 2]\n", "")
            .replace("target = [\"/tmp/a\", \"/tmp/b\"]\n", "")
            .replace("scheduler = [\"none\", \"mq-deadline\"]\n", "");
        let n = expand(&narrow, &["/tmp/cli+/tmp/cli2".to_string()]).unwrap();
        assert_eq!((n.configs.len(), n.dropped.len(), n.order.len()), (76, 116, 152));
        assert_eq!(n.configs[0].job.targets.paths, ["/tmp/cli", "/tmp/cli2"]);
        assert_eq!(
            n.configs.last().unwrap().key,
            "interface=io_uring,submit=sqpoll,complete=poll,rw=randrw,write_mix=30,bs=8192,qd=4,threads=2"
        );
        assert_eq!(plan_hash(&stored_plan(&n), &[]), "13010f0253f38b9b");
    }

    #[test]
    fn numa_from_options_the_matrix_or_the_command_line() {
        let e = expand("ios = 5\n[options]\nnuma = \"local\"\n", &[]).unwrap();
        assert_eq!(e.configs[0].job.workload.numa, Numa::Local);
        let e = expand("ios = 5\n[matrix]\nnuma = [\"local\", \"off\", 0]\n", &[]).unwrap();
        let keys: Vec<&str> = e.configs.iter().map(|c| c.key.rsplit(',').next().unwrap()).collect();
        assert_eq!(keys, ["numa=local", "numa=off", "numa=0"]);
        let with_numa = |text: &str, numa| {
            let mut plan = Plan::parse(text).unwrap();
            plan.override_numa(numa).map(|applied| applied.then_some(plan))
        };
        let over = with_numa("ios = 5\n[options]\ncpus = [0]\n", Numa::Node(0)).unwrap().unwrap();
        assert_eq!(over.expand(&[]).unwrap_err().to_string(), "plan: every configuration was dropped, nothing is left to run (1 by: --numa 0 chooses the CPUs itself: give --numa or --cpus/--sq-cpu, not both): change the matrix or the rules");
        let over = with_numa("ios = 5\n", Numa::Local).unwrap().unwrap();
        assert_eq!(over.expand(&[]).unwrap().configs[0].job.workload.numa, Numa::Local);
        assert!(matches!(with_numa("ios = 5\n[matrix]\nnuma = [\"off\"]\n", Numa::Local), Ok(None)), "the matrix varies it");
        assert!(expand("ios = 5\n[options]\nnuma = \"near\"\n", &[]).unwrap_err().to_string().contains("is not a NUMA node"));
    }

    #[test]
    fn cli_targets_override_plan_targets_and_hash_changes() {
        let e = expand(PLAN, &["/dev/zram0".to_string()]).unwrap();
        assert_eq!(e.configs[0].job.targets.paths, vec!["/dev/zram0"]);
        assert_ne!(plan_hash(PLAN, &[]), plan_hash(PLAN, &["/dev/zram0".into()]));
    }

    /// A set of targets is written with '+', in the matrix and on the command line; several
    /// command-line targets are the target dimension's values, replacing the matrix's list.
    #[test]
    fn targets_and_sets_of_targets_are_a_dimension() {
        let plan = "ios = 5\ntargets = [\"/tmp/p\"]\n[matrix]\ntarget = [\"/tmp/a\", \"/tmp/a+/tmp/b\"]\nqd = [1]\n";
        let e = expand(plan, &[]).unwrap();
        let got: Vec<(&str, Vec<String>)> = e.configs.iter().map(|c| (c.key.as_str(), c.job.targets.paths.clone())).collect();
        assert_eq!(
            got,
            [
                (
                    "interface=psync,submit=syscall,complete=irq,rw=randread,bs=4096,qd=1,threads=1,target=/tmp/a",
                    vec!["/tmp/a".to_string()]
                ),
                (
                    "interface=psync,submit=syscall,complete=irq,rw=randread,bs=4096,qd=1,threads=1,target=/tmp/a+/tmp/b",
                    vec!["/tmp/a".to_string(), "/tmp/b".to_string()]
                ),
            ]
        );
        let cli = |t: &[&str]| expand(plan, &t.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let one = cli(&["/tmp/x"]).unwrap();
        assert_eq!(one.configs.len(), 1, "the command line's target replaces the matrix's list");
        assert!(one.configs[0].key.ends_with(",target=/tmp/x"));
        let two = cli(&["/tmp/x", "/tmp/x+/tmp/y"]).unwrap();
        assert_eq!(two.configs.iter().map(|c| c.job.targets.paths.len()).collect::<Vec<_>>(), [1, 2]);
        let plain = expand("ios = 5\n", &["/tmp/x+/tmp/y".to_string()]).unwrap();
        assert_eq!((plain.configs.len(), plain.configs[0].job.targets.paths.len()), (1, 2), "one set: every run's, no dimension");
        assert!(!plain.configs[0].key.contains("target"));
        assert_eq!(
            cli(&["/tmp/x", "/tmp/x++/tmp/y"]).unwrap_err().to_string(),
            "target '/tmp/x++/tmp/y' has an empty name: give a file or device, or several driven together joined by '+' (/dev/nvme0n1+/dev/nvme1n1)"
        );
        assert_eq!(
            cli(&["/tmp/x+/tmp/x"]).unwrap_err().to_string(),
            "target '/tmp/x+/tmp/x' names /tmp/x twice: name each device of a set once"
        );
        let bad = expand("[matrix]\ntarget = [\"+/tmp/a\"]\n", &[]).unwrap_err().to_string();
        assert!(bad.starts_with("plan line 2, matrix.target: target '+/tmp/a' has an empty name"), "{bad}");
        // The targets are part of the plan's identity: a sweep over other devices is another sweep.
        assert_ne!(plan_hash(plan, &[]), plan_hash(&plan.replace("/tmp/a+", "/tmp/c+"), &[]));
    }

    /// The interfaces' `[options]` keys are read by their options parts, typed where they stand:
    /// the same keys, values and one-line errors as when the plan named them itself.
    #[test]
    fn interface_options_in_a_plan_are_read_by_their_parts() {
        let e = expand("ios = 5\n[options]\nsq_idle_ms = 50\nregister_buffers = false\nforce_async = true\nverify = true\n[matrix]\ninterface = [\"io_uring\"]\n", &[]).unwrap();
        let job = &e.configs[0].job;
        let r = &job.io.options.ring;
        assert_eq!((r.sq_idle_ms, r.register_buffers, r.register_files, r.force_async, job.policy.verify), (50, false, true, true, true));
        let e = expand("ios = 5\n[options]\nsq_idle_ms = \"x\"\n", &[]).unwrap_err().to_string();
        assert!(e.starts_with("plan line 3, options.sq_idle_ms: invalid type: string \"x\""), "{e}");
        let e = expand("ios = 5\n[options]\ncolor = 1\n", &[]).unwrap_err().to_string();
        assert!(
            e.contains("unknown field `color`, expected one of `buffered`")
                && e.ends_with("`sq_cpu`, `sq_idle_ms`, `register_buffers`, `register_files`, `force_async`, `iowait`, `mem_policy`, `ioprio`, `cmdprio`, `steadystate`"),
            "{e}"
        );
        assert!(expand("ios = 5\n[options]\nsq_cpu = 0\n", &[])
            .unwrap_err()
            .to_string()
            .contains("--sq-cpu only applies with --submit sqpoll"));
        let hybrid = expand("ios = 5\n[matrix]\ninterface = [\"pvsync2\"]\ncomplete = [\"hybrid\"]\npoll_delay = [-1, 8]\n", &[]).unwrap();
        let delays: Vec<Option<i64>> = hybrid.configs.iter().map(|c| c.job.io.options.block_poll.poll_delay).collect();
        assert_eq!(delays, [Some(-1), Some(8)]);
    }

    /// A plan's refusal is typed: bad input, exit 2, with the message it always had.
    #[test]
    fn plan_errors_are_bad_input() {
        let e = expand("ios = 5\nreplicates = 0\n", &[]).unwrap_err();
        assert_eq!(e, PlanError::Plan("plan: replicates must be at least 1".into()));
        assert_eq!(crate::failure::Kinded::kind(&e), crate::failure::FailureKind::Invalid);
        let f = crate::failure::Failure::from(e);
        assert_eq!((f.code(), f.message.as_str()), (2, "plan: replicates must be at least 1"));
        assert!(matches!(parse_size("4q"), Err(PlanError::Value(_))));
        assert!(matches!("near".parse::<Numa>(), Err(PlanError::Value(_))));
        let job = Job { workload: Workload { qd: 0, ..Job::default().workload }, ..Job::default() };
        assert_eq!(validate(&job), Err(PlanError::Job("--qd 0 is out of range: use 1 to 1024".into())));
    }

    /// The plan as `iolab sweep --numa 1` stored it before plans were parsed once (written out by
    /// `toml::to_string` of the plan's table, `options.numa` added): pinned, byte for byte.
    const PLAN_NUMA_1: &str = r#"cooldown = "1s"
name = "t"
ramp = "1s"
replicates = 3
runtime = "2s"
seed = 7
targets = ["/tmp/x"]

[matrix]
bs = ["4k", 16384]
complete = ["irq", "poll"]
interface = ["psync", "io_uring"]
qd = [1, 8]

[options]
numa = "1"

[[rule]]
action = "drop"
reason = "io_uring at QD1 is covered elsewhere"

[rule.when]
interface = "io_uring"
qd = "<2"
"#;

    /// A plan parsed once and edited as a value: its text and hash are those iolab stored for
    /// the same plan and edits before (computed then with the text functions, pinned here), and
    /// its expansion is that of its text parsed again, so a stored sweep is found, resumed and
    /// expanded the same.
    #[test]
    fn a_plan_edited_as_a_value_keeps_the_stored_text_and_hash() {
        // Whether a configuration runs here depends on the machine (NUMA node 1 may not exist):
        // the same either way.
        let same_as_its_text = |p: &Plan, targets: &[String]| match (p.expand(targets), Plan::parse(p.text()).unwrap().expand(targets)) {
            (Ok(a), Ok(b)) => {
                assert_eq!(stored_plan(&a), stored_plan(&b), "{}", p.text());
                assert_eq!(
                    (a.name, a.replicates, a.cooldown_s, a.seconds_per_run, a.profile),
                    (b.name, b.replicates, b.cooldown_s, b.seconds_per_run, b.profile)
                );
            }
            (a, b) => assert_eq!(a.err(), b.err(), "{}", p.text()),
        };
        let plain = Plan::parse(PLAN).unwrap();
        assert_eq!((plain.text(), plain.hash(&[])), (PLAN, plan_hash(PLAN, &[])));
        assert_eq!(stored_plan(&plain.expand(&[]).unwrap()), stored_plan(&expand(PLAN, &[]).unwrap()));

        let mut numa = plain.clone();
        assert_eq!(numa.override_numa(Numa::Node(1)), Ok(true));
        assert_eq!(numa.text(), PLAN_NUMA_1);
        assert_eq!(numa.hash(&[]), "76dd1a9ee919e5b5");
        assert_eq!(numa.file.options.numa, Some(Numa::Node(1)));
        same_as_its_text(&numa, &[]);

        // A suite's words go first, as a top-level key.
        let mut pre = plain.clone();
        pre.set_preconditioned("done: 3 sequential fills of /dev/a").unwrap();
        assert_eq!(pre.text(), format!("preconditioned = \"done: 3 sequential fills of /dev/a\"\n{PLAN}"));
        assert_eq!(pre.hash(&[]), "e4ecf9f6b79c2c9c");
        same_as_its_text(&pre, &[]);
        assert!(pre.set_preconditioned("again").unwrap_err().to_string().contains("preconditioned"), "written once");

        // Both, as a suite run with --numa does: numa first, then the words.
        let mut both =
            Plan::parse("ios = 5\n[options]\ncpus = [0]\nsq_idle_ms = 50\n[matrix]\ninterface = [\"io_uring\"]\nqd = [1, 4]\n").unwrap();
        assert_eq!(both.override_numa(Numa::Local), Ok(true));
        both.set_preconditioned("not done: \"x\" said").unwrap();
        assert_eq!(both.text(), "preconditioned = 'not done: \"x\" said'\nios = 5\n\n[matrix]\ninterface = [\"io_uring\"]\nqd = [1, 4]\n\n[options]\ncpus = [0]\nnuma = \"local\"\nsq_idle_ms = 50\n");
        assert_eq!((both.hash(&[]), both.hash(&["/dev/a".into()])), ("715b1a33d5f38a65".into(), "29c27b317b62092d".into()));
        same_as_its_text(&both, &["/dev/a".into()]);

        // A plan that varies numa is left as it was.
        let varies = "name = \"d\"\nios = 5\n[matrix]\nnuma = [\"off\", 0]\n";
        let mut v = Plan::parse(varies).unwrap();
        assert_eq!(v.override_numa(Numa::Local), Ok(false));
        assert_eq!(v.text(), varies);

        // Bad text is refused when it is parsed, with the error expanding it gave.
        for bad in ["ios = 5\nreplicates = 0\n", "ios = \"5\"\n", "[matrix]\ncolor = [1]\n"] {
            let e = Plan::parse(bad).and_then(|p| p.expand(&[])).unwrap_err();
            assert_eq!(e, expand(bad, &[]).unwrap_err(), "{bad}");
        }
    }
}
