//! System settings: apply, verify, restore — against a fake sysfs root in a temp dir, and on a
//! real loop device (needs root and losetup; skipped with the reason on stderr otherwise).
use iolab::settings::{Change, Setting, Settings};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fake sysfs: block/loop9 and loop8 queues, two CPUs with cpufreq.
struct Fake {
    dir: tempfile::TempDir,
}

const ORIG: &[(&str, &str)] = &[
    ("scheduler", "[none] mq-deadline kyber"),
    ("nomerges", "0"),
    ("io_poll", "0"),
    ("io_poll_delay", "-1"),
    ("read_ahead_kb", "128"),
    ("wbt_lat_usec", "2000"),
    ("nr_requests", "256"),
];

impl Fake {
    fn new() -> Fake {
        let dir = tempfile::tempdir().unwrap();
        for dev in ["loop9", "loop8"] {
            let q = dir.path().join("sys/block").join(dev).join("queue");
            fs::create_dir_all(&q).unwrap();
            for (f, v) in ORIG {
                fs::write(q.join(f), format!("{v}\n")).unwrap();
            }
        }
        for cpu in ["cpu0", "cpu1"] {
            let c = dir.path().join("sys/devices/system/cpu").join(cpu).join("cpufreq");
            fs::create_dir_all(&c).unwrap();
            fs::write(c.join("scaling_governor"), "schedutil\n").unwrap();
            fs::write(c.join("scaling_available_governors"), "performance powersave schedutil\n").unwrap();
        }
        // Not a CPU: must be ignored.
        fs::create_dir_all(dir.path().join("sys/devices/system/cpu/cpufreq")).unwrap();
        Fake { dir }
    }
    fn root(&self) -> PathBuf {
        self.dir.path().join("sys")
    }
    fn journal(&self) -> PathBuf {
        self.dir.path().join("state/iolab/settings-journal.json")
    }
    fn settings(&self) -> Settings {
        Settings::new(self.root(), self.journal())
    }
    fn q(&self, dev: &str, f: &str) -> PathBuf {
        self.root().join("block").join(dev).join("queue").join(f)
    }
    fn read(&self, dev: &str, f: &str) -> String {
        fs::read_to_string(self.q(dev, f)).unwrap().trim().to_string()
    }
    fn gov(&self, cpu: &str) -> String {
        let p = self.root().join("devices/system/cpu").join(cpu).join("cpufreq/scaling_governor");
        fs::read_to_string(p).unwrap().trim().to_string()
    }
    /// Plain files don't act like the scheduler attribute: writing "kyber" leaves "kyber".
    /// Reads of the fake after a restore see just the name; compare by selected name.
    fn sched(&self, dev: &str) -> String {
        iolab::settings::parse_scheduler(&self.read(dev, "scheduler")).0.unwrap()
    }
    fn assert_originals(&self) {
        for dev in ["loop9", "loop8"] {
            assert_eq!(self.sched(dev), "none");
            for (f, v) in &ORIG[1..] {
                assert_eq!(&self.read(dev, f), v, "{dev} {f}");
            }
        }
        assert_eq!(self.gov("cpu0"), "schedutil");
        assert_eq!(self.gov("cpu1"), "schedutil");
    }
}

fn dev(s: Setting, v: &str) -> Change {
    Change::new(s, Some("loop9"), v)
}

fn all_changes() -> Vec<Change> {
    vec![
        dev(Setting::Scheduler, "kyber"),
        dev(Setting::Nomerges, "2"),
        dev(Setting::IoPollDelay, "0"),
        dev(Setting::ReadAheadKb, "4096"),
        dev(Setting::WbtLatUsec, "0"),
        Change::new(Setting::Governor, None, "performance"),
    ]
}

