//! The engine: runs one job's threads over already-open targets and hands back what it
//! measured. It knows nothing of storage formats or reports.
pub mod clock;
pub mod error;
pub mod fileset;
pub mod hotloop;
pub mod offload;
pub mod pace;
pub mod recorder;
pub mod steady;
pub mod workload;

pub use crate::cancel::{install_interrupt_handler, interrupt, Cancel};
use crate::interfaces::memory::AlignedBuf;
pub use crate::interfaces::OpenTarget;
use crate::interfaces::{self, Acquire, Acquired, Interface, Setup, SyncReader, VisitTarget};
use crate::plan::{Budget, Job};
use crate::verify;
use clock::{Clock, ClockInfo};
pub use error::EngineError;
use hotloop::{FailedIo, LoopPlan, WrittenMap};
use recorder::Recorder;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use workload::{Rng, Source, Streams};

/// Measurements taken around the measured window, by the coordinating thread (never by a
/// worker): `window_start` when the ramp ends, `window_end` when the budget is spent.
pub trait WindowHooks {
    /// `workload_tids`: the kernel thread ids of the workers.
    fn window_start(&mut self, workload_tids: &[i32]);
    /// Called every ~20 ms inside the window, for meters that must catch short-lived things.
    fn window_tick(&mut self) {}
    fn window_end(&mut self);
}

/// Called about once a second from the coordinating thread with (elapsed s, total s or None,
/// completions so far including the ramp, in ramp).
pub type ProgressFn<'a> = &'a mut dyn FnMut(f64, Option<f64>, u64, bool);

pub struct EngineOutput {
    pub rec: Recorder,
    /// Measured window, seconds (ramp excluded).
    pub window_s: f64,
    pub interrupted: bool,
    pub first_error: Option<FailedIo>,
    pub clock: ClockInfo,
    pub verified_reads: u64,
    pub verified_written: u64,
    /// Reads (and read-back blocks) whose data failed the verify check: failed I/Os of that kind.
    pub verify_mismatches: u64,
    /// Some thread's loop ended at the time limit (not at its count, a stop or a failure): under
    /// a budget of a time and a count, the time came first.
    pub ended_by_time: bool,
    /// The wall-clock instant the threads were let go (the ramp, if any, starts here), Unix
    /// seconds: a group's members are compared by it.
    pub started_unix_s: f64,
    /// What each thread was given besides its CPU (memory policy, I/O priority, per-command
    /// priority), read back from the kernel; empty when none was asked.
    pub threads_applied: Vec<interfaces::thread::Applied>,
    /// `--steadystate`: whether and when the run became steady (and ended there).
    pub steadystate: Option<steady::SteadyResult>,
}

/// The start shared by a group of jobs run together (fio's jobs without stonewall): each
/// member's engine, once its own threads are prepared, waits here for every other member's;
/// if any member could not prepare, no member runs. It also holds each member's stop request,
/// which another member's end sets (fio's `exitall`, [`Exit`]).
pub struct Together {
    members: Barrier,
    failed: AtomicBool,
    /// Each member's stop request: the flag its workers' loops watch.
    stops: Vec<AtomicBool>,
    /// Who stopped each member (that member's place + 1; 0: nobody).
    stopped_by: Vec<AtomicUsize>,
    /// Each member is past its start delay (fio's running job, which `exit_what=stonewall` stops).
    started: Vec<AtomicBool>,
    /// Each member's run is over (nothing left to stop).
    ended: Vec<AtomicBool>,
}

impl Together {
    /// A start for `members` jobs; each must call [`run_in_group`] once.
    pub fn new(members: usize) -> Together {
        Together {
            members: Barrier::new(members),
            failed: AtomicBool::new(false),
            stops: (0..members).map(|_| AtomicBool::new(false)).collect(),
            stopped_by: (0..members).map(|_| AtomicUsize::new(0)).collect(),
            started: (0..members).map(|_| AtomicBool::new(false)).collect(),
            ended: (0..members).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// The member that stopped `member` with its exit, if one did.
    pub fn stopped_by(&self, member: usize) -> Option<usize> {
        self.stopped_by.get(member).and_then(|b| b.load(Ordering::Acquire).checked_sub(1))
    }

    /// Member `by`'s exit: stop the members it names (only those started, with `started_only`),
    /// each remembering the first member that stopped it.
    fn exit(&self, by: usize, exit: &Exit) {
        for &m in exit.stops.iter().filter(|&&m| m != by && m < self.stops.len()) {
            if self.ended[m].load(Ordering::Acquire) || (exit.started_only && !self.started[m].load(Ordering::Acquire)) {
                continue;
            }
            let _ = self.stopped_by[m].compare_exchange(0, by + 1, Ordering::AcqRel, Ordering::Acquire);
            self.stops[m].store(true, Ordering::Release);
        }
    }
}

/// What a member's end stops among the members of its group (fio's `exitall`, `exit_what`,
/// `exitall_on_error`): the members' places, at its end or only at a failed end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exit {
    pub stops: Vec<usize>,
    /// Only the members past their start delay (fio's `exit_what=stonewall`: the running jobs).
    pub started_only: bool,
    /// Only when the member's run failed (fio's `exitall_on_error`), not at every end.
    pub on_failure_only: bool,
}

/// One member's place in a group's start: the shared start, and how long after it this member
/// starts (fio's `startdelay`), seconds; its place among the members, what its end stops, and
/// the flow it shares with other members (fio's `flow`).
pub struct GroupStart<'a> {
    pub together: &'a Together,
    pub delay_s: f64,
    pub member: usize,
    pub exit: Option<Exit>,
    pub flow: Option<std::sync::Arc<pace::Flow>>,
}

