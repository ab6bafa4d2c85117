//! Workload generation: a fast seeded RNG and the per-thread stream of (target, offset, direction,
//! length). Random workloads draw block-aligned offsets over the thread's range; sequential
//! workloads split each target's range between threads and wrap within their share.
//!
//! Two sources, chosen once per run so the hot loop is compiled for each (see [`Source`]):
//! [`Stream`], one block size at uniform or sequential offsets (the default workload, whose
//! per-I/O instructions are those it always had), and [`MixStream`], for block size mixes
//! (fio's bssplit, bsrange) and skewed offsets (fio's random_distribution), generated as fio's
//! `lib/zipf.c`, `lib/gauss.c` and `io_u.c` do.

use crate::plan::{BsMix, Distribution, Workload};
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
    /// Bytes to transfer (read by the hot loop only where [`Source::FIXED_LEN`] is false).
    pub len: u32,
}

/// What the hot loop draws its I/Os from; it is compiled once per source, so the default
/// workload pays nothing for the others.
pub trait Source {
    /// Every I/O has the job's block size: the loop takes the length from its plan and the
    /// recorder derives bytes from the count.
    const FIXED_LEN: bool;
    fn next_io(&mut self) -> NextIo;
}

impl Source for Stream {
    const FIXED_LEN: bool = true;
    #[inline(always)]
    fn next_io(&mut self) -> NextIo {
        Stream::next_io(self)
    }
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
        // Targets are used round-robin so each sees an equal share; with one (the common case)
        // there is no turn to keep.
        let (file, r) = if let [r] = *self.regions { (0, r) } else { self.next_region() };
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
        NextIo { file, offset: r.start + block * self.bs, write, len: self.bs as u32 }
    }
}

impl Stream {
    /// The next target's turn, of several.
    #[inline(always)]
    fn next_region(&mut self) -> (u32, Region) {
        let file = self.next_file;
        self.next_file += 1;
        if self.next_file as usize == self.regions.len() {
            self.next_file = 0;
        }
        (file, self.regions[file as usize])
    }
}

/// fio's `__hash_u64`: spreads the hot blocks of a skewed distribution over the range.
const GOLDEN_RATIO_64: u64 = 0x61C8_8646_80B5_83EB;

/// A uniform draw in [0, 1), as fio's `__rand() / FRAND_MAX`.
#[inline]
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// fio's zipf (`lib/zipf.c`, Gray et al.'s quick method): ζ(n) over at most 10 M terms.
#[derive(Clone, Debug)]
struct Zipf {
    n: u64,
    theta: f64,
    zetan: f64,
    alpha: f64,
    eta: f64,
}

impl Zipf {
    fn new(n: u64, theta: f64) -> Zipf {
        const ZIPF_MAX_GEN: u64 = 10_000_000;
        let zetan: f64 = (0..n.min(ZIPF_MAX_GEN)).map(|i| (1.0 / (i + 1) as f64).powf(theta)).sum();
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf { n, theta, zetan, alpha, eta }
    }

