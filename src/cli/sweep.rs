//! `iolab sweep PLAN`: expand a plan, show the run count and estimated time, then execute the
//! runs in their seeded order, committing each finished run to the results database. Ctrl-C
//! stops after keeping every finished run; `--resume` continues an unfinished sweep. Running
//! the sweep is `session::sweep`; this parses, shows its progress and says how it ended.
use super::run::IopsMeter;
use crate::energy::record::EnergyOptions;
use crate::plan::sweep::Expansion;
use crate::plan::Plan;
use crate::report::summary::format_count;
use crate::session::sweep::{refused, target_uses, DryRun, Outcome, SweepPlan, SweepUi};
pub use crate::session::sweep::{Resume, SweepEnd};
use crate::session::{Failure, FailureKind, RunUi};
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    /// The plan (TOML).
    pub plan: PathBuf,
    /// Targets replacing the plan's: one is every run's; several are the `target` dimension's
    /// values, a configuration each; DEV1+DEV2 is a set driven together in one run.
    pub targets: Vec<PathBuf>,
    /// Allow writing to this exact block device, destroying its contents (beside the plan's
    /// `destructive`).
    #[arg(long, value_name = "DEVICE")]
    pub destructive: Vec<String>,
    /// List the runs and exit.
    #[arg(long)]
    pub dry_run: bool,
    /// How long a run waits for a setting another live iolab holds (e.g. 30s, 10m; 0: fail at once).
    #[arg(long, value_name = "DURATION", default_value = super::WAIT_SETTINGS)]
    pub wait_settings: String,
    /// With --dry-run: list every combination the plan's rules drop (otherwise a count per reason).
    #[arg(long)]
    pub verbose: bool,
    /// Continue the unfinished sweep of this plan.
    #[arg(long)]
    pub resume: bool,
    /// Start a new sweep even if one of this plan is unfinished.
    #[arg(long, conflicts_with = "resume")]
    pub new: bool,
    /// Results database.
    #[arg(long, default_value = "iolab.db")]
    pub db: PathBuf,
    /// No progress display.
    #[arg(short, long)]
    pub quiet: bool,
    /// Pin every run's threads to a NUMA node's CPUs (local, a node's number, or off), in place
    /// of the plan's options.numa.
    #[arg(long, value_name = "local|NODE|off")]
    pub numa: Option<crate::plan::Numa>,
    #[command(flatten)]
    pub energy: super::EnergyArgs,
    #[command(flatten)]
    pub profile: crate::plan::profile::ProfileArg,
    #[command(flatten)]
    pub share: super::fleet::ShareArgs,
    /// A fio job file: drop this fio option (repeatable; `concurrency`: run jobs fio runs together one after another).
    #[arg(long = "fio-ignore", value_name = "OPTION")]
    pub fio_ignore: Vec<String>,
}

pub(crate) fn format_duration(s: f64) -> String {
    let s = s.round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// The sweep's display: the plan, one bar over the runs with ETA and the current run's live
/// IOPS on a terminal, a line per run otherwise (none with `quiet`).
struct SweepDisplay<'a> {
    unsupported: &'a [(String, String)],
    show: bool,
    quiet: bool,
    db: String,
    bar: Option<indicatif::ProgressBar>,
    iops: IopsMeter,
    label: String,
}

impl RunUi for SweepDisplay<'_> {
    fn note(&mut self, msg: &str) {
        if let Some(b) = &self.bar {
            b.set_message(format!("{} | {msg}", self.label));
        }
    }
    /// A line of its own, as the sweep's other lines: the user sees whom the sweep waits for.
    fn waiting(&mut self, msg: &str) {
        SweepUi::line(self, msg)
    }
    fn progress(&mut self, elapsed: f64, _total: Option<f64>, done: u64, ramp: bool) {
        let iops = self.iops.update(elapsed, done);
        if let Some(b) = &self.bar {
            b.set_message(format!("{} | {}{} IOPS", self.label, if ramp { "ramp " } else { "" }, format_count(iops)));
        }
    }
}

