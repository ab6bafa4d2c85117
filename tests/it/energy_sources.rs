//! The drive's and the server's power sources against emulators that speak their real
//! protocols: a PowerSensor3 on a pseudo-terminal (the host library's serial protocol byte for
//! byte: EEPROM config on `R`, 18-byte frames on `S`, the stop packet on `X`), a NETIO PDU as a
//! loopback HTTP server serving netio.json with Basic auth, and a generic meter as a shell
//! command and as a TCP socket. Each: a known constant power gives the known energy within 1 %;
//! unplugging, garbage and a skewed clock leave the run going and the energy saying what was lost.
use crate::common;
use iolab::energy::generic::GenericConfig;
use iolab::energy::netio::NetioConfig;
use iolab::energy::powersensor::{encode_frame, PowerSensorConfig, SensorConfig, EEPROM_BYTES, MAX_SENSORS, STOP_PACKET};
use iolab::energy::{self, EnergyConfig, EnergyMeter, EnergyReport, Scope, SourceEnergy};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn measure(cfg: &EnergyConfig, seconds: f64) -> EnergyReport {
    let m = EnergyMeter::start(cfg);
    std::thread::sleep(Duration::from_secs_f64(seconds));
    m.stop()
}

fn only<'a>(r: &'a EnergyReport, source: &str) -> &'a SourceEnergy {
    let s: Vec<_> = r.sources.iter().filter(|s| s.source == source).collect();
    assert_eq!(s.len(), 1, "one {source} entry expected: {r:#?}");
    s[0]
}

fn within(got: f64, want: f64, rel: f64) -> bool {
    (got - want).abs() <= rel * want.abs()
}

// ---- PowerSensor3 on a pseudo-terminal ----

/// Sensors as psconfig would store them: pairs 0 and 1 in use (12 V and 3.3 V rails of an M.2
/// adapter), 2 and 3 not.
fn sensor_config() -> Vec<SensorConfig> {
    let s = |t: &str, p: &str, vref: f32, sens: f32, in_use: bool| SensorConfig {
        type_name: t.into(),
        pair_name: p.into(),
        vref,
        sensitivity: sens,
        in_use,
    };
    vec![
        s("MLX10", "12V", 1.65, 0.12, true),
        s("volt12", "12V", 0.0, 0.2, true),
        s("MLX10", "3V3", 1.65, 0.12, true),
        s("volt3v3", "3V3", 0.0, 0.8, true),
        s("", "", 0.0, 1.0, false),
        s("", "", 0.0, 1.0, false),
        s("", "", 0.0, 1.0, false),
        s("", "", 0.0, 1.0, false),
    ]
}

const LEVELS: [u16; MAX_SENSORS] = [700, 750, 600, 1000, 0, 0, 0, 0];

/// The watts of rails 0 and 1 at LEVELS, computed here in f64 from the firmware's formula.
fn expected_watts() -> f64 {
    let cfg = sensor_config();
    let v = |i: usize| (3.3 * LEVELS[i] as f64 / 1023.0 - cfg[i].vref as f64) / cfg[i].sensitivity as f64;
    v(0) * v(1) + v(2) * v(3)
}

#[derive(Clone, Copy, Default)]
struct Faults {
    /// Write a few garbage bytes into the stream this often.
    garbage_every: Option<Duration>,
    /// Close the master (the USB cable pulled) this long after streaming starts.
    unplug_after: Option<Duration>,
}

fn wait_readable(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, ms) > 0 && p.revents & libc::POLLIN != 0 }
}

fn write_all(fd: i32, b: &[u8]) {
    let mut off = 0;
    while off < b.len() {
        // SAFETY: writing from a valid buffer.
        let n = unsafe { libc::write(fd, b[off..].as_ptr().cast(), b.len() - off) };
        if n <= 0 {
            return;
        }
        off += n as usize;
    }
}

fn read_byte(fd: i32, ms: i32) -> Option<u8> {
    if !wait_readable(fd, ms) {
        return None;
    }
    let mut c = 0u8;
    // SAFETY: one byte into a local.
    (unsafe { libc::read(fd, (&mut c as *mut u8).cast(), 1) } == 1).then_some(c)
}

