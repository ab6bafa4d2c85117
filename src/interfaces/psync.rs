//! psync: pread/pwrite, one I/O per call (the bare system calls, see `raw_syscall`). Sync
//! interfaces reach depth with threads.
use super::{raw_syscall, Completion, IoInterface, Request, Setup};
use std::io;
use std::os::fd::RawFd;

pub struct Psync {
    fds: Vec<RawFd>,
    done: Completion,
    has_done: bool,
}

impl IoInterface for Psync {
    fn open(setup: &Setup) -> io::Result<Self> {
        Ok(Psync { fds: setup.fds.to_vec(), done: Completion::default(), has_done: false })
    }

    #[inline]
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize> {
        let r = &reqs[0];
        let fd = self.fds[r.file as usize];
        let nr = if r.write { libc::SYS_pwrite64 } else { libc::SYS_pread64 };
        // SAFETY: the buffer belongs to slot r.tag and is r.len bytes long.
        let result = unsafe { raw_syscall(nr, [fd as usize, r.buf as usize, r.len as usize, r.offset as usize, 0, 0]) };
        self.done = Completion { tag: r.tag, result };
        self.has_done = true;
        Ok(1)
    }

    #[inline]
    fn reap(&mut self, _min: usize, out: &mut [Completion]) -> io::Result<usize> {
        if !self.has_done {
            return Ok(0);
        }
        self.has_done = false;
        out[0] = self.done;
        Ok(1)
    }
}
