//! Running one job, for every command that runs one (run, sweep, probe, precondition):
//! checks → temporary target → targets → settings → engine → meters → record → restore.
//! What the caller shows while it works comes through [`RunUi`]; the session prints nothing.
mod checks;
pub mod energy_import;
mod fileset;
pub mod group;
mod numa;
pub mod precondition;
pub mod probe;
pub mod sweep;

pub use checks::{check_kernel, expected_path, observe_path};
use checks::{check_memory, check_polling};

use crate::device::{self, sysinfo::TargetInfo};
use crate::energy::record::{EnergyOptions, IdleBaseline, IdleTaken};
use crate::engine;
use crate::engine::Cancel;
pub use crate::failure::{Failure, FailureKind};
use crate::host;
use crate::interfaces;
use crate::interfaces::Observation;
use crate::meters::placement::NumaPlacement;
use crate::plan::validate::validate;
use crate::plan::Job;
use crate::record::assemble::{EnergyOutcome, Outcome};
use crate::record::{CompletionPath, Environment, Results, RunRecord};

/// What a run shows while it works: notes and about one progress call a second.
pub trait RunUi {
    fn note(&mut self, _msg: &str) {}
    /// Waiting for a setting another iolab holds, and who it is: a note unless shown otherwise.
    fn waiting(&mut self, msg: &str) {
        self.note(msg)
    }
    /// (elapsed s, total s for time budgets, completions so far including the ramp, in ramp)
    fn progress(&mut self, _elapsed: f64, _total: Option<f64>, _done: u64, _ramp: bool) {}
    fn finish(&mut self) {}
}

/// Shows nothing.
pub struct Quiet;
impl RunUi for Quiet {}

/// What a run measures beyond what every run records.
#[derive(Clone, Copy, Default)]
pub struct Measure<'a> {
    /// How to measure energy (None: not at all, as for probes).
    pub energy: Option<&'a crate::energy::record::EnergyOptions>,
    /// `--profile layers,stages`: CPU time by layer of the stack, latency by stage.
    pub profile: crate::plan::profile::Profile,
    /// Idle power already measured (a sweep measures it once, before its first run): used for
    /// the record instead of measuring `energy.idle_baseline_s` again before this run.
    pub idle: Option<&'a IdleBaseline>,
    /// What serves a file set's directory (a served suite part's server: `meters::server`), for
    /// a run whose spec names a server; None outside a served part.
    pub serving: Option<&'a crate::meters::server::Serving>,
}

/// A run that failed, with its record when the measurement itself was whole and only putting
/// the settings back failed after it (it was made under the settings asked for, so it is kept).
pub struct RunError {
    pub failure: Failure,
    pub record: Option<Box<RunRecord>>,
}

impl From<Failure> for RunError {
    fn from(failure: Failure) -> RunError {
        RunError { failure, record: None }
    }
}

/// What a profiled run is compared by: total IOPS and mean latency.
fn iops_and_mean(r: &Results) -> (f64, Option<f64>) {
    (r.total.iops, r.total.lat_ns.as_ref().map(|l| l.mean))
}

