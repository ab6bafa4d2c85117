//! fio's `io_submit_mode=offload` (`rate-submit.c`): the worker thread paces the I/O (its
//! [`Pacer`]: a rate, linear or Poisson) and queues each I/O, stamped with the instant it was
//! queued, to `qd` submission threads, each with its own instance of the interface at depth 1
//! (as fio's submit workers run with iodepth=1). A submission thread takes the next queued I/O,
//! submits it, waits for it, and records its latency from the instant it was queued: when the
//! device falls behind the schedule the queue grows and the latency with it, instead of the
//! schedule slipping unseen (no coordinated omission). fio bounds its queue by the job's io_us;
//! iolab's holds up to [`BACKLOG`] I/Os per worker, then the pacing thread waits for room.
//!
//! Chosen once per worker, before the first I/O (`engine::loop_over`): the inline loop
//! (`hotloop`) is not touched by it. Every completion is recorded under one lock (the pacing
//! thread's recorder): offload is for paced runs, far below the rates where it would matter.
use super::clock::Clock;
use super::hotloop::{FailedIo, LoopCtx, LoopEnd};
use super::pace::{Pacer, Pacing};
use super::recorder::Recorder;
use super::workload::{NextIo, Source};
use crate::interfaces::{Completion, IoInterface, Request};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// The most I/Os queued and not yet taken by a submission thread, per worker.
pub const BACKLOG: usize = 1 << 16;

/// What the pacing thread and its submission threads share, under one lock.
struct State<'a> {
    /// Queued I/Os and when each was queued.
    queue: VecDeque<(NextIo, u64)>,
    /// The pacing thread queues no more.
    closed: bool,
    /// Queued or in flight.
    outstanding: u64,
    /// Completions recorded in the measured window (a count budget's measure).
    measured: u64,
    inflight: usize,
    /// Every completion, ramp included (the live display's).
    completed: u64,
    rec: &'a mut Recorder,
    measuring: bool,
    next_second_at: u64,
    last_done: u64,
    first_error: Option<FailedIo>,
    /// A submission thread's interface failed (set up, submit or reap): the run fails with it.
    failure: Option<String>,
}

struct Shared<'a> {
    st: Mutex<State<'a>>,
    /// A queued I/O, or the end.
    work: Condvar,
    /// Room in the queue, a completion (the count budget), or a failure.
    room: Condvar,
}

