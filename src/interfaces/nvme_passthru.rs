//! nvme-passthru: io_uring `IORING_OP_URING_CMD` on the NVMe generic character device
//! (`/dev/ngXnY`). iolab builds the NVMe Read (0x02) and Write (0x01) commands itself — opcode,
//! namespace, starting LBA, block count, data pointer — and the kernel hands them to the
//! controller's queue as a passthrough request: no filesystem, no submit_bio path, no I/O
//! scheduler, no merging or splitting (the request still takes a blk-mq tag on the namespace's
//! queues, which is why poll queues and interrupts are those of the block device). The software
//! counterpart of "synthesise NVMe commands, bypass the block layer".
//!
//! The ring has 128-byte SQEs (the 80-byte command rides in the SQE) and 32-byte CQEs (the NVMe
//! result dwords); `--complete poll` adds IOPOLL, `--submit sqpoll` SQPOLL. Registered buffers
//! use `IORING_URING_CMD_FIXED` with `buf_index` (Linux 6.1+; before that the plain address),
//! one registered buffer per slot.
//! A CQE's `res` is 0 on success, the NVMe status when the controller failed the command, or a
//! negative errno; [`IoInterface::reap`] turns 0 into the bytes transferred so the hot loop's
//! short-I/O check holds, and a status into [`super::DEVICE_STATUS`] minus the status.
//! The commands, the namespace's identity and its devices are `device::nvme`'s.
use super::io_uring::{check_ring, create_ring_big, create_ring_big_exact, flags_for, missing_opcodes, RingDriver, RingSetup};
use super::target::Files;
use super::{Behaviour, Completion, Interface, InterfaceInfo, IoInterface, Request, Setup, SyncReader, TargetKind, DEVICE_STATUS};
use super::{Complete, IoChoice, Submit};
use super::{Feature, InterfaceError};
#[cfg(test)]
use crate::device::nvme::status_text;
use crate::device::nvme::{generic_devices, read_sync, Namespace, NvmeCmd, NVME_URING_CMD_IO};
use crate::device::{sysinfo::TargetInfo, Target};
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use std::io;
use std::os::fd::RawFd;

/// Can passthrough commands use registered buffers (IORING_URING_CMD_FIXED, Linux 6.1)? Asked
/// of the kernel once, with no NVMe device needed: a command with the flag sent to /dev/null is
/// refused with EINVAL where the flag is unknown (checked as the command is prepared) and with
/// EOPNOTSUPP (/dev/null takes no commands) where it is known.
pub(crate) fn fixed_buffers_supported() -> bool {
    static FIXED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *FIXED.get_or_init(|| ask_fixed_buffers().unwrap_or(false))
}

fn ask_fixed_buffers() -> Option<bool> {
    let (mut ring, _) = create_ring_big(2, 0, None, 0).ok()?;
    let mut buf = vec![0u8; 4096];
    let iov = libc::iovec { iov_base: buf.as_mut_ptr() as *mut libc::c_void, iov_len: buf.len() };
    // SAFETY: buf outlives the ring, which is dropped at the end of this function.
    unsafe { ring.submitter().register_buffers(&[iov]).ok()? };
    let null = std::fs::File::open("/dev/null").ok()?;
    let cmd = opcode::UringCmd80::new(types::Fd(std::os::fd::AsRawFd::as_raw_fd(&null)), NVME_URING_CMD_IO).buf_index(Some(0));
    // SAFETY: the command carries no buffer address; the registered buffer is live.
    unsafe { ring.submission().push(&cmd.build().user_data(1)).ok()? };
    ring.submit_and_wait(1).ok()?;
    let res = ring.completion().next()?.result();
    Some(res != -libc::EINVAL)
}

/// The kernel features passthrough needs, as this kernel has them.
fn kernel_features() -> Vec<Feature> {
    let big = create_ring_big_exact(2, 0, None, 0).ok();
    let uring_cmd = big.as_ref().map(|r| missing_opcodes(r, &[(opcode::UringCmd80::CODE, "", "")]).is_empty());
    // The class exists once the nvme driver of 5.13+ is loaded; with no controller nothing says.
    let generic = if !generic_devices().is_empty() {
        Some(true)
    } else if std::path::Path::new("/sys/class/nvme").exists() {
        Some(std::path::Path::new("/sys/class/nvme-generic").exists())
    } else {
        None
    };
    let f = |name, since, present, detected_by, without| Feature { name, since, until: None, present, detected_by, without };
    vec![
        f(
            "NVMe generic character devices (/dev/ngXnY)",
            "5.13",
            generic,
            "/dev/ng* and /sys/class/nvme-generic",
            "nvme-passthru cannot run",
        ),
        f("IORING_SETUP_SQE128 and CQE32", "5.19", Some(big.is_some()), "a ring set up with the flags", "nvme-passthru cannot run"),
        f("IORING_OP_URING_CMD", "5.19", uring_cmd, "IORING_REGISTER_PROBE", "nvme-passthru cannot run"),
        f(
            "IORING_URING_CMD_FIXED",
            "6.1",
            Some(fixed_buffers_supported()),
            "a fixed-buffer command sent to /dev/null",
            "passthrough commands carry plain buffer addresses, which the kernel maps for every command",
        ),
    ]
}

