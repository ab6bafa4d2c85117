//! Bad input: every mistake gets exactly one line on stderr, exit code 2, nothing on stdout,
//! and nothing created or changed (no JSON record, no temporary target, the target untouched).

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Run `iolab run ARGS --json DIR/out.json` in a fresh directory holding an 8 MiB target file
/// `DIR/t.dat` (named "TARGET" in ARGS); expect a usage error and return its line.
fn refused(args: &[&str]) -> String {
    let dir = tempdir();
    let target = verify_file(dir.path(), "t.dat", 8 << 20);
    let before = std::fs::read(&target).unwrap();
    let json = dir.path().join("out.json");
    let mut a = vec!["run".to_string()];
    a.extend(args.iter().map(|s| if *s == "TARGET" { target.display().to_string() } else { s.to_string() }));
    a.extend(["--json".to_string(), json.display().to_string()]);
    let r = iolab_in(dir.path(), &a);
    let line = r.assert_usage_error();
    assert!(r.stdout.is_empty(), "stdout not empty:\n{}", r.describe());
    assert!(!json.exists(), "a JSON record was written:\n{}", r.describe());
    assert_eq!(entries(dir.path()), vec!["t.dat".to_string()], "files created:\n{}", r.describe());
    assert!(std::fs::read(&target).unwrap() == before, "the target changed:\n{}", r.describe());
    line
}

fn assert_mentions(line: &str, words: &[&str]) {
    for w in words {
        assert!(line.contains(w), "error line should mention {w:?}: {line}");
    }
}

#[test]
fn unknown_interface() {
    let l = refused(&["-i", "spdk", "--ios", "10", "TARGET"]);
    assert_mentions(&l, &["unknown interface 'spdk'", "psync", "io_uring"]);
    // Without a target: no temporary target is created either.
    let l = refused(&["-i", "nope", "--ios", "10", "--size", "1m"]);
    assert_mentions(&l, &["unknown interface"]);
}

#[test]
fn unknown_option_and_bad_values() {
    assert_mentions(&refused(&["--frobnicate", "TARGET"]), &["--frobnicate"]);
    assert_mentions(&refused(&["--rw", "sideways", "TARGET"]), &["sideways"]);
    assert_mentions(&refused(&["--submit", "carrier-pigeon", "TARGET"]), &["carrier-pigeon"]);
    assert_mentions(&refused(&["--complete", "psychic", "TARGET"]), &["psychic"]);
    assert_mentions(&refused(&["--bs", "4q", "--ios", "10", "TARGET"]), &["--bs"]);
    assert_mentions(&refused(&["--qd", "many", "TARGET"]), &["many"]);
    assert_mentions(&refused(&["--runtime", "forever", "TARGET"]), &["--runtime"]);
    assert_mentions(&refused(&["--cpus", "x", "--ios", "10", "TARGET"]), &["--cpus"]);
    assert_mentions(&refused(&["--ios", "10", "--bytes", "1m", "TARGET"]), &["only one of"]);
    assert_mentions(&refused(&["--ios", "0", "TARGET"]), &["--ios"]);
    assert_mentions(&refused(&["--rw", "randread", "--write-mix", "30", "--ios", "10", "TARGET"]), &["--write-mix"]);
    assert_mentions(&refused(&["--rw", "randrw", "--write-mix", "130", "--ios", "10", "TARGET"]), &["130"]);
    assert_mentions(&refused(&["--qd", "0", "-i", "io_uring", "--ios", "10", "TARGET"]), &["--qd"]);
    assert_mentions(&refused(&["--threads", "0", "--ios", "10", "TARGET"]), &["--threads"]);
    assert_mentions(&refused(&["-i", "libaio", "--qd", "4", "--batch-submit", "5", "--ios", "10", "TARGET"]), &["--batch-submit"]);
    assert_mentions(&refused(&["--cpus", "4096", "--ios", "10", "TARGET"]), &["CPU 4096"]);
}

