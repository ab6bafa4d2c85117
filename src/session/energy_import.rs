//! `iolab energy import`: a meter logger's file attached to stored runs afterwards, for the
//! whole-system wall power S1 and S3 measured with a plug-in logger read after the experiment.
//! Each run's window (its record's UNIX start and end) is integrated over the log by the same
//! rules as a log given to the run; a run the log does not cover keeps no meter energy and says
//! why in its record. Importing again replaces what an earlier import attached.
use crate::energy::{EnergyConfig, EnergyReport, MeterLogFile};
use crate::failure::Failure;
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
    let file = MeterLogFile::load(log, cfg).map_err(|e| Failure::invalid(format!("meter log {e}")))?;
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
        store.replace_energy(row.id, &energy)?;
        out.push((row.id, attached));
    }
    Ok(out)
}

/// The record's energy report with the log's energy for its window, or the reason there is none.
fn attach(file: &MeterLogFile, record: &Value) -> (Value, Attached) {
    let mut energy = match record.get("energy") {
        Some(e) if e.is_object() => e.clone(),
        _ => serde_json::json!({ "status": "unavailable", "reasons": [], "sources": [] }),
    };
    for list in ["sources", "reasons"] {
        if !energy[list].is_array() {
            energy[list] = Value::Array(Vec::new());
        }
    }
    // An earlier import's source and reasons give way to this one's.
    if let Some(s) = energy["sources"].as_array_mut() {
        s.retain(|s| !(s["source"] == "meter" && s["method"].as_str().is_some_and(|m| m.starts_with(REASON_METHOD))));
    }
    if let Some(r) = energy["reasons"].as_array_mut() {
        r.retain(|r| !r.as_str().is_some_and(|r| r.starts_with(REASON)));
    }
    let window = (energy["window_start_unix_s"].as_f64().unwrap_or(0.0), energy["window_end_unix_s"].as_f64().unwrap_or(0.0));
    let outcome = if window.0 <= 0.0 || window.1 <= window.0 {
        Err("the record has no measured window in UNIX time (recorded by an iolab before energy measurement, or no window was reached)"
            .to_string())
    } else {
        file.over(window)
    };
    let attached = match outcome {
        Ok(mut source) => {
            source.method = format!("{REASON_METHOD}{}", source.method);
            let total = &record["results"]["total"];
            let (ios, bytes) = (total["ios"].as_u64().unwrap_or(0), total["bytes"].as_u64().unwrap_or(0));
            // The same per-joule rule as a log given to the run (coverage of at least 90 %).
            let mut report = EnergyReport::unavailable(Vec::new());
            report.sources.push(source);
            report.with_io(ios, bytes);
            let source = report.sources.remove(0);
            let a = Attached::Measured { watts: source.mean_watts, coverage: source.coverage, iops_per_joule: source.iops_per_joule };
            if let Some(s) = energy["sources"].as_array_mut() {
                s.push(serde_json::to_value(&source).expect("a source serialises"));
            }
            a
        }
        Err(why) => {
            if let Some(r) = energy["reasons"].as_array_mut() {
                r.push(format!("{REASON}{why}").into());
            }
            Attached::Uncovered(why)
        }
    };
    let measured = energy["sources"].as_array().is_some_and(|s| !s.is_empty());
    energy["status"] = if measured { "measured" } else { "unavailable" }.into();
    (energy, attached)
}

/// How an imported source's method begins, so it is told from a log given to the run itself.
const REASON_METHOD: &str = "imported afterwards: ";
