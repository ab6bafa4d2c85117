//! Helpers shared by the integration tests: running the binary, reading its JSON record,
//! preparing target files.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_iolab");

/// One finished `iolab` invocation.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub args: Vec<String>,
}

impl Run {
    pub fn from(out: Output, args: Vec<String>) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            args,
        }
    }

    /// Everything about the run, for assertion messages.
    pub fn describe(&self) -> String {
        format!("iolab {}\nexit {}\n--- stdout\n{}--- stderr\n{}", self.args.join(" "), self.code, self.stdout, self.stderr)
    }

    pub fn assert_ok(&self) -> &Run {
        assert_eq!(self.code, 0, "expected success:\n{}", self.describe());
        self
    }

    /// Exit code 2 and exactly one line on stderr (returned), nothing on stdout.
    pub fn assert_usage_error(&self) -> String {
        assert_eq!(self.code, 2, "expected exit code 2:\n{}", self.describe());
        self.one_line_stderr()
    }

    /// stderr is exactly one non-empty line, starting with "iolab: ".
    pub fn one_line_stderr(&self) -> String {
        let lines: Vec<&str> = self.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "expected exactly one line on stderr:\n{}", self.describe());
        assert!(self.stderr.ends_with('\n'), "stderr line not terminated:\n{}", self.describe());
        assert!(lines[0].starts_with("iolab: ") && lines[0].len() > 10, "odd error line:\n{}", self.describe());
        lines[0].to_string()
    }
}

/// `iolab ARGS...` with TMPDIR pointing at `tmpdir` (so stray temporary files can be found).
pub fn iolab_in<S: AsRef<str>>(tmpdir: &Path, args: &[S]) -> Run {
    let args: Vec<String> = args.iter().map(|a| a.as_ref().to_string()).collect();
    let out = Command::new(BIN).args(&args).env("TMPDIR", tmpdir).output().expect("cannot run the iolab binary");
    Run::from(out, args)
}

/// `iolab ARGS...`.
pub fn iolab<S: AsRef<str>>(args: &[S]) -> Run {
    let args: Vec<String> = args.iter().map(|a| a.as_ref().to_string()).collect();
    let out = Command::new(BIN).args(&args).output().expect("cannot run the iolab binary");
    Run::from(out, args)
}

/// The JSON record a run wrote.
pub fn record(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("no JSON record at {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON in {}: {e}", path.display()))
}

pub fn u(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr).and_then(Value::as_u64).unwrap_or_else(|| panic!("no integer at {ptr} in {v:#}"))
}

/// A record that ran cleanly: status ok, no error, no failed I/O.
pub fn assert_clean(rec: &Value, what: &str) {
    assert_eq!(rec["status"], "ok", "{what}: status not ok: {rec:#}");
    assert!(rec["error"].is_null(), "{what}: error recorded: {}", rec["error"]);
    for dir in ["read", "write", "total"] {
        assert_eq!(u(rec, &format!("/results/{dir}/errors")), 0, "{what}: {dir} errors");
    }
}

/// A file of `size` bytes that holds iolab verify data everywhere, so verified reads of any
/// block succeed (the same format `--verify` writes and the default target is filled with).
pub fn verify_file(dir: &Path, name: &str, size: u64) -> PathBuf {
    let p = dir.join(name);
    let mut buf = vec![0u8; size as usize];
    iolab::verify::fill(&mut buf, 0, 0x7e57);
    std::fs::write(&p, &buf).unwrap();
    p
}

/// A file of `size` zero bytes.
pub fn zero_file(dir: &Path, name: &str, size: u64) -> PathBuf {
    let p = dir.join(name);
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(size).unwrap();
    p
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("iolab-test-").tempdir().unwrap()
}

/// Entries of a directory, sorted.
pub fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// (major, minor) of the running kernel.
pub fn kernel_version() -> (u32, u32) {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut it = r.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse().ok());
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// Install Debian packages a test needs (root; waits up to 5 min for another apt), updating the
/// package lists once if the first try fails. The error says why, for the test's skip line.
pub fn apt_install(packages: &[&str]) -> Result<(), String> {
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=300"])
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let get = [&["install", "-y", "-qq"][..], packages].concat();
    if apt(&get) || (apt(&["update", "-qq"]) && apt(&get)) {
        Ok(())
    } else {
        Err(format!("`apt-get install {}` failed (no apt, or no package registry reachable)", packages.join(" ")))
    }
}

/// Print why a test (or part of one) does nothing here. Written to stderr directly, past the
/// test harness's output capture, so skips show in every `cargo test` log.
pub fn skip(test: &str, why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// Held by tests that sample with `--profile layers` (they read /proc/kallsyms) or change the
/// sysctls profiling depends on (`kernel.kptr_restrict`, `kernel.perf_event_paranoid`), so a
/// run never sees another test's sysctl, nor lowers it itself.
static PROFILING_SYSCTLS: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn profiling_sysctls() -> std::sync::MutexGuard<'static, ()> {
    PROFILING_SYSCTLS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Held by tests that make loop devices and look at every block device (partition tables,
/// holders, mounts), so one test's devices never show up in another's scan.
pub static LOOPS: std::sync::Mutex<()> = std::sync::Mutex::new(());
