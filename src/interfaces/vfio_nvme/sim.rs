//! A simulated NVMe controller in memory, behind the driver's seam: tests and the cost harness
//! run the driver against it without a device, root or VFIO.
//!
//! It acts in the doorbell write, on the thread that rings it: an SQ tail doorbell makes it
//! fetch every new entry of that queue, execute it (admin commands on queue 0: Identify,
//! Set Features (Number of Queues), Create/Delete I/O SQ and CQ; Read and Write on I/O queues,
//! moving data between an in-memory namespace and host memory by PRP1, PRP2 and PRP lists) and
//! post its completion with the ring's current phase. It checks what a real controller would
//! trip on (doorbells off the stride, unmapped or misaligned PRPs, a CQ overflowing, interrupts
//! left enabled) and keeps each as a `fault` for tests to assert there are none.
//!
//! Scripted behaviour ([`Script`]): error statuses for the Nth or every Nth I/O command,
//! completion of each doorbell's batch in reverse order, and holding every Nth completion back
//! until that queue pair's next doorbell write (out of order across batches). Each queue is only
//! ever touched from the thread that rings its doorbells, so host memory is never written
//! behind a polling thread's back.
use super::controller::{CC_EN, CSTS_RDY, PAGE, REG_ACQ, REG_AQA, REG_ASQ, REG_CAP, REG_CC, REG_CSTS, REG_VS};
use super::{DmaMemory, DmaRegion, Registers};
use crate::device::nvme::{self as spec, Cqe, Sqe};
use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

/// What the simulated controller looks like.
#[derive(Clone, Debug)]
pub struct Config {
    /// Namespace size in blocks, and log2 of its block size.
    pub blocks: u64,
    pub lba_shift: u32,
    /// CAP.DSTRD.
    pub dstrd: u32,
    /// CAP.MQES + 1.
    pub max_entries: u32,
    /// Identify Controller MDTS (0: no limit).
    pub mdts: u8,
    /// I/O queue pairs granted.
    pub queues: u16,
    /// Give every mapped page its own, scattered IO address (as no-IOMMU mode's physical pages),
    /// so a driver assuming contiguity is caught.
    pub scatter: bool,
    /// Move data (false: complete Reads and Writes without touching memory, for the cost harness).
    pub copy: bool,
    /// Identify Controller VWC bit 0 (a volatile write cache) and ONCS bit 2 (Dataset
    /// Management), and Identify Namespace DLFEAT: what Flush and Deallocate do here.
    pub vwc: bool,
    pub dsm: bool,
    pub dlfeat: u8,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            blocks: 4096,
            lba_shift: 12,
            dstrd: 0,
            max_entries: 1024,
            mdts: 5,
            queues: 16,
            scatter: true,
            copy: true,
            vwc: true,
            dsm: true,
            dlfeat: 1,
        }
    }
}

/// Statuses and orders a test scripts. I/O commands are numbered from 1 in the order fetched,
/// over all queues.
#[derive(Clone, Debug, Default)]
pub struct Script {
    /// Command N completes with this status (as `status_text` takes it).
    pub error_at: Option<(u64, u16)>,
    /// Every Nth command completes with this status.
    pub error_every: Option<(u64, u16)>,
    /// Post each doorbell's completions last fetched first.
    pub reverse: bool,
    /// Hold every Nth completion until the queue pair's next doorbell write.
    pub hold_every: Option<u64>,
}

struct SimSq {
    base: u64,
    entries: u32,
    head: u32,
    cqid: u16,
}

struct SimCq {
    base: u64,
    entries: u32,
    tail: u32,
    head: u32,
    phase: bool,
}

/// What the controller did, for tests.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// SQ tail and CQ head doorbell writes, per queue id.
    pub sq_doorbells: BTreeMap<u16, u64>,
    pub cq_doorbells: BTreeMap<u16, u64>,
    pub io_commands: u64,
    pub reads: u64,
    pub writes: u64,
    /// Flush commands, and blocks deallocated by Dataset Management (zeroed, as DLFEAT 1 says).
    pub flushes: u64,
    pub deallocated_blocks: u64,
    /// Data pointers that were PRP lists.
    pub prp_lists: u64,
    /// Completions posted out of the order their commands were fetched.
    pub out_of_order: u64,
    pub cq_wraps: u64,
    /// Queues created / deleted.
    pub created: u64,
    pub deleted: u64,
}

