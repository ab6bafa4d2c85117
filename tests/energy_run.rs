//! Energy in a real `iolab run`: a fake `ipmitool` replaying a recorded BMC reading (215 W)
//! stands in for a server's BMC; the run's record carries joules, IOPS per joule and, with
//! --idle-baseline, the dynamic part. Without any source the record says unavailable.
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

fn fixture(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/energy").join(rel)
}

fn run(dir: &std::path::Path, extra: &[&str], env: &[(&str, String)]) -> (std::process::Output, serde_json::Value) {
    let json = dir.join("r.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_iolab"));
    cmd.args(["run", "--size", "16m", "--runtime", "2s", "-q", "--json"]).arg(&json).args(extra).env("TMPDIR", dir);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let v = std::fs::read(&json).map(|b| serde_json::from_slice(&b).unwrap()).unwrap_or(serde_json::Value::Null);
    (out, v)
}

#[test]
fn bmc_power_through_a_fake_ipmitool() {
    let dir = tempfile::Builder::new().prefix("iolab-energy-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let prog = dir.path().join("ipmitool");
    std::fs::write(&prog, format!("#!/bin/sh\ncat '{}'\n", fixture("ipmitool/dcmi_power_reading.1.8.19.C-locale.txt").display())).unwrap();
    std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
    let env = [("IOLAB_IPMITOOL", prog.display().to_string())];
    let (out, rec) = run(dir.path(), &["--energy", "ipmi", "--idle-baseline", "1s", "--require-energy"], &env);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let e = &rec["energy"];
    assert_eq!(e["status"], "measured", "{e}");
    let s = &e["sources"][0];
    assert_eq!((s["source"].as_str(), s["scope"].as_str()), (Some("ipmi"), Some("bmc_system")));
    assert!((s["mean_watts"].as_f64().unwrap() - 215.0).abs() < 1e-9);
    let joules = s["joules"].as_f64().unwrap();
    let covered = s["window_s"].as_f64().unwrap() * s["coverage"].as_f64().unwrap();
    assert!((joules - 215.0 * covered).abs() < 1e-6, "joules {joules} for {covered} s at 215 W");
    let ios = rec["results"]["total"]["ios"].as_f64().unwrap();
    let ipj = s["iops_per_joule"].as_f64().unwrap();
    assert!((ipj - ios / (215.0 * s["window_s"].as_f64().unwrap())).abs() / ipj < 1e-9);
    // The fake BMC reads the same at idle, so the dynamic part is zero: no per-joule ratio from it.
    assert!((e["idle_baseline"][0]["idle_watts"].as_f64().unwrap() - 215.0).abs() < 1e-9);
    assert!(e["dynamic"][0]["dynamic_joules"].as_f64().unwrap().abs() < 1e-6);
    assert!(e["dynamic"][0]["ios_per_dynamic_joule"].is_null());
    assert!(String::from_utf8_lossy(&out.stdout).contains("energy ipmi bmc_system: "));
}

#[test]
fn no_source_no_number() {
    let dir = tempfile::Builder::new().prefix("iolab-energy-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let env = [("IOLAB_IPMITOOL", "/nonexistent/ipmitool".to_string()), ("PATH", "/usr/bin:/bin".to_string())];
    if std::path::Path::new("/sys/class/powercap").exists() || std::path::Path::new("/sys/bus/event_source/devices/power").exists() {
        eprintln!("skipped: this machine has RAPL");
        return;
    }
    let (out, rec) = run(dir.path(), &["--energy", "rapl", "--energy", "perf", "--energy", "ipmi"], &env);
    assert!(out.status.success());
    let e = &rec["energy"];
    assert_eq!(e["status"], "unavailable");
    assert!(e["sources"].as_array().unwrap().is_empty());
    assert!(e["reasons"].as_array().unwrap().len() >= 3);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.matches("energy unavailable").count(), 1, "said once: {text}");
    let (refused, _) = run(dir.path(), &["--energy", "rapl", "--require-energy"], &env);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--require-energy") && err.lines().count() == 1, "{err}");
}
