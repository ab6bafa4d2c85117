//! Any meter that prints timestamped watts: a command's stdout (`sh -c CMD`, e.g. a vendor tool
//! or a script polling a plug) or a TCP socket sending the same lines. One sample a line,
//! `<timestamp> <watts>` (blank, comma, semicolon or tab between), the timestamp UNIX seconds or
//! ISO 8601 as the meter logs take it (`meterlog::parse_timestamp`): the `csv` meter-log line
//! `timestamp,watts` is one. The scope is the user's (`--energy-scope`, e.g. `ssd`, `wall_ac`).
//!
//! The meter's timestamps place the samples (a meter that buffers is still right); a line that
//! is not a sample (a header, garbage) is skipped and counted; samples are integrated by the
//! trapezoid rule as they arrive, pairs at most MAX_GAP_S apart, into one-second bins
//! (`stream`). The meter's clock is compared with the host's on every sample: when it is off by
//! more than two seconds the record says by how much, and samples it puts outside the window
//! cover nothing of it, so the coverage says what was lost; no time is shifted silently.
use super::stream::{self, Bins};
use super::{Channel, ChannelKind, EnergyError, Scope, Source, SourceEnergy, MAX_SAMPLE_WATTS};
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Two samples further apart than this leave the time between them uncovered.
pub const MAX_GAP_S: f64 = 5.0;
/// The longest line taken; a longer one is garbage.
const MAX_LINE: usize = 4096;

#[derive(Clone, Debug)]
pub struct GenericConfig {
    /// A shell command whose stdout prints the samples.
    pub command: Option<String>,
    /// Or HOST:PORT of a TCP server sending them.
    pub socket: Option<String>,
    pub scope: Scope,
}

/// `<timestamp> <watts>`; Err says why the line is no sample.
pub(crate) fn parse_line(line: &str) -> Result<(f64, f64), EnergyError> {
    let f: Vec<&str> = line.split([' ', '\t', ',', ';']).filter(|s| !s.is_empty()).collect();
    let [ts, w] = f[..] else { return Err(EnergyError::Unreachable(format!("{} fields, not <timestamp> <watts>", f.len()))) };
    let ts = super::meterlog::parse_timestamp(ts).ok_or_else(|| EnergyError::Unreachable(format!("{ts:?} is not a timestamp")))?;
    let w: f64 = w.parse().map_err(|_| EnergyError::Unreachable(format!("{w:?} is not a number of watts")))?;
    if !(w.is_finite() && (0.0..=MAX_SAMPLE_WATTS).contains(&w)) {
        return Err(EnergyError::Unreachable(format!("{w} W is not a power reading")));
    }
    if !(0.0..=95_617_584_000.0).contains(&ts) {
        return Err(EnergyError::Unreachable(format!("timestamp {ts} is before 1970 or after the year 5000")));
    }
    Ok((ts, w))
}

#[derive(Default)]
struct Shared {
    start_unix: Option<f64>,
    bins: Bins,
    /// The latest sample (UNIX time, watts).
    last: Option<(f64, f64)>,
    lines: u64,
    bad_lines: u64,
    first_bad: Option<String>,
    out_of_order: u64,
    long_gaps: u64,
    /// Host time minus the meter's, at the latest sample.
    lag_s: f64,
    max_skew_s: f64,
    ended: Option<(f64, String)>,
}

impl Shared {
    fn sample(&mut self, ts: f64, w: f64, host_unix: f64) {
        let lag = host_unix - ts;
        self.lag_s = lag;
        if lag.abs() > self.max_skew_s.abs() {
            self.max_skew_s = lag;
        }
        if let Some((t, lw)) = self.last {
            if ts <= t {
                self.out_of_order += 1;
                return;
            }
            if ts - t > MAX_GAP_S {
                self.long_gaps += 1;
            } else if let Some(s0) = self.start_unix {
                self.bins.add(t - s0, ts - s0, lw, w);
            }
        }
        self.last = Some((ts, w));
    }
}

pub struct Generic {
    what: String,
    scope: Scope,
    channels: Vec<Channel>,
    shared: Arc<Mutex<Shared>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    child: Option<Child>,
}

