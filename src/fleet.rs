//! Running a plan on a cluster through Slurm: the batch script of a job array whose tasks each
//! run one share of the plan on one exclusive node, into a node-local database handed over to
//! shared storage after every run, and the state `iolab fleet status` reads back.
//!
//! Slurm does the scheduling, the exclusivity and the accounting; iolab only writes the script and
//! divides the plan (`session::sweep::Share`). Nothing here runs a measurement. Slurm's client
//! commands (`sbatch`, `scontrol`, `sinfo`, `squeue`, `sacct`) are run through [`Slurm`], which
//! returns their output parsed; errors are typed ([`FleetError`]): a failed Slurm command is not
//! bad input.
use crate::failure::{FailureKind, Kinded};
use crate::store::StoreError;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// What went wrong with a fleet, by whose doing.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The request is wrong: an option, a results directory holding another fleet or no fleet,
    /// a plan that cannot be read. Bad input.
    #[error("{0}")]
    Refused(String),
    /// A Slurm command could not be run or failed (sbatch refused the job, scontrol or sinfo
    /// failed): Slurm's failure, not the request's.
    #[error("{0}")]
    Slurm(String),
    /// A task's database (a hand-over read for its progress).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Kinded for FleetError {
    /// What kind of failure this is: it decides the exit code.
    fn kind(&self) -> FailureKind {
        match self {
            FleetError::Refused(_) => FailureKind::Invalid,
            FleetError::Slurm(_) => FailureKind::External,
            FleetError::Store(e) => e.kind(),
        }
    }
}

/// What is run: a plan file (copied into the results directory, so every task reads the same
/// plan even if the original changes) or a built-in suite.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Work {
    Plan { file: PathBuf },
    Suite { id: String, quick: bool },
}

/// The Slurm side of a submission: where and for how long.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Placement {
    /// Tasks of the array: one node each.
    pub tasks: usize,
    pub partition: Option<String>,
    pub constraint: Option<String>,
    /// Slurm's time limit per task (e.g. `2:00:00`).
    pub time: Option<String>,
    pub account: Option<String>,
}

/// One fleet: what it runs, where, and the Slurm jobs submitted for it (a resubmission adds one).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Fleet {
    pub name: String,
    pub work: Work,
    pub targets: Vec<String>,
    /// Block devices each node may write to (`--destructive`, the same path on every node).
    pub destructive: Vec<String>,
    pub placement: Placement,
    /// The shared results directory: task databases, the merged database, Slurm's output.
    pub results: PathBuf,
    /// The node-local directory of each task's working database.
    pub local_dir: PathBuf,
    /// The iolab binary the nodes run (the same path on every node).
    pub iolab: PathBuf,
    pub jobs: Vec<String>,
    /// Every task runs the whole plan on its own node (`--every-node`): one sweep per machine,
    /// to compare the machines, instead of one share of the plan per task.
    #[serde(default)]
    pub every_node: bool,
    /// The node of each task where tasks are pinned to nodes (`--nodelist`, `--every-node`), in
    /// task order; fixed at the first submission, so a task resumes on its own machine.
    #[serde(default)]
    pub nodes: Vec<String>,
    /// The shared store the tasks merge into when not `fleet.db` in the results directory: a
    /// PostgreSQL server's URL (`--store`).
    #[serde(default)]
    pub store: Option<String>,
    /// The split's id (random, made at the first submission), given to every task dividing the
    /// work (`--split`): merged, their shares join one sweep, and nothing else joins it. None on
    /// every node (each machine's sweep is its own) and for a fleet submitted before iolab had it.
    #[serde(default)]
    pub split: Option<String>,
}

/// The merged database every task hands its runs to when it ends.
pub const MERGED_DB: &str = "fleet.db";
const STATE: &str = "fleet.json";

impl Fleet {
    pub(crate) fn task_db(&self, task: usize) -> PathBuf {
        self.results.join(format!("task-{task}.db"))
    }

    /// Where the tasks merge their runs: `--store`, or `fleet.db` in the results directory.
    pub(crate) fn merged_db(&self) -> PathBuf {
        self.store.as_ref().map_or_else(|| self.results.join(MERGED_DB), PathBuf::from)
    }

