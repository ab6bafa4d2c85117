//! The sweep dimensions, each defined once: its `[matrix]` key, how the plan writes its values
//! (and so how they parse), how a value goes into a job, and how a job's value reads in a
//! configuration's key and in a rule's `when`. A plan's matrix expands as one cartesian product
//! over `DIMENSIONS`, in their order (see `combinations`).
use super::fileset::{FileOrder, FileSizes, Fsync};
use super::size::parse_size;
use super::{BsMix, Complete, Distribution, Job, Numa, PlanError, Rw, Submit};
use crate::interfaces::{InterfaceKind, Iowait, POLL_DELAY};
use crate::settings::{self, Setting};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use toml::Value::{Integer, String as Text};

/// A size in the plan: a number of bytes or text such as "4k".
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum SizeValue {
    Bytes(u64),
    Text(String),
}

impl SizeValue {
    pub fn bytes(&self) -> Result<u64, PlanError> {
        match self {
            SizeValue::Bytes(n) => Ok(*n),
            SizeValue::Text(t) => parse_size(t),
        }
    }
}

/// How a dimension's values are written in the plan, and the job field(s) one of them sets.
/// The type decides the parse, so serde names the line and key of a value of the wrong type.
#[derive(Clone, Copy)]
pub enum Set {
    Interface(fn(&mut Job, InterfaceKind)),
    Text(fn(&mut Job, &str)),
    Submit(fn(&mut Job, Submit)),
    Complete(fn(&mut Job, Complete)),
    Rw(fn(&mut Job, Rw)),
    /// 0 to 100.
    Percent(fn(&mut Job, u8)),
    /// A whole number that may be negative.
    Signed(fn(&mut Job, i64)),
    Count(fn(&mut Job, u32)),
    /// Bytes, or text such as "4k" (read when the plan expands).
    Size(fn(&mut Job, u64)),
    /// A file or device, or several driven together joined by [`TARGET_SET`].
    Targets(fn(&mut Job, Vec<String>)),
    Numa(fn(&mut Job, Numa)),
    Iowait(fn(&mut Job, Iowait)),
    /// fio's bssplit or bsrange text ("4k/60:64k/40", "4k-64k").
    Mix(fn(&mut Job, BsMix)),
    /// fio's random_distribution text ("zipf:1.2").
    Distribution(fn(&mut Job, Distribution)),
    /// A word or text checked as the plan is read (`check`: one line naming what to write), then
    /// set by `set`: the file set's dimensions.
    Checked(fn(&str) -> Result<(), PlanError>, fn(&mut Job, &str)),
}

/// One value of a dimension, as the plan gives it.
#[derive(Clone, Debug, PartialEq)]
pub enum Level {
    Interface(InterfaceKind),
    Text(String),
    Submit(Submit),
    Complete(Complete),
    Rw(Rw),
    Percent(u8),
    Signed(i64),
    Count(u32),
    Size(SizeValue),
    Targets(Vec<String>),
    Numa(Numa),
    Iowait(Iowait),
    Mix(BsMix),
    Distribution(Distribution),
}

/// When a configuration's key names a dimension.
#[derive(Clone, Copy)]
pub enum Shown {
    Always,
    /// Only when the plan's matrix lists the dimension.
    IfListed,
    /// Only for jobs where it matters.
    If(fn(&Job) -> bool),
}

/// One sweep dimension.
pub struct Dimension {
    /// Its key in `[matrix]`, in configuration keys and in rules.
    pub name: &'static str,
    pub set: Set,
    /// The job's value, as a configuration's key prints it and a rule compares it.
    pub value: fn(&Job) -> toml::Value,
    pub shown: Shown,
}

