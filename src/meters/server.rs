//! The server's cost over a client run's window (issue 30 item 1: "stored with the client's
//! results"). A served suite part (S4.7, `studies::served`) starts `iolab serve` as a child
//! process, connects /dev/nbdN to it and mounts the client's ext4; it hands what serves (a
//! [`Serving`]) to its sweep, which hands it to each run (`session::Measure::serving`: no
//! registry of what is being served), and every file-set run whose spec names that `server` reads, just before and just after its
//! measured phase, the server's CPU by thread class from /proc (its connection threads are named
//! `iolab-nbd*`, everything else is the rest of the process) and the requests the kernel's NBD
//! client sent it from /sys/block/nbdN/stat (one block request is one NBD request). The
//! difference is the record's `fileset.server`.
//!
//! The server runs as its own process so that its CPU is its own: the client's run measures its
//! process's CPU (`cost`, rusage), and a server thread inside it would be counted there too.
use crate::failure::Failure;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// What the served part is doing for the runs of one back end.
#[derive(Clone, Debug, PartialEq)]
pub enum Serving {
    /// `server` (the back end's name) serves /dev/nbd`nbd`, whose ext4 is mounted at `dir`, from
    /// process `pid`.
    At { server: String, dir: PathBuf, pid: u32, nbd: u32 },
    /// This back end cannot serve here: each of its runs is skipped with `why`.
    Cannot { server: String, why: String },
}

/// A run whose spec names `server`, given what serves (`serving`, from the served part that
/// runs it): where its server is, or why it cannot run (Unsupported: the back end cannot serve
/// here; bad input: nothing serves the directory, as in a plan of one's own, since only a served
/// suite part sets up the server). None: not a served run.
pub(crate) fn check(dir: &Path, server: Option<&str>, serving: Option<&Serving>) -> Result<Option<Serving>, Failure> {
    let Some(server) = server else { return Ok(None) };
    match serving.cloned() {
        Some(Serving::Cannot { server: s, why }) if s == server => Err(Failure::unsupported(why)),
        Some(at @ Serving::At { .. }) if matches!(&at, Serving::At { server: s, dir: d, .. } if s == server && d == dir) => Ok(Some(at)),
        _ => Err(Failure::invalid(format!(
            "server = \"{server}\": {} is not on a file system iolab serves through {server}; a served suite part sets the server up (iolab suite run S4 --part S4.7)",
            dir.display()
        ))),
    }
}

/// CPU time, seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cpu {
    pub user_s: f64,
    pub system_s: f64,
}

/// Requests the kernel's NBD client sent in the window, from its block device's statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Requests {
    pub read: u64,
    pub write: u64,
    pub flush: u64,
    pub trim: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
}

impl Requests {
    pub fn total(&self) -> u64 {
        self.read + self.write + self.flush + self.trim
    }
}

/// The server's cost over a run's measured phase: the record's `fileset.server`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerWindow {
    /// The back end that served (`iolab serve -i`): io_uring, psync or vfio-nvme.
    pub server: String,
    /// The client's device.
    pub device: String,
    pub seconds: f64,
    pub requests: Requests,
    /// The connection threads (`iolab-nbd*`: negotiation, the socket, the back end's submit and
    /// reap; the user-space driver's polling), from /proc's clock ticks.
    pub cpu_connections: Cpu,
    /// The rest of the server's process (the listening thread, io_uring's workers).
    pub cpu_rest: Cpu,
    /// Time on a CPU, from the scheduler's nanosecond counts (/proc/.../schedstat) where the
    /// kernel keeps them: the connection threads and the rest's live threads.
    pub on_cpu_connections_s: Option<f64>,
    pub on_cpu_rest_s: Option<f64>,
    /// All of the server's CPU time per request, microseconds (on-CPU time where kept, else the
    /// clock ticks); None without requests.
    pub cpu_us_per_request: Option<f64>,
    /// The connection threads' share of it.
    pub connection_cpu_us_per_request: Option<f64>,
}

/// The server's counters at one instant.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Snapshot {
    at: Option<Instant>,
    conn: Cpu,
    total: Cpu,
    conn_ns: Option<u64>,
    rest_ns: Option<u64>,
    requests: Requests,
}

