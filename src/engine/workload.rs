//! Workload generation: a fast seeded RNG and the per-thread stream of (target, offset, direction).
//! Random workloads draw block-aligned offsets uniformly over the thread's range; sequential
//! workloads split each target's range between threads and wrap within their share.

pub use crate::rng::Rng;

/// One thread's share of one target, in blocks of `bs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Byte offset of block 0.
    pub start: u64,
    pub blocks: u64,
}

/// The share of a target's usable range that thread `thread` of `threads` works on.
/// Random workloads share the whole range; sequential ones split it into contiguous parts.
pub fn region_for(range_start: u64, range_len: u64, bs: u64, random: bool, thread: u32, threads: u32) -> Region {
    let blocks = range_len / bs;
    if random || threads <= 1 {
        return Region { start: range_start, blocks };
    }
    let per = blocks / threads as u64;
    let extra = blocks % threads as u64;
    let t = thread as u64;
    let first = t * per + t.min(extra);
    let count = per + u64::from(t < extra);
    Region { start: range_start + first * bs, blocks: count }
}

/// The next I/O a thread issues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextIo {
    pub file: u32,
    pub offset: u64,
    pub write: bool,
}

/// Per-thread generator of the I/O stream.
pub struct Stream {
    rng: Rng,
    regions: Vec<Region>,
    cursors: Vec<u64>,
    bs: u64,
    random: bool,
    write_pct: u64,
    next_file: u32,
}

impl Stream {
    pub fn new(rng: Rng, regions: Vec<Region>, bs: u64, random: bool, write_pct: u8) -> Stream {
        let cursors = vec![0; regions.len()];
        Stream { rng, regions, cursors, bs, random, write_pct: write_pct as u64, next_file: 0 }
    }

    #[inline(always)]
    pub(crate) fn next_io(&mut self) -> NextIo {
        // Targets are used round-robin so each sees an equal share.
        let file = self.next_file;
        self.next_file += 1;
        if self.next_file as usize == self.regions.len() {
            self.next_file = 0;
        }
        let r = self.regions[file as usize];
        let block = if self.random {
            self.rng.below(r.blocks)
        } else {
            let c = &mut self.cursors[file as usize];
            let b = *c;
            *c = if b + 1 == r.blocks { 0 } else { b + 1 };
            b
        };
        let write = match self.write_pct {
            0 => false,
            100 => true,
            p => self.rng.below(100) < p,
        };
        NextIo { file, offset: r.start + block * self.bs, write }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_streams_differ() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let mut t0 = Rng::for_thread(42, 0);
        let mut t1 = Rng::for_thread(42, 1);
        assert_ne!(t0.next_u64(), t1.next_u64());
    }

    #[test]
    fn below_is_uniform_enough() {
        let mut r = Rng::new(7);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[r.below(10) as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "bucket count {c}");
        }
    }

    #[test]
    fn sequential_split_covers_range_once() {
        let bs = 4096;
        let len = 103 * bs;
        let mut covered = vec![0u32; 103];
        let mut prev_end = 1 << 20;
        for t in 0..4 {
            let r = region_for(1 << 20, len, bs, false, t, 4);
            assert_eq!(r.start, prev_end, "regions are contiguous");
            prev_end = r.start + r.blocks * bs;
            for b in 0..r.blocks {
                covered[((r.start - (1 << 20)) / bs + b) as usize] += 1;
            }
        }
        assert!(covered.iter().all(|&c| c == 1));
    }

    #[test]
    fn sequential_stream_wraps_in_its_region() {
        let r = Region { start: 8192, blocks: 3 };
        let mut s = Stream::new(Rng::new(1), vec![r], 4096, false, 0);
        let offs: Vec<u64> = (0..7).map(|_| s.next_io().offset).collect();
        assert_eq!(offs, vec![8192, 12288, 16384, 8192, 12288, 16384, 8192]);
    }

    #[test]
    fn random_offsets_are_aligned_and_in_range() {
        let r = Region { start: 4096, blocks: 1000 };
        let mut s = Stream::new(Rng::new(3), vec![r], 512, true, 0);
        for _ in 0..10_000 {
            let io = s.next_io();
            assert_eq!(io.offset % 512, 0);
            assert!(io.offset >= 4096 && io.offset < 4096 + 1000 * 512);
            assert!(!io.write);
        }
    }

    #[test]
    fn write_mix_matches_percentage() {
        let r = Region { start: 0, blocks: 1 << 20 };
        let mut s = Stream::new(Rng::new(9), vec![r], 4096, true, 30);
        let writes = (0..100_000).filter(|_| s.next_io().write).count();
        assert!((29_000..31_000).contains(&writes), "writes {writes}");
    }

    #[test]
    fn targets_round_robin() {
        let regs = vec![Region { start: 0, blocks: 10 }, Region { start: 0, blocks: 10 }];
        let mut s = Stream::new(Rng::new(1), regs, 4096, true, 100);
        let files: Vec<u32> = (0..4).map(|_| s.next_io().file).collect();
        assert_eq!(files, vec![0, 1, 0, 1]);
    }
}