/// Every sweep dimension, in matrix order: a plan expands with the first outermost and the last
/// innermost (changing fastest), and a configuration's key names them in this order. A
/// dimension the plan does not list keeps `Job::default()`'s value (the target: the plan's
/// `targets`, or the command line's, all together in each run).
pub const DIMENSIONS: [Dimension; 30] = [
    Dimension {
        name: "interface",
        set: Set::Interface(|j, v| j.io.interface = v),
        value: |j| Text(j.io.interface.name().into()),
        shown: Shown::Always,
    },
    Dimension {
        name: "submit",
        set: Set::Submit(|j, v| j.io.submit = v),
        value: |j| Text(if j.io.submit == Submit::Sqpoll { "sqpoll" } else { "syscall" }.into()),
        shown: Shown::Always,
    },
    Dimension {
        name: "complete",
        set: Set::Complete(|j, v| j.io.complete = v),
        value: |j| Text(j.io.complete.name().into()),
        shown: Shown::Always,
    },
    // An interface option a plan may sweep (the block layer's hybrid polling sleep), defined by
    // the options part that owns it.
    Dimension {
        name: POLL_DELAY.name,
        set: Set::Signed(|j, v| (POLL_DELAY.set)(&mut j.io, v)),
        value: |j| Integer((POLL_DELAY.value)(&j.io)),
        shown: Shown::If(|j| (POLL_DELAY.shown)(&j.io)),
    },
    Dimension { name: "rw", set: Set::Rw(|j, v| j.workload.rw = v), value: |j| Text(j.workload.rw.name().into()), shown: Shown::Always },
    Dimension {
        name: "write_mix",
        set: Set::Percent(|j, v| j.workload.write_mix = v),
        value: |j| Integer(j.workload.write_mix.into()),
        shown: Shown::If(|j| j.workload.rw.mixed()),
    },
    Dimension { name: "bs", set: Set::Size(|j, v| j.workload.bs = v), value: |j| Integer(j.workload.bs as i64), shown: Shown::Always },
    // Several block sizes per run; the job's bs becomes the mix's largest.
    Dimension {
        name: "bssplit",
        set: Set::Mix(|j, v| {
            if let Some((_, largest)) = v.bounds() {
                j.workload.bs = largest;
            }
            j.workload.bssplit = v;
        }),
        value: |j| Text(j.workload.bssplit.to_string()),
        shown: Shown::IfListed,
    },
    Dimension {
        name: "distribution",
        set: Set::Distribution(|j, v| j.workload.distribution = v),
        value: |j| Text(j.workload.distribution.to_string()),
        shown: Shown::IfListed,
    },
    // Where offsets go beyond the pattern (`mix::Pattern`, fio's offset modifier, blockalign,
    // strided zones and random_generator).
    Dimension {
        name: "stride",
        set: Set::Checked(
            |v| super::mix::parse_signed_size(v).map(|_| ()),
            |j, v| {
                if let Ok(n) = super::mix::parse_signed_size(v) {
                    j.workload.pattern.stride = n
                }
            },
        ),
        value: |j| Integer(j.workload.pattern.stride),
        shown: Shown::IfListed,
    },
    Dimension {
        name: "ios_per_offset",
        set: Set::Count(|j, v| j.workload.pattern.ios_per_offset = v),
        value: |j| Integer(j.workload.pattern.ios_per_offset.max(1).into()),
        shown: Shown::IfListed,
    },
    Dimension {
        name: "blockalign",
        set: Set::Size(|j, v| j.workload.pattern.blockalign = v),
        value: |j| Integer(j.workload.pattern.blockalign as i64),
        shown: Shown::IfListed,
    },
    Dimension {
        name: "zones",
        set: Set::Checked(|v| v.parse::<super::Zones>().map(|_| ()), |j, v| j.workload.pattern.zones = v.parse().ok()),
        value: |j| Text(j.workload.pattern.zones.map(|z| z.to_string()).unwrap_or_default()),
        shown: Shown::IfListed,
    },
    Dimension {
        name: "random_generator",
        set: Set::Checked(
            |v| generator(v).map(|_| ()),
            |j, v| {
                if let Ok(g) = generator(v) {
                    j.workload.pattern.random_generator = g
                }
            },
        ),
        value: |j| Text(j.workload.pattern.random_generator.name().into()),
        shown: Shown::IfListed,
    },
    // Rates and think time (`pace`, fio's words: `rate_iops=300 thinktime=2ms`).
    Dimension {
        name: "pace",
        set: Set::Checked(
            |v| v.parse::<super::pace::Pace>().map(|_| ()),
            |j, v| j.workload.pattern.pace = v.parse::<super::pace::Pace>().ok().filter(|p| !p.is_none()),
        ),
        value: |j| Text(j.workload.pattern.pace.as_ref().map(|p| p.to_string()).unwrap_or_default()),
        shown: Shown::IfListed,
    },
    Dimension { name: "qd", set: Set::Count(|j, v| j.workload.qd = v), value: |j| Integer(j.workload.qd.into()), shown: Shown::Always },
    Dimension {
        name: "threads",
        set: Set::Count(|j, v| j.workload.threads = v),
        value: |j| Integer(j.workload.threads.into()),
        shown: Shown::Always,
    },
    // Requests per submission; `options.batch_reap` (default: the same) is set once the job is whole.
    Dimension {
        name: "batch",
        set: Set::Count(|j, v| j.workload.batch_submit = v),
        value: |j| Integer(j.workload.batch_submit.into()),
        shown: Shown::IfListed,
    },
    // One target, or a set of targets driven together ("/dev/a+/dev/b"), per run.
    Dimension {
        name: "target",
        set: Set::Targets(|j, v| j.targets.paths = v),
        value: |j| Text(j.targets.paths.join(&TARGET_SET.to_string())),
        shown: Shown::IfListed,
    },
    Dimension {
        name: "scheduler",
        set: Set::Text(|j, v| j.system.scheduler = Some(v.into())),
        value: |j| Text(j.system.scheduler.clone().unwrap_or_default()),
        shown: Shown::IfListed,
    },
    // Threads pinned to a NUMA node's CPUs or not (CHEOPS'23 Fig 8's restricted lines).
    Dimension {
        name: "numa",
        set: Set::Numa(|j, v| j.workload.numa = v),
        value: |j| Text(j.workload.numa.to_string()),
        shown: Shown::IfListed,
    },
    // The energy knobs (`settings`), each a `set` entry a configuration varies: its value
    // replaces the plan's `options.set` entry of the same setting.
    Dimension {
        name: "cpu_freq_khz",
        set: Set::Text(|j, v| settings::put(&mut j.system.set, Setting::CpuFreqKhz, v)),
        value: |j| Text(settings::value_in(&j.system.set, Setting::CpuFreqKhz).unwrap_or_default()),
        shown: Shown::IfListed,
    },
    Dimension {
        name: "cpuidle_max_state",
        set: Set::Signed(|j, v| settings::put(&mut j.system.set, Setting::CpuidleMaxState, &v.to_string())),
        value: |j| settings_number(j, Setting::CpuidleMaxState),
        shown: Shown::IfListed,
    },
    Dimension {
        name: "nvme_power_state",
        set: Set::Signed(|j, v| settings::put(&mut j.system.set, Setting::NvmePowerState, &v.to_string())),
        value: |j| settings_number(j, Setting::NvmePowerState),
        shown: Shown::IfListed,
    },
    Dimension {
        name: "nvme_apst",
        set: Set::Text(|j, v| settings::put(&mut j.system.set, Setting::NvmeApst, v)),
        value: |j| Text(settings::value_in(&j.system.set, Setting::NvmeApst).unwrap_or_default()),
        shown: Shown::IfListed,
    },
    // io_uring's waits counted as iowait or not (IORING_ENTER_NO_IOWAIT), an energy knob of the
    // ring's options.
    Dimension {
        name: "iowait",
        set: Set::Iowait(|j, v| j.io.options.ring.iowait = v),
        value: |j| Text(j.io.options.ring.iowait.name().into()),
        shown: Shown::IfListed,
    },
    // The file set's (a plan's `[fileset]`, `iolab run --fileset`): Fig 23's grid is rw x
    // file_order x file_size over one directory.
    Dimension {
        name: "file_size",
        set: Set::Checked(fileset_check::<FileSizes>, fileset_put::<FileSizes>),
        value: fileset_value::<FileSizes>,
        shown: Shown::IfListed,
    },
    Dimension {
        name: "file_order",
        set: Set::Checked(fileset_check::<FileOrder>, fileset_put::<FileOrder>),
        value: fileset_value::<FileOrder>,
        shown: Shown::IfListed,
    },
    Dimension {
        name: "fsync",
        set: Set::Checked(fileset_check::<Fsync>, fileset_put::<Fsync>),
        value: fileset_value::<Fsync>,
        shown: Shown::IfListed,
    },
    // The NBD server back end the set's file system is served through (S4.7, Fig 23).
    Dimension {
        name: "server",
        set: Set::Checked(super::fileset::server_word, |j, v| {
            if let Some(f) = j.fileset.as_mut() {
                f.server = Some(v.to_string())
            }
        }),
        value: |j| Text(j.fileset.as_ref().and_then(|f| f.server.clone()).unwrap_or_default()),
        shown: Shown::IfListed,
    },
];

