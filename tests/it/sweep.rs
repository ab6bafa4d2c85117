//! Sweeps end to end: plan → runs → database; a sweep killed with SIGKILL resumes with every
//! run stored exactly once; Ctrl-C keeps finished runs; settings are restored.
use iolab::store::{RunFilter, Store};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn iolab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_iolab"))
}

fn work_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("iolab-sweep-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// A data file on a real filesystem (O_DIRECT needs one).
fn data_file(dir: &Path) -> String {
    let p = dir.join("data.img");
    std::fs::write(&p, vec![0x42u8; 16 << 20]).unwrap();
    p.to_str().unwrap().to_string()
}

fn plan(dir: &Path, target: &str, replicates: u32, ios: u64) -> std::path::PathBuf {
    let p = dir.join("plan.toml");
    std::fs::write(
        &p,
        format!(
            r#"
name = "resume-test"
replicates = {replicates}
seed = 11
ios = {ios}
targets = ["{target}"]
[matrix]
interface = ["psync", "libaio", "io_uring"]
qd = [1, 2]
bs = ["4k", "8k"]
[[rule]]
when = {{ interface = "psync", qd = ">1" }}
action = "drop"
reason = "sync interfaces reach depth with threads"
"#
        ),
    )
    .unwrap();
    p
}

fn done_count(db: &Path) -> usize {
    Store::open(db).ok().and_then(|s| s.list_runs(&RunFilter::default()).ok()).map_or(0, |r| r.len())
}

fn check_each_planned_run_once(db: &Path) -> usize {
    let store = Store::open(db).unwrap();
    let sweeps = store.sweeps().unwrap();
    assert_eq!(sweeps.len(), 1, "resume must not start a second sweep");
    let sweep = sweeps[0].0;
    let planned = store.planned_runs(sweep).unwrap();
    let runs = store.list_runs(&RunFilter { sweep: Some(sweep), ..Default::default() }).unwrap();
    let mut ids: Vec<i64> = runs.iter().map(|r| r.planned_id.unwrap()).collect();
    ids.sort();
    let before = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), before, "a planned run was stored twice");
    for p in &planned {
        assert_ne!(p.status, "planned", "planned run {} never ran", p.id);
        if p.status == "done" {
            assert!(ids.contains(&p.id), "done run {} has no stored result", p.id);
        }
    }
    assert_eq!(runs.len(), planned.iter().filter(|p| p.status == "done" || p.status == "failed").count());
    planned.len()
}

#[test]
fn dry_run_lists_runs_and_drops_with_reasons() {
    let dir = work_dir();
    let f = data_file(dir.path());
    let p = plan(dir.path(), &f, 2, 100);
    let out = iolab().args(["sweep", "--dry-run"]).arg(&p).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    // psync: 2 bs (qd 1 only); libaio and io_uring: 2 qd x 2 bs.
    assert!(text.contains("10 configurations x 2 replicates = 20 runs; 2 dropped"), "{text}");
    assert!(text.contains("sync interfaces reach depth with threads"));
    assert_eq!(text.lines().filter(|l| l.trim_start().starts_with("run ")).count(), 20);
    assert!(!dir.path().join("iolab.db").exists(), "a dry run writes nothing");
}

#[test]
fn killed_sweep_resumes_without_loss_or_duplicates() {
    let dir = work_dir();
    let f = data_file(dir.path());
    let p = plan(dir.path(), &f, 2, 3000);
    let db = dir.path().join("r.db");
    let mut child = iolab().args(["sweep", "-q", "--db"]).arg(&db).arg(&p).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while done_count(&db) < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL, midway through a run
    child.wait().unwrap();
    let before = done_count(&db);
    assert!((4..20).contains(&before), "killed after {before} runs");

    let again = iolab().args(["sweep", "-q", "--db"]).arg(&db).arg(&p).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "an unfinished sweep is not restarted silently");
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));

    let resumed = iolab().args(["sweep", "-q", "--resume", "--db"]).arg(&db).arg(&p).output().unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert_eq!(check_each_planned_run_once(&db), 20);
    assert_eq!(done_count(&db), 20);

    let nothing = iolab().args(["sweep", "-q", "--resume", "--db"]).arg(&db).arg(&p).output().unwrap();
    assert_eq!(nothing.status.code(), Some(2), "nothing left to resume");
}

