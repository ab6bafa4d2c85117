//! Energy sources, all on fixtures: powercap trees (tests/fixtures/energy/powercap, built by
//! make_powercap_fixture.py with real symlinks and "%d\n" bytes), counter sequences with wraps,
//! stuck counters and read errors, a perf power PMU tree, a fake ipmitool replaying recorded
//! outputs, a loopback Redfish server (plain HTTP: the scheme is taken from the URL), meter logs
//! with a known integral, offset and drift, a fake NVML built with cc, and this machine itself,
//! which has no source.
use crate::common;
use iolab::energy::integrate::integrate_counter;
use iolab::energy::meterlog::parse_meter_log;
use iolab::energy::{self, EnergyConfig, EnergyMeter, RedfishConfig};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/energy")
}

/// Copy a tree, keeping symlinks as symlinks.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let ft = std::fs::symlink_metadata(&src).unwrap().file_type();
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if ft.is_dir() {
            copy_tree(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
            let mut p = std::fs::metadata(&dst).unwrap().permissions();
            p.set_mode(p.mode() | 0o600);
            std::fs::set_permissions(&dst, p).unwrap();
        }
    }
}

fn machine(name: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    copy_tree(&fixtures().join("powercap").join(name), d.path());
    let sys = d.path().join("sys");
    (d, sys)
}

fn cfg_with(sources: &[&str], sys: &Path) -> EnergyConfig {
    EnergyConfig {
        sources: sources.iter().map(|s| s.to_string()).collect(),
        sysfs_root: sys.to_path_buf(),
        sample_interval: Duration::from_millis(20),
        ..Default::default()
    }
}

fn zone(sys: &Path, id: &str) -> PathBuf {
    sys.join("class/powercap").join(id).join("energy_uj")
}

fn set(sys: &Path, id: &str, v: u64) {
    std::fs::write(zone(sys, id), format!("{v}\n")).unwrap();
}

#[test]
fn fixture_files_match_sysfs_bytes() {
    let (_d, sys) = machine("intel-2socket-server");
    assert!(std::fs::symlink_metadata(sys.join("class/powercap/intel-rapl:1")).unwrap().file_type().is_symlink());
    assert_eq!(std::fs::read_to_string(zone(&sys, "intel-rapl:1")).unwrap(), "262140000000\n");
    assert_eq!(std::fs::read_to_string(sys.join("class/powercap/intel-rapl:1/max_energy_range_uj")).unwrap(), "262143328850\n");
    // Git keeps no file modes but the executable bit, so the kernel's root-only 0400 on
    // energy_uj is not checked here; the permission path is tested with a mode set at run time.
    assert!(fixtures().join("powercap/intel-2socket-server/sys/devices/virtual/powercap/intel-rapl/intel-rapl:0/energy_uj").is_file());
}

#[test]
fn client_with_psys_and_mmio_dedups_and_never_mixes_scopes() {
    let (_d, sys) = machine("intel-client-psys-mmio");
    let st = energy::probe(&cfg_with(&["rapl"], &sys));
    assert_eq!(st.len(), 1);
    let s = &st[0];
    assert!(s.available, "{s:?}");
    assert_eq!(s.scopes, vec!["cpu_package", "dram", "platform"]);
    let notes = s.notes.join("\n");
    assert!(notes.contains("intel-rapl-mmio:0 (package-0) duplicates intel-rapl:0"), "{notes}");
    assert!(notes.contains("package-0/core"), "{notes}");
    assert!(!s.detail.contains("intel-rapl-mmio:0"), "mmio copy must not be summed: {}", s.detail);

    // Live: each scope advances separately; the report has one entry per scope and no total.
    let meter = EnergyMeter::start(&cfg_with(&["rapl"], &sys));
    std::thread::sleep(Duration::from_millis(60));
    set(&sys, "intel-rapl:0", 4065340592 + 5_000_000);
    set(&sys, "intel-rapl-mmio:0", 4065301119 + 5_000_000);
    set(&sys, "intel-rapl:0:2", 612339802 + 1_000_000);
    set(&sys, "intel-rapl:1", 9911728837 + 9_000_000);
    std::thread::sleep(Duration::from_millis(60));
    let r = meter.stop();
    assert_eq!(r.status, "measured", "{r:?}");
    let by: Vec<(&str, f64)> = r.sources.iter().map(|s| (s.scope.as_str(), s.joules)).collect();
    assert_eq!(by.len(), 3, "{by:?}");
    let j = |sc: &str| by.iter().find(|b| b.0 == sc).unwrap().1;
    assert!((j("cpu_package") - 5.0).abs() < 1e-9, "mmio copy not added: {by:?}");
    assert!((j("dram") - 1.0).abs() < 1e-9);
    assert!((j("platform") - 9.0).abs() < 1e-9);
    let js = serde_json::to_string(&r).unwrap();
    assert!(!js.contains("total"), "no cross-scope total: {js}");
}

#[test]
fn two_socket_server_sums_sockets_and_corrects_a_wrap() {
    let (_d, sys) = machine("intel-2socket-server");
    let range = 262143328850u64;
    let meter = EnergyMeter::start(&cfg_with(&["rapl"], &sys));
    // intel-rapl:1 follows the recorded sequence through its wrap; the others advance steadily.
    let seq: Vec<u64> =
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(fixtures().join("powercap/energy_uj_sequences.json")).unwrap())
            .unwrap()["intel-2socket-server/intel-rapl:1/energy_uj"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
    assert_eq!(seq[0], 262140000000);
    for (k, v) in seq.iter().enumerate().skip(1) {
        std::thread::sleep(Duration::from_millis(70));
        set(&sys, "intel-rapl:1", *v);
        set(&sys, "intel-rapl:0", 183221490071 + k as u64 * 2_000_000);
        set(&sys, "intel-rapl:0:0", 51260016478 + k as u64 * 500_000);
        set(&sys, "intel-rapl:1:0", 7733901220 + k as u64 * 500_000);
    }
    std::thread::sleep(Duration::from_millis(70));
    let mut r = meter.stop();
    let pkg = r.sources.iter().find(|s| s.scope == "cpu_package").expect("package measured");
    let socket1 = (3_000_000 + (range - 262143000000 + 1_500_000) + 3_000_000) as f64 / 1e6;
    assert!((pkg.joules - (socket1 + 6.0)).abs() < 1e-9, "{} vs {}", pkg.joules, socket1 + 6.0);
    assert_eq!(pkg.wraps, 1);
    assert!(pkg.coverage > 0.99, "{pkg:?}");
    assert!(pkg.samples >= 5);
    let dram = r.sources.iter().find(|s| s.scope == "dram").unwrap();
    assert!((dram.joules - 3.0).abs() < 1e-9);
    assert!(pkg.method.contains("package-0 (intel-rapl:0) + package-1 (intel-rapl:1)"), "{}", pkg.method);
    r.with_io(1_000_000, 4096 * 1_000_000);
    let pkg = r.sources.iter().find(|s| s.scope == "cpu_package").unwrap();
    let e = pkg.mean_watts * pkg.window_s;
    assert!((pkg.iops_per_joule.unwrap() - 1e6 / e).abs() < 1e-6);
    assert!((pkg.bytes_per_joule.unwrap() - 4096e6 / e).abs() < 1e-3);
}

