//! The server's storage side: one connection's I/O through one of iolab's interfaces, the same
//! `IoInterface` a run's worker opens (its `Setup`, its slot buffers, `submit` and `reap`), over
//! the target part the server acquired once (`interfaces::Acquired`). An NBD request is cut into
//! chunks of at most one slot; an asynchronous interface has up to `slots` of them in flight.
use crate::interfaces::memory::AlignedBuf;
use crate::interfaces::{self, Completion, Interface, IoChoice, OpenTarget, Request, Setup};
use std::os::fd::RawFd;

/// A failed operation: the errno the client is told and what happened, in words.
#[derive(Debug)]
pub struct IoFailure {
    pub errno: i32,
    pub what: String,
}

impl IoFailure {
    fn new(errno: i32, what: impl Into<String>) -> IoFailure {
        IoFailure { errno, what: what.into() }
    }
}

/// What a connection does with the export: offsets are the export's (0 is the start of the
/// target's range).
pub trait Backend {
    fn read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), IoFailure>;
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), IoFailure>;
    /// Makes every completed write durable.
    fn flush(&mut self) -> Result<(), IoFailure>;
    /// Discards a range (advisory: a target that cannot discard ignores it).
    fn trim(&mut self, offset: u64, len: u64) -> Result<(), IoFailure>;
}

/// Bytes per slot: the largest I/O one request to the interface carries.
pub const CHUNK: u32 = 128 << 10;

/// Requests in flight per connection for an asynchronous interface (a synchronous one has one).
pub const ASYNC_SLOTS: u32 = 8;

/// The slots an interface gets per connection.
pub(crate) fn slots_for<T: Interface>() -> u32 {
    match T::INFO.behaviour {
        interfaces::Behaviour::Sync => 1,
        interfaces::Behaviour::Async => ASYNC_SLOTS,
    }
}

/// Whether the kernel holds the target (a descriptor to flush and discard through), and how.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernel {
    File,
    BlockDevice,
    /// No descriptor: the user-space driver has the controller.
    None,
}

impl Kernel {
    pub fn of(fd: RawFd) -> Kernel {
        if fd < 0 {
            return Kernel::None;
        }
        // SAFETY: st is a valid out-pointer; fd is open for the server's life.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } == 0 && st.st_mode & libc::S_IFMT == libc::S_IFBLK {
            Kernel::BlockDevice
        } else {
            Kernel::File
        }
    }
}

/// One connection's I/O through interface `T`. Fields drop in order: the interface closes
/// before the buffers it was given are freed.
pub struct Through<T: Interface> {
    io: T,
    bufs: AlignedBuf,
    slots: u32,
    fd: RawFd,
    kernel: Kernel,
    range_start: u64,
    /// For each slot, the chunk it carries in the request under way.
    slot_chunk: Vec<usize>,
    reqs: Vec<Request>,
    done: Vec<Completion>,
}

impl<T: Interface> Through<T> {
    /// Opens the interface for one connection over the acquired target.
    pub fn open(io: &IoChoice, target: &OpenTarget, handle: &T::Handle) -> Result<Through<T>, super::ServeError> {
        let slots = slots_for::<T>();
        let bufs =
            AlignedBuf::new(CHUNK as usize * slots as usize, T::buffer_memory(io)).map_err(|e| super::ServeError::Failed(e.to_string()))?;
        // The user-space driver's one namespace is a descriptor-less target (-1), as in a run.
        let fds = [target.fd];
        let setup = Setup {
            fds: &fds,
            buffers: bufs.ptr,
            buffers_len: bufs.len(),
            bs: CHUNK,
            qd: slots,
            submit: io.submit,
            complete: io.complete,
            batch_submit: 1,
            io,
            sq_cpu: None,
        };
        let opened = T::open(&setup, handle).map_err(|e| super::ServeError::Failed(format!("{}: setup failed: {e}", T::INFO.name)))?;
        Ok(Through {
            io: opened,
            bufs,
            slots,
            fd: target.fd,
            kernel: Kernel::of(target.fd),
            range_start: target.range_start,
            slot_chunk: vec![0; slots as usize],
            reqs: Vec::with_capacity(slots as usize),
            done: vec![Completion::default(); slots as usize],
        })
    }

    fn slot_ptr(&self, slot: u32) -> *mut u8 {
        // SAFETY: slot < slots, and the buffers hold slots chunks.
        unsafe { self.bufs.ptr.add(slot as usize * CHUNK as usize) }
    }

