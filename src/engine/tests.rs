//! The engine and its hot loop driven through `-i null`, in process: no root, no device, no file.
use super::hotloop::{self, LoopCtx, LoopEnd, LoopPlan};
use super::workload::{region_for, Stream};
use super::*;
use crate::interfaces::memory::BufferMemory;
use crate::interfaces::null::{self, Null};
use crate::plan::Budget;

struct NoHooks;
impl WindowHooks for NoHooks {
    fn window_start(&mut self, _: &[i32]) {}
    fn window_end(&mut self) {}
}

fn null_job(qd: u32, budget: Budget, script: Option<&str>) -> Job {
    let mut job = Job::default();
    (job.io.interface, job.workload.write_mix) = (crate::interfaces::InterfaceKind::Null, 0);
    (job.workload.qd, job.workload.batch_submit, job.workload.batch_reap, job.timing.budget) = (qd, qd.min(4), 1, budget);
    job.io.options.null.null_script = script.map(Into::into);
    crate::plan::validate::validate(&job).expect("a valid null job");
    job
}

/// The null interface's one target: the job's address space.
fn null_target(job: &Job) -> Acquired {
    Acquired::Null(null::AddressSpace { start: job.targets.offset, len: null::address_space(job.targets.size, job.workload.bs) })
}

fn run_null(job: &Job) -> EngineOutput {
    let never = AtomicBool::new(false);
    let acquired = null_target(job);
    let placement = Placement::of_job(job);
    let inputs = Inputs {
        job,
        placement: &placement,
        acquired: &acquired,
        cancel: Cancel::new(&never),
        progress: &mut |_, _, _, _| {},
        hooks: &mut NoHooks,
    };
    run(inputs).expect("the engine runs")
}

/// One thread's loop over a null interface, returning the interface so its counters can be read.
fn run_loop(job: &Job, ramp_ns: u64) -> (Null, LoopEnd, Recorder, u64) {
    let clock = Clock::calibrate();
    let mut bufs = AlignedBuf::new((job.workload.bs * job.workload.qd as u64) as usize, BufferMemory::Heap).unwrap();
    let setup = Setup {
        fds: &[-1],
        buffers: bufs.ptr,
        buffers_len: bufs.slice().len(),
        bs: job.workload.bs as u32,
        qd: job.workload.qd,
        submit: job.io.submit,
        complete: job.io.complete,
        batch_submit: job.workload.batch_submit,
        io: &job.io,
        sq_cpu: None,
    };
    let mut io = <Null as crate::interfaces::IoInterface>::open(&setup, &()).expect("null opens");
    let region = region_for(job.targets.offset, null::address_space(job.targets.size, job.workload.bs), job.workload.bs, true, 0, 1);
    let stream = Stream::new(Rng::for_thread(job.workload.seed, 0), vec![region], job.workload.bs, true, 0);
    let (stop, progress) = (AtomicBool::new(false), AtomicU64::new(0));
    let start = clock.now();
    let quota = match job.timing.budget {
        Budget::Ios(n) => Some(n),
        _ => None,
    };
    let plan = LoopPlan { verify: false, ..LoopPlan::for_job(job, start, ramp_ns, None, quota) };
    let mut cx = LoopCtx {
        plan,
        clock: &clock,
        stream,
        bufs: bufs.ptr,
        rec: Recorder::new(8, 1, job.workload.bs),
        stop: &stop,
        progress: &progress,
        written: vec![vec![]],
        start,
    };
    let end = hotloop::run(&mut io, &mut cx).expect("the loop runs");
    (io, end, cx.rec, progress.load(Ordering::Relaxed))
}

#[test]
fn a_count_budget_delivers_exactly_that_many_ios_over_all_threads() {
    let mut job = null_job(8, Budget::Ios(10_001), None);
    job.workload.threads = 3;
    let out = run_null(&job);
    assert_eq!((out.rec.read.ios, out.rec.read.errors, out.rec.write.ios), (10_001, 0, 0));
    assert_eq!(out.rec.read.bytes, 10_001 * 4096);
    assert_eq!(out.rec.per_target, vec![10_001]);
    assert!(out.first_error.is_none() && !out.interrupted);
}

