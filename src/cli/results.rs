//! `iolab results`: list and filter stored runs; export them as CSV or JSON.
use crate::failure::Failure;
use crate::report::summary::{format_count, format_ns};
use crate::store::{PlannedStatus, RunFilter, Store, StoreError};
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
    /// ok, failed, interrupted (stored runs; failed also lists runs that failed before measuring, with the error); skipped, planned (planned runs never made, listed with the reason).
    #[arg(long)]
    pub status: Option<String>,
    /// Configuration key, as `iolab sweep --dry-run` prints it.
    #[arg(long)]
    pub config: Option<String>,
    /// Only runs made on this host (as `hostname` names it).
    #[arg(long)]
    pub host: Option<String>,
    /// Only runs made on this kernel release (e.g. 6.1.0-56-amd64).
    #[arg(long)]
    pub kernel: Option<String>,
    /// Only runs with this device among their targets (e.g. nvme0n1).
    #[arg(long)]
    pub device: Option<String>,
    /// Only runs made by this tool (iolab, or e.g. fio for runs `iolab import fio` stored).
    #[arg(long)]
    pub tool: Option<String>,
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

/// Planned-run statuses that never have a stored run: `results` lists them from the plan.
const PLAN_ONLY: [PlannedStatus; 2] = [PlannedStatus::Skipped, PlannedStatus::Planned];

fn results(a: &ResultsArgs) -> Result<(), Failure> {
    let plan_only = refuse_before_opening(a)?;
    let store = Store::open_existing(&a.db)?;
    if a.sweeps {
        println!("{:>5}  {:<24} {:>8} {:>6} {:>8} {:>6}", "sweep", "name", "planned", "done", "skipped", "failed");
        for s in store.sweep_infos()? {
            println!("{:>5}  {:<24} {:>8} {:>6} {:>8} {:>6}", s.id, s.name, s.total, s.done, s.skipped, s.failed);
        }
        return Ok(());
    }
    let filter = filter_of(a);
    if let Some(dest) = &a.csv {
        return export(dest, |w| store.export_csv(&filter, w));
    }
    if let Some(dest) = &a.json {
        return export(dest, |w| store.export_json(&filter, w));
    }
    if let Some(st) = plan_only {
        return list_planned(&store, &filter, st);
    }
    let rows = store.list_runs(&filter)?;
    print_runs(&rows);
    not_made(a, &store, &filter)
}

/// What is refused before the database is opened (an export of runs never made, no database, an
/// output iolab will not write): it costs nothing. Ok: the plan-only status asked for, if any.
fn refuse_before_opening(a: &ResultsArgs) -> Result<Option<PlannedStatus>, Failure> {
    let plan_only = a.status.as_deref().and_then(PlannedStatus::parse).filter(|s| PLAN_ONLY.contains(s));
    if let (Some(st), true) = (plan_only, a.csv.is_some() || a.json.is_some()) {
        return Err(Failure::invalid(format!(
            "{st} runs were never made, so there is no record to export: list them with `iolab results --status {st}`"
        )));
    }
    if !crate::store::exists(&a.db) {
        return Err(Failure::invalid(format!(
            "no results database at {}: run `iolab sweep PLAN` first, or pass --db",
            crate::secret::redact_path(&a.db)
        )));
    }
    // An output iolab will refuse, before the database is opened.
    for (flag, dest) in [("--csv", &a.csv), ("--json", &a.json)] {
        if let Some(d) = dest {
            crate::output::check_writable(flag, d)?;
        }
    }
    Ok(plan_only)
}

/// The runs `a`'s options select.
fn filter_of(a: &ResultsArgs) -> RunFilter {
    RunFilter {
        sweep: a.sweep,
        interface: a.interface.clone(),
        rw: a.rw.clone(),
        status: a.status.clone(),
        config_key: a.config.clone(),
        hostname: a.host.clone(),
        kernel: a.kernel.clone(),
        device: a.device.clone(),
        tool: a.tool.clone(),
        limit: a.limit,
        ..Default::default()
    }
}

