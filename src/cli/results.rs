//! `iolab results`: list and filter stored runs; export them as CSV or JSON.
use crate::report::summary::{format_count, format_ns};
use crate::store::{RunFilter, Store};
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct ResultsArgs {
    /// Results database.
    #[arg(long, default_value = "iolab.db")]
    pub db: PathBuf,
    /// Only runs of this sweep.
    #[arg(long)]
    pub sweep: Option<i64>,
    #[arg(long)]
    pub interface: Option<String>,
    #[arg(long)]
    pub rw: Option<String>,
    /// ok, failed, interrupted, skipped...
    #[arg(long)]
    pub status: Option<String>,
    /// Configuration key, as `iolab sweep --dry-run` prints it.
    #[arg(long)]
    pub config: Option<String>,
    #[arg(long)]
    pub limit: Option<usize>,
    /// List the sweeps instead of runs.
    #[arg(long)]
    pub sweeps: bool,
    /// Export the selected runs as CSV to FILE ('-' for stdout).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<String>,
    /// Export the selected runs' full records as JSON to FILE ('-' for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

pub fn main(a: &ResultsArgs) -> i32 {
    super::exit_code(results(a).map(|()| 0))
}

fn results(a: &ResultsArgs) -> Result<(), String> {
    if !a.db.exists() {
        return Err(format!("no results database at {}: run `iolab sweep PLAN` first, or pass --db", a.db.display()));
    }
    let store = Store::open(&a.db)?;
    if a.sweeps {
        println!("{:>5}  {:<24} {:>8} {:>6} {:>8}", "sweep", "name", "planned", "done", "skipped");
        for (id, name, _created, planned, done, skipped) in store.sweeps()? {
            println!("{id:>5}  {name:<24} {planned:>8} {done:>6} {skipped:>8}");
        }
        return Ok(());
    }
    let filter = RunFilter {
        sweep: a.sweep,
        interface: a.interface.clone(),
        rw: a.rw.clone(),
        status: a.status.clone(),
        config_key: a.config.clone(),
        limit: a.limit,
        ..Default::default()
    };
    if let Some(dest) = &a.csv {
        return crate::output::write_with(dest, |w| store.export_csv(&filter, w));
    }
    if let Some(dest) = &a.json {
        return crate::output::write_with(dest, |w| store.export_json(&filter, w));
    }
    let rows = store.list_runs(&filter)?;
    println!("{:>5} {:>5} {:>3} {:<11} {:<9} {:<7} {:<6} {:<9} {:>6} {:>4} {:>3} {:>9} {:>9} {:>9} {:>6} {:<9}",
        "run", "sweep", "rep", "status", "interface", "submit", "compl", "rw", "bs", "qd", "thr", "IOPS", "mean", "p99", "cores", "path");
    for r in &rows {
        let opt = |x: Option<f64>, f: &dyn Fn(f64) -> String| x.map(f).unwrap_or_else(|| "-".into());
        println!("{:>5} {:>5} {:>3} {:<11} {:<9} {:<7} {:<6} {:<9} {:>6} {:>4} {:>3} {:>9} {:>9} {:>9} {:>6} {:<9}",
            r.id, r.sweep_id.map(|s| s.to_string()).unwrap_or("-".into()), r.replicate.map(|x| (x + 1).to_string()).unwrap_or("-".into()),
            r.status, r.interface, r.submit, r.complete, r.rw, crate::plan::size::format_bytes(r.bs as f64).replace(".0 ", ""), r.qd, r.threads,
            opt(r.iops, &|x| format_count(x)), opt(r.lat_mean_ns, &format_ns), opt(r.lat_p99_ns, &format_ns),
            opt(r.cpu_cores, &|x| format!("{x:.2}")), r.completion_observed.clone().unwrap_or("-".into()));
    }
    println!("{} runs", rows.len());
    Ok(())
}
