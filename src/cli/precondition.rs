//! `iolab precondition TARGET`: bring a device to steady state before measuring it, as the
//! SNIA PTS asks: sequential fills of the whole range, then rounds of random writes until the
//! IOPS of the last 5 rounds are steady (range within 20 % of the mean, fitted-line excursion
//! within 10 %). Writes are subject to the same safety rules as `iolab run`. The loop is
//! `session::precondition`; this parses, shows and writes the report.
use super::run::RunBar;
use crate::analysis::steady;
use crate::failure::Failure;
use crate::plan::{size, Job};
use crate::session::precondition::{precondition as run, PreconditionUi, Preconditioning};
use crate::session::{Quiet, RunUi};
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

pub fn main(a: &PreconditionArgs) -> i32 {
    // 1: the target did not reach steady state within the rounds.
    super::exit_code(precondition(a).map(|steady| if steady { 0 } else { 1 }))
}

/// Lines on stdout, and a bar per step on a terminal.
pub(super) struct Lines {
    pub show: bool,
}

impl PreconditionUi for Lines {
    fn step(&mut self, job: &Job) -> Box<dyn RunUi> {
        if self.show {
            Box::new(RunBar::new(job))
        } else {
            Box::new(Quiet)
        }
    }
    fn fill(&mut self, n: u32, of: u32, bytes: u64, bw: f64) {
        println!("fill {n}/{of}: {} at {}/s", size::format_bytes(bytes as f64), size::format_bytes(bw));
    }
    fn round(&mut self, n: u32, iops: f64, state: Option<&steady::SteadyState>) {
        match state {
            Some(s) => println!(
                "round {n}: {:.0} IOPS; last {} rounds: range {:.1} %, slope {:.1} %{}",
                iops,
                steady::WINDOW,
                s.range_fraction * 100.0,
                s.slope_fraction * 100.0,
                if s.steady { " - steady state" } else { "" }
            ),
            None => println!("round {n}: {iops:.0} IOPS"),
        }
    }
}

fn precondition(a: &PreconditionArgs) -> Result<bool, Failure> {
    // No round can reach steady state: it would end with exit 1 having done nothing to judge.
    if a.max_rounds == 0 {
        return Err(Failure::invalid(format!(
            "--max-rounds 0 leaves no random-write round to reach steady state in: give at least 1 (steady state is judged over the last {}, SNIA's limit is 25)",
            steady::WINDOW
        )));
    }
    if let Some(dest) = &a.json {
        super::run::check_output(dest).map_err(Failure::invalid)?;
    }
    let p = Preconditioning {
        target: a.target.display().to_string(),
        interface: a.interface.parse::<crate::interfaces::InterfaceKind>()?,
        fills: a.fills,
        fill_bs: size::parse_size(&a.fill_bs).map_err(|e| Failure::invalid(format!("--fill-bs: {e}")))?,
        bs: size::parse_size(&a.bs).map_err(|e| Failure::invalid(format!("--bs: {e}")))?,
        qd: a.qd,
        round_s: size::parse_seconds(&a.round).map_err(|e| Failure::invalid(format!("--round: {e}")))?,
        max_rounds: a.max_rounds,
        size: a.size.as_deref().map(size::parse_size).transpose().map_err(|e| Failure::invalid(format!("--size: {e}")))?,
        destructive: a.destructive.clone(),
    };
    let report = run(&p, &mut Lines { show: !a.quiet && std::io::stderr().is_terminal() })?;
    if !report.reached_steady_state {
        println!("no steady state after {} rounds", a.max_rounds);
    }
    if let Some(dest) = &a.json {
        // As `iolab run`: an output that cannot be written after the work is done is a failure.
        super::run::write_json(dest, &report).map_err(Failure::failed)?;
    }
    Ok(report.reached_steady_state)
}
