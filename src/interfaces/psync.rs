//! psync: pread/pwrite, one I/O per call. Sync interfaces reach depth with threads.
use super::{neg_errno, Completion, IoInterface, Request, Setup};
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
        // SAFETY: the buffer belongs to slot r.tag and is r.len bytes long.
        let n = unsafe {
            if r.write {
                libc::pwrite(fd, r.buf as *const libc::c_void, r.len as usize, r.offset as i64)
            } else {
                libc::pread(fd, r.buf as *mut libc::c_void, r.len as usize, r.offset as i64)
            }
        };
        self.done = Completion { tag: r.tag, result: if n < 0 { neg_errno() } else { n as i64 } };
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