#[test]
fn read_errors_are_gaps_not_zeros() {
    let (_d, sys) = machine("amd-zen");
    let meter = EnergyMeter::start(&cfg_with(&["rapl"], &sys));
    std::thread::sleep(Duration::from_millis(50));
    // EIO-like: the file vanishes and reading fails for a while.
    let p = zone(&sys, "intel-rapl:0");
    let real = std::fs::canonicalize(&p).unwrap();
    std::fs::remove_file(&real).unwrap();
    std::thread::sleep(Duration::from_millis(80));
    std::fs::write(&real, format!("{}\n", 29012331771u64 + 7_000_000)).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let r = meter.stop();
    let pkg = r.sources.iter().find(|s| s.scope == "cpu_package").expect("measured");
    assert!(pkg.read_errors >= 2, "{pkg:?}");
    assert!((pkg.joules - 7.0).abs() < 1e-9, "counter stays exact across the gap");
    assert!(pkg.largest_gap_s >= 0.08, "{pkg:?}");
    assert!(pkg.notes.iter().any(|n| n.contains("gaps")), "{pkg:?}");
}

#[test]
fn stuck_counter_is_unavailable_with_a_reason() {
    let (_d, sys) = machine("amd-zen");
    let meter = EnergyMeter::start(&cfg_with(&["rapl"], &sys));
    std::thread::sleep(Duration::from_millis(100));
    let r = meter.stop();
    assert_eq!(r.status, "unavailable");
    assert!(r.sources.is_empty());
    assert!(r.reasons.iter().any(|x| x.contains("never advanced")), "{:?}", r.reasons);
}

#[test]
fn recorded_sequences_wrap_stuck_eio() {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures().join("powercap/energy_uj_sequences.json")).unwrap()).unwrap();
    let seq =
        |k: &str| -> Vec<(f64, Option<f64>)> { v[k].as_array().unwrap().iter().enumerate().map(|(i, x)| (i as f64, x.as_f64())).collect() };
    let w = integrate_counter(&seq("intel-2socket-server/intel-rapl:1/energy_uj"), 1e-6, Some(262143328850.0), 1000.0, (0.0, 3.0));
    assert!((w.joules - 7.82885).abs() < 1e-9 && w.wraps == 1);
    let s = integrate_counter(&seq("vm-passthrough-stuck/energy_uj"), 1e-6, Some(262143328850.0), 1000.0, (0.0, 2.0));
    assert!(s.invalid.is_some() && s.joules == 0.0);
    let e = integrate_counter(&seq("transient-eio/energy_uj"), 1e-6, Some(262143328850.0), 1000.0, (0.0, 2.0));
    assert_eq!((e.read_errors, e.joules), (1, 2.0));
    // Double wrap hidden in one long interval: refused, not guessed.
    let d = integrate_counter(&[(0.0, Some(1.0)), (600.0, Some(2.0))], 1e-6, Some(262143328850.0), 1000.0, (0.0, 600.0));
    assert!(d.invalid.unwrap().contains("wrap-safe"));
}

#[test]
fn permission_error_is_explained() {
    let e = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
    let m = energy::rapl::explain_read_error(Path::new("/sys/class/powercap/intel-rapl:0/energy_uj"), &e);
    assert!(m.contains("CVE-2020-8694") && m.contains("root"), "{m}");
}

#[test]
fn vm_tree_without_powercap_is_unavailable() {
    let d = tempfile::tempdir().unwrap();
    copy_tree(&fixtures().join("powercap/vm-no-rapl"), d.path());
    let st = energy::probe(&cfg_with(&["rapl", "perf"], &d.path().join("sys")));
    assert!(st.iter().all(|s| !s.available));
    assert!(st[0].detail.contains("class/powercap"), "{:?}", st[0]);
    assert!(st[1].detail.contains("bus/event_source/devices/power"), "{:?}", st[1]);
}

#[test]
fn perf_power_pmu_tree() {
    let sys = fixtures().join("perf/sys");
    let d = energy::perf_power::describe(&sys).unwrap();
    assert_eq!(d.pmu_type, 32);
    assert_eq!(d.cpus, vec![0]);
    let names: Vec<(&str, &str, u64)> = d.events.iter().map(|e| (e.name.as_str(), e.scope.as_str(), e.config)).collect();
    assert_eq!(names, vec![("energy-pkg", "cpu_package", 2), ("energy-ram", "dram", 3), ("energy-psys", "platform", 5)]);
    assert_eq!(d.events[0].scale, 2.328_306_436_538_696_3e-10);
    assert!(d.notes.iter().any(|n| n.contains("energy-cores")));
    assert_eq!(energy::perf_power::parse_cpulist("0-1,28"), Some(vec![0, 1, 28]));
    // No such PMU type on this machine: the open fails with a reason, never a number.
    let st = energy::probe(&cfg_with(&["perf"], &sys));
    assert!(!st[0].available && st[0].detail.contains("perf_event_open"), "{:?}", st[0]);
}

// ---- ipmitool ----