#[test]
fn a_byte_budget_rounds_up_to_whole_blocks() {
    let out = run_null(&null_job(4, Budget::Bytes((1 << 20) + 1), None));
    assert_eq!((out.rec.read.ios, out.rec.read.bytes), (257, 257 * 4096));
}

#[test]
fn a_time_budget_ends_the_window_on_time() {
    let out = run_null(&null_job(1, Budget::Seconds(0.1), None));
    assert!((0.09..0.5).contains(&out.window_s), "window {} s", out.window_s);
    assert!(out.rec.read.ios > 1000);
}

/// A time with a count: the count reached first ends the run at its last completion (not at
/// the time limit), on every thread; the time reached first stops every thread, the window
/// ending at the limit.
#[test]
fn a_time_with_a_count_ends_at_whichever_comes_first() {
    let mut job = null_job(4, Budget::SecondsOrBytes { seconds: 30.0, bytes: 3001 * 4096 }, None);
    job.workload.threads = 2;
    let began = std::time::Instant::now();
    let out = run_null(&job);
    assert_eq!((out.rec.read.ios, out.ended_by_time), (3001, false));
    assert!(began.elapsed() < std::time::Duration::from_secs(10) && out.window_s < 10.0, "{} s", out.window_s);
    let out = run_null(&null_job(4, Budget::SecondsOrIos { seconds: 0.1, ios: u64::MAX / 2 }, Some("delay=20us")));
    assert!(out.ended_by_time && out.rec.read.ios > 100, "{} ios", out.rec.read.ios);
    assert!((0.09..0.5).contains(&out.window_s), "window {} s", out.window_s);
}

#[test]
fn requests_the_interface_did_not_accept_are_offered_again() {
    let mut job = null_job(8, Budget::Ios(1000), Some("accept=3"));
    job.workload.batch_submit = 8;
    let (io, end, rec, _) = run_loop(&job, 0);
    assert_eq!((rec.read.ios, rec.read.errors), (1000, 0));
    assert!(end.first_error.is_none());
    // Each call took at most 3, so the rest was offered again.
    assert!(io.submits >= 1000 / 3, "{} submits", io.submits);
    assert!(io.offered > 1000, "{} offered", io.offered);
}

#[test]
fn the_ramp_is_done_then_the_window_counts_its_budget_exactly() {
    let job = null_job(4, Budget::Ios(500), Some("delay=20us"));
    let (_, end, rec, completed) = run_loop(&job, 20_000_000);
    assert_eq!(rec.read.ios, 500);
    // About 20 ms of ramp at 20 µs per request went before the window.
    assert!(completed > 1000, "{completed} completions in all");
    assert!(end.measure_end > end.measure_start);
    assert!(rec.read.min_ns >= 20_000, "min latency {} ns", rec.read.min_ns);
}

#[test]
fn a_failed_io_stops_the_run_and_is_reported() {
    let out = run_null(&null_job(4, Budget::Ios(1000), Some("error=EIO@100")));
    let f = out.first_error.expect("the error is reported");
    assert_eq!(f.errno, Some(libc::EIO));
    assert_eq!(out.rec.read.errors, 1);
    // What was already in flight still completes; nothing new is issued.
    assert!((99..=102).contains(&out.rec.read.ios), "{} ios", out.rec.read.ios);
}

#[test]
fn continue_on_error_counts_errors_and_still_delivers_the_budget() {
    let mut job = null_job(4, Budget::Ios(1000), Some("error=ENOSPC%10"));
    job.policy.continue_on_error = true;
    let out = run_null(&job);
    // Every 10th of 1111 requests failed (a failed request gives its place back).
    assert_eq!((out.rec.read.ios, out.rec.read.errors), (1000, 111));
    assert_eq!(out.first_error.expect("the first error is kept").errno, Some(libc::ENOSPC));
}

