//! The RunRecord: one serde value holding everything about a run. The JSON output (schema in
//! docs/json-schema.md) is this value; later layers (store, analysis, reports) read it back
//! through the typed, lenient view in [`read`]. A run's record assembles itself from what the
//! run produced ([`assemble::Outcome`], `RunRecord::assemble`).
pub mod assemble;
pub mod error;
pub mod fileset;
pub(crate) mod fio;
pub mod group;
pub mod read;

use crate::device::sysinfo::TargetInfo;
use crate::engine::clock::ClockInfo;
use crate::engine::recorder::{second_percentiles, Direction, Recorder};
use crate::meters::cpu::Rusage;
use crate::plan::Job;
use serde::Serialize;

pub const SCHEMA_VERSION: u32 = 1;

word_enum! {
    /// How a run ended (`RunRecord.status`; the `runs.status` column holds the same word).
    RunStatus {
        Ok = "ok",
        Failed = "failed",
        /// Ctrl-C (or a signal) ended it early.
        Interrupted = "interrupted",
    }
}

/// How I/O completes: the interfaces' word for it.
pub use crate::interfaces::Path;

#[derive(Serialize)]
pub struct RunRecord {
    pub schema_version: u32,
    pub status: RunStatus,
    pub error: Option<String>,
    pub spec: Job,
    pub environment: Environment,
    pub results: Option<Results>,
    /// Where the cost landed: CPU by thread class and system-wide, interrupts, device counters,
    /// perf counters. Null when the run never reached its measured window.
    pub cost: Option<crate::meters::Cost>,
    /// Joules per source and scope, IOPS and bytes per joule; `status: "unavailable"` with the
    /// reasons where nothing can measure. Never an estimate.
    pub energy: Option<crate::energy::record::EnergyRecord>,
    pub completion_path: CompletionPath,
    /// io_uring and nvme-passthru: the ring setup flags asked for and those the rings got (a
    /// kernel without a cost-only flag gets a ring without it). Null for other interfaces.
    pub ring: Option<crate::interfaces::KernelSetup>,
    /// A file-set run's set, its creation and its files (`--fileset`); left out otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fileset: Option<fileset::FileSetRecord>,
    /// A run of a group run together (fio's jobs without stonewall): the group, this run's
    /// place and window in it, and what its meters share with the others; left out otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<group::GroupRecord>,
}

#[derive(Serialize)]
pub struct Environment {
    pub iolab_version: String,
    pub command_line: Vec<String>,
    pub hostname: Option<String>,
    pub kernel: String,
    pub cpu_model: Option<String>,
    pub cpu_count: usize,
    pub started_at_unix_s: f64,
    pub clock: Option<ClockInfo>,
    pub targets: Vec<TargetInfo>,
    /// Each target device's settings during the run (scheduler, nomerges, io_poll,
    /// io_poll_delay, read_ahead_kb, wbt_lat_usec, nr_requests, CPU governor).
    pub device_settings: Vec<serde_json::Value>,
    /// Settings iolab changed for the run (and restored after), as "device setting: old -> new".
    pub settings_changed: Vec<String>,
    /// -i vfio-nvme: the controller iolab's own driver ran, and how it reached memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_space_driver: Option<crate::interfaces::DriverEnv>,
    /// The study set-up (`spec.setup`) this machine did not take, each with the reason.
    pub setup_not_applied: Vec<String>,
    /// `--numa`: the node and CPUs chosen for the threads, and where each worker and SQPOLL
    /// thread was allowed to run and ran. Null when the run did not reach its engine.
    pub placement: Option<crate::meters::placement::NumaPlacement>,
}

#[derive(Serialize)]
pub struct LatencyNs {
    pub mean: f64,
    pub stdev: f64,
    pub min: u64,
    pub max: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub p99_99: u64,
    pub p99_999: u64,
}

