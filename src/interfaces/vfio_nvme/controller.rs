//! The controller as a whole: reset and enable it with an admin queue pair, learn its limits
//! (CAP.MQES, CAP.DSTRD, MDTS) and the namespace's geometry, and create and delete the I/O queue
//! pairs the worker threads use, through admin commands. None of this is on the hot path: the
//! admin queue is behind a mutex and waits by polling with a timeout.
use super::queue::QueuePair;
use super::{DmaMemory, DmaRegion, Registers};
use crate::device::nvme::{self, parse_identify_controller, parse_identify_namespace, IdController, IdNamespace, Sqe};
use crate::interfaces::InterfaceError;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Controller registers (NVMe base specification, "Controller Registers").
pub const REG_CAP: u32 = 0x00;
pub const REG_VS: u32 = 0x08;
pub const REG_CC: u32 = 0x14;
pub const REG_CSTS: u32 = 0x1c;
pub const REG_AQA: u32 = 0x24;
pub const REG_ASQ: u32 = 0x28;
pub const REG_ACQ: u32 = 0x30;

pub const CC_EN: u32 = 1;
/// CC.IOSQES = 6 (64-byte SQEs) and CC.IOCQES = 4 (16-byte CQEs); CSS 0 (NVM), MPS 0 (4 KiB).
pub const CC_ENTRY_SIZES: u32 = (6 << 16) | (4 << 20);
pub const CSTS_RDY: u32 = 1;
pub const CSTS_CFS: u32 = 2;

/// The memory page size iolab programs (CC.MPS = 0): PRP entries address pages of this size.
pub const PAGE: usize = 4096;
/// Entries of the admin queues.
const ADMIN_ENTRIES: u32 = 32;
/// I/O queue pairs asked for with Set Features (Number of Queues).
const WANT_QUEUES: u32 = 64;

/// What the controller's capability register says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cap {
    /// Maximum entries per queue (MQES + 1).
    pub max_entries: u32,
    /// CAP.DSTRD: doorbells are `4 << dstrd` bytes apart.
    pub dstrd: u32,
    /// CAP.TO: how long enabling or disabling may take.
    pub timeout: Duration,
    pub mpsmin: u32,
    /// CAP.CSS bit 0: the NVM command set.
    pub nvm: bool,
}

impl Cap {
    pub fn parse(cap: u64) -> Cap {
        Cap {
            max_entries: (cap & 0xffff) as u32 + 1,
            dstrd: ((cap >> 32) & 0xf) as u32,
            timeout: Duration::from_millis(500 * ((cap >> 24) & 0xff).max(1)),
            mpsmin: ((cap >> 48) & 0xf) as u32,
            nvm: (cap >> 37) & 1 == 1,
        }
    }
}

/// How iolab drives a controller, chosen when it is attached.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub nsid: u32,
    /// Entries per I/O queue; None: the queue depth plus one (the SQ keeps one entry empty),
    /// and never more than the controller's MQES allows.
    pub io_queue_entries: Option<u32>,
}

struct Admin<R: Registers> {
    qp: QueuePair<R>,
    next_cid: u16,
    /// A page for Identify data.
    page: DmaRegion,
    /// Queue ids in use, index = qid.
    qids: Vec<bool>,
}

pub struct Controller<R: Registers, M: DmaMemory> {
    regs: R,
    pub(super) mem: M,
    pub cap: Cap,
    pub version: u32,
    /// The largest transfer (MDTS), None when the controller sets no limit.
    pub max_transfer: Option<u64>,
    /// What Identify Controller says (MDTS, ONCS, VWC): whether Flush and Dataset Management
    /// mean anything on this controller.
    pub id: IdController,
    pub nsid: u32,
    pub ns: IdNamespace,
    /// I/O queue pairs the controller granted.
    pub io_queues: u16,
    pub options: Options,
    admin: Mutex<Admin<R>>,
}

