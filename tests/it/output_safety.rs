//! Where iolab writes its outputs and its database, and where it refuses: an output file (run
//! and precondition --json, results --csv/--json, report --out) never goes into a block device
//! or a character device that is not a sink, even through a symlink, and is refused before any
//! work; a results database must be a regular file or a new one, and a database iolab refuses
//! is left byte for byte as it was with nothing created beside it; commands that only read
//! work for another user on a 0644 database and on a read-only mount; skipped planned runs are
//! listed by `results --status skipped`.
//!
//! Tests on loop devices, mounts or another user need root (and losetup, mkfs.ext4, setpriv);
//! they skip with the reason on stderr otherwise.

use crate::common::*;
use iolab::store::Store;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use crate::common::LOOPS;

/// Why tests on loop devices (and mounts) cannot run here, if they cannot.
fn no_loops() -> Option<&'static str> {
    if !is_root() {
        return Some("needs root for loop devices");
    }
    let runs = |c: &str| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success());
    if !runs("losetup") || !Path::new("/dev/loop-control").exists() {
        return Some("losetup or the loop driver is missing");
    }
    None
}

/// A loop device over a fresh file of `size` bytes (filled with a pattern), detached on drop;
/// the lock keeps this file's tests from setting up loop devices at the same time.
struct LoopDev {
    dev: String,
    _lock: MutexGuard<'static, ()>,
}

fn loop_over(dir: &Path, size: usize) -> LoopDev {
    let lock = LOOPS.lock().unwrap_or_else(|e| e.into_inner());
    let backing = dir.join("backing.img");
    std::fs::write(&backing, (0..size).map(|i| (i % 251) as u8).collect::<Vec<u8>>()).unwrap();
    let out = Command::new("losetup").args(["-f", "--show"]).arg(&backing).output().unwrap();
    assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
    LoopDev { dev: String::from_utf8_lossy(&out.stdout).trim().to_string(), _lock: lock }
}

impl Drop for LoopDev {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.dev]).status();
    }
}

/// A mount point, unmounted on drop (declare it after the LoopDev so it goes first).
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn mount(args: &[&str], at: &Path) -> Mounted {
    std::fs::create_dir_all(at).unwrap();
    let st = Command::new("mount").args(args).arg(at).status().unwrap();
    assert!(st.success(), "mount {args:?} {}", at.display());
    Mounted(at.to_path_buf())
}

/// Every byte of a file or device, hashed.
fn digest(path: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::fs::read(path).unwrap_or_else(|e| panic!("read {path}: {e}")).hash(&mut h);
    h.finish()
}

/// `iolab ARGS...`, killed after 20 s (an open of a FIFO can wait for ever).
fn iolab_bounded(args: &[&str]) -> Run {
    let mut child = Command::new(BIN).args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let run = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
        args: args.iter().map(|a| a.to_string()).collect(),
    };
    assert!(start.elapsed() < Duration::from_secs(20), "iolab hung:\n{}", run.describe());
    run
}

/// A results database with one finished run (a sweep of one psync run over `dir/data.img`).
fn make_db(dir: &Path, db: &Path) {
    let data = dir.join("data.img");
    std::fs::write(&data, vec![0x5au8; 1 << 20]).unwrap();
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"one\"\nseed = 5\nios = 100\ntargets = [\"{}\"]\nreplicates = 2\n[matrix]\ninterface = [\"psync\"]\n",
            data.display()
        ),
    )
    .unwrap();
    iolab(&["sweep", plan.to_str().unwrap(), "--db", db.to_str().unwrap(), "--quiet"]).assert_ok();
}