#[test]
fn block_size_out_of_range_or_misaligned() {
    // Not a multiple of 512: no device's logical block size allows it under O_DIRECT.
    assert_mentions(&refused(&["--bs", "1000", "--ios", "10", "TARGET"]), &["--bs 1000", "512"]);
    assert_mentions(&refused(&["--bs", "1000", "--ios", "10", "--size", "1m"]), &["--bs 1000"]);
    assert_mentions(&refused(&["--bs", "2m", "--ios", "10", "TARGET"]), &["--bs"]);
    assert_mentions(&refused(&["--bs", "256", "--ios", "10", "TARGET"]), &["--bs"]);
    // (512 on a 4096-byte-sector device is in block_safety.rs, on a loop device.)
}

#[test]
fn missing_target() {
    let dir = tempdir();
    let ghost = dir.path().join("ghost.dat");
    for rw in ["randread", "randwrite", "write"] {
        let r = iolab_in(dir.path(), &["run", "--rw", rw, "--ios", "10", &ghost.display().to_string()]);
        let l = r.assert_usage_error();
        assert_mentions(&l, &["does not exist", &ghost.display().to_string()]);
        assert!(!ghost.exists(), "--rw {rw} created the missing target");
        assert!(entries(dir.path()).is_empty());
    }
    let l = refused(&["--ios", "10", "/nonexistent-dir/x"]);
    assert_mentions(&l, &["does not exist"]);
}

#[test]
fn targets_of_the_wrong_kind() {
    assert_mentions(&refused(&["--ios", "10", "/dev/null"]), &["neither a regular file nor a block device"]);
    let dir = tempdir();
    let r = iolab_in(dir.path(), &["run", "--ios", "10", &dir.path().display().to_string()]);
    assert_mentions(&r.assert_usage_error(), &["neither a regular file nor a block device"]);
}

/// Files of proc, sysfs and the like are kernel interfaces, not storage: refused as targets,
/// for reading as well as (with --buffered) writing.
#[test]
fn pseudo_file_system_targets() {
    let sysfs = "/sys/kernel/uevent_seqnum";
    if Path::new(sysfs).is_file() {
        for rw in ["randread", "randwrite"] {
            assert_mentions(
                &refused(&["--buffered", "--rw", rw, "--bs", "4096", "--ios", "1", sysfs]),
                &["is on sysfs, a kernel pseudo-file system"],
            );
        }
    }
    assert_mentions(
        &refused(&["--buffered", "--ios", "1", "/proc/self/status"]),
        &["/proc/self/status is on proc, a kernel pseudo-file system"],
    );
}

#[test]
fn target_too_small_or_range_outside() {
    assert_mentions(&refused(&["--size", "16m", "--ios", "10", "TARGET"]), &["--size"]);
    assert_mentions(&refused(&["--offset", "9m", "--ios", "10", "TARGET"]), &["--offset"]);
    assert_mentions(&refused(&["--offset", "1000", "--ios", "10", "TARGET"]), &["--offset 1000"]);
    let dir = tempdir();
    let tiny = zero_file(dir.path(), "tiny", 2048);
    let r = iolab_in(dir.path(), &["run", "--ios", "10", &tiny.display().to_string()]);
    r.assert_usage_error();
}

#[test]
fn unreadable_target() {
    let dir = tempdir();
    // Traversable by everyone, so an unprivileged user reaches the file.
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let target = verify_file(dir.path(), "secret.dat", 1 << 20);
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o000)).unwrap();
    // No --json: as nobody the directory is not writable, which iolab would report first.
    let args = ["run", "--ios", "10", &target.display().to_string()];
    let r = if is_root() {
        // Root reads any file: drop to nobody for this one.
        use std::os::unix::process::CommandExt;
        if std::fs::metadata(BIN).map(|m| m.permissions().mode() & 0o001 == 0).unwrap_or(true) {
            skip("unreadable_target", "the iolab binary is not executable by other users");
            return;
        }
        let out = std::process::Command::new(BIN).args(args).uid(65534).gid(65534).env("TMPDIR", dir.path()).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned(), out.stdout.is_empty())
    } else {
        let r = iolab_in(dir.path(), &args);
        (Some(r.code), r.stderr.clone(), r.stdout.is_empty())
    };
    assert_eq!(r.0, Some(2), "{}", r.1);
    assert_eq!(r.1.lines().count(), 1, "{}", r.1);
    assert!(r.1.contains("Permission denied") && r.1.contains("secret.dat"), "{}", r.1);
    assert!(r.2);
    assert_eq!(entries(dir.path()), vec!["secret.dat".to_string()]);
}