struct ThreadOut {
    applied: Option<interfaces::thread::Applied>,
    rec: Recorder,
    end: hotloop::LoopEnd,
    verified_written: u64,
    verify_error: Option<FailedIo>,
    /// The read-back found a block whose data failed the check.
    read_back_mismatch: bool,
}

/// Pin this thread to `cpu` and read the affinity back: a cpuset may narrow what is asked.
fn pin_to_cpu(cpu: usize) -> Result<(), EngineError> {
    // SAFETY: the sets are plain bitmasks initialised by zeroing and CPU_SET.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(EngineError::Prepare(format!("cannot pin to CPU {cpu}: {}", std::io::Error::last_os_error())));
        }
        let mut got: libc::cpu_set_t = std::mem::zeroed();
        let read = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut got) == 0;
        if !read || !libc::CPU_ISSET(cpu, &got) || libc::CPU_COUNT(&got) != 1 {
            return Err(EngineError::Prepare(format!("pinned to CPU {cpu}, but the kernel's affinity read back differs (a cpuset?)")));
        }
    }
    Ok(())
}

/// The CPU each worker, and each worker's SQPOLL thread, is pinned to, round-robin over the
/// lists; an empty list pins nothing.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Placement {
    pub workers: Vec<usize>,
    pub sq: Vec<u32>,
}

impl Placement {
    /// The job's own `--cpus` and `--sq-cpu` (one CPU for every ring's SQ thread).
    pub(crate) fn of_job(job: &Job) -> Placement {
        Placement { workers: job.workload.cpus.clone(), sq: job.io.pinned_cpus() }
    }
    fn worker(&self, t: usize) -> Option<usize> {
        (!self.workers.is_empty()).then(|| self.workers[t % self.workers.len()])
    }
    fn sq(&self, t: usize) -> Option<u32> {
        (!self.sq.is_empty()).then(|| self.sq[t % self.sq.len()])
    }
}

/// Per-second slots each thread allocates before its first I/O.
fn series_len(job: &Job) -> usize {
    match job.timing.budget.seconds() {
        Some(s) => s.ceil() as usize + 2,
        None => 86_400, // a day of seconds; count-based runs have no known length
    }
}

/// Memory a run allocates up front: per thread, its slot buffers, recorder and stack (as Rust
/// gives a spawned thread). Checked before anything is touched, so a run too big for the
/// machine is refused in one line instead of aborting with settings changed.
pub(crate) fn memory_needed(job: &Job) -> u64 {
    const THREAD_STACK: u64 = 2 << 20;
    let buffers = (job.workload.bs * job.workload.qd as u64).max(4096);
    let recorder = Recorder::bytes_for(series_len(job));
    job.workload.threads as u64 * (buffers + recorder + THREAD_STACK)
}

/// This thread's share of a count or byte budget (None under a time budget alone): the total
/// split evenly, the first threads taking one more each for the remainder.
fn quota_for(job: &Job, t: usize) -> Option<u64> {
    let total = match job.timing.budget {
        // A block size mix: as many I/Os as its mean size makes the bytes.
        Budget::Bytes(b) | Budget::SecondsOrBytes { bytes: b, .. } if !job.workload.bssplit.is_one() => {
            (b as f64 / job.workload.mean_bs()).ceil() as u64
        }
        budget => budget.ios(job.workload.bs)?,
    };
    let threads = job.workload.threads as u64;
    Some(total / threads + u64::from((t as u64) < total % threads))
}

