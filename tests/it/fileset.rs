//! The file-set workload (`--fileset`, issue 30 item 3, IISWC'19 Fig 23's workload): a set made
//! in a fresh directory under the target directory, its creation measured apart, each file
//! read or written whole through the interface, per-file latency, fsync policies, bad input.
//! On whatever file system the temporary directory is on (ext4 on this VM; O_DIRECT needs one
//! that takes it, so the tests fall back to --buffered where it does not).

use crate::common::*;
use serde_json::Value;
use std::path::Path;

/// Whether O_DIRECT opens work in `dir` (tmpfs refuses it).
fn direct_works(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let p = dir.join(".direct-probe");
    std::fs::write(&p, [0u8; 4096]).unwrap();
    let ok = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(&p).is_ok();
    std::fs::remove_file(&p).unwrap();
    ok
}

/// `iolab run ARGS DIR --json` in a fresh directory; the record, after checking the set was
/// removed (the directory is as it was: empty).
fn run_set(args: &[&str]) -> Value {
    let dir = tempdir();
    let json = tempdir();
    let out = json.path().join("r.json");
    let mut a: Vec<String> = vec!["run".into(), "-q".into()];
    a.extend(args.iter().map(|s| s.to_string()));
    if !direct_works(dir.path()) {
        a.push("--buffered".into());
    }
    a.extend([dir.path().display().to_string(), "--json".into(), out.display().to_string()]);
    let run = iolab(&a);
    run.assert_ok();
    assert!(
        run.stdout.contains("file set:") && run.stdout.contains("created:") && run.stdout.contains("per file p50"),
        "{}",
        run.describe()
    );
    assert!(entries(dir.path()).is_empty(), "the set was not removed: {:?}", entries(dir.path()));
    record(&out)
}

fn f(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr).and_then(Value::as_f64).unwrap_or_else(|| panic!("no number at {ptr} in {v:#}"))
}

/// 200 files of 4k-64k, read whole in random order: the creation is measured apart (200 files,
/// the set's bytes), and one pass (a byte budget of the set's size) reads every file once, its
/// bytes those of the set, the per-I/O count the set's blocks, each file's latency recorded.
#[test]
fn a_run_reads_200_files_whole_and_records_each_file() {
    let args = ["-i", "psync", "--fileset", "200", "--file-size", "4k-64k", "--rw", "read", "--file-order", "random", "--ios", "1"];
    let first = run_set(&args);
    assert_clean(&first, "first run");
    let set = &first["fileset"];
    let bytes = u(set, "/bytes");
    assert_eq!(u(set, "/files"), 200);
    assert_eq!((u(set, "/create/files"), u(set, "/create/bytes")), (200, bytes), "{set:#}");
    assert!(f(set, "/create/seconds") > 0.0 && u(set, "/create/file_lat_ns/p50") > 0, "{set:#}");
    assert!(bytes.is_multiple_of(4096) && (200 * 4096..=200 * 65536).contains(&bytes), "{bytes}");
    assert_eq!(first["spec"]["fileset"]["file_size"], "4096-65536");
    // One pass: the same seed draws the same set, and a budget of its bytes reads each file once.
    let budget = bytes.to_string();
    let mut again: Vec<&str> = args[..args.len() - 2].to_vec();
    again.extend(["--bytes", &budget]);
    let rec = run_set(&again);
    assert_clean(&rec, "one pass");
    let set = &rec["fileset"];
    assert_eq!(u(set, "/bytes"), bytes, "the same seed draws the same sizes");
    assert_eq!((u(set, "/measured/files"), u(set, "/measured/bytes")), (200, bytes), "{set:#}");
    assert_eq!(u(&rec, "/results/read/ios"), bytes / 4096, "every block of every file, once");
    assert_eq!(u(&rec, "/results/read/bytes"), bytes);
    assert_eq!(u(&rec, "/results/write/ios"), 0);
    let (p50, p99) = (u(set, "/measured/file_lat_ns/p50"), u(set, "/measured/file_lat_ns/p99"));
    assert!(p50 > 0 && p99 >= p50, "{set:#}");
    assert!(set["measured"]["file_lat_histogram"].is_string());
    assert_eq!(u(set, "/fsyncs"), 0);
}