/// A value of a file set's dimension: read from the plan's text, set on a job's file set, and
/// shown in a configuration's key. The three dimensions share one form through it.
trait FileSetValue: Sized {
    fn read(v: &str) -> Result<Self, PlanError>;
    fn put(self, f: &mut super::fileset::FileSet);
    fn shown(f: &super::fileset::FileSet) -> String;
}

impl FileSetValue for FileSizes {
    fn read(v: &str) -> Result<Self, PlanError> {
        v.parse()
    }
    fn put(self, f: &mut super::fileset::FileSet) {
        f.file_size = self
    }
    fn shown(f: &super::fileset::FileSet) -> String {
        f.file_size.to_string()
    }
}

impl FileSetValue for FileOrder {
    fn read(v: &str) -> Result<Self, PlanError> {
        word(FileOrder::ALL, FileOrder::name, "file_order", v)
    }
    fn put(self, f: &mut super::fileset::FileSet) {
        f.file_order = self
    }
    fn shown(f: &super::fileset::FileSet) -> String {
        f.file_order.name().to_string()
    }
}

impl FileSetValue for Fsync {
    fn read(v: &str) -> Result<Self, PlanError> {
        word(Fsync::ALL, Fsync::name, "fsync", v)
    }
    fn put(self, f: &mut super::fileset::FileSet) {
        f.fsync = self
    }
    fn shown(f: &super::fileset::FileSet) -> String {
        f.fsync.name().to_string()
    }
}

