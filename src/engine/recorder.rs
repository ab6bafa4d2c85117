//! Per-thread measurement state, written only by its own thread (no locks, no atomics but the
//! progress counter) and merged after the run.
use hdrhistogram::Histogram;

/// Highest latency the histogram holds exactly: one hour. Longer ones saturate at it.
pub const MAX_LATENCY_NS: u64 = 3_600_000_000_000;

/// A log-linear histogram with ≤1 % bucket error (two significant digits: 128 sub-buckets per
/// power of two, so at most 0.78 %), 1 ns to one hour. Mergeable with `Histogram::add`.
pub fn new_histogram() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, MAX_LATENCY_NS, 2).expect("valid histogram bounds");
    h.auto(false);
    h
}

#[derive(Clone, Debug)]
pub struct Direction {
    pub ios: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Exact extremes (the histogram's are bucket edges).
    pub min_ns: u64,
    pub max_ns: u64,
    pub lat: Histogram<u64>,
}

impl Direction {
    fn new() -> Direction {
        Direction {
            ios: 0,
            bytes: 0,
            errors: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            lat: new_histogram(),
        }
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

pub struct Recorder {
    pub read: Direction,
    pub write: Direction,
    pub series: Vec<SecondSlot>,
    /// Completions per target, to compare with each device's own counters.
    pub per_target: Vec<u64>,
}

impl Recorder {
    /// `seconds` slots are allocated now so the hot loop never allocates.
    pub fn new(seconds: usize, targets: usize) -> Recorder {
        Recorder {
            read: Direction::new(),
            write: Direction::new(),
            series: vec![SecondSlot::default(); seconds.max(1)],
            per_target: vec![0; targets.max(1)],
        }
    }

    /// Forget everything recorded during the ramp (errors stay counted: a failure is a failure).
    pub fn reset(&mut self) {
        self.read.reset();
        self.write.reset();
        self.series.iter_mut().for_each(|s| *s = SecondSlot::default());
        self.per_target.iter_mut().for_each(|n| *n = 0);
    }

    #[inline(always)]
    pub fn record(&mut self, write: bool, file: usize, bytes: u64, lat_ns: u64, second: usize) {
        self.per_target[file] += 1;
        let d = if write { &mut self.write } else { &mut self.read };
        d.ios += 1;
        d.bytes += bytes;
        d.lat.saturating_record(lat_ns.max(1));
        d.min_ns = d.min_ns.min(lat_ns);
        d.max_ns = d.max_ns.max(lat_ns);
        let last = self.series.len() - 1;
        let slot = &mut self.series[second.min(last)];
        if write {
            slot.write_ios += 1
        } else {
            slot.read_ios += 1
        }
        slot.lat_sum_ns += lat_ns;
    }

    #[inline(always)]
    pub fn error(&mut self, write: bool) {
        if write {
            self.write.errors += 1
        } else {
            self.read.errors += 1
        }
    }

    /// Fold another thread's recorder into this one.
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

    #[test]
    fn merge_adds_counts_and_series() {
        let mut a = Recorder::new(3, 1);
        let mut b = Recorder::new(5, 1);
        a.record(false, 0, 4096, 1000, 0);
        b.record(true, 0, 8192, 3000, 4);
        b.record(false, 0, 4096, 2000, 0);
        b.error(true);
        a.merge(&b);
        assert_eq!(a.read.ios, 2);
        assert_eq!(a.write.ios, 1);
        assert_eq!(a.write.bytes, 8192);
        assert_eq!(a.write.errors, 1);
        assert_eq!(a.series.len(), 5);
        assert_eq!(a.series[0].read_ios, 2);
        assert_eq!(a.series[4].write_ios, 1);
        assert_eq!(a.read.lat.len(), 2);
        assert_eq!(a.per_target, vec![3]);
    }

    #[test]
    fn reset_keeps_errors_and_capacity() {
        let mut r = Recorder::new(2, 1);
        r.record(false, 0, 512, 10, 9);
        r.error(false);
        r.reset();
        assert_eq!(r.read.ios, 0);
        assert_eq!(r.read.errors, 1);
        assert_eq!(r.read.lat.len(), 0);
        assert_eq!(r.series.len(), 2);
    }
}