fn fake_ipmitool(dir: &Path, body: &str) -> PathBuf {
    let p = dir.join("ipmitool");
    std::fs::write(&p, format!("#!/bin/sh\necho \"LC_ALL=$LC_ALL ARGS=$*\" >> '{}/calls'\n{body}\n", dir.display())).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn ipmi_cfg(prog: PathBuf) -> EnergyConfig {
    EnergyConfig { sources: vec!["ipmi".into()], ipmitool: Some(prog), ..Default::default() }
}

#[test]
fn ipmitool_outputs_parse() {
    let dir = fixtures().join("ipmitool");
    for f in ["dcmi_power_reading.1.8.18.txt", "dcmi_power_reading.1.8.19.C-locale.txt"] {
        let r = energy::ipmi::parse_dcmi(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap();
        assert_eq!(r.instantaneous_w, 215.0, "{f}");
        assert_eq!(r.average_w, Some(176.0));
        assert_eq!(r.state.as_deref(), Some("activated"));
    }
    let r = energy::ipmi::parse_dcmi(&std::fs::read_to_string(dir.join("dcmi_power_reading.1.8.19.C-locale.txt")).unwrap()).unwrap();
    assert_eq!(r.timestamp.as_deref(), Some("03/06/25 19:30:35 UTC"));
    let e = energy::ipmi::parse_dcmi(&std::fs::read_to_string(dir.join("dcmi_power_reading.1.8.18.deactivated-zero.txt")).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("deactivated"), "{e}");
    let t = std::fs::read_to_string(dir.join("dcmi_power_reading.1.8.18.txt"))
        .unwrap()
        .replace("Thu Mar  6 19:30:35 2025", "Thu Jan  1 00:00:00 1970");
    assert!(energy::ipmi::parse_dcmi(&t).unwrap_err().to_string().contains("1970"));
    let t = std::fs::read_to_string(dir.join("dcmi_power_reading.1.8.18.txt")).unwrap().replace("  215 Watts", "    0 Watts");
    assert!(energy::ipmi::parse_dcmi(&t).unwrap_err().to_string().contains("0 W"));
}

#[test]
fn fake_ipmitool_on_path_measures_bmc_power() {
    let d = tempfile::tempdir().unwrap();
    let fixture = fixtures().join("ipmitool/dcmi_power_reading.1.8.19.C-locale.txt");
    let prog = fake_ipmitool(d.path(), &format!("cat '{}'", fixture.display()));
    assert_eq!(energy::ipmi::lookup_in_path("ipmitool", &format!("/nonexistent:{}", d.path().display())), Some(prog.clone()));
    let meter = EnergyMeter::start(&ipmi_cfg(prog));
    std::thread::sleep(Duration::from_millis(2300));
    let r = meter.stop();
    assert_eq!(r.status, "measured", "{r:?}");
    let s = &r.sources[0];
    assert_eq!((s.source.as_str(), s.scope.as_str()), ("ipmi", "bmc_system"));
    assert!((s.mean_watts - 215.0).abs() < 1e-9, "{s:?}");
    assert!(s.coverage > 0.95, "{s:?}");
    assert!((s.joules - 215.0 * s.window_s * s.coverage).abs() < 1e-6);
    assert!(s.samples >= 3, "{s:?}");
    let calls = std::fs::read_to_string(d.path().join("calls")).unwrap();
    assert!(calls.lines().all(|l| l.starts_with("LC_ALL=C ARGS=dcmi power reading")), "{calls}");
}

#[test]
fn ipmitool_failures_are_reasons() {
    let d = tempfile::tempdir().unwrap();
    let fixture = fixtures().join("ipmitool/dcmi_power_reading.1.8.18.deactivated-zero.txt");
    let st = energy::probe(&ipmi_cfg(fake_ipmitool(d.path(), &format!("cat '{}'", fixture.display()))));
    assert!(!st[0].available && st[0].detail.contains("deactivated"), "{:?}", st[0]);
    let d2 = tempfile::tempdir().unwrap();
    let st = energy::probe(&ipmi_cfg(fake_ipmitool(d2.path(), "echo 'DCMI request failed because: Unspecified error (ff)' >&2; exit 1")));
    assert!(!st[0].available && st[0].detail.contains("Unspecified error (ff)"), "{:?}", st[0]);
    let st = energy::probe(&ipmi_cfg(PathBuf::from("/nonexistent/ipmitool")));
    assert!(!st[0].available && st[0].detail.contains("cannot run"), "{:?}", st[0]);
}

// ---- Redfish ----

/// A tiny HTTP/1.1 server on 127.0.0.1 answering GETs from a route table with Basic auth.
fn redfish_server(routes: Vec<(&'static str, String)>, auth: &'static str) -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            if r.read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            let mut authorized = false;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).is_err() || h.trim().is_empty() {
                    break;
                }
                if h.to_ascii_lowercase().starts_with("authorization:") && h.trim_end().ends_with(auth) {
                    authorized = true;
                }
            }
            let (code, body) = if !authorized {
                ("401 Unauthorized", "{}".to_string())
            } else {
                match routes.iter().find(|r| r.0 == path) {
                    Some((_, b)) => ("200 OK", b.clone()),
                    None => ("404 Not Found", "{}".to_string()),
                }
            };
            let _ = write!(
                s,
                "HTTP/1.1 {code}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}")
}

// "admin:secret"
const BASIC: &str = "Basic YWRtaW46c2VjcmV0";

