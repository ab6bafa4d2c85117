//! Per-thread measurement state, written only by its own thread (no locks, no atomics but the
//! progress counter) and merged after the run.
//!
//! The hot loop records into plain counters: a fixed array of latency counts laid out exactly
//! like the `hdrhistogram` buckets below, and running totals. [`Recorder::finish`] turns them
//! into the histogram and per-second series after the last I/O. Recording through
//! `Histogram::saturating_record` costs about 75 instructions per I/O (range checks, saturating
//! adds, its own min/max and total); a counter increment at a computed index costs about 10.
use hdrhistogram::Histogram;

/// Highest latency the histogram holds exactly: one hour. Longer ones saturate at it.
pub const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

/// A log-linear histogram with ≤1 % bucket error (two significant digits: 128 sub-buckets per
/// power of two, so at most 0.78 %), 1 ns to one hour. Mergeable with `Histogram::add`.
pub(crate) fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, MAX_LATENCY_NS, 2).expect("valid histogram bounds");
    h.auto(false);
    h
}

/// Latency counts in the bucket layout of [`new_histogram`] (lowest value 1, two significant
/// digits: 256 sub-buckets, the upper 128 of each power of two beyond the first), extended to
/// every u64 so the hot path needs no range check: value `v` lands in `index(v)`, and
/// [`LatCounts::to_histogram`] reproduces the histogram that recording each value would have
/// built (values beyond one hour saturate there, as `saturating_record` does).
pub struct LatCounts(Box<[u64; LAT_SLOTS]>);

/// Indices reach 56 * 128 + 255 = 7423 for u64::MAX; a power of two lets `index` mask
/// instead of checking bounds.
const LAT_SLOTS: usize = 8192;

impl LatCounts {
    fn new() -> LatCounts {
        LatCounts(vec![0; LAT_SLOTS].into_boxed_slice().try_into().expect("LAT_SLOTS long"))
    }

    /// hdrhistogram's `index_for` with unit magnitude 0 and 128 half-sub-buckets: the
    /// power-of-two bucket `b` (0 below 256) and the top 8 bits of the value within it.
    #[inline(always)]
    const fn index(v: u64) -> usize {
        let b = 56 - (v | 255).leading_zeros();
        (((b as usize) << 7) + (v >> b) as usize) & (LAT_SLOTS - 1)
    }

    /// The lowest value that lands in slot `i` (the inverse of `index` on bucket edges).
    fn value_of(i: usize) -> u64 {
        if i < 256 {
            return i as u64;
        }
        let b = (i >> 7) - 1;
        ((i - (b << 7)) as u64) << b
    }

    #[cfg(test)]
    fn add(&mut self, v: u64) {
        self.0[Self::index(v)] += 1;
    }

    fn clear(&mut self) {
        self.0.fill(0);
    }

    /// The counts as the run's histogram: 0 ns counted as 1 ns (its lowest value), and the
    /// rest through `saturating_record_n`, which puts what is beyond its range at one hour.
    fn to_histogram(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        for (i, &n) in self.0.iter().enumerate().filter(|(_, n)| **n > 0) {
            h.saturating_record_n(Self::value_of(i).max(1), n);
        }
        h
    }
}

/// Each second's own latency counts, for its percentiles: the slots of [`LatCounts`] four at a
/// time (32 sub-buckets per power of two, a bucket ≤ 3.2 % wide), up to 2^36 ns (69 s; longer
/// ones count there), as u32: 3.8 KiB a second per thread, where the run's layout would take 64.
const SECOND_SHIFT: u32 = 2;
const SECOND_TOP: usize = LatCounts::index(1 << 36);
pub const SECOND_SLOTS: usize = (SECOND_TOP >> SECOND_SHIFT) + 1;

/// The most seconds a thread keeps latency counts for: an hour (S4's garbage-collection run
/// is 30 minutes), and no more than 64 MiB a thread; later seconds have no percentiles.
pub(crate) fn percentile_seconds(seconds: usize) -> usize {
    const MOST: usize = (64 << 20) / (SECOND_SLOTS * 4);
    seconds.clamp(1, MOST.min(3600))
}