#[derive(Serialize)]
pub struct DirectionResult {
    pub ios: u64,
    pub bytes: u64,
    pub iops: f64,
    pub bw_bytes_per_s: f64,
    pub errors: u64,
    /// Null when the direction completed no I/O.
    pub lat_ns: Option<LatencyNs>,
    /// The full latency histogram, HdrHistogram V2 deflate format in base64 (mergeable).
    pub lat_histogram: Option<String>,
}

#[derive(Serialize)]
pub struct SecondPoint {
    /// Seconds since the measured window began (the ramp is excluded).
    pub t: u32,
    pub read_iops: u64,
    pub write_iops: u64,
    /// Null in a second with no completions.
    pub mean_lat_ns: Option<f64>,
    /// The second's own latency percentiles (reads and writes together), from its own counts
    /// (≤ 3.2 % bucket width, the bucket's highest value); null in a second with no completions
    /// and past the seconds kept (`engine::recorder::percentile_seconds`).
    pub p50_lat_ns: Option<u64>,
    pub p99_lat_ns: Option<u64>,
}

#[derive(Serialize)]
pub struct Cpu {
    pub user_s: f64,
    pub system_s: f64,
    /// Cores kept busy on average by iolab's process (user + system) over the window.
    pub cores: f64,
    pub user_ns_per_io: Option<f64>,
    pub system_ns_per_io: Option<f64>,
    pub voluntary_ctx_switches: u64,
    pub involuntary_ctx_switches: u64,
}

#[derive(Serialize)]
pub struct Verify {
    pub reads_checked: u64,
    pub written_blocks_read_back: u64,
    /// Reads and read-back blocks whose data failed the check: failed I/Os of kind verify
    /// (each also counted in its direction's errors).
    pub mismatches: u64,
    /// fio's verify form, in fio's words, where the job asked for it (None: iolab's own blocks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub form: Option<String>,
}

#[derive(Serialize)]
pub struct Results {
    pub window_s: f64,
    pub read: DirectionResult,
    pub write: DirectionResult,
    pub total: DirectionResult,
    pub series: Vec<SecondPoint>,
    pub cpu: Cpu,
    pub verify: Option<Verify>,
    /// Under a budget of a time and a count (whichever comes first), the limit that ended the
    /// run: `seconds`, `ios` or `bytes`; `steadystate` (under any budget) when `--steadystate`
    /// ended it. Absent under a budget of one limit, and where a stop (Ctrl-C, a failed I/O)
    /// ended the run before either.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_by: Option<&'static str>,
    /// A paced run (a rate or think time): what was asked and what each thread achieved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pace: Option<PaceResult>,
    /// What each thread was given besides its CPU (`--mem-policy`, `--ioprio`, `--cmdprio`;
    /// fio's numa_mem_policy, prioclass/prio, cmdprio_*), as the kernel read it back. Absent
    /// when none was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_settings: Option<ThreadSettings>,
    /// `--steadystate` (fio's ss): whether the run became steady, when (it ended there), and
    /// the last window judged, after fio's `steadystate` object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steadystate: Option<crate::engine::steady::SteadyResult>,
}

/// What was asked for each issuing thread, and what each had (`interfaces::thread`).
#[derive(Serialize)]
pub struct ThreadSettings {
    pub asked: crate::interfaces::thread::ThreadOptions,
    /// Per thread: its memory policy and I/O priority read back, its buffers' pages by node,
    /// its commands and those that carried the per-command priority.
    pub threads: Vec<crate::interfaces::thread::Applied>,
    /// With `--cmdprio`: every thread's commands per direction (reads, writes), ramp included,
    /// and how many carried the priority.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands: Option<[u64; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands_with_prio: Option<[u64; 2]>,
}

/// What a paced run was asked (the spec's `pace`) and achieved, per thread as fio paces each
/// clone. Latency is measured from each I/O's submission, not from when it was due.
#[derive(Serialize)]
pub struct PaceResult {
    pub asked: crate::plan::pace::Pace,
    pub achieved_per_thread: PaceAchieved,
    /// Who submitted the paced I/O: `inline` (the pacing thread) or `offload` (submission
    /// threads, fio's io_submit_mode=offload).
    pub submit_mode: crate::plan::pace::SubmitMode,
    /// Where each I/O's latency starts: `submission` (fio's too), not the scheduled instant;
    /// offloaded, `queued`: when the pacing thread queued it, so a backlog is in the latency.
    pub latency_from: &'static str,
}

