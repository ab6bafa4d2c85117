//! `iolab export fio`, and the fio job file side of `iolab sweep JOB.fio` and `iolab run --fio`:
//! the command line's part; reading, mapping and writing fio's format is `plan::fio`.
use crate::failure::Failure;
use crate::plan::fio;
use crate::plan::{Job, PlanError};
use crate::session::sweep::SweepEnd;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand, Debug)]
pub enum ExportCmd {
    /// A plan (TOML) as a fio job file: one job per configuration, run one after another.
    Fio(FioExportArgs),
}

#[derive(clap::Args, Debug)]
pub struct FioExportArgs {
    /// The plan (TOML).
    #[arg(required_unless_present = "options_md")]
    pub plan: Option<PathBuf>,
    /// Write the job file here instead of to stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<String>,
    /// Print docs/fio.md instead: every fio option and what iolab does with it, from the table.
    #[arg(long, conflicts_with = "plan")]
    pub options_md: bool,
}

pub fn main(cmd: &ExportCmd) -> i32 {
    super::exit_code(export(cmd))
}

fn export(cmd: &ExportCmd) -> Result<i32, Failure> {
    let ExportCmd::Fio(a) = cmd;
    if a.options_md {
        print!("{}", fio::table::options_md());
        return Ok(0);
    }
    let path = a.plan.as_deref().expect("clap requires the plan");
    let text = std::fs::read_to_string(path).map_err(|e| Failure::invalid(format!("cannot read plan {}: {e}", path.display())))?;
    if fio::is_fio(path, &text) {
        return Err(Failure::invalid(format!("{} is a fio job file already: export takes an iolab plan (TOML)", path.display())));
    }
    if let Some(dest) = &a.output {
        crate::output::check_writable("--output", dest)?;
    }
    let job_file = fio::export(&path.display().to_string(), &text).map_err(Failure::invalid)?;
    match &a.output {
        Some(dest) => crate::output::write_bytes(dest, job_file.as_bytes())?,
        None => print!("{job_file}"),
    }
    Ok(0)
}

/// The command line's target for a fio job file: one, or a set driven together ('+'); it
/// replaces every job's filename.
fn target(targets: &[String]) -> Result<Vec<String>, PlanError> {
    match targets {
        [] => Ok(Vec::new()),
        [one] => crate::plan::matrix::target_set(one),
        _ => Err(PlanError::Plan(
            "a fio job file takes one target on the command line (several driven together: A+B), which replaces every job's filename"
                .into(),
        )),
    }
}

/// Runs a group of a fio job file's jobs together: its name and members.
pub(crate) type RunTogether<'a> = dyn FnMut(&str, &[&fio::Mapped]) -> Result<SweepEnd, Failure> + 'a;

/// A fio job file that is one group: its name, and each member with its job.
pub(crate) type OneGroup = (String, Vec<(fio::Mapped, Job)>);

/// `iolab sweep JOB.fio`: every job of the file as a plan of its own, in file order, each run
/// by `run` (a sweep, or a dry run's listing) after its mapping is shown; the jobs of a group
/// (fio's jobs without stonewall between them) run together by `together` (its name and
/// members). Stops at the first job or group that does not end well.
pub(crate) fn sweep_fio(
    path: &Path,
    text: &str,
    ignore: &[String],
    targets: &[String],
    dry_run: bool,
    run: &mut dyn FnMut(&str) -> Result<SweepEnd, Failure>,
    together: &mut RunTogether,
) -> Result<SweepEnd, Failure> {
    let jobs = fio::plans(path, text, None, ignore, &target(targets)?).map_err(Failure::invalid)?;
    let mut end = SweepEnd { code: 0, finished: true };
    let mut n = 0;
    while n < jobs.len() {
        let m = &jobs[n];
        let members: Vec<&fio::Mapped> = match &m.group {
            Some(g) => jobs[n..].iter().take_while(|j| j.group.as_ref() == Some(g)).collect(),
            None => vec![m],
        };
        for (k, m) in members.iter().enumerate() {
            println!("fio job {} of {} -> plan {}", n + k + 1, jobs.len(), m.name);
            if dry_run {
                let width = m.lines.iter().map(|(o, _)| o.len()).max().unwrap_or(0);
                for (opt, to) in &m.lines {
                    println!("  {opt:width$}  -> {to}");
                }
            }
        }
        end = match (&m.group, dry_run) {
            (Some(g), false) => together(g, &members)?,
            _ => {
                let mut end = SweepEnd { code: 0, finished: true };
                for m in &members {
                    end = run(&m.text)?;
                    if end.code != 0 || !end.finished {
                        break;
                    }
                }
                end
            }
        };
        n += members.len();
        if end.code != 0 || !end.finished {
            break;
        }
    }
    Ok(end)
}