/// A PowerSensor3 as its firmware behaves (PowerSensor.ino serialEvent and the ADC handler),
/// streaming 2000 frames a second.
struct Emulator {
    slave_path: PathBuf,
    _slave: OwnedFd,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Emulator {
    fn start(faults: Faults) -> Emulator {
        let (mut m, mut s) = (0, 0);
        // SAFETY: openpty fills two descriptors.
        assert_eq!(unsafe { libc::openpty(&mut m, &mut s, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) }, 0);
        // SAFETY: both are open and ours.
        let (master, slave) = unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) };
        let slave_path = std::fs::read_link(format!("/proc/self/fd/{}", slave.as_raw_fd())).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::spawn(move || emulate(master, faults, st));
        Emulator { slave_path, _slave: slave, stop, thread: Some(thread) }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn emulate(master: OwnedFd, faults: Faults, stop: Arc<AtomicBool>) {
    let fd = master.as_raw_fd();
    let config = sensor_config();
    let mut streaming: Option<Instant> = None;
    let mut sent = 0u64;
    let mut last_garbage = Instant::now();
    let t_boot = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if let Some(c) = read_byte(fd, 1) {
            match c {
                b'R' => {
                    for s in &config {
                        let b: [u8; EEPROM_BYTES] = s.to_eeprom();
                        write_all(fd, &b);
                        // wait_for_host(1): any byte triggers the next sensor.
                        if read_byte(fd, 2000).is_none() {
                            return;
                        }
                    }
                    write_all(fd, b"D");
                }
                b'S' => {
                    streaming = Some(Instant::now());
                    sent = 0;
                }
                b'T' => streaming = None,
                b'X' => {
                    streaming = None;
                    write_all(fd, &STOP_PACKET);
                    write_all(fd, &STOP_PACKET);
                }
                _ => {}
            }
        }
        let Some(since) = streaming else { continue };
        if faults.unplug_after.is_some_and(|u| since.elapsed() >= u) {
            return; // the master closes: the cable is out
        }
        let due = (since.elapsed().as_secs_f64() * 2000.0) as u64;
        let mut out = Vec::new();
        while sent < due {
            let micros = (t_boot.elapsed().as_micros() & 0x3FF) as u16;
            out.extend_from_slice(&encode_frame(micros, &LEVELS));
            sent += 1;
        }
        if faults.garbage_every.is_some_and(|g| last_garbage.elapsed() >= g) && out.len() > 20 {
            last_garbage = Instant::now();
            // Bytes lost and garbage in the middle of a frame.
            let cut: Vec<u8> = out.drain(5..9).collect();
            let _ = cut;
            out.splice(5..5, [0x00, 0x7F, 0x13, 0x80]);
        }
        write_all(fd, &out);
    }
}

fn ps_config(emu: &Emulator, rails: Vec<usize>) -> EnergyConfig {
    EnergyConfig {
        sources: vec!["powersensor".into()],
        powersensor: Some(PowerSensorConfig { device: emu.slave_path.clone(), rails }),
        ..Default::default()
    }
}

#[test]
fn powersensor_constant_power_gives_the_known_ssd_energy() {
    let emu = Emulator::start(Faults::default());
    let r = measure(&ps_config(&emu, vec![0, 1]), 1.5);
    let s = only(&r, "powersensor");
    assert_eq!(s.scope, "ssd");
    let want = expected_watts() * s.window_s;
    assert!(within(s.joules, want, 0.01), "{} J, want {want} J: {s:#?}", s.joules);
    assert!(within(s.mean_watts, expected_watts(), 0.01), "{s:#?}");
    assert!(s.coverage > 0.99, "{s:#?}");
    // Per-rail watts and their sum.
    assert!(s.notes.iter().any(|n| n.starts_with("rail 0 (12V):")), "{:?}", s.notes);
    assert!(s.notes.iter().any(|n| n.starts_with("rail 1 (3V3):")), "{:?}", s.notes);
    // kHz: thousands of frames in the window.
    assert!(s.samples > 1000, "{s:#?}");
    assert!(s.method.contains("PowerSensor3"), "{}", s.method);
}

#[test]
fn powersensor_unplugged_mid_run_and_garbage_say_what_was_lost() {
    let emu = Emulator::start(Faults { garbage_every: Some(Duration::from_millis(50)), unplug_after: Some(Duration::from_millis(900)) });
    let r = measure(&ps_config(&emu, vec![0, 1]), 1.6);
    let s = only(&r, "powersensor");
    // The stream ended about 0.85 s into the window (it started ~50 ms before it): the rest is
    // uncovered, not guessed.
    assert!(s.coverage > 0.3 && s.coverage < 0.75, "{s:#?}");
    assert!(s.largest_gap_s > 0.5, "{s:#?}");
    assert!(within(s.mean_watts, expected_watts(), 0.01), "{s:#?}");
    assert!(within(s.joules, expected_watts() * s.coverage * s.window_s, 0.01), "{s:#?}");
    assert!(s.notes.iter().any(|n| n.contains("the stream ended") && n.contains("not covered")), "{:?}", s.notes);
    assert!(s.notes.iter().any(|n| n.contains("wrong marker bits skipped")), "{:?}", s.notes);
    // No per-joule ratio on a window it did not cover.
    let mut r2 = r.clone();
    r2.with_io(1000, 4096 * 1000);
    assert!(r2.sources[0].iops_per_joule.is_none());
}

