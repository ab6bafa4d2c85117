//! `iolab energy import`: a meter logger's file attached to stored runs afterwards, for the
//! whole-system wall power S1 and S3 measured with a plug-in logger read after the experiment.
//! Each run's window (its record's UNIX start and end) is integrated over the log by the same
//! rules as a log given to the run; a run the log does not cover keeps no meter energy and says
//! why in its record. Importing again replaces what an earlier import attached.
use crate::energy::record::EnergyRecord;
use crate::energy::{EnergyConfig, EnergyReport, MeterLogFile};
use crate::failure::Failure;
use crate::record::read::Record;
use crate::store::{RunFilter, Store};
use serde_json::Value;
use std::path::Path;

/// What the import did to each run.
pub enum Attached {
    /// The log covered the run: its mean wall power and the covered fraction of its window.
    Measured { watts: f64, coverage: f64, iops_per_joule: Option<f64> },
    /// No meter energy for the run, and why.
    Uncovered(String),
}

/// The meter's reasons carry this mark, so a later import replaces them.
const REASON: &str = "meter (imported): ";

/// Attach the log at `log` to every stored run (of `sweep`, when given): (run id, outcome).
/// Err: bad input (no database, a log that cannot be read, no such sweep, no runs), or the
/// database's own failure, each of its kind.
pub fn import(db: &Path, log: &Path, sweep: Option<i64>, cfg: &EnergyConfig) -> Result<Vec<(i64, Attached)>, Failure> {
    if !crate::store::exists(db) {
        return Err(Failure::invalid(format!("no results database at {}", crate::secret::redact_path(db))));
    }
    let file = MeterLogFile::load(log, cfg).map_err(|e| e.context(|m| format!("meter log {m}")))?;
    let mut store = Store::open(db)?;
    if let Some(id) = sweep {
        store.sweep(id)?.ok_or_else(|| {
            Failure::invalid(format!("{} has no sweep {id} (see iolab results --sweeps)", crate::secret::redact_path(db)))
        })?;
    }
    let runs = store.list_runs(&RunFilter { sweep, ..Default::default() })?;
    if runs.is_empty() {
        return Err(Failure::invalid(format!(
            "{} has no stored runs{} to attach the log to",
            crate::secret::redact_path(db),
            sweep.map(|s| format!(" in sweep {s}")).unwrap_or_default()
        )));
    }
    let mut out = Vec::new();
    for row in runs {
        let Some(record) = store.run_record(row.id)? else { continue };
        let (energy, attached) = attach(&file, &record);
        if let Some(energy) = energy {
            store.replace_energy(row.id, &energy)?;
        }
        out.push((row.id, attached));
    }
    Ok(out)
}

/// The record's energy part, typed (`energy::record::EnergyRecord`): an empty one where the
/// record has none (a run that measured no energy). Err: a part there that is not an energy
/// record, which is then left as it is.
fn energy_of(record: &Value) -> Result<EnergyRecord, String> {
    match record.get("energy") {
        Some(e) if e.is_object() => serde_json::from_value(e.clone()).map_err(|e| format!("its energy part cannot be read ({e})")),
        _ => Ok(EnergyRecord { report: EnergyReport::unavailable(Vec::new()), ..Default::default() }),
    }
}

/// The record's energy with the log's energy for its window, or the reason there is none
/// (None: the record's energy part cannot be read, and stays as it was).
fn attach(file: &MeterLogFile, record: &Value) -> (Option<EnergyRecord>, Attached) {
    let mut energy = match energy_of(record) {
        Ok(e) => e,
        Err(why) => return (None, Attached::Uncovered(why)),
    };
    let report = &mut energy.report;
    // An earlier import's source and reasons give way to this one's.
    report.sources.retain(|s| !(s.source == "meter" && s.method.starts_with(REASON_METHOD)));
    report.reasons.retain(|r| !r.starts_with(REASON));
    let window = (report.window_start_unix_s, report.window_end_unix_s);
    let outcome = if window.0 <= 0.0 || window.1 <= window.0 {
        Err("the record has no measured window in UNIX time (recorded by an iolab before energy measurement, or no window was reached)"
            .to_string())
    } else {
        file.over(window)
    };
    let attached = match outcome {
        Ok(mut source) => {
            source.method = format!("{REASON_METHOD}{}", source.method);
            let total = &Record::of(record).results.total;
            // The same per-joule rule as a log given to the run (coverage of at least 90 %).
            let mut alone = EnergyReport::unavailable(Vec::new());
            alone.sources.push(source);
            alone.with_io(total.ios.unwrap_or(0), total.bytes.unwrap_or(0));
            let source = alone.sources.remove(0);
            let a = Attached::Measured { watts: source.mean_watts, coverage: source.coverage, iops_per_joule: source.iops_per_joule };
            report.sources.push(source);
            a
        }
        Err(why) => {
            report.reasons.push(format!("{REASON}{why}"));
            Attached::Uncovered(why)
        }
    };
    report.status = if report.sources.is_empty() { "unavailable" } else { "measured" }.into();
    (Some(energy), attached)
}

