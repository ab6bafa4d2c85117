//! NVMe namespaces as Linux shows them: the NVMe generic character devices (`/dev/ngXnY`) and
//! their block devices found through sysfs, and the NVMe commands iolab builds itself (Read,
//! Write, Identify Namespace) with the ioctls that carry them. Used to open and guard targets,
//! and by the nvme-passthru interface, which sends the same commands through io_uring.
//!
//! The namespace's id comes from `NVME_IOCTL_ID`, its geometry (size, LBA size) from an admin
//! Identify Namespace (`NVME_IOCTL_ADMIN_CMD`). Writes are guarded by the block-device rules
//! applied to the block device of the same namespace (`/dev/nvmeXnY`), found through sysfs.
use super::DeviceError;
use std::io;
use std::os::fd::RawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Results at or below this carry a device status rather than an errno:
/// `result = DEVICE_STATUS - status`.
pub const DEVICE_STATUS: i64 = -(1 << 32);

/// `_IOWR('N', nr, size)`.
const fn iowr(nr: u32, size: u32) -> u32 {
    (3 << 30) | (size << 16) | ((b'N' as u32) << 8) | nr
}

/// `_IO('N', 0x40)`: the namespace id of the device the fd is open on.
pub const NVME_IOCTL_ID: u32 = ((b'N' as u32) << 8) | 0x40;
/// `_IOWR('N', 0x41, struct nvme_passthru_cmd)`: an admin command.
pub const NVME_IOCTL_ADMIN_CMD: u32 = iowr(0x41, 72);
/// `_IOWR('N', 0x43, struct nvme_passthru_cmd)`: a synchronous I/O command (verify read-back).
pub const NVME_IOCTL_IO_CMD: u32 = iowr(0x43, 72);
/// `_IOWR('N', 0x80, struct nvme_uring_cmd)`: the io_uring command for an NVMe I/O command.
pub const NVME_URING_CMD_IO: u32 = iowr(0x80, 72);

pub const OP_WRITE: u8 = 0x01;
pub const OP_READ: u8 = 0x02;
/// NVM command set: Flush (the volatile write cache to non-volatile media; no data) and Dataset
/// Management (a list of ranges in a data buffer, with attributes such as Deallocate).
pub const OP_FLUSH: u8 = 0x00;
pub const OP_DSM: u8 = 0x09;
/// Dataset Management CDW11 bit 2: Attribute - Deallocate (AD).
pub const DSM_DEALLOCATE: u32 = 1 << 2;
/// Ranges one Dataset Management command carries at most (CDW10 NR is zero-based, 8 bits).
pub const DSM_MAX_RANGES: usize = 256;
pub const ADMIN_IDENTIFY: u8 = 0x06;
/// Identify CNS 0: the Identify Namespace data structure.
const CNS_NAMESPACE: u32 = 0;

/// `struct nvme_uring_cmd` (include/uapi/linux/nvme_ioctl.h), which has the layout of
/// `struct nvme_passthru_cmd` used by the ioctls, whose last field is `result` instead of
/// `rsvd2`. 72 bytes; the io_uring command area is 80.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NvmeCmd {
    pub opcode: u8,
    pub flags: u8,
    pub rsvd1: u16,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    pub metadata: u64,
    pub addr: u64,
    pub metadata_len: u32,
    pub data_len: u32,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
    pub timeout_ms: u32,
    /// `rsvd2` for io_uring; for the ioctls, dword 0 of the completion (`result`).
    pub rsvd2: u32,
}
const _: () = assert!(std::mem::size_of::<NvmeCmd>() == 72);

impl NvmeCmd {
    /// An NVMe Read or Write of `len` bytes at byte `offset` of namespace `nsid` into/from `addr`:
    /// cdw10/11 the starting LBA (low/high), cdw12 bits 0-15 the number of blocks minus one.
    /// `offset` and `len` must be multiples of the LBA size (checked when the target is opened).
    pub fn rw(write: bool, nsid: u32, lba_shift: u32, offset: u64, len: u32, addr: u64) -> NvmeCmd {
        let slba = offset >> lba_shift;
        let nlb = (len >> lba_shift).saturating_sub(1);
        NvmeCmd {
            opcode: if write { OP_WRITE } else { OP_READ },
            nsid,
            addr,
            data_len: len,
            cdw10: slba as u32,
            cdw11: (slba >> 32) as u32,
            cdw12: nlb & 0xffff,
            ..Default::default()
        }
    }

    /// Admin Identify (CNS 0) of namespace `nsid` into the 4096-byte buffer at `addr`.
    pub(crate) fn identify_namespace(nsid: u32, addr: u64) -> NvmeCmd {
        NvmeCmd { opcode: ADMIN_IDENTIFY, nsid, addr, data_len: 4096, cdw10: CNS_NAMESPACE, ..Default::default() }
    }

    /// The 80-byte io_uring command area: the struct in the CPU's byte order (the kernel reads it
    /// as a `struct nvme_uring_cmd`), then 8 zero bytes.
    pub(crate) fn to_bytes(self) -> [u8; 80] {
        let mut b = [0u8; 80];
        b[0] = self.opcode;
        b[1] = self.flags;
        b[2..4].copy_from_slice(&self.rsvd1.to_ne_bytes());
        let words32 = [
            (4, self.nsid),
            (8, self.cdw2),
            (12, self.cdw3),
            (32, self.metadata_len),
            (36, self.data_len),
            (40, self.cdw10),
            (44, self.cdw11),
            (48, self.cdw12),
            (52, self.cdw13),
            (56, self.cdw14),
            (60, self.cdw15),
            (64, self.timeout_ms),
            (68, self.rsvd2),
        ];
        for (at, v) in words32 {
            b[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        }
        b[16..24].copy_from_slice(&self.metadata.to_ne_bytes());
        b[24..32].copy_from_slice(&self.addr.to_ne_bytes());
        b
    }
}

// ------------------------------------------------------------------ queue entries

/// Admin opcodes the user-space driver (`interfaces::vfio_nvme`) sends on the admin queue.
pub const ADMIN_DELETE_IO_SQ: u8 = 0x00;
pub const ADMIN_CREATE_IO_SQ: u8 = 0x01;
pub const ADMIN_DELETE_IO_CQ: u8 = 0x04;
pub const ADMIN_CREATE_IO_CQ: u8 = 0x05;
pub const ADMIN_SET_FEATURES: u8 = 0x09;
/// Identify CNS 1: the Identify Controller data structure (MDTS at byte 77).
pub const CNS_CONTROLLER: u32 = 1;
/// Set Features: Number of Queues (dword 11 and the completion's dword 0: NSQR/NSQA bits 0-15,
/// NCQR/NCQA bits 16-31, both zero-based).
pub const FEATURE_NUMBER_OF_QUEUES: u32 = 0x07;
/// Status codes (SCT 0) a controller returns and the simulated one scripts.
pub const SC_INVALID_OPCODE: u16 = 0x01;
pub const SC_INVALID_FIELD: u16 = 0x02;
pub const SC_DATA_TRANSFER_ERROR: u16 = 0x04;
pub const SC_LBA_OUT_OF_RANGE: u16 = 0x80;
/// SCT 1 (command specific) for Create I/O queue commands.
pub const SC_INVALID_QUEUE_ID: u16 = 0x101;
pub const SC_INVALID_QUEUE_SIZE: u16 = 0x102;

/// A submission queue entry as the NVMe base specification lays it out (64 bytes,
/// little-endian): CDW0 (opcode bits 0-7, FUSE 8-9, PSDT 14-15 = 0 for PRPs, command id 16-31),
/// NSID, CDW2-3, MPTR, PRP1 (DPTR bytes 24-31), PRP2 (32-39), CDW10-15. Unlike [`NvmeCmd`], the
/// kernel's passthrough struct, this is what a controller fetches from memory.
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sqe {
    pub cdw0: u32,
    pub nsid: u32,
    pub cdw2: u32,
    pub cdw3: u32,
    pub mptr: u64,
    pub prp1: u64,
    pub prp2: u64,
    pub cdw10: u32,
    pub cdw11: u32,
    pub cdw12: u32,
    pub cdw13: u32,
    pub cdw14: u32,
    pub cdw15: u32,
}
const _: () = assert!(std::mem::size_of::<Sqe>() == 64);

impl Sqe {
    /// A command with opcode `op` and command id `cid`, everything else zero.
    pub fn new(op: u8, cid: u16) -> Sqe {
        Sqe { cdw0: op as u32 | (cid as u32) << 16, ..Default::default() }
    }