/// What one run's workers and its coordinating thread share; the workers borrow it through
/// `std::thread::scope`.
struct Shared<'a> {
    job: &'a Job,
    placement: &'a Placement,
    targets: &'a [OpenTarget],
    clock: Clock,
    /// Measured before the run, on a quiet machine.
    clock_info: ClockInfo,
    ramp_ns: u64,
    /// A time budget's measured window.
    run_ns: Option<u64>,
    series_len: usize,
    /// Every worker and the coordinating thread: all prepared (`ready`), the start instant
    /// published (`go`), the window's end sampled (`closing`).
    ready: Barrier,
    go: Barrier,
    closing: Barrier,
    start_at: AtomicU64,
    /// Per worker, completions so far (ramp included), for progress.
    progress: Vec<AtomicU64>,
    /// Workers whose loop is over.
    finished: AtomicUsize,
    /// The hot loops' stop request: a cancel passed on by the coordinating thread, a worker's
    /// failure, or (in a group) another member's exit.
    stop: &'a AtomicBool,
    /// Some thread could not prepare (or panicked before the start): nobody runs.
    prep_failed: AtomicBool,
    tids: Vec<AtomicI32>,
    /// Run together with other jobs: their common start.
    group: Option<&'a GroupStart<'a>>,
    /// The wall-clock start instant, Unix seconds (f64 bits).
    started_unix: AtomicU64,
    /// `--steadystate`'s judge (None: not asked), ticked by the coordinating thread only.
    steady: std::sync::Mutex<Option<steady::Detector>>,
}

impl<'a> Shared<'a> {
    fn new(
        job: &'a Job,
        placement: &'a Placement,
        targets: &'a [OpenTarget],
        group: Option<&'a GroupStart<'a>>,
        stop: &'a AtomicBool,
    ) -> Shared<'a> {
        let threads = job.workload.threads as usize;
        let clock = Clock::calibrate();
        Shared {
            job,
            placement,
            targets,
            clock,
            clock_info: clock.info(),
            ramp_ns: (job.timing.ramp_s * 1e9) as u64,
            run_ns: job.timing.budget.seconds().map(|s| (s * 1e9) as u64),
            series_len: series_len(job),
            ready: Barrier::new(threads + 1),
            go: Barrier::new(threads + 1),
            closing: Barrier::new(threads + 1),
            start_at: AtomicU64::new(0),
            progress: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            finished: AtomicUsize::new(0),
            stop,
            prep_failed: AtomicBool::new(false),
            tids: (0..threads).map(|_| AtomicI32::new(0)).collect(),
            group,
            started_unix: AtomicU64::new(0),
            steady: std::sync::Mutex::new(steady::Detector::new(job.io.options.steady.steadystate, job.workload.mean_bs())),
        }
    }
}

/// What one run of the engine is given: the job, the CPUs its threads run on (`placement`), the
/// target part its interface acquired, the cancel that stops it early, the progress callback and
/// the window's hooks. [`run`] and [`run_in_group`] take it alike.
pub struct Inputs<'a> {
    pub job: &'a Job,
    pub placement: &'a Placement,
    pub acquired: &'a Acquired,
    pub cancel: Cancel<'a>,
    pub progress: ProgressFn<'a>,
    pub hooks: &'a mut dyn WindowHooks,
}

/// Run the job over the targets its interface acquired, its threads on the CPUs `placement`
/// gives. Blocks until all threads finish. `cancel` stops the run early; what was measured
/// until then is returned, marked interrupted.
pub fn run(inputs: Inputs) -> Result<EngineOutput, EngineError> {
    run_with(inputs, None)
}

/// [`run`] as one member of a group of jobs run together: its threads start when every member's
/// are prepared (`group.together`), `group.delay_s` later. Each member calls it once, on its own
/// thread; a member that fails to prepare keeps every member from running.
pub fn run_in_group(inputs: Inputs, group: &GroupStart) -> Result<EngineOutput, EngineError> {
    run_with(inputs, Some(group))
}