#[test]
fn ctrl_c_stops_cleanly_keeping_finished_runs() {
    let dir = work_dir();
    let f = data_file(dir.path());
    let p = plan(dir.path(), &f, 3, 4000);
    let db = dir.path().join("r.db");
    let child = iolab().args(["sweep", "-q", "--db"]).arg(&db).arg(&p).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while done_count(&db) < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("continue with: iolab sweep --resume"), "{stdout}");
    let kept = done_count(&db);
    assert!((2..30).contains(&kept), "kept {kept}: {}", String::from_utf8_lossy(&out.stderr));
    let resumed = iolab().args(["sweep", "-q", "--resume", "--db"]).arg(&db).arg(&p).output().unwrap();
    assert!(
        resumed.status.success(),
        "{:?}\nstdout: {}\nstderr: {}\nthe interrupted sweep's stdout: {stdout}\nstderr: {}",
        resumed.status,
        String::from_utf8_lossy(&resumed.stdout),
        String::from_utf8_lossy(&resumed.stderr),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(check_each_planned_run_once(&db), 30);
}

#[test]
fn results_lists_filters_and_exports() {
    let dir = work_dir();
    let f = data_file(dir.path());
    let p = plan(dir.path(), &f, 1, 200);
    let db = dir.path().join("r.db");
    assert!(iolab().args(["sweep", "-q", "--db"]).arg(&db).arg(&p).status().unwrap().success());
    let list = iolab().args(["results", "--interface", "libaio", "--db"]).arg(&db).output().unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("4 runs"), "{text}");
    let csv = iolab().args(["results", "--csv", "-", "--db"]).arg(&db).output().unwrap();
    let csv = String::from_utf8_lossy(&csv.stdout);
    assert_eq!(csv.lines().count(), 11, "header and 10 runs");
    let json = iolab().args(["results", "--json", "-", "--db"]).arg(&db).output().unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 10);
    assert_eq!(v[0]["results"]["total"]["ios"], 200);
    let missing = iolab().args(["results", "--db"]).arg(dir.path().join("none.db")).output().unwrap();
    assert_eq!(missing.status.code(), Some(2), "{}", String::from_utf8_lossy(&missing.stderr));
}

/// Loop devices over files, detached when dropped; None (said) without root or losetup. They
/// hold `common::LOOPS`, one such test at a time (settings are owned per setting now, so two
/// runs on two devices no longer refuse each other; the lock only keeps loop use modest).
pub(crate) struct LoopDevices {
    pub devs: Vec<String>,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl LoopDevices {
    pub fn over(files: &[&str]) -> Option<LoopDevices> {
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root for losetup");
            return None;
        }
        let serial = crate::common::LOOPS.lock().unwrap_or_else(|e| e.into_inner());
        let mut made = LoopDevices { devs: Vec::new(), _serial: serial };
        for file in files {
            let out = Command::new("losetup").args(["-f", "--show", file]).output().unwrap();
            if !out.status.success() {
                eprintln!("skipped: losetup failed");
                return None;
            }
            made.devs.push(String::from_utf8(out.stdout).unwrap().trim().to_string());
        }
        Some(made)
    }
}

impl Drop for LoopDevices {
    fn drop(&mut self) {
        for dev in &self.devs {
            let _ = Command::new("losetup").args(["-d", dev]).status();
        }
    }
}

