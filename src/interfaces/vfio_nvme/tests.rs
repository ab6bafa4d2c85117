//! The driver against the simulated controller, request by request (the hot loop drives it in
//! `engine/nvme_tests.rs`).
use super::sim::{self, Config, Script, SimDriver};
use super::*;
use crate::device::nvme::SC_LBA_OUT_OF_RANGE;
use crate::interfaces::{error_text, Complete, IoChoice, Submit};

/// Page-aligned slot buffers.
struct Bufs {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}
impl Bufs {
    fn new(len: usize) -> Bufs {
        let layout = std::alloc::Layout::from_size_align(len.max(PAGE), PAGE).unwrap();
        // SAFETY: non-zero size.
        Bufs { ptr: unsafe { std::alloc::alloc_zeroed(layout) }, layout }
    }
    // The slots are shared with the (simulated) device, as the hot loop's are: a raw region.
    #[allow(clippy::mut_from_ref)]
    fn slot(&self, tag: u32, bs: u32) -> &mut [u8] {
        // SAFETY: the caller's slots lie within the allocation.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add((tag * bs) as usize), bs as usize) }
    }
}
impl Drop for Bufs {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

fn open(a: &sim::Attachment, bufs: &Bufs, bs: u32, qd: u32) -> io::Result<SimDriver> {
    let setup = Setup {
        fds: &[-1],
        buffers: bufs.ptr,
        buffers_len: bufs.layout.size(),
        bs,
        qd,
        submit: Submit::Syscall,
        complete: Complete::Poll,
        batch_submit: qd,
        io: &IoChoice::default(),
        sq_cpu: None,
    };
    SimDriver::open(&setup, &a.ctrl)
}

fn req(bufs: &Bufs, tag: u32, bs: u32, write: bool, offset: u64) -> Request {
    Request { tag, write, file: 0, offset, len: bs, buf: bufs.slot(tag, bs).as_mut_ptr() }
}

/// Submits `reqs` as one batch and reaps all of them.
fn run(d: &mut SimDriver, reqs: &[Request]) -> Vec<Completion> {
    assert_eq!(d.submit(reqs).unwrap(), reqs.len());
    let mut out = vec![Completion::default(); reqs.len()];
    let mut got = Vec::new();
    while got.len() < reqs.len() {
        let n = d.reap(1, &mut out).unwrap();
        got.extend_from_slice(&out[..n]);
    }
    got
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) % 251) as u8).collect()
}

#[test]
fn attach_identifies_and_each_open_has_its_own_queue_pair() {
    let a = sim::attach(Config { mdts: 5, queues: 3, ..Default::default() }, None).unwrap();
    assert_eq!(a.ctrl.max_transfer, Some(128 << 10));
    assert_eq!((a.ctrl.ns.lba_size, a.ctrl.ns.nsze, a.ctrl.io_queues), (4096, 4096, 3));
    let bufs = Bufs::new(8 * 4096);
    let (d1, d2) = (open(&a, &bufs, 4096, 4).unwrap(), open(&a, &bufs, 4096, 4).unwrap());
    assert_ne!(d1.queue().0, d2.queue().0);
    assert_eq!(d1.queue().1, 5, "qd + 1 entries");
    assert_eq!(a.sim.io_queues().len(), 2);
    let d3 = open(&a, &bufs, 4096, 4).unwrap();
    let e = open(&a, &bufs, 4096, 4).err().expect("a fourth pair is refused");
    assert!(e.to_string().contains("granted 3 I/O queue pairs"), "{e}");
    drop((d1, d2, d3));
    assert!(a.sim.io_queues().is_empty(), "pairs are deleted when dropped");
    let c = a.sim.counters();
    assert_eq!((c.created, c.deleted), (3, 3));
    assert!(a.sim.faults().is_empty(), "{:?}", a.sim.faults());
}