/// A file set dimension's value checked (when the plan expands).
fn fileset_check<T: FileSetValue>(v: &str) -> Result<(), PlanError> {
    T::read(v).map(|_| ())
}

/// A file set dimension's value set on a job's file set (a job without one is left as it is).
fn fileset_put<T: FileSetValue>(j: &mut Job, v: &str) {
    if let (Some(f), Ok(x)) = (j.fileset.as_mut(), T::read(v)) {
        x.put(f)
    }
}

/// A file set dimension's value in a configuration's key (empty without a file set).
fn fileset_value<T: FileSetValue>(j: &Job) -> toml::Value {
    Text(j.fileset.as_ref().map(T::shown).unwrap_or_default())
}

/// The names of the file set's dimensions: a plan that lists one needs a `[fileset]`.
pub(crate) const FILESET_DIMENSIONS: [&str; 4] = ["file_size", "file_order", "fsync", "server"];

/// One of `all`'s words, or one line naming them.
fn word<T: Copy>(all: &[T], name: fn(T) -> &'static str, key: &str, v: &str) -> Result<T, PlanError> {
    all.iter()
        .copied()
        .find(|x| name(*x) == v)
        .ok_or_else(|| PlanError::Plan(format!("plan {key} '{v}': use {}", all.iter().map(|x| name(*x)).collect::<Vec<_>>().join(", "))))
}

/// A `random_generator` word.
fn generator(v: &str) -> Result<super::Generator, PlanError> {
    word(&[super::Generator::Random, super::Generator::Lfsr], super::Generator::name, "random_generator", v)
}

/// A numeric setting of the job's `set` as a configuration's key shows it (text where it is
/// not a number: `validate` refuses that configuration).
fn settings_number(j: &Job, s: Setting) -> toml::Value {
    let v = settings::value_in(&j.system.set, s).unwrap_or_default();
    v.parse::<i64>().map(Integer).unwrap_or(Text(v))
}

/// Joins the targets of a set driven together in one run, in a `target` value of a plan's
/// matrix and on the command line: `/dev/nvme0n1+/dev/nvme1n1`. Not ',' (it separates a
/// configuration key's parts) and not a list in the list (a value reads the same in a plan, a
/// key and a shell).
pub const TARGET_SET: char = '+';

