//! `iolab sweep PLAN`: expand a plan, show the run count and estimated time, then execute the
//! runs in their seeded order, committing each finished run to the results database. Ctrl-C
//! stops after keeping every finished run; `--resume` continues an unfinished sweep.
use super::run::IopsMeter;
use crate::plan::sweep::{expand, plan_hash, Expansion};
use crate::plan::Job;
use crate::record::RunStatus;
use crate::report::summary::format_count;
use crate::session::{execute, FailureKind, RunError, RunUi};
use crate::store::Store;
use std::io::IsTerminal;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct SweepArgs {
    /// The plan (TOML).
    pub plan: PathBuf,
    /// Targets for every run, replacing the plan's.
    pub targets: Vec<PathBuf>,
    /// List the runs and exit.
    #[arg(long)]
    pub dry_run: bool,
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
}

pub fn format_duration(s: f64) -> String {
    let s = s.round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// The sweep's display: one bar over the runs with ETA, and the current run's live IOPS.
struct SweepUi {
    bar: Option<indicatif::ProgressBar>,
    iops: IopsMeter,
    label: String,
}

impl RunUi for SweepUi {
    fn note(&mut self, msg: &str) {
        if let Some(b) = &self.bar {
            b.set_message(format!("{} | {msg}", self.label));
        }
    }
    fn progress(&mut self, elapsed: f64, _total: Option<f64>, done: u64, ramp: bool) {
        let iops = self.iops.update(elapsed, done);
        if let Some(b) = &self.bar {
            b.set_message(format!("{} | {}{} IOPS", self.label, if ramp { "ramp " } else { "" }, format_count(iops)));
        }
    }
}

pub fn print_plan(e: &Expansion, runs: usize, list: bool) {
    let est = e.estimate_s(runs).map(format_duration).unwrap_or_else(|| "unknown (count budgets)".into());
    println!(
        "plan {}: {} configurations x {} replicates = {} runs; {} dropped; estimated {est}",
        e.name,
        e.configs.len(),
        e.replicates,
        e.order.len(),
        e.dropped.len()
    );
    for (key, why) in &e.dropped {
        println!("  dropped {key}: {why}");
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

fn sweep(args: &SweepArgs) -> Result<SweepEnd, String> {
    let text = std::fs::read_to_string(&args.plan).map_err(|e| format!("cannot read plan {}: {e}", args.plan.display()))?;
    let targets: Vec<String> = args.targets.iter().map(|p| p.display().to_string()).collect();
    let resume = if args.resume {
        Resume::Required
    } else if args.new {
        Resume::New
    } else {
        Resume::Refuse
    };
    let how = PlanRun {
        db: args.db.clone(),
        quiet: args.quiet,
        dry_run: args.dry_run,
        resume,
        again: format!("iolab sweep --resume {}", args.plan.display()),
    };
    run_plan(&text, &targets, &[], &how)
}

/// What to do about an earlier sweep of the same plan.
#[derive(Clone, Copy, PartialEq, Eq)]
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

pub struct PlanRun {
    pub db: PathBuf,
    pub quiet: bool,
    pub dry_run: bool,
    pub resume: Resume,
    /// The command that continues this sweep, for the closing message.
    pub again: String,
}

/// How a sweep ended: its exit code, and whether it went through to the end (a suite goes on
/// to its next part only then).
pub struct SweepEnd {
    /// 0; 1 when a run of the sweep failed or settings were left changed; 2 on bad input; 130
    /// after Ctrl-C.
    pub code: i32,
    /// Every planned run was tried; false when the sweep stopped early.
    pub finished: bool,
}

/// Execute plan text (from a file or a built-in suite). `unsupported`: parts of the study that
/// cannot run here, stored as skipped runs with their reason.
pub fn run_plan(text: &str, targets: &[String], unsupported: &[(String, String)], how: &PlanRun) -> Result<SweepEnd, String> {
    let e = expand(text, targets)?;
    let end = |code| Ok(SweepEnd { code, finished: true });
    if how.dry_run {
        print_plan(&e, e.order.len(), true);
        for (what, why) in unsupported {
            println!("  cannot run {what}: {why}");
        }
        return end(0);
    }
    let hash = plan_hash(text, targets);
    let mut store = Store::open(&how.db)?;
    let db = how.db.display();
    let unfinished = store.unfinished_sweep(&hash)?;
    let sweep_id = match (how.resume, unfinished) {
        (Resume::Required | Resume::Auto, Some(id)) => id,
        (Resume::Required, None) => return Err(format!("no unfinished sweep of this plan in {db}: run without --resume to start one")),
        (Resume::Refuse, Some(id)) => {
            return Err(format!("sweep #{id} of this plan in {db} is unfinished: continue it with --resume, or start over with --new"))
        }
        (Resume::Auto, None) if store.sweep_infos()?.iter().any(|s| s.plan_hash == hash) => {
            println!("{}: already done in {db}", e.name);
            return end(0);
        }
        _ => {
            let mut runs: Vec<(i64, u32, String, serde_json::Value)> = e
                .order
                .iter()
                .enumerate()
                .map(|(n, (rep, i))| {
                    (n as i64, *rep, e.configs[*i].key.clone(), serde_json::to_value(&e.configs[*i].job).expect("job serialises"))
                })
                .collect();
            let first_unsupported = runs.len() as i64;
            for (n, (what, _)) in unsupported.iter().enumerate() {
                runs.push((first_unsupported + n as i64, 0, what.clone(), serde_json::json!({ "unsupported": what })));
            }
            let id = store.create_sweep(&e.name, text, &hash, e.configs.first().map_or(1, |c| c.job.workload.seed), &runs)?;
            // What cannot run here is kept, as skipped with the reason, not left out.
            for p in store.planned_runs(id)?.iter().filter(|p| p.spec.get("unsupported").is_some()) {
                let why = unsupported.iter().find(|(w, _)| *w == p.config_key).map_or("", |x| x.1.as_str());
                store.record_skip(p.id, why)?;
            }
            id
        }
    };
    let planned = store.planned_runs(sweep_id)?;
    let pending: Vec<_> = planned.iter().filter(|r| r.status == "planned").collect();
    print_plan(&e, pending.len(), false);
    println!("sweep #{sweep_id} in {db}: {} of {} runs to do", pending.len(), planned.len());
    for (what, why) in unsupported {
        println!("  cannot run {what}: {why}");
    }

    // One temporary target for the whole sweep when the plan names none.
    let needs_temp = pending.iter().any(|r| r.spec["targets"].as_array().is_some_and(|t| t.is_empty()));
    let cancel = crate::engine::install_interrupt_handler();
    let temp = if needs_temp {
        let size = e.configs[0].job.targets.size.unwrap_or(crate::device::DEFAULT_TARGET_SIZE);
        match crate::device::create_default_target(size, cancel) {
            Ok(t) => Some(t),
            Err(m) if cancel.is_cancelled() => {
                eprintln!("iolab: {m}; every run stays to do");
                return Ok(SweepEnd { code: 130, finished: false });
            }
            Err(m) => return Err(m),
        }
    } else {
        None
    };

    let show = !how.quiet && std::io::stderr().is_terminal();
    let bar = show.then(|| {
        let b = indicatif::ProgressBar::new(pending.len() as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template("[{bar:30}] {pos}/{len} runs  {elapsed_precise} ETA {eta_precise}  {msg}")
                .unwrap()
                .progress_chars("=> "),
        );
        b
    });
    let mut ui = SweepUi { bar, iops: IopsMeter::default(), label: String::new() };
    // failed: of the stored runs; early: failed before measuring, so stored as failed planned runs.
    let (mut done, mut skipped, mut failed, mut early) = (0usize, 0usize, 0usize, 0usize);
    let mut interrupted = false;
    // Why the sweep stopped before its end: exit code and the message.
    let mut stopped: Option<(i32, String)> = None;
    let mut reasons: Vec<String> = Vec::new();
    for (n, run) in pending.iter().enumerate() {
        if cancel.is_cancelled() {
            interrupted = true;
            break;
        }
        let mut job: Job =
            serde_json::from_value(run.spec.clone()).map_err(|e| format!("planned run {} has an unreadable spec: {e}", run.id))?;
        if job.targets.paths.is_empty() {
            if let Some(t) = &temp {
                job.targets.paths = vec![t.path.display().to_string()];
            }
        }
        ui.label = format!("{} #{}", run.config_key, run.replicate + 1);
        ui.iops = IopsMeter::default();
        if ui.bar.is_none() && !how.quiet {
            eprintln!("[{}/{}] {}", n + 1, pending.len(), ui.label);
        }
        let mut store_record = |rec: &crate::record::RunRecord| -> Result<(), String> {
            if rec.status == RunStatus::Interrupted {
                // Not kept: the planned run stays to do, and `--resume` runs it again.
                interrupted = true;
                return Ok(());
            }
            failed += usize::from(rec.status == RunStatus::Failed);
            done += 1;
            store.record_run(Some(run.id), &serde_json::to_value(rec).map_err(|e| e.to_string())?).map(drop)
        };
        let outcome = execute(&job, &mut ui, Some(&crate::energy::record::EnergyOptions::default()));
        let (what, why) = match outcome {
            Ok(rec) => {
                store_record(&rec)?;
                (None, None)
            }
            Err(RunError { failure: f, record }) => match f.kind {
                // The machine cannot do this run: keep it, with the reason, as skipped.
                FailureKind::Unsupported => {
                    store.record_skip(run.id, &f.message)?;
                    skipped += 1;
                    (Some("skipped"), Some(f.message))
                }
                // Tried and went wrong: kept as failed with the error; the next may work.
                FailureKind::Failed => {
                    store.record_failure(run.id, &f.message)?;
                    early += 1;
                    (Some("failed"), Some(f.message))
                }
                FailureKind::Interrupted => {
                    interrupted = true;
                    (None, None)
                }
                // Every later run would meet it too: stop; this run stays to do.
                FailureKind::Invalid => {
                    stopped = Some((f.code(), format!("run {} #{}: {}", run.config_key, run.replicate + 1, f.message)));
                    (None, None)
                }
                // No run may go on a machine left changed: stop at once. A measurement made
                // before the restore failed is whole and kept.
                FailureKind::SettingsNotRestored => {
                    if let Some(rec) = &record {
                        store_record(rec)?;
                    }
                    stopped = Some((f.code(), f.message));
                    (None, None)
                }
            },
        };
        if let (Some(what), Some(why)) = (what, why) {
            // Each distinct reason once; the database keeps it for every run.
            let line =
                if reasons.contains(&why) { format!("{what} {}", run.config_key) } else { format!("{what} {}: {why}", run.config_key) };
            reasons.push(why);
            match &ui.bar {
                Some(b) => b.println(line),
                None => eprintln!("{line}"),
            }
        }
        if interrupted || stopped.is_some() {
            break;
        }
        if let Some(b) = &ui.bar {
            b.inc(1);
        }
        if n + 1 < pending.len() {
            let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(e.cooldown_s);
            while std::time::Instant::now() < until && !cancel.is_cancelled() {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
    if let Some(b) = &ui.bar {
        b.finish_and_clear();
    }
    let left = pending.len() - done - skipped - early;
    println!("sweep #{sweep_id}: {done} runs stored ({failed} failed), {early} failed before measuring, {skipped} skipped, {left} left");
    let again = format!("{}{}", how.again, if how.db.as_os_str() != "iolab.db" { format!(" --db {db}") } else { String::new() });
    if let Some((code, why)) = &stopped {
        eprintln!("iolab: {why}");
        if *code == 1 {
            // Settings left changed: nothing may run until they are put back.
            println!("the sweep stopped: put the system settings back with `iolab restore`, then continue with: {again}");
        } else {
            println!("the sweep stopped: fix that, then continue with: {again}");
        }
    } else if left > 0 {
        println!("continue with: {again}");
    }
    // Failed runs of this sweep, also from before a resume: `--resume` does not redo them.
    let all_failed = store.sweep(sweep_id)?.map_or(0, |s| s.failed);
    if all_failed > 0 {
        println!(
            "{all_failed} runs of sweep #{sweep_id} failed: `iolab results --sweep {sweep_id} --status failed{}` lists them with the error",
            if how.db.as_os_str() != "iolab.db" { format!(" --db {db}") } else { String::new() }
        );
    }
    let code = match (&stopped, interrupted) {
        (Some((code, _)), _) => *code,
        (None, true) => 130,
        (None, false) => i32::from(all_failed > 0),
    };
    Ok(SweepEnd { code, finished: stopped.is_none() && !interrupted })
}
