//! The CPU classes account for the whole system's busy time. Alone in its own test binary so
//! no other test loads the machine while it measures.
use std::process::Command;

/// Stated tolerance: on an otherwise idle machine, |busy - sum of classes| <= 10 % of busy.
/// What remains is interrupt time that lands on idle CPUs and tasks that exit in the window.
const TOLERANCE: f64 = 0.10;

#[test]
fn classes_sum_to_system_busy_time() {
    let dir = tempfile::Builder::new().prefix("iolab-test-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let f = dir.path().join("data.img");
    std::fs::write(&f, vec![0x33u8; 32 << 20]).unwrap();
    let json = dir.path().join("r.json");
    let mut worst = 0.0f64;
    for args in [&["-i", "psync"][..], &["-i", "io_uring", "--qd", "8"], &["-i", "io_uring", "--submit", "sqpoll", "--qd", "8"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_iolab")).arg("run").args(args)
            .args(["--runtime", "3s", "-q", "--json"]).arg(&json).arg(&f).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let acc = &rec["cost"]["accounting"];
        let frac = acc["unaccounted_fraction"].as_f64().unwrap();
        eprintln!("{args:?}: busy {} s, classes {} s, unaccounted {:.1} %", acc["busy_s"], acc["classes_s"], frac * 100.0);
        worst = worst.max(frac.abs());
    }
    assert!(worst <= TOLERANCE, "classes miss {:.1} % of system busy time (tolerance {:.0} %)", worst * 100.0, TOLERANCE * 100.0);
}