fn chassis_routes(env_metrics: bool) -> Vec<(&'static str, String)> {
    let chassis = if env_metrics {
        r#"{"Id":"1U","EnvironmentMetrics":{"@odata.id":"/redfish/v1/Chassis/1U/EnvironmentMetrics"},"Power":{"@odata.id":"/redfish/v1/Chassis/1U/Power"}}"#
    } else {
        r#"{"Id":"1U","Power":{"@odata.id":"/redfish/v1/Chassis/1U/Power"}}"#
    };
    vec![
        ("/redfish/v1/Chassis", r#"{"Members":[{"@odata.id":"/redfish/v1/Chassis/1U"}],"Members@odata.count":1}"#.to_string()),
        ("/redfish/v1/Chassis/1U", chassis.to_string()),
        ("/redfish/v1/Chassis/1U/EnvironmentMetrics", r#"{"PowerWatts":{"DataSourceUri":"/redfish/v1/Chassis/1U/Sensors/PowerWatts","Reading":300.0},"EnergykWh":{"Reading":1234.5}}"#.to_string()),
        // Two PowerControl entries: the second is a sub-domain and must not be added.
        ("/redfish/v1/Chassis/1U/Power", r#"{"PowerControl":[{"MemberId":"0","PowerConsumedWatts":250,"PowerMetrics":{"AverageConsumedWatts":245}},{"MemberId":"1","PowerConsumedWatts":100}]}"#.to_string()),
    ]
}

#[test]
fn redfish_environment_metrics_over_loopback() {
    let url = redfish_server(chassis_routes(true), BASIC);
    let rf = RedfishConfig { url, username: Some("admin".into()), password: Some("secret".into()), ..Default::default() };
    assert!(!format!("{rf:?}").contains("secret"), "password never printed");
    let cfg = EnergyConfig { sources: vec!["redfish".into()], redfish: Some(rf), ..Default::default() };
    let meter = EnergyMeter::start(&cfg);
    std::thread::sleep(Duration::from_millis(1300));
    let r = meter.stop();
    let s = r.sources.first().unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!((s.source.as_str(), s.scope.as_str()), ("redfish", "bmc_system"));
    assert!((s.mean_watts - 300.0).abs() < 1e-9 && s.coverage > 0.95, "{s:?}");
    assert!(s.method.contains("EnvironmentMetrics"));
}

#[test]
fn redfish_legacy_power_with_credentials_file() {
    let url = redfish_server(chassis_routes(false), BASIC);
    let d = tempfile::tempdir().unwrap();
    let cred = d.path().join("cred");
    std::fs::write(&cred, "admin:secret\n").unwrap();
    let rf = RedfishConfig { url: url.clone(), credentials_file: Some(cred), ..Default::default() };
    let st = energy::probe(&EnergyConfig { sources: vec!["redfish".into()], redfish: Some(rf), ..Default::default() });
    assert!(st[0].available, "{:?}", st[0]);
    assert!(st[0].detail.contains("legacy Power"), "{:?}", st[0]);
    assert!(st[0].notes[0].contains("250 W"), "first PowerControl entry only: {:?}", st[0].notes);
    // Wrong password: a reason, no number.
    let rf = RedfishConfig { url, username: Some("admin".into()), password: Some("wrong".into()), ..Default::default() };
    let st = energy::probe(&EnergyConfig { sources: vec!["redfish".into()], redfish: Some(rf), ..Default::default() });
    assert!(!st[0].available && st[0].detail.contains("authentication refused"), "{:?}", st[0]);
}

// ---- meter logs ----

const T0: f64 = 1_741_289_435.0; // 2025-03-06T19:30:35Z

/// Host-time samples of w(t) = 100 + (t − T0) W at 1 Hz from T0−10 to T0+70, written with the
/// meter's clock: m = m0 + (h − h0)(1 + d), m0 = h0 − offset.
fn meter_points(offset_s: f64, drift_ppm: f64) -> Vec<(f64, f64)> {
    let h0 = T0 - 10.0;
    let m0 = h0 - offset_s;
    (0..=80)
        .map(|i| {
            let h = h0 + i as f64;
            (m0 + (h - h0) * (1.0 + drift_ppm * 1e-6), 100.0 + (h - T0))
        })
        .collect()
}

fn iso(t: f64) -> String {
    let secs = t.floor() as i64;
    let (days, rem) = (secs.div_euclid(86400), secs.rem_euclid(86400));
    let (y, m, d) = iolab::energy::meterlog::civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:06.3}Z", rem / 3600, rem % 3600 / 60, (rem % 60) as f64 + (t - t.floor()))
}

#[test]
fn plain_csv_with_offset_and_drift_gives_the_known_integral() {
    let (offset, drift) = (-3.5, 200.0);
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("meter.csv");
    let mut text = String::from("timestamp,watts\n");
    for (i, (t, w)) in meter_points(offset, drift).iter().enumerate() {
        // Mix UNIX seconds and ISO 8601.
        if i % 2 == 0 {
            text.push_str(&format!("{t:.6},{w}\n"))
        } else {
            text.push_str(&format!("{},{w}\n", iso(*t)))
        }
    }
    std::fs::write(&p, text).unwrap();
    let exact = 100.0 * 60.0 + 60.0 * 60.0 / 2.0; // ∫_0^60 (100 + t) dt
    let mut cfg = EnergyConfig { meter_log: Some(p.clone()), meter_offset_s: offset, meter_drift_ppm: drift, ..Default::default() };
    let s = energy::import_meter_log(&p, &cfg, (T0, T0 + 60.0)).unwrap();
    assert_eq!(s.scope, "wall_ac");
    assert!((s.joules - exact).abs() < 1e-3, "{} vs {exact}", s.joules);
    assert!((s.coverage - 1.0).abs() < 1e-9 && s.largest_gap_s <= 1.0 + 1e-3, "{s:?}");
    assert!((s.mean_watts - 130.0).abs() < 1e-4);
    // Uncorrected, the same log gives a different (wrong) answer: the correction matters.
    cfg.meter_offset_s = 0.0;
    cfg.meter_drift_ppm = 0.0;
    let wrong = energy::import_meter_log(&p, &cfg, (T0, T0 + 60.0)).unwrap();
    assert!((wrong.joules - exact).abs() > 100.0, "{}", wrong.joules);
    // Two sync marks (meter time, host time) recover the same correction.
    let pts = meter_points(offset, drift);
    cfg.meter_sync = Some(((pts[0].0, T0 - 10.0), (pts[80].0, T0 + 70.0)));
    let synced = energy::import_meter_log(&p, &cfg, (T0, T0 + 60.0)).unwrap();
    assert!((synced.joules - exact).abs() < 1e-3, "{}", synced.joules);
    // A window the log does not cover: a reason, no number.
    assert!(energy::import_meter_log(&p, &cfg, (T0 + 1000.0, T0 + 1060.0)).is_err());
}

fn hobo_date(t: f64, tz: f64) -> String {
    let local = iso(t + tz); // YYYY-MM-DDTHH:MM:SS.sssZ
    let (y, mo, d) = (&local[2..4], &local[5..7], &local[8..10]);
    let (h, mi, s) = (local[11..13].parse::<u32>().unwrap(), &local[14..16], &local[17..19]);
    let (h12, ap) = match h {
        0 => (12, "AM"),
        1..=11 => (h, "AM"),
        12 => (12, "PM"),
        _ => (h - 12, "PM"),
    };
    format!("{mo}/{d}/{y} {h12:02}:{mi}:{s} {ap}")
}

#[test]
fn hoboware_power_and_energy_series() {
    let tz = -5.0 * 3600.0;
    let pts = meter_points(0.0, 0.0);
    let mut text = String::from("\"Plot Title: iolab rig\"\n\"#\",\"Date Time, GMT-05:00\",\"Active Power, W (LGR S/N: 20123456, SEN S/N: 20123456)\",\"Started (LGR S/N: 20123456)\"\n");
    text.push_str(&format!("1,{},,Logged\n", hobo_date(pts[0].0, tz)));
    for (i, (t, w)) in pts.iter().enumerate() {
        text.push_str(&format!("{},{},{w:.1},\n", i + 2, hobo_date(*t, tz)));
    }
    let log = parse_meter_log(&text, None).unwrap();
    assert_eq!(log.format, "hobo");
    assert_eq!(log.points.len(), 81);
    assert_eq!(log.points[10], (T0, 100.0), "GMT-05:00 applied, 12 h clock parsed");
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("hobo.csv");
    std::fs::write(&p, &text).unwrap();
    let s = energy::import_meter_log(&p, &EnergyConfig::default(), (T0, T0 + 60.0)).unwrap();
    assert!((s.joules - 7800.0).abs() < 1e-6, "{}", s.joules);

    // Cumulative "Active Energy, Wh" (preferred over power), semicolon-separated, 24 h clock.
    let mut text = String::from(
        "Plot Title: rig\n\"#\";\"Date Time, GMT+00:00\";\"Active Power, W (LGR S/N: 1)\";\"Active Energy, Wh (LGR S/N: 1)\"\n",
    );
    let mut wh = 0.0;
    for i in 0..=80 {
        let t = T0 - 10.0 + i as f64;
        let local = iso(t);
        text.push_str(&format!("{};{}/{}/{} {};{};{:.9}\n", i + 1, &local[5..7], &local[8..10], &local[0..4], &local[11..19], 150, wh));
        wh += 150.0 / 3600.0;
    }
    let log = parse_meter_log(&text, Some("hobo")).unwrap();
    assert_eq!(log.kind, iolab::energy::meterlog::SeriesKind::CumulativeJoules);
    std::fs::write(&p, &text).unwrap();
    let s = energy::import_meter_log(&p, &EnergyConfig::default(), (T0, T0 + 60.0)).unwrap();
    assert!((s.joules - 9000.0).abs() < 1e-3, "{}", s.joules);
}

#[test]
fn meter_log_is_aligned_to_a_live_window() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("live.csv");
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let text: String = (0..60).map(|i| format!("{:.3},80\n", now - 10.0 + i as f64 * 0.5)).collect();
    std::fs::write(&p, text).unwrap();
    let cfg = EnergyConfig { sources: vec!["meter".into()], meter_log: Some(p), ..Default::default() };
    let meter = EnergyMeter::start(&cfg);
    std::thread::sleep(Duration::from_millis(300));
    let r = meter.stop();
    assert!(r.window_end_unix_s > r.window_start_unix_s && r.window_start_unix_s >= now);
    let s = r.sources.first().unwrap_or_else(|| panic!("{r:?}"));
    assert!((s.mean_watts - 80.0).abs() < 1e-9 && (s.coverage - 1.0).abs() < 1e-9, "{s:?}");
    assert!((s.joules - 80.0 * r.window_s).abs() < 1e-3, "{s:?}");
}

#[test]
fn low_coverage_gives_no_ratios() {
    let mut r = energy::EnergyReport::unavailable(vec![]);
    r.status = "measured".into();
    r.sources.push(energy::SourceEnergy {
        source: "ipmi".into(),
        scope: "bmc_system".into(),
        method: "x".into(),
        joules: 100.0,
        mean_watts: 200.0,
        window_s: 1.0,
        coverage: 0.5,
        largest_gap_s: 0.5,
        samples: 1,
        read_errors: 0,
        wraps: 0,
        iops_per_joule: None,
        bytes_per_joule: None,
        notes: vec![],
        per_second_watts: vec![],
    });
    r.with_io(1000, 4096000);
    assert!(r.sources[0].iops_per_joule.is_none());
    assert!(r.sources[0].notes[0].contains("coverage"));
}

/// A meter log line whose time or power is not a finite, plausible number is a bad line, refused
/// as any malformed line is ("nan" and "inf" parse as numbers; 1e308 W made the mean infinite).
#[test]
fn meter_log_values_must_be_finite_and_plausible() {
    for (text, word) in [
        ("1000,100\nnan,100\n1002,100\n", "line 2"),
        ("1000,100\ninf,100\n1002,100\n", "line 2"),
        ("1000,100\n1001,nan\n1002,100\n", "line 2"),
        ("1000,100\n1001,inf\n1002,100\n", "line 2"),
        ("1000,100\n1001,1e308\n1002,100\n", "W"),
        ("1000,100\n1001,2e6\n1002,100\n", "W"),
        ("1000,100\n1001,-5\n1002,100\n", "negative"),
        ("1000,100\n1e300,100\n", "timestamp"),
    ] {
        let e = parse_meter_log(text, Some("csv")).unwrap_err().to_string();
        assert!(e.contains(word) && !e.contains('\n'), "{text:?}: {e}");
    }
    assert!(parse_meter_log("1000,100\n1001,999999\n", Some("csv")).is_ok(), "a large but possible reading passes");
}

/// A clock correction that is no number (from a config not made by the command line's checked
/// options) gives no energy, never "NaN W, 100 % covered"; and a report holding a non-finite
/// source fails `--require-energy`.
#[test]
fn a_non_finite_result_is_never_measured() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("m.csv");
    let text: String = (0..100).map(|i| format!("{},100\n", T0 - 10.0 + i as f64)).collect();
    std::fs::write(&p, text).unwrap();
    for (offset, drift) in [(0.0, f64::NAN), (0.0, -1e6), (0.0, 1e5), (f64::NAN, 0.0), (f64::INFINITY, 0.0), (1e12, 0.0)] {
        let cfg = EnergyConfig { meter_log: Some(p.clone()), meter_offset_s: offset, meter_drift_ppm: drift, ..Default::default() };
        let e = energy::import_meter_log(&p, &cfg, (T0, T0 + 60.0)).unwrap_err();
        assert!(e.to_string().contains("meter clock"), "{offset} s {drift} ppm: {e}");
        let mut r = energy::EnergyReport::unavailable(vec![]);
        r.window_start_unix_s = T0;
        r.window_end_unix_s = T0 + 60.0;
        r.import_meter_log(&cfg);
        assert_eq!(r.status, "unavailable", "{r:?}");
        assert!(r.require_measured().is_err());
    }
    let mut r = energy::EnergyReport::unavailable(vec![]);
    r.status = "measured".into();
    r.sources.push(energy::SourceEnergy {
        source: "meter".into(),
        scope: "wall_ac".into(),
        method: "x".into(),
        joules: f64::NAN,
        mean_watts: f64::NAN,
        window_s: 1.0,
        coverage: 1.0,
        largest_gap_s: 0.0,
        samples: 2,
        read_errors: 0,
        wraps: 0,
        iops_per_joule: None,
        bytes_per_joule: None,
        notes: vec![],
        per_second_watts: vec![],
    });
    let e = r.require_measured().unwrap_err();
    assert!(e.contains("not a finite number"), "{e}");
    // The integration itself never returns a non-finite number as valid.
    let huge = [(0.0, Some(f64::MAX)), (1.0, Some(f64::MAX)), (2.0, Some(f64::MAX))];
    let i = iolab::energy::integrate::integrate_power(&huge, 3.0, 1.0, (0.0, 2.0));
    assert!(i.invalid.is_some() && i.joules == 0.0, "{i:?}");
}