/// `iolab run --fio JOB.fio` without `--job`, where the file's jobs are one group run together
/// (fio starts them at once): its name and each member with its job, as `run_job` makes one.
/// None: the file is not one group (one job, or jobs one after another).
pub(crate) fn run_group(args: &super::RunArgs) -> Result<Option<OneGroup>, PlanError> {
    let Some(path) = &args.fio else { return Ok(None) };
    if args.job.is_some() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(path).map_err(|e| PlanError::Job(format!("cannot read fio job file {}: {e}", path.display())))?;
    let targets: Vec<String> = args.targets.iter().map(|p| p.display().to_string()).collect();
    let jobs = fio::plans(path, &text, None, &args.fio_ignore, &target(&targets)?).map_err(|e| PlanError::Plan(e.to_string()))?;
    let Some(id) = jobs.first().and_then(|j| j.group.clone()) else { return Ok(None) };
    if jobs.iter().any(|j| j.group.as_deref() != Some(id.as_str())) {
        return Ok(None);
    }
    let mut out = Vec::with_capacity(jobs.len());
    for m in jobs {
        let job = job_of(args, &m)?;
        out.push((m, job));
    }
    Ok(Some((id, out)))
}

/// `iolab run`'s job: from its flags, or with `--fio` from one job of a fio job file (the
/// command line may add targets, a budget, --size, --destructive and --wait-settings).
pub(crate) fn run_job(args: &super::RunArgs) -> Result<Job, PlanError> {
    let given = args.to_job()?;
    let Some(path) = &args.fio else { return Ok(given) };
    let text = std::fs::read_to_string(path).map_err(|e| PlanError::Job(format!("cannot read fio job file {}: {e}", path.display())))?;
    let targets: Vec<String> = args.targets.iter().map(|p| p.display().to_string()).collect();
    let jobs =
        fio::plans(path, &text, args.job.as_deref(), &args.fio_ignore, &target(&targets)?).map_err(|e| PlanError::Plan(e.to_string()))?;
    let m = match jobs.as_slice() {
        [one] => one,
        many => {
            let names: Vec<&str> = many.iter().map(|m| m.name.rsplit('/').next().unwrap_or("")).collect();
            return Err(PlanError::Job(format!(
                "--fio {} holds {} jobs ({}): choose one with --job NAME",
                path.display(),
                many.len(),
                names.join(", ")
            )));
        }
    };
    job_of(args, m)
}

/// The job of one fio job's plan, with what the command line may add.
fn job_of(args: &super::RunArgs, m: &fio::Mapped) -> Result<Job, PlanError> {
    let given = args.to_job()?;
    let (set, default) = (serde_json::to_value(&given).unwrap_or_default(), serde_json::to_value(Job::default()).unwrap_or_default());
    let may = ["targets", "size", "budget", "destructive", "wait_settings_s"];
    if let Some((k, _)) =
        set.as_object().into_iter().flatten().find(|(k, v)| !may.contains(&k.as_str()) && default.get(k.as_str()) != Some(v))
    {
        return Err(PlanError::Job(format!(
            "--fio: the job file gives the job, so {k} cannot be set beside it (only targets, --runtime/--ios/--bytes, --size, --destructive and --wait-settings)"
        )));
    }
    let e = crate::plan::sweep::expand(&m.text, &[])?;
    let mut job = e.configs[0].job.clone();
    if args.runtime.is_some() || args.ios.is_some() || args.bytes.is_some() {
        job.timing.budget = given.timing.budget;
    }
    if args.size.is_some() {
        job.targets.size = given.targets.size;
    }
    job.targets.destructive = given.targets.destructive;
    job.system.wait_settings_s = given.system.wait_settings_s;
    crate::plan::validate::validate(&job)?;
    Ok(job)
}
