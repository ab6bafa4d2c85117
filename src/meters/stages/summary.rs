//! Matched requests as stage statistics (each stage the time between two consecutive points,
//! named by the layer it was spent in), and the record's types for them.
use super::{Point, Timeline, ALL_POINTS};
use serde::Serialize;

/// What the time between two consecutive points of a request was spent on.
pub(crate) fn stage_layer(from: Point, to: Point) -> &'static str {
    use Point::*;
    match (from, to) {
        (Enter, UringSubmit) => "system call and io_uring submission",
        (UringSubmit, BioQueue) => "io_uring issue (inline or by io-wq), VFS and file system",
        (_, BioQueue) => "system call, VFS and file system",
        (_, RqInsert) => "block layer (bio to request)",
        (RqInsert, _) if to <= RqIssue => "I/O scheduler (insert to dispatch)",
        (BioQueue, _) if to <= RqIssue => "block layer (bio to dispatch)",
        (_, NvmeSetup) => "passthrough submission",
        (NvmeSetup, RqIssue) => "driver submission",
        (_, Irq) => "device (issue to interrupt)",
        (Irq, _) => "interrupt (handler to completion)",
        (RqIssue, NvmeComplete) | (RqIssue, RqComplete) | (NvmeSetup, NvmeComplete) => {
            "driver and device (issue to completion, no interrupt: polled, loop worker ...)"
        }
        (NvmeComplete, RqComplete) => "driver completion",
        (RqComplete, BioComplete) => "block completion",
        (BioQueue, BioComplete) => "bio-based driver (zram, loop ...)",
        (RqIssue, Exit) => "device, interrupt and return (the completion left no record: an interrupt on an idle CPU)",
        (_, UringComplete) => "io_uring completion",
        (_, Exit) => "return to user space (and wake-up, if it slept)",
        _ => "other",
    }
}
/// Latency statistics of one stage, or of the whole request.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StageStats {
    pub from: String,
    pub to: String,
    /// What the time was spent on.
    pub layer: String,
    /// Matched requests that passed both points one after the other.
    pub requests: u64,
    pub p50_ns: f64,
    pub p99_ns: f64,
    pub mean_ns: f64,
    /// Time in this stage over the end-to-end time of all matched requests: the shares add up to 1.
    pub share: f64,
}

/// `--profile stages` in the record (`cost.stages`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct StageProfile {
    /// The tracepoints used, and those this kernel (or its loaded modules) lacks.
    pub tracepoints: Vec<String>,
    pub missing_tracepoints: Vec<String>,
    /// Records taken and records the kernel dropped (a full ring).
    pub events: u64,
    pub lost: u64,
    /// Seconds traced when the event cap stopped tracing before the window's end.
    pub capped_after_s: Option<f64>,
    pub requests_matched: u64,
    pub requests_unmatched: u64,
    /// Matched requests the block layer split into parts (`block:block_split`), each ended by
    /// its last part's completion.
    pub requests_split: u64,
    /// Matched requests of a synchronous call whose completion left no record: their device,
    /// interrupt and return are one stage (this VM's kernel writes no interrupt-context
    /// tracepoint record while the CPU idles).
    pub requests_completion_untraced: u64,
    /// Matched requests, from their first point to their last (the stages add up to it).
    pub end_to_end: Option<StageStats>,
    /// In the order a request passes them.
    pub stages: Vec<StageStats>,
    /// iolab's own latency over the same window (from submission to reaping, in user space),
    /// to set beside the traced end-to-end.
    pub iolab_p50_ns: Option<f64>,
    pub iolab_mean_ns: Option<f64>,
    /// The same job unprofiled, as for `--profile layers`.
    pub unprofiled: Option<crate::meters::profile::Unprofiled>,
}

fn percentile(sorted: &[i64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i] as f64
}