    /// A task's part of the plan as (I, N) of `--share I/N`: the whole plan (0/1) on every node,
    /// else share I of the N tasks.
    pub fn share(&self, task: usize) -> (usize, usize) {
        if self.every_node {
            (0, 1)
        } else {
            (task, self.placement.tasks)
        }
    }

    /// A task's Slurm output file for one of the fleet's jobs (`--output` of the script).
    pub(crate) fn output_file(&self, job: &str, task: usize) -> PathBuf {
        self.results.join(format!("slurm-{job}_{task}.out"))
    }

    pub(crate) fn state_file(results: &Path) -> PathBuf {
        results.join(STATE)
    }

    pub fn load(results: &Path) -> Result<Fleet, FleetError> {
        let path = Fleet::state_file(results);
        let text = std::fs::read_to_string(&path).map_err(|e| {
            FleetError::Refused(format!(
                "cannot read {}: {e} (is {} a directory `iolab fleet submit` wrote?)",
                path.display(),
                results.display()
            ))
        })?;
        serde_json::from_str(&text).map_err(|e| FleetError::Refused(format!("{} is not a fleet state file: {e}", path.display())))
    }

    pub(crate) fn save(&self) -> Result<(), FleetError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| FleetError::Refused(e.to_string()))?;
        crate::output::write_bytes(&Fleet::state_file(&self.results).display().to_string(), text.as_bytes())
            .map_err(|e| FleetError::Refused(e.into()))
    }

    /// A submission again into the results directory of `before` continues that fleet: what is
    /// measured and where the runs go (work, targets, destructive devices, number of tasks, the
    /// iolab binary, every node or shares, the store) must be the same; where and for how long
    /// (partition, time) may change. Err names the fleet the directory holds.
    pub(crate) fn continues(&self, before: &Fleet) -> Result<(), FleetError> {
        let same = |f: &Fleet| {
            (f.work.clone(), f.targets.clone(), f.destructive.clone(), f.placement.tasks, f.iolab.clone(), f.every_node, f.store.clone())
        };
        if same(self) != same(before) {
            return Err(FleetError::Refused(format!(
                "{} holds another fleet ({}, {} tasks): give a new --results directory, or the same work, targets, destructive devices, number of tasks, --every-node, --store and iolab binary to continue it",
                self.results.display(),
                before.name,
                before.placement.tasks
            )));
        }
        Ok(())
    }

    /// A submission again into the results directory of a fleet continues that fleet, which must
    /// be this one (`continues`) with none of its jobs still queued or running; this one then
    /// keeps its jobs and its split (every task of a fleet, whenever submitted, is a share of one
    /// split) and, where both run on every node, its machines and their number (each task stays
    /// on its own). Nothing there: a new fleet, as it is.
    pub(crate) fn resume(&mut self, slurm: &Slurm) -> Result<(), FleetError> {
        if !Fleet::state_file(&self.results).exists() {
            return Ok(());
        }
        let before = Fleet::load(&self.results)?;
        if self.every_node && before.every_node {
            self.nodes = before.nodes.clone();
            self.placement.tasks = before.placement.tasks;
        }
        self.continues(&before)?;
        let active: Vec<String> = before.jobs.iter().filter(|j| !slurm.queued(j).unwrap_or_default().is_empty()).cloned().collect();
        if !active.is_empty() {
            return Err(FleetError::Refused(format!(
                "job {} of this fleet is still queued or running: wait for it (iolab fleet status) or scancel it",
                active.join(", ")
            )));
        }
        self.jobs = before.jobs;
        self.split = before.split;
        Ok(())
    }

    /// The plan `text` (read from `given`) kept as the fleet's own copy, which every task reads:
    /// written at the first submission; at a later one, the copy must still be that text.
    pub(crate) fn keep_plan(&self, given: &str, text: &str) -> Result<(), FleetError> {
        let Work::Plan { file } = &self.work else { return Ok(()) };
        if file.exists() && std::fs::read_to_string(file).ok().as_deref() != Some(text) {
            return Err(FleetError::Refused(format!(
                "{} differs from {given}: the fleet's plan cannot change between submissions",
                file.display()
            )));
        }
        crate::output::write_bytes(&file.display().to_string(), text.as_bytes()).map_err(|e| FleetError::Refused(e.into()))
    }

    /// The tasks with runs left, by what each handed over: only they go again.
    pub(crate) fn tasks_left(&self) -> Result<Vec<usize>, FleetError> {
        let plans = self.plans()?;
        Ok((0..self.placement.tasks).filter(|&t| !matches!(self.progress(&plans, t), Ok(Some((done, total))) if done == total)).collect())
    }

    /// The batch script written into the results directory and `tasks` submitted with it: one
    /// array, or where tasks are pinned to nodes one job per task on its node (an array's tasks
    /// cannot each be given a node). Each job is saved in the fleet's state as soon as sbatch
    /// gives its id, then told to `submitted` (its id and its sbatch options).
    pub(crate) fn submit(&mut self, slurm: &Slurm, tasks: &[usize], submitted: &mut dyn FnMut(&str, &[String])) -> Result<(), FleetError> {
        let script_path = self.results.join("fleet.sbatch");
        crate::output::write_bytes(&script_path.display().to_string(), self.batch_script().as_bytes())
            .map_err(|e| FleetError::Refused(e.into()))?;
        let array = |ts: &[usize]| ts.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",");
        let submissions: Vec<Vec<String>> = if self.nodes.is_empty() {
            vec![vec![format!("--array={}", array(tasks))]]
        } else {
            let node = |t: usize| {
                self.nodes.get(t).ok_or_else(|| {
                    FleetError::Refused(format!("{} names no node for task {t}", Fleet::state_file(&self.results).display()))
                })
            };
            tasks
                .iter()
                .map(|&t| Ok(vec![format!("--array={t}"), format!("--nodelist={}", node(t)?)]))
                .collect::<Result<_, FleetError>>()?
        };
        for extra in submissions {
            let id = slurm.submit(&script_path, &extra)?;
            self.jobs.push(id.clone());
            self.save()?;
            submitted(&id, &extra);
        }
        Ok(())
    }

    /// The plan text of every part the fleet runs (a suite has several), each with the command
    /// line's targets it expands with (a suite's part has its targets in its plan).
    pub fn plans(&self) -> Result<Vec<(String, Vec<String>)>, FleetError> {
        Ok(match &self.work {
            Work::Plan { file } => vec![(
                std::fs::read_to_string(file).map_err(|e| FleetError::Refused(format!("cannot read {}: {e}", file.display())))?,
                self.targets.clone(),
            )],
            Work::Suite { id, quick } => {
                let study = crate::studies::find(id).ok_or_else(|| FleetError::Refused(format!("no suite {id}")))?;
                let given = crate::studies::Given { targets: &self.targets, size: None, destructive: &self.destructive };
                let mut plans = Vec::new();
                for p in study.parts {
                    plans.extend(p.plan(*quick, &given).map_err(|e| FleetError::Refused(e.to_string()))?.map(|text| (text, Vec::new())));
                }
                plans
            }
        })
    }

    /// A task's runs done and runs in its share over every part of `plans` (`Fleet::plans`),
    /// from its handed-over database; None before it handed any over.
    pub fn progress(&self, plans: &[(String, Vec<String>)], task: usize) -> Result<Option<(usize, usize)>, FleetError> {
        use crate::session::sweep::{share_progress, Share};
        let db = self.task_db(task);
        if !db.exists() {
            return Ok(None);
        }
        let (index, count) = self.share(task);
        let share = Share { index, count };
        let (mut done, mut total, mut seen) = (0, 0, false);
        for (text, targets) in plans {
            let e = crate::plan::sweep::expand(text, targets).map_err(|e| FleetError::Refused(e.to_string()))?;
            match share_progress(&db, &e, &crate::plan::sweep::plan_hash(text, targets), share)? {
                Some((d, t)) => (done, total, seen) = (done + d, total + t, true),
                // A part not started yet: its share is all to do.
                None => total += share.keys(&e).len() * e.replicates as usize,
            }
        }
        Ok(seen.then_some((done, total)))
    }

    /// The iolab command a task runs, with its share and its hand-over copy.
    fn task_command(&self) -> String {
        let mut args: Vec<String> = vec![q(&self.iolab.display().to_string())];
        match &self.work {
            Work::Plan { file } => args.extend(["sweep".into(), q(&file.display().to_string())]),
            Work::Suite { id, quick } => {
                args.extend(["suite".into(), "run".into(), q(id)]);
                if *quick {
                    args.push("--quick".into());
                }
            }
        }
        args.extend(self.targets.iter().map(|t| q(t)));
        for d in &self.destructive {
            args.extend(["--destructive".into(), q(d)]);
        }
        let share = if self.every_node { "0/1".to_string() } else { format!("\"$task/{}\"", self.placement.tasks) };
        args.extend(["--db".into(), "\"$local\"".into(), "--share".into(), share]);
        if let Some(split) = self.split.as_ref().filter(|_| !self.every_node) {
            args.extend(["--split".into(), q(split)]);
        }
        args.extend(["--handover".into(), "\"$handover\"".into(), "--quiet".into()]);
        args.join(" ")
    }

    /// The sbatch script: a job array, one exclusive node per task.
    pub(crate) fn batch_script(&self) -> String {
        let p = &self.placement;
        let results = self.results.display().to_string();
        let mut s = String::from("#!/bin/bash\n");
        let mut sbatch = |opt: &str| s.push_str(&format!("#SBATCH {opt}\n"));
        sbatch(&format!("--job-name=iolab-{}", self.name));
        sbatch(&format!("--array=0-{}", p.tasks.saturating_sub(1)));
        // A measurement shares its node with nothing: whole nodes, one task each.
        sbatch("--nodes=1");
        sbatch("--ntasks=1");
        sbatch("--exclusive");
        sbatch(&format!("--output={results}/slurm-%A_%a.out"));
        // Time to stop cleanly (restore settings, store the run in progress as interrupted and
        // hand over) before a time limit: Slurm signals the batch shell 120 s ahead.
        sbatch("--signal=B:TERM@120");
        for (opt, v) in [("partition", &p.partition), ("constraint", &p.constraint), ("time", &p.time), ("account", &p.account)] {
            if let Some(v) = v {
                sbatch(&format!("--{opt}={v}"));
            }
        }
        s.push_str(&format!(
            r#"# Written by `iolab fleet submit` ({name}): task I of this array runs {part} on its node. Resubmitting (`iolab fleet submit` again with the same
# results directory) continues every task from what it handed over; no run is done twice.
set -uo pipefail
task=${{SLURM_ARRAY_TASK_ID:?run this script with sbatch, as a job array}}
results={results_q}
local={local_q}/iolab-fleet-{name}-$task.db
handover="$results/task-$task.db"
mkdir -p {local_q}
# The working database is node-local (no network file system while measuring); a task that
# starts again, here or on another node, continues from its last hand-over.
if [ -s "$handover" ] && {{ [ ! -s "$local" ] || [ "$handover" -nt "$local" ]; }}; then
  cp "$handover" "$local"
fi
started=$(date +%s)
echo "iolab fleet {name}: task $task of {n} on $(hostname), job ${{SLURM_ARRAY_JOB_ID:-?}}, $(date -Is)"
{cmd} &
pid=$!
# Slurm's TERM (scancel, preemption, the time limit) reaches iolab, which stops cleanly.
trap 'kill -TERM $pid 2>/dev/null' TERM INT
rc=0
wait $pid || rc=$?
while kill -0 $pid 2>/dev/null; do wait $pid || rc=$?; done
# Every task brings its runs into the merged database; merging is exactly-once, so a task
# merged twice adds nothing.
if [ -s "$handover" ]; then
  flock "$results/.merge.lock" {iolab} merge "$handover" --into {merged} || {{ [ "$rc" -ne 0 ] || rc=1; }}
fi
# `iolab fleet status` reads this line where Slurm keeps no accounting (no slurmdbd).
echo "iolab fleet {name}: task $task ended with exit $rc after $(( $(date +%s) - started )) s, $(date -Is)"
exit $rc
"#,
            name = self.name,
            n = p.tasks,
            part = if self.every_node { "the whole plan" } else { "share I/N of the plan's configurations" },
            results_q = q(&results),
            local_q = q(&self.local_dir.display().to_string()),
            cmd = self.task_command(),
            iolab = q(&self.iolab.display().to_string()),
            merged = match &self.store {
                Some(url) => q(url),
                None => format!("\"$results/{MERGED_DB}\""),
            },
        ));
        s
    }
}

