//! Running a stored sweep: a plan expanded into ordered runs, kept in the results database, each
//! run through [`execute`] and its outcome stored by its [`FailureKind`]: a record (measured,
//! also when it failed), a skip (this machine cannot do it), a failure before measuring. A sweep
//! stops at once when settings are left changed (no run may go on such a machine), at bad input
//! (every later run would meet it) and at Ctrl-C; what was finished stays, and `Resume` picks up
//! what is left. What the caller shows comes through [`SweepUi`]; nothing here prints.
use super::{execute, Failure, FailureKind, Measure, RunError, RunUi};
use crate::device::DeviceError;
use crate::energy::record::{measure_idle, EnergyOptions, IdleBaseline, IdleTaken};
use crate::plan::sweep::Expansion;
use crate::plan::{Job, Numa, Plan, PlanError};
use crate::record::{RunRecord, RunStatus};
use crate::store::{PlannedRun, PlannedStatus, Store, StoreError};
use std::path::Path;
use std::time::{Duration, Instant};

/// What to do about an earlier sweep of the same plan.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Resume {
    /// --resume: continue it; error if there is none.
    Required,
    /// Refuse to start while one is unfinished.
    Refuse,
    /// --new: start another.
    New,
    /// Suites: continue an unfinished one, leave a finished one alone.
    Auto,
}

/// A sweep to run: its plan (from a file or a built-in suite) and where it is kept.
pub struct SweepPlan<'a> {
    pub plan: &'a Plan,
    /// Targets for every run, replacing the plan's.
    pub targets: &'a [String],
    /// Devices named as safe to overwrite, beside the plan's `destructive`.
    pub destructive: &'a [String],
    /// Parts of the study that cannot run here, stored as skipped runs with their reason.
    pub unsupported: &'a [(String, String)],
    /// The results database.
    pub db: &'a Path,
    pub resume: Resume,
    /// How every run is measured for energy, over the plan's `[energy]`. The idle baseline,
    /// when asked for, is measured once before the sweep's first run and used for every run's
    /// record, or (`IdleWhen::PerRun`) before each run's I/O, after its settings.
    pub energy: &'a EnergyOptions,
    /// `--profile`: how every run is profiled, besides what the plan asks for.
    pub profile: crate::plan::profile::Profile,
    /// `--share I/N`: only this share of the plan's configurations (a cluster task's part).
    pub share: Option<Share>,
    /// `--handover FILE`: a copy of the database made after every stored run.
    pub handover: Option<&'a Path>,
    /// `--split ID`: the fleet submission this share is part of, recorded with the sweep it
    /// makes (merged, shares of one split join one sweep).
    pub split: Option<&'a str>,
    /// `--wait-settings`: how long a run waits for a setting another live iolab holds, seconds.
    pub wait_settings_s: u64,
    /// What serves the plan's file sets while it runs (a served suite part's server).
    pub serving: Option<&'a crate::meters::server::Serving>,
}

/// One of `count` disjoint parts of a plan, for running it on several machines at once: the
/// configurations (in the plan's order) whose index is `index` modulo `count`. A configuration's
/// replicates stay together on one machine, so replicates never mix machines; the run order
/// within the share is the plan's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    pub index: usize,
    pub count: usize,
}

impl Share {
    /// The keys of the plan's configurations in this share.
    pub fn keys<'e>(&self, e: &'e Expansion) -> Vec<&'e str> {
        e.configs.iter().enumerate().filter(|(i, _)| i % self.count == self.index).map(|(_, c)| c.key.as_str()).collect()
    }
}

impl std::str::FromStr for Share {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Self, PlanError> {
        let bad = || {
            PlanError::Value(format!(
                "--share {s:?}: give I/N with 0 <= I < N, e.g. 0/4 (the shares 0/4 to 3/4 together are the whole plan)"
            ))
        };
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (i.trim().parse::<usize>().map_err(|_| bad())?, n.trim().parse::<usize>().map_err(|_| bad())?);
        if count == 0 || index >= count {
            return Err(bad());
        }
        Ok(Share { index, count })
    }
}