#[test]
fn scheduler_dimension_is_applied_and_restored_on_a_loop_device() {
    let dir = work_dir();
    let Some(lo) = LoopDevices::over(&[&data_file(dir.path())]) else { return };
    let dev = lo.devs[0].clone();
    let sched_file = format!("/sys/block/{}/queue/scheduler", dev.trim_start_matches("/dev/"));
    let original = std::fs::read_to_string(&sched_file).unwrap();
    let available: Vec<String> = original.split_whitespace().map(|s| s.trim_matches(|c| c == '[' || c == ']').to_string()).collect();
    let p = dir.path().join("plan.toml");
    let list = available.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ");
    std::fs::write(&p, format!("ios = 300\ntargets = [\"{dev}\"]\n[matrix]\nscheduler = [{list}]\n")).unwrap();
    let db = dir.path().join("r.db");
    let run =
        iolab().env("IOLAB_JOURNAL", dir.path().join("journal.json")).args(["sweep", "-q", "--db"]).arg(&db).arg(&p).output().unwrap();
    let after = std::fs::read_to_string(&sched_file).unwrap();
    drop(lo);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(after, original, "the scheduler was restored");
    let store = Store::open(&db).unwrap();
    let runs = store.list_runs(&RunFilter::default()).unwrap();
    assert_eq!(runs.len(), available.len());
    for r in &runs {
        let rec = store.run_record(r.id).unwrap().unwrap();
        let used = rec["environment"]["device_settings"][0]["scheduler"].as_str().unwrap().to_string();
        assert_eq!(Some(used.as_str()), rec["spec"]["scheduler"].as_str(), "each run ran under its scheduler");
    }
}

/// Planned runs of the only sweep in `db`, by status.
fn planned_statuses(db: &Path) -> Vec<(String, Option<String>)> {
    let store = Store::open(db).unwrap();
    let sweep = store.sweeps().unwrap()[0].0;
    store.planned_runs(sweep).unwrap().into_iter().map(|p| (p.status.to_string(), p.reason)).collect()
}

#[test]
fn engine_failure_in_a_sweep_is_stored_as_failed_never_skipped() {
    // libaio's io_setup fails (EAGAIN) once the threads' contexts together ask for more events
    // than fs.aio-max-nr allows: the engine fails to start, on any machine, as any user.
    let max_nr: u64 = std::fs::read_to_string("/proc/sys/fs/aio-max-nr").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(u64::MAX);
    let threads = max_nr / 1024 + 1;
    if threads > 256 {
        eprintln!("skipped: fs.aio-max-nr is {max_nr}; exhausting it takes {threads} threads of 4 MiB buffers each");
        return;
    }
    let dir = work_dir();
    let f = data_file(dir.path());
    let p = dir.path().join("plan.toml");
    std::fs::write(
        &p,
        format!(
            r#"
name = "engine-failure"
ios = 200
targets = ["{f}"]
[matrix]
interface = ["libaio"]
qd = [1024, 2]
threads = [{threads}, 1]
[[rule]]
when = {{ qd = 2, threads = ">1" }}
action = "drop"
reason = "one small configuration is enough"
"#
        ),
    )
    .unwrap();
    let db = dir.path().join("r.db");
    let out = iolab().args(["sweep", "-q", "--db"]).arg(&db).arg(&p).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let all = format!("{stdout}{stderr}");
    assert_eq!(out.status.code(), Some(1), "a sweep with a failed run exits 1:\n{all}");
    let st = planned_statuses(&db);
    assert!(!st.iter().any(|(s, _)| s == "skipped"), "an engine failure is not a skip: {st:?}");
    let failed: Vec<&Option<String>> = st.iter().filter(|(s, _)| s == "failed").map(|(_, r)| r).collect();
    assert_eq!(failed.len(), 1, "{st:?}\n{all}");
    assert!(failed[0].as_deref().unwrap_or("").contains("libaio: setup failed"), "stored with its error: {st:?}");
    assert_eq!(st.iter().filter(|(s, _)| s == "done").count(), 2, "the sweep went on after the failure: {st:?}");
    assert!(stdout.contains("1 failed before measuring, 0 skipped, 0 left"), "{all}");
    // `iolab results` shows it.
    let list = iolab().args(["results", "--db"]).arg(&db).output().unwrap();
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("1 planned runs failed before measuring"),
        "{}",
        String::from_utf8_lossy(&list.stdout)
    );
    let list = iolab().args(["results", "--status", "failed", "--db"]).arg(&db).output().unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("libaio: setup failed") && text.contains(&format!("threads={threads}")), "{text}");
}

/// A fake sysfs with one CPU whose governor iolab may change.
fn fake_cpufreq(dir: &Path) -> std::path::PathBuf {
    let c = dir.join("sys/devices/system/cpu/cpu0/cpufreq");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(c.join("scaling_governor"), "schedutil\n").unwrap();
    std::fs::write(c.join("scaling_available_governors"), "performance powersave schedutil\n").unwrap();
    c.join("scaling_governor")
}

