//! Devices as a dimension, end to end on two loop devices: every target of a suite's plan is
//! checked before anything runs; S4 draws a line per device in every figure and S2 Fig 5 one
//! device against both from one suite run; the pages render in Chromium.
use crate::common::{iolab, Run};
use crate::report::{assert_renders, files};
use crate::sweep::LoopDevices;
use iolab::store::Store;
use std::collections::BTreeMap;
use std::path::Path;

/// Each series of an SVG figure by its full name (the legend entry's tooltip); empty for a
/// "not available here" panel.
fn series(svg: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(svg).unwrap();
    text.split("<g class=\"legend\"><title>").skip(1).map(|s| s[..s.find('<').unwrap()].replace("&amp;", "&")).collect()
}

/// A figure's series grouped by what precedes their device: each group must have one series per
/// device, named by it.
fn per_device(svg: &Path, devices: &[&str]) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in series(svg) {
        let (base, dev) = s.rsplit_once(" · ").unwrap_or_else(|| panic!("{}: series {s:?} names no device", svg.display()));
        groups.entry(base.to_string()).or_default().push(dev.to_string());
    }
    for (base, devs) in &groups {
        let mut devs = devs.clone();
        devs.sort();
        assert!(devs.iter().all(|d| devices.contains(&d.as_str())), "{}: {base}: {devs:?}", svg.display());
        if !base.starts_with("run ") {
            assert_eq!(devs, devices, "{}: {base} is not drawn once per device", svg.display());
        }
    }
    groups
}

fn suite(dir: &Path, db: &Path, args: &[&str]) -> Run {
    let mut all = vec!["suite", "run", "--quick", "-q", "--db", db.to_str().unwrap()];
    all.extend(args);
    // A journal of its own: the suites set the scheduler through it, beside other tests' runs.
    let out = std::process::Command::new(crate::common::BIN)
        .args(&all)
        .env("IOLAB_JOURNAL", dir.join("journal.json"))
        .env("TMPDIR", dir)
        .output()
        .unwrap();
    Run::from(out, all.iter().map(|s| s.to_string()).collect())
}

