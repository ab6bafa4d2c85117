//! Turning samples into joules over a window, with explicit rules:
//!
//! * **Counters** (RAPL energy_uj, perf power events, NVML mJ, cumulative meter Wh): the energy
//!   of an interval between two successful reads is the counter's advance, wrap-corrected by the
//!   zone's range. An interval partly outside the window counts pro rata. An interval is left
//!   uncovered (its energy is not counted) when the counter went backwards with no known range
//!   (a reset), when it is so long that more than one wrap could hide in it (range / plausible
//!   maximum power), or when its advance implies more than the plausible maximum power (a
//!   glitch). A counter that never advances is invalid, never 0 W.
//! * **Power samples** (BMC watts, meter watts): linear between neighbouring samples no further
//!   apart than `max_gap_s` (trapezoid rule), clipped to the window; at each window edge the
//!   nearest sample is held for at most `edge_hold_s` when no sample pair spans that edge.
//!
//! Read errors are gaps, never zeros.

/// One channel integrated over a window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Integrated {
    pub joules: f64,
    /// Seconds of the window covered by counted intervals.
    pub covered_s: f64,
    /// Largest stretch of the window between successful samples (edges included), seconds.
    pub largest_gap_s: f64,
    /// Successful samples.
    pub samples: usize,
    pub read_errors: usize,
    pub wraps: u64,
    /// Why the channel yields no number at all, if it does not.
    pub invalid: Option<String>,
}

fn overlap(t0: f64, t1: f64, a: f64, b: f64) -> f64 {
    (t1.min(b) - t0.max(a)).max(0.0)
}

fn largest_gap(good_times: impl IntoIterator<Item = f64>, a: f64, b: f64) -> f64 {
    let mut prev = a;
    let mut largest: f64 = 0.0;
    for t in good_times {
        if t <= a {
            continue;
        }
        let t = t.min(b);
        largest = largest.max(t - prev);
        prev = t;
        if t >= b {
            break;
        }
    }
    largest.max(b - prev)
}

/// The part of `good` (sorted by time) a window (a, b) needs: from the last sample at or before
/// `a` to the first at or after `b`, found by binary search, so a window costs its own samples
/// and not the whole series (a log of millions of samples is integrated second by second).
fn needed(good: &[(f64, f64)], (a, b): (f64, f64)) -> &[(f64, f64)] {
    let from = good.partition_point(|g| g.0 <= a).saturating_sub(1);
    let to = (good.partition_point(|g| g.0 < b) + 1).min(good.len());
    good.get(from..to).unwrap_or(&[])
}

/// A cumulative counter's samples, read once for any number of windows.
pub struct CounterSeries {
    /// (time, raw value) of the successful reads, in the order read.
    good: Vec<(f64, f64)>,
    read_errors: usize,
    /// The reads are in time order (as samplers and sorted logs give them): a window looks only
    /// at its own part. Otherwise each window walks them all.
    sorted: bool,
}

impl CounterSeries {
    pub fn new(samples: &[(f64, Option<f64>)]) -> CounterSeries {
        let good: Vec<(f64, f64)> = samples.iter().filter_map(|&(t, v)| v.map(|v| (t, v))).collect();
        let sorted = good.windows(2).all(|w| w[0].0 <= w[1].0);
        CounterSeries { good, read_errors: samples.iter().filter(|s| s.1.is_none()).count(), sorted }
    }

