//! The plan layer: a fully specified job, parsed and validated before any device is touched.
pub mod matrix;
pub mod profile;
pub mod size;
pub mod sweep;
pub mod validate;

use serde::{Deserialize, Serialize};

/// Access pattern of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    Read,
    Write,
    Randread,
    Randwrite,
    Randrw,
}

impl Rw {
    pub fn name(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::Randread => "randread",
            Rw::Randwrite => "randwrite",
            Rw::Randrw => "randrw",
        }
    }
    pub fn is_random(self) -> bool {
        matches!(self, Rw::Randread | Rw::Randwrite | Rw::Randrw)
    }
    /// Percentage of I/Os that are writes.
    pub fn write_percent(self, mix: u8) -> u8 {
        match self {
            Rw::Read | Rw::Randread => 0,
            Rw::Write | Rw::Randwrite => 100,
            Rw::Randrw => mix,
        }
    }
    pub fn writes(self, mix: u8) -> bool {
        self.write_percent(mix) > 0
    }
}

pub use crate::interfaces::{Complete, Submit};

/// When a job ends.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "value")]
pub enum Budget {
    /// Measured seconds after the ramp.
    Seconds(f64),
    /// Total completed I/Os over all threads after the ramp.
    Ios(u64),
    /// Total bytes over all threads after the ramp.
    Bytes(u64),
}

/// Everything needed to rerun a measurement, in parts, each with its defaults (`iolab run`'s).
/// Serialised flat: the record's `spec` has every field at its top level.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Job {
    /// Which interface, how it submits and completes, O_DIRECT, and its own options.
    #[serde(flatten)]
    pub io: crate::interfaces::IoChoice,
    /// What is issued: pattern, block size, depth, threads, batching, placement, seed.
    #[serde(flatten)]
    pub workload: Workload,
    /// When it ends: the ramp and the budget.
    #[serde(flatten)]
    pub timing: Timing,
    /// Where it goes: the targets, the range used, the devices named as safe to overwrite.
    #[serde(flatten)]
    pub targets: crate::device::Targets,
    /// What counts as a failure and what is checked.
    #[serde(flatten)]
    pub policy: Policy,
    /// System settings for the run, restored after.
    #[serde(flatten)]
    pub system: crate::settings::Requested,
}

/// What a job issues.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Workload {
    pub rw: Rw,
    /// Percentage of writes for randrw.
    pub write_mix: u8,
    pub bs: u64,
    pub qd: u32,
    pub threads: u32,
    pub batch_submit: u32,
    pub batch_reap: u32,
    /// CPUs the threads are pinned to, round-robin; empty = not pinned.
    pub cpus: Vec<usize>,
    pub seed: u64,
}

impl Default for Workload {
    fn default() -> Workload {
        Workload { rw: Rw::Randread, write_mix: 50, bs: 4096, qd: 1, threads: 1, batch_submit: 1, batch_reap: 1, cpus: vec![], seed: 1 }
    }
}

/// When a job ends.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// Seconds run before the measured window opens.
    pub ramp_s: f64,
    pub budget: Budget,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing { ramp_s: 0.0, budget: Budget::Seconds(10.0) }
    }
}

/// What counts as a failure, and what is checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Write checksummed blocks, check every read, read back every written block.
    pub verify: bool,
    /// Count failed I/Os and go on instead of stopping at the first.
    pub continue_on_error: bool,
    /// Run a polled mode even where the queue cannot poll, reporting the fallback.
    pub allow_fallback: bool,
    /// Fail the run when the completion path observed is not the one asked for.
    #[serde(default)]
    pub strict: bool,
}
