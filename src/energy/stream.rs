//! Sources that stream (PowerSensor3 at kHz, a generic meter's stdout or socket) read on their own
//! thread and integrate each sample as it arrives into one-second bins: memory grows with the
//! window's seconds (as the per-second series does), never with the samples.
//!
//! Times are seconds from the window's start (`EnergyMeter`'s t0). An interval before the
//! window's start is clipped to it; the interval that crosses the window's end counts pro rata
//! (as a counter's does), since the stream is read a moment past the end.
use super::{SourceEnergy, MAX_WINDOW_S};

/// The energy of one channel (a rail, a meter) so far, per second of the window.
#[derive(Clone, Debug, Default)]
pub struct Bins {
    joules: Vec<f64>,
    covered: Vec<f64>,
    /// The end of the latest covered interval (0 before any).
    covered_end: f64,
    /// The longest uncovered stretch between covered intervals so far.
    gap: f64,
    /// Samples that ended a counted interval.
    pub samples: usize,
}

/// What one channel measured over [0, end].
#[derive(Clone, Debug, PartialEq)]
pub struct Summed {
    pub joules: f64,
    pub covered_s: f64,
    pub largest_gap_s: f64,
    pub per_second: Vec<Option<f64>>,
}

impl Bins {
    fn slot(&mut self, s: usize) {
        if self.joules.len() <= s {
            self.joules.resize(s + 1, 0.0);
            self.covered.resize(s + 1, 0.0);
        }
    }

    /// Power that goes linearly from `wa` at `ta` to `wb` at `tb` (constant when equal).
    pub fn add(&mut self, ta: f64, tb: f64, wa: f64, wb: f64) {
        if !(ta.is_finite() && tb.is_finite() && wa.is_finite() && wb.is_finite()) || tb <= 0.0 || tb <= ta || tb > MAX_WINDOW_S {
            return;
        }
        let slope = (wb - wa) / (tb - ta);
        let at = |t: f64| wa + slope * (t - ta);
        let start = ta.max(0.0);
        if start > self.covered_end {
            self.gap = self.gap.max(start - self.covered_end);
        }
        let mut t = start;
        while t < tb {
            let s = t.floor() as usize;
            let e = ((s + 1) as f64).min(tb);
            self.slot(s);
            self.joules[s] += (at(t) + at(e)) / 2.0 * (e - t);
            self.covered[s] += e - t;
            t = e;
        }
        self.covered_end = self.covered_end.max(tb);
        self.samples += 1;
    }

    /// Over [0, end]: the bins before `end`, the one `end` falls in pro rata.
    pub fn over(&self, end: f64) -> Summed {
        let (mut joules, mut covered) = (0.0, 0.0);
        let mut per_second = Vec::new();
        if end.is_finite() && end > 0.0 && end <= MAX_WINDOW_S {
            let seconds = end.ceil() as usize;
            for s in 0..seconds {
                let (mut j, mut c) = (self.joules.get(s).copied().unwrap_or(0.0), self.covered.get(s).copied().unwrap_or(0.0));
                let bin_end = (s + 1) as f64;
                if end < bin_end {
                    // The part of this second's covered span [s, covered_end] that lies before `end`.
                    let span = self.covered_end.min(bin_end) - s as f64;
                    if span > 0.0 {
                        let f = ((end - s as f64) / span).min(1.0);
                        j *= f;
                        c *= f;
                    }
                }
                joules += j;
                covered += c;
                let len = end.min(bin_end) - s as f64;
                per_second.push((c > 0.0 && c >= 0.5 * len).then(|| j / c).filter(|w| w.is_finite()));
            }
        }
        let tail = if self.covered_end < end { end - self.covered_end } else { 0.0 };
        Summed { joules, covered_s: covered.min(end.max(0.0)), largest_gap_s: self.gap.max(tail), per_second }
    }
}

/// One SourceEnergy for several channels that together make one scope (the rails that feed a
/// drive): their energies summed, the coverage and the gap of the worst of them, and one note
/// per channel with its own mean watts.
pub(crate) fn scope_energy(
    source: &str,
    scope: super::Scope,
    method: String,
    parts: &[(String, &Bins)],
    end: f64,
    mut notes: Vec<String>,
) -> SourceEnergy {
    let mut joules = 0.0;
    let mut watts = 0.0;
    let mut coverage: f64 = 1.0;
    let mut gap: f64 = 0.0;
    let mut samples = usize::MAX;
    let mut per_second: Option<Vec<Option<f64>>> = None;
    for (label, b) in parts {
        let r = b.over(end);
        let w = if r.covered_s > 0.0 { r.joules / r.covered_s } else { 0.0 };
        joules += r.joules;
        watts += w;
        coverage = coverage.min(if end > 0.0 { (r.covered_s / end).min(1.0) } else { 0.0 });
        gap = gap.max(r.largest_gap_s);
        samples = samples.min(b.samples);
        if parts.len() > 1 {
            notes.push(format!("{label}: {w:.3} W mean, {:.3} J over {:.3} s covered", r.joules, r.covered_s));
        }
        super::integrate::add_per_second(&mut per_second, r.per_second);
    }
    if parts.is_empty() {
        coverage = 0.0;
    }
    SourceEnergy {
        source: source.into(),
        scope: scope.as_str().into(),
        method,
        joules,
        mean_watts: watts,
        window_s: end,
        coverage,
        largest_gap_s: if parts.is_empty() { end } else { gap },
        samples: if samples == usize::MAX { 0 } else { samples },
        read_errors: 0,
        wraps: 0,
        iops_per_joule: None,
        bytes_per_joule: None,
        notes,
        per_second_watts: per_second.unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_power_splits_across_seconds_and_clips_to_the_window() {
        let mut b = Bins::default();
        b.add(-0.5, 0.25, 10.0, 10.0); // half before the window: clipped
        b.add(0.25, 1.75, 10.0, 10.0);
        b.add(1.75, 2.5, 10.0, 10.0);
        let r = b.over(2.0);
        assert!((r.joules - 20.0).abs() < 1e-9, "{r:?}");
        assert!((r.covered_s - 2.0).abs() < 1e-9, "{r:?}");
        assert_eq!(r.per_second, vec![Some(10.0), Some(10.0)]);
        assert_eq!(r.largest_gap_s, 0.0);
    }

    #[test]
    fn a_gap_is_uncovered_never_guessed() {
        let mut b = Bins::default();
        b.add(0.0, 1.0, 5.0, 5.0);
        b.add(3.0, 4.0, 5.0, 5.0);
        let r = b.over(5.0);
        assert!((r.joules - 10.0).abs() < 1e-9);
        assert!((r.covered_s - 2.0).abs() < 1e-9);
        assert!((r.largest_gap_s - 2.0).abs() < 1e-9, "{r:?}");
        assert_eq!(r.per_second, vec![Some(5.0), None, None, Some(5.0), None]);
    }

    #[test]
    fn a_ramp_is_a_trapezoid() {
        let mut b = Bins::default();
        b.add(0.0, 2.0, 0.0, 20.0);
        let r = b.over(2.0);
        assert!((r.joules - 20.0).abs() < 1e-9);
        assert_eq!(r.per_second, vec![Some(5.0), Some(15.0)]);
    }
}
