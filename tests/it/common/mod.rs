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

/// The lock every package install of the tests takes (these tests and tests/vm/rig.sh): one
/// install at a time, and a test that waited finds the packages another one installed.
pub const APT_LOCK: &str = "/var/lock/iolab-tests-apt.lock";

/// Whether every one of `packages` is installed (dpkg says "install ok installed").
fn installed(packages: &[&str]) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}\n"])
        .args(packages)
        .output()
        .is_ok_and(|o| o.status.success() && String::from_utf8_lossy(&o.stdout).lines().all(|l| l == "install ok installed"))
}

/// Install Debian packages a test needs (root), once: under [`APT_LOCK`], held across the whole
/// install (and apt's own lock waited for up to 10 min), so tests that need the same packages at
/// the same moment install them once instead of colliding on dpkg's lock; the package lists are
/// updated if the first try fails. The error says why, for the test's skip line.
pub fn apt_install(packages: &[&str]) -> Result<(), String> {
    use std::os::unix::io::AsRawFd;
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(APT_LOCK)
        .map_err(|e| format!("cannot open the install lock {APT_LOCK}: {e}"))?;
    // SAFETY: flock on a descriptor we own; released when `lock` is closed.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(format!("cannot take the install lock {APT_LOCK}: {}", std::io::Error::last_os_error()));
    }
    if installed(packages) {
        return Ok(());
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=600"])
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
            .map_err(|e| format!("cannot run apt-get: {e}"))
            .and_then(|o| if o.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&o.stderr).trim().to_string()) })
    };
    let get = [&["install", "-y", "-qq"][..], packages].concat();
    apt(&get).or_else(|_| apt(&["update", "-qq"]).and_then(|_| apt(&get))).map_err(|why| {
        format!(
            "`apt-get install {}` failed: {}",
            packages.join(" "),
            why.lines().last().unwrap_or("no apt, or no package registry reachable")
        )
    })
}

/// Whether this is a CI run (`CI=true`, as `.ci/run` sets): there, a check that could not run
/// because something it needs could not be installed is a failure, not a skip.
pub fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// A check that could not run because a tool it needs is missing and could not be installed:
/// a skip with the reason on a developer's machine, a failure under CI (see [`ci`]). Skips for
/// what the hardware lacks (no NVMe, no PMU) use [`skip`], a skip everywhere.
pub fn skip_or_fail(test: &str, why: &str) {
    assert!(!ci(), "{test} could not run under CI=true: {why}");
    skip(test, why);
}

/// An assertion on a child process: it succeeded, or the failure shows its exit and stderr.
#[allow(dead_code)]
pub fn said(out: &Output) -> String {
    format!("exit {:?}; stderr:\n{}", out.status.code(), String::from_utf8_lossy(&out.stderr))
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