struct State {
    cfg: Config,
    script: Script,
    cc: u32,
    csts: u32,
    aqa: u32,
    asq: u64,
    acq: u64,
    sqs: BTreeMap<u16, SimSq>,
    cqs: BTreeMap<u16, SimCq>,
    /// IO address → (virtual address, length).
    regions: BTreeMap<u64, (usize, usize)>,
    next_iova: u64,
    data: Vec<u8>,
    held: Vec<(u16, Cqe)>,
    io_completions: u64,
    counters: Counters,
    faults: Vec<String>,
}

/// The simulated controller. [`SimRegs`] and [`SimDma`] are its seam.
pub struct Sim {
    state: Mutex<State>,
}

#[derive(Clone)]
pub struct SimRegs(pub Arc<Sim>);
#[derive(Clone)]
pub struct SimDma(pub Arc<Sim>);

impl Sim {
    pub fn new(cfg: Config) -> Arc<Sim> {
        // Without data movement there is nothing to keep (the cost harness's 1 GiB namespace).
        let data = if cfg.copy { vec![0u8; (cfg.blocks << cfg.lba_shift) as usize] } else { Vec::new() };
        Arc::new(Sim {
            state: Mutex::new(State {
                cfg,
                script: Script::default(),
                cc: 0,
                csts: 0,
                aqa: 0,
                asq: 0,
                acq: 0,
                sqs: BTreeMap::new(),
                cqs: BTreeMap::new(),
                regions: BTreeMap::new(),
                next_iova: 0x10_0000_0000,
                data,
                held: Vec::new(),
                io_completions: 0,
                counters: Counters::default(),
                faults: Vec::new(),
            }),
        })
    }

    pub(crate) fn seam(self: &Arc<Sim>) -> (SimRegs, SimDma) {
        (SimRegs(self.clone()), SimDma(self.clone()))
    }

    pub fn script(&self, script: Script) {
        self.state.lock().expect("sim").script = script;
    }

    pub fn counters(&self) -> Counters {
        self.state.lock().expect("sim").counters.clone()
    }

    /// What a real controller would have tripped on; empty when the driver behaved.
    pub fn faults(&self) -> Vec<String> {
        self.state.lock().expect("sim").faults.clone()
    }

    /// The namespace's bytes from `offset`, for checks.
    pub fn data(&self, offset: u64, len: usize) -> Vec<u8> {
        self.state.lock().expect("sim").data[offset as usize..offset as usize + len].to_vec()
    }

    #[cfg(test)]
    pub(crate) fn set_data(&self, offset: u64, bytes: &[u8]) {
        self.state.lock().expect("sim").data[offset as usize..offset as usize + bytes.len()].copy_from_slice(bytes);
    }

    /// Live I/O queue ids.
    pub fn io_queues(&self) -> Vec<u16> {
        self.state.lock().expect("sim").sqs.keys().copied().filter(|q| *q != 0).collect()
    }

    /// A doorbell write: what the controller does when it sees one. Never inlined, so the cost
    /// harness can leave it out (callgrind `--toggle-collect`).
    #[inline(never)]
    pub fn ring(&self, offset: u32, value: u32) {
        let mut s = self.state.lock().expect("sim");
        s.doorbell(offset, value);
    }
}

impl Registers for SimRegs {
    fn read32(&self, offset: u32) -> u32 {
        let s = self.0.state.lock().expect("sim");
        let cap = (s.cfg.max_entries as u64 - 1) | 1 << 16 | 1 << 24 | (s.cfg.dstrd as u64) << 32 | 1 << 37;
        match offset {
            REG_CAP => cap as u32,
            o if o == REG_CAP + 4 => (cap >> 32) as u32,
            REG_VS => 0x0001_0400,
            REG_CC => s.cc,
            REG_CSTS => s.csts,
            REG_AQA => s.aqa,
            _ => 0,
        }
    }