#[test]
fn what_the_controller_cannot_take_is_refused_at_open() {
    let a = sim::attach(Config { mdts: 4, max_entries: 16, lba_shift: 9, ..Default::default() }, None).unwrap();
    let bufs = Bufs::new(1 << 20);
    let msg = |bs, qd| open(&a, &bufs, bs, qd).err().expect("refused").to_string();
    assert!(msg(128 << 10, 1).contains("MDTS"));
    assert!(msg(1000, 1).contains("512 bytes"));
    assert!(msg(4096, 16).contains("CAP.MQES"), "{}", msg(4096, 16));
    assert!(open(&a, &bufs, 4096, 15).is_ok());
    let other = "two targets";
    let setup_fds = |fds: &[i32]| {
        let s = Setup {
            fds,
            buffers: bufs.ptr,
            buffers_len: 4096,
            bs: 4096,
            qd: 1,
            submit: Submit::Syscall,
            complete: Complete::Poll,
            batch_submit: 1,
            io: &IoChoice::default(),
            sq_cpu: None,
        };
        SimDriver::open(&s, &a.ctrl).err().expect(other).to_string()
    };
    assert!(setup_fds(&[-1, -1]).contains("one namespace per run"));
}

#[test]
fn written_data_reads_back_and_lands_where_addressed() {
    let a = sim::attach(Config::default(), None).unwrap();
    let (bs, qd) = (4096u32, 8u32);
    let bufs = Bufs::new((bs * qd) as usize);
    let mut d = open(&a, &bufs, bs, qd).unwrap();
    let writes: Vec<Request> = (0..qd)
        .map(|t| {
            bufs.slot(t, bs).copy_from_slice(&pattern(t as u64, bs as usize));
            req(&bufs, t, bs, true, (100 + 3 * t as u64) * 4096)
        })
        .collect();
    for c in run(&mut d, &writes) {
        assert_eq!(c.result, bs as i64);
    }
    for t in 0..qd {
        assert_eq!(a.sim.data((100 + 3 * t as u64) * 4096, bs as usize), pattern(t as u64, bs as usize));
        bufs.slot(t, bs).fill(0);
    }
    // Read them back in another order into other slots.
    let reads: Vec<Request> = (0..qd).map(|t| req(&bufs, t, bs, false, (100 + 3 * (qd - 1 - t) as u64) * 4096)).collect();
    run(&mut d, &reads);
    for t in 0..qd {
        assert_eq!(bufs.slot(t, bs), &pattern((qd - 1 - t) as u64, bs as usize)[..]);
    }
    assert!(a.sim.faults().is_empty(), "{:?}", a.sim.faults());
}

#[test]
fn one_doorbell_per_batch_and_one_per_harvest() {
    let a = sim::attach(Config::default(), None).unwrap();
    let bufs = Bufs::new(16 * 4096);
    let mut d = open(&a, &bufs, 4096, 16).unwrap();
    let qid = d.queue().0;
    let reqs: Vec<Request> = (0..16).map(|t| req(&bufs, t, 4096, false, t as u64 * 4096)).collect();
    for _ in 0..5 {
        run(&mut d, &reqs);
    }
    let c = a.sim.counters();
    assert_eq!(c.sq_doorbells[&qid], 5, "one SQ tail doorbell per batch of 16");
    assert_eq!(c.cq_doorbells[&qid], 5, "one CQ head doorbell per harvest");
    assert_eq!((c.reads, d.batches), (80, 5));
}

#[test]
fn queues_wrap_and_the_phase_flips_many_times() {
    // 8-entry rings, 7 in flight, 10 000 I/Os in batches of 1 to 7: the CQ wraps ~1250 times.
    let a = sim::attach(Config::default(), Some(8)).unwrap();
    let (bs, qd) = (4096u32, 7u32);
    let bufs = Bufs::new((bs * qd) as usize);
    let mut d = open(&a, &bufs, bs, qd).unwrap();
    assert_eq!(d.queue().1, 8);
    let mut free: Vec<u32> = (0..qd).collect();
    let mut out = vec![Completion::default(); qd as usize];
    let (mut issued, mut done, mut k) = (0u64, 0u64, 0u32);
    let mut inflight = std::collections::BTreeSet::new();
    while done < 10_000 {
        k = k % 7 + 1;
        let batch: Vec<Request> = (0..k.min(free.len() as u32))
            .map(|_| {
                let t = free.pop().unwrap();
                issued += 1;
                req(&bufs, t, bs, issued % 3 == 0, (issued % 4096) * 4096)
            })
            .collect();
        assert_eq!(d.submit(&batch).unwrap(), batch.len());
        inflight.extend(batch.iter().map(|r| r.tag));
        let n = d.reap(1, &mut out).unwrap();
        for c in &out[..n] {
            assert!(inflight.remove(&c.tag), "tag {} completed twice or never issued", c.tag);
            assert_eq!(c.result, 4096);
            free.push(c.tag);
        }
        done += n as u64;
    }
    let c = a.sim.counters();
    assert!(c.cq_wraps > 1000, "{} wraps", c.cq_wraps);
    let (head, phase) = d.qp.as_ref().unwrap().cq_state();
    assert_eq!(phase as u64, 1 - (c.cq_wraps % 2), "the host's phase follows the controller's wraps (head {head})");
    assert!(a.sim.faults().is_empty(), "{:?}", a.sim.faults());
}