    /// The counter over the window; see [`integrate_counter`].
    pub fn over(&self, scale_j: f64, range: Option<f64>, max_plausible_w: f64, window: (f64, f64)) -> Integrated {
        let (a, b) = window;
        let good = if self.sorted { needed(&self.good, window) } else { &self.good[..] };
        let mut out = Integrated { read_errors: self.read_errors, samples: self.good.len(), ..Default::default() };
        out.largest_gap_s = largest_gap(good.iter().map(|g| g.0), a, b);
        if self.good.len() < 2 {
            out.invalid =
                Some(format!("fewer than two successful counter reads ({} of {})", self.good.len(), self.good.len() + self.read_errors));
            return out;
        }
        let max_interval = range.map(|r| r * scale_j / max_plausible_w).unwrap_or(f64::INFINITY);
        let mut advanced = false;
        let mut counted_any = false;
        let mut skipped: Vec<String> = Vec::new();
        for w in good.windows(2) {
            let ((t0, v0), (t1, v1)) = (w[0], w[1]);
            let dt = t1 - t0;
            let ov = overlap(t0, t1, a, b);
            if dt <= 0.0 || ov <= 0.0 {
                continue;
            }
            let delta = if v1 >= v0 {
                v1 - v0
            } else if let Some(r) = range {
                out.wraps += 1;
                (r - v0).max(0.0) + v1
            } else {
                skipped.push(format!("counter went backwards at {t1:.3}s with no wrap range (reset)"));
                continue;
            };
            if dt > max_interval {
                skipped.push(format!("interval of {dt:.1}s is longer than the wrap-safe {max_interval:.1}s"));
                continue;
            }
            let j = delta * scale_j;
            if j / dt > max_plausible_w {
                skipped.push(format!("advance of {j:.1} J in {dt:.3}s exceeds {max_plausible_w} W (glitch)"));
                continue;
            }
            advanced |= delta > 0.0;
            counted_any = true;
            out.joules += j * ov / dt;
            out.covered_s += ov;
        }
        if counted_any && !advanced {
            out.invalid =
                Some(format!("counter never advanced over {} reads (stuck, e.g. a VM passthrough); not reported as 0 W", out.samples));
            out.joules = 0.0;
            out.covered_s = 0.0;
        } else if !counted_any {
            out.invalid = Some(if skipped.is_empty() { "no counted interval inside the window".into() } else { skipped.join("; ") });
        }
        not_finite_is_invalid(out)
    }
}

/// An integral that is not a finite number (an absurd sample) is no measurement.
fn not_finite_is_invalid(mut out: Integrated) -> Integrated {
    if out.invalid.is_none() && !(out.joules.is_finite() && out.covered_s.is_finite()) {
        out.invalid = Some(format!("the samples integrate to {} J, not a finite number: no energy is reported", out.joules));
        out.joules = 0.0;
        out.covered_s = 0.0;
    }
    out
}

/// Integrate a cumulative counter. `samples` are (time s, raw value or None for a failed read);
/// `scale_j` converts raw units to joules; `range` is the raw value at which the counter wraps
/// (None: it never wraps, e.g. a 64-bit perf count); `max_plausible_w` bounds one interval.
pub fn integrate_counter(
    samples: &[(f64, Option<f64>)],
    scale_j: f64,
    range: Option<f64>,
    max_plausible_w: f64,
    window: (f64, f64),
) -> Integrated {
    CounterSeries::new(samples).over(scale_j, range, max_plausible_w, window)
}

/// Power samples sorted by time, read once for any number of windows.
pub struct PowerSeries {
    good: Vec<(f64, f64)>,
    read_errors: usize,
}

impl PowerSeries {
    pub fn new(samples: &[(f64, Option<f64>)]) -> PowerSeries {
        let mut good: Vec<(f64, f64)> = samples.iter().filter_map(|&(t, v)| v.map(|v| (t, v))).collect();
        good.sort_by(|x, y| x.0.total_cmp(&y.0));
        PowerSeries { good, read_errors: samples.iter().filter(|s| s.1.is_none()).count() }
    }

