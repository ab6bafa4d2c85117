//! iolab's own user-space NVMe driver (issue 16; SPDK class): polled I/O queue pairs, one per
//! worker thread, driven straight from the hot loop. Named for what will carry it, vfio-pci;
//! the core here knows nothing of VFIO.
//!
//! The driver reaches the controller through a small seam: [`Registers`] (BAR0: 32-bit register
//! reads and writes, and doorbell writes) and [`DmaMemory`] (memory the controller can reach, with
//! its IO addresses). A VFIO mapping of BAR0 and the type-1 IOMMU plug in there later; today the
//! only implementation is the simulated controller in [`sim`], which tests and the cost harness
//! (`examples/nvme_cost.rs`) put behind it.
//!
//! Per I/O: `submit` builds a Read or Write SQE in the ring (command id = the hot loop's slot tag,
//! PRP1/PRP2 from the slot buffer's page addresses, a PRP list for transfers over two pages) and
//! writes the SQ tail doorbell once per batch; `reap` takes completions by phase tag, turns a
//! non-zero status into `DEVICE_STATUS - status` and writes the CQ head doorbell once per
//! harvest. No allocation, no lock, no system call: the doorbells are the only device accesses.
//!
//! The controller an `open` attaches to is its handle (`IoInterface::Handle`): the interface's
//! target part (`take.rs`) takes the controller from the kernel through vfio-pci, attaches it and
//! hands the attached [`Controller`] to every thread's open through the engine; a test or the
//! harness hands the simulated one (`sim::attach`). No table of attached controllers, no fake
//! descriptors.
pub mod controller;
pub mod env;
pub mod queue;
pub mod sim;
pub mod take;
#[cfg(test)]
mod tests;
pub mod vfio;

use super::memory::{AlignedBuf, BufferMemory};
use super::{
    Behaviour, Complete, Completion, Interface, InterfaceInfo, IoChoice, IoInterface, Path, Request, Setup, Submit, SyncReader, TargetInfo,
    TargetKind, DEVICE_STATUS,
};
use crate::device::nvme::{DsmRange, Sqe, DSM_MAX_RANGES};
pub use controller::{Controller, Options, PAGE};
use queue::QueuePair;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The controller's registers (BAR0). MMIO: `&self`, callable from every queue pair's thread.
pub trait Registers: Send + Sync + 'static {
    fn read32(&self, offset: u32) -> u32;
    fn write32(&self, offset: u32, value: u32);
    /// A doorbell write. It must reach the device after every store the CPU made to queue and
    /// data memory before it (on x86 a store to uncached MMIO is not passed by earlier stores;
    /// other architectures need a store barrier here).
    fn doorbell(&self, offset: u32, value: u32);
}

/// Memory the controller can reach by DMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaRegion {
    /// Where the CPU sees it (page aligned, zeroed when allocated).
    pub virt: *mut u8,
    /// Where the controller sees it (contiguous for the whole region).
    pub iova: u64,
    pub len: usize,
}
// SAFETY: a region is plain addresses; who touches the memory is the owner's business.
unsafe impl Send for DmaRegion {}
unsafe impl Sync for DmaRegion {}

pub trait DmaMemory: Send + Sync + 'static {
    /// `len` bytes (a multiple of [`PAGE`]) of zeroed memory, page aligned, contiguous for the
    /// controller: queues and PRP lists.
    fn allocate(&self, len: usize) -> io::Result<DmaRegion>;
    fn free(&self, region: DmaRegion);
    /// Makes memory iolab already has (the hot loop's slot buffers: page aligned, a multiple of
    /// [`PAGE`] long) reachable by the controller: the IO address of each of its pages, which
    /// need not be contiguous (no-IOMMU mode gives physical pages).
    fn map(&self, virt: *mut u8, len: usize) -> io::Result<Vec<u64>>;
    fn unmap(&self, virt: *mut u8, len: usize);
}

// ------------------------------------------------------------------ the interface

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// How long `reap` waits for a completion it needs before it gives up on the controller.
pub const COMPLETION_TIMEOUT: Duration = Duration::from_secs(30);

