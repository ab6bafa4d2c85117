//! Failed I/O is an error, never a completion: a loop device whose backing file was truncated
//! under it fails reads past the new end with EIO.
use std::process::Command;

fn root_with_losetup() -> bool {
    let root = unsafe { libc::geteuid() } == 0;
    let losetup = Command::new("losetup").arg("--version").output().is_ok_and(|o| o.status.success());
    if !(root && losetup) {
        eprintln!("skipped: needs root and losetup");
    }
    root && losetup
}

struct Loop(String);
impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.0]).status();
    }
}

/// A 16 MiB loop device whose backing file now holds only 4 MiB: 3/4 of random reads fail.
fn failing_loop(dir: &std::path::Path) -> Loop {
    let img = dir.join("backing.img");
    std::fs::File::create(&img).unwrap().set_len(16 << 20).unwrap();
    let out = Command::new("losetup").args(["-f", "--show"]).arg(&img).output().unwrap();
    assert!(out.status.success(), "losetup failed: {}", String::from_utf8_lossy(&out.stderr));
    let dev = Loop(String::from_utf8(out.stdout).unwrap().trim().to_string());
    std::fs::OpenOptions::new().write(true).open(&img).unwrap().set_len(4 << 20).unwrap();
    dev
}

fn iolab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_iolab")).args(args).output().unwrap()
}

#[test]
fn failed_io_stops_the_run_by_default() {
    if !root_with_losetup() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dev = failing_loop(dir.path());
    let json = dir.path().join("r.json");
    let out = iolab(&["run", "-i", "libaio", "--qd", "4", "--ios", "5000", "-q", &dev.0, "--json", json.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "a failed I/O must fail the run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Input/output error") && stderr.contains("--continue-on-error"), "{stderr}");
    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(rec["status"], "failed");
    let read = &rec["results"]["read"];
    assert!(read["errors"].as_u64().unwrap() >= 1);
    assert!(read["ios"].as_u64().unwrap() < 5000, "the run went on after the error");
}

#[test]
fn continue_on_error_counts_errors_apart_from_completions() {
    if !root_with_losetup() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dev = failing_loop(dir.path());
    let json = dir.path().join("r.json");
    let out = iolab(&[
        "run",
        "-i",
        "io_uring",
        "--qd",
        "8",
        "--ios",
        "2000",
        "--continue-on-error",
        "-q",
        &dev.0,
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let read = &rec["results"]["read"];
    let (ios, errors) = (read["ios"].as_u64().unwrap(), read["errors"].as_u64().unwrap());
    assert_eq!(ios, 2000, "exactly the budget of successful I/Os");
    // Reads are uniform over 16 MiB and only the first 4 MiB exist: about 3 errors per success.
    assert!(errors > ios, "errors {errors} vs completions {ios}");
    let lat_count_ok = rec["results"]["series"].as_array().unwrap().iter().map(|s| s["read_iops"].as_u64().unwrap()).sum::<u64>() == ios;
    assert!(lat_count_ok, "per-second series must count completions only");
}
