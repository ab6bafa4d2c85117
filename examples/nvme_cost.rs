//! The user-space NVMe driver's own cost per I/O: `--ios N` random 4 KiB reads at `--qd Q`
//! (default 32), `--batch B` per submission (default 1), through the shared hot loop against
//! the simulated controller with data movement off. Run under callgrind with the simulated
//! controller left out, twice with different N, and divide the difference (docs/nvme-driver.md):
//!
//!   valgrind --tool=callgrind target/release/examples/nvme_cost --ios 50000
//!   callgrind_annotate --inclusive=yes callgrind.out.PID | grep -E 'TOTALS|Sim::ring'
//!
//! `--null` runs the same loop over `-i null` instead: the harness's own cost, for the difference.
use iolab::engine::clock::Clock;
use iolab::engine::hotloop::{self, LoopCtx, LoopEnd, LoopPlan};
use iolab::engine::recorder::Recorder;
use iolab::engine::workload::{region_for, Rng, Stream};
use iolab::interfaces::null::Null;
use iolab::interfaces::vfio_nvme::sim::{self, Config, SimDriver};
use iolab::interfaces::{Complete, IoChoice, IoInterface, Setup, Submit};
use std::sync::atomic::{AtomicBool, AtomicU64};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map_or(default, |v| v.parse().expect("a number"))
}

fn main() {
    let (ios, qd, batch, bs) = (arg("--ios", 100_000), arg("--qd", 32) as u32, arg("--batch", 1) as u32, 4096u32);
    // A 1 GiB namespace of 4 KiB blocks; no data moves, pages mapped contiguously.
    let cfg = Config { blocks: 1 << 18, lba_shift: 12, copy: false, scatter: false, ..Default::default() };
    let a = sim::attach(cfg, None).expect("the simulated controller attaches");
    let layout = std::alloc::Layout::from_size_align((bs * qd) as usize, 4096).unwrap();
    // SAFETY: non-zero size; freed at the end.
    let bufs = unsafe { std::alloc::alloc_zeroed(layout) };
    let setup = Setup {
        fds: &[-1],
        buffers: bufs,
        buffers_len: layout.size(),
        bs,
        qd,
        submit: Submit::Syscall,
        complete: Complete::Poll,
        batch_submit: batch,
        io: &IoChoice::default(),
        sq_cpu: None,
    };
    if std::env::args().any(|a| a == "--null") {
        let mut null = Null::open(&setup, &()).expect("null opens");
        let (end, rec) = run(&mut null, ios, qd, batch, bs, bufs, 1 << 30);
        assert!(end.first_error.is_none(), "{:?}", end.first_error);
        println!("{} null completions at QD{qd}, batch {batch}", rec.read.ios);
        return;
    }
    let mut io = SimDriver::open(&setup, &a.ctrl).expect("a queue pair");
    let (end, rec) = run(&mut io, ios, qd, batch, bs, bufs, a.ctrl.ns.size_bytes());
    assert!(end.first_error.is_none(), "{:?}", end.first_error);
    let secs = (end.measure_end - end.measure_start) as f64 / 1e9;
    let c = a.sim.counters();
    println!(
        "{} reads at QD{qd}, batch {batch}: {:.0} ns per I/O wall (simulator included), {} SQ doorbells, {} CQ doorbells",
        rec.read.ios,
        secs * 1e9 / rec.read.ios as f64,
        io.batches,
        c.cq_doorbells.values().sum::<u64>()
    );
    drop(io);
    // SAFETY: allocated above with this layout; the queue pair that mapped it is gone.
    unsafe { std::alloc::dealloc(bufs, layout) };
}

/// One thread's hot loop: `ios` random reads of `bs` over `space` bytes.
fn run<I: IoInterface>(io: &mut I, ios: u64, qd: u32, batch: u32, bs: u32, bufs: *mut u8, space: u64) -> (LoopEnd, Recorder) {
    let clock = Clock::calibrate();
    let stream = Stream::new(Rng::for_thread(1, 0), vec![region_for(0, space, bs as u64, true, 0, 1)], bs as u64, true, 0);
    let (stop, progress) = (AtomicBool::new(false), AtomicU64::new(0));
    let start = clock.now();
    let plan = LoopPlan {
        bs,
        qd,
        batch_submit: batch,
        batch_reap: 1,
        ramp_end: start,
        end: None,
        quota: Some(ios),
        continue_on_error: false,
        verify: false,
        verify_form: Default::default(),
    };
    let mut cx = LoopCtx {
        plan,
        clock: &clock,
        stream,
        bufs,
        rec: Recorder::new(8, 1, bs as u64),
        stop: &stop,
        progress: &progress,
        written: vec![vec![]],
        start,
    };
    let end = hotloop::run(io, &mut cx).expect("the loop runs");
    (end, cx.rec)
}
