//! `iolab fleet` under a real Slurm: Debian's slurm-wlm and munge, a controller and a node daemon
//! on this machine (one node, its own ports, config and state in a temporary directory), jobs
//! submitted with sbatch. Installed by the test when missing (root and a package registry);
//! skipped with the reason where that cannot be.
use crate::common::{self, BIN};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A private Slurm cluster of this one machine; stopped (daemons killed) when dropped.
struct Slurm {
    dir: tempfile::TempDir,
    conf: PathBuf,
}

impl Drop for Slurm {
    fn drop(&mut self) {
        for (pid, name) in [("slurmd.pid", "slurmd"), ("slurmctld.pid", "slurmctld"), ("munge/pid", "munged")] {
            if let Ok(p) = std::fs::read_to_string(self.dir.path().join(pid)) {
                // Only while the pid is still that daemon: a pid file outlives a daemon that
                // ended, and its pid may be another process's by now (pid_max is 32768 here):
                // a SIGTERM to a stale one once stopped another test's `iolab sweep --resume`
                // (sweep::ctrl_c_stops_cleanly_keeping_finished_runs, exit 130).
                let comm = |p: i32| std::fs::read_to_string(format!("/proc/{p}/comm")).unwrap_or_default();
                if let Some(p) = p.trim().parse::<i32>().ok().filter(|p| *p > 0 && comm(*p).trim() == name) {
                    // SAFETY: kill has no memory preconditions; the pid is a daemon this test started.
                    unsafe { libc::kill(p, libc::SIGTERM) };
                }
            }
        }
    }
}

fn have(cmd: &str) -> bool {
    ["/usr/bin", "/usr/sbin", "/bin", "/sbin"].iter().any(|d| Path::new(d).join(cmd).exists())
}

fn install() -> Result<(), String> {
    if ["sbatch", "slurmctld", "slurmd", "munged", "flock"].iter().all(|c| have(c)) {
        return Ok(());
    }
    if !common::is_root() {
        return Err("Slurm (slurm-wlm, munge) is not installed and only root can install it".into());
    }
    common::apt_install(&["slurm-wlm", "munge"])
}