impl std::fmt::Display for Share {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What a sweep shows while it works; each run's notes and progress come through [`RunUi`].
pub trait SweepUi: RunUi {
    /// The sweep is in the database as `sweep_id`: `to_do` of its `of` runs are left to do.
    fn planned(&mut self, _plan: &Expansion, _sweep_id: i64, _to_do: usize, _of: usize) {}
    /// The runs begin (after the temporary target, if any, is made).
    fn begin(&mut self, _runs: usize) {}
    /// Run `n` (from 0) of `of` starts; `label` is its configuration and replicate.
    fn run_start(&mut self, _n: usize, _of: usize, _label: &str) {}
    /// A run was skipped or failed before measuring: the line that says so.
    fn line(&mut self, _line: &str) {}
    /// A run is through and the sweep goes on.
    fn run_done(&mut self) {}
    /// No more runs (also when the sweep stopped early).
    fn end(&mut self) {}
}

/// How a sweep ended: its exit code, and whether it went through to the end (a suite goes on
/// to its next part only then).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepEnd {
    /// 0; 1 when a run of the sweep failed or settings were left changed; 2 on bad input; 130
    /// after Ctrl-C.
    pub code: i32,
    /// Every planned run was tried; false when the sweep stopped early.
    pub finished: bool,
}

/// What running a sweep came to.
pub enum Outcome {
    /// A suite's part (`Resume::Auto`) whose sweep was already done: nothing ran.
    AlreadyDone {
        name: String,
    },
    /// Ctrl-C while the temporary target was made or idle power measured: every run stays to do.
    InterruptedBeforeRuns {
        message: String,
    },
    Ran(SweepRun),
}

impl Outcome {
    pub fn end(&self) -> SweepEnd {
        match self {
            Outcome::AlreadyDone { .. } => SweepEnd { code: 0, finished: true },
            Outcome::InterruptedBeforeRuns { .. } => SweepEnd { code: 130, finished: false },
            Outcome::Ran(r) => r.end(),
        }
    }
}

/// The runs of one sweep this time, counted.
pub struct SweepRun {
    pub sweep_id: i64,
    /// Runs stored with their record (`failed` of them failed).
    pub stored: usize,
    pub failed: usize,
    /// Runs that failed before measuring, stored as failed planned runs.
    pub early: usize,
    pub skipped: usize,
    /// Runs still to do.
    pub left: usize,
    /// Why the sweep stopped before its end: settings not restored, or bad input.
    pub stopped: Option<Failure>,
    pub interrupted: bool,
    /// Failed runs of this sweep in the database, also from before a resume.
    pub all_failed: usize,
}

impl SweepRun {
    pub fn end(&self) -> SweepEnd {
        let code = match (&self.stopped, self.interrupted) {
            (Some(f), _) => f.code(),
            (None, true) => 130,
            (None, false) => i32::from(self.all_failed > 0),
        };
        SweepEnd { code, finished: self.stopped.is_none() && !self.interrupted }
    }
}

/// What the sweep does with one run's outcome.
enum Step {
    /// Measured (also when the run failed): stored with its record.
    Keep(Box<RunRecord>),
    /// The machine cannot do this run: kept, with the reason, as skipped.
    Skip(String),
    /// Tried and went wrong before measuring: kept as failed with the error; the next may work.
    Fail(String),
    /// Ctrl-C: not kept; the planned run stays to do.
    Interrupted,
    /// Stop the sweep: bad input (every later run would meet it too; this run stays to do), or
    /// settings left changed (no run may go on; a measurement made before the restore failed is
    /// whole and kept).
    Stop(Failure, Option<Box<RunRecord>>),
}

fn step(outcome: Result<RunRecord, RunError>) -> Step {
    match outcome {
        Ok(rec) => Step::Keep(Box::new(rec)),
        Err(RunError { failure: f, record }) => match f.kind {
            FailureKind::Unsupported => Step::Skip(f.message),
            FailureKind::Failed => Step::Fail(f.message),
            FailureKind::Interrupted => Step::Interrupted,
            FailureKind::Invalid => Step::Stop(f, None),
            FailureKind::SettingsNotRestored => Step::Stop(f, record),
            // No run fails of these (the store and Slurm are not a run's): stop, as on bad input.
            FailureKind::Store | FailureKind::External => Step::Stop(f, None),
        },
    }
}