/// For a test on a loop device: a directory holding `make_db`'s database and target, and a
/// loop device of `size` bytes, with ext4 on it if asked; None (the test skipped, with the
/// reason) where they cannot be made.
fn db_and_loop(test: &str, size: usize, ext4: bool) -> Option<(tempfile::TempDir, LoopDev)> {
    if let Some(why) = no_loops() {
        skip(test, why);
        return None;
    }
    let d = tempdir();
    make_db(d.path(), &d.path().join("iolab.db"));
    let lo = loop_over(d.path(), size);
    if ext4 && !Command::new("mkfs.ext4").args(["-q", "-F", &lo.dev]).status().is_ok_and(|s| s.success()) {
        skip(test, "mkfs.ext4 failed or is missing");
        return None;
    }
    Some((d, lo))
}

/// The configuration key of the first stored run.
fn first_key(db: &Path) -> String {
    Store::open_existing(db).unwrap().list_runs(&Default::default()).unwrap()[0].config_key.clone().unwrap()
}

/// The commands that write an output file, each aimed at `dest`, with `make_db`'s database and
/// target in `dir` (precondition would write that target).
fn output_commands(dest: &str, dir: &Path, out_dir: &str) -> Vec<Vec<String>> {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<String>>();
    let db = dir.join("iolab.db");
    let db = db.to_str().unwrap();
    vec![
        v(&["run", "--size", "1M", "--ios", "10", "--json", dest]),
        v(&["precondition", dir.join("data.img").to_str().unwrap(), "--size", "1M", "--json", dest]),
        v(&["results", "--db", db, "--csv", dest]),
        v(&["results", "--db", db, "--json", dest]),
        v(&["report", "--db", db, "--out", out_dir]),
    ]
}

#[test]
fn outputs_into_a_block_device_or_a_link_to_one_are_refused_before_any_work() {
    let Some((d, lo)) = db_and_loop("outputs_into_a_block_device_or_a_link_to_one_are_refused_before_any_work", 4 << 20, false) else {
        return;
    };
    let link = d.path().join("out.json");
    std::os::unix::fs::symlink(&lo.dev, &link).unwrap();
    let report = d.path().join("report");
    std::fs::create_dir(&report).unwrap();
    std::os::unix::fs::symlink(&lo.dev, report.join("report.html")).unwrap();
    let before = digest(&lo.dev);
    let target = digest(d.path().join("data.img").to_str().unwrap());
    let scratch = tempdir();
    for dest in [lo.dev.as_str(), link.to_str().unwrap()] {
        for args in output_commands(dest, d.path(), report.to_str().unwrap()) {
            let r = iolab_in(scratch.path(), &args);
            let line = r.assert_usage_error();
            assert!(line.contains("block device"), "{}", r.describe());
            assert!(r.stdout.is_empty(), "work was done before the refusal:\n{}", r.describe());
            assert_eq!(digest(&lo.dev), before, "{} changed:\n{}", lo.dev, r.describe());
            assert!(entries(scratch.path()).is_empty(), "a temporary target was made: {:?}", entries(scratch.path()));
        }
    }
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
    assert_eq!(digest(d.path().join("data.img").to_str().unwrap()), target, "precondition wrote its target");
}

#[test]
fn exports_onto_the_device_of_a_mounted_filesystem_are_refused() {
    let Some((d, lo)) = db_and_loop("exports_onto_the_device_of_a_mounted_filesystem_are_refused", 16 << 20, true) else { return };
    let db = d.path().join("iolab.db");
    // Read-only, so the file system itself does not change the bytes while the test looks.
    let _m = mount(&["-o", "ro", &lo.dev], &d.path().join("mnt"));
    let before = digest(&lo.dev);
    for flag in ["--csv", "--json"] {
        let r = iolab(&["results", "--db", db.to_str().unwrap(), flag, &lo.dev]);
        assert!(r.assert_usage_error().contains("block device"), "{}", r.describe());
    }
    assert_eq!(digest(&lo.dev), before);
}