#[test]
fn a_short_transfer_is_a_failure_in_words() {
    let out = run_null(&null_job(1, Budget::Ios(100), Some("short=512@5")));
    let f = out.first_error.expect("short transfer reported");
    assert_eq!((f.errno, f.what.as_str()), (None, "short 512 of 4096 bytes"));
    assert_eq!(out.rec.read.ios, 4);
}

#[test]
fn writes_go_through_null_too() {
    let mut job = null_job(2, Budget::Ios(300), None);
    job.workload.rw = crate::plan::Rw::Randrw;
    job.workload.write_mix = 50;
    let out = run_null(&job);
    assert_eq!(out.rec.read.ios + out.rec.write.ios, 300);
    assert!(out.rec.read.ios > 50 && out.rec.write.ios > 50);
}

/// Two jobs run as one group, each on its own thread: (the first's, the second's) outcome.
fn run_pair(a: &Job, b: &Job, delays: [f64; 2]) -> (Result<EngineOutput, String>, Result<EngineOutput, String>) {
    let together = Together::new(2);
    let (x, y) = run_pair_with(&together, [a, b], delays, [None, None], None);
    (x, y)
}

/// [`run_pair`] with each member's exit and a flow both share.
fn run_pair_with(
    together: &Together,
    jobs: [&Job; 2],
    delays: [f64; 2],
    exits: [Option<Exit>; 2],
    flow: Option<std::sync::Arc<pace::Flow>>,
) -> (Result<EngineOutput, String>, Result<EngineOutput, String>) {
    let never = AtomicBool::new(false);
    let one = |member: usize| {
        let job = jobs[member];
        let target = null_target(job);
        let start = GroupStart { together, delay_s: delays[member], member, exit: exits[member].clone(), flow: flow.clone() };
        let placement = Placement::of_job(job);
        let inputs = Inputs {
            job,
            placement: &placement,
            acquired: &target,
            cancel: Cancel::new(&never),
            progress: &mut |_, _, _, _| {},
            hooks: &mut NoHooks,
        };
        run_in_group(inputs, &start).map_err(|e| e.to_string())
    };
    std::thread::scope(|s| {
        let x = s.spawn(|| one(0));
        let y = s.spawn(|| one(1));
        (x.join().unwrap(), y.join().unwrap())
    })
}

/// fio's flow: two members sharing a flow, weights 8 and 1, issue I/O about 8:1 although each
/// alone runs as fast as the other. The counter is cumulative and a member's I/O leaves it when
/// its loop ends, so the ratio is exact while both run; what is left is the instants between the
/// two loops' starts and ends, at most a few thousand of ~millions of null I/Os here: 8 +- 10 %.
#[test]
fn a_flow_holds_its_members_to_the_ratio_of_their_weights() {
    let mut a = null_job(1, Budget::Seconds(0.5), None);
    a.workload.pattern.pace = Some("flow=8".parse().unwrap());
    let mut b = a.clone();
    b.workload.pattern.pace = Some("flow=1".parse().unwrap());
    let flow = pace::Flow::new();
    let together = Together::new(2);
    let (x, y) = run_pair_with(&together, [&a, &b], [0.0, 0.0], [None, None], Some(flow));
    let (x, y) = (x.expect("the first runs").rec.read.ios, y.expect("the second runs").rec.read.ios);
    let ratio = x as f64 / y.max(1) as f64;
    assert!(y > 1000 && (7.2..8.8).contains(&ratio), "{x} and {y} I/Os: ratio {ratio}, asked 8");
    // Without the shared counter, the same two run alike.
    let together = Together::new(2);
    let (x, y) = run_pair_with(&together, [&a, &b], [0.0, 0.0], [None, None], None);
    let ratio = x.unwrap().rec.read.ios as f64 / y.unwrap().rec.read.ios.max(1) as f64;
    assert!(ratio < 3.0, "unshared, ratio {ratio}");
}

