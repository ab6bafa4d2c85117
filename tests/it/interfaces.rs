//! Every interface and mode this machine supports, on temporary files, with `--verify`:
//! random write, read and mixed runs, sequential runs, several threads, deep queues with
//! batches, the page cache, count budgets, the default target, and corruption detection.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

const SIZE: &str = "8m";
const SIZE_BYTES: u64 = 8 << 20;
const IOS: u64 = 256;

/// One way of running an interface: its name and the flags that select the mode.
struct Mode {
    interface: &'static str,
    submit: &'static str,
    complete: &'static str,
}

impl Mode {
    fn label(&self) -> String {
        format!("{} --submit {} --complete {}", self.interface, self.submit, self.complete)
    }
    fn is_polled_uring(&self) -> bool {
        self.interface == "io_uring" && self.complete != "irq"
    }
    fn is_async(&self) -> bool {
        !matches!(self.interface, "psync" | "pvsync2")
    }
    /// Flags for this mode. Polled io_uring modes need --allow-fallback on queues without poll
    /// queues (virtio, loop); where the queue can poll the flag changes nothing.
    fn args(&self) -> Vec<String> {
        let mut v =
            vec!["-i".to_string(), self.interface.into(), "--submit".into(), self.submit.into(), "--complete".into(), self.complete.into()];
        if self.interface == "io_uring" && self.complete != "irq" {
            v.push("--allow-fallback".into());
        }
        v
    }
}

const fn m(interface: &'static str, submit: &'static str, complete: &'static str) -> Mode {
    Mode { interface, submit, complete }
}

const MODES: &[Mode] = &[
    m("psync", "syscall", "irq"),
    m("pvsync2", "syscall", "irq"),
    m("pvsync2", "syscall", "poll"),
    m("posixaio", "syscall", "irq"),
    m("posixaio", "syscall", "poll"),
    m("libaio", "syscall", "irq"),
    m("io_uring", "syscall", "irq"),
    m("io_uring", "syscall", "poll"),
    m("io_uring", "syscall", "hybrid"),
    m("io_uring", "sqpoll", "irq"),
    m("io_uring", "sqpoll", "poll"),
    m("io_uring", "sqpoll", "hybrid"),
];

/// The modes of `interface` this machine can run; prints why the others are left out.
fn modes_here(interface: &str) -> Vec<&'static Mode> {
    if let Err(e) = iolab::interfaces::machine_support(interface) {
        skip(interface, &format!("{interface} is not available here: {e}"));
        return vec![];
    }
    MODES
        .iter()
        .filter(|md| md.interface == interface)
        .filter(|md| {
            if md.complete == "hybrid" && kernel_version() < (6, 13) {
                skip(&md.label(), "io_uring hybrid polling needs Linux 6.13 or later");
                return false;
            }
            true
        })
        .collect()
}

/// `iolab run ARGS --json J -q` in `dir`; returns the run and its record (when it wrote one).
fn run_json(dir: &Path, args: &[String]) -> (Run, Option<Value>) {
    let json = dir.join("out.json");
    let _ = std::fs::remove_file(&json);
    let mut a = vec!["run".to_string(), "-q".into()];
    a.extend_from_slice(args);
    a.extend(["--json".to_string(), json.display().to_string()]);
    let r = iolab_in(dir, &a);
    let rec = json.exists().then(|| record(&json));
    (r, rec)
}