fn start() -> Result<Slurm, String> {
    install()?;
    let dir = tempfile::Builder::new().prefix("iolab-slurm-").tempdir().unwrap();
    let d = dir.path();
    for sub in ["state", "spool", "munge"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    // munge: its own key and socket, so nothing of the machine's own set-up is touched.
    let key: Vec<u8> = (0..1024u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 ^ std::process::id() as u8).collect();
    std::fs::write(d.join("munge/key"), key).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d.join("munge"), std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::set_permissions(d.join("munge/key"), std::fs::Permissions::from_mode(0o400)).unwrap();
    let sock = d.join("munge/sock");
    let out = Command::new(if have("munged") { "munged" } else { "/usr/sbin/munged" })
        .arg("--force")
        .arg(format!("--socket={}", sock.display()))
        .arg(format!("--key-file={}", d.join("munge/key").display()))
        .arg(format!("--pid-file={}", d.join("munge/pid").display()))
        .arg(format!("--log-file={}", d.join("munge/log").display()))
        .arg(format!("--seed-file={}", d.join("munge/seed").display()))
        .output()
        .map_err(|e| format!("cannot start munged: {e}"))?;
    if !out.status.success() {
        return Err(format!("munged did not start: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    // The short host name, as slurmd finds its own node by it.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().split('.').next().unwrap().to_string();
    let port = 20000 + (std::process::id() % 20000) as u16;
    let conf = d.join("slurm.conf");
    std::fs::write(
        &conf,
        format!(
            "ClusterName=iolabtest\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={port}\nSlurmdPort={}\nSlurmUser=root\nSlurmdUser=root\n\
             AuthType=auth/munge\nAuthInfo=socket={sock}\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\nSlurmctldLogFile={d}/slurmctld.log\n\
             SlurmdLogFile={d}/slurmd.log\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nMpiDefault=none\n\
             ReturnToService=2\nSchedulerType=sched/backfill\nNodeName={host} NodeAddr=127.0.0.1 CPUs={} RealMemory=1000 State=UNKNOWN\n\
             PartitionName=iolab Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            port + 1,
            std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            sock = sock.display(),
            d = d.display()
        ),
    )
    .unwrap();
    let slurm = Slurm { dir, conf };
    for daemon in ["slurmctld", "slurmd"] {
        let out = Command::new(daemon).arg("-f").arg(&slurm.conf).env("SLURM_CONF", &slurm.conf).output().unwrap();
        if !out.status.success() {
            return Err(format!("{daemon} did not start: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
    }
    // The node is up when sinfo says it is idle.
    let until = Instant::now() + Duration::from_secs(30);
    while Instant::now() < until {
        let out = slurm.cmd("sinfo", &["-h", "-o", "%t"]);
        if String::from_utf8_lossy(&out.stdout).trim() == "idle" {
            return Ok(slurm);
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    Err(format!("the Slurm node never became idle (logs in {})", slurm.dir.path().display()))
}

impl Slurm {
    fn cmd(&self, prog: &str, args: &[&str]) -> Output {
        Command::new(prog).args(args).env("SLURM_CONF", &self.conf).output().unwrap()
    }

    fn iolab(&self, dir: &Path, args: &[&str]) -> common::Run {
        let out = Command::new(BIN).args(args).current_dir(dir).env("SLURM_CONF", &self.conf).env("TMPDIR", dir).output().unwrap();
        common::Run::from(out, args.iter().map(|s| s.to_string()).collect())
    }

    /// Wait until none of the fleet's jobs is queued or running.
    fn wait_idle(&self, limit: Duration) {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if String::from_utf8_lossy(&self.cmd("squeue", &["-h"]).stdout).trim().is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        panic!("Slurm jobs still queued after {limit:?}: {}", String::from_utf8_lossy(&self.cmd("squeue", &[]).stdout));
    }
}

/// (runs stored, planned runs done, distinct planned runs the stored runs came from) in a database.
fn counts(db: &Path) -> (i64, i64, i64) {
    let c = rusqlite::Connection::open(db).unwrap();
    let one = |q: &str| c.query_row(q, [], |r| r.get::<_, i64>(0)).unwrap();
    (
        one("SELECT count(*) FROM runs"),
        one("SELECT count(*) FROM planned_runs WHERE status != 'planned'"),
        one("SELECT count(DISTINCT planned_id) FROM runs"),
    )
}

const PLAN: &str = r#"
name = "fleet-test"
replicates = 2
seed = 11
runtime = "0.3s"
[matrix]
interface = ["null"]
qd = [1, 2, 4]
bs = ["4k", "8k"]
"#;

#[test]
fn a_plan_split_over_an_array_is_stored_once_and_a_cancelled_task_resumes() {
    let slurm = match start() {
        Ok(s) => s,
        Err(why) => return common::skip_or_fail("fleet::a_plan_split_over_an_array_is_stored_once_and_a_cancelled_task_resumes", &why),
    };
    let dir = common::tempdir();
    let d = dir.path();
    std::fs::write(d.join("grid.toml"), PLAN).unwrap();
    let results = d.join("shared");
    let res = results.to_str().unwrap();
    let local = d.join("local");
    let local = local.to_str().unwrap();

    // --print shows the script and submits nothing.
    let printed = slurm.iolab(d, &["fleet", "submit", "grid.toml", "--nodes", "2", "--results", res, "--print"]);
    printed.assert_ok();
    assert!(printed.stdout.contains("#SBATCH --array=0-1") && printed.stdout.contains("#SBATCH --exclusive"));
    assert!(!results.exists(), "--print wrote the results directory");

    // Two tasks, one share each (6 configurations x 2 replicates, 0.3 s each): the first task
    // is cancelled once it has handed over some runs, then the fleet is submitted again.
    slurm.iolab(d, &["fleet", "submit", "grid.toml", "--nodes", "2", "--results", res, "--local-dir", local, "--time", "5:00"]).assert_ok();
    let task0 = results.join("task-0.db");
    let until = Instant::now() + Duration::from_secs(60);
    while !(task0.exists() && counts(&task0).0 >= 2) {
        assert!(Instant::now() < until, "task 0 handed over no runs in 60 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    let job = std::fs::read_to_string(results.join("fleet.json")).unwrap();
    let job: serde_json::Value = serde_json::from_str(&job).unwrap();
    let job = job["jobs"][0].as_str().unwrap().to_string();
    assert!(slurm.cmd("scancel", &[&job]).status.success());
    slurm.wait_idle(Duration::from_secs(60));
    let (stored, _, _) = counts(&task0);
    assert!(stored < 6, "task 0 finished before it was cancelled ({stored} runs): make the runs longer");
    let status = slurm.iolab(d, &["fleet", "status", res]);
    status.assert_ok();
    // Cancelled, so no longer queued: how it ended comes from accounting, or where this test
    // cluster keeps none (no slurmdbd) from the line its batch script wrote at its end.
    let accounting = !status.stdout.contains("Slurm accounting is not available here");
    let end = if accounting { "CANCELLED" } else { "FAILED exit " };
    assert!(status.stdout.contains(&format!("task 0: {end}")) && status.stdout.contains(" of 6 runs done"), "{}", status.stdout);

    // Submitted again: only what is left runs; then every planned run is stored exactly once.
    slurm.iolab(d, &["fleet", "submit", "grid.toml", "--nodes", "2", "--results", res, "--local-dir", local, "--time", "5:00"]).assert_ok();
    slurm.wait_idle(Duration::from_secs(120));
    let merged = results.join("fleet.db");
    assert_eq!(counts(&merged), (12, 12, 12), "every planned run stored once in the merged database");
    let sweeps = slurm.iolab(d, &["results", "--db", merged.to_str().unwrap(), "--sweeps"]);
    assert_eq!(sweeps.stdout.matches("fleet-test").count(), 1, "one sweep, not one per task: {}", sweeps.stdout);
    let status = slurm.iolab(d, &["fleet", "status", res]);
    assert!(status.stdout.contains("12 of 12 handed-over runs done"), "{}", status.stdout);
    // A finished fleet submitted again runs nothing; another plan into its directory is refused.
    let again = slurm.iolab(d, &["fleet", "submit", "grid.toml", "--nodes", "2", "--results", res, "--local-dir", local]);
    assert!(again.stdout.contains("every task is done"), "{}", again.describe());
    let other = slurm.iolab(d, &["fleet", "submit", "grid.toml", "--nodes", "3", "--results", res]);
    assert_eq!(other.code, 2);
    assert!(other.one_line_stderr().contains("holds another fleet"));
    let status = slurm.iolab(d, &["fleet", "status", res]);
    let end = if accounting { "COMPLETED exit 0:0" } else { "COMPLETED exit 0 after" };
    assert!(status.stdout.contains(&format!("task 1: {end}")), "{}", status.stdout);

    // The whole plan on every node (this cluster has one: the array is one task, pinned to it),
    // handed over to a PostgreSQL server where the test can start one, else to fleet.db.
    let pg = crate::postgres::Server::start("fleet");
    if let Err(why) = &pg {
        common::skip_or_fail("fleet (every node into PostgreSQL; into fleet.db instead)", why);
    }
    let every = d.join("every");
    let every_res = every.to_str().unwrap();
    let mut submit = vec!["fleet", "submit", "grid.toml", "--every-node", "--results", every_res, "--local-dir", local, "--time", "5:00"];
    let url = pg.as_ref().map(|s| s.url("fleet")).ok();
    if let Some(url) = &url {
        submit.extend(["--store", url]);
    }
    let printed = slurm.iolab(d, &[&submit[..], &["--print"]].concat());
    assert!(printed.stdout.contains("--share 0/1") && printed.stdout.contains("the whole plan"), "{}", printed.stdout);
    let submitted = slurm.iolab(d, &submit);
    submitted.assert_ok();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().split('.').next().unwrap().to_string();
    assert!(submitted.stdout.contains(&format!("--array=0 --nodelist={host}")), "{}", submitted.describe());
    slurm.wait_idle(Duration::from_secs(120));
    let store = url.clone().unwrap_or_else(|| every.join("fleet.db").display().to_string());
    let s = iolab::store::Store::open_existing(Path::new(&store)).unwrap();
    let runs = s.list_runs(&Default::default()).unwrap();
    let sweeps = s.sweep_infos().unwrap();
    // The node made every planned run of its own sweep: one sweep per machine.
    assert_eq!((runs.len(), sweeps.len(), sweeps[0].done), (12, 1, 12));
    assert!(runs.iter().all(|r| r.hostname.as_deref() == Some(host.as_str())));
    // A second machine's sweep of the same plan (this one's split fleet, its runs renamed to
    // another host, as a second node would have made them) joins as a sweep of its own, and
    // the configuration compares across the two hosts.
    let other = d.join("other-node.db");
    std::fs::copy(&merged, &other).unwrap();
    let c = rusqlite::Connection::open(&other).unwrap();
    let renamed = format!("\"hostname\":\"{host}\"");
    // Made there, its runs and its sweep have identities of their own.
    c.execute(
        "UPDATE runs SET hostname = 'node-b', record = replace(record, ?1, '\"hostname\":\"node-b\"'), run_uid = lower(hex(randomblob(16)))",
        [&renamed],
    )
    .unwrap();
    c.execute("UPDATE sweeps SET uid = lower(hex(randomblob(16))), split = lower(hex(randomblob(16)))", []).unwrap();
    drop(c);
    let joined = slurm.iolab(d, &["merge", other.to_str().unwrap(), "--into", &store]);
    assert!(joined.stdout.contains("12 runs added, 0 already there; 1 sweeps created"), "{}", joined.describe());
    let by_host = slurm.iolab(d, &["compare", "--db", &store, "--by", "host", runs[0].config_key.as_deref().unwrap()]);
    by_host.assert_ok();
    assert!(by_host.stdout.contains(&host) && by_host.stdout.contains("node-b"), "{}", by_host.stdout);
    let status = slurm.iolab(d, &["fleet", "status", every_res]);
    assert!(
        status.stdout.contains("the whole plan on each node") && status.stdout.contains(&format!("task 0 [{host}]: COMPLETED")),
        "{}",
        status.stdout
    );
    assert!(status.stdout.contains("12 of 12 handed-over runs done"), "{}", status.stdout);
}

/// The options that become `#SBATCH` lines are checked against what sbatch takes: a newline (a
/// shell command in the batch script) or a reversed node range is one line, exit 2, and nothing
/// written; Slurm is not needed for that.
#[test]
fn placement_options_are_checked_before_anything_is_written() {
    let dir = common::tempdir();
    let d = dir.path();
    std::fs::write(d.join("grid.toml"), PLAN).unwrap();
    let results = d.join("shared");
    let res = results.to_str().unwrap();
    let submit = |extra: &[&str]| {
        let mut a = vec!["fleet", "submit", "grid.toml", "--results", res];
        a.extend_from_slice(extra);
        let out = Command::new(BIN).args(&a).current_dir(d).output().unwrap();
        common::Run::from(out, a.iter().map(|s| s.to_string()).collect())
    };
    for (opt, value) in [
        ("--partition", "lab\ntouch /tmp/iolab-fleet-injected"),
        ("--partition", "lab;id"),
        ("--account", "acct\nid"),
        ("--account", "a b"),
        ("--constraint", "ssd\nrm -rf ~"),
        ("--constraint", "ssd$(id)"),
        ("--time", "5:00\ntouch /x"),
        ("--time", "soon"),
        ("--time", "1:2:3:4"),
    ] {
        let r = submit(&["--nodes", "2", opt, value, "--print"]);
        let line = r.assert_usage_error();
        assert!(line.contains(opt), "the line names {opt}: {line}");
        assert!(r.stdout.is_empty(), "a batch script was printed:\n{}", r.describe());
        assert!(!results.exists(), "{}", r.describe());
    }
    for list in ["node[5-1]", "node[1-", "node[x]", "n1,,n2", "n1\nid"] {
        let r = submit(&["--nodelist", list, "--print"]);
        let line = r.assert_usage_error();
        assert!(line.contains("--nodelist"), "{line}");
        assert!(r.stdout.is_empty() && !results.exists(), "{}", r.describe());
    }
    // A password in --store would be written into the batch script: refused, and not shown.
    for url in ["postgresql://lab:S3cretPw@db.example/iolab", "postgresql://lab@db.example/iolab?password=S3cretPw"] {
        let r = submit(&["--nodes", "2", "--store", url, "--print"]);
        let line = r.assert_usage_error();
        assert!(line.contains("--store") && !r.stderr.contains("S3cretPw"), "{line}");
        assert!(r.stdout.is_empty() && !results.exists(), "{}", r.describe());
    }
    // What sbatch takes passes and stands in the script as given.
    let r = submit(&[
        "--nodes",
        "2",
        "--partition",
        "lab,gpu-x",
        "--account",
        "proj_1.a",
        "--constraint",
        "[ssd&nvme]|(hdd*2)",
        "--time",
        "1-02:30:00",
        "--print",
    ]);
    r.assert_ok();
    for line in [
        "#SBATCH --partition=lab,gpu-x\n",
        "#SBATCH --account=proj_1.a\n",
        "#SBATCH --constraint=[ssd&nvme]|(hdd*2)\n",
        "#SBATCH --time=1-02:30:00\n",
    ] {
        assert!(r.stdout.contains(line), "{line:?} missing:\n{}", r.stdout);
    }
}

/// A Slurm command that fails is Slurm's failure, not bad input: exit 4 and one line saying what
/// Slurm answered (a fake `sbatch` and `scontrol` first on PATH, so no Slurm is needed); a
/// request that is wrong is still bad input (exit 2).
#[test]
fn a_failed_sbatch_is_slurm_s_failure_not_bad_input() {
    let dir = common::tempdir();
    let d = dir.path();
    std::fs::write(d.join("grid.toml"), PLAN).unwrap();
    let bin = d.join("bin");
    std::fs::create_dir(&bin).unwrap();
    for (cmd, complaint) in [
        ("sbatch", "sbatch: error: Batch job submission failed: Invalid partition name specified"),
        ("scontrol", "scontrol: error: Unable to contact slurm controller"),
    ] {
        let path = bin.join(cmd);
        std::fs::write(&path, format!("#!/bin/sh\necho '{complaint}' >&2\nexit 1\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let results = d.join("shared");
    let res = results.to_str().unwrap();
    let submit = |extra: &[&str]| {
        let mut a = vec!["fleet", "submit", "grid.toml", "--results", res, "--local-dir", d.to_str().unwrap()];
        a.extend_from_slice(extra);
        let out = Command::new(BIN).args(&a).current_dir(d).env("PATH", &path).output().unwrap();
        common::Run::from(out, a.iter().map(|s| s.to_string()).collect())
    };
    let refused = submit(&["--nodes", "2"]);
    assert_eq!(refused.code, 4, "{}", refused.describe());
    let line = refused.one_line_stderr();
    assert!(line.contains("sbatch refused the job") && line.contains("Invalid partition"), "{line}");
    let unreachable = submit(&["--nodelist", "node[1-2]"]);
    assert_eq!(unreachable.code, 4, "{}", unreachable.describe());
    assert!(unreachable.one_line_stderr().contains("Unable to contact slurm controller"), "{}", unreachable.describe());
    // Bad input stays bad input.
    assert!(submit(&["--nodes", "0"]).assert_usage_error().contains("--nodes 0"));
    let none = Command::new(BIN).args(["fleet", "status", d.join("nothing").to_str().unwrap()]).output().unwrap();
    assert_eq!(none.status.code(), Some(2), "{}", String::from_utf8_lossy(&none.stderr));
}

/// A fleet on every node resubmitted keeps the machines of its first submission, each task on
/// its own, whatever `sinfo` lists now: one job per task of the fleet, none for a node that came
/// since (it once indexed past the fleet's nodes and panicked) and none left out for a node gone
/// (fake `sinfo`, `sbatch` and `squeue` first on PATH, so no Slurm is needed).
#[test]
fn a_fleet_on_every_node_resubmitted_keeps_its_tasks_on_their_nodes() {
    let dir = common::tempdir();
    let d = dir.path();
    std::fs::write(d.join("grid.toml"), PLAN).unwrap();
    let bin = d.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let (nodes, calls) = (d.join("sinfo.out"), d.join("sbatch.calls"));
    for (cmd, body) in [
        ("sinfo", format!("cat '{}'", nodes.display())),
        ("sbatch", format!("echo \"$@\" >> '{}'\necho 77", calls.display())),
        ("squeue", String::new()),
    ] {
        let path = bin.join(cmd);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\nexit 0\n")).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let results = d.join("shared");
    let submit = || {
        let a =
            ["fleet", "submit", "grid.toml", "--results", results.to_str().unwrap(), "--every-node", "--local-dir", d.to_str().unwrap()];
        let out = Command::new(BIN).args(a).current_dir(d).env("PATH", &path).output().unwrap();
        common::Run::from(out, a.iter().map(|s| s.to_string()).collect())
    };
    let submitted = || {
        let text = std::fs::read_to_string(&calls).unwrap_or_default();
        std::fs::remove_file(&calls).ok();
        text.lines()
            .map(|l| l.split_whitespace().filter(|w| w.starts_with("--array") || w.starts_with("--nodelist")).collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
    };
    std::fs::write(&nodes, "n1|idle|\nn2|idle|\n").unwrap();
    submit().assert_ok();
    assert_eq!(submitted(), ["--array=0 --nodelist=n1", "--array=1 --nodelist=n2"]);
    for (now, why) in [("n1|idle|\nn2|idle|\nn3|idle|\n", "a node more"), ("n1|idle|\n", "a node fewer")] {
        std::fs::write(&nodes, now).unwrap();
        let r = submit();
        r.assert_ok();
        assert_eq!(submitted(), ["--array=0 --nodelist=n1", "--array=1 --nodelist=n2"], "{why}:\n{}", r.describe());
    }
}