/// fio's exitall: a short member's end stops a long one well before its budget; the stopped one
/// keeps the I/O it did and knows who stopped it. At a failed end only (exitall_on_error), a
/// member that ends well stops nothing.
#[test]
fn a_members_exit_stops_the_members_it_names() {
    let short = null_job(1, Budget::Seconds(0.2), None);
    let long = null_job(1, Budget::Seconds(30.0), None);
    let together = Together::new(2);
    let exit = Exit { stops: vec![1], started_only: false, on_failure_only: false };
    let began = std::time::Instant::now();
    let (x, y) = run_pair_with(&together, [&short, &long], [0.0, 0.0], [Some(exit.clone()), None], None);
    assert!(began.elapsed() < std::time::Duration::from_secs(10), "took {:?}", began.elapsed());
    let (x, y) = (x.expect("the short one runs"), y.expect("the long one runs"));
    assert!(y.rec.read.ios > 0 && y.window_s < 5.0 && !y.interrupted && !y.ended_by_time, "{} I/Os in {} s", y.rec.read.ios, y.window_s);
    assert!(x.ended_by_time);
    assert_eq!((together.stopped_by(1), together.stopped_by(0)), (Some(0), None));
    // Both exit: the one that ends first stops the other, and is not stopped by it after.
    let together = Together::new(2);
    let back = Exit { stops: vec![0], ..exit.clone() };
    let (x, _) = run_pair_with(&together, [&short, &long], [0.0, 0.0], [Some(exit.clone()), Some(back)], None);
    assert!(x.unwrap().ended_by_time);
    assert_eq!((together.stopped_by(1), together.stopped_by(0)), (Some(0), None), "an ended member is not stopped");
    // exitall_on_error: an end without a failure stops nothing.
    let together = Together::new(2);
    let brief = null_job(1, Budget::Seconds(0.5), None);
    let on_failure = Exit { on_failure_only: true, ..exit };
    let (_, y) = run_pair_with(&together, [&short, &brief], [0.0, 0.0], [Some(on_failure), None], None);
    assert!(y.unwrap().ended_by_time, "not stopped");
    assert_eq!(together.stopped_by(1), None);
}

/// A group's members start together, each its own delay after the group's start.
#[test]
fn a_groups_members_start_together_each_after_its_delay() {
    let job = null_job(2, Budget::Ios(2000), None);
    let (a, b) = run_pair(&job, &job, [0.0, 0.25]);
    let (a, b) = (a.expect("the first runs"), b.expect("the second runs"));
    assert_eq!((a.rec.read.ios, b.rec.read.ios), (2000, 2000));
    let gap = b.started_unix_s - a.started_unix_s;
    assert!((0.2..2.0).contains(&gap), "the second started {gap} s after the first");
}

/// One member that cannot prepare keeps every member from running, and none is left waiting.
#[test]
fn a_group_member_that_cannot_prepare_keeps_every_member_from_running() {
    let good = null_job(1, Budget::Seconds(30.0), None);
    let mut bad = good.clone();
    // 2^62 bytes of buffers: no machine allocates them.
    (bad.workload.bs, bad.workload.qd) = (1 << 50, 4096);
    let began = std::time::Instant::now();
    let (a, b) = run_pair(&good, &bad, [0.0, 0.0]);
    assert!(began.elapsed() < std::time::Duration::from_secs(10), "took {:?}", began.elapsed());
    let a = a.err().expect("the good member did not run");
    assert!(a.contains("another job of its group could not prepare"), "{a}");
    assert!(b.err().expect("the bad member failed").contains("out of memory"));
}