    /// Read or Write of `len` bytes at byte `offset` of namespace `nsid` with data pointers
    /// `prp1`/`prp2`; the LBA fields as [`NvmeCmd::rw`] sets them. Little-endian hosts only
    /// (the fields are stored as the CPU's words; `interfaces::vfio_nvme` builds only there).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn rw(write: bool, cid: u16, nsid: u32, lba_shift: u32, offset: u64, len: u32, prp1: u64, prp2: u64) -> Sqe {
        let slba = offset >> lba_shift;
        Sqe {
            cdw0: (if write { OP_WRITE } else { OP_READ }) as u32 | (cid as u32) << 16,
            nsid,
            prp1,
            prp2,
            cdw10: slba as u32,
            cdw11: (slba >> 32) as u32,
            cdw12: ((len >> lba_shift).wrapping_sub(1)) & 0xffff,
            ..Default::default()
        }
    }

    /// Flush of namespace `nsid`: every write completed before it is on non-volatile media.
    pub fn flush(cid: u16, nsid: u32) -> Sqe {
        Sqe { nsid, ..Sqe::new(OP_FLUSH, cid) }
    }

    /// Dataset Management with the Deallocate attribute over `ranges` (1 to 256) [`DsmRange`]s
    /// laid out from IO address `list` (PRP1; 16 bytes each, so 256 fill one page exactly and a
    /// page-aligned list needs no PRP2).
    pub fn deallocate(cid: u16, nsid: u32, ranges: u32, list: u64) -> Sqe {
        debug_assert!((1..=DSM_MAX_RANGES as u32).contains(&ranges));
        Sqe { nsid, prp1: list, cdw10: (ranges - 1) & 0xff, cdw11: DSM_DEALLOCATE, ..Sqe::new(OP_DSM, cid) }
    }

    pub(crate) fn opcode(&self) -> u8 {
        self.cdw0 as u8
    }

    pub(crate) fn cid(&self) -> u16 {
        (self.cdw0 >> 16) as u16
    }
}

/// One range of a Dataset Management command's list (16 bytes, little-endian): context
/// attributes (0: none), the length in logical blocks, the starting LBA.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DsmRange {
    pub cattr: u32,
    pub nlb: u32,
    pub slba: u64,
}
const _: () = assert!(std::mem::size_of::<DsmRange>() == 16);

impl DsmRange {
    /// The ranges covering the whole blocks inside `len` bytes at byte `offset` of a namespace
    /// of `1 << lba_shift`-byte blocks (a partial block at either end is left out: deallocation
    /// is advisory), each at most `u32::MAX` blocks.
    pub fn covering(offset: u64, len: u64, lba_shift: u32) -> Vec<DsmRange> {
        let block = 1u64 << lba_shift;
        let first = offset.div_ceil(block);
        let end = offset.saturating_add(len) >> lba_shift;
        let mut out = Vec::new();
        let mut at = first;
        while at < end {
            let nlb = (end - at).min(u32::MAX as u64);
            out.push(DsmRange { cattr: 0, nlb: nlb as u32, slba: at });
            at += nlb;
        }
        out
    }
}

/// What iolab needs from an Identify Controller data structure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdController {
    /// MDTS (byte 77): the largest transfer is `4 KiB << mdts` (with CAP.MPSMIN 0); 0 no limit.
    pub mdts: u8,
    /// ONCS (bytes 520-521): optional NVM commands supported; bit 2 Dataset Management.
    pub oncs: u16,
    /// VWC (byte 525): bit 0, a volatile write cache is present (Flush does something).
    pub vwc: u8,
}

impl IdController {
    pub fn volatile_write_cache(&self) -> bool {
        self.vwc & 1 != 0
    }

    pub fn dataset_management(&self) -> bool {
        self.oncs & (1 << 2) != 0
    }
}

/// Parse the Identify Controller fields iolab uses.
pub(crate) fn parse_identify_controller(page: &[u8]) -> Result<IdController, DeviceError> {
    if page.len() < 4096 {
        return Err(DeviceError::Io(format!("Identify Controller data is {} bytes, want 4096", page.len())));
    }
    Ok(IdController { mdts: page[77], oncs: u16::from_le_bytes([page[520], page[521]]), vwc: page[525] })
}

/// A completion queue entry (16 bytes): DW0 the command specific result, DW2 the submission
/// queue head (bits 0-15) and id (16-31), DW3 the command id (bits 0-15), the phase tag (bit 16)
/// and the status field (bits 17-31: SC, SCT, CRD, More, DNR).
#[repr(C, align(16))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cqe {
    pub dw0: u32,
    pub dw1: u32,
    pub dw2: u32,
    pub dw3: u32,
}
const _: () = assert!(std::mem::size_of::<Cqe>() == 16);

impl Cqe {
    /// The completion of command `cid` from submission queue `sqid` whose head is now `sq_head`,
    /// with `status` as [`status_text`] takes it (no phase bit) and phase tag `phase`.
    pub fn new(cid: u16, sqid: u16, sq_head: u16, status: u16, phase: bool) -> Cqe {
        Cqe { dw0: 0, dw1: 0, dw2: sq_head as u32 | (sqid as u32) << 16, dw3: cid as u32 | (phase as u32) << 16 | (status as u32) << 17 }
    }