/// A command id's PRP entries, kept from its last request. The hot loop gives a slot the same
/// buffer every time, so they are worked out once per slot, at open, not once per I/O: that was
/// about 15 instructions per 4 KiB read and a list of 255 entries written per 1 MiB one.
#[derive(Clone, Copy, Default)]
struct SlotPrps {
    buf: usize,
    /// The bytes the command transfers: its result when it succeeds.
    len: u32,
    prp1: u64,
    prp2: u64,
}

/// One worker thread's I/O queue pair on an attached controller.
pub struct VfioNvme<R: Registers + Clone, M: DmaMemory> {
    qp: Option<QueuePair<R>>,
    ctrl: Arc<Controller<R, M>>,
    nsid: u32,
    lba_shift: u32,
    /// The slot buffers: where they start and the IO address of each of their pages.
    buf_base: usize,
    buf_len: usize,
    pages: Box<[u64]>,
    /// Per command id (= slot tag): its last request's buffer and length, and their PRP entries.
    slots: Box<[SlotPrps]>,
    /// One PRP list page per command id, when a slot can span more than two pages.
    prp_lists: Option<DmaRegion>,
    /// A page for Dataset Management's range list, allocated at the first deallocation.
    dsm_list: Option<DmaRegion>,
    /// Commands outstanding, and the most there may be (entries - 1, so the SQ cannot overflow).
    inflight: u32,
    room: u32,
    /// SQ tail doorbell writes (batches submitted), for tests and the record.
    pub batches: u64,
}

impl<R: Registers + Clone, M: DmaMemory> VfioNvme<R, M> {
    fn qp(&mut self) -> &mut QueuePair<R> {
        self.qp.as_mut().expect("the queue pair lives until drop")
    }

    /// The queue pair's id on the controller and entries per ring.
    pub fn queue(&self) -> (u16, u32) {
        let qp = self.qp.as_ref().expect("queue pair");
        (qp.qid, qp.entries)
    }

    /// Works out and keeps command `tag`'s PRP entries for `len` bytes at `buf` (a request whose
    /// buffer or length is not the slot's last).
    #[cold]
    #[inline(never)]
    fn remember(&mut self, tag: u32, buf: *mut u8, len: u32) -> SlotPrps {
        let (prp1, prp2) = self.prps(tag, buf, len);
        let s = SlotPrps { buf: buf as usize, len, prp1, prp2 };
        self.slots[tag as usize] = s;
        s
    }

    /// PRP1 and PRP2 for `len` bytes at `buf`: PRP1 the first page's address with the offset in
    /// it; PRP2 the second page, or a PRP list of the pages after the first.
    fn prps(&mut self, tag: u32, buf: *mut u8, len: u32) -> (u64, u64) {
        let off = buf as usize - self.buf_base;
        let (page, in_page) = (off / PAGE, off % PAGE);
        let prp1 = self.pages[page] + in_page as u64;
        let first = PAGE - in_page;
        if len as usize <= first {
            (prp1, 0)
        } else if len as usize <= first + PAGE {
            (prp1, self.pages[page + 1])
        } else {
            (prp1, self.prp_list(tag, page + 1, len as usize - first))
        }
    }

    /// Fills command `tag`'s PRP list with the pages from `page` covering `rest` bytes.
    fn prp_list(&mut self, tag: u32, page: usize, rest: usize) -> u64 {
        let list = self.prp_lists.expect("PRP lists are allocated when a slot spans three pages");
        let at = tag as usize * PAGE;
        let entries = &self.pages[page..page + rest.div_ceil(PAGE)];
        // SAFETY: page `tag` of the list region is this command's own, and it is not in flight.
        let dst = unsafe { list.virt.add(at) as *mut u64 };
        for (i, e) in entries.iter().enumerate() {
            // SAFETY: open checked that a slot needs at most PAGE / 8 list entries.
            unsafe { std::ptr::write_volatile(dst.add(i), *e) };
        }
        list.iova + at as u64
    }

