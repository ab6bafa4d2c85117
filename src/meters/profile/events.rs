//! What the profiler samples and how often: the cpu-clock's period, the hardware group's rate
//! and its events, named as perf names them. The sampler opens them; attribution turns samples
//! into time and counts with them.
use perf_event_open_sys::bindings as b;

/// Sampling period: 4 kHz per CPU. Short runs still get thousands of samples; the ring below
/// holds ~100 ms of deep chains on a busy CPU and is drained every 20 ms.
pub const PERIOD_NS: u64 = 250_000;

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