#[test]
fn failed_settings_restore_stops_the_sweep_and_it_stays_resumable() {
    let dir = work_dir();
    let f = data_file(dir.path());
    let governor = fake_cpufreq(dir.path());
    let (sysfs, journal) = (dir.path().join("sys"), dir.path().join("journal.json"));
    let cmd = || {
        let mut c = iolab();
        c.env("IOLAB_SYSFS", &sysfs).env("IOLAB_JOURNAL", &journal);
        c
    };
    // Settings apply per block device behind the targets: the data file needs one.
    let rec = dir.path().join("probe.json");
    assert!(iolab().args(["run", "-q", "--ios", "10", &f, "--json"]).arg(&rec).stdout(Stdio::null()).status().unwrap().success());
    let rec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&rec).unwrap()).unwrap();
    if rec["environment"]["targets"][0]["device"].is_null() {
        eprintln!("skipped: {} has no block device behind it, so no setting applies to it", dir.path().display());
        return;
    }
    let p = dir.path().join("plan.toml");
    std::fs::write(&p, format!("name = \"restore-fails\"\nruntime = \"2s\"\ntargets = [\"{f}\"]\n[options]\nset = [\"governor=performance\"]\n[matrix]\nbs = [\"4k\", \"8k\", \"16k\"]\n")).unwrap();
    let db = dir.path().join("r.db");
    let child = cmd().args(["sweep", "-q", "--db"]).arg(&db).arg(&p).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    // Once the first run has changed the governor, make its file unwritable for the restore:
    // a directory where the file was (works without root, unlike chattr +i).
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&governor).map_or(true, |g| g.trim() != "performance") {
        assert!(Instant::now() < deadline, "the governor was never changed");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::fs::rename(&governor, governor.with_extension("moved")).unwrap();
    std::fs::create_dir(&governor).unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let all = format!("{stdout}{stderr}");
    assert_eq!(out.status.code(), Some(1), "a failed restore fails the sweep:\n{all}");
    assert!(all.contains("restoring system settings failed") && all.contains("iolab restore"), "says so and how to put them back:\n{all}");
    let st = planned_statuses(&db);
    assert!(!st.iter().any(|(s, _)| s == "skipped"), "nothing after it was skipped: {st:?}");
    assert_eq!(st.iter().filter(|(s, _)| s == "done").count(), 1, "stopped at once, the finished run's measurement kept: {st:?}");
    assert_eq!(st.iter().filter(|(s, _)| s == "planned").count(), 2, "the rest is left for --resume: {st:?}");
    assert!(stdout.contains("2 left"), "{all}");

    // Put the file back as the failed restore left it, restore, and resume to the end.
    std::fs::remove_dir(&governor).unwrap();
    std::fs::rename(governor.with_extension("moved"), &governor).unwrap();
    let early = cmd().args(["sweep", "-q", "--resume", "--db"]).arg(&db).arg(&p).output().unwrap();
    assert_eq!(early.status.code(), Some(1), "no run starts while settings are left changed: {}", String::from_utf8_lossy(&early.stderr));
    assert_eq!(planned_statuses(&db).iter().filter(|(s, _)| s == "planned").count(), 2, "and nothing was used up");
    let restore = cmd().arg("restore").output().unwrap();
    assert!(restore.status.success(), "{}", String::from_utf8_lossy(&restore.stderr));
    assert_eq!(std::fs::read_to_string(&governor).unwrap().trim(), "schedutil");
    let resumed = cmd().args(["sweep", "-q", "--resume", "--db"]).arg(&db).arg(&p).output().unwrap();
    assert!(resumed.status.success(), "{}", String::from_utf8_lossy(&resumed.stderr));
    assert!(planned_statuses(&db).iter().all(|(s, _)| s == "done"));
    assert_eq!(std::fs::read_to_string(&governor).unwrap().trim(), "schedutil", "each run restored the governor");
}