/// Slurm's client commands, each run with the environment of this process (`SLURM_CONF`) and
/// its output parsed. Err: `FleetError::Slurm`, the command's first line of complaint.
#[derive(Clone, Copy, Debug, Default)]
pub struct Slurm;

impl Slurm {
    fn run(&self, cmd: &mut Command, what: &str) -> Result<Output, FleetError> {
        cmd.output().map_err(|e| FleetError::Slurm(format!("cannot run {what}: {e} (is Slurm's client installed and on PATH?)")))
    }

    /// `sbatch --parsable EXTRA SCRIPT`: the job's id.
    pub fn submit(&self, script: &Path, extra: &[String]) -> Result<String, FleetError> {
        let out = self.run(Command::new("sbatch").arg("--parsable").args(extra).arg(script), "sbatch")?;
        if !out.status.success() {
            return Err(FleetError::Slurm(format!("sbatch refused the job: {}", String::from_utf8_lossy(&out.stderr).trim())));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().split(';').next().unwrap_or("").to_string())
    }

    /// A Slurm host list (`node[1-3],gpu7`) as host names, by `scontrol show hostnames` (the
    /// list checked first by `check_hostlist`).
    pub(crate) fn hostnames(&self, list: &str) -> Result<Vec<String>, FleetError> {
        let out = self.run(Command::new("scontrol").args(["show", "hostnames", list]), "scontrol to read --nodelist")?;
        if !out.status.success() {
            return Err(FleetError::Slurm(format!("--nodelist {list}: {}", String::from_utf8_lossy(&out.stderr).trim())));
        }
        Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().map(String::from).collect())
    }

    /// Every node of the partition (Slurm's default one when none is given), by `sinfo`.
    pub fn nodes(&self, partition: Option<&str>) -> Result<Vec<NodeInfo>, FleetError> {
        let mut cmd = Command::new("sinfo");
        cmd.args(["-h", "-N", "-o", "%N|%t|%f"]);
        if let Some(p) = partition {
            cmd.args(["-p", p]);
        }
        let out = self.run(&mut cmd, "sinfo to find every node")?;
        if !out.status.success() {
            return Err(FleetError::Slurm(format!("sinfo: {}", String::from_utf8_lossy(&out.stderr).trim())));
        }
        Ok(parse_sinfo(&String::from_utf8_lossy(&out.stdout)))
    }

    /// The job's tasks still in Slurm's queue (pending or running), by `squeue`.
    pub fn queued(&self, job: &str) -> Result<Vec<QueuedTask>, FleetError> {
        let out = self.run(Command::new("squeue").args(["-h", "-r", "-j", job, "-o", "%i|%T|%N"]), "squeue")?;
        // A job Slurm has forgotten is an error to squeue: nothing of it is queued.
        Ok(if out.status.success() { parse_squeue(&String::from_utf8_lossy(&out.stdout)) } else { Vec::new() })
    }

    /// How the tasks no longer queued ended, by Slurm's accounting (`sacct`), newest job first;
    /// Err with the reason where the cluster keeps none (no slurmdbd).
    pub(crate) fn accounted(&self, jobs: &[String]) -> Result<Vec<AccountedTask>, FleetError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let out = self.run(
            Command::new("sacct").args(["-n", "-P", "-X", "-j", &jobs.join(","), "-o", "JobID,State,ExitCode,Elapsed,NodeList"]),
            "sacct",
        )?;
        let err = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() || err.contains("disabled") {
            return Err(FleetError::Slurm(format!("sacct: {}", err.lines().next().unwrap_or("failed").trim())));
        }
        let mut tasks = parse_sacct(&String::from_utf8_lossy(&out.stdout));
        tasks.sort_by_key(|t| std::cmp::Reverse(jobs.iter().position(|j| *j == t.job)));
        Ok(tasks)
    }

    /// Every node of the partition that Slurm can give a job and that has the constraint's
    /// features: (the nodes, the nodes of those features left out as not usable). Err when none
    /// is usable (the request's: no node fits it).
    pub(crate) fn every_node(&self, partition: Option<&str>, constraint: Option<&str>) -> Result<(Vec<String>, Vec<NodeInfo>), FleetError> {
        let all = self.nodes(partition)?;
        let (usable, left_out): (Vec<NodeInfo>, Vec<NodeInfo>) =
            all.iter().filter(|n| constraint.is_none_or(|c| n.satisfies(c))).cloned().partition(NodeInfo::usable);
        if usable.is_empty() {
            return Err(FleetError::Refused(format!(
                "--every-node: no usable node{}{} (sinfo lists {})",
                partition.map(|p| format!(" in partition {p}")).unwrap_or_default(),
                constraint.map(|c| format!(" with features {c}")).unwrap_or_default(),
                all.len()
            )));
        }
        Ok((usable.into_iter().map(|n| n.name).collect(), left_out))
    }
}

