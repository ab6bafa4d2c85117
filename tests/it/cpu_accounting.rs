//! The CPU classes account for the whole system's busy time. Alone in its own test binary so
//! no other test loads the machine while it measures.
//!
//! What the classes cannot see is work Linux charges to no task: without
//! `IRQ_TIME_ACCOUNTING` (unset on the development VM and on CI), interrupt and softirq work that
//! lands on an idle CPU — a completion IPI and its block softirq while the submitter sleeps — is
//! busy time of the idle task. That part is measured (/proc/stat irq + softirq) and reported as
//! `interrupt_context_s`. Stated tolerance: what remains after it, `unexplained_fraction`, is at
//! most 20 % of busy time; the best of two attempts per mode counts, since a stray daemon waking
//! inside a 3 s window is not iolab's doing. Measured unaccounted fractions on 2-core VMs:
//! 1-22 % on the virtio disk, 1-29 % on a loop device over /dev/shm (psync, where every I/O is a
//! cross-CPU completion and wake-up, is the worst).
use std::process::Command;

const TOLERANCE: f64 = 0.20;
/// The classes must never add up to more than the machine was busy (double counting).
const OVERCOUNT: f64 = 0.10;

struct Accounting {
    busy_s: f64,
    classes_s: f64,
    unaccounted: f64,
    unexplained: f64,
    class_s: serde_json::Value,
}

fn measure(target: &str, args: &[&str]) -> Accounting {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_iolab"))
        .arg("run")
        .args(args)
        .args(["--runtime", "3s", "-q", "--json"])
        .arg(&json)
        .arg(target)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let acc = &rec["cost"]["accounting"];
    let f = |k: &str| acc[k].as_f64().unwrap_or_else(|| panic!("cost.accounting.{k} missing: {acc}"));
    let classes = rec["cost"]["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["class"].as_str().unwrap().to_string(), c["cpu_s"].clone()))
        .collect::<serde_json::Map<_, _>>();
    let a = Accounting {
        busy_s: f("busy_s"),
        classes_s: f("classes_s"),
        unaccounted: f("unaccounted_fraction"),
        unexplained: f("unexplained_fraction"),
        class_s: classes.into(),
    };
    eprintln!(
        "{target} {args:?}: busy {:.2} s, classes {:.2} s, unaccounted {:.1} %, interrupt context {:.2} s, unexplained {:.1} %",
        a.busy_s,
        a.classes_s,
        a.unaccounted * 100.0,
        f("interrupt_context_s"),
        a.unexplained * 100.0
    );
    a
}

/// Best of two attempts: the one whose classes explain the most.
fn best(target: &str, args: &[&str]) -> Accounting {
    let first = measure(target, args);
    if first.unexplained <= TOLERANCE && first.classes_s <= first.busy_s * (1.0 + OVERCOUNT) {
        return first;
    }
    let second = measure(target, args);
    if second.unexplained < first.unexplained {
        second
    } else {
        first
    }
}

const MODES: [&[&str]; 3] = [&["-i", "psync"], &["-i", "io_uring", "--qd", "8"], &["-i", "io_uring", "--submit", "sqpoll", "--qd", "8"]];

fn check(target: &str) {
    for m in MODES {
        let a = best(target, m);
        assert!(
            a.classes_s <= a.busy_s * (1.0 + OVERCOUNT),
            "{target} {m:?}: classes {:.2} s exceed busy {:.2} s: double counting",
            a.classes_s,
            a.busy_s
        );
        assert!(
            a.unexplained <= TOLERANCE,
            "{target} {m:?}: classes and interrupt context miss {:.1} % of busy time (tolerance {:.0} %)",
            a.unexplained * 100.0,
            TOLERANCE * 100.0
        );
        // Where the cost lands: the SQ thread spins and must be found in its class. Alone it burns
        // most of a core (2.9 s of 3 s here); beside the other integration tests on 2 CPUs it was
        // measured getting 1.0-1.4 s, so the bound is a quarter of a core.
        if m.contains(&"sqpoll") {
            let sq = a.class_s["sqpoll"].as_f64().unwrap_or(0.0);
            assert!(sq >= 0.25 * 3.0, "{target} {m:?}: the sqpoll class holds {sq:.2} s of a 3 s window");
        }
    }
}

#[test]
fn classes_sum_to_system_busy_time() {
    // A disk with interrupts (the machine's own, under the build directory).
    let dir = tempfile::Builder::new().prefix("iolab-test-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let f = dir.path().join("data.img");
    std::fs::write(&f, vec![0x33u8; 32 << 20]).unwrap();
    check(f.to_str().unwrap());

    // A device without interrupts: loop over a file in RAM, whose I/O a kworker (rest of system) does.
    let ram_dir = std::path::Path::new("/dev/shm");
    if unsafe { libc::geteuid() } != 0 || !ram_dir.is_dir() {
        eprintln!("skipped the RAM-device half: needs root, losetup and /dev/shm");
        return;
    }
    let img = tempfile::Builder::new().prefix("iolab-acct-").tempfile_in(ram_dir).unwrap();
    std::fs::write(img.path(), vec![0x44u8; 64 << 20]).unwrap();
    let out = Command::new("losetup").args(["-f", "--show"]).arg(img.path()).output().unwrap();
    assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
    let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let result = std::panic::catch_unwind(|| check(&dev));
    let _ = Command::new("losetup").args(["-d", &dev]).status();
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