#[test]
fn dev_full_and_an_empty_name_are_refused_before_any_work_and_dev_null_is_written() {
    let d = tempdir();
    let db = d.path().join("iolab.db");
    make_db(d.path(), &db);
    let scratch = tempdir();
    for dest in ["/dev/full", ""] {
        for args in output_commands(dest, d.path(), "/dev/full").into_iter().filter(|a| a[0] != "report" || dest == "/dev/full") {
            let r = iolab_in(scratch.path(), &args);
            let line = r.assert_usage_error();
            assert!(line.contains(if dest.is_empty() { "empty" } else { "character device (1:7)" }), "{}", r.describe());
            assert!(r.stdout.is_empty(), "work was done before the refusal:\n{}", r.describe());
            assert!(entries(scratch.path()).is_empty(), "a temporary target was made: {:?}", entries(scratch.path()));
        }
    }
    assert_eq!(std::fs::read(d.path().join("data.img")).unwrap(), vec![0x5au8; 1 << 20], "precondition wrote its target");
    iolab_in(scratch.path(), &["run", "--size", "1M", "--ios", "10", "--json", "/dev/null"]).assert_ok();
    iolab(&["results", "--db", db.to_str().unwrap(), "--csv", "/dev/null"]).assert_ok();
}

/// Files SQLite would put beside a database.
fn beside(path: &str) -> Vec<String> {
    ["-wal", "-shm", "-journal"].iter().map(|s| format!("{path}{s}")).filter(|p| Path::new(p).exists()).collect()
}

/// Every command that opens a database (readers and a sweep, of `make_db`'s plan in `dir`),
/// on `db`: each refused with one line that says `why`, and `after` checks what it left.
fn each_refuses(db: &str, dir: &Path, why: &str, after: &dyn Fn(&Run)) {
    let (plan, out) = (dir.join("plan.toml"), dir.join("report"));
    let (plan, out) = (plan.to_str().unwrap(), out.to_str().unwrap());
    for args in [
        vec!["results", "--db", db],
        vec!["results", "--db", db, "--sweeps"],
        vec!["report", "--db", db, "--out", out],
        vec!["compare", "k", "--db", db, "--db-b", db],
        vec!["sweep", plan, "--db", db],
    ] {
        let r = iolab_bounded(&args);
        assert!(r.assert_usage_error().contains(why), "{}", r.describe());
        after(&r);
    }
    assert!(!dir.join("report").exists());
}

#[test]
fn a_block_device_as_database_is_refused_and_left_unchanged() {
    let Some((d, lo)) = db_and_loop("a_block_device_as_database_is_refused_and_left_unchanged", 4 << 20, false) else { return };
    let before = digest(&lo.dev);
    let link = d.path().join("link.db");
    std::os::unix::fs::symlink(&lo.dev, &link).unwrap();
    for db in [lo.dev.as_str(), link.to_str().unwrap()] {
        each_refuses(db, d.path(), "is a block device", &|r| {
            assert_eq!(digest(&lo.dev), before, "{} changed:\n{}", lo.dev, r.describe());
            assert!(beside(&lo.dev).is_empty() && beside(db).is_empty(), "created {:?}:\n{}", beside(db), r.describe());
        });
    }
}

#[test]
fn dev_null_a_fifo_and_a_directory_as_database_are_refused_with_nothing_created_beside_them() {
    let d = tempdir();
    make_db(d.path(), &d.path().join("iolab.db"));
    let fifo = d.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let dir = d.path().join("dir");
    std::fs::create_dir(&dir).unwrap();
    let left = beside("/dev/null");
    if !left.is_empty() {
        skip(
            "dev_null_a_fifo_and_a_directory_as_database_are_refused_with_nothing_created_beside_them",
            &format!("for /dev/null: {left:?} exist already (an older iolab left them), so creating them cannot be seen"),
        );
    }
    for (db, what) in [("/dev/null", "character device (1:3)"), (fifo.to_str().unwrap(), "FIFO"), (dir.to_str().unwrap(), "directory")] {
        let expected = if db == "/dev/null" { left.clone() } else { vec![] };
        each_refuses(db, d.path(), what, &|r| assert_eq!(beside(db), expected, "{}", r.describe()));
    }
    assert!(entries(&dir).is_empty());
}