    fn write32(&self, offset: u32, value: u32) {
        let mut s = self.0.state.lock().expect("sim");
        match offset {
            REG_CC => s.set_cc(value),
            REG_AQA => s.aqa = value,
            REG_ASQ => s.asq = (s.asq & !0xffff_ffff) | value as u64,
            o if o == REG_ASQ + 4 => s.asq = (s.asq & 0xffff_ffff) | (value as u64) << 32,
            REG_ACQ => s.acq = (s.acq & !0xffff_ffff) | value as u64,
            o if o == REG_ACQ + 4 => s.acq = (s.acq & 0xffff_ffff) | (value as u64) << 32,
            o if o >= 0x1000 => s.fault(format!("a doorbell ({o:#x}) written with write32")),
            _ => {}
        }
    }

    #[inline(always)]
    fn doorbell(&self, offset: u32, value: u32) {
        self.0.ring(offset, value);
    }
}

impl DmaMemory for SimDma {
    fn allocate(&self, len: usize) -> io::Result<DmaRegion> {
        let layout = std::alloc::Layout::from_size_align(len.max(PAGE), PAGE).map_err(io::Error::other)?;
        // SAFETY: non-zero size.
        let virt = unsafe { std::alloc::alloc_zeroed(layout) };
        if virt.is_null() {
            return Err(io::Error::from(io::ErrorKind::OutOfMemory));
        }
        let mut s = self.0.state.lock().expect("sim");
        let iova = s.take_iova(len);
        s.regions.insert(iova, (virt as usize, len));
        Ok(DmaRegion { virt, iova, len })
    }

    fn free(&self, r: DmaRegion) {
        self.0.state.lock().expect("sim").regions.remove(&r.iova);
        let layout = std::alloc::Layout::from_size_align(r.len.max(PAGE), PAGE).expect("layout");
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(r.virt, layout) };
    }

    fn map(&self, virt: *mut u8, len: usize) -> io::Result<Vec<u64>> {
        let mut s = self.0.state.lock().expect("sim");
        let pages = len.div_ceil(PAGE);
        if s.cfg.scatter {
            // Pages in reverse order of address, each apart from the next.
            let iovas: Vec<u64> = (0..pages).map(|_| s.take_iova(PAGE)).rev().collect();
            for (i, iova) in iovas.iter().enumerate() {
                s.regions.insert(*iova, (virt as usize + i * PAGE, PAGE));
            }
            Ok(iovas)
        } else {
            let iova = s.take_iova(pages * PAGE);
            s.regions.insert(iova, (virt as usize, pages * PAGE));
            Ok((0..pages).map(|i| iova + (i * PAGE) as u64).collect())
        }
    }

    fn unmap(&self, virt: *mut u8, len: usize) {
        let (lo, hi) = (virt as usize, virt as usize + len);
        self.0.state.lock().expect("sim").regions.retain(|_, (v, _)| *v < lo || *v >= hi);
    }
}

/// Why a data transfer failed.
type Fault = String;

impl State {
    fn fault(&mut self, what: String) {
        self.faults.push(what);
    }

    fn take_iova(&mut self, len: usize) -> u64 {
        let iova = self.next_iova;
        // A guard page between regions: running off one is a fault, not the next one's data.
        self.next_iova += (len.div_ceil(PAGE) + 1) as u64 * PAGE as u64;
        iova
    }

    /// Host memory at `iova` for `len` bytes within one mapped region.
    fn host(&self, iova: u64, len: usize) -> Result<*mut u8, Fault> {
        let (start, (virt, rlen)) = self.regions.range(..=iova).next_back().ok_or_else(|| format!("IO address {iova:#x} is not mapped"))?;
        let off = (iova - start) as usize;
        if off + len > *rlen {
            return Err(format!("{len} bytes at IO address {iova:#x} run past its mapping"));
        }
        Ok((virt + off) as *mut u8)
    }