fn machine_support() -> Result<(), InterfaceError> {
    super::io_uring::machine_support()?;
    // The kernel before the devices: 5.10 to 5.18 have no URING_CMD, and before 5.13 no /dev/ng*.
    let ring = create_ring_big_exact(2, 0, None, 0).map_err(|e| {
        InterfaceError::Unsupported(format!(
            "io_uring_setup with 128-byte SQEs and 32-byte CQEs failed (IORING_SETUP_SQE128 needs Linux 5.19+): {e}"
        ))
    })?;
    let missing = missing_opcodes(&ring, &[(opcode::UringCmd80::CODE, "URING_CMD", "5.19")]);
    if !missing.is_empty() {
        return Err(InterfaceError::Unsupported(format!("this kernel's io_uring lacks {}", missing.join(", "))));
    }
    if generic_devices().is_empty() {
        return Err(InterfaceError::Unsupported("no NVMe generic character devices (/dev/ng*)".into()));
    }
    Ok(())
}

/// What an NVMe command can carry here: whole logical blocks, at most what the controller takes
/// in one command (passthrough commands are never split), data without interleaved metadata.
fn check_namespace(bs: u64, offset: u64, shown: &str, ns: &Namespace, info: &TargetInfo) -> Result<(), InterfaceError> {
    let lba = ns.id.lba_size as u64;
    if ns.id.extended && ns.id.metadata_size > 0 {
        return Err(InterfaceError::Unsupported(format!("{shown} uses LBA format {} with {} bytes of metadata interleaved with each block; nvme-passthru moves data only: use a namespace formatted without metadata",
            ns.id.format, ns.id.metadata_size)));
    }
    if !bs.is_multiple_of(lba) {
        return Err(InterfaceError::Unsupported(format!(
            "block size {} is not a multiple of {shown}'s LBA size {lba}: NVMe commands move whole logical blocks; use a multiple of {lba}",
            bs
        )));
    }
    if !offset.is_multiple_of(lba) {
        return Err(InterfaceError::Unsupported(format!("--offset {} is not a multiple of {shown}'s LBA size {lba}", offset)));
    }
    if let Some(d) = &info.device {
        let q = std::path::Path::new("/sys/block").join(d).join("queue");
        let read = |f: &str| std::fs::read_to_string(q.join(f)).ok().and_then(|v| v.trim().parse::<u64>().ok());
        let page = 4096u64;
        let max = match (read("max_hw_sectors_kb"), read("max_segments")) {
            (Some(kb), Some(segs)) => Some((kb * 1024).min(segs * page)),
            (Some(kb), None) => Some(kb * 1024),
            _ => None,
        };
        if let Some(max) = max.filter(|m| bs > *m) {
            return Err(InterfaceError::Unsupported(format!("--bs {} exceeds the {} bytes one NVMe command can carry to {shown} (queue/max_hw_sectors_kb, max_segments of {d}); passthrough commands are not split: use --bs {} or less",
                bs, max, max)));
        }
    }
    Ok(())
}

// ------------------------------------------------------------------ the interface

pub struct Passthru {
    ring: IoUring<squeue::Entry128, cqueue::Entry32>,
    fixed_files: bool,
    fixed_bufs: bool,
    fds: Vec<RawFd>,
    /// (namespace id, LBA shift) per file.
    ns: Vec<(u32, u32)>,
    driver: RingDriver,
}

impl IoInterface for Passthru {
    type Handle = ();

    fn open(setup: &Setup, _: &()) -> io::Result<Self> {
        let ns = setup
            .fds
            .iter()
            .map(|&fd| Namespace::of_fd(fd).map(|n| (n.nsid, n.id.lba_shift)).map_err(io::Error::other))
            .collect::<io::Result<Vec<_>>>()?;
        let opts = setup.ring();
        let (ring, _) = create_ring_big(setup.qd, flags_for(setup.submit, setup.complete), opts.sq_cpu, opts.sq_idle_ms)?;
        if opts.register_files {
            ring.submitter().register_files(setup.fds)?;
        }
        let fixed_bufs = opts.register_buffers && fixed_buffers_supported();
        if fixed_bufs {
            // One registered buffer per slot, used with buf_index = tag. (One buffer over the
            // whole region, as io_uring does, fails on kernels before 6.11: importing at an offset
            // keeps the segment count of the rest of the region, and once that exceeds the queue's
            // max_segments the passthrough mapping refuses the command with EINVAL.)
            let iov: Vec<libc::iovec> = (0..setup.qd as usize)
                // SAFETY: slot i lies inside the region of qd * bs bytes.
                .map(|i| libc::iovec {
                    iov_base: unsafe { setup.buffers.add(i * setup.bs as usize) } as *mut libc::c_void,
                    iov_len: setup.bs as usize,
                })
                .collect();
            // SAFETY: the buffer region outlives the ring (owned by the hot loop's caller).
            unsafe { ring.submitter().register_buffers(&iov)? };
        }
        Ok(Passthru {
            ring,
            fixed_files: opts.register_files,
            fixed_bufs,
            fds: setup.fds.to_vec(),
            ns,
            driver: RingDriver::new(setup.submit, setup.complete, opts.iowait),
        })
    }