/// A `target` value as the targets it names: one, or a set joined by [`TARGET_SET`]. Err: one
/// line (an empty name, a target named twice).
pub(crate) fn target_set(value: &str) -> Result<Vec<String>, PlanError> {
    let parts: Vec<String> = value.split(TARGET_SET).map(|p| p.trim().to_string()).collect();
    if parts.iter().any(String::is_empty) {
        return PlanError::plan(format!(
            "target '{value}' has an empty name: give a file or device, or several driven together joined by '+' (/dev/nvme0n1+/dev/nvme1n1)"
        ));
    }
    if let Some((_, twice)) = parts.iter().enumerate().find(|(i, p)| parts[..*i].contains(p)) {
        return PlanError::plan(format!("target '{value}' names {twice} twice: name each device of a set once"));
    }
    Ok(parts)
}

/// The dimensions' names, in order (what serde lists for an unknown `[matrix]` key).
static NAMES: [&str; DIMENSIONS.len()] = {
    let mut names = [""; DIMENSIONS.len()];
    let mut i = 0;
    while i < names.len() {
        names[i] = DIMENSIONS[i].name;
        i += 1;
    }
    names
};

/// The index in `DIMENSIONS` of the dimension named `name`.
pub fn dimension(name: &str) -> Option<usize> {
    NAMES.iter().position(|n| *n == name)
}

impl Set {
    /// The plan's list of values for a dimension of this type.
    fn parse<'de, D: Deserializer<'de>>(self, d: D) -> Result<Vec<Level>, D::Error> {
        fn list<'de, T: Deserialize<'de>, D: Deserializer<'de>>(d: D, level: fn(T) -> Level) -> Result<Vec<Level>, D::Error> {
            Ok(Vec::<T>::deserialize(d)?.into_iter().map(level).collect())
        }
        match self {
            Set::Interface(_) => list(d, Level::Interface),
            Set::Text(_) => list(d, Level::Text),
            Set::Submit(_) => list(d, Level::Submit),
            Set::Complete(_) => list(d, Level::Complete),
            Set::Rw(_) => list(d, Level::Rw),
            Set::Percent(_) => list(d, Level::Percent),
            Set::Signed(_) => list(d, Level::Signed),
            Set::Count(_) => list(d, Level::Count),
            Set::Size(_) => list(d, Level::Size),
            Set::Targets(_) => {
                Vec::<String>::deserialize(d)?.iter().map(|v| target_set(v).map(Level::Targets).map_err(de::Error::custom)).collect()
            }
            Set::Numa(_) => list(d, Level::Numa),
            Set::Iowait(_) => list(d, Level::Iowait),
            Set::Mix(_) => list(d, Level::Mix),
            Set::Distribution(_) => list(d, Level::Distribution),
            Set::Checked(check, _) => {
                Vec::<String>::deserialize(d)?.into_iter().map(|v| check(&v).map(|()| Level::Text(v)).map_err(de::Error::custom)).collect()
            }
        }
    }

    /// Sets the job's field to `level`, a value parsed for this type (sizes checked before).
    fn apply(self, job: &mut Job, level: &Level) {
        match (self, level) {
            (Set::Interface(f), Level::Interface(v)) => f(job, *v),
            (Set::Text(f), Level::Text(v)) => f(job, v),
            (Set::Submit(f), Level::Submit(v)) => f(job, *v),
            (Set::Complete(f), Level::Complete(v)) => f(job, *v),
            (Set::Rw(f), Level::Rw(v)) => f(job, *v),
            (Set::Percent(f), Level::Percent(v)) => f(job, *v),
            (Set::Signed(f), Level::Signed(v)) => f(job, *v),
            (Set::Count(f), Level::Count(v)) => f(job, *v),
            (Set::Size(f), Level::Size(v)) => f(job, v.bytes().expect("Matrix::jobs checks sizes first")),
            (Set::Targets(f), Level::Targets(v)) => f(job, v.clone()),
            (Set::Numa(f), Level::Numa(v)) => f(job, *v),
            (Set::Iowait(f), Level::Iowait(v)) => f(job, *v),
            (Set::Mix(f), Level::Mix(v)) => f(job, v.clone()),
            (Set::Distribution(f), Level::Distribution(v)) => f(job, v.clone()),
            (Set::Checked(_, f), Level::Text(v)) => f(job, v),
            (_, other) => unreachable!("{other:?} was not parsed for this dimension"),
        }
    }
}

