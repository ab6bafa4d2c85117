//! `iolab sweep PLAN`: expand a plan, show the run count and estimated time, then execute the
//! runs in their seeded order, committing each finished run to the results database. Ctrl-C
//! stops after keeping every finished run; `--resume` continues an unfinished sweep.
use super::run::{execute, IopsMeter, RunUi};
use crate::plan::sweep::{expand, plan_hash, Expansion};
use crate::plan::Job;
use crate::report::summary::format_count;
use crate::store::Store;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::Ordering;

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
    println!("plan {}: {} configurations x {} replicates = {} runs; {} dropped; estimated {est}", e.name, e.configs.len(), e.replicates, e.order.len(), e.dropped.len());
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
    super::exit_code(sweep(args))
}

fn sweep(args: &SweepArgs) -> Result<i32, String> {
    let text = std::fs::read_to_string(&args.plan).map_err(|e| format!("cannot read plan {}: {e}", args.plan.display()))?;
    let targets: Vec<String> = args.targets.iter().map(|p| p.display().to_string()).collect();
    let resume = if args.resume { Resume::Required } else if args.new { Resume::New } else { Resume::Refuse };
    let how = PlanRun { db: args.db.clone(), quiet: args.quiet, dry_run: args.dry_run, resume, again: format!("iolab sweep --resume {}", args.plan.display()) };
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

/// Execute plan text (from a file or a built-in suite). `unsupported`: parts of the study that
/// cannot run here, stored as skipped runs with their reason.
pub fn run_plan(text: &str, targets: &[String], unsupported: &[(String, String)], how: &PlanRun) -> Result<i32, String> {
    let e = expand(text, targets)?;
    if how.dry_run {
        print_plan(&e, e.order.len(), true);
        for (what, why) in unsupported {
            println!("  cannot run {what}: {why}");
        }
        return Ok(0);
    }
    let hash = plan_hash(text, targets);
    let mut store = Store::open(&how.db)?;
    let db = how.db.display();
    let unfinished = store.unfinished_sweep(&hash)?;
    let sweep_id = match (how.resume, unfinished) {
        (Resume::Required | Resume::Auto, Some(id)) => id,
        (Resume::Required, None) => return Err(format!("no unfinished sweep of this plan in {db}: run without --resume to start one")),
        (Resume::Refuse, Some(id)) => return Err(format!("sweep #{id} of this plan in {db} is unfinished: continue it with --resume, or start over with --new")),
        (Resume::Auto, None) if store.sweep_infos()?.iter().any(|s| s.plan_hash == hash) => {
            println!("{}: already done in {db}", e.name);
            return Ok(0);
        }
        _ => {
            let mut runs: Vec<(i64, u32, String, serde_json::Value)> = e.order.iter().enumerate()
                .map(|(n, (rep, i))| (n as i64, *rep, e.configs[*i].key.clone(), serde_json::to_value(&e.configs[*i].job).expect("job serialises")))
                .collect();
            let first_unsupported = runs.len() as i64;
            for (n, (what, _)) in unsupported.iter().enumerate() {
                runs.push((first_unsupported + n as i64, 0, what.clone(), serde_json::json!({ "unsupported": what })));
            }
            let id = store.create_sweep(&e.name, text, &hash, e.configs.first().map_or(1, |c| c.job.seed), &runs)?;
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
    let temp = if needs_temp {
        let size = e.configs[0].job.size.unwrap_or(crate::target::DEFAULT_TARGET_SIZE);
        Some(crate::target::create_default_target(size)?)
    } else {
        None
    };

    crate::engine::install_interrupt_handler();
    let show = !how.quiet && std::io::stderr().is_terminal();
    let bar = show.then(|| {
        let b = indicatif::ProgressBar::new(pending.len() as u64);
        b.set_style(indicatif::ProgressStyle::with_template("[{bar:30}] {pos}/{len} runs  {elapsed_precise} ETA {eta_precise}  {msg}").unwrap().progress_chars("=> "));
        b
    });
    let mut ui = SweepUi { bar, iops: IopsMeter::default(), label: String::new() };
    let (mut done, mut skipped, mut failed) = (0usize, 0usize, 0usize);
    let mut interrupted = false;
    let mut reasons: Vec<String> = Vec::new();
    for (n, run) in pending.iter().enumerate() {
        if crate::engine::STOP.load(Ordering::Relaxed) {
            interrupted = true;
            break;
        }
        let mut job: Job = serde_json::from_value(run.spec.clone()).map_err(|e| format!("planned run {} has an unreadable spec: {e}", run.id))?;
        if job.targets.is_empty() {
            if let Some(t) = &temp {
                job.targets = vec![t.path.display().to_string()];
            }
        }
        ui.label = format!("{} #{}", run.config_key, run.replicate + 1);
        ui.iops = IopsMeter::default();
        if ui.bar.is_none() && !how.quiet {
            eprintln!("[{}/{}] {}", n + 1, pending.len(), ui.label);
        }
        match execute(&job, &mut ui, Some(&crate::energy::record::EnergyOptions::default())) {
            Ok(rec) if rec.status == "interrupted" => {
                interrupted = true;
                break;
            }
            Ok(rec) => {
                if rec.status == "failed" {
                    failed += 1;
                }
                store.record_run(Some(run.id), &serde_json::to_value(&rec).map_err(|e| e.to_string())?)?;
                done += 1;
            }
            Err(f) => {
                // The machine cannot do this run: keep it, with the reason, as skipped.
                store.record_skip(run.id, &f.message)?;
                skipped += 1;
                // Each distinct reason once; the database keeps it for every run.
                let line = if reasons.contains(&f.message) { format!("skipped {}", run.config_key) } else { format!("skipped {}: {}", run.config_key, f.message) };
                reasons.push(f.message);
                match &ui.bar {
                    Some(b) => b.println(line),
                    None => eprintln!("{line}"),
                }
            }
        }
        if let Some(b) = &ui.bar {
            b.inc(1);
        }
        if n + 1 < pending.len() {
            let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(e.cooldown_s);
            while std::time::Instant::now() < until && !crate::engine::STOP.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
    if let Some(b) = &ui.bar {
        b.finish_and_clear();
    }
    let left = pending.len() - done - skipped;
    println!("sweep #{sweep_id}: {done} runs stored ({failed} failed), {skipped} skipped, {left} left");
    if left > 0 {
        println!("continue with: {}{}", how.again, if how.db.as_os_str() != "iolab.db" { format!(" --db {db}") } else { String::new() });
    }
    Ok(if interrupted { 130 } else { 0 })
}