#[test]
fn buffers_that_cannot_be_allocated_fail_the_run_instead_of_aborting() {
    // 4 EiB: beyond any x86-64 address space, so even overcommit cannot hand it out.
    let err = AlignedBuf::new(1 << 62, BufferMemory::Heap).err().expect("4 EiB of buffers allocated");
    assert!(err.contains("out of memory"), "{err}");
}

#[test]
fn cancelling_mid_run_stops_it_and_reports_interrupted() {
    let job = null_job(4, Budget::Seconds(60.0), Some("delay=20us"));
    let flag = AtomicBool::new(false);
    let cancel = Cancel::new(&flag);
    let began = std::time::Instant::now();
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            cancel.cancel();
        });
        let (acquired, placement) = (null_target(&job), Placement::of_job(&job));
        let inputs =
            Inputs { job: &job, placement: &placement, acquired: &acquired, cancel, progress: &mut |_, _, _, _| {}, hooks: &mut NoHooks };
        run(inputs).expect("the engine runs")
    });
    assert!(began.elapsed() < std::time::Duration::from_secs(10), "took {:?}", began.elapsed());
    assert!(out.interrupted && out.first_error.is_none());
    assert!(out.rec.read.ios > 0 && out.window_s < 10.0, "{} ios in {} s", out.rec.read.ios, out.window_s);
    // The process's own Ctrl-C flag was not touched.
    assert!(!interrupt().is_cancelled());
}

#[test]
#[cfg_attr(not(debug_assertions), ignore = "the panic is an arithmetic overflow, checked only in debug builds")]
fn a_worker_that_panics_before_the_start_fails_the_run_instead_of_hanging_it() {
    let mut job = null_job(1, Budget::Ios(1000), None);
    (job.workload.threads, job.workload.rw) = (2, crate::plan::Rw::Read);
    // Sequential: each thread takes its half of the range. The second half's start overflows
    // (a panic in its preparation) while the first thread is prepared and waits at the barrier.
    let target = Acquired::Null(null::AddressSpace { start: u64::MAX - 4095, len: 4 << 12 });
    let never = AtomicBool::new(false);
    let placement = Placement::of_job(&job);
    let inputs = Inputs {
        job: &job,
        placement: &placement,
        acquired: &target,
        cancel: Cancel::new(&never),
        progress: &mut |_, _, _, _| {},
        hooks: &mut NoHooks,
    };
    let err = run(inputs).err().expect("the run fails").to_string();
    assert!(err.contains("a worker thread panicked") && err.contains("overflow"), "{err}");
}

/// Hooks that panic at the given call.
struct PanickingHooks {
    at_start: bool,
}
impl WindowHooks for PanickingHooks {
    fn window_start(&mut self, _: &[i32]) {
        assert!(!self.at_start, "window_start panics");
    }
    fn window_tick(&mut self) {
        panic!("window_tick panics");
    }
    fn window_end(&mut self) {}
}

#[test]
fn a_panicking_hook_panics_the_run_after_the_workers_were_let_go() {
    for (at_start, ramp_s) in [(true, 0.0), (false, 0.0), (false, 0.05)] {
        let mut job = null_job(2, Budget::Seconds(60.0), None);
        (job.workload.threads, job.timing.ramp_s) = (2, ramp_s);
        let never = AtomicBool::new(false);
        let began = std::time::Instant::now();
        let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let (acquired, placement) = (null_target(&job), Placement::of_job(&job));
            run(Inputs {
                job: &job,
                placement: &placement,
                acquired: &acquired,
                cancel: Cancel::new(&never),
                progress: &mut |_, _, _, _| {},
                hooks: &mut PanickingHooks { at_start },
            })
        }));
        let panic = ran.err().expect("the hook's panic comes out of run");
        let msg = panic.downcast_ref::<String>().cloned().or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
        let want = if at_start { "window_start panics" } else { "window_tick panics" };
        assert_eq!(msg.as_deref(), Some(want));
        assert!(began.elapsed() < std::time::Duration::from_secs(10), "took {:?}", began.elapsed());
    }
}
