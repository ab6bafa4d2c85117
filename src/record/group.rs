//! A run's group: the jobs run together with it (fio's jobs without stonewall between them),
//! each with its own configuration, record and window, started at one barrier.
use serde::{Deserialize, Serialize};

/// What a system-wide meter of a group member's record covers.
pub const SHARED: &str = "the whole machine's meters (CPU by class, iolab's process rusage, device counters, energy) are shared with the group's other members over this run's window; the run's own worker threads and I/O counts are its own";

/// The group a run was run in (`RunRecord.group`; null for a run alone).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GroupRecord {
    /// The group's name, the same in every member's record (e.g. `aio-read.fio/1`).
    pub id: String,
    /// Every member's name, in start order.
    pub members: Vec<String>,
    /// This run's place in `members`, from 0.
    pub member: usize,
    /// How long after the group's start this run started (fio's `startdelay`), seconds.
    pub start_delay_s: f64,
    /// This run's measured window (after its ramp), Unix seconds: [start, end].
    pub window_unix_s: [f64; 2],
    /// What is shared with the other members ([`SHARED`]).
    pub shared: String,
}