    pub fn phase(&self) -> bool {
        self.dw3 & (1 << 16) != 0
    }

    /// The status field without the phase tag, as [`status_text`] takes it.
    pub fn status(&self) -> u16 {
        (self.dw3 >> 17) as u16
    }

    #[cfg(test)]
    pub(crate) fn cid(&self) -> u16 {
        self.dw3 as u16
    }

    #[cfg(test)]
    pub(crate) fn sq_head(&self) -> u16 {
        self.dw2 as u16
    }
}

/// What iolab needs from an Identify Namespace data structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdNamespace {
    /// Namespace size in logical blocks (NSZE).
    pub nsze: u64,
    /// The LBA format in use (FLBAS bits 0-3, plus bits 5-6 as the high bits past 16 formats).
    pub format: u8,
    pub lba_shift: u32,
    pub lba_size: u32,
    /// Metadata bytes per block in this format, and whether they are interleaved with the data
    /// (an extended LBA, FLBAS bit 4).
    pub metadata_size: u16,
    pub extended: bool,
    /// DLFEAT (byte 33): bits 0-2 what a deallocated block reads as (1: zeroes, 2: all ones,
    /// 0: not reported).
    pub dlfeat: u8,
}

impl IdNamespace {
    pub fn size_bytes(&self) -> u64 {
        self.nsze << self.lba_shift
    }

    /// A deallocated block reads as zeroes (DLFEAT bits 0-2 = 001b).
    pub fn deallocated_reads_zeroes(&self) -> bool {
        self.dlfeat & 0x7 == 1
    }
}

/// Parse an Identify Namespace page: NSZE at bytes 0-7, NLBAF at 25 (zero-based count),
/// FLBAS at 26, DLFEAT at 33, LBA format `i` at 128 + 4i (MS bits 0-15, LBADS bits 16-23, a power of two).
pub(crate) fn parse_identify_namespace(page: &[u8]) -> Result<IdNamespace, DeviceError> {
    if page.len() < 4096 {
        return Err(DeviceError::Io(format!("Identify Namespace data is {} bytes, want 4096", page.len())));
    }
    let nsze = u64::from_le_bytes(page[0..8].try_into().unwrap());
    let nlbaf = page[25] as usize;
    let flbas = page[26];
    let format = (flbas & 0x0f) | (((flbas >> 5) & 0x03) << 4);
    if format as usize > nlbaf {
        return Err(DeviceError::Io(format!("the namespace uses LBA format {format} but reports only {} formats", nlbaf + 1)));
    }
    let f = 128 + 4 * format as usize;
    let dword = u32::from_le_bytes(page[f..f + 4].try_into().unwrap());
    let lbads = (dword >> 16) & 0xff;
    if !(9..=16).contains(&lbads) {
        return Err(DeviceError::Io(format!(
            "LBA format {format} has an LBA data size of 2^{lbads} bytes, which iolab does not handle (512 B to 64 KiB)"
        )));
    }
    if nsze == 0 {
        return Err(DeviceError::Io("the namespace reports a size of 0 blocks (inactive namespace?)".into()));
    }
    Ok(IdNamespace {
        nsze,
        format,
        lba_shift: lbads,
        lba_size: 1 << lbads,
        metadata_size: (dword & 0xffff) as u16,
        extended: flbas & 0x10 != 0,
        dlfeat: page[33],
    })
}

/// A namespace as the passthrough commands address it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Namespace {
    pub nsid: u32,
    pub id: IdNamespace,
}

#[repr(C, align(4096))]
struct Page([u8; 4096]);

impl Namespace {
    /// The namespace behind an open generic (or block) NVMe device: its id from NVME_IOCTL_ID,
    /// its geometry from an admin Identify Namespace.
    pub(crate) fn of_fd(fd: RawFd) -> Result<Namespace, DeviceError> {
        // SAFETY: NVME_IOCTL_ID takes no argument and returns the namespace id.
        let nsid = unsafe { libc::ioctl(fd, NVME_IOCTL_ID as _) };
        if nsid < 0 {
            return Err(DeviceError::Io(format!("NVME_IOCTL_ID failed: {} (not an NVMe namespace?)", io::Error::last_os_error())));
        }
        let mut page = Box::new(Page([0; 4096]));
        let mut cmd = NvmeCmd::identify_namespace(nsid as u32, page.0.as_mut_ptr() as u64);
        // SAFETY: cmd is a valid struct nvme_passthru_cmd; its buffer is 4096 writable bytes.
        let r = unsafe { libc::ioctl(fd, NVME_IOCTL_ADMIN_CMD as _, &mut cmd as *mut NvmeCmd) };
        if r < 0 {
            return Err(DeviceError::Io(format!("Identify Namespace (NVME_IOCTL_ADMIN_CMD) failed: {}", io::Error::last_os_error())));
        }
        if r > 0 {
            return Err(DeviceError::Io(format!("Identify Namespace failed: {}", status_text(r as u64))));
        }
        Ok(Namespace { nsid: nsid as u32, id: parse_identify_namespace(&page.0)? })
    }
}

/// A synchronous NVMe Read through NVME_IOCTL_IO_CMD (the verify read-back after a run):
/// bytes read, a negative errno, or [`DEVICE_STATUS`] minus the NVMe status.
pub(crate) fn read_sync(fd: RawFd, ns: &Namespace, buf: *mut u8, len: u32, offset: u64) -> i64 {
    let mut cmd = NvmeCmd::rw(false, ns.nsid, ns.id.lba_shift, offset, len, buf as u64);
    // SAFETY: cmd is a valid struct nvme_passthru_cmd; buf holds len writable bytes.
    let r = unsafe { libc::ioctl(fd, NVME_IOCTL_IO_CMD as _, &mut cmd as *mut NvmeCmd) };
    match r {
        0 => len as i64,
        r if r < 0 => -(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) as i64),
        status => DEVICE_STATUS - status as i64,
    }
}

/// An NVMe completion status as the kernel reports it (the CQE status field without the phase
/// bit: SC bits 0-7, SCT bits 8-10, DNR bit 14), in words.
pub(crate) fn status_text(status: u64) -> String {
    let (sct, sc) = ((status >> 8) & 7, status & 0xff);
    let name = match (sct, sc) {
        (0, 0x01) => "invalid command opcode",
        (0, 0x02) => "invalid field in command",
        (0, 0x04) => "data transfer error",
        (0, 0x06) => "internal error",
        (0, 0x0b) => "invalid namespace or format",
        (0, 0x80) => "LBA out of range",
        (0, 0x81) => "capacity exceeded",
        (0, 0x82) => "namespace not ready",
        (2, 0x80) => "write fault",
        (2, 0x81) => "unrecovered read error",
        (2, 0x86) => "access denied",
        (2, 0x87) => "deallocated or unwritten logical block",
        (0, _) => "generic command status",
        (1, _) => "command specific status",
        (2, _) => "media and data integrity error",
        (3, _) => "path related status",
        _ => "vendor specific status",
    };
    let dnr = if status & 0x4000 != 0 { ", do not retry" } else { "" };
    format!("NVMe status {status:#x}: {name} (SCT {sct}, SC {sc:#04x}{dnr})")
}