/// How an imported source's method begins, so it is told from a log given to the run itself.
const REASON_METHOD: &str = "imported afterwards: ";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A log of 100 W from t = 1000 s to 1100 s, ten samples a second.
    fn log() -> (tempfile::TempDir, MeterLogFile) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("wall.csv");
        let mut text = String::from("timestamp,watts\n");
        (0..1000).for_each(|i| text += &format!("{:.1},100\n", 1000.0 + i as f64 / 10.0));
        std::fs::write(&p, text).unwrap();
        let file = MeterLogFile::load(&p, &EnergyConfig::default()).unwrap();
        (dir, file)
    }

    #[test]
    fn the_import_replaces_an_earlier_one_and_keeps_the_rest_of_the_energy_record() {
        let (_dir, file) = log();
        let record = json!({
            "results": {"total": {"ios": 1000, "bytes": 4096000}},
            "energy": {
                "status": "measured", "window_s": 10.0, "window_start_unix_s": 1010.0, "window_end_unix_s": 1020.0,
                "reasons": ["rapl: no permission", "meter (imported): an earlier import"],
                "sources": [
                    {"source": "rapl", "scope": "package", "method": "powercap", "joules": 50.0, "mean_watts": 5.0, "window_s": 10.0, "coverage": 1.0},
                    {"source": "meter", "scope": "wall_ac", "method": "imported afterwards: old", "joules": 1.0, "mean_watts": 0.1, "window_s": 10.0, "coverage": 1.0}
                ],
                "idle_baseline": null,
                "dynamic": []
            }
        });
        let (energy, attached) = attach(&file, &record);
        let e = serde_json::to_value(energy.unwrap()).unwrap();
        assert!(matches!(attached, Attached::Measured { watts, .. } if (watts - 100.0).abs() < 1e-6));
        let methods: Vec<&str> = e["sources"].as_array().unwrap().iter().map(|s| s["method"].as_str().unwrap()).collect();
        assert_eq!(methods.len(), 2, "{e}");
        assert_eq!(methods[0], "powercap");
        assert!(methods[1].starts_with("imported afterwards: ") && !methods[1].ends_with("old"), "{e}");
        assert_eq!(e["reasons"], json!(["rapl: no permission"]));
        assert_eq!((e["status"].as_str(), e["window_start_unix_s"].as_f64()), (Some("measured"), Some(1010.0)));
        assert!(e["sources"][1]["iops_per_joule"].as_f64().unwrap() > 0.0, "{e}");
    }

    #[test]
    fn a_record_without_energy_or_window_says_why_and_one_unreadable_is_left_alone() {
        let (_dir, file) = log();
        let (energy, attached) = attach(&file, &json!({"results": {}}));
        let e = serde_json::to_value(energy.unwrap()).unwrap();
        assert!(matches!(&attached, Attached::Uncovered(why) if why.contains("no measured window")));
        assert_eq!(e["status"], "unavailable");
        assert!(e["reasons"][0].as_str().unwrap().starts_with(REASON), "{e}");
        let (energy, attached) = attach(&file, &json!({"energy": {"sources": "not a list"}}));
        assert!(energy.is_none());
        assert!(matches!(&attached, Attached::Uncovered(why) if why.contains("cannot be read")));
    }
}
