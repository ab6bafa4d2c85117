//! What a target is: kind, size, the block device behind it and its queue settings, read from
//! sysfs. Anything unreadable stays None rather than guessed.
use serde::Serialize;
use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, Default, Serialize)]
pub struct TargetInfo {
    pub path: String,
    /// "file", "block", or "nvme-generic" (an NVMe generic character device, /dev/ngXnY,
    /// described through its namespace's block device).
    pub kind: String,
    pub size_bytes: u64,
    /// The whole disk holding the data (e.g. nvme0n1, vda, loop0); None on virtual filesystems.
    pub device: Option<String>,
    /// The partition, when the target is (or lives on) one.
    pub partition: Option<String>,
    /// Filesystem type, for file targets.
    pub filesystem: Option<String>,
    pub model: Option<String>,
    pub vendor: Option<String>,
    pub firmware: Option<String>,
    pub scheduler: Option<String>,
    pub schedulers_available: Vec<String>,
    pub io_poll: Option<bool>,
    pub io_poll_delay: Option<i64>,
    pub nr_requests: Option<u64>,
    pub logical_block_size: u64,
    pub physical_block_size: Option<u64>,
    pub rotational: Option<bool>,
    /// For loop devices: the file behind it.
    pub loop_backing_file: Option<String>,
    /// Direct-I/O alignment the kernel reports for this file (statx STATX_DIOALIGN).
    pub dio_offset_align: Option<u64>,
    pub dio_mem_align: Option<u64>,
    /// The NUMA node the device hangs off (`host::device_numa_node`); None where sysfs gives
    /// none (one node, a virtual device).
    pub numa_node: Option<u32>,
    /// Opened with O_NOATIME: the run's reads left the file's access time alone. False where the
    /// kernel refused it (not the file's owner) and every read may update it, as an
    /// application's would.
    pub noatime: bool,
}

fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The sysfs directory of the device number: (whole disk dir, partition name if any).
pub(crate) fn sysfs_disk_for(major: u32, minor: u32) -> Option<(PathBuf, Option<String>)> {
    let node = std::fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    if node.join("partition").exists() {
        let part = node.file_name()?.to_string_lossy().into_owned();
        Some((node.parent()?.to_path_buf(), Some(part)))
    } else {
        Some((node, None))
    }
}

fn filesystem_of(major: u32, minor: u32) -> Option<String> {
    let want = format!("{major}:{minor}");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        if f.get(2) != Some(&want.as_str()) {
            return None;
        }
        let sep = f.iter().position(|x| *x == "-")?;
        f.get(sep + 1).map(|s| s.to_string())
    })
}

fn dio_align(path: &Path) -> (Option<u64>, Option<u64>) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return (None, None) };
    // SAFETY: stx is a valid out-pointer; c is NUL-terminated.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), 0, libc::STATX_DIOALIGN, &mut stx) };
    if rc != 0 || stx.stx_mask & libc::STATX_DIOALIGN == 0 || stx.stx_dio_offset_align == 0 {
        return (None, None);
    }
    (Some(stx.stx_dio_offset_align as u64), Some(stx.stx_dio_mem_align as u64))
}

impl TargetInfo {
    pub(crate) fn with_size(mut self, size: u64) -> TargetInfo {
        self.size_bytes = size;
        self
    }
}

pub fn describe(path: &Path, meta: &Metadata) -> TargetInfo {
    if meta.file_type().is_char_device() && crate::device::nvme::is_generic(path) {
        return describe_generic(path);
    }
    let block = meta.file_type().is_block_device();
    let dev = if block { meta.rdev() } else { meta.dev() };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let mut info = TargetInfo {
        path: path.display().to_string(),
        kind: if block { "block" } else { "file" }.into(),
        size_bytes: meta.len(),
        logical_block_size: 512,
        ..Default::default()
    };
    if !block {
        info.filesystem = filesystem_of(major, minor);
    }
    (info.dio_offset_align, info.dio_mem_align) = dio_align(path);
    if let Some((disk, part)) = sysfs_disk_for(major, minor) {
        let q = disk.join("queue");
        info.device = disk.file_name().map(|n| n.to_string_lossy().into_owned());
        info.partition = part;
        info.model = read_trim(disk.join("device/model")).or_else(|| read_trim(disk.join("device/device/model")));
        info.vendor = read_trim(disk.join("device/vendor"));
        info.firmware = read_trim(disk.join("device/firmware_rev")).or_else(|| read_trim(disk.join("device/rev")));
        if let Some(s) = read_trim(q.join("scheduler")) {
            info.schedulers_available = s.split_whitespace().map(|x| x.trim_matches(|c| c == '[' || c == ']').to_string()).collect();
            info.scheduler =
                s.split_whitespace().find(|x| x.starts_with('[')).map(|x| x.trim_matches(|c| c == '[' || c == ']').to_string());
        }
        info.io_poll = read_trim(q.join("io_poll")).map(|v| v == "1");
        info.io_poll_delay = read_trim(q.join("io_poll_delay")).and_then(|v| v.parse().ok());
        info.nr_requests = read_trim(q.join("nr_requests")).and_then(|v| v.parse().ok());
        info.logical_block_size = read_trim(q.join("logical_block_size")).and_then(|v| v.parse().ok()).unwrap_or(512);
        info.physical_block_size = read_trim(q.join("physical_block_size")).and_then(|v| v.parse().ok());
        info.rotational = read_trim(q.join("rotational")).map(|v| v == "1");
        info.loop_backing_file = read_trim(disk.join("loop/backing_file"));
        info.numa_node = info.device.as_deref().and_then(crate::host::device_numa_node);
    }
    info
}

/// An NVMe generic character device: what its namespace's block device says (the same queue,
/// controller and blocks), under the generic device's path and kind. Size and logical block size
/// come from the namespace's Identify data when the target is opened.
fn describe_generic(path: &Path) -> TargetInfo {
    let block = crate::device::nvme::block_device_of(path).ok();
    let mut info = match block.as_deref().and_then(|b| std::fs::metadata(b).ok().map(|m| (b, m))) {
        Some((b, m)) => describe(b, &m),
        None => TargetInfo { logical_block_size: 512, ..Default::default() },
    };
    info.path = path.display().to_string();
    info.kind = "nvme-generic".into();
    info.size_bytes = 0;
    (info.dio_offset_align, info.dio_mem_align) = (None, None);
    info
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn describes_a_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, vec![0u8; 8192]).unwrap();
        let info = describe(&p, &std::fs::metadata(&p).unwrap());
        assert_eq!(info.kind, "file");
        assert_eq!(info.size_bytes, 8192);
        assert!(info.logical_block_size >= 512);
    }
}