/// Writes with `--fsync each` fsync every file written (the record's count), with `end` once;
/// through io_uring (its files not registered) and libaio as well as psync.
#[test]
fn writes_fsync_each_file_or_once_at_the_end() {
    let rec = run_set(&["-i", "psync", "--fileset", "40", "--file-size", "4k,16k", "--rw", "write", "--fsync", "each", "--ios", "60"]);
    assert_clean(&rec, "fsync each");
    let set = &rec["fileset"];
    let files = u(set, "/measured/files");
    assert!(files >= 1 && u(&rec, "/results/write/ios") >= 60, "{set:#}");
    assert_eq!(u(set, "/fsyncs"), files, "one fsync per file written: {set:#}");
    assert_eq!(u(&rec, "/results/write/bytes"), u(set, "/measured/bytes"));
    let rec = run_set(&["-i", "psync", "--fileset", "40", "--rw", "write", "--fsync", "end", "--ios", "60"]);
    assert_clean(&rec, "fsync end");
    assert_eq!(u(&rec, "/fileset/fsyncs"), 1);
    for iface in [&["-i", "io_uring", "--register-files", "false", "--qd", "4"][..], &["-i", "libaio", "--qd", "4"]] {
        let mut a = iface.to_vec();
        a.extend(["--fileset", "50", "--file-size", "16k-64k", "--rw", "read", "--runtime", "300ms"]);
        let rec = run_set(&a);
        assert_clean(&rec, iface[1]);
        let set = &rec["fileset"];
        assert!(u(set, "/measured/files") >= 1, "{set:#}");
        assert_eq!(u(&rec, "/results/read/bytes"), u(set, "/measured/bytes"), "{}: whole files only: {set:#}", iface[1]);
    }
}

/// Bad input: one line, exit 2, nothing made in the directory.
#[test]
fn bad_file_sets_are_refused_in_one_line_before_anything_is_made() {
    let dir = tempdir();
    let d = dir.path().display().to_string();
    let file = zero_file(dir.path(), "plain", 4096).display().to_string();
    let link = dir.path().join("link");
    let target = dir.path().join("sub");
    std::fs::create_dir(&target).unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let link = link.display().to_string();
    let before = entries(dir.path());
    let cases: &[(&[&str], &str)] = &[
        (&["--fileset", "0", &d], "out of range"),
        (&["--fileset", "1000000000000", &d], "out of range"),
        (&["--fileset", "10", "--file-size", "NaN", &d], "--file-size"),
        (&["--fileset", "10", "--file-size", "0", &d], "whole number"),
        (&["--fileset", "10", "--file-size", "4k-2g", &d], "whole number"),
        (&["--fileset", "10", "--file-size", "6k", &d], "whole number"),
        (&["--fileset", "1000000", "--file-size", "1g", &d], "free"),
        (&["--fileset", "10", &file], "not a directory"),
        (&["--fileset", "10", &link], "symbolic link"),
        (&["--fileset", "10", "--rw", "randrw", &d], "read or write"),
        (&["--fileset", "10", "-i", "io_uring", &d], "--register-files false"),
        (&["--fileset", "10", "--rw", "read", "--fsync", "each", &d], "applies to writes"),
        (&["--fileset", "10", "--file-order", "sideways", &d], "seq or random"),
        (&["--fileset", "10"], "one target"),
        (&["--fileset", "10", "--set", "nomerges=2", &d], "--set"),
    ];
    for (args, says) in cases {
        let mut a = vec!["run", "--ios", "10"];
        a.extend_from_slice(args);
        let r = iolab(&a);
        let line = r.assert_usage_error();
        assert!(line.contains(says), "{args:?} should say {says:?}: {line}");
        assert_eq!(entries(dir.path()), before, "{args:?} made something:\n{}", r.describe());
        assert!(entries(&target).is_empty(), "{args:?} made something through the link");
    }
}

/// A CSV line's cells (a quoted cell may hold commas: a configuration's key).
fn cells(line: &str) -> Vec<String> {
    let (mut out, mut cell, mut quoted) = (Vec::new(), String::new(), false);
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cell)),
            c => cell.push(c),
        }
    }
    out.push(cell);
    out
}

