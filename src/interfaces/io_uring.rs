//! io_uring: shared submission/completion rings.
//! submit: `syscall` (io_uring_enter per batch) or `sqpoll` (a kernel thread polls the SQ).
//! complete: `irq`, `poll` (IORING_SETUP_IOPOLL) or `hybrid` (IORING_SETUP_HYBRID_IOPOLL, 6.13+).
//! The ring is created with a raw io_uring_setup so that flags the crate has no builder for
//! (HYBRID_IOPOLL) can be set, then handed to the `io-uring` crate.
use super::{raw_syscall, Completion, IoInterface, Request, Setup};
use crate::plan::{Complete, Submit};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::AsRawFd;

pub const SETUP_IOPOLL: u32 = 1 << 0;
pub const SETUP_SQPOLL: u32 = 1 << 1;
pub const SETUP_SQ_AFF: u32 = 1 << 2;
pub const SETUP_CLAMP: u32 = 1 << 4;
pub const SETUP_COOP_TASKRUN: u32 = 1 << 8;
pub const SETUP_SINGLE_ISSUER: u32 = 1 << 12;
pub const SETUP_DEFER_TASKRUN: u32 = 1 << 13;
pub const SETUP_HYBRID_IOPOLL: u32 = 1 << 17;
const ENTER_GETEVENTS: u32 = 1 << 0;

/// The kernel's `struct io_uring_params` (120 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawParams {
    sq_entries: u32,
    cq_entries: u32,
    flags: u32,
    sq_thread_cpu: u32,
    sq_thread_idle: u32,
    features: u32,
    wq_fd: u32,
    resv: [u32; 3],
    sq_off: [u32; 10],
    cq_off: [u32; 10],
}
const _: () = assert!(std::mem::size_of::<RawParams>() == 120);
const _: () = assert!(std::mem::size_of::<io_uring::Parameters>() == 120);

/// Create a ring with exactly these setup flags; returns the ring or the kernel's error.
pub fn create_ring(entries: u32, flags: u32, sq_cpu: Option<u32>, sq_idle_ms: u32) -> io::Result<IoUring> {
    match create_ring_exact(entries, flags, sq_cpu, sq_idle_ms) {
        // Kernels before 6.1 lack DEFER_TASKRUN: cooperative task running is the next best.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) && flags & SETUP_DEFER_TASKRUN != 0 => {
            create_ring_exact(entries, (flags & !SETUP_DEFER_TASKRUN) | SETUP_COOP_TASKRUN, sq_cpu, sq_idle_ms)
        }
        r => r,
    }
}

fn create_ring_exact(entries: u32, flags: u32, sq_cpu: Option<u32>, sq_idle_ms: u32) -> io::Result<IoUring> {
    let mut p = RawParams { flags, sq_thread_idle: sq_idle_ms, ..Default::default() };
    if let Some(cpu) = sq_cpu {
        p.flags |= SETUP_SQ_AFF;
        p.sq_thread_cpu = cpu;
    }
    p.flags |= SETUP_CLAMP;
    // SAFETY: p is a valid io_uring_params the kernel fills in.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, entries, &mut p as *mut RawParams) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: Parameters is repr(transparent) over the same kernel struct (sizes asserted);
    // fd is a fresh ring whose parameters the kernel just wrote.
    unsafe {
        let params: io_uring::Parameters = std::mem::transmute(p);
        IoUring::from_fd(fd as i32, params)
    }
}

/// A ring of 128-byte SQEs and 32-byte CQEs (IORING_SETUP_SQE128 | IORING_SETUP_CQE32, Linux
/// 5.19+), as NVMe passthrough needs: the 80-byte command rides in the SQE and the NVMe result
/// dwords in the CQE. Built with the crate's builder (its `from_fd` only makes default-sized
/// rings) from the same setup flags as [`create_ring`]; flags it has no builder for
/// (HYBRID_IOPOLL) are refused with EINVAL, as an old kernel would.
pub fn create_ring_big(entries: u32, flags: u32, sq_cpu: Option<u32>, sq_idle_ms: u32) -> io::Result<IoUring<squeue::Entry128, cqueue::Entry32>> {
    let known = SETUP_IOPOLL | SETUP_SQPOLL | SETUP_SQ_AFF | SETUP_CLAMP | SETUP_COOP_TASKRUN | SETUP_SINGLE_ISSUER | SETUP_DEFER_TASKRUN;
    if flags & !known != 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    let mut b = IoUring::<squeue::Entry128, cqueue::Entry32>::builder();
    b.setup_clamp();
    if flags & SETUP_IOPOLL != 0 {
        b.setup_iopoll();
    }
    if flags & SETUP_SQPOLL != 0 {
        b.setup_sqpoll(sq_idle_ms);
        if let Some(cpu) = sq_cpu {
            b.setup_sqpoll_cpu(cpu);
        }
    }
    if flags & SETUP_COOP_TASKRUN != 0 {
        b.setup_coop_taskrun();
    }
    if flags & SETUP_SINGLE_ISSUER != 0 {
        b.setup_single_issuer();
    }
    // The shared driver enters with GETEVENTS every time, which deferred task running needs.
    if flags & SETUP_DEFER_TASKRUN != 0 {
        b.setup_defer_taskrun();
    }
    match b.build(entries) {
        // Kernels before 6.1 lack DEFER_TASKRUN: cooperative task running, as for io_uring.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) && flags & SETUP_DEFER_TASKRUN != 0 => {
            create_ring_big(entries, (flags & !SETUP_DEFER_TASKRUN) | SETUP_COOP_TASKRUN, sq_cpu, sq_idle_ms)
        }
        r => r,
    }
}

