//! The record assembling itself from what a run produced ([`Outcome`]): the engine's counts
//! made into results (read and write merged into the total, their histograms too), the energy
//! finished with the run's I/O, the target's own completion evidence, and the rules that give
//! the run its status and error.
use super::{cpu, direction, series, CompletionPath, Environment, Path, Results, RunRecord, RunStatus, Verify, SCHEMA_VERSION};
use crate::energy::record::{EnergyRecord, IdleBaseline};
use crate::energy::EnergyReport;
use crate::engine::recorder::{Direction, Recorder};
use crate::engine::EngineOutput;
use crate::interfaces::KernelSetup;
use crate::interfaces::Observation;
use crate::meters::cpu::Rusage;
use crate::meters::Cost;
use crate::plan::{Complete, Job};

/// Everything a run's measurement produced, as the session collected it after the window.
pub struct Outcome {
    pub engine: EngineOutput,
    /// The environment as the targets, settings and placement left it (its clock comes from
    /// the engine).
    pub environment: Environment,
    /// iolab's process rusage over the meters' window, and that window's length (None when it
    /// never started: the results' window is used).
    pub rusage: Rusage,
    pub meter_window_s: Option<f64>,
    pub cost: Option<Cost>,
    /// None when energy was not asked for.
    pub energy: Option<EnergyOutcome>,
    /// The completion path expected, with what the device interrupt lines showed.
    pub path: CompletionPath,
    /// What the target itself showed of the completion path (the user-space driver's vectors).
    pub observed: Option<Observation>,
    pub ring: Option<KernelSetup>,
}

/// The energy a run asked for.
pub struct EnergyOutcome {
    /// `--require-energy`: a run that measured none failed.
    pub require: bool,
    /// The window's report (None: the window never started).
    pub report: Option<EnergyReport>,
    /// `--idle-baseline`: the idle power measured before the run, and which baseline it is.
    pub idle: Option<IdleBaseline>,
}

impl RunRecord {
    /// The record of a run that reached its engine. Its status: interrupted when Ctrl-C ended
    /// it; failed when energy was required and not measured, or when an I/O failed (or
    /// `--strict` saw another completion path) unless `--continue-on-error` counts errors
    /// without `--strict`; ok otherwise. Its error joins the I/O's (or strict's) and energy's.
    pub(crate) fn assemble(job: &Job, o: Outcome) -> RunRecord {
        let Outcome { engine: out, mut environment, rusage, meter_window_s, cost, energy, mut path, observed, ring } = o;
        environment.clock = Some(out.clock.clone());
        let total = merged(&out.rec);
        let results = results(job, &out, &total, &rusage, meter_window_s);
        let (energy, energy_error) = finish_energy(energy, &total);
        if let Some(o) = observed {
            path.observed = Some(o.path);
            path.evidence = Some(format!("{}, for {} I/Os", o.evidence, total.ios));
        }
        let error = io_error(job, &out, &environment).or_else(|| strict_error(job, &path));
        let status = if out.interrupted {
            RunStatus::Interrupted
        } else if energy_error.is_some() || (error.is_some() && (!job.policy.continue_on_error || job.policy.strict)) {
            RunStatus::Failed
        } else {
            RunStatus::Ok
        };
        let error = match (error, energy_error) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        RunRecord {
            schema_version: SCHEMA_VERSION,
            status,
            error,
            spec: job.clone(),
            environment,
            results: Some(results),
            cost,
            energy,
            completion_path: path,
            ring,
            fileset: None,
            group: None,
        }
    }
}

/// Reads and writes together: counts added, extremes kept, histograms merged.
pub fn merged(rec: &Recorder) -> Direction {
    let mut total = rec.read.clone();
    total.ios += rec.write.ios;
    total.bytes += rec.write.bytes;
    total.errors += rec.write.errors;
    total.min_ns = total.min_ns.min(rec.write.min_ns);
    total.max_ns = total.max_ns.max(rec.write.max_ns);
    total.lat.add(&rec.write.lat).expect("same bounds");
    total
}

fn results(job: &Job, out: &EngineOutput, total: &Direction, rusage: &Rusage, meter_window_s: Option<f64>) -> Results {
    let w = out.window_s;
    Results {
        window_s: w,
        read: direction(&out.rec.read, w),
        write: direction(&out.rec.write, w),
        total: direction(total, w),
        series: series(&out.rec),
        cpu: cpu(rusage, meter_window_s.unwrap_or(w), total.ios),
        verify: job.policy.verify.then_some(Verify {
            reads_checked: out.verified_reads,
            written_blocks_read_back: out.verified_written,
            mismatches: out.verify_mismatches,
            form: job.policy.verify_fio.map(|f| f.to_string()),
        }),
        ended_by: ended_by(job, out),
        pace: pace(job, &out.rec, w),
        thread_settings: thread_settings(job, out),
        steadystate: out.steadystate.clone(),
    }
}

