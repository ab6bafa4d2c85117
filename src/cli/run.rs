//! `iolab run`: parse → session → summary/JSON; and `iolab restore`.
use crate::plan::Job;
use crate::record::RunStatus;
use crate::report::summary;
use crate::session::{execute, Measure, Quiet, RunError, RunUi};
use std::io::IsTerminal;

/// `iolab restore`: put back what a killed iolab left changed. `after`: the pid of an aborting
/// iolab that started this one (settings::abort); wait for it to end, then say what was restored
/// on stderr, where its abort message went.
pub fn restore_main(after: Option<u32>) -> i32 {
    if let Some(pid) = after {
        crate::settings::crash::wait_for_exit(pid, std::time::Duration::from_secs(60));
    }
    match (after, crate::settings::Settings::system().restore_journal()) {
        (Some(_), Ok(lines)) => {
            for l in lines {
                eprintln!("iolab: restored after the abort: {l}");
            }
            0
        }
        (Some(_), Err(e)) => {
            eprintln!("iolab: restoring after the abort failed: {e}");
            1
        }
        (None, Ok(lines)) if lines.is_empty() => {
            println!("nothing to restore: no system settings are recorded as changed");
            0
        }
        (None, Ok(lines)) => {
            for l in lines {
                println!("{l}");
            }
            0
        }
        (None, Err(e)) => {
            eprintln!("iolab: {e}");
            1
        }
    }
}

/// Check before any I/O that a JSON destination can be written, so a long or destructive run
/// is not wasted on a typo.
pub(crate) fn check_output(dest: &str) -> Result<(), String> {
    Ok(crate::output::check_writable("--json", dest)?)
}

/// Write JSON whole or not at all (see `output`).
pub(crate) fn write_json(dest: &str, value: &impl serde::Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| format!("cannot encode JSON: {e}"))?;
    Ok(crate::output::write_bytes(dest, format!("{text}\n").as_bytes())?)
}

/// Live IOPS from successive progress calls.
#[derive(Default)]
pub struct IopsMeter {
    last: (f64, u64),
}
impl IopsMeter {
    pub fn update(&mut self, elapsed: f64, done: u64) -> f64 {
        let iops = if elapsed > self.last.0 { done.saturating_sub(self.last.1) as f64 / (elapsed - self.last.0) } else { 0.0 };
        self.last = (elapsed, done);
        iops
    }
}