/// The plan's `[matrix]`: each dimension's values, in `DIMENSIONS` order (empty: not listed).
#[derive(Clone, Debug, Default)]
pub struct Matrix {
    values: [Vec<Level>; DIMENSIONS.len()],
}

impl Matrix {
    /// Does the plan list this dimension?
    pub fn lists(&self, dimension: usize) -> bool {
        !self.values[dimension].is_empty()
    }

    /// The `target` dimension's values in place of the plan's: each a target or a set (the
    /// command line's targets of a sweep). Err: [`target_set`]'s.
    pub(crate) fn set_targets(&mut self, values: &[String]) -> Result<(), PlanError> {
        let d = dimension("target").expect("target is a dimension");
        self.values[d] = values.iter().map(|v| target_set(v).map(Level::Targets)).collect::<Result<_, _>>()?;
        Ok(())
    }

    /// How many configurations the matrix has (before rules and validation drop any).
    pub fn configurations(&self) -> u128 {
        self.values.iter().fold(1u128, |n, v| n.saturating_mul(v.len().max(1) as u128))
    }

    /// Err names the first size that is not one ("plan bs: ...").
    pub(crate) fn check_sizes(&self) -> Result<(), PlanError> {
        for (dim, values) in DIMENSIONS.iter().zip(&self.values) {
            for v in values {
                if let Level::Size(s) = v {
                    s.bytes().map_err(|e| PlanError::Plan(format!("plan {}: {e}", dim.name)))?;
                }
            }
        }
        Ok(())
    }

    /// Every configuration: `base` with one value of each listed dimension, in matrix order.
    /// Err: `check_sizes`'s.
    pub fn jobs<'a>(&'a self, base: &'a Job) -> Result<impl Iterator<Item = Job> + 'a, PlanError> {
        self.check_sizes()?;
        Ok(combinations(self.values.iter().map(|v| v.len().max(1)).collect()).map(move |at| {
            let mut job = base.clone();
            for ((dim, values), i) in DIMENSIONS.iter().zip(&self.values).zip(at) {
                if let Some(level) = values.get(i) {
                    dim.set.apply(&mut job, level);
                }
            }
            job
        }))
    }

    /// The dimensions a configuration's key names, `name=value` in matrix order: its identity.
    pub fn key(&self, job: &Job) -> String {
        DIMENSIONS
            .iter()
            .enumerate()
            .filter(|(i, d)| match d.shown {
                Shown::Always => true,
                Shown::IfListed => self.lists(*i),
                Shown::If(shown) => shown(job),
            })
            .map(|(_, d)| match (d.value)(job) {
                Text(s) => format!("{}={s}", d.name),
                v => format!("{}={v}", d.name),
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The dimensions that shape the I/O itself beyond the always-shown ones: a run made outside a
/// sweep names each where its value is not `iolab run`'s default.
const SHAPE: &[&str] = &["bssplit", "distribution", "file_size", "file_order", "fsync"];

/// A configuration key for a run made outside a sweep (no matrix to say which dimensions vary):
/// the always-shown dimensions, those shown by the job's own values, and each of [`SHAPE`] that
/// differs from the default job. Two lone runs are replicates only if their keys are equal.
pub(crate) fn lone_key(job: &Job) -> String {
    let default = Job::default();
    DIMENSIONS
        .iter()
        .filter(|d| match d.shown {
            Shown::Always => true,
            Shown::If(shown) => shown(job),
            Shown::IfListed => SHAPE.contains(&d.name) && (d.value)(job) != (d.value)(&default),
        })
        .map(|d| match (d.value)(job) {
            Text(s) => format!("{}={s}", d.name),
            v => format!("{}={v}", d.name),
        })
        .collect::<Vec<_>>()
        .join(",")
}

impl Dimension {
    /// Are its values numbers (sizes, counts, percentages), so that a chart can put them on an axis?
    pub(crate) fn numeric(&self) -> bool {
        matches!(self.set, Set::Percent(_) | Set::Signed(_) | Set::Count(_) | Set::Size(_))
    }
}

/// One dimension's value as a configuration's key gives it.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyValue {
    Number(f64),
    Text(String),
}

impl std::fmt::Display for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            KeyValue::Number(n) => write!(f, "{n}"),
            KeyValue::Text(t) => f.write_str(t),
        }
    }
}