/// Stage statistics over matched requests.
pub fn summarize(requests: &[Timeline]) -> (Option<StageStats>, Vec<StageStats>) {
    let mut by_pair: Vec<((Point, Point), Vec<i64>)> = Vec::new();
    let mut e2e: Vec<i64> = Vec::new();
    for at in requests {
        let seen: Vec<(Point, u64)> = ALL_POINTS.iter().filter_map(|&p| at[p as usize].map(|t| (p, t))).collect();
        let (Some(first), Some(last)) = (seen.first(), seen.last()) else { continue };
        // Across CPUs the perf clock may disagree by a little: a stage can be slightly negative,
        // and the stages still add up to the whole.
        e2e.push(last.1 as i64 - first.1 as i64);
        for w in seen.windows(2) {
            let pair = (w[0].0, w[1].0);
            let d = w[1].1 as i64 - w[0].1 as i64;
            match by_pair.iter_mut().find(|x| x.0 == pair) {
                Some(x) => x.1.push(d),
                None => by_pair.push((pair, vec![d])),
            }
        }
    }
    let total: i64 = e2e.iter().sum();
    let stats = |from: &str, to: &str, layer: &str, mut v: Vec<i64>| {
        v.sort_unstable();
        let sum: i64 = v.iter().sum();
        StageStats {
            from: from.into(),
            to: to.into(),
            layer: layer.into(),
            requests: v.len() as u64,
            p50_ns: percentile(&v, 0.5),
            p99_ns: percentile(&v, 0.99),
            mean_ns: if v.is_empty() { 0.0 } else { sum as f64 / v.len() as f64 },
            share: if total > 0 { sum as f64 / total as f64 } else { 0.0 },
        }
    };
    by_pair.sort_by_key(|x| x.0);
    let stages = by_pair.into_iter().map(|((a, z), v)| stats(a.name(), z.name(), stage_layer(a, z), v)).collect();
    let whole = (!e2e.is_empty()).then(|| stats("first point", "last point", "end to end", e2e));
    (whole, stages)
}

impl StageProfile {
    /// A user-space driver's requests never enter the kernel: no tracepoint sees them, and
    /// their whole latency is one user-space stage, iolab's own submit-to-completion time
    /// (p50, p99 and mean of the run's histogram).
    pub fn user_space(requests: u64, p50_ns: f64, p99_ns: f64, mean_ns: f64) -> StageProfile {
        let stage = |layer: &str| StageStats {
            from: "submission (user space)".into(),
            to: "completion reaped (user space)".into(),
            layer: layer.into(),
            requests,
            p50_ns,
            p99_ns,
            mean_ns,
            share: 1.0,
        };
        StageProfile {
            tracepoints: Vec::new(),
            missing_tracepoints: Vec::new(),
            events: 0,
            lost: 0,
            capped_after_s: None,
            requests_matched: requests,
            requests_unmatched: 0,
            requests_split: 0,
            requests_completion_untraced: 0,
            end_to_end: Some(stage("end to end")),
            stages: vec![stage(USER_SPACE_DRIVER)],
            iolab_p50_ns: Some(p50_ns),
            iolab_mean_ns: Some(mean_ns),
            unprofiled: None,
        }
    }
}

/// The one stage of a user-space driver's request.
pub const USER_SPACE_DRIVER: &str = "user-space driver (submit to completion, no kernel)";

/// A profile's stages in the record, or why there are none.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(untagged)]
pub enum StagesResult {
    Measured(Box<StageProfile>),
    Unavailable { unavailable: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The user-space driver: one stage, its own latency, the whole of it.
    #[test]
    fn a_user_space_driver_is_one_user_space_stage() {
        let p = StageProfile::user_space(1000, 9_000.0, 20_000.0, 9_500.0);
        assert_eq!(p.stages.len(), 1);
        assert_eq!((p.stages[0].layer.as_str(), p.stages[0].share, p.stages[0].requests), (USER_SPACE_DRIVER, 1.0, 1000));
        assert_eq!(p.end_to_end.as_ref().map(|e| e.p50_ns), Some(9_000.0));
        assert!(p.tracepoints.is_empty() && p.requests_unmatched == 0);
        let vfio = "vfio-nvme".parse::<crate::interfaces::InterfaceKind>().unwrap();
        assert!(vfio.info().bypasses_kernel);
        assert!(!"io_uring".parse::<crate::interfaces::InterfaceKind>().unwrap().info().bypasses_kernel);
    }
}