pub fn machine_support() -> Result<(), String> {
    if let Ok(v) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        if v.trim() == "2" {
            return Err("io_uring is disabled (kernel.io_uring_disabled = 2): set it to 0".into());
        }
    }
    create_ring(2, 0, None, 0).map(|_| ()).map_err(|e| format!("io_uring_setup failed: {e}"))
}

/// Setup flags a job asks for, plus the cheap ones that change nothing but cost.
pub fn flags_for(submit: Submit, complete: Complete) -> u32 {
    let mut f = 0;
    match submit {
        Submit::Sqpoll => f |= SETUP_SQPOLL,
        // One submitting thread per ring, and completion work deferred to when it enters
        // the kernel to reap (it always does, with GETEVENTS): no task-work interruptions.
        Submit::Syscall => f |= SETUP_SINGLE_ISSUER | SETUP_DEFER_TASKRUN,
    }
    match complete {
        Complete::Irq => {}
        Complete::Poll => f |= SETUP_IOPOLL,
        Complete::Hybrid => f |= SETUP_IOPOLL | SETUP_HYBRID_IOPOLL,
    }
    f
}

pub struct Uring {
    ring: IoUring,
    fixed_files: bool,
    fixed_bufs: bool,
    sqe_flags: io_uring::squeue::Flags,
    fds: Vec<i32>,
    driver: RingDriver,
}

/// How a ring is driven, shared by io_uring and NVMe passthrough: what was pushed and not yet
/// submitted, what is in flight, and whether completions are waited for, polled for inside the
/// enter (IOPOLL), or watched for on the CQ ring (SQPOLL + polling: the SQ thread reaps).
pub(crate) struct RingDriver {
    /// SQEs pushed since the last io_uring_enter.
    unsubmitted: u32,
    /// Requests pushed and not yet reaped.
    outstanding: usize,
    sqpoll: bool,
    /// Completions are only found by entering the kernel (IOPOLL without SQPOLL).
    enter_to_poll: bool,
    spin_on_cq: bool,
}

impl RingDriver {
    pub(crate) fn new(submit: Submit, complete: Complete) -> Self {
        let sqpoll = submit == Submit::Sqpoll;
        let polled = complete != Complete::Irq;
        RingDriver { unsubmitted: 0, outstanding: 0, sqpoll, enter_to_poll: polled && !sqpoll, spin_on_cq: polled && sqpoll }
    }

    /// Submit what was pushed and make at least `min` completions visible in the CQ ring.
    #[inline]
    fn complete<S: squeue::EntryMarker, C: cqueue::EntryMarker>(&mut self, ring: &mut IoUring<S, C>, min: usize) -> io::Result<()> {
        let mut ready = ring.completion().len();
        if self.spin_on_cq {
            while ring.completion().len() < min {
                std::hint::spin_loop();
            }
        } else if self.sqpoll {
            if ready < min {
                // Handles the SQ thread's wakeup flag.
                retry_eintr(|| ring.submit_and_wait(min - ready))?;
            }
        } else if self.enter_to_poll {
            if self.unsubmitted > 0 || min > 0 {
                // Polling happens inside the enter: ask for the full `min`.
                self.enter(ring.as_raw_fd(), min)?;
            }
        } else {
            // Others in flight besides the SQEs about to be submitted: their completions may
            // be waiting in the deferred work list.
            let others_in_flight = self.outstanding > self.unsubmitted as usize + ready;
            if self.unsubmitted > 0 && (ready >= min || others_in_flight) {
                // Submit without waiting first. The enter runs the deferred completion work, so
                // the ring often holds enough afterwards, and its return lets a woken io-wq
                // worker run before the check. Submitting and sleeping in one call instead made
                // submitter and worker hand over after every completion on one CPU (zram:
                // 0.86-0.90 sleeps per I/O, now 0.62-0.69, fio 0.58-0.68). With nothing else in
                // flight (QD1) one call does both.
                self.enter(ring.as_raw_fd(), 0)?;
                ready = ring.completion().len();
            }
            if ready < min {
                self.enter(ring.as_raw_fd(), min - ready)?;
            }
        }
        Ok(())
    }