    /// Runs one command that is not a slot's (Flush, Dataset Management) to completion on this
    /// queue pair, with nothing else in flight: its own command id (one past the slots', which
    /// `reap` never sees), a doorbell, then polling for it.
    fn command(&mut self, mut sqe: Sqe, what: &str) -> io::Result<()> {
        if self.inflight != 0 {
            return Err(io::Error::other(format!("{what} with {} reads or writes in flight on the queue pair", self.inflight)));
        }
        let cid = self.slots.len() as u16;
        sqe.cdw0 = (sqe.cdw0 & 0xffff) | (cid as u32) << 16;
        let qp = self.qp();
        qp.push(sqe);
        qp.ring_sq();
        self.batches += 1;
        let since = Instant::now();
        let mut idle = 0u32;
        loop {
            let qp = self.qp.as_mut().expect("queue pair");
            if let Some(dw3) = qp.peek() {
                qp.advance();
                qp.ring_cq();
                let (tag, status) = (dw3 & 0xffff, dw3 >> 17);
                if tag != cid as u32 {
                    return Err(io::Error::other(format!(
                        "the NVMe controller completed command id {tag} while iolab waited for its {what}"
                    )));
                }
                if status != 0 {
                    return Err(io::Error::other(format!("{what} failed: {}", crate::device::nvme::status_text(status as u64))));
                }
                return Ok(());
            }
            std::hint::spin_loop();
            idle += 1;
            if idle.is_multiple_of(1 << 12) && since.elapsed() > COMPLETION_TIMEOUT {
                return Err(self.stuck());
            }
        }
    }

    /// NVMe Flush of the namespace: every write completed before it reaches non-volatile media.
    /// Without a volatile write cache (VWC) there is nothing to flush and nothing is sent.
    pub fn flush_cache(&mut self) -> io::Result<()> {
        if !self.ctrl.id.volatile_write_cache() {
            return Ok(());
        }
        self.command(Sqe::flush(0, self.nsid), "NVMe Flush")
    }

    /// NVMe Dataset Management, Deallocate, of the whole blocks within `len` bytes at byte
    /// `offset` of the namespace: up to 256 ranges a command, the range list in a DMA page of
    /// the queue pair's own. A controller without Dataset Management (ONCS) is sent nothing.
    pub fn deallocate_range(&mut self, offset: u64, len: u64) -> io::Result<()> {
        if !self.ctrl.id.dataset_management() {
            return Ok(());
        }
        let end = offset.saturating_add(len);
        if end > self.ctrl.ns.size_bytes() {
            return Err(invalid(format!("a deallocation to byte {end}, beyond the namespace's {} bytes", self.ctrl.ns.size_bytes())));
        }
        let ranges = DsmRange::covering(offset, len, self.lba_shift);
        if ranges.is_empty() {
            return Ok(());
        }
        let list = match self.dsm_list {
            Some(r) => r,
            None => *self.dsm_list.insert(self.ctrl.mem.allocate(PAGE)?),
        };
        for batch in ranges.chunks(DSM_MAX_RANGES) {
            let dst = list.virt as *mut DsmRange;
            for (i, r) in batch.iter().enumerate() {
                // SAFETY: the page is this queue pair's own, PAGE bytes = 256 ranges of 16, and
                // no command using it is in flight (`command` waits for each).
                unsafe { std::ptr::write_volatile(dst.add(i), *r) };
            }
            self.command(Sqe::deallocate(0, self.nsid, batch.len() as u32, list.iova), "NVMe Dataset Management (Deallocate)")?;
        }
        Ok(())
    }

    #[cold]
    fn stuck(&self) -> io::Error {
        let csts = self.ctrl.regs().read32(controller::REG_CSTS);
        let fatal = if csts & controller::CSTS_CFS != 0 { ", and it reports a fatal status (CSTS.CFS)" } else { "" };
        io::Error::new(
            io::ErrorKind::TimedOut,
            format!("the NVMe controller completed nothing on I/O queue {} for {COMPLETION_TIMEOUT:?}{fatal}", self.queue().0),
        )
    }
}