/// Run a job end to end: checks, targets, engine, meters, record.
/// `measure`: what is measured beyond what every run records (energy, profiling).
pub fn execute(job: &Job, ui: &mut dyn RunUi, measure: Measure) -> Result<RunRecord, RunError> {
    use crate::meters::profile::{ProfileResult, Unprofiled};
    use crate::meters::stages::{StageProfile, StagesResult};
    use crate::plan::profile::Profile;
    if job.fileset.is_some() && measure.profile.any() {
        return Err(Failure::invalid("--profile is not taken with --fileset: drop it".into()).into());
    }
    // Profiling perturbs what it measures: the same job unprofiled first, to show by how much.
    let unprofiled = if measure.profile.any() {
        ui.note("profiling: the same job runs first without profiling, for comparison");
        let plain = execute(job, ui, Measure { energy: None, profile: Profile::OFF, idle: None, serving: None })?;
        plain.results.as_ref().map(iops_and_mean)
    } else {
        None
    };
    let mut ran = run_job(job, ui, measure)?;
    if let (Some(r), Some(c)) = (ran.0.results.as_ref(), ran.0.cost.as_mut()) {
        let compared = unprofiled.map(|base| Unprofiled::compare(iops_and_mean(r), base));
        if let Some(ProfileResult::Measured(p)) = c.profile.as_mut() {
            p.unprofiled = compared.clone();
        }
        // A user-space driver's requests pass no tracepoint: its stage is its own latency.
        if let (true, Some(_), Some(l)) = (job.io.interface.info().bypasses_kernel, c.stages.as_ref(), r.total.lat_ns.as_ref()) {
            let ios = r.total.ios;
            let one = StageProfile::user_space(ios, l.p50 as f64, l.p99 as f64, l.mean);
            c.stages = Some(StagesResult::Measured(Box::new(one)));
        }
        if let Some(StagesResult::Measured(s)) = c.stages.as_mut() {
            s.unprofiled = compared;
            // iolab's own latency of the same requests, beside the traced end to end.
            s.iolab_p50_ns = r.total.lat_ns.as_ref().map(|l| l.p50 as f64);
            s.iolab_mean_ns = r.total.lat_ns.as_ref().map(|l| l.mean);
        }
    }
    match ran {
        (rec, None) => Ok(rec),
        // The measurement is whole; the machine is not as it was.
        (rec, Some(m)) => Err(RunError { failure: Failure::new(FailureKind::SettingsNotRestored, m), record: Some(Box::new(rec)) }),
    }
}

/// The run, and why the settings were not put back if they were not: its phases, as
/// `engine::run`'s: checks, prepare (targets, settings, meters), measure (the engine over the
/// window), restore (settings and targets put back); then the record assembles itself
/// (`RunRecord::assemble`) from what the run produced.
fn run_job(job: &Job, ui: &mut dyn RunUi, measure: Measure) -> Result<(RunRecord, Option<String>), Failure> {
    if job.fileset.is_some() {
        return fileset::run(job, ui, measure);
    }
    check(job)?;
    // Whatever the kernel lacks or refuses, this machine cannot do.
    let ring = check_kernel(job)?;
    check_energy(measure.energy)?;
    // Ctrl-C from here on stops cleanly: the fill, the idle baseline and the run all check it.
    let cancel = engine::install_interrupt_handler();
    let mut run = prepare(job, ui, measure, cancel)?;
    let out = measure_window(job, ui, &mut run, cancel);
    let restored = restore(&mut run);
    let out = match (out, &restored.not_restored) {
        (Ok(o), _) => o,
        (Err(f), None) => return Err(f),
        (Err(f), Some(r)) => return Err(Failure::new(FailureKind::SettingsNotRestored, format!("{}; {r}", f.message))),
    };
    let measured = run.meters.measured(&out.rec.per_target);
    let not_restored = restored.not_restored.clone();
    Ok((finish(job, run, out, measured, restored, measure, ring), not_restored))
}

/// The record, from what the run produced: the engine's output, the meters' measurements, what
/// the restore saw; the temporary target removed.
fn finish(
    job: &Job,
    run: Prepared,
    out: engine::EngineOutput,
    measured: crate::meters::Measured,
    restored: Restored,
    measure: Measure,
    ring: Option<interfaces::KernelSetup>,
) -> RunRecord {
    let mut env = run.env;
    let mut placed = run.placed;
    placed.threads = measured.placement;
    env.placement = Some(placed);
    let mut path = run.path;
    if let Some(c) = &measured.cost {
        observe_path(&mut path, job, c);
    }
    let energy = measure.energy.map(|e| EnergyOutcome { require: e.require, report: measured.energy, idle: run.idle });
    let outcome = Outcome {
        rusage: measured.rusage,
        meter_window_s: measured.window_s,
        engine: out,
        environment: env,
        cost: measured.cost,
        energy,
        path,
        observed: restored.observed,
        ring,
    };
    let rec = RunRecord::assemble(job, outcome);
    drop(run.temp);
    rec
}

