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
    std::fs::write(&p, format!(r#"
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
"#)).unwrap();
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
    assert!(out.status.success());
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
    assert!(kept >= 2 && kept < 30);
    let resumed = iolab().args(["sweep", "-q", "--resume", "--db"]).arg(&db).arg(&p).output().unwrap();
    assert!(resumed.status.success());
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
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn scheduler_dimension_is_applied_and_restored_on_a_loop_device() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root for losetup");
        return;
    }
    let dir = work_dir();
    let f = data_file(dir.path());
    let out = Command::new("losetup").args(["-f", "--show", &f]).output().unwrap();
    if !out.status.success() {
        eprintln!("skipped: losetup failed");
        return;
    }
    let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let name = dev.trim_start_matches("/dev/").to_string();
    let sched_file = format!("/sys/block/{name}/queue/scheduler");
    let original = std::fs::read_to_string(&sched_file).unwrap();
    let available: Vec<String> = original.split_whitespace().map(|s| s.trim_matches(|c| c == '[' || c == ']').to_string()).collect();
    let p = dir.path().join("plan.toml");
    let list = available.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ");
    std::fs::write(&p, format!("ios = 300\ntargets = [\"{dev}\"]\n[matrix]\nscheduler = [{list}]\n")).unwrap();
    let db = dir.path().join("r.db");
    let run = iolab().args(["sweep", "-q", "--db"]).arg(&db).arg(&p).output().unwrap();
    let after = std::fs::read_to_string(&sched_file).unwrap();
    let _ = Command::new("losetup").args(["-d", &dev]).status();
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
