//! The driver's seam made real through VFIO (the classic container/group interface; these
//! kernels have no IOMMUFD for it): [`Bar`] is BAR0 mmap'ed from the vfio-pci device as the
//! [`Registers`], [`Dma`] is 2 MiB hugepages the controller reaches as the [`DmaMemory`].
//!
//! Two ways for the controller to reach memory:
//! - **type-1 IOMMU**: iolab chooses the IO addresses (IOVAs) inside the ranges the IOMMU
//!   reports and maps memory there with VFIO_IOMMU_MAP_DMA, which also pins it. The slot buffers
//!   the engine allocated are mapped as they are.
//! - **no-IOMMU** (`--vfio-noiommu`, only on kernels built with CONFIG_VFIO_NOIOMMU and vfio
//!   loaded with enable_unsafe_noiommu_mode=1): the controller sees physical addresses, read from
//!   /proc/self/pagemap (root only). Nothing protects memory from the device and nothing pins
//!   pages for it, so everything it reaches is in hugepages, queues and slot buffers alike
//!   (`interfaces::memory`: an ordinary page, even locked, may be moved by compaction while the
//!   controller holds its address); `map` refuses anything else.
//!
//! The ioctl numbers and structures below are those of linux/vfio.h, defined here (small, and
//! fixed since Linux 3.6) rather than taken from a bindings crate.
use super::{DmaMemory, DmaRegion, Registers, PAGE};
pub use crate::interfaces::memory::HUGEPAGE;
use crate::interfaces::memory::{self, AlignedBuf};
use crate::interfaces::InterfaceError;
use std::ffi::CString;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

// ------------------------------------------------------------------ linux/vfio.h

/// `_IO(VFIO_TYPE, VFIO_BASE + n)`: VFIO_TYPE is ';', VFIO_BASE 100; no size or direction bits.
const fn vfio_io(n: u64) -> u64 {
    ((b';' as u64) << 8) | (100 + n)
}
const VFIO_GET_API_VERSION: u64 = vfio_io(0);
const VFIO_CHECK_EXTENSION: u64 = vfio_io(1);
const VFIO_SET_IOMMU: u64 = vfio_io(2);
const VFIO_GROUP_GET_STATUS: u64 = vfio_io(3);
const VFIO_GROUP_SET_CONTAINER: u64 = vfio_io(4);
const VFIO_GROUP_GET_DEVICE_FD: u64 = vfio_io(6);
const VFIO_DEVICE_GET_REGION_INFO: u64 = vfio_io(8);
const VFIO_IOMMU_GET_INFO: u64 = vfio_io(12);
const VFIO_IOMMU_MAP_DMA: u64 = vfio_io(13);
const VFIO_IOMMU_UNMAP_DMA: u64 = vfio_io(14);

const VFIO_API_VERSION: i32 = 0;
const VFIO_TYPE1_IOMMU: u64 = 1;
const VFIO_TYPE1V2_IOMMU: u64 = 3;
const VFIO_NOIOMMU_IOMMU: u64 = 8;
const VFIO_GROUP_FLAGS_VIABLE: u32 = 1;
const VFIO_REGION_INFO_FLAG_MMAP: u32 = 4;
const VFIO_PCI_BAR0_REGION_INDEX: u32 = 0;
const VFIO_PCI_CONFIG_REGION_INDEX: u32 = 7;
const VFIO_DMA_MAP_FLAG_READ: u32 = 1;
const VFIO_DMA_MAP_FLAG_WRITE: u32 = 2;
const VFIO_IOMMU_INFO_CAPS: u32 = 2;
const VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE: u16 = 1;

/// struct vfio_group_status
#[repr(C)]
#[derive(Default)]
struct GroupStatus {
    argsz: u32,
    flags: u32,
}

/// struct vfio_region_info
#[repr(C)]
#[derive(Default)]
struct RegionInfo {
    argsz: u32,
    flags: u32,
    index: u32,
    cap_offset: u32,
    size: u64,
    offset: u64,
}

/// struct vfio_iommu_type1_info (its capability chain follows it when `argsz` asks for it)
#[repr(C)]
#[derive(Default)]
struct Type1Info {
    argsz: u32,
    flags: u32,
    iova_pgsizes: u64,
    cap_offset: u32,
    pad: u32,
}