impl<R: Registers + Clone, M: DmaMemory> IoInterface for VfioNvme<R, M> {
    /// The attached controller: each thread creates its own queue pair on it.
    type Handle = Arc<Controller<R, M>>;

    fn open(setup: &Setup, ctrl: &Arc<Controller<R, M>>) -> io::Result<Self> {
        if setup.fds.len() != 1 {
            return Err(invalid(format!("the NVMe driver drives one namespace per run; {} targets were given", setup.fds.len())));
        }
        let ctrl = ctrl.clone();
        let (bs, qd, ns) = (setup.bs, setup.qd, ctrl.ns);
        if bs == 0 || bs % ns.lba_size != 0 || (bs >> ns.lba_shift) > 1 << 16 {
            return Err(invalid(format!("--bs {bs} is not 1 to 65536 blocks of the namespace's {} bytes", ns.lba_size)));
        }
        if let Some(max) = ctrl.max_transfer.filter(|m| bs as u64 > *m) {
            return Err(invalid(format!("--bs {bs} exceeds the controller's largest transfer of {max} bytes (MDTS)")));
        }
        // A slot spans at most 1 + bs / PAGE + 1 pages; one list page holds PAGE / 8 entries.
        if bs as usize > PAGE * PAGE / 8 {
            return Err(invalid(format!("--bs {bs} needs more than one PRP list page; the driver takes up to {} bytes", PAGE * PAGE / 8)));
        }
        let base = setup.buffers as usize;
        if !base.is_multiple_of(PAGE) || setup.buffers_len < bs as usize * qd as usize {
            return Err(invalid("the slot buffers are not page aligned or too short".into()));
        }
        let entries = ctrl.queue_entries(qd).map_err(|e| invalid(e.to_string()))?;
        let buf_len = setup.buffers_len.div_ceil(PAGE) * PAGE;
        let pages = ctrl.mem.map(setup.buffers, buf_len)?.into_boxed_slice();
        let prp_lists = if bs as usize > PAGE {
            match ctrl.mem.allocate(qd as usize * PAGE) {
                Ok(r) => Some(r),
                Err(e) => {
                    ctrl.mem.unmap(setup.buffers, buf_len);
                    return Err(e);
                }
            }
        } else {
            None
        };
        let qp = match ctrl.create_queue_pair(entries) {
            Ok(qp) => qp,
            Err(e) => {
                ctrl.mem.unmap(setup.buffers, buf_len);
                if let Some(r) = prp_lists {
                    ctrl.mem.free(r);
                }
                return Err(io::Error::other(e));
            }
        };
        let mut d = VfioNvme {
            qp: Some(qp),
            nsid: ctrl.nsid,
            lba_shift: ns.lba_shift,
            ctrl,
            buf_base: base,
            buf_len,
            pages,
            slots: vec![SlotPrps::default(); qd as usize].into(),
            prp_lists,
            dsm_list: None,
            inflight: 0,
            room: entries - 1,
            batches: 0,
        };
        for tag in 0..qd {
            d.remember(tag, setup.buffers.wrapping_add((tag * bs) as usize), bs);
        }
        Ok(d)
    }

    #[inline]
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize> {
        let n = reqs.len().min((self.room - self.inflight) as usize);
        for r in &reqs[..n] {
            let mut s = self.slots[r.tag as usize];
            if s.buf != r.buf as usize || s.len != r.len {
                s = self.remember(r.tag, r.buf, r.len);
            }
            let sqe = Sqe::rw(r.write, r.tag as u16, self.nsid, self.lba_shift, r.offset, r.len, s.prp1, s.prp2);
            self.qp().push(sqe);
        }
        if n > 0 {
            self.qp().ring_sq();
            self.inflight += n as u32;
            self.batches += 1;
        }
        Ok(n)
    }

