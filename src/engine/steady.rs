//! Steady state (fio's `ss`, `ss_dur`, `ss_ramp`): after `ramp` seconds of the measured window,
//! at each second's boundary the coordinating thread takes the second's I/Os (every thread's
//! completions, never per I/O) and, once it holds the last `dur` seconds, checks fio's criterion
//! on them: every second within a limit of their mean (`iops`, `bw`), or their least-squares
//! slope under a limit (`iops_slope`, `bw_slope`); a limit with `%` is a percentage of the mean.
//! Met, the run ends there, as fio ends the job, and the record says when
//! (`results.steadystate`, after fio's `steadystate` JSON).
pub use crate::interfaces::steady::SteadyState;
use serde::Serialize;

/// The record's `results.steadystate`, after fio's `steadystate` JSON object.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SteadyResult {
    /// The criterion asked (`--steadystate`'s words).
    pub ss: String,
    pub attained: bool,
    /// When it was met: seconds into the measured window (the run ended there); null if never.
    pub attained_at_s: Option<u32>,
    /// The last window judged: its mean IOPS or bandwidth, its largest deviation from it or its
    /// slope (per second), and the criterion's value (a percentage of the mean with `%`).
    pub mean: Option<f64>,
    pub max_deviation: Option<f64>,
    pub slope: Option<f64>,
    pub criterion: Option<f64>,
    /// The seconds judged last (IOPS or bytes per second), oldest first.
    pub samples: Vec<f64>,
}

/// The coordinating thread's judge: fed the completions so far at each wake, it takes one
/// sample per second of the window and says when the criterion is met.
#[derive(Debug)]
pub struct Detector {
    ss: SteadyState,
    bs: f64,
    /// The next second boundary (ns into the window), and the completions at the last one.
    next_ns: u64,
    last_done: Option<u64>,
    second: u32,
    window: std::collections::VecDeque<f64>,
    pub result: SteadyResult,
}

impl Detector {
    /// None when the job asks for no steady state. `bs`: bytes per I/O (for bandwidth).
    pub fn new(ss: Option<SteadyState>, bs: f64) -> Option<Detector> {
        let ss = ss?;
        let result = SteadyResult {
            ss: ss.to_string(),
            attained: false,
            attained_at_s: None,
            mean: None,
            max_deviation: None,
            slope: None,
            criterion: None,
            samples: Vec::new(),
        };
        Some(Detector { ss, bs, next_ns: 0, last_done: None, second: 0, window: Default::default(), result })
    }

    /// At `elapsed_ns` into the measured window, `done` completions so far (ramp included):
    /// true once steady (the run should end).
    pub fn tick(&mut self, elapsed_ns: u64, done: u64) -> bool {
        if self.result.attained {
            return true;
        }
        if self.last_done.is_none() {
            // The window's start: the first second counts from here.
            self.last_done = Some(done);
            self.next_ns = 1_000_000_000;
            return false;
        }
        if elapsed_ns < self.next_ns {
            return false;
        }
        let ios = done - self.last_done.unwrap_or(done);
        self.last_done = Some(done);
        self.next_ns += 1_000_000_000;
        self.second += 1;
        if self.second <= self.ss.ramp_s {
            return false;
        }
        self.window.push_back(if self.ss.bw { ios as f64 * self.bs } else { ios as f64 });
        if self.window.len() > self.ss.dur_s as usize {
            self.window.pop_front();
        }
        if self.window.len() < self.ss.dur_s as usize {
            return false;
        }
        if self.judge() {
            self.result.attained = true;
            self.result.attained_at_s = Some(self.second);
        }
        self.result.attained
    }

    /// fio's steadystate.c on the window: the criterion's value, and whether it is under the limit.
    fn judge(&mut self) -> bool {
        let y: Vec<f64> = self.window.iter().copied().collect();
        let n = y.len() as f64;
        let mean = y.iter().sum::<f64>() / n;
        let r = &mut self.result;
        r.samples = y.clone();
        r.mean = Some(mean);
        let value = if self.ss.slope {
            let xm = (n - 1.0) / 2.0;
            let sxy: f64 = y.iter().enumerate().map(|(x, v)| (x as f64 - xm) * (v - mean)).sum();
            let sxx: f64 = (0..y.len()).map(|x| (x as f64 - xm).powi(2)).sum();
            let slope = sxy / sxx;
            r.slope = Some(slope);
            slope.abs()
        } else {
            let dev = y.iter().map(|v| (v - mean).abs()).fold(0.0, f64::max);
            r.max_deviation = Some(dev);
            dev
        };
        let criterion = if self.ss.percent {
            if mean > 0.0 {
                100.0 * value / mean
            } else {
                f64::INFINITY
            }
        } else {
            value
        };
        r.criterion = criterion.is_finite().then_some(criterion);
        criterion < self.ss.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_parse_and_print_back() {
        let s: SteadyState = "iops:10% dur=30s ramp=10s".parse().unwrap();
        assert_eq!((s.metric(), s.limit, s.percent, s.dur_s, s.ramp_s), ("iops", 10.0, true, 30, 10));
        assert_eq!(s.to_string(), "iops:10% dur=30s ramp=10s");
        assert_eq!("bw_slope:1% dur=10".parse::<SteadyState>().unwrap().to_string(), "bw_slope:1% dur=10s");
        for bad in ["iops:10%", "lat:1 dur=5", "iops:x dur=5", "iops:1 dur=1", "iops:1 dur=5 ramp=0.5", "iops:1 dur=5 foo=1"] {
            assert!(bad.parse::<SteadyState>().is_err(), "{bad}");
        }
    }

    /// One sample per second after the ramp; steady once the last `dur` seconds are within the
    /// limit (deviation) or flat (slope), at the second it happened.
    #[test]
    fn steady_when_the_window_meets_the_criterion() {
        let mut d = Detector::new(Some("iops:10% dur=3 ramp=1".parse().unwrap()), 4096.0).unwrap();
        let per_second = [500u64, 100, 1000, 1000, 1050, 990, 1000];
        let (mut done, mut at) = (7u64, None);
        assert!(!d.tick(0, done));
        for (s, n) in per_second.iter().enumerate() {
            done += n;
            // A wake a little after each boundary, and one between.
            assert!(!d.tick((s as u64 + 1) * 1_000_000_000 - 500_000_000, done - n / 2) || at.is_some());
            if d.tick((s as u64 + 1) * 1_000_000_000 + 3_000_000, done) && at.is_none() {
                at = Some(s + 1);
            }
        }
        assert_eq!(at, Some(5), "seconds 3, 4, 5 (1000, 1000, 1050) are within 10 % of their mean");
        assert_eq!(d.result.attained_at_s, Some(5));
        assert_eq!(d.result.samples, vec![1000.0, 1000.0, 1050.0]);
        let mut d = Detector::new(Some("bw_slope:1% dur=4".parse().unwrap()), 2.0).unwrap();
        d.tick(0, 0);
        let mut done = 0;
        for (s, n) in [100u64, 200, 300, 400, 400, 400, 400].iter().enumerate() {
            done += n;
            d.tick((s as u64 + 1) * 1_000_000_000, done);
        }
        assert_eq!((d.result.attained_at_s, d.result.slope), (Some(7), Some(0.0)));
        assert_eq!(d.result.mean, Some(800.0), "bandwidth: I/Os x 2 bytes");
    }
}