/// A second's latency percentiles from its counts (`SECOND_SLOTS` long): the highest value of the
/// bucket holding the rank, as the run's histogram reports (never below the truth by more than
/// the bucket). None for a second without completions.
pub(crate) fn second_percentiles(counts: &[u32], quantiles: &[f64]) -> Option<Vec<u64>> {
    let n: u64 = counts.iter().map(|&c| c as u64).sum();
    if n == 0 {
        return None;
    }
    let highest = |b: usize| LatCounts::value_of((b + 1) << SECOND_SHIFT) - 1;
    Some(
        quantiles
            .iter()
            .map(|q| {
                let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
                let mut seen = 0u64;
                let b = counts.iter().position(|&c| {
                    seen += c as u64;
                    seen >= rank
                });
                highest(b.expect("rank ≤ n"))
            })
            .collect(),
    )
}

#[derive(Clone, Debug)]
pub struct Direction {
    pub ios: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Exact extremes (the histogram's are bucket edges).
    pub min_ns: u64,
    pub max_ns: u64,
    /// Built from the hot loop's counts by [`Recorder::finish`].
    pub lat: Histogram<u64>,
}

impl Direction {
    fn new() -> Direction {
        Direction { ios: 0, bytes: 0, errors: 0, min_ns: u64::MAX, max_ns: 0, lat: new_histogram() }
    }
    fn reset(&mut self) {
        self.ios = 0;
        self.bytes = 0;
        self.min_ns = u64::MAX;
        self.max_ns = 0;
        self.lat.reset();
    }
}

/// One second of the run, as seen by one thread.
#[derive(Clone, Copy, Debug, Default)]
pub struct SecondSlot {
    pub read_ios: u64,
    pub write_ios: u64,
    pub lat_sum_ns: u64,
}

/// What `record` updates per direction, until `finish` puts it into the [`Direction`]: both
/// directions side by side, so a direction is one index (not a choice per field). Four words,
/// so that index is a shift: at three (without the latency sum) the shipped build picked each
/// field's address with a conditional move, nine instructions per I/O.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
struct Totals {
    ios: u64,
    min_ns: u64,
    max_ns: u64,
    /// Sum of this direction's latencies; the series takes differences of both per second.
    lat_sum_ns: u64,
}

impl Totals {
    const ZERO: Totals = Totals { ios: 0, min_ns: u64::MAX, max_ns: 0, lat_sum_ns: 0 };
}

pub struct Recorder {
    pub read: Direction,
    pub write: Direction,
    pub series: Vec<SecondSlot>,
    /// Each second's latency counts (`SECOND_SLOTS` per second, reads and writes together), for
    /// the seconds `percentile_seconds` allows and one more that takes every later second and is
    /// never read. Only grows once made, so `second_at + SECOND_SLOTS` stays within it.
    second_lat: Vec<u32>,
    /// Reads' and writes' I/O counts and extremes, until `finish`.
    totals: [Totals; 2],
    /// Completions per target, to compare with each device's own counters.
    pub per_target: Vec<u64>,
    /// Latency counts of reads and writes, until `finish`.
    counts: [LatCounts; 2],
    /// Every request has the job's block size, so bytes are `ios * bs`; 0: a block size mix,
    /// whose bytes are added up per I/O (`add_bytes`).
    bs: u64,
    /// The second being counted and the running totals when it began: the series slot is
    /// written once, when the second changes, rather than on every completion.
    second: usize,
    second_began: SecondSlot,
    /// Where the current second's latency counts start in `second_lat`.
    second_at: usize,
}

impl Recorder {
    /// What `new` allocates for `seconds` slots (latency counts of both directions and of each
    /// second included).
    pub(crate) fn bytes_for(seconds: usize) -> u64 {
        (seconds.max(1) * std::mem::size_of::<SecondSlot>() + 2 * LAT_SLOTS * 8 + (percentile_seconds(seconds) + 1) * SECOND_SLOTS * 4)
            as u64
    }

    /// `seconds` slots are allocated now so the hot loop never allocates.
    pub fn new(seconds: usize, targets: usize, bs: u64) -> Recorder {
        Recorder {
            read: Direction::new(),
            write: Direction::new(),
            series: vec![SecondSlot::default(); seconds.max(1)],
            second_lat: vec![0; (percentile_seconds(seconds) + 1) * SECOND_SLOTS],
            per_target: vec![0; targets.max(1)],
            counts: [LatCounts::new(), LatCounts::new()],
            totals: [Totals::ZERO; 2],
            bs,
            second: 0,
            second_began: SecondSlot::default(),
            second_at: 0,
        }
    }

    /// Seconds with latency counts of their own.
    pub(crate) fn percentile_seconds(&self) -> usize {
        self.second_lat.len() / SECOND_SLOTS - 1
    }