#[test]
fn synchronous_interfaces_reject_queue_depth() {
    for i in ["psync", "pvsync2"] {
        let l = refused(&["-i", i, "--qd", "8", "--ios", "10", "TARGET"]);
        assert_mentions(&l, &[i, "--qd 8", "--threads 8"]);
    }
}

#[test]
fn modes_an_interface_does_not_have() {
    for i in ["psync", "pvsync2", "posixaio", "libaio"] {
        assert_mentions(&refused(&["-i", i, "--submit", "sqpoll", "--ios", "10", "TARGET"]), &["sqpoll"]);
    }
    for i in ["psync", "libaio"] {
        assert_mentions(&refused(&["-i", i, "--complete", "poll", "--ios", "10", "TARGET"]), &["--complete"]);
    }
    assert_mentions(&refused(&["-i", "pvsync2", "--complete", "hybrid", "--ios", "10", "TARGET"]), &["hybrid"]);
    assert_mentions(&refused(&["-i", "io_uring", "--sq-cpu", "0", "--ios", "10", "TARGET"]), &["--sq-cpu", "sqpoll"]);
    assert_mentions(&refused(&["-i", "io_uring", "--submit", "sqpoll", "--sq-cpu", "4096", "--ios", "10", "TARGET"]), &["CPU 4096"]);
}

#[test]
fn page_cache_conflicts() {
    assert_mentions(&refused(&["--verify", "--buffered", "--ios", "10", "TARGET"]), &["--verify", "--buffered"]);
    assert_mentions(&refused(&["-i", "pvsync2", "--complete", "poll", "--buffered", "--ios", "10", "TARGET"]), &["O_DIRECT"]);
    assert_mentions(&refused(&["-i", "io_uring", "--complete", "poll", "--buffered", "--ios", "10", "TARGET"]), &["O_DIRECT"]);
}

/// The sysfs `queue/io_poll` of the disk holding `path`, if known.
fn io_poll_of(path: &Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let node = std::fs::canonicalize(format!("/sys/dev/block/{}:{}", libc::major(dev), libc::minor(dev))).ok()?;
    let disk = if node.join("partition").exists() { node.parent()?.to_path_buf() } else { node };
    Some(std::fs::read_to_string(disk.join("queue/io_poll")).ok()?.trim() == "1")
}

#[test]
fn polling_a_queue_that_cannot_poll() {
    if iolab::interfaces::machine_support("io_uring").is_err() {
        skip("polling_a_queue_that_cannot_poll", "io_uring is not available");
        return;
    }
    let probe = tempdir();
    if io_poll_of(probe.path()) != Some(false) {
        skip("polling_a_queue_that_cannot_poll", "the temporary directory's disk can poll (or does not say)");
        return;
    }
    let mut modes = vec![vec!["--complete", "poll"], vec!["--submit", "sqpoll", "--complete", "poll"]];
    if kernel_version() >= (6, 13) {
        modes.push(vec!["--complete", "hybrid"]);
    }
    for m in modes {
        let mut a = vec!["-i", "io_uring", "--ios", "10"];
        a.extend(&m);
        a.push("TARGET");
        let l = refused(&a);
        assert_mentions(&l, &["io_poll", "poll_queues", "--allow-fallback"]);
    }
}