    /// The rank drawn, from 0 (the hottest).
    fn rank(&self, u: f64) -> u64 {
        let z = u * self.zetan;
        let val = if z < 1.0 {
            1
        } else if z < 1.0 + 0.5f64.powf(self.theta) {
            2
        } else {
            1 + (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64
        };
        val - 1
    }
}

/// Where in its region a random I/O of a skewed distribution goes: block indices in [0, n).
#[derive(Clone, Debug)]
enum Skew {
    Uniform,
    Zipf {
        z: Zipf,
        off: u64,
    },
    Pareto {
        pow: f64,
        off: u64,
    },
    /// fio's normal: the mean of 12 uniform draws, widened by `stddev` blocks.
    Normal {
        stddev: u64,
        off: u64,
    },
    /// For each percent of accesses (0..100), the zone it goes to: (first block, blocks).
    Zoned(Box<[(u64, u64); 100]>),
}

impl Skew {
    /// The generator for `d` over `n` blocks (the positions an I/O fits at), `unit` bytes
    /// each; fio's offsets (`rand_off`) are drawn from `rng` unless a center is given.
    fn new(d: &Distribution, n: u64, unit: u64, rng: &mut Rng) -> Result<Skew, String> {
        let off = |rng: &mut Rng, center: &Option<f64>| match center {
            Some(c) => (n as f64 * c) as u64,
            None => rng.next_u64(),
        };
        Ok(match d {
            Distribution::Random => Skew::Uniform,
            Distribution::Zipf { theta, center } => Skew::Zipf { z: Zipf::new(n, *theta), off: off(rng, center) },
            Distribution::Pareto { h, center } => Skew::Pareto { pow: h.ln() / (1.0 - h).ln(), off: off(rng, center) },
            Distribution::Normal { dev, center } => {
                let stddev = if *dev == 0.0 { 0 } else { ((n as f64 * dev / 100.0).ceil() as u64).min(n / 2) };
                let off = center.map_or(0, |c| (n as f64 * (c - 0.5)) as i64 as u64);
                Skew::Normal { stddev, off }
            }
            Distribution::Zoned(zones) => {
                let z: Vec<(u32, u64, u64)> = {
                    let (mut at, mut out) = (0u64, Vec::new());
                    for &(access, pct) in zones {
                        let (first, end) = (n * at / 100, n * (at + pct as u64) / 100);
                        out.push((access, first, end));
                        at += pct as u64;
                    }
                    out
                };
                Skew::Zoned(zone_table(&z, n))
            }
            Distribution::ZonedAbs(zones) => {
                let (mut at, mut z) = (0u64, Vec::new());
                for &(access, bytes) in zones {
                    let (first, end) = (at / unit, (at + bytes) / unit);
                    if end > n {
                        return Err(format!(
                            "--distribution {d}: its zones reach {} bytes into a range where I/Os fit in the first {}: give smaller zones or a larger --size",
                            at + bytes,
                            n * unit
                        ));
                    }
                    z.push((access, first, end));
                    at += bytes;
                }
                Skew::Zoned(zone_table(&z, n))
            }
        })
    }

    #[inline]
    fn block(&self, rng: &mut Rng, n: u64) -> u64 {
        match self {
            Skew::Uniform => rng.below(n),
            Skew::Zipf { z, off } => z.rank(unit(rng)).wrapping_mul(GOLDEN_RATIO_64).wrapping_add(*off) % n,
            Skew::Pareto { pow, off } => {
                let k = ((n - 1) as f64 * unit(rng).powf(*pow)) as u64;
                k.wrapping_mul(GOLDEN_RATIO_64).wrapping_add(*off) % n
            }
            Skew::Normal { stddev, off } => {
                const GAUSS_ITERS: u64 = 12;
                let mut sum: u64 = (0..GAUSS_ITERS).map(|_| rng.next_u64() % (n + 1)).sum();
                sum = sum.div_ceil(GAUSS_ITERS);
                if *stddev > 0 {
                    let mut dev = (*stddev as f64 * unit(rng)) as i64 - (*stddev / 2) as i64;
                    while dev != 0 && (sum as i64).wrapping_add(dev) as u64 >= n {
                        dev /= 2;
                    }
                    sum = (sum as i64 + dev) as u64;
                }
                sum.wrapping_mul(GOLDEN_RATIO_64).wrapping_add(*off) % n
            }
            Skew::Zoned(table) => {
                let (first, blocks) = table[rng.below(100) as usize];
                first + rng.below(blocks)
            }
        }
    }
}

/// The percent-of-accesses table of zones (access %, first block, end block): zone sizes of
/// no block take one block where there is one.
fn zone_table(zones: &[(u32, u64, u64)], n: u64) -> Box<[(u64, u64); 100]> {
    let mut table = Box::new([(0u64, 1u64); 100]);
    let mut v = 0usize;
    for &(access, first, end) in zones {
        let first = first.min(n - 1);
        let blocks = end.saturating_sub(first).max(1);
        for slot in table.iter_mut().skip(v).take(access as usize) {
            *slot = (first, blocks);
        }
        v += access as usize;
    }
    table
}

/// Per-I/O lengths of a block size mix.
#[derive(Clone, Debug)]
enum Lengths {
    Fixed(u64),
    /// Cumulative percentages and their sizes: a draw below 100 takes the first size whose
    /// cumulative share is above it.
    Split {
        cum: Vec<u64>,
        sizes: Vec<u64>,
    },
    /// fio's bsrange draw: min + ⌊u·max⌋, down to a multiple of min, at most max.
    Range {
        min: u64,
        max: u64,
    },
}

impl Lengths {
    fn of(w: &Workload) -> Lengths {
        match &w.bssplit {
            BsMix::One => Lengths::Fixed(w.bs),
            BsMix::Split(s) => {
                let mut at = 0;
                let cum = s.iter().map(|(_, p)| {
                    at += *p as u64;
                    at
                });
                Lengths::Split { cum: cum.collect(), sizes: s.iter().map(|p| p.0).collect() }
            }
            BsMix::Range(min, max) => Lengths::Range { min: *min, max: *max },
        }
    }