/// A window that is no run's (from a record's JSON) gives a reason at once: +10^9 s hung the
/// import, +10^13 s aborted allocating 160 TB, +10^19 s panicked.
#[test]
fn absurd_windows_are_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("m.csv");
    let text: String = (0..1000).map(|i| format!("{},100\n", T0 - 10.0 + i as f64 * 0.5)).collect();
    std::fs::write(&p, text).unwrap();
    let cfg = EnergyConfig { meter_log: Some(p.clone()), ..Default::default() };
    let file = energy::MeterLogFile::load(&p, &cfg).unwrap();
    let t = std::time::Instant::now();
    for w in [(T0, T0 + 1e9), (T0, T0 + 1e13), (T0, T0 + 1e19), (T0, f64::INFINITY), (f64::NAN, T0), (T0, T0 - 5.0), (-1e300, 1e300)] {
        let e = file.over(w).unwrap_err();
        assert!(e.contains("not a run's window") && !e.contains('\n'), "{w:?}: {e}");
    }
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // A week-long window of a short log: a second-by-second series the window's length, quickly.
    let s = file.over((T0, T0 + 7.0 * 86400.0)).unwrap();
    assert_eq!(s.per_second_watts.len(), 7 * 86400);
    assert_eq!(s.per_second_watts.iter().filter(|w| w.is_some()).count(), 490, "the log's 489.5 s, the last second half covered");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // The per-second series of a live source is bounded the same way.
    assert!(iolab::energy::integrate::per_second_watts(1e13, |_| unreachable!()).is_empty());
    assert!(iolab::energy::integrate::per_second_watts(f64::INFINITY, |_| unreachable!()).is_empty());
}

/// A meter log of 2.6 million samples (three days at 10 Hz) matched against six runs of 120 s:
/// each window costs its own samples (it rescanned the whole log for every second: 24 s).
#[test]
fn a_long_log_over_many_runs_is_integrated_by_its_own_samples() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("long.csv");
    let n = 2_600_000usize;
    let start = T0 - 1000.0;
    let mut text = String::with_capacity(n * 24);
    for i in 0..n {
        // 10 Hz; a ramp of 1 W per 100 s on top of 150 W, so the trapezoid rule's answer is exact.
        let t = start + i as f64 * 0.1;
        text.push_str(&format!("{t:.1},{:.3}\n", 150.0 + (t - start) / 100.0));
    }
    std::fs::write(&p, text).unwrap();
    let cfg = EnergyConfig { meter_log: Some(p.clone()), ..Default::default() };
    let file = energy::MeterLogFile::load(&p, &cfg).unwrap();
    for k in 0..6 {
        let a = T0 + k as f64 * 40_000.0;
        let s = file.over((a, a + 120.0)).unwrap();
        let mean = 150.0 + (a + 60.0 - start) / 100.0;
        assert!((s.joules - mean * 120.0).abs() < 0.05, "run {k}: {} J, want {}", s.joules, mean * 120.0);
        assert!((s.coverage - 1.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.samples, 1201, "run {k}");
        assert_eq!(s.per_second_watts.len(), 120);
        for (i, w) in s.per_second_watts.iter().enumerate() {
            let want = 150.0 + (a + i as f64 + 0.5 - start) / 100.0;
            assert!((w.unwrap() - want).abs() < 1e-3, "run {k} second {i}: {w:?} vs {want}");
        }
    }
}

// ---- NVML ----

const FAKE_NVML: &str = r#"
#include <stdint.h>
static uint64_t e = 1000000;
int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return r == 3 ? "Not Supported" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned *n) { *n = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **h) { *h = (void *)0x1; return 0; }
int nvmlDeviceGetTotalEnergyConsumption(void *h, uint64_t *mj) { if (NOT_SUPPORTED) return 3; e += 500; *mj = e; return 0; }
"#;