// ------------------------------------------------------------------ devices

/// The sysfs directory of character device `rdev` under the sysfs root `sys`.
fn char_node(sys: &Path, rdev: u64) -> Option<PathBuf> {
    std::fs::canonicalize(sys.join(format!("dev/char/{}:{}", libc::major(rdev), libc::minor(rdev)))).ok().filter(|p| p.is_dir())
}

/// A name of the form ngXnY.
fn ng_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("ng") else { return false };
    let Some((c, n)) = rest.split_once('n') else { return false };
    !c.is_empty() && !n.is_empty() && c.chars().all(|x| x.is_ascii_digit()) && n.chars().all(|x| x.is_ascii_digit())
}

/// Is `path` an NVMe generic character device? By its sysfs class (`nvme-generic`) where sysfs
/// knows the device number, else by its name (ngXnY).
pub(crate) fn is_generic(path: &Path) -> bool {
    is_generic_in(path, Path::new(super::sysfs::SYSFS))
}

/// [`is_generic`] reading sysfs under `sys`.
pub(crate) fn is_generic_in(path: &Path, sys: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else { return false };
    if !meta.file_type().is_char_device() {
        return false;
    }
    match char_node(sys, meta.rdev()) {
        Some(node) => {
            std::fs::canonicalize(node.join("subsystem")).ok().and_then(|s| s.file_name().map(|n| n == "nvme-generic")).unwrap_or(false)
        }
        None => path.file_name().and_then(|n| n.to_str()).is_some_and(ng_name),
    }
}

/// The NVMe generic character devices in /dev.
pub(crate) fn generic_devices() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir("/dev")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("ng")))
        .map(|e| e.path())
        .filter(|p| is_generic(p))
        .collect();
    v.sort();
    v
}

/// The block disk of the same namespace as the generic device whose sysfs directory is `node`:
/// (name, "major:minor"). Both hang under the same parent (the controller, or the subsystem for
/// a multipath head) and share the head instance (the `nY` suffix); `nvmeXnY` named like the
/// generic device is preferred, hidden per-path disks (`nvmeXcZnY`) never match.
pub(crate) fn block_sibling(node: &Path) -> Option<(String, String)> {
    let ng = node.file_name()?.to_str()?;
    if !ng_name(ng) {
        return None;
    }
    let head = ng.rsplit_once('n')?.1;
    let want = format!("nvme{}", &ng[2..]);
    let mut found: Vec<(String, String)> = std::fs::read_dir(node.parent()?)
        .ok()?
        .flatten()
        .filter(|e| e.path().join("queue").is_dir())
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let dev = std::fs::read_to_string(e.path().join("dev")).ok()?.trim().to_string();
            Some((name, dev))
        })
        .filter(|(n, _)| n.starts_with("nvme") && !n.contains('c') && n.rsplit_once('n').is_some_and(|(_, h)| h == head))
        .collect();
    found.sort();
    if let Some(exact) = found.iter().find(|(n, _)| *n == want) {
        return Some(exact.clone());
    }
    (found.len() == 1).then(|| found.remove(0))
}

/// The generic device of the same namespace as the block disk whose sysfs directory is `node`
/// (the converse of [`block_sibling`]): its name.
pub(crate) fn generic_sibling(node: &Path) -> Option<String> {
    let disk = node.file_name()?.to_str()?;
    let rest = disk.strip_prefix("nvme")?;
    if rest.contains('c') {
        return None;
    }
    let head = disk.rsplit_once('n')?.1;
    let want = format!("ng{rest}");
    let mut found: Vec<String> = std::fs::read_dir(node.parent()?)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| ng_name(n) && n.rsplit_once('n').is_some_and(|(_, h)| h == head))
        .collect();
    found.sort();
    if found.contains(&want) {
        return Some(want);
    }
    (found.len() == 1).then(|| found.remove(0))
}

/// For a refusal: the generic device (`/dev/ngXnY`) of the namespace behind block device `path`.
pub(crate) fn generic_device_of_block(path: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.file_type().is_block_device() {
        return None;
    }
    let node = super::sysfs::sysfs_node(Path::new(super::sysfs::SYSFS), libc::major(meta.rdev()), libc::minor(meta.rdev()))?;
    let p = Path::new("/dev").join(generic_sibling(&node)?);
    is_generic(&p).then_some(p)
}

/// What an interface that drives only generic devices (nvme-passthru) runs on when a sweep names
/// `path` for every interface: the path itself when it is a generic device, the generic device
/// of its namespace when it is an NVMe block device; Err says why neither is there (the run is
/// then skipped: this target has no NVMe namespace to pass commands to).
pub(crate) fn generic_target(path: &Path) -> Result<PathBuf, DeviceError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| DeviceError::Refused(format!("cannot examine {shown}: {e}")))?;
    if is_generic(path) {
        return Ok(path.to_path_buf());
    }
    if meta.file_type().is_block_device() {
        return generic_device_of_block(path)
            .ok_or_else(|| DeviceError::Unsupported(format!("{shown} is a block device with no NVMe generic device (/dev/ngXnY): it is not an NVMe namespace, or the kernel predates 5.13")));
    }
    let what = if meta.file_type().is_file() { "a regular file" } else { "neither an NVMe namespace nor its generic device" };
    Err(DeviceError::Refused(format!("NVMe passthrough needs an NVMe namespace and {shown} is {what}")))
}

/// The block device (`/dev/nvmeXnY`) of the namespace behind the generic device at `path`.
pub(crate) fn block_device_of(path: &Path) -> Result<PathBuf, DeviceError> {
    block_device_in(path, Path::new(super::sysfs::SYSFS), Path::new("/dev"))
}

/// [`block_device_of`] reading sysfs under `sys` and device nodes under `dev`.
pub(crate) fn block_device_in(path: &Path, sys: &Path, dev: &Path) -> Result<PathBuf, DeviceError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| DeviceError::Refused(format!("cannot examine {shown}: {e}")))?;
    let node = char_node(sys, meta.rdev())
        .ok_or_else(|| DeviceError::Refused(format!("sysfs does not know {shown}'s device number, so its block device cannot be found")))?;
    let (name, devnum) = block_sibling(&node).ok_or_else(|| {
        DeviceError::Refused(format!(
            "no block device of {shown}'s namespace was found beside it in sysfs ({})",
            node.parent().unwrap_or(&node).display()
        ))
    })?;
    let p = dev.join(&name);
    match std::fs::metadata(&p) {
        Ok(m) if m.file_type().is_block_device() && format!("{}:{}", libc::major(m.rdev()), libc::minor(m.rdev())) == devnum => Ok(p),
        _ => Err(DeviceError::Refused(format!("the block device {name} ({devnum}) of {shown}'s namespace has no node {}", p.display()))),
    }
}