    #[inline]
    fn draw(&self, rng: &mut Rng) -> u64 {
        match self {
            Lengths::Fixed(bs) => *bs,
            Lengths::Split { cum, sizes } => {
                let r = rng.below(100);
                let i = cum.iter().position(|&c| r < c).unwrap_or(sizes.len() - 1);
                sizes[i]
            }
            Lengths::Range { min, max } => {
                let l = min + rng.below(*max);
                (l - l % min).min(*max)
            }
        }
    }
}

/// A permutation of [0, n): each block once per pass, in a seeded order (what fio's `lfsr`
/// promises). A 4-round Feistel network over the smallest even power of two at or above n,
/// walking past the values at or above n (fewer than 4 steps per block on average).
#[derive(Clone, Debug)]
struct Perm {
    n: u64,
    half: u32,
    keys: [u64; 4],
    /// The next index of the pass, below 2^(2·half).
    i: u64,
}

impl Perm {
    fn new(n: u64, rng: &mut Rng) -> Perm {
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        let half = bits.div_ceil(2);
        Perm { n, half, keys: [rng.next_u64(), rng.next_u64(), rng.next_u64(), rng.next_u64()], i: 0 }
    }

    #[inline]
    fn at(&self, x: u64) -> u64 {
        let mask = (1u64 << self.half) - 1;
        let (mut l, mut r) = (x >> self.half, x & mask);
        for k in self.keys {
            let mut f = (r ^ k).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            f ^= f >> 31;
            (l, r) = (r, l ^ (f.wrapping_mul(0xBF58_476D_1CE4_E5B9) >> 17) & mask);
        }
        (l << self.half) | r
    }

    #[inline]
    fn next(&mut self) -> u64 {
        let end = 1u64 << (2 * self.half);
        loop {
            let x = self.at(self.i);
            self.i = if self.i + 1 == end { 0 } else { self.i + 1 };
            if x < self.n {
                return x;
            }
        }
    }
}

/// One target of a [`MixStream`]: the thread's region in bytes and where its I/Os go.
#[derive(Clone, Debug)]
struct MixTarget {
    start: u64,
    bytes: u64,
    /// Random: positions, `unit` bytes apart, where the largest I/O fits.
    positions: u64,
    /// Sequential: the next I/O's offset from `start`; random: the end of the last I/O.
    cursor: u64,
    skew: Skew,
    /// Random I/Os left to follow on from the last before a new offset is drawn.
    run_left: u32,
    /// Strided zones: the current zone's start from `start`, and the bytes done in it.
    zone_at: u64,
    zone_done: u64,
    /// `random_generator=lfsr`: each position once per pass.
    perm: Option<Perm>,
}

impl MixTarget {
    /// The next sequential offset from `start`: advanced by each I/O's length and the stride; one
    /// that would pass the end starts over, one before the start goes to the last position.
    #[inline]
    fn sequential(&mut self, len: u64, stride: i64, unit: u64) -> u64 {
        if self.cursor + len > self.bytes {
            self.cursor = 0;
        }
        let at = self.cursor;
        let next = at as i64 + len as i64 + stride;
        self.cursor = if next < 0 { (self.positions - 1) * unit } else { next as u64 };
        at
    }

