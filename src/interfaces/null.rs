//! null: no I/O at all. Every request completes at once inside iolab, like fio's null engine
//! (engines/null.c), so a run measures the harness itself: the hot loop, the clock, the
//! recorder. It opens no target: `--size` (default 1 GiB) is its address space, offsets are
//! drawn from it as for a real target, and no data moves (reads leave the buffer as it was).
//!
//! `--null-script` scripts what a device could do, per thread, for tests of the engine without
//! root or devices: comma-separated items, requests numbered from 1 in the order the interface
//! accepted them.
//!   delay=DURATION     every request completes this long after it was submitted (ns, us, ms, s)
//!   error=ERRNO@N      request N fails with ERRNO (a name such as EIO, or a number)
//!   error=ERRNO%N      every Nth request fails with ERRNO
//!   short=BYTES@N|%N   request N (every Nth) transfers only BYTES
//!   accept=K           `submit` accepts at most K of the requests it is offered per call
use super::target::{Acquire, OpenTarget, TargetPart, TargetRequest};
use super::Path;
use super::{Behaviour, Completion, Interface, InterfaceInfo, IoInterface, Request, Setup};
use super::{Complete, IoChoice, Submit};
use crate::device::sysinfo::TargetInfo;
use crate::failure::Failure;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

pub const NAME: &str = "null";
/// The address space when `--size` is not given, as for the temporary default target.
pub const DEFAULT_SIZE: u64 = 1 << 30;
/// Why there is no completion path to expect or observe, and what the run's CPU means.
pub const NO_DEVICE: &str = "-i null does no I/O: every request completes inside iolab (no device, no interrupt, no polling), so the CPU per I/O is iolab's own cost, the harness itself";

/// Which requests an item applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// The Nth request only.
    At(u64),
    /// Every Nth request.
    Every(u64),
}

impl When {
    #[inline]
    fn hits(self, n: u64) -> bool {
        match self {
            When::At(k) => n == k,
            When::Every(k) => n.is_multiple_of(k),
        }
    }
}

/// A parsed `--null-script`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Script {
    pub delay: Option<Duration>,
    pub error: Option<(i32, When)>,
    pub short: Option<(u32, When)>,
    pub accept: Option<usize>,
}

const ERRNOS: &[(&str, i32)] = &[
    ("EIO", libc::EIO),
    ("EINVAL", libc::EINVAL),
    ("ENOSPC", libc::ENOSPC),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EOPNOTSUPP", libc::EOPNOTSUPP),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("EILSEQ", libc::EILSEQ),
];

fn parse_when(item: &str, text: &str) -> Result<(String, When), String> {
    let bad = || format!("--null-script: '{item}' needs @N (the Nth request) or %N (every Nth request), N from 1");
    let (what, when) = match (text.split_once('@'), text.split_once('%')) {
        (Some((w, n)), None) => (w, When::At(n.parse().map_err(|_| bad())?)),
        (None, Some((w, n))) => (w, When::Every(n.parse().map_err(|_| bad())?)),
        _ => return Err(bad()),
    };
    if matches!(when, When::At(0) | When::Every(0)) {
        return Err(bad());
    }
    Ok((what.to_string(), when))
}

fn parse_delay(item: &str, text: &str) -> Result<Duration, String> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (num, unit) = text.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("--null-script: '{item}' is not a delay: use e.g. delay=20us"))?;
    let ns = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return Err(format!("--null-script: '{item}' needs a unit: ns, us, ms or s")),
    };
    Ok(Duration::from_nanos(n.saturating_mul(ns)))
}

impl Script {
    pub fn parse(text: &str) -> Result<Script, String> {
        let mut s = Script::default();
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((key, value)) = item.split_once('=') else {
                return Err(format!("--null-script: '{item}' is not KEY=VALUE: use delay=, error=, short= or accept="));
            };
            match key {
                "delay" => s.delay = Some(parse_delay(item, value)?),
                "error" => {
                    let (name, when) = parse_when(item, value)?;
                    let errno = ERRNOS
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(&name))
                        .map(|e| e.1)
                        .or_else(|| name.parse().ok().filter(|e| *e > 0));
                    let Some(errno) = errno else {
                        let names: Vec<&str> = ERRNOS.iter().map(|e| e.0).collect();
                        return Err(format!(
                            "--null-script: '{item}' names no errno: use a positive number or one of {}",
                            names.join(", ")
                        ));
                    };
                    s.error = Some((errno, when));
                }
                "short" => {
                    let (bytes, when) = parse_when(item, value)?;
                    let bytes = bytes.parse().map_err(|_| format!("--null-script: '{item}' needs a byte count, e.g. short=512@3"))?;
                    s.short = Some((bytes, when));
                }
                "accept" => match value.parse() {
                    Ok(k) if k > 0 => s.accept = Some(k),
                    _ => return Err(format!("--null-script: '{item}' needs a count from 1 (requests accepted per submit)")),
                },
                _ => return Err(format!("--null-script: unknown item '{key}': use delay=, error=, short= or accept=")),
            }
        }
        Ok(s)
    }
}

