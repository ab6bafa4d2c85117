//! The two study-level reductions the report needs beyond single comparisons: the slowdown
//! table (HotStorage'23 Table 2) and the winner of one tile of the energy-efficiency map
//! (HotStorage'22). Pure functions on replicate values; rules in docs/report.md.
use super::compare::{self, Metric};
use super::stats::{self, TTest};
use serde::Serialize;

/// One configuration's row of a slowdown table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlowdownRow {
    pub name: String,
    /// The row's value in each column (e.g. read p50, read p99, write p50, write p99); None where
    /// the configuration has no measurement.
    pub values: Vec<Option<f64>>,
    /// Mean over the columns the row has of value / the column's smallest value; None when the
    /// row has no column with a positive smallest value.
    pub slowdown: Option<f64>,
}

/// Slowdown of each configuration against the fastest, column by column (lower is better in
/// every column), averaged over the columns the configuration has. Sorted by slowdown, fastest
/// first; rows without a slowdown last, in input order.
pub fn slowdown_table(rows: &[(String, Vec<Option<f64>>)]) -> Vec<SlowdownRow> {
    let columns = rows.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    let fastest: Vec<Option<f64>> = (0..columns)
        .map(|c| rows.iter().filter_map(|(_, v)| v.get(c).copied().flatten()).filter(|x| x.is_finite() && *x > 0.0).reduce(f64::min))
        .collect();
    let mut out: Vec<SlowdownRow> = rows
        .iter()
        .map(|(name, values)| {
            let ratios: Vec<f64> = values
                .iter()
                .zip(&fastest)
                .filter_map(|(v, f)| Some(v.filter(|x| x.is_finite())? / (*f)?))
                .collect();
            SlowdownRow { name: name.clone(), values: values.clone(), slowdown: stats::mean(&ratios) }
        })
        .collect();
    // Stable sort: equal slowdowns keep input order; None sorts after every number.
    out.sort_by(|a, b| match (a.slowdown, b.slowdown) {
        (Some(x), Some(y)) => x.total_cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => std::cmp::Ordering::Equal,
    });
    out
}

/// How sure the winner of a tile is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TileCall {
    /// Only one method measured in this tile.
    Alone,
    /// Best and second differ: Welch's p ≤ α.
    Clear,
    /// Best and second are not distinguishable: Welch's p > α.
    Tie,
    /// A side has fewer than two replicates: no test possible.
    Untested,
}

/// The most efficient method of one tile and how far ahead of the second it is.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TileWinner {
    pub best: String,
    pub best_mean: f64,
    pub second: Option<String>,
    pub second_mean: Option<f64>,
    /// How much better the best is than the second, as a fraction: best / second − 1 when higher
    /// is better, second / best − 1 when lower is better (so 0.12 = 12 % better either way).
    pub margin: Option<f64>,
    /// Welch's test of best against second (the decision).
    pub welch: Option<TTest>,
    /// Student's pooled test of the same pair, for papers that used it; never the decision.
    pub student: Option<TTest>,
    pub call: TileCall,
}

/// The winner of a tile: methods ranked by the mean of `metric` (its direction decides "best"),
/// then best against second with Welch's two-sample test — one comparison, so no multiple-test
/// correction. A tie when p > α. None when no method has a usable value.
pub fn tile_winner(metric: Metric, methods: &[(String, Vec<f64>)], alpha: f64) -> Option<TileWinner> {
    let ranked = compare::rank(metric, methods, alpha);
    let best = ranked.first()?;
    let values = |key: &str| methods.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_slice()).unwrap_or(&[]);
    let Some(second) = ranked.get(1) else {
        return Some(TileWinner { best: best.config_key.clone(), best_mean: best.summary.mean, second: None, second_mean: None,
            margin: None, welch: None, student: None, call: TileCall::Alone });
    };
    let (b, s) = (best.summary.mean, second.summary.mean);
    let margin = if metric.higher_is_better() { (s != 0.0).then(|| b / s - 1.0) } else { (b != 0.0).then(|| s / b - 1.0) };
    let welch = stats::welch_t_test(values(&best.config_key), values(&second.config_key));
    let student = stats::student_t_test(values(&best.config_key), values(&second.config_key));
    let call = match welch {
        None => TileCall::Untested,
        Some(t) if t.p > alpha => TileCall::Tie,
        Some(_) => TileCall::Clear,
    };
    Some(TileWinner { best: best.config_key.clone(), best_mean: b, second: Some(second.config_key.clone()), second_mean: Some(s),
        margin, welch, student, call })
}