#[test]
fn fake_apply_then_drop_restores_originals() {
    let f = Fake::new();
    let s = f.settings();
    for c in all_changes() {
        s.check(&c).unwrap();
    }
    let g = s.apply(&all_changes()).unwrap();
    assert_eq!(f.sched("loop9"), "kyber");
    assert_eq!(f.read("loop9", "nomerges"), "2");
    assert_eq!(f.read("loop9", "io_poll_delay"), "0");
    assert_eq!(f.read("loop9", "read_ahead_kb"), "4096");
    assert_eq!(f.read("loop9", "wbt_lat_usec"), "0");
    assert_eq!(f.gov("cpu0"), "performance");
    assert_eq!(f.gov("cpu1"), "performance");
    assert_eq!(f.read("loop8", "nomerges"), "0", "other device untouched");
    assert_eq!(g.changes().len(), 7, "{:?}", g.changes());
    assert!(g.changes().contains(&"loop9 scheduler: none -> kyber".to_string()));

    // The journal holds every original while the guard lives.
    let j: serde_json::Value = serde_json::from_str(&fs::read_to_string(f.journal()).unwrap()).unwrap();
    assert_eq!(j["pid"], std::process::id());
    assert!(j["pid_start_ticks"].is_u64());
    let entries = j["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 7);
    assert_eq!(entries[0]["setting"], "scheduler");
    assert_eq!(entries[0]["original"], "none");
    assert_eq!(entries[0]["new"], "kyber");
    assert_eq!(entries[0]["device"], "loop9");
    assert!(entries[0]["path"].as_str().unwrap().ends_with("block/loop9/queue/scheduler"));
    assert_eq!(entries[3]["original"], "128");
    assert_eq!(entries[5]["target"], "cpu0");
    assert!(entries[5]["device"].is_null());

    drop(g);
    f.assert_originals();
    assert!(!f.journal().exists(), "journal cleared after restore");
    // Nothing left for `iolab restore`.
    assert_eq!(s.restore_journal().unwrap(), Vec::<String>::new());
}

#[test]
fn fake_explicit_restore_reports_lines() {
    let f = Fake::new();
    let s = f.settings();
    let g = s.apply(&[dev(Setting::ReadAheadKb, "256"), dev(Setting::Nomerges, "1")]).unwrap();
    let lines = g.restore().unwrap();
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().any(|l| l == "loop9 read_ahead_kb: 256 -> 128 (restored)"), "{lines:?}");
    f.assert_originals();
    assert!(!f.journal().exists());
}

