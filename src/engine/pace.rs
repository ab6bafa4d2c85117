//! Pacing the hot loop (`plan::pace`): fio's rate caps (linear or Poisson), rate floors and
//! think time. The loop is compiled once per kind of pacing, as per kind of [`Source`]: the
//! default, [`Unpaced`], hands the stream's next I/O straight through and costs nothing; a
//! [`Pacer`] may hold the next I/O until it is due, and the loop then submits what it has,
//! reaps until nothing is in flight (fio's quiesce) and sleeps in [`Pacing::wait`].
//!
//! fio's flow is a part of the pacer: the jobs of a group run together that share a flow id
//! share one [`Flow`]; each thread counts the I/O it admits into it and is held back while its
//! share of the flow's I/O is above its share of the flow's weight (fio's `flow.c`).
//!
//! Latency is stamped at submission, as always, not at the instant an I/O was due (fio does the
//! same): a rate below what the device can do measures the device, not the schedule.
use super::clock::Clock;
use super::workload::{NextIo, Source};
use crate::plan::pace::{Pace, RateProcess};
use crate::rng::Rng;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};
use std::sync::Arc;

/// What the hot loop asks of its pacing.
pub trait Pacing {
    /// Whether it can ever hold an I/O (false: the loop is the unpaced one).
    const ON: bool;
    /// The next I/O, if it may be issued now; None holds it (it is issued later, in order).
    /// `completed`: the thread's completions so far; `inflight`: its I/Os in flight.
    fn next<S: Source>(&mut self, stream: &mut S, clock: &Clock, completed: u64, inflight: usize, stop: &AtomicBool) -> Option<NextIo>;
    /// Nothing in flight and the next I/O held: sleep until it is due (or `end`, or a stop);
    /// returns the clock after.
    fn wait(&mut self, clock: &Clock, stop: &AtomicBool, end: Option<u64>) -> u64;
    /// After the loop: Err where a rate floor was not met (fio ends such a job).
    fn verdict(&mut self) -> Result<(), String>;
}

/// No pacing: the stream's next I/O, always.
pub struct Unpaced;

