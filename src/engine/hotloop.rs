//! The one hot loop every interface shares: keep `qd` requests in flight, submit in batches,
//! reap at least `batch_reap` when nothing else can be done, stamp each completion against its
//! slot's submit time, refill. One clock read per submitted batch and one per reaped batch;
//! everything it touches was allocated before it started; no locks, no system calls but the
//! interface's own.
use super::clock::Clock;
use super::pace::Pacing;
use super::recorder::Recorder;
use super::workload::Source;
use crate::interfaces::{Completion, IoInterface, Request};
use crate::verify;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// What the loop needs to know about the job, in absolute clock nanoseconds.
pub struct LoopPlan {
    pub bs: u32,
    pub qd: u32,
    pub batch_submit: u32,
    pub batch_reap: u32,
    pub ramp_end: u64,
    /// Time budget: stop issuing at this instant and ignore later completions.
    pub end: Option<u64>,
    /// Count budget: measured completions this thread must deliver.
    pub quota: Option<u64>,
    pub continue_on_error: bool,
    pub verify: bool,
    /// With `verify`: how blocks are filled and checked (iolab's or fio's form).
    pub verify_form: verify::Form,
}

impl LoopPlan {
    /// The plan for `job` started at `start`: the ramp ends `ramp_ns` later, a time budget of
    /// `run_ns` after that; `quota` is this thread's share of a count budget.
    pub(crate) fn for_job(job: &crate::plan::Job, start: u64, ramp_ns: u64, run_ns: Option<u64>, quota: Option<u64>) -> LoopPlan {
        LoopPlan {
            bs: job.workload.bs as u32,
            qd: job.workload.qd,
            batch_submit: job.workload.batch_submit,
            batch_reap: job.workload.batch_reap,
            ramp_end: start + ramp_ns,
            end: run_ns.map(|r| start + ramp_ns + r),
            quota,
            continue_on_error: job.policy.continue_on_error,
            verify: job.policy.verify,
            verify_form: verify::Form::of(job.policy.verify_fio, 1),
        }
    }
}

/// The first failed I/O, for the one-line error message.
#[derive(Clone, Debug)]
pub struct FailedIo {
    pub file: u32,
    pub offset: u64,
    pub write: bool,
    /// The errno, when the kernel failed the request.
    pub errno: Option<i32>,
    pub what: String,
}

pub struct LoopEnd {
    pub measure_start: u64,
    pub measure_end: u64,
    pub first_error: Option<FailedIo>,
    /// Blocks written in the measured window and verify state (for the read-back pass).
    pub verified_reads: u64,
    /// Reads whose data failed the check (each also a failed I/O).
    pub verify_mismatches: u64,
    /// The loop stopped at the time limit (`end`), not at its quota, a stop request or a failure.
    pub ended_by_time: bool,
}

/// Blocks written with verify data, per target, so they can be read back after the run.
pub type WrittenMap = Vec<Vec<u64>>;

/// Everything one thread's loop works with, prepared before the start barrier.
pub struct LoopCtx<'a, S> {
    pub plan: LoopPlan,
    pub clock: &'a Clock,
    pub stream: S,
    /// The thread's slot buffers: `qd` x `bs` bytes, aligned (`bs` the largest of a mix).
    pub bufs: *mut u8,
    pub rec: Recorder,
    /// Run-wide stop request (Ctrl-C, or another thread's failed I/O).
    pub stop: &'a AtomicBool,
    /// Completions so far, ramp included, for the live display.
    pub progress: &'a AtomicU64,
    pub written: WrittenMap,
    pub start: u64,
}

/// A slot's request while it is in flight, and when it was submitted.
#[derive(Clone, Copy, Default)]
struct Slot {
    req: Request,
    submit_ns: u64,
}

/// The free slots' tags: a stack of at most `qd`, allocated once. Every tag in it is below
/// `qd`: it starts with `0..qd`, and a tag comes back only from a completion whose slot was
/// looked up (bounds-checked) first.
struct FreeTags {
    tags: Box<[u32]>,
    n: usize,
}