/// A word for the shell: single-quoted unless it is plainly safe.
fn q(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-=:,+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// A fleet's name from what it runs: letters, digits, dots, dashes and underscores only (it is
/// part of Slurm's job name and of file names on the nodes).
pub(crate) fn name_of(work: &Work) -> String {
    let raw = match work {
        Work::Plan { file } => file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "plan".into()),
        Work::Suite { id, quick } => format!("{}{}", id.to_lowercase(), if *quick { "-quick" } else { "" }),
    };
    raw.chars().map(|c| if c.is_ascii_alphanumeric() || "._-".contains(c) { c } else { '_' }).collect()
}

/// One array task as `squeue` shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct QueuedTask {
    pub task: usize,
    pub state: String,
    pub node: String,
}

/// `squeue -h -r -j JOB -o '%i|%T|%N'` lines: `JOB_TASK|STATE|NODE` (a pending array may show
/// as `JOB_[0-3]` without `-r`; with `-r` one line per task).
pub(crate) fn parse_squeue(out: &str) -> Vec<QueuedTask> {
    out.lines()
        .filter_map(|l| {
            let mut f = l.trim().split('|');
            let id = f.next()?;
            let task = id.rsplit_once('_')?.1.parse().ok()?;
            Some(QueuedTask { task, state: f.next()?.to_string(), node: f.next().unwrap_or("").to_string() })
        })
        .collect()
}

