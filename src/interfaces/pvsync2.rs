//! pvsync2: preadv2/pwritev2; `--complete poll` passes RWF_HIPRI. Linux ignores RWF_HIPRI on
//! synchronous I/O since 5.18, which iolab reports rather than hides.
use super::Path;
use super::{raw_syscall, Behaviour, Completion, Held, Interface, InterfaceInfo, IoInterface, Request, Setup};
use super::{Complete, IoChoice, Submit};
use crate::device::sysinfo::TargetInfo;
use std::io;
use std::os::fd::RawFd;

pub struct Pvsync2 {
    fds: Vec<RawFd>,
    flags: libc::c_int,
    done: Held,
}

impl IoInterface for Pvsync2 {
    fn open(setup: &Setup) -> io::Result<Self> {
        let flags = if setup.complete == Complete::Poll { libc::RWF_HIPRI } else { 0 };
        Ok(Pvsync2 { fds: setup.fds.to_vec(), flags, done: Held::default() })
    }

    #[inline]
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize> {
        let r = &reqs[0];
        let fd = self.fds[r.file as usize];
        let iov = libc::iovec { iov_base: r.buf as *mut libc::c_void, iov_len: r.len as usize };
        let nr = if r.write { libc::SYS_pwritev2 } else { libc::SYS_preadv2 };
        // The offset is passed as low and high halves; on 64-bit the kernel takes the low
        // one whole (glibc passes 0 as the high half too).
        let args = [fd as usize, &iov as *const libc::iovec as usize, 1, r.offset as usize, 0, self.flags as usize];
        // SAFETY: iov points at slot r.tag's buffer of r.len bytes and lives across the call.
        let result = unsafe { raw_syscall(nr, args) };
        self.done.hold(r.tag, result)
    }

    #[inline]
    fn reap(&mut self, _min: usize, out: &mut [Completion]) -> io::Result<usize> {
        self.done.take(out)
    }
}

impl Interface for Pvsync2 {
    const INFO: &'static InterfaceInfo = &InterfaceInfo {
        name: "pvsync2",
        execution: "kernel",
        behaviour: Behaviour::Sync,
        submits: &[Submit::Syscall],
        completes: &[Complete::Irq, Complete::Poll],
        how: "preadv2/pwritev2; poll sets RWF_HIPRI (ignored for sync I/O since Linux 5.18)",
        async_needs_direct: false,
        diskless: false,
        targets: super::FILES_AND_BLOCKS,
        polls_device_queues: false,
    };

    fn expected_path(io: &IoChoice, targets: &[TargetInfo]) -> (Path, Option<String>) {
        if io.complete != Complete::Irq && crate::host::kernel_version() >= (5, 18) {
            return (Path::Interrupt, Some("Linux ignores RWF_HIPRI on synchronous I/O since 5.18".to_string()));
        }
        super::queue_path(io.complete, targets)
    }
}
