//! posixaio: glibc's aio_read/aio_write, a user-space thread pool issuing synchronous I/O.
//! Completion is waited for in aio_suspend (irq) or found by spinning on aio_error (poll),
//! which is what fio's posixaio engine does.
use super::Path;
use super::{Behaviour, Completion, Interface, InterfaceInfo, IoInterface, Request, Setup};
use super::{Complete, IoChoice, Submit};
use crate::device::sysinfo::TargetInfo;
use std::io;
use std::os::fd::RawFd;

pub struct PosixAio {
    fds: Vec<RawFd>,
    cbs: Vec<libc::aiocb>,
    /// aio_suspend's list: the in-flight control blocks, null where a slot is free.
    list: Vec<*const libc::aiocb>,
    inflight: usize,
    spin: bool,
}

impl IoInterface for PosixAio {
    type Handle = ();

    fn open(setup: &Setup, _: &()) -> io::Result<Self> {
        let qd = setup.qd as usize;
        // SAFETY: aiocb is plain data; zero is its documented initial state.
        let cbs = vec![unsafe { std::mem::zeroed::<libc::aiocb>() }; qd];
        Ok(PosixAio { fds: setup.fds.to_vec(), cbs, list: vec![std::ptr::null(); qd], inflight: 0, spin: setup.complete == Complete::Poll })
    }

    #[inline]
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize> {
        for (i, r) in reqs.iter().enumerate() {
            let slot = r.tag as usize;
            let cb = &mut self.cbs[slot];
            cb.aio_fildes = self.fds[r.file as usize];
            cb.aio_buf = r.buf as *mut libc::c_void;
            cb.aio_nbytes = r.len as usize;
            cb.aio_offset = r.offset as i64;
            // SAFETY: cb stays in place until aio_return is called for it.
            let rc = unsafe {
                if r.write {
                    libc::aio_write(cb)
                } else {
                    libc::aio_read(cb)
                }
            };
            if rc != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EAGAIN) && i > 0 {
                    return Ok(i);
                }
                return Err(e);
            }
            self.list[slot] = cb;
            self.inflight += 1;
        }
        Ok(reqs.len())
    }

    #[inline]
    fn reap(&mut self, min: usize, out: &mut [Completion]) -> io::Result<usize> {
        let mut n = 0;
        loop {
            for slot in 0..self.list.len() {
                if n == out.len() || self.inflight == 0 {
                    break;
                }
                if self.list[slot].is_null() {
                    continue;
                }
                let cb = &mut self.cbs[slot];
                // SAFETY: cb was submitted and not yet returned.
                let err = unsafe { libc::aio_error(cb) };
                if err == libc::EINPROGRESS {
                    continue;
                }
                let ret = unsafe { libc::aio_return(cb) };
                let result = if err != 0 { -(err as i64) } else { ret as i64 };
                out[n] = Completion { tag: slot as u32, result };
                n += 1;
                self.list[slot] = std::ptr::null();
                self.inflight -= 1;
            }
            if n >= min || self.inflight == 0 {
                return Ok(n);
            }
            if !self.spin {
                // SAFETY: list holds in-flight control blocks or nulls, which aio_suspend skips.
                let rc = unsafe { libc::aio_suspend(self.list.as_ptr(), self.list.len() as i32, std::ptr::null()) };
                if rc != 0 {
                    let e = io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::EINTR) {
                        return Err(e);
                    }
                }
            }
        }
    }
}

impl Interface for PosixAio {
    type Target = super::target::Files;

    const INFO: &'static InterfaceInfo = &InterfaceInfo {
        name: "posixaio",
        note: None,
        execution: "kernel",
        behaviour: Behaviour::Async,
        submits: &[Submit::Syscall],
        completes: &[Complete::Irq, Complete::Poll],
        how: "glibc aio_read/aio_write (user-space thread pool); irq waits in aio_suspend, poll spins on aio_error",
        async_needs_direct: false,
        diskless: false,
        targets: super::FILES_AND_BLOCKS,
        polls_device_queues: false,
        bypasses_kernel: false,
    };

    fn expected_path(io: &IoChoice, _targets: &[TargetInfo]) -> (Path, Option<String>) {
        match io.complete {
            Complete::Irq => (Path::Interrupt, None),
            _ => (
                Path::Interrupt,
                Some("posixaio polling spins on aio_error in user space; the kernel still completes by interrupt".to_string()),
            ),
        }
    }
}