#[test]
fn two_devices_are_checked_first_then_each_is_a_line_in_s4_and_s2_draws_one_against_both() {
    let dir = tempfile::Builder::new().prefix("iolab-targets-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let d = dir.path();
    let files_: Vec<String> = (0..2)
        .map(|i| {
            let p = d.join(format!("dev{i}.img"));
            std::fs::write(&p, vec![0u8; 32 << 20]).unwrap();
            p.display().to_string()
        })
        .collect();
    let Some(lo) = LoopDevices::over(&[&files_[0], &files_[1]]) else { return };
    let (a, b) = (lo.devs[0].clone(), lo.devs[1].clone());
    let names: Vec<String> = lo.devs.iter().map(|p| p.trim_start_matches("/dev/").to_string()).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let db = d.join("iolab.db");

    // Without consent, both devices are refused before anything is stored or runs; the dry run
    // lists each with its verdict.
    let dry = suite(d, &db, &["S4", "--part", "S4.1", "--dry-run", &a, &b]);
    assert_eq!(dry.code, 2, "{}", dry.describe());
    for dev in [&a, &b] {
        assert!(
            dry.stdout.contains(&format!(
                "  {dev}: read and written by 8 of 16 configurations; REFUSED: refusing to write to block device {dev} without consent"
            )),
            "{}",
            dry.stdout
        );
    }
    let refused = suite(d, &db, &["S4", "--part", "S4.1", &a, &b]);
    assert_eq!(refused.code, 2, "{}", refused.describe());
    assert!(
        refused.stderr.contains(&format!("pass --destructive {a}")) && refused.stderr.contains("1 more of the plan's targets refused"),
        "{}",
        refused.stderr
    );
    assert!(Store::open_existing(&db).unwrap().sweep_infos().unwrap().is_empty(), "a refused plan stores no sweep");

    let consent = ["--destructive", a.as_str(), "--destructive", b.as_str()];
    for part in ["S4.1", "S4.4"] {
        let mut args = vec!["S4", "--part", part, a.as_str(), b.as_str()];
        args.extend(consent);
        suite(d, &db, &args).assert_ok();
    }
    let mut args = vec!["S2", "--part", "S2.2", a.as_str(), b.as_str()];
    args.extend(consent);
    suite(d, &db, &args).assert_ok();
    // The targets are the plan's identity: the same devices again is the same, finished sweep.
    let mut again = vec!["S4", "--part", "S4.1", a.as_str(), b.as_str()];
    again.extend(consent);
    assert!(suite(d, &db, &again).assert_ok().stdout.contains("S4.1-latency: already done"));

    // A plan of one's own: the command line's targets are the dimension's values, a set joined
    // by '+', with this command's consent.
    std::fs::write(d.join("plan.toml"), "ios = 300\n[matrix]\nrw = [\"randwrite\"]\n").unwrap();
    let (both, plan) = (format!("{a}+{b}"), d.join("plan.toml"));
    let mut args = vec!["sweep", "-q", "--db", db.to_str().unwrap(), plan.to_str().unwrap(), a.as_str(), both.as_str()];
    args.extend(consent);
    iolab(&args).assert_ok();
    let store = Store::open_existing(&db).unwrap();
    let sweep = store.sweep_infos().unwrap().iter().map(|s| s.id).max().unwrap();
    let runs = store.list_runs(&iolab::store::RunFilter { sweep: Some(sweep), ..Default::default() }).unwrap();
    let mut got: Vec<(String, String)> = runs.iter().map(|r| (r.config_key.clone().unwrap(), r.devices.clone().unwrap())).collect();
    got.sort();
    let key = |t: &str| format!("interface=psync,submit=syscall,complete=irq,rw=randwrite,bs=4096,qd=1,threads=1,target={t}");
    assert_eq!(got, [(key(&a), names[0].to_string()), (key(&both), format!("{},{}", names[0], names[1]))]);

    // S4: every figure has one line per device.
    let out = d.join("s4");
    iolab(&["report", "--db", db.to_str().unwrap(), "--suite", "S4", "--out", out.to_str().unwrap(), "-q"]).assert_ok();
    let svgs = files(&out.join("figures"), "svg");
    let mut drawn = 0;
    for svg in &svgs {
        if series(svg).is_empty() {
            continue; // not available here (no energy source for the power figure)
        }
        let groups = per_device(svg, &names);
        drawn += 1;
        if svg.to_string_lossy().contains("s4-1-latency") {
            assert_eq!(groups.len(), 4, "{}: one line per rw and device: {groups:?}", svg.display());
        }
    }
    assert_eq!(drawn, 5, "S4.1's two latency figures and S4.4's three GC figures (mean, p99, IOPS): {svgs:?}");
    assert_renders("two_devices...(S4)", &out, svgs.len(), d);

    // S2 Fig 5: one device, then both together, from the one suite run; then 1 against 2.
    let out = d.join("s2");
    iolab(&["report", "--db", db.to_str().unwrap(), "--suite", "S2", "--out", out.to_str().unwrap(), "-q"]).assert_ok();
    let svgs = files(&out.join("figures"), "svg");
    let titles: Vec<String> = svgs.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(
        titles,
        [
            format!("s2-2-jcurve-3-j-curves-fig-5a-1-device-{}-mean-latency-against-iops.svg", names[0]),
            format!("s2-2-jcurve-3-j-curves-fig-5b-2-devices-together-{}-{}-mean-latency-against-iops.svg", names[0], names[1]),
        ]
    );
    assert!(svgs.iter().all(|s| !series(s).is_empty()), "both J-curve figures have lines");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("S2 one device against 2 devices together") && html.contains("all / 1"), "no 1-against-N table");
    assert_renders("two_devices...(S2)", &out, svgs.len(), d);
    drop(lo);
}