enum Input {
    Pipe(std::process::ChildStdout),
    Tcp(std::net::TcpStream),
}

impl Input {
    fn fd(&self) -> i32 {
        match self {
            Input::Pipe(p) => p.as_raw_fd(),
            Input::Tcp(t) => t.as_raw_fd(),
        }
    }
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::io::Read;
        match self {
            Input::Pipe(p) => p.read(buf),
            Input::Tcp(t) => t.read(buf),
        }
    }
}

impl Generic {
    /// Err: a meter given wrongly (bad input), or a command that does not start or a socket
    /// that does not answer (external).
    pub fn open(cfg: &GenericConfig) -> Result<(Generic, Vec<String>), EnergyError> {
        let (input, child, what) = match (&cfg.command, &cfg.socket) {
            (Some(c), None) => {
                use std::os::unix::process::CommandExt;
                // Its own process group, so the meter's children end with it at the window's end.
                let mut child = Command::new("sh")
                    .process_group(0)
                    .arg("-c")
                    .arg(c)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .map_err(|e| EnergyError::Unreachable(format!("meter command {c:?}: {e}")))?;
                let out = child.stdout.take().ok_or_else(|| EnergyError::Failed("meter command: no stdout".into()))?;
                (Input::Pipe(out), Some(child), format!("command {c:?}"))
            }
            (None, Some(addr)) => {
                use std::net::ToSocketAddrs;
                let a = addr
                    .to_socket_addrs()
                    .map_err(|e| EnergyError::Unreachable(format!("meter socket {addr}: {e}")))?
                    .next()
                    .ok_or_else(|| EnergyError::Unreachable(format!("meter socket {addr}: no address")))?;
                let s = std::net::TcpStream::connect_timeout(&a, Duration::from_secs(3))
                    .map_err(|e| EnergyError::Unreachable(format!("meter socket {addr}: {e}")))?;
                (Input::Tcp(s), None, format!("socket {addr}"))
            }
            (Some(_), Some(_)) => return Err(EnergyError::Invalid("a generic meter is a command or a socket, not both".into())),
            (None, None) => {
                return Err(EnergyError::Invalid(
                    "no meter command or socket given (--energy-command CMD or --energy-socket HOST:PORT)".into(),
                ))
            }
        };
        let shared = Arc::new(Mutex::new(Shared::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (sh, st) = (shared.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("energy-generic".into())
            .spawn(move || reader(input, sh, st))
            .map_err(|e| EnergyError::Failed(format!("{what}: no thread: {e}")))?;
        let channels =
            vec![Channel { scope: cfg.scope, label: what.clone(), kind: ChannelKind::Power { max_gap_s: MAX_GAP_S, edge_hold_s: 0.0 } }];
        Ok((Generic { what, scope: cfg.scope, channels, shared, stop, thread: Some(thread), child }, Vec::new()))
    }

    fn stop_all(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(c) = &mut self.child {
            // SAFETY: a signal to the process group of the child this source started (its pid is
            // the group's id, `process_group(0)`), which has not been reaped yet.
            unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
            let _ = c.kill();
            let _ = c.wait();
        }
        self.child = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Generic {
    fn drop(&mut self) {
        self.stop_all();
    }
}

fn reader(mut input: Input, shared: Arc<Mutex<Shared>>, stop: Arc<AtomicBool>) {
    let mut buf = vec![0u8; 8192];
    let mut line: Vec<u8> = Vec::new();
    let end = |sh: &Arc<Mutex<Shared>>, why: String| {
        sh.lock().unwrap_or_else(|e| e.into_inner()).ended = Some((super::unix_now(), why));
    };
    while !stop.load(Ordering::SeqCst) {
        let mut p = libc::pollfd { fd: input.fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut p, 1, 50) } <= 0 {
            continue;
        }
        let n = match input.read(&mut buf) {
            Ok(0) => return end(&shared, "the meter's output ended".into()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return end(&shared, format!("reading the meter: {e}")),
        };
        let host = super::unix_now();
        let mut sh = shared.lock().unwrap_or_else(|e| e.into_inner());
        for &b in &buf[..n] {
            if b != b'\n' {
                if line.len() < MAX_LINE {
                    line.push(b);
                }
                continue;
            }
            let text = String::from_utf8_lossy(&line).trim().to_string();
            line.clear();
            if text.is_empty() {
                continue;
            }
            sh.lines += 1;
            match parse_line(&text) {
                Ok((ts, w)) => sh.sample(ts, w, host),
                Err(e) => {
                    sh.bad_lines += 1;
                    if sh.first_bad.is_none() {
                        sh.first_bad = Some(format!("{:?}: {e}", text.chars().take(80).collect::<String>()));
                    }
                }
            }
        }
    }
}

impl Source for Generic {
    fn name(&self) -> &'static str {
        "generic"
    }
    fn method(&self, _: Scope) -> String {
        format!("meter {} printing <timestamp> <watts>, placed by the meter's timestamps, trapezoid rule", self.what)
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn read(&mut self) -> Vec<Result<super::Reading, EnergyError>> {
        Vec::new()
    }
    fn begin(&mut self, _t0: Instant, start_unix: f64) -> bool {
        let mut sh = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        sh.start_unix = Some(start_unix);
        true
    }
    fn finish(&mut self, end: f64) -> (Vec<SourceEnergy>, Vec<String>) {
        // A meter's line for the window's last moment comes a little after it: wait for it briefly.
        let until = Instant::now() + Duration::from_secs(2);
        loop {
            let sh = self.shared.lock().unwrap_or_else(|e| e.into_inner());
            let past = match (sh.last, sh.start_unix) {
                (Some((t, _)), Some(s0)) => t - s0 >= end,
                _ => false,
            };
            if past || sh.ended.is_some() || Instant::now() >= until {
                break;
            }
            drop(sh);
            std::thread::sleep(Duration::from_millis(20));
        }
        self.stop_all();
        let sh = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        let s0 = sh.start_unix.unwrap_or(0.0);
        let mut notes = Vec::new();
        if let Some((when, why)) = &sh.ended {
            if when - s0 < end {
                notes.push(format!("{} {:.3} s into the window: the rest of the window is not covered", why, when - s0));
            }
        }
        if sh.bad_lines > 0 {
            notes.push(format!(
                "{} of {} lines were no sample and were skipped; first: {}",
                sh.bad_lines,
                sh.lines,
                sh.first_bad.clone().unwrap_or_default()
            ));
        }
        if sh.out_of_order > 0 {
            notes.push(format!("{} samples not after the one before were skipped", sh.out_of_order));
        }
        if sh.long_gaps > 0 {
            notes.push(format!("{} gaps longer than {MAX_GAP_S} s between samples left uncovered", sh.long_gaps));
        }
        if sh.max_skew_s.abs() > 2.0 {
            notes.push(format!(
                "the meter's clock is up to {:.1} s {} the host's (host minus meter, latest {:+.1} s): samples are placed by the meter's time",
                sh.max_skew_s.abs(),
                if sh.max_skew_s > 0.0 { "behind" } else { "ahead of" },
                sh.lag_s
            ));
        }
        let r = sh.bins.over(end);
        if r.covered_s <= 0.0 {
            let mut why = format!("generic {}: no samples of {} cover the window", self.scope.as_str(), self.what);
            if !notes.is_empty() {
                why.push_str(&format!(" ({})", notes.join("; ")));
            }
            return (Vec::new(), vec![why]);
        }
        let parts = [(self.what.clone(), &sh.bins)];
        (vec![stream::scope_energy("generic", self.scope, self.method(self.scope), &parts, end, notes)], Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        assert_eq!(parse_line("1700000000.5 12.25").unwrap(), (1_700_000_000.5, 12.25));
        assert_eq!(parse_line("1700000000,3").unwrap(), (1_700_000_000.0, 3.0));
        assert!(parse_line("timestamp,watts").is_err());
        assert!(parse_line("1700000000 nan").is_err());
        assert!(parse_line("1700000000 -1").is_err());
        assert!(parse_line("1 2 3").is_err());
    }
}