fn wait_ready<R: Registers>(regs: &R, cap: &Cap, ready: bool) -> Result<(), InterfaceError> {
    let until = Instant::now() + cap.timeout;
    loop {
        let csts = regs.read32(REG_CSTS);
        if csts & CSTS_CFS != 0 && ready {
            return Err(InterfaceError::Failed(format!("the controller reports a fatal status while being enabled (CSTS {csts:#x})")));
        }
        if (csts & CSTS_RDY != 0) == ready {
            return Ok(());
        }
        if Instant::now() > until {
            let what = if ready { "become ready" } else { "stop" };
            return Err(InterfaceError::Failed(format!("the controller did not {what} within CAP.TO ({:?}; CSTS {csts:#x})", cap.timeout)));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
}

fn read64<R: Registers>(regs: &R, at: u32) -> u64 {
    regs.read32(at) as u64 | (regs.read32(at + 4) as u64) << 32
}

fn write64<R: Registers>(regs: &R, at: u32, v: u64) {
    regs.write32(at, v as u32);
    regs.write32(at + 4, (v >> 32) as u32);
}

impl<R: Registers + Clone, M: DmaMemory> Controller<R, M> {
    /// Resets and enables the controller, identifies it and namespace `options.nsid`, and asks
    /// for I/O queues. The controller must not be in use by anything else (the kernel's driver
    /// unbound).
    pub fn attach(regs: R, mem: M, options: Options) -> Result<Controller<R, M>, InterfaceError> {
        let cap = Cap::parse(read64(&regs, REG_CAP));
        let version = regs.read32(REG_VS);
        if cap.mpsmin != 0 {
            return Err(InterfaceError::Failed(format!(
                "the controller's smallest memory page is {} KiB; iolab's driver uses 4 KiB pages",
                4 << cap.mpsmin
            )));
        }
        if !cap.nvm {
            return Err(InterfaceError::Failed("the controller does not support the NVM command set (CAP.CSS)".into()));
        }
        // Disable, then program the admin queues and enable.
        let cc = regs.read32(REG_CC);
        if cc & CC_EN != 0 {
            regs.write32(REG_CC, cc & !CC_EN);
        }
        wait_ready(&regs, &cap, false)?;
        let entries = ADMIN_ENTRIES.min(cap.max_entries);
        let alloc = |len: usize| {
            mem.allocate(len.div_ceil(PAGE) * PAGE).map_err(|e| InterfaceError::Failed(format!("DMA memory for the admin queues: {e}")))
        };
        let (sq, cq, page) = (alloc(entries as usize * 64)?, alloc(entries as usize * 16)?, alloc(PAGE)?);
        regs.write32(REG_AQA, (entries - 1) << 16 | (entries - 1));
        write64(&regs, REG_ASQ, sq.iova);
        write64(&regs, REG_ACQ, cq.iova);
        regs.write32(REG_CC, CC_ENTRY_SIZES | CC_EN);
        wait_ready(&regs, &cap, true)?;
        let qp = QueuePair::new(regs.clone(), 0, entries, cap.dstrd, sq, cq);
        let admin = Mutex::new(Admin { qp, next_cid: 0, page, qids: vec![true] });
        let placeholder = IdNamespace { nsze: 0, format: 0, lba_shift: 9, lba_size: 512, metadata_size: 0, extended: false, dlfeat: 0 };
        let mut c = Controller {
            regs,
            mem,
            cap,
            version,
            max_transfer: None,
            id: IdController::default(),
            nsid: options.nsid,
            ns: placeholder,
            io_queues: 0,
            options,
            admin,
        };
        c.id = parse_identify_controller(&c.identify(nvme::CNS_CONTROLLER, 0)?).map_err(|e| InterfaceError::Failed(e.to_string()))?;
        c.max_transfer = match c.id.mdts {
            0 => None,
            m => Some((PAGE as u64) << m),
        };
        let ns = parse_identify_namespace(
            &c.identify(0, options.nsid).map_err(|e| InterfaceError::Failed(format!("namespace {}: {e}", options.nsid)))?,
        )
        .map_err(|e| InterfaceError::Failed(e.to_string()))?;
        if ns.metadata_size != 0 {
            return Err(InterfaceError::Failed(format!(
                "namespace {} is formatted with {} bytes of metadata per block, which iolab's driver does not transfer",
                options.nsid, ns.metadata_size
            )));
        }
        c.ns = ns;
        let mut sf = Sqe::new(nvme::ADMIN_SET_FEATURES, 0);
        sf.cdw10 = nvme::FEATURE_NUMBER_OF_QUEUES;
        sf.cdw11 = (WANT_QUEUES - 1) << 16 | (WANT_QUEUES - 1);
        let granted = c
            .admin(sf)
            .map_err(|s| InterfaceError::Failed(format!("Set Features (Number of Queues) failed: {}", nvme::status_text(s as u64))))?;
        c.io_queues = ((granted & 0xffff).min(granted >> 16) + 1).min(WANT_QUEUES) as u16;
        c.admin.get_mut().expect("admin").qids.resize(c.io_queues as usize + 1, false);
        Ok(c)
    }

    /// Identify with CNS `cns` for namespace `nsid`: the 4096-byte data structure.
    fn identify(&self, cns: u32, nsid: u32) -> Result<Vec<u8>, InterfaceError> {
        let mut sqe = Sqe::new(nvme::ADMIN_IDENTIFY, 0);
        sqe.nsid = nsid;
        sqe.cdw10 = cns;
        sqe.prp1 = self.admin.lock().expect("admin").page.iova;
        self.admin(sqe).map_err(|s| InterfaceError::Failed(format!("Identify (CNS {cns}) failed: {}", nvme::status_text(s as u64))))?;
        let a = self.admin.lock().expect("admin");
        // SAFETY: the page is PAGE bytes the controller just wrote.
        Ok(unsafe { std::slice::from_raw_parts(a.page.virt, PAGE) }.to_vec())
    }

    /// Runs one admin command to completion: its DW0, or its status.
    pub fn admin(&self, mut sqe: Sqe) -> Result<u32, u16> {
        let mut a = self.admin.lock().expect("admin");
        a.next_cid = a.next_cid.wrapping_add(1);
        let cid = a.next_cid;
        sqe.cdw0 = (sqe.cdw0 & 0xffff) | (cid as u32) << 16;
        a.qp.push(sqe);
        a.qp.ring_sq();
        let until = Instant::now() + Duration::from_secs(5).max(self.cap.timeout);
        loop {
            if let Some(dw3) = a.qp.peek() {
                let dw0 = a.qp.peek_dw0();
                a.qp.advance();
                a.qp.ring_cq();
                if dw3 as u16 != cid {
                    continue; // a stale completion of an earlier, timed-out command
                }
                let status = (dw3 >> 17) as u16;
                return if status == 0 { Ok(dw0) } else { Err(status) };
            }
            if Instant::now() > until {
                // Internal error: not a status the controller returned, said so in words.
                return Err(0x06);
            }
            std::hint::spin_loop();
        }
    }

    /// Entries per I/O queue for a thread keeping `qd` requests in flight, or why there is none.
    pub(crate) fn queue_entries(&self, qd: u32) -> Result<u32, InterfaceError> {
        let want = self.options.io_queue_entries.unwrap_or(qd + 1).max(2);
        if want > self.cap.max_entries {
            return Err(InterfaceError::Failed(format!(
                "queues of {want} entries exceed the controller's maximum of {} (CAP.MQES)",
                self.cap.max_entries
            )));
        }
        if qd > want - 1 {
            return Err(InterfaceError::Failed(format!(
                "--qd {qd} needs queues of {} entries; they have {want} (one stays empty)",
                qd + 1
            )));
        }
        Ok(want)
    }

    /// A new I/O queue pair of `entries` entries, interrupts off (polled), its CQ and SQ created
    /// through the admin queue.
    pub(crate) fn create_queue_pair(&self, entries: u32) -> Result<QueuePair<R>, InterfaceError> {
        let qid = {
            let mut a = self.admin.lock().expect("admin");
            let Some(q) = a.qids.iter().position(|used| !used) else {
                return Err(InterfaceError::Failed(format!(
                    "the controller granted {} I/O queue pairs and all are in use: use fewer --threads",
                    self.io_queues
                )));
            };
            a.qids[q] = true;
            q as u16
        };
        let release = |e: String| {
            self.admin.lock().expect("admin").qids[qid as usize] = false;
            InterfaceError::Failed(e)
        };
        let sq = self
            .mem
            .allocate((entries as usize * 64).div_ceil(PAGE) * PAGE)
            .map_err(|e| release(format!("DMA memory for a queue: {e}")))?;
        let cq = match self.mem.allocate((entries as usize * 16).div_ceil(PAGE) * PAGE) {
            Ok(cq) => cq,
            Err(e) => {
                self.mem.free(sq);
                return Err(release(format!("DMA memory for a queue: {e}")));
            }
        };
        let (sq_iova, cq_iova) = (sq.iova, cq.iova);
        let size = (entries - 1) << 16 | qid as u32;
        let mut ccq = Sqe::new(nvme::ADMIN_CREATE_IO_CQ, 0);
        (ccq.prp1, ccq.cdw10, ccq.cdw11) = (cq_iova, size, 1); // physically contiguous, interrupts off
        let mut csq = Sqe::new(nvme::ADMIN_CREATE_IO_SQ, 0);
        (csq.prp1, csq.cdw10, csq.cdw11) = (sq_iova, size, (qid as u32) << 16 | 1);
        let created = self
            .admin(ccq)
            .map_err(|s| format!("Create I/O Completion Queue {qid} failed: {}", nvme::status_text(s as u64)))
            .and_then(|_| {
                self.admin(csq).map_err(|s| {
                    let _ = self.admin(delete(nvme::ADMIN_DELETE_IO_CQ, qid));
                    format!("Create I/O Submission Queue {qid} failed: {}", nvme::status_text(s as u64))
                })
            });
        if let Err(e) = created {
            self.mem.free(sq);
            self.mem.free(cq);
            return Err(release(e));
        }
        Ok(QueuePair::new(self.regs.clone(), qid, entries, self.cap.dstrd, sq, cq))
    }

    /// Deletes the pair's SQ and CQ on the controller and frees its memory.
    pub(crate) fn delete_queue_pair(&self, qp: QueuePair<R>) -> Result<(), InterfaceError> {
        let qid = qp.qid;
        let sq = self.admin(delete(nvme::ADMIN_DELETE_IO_SQ, qid));
        let cq = self.admin(delete(nvme::ADMIN_DELETE_IO_CQ, qid));
        self.mem.free(qp.sq_mem);
        self.mem.free(qp.cq_mem);
        self.admin.lock().expect("admin").qids[qid as usize] = false;
        sq.and(cq)
            .map(|_| ())
            .map_err(|s| InterfaceError::Failed(format!("deleting I/O queue pair {qid} failed: {}", nvme::status_text(s as u64))))
    }

    pub(crate) fn regs(&self) -> &R {
        &self.regs
    }
}

fn delete(op: u8, qid: u16) -> Sqe {
    let mut s = Sqe::new(op, 0);
    s.cdw10 = qid as u32;
    s
}

impl<R: Registers, M: DmaMemory> Drop for Controller<R, M> {
    /// Disables the controller (the kernel's driver resets it again when it binds).
    fn drop(&mut self) {
        let cc = self.regs.read32(REG_CC);
        self.regs.write32(REG_CC, cc & !CC_EN);
        let a = self.admin.get_mut().expect("admin");
        let (sq, cq, page) = (a.qp.sq_mem, a.qp.cq_mem, a.page);
        for r in [sq, cq, page] {
            self.mem.free(r);
        }
    }
}
