//! The engine: runs one job's threads over already-open targets and hands back what it
//! measured. It knows nothing of storage formats or reports.
pub mod clock;
pub mod hotloop;
pub mod recorder;
pub mod workload;

use crate::interfaces::{self, InterfaceKind, IoInterface, Setup};
use crate::plan::{Budget, Job};
use crate::verify;
use clock::{Clock, ClockInfo};
use hotloop::{FailedIo, LoopPlan, WrittenMap};
use recorder::Recorder;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use workload::{region_for, Rng, Stream};

/// Set by Ctrl-C; every thread checks it once per loop iteration.
pub static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Make Ctrl-C stop the run cleanly instead of killing it (results so far are kept).
pub fn install_interrupt_handler() {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
}

/// An open target as the engine sees it: a descriptor and the byte range to use.
#[derive(Clone, Copy, Debug)]
pub struct OpenTarget {
    pub fd: RawFd,
    pub range_start: u64,
    pub range_len: u64,
}

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
}

struct ThreadOut {
    rec: Recorder,
    end: hotloop::LoopEnd,
    verified_written: u64,
    verify_error: Option<FailedIo>,
}

/// Aligned, zeroed memory for a thread's slot buffers, owned for the run.
struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}
impl AlignedBuf {
    /// Err when the memory is not there (the up-front check cannot see other processes' use):
    /// a failed run, not an abort with settings changed.
    fn new(len: usize) -> Result<AlignedBuf, String> {
        let layout = std::alloc::Layout::from_size_align(len.max(4096), 4096).map_err(|e| format!("I/O buffers of {len} bytes: {e}"))?;
        // SAFETY: layout is non-zero sized. black_box: an optimiser may otherwise treat an
        // allocation it can see is unused as if it succeeded (seen in a release test).
        let ptr = std::hint::black_box(unsafe { std::alloc::alloc_zeroed(layout) });
        if ptr.is_null() {
            return Err(format!("out of memory allocating {len} bytes of I/O buffers: lower --qd, --bs or --threads"));
        }
        Ok(AlignedBuf { ptr, layout })
    }
    fn slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr owns layout.size() bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}
impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}
unsafe impl Send for AlignedBuf {}

fn pin_to_cpu(cpu: usize) -> Result<(), String> {
    // SAFETY: set is a plain bitmask initialised by CPU_ZERO/CPU_SET.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!("cannot pin to CPU {cpu}: {}", std::io::Error::last_os_error()));
        }
    }
    Ok(())
}

/// Per-second slots each thread allocates before its first I/O.
fn series_len(job: &Job) -> usize {
    match job.budget {
        Budget::Seconds(s) => s.ceil() as usize + 2,
        _ => 86_400, // a day of seconds; count-based runs have no known length
    }
}

/// Memory a run allocates up front: per thread, its slot buffers, recorder and stack (as Rust
/// gives a spawned thread). Checked before anything is touched, so a run too big for the
/// machine is refused in one line instead of aborting with settings changed.
pub fn memory_needed(job: &Job) -> u64 {
    const THREAD_STACK: u64 = 2 << 20;
    let buffers = (job.bs * job.qd as u64).max(4096);
    let recorder = Recorder::bytes_for(series_len(job));
    job.threads as u64 * (buffers + recorder + THREAD_STACK)
}

