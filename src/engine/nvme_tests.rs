//! The user-space NVMe driver (`interfaces::vfio_nvme`) driven by the shared hot loop, in
//! process, against the simulated controller: no root, no device, no VFIO.
use super::hotloop::{self, LoopCtx, LoopEnd, LoopPlan};
use super::workload::{region_for, Stream};
use super::*;
use crate::interfaces::memory::BufferMemory;
use crate::interfaces::vfio_nvme::sim::{self, Attachment, Config, Script, SimDriver};
use crate::interfaces::{Complete, IoChoice, IoInterface, Submit};

/// What one thread's loop is asked to do.
#[derive(Clone, Copy)]
struct Work {
    bs: u32,
    qd: u32,
    batch: u32,
    ios: u64,
    random: bool,
    write_pct: u8,
    verify: bool,
}

impl Work {
    fn reads(bs: u32, qd: u32, batch: u32, ios: u64) -> Work {
        Work { bs, qd, batch, ios, random: true, write_pct: 0, verify: false }
    }
}

/// Opens a queue pair on `a` and runs one thread's hot loop over its namespace.
fn run_loop(a: &Attachment, w: Work, seed: u64) -> (LoopEnd, Recorder, SimDriver) {
    let clock = Clock::calibrate();
    let mut bufs = AlignedBuf::new((w.bs * w.qd) as usize, BufferMemory::Heap).unwrap();
    let setup = Setup {
        fds: &[-1],
        buffers: bufs.ptr,
        buffers_len: bufs.slice().len(),
        bs: w.bs,
        qd: w.qd,
        submit: Submit::Syscall,
        complete: Complete::Poll,
        batch_submit: w.batch,
        io: &IoChoice::default(),
        sq_cpu: None,
    };
    let mut io = SimDriver::open(&setup, &a.ctrl).expect("the driver opens a queue pair");
    let space = a.ctrl.ns.size_bytes();
    let region = region_for(0, space, w.bs as u64, w.random, 0, 1);
    let stream = Stream::new(Rng::for_thread(seed, 0), vec![region], w.bs as u64, w.random, w.write_pct);
    let (stop, progress) = (AtomicBool::new(false), AtomicU64::new(0));
    let start = clock.now();
    let plan = LoopPlan {
        bs: w.bs,
        qd: w.qd,
        batch_submit: w.batch,
        batch_reap: 1,
        ramp_end: start,
        end: None,
        quota: Some(w.ios),
        continue_on_error: false,
        verify: w.verify,
        verify_form: Default::default(),
    };
    let blocks = space / w.bs as u64;
    let mut cx = LoopCtx {
        plan,
        clock: &clock,
        stream,
        bufs: bufs.ptr,
        rec: Recorder::new(8, 1, w.bs as u64),
        stop: &stop,
        progress: &progress,
        written: vec![vec![0; blocks.div_ceil(64) as usize]],
        start,
    };
    let end = hotloop::run(&mut io, &mut cx).expect("the loop runs");
    (end, cx.rec, io)
}

fn no_faults(a: &Attachment) {
    assert!(a.sim.faults().is_empty(), "the simulated controller saw: {:?}", a.sim.faults());
}

#[test]
fn verify_data_written_through_the_driver_reads_back() {
    // 16 KiB blocks (a PRP list each) over a 16 MiB namespace of 512-byte LBAs.
    let a = sim::attach(Config { blocks: 32768, lba_shift: 9, ..Default::default() }, None).unwrap();
    let (bs, blocks) = (16384u32, 1024u64);
    let fill = Work { bs, qd: 16, batch: 4, ios: blocks, random: false, write_pct: 100, verify: true };
    let (end, rec, _) = run_loop(&a, fill, 1);
    assert!(end.first_error.is_none(), "{:?}", end.first_error);
    assert_eq!((rec.write.ios, rec.write.errors), (blocks, 0));
    // What the controller holds is the verify format, each sector naming its own offset.
    for b in [0, 1, 511, 1023] {
        crate::verify::check(&a.sim.data(b * bs as u64, bs as usize), b * bs as u64).expect("verify data on the namespace");
    }
    let check = Work { ios: 5000, random: true, write_pct: 0, ..fill };
    let (end, rec, _) = run_loop(&a, check, 2);
    assert!(end.first_error.is_none(), "{:?}", end.first_error);
    assert_eq!((rec.read.ios, end.verified_reads), (5000, 5000));
    no_faults(&a);
}

#[test]
fn qd_beyond_half_the_queue_wraps_it_with_one_doorbell_per_batch() {
    // 32-entry rings at QD 24 in batches of 8: 20 000 reads wrap the CQ hundreds of times.
    let a = sim::attach(Config::default(), Some(32)).unwrap();
    let (end, rec, io) = run_loop(&a, Work::reads(4096, 24, 8, 20_000), 3);
    assert!(end.first_error.is_none(), "{:?}", end.first_error);
    assert_eq!((rec.read.ios, rec.read.errors), (20_000, 0));
    let c = a.sim.counters();
    let qid = io.queue().0;
    assert_eq!(c.sq_doorbells[&qid], io.batches, "one SQ tail doorbell per batch submitted");
    assert!(io.batches <= 20_000 / 4, "{} batches for 20 000 I/Os", io.batches);
    assert!(c.cq_doorbells[&qid] <= c.sq_doorbells[&qid] + 1, "CQ doorbells once per harvest: {c:?}");
    assert!(c.cq_wraps >= 20_000 / 32 - 1, "{} CQ wraps", c.cq_wraps);
    no_faults(&a);
}

#[test]
fn an_nvme_status_fails_the_run_with_the_status_in_words() {
    let a = sim::attach(Config::default(), None).unwrap();
    a.sim.script(Script { error_at: Some((100, crate::device::nvme::SC_LBA_OUT_OF_RANGE)), reverse: true, ..Default::default() });
    let (end, rec, _) = run_loop(&a, Work::reads(4096, 8, 4, 1000), 4);
    let f = end.first_error.expect("the failed I/O is reported");
    assert_eq!(f.errno, None);
    assert!(f.what.contains("NVMe status 0x80: LBA out of range"), "{}", f.what);
    assert_eq!(rec.read.errors, 1);
    assert!((95..=108).contains(&rec.read.ios), "{} reads", rec.read.ios);
    no_faults(&a);
}

#[test]
fn each_thread_drives_its_own_queue_pair() {
    let a = sim::attach(Config { blocks: 8192, ..Default::default() }, None).unwrap();
    let w = Work { bs: 4096, qd: 16, batch: 4, ios: 3000, random: true, write_pct: 30, verify: false };
    // Each thread keeps its pair until all three have theirs: a finished thread's id is free again.
    let all_open = std::sync::Barrier::new(3);
    let qids: Vec<u16> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..3)
            .map(|t| {
                let (a, all_open) = (&a, &all_open);
                s.spawn(move || {
                    let (end, rec, io) = run_loop(a, w, 10 + t);
                    assert!(end.first_error.is_none());
                    assert_eq!(rec.read.ios + rec.write.ios, 3000);
                    all_open.wait();
                    io.queue().0
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut distinct = qids.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "queue ids {qids:?}");
    assert_eq!(a.sim.counters().io_commands, 9000);
    assert!(a.sim.io_queues().is_empty(), "every pair was deleted");
    no_faults(&a);
}