/// A run that must succeed cleanly; returns its record.
fn ok_run(dir: &Path, args: &[String]) -> Value {
    let (r, rec) = run_json(dir, args);
    r.assert_ok();
    let rec = rec.unwrap_or_else(|| panic!("no JSON record:\n{}", r.describe()));
    assert_clean(&rec, &r.describe());
    rec
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn check_spec(rec: &Value, md: &Mode) {
    assert_eq!(rec["spec"]["interface"], md.interface);
    assert_eq!(rec["spec"]["submit"], md.submit);
    assert_eq!(rec["spec"]["complete"], md.complete);
    assert_eq!(rec["completion_path"]["requested"], md.complete);
}

/// A run of `md` that must succeed, except that a polled mode may fail with EOPNOTSUPP on a
/// queue that cannot poll (Linux 6.x rejects polled reads there instead of falling back): then
/// the failure must be the explained one-liner, and None is returned.
fn mode_run(dir: &Path, md: &Mode, args: &[String]) -> Option<Value> {
    let (r, rec) = run_json(dir, args);
    if r.code != 0 && md.is_polled_uring() {
        let rec = rec.as_ref().unwrap_or_else(|| panic!("no JSON record:\n{}", r.describe()));
        if rec["environment"]["targets"][0]["io_poll"] == false {
            assert_eq!(r.code, 1, "{}", r.describe());
            let line = r.one_line_stderr();
            assert!(line.contains("Operation not supported") && line.contains("poll queues"), "unexplained failure:\n{}", r.describe());
            assert_eq!(rec["status"], "failed");
            assert!(u(rec, "/results/total/errors") >= 1, "{}", r.describe());
            // Expected here; not a skip worth a line in every log.
            eprintln!(
                "{} {}: this queue cannot poll and the kernel fails polled I/O with EOPNOTSUPP (checked that iolab says so)",
                md.label(),
                args.join(" ")
            );
            return None;
        }
    }
    r.assert_ok();
    let rec = rec.unwrap_or_else(|| panic!("no JSON record:\n{}", r.describe()));
    assert_clean(&rec, &r.describe());
    check_spec(&rec, md);
    Some(rec)
}

/// randwrite, randread and randrw with --verify on one file through one mode, with exact
/// counts; then every block of the file is read back and checked with psync.
fn random_verify_cycle(md: &Mode, extra: &[&str], ios: u64) {
    let dir = tempdir();
    let target = verify_file(dir.path(), "target.dat", SIZE_BYTES);
    let t = target.display().to_string();
    let base = |rw: &str| {
        let mut a = md.args();
        a.extend(strs(&["--rw", rw, "--verify", "--ios", &ios.to_string(), "--size", SIZE]));
        a.extend(strs(extra));
        a.push(t.clone());
        a
    };
    let what = |rw: &str| format!("{} {} {rw}", md.label(), extra.join(" "));

    if let Some(w) = mode_run(dir.path(), md, &base("randwrite")) {
        assert_eq!(u(&w, "/results/write/ios"), ios, "{}", what("randwrite"));
        assert_eq!(u(&w, "/results/read/ios"), 0, "{}", what("randwrite"));
        assert_eq!(u(&w, "/results/write/bytes"), ios * 4096, "{}", what("randwrite"));
        assert_eq!(u(&w, "/results/verify/reads_checked"), 0, "{}", what("randwrite"));
        let back = u(&w, "/results/verify/written_blocks_read_back");
        assert!(back > 0 && back <= ios, "{}: {back} written blocks read back of {ios} writes", what("randwrite"));
    }

    if let Some(r) = mode_run(dir.path(), md, &base("randread")) {
        assert_eq!(u(&r, "/results/read/ios"), ios, "{}", what("randread"));
        assert_eq!(u(&r, "/results/write/ios"), 0, "{}", what("randread"));
        assert_eq!(u(&r, "/results/verify/reads_checked"), ios, "{}", what("randread"));
        assert_eq!(u(&r, "/results/verify/written_blocks_read_back"), 0, "{}", what("randread"));
    }

    if let Some(rw) = mode_run(dir.path(), md, &base("randrw")) {
        let (reads, writes) = (u(&rw, "/results/read/ios"), u(&rw, "/results/write/ios"));
        assert_eq!(reads + writes, ios, "{}", what("randrw"));
        assert_eq!(u(&rw, "/results/total/ios"), ios, "{}", what("randrw"));
        assert!(reads > 0 && writes > 0, "{}: {reads} reads, {writes} writes", what("randrw"));
        assert_eq!(u(&rw, "/results/verify/reads_checked"), reads, "{}", what("randrw"));
        let back = u(&rw, "/results/verify/written_blocks_read_back");
        assert!(back > 0 && back <= writes, "{}: {back} read back of {writes} writes", what("randrw"));
    }

    // Everything the runs left behind is intact.
    let all = ok_run(dir.path(), &strs(&["-i", "psync", "--rw", "read", "--bs", "128k", "--verify", "--bytes", SIZE, &t]));
    assert_eq!(u(&all, "/results/verify/reads_checked"), SIZE_BYTES / (128 << 10), "{}", what("read all"));
}

fn matrix(interface: &str) {
    for md in modes_here(interface) {
        random_verify_cycle(md, &[], IOS);
    }
}

#[test]
fn psync_random_verify() {
    matrix("psync");
}

#[test]
fn pvsync2_random_verify() {
    matrix("pvsync2");
}

#[test]
fn posixaio_random_verify() {
    matrix("posixaio");
}

#[test]
fn libaio_random_verify() {
    matrix("libaio");
}

#[test]
fn io_uring_random_verify() {
    matrix("io_uring");
}

/// Every mode with two threads; asynchronous modes also with a deep queue and batched
/// submission and reaping.
#[test]
fn threads_and_deep_queues_with_batches() {
    for name in ["psync", "pvsync2", "posixaio", "libaio", "io_uring"] {
        for md in modes_here(name) {
            if md.is_async() {
                random_verify_cycle(md, &["--threads", "2", "--qd", "8", "--batch-submit", "4", "--batch-reap", "2"], 500);
                random_verify_cycle(md, &["--qd", "16", "--batch-submit", "16", "--batch-reap", "16"], 320);
            } else {
                random_verify_cycle(md, &["--threads", "2"], 500);
            }
        }
    }
}

/// Sequential write then read of the whole file in every mode, checked block by block.
#[test]
fn sequential_write_then_read_verify() {
    for name in ["psync", "pvsync2", "posixaio", "libaio", "io_uring"] {
        for md in modes_here(name) {
            let dir = tempdir();
            let t = zero_file(dir.path(), "seq.dat", SIZE_BYTES).display().to_string();
            let qd = if md.is_async() { "4" } else { "1" };
            let l = md.label();
            if let Some(w) = mode_run(
                dir.path(),
                md,
                &[md.args(), strs(&["--rw", "write", "--bs", "64k", "--qd", qd, "--verify", "--bytes", SIZE, &t])].concat(),
            ) {
                assert_eq!(u(&w, "/results/write/ios"), 128, "{l}");
                assert_eq!(u(&w, "/results/write/bytes"), SIZE_BYTES, "{l}");
                assert_eq!(u(&w, "/results/verify/written_blocks_read_back"), 128, "{l}: every block written once");
            } else {
                verify_file(dir.path(), "seq.dat", SIZE_BYTES);
            }
            if let Some(r) = mode_run(
                dir.path(),
                md,
                &[md.args(), strs(&["--rw", "read", "--bs", "64k", "--qd", qd, "--verify", "--bytes", SIZE, &t])].concat(),
            ) {
                assert_eq!(u(&r, "/results/read/ios"), 128, "{l}");
                assert_eq!(u(&r, "/results/verify/reads_checked"), 128, "{l}");
            }
            // 4k reads of the 64k-written data: verify works at any multiple of 512.
            let r = ok_run(dir.path(), &strs(&["-i", "psync", "--rw", "randread", "--bs", "4k", "--verify", "--ios", "100", &t]));
            assert_eq!(u(&r, "/results/verify/reads_checked"), 100, "{l}");
        }
    }
}

/// The page cache: every interface that may use it, without O_DIRECT.
#[test]
fn buffered_runs() {
    for md in [
        m("psync", "syscall", "irq"),
        m("pvsync2", "syscall", "irq"),
        m("posixaio", "syscall", "irq"),
        m("io_uring", "syscall", "irq"),
        m("io_uring", "sqpoll", "irq"),
    ] {
        if iolab::interfaces::machine_support(md.interface).is_err() {
            continue;
        }
        let dir = tempdir();
        let t = verify_file(dir.path(), "buf.dat", SIZE_BYTES).display().to_string();
        for rw in ["randwrite", "randread", "randrw", "write", "read"] {
            let rec = ok_run(dir.path(), &[md.args(), strs(&["--buffered", "--rw", rw, "--ios", "300", "--bs", "2k", &t])].concat());
            assert_eq!(u(&rec, "/results/total/ios"), 300, "{} {rw}", md.label());
            assert_eq!(rec["spec"]["direct"], false);
        }
    }
}

/// --ios and --bytes budgets give exactly that many I/Os, however they divide among threads.
#[test]
fn count_budgets_are_exact() {
    let dir = tempdir();
    let t = verify_file(dir.path(), "budget.dat", SIZE_BYTES).display().to_string();
    let cases: &[(&[&str], u64, u64)] = &[
        (&["-i", "psync", "--ios", "1"], 1, 4096),
        (&["-i", "psync", "--ios", "1000", "--threads", "3"], 1000, 1000 * 4096),
        (&["-i", "libaio", "--ios", "777", "--threads", "2", "--qd", "8", "--batch-submit", "3", "--batch-reap", "5"], 777, 777 * 4096),
        (&["-i", "io_uring", "--ios", "1001", "--qd", "32", "--batch-submit", "8", "--batch-reap", "8"], 1001, 1001 * 4096),
        (&["-i", "posixaio", "--ios", "333", "--qd", "4"], 333, 333 * 4096),
        (&["-i", "pvsync2", "--bytes", "1m"], 256, 1 << 20),
        (&["-i", "io_uring", "--bytes", "2m", "--bs", "64k", "--threads", "2", "--qd", "4"], 32, 2 << 20),
        (&["-i", "libaio", "--bytes", "3m", "--bs", "512", "--qd", "2"], 6144, 3 << 20),
    ];
    for (args, ios, bytes) in cases {
        if iolab::interfaces::machine_support(args[1]).is_err() {
            continue;
        }
        for rw in ["randread", "randrw", "read"] {
            let rec = ok_run(dir.path(), &[strs(args), strs(&["--rw", rw, "--verify", &t])].concat());
            assert_eq!(u(&rec, "/results/total/ios"), *ios, "{args:?} {rw}");
            assert_eq!(u(&rec, "/results/read/ios") + u(&rec, "/results/write/ios"), *ios, "{args:?} {rw}");
            assert_eq!(u(&rec, "/results/total/bytes"), *bytes, "{args:?} {rw}");
        }
    }
}

/// A time budget runs for about that long.
#[test]
fn runtime_budget() {
    let dir = tempdir();
    let t = verify_file(dir.path(), "rt.dat", SIZE_BYTES).display().to_string();
    let rec = ok_run(dir.path(), &strs(&["-i", "psync", "--rw", "randread", "--runtime", "1s", "--size", SIZE, &t]));
    let w = rec["results"]["window_s"].as_f64().unwrap();
    assert!((0.8..3.0).contains(&w), "window {w} s for --runtime 1s");
    assert!(u(&rec, "/results/read/ios") > 0);
}

/// No target: a temporary file of --size, usable for verified reads and writes, removed after.
#[test]
fn default_target() {
    let tmp = tempdir();
    let out = tempdir();
    let json = out.path().join("d.json");
    for (args, rw_reads, rw_writes) in [
        (vec!["--rw", "randread", "--verify"], true, false),
        (vec!["--rw", "randwrite", "--verify"], false, true),
        (vec!["--rw", "randrw", "--verify", "-i", "io_uring", "--qd", "4"], true, true),
        (vec!["--rw", "read"], true, false),
    ] {
        let _ = std::fs::remove_file(&json);
        let mut a = strs(&["run", "-q", "--size", "4m", "--ios", "200", "--json", &json.display().to_string()]);
        a.extend(strs(&args));
        let r = iolab_in(tmp.path(), &a);
        r.assert_ok();
        let rec = record(&json);
        assert_clean(&rec, &r.describe());
        assert_eq!(u(&rec, "/results/total/ios"), 200, "{args:?}");
        assert_eq!(u(&rec, "/results/read/ios") > 0, rw_reads, "{args:?}");
        assert_eq!(u(&rec, "/results/write/ios") > 0, rw_writes, "{args:?}");
        let tgt = &rec["environment"]["targets"][0];
        assert_eq!(tgt["kind"], "file");
        assert_eq!(u(tgt, "/size_bytes"), 4 << 20);
        let tpath = tgt["path"].as_str().unwrap();
        assert!(tpath.starts_with(&tmp.path().display().to_string()), "default target {tpath} not under TMPDIR");
        assert!(!Path::new(tpath).exists(), "default target {tpath} left behind");
        assert!(entries(tmp.path()).is_empty(), "TMPDIR not cleaned: {:?}", entries(tmp.path()));
    }
}

/// Flip one byte behind iolab's back: a verified read must fail with one line and exit non-zero.
#[test]
fn corruption_is_detected() {
    use std::io::{Seek, SeekFrom, Write};
    for name in ["psync", "pvsync2", "posixaio", "libaio", "io_uring"] {
        if iolab::interfaces::machine_support(name).is_err() {
            continue;
        }
        let dir = tempdir();
        let path = zero_file(dir.path(), "c.dat", 1 << 20);
        let t = path.display().to_string();
        ok_run(dir.path(), &strs(&["-i", name, "--rw", "write", "--verify", "--bytes", "1m", &t]));
        ok_run(dir.path(), &strs(&["-i", name, "--rw", "read", "--verify", "--bytes", "1m", &t]));
        let mut f = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();
        let at = 77 * 4096 + 1000; // inside the payload of a sector of block 77
        f.seek(SeekFrom::Start(at)).unwrap();
        let mut b = [0u8; 1];
        std::io::Read::read_exact(&mut f, &mut b).unwrap();
        f.seek(SeekFrom::Start(at)).unwrap();
        f.write_all(&[b[0] ^ 0x40]).unwrap();
        f.sync_all().unwrap();
        drop(f);

        let (r, rec) = run_json(dir.path(), &strs(&["-i", name, "--rw", "read", "--verify", "--bytes", "1m", &t]));
        assert_ne!(r.code, 0, "corruption not detected:\n{}", r.describe());
        let line = r.one_line_stderr();
        assert!(line.contains("verify failed"), "{name}: {line}");
        assert!(line.contains(&(77 * 4096 + 512).to_string()), "{name}: should name the bad sector's offset: {line}");
        let rec = rec.expect("a failed run still writes its record");
        assert_eq!(rec["status"], "failed");
        assert_eq!(u(&rec, "/results/read/errors"), 1);
        // An intact region still verifies.
        ok_run(dir.path(), &strs(&["-i", name, "--rw", "read", "--verify", "--bytes", "256k", &t]));
    }
}

/// Verified reads of data iolab never wrote fail, and say so.
#[test]
fn verify_of_unwritten_data_fails() {
    let dir = tempdir();
    let t = zero_file(dir.path(), "z.dat", 1 << 20).display().to_string();
    let (r, _) = run_json(dir.path(), &strs(&["--rw", "randread", "--verify", "--ios", "10", &t]));
    assert_eq!(r.code, 1, "{}", r.describe());
    let line = r.one_line_stderr();
    assert!(line.contains("verify failed") && line.contains("no iolab verify data"), "{line}");
}