// ------------------------------------------------------------------ power management

/// Admin Get Features.
pub const ADMIN_GET_FEATURES: u8 = 0x0a;
/// Feature 02h, Power Management: dword 11 / the completion's dword 0 carry the power state
/// (PS, bits 0-4) and the workload hint (WH, bits 5-7).
pub const FEATURE_POWER_MANAGEMENT: u32 = 0x02;
/// Feature 0Ch, Autonomous Power State Transition: dword 11 bit 0 enables it (APSTE); its data
/// is a 256-byte table, one 8-byte entry per power state.
pub const FEATURE_APST: u32 = 0x0c;
/// The APST table's size.
pub const APST_TABLE: usize = 256;

/// One power state descriptor of Identify Controller (32 bytes at 2048 + 32 * state).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct PowerState {
    pub state: u8,
    /// The most the controller draws in this state, watts (MP in units of 0.01 W, or of 0.0001 W
    /// where MXPS is set).
    pub max_power_w: f64,
    /// A non-operational state (NOPS): no I/O is processed in it; a command brings the controller
    /// back to an operational one.
    pub non_operational: bool,
    /// Entry and exit latency (ENLAT, EXLAT), µs; 0 where the controller does not report them.
    pub entry_latency_us: u32,
    pub exit_latency_us: u32,
}

/// What Identify Controller says of power management.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PowerStates {
    /// The states, 0 to NPSS (byte 263, zero-based).
    pub states: Vec<PowerState>,
    /// Whether the controller supports autonomous power state transitions (APSTA, byte 265 bit 0).
    pub apst_supported: bool,
}

/// Parse the power states of an Identify Controller page.
pub(crate) fn parse_power_states(page: &[u8]) -> Result<PowerStates, DeviceError> {
    if page.len() < 4096 {
        return Err(DeviceError::Io(format!("Identify Controller data is {} bytes, want 4096", page.len())));
    }
    let npss = page[263] as usize;
    let states = (0..=npss.min(31))
        .map(|i| {
            let d = &page[2048 + 32 * i..2048 + 32 * (i + 1)];
            let mp = u16::from_le_bytes([d[0], d[1]]) as f64;
            let scale = if d[3] & 1 != 0 { 0.0001 } else { 0.01 };
            PowerState {
                state: i as u8,
                max_power_w: (mp * scale * 10_000.0).round() / 10_000.0,
                non_operational: d[3] & 2 != 0,
                entry_latency_us: u32::from_le_bytes(d[4..8].try_into().expect("4 bytes")),
                exit_latency_us: u32::from_le_bytes(d[8..12].try_into().expect("4 bytes")),
            }
        })
        .collect();
    Ok(PowerStates { states, apst_supported: page[265] & 1 != 0 })
}

/// An admin command through `NVME_IOCTL_ADMIN_CMD` on a controller's character device
/// (`/dev/nvmeN`): the completion's dword 0, or a one-line error naming `what`.
fn admin(fd: RawFd, mut cmd: NvmeCmd, what: &str) -> Result<u32, DeviceError> {
    // SAFETY: cmd is a valid struct nvme_passthru_cmd; its buffer, where it has one, is data_len
    // bytes the caller keeps alive and writable for the call.
    let r = unsafe { libc::ioctl(fd, NVME_IOCTL_ADMIN_CMD as _, &mut cmd as *mut NvmeCmd) };
    if r < 0 {
        return Err(DeviceError::Io(format!("{what} (NVME_IOCTL_ADMIN_CMD) failed: {}", io::Error::last_os_error())));
    }
    if r > 0 {
        return Err(DeviceError::Io(format!("{what} failed: {}", status_text(r as u64))));
    }
    Ok(cmd.rsvd2)
}

/// Identify Controller's power states, from the controller's character device.
pub(crate) fn power_states(fd: RawFd) -> Result<PowerStates, DeviceError> {
    let mut page = Box::new(Page([0; 4096]));
    let cmd =
        NvmeCmd { opcode: ADMIN_IDENTIFY, addr: page.0.as_mut_ptr() as u64, data_len: 4096, cdw10: CNS_CONTROLLER, ..Default::default() };
    admin(fd, cmd, "Identify Controller")?;
    parse_power_states(&page.0)
}

/// Get Features (the current value) of feature `fid`: its dword 0; `data`, where given, receives
/// the feature's data structure (the APST table).
pub(crate) fn get_feature(fd: RawFd, fid: u32, data: Option<&mut [u8]>) -> Result<u32, DeviceError> {
    let (addr, len) = data.map(|d| (d.as_mut_ptr() as u64, d.len() as u32)).unwrap_or((0, 0));
    let cmd = NvmeCmd { opcode: ADMIN_GET_FEATURES, addr, data_len: len, cdw10: fid, ..Default::default() };
    admin(fd, cmd, &format!("Get Features {fid:#04x}"))
}

/// Whether feature `fid` may be changed: Get Features with Select 3 (supported capabilities,
/// dword 0 bit 2 CHANGEABLE). None where the controller does not answer Select 3 (it need not:
/// ONCS bit 4); QEMU's controller reports its power management feature not changeable.
pub(crate) fn feature_changeable(fd: RawFd, fid: u32) -> Option<bool> {
    let cmd = NvmeCmd { opcode: ADMIN_GET_FEATURES, cdw10: fid | (3 << 8), ..Default::default() };
    admin(fd, cmd, "Get Features (supported capabilities)").ok().map(|caps| caps & 4 != 0)
}