/// A study's set-up (`[options] setup`, what S1, S3 and S4 put in their plans): the scheduler is
/// set on the loop device through the journal and put back after the run, and the governor,
/// where the machine has no CPU frequency scaling (a VM), is not applied: the run goes on and its
/// record says why. The dry run prints the set-up.
#[test]
fn a_study_setup_is_applied_where_possible_and_recorded_where_not() {
    let dir = work_dir();
    let Some(lo) = LoopDevices::over(&[&data_file(dir.path())]) else { return };
    let dev = lo.devs[0].clone();
    let sched_file = format!("/sys/block/{}/queue/scheduler", dev.trim_start_matches("/dev/"));
    // Start from another scheduler than the set-up's, so the change shows.
    let _ = std::fs::write(&sched_file, "mq-deadline");
    let original = std::fs::read_to_string(&sched_file).unwrap();
    let p = dir.path().join("plan.toml");
    std::fs::write(&p, format!("ios = 300\ntargets = [\"{dev}\"]\n[matrix]\ninterface = [\"psync\"]\n[options]\nsetup = [\"scheduler=none\", \"governor=performance\"]\n"))
        .unwrap();
    let db = dir.path().join("r.db");
    let dry = iolab().args(["sweep", "--dry-run", "--db"]).arg(&db).arg(&p).output().unwrap();
    let dry = String::from_utf8_lossy(&dry.stdout).into_owned();
    // A journal of its own: another test changing settings at the same moment holds the machine's
    // journal, and this run would be refused for it (seen once in CI).
    let run =
        iolab().env("IOLAB_JOURNAL", dir.path().join("journal.json")).args(["sweep", "-q", "--db"]).arg(&db).arg(&p).output().unwrap();
    let after = std::fs::read_to_string(&sched_file).unwrap();
    drop(lo);
    assert!(dry.contains("set-up: scheduler=none, governor=performance for every run"), "{dry}");
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(after, original, "the scheduler was restored");
    let store = Store::open(&db).unwrap();
    let r = store.list_runs(&RunFilter::default()).unwrap().remove(0);
    let rec = store.run_record(r.id).unwrap().unwrap();
    let env = &rec["environment"];
    if original.contains("none") {
        assert_eq!(env["device_settings"][0]["scheduler"], "none", "{env}");
        assert!(env["settings_changed"].to_string().contains("scheduler"), "{env}");
    }
    let governors = std::path::Path::new("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").exists();
    let not_applied = env["setup_not_applied"].to_string();
    if governors {
        // Applied (or already in force), or not taken with the reason: never silently dropped.
        let said = env["settings_changed"].to_string().contains("governor") || not_applied.contains("governor=performance: ");
        assert!(said || env["device_settings"][0]["governor"] == "performance", "{env}");
    } else {
        assert!(not_applied.contains("governor=performance: ") && not_applied.contains("no CPU frequency scaling"), "{env}");
        assert_eq!(rec["status"], "ok", "the run went on without the governor");
    }
}