#[test]
fn large_and_unaligned_transfers_use_prp2_and_prp_lists() {
    // 512-byte blocks, MDTS 2^5 pages = 128 KiB; the sim gives every buffer page its own,
    // scattered IO address, so each PRP entry must be looked up.
    let a = sim::attach(Config { lba_shift: 9, blocks: 8192, mdts: 5, ..Default::default() }, None).unwrap();
    for (bs, qd) in [(512u32, 9u32), (1536, 5), (6144, 3), (8192, 2), (12288, 3), (64 << 10, 3), (128 << 10, 2), (5120, 4)] {
        let bufs = Bufs::new((bs * qd) as usize);
        let mut d = open(&a, &bufs, bs, qd).unwrap();
        let lists_before = a.sim.counters().prp_lists;
        let writes: Vec<Request> = (0..qd)
            .map(|t| {
                bufs.slot(t, bs).copy_from_slice(&pattern(bs as u64 + t as u64, bs as usize));
                req(&bufs, t, bs, true, (t * bs) as u64 + 4096)
            })
            .collect();
        assert!(run(&mut d, &writes).iter().all(|c| c.result == bs as i64), "bs {bs}");
        for t in 0..qd {
            assert_eq!(a.sim.data((t * bs) as u64 + 4096, bs as usize), pattern(bs as u64 + t as u64, bs as usize), "bs {bs} slot {t}");
            bufs.slot(t, bs).fill(0xee);
        }
        let reads: Vec<Request> = (0..qd).map(|t| req(&bufs, t, bs, false, (t * bs) as u64 + 4096)).collect();
        run(&mut d, &reads);
        for t in 0..qd {
            assert!(bufs.slot(t, bs) == &pattern(bs as u64 + t as u64, bs as usize)[..], "bs {bs} slot {t} read back");
        }
        let lists = a.sim.counters().prp_lists - lists_before;
        if bs >= 12288 {
            assert_eq!(lists, 2 * qd as u64, "bs {bs}: every command has a PRP list");
        } else if bs <= 4096 {
            assert_eq!(lists, 0, "bs {bs}");
        }
        assert!(a.sim.faults().is_empty(), "bs {bs}: {:?}", a.sim.faults());
    }
}

#[test]
fn a_slot_given_another_buffer_or_length_gets_prp_entries_of_its_own() {
    // The PRP entries a slot keeps from its last request must follow it when the buffer or the
    // length changes, PRP lists included (12 KiB: a list per command), and back again.
    let a = sim::attach(Config { lba_shift: 9, blocks: 8192, ..Default::default() }, None).unwrap();
    let bs = 12288u32;
    let bufs = Bufs::new(2 * bs as usize);
    let mut d = open(&a, &bufs, bs, 2).unwrap();
    bufs.slot(0, bs).copy_from_slice(&pattern(1, bs as usize));
    bufs.slot(1, bs).copy_from_slice(&pattern(2, bs as usize));
    let theirs = Request { len: 8192, buf: bufs.slot(1, bs).as_mut_ptr(), ..req(&bufs, 0, bs, true, 1 << 20) };
    for (r, at, want) in [
        (req(&bufs, 0, bs, true, 0), 0u64, pattern(1, bs as usize)),
        (theirs, 1 << 20, pattern(2, 8192)),
        (req(&bufs, 0, bs, true, 2 << 20), 2 << 20, pattern(1, bs as usize)),
    ] {
        let c = run(&mut d, &[r]);
        assert_eq!(c[0].result, r.len as i64);
        assert_eq!(a.sim.data(at, r.len as usize), want, "written from {:?}, {} bytes", r.buf, r.len);
    }
    assert!(a.sim.faults().is_empty(), "{:?}", a.sim.faults());
}