    /// The power over the window; see [`integrate_power`].
    pub fn over(&self, max_gap_s: f64, edge_hold_s: f64, window: (f64, f64)) -> Integrated {
        let (a, b) = window;
        let all = &self.good;
        let mut out = Integrated { read_errors: self.read_errors, ..Default::default() };
        // The samples inside [a, b]: from the first at or after a to the last at or before b.
        let (first_in, after) = (all.partition_point(|g| g.0 < a), all.partition_point(|g| g.0 <= b));
        out.samples = after.saturating_sub(first_in);
        let good = needed(all, window);
        out.largest_gap_s = largest_gap(good.iter().map(|g| g.0), a, b);
        let lerp = |(t0, v0): (f64, f64), (t1, v1): (f64, f64), t: f64| v0 + (v1 - v0) * (t - t0) / (t1 - t0);
        let mut spans_a = false;
        let mut spans_b = false;
        for w in good.windows(2) {
            let (p0, p1) = (w[0], w[1]);
            let dt = p1.0 - p0.0;
            if dt <= 0.0 || dt > max_gap_s {
                continue;
            }
            let (s, e) = (p0.0.max(a), p1.0.min(b));
            if e <= s {
                continue;
            }
            spans_a |= p0.0 <= a && p1.0 > a;
            spans_b |= p0.0 < b && p1.0 >= b;
            out.joules += (lerp(p0, p1, s) + lerp(p0, p1, e)) / 2.0 * (e - s);
            out.covered_s += e - s;
        }
        if !spans_a {
            if let Some(&(t, v)) = all.get(first_in).filter(|g| g.0 <= b) {
                let hold = (t - a).min(edge_hold_s);
                if t - a <= edge_hold_s {
                    out.joules += v * hold;
                    out.covered_s += hold;
                }
            }
        }
        if !spans_b {
            if let Some(&(t, v)) = after.checked_sub(1).and_then(|i| all.get(i)).filter(|g| g.0 >= a) {
                if b - t <= edge_hold_s {
                    out.joules += v * (b - t);
                    out.covered_s += b - t;
                }
            }
        }
        if out.covered_s <= 0.0 {
            out.invalid = Some(format!("no power samples cover the window ({} inside it, {} read errors)", out.samples, out.read_errors));
            out.joules = 0.0;
        }
        not_finite_is_invalid(out)
    }
}

/// Integrate power samples (time s, watts or None for a failed read) over the window.
pub fn integrate_power(samples: &[(f64, Option<f64>)], max_gap_s: f64, edge_hold_s: f64, window: (f64, f64)) -> Integrated {
    PowerSeries::new(samples).over(max_gap_s, edge_hold_s, window)
}

/// Mean power in each second of the window [0, end) (the last may be partial), each second
/// integrated alone by the same rules as the whole window; None for a second less than half
/// covered, or that the rules leave without a number. Power over time (IISWC'19 Fig 8).
/// A window that is not finite or longer than [`super::MAX_WINDOW_S`] has no series (a run's window
/// never is; a record's window of 10^13 s tried to allocate 160 TB). `integrate` should cost the
/// second's own samples (`PowerSeries::over`, `CounterSeries::over`), not the whole series.
pub fn per_second_watts(end: f64, integrate: impl Fn((f64, f64)) -> Integrated) -> Vec<Option<f64>> {
    if !(end.is_finite() && end <= super::MAX_WINDOW_S) {
        return Vec::new();
    }
    let seconds = end.max(0.0).ceil() as usize;
    (0..seconds)
        .map(|k| {
            let w = (k as f64, (k as f64 + 1.0).min(end));
            let r = integrate(w);
            (r.invalid.is_none() && r.covered_s > 0.0 && r.covered_s >= 0.5 * (w.1 - w.0))
                .then(|| r.joules / r.covered_s)
                .filter(|w| w.is_finite())
        })
        .collect()
}