#[test]
fn a_database_iolab_refuses_is_left_byte_for_byte() {
    let d = tempdir();
    make_db(d.path(), &d.path().join("iolab.db"));
    let newer = d.path().join("newer.db");
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch("CREATE TABLE meta(key, value); INSERT INTO meta VALUES ('schema_version', '99'); PRAGMA user_version = 99;")
        .unwrap();
    let foreign = d.path().join("foreign.db");
    rusqlite::Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);").unwrap();
    let junk = d.path().join("junk.db");
    std::fs::write(&junk, b"not a database, only text\n").unwrap();
    for (db, why) in [(&newer, "newer than this iolab"), (&foreign, "not an iolab results database"), (&junk, "not a SQLite file")] {
        let db = db.to_str().unwrap();
        let before = std::fs::read(db).unwrap();
        each_refuses(db, d.path(), why, &|r| {
            // A rollback-journal file stays one: bytes 18 and 19 of the header would become 2 in WAL mode.
            assert!(std::fs::read(db).unwrap() == before, "{db} changed:\n{}", r.describe());
            assert!(beside(db).is_empty(), "created {:?}:\n{}", beside(db), r.describe());
        });
    }
}

/// `iolab ARGS` as user nobody.
fn as_nobody(args: &[&str]) -> Run {
    let out = Command::new("setpriv").args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", BIN]).args(args).output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
        args: args.iter().map(|a| a.to_string()).collect(),
    }
}

/// results, report and compare all read `db` (report into `out`), as `run` runs them.
fn readers_work(db: &Path, out: &Path, run: &dyn Fn(&[&str]) -> Run) {
    let key = first_key(db);
    let db = db.to_str().unwrap();
    let r = run(&["results", "--db", db]);
    assert!(r.code == 0 && r.stdout.contains("2 runs"), "{}", r.describe());
    let r = run(&["results", "--db", db, "--csv", "-"]);
    assert!(r.code == 0 && r.stdout.lines().count() == 3, "{}", r.describe());
    run(&["report", "--db", db, "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    let r = run(&["compare", &key, "--db", db, "--db-b", db]);
    assert!(r.code == 0 && r.stdout.contains("Welch"), "{}", r.describe());
}

#[test]
fn readers_work_for_another_user_on_a_0644_database() {
    if !is_root() || !Command::new("setpriv").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return skip("readers_work_for_another_user_on_a_0644_database", "needs root and setpriv to run as nobody");
    }
    let d = tempdir();
    use std::os::unix::fs::PermissionsExt;
    let db = d.path().join("iolab.db");
    make_db(d.path(), &db);
    // The database's directory is root's: nobody can create -shm or -wal there.
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = d.path().join("report");
    std::fs::create_dir(&out).unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o777)).unwrap();
    let before = std::fs::read(&db).unwrap();
    readers_work(&db, &out, &as_nobody);
    assert!(std::fs::read(&db).unwrap() == before);
    assert!(beside(db.to_str().unwrap()).is_empty());
}

#[test]
fn readers_work_on_a_read_only_mount() {
    let Some((d, lo)) = db_and_loop("readers_work_on_a_read_only_mount", 16 << 20, true) else { return };
    let mnt = d.path().join("mnt");
    {
        let _rw = mount(&[&lo.dev], &mnt);
        make_db(d.path(), &mnt.join("iolab.db"));
    }
    let _ro = mount(&["-o", "ro", &lo.dev], &mnt);
    let before = digest(&lo.dev);
    let db = mnt.join("iolab.db");
    assert!(beside(db.to_str().unwrap()).is_empty());
    readers_work(&db, &d.path().join("report"), &|a: &[&str]| iolab(a));
    assert_eq!(digest(&lo.dev), before);
}

