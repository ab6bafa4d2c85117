//! libaio: Linux native AIO through raw io_setup/io_submit/io_getevents system calls (no
//! libaio.so needed). Asynchronous only with O_DIRECT; buffered I/O blocks inside io_submit, and
//! the record's mechanism says so.
use super::{Behaviour, Completion, Interface, InterfaceInfo, IoInterface, Request, Setup};
use super::{Complete, Submit};
use std::io;
use std::os::fd::RawFd;

const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;
/// `iocb.aio_flags`: `aio_reqprio` holds the command's I/O priority.
const IOCB_FLAG_IOPRIO: u32 = 1 << 1;
/// The per-command priority draw's seed: the same sequence every run.
pub(crate) const CMDPRIO_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

/// The kernel's `struct iocb` (little-endian field order).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Iocb {
    data: u64,
    key: u32,
    rw_flags: i32,
    opcode: u16,
    reqprio: i16,
    fildes: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

/// The kernel's `struct io_event`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

pub struct Libaio {
    ctx: libc::c_ulong,
    fds: Vec<RawFd>,
    iocbs: Vec<Iocb>,
    ptrs: Vec<*mut Iocb>,
    events: Vec<IoEvent>,
    /// `--cmdprio`: which commands carry the priority (None: none do, and submit pays one
    /// predictable branch per request).
    cmdprio: Option<super::thread::CmdPrioDraw>,
}

fn machine_support() -> Result<(), super::InterfaceError> {
    let mut ctx: libc::c_ulong = 0;
    // SAFETY: io_setup writes the context id into ctx.
    let rc = unsafe { libc::syscall(libc::SYS_io_setup, 1, &mut ctx) };
    if rc < 0 {
        return Err(super::InterfaceError::Unsupported(format!(
            "io_setup failed: {} (kernel without CONFIG_AIO, or fs.aio-max-nr exhausted)",
            io::Error::last_os_error()
        )));
    }
    unsafe { libc::syscall(libc::SYS_io_destroy, ctx) };
    Ok(())
}

impl Libaio {
    /// The kernel took only the first `taken` requests: the others are sent again, so they are
    /// not counted as sent (nor as carrying a priority) yet. Returns `taken`.
    #[cold]
    fn not_taken(&mut self, reqs: &[Request], taken: usize) -> io::Result<usize> {
        if let Some(d) = &mut self.cmdprio {
            for r in &reqs[taken..] {
                let dir = r.write as usize;
                d.commands[dir] -= 1;
                if self.iocbs[r.tag as usize].flags & IOCB_FLAG_IOPRIO != 0 {
                    d.with_prio[dir] -= 1;
                }
            }
        }
        Ok(taken)
    }
}

impl IoInterface for Libaio {
    type Handle = ();

    fn open(setup: &Setup, _: &()) -> io::Result<Self> {
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: io_setup writes the context id into ctx.
        if unsafe { libc::syscall(libc::SYS_io_setup, setup.qd as libc::c_long, &mut ctx) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let qd = setup.qd as usize;
        Ok(Libaio {
            ctx,
            fds: setup.fds.to_vec(),
            iocbs: vec![Iocb::default(); qd],
            ptrs: vec![std::ptr::null_mut(); qd],
            events: vec![IoEvent::default(); qd],
            cmdprio: setup.io.options.thread.cmdprio.map(|c| super::thread::CmdPrioDraw::new(&c, CMDPRIO_SEED)),
        })
    }

    #[inline]
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize> {
        for (i, r) in reqs.iter().enumerate() {
            let cb = &mut self.iocbs[r.tag as usize];
            *cb = Iocb {
                data: r.tag as u64,
                opcode: if r.write { IOCB_CMD_PWRITE } else { IOCB_CMD_PREAD },
                fildes: self.fds[r.file as usize] as u32,
                buf: r.buf as u64,
                nbytes: r.len as u64,
                offset: r.offset as i64,
                ..Iocb::default()
            };
            if let Some(d) = &mut self.cmdprio {
                if let Some(p) = d.next(r.write) {
                    cb.reqprio = p as i16;
                    cb.flags = IOCB_FLAG_IOPRIO;
                }
            }
            self.ptrs[i] = cb;
        }
        // SAFETY: ptrs[..n] point at iocbs that live as long as self.
        let rc = unsafe { libc::syscall(libc::SYS_io_submit, self.ctx, reqs.len() as libc::c_long, self.ptrs.as_mut_ptr()) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            // EAGAIN: the kernel took none this time; the loop retries after reaping.
            return if e.raw_os_error() == Some(libc::EAGAIN) { self.not_taken(reqs, 0) } else { Err(e) };
        }
        if (rc as usize) < reqs.len() {
            return self.not_taken(reqs, rc as usize);
        }
        Ok(rc as usize)
    }

    #[inline]
    fn reap(&mut self, min: usize, out: &mut [Completion]) -> io::Result<usize> {
        if min == 0 {
            return Ok(0);
        }
        let max = out.len().min(self.events.len());
        loop {
            // SAFETY: events has room for max entries.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_io_getevents,
                    self.ctx,
                    min as libc::c_long,
                    max as libc::c_long,
                    self.events.as_mut_ptr(),
                    std::ptr::null_mut::<libc::timespec>(),
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                return Err(e);
            }
            let n = rc as usize;
            for (o, ev) in out.iter_mut().zip(&self.events[..n]) {
                *o = Completion { tag: ev.data as u32, result: ev.res };
            }
            return Ok(n);
        }
    }

    fn cmdprio_counts(&self) -> Option<([u64; 2], [u64; 2])> {
        self.cmdprio.as_ref().map(|d| (d.commands, d.with_prio))
    }
}

impl Drop for Libaio {
    fn drop(&mut self) {
        // SAFETY: ctx came from io_setup; the hot loop drained every request.
        unsafe { libc::syscall(libc::SYS_io_destroy, self.ctx) };
    }
}

/// How buffered libaio runs, in the record's `completion_path.mechanism` (and fio's dry run).
pub(crate) const BUFFERED: &str = "synchronous: buffered (no O_DIRECT), Linux runs each AIO request inside io_submit, through the page cache, so io_submit returns with it done and io_getevents only collects it";

impl Interface for Libaio {
    type Target = super::target::Files;

    const INFO: &'static InterfaceInfo = &InterfaceInfo {
        name: "libaio",
        note: None,
        execution: "kernel",
        behaviour: Behaviour::Async,
        submits: &[Submit::Syscall],
        completes: &[Complete::Irq],
        how: "io_setup/io_submit/io_getevents; asynchronous only with O_DIRECT",
        async_needs_direct: true,
        diskless: false,
        targets: super::FILES_AND_BLOCKS,
        polls_device_queues: false,
        bypasses_kernel: false,
    };

    fn machine_support() -> Result<(), super::InterfaceError> {
        machine_support()
    }

    /// Buffered, the kernel runs each request synchronously inside io_submit.
    fn mechanism(io: &super::IoChoice) -> String {
        if io.direct { "interrupt" } else { BUFFERED }.to_string()
    }
}