#[test]
fn fake_failure_midway_rolls_back_what_was_applied() {
    let f = Fake::new();
    // nomerges of loop8 "exists and is writable" but every write to it fails (ENOSPC).
    let p = f.q("loop8", "nomerges");
    fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink("/dev/full", &p).unwrap();
    let s = f.settings();
    let changes = [
        dev(Setting::ReadAheadKb, "512"),
        dev(Setting::Scheduler, "mq-deadline"),
        Change::new(Setting::Nomerges, Some("loop8"), "1"),
        dev(Setting::WbtLatUsec, "0"),
    ];
    let err = s.apply(&changes).unwrap_err();
    assert!(err.contains("refused") && err.contains("rolled back the 2 change(s)"), "{err}");
    assert!(!err.contains('\n'));
    assert_eq!(f.read("loop9", "read_ahead_kb"), "128");
    assert_eq!(f.sched("loop9"), "none");
    assert_eq!(f.read("loop9", "wbt_lat_usec"), "2000", "later change never applied");
    // The entry whose rollback failed (/dev/full) stays for `iolab restore`; the rest are gone.
    let j: serde_json::Value = serde_json::from_str(&fs::read_to_string(f.journal()).unwrap()).unwrap();
    let entries = j["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 1, "{j}");
    assert_eq!(entries[0]["device"], "loop8");
}

#[test]
fn fake_kernel_ignoring_a_write_is_an_error_and_rolls_back() {
    let f = Fake::new();
    // A file that reads back something else than what was written, like io_poll_delay on new
    // kernels: /dev/null swallows the write and reads back nothing.
    let p = f.q("loop9", "io_poll_delay");
    fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink("/dev/null", &p).unwrap();
    let s = f.settings();
    let err = s.apply(&[dev(Setting::Nomerges, "2"), dev(Setting::IoPollDelay, "5")]).unwrap_err();
    assert!(err.contains("the kernel ignored io_poll_delay=5 on loop9"), "{err}");
    assert_eq!(f.read("loop9", "nomerges"), "0");
}

#[test]
fn fake_killed_process_is_undone_by_restore_journal() {
    let f = Fake::new();
    let g = f.settings().apply(&all_changes()).unwrap();
    // The process "dies": no Drop.
    std::mem::forget(g);
    assert_eq!(f.sched("loop9"), "kyber");
    assert!(f.journal().exists());

    let fresh = f.settings();
    let lines = fresh.restore_journal().unwrap();
    assert_eq!(lines.len(), 7, "{lines:?}");
    f.assert_originals();
    assert!(!f.journal().exists());
    // Idempotent.
    assert!(fresh.restore_journal().unwrap().is_empty());
    f.assert_originals();
}

#[test]
fn fake_journal_of_dead_process_blocks_apply_until_restored() {
    let f = Fake::new();
    let g = f.settings().apply(&[dev(Setting::ReadAheadKb, "1024")]).unwrap();
    std::mem::forget(g);
    // Pretend the owner was another process that has died: a pid that cannot exist.
    let text = fs::read_to_string(f.journal()).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
    j["pid"] = serde_json::json!(i32::MAX as u32 - 1);
    fs::write(f.journal(), serde_json::to_string(&j).unwrap()).unwrap();

    let s = f.settings();
    let err = s.apply(&[dev(Setting::Nomerges, "1")]).unwrap_err();
    assert!(err.contains("a previous iolab run") && err.contains("iolab restore"), "{err}");
    assert_eq!(f.read("loop9", "nomerges"), "0", "nothing changed");

    let lines = s.restore_journal().unwrap();
    assert_eq!(lines, vec!["loop9 read_ahead_kb: 1024 -> 128 (restored)".to_string()]);
    f.assert_originals();
    let g = s.apply(&[dev(Setting::Nomerges, "1")]).unwrap();
    assert_eq!(f.read("loop9", "nomerges"), "1");
    drop(g);
    f.assert_originals();
}

#[test]
fn fake_live_other_owner_is_refused() {
    let f = Fake::new();
    let g = f.settings().apply(&[dev(Setting::ReadAheadKb, "1024")]).unwrap();
    // Another live process (our parent, pid 1 would do too) owns the journal.
    let text = fs::read_to_string(f.journal()).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
    j["pid"] = serde_json::json!(1);
    j["pid_start_ticks"] = serde_json::Value::Null;
    fs::write(f.journal(), serde_json::to_string(&j).unwrap()).unwrap();
    let s = f.settings();
    let err = s.apply(&[dev(Setting::Nomerges, "1")]).unwrap_err();
    assert!(err.contains("another iolab (pid 1)"), "{err}");
    let err = s.restore_journal().unwrap_err();
    assert!(err.contains("pid 1 is running"), "{err}");
    // Our guard still restores its own change.
    drop(g);
    f.assert_originals();
}

#[test]
fn fake_two_guards_in_one_process_own_their_entries() {
    let f = Fake::new();
    let s = f.settings();
    let a = s.apply(&[dev(Setting::ReadAheadKb, "1024")]).unwrap();
    let b = s.apply(&[Change::new(Setting::Governor, None, "powersave")]).unwrap();
    let err = s.apply(&[dev(Setting::ReadAheadKb, "64")]).unwrap_err();
    assert!(err.contains("already changed by this iolab"), "{err}");
    drop(a);
    assert_eq!(f.read("loop9", "read_ahead_kb"), "128");
    assert_eq!(f.gov("cpu1"), "powersave");
    let j: serde_json::Value = serde_json::from_str(&fs::read_to_string(f.journal()).unwrap()).unwrap();
    assert_eq!(j["entries"].as_array().unwrap().len(), 2, "only b's governor entries left");
    drop(b);
    f.assert_originals();
    assert!(!f.journal().exists());
}

#[test]
fn fake_device_gone_entry_is_reported_and_dropped() {
    let f = Fake::new();
    let g = f.settings().apply(&[Change::new(Setting::Nomerges, Some("loop8"), "2"), dev(Setting::Nomerges, "1")]).unwrap();
    std::mem::forget(g);
    fs::remove_dir_all(f.root().join("block/loop8")).unwrap();
    let lines = f.settings().restore_journal().unwrap();
    assert!(lines.iter().any(|l| l.contains("loop8 nomerges: loop8 is gone")), "{lines:?}");
    assert_eq!(f.read("loop9", "nomerges"), "0");
    assert!(!f.journal().exists());
}

#[test]
fn fake_bad_changes_are_rejected_in_one_line() {
    let f = Fake::new();
    let s = f.settings();
    let cases: Vec<(Change, &str)> = vec![
        (dev(Setting::Scheduler, "bfq"), "not available for loop9 (available: none mq-deadline kyber)"),
        (dev(Setting::Scheduler, ""), "needs a value"),
        (dev(Setting::Nomerges, "3"), "nomerges must be 0"),
        (dev(Setting::IoPollDelay, "-2"), "io_poll_delay must be"),
        (dev(Setting::ReadAheadKb, "5"), "multiple of"),
        (dev(Setting::ReadAheadKb, "lots"), "read_ahead_kb must be"),
        (dev(Setting::WbtLatUsec, "x"), "wbt_lat_usec must be"),
        (Change::new(Setting::Governor, None, "ondemand"), "governor ondemand is not available on cpu0"),
        (Change::new(Setting::Nomerges, Some("sda"), "1"), "no block device sda"),
        (Change::new(Setting::Nomerges, Some("../x"), "1"), "not a block device name"),
        (Change::new(Setting::Nomerges, None, "1"), "needs a block device"),
    ];
    for (c, want) in cases {
        let err = s.check(&c).unwrap_err();
        assert!(err.contains(want), "{c:?}: {err}");
        assert!(!err.contains('\n'), "{err}");
        // apply refuses too, before recording anything.
        assert!(s.apply(&[dev(Setting::Nomerges, "2"), c]).is_err());
        assert!(!f.journal().exists());
        f.assert_originals();
    }
    // A file the driver does not offer, and a read-only one.
    fs::remove_file(f.q("loop9", "wbt_lat_usec")).unwrap();
    let err = s.check(&dev(Setting::WbtLatUsec, "0")).unwrap_err();
    assert!(err.contains("loop9 has no queue/wbt_lat_usec"), "{err}");
    let p = f.q("loop9", "nomerges");
    fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    let err = s.check(&dev(Setting::Nomerges, "1")).unwrap_err();
    assert!(err.contains("read-only"), "{err}");
    // No cpufreq at all.
    fs::remove_dir_all(f.root().join("devices/system/cpu/cpu0")).unwrap();
    fs::remove_dir_all(f.root().join("devices/system/cpu/cpu1")).unwrap();
    let err = s.check(&Change::new(Setting::Governor, None, "performance")).unwrap_err();
    assert!(err.contains("no CPU frequency scaling"), "{err}");
    // Same setting twice in one apply.
    let err = s.apply(&[dev(Setting::ReadAheadKb, "8"), dev(Setting::ReadAheadKb, "16")]).unwrap_err();
    assert!(err.contains("changed twice"), "{err}");
}

#[test]
fn fake_damaged_journal_is_reported() {
    let f = Fake::new();
    fs::create_dir_all(f.journal().parent().unwrap()).unwrap();
    fs::write(f.journal(), "{ not json").unwrap();
    let err = f.settings().restore_journal().unwrap_err();
    assert!(err.contains("damaged") && !err.contains('\n'), "{err}");
    assert!(f.settings().apply(&[dev(Setting::Nomerges, "1")]).is_err());
    assert_eq!(f.read("loop9", "nomerges"), "0");
}

#[test]
fn fake_snapshot_lists_everything() {
    let f = Fake::new();
    fs::remove_file(f.q("loop9", "wbt_lat_usec")).unwrap();
    let v = f.settings().snapshot("loop9");
    assert_eq!(v["scheduler"], "none");
    assert_eq!(v["schedulers_available"], serde_json::json!(["none", "mq-deadline", "kyber"]));
    assert_eq!(v["nomerges"], 0);
    assert_eq!(v["io_poll"], 0);
    assert_eq!(v["io_poll_delay"], -1);
    assert_eq!(v["read_ahead_kb"], 128);
    assert!(v["wbt_lat_usec"].is_null());
    assert_eq!(v["nr_requests"], 256);
    assert_eq!(v["governor"], "schedutil");
    assert_eq!(v["governors"]["cpu1"], "schedutil");
    let none = f.settings().snapshot("nope");
    assert!(none["scheduler"].is_null() && none["nr_requests"].is_null());
}

#[test]
fn change_parse_and_setting_names() {
    let c = Change::parse("read_ahead_kb=256", Some("nvme0n1")).unwrap();
    assert_eq!(c, Change::new(Setting::ReadAheadKb, Some("nvme0n1"), "256"));
    let g = Change::parse("governor=performance", Some("nvme0n1")).unwrap();
    assert_eq!(g.device, None);
    assert!(Change::parse("scheduler", None).unwrap_err().contains("name=value"));
    assert!(Change::parse("bogus=1", None).unwrap_err().contains("unknown setting"));
    for s in Setting::ALL {
        assert_eq!(s.name().parse::<Setting>().unwrap(), s);
    }
}

// ---------------------------------------------------------------------------------------------
// A real loop device.

fn cannot_use_loops() -> Option<String> {
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root".into());
    }
    match Command::new("losetup").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        _ => return Some("losetup is not available".into()),
    }
    if !Path::new("/dev/loop-control").exists() {
        return Some("no /dev/loop-control".into());
    }
    None
}

