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
    /// What this run's end stops among the members (fio's `exitall`, `exitall_on_error`), in
    /// words naming them; absent where it stops nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exits: Option<String>,
    /// The member whose end stopped this run before its own budget (fio's `exitall`), in words:
    /// its I/O until then is this record's; absent where nothing stopped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// The flow this run shared with other members (fio's `flow`): every member's weight and
    /// measured I/Os, so the ratio achieved can be seen beside the one asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow: Option<FlowRecord>,
}

/// A flow shared by members of a group (fio's `flow_id`): its members' weights and I/Os.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct FlowRecord {
    /// fio's `flow_id`.
    pub id: u32,
    /// This run's weight (fio's `flow`, per thread).
    pub weight: u32,
    /// How long a thread held back slept before it looked again, microseconds (0: at once).
    pub sleep_us: f64,
    /// Every member in the flow, this run included, in member order.
    pub members: Vec<FlowMember>,
}

/// One member of a flow.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct FlowMember {
    pub name: String,
    /// Its weight per thread (fio's `flow`; each of its threads is a fio clone in the flow).
    pub weight: u32,
    pub threads: u32,
    /// Its measured I/Os (reads and writes; none where the member did not run).
    pub ios: u64,
    /// Its share of the flow's weight (weight x threads over all members'), and of the flow's
    /// measured I/Os.
    pub weight_share: f64,
    pub io_share: f64,
}
