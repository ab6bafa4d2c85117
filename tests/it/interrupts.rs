//! Ctrl-C and crashes at awkward moments: while the temporary target is filled, during the idle
//! baseline, and an abort with system settings changed (a fake sysfs, so no root is needed).

use crate::common::*;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn signal(child: &std::process::Child, sig: libc::c_int) {
    // SAFETY: plain kill(2) of our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
}

/// Wait for `child` to end, at most `limit`; its exit code or the signal that ended it.
fn wait(child: &mut std::process::Child, limit: Duration) -> (Option<i32>, Option<i32>, Duration, String) {
    use std::os::unix::process::ExitStatusExt;
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            return (s.code(), s.signal(), t.elapsed(), err);
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("iolab did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn ctrl_c_while_the_default_target_is_filled_leaves_no_file() {
    let dir = tempdir();
    // 4 GiB takes long enough to fill that the signal lands during the fill.
    let mut child = Command::new(BIN)
        .args(["run", "--size", "4g", "--ios", "10"])
        .env("TMPDIR", dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_dir(dir.path()).unwrap().flatten().any(|d| d.path().join("target.dat").exists()) {
        assert!(Instant::now() < deadline, "no temporary target appeared");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    signal(&child, libc::SIGINT);
    let (code, _, _, err) = wait(&mut child, Duration::from_secs(30));
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("interrupted while filling"), "{err}");
    assert_eq!(entries(dir.path()), Vec::<String>::new(), "the temporary target was left behind");
}

#[test]
fn ctrl_c_during_the_idle_baseline_ends_it_and_issues_no_io() {
    let dir = tempdir();
    let target = verify_file(dir.path(), "t.dat", 8 << 20);
    let json = dir.path().join("out.json");
    let mut child = Command::new(BIN)
        .args(["run", "--idle-baseline", "60s", "--runtime", "60s", "--json"])
        .arg(&json)
        .arg(&target)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, libc::SIGINT);
    let (code, _, took, err) = wait(&mut child, Duration::from_secs(30));
    assert_eq!(code, Some(130), "{err}");
    assert!(took < Duration::from_secs(5), "the baseline ran on after Ctrl-C ({took:?})");
    assert!(err.contains("before the first I/O"), "{err}");
    assert!(!json.exists(), "a record of a run that never started was written");
}

#[test]
fn an_abort_with_settings_changed_restores_them() {
    // The governor of a fake sysfs: changed for the run, then the process is aborted (as an
    // allocation failure would). The handler cannot restore safely itself, so it starts
    // `iolab restore --after PID`, which restores once the aborted process has ended.
    let dir = tempdir();
    let target = verify_file(dir.path(), "t.dat", 8 << 20);
    let gov = dir.path().join("sys/devices/system/cpu/cpu0/cpufreq");
    std::fs::create_dir_all(&gov).unwrap();
    std::fs::write(gov.join("scaling_governor"), "schedutil\n").unwrap();
    std::fs::write(gov.join("scaling_available_governors"), "performance schedutil\n").unwrap();
    let env = [("IOLAB_SYSFS", dir.path().join("sys")), ("IOLAB_JOURNAL", dir.path().join("journal.json"))];
    let probe = iolab(&["run", "-q", "--ios", "10", "--json", "-", target.to_str().unwrap()]);
    if !probe.stdout.contains("\"device\": \"") {
        skip("an_abort_with_settings_changed_restores_them", "the target file has no block device behind it, so no setting applies");
        return;
    }
    let mut child = Command::new(BIN)
        .args(["run", "--set", "governor=performance", "--runtime", "30s"])
        .arg(&target)
        .envs(env.clone())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(gov.join("scaling_governor")).unwrap().trim() != "performance" {
        assert!(Instant::now() < deadline, "the governor was never changed");
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(&child, libc::SIGABRT);
    let (_, sig, _, err) = wait(&mut child, Duration::from_secs(20));
    assert_eq!(sig, Some(libc::SIGABRT), "{err}");
    assert!(err.contains("aborted with system settings changed: restoring them") && err.contains("iolab restore"), "{err}");
    assert!(err.contains("restored after the abort: cpu0 governor: performance -> schedutil"), "{err}");
    assert_eq!(std::fs::read_to_string(gov.join("scaling_governor")).unwrap().trim(), "schedutil");
    // Nothing is left for `iolab restore`.
    let restore = Command::new(BIN).arg("restore").envs(env).output().unwrap();
    assert!(restore.status.success(), "{}", String::from_utf8_lossy(&restore.stderr));
    assert!(String::from_utf8_lossy(&restore.stdout).contains("nothing to restore"), "{}", String::from_utf8_lossy(&restore.stdout));
}

#[test]
fn process_cpu_of_a_tiny_run_is_divided_by_the_window_it_was_measured_over() {
    // A few I/Os take microseconds, but CPU is sampled at the cost window's edges: dividing it by
    // the results window gave tens of thousands of "cores".
    let dir = tempdir();
    let target = verify_file(dir.path(), "t.dat", 8 << 20);
    let json = dir.path().join("r.json");
    iolab(&["run", "-q", "--runtime", "1ms", "--threads", "4", "--json", json.to_str().unwrap(), target.to_str().unwrap()]).assert_ok();
    let cores = record(&json)["results"]["cpu"]["cores"].as_f64().unwrap();
    let ncpu = std::thread::available_parallelism().unwrap().get() as f64;
    assert!(cores <= ncpu, "{cores} cores on a {ncpu}-CPU machine");
}