#[test]
fn doorbells_follow_the_stride() {
    for dstrd in [0, 1, 2, 5] {
        let a = sim::attach(Config { dstrd, ..Default::default() }, None).unwrap();
        let bufs = Bufs::new(4 * 4096);
        let mut ds: Vec<SimDriver> = (0..3).map(|_| open(&a, &bufs, 4096, 4).unwrap()).collect();
        for d in &mut ds {
            let reqs: Vec<Request> = (0..4).map(|t| req(&bufs, t, 4096, false, 0)).collect();
            run(d, &reqs);
        }
        let c = a.sim.counters();
        for d in &ds {
            assert_eq!(c.sq_doorbells[&d.queue().0], 1, "DSTRD {dstrd}");
        }
        assert!(a.sim.faults().is_empty(), "DSTRD {dstrd}: {:?}", a.sim.faults());
        assert_eq!(queue::doorbells(2, dstrd), (0x1000 + 4 * (4 << dstrd), 0x1000 + 5 * (4 << dstrd)));
    }
}

#[test]
fn an_nvme_status_is_a_failed_completion_in_words() {
    let a = sim::attach(Config { blocks: 64, ..Default::default() }, None).unwrap();
    let bufs = Bufs::new(4 * 4096);
    let mut d = open(&a, &bufs, 4096, 4).unwrap();
    // Block 64 of 64: out of range, as the controller itself says.
    let c = run(&mut d, &[req(&bufs, 2, 4096, false, 64 * 4096)]);
    assert_eq!((c[0].tag, c[0].result), (2, DEVICE_STATUS - SC_LBA_OUT_OF_RANGE as i64));
    assert!(error_text(c[0].result).contains("LBA out of range"), "{}", error_text(c[0].result));
    assert_eq!(crate::interfaces::errno_of(c[0].result), None);
    // Scripted: the 3rd command fails with an unrecovered read error (SCT 2, SC 0x81) and DNR.
    a.sim.script(Script { error_at: Some((3, 0x4000 | 0x281)), ..Default::default() });
    let reqs: Vec<Request> = (0..4).map(|t| req(&bufs, t, 4096, false, t as u64 * 4096)).collect();
    let mut c = run(&mut d, &reqs);
    c.sort_by_key(|c| c.tag);
    let failed: Vec<&Completion> = c.iter().filter(|c| c.result < 0).collect();
    assert_eq!(failed.len(), 1);
    let text = error_text(failed[0].result);
    assert!(text.contains("unrecovered read error") && text.contains("do not retry"), "{text}");
    assert!(a.sim.faults().is_empty(), "{:?}", a.sim.faults());
}

#[test]
fn completions_out_of_order_are_matched_by_command_id() {
    let a = sim::attach(Config::default(), Some(16)).unwrap();
    a.sim.script(Script { reverse: true, hold_every: Some(5), ..Default::default() });
    let (bs, qd) = (4096u32, 12u32);
    let bufs = Bufs::new((bs * qd) as usize);
    let mut d = open(&a, &bufs, bs, qd).unwrap();
    // Each slot reads its own block, so a completion matched to the wrong slot shows in the data.
    for t in 0..qd {
        a.sim.set_data(t as u64 * 4096, &pattern(t as u64 + 1000, 4096));
    }
    let mut free: Vec<u32> = (0..qd).collect();
    let mut out = vec![Completion::default(); qd as usize];
    let mut done = 0;
    while done < 3000 {
        let batch: Vec<Request> = std::iter::from_fn(|| free.pop()).take(5).map(|t| req(&bufs, t, bs, false, t as u64 * 4096)).collect();
        for r in &batch {
            bufs.slot(r.tag, bs).fill(0);
        }
        d.submit(&batch).unwrap();
        let n = d.reap(1, &mut out).unwrap();
        for c in &out[..n] {
            assert_eq!(c.result, 4096);
            assert!(bufs.slot(c.tag, bs) == &pattern(c.tag as u64 + 1000, 4096)[..], "slot {}", c.tag);
            free.push(c.tag);
        }
        done += n;
    }
    assert!(a.sim.counters().out_of_order > 500, "{:?}", a.sim.counters());
    assert!(a.sim.faults().is_empty(), "{:?}", a.sim.faults());
}

