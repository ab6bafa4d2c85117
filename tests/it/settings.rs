//! System settings: apply, verify, restore — against a fake sysfs root in a temp dir, and on a
//! real loop device (needs root and losetup; skipped with the reason on stderr otherwise).
use iolab::failure::{Failure, FailureKind, Kinded};
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
    assert_eq!(j["version"], 2);
    assert_eq!(j["entries"][0]["owner"]["pid"], std::process::id(), "each entry names its owner");
    assert!(j["entries"][0]["owner"]["pid_start_ticks"].is_u64());
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
fn fake_restore_that_leaves_a_setting_changed_is_settings_not_restored_up_to_the_exit_code() {
    let f = Fake::new();
    let s = f.settings();
    let g = s.apply(&[dev(Setting::ReadAheadKb, "256"), dev(Setting::Nomerges, "1")]).unwrap();
    // Every write to nomerges now fails (ENOSPC): its original cannot be put back.
    let p = f.q("loop9", "nomerges");
    fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink("/dev/full", &p).unwrap();
    let err = g.restore().unwrap_err();
    assert_eq!(err.kind(), FailureKind::SettingsNotRestored, "{err}");
    let line = err.to_string();
    assert!(line.contains("could not restore 1 setting(s): loop9 nomerges") && !line.contains('\n'), "{line}");
    let failure = Failure::from(err);
    assert_eq!((failure.kind, failure.code()), (FailureKind::SettingsNotRestored, 1), "{}", failure.message);
    assert_eq!(f.read("loop9", "read_ahead_kb"), "128", "what could be put back was");
    assert!(f.journal().exists(), "the entry left changed stays journaled for `iolab restore`");
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
    // One entry could not be rolled back: settings are left changed, and the error says so by its kind.
    assert_eq!(err.kind(), FailureKind::SettingsNotRestored, "{err}");
    let err = err.to_string();
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
    // Rolled back whole: nothing is left changed, so the run failed and a sweep goes on.
    assert_eq!(err.kind(), FailureKind::Failed, "{err}");
    let err = err.to_string();
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

/// A pid no process can have.
const DEAD: u32 = i32::MAX as u32 - 1;

/// Put an entry of another process (`pid`, `command`) into the journal (version 2), with the
/// file it names set to `new`, as that process would have left them.
/// `values`: the original and the new value.
fn plant(journal: &Path, file: &Path, setting: &str, target: &str, pid: u32, command: &str, values: (&str, &str)) {
    let (original, new) = values;
    let mut j: serde_json::Value = match fs::read_to_string(journal) {
        Ok(t) => serde_json::from_str(&t).unwrap(),
        Err(_) => serde_json::json!({ "version": 2, "entries": [] }),
    };
    j["entries"].as_array_mut().unwrap().push(serde_json::json!({
        "owner": { "pid": pid, "pid_start_ticks": null, "started_at": 0, "command": command },
        "guard": 1, "setting": setting, "device": target, "target": target,
        "path": file, "original": original, "new": new,
    }));
    fs::create_dir_all(journal.parent().unwrap()).unwrap();
    fs::write(journal, serde_json::to_string(&j).unwrap()).unwrap();
    fs::write(file, format!("{new}\n")).unwrap();
}

/// A live process that is not this one, to own journal entries; killed (-9) when dropped.
struct Other(std::process::Child);

impl Other {
    fn start() -> Other {
        Other(Command::new("sleep").arg("600").spawn().unwrap())
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
    fn kill9(mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Other {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn fake_journal_of_dead_process_blocks_its_setting_until_restored() {
    let f = Fake::new();
    plant(&f.journal(), &f.q("loop9", "read_ahead_kb"), "read_ahead_kb", "loop9", DEAD, "iolab run", ("128", "1024"));
    let s = f.settings();
    let err = s.apply(&[dev(Setting::ReadAheadKb, "64")]).unwrap_err();
    assert_eq!(err.kind(), FailureKind::SettingsNotRestored, "{err}");
    let err = err.to_string();
    assert!(err.contains("a previous iolab run") && err.contains("iolab restore"), "{err}");
    assert_eq!(f.read("loop9", "read_ahead_kb"), "1024", "nothing changed");
    assert!(s.left_changed().unwrap().unwrap().contains("loop9 read_ahead_kb: 128 -> 1024"), "runs are told");

    let lines = s.restore_journal().unwrap();
    assert_eq!(lines, vec!["loop9 read_ahead_kb: 1024 -> 128 (restored)".to_string()]);
    f.assert_originals();
    let g = s.apply(&[dev(Setting::Nomerges, "1")]).unwrap();
    assert_eq!(f.read("loop9", "nomerges"), "1");
    drop(g);
    f.assert_originals();
}

#[test]
fn fake_live_other_owner_holds_its_setting_and_no_other() {
    let f = Fake::new();
    let other = Other::start();
    plant(&f.journal(), &f.q("loop9", "scheduler"), "scheduler", "loop9", other.pid(), "iolab suite run S1", ("none", "kyber"));
    fs::write(f.q("loop9", "scheduler"), "none [kyber] mq-deadline\n").unwrap();
    let s = f.settings();
    // The same setting: refused, naming who holds it.
    let err = s.apply(&[dev(Setting::Scheduler, "mq-deadline")]).unwrap_err();
    // Another live iolab's setting is not left changed: the run failed, nothing to restore.
    assert_eq!(err.kind(), FailureKind::Failed, "{err}");
    let err = err.to_string();
    assert!(err.contains(&format!("loop9 scheduler is held by iolab pid {} (iolab suite run S1)", other.pid())), "{err}");
    assert!(err.contains("--wait-settings"), "{err}");
    // Another device's, and another setting of the same device: not blocked.
    let a = s.apply(&[Change::new(Setting::Scheduler, Some("loop8"), "kyber"), dev(Setting::Nomerges, "2")]).unwrap();
    assert_eq!((f.sched("loop8"), f.read("loop9", "nomerges")), ("kyber".to_string(), "2".to_string()));
    assert_eq!(s.left_changed().unwrap(), None, "a live owner's setting is not left changed");
    // A bounded wait ends with the holder named and how long it waited.
    let began = std::time::Instant::now();
    let mut said = Vec::new();
    let err = s
        .apply_waiting(&[dev(Setting::Scheduler, "mq-deadline")], std::time::Duration::from_millis(300), &|| false, &mut |l| {
            said.push(l.to_string())
        })
        .unwrap_err()
        .to_string();
    assert!(began.elapsed() >= std::time::Duration::from_millis(300));
    assert!(err.contains(&format!("held by iolab pid {}", other.pid())) && err.contains("waited"), "{err}");
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(said[0].starts_with("waiting (at most 0.3 s, --wait-settings) for loop9 scheduler is held by"), "{said:?}");
    drop(a);
    assert_eq!((f.sched("loop8"), f.read("loop9", "nomerges")), ("none".to_string(), "0".to_string()));
    assert_eq!(f.sched("loop9"), "kyber", "the other's change is untouched");
    // Once its owner is gone, a wait ends in the change.
    let journal = f.journal();
    let waiter = std::thread::spawn(move || {
        let s = Settings::new(journal.parent().unwrap().parent().unwrap().parent().unwrap().join("sys"), journal);
        let g = s.apply_waiting(&[dev(Setting::Scheduler, "mq-deadline")], std::time::Duration::from_secs(60), &|| false, &mut |_| {});
        g.map(|g| g.changes())
    });
    // The other ends: puts its original back and leaves the journal (atomically, as it does).
    let sched = f.q("loop9", "scheduler");
    fs::write(sched.with_extension("tmp"), "[none] mq-deadline kyber\n").unwrap();
    fs::rename(sched.with_extension("tmp"), &sched).unwrap();
    let tmp = f.journal().with_extension("tmp");
    fs::write(&tmp, r#"{"version": 2, "entries": []}"#).unwrap();
    fs::rename(&tmp, f.journal()).unwrap();
    let changes = waiter.join().unwrap().unwrap();
    drop(other);
    assert_eq!(changes, ["loop9 scheduler: none -> mq-deadline"]);
    f.assert_originals();
}

#[test]
fn fake_restore_puts_back_dead_owners_and_leaves_live_ones() {
    let f = Fake::new();
    let live = Other::start();
    plant(&f.journal(), &f.q("loop9", "read_ahead_kb"), "read_ahead_kb", "loop9", live.pid(), "iolab sweep a.toml", ("128", "4096"));
    plant(&f.journal(), &f.q("loop8", "read_ahead_kb"), "read_ahead_kb", "loop8", DEAD, "iolab run", ("128", "1024"));
    let lines = f.settings().restore_journal().unwrap();
    assert_eq!(
        lines,
        [
            "loop8 read_ahead_kb: 1024 -> 128 (restored)".to_string(),
            format!(
                "loop9 read_ahead_kb: left to iolab pid {} (iolab sweep a.toml), still running (it puts it back when it ends)",
                live.pid()
            )
        ]
    );
    assert_eq!((f.read("loop8", "read_ahead_kb"), f.read("loop9", "read_ahead_kb")), ("128".to_string(), "4096".to_string()));
    let j: serde_json::Value = serde_json::from_str(&fs::read_to_string(f.journal()).unwrap()).unwrap();
    assert_eq!(j["entries"].as_array().unwrap().len(), 1, "the live owner's entry stays: {j}");
    assert_eq!(j["entries"][0]["owner"]["pid"], live.pid());
    live.kill9();
    f.settings().restore_journal().unwrap();
    f.assert_originals();
    assert!(!f.journal().exists());
}

#[test]
fn fake_version_1_journal_is_read_with_its_one_owner() {
    let f = Fake::new();
    let v1 = |pid: u32| {
        let path = f.q("loop9", "read_ahead_kb");
        fs::create_dir_all(f.journal().parent().unwrap()).unwrap();
        let j = serde_json::json!({
            "version": 1, "pid": pid, "pid_start_ticks": null, "started_at": 0, "command": "iolab run --set read_ahead_kb=1024",
            "entries": [{ "guard": 1, "setting": "read_ahead_kb", "device": "loop9", "target": "loop9",
                          "path": path, "original": "128", "new": "1024" }],
        });
        fs::write(f.journal(), serde_json::to_string(&j).unwrap()).unwrap();
        fs::write(&path, "1024\n").unwrap();
    };
    // A live owner's (version 1): its setting is held, named with its command.
    let other = Other::start();
    v1(other.pid());
    let err = f.settings().apply(&[dev(Setting::ReadAheadKb, "64")]).unwrap_err().to_string();
    assert!(err.contains(&format!("held by iolab pid {} (iolab run --set read_ahead_kb=1024)", other.pid())), "{err}");
    other.kill9();
    // A dead owner's: restored, and the journal is gone.
    v1(DEAD);
    assert_eq!(f.settings().restore_journal().unwrap(), ["loop9 read_ahead_kb: 1024 -> 128 (restored)"]);
    f.assert_originals();
    assert!(!f.journal().exists());
    // What is written now is version 2, each entry with its owner.
    let g = f.settings().apply(&[dev(Setting::ReadAheadKb, "64")]).unwrap();
    let j: serde_json::Value = serde_json::from_str(&fs::read_to_string(f.journal()).unwrap()).unwrap();
    assert_eq!(j["version"], 2);
    assert_eq!(j["entries"][0]["owner"]["pid"], std::process::id());
    assert!(j.get("pid").is_none(), "{j}");
    drop(g);
}

/// A fake /proc/sys with kernel.perf_event_paranoid at 2.
fn fake_sysctl(f: &Fake) -> (Settings, PathBuf) {
    let k = f.dir.path().join("proc_sys/kernel");
    fs::create_dir_all(&k).unwrap();
    fs::write(k.join("perf_event_paranoid"), "2\n").unwrap();
    (f.settings().with_proc_sys(f.dir.path().join("proc_sys")), k.join("perf_event_paranoid"))
}

#[test]
fn fake_shared_sysctl_goes_back_only_when_its_last_owner_ends() {
    let f = Fake::new();
    let (s, file) = fake_sysctl(&f);
    let paranoid = || fs::read_to_string(&file).unwrap().trim().to_string();
    let lower = || Change::new(Setting::PerfEventParanoid, None, "0");

    // Another profiler lowered it to -1 first; this one needs 0: shared, nothing written.
    let other = Other::start();
    plant(&f.journal(), &file, "perf_event_paranoid", "kernel", other.pid(), "iolab run --profile stages", ("2", "-1"));
    let g = s.apply(&[lower()]).unwrap();
    assert_eq!(g.changes(), ["kernel.perf_event_paranoid: 2 -> -1"], "the original is the first owner's");
    // This one ends first: the other still needs it.
    assert_eq!(
        g.restore().unwrap(),
        [format!("kernel.perf_event_paranoid: left at -1 for iolab pid {} (iolab run --profile stages), which shares it", other.pid())]
    );
    assert_eq!(paranoid(), "-1");
    // The other is killed: `iolab restore` puts the original back, no owner being left.
    other.kill9();
    assert_eq!(s.restore_journal().unwrap(), ["kernel.perf_event_paranoid: -1 -> 2 (restored)"]);
    assert_eq!(paranoid(), "2");

    // Overlapping the other way: the other is killed -9 while this one still runs.
    let other = Other::start();
    plant(&f.journal(), &file, "perf_event_paranoid", "kernel", other.pid(), "iolab run --profile layers", ("2", "0"));
    let g = s.apply(&[Change::new(Setting::PerfEventParanoid, None, "-1")]).unwrap();
    assert_eq!(paranoid(), "-1", "lowered further for this one's need");
    // `iolab restore` runs apart from both: hand this one's entry to a second live process.
    let second = Other::start();
    let mut j: serde_json::Value = serde_json::from_str(&fs::read_to_string(f.journal()).unwrap()).unwrap();
    for e in j["entries"].as_array_mut().unwrap() {
        if e["owner"]["pid"] == std::process::id() {
            e["owner"]["pid"] = second.pid().into();
            e["owner"]["pid_start_ticks"] = serde_json::Value::Null;
        }
    }
    fs::write(f.journal(), serde_json::to_string(&j).unwrap()).unwrap();
    std::mem::forget(g);
    other.kill9();
    let lines = s.restore_journal().unwrap();
    assert!(lines[0].starts_with(&format!("kernel.perf_event_paranoid: left at 0 for iolab pid {} ", second.pid())), "{lines:?}");
    assert_eq!(paranoid(), "-1", "restore leaves the live one's need alone");
    second.kill9();
    assert_eq!(s.restore_journal().unwrap(), ["kernel.perf_event_paranoid: -1 -> 2 (restored)"]);
    assert_eq!(paranoid(), "2");
    assert!(!f.journal().exists());
}

#[test]
fn fake_two_guards_in_one_process_own_their_entries() {
    let f = Fake::new();
    let s = f.settings();
    let a = s.apply(&[dev(Setting::ReadAheadKb, "1024")]).unwrap();
    let b = s.apply(&[Change::new(Setting::Governor, None, "powersave")]).unwrap();
    let err = s.apply(&[dev(Setting::ReadAheadKb, "64")]).unwrap_err().to_string();
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
        // Whatever the cause, a change this machine cannot make as asked skips the run.
        assert_eq!(err.kind(), FailureKind::Unsupported, "{c:?}: {err}");
        let err = err.to_string();
        assert!(err.contains(want), "{c:?}: {err}");
        assert!(!err.contains('\n'), "{err}");
        // apply refuses too, before recording anything.
        assert!(s.apply(&[dev(Setting::Nomerges, "2"), c]).is_err());
        assert!(!f.journal().exists());
        f.assert_originals();
    }
    // A file the driver does not offer, and a read-only one.
    fs::remove_file(f.q("loop9", "wbt_lat_usec")).unwrap();
    let err = s.check(&dev(Setting::WbtLatUsec, "0")).unwrap_err().to_string();
    assert!(err.contains("loop9 has no queue/wbt_lat_usec"), "{err}");
    let p = f.q("loop9", "nomerges");
    fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    let err = s.check(&dev(Setting::Nomerges, "1")).unwrap_err().to_string();
    assert!(err.contains("read-only"), "{err}");
    // No cpufreq at all.
    fs::remove_dir_all(f.root().join("devices/system/cpu/cpu0")).unwrap();
    fs::remove_dir_all(f.root().join("devices/system/cpu/cpu1")).unwrap();
    let err = s.check(&Change::new(Setting::Governor, None, "performance")).unwrap_err().to_string();
    assert!(err.contains("no CPU frequency scaling"), "{err}");
    // Same setting twice in one apply.
    let err = s.apply(&[dev(Setting::ReadAheadKb, "8"), dev(Setting::ReadAheadKb, "16")]).unwrap_err().to_string();
    assert!(err.contains("changed twice"), "{err}");
}

#[test]
fn fake_damaged_journal_is_reported() {
    let f = Fake::new();
    fs::create_dir_all(f.journal().parent().unwrap()).unwrap();
    fs::write(f.journal(), "{ not json").unwrap();
    let err = f.settings().restore_journal().unwrap_err();
    // A journal that cannot be read is a failure (exit 1), said in its one line.
    assert_eq!((err.kind(), Failure::from(err.clone()).code()), (FailureKind::Failed, 1), "{err}");
    let err = err.to_string();
    assert!(err.contains("damaged") && !err.contains('\n'), "{err}");
    assert!(f.settings().apply(&[dev(Setting::Nomerges, "1")]).is_err());
    assert_eq!(f.read("loop9", "nomerges"), "0");
}

#[test]
fn fake_restore_that_cannot_put_a_setting_back_says_settings_are_not_restored() {
    let f = Fake::new();
    let p = f.q("loop9", "nomerges");
    plant(&f.journal(), &p, "nomerges", "loop9", DEAD, "iolab run", ("0", "1"));
    // Every write to it fails (ENOSPC): the original cannot be put back.
    fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink("/dev/full", &p).unwrap();
    let err = f.settings().restore_journal().unwrap_err();
    assert_eq!(err.kind(), FailureKind::SettingsNotRestored, "{err}");
    let err = err.to_string();
    assert!(err.contains("could not restore 1 setting(s): loop9 nomerges") && !err.contains('\n'), "{err}");
    assert!(f.journal().exists(), "the entry stays journaled");
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
    assert!(Change::parse("scheduler", None).unwrap_err().to_string().contains("name=value"));
    assert!(Change::parse("bogus=1", None).unwrap_err().to_string().contains("unknown setting"));
    // A setting asked for wrongly is bad input (exit 2, a sweep stops), never a skip.
    assert_eq!(Change::parse("bogus=1", None).unwrap_err().kind(), FailureKind::Invalid);
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
                let e = e.to_string();
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

/// A scheduler of `dev` other than the one selected, or None.
fn other_sched(dev: &str) -> Option<String> {
    let (cur, all) = real_sched(dev);
    ["mq-deadline", "kyber", "none", "bfq"].into_iter().find(|s| *s != cur && all.iter().any(|a| a == s)).map(str::to_string)
}

#[test]
fn real_two_iolabs_on_two_loop_devices_share_one_journal_without_blocking() {
    let test = "real_two_iolabs_on_two_loop_devices_share_one_journal_without_blocking";
    let (Some(a), Some(b)) = (Loop::for_test(test), Loop::for_test(test)) else { return };
    let (Some(sa), Some(sb)) = (other_sched(a.name()), other_sched(b.name())) else {
        eprintln!("SKIP {test}: the loop devices offer no second scheduler");
        return;
    };
    let (oa, ob) = (real_sched(a.name()).0, real_sched(b.name()).0);
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal.json");
    let iolab = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_iolab"));
        c.env("IOLAB_JOURNAL", &journal);
        c
    };
    // The first holds loop A's scheduler for as long as its run lasts (stopped below).
    let first = iolab()
        .args(["run", "-q", "--runtime", "120s", "--scheduler", &sa, &a.dev])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = first;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while real_sched(a.name()).0 != sa {
        if std::time::Instant::now() > deadline || first.try_wait().unwrap().is_some() {
            let _ = first.kill();
            let out = first.wait_with_output().unwrap();
            panic!("the first never changed {}: {:?}\n{}", a.dev, out.status, String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // The second, on loop B, at the same time and with the same journal: not blocked.
    let second = iolab().args(["run", "-q", "--ios", "200", "--scheduler", &sb, &b.dev]).output().unwrap();
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    assert_eq!(real_sched(b.name()).0, ob, "the second put its original back");
    assert_eq!(real_sched(a.name()).0, sa, "the first's change is untouched");
    // A third on loop A: told who holds it, at once, or after the wait it allows.
    let third = iolab().args(["run", "-q", "--ios", "200", "--scheduler", &oa, &a.dev]).output().unwrap();
    let err = String::from_utf8_lossy(&third.stderr);
    assert_eq!(third.status.code(), Some(1), "{err}");
    let held = format!("{} scheduler is held by iolab pid {} (", a.name(), first.id());
    assert!(err.contains(&held) && err.contains("--scheduler"), "{err}");
    let waited = iolab().args(["run", "-q", "--ios", "200", "--wait-settings", "1s", "--scheduler", &oa, &a.dev]).output().unwrap();
    let err = String::from_utf8_lossy(&waited.stderr);
    assert_eq!(waited.status.code(), Some(1), "{err}");
    assert!(err.contains(&held) && err.contains("waited") && err.contains("--wait-settings 1s"), "{err}");
    // Ctrl-C ends the first; it puts its original back.
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(first.id() as i32, libc::SIGINT) };
    let out = first.wait_with_output().unwrap();
    assert!(matches!(out.status.code(), Some(0 | 130)), "{:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    assert_eq!(real_sched(a.name()).0, oa, "the first put its original back");
    assert!(!journal.exists(), "nothing left in the journal");
}

// The energy knobs: cpufreq limits per policy and the deepest CPU idle state, against fixture
// sysfs trees (no cpufreq or cpuidle on a VM).

const CPUINFO: (&str, &str) = ("800000", "3600000");
const IDLE: &[(&str, &str, &str)] = &[("POLL", "0", "0"), ("C1", "2", "2"), ("C1E", "10", "20"), ("C6", "133", "600")];

/// Two cpufreq policies (limits 800000-3600000, running at 1200000) and four idle states on each
/// of cpu0 and cpu1, none disabled.
fn cpu_knobs(f: &Fake) {
    for p in ["policy0", "policy1"] {
        let d = f.root().join("devices/system/cpu/cpufreq").join(p);
        fs::create_dir_all(&d).unwrap();
        for (file, v) in [
            ("cpuinfo_min_freq", CPUINFO.0),
            ("cpuinfo_max_freq", CPUINFO.1),
            ("scaling_min_freq", CPUINFO.0),
            ("scaling_max_freq", CPUINFO.1),
            ("scaling_cur_freq", "1200000"),
        ] {
            fs::write(d.join(file), format!("{v}\n")).unwrap();
        }
    }
    for cpu in ["cpu0", "cpu1"] {
        for (i, (name, latency, residency)) in IDLE.iter().enumerate() {
            let d = f.root().join("devices/system/cpu").join(cpu).join(format!("cpuidle/state{i}"));
            fs::create_dir_all(&d).unwrap();
            for (file, v) in [("name", *name), ("latency", *latency), ("residency", *residency), ("disable", "0")] {
                fs::write(d.join(file), format!("{v}\n")).unwrap();
            }
        }
    }
}

fn freq(f: &Fake, policy: &str) -> (String, String) {
    let d = f.root().join("devices/system/cpu/cpufreq").join(policy);
    let r = |n: &str| fs::read_to_string(d.join(n)).unwrap().trim().to_string();
    (r("scaling_min_freq"), r("scaling_max_freq"))
}

fn disabled(f: &Fake, cpu: &str) -> Vec<String> {
    (0..IDLE.len())
        .map(|i| {
            let p = f.root().join("devices/system/cpu").join(cpu).join(format!("cpuidle/state{i}/disable"));
            fs::read_to_string(p).unwrap().trim().to_string()
        })
        .collect()
}

fn assert_cpu_originals(f: &Fake) {
    for p in ["policy0", "policy1"] {
        assert_eq!(freq(f, p), (CPUINFO.0.to_string(), CPUINFO.1.to_string()), "{p}");
    }
    for cpu in ["cpu0", "cpu1"] {
        assert_eq!(disabled(f, cpu), ["0", "0", "0", "0"], "{cpu}");
    }
}

#[test]
fn fake_cpu_freq_and_idle_states_are_set_read_back_and_restored() {
    let f = Fake::new();
    cpu_knobs(&f);
    let s = f.settings();
    let fixed = Change::parse("cpu_freq_khz=2000000", None).unwrap();
    let idle = Change::parse("cpuidle_max_state=1", None).unwrap();
    assert_eq!((fixed.setting, idle.setting), (Setting::CpuFreqKhz, Setting::CpuidleMaxState));
    let g = s.apply(&[fixed, idle]).unwrap();
    for p in ["policy0", "policy1"] {
        assert_eq!(freq(&f, p), ("2000000".to_string(), "2000000".to_string()), "{p}: min = max");
    }
    for cpu in ["cpu0", "cpu1"] {
        assert_eq!(disabled(&f, cpu), ["0", "0", "1", "1"], "{cpu}: C1E and C6 disabled, POLL and C1 left");
    }
    let changes = g.changes();
    assert!(changes.contains(&"policy0 cpu_freq_khz: 800000-3600000 -> 2000000-2000000".to_string()), "{changes:?}");
    assert!(changes.contains(&"cpu1/state3 cpuidle_max_state: 0 -> 1".to_string()), "{changes:?}");
    assert_eq!(changes.len(), 2 + 4, "{changes:?}");
    // The record's read-back: the limits in force, the frequency, the states and which are off.
    let v = s.snapshot("loop9");
    assert_eq!(v["cpufreq"]["policy1"]["scaling_min_khz"], 2_000_000);
    assert_eq!(v["cpufreq"]["policy1"]["cpuinfo_max_khz"], 3_600_000);
    assert_eq!(v["cpufreq"]["policy0"]["cur_khz"], 1_200_000);
    assert_eq!(v["cpuidle"]["states"][3]["name"], "C6");
    assert_eq!(v["cpuidle"]["states"][3]["exit_latency_us"], 133);
    assert_eq!(v["cpuidle"]["disabled"]["cpu0"], serde_json::json!([2, 3]));
    let lines = g.restore().unwrap();
    assert_eq!(lines.len(), 6, "{lines:?}");
    assert_cpu_originals(&f);
    assert!(!f.journal().exists());

    // A range, from limits the new minimum is above (the maximum goes first), and back.
    let d = f.root().join("devices/system/cpu/cpufreq/policy0");
    fs::write(d.join("scaling_max_freq"), "1000000\n").unwrap();
    let g = s.apply(&[Change::parse("cpu_freq_khz=2000000-3000000", None).unwrap()]).unwrap();
    assert_eq!(freq(&f, "policy0"), ("2000000".to_string(), "3000000".to_string()));
    drop(g);
    assert_eq!(freq(&f, "policy0"), ("800000".to_string(), "1000000".to_string()), "both files put back exactly");
}

#[test]
fn fake_cpu_knobs_refuse_bad_values_in_one_line_changing_nothing() {
    let f = Fake::new();
    cpu_knobs(&f);
    let s = f.settings();
    // Bad input: refused when parsed, whatever the machine.
    for bad in [
        "cpu_freq_khz=NaN",
        "cpu_freq_khz=-2000000",
        "cpu_freq_khz=1e99",
        "cpu_freq_khz=3000000-1000000",
        "cpuidle_max_state=-1",
        "cpuidle_max_state=deep",
    ] {
        let e = Change::parse(bad, None).unwrap_err();
        assert_eq!(e.kind(), FailureKind::Invalid, "{bad}: {e}");
        assert!(!e.to_string().contains('\n'), "{e}");
    }
    // What this machine does not have: outside the hardware's range, a state it lacks.
    for (c, want) in [
        (Change::new(Setting::CpuFreqKhz, None, "4000000"), "outside policy0's range 800000-3600000 kHz"),
        (Change::new(Setting::CpuFreqKhz, None, "500000-2000000"), "outside policy0's range"),
        (Change::new(Setting::CpuidleMaxState, None, "4"), "cpu0 has no idle state 4 (it has 0 POLL, 1 C1, 2 C1E, 3 C6)"),
    ] {
        let e = s.check(&c).unwrap_err();
        assert_eq!(e.kind(), FailureKind::Unsupported, "{e}");
        assert!(e.to_string().contains(want) && !e.to_string().contains('\n'), "{e}");
        assert!(s.apply(&[Change::new(Setting::Governor, None, "performance"), c]).is_err());
        assert!(!f.journal().exists());
        assert_cpu_originals(&f);
        f.assert_originals();
    }
    // No cpufreq, no cpuidle: unsupported, saying so.
    fs::remove_dir_all(f.root().join("devices/system/cpu/cpufreq/policy0")).unwrap();
    fs::remove_dir_all(f.root().join("devices/system/cpu/cpufreq/policy1")).unwrap();
    let e = s.check(&Change::new(Setting::CpuFreqKhz, None, "2000000")).unwrap_err().to_string();
    assert!(e.contains("no CPU frequency scaling here") && e.contains("drop cpu_freq_khz"), "{e}");
    for cpu in ["cpu0", "cpu1"] {
        fs::remove_dir_all(f.root().join("devices/system/cpu").join(cpu).join("cpuidle")).unwrap();
    }
    let e = s.check(&Change::new(Setting::CpuidleMaxState, None, "1")).unwrap_err().to_string();
    assert!(e.contains("no CPU idle states here"), "{e}");
}

#[test]
fn cli_cpu_knobs_bad_values_exit_2_in_one_line_before_anything_changes() {
    let f = Fake::new();
    cpu_knobs(&f);
    let data = f.dir.path().join("data");
    fs::File::create(&data).unwrap().set_len(1 << 20).unwrap();
    let data = data.to_str().unwrap();
    for (set, want) in [
        ("cpu_freq_khz=NaN", "cpu_freq_khz must be a frequency in kHz"),
        ("cpu_freq_khz=-1", "cpu_freq_khz must be a frequency in kHz"),
        ("cpu_freq_khz=99999999999", "is not a CPU frequency"),
        ("cpu_freq_khz=9000000", "outside policy0's range"),
        ("cpuidle_max_state=7", "cpu0 has no idle state 7"),
        ("cpuidle_max_state=1.5", "cpuidle_max_state must be"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_iolab"))
            .args(["run", "-q", "--ios", "10", "--set", set, data])
            .env("IOLAB_SYSFS", f.root())
            .env("IOLAB_JOURNAL", f.journal())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{set}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{set}: {stderr}");
        assert!(stderr.contains(want), "{set}: {stderr}");
        assert_cpu_originals(&f);
        assert!(!f.journal().exists(), "{set}: nothing journaled");
    }
}

#[test]
fn cli_run_killed_9_holding_the_cpu_knobs_is_undone_by_iolab_restore() {
    let f = Fake::new();
    cpu_knobs(&f);
    let data = f.dir.path().join("data");
    fs::File::create(&data).unwrap().set_len(1 << 20).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["run", "-q", "--runtime", "60s", "--set", "cpu_freq_khz=1000000-2000000", "--set", "cpuidle_max_state=0"])
        .arg(&data)
        .env("IOLAB_SYSFS", f.root())
        .env("IOLAB_JOURNAL", f.journal())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    // The last change written: cpu1's deepest state (policies first, then the idle states).
    while disabled(&f, "cpu1")[3] != "1" {
        if std::time::Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("the knobs were never applied: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL: nothing of iolab runs
    let out = child.wait_with_output().unwrap();
    assert_eq!(freq(&f, "policy1"), ("1000000".to_string(), "2000000".to_string()), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(disabled(&f, "cpu0"), ["0", "1", "1", "1"]);
    let restore = Command::new(env!("CARGO_BIN_EXE_iolab"))
        .arg("restore")
        .env("IOLAB_SYSFS", f.root())
        .env("IOLAB_JOURNAL", f.journal())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&restore.stdout).into_owned() + &String::from_utf8_lossy(&restore.stderr);
    assert!(restore.status.success(), "{said}");
    assert!(said.contains("policy0 cpu_freq_khz: 1000000-2000000 -> 800000-3600000 (restored)"), "{said}");
    assert_cpu_originals(&f);
    assert!(!f.journal().exists(), "{said}");
}
