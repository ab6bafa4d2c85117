//! `iolab suite list` and `iolab suite run NAME`: the six studies (the five papers and IISWC'26's energy study) as built-in sweeps.
use super::sweep::{run_plan, PlanRun, Resume};
use crate::failure::Failure;
use crate::session::precondition::PreconditionUi;
use crate::session::sweep::SweepEnd;
use crate::studies::run::{Event, SuiteRun, SuiteUi};
use crate::studies::{find, STUDIES};
use std::path::PathBuf;

// Parsed once per process (as `Cmd`): boxing `SuiteRunArgs` would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand, Debug, Clone)]
pub enum SuiteCmd {
    /// The built-in suites, their parts and what each feeds.
    List,
    /// Run a suite's parts as sweeps into the results database (re-running continues it).
    Run(SuiteRunArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct SuiteRunArgs {
    /// S1 to S6.
    pub name: String,
    /// Devices (default: one temporary file); each part uses them as its paper did (`suite list`
    /// says how): all together, each alone (a line per device), or the first alone and all
    /// together. DEV1+DEV2 is a set driven together as one.
    pub targets: Vec<PathBuf>,
    /// Small sweeps and short runs that finish in minutes.
    #[arg(long)]
    pub quick: bool,
    /// Only the parts whose name starts with this (e.g. S2.4).
    #[arg(long)]
    pub part: Option<String>,
    /// Bytes of each target to use (and the temporary target's size).
    #[arg(long)]
    pub size: Option<String>,
    /// Allow writing to this exact block device, destroying its contents.
    #[arg(long, value_name = "DEVICE")]
    pub destructive: Vec<String>,
    #[arg(long, default_value = "iolab.db")]
    pub db: PathBuf,
    /// List the runs and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// How long a run waits for a setting another live iolab holds (e.g. 30s, 10m; 0: fail at once).
    #[arg(long, value_name = "DURATION", default_value = super::WAIT_SETTINGS)]
    pub wait_settings: String,
    /// With --dry-run: list every combination the parts' rules drop (otherwise a count per reason).
    #[arg(long)]
    pub verbose: bool,
    #[arg(short, long)]
    pub quiet: bool,
    /// Pin every run's threads to a NUMA node's CPUs (local, a node's number, or off), in place
    /// of what the study's parts ask (S2's: local).
    #[arg(long, value_name = "local|NODE|off")]
    pub numa: Option<crate::plan::Numa>,
    #[command(flatten)]
    pub energy: super::EnergyArgs,
    #[command(flatten)]
    pub profile: crate::plan::profile::ProfileArg,
    #[command(flatten)]
    pub share: super::fleet::ShareArgs,
}

pub fn main(cmd: &SuiteCmd) -> i32 {
    match cmd {
        SuiteCmd::List => {
            for s in STUDIES {
                println!("{}  {}", s.id, s.title);
                for p in s.parts {
                    let scale = if let (Some(full), Some(quick)) = (p.counted(false), p.counted(true)) {
                        match (full, quick) {
                            (Ok((n, t)), Ok((qn, qt))) => format!(
                                "{n} runs ~{} | quick: {qn} runs ~{}",
                                t.map(super::sweep::format_duration).unwrap_or_default(),
                                qt.map(super::sweep::format_duration).unwrap_or_default()
                            ),
                            _ => String::new(),
                        }
                    } else {
                        "nothing runnable".into()
                    };
                    println!("  {:<20} {scale}\n  {:<20} feeds: {}", p.name, "", p.feeds);
                    if let Some(r) = &p.runs {
                        println!("  {:<20} devices: {}", "", r.devices.said());
                    }
                    if let Some(at) = p.at_saturation() {
                        println!("  {:<20} queue depth: each stack's saturation point in {}'s stored runs", "", at.of);
                    }
                    for (what, why) in p.unsupported {
                        println!("  {:<20} cannot run {what}: {why}", "");
                    }
                }
            }
            0
        }
        SuiteCmd::Run(a) => super::exit_code(run(a)),
    }
}

fn run(a: &SuiteRunArgs) -> Result<i32, Failure> {
    let study = find(&a.name).ok_or_else(|| {
        Failure::invalid(format!(
            "no suite '{}': choose one of {} (see `iolab suite list`)",
            a.name,
            STUDIES.iter().map(|s| s.id).collect::<Vec<_>>().join(", ")
        ))
    })?;
    let energy = a.energy.options()?;
    let wait_settings_s = super::wait_settings(&a.wait_settings)?;
    let numa = a.numa.map(|n| format!(" --numa {n}")).unwrap_or_default();
    let how = PlanRun {
        db: a.db.clone(),
        quiet: a.quiet,
        dry_run: a.dry_run,
        verbose: a.verbose,
        resume: Resume::Auto,
        again: format!("iolab suite run {}{}{numa}", study.id, if a.quick { " --quick" } else { "" }),
        energy,
        profile: a.profile.profile,
        share: a.share.clone(),
        // A suite writes its own into each part's plan.
        destructive: Vec::new(),
        wait_settings_s,
    };
    let suite = SuiteRun {
        study,
        targets: a.targets.iter().map(|p| p.display().to_string()).collect(),
        quick: a.quick,
        part: a.part.clone(),
        size: a.size.clone(),
        destructive: a.destructive.clone(),
        db: a.db.clone(),
        dry_run: a.dry_run,
        numa: a.numa,
    };
    let show = !a.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let mut ui = Lines { study, quick: a.quick, how, fills: super::precondition::Lines { show } };
    Ok(crate::studies::run::run(&suite, &mut ui)?.code)
}

/// The suite on stdout; each part's sweep as `iolab sweep` runs and shows it.
struct Lines {
    study: &'static crate::studies::Study,
    quick: bool,
    how: PlanRun,
    fills: super::precondition::Lines,
}

impl SuiteUi for Lines {
    fn event(&mut self, event: Event) {
        match event {
            Event::Begin => println!("{}: {}{}", self.study.id, self.study.title, if self.quick { " (quick)" } else { "" }),
            Event::Filling { target, fills, scale } => println!("preconditioning {target}: {fills} sequential fills{scale}"),
            Event::Filled { target, bytes_per_s } => {
                println!("preconditioned {target}: {}/s on average", crate::plan::size::format_bytes(bytes_per_s))
            }
            Event::Preconditioning(said) => println!("preconditioning: {said}"),
            Event::Part(p) => println!("\n== {}: {}", p.name, p.feeds),
            Event::CannotRun { what, why } => println!("  cannot run {what}: {why}"),
            Event::NumaNotApplied(n) => println!("  --numa {n} not applied: this part varies numa itself"),
            Event::AtSaturation { of, found } => println!("  each stack at its saturation point in {of} (sweep #{}): {}", found.sweep, found.said()),
            Event::Served(line) => println!("  {line}"),
            Event::SaturationNotYet { of, why } => println!(
                "  each stack will run at its saturation point in {of}'s stored runs, not there yet ({why}); listed here at every queue depth of {of}'s J-curves, of which each stack keeps its own"
            ),
        }
    }

    fn precondition(&mut self) -> &mut dyn PreconditionUi {
        &mut self.fills
    }

    fn run_part(
        &mut self,
        plan: &crate::plan::Plan,
        targets: &[String],
        share: Option<crate::session::sweep::Share>,
        unsupported: &[(String, String)],
        serving: Option<&crate::meters::server::Serving>,
    ) -> Result<SweepEnd, Failure> {
        // A served part runs each server's configurations as a share of its one sweep.
        let kept = self.how.share.share;
        self.how.share.share = share.or(kept);
        let ran = run_plan(plan, targets, unsupported, serving, &self.how);
        self.how.share.share = kept;
        ran
    }
}