/// What each thread was given besides its CPU, as read back; None when nothing was asked.
fn thread_settings(job: &Job, out: &EngineOutput) -> Option<crate::record::ThreadSettings> {
    let asked = &job.io.options.thread;
    if !asked.any() {
        return None;
    }
    let sum = |f: fn(&crate::interfaces::thread::Applied) -> Option<[u64; 2]>| {
        out.threads_applied.iter().filter_map(f).reduce(|a, b| [a[0] + b[0], a[1] + b[1]])
    };
    Some(crate::record::ThreadSettings {
        asked: asked.clone(),
        threads: out.threads_applied.clone(),
        commands: sum(|a| a.commands),
        commands_with_prio: sum(|a| a.commands_with_prio),
    })
}

/// A paced run's rate asked and achieved per thread.
fn pace(job: &Job, rec: &crate::engine::recorder::Recorder, w: f64) -> Option<crate::record::PaceResult> {
    let asked = job.workload.pattern.pace.clone()?;
    let per = |x: u64| if w > 0.0 { x as f64 / w / job.workload.threads.max(1) as f64 } else { 0.0 };
    Some(crate::record::PaceResult {
        achieved_per_thread: crate::record::PaceAchieved {
            read_iops: per(rec.read.ios),
            write_iops: per(rec.write.ios),
            read_bw_bytes_per_s: per(rec.read.bytes),
            write_bw_bytes_per_s: per(rec.write.bytes),
        },
        submit_mode: asked.submit_mode,
        latency_from: if asked.submit_mode == crate::plan::pace::SubmitMode::Offload { "queued" } else { "submission" },
        asked,
    })
}

/// Under a budget of a time and a count, which ended the run; None under one limit, or when a
/// stop came first (Ctrl-C, or a failed I/O that stopped the run).
fn ended_by(job: &Job, out: &EngineOutput) -> Option<&'static str> {
    let stopped = out.interrupted || (out.first_error.is_some() && !job.policy.continue_on_error);
    if !stopped && out.steadystate.as_ref().is_some_and(|s| s.attained) {
        return Some("steadystate");
    }
    let b = job.timing.budget;
    (b.is_either() && !stopped).then(|| b.limit_word(out.ended_by_time))
}

/// The energy record (per-joule ratios from the run's I/O, the dynamic part over the idle
/// baseline) and, where energy was required, why it does not count as measured.
fn finish_energy(energy: Option<EnergyOutcome>, total: &Direction) -> (Option<EnergyRecord>, Option<String>) {
    let Some(e) = energy else { return (None, None) };
    let record = e.report.map(|r| crate::energy::record::finish(r, e.idle, total.ios, total.bytes));
    // The check before the run only knew a source was there; this one knows what it measured.
    let error = match (e.require, &record) {
        (true, Some(r)) => r.report.require_measured().err(),
        (true, None) => Some("no energy was measured (the window never started)".to_string()),
        (false, _) => None,
    };
    (record, error.map(|e| format!("--require-energy: {e}")))
}

/// The first I/O that failed, in words.
fn io_error(job: &Job, out: &EngineOutput, env: &Environment) -> Option<String> {
    let f = out.first_error.as_ref()?;
    let t = &env.targets[f.file as usize].path;
    let dir = if f.write { "write" } else { "read" };
    let hint = if f.errno == Some(libc::EOPNOTSUPP) && job.io.complete != Complete::Irq {
        " (this kernel rejects polled I/O on a queue without poll queues instead of falling back to interrupts)"
    } else {
        ""
    };
    let tail = if job.policy.continue_on_error { "" } else { "; the run stopped (use --continue-on-error to count errors and go on)" };
    Some(format!("{dir} of {} bytes at offset {} on {} failed: {}{hint}{tail}", job.workload.bs, f.offset, t, f.what))
}