impl FreeTags {
    fn new(qd: u32) -> FreeTags {
        FreeTags { tags: (0..qd).rev().collect(), n: qd as usize }
    }

    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The top tag.
    ///
    /// # Safety
    /// The stack is not empty.
    #[inline(always)]
    unsafe fn pop(&mut self) -> u32 {
        debug_assert!(self.n > 0);
        self.n -= 1;
        // SAFETY: `0 < n <= tags.len()` before (the caller's promise; only `push` raises `n`,
        // after its bounds check), so `n - 1` is in bounds.
        unsafe { *self.tags.get_unchecked(self.n) }
    }

    #[inline(always)]
    fn push(&mut self, tag: u32) {
        self.tags[self.n] = tag;
        self.n += 1;
    }
}

/// Where the measured window stands, looked at closely only when something can change: one
/// compare per reap against `check_at`, the next instant at which the ramp ends, a second
/// begins or the time limit passes.
struct Window {
    ramp_end: u64,
    /// The time limit, or u64::MAX under a count budget.
    end: u64,
    measuring: bool,
    /// Completions now are recorded: measuring and not past the time limit.
    in_window: bool,
    /// When the measured window's current second ends (the recorder starts in second 0).
    next_second_at: u64,
    check_at: u64,
}

impl Window {
    fn new(plan: &LoopPlan, start: u64) -> Window {
        Window {
            ramp_end: plan.ramp_end,
            end: plan.end.unwrap_or(u64::MAX),
            measuring: start >= plan.ramp_end,
            in_window: false,
            next_second_at: plan.ramp_end.saturating_add(1_000_000_000),
            // The first reap looks.
            check_at: 0,
        }
    }

    /// At a reap at `now` (at or past `check_at`): end the ramp (the recorder forgets it; true
    /// is returned), say whether completions now are in the window, move the recorder to the
    /// current second, and set when to look again.
    #[cold]
    #[inline(never)]
    fn advance(&mut self, now: u64, rec: &mut Recorder) -> bool {
        let ramp_ended = !self.measuring && now >= self.ramp_end;
        if ramp_ended {
            rec.reset();
            self.measuring = true;
        }
        self.in_window = self.measuring && now <= self.end;
        if self.in_window && now >= self.next_second_at {
            let second = (now - self.ramp_end) / 1_000_000_000;
            rec.at_second(second as usize);
            self.next_second_at = self.ramp_end + (second + 1) * 1_000_000_000;
        }
        self.check_at = if !self.measuring {
            self.ramp_end
        } else if self.in_window {
            self.next_second_at.min(self.end.saturating_add(1))
        } else {
            // Past the time limit: nothing changes any more.
            u64::MAX
        };
        ramp_ended
    }
}

/// Compiled once per interface and per kind of stream: with one block size (`S::FIXED_LEN`)
/// every request is `plan.bs` long and the recorder multiplies; with a mix each request has
/// its own length and the recorder adds it up.
pub fn run<I: IoInterface, S: Source>(io: &mut I, cx: &mut LoopCtx<S>) -> Result<LoopEnd, String> {
    run_paced(io, cx, &mut super::pace::Unpaced)
}

/// The loop under a pacing that is on: kept out of line, so the worker inlines only the
/// unpaced loop, as it did before pacing existed.
#[inline(never)]
pub fn run_with_pace<I: IoInterface, S: Source, P: Pacing>(io: &mut I, cx: &mut LoopCtx<S>, pace: &mut P) -> Result<LoopEnd, String> {
    run_paced(io, cx, pace)
}

