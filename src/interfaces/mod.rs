//! I/O interfaces: one file each behind [`IoInterface`], described as data in [`INTERFACES`].
//!
//! Like fio's `ioengine_ops` and SPDK perf's `ns_fn_table`: an interface only moves requests to
//! the kernel and completions back. Timing, offsets, buffers and accounting live in the shared
//! hot loop (`engine::hotloop`), so every interface is measured the same way.
pub mod io_uring;
pub mod libaio;
pub mod null;
pub mod nvme_passthru;
pub mod posixaio;
pub mod psync;
pub mod pvsync2;

use crate::plan::{Complete, Submit};
use serde::Serialize;
use std::io;
use std::os::fd::RawFd;

/// One I/O request. `tag` names the slot (buffer and timestamp) it belongs to.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    pub tag: u32,
    pub write: bool,
    pub file: u32,
    pub offset: u64,
    pub len: u32,
    pub buf: *mut u8,
}

impl Default for Request {
    fn default() -> Self {
        Request { tag: 0, write: false, file: 0, offset: 0, len: 0, buf: std::ptr::null_mut() }
    }
}

/// A finished request: bytes transferred, a negative errno, or (at or below [`DEVICE_STATUS`])
/// a status the device itself returned.
#[derive(Clone, Copy, Debug, Default)]
pub struct Completion {
    pub tag: u32,
    pub result: i64,
}

/// What a synchronous interface holds between its `submit`, which did the I/O, and the loop's
/// `reap`, which takes the one completion.
#[derive(Default)]
pub(crate) struct Held(Option<Completion>);

impl Held {
    #[inline]
    pub(crate) fn hold(&mut self, tag: u32, result: i64) -> io::Result<usize> {
        self.0 = Some(Completion { tag, result });
        Ok(1)
    }

    #[inline]
    pub(crate) fn take(&mut self, out: &mut [Completion]) -> io::Result<usize> {
        match self.0.take() {
            Some(c) => {
                out[0] = c;
                Ok(1)
            }
            None => Ok(0),
        }
    }
}

/// Completion results at or below this carry a device status rather than an errno:
/// `result = DEVICE_STATUS - status` (an NVMe status for nvme-passthru).
pub const DEVICE_STATUS: i64 = -(1 << 32);

/// The errno of a failed completion result, if it is one (not a device status).
pub fn errno_of(result: i64) -> Option<i32> {
    (result < 0 && result > DEVICE_STATUS).then_some(-result as i32)
}

/// A failed completion result in words.
pub fn error_text(result: i64) -> String {
    if result <= DEVICE_STATUS {
        nvme_passthru::status_text((DEVICE_STATUS - result) as u64)
    } else {
        io::Error::from_raw_os_error(-result as i32).to_string()
    }
}

/// What an interface gets once, before the hot loop: already-open files and the slot buffers.
pub struct Setup<'a> {
    pub fds: &'a [RawFd],
    /// Start of the thread's buffer region: `qd` slots of `bs` bytes, aligned.
    pub buffers: *mut u8,
    pub buffers_len: usize,
    /// Bytes per slot (the job's block size): slot `tag` starts at `buffers + tag * bs`.
    pub bs: u32,
    pub qd: u32,
    pub submit: Submit,
    pub complete: Complete,
    pub batch_submit: u32,
    pub sq_cpu: Option<u32>,
    pub sq_idle_ms: u32,
    pub register_buffers: bool,
    pub register_files: bool,
    /// io_uring: IOSQE_ASYNC on every request (straight to io-wq, skipping the non-blocking try).
    pub force_async: bool,
    /// null: the `--null-script` (parsed by `null::Script`).
    pub null_script: Option<&'a str>,
}

