//! `iolab precondition TARGET`: bring a device to steady state before measuring it, as the
//! SNIA PTS asks: sequential fills of the whole range, then rounds of random writes until the
//! IOPS of the last 5 rounds are steady (range within 20 % of the mean, fitted-line excursion
//! within 10 %). Writes are subject to the same safety rules as `iolab run`.
use super::run::RunBar;
use crate::analysis::steady;
use crate::plan::{size, Budget, Complete, Rw, Submit};
use crate::session::{execute, Quiet, RunUi};
use serde::Serialize;
use std::io::IsTerminal;

#[derive(clap::Args, Debug, Clone)]
pub struct PreconditionArgs {
    /// The file or block device to precondition.
    pub target: std::path::PathBuf,
    /// Sequential passes over the whole range.
    #[arg(long, default_value_t = 2)]
    pub fills: u32,
    /// Block size of the sequential fills.
    #[arg(long, default_value = "128k")]
    pub fill_bs: String,
    /// Block size of the random-write rounds.
    #[arg(long, default_value = "4k")]
    pub bs: String,
    #[arg(long, default_value_t = 32)]
    pub qd: u32,
    /// Length of one random-write round.
    #[arg(long, default_value = "60s")]
    pub round: String,
    /// Give up on steady state after this many rounds (SNIA: 25).
    #[arg(long, default_value_t = 25)]
    pub max_rounds: u32,
    #[arg(short = 'i', long, default_value = "io_uring")]
    pub interface: String,
    /// Bytes of the target to use (default: all of it).
    #[arg(long)]
    pub size: Option<String>,
    /// Allow writing to this exact block device, destroying its contents.
    #[arg(long, value_name = "DEVICE")]
    pub destructive: Vec<String>,
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Serialize)]
struct Report {
    target: String,
    fills: Vec<f64>,
    round_iops: Vec<f64>,
    steady: Option<steady::SteadyState>,
    reached_steady_state: bool,
}

pub fn main(a: &PreconditionArgs) -> i32 {
    // 1: the target did not reach steady state within the rounds.
    super::exit_code(precondition(a).map(|steady| if steady { 0 } else { 1 }))
}

fn precondition(a: &PreconditionArgs) -> Result<bool, String> {
    if let Some(dest) = &a.json {
        super::run::check_output(dest)?;
    }
    let target = a.target.display().to_string();
    let mut base = super::probe::probe_job(a.interface.parse()?, Submit::Syscall, Complete::Irq, false, &target);
    base.workload.qd = a.qd;
    base.timing.budget = Budget::Ios(1);
    base.targets.destructive = a.destructive.clone();
    base.targets.size = a.size.as_deref().map(size::parse_size).transpose().map_err(|e| format!("--size: {e}"))?;
    let round_s = size::parse_seconds(&a.round).map_err(|e| format!("--round: {e}"))?;
    let show = !a.quiet && std::io::stderr().is_terminal();

    let mut fills = Vec::new();
    for n in 1..=a.fills {
        let mut job = base.clone();
        job.workload.rw = Rw::Write;
        job.workload.bs = size::parse_size(&a.fill_bs).map_err(|e| format!("--fill-bs: {e}"))?;
        // One pass: the whole range, found from the target itself.
        let range = range_of(&job)?;
        job.timing.budget = Budget::Bytes(range / job.workload.bs * job.workload.bs);
        let rec = run_step(&job, show)?;
        let bw = rec.results.as_ref().map_or(0.0, |r| r.write.bw_bytes_per_s);
        println!("fill {n}/{}: {} at {}/s", a.fills, size::format_bytes(range as f64), size::format_bytes(bw));
        fills.push(bw);
    }
    let mut iops = Vec::new();
    let mut state = None;
    for n in 1..=a.max_rounds {
        let mut job = base.clone();
        job.workload.rw = Rw::Randwrite;
        job.workload.bs = size::parse_size(&a.bs).map_err(|e| format!("--bs: {e}"))?;
        job.timing.budget = Budget::Seconds(round_s);
        job.workload.seed = n as u64;
        let rec = run_step(&job, show)?;
        let x = rec.results.as_ref().map_or(0.0, |r| r.write.iops);
        iops.push(x);
        state = steady::check(&iops);
        match &state {
            Some(s) => println!(
                "round {n}: {:.0} IOPS; last {} rounds: range {:.1} %, slope {:.1} %{}",
                x,
                steady::WINDOW,
                s.range_fraction * 100.0,
                s.slope_fraction * 100.0,
                if s.steady { " - steady state" } else { "" }
            ),
            None => println!("round {n}: {x:.0} IOPS"),
        }
        if state.as_ref().is_some_and(|s| s.steady) {
            break;
        }
    }
    let reached = state.as_ref().is_some_and(|s| s.steady);
    if !reached {
        println!("no steady state after {} rounds", a.max_rounds);
    }
    if let Some(dest) = &a.json {
        super::run::write_json(dest, &Report { target, fills, round_iops: iops, steady: state, reached_steady_state: reached })?;
    }
    Ok(reached)
}

fn range_of(job: &crate::plan::Job) -> Result<u64, String> {
    let path = std::path::PathBuf::from(&job.targets.paths[0]);
    let drivers = crate::session::generic_drivers();
    // Opened only to learn the range: for reading, so nothing is asked to be writable.
    let access = crate::device::Access { writes: false, ..crate::session::access(job, &drivers) };
    let t = crate::device::open_targets(&access, &[path], false).map_err(|f| f.message)?;
    Ok(t[0].range_len)
}

fn run_step(job: &crate::plan::Job, show: bool) -> Result<crate::record::RunRecord, String> {
    let mut ui: Box<dyn RunUi> = if show { Box::new(RunBar::new(job)) } else { Box::new(Quiet) };
    let rec = execute(job, ui.as_mut(), None).map_err(|e| e.failure.message)?;
    if rec.status == crate::record::RunStatus::Interrupted {
        return Err("interrupted".into());
    }
    if let Some(e) = rec.error {
        return Err(e);
    }
    Ok(rec)
}