    /// Second `i`'s latency counts; None past those kept.
    pub(crate) fn second_counts(&self, i: usize) -> Option<&[u32]> {
        (i < self.percentile_seconds()).then(|| &self.second_lat[i * SECOND_SLOTS..(i + 1) * SECOND_SLOTS])
    }

    /// Forget everything recorded during the ramp (errors stay counted: a failure is a failure).
    pub fn reset(&mut self) {
        self.read.reset();
        self.write.reset();
        self.counts.iter_mut().for_each(LatCounts::clear);
        self.totals = [Totals::ZERO; 2];
        self.series.iter_mut().for_each(|s| *s = SecondSlot::default());
        self.per_target.iter_mut().for_each(|n| *n = 0);
        // Only seconds up to the current one were written.
        self.second_lat[..self.second_at + SECOND_SLOTS].fill(0);
        self.second = 0;
        self.second_began = SecondSlot::default();
        self.second_at = 0;
    }

    /// The completions recorded next belong to `second` of the measured window.
    #[inline(always)]
    pub(crate) fn at_second(&mut self, second: usize) {
        if second != self.second {
            self.close_second(second);
        }
    }

    /// Add what was counted since the current second began to its slot (the last slot takes
    /// any overflow) and start counting `next`.
    #[cold]
    fn close_second(&mut self, next: usize) {
        let [r, w] = self.totals;
        let now = SecondSlot { read_ios: r.ios, write_ios: w.ios, lat_sum_ns: r.lat_sum_ns + w.lat_sum_ns };
        let last = self.series.len() - 1;
        let slot = &mut self.series[self.second.min(last)];
        slot.read_ios += now.read_ios - self.second_began.read_ios;
        slot.write_ios += now.write_ios - self.second_began.write_ios;
        slot.lat_sum_ns += now.lat_sum_ns - self.second_began.lat_sum_ns;
        self.second = next;
        self.second_began = now;
        self.second_at = next.min(self.percentile_seconds()) * SECOND_SLOTS;
    }

    /// One successful I/O of the measured window (of the second last given to `at_second`).
    #[inline(always)]
    pub fn record(&mut self, write: bool, file: usize, lat_ns: u64) {
        // With one target its count is the total, filled in by `finish`.
        if self.per_target.len() > 1 {
            self.per_target[file] += 1;
        }
        let t = &mut self.totals[write as usize];
        t.ios += 1;
        t.min_ns = t.min_ns.min(lat_ns);
        t.max_ns = t.max_ns.max(lat_ns);
        t.lat_sum_ns += lat_ns;
        // The second's own count beside the run's: -i null went from 19 to 20 ns per I/O.
        let i = LatCounts::index(lat_ns);
        self.counts[write as usize].0[i] += 1;
        // SAFETY: `second_at + SECOND_SLOTS <= second_lat.len()` (`close_second` sets `second_at`
        // to at most `percentile_seconds() * SECOND_SLOTS` of a `(percentile_seconds() + 1) *
        // SECOND_SLOTS` long vector, which only grows), and the offset is below SECOND_SLOTS.
        unsafe { *self.second_lat.get_unchecked_mut(self.second_at + (i.min(SECOND_TOP) >> SECOND_SHIFT)) += 1 };
    }

    /// The bytes of one successful I/O of the measured window, where sizes vary (bs 0).
    #[inline(always)]
    pub(crate) fn add_bytes(&mut self, write: bool, len: u32) {
        let d = if write { &mut self.write } else { &mut self.read };
        d.bytes += len as u64;
    }

    #[inline(always)]
    pub fn error(&mut self, write: bool) {
        if write {
            self.write.errors += 1
        } else {
            self.read.errors += 1
        }
    }

    /// After the last I/O: close the current second, derive bytes (one block size) and the single target's
    /// count, and build the latency histograms from the counts.
    pub fn finish(&mut self) {
        self.close_second(self.second);
        for (d, counts, t) in [(&mut self.read, &self.counts[0], &self.totals[0]), (&mut self.write, &self.counts[1], &self.totals[1])] {
            (d.ios, d.min_ns, d.max_ns) = (t.ios, t.min_ns, t.max_ns);
            if self.bs > 0 {
                d.bytes = d.ios * self.bs;
            }
            d.lat = counts.to_histogram();
        }
        if let [only] = self.per_target.as_mut_slice() {
            *only = self.read.ios + self.write.ios;
        }
    }

