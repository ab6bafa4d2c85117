//! `iolab report`: one self-contained HTML page over a results database (a suite, sweeps, or
//! any filter of runs), with every figure as SVG and every table as CSV and Markdown.
use crate::failure::Failure;
use crate::report::error::ReportError;
use crate::report::{data, html};
use crate::store::{Machine, RunFilter, Store};
use crate::studies;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    /// Results database.
    #[arg(long, default_value = crate::store::DEFAULT_PATH)]
    pub db: PathBuf,
    /// Report a suite (S1 to S6): for each of its parts, the newest sweep of that name.
    #[arg(long)]
    pub suite: Option<String>,
    /// Only runs of this sweep (repeatable).
    #[arg(long)]
    pub sweep: Vec<i64>,
    #[arg(long)]
    pub interface: Option<String>,
    #[arg(long)]
    pub rw: Option<String>,
    /// Configuration key, as `iolab sweep --dry-run` prints it.
    #[arg(long)]
    pub config: Option<String>,
    /// Only runs made on this host (a merged database; with --suite, the newest sweep per part
    /// that has runs of this host).
    #[arg(long)]
    pub host: Option<String>,
    /// Only runs made on this kernel release.
    #[arg(long)]
    pub kernel: Option<String>,
    /// What tells the machines of a merged database apart: each figure draws one series per
    /// host (the default), kernel or device its runs were made on, where there are several; with
    /// --suite, each machine's newest sweep of every part.
    #[arg(long, value_enum, default_value_t = Machine::Host)]
    pub by: Machine,
    /// Directory for report.html, figures/ and tables/ (created).
    #[arg(long, default_value = "report")]
    pub out: PathBuf,
    /// Print only the page's path.
    #[arg(short, long)]
    pub quiet: bool,
}

pub fn main(a: &ReportArgs) -> i32 {
    super::exit_code(report(a).map(|()| 0))
}

fn report(a: &ReportArgs) -> Result<(), Failure> {
    if !crate::store::exists(&a.db) {
        return Err(Failure::invalid(format!(
            "no results database at {}: run `iolab suite run` or `iolab sweep PLAN` first, or pass --db",
            crate::secret::redact_path(&a.db)
        )));
    }
    check_out(&a.out)?;
    let store = Store::open_existing(&a.db)?;
    let base = RunFilter {
        interface: a.interface.clone(),
        rw: a.rw.clone(),
        config_key: a.config.clone(),
        hostname: a.host.clone(),
        kernel: a.kernel.clone(),
        ..Default::default()
    };
    let mut sweeps = a.sweep.clone();
    let mut selection = Vec::new();
    let mut groups = Vec::new();
    if let Some(name) = &a.suite {
        let suite = studies::find(name).ok_or_else(|| {
            Failure::invalid(format!(
                "no suite '{name}': the suites are {}",
                studies::STUDIES.iter().map(|s| s.id).collect::<Vec<_>>().join(", ")
            ))
        })?;
        let mut found = Vec::new();
        for p in suite.parts {
            found.extend(data::newest_per_machine(&store, p.name, &base, a.by)?);
        }
        if found.is_empty() {
            return Err(Failure::invalid(format!(
                "{} holds no runs of suite {}: run `iolab suite run {}` first",
                crate::secret::redact_path(&a.db),
                suite.id,
                suite.id
            )));
        }
        let ids: Vec<String> = found.iter().flat_map(|g| g.id.into_iter().chain(g.joined.iter().copied())).map(|i| i.to_string()).collect();
        selection.push(format!("suite {} (sweeps {})", suite.id, ids.join(", ")));
        groups = found;
    } else if !sweeps.is_empty() {
        selection.push(format!("sweeps {}", sweeps.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")));
    }
    for (what, v) in [("interface", &a.interface), ("rw", &a.rw), ("config", &a.config), ("host", &a.host), ("kernel", &a.kernel)] {
        if let Some(v) = v {
            selection.push(format!("{what} = {v}"));
        }
    }
    if a.suite.is_none() && sweeps.is_empty() {
        groups = data::load(&store, &base)?;
    }
    sweeps.sort();
    sweeps.dedup();
    sweeps.retain(|id| !groups.iter().any(|g| g.id == Some(*id) || g.joined.contains(id)));
    for id in sweeps {
        groups.push(data::load_sweep(&store, id, &base)?);
    }
    let mut machines: Vec<String> = Vec::new();
    for g in &mut groups {
        machines.extend(data::overlay_machines(g, a.by));
    }
    machines.sort();
    machines.dedup();
    if !machines.is_empty() {
        selection.push(format!("one series per {}: {}", a.by.name(), machines.join(", ")));
    }
    if groups.iter().all(|g| g.configs.is_empty()) {
        return Err(Failure::invalid(format!(
            "the selection holds no finished runs in {} (see iolab results)",
            crate::secret::redact_path(&a.db)
        )));
    }
    let sections = studies::sections(&groups);
    let all: Vec<&data::Run> = groups.iter().flat_map(|g| g.configs.iter().flat_map(|c| c.runs.iter())).collect();
    let header = html::Header {
        title: match &a.suite {
            Some(s) => format!("iolab report: {}", studies::find(s).map(|s| format!("{} — {}", s.id, s.title)).unwrap_or_default()),
            None => "iolab report".into(),
        },
        database: crate::secret::redact_path(&a.db),
        selection: if selection.is_empty() { "all runs".into() } else { selection.join(", ") },
        generated: format!("by iolab {} at {} UTC", env!("CARGO_PKG_VERSION"), utc_now()),
        provenance: crate::report::sections::provenance(&all),
    };
    // An output refused (a link, a name that cannot be written) is bad input, as `--out` checked above.
    let written = crate::report::write(&a.out, &header, &sections)?;
    if a.quiet {
        println!("{}", written[0].display());
    } else {
        for p in &written {
            println!("{}", p.display());
        }
    }
    Ok(())
}

/// Check before any work that `--out` is a directory (or a new one) whose page can be written;
/// each file is checked again as it is written (see `crate::output`).
fn check_out(out: &std::path::Path) -> Result<(), ReportError> {
    match std::fs::metadata(out) {
        Ok(m) if !m.is_dir() => Err(ReportError::Out(format!(
            "--out {} is {}: give a directory for report.html, figures/ and tables/ (it is created)",
            out.display(),
            crate::output::kind(&m)
        ))),
        // Refused before any work, whatever the check met: bad input, as every `--out` refused.
        Ok(_) => {
            crate::output::check_writable("--out", &out.join("report.html").to_string_lossy()).map_err(|e| ReportError::Out(e.to_string()))
        }
        Err(_) => Ok(()),
    }
}

/// The current UTC time as YYYY-MM-DD HH:MM.
fn utc_now() -> String {
    let secs = crate::store::now() as i64;
    let (y, m, d) = crate::energy::meterlog::civil_from_days(secs.div_euclid(86400));
    let rem = secs.rem_euclid(86400);
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}", rem / 3600, rem % 3600 / 60)
}