fn run_with(inputs: Inputs, group: Option<&GroupStart>) -> Result<EngineOutput, EngineError> {
    let Inputs { job, placement, acquired, cancel, progress, hooks } = inputs;
    let targets = acquired.open_targets();
    // In a group, the stop request other members' exits set.
    let own_stop = AtomicBool::new(false);
    let stop = group.and_then(|g| g.together.stops.get(g.member)).unwrap_or(&own_stop);
    let shared = Shared::new(job, placement, &targets, group, stop);
    let sh = &shared;
    let (workers, coordinated) = std::thread::scope(|s| -> Result<_, EngineError> {
        // The one place the interface chosen at run time becomes the type its loop is compiled
        // for, with its acquired target part.
        let handles = acquired.visit(Spawn { s, sh }).inspect_err(|_| {
            // The other members are not left waiting for this one.
            if let Some(g) = group {
                g.together.failed.store(true, Ordering::Release);
                g.together.members.wait();
            }
        })?;
        let coordinated = coordinator(sh, cancel, progress, hooks);
        let workers: Vec<_> =
            handles.into_iter().map(|h| h.join().map_err(|p| EngineError::Panicked(panic_message(p))).and_then(|r| r)).collect();
        Ok((workers, coordinated))
    })?;
    if let Err(panic) = coordinated {
        std::panic::resume_unwind(panic);
    }
    // A member's end stops what its exit names (at a failed end only, for exitall_on_error).
    if let Some(ended) = group.and_then(|g| g.together.ended.get(g.member)) {
        ended.store(true, Ordering::Release);
    }
    if let Some((g, exit)) = group.and_then(|g| g.exit.as_ref().map(|e| (g, e))) {
        let failed = workers.iter().any(|w| match w {
            Err(_) => true,
            Ok(Some(o)) => (o.end.first_error.is_some() && !job.policy.continue_on_error) || o.verify_error.is_some(),
            Ok(None) => false,
        });
        if !exit.on_failure_only || failed {
            g.together.exit(g.member, exit);
        }
    }
    // The first failure, in thread order.
    let outs = workers.into_iter().filter_map(Result::transpose).collect::<Result<Vec<_>, _>>()?;
    if outs.is_empty() && group.is_some_and(|g| g.together.failed.load(Ordering::Acquire)) {
        return Err(EngineError::Prepare("another job of its group could not prepare, so no job of the group ran".into()));
    }
    Ok(merge(sh, &outs, cancel.is_cancelled()))
}

type WorkerResult = Result<Option<ThreadOut>, EngineError>;

type Handles<'scope> = Vec<std::thread::ScopedJoinHandle<'scope, WorkerResult>>;

/// The workers for an interface's type, over its acquired target part.
struct Spawn<'scope, 'env> {
    s: &'scope std::thread::Scope<'scope, 'env>,
    sh: &'env Shared<'env>,
}

impl<'scope, 'env> VisitTarget<'env> for Spawn<'scope, 'env> {
    type Out = Result<Handles<'scope>, EngineError>;
    fn visit<T: Interface>(self, target: &'env T::Target) -> Self::Out {
        spawn_workers::<T>(self.s, self.sh, target)
    }
}

/// Start one named thread per job thread. Each waits, before the start barrier, until all
/// were started; if one cannot be, the started ones end without waiting for it.
fn spawn_workers<'scope, 'env, T: Interface>(
    s: &'scope std::thread::Scope<'scope, 'env>,
    sh: &'env Shared<'env>,
    target: &'env T::Target,
) -> Result<Handles<'scope>, EngineError> {
    let threads = sh.job.workload.threads as usize;
    let (mut handles, mut gates) = (Vec::with_capacity(threads), Vec::with_capacity(threads));
    for t in 0..threads {
        let (gate, all_started) = std::sync::mpsc::channel::<()>();
        let spawned =
            std::thread::Builder::new().name(format!("iolab-w{t}")).spawn_scoped(s, move || worker::<T>(sh, target, t, all_started));
        handles.push(spawned.map_err(|e| EngineError::Prepare(format!("cannot start thread: {e}")))?);
        gates.push(gate);
    }
    for gate in gates {
        // A worker gone already panicked outside its guarded phases; join reports it.
        let _ = gate.send(());
    }
    Ok(handles)
}

/// One worker thread: prepare, start barrier, loop, linger, read-back. A failure or a panic
/// in any phase still passes every barrier, so no other thread is left waiting. Never inlined
/// into the thread's start (once per thread, not per I/O): profiles and flame graphs name the
/// worker (`iolab::engine::worker`) whatever the build's inlining.
#[inline(never)]
fn worker<T: Interface>(sh: &Shared, target: &T::Target, t: usize, all_started: std::sync::mpsc::Receiver<()>) -> WorkerResult {
    // SAFETY: gettid has no preconditions.
    sh.tids[t].store(unsafe { libc::gettid() }, Ordering::Release);
    let prepared = unwound(|| prepare::<T>(sh, t, target.handle()));
    if all_started.recv().is_err() {
        // Not every worker could be started: the run failed and nobody is at the barriers.
        return Ok(None);
    }
    let ran = match start_barrier(sh, prepared) {
        Ok(Some(p)) => unwound(|| run_loop(sh, t, p, target.handle())).map(Some),
        Ok(None) => Ok(None),
        Err(e) => Err(e),
    };
    if ran.is_err() {
        sh.stop.store(true, Ordering::Relaxed);
    }
    linger(sh);
    Ok(ran?.map(|r| read_back(sh, t, r, |fd| T::sync_reader(target, fd))))
}

