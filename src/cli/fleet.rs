//! `iolab fleet submit` and `iolab fleet status`: a plan or suite across the nodes of a Slurm
//! cluster (`crate::fleet` writes the batch script and runs Slurm's commands through `Slurm`;
//! Slurm schedules); this file parses the options, calls and prints. Also `--share` and
//! `--handover`, the two options of `sweep` and `suite run` a fleet task uses.
use crate::fleet::{name_of, parse_task_log, AccountedTask, Fleet, FleetError, Placement, Slurm, Work};
use crate::session::sweep::Share;
use std::path::{Path, PathBuf};

/// How a sweep or suite takes part in a fleet (or any split of one plan across machines).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ShareArgs {
    /// Do only share I of N of the plan's configurations (0/N .. N-1/N together are the whole
    /// plan; each configuration's replicates stay together), continuing its unfinished sweep.
    #[arg(long, value_name = "I/N")]
    pub share: Option<Share>,
    /// After every stored run, copy the database to FILE (whole, atomically, between runs): a
    /// finished run survives the machine.
    #[arg(long, value_name = "FILE")]
    pub handover: Option<PathBuf>,
    /// The split this share belongs to (`iolab fleet submit` gives every task of one submission
    /// the same): `iolab merge` joins shares of one split into one sweep, and keeps any other
    /// sweep of the same plan apart.
    #[arg(long, value_name = "ID", requires = "share", value_parser = split_id)]
    pub split: Option<String>,
}

/// A split's id: 1 to 64 letters, digits, `-` or `_`.
fn split_id(s: &str) -> Result<String, FleetError> {
    if (1..=64).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        Ok(s.to_string())
    } else {
        Err(FleetError::Refused(format!("{s:?}: give 1 to 64 letters, digits, '-' or '_'")))
    }
}

// Parsed once per process (as `Cmd`): boxing `SubmitArgs` would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(clap::Subcommand, Debug, Clone)]
pub enum FleetCmd {
    /// Submit a plan or a suite to Slurm as a job array: one exclusive node per task, each task
    /// one share of the configurations, results handed to a shared directory and merged there.
    Submit(SubmitArgs),
    /// The tasks of a fleet: Slurm's view and each task's progress from its handed-over database.
    Status {
        /// The fleet's results directory (`--results` of the submission).
        results: PathBuf,
    },
}

#[derive(clap::Args, Debug, Clone)]
pub struct SubmitArgs {
    /// A plan file (TOML) or a suite (S1 to S6).
    pub work: String,
    /// Targets on every node (the same paths on each).
    pub targets: Vec<PathBuf>,
    /// Shared results directory every node can write (task databases, fleet.db, Slurm output).
    #[arg(long, value_name = "DIR")]
    pub results: PathBuf,
    /// Tasks of the array, one node each.
    #[arg(long, conflicts_with_all = ["nodelist", "every_node"], required_unless_present_any = ["nodelist", "every_node"])]
    pub nodes: Option<usize>,
    /// These nodes, one task on each (a Slurm host list, e.g. node[1-4]).
    #[arg(long)]
    pub nodelist: Option<String>,
    /// The whole plan on every node (of --nodelist, or every usable node of the partition with
    /// the --constraint features), one task pinned to each: one sweep per machine, to compare
    /// them (`iolab compare --by host`).
    #[arg(long)]
    pub every_node: bool,
    /// The shared store the tasks merge into, a PostgreSQL server (postgresql://user@host/db),
    /// instead of fleet.db in --results (which still holds the fleet's state, plan, hand-overs
    /// and Slurm's output).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    #[arg(long)]
    pub partition: Option<String>,
    /// Slurm node features the nodes must have (e.g. the SSD model: keep a split plan on one kind of hardware).
    #[arg(long)]
    pub constraint: Option<String>,
    /// Time limit per task (Slurm's format, e.g. 2:00:00).
    #[arg(long)]
    pub time: Option<String>,
    #[arg(long)]
    pub account: Option<String>,
    /// A suite's small sweeps.
    #[arg(long)]
    pub quick: bool,
    /// Allow writing to this exact block device on every node, destroying its contents.
    #[arg(long, value_name = "DEVICE")]
    pub destructive: Vec<String>,
    /// Node-local directory for each task's working database.
    #[arg(long, value_name = "DIR", default_value = "/var/tmp")]
    pub local_dir: PathBuf,
    /// Print the batch script and submit nothing.
    #[arg(long)]
    pub print: bool,
}

pub fn main(cmd: &FleetCmd) -> i32 {
    super::exit_code(match cmd {
        FleetCmd::Submit(a) => submit(a),
        FleetCmd::Status { results } => status(results),
    })
}