    /// The next offset within the current strided zone, moving to the next zone (or the first,
    /// past the end) once `z.size` bytes are done in it.
    #[inline]
    fn zoned(&mut self, z: &crate::plan::Zones, len: u64, random: bool, unit: u64, rng: &mut Rng) -> u64 {
        if self.zone_done >= z.size {
            self.zone_done = 0;
            self.zone_at += z.range + z.skip;
            self.cursor = self.zone_at;
        }
        if self.zone_at + len > self.bytes {
            self.zone_at = 0;
            self.cursor = 0;
        }
        let end = (self.zone_at + z.range).min(self.bytes);
        let at = if random {
            self.zone_at + rng.below((end - self.zone_at - len) / unit + 1) * unit
        } else {
            if self.cursor + len > end {
                self.cursor = self.zone_at;
            }
            let at = self.cursor;
            self.cursor += len;
            at
        };
        self.zone_done += len;
        at
    }
}

/// The I/O stream of a workload with a block size mix, a skewed distribution or an offset
/// pattern (`Pattern`: a stride, I/Os per offset, an alignment, strided zones, lfsr).
pub struct MixStream {
    rng: Rng,
    targets: Vec<MixTarget>,
    lens: Lengths,
    unit: u64,
    random: bool,
    write_pct: u64,
    next_file: u32,
    stride: i64,
    per_offset: u32,
    zones: Option<crate::plan::Zones>,
}

impl MixStream {
    /// `regions` in units of the workload's smallest block size ([`region_for`] with it).
    pub(crate) fn new(mut rng: Rng, regions: &[Region], w: &Workload) -> Result<MixStream, String> {
        let random = w.rw.is_random();
        // Random offsets on multiples of blockalign where given, else of the smallest size.
        let unit = if random && w.pattern.blockalign > 0 { w.pattern.blockalign } else { w.min_bs() };
        let lfsr = random && w.pattern.random_generator == crate::plan::Generator::Lfsr;
        let targets = regions
            .iter()
            .map(|r| {
                let bytes = r.blocks * w.min_bs();
                let positions = (bytes.saturating_sub(w.bs)) / unit + 1;
                let skew = if random { Skew::new(&w.distribution, positions, unit, &mut rng)? } else { Skew::Uniform };
                let perm = lfsr.then(|| Perm::new(positions, &mut rng));
                Ok(MixTarget { start: r.start, bytes, positions, cursor: 0, skew, run_left: 0, zone_at: 0, zone_done: 0, perm })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(MixStream {
            rng,
            targets,
            lens: Lengths::of(w),
            unit,
            random,
            write_pct: w.rw.write_percent(w.write_mix) as u64,
            next_file: 0,
            stride: w.pattern.stride,
            per_offset: w.pattern.ios_per_offset.max(1),
            zones: w.pattern.zones,
        })
    }
}

impl Source for MixStream {
    const FIXED_LEN: bool = false;
    #[inline(always)]
    fn next_io(&mut self) -> NextIo {
        let file = self.next_file;
        self.next_file += 1;
        if self.next_file as usize == self.targets.len() {
            self.next_file = 0;
        }
        let len = self.lens.draw(&mut self.rng);
        let t = &mut self.targets[file as usize];
        let at = if let Some(z) = &self.zones {
            t.zoned(z, len, self.random, self.unit, &mut self.rng)
        } else if self.random {
            if t.run_left > 0 && t.cursor + len <= t.bytes {
                // fio's rw_sequencer=sequential: the I/Os of one offset follow on.
                t.run_left -= 1;
            } else {
                t.run_left = self.per_offset - 1;
                let p = match &mut t.perm {
                    Some(p) => p.next(),
                    None => t.skew.block(&mut self.rng, t.positions),
                };
                t.cursor = p * self.unit;
            }
            let at = t.cursor;
            t.cursor += len;
            at
        } else {
            t.sequential(len, self.stride, self.unit)
        };
        let write = match self.write_pct {
            0 => false,
            100 => true,
            p => self.rng.below(100) < p,
        };
        NextIo { file, offset: t.start + at, write, len: len as u32 }
    }
}

/// A thread's I/O stream, of the kind its workload needs (the hot loop is compiled for each).
pub enum Streams {
    Plain(Stream),
    Mixed(MixStream),
}

/// Thread `t`'s stream over targets' ranges (start, length), seeded from the job's seed. Err:
/// one line (a region too small for one I/O, zones past the range).
pub(crate) fn stream_for(w: &Workload, ranges: &[(u64, u64)], t: u32, rng: Rng) -> Result<Streams, String> {
    let unit = w.min_bs();
    let regions: Vec<Region> = ranges.iter().map(|&(start, len)| region_for(start, len, unit, w.rw.is_random(), t, w.threads)).collect();
    if regions.iter().any(|r| r.blocks * unit < w.bs || r.blocks == 0) {
        return Err(format!("each thread needs at least one {}-byte block: use a larger --size or fewer --threads", w.bs));
    }
    if w.bssplit.is_one() && w.distribution.is_random() && w.pattern.is_plain() {
        return Ok(Streams::Plain(Stream::new(rng, regions, w.bs, w.rw.is_random(), w.rw.write_percent(w.write_mix))));
    }
    Ok(Streams::Mixed(MixStream::new(rng, &regions, w)?))
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

    fn workload(rw: crate::plan::Rw, mix: &str, dist: &str) -> Workload {
        let bssplit: BsMix = mix.parse().unwrap();
        let bs = bssplit.bounds().map_or(4096, |b| b.1);
        Workload { rw, bssplit, bs, distribution: dist.parse().unwrap(), write_mix: 40, ..Workload::default() }
    }

    fn mixed(w: &Workload, bytes: u64) -> MixStream {
        match stream_for(w, &[(1 << 20, bytes)], 0, Rng::new(11)).unwrap() {
            Streams::Mixed(s) => s,
            Streams::Plain(_) => panic!("a mix or a skew takes the mixed stream"),
        }
    }

    /// The default workload keeps the plain stream (and so the hot loop it always had).
    #[test]
    fn the_default_workload_keeps_the_plain_stream() {
        let w = Workload::default();
        assert!(matches!(stream_for(&w, &[(0, 1 << 20)], 0, Rng::new(1)).unwrap(), Streams::Plain(_)));
        let w = Workload { rw: crate::plan::Rw::ReadWrite, ..Workload::default() };
        assert!(matches!(stream_for(&w, &[(0, 1 << 20)], 0, Rng::new(1)).unwrap(), Streams::Plain(_)));
        // One I/O per random offset is every random job's: the plain stream too.
        let w = Workload { pattern: crate::plan::Pattern { ios_per_offset: 1, ..Default::default() }, ..Workload::default() };
        assert!(matches!(stream_for(&w, &[(0, 1 << 20)], 0, Rng::new(1)).unwrap(), Streams::Plain(_)));
    }

    /// fio's `rw=rw`: sequential offsets, the write choice independent of them, at the mix.
    #[test]
    fn sequential_read_write_mix() {
        let w = Workload { rw: crate::plan::Rw::ReadWrite, write_mix: 40, ..Workload::default() };
        let Streams::Plain(mut s) = stream_for(&w, &[(0, 1000 * 4096)], 0, Rng::new(5)).unwrap() else { panic!("plain") };
        let ios: Vec<NextIo> = (0..100_000).map(|_| s.next_io()).collect();
        assert!(ios.iter().enumerate().all(|(i, io)| io.offset == (i as u64 % 1000) * 4096), "sequential");
        let writes = ios.iter().filter(|io| io.write).count();
        assert!((39_000..41_000).contains(&writes), "writes {writes}");
    }

    /// bssplit: each size at its share, offsets aligned to the smallest and every I/O inside the
    /// region; bsrange: multiples of the smallest up to the largest.
    #[test]
    fn bssplit_shares_and_aligned_offsets() {
        let w = workload(crate::plan::Rw::Randread, "4k/60:16k/30:64k/10", "random");
        let region = 10 << 20;
        let mut s = mixed(&w, region);
        let mut n = std::collections::BTreeMap::new();
        for _ in 0..200_000 {
            let io = Source::next_io(&mut s);
            *n.entry(io.len).or_insert(0u32) += 1;
            assert_eq!(io.offset % 4096, 0);
            assert!(io.offset >= 1 << 20 && io.offset + io.len as u64 <= (1 << 20) + region, "{io:?}");
        }
        let share = |len: u32| n[&len] as f64 / 200_000.0;
        assert!((share(4096) - 0.6).abs() < 0.01 && (share(16384) - 0.3).abs() < 0.01 && (share(65536) - 0.1).abs() < 0.01, "{n:?}");
        let mut s = mixed(&workload(crate::plan::Rw::Randwrite, "4k-16k", "random"), region);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..10_000 {
            let io = Source::next_io(&mut s);
            assert!(io.len.is_multiple_of(4096) && (4096..=16384).contains(&io.len) && io.write, "{io:?}");
            seen.insert(io.len);
        }
        assert_eq!(seen.len(), 4, "{seen:?}");
    }

    /// A sequential mix advances by each I/O's own length and starts over where the next would
    /// pass the region's end.
    #[test]
    fn sequential_mix_advances_by_each_length() {
        let w = workload(crate::plan::Rw::ReadWrite, "4k/50:64k/50", "random");
        let region = 1 << 20;
        let mut s = mixed(&w, region);
        let mut next = 1 << 20;
        let mut writes = 0;
        for _ in 0..10_000 {
            let io = Source::next_io(&mut s);
            if next + io.len as u64 > (1 << 20) + region {
                next = 1 << 20;
            }
            assert_eq!(io.offset, next, "{io:?}");
            next += io.len as u64;
            writes += io.write as u32;
        }
        assert!((3_600..4_400).contains(&writes), "writes {writes}");
    }

    /// The share of the hottest tenth of the blocks hit, counted as fio's t/fio-genzipf counts it
    /// (as many draws as blocks, 1 GiB of 4 KiB blocks); genzipf's output (fio 3.33 source, seed
    /// 1) is the reference: zipf 1.2 88.76 %, pareto 0.2 63.55 %.
    fn top_tenth_share(dist: &str) -> f64 {
        let n = 262_144u64;
        let w = workload(crate::plan::Rw::Randread, "", dist);
        let mut s = mixed(&w, n * 4096);
        let mut hits = vec![0u32; n as usize];
        for _ in 0..n {
            hits[((Source::next_io(&mut s).offset - (1 << 20)) / 4096) as usize] += 1;
        }
        let mut hit: Vec<u32> = hits.into_iter().filter(|h| *h > 0).collect();
        hit.sort_unstable_by(|a, b| b.cmp(a));
        let step = (hit.len() - 1) / 10 + 1;
        hit[..step].iter().map(|h| *h as f64).sum::<f64>() / n as f64
    }

    #[test]
    fn zipf_and_pareto_concentrate_as_fio_genzipf_says() {
        let zipf = top_tenth_share("zipf:1.2");
        assert!((zipf - 0.8876).abs() < 0.015, "zipf 1.2: the top tenth took {zipf}");
        let pareto = top_tenth_share("pareto:0.2");
        assert!((pareto - 0.6355).abs() < 0.015, "pareto 0.2: the top tenth took {pareto}");
        // A uniform draw spreads: its top tenth of blocks hit takes far less.
        let normal = top_tenth_share("normal:10");
        assert!(normal < zipf, "normal {normal}");
    }

    /// zoned:50/5:30/15:20/ (fio's rand-zones.fio): half the accesses in the first 5 % of the
    /// range, 30 % in the next 15 %, the rest in the last 80 %.
    #[test]
    fn zoned_puts_each_share_in_its_zone() {
        let w = workload(crate::plan::Rw::Randread, "", "zoned:50/5:30/15:20/");
        let blocks = 10_000u64;
        let mut s = mixed(&w, blocks * 4096);
        let mut zone = [0u32; 3];
        for _ in 0..100_000 {
            let b = (Source::next_io(&mut s).offset - (1 << 20)) / 4096;
            zone[if b < 500 {
                0
            } else if b < 2000 {
                1
            } else {
                2
            }] += 1;
        }
        for (got, want) in zone.iter().zip([50_000, 30_000, 20_000]) {
            assert!((*got as i64 - want).abs() < 1_000, "{zone:?}");
        }
        let w = workload(crate::plan::Rw::Randread, "", "zoned_abs:50/4m:50/100m");
        assert!(stream_for(&w, &[(0, 64 << 20)], 0, Rng::new(1)).is_err(), "zones past the range");
    }

    /// The same seed gives the same skewed stream.
    #[test]
    fn skewed_streams_repeat_from_the_seed() {
        let w = workload(crate::plan::Rw::Randrw, "4k/50:8k/50", "zipf:1.1");
        let (mut a, mut b) = (mixed(&w, 1 << 26), mixed(&w, 1 << 26));
        for _ in 0..1000 {
            assert_eq!(Source::next_io(&mut a), Source::next_io(&mut b));
        }
    }

    fn patterned(rw: crate::plan::Rw, bs: u64, pattern: crate::plan::Pattern, bytes: u64) -> MixStream {
        let w = Workload { rw, bs, pattern, ..Workload::default() };
        match stream_for(&w, &[(1 << 20, bytes)], 0, Rng::new(11)).unwrap() {
            Streams::Mixed(s) => s,
            Streams::Plain(_) => panic!("a pattern takes the mixed stream"),
        }
    }

    /// fio's `rw=write:112k` (cross-stripe-verify): each next offset bs + 112k on, wrapping to the
    /// start; `rw=read:-8k` with bs 4k (backwards-read): from the start to the last block and down.
    #[test]
    fn a_stride_moves_sequential_offsets_forward_with_holes_or_backwards() {
        let p = |stride| crate::plan::Pattern { stride, ..Default::default() };
        let mut s = patterned(crate::plan::Rw::Write, 16 << 10, p(112 << 10), 1 << 20);
        let offs: Vec<u64> = (0..10).map(|_| Source::next_io(&mut s).offset - (1 << 20)).collect();
        assert_eq!(offs, [0, 1, 2, 3, 4, 5, 6, 7, 0, 1].map(|k| k * (128 << 10)).to_vec());
        let mut s = patterned(crate::plan::Rw::Read, 4096, p(-8192), 64 << 10);
        let blocks: Vec<u64> = (0..20).map(|_| (Source::next_io(&mut s).offset - (1 << 20)) / 4096).collect();
        assert_eq!(blocks, [0, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13].to_vec());
        // The default workload keeps the plain stream: a stride is chosen once, per thread.
        let w = Workload { rw: crate::plan::Rw::Read, ..Workload::default() };
        assert!(matches!(stream_for(&w, &[(0, 1 << 20)], 0, Rng::new(1)).unwrap(), Streams::Plain(_)));
    }

    /// fio's `rw=randread:8`: a new random offset every 8 I/Os, the 7 between following on.
    #[test]
    fn ios_per_offset_follow_on_from_each_random_offset() {
        let p = crate::plan::Pattern { ios_per_offset: 8, ..Default::default() };
        let mut s = patterned(crate::plan::Rw::Randread, 4096, p, 64 << 20);
        let offs: Vec<u64> = (0..8000).map(|_| Source::next_io(&mut s).offset).collect();
        let follow = offs.windows(2).filter(|w| w[1] == w[0] + 4096).count();
        assert!(follow >= 6900, "{follow} of 7999 followed on");
        let starts: Vec<u64> = offs.iter().step_by(8).copied().collect();
        assert!(starts.windows(2).filter(|w| w[1] == w[0] + 8 * 4096).count() < 10, "each eighth I/O is a new random offset");
    }

    /// fio's `blockalign=4k` under a 512 B to 64 KiB mix (jesd219): offsets on 4 KiB, not 512 B.
    #[test]
    fn blockalign_aligns_random_offsets_apart_from_the_sizes() {
        let w = Workload {
            rw: crate::plan::Rw::Randrw,
            bssplit: "512/10:4k/60:64k/30".parse().unwrap(),
            bs: 65536,
            pattern: crate::plan::Pattern { blockalign: 4096, ..Default::default() },
            ..Workload::default()
        };
        let Streams::Mixed(mut s) = stream_for(&w, &[(0, 16 << 20)], 0, Rng::new(3)).unwrap() else { panic!("mixed") };
        let (mut odd_4k, mut small) = (0, 0);
        for _ in 0..10_000 {
            let io = Source::next_io(&mut s);
            assert_eq!(io.offset % 4096, 0, "{io:?}");
            assert!(io.offset + io.len as u64 <= 16 << 20);
            odd_4k += (io.offset % 8192 == 4096) as u32;
            small += (io.len == 512) as u32;
        }
        assert!(odd_4k > 4000 && small > 800, "{odd_4k} {small}");
        // 2k alignment with 4k blocks: offsets off the block size too.
        let p = crate::plan::Pattern { blockalign: 2048, ..Default::default() };
        let mut s = patterned(crate::plan::Rw::Randread, 4096, p, 1 << 20);
        assert!((0..1000).any(|_| Source::next_io(&mut s).offset % 4096 == 2048));
    }

    /// fio's zonemode=strided (disk-zone-profile): zonesize bytes within each zonerange, then the
    /// next zone zoneskip on, the first again past the end.
    #[test]
    fn strided_zones_do_their_size_then_skip() {
        let z = |s: &str| crate::plan::Pattern { zones: Some(s.parse().unwrap()), ..Default::default() };
        let mut s = patterned(crate::plan::Rw::Read, 64 << 10, z("256k/256k/768k"), 4 << 20);
        let offs: Vec<u64> = (0..20).map(|_| (Source::next_io(&mut s).offset - (1 << 20)) >> 16).collect();
        // 4 I/Os of 64k per 256k zone, zones every 1 MiB, 4 zones in 4 MiB, then the first again.
        assert_eq!(offs, vec![0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51, 0, 1, 2, 3]);
        // A size above the range goes over the zone again before moving on; random stays in it.
        let mut s = patterned(crate::plan::Rw::Read, 64 << 10, z("256k/128k/0"), 1 << 20);
        let offs: Vec<u64> = (0..6).map(|_| (Source::next_io(&mut s).offset - (1 << 20)) >> 16).collect();
        assert_eq!(offs, vec![0, 1, 0, 1, 2, 3]);
        let mut s = patterned(crate::plan::Rw::Randread, 4096, z("1m/1m/3m"), 16 << 20);
        for i in 0..4096u64 {
            let at = Source::next_io(&mut s).offset - (1 << 20);
            let zone = (i / 256) % 4;
            assert!(at >= zone * (4 << 20) && at < zone * (4 << 20) + (1 << 20), "I/O {i} at {at}");
        }
    }

    /// random_generator=lfsr: every block once per pass, passes repeating.
    #[test]
    fn lfsr_visits_every_block_once_per_pass() {
        let p = crate::plan::Pattern { random_generator: crate::plan::Generator::Lfsr, ..Default::default() };
        for blocks in [1u64, 2, 3, 1000, 4097] {
            let mut s = patterned(crate::plan::Rw::Randwrite, 4096, p.clone(), blocks * 4096);
            for _pass in 0..2 {
                let mut seen = vec![false; blocks as usize];
                for _ in 0..blocks {
                    let b = ((Source::next_io(&mut s).offset - (1 << 20)) / 4096) as usize;
                    assert!(!seen[b], "block {b} twice in a pass of {blocks}");
                    seen[b] = true;
                }
            }
        }
        let mut s = patterned(crate::plan::Rw::Randread, 4096, p, 1000 * 4096);
        let first: Vec<u64> = (0..10).map(|_| Source::next_io(&mut s).offset).collect();
        assert!(first.windows(2).any(|w| w[1] != w[0] + 4096), "not in order: {first:?}");
    }

    #[test]
    fn targets_round_robin() {
        let regs = vec![Region { start: 0, blocks: 10 }, Region { start: 0, blocks: 10 }];
        let mut s = Stream::new(Rng::new(1), regs, 4096, true, 100);
        let files: Vec<u32> = (0..4).map(|_| s.next_io().file).collect();
        assert_eq!(files, vec![0, 1, 0, 1]);
    }
}
