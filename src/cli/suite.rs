//! `iolab suite list` and `iolab suite run NAME`: the five studies as built-in sweeps.
use super::sweep::{run_plan, PlanRun, Resume};
use crate::studies::{find, Given, Part, Saturations, STUDIES};
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
                    // A part measured at saturation: one queue depth per stack, as it will run.
                    let plan = |quick| p.plan_counted(quick, &Given::default()).ok().flatten();
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
    let given = Given { targets: &targets, size: a.size.as_deref(), destructive: &a.destructive };
    let fills = suite.fills.map(|(full, quick)| fill_plan(a, if a.quick { quick } else { full }, full, &targets));
    let preconditioned = fills.as_ref().map(|f| f.said.clone());
    // A part measured at an earlier part's saturation points that is not run after it here needs
    // that part's stored result: refused before anything is done (the fills included).
    if !a.dry_run {
        for p in &parts {
            let Some(at) = p.at_saturation() else { continue };
            if parts.iter().any(|q| q.name == at.of) {
                continue;
            }
            if let Err(why) = stored_saturations(a, p, &given, preconditioned.as_deref())? {
                return Err(why);
            }
        }
    }
    println!("{}: {}{}", suite.id, suite.title, if a.quick { " (quick)" } else { "" });
    if let Some(f) = &fills {
        fill_targets(a, f, &targets)?;
    }
    let numa = a.numa.map(|n| format!(" --numa {n}")).unwrap_or_default();
    let again = format!("iolab suite run {}{}{numa}", suite.id, if a.quick { " --quick" } else { "" });
    let mut code = 0;
    for p in parts {
        println!("\n== {}: {}", p.name, p.feeds);
        let unsupported: Vec<(String, String)> = p.unsupported.iter().map(|(w, r)| (w.to_string(), r.to_string())).collect();
        // A part measured at saturation: planned from the earlier part's stored runs (stored by
        // now when it ran before it here; otherwise checked above).
        let plan = match p.at_saturation() {
            None => p.plan(a.quick, &given)?,
            Some(at) => match stored_saturations(a, p, &given, preconditioned.as_deref())? {
                Ok(found) => {
                    println!("  each stack at its saturation point in {} (sweep #{}): {}", at.of, found.sweep, found.said());
                    p.plan_at(a.quick, &given, &found)?
                }
                Err(why) if a.dry_run => {
                    println!("  each stack will run at its saturation point in {}'s stored runs, not there yet ({why}); listed here at every queue depth of {}'s J-curves, of which each stack keeps its own", at.of, at.of);
                    p.plan(a.quick, &given)?
                }
                Err(why) => return Err(why),
            },
        };
        let Some(plan) = plan else {
            for (w, r) in &unsupported {
                println!("  cannot run {w}: {r}");
            }
            continue;
        };
        let (plan, numa_kept) = as_run(plan, a, preconditioned.as_deref())?;
        if numa_kept {
            println!("  --numa {} not applied: this part varies numa itself", a.numa.expect("--numa given"));
        }
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

/// A part's plan text as this suite run runs it: with `--numa` (true: not applied, the part
/// varies numa itself), and the preconditioning words first (a top-level key, kept with the
/// stored plan).
fn as_run(plan: String, a: &SuiteRunArgs, preconditioned: Option<&str>) -> Result<(String, bool), String> {
    let (plan, kept) = match a.numa.map(|n| crate::plan::sweep::with_numa(&plan, n)).transpose()? {
        Some(Some(over)) => (over, false),
        Some(None) => (plan, true),
        None => (plan, false),
    };
    Ok(match preconditioned {
        Some(p) => (format!("preconditioned = {}\n{plan}", toml::Value::String(p.to_string())), kept),
        None => (plan, kept),
    })
}

/// Each stack's saturation point in the stored sweep of the part `p` is measured at
/// (`Part::at_saturation`), that sweep found by its plan as this suite run makes it (scale,
/// devices, --numa, preconditioning). Ok(Err): none to read, in one line that says which part
/// to run first.
fn stored_saturations(
    a: &SuiteRunArgs,
    p: &Part,
    given: &Given,
    preconditioned: Option<&str>,
) -> Result<Result<Saturations, String>, String> {
    let at = p.at_saturation().expect("a part measured at saturation");
    let of = crate::studies::part(at.of).expect("the part it depends on is a part");
    let study = STUDIES.iter().find(|s| s.parts.iter().any(|q| q.name == p.name)).map_or("", |s| s.id);
    let again = format!("iolab suite run {study}{} --part {}", if a.quick { " --quick" } else { "" }, of.name);
    let db = crate::secret::redact_path(&a.db);
    let none = |what: String| {
        Ok(Err(format!(
            "{} is measured at each stack's saturation point in {}'s stored runs, and {what}: run `{again}` first (with the same devices)",
            p.name, of.name
        )))
    };
    let Some(text) = of.plan(a.quick, given)? else { return none(format!("{} runs nothing here", of.name)) };
    let (text, _) = as_run(text, a, preconditioned)?;
    if !crate::store::exists(&a.db) {
        return none(format!("{db} does not exist"));
    }
    let store = crate::store::Store::open_existing(&a.db)?;
    let hash = crate::plan::sweep::plan_hash(&text, &[]);
    let Some(info) = store.sweep_infos()?.into_iter().filter(|s| s.plan_hash == hash).max_by_key(|s| s.id) else {
        return none(format!("{db} has no sweep of it at this scale on these devices"));
    };
    if info.pending > 0 {
        return none(format!("its sweep #{} in {db} is unfinished ({} runs left)", info.id, info.pending));
    }
    let sweep = crate::report::data::load_sweep(&store, info.id, &crate::store::RunFilter::default())?;
    Ok(Ok(Saturations::of(of.name, &sweep, p.every_run_target(given)?.as_deref())))
}

/// The study's preconditioning before its parts, decided before anything is done: its words
/// (they go into every part's stored plan) and whether to fill.
struct Fills {
    said: String,
    /// Sequential fills of every target to make (the user named them with --destructive, and
    /// this is no dry run).
    fill: Option<u32>,
    scale: String,
}

/// `fills` sequential fills of every target through `iolab precondition`'s loop (no
/// random-write rounds), where the user named the target with --destructive; otherwise (and in a
/// dry run) what would be done or why it is not.
fn fill_plan(a: &SuiteRunArgs, fills: u32, paper: u32, targets: &[String]) -> Fills {
    let scale = if fills == paper { String::new() } else { format!(" (--quick: {fills} of the paper's {paper})") };
    let why_not = if targets.is_empty() {
        Some("the suite runs on a temporary file; name the device and allow writing it with --destructive DEVICE".to_string())
    } else {
        targets.iter().find(|t| !a.destructive.contains(t)).map(|t| {
            format!("{t} was not named with --destructive (writing it destroys its contents); the paper filled its devices {paper} times")
        })
    };
    let (said, fill) = match why_not {
        Some(why) => (format!("not done: {why}"), None),
        None if a.dry_run => (format!("to be done: {fills} sequential fills of {} before the parts{scale}", targets.join(", ")), None),
        // Nothing measured in the words: the stored plan must read the same when the suite is
        // run again to continue it.
        None => (
            format!("done: {fills} sequential fills of {} (128 KiB writes, io_uring QD32) before the parts{scale}", targets.join(", ")),
            Some(fills),
        ),
    };
    Fills { said, fill, scale }
}

/// The fills `plan` decided on, then its words.
fn fill_targets(a: &SuiteRunArgs, plan: &Fills, targets: &[String]) -> Result<(), String> {
    use crate::session::precondition::{precondition, Preconditioning};
    if let Some(fills) = plan.fill {
        let scale = &plan.scale;
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
    }
    println!("preconditioning: {}", plan.said);
    Ok(())
}