fn submit(a: &SubmitArgs) -> Result<i32, FleetError> {
    // Each goes into the batch script as an `#SBATCH` line: anything sbatch would not take (a
    // newline there began a shell command of the script) is refused before anything is written.
    check_placement(a)?;
    // A plan is read once: checked here, copied into the results directory below.
    let (given, plan_text) = given_work(a)?;
    check_store(a)?;
    let slurm = Slurm;
    let nodes = pinned_nodes(a, &slurm)?;
    let mut fleet = fleet_of(a, given, nodes)?;
    if a.print {
        print!("{}", fleet.batch_script());
        return Ok(0);
    }
    std::fs::create_dir_all(&fleet.results).map_err(|e| FleetError::Refused(format!("cannot create {}: {e}", fleet.results.display())))?;
    // A submission again into the same directory continues that fleet: it must be the same one.
    fleet.resume(&slurm)?;
    if let Some(text) = &plan_text {
        fleet.keep_plan(&a.work, text)?;
    }
    let todo = fleet.tasks_left()?;
    if todo.is_empty() {
        println!("fleet {}: every task is done; the results are in {}", fleet.name, fleet.merged_db().display());
        return Ok(0);
    }
    let name = fleet.name.clone();
    fleet.submit(&slurm, &todo, &mut |id, extra| println!("submitted job {id} ({}): {name}", extra.join(" ")))?;
    println!("follow it with: iolab fleet status {}", fleet.results.display());
    Ok(0)
}

/// What `work` names: a plan file (read and expanded once, to refuse a bad one here; its text
/// returned, to be copied into the results directory) or a suite.
fn given_work(a: &SubmitArgs) -> Result<(Work, Option<String>), FleetError> {
    let bad = FleetError::Refused;
    if Path::new(&a.work).is_file() {
        let text = std::fs::read_to_string(&a.work).map_err(|e| bad(format!("cannot read plan {}: {e}", a.work)))?;
        crate::plan::sweep::expand(&text, &[]).map_err(|e| bad(format!("plan {}: {e}", a.work)))?;
        Ok((Work::Plan { file: PathBuf::from(&a.work) }, Some(text)))
    } else if let Some(study) = crate::studies::find(&a.work) {
        Ok((Work::Suite { id: study.id.to_string(), quick: a.quick }, None))
    } else {
        Err(bad(format!("{}: neither a plan file nor a suite (S1 to S6, see `iolab suite list`)", a.work)))
    }
}

/// `--store`: a PostgreSQL URL without a password. The URL goes into the batch script and the
/// fleet's state, files the cluster reads: a password in it would be stored in the clear, so it
/// is refused (libpq's ways give one).
fn check_store(a: &SubmitArgs) -> Result<(), FleetError> {
    let bad = FleetError::Refused;
    if let Some(url) = a.store.as_deref().filter(|u| crate::secret::redact(u) != *u) {
        return Err(bad(format!(
            "--store {}: a password in the URL would be written into the batch script; leave it out and give it the nodes by ~/.pgpass (mode 0600), PGPASSFILE or a service file (docs/store.md)",
            crate::secret::redact(url)
        )));
    }
    if let Some(url) = a.store.as_deref().filter(|u| !crate::store::is_postgres_url(u)) {
        return Err(bad(format!(
            "--store {url}: give a PostgreSQL URL (postgresql://user@host/dbname); without --store the tasks merge into fleet.db in --results"
        )));
    }
    Ok(())
}

/// The nodes tasks are pinned to, one each: `--nodelist`'s hosts, or with `--every-node` every
/// usable node (those left out said on stderr); none otherwise.
fn pinned_nodes(a: &SubmitArgs, slurm: &Slurm) -> Result<Vec<String>, FleetError> {
    Ok(match (&a.nodelist, a.every_node) {
        (Some(list), _) => slurm.hostnames(list)?,
        (None, true) => {
            let (nodes, left_out) = slurm.every_node(a.partition.as_deref(), a.constraint.as_deref())?;
            for n in left_out {
                eprintln!("iolab: node {} is left out: Slurm shows it {}", n.name, n.state);
            }
            nodes
        }
        (None, false) => Vec::new(),
    })
}