/// One array task as Slurm's accounting has it (`sacct`).
#[derive(Clone, Debug, PartialEq)]
pub struct AccountedTask {
    pub job: String,
    pub task: usize,
    /// COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, ...
    pub state: String,
    /// `code:signal`, as Slurm gives it.
    pub exit: String,
    pub elapsed: String,
    pub node: String,
}

/// `sacct -n -P -X -j JOBS -o JobID,State,ExitCode,Elapsed,NodeList` lines: one per array task
/// (`JOB_TASK`); a state with a reason (`CANCELLED by 0`) keeps its first word.
pub(crate) fn parse_sacct(out: &str) -> Vec<AccountedTask> {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.trim().split('|').collect();
            let (job, task) = f.first()?.rsplit_once('_')?;
            Some(AccountedTask {
                job: job.to_string(),
                task: task.parse().ok()?,
                state: f.get(1)?.split_whitespace().next()?.to_string(),
                exit: f.get(2).unwrap_or(&"").to_string(),
                elapsed: f.get(3).unwrap_or(&"").to_string(),
                node: f.get(4).unwrap_or(&"").to_string(),
            })
        })
        .collect()
}

/// What a task's Slurm output file says (the lines the batch script writes): the node it ran
/// on, and how it ended, if it reached its end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskLog {
    pub node: Option<String>,
    pub exit: Option<i32>,
    pub elapsed_s: Option<u64>,
}

