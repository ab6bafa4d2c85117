//! The hot loop's clock: the invariant TSC where the CPU has one (a few ns per read, no system
//! call even where the vDSO would fall back), else CLOCK_MONOTONIC through the vDSO.
use serde::Serialize;

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    kind: ClockKind,
    /// TSC ticks to ns as a 32.32 fixed-point multiplier.
    mult: u64,
    tsc0: u64,
    ns0: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockKind {
    Tsc,
    Monotonic,
}

/// What the run used, with its measured cost.
#[derive(Clone, Debug, Serialize)]
pub struct ClockInfo {
    pub kind: ClockKind,
    pub read_cost_ns: f64,
    pub tsc_hz: Option<f64>,
}

pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdtsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn rdtsc() -> u64 {
    monotonic_ns()
}

fn invariant_tsc() -> bool {
    if !cfg!(target_arch = "x86_64") || std::env::var_os("IOLAB_CLOCK").is_some_and(|v| v == "monotonic") {
        return false;
    }
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = info.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    has("constant_tsc") && has("nonstop_tsc")
}

impl Clock {
    /// Pick and calibrate the clock (about 50 ms for the TSC).
    pub fn calibrate() -> Clock {
        if !invariant_tsc() {
            return Clock { kind: ClockKind::Monotonic, mult: 0, tsc0: 0, ns0: 0 };
        }
        let (t0, n0) = (rdtsc(), monotonic_ns());
        std::thread::sleep(std::time::Duration::from_millis(50));
        let (t1, n1) = (rdtsc(), monotonic_ns());
        let mult = (((n1 - n0) as u128) << 32) / ((t1 - t0).max(1) as u128);
        Clock { kind: ClockKind::Tsc, mult: mult as u64, tsc0: t0, ns0: n0 }
    }

    /// Nanoseconds on the CLOCK_MONOTONIC time line.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        match self.kind {
            ClockKind::Tsc => self.ns0 + ((((rdtsc().wrapping_sub(self.tsc0)) as u128) * self.mult as u128) >> 32) as u64,
            ClockKind::Monotonic => monotonic_ns(),
        }
    }

    pub fn info(&self) -> ClockInfo {
        const N: u64 = 100_000;
        let start = monotonic_ns();
        let mut sink = 0u64;
        for _ in 0..N {
            sink = sink.wrapping_add(self.now());
        }
        std::hint::black_box(sink);
        let cost = (monotonic_ns() - start) as f64 / N as f64;
        let tsc_hz = (self.kind == ClockKind::Tsc).then(|| 1e9 * 4294967296.0 / self.mult as f64);
        ClockInfo { kind: self.kind, read_cost_ns: cost, tsc_hz }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn clock_tracks_monotonic() {
        let c = Clock::calibrate();
        let a = c.now();
        let m0 = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let b = c.now();
        let m1 = monotonic_ns();
        let (dc, dm) = ((b - a) as f64, (m1 - m0) as f64);
        assert!((dc - dm).abs() / dm < 0.01, "clock drift: {dc} vs {dm}");
        assert!(c.info().read_cost_ns < 2000.0);
    }
}