/// The fleet the options describe, running `given` on `nodes` (pinned, or none): its tasks,
/// its absolute results directory and this iolab binary, a new split where tasks share the plan.
fn fleet_of(a: &SubmitArgs, given: Work, nodes: Vec<String>) -> Result<Fleet, FleetError> {
    let bad = FleetError::Refused;
    let tasks = a.nodes.unwrap_or(nodes.len());
    if tasks == 0 {
        return Err(bad("--nodes 0: give at least one node".into()));
    }
    let results = std::path::absolute(&a.results).map_err(|e| bad(format!("--results {}: {e}", a.results.display())))?;
    let iolab = std::env::current_exe().map_err(|e| bad(format!("cannot tell where this iolab binary is: {e}")))?;
    let name = name_of(&given);
    // Every task reads the fleet's own copy of a plan, which cannot change under it.
    let work = match given {
        Work::Plan { .. } => Work::Plan { file: results.join("plan.toml") },
        w => w,
    };
    Ok(Fleet {
        name,
        work,
        targets: a.targets.iter().map(|t| t.display().to_string()).collect(),
        destructive: a.destructive.clone(),
        placement: Placement {
            tasks,
            partition: a.partition.clone(),
            constraint: a.constraint.clone(),
            time: a.time.clone(),
            account: a.account.clone(),
        },
        results,
        local_dir: a.local_dir.clone(),
        iolab,
        jobs: Vec::new(),
        every_node: a.every_node,
        nodes,
        store: a.store.clone(),
        split: (!a.every_node).then(crate::store::schema::new_uid),
    })
}

/// How a task no longer queued ended: from accounting where there is some, else from its
/// newest output file (the lines the batch script writes).
fn ended(f: &Fleet, accounting: &Result<Vec<AccountedTask>, FleetError>, task: usize) -> String {
    if let Some(a) = accounting.as_ref().ok().and_then(|acct| acct.iter().find(|a| a.task == task)) {
        return format!("{} exit {} after {} on {} (sacct, job {})", a.state, a.exit, a.elapsed, a.node, a.job);
    }
    let Some((job, text)) = f.jobs.iter().rev().find_map(|j| std::fs::read_to_string(f.output_file(j, task)).ok().map(|t| (j, t))) else {
        return "never started (no output file)".into();
    };
    let log = parse_task_log(&text);
    let node = log.node.unwrap_or_else(|| "?".into());
    match (log.exit, log.elapsed_s) {
        (Some(0), Some(s)) => format!("COMPLETED exit 0 after {s} s on {node} (output file, job {job})"),
        (Some(rc), Some(s)) => format!("FAILED exit {rc} after {s} s on {node} (output file, job {job})"),
        _ => format!("stopped without its last line on {node}: killed, or its node failed (output file, job {job})"),
    }
}

fn status(results: &Path) -> Result<i32, FleetError> {
    let f = Fleet::load(results)?;
    let slurm = Slurm;
    let what = if f.every_node { "the whole plan on each node" } else { "one share of the plan each" };
    println!("fleet {} in {}: {} tasks, {what}, jobs {}", f.name, f.results.display(), f.placement.tasks, f.jobs.join(", "));
    let mut queue = Vec::new();
    for job in &f.jobs {
        queue.extend(slurm.queued(job)?);
    }
    let accounting = slurm.accounted(&f.jobs);
    if let Err(why) = &accounting {
        println!("Slurm accounting is not available here ({why}): how a task ended is read from its output file");
    }
    let plans = f.plans()?;
    let (mut all_done, mut all_total) = (0, 0);
    for t in 0..f.placement.tasks {
        let slurm = match queue.iter().find(|q| q.task == t) {
            Some(q) => format!("{} {}", q.state, q.node),
            None => ended(&f, &accounting, t),
        };
        let runs = match f.progress(&plans, t)? {
            Some((done, total)) => {
                all_done += done;
                all_total += total;
                format!("{done} of {total} runs done")
            }
            None => "no runs handed over yet".into(),
        };
        let node = f.nodes.get(t).map(|n| format!(" [{n}]")).unwrap_or_default();
        println!("  task {t}{node}: {slurm}; {runs}");
    }
    let merged = crate::secret::redact_path(&f.merged_db());
    println!("{all_done} of {all_total} handed-over runs done; merged results: {merged}");
    Ok(0)
}

/// Slurm names (partitions, accounts): letters, digits, `_`, `.` and `-`.
fn slurm_name(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
}

/// A Slurm time limit: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS` (each a number),
/// or `INFINITE`/`UNLIMITED`.
fn slurm_time(s: &str) -> bool {
    if s.eq_ignore_ascii_case("infinite") || s.eq_ignore_ascii_case("unlimited") {
        return true;
    }
    let number = |x: &str| !x.is_empty() && x.len() <= 9 && x.chars().all(|c| c.is_ascii_digit());
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (Some(d), r),
        None => (None, s),
    };
    let parts: Vec<&str> = rest.split(':').collect();
    days.is_none_or(number) && parts.iter().all(|p| number(p)) && (1..=3).contains(&parts.len())
}