/// A loop device over a temp file, detached on drop.
struct Loop {
    dev: String,
    _dir: tempfile::TempDir,
}

impl Loop {
    fn attach() -> Result<Loop, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let img = dir.path().join("img");
        fs::File::create(&img).and_then(|f| f.set_len(16 << 20)).map_err(|e| e.to_string())?;
        let out = Command::new("losetup").args(["-f", "--show"]).arg(&img).output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Loop { dev: String::from_utf8_lossy(&out.stdout).trim().to_string(), _dir: dir })
    }
    /// A loop device for `test`, or None after saying why it is skipped.
    fn for_test(test: &str) -> Option<Loop> {
        let l = match cannot_use_loops() {
            Some(why) => Err(why),
            None => Loop::attach().map_err(|e| format!("cannot attach a loop device: {e}")),
        };
        l.map_err(|why| eprintln!("SKIP {test}: {why}")).ok()
    }
    fn name(&self) -> &str {
        self.dev.trim_start_matches("/dev/")
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.dev).status();
    }
}

fn sys(dev: &str, f: &str) -> String {
    fs::read_to_string(format!("/sys/block/{dev}/queue/{f}")).unwrap().trim().to_string()
}

fn real_sched(dev: &str) -> (String, Vec<String>) {
    let (cur, all) = iolab::settings::parse_scheduler(&sys(dev, "scheduler"));
    (cur.unwrap(), all)
}