/// USER_HZ: /proc's clock ticks per second.
fn ticks_per_s() -> f64 {
    // SAFETY: sysconf reads a constant.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// A /proc stat line's name and (utime, stime) ticks; None if it is not one.
pub(crate) fn parse_stat(text: &str) -> Option<(String, u64, u64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let f: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After the name: state is field 3, utime field 14 and stime 15 (proc(5)).
    Some((name, f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

/// A block device's stat line (Documentation/block/stat.rst) as requests: reads, writes,
/// discards and flushes completed, and the bytes of reads and writes.
pub(crate) fn parse_block_stat(text: &str) -> Option<Requests> {
    let f: Vec<u64> = text.split_whitespace().map(|v| v.parse().ok()).collect::<Option<_>>()?;
    let at = |i: usize| f.get(i).copied().unwrap_or(0);
    if f.len() < 11 {
        return None;
    }
    Some(Requests { read: at(0), bytes_read: at(2) * 512, write: at(4), bytes_written: at(6) * 512, trim: at(11), flush: at(15) })
}

impl Snapshot {
    /// The server process `pid`'s threads and /dev/nbd`nbd`'s statistics now.
    pub(crate) fn take(pid: u32, nbd: u32) -> Snapshot {
        let hz = ticks_per_s();
        let cpu = |(u, s): (u64, u64)| Cpu { user_s: u as f64 / hz, system_s: s as f64 / hz };
        let total = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|t| parse_stat(&t)).map(|(_, u, s)| cpu((u, s)));
        let (mut conn, mut conn_ns, mut rest_ns) = ((0u64, 0u64), Some(0u64), Some(0u64));
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for t in tasks.flatten() {
                let Some((name, u, s)) = std::fs::read_to_string(t.path().join("stat")).ok().and_then(|x| parse_stat(&x)) else { continue };
                let ns = std::fs::read_to_string(t.path().join("schedstat"))
                    .ok()
                    .and_then(|x| x.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()));
                let is_conn = name.starts_with("iolab-nbd");
                if is_conn {
                    conn = (conn.0 + u, conn.1 + s);
                }
                let slot = if is_conn { &mut conn_ns } else { &mut rest_ns };
                *slot = match (*slot, ns) {
                    (Some(a), Some(b)) => Some(a + b),
                    _ => None,
                };
            }
        }
        let requests =
            std::fs::read_to_string(format!("/sys/block/nbd{nbd}/stat")).ok().and_then(|t| parse_block_stat(&t)).unwrap_or_default();
        Snapshot { at: Some(Instant::now()), conn: cpu(conn), total: total.unwrap_or_default(), conn_ns, rest_ns, requests }
    }

    /// The window from `self` to `end`, served through `server` to `device`.
    pub(crate) fn window(&self, end: &Snapshot, server: &str, device: &str) -> ServerWindow {
        let d = |a: f64, b: f64| (b - a).max(0.0);
        let conn = Cpu { user_s: d(self.conn.user_s, end.conn.user_s), system_s: d(self.conn.system_s, end.conn.system_s) };
        let total = Cpu { user_s: d(self.total.user_s, end.total.user_s), system_s: d(self.total.system_s, end.total.system_s) };
        let rest = Cpu { user_s: d(conn.user_s, total.user_s), system_s: d(conn.system_s, total.system_s) };
        let ns = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?) as f64 / 1e9);
        let (on_conn, on_rest) = (ns(self.conn_ns, end.conn_ns), ns(self.rest_ns, end.rest_ns));
        let r = |a: u64, b: u64| b.saturating_sub(a);
        let (x, y) = (&self.requests, &end.requests);
        let requests = Requests {
            read: r(x.read, y.read),
            write: r(x.write, y.write),
            flush: r(x.flush, y.flush),
            trim: r(x.trim, y.trim),
            bytes_read: r(x.bytes_read, y.bytes_read),
            bytes_written: r(x.bytes_written, y.bytes_written),
        };
        let n = requests.total();
        let per = |s: f64| (n > 0).then(|| s * 1e6 / n as f64);
        let (all_s, conn_s) = match (on_conn, on_rest) {
            (Some(c), Some(rest)) => (c + rest, c),
            _ => (total.user_s + total.system_s, conn.user_s + conn.system_s),
        };
        let seconds = match (self.at, end.at) {
            (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
            _ => 0.0,
        };
        ServerWindow {
            server: server.to_string(),
            device: device.to_string(),
            seconds,
            requests,
            cpu_connections: conn,
            cpu_rest: rest,
            on_cpu_connections_s: on_conn,
            on_cpu_rest_s: on_rest,
            cpu_us_per_request: per(all_s),
            connection_cpu_us_per_request: per(conn_s),
        }
    }
}

/// A served run's window under way: begun just before its measured phase.
pub(crate) struct Window {
    server: String,
    pid: u32,
    nbd: u32,
    start: Snapshot,
}

impl Window {
    /// Begins the window of a served run (`check`'s Some).
    pub(crate) fn begin(s: &Serving) -> Option<Window> {
        match s {
            Serving::At { server, pid, nbd, .. } => {
                Some(Window { server: server.clone(), pid: *pid, nbd: *nbd, start: Snapshot::take(*pid, *nbd) })
            }
            Serving::Cannot { .. } => None,
        }
    }

