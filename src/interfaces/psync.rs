//! psync: pread/pwrite, one I/O per call (the bare system calls, see `raw_syscall`). Sync
//! interfaces reach depth with threads.
use super::{raw_syscall, Behaviour, Completion, Held, Interface, InterfaceInfo, IoInterface, Request, Setup};
use super::{Complete, Submit};
use std::io;
use std::os::fd::RawFd;

pub struct Psync {
    fds: Vec<RawFd>,
    done: Held,
}

impl IoInterface for Psync {
    type Handle = ();

    fn open(setup: &Setup, _: &()) -> io::Result<Self> {
        Ok(Psync { fds: setup.fds.to_vec(), done: Held::default() })
    }

    #[inline]
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize> {
        let r = &reqs[0];
        let fd = self.fds[r.file as usize];
        let nr = if r.write { libc::SYS_pwrite64 } else { libc::SYS_pread64 };
        // SAFETY: the buffer belongs to slot r.tag and is r.len bytes long.
        let result = unsafe { raw_syscall(nr, [fd as usize, r.buf as usize, r.len as usize, r.offset as usize, 0, 0]) };
        self.done.hold(r.tag, result)
    }

    #[inline]
    fn reap(&mut self, _min: usize, out: &mut [Completion]) -> io::Result<usize> {
        self.done.take(out)
    }
}

impl Interface for Psync {
    type Target = super::target::Files;

    const INFO: &'static InterfaceInfo = &InterfaceInfo {
        name: "psync",
        note: None,
        execution: "kernel",
        behaviour: Behaviour::Sync,
        submits: &[Submit::Syscall],
        completes: &[Complete::Irq],
        how: "pread/pwrite; depth comes from threads",
        async_needs_direct: false,
        diskless: false,
        targets: super::FILES_AND_BLOCKS,
        polls_device_queues: false,
        bypasses_kernel: false,
    };
}