    #[inline]
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize> {
        let (fds, ns, fixed_bufs, fixed_files) = (&self.fds, &self.ns, self.fixed_bufs, self.fixed_files);
        self.driver.push(&mut self.ring, reqs, |r| {
            let (nsid, shift) = ns[r.file as usize];
            let cmd = NvmeCmd::rw(r.write, nsid, shift, r.offset, r.len, r.buf as u64).to_bytes();
            let op = if fixed_files {
                opcode::UringCmd80::new(types::Fixed(r.file), NVME_URING_CMD_IO)
            } else {
                opcode::UringCmd80::new(types::Fd(fds[r.file as usize]), NVME_URING_CMD_IO)
            };
            let op = op.cmd(cmd).buf_index(fixed_bufs.then_some(r.tag as u16));
            // The length rides in the user data: success completes with res 0, not a byte count.
            op.build().user_data(r.tag as u64 | (r.len as u64) << 32)
        })
    }

    #[inline]
    fn reap(&mut self, min: usize, out: &mut [Completion]) -> io::Result<usize> {
        self.driver.reap(&mut self.ring, min, out, |c| {
            let ud = c.user_data();
            Completion { tag: ud as u32, result: completion_result(c.result(), (ud >> 32) as u32) }
        })
    }
}

/// A passthrough CQE's `res` as a completion result: 0 (success) is the bytes asked for, a
/// positive NVMe status is [`DEVICE_STATUS`] minus it, a negative errno stays.
#[inline]
pub(crate) fn completion_result(res: i32, len: u32) -> i64 {
    match res {
        0 => len as i64,
        r if r < 0 => r as i64,
        status => DEVICE_STATUS - status as i64,
    }
}

impl Interface for Passthru {
    type Target = Files;

    const INFO: &'static InterfaceInfo = &InterfaceInfo {
        name: "nvme-passthru",
        note: None,
        execution: "kernel",
        behaviour: Behaviour::Async,
        submits: &[Submit::Syscall, Submit::Sqpoll],
        completes: &[Complete::Irq, Complete::Poll],
        how: "io_uring URING_CMD on /dev/ngXnY: iolab builds the NVMe read/write commands (no submit_bio path: no splitting, merging or scheduler); poll = IOPOLL; registered buffers 6.1+",
        async_needs_direct: false,
        diskless: false,
        targets: &[TargetKind::NvmeGeneric],
        polls_device_queues: true,
        bypasses_kernel: false,
    };

    fn check_job(io: &IoChoice) -> Result<(), String> {
        if !io.direct {
            return Err("nvme-passthru never goes through the page cache (it sends NVMe commands to the namespace): drop --buffered".into());
        }
        Ok(())
    }
    fn machine_support() -> Result<(), InterfaceError> {
        machine_support()
    }
    fn machine_notes() -> Option<String> {
        super::io_uring::setup_notes(true)
    }
    fn kernel_features() -> Vec<Feature> {
        kernel_features()
    }
    fn check_kernel(io: &IoChoice) -> Result<Option<RingSetup>, InterfaceError> {
        check_ring(io, true)
    }
    fn check_target(_io: &IoChoice, bs: u64, offset: u64, target: &Target) -> Result<(), InterfaceError> {
        match &target.namespace {
            Some(ns) => check_namespace(bs, offset, &target.path.display().to_string(), ns, &target.info),
            None => Ok(()),
        }
    }
    /// The character device has no read(2): synchronous NVMe Reads of the namespace instead.
    fn sync_reader(_target: &Files, fd: RawFd) -> Result<SyncReader, String> {
        let ns = Namespace::of_fd(fd).map_err(|e| format!("verify read-back cannot address the namespace: {e}"))?;
        Ok(Box::new(move |fd, buf, offset| read_sync(fd, &ns, buf.as_mut_ptr(), buf.len() as u32, offset)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_and_statuses() {
        assert_eq!(completion_result(0, 4096), 4096);
        assert_eq!(completion_result(-libc::EINVAL, 4096), -(libc::EINVAL as i64));
        let r = completion_result(0x4080, 4096);
        assert_eq!(DEVICE_STATUS - r, 0x4080);
        assert_eq!(super::super::errno_of(r), None);
        let t = super::super::error_text(r);
        assert!(t.contains("LBA out of range") && t.contains("0x4080") && t.contains("do not retry"), "{t}");
        assert!(status_text(0x281).contains("unrecovered read error"));
        assert!(status_text(0x1ff).contains("command specific"));
    }
}