fn build_fake_nvml(dir: &Path, not_supported: bool) -> Option<PathBuf> {
    let c = dir.join("fake_nvml.c");
    std::fs::write(&c, FAKE_NVML).ok()?;
    let so = dir.join(if not_supported { "libnvml_ns.so" } else { "libnvml_ok.so" });
    let st = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(format!("-DNOT_SUPPORTED={}", u8::from(not_supported)))
        .arg(&c)
        .status()
        .ok()?;
    st.success().then_some(so)
}

#[test]
fn nvml_loaded_at_run_time() {
    let d = tempfile::tempdir().unwrap();
    let Some(ok) = build_fake_nvml(d.path(), false) else {
        eprintln!("no C compiler: fake NVML test skipped");
        return;
    };
    let cfg = EnergyConfig {
        sources: vec!["nvml".into()],
        nvml_library: Some(ok),
        sample_interval: Duration::from_millis(20),
        ..Default::default()
    };
    let meter = EnergyMeter::start(&cfg);
    std::thread::sleep(Duration::from_millis(150));
    let r = meter.stop();
    let s = r.sources.first().unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!((s.source.as_str(), s.scope.as_str()), ("nvml", "gpu"));
    // 500 mJ per read; the last interval ends just after the window and counts pro rata.
    let n = (s.samples - 1) as f64;
    assert!(s.joules <= 0.5 * n + 1e-9 && s.joules > 0.5 * (n - 1.0), "{s:?}");
    let ns = build_fake_nvml(d.path(), true).unwrap();
    let st = energy::probe(&EnergyConfig { sources: vec!["nvml".into()], nvml_library: Some(ns), ..Default::default() });
    assert!(!st[0].available && st[0].detail.contains("Not Supported"), "{:?}", st[0]);
    let st = energy::probe(&EnergyConfig {
        sources: vec!["nvml".into()],
        nvml_library: Some("/nonexistent/libnvidia-ml.so.1".into()),
        ..Default::default()
    });
    assert!(!st[0].available && st[0].detail.contains("not loadable"));
}

// ---- this machine ----

#[test]
fn this_machine_has_no_source_and_says_so() {
    if Path::new("/sys/class/powercap").exists() || Path::new("/sys/bus/event_source/devices/power").exists() {
        eprintln!("this machine has RAPL: the no-source test is for VMs");
        return;
    }
    let meter = EnergyMeter::start(&EnergyConfig::default());
    std::thread::sleep(Duration::from_millis(50));
    let mut r = meter.stop();
    r.with_io(1000, 4096000);
    if r.status == "measured" {
        // A BMC or GPU is reachable after all: every number then has a source and scope.
        assert!(r.sources.iter().all(|s| !s.scope.is_empty() && !s.method.is_empty()));
        return;
    }
    assert_eq!(r.status, "unavailable");
    assert!(r.sources.is_empty());
    for b in ["rapl:", "perf:", "ipmi:", "nvml:"] {
        assert!(r.reasons.iter().any(|x| x.starts_with(b)), "missing reason for {b}: {:?}", r.reasons);
    }
    let js = serde_json::to_value(&r).unwrap();
    assert_eq!(js["status"], "unavailable");
    let text = js.to_string();
    for k in ["joules", "mean_watts", "iops_per_joule", "bytes_per_joule"] {
        assert!(!text.contains(k), "no number without a source: {text}");
    }
    assert!(r.require_measured().is_err());
}

// ---- io_uring's waits counted as iowait or not (`--iowait off`) ----

/// The kernel's per-task delay accounting switched on for a test (`kernel.task_delayacct`, Linux
/// 5.14+), and back to what it was when dropped.
struct DelayAcct(String);

impl DelayAcct {
    const PATH: &'static str = "/proc/sys/kernel/task_delayacct";
    fn on() -> Result<DelayAcct, String> {
        let was = std::fs::read_to_string(Self::PATH).map_err(|e| format!("no {} ({e})", Self::PATH))?;
        std::fs::write(Self::PATH, "1").map_err(|e| format!("cannot write {}: {e}", Self::PATH))?;
        Ok(DelayAcct(was))
    }
}

impl Drop for DelayAcct {
    fn drop(&mut self) {
        let _ = std::fs::write(Self::PATH, self.0.trim());
    }
}