/// Expand the plan, find or make its sweep in the database, and run what is left to do, each
/// finished run committed as it ends. Err: one line of its kind (a bad plan or a target refused:
/// bad input; the database: the store's; a planned run that cannot be read: the store's; a
/// temporary target that cannot be made: failed).
pub fn run(plan: &SweepPlan, ui: &mut impl SweepUi) -> Result<Outcome, Failure> {
    let e = expand(plan)?;
    // The command line's energy options over the plan's `[energy]`: bad input before anything.
    let energy = plan.energy.with_plan(e.idle)?;
    let hash = plan.plan.hash(plan.targets);
    let mut store = Store::open(plan.db)?;
    let Some(sweep_id) = find_or_create(plan, &e, &hash, &mut store)? else {
        return Ok(Outcome::AlreadyDone { name: e.name });
    };
    let mut planned = store.planned_runs(sweep_id)?;
    if let Some(share) = plan.share {
        let ours = share.keys(&e);
        planned.retain(|r| ours.contains(&r.config_key.as_str()));
    }
    let pending: Vec<_> = planned.iter().filter(|r| r.status == PlannedStatus::Planned).collect();
    ui.planned(&e, sweep_id, pending.len(), planned.len());
    hand_over(plan, &store)?;
    // Each run's spec read back as the Job it was planned from, once.
    let jobs: Vec<Result<Job, StoreError>> = pending.iter().map(|r| r.job()).collect();
    let cancel = crate::engine::install_interrupt_handler();
    let shared = match before_runs(&energy, &e, &jobs, cancel, ui)? {
        Ok(shared) => shared,
        Err(message) => return Ok(Outcome::InterruptedBeforeRuns { message }),
    };
    ui.begin(pending.len());
    // The plan's own profiling (a suite part that explains a figure) and `--profile`'s, together.
    let mut s = Sweeping::new(plan, &energy, store, sweep_id, shared, plan.profile.union(e.profile));
    for (n, (run, job)) in pending.iter().zip(jobs).enumerate() {
        if cancel.is_cancelled() {
            s.r.interrupted = true;
            break;
        }
        s.run_one(run, job, (n, pending.len()), ui)?;
        if s.r.interrupted || s.r.stopped.is_some() {
            break;
        }
        ui.run_done();
        if n + 1 < pending.len() {
            cool_down(e.cooldown_s, cancel);
        }
    }
    ui.end();
    s.finish(pending.len())
}

/// The plan expanded with this command's targets and consent to write. Err, before the database
/// is opened: the plan's error (bad input), or `--require-energy` where no source can measure
/// (unsupported here, as `iolab run` refuses before any I/O: every run would meet it).
fn expand(plan: &SweepPlan) -> Result<Expansion, Failure> {
    // A plan's error is bad input (`e.to_string()`: the plan's error type, whatever it is, as its line).
    let mut e = plan.plan.expand(plan.targets).map_err(|e| Failure::invalid(e.to_string()))?;
    e.allow_writing(plan.destructive);
    if plan.energy.require {
        let found = crate::energy::probe(&plan.energy.config);
        if !found.iter().any(|s| s.available) {
            let why: Vec<String> = found.iter().map(|s| format!("{}: {}", s.backend, s.detail)).collect();
            return Err(Failure::unsupported(format!("--require-energy: no energy source can measure here ({})", why.join("; "))));
        }
    }
    Ok(e)
}

/// The sweep to run, as `plan.resume` says: an unfinished one of this plan, or a new one; None
/// where a suite's part (`Resume::Auto`) was done already. Every target of the plan (of this
/// share) is checked before a new sweep is stored: a device refused halfway would leave a sweep
/// that can neither finish nor be redone.
fn find_or_create(plan: &SweepPlan, e: &Expansion, hash: &str, store: &mut Store) -> Result<Option<i64>, Failure> {
    let db = crate::secret::redact_path(plan.db);
    let unfinished = store.unfinished_sweep(hash)?;
    if plan.resume == Resume::Auto && unfinished.is_none() && store.sweep_infos()?.iter().any(|s| s.plan_hash == hash) {
        return Ok(None);
    }
    let ours = plan.share.map(|s| s.keys(e));
    let uses = target_uses(e.configs.iter().filter(|c| ours.as_ref().is_none_or(|k| k.contains(&c.key.as_str()))).map(|c| &c.job));
    refused(&uses.iter().map(TargetUse::check).collect::<Vec<_>>())?;
    let id = match (plan.resume, unfinished) {
        (Resume::Required | Resume::Auto, Some(id)) => id,
        (Resume::Required, None) => {
            return Err(Failure::invalid(format!("no unfinished sweep of this plan in {db}: run without --resume to start one")))
        }
        (Resume::Refuse, Some(id)) => {
            return Err(Failure::invalid(format!(
                "sweep #{id} of this plan in {db} is unfinished: continue it with --resume, or start over with --new"
            )))
        }
        _ => create(store, e, plan, hash)?,
    };
    Ok(Some(id))
}