    #[inline]
    fn reap(&mut self, min: usize, out: &mut [Completion]) -> io::Result<usize> {
        let mut k = 0;
        let mut idle = 0u32;
        let mut since: Option<Instant> = None;
        loop {
            let before = k;
            let qp = self.qp.as_mut().expect("queue pair");
            while k < out.len() {
                let Some(dw3) = qp.peek() else { break };
                qp.advance();
                let tag = dw3 & 0xffff;
                let status = dw3 >> 17;
                let Some(&SlotPrps { len, .. }) = self.slots.get(tag as usize) else {
                    return Err(io::Error::other(format!("the NVMe controller completed command id {tag}, which iolab never issued")));
                };
                let result = if status == 0 { len as i64 } else { DEVICE_STATUS - status as i64 };
                out[k] = Completion { tag, result };
                k += 1;
            }
            if k > before {
                qp.ring_cq();
                self.inflight -= (k - before) as u32;
            }
            if k >= min {
                return Ok(k);
            }
            // Waiting for the device: spin, looking at the time only now and then.
            std::hint::spin_loop();
            idle += 1;
            if idle.is_multiple_of(1 << 16) {
                let t = *since.get_or_insert_with(Instant::now);
                if t.elapsed() > COMPLETION_TIMEOUT {
                    return Err(self.stuck());
                }
            }
        }
    }

    fn flush(&mut self) -> Option<io::Result<()>> {
        Some(self.flush_cache())
    }

    fn deallocate(&mut self, offset: u64, len: u64) -> Option<io::Result<()>> {
        Some(self.deallocate_range(offset, len))
    }
}

impl<R: Registers + Clone, M: DmaMemory> Drop for VfioNvme<R, M> {
    fn drop(&mut self) {
        if let Some(qp) = self.qp.take() {
            // A queue that cannot be deleted is left to the controller's reset at detach.
            let _ = self.ctrl.delete_queue_pair(qp);
        }
        for r in [self.prp_lists.take(), self.dsm_list.take()].into_iter().flatten() {
            self.ctrl.mem.free(r);
        }
        self.ctrl.mem.unmap(self.buf_base as *mut u8, self.buf_len);
    }
}

/// What the attached controller does with Flush and Dataset Management, from its Identify data.
pub fn device_commands<R: Registers, M: DmaMemory>(ctrl: &Controller<R, M>) -> super::DeviceCommands {
    super::DeviceCommands {
        flush: ctrl.id.volatile_write_cache(),
        deallocate: ctrl.id.dataset_management(),
        deallocated_reads_zeroes: ctrl.id.dataset_management() && ctrl.ns.deallocated_reads_zeroes(),
    }
}

// ------------------------------------------------------------------ the interface over VFIO

/// The driver over a controller taken from the kernel through vfio-pci (`take.rs`): the
/// `vfio-nvme` interface.
pub type UserDriver = VfioNvme<vfio::BarRegs, vfio::DmaHandle>;

pub const NAME: &str = "vfio-nvme";

/// -i vfio-nvme's own options.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
pub struct VfioOptions {
    /// -i vfio-nvme only: allow VFIO's unsafe no-IOMMU mode where the machine has no IOMMU
    /// (the controller then reaches memory by physical address, unprotected).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub vfio_noiommu: bool,
}

/// The rules of `--vfio-noiommu`, for any job: only vfio-nvme takes it.
impl super::OptionsPart for VfioOptions {
    fn check(&self, io: &IoChoice) -> Result<(), String> {
        if self.vfio_noiommu && io.interface.name() != NAME {
            return Err(format!("--vfio-noiommu is for -i {NAME} (VFIO without an IOMMU): drop it"));
        }
        Ok(())
    }
}

/// Page-aligned memory of its own, for the verify reader's transfers: in hugepages when the
/// controller has no IOMMU, like the slot buffers.
struct Bounce {
    mem: AlignedBuf,
    len: usize,
}

impl Bounce {
    fn new(len: usize, memory: BufferMemory) -> Result<Bounce, String> {
        Ok(Bounce { mem: AlignedBuf::new(len.next_multiple_of(PAGE), memory)?, len })
    }
    fn ptr(&self) -> *mut u8 {
        self.mem.ptr
    }
}