/// The whole contract between the hot loop and an interface.
pub trait IoInterface: Sized {
    /// Set up rings, contexts and registrations once.
    fn open(setup: &Setup) -> io::Result<Self>;
    /// Queue (async) or perform (sync) the requests; returns how many were accepted.
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize>;
    /// Collect at least `min` completions (0 = only what is ready), at most `out.len()`.
    fn reap(&mut self, min: usize, out: &mut [Completion]) -> io::Result<usize>;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Behaviour {
    Sync,
    Async,
}

/// An interface's design point (the HotStorage'23 paper's Table 1) and what it supports.
#[derive(Debug, Serialize)]
pub struct InterfaceInfo {
    pub name: &'static str,
    pub execution: &'static str,
    pub behaviour: Behaviour,
    pub submits: &'static [Submit],
    pub completes: &'static [Complete],
    /// What the completion modes mean for this interface.
    pub how: &'static str,
    /// Asynchronous only with O_DIRECT (libaio silently blocks in io_submit otherwise).
    pub async_needs_direct: bool,
    /// Does no I/O and takes no target (fio's FIO_DISKLESSIO): `--size` is its address space.
    pub diskless: bool,
}

pub const INTERFACES: &[InterfaceInfo] = &[
    InterfaceInfo {
        name: "psync",
        execution: "kernel",
        behaviour: Behaviour::Sync,
        submits: &[Submit::Syscall],
        completes: &[Complete::Irq],
        how: "pread/pwrite; depth comes from threads",
        async_needs_direct: false,
        diskless: false,
    },
    InterfaceInfo {
        name: "pvsync2",
        execution: "kernel",
        behaviour: Behaviour::Sync,
        submits: &[Submit::Syscall],
        completes: &[Complete::Irq, Complete::Poll],
        how: "preadv2/pwritev2; poll sets RWF_HIPRI (ignored for sync I/O since Linux 5.18)",
        async_needs_direct: false,
        diskless: false,
    },
    InterfaceInfo {
        name: "posixaio",
        execution: "kernel",
        behaviour: Behaviour::Async,
        submits: &[Submit::Syscall],
        completes: &[Complete::Irq, Complete::Poll],
        how: "glibc aio_read/aio_write (user-space thread pool); irq waits in aio_suspend, poll spins on aio_error",
        async_needs_direct: false,
        diskless: false,
    },
    InterfaceInfo {
        name: "libaio",
        execution: "kernel",
        behaviour: Behaviour::Async,
        submits: &[Submit::Syscall],
        completes: &[Complete::Irq],
        how: "io_setup/io_submit/io_getevents; asynchronous only with O_DIRECT",
        async_needs_direct: true,
        diskless: false,
    },
    InterfaceInfo {
        name: "io_uring",
        execution: "kernel",
        behaviour: Behaviour::Async,
        submits: &[Submit::Syscall, Submit::Sqpoll],
        completes: &[Complete::Irq, Complete::Poll, Complete::Hybrid],
        how: "shared rings; sqpoll = SQPOLL kernel thread; poll = IOPOLL; hybrid = HYBRID_IOPOLL (6.13+)",
        async_needs_direct: false,
        diskless: false,
    },
    InterfaceInfo {
        name: "nvme-passthru",
        execution: "kernel",
        behaviour: Behaviour::Async,
        submits: &[Submit::Syscall, Submit::Sqpoll],
        completes: &[Complete::Irq, Complete::Poll],
        how: "io_uring URING_CMD on /dev/ngXnY: iolab builds the NVMe read/write commands (no submit_bio path: no splitting, merging or scheduler); poll = IOPOLL; registered buffers 6.1+",
        async_needs_direct: false,
        diskless: false,
    },
    InterfaceInfo {
        name: null::NAME,
        execution: "iolab",
        behaviour: Behaviour::Async,
        submits: &[Submit::Syscall],
        completes: &[Complete::Irq],
        how: "no I/O and no target: every request completes at once inside iolab (fio's null engine); measures iolab's own cost per I/O; --size is its address space; --null-script scripts delays, errors, short transfers and partial submits for tests",
        async_needs_direct: false,
        diskless: true,
    },
];

pub fn find(name: &str) -> Option<&'static InterfaceInfo> {
    INTERFACES.iter().find(|i| i.name == name)
}

pub fn names() -> String {
    INTERFACES.iter().map(|i| i.name).collect::<Vec<_>>().join(", ")
}

/// Whether this machine can run the interface at all; Err carries the reason.
pub fn machine_support(name: &str) -> Result<(), String> {
    match name {
        "io_uring" => io_uring::machine_support(),
        "libaio" => libaio::machine_support(),
        "nvme-passthru" => nvme_passthru::machine_support(),
        _ => Ok(()),
    }
}

/// For an interface the machine supports: what this kernel's io_uring ring setup refuses (and
/// iolab does without, or cannot do), if anything.
pub fn machine_notes(name: &str) -> Option<String> {
    match name {
        "io_uring" => io_uring::setup_notes(false),
        "nvme-passthru" => io_uring::setup_notes(true),
        _ => None,
    }
}

/// The errno of the last failed libc call, as a negative completion result.
pub(crate) fn neg_errno() -> i64 {
    -(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) as i64)
}

/// A system call made directly, returning the kernel's result (a count, or a negative errno).
///
/// For the system calls made per I/O: glibc's `pread`, `preadv2` and friends are cancellation
/// points, so each call enables and disables asynchronous thread cancellation around the
/// system call and turns the result into `errno` (about 55 instructions per I/O measured with
/// callgrind, against a handful here); `syscall()`, which the io-uring crate uses for
/// `io_uring_enter`, still shuffles arguments and goes through `errno` (about 14). iolab never
/// cancels threads, and wants the kernel's own result anyway.
///
/// # Safety
/// The arguments must be valid for system call `nr` (pointers to live memory of the right size).
#[inline(always)]
pub(crate) unsafe fn raw_syscall(nr: libc::c_long, a: [usize; 6]) -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        let ret: i64;
        // The x86_64 system call convention: number in rax, arguments in rdi, rsi, rdx, r10,
        // r8, r9; the kernel clobbers rcx and r11 and returns in rax.
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2], in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
        ret
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let r = libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
        if r < 0 {
            neg_errno()
        } else {
            r as i64
        }
    }
}