/// A worker's state once prepared. Fields drop in order: the interface closes before the
/// buffers it was given are freed.
struct Prepared<T> {
    applied: Option<interfaces::thread::Applied>,
    io: T,
    stream: Streams,
    written: WrittenMap,
    bufs: AlignedBuf,
}

/// Everything fallible, before the start barrier: pin, buffers, workload stream, written map,
/// the interface.
fn prepare<T: Interface>(sh: &Shared, t: usize, handle: &T::Handle) -> Result<Prepared<T>, EngineError> {
    let (job, targets) = (sh.job, sh.targets);
    if let Some(cpu) = sh.placement.worker(t) {
        pin_to_cpu(cpu)?;
    }
    // The memory policy and I/O priority, before the buffers (None: none asked).
    let thread_opts = &job.io.options.thread;
    let mut applied = interfaces::thread::apply(thread_opts, t as u32).map_err(EngineError::Prepare)?;
    let mut bufs =
        AlignedBuf::new(job.workload.bs as usize * job.workload.qd as usize, T::buffer_memory(&job.io)).map_err(EngineError::Prepare)?;
    let mut rng = Rng::for_thread(job.workload.seed, t as u32);
    // Incompressible data, so compressing devices cannot flatter writes.
    rng.fill(bufs.slice());
    if let Some(a) = &mut applied {
        interfaces::thread::place_buffers(thread_opts, a, bufs.ptr, bufs.len()).map_err(EngineError::Prepare)?;
    }
    let ranges: Vec<(u64, u64)> = targets.iter().map(|o| (o.range_start, o.range_len)).collect();
    let stream = workload::stream_for(&job.workload, &ranges, t as u32, rng).map_err(EngineError::Prepare)?;
    let written: WrittenMap = if job.policy.verify && job.workload.rw.writes(job.workload.write_mix) {
        targets.iter().map(|o| vec![0u64; ((o.range_start + o.range_len) / job.workload.bs).div_ceil(64) as usize]).collect()
    } else {
        targets.iter().map(|_| Vec::new()).collect()
    };
    let io = open_for(job, sh.placement.sq(t), targets, &bufs, handle)?;
    Ok(Prepared { applied, io, stream, written, bufs })
}

/// What an interface is opened with for `job`: its descriptors, this thread's buffers and its
/// SQPOLL thread's CPU (the run's threads and the file-set loop alike).
pub(crate) fn setup_of<'a>(job: &'a Job, fds: &'a [RawFd], bufs: &AlignedBuf, sq_cpu: Option<u32>) -> Setup<'a> {
    Setup {
        fds,
        buffers: bufs.ptr,
        buffers_len: bufs.len(),
        bs: job.workload.bs as u32,
        qd: job.workload.qd,
        submit: job.io.submit,
        complete: job.io.complete,
        batch_submit: job.workload.batch_submit,
        io: &job.io,
        sq_cpu,
    }
}

/// The job's interface over the targets, with this thread's buffers and SQPOLL thread's CPU.
fn open_for<T: Interface>(
    job: &Job,
    sq_cpu: Option<u32>,
    targets: &[OpenTarget],
    bufs: &AlignedBuf,
    handle: &T::Handle,
) -> Result<T, EngineError> {
    let fds: Vec<RawFd> = targets.iter().map(|o| o.fd).collect();
    T::open(&setup_of(job, &fds, bufs, sq_cpu), handle)
        .map_err(|e| EngineError::Prepare(format!("{}: setup failed: {e}", job.io.interface)))
}

/// The start barrier: wait until every thread is prepared, then for the start instant. If any
/// thread failed to prepare, nobody runs: Ok(None), or this thread's own error.
fn start_barrier<T>(sh: &Shared, prepared: Result<Prepared<T>, EngineError>) -> Result<Option<Prepared<T>>, EngineError> {
    if prepared.is_err() {
        sh.prep_failed.store(true, Ordering::Release);
    }
    sh.ready.wait();
    sh.go.wait();
    if sh.prep_failed.load(Ordering::Acquire) {
        return prepared.map(|_| None);
    }
    prepared.map(Some)
}

/// What a worker's loop leaves for the read-back.
struct Ran {
    applied: Option<interfaces::thread::Applied>,
    rec: Recorder,
    end: hotloop::LoopEnd,
    written: WrittenMap,
    bufs: AlignedBuf,
}

/// The loop: this thread's share of the budget through the hot loop, from the start instant.
fn run_loop<T: Interface>(sh: &Shared, t: usize, p: Prepared<T>, handle: &T::Handle) -> Result<Ran, EngineError> {
    let Prepared { mut applied, mut io, stream, written, bufs } = p;
    // The loop compiled for the thread's kind of stream, chosen once.
    let (rec, end, written) = match stream {
        Streams::Plain(s) => loop_over(sh, t, &mut io, s, written, &bufs, handle)?,
        Streams::Mixed(s) => loop_over(sh, t, &mut io, s, written, &bufs, handle)?,
    };
    // The commands that carried a per-command priority, as the interface counted them.
    if let (Some(a), Some((sent, with))) = (&mut applied, io.cmdprio_counts()) {
        a.commands = Some(sent);
        a.commands_with_prio = Some(with);
    }
    Ok(Ran { applied, rec, end, written, bufs })
}

