//! The block layer's own polling, as pvsync2 and io_uring reach it: which kernels still poll a
//! synchronous RWF_HIPRI read, and which still honour `queue/io_poll_delay` (hybrid polling:
//! sleep for part of the expected latency, then poll).
//!
//! These are behaviours, not interfaces a kernel announces: no system call answers "would you
//! sleep before polling?". The releases that changed them are upstream facts (the commits are
//! named below), and every run checks the outcome anyway: the device's interrupt counters show
//! whether it polled, and the workload threads' sleeps whether it slept first.
use super::{Complete, IoChoice, SweptOption};
use crate::host::kernel_version;

/// `queue/io_poll_delay`: poll at once (classic polling).
pub const CLASSIC: i64 = -1;
/// `queue/io_poll_delay`: sleep for half the mean completion time, then poll.
pub const ADAPTIVE: i64 = 0;

/// Linux 5.18 ("block: ignore RWF_HIPRI hint for sync dio", 9650b453a3d4) completes synchronous
/// RWF_HIPRI I/O by interrupt.
pub const SYNC_HIPRI_IGNORED_SINCE: (u32, u32) = (5, 18);
/// Linux 5.16 ("io_uring: don't sleep when polling for I/O", d729cf9acb93) made io_uring's
/// IOPOLL spin without the block layer's hybrid sleep.
pub const URING_SLEEP_GONE_SINCE: (u32, u32) = (5, 16);
/// Linux 6.4 ("blk-mq: remove hybrid polling", 54bdd67d0f88) left `io_poll_delay` as a file that
/// reads -1 and ignores writes.
pub const HYBRID_REMOVED_SINCE: (u32, u32) = (6, 4);

fn version(v: (u32, u32)) -> String {
    format!("{}.{}", v.0, v.1)
}

/// Does this kernel poll a synchronous RWF_HIPRI request?
pub(crate) fn sync_hipri_polls() -> bool {
    kernel_version() < SYNC_HIPRI_IGNORED_SINCE
}

/// Why this kernel's block layer cannot sleep before polling for `who` (None: it can).
/// `via_io_uring`: the request is polled by io_uring's IOPOLL rather than by a synchronous
/// RWF_HIPRI read.
pub(crate) fn hybrid_unreachable(via_io_uring: bool) -> Option<String> {
    let k = kernel_version();
    if k >= HYBRID_REMOVED_SINCE {
        return Some(format!("Linux {} removed the block layer's hybrid polling (queue/io_poll_delay)", version(HYBRID_REMOVED_SINCE)));
    }
    if via_io_uring && k >= URING_SLEEP_GONE_SINCE {
        return Some(format!(
            "since Linux {} io_uring's IOPOLL never takes the block layer's hybrid sleep",
            version(URING_SLEEP_GONE_SINCE)
        ));
    }
    if !via_io_uring && k >= SYNC_HIPRI_IGNORED_SINCE {
        return Some(format!(
            "since Linux {} synchronous RWF_HIPRI I/O is not polled at all, so the block layer's hybrid polling never runs",
            version(SYNC_HIPRI_IGNORED_SINCE)
        ));
    }
    None
}

/// `--poll-delay`: how long the block layer's hybrid polling sleeps, for the interfaces whose
/// hybrid polling goes through it (pvsync2; io_uring before Linux 5.16).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
pub struct PollDelay {
    /// --complete hybrid through the block layer (pvsync2; io_uring before Linux 5.16): the
    /// queue's io_poll_delay for the run, -1 (classic), 0 (adaptive, the default) or N µs.
    #[arg(long, value_name = "US", allow_negative_numbers = true)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_delay: Option<i64>,
}

impl super::OptionsPart for PollDelay {
    fn check(&self, io: &IoChoice) -> Result<(), String> {
        if let Some(d) = self.poll_delay {
            if io.complete != Complete::Hybrid {
                return Err(format!(
                    "--poll-delay sets how long hybrid polling sleeps: use it with --complete hybrid, not {}",
                    io.complete.name()
                ));
            }
            if d < -1 {
                return Err(format!("--poll-delay {d} is not a delay: use -1 (classic polling), 0 (adaptive) or microseconds"));
            }
        }
        Ok(())
    }
}

/// The plan's `[matrix] poll_delay`: only hybrid jobs take it, so the other completion methods
/// run once whatever the plan lists.
pub const POLL_DELAY: SweptOption = SweptOption {
    name: "poll_delay",
    set: |io, v| {
        if io.complete == Complete::Hybrid {
            io.options.block_poll.poll_delay = Some(v)
        }
    },
    value: |io| io.options.block_poll.poll_delay.unwrap_or(ADAPTIVE),
    shown: |io| io.complete == Complete::Hybrid && io.options.block_poll.poll_delay.is_some(),
};

/// The `io_poll_delay` a job polling through the block layer runs with: -1 for classic polling
/// (so a value left behind by someone else cannot turn it into hybrid polling), the job's
/// `--poll-delay` (default adaptive) for hybrid polling.
pub(crate) fn delay_for(io: &IoChoice) -> Option<i64> {
    match io.complete {
        Complete::Irq => None,
        Complete::Poll => Some(CLASSIC),
        Complete::Hybrid => Some(io.options.block_poll.poll_delay.unwrap_or(ADAPTIVE)),
    }
}

/// A delay in words, for the completion mechanism.
pub(crate) fn delay_words(delay: i64) -> String {
    match delay {
        CLASSIC => "io_poll_delay=-1: classic".to_string(),
        ADAPTIVE => "io_poll_delay=0: adaptive sleep".to_string(),
        d => format!("io_poll_delay={d}: sleep {d} µs"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_and_words() {
        let mut io = IoChoice { complete: Complete::Hybrid, ..IoChoice::default() };
        assert_eq!(delay_for(&io), Some(ADAPTIVE));
        io.options.block_poll.poll_delay = Some(8);
        assert_eq!(delay_for(&io), Some(8));
        assert_eq!(delay_words(8), "io_poll_delay=8: sleep 8 µs");
        io.complete = Complete::Poll;
        assert_eq!(delay_for(&io), Some(CLASSIC));
        io.complete = Complete::Irq;
        assert_eq!(delay_for(&io), None);
    }

    /// The host runs a kernel from after all three changes.
    #[test]
    fn this_kernel() {
        if kernel_version() >= HYBRID_REMOVED_SINCE {
            assert!(!sync_hipri_polls());
            assert!(hybrid_unreachable(false).unwrap().contains("removed"));
            assert!(hybrid_unreachable(true).unwrap().contains("removed"));
        }
    }
}