#[test]
fn results_lists_skipped_planned_runs_with_their_reason() {
    let d = tempdir();
    let db = d.path().join("iolab.db");
    {
        let mut s = Store::open(&db).unwrap();
        let spec = |i: &str| serde_json::json!({"interface": i, "rw": "randread", "bs": 4096, "qd": 32, "threads": 1});
        let runs = vec![(0, 0, "io_uring poll".to_string(), spec("io_uring")), (1, 0, "libaio".to_string(), spec("libaio"))];
        let sweep = s.create_sweep("skips", "", "h", 1, &runs).unwrap();
        let first = s.planned_runs(sweep).unwrap()[0].id;
        s.record_skip(first, "cannot poll: io_poll is 0").unwrap();
    }
    let db = db.to_str().unwrap();
    let r = iolab(&["results", "--db", db, "--status", "skipped"]).assert_ok().stdout.clone();
    assert!(r.contains("io_uring poll") && r.contains("cannot poll: io_poll is 0") && r.contains("1 skipped runs"), "{r}");
    let r = iolab(&["results", "--db", db, "--status", "skipped", "--interface", "libaio"]).assert_ok().stdout.clone();
    assert!(r.contains("0 skipped runs"), "{r}");
    let r = iolab(&["results", "--db", db, "--status", "planned"]).assert_ok().stdout.clone();
    assert!(r.contains("libaio") && r.contains("1 planned runs"), "{r}");
    let r = iolab(&["results", "--db", db]).assert_ok().stdout.clone();
    assert!(r.contains("1 planned runs skipped"), "{r}");
    let r = iolab(&["results", "--db", db, "--status", "skipped", "--csv", "-"]);
    assert!(r.assert_usage_error().contains("never made"), "{}", r.describe());
}

/// A shared results folder (sticky, world-writable, like /tmp) and a file only root may read,
/// outside it, for another user to aim a link at.
fn shared_and_secret(d: &Path) -> (PathBuf, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let shared = d.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let private = d.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let secret = private.join("secret");
    std::fs::write(&secret, "root only\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    (shared, secret)
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_link_planted_in_a_shared_directory_is_refused_and_its_target_left_alone() {
    let d = tempdir();
    make_db(d.path(), &d.path().join("iolab.db"));
    let (shared, secret) = shared_and_secret(d.path());
    let link = shared.join("out.csv");
    std::os::unix::fs::symlink(&secret, &link).unwrap();
    // A report directory that is a link to another directory.
    let victim = d.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("keep.svg"), "mine").unwrap();
    let report = shared.join("report");
    std::os::unix::fs::symlink(&victim, &report).unwrap();
    let scratch = tempdir();
    for args in output_commands(link.to_str().unwrap(), d.path(), report.to_str().unwrap()) {
        let r = iolab_in(scratch.path(), &args);
        let line = r.assert_usage_error();
        assert!(line.contains("symbolic link"), "{}", r.describe());
        assert!(r.stdout.is_empty(), "work was done before the refusal:\n{}", r.describe());
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "root only\n", "{}", r.describe());
        assert_eq!(mode(&secret), 0o600, "{}", r.describe());
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(entries(&victim), vec!["keep.svg".to_string()], "{}", r.describe());
        assert_eq!(entries(&shared).len(), 2, "{:?}", entries(&shared));
    }
}