impl<'a> Shared<'a> {
    fn lock(&self) -> MutexGuard<'_, State<'a>> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a submission thread needs besides its interface.
struct Ctx<'a, 'b> {
    sh: &'b Shared<'a>,
    clock: &'b Clock,
    stop: &'b AtomicBool,
    progress: &'b std::sync::atomic::AtomicU64,
    ramp_end: u64,
    end: u64,
    fixed_len: Option<u32>,
    continue_on_error: bool,
}

/// A buffer's address, handed to the submission thread that owns that slot.
#[derive(Clone, Copy)]
struct Buf(*mut u8);
// SAFETY: each submission thread gets its own slot's buffer, which no other thread touches
// while it runs; the region outlives the threads (scoped).
unsafe impl Send for Buf {}

/// The worker's loop under offload: pace and queue on this thread, submit and reap on `qd`
/// submission threads, each with the interface `open(k)` gives it (slot `k`'s buffer). Returns
/// how the loop ended, as `hotloop::run` does.
pub fn run<I: IoInterface, S: Source>(
    cx: &mut LoopCtx<S>,
    pacer: &mut Pacer,
    open: &(dyn Fn(usize, *mut u8) -> Result<I, String> + Sync),
) -> Result<LoopEnd, String> {
    let LoopCtx { plan, clock, stream, bufs, rec, stop, progress, start, .. } = cx;
    let (clock, stop, progress, start, bufs) = (*clock, *stop, *progress, *start, *bufs);
    let end = plan.end.unwrap_or(u64::MAX);
    let quota = plan.quota;
    let ramp_end = plan.ramp_end;
    let sh = Shared {
        st: Mutex::new(State {
            queue: VecDeque::new(),
            closed: false,
            outstanding: 0,
            measured: 0,
            inflight: 0,
            completed: 0,
            rec,
            measuring: start >= ramp_end,
            next_second_at: ramp_end.saturating_add(1_000_000_000),
            last_done: start,
            first_error: None,
            failure: None,
        }),
        work: Condvar::new(),
        room: Condvar::new(),
    };
    let cx2 = Ctx {
        sh: &sh,
        clock,
        stop,
        progress,
        ramp_end,
        end,
        fixed_len: S::FIXED_LEN.then_some(plan.bs),
        continue_on_error: plan.continue_on_error,
    };
    let (bs, qd) = (plan.bs as usize, plan.qd as usize);
    let (mut early, mut timed) = (false, false);
    std::thread::scope(|s| {
        for k in 0..qd {
            // SAFETY: slot k owns bytes [k*bs, (k+1)*bs) of the worker's buffer region.
            let buf = Buf(unsafe { bufs.add(k * bs) });
            let cx2 = &cx2;
            let spawned = std::thread::Builder::new().name(format!("iolab-sub{k}")).spawn_scoped(s, move || {
                let buf = buf;
                match open(k, buf.0) {
                    Ok(mut io) => submitter(&mut io, cx2, buf.0),
                    Err(e) => fail(cx2, format!("submission thread {k}: {e}")),
                }
            });
            if let Err(e) = spawned {
                fail(cx2, format!("cannot start submission thread {k}: {e}"));
                break;
            }
        }
        // The pacing thread: the pacer holds each I/O until it is due, then it is queued.
        loop {
            let now = clock.now();
            if now >= end || stop.load(Relaxed) {
                early = stop.load(Relaxed);
                timed = !early;
                break;
            }
            let (completed, inflight) = {
                let st = sh.lock();
                if st.failure.is_some() {
                    early = true;
                    break;
                }
                let counted = st.measured + st.outstanding;
                let budget_spent = now >= ramp_end && quota.is_some_and(|q| counted >= q);
                if budget_spent && st.outstanding == 0 {
                    break;
                }
                if budget_spent || st.queue.len() >= BACKLOG {
                    // Wait for a completion (a failed one gives its place back) or room.
                    drop(sh.room.wait_timeout(st, Duration::from_millis(10)));
                    continue;
                }
                (st.completed, st.inflight)
            };
            match pacer.next(stream, clock, completed, inflight, stop) {
                Some(io) => {
                    let queued = clock.now();
                    let mut st = sh.lock();
                    st.queue.push_back((io, queued));
                    st.outstanding += 1;
                    sh.work.notify_one();
                }
                None => {
                    pacer.wait(clock, stop, plan.end);
                }
            }
        }
        sh.lock().closed = true;
        sh.work.notify_all();
    });
    let st = sh.st.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = st.failure {
        return Err(f);
    }
    st.rec.finish();
    progress.store(st.completed, Relaxed);
    pacer.verdict()?;
    let measure_start = ramp_end.max(start);
    let timed = timed && !early;
    let measure_end = match plan.end {
        Some(e) if timed => e,
        _ => st.last_done.max(measure_start),
    };
    Ok(LoopEnd { measure_start, measure_end, first_error: st.first_error, verified_reads: 0, verify_mismatches: 0, ended_by_time: timed })
}

/// A submission thread's or its set-up's failure: the run fails, everyone stops.
fn fail(cx: &Ctx, what: String) {
    let mut st = cx.sh.lock();
    st.failure.get_or_insert(what);
    cx.stop.store(true, Relaxed);
    cx.sh.room.notify_all();
}

/// One submission thread: take the next queued I/O, submit it, wait for it, record it.
fn submitter<I: IoInterface>(io: &mut I, cx: &Ctx, buf: *mut u8) {
    let mut done = [Completion::default()];
    loop {
        let (next, queued) = {
            let mut st = cx.sh.lock();
            loop {
                if st.failure.is_some() {
                    return;
                }
                if let Some(item) = st.queue.pop_front() {
                    st.inflight += 1;
                    break item;
                }
                if st.closed {
                    return;
                }
                st = cx.sh.work.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        };
        // Past the time limit or stopped: what is still queued is dropped, not issued.
        if cx.stop.load(Relaxed) || cx.clock.now() > cx.end {
            let mut st = cx.sh.lock();
            st.inflight -= 1;
            st.outstanding -= 1;
            cx.sh.room.notify_all();
            continue;
        }
        let len = cx.fixed_len.unwrap_or(next.len);
        let req = Request { tag: 0, write: next.write, file: next.file, offset: next.offset, len, buf };
        if let Err(e) = issue(io, &req, &mut done) {
            return fail(cx, e);
        }
        let now = cx.clock.now();
        complete(cx, &req, done[0].result, queued, now);
    }
}

/// Submit one request (again while the interface takes none) and wait for its completion.
fn issue<I: IoInterface>(io: &mut I, req: &Request, done: &mut [Completion; 1]) -> Result<(), String> {
    while io.submit(std::slice::from_ref(req)).map_err(|e| format!("submission failed: {e}"))? == 0 {
        std::hint::spin_loop();
    }
    while io.reap(1, done).map_err(|e| format!("reaping completions failed: {e}"))? == 0 {}
    Ok(())
}

/// Record a completion at `now` of the request queued at `queued`: the window as the inline
/// loop keeps it (the ramp forgotten at its end, each second, nothing past the time limit).
fn complete(cx: &Ctx, r: &Request, result: i64, queued: u64, now: u64) {
    let mut st = cx.sh.lock();
    if !st.measuring && now >= cx.ramp_end {
        st.rec.reset();
        st.measuring = true;
    }
    let in_window = st.measuring && now <= cx.end;
    if in_window && now >= st.next_second_at {
        let second = (now - cx.ramp_end) / 1_000_000_000;
        st.rec.at_second(second as usize);
        st.next_second_at = cx.ramp_end + (second + 1) * 1_000_000_000;
    }
    st.inflight -= 1;
    st.outstanding -= 1;
    st.completed += 1;
    cx.progress.store(st.completed, Relaxed);
    if result != r.len as i64 {
        st.rec.error(r.write);
        if st.first_error.is_none() {
            let what = if result < 0 { crate::interfaces::error_text(result) } else { format!("short {result} of {} bytes", r.len) };
            let errno = crate::interfaces::errno_of(result);
            st.first_error = Some(FailedIo { file: r.file, offset: r.offset, write: r.write, errno, what });
        }
        if !cx.continue_on_error {
            cx.stop.store(true, Relaxed);
        }
    } else if in_window {
        st.rec.record(r.write, r.file as usize, now - queued);
        if cx.fixed_len.is_none() {
            st.rec.add_bytes(r.write, r.len);
        }
        st.measured += 1;
        st.last_done = now;
    }
    cx.sh.room.notify_all();
}