/// What the scripted path keeps: completions with the instant they become ready.
struct Scripted {
    script: Script,
    /// Requests accepted so far (the next one is number `accepted + 1`).
    accepted: u64,
    queue: VecDeque<(Instant, Completion)>,
}

pub struct Null {
    /// Completions not yet reaped: `ready[..n]`, oldest first.
    ready: Box<[Completion]>,
    n: usize,
    scripted: Option<Box<Scripted>>,
    /// Calls to `submit` and requests offered and accepted, for tests.
    pub offered: u64,
    pub submits: u64,
}

impl IoInterface for Null {
    type Handle = ();

    fn open(setup: &Setup, _: &()) -> io::Result<Self> {
        let script = setup
            .io
            .options
            .null
            .null_script
            .as_deref()
            .map(Script::parse)
            .transpose()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let scripted = script
            .filter(|s| *s != Script::default())
            .map(|script| Box::new(Scripted { script, accepted: 0, queue: VecDeque::with_capacity(setup.qd as usize) }));
        Ok(Null { ready: vec![Completion::default(); setup.qd as usize].into(), n: 0, scripted, offered: 0, submits: 0 })
    }

    // Always: with its one-request case the loop's own copy went out of line (a call per I/O).
    #[inline(always)]
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize> {
        if self.scripted.is_some() {
            return Ok(self.submit_scripted(reqs));
        }
        // One request (QD1, or any depth with batches of one): one store, none of the loop's
        // set-up (unrolled, with a remainder).
        if let [r] = reqs {
            self.ready[self.n] = Completion { tag: r.tag, result: r.len as i64 };
            self.n += 1;
            return Ok(1);
        }
        // The hot loop never has more than `qd` requests out, so `ready` cannot overflow. Indexed
        // over one length (one bounds check, before the loop): `zip` left out-of-line calls of
        // `Zip::new` and its `size()` per call in builds without cross-crate inlining.
        let k = reqs.len();
        let ready = &mut self.ready[self.n..self.n + k];
        for i in 0..k {
            ready[i] = Completion { tag: reqs[i].tag, result: reqs[i].len as i64 };
        }
        self.n += k;
        Ok(k)
    }

    #[inline(always)]
    // Element by element on purpose: see below.
    #[allow(clippy::manual_memcpy)]
    fn reap(&mut self, min: usize, out: &mut [Completion]) -> io::Result<usize> {
        if self.scripted.is_some() {
            return Ok(self.reap_scripted(min, out));
        }
        // One ready (as above): one copy.
        if self.n == 1 && !out.is_empty() {
            out[0] = self.ready[0];
            self.n = 0;
            return Ok(1);
        }
        let k = self.n.min(out.len());
        // Element by element: a memcpy call for one or a few completions cost 10% of the loop.
        let (out, ready) = (&mut out[..k], &self.ready[..k]);
        for i in 0..k {
            out[i] = ready[i];
        }
        if k < self.n {
            self.ready.copy_within(k..self.n, 0);
        }
        self.n -= k;
        Ok(k)
    }
}

impl Null {
    #[inline(never)]
    fn submit_scripted(&mut self, reqs: &[Request]) -> usize {
        let s = self.scripted.as_mut().expect("scripted");
        self.submits += 1;
        self.offered += reqs.len() as u64;
        let take = s.script.accept.map_or(reqs.len(), |k| k.min(reqs.len()));
        let ready_at = Instant::now() + s.script.delay.unwrap_or_default();
        for r in &reqs[..take] {
            s.accepted += 1;
            let n = s.accepted;
            let result = match (s.script.error, s.script.short) {
                (Some((errno, when)), _) if when.hits(n) => -(errno as i64),
                (_, Some((bytes, when))) if when.hits(n) => bytes.min(r.len) as i64,
                _ => r.len as i64,
            };
            s.queue.push_back((ready_at, Completion { tag: r.tag, result }));
        }
        take
    }