#[test]
fn real_loop_device_apply_and_restore() {
    let Some(lo) = Loop::for_test("real_loop_device_apply_and_restore") else { return };
    let dev = lo.name().to_string();
    let jdir = tempfile::tempdir().unwrap();
    let s = Settings::new("/sys".into(), jdir.path().join("journal.json"));

    let (sched0, avail) = real_sched(&dev);
    let ra0 = sys(&dev, "read_ahead_kb");
    let nm0 = sys(&dev, "nomerges");
    let wbt0 = fs::read_to_string(format!("/sys/block/{dev}/queue/wbt_lat_usec")).ok().map(|s| s.trim().to_string());
    let sched1 = avail.iter().find(|a| **a != sched0).cloned();
    let ra1 = if ra0 == "256" { "512" } else { "256" };
    let nm1 = if nm0 == "2" { "0" } else { "2" };

    let mut changes = vec![Change::new(Setting::ReadAheadKb, Some(&dev), ra1), Change::new(Setting::Nomerges, Some(&dev), nm1)];
    if let Some(s1) = &sched1 {
        changes.insert(0, Change::new(Setting::Scheduler, Some(&dev), s1.as_str()));
    } else {
        eprintln!("note: {dev} offers one scheduler only ({sched0}); not switching it");
    }
    let snap = s.snapshot(&dev);
    assert_eq!(snap["scheduler"], sched0.as_str());

    let g = s.apply(&changes).unwrap();
    if let Some(s1) = &sched1 {
        assert_eq!(&real_sched(&dev).0, s1);
    }
    assert_eq!(sys(&dev, "read_ahead_kb"), ra1);
    assert_eq!(sys(&dev, "nomerges"), nm1);
    assert_eq!(s.snapshot(&dev)["read_ahead_kb"], ra1.parse::<i64>().unwrap());

    let lines = g.restore().unwrap();
    assert_eq!(lines.len(), changes.len(), "{lines:?}");
    assert_eq!(real_sched(&dev).0, sched0);
    assert_eq!(sys(&dev, "read_ahead_kb"), ra0);
    assert_eq!(sys(&dev, "nomerges"), nm0);
    if let Some(w) = &wbt0 {
        assert_eq!(&sys(&dev, "wbt_lat_usec"), w, "scheduler switch round trip kept wbt");
    }
    assert!(!jdir.path().join("journal.json").exists());

    // Killed-process path on the real device.
    let g = s.apply(&[Change::new(Setting::ReadAheadKb, Some(&dev), ra1)]).unwrap();
    std::mem::forget(g);
    assert_eq!(sys(&dev, "read_ahead_kb"), ra1);
    let lines = Settings::new("/sys".into(), jdir.path().join("journal.json")).restore_journal().unwrap();
    assert_eq!(lines.len(), 1);
    assert_eq!(sys(&dev, "read_ahead_kb"), ra0);

    // io_poll_delay: a no-op on new kernels (reads back -1 whatever is written) — then the
    // error says the kernel ignored it and the change before it is rolled back.
    if Path::new(&format!("/sys/block/{dev}/queue/io_poll_delay")).exists() {
        let r = s.apply(&[Change::new(Setting::ReadAheadKb, Some(&dev), ra1), Change::new(Setting::IoPollDelay, Some(&dev), "5")]);
        match r {
            Ok(g) => drop(g),
            Err(e) => {
                assert!(e.contains("io_poll_delay"), "{e}");
                assert!(!e.contains('\n'));
                eprintln!("io_poll_delay on this kernel: {e}");
            }
        }
        assert_eq!(sys(&dev, "read_ahead_kb"), ra0);
        assert!(!jdir.path().join("journal.json").exists());
    }
}

