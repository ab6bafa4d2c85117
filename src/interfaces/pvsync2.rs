//! pvsync2: preadv2/pwritev2; `--complete poll` passes RWF_HIPRI. Linux ignores RWF_HIPRI on
//! synchronous I/O since 5.18, which iolab reports rather than hides.
use super::{neg_errno, Completion, IoInterface, Request, Setup};
use crate::plan::Complete;
use std::io;
use std::os::fd::RawFd;

pub struct Pvsync2 {
    fds: Vec<RawFd>,
    flags: libc::c_int,
    done: Completion,
    has_done: bool,
}

impl IoInterface for Pvsync2 {
    fn open(setup: &Setup) -> io::Result<Self> {
        let flags = if setup.complete == Complete::Poll { libc::RWF_HIPRI } else { 0 };
        Ok(Pvsync2 { fds: setup.fds.to_vec(), flags, done: Completion::default(), has_done: false })
    }

    #[inline]
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize> {
        let r = &reqs[0];
        let fd = self.fds[r.file as usize];
        let iov = libc::iovec { iov_base: r.buf as *mut libc::c_void, iov_len: r.len as usize };
        // SAFETY: iov points at slot r.tag's buffer of r.len bytes.
        let n = unsafe {
            if r.write {
                libc::pwritev2(fd, &iov, 1, r.offset as i64, self.flags)
            } else {
                libc::preadv2(fd, &iov, 1, r.offset as i64, self.flags)
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