#[test]
fn a_setting_another_iolab_holds_is_waited_for_then_its_runs_fail_saying_who() {
    let dir = work_dir();
    let f = data_file(dir.path());
    let governor = fake_cpufreq(dir.path());
    let (sysfs, journal) = (dir.path().join("sys"), dir.path().join("journal.json"));
    let cmd = || {
        let mut c = iolab();
        c.env("IOLAB_SYSFS", &sysfs).env("IOLAB_JOURNAL", &journal);
        c
    };
    let rec = dir.path().join("probe.json");
    assert!(iolab().args(["run", "-q", "--ios", "10", &f, "--json"]).arg(&rec).stdout(Stdio::null()).status().unwrap().success());
    let rec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&rec).unwrap()).unwrap();
    if rec["environment"]["targets"][0]["device"].is_null() {
        eprintln!("skipped: {} has no block device behind it, so no setting applies to it", dir.path().display());
        return;
    }
    // Another live iolab (a stand-in process) holds the governor, as its journal entry says.
    let mut other = Command::new("sleep").arg("600").spawn().unwrap();
    let entry = serde_json::json!({ "version": 2, "entries": [{
        "owner": { "pid": other.id(), "pid_start_ticks": null, "started_at": 0, "command": "iolab suite run S1" },
        "guard": 1, "setting": "governor", "device": null, "target": "cpu0", "path": governor,
        "original": "schedutil", "new": "powersave" }] });
    std::fs::write(&journal, entry.to_string()).unwrap();
    std::fs::write(&governor, "powersave\n").unwrap();
    let p = dir.path().join("plan.toml");
    std::fs::write(&p, format!("name = \"busy\"\nios = 100\ntargets = [\"{f}\"]\n[options]\nset = [\"governor=performance\"]\n[matrix]\nbs = [\"4k\", \"8k\"]\n")).unwrap();
    let db = dir.path().join("r.db");
    for bad in ["nan", "8h1", "1e9s"] {
        let out = cmd().args(["sweep", "--wait-settings", bad, "--db"]).arg(&db).arg(&p).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.starts_with("iolab: --wait-settings: ") && err.lines().count() == 1, "{err}");
        assert!(!db.exists(), "refused before anything is made");
    }
    let out = cmd().args(["sweep", "--wait-settings", "1s", "--db"]).arg(&db).arg(&p).output().unwrap();
    let all = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let _ = other.kill();
    let _ = other.wait();
    assert_eq!(out.status.code(), Some(1), "its runs failed, the sweep went on:\n{all}");
    let st = planned_statuses(&db);
    assert_eq!(st.iter().filter(|(s, _)| s == "failed").count(), 2, "{st:?}\n{all}");
    let why = st[0].1.clone().unwrap_or_default();
    let held = format!("cpu0 governor is held by iolab pid {} (iolab suite run S1)", other.id());
    assert!(why.contains(&held) && why.contains("waited") && why.contains("--wait-settings 1s"), "{why}");
    assert!(all.contains(&format!("waiting (at most 1 s, --wait-settings) for {held}")), "says whom it waits for:\n{all}");
    assert_eq!(std::fs::read_to_string(&governor).unwrap().trim(), "powersave", "the holder's value untouched");
    // Its holder gone (killed), `iolab restore` puts its original back and the setting is free.
    let restore = cmd().arg("restore").output().unwrap();
    assert!(restore.status.success(), "{}", String::from_utf8_lossy(&restore.stderr));
    assert_eq!(std::fs::read_to_string(&governor).unwrap().trim(), "schedutil");
    let again = cmd().args(["sweep", "-q", "--new", "--db"]).arg(&db).arg(&p).output().unwrap();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(std::fs::read_to_string(&governor).unwrap().trim(), "schedutil");
}

/// `iolab suite run --quick -q` with its own journal and temporary directory.
fn quick_suite(dir: &Path, db: &Path, args: &[&str]) -> crate::common::Run {
    let mut all = vec!["suite", "run", "--quick", "-q", "--db", db.to_str().unwrap()];
    all.extend(args);
    let out = iolab().args(&all).env("IOLAB_JOURNAL", dir.join("journal.json")).env("TMPDIR", dir).output().unwrap();
    crate::common::Run::from(out, all.iter().map(|s| s.to_string()).collect())
}