    fn set_cc(&mut self, cc: u32) {
        let was = self.cc & CC_EN != 0;
        self.cc = cc;
        if cc & CC_EN != 0 && !was {
            if (cc >> 16) & 0xf != 6 || (cc >> 20) & 0xf != 4 {
                self.fault(format!("enabled with CC {cc:#x}: IOSQES must be 6, IOCQES 4"));
            }
            let (sqs, cqs) = ((self.aqa & 0xfff) + 1, ((self.aqa >> 16) & 0xfff) + 1);
            self.sqs.insert(0, SimSq { base: self.asq, entries: sqs, head: 0, cqid: 0 });
            self.cqs.insert(0, SimCq { base: self.acq, entries: cqs, tail: 0, head: 0, phase: true });
            self.csts = CSTS_RDY;
        } else if cc & CC_EN == 0 && was {
            self.sqs.clear();
            self.cqs.clear();
            self.held.clear();
            self.csts = 0;
        }
    }

    fn doorbell(&mut self, offset: u32, value: u32) {
        let stride = 4u32 << self.cfg.dstrd;
        if offset < 0x1000 || !(offset - 0x1000).is_multiple_of(stride) {
            return self.fault(format!("doorbell write at {offset:#x} is not on the {stride}-byte stride"));
        }
        let index = (offset - 0x1000) / stride;
        let qid = (index / 2) as u16;
        // Completions held back for this queue pair go out on its next doorbell write.
        let held: Vec<Cqe> = {
            let (mine, rest): (Vec<_>, Vec<_>) = self.held.drain(..).partition(|(q, _)| *q == qid);
            self.held = rest;
            mine.into_iter().map(|(_, c)| c).collect()
        };
        for c in held {
            self.post(qid, c);
        }
        if index % 2 == 1 {
            *self.counters.cq_doorbells.entry(qid).or_default() += 1;
            let Some(cq) = self.cqs.get_mut(&qid) else {
                return self.fault(format!("CQ head doorbell of queue {qid}, which does not exist"));
            };
            if value < cq.entries {
                cq.head = value;
                return;
            }
            let entries = cq.entries;
            return self.fault(format!("CQ {qid} head {value} is past its {entries} entries"));
        }
        *self.counters.sq_doorbells.entry(qid).or_default() += 1;
        let Some(sq) = self.sqs.get(&qid) else { return self.fault(format!("SQ tail doorbell of queue {qid}, which does not exist")) };
        if value >= sq.entries {
            return self.fault(format!("SQ {qid} tail {value} is past its {} entries", sq.entries));
        }
        let mut done = Vec::new();
        loop {
            let sq = self.sqs.get_mut(&qid).expect("sq");
            if sq.head == value {
                break;
            }
            let at = sq.base + sq.head as u64 * 64;
            sq.head = (sq.head + 1) % sq.entries;
            let (head, cqid) = (sq.head, sq.cqid);
            let sqe = match self.host(at, 64) {
                // SAFETY: 64 mapped bytes of the SQ the host wrote before ringing.
                Ok(p) => unsafe { std::ptr::read_volatile(p as *const Sqe) },
                Err(f) => return self.fault(format!("SQ {qid}: {f}")),
            };
            let (status, dw0) = if qid == 0 { self.admin(&sqe) } else { self.io(&sqe) };
            let mut c = Cqe::new(sqe.cid(), qid, head as u16, status, false);
            c.dw0 = dw0;
            done.push((cqid, c, qid != 0));
        }
        if self.script.reverse && done.len() > 1 {
            done.reverse();
            self.counters.out_of_order += done.len() as u64 - 1;
        }
        let last = done.len().saturating_sub(1);
        for (i, (cqid, c, io)) in done.into_iter().enumerate() {
            if io {
                self.io_completions += 1;
            }
            // Only a completion with another posted after it is held, so the host harvests
            // something, rings the CQ head doorbell and so gets the held one too.
            if io && i < last && self.script.hold_every.is_some_and(|n| self.io_completions.is_multiple_of(n)) {
                self.counters.out_of_order += 1;
                self.held.push((cqid, c));
            } else {
                self.post(cqid, c);
            }
        }
    }

