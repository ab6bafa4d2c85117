//! `iolab precondition` on a file: sequential fills, then random-write rounds judged by the
//! SNIA steady-state rule, with a JSON report.
use std::process::Command;

#[test]
fn fills_then_rounds_until_steady_or_the_limit() {
    let dir = tempfile::Builder::new().prefix("iolab-pc-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let f = dir.path().join("dev.img");
    std::fs::File::create(&f).unwrap().set_len(32 << 20).unwrap();
    let json = dir.path().join("pc.json");
    let out = Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["precondition", "--fills", "2", "--round", "300ms", "--max-rounds", "7", "-q", "--json"])
        .arg(&json)
        .arg(&f)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(matches!(out.status.code(), Some(0) | Some(1)), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(text.matches("fill ").count(), 2, "{text}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rounds = r["round_iops"].as_array().unwrap();
    assert!((5..=7).contains(&rounds.len()) || r["reached_steady_state"] == true, "{r}");
    assert!(rounds.iter().all(|x| x.as_f64().unwrap() > 0.0));
    assert_eq!(r["reached_steady_state"] == true, out.status.code() == Some(0));
    if rounds.len() >= 5 {
        assert!(r["steady"]["range_fraction"].as_f64().is_some());
    }
    // The whole file was written: no hole left.
    use std::os::unix::fs::MetadataExt;
    assert!(std::fs::metadata(&f).unwrap().blocks() * 512 >= 32 << 20);
}

#[test]
fn refuses_a_block_device_without_consent() {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("b.img");
    std::fs::write(&f, vec![7u8; 4 << 20]).unwrap();
    let Ok(out) = Command::new("losetup").args(["-f", "--show"]).arg(&f).output() else { return };
    if !out.status.success() {
        eprintln!("skipped: losetup failed");
        return;
    }
    let dev = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let r = Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["precondition", "--round", "100ms", "--max-rounds", "1", "-q", &dev])
        .output()
        .unwrap();
    let _ = Command::new("losetup").args(["-d", &dev]).status();
    assert_eq!(r.status.code(), Some(2), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(String::from_utf8_lossy(&r.stderr).contains("--destructive"));
    assert!(std::fs::read(&f).unwrap().iter().all(|b| *b == 7), "the device was not touched");
}

/// `--max-rounds 0` leaves nothing to judge: one line, exit 2, the target untouched (it exited 1
/// saying nothing, or after the fills).
#[test]
fn no_rounds_is_refused_before_writing() {
    let dir = tempfile::Builder::new().prefix("iolab-pc-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let f = dir.path().join("dev.img");
    std::fs::write(&f, vec![7u8; 1 << 20]).unwrap();
    for fills in ["0", "2"] {
        let out = Command::new(env!("CARGO_BIN_EXE_iolab"))
            .args(["precondition", "--fills", fills, "--max-rounds", "0", "-q"])
            .arg(&f)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("iolab: ") && err.contains("--max-rounds 0"), "{err}");
        assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
        assert!(std::fs::read(&f).unwrap().iter().all(|b| *b == 7), "the target was not touched");
    }
}
