//! Targets: files, block devices and (for nvme-passthru) NVMe generic character devices, opened
//! safely, plus the temporary default target.
pub mod controller;
pub mod error;
pub mod nvme;
pub mod safety;
pub mod sysfs;
pub mod sysinfo;

use crate::verify;
pub use error::DeviceError;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use sysinfo::TargetInfo;

pub const DEFAULT_TARGET_SIZE: u64 = 1 << 30;

/// The kinds of target an interface can drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TargetKind {
    File,
    BlockDevice,
    /// An NVMe namespace's generic character device, /dev/ngXnY.
    NvmeGeneric,
    /// A namespace on an NVMe controller on the PCI bus, driven by iolab itself
    /// (`controller.rs`).
    NvmePci,
}

impl std::fmt::Display for TargetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(match self {
            TargetKind::File => "files",
            TargetKind::BlockDevice => "block devices",
            TargetKind::NvmeGeneric => "NVMe generic character devices (/dev/ngXnY)",
            TargetKind::NvmePci => "NVMe namespaces of PCI controllers (/dev/nvmeXnY or PCI-ADDR/NSID)",
        })
    }
}

/// How a run will use its targets: what opening them must allow, and check.
pub struct Access<'a> {
    pub targets: &'a Targets,
    pub writes: bool,
    /// O_DIRECT.
    pub direct: bool,
    pub bs: u64,
    /// Random offsets' alignment where it is not the block size's (fio's blockalign); 0: none.
    pub blockalign: u64,
    pub threads: u32,
    /// The interface that will drive them, and the kinds of target it takes.
    pub interface: &'a str,
    pub accepts: &'a [TargetKind],
    /// The interfaces that drive NVMe generic devices, named when another is given one.
    pub generic_drivers: &'a [&'a str],
}

/// Where a job's I/O goes: its targets (none: a temporary file), the range of each it uses, and
/// the devices the user named as safe to overwrite. Part of a job, serialised flat.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Targets {
    /// Files or devices, as given.
    #[serde(rename = "targets")]
    pub paths: Vec<String>,
    /// Bytes of each target to use, from `offset`; None = to the end.
    pub size: Option<u64>,
    pub offset: u64,
    /// Devices the user named as safe to overwrite.
    pub destructive: Vec<String>,
}

/// An opened target, kept open (and, for the default one, kept on disk) for the run.
pub struct Target {
    pub path: PathBuf,
    pub file: File,
    pub info: TargetInfo,
    pub range_start: u64,
    pub range_len: u64,
    /// The NVMe namespace behind a generic character device, identified when it was opened.
    pub namespace: Option<nvme::Namespace>,
}

/// The default target: a file in a private temporary directory, removed on drop.
pub struct TempTarget {
    _dir: tempfile::TempDir,
    pub path: PathBuf,
}

/// Create and fill the default target so reads hit allocated blocks. The data is in
/// `--verify` format, so verified reads work on it too.
/// Filling stops early, and the file is removed, once `cancel` is set (Ctrl-C): a 1 GiB fill
/// takes seconds, and the handler that sets it is installed before.
pub(crate) fn create_default_target(size: u64, cancel: crate::cancel::Cancel) -> Result<TempTarget, DeviceError> {
    let dir = tempfile::Builder::new().prefix("iolab-").tempdir().map_err(|e| {
        DeviceError::Io(format!("cannot create a temporary directory for the default target: {e} (set TMPDIR to a writable directory)"))
    })?;
    let path = dir.path().join("target.dat");
    let mut f = File::create(&path).map_err(|e| DeviceError::Io(format!("cannot create {}: {e}", path.display())))?;
    let chunk = 1 << 20;
    let mut buf = vec![0u8; chunk];
    let mut off = 0u64;
    while off < size {
        if cancel.is_cancelled() {
            return Err(DeviceError::Io(format!("interrupted while filling the temporary target (removed {})", path.display())));
        }
        let n = chunk.min((size - off) as usize);
        verify::fill(&mut buf[..n], off, 0x5eed);
        f.write_all(&buf[..n]).map_err(|e| {
            DeviceError::Io(format!("cannot fill the default target {}: {e} (is the disk full? set TMPDIR elsewhere)", path.display()))
        })?;
        off += n as u64;
    }
    f.sync_all().map_err(|e| DeviceError::Io(format!("cannot sync {}: {e}", path.display())))?;
    Ok(TempTarget { _dir: dir, path })
}