/// struct vfio_iommu_type1_dma_map
#[repr(C)]
struct DmaMap {
    argsz: u32,
    flags: u32,
    vaddr: u64,
    iova: u64,
    size: u64,
}

/// struct vfio_iommu_type1_dma_unmap
#[repr(C)]
struct DmaUnmap {
    argsz: u32,
    flags: u32,
    iova: u64,
    size: u64,
}

/// PCI configuration space: the command register and its bus-master bit.
const PCI_COMMAND: u64 = 4;
const PCI_COMMAND_MEMORY: u16 = 1 << 1;
const PCI_COMMAND_MASTER: u16 = 1 << 2;

/// An ioctl with a pointer or integer argument: its non-negative result, or the error.
fn ioctl(fd: &OwnedFd, req: u64, arg: usize) -> io::Result<i32> {
    // SAFETY: every call passes `arg` as the request defines it (a live struct of the right
    // layout with argsz set, an fd, a C string, or an integer).
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, arg) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn open_rw(path: &Path) -> io::Result<OwnedFd> {
    Ok(std::fs::OpenOptions::new().read(true).write(true).open(path)?.into())
}

// ------------------------------------------------------------------ container, group, device

/// How the controller addresses memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Iommu {
    /// Through the IOMMU, at IO addresses iolab chose (VFIO type-1).
    Type1,
    /// By physical address: no IOMMU (VFIO's unsafe no-IOMMU mode).
    NoIommu,
}

/// A vfio-pci device opened through its group and a container of its own.
pub struct Vfio {
    pub bdf: String,
    pub group: String,
    pub iommu: Iommu,
    device: OwnedFd,
    /// Kept open: closing it tears down the IOMMU mappings (after the device is closed).
    container: OwnedFd,
    _group: OwnedFd,
    /// Usable IO address ranges (type-1), inclusive ends.
    iova_ranges: Vec<(u64, u64)>,
}