pub(crate) fn parse_task_log(text: &str) -> TaskLog {
    let mut log = TaskLog::default();
    for line in text.lines().filter(|l| l.starts_with("iolab fleet ")) {
        if let Some((_, rest)) = line.split_once(" on ") {
            log.node = rest.split(',').next().map(str::to_string);
        }
        if let Some((_, rest)) = line.split_once(" ended with exit ") {
            let mut words = rest.split_whitespace();
            log.exit = words.next().and_then(|w| w.parse().ok());
            log.elapsed_s = words.nth(1).and_then(|w| w.parse().ok());
        }
    }
    log
}

/// A node's line of `sinfo -h -N -o '%N|%t|%f'`: its name, state and features.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInfo {
    pub name: String,
    pub state: String,
    pub features: Vec<String>,
}

pub(crate) fn parse_sinfo(out: &str) -> Vec<NodeInfo> {
    let mut nodes: Vec<NodeInfo> = Vec::new();
    for l in out.lines() {
        let f: Vec<&str> = l.trim().split('|').collect();
        let (Some(name), Some(state)) = (f.first().filter(|n| !n.is_empty()), f.get(1)) else { continue };
        // A node in two partitions is listed twice.
        if nodes.iter().any(|n| n.name == *name) {
            continue;
        }
        let features =
            f.get(2).map_or(Vec::new(), |x| x.split(',').filter(|w| !w.is_empty() && *w != "(null)").map(String::from).collect());
        nodes.push(NodeInfo { name: name.to_string(), state: state.to_string(), features });
    }
    nodes
}