/// The hot loop over one kind of stream: the recorder, how it ended, the blocks written.
fn loop_over<T: Interface, S: Source>(
    sh: &Shared,
    t: usize,
    io: &mut T,
    stream: S,
    written: WrittenMap,
    bufs: &AlignedBuf,
    handle: &T::Handle,
) -> Result<(Recorder, hotloop::LoopEnd, WrittenMap), EngineError> {
    let start = sh.start_at.load(Ordering::Acquire);
    // The thread's own copy, as each read of it is on the hot path.
    let clock = sh.clock;
    // With a block size mix the recorder counts each I/O's bytes (bs 0), else ios × bs.
    let rec_bs = if S::FIXED_LEN { sh.job.workload.bs } else { 0 };
    let mut cx = hotloop::LoopCtx {
        // fio's verify header names the writing thread.
        plan: LoopPlan {
            verify_form: verify::Form::of(sh.job.policy.verify_fio, t as u16 + 1),
            ..LoopPlan::for_job(sh.job, start, sh.ramp_ns, sh.run_ns, quota_for(sh.job, t))
        },
        clock: &clock,
        stream,
        bufs: bufs.ptr,
        rec: Recorder::new(sh.series_len, sh.targets.len(), rec_bs),
        stop: sh.stop,
        progress: &sh.progress[t],
        written,
        start,
    };
    // Paced (a rate or think time) or not, chosen once: the unpaced loop pays nothing for it.
    let flow = sh.group.and_then(|g| g.flow.as_ref());
    let end = match pace::Pacer::for_job(sh.job, t, start, start + sh.ramp_ns, flow) {
        // fio's io_submit_mode=offload: paced here, submitted by `qd` threads of their own.
        Some(mut p) if offloaded(sh.job) => offload::run::<T, S>(&mut cx, &mut p, &|k, buf| open_submitter::<T>(sh, t, k, buf, handle)),
        Some(mut p) => hotloop::run_with_pace(io, &mut cx, &mut p),
        None => hotloop::run(io, &mut cx),
    }
    .map_err(EngineError::Io)?;
    Ok((cx.rec, end, cx.written))
}

/// The job asks for fio's `io_submit_mode=offload`.
fn offloaded(job: &Job) -> bool {
    job.workload.pattern.pace.as_ref().is_some_and(|p| p.submit_mode == crate::plan::pace::SubmitMode::Offload)
}

/// Submission thread `k`'s own interface under offload, at depth 1 over slot `k`'s buffer
/// (`buf`, one block) of worker `t`, as fio's submit workers run with iodepth=1.
fn open_submitter<T: Interface>(sh: &Shared, t: usize, k: usize, buf: *mut u8, handle: &T::Handle) -> Result<T, String> {
    let job = sh.job;
    let fds: Vec<RawFd> = sh.targets.iter().map(|o| o.fd).collect();
    let setup = Setup {
        fds: &fds,
        buffers: buf,
        buffers_len: job.workload.bs as usize,
        bs: job.workload.bs as u32,
        qd: 1,
        submit: job.io.submit,
        complete: job.io.complete,
        batch_submit: 1,
        io: &job.io,
        sq_cpu: sh.placement.sq(t),
    };
    T::open(&setup, handle).map_err(|e| format!("{} (slot {k}): setup failed: {e}", job.io.interface))
}

/// Linger: stay alive until the window's end has been measured, so the meters see this thread.
fn linger(sh: &Shared) {
    sh.finished.fetch_add(1, Ordering::Release);
    sh.closing.wait();
}

/// Read-back, after the window closed (it is not the run's I/O): with --verify, check every
/// block this thread wrote.
fn read_back(sh: &Shared, t: usize, ran: Ran, reader: impl FnMut(RawFd) -> Result<SyncReader, String>) -> ThreadOut {
    // fio's do_verify=0: the written blocks carry their verify data and are not read back.
    if sh.job.policy.verify_fio.is_some_and(|f| !f.read_back) {
        return ThreadOut {
            applied: ran.applied,
            rec: ran.rec,
            end: ran.end,
            verified_written: 0,
            verify_error: None,
            read_back_mismatch: false,
        };
    }
    let fds: Vec<RawFd> = sh.targets.iter().map(|o| o.fd).collect();
    let form = verify::Form::of(sh.job.policy.verify_fio, t as u16 + 1);
    let (verified_written, verify_error, read_back_mismatch) =
        read_back_blocks(&fds, &ran.written, &ran.bufs, sh.job.workload.bs, &form, reader);
    ThreadOut { applied: ran.applied, rec: ran.rec, end: ran.end, verified_written, verify_error, read_back_mismatch }
}