    /// Moves `len` bytes at export offset `offset` between `data` and the target, chunk by chunk,
    /// up to `slots` chunks in flight. A failure still waits for every chunk in flight.
    fn transfer(&mut self, write: bool, offset: u64, data: *mut u8, len: usize) -> Result<(), IoFailure> {
        let chunks = len.div_ceil(CHUNK as usize);
        let chunk_len = |c: usize| (len - c * CHUNK as usize).min(CHUNK as usize);
        let mut free: Vec<u32> = (0..self.slots).rev().collect();
        let (mut next, mut done, mut inflight) = (0usize, 0usize, 0usize);
        let mut failed: Option<IoFailure> = None;
        while done < chunks {
            self.reqs.clear();
            while failed.is_none() && next + self.reqs.len() < chunks && !free.is_empty() {
                let c = next + self.reqs.len();
                let slot = free.pop().expect("a free slot");
                let n = chunk_len(c);
                if write {
                    // SAFETY: data holds len bytes; the slot holds CHUNK bytes, n <= CHUNK.
                    unsafe { std::ptr::copy_nonoverlapping(data.add(c * CHUNK as usize), self.slot_ptr(slot), n) };
                }
                self.slot_chunk[slot as usize] = c;
                self.reqs.push(Request {
                    tag: slot,
                    write,
                    file: 0,
                    offset: self.range_start + offset + (c * CHUNK as usize) as u64,
                    len: n as u32,
                    buf: self.slot_ptr(slot),
                });
            }
            if !self.reqs.is_empty() {
                match self.io.submit(&self.reqs) {
                    Ok(accepted) => {
                        // What was not accepted goes back to the free slots, to be pushed again.
                        for r in &self.reqs[accepted..] {
                            free.push(r.tag);
                        }
                        next += accepted;
                        inflight += accepted;
                    }
                    Err(e) => {
                        for r in &self.reqs {
                            free.push(r.tag);
                        }
                        failed.get_or_insert(IoFailure::new(e.raw_os_error().unwrap_or(libc::EIO), format!("submit failed: {e}")));
                    }
                }
            }
            if inflight == 0 {
                // Nothing in flight and nothing taken: stop rather than spin.
                failed.get_or_insert(IoFailure::new(libc::EIO, format!("{} took no request", T::INFO.name)));
                break;
            }
            let got = self
                .io
                .reap(1, &mut self.done)
                .map_err(|e| IoFailure::new(e.raw_os_error().unwrap_or(libc::EIO), format!("reap failed: {e}")))?;
            for i in 0..got {
                let Completion { tag, result } = self.done[i];
                let c = self.slot_chunk[tag as usize];
                let n = chunk_len(c);
                if result != n as i64 && failed.is_none() {
                    let at = offset + (c * CHUNK as usize) as u64;
                    let dir = if write { "write" } else { "read" };
                    failed = Some(match interfaces::errno_of(result) {
                        Some(errno) => IoFailure::new(errno, format!("{dir} of {n} bytes at {at}: {}", interfaces::error_text(result))),
                        None if result < 0 => {
                            IoFailure::new(libc::EIO, format!("{dir} of {n} bytes at {at}: {}", interfaces::error_text(result)))
                        }
                        None => IoFailure::new(libc::EIO, format!("{dir} of {n} bytes at {at} moved {result} bytes")),
                    });
                } else if !write {
                    // SAFETY: out holds len bytes; the slot holds n of them.
                    unsafe { std::ptr::copy_nonoverlapping(self.slot_ptr(tag), data.add(c * CHUNK as usize), n) };
                }
                free.push(tag);
                inflight -= 1;
                done += 1;
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

impl<T: Interface> Backend for Through<T> {
    fn read(&mut self, offset: u64, out: &mut [u8]) -> Result<(), IoFailure> {
        self.transfer(false, offset, out.as_mut_ptr(), out.len())
    }

    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), IoFailure> {
        // Only read through the pointer: chunks are copied out of data into the slots.
        self.transfer(true, offset, data.as_ptr() as *mut u8, data.len())
    }

    fn flush(&mut self) -> Result<(), IoFailure> {
        if self.kernel == Kernel::None {
            // The user-space driver: an NVMe Flush on this connection's queue pair.
            return match self.io.flush() {
                Some(r) => r.map_err(|e| IoFailure::new(e.raw_os_error().unwrap_or(libc::EIO), e.to_string())),
                None => Err(IoFailure::new(libc::EOPNOTSUPP, format!("{} sends no flush", T::INFO.name))),
            };
        }
        // On a block device this also flushes the device's volatile cache.
        // SAFETY: fd is open for the server's life.
        if unsafe { libc::fdatasync(self.fd) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(IoFailure::new(e.raw_os_error().unwrap_or(libc::EIO), format!("fdatasync: {e}")));
        }
        Ok(())
    }

    fn trim(&mut self, offset: u64, len: u64) -> Result<(), IoFailure> {
        let start = self.range_start + offset;
        // SAFETY: fd is open; BLKDISCARD reads two u64s.
        let r = match self.kernel {
            Kernel::BlockDevice => {
                const BLKDISCARD: libc::c_ulong = 0x1277;
                let range = [start, len];
                unsafe { libc::ioctl(self.fd, BLKDISCARD, range.as_ptr()) }
            }
            Kernel::File => unsafe {
                libc::fallocate(self.fd, libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, start as i64, len as i64)
            },
            Kernel::None => {
                // The user-space driver: NVMe Dataset Management (Deallocate) of the whole blocks.
                return match self.io.deallocate(start, len) {
                    Some(r) => r.map_err(|e| {
                        IoFailure::new(e.raw_os_error().unwrap_or(libc::EIO), format!("discard of {len} bytes at {offset}: {e}"))
                    }),
                    None => Ok(()),
                };
            }
        };
        if r != 0 {
            let e = std::io::Error::last_os_error();
            // A trim is a hint: a target that cannot discard has done what was asked.
            if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::ENOTTY)) {
                return Ok(());
            }
            return Err(IoFailure::new(e.raw_os_error().unwrap_or(libc::EIO), format!("discard of {len} bytes at {offset}: {e}")));
        }
        Ok(())
    }
}