// Aborts: release builds abort on panic and a failed allocation aborts, so no guard's drop runs;
// SIGABRT (what every abort raises) restores from the journal.

/// Start `iolab run -q --runtime 60s ARGS` with `env`, wait until `changed()` says its setting is
/// applied, send it SIGABRT, and return its output (which waits for the restore it started).
fn abort_mid_run(args: &[&str], env: &[(&str, &Path)], changed: impl Fn() -> bool) -> std::process::Output {
    use std::process::Stdio;
    let mut c = Command::new(env!("CARGO_BIN_EXE_iolab"));
    c.args(["run", "-q", "--runtime", "60s"]).args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let child = c.spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !changed() {
        assert!(std::time::Instant::now() < deadline, "the setting was never applied");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGABRT) };
    child.wait_with_output().unwrap()
}

fn assert_aborted_and_restored(out: &std::process::Output) {
    use std::os::unix::process::ExitStatusExt;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "died of the abort: {:?}\n{stderr}", out.status);
    assert!(stderr.contains("aborted with system settings changed") && stderr.contains("iolab restore"), "says so: {stderr}");
    assert!(stderr.contains("restored after the abort"), "and restored: {stderr}");
}

/// A data file of `len` bytes (sparse) in the fake's directory, or None after saying why `test`
/// is skipped: settings apply per block device behind the targets, so the file needs one.
fn data_with_device(f: &Fake, test: &str, len: u64) -> Option<String> {
    let data = f.dir.path().join("data");
    if let Err(e) = fs::File::create(&data).and_then(|d| d.set_len(len)) {
        eprintln!("SKIP {test}: cannot make a {len}-byte sparse file: {e}");
        return None;
    }
    let data = data.to_str().unwrap().to_string();
    let probe = Command::new(env!("CARGO_BIN_EXE_iolab")).args(["run", "-q", "--ios", "10", "--json", "-", &data]).output().unwrap();
    let rec: serde_json::Value = serde_json::from_slice(&probe.stdout).unwrap();
    if rec["environment"]["targets"][0]["device"].is_null() {
        eprintln!("SKIP {test}: {data} has no block device behind it, so no setting applies to it");
        return None;
    }
    Some(data)
}