/// `--handover`: the database copied there, between runs (never inside a measurement), so a
/// finished run survives this machine.
fn hand_over(plan: &SweepPlan, store: &Store) -> Result<(), StoreError> {
    plan.handover.map_or(Ok(()), |to| store.copy_to(to))
}

/// What every run of a sweep shares, made once before its first run.
struct Shared {
    /// One temporary target for the whole sweep when the plan names none (and a run opens one:
    /// a diskless interface, null, opens nothing).
    temp: Option<crate::device::TempTarget>,
    /// Idle power, measured once for the whole sweep (None: each run measures its own, or none).
    idle: Option<IdleBaseline>,
}

/// Make what the runs share. Ok(Err(message)): Ctrl-C came while the temporary target was made
/// or idle power measured (every run stays to do). Err: a temporary target that cannot be made.
fn before_runs(
    energy: &EnergyOptions,
    e: &Expansion,
    jobs: &[Result<Job, StoreError>],
    cancel: crate::cancel::Cancel,
    ui: &mut impl SweepUi,
) -> Result<Result<Shared, String>, Failure> {
    let temp = if jobs.iter().any(|j| j.as_ref().is_ok_and(needs_target)) {
        let size = e.configs[0].job.targets.size.unwrap_or(crate::device::DEFAULT_TARGET_SIZE);
        match crate::device::create_default_target(size, cancel) {
            Ok(t) => Some(t),
            Err(e) if cancel.is_cancelled() => return Ok(Err(e.to_string())),
            Err(e) => return Err(e.into()),
        }
    } else {
        None
    };
    let idle = match energy.idle_baseline_s.filter(|_| !jobs.is_empty()) {
        // Each run measures its own, after its settings (`session::idle_power`).
        Some(s) if energy.idle_per_run() => {
            ui.line(&format!("idle power is measured for {s} s before each run, after its settings"));
            None
        }
        Some(s) => {
            ui.line(&format!("measuring idle power for {s} s, once for every run of this sweep"));
            let power = measure_idle(&energy.config, s, cancel);
            if cancel.is_cancelled() {
                return Ok(Err("interrupted while measuring idle power".into()));
            }
            Some(IdleBaseline { taken: IdleTaken::OncePerSweep, power })
        }
        None => None,
    };
    Ok(Ok(Shared { temp, idle }))
}