impl Vfio {
    /// Opens controller `bdf` (bound to vfio-pci) through its IOMMU group, sysfs under `sys`.
    /// No-IOMMU mode only when `allow_noiommu`.
    pub fn open(bdf: &str, sys: &Path, allow_noiommu: bool) -> Result<Vfio, InterfaceError> {
        let link = sys.join("bus/pci/devices").join(bdf).join("iommu_group");
        let group = std::fs::read_link(&link)
            .ok()
            .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
            .ok_or_else(|| InterfaceError::Failed(no_group_reason(bdf)))?;
        // vfio names the groups it makes up for devices without an IOMMU "vfio-noiommu".
        let noiommu =
            std::fs::read_to_string(sys.join("kernel/iommu_groups").join(&group).join("name")).is_ok_and(|n| n.trim() == "vfio-noiommu");
        let (node, iommu) = if noiommu {
            if !allow_noiommu {
                return Err(InterfaceError::Failed(format!(
                    "{bdf} has no IOMMU: VFIO offers it only in the unsafe no-IOMMU mode (the device can reach all memory): pass --vfio-noiommu to allow that"
                )));
            }
            (Path::new("/dev/vfio").join(format!("noiommu-{group}")), Iommu::NoIommu)
        } else {
            (Path::new("/dev/vfio").join(&group), Iommu::Type1)
        };
        let container = open_rw(Path::new("/dev/vfio/vfio"))
            .map_err(|e| InterfaceError::Failed(format!("cannot open /dev/vfio/vfio: {e} (modprobe vfio)")))?;
        let api = ioctl(&container, VFIO_GET_API_VERSION, 0).map_err(|e| InterfaceError::Failed(format!("VFIO_GET_API_VERSION: {e}")))?;
        if api != VFIO_API_VERSION {
            return Err(InterfaceError::Failed(format!("this kernel's VFIO API is version {api}; iolab speaks {VFIO_API_VERSION}")));
        }
        let kind = match iommu {
            Iommu::NoIommu => VFIO_NOIOMMU_IOMMU,
            Iommu::Type1 => [VFIO_TYPE1V2_IOMMU, VFIO_TYPE1_IOMMU]
                .into_iter()
                .find(|k| ioctl(&container, VFIO_CHECK_EXTENSION, *k as usize).is_ok_and(|r| r > 0))
                .ok_or_else(|| InterfaceError::Failed("the VFIO container offers no type-1 IOMMU (modprobe vfio_iommu_type1)".into()))?,
        };
        // The group's node appears with the binding; udev may still be setting it up.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while !node.exists() && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let group_fd = open_rw(&node).map_err(|e| InterfaceError::Failed(format!("cannot open {}: {e}", node.display())))?;
        let mut status = GroupStatus { argsz: std::mem::size_of::<GroupStatus>() as u32, flags: 0 };
        ioctl(&group_fd, VFIO_GROUP_GET_STATUS, &mut status as *mut _ as usize)
            .map_err(|e| InterfaceError::Failed(format!("VFIO_GROUP_GET_STATUS: {e}")))?;
        if status.flags & VFIO_GROUP_FLAGS_VIABLE == 0 {
            let others: Vec<String> = std::fs::read_dir(sys.join("kernel/iommu_groups").join(&group).join("devices"))
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|d| d != bdf)
                .collect();
            return Err(InterfaceError::Failed(format!(
                "IOMMU group {group} of {bdf} is not usable: its other devices ({}) must be bound to vfio-pci or to no driver",
                others.join(", ")
            )));
        }
        let cfd = container.as_raw_fd();
        ioctl(&group_fd, VFIO_GROUP_SET_CONTAINER, &cfd as *const _ as usize)
            .map_err(|e| InterfaceError::Failed(format!("VFIO_GROUP_SET_CONTAINER: {e}")))?;
        ioctl(&container, VFIO_SET_IOMMU, kind as usize).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) => InterfaceError::Failed(format!(
                "VFIO_SET_IOMMU: {e}: the IOMMU has no interrupt remapping (see dmesg); enable it (QEMU: intel-iommu,intremap=on) or load vfio_iommu_type1 with allow_unsafe_interrupts=1"
            )),
            _ => InterfaceError::Failed(format!("VFIO_SET_IOMMU: {e}")),
        })?;
        let name = CString::new(bdf).map_err(|_| InterfaceError::Failed(format!("bad PCI address {bdf}")))?;
        let dfd = ioctl(&group_fd, VFIO_GROUP_GET_DEVICE_FD, name.as_ptr() as usize)
            .map_err(|e| InterfaceError::Failed(format!("VFIO_GROUP_GET_DEVICE_FD {bdf}: {e} (is it in use by another program?)")))?;
        // SAFETY: the ioctl returned a new descriptor that nothing else owns.
        let device = unsafe { OwnedFd::from_raw_fd(dfd) };
        let iova_ranges = match iommu {
            Iommu::Type1 => iova_ranges(&container)?,
            Iommu::NoIommu => Vec::new(),
        };
        Ok(Vfio { bdf: bdf.to_string(), group, iommu, device, container, _group: group_fd, iova_ranges })
    }

    fn region(&self, index: u32) -> Result<RegionInfo, InterfaceError> {
        let mut r = RegionInfo { argsz: std::mem::size_of::<RegionInfo>() as u32, index, ..Default::default() };
        ioctl(&self.device, VFIO_DEVICE_GET_REGION_INFO, &mut r as *mut _ as usize)
            .map_err(|e| InterfaceError::Failed(format!("VFIO_DEVICE_GET_REGION_INFO {index} of {}: {e}", self.bdf)))?;
        Ok(r)
    }

    /// Turns on bus mastering (and memory decoding): vfio-pci leaves it off, and a controller
    /// that cannot master the bus goes fatal (CSTS.CFS) at its first DMA.
    pub(crate) fn enable_bus_master(&self) -> Result<(), InterfaceError> {
        let cfg = self.region(VFIO_PCI_CONFIG_REGION_INDEX)?;
        // SAFETY: the device fd is open; File only borrows it (ManuallyDrop: not closed here).
        let f = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(self.device.as_raw_fd()) });
        let mut cmd = [0u8; 2];
        f.read_exact_at(&mut cmd, cfg.offset + PCI_COMMAND)
            .map_err(|e| InterfaceError::Failed(format!("reading {}'s PCI command register: {e}", self.bdf)))?;
        let want = u16::from_le_bytes(cmd) | PCI_COMMAND_MASTER | PCI_COMMAND_MEMORY;
        f.write_all_at(&want.to_le_bytes(), cfg.offset + PCI_COMMAND)
            .map_err(|e| InterfaceError::Failed(format!("writing {}'s PCI command register: {e}", self.bdf)))
    }

    /// BAR0, mapped.
    pub(crate) fn bar0(self: &Arc<Self>) -> Result<Bar, InterfaceError> {
        let r = self.region(VFIO_PCI_BAR0_REGION_INDEX)?;
        if r.flags & VFIO_REGION_INFO_FLAG_MMAP == 0 || r.size < 0x2000 {
            return Err(InterfaceError::Failed(format!("{}'s BAR0 cannot be mapped (flags {:#x}, {} bytes)", self.bdf, r.flags, r.size)));
        }
        // SAFETY: a shared mapping of the device's BAR0 region at the offset VFIO gave.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                r.size as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.device.as_raw_fd(),
                r.offset as i64,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(InterfaceError::Failed(format!("mmap of {}'s BAR0: {}", self.bdf, io::Error::last_os_error())));
        }
        Ok(Bar { base: p as *mut u8, len: r.size as usize, _vfio: self.clone() })
    }
}

