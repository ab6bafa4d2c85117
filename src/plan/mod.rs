//! The plan layer: a fully specified job, parsed and validated before any device is touched.
pub mod fileset;
pub mod fio;
pub mod idle;
pub mod matrix;
pub mod mix;
pub mod pace;
pub mod profile;
pub mod size;
pub mod sweep;
pub mod validate;

pub use mix::{BsMix, Distribution, Generator, Pattern, Zones};
pub use sweep::Plan;

use crate::failure::{FailureKind, Kinded};
use serde::{Deserialize, Serialize};

/// Why a job, a plan or one of their values is refused: always bad input (exit 2; a sweep stops
/// there), one line that says what is wrong and what to write instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A size, duration, NUMA node or profile that does not parse ("4q", "10x").
    #[error("{0}")]
    Value(String),
    /// A sweep plan: its TOML, matrix, rules, name or limits.
    #[error("{0}")]
    Plan(String),
    /// A job the checks refuse before anything is touched (`validate`).
    #[error("{0}")]
    Job(String),
}

impl Kinded for PlanError {
    /// What kind of failure it is: bad input, whichever part was refused.
    fn kind(&self) -> FailureKind {
        FailureKind::Invalid
    }
}

// For callers whose own errors are still messages (a study's plan, fio's export): the line.
crate::failure::into_text!(PlanError);

impl PlanError {
    pub(crate) fn value<T>(message: String) -> Result<T, PlanError> {
        Err(PlanError::Value(message))
    }
    pub fn plan<T>(message: impl Into<String>) -> Result<T, PlanError> {
        Err(PlanError::Plan(message.into()))
    }
    pub(crate) fn job<T>(message: impl Into<String>) -> Result<T, PlanError> {
        Err(PlanError::Job(message.into()))
    }
}

/// Access pattern of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Rw {
    Read,
    Write,
    Randread,
    Randwrite,
    Randrw,
    /// Sequential, reads and writes mixed as randrw's (fio's `rw`/`readwrite`).
    #[serde(rename = "rw", alias = "readwrite")]
    #[value(name = "rw", alias = "readwrite")]
    ReadWrite,
}