/// Before anything is touched: the job is valid and fits this machine's memory.
fn check(job: &Job) -> Result<(), Failure> {
    validate(job)?;
    // Too big for this machine's memory now: not the user's error, and a sweep goes on.
    check_memory(job)
}

/// `--require-energy`: some energy source can measure here.
fn check_energy(energy: Option<&EnergyOptions>) -> Result<(), Failure> {
    if let Some(e) = energy.filter(|e| e.require) {
        let found = crate::energy::probe(&e.config);
        if !found.iter().any(|s| s.available) {
            let why: Vec<String> = found.iter().map(|s| format!("{}: {}", s.backend, s.detail)).collect();
            return Err(Failure::unsupported(format!("--require-energy: no energy source can measure here ({})", why.join("; "))));
        }
    }
    Ok(())
}

/// What `prepare` made ready for the window, held until `restore` puts it back. Its fields drop
/// in this order on an error return (the meters' sysctls first, the temporary target last), as
/// they were made in the reverse order.
struct Prepared {
    meters: crate::meters::Meters,
    idle: Option<IdleBaseline>,
    env: Environment,
    path: CompletionPath,
    guard: Option<crate::settings::AppliedGuard>,
    placed: NumaPlacement,
    placement: engine::Placement,
    acquired: interfaces::Acquired,
    temp: Option<device::TempTarget>,
}

/// Targets acquired and placed, settings applied (journaled), the environment described, idle
/// power measured, the meters opened: everything up to the first I/O.
fn prepare(job: &Job, ui: &mut dyn RunUi, measure: Measure, cancel: Cancel) -> Result<Prepared, Failure> {
    let (temp, acquired) = acquire(job, ui, cancel)?;
    check_polling(job, acquired.files())?;
    let infos: Vec<TargetInfo> = acquired.describe();
    let (placement, placed) = numa::resolve(job, &infos, &host::numa_nodes())?;
    // System settings: originals journaled before any change, restored when the guard drops
    // (at the end, on an error return, after Ctrl-C); `iolab restore` is the backstop.
    let system = crate::settings::Settings::system();
    // Settings asked wrongly or contradicting the job: bad input, whatever the setting says.
    let mut changes = settings_changes(job, &infos, &system).map_err(|e| Failure::invalid(e.into_message()))?;
    // `--profile stages` reads tracepoints from tracefs: mounted for the run where it is not
    // (only root may; without it the record says why there are no stages).
    // SAFETY: geteuid has no preconditions.
    if measure.profile.stages && !crate::settings::tracefs_mounted(&system.tracefs()) && unsafe { libc::geteuid() } == 0 {
        changes.push(crate::settings::Change::new(crate::settings::Setting::Tracefs, None, "mounted"));
    }
    let setup_not_applied = setup_changes(job, &infos, &system, &mut changes);
    let wait = std::time::Duration::from_secs(job.system.wait_settings_s.unwrap_or(0));
    let guard = apply_settings(&system, &changes, wait, &mut |line| ui.waiting(line))?;
    // Describe the targets after the change, so the record shows what the run ran with.
    let infos: Vec<TargetInfo> = if guard.is_some() { acquired.describe_again() } else { infos };
    let path = expected_path(job, &infos);
    let mut env = environment(infos);
    env.device_settings = env.targets.iter().filter_map(|t| t.device.as_deref()).map(|d| system.snapshot(d)).collect();
    env.settings_changed = guard.as_ref().map(|g| g.changes()).unwrap_or_default();
    env.settings_changed.extend(acquired.changes());
    env.setup_not_applied = setup_not_applied;
    let idle = idle_power(ui, measure, cancel);
    if cancel.is_cancelled() {
        return Err(Failure::new(FailureKind::Interrupted, "interrupted before the first I/O; nothing was measured".to_string()));
    }
    // No device to meter for null: no device cost, no observed completion path.
    let diskless = job.io.interface.info().diskless;
    let meters = crate::meters::Meters::new(if diskless { &[] } else { &env.targets }, measure.energy.map(|e| &e.config))
        .with_profile(measure.profile, &system);
    env.settings_changed.extend(meters.settings_changed());
    Ok(Prepared { meters, idle, env, path, guard, placed, placement, acquired, temp })
}