/// Set Features `fid` to `cdw11` (not saved across a power cycle), with its data structure where
/// it has one (the APST table).
pub(crate) fn set_feature(fd: RawFd, fid: u32, cdw11: u32, data: Option<&mut [u8]>) -> Result<u32, DeviceError> {
    let (addr, len) = data.map(|d| (d.as_mut_ptr() as u64, d.len() as u32)).unwrap_or((0, 0));
    let cmd = NvmeCmd { opcode: ADMIN_SET_FEATURES, addr, data_len: len, cdw10: fid, cdw11, ..Default::default() };
    admin(fd, cmd, &format!("Set Features {fid:#04x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Identify Controller's power-management bytes as a drive with five power states reports
    /// them (nvme-cli's `id-ctrl`: ps 0-2 operational at 7.80, 6.00 and 3.40 W; ps 3 and 4
    /// non-operational at 0.0700 and 0.0100 W, in the 0.0001 W scale, entry/exit 210/1200 and
    /// 2000/8000 µs), byte for byte: NPSS at 263, APSTA at 265, the descriptors from 2048.
    #[test]
    fn power_states_parse_from_identify_controller() {
        let mut page = vec![0u8; 4096];
        page[263] = 4; // NPSS, zero-based
        page[265] = 0x01; // APSTA
        let psd = [
            "0c03000000000000000000000000000000000000000000000000000000000000",
            "5802000000000000000000000101010100000000000000000000000000000000",
            "5401000000000000000000000202020200000000000000000000000000000000",
            "bc020003d2000000b00400000303030300000000000000000000000000000000",
            "64000003d0070000401f00000404040400000000000000000000000000000000",
        ];
        for (i, hex) in psd.iter().enumerate() {
            for j in 0..32 {
                page[2048 + 32 * i + j] = u8::from_str_radix(&hex[2 * j..2 * j + 2], 16).unwrap();
            }
        }
        let ps = parse_power_states(&page).unwrap();
        assert!(ps.apst_supported);
        let got: Vec<(u8, f64, bool, u32, u32)> =
            ps.states.iter().map(|s| (s.state, s.max_power_w, s.non_operational, s.entry_latency_us, s.exit_latency_us)).collect();
        assert_eq!(
            got,
            [(0, 7.8, false, 0, 0), (1, 6.0, false, 0, 0), (2, 3.4, false, 0, 0), (3, 0.07, true, 210, 1200), (4, 0.01, true, 2000, 8000)]
        );
        // One state and no APST, as QEMU's controller reports: 25 W (MP 2500).
        let mut qemu = vec![0u8; 4096];
        qemu[2048..2050].copy_from_slice(&2500u16.to_le_bytes());
        let ps = parse_power_states(&qemu).unwrap();
        assert_eq!((ps.states.len(), ps.states[0].max_power_w, ps.apst_supported), (1, 25.0, false));
        assert!(parse_power_states(&qemu[..4000]).unwrap_err().to_string().contains("4000 bytes"));
    }

    #[test]
    fn ioctl_numbers() {
        // As the C macros compute them for 72-byte structs.
        assert_eq!(NVME_IOCTL_ID, 0x4e40);
        assert_eq!(NVME_IOCTL_ADMIN_CMD, 0xc048_4e41);
        assert_eq!(NVME_IOCTL_IO_CMD, 0xc048_4e43);
        assert_eq!(NVME_URING_CMD_IO, 0xc048_4e80);
    }

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_ne_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn read_and_write_commands() {
        // 64 KiB at byte 5 GiB + 8 KiB of a 4 KiB-block namespace 3.
        let off = (5u64 << 30) + 8192;
        let c = NvmeCmd::rw(false, 3, 12, off, 65536, 0x0dea_dbee_f000);
        let b = c.to_bytes();
        assert_eq!(b[0], OP_READ);
        assert_eq!(b[1], 0);
        assert_eq!(u32_at(&b, 4), 3, "nsid");
        assert_eq!(u64_at(&b, 16), 0, "metadata");
        assert_eq!(u64_at(&b, 24), 0x0dea_dbee_f000, "addr");
        assert_eq!(u32_at(&b, 32), 0, "metadata_len");
        assert_eq!(u32_at(&b, 36), 65536, "data_len");
        let slba = off >> 12;
        assert_eq!(u32_at(&b, 40), slba as u32, "cdw10 = SLBA low");
        assert_eq!(u32_at(&b, 44), (slba >> 32) as u32, "cdw11 = SLBA high");
        assert_eq!(u32_at(&b, 48), 15, "cdw12 = NLB - 1");
        for at in [52, 56, 60, 64, 68] {
            assert_eq!(u32_at(&b, at), 0, "byte {at}");
        }
        assert!(b[72..].iter().all(|&x| x == 0), "the command area past the struct is zero");

        // An SLBA above 2^32 blocks splits across cdw10/cdw11; writes are opcode 1.
        let w = NvmeCmd::rw(true, 1, 9, (0x1_2345_6789u64) << 9, 512, 0x1000).to_bytes();
        assert_eq!(w[0], OP_WRITE);
        assert_eq!(u32_at(&w, 40), 0x2345_6789);
        assert_eq!(u32_at(&w, 44), 0x1);
        assert_eq!(u32_at(&w, 48), 0, "one block: NLB - 1 = 0");
        assert_eq!(u32_at(&w, 36), 512);
    }

    #[test]
    fn queue_entries_are_the_spec_layout() {
        // SAFETY: Sqe and Cqe are repr(C) plain words without padding.
        let b: [u8; 64] =
            unsafe { std::mem::transmute(Sqe::rw(true, 0x1234, 7, 12, (0x1_0000_0002u64) << 12, 16384, 0xaaaa_0000, 0xbbbb_0000)) };
        #[cfg(target_endian = "little")]
        {
            assert_eq!(&b[0..4], &[OP_WRITE, 0, 0x34, 0x12], "opcode, flags (PRPs), command id");
            assert_eq!(u32_at(&b, 4), 7, "nsid");
            assert_eq!(u64_at(&b, 16), 0, "metadata pointer");
            assert_eq!(u64_at(&b, 24), 0xaaaa_0000, "PRP1");
            assert_eq!(u64_at(&b, 32), 0xbbbb_0000, "PRP2");
            assert_eq!((u32_at(&b, 40), u32_at(&b, 44)), (2, 1), "SLBA low and high");
            assert_eq!(u32_at(&b, 48), 3, "four blocks: NLB - 1");
            assert!(b[52..].iter().all(|&x| x == 0));
        }
        let r = Sqe::rw(false, 5, 1, 9, 4096, 512, 0x1000, 0);
        assert_eq!((r.opcode(), r.cid(), r.cdw10, r.cdw12), (OP_READ, 5, 8, 0));
        let c = Cqe::new(0xbeef, 3, 17, 0x4080, true);
        let cb: [u8; 16] = unsafe { std::mem::transmute(c) };
        #[cfg(target_endian = "little")]
        assert_eq!(&cb[8..16], &[17, 0, 3, 0, 0xef, 0xbe, 0x01, 0x81], "SQ head, SQ id, command id, phase 1 and status 0x4080 << 17");
        assert_eq!((c.cid(), c.phase(), c.status(), c.sq_head()), (0xbeef, true, 0x4080, 17));
        assert!(status_text(c.status() as u64).contains("LBA out of range"));
        assert!(!Cqe::new(1, 1, 0, 0, false).phase());
    }

    #[test]
    fn to_bytes_is_the_c_layout() {
        let c = NvmeCmd {
            opcode: 0x11,
            flags: 0x22,
            rsvd1: 0x3344,
            nsid: 0x5566_7788,
            cdw2: 9,
            cdw3: 10,
            metadata: 0x0102_0304_0506_0708,
            addr: 0x1112_1314_1516_1718,
            metadata_len: 11,
            data_len: 12,
            cdw10: 13,
            cdw11: 14,
            cdw12: 15,
            cdw13: 16,
            cdw14: 17,
            cdw15: 18,
            timeout_ms: 19,
            rsvd2: 20,
        };
        // SAFETY: NvmeCmd is repr(C), 72 bytes, no padding (every field naturally aligned).
        let mem: [u8; 72] = unsafe { std::mem::transmute(c) };
        assert_eq!(&c.to_bytes()[..72], &mem[..]);
        #[cfg(target_endian = "little")]
        assert_eq!(&c.to_bytes()[..8], &[0x11, 0x22, 0x44, 0x33, 0x88, 0x77, 0x66, 0x55]);
    }

    #[test]
    fn identify_command() {
        let b = NvmeCmd::identify_namespace(7, 0x4000).to_bytes();
        assert_eq!(b[0], ADMIN_IDENTIFY);
        assert_eq!(u32_at(&b, 4), 7);
        assert_eq!(u64_at(&b, 24), 0x4000);
        assert_eq!(u32_at(&b, 36), 4096);
        assert_eq!(u32_at(&b, 40), 0, "CNS 0");
    }

    /// A synthetic Identify Namespace page.
    fn id_page(nsze: u64, nlbaf: u8, flbas: u8, formats: &[(u16, u8)]) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        p[0..8].copy_from_slice(&nsze.to_le_bytes());
        p[8..16].copy_from_slice(&nsze.to_le_bytes()); // NCAP
        p[25] = nlbaf;
        p[26] = flbas;
        for (i, (ms, lbads)) in formats.iter().enumerate() {
            let dw = (*ms as u32) | ((*lbads as u32) << 16);
            p[128 + 4 * i..132 + 4 * i].copy_from_slice(&dw.to_le_bytes());
        }
        p
    }

    #[test]
    fn identify_parsing() {
        // QEMU's default: one 512-byte format.
        let id = parse_identify_namespace(&id_page(2_097_152, 0, 0, &[(0, 9)])).unwrap();
        assert_eq!(
            id,
            IdNamespace { nsze: 2_097_152, format: 0, lba_shift: 9, lba_size: 512, metadata_size: 0, extended: false, dlfeat: 0 }
        );
        assert_eq!(id.size_bytes(), 1 << 30);
        // Format 2 of several (4 KiB), metadata 8 bytes, interleaved (FLBAS bit 4).
        let id = parse_identify_namespace(&id_page(1000, 3, 0x12, &[(0, 9), (8, 9), (8, 12), (0, 12)])).unwrap();
        assert_eq!((id.format, id.lba_size, id.metadata_size, id.extended), (2, 4096, 8, true));
        assert_eq!(id.size_bytes(), 1000 * 4096);
        // More than 16 formats: FLBAS bits 5-6 are the high bits of the index (here 0x11 = 17).
        let mut f = vec![(0u16, 9u8); 18];
        f[17] = (0, 12);
        let id = parse_identify_namespace(&id_page(10, 17, 0x21, &f)).unwrap();
        assert_eq!((id.format, id.lba_size), (17, 4096));
        // Nonsense is refused, with a reason.
        assert!(parse_identify_namespace(&id_page(10, 0, 1, &[(0, 9)])).unwrap_err().to_string().contains("format 1"));
        assert!(parse_identify_namespace(&id_page(10, 0, 0, &[(0, 0)])).unwrap_err().to_string().contains("2^0"));
        assert!(parse_identify_namespace(&id_page(0, 0, 0, &[(0, 9)])).unwrap_err().to_string().contains("size of 0"));
        assert!(parse_identify_namespace(&[0u8; 100]).is_err());
    }

    /// Flush and Dataset Management (Deallocate) as the controller fetches them, and the range
    /// list's 16-byte entries.
    #[test]
    fn flush_and_deallocate_commands_are_the_spec_layout() {
        // SAFETY: Sqe and DsmRange are repr(C) plain words without padding.
        let f: [u8; 64] = unsafe { std::mem::transmute(Sqe::flush(0x0102, 1)) };
        let d: [u8; 64] = unsafe { std::mem::transmute(Sqe::deallocate(0x0304, 7, 3, 0x8000_1000)) };
        let r: [u8; 16] = unsafe { std::mem::transmute(DsmRange { cattr: 0, nlb: 0x10, slba: 0x1_0000_0020 }) };
        #[cfg(target_endian = "little")]
        {
            assert_eq!(&f[0..4], &[0x00, 0, 0x02, 0x01], "Flush: opcode 0, command id");
            assert_eq!(u32_at(&f, 4), 1, "nsid");
            assert!(f[8..].iter().all(|&x| x == 0), "no data pointer, no dwords: {f:?}");
            assert_eq!(&d[0..4], &[0x09, 0, 0x04, 0x03], "Dataset Management: opcode 9, PRPs, command id");
            assert_eq!(u32_at(&d, 4), 7, "nsid");
            assert_eq!(u64_at(&d, 24), 0x8000_1000, "PRP1: the range list");
            assert_eq!(u64_at(&d, 32), 0, "PRP2: a page holds every range");
            assert_eq!(u32_at(&d, 40), 2, "CDW10 NR: three ranges, zero-based");
            assert_eq!(u32_at(&d, 44), 4, "CDW11: Attribute - Deallocate (bit 2) only");
            assert!(d[48..].iter().all(|&x| x == 0));
            assert_eq!(r, [0, 0, 0, 0, 0x10, 0, 0, 0, 0x20, 0, 0, 0, 1, 0, 0, 0], "context attributes, NLB, SLBA");
        }
        assert_eq!(Sqe::deallocate(0, 1, 256, 0).cdw10, 255);
        // Whole blocks only: a partial block at either end is kept.
        assert_eq!(DsmRange::covering(4096, 8192, 9), vec![DsmRange { cattr: 0, nlb: 16, slba: 8 }]);
        assert_eq!(DsmRange::covering(100, 1000, 9), vec![DsmRange { cattr: 0, nlb: 1, slba: 1 }]);
        assert!(DsmRange::covering(100, 300, 9).is_empty());
        let big = DsmRange::covering(0, (u32::MAX as u64 + 10) << 9, 9);
        assert_eq!((big.len(), big[0].nlb, big[1].slba, big[1].nlb), (2, u32::MAX, u32::MAX as u64, 10));
    }

    #[test]
    fn identify_controller_and_dlfeat() {
        let mut p = vec![0u8; 4096];
        p[77] = 5;
        p[520] = 0x5f; // QEMU's ONCS: Compare, Write Uncorrectable, DSM, Write Zeroes, ...
        p[525] = 0x07; // VWC present, broadcast flush supported
        let c = parse_identify_controller(&p).unwrap();
        assert_eq!((c.mdts, c.volatile_write_cache(), c.dataset_management()), (5, true, true));
        p[520] = 0x1b;
        p[525] = 0x06;
        let c = parse_identify_controller(&p).unwrap();
        assert!(!c.volatile_write_cache() && !c.dataset_management(), "{c:?}");
        assert!(parse_identify_controller(&p[..100]).is_err());
        let mut ns = id_page(8, 0, 0, &[(0, 9)]);
        assert!(!parse_identify_namespace(&ns).unwrap().deallocated_reads_zeroes(), "DLFEAT 0: not reported");
        ns[33] = 0x09; // reads zeroes, and Write Zeroes may deallocate
        assert!(parse_identify_namespace(&ns).unwrap().deallocated_reads_zeroes());
        ns[33] = 0x02; // all ones
        assert!(!parse_identify_namespace(&ns).unwrap().deallocated_reads_zeroes());
    }

    #[test]
    fn names() {
        for ok in ["ng0n1", "ng12n3"] {
            assert!(ng_name(ok), "{ok}");
        }
        for bad in ["ng", "ngn1", "ng0n", "nvme0n1", "ng0c0n1", "ng0n1p1", "null"] {
            assert!(!ng_name(bad), "{bad}");
        }
    }

    /// A fake sysfs: controller nvme0 with generic ng0n1 (char 240:0) and disk nvme0n1 (259:0),
    /// a multipath subsystem with head ng1n2 (240:1) and disk nvme1n2 beside hidden nvme1c1n2,
    /// and a controller whose disk is named after its subsystem's instance (ng2n1 / nvme5n1).
    fn fake_sysfs() -> tempfile::TempDir {
        use std::os::unix::fs::symlink;
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("class/nvme-generic")).unwrap();
        std::fs::create_dir_all(r.join("class/block")).unwrap();
        std::fs::create_dir_all(r.join("dev/char")).unwrap();
        let generic = |parent: &Path, name: &str, dev: &str| {
            let d = parent.join(name);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("dev"), format!("{dev}\n")).unwrap();
            symlink(r.join("class/nvme-generic"), d.join("subsystem")).unwrap();
            symlink(&d, r.join("dev/char").join(dev)).unwrap();
        };
        let disk = |parent: &Path, name: &str, dev: &str| {
            let d = parent.join(name);
            std::fs::create_dir_all(d.join("queue")).unwrap();
            std::fs::write(d.join("dev"), format!("{dev}\n")).unwrap();
            symlink(r.join("class/block"), d.join("subsystem")).unwrap();
        };
        let c0 = r.join("devices/pci0000:00/0000:00:04.0/nvme/nvme0");
        generic(&c0, "ng0n1", "240:0");
        disk(&c0, "nvme0n1", "259:0");
        std::fs::create_dir_all(c0.join("power")).unwrap();
        let s1 = r.join("devices/virtual/nvme-subsystem/nvme-subsys1");
        generic(&s1, "ng1n2", "240:1");
        disk(&s1, "nvme1n2", "259:1");
        disk(&s1, "nvme1c1n2", "259:2");
        let c2 = r.join("devices/pci0000:00/0000:00:05.0/nvme/nvme2");
        generic(&c2, "ng2n1", "240:2");
        disk(&c2, "nvme5n1", "259:3");
        root
    }

    #[test]
    fn generic_device_to_block_device() {
        let sys = fake_sysfs();
        let node = |d: &str| std::fs::canonicalize(sys.path().join("dev/char").join(d)).unwrap();
        assert_eq!(block_sibling(&node("240:0")), Some(("nvme0n1".into(), "259:0".into())));
        assert_eq!(block_sibling(&node("240:1")), Some(("nvme1n2".into(), "259:1".into())));
        assert_eq!(block_sibling(&node("240:2")), Some(("nvme5n1".into(), "259:3".into())));
        let c0 = node("240:0").parent().unwrap().to_path_buf();
        assert_eq!(generic_sibling(&c0.join("nvme0n1")), Some("ng0n1".into()));
        let s1 = node("240:1").parent().unwrap().to_path_buf();
        assert_eq!(generic_sibling(&s1.join("nvme1n2")), Some("ng1n2".into()));
        assert_eq!(generic_sibling(&s1.join("nvme1c1n2")), None);
        let c2 = node("240:2").parent().unwrap().to_path_buf();
        assert_eq!(generic_sibling(&c2.join("nvme5n1")), Some("ng2n1".into()));
        // A generic device without a disk beside it.
        let lone = sys.path().join("devices/virtual/nvme/nvme9/ng9n1");
        std::fs::create_dir_all(&lone).unwrap();
        assert_eq!(block_sibling(&lone), None);
    }

    #[test]
    fn passthrough_target_of_a_sweep() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        std::fs::write(&file, b"x").unwrap();
        let e = generic_target(&file).unwrap_err().to_string();
        assert!(e.contains("needs an NVMe namespace") && e.contains("a regular file"), "{e}");
        assert!(generic_target(&dir.path().join("none")).unwrap_err().to_string().contains("cannot examine"));
        if let Some(g) = generic_devices().into_iter().next() {
            assert_eq!(generic_target(&g).unwrap(), g, "a generic device is its own passthrough target");
        }
    }

    #[test]
    fn generic_by_sysfs_class() {
        // /dev/null's device number (1:3), filed in the fake sysfs as a generic device, then as
        // something else.
        let Ok(meta) = std::fs::metadata("/dev/null") else { return };
        if !meta.file_type().is_char_device() {
            return;
        }
        let sys = fake_sysfs();
        let num = format!("{}:{}", libc::major(meta.rdev()), libc::minor(meta.rdev()));
        let link = sys.path().join("dev/char").join(&num);
        std::os::unix::fs::symlink(std::fs::canonicalize(sys.path().join("dev/char/240:0")).unwrap(), &link).unwrap();
        assert!(is_generic_in(Path::new("/dev/null"), sys.path()));
        std::fs::remove_file(&link).unwrap();
        let other = sys.path().join("devices/virtual/mem/null");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::create_dir_all(sys.path().join("class/mem")).unwrap();
        std::os::unix::fs::symlink(sys.path().join("class/mem"), other.join("subsystem")).unwrap();
        std::os::unix::fs::symlink(&other, &link).unwrap();
        assert!(!is_generic_in(Path::new("/dev/null"), sys.path()));
    }

    #[test]
    fn char_devices_that_are_not_nvme() {
        // /dev/null (1:3) is a character device sysfs files under class mem, not nvme-generic.
        if Path::new("/dev/null").exists() {
            assert!(!is_generic(Path::new("/dev/null")));
            assert!(block_device_of(Path::new("/dev/null")).is_err());
        }
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("ng0n1");
        std::fs::write(&f, b"x").unwrap();
        assert!(!is_generic(&f), "a regular file named like a generic device is not one");
    }
}