/// Fig 23's grid as a plan: a `[fileset]` table and `rw` x `file_order` in the matrix over one
/// directory; each run stored with its set's columns (schema version 8), `iolab results`
/// showing each set's per-file p50 and p99, the CSV their values.
#[test]
fn a_plan_sweeps_the_file_set_grid_and_the_store_keeps_its_columns() {
    let dir = tempdir();
    let work = tempdir();
    let buffered = if direct_works(dir.path()) { "" } else { "[options]\nbuffered = true\n" };
    let plan = work.path().join("fig23.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"fig23\"\ntargets = [\"{}\"]\nios = 40\n[fileset]\nfiles = 30\nfsync = \"none\"\n[matrix]\nrw = [\"read\", \"write\"]\nfile_order = [\"seq\", \"random\"]\nfile_size = [\"4k-16k\"]\n{buffered}",
            dir.path().display()
        ),
    )
    .unwrap();
    let db = work.path().join("r.db");
    let (db_s, plan_s) = (db.display().to_string(), plan.display().to_string());
    iolab(&["sweep", "-q", "--db", &db_s, &plan_s]).assert_ok();
    assert!(entries(dir.path()).is_empty(), "a set was left behind: {:?}", entries(dir.path()));
    let list = iolab(&["results", "--db", &db_s]);
    list.assert_ok();
    assert!(list.stdout.contains("file p50") && list.stdout.contains("file p99"), "{}", list.describe());
    assert!(list.stdout.contains("30 seq") && list.stdout.contains("30 random"), "{}", list.describe());
    let csv = iolab(&["results", "--csv", "-", "--db", &db_s]);
    csv.assert_ok();
    let mut lines = csv.stdout.lines();
    let header = cells(lines.next().unwrap());
    let rows: Vec<Vec<String>> = lines.map(cells).collect();
    assert_eq!(rows.len(), 4, "{}", csv.stdout);
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} in {header:?}"));
    for r in &rows {
        let r: Vec<&str> = r.iter().map(String::as_str).collect();
        assert_eq!(r[col("fileset_files")], "30");
        assert_eq!(r[col("file_size")], "4096-16384");
        assert!(["seq", "random"].contains(&r[col("file_order")]), "{r:?}");
        for c in ["create_s", "create_file_lat_p50_ns", "files_done", "files_per_s", "file_lat_p50_ns", "file_lat_p99_ns"] {
            assert!(r[col(c)].parse::<f64>().is_ok_and(|x| x > 0.0), "{c} in {r:?}");
        }
        assert_eq!(r[col("fsyncs")], "0");
    }
    // A file set's dimension without a set: one line, exit 2.
    std::fs::write(&plan, "ios = 5\n[matrix]\nfile_order = [\"seq\"]\n").unwrap();
    let line = iolab(&["sweep", "-q", "--db", &db_s, &plan_s]).assert_usage_error();
    assert!(line.contains("[fileset]"), "{line}");
}

/// S4.7's `server` dimension (the NBD back end a set's file system is served through) is set up
/// by the served suite part only: a plan of one's own naming it on a plain directory stops at its
/// first run as bad input, in one line that says so, and a value that is not a back end is
/// refused before anything is stored.
#[test]
fn a_served_set_without_its_server_is_bad_input() {
    let dir = tempdir();
    let work = tempdir();
    let plan = work.path().join("served.toml");
    let db = work.path().join("r.db");
    let (db_s, plan_s) = (db.display().to_string(), plan.display().to_string());
    let write = |server: &str| {
        std::fs::write(
            &plan,
            format!(
                "name = \"served\"\ntargets = [\"{}\"]\nios = 10\n[fileset]\nfiles = 5\nfile_size = \"4k\"\n[matrix]\nrw = [\"read\"]\nserver = [\"{server}\"]\n[options]\nbuffered = true\n",
                dir.path().display()
            ),
        )
        .unwrap()
    };
    write("io_uring");
    let r = iolab(&["sweep", "-q", "--db", &db_s, &plan_s]);
    assert_eq!(r.code, 2, "{}", r.describe());
    assert!(r.stderr.contains("is not on a file system iolab serves through io_uring"), "{}", r.describe());
    assert!(entries(dir.path()).is_empty(), "nothing made: {:?}", entries(dir.path()));
    write("nbd-server");
    let line = iolab(&["sweep", "-q", "--db", &db_s, &plan_s]).assert_usage_error();
    assert!(line.contains("server = \"nbd-server\": a file set is served through io_uring, psync, vfio-nvme"), "{line}");
}