/// One run's bar on the terminal: position, ETA and live IOPS.
pub struct RunBar {
    bar: indicatif::ProgressBar,
    iops: IopsMeter,
    budget: crate::plan::Budget,
    bs: u64,
}
impl RunBar {
    pub fn new(job: &Job) -> RunBar {
        let bar = indicatif::ProgressBar::new(1000);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {elapsed_precise} ETA {eta}  {msg}")
                .unwrap()
                .progress_chars("=> "),
        );
        RunBar { bar, iops: IopsMeter::default(), budget: job.timing.budget, bs: job.workload.bs }
    }
}
impl RunUi for RunBar {
    fn note(&mut self, msg: &str) {
        self.bar.set_message(msg.to_string());
        self.bar.tick();
    }
    fn progress(&mut self, elapsed: f64, total: Option<f64>, done: u64, ramp: bool) {
        let iops = self.iops.update(elapsed, done);
        // A time with a count: whichever is nearer its end.
        let by_time = total.map_or(0.0, |t| elapsed / t);
        let by_count = self.budget.ios(self.bs).map_or(0.0, |n| done as f64 / n as f64);
        let frac = by_time.max(by_count);
        self.bar.set_position((frac * 1000.0).min(1000.0) as u64);
        self.bar.set_message(format!("{}{} IOPS", if ramp { "ramp " } else { "" }, summary::format_count(iops)));
    }
    fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// `iolab run`: returns the process exit code.
pub fn main(args: &super::RunArgs) -> i32 {
    match super::export::run_group(args) {
        Ok(Some((id, members))) => return run_group(args, &id, &members),
        Ok(None) => {}
        Err(e) => {
            eprintln!("iolab: {e}");
            return 2;
        }
    }
    let job = match super::export::run_job(args) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("iolab: {e}");
            return 2;
        }
    };
    if let Some(Err(e)) = args.json.as_deref().map(check_output) {
        eprintln!("iolab: {e}");
        return 2;
    }
    let mut ui: Box<dyn RunUi> = if !args.quiet && std::io::stderr().is_terminal() { Box::new(RunBar::new(&job)) } else { Box::new(Quiet) };
    // `--idle` without `--idle-baseline` would measure nothing: refused with the reason.
    let energy = match args.energy.options().and_then(|e| e.with_plan(Default::default())) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("iolab: {e}");
            return 2;
        }
    };
    let (rec, not_restored) =
        match execute(&job, ui.as_mut(), Measure { energy: Some(&energy), profile: args.profile.profile, idle: None, serving: None }) {
            Ok(rec) => (rec, None),
            // The run was made; show it, then say the machine is left changed.
            Err(RunError { record: Some(rec), failure }) => (*rec, Some(failure.message)),
            Err(RunError { failure: f, .. }) => {
                eprintln!("iolab: {}", f.message);
                return f.code();
            }
        };
    let mut text = summary::render(&rec);
    if let Some(set) = &rec.fileset {
        text.push_str(&file_set_lines(set));
    }
    if args.json.as_deref() == Some("-") {
        eprint!("{text}")
    } else {
        print!("{text}")
    }
    if let Some(dest) = &args.json {
        if let Err(e) = write_json(dest, &rec) {
            eprintln!("iolab: {e}");
            return 1;
        }
    }
    if let Some(e) = &rec.error {
        let errors = rec.results.as_ref().map_or(0, |r| r.total.errors);
        if job.policy.continue_on_error && errors > 0 {
            eprintln!("iolab: {errors} I/O errors counted; the first: {e}")
        } else {
            eprintln!("iolab: {e}")
        }
    }
    if let Some(m) = not_restored {
        eprintln!("iolab: {m}");
        return 1;
    }
    // With --continue-on-error, errors are counted results, not a failed run.
    match rec.status {
        RunStatus::Failed => 1,
        RunStatus::Interrupted => 130,
        RunStatus::Ok => 0,
    }
}

/// `iolab run --fio JOB.fio` whose jobs are one group run together: each member's summary
/// under its name, `--json` the members' records as one array, in the group's order.
fn run_group(args: &super::RunArgs, id: &str, members: &[(crate::plan::fio::Mapped, crate::plan::Job)]) -> i32 {
    use crate::session::group::{execute_group, Member};
    if let Some(Err(e)) = args.json.as_deref().map(check_output) {
        eprintln!("iolab: {e}");
        return 2;
    }
    let energy = match args.energy.options() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("iolab: {e}");
            return 2;
        }
    };
    let group: Vec<Member> = members.iter().map(|(m, job)| Member { name: m.name.clone(), job, start_delay_s: m.start_delay_s }).collect();
    let mut ui = Quiet;
    let ran = match execute_group(
        id,
        &group,
        &mut ui,
        Measure { energy: Some(&energy), profile: args.profile.profile, idle: None, serving: None },
    ) {
        Ok(r) => r,
        Err(f) => {
            eprintln!("iolab: {}", f.message);
            return f.code();
        }
    };
    let mut code = 0;
    let mut text = String::new();
    let mut records = Vec::new();
    for (m, rec) in group.iter().zip(&ran.runs) {
        match rec {
            Ok(r) => {
                text.push_str(&format!("== {} (group {id}, started {} s after it)\n", m.name, m.start_delay_s));
                text.push_str(&summary::render(r));
                if let Some(e) = &r.error {
                    eprintln!("iolab: {}: {e}", m.name);
                }
                code = code.max(match r.status {
                    RunStatus::Ok => 0,
                    RunStatus::Failed => 1,
                    RunStatus::Interrupted => 130,
                });
                records.push(r);
            }
            Err(f) => {
                eprintln!("iolab: {}: {}", m.name, f.message);
                code = code.max(f.code());
            }
        }
    }
    if args.json.as_deref() == Some("-") {
        eprint!("{text}")
    } else {
        print!("{text}")
    }
    if let Some(dest) = &args.json {
        if let Err(e) = write_json(dest, &records) {
            eprintln!("iolab: {e}");
            return 1;
        }
    }
    if let Some(m) = ran.not_restored {
        eprintln!("iolab: {m}");
        return code.max(1);
    }
    code
}