#[test]
fn durations_and_cpu_lists_beyond_the_limits() {
    // Each used to run nothing and report ok, skip the ramp, abort converting the time, or fill
    // memory expanding the list: now one line before anything is touched.
    assert_mentions(&refused(&["--runtime", "100000000000000000000s", "TARGET"]), &["--runtime", "longer than a week"]);
    assert_mentions(&refused(&["--ramp", "100000000000s", "--ios", "10", "TARGET"]), &["--ramp", "longer than a week"]);
    assert_mentions(
        &refused(&["--idle-baseline", "100000000000000000000s", "--ios", "10", "TARGET"]),
        &["--idle-baseline", "longer than a week"],
    );
    assert_mentions(&refused(&["--cpus", "0-99999999999", "--ios", "10", "TARGET"]), &["--cpus", "does not exist"]);
}

#[test]
fn a_run_that_fits_its_buffers_but_not_its_threads_arenas_is_refused() {
    // 192 MiB of buffers under a 300 MB `ulimit -v`: the buffers fit what is left, but each
    // engine thread's malloc arena reserves 64 MiB more, and the run aborted allocating them.
    let dir = tempdir();
    let target = verify_file(dir.path(), "t.dat", 8 << 20);
    let run = |limit_kb: u32| {
        let cmd = format!(
            "ulimit -v {limit_kb}; exec timeout -s KILL 60 {BIN} run -q -i io_uring --qd 64 --bs 1m --threads 3 --ios 300 {}",
            target.display()
        );
        let out = std::process::Command::new("sh").arg("-c").arg(&cmd).current_dir(dir.path()).output().unwrap();
        (cmd, out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (cmd, code, stderr) = run(300_000);
    assert_eq!(code, Some(2), "{cmd}\n{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_mentions(&stderr, &["malloc arenas", "ulimit -v"]);
    // With room for them, the same run goes ahead.
    let (cmd, code, stderr) = run(600_000);
    assert_eq!(code, Some(0), "{cmd}\n{stderr}");
}

#[test]
fn a_run_too_big_for_the_address_space_is_refused_before_anything() {
    // 8 threads × 1024 × 1 MiB = 8 GiB of buffers under a 3.5 GB `ulimit -v`: it aborted (after
    // changing settings, had any been asked for); now it is one line and exit 2.
    let dir = tempdir();
    let target = verify_file(dir.path(), "t.dat", 8 << 20);
    let cmd = format!("ulimit -v 3500000; exec {BIN} run -i io_uring --qd 1024 --bs 1m --threads 8 --ios 10 {}", target.display());
    let out = std::process::Command::new("sh").arg("-c").arg(&cmd).current_dir(dir.path()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{cmd}\n{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // 8.1: each thread's per-second latency counts (an hour's for a count budget, 14 MB) beside its buffers.
    assert_mentions(&stderr, &["needs 8.1 GiB", "ulimit -v"]);
    assert_eq!(entries(dir.path()), vec!["t.dat".to_string()]);
}

#[test]
fn null_refuses_a_target_verify_and_bad_scripts() {
    assert_mentions(&refused(&["-i", "null", "--ios", "10", "TARGET"]), &["null does no I/O", "t.dat", "--size"]);
    assert_mentions(&refused(&["-i", "null", "--rw", "randwrite", "--verify", "--ios", "10"]), &["nothing to verify"]);
    assert_mentions(&refused(&["-i", "null", "--null-script", "error=EIO", "--ios", "10"]), &["--null-script", "@N"]);
    assert_mentions(&refused(&["--null-script", "accept=1", "--ios", "10", "TARGET"]), &["only to -i null"]);
}

/// Energy options are finite numbers in a sane range, refused in one line before the run:
/// NaN and infinity reached the integration ("NaN W, 100 % covered", stored as measured).
#[test]
fn meter_clock_options_must_be_finite_and_bounded() {
    for (opt, v, word) in [
        ("--meter-drift-ppm", "nan", "--meter-drift-ppm"),
        ("--meter-drift-ppm", "inf", "--meter-drift-ppm"),
        ("--meter-drift-ppm", "-1000000", "1000"),
        ("--meter-offset", "nan", "--meter-offset"),
        ("--meter-offset", "-inf", "--meter-offset"),
        ("--meter-offset", "1e12", "year"),
    ] {
        let l = refused(&["-i", "null", "--ios", "10", "--size", "1m", opt, v]);
        assert_mentions(&l, &[word]);
    }
    // `energy import`'s own names for them, before the database is opened.
    let dir = tempdir();
    let log = dir.path().join("m.csv");
    std::fs::write(&log, "1,100\n2,100\n").unwrap();
    let db = dir.path().join("none.db");
    for (opt, v) in [("--drift-ppm", "-1000000"), ("--drift-ppm", "NaN"), ("--clock-offset", "nan"), ("--clock-offset", "inf")] {
        let r = iolab_in(dir.path(), &["energy", "import", log.to_str().unwrap(), "--db", db.to_str().unwrap(), opt, v]);
        assert_mentions(&r.assert_usage_error(), &[opt]);
        assert_eq!(entries(dir.path()), vec!["m.csv".to_string()], "{}", r.describe());
    }
}

/// A suite's `--size 0` is refused, also in a dry run (which exited 0).
#[test]
fn suite_size_zero_is_refused() {
    let dir = tempdir();
    let db = dir.path().join("s.db");
    for size in ["0", "100"] {
        let r = iolab_in(dir.path(), &["suite", "run", "S2", "--size", size, "--dry-run", "--db", db.to_str().unwrap()]);
        assert_mentions(&r.assert_usage_error(), &["--size"]);
        assert!(r.stdout.is_empty(), "{}", r.describe());
        assert!(entries(dir.path()).is_empty(), "{}", r.describe());
    }
}

/// Only bad input exits 2: the exit code is the failure's kind. A results database that fails
/// while it is opened (damaged) is the store's failure, exit 3, for every command that opens one
/// (`sweep`, `suite run` and `report` said 2, as if the user had mistyped); a program iolab
/// drives that is missing is exit 4; a mistake is still 2. Each one line on stderr.
#[test]
fn the_exit_code_is_the_failure_s_kind_not_always_bad_input() {
    let dir = tempdir();
    let d = dir.path();
    let damaged = d.join("damaged.db");
    drop(iolab::store::Store::open(&damaged).unwrap());
    // The header is kept (still an SQLite file); the first page's b-tree, which lists the
    // tables, is overwritten.
    let mut bytes = std::fs::read(&damaged).unwrap();
    let page = u16::from_be_bytes([bytes[16], bytes[17]]) as usize;
    bytes[100..page].fill(0xff);
    std::fs::write(&damaged, bytes).unwrap();
    let plan = d.join("plan.toml");
    std::fs::write(&plan, "name = \"kinds\"\nruntime = \"0.1s\"\n[matrix]\ninterface = [\"null\"]\n").unwrap();
    let (db, plan) = (damaged.to_str().unwrap(), plan.to_str().unwrap());
    let out = d.join("out");
    for args in [
        vec!["sweep", plan, "--db", db, "--quiet"],
        vec!["suite", "run", "S1", "--quick", "--db", db, "--quiet"],
        vec!["report", "--db", db, "--out", out.to_str().unwrap()],
        vec!["results", "--db", db],
    ] {
        let r = iolab_in(d, &args);
        assert_eq!(r.code, 3, "a damaged database is the store's failure (exit 3):\n{}", r.describe());
        let line = r.one_line_stderr();
        assert!(line.contains("damaged.db") && line.contains("malformed"), "{line}");
    }
    assert!(!out.exists(), "a report was written from a damaged database");

    // A program iolab drives that is not there: Slurm's sbatch for `fleet submit`.
    let empty = d.join("no-slurm");
    std::fs::create_dir(&empty).unwrap();
    let results = d.join("shared");
    let a = ["fleet", "submit", plan, "--results", results.to_str().unwrap(), "--local-dir", d.to_str().unwrap(), "--nodes", "1"];
    let out = std::process::Command::new(BIN).args(a).current_dir(d).env("PATH", &empty).output().unwrap();
    let r = Run::from(out, a.iter().map(|s| s.to_string()).collect());
    assert_eq!(r.code, 4, "a missing sbatch is Slurm's failure (exit 4):\n{}", r.describe());
    assert!(r.one_line_stderr().contains("sbatch"), "{}", r.describe());

    // Bad input stays bad input.
    let r = iolab_in(d, &["sweep", d.join("none.toml").to_str().unwrap(), "--db", db]);
    assert!(r.assert_usage_error().contains("none.toml"), "{}", r.describe());
}

/// A layer's error exits with its kind's code: the temporary target `probe` makes where none is
/// named cannot be created (TMPDIR is no directory) is a failed run (the device layer's
/// `DeviceError::Io`), exit 1, not bad input; a target refused by the write-safety rules is
/// still bad input, exit 2. Each one line on stderr.
#[test]
fn a_device_error_exits_with_its_kind_s_code() {
    let dir = tempdir();
    let missing = dir.path().join("no-such-dir");
    let out = std::process::Command::new(BIN).args(["probe"]).env("TMPDIR", &missing).output().unwrap();
    let r = Run::from(out, vec!["probe".into()]);
    assert_eq!(r.code, 1, "a temporary target that cannot be made is a failed run (exit 1):\n{}", r.describe());
    assert!(r.one_line_stderr().contains("temporary directory"), "{}", r.describe());
    let r = iolab_in(dir.path(), &["probe", "/proc/self/status"]);
    assert!(r.assert_usage_error().contains("pseudo-file system"), "{}", r.describe());
}

/// The errors typed in the energy options, a sweep's command line and a stored run's plan keep
/// their kind up to the exit code: each refusal below is bad input (exit 2, one line), before
/// anything is opened or written (no database, no record).
#[test]
fn typed_option_errors_keep_their_kind_to_the_exit_code() {
    let dir = tempdir();
    let d = dir.path();
    let plan = d.join("plan.toml");
    std::fs::write(&plan, "name = \"typed\"\nruntime = \"0.1s\"\n[matrix]\ninterface = [\"null\"]\n").unwrap();
    let (plan, db) = (plan.to_str().unwrap(), d.join("x.db"));
    let db = db.to_str().unwrap();
    // The energy layer's `EnergyError::Invalid`, from `iolab run`'s and `iolab sweep`'s options.
    let l = refused(&["-i", "null", "--ios", "10", "--size", "1m", "--netio-url", "ftp://pdu", "--netio-outlets", "1"]);
    assert_mentions(&l, &["--netio-url", "http://"]);
    let l = refused(&["-i", "null", "--ios", "10", "--size", "1m", "--powersensor-rails", "0"]);
    assert_mentions(&l, &["--powersensor-rails needs --powersensor"]);
    let l = refused(&["-i", "null", "--ios", "10", "--size", "1m", "--energy-scope", "moon"]);
    assert_mentions(&l, &["--energy-scope", "'moon' is not an energy scope"]);
    for (args, words) in [
        (vec!["sweep", plan, "--db", db, "--energy-command", "true", "--energy-socket", "h:1"], vec!["give one meter of the two"]),
        (vec!["sweep", plan, "--db", db, "--idle", "per-run"], vec!["--idle-baseline"]),
        // The plan layer's `PlanError`, for a sweep's own options.
        (vec!["sweep", plan, "--db", db, "--wait-settings", "200h"], vec!["--wait-settings", "out of range"]),
        (vec!["sweep", plan, "--db", db, "--share", "3/2"], vec!["--share", "give I/N"]),
    ] {
        let r = iolab_in(d, &args);
        let line = r.assert_usage_error();
        assert_mentions(&line, &words);
        assert!(r.stdout.is_empty(), "stdout not empty:\n{}", r.describe());
    }
    assert!(!Path::new(db).exists(), "a database was made for a refused command");
    // `energy import`'s meter log: a directory is no log (`EnergyError::Invalid`, its line given
    // context by the import).
    let stored = d.join("stored.db");
    drop(iolab::store::Store::open(&stored).unwrap());
    let logs = d.join("logs");
    std::fs::create_dir(&logs).unwrap();
    let r = iolab_in(d, &["energy", "import", logs.to_str().unwrap(), "--db", stored.to_str().unwrap()]);
    assert_mentions(&r.assert_usage_error(), &["meter log", "a directory"]);
}