/// The pause between two runs (the plan's `cooldown`), cut short by Ctrl-C.
fn cool_down(seconds: f64, cancel: crate::cancel::Cancel) {
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < until && !cancel.is_cancelled() {
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A sweep under way: its database, what its runs share, and what they came to so far.
struct Sweeping<'p, 'a> {
    plan: &'p SweepPlan<'a>,
    /// How every run is measured for energy: the command line's over the plan's `[energy]`.
    energy: &'p EnergyOptions,
    store: Store,
    shared: Shared,
    profile: crate::plan::profile::Profile,
    r: SweepRun,
    /// The reasons said so far: each distinct one is said once (the database keeps it for
    /// every run).
    reasons: Vec<String>,
    /// The lines said so far about a device standing in for a target, each once.
    mapped: Vec<String>,
}

impl<'p, 'a> Sweeping<'p, 'a> {
    fn new(
        plan: &'p SweepPlan<'a>,
        energy: &'p EnergyOptions,
        store: Store,
        sweep_id: i64,
        shared: Shared,
        profile: crate::plan::profile::Profile,
    ) -> Self {
        let r =
            SweepRun { sweep_id, stored: 0, failed: 0, early: 0, skipped: 0, left: 0, stopped: None, interrupted: false, all_failed: 0 };
        Sweeping { plan, energy, store, shared, profile, r, reasons: Vec::new(), mapped: Vec::new() }
    }

    /// Run planned run `n` of `of`: its job made ready, run, its outcome stored and said, the
    /// database handed over.
    fn run_one(
        &mut self,
        run: &PlannedRun,
        job: Result<Job, StoreError>,
        (n, of): (usize, usize),
        ui: &mut impl SweepUi,
    ) -> Result<(), Failure> {
        let mut job = self.job_for(job)?;
        ui.run_start(n, of, &format!("{} #{}", run.config_key, run.replicate + 1));
        let outcome = match passthrough_targets(&mut job) {
            Ok(said) => {
                if let Some(line) = said.filter(|l| !self.mapped.contains(l)) {
                    ui.line(&line);
                    self.mapped.push(line);
                }
                let measure = Measure {
                    energy: Some(self.energy),
                    idle: self.shared.idle.as_ref(),
                    profile: self.profile,
                    serving: self.plan.serving,
                };
                execute(&job, ui, measure)
            }
            // Whatever the device said, a target with no namespace to pass commands to is a run
            // skipped, not a sweep stopped.
            Err(why) => Err(RunError { failure: Failure::unsupported(why.to_string()), record: None }),
        };
        if let Some((what, why)) = self.store_step(run, step(outcome))? {
            // Each distinct reason once; the database keeps it for every run.
            let line = if self.reasons.contains(&why) {
                format!("{what} {}", run.config_key)
            } else {
                format!("{what} {}: {why}", run.config_key)
            };
            self.reasons.push(why);
            ui.line(&line);
        }
        hand_over(self.plan, &self.store)?;
        Ok(())
    }

    /// A planned run's job as this command runs it. Err: a stored spec no Job of this iolab
    /// reads (another version's): a database that cannot be used as given, as the store says of
    /// a newer schema.
    fn job_for(&self, job: Result<Job, StoreError>) -> Result<Job, Failure> {
        let mut job = job?;
        // This command's consent, also for runs planned by an earlier one (a resume).
        let consent: Vec<String> = self.plan.destructive.iter().filter(|d| !job.targets.destructive.contains(d)).cloned().collect();
        job.targets.destructive.extend(consent);
        // A setting another iolab holds is waited for, as this command allows, not failed at once.
        job.system.wait_settings_s = Some(self.plan.wait_settings_s);
        if needs_target(&job) {
            if let Some(t) = &self.shared.temp {
                job.targets.paths = vec![t.path.display().to_string()];
            }
        }
        Ok(job)
    }

    /// Store what one run came to, counted. Some((what, why)): the line to say of a run
    /// skipped or failed before measuring.
    fn store_step(&mut self, run: &PlannedRun, step: Step) -> Result<Option<(&'static str, String)>, StoreError> {
        let r = &mut self.r;
        match step {
            Step::Keep(rec) => keep(&mut self.store, run.id, &rec, r)?,
            Step::Skip(why) => {
                self.store.record_skip(run.id, &why)?;
                r.skipped += 1;
                return Ok(Some(("skipped", why)));
            }
            Step::Fail(why) => {
                self.store.record_failure(run.id, &why)?;
                r.early += 1;
                return Ok(Some(("failed", why)));
            }
            Step::Interrupted => r.interrupted = true,
            Step::Stop(f, record) => {
                if let Some(rec) = &record {
                    keep(&mut self.store, run.id, rec, r)?;
                }
                r.stopped = Some(match f.kind {
                    FailureKind::Invalid => Failure::new(f.kind, format!("run {} #{}: {}", run.config_key, run.replicate + 1, f.message)),
                    _ => f,
                });
            }
        }
        Ok(None)
    }

    /// The runs counted, `pending` of them planned this time.
    fn finish(mut self, pending: usize) -> Result<Outcome, Failure> {
        self.r.left = pending - self.r.stored - self.r.skipped - self.r.early;
        self.r.all_failed = self.store.sweep(self.r.sweep_id)?.map_or(0, |s| s.failed);
        Ok(Outcome::Ran(self.r))
    }
}

/// A plan file's text as `iolab sweep` runs it: parsed, with `--numa` in place of its
/// `options.numa`. Err: bad input, one line (the plan's error, or a plan that varies numa in its
/// matrix given `--numa`).
pub(crate) fn load(text: &str, numa: Option<Numa>) -> Result<Plan, Failure> {
    // A plan's error is bad input (`e.to_string()`: the plan's error type, whatever it is, as its line).
    let invalid = |e: crate::plan::PlanError| Failure::invalid(e.to_string());
    let mut plan = Plan::parse(text).map_err(invalid)?;
    if let Some(n) = numa {
        if !plan.override_numa(n).map_err(invalid)? {
            return Err(Failure::invalid(format!("--numa {n}: the plan varies numa in its matrix; drop --numa or the plan's matrix.numa")));
        }
    }
    Ok(plan)
}

/// A sweep planned and not run (`--dry-run`): the plan expanded with this command's targets and
/// consent to write, and the write-safety verdict on each target it uses ([`target_uses`]'s
/// order).
pub struct DryRun {
    pub expansion: Expansion,
    pub verdicts: Vec<Result<(), DeviceError>>,
}

/// Plan the sweep `run` would make and check its targets, running nothing. Err: the plan's
/// error, bad input.
pub(crate) fn dry_run(plan: &Plan, targets: &[String], destructive: &[String]) -> Result<DryRun, Failure> {
    let mut e = plan.expand(targets).map_err(|e| Failure::invalid(e.to_string()))?;
    e.allow_writing(destructive);
    let verdicts = target_uses(e.configs.iter().map(|c| &c.job)).iter().map(TargetUse::check).collect();
    Ok(DryRun { expansion: e, verdicts })
}

/// How far one share of a plan has got in a database (a fleet task's): runs done (stored,
/// failed or skipped) and runs in the share, of the plan's newest sweep there; None when the
/// database has no sweep of this plan yet.
/// `e` is the plan expanded, `hash` its `plan_hash`.
pub(crate) fn share_progress(db: &Path, e: &Expansion, hash: &str, share: Share) -> Result<Option<(usize, usize)>, StoreError> {
    let store = Store::open_existing(db)?;
    let Some(id) = store.sweep_infos()?.iter().filter(|s| s.plan_hash == hash).map(|s| s.id).max() else {
        return Ok(None);
    };
    let ours = share.keys(e);
    let planned: Vec<_> = store.planned_runs(id)?.into_iter().filter(|r| ours.contains(&r.config_key.as_str())).collect();
    Ok(Some((planned.iter().filter(|r| r.status != PlannedStatus::Planned).count(), planned.len())))
}

/// One target a plan names, as its configurations use it.
pub struct TargetUse {
    pub path: String,
    /// Some configuration writes to it.
    pub writes: bool,
    /// How many configurations name it (alone or in a set).
    pub configs: usize,
    /// The devices those configurations name as safe to overwrite.
    pub destructive: Vec<String>,
}

impl TargetUse {
    /// The write-safety rules for this use, as a run opening it applies them.
    pub fn check(&self) -> Result<(), DeviceError> {
        crate::device::check_safe(Path::new(&self.path), self.writes, &self.destructive)
    }
}

/// Every target the jobs name (each of a set on its own), in order of first use, written where
/// any job writes. An interface that takes the NVMe controller (vfio-nvme) checks its target
/// with its own rules when it takes it; null opens none; a job without targets runs on the
/// temporary file.
pub(crate) fn target_uses<'j>(jobs: impl Iterator<Item = &'j Job>) -> Vec<TargetUse> {
    let mut uses: Vec<TargetUse> = Vec::new();
    for job in jobs.filter(|j| !j.io.interface.info().targets.contains(&crate::device::TargetKind::NvmePci)) {
        let writes = job.workload.rw.writes(job.workload.write_mix);
        for p in &job.targets.paths {
            let at = match uses.iter().position(|u| u.path == *p) {
                Some(i) => i,
                None => {
                    uses.push(TargetUse { path: p.clone(), writes: false, configs: 0, destructive: Vec::new() });
                    uses.len() - 1
                }
            };
            let u = &mut uses[at];
            u.writes |= writes;
            u.configs += 1;
            for d in job.targets.destructive.iter().filter(|d| !u.destructive.contains(d)).collect::<Vec<_>>() {
                u.destructive.push(d.clone());
            }
        }
    }
    uses
}

/// Err: the first refusal's line, and how many more targets were refused.
pub fn refused(verdicts: &[Result<(), DeviceError>]) -> Result<(), DeviceError> {
    let mut refused = verdicts.iter().filter_map(|v| v.as_ref().err());
    match (refused.next(), refused.count()) {
        (None, _) => Ok(()),
        (Some(first), 0) => Err(first.clone()),
        (Some(first), more) => {
            Err(first.clone().context(|m| format!("{m} (and {more} more of the plan's targets refused: `--dry-run` lists each)")))
        }
    }
}

/// A run that names no target and opens one: it runs on the sweep's temporary target.
fn needs_target(job: &Job) -> bool {
    job.targets.paths.is_empty() && !job.io.interface.info().diskless
}

/// One target list serves every interface of a sweep: an interface that drives only NVMe
/// generic devices (nvme-passthru) runs on the generic device of each target's namespace, so the
/// block path and the passthrough path of one device are compared in one sweep (S5). Ok carries
/// the line saying which device stands in; Err why a target has no namespace (the run is skipped).
fn passthrough_targets(job: &mut Job) -> Result<Option<String>, DeviceError> {
    if job.io.interface.info().targets != [crate::device::TargetKind::NvmeGeneric] {
        return Ok(None);
    }
    let mut said = Vec::new();
    for p in &mut job.targets.paths {
        let generic = crate::device::nvme::generic_target(Path::new(p))?.display().to_string();
        if generic != *p {
            said.push(format!("{generic} for {p}"));
            *p = generic;
        }
    }
    Ok((!said.is_empty()).then(|| format!("{} runs on each namespace's generic device: {}", job.io.interface, said.join(", "))))
}

/// Store a measured run's record, counted; an interrupted one is not kept: the planned run
/// stays to do, and `Resume` runs it again.
fn keep(store: &mut Store, planned_id: i64, rec: &RunRecord, r: &mut SweepRun) -> Result<(), StoreError> {
    if rec.status == RunStatus::Interrupted {
        r.interrupted = true;
        return Ok(());
    }
    r.failed += usize::from(rec.status == RunStatus::Failed);
    r.stored += 1;
    store.record_run(Some(planned_id), rec).map(drop)
}

/// A new sweep of the plan in the database, with what cannot run here stored as skipped.
fn create(store: &mut Store, e: &Expansion, plan: &SweepPlan, hash: &str) -> Result<i64, StoreError> {
    let mut runs: Vec<(i64, u32, String, serde_json::Value)> =
        e.order.iter().enumerate().map(|(n, (rep, i))| (n as i64, *rep, e.configs[*i].key.clone(), e.configs[*i].job.to_spec())).collect();
    let first_unsupported = runs.len() as i64;
    for (n, (what, _)) in plan.unsupported.iter().enumerate() {
        runs.push((first_unsupported + n as i64, 0, what.clone(), serde_json::json!({ "unsupported": what })));
    }
    let identity = crate::store::SweepIdentity::new(plan.split);
    let id =
        store.create_sweep_as(&identity, &e.name, plan.plan.text(), hash, e.configs.first().map_or(1, |c| c.job.workload.seed), &runs)?;
    // What cannot run here is kept, as skipped with the reason, not left out.
    for p in store.planned_runs(id)?.iter().filter(|p| p.spec.get("unsupported").is_some()) {
        let why = plan.unsupported.iter().find(|(w, _)| *w == p.config_key).map_or("", |x| x.1.as_str());
        store.record_skip(p.id, why)?;
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_are_disjoint_cover_the_plan_and_reject_bad_input() {
        let e = Plan::parse("[matrix]\ninterface = [\"null\"]\nqd = [1, 2, 4, 8, 16]\n").unwrap().expand(&[]).unwrap();
        let shares: Vec<Vec<&str>> = (0..3).map(|i| Share { index: i, count: 3 }.keys(&e)).collect();
        assert_eq!(shares.iter().map(Vec::len).collect::<Vec<_>>(), [2, 2, 1]);
        let mut all: Vec<&str> = shares.concat();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), e.configs.len(), "every configuration in exactly one share");
        assert_eq!("1/3".parse::<Share>(), Ok(Share { index: 1, count: 3 }));
        for bad in ["3/3", "1", "a/2", "0/0", "-1/2"] {
            let err = bad.parse::<Share>().unwrap_err();
            assert!(err.to_string().contains("give I/N"), "{bad}: {err}");
        }
    }

    fn failing(kind: FailureKind) -> Step {
        step(Err(RunError { failure: Failure::new(kind, "why"), record: None }))
    }

    #[test]
    fn each_failure_kind_has_its_one_step() {
        assert!(matches!(failing(FailureKind::Unsupported), Step::Skip(m) if m == "why"));
        // An engine that failed is a failure, never a skip.
        assert!(matches!(failing(FailureKind::Failed), Step::Fail(m) if m == "why"));
        assert!(matches!(failing(FailureKind::Interrupted), Step::Interrupted));
        assert!(matches!(failing(FailureKind::Invalid), Step::Stop(f, None) if f.code() == 2));
        assert!(matches!(failing(FailureKind::SettingsNotRestored), Step::Stop(f, None) if f.code() == 1));
    }

    /// What a sweep showed, in order.
    #[derive(Default)]
    struct Seen(Vec<String>);
    impl RunUi for Seen {}
    impl SweepUi for Seen {
        fn planned(&mut self, _: &Expansion, _: i64, to_do: usize, of: usize) {
            self.0.push(format!("planned {to_do}/{of}"));
        }
        fn run_start(&mut self, n: usize, of: usize, label: &str) {
            self.0.push(format!("start {n}/{of} {label}"));
        }
        fn line(&mut self, line: &str) {
            self.0.push(line.to_string());
        }
        fn run_done(&mut self) {
            self.0.push("done".into());
        }
    }

    #[test]
    fn a_sweep_of_null_runs_stores_each_once_then_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let text = "name = \"unit\"\nreplicates = 2\nios = 100\nsize = \"1m\"\ncooldown = \"0s\"\n[matrix]\ninterface = [\"null\"]\n";
        let parsed = Plan::parse(text).unwrap();
        let energy = EnergyOptions::default();
        let plan = |resume| SweepPlan {
            plan: &parsed,
            targets: &[],
            destructive: &[],
            unsupported: &[],
            db: &db,
            resume,
            energy: &energy,
            profile: Default::default(),
            share: None,
            handover: None,
            split: None,
            wait_settings_s: 0,
            serving: None,
        };
        let mut seen = Seen::default();
        let Outcome::Ran(r) = run(&plan(Resume::New), &mut seen).unwrap() else { panic!("did not run") };
        assert_eq!(
            (r.stored, r.failed, r.early, r.skipped, r.left),
            (2, 0, 0, 0, 0),
            "{:?} {:?} {}",
            seen.0,
            r.stopped.as_ref().map(|f| &f.message),
            r.interrupted
        );
        assert_eq!(r.end(), SweepEnd { code: 0, finished: true });
        assert_eq!(seen.0[0], "planned 2/2");
        assert_eq!(seen.0.iter().filter(|l| *l == "done").count(), 2, "{:?}", seen.0);
        assert!(matches!(run(&plan(Resume::Auto), &mut Seen::default()).unwrap(), Outcome::AlreadyDone { .. }));
        let e = run(&plan(Resume::Required), &mut Seen::default()).err().unwrap();
        assert!(e.message.contains("no unfinished sweep") && e.code() == 2, "{e}");
    }

    /// `iolab sweep`'s plan, parsed once with `--numa` in it; bad input in one line.
    #[test]
    fn a_plan_loads_with_numa_or_says_why_not() {
        let plan = load("ios = 5\n", Some(Numa::Local)).unwrap();
        assert_eq!(plan.text(), "ios = 5\n\n[options]\nnuma = \"local\"\n");
        assert_eq!(load("ios = 5\n", None).unwrap().text(), "ios = 5\n");
        let e = load("ios = 5\n[matrix]\nnuma = [\"off\"]\n", Some(Numa::Node(0))).err().unwrap();
        assert_eq!(
            (e.code(), e.message.as_str()),
            (2, "--numa 0: the plan varies numa in its matrix; drop --numa or the plan's matrix.numa")
        );
        let e = load("ios = \"5\"\n", Some(Numa::Local)).err().unwrap();
        assert!(e.code() == 2 && e.message.starts_with("plan line 1, ios: "), "{e}");
        let dry = dry_run(&load("ios = 5\n[matrix]\ninterface = [\"null\"]\n", None).unwrap(), &[], &[]).unwrap();
        assert_eq!((dry.expansion.configs.len(), dry.verdicts.len()), (1, 0));
    }
}
