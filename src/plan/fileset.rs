//! The file-set workload's part of a job (issue 30, IISWC'19 Fig 23): `files` files of sizes
//! drawn from a range or a list, created once in a fresh directory under the job's one target
//! (a directory), then each opened, transferred whole in I/Os of `bs` and closed, in sequential
//! or random order (`engine::fileset`). Kept in its own part of the spec, written only when set,
//! so every spec (and planned run's hash) without it reads as before.
use super::size::{format_bytes, parse_size};
use super::{Job, PlanError, Rw};
use crate::rng::Rng;
use serde::{Deserialize, Serialize};

/// The most files a set may hold: Fig 23's 10 million (their sizes, drawn before anything is
/// made, take 8 bytes each).
pub const MAX_FILES: u64 = 10_000_000;
/// The largest file of a set.
pub const MAX_FILE_SIZE: u64 = 1 << 30;

/// The file-set part of a job: `Job::fileset`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSet {
    /// How many files the set holds.
    pub files: u64,
    /// Their sizes: a range drawn uniformly in steps of `bs` (as fio's `filesize=4k-64k`), or a
    /// list drawn from with equal chance. Fig 23's 4k-64k when not given.
    #[serde(default = "fig23_sizes")]
    pub file_size: FileSizes,
    /// The order the files are visited in (seq when not given).
    #[serde(default = "seq")]
    pub file_order: FileOrder,
    /// When written files are flushed (reads ignore it).
    #[serde(default = "no_fsync")]
    pub fsync: Fsync,
    /// The NBD server back end the set's file system is served through (`iolab serve -i`:
    /// io_uring, psync or vfio-nvme), where a served suite part (S4.7, `studies::served`) put the
    /// directory on the client's ext4 over /dev/nbdN; written only when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

/// The sizes of a set's files, written `4k-64k` (a range) or `4k,16k,64k` (a list); stored in
/// bytes (`4096-65536`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileSizes {
    Range(u64, u64),
    List(Vec<u64>),
}

word_enum! {
    /// The order a file set is visited in: `seq` goes through the files by name, pass after
    /// pass; `random` visits every file once per pass in a new shuffled order.
    FileOrder {
        Seq = "seq",
        Random = "random",
    }
}

word_enum! {
    /// When a file-set write flushes: never, each file before its close (fio's
    /// `fsync_on_close`), or once at the end of the measured phase (`syncfs`, fio's `end_fsync`).
    Fsync {
        None = "none",
        Each = "each",
        End = "end",
    }
}

fn fig23_sizes() -> FileSizes {
    FileSizes::Range(4096, 65536)
}

fn seq() -> FileOrder {
    FileOrder::Seq
}

fn no_fsync() -> Fsync {
    Fsync::None
}

impl std::str::FromStr for FileSizes {
    type Err = PlanError;
    fn from_str(text: &str) -> Result<FileSizes, PlanError> {
        let t = text.trim();
        let bad =
            |e: PlanError| PlanError::Value(format!("--file-size '{text}': {e}: use a range such as 4k-64k or a list such as 4k,16k,64k"));
        if let Some((a, b)) = t.split_once('-') {
            let (a, b) = (parse_size(a.trim()).map_err(bad)?, parse_size(b.trim()).map_err(bad)?);
            return Ok(FileSizes::Range(a, b));
        }
        let list = t.split(',').map(|s| parse_size(s.trim()).map_err(bad)).collect::<Result<Vec<u64>, _>>()?;
        Ok(FileSizes::List(list))
    }
}

impl std::fmt::Display for FileSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            FileSizes::Range(a, b) => write!(f, "{a}-{b}"),
            FileSizes::List(l) => f.write_str(&l.iter().map(u64::to_string).collect::<Vec<_>>().join(",")),
        }
    }
}

impl Serialize for FileSizes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FileSizes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<FileSizes, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

impl FileSizes {
    fn each(&self) -> Vec<u64> {
        match self {
            FileSizes::Range(a, b) => vec![*a, *b],
            FileSizes::List(l) => l.clone(),
        }
    }

    /// The largest size a file may be drawn at.
    pub fn max(&self) -> u64 {
        self.each().into_iter().max().unwrap_or(0)
    }

    /// The sizes as the user wrote them, in units (`4 KiB-64 KiB`).
    pub fn describe(&self) -> String {
        match self {
            FileSizes::Range(a, b) => format!("{}-{}", format_bytes(*a as f64), format_bytes(*b as f64)),
            FileSizes::List(l) => l.iter().map(|s| format_bytes(*s as f64)).collect::<Vec<_>>().join(","),
        }
    }
}

/// A `server` value: one of `iolab serve`'s back ends; Err names them.
pub(crate) fn server_word(v: &str) -> Result<(), PlanError> {
    if crate::interfaces::SERVED.iter().any(|k| k.name() == v) {
        return Ok(());
    }
    let names: Vec<&str> = crate::interfaces::SERVED.iter().map(|k| k.name()).collect();
    PlanError::job(format!("server = \"{v}\": a file set is served through {}", names.join(", ")))
}