/// Per-second power of several channels that make up one scope: their sum, None in a second
/// any of them lacks (a scope missing a part would under-count).
pub(crate) fn add_per_second(total: &mut Option<Vec<Option<f64>>>, part: Vec<Option<f64>>) {
    match total {
        None => *total = Some(part),
        Some(t) => {
            for (i, x) in t.iter_mut().enumerate() {
                *x = match (*x, part.get(i).copied().flatten()) {
                    (Some(a), Some(b)) => Some(a + b),
                    _ => None,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U14_RANGE: f64 = 262143328850.0;

    #[test]
    fn counter_wrap_from_fixture_sequence() {
        let s: Vec<(f64, Option<f64>)> =
            [262140000000.0, 262143000000.0, 1500000.0, 4500000.0].iter().enumerate().map(|(i, &v)| (i as f64, Some(v))).collect();
        let r = integrate_counter(&s, 1e-6, Some(U14_RANGE), 1000.0, (0.0, 3.0));
        assert_eq!(r.wraps, 1);
        assert!((r.joules - 7.82885).abs() < 1e-9, "{}", r.joules);
        assert_eq!(r.covered_s, 3.0);
        assert!(r.invalid.is_none());
    }

    #[test]
    fn stuck_counter_is_invalid_not_zero() {
        let s = vec![(0.0, Some(123456.0)), (1.0, Some(123456.0)), (2.0, Some(123456.0))];
        let r = integrate_counter(&s, 1e-6, Some(U14_RANGE), 1000.0, (0.0, 2.0));
        assert!(r.invalid.unwrap().contains("never advanced"));
    }

    #[test]
    fn read_error_is_a_gap_and_counter_still_exact() {
        let s = vec![(0.0, Some(1000000.0)), (1.0, None), (2.0, Some(3000000.0))];
        let r = integrate_counter(&s, 1e-6, Some(U14_RANGE), 1000.0, (0.0, 2.0));
        assert_eq!(r.read_errors, 1);
        assert!((r.joules - 2.0).abs() < 1e-12);
        assert_eq!(r.largest_gap_s, 2.0);
    }

    #[test]
    fn counter_prorated_at_edges() {
        let s = vec![(-1.0, Some(0.0)), (1.0, Some(2e6)), (3.0, Some(4e6))];
        let r = integrate_counter(&s, 1e-6, None, 1000.0, (0.0, 2.0));
        assert!((r.joules - 2.0).abs() < 1e-12);
        assert!((r.covered_s - 2.0).abs() < 1e-12);
    }

    #[test]
    fn too_long_interval_is_uncovered() {
        // DRAM fixed unit 15.3 µJ: range ~65.7 kJ; at 1000 W plausible max, 65.7 s is the limit.
        let range = 0xFFFF_FFFFu64 as f64 * 15.3;
        let s = vec![(0.0, Some(0.0)), (100.0, Some(1e6))];
        let r = integrate_counter(&s, 1e-6, Some(range), 1000.0, (0.0, 100.0));
        assert!(r.invalid.unwrap().contains("wrap-safe"));
    }

    #[test]
    fn power_trapezoid_and_edges() {
        let s: Vec<(f64, Option<f64>)> = (0..=10).map(|i| (i as f64 + 0.5, Some(100.0 + i as f64))).collect();
        let r = integrate_power(&s, 3.0, 1.0, (0.0, 10.0));
        assert!((r.covered_s - 10.0).abs() < 1e-9);
        // linear 100 + (t - 0.5) on [0.5, 10], held 100 on [0, 0.5]
        let exact = 50.0 + (100.0 * 9.5 + 0.5 * 9.5 * 9.5);
        assert!((r.joules - exact).abs() < 1e-9, "{} vs {exact}", r.joules);
    }

    #[test]
    fn power_second_by_second() {
        // 100 W for 2 s, then 200 W, sampled every 0.5 s, then a gap of 2 s with no sample.
        let mut s: Vec<(f64, Option<f64>)> = (0..=10).map(|i| (i as f64 * 0.5, Some(if i <= 4 { 100.0 } else { 200.0 }))).collect();
        s.push((7.5, Some(200.0)));
        let w = per_second_watts(6.5, |win| integrate_power(&s, 1.0, 0.25, win));
        assert_eq!(w.len(), 7, "six whole seconds and a partial one");
        assert_eq!((w[0], w[1]), (Some(100.0), Some(100.0)));
        assert!((w[2].unwrap() - 175.0).abs() < 1e-9, "the step within second 2: {:?}", w[2]);
        assert_eq!((w[3], w[4]), (Some(200.0), Some(200.0)));
        assert_eq!((w[5], w[6]), (None, None), "the gap gives no power, never 0 W");
        let c: Vec<(f64, Option<f64>)> = (0..=4).map(|i| (i as f64, Some(i as f64 * 50e6))).collect();
        let wc = per_second_watts(4.0, |win| integrate_counter(&c, 1e-6, None, 1000.0, win));
        assert_eq!(wc, vec![Some(50.0); 4]);
        let mut total = None;
        add_per_second(&mut total, wc.clone());
        add_per_second(&mut total, vec![Some(1.0), None, Some(1.0), Some(1.0)]);
        assert_eq!(total, Some(vec![Some(51.0), None, Some(51.0), Some(51.0)]));
    }

    #[test]
    fn power_gap_is_uncovered() {
        let s = vec![(0.0, Some(100.0)), (1.0, Some(100.0)), (9.0, Some(100.0)), (10.0, Some(100.0))];
        let r = integrate_power(&s, 3.0, 1.0, (0.0, 10.0));
        assert!((r.covered_s - 2.0).abs() < 1e-9);
        assert!((r.largest_gap_s - 8.0).abs() < 1e-9);
    }
}