/// The loop under a pacing (`engine::pace`): with [`super::pace::Unpaced`] it is the loop above,
/// every pacing branch compiled out.
#[inline(always)]
fn run_paced<I: IoInterface, S: Source, P: Pacing>(io: &mut I, cx: &mut LoopCtx<S>, pace: &mut P) -> Result<LoopEnd, String> {
    let LoopCtx { plan, clock, stream, bufs, rec, stop, progress, written, start } = cx;
    let (bufs, start) = (*bufs, *start);
    let qd = plan.qd as usize;
    let bs = plan.bs as usize;
    let batch = plan.batch_submit as usize;
    let verify = plan.verify;
    let mut free = FreeTags::new(plan.qd);
    let mut slots = vec![Slot::default(); qd].into_boxed_slice();
    // Requests prepared but not yet accepted by the interface: `pending[..npending]`. A batch of
    // one (QD1's whole life) is not copied there: it is submitted from its slot, `lone`, so each
    // request is written once (psync QD1: 7 instructions per I/O fewer, docs/benchmarks.md).
    let (mut pending, mut npending) = (vec![Request::default(); batch].into_boxed_slice(), 0usize);
    let one = batch == 1;
    let mut lone = 0u32;
    let mut done = vec![Completion::default(); qd].into_boxed_slice();
    // `verified`: reads checked, and reads that failed the check.
    let (mut inflight, mut verified, mut gen) = (0usize, [0u64; 2], 0u64);
    // All completions, ramp included: what the live display shows.
    let mut completed = 0u64;
    let mut win = Window::new(plan, start);
    // Requests this thread may still issue: unlimited during the ramp and under a time budget;
    // under a count budget, the quota less what was measured or is outstanding (a failed I/O
    // gives its place back). One counter instead of re-deriving it per request.
    let quota_after = |outstanding: usize| plan.quota.map_or(u64::MAX, |q| q.saturating_sub(outstanding as u64));
    let mut may_issue = if win.measuring { quota_after(0) } else { u64::MAX };
    // `early`: stopped by a stop request or a failed I/O rather than by the budget; `timed`: by
    // the time limit.
    let (mut stopping, mut early, mut timed) = (false, false, false);
    let mut first_error: Option<FailedIo> = None;
    let mut now = start;
    // `now` was read right after a reap of one completion and nothing has been submitted since:
    // see the submit below.
    let mut fresh = false;
    let mut last_done = start;
    // A completion of the job's block size is full: with one block size that is one compare per
    // completion, and under verify none matches, so every completion goes to `settle`.
    let full_fixed = if verify { i64::MIN } else { plan.bs as i64 };

    loop {
        // The time limit's compare first: the stop flag's load only when it is not reached.
        if (now >= win.end || stop.load(Relaxed)) && !stopping {
            early = stop.load(Relaxed);
            timed = !early;
            stopping = true;
        }
        // The pacing holds the next I/O (never, unpaced; paced, the submit reads the clock afresh,
        // since a think time may have passed since the reap).
        let mut held = false;
        // As many requests as the batch, the free slots and the budget allow, counted once.
        let room = if stopping { 0 } else { (pending.len() - npending).min(free.n).min(may_issue.min(u32::MAX as u64) as usize) };
        for _ in 0..room {
            // SAFETY: `room <= free.n` tags are taken.
            let tag = unsafe { free.pop() };
            let next = if P::ON {
                let Some(next) = pace.next(stream, clock, completed, inflight, stop) else {
                    free.push(tag);
                    held = true;
                    break;
                };
                next
            } else {
                stream.next_io()
            };
            // SAFETY: slot `tag` owns bytes [tag*bs, (tag+1)*bs) of the thread's buffer region.
            let buf = unsafe { bufs.add(tag as usize * bs) };
            if verify && next.write {
                gen += 1;
                plan.verify_form.fill(unsafe { std::slice::from_raw_parts_mut(buf, bs) }, next.offset, gen);
            }
            let len = if S::FIXED_LEN { plan.bs } else { next.len };
            let r = Request { tag, write: next.write, file: next.file, offset: next.offset, len, buf };
            // SAFETY: every free tag is below qd = slots.len() (FreeTags).
            unsafe { slots.get_unchecked_mut(tag as usize) }.req = r;
            if one {
                lone = tag;
            } else {
                // SAFETY: `npending` stays below its value before the loop plus `room`, at most
                // `pending.len()`.
                *unsafe { pending.get_unchecked_mut(npending) } = r;
            }
            npending += 1;
            may_issue -= 1;
        }
        let can_issue_more = !stopping && may_issue > 0 && !free.is_empty() && !held;
        if npending > 0 && (npending == batch || !can_issue_more) {
            // One request right after a reap of one (QD1's whole life) takes the reap's clock
            // read as its submit time: all that came between is recording one completion and
            // preparing one request, so its latency is over-stated by that much, never
            // under-stated (-i null's p50 went from 10 to 20 ns). A TSC read costs 8 ns in this
            // VM: two per I/O were two thirds of -i null's 25 ns per I/O, now 19 (docs/benchmarks.md).
            // (One store then, not the loop: the loop's set-up cost more than its one pass.)
            // Paced, the submit reads the clock afresh: a think time may have passed since the reap.
            if !P::ON && fresh && npending == 1 {
                let tag = if one { lone } else { pending[0].tag };
                // SAFETY: a pending request's tag was a free tag, below qd = slots.len().
                unsafe { slots.get_unchecked_mut(tag as usize) }.submit_ns = now;
            } else {
                now = clock.now();
                if one {
                    // SAFETY: as above.
                    unsafe { slots.get_unchecked_mut(lone as usize) }.submit_ns = now;
                } else {
                    for r in &pending[..npending] {
                        // SAFETY: as above.
                        unsafe { slots.get_unchecked_mut(r.tag as usize) }.submit_ns = now;
                    }
                }
            }
            fresh = false;
            // SAFETY: as above.
            let reqs = if one { std::slice::from_ref(&unsafe { slots.get_unchecked(lone as usize) }.req) } else { &pending[..npending] };
            let n = io.submit(reqs).map_err(|e| format!("submission failed: {e}"))?;
            inflight += n;
            if n < npending && !one {
                // Whatever the interface did not take goes first next time (a lone request
                // stays in its slot).
                pending.copy_within(n..npending, 0);
            }
            npending -= n;
        }
        if inflight == 0 {
            if npending == 0 && (stopping || may_issue == 0) {
                break;
            }
            if P::ON && held && npending == 0 {
                (now, fresh) = (pace.wait(clock, stop, plan.end), false);
            }
            continue;
        }
        let must_wait = !can_issue_more || npending > 0;
        let min = if must_wait { inflight.min(plan.batch_reap as usize) } else { 0 };
        let n = io.reap(min, &mut done).map_err(|e| format!("reaping completions failed: {e}"))?;
        if n == 0 {
            // The reap itself (a system call, for most interfaces) came after the last read.
            fresh = false;
            continue;
        }
        now = clock.now();
        fresh = n == 1;
        if now >= win.check_at && win.advance(now, rec) {
            may_issue = quota_after(inflight + npending);
        }
        for c in &done[..n] {
            // The tag comes from the interface: checked.
            let s = &slots[c.tag as usize];
            let len = if S::FIXED_LEN { plan.bs } else { s.req.len };
            free.push(c.tag);
            // Anything but a full transfer, and verify's extra work, off the common path.
            let full = if S::FIXED_LEN { full_fixed } else { len as i64 };
            if c.result != full || (!S::FIXED_LEN && verify) {
                let r = s.req;
                if let Err(what) = settle(&r, c.result, verify, &plan.verify_form, written, &mut verified) {
                    rec.error(r.write);
                    may_issue = may_issue.saturating_add(1);
                    if first_error.is_none() {
                        let errno = crate::interfaces::errno_of(c.result);
                        first_error = Some(FailedIo { file: r.file, offset: r.offset, write: r.write, errno, what });
                    }
                    if !plan.continue_on_error {
                        stopping = true;
                        early = true;
                        stop.store(true, Relaxed);
                    }
                    continue;
                }
            }
            if win.in_window {
                rec.record(s.req.write, s.req.file as usize, now - s.submit_ns);
                if !S::FIXED_LEN {
                    rec.add_bytes(s.req.write, len);
                }
                last_done = now;
            }
        }
        inflight -= n;
        completed += n as u64;
        progress.store(completed, Relaxed);
    }
    rec.finish();
    if P::ON {
        pace.verdict()?;
    }
    let measure_start = plan.ramp_end.max(start);
    // Under a time limit the window ends at it; at a quota reached first (a time and a count),
    // a stop or a failure, at the last completion.
    let timed = timed && !early;
    let measure_end = match plan.end {
        Some(e) if timed => e,
        _ => last_done.max(measure_start),
    };
    Ok(LoopEnd {
        measure_start,
        measure_end,
        first_error,
        verified_reads: verified[0],
        verify_mismatches: verified[1],
        ended_by_time: timed,
    })
}