impl Rw {
    pub fn name(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::Randread => "randread",
            Rw::Randwrite => "randwrite",
            Rw::Randrw => "randrw",
            Rw::ReadWrite => "rw",
        }
    }
    pub(crate) fn is_random(self) -> bool {
        matches!(self, Rw::Randread | Rw::Randwrite | Rw::Randrw)
    }
    /// Does it mix reads and writes (and so take a write mix)?
    pub(crate) fn mixed(self) -> bool {
        matches!(self, Rw::Randrw | Rw::ReadWrite)
    }
    /// Percentage of I/Os that are writes.
    pub(crate) fn write_percent(self, mix: u8) -> u8 {
        match self {
            Rw::Read | Rw::Randread => 0,
            Rw::Write | Rw::Randwrite => 100,
            Rw::Randrw | Rw::ReadWrite => mix,
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
    /// Whichever comes first: the measured seconds, or the I/Os over all threads (fio's
    /// `runtime` with `number_ios`).
    SecondsOrIos { seconds: f64, ios: u64 },
    /// Whichever comes first: the measured seconds, or the bytes over all threads (fio's
    /// `runtime` without `time_based`: the time or one pass over the size).
    SecondsOrBytes { seconds: f64, bytes: u64 },
}

impl Budget {
    /// The budget of the limits given (`--runtime`, `--ios`, `--bytes`, or a plan's `runtime`,
    /// `ios`, `bytes`): none, 10 s; a time with a count, whichever comes first. None for I/Os
    /// and bytes together, which cannot both be the count.
    pub(crate) fn of(seconds: Option<f64>, ios: Option<u64>, bytes: Option<u64>) -> Option<Budget> {
        Some(match (seconds, ios, bytes) {
            (None, None, None) => Budget::Seconds(10.0),
            (Some(s), None, None) => Budget::Seconds(s),
            (None, Some(n), None) => Budget::Ios(n),
            (None, None, Some(b)) => Budget::Bytes(b),
            (Some(seconds), Some(ios), None) => Budget::SecondsOrIos { seconds, ios },
            (Some(seconds), None, Some(bytes)) => Budget::SecondsOrBytes { seconds, bytes },
            (_, Some(_), Some(_)) => return None,
        })
    }

    /// Its time limit: measured seconds after the ramp; None for a count alone.
    pub fn seconds(self) -> Option<f64> {
        match self {
            Budget::Seconds(s) | Budget::SecondsOrIos { seconds: s, .. } | Budget::SecondsOrBytes { seconds: s, .. } => Some(s),
            Budget::Ios(_) | Budget::Bytes(_) => None,
        }
    }

    /// Its count limit in I/Os of `bs` bytes over all threads (bytes rounded up to whole
    /// blocks); None for a time alone.
    pub fn ios(self, bs: u64) -> Option<u64> {
        match self {
            Budget::Seconds(_) => None,
            Budget::Ios(n) | Budget::SecondsOrIos { ios: n, .. } => Some(n),
            Budget::Bytes(b) | Budget::SecondsOrBytes { bytes: b, .. } => Some(b.div_ceil(bs.max(1))),
        }
    }

    /// The word of the limit that ends a run once it is reached: `seconds`, `ios` or `bytes`
    /// (`by_time`: the time limit, for a budget that has one).
    pub fn limit_word(self, by_time: bool) -> &'static str {
        match self {
            Budget::Seconds(_) => "seconds",
            _ if by_time => "seconds",
            Budget::Ios(_) | Budget::SecondsOrIos { .. } => "ios",
            Budget::Bytes(_) | Budget::SecondsOrBytes { .. } => "bytes",
        }
    }

    /// Ends at whichever of a time and a count comes first.
    pub fn is_either(self) -> bool {
        matches!(self, Budget::SecondsOrIos { .. } | Budget::SecondsOrBytes { .. })
    }
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
    /// The file-set workload (`fileset.rs`): its own part, written only when set, so every spec
    /// without one reads (and hashes) as before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fileset: Option<fileset::FileSet>,
}

impl Job {
    /// The job as a sweep stores a planned run of it: its spec, every field at the top level.
    /// [`Job::from_spec`] reads it back.
    pub(crate) fn to_spec(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a job serialises")
    }

    /// The job a planned run's stored spec ([`Job::to_spec`]) was made from.
    pub(crate) fn from_spec(spec: &serde_json::Value) -> Result<Job, serde_json::Error> {
        Job::deserialize(spec)
    }
}

/// What a job issues.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Workload {
    pub rw: Rw,
    /// Percentage of writes for randrw and rw.
    pub write_mix: u8,
    /// The block size; with a mix (`bssplit`), its largest size.
    pub bs: u64,
    /// Several block sizes per run (fio's bssplit or bsrange). Left out when one, so the specs
    /// (and stored plans) of runs before it read the same.
    #[serde(default, skip_serializing_if = "BsMix::is_one")]
    pub bssplit: BsMix,
    /// How random offsets spread (fio's random_distribution). Left out when uniform.
    #[serde(default, skip_serializing_if = "Distribution::is_random")]
    pub distribution: Distribution,
    /// Offset modifiers, alignment, strided zones and the random generator (`mix::Pattern`),
    /// each at the spec's top level and left out when unset.
    #[serde(flatten)]
    pub pattern: Pattern,
    pub qd: u32,
    pub threads: u32,
    pub batch_submit: u32,
    pub batch_reap: u32,
    /// CPUs the threads are pinned to, round-robin; empty = not pinned.
    pub cpus: Vec<usize>,
    /// Pin the threads (and SQPOLL threads) to one NUMA node's CPUs. Left out when off, so the
    /// specs (and stored plans) of runs before it read the same.
    #[serde(default, skip_serializing_if = "Numa::is_off")]
    pub numa: Numa,
    pub seed: u64,
}