/// Run `f`, turning a panic into an error, so a panicking worker fails the run like any
/// other failure instead of leaving the others at a barrier. (Release builds abort on panic.)
fn unwound<T>(f: impl FnOnce() -> Result<T, EngineError>) -> Result<T, EngineError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| Err(EngineError::Panicked(panic_message(p))))
}

fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    match panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str)) {
        Some(m) => format!("a worker thread panicked: {m}"),
        None => "a worker thread panicked".to_string(),
    }
}

/// The coordinating thread: its side of the start barrier (with no ramp, the window's start is
/// sampled before the first I/O), then [`coordinate`], then the closing barrier. A panicking
/// hook or progress call stops the workers and lets them through the barriers before it is
/// returned, to be resumed once they are joined.
fn coordinator(sh: &Shared, cancel: Cancel, progress: ProgressFn, hooks: &mut dyn WindowHooks) -> std::thread::Result<()> {
    sh.ready.wait();
    if let Some(g) = sh.group {
        group_start(sh, g, cancel);
    }
    let tids: Vec<i32> = sh.tids.iter().map(|t| t.load(Ordering::Acquire)).collect();
    let started = sh.ramp_ns == 0 && !sh.prep_failed.load(Ordering::Acquire);
    // No ramp: measure the starting state before the first I/O is issued.
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| started.then(|| hooks.window_start(&tids))));
    if opened.is_err() {
        sh.prep_failed.store(true, Ordering::Release);
    }
    let start = sh.clock.now();
    sh.start_at.store(start, Ordering::Release);
    let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    sh.started_unix.store(unix.to_bits(), Ordering::Relaxed);
    sh.go.wait();
    let coordinated = opened.and_then(|_| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| coordinate(sh, cancel, start, started, &tids, progress, hooks)))
    });
    if coordinated.is_err() {
        sh.stop.store(true, Ordering::Relaxed);
        while sh.finished.load(Ordering::Acquire) < sh.progress.len() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    sh.closing.wait();
    coordinated
}

/// A group member's side of the group's start: every member's threads prepared (or none runs),
/// then this member's own delay, cut short by a cancel.
fn group_start(sh: &Shared, g: &GroupStart, cancel: Cancel) {
    if sh.prep_failed.load(Ordering::Acquire) {
        g.together.failed.store(true, Ordering::Release);
    }
    g.together.members.wait();
    if g.together.failed.load(Ordering::Acquire) {
        sh.prep_failed.store(true, Ordering::Release);
        return;
    }
    let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(g.delay_s.max(0.0));
    // A member stopped by another's exit before its delay is over starts at once, and stops
    // (fio's terminated job that never got to run).
    while !cancel.is_cancelled() && !sh.stop.load(Ordering::Relaxed) {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(std::time::Duration::from_millis(20)));
    }
    if let Some(s) = g.together.started.get(g.member) {
        s.store(true, Ordering::Release);
    }
}

/// Coordinate, until every worker's loop is over: sample at the ramp's end and the run's end
/// (and tick every ~20 ms between), pass a cancel on to the workers, report progress once a
/// second.
fn coordinate(sh: &Shared, cancel: Cancel, start: u64, mut started: bool, tids: &[i32], progress: ProgressFn, hooks: &mut dyn WindowHooks) {
    let ramp_end = start + sh.ramp_ns;
    let end = sh.run_ns.map(|r| ramp_end + r);
    let total_s = sh.run_ns.map(|r| (sh.ramp_ns + r) as f64 / 1e9);
    let mut next_report = start + 1_000_000_000;
    let mut ended = false;
    while sh.finished.load(Ordering::Acquire) < sh.progress.len() {
        // Wake at the window's edges, not up to a tick after them: the meters' window must be
        // the one the workers count I/Os in.
        let edge = if !started {
            Some(ramp_end)
        } else if !ended {
            end
        } else {
            None
        };
        let tick = 20_000_000u64;
        let nap = edge.map_or(tick, |e| e.saturating_sub(sh.clock.now()).clamp(1, tick));
        std::thread::sleep(std::time::Duration::from_nanos(nap));
        if cancel.is_cancelled() {
            sh.stop.store(true, Ordering::Relaxed);
        }
        let now = sh.clock.now();
        if !started && now >= ramp_end {
            hooks.window_start(tids);
            started = true;
        }
        if started && !ended && end.is_some_and(|e| now >= e) {
            hooks.window_end();
            ended = true;
        }
        if started && !ended {
            hooks.window_tick();
            // Steady state, judged at the window's second boundaries on every thread's count.
            if let Some(d) = sh.steady.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                let done: u64 = sh.progress.iter().map(|c| c.load(Ordering::Relaxed)).sum();
                if d.tick(now.saturating_sub(ramp_end), done) {
                    sh.stop.store(true, Ordering::Relaxed);
                }
            }
        }
        if now >= next_report {
            next_report += 1_000_000_000;
            let done: u64 = sh.progress.iter().map(|c| c.load(Ordering::Relaxed)).sum();
            progress((now - start) as f64 / 1e9, total_s, done, now < ramp_end);
        }
    }
    if started && !ended {
        hooks.window_end();
    }
}

