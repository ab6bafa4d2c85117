//! pvsync2: preadv2/pwritev2; `--complete poll` passes RWF_HIPRI and the block layer polls,
//! `--complete hybrid` has it sleep first (queue/io_poll_delay). Linux ignores RWF_HIPRI on
//! synchronous I/O since 5.18, which iolab reports rather than hides (`block_poll.rs`).
use super::block_poll;
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
    type Handle = ();

    fn open(setup: &Setup, _: &()) -> io::Result<Self> {
        let flags = if setup.complete == Complete::Irq { 0 } else { libc::RWF_HIPRI };
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
    type Target = super::target::Files;

    const INFO: &'static InterfaceInfo = &InterfaceInfo {
        name: "pvsync2",
        note: None,
        execution: "kernel",
        behaviour: Behaviour::Sync,
        submits: &[Submit::Syscall],
        completes: &[Complete::Irq, Complete::Poll, Complete::Hybrid],
        how: "preadv2/pwritev2; poll sets RWF_HIPRI (ignored for sync I/O since Linux 5.18); hybrid adds the queue's io_poll_delay (before 5.18)",
        async_needs_direct: false,
        diskless: false,
        targets: super::FILES_AND_BLOCKS,
        polls_device_queues: false,
        bypasses_kernel: false,
    };

    fn check_kernel(io: &IoChoice) -> Result<Option<super::KernelSetup>, super::InterfaceError> {
        match block_poll::hybrid_unreachable(false) {
            Some(why) if io.complete == Complete::Hybrid => Err(super::InterfaceError::Unsupported(format!(
                "pvsync2 cannot use hybrid polling here: {why} (io_uring's HYBRID_IOPOLL, Linux 6.13+, is the hybrid polling left)"
            ))),
            _ => Ok(None),
        }
    }

    fn expected_path(io: &IoChoice, targets: &[TargetInfo]) -> (Path, Option<String>) {
        if io.complete != Complete::Irq && !block_poll::sync_hipri_polls() {
            return (Path::Interrupt, Some("Linux ignores RWF_HIPRI on synchronous I/O since 5.18".to_string()));
        }
        super::queue_path(io.complete, targets)
    }

    fn kernel_features() -> Vec<super::Feature> {
        let by = "the kernel release: no call reports this behaviour, each run's interrupt counters and sleeps confirm it";
        vec![
            super::Feature {
                name: "synchronous RWF_HIPRI polling",
                since: "4.6",
                until: Some("5.17"),
                present: Some(block_poll::sync_hipri_polls()),
                detected_by: by,
                without: "pvsync2 --complete poll completes by interrupt, which iolab expects and reports; io_uring --complete poll at QD1 is the stand-in",
            },
            super::Feature {
                name: "the block layer's hybrid polling (queue/io_poll_delay)",
                since: "4.10",
                until: Some("5.17 for synchronous I/O, 5.15 for io_uring, 6.3 at all"),
                present: Some(block_poll::hybrid_unreachable(false).is_none()),
                detected_by: by,
                without: "pvsync2 --complete hybrid is refused; io_uring's HYBRID_IOPOLL (6.13+) is the hybrid polling left",
            },
        ]
    }

    fn block_poll_delay(io: &IoChoice) -> Option<i64> {
        block_poll::delay_for(io).filter(|_| block_poll::sync_hipri_polls())
    }

    fn mechanism(io: &IoChoice) -> String {
        match (io.complete, Self::block_poll_delay(io)) {
            (Complete::Irq, _) => "interrupt".into(),
            (_, None) => "RWF_HIPRI, which this kernel ignores for synchronous I/O: interrupt".into(),
            (Complete::Poll, Some(d)) => format!("RWF_HIPRI: the block layer polls ({})", block_poll::delay_words(d)),
            (Complete::Hybrid, Some(d)) => format!("RWF_HIPRI with the block layer's hybrid polling ({})", block_poll::delay_words(d)),
        }
    }
}
