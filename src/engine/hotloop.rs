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

/// Compiled once per interface and per kind of stream: with one block size (`S::FIXED_LEN`)
/// every request is `plan.bs` long and the recorder multiplies; with a mix each request has
/// its own length and the recorder adds it up.
pub fn run<I: IoInterface, S: Source>(io: &mut I, cx: &mut LoopCtx<S>) -> Result<LoopEnd, String> {
    run_paced(io, cx, &mut super::pace::Unpaced)
}

/// The loop under a pacing (`engine::pace`): with [`super::pace::Unpaced`] it is the loop above,
/// every pacing branch compiled out. Never inlined, so each kind of pacing is a loop of its own,
/// as `run` was before pacing.
#[inline(never)]
pub fn run_paced<I: IoInterface, S: Source, P: Pacing>(io: &mut I, cx: &mut LoopCtx<S>, pace: &mut P) -> Result<LoopEnd, String> {
    let LoopCtx { plan, clock, stream, bufs, rec, stop, progress, written, start } = cx;
    let (bufs, start) = (*bufs, *start);
    let qd = plan.qd as usize;
    let bs = plan.bs as usize;
    let batch = plan.batch_submit as usize;
    let mut free: Vec<u32> = (0..plan.qd).rev().collect();
    let mut slots = vec![Slot::default(); qd];
    // Requests prepared but not yet accepted by the interface: `pending[..npending]`.
    let (mut pending, mut npending) = (vec![Request::default(); batch], 0usize);
    let mut done = vec![Completion::default(); qd];
    let (mut inflight, mut verified, mut gen) = (0usize, 0u64, 0u64);
    // All completions, ramp included: what the live display shows.
    let mut completed = 0u64;
    let mut measuring = start >= plan.ramp_end;
    // Requests this thread may still issue: unlimited during the ramp and under a time budget;
    // under a count budget, the quota less what was measured or is outstanding (a failed I/O
    // gives its place back). One counter instead of re-deriving it per request.
    let quota_after = |outstanding: usize| plan.quota.map_or(u64::MAX, |q| q.saturating_sub(outstanding as u64));
    let mut may_issue = if measuring { quota_after(0) } else { u64::MAX };
    // `early`: stopped by a stop request or a failed I/O rather than by the budget; `timed`: by
    // the time limit.
    let (mut stopping, mut early, mut timed) = (false, false, false);
    let mut first_error: Option<FailedIo> = None;
    let mut now = start;
    // `now` was read right after a reap of one completion and nothing has been submitted since:
    // see the submit below.
    let mut fresh = false;
    let mut last_done = start;
    // When the measured window's current second ends (the recorder starts in second 0).
    let mut next_second_at = plan.ramp_end.saturating_add(1_000_000_000);

    loop {
        if !stopping && (stop.load(Relaxed) || plan.end.is_some_and(|e| now >= e)) {
            early = stop.load(Relaxed);
            timed = !early;
            stopping = true;
        }
        // The pacing holds the next I/O (never, unpaced; paced, the submit reads the clock afresh,
        // since a think time may have passed since the reap).
        let mut held = false;
        while !stopping && npending < pending.len() && may_issue > 0 {
            let Some(tag) = free.pop() else { break };
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
            if plan.verify && next.write {
                gen += 1;
                verify::fill(unsafe { std::slice::from_raw_parts_mut(buf, bs) }, next.offset, gen);
            }
            let len = if S::FIXED_LEN { plan.bs } else { next.len };
            let r = Request { tag, write: next.write, file: next.file, offset: next.offset, len, buf };
            slots[tag as usize].req = r;
            pending[npending] = r;
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
            if P::ON || !(fresh && npending == 1) {
                now = clock.now();
            }
            fresh = false;
            for r in &pending[..npending] {
                slots[r.tag as usize].submit_ns = now;
            }
            let n = io.submit(&pending[..npending]).map_err(|e| format!("submission failed: {e}"))?;
            inflight += n;
            if n < npending {
                // Whatever the interface did not take goes first next time.
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
        if !measuring && now >= plan.ramp_end {
            rec.reset();
            measuring = true;
            may_issue = quota_after(inflight + npending);
        }
        let in_window = measuring && plan.end.is_none_or(|e| now <= e);
        // A compare per reap; the division only when a second has passed.
        if in_window && now >= next_second_at {
            let second = (now - plan.ramp_end) / 1_000_000_000;
            rec.at_second(second as usize);
            next_second_at = plan.ramp_end + (second + 1) * 1_000_000_000;
        }
        for c in &done[..n] {
            let Slot { req: r, submit_ns } = slots[c.tag as usize];
            free.push(c.tag);
            inflight -= 1;
            // Anything but a full transfer, and verify's extra work, off the common path.
            if c.result != r.len as i64 || plan.verify {
                if let Err(what) = settle(&r, c.result, plan.verify, written, &mut verified) {
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
            if in_window {
                rec.record(r.write, r.file as usize, now - submit_ns);
                if !S::FIXED_LEN {
                    rec.add_bytes(r.write, r.len);
                }
                last_done = now;
            }
        }
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
    Ok(LoopEnd { measure_start, measure_end, first_error, verified_reads: verified, ended_by_time: timed })
}

/// A completion that is not simply a full transfer, or any under verify: the failure in words,
/// or Ok after checking a read's data / noting a written block for the read-back.
#[inline(never)]
fn settle(r: &Request, result: i64, verify: bool, written: &mut WrittenMap, verified: &mut u64) -> Result<(), String> {
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
        verify::check(data, r.offset).map_err(|e| format!("verify failed: {e}"))?;
        *verified += 1;
    }
    Ok(())
}
