//! An interface's target part: what it acquires for a run, how it describes it, what the engine
//! gets of it and how it gives it back. Like fio's `open_file`/`close_file`/`get_file_size` in
//! `ioengine_ops` and xNVMe's device part (`xnvme_be_dev`: enumerate, open, close) kept apart
//! from its I/O parts.
//!
//! Most interfaces open files and block devices through `device` ([`Files`]); null's target is
//! an address space (`null::AddressSpace`); the user-space driver takes its controller from the
//! kernel and gives it back (`vfio_nvme::take::Taken`). Acquiring is per run, never per I/O.
use super::{IoChoice, Path};
use crate::device::{self, sysinfo::TargetInfo};
use crate::failure::Failure;
use std::os::fd::RawFd;
use std::path::PathBuf;

/// One target as the engine sees it: a descriptor (-1 where there is none) and the byte range
/// the run uses.
#[derive(Clone, Copy, Debug)]
pub struct OpenTarget {
    pub fd: RawFd,
    pub range_start: u64,
    pub range_len: u64,
}

/// What a target part is asked for: the job's targets and how the run will use them (no job:
/// interfaces sit below `plan`).
pub struct TargetRequest<'a> {
    pub io: &'a IoChoice,
    /// How the run uses its targets (the job's `Targets`, writes, O_DIRECT, block size, threads).
    pub access: device::Access<'a>,
    /// The files to open: the job's, or the temporary target made for it.
    pub paths: &'a [PathBuf],
    /// `paths` is the temporary target iolab made.
    pub temporary: bool,
    /// Requests in flight per thread.
    pub qd: u32,
}

/// The completion path a target itself shows (not the meters' device interrupt lines): the
/// user-space driver's controller vectors.
#[derive(Clone, Debug)]
pub struct Observation {
    pub path: Path,
    /// What shows it; the session adds ", for N I/Os".
    pub evidence: String,
}

/// How an interface's target part is acquired, once per run before the threads start, and
/// what each thread's `IoInterface::open` gets of it.
pub trait Acquire: TargetPart + Sized {
    /// What each thread's open is given of it besides the descriptors.
    type Handle: Sync;
    /// Opens, takes or makes the run's targets (fio's `open_file` and `get_file_size`); Err
    /// with nothing left changed.
    fn acquire(req: &TargetRequest) -> Result<Self, Failure>;
    fn handle(&self) -> &Self::Handle;
}

/// An interface's acquired target part. Dropping it releases it too (an error return, Ctrl-C);
/// `release` says how that went.
pub trait TargetPart: Send + Sync {
    /// The files and block devices opened, for the checks made on open targets.
    fn files(&self) -> &[device::Target] {
        &[]
    }
    /// What the record says of each target, as acquired.
    fn describe(&self) -> Vec<TargetInfo>;
    /// The same, described again after system settings were changed for the run.
    fn describe_again(&self) -> Vec<TargetInfo> {
        self.describe()
    }
    /// The targets as the engine sees them, in the order `describe` gives.
    fn open_targets(&self) -> Vec<OpenTarget>;
    /// What acquiring changed on the machine, as lines for the user.
    fn changes(&self) -> Vec<String> {
        Vec::new()
    }
    /// The record's description of a user-space driver that had the target.
    fn user_space_driver(&self) -> Option<super::vfio_nvme::env::DriverEnv> {
        None
    }
    /// The completion path the target itself observed, where it can tell (before `release`).
    fn observed(&self) -> Option<Observation> {
        None
    }
    /// Gives the targets back (fio's `close_file`): Err says why they are not as they were.
    fn release(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// The default target part: files and block devices opened through `device`.
pub struct Files(Vec<device::Target>);

impl Acquire for Files {
    type Handle = ();

    fn acquire(req: &TargetRequest) -> Result<Files, Failure> {
        Ok(Files(device::open_targets(&req.access, req.paths, req.temporary)?))
    }

    fn handle(&self) -> &() {
        &()
    }
}

impl TargetPart for Files {
    fn files(&self) -> &[device::Target] {
        &self.0
    }

    fn describe(&self) -> Vec<TargetInfo> {
        self.0.iter().map(|t| t.info.clone()).collect()
    }

    fn describe_again(&self) -> Vec<TargetInfo> {
        self.0
            .iter()
            .map(|t| device::sysinfo::describe(&t.path, &std::fs::metadata(&t.path).expect("open target")).with_size(t.info.size_bytes))
            .collect()
    }

    fn open_targets(&self) -> Vec<OpenTarget> {
        self.0
            .iter()
            .map(|t| OpenTarget { fd: std::os::fd::AsRawFd::as_raw_fd(&t.file), range_start: t.range_start, range_len: t.range_len })
            .collect()
    }
}