    /// Writes `c` at CQ `cqid`'s tail with the ring's phase.
    fn post(&mut self, cqid: u16, mut c: Cqe) {
        let Some(cq) = self.cqs.get_mut(&cqid) else { return self.fault(format!("completion for CQ {cqid}, which does not exist")) };
        if (cq.tail + 1) % cq.entries == cq.head {
            return self.fault(format!("CQ {cqid} is full: the host let more commands out than it can take back"));
        }
        c.dw3 = (c.dw3 & !(1 << 16)) | (cq.phase as u32) << 16;
        // The SQ head as it is when the entry is posted (later than fetched, for a held one).
        let sqid = (c.dw2 >> 16) as u16;
        let head = self.sqs.get(&sqid).map_or(c.dw2 & 0xffff, |sq| sq.head);
        c.dw2 = (sqid as u32) << 16 | head;
        let Some(cq) = self.cqs.get_mut(&cqid) else { return };
        let at = cq.base + cq.tail as u64 * 16;
        cq.tail += 1;
        if cq.tail == cq.entries {
            cq.tail = 0;
            cq.phase = !cq.phase;
            self.counters.cq_wraps += 1;
        }
        match self.host(at, 16) {
            // SAFETY: 16 mapped bytes of the CQ; the host reads them only after the phase flips.
            Ok(p) => unsafe { std::ptr::write_volatile(p as *mut Cqe, c) },
            Err(f) => self.fault(format!("CQ {cqid}: {f}")),
        }
    }

    fn admin(&mut self, sqe: &Sqe) -> (u16, u32) {
        let qid = sqe.cdw10 as u16;
        let entries = (sqe.cdw10 >> 16) + 1;
        match sqe.opcode() {
            spec::ADMIN_IDENTIFY => {
                let mut page = vec![0u8; PAGE];
                match sqe.cdw10 & 0xff {
                    1 => {
                        page[77] = self.cfg.mdts;
                        page[520] = if self.cfg.dsm { 1 << 2 } else { 0 };
                        page[525] = self.cfg.vwc as u8;
                    }
                    0 if sqe.nsid == 1 => {
                        page[0..8].copy_from_slice(&self.cfg.blocks.to_le_bytes());
                        page[8..16].copy_from_slice(&self.cfg.blocks.to_le_bytes());
                        page[33] = self.cfg.dlfeat;
                        page[128 + 2] = self.cfg.lba_shift as u8;
                    }
                    0 => return (0x0b, 0),
                    _ => return (spec::SC_INVALID_FIELD, 0),
                }
                match self.host(sqe.prp1, PAGE) {
                    // SAFETY: a mapped page.
                    Ok(p) => unsafe { std::ptr::copy_nonoverlapping(page.as_ptr(), p, PAGE) },
                    Err(f) => {
                        self.fault(format!("Identify: {f}"));
                        return (spec::SC_DATA_TRANSFER_ERROR, 0);
                    }
                }
                (0, 0)
            }
            spec::ADMIN_SET_FEATURES if sqe.cdw10 & 0xff == spec::FEATURE_NUMBER_OF_QUEUES => {
                let n = self.cfg.queues as u32 - 1;
                (0, n << 16 | n)
            }
            spec::ADMIN_CREATE_IO_CQ => {
                if qid == 0 || qid > self.cfg.queues || self.cqs.contains_key(&qid) {
                    return (spec::SC_INVALID_QUEUE_ID, 0);
                }
                if entries < 2 || entries > self.cfg.max_entries {
                    return (spec::SC_INVALID_QUEUE_SIZE, 0);
                }
                if sqe.cdw11 & 2 != 0 {
                    self.fault(format!("CQ {qid} created with interrupts enabled"));
                }
                if sqe.cdw11 & 1 == 0 || !sqe.prp1.is_multiple_of(PAGE as u64) {
                    return (spec::SC_INVALID_FIELD, 0);
                }
                self.counters.created += 1;
                self.cqs.insert(qid, SimCq { base: sqe.prp1, entries, tail: 0, head: 0, phase: true });
                (0, 0)
            }
            spec::ADMIN_CREATE_IO_SQ => {
                let cqid = (sqe.cdw11 >> 16) as u16;
                if qid == 0 || qid > self.cfg.queues || self.sqs.contains_key(&qid) {
                    return (spec::SC_INVALID_QUEUE_ID, 0);
                }
                if !self.cqs.contains_key(&cqid) || cqid == 0 {
                    return (0x100, 0); // completion queue invalid
                }
                if entries < 2 || entries > self.cfg.max_entries {
                    return (spec::SC_INVALID_QUEUE_SIZE, 0);
                }
                self.sqs.insert(qid, SimSq { base: sqe.prp1, entries, head: 0, cqid });
                (0, 0)
            }
            spec::ADMIN_DELETE_IO_SQ => match self.sqs.remove(&qid) {
                Some(_) if qid != 0 => {
                    self.held.retain(|(q, _)| *q != qid);
                    (0, 0)
                }
                _ => (spec::SC_INVALID_QUEUE_ID, 0),
            },
            spec::ADMIN_DELETE_IO_CQ => {
                if self.sqs.values().any(|s| s.cqid == qid) {
                    return (0x10c, 0); // invalid queue deletion
                }
                match self.cqs.remove(&qid) {
                    Some(_) if qid != 0 => {
                        self.counters.deleted += 1;
                        (0, 0)
                    }
                    _ => (spec::SC_INVALID_QUEUE_ID, 0),
                }
            }
            _ => (spec::SC_INVALID_OPCODE, 0),
        }
    }