/// One QD1 O_DIRECT read run of the default target (a file on this machine's disk, filled and
/// synced: the reads reach the device, not the page cache), pinned to CPU 0 for 3 s: its record,
/// and the clock ticks its worker thread spent asleep in iowait (`delayacct_blkio_ticks`, field 42
/// of /proc/PID/task/TID/stat: every sleep with `in_iowait` set, whether or not the CPU had
/// anything else to run), read while it runs.
fn qd1_reads_on_cpu0(dir: &Path, iowait: &str) -> (serde_json::Value, u64) {
    let json = dir.join(format!("iowait-{iowait}.json"));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["run", "-i", "io_uring", "--rw", "randread", "--qd", "1", "--cpus", "0", "--size", "32m", "--runtime", "3s", "-q"])
        .args(["--iowait", iowait, "--json"])
        .arg(&json)
        .env("TMPDIR", dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut ticks = 0;
    while child.try_wait().unwrap().is_none() {
        for t in std::fs::read_dir(format!("/proc/{}/task", child.id())).into_iter().flatten().flatten() {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            if let Some((comm, rest)) = stat.rsplit_once(") ") {
                if comm.ends_with("(iolab-w0") {
                    ticks = ticks.max(rest.split_whitespace().nth(39).and_then(|x| x.parse().ok()).unwrap_or(0));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "--iowait {iowait}: {}", String::from_utf8_lossy(&out.stderr));
    (serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap(), ticks)
}

/// A CPU's iowait over the run's window, from the record.
fn cpu_iowait(rec: &serde_json::Value, cpu: &str) -> f64 {
    rec["cost"]["system"]["iowait_by_cpu_s"][cpu]
        .as_f64()
        .unwrap_or_else(|| panic!("no iowait of CPU {cpu} in the record: {:#}", rec["cost"]["system"]))
}

/// `--iowait off` (IORING_ENTER_NO_IOWAIT, Linux 6.15) on this kernel: the record's ring says the
/// flag was used; the worker's waits are iowait by default and never with the flag (its
/// delay-accounting blkio ticks, per task, so tests running beside it do not count); the record
/// carries the run's CPU's iowait (the whole CPU's, any task's: checked against the flag only where
/// the worker's own ticks cannot be read). The other way round is
/// what the rig checks on older kernels (tests/vm/guest/rings.sh: refused before 6.15, exit 2
/// naming IORING_FEAT_NO_IOWAIT).
#[test]
fn io_uring_waits_count_as_iowait_unless_iowait_off() {
    const NAME: &str = "io_uring_waits_count_as_iowait_unless_iowait_off";
    if common::kernel_version() < (6, 15) {
        common::skip(NAME, "IORING_ENTER_NO_IOWAIT needs Linux 6.15");
        return;
    }
    let dir = tempfile::Builder::new().prefix("iolab-iowait-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let acct = DelayAcct::on();
    let (on, on_ticks) = qd1_reads_on_cpu0(dir.path(), "on");
    let (off, off_ticks) = qd1_reads_on_cpu0(dir.path(), "off");
    let used = |r: &serde_json::Value| r["ring"]["used"].as_array().unwrap().iter().any(|f| f == "ENTER_NO_IOWAIT");
    assert!(!used(&on) && used(&off), "ring: on {:#}, off {:#}", on["ring"], off["ring"]);
    assert_eq!((on["spec"].get("iowait"), off["spec"]["iowait"].as_str()), (None, Some("off")), "{:#}", off["spec"]);
    let (a, b) = (cpu_iowait(&on, "0"), cpu_iowait(&off, "0"));
    match &acct {
        // The proof is the worker's own: per task, so no other process on the machine counts.
        // The record's per-CPU iowait is the whole CPU's (any task's block-I/O sleep while the CPU
        // idles, e.g. tests running beside this one), so it is only checked to be there.
        Ok(_) => {
            assert!(on_ticks >= 10 && off_ticks == 0, "the worker's iowait ticks: {on_ticks} by default, {off_ticks} with --iowait off");
            assert!(a.is_finite() && a >= 0.0 && b.is_finite() && b >= 0.0, "CPU 0's iowait: {a} s by default, {b} s with --iowait off");
        }
        Err(why) => {
            common::skip(NAME, &format!("the worker's own iowait is not read ({why}); the whole CPU's is checked instead"));
            assert!(b <= 0.05, "CPU 0 had {b} s of iowait with --iowait off (default: {a} s)");
            let idle = on["cost"]["system"]["cpu"]["idle_s"].as_f64().unwrap();
            if idle >= 1.0 {
                assert!(a >= 0.1, "CPU 0 had {a} s of iowait by default though the machine had {idle} s idle");
            }
        }
    }
}

/// `--iowait off` is a ring's option: another interface refuses it before anything runs, and so
/// does a value that is neither on nor off.
#[test]
fn iowait_off_is_refused_where_no_ring_waits() {
    let dir = common::tempdir();
    let target = common::verify_file(dir.path(), "t.dat", 8 << 20).display().to_string();
    let r = common::iolab_in(dir.path(), &["run", "-i", "psync", "--iowait", "off", "--ios", "10", &target]);
    let line = r.assert_usage_error();
    assert!(line.contains("--iowait off applies only to io_uring"), "{line}");
    let r = common::iolab_in(dir.path(), &["run", "-i", "io_uring", "--iowait", "maybe", "--ios", "10", &target]);
    let line = r.assert_usage_error();
    assert!(line.contains("maybe"), "{line}");
}

// ---- efficiency per component: compared and plotted ----

/// A sweep of the null interface named `name` (a study part's name makes the report draw that
/// part's panels), each run measured by the generic meter in `scope` at a constant 7.25 W.
fn metered_sweep(dir: &Path, db: &Path, name: &str, matrix: &str, scope: &str) {
    let plan = dir.join(format!("{name}.toml"));
    std::fs::write(
        &plan,
        format!("name = \"{name}\"\nreplicates = 2\nruntime = \"1s\"\ncooldown = \"0s\"\n[matrix]\ninterface = [\"null\"]\n{matrix}"),
    )
    .unwrap();
    let meter = "while :; do echo \"$(date +%s.%N) 7.25\"; sleep 0.05; done";
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["sweep", "-q", "--db"])
        .arg(db)
        .arg(&plan)
        .args(["--energy", "generic", "--energy-command", meter, "--energy-scope", scope, "--require-energy"])
        .env("TMPDIR", dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Records carrying energy from a fixture source (the generic meter) in the ssd scope and in the
/// wall scope: `compare` compares the efficiencies each side measured, named as the columns (and
/// none it did not: no zero); the report draws I/Os per joule per component a run measured, a bar
/// per configuration, and says which components were not measured and why; S4's Fig 7a comes
/// from the ssd scope, and Fig 8, with only a wall meter, from the system's with the sentence
/// that this differs from the paper.
#[test]
fn efficiency_per_component_in_compare_and_the_report() {
    let dir = tempfile::Builder::new().prefix("iolab-eff-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = dir.path().join("e.db");
    metered_sweep(dir.path(), &db, "S4.1-latency", "rw = [\"randread\"]\nqd = [1, 2]\n", "ssd");
    metered_sweep(dir.path(), &db, "S4.4-gc", "rw = [\"randwrite\"]\nqd = [4]\n", "wall_ac");
    let store = iolab::store::Store::open(&db).unwrap();
    let mut keys: Vec<String> =
        store.list_runs(&iolab::store::RunFilter::default()).unwrap().into_iter().filter_map(|r| r.config_key).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 3, "{keys:?}");
    drop(store);

    let db_s = db.to_str().unwrap();
    let cmp = common::iolab_in(dir.path(), &["compare", &keys[0], &keys[1], "--db", db_s]);
    cmp.assert_ok();
    for metric in ["ssd_iops_per_joule", "ssd_bytes_per_joule"] {
        let line = cmp.stdout.lines().find(|l| l.starts_with(metric)).unwrap_or_else(|| panic!("no {metric}: {}", cmp.describe()));
        assert!(line.contains("/J"), "{line}");
    }
    for absent in ["cpu_iops_per_joule", "system_iops_per_joule", "ssd_iops_per_dynamic_joule"] {
        assert!(!cmp.stdout.contains(absent), "{absent} was not measured: {}", cmp.describe());
    }

    let out = dir.path().join("report");
    common::iolab_in(dir.path(), &["report", "--db", db_s, "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    // One efficiency figure per sweep, of the component its meter measured.
    assert!(
        html.contains("S4.1-latency: I/Os per joule of the SSD&#39;s own power")
            || html.contains("S4.1-latency: I/Os per joule of the SSD's own power"),
        "{html}"
    );
    assert!(html.contains("S4.4-gc: I/Os per joule of the whole system"), "{html}");
    assert!(!html.contains("I/Os per joule of the CPU package"), "no source measured the CPU: no figure");
    assert!(html.contains("not measured in this sweep (no figure, never a zero): cpu: no source measured the cpu"), "{html}");
    let figures: Vec<PathBuf> = std::fs::read_dir(out.join("figures")).unwrap().map(|e| e.unwrap().path()).collect();
    let svg = figures
        .iter()
        .find(|p| {
            p.to_string_lossy().contains("s4-1-latency")
                && p.to_string_lossy().contains("per-joule")
                && p.extension().is_some_and(|e| e == "svg")
        })
        .unwrap_or_else(|| panic!("no efficiency figure among {figures:?}"));
    assert_eq!(std::fs::read_to_string(svg).unwrap().matches("class=\"mark\"").count(), 2, "a bar per configuration");
    // S4: Fig 7a from the drive's own power; Fig 8 from the system's, said to differ.
    assert!(html.contains("Power per access pattern (Fig 7a); scope: ssd"), "{html}");
    assert!(
        html.contains("Garbage collection: per-second power (Fig 8); scope: wall power (meter), the whole system, not the SSD"),
        "{html}"
    );
    assert_eq!(
        html.matches("This differs from the paper: IISWC&#39;19 plotted the SSD").count()
            + html.matches("This differs from the paper: IISWC'19 plotted the SSD").count(),
        1,
        "{html}"
    );
}

// ---- the idle baseline per run, after the run's settings ----

/// A fake sysfs with four idle states on each of cpu0 and cpu1, none disabled: what
/// `cpuidle_max_state` changes (this VM has no cpuidle).
fn cpuidle_sysfs(root: &Path) {
    for cpu in ["cpu0", "cpu1"] {
        for (i, name) in ["POLL", "C1", "C1E", "C6"].iter().enumerate() {
            let d = root.join("devices/system/cpu").join(cpu).join(format!("cpuidle/state{i}"));
            std::fs::create_dir_all(&d).unwrap();
            for (file, v) in [("name", *name), ("latency", "2"), ("residency", "4"), ("disable", "0")] {
                std::fs::write(d.join(file), format!("{v}\n")).unwrap();
            }
        }
    }
}

/// The generic meter whose watts follow the setting in force: 9.5 W while cpu1's idle state 2
/// is disabled (`cpuidle_max_state=0` or 1), 3.25 W otherwise (2, or nothing set).
fn setting_meter(sys: &Path) -> String {
    let disable = sys.join("devices/system/cpu/cpu1/cpuidle/state2/disable");
    format!(
        "while :; do if [ \"$(cat {})\" = 1 ]; then w=9.5; else w=3.25; fi; echo \"$(date +%s.%N) $w\"; sleep 0.05; done",
        disable.display()
    )
}

/// A sweep of the null interface over `cpuidle_max_state` 0 and 2 (each disables state 3), with
/// a fake sysfs and journal.
fn idle_sweep(dir: &Path, plan_energy: &str, extra: &[&str]) -> (std::process::Command, PathBuf) {
    let sys = dir.join("sys");
    cpuidle_sysfs(&sys);
    let plan = dir.join("idle.toml");
    std::fs::write(
        &plan,
        format!("name = \"idle-per-run\"\nruntime = \"1s\"\ncooldown = \"0s\"\n[matrix]\ninterface = [\"null\"]\ncpuidle_max_state = [0, 2]\n{plan_energy}"),
    )
    .unwrap();
    let db = dir.join("idle.db");
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"));
    c.args(["sweep", "-q", "--db"]).arg(&db).arg(&plan);
    c.args(["--energy", "generic", "--energy-command", &setting_meter(&sys), "--energy-scope", "ssd"]).args(extra);
    c.env("IOLAB_SYSFS", &sys).env("IOLAB_JOURNAL", dir.join("journal.json")).env("TMPDIR", dir);
    (c, db)
}

/// Each stored run's (cpuidle_max_state, which baseline, its ssd idle watts).
fn idle_of_runs(db: &Path) -> Vec<(String, String, f64)> {
    let store = iolab::store::Store::open(db).unwrap();
    let mut out = Vec::new();
    for row in store.list_runs(&iolab::store::RunFilter::default()).unwrap() {
        let rec = store.run_record(row.id).unwrap().unwrap();
        let e = &rec["energy"];
        let key = row.config_key.unwrap_or_default();
        let state = key.rsplit("cpuidle_max_state=").next().unwrap_or("").to_string();
        let idle =
            e["idle_baseline"].as_array().and_then(|a| a.iter().find(|i| i["scope"] == "ssd")).map(|i| i["idle_watts"].as_f64().unwrap());
        out.push((state, e["idle_baseline_taken"].as_str().unwrap_or("none").to_string(), idle.unwrap_or(f64::NAN)));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// `[energy] idle = "per-run"`: every run measures its own idle power after its setting is
/// applied and before its I/O, and its record says so. The meter's watts follow the setting, so
/// a baseline taken before the setting (the sweep's once-for-all, shown beside it) reads the
/// other value: each run's own reads its setting's.
#[test]
fn a_per_run_idle_baseline_is_measured_after_each_run_s_settings() {
    let dir = tempfile::Builder::new().prefix("iolab-idle-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (mut sweep, db) = idle_sweep(dir.path(), "[energy]\nidle = \"per-run\"\nidle_baseline = \"1s\"\n", &[]);
    let out = sweep.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs = idle_of_runs(&db);
    assert_eq!(runs.len(), 2, "{runs:?}");
    for (state, taken, watts) in &runs {
        assert_eq!(taken, "per_run", "{runs:?}");
        let want = if state == "0" { 9.5 } else { 3.25 };
        assert!((watts - want).abs() < 1e-9, "cpuidle_max_state={state}: idle {watts} W, not the setting's {want} W: {runs:?}");
    }
    // Put back after each run: the next baseline, the restore and the journal.
    let disable = dir.path().join("sys/devices/system/cpu/cpu1/cpuidle/state2/disable");
    assert_eq!(std::fs::read_to_string(&disable).unwrap().trim(), "0");
    assert!(!dir.path().join("journal.json").exists());

    // The same sweep with the command line's --idle once: one baseline before any setting.
    let once = tempfile::Builder::new().prefix("iolab-idle-once-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (mut sweep, db) = idle_sweep(once.path(), "[energy]\nidle = \"per-run\"\nidle_baseline = \"1s\"\n", &["--idle", "once"]);
    let out = sweep.output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs = idle_of_runs(&db);
    assert!(runs.iter().all(|(_, taken, w)| taken == "once_per_sweep" && (w - 3.25).abs() < 1e-9), "{runs:?}");
}

/// Bad values of the per-run baseline are one line and exit 2 before anything runs (no
/// database is made); Ctrl-C during a run's own idle measurement stops the sweep as during the
/// run: exit 130, the setting put back, the run left to do.
#[test]
fn a_per_run_idle_baseline_refuses_bad_values_and_stops_at_ctrl_c() {
    let dir = tempfile::Builder::new().prefix("iolab-idle-bad-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for (energy, extra, says) in [
        ("[energy]\nidle = \"always\"\n", &[][..], "unknown variant `always`"),
        ("[energy]\nidle_baseline = \"soon\"\n", &[][..], "plan energy.idle_baseline: "),
        ("[energy]\nidle_baseline = \"0s\"\n", &[][..], "measures nothing"),
        ("[energy]\nwhen = \"once\"\n", &[][..], "unknown field `when`"),
        ("[energy]\nidle = \"per-run\"\n", &[][..], "an idle baseline per run needs its length"),
        ("", &["--idle", "per-run"][..], "an idle baseline per run needs its length"),
        ("", &["--idle", "sometimes", "--idle-baseline", "1s"][..], "--idle \"sometimes\": give once"),
    ] {
        let (mut sweep, db) = idle_sweep(dir.path(), energy, extra);
        let out = sweep.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{energy} {extra:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{energy} {extra:?}: {err}");
        assert!(!db.exists(), "nothing stored: {err}");
    }
    let r = common::iolab(&["run", "-q", "--interface", "null", "--ios", "10", "--idle", "per-run"]);
    assert!(r.assert_usage_error().contains("an idle baseline per run needs its length"));

    // Ctrl-C while the first run measures its own idle power, its setting applied.
    let (mut sweep, db) = idle_sweep(dir.path(), "[energy]\nidle = \"per-run\"\nidle_baseline = \"60s\"\n", &[]);
    let mut child = sweep.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    let sys = dir.path().join("sys/devices/system/cpu");
    let applied = || std::fs::read_to_string(sys.join("cpu1/cpuidle/state3/disable")).unwrap().trim() == "1";
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !applied() {
        assert!(std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none(), "the setting was never applied");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The first run's setting (0 or 2) is in force: its idle measurement runs now.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let started = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "Ctrl-C did not cut the 60 s idle measurement short: {err}");
    assert!(!applied(), "the setting is put back: {err}");
    assert!(!dir.path().join("journal.json").exists(), "{err}");
    let store = iolab::store::Store::open(&db).unwrap();
    assert!(store.list_runs(&iolab::store::RunFilter::default()).unwrap().is_empty(), "no run kept: {err}");
}