/// The temporary target where the job names none (filled first), and the interface's target
/// part: files and block devices opened, an address space, or a controller taken from the
/// kernel (given back by `release`, or when dropped on an error).
fn acquire(job: &Job, ui: &mut dyn RunUi, cancel: Cancel) -> Result<(Option<device::TempTarget>, interfaces::Acquired), Failure> {
    // A diskless interface (null) opens nothing: its one target is an address space.
    let diskless = job.io.interface.info().diskless;
    let temp = if job.targets.paths.is_empty() && !diskless {
        let size = job.targets.size.unwrap_or(device::DEFAULT_TARGET_SIZE);
        ui.note(&format!("creating and filling a {} temporary target", crate::plan::size::format_bytes(size as f64)));
        let made = device::create_default_target(size, cancel);
        Some(made.map_err(|e| if cancel.is_cancelled() { Failure::new(FailureKind::Interrupted, e.to_string()) } else { e.into() })?)
    } else {
        None
    };
    let paths: Vec<std::path::PathBuf> = match &temp {
        Some(t) => vec![t.path.clone()],
        None => job.targets.paths.iter().map(Into::into).collect(),
    };
    let drivers = generic_drivers();
    let request = interfaces::TargetRequest {
        io: &job.io,
        access: access(job, &drivers),
        paths: &paths,
        temporary: temp.is_some(),
        qd: job.workload.qd,
    };
    let acquired = job.io.interface.acquire(&request)?;
    Ok((temp, acquired))
}

/// The idle power for the record: a sweep's, measured once before its first run, or measured
/// now, after the run's settings, for `energy.idle_baseline_s` (None: no energy, or no baseline
/// asked for). Ctrl-C ends it early; the caller then does no I/O.
fn idle_power(ui: &mut dyn RunUi, measure: Measure, cancel: Cancel) -> Option<IdleBaseline> {
    match (measure.energy, measure.idle) {
        (Some(_), Some(idle)) => Some(idle.clone()),
        (Some(e), None) => e.idle_baseline_s.map(|s| {
            ui.note(&format!("measuring idle power for {s} s"));
            IdleBaseline { taken: IdleTaken::PerRun, power: crate::energy::record::measure_idle(&e.config, s, cancel) }
        }),
        (None, _) => None,
    }
}

/// The engine over the prepared targets, the meters sampling its window.
fn measure_window(job: &Job, ui: &mut dyn RunUi, run: &mut Prepared, cancel: Cancel) -> Result<engine::EngineOutput, Failure> {
    measure_window_with(job, ui, &run.placement, &run.acquired, &mut run.meters, cancel, None)
}

/// [`measure_window`] over the parts it needs; `group`: the start of the group of jobs this one
/// runs together with.
fn measure_window_with(
    job: &Job,
    ui: &mut dyn RunUi,
    placement: &engine::Placement,
    acquired: &interfaces::Acquired,
    meters: &mut crate::meters::Meters,
    cancel: Cancel,
    group: Option<&engine::GroupStart>,
) -> Result<engine::EngineOutput, Failure> {
    let mut progress = |elapsed: f64, total: Option<f64>, done: u64, ramp: bool| ui.progress(elapsed, total, done, ramp);
    let inputs = engine::Inputs { job, placement, acquired, cancel, progress: &mut progress, hooks: meters };
    let ran = match group {
        None => engine::run(inputs),
        Some(g) => engine::run_in_group(inputs, g),
    };
    let out = ran.map_err(|e| {
        // A worker's error while Ctrl-C stops the run is the interruption, not a failure.
        if cancel.is_cancelled() {
            Failure::new(FailureKind::Interrupted, e.to_string())
        } else {
            e.into()
        }
    });
    ui.finish();
    out
}

