//! `iolab import fio RESULT.json --db DB`: fio's JSON output stored as runs beside iolab's, one
//! per job fio reports, each a sweep of its own (named `RESULT.json/JOB`, as `iolab sweep JOB.fio`
//! names a job's) whose one configuration is the job's, mapped through the table a job file goes
//! through. Reading and mapping is `record::fio`.
use crate::failure::Failure;
use crate::store::{schema, PlannedStatus, Store, SweepIdentity};
use std::path::PathBuf;

#[derive(clap::Subcommand, Debug, Clone)]
pub enum ImportCmd {
    /// fio's JSON output (--output-format=json or json+; with --status-interval, its last
    /// document) stored as runs of fio's, one per job, beside iolab's runs of the same
    /// configuration; importing a file again stores nothing twice.
    Fio(FioArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct FioArgs {
    /// fio's JSON output.
    pub result: PathBuf,
    /// Results database (a file, or a PostgreSQL URL).
    #[arg(long, default_value = "iolab.db")]
    pub db: PathBuf,
    /// Drop this fio option from the jobs' configuration instead of refusing it (repeatable).
    #[arg(long = "fio-ignore", value_name = "OPTION")]
    pub fio_ignore: Vec<String>,
}

pub fn main(cmd: &ImportCmd) -> i32 {
    match cmd {
        ImportCmd::Fio(a) => super::exit_code(fio(a).map(|()| 0)),
    }
}

fn fio(a: &FioArgs) -> Result<(), Failure> {
    let text = std::fs::read_to_string(&a.result).map_err(|e| Failure::invalid(format!("cannot read {}: {e}", a.result.display())))?;
    let file = a.result.file_name().map_or_else(|| a.result.display().to_string(), |n| n.to_string_lossy().into_owned());
    // Every job read and mapped before the database is opened: bad input changes nothing.
    let read = crate::record::fio::read(&file, &text, &a.fio_ignore)?;
    if let Some(n) = &read.note {
        println!("{}: {} output; read {n}", a.result.display(), read.version);
    }
    let mut store = Store::open(&a.db)?;
    let (mut stored, mut had) = (0, 0);
    for j in &read.jobs {
        let uid = schema::derived_run_uid(&j.identity);
        // The sweep's plan carries the job's identity, so the same job imported again is found.
        let plan_text = format!("# fio's JSON output {file}, job '{}' ({}), identity {uid}\n{}", j.jobname, read.version, j.plan.text);
        let hash = crate::plan::sweep::plan_hash(&plan_text, &[]);
        // Found by its identity alone: the same output under another file name is the same run.
        if let Some(s) = store.sweep_infos()?.into_iter().find(|s| s.plan_text.contains(&format!(", identity {uid}\n"))) {
            println!("fio job '{}': already stored (sweep {}), not stored again", j.jobname, s.id);
            had += 1;
            continue;
        }
        let spec = serde_json::to_value(&j.job).map_err(|e| Failure::failed(format!("fio job '{}': {e}", j.jobname)))?;
        let identity = SweepIdentity { uid: schema::derived_run_uid(&format!("sweep\0{}", j.identity)), split: None };
        let sweep =
            store.create_sweep_as(&identity, &j.plan.name, &plan_text, &hash, j.job.workload.seed, &[(0, 0, j.key.clone(), spec)])?;
        let planned = store.planned_runs(sweep)?.into_iter().find(|p| p.status == PlannedStatus::Planned);
        let run = store.record_run_as(planned.map(|p| p.id), &j.record, &uid)?;
        let iops = j.record.pointer("/results/total/iops").and_then(|v| v.as_f64()).unwrap_or(0.0);
        println!("fio job '{}': run {run} (sweep {sweep}, {}), {iops:.0} IOPS by fio", j.jobname, j.key);
        stored += 1;
    }
    println!(
        "{stored} fio runs stored in {}{}",
        crate::secret::redact_path(&a.db),
        if had > 0 { format!(", {had} stored before") } else { String::new() }
    );
    Ok(())
}