/// Whether VFIO's unsafe no-IOMMU mode is on (vfio loaded with enable_unsafe_noiommu_mode=1).
fn noiommu_enabled(sys: &Path) -> bool {
    std::fs::read_to_string(sys.join("module/vfio/parameters/enable_unsafe_noiommu_mode")).is_ok_and(|v| v.trim() == "Y")
}

/// Ok when controller `bdf`, once bound to vfio-pci, can be opened: it has an IOMMU group, or
/// no-IOMMU mode is on and allowed. Checked before it is taken from the kernel.
/// Err: unsupported here.
pub(crate) fn check_iommu(bdf: &str, sys: &Path, allow_noiommu: bool) -> Result<(), InterfaceError> {
    if sys.join("bus/pci/devices").join(bdf).join("iommu_group").exists() {
        return Ok(());
    }
    match (noiommu_enabled(sys), allow_noiommu) {
        (true, true) => Ok(()),
        (true, false) => Err(InterfaceError::Unsupported(format!(
            "{bdf} has no IOMMU: VFIO offers it only in the unsafe no-IOMMU mode (the device can reach all memory): pass --vfio-noiommu to allow that"
        ))),
        (false, _) => Err(InterfaceError::Unsupported(no_group_reason(bdf))),
    }
}

/// Whether this machine could run the driver at all (no target named): the reasons it cannot.
pub fn machine_support(sys: &Path) -> Result<(), InterfaceError> {
    let mut why = Vec::new();
    let nvme = std::fs::read_dir(sys.join("bus/pci/devices"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|d| std::fs::read_to_string(d.path().join("class")).is_ok_and(|c| c.trim() == "0x010802"));
    if !nvme {
        why.push("no NVMe controller on the PCI bus".to_string());
    }
    if !sys.join("bus/pci/drivers/vfio-pci").is_dir() {
        why.push("the vfio-pci driver is not loaded (modprobe vfio-pci)".to_string());
    }
    let groups = std::fs::read_dir(sys.join("kernel/iommu_groups")).is_ok_and(|mut d| d.next().is_some());
    if !groups && !noiommu_enabled(sys) {
        why.push("no IOMMU groups (boot with intel_iommu=on, or vfio's enable_unsafe_noiommu_mode=1 with --vfio-noiommu)".to_string());
    }
    if !sys.join(crate::settings::HUGEPAGES_2M).is_dir() {
        why.push("no 2 MiB hugepages in this kernel".to_string());
    }
    if why.is_empty() {
        Ok(())
    } else {
        Err(InterfaceError::Unsupported(why.join("; ")))
    }
}

/// Why a device has no IOMMU group, in words.
fn no_group_reason(bdf: &str) -> String {
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let hint = if Path::new("/sys/class/iommu").read_dir().is_ok_and(|mut d| d.next().is_some()) {
        "the IOMMU does not cover it"
    } else if cmdline.contains("intel_iommu=on") || cmdline.contains("amd_iommu=on") {
        "the kernel found no IOMMU"
    } else {
        "no IOMMU is on (boot with intel_iommu=on, or load vfio with enable_unsafe_noiommu_mode=1 and pass --vfio-noiommu)"
    };
    format!("{bdf} has no IOMMU group: {hint}")
}

/// The type-1 IOMMU's usable IO address ranges (VFIO_IOMMU_GET_INFO's IOVA range capability,
/// Linux 5.4+); without it, the low 39 bits (the narrowest IOMMU width seen: QEMU's
/// intel-iommu) above the first 4 GiB.
fn iova_ranges(container: &OwnedFd) -> Result<Vec<(u64, u64)>, InterfaceError> {
    let fallback = vec![(1 << 32, (1 << 39) - 1)];
    let mut info = Type1Info { argsz: std::mem::size_of::<Type1Info>() as u32, ..Default::default() };
    ioctl(container, VFIO_IOMMU_GET_INFO, &mut info as *mut _ as usize)
        .map_err(|e| InterfaceError::Failed(format!("VFIO_IOMMU_GET_INFO: {e}")))?;
    if info.iova_pgsizes & PAGE as u64 == 0 {
        return Err(InterfaceError::Failed(format!("the IOMMU cannot map 4 KiB pages (page sizes {:#x})", info.iova_pgsizes)));
    }
    if info.flags & VFIO_IOMMU_INFO_CAPS == 0 || info.argsz as usize <= std::mem::size_of::<Type1Info>() {
        return Ok(fallback);
    }
    // Again with room for the capability chain.
    let mut buf = vec![0u64; (info.argsz as usize).div_ceil(8)];
    buf[0] = info.argsz as u64;
    ioctl(container, VFIO_IOMMU_GET_INFO, buf.as_mut_ptr() as usize)
        .map_err(|e| InterfaceError::Failed(format!("VFIO_IOMMU_GET_INFO: {e}")))?;
    // SAFETY: buf is a live, 8-aligned buffer of argsz bytes.
    let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr() as *const u8, buf.len() * 8) };
    Ok(parse_iova_ranges(bytes).unwrap_or(fallback))
}