/// Which NUMA node's CPUs a job's threads run on: not pinned by node, the node the targets'
/// devices hang off, or a named node. Written as one word: `off`, `local` or the node's number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Numa {
    #[default]
    Off,
    Local,
    Node(u32),
    /// Several nodes' CPUs together (fio's `numa_cpu_nodes=0-1`), as a mask of nodes 0 to 63;
    /// whether they exist is checked when the run starts.
    Nodes(u64),
}

impl Numa {
    fn is_off(&self) -> bool {
        *self == Numa::Off
    }
}

impl std::str::FromStr for Numa {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Numa, PlanError> {
        match s.trim() {
            "off" => Ok(Numa::Off),
            "local" => Ok(Numa::Local),
            n if n.contains([',', '-']) => match crate::interfaces::thread::parse_nodes(n) {
                Ok(m) if m.count_ones() == 1 => Ok(Numa::Node(m.trailing_zeros())),
                Ok(m) => Ok(Numa::Nodes(m)),
                Err(why) => Err(PlanError::Value(format!("--numa '{s}': {why}"))),
            },
            n => n.parse().map(Numa::Node).map_err(|_| {
                PlanError::Value(format!("--numa '{s}' is not a NUMA node: use local, off, a node number such as 0 or a list such as 0-1"))
            }),
        }
    }
}

impl std::fmt::Display for Numa {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Numa::Off => f.write_str("off"),
            Numa::Local => f.write_str("local"),
            Numa::Node(n) => write!(f, "{n}"),
            Numa::Nodes(m) => f.write_str(&crate::interfaces::thread::nodes_text(*m)),
        }
    }
}

impl Serialize for Numa {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// From its word, or a plan's bare node number (`numa = 1`).
impl<'de> Deserialize<'de> for Numa {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Numa, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Node(u32),
            Word(String),
        }
        match Written::deserialize(d)? {
            Written::Node(n) => Ok(Numa::Node(n)),
            Written::Word(w) => w.parse().map_err(serde::de::Error::custom),
        }
    }
}