    pub(crate) fn end(self) -> ServerWindow {
        let end = Snapshot::take(self.pid, self.nbd);
        self.start.window(&end, &self.server, &format!("/dev/nbd{}", self.nbd))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_and_block_statistics_are_read() {
        let (name, u, s) = parse_stat("4242 (iolab-nbd0 (x)) S 1 2 3 4 5 6 7 8 9 10 250 40 0 0 20 0").unwrap();
        assert_eq!((name.as_str(), u, s), ("iolab-nbd0 (x)", 250, 40));
        assert_eq!(parse_stat("garbage"), None);
        let r = parse_block_stat("   10 0 160 5 20 0 320 9 0 30 40 3 0 24 1 7 2").unwrap();
        assert_eq!(r, Requests { read: 10, bytes_read: 160 * 512, write: 20, bytes_written: 320 * 512, trim: 3, flush: 7 });
        assert_eq!(r.total(), 40);
        // An older kernel's 11 fields: no discards or flushes.
        assert_eq!(parse_block_stat("1 0 8 0 2 0 16 0 0 0 0").unwrap().total(), 3);
        assert_eq!(parse_block_stat("1 2"), None);
    }

    #[test]
    fn a_window_is_the_difference_split_by_thread_class() {
        let at = Instant::now();
        let a = Snapshot {
            at: Some(at),
            conn: Cpu { user_s: 1.0, system_s: 1.0 },
            total: Cpu { user_s: 1.5, system_s: 2.0 },
            conn_ns: Some(1_000_000_000),
            rest_ns: Some(500_000_000),
            requests: Requests { read: 100, ..Default::default() },
        };
        let b = Snapshot {
            at: Some(at + std::time::Duration::from_secs(2)),
            conn: Cpu { user_s: 1.5, system_s: 1.2 },
            total: Cpu { user_s: 2.5, system_s: 2.4 },
            conn_ns: Some(1_800_000_000),
            rest_ns: Some(700_000_000),
            requests: Requests { read: 1100, write: 0, flush: 0, ..Default::default() },
        };
        let w = a.window(&b, "io_uring", "/dev/nbd0");
        assert_eq!(w.requests.read, 1000);
        assert!((w.cpu_connections.user_s - 0.5).abs() < 1e-9 && (w.cpu_connections.system_s - 0.2).abs() < 1e-9, "{w:?}");
        assert!((w.cpu_rest.user_s - 0.5).abs() < 1e-9 && (w.cpu_rest.system_s - 0.2).abs() < 1e-9, "{w:?}");
        // On-CPU nanoseconds where kept: 0.8 s + 0.2 s over 1000 requests.
        assert!((w.cpu_us_per_request.unwrap() - 1000.0).abs() < 1e-6, "{w:?}");
        assert!((w.connection_cpu_us_per_request.unwrap() - 800.0).abs() < 1e-6, "{w:?}");
        assert!((w.seconds - 2.0).abs() < 1e-9);
        let none = a.window(&a, "io_uring", "/dev/nbd0");
        assert_eq!(none.cpu_us_per_request, None, "no requests, no CPU per request");
    }

    /// A spec naming a server runs only where a served part set that server up: elsewhere it
    /// is bad input, and a back end that cannot serve here skips its runs with the reason.
    #[test]
    fn a_served_run_needs_its_server() {
        let dir = Path::new("/run/iolab/s4.7-client");
        assert_eq!(check(dir, None, None).unwrap(), None);
        let e = check(dir, Some("io_uring"), None).unwrap_err();
        assert_eq!(e.kind, crate::failure::FailureKind::Invalid, "{}", e.message);
        let at = Serving::At { server: "io_uring".into(), dir: dir.into(), pid: 1, nbd: 0 };
        assert_eq!(check(dir, Some("io_uring"), Some(&at)).unwrap(), Some(at.clone()));
        assert_eq!(check(dir, None, Some(&at)).unwrap(), None, "a run naming no server is not served");
        assert!(check(dir, Some("vfio-nvme"), Some(&at)).is_err());
        assert!(check(Path::new("/elsewhere"), Some("io_uring"), Some(&at)).is_err());
        let cannot = Serving::Cannot { server: "vfio-nvme".into(), why: "no controller".into() };
        let e = check(dir, Some("vfio-nvme"), Some(&cannot)).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (crate::failure::FailureKind::Unsupported, "no controller"));
        assert!(check(dir, Some("io_uring"), Some(&cannot)).is_err(), "another back end's reason is not this one's");
    }
}
