//! `iolab suite list` and `iolab suite run NAME`: the five studies as built-in sweeps.
use super::sweep::{run_plan, PlanRun, Resume};
use crate::studies::{find, Given, STUDIES};
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
    /// S1 to S5.
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
                    let plan = |quick| p.plan(quick, &Given::default()).ok().flatten();
                    let scale = if let (Some(full), Some(quick)) = (plan(false), plan(true)) {
                        let runs = |plan: &str| crate::plan::sweep::expand(plan, &[]).map(|e| (e.order.len(), e.estimate_s(e.order.len())));
                        match (runs(&full), runs(&quick)) {
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

fn run(a: &SuiteRunArgs) -> Result<i32, String> {
    let suite = find(&a.name).ok_or_else(|| {
        format!(
            "no suite '{}': choose one of {} (see `iolab suite list`)",
            a.name,
            STUDIES.iter().map(|s| s.id).collect::<Vec<_>>().join(", ")
        )
    })?;
    let targets: Vec<String> = a.targets.iter().map(|p| p.display().to_string()).collect();
    let parts: Vec<_> = suite.parts.iter().filter(|p| a.part.as_deref().is_none_or(|x| p.name.starts_with(x))).collect();
    if parts.is_empty() {
        return Err(format!("suite {} has no part starting with '{}'", suite.id, a.part.as_deref().unwrap_or("")));
    }
    // The size every part's runs and the temporary target use: checked here, once, as a dry run
    // reads it nowhere else (`--size 0 --dry-run` planned every part and exited 0).
    if let Some(text) = a.size.as_deref() {
        let bytes = crate::plan::size::parse_size(text).map_err(|e| format!("--size: {e}"))?;
        if bytes < crate::plan::validate::MIN_BS {
            return Err(format!(
                "--size {text} is smaller than one {}-byte block: give the bytes of each target to use, e.g. 1g",
                crate::plan::validate::MIN_BS
            ));
        }
    }
    let energy = a.energy.options()?;
    println!("{}: {}{}", suite.id, suite.title, if a.quick { " (quick)" } else { "" });
    let preconditioned = match suite.fills {
        Some((full, quick)) => Some(fill_targets(a, if a.quick { quick } else { full }, full, &targets)?),
        None => None,
    };
    let numa = a.numa.map(|n| format!(" --numa {n}")).unwrap_or_default();
    let again = format!("iolab suite run {}{}{numa}", suite.id, if a.quick { " --quick" } else { "" });
    let mut code = 0;
    for p in parts {
        println!("\n== {}: {}", p.name, p.feeds);
        let unsupported: Vec<(String, String)> = p.unsupported.iter().map(|(w, r)| (w.to_string(), r.to_string())).collect();
        let given = Given { targets: &targets, size: a.size.as_deref(), destructive: &a.destructive };
        let Some(plan) = p.plan(a.quick, &given)? else {
            for (w, r) in &unsupported {
                println!("  cannot run {w}: {r}");
            }
            continue;
        };
        let plan = match a.numa.map(|n| (n, crate::plan::sweep::with_numa(&plan, n))) {
            Some((_, Ok(Some(over)))) => over,
            Some((n, Ok(None))) => {
                println!("  --numa {n} not applied: this part varies numa itself");
                plan
            }
            Some((_, Err(e))) => return Err(e),
            None => plan,
        };
        // A top-level key, so first: kept with the stored plan.
        let plan = match &preconditioned {
            Some(p) => format!("preconditioned = {}\n{plan}", toml::Value::String(p.clone())),
            None => plan,
        };
        let how = PlanRun {
            db: a.db.clone(),
            quiet: a.quiet,
            dry_run: a.dry_run,
            verbose: a.verbose,
            resume: Resume::Auto,
            again: again.clone(),
            energy: energy.clone(),
            profile: a.profile.profile,
            share: a.share.clone(),
            destructive: Vec::new(),
            wait_settings_s: super::wait_settings(&a.wait_settings)?,
        };
        // The targets are in the part's plan, as it uses them.
        let end = run_plan(&plan, &[], &unsupported, &how)?;
        // Failed runs do not stop the suite; a part that stopped (Ctrl-C, bad input, settings
        // left changed) does.
        if !end.finished {
            return Ok(end.code);
        }
        code = code.max(end.code);
    }
    Ok(code)
}

/// The study's preconditioning before its parts: `fills` sequential fills of every target
/// through `iolab precondition`'s loop (no random-write rounds), where the user named the target
/// with --destructive; otherwise (and in a dry run) what would be done or why it is not. The
/// words returned go into every part's stored plan.
fn fill_targets(a: &SuiteRunArgs, fills: u32, paper: u32, targets: &[String]) -> Result<String, String> {
    use crate::session::precondition::{precondition, Preconditioning};
    let scale = if fills == paper { String::new() } else { format!(" (--quick: {fills} of the paper's {paper})") };
    let why_not = if targets.is_empty() {
        Some("the suite runs on a temporary file; name the device and allow writing it with --destructive DEVICE".to_string())
    } else {
        targets.iter().find(|t| !a.destructive.contains(t)).map(|t| {
            format!("{t} was not named with --destructive (writing it destroys its contents); the paper filled its devices {paper} times")
        })
    };
    let said = match why_not {
        Some(why) => format!("not done: {why}"),
        None if a.dry_run => format!("to be done: {fills} sequential fills of {} before the parts{scale}", targets.join(", ")),
        None => {
            for t in targets {
                println!("preconditioning {t}: {fills} sequential fills{scale}");
                let p = Preconditioning {
                    target: t.clone(),
                    interface: crate::interfaces::InterfaceKind::IoUring,
                    fills,
                    fill_bs: 128 << 10,
                    bs: 4096,
                    qd: 32,
                    round_s: 0.0,
                    max_rounds: 0,
                    size: a.size.as_deref().map(crate::plan::size::parse_size).transpose().map_err(|e| format!("--size: {e}"))?,
                    destructive: a.destructive.clone(),
                };
                let show = !a.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr());
                let r = precondition(&p, &mut super::precondition::Lines { show })?;
                let mean = r.fills.iter().sum::<f64>() / r.fills.len().max(1) as f64;
                println!("preconditioned {t}: {}/s on average", crate::plan::size::format_bytes(mean));
            }
            // Nothing measured in the words: the stored plan must read the same when the suite is
            // run again to continue it.
            format!("done: {fills} sequential fills of {} (128 KiB writes, io_uring QD32) before the parts{scale}", targets.join(", "))
        }
    };
    println!("preconditioning: {said}");
    Ok(said)
}
