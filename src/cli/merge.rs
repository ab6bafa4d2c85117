//! `iolab merge A.db B.db ... --into ALL.db`: results from several machines in one database.
use crate::failure::Failure;
use crate::store::Store;
use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone)]
pub struct MergeArgs {
    /// Results databases to merge (each left as it was).
    #[arg(required = true)]
    pub from: Vec<PathBuf>,
    /// The database they are merged into (created when it does not exist).
    #[arg(long, value_name = "DB")]
    pub into: PathBuf,
}

pub fn main(a: &MergeArgs) -> i32 {
    super::exit_code(merge(a).map(|conflicts| i32::from(conflicts > 0)))
}

/// Returns how many runs conflicted (exit 1 when any did).
fn merge(a: &MergeArgs) -> Result<usize, Failure> {
    let same = |p: &PathBuf| std::fs::canonicalize(p).ok().zip(std::fs::canonicalize(&a.into).ok()).is_some_and(|(x, y)| x == y);
    if let Some(p) = a.from.iter().find(|p| same(p)) {
        return Err(Failure::invalid(format!("{} is both a source and --into: merge into another file", crate::secret::redact_path(p))));
    }
    // Every source readable before anything is written.
    let sources = a.from.iter().map(|p| Store::open_source(p)).collect::<Result<Vec<_>, _>>()?;
    let mut into = Store::open(&a.into)?;
    let mut conflicts = 0;
    for (p, src) in a.from.iter().zip(&sources) {
        let r = into.merge_from(src)?;
        println!(
            "{}: {} runs added, {} already there; {} sweeps created, {} joined; {} planned runs closed",
            crate::secret::redact_path(p),
            r.runs_added,
            r.runs_present,
            r.sweeps_created,
            r.sweeps_joined,
            r.planned_closed
        );
        for c in &r.conflicts {
            eprintln!("iolab: {c}");
        }
        conflicts += r.conflicts.len();
    }
    Ok(conflicts)
}