/// The stored runs, one row each, and their count; a column for the file set, the tool and the
/// machine where some row needs it.
fn print_runs(rows: &[crate::store::RunRow]) {
    // Runs from several machines (a merged database): each row says which one made it.
    let machine = |r: &crate::store::RunRow| format!("{} {}", r.hostname.as_deref().unwrap_or("?"), r.kernel.as_deref().unwrap_or("?"));
    let machines: std::collections::BTreeSet<String> = rows.iter().map(machine).collect();
    let several = machines.len() > 1;
    // Runs another tool made (`iolab import fio`): each row says which tool.
    let tools = rows.iter().any(|r| r.tool != "iolab");
    // File-set runs (`--fileset`): each row says its set and its per-file p50 and p99.
    let sets = rows.iter().any(|r| r.fileset_files.is_some());
    println!(
        "{:>5} {:>5} {:>3} {:<11} {:<9} {:<7} {:<6} {:<9} {:>6} {:>4} {:>3} {:>9} {:>9} {:>9} {:>6} {:<9}{}{}{}",
        "run",
        "sweep",
        "rep",
        "status",
        "interface",
        "submit",
        "compl",
        "rw",
        "bs",
        "qd",
        "thr",
        "IOPS",
        "mean",
        "p99",
        "cores",
        "path",
        if sets { format!(" {:<16} {:>9} {:>9}", "file set", "file p50", "file p99") } else { String::new() },
        if tools { " tool      " } else { "" },
        if several { " machine (host kernel)" } else { "" }
    );
    for r in rows {
        let opt = |x: Option<f64>, f: &dyn Fn(f64) -> String| x.map(f).unwrap_or_else(|| "-".into());
        println!(
            "{:>5} {:>5} {:>3} {:<11} {:<9} {:<7} {:<6} {:<9} {:>6} {:>4} {:>3} {:>9} {:>9} {:>9} {:>6} {:<9}{}{}{}",
            r.id,
            r.sweep_id.map(|s| s.to_string()).unwrap_or("-".into()),
            r.replicate.map(|x| (x + 1).to_string()).unwrap_or("-".into()),
            r.status,
            r.interface,
            r.submit,
            r.complete,
            r.rw,
            crate::plan::size::format_bytes(r.bs as f64).replace(".0 ", ""),
            r.qd,
            r.threads,
            opt(r.metrics.iops, &|x| format_count(x)),
            opt(r.metrics.lat_mean_ns, &format_ns),
            opt(r.metrics.lat_p99_ns, &format_ns),
            opt(r.metrics.cpu_cores, &|x| format!("{x:.2}")),
            r.metrics.completion_observed.clone().unwrap_or("-".into()),
            if sets { file_set_cells(r) } else { String::new() },
            if tools { format!(" {:<10}", r.tool) } else { String::new() },
            if several { format!(" {}", machine(r)) } else { String::new() }
        );
    }
    println!("{} runs{}", rows.len(), if several { format!(" from {} machines", machines.len()) } else { String::new() });
}

/// The planned runs not made (skipped, or failed before measuring): counted, or listed when
/// `--status failed` asks for them.
fn not_made(a: &ResultsArgs, store: &Store, filter: &RunFilter) -> Result<(), Failure> {
    // Runs that failed before measuring have no stored run: they are listed from the plan.
    let early =
        if matches!(a.status.as_deref(), None | Some("failed")) { store.list_planned(filter, PlannedStatus::Failed)? } else { Vec::new() };
    if a.status.is_none() {
        let skipped = store.list_planned(filter, PlannedStatus::Skipped)?.len();
        if skipped > 0 {
            println!("{skipped} planned runs skipped, not made (--status skipped lists them with the reason)");
        }
        if !early.is_empty() {
            println!("{} planned runs failed before measuring (--status failed lists them with the error)", early.len());
        }
    } else if !early.is_empty() {
        println!();
        print_planned(&early, "runs failed before measuring");
    }
    Ok(())
}

/// A file-set run's cells in `iolab results`: its files and order, its per-file p50 and p99
/// (dashes for a run without a set).
fn file_set_cells(r: &crate::store::RunRow) -> String {
    let opt = |x: Option<f64>| x.map(format_ns).unwrap_or_else(|| "-".into());
    let set = match (r.fileset_files, r.file_order.as_deref()) {
        (Some(n), Some(o)) => format!("{n} {o}"),
        (Some(n), None) => n.to_string(),
        _ => "-".into(),
    };
    format!(" {:<16} {:>9} {:>9}", set, opt(r.metrics.file_lat_p50_ns), opt(r.metrics.file_lat_p99_ns))
}

/// The selected runs written to `dest` by `f`: an output refused is bad input, one that fails
/// while it is written a failed command, a database that fails while it is read keeps its kind.
fn export(dest: &str, f: impl FnOnce(&mut dyn std::io::Write) -> Result<(), StoreError>) -> Result<(), Failure> {
    crate::output::write_with(dest, |w| f(w).map_err(Failure::from))
}

/// Planned runs that were never made (skipped, or still to run), with the reason.
fn list_planned(store: &Store, filter: &RunFilter, status: PlannedStatus) -> Result<(), Failure> {
    print_planned(&store.list_planned(filter, status)?, &format!("{status} runs"));
    Ok(())
}

/// `what`: the closing count's noun ("skipped runs").
fn print_planned(rows: &[crate::store::PlannedRun], what: &str) {
    println!(
        "{:>5} {:>5} {:>3} {:<8} {:<9} {:<9} {:>6} {:>4} {:>3}  {:<40} reason",
        "plan", "sweep", "rep", "status", "interface", "rw", "bs", "qd", "thr", "config"
    );
    for p in rows {
        let spec = |k: &str| p.spec.get(k).map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string)).unwrap_or("-".into());
        let bs = p.spec.get("bs").and_then(|v| v.as_f64()).map_or("-".into(), |b| crate::plan::size::format_bytes(b).replace(".0 ", ""));
        println!(
            "{:>5} {:>5} {:>3} {:<8} {:<9} {:<9} {:>6} {:>4} {:>3}  {:<40} {}",
            p.id,
            p.sweep_id,
            p.replicate + 1,
            p.status,
            spec("interface"),
            spec("rw"),
            bs,
            spec("qd"),
            spec("threads"),
            p.config_key,
            p.reason.as_deref().unwrap_or("-")
        );
    }
    println!("{} {what}", rows.len());
}