impl SweepUi for SweepDisplay<'_> {
    fn planned(&mut self, e: &Expansion, sweep_id: i64, to_do: usize, of: usize) {
        print_plan(e, to_do, false, false);
        println!("sweep #{sweep_id} in {}: {to_do} of {of} runs to do", self.db);
        for (what, why) in self.unsupported {
            println!("  cannot run {what}: {why}");
        }
    }
    fn begin(&mut self, runs: usize) {
        self.bar = self.show.then(|| {
            let b = indicatif::ProgressBar::new(runs as u64);
            b.set_style(
                indicatif::ProgressStyle::with_template("[{bar:30}] {pos}/{len} runs  {elapsed_precise} ETA {eta_precise}  {msg}")
                    .unwrap()
                    .progress_chars("=> "),
            );
            b
        });
    }
    fn run_start(&mut self, n: usize, of: usize, label: &str) {
        self.label = label.to_string();
        self.iops = IopsMeter::default();
        if self.bar.is_none() && !self.quiet {
            eprintln!("[{}/{of}] {label}", n + 1);
        }
    }
    fn line(&mut self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }
    fn run_done(&mut self) {
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }
    fn end(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// The combinations a plan's rules dropped: a line per reason with its count and one example
/// (`--verbose`: every one).
fn print_dropped(dropped: &[(String, String)], verbose: bool) {
    if verbose {
        for (key, why) in dropped {
            println!("  dropped {key}: {why}");
        }
        return;
    }
    let mut by: Vec<(&str, usize, &str)> = Vec::new();
    for (key, why) in dropped {
        match by.iter_mut().find(|(w, _, _)| *w == why.as_str()) {
            Some((_, n, _)) => *n += 1,
            None => by.push((why, 1, key)),
        }
    }
    for (why, n, key) in &by {
        println!("  dropped {n} × {why} (e.g. {key})");
    }
    if by.len() < dropped.len() {
        println!("  (--verbose lists every dropped combination)");
    }
}

pub(crate) fn print_plan(e: &Expansion, runs: usize, list: bool, verbose: bool) {
    let est = e.estimate_s(runs).map(format_duration).unwrap_or_else(|| "unknown (count budgets)".into());
    println!(
        "plan {}: {} configurations x {} replicates = {} runs; {} dropped; estimated {est}",
        e.name,
        e.configs.len(),
        e.replicates,
        e.order.len(),
        e.dropped.len()
    );
    print_dropped(&e.dropped, verbose);
    if let Some(setup) = e.configs.first().map(|c| &c.job.system.setup).filter(|s| !s.is_empty()) {
        println!(
            "set-up: {} for every run, through the settings journal and restored after it; where this machine does not take one the run goes on and its record says why (environment.setup_not_applied)",
            setup.join(", ")
        );
    }
    if !list {
        print_targets(e, None);
    }
    if list {
        for (n, (rep, i)) in e.order.iter().enumerate() {
            println!("  run {:>4}  replicate {}  {}", n + 1, rep + 1, e.configs[*i].key);
        }
    }
}

pub fn main(args: &SweepArgs) -> i32 {
    super::exit_code(sweep(args).map(|end| end.code))
}

fn sweep(args: &SweepArgs) -> Result<SweepEnd, Failure> {
    let text =
        std::fs::read_to_string(&args.plan).map_err(|e| Failure::invalid(format!("cannot read plan {}: {e}", args.plan.display())))?;
    let fio = crate::plan::fio::is_fio(&args.plan, &text);
    if fio && args.numa.is_some() || !fio && !args.fio_ignore.is_empty() {
        return Err(Failure::invalid(
            if fio { "--numa: a fio job file pins with numa_cpu_nodes=" } else { "--fio-ignore applies to fio job files" }.into(),
        ));
    }
    // A fio job file's jobs are each a plan of their own, made below.
    let plan = if fio { None } else { Some(crate::session::sweep::load(&text, args.numa)?) };
    let targets: Vec<String> = args.targets.iter().map(|p| p.display().to_string()).collect();
    let resume = if args.resume {
        Resume::Required
    } else if args.new {
        Resume::New
    } else if args.share.share.is_some() {
        // A share's sweep stays unfinished until every share is in: a share continues it.
        Resume::Auto
    } else {
        Resume::Refuse
    };
    let how = PlanRun {
        db: args.db.clone(),
        quiet: args.quiet,
        dry_run: args.dry_run,
        verbose: args.verbose,
        resume,
        again: format!("iolab sweep --resume {}{}", args.plan.display(), args.numa.map(|n| format!(" --numa {n}")).unwrap_or_default()),
        energy: args.energy.options()?,
        profile: args.profile.profile,
        share: args.share.clone(),
        destructive: args.destructive.clone(),
        wait_settings_s: super::wait_settings(&args.wait_settings)?,
    };
    let Some(plan) = plan else {
        // Each job a sweep: --resume continues the unfinished one and leaves the finished ones alone.
        let how = PlanRun { resume: if how.resume == Resume::Required { Resume::Auto } else { how.resume }, ..how };
        return super::export::sweep_fio(
            &args.plan,
            &text,
            &args.fio_ignore,
            &targets,
            how.dry_run,
            &mut |plan| run_plan(&crate::session::sweep::load(plan, None)?, &[], &[], None, &how),
            &mut |id, members| run_together(id, members, &how),
        );
    };
    run_plan(&plan, &targets, &[], None, &how)
}

/// A group of a fio job file's jobs run together (`session::group`), each stored as a sweep of
/// its own, as the file's other jobs are: its plan, its one planned run, its record (or why it
/// failed). A group is run whole each time (it is not resumed member by member).
fn run_together(id: &str, members: &[&crate::plan::fio::Mapped], how: &PlanRun) -> Result<SweepEnd, Failure> {
    use crate::session::group::{execute_group, Member};
    let mut jobs = Vec::with_capacity(members.len());
    for m in members {
        let e = crate::plan::sweep::expand(&m.text, &[]).map_err(|e| Failure::invalid(e.to_string()))?;
        let Some(c) = e.configs.first() else {
            return Err(Failure::invalid(format!("fio job {}: its plan has no configuration", m.name)));
        };
        let mut job = c.job.clone();
        job.targets.destructive.extend(how.destructive.iter().filter(|d| !c.job.targets.destructive.contains(d)).cloned());
        job.system.wait_settings_s = Some(how.wait_settings_s);
        jobs.push((c.key.clone(), job));
    }
    // The database is opened before anything runs: one that cannot be used changes nothing.
    let mut store = crate::store::Store::open(&how.db)?;
    let group: Vec<Member> =
        members.iter().zip(&jobs).map(|(m, (_, job))| Member { name: m.name.clone(), job, start_delay_s: m.start_delay_s }).collect();
    let energy = crate::session::Measure { energy: Some(&how.energy), profile: how.profile, idle: None, serving: None };
    let mut ui = crate::session::Quiet;
    let ran = execute_group(id, &group, &mut ui, energy)?;
    let mut code = 0;
    for ((m, (key, job)), rec) in members.iter().zip(&jobs).zip(&ran.runs) {
        let spec = serde_json::to_value(job).map_err(|e| Failure::failed(format!("{}: {e}", m.name)))?;
        let hash = crate::plan::sweep::plan_hash(&m.text, &[]);
        let sweep = store.create_sweep(&m.name, &m.text, &hash, job.workload.seed, &[(0, 0, key.clone(), spec)])?;
        let planned = store.planned_runs(sweep)?.into_iter().next().map(|p| p.id);
        match rec {
            Ok(r) => {
                let run = store.record_run(planned, r)?;
                let iops = r.results.as_ref().map_or(0.0, |x| x.total.iops);
                println!("{}: run {run} (sweep {sweep}, {key}), {iops:.0} IOPS, in group {id}", m.name);
                code = code.max(match r.status {
                    crate::record::RunStatus::Ok => 0,
                    crate::record::RunStatus::Failed => 1,
                    crate::record::RunStatus::Interrupted => 130,
                });
            }
            Err(f) => {
                if let Some(p) = planned {
                    store.record_failure(p, &f.message)?;
                }
                eprintln!("iolab: {}: {}", m.name, f.message);
                code = code.max(f.code());
            }
        }
    }
    if let Some(m) = &ran.not_restored {
        eprintln!("iolab: {m}");
        return Ok(SweepEnd { code: 1, finished: false });
    }
    Ok(SweepEnd { code, finished: true })
}

pub struct PlanRun {
    pub db: PathBuf,
    pub quiet: bool,
    pub dry_run: bool,
    /// A dry run lists every dropped combination.
    pub verbose: bool,
    pub resume: Resume,
    /// The command that continues this sweep, for the closing message.
    pub again: String,
    /// How every run is measured for energy (`iolab run`'s options).
    pub energy: EnergyOptions,
    /// `--profile`: every run profiled (after an unprofiled run of the same job).
    pub profile: crate::plan::profile::Profile,
    /// `--share`, `--handover`: this machine's part of a plan run on several.
    pub share: super::fleet::ShareArgs,
    /// `--destructive` of `iolab sweep` (a suite writes its own into each part's plan).
    pub destructive: Vec<String>,
    /// `--wait-settings`, seconds.
    pub wait_settings_s: u64,
}

/// The plan's targets, each with how its runs use it and, given their verdicts (a dry run), what
/// the write-safety checks say of it.
fn print_targets(e: &Expansion, verdicts: Option<&[Result<(), crate::device::DeviceError>]>) {
    let uses = target_uses(e.configs.iter().map(|c| &c.job));
    if uses.is_empty() {
        return;
    }
    println!("targets, each checked before the first run:");
    for (n, u) in uses.iter().enumerate() {
        let how = if u.writes { "read and written" } else { "read" };
        let verdict = match verdicts.and_then(|v| v.get(n)) {
            None => String::new(),
            Some(Ok(())) if u.writes => "; may be written".into(),
            Some(Ok(())) => "; may be read".into(),
            Some(Err(why)) => format!("; REFUSED: {why}"),
        };
        println!("  {}: {how} by {} of {} configurations{verdict}", u.path, u.configs, e.configs.len());
    }
}

/// How the sweep measures energy, for the plan: the sources, and the idle baseline (measured
/// once, or before each run after its settings).
pub(crate) fn print_energy(energy: &EnergyOptions) {
    let sources = if energy.config.sources.is_empty() { "every source found".to_string() } else { energy.config.sources.join(", ") };
    let log = energy.config.meter_log.as_ref().map(|l| format!(", meter log {}", l.display())).unwrap_or_default();
    let require = if energy.require { ", required (a run none measured is stored as failed)" } else { "" };
    println!("energy: {sources}{log}{require}");
    match energy.idle_baseline_s {
        Some(s) if energy.idle_per_run() => {
            println!("idle baseline: {s} s measured before each run, after its settings, for its own record")
        }
        Some(s) => println!("idle baseline: {s} s measured once before the first run, used for every run's record"),
        None => {}
    }
}

/// Run a plan (from a file or a built-in suite) and say how it went. `unsupported`: parts of
/// the study that cannot run here, stored as skipped runs with their reason.
pub(crate) fn run_plan(
    plan: &Plan,
    targets: &[String],
    unsupported: &[(String, String)],
    serving: Option<&crate::meters::server::Serving>,
    how: &PlanRun,
) -> Result<SweepEnd, Failure> {
    if how.dry_run {
        let DryRun { expansion: e, verdicts } = crate::session::sweep::dry_run(plan, targets, &how.destructive)?;
        print_plan(&e, e.order.len(), true, how.verbose);
        print_targets(&e, Some(&verdicts));
        print_energy(&how.energy.with_plan(e.idle)?);
        let profile = how.profile.union(e.profile);
        if profile.any() {
            println!("profile: {} (each run is made twice: unprofiled, then profiled; both stored in one record)", profile.name());
        }
        for (what, why) in unsupported {
            println!("  cannot run {what}: {why}");
        }
        refused(&verdicts)?;
        return Ok(SweepEnd { code: 0, finished: true });
    }
    // A server's URL is shown without its password.
    let db = crate::secret::redact_path(&how.db);
    let mut ui = SweepDisplay {
        unsupported,
        show: !how.quiet && std::io::stderr().is_terminal(),
        quiet: how.quiet,
        db: db.clone(),
        bar: None,
        iops: IopsMeter::default(),
        label: String::new(),
    };
    let plan = SweepPlan {
        plan,
        targets,
        destructive: &how.destructive,
        unsupported,
        db: &how.db,
        resume: how.resume,
        energy: &how.energy,
        profile: how.profile,
        share: how.share.share,
        handover: how.share.handover.as_deref(),
        split: how.share.split.as_deref(),
        wait_settings_s: how.wait_settings_s,
        serving,
    };
    let outcome = crate::session::sweep::run(&plan, &mut ui)?;
    let r = match &outcome {
        Outcome::AlreadyDone { name } => {
            println!("{name}: already done in {db}");
            return Ok(outcome.end());
        }
        Outcome::InterruptedBeforeRuns { message } => {
            eprintln!("iolab: {message}; every run stays to do");
            return Ok(outcome.end());
        }
        Outcome::Ran(r) => r,
    };
    let (id, left) = (r.sweep_id, r.left);
    println!(
        "sweep #{id}: {} runs stored ({} failed), {} failed before measuring, {} skipped, {left} left",
        r.stored, r.failed, r.early, r.skipped
    );
    let db_flag = if how.db.as_os_str() != "iolab.db" { format!(" --db {db}") } else { String::new() };
    let again = format!("{}{db_flag}", how.again);
    if let Some(f) = &r.stopped {
        eprintln!("iolab: {}", f.message);
        if f.kind == FailureKind::SettingsNotRestored {
            // Settings left changed: nothing may run until they are put back.
            println!("the sweep stopped: put the system settings back with `iolab restore`, then continue with: {again}");
        } else {
            println!("the sweep stopped: fix that, then continue with: {again}");
        }
    } else if left > 0 {
        println!("continue with: {again}");
    }
    // Failed runs of this sweep, also from before a resume: `--resume` does not redo them.
    if r.all_failed > 0 {
        println!(
            "{} runs of sweep #{id} failed: `iolab results --sweep {id} --status failed{db_flag}` lists them with the error",
            r.all_failed
        );
    }
    Ok(outcome.end())
}
