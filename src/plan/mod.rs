//! The plan layer: a fully specified job, parsed and validated before any device is touched.
pub mod matrix;
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

/// How requests reach the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Submit {
    /// The application makes a system call per batch.
    Syscall,
    /// A kernel thread polls the submission queue (io_uring SQPOLL).
    Sqpoll,
}

/// How completions are detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Complete {
    /// The device raises an interrupt; the application sleeps.
    Irq,
    /// Classic busy polling.
    Poll,
    /// Sleep for part of the expected latency, then poll.
    Hybrid,
}

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

/// Everything needed to rerun a measurement.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    pub interface: crate::interfaces::InterfaceKind,
    pub submit: Submit,
    pub complete: Complete,
    pub rw: Rw,
    /// Percentage of writes for randrw.
    pub write_mix: u8,
    pub bs: u64,
    pub qd: u32,
    pub threads: u32,
    pub batch_submit: u32,
    pub batch_reap: u32,
    pub ramp_s: f64,
    pub budget: Budget,
    /// Bytes of each target to use, from `offset`; None = to the end.
    pub size: Option<u64>,
    pub offset: u64,
    pub direct: bool,
    pub cpus: Vec<usize>,
    pub seed: u64,
    pub targets: Vec<String>,
    /// io_uring's own options (nvme-passthru's rings too), kept at the top level of `spec`.
    #[serde(flatten)]
    pub ring: crate::interfaces::io_uring::RingOptions,
    pub verify: bool,
    pub continue_on_error: bool,
    /// Run a polled mode even where the queue cannot poll, reporting the fallback.
    pub allow_fallback: bool,
    /// Fail the run when the completion path observed is not the one asked for.
    #[serde(default)]
    pub strict: bool,
    /// Devices the user named as safe to overwrite.
    pub destructive: Vec<String>,
    /// I/O scheduler to select on every target's device for the run (restored after).
    #[serde(default)]
    pub scheduler: Option<String>,
    /// Other system settings for the run, "name=value" (nomerges, io_poll_delay,
    /// read_ahead_kb, wbt_lat_usec on every target's device; governor on every CPU).
    #[serde(default)]
    pub set: Vec<String>,
    /// -i null only: scripted delays, errors, short transfers, partial submits (`interfaces::null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_script: Option<String>,
}

/// The defaults of `iolab run` (each flag's default value), so that a job names only what
/// differs: a 4 KiB random read through psync at QD1 on one thread for 10 s, O_DIRECT.
impl Default for Job {
    fn default() -> Job {
        Job {
            interface: crate::interfaces::InterfaceKind::Psync,
            submit: Submit::Syscall,
            complete: Complete::Irq,
            rw: Rw::Randread,
            write_mix: 50,
            bs: 4096,
            qd: 1,
            threads: 1,
            batch_submit: 1,
            batch_reap: 1,
            ramp_s: 0.0,
            budget: Budget::Seconds(10.0),
            size: None,
            offset: 0,
            direct: true,
            cpus: vec![],
            seed: 1,
            targets: vec![],
            ring: Default::default(),
            verify: false,
            continue_on_error: false,
            allow_fallback: false,
            strict: false,
            destructive: vec![],
            scheduler: None,
            set: vec![],
            null_script: None,
        }
    }
}