    /// Push one SQE per request, as many as the SQ ring takes, and hand them on per the mode.
    #[inline]
    pub(crate) fn push<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
        &mut self,
        ring: &mut IoUring<S, C>,
        reqs: &[Request],
        mut sqe: impl FnMut(&Request) -> S,
    ) -> io::Result<usize> {
        let mut sq = ring.submission();
        let mut pushed = 0;
        for r in reqs {
            // SAFETY: the buffer stays valid until the completion is reaped.
            if unsafe { sq.push(&sqe(r)) }.is_err() {
                break;
            }
            pushed += 1;
        }
        drop(sq);
        self.outstanding += pushed;
        if self.sqpoll {
            // Publishes the tail; enters only if the SQ thread went idle and needs a wakeup.
            ring.submit()?;
        } else {
            self.unsubmitted += pushed as u32;
        }
        Ok(pushed)
    }

    /// Make at least `min` completions visible (submitting what is pushed) and take every one
    /// the ring holds, up to `out.len()`.
    #[inline]
    pub(crate) fn reap<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
        &mut self,
        ring: &mut IoUring<S, C>,
        min: usize,
        out: &mut [Completion],
        mut completion: impl FnMut(cqueue::Entry) -> Completion,
    ) -> io::Result<usize> {
        self.complete(ring, min)?;
        let mut cq = ring.completion();
        let mut n = 0;
        while n < out.len() {
            match cq.next() {
                Some(c) => {
                    out[n] = completion(c.into());
                    n += 1;
                }
                None => break,
            }
        }
        self.outstanding -= n;
        Ok(n)
    }

    /// One io_uring_enter: submits whatever was pushed since the last one and waits for (or,
    /// with IOPOLL, polls for) `want` completions. Always GETEVENTS, so deferred completion work
    /// runs on every entry. A bare system call (as `Submitter::enter` makes through glibc's
    /// `syscall()`, less its errno round trip), no signal mask.
    #[inline]
    fn enter(&mut self, fd: i32, want: usize) -> io::Result<()> {
        let to_submit = self.unsubmitted as usize;
        retry_eintr(|| {
            let args = [fd as usize, to_submit, want, ENTER_GETEVENTS as usize, 0, 0];
            // SAFETY: the SQ tail was published when the submission queue was dropped.
            match unsafe { raw_syscall(libc::SYS_io_uring_enter, args) } {
                r if r < 0 => Err(io::Error::from_raw_os_error(-r as i32)),
                r => Ok(r as usize),
            }
        })?;
        self.unsubmitted = 0;
        Ok(())
    }
}

/// Repeat a system call interrupted by a signal or refused for want of resources.
#[inline]
fn retry_eintr(mut call: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        match call() {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EAGAIN)) => continue,
            r => return r,
        }
    }
}

impl IoInterface for Uring {
    fn open(setup: &Setup) -> io::Result<Self> {
        let flags = flags_for(setup.submit, setup.complete);
        let ring = create_ring(setup.qd, flags, setup.sq_cpu, setup.sq_idle_ms)?;
        if setup.register_files {
            ring.submitter().register_files(setup.fds)?;
        }
        if setup.register_buffers {
            let iov = libc::iovec { iov_base: setup.buffers as *mut libc::c_void, iov_len: setup.buffers_len };
            // SAFETY: the buffer region outlives the ring (owned by the hot loop's caller).
            unsafe { ring.submitter().register_buffers(&[iov])? };
        }
        Ok(Uring {
            ring,
            fixed_files: setup.register_files,
            fixed_bufs: setup.register_buffers,
            sqe_flags: if setup.force_async { io_uring::squeue::Flags::ASYNC } else { io_uring::squeue::Flags::empty() },
            fds: setup.fds.to_vec(),
            driver: RingDriver::new(setup.submit, setup.complete),
        })
    }

    #[inline]
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize> {
        let (fds, fixed_bufs, fixed_files, flags) = (&self.fds, self.fixed_bufs, self.fixed_files, self.sqe_flags);
        self.driver.push(&mut self.ring, reqs, |r| {
            match (r.write, fixed_bufs, fixed_files) {
                (false, true, true) => opcode::ReadFixed::new(types::Fixed(r.file), r.buf, r.len, 0).offset(r.offset).build(),
                (false, true, false) => opcode::ReadFixed::new(types::Fd(fds[r.file as usize]), r.buf, r.len, 0).offset(r.offset).build(),
                (false, false, true) => opcode::Read::new(types::Fixed(r.file), r.buf, r.len).offset(r.offset).build(),
                (false, false, false) => opcode::Read::new(types::Fd(fds[r.file as usize]), r.buf, r.len).offset(r.offset).build(),
                (true, true, true) => opcode::WriteFixed::new(types::Fixed(r.file), r.buf, r.len, 0).offset(r.offset).build(),
                (true, true, false) => opcode::WriteFixed::new(types::Fd(fds[r.file as usize]), r.buf, r.len, 0).offset(r.offset).build(),
                (true, false, true) => opcode::Write::new(types::Fixed(r.file), r.buf, r.len).offset(r.offset).build(),
                (true, false, false) => opcode::Write::new(types::Fd(fds[r.file as usize]), r.buf, r.len).offset(r.offset).build(),
            }
            .user_data(r.tag as u64)
            .flags(flags)
        })
    }

    #[inline]
    fn reap(&mut self, min: usize, out: &mut [Completion]) -> io::Result<usize> {
        self.driver.reap(&mut self.ring, min, out, |c| Completion { tag: c.user_data() as u32, result: c.result() as i64 })
    }
}