/// S2's Table 2 (S2.4) is measured at each stack's saturation point, which S2.2's stored
/// J-curves give (issue 28): asked for before S2.2 has run, it is refused in one line naming the
/// part to run first, and nothing is stored; its dry run says so; once S2.2 is stored, every run
/// of each stack is at the queue depth the saturation analysis finds on S2.2's runs, and the
/// report says which.
#[test]
fn s2_measures_table_2_at_each_stack_s_saturation_point_found_in_s2_2_s_stored_runs() {
    let dir = work_dir();
    let d = dir.path();
    let Some(lo) = LoopDevices::over(&[&data_file(d)]) else { return };
    let dev = lo.devs[0].clone();
    let db = d.join("s2.db");

    let refused = quick_suite(d, &db, &["S2", "--part", "S2.4", &dev]);
    let line = refused.assert_usage_error();
    assert!(line.contains("S2.4-schedulers") && line.contains("iolab suite run S2 --quick --part S2.2-jcurve"), "{line}");
    assert!(refused.stdout.is_empty(), "{}", refused.describe());
    assert!(!db.exists(), "a refused part stores nothing");
    let dry = quick_suite(d, &db, &["S2", "--part", "S2.4", "--dry-run", &dev]);
    dry.assert_ok();
    assert!(dry.stdout.contains("each stack will run at its saturation point in S2.2-jcurve's stored runs"), "{}", dry.describe());

    quick_suite(d, &db, &["S2", "--part", "S2.2", &dev]).assert_ok();
    let dry = quick_suite(d, &db, &["S2", "--part", "S2.4", "--dry-run", &dev]);
    dry.assert_ok();
    assert!(dry.stdout.contains("  each stack at its saturation point in S2.2-jcurve (sweep #1): "), "{}", dry.describe());
    quick_suite(d, &db, &["S2", "--part", "S2.4", &dev]).assert_ok();

    let store = Store::open_existing(&db).unwrap();
    let sweeps = store.sweep_infos().unwrap();
    let id = |name: &str| sweeps.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no sweep {name}: {sweeps:?}")).id;
    let jcurve = iolab::report::data::load_sweep(&store, id("S2.2-jcurve"), &RunFilter::default()).unwrap();
    let found = iolab::studies::Saturations::of("S2.2-jcurve", &jcurve, None);
    let runs = store.list_runs(&RunFilter { sweep: Some(id("S2.4-schedulers")), ..Default::default() }).unwrap();
    let mut measured = 0;
    for (stack, point) in &found.stacks {
        let mine: Vec<u32> = runs
            .iter()
            .filter(|r| {
                (r.interface.as_str(), r.submit.as_str(), r.complete.as_str()) == (&stack.interface, &stack.submit, &stack.complete)
            })
            .map(|r| r.qd)
            .collect();
        match point {
            Ok(p) if stack.interface == "io_uring" => {
                assert!(!mine.is_empty() && mine.iter().all(|q| *q == p.qd()), "{stack}: runs at {mine:?}, its point {p:?}");
                measured += 1;
            }
            _ => assert!(mine.is_empty(), "{stack} has no point ({point:?}) yet ran at {mine:?}"),
        }
    }
    assert!(measured > 0, "no io_uring stack saturated or ran in S2.2: {found:?}");

    let out = d.join("report");
    let report = Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["report", "-q", "--suite", "S2", "--db", db.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Each stack ran at its own saturation point"), "the report does not say where each stack ran");
    assert!(!html.contains("stands for its saturation point"), "the QD128 note stayed");
    drop(lo);
}

/// `iolab sweep --numa` reads the plan file once: a bad plan's error names the line of the
/// user's file (with --numa it named a line of iolab's rewritten text, where `ios` had moved to
/// line 1), and the sweep stores the plan with the option in it, under that text's hash, as
/// before.
#[test]
fn a_plan_given_numa_is_read_once_and_stored_as_before() {
    let dir = work_dir();
    let d = dir.path();
    let bad = d.join("bad.toml");
    std::fs::write(&bad, "name = \"x\"\nreplicates = 1\nios = \"5\"\n").unwrap();
    let bad = bad.to_str().unwrap();
    for numa in [&[][..], &["--numa", "local"]] {
        let mut args = vec!["sweep", "--dry-run", bad];
        args.extend(numa);
        let line = crate::common::iolab(&args).assert_usage_error();
        assert!(line.starts_with("iolab: plan line 3, ios: invalid type"), "{numa:?}: {line}");
    }

    let p = d.join("null.toml");
    std::fs::write(&p, "name = \"numa-null\"\nios = 100\nsize = \"1m\"\n[matrix]\ninterface = [\"null\"]\n").unwrap();
    let db = d.join("n.db");
    let out = iolab()
        .args(["sweep", "-q", "--numa", "off", "--db", db.to_str().unwrap(), p.to_str().unwrap()])
        .env("IOLAB_JOURNAL", d.join("journal.json"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sweeps = Store::open_existing(&db).unwrap().sweep_infos().unwrap();
    let stored = "ios = 100\nname = \"numa-null\"\nsize = \"1m\"\n\n[matrix]\ninterface = [\"null\"]\n\n[options]\nnuma = \"off\"\n";
    assert_eq!((sweeps.len(), sweeps[0].plan_text.as_str()), (1, stored));
    assert_eq!(sweeps[0].plan_hash, iolab::plan::sweep::plan_hash(stored, &[]));
}