impl Workload {
    /// The smallest block size: the unit random offsets are aligned to (fio's rule without
    /// bs_unaligned: offsets on multiples of the smallest size).
    pub(crate) fn min_bs(&self) -> u64 {
        self.bssplit.bounds().map_or(self.bs, |b| b.0)
    }
    /// Mean bytes per I/O, for a byte budget.
    pub(crate) fn mean_bs(&self) -> f64 {
        self.bssplit.mean().unwrap_or(self.bs as f64)
    }
}

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            rw: Rw::Randread,
            write_mix: 50,
            bs: 4096,
            bssplit: BsMix::One,
            distribution: Distribution::Random,
            pattern: Pattern::default(),
            qd: 1,
            threads: 1,
            batch_submit: 1,
            batch_reap: 1,
            cpus: vec![],
            numa: Numa::Off,
            seed: 1,
        }
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
    /// With `verify`: fio's form (a pattern, fio's header per interval, whether written blocks
    /// are read back) instead of iolab's own blocks; None: iolab's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_fio: Option<crate::verify::FioForm>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A planned run's spec as iolab stored it before the interfaces' options were gathered in
    /// `Options` (written by `serde_json::to_string(&job)` with each option set): it reads back
    /// with every option in its part, and writes out the same.
    const STORED_BEFORE: &str = r#"{"interface":"io_uring","submit":"sqpoll","complete":"hybrid","direct":true,"sq_cpu":2,"sq_idle_ms":50,"register_buffers":false,"register_files":true,"force_async":true,"null_script":"accept=1","poll_delay":8,"vfio_noiommu":true,"rw":"randread","write_mix":50,"bs":4096,"qd":4,"threads":1,"batch_submit":1,"batch_reap":1,"cpus":[],"seed":1,"ramp_s":0.0,"budget":{"kind":"seconds","value":10.0},"targets":[],"size":null,"offset":0,"destructive":[],"verify":false,"continue_on_error":false,"allow_fallback":false,"strict":false,"scheduler":null,"set":[]}"#;

    #[test]
    fn a_job_stored_before_the_options_parts_reads_and_writes_the_same() {
        let job: Job = serde_json::from_str(STORED_BEFORE).unwrap();
        let o = &job.io.options;
        let r = &o.ring;
        assert_eq!((r.sq_cpu, r.sq_idle_ms, r.register_buffers, r.register_files, r.force_async), (Some(2), 50, false, true, true));
        assert_eq!(o.null.null_script.as_deref(), Some("accept=1"));
        assert_eq!(o.block_poll.poll_delay, Some(8));
        assert!(o.vfio.vfio_noiommu);
        assert_eq!(serde_json::to_value(&job).unwrap(), serde_json::from_str::<serde_json::Value>(STORED_BEFORE).unwrap());
        // The options only some interfaces take are left out when unset, as before.
        let plain = serde_json::to_value(Job::default()).unwrap();
        for key in ["null_script", "poll_delay", "vfio_noiommu"] {
            assert!(plain.get(key).is_none(), "{key}");
        }
        assert_eq!(plain["sq_idle_ms"], 1000);
    }

    /// A time with a count is one budget, whichever comes first: its limits, how it is written
    /// (an object of both for its value; the budgets of one limit are written as before), and
    /// I/Os and bytes together refused.
    #[test]
    fn a_time_with_a_count_ends_at_whichever_comes_first() {
        let b = Budget::of(Some(60.0), None, Some(10_000)).unwrap();
        assert_eq!(b, Budget::SecondsOrBytes { seconds: 60.0, bytes: 10_000 });
        assert_eq!((b.seconds(), b.ios(4096), b.is_either()), (Some(60.0), Some(3), true), "bytes round up to whole blocks");
        assert_eq!((b.limit_word(true), b.limit_word(false)), ("seconds", "bytes"));
        let i = Budget::of(Some(1.5), Some(7), None).unwrap();
        assert_eq!((i.seconds(), i.ios(4096), i.limit_word(false)), (Some(1.5), Some(7), "ios"));
        assert_eq!(Budget::of(None, None, None), Some(Budget::Seconds(10.0)));
        assert_eq!(Budget::of(Some(2.0), None, None).map(|b| (b.seconds(), b.ios(1), b.is_either())), Some((Some(2.0), None, false)));
        assert_eq!(Budget::of(None, Some(5), None).map(|b| (b.seconds(), b.ios(1))), Some((None, Some(5))));
        assert_eq!(Budget::of(Some(1.0), Some(5), Some(5)), None);
        assert_eq!(
            serde_json::to_value(b).unwrap(),
            serde_json::json!({"kind": "seconds_or_bytes", "value": {"seconds": 60.0, "bytes": 10_000}})
        );
        assert_eq!(serde_json::to_value(i).unwrap(), serde_json::json!({"kind": "seconds_or_ios", "value": {"seconds": 1.5, "ios": 7}}));
        assert_eq!(serde_json::from_value::<Budget>(serde_json::json!({"kind": "bytes", "value": 5})).unwrap(), Budget::Bytes(5));
        let job = Job { timing: Timing { ramp_s: 0.0, budget: b }, ..Job::default() };
        assert_eq!(Job::from_spec(&job.to_spec()).unwrap().timing.budget, b);
    }

    /// A planned run's spec is written and read by one pair: what `to_spec` writes reads back
    /// as the same job, and a spec stored before reads and writes the same.
    #[test]
    fn a_planned_runs_spec_is_written_and_read_by_one_pair() {
        let stored: serde_json::Value = serde_json::from_str(STORED_BEFORE).unwrap();
        let job = Job::from_spec(&stored).unwrap();
        assert_eq!(job.to_spec(), stored);
        let wide = Job { workload: Workload { numa: Numa::Node(1), qd: 8, ..Workload::default() }, ..Job::default() };
        assert_eq!(Job::from_spec(&wide.to_spec()).unwrap().to_spec(), wide.to_spec());
        assert!(Job::from_spec(&serde_json::json!({ "unsupported": "x" })).is_err(), "a configuration stored as unsupported is no job");
    }
}