#[test]
fn real_loop_device_abort_mid_run_restores_the_scheduler() {
    let Some(lo) = Loop::for_test("real_loop_device_abort_mid_run_restores_the_scheduler") else { return };
    let (orig, all) = real_sched(lo.name());
    let Some(other) = ["kyber", "mq-deadline", "none", "bfq"].into_iter().find(|s| *s != orig && all.iter().any(|a| a == s)) else {
        eprintln!("SKIP real_loop_device_abort_mid_run_restores_the_scheduler: {} offers no second scheduler", lo.dev);
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.json");
    let out = abort_mid_run(&["--scheduler", other, &lo.dev], &[("IOLAB_JOURNAL", &journal)], || real_sched(lo.name()).0 == other);
    assert_aborted_and_restored(&out);
    assert_eq!(real_sched(lo.name()).0, orig, "the scheduler is back");
}

#[test]
fn fake_allocation_failure_under_ulimit_restores_from_the_journal() {
    // A real allocation failure after the setting is applied: under `ulimit -v 200000`, the
    // bitmap of written blocks `--verify` keeps for a 1 TiB target at 512-byte blocks (256 MiB,
    // not counted by the up-front memory check) cannot be allocated, and Rust aborts without
    // running the panic hook. The SIGABRT handler's restore process puts the governor back.
    let f = Fake::new();
    let test = "fake_allocation_failure_under_ulimit_restores_from_the_journal";
    let Some(data) = data_with_device(&f, test, 1 << 40) else { return };
    let cmd = format!(
        "ulimit -v 200000; exec {} run -q --rw randwrite --verify --bs 512 --ios 10 --set governor=performance {data}",
        env!("CARGO_BIN_EXE_iolab")
    );
    let out = Command::new("sh").arg("-c").arg(&cmd).env("IOLAB_SYSFS", f.root()).env("IOLAB_JOURNAL", f.journal()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("memory allocation of"), "the trigger is an allocation failure: {cmd}\n{stderr}");
    assert_aborted_and_restored(&out);
    f.assert_originals();
    assert_eq!(f.settings().left_changed().unwrap(), None, "nothing left in the journal");
}