    /// Fold another thread's finished recorder into this one.
    pub fn merge(&mut self, other: &Recorder) {
        for (a, b) in [(&mut self.read, &other.read), (&mut self.write, &other.write)] {
            a.ios += b.ios;
            a.bytes += b.bytes;
            a.errors += b.errors;
            a.min_ns = a.min_ns.min(b.min_ns);
            a.max_ns = a.max_ns.max(b.max_ns);
            a.lat.add(&b.lat).expect("histograms share bounds");
        }
        if self.per_target.len() < other.per_target.len() {
            self.per_target.resize(other.per_target.len(), 0);
        }
        for (a, b) in self.per_target.iter_mut().zip(&other.per_target) {
            *a += b;
        }
        if self.series.len() < other.series.len() {
            self.series.resize(other.series.len(), SecondSlot::default());
        }
        for (a, b) in self.series.iter_mut().zip(&other.series) {
            a.read_ios += b.read_ios;
            a.write_ios += b.write_ios;
            a.lat_sum_ns += b.lat_sum_ns;
        }
        if self.second_lat.len() < other.second_lat.len() {
            self.second_lat.resize(other.second_lat.len(), 0);
        }
        for (a, b) in self.second_lat.iter_mut().zip(&other.second_lat) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_error_within_one_percent() {
        let mut h = new_histogram();
        for v in [1u64, 999, 4_321, 87_654, 1_234_567, 98_765_432, 3_000_000_000] {
            h.reset();
            h.record(v).unwrap();
            let got = h.value_at_quantile(0.5) as f64;
            assert!((got - v as f64).abs() / v as f64 <= 0.01, "{v} -> {got}");
        }
    }

    #[test]
    fn percentiles_of_known_distribution() {
        let mut h = new_histogram();
        for v in 1..=100_000u64 {
            h.record(v * 10).unwrap();
        }
        for (q, want) in [(0.5, 500_000.0), (0.9, 900_000.0), (0.99, 990_000.0), (0.999, 999_000.0)] {
            let got = h.value_at_quantile(q) as f64;
            assert!((got - want).abs() / want <= 0.01, "q{q}: {got} vs {want}");
        }
        assert!((h.mean() - 500_005.0).abs() / 500_005.0 < 0.01);
    }

    /// The counts must build exactly the histogram that recording every value would have.
    #[test]
    fn counts_build_the_same_histogram_as_recording() {
        let mut direct = new_histogram();
        let mut counts = LatCounts::new();
        let mut rng = crate::rng::Rng::new(5);
        let mut values: Vec<u64> = vec![
            0,
            1,
            127,
            128,
            255,
            256,
            257,
            511,
            512,
            1023,
            1024,
            MAX_LATENCY_NS - 1,
            MAX_LATENCY_NS,
            MAX_LATENCY_NS + 1,
            MAX_LATENCY_NS * 2,
            u64::MAX,
        ];
        // Every power of two and its neighbours, then random values at every magnitude.
        values.extend((0..64).flat_map(|s| [(1u64 << s) - 1, 1u64 << s, (1u64 << s) + 1]));
        values.extend((0..200_000).map(|_| rng.next_u64() >> rng.below(64)));
        for &v in &values {
            direct.saturating_record(v.max(1));
            counts.add(v);
            if (1..=MAX_LATENCY_NS).contains(&v) {
                assert_eq!(LatCounts::value_of(LatCounts::index(v)), direct.lowest_equivalent(v), "{v}");
            }
        }
        let built = counts.to_histogram();
        assert!(built == direct, "histograms differ");
        assert_eq!(built.len(), values.len() as u64);
    }

    #[test]
    fn series_and_bytes_come_out_of_finish() {
        let mut r = Recorder::new(4, 1, 4096);
        r.at_second(0);
        r.record(false, 0, 100);
        r.record(true, 0, 300);
        r.at_second(2);
        r.record(false, 0, 50);
        r.at_second(9); // past the end: counted in the last slot
        r.record(false, 0, 70);
        r.finish();
        let s: Vec<(u64, u64, u64)> = r.series.iter().map(|s| (s.read_ios, s.write_ios, s.lat_sum_ns)).collect();
        assert_eq!(s, vec![(1, 1, 400), (0, 0, 0), (1, 0, 50), (1, 0, 70)]);
        assert_eq!((r.read.ios, r.read.bytes, r.write.bytes), (3, 3 * 4096, 4096));
        assert_eq!((r.read.min_ns, r.read.max_ns), (50, 100));
        assert_eq!(r.read.lat.len(), 3);
        assert_eq!(r.per_target, vec![4]);
    }

    #[test]
    fn merge_adds_counts_and_series() {
        let mut a = Recorder::new(3, 1, 4096);
        let mut b = Recorder::new(5, 1, 4096);
        a.record(false, 0, 1000);
        b.record(false, 0, 2000);
        b.at_second(4);
        b.record(true, 0, 3000);
        b.error(true);
        a.finish();
        b.finish();
        a.merge(&b);
        assert_eq!(a.read.ios, 2);
        assert_eq!(a.write.ios, 1);
        assert_eq!(a.write.bytes, 4096);
        assert_eq!(a.write.errors, 1);
        assert_eq!(a.series.len(), 5);
        assert_eq!(a.series[0].read_ios, 2);
        assert_eq!(a.series[4].write_ios, 1);
        assert_eq!(a.read.lat.len(), 2);
        assert_eq!(a.per_target, vec![3]);
    }

    /// Each second keeps its own percentiles, merged across threads from their counts (not
    /// from each thread's percentiles), within a bucket above the truth.
    #[test]
    fn each_second_has_its_own_percentiles_across_threads() {
        let (mut a, mut b) = (Recorder::new(10, 1, 4096), Recorder::new(10, 1, 4096));
        for v in 1..=1000u64 {
            a.record(false, 0, v * 1000); // second 0: 1 µs .. 1 ms on one thread
        }
        for _ in 0..1000 {
            b.record(true, 0, 2_000_000); // and 1000 of 2 ms on the other
        }
        a.at_second(1);
        for _ in 0..100 {
            a.record(false, 0, 5_000_000_000); // second 1: 5 s
        }
        a.at_second(3);
        a.record(false, 0, 1u64 << 40); // beyond 2^36 ns: counted at the top
        a.finish();
        b.finish();
        let mut m = Recorder::new(1, 1, 4096);
        m.merge(&a);
        m.merge(&b);
        let p = |s: usize| m.second_counts(s).and_then(|c| second_percentiles(c, &[0.5, 0.99]));
        let within = |got: u64, truth: u64| got >= truth && (got - truth) as f64 <= 0.032 * truth as f64;
        let s0 = p(0).unwrap();
        assert!(within(s0[0], 1_000_000) && within(s0[1], 2_000_000), "{s0:?}");
        assert!(p(1).unwrap().iter().all(|&v| within(v, 5_000_000_000)), "{:?}", p(1));
        assert_eq!(p(2), None, "a second without completions");
        assert!(p(3).unwrap()[0] >= 1 << 36);
        assert_eq!(m.second_counts(10), None, "past the seconds kept");
        assert_eq!(percentile_seconds(1802), 1802, "S4's 30-minute run keeps every second");
        assert_eq!(percentile_seconds(86_400), 3600);
    }

    /// `record` finds a direction's totals by a shift of the direction (four words each); at
    /// three words the shipped build chose each field's address with a conditional move, nine
    /// instructions per I/O. Both directions' latency sums still make each second's.
    #[test]
    fn a_directions_totals_are_four_words_and_both_make_the_seconds_sum() {
        assert_eq!(std::mem::size_of::<Totals>(), 32);
        let mut r = Recorder::new(2, 1, 4096);
        r.record(false, 0, 100);
        r.record(true, 0, 30);
        r.at_second(1);
        r.record(true, 0, 7);
        r.finish();
        let sums: Vec<u64> = r.series.iter().map(|s| s.lat_sum_ns).collect();
        assert_eq!(sums, [130, 7]);
    }

    #[test]
    fn per_target_counts_with_several_targets() {
        let mut r = Recorder::new(1, 3, 512);
        for f in [0, 2, 2, 1, 2] {
            r.record(false, f, 10);
        }
        r.finish();
        assert_eq!(r.per_target, vec![1, 1, 3]);
    }

    #[test]
    fn reset_keeps_errors_and_capacity() {
        let mut r = Recorder::new(2, 1, 512);
        r.at_second(1);
        r.record(false, 0, 10);
        r.error(false);
        r.reset();
        r.finish();
        assert_eq!(r.read.ios, 0);
        assert_eq!(r.read.errors, 1);
        assert_eq!(r.read.lat.len(), 0);
        assert_eq!(r.series.len(), 2);
        assert_eq!(r.series[1].read_ios, 0);
    }
}