    fn io(&mut self, sqe: &Sqe) -> (u16, u32) {
        self.counters.io_commands += 1;
        let n = self.counters.io_commands;
        let write = match sqe.opcode() {
            spec::OP_READ => false,
            spec::OP_WRITE => true,
            spec::OP_FLUSH if self.cfg.vwc && sqe.nsid == 1 => {
                self.counters.flushes += 1;
                return (0, 0);
            }
            spec::OP_DSM if self.cfg.dsm && sqe.nsid == 1 => return self.dsm(sqe),
            _ => return (spec::SC_INVALID_OPCODE, 0),
        };
        if sqe.nsid != 1 {
            return (0x0b, 0);
        }
        if (sqe.cdw0 >> 8) & 0xff != 0 {
            return (spec::SC_INVALID_FIELD, 0); // fused or SGL: not what the driver sends
        }
        if let Some((_, status)) = self.script.error_at.filter(|(at, _)| *at == n) {
            return (status, 0);
        }
        if let Some((_, status)) = self.script.error_every.filter(|(every, _)| n.is_multiple_of(*every)) {
            return (status, 0);
        }
        let slba = sqe.cdw10 as u64 | (sqe.cdw11 as u64) << 32;
        let nlb = (sqe.cdw12 & 0xffff) as u64 + 1;
        if slba + nlb > self.cfg.blocks {
            return (spec::SC_LBA_OUT_OF_RANGE, 0);
        }
        let len = (nlb << self.cfg.lba_shift) as usize;
        if self.cfg.mdts != 0 && len > PAGE << self.cfg.mdts {
            return (spec::SC_INVALID_FIELD, 0);
        }
        if write {
            self.counters.writes += 1;
        } else {
            self.counters.reads += 1;
        }
        let segments = match self.prp_segments(sqe.prp1, sqe.prp2, len) {
            Ok(s) => s,
            Err(f) => {
                self.fault(format!("command {} ({}): {f}", sqe.cid(), if write { "write" } else { "read" }));
                return (spec::SC_DATA_TRANSFER_ERROR, 0);
            }
        };
        if self.cfg.copy {
            let mut at = (slba << self.cfg.lba_shift) as usize;
            for (p, l) in segments {
                // SAFETY: each segment was checked to be mapped host memory of `l` bytes.
                unsafe {
                    if write {
                        std::ptr::copy_nonoverlapping(p, self.data.as_mut_ptr().add(at), l);
                    } else {
                        std::ptr::copy_nonoverlapping(self.data.as_ptr().add(at), p, l);
                    }
                }
                at += l;
            }
        }
        (0, 0)
    }

