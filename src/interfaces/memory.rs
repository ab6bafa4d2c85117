//! The memory a thread's I/O buffers live in, chosen by the interface (`Interface::buffer_memory`).
//!
//! Ordinary heap memory for every interface but one: the user-space NVMe driver without an IOMMU
//! hands the controller physical addresses, and an ordinary page's physical address is not
//! stable. Locking it only keeps it out of swap: compaction migrates locked pages too
//! (vm.compact_unevictable_allowed is 1 by default), and a page moved while the controller holds
//! its old address is a DMA into someone else's memory. A hugetlb page is not moved by
//! compaction, which is why SPDK and DPDK take physical addresses from hugepages only.
use std::io;

/// A hugepage: 2 MiB, the size the kernel's default hugetlb pool has on x86.
pub const HUGEPAGE: usize = 2 << 20;

/// Where an interface needs the hot loop's slot buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BufferMemory {
    /// Heap memory, page aligned.
    Heap,
    /// 2 MiB hugepages, locked and populated: physical addresses that stay put.
    Hugepages,
}

/// Zeroed, page-aligned memory for I/O buffers, owned until dropped.
pub struct AlignedBuf {
    pub ptr: *mut u8,
    len: usize,
    owner: Owner,
}

enum Owner {
    Heap(std::alloc::Layout),
    /// An anonymous hugetlb mapping of `len` bytes (whole hugepages).
    Huge,
}

// SAFETY: the buffer is plain memory this value owns.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    /// Err when the memory is not there (the up-front check cannot see other processes' use):
    /// a failed run, not an abort with settings changed.
    pub fn new(len: usize, memory: BufferMemory) -> Result<AlignedBuf, String> {
        match memory {
            BufferMemory::Heap => Self::heap(len),
            BufferMemory::Hugepages => Self::hugepages(len).map_err(|e| format!("I/O buffers of {len} bytes in 2 MiB hugepages: {e}")),
        }
    }

    fn heap(len: usize) -> Result<AlignedBuf, String> {
        let layout = std::alloc::Layout::from_size_align(len.max(4096), 4096).map_err(|e| format!("I/O buffers of {len} bytes: {e}"))?;
        // SAFETY: layout is non-zero sized. black_box: an optimiser may otherwise treat an
        // allocation it can see is unused as if it succeeded (seen in a release test).
        let ptr = std::hint::black_box(unsafe { std::alloc::alloc_zeroed(layout) });
        if ptr.is_null() {
            return Err(format!("out of memory allocating {len} bytes of I/O buffers: lower --qd, --bs or --threads"));
        }
        Ok(AlignedBuf { ptr, len: layout.size(), owner: Owner::Heap(layout) })
    }

    /// Whole hugepages covering `len` bytes, locked and faulted in now.
    pub fn hugepages(len: usize) -> io::Result<AlignedBuf> {
        let len = len.max(1).next_multiple_of(HUGEPAGE);
        // SAFETY: an anonymous private mapping; MAP_POPULATE faults the hugepages in now.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_HUGETLB | libc::MAP_POPULATE | libc::MAP_LOCKED,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("{} hugepages of 2 MiB: {e} (too few free: see HugePages_Free in /proc/meminfo)", len / HUGEPAGE),
            ));
        }
        let ptr = p as *mut u8;
        // Touch each: MAP_POPULATE of a hugepage the pool cannot give fails only at first use.
        for at in (0..len).step_by(HUGEPAGE) {
            // SAFETY: inside the mapping.
            unsafe { std::ptr::write_volatile(ptr.add(at), 0) };
        }
        Ok(AlignedBuf { ptr, len, owner: Owner::Huge })
    }

    /// Its whole length (at least what was asked for: rounded up to a page or a hugepage).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr owns len bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        match self.owner {
            // SAFETY: allocated with this layout.
            Owner::Heap(layout) => unsafe { std::alloc::dealloc(self.ptr, layout) },
            // SAFETY: one mapping of len bytes.
            Owner::Huge => unsafe {
                libc::munmap(self.ptr as *mut libc::c_void, self.len);
            },
        }
    }
}

/// Whether `len` bytes at `addr` lie in one mapping of 2 MiB hugepages, by /proc/self/smaps.
pub(crate) fn in_hugepages(addr: usize, len: usize) -> io::Result<bool> {
    let smaps = std::fs::read_to_string("/proc/self/smaps")?;
    Ok(kernel_page_size(&smaps, addr, len) == Some(HUGEPAGE as u64))
}

/// The page size (`KernelPageSize`) of the mapping in `smaps` that holds `len` bytes at `addr`.
fn kernel_page_size(smaps: &str, addr: usize, len: usize) -> Option<u64> {
    let mut inside = false;
    for line in smaps.lines() {
        // A mapping starts with "start-end perms offset dev inode [path]".
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((lo, hi)) =
            first.split_once('-').and_then(|(a, b)| Some((usize::from_str_radix(a, 16).ok()?, usize::from_str_radix(b, 16).ok()?)))
        {
            inside = lo <= addr && addr.checked_add(len).is_some_and(|end| end <= hi);
        } else if inside {
            if let Some(kb) = line.strip_prefix("KernelPageSize:") {
                return kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok().map(|k| k << 10);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
7f2a40000000-7f2a40400000 rw-p 00000000 00:10 123                        /anon_hugepage (deleted)
Size:               4096 kB
KernelPageSize:     2048 kB
MMUPageSize:        2048 kB
Locked:             4096 kB
7f2a40400000-7f2a40401000 rw-p 00000000 00:00 0
Size:                  4 kB
KernelPageSize:        4 kB
";

    #[test]
    fn the_page_size_is_that_of_the_mapping_holding_the_whole_range() {
        assert_eq!(kernel_page_size(SMAPS, 0x7f2a40000000, 4 << 20), Some(2 << 20));
        assert_eq!(kernel_page_size(SMAPS, 0x7f2a40200000, 4096), Some(2 << 20));
        assert_eq!(kernel_page_size(SMAPS, 0x55d0c0a01000, 8192), Some(4096));
        // Running past the hugepage mapping into the next one: not one mapping.
        assert_eq!(kernel_page_size(SMAPS, 0x7f2a40300000, 2 << 20), None);
        assert_eq!(kernel_page_size(SMAPS, 0x1000, 4096), None);
    }

    #[test]
    fn heap_buffers_are_not_taken_for_hugepages() {
        let mut b = AlignedBuf::new(64 << 10, BufferMemory::Heap).expect("64 KiB");
        assert_eq!(b.len(), 64 << 10);
        assert!(b.slice().iter().all(|&x| x == 0));
        assert!(!in_hugepages(b.ptr as usize, b.len()).expect("smaps"));
    }

    #[test]
    fn hugepage_buffers_are_hugetlb_pages_where_the_pool_has_them() {
        match AlignedBuf::new(3 << 20, BufferMemory::Hugepages) {
            Ok(mut b) => {
                assert_eq!(b.len(), 4 << 20, "whole hugepages");
                assert_eq!(b.ptr as usize % HUGEPAGE, 0);
                b.slice()[(4 << 20) - 1] = 1;
                assert!(in_hugepages(b.ptr as usize, b.len()).expect("smaps"));
            }
            // The pool is empty on most machines, and a test does not grow it.
            Err(e) => {
                assert!(e.contains("HugePages_Free"), "{e}");
                eprintln!("skipped: no free 2 MiB hugepages here ({e})");
            }
        }
    }
}