/// The IOVA ranges in a vfio_iommu_type1_info with its capability chain (`bytes`), if listed.
fn parse_iova_ranges(bytes: &[u8]) -> Option<Vec<(u64, u64)>> {
    let u32_at = |o: usize| bytes.get(o..o + 4).map(|b| u32::from_le_bytes(b.try_into().expect("4")));
    let u64_at = |o: usize| bytes.get(o..o + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8")));
    let mut at = u32_at(16)? as usize;
    let mut hops = 0;
    while at != 0 && hops < 64 {
        let id = u32_at(at)? as u16;
        if id == VFIO_IOMMU_TYPE1_INFO_CAP_IOVA_RANGE {
            let n = u32_at(at + 8)? as usize;
            return (0..n).map(|i| Some((u64_at(at + 16 + 16 * i)?, u64_at(at + 24 + 16 * i)?))).collect();
        }
        at = u32_at(at + 4)? as usize;
        hops += 1;
    }
    None
}

// ------------------------------------------------------------------ registers

/// BAR0 mapped from the vfio-pci device: the controller's registers and doorbells.
pub struct Bar {
    base: *mut u8,
    len: usize,
    _vfio: Arc<Vfio>,
}
// SAFETY: MMIO through volatile accesses; the mapping lives as long as the Bar.
unsafe impl Send for Bar {}
unsafe impl Sync for Bar {}

impl Drop for Bar {
    fn drop(&mut self) {
        // SAFETY: mapped in `bar0` with this length.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// The registers of a mapped BAR0, shared by the controller and its queue pairs.
#[derive(Clone)]
pub struct BarRegs(pub Arc<Bar>);

impl BarRegs {
    #[inline(always)]
    fn at(&self, offset: u32) -> *mut u32 {
        debug_assert!(offset as usize + 4 <= self.0.len);
        // SAFETY: offsets are register and doorbell offsets inside BAR0 (checked ≥ 8 KiB; the
        // doorbells of 64 queue pairs at the widest stride fit the sizes controllers map).
        unsafe { self.0.base.add(offset as usize) as *mut u32 }
    }
}

impl Registers for BarRegs {
    fn read32(&self, offset: u32) -> u32 {
        // SAFETY: a register inside the mapping.
        unsafe { std::ptr::read_volatile(self.at(offset)) }
    }
    fn write32(&self, offset: u32, value: u32) {
        // SAFETY: a register inside the mapping.
        unsafe { std::ptr::write_volatile(self.at(offset), value) }
    }
    #[inline(always)]
    fn doorbell(&self, offset: u32, value: u32) {
        // x86 keeps stores in order, also against uncached MMIO: only the compiler must not
        // sink queue and data stores below this one. Elsewhere a store barrier is needed.
        #[cfg(target_arch = "x86_64")]
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        #[cfg(not(target_arch = "x86_64"))]
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        // SAFETY: a doorbell inside the mapping.
        unsafe { std::ptr::write_volatile(self.at(offset), value) }
    }
}

// ------------------------------------------------------------------ DMA memory

/// One 2 MiB hugepage, carved into 4 KiB pages for queues and PRP lists.
struct Chunk {
    mem: AlignedBuf,
    /// Where the controller sees it (a hugepage is contiguous for it in both modes).
    iova: u64,
    /// Pages in use, one bit each.
    used: [u64; HUGEPAGE / PAGE / 64],
}

struct Arena {
    chunks: Vec<Chunk>,
    /// The next IO address to hand out (type-1), and the ranges it must stay in.
    next_iova: u64,
    /// Memory mapped with `map` through the IOMMU: (virt, len, first IO address).
    mapped: Vec<(usize, usize, u64)>,
}

/// DMA memory through VFIO: hugepages for queues and PRP lists, and the slot buffers mapped
/// where they are.
pub struct Dma {
    vfio: Arc<Vfio>,
    arena: Mutex<Arena>,
    pagemap: Mutex<Option<File>>,
}
// SAFETY: the raw pointers are to memory the arena owns; every change is under its mutex.
unsafe impl Send for Dma {}
unsafe impl Sync for Dma {}

/// Memory shared by the controller and its queue pairs.
#[derive(Clone)]
pub struct DmaHandle(pub Arc<Dma>);

impl Dma {
    pub fn new(vfio: Arc<Vfio>) -> Dma {
        let start = vfio.iova_ranges.first().map_or(0, |r| r.0.max(1 << 32).next_multiple_of(HUGEPAGE as u64));
        Dma { vfio, arena: Mutex::new(Arena { chunks: Vec::new(), next_iova: start, mapped: Vec::new() }), pagemap: Mutex::new(None) }
    }

    pub fn iommu(&self) -> Iommu {
        self.vfio.iommu
    }

    /// Hugepages in use.
    pub fn hugepages(&self) -> usize {
        self.arena.lock().expect("arena").chunks.len()
    }

    /// `len` bytes of IO address space inside a usable range, 2 MiB aligned.
    fn take_iova(&self, a: &mut Arena, len: usize) -> io::Result<u64> {
        let len = (len as u64).next_multiple_of(HUGEPAGE as u64);
        for &(lo, hi) in &self.vfio.iova_ranges {
            let at = a.next_iova.max(lo).next_multiple_of(HUGEPAGE as u64);
            if at.checked_add(len - 1).is_some_and(|end| end <= hi) {
                a.next_iova = at + len;
                return Ok(at);
            }
        }
        Err(io::Error::other(format!("the IOMMU's IO address ranges have no {len} bytes left")))
    }

    fn map_dma(&self, virt: usize, iova: u64, len: usize) -> io::Result<()> {
        let m = DmaMap {
            argsz: std::mem::size_of::<DmaMap>() as u32,
            flags: VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
            vaddr: virt as u64,
            iova,
            size: len as u64,
        };
        ioctl(&self.vfio.container, VFIO_IOMMU_MAP_DMA, &m as *const _ as usize)
            .map(|_| ())
            .map_err(|e| io::Error::new(e.kind(), format!("VFIO_IOMMU_MAP_DMA of {len} bytes at IOVA {iova:#x}: {e}")))
    }

    fn unmap_dma(&self, iova: u64, len: usize) {
        let u = DmaUnmap { argsz: std::mem::size_of::<DmaUnmap>() as u32, flags: 0, iova, size: len as u64 };
        let _ = ioctl(&self.vfio.container, VFIO_IOMMU_UNMAP_DMA, &u as *const _ as usize);
    }

    /// The physical address of the page at `virt` (no-IOMMU mode), from /proc/self/pagemap.
    fn physical(&self, virt: usize) -> io::Result<u64> {
        let mut pm = self.pagemap.lock().expect("pagemap");
        if pm.is_none() {
            *pm = Some(File::open("/proc/self/pagemap")?);
        }
        let f = pm.as_mut().expect("opened");
        let mut e = [0u8; 8];
        f.seek(SeekFrom::Start((virt / PAGE) as u64 * 8))?;
        f.read_exact(&mut e)?;
        let e = u64::from_le_bytes(e);
        let pfn = e & ((1 << 55) - 1);
        if e >> 63 == 0 || pfn == 0 {
            return Err(io::Error::other(format!(
                "/proc/self/pagemap gives no physical address for {virt:#x} (present {}; PFNs need CAP_SYS_ADMIN)",
                e >> 63
            )));
        }
        Ok(pfn * PAGE as u64 + (virt % PAGE) as u64)
    }

    /// A new hugepage, locked and mapped for the controller.
    fn new_chunk(&self, a: &mut Arena) -> io::Result<Chunk> {
        let mem = AlignedBuf::hugepages(HUGEPAGE)?;
        let virt = mem.ptr as usize;
        let iova = match self.vfio.iommu {
            Iommu::Type1 => self.take_iova(a, HUGEPAGE).and_then(|iova| self.map_dma(virt, iova, HUGEPAGE).map(|_| iova))?,
            Iommu::NoIommu => self.physical(virt)?,
        };
        Ok(Chunk { mem, iova, used: [0; HUGEPAGE / PAGE / 64] })
    }
}

/// The first run of `n` free pages in `used`.
fn free_run(used: &[u64], n: usize) -> Option<usize> {
    let free = |i: usize| used[i / 64] & (1 << (i % 64)) == 0;
    let total = used.len() * 64;
    let mut start = 0;
    while start + n <= total {
        match (start..start + n).find(|&i| !free(i)) {
            None => return Some(start),
            Some(busy) => start = busy + 1,
        }
    }
    None
}

fn mark(used: &mut [u64], from: usize, n: usize, on: bool) {
    for i in from..from + n {
        if on {
            used[i / 64] |= 1 << (i % 64);
        } else {
            used[i / 64] &= !(1 << (i % 64));
        }
    }
}

impl DmaMemory for DmaHandle {
    fn allocate(&self, len: usize) -> io::Result<DmaRegion> {
        let n = len.div_ceil(PAGE);
        if n == 0 || n > HUGEPAGE / PAGE {
            return Err(io::Error::other(format!("{len} bytes of queue memory do not fit in one 2 MiB hugepage")));
        }
        let mut a = self.0.arena.lock().expect("arena");
        let found = a.chunks.iter().enumerate().find_map(|(c, ch)| free_run(&ch.used, n).map(|p| (c, p)));
        let (c, p) = match found {
            Some(f) => f,
            None => {
                let chunk = self.0.new_chunk(&mut a)?;
                a.chunks.push(chunk);
                (a.chunks.len() - 1, 0)
            }
        };
        let ch = &mut a.chunks[c];
        mark(&mut ch.used, p, n, true);
        // SAFETY: pages p..p+n of this chunk are now this region's.
        let virt = unsafe { ch.mem.ptr.add(p * PAGE) };
        // SAFETY: as above; regions are handed out zeroed.
        unsafe { std::ptr::write_bytes(virt, 0, n * PAGE) };
        Ok(DmaRegion { virt, iova: ch.iova + (p * PAGE) as u64, len: n * PAGE })
    }

    fn free(&self, region: DmaRegion) {
        let mut a = self.0.arena.lock().expect("arena");
        let at = region.virt as usize;
        if let Some(ch) = a.chunks.iter_mut().find(|ch| (ch.mem.ptr as usize..ch.mem.ptr as usize + HUGEPAGE).contains(&at)) {
            mark(&mut ch.used, (at - ch.mem.ptr as usize) / PAGE, region.len.div_ceil(PAGE), false);
        }
    }

    fn map(&self, virt: *mut u8, len: usize) -> io::Result<Vec<u64>> {
        let pages = len.div_ceil(PAGE);
        match self.0.vfio.iommu {
            Iommu::Type1 => {
                let mut a = self.0.arena.lock().expect("arena");
                let iova = self.0.take_iova(&mut a, len)?;
                self.0.map_dma(virt as usize, iova, pages * PAGE)?;
                a.mapped.push((virt as usize, pages * PAGE, iova));
                Ok((0..pages).map(|i| iova + (i * PAGE) as u64).collect())
            }
            Iommu::NoIommu => {
                if !memory::in_hugepages(virt as usize, pages * PAGE)? {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        "without an IOMMU the controller's I/O buffers must be in hugepages: the kernel may move an ordinary page while the controller holds its physical address",
                    ));
                }
                // Per 4 KiB page, as every PRP entry is: nothing assumes the hugepages are
                // contiguous with each other.
                (0..pages).map(|i| self.0.physical(virt as usize + i * PAGE)).collect()
            }
        }
    }

    fn unmap(&self, virt: *mut u8, _len: usize) {
        // Only type-1 mappings are recorded: physical addresses need no undoing.
        let mut a = self.0.arena.lock().expect("arena");
        let Some(i) = a.mapped.iter().position(|m| m.0 == virt as usize) else { return };
        let (_, l, iova) = a.mapped.remove(i);
        drop(a);
        self.0.unmap_dma(iova, l);
    }
}

impl Drop for Dma {
    /// Runs after the controller is disabled (it owns this memory through its handle).
    fn drop(&mut self) {
        let a = self.arena.get_mut().expect("arena");
        let (chunks, mapped) = (std::mem::take(&mut a.chunks), std::mem::take(&mut a.mapped));
        for (_, l, iova) in mapped {
            self.unmap_dma(iova, l);
        }
        for ch in chunks {
            if self.vfio.iommu == Iommu::Type1 {
                self.unmap_dma(ch.iova, HUGEPAGE);
            }
            drop(ch.mem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_match_linux_vfio_h() {
        // _IO(';', 100) .. as the kernel's headers expand them.
        assert_eq!(VFIO_GET_API_VERSION, 0x3b64);
        assert_eq!(VFIO_GROUP_GET_DEVICE_FD, 0x3b6a);
        assert_eq!(VFIO_IOMMU_MAP_DMA, 0x3b71);
        assert_eq!(VFIO_IOMMU_UNMAP_DMA, 0x3b72);
        assert_eq!(std::mem::size_of::<RegionInfo>(), 32);
        assert_eq!(std::mem::size_of::<DmaMap>(), 32);
        assert_eq!(std::mem::size_of::<Type1Info>(), 24);
    }

    #[test]
    fn iova_ranges_are_read_from_the_capability_chain() {
        // Type1Info (24 bytes), a migration capability (id 2) at 24, the IOVA range one at 40.
        let mut b = vec![0u8; 40 + 16 + 32];
        b[16..20].copy_from_slice(&24u32.to_le_bytes());
        b[24..26].copy_from_slice(&2u16.to_le_bytes());
        b[28..32].copy_from_slice(&40u32.to_le_bytes());
        b[40..42].copy_from_slice(&1u16.to_le_bytes());
        b[48..52].copy_from_slice(&2u32.to_le_bytes());
        for (i, (lo, hi)) in [(0u64, 0xfedf_ffffu64), (0xfef0_0000, (1 << 39) - 1)].iter().enumerate() {
            b[56 + 16 * i..64 + 16 * i].copy_from_slice(&lo.to_le_bytes());
            b[64 + 16 * i..72 + 16 * i].copy_from_slice(&hi.to_le_bytes());
        }
        assert_eq!(parse_iova_ranges(&b), Some(vec![(0, 0xfedf_ffff), (0xfef0_0000, (1 << 39) - 1)]));
        b[16..20].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(parse_iova_ranges(&b), None);
    }

    #[test]
    fn pages_are_found_in_free_runs() {
        let mut used = [0u64; 8];
        assert_eq!(free_run(&used, 512), Some(0));
        mark(&mut used, 0, 3, true);
        mark(&mut used, 5, 1, true);
        assert_eq!(free_run(&used, 2), Some(3));
        assert_eq!(free_run(&used, 3), Some(6));
        mark(&mut used, 0, 512, true);
        assert_eq!(free_run(&used, 1), None);
        mark(&mut used, 64, 2, false);
        assert_eq!(free_run(&used, 2), Some(64));
        assert_eq!(free_run(&used, 3), None);
    }
}
