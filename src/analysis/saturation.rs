//! The saturation point of a J-curve: IOPS against mean latency as queue depth grows.
//!
//! Rule (marginal gain, per doubling of queue depth): walking the points in order of queue
//! depth, the saturation point is the first point i whose step to the next point i+1 buys less
//! than `min_iops_gain` (default 5 %) more IOPS while costing more than `min_latency_growth`
//! (default 20 %) more mean latency, both expressed per doubling of queue depth:
//!
//! ```text
//! d       = log2(qd[i+1] / qd[i])                     (1 for a doubling sweep)
//! gain    = (iops[i+1] / iops[i])^(1/d) − 1
//! growth  = (lat[i+1]  / lat[i]) ^(1/d) − 1
//! saturated at i  ⇔  gain < min_iops_gain  and  growth > min_latency_growth
//! ```
//!
//! Point i is the deepest queue worth using: beyond it the device only queues. The rule looks
//! at neighbouring points only, so the answer does not move when the sweep is extended to
//! deeper queues (the chord-distance knee does; see docs/statistics.md for why this rule was
//! chosen). It is deterministic: the first qualifying step wins, ties cannot arise.
use serde::Serialize;

pub const DEFAULT_MIN_IOPS_GAIN: f64 = 0.05;
pub const DEFAULT_MIN_LATENCY_GROWTH: f64 = 0.20;

/// One point of a J-curve (typically the replicate means at one queue depth).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CurvePoint {
    pub qd: f64,
    pub iops: f64,
    pub mean_lat: f64,
}

/// The thresholds of the rule, per doubling of queue depth.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SaturationRule {
    /// A step that gains less IOPS than this fraction (per doubling) no longer pays...
    pub min_iops_gain: f64,
    /// ...when its mean latency grows by more than this fraction (per doubling).
    pub min_latency_growth: f64,
}

impl Default for SaturationRule {
    fn default() -> Self {
        SaturationRule { min_iops_gain: DEFAULT_MIN_IOPS_GAIN, min_latency_growth: DEFAULT_MIN_LATENCY_GROWTH }
    }
}

/// Where the curve saturates and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Saturation {
    /// Index into the points given; None when no step met the rule (not saturated within the sweep).
    pub index: Option<usize>,
    /// The queue depth at that index.
    pub qd: Option<f64>,
    /// Per step i → i+1: (IOPS gain, latency growth), both per doubling of queue depth.
    pub steps: Vec<(f64, f64)>,
    /// One sentence saying what was found, with the numbers.
    pub reason: String,
}

/// Apply the rule. Errors when fewer than two points are given, a value is not finite and
/// positive, or the queue depths are not strictly increasing.
pub fn saturation_point(points: &[CurvePoint], rule: SaturationRule) -> Result<Saturation, String> {
    if points.len() < 2 {
        return Err(format!("a J-curve needs at least two queue depths, got {}", points.len()));
    }
    for (i, p) in points.iter().enumerate() {
        for (name, v) in [("queue depth", p.qd), ("IOPS", p.iops), ("mean latency", p.mean_lat)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!("J-curve point {i}: {name} {v} is not a positive number"));
            }
        }
        if i > 0 && p.qd <= points[i - 1].qd {
            return Err(format!("J-curve queue depths must increase: {} follows {}", p.qd, points[i - 1].qd));
        }
    }
    let steps: Vec<(f64, f64)> = points
        .windows(2)
        .map(|w| {
            let d = (w[1].qd / w[0].qd).log2();
            ((w[1].iops / w[0].iops).powf(1.0 / d) - 1.0, (w[1].mean_lat / w[0].mean_lat).powf(1.0 / d) - 1.0)
        })
        .collect();
    let pct = |x: f64| x * 100.0;
    let hit = steps.iter().position(|&(g, l)| g < rule.min_iops_gain && l > rule.min_latency_growth);
    let reason = match hit {
        Some(i) => format!(
            "saturated at queue depth {}: going to {} gains {:.1} % IOPS (< {:.0} %) for {:.1} % more mean latency (> {:.0} %) per doubling",
            points[i].qd,
            points[i + 1].qd,
            pct(steps[i].0),
            pct(rule.min_iops_gain),
            pct(steps[i].1),
            pct(rule.min_latency_growth)
        ),
        None => format!(
            "not saturated up to queue depth {}: no step gained less than {:.0} % IOPS while mean latency grew more than {:.0} % per doubling",
            points[points.len() - 1].qd,
            pct(rule.min_iops_gain),
            pct(rule.min_latency_growth)
        ),
    };
    Ok(Saturation { index: hit, qd: hit.map(|i| points[i].qd), steps, reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_qualifying_step_wins() {
        // Flat IOPS with latency doubling at every step: the very first point is the heel.
        let p: Vec<CurvePoint> = [1.0, 2.0, 4.0].iter().map(|&q| CurvePoint { qd: q, iops: 100.0, mean_lat: q }).collect();
        let s = saturation_point(&p, SaturationRule::default()).unwrap();
        assert_eq!((s.index, s.qd), (Some(0), Some(1.0)));
    }

    #[test]
    fn growth_is_per_doubling() {
        // 1 → 4 is two doublings: IOPS ×1.08 is 3.9 % per doubling (< 5 %), latency ×3.7 is
        // 92 % per doubling: saturated at QD 1, although the raw IOPS gain is 8 %.
        let p = [CurvePoint { qd: 1.0, iops: 100.0, mean_lat: 1.0 }, CurvePoint { qd: 4.0, iops: 108.0, mean_lat: 3.7 }];
        let s = saturation_point(&p, SaturationRule::default()).unwrap();
        assert_eq!(s.index, Some(0));
        assert!((s.steps[0].0 - (1.08f64.sqrt() - 1.0)).abs() < 1e-12);
    }
}