#[test]
fn powersensor_rail_not_in_use_or_no_device_is_one_reason() {
    let emu = Emulator::start(Faults::default());
    let st = energy::probe(&ps_config(&emu, vec![0, 2]));
    let p = st.iter().find(|s| s.backend == "powersensor").unwrap();
    assert!(!p.available && p.detail.contains("rail 2 is not in use"), "{p:?}");
    let st = energy::probe(&EnergyConfig {
        sources: vec!["powersensor".into()],
        powersensor: Some(PowerSensorConfig { device: "/nonexistent/ttyACM9".into(), rails: vec![0] }),
        ..Default::default()
    });
    assert!(st[0].detail.contains("/nonexistent/ttyACM9"), "{:?}", st[0]);
    // Ok: its scopes listed.
    let st = energy::probe(&ps_config(&emu, vec![0, 1]));
    assert!(st[0].available && st[0].scopes == ["ssd"], "{:?}", st[0]);
}

// ---- NETIO PDU over HTTP ----

const NETIO_PASSWORD: &str = "pdu-s3cret-9";

fn netio_json(load1: f64, load2: f64, time: &str) -> String {
    format!(
        r#"{{"Agent":{{"Model":"NETIO 4All","Version":"3.4.0","JSONVer":"2.1","DeviceName":"rack-pdu","VendorID":0,"OemID":0,"SerialNumber":"24:A4:2C:39:2A:12","Uptime":1234,"Time":"{time}","NumOutputs":4}},"GlobalMeasure":{{"Voltage":230.1,"Frequency":50.0,"TotalCurrent":870,"OverallPowerFactor":0.98,"TotalLoad":{},"TotalEnergy":1203,"EnergyStart":"2026-01-01T00:00:00+01:00"}},"Outputs":[{{"ID":1,"Name":"server-psu1","State":1,"Action":6,"Delay":5000,"Current":652,"PowerFactor":0.99,"Load":{load1},"Energy":1000}},{{"ID":2,"Name":"server-psu2","State":1,"Action":6,"Delay":5000,"Current":218,"PowerFactor":0.97,"Load":{load2},"Energy":203}},{{"ID":3,"Name":"switch","State":1,"Action":6,"Delay":5000,"Current":100,"PowerFactor":0.9,"Load":20,"Energy":5}},{{"ID":4,"Name":"free","State":0,"Action":6,"Delay":5000,"Current":0,"PowerFactor":0.0,"Load":0,"Energy":0}}]}}"#,
        load1 + load2 + 20.0
    )
}

fn iso_utc(unix: f64) -> String {
    let secs = unix.floor() as i64;
    let (y, m, d) = iolab::energy::meterlog::civil_from_days(secs.div_euclid(86400));
    let s = secs.rem_euclid(86400);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}+00:00", s / 3600, s / 60 % 60, s % 60)
}