/// Open every target of the job, checking existence, kind, safety and the usable range.
/// Refusals are bad input unless the device or file system cannot do what the job asks
/// (O_DIRECT, its block size, an NVMe command's limits): those are unsupported here.
pub(crate) fn open_targets(a: &Access, paths: &[PathBuf], temp: bool) -> Result<Vec<Target>, DeviceError> {
    let (writes, accepts) = (a.writes, a.accepts);
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => DeviceError::Refused(format!(
                "target {shown} does not exist: give an existing file or block device, or no target for a temporary 1 GiB file"
            )),
            _ => DeviceError::Refused(format!("cannot read target {shown}: {e}")),
        })?;
        let ft = meta.file_type();
        let generic = ft.is_char_device() && nvme::is_generic(path);
        if !accepts.contains(&TargetKind::NvmeGeneric) && generic {
            let block = nvme::block_device_of(path).map(|b| format!(" ({})", b.display())).unwrap_or_default();
            let drivers = a.generic_drivers.join(" or -i ");
            return Err(DeviceError::Refused(format!("target {shown} is an NVMe generic character device, which only -i {drivers} drives: use -i {drivers}, or the namespace's block device{block}")));
        }
        if accepts == [TargetKind::NvmeGeneric] && !generic {
            let what = if ft.is_block_device() {
                match nvme::generic_device_of_block(path) {
                    Some(g) => format!("a block device (its namespace's generic device is {})", g.display()),
                    None => "a block device".into(),
                }
            } else if ft.is_file() {
                "a regular file".into()
            } else if ft.is_char_device() {
                "another kind of character device".into()
            } else {
                "neither a file nor a device".into()
            };
            return Err(DeviceError::Refused(format!(
                "{} needs the NVMe generic character device, e.g. /dev/ng0n1: {shown} is {what}",
                a.interface
            )));
        }
        if !(ft.is_file() || ft.is_block_device() || generic) {
            return Err(DeviceError::Refused(format!("target {shown} is neither a regular file nor a block device")));
        }
        if !temp {
            check_safe_as(path, &meta, writes, &a.targets.destructive)?;
        }
        let info = sysinfo::describe(path, &meta);
        // The generic device has no page cache to bypass (and refuses O_DIRECT).
        let direct = if a.direct && !generic { libc::O_DIRECT } else { 0 };
        let open = |flags: i32| std::fs::OpenOptions::new().read(true).write(writes).custom_flags(flags).open(path);
        // O_NOATIME, as t/io_uring opens its files and fio its devices: a read does not update
        // the file's access time (file-system metadata, not the I/O path). Only the file's owner
        // (or CAP_FOWNER) may ask it; anyone else opens without it, and the record says which.
        let (file, noatime) = match open(direct | libc::O_NOATIME) {
            Ok(f) => (Ok(f), true),
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => (open(direct), false),
            Err(e) => (Err(e), true),
        };
        let file = file.map_err(|e| {
            let mode = if writes { "reading and writing" } else { "reading" };
            if e.raw_os_error() == Some(libc::EINVAL) && a.direct {
                DeviceError::Unsupported(format!(
                    "cannot open {shown} with O_DIRECT: the filesystem does not support direct I/O (use --buffered)"
                ))
            } else {
                DeviceError::Refused(format!("cannot open {shown} for {mode}: {e}"))
            }
        })?;
        let ns = if generic {
            Some(
                nvme::Namespace::of_fd(file.as_raw_fd())
                    .map_err(|e| e.context(|m| format!("cannot identify the namespace of {shown}: {m}")))?,
            )
        } else {
            None
        };
        let size = match &ns {
            Some(ns) => ns.id.size_bytes(),
            None if ft.is_block_device() => {
                block_device_size(&file).map_err(|e| DeviceError::Io(format!("cannot read the size of {shown}: {e}")))?
            }
            None => meta.len(),
        };
        let mut info = info;
        info.noatime = noatime;
        if let Some(ns) = &ns {
            info.logical_block_size = ns.id.lba_size as u64;
        }
        let align = if a.direct && ns.is_none() { info.logical_block_size.max(info.dio_offset_align.unwrap_or(0)) } else { 1 };
        if a.direct && !a.bs.is_multiple_of(align) {
            return Err(DeviceError::Unsupported(format!("block size {} is not a multiple of {shown}'s logical block size {align} required by O_DIRECT: use a multiple of {align}, or --buffered", a.bs)));
        }
        if a.direct && a.blockalign > 0 && !a.blockalign.is_multiple_of(align) {
            return Err(DeviceError::Refused(format!(
                "--blockalign {} is below {shown}'s logical block size {align}, which O_DIRECT offsets must be multiples of: use a multiple of {align}, or --buffered",
                a.blockalign
            )));
        }
        if a.direct && !a.targets.offset.is_multiple_of(align) {
            return Err(DeviceError::Refused(format!(
                "--offset {} is not a multiple of {shown}'s logical block size {align}",
                a.targets.offset
            )));
        }
        let len = usable_range(&shown.to_string(), size, a)?;
        info.size_bytes = size;
        out.push(Target { path: path.clone(), file, info, range_start: a.targets.offset, range_len: len, namespace: ns });
    }
    Ok(out)
}