impl Pacing for Unpaced {
    const ON: bool = false;
    #[inline(always)]
    fn next<S: Source>(&mut self, stream: &mut S, _: &Clock, _: u64, _: usize, _: &AtomicBool) -> Option<NextIo> {
        Some(stream.next_io())
    }
    fn wait(&mut self, clock: &Clock, _: &AtomicBool, _: Option<u64>) -> u64 {
        clock.now()
    }
    fn verdict(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// One flow's shared counter (fio's `struct fio_flow`): the I/O its threads admitted and their
/// weights, each thread's added when its loop starts and taken out when it ends (fio's
/// `flow_init_job` and `flow_put`), so the threads still running are held to their own ratio.
#[derive(Debug)]
pub struct Flow {
    /// I/Os admitted by the threads in the flow now, plus 1 (fio's start: never a division by 0).
    ios: AtomicI64,
    /// The weights of the threads in the flow now.
    weight: AtomicI64,
}

impl Flow {
    pub fn new() -> Arc<Flow> {
        Arc::new(Flow { ios: AtomicI64::new(1), weight: AtomicI64::new(0) })
    }

    /// Is a thread of weight `weight` that admitted `own` I/Os past its share (fio's
    /// `flow_threshold_exceeded`: own / flow's I/O > weight / flow's weight)?
    fn exceeded(&self, own: i64, weight: i64) -> bool {
        own as i128 * self.weight.load(Relaxed) as i128 > weight as i128 * self.ios.load(Relaxed) as i128
    }
}

/// A thread's place in its flow: its weight and what it admitted, taken out of the flow when
/// the thread's pacer is dropped (its loop over).
struct FlowMember {
    flow: Arc<Flow>,
    weight: i64,
    own: i64,
    sleep_ns: u64,
    /// The held I/O waits for the flow (not for a rate or think time).
    holding: bool,
}

impl Drop for FlowMember {
    fn drop(&mut self) {
        self.flow.ios.fetch_sub(self.own, Relaxed);
        self.flow.weight.fetch_sub(self.weight, Relaxed);
    }
}

/// One thread's pacing of a job asking for a rate, think time or a flow.
pub struct Pacer {
    pace: Pace,
    thread: usize,
    /// Directions the job issues (reads, writes): only those are held to a floor.
    dirs: [bool; 2],
    /// The smallest block size, fio's measure of a byte rate in I/Os (Poisson).
    min_bs: u64,
    start: u64,
    ramp_end: u64,
    held: Option<NextIo>,
    /// When the held I/O is due (0: as soon as nothing is in flight).
    wake_at: u64,
    issued_ios: [u64; 2],
    issued_bytes: [u64; 2],
    /// Poisson: when each direction's next I/O is due.
    next_due: [u64; 2],
    rng: Rng,
    last_think_count: u64,
    last_think_at: u64,
    /// The floor's current cycle: its start and what was issued in it.
    cycle_start: u64,
    cycle_ios: [u64; 2],
    cycle_bytes: [u64; 2],
    failure: Option<String>,
    /// Its flow, when the job is in one shared with other jobs run together.
    flow: Option<FlowMember>,
}

/// Sleep until `until` on the clock's time line, in naps of at most 10 ms so a stop is seen.
fn sleep_until(clock: &Clock, until: u64, stop: &AtomicBool) -> u64 {
    loop {
        let now = clock.now();
        if now >= until || stop.load(Relaxed) {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_nanos((until - now).min(10_000_000)));
    }
}

/// Spin on the CPU for `ns` (fio's thinktime_spin: the application busy with the data).
fn spin(clock: &Clock, ns: u64) -> u64 {
    let until = clock.now() + ns;
    loop {
        let now = clock.now();
        if now >= until {
            return now;
        }
        std::hint::spin_loop();
    }
}

impl Pacer {
    /// Thread `thread`'s pacer for `job`, whose loop starts at `start` and measures from
    /// `ramp_end`, in `flow` (the job's flow shared with the jobs run together with it); None
    /// when the job asks for no pacing, or only for a flow and shares none.
    pub(crate) fn for_job(job: &crate::plan::Job, thread: usize, start: u64, ramp_end: u64, flow: Option<&Arc<Flow>>) -> Option<Pacer> {
        let pace = job.workload.pattern.pace.clone().filter(|p| !p.is_none())?;
        let flow = flow.filter(|_| pace.flow > 0).map(|f| {
            // fio's flow_init_job: the thread's weight joins the flow as its loop starts.
            f.weight.fetch_add(pace.flow as i64, Relaxed);
            FlowMember { flow: f.clone(), weight: pace.flow as i64, own: 0, sleep_ns: pace.flow_sleep_ns, holding: false }
        });
        if flow.is_none() && pace.is_group_only() {
            return None;
        }
        let w = &job.workload;
        let dirs = match w.rw {
            crate::plan::Rw::Read | crate::plan::Rw::Randread => [true, false],
            crate::plan::Rw::Write | crate::plan::Rw::Randwrite => [false, true],
            _ => [w.write_mix < 100, w.write_mix > 0],
        };
        let min_bs = w.bssplit.bounds().map_or(w.bs, |b| b.0).max(1);
        let mut rng = Rng::new(w.seed ^ 0x9ace_0000 ^ thread as u64);
        let mut next_due = [start, start];
        if pace.rate_process == RateProcess::Poisson {
            for (d, due) in next_due.iter_mut().enumerate() {
                *due = start + gap(&pace, d, min_bs, &mut rng);
            }
        }
        Some(Pacer {
            pace,
            thread,
            dirs,
            min_bs,
            start,
            ramp_end,
            held: None,
            wake_at: 0,
            issued_ios: [0; 2],
            issued_bytes: [0; 2],
            next_due,
            rng,
            last_think_count: 0,
            last_think_at: start,
            cycle_start: ramp_end.max(start),
            cycle_ios: [0; 2],
            cycle_bytes: [0; 2],
            failure: None,
            flow,
        })
    }

    /// When direction `d`'s next I/O is due (0: no cap).
    fn due(&self, d: usize) -> u64 {
        let p = &self.pace;
        if p.rate_iops[d] == 0 && p.rate_bps[d] == 0 {
            return 0;
        }
        if p.rate_process == RateProcess::Poisson {
            return self.next_due[d];
        }
        let (done, per_s) = if p.rate_iops[d] > 0 { (self.issued_ios[d], p.rate_iops[d]) } else { (self.issued_bytes[d], p.rate_bps[d]) };
        self.start + (done as u128 * 1_000_000_000 / per_s as u128) as u64
    }

    /// Think time due now? (fio's handle_thinktime: every thinktime_blocks I/Os, or
    /// thinktime_iotime of I/O.)
    fn think_due(&self, completed: u64, now: u64) -> bool {
        let p = &self.pace;
        if p.thinktime_ns == 0 {
            return false;
        }
        let count = if p.thinktime_issue { self.issued_ios[0] + self.issued_ios[1] } else { completed };
        let by_time = p.thinktime_iotime_ns > 0 && now.saturating_sub(self.last_think_at) >= p.thinktime_iotime_ns + p.thinktime_ns;
        let blocks = match p.thinktime_blocks {
            0 if p.thinktime_iotime_ns > 0 => None,
            0 => Some(1),
            n => Some(n),
        };
        by_time || blocks.is_some_and(|b| count >= self.last_think_count + b)
    }

    /// The floor over the cycle that ended at `now`: a failure in words, or None.
    fn floor_missed(&self, now: u64) -> Option<String> {
        let spent = now - self.cycle_start;
        let p = &self.pace;
        for d in (0..2).filter(|&d| self.dirs[d]) {
            let what = if d == 0 { "reads" } else { "writes" };
            let bps = self.cycle_bytes[d] as u128 * 1_000_000_000 / spent as u128;
            let iops = self.cycle_ios[d] as u128 * 1_000_000_000 / spent as u128;
            if p.rate_min_bps[d] > 0 && bps < p.rate_min_bps[d] as u128 {
                return Some(format!(
                    "rate_min: thread {} issued {bps} B/s of {what} over {} ms, below the {} B/s asked (fio ends such a job)",
                    self.thread,
                    spent / 1_000_000,
                    p.rate_min_bps[d]
                ));
            }
            if p.rate_min_iops[d] > 0 && iops < p.rate_min_iops[d] as u128 {
                return Some(format!(
                    "rate_iops_min: thread {} issued {iops} IOPS of {what} over {} ms, below the {} asked (fio ends such a job)",
                    self.thread,
                    spent / 1_000_000,
                    p.rate_min_iops[d]
                ));
            }
        }
        None
    }

    /// Count an admitted I/O: the rate's schedule, the floor's cycle.
    fn admit(&mut self, io: &NextIo, now: u64) {
        let d = io.write as usize;
        let len = io.len as u64;
        self.issued_ios[d] += 1;
        self.issued_bytes[d] += len;
        if self.pace.rate_process == RateProcess::Poisson && (self.pace.rate_iops[d] > 0 || self.pace.rate_bps[d] > 0) {
            self.next_due[d] += gap(&self.pace, d, self.min_bs, &mut self.rng);
        }
        if now < self.ramp_end {
            return;
        }
        let cycle = self.pace.rate_cycle_ms.max(1) * 1_000_000;
        if now >= self.cycle_start + cycle {
            if self.failure.is_none() {
                self.failure = self.floor_missed(now);
            }
            self.cycle_start = now;
            self.cycle_ios = [0; 2];
            self.cycle_bytes = [0; 2];
        }
        self.cycle_ios[d] += 1;
        self.cycle_bytes[d] += len;
    }
}

/// A Poisson gap for direction `d`, nanoseconds: exponential with the mean of its rate
/// (a byte rate counted in I/Os of the smallest block size, as fio).
fn gap(p: &Pace, d: usize, min_bs: u64, rng: &mut Rng) -> u64 {
    let iops = if p.rate_iops[d] > 0 { p.rate_iops[d] as f64 } else { (p.rate_bps[d] as f64 / min_bs as f64).max(1e-9) };
    if p.rate_iops[d] == 0 && p.rate_bps[d] == 0 {
        return 0;
    }
    // A uniform draw in (0, 1]: -ln of it is the exponential.
    let u = ((rng.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    (-u.ln() * 1e9 / iops) as u64
}

impl Pacing for Pacer {
    const ON: bool = true;

    fn next<S: Source>(&mut self, stream: &mut S, clock: &Clock, completed: u64, inflight: usize, stop: &AtomicBool) -> Option<NextIo> {
        if self.failure.is_some() {
            stop.store(true, Relaxed);
            return None;
        }
        let io = *self.held.get_or_insert_with(|| stream.next_io());
        let mut now = clock.now();
        if self.think_due(completed, now) {
            if inflight > 0 {
                // fio's quiesce: the stall comes when nothing is in flight.
                self.wake_at = 0;
                return None;
            }
            let spun = if self.pace.thinktime_spin_ns > 0 { spin(clock, self.pace.thinktime_spin_ns) } else { now };
            let rest = self.pace.thinktime_ns - self.pace.thinktime_spin_ns;
            now = sleep_until(clock, spun + rest, stop);
            self.last_think_count = if self.pace.thinktime_issue { self.issued_ios[0] + self.issued_ios[1] } else { completed };
            self.last_think_at = now;
            if stop.load(Relaxed) {
                return None;
            }
        }
        let due = self.due(io.write as usize);
        if due > now {
            self.wake_at = due;
            return None;
        }
        if let Some(f) = &mut self.flow {
            // fio's flow_threshold_exceeded: past its share, the thread waits (once nothing is
            // in flight, flow_sleep; fio's 0: it looks again at once); else it counts the I/O.
            f.holding = f.flow.exceeded(f.own, f.weight);
            if f.holding {
                self.wake_at = if inflight > 0 { 0 } else { now + f.sleep_ns };
                return None;
            }
            f.flow.ios.fetch_add(1, Relaxed);
            f.own += 1;
        }
        self.admit(&io, now);
        self.held = None;
        Some(io)
    }

    fn wait(&mut self, clock: &Clock, stop: &AtomicBool, end: Option<u64>) -> u64 {
        if self.flow.as_ref().is_some_and(|f| f.holding && f.sleep_ns == 0) {
            // Held by the flow without a flow_sleep: let the other threads of the flow run.
            std::thread::yield_now();
            return clock.now();
        }
        let until = end.map_or(self.wake_at, |e| self.wake_at.min(e));
        sleep_until(clock, until, stop)
    }

    fn verdict(&mut self) -> Result<(), String> {
        self.failure.take().map_or(Ok(()), Err)
    }
}