#[test]
fn report_out_refuses_a_planted_figures_link_and_a_manifest_it_did_not_write() {
    let d = tempdir();
    let db = d.path().join("iolab.db");
    sweep_named(d.path(), &db, "shared");
    let db = db.to_str().unwrap();
    let victim = d.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("x.svg"), "mine").unwrap();
    let out = d.path().join("report");
    std::fs::create_dir(&out).unwrap();
    let manifest = out.join(".iolab-report-files");
    std::fs::write(&manifest, "../victim/x.svg\nfigures/x.svg\nfigures/../../victim/x.svg\ntables/x.csv\n").unwrap();
    for sub in ["figures", "tables"] {
        std::os::unix::fs::symlink(&victim, out.join(sub)).unwrap();
        let r = iolab(&["report", "--db", db, "--out", out.to_str().unwrap()]);
        let line = r.assert_usage_error();
        assert!(line.contains(sub) && line.contains("symbolic link"), "{}", r.describe());
        assert_eq!(entries(&victim), vec!["x.svg".to_string()], "written through the link:\n{}", r.describe());
        assert_eq!(std::fs::read_to_string(victim.join("x.svg")).unwrap(), "mine");
        assert!(!out.join("report.html").exists(), "written before the refusal:\n{}", r.describe());
        std::fs::remove_file(out.join(sub)).unwrap();
    }
    // Written by this user, the manifest's names that lead out of figures/ and tables/ are ignored.
    iolab(&["report", "--db", db, "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    assert_eq!(std::fs::read_to_string(victim.join("x.svg")).unwrap(), "mine");
    if !is_root() || !Command::new("setpriv").arg("--version").output().is_ok_and(|o| o.status.success()) {
        return skip(
            "report_out_refuses_a_planted_figures_link_and_a_manifest_it_did_not_write",
            "needs root to plant another user's manifest",
        );
    }
    // Another user's manifest, or one that is a link, removes nothing.
    let keep = out.join("figures/keep.svg");
    std::fs::write(&keep, "kept").unwrap();
    let planted = d.path().join("planted");
    std::fs::write(&planted, "figures/keep.svg\n").unwrap();
    std::fs::rename(&planted, &manifest).unwrap();
    let chown = |p: &Path| assert!(Command::new("chown").args(["nobody:nogroup"]).arg(p).status().unwrap().success());
    chown(&manifest);
    iolab(&["report", "--db", db, "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    assert!(keep.exists(), "a manifest of another user's removed a file");
    std::fs::write(&planted, "figures/keep.svg\n").unwrap();
    std::fs::remove_file(&manifest).unwrap();
    std::os::unix::fs::symlink(&planted, &manifest).unwrap();
    iolab(&["report", "--db", db, "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    assert!(keep.exists(), "a manifest that is a link removed a file");
    // In a directory of another user's, not even iolab's own manifest is trusted.
    std::fs::write(out.join(".iolab-report-files"), "figures/keep.svg\n").unwrap();
    chown(&out);
    iolab(&["report", "--db", db, "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    assert!(keep.exists(), "a manifest in another user's directory removed a file");
}

/// The host name of every run in `db` set to `host` (as a database merged from elsewhere has it).
fn set_host(db: &Path, host: &str) {
    rusqlite::Connection::open(db).unwrap().execute("UPDATE runs SET hostname = ?1", [host]).unwrap();
}

#[test]
fn hostile_text_in_the_database_cannot_break_an_svg_or_a_csv() {
    let d = tempdir();
    let db = d.path().join("iolab.db");
    sweep_named(d.path(), &db, "merged");
    let host = "=HYPERLINK(\"http://x\")--->\u{1}\u{1b}<script>alert(1)</script>-";
    set_host(&db, host);
    let out = d.path().join("report");
    iolab(&["report", "--db", db.to_str().unwrap(), "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    let svgs: Vec<PathBuf> = std::fs::read_dir(out.join("figures")).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!svgs.is_empty());
    for p in svgs {
        let svg = std::fs::read_to_string(&p).unwrap();
        let body = svg.split_once("<!--").map(|(_, rest)| rest).unwrap_or_else(|| panic!("no provenance in {}", p.display()));
        let (comment, after) = body.split_once("-->").unwrap();
        assert!(comment.contains("HYPERLINK") && !comment.contains("--"), "{}: {comment:?}", p.display());
        assert!(after.starts_with("\n<svg") && !after.contains("<!--"), "{}: the comment ended early: {svg}", p.display());
        assert!(!after.contains("<script"), "{}: {svg}", p.display());
        let bad: Vec<char> = svg.chars().filter(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r')).collect();
        assert!(bad.is_empty(), "{}: characters XML forbids: {bad:?}", p.display());
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!html.contains("<script>alert") && !html.contains('\u{1}'));
    let r = iolab(&["results", "--db", db.to_str().unwrap(), "--csv", "-"]).assert_ok().stdout.clone();
    let header: Vec<&str> = r.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "hostname").unwrap();
    let row = r.lines().nth(1).unwrap();
    assert!(row.contains("\"'=HYPERLINK(\"\"http://x\"\")"), "the host name is not neutralised in column {col}: {row}");
    assert!(!row.contains(",=") && !row.contains(",\"="), "{row}");
}

/// A sweep named `name` into `db`: libaio at queue depths 1 and 2 (a figure against qd).
fn sweep_named(dir: &Path, db: &Path, name: &str) {
    let data = dir.join("data.img");
    if !data.exists() {
        std::fs::write(&data, vec![0x5au8; 1 << 20]).unwrap();
    }
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"{name}\"\nseed = 5\nios = 50\ntargets = [\"{}\"]\nreplicates = 2\n[matrix]\ninterface = [\"libaio\"]\nqd = [1, 2]\n",
            data.display()
        ),
    )
    .unwrap();
    iolab(&["sweep", plan.to_str().unwrap(), "--db", db.to_str().unwrap(), "--quiet"]).assert_ok();
}

#[test]
fn long_plan_names_give_short_distinct_report_files() {
    let d = tempdir();
    let db = d.path().join("iolab.db");
    let long = "x".repeat(107);
    // The longest a plan name may be (200 characters), twice, alike in their first 199.
    let longer = format!("{}a", "y".repeat(199));
    let twin = format!("{}b", "y".repeat(199));
    for name in [&long, &longer, &twin] {
        sweep_named(d.path(), &db, name);
    }
    let out = d.path().join("report");
    let r = iolab(&["report", "--db", db.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    r.assert_ok();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let mut names = Vec::new();
    for sub in ["figures", "tables"] {
        for e in std::fs::read_dir(out.join(sub)).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            assert!(name.len() <= 100, "{sub}/{name} is {} bytes", name.len());
            assert!(name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)), "{sub}/{name}");
            assert!(r.stdout.contains(&format!("{sub}/{name}")) && html.contains(&format!("{sub}/{name}")), "{sub}/{name} not listed");
            names.push(format!("{sub}/{name}"));
        }
    }
    // Figures and tables of each sweep, none overwriting another's file.
    let listed = r.stdout.lines().filter(|l| l.contains("/figures/") || l.contains("/tables/")).count();
    assert_eq!(names.len(), listed, "{names:?}\n{}", r.describe());
    assert!(names.iter().filter(|n| n.ends_with(".csv")).count() >= 3, "{names:?}");
    assert!(names.iter().filter(|n| n.ends_with(".svg")).count() >= 3, "{names:?}");
}

#[test]
fn json_into_a_fifo_nobody_reads_returns_with_one_line() {
    let d = tempdir();
    let db = d.path().join("iolab.db");
    make_db(d.path(), &db);
    let fifo = d.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let start = Instant::now();
    let r = iolab_bounded(&["results", "--db", db.to_str().unwrap(), "--json", fifo.to_str().unwrap()]);
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}:\n{}", start.elapsed(), r.describe());
    assert!(r.assert_usage_error().contains("FIFO"), "{}", r.describe());
}

/// An output refused is bad input whichever command writes it: `export fio -o FIFO` with no
/// reader said so with exit 1 (a failed command) where `results --json FIFO` said 2.
#[test]
fn export_into_a_fifo_nobody_reads_is_bad_input_like_results() {
    let d = tempdir();
    let plan = d.path().join("p.toml");
    std::fs::write(&plan, "name = \"x\"\nios = 100\n[matrix]\ninterface = [\"null\"]\nrw = [\"randread\"]\nbs = [\"4k\"]\nqd = [1]\n")
        .unwrap();
    let fifo = d.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let start = Instant::now();
    let r = iolab_bounded(&["export", "fio", plan.to_str().unwrap(), "-o", fifo.to_str().unwrap()]);
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}:\n{}", start.elapsed(), r.describe());
    assert!(r.assert_usage_error().contains("FIFO"), "{}", r.describe());
}
