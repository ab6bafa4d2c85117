//! A `perf_event_open` event and its ring buffer, drained by the coordinating thread: one home
//! for the mmap ABI that `--profile layers` (cpu-clock samples) and `--profile stages`
//! (tracepoint records) both read.
use perf_event_open_sys as sys;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use sys::bindings as b;

/// Open one event (`pid` -1 with a CPU: everything on that CPU). Disabled until enabled.
pub(crate) fn open_event(attr: &mut b::perf_event_attr, pid: i32, cpu: i32) -> std::io::Result<OwnedFd> {
    open_in_group(attr, pid, cpu, None)
}

/// Open an event as a member of `leader`'s group (None: a leader of its own). A member is left
/// enabled, so it counts exactly while its leader does (enabling the leader alone starts both).
pub(crate) fn open_in_group(attr: &mut b::perf_event_attr, pid: i32, cpu: i32, leader: Option<&OwnedFd>) -> std::io::Result<OwnedFd> {
    attr.size = std::mem::size_of::<b::perf_event_attr>() as u32;
    attr.set_disabled(leader.is_none() as u64);
    let group = leader.map_or(-1, |l| l.as_raw_fd());
    // SAFETY: attr is filled by the caller; the kernel validates the rest.
    let fd = unsafe { sys::perf_event_open(attr, pid, cpu, group, b::PERF_FLAG_FD_CLOEXEC as libc::c_ulong) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a new descriptor this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Start or stop counting an event.
pub fn enable(fd: &OwnedFd, on: bool) {
    // SAFETY: fd is a perf event.
    unsafe {
        if on {
            sys::ioctls::ENABLE(fd.as_raw_fd(), 0)
        } else {
            sys::ioctls::DISABLE(fd.as_raw_fd(), 0)
        }
    };
}

/// One event's ring buffer (other events on the same CPU may write into it: `redirect`).
pub struct Ring {
    fd: OwnedFd,
    base: *mut u8,
    len: usize,
}

impl Ring {
    /// Map `pages` data pages (a power of two) plus the header page for an opened event.
    pub fn map(fd: OwnedFd, pages: usize) -> std::io::Result<Ring> {
        let len = (pages + 1) * 4096;
        // SAFETY: mapping the event's ring buffer as the perf_event_open(2) ABI describes.
        let base =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Ring { fd, base: base as *mut u8, len })
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Make another event on the same CPU write its records into this ring.
    pub(crate) fn redirect(&self, other: &OwnedFd) -> std::io::Result<()> {
        // SAFETY: both are perf events; the kernel checks they may share a ring.
        if unsafe { sys::ioctls::SET_OUTPUT(other.as_raw_fd(), self.fd.as_raw_fd()) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Append the records the kernel wrote since the last drain to `out` (unwrapped).
    pub fn drain(&self, out: &mut Vec<u8>) {
        // SAFETY: the first page is the perf_event_mmap_page header, mapped for the ring's life.
        let header = unsafe { &mut *(self.base as *mut b::perf_event_mmap_page) };
        let head = unsafe { std::ptr::read_volatile(&header.data_head) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let tail = header.data_tail;
        let (offset, size) = (header.data_offset as usize, header.data_size as usize);
        if head == tail || size == 0 {
            return;
        }
        // SAFETY: [offset, offset + size) is the data area of the mapping.
        let area = unsafe { std::slice::from_raw_parts(self.base.add(offset), size) };
        out.reserve((head - tail) as usize);
        let mut pos = tail;
        while pos < head {
            let at = (pos % size as u64) as usize;
            let n = ((head - pos) as usize).min(size - at);
            out.extend_from_slice(&area[at..at + n]);
            pos += n as u64;
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        // SAFETY: as above; telling the kernel the data up to head was read.
        unsafe { std::ptr::write_volatile(&mut header.data_tail, head) };
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: mapped in `map`; the descriptor closes with its OwnedFd.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// Walk the records of drained ring data: (type, whole record) for each.
pub fn records(mut data: &[u8]) -> impl Iterator<Item = (u32, &[u8])> {
    std::iter::from_fn(move || {
        if data.len() < 8 {
            return None;
        }
        let kind = u32::from_ne_bytes(data[0..4].try_into().unwrap());
        let size = u16::from_ne_bytes([data[6], data[7]]) as usize;
        if size < 8 || size > data.len() {
            return None;
        }
        let (rec, rest) = data.split_at(size);
        data = rest;
        Some((kind, rec))
    })
}

/// `IOLAB_STAGES_DUMP=DIR` / `IOLAB_PROFILE_DUMP=DIR`: where a profiler copies what it read
/// (each ring's raw bytes, and what naming them needs), so a kernel's records can become a test
/// fixture. None when the variable is unset or empty.
pub(crate) fn dump_dir(var: &str) -> Option<std::path::PathBuf> {
    std::env::var_os(var).filter(|v| !v.is_empty()).map(Into::into)
}

/// Append one drain of CPU `cpu`'s ring to `DIR/cpuN.raw`, byte for byte.
pub(crate) fn dump_raw(dir: &std::path::Path, cpu: usize, data: &[u8]) {
    use std::io::Write;
    let _ = std::fs::create_dir_all(dir);
    let file = std::fs::OpenOptions::new().create(true).append(true).open(dir.join(format!("cpu{cpu}.raw")));
    if let Ok(mut f) = file {
        let _ = f.write_all(data);
    }
}
