//! One NVMe queue pair in host memory: a submission ring of 64-byte entries the controller
//! fetches, a completion ring of 16-byte entries it posts, and their two doorbells.
//!
//! As SPDK's `nvme_pcie_qpair.c` keeps them: the host owns the SQ tail and the CQ head; the
//! controller reports how far it fetched (the SQ head) in every completion; a completion is new
//! when its phase tag equals the phase the host expects, which starts at 1 (the ring is zeroed)
//! and flips each time the CQ head wraps. The SQ tail doorbell is written once per batch of
//! entries, the CQ head doorbell once per batch of completions harvested.
use super::{DmaRegion, Registers};
use crate::device::nvme::{Cqe, Sqe};
use std::sync::atomic::{fence, Ordering};

/// Doorbell register offsets of queue `qid` with doorbell stride CAP.DSTRD = `dstrd`: the SQ
/// tail doorbell at 0x1000 + 2·qid·(4 << DSTRD), the CQ head doorbell one stride later.
pub fn doorbells(qid: u16, dstrd: u32) -> (u32, u32) {
    let stride = 4u32 << dstrd;
    (0x1000 + 2 * qid as u32 * stride, 0x1000 + (2 * qid as u32 + 1) * stride)
}

pub struct QueuePair<R: Registers> {
    regs: R,
    pub qid: u16,
    sq: *mut Sqe,
    cq: *const Cqe,
    /// Entries in each ring (the SQ holds at most `entries - 1` commands).
    pub entries: u32,
    sq_tail: u32,
    cq_head: u32,
    /// The phase tag a new completion carries.
    phase: u32,
    sq_db: u32,
    cq_db: u32,
    /// The memory the rings live in, handed back when the pair is deleted.
    pub(super) sq_mem: DmaRegion,
    pub(super) cq_mem: DmaRegion,
}

// SAFETY: the pair owns its rings (the raw pointers into them); moving it to another thread
// moves that ownership. It is not Sync: one thread drives it.
unsafe impl<R: Registers> Send for QueuePair<R> {}

impl<R: Registers> QueuePair<R> {
    /// A pair over zeroed rings of `entries` entries each (`sq_mem` at least 64·entries bytes,
    /// `cq_mem` 16·entries).
    pub fn new(regs: R, qid: u16, entries: u32, dstrd: u32, sq_mem: DmaRegion, cq_mem: DmaRegion) -> QueuePair<R> {
        assert!(entries >= 2 && sq_mem.len >= entries as usize * 64 && cq_mem.len >= entries as usize * 16);
        let (sq_db, cq_db) = doorbells(qid, dstrd);
        QueuePair {
            regs,
            qid,
            sq: sq_mem.virt as *mut Sqe,
            cq: cq_mem.virt as *const Cqe,
            entries,
            sq_tail: 0,
            cq_head: 0,
            phase: 1,
            sq_db,
            cq_db,
            sq_mem,
            cq_mem,
        }
    }

    /// Writes `sqe` at the tail. The caller keeps at most `entries - 1` commands outstanding:
    /// an entry the controller has not fetched belongs to a command not yet completed, so the
    /// SQ then never overflows, and the SQ head the completions report is not needed.
    #[inline(always)]
    pub fn push(&mut self, sqe: Sqe) {
        // SAFETY: sq_tail < entries, and the ring holds `entries` entries; the controller reads
        // this entry only after the doorbell below names it. A plain write, so the entry is
        // built in place; `ring_sq`'s fence keeps it before the doorbell.
        unsafe { std::ptr::write(self.sq.add(self.sq_tail as usize), sqe) };
        self.sq_tail += 1;
        if self.sq_tail == self.entries {
            self.sq_tail = 0;
        }
    }

    /// Tells the controller about every entry pushed so far: one MMIO write.
    #[inline(always)]
    pub(crate) fn ring_sq(&mut self) {
        // The entries must be in memory before the controller hears of them; the doorbell
        // itself orders them against the MMIO write (`Registers::doorbell`).
        fence(Ordering::Release);
        self.regs.doorbell(self.sq_db, self.sq_tail);
    }

    /// DW3 of the next completion (command id, phase tag, status) if the controller has posted
    /// it. Does not consume it.
    #[inline(always)]
    pub fn peek(&self) -> Option<u32> {
        // SAFETY: cq_head < entries; the controller writes this entry, so it is read volatile,
        // the phase word first and the rest only once the phase says it is complete.
        unsafe {
            let e = self.cq.add(self.cq_head as usize);
            let dw3 = std::ptr::read_volatile(std::ptr::addr_of!((*e).dw3));
            if (dw3 >> 16) & 1 != self.phase {
                return None;
            }
            // Whatever else of the entry is read comes after the phase word.
            fence(Ordering::Acquire);
            Some(dw3)
        }
    }

    /// DW0 of the entry at the CQ head (the command specific result), after `peek` found it.
    pub(crate) fn peek_dw0(&self) -> u32 {
        // SAFETY: as in `peek`.
        unsafe { std::ptr::read_volatile(std::ptr::addr_of!((*self.cq.add(self.cq_head as usize)).dw0)) }
    }

    /// Consumes the completion `peek` returned.
    #[inline(always)]
    pub fn advance(&mut self) {
        self.cq_head += 1;
        if self.cq_head == self.entries {
            self.cq_head = 0;
            self.phase ^= 1;
        }
    }

    /// Hands the consumed completion entries back to the controller: one MMIO write.
    #[inline(always)]
    pub(crate) fn ring_cq(&mut self) {
        self.regs.doorbell(self.cq_db, self.cq_head);
    }

    /// The CQ head and the phase it expects, for tests.
    #[cfg(test)]
    pub(crate) fn cq_state(&self) -> (u32, u32) {
        (self.cq_head, self.phase)
    }
}