/// A NETIO JSON API: answers GET /netio.json with Basic auth; request number `garbage_at`
/// gets a broken body; after `gone_after` the server is gone (connection refused).
fn netio_server(garbage_at: usize, gone_after: Duration, clock_skew_s: f64) -> (u16, Arc<AtomicUsize>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let n = Arc::new(AtomicUsize::new(0));
    let count = n.clone();
    let expected = format!("Basic {}", base64_encode(format!("netio:{NETIO_PASSWORD}").as_bytes()));
    std::thread::spawn(move || {
        let t0 = Instant::now();
        l.set_nonblocking(true).unwrap();
        while t0.elapsed() < gone_after {
            let Ok((mut c, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            c.set_nonblocking(false).unwrap();
            let mut r = BufReader::new(c.try_clone().unwrap());
            let (mut first, mut auth) = (String::new(), String::new());
            r.read_line(&mut first).unwrap();
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap() == 0 || h == "\r\n" {
                    break;
                }
                if let Some(v) = h.strip_prefix("Authorization: ").or_else(|| h.strip_prefix("authorization: ")) {
                    auth = v.trim().to_string();
                }
            }
            let k = count.fetch_add(1, Ordering::SeqCst);
            let (status, body) = if auth != expected {
                ("401 Unauthorized", "{}".to_string())
            } else if !first.starts_with("GET /netio.json ") {
                ("404 Not Found", "{}".to_string())
            } else if k == garbage_at {
                ("200 OK", "<html>Internal error".to_string())
            } else {
                let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
                ("200 OK", netio_json(151.0, 49.0, &iso_utc(now + clock_skew_s)))
            };
            let _ = write!(
                c,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
        // The listener drops here: the PDU is gone.
    });
    (port, n)
}

fn base64_encode(b: &[u8]) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in b.chunks(3) {
        let n = (c[0] as u32) << 16 | (*c.get(1).unwrap_or(&0) as u32) << 8 | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                s.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

fn netio_cfg(port: u16, outlets: Vec<u32>) -> EnergyConfig {
    EnergyConfig {
        sources: vec!["netio".into()],
        netio: Some(NetioConfig { url: format!("http://netio:{NETIO_PASSWORD}@127.0.0.1:{port}"), outlets, ..Default::default() }),
        ..Default::default()
    }
}

#[test]
fn netio_outlets_sum_and_a_gone_server_garbage_and_a_skewed_clock_cost_only_coverage() {
    // The PDU's clock an hour ahead; request 2 (the second in the window) garbage; gone at 3 s.
    let (port, served) = netio_server(2, Duration::from_millis(3000), 3600.0);
    let cfg = netio_cfg(port, vec![1, 2]);
    let st = energy::probe(&cfg);
    assert!(st[0].available, "{:?}", st[0]);
    assert!(st[0].notes.iter().any(|n| n.contains("clock is +3599") || n.contains("clock is +3600")), "{:?}", st[0].notes);
    let r = measure(&cfg, 6.0);
    let s = only(&r, "netio");
    assert_eq!(s.scope, "wall_ac");
    // Outputs 1 and 2 summed (the switch on output 3 is not the server's), whatever the clock says.
    assert!(within(s.mean_watts, 200.0, 0.01), "{s:#?}");
    assert!(within(s.joules, 200.0 * s.coverage * s.window_s, 0.01), "{s:#?}");
    // Gone after 3 s of a 6 s window: the rest is a gap, never a guess.
    assert!(s.coverage > 0.3 && s.coverage < 0.85, "{s:#?}");
    assert!(s.notes.iter().any(|n| n.contains("failed reads counted as gaps")), "{:?}", s.notes);
    assert!(served.load(Ordering::SeqCst) >= 3);
    // No password anywhere: the report, the status, the source's method.
    let all = format!("{}{}", serde_json::to_string(&r).unwrap(), serde_json::to_string(&st).unwrap());
    assert!(!all.contains(NETIO_PASSWORD), "{all}");
    assert!(all.contains("127.0.0.1"), "{all}");
}

#[test]
fn netio_wrong_password_and_missing_outlet_are_one_reason_without_the_password() {
    let (port, _) = netio_server(usize::MAX, Duration::from_secs(5), 0.0);
    let mut cfg = netio_cfg(port, vec![7]);
    let st = energy::probe(&cfg);
    assert!(!st[0].available && st[0].detail.contains("has no output 7"), "{:?}", st[0]);
    cfg.netio.as_mut().unwrap().url = format!("http://netio:wrong-{NETIO_PASSWORD}@127.0.0.1:{port}");
    cfg.netio.as_mut().unwrap().outlets = vec![1];
    let st = energy::probe(&cfg);
    assert!(!st[0].available && st[0].detail.contains("authentication refused"), "{:?}", st[0]);
    assert!(!format!("{st:?}").contains(NETIO_PASSWORD), "{st:?}");
}

// ---- a generic meter: a command's stdout, a socket ----

#[test]
fn generic_command_prints_timestamped_watts_in_the_scope_named() {
    let cfg = EnergyConfig {
        sources: vec!["generic".into()],
        generic: Some(GenericConfig {
            command: Some("echo 'time watts'; while :; do echo \"$(date +%s.%N) 42.5\"; sleep 0.05; done".into()),
            socket: None,
            scope: Scope::Ssd,
        }),
        ..Default::default()
    };
    let r = measure(&cfg, 1.5);
    let s = only(&r, "generic");
    assert_eq!(s.scope, "ssd");
    assert!(within(s.joules, 42.5 * s.window_s, 0.01), "{s:#?}");
    assert!(s.coverage > 0.99, "{s:#?}");
    assert!(s.notes.iter().any(|n| n.contains("lines were no sample")), "{:?}", s.notes);
}

/// A socket meter whose clock runs 100 s behind: its samples land before the window, which they
/// do not cover; the reason says how far off its clock is.
#[test]
fn generic_socket_with_a_skewed_clock_covers_nothing_and_says_why() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let Ok((mut c, _)) = l.accept() else { return };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(4) {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
            if writeln!(c, "{:.3},{}", now - 100.0, 10.0).is_err() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let mut cfg = EnergyConfig {
        sources: vec!["generic".into()],
        generic: Some(GenericConfig { command: None, socket: Some(format!("127.0.0.1:{port}")), scope: Scope::WallAc }),
        ..Default::default()
    };
    let r = measure(&cfg, 1.0);
    assert!(r.sources.is_empty(), "{r:#?}");
    assert!(r.reasons.iter().any(|x| x.starts_with("generic wall_ac: no samples") && x.contains("100.0 s behind")), "{:?}", r.reasons);
    // Nothing listening: one reason, at once.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    cfg.generic.as_mut().unwrap().socket = Some(format!("127.0.0.1:{closed}"));
    let st = energy::probe(&cfg);
    assert!(!st[0].available && st[0].detail.starts_with("meter socket"), "{:?}", st[0]);
}

// ---- wired through `iolab run` ----

/// The generic meter in a real run, with an idle baseline: the record has the ssd scope's
/// joules, IOPS and bytes per joule, and the dynamic part.
#[test]
fn iolab_run_records_a_generic_ssd_meter_with_its_scope_and_efficiency() {
    let dir = tempfile::Builder::new().prefix("iolab-esrc-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let json = dir.path().join("r.json");
    let meter = "while :; do echo \"$(date +%s.%N) 7.25\"; sleep 0.05; done";
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_iolab"))
        .args(["run", "--size", "16m", "--runtime", "2s", "-q", "--json"])
        .arg(&json)
        .args(["--energy", "generic", "--energy-command", meter, "--energy-scope", "ssd", "--idle-baseline", "1s", "--require-energy"])
        .env("TMPDIR", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rec: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let s = &rec["energy"]["sources"][0];
    assert_eq!((s["source"].as_str(), s["scope"].as_str()), (Some("generic"), Some("ssd")), "{rec:#}");
    assert!(within(s["mean_watts"].as_f64().unwrap(), 7.25, 0.01), "{s:#}");
    assert!(s["iops_per_joule"].as_f64().unwrap() > 0.0 && s["bytes_per_joule"].as_f64().unwrap() > 0.0, "{s:#}");
    assert_eq!(rec["energy"]["idle_baseline"][0]["scope"], "ssd", "{rec:#}");
    let eff = &rec["energy"]["efficiency"];
    assert_eq!(eff[0]["component"], "ssd", "{eff:#}");
    assert!(eff[0]["iops_per_joule"].as_f64().unwrap() > 0.0, "{eff:#}");
}

#[test]
fn source_options_are_checked_before_anything_runs() {
    let dir = common::tempdir();
    let bad: &[(&[&str], &str)] = &[
        (&["--powersensor", "/dev/ttyACM0"], "--powersensor needs --powersensor-rails"),
        (&["--powersensor", "/dev/ttyACM0", "--powersensor-rails", "0,4"], "4 is not between 0 and 3"),
        (&["--netio-url", "http://admin:hunter2@pdu"], "--netio-url needs --netio-outlets"),
        (&["--netio-url", "ftp://admin:hunter2@pdu", "--netio-outlets", "1"], "must start with http"),
        (&["--energy-command", "true"], "need --energy-scope"),
        (&["--energy-command", "true", "--energy-scope", "disk"], "'disk' is not an energy scope"),
        (&["--energy-socket", "nohost", "--energy-scope", "ssd"], "is not HOST:PORT"),
    ];
    for (args, want) in bad {
        let mut a = vec!["run", "--size", "16m", "--runtime", "1s", "-q"];
        a.extend_from_slice(args);
        let r = common::iolab_in(dir.path(), &a);
        let line = r.assert_usage_error();
        assert!(line.contains(want), "want {want:?}:\n{}", r.describe());
        assert!(!line.contains("hunter2"), "{}", r.describe());
    }
    assert!(common::entries(dir.path()).is_empty(), "{:?}", common::entries(dir.path()));
}