/// A configuration's key (`Matrix::key`) read back: each `name=value` part that names a
/// dimension, as (its index in `DIMENSIONS`, its value), in the key's order. A numeric
/// dimension's value is a number when it reads as one; parts naming no dimension are left out.
pub(crate) fn read_key(key: &str) -> Vec<(usize, KeyValue)> {
    key.split(',')
        .filter_map(|part| {
            let (name, value) = part.split_once('=')?;
            let i = dimension(name.trim())?;
            let value = value.trim();
            let v = match value.parse::<f64>() {
                Ok(n) if DIMENSIONS[i].numeric() && n.is_finite() => KeyValue::Number(n),
                _ => KeyValue::Text(value.to_string()),
            };
            Some((i, v))
        })
        .collect()
}

/// Every combination of one index below each size, the last changing fastest: the nested loops
/// `for a in 0..sizes[0] { for b in 0..sizes[1] { ... } }` as one iterator. Sizes are at least 1.
pub fn combinations(sizes: Vec<usize>) -> impl Iterator<Item = Vec<usize>> {
    let mut next = Some(vec![0; sizes.len()]);
    std::iter::from_fn(move || {
        let current = next.take()?;
        // Like an odometer: advance the last index that can, and start the ones after it over.
        if let Some(d) = (0..sizes.len()).rev().find(|&d| current[d] + 1 < sizes[d]) {
            let mut n = current.clone();
            n[d] += 1;
            n[d + 1..].fill(0);
            next = Some(n);
        }
        Some(current)
    })
}

/// `[matrix]` reads through `DIMENSIONS`: an unknown key is refused as serde's
/// `deny_unknown_fields` would, naming the keys there are.
impl<'de> Deserialize<'de> for Matrix {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Matrix, D::Error> {
        d.deserialize_struct("Matrix", &NAMES, MatrixVisitor)
    }
}

struct MatrixVisitor;

impl<'de> Visitor<'de> for MatrixVisitor {
    type Value = Matrix;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("struct Matrix")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Matrix, A::Error> {
        let mut m = Matrix::default();
        while let Some(DimensionKey(i)) = map.next_key()? {
            m.values[i] = map.next_value_seed(DimensionValues(i))?;
        }
        Ok(m)
    }
}

/// A `[matrix]` key: the index of its dimension.
struct DimensionKey(usize);

impl<'de> Deserialize<'de> for DimensionKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<DimensionKey, D::Error> {
        d.deserialize_identifier(DimensionKeyVisitor)
    }
}

struct DimensionKeyVisitor;

impl Visitor<'_> for DimensionKeyVisitor {
    type Value = DimensionKey;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("field identifier")
    }
    fn visit_str<E: de::Error>(self, key: &str) -> Result<DimensionKey, E> {
        dimension(key).map(DimensionKey).ok_or_else(|| E::unknown_field(key, &NAMES))
    }
}

/// A `[matrix]` list, parsed as its dimension's type.
struct DimensionValues(usize);

