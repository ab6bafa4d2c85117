//! What the profiler samples and how often: the cpu-clock's period, the hardware group's rate
//! and its events, named as perf names them. The sampler opens them; attribution turns samples
//! into time and counts with them.
use perf_event_open_sys::bindings as b;

/// Sampling period: ~3950 per second and CPU. Short runs still get thousands of samples; the
/// ring holds ~100 ms of deep chains on a busy CPU and is drained every 20 ms.
///
/// Not 250 µs (4 kHz), a divisor of every scheduler tick (HZ 1000, 250, 100: 1, 4, 10 ms): a
/// timer sampler's samples then land at the same few phases of the tick all run long, and a CPU
/// shared with other work runs the run's threads in step with the tick (preemption happens
/// there). On this 2-CPU VM under the parallel tests' load, the run's samples by 250 µs slot of
/// the 4 ms tick were 239 in one slot against ~50 in each other, and three 250 µs samplers of
/// one run (`perf record -a`, a second sampler, iolab's) counted 2047, 1498 and 954 of its
/// samples, and split its layers as differently (driver 33 % against 15 %): which phase a sampler
/// started at decided. 253 153 ns sweeps the phases of every tick length: over 100 ms the
/// samples' phases are within 1 % of uniform (star discrepancy) for 1, 3.33, 4 and 10 ms,
/// where 250 µs stays at 25 % and 6 % (four phases of a 1 ms tick, sixteen of 4 ms).
pub const PERIOD_NS: u64 = 253_153;

/// Hardware samples per CPU and second, in `freq` mode (the kernel sets the cycle period):
/// about the cpu-clock's rate, with no clock rate to guess.
pub const HW_SAMPLE_HZ: u64 = 4000;

/// A perf event by its type and config, named as perf names it.
pub type EventId = (&'static str, u32, u64);
pub const CYCLES: EventId = ("cycles", b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_CPU_CYCLES as u64);
pub const INSTRUCTIONS: EventId = ("instructions", b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_INSTRUCTIONS as u64);
/// The generic hardware-cache event of L1D accesses by `op`: every load (read) or store (write)
/// instruction that retired, as perf's `L1-dcache-loads` and `L1-dcache-stores`.
pub(crate) const fn l1d_access(op: u32) -> u64 {
    (b::PERF_COUNT_HW_CACHE_L1D | op << 8 | b::PERF_COUNT_HW_CACHE_RESULT_ACCESS << 16) as u64
}
pub const LOADS: EventId = ("L1-dcache-loads", b::PERF_TYPE_HW_CACHE, l1d_access(b::PERF_COUNT_HW_CACHE_OP_READ));
pub const STORES: EventId = ("L1-dcache-stores", b::PERF_TYPE_HW_CACHE, l1d_access(b::PERF_COUNT_HW_CACHE_OP_WRITE));

#[cfg(test)]
mod tests {
    use super::PERIOD_NS;

    /// The star discrepancy of the first `n` samples' phases in a tick of `tick_ns`: the largest
    /// gap between the share of samples below a phase and that phase's share of the tick (0: even).
    fn discrepancy(period_ns: u64, tick_ns: u64, n: u64) -> f64 {
        let mut phases: Vec<f64> = (0..n).map(|k| (k * period_ns % tick_ns) as f64 / tick_ns as f64).collect();
        phases.sort_by(f64::total_cmp);
        let n = n as f64;
        phases.iter().enumerate().map(|(i, &x)| ((i as f64 + 1.0) / n - x).abs().max((i as f64 / n - x).abs())).fold(0.0, f64::max)
    }

    #[test]
    fn the_sampling_period_sweeps_every_phase_of_the_scheduler_tick() {
        // HZ 1000, 300, 250, 100; 100 ms of samples, and a whole 2 s window.
        for tick_ns in [1_000_000, 3_333_333, 4_000_000, 10_000_000] {
            for window_ns in [100_000_000, 2_000_000_000] {
                let d = discrepancy(PERIOD_NS, tick_ns, window_ns / PERIOD_NS);
                assert!(d < 0.025, "samples every {PERIOD_NS} ns over {window_ns} ns: phases of a {tick_ns} ns tick {d:.3} from even");
            }
        }
        // The period it replaced: the same sixteen phases of a 4 ms tick however long it runs.
        assert_eq!(discrepancy(250_000, 4_000_000, 8000), 0.0625);
        // About 4 kHz still.
        assert!((3900..=4000).contains(&(1_000_000_000 / PERIOD_NS)));
    }
}