/// `--strict`: polling asked for, and another completion path observed.
fn strict_error(job: &Job, path: &CompletionPath) -> Option<String> {
    (job.policy.strict && job.io.complete != Complete::Irq && path.observed.is_some_and(|o| o != Path::Polled)).then(|| {
        format!(
            "--strict: asked for {} completion but the completion path observed was {} ({})",
            job.io.complete.name(),
            path.observed.map_or("?", Path::name),
            path.evidence.as_deref().unwrap_or("")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::hotloop::FailedIo;

    fn outcome(rec: Recorder, first_error: Option<FailedIo>, energy: Option<EnergyOutcome>) -> Outcome {
        let environment = Environment {
            iolab_version: String::new(),
            command_line: Vec::new(),
            hostname: None,
            kernel: String::new(),
            cpu_model: None,
            cpu_count: 1,
            started_at_unix_s: 0.0,
            clock: None,
            targets: Vec::new(),
            device_settings: Vec::new(),
            settings_changed: Vec::new(),
            user_space_driver: None,
            setup_not_applied: Vec::new(),
            placement: None,
        };
        let path = CompletionPath {
            requested: "irq".into(),
            mechanism: String::new(),
            expected: Path::Interrupt,
            reason: None,
            observed: None,
            evidence: None,
            fell_back: false,
        };
        let engine = EngineOutput {
            rec,
            window_s: 1.0,
            interrupted: false,
            first_error,
            clock: crate::engine::clock::Clock::calibrate().info(),
            verified_reads: 0,
            verified_written: 0,
            verify_mismatches: 0,
            ended_by_time: false,
            started_unix_s: 0.0,
            threads_applied: Vec::new(),
            steadystate: None,
        };
        let (rusage, meter_window_s, cost, observed, ring) = (Rusage::default(), None, None, None, None);
        Outcome { engine, environment, rusage, meter_window_s, cost, energy, path, observed, ring }
    }

    fn recorder() -> Recorder {
        let mut rec = Recorder::new(2, 1, 4096);
        rec.record(false, 0, 1_000);
        rec.record(false, 0, 3_000);
        rec.record(true, 0, 100_000);
        rec.finish();
        rec
    }

    #[test]
    fn the_total_merges_reads_and_writes_with_their_histograms() {
        let r = RunRecord::assemble(&Job::default(), outcome(recorder(), None, None));
        let res = r.results.as_ref().unwrap();
        assert_eq!((res.read.ios, res.write.ios, res.total.ios), (2, 1, 3));
        let lat = res.total.lat_ns.as_ref().unwrap();
        assert!(lat.max >= 100_000 && lat.min <= 1_000, "{} {}", lat.min, lat.max);
        assert!(res.total.lat_histogram.is_some());
        assert_eq!((r.status, r.error.as_deref()), (RunStatus::Ok, None));
        assert!(r.environment.clock.is_some(), "the engine's clock goes into the environment");
    }

    #[test]
    fn a_failed_io_fails_the_run_unless_errors_are_counted() {
        let io = || Some(FailedIo { file: 0, offset: 4096, write: true, errno: Some(libc::EIO), what: "EIO".into() });
        let with_target = || {
            let mut o = outcome(recorder(), io(), None);
            o.environment.targets = vec![crate::device::sysinfo::TargetInfo { path: "/dev/x".into(), ..Default::default() }];
            o
        };
        let mut job = Job::default();
        let r = RunRecord::assemble(&job, with_target());
        assert_eq!(r.status, RunStatus::Failed);
        let e = r.error.unwrap();
        assert!(e.starts_with("write of") && e.contains("offset 4096 on /dev/x failed: EIO") && e.contains("--continue-on-error"), "{e}");
        job.policy.continue_on_error = true;
        let r = RunRecord::assemble(&job, with_target());
        assert_eq!(r.status, RunStatus::Ok, "{:?}", r.error);
        assert!(r.error.is_some_and(|e| !e.contains("--continue-on-error")));
        // --strict fails a run whose errors are counted.
        job.policy.strict = true;
        assert_eq!(RunRecord::assemble(&job, with_target()).status, RunStatus::Failed);
    }

    #[test]
    fn required_energy_not_measured_fails_the_run_and_joins_the_error() {
        let energy = |require| Some(EnergyOutcome { require, report: None, idle: None });
        let r = RunRecord::assemble(&Job::default(), outcome(recorder(), None, energy(true)));
        assert_eq!(r.status, RunStatus::Failed);
        assert_eq!(r.error.as_deref(), Some("--require-energy: no energy was measured (the window never started)"));
        assert!(r.energy.is_none());
        let r = RunRecord::assemble(&Job::default(), outcome(recorder(), None, energy(false)));
        assert_eq!((r.status, r.error), (RunStatus::Ok, None));
    }
}