/// A completion that is not simply a full transfer, or any under verify: the failure in words,
/// or Ok after checking a read's data / noting a written block for the read-back.
#[inline(never)]
fn settle(
    r: &Request,
    result: i64,
    verify: bool,
    form: &verify::Form,
    written: &mut WrittenMap,
    verified: &mut [u64; 2],
) -> Result<(), String> {
    if result < 0 {
        return Err(crate::interfaces::error_text(result));
    }
    if result != r.len as i64 {
        return Err(format!("short {} of {} bytes", result, r.len));
    }
    if verify && r.write {
        let map = &mut written[r.file as usize];
        let block = r.offset / r.len as u64;
        map[(block / 64) as usize] |= 1 << (block % 64);
    } else if verify {
        // SAFETY: the read just filled this slot's buffer.
        let data = unsafe { std::slice::from_raw_parts(r.buf, r.len as usize) };
        if let Err(e) = form.check(data, r.offset) {
            verified[1] += 1;
            return Err(format!("verify failed: {e}"));
        }
        verified[0] += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn plan(ramp_end: u64, end: Option<u64>) -> LoopPlan {
        LoopPlan {
            bs: 4096,
            qd: 1,
            batch_submit: 1,
            batch_reap: 1,
            ramp_end,
            end,
            quota: None,
            continue_on_error: false,
            verify: false,
            verify_form: Default::default(),
        }
    }

    /// The one compare per reap must see every change the three checks it replaced saw: the
    /// ramp's end (the recorder forgets the ramp), each new second, the time limit (inclusive).
    #[test]
    fn the_window_looks_again_at_the_ramp_end_each_second_and_the_time_limit() {
        let mut rec = Recorder::new(8, 1, 4096);
        let mut w = Window::new(&plan(10, Some(10 + 3 * S)), 0);
        assert!(!w.measuring && w.check_at == 0, "the first reap looks");
        assert!(!w.advance(5, &mut rec));
        assert_eq!((w.in_window, w.check_at), (false, 10), "in the ramp: look again at its end");
        rec.record(false, 0, 7); // a ramp I/O, forgotten at the ramp's end
        assert!(w.advance(10, &mut rec), "the ramp ends");
        assert_eq!((w.measuring, w.in_window, w.check_at), (true, true, 10 + S));
        rec.record(false, 0, 100);
        assert!(!w.advance(10 + S + 5, &mut rec));
        assert_eq!((w.in_window, w.next_second_at, w.check_at), (true, 10 + 2 * S, 10 + 2 * S));
        rec.record(false, 0, 200);
        assert!(!w.advance(10 + 3 * S, &mut rec));
        assert_eq!((w.in_window, w.check_at), (true, 10 + 3 * S + 1), "the limit itself is in the window");
        rec.record(false, 0, 300);
        assert!(!w.advance(10 + 3 * S + 1, &mut rec));
        assert_eq!((w.in_window, w.check_at), (false, u64::MAX), "past the limit: never again");
        rec.finish();
        let per_second: Vec<u64> = rec.series.iter().map(|s| s.read_ios).collect();
        assert_eq!(per_second[..4], [1, 1, 0, 1]);
        assert_eq!((rec.read.ios, rec.read.min_ns, rec.read.max_ns), (3, 100, 300));
    }

    /// Takes every request it is offered (or, with `refuse_odd`, none on every other call) and
    /// completes each at once with a full transfer; keeps what it was given.
    struct Echo {
        seen: Vec<Request>,
        ready: Vec<Completion>,
        calls: u64,
        refuse_odd: bool,
    }

    impl IoInterface for Echo {
        type Handle = ();
        fn open(_: &crate::interfaces::Setup, _: &()) -> std::io::Result<Self> {
            unreachable!("made by the test")
        }
        fn submit(&mut self, reqs: &[Request]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.refuse_odd && self.calls % 2 == 1 {
                return Ok(0);
            }
            for r in reqs {
                self.seen.push(*r);
                self.ready.push(Completion { tag: r.tag, result: r.len as i64 });
            }
            Ok(reqs.len())
        }
        fn reap(&mut self, _: usize, out: &mut [Completion]) -> std::io::Result<usize> {
            let n = self.ready.len().min(out.len());
            out[..n].copy_from_slice(&self.ready[..n]);
            self.ready.drain(..n);
            Ok(n)
        }
    }

    /// A batch of one is submitted from its slot rather than a copy: the interface must still
    /// see every request once, whole (its own slot's buffer, the block size, the stream's
    /// offsets in order), also when it refused it first; batches of more go through `pending`.
    #[test]
    fn every_request_reaches_the_interface_once_and_whole_alone_or_in_batches() {
        use super::super::workload::{Region, Stream};
        const BS: u64 = 4096;
        let clock = Clock::calibrate();
        let region = Region { start: 1 << 20, blocks: 1 << 18 };
        for (qd, batch, refuse_odd) in [(1, 1, false), (1, 1, true), (4, 1, false), (4, 1, true), (4, 2, false), (4, 4, true)] {
            let mut bufs = vec![0u8; (qd as u64 * BS) as usize];
            let (stop, progress) = (AtomicBool::new(false), AtomicU64::new(0));
            let start = clock.now();
            let plan = LoopPlan { qd, batch_submit: batch, quota: Some(1000), ..plan(start, None) };
            let mut cx = LoopCtx {
                plan,
                clock: &clock,
                stream: Stream::new(crate::rng::Rng::new(7), vec![region], BS, true, 0),
                bufs: bufs.as_mut_ptr(),
                rec: Recorder::new(2, 1, BS),
                stop: &stop,
                progress: &progress,
                written: vec![vec![]],
                start,
            };
            let mut io = Echo { seen: vec![], ready: vec![], calls: 0, refuse_odd };
            let end = run(&mut io, &mut cx).expect("the loop runs");
            let case = format!("qd {qd} batch {batch} refusing {refuse_odd}");
            assert!(end.first_error.is_none(), "{case}");
            assert_eq!((cx.rec.read.ios, progress.load(Relaxed), io.seen.len()), (1000, 1000, 1000), "{case}");
            let mut expected = Stream::new(crate::rng::Rng::new(7), vec![region], BS, true, 0);
            for r in &io.seen {
                assert!(r.tag < qd, "{case}: tag {}", r.tag);
                assert_eq!(r.buf, bufs.as_mut_ptr().wrapping_add((r.tag as u64 * BS) as usize), "{case}: the slot's own buffer");
                assert_eq!((r.len, r.write, r.file, r.offset), (BS as u32, false, 0, expected.next_io().offset), "{case}");
            }
        }
    }

    /// Under a count budget there is no limit: only the seconds.
    #[test]
    fn without_a_time_limit_the_window_never_closes() {
        let mut rec = Recorder::new(2, 1, 4096);
        let mut w = Window::new(&plan(0, None), 0);
        assert!(w.measuring);
        assert!(!w.advance(1, &mut rec));
        assert_eq!((w.in_window, w.check_at), (true, S));
        assert!(!w.advance(u64::MAX - 1, &mut rec));
        assert!(w.in_window);
    }
}
