//! Bringing a target to steady state before measuring it, as the SNIA PTS asks: sequential fills
//! of the whole range, then rounds of random writes until the IOPS of the last rounds are steady
//! ([`steady::check`]). Each step is one job through [`execute`], so writes meet the same safety
//! rules as `iolab run`. What is shown while it works comes through [`PreconditionUi`].
use super::{execute, probe::probe_job, Failure, FailureKind, RunUi};
use crate::analysis::steady;
use crate::interfaces::InterfaceKind;
use crate::plan::{Budget, Complete, Job, Rw, Submit};
use crate::record::{RunRecord, RunStatus};
use serde::Serialize;

/// What to do, its sizes already read.
#[derive(Clone, Debug)]
pub struct Preconditioning {
    pub target: String,
    pub interface: InterfaceKind,
    /// Sequential passes over the whole range.
    pub fills: u32,
    /// Block size of the sequential fills.
    pub fill_bs: u64,
    /// Block size of the random-write rounds.
    pub bs: u64,
    pub qd: u32,
    /// Length of one random-write round, seconds.
    pub round_s: f64,
    /// Give up on steady state after this many rounds.
    pub max_rounds: u32,
    /// Bytes of the target to use (None: all of it).
    pub size: Option<u64>,
    /// Block devices the user allowed to be written.
    pub destructive: Vec<String>,
}

/// What the caller shows: each step's run, and a line per finished fill and round.
pub trait PreconditionUi {
    /// The display for the run of one step (a fill or a round).
    fn step(&mut self, job: &Job) -> Box<dyn RunUi>;
    /// Fill `n` of `of` wrote `bytes` at `bw` bytes/s.
    fn fill(&mut self, n: u32, of: u32, bytes: u64, bw: f64);
    /// Round `n` did `iops`; `state` is the steady-state check over the last rounds once there
    /// are enough of them.
    fn round(&mut self, n: u32, iops: f64, state: Option<&steady::SteadyState>);
}

/// What preconditioning did (also its JSON report).
#[derive(Serialize, Clone, Debug)]
pub struct Report {
    pub target: String,
    /// Bandwidth of each fill, bytes/s.
    pub fills: Vec<f64>,
    pub round_iops: Vec<f64>,
    pub steady: Option<steady::SteadyState>,
    pub reached_steady_state: bool,
}

/// Fill, then write randomly until steady state or `max_rounds`. Err: one line, of its kind (bad
/// input, a run that failed, Ctrl-C, settings left changed), as `iolab run` gives it.
pub fn precondition(p: &Preconditioning, ui: &mut dyn PreconditionUi) -> Result<Report, Failure> {
    let mut base = probe_job(p.interface, Submit::Syscall, Complete::Irq, false, &p.target);
    base.workload.qd = p.qd;
    base.timing.budget = Budget::Ios(1);
    base.targets.destructive = p.destructive.clone();
    base.targets.size = p.size;

    let mut fills = Vec::new();
    for n in 1..=p.fills {
        let mut job = base.clone();
        job.workload.rw = Rw::Write;
        job.workload.bs = p.fill_bs;
        // One pass: the whole range, found from the target itself.
        let range = range_of(&job)?;
        job.timing.budget = Budget::Bytes(range / job.workload.bs * job.workload.bs);
        let rec = run_step(&job, ui)?;
        let bw = rec.results.as_ref().map_or(0.0, |r| r.write.bw_bytes_per_s);
        ui.fill(n, p.fills, range, bw);
        fills.push(bw);
    }
    let mut iops = Vec::new();
    let mut state = None;
    for n in 1..=p.max_rounds {
        let mut job = base.clone();
        job.workload.rw = Rw::Randwrite;
        job.workload.bs = p.bs;
        job.timing.budget = Budget::Seconds(p.round_s);
        job.workload.seed = n as u64;
        let rec = run_step(&job, ui)?;
        let x = rec.results.as_ref().map_or(0.0, |r| r.write.iops);
        iops.push(x);
        state = steady::check(&iops);
        ui.round(n, x, state.as_ref());
        if state.as_ref().is_some_and(|s| s.steady) {
            break;
        }
    }
    let reached = state.as_ref().is_some_and(|s| s.steady);
    Ok(Report { target: p.target.clone(), fills, round_iops: iops, steady: state, reached_steady_state: reached })
}

/// The bytes of the job's target a pass covers.
fn range_of(job: &Job) -> Result<u64, Failure> {
    let path = std::path::PathBuf::from(&job.targets.paths[0]);
    let drivers = super::generic_drivers();
    // Opened only to learn the range: for reading, so nothing is asked to be writable.
    let access = crate::device::Access { writes: false, ..super::access(job, &drivers) };
    let t = crate::device::open_targets(&access, &[path], false)?;
    Ok(t[0].range_len)
}

/// One step's record; a step that failed (an I/O error on the target) or was interrupted ends
/// preconditioning with its kind.
fn run_step(job: &Job, ui: &mut dyn PreconditionUi) -> Result<RunRecord, Failure> {
    let mut show = ui.step(job);
    let rec = execute(job, show.as_mut(), Default::default()).map_err(|e| e.failure)?;
    if rec.status == RunStatus::Interrupted {
        return Err(Failure::new(FailureKind::Interrupted, "interrupted"));
    }
    if let Some(e) = rec.error {
        return Err(Failure::failed(e));
    }
    Ok(rec)
}