    /// Dataset Management: each range of the list at PRP1 zeroed when the Deallocate attribute
    /// is set (the simulated namespace reads zeroes after it, DLFEAT 1); other attributes are
    /// hints and do nothing.
    fn dsm(&mut self, sqe: &Sqe) -> (u16, u32) {
        let n = (sqe.cdw10 & 0xff) as usize + 1;
        let list = match self.host(sqe.prp1, n * 16) {
            Ok(p) => p,
            Err(f) => {
                self.fault(format!("Dataset Management: {f}"));
                return (spec::SC_DATA_TRANSFER_ERROR, 0);
            }
        };
        // SAFETY: n * 16 mapped bytes; DsmRange is 16 plain bytes.
        let ranges: Vec<spec::DsmRange> =
            (0..n).map(|i| unsafe { std::ptr::read_volatile((list as *const spec::DsmRange).add(i)) }).collect();
        if ranges.iter().any(|r| r.slba.saturating_add(r.nlb as u64) > self.cfg.blocks) {
            return (spec::SC_LBA_OUT_OF_RANGE, 0);
        }
        if sqe.cdw11 & spec::DSM_DEALLOCATE != 0 {
            for r in ranges {
                let (at, len) = ((r.slba << self.cfg.lba_shift) as usize, (r.nlb as usize) << self.cfg.lba_shift);
                self.data[at..at + len].fill(0);
                self.counters.deallocated_blocks += r.nlb as u64;
            }
        }
        (0, 0)
    }

    /// The host memory a transfer of `len` bytes described by PRP1/PRP2 covers, in order.
    fn prp_segments(&mut self, prp1: u64, prp2: u64, len: usize) -> Result<Vec<(*mut u8, usize)>, Fault> {
        let page = PAGE as u64;
        if !prp1.is_multiple_of(4) {
            return Err(format!("PRP1 {prp1:#x} is not dword aligned"));
        }
        let first = len.min(PAGE - (prp1 % page) as usize);
        let mut segs = vec![(self.host(prp1, first)?, first)];
        let mut rest = len - first;
        if rest == 0 {
            return Ok(segs);
        }
        if rest <= PAGE {
            if !prp2.is_multiple_of(page) {
                return Err(format!("PRP2 {prp2:#x} (a page) has an offset"));
            }
            segs.push((self.host(prp2, rest)?, rest));
            return Ok(segs);
        }
        // A PRP list: entries to the end of its page, the last one chaining to the next list
        // when more pages remain.
        self.counters.prp_lists += 1;
        if !prp2.is_multiple_of(8) {
            return Err(format!("PRP list pointer {prp2:#x} is not qword aligned"));
        }
        let mut entry = prp2;
        while rest > 0 {
            let last_in_page = (entry + 8).is_multiple_of(page);
            // SAFETY: 8 mapped bytes of the list.
            let value = unsafe { std::ptr::read_volatile(self.host(entry, 8)? as *const u64) };
            if last_in_page && rest > PAGE {
                entry = value;
                continue;
            }
            if !value.is_multiple_of(page) {
                return Err(format!("PRP list entry {value:#x} has an offset"));
            }
            let l = rest.min(PAGE);
            segs.push((self.host(value, l)?, l));
            rest -= l;
            entry += 8;
        }
        Ok(segs)
    }
}

/// The driver over the simulated controller.
pub type SimDriver = super::VfioNvme<SimRegs, SimDma>;

/// A simulated controller attached: `ctrl` is what each `open` takes as its handle.
pub struct Attachment {
    pub sim: Arc<Sim>,
    pub ctrl: Arc<super::Controller<SimRegs, SimDma>>,
}

/// A new simulated controller with `cfg`, attached (reset, enabled, identified; namespace 1).
pub fn attach(cfg: Config, io_queue_entries: Option<u32>) -> Result<Attachment, crate::interfaces::InterfaceError> {
    let sim = Sim::new(cfg);
    let (regs, dma) = sim.seam();
    let ctrl = Arc::new(super::Controller::attach(regs, dma, super::Options { nsid: 1, io_queue_entries })?);
    Ok(Attachment { sim, ctrl })
}
