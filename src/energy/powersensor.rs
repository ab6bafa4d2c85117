//! The SSD's own power from a PowerSensor3 (open hardware, USB serial; github.com/nlesc-recruit/
//! PowerSensor3): the sensor pairs (current and voltage on one rail) that feed the drive, named
//! by the user, each rail's V×I and their sum, scope `ssd`.
//!
//! The protocol is the host library's, byte for byte (host/src/PowerSensor.cc, host/src/sensors.cc,
//! host/include/PowerSensor.hpp; device/PowerSensor/PowerSensor.ino and
//! device_specific/BLACKPILL_F401CC_F411CE.hpp):
//! - The host writes `R`; the device sends each of its 8 sensors' EEPROM config, a packed
//!   41-byte struct `{char type[16]; char pairName[16]; float vref; float sensitivity; bool
//!   inUse;}` (little-endian floats, as the STM32 and x86 store them), and waits for any byte
//!   (the host sends `s`) before the next; after the last it sends `D`.
//! - `S` starts streaming; `X` stops it and the device answers with the stop packet `FF 3F`
//!   twice; `T` stops it silently (the library's cleanup process sends it).
//! - A stream frame is 9 packets of 2 bytes: a timestamp packet (`1111 tttt`, `01 tttttt`: the
//!   low 10 bits of the device's micros(); it reads as sensor 7 with the marker bit set), then
//!   sensors 0..7: `1 iii aaaa`, `0 m bbbbbb` with sensor id i, marker bit m and the 10-bit level
//!   `aaaa bbbbbb`. A pair whose marker bits are wrong means a byte was lost: the first byte is
//!   dropped and the next one tried (`readLevelFromDevice`).
//! - A sensor's value is `(3.3 × level / 1023 − vref) / sensitivity` in float
//!   (`Sensor::updateLevel`): amperes for sensor 2p, volts for 2p+1; rail p's power is their
//!   product (`updateSensorPairs`).
//!
//! Differences from the host library, each on the side of never inventing a number: a frame is
//! used only when its 8 sensors arrive in order after a timestamp (the library takes any 8
//! packets), so garbage costs frames, never a wrong watt; `FF 3F` where sensor 7's packet is due
//! is that sensor at full scale, not a stop (the two are the same bytes); the frames of one read
//! share the time since the previous read evenly (the library gives it all to the first); an
//! interval longer than MAX_GAP_S between reads is left uncovered, not filled with the next value.
//! The serial line is put in raw mode (`cfmakeraw`: the library leaves ICRNL on, which turns a
//! 0x0D byte into 0x0A).
use super::stream::{self, Bins};
use super::{Channel, ChannelKind, EnergyError, Scope, Source, SourceEnergy};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const MAX_SENSORS: usize = 8;
pub const MAX_PAIRS: usize = MAX_SENSORS / 2;
/// `sizeof(Sensor::EEPROM)`, packed.
pub const EEPROM_BYTES: usize = 41;
pub const STOP_PACKET: [u8; 2] = [0xFF, 0x3F];
/// A silence longer than this between two reads of the stream is a gap, not covered.
pub const MAX_GAP_S: f64 = 0.25;
const VOLTAGE: f32 = 3.3;
const MAX_LEVEL: f32 = 1023.0;

#[derive(Clone, Debug)]
pub struct PowerSensorConfig {
    /// The serial device, e.g. /dev/ttyACM0.
    pub device: PathBuf,
    /// The sensor pairs (0..3) whose rails feed the drive.
    pub rails: Vec<usize>,
}

/// One sensor's configuration as its EEPROM holds it.
#[derive(Clone, Debug, PartialEq)]
pub struct SensorConfig {
    pub type_name: String,
    pub pair_name: String,
    pub vref: f32,
    pub sensitivity: f32,
    pub in_use: bool,
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

impl SensorConfig {
    pub(crate) fn from_eeprom(b: &[u8; EEPROM_BYTES]) -> SensorConfig {
        let f = |i: usize| f32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        SensorConfig {
            type_name: c_string(&b[0..16]),
            pair_name: c_string(&b[16..32]),
            vref: f(32),
            sensitivity: f(36),
            in_use: b[40] != 0,
        }
    }