/// A server's FLUSH and TRIM through the driver: NVMe Flush and Dataset Management (Deallocate)
/// on the connection's own queue pair, between its reads and writes; the deallocated blocks
/// read back as zeroes where DLFEAT says so, the blocks around them untouched; nothing is sent to
/// a controller whose Identify data says the command means nothing there.
#[test]
fn flush_and_deallocate_reach_the_controller_between_reads_and_writes() {
    let a = sim::attach(Config { lba_shift: 9, blocks: 8192, ..Default::default() }, None).unwrap();
    assert_eq!(
        device_commands(&a.ctrl),
        crate::interfaces::DeviceCommands { flush: true, deallocate: true, deallocated_reads_zeroes: true }
    );
    let (bs, qd) = (4096u32, 4u32);
    let bufs = Bufs::new((bs * qd) as usize);
    let mut d = open(&a, &bufs, bs, qd).unwrap();
    for tag in 0..qd {
        bufs.slot(tag, bs).copy_from_slice(&pattern(tag as u64 + 1, bs as usize));
    }
    let writes: Vec<Request> = (0..qd).map(|t| req(&bufs, t, bs, true, t as u64 * bs as u64)).collect();
    assert!(run(&mut d, &writes).iter().all(|c| c.result == bs as i64));
    assert_eq!(IoInterface::flush(&mut d).unwrap().unwrap(), ());
    assert_eq!(a.sim.counters().flushes, 1);
    // Blocks 9 to 22 (a partial block at each end is kept): bytes 4608 to 11776.
    IoInterface::deallocate(&mut d, 4096 + 100, 8192 - 200).unwrap().unwrap();
    assert_eq!(a.sim.counters().deallocated_blocks, 14);
    let data = a.sim.data(0, 4 * 4096);
    assert_eq!(&data[..4608], &[pattern(1, 4096), pattern(2, 4096)[..512].to_vec()].concat()[..], "before the range");
    assert!(data[4608..11776].iter().all(|&b| b == 0), "the whole blocks inside read as zeroes");
    assert_eq!(&data[11776..12288], &pattern(3, 4096)[3584..], "the partial block at the end is kept");
    // The queue pair goes on serving reads after them, by its slots' command ids.
    let reads: Vec<Request> = (0..qd).map(|t| req(&bufs, t, bs, false, t as u64 * bs as u64)).collect();
    assert!(run(&mut d, &reads).iter().all(|c| c.result == bs as i64));
    assert!(bufs.slot(0, bs).iter().eq(pattern(1, 4096).iter()));
    // With a read in flight a flush is refused rather than mixed in with it.
    assert_eq!(d.submit(&reads[..1]).unwrap(), 1);
    assert!(d.flush_cache().unwrap_err().to_string().contains("in flight"));
    let mut out = [Completion::default()];
    assert_eq!(d.reap(1, &mut out).unwrap(), 1);
    assert!(d.deallocate_range(0, 1 << 30).unwrap_err().to_string().contains("beyond"));
    assert!(a.sim.faults().is_empty(), "{:?}", a.sim.faults());
    drop(d);

    // A controller without a volatile write cache or Dataset Management gets neither.
    let b = sim::attach(Config { vwc: false, dsm: false, dlfeat: 0, ..Default::default() }, None).unwrap();
    assert_eq!(device_commands(&b.ctrl), crate::interfaces::DeviceCommands::default());
    let bufs = Bufs::new(4096);
    let mut d = open(&b, &bufs, 4096, 1).unwrap();
    d.flush_cache().unwrap();
    d.deallocate_range(0, 8192).unwrap();
    let c = b.sim.counters();
    assert_eq!((c.flushes, c.deallocated_blocks, c.io_commands), (0, 0, 0), "nothing sent");
    // DSM without DLFEAT's promise: deallocation offered, zeroes not promised.
    let z = sim::attach(Config { dlfeat: 0, ..Default::default() }, None).unwrap();
    assert!(!device_commands(&z.ctrl).deallocated_reads_zeroes);
}