#[derive(Serialize)]
pub struct PaceAchieved {
    pub read_iops: f64,
    pub write_iops: f64,
    pub read_bw_bytes_per_s: f64,
    pub write_bw_bytes_per_s: f64,
}

/// What completion method was asked for, what the kernel rules predict, and what the device's
/// interrupt counters show actually happened.
#[derive(Serialize)]
pub struct CompletionPath {
    pub requested: String,
    /// How the interface completes what was requested on this kernel, in words (the interface's
    /// `mechanism`): "IOPOLL with the block layer's hybrid polling (io_poll_delay=0: ...)".
    pub mechanism: String,
    /// What iolab expects from the kernel rules and io_poll.
    pub expected: Path,
    pub reason: Option<String>,
    /// From the target devices' queue interrupts over the window; null when nothing completed.
    pub observed: Option<Path>,
    pub evidence: Option<String>,
    /// Polling was asked for and completions came by interrupt anyway.
    pub fell_back: bool,
}

pub fn latency(d: &Direction) -> Option<LatencyNs> {
    let h = &d.lat;
    if h.is_empty() {
        return None;
    }
    Some(LatencyNs {
        mean: h.mean(),
        stdev: h.stdev(),
        min: d.min_ns,
        max: d.max_ns,
        p50: h.value_at_quantile(0.5),
        p90: h.value_at_quantile(0.9),
        p99: h.value_at_quantile(0.99),
        p99_9: h.value_at_quantile(0.999),
        p99_99: h.value_at_quantile(0.9999),
        p99_999: h.value_at_quantile(0.99999),
    })
}

pub(crate) fn encode_histogram(h: &hdrhistogram::Histogram<u64>) -> Option<String> {
    use base64::Engine;
    use hdrhistogram::serialization::Serializer;
    if h.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    hdrhistogram::serialization::V2DeflateSerializer::new().serialize(h, &mut out).ok()?;
    Some(base64::engine::general_purpose::STANDARD.encode(out))
}

pub(crate) fn direction(d: &Direction, window_s: f64) -> DirectionResult {
    let per_s = |x: u64| if window_s > 0.0 { x as f64 / window_s } else { 0.0 };
    DirectionResult {
        ios: d.ios,
        bytes: d.bytes,
        iops: per_s(d.ios),
        bw_bytes_per_s: per_s(d.bytes),
        errors: d.errors,
        lat_ns: latency(d),
        lat_histogram: encode_histogram(&d.lat),
    }
}

pub fn series(rec: &Recorder) -> Vec<SecondPoint> {
    rec.series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let n = s.read_ios + s.write_ios;
            let p = rec.second_counts(i).and_then(|c| second_percentiles(c, &[0.5, 0.99]));
            SecondPoint {
                t: i as u32,
                read_iops: s.read_ios,
                write_iops: s.write_ios,
                mean_lat_ns: (n > 0).then(|| s.lat_sum_ns as f64 / n as f64),
                p50_lat_ns: p.as_ref().map(|p| p[0]),
                p99_lat_ns: p.as_ref().map(|p| p[1]),
            }
        })
        .collect()
}

pub fn cpu(r: &Rusage, window_s: f64, ios: u64) -> Cpu {
    let per_io = |s: f64| (ios > 0).then(|| s * 1e9 / ios as f64);
    Cpu {
        user_s: r.user_s,
        system_s: r.system_s,
        cores: if window_s > 0.0 { (r.user_s + r.system_s) / window_s } else { 0.0 },
        user_ns_per_io: per_io(r.user_s),
        system_ns_per_io: per_io(r.system_s),
        voluntary_ctx_switches: r.voluntary_ctx,
        involuntary_ctx_switches: r.involuntary_ctx,
    }
}