/// A Slurm host list (`node[1-4,7],gpu01`), read by its grammar, and how many hosts it names:
/// Err says what is wrong (a reversed range `node[5-1]` was expanded by scontrol into nonsense).
pub(crate) fn check_hostlist(list: &str) -> Result<u128, FleetError> {
    let bad = |why: &str| format!("--nodelist {list:?} is not a Slurm host list ({why}): use e.g. node[1-4],gpu7");
    let mut total: u128 = 0;
    let mut host: u128 = 1;
    let mut named = false;
    let mut chars = list.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ',' => {
                if !named {
                    return Err(FleetError::Refused(bad("an empty name")));
                }
                total = total.saturating_add(host);
                (host, named) = (1, false);
            }
            '[' => {
                let mut inside = String::new();
                loop {
                    match chars.next() {
                        Some(']') => break,
                        Some(c) => inside.push(c),
                        None => return Err(FleetError::Refused(bad("a '[' without its ']'"))),
                    }
                }
                let mut n: u128 = 0;
                for r in inside.split(',') {
                    let (lo, hi) = r.split_once('-').unwrap_or((r, r));
                    let digits = |x: &str| !x.is_empty() && x.len() <= 18 && x.chars().all(|c| c.is_ascii_digit());
                    if !digits(lo) || !digits(hi) {
                        return Err(FleetError::Refused(bad(&format!("'{r}' in [...] is not a number or a range N-M"))));
                    }
                    let (lo, hi): (u64, u64) = (lo.parse().unwrap_or(0), hi.parse().unwrap_or(0));
                    if lo > hi {
                        return Err(FleetError::Refused(bad(&format!("the range {lo}-{hi} runs backwards"))));
                    }
                    n = n.saturating_add(u128::from(hi - lo) + 1);
                }
                host = host.saturating_mul(n);
                named = true;
            }
            c if c.is_ascii_alphanumeric() || "_.-".contains(c) => named = true,
            c => return Err(FleetError::Refused(bad(&format!("{c:?} is not part of a host name")))),
        }
    }
    if !named {
        return Err(FleetError::Refused(bad("an empty name")));
    }
    Ok(total.saturating_add(host))
}

/// The most hosts `--nodelist` may name: one task (one job) each.
pub const MAX_NODES: u128 = 10_000;

/// The options that go into the batch script's `#SBATCH` lines and Slurm's commands, checked
/// against what sbatch accepts; Err is one line naming the option.
fn check_placement(a: &SubmitArgs) -> Result<(), FleetError> {
    if let Some(p) = a.partition.as_deref().filter(|p| !p.split(',').all(slurm_name)) {
        return Err(FleetError::Refused(format!(
            "--partition {p:?} is not a Slurm partition name: use letters, digits, '_', '.' and '-' (several joined by ',')"
        )));
    }
    if let Some(x) = a.account.as_deref().filter(|x| !slurm_name(x)) {
        return Err(FleetError::Refused(format!("--account {x:?} is not a Slurm account name: use letters, digits, '_', '.' and '-'")));
    }
    if let Some(c) =
        a.constraint.as_deref().filter(|c| c.is_empty() || !c.chars().all(|c| c.is_ascii_alphanumeric() || "_.&|,:*[]()!-".contains(c)))
    {
        return Err(FleetError::Refused(format!(
            "--constraint {c:?} is not a Slurm feature expression: use features (letters, digits, '_', '.', '-') joined by & | , with [ ] ( ) ! * :"
        )));
    }
    if let Some(t) = a.time.as_deref().filter(|t| !slurm_time(t)) {
        return Err(FleetError::Refused(format!(
            "--time {t:?} is not a Slurm time limit: use MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. 2:00:00)"
        )));
    }
    if let Some(list) = &a.nodelist {
        let n = check_hostlist(list)?;
        if n > MAX_NODES {
            return Err(FleetError::Refused(format!(
                "--nodelist {list:?} names {n} hosts, more than the {MAX_NODES} a fleet may have (one job each)"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_values() {
        for t in ["30", "30:00", "2:00:00", "1-12", "1-12:30", "1-12:30:15", "UNLIMITED"] {
            assert!(slurm_time(t), "{t}");
        }
        for t in ["", "1:2:3:4", "1-", "-5", "a", "5:00\ntouch /x", "1-2-3", "1 -2"] {
            assert!(!slurm_time(t), "{t:?}");
        }
        assert_eq!(check_hostlist("node[1-4,7],gpu01").ok(), Some(6));
        assert_eq!(check_hostlist("rack[1-2]-n[01-03]").ok(), Some(6));
        assert_eq!(check_hostlist("n1").ok(), Some(1));
        for bad in ["node[5-1]", "node[1-", "node[a-b]", "node[]", ",n1", "n1,", "n 1", "n1;id", "node[1--3]"] {
            assert!(check_hostlist(bad).is_err(), "{bad:?}");
        }
    }
}