impl<'de> DeserializeSeed<'de> for DimensionValues {
    type Value = Vec<Level>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Level>, D::Error> {
        let values = DIMENSIONS[self.0].set.parse(d)?;
        // An empty list is not "not listed": it took the default silently (`qd = []` ran QD 1).
        if values.is_empty() {
            let name = DIMENSIONS[self.0].name;
            return Err(de::Error::custom(format!("{name} = [] lists no value: give at least one, or leave {name} out for the default")));
        }
        Ok(values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_back_with_numbers_for_numeric_dimensions() {
        let job = Job::default();
        let read = read_key(&Matrix::default().key(&job));
        let get = |name: &str| read.iter().find(|(i, _)| DIMENSIONS[*i].name == name).map(|(_, v)| v.clone());
        assert_eq!(get("bs"), Some(KeyValue::Number(job.workload.bs as f64)));
        assert_eq!(get("qd"), Some(KeyValue::Number(job.workload.qd as f64)));
        assert_eq!(get("interface"), Some(KeyValue::Text(job.io.interface.name().into())));
        let read = read_key("interface=io_uring,bs=4096,qd=x,scheduler=none,frob=1,junk");
        assert_eq!(
            read,
            vec![
                (0, KeyValue::Text("io_uring".into())),
                (dimension("bs").unwrap(), KeyValue::Number(4096.0)),
                (dimension("qd").unwrap(), KeyValue::Text("x".into())),
                (dimension("scheduler").unwrap(), KeyValue::Text("none".into())),
            ]
        );
        let numeric: Vec<&str> = DIMENSIONS.iter().filter(|d| d.numeric()).map(|d| d.name).collect();
        assert_eq!(
            numeric,
            [
                "poll_delay",
                "write_mix",
                "bs",
                "ios_per_offset",
                "blockalign",
                "qd",
                "threads",
                "batch",
                "cpuidle_max_state",
                "nvme_power_state"
            ]
        );
    }

    /// A run made outside a sweep is keyed by the always-shown dimensions, plus a block size
    /// mix or a distribution where it has one: two lone runs that differ only there are not
    /// replicates of each other.
    #[test]
    fn a_lone_runs_key_names_its_mix_and_distribution() {
        let plain = Job::default();
        let key = lone_key(&plain);
        assert_eq!(key, "interface=psync,submit=syscall,complete=irq,rw=randread,bs=4096,qd=1,threads=1");
        let mut mixed = plain.clone();
        mixed.workload.bssplit = "4k/50:64k/50".parse().unwrap();
        mixed.workload.distribution = "zipf:1.2".parse().unwrap();
        let k = lone_key(&mixed);
        let shape =
            "interface=psync,submit=syscall,complete=irq,rw=randread,bs=4096,bssplit=4k/50:64k/50,distribution=zipf:1.2,qd=1,threads=1";
        assert_eq!(k, shape);
    }

    #[test]
    fn combinations_are_nested_loops_with_the_last_fastest() {
        let all: Vec<Vec<usize>> = combinations(vec![2, 1, 3]).collect();
        assert_eq!(all, [[0, 0, 0], [0, 0, 1], [0, 0, 2], [1, 0, 0], [1, 0, 1], [1, 0, 2]]);
        assert_eq!(combinations(vec![]).collect::<Vec<_>>(), [Vec::<usize>::new()], "no dimension: one configuration");
        assert_eq!(combinations(vec![1; 11]).count(), 1);
    }

    #[test]
    fn every_dimension_reads_back_what_it_sets() {
        let job = |name: &str, toml: &str| {
            let m: Matrix = toml::from_str(&format!("{name} = [{toml}]")).unwrap();
            let jobs: Vec<Job> = m.jobs(&Job::default()).unwrap().collect();
            assert_eq!(jobs.len(), 1);
            (m.key(&jobs[0]), (DIMENSIONS[dimension(name).unwrap()].value)(&jobs[0]))
        };
        assert_eq!(job("interface", "\"io_uring\"").1, Text("io_uring".into()));
        assert_eq!(job("submit", "\"sqpoll\"").1, Text("sqpoll".into()));
        assert_eq!(job("complete", "\"hybrid\"").1, Text("hybrid".into()));
        assert_eq!(job("rw", "\"write\"").1, Text("write".into()));
        assert_eq!(job("write_mix", "30").1, Integer(30));
        assert_eq!(job("bs", "\"8k\"").1, Integer(8192));
        assert_eq!(job("qd", "32").1, Integer(32));
        assert_eq!(job("threads", "4").1, Integer(4));
        assert_eq!(job("batch", "2").1, Integer(2));
        let (key, v) = job("target", "\"/dev/x\"");
        assert_eq!(v, Text("/dev/x".into()));
        assert!(key.ends_with(",target=/dev/x"), "{key}");
        let (key, v) = job("scheduler", "\"kyber\"");
        assert_eq!(v, Text("kyber".into()));
        assert_eq!(key, "interface=psync,submit=syscall,complete=irq,rw=randread,bs=4096,qd=1,threads=1,scheduler=kyber");
        let (key, v) = job("iowait", "\"off\"");
        assert_eq!(v, Text("off".into()));
        assert!(key.ends_with(",iowait=off"), "{key}");
        let e = toml::from_str::<Matrix>("iowait = [\"maybe\"]").err().unwrap().to_string();
        assert!(e.contains("maybe"), "{e}");
    }
}