impl NodeInfo {
    /// Whether Slurm can give this node a job now or soon: up and responding (no `*`), not
    /// down, drained, failed or in maintenance.
    pub fn usable(&self) -> bool {
        let s = self.state.trim_end_matches(['~', '#', '!', '%', '$', '@', '^', '-']);
        ["idle", "mix", "alloc", "comp", "resv", "plnd"].contains(&s)
    }

    /// Whether its features satisfy a `--constraint` of `&`-joined terms, each one feature or
    /// `|`-joined alternatives (Slurm's brackets, counts and `*` are not read).
    pub(crate) fn satisfies(&self, constraint: &str) -> bool {
        constraint.split('&').all(|term| term.split('|').any(|f| self.features.iter().any(|x| x == f.trim())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fleet() -> Fleet {
        Fleet {
            name: "grid".into(),
            work: Work::Plan { file: "/shared/r/plan.toml".into() },
            targets: vec!["/dev/nvme0n1".into()],
            destructive: vec![],
            placement: Placement { tasks: 4, partition: Some("ssd".into()), time: Some("1:00:00".into()), ..Default::default() },
            results: "/shared/my results".into(),
            local_dir: "/var/tmp".into(),
            iolab: "/opt/iolab/bin/iolab".into(),
            jobs: vec![],
            every_node: false,
            nodes: vec![],
            store: None,
            split: Some("5p1it".into()),
        }
    }

    #[test]
    fn the_script_is_an_exclusive_array_running_one_share_per_task() {
        let s = fleet().batch_script();
        for want in [
            "#SBATCH --array=0-3\n",
            "#SBATCH --exclusive\n",
            "#SBATCH --nodes=1\n",
            "#SBATCH --partition=ssd\n",
            "#SBATCH --time=1:00:00\n",
            "#SBATCH --job-name=iolab-grid\n",
            "#SBATCH --output=/shared/my results/slurm-%A_%a.out\n",
            "/opt/iolab/bin/iolab sweep /shared/r/plan.toml /dev/nvme0n1 --db \"$local\" --share \"$task/4\" --split 5p1it --handover \"$handover\" --quiet &",
            "results='/shared/my results'\n",
            "merge \"$handover\" --into \"$results/fleet.db\"",
        ] {
            assert!(s.contains(want), "the script lacks {want:?}:\n{s}");
        }
        assert!(!s.contains("--constraint"), "no constraint was given");
        // Every #SBATCH line comes before the first command, or sbatch ignores it.
        let first_command = s.lines().position(|l| !l.starts_with('#') && !l.is_empty()).unwrap();
        assert!(s.lines().skip(first_command).all(|l| !l.starts_with("#SBATCH")));
    }

    #[test]
    fn a_suite_task_runs_the_suite_and_quotes_odd_words() {
        let mut f = fleet();
        f.work = Work::Suite { id: "S3".into(), quick: true };
        f.targets = vec!["/data/it's here".into()];
        let s = f.batch_script();
        assert!(s.contains("iolab suite run S3 --quick '/data/it'\\''s here' --db"), "{s}");
        assert_eq!(name_of(&f.work), "s3-quick");
        assert_eq!(name_of(&Work::Plan { file: "/x/my plan.toml".into() }), "my_plan");
    }

    #[test]
    fn squeue_lines_become_tasks() {
        let tasks = parse_squeue("17_0|RUNNING|node3\n17_1|PENDING|\n17_[2-3]|PENDING|\n");
        assert_eq!(
            tasks,
            vec![
                QueuedTask { task: 0, state: "RUNNING".into(), node: "node3".into() },
                QueuedTask { task: 1, state: "PENDING".into(), node: "".into() }
            ]
        );
    }

    #[test]
    fn on_every_node_a_task_runs_the_whole_plan_and_hands_over_to_the_named_store() {
        let mut f = fleet();
        f.every_node = true;
        f.store = Some("postgresql://lab@db.lab/iolab".into());
        let s = f.batch_script();
        assert!(s.contains("--db \"$local\" --share 0/1 --handover"), "{s}");
        assert!(s.contains("runs the whole plan on its node"), "{s}");
        assert!(s.contains("merge \"$handover\" --into postgresql://lab@db.lab/iolab ||"), "{s}");
        assert_eq!(f.share(3), (0, 1));
        assert_eq!(f.merged_db(), PathBuf::from("postgresql://lab@db.lab/iolab"));
    }

    #[test]
    fn accounting_lines_and_output_files_say_how_a_task_ended() {
        let acct = parse_sacct(
            "41_0|COMPLETED|0:0|00:01:02|node3\n41_1|CANCELLED by 0|0:15|00:00:09|node4\n41_[2-3]|PENDING|0:0|00:00:00|None assigned\n",
        );
        assert_eq!(acct.len(), 2);
        assert_eq!((acct[1].task, acct[1].state.as_str(), acct[1].exit.as_str(), acct[1].node.as_str()), (1, "CANCELLED", "0:15", "node4"));
        let log = parse_task_log(
            "iolab fleet grid: task 1 of 2 on node7, job 41, 2026-11-26T10:00:00+00:00\nsome output\n\
             iolab fleet grid: task 1 ended with exit 143 after 12 s, 2026-11-26T10:00:12+00:00\n",
        );
        assert_eq!(log, TaskLog { node: Some("node7".into()), exit: Some(143), elapsed_s: Some(12) });
        assert_eq!(parse_task_log("iolab fleet grid: task 0 of 2 on node7, job 41, now\n").exit, None);
    }

    #[test]
    fn every_usable_node_once_with_its_features() {
        let nodes = parse_sinfo("n1|idle|ssd,gen5\nn2|down*|ssd\nn1|idle|ssd,gen5\nn3|mix|gen4\nn4|drain|ssd\n");
        let names = |f: &dyn Fn(&NodeInfo) -> bool| nodes.iter().filter(|n| f(n)).map(|n| n.name.as_str()).collect::<Vec<_>>();
        assert_eq!(names(&|n| n.usable()), ["n1", "n3"]);
        assert_eq!(names(&|n| n.satisfies("ssd")), ["n1", "n2", "n4"]);
        assert_eq!(names(&|n| n.satisfies("ssd&gen5")), ["n1"]);
        assert_eq!(names(&|n| n.satisfies("gen4|gen5")), ["n1", "n3"]);
    }
}