    /// The bytes the device sends (for emulators and tests).
    pub fn to_eeprom(&self) -> [u8; EEPROM_BYTES] {
        let mut b = [0u8; EEPROM_BYTES];
        let t = self.type_name.as_bytes();
        b[..t.len().min(15)].copy_from_slice(&t[..t.len().min(15)]);
        let p = self.pair_name.as_bytes();
        b[16..16 + p.len().min(15)].copy_from_slice(&p[..p.len().min(15)]);
        b[32..36].copy_from_slice(&self.vref.to_le_bytes());
        b[36..40].copy_from_slice(&self.sensitivity.to_le_bytes());
        b[40] = self.in_use as u8;
        b
    }

    /// The calibrated value of a raw level (`Sensor::updateLevel`, in float as there).
    pub fn value(&self, level: u16) -> f64 {
        ((VOLTAGE * level as f32 / MAX_LEVEL - self.vref) / self.sensitivity) as f64
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Packet {
    Stop,
    Timestamp(u16),
    Level { sensor: usize, level: u16, marker: bool },
}

/// One 2-byte packet; None when its marker bits are wrong (a byte was lost).
pub fn decode(b0: u8, b1: u8) -> Option<Packet> {
    if [b0, b1] == STOP_PACKET {
        return Some(Packet::Stop);
    }
    if b0 >> 7 != 1 || b1 >> 7 != 0 {
        return None;
    }
    let sensor = ((b0 >> 4) & 0x7) as usize;
    let level = (((b0 & 0xF) as u16) << 6) | (b1 & 0x3F) as u16;
    let marker = (b1 >> 6) & 1 == 1;
    Some(if marker && sensor == MAX_SENSORS - 1 { Packet::Timestamp(level) } else { Packet::Level { sensor, level, marker } })
}

/// The bytes of one frame (for emulators and tests): timestamp, then the 8 levels.
pub fn encode_frame(micros: u16, levels: &[u16; MAX_SENSORS]) -> [u8; 2 * (MAX_SENSORS + 1)] {
    let mut b = [0u8; 2 * (MAX_SENSORS + 1)];
    b[0] = (0b1111 << 4) | ((micros & 0x3C0) >> 6) as u8;
    b[1] = (0b01 << 6) | (micros & 0x3F) as u8;
    for (i, &l) in levels.iter().enumerate() {
        b[2 * i + 2] = ((i as u8 & 0x7) << 4) | ((l & 0x3C0) >> 6) as u8 | (1 << 7);
        b[2 * i + 3] = (l & 0x3F) as u8;
    }
    b
}

/// Frames out of the byte stream, resynchronising after garbage.
#[derive(Debug, Default)]
pub struct Parser {
    pending: Option<u8>,
    levels: [u16; MAX_SENSORS],
    /// The sensor due next in the current frame; None while waiting for a timestamp.
    next: Option<usize>,
    /// Bytes dropped because their marker bits were wrong.
    pub garbage_bytes: u64,
    /// Frames begun and abandoned (a packet out of order).
    pub dropped_frames: u64,
    pub stopped: bool,
}

impl Parser {
    /// Feed bytes; each complete frame's levels go to `frame`.
    pub(crate) fn feed(&mut self, bytes: &[u8], mut frame: impl FnMut(&[u16; MAX_SENSORS])) {
        for &b in bytes {
            let Some(b0) = self.pending.take() else {
                self.pending = Some(b);
                continue;
            };
            let p = match decode(b0, b) {
                // The same bytes as sensor 7 at full scale: where that packet is due, it is one.
                Some(Packet::Stop) if self.next == Some(MAX_SENSORS - 1) => {
                    Packet::Level { sensor: MAX_SENSORS - 1, level: 0x3FF, marker: false }
                }
                Some(p) => p,
                None => {
                    self.garbage_bytes += 1;
                    self.pending = Some(b);
                    continue;
                }
            };
            match p {
                Packet::Stop => {
                    self.abandon();
                    self.stopped = true;
                }
                Packet::Timestamp(_) => {
                    self.abandon();
                    self.next = Some(0);
                }
                Packet::Level { sensor, level, .. } if self.next == Some(sensor) => {
                    self.levels[sensor] = level;
                    if sensor == MAX_SENSORS - 1 {
                        frame(&self.levels);
                        self.next = None;
                    } else {
                        self.next = Some(sensor + 1);
                    }
                }
                Packet::Level { .. } => self.abandon(),
            }
        }
    }

    fn abandon(&mut self) {
        if self.next.is_some_and(|n| n > 0) {
            self.dropped_frames += 1;
        }
        self.next = None;
    }
}

#[derive(Default)]
struct Shared {
    t0: Option<Instant>,
    bins: Vec<Bins>,
    last_read: Option<Instant>,
    frames: u64,
    frames_in_window: u64,
    garbage_bytes: u64,
    dropped_frames: u64,
    /// Silences longer than MAX_GAP_S.
    long_gaps: u64,
    /// When and why the stream ended before the window did.
    ended: Option<(Instant, String)>,
}

pub struct PowerSensor {
    device: PathBuf,
    rails: Vec<(usize, String)>,
    channels: Vec<Channel>,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn errno_msg(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn write_byte(fd: i32, c: u8) -> Result<(), EnergyError> {
    // SAFETY: one byte from a valid buffer to an open descriptor.
    let n = unsafe { libc::write(fd, (&c as *const u8).cast(), 1) };
    if n == 1 {
        Ok(())
    } else {
        Err(EnergyError::Failed(errno_msg(&format!("write {:?}", c as char))))
    }
}

/// Read exactly `buf.len()` bytes, waiting at most `timeout` in all.
fn read_exact_timeout(fd: i32, buf: &mut [u8], timeout: Duration) -> Result<(), EnergyError> {
    let until = Instant::now() + timeout;
    let mut got = 0;
    while got < buf.len() {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(EnergyError::Failed(format!("the device sent {got} of {} bytes within {:?}", buf.len(), timeout)));
        }
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, left.as_millis().max(1) as i32) };
        if r < 0 {
            return Err(EnergyError::Failed(errno_msg("poll")));
        }
        if r == 0 {
            continue;
        }
        // SAFETY: reading into the unread part of `buf`.
        let n = unsafe { libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got) };
        if n <= 0 {
            return Err(EnergyError::Failed(if n == 0 { "the device closed".into() } else { errno_msg("read") }));
        }
        got += n as usize;
    }
    Ok(())
}

fn signed_s(t: Instant, t0: Instant) -> f64 {
    if t >= t0 {
        (t - t0).as_secs_f64()
    } else {
        -(t0 - t).as_secs_f64()
    }
}

impl PowerSensor {
    /// Open the device, read its sensors' configuration, check the rails and start streaming.
    /// Err: a device or rails that cannot be used as given (bad input), or a device that
    /// fails while it is set up (failed).
    pub fn open(cfg: &PowerSensorConfig) -> Result<(PowerSensor, Vec<String>), EnergyError> {
        let dev = cfg.device.display().to_string();
        if cfg.rails.is_empty() {
            return Err(EnergyError::Invalid(format!(
                "PowerSensor3 {dev}: no rails named (--powersensor-rails, sensor pairs 0-{})",
                MAX_PAIRS - 1
            )));
        }
        if let Some(r) = cfg.rails.iter().find(|&&r| r >= MAX_PAIRS) {
            return Err(EnergyError::Invalid(format!(
                "PowerSensor3 rail {r} does not exist: the device has sensor pairs 0-{}",
                MAX_PAIRS - 1
            )));
        }
        let c = std::ffi::CString::new(dev.as_str())
            .map_err(|_| EnergyError::Invalid(format!("PowerSensor3 device {dev:?} holds a NUL byte")))?;
        // SAFETY: a valid C string; the descriptor is owned below.
        let raw = unsafe { libc::open(c.as_ptr(), libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(EnergyError::Invalid(errno_msg(&format!("PowerSensor3 {dev}"))));
        }
        // SAFETY: `raw` is an open descriptor no one else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // The library takes an exclusive lock (PowerSensor::openDevice); another reader would
        // steal half the bytes.
        // SAFETY: an open descriptor.
        if unsafe { libc::flock(raw, libc::LOCK_EX | libc::LOCK_NB) } < 0 {
            return Err(EnergyError::Invalid(format!("PowerSensor3 {dev} is in use by another program (it holds the device's lock)")));
        }
        // SAFETY: termios of an open descriptor, a zeroed struct filled by tcgetattr.
        unsafe {
            let mut t: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(raw, &mut t) < 0 {
                return Err(EnergyError::Invalid(errno_msg(&format!("PowerSensor3 {dev} is not a serial device: tcgetattr"))));
            }
            libc::cfmakeraw(&mut t);
            t.c_cflag |= libc::CLOCAL | libc::CREAD;
            t.c_cc[libc::VMIN] = 1;
            t.c_cc[libc::VTIME] = 0;
            if libc::tcsetattr(raw, libc::TCSANOW, &t) < 0 {
                return Err(EnergyError::Failed(errno_msg(&format!("PowerSensor3 {dev}: tcsetattr"))));
            }
            // A device left streaming by a program that died: stop it, drop what it sent.
            write_byte(raw, b'T').map_err(|e| e.context(|m| format!("PowerSensor3 {dev}: {m}")))?;
            std::thread::sleep(Duration::from_millis(50));
            libc::tcflush(raw, libc::TCIFLUSH);
        }
        let sensors = read_config(raw).map_err(|e| e.context(|m| format!("PowerSensor3 {dev}: reading its sensor configuration: {m}")))?;
        let mut rails = Vec::new();
        for &p in &cfg.rails {
            let (i, v) = (&sensors[2 * p], &sensors[2 * p + 1]);
            if !(i.in_use && v.in_use) {
                return Err(EnergyError::Invalid(format!(
                    "PowerSensor3 {dev}: rail {p} is not in use (current sensor {} {}, voltage sensor {} {}): configure it with psconfig",
                    2 * p,
                    if i.in_use { "in use" } else { "unused" },
                    2 * p + 1,
                    if v.in_use { "in use" } else { "unused" }
                )));
            }
            if i.sensitivity == 0.0 || v.sensitivity == 0.0 || !i.sensitivity.is_finite() || !v.sensitivity.is_finite() {
                return Err(EnergyError::Invalid(format!(
                    "PowerSensor3 {dev}: rail {p} has a sensitivity of 0 or not a number in its EEPROM: calibrate it with psconfig"
                )));
            }
            let name = if i.pair_name.is_empty() { format!("rail {p}") } else { format!("rail {p} ({})", i.pair_name) };
            rails.push((p, name));
        }
        let notes = cfg
            .rails
            .iter()
            .map(|&p| {
                let (i, v) = (&sensors[2 * p], &sensors[2 * p + 1]);
                format!(
                    "rail {p} {:?}: current sensor {:?} vref {} V sensitivity {} V/A, voltage sensor {:?} vref {} V gain {}",
                    i.pair_name, i.type_name, i.vref, i.sensitivity, v.type_name, v.vref, v.sensitivity
                )
            })
            .collect();
        write_byte(raw, b'S').map_err(|e| e.context(|m| format!("PowerSensor3 {dev}: {m}")))?;
        let shared = Arc::new(Mutex::new(Shared { bins: vec![Bins::default(); rails.len()], ..Default::default() }));
        let stop = Arc::new(AtomicBool::new(false));
        let calib: Vec<(usize, SensorConfig, SensorConfig)> =
            rails.iter().map(|&(p, _)| (p, sensors[2 * p].clone(), sensors[2 * p + 1].clone())).collect();
        let (sh, st) = (shared.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("energy-powersensor".into())
            .spawn(move || reader(fd, calib, sh, st))
            .map_err(|e| EnergyError::Failed(format!("PowerSensor3 {dev}: no thread: {e}")))?;
        let channels = rails
            .iter()
            .map(|(_, name)| Channel {
                scope: Scope::Ssd,
                label: name.clone(),
                kind: ChannelKind::Power { max_gap_s: MAX_GAP_S, edge_hold_s: 0.0 },
            })
            .collect();
        Ok((PowerSensor { device: cfg.device.clone(), rails, channels, shared, stop, thread: Some(thread) }, notes))
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for PowerSensor {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

/// `readSensorsFromEEPROM`: `R`, then each sensor's struct answered by `s`, then `D`.
fn read_config(fd: i32) -> Result<Vec<SensorConfig>, EnergyError> {
    write_byte(fd, b'R')?;
    let mut out = Vec::new();
    for _ in 0..MAX_SENSORS {
        let mut b = [0u8; EEPROM_BYTES];
        read_exact_timeout(fd, &mut b, Duration::from_secs(2))?;
        out.push(SensorConfig::from_eeprom(&b));
        write_byte(fd, b's')?;
    }
    let mut d = [0u8; 1];
    read_exact_timeout(fd, &mut d, Duration::from_secs(2))?;
    if d[0] != b'D' {
        return Err(EnergyError::Failed(format!("expected 'D' after the configuration, got byte 0x{:02x}", d[0])));
    }
    Ok(out)
}

/// The streaming thread: reads until told to stop or the device goes away.
fn reader(fd: OwnedFd, calib: Vec<(usize, SensorConfig, SensorConfig)>, shared: Arc<Mutex<Shared>>, stop: Arc<AtomicBool>) {
    let raw = fd.as_raw_fd();
    let mut parser = Parser::default();
    let mut buf = [0u8; 4096];
    let mut frames: Vec<Vec<f64>> = Vec::new();
    loop {
        if stop.load(Ordering::SeqCst) {
            // `stopIOThread`: X, and the device answers with the stop packet; wait briefly for it.
            if write_byte(raw, b'X').is_ok() {
                let until = Instant::now() + Duration::from_millis(300);
                while !parser.stopped && Instant::now() < until {
                    let mut p = libc::pollfd { fd: raw, events: libc::POLLIN, revents: 0 };
                    // SAFETY: one valid pollfd; reading into a local buffer.
                    let n = unsafe {
                        if libc::poll(&mut p, 1, 50) <= 0 {
                            continue;
                        }
                        libc::read(raw, buf.as_mut_ptr().cast(), buf.len())
                    };
                    if n <= 0 {
                        break;
                    }
                    parser.feed(&buf[..n as usize], |_| {});
                }
            }
            return;
        }
        let mut p = libc::pollfd { fd: raw, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, 50) };
        if r == 0 || (r < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted) {
            continue;
        }
        // SAFETY: reading into a local buffer.
        let n = if r < 0 { -1 } else { unsafe { libc::read(raw, buf.as_mut_ptr().cast(), buf.len()) } };
        let now = Instant::now();
        if n <= 0 {
            let why = if n == 0 { "the device closed (unplugged?)".to_string() } else { errno_msg("read (unplugged?)") };
            shared.lock().unwrap_or_else(|e| e.into_inner()).ended = Some((now, why));
            return;
        }
        frames.clear();
        parser.feed(&buf[..n as usize], |levels| {
            frames.push(calib.iter().map(|(p, i, v)| i.value(levels[2 * p]) * v.value(levels[2 * p + 1])).collect())
        });
        let mut sh = shared.lock().unwrap_or_else(|e| e.into_inner());
        sh.garbage_bytes = parser.garbage_bytes;
        sh.dropped_frames = parser.dropped_frames;
        if frames.is_empty() {
            continue;
        }
        sh.frames += frames.len() as u64;
        if let (Some(prev), Some(t0)) = (sh.last_read, sh.t0) {
            let (a, b) = (signed_s(prev, t0), signed_s(now, t0));
            if b - a <= MAX_GAP_S {
                let step = (b - a) / frames.len() as f64;
                for (k, w) in frames.iter().enumerate() {
                    let (ta, tb) = (a + step * k as f64, a + step * (k + 1) as f64);
                    if tb > 0.0 {
                        sh.frames_in_window += 1;
                    }
                    for (bin, &watts) in sh.bins.iter_mut().zip(w) {
                        bin.add(ta, tb, watts, watts);
                    }
                }
            } else if b > 0.0 {
                sh.long_gaps += 1;
            }
        }
        sh.last_read = Some(now);
        if parser.stopped {
            sh.ended = Some((now, "the device stopped streaming (it sent the stop packet)".into()));
            return;
        }
    }
}

impl Source for PowerSensor {
    fn name(&self) -> &'static str {
        "powersensor"
    }
    fn method(&self, _scope: Scope) -> String {
        format!(
            "PowerSensor3 {} ({}): each rail's V×I from the device's EEPROM calibration, every frame integrated on the host clock",
            self.device.display(),
            self.rails.iter().map(|(_, n)| n.as_str()).collect::<Vec<_>>().join(" + ")
        )
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn read(&mut self) -> Vec<Result<super::Reading, EnergyError>> {
        Vec::new()
    }
    fn begin(&mut self, t0: Instant, _start_unix: f64) -> bool {
        self.shared.lock().unwrap_or_else(|e| e.into_inner()).t0 = Some(t0);
        true
    }
    fn finish(&mut self, end: f64) -> (Vec<SourceEnergy>, Vec<String>) {
        self.stop_thread();
        let sh = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let mut notes = Vec::new();
        let t0 = sh.t0.unwrap_or_else(Instant::now);
        if let Some((when, why)) = &sh.ended {
            let at = signed_s(*when, t0);
            if at < end {
                notes.push(format!("the stream ended {at:.3} s into the window: {why}; the rest of the window is not covered"));
            }
        }
        if sh.garbage_bytes > 0 || sh.dropped_frames > 0 {
            notes.push(format!(
                "{} bytes with wrong marker bits skipped and {} incomplete frames dropped (the time they took is counted with the next frame's power)",
                sh.garbage_bytes, sh.dropped_frames
            ));
        }
        if sh.long_gaps > 0 {
            notes.push(format!("{} silences longer than {MAX_GAP_S} s left uncovered", sh.long_gaps));
        }
        if end > 0.0 {
            notes.push(format!("{} frames in the window ({:.0} per second)", sh.frames_in_window, sh.frames_in_window as f64 / end));
        }
        if sh.frames_in_window == 0 {
            let mut why = format!("powersensor ssd: no frame from {} in the window", self.device.display());
            if !notes.is_empty() {
                why.push_str(&format!(" ({})", notes.join("; ")));
            }
            return (Vec::new(), vec![why]);
        }
        let parts: Vec<(String, &Bins)> = self.rails.iter().zip(&sh.bins).map(|((_, n), b)| (n.clone(), b)).collect();
        let s = stream::scope_energy("powersensor", Scope::Ssd, self.method(Scope::Ssd), &parts, end, notes);
        (vec![s], Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_garbage_costs_frames_not_watts() {
        let levels = [512, 700, 3, 1023, 0, 1, 1022, 1023];
        let f = encode_frame(1000, &levels);
        let mut p = Parser::default();
        let mut got = Vec::new();
        let mut bytes = f.to_vec();
        bytes.extend_from_slice(&[0x00, 0x13, 0x77]); // garbage
        bytes.extend_from_slice(&f[..7]); // a frame cut short
        bytes.extend_from_slice(&f);
        bytes.extend_from_slice(&STOP_PACKET);
        p.feed(&bytes, |l| got.push(*l));
        assert_eq!(got, vec![levels, levels]);
        assert!(p.garbage_bytes >= 3, "{p:?}");
        assert_eq!(p.dropped_frames, 1);
        assert!(p.stopped);
    }

    #[test]
    fn eeprom_struct_is_41_packed_bytes() {
        let s = SensorConfig { type_name: "MLX91221-10".into(), pair_name: "12V".into(), vref: 1.65, sensitivity: 0.12, in_use: true };
        let b = s.to_eeprom();
        assert_eq!(b.len(), 41);
        assert_eq!(SensorConfig::from_eeprom(&b), s);
        assert!((s.value(1023) - (3.3 - 1.65) / 0.12).abs() < 1e-4);
    }
}