/// One synchronous read through the verify reader's own queue pair.
fn read_one(qp: &mut UserDriver, bounce: &mut Bounce, offset: u64) -> i64 {
    let req = Request { tag: 0, write: false, file: 0, offset, len: bounce.len as u32, buf: bounce.ptr() };
    let mut out = [Completion::default()];
    match qp.submit(&[req]).and_then(|_| qp.reap(1, &mut out)) {
        Ok(_) => out[0].result,
        Err(e) => -(e.raw_os_error().unwrap_or(libc::EIO) as i64),
    }
}

impl Interface for UserDriver {
    type Target = take::Taken;

    const INFO: &'static InterfaceInfo = &InterfaceInfo {
        name: NAME,
        note: Some("iolab's own user-space NVMe driver"),
        execution: "user-space driver, polled (SPDK class)",
        behaviour: Behaviour::Async,
        submits: &[Submit::Syscall],
        completes: &[Complete::Poll],
        how: "iolab's own NVMe driver: the controller is taken from the kernel (vfio-pci, restored after), each thread has its own I/O queue pair with interrupts off, submits by a doorbell write per batch (no system call) and polls its completion queue; DMA memory in 2 MiB hugepages through the IOMMU (--vfio-noiommu: physical addresses); target /dev/nvmeXnY or PCI-ADDR/NSID",
        async_needs_direct: false,
        diskless: false,
        targets: &[TargetKind::NvmePci],
        polls_device_queues: false,
        bypasses_kernel: true,
    };

    fn check_job(io: &IoChoice) -> Result<(), String> {
        if !io.direct {
            return Err(format!("{NAME} never goes through the page cache (it drives the controller itself): drop --buffered"));
        }
        Ok(())
    }

    fn machine_support() -> Result<(), crate::interfaces::InterfaceError> {
        vfio::machine_support(crate::settings::Settings::system().sysfs_root())
    }

    fn expected_path(_io: &IoChoice, _targets: &[TargetInfo]) -> (Path, Option<String>) {
        (Path::Polled, None)
    }

    fn device_commands(ctrl: &Self::Handle) -> super::DeviceCommands {
        device_commands(ctrl)
    }

    fn mechanism(_io: &IoChoice) -> String {
        "polled (user space): each thread spins on its own completion queue; queues created with interrupts off, no vector requested".into()
    }

    /// Without an IOMMU the controller gets physical addresses: hugepages keep them valid.
    fn buffer_memory(io: &IoChoice) -> BufferMemory {
        if io.options.vfio.vfio_noiommu {
            BufferMemory::Hugepages
        } else {
            BufferMemory::Heap
        }
    }

    fn sync_reader(target: &take::Taken, _fd: RawFd) -> Result<SyncReader, String> {
        let ctrl = super::Acquire::handle(target).clone();
        let mut own: Option<(UserDriver, Bounce)> = None;
        Ok(Box::new(move |fd, buf, offset| {
            if own.as_ref().is_none_or(|(_, b)| b.len != buf.len()) {
                own = None;
                let memory = if ctrl.mem.0.iommu() == vfio::Iommu::NoIommu { BufferMemory::Hugepages } else { BufferMemory::Heap };
                let bounce = match Bounce::new(buf.len(), memory) {
                    Ok(b) => b,
                    Err(_) => return -(libc::ENOMEM as i64),
                };
                let setup = Setup {
                    fds: &[fd],
                    buffers: bounce.ptr(),
                    buffers_len: bounce.mem.len(),
                    bs: buf.len() as u32,
                    qd: 1,
                    submit: Submit::Syscall,
                    complete: Complete::Poll,
                    batch_submit: 1,
                    io: &IoChoice::default(),
                    sq_cpu: None,
                };
                match UserDriver::open(&setup, &ctrl) {
                    Ok(qp) => own = Some((qp, bounce)),
                    Err(e) => return -(e.raw_os_error().unwrap_or(libc::EIO) as i64),
                }
            }
            let (qp, bounce) = own.as_mut().expect("opened");
            let r = read_one(qp, bounce, offset);
            if r > 0 {
                buf.copy_from_slice(&bounce.mem.slice()[..buf.len()]);
            }
            r
        }))
    }
}