/// Run the job over the targets. Blocks until all threads finish.
pub fn run(job: &Job, targets: &[OpenTarget], progress: ProgressFn, hooks: &mut dyn WindowHooks) -> Result<EngineOutput, String> {
    let clock = Clock::calibrate();
    let clock_info = clock.info();
    let threads = job.threads as usize;
    let quota_for = |t: usize| -> Option<u64> {
        let total = match job.budget {
            Budget::Seconds(_) => return None,
            Budget::Ios(n) => n,
            Budget::Bytes(b) => b.div_ceil(job.bs),
        };
        Some(total / threads as u64 + u64::from((t as u64) < total % threads as u64))
    };
    let series_len = series_len(job);
    let ready = Arc::new(Barrier::new(threads + 1));
    let go = Arc::new(Barrier::new(threads + 1));
    let closing = Arc::new(Barrier::new(threads + 1));
    let start_at = Arc::new(AtomicU64::new(0));
    let progress_ctrs: Arc<Vec<AtomicU64>> = Arc::new((0..threads).map(|_| AtomicU64::new(0)).collect());
    let finished = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let prep_failed = Arc::new(AtomicBool::new(false));
    let tids: Arc<Vec<std::sync::atomic::AtomicI32>> = Arc::new((0..threads).map(|_| std::sync::atomic::AtomicI32::new(0)).collect());
    let ramp_ns = (job.ramp_s * 1e9) as u64;
    let run_ns = match job.budget {
        Budget::Seconds(s) => Some((s * 1e9) as u64),
        _ => None,
    };

    let mut handles = Vec::with_capacity(threads);
    for t in 0..threads {
        let job = job.clone();
        let targets = targets.to_vec();
        let (ready, go, start_at, ctrs, finished) = (ready.clone(), go.clone(), start_at.clone(), progress_ctrs.clone(), finished.clone());
        let (stop, prep_failed, tids, closing) = (stop.clone(), prep_failed.clone(), tids.clone(), closing.clone());
        let quota = quota_for(t);
        handles.push(
            std::thread::Builder::new()
                .name(format!("iolab-w{t}"))
                .spawn(move || {
                    let result = (|| -> Result<Option<(ThreadOut, WrittenMap, AlignedBuf)>, String> {
                        // SAFETY: gettid has no preconditions.
                        tids[t].store(unsafe { libc::gettid() }, Ordering::Release);
                        // Everything fallible happens before the barrier, so a failure cannot leave others waiting.
                        let prep = (|| -> Result<_, String> {
                            if !job.cpus.is_empty() {
                                pin_to_cpu(job.cpus[t % job.cpus.len()])?;
                            }
                            let bs = job.bs as usize;
                            let mut bufs = AlignedBuf::new(bs * job.qd as usize)?;
                            let mut rng = Rng::for_thread(job.seed, t as u32);
                            // Incompressible data, so compressing devices cannot flatter writes.
                            rng.fill(bufs.slice());
                            let regions = targets
                                .iter()
                                .map(|o| region_for(o.range_start, o.range_len, job.bs, job.rw.is_random(), t as u32, job.threads))
                                .collect::<Vec<_>>();
                            if regions.iter().any(|r| r.blocks == 0) {
                                return Err(format!(
                                    "each thread needs at least one {}-byte block: use a larger --size or fewer --threads",
                                    job.bs
                                ));
                            }
                            let written: WrittenMap = if job.verify && job.rw.writes(job.write_mix) {
                                targets.iter().map(|o| vec![0u64; ((o.range_start + o.range_len) / job.bs).div_ceil(64) as usize]).collect()
                            } else {
                                targets.iter().map(|_| Vec::new()).collect()
                            };
                            let stream = Stream::new(rng, regions, job.bs, job.rw.is_random(), job.rw.write_percent(job.write_mix));
                            Ok((bufs, stream, written))
                        })();
                        let fds: Vec<RawFd> = targets.iter().map(|o| o.fd).collect();
                        let mut opened = None;
                        let prep = prep.and_then(|(bufs, stream, written)| {
                            let setup = Setup {
                                fds: &fds,
                                buffers: bufs.ptr,
                                buffers_len: bufs.layout.size(),
                                bs: job.bs as u32,
                                qd: job.qd,
                                submit: job.submit,
                                complete: job.complete,
                                batch_submit: job.batch_submit,
                                ring: job.ring,
                                null_script: job.null_script.as_deref(),
                            };
                            opened = Some(open_interface(job.interface, &setup)?);
                            Ok((bufs, stream, written))
                        });
                        if prep.is_err() {
                            prep_failed.store(true, Ordering::Release);
                        }
                        ready.wait();
                        go.wait();
                        if prep_failed.load(Ordering::Acquire) {
                            // Some thread could not start: nobody runs.
                            return prep.map(|_| None);
                        }
                        let (bufs, stream, written) = prep?;
                        let start = start_at.load(Ordering::Acquire);
                        let plan = LoopPlan::for_job(&job, start, ramp_ns, run_ns, quota);
                        let mut cx = hotloop::LoopCtx {
                            plan,
                            clock: &clock,
                            stream,
                            bufs: bufs.ptr,
                            rec: Recorder::new(series_len, targets.len(), job.bs),
                            stop: &stop,
                            progress: &ctrs[t],
                            written,
                            start,
                        };
                        let res = match opened.take().expect("opened") {
                            Opened::Psync(mut io) => hotloop::run(&mut io, &mut cx),
                            Opened::Pvsync2(mut io) => hotloop::run(&mut io, &mut cx),
                            Opened::PosixAio(mut io) => hotloop::run(&mut io, &mut cx),
                            Opened::Libaio(mut io) => hotloop::run(&mut io, &mut cx),
                            Opened::Uring(mut io) => hotloop::run(&mut io, &mut cx),
                            Opened::Passthru(mut io) => hotloop::run(&mut io, &mut cx),
                            Opened::Null(mut io) => hotloop::run(&mut io, &mut cx),
                        };
                        if res.is_err() {
                            stop.store(true, Ordering::Relaxed);
                        }
                        let end = res?;
                        Ok(Some((ThreadOut { rec: cx.rec, end, verified_written: 0, verify_error: None }, cx.written, bufs)))
                    })();
                    finished.fetch_add(1, Ordering::Release);
                    // Stay alive until the window's end has been measured, so the meters see this thread.
                    closing.wait();
                    // Verify read-back happens after the window closed: it is not the run's I/O.
                    result.map(|r| {
                        r.map(|(mut out, written, bufs)| {
                            let fds: Vec<RawFd> = targets.iter().map(|o| o.fd).collect();
                            (out.verified_written, out.verify_error) = read_back(&fds, &written, &bufs, job.bs, job.interface);
                            out
                        })
                    })
                })
                .map_err(|e| format!("cannot start thread: {e}"))?,
        );
    }

    ready.wait();
    let worker_tids: Vec<i32> = tids.iter().map(|t| t.load(Ordering::Acquire)).collect();
    let (mut started, mut ended) = (false, false);
    if ramp_ns == 0 && !prep_failed.load(Ordering::Acquire) {
        // No ramp: measure the starting state before the first I/O is issued.
        hooks.window_start(&worker_tids);
        started = true;
    }
    let start = clock.now();
    start_at.store(start, Ordering::Release);
    go.wait();

    // Coordinate: sample CPU at the ramp's end and the run's end, report progress once a second.
    let ramp_end = start + ramp_ns;
    let end = run_ns.map(|r| ramp_end + r);
    let total_s = run_ns.map(|r| (ramp_ns + r) as f64 / 1e9);
    let mut next_report = start + 1_000_000_000;
    while finished.load(Ordering::Acquire) < threads {
        std::thread::sleep(std::time::Duration::from_millis(20));
        if STOP.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
        }
        let now = clock.now();
        if !started && now >= ramp_end {
            hooks.window_start(&worker_tids);
            started = true;
        }
        if started && !ended && end.is_some_and(|e| now >= e) {
            hooks.window_end();
            ended = true;
        }
        if started && !ended {
            hooks.window_tick();
        }
        if now >= next_report {
            next_report += 1_000_000_000;
            let done: u64 = progress_ctrs.iter().map(|c| c.load(Ordering::Relaxed)).sum();
            progress((now - start) as f64 / 1e9, total_s, done, now < ramp_end);
        }
    }
    if started && !ended {
        hooks.window_end();
    }
    closing.wait();

    let mut outs = Vec::with_capacity(threads);
    let mut failure = None;
    for h in handles {
        match h.join().map_err(|_| "a worker thread panicked".to_string()).and_then(|r| r) {
            Ok(Some(o)) => outs.push(o),
            Ok(None) => {}
            Err(e) => failure = failure.or(Some(e)),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let mut rec = Recorder::new(1, targets.len(), job.bs);
    let (mut mstart, mut mend) = (u64::MAX, 0u64);
    let interrupted = STOP.load(Ordering::Relaxed);
    let (mut first_error, mut verified_reads, mut verified_written) = (None, 0, 0);
    for o in &outs {
        rec.merge(&o.rec);
        mstart = mstart.min(o.end.measure_start);
        mend = mend.max(o.end.measure_end);
        verified_reads += o.end.verified_reads;
        verified_written += o.verified_written;
        if first_error.is_none() {
            first_error = o.end.first_error.clone().or_else(|| o.verify_error.clone());
        }
    }
    // Drop trailing empty seconds (a count-based run's unused slots).
    let used = rec.series.iter().rposition(|s| s.read_ios + s.write_ios > 0).map_or(0, |i| i + 1);
    rec.series.truncate(used);
    Ok(EngineOutput {
        rec,
        window_s: mend.saturating_sub(mstart) as f64 / 1e9,
        interrupted,
        first_error,
        clock: clock_info,
        verified_reads,
        verified_written,
    })
}

enum Opened {
    Psync(interfaces::psync::Psync),
    Pvsync2(interfaces::pvsync2::Pvsync2),
    PosixAio(interfaces::posixaio::PosixAio),
    Libaio(interfaces::libaio::Libaio),
    Uring(interfaces::io_uring::Uring),
    Passthru(interfaces::nvme_passthru::Passthru),
    Null(interfaces::null::Null),
}

fn open_interface(kind: InterfaceKind, setup: &Setup) -> Result<Opened, String> {
    let fail = |e: std::io::Error| format!("{kind}: setup failed: {e}");
    Ok(match kind {
        InterfaceKind::Psync => Opened::Psync(IoInterface::open(setup).map_err(fail)?),
        InterfaceKind::Pvsync2 => Opened::Pvsync2(IoInterface::open(setup).map_err(fail)?),
        InterfaceKind::PosixAio => Opened::PosixAio(IoInterface::open(setup).map_err(fail)?),
        InterfaceKind::Libaio => Opened::Libaio(IoInterface::open(setup).map_err(fail)?),
        InterfaceKind::IoUring => Opened::Uring(IoInterface::open(setup).map_err(fail)?),
        InterfaceKind::NvmePassthru => Opened::Passthru(IoInterface::open(setup).map_err(fail)?),
        InterfaceKind::Null => Opened::Null(IoInterface::open(setup).map_err(fail)?),
    })
}

/// After a write job with --verify: read every block this thread wrote and check it, with the
/// interface's own synchronous read (pread, or NVMe Reads for nvme-passthru's character device).
fn read_back(fds: &[RawFd], written: &WrittenMap, bufs: &AlignedBuf, bs: u64, kind: InterfaceKind) -> (u64, Option<FailedIo>) {
    let mut checked = 0;
    for (file, map) in written.iter().enumerate() {
        if map.iter().all(|w| *w == 0) {
            continue;
        }
        let mut read = match (kind.policy().sync_reader)(fds[file]) {
            Ok(r) => r,
            Err(what) => return (checked, Some(FailedIo { file: file as u32, offset: 0, write: false, errno: None, what })),
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
                let what = if n < 0 {
                    Some(format!("verify read-back failed: {}", interfaces::error_text(n)))
                } else if n != bs as i64 {
                    Some(format!("verify read-back returned {n} of {bs} bytes"))
                } else {
                    verify::check(buf, offset).err().map(|e| format!("verify failed on read-back: {e}"))
                };
                if let Some(what) = what {
                    return (checked, Some(FailedIo { file: file as u32, offset, write: false, errno: None, what }));
                }
                checked += 1;
            }
        }
    }
    (checked, None)
}

#[cfg(test)]
mod tests;