impl FileSet {
    /// The checks on a job with a file set, before anything is touched: one line each.
    pub(crate) fn check(&self, job: &Job) -> Result<(), PlanError> {
        let bs = job.workload.bs;
        if self.files == 0 || self.files > MAX_FILES {
            return PlanError::job(format!("--fileset {} is out of range: use 1 to {MAX_FILES} files", self.files));
        }
        let sizes = self.file_size.each();
        if sizes.is_empty() {
            return PlanError::job("--file-size names no size: use a range such as 4k-64k or a list such as 4k,16k,64k");
        }
        for s in &sizes {
            if *s == 0 || *s > MAX_FILE_SIZE || !s.is_multiple_of(bs) {
                return PlanError::job(format!(
                    "--file-size {}: every size must be a whole number of --bs {} blocks, from {} to {} (each file is transferred whole in I/Os of --bs)",
                    self.file_size.describe(),
                    format_bytes(bs as f64),
                    format_bytes(bs as f64),
                    format_bytes(MAX_FILE_SIZE as f64)
                ));
            }
        }
        if let FileSizes::Range(a, b) = self.file_size {
            if a > b {
                return PlanError::job(format!("--file-size {}: the range runs backwards", self.file_size.describe()));
            }
        }
        if !matches!(job.workload.rw, Rw::Read | Rw::Write) {
            return PlanError::job(format!(
                "--rw {} with --fileset: a file set is read or written whole (--rw read or write); its order is --file-order seq or random",
                job.workload.rw.name()
            ));
        }
        if self.fsync != Fsync::None && job.workload.rw == Rw::Read {
            return PlanError::job(format!("--fsync {} applies to writes: drop it, or use --rw write", self.fsync.name()));
        }
        if job.workload.threads != 1 {
            return PlanError::job(format!("--threads {} with --fileset: the file set is visited by one thread", job.workload.threads));
        }
        if job.timing.ramp_s != 0.0 {
            return PlanError::job(
                "--ramp with --fileset: the set's creation is measured apart, and the measured phase starts at the first file; drop --ramp",
            );
        }
        if job.policy.verify {
            return PlanError::job("--verify is not taken with --fileset: drop it");
        }
        if job.targets.paths.len() != 1 {
            return PlanError::job("--fileset needs one target: the directory to make the set in");
        }
        if job.system.scheduler.is_some() || !job.system.set.is_empty() {
            return PlanError::job(
                "--scheduler and --set are not taken with --fileset (the set's run changes no system setting): drop them",
            );
        }
        if job.targets.size.is_some() || job.targets.offset != 0 {
            return PlanError::job("--size and --offset are not taken with --fileset: --fileset and --file-size give the set's size");
        }
        let info = job.io.interface.info();
        if info.diskless || !info.targets.contains(&crate::device::TargetKind::File) {
            return PlanError::job(format!("-i {} does not do I/O on files, so it cannot run a file set", info.name));
        }
        if let Some(server) = &self.server {
            server_word(server)?;
        }
        if job.io.interface == crate::interfaces::InterfaceKind::IoUring && job.io.options.ring.register_files {
            return PlanError::job(
                "-i io_uring with --fileset needs --register-files false: a registered file is bound when the ring is set up, and each file of the set is opened anew",
            );
        }
        Ok(())
    }

    /// The files' sizes, drawn from the job's seed: a range uniformly in steps of `bs` (fio's
    /// `filesize=4k-64k` with `bs=4k`), a list each entry with equal chance.
    pub(crate) fn sizes(&self, bs: u64, seed: u64) -> Vec<u64> {
        let mut rng = Rng::new(seed ^ 0x6669_6c65_7365_7421);
        (0..self.files)
            .map(|_| match &self.file_size {
                FileSizes::Range(a, b) => a + rng.below((b - a) / bs + 1) * bs,
                FileSizes::List(l) => l[rng.below(l.len() as u64) as usize],
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_write_and_draw_in_steps_of_the_block_size() {
        let r: FileSizes = "4k-64k".parse().unwrap();
        assert_eq!(r, FileSizes::Range(4096, 65536));
        assert_eq!(r.to_string(), "4096-65536");
        assert_eq!("4096-65536".parse::<FileSizes>().unwrap(), r);
        assert_eq!("4k,16k".parse::<FileSizes>().unwrap(), FileSizes::List(vec![4096, 16384]));
        assert!("4q-8k".parse::<FileSizes>().is_err());
        let set = FileSet { files: 1000, file_size: r, file_order: FileOrder::Seq, fsync: Fsync::None, server: None };
        let s = set.sizes(4096, 7);
        assert_eq!(s, set.sizes(4096, 7), "the same seed draws the same sizes");
        assert!(s.iter().all(|x| (4096..=65536).contains(x) && x % 4096 == 0));
        assert!(s.contains(&4096) && s.contains(&65536), "both ends are drawn");
        assert_ne!(s, set.sizes(4096, 8));
    }

    #[test]
    fn a_job_with_a_set_is_checked_in_one_line() {
        let mut job = Job::default();
        job.workload.rw = Rw::Read;
        job.targets.paths = vec!["/tmp".into()];
        let set = |files, size: &str| FileSet {
            files,
            file_size: size.parse().unwrap(),
            file_order: FileOrder::Seq,
            fsync: Fsync::None,
            server: None,
        };
        set(10, "4k-64k").check(&job).unwrap();
        for (s, says) in [
            (set(0, "4k"), "out of range"),
            (set(MAX_FILES + 1, "4k"), "out of range"),
            (set(1, "0"), "whole number"),
            (set(1, "6k"), "whole number"),
            (set(1, "2g"), "whole number"),
            (set(1, "64k-4k"), "backwards"),
        ] {
            let e = s.check(&job).unwrap_err().to_string();
            assert!(e.contains(says) && !e.contains('\n'), "{e}");
        }
        job.workload.rw = Rw::Randread;
        assert!(set(1, "4k").check(&job).unwrap_err().to_string().contains("--file-order"));
    }
}