    /// Hand out what is ready; when `min` is not ready yet, wait (a delay is a device's latency).
    #[inline(never)]
    fn reap_scripted(&mut self, min: usize, out: &mut [Completion]) -> usize {
        let s = self.scripted.as_mut().expect("scripted");
        let mut k = 0;
        loop {
            let now = Instant::now();
            while k < out.len() && s.queue.front().is_some_and(|(at, _)| *at <= now) {
                out[k] = s.queue.pop_front().expect("front").1;
                k += 1;
            }
            if k >= min || s.queue.is_empty() {
                return k;
            }
            let wait = s.queue.front().expect("front").0.saturating_duration_since(now);
            // Sleep most of a long wait, spin the rest so short delays stay short.
            if wait > Duration::from_micros(200) {
                std::thread::sleep(wait - Duration::from_micros(100));
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

/// The bytes offsets are drawn from: `--size`, or 1 GiB, in whole blocks of `bs`.
pub(crate) fn address_space(size: Option<u64>, bs: u64) -> u64 {
    size.unwrap_or(DEFAULT_SIZE) / bs * bs
}

/// What the record says in place of a target, for an address space of `space` bytes.
pub(crate) fn target_info(space: u64) -> TargetInfo {
    TargetInfo { path: "(no target)".into(), kind: NAME.into(), size_bytes: space, logical_block_size: 512, ..Default::default() }
}

/// null's target part: no target at all, an address space of `--size` bytes (whole blocks)
/// from `--offset`, as the engine's one target.
pub struct AddressSpace {
    pub start: u64,
    pub len: u64,
}

impl Acquire for AddressSpace {
    type Handle = ();

    fn acquire(req: &TargetRequest) -> Result<AddressSpace, Failure> {
        Ok(AddressSpace { start: req.access.targets.offset, len: address_space(req.access.targets.size, req.access.bs) })
    }

    fn handle(&self) -> &() {
        &()
    }
}

impl TargetPart for AddressSpace {
    fn describe(&self) -> Vec<TargetInfo> {
        vec![target_info(self.len)]
    }

    fn open_targets(&self) -> Vec<OpenTarget> {
        vec![OpenTarget { fd: -1, range_start: self.start, range_len: self.len }]
    }
}

impl Interface for Null {
    type Target = AddressSpace;

    const INFO: &'static InterfaceInfo = &InterfaceInfo {
        name: NAME,
        note: Some("no I/O: iolab's own cost"),
        execution: "iolab",
        behaviour: Behaviour::Async,
        submits: &[Submit::Syscall],
        completes: &[Complete::Irq],
        how: "no I/O and no target: every request completes at once inside iolab (fio's null engine); measures iolab's own cost per I/O; --size is its address space; --null-script scripts delays, errors, short transfers and partial submits for tests",
        async_needs_direct: false,
        diskless: true,
        targets: &[],
        polls_device_queues: false,
        bypasses_kernel: false,
    };

    fn expected_path(_io: &IoChoice, _targets: &[TargetInfo]) -> (Path, Option<String>) {
        (Path::Unknown, Some(NO_DEVICE.to_string()))
    }
}

/// -i null's own options.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct NullOptions {
    /// -i null only, for tests: e.g. 'delay=20us,error=EIO@100,short=512%7,accept=1' (see
    /// docs/architecture.md, *The null interface*).
    #[arg(long, value_name = "SCRIPT")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_script: Option<String>,
}

/// `--null-script`'s rules, for any job: only null takes one, and it must parse.
impl super::OptionsPart for NullOptions {
    fn check(&self, io: &IoChoice) -> Result<(), String> {
        if let Some(script) = &self.null_script {
            if io.interface != super::InterfaceKind::Null {
                return Err(format!("--null-script applies only to -i {NAME}"));
            }
            Script::parse(script)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_parse_and_bad_ones_say_what_to_write() {
        let s = Script::parse("delay=20us, error=EIO@100,short=512%7,accept=1").unwrap();
        assert_eq!(s.delay, Some(Duration::from_micros(20)));
        assert_eq!(s.error, Some((libc::EIO, When::At(100))));
        assert_eq!(s.short, Some((512, When::Every(7))));
        assert_eq!(s.accept, Some(1));
        assert_eq!(Script::parse("error=28%3").unwrap().error, Some((28, When::Every(3))));
        assert_eq!(Script::parse("").unwrap(), Script::default());
        for bad in ["delay=20", "error=EIO", "error=EIO@0", "error=EFOO@1", "short=x@1", "accept=0", "speed=1", "delay"] {
            let e = Script::parse(bad).unwrap_err();
            assert!(e.starts_with("--null-script: "), "{bad}: {e}");
        }
    }
}