/// A file-set run's lines after the run's summary: the set, its creation (measured apart) and its
/// measured files with their per-file latency.
fn file_set_lines(set: &crate::record::fileset::FileSetRecord) -> String {
    use crate::plan::size::{format_bytes, format_ns};
    let phase = |p: &crate::record::fileset::FilePhaseRecord| {
        let lat = p.file_lat_ns.as_ref().map_or("-".to_string(), |l| {
            format!("per file p50 {} p99 {} max {}", format_ns(l.p50 as f64), format_ns(l.p99 as f64), format_ns(l.max as f64))
        });
        format!("{} files, {} in {:.3} s ({:.0} files/s), {lat}", p.files, format_bytes(p.bytes as f64), p.seconds, p.files_per_s)
    };
    format!(
        "file set:   {} files, {} ({}), in {}\n  created:  {}\n  measured: {}, {} fsyncs\n",
        set.files,
        format_bytes(set.bytes as f64),
        set.sizes_drawn,
        set.dir,
        phase(&set.create),
        phase(&set.measured),
        set.fsyncs
    )
}

/// `iolab run`'s pacing flags, fio's rate and think time options (`plan::pace`); each thread is
/// paced on its own, as fio paces each job clone.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct PaceArgs {
    /// Cap each thread's bandwidth, bytes per second: one value for reads and writes, or
    /// READ,WRITE (`500k,` reads only, `,1m` writes only), as fio's rate.
    #[arg(long, value_name = "BPS[,BPS]")]
    pub rate: Option<String>,
    /// Cap each thread's I/Os per second, as fio's rate_iops (IOPS[,IOPS]).
    #[arg(long, value_name = "IOPS[,IOPS]")]
    pub rate_iops: Option<String>,
    /// How rated I/O is spaced: linear (fio's default) or poisson.
    #[arg(long, value_name = "linear|poisson")]
    pub rate_process: Option<String>,
    /// Fail the run when a thread's bandwidth over a second falls below this, as fio's rate_min.
    #[arg(long, value_name = "BPS[,BPS]")]
    pub rate_min: Option<String>,
    /// Stall after every --thinktime-blocks I/Os (default 1), as fio's thinktime (e.g. 2ms).
    #[arg(long, value_name = "TIME")]
    pub thinktime: Option<String>,
    /// The part of --thinktime spent spinning on the CPU rather than asleep.
    #[arg(long, value_name = "TIME")]
    pub thinktime_spin: Option<String>,
    /// I/Os between think times.
    #[arg(long, value_name = "N")]
    pub thinktime_blocks: Option<u64>,
    /// Who submits the paced I/O, as fio's io_submit_mode: inline (this thread, the default) or
    /// offload (--qd submission threads; latency from when each I/O was queued).
    #[arg(long, value_name = "inline|offload")]
    pub io_submit_mode: Option<String>,
}

impl PaceArgs {
    /// The job's pacing; None when no flag asks for one. Err names the flag.
    pub(crate) fn to_pace(&self) -> Result<Option<crate::plan::pace::Pace>, String> {
        let mut p = crate::plan::pace::Pace::default();
        let blocks = self.thinktime_blocks.map(|b| b.to_string());
        let flags = [
            ("rate", &self.rate),
            ("rate_iops", &self.rate_iops),
            ("rate_process", &self.rate_process),
            ("rate_min", &self.rate_min),
            ("thinktime", &self.thinktime),
            ("thinktime_spin", &self.thinktime_spin),
            ("thinktime_blocks", &blocks),
            ("io_submit_mode", &self.io_submit_mode),
        ];
        for (key, v) in flags {
            if let Some(v) = v {
                p.set(key, v).map_err(|e| format!("--{}: {e}", key.replace('_', "-")))?;
            }
        }
        p.check().map_err(|e| format!("--rate/--thinktime: {e}"))?;
        Ok((!p.is_none()).then_some(p))
    }
}