/// What putting things back left: why the settings or targets are not as they were (None:
/// they are), and what the targets showed before they were given back.
struct Restored {
    not_restored: Option<String>,
    observed: Option<Observation>,
}

/// Settings put back (what profiling lowered first: it was changed last), then the targets
/// given back, after reading what they saw (the user-space driver's environment goes into the
/// record's).
fn restore(run: &mut Prepared) -> Restored {
    let restored = [
        run.meters.restore_settings().map_err(String::from),
        run.guard.take().map_or(Ok(Vec::new()), |g| g.restore().map_err(String::from)),
    ];
    let mut not_restored = restored
        .into_iter()
        .filter_map(Result::err)
        .reduce(|a, b| format!("{a}; {b}"))
        .map(|e| format!("restoring system settings failed: {e}"));
    // What the target itself saw, before it is given back.
    let observed = run.acquired.observed();
    run.env.user_space_driver = run.acquired.user_space_driver();
    if let Err(e) = run.acquired.release() {
        not_restored = Some(e);
    }
    Restored { not_restored, observed }
}

/// A study's set-up (`job.system.setup`) added to `changes` where this machine takes it: each
/// setting on every target's device (the governor once), unless the job itself sets it. What it
/// cannot take is returned, with the reason, for the record: the run goes on without it (a VM has
/// no CPU frequency scaling, a file on tmpfs no device).
fn setup_changes(
    job: &Job,
    targets: &[TargetInfo],
    system: &crate::settings::Settings,
    changes: &mut Vec<crate::settings::Change>,
) -> Vec<String> {
    use crate::settings::Change;
    let mut not_applied = Vec::new();
    for spec in &job.system.setup {
        for t in targets {
            let c = match Change::parse(spec, t.device.as_deref()) {
                Ok(c) => c,
                Err(e) => {
                    not_applied.push(format!("{spec}: {e}"));
                    break;
                }
            };
            if c.setting.is_device_setting() && c.device.is_none() {
                not_applied.push(format!("{spec} on {}: no block device behind it", t.path));
                continue;
            }
            if changes.iter().any(|x| x.setting == c.setting && x.device == c.device) {
                continue;
            }
            // Root only writes the real /sys; without it the set-up is not the run's failure.
            // SAFETY: geteuid has no preconditions.
            let why = if unsafe { libc::geteuid() } != 0 && system.sysfs_root() == std::path::Path::new("/sys") {
                Err("changing system settings needs root".to_string())
            } else {
                system.check(&c).map_err(String::from)
            };
            match why {
                Ok(()) => changes.push(c),
                Err(e) if !not_applied.iter().any(|n: &String| n.starts_with(&format!("{spec}:"))) => {
                    not_applied.push(format!("{spec}: {e}"))
                }
                Err(_) => {}
            }
        }
    }
    not_applied
}