/// The write-safety rules for one target, as opening it for a run applies them: a file never on
/// a pseudo-file system nor written while it backs a loop device in use; a block device (or an
/// NVMe namespace through its generic device) written only when nothing uses it and
/// `--destructive` names it exactly. A sweep checks every target of its plan with this before
/// its first run. Err: one line.
pub(crate) fn check_safe(path: &Path, writes: bool, destructive: &[String]) -> Result<(), DeviceError> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            DeviceError::Refused(format!("target {} does not exist: give an existing file or block device", path.display()))
        }
        _ => DeviceError::Refused(format!("cannot read target {}: {e}", path.display())),
    })?;
    check_safe_as(path, &meta, writes, destructive)
}

fn check_safe_as(path: &Path, meta: &std::fs::Metadata, writes: bool, destructive: &[String]) -> Result<(), DeviceError> {
    let ft = meta.file_type();
    if ft.is_file() {
        return safety::check_file_target(path, writes);
    }
    if writes && ft.is_block_device() {
        return safety::check_block_write(path, destructive);
    }
    if writes && ft.is_char_device() && nvme::is_generic(path) {
        // The same rules as for the namespace's block device, which names the same blocks.
        let block = nvme::block_device_of(path).map_err(|e| {
            DeviceError::Refused(format!(
                "refusing to write to {}: {e}, so iolab cannot check that the namespace is unused",
                path.display()
            ))
        })?;
        return safety::check_passthru_write(path, &block, destructive);
    }
    Ok(())
}

/// The bytes of a target of `size` bytes the run uses (from `--offset`, `--size` of them or to
/// the end, whole blocks), or why it cannot.
pub(crate) fn usable_range(shown: &str, size: u64, a: &Access) -> Result<u64, DeviceError> {
    if a.targets.offset >= size {
        return Err(DeviceError::Refused(format!("--offset {} is beyond the end of {shown} ({} bytes)", a.targets.offset, size)));
    }
    let avail = size - a.targets.offset;
    let len = match a.targets.size {
        Some(s) if s > avail => {
            return Err(DeviceError::Refused(format!(
                "--offset + --size ({} bytes) exceed {shown}'s {} bytes: use a smaller --size",
                a.targets.offset + s,
                size
            )))
        }
        Some(s) => s,
        None => avail,
    };
    let len = len / a.bs * a.bs;
    if len < a.bs * a.threads as u64 {
        return Err(DeviceError::Refused(format!(
            "{shown} has only {len} usable bytes, fewer than one {}-byte block per thread: use a larger target or --size",
            a.bs
        )));
    }
    Ok(len)
}

fn block_device_size(f: &File) -> std::io::Result<u64> {
    const BLKGETSIZE64: libc::c_ulong = 0x80081272;
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes a u64.
    if unsafe { libc::ioctl(f.as_raw_fd(), BLKGETSIZE64, &mut size) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(size)
}