/// The run's measurements from every thread's: one recorder, the window from the earliest
/// start to the latest end, the first error.
fn merge(sh: &Shared, outs: &[ThreadOut], interrupted: bool) -> EngineOutput {
    let mut rec = Recorder::new(1, sh.targets.len(), sh.job.workload.bs);
    let (mut mstart, mut mend) = (u64::MAX, 0u64);
    let (mut first_error, mut verified_reads, mut verified_written, mut verify_mismatches) = (None, 0, 0, 0);
    let ended_by_time = outs.iter().any(|o| o.end.ended_by_time);
    for o in outs {
        rec.merge(&o.rec);
        mstart = mstart.min(o.end.measure_start);
        mend = mend.max(o.end.measure_end);
        verified_reads += o.end.verified_reads;
        verified_written += o.verified_written;
        verify_mismatches += o.end.verify_mismatches + u64::from(o.read_back_mismatch);
        if first_error.is_none() {
            first_error = o.end.first_error.clone().or_else(|| o.verify_error.clone());
        }
    }
    // Drop trailing empty seconds (a count-based run's unused slots).
    let used = rec.series.iter().rposition(|s| s.read_ios + s.write_ios > 0).map_or(0, |i| i + 1);
    rec.series.truncate(used);
    EngineOutput {
        rec,
        window_s: mend.saturating_sub(mstart) as f64 / 1e9,
        interrupted,
        first_error,
        clock: sh.clock_info.clone(),
        verified_reads,
        verified_written,
        verify_mismatches,
        ended_by_time,
        started_unix_s: f64::from_bits(sh.started_unix.load(Ordering::Relaxed)),
        threads_applied: outs.iter().filter_map(|o| o.applied.clone()).collect(),
        steadystate: sh.steady.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|d| d.result.clone()),
    }
}

/// After a write job with --verify: read every block this thread wrote and check it, with the
/// interface's own synchronous read (pread, or NVMe Reads for nvme-passthru's character device).
fn read_back_blocks(
    fds: &[RawFd],
    written: &WrittenMap,
    bufs: &AlignedBuf,
    bs: u64,
    form: &verify::Form,
    mut reader: impl FnMut(RawFd) -> Result<SyncReader, String>,
) -> (u64, Option<FailedIo>, bool) {
    let mut checked = 0;
    for (file, map) in written.iter().enumerate() {
        if map.iter().all(|w| *w == 0) {
            continue;
        }
        let mut read = match reader(fds[file]) {
            Ok(r) => r,
            Err(what) => return (checked, Some(FailedIo { file: file as u32, offset: 0, write: false, errno: None, what }), false),
        };
        // SAFETY: slot 0's buffer is bs bytes, suitably aligned, and no I/O uses it any more.
        let buf = unsafe { std::slice::from_raw_parts_mut(bufs.ptr, bs as usize) };
        for (w, word) in map.iter().enumerate() {
            let mut bits = *word;
            while bits != 0 {
                let block = (w * 64 + bits.trailing_zeros() as usize) as u64;
                bits &= bits - 1;
                let offset = block * bs;
                let n = read(fds[file], buf, offset);
                let (what, mismatch) = if n < 0 {
                    (Some(format!("verify read-back failed: {}", interfaces::error_text(n))), false)
                } else if n != bs as i64 {
                    (Some(format!("verify read-back returned {n} of {bs} bytes")), false)
                } else {
                    let bad = form.check(buf, offset).err().map(|e| format!("verify failed on read-back: {e}"));
                    let mismatch = bad.is_some();
                    (bad, mismatch)
                };
                if let Some(what) = what {
                    return (checked, Some(FailedIo { file: file as u32, offset, write: false, errno: None, what }), mismatch);
                }
                checked += 1;
            }
        }
    }
    (checked, None, false)
}

#[cfg(all(test, target_endian = "little"))]
mod nvme_tests;
#[cfg(test)]
mod tests;