/// The setting changes a job asks for, once per distinct device, and the `io_poll_delay` its
/// polling needs (`block_poll.rs`) where the queue has another.
fn settings_changes(
    job: &Job,
    targets: &[TargetInfo],
    system: &crate::settings::Settings,
) -> Result<Vec<crate::settings::Change>, crate::settings::SettingsError> {
    use crate::settings::{Change, Setting, SettingsError};
    let poll_delay = (job.io.interface.rules().block_poll_delay)(&job.io);
    let mut devices: Vec<&str> = Vec::new();
    // The CPUs' settings (governor, cpu_freq_khz, cpuidle_max_state) once, whatever the targets.
    let mut out = Vec::new();
    let mut device_set = false;
    for spec in &job.system.set {
        let c = Change::parse(spec, None)?;
        device_set |= c.setting.is_device_setting();
        if !c.setting.is_device_setting() && !out.contains(&c) {
            out.push(c);
        }
    }
    for t in targets {
        let Some(d) = t.device.as_deref() else {
            if job.system.scheduler.is_some() || device_set {
                return Err(SettingsError::Invalid(format!("{} has no block device behind it whose settings could be changed", t.path)));
            }
            continue;
        };
        if !devices.contains(&d) {
            devices.push(d);
        }
    }
    for d in &devices {
        if let Some(s) = &job.system.scheduler {
            out.push(Change::new(Setting::Scheduler, Some(d), s.clone()));
        }
        for spec in &job.system.set {
            let c = Change::parse(spec, Some(d))?;
            if !out.contains(&c) {
                out.push(c);
            }
        }
        if let Some(want) = poll_delay {
            let given = out.iter().find(|c| c.setting == Setting::IoPollDelay && c.device.as_deref() == Some(*d));
            match given {
                Some(c) if c.value.trim().parse::<i64>() != Ok(want) => {
                    return Err(SettingsError::Invalid(format!(
                        "--set io_poll_delay={} contradicts --complete {} (which runs with io_poll_delay={want}): use --poll-delay with --complete hybrid instead",
                        c.value,
                        job.io.complete.name()
                    )))
                }
                Some(_) => {}
                None if system.snapshot(d)["io_poll_delay"].as_i64() != Some(want) => {
                    out.push(Change::new(Setting::IoPollDelay, Some(d), want.to_string()))
                }
                None => {}
            }
        }
    }
    Ok(out)
}

/// Apply the job's setting changes. What the device or kernel does not offer is unsupported;
/// settings left changed (by an earlier iolab, or by a change whose rollback failed) are
/// settings not restored, and no run may start on them. A setting another live iolab holds is
/// waited for, at most `wait` (`--wait-settings`), `say` telling who holds it.
fn apply_settings(
    system: &crate::settings::Settings,
    changes: &[crate::settings::Change],
    wait: std::time::Duration,
    say: &mut dyn FnMut(&str),
) -> Result<Option<crate::settings::AppliedGuard>, Failure> {
    if changes.is_empty() {
        return Ok(None);
    }
    if let Some(left) = system.left_changed()? {
        return Err(Failure::new(FailureKind::SettingsNotRestored, left));
    }
    // Only root writes the real /sys: without it every change fails, whatever the machine offers.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 && system.sysfs_root() == std::path::Path::new("/sys") {
        return Err(Failure::invalid(
            "changing system settings (scheduler, set) needs root: run iolab as root (sudo), or drop them".into(),
        ));
    }
    for c in changes {
        system.check(c)?;
    }
    let stop = || engine::interrupt().is_cancelled();
    // Failed when nothing is left changed, settings not restored when something is.
    Ok(Some(system.apply_waiting(changes, wait, &stop, say)?))
}

fn environment(targets: Vec<TargetInfo>) -> Environment {
    Environment {
        iolab_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: crate::secret::command_line(),
        hostname: host::hostname(),
        kernel: host::kernel_release(),
        cpu_model: host::cpu_model(),
        cpu_count: host::online_cpus(),
        started_at_unix_s: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0),
        clock: None,
        targets,
        device_settings: Vec::new(),
        settings_changed: Vec::new(),
        user_space_driver: None,
        setup_not_applied: Vec::new(),
        placement: None,
    }
}

/// How the job will use its targets, for opening them.
pub fn access<'a>(job: &'a Job, generic_drivers: &'a [&'a str]) -> device::Access<'a> {
    let info = job.io.interface.info();
    device::Access {
        targets: &job.targets,
        writes: job.workload.rw.writes(job.workload.write_mix),
        direct: job.io.direct,
        bs: job.workload.bs,
        blockalign: job.workload.pattern.blockalign,
        threads: job.workload.threads,
        interface: info.name,
        accepts: info.targets,
        generic_drivers,
    }
}

/// The interfaces that drive NVMe generic character devices.
pub(crate) fn generic_drivers() -> Vec<&'static str> {
    interfaces::all().filter(|i| i.targets.contains(&device::TargetKind::NvmeGeneric)).map(|i| i.name).collect()
}
