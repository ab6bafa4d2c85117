//! Live runs: the meters find cost where it really lands.
use std::process::Command;

fn run_json(args: &[&str]) -> (std::process::Output, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_iolab"));
    cmd.arg("run").args(args).args(["-q", "--json"]).arg(&json);
    let out = cmd.output().unwrap();
    let v = std::fs::read(&json).map(|b| serde_json::from_slice(&b).unwrap()).unwrap_or(serde_json::Value::Null);
    (out, v)
}

fn class<'a>(rec: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    rec["cost"]["classes"].as_array().unwrap().iter().find(|c| c["class"] == name).unwrap()
}

fn secs(c: &serde_json::Value) -> f64 {
    c["cpu_s"].as_f64().unwrap()
}

/// A filled file on the machine's real disk (not tmpfs, which has no O_DIRECT).
fn data_file(dir: &std::path::Path, mib: usize) -> String {
    let p = dir.join("data.img");
    let chunk = vec![0x5au8; 1 << 20];
    let mut f = std::fs::File::create(&p).unwrap();
    for _ in 0..mib {
        std::io::Write::write_all(&mut f, &chunk).unwrap();
    }
    f.sync_all().unwrap();
    p.to_str().unwrap().to_string()
}

fn work_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("iolab-test-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

#[test]
fn sqpoll_kernel_thread_time_is_found() {
    let dir = work_dir();
    let f = data_file(dir.path(), 32);
    let (out, rec) = run_json(&["-i", "io_uring", "--submit", "sqpoll", "--sq-idle", "2000", "--qd", "8", "--runtime", "2s", &f]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let sqp = class(&rec, "sqpoll");
    assert_eq!(sqp["threads"], 1);
    // The SQ thread spins for the whole window: far more than the workload thread.
    assert!(secs(sqp) > 0.5, "sqpoll thread time {}", secs(sqp));
    assert!(secs(sqp) > secs(class(&rec, "workload")));
    assert!(sqp["ns_per_io"].as_f64().unwrap() > 0.0);
}

#[test]
fn io_wq_time_is_found() {
    // O_DIRECT writes into holes of a sparse ext4 file need block allocation, which io_uring
    // punts to its io-wq workers.
    let dir = work_dir();
    let p = dir.path().join("sparse.img");
    std::fs::File::create(&p).unwrap().set_len(256 << 20).unwrap();
    let (out, rec) = run_json(&["-i", "io_uring", "--rw", "randwrite", "--qd", "8", "--runtime", "2s", p.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let wq = class(&rec, "io_wq");
    assert!(wq["threads"].as_u64().unwrap() >= 1, "no io-wq worker seen: {rec}");
    assert!(secs(wq) > 0.0);
}

#[test]
fn glibc_aio_helpers_are_found() {
    let dir = work_dir();
    let f = data_file(dir.path(), 32);
    let (out, rec) = run_json(&["-i", "posixaio", "--qd", "4", "--runtime", "2s", &f]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let aio = class(&rec, "aio_helpers");
    assert!(aio["threads"].as_u64().unwrap() >= 1);
    // The helpers issue the I/O, so the kernel time lands on them, not on the workload thread.
    assert!(secs(aio) > secs(class(&rec, "workload")), "{rec}");
}

#[test]
fn polled_request_that_fell_back_is_reported_and_strict_fails() {
    let dir = work_dir();
    let f = data_file(dir.path(), 16);
    let (out, rec) = run_json(&["-i", "pvsync2", "--complete", "poll", "--runtime", "1s", &f]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let path = &rec["completion_path"];
    let dev = &rec["cost"]["devices"][0];
    if dev["queue_interrupts"].is_null() {
        eprintln!("skipped: the device behind {f} has no interrupt lines to count");
        return;
    }
    assert_eq!(path["observed"], "interrupt", "{path}");
    assert_eq!(path["fell_back"], true);
    assert!(String::from_utf8_lossy(&out.stdout).contains("WARNING: asked for poll completion but completions came by interrupt"));
    let (strict, rec) = run_json(&["-i", "pvsync2", "--complete", "poll", "--runtime", "1s", "--strict", &f]);
    assert_eq!(strict.status.code(), Some(1), "{}", String::from_utf8_lossy(&strict.stderr));
    assert_eq!(rec["status"], "failed");
    assert!(String::from_utf8_lossy(&strict.stderr).contains("--strict"));
}

/// A loop device attached over `file` (detach it after), or None (said why) without root or losetup.
fn loop_over(file: &str) -> Option<String> {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root for losetup");
        return None;
    }
    let out = Command::new("losetup").args(["-f", "--show", file]).output().unwrap();
    if !out.status.success() {
        eprintln!("skipped: losetup failed");
        return None;
    }
    Some(String::from_utf8(out.stdout).unwrap().trim().to_string())
}

#[test]
fn device_counters_match_iolab_on_a_loop_device() {
    let dir = work_dir();
    let Some(dev) = loop_over(&data_file(dir.path(), 16)) else { return };
    let (run, rec) = run_json(&["-i", "libaio", "--qd", "4", "--ios", "3000", &dev]);
    let _ = Command::new("losetup").args(["-d", &dev]).status();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let d = &rec["cost"]["devices"][0];
    assert_eq!(d["iolab_ios"], 3000);
    // Nothing else touches a fresh loop device: its counters see exactly iolab's reads
    // (give or take the in-flight requests at the window edges).
    let diff = d["difference"].as_i64().unwrap();
    assert!(diff.abs() <= 8, "device vs iolab: {d}");
    assert_eq!(d["stat"]["write_ios"], 0);
    assert!(d["irq_device"].is_string(), "interrupts are counted on the device behind the loop file");
}

#[test]
fn hardware_counters_are_null_with_a_reason_where_there_is_no_pmu() {
    let dir = work_dir();
    let f = data_file(dir.path(), 16);
    let (_, rec) = run_json(&["-i", "psync", "--ios", "2000", &f]);
    let c = &rec["cost"]["counters"];
    let has_pmu = std::path::Path::new("/sys/bus/event_source/devices/cpu").exists();
    if has_pmu {
        assert!(c["workload"]["instructions"].as_u64().unwrap() > 0);
    } else {
        assert!(c["hardware_unavailable"].as_str().unwrap().contains("no hardware performance counters"));
        assert!(c["workload"]["instructions"].is_null());
        assert!(c["workload_per_io"]["ipc"].is_null());
    }
    // Software events are there either way.
    assert!(c["workload"]["task_clock_ns"].as_u64().unwrap() > 0);
    assert!(c["workload"]["context_switches"].as_u64().unwrap() > 0);
}

/// A loop device over a file raises no interrupts of its own (the lines counted are its backing
/// file's disk's, which the page cache may keep idle): the path is unknown, not polled, and
/// --strict cannot call a pvsync2 poll run polled.
#[test]
fn loop_device_completion_path_is_unknown() {
    let dir = work_dir();
    let Some(dev) = loop_over(&data_file(dir.path(), 16)) else { return };
    let irq = run_json(&["-i", "psync", "--ios", "500", &dev]);
    let poll = run_json(&["-i", "pvsync2", "--complete", "poll", "--ios", "500", &dev]);
    let strict = run_json(&["-i", "pvsync2", "--complete", "poll", "--strict", "--ios", "500", &dev]);
    let _ = Command::new("losetup").args(["-d", &dev]).status();
    for (out, rec) in [&irq, &poll] {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let p = &rec["completion_path"];
        assert_eq!(p["observed"], "unknown", "{p}");
        assert_eq!(p["fell_back"], false, "{p}");
    }
    let (out, rec) = &strict;
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(rec["status"], "failed");
    assert!(rec["error"].as_str().unwrap().contains("--strict"), "{}", rec["error"]);
}

/// Two targets on one disk share its interrupt lines: counted once, per I/O over both targets.
#[test]
fn interrupts_of_two_targets_on_one_disk_are_counted_once() {
    let dir = work_dir();
    let a = data_file(dir.path(), 8);
    let b = dir.path().join("b.img");
    std::fs::copy(&a, &b).unwrap();
    let (out, rec) = run_json(&["-i", "psync", "--ios", "2000", &a, b.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let d = rec["cost"]["devices"].as_array().unwrap();
    if d[0]["queue_interrupts"].is_null() {
        eprintln!("skipped: the disk behind {a} has no interrupt lines to count");
        return;
    }
    let q = d[0]["queue_interrupts"].as_u64().unwrap();
    let ios = d[0]["iolab_ios"].as_u64().unwrap() + d[1]["iolab_ios"].as_u64().unwrap();
    assert_eq!(d[1]["queue_interrupts"].as_u64(), Some(q), "the same lines");
    for x in d {
        assert!((x["queue_interrupts_per_io"].as_f64().unwrap() - q as f64 / ios as f64).abs() < 1e-9, "{x}");
    }
    assert_eq!(d[0]["irq_shared_with"][0].as_str(), b.to_str());
    let ev = rec["completion_path"]["evidence"].as_str().unwrap();
    assert!(ev.starts_with(&format!("{q} ")), "interrupts counted twice? {ev}");
}
