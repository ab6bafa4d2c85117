//! The CPU classes account for the whole system's busy time. Alone in its own test binary so
//! no other test loads the machine while it measures.
//!
//! Stated tolerance, on an otherwise idle machine: the classes cover system busy time within
//! 20 %, on a disk with interrupts and on a loop device over a RAM-backed file. What remains is
//! work Linux charges to no visible task: interrupt handling that lands on idle CPUs, and
//! kernel worker threads that exit inside the window. iolab reports it as `unaccounted_s`.
//! Measured on the 2-core development VM: 1.7-14 % (virtio disk), 3.6-9.2 % (loop over tmpfs),
//! under 2 % for psync on zram.
use std::process::Command;

const TOLERANCE_NO_IRQ: f64 = 0.20;
const TOLERANCE_WITH_IRQ: f64 = 0.20;

fn unaccounted(target: &str, args: &[&str]) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_iolab")).arg("run").args(args)
        .args(["--runtime", "3s", "-q", "--json"]).arg(&json).arg(target).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let acc = &rec["cost"]["accounting"];
    let frac = acc["unaccounted_fraction"].as_f64().unwrap();
    eprintln!("{target} {args:?}: busy {:.2} s, classes {:.2} s, unaccounted {:.1} %", acc["busy_s"].as_f64().unwrap(), acc["classes_s"].as_f64().unwrap(), frac * 100.0);
    frac
}

const MODES: [&[&str]; 3] = [&["-i", "psync"], &["-i", "io_uring", "--qd", "8"], &["-i", "io_uring", "--submit", "sqpoll", "--qd", "8"]];

#[test]
fn classes_sum_to_system_busy_time() {
    // A disk with interrupts (the machine's own, under the build directory).
    let dir = tempfile::Builder::new().prefix("iolab-test-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let f = dir.path().join("data.img");
    std::fs::write(&f, vec![0x33u8; 32 << 20]).unwrap();
    let worst_irq = MODES.iter().map(|m| unaccounted(f.to_str().unwrap(), m).abs()).fold(0.0, f64::max);

    // A device without interrupts: loop over a file in RAM.
    let ram_dir = std::path::Path::new("/dev/shm");
    let root = unsafe { libc::geteuid() } == 0;
    let mut worst_ram = None;
    if root && ram_dir.is_dir() {
        let img = tempfile::Builder::new().prefix("iolab-acct-").tempfile_in(ram_dir).unwrap();
        img.as_file().set_len(64 << 20).unwrap();
        std::fs::write(img.path(), vec![0x44u8; 64 << 20]).unwrap();
        let out = Command::new("losetup").args(["-f", "--show"]).arg(img.path()).output();
        if let Some(out) = out.ok().filter(|o| o.status.success()) {
            let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
            let w = MODES.iter().map(|m| unaccounted(&dev, m).abs()).fold(0.0, f64::max);
            let _ = Command::new("losetup").args(["-d", &dev]).status();
            worst_ram = Some(w);
        }
    }
    match worst_ram {
        Some(w) => assert!(w <= TOLERANCE_NO_IRQ, "without device interrupts the classes miss {:.1} % (tolerance {:.0} %)", w * 100.0, TOLERANCE_NO_IRQ * 100.0),
        None => eprintln!("skipped the RAM-device half: needs root, losetup and /dev/shm"),
    }
    assert!(worst_irq <= TOLERANCE_WITH_IRQ, "classes miss {:.1} % of busy time (tolerance {:.0} %)", worst_irq * 100.0, TOLERANCE_WITH_IRQ * 100.0);
}
