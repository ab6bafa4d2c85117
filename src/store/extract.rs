//! From a run record (the JSON value of `record::RunRecord`) to the columns, histograms and
//! series the database keeps, and back.

use super::columns::Metrics;
use rusqlite::types::Value as Sql;
use serde_json::{Map, Value};

pub const DIRECTIONS: [&str; 3] = ["read", "write", "total"];

/// The value at a dotted path, e.g. `results.total.lat_ns.p99`.
pub fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k)).filter(|v| !v.is_null())
}

fn real(v: &Value, path: &str) -> Sql {
    at(v, path).and_then(Value::as_f64).map_or(Sql::Null, Sql::Real)
}

fn int(v: &Value, path: &str) -> Sql {
    match at(v, path) {
        Some(x) => x.as_i64().or_else(|| x.as_u64().map(|u| u as i64)).map_or(Sql::Null, Sql::Integer),
        None => Sql::Null,
    }
}

fn text(v: &Value, path: &str) -> Sql {
    at(v, path).and_then(Value::as_str).map_or(Sql::Null, |s| Sql::Text(s.to_string()))
}

fn boolean(v: &Value, path: &str) -> Sql {
    at(v, path).and_then(Value::as_bool).map_or(Sql::Null, |b| Sql::Integer(b as i64))
}

/// A required spec field, as text or integer.
fn need(path: &str, col: Sql) -> Result<Sql, String> {
    if matches!(col, Sql::Null) {
        Err(format!("run record has no usable {path}"))
    } else {
        Ok(col)
    }
}

/// What `record_run` writes for one record.
pub struct Extracted {
    /// (column, value) for the `runs` row, without the store's own columns; `status` first.
    pub columns: Vec<(&'static str, Sql)>,
    /// The record with histograms set to null and the series emptied (they live in their own
    /// tables and are put back by `reassemble`).
    pub stripped: Value,
    /// (direction, base64 text) as found in the record; decoded inside the transaction.
    pub histograms: Vec<(&'static str, String)>,
    /// The per-second points as found in the record.
    pub series: Vec<Value>,
}

pub fn extract(record: &Value) -> Result<Extracted, String> {
    if !record.is_object() {
        return Err("run record is not a JSON object".into());
    }
    let status = text(record, "status");
    let status = need("status", status)?;
    if !at(record, "spec").is_some_and(Value::is_object) {
        return Err("run record has no spec".into());
    }
    let r = record;
    let started = at(r, "environment.started_at_unix_s").and_then(Value::as_f64).unwrap_or_else(super::now);
    let devices: Vec<&str> = at(r, "environment.targets")
        .and_then(Value::as_array)
        .map(|ts| ts.iter().filter_map(|t| t.get("device").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    let targets = at(r, "spec.targets").cloned().unwrap_or(Value::Array(vec![]));
    let mut columns = vec![
        ("status", status),
        ("error", text(r, "error")),
        ("record_schema", int(r, "schema_version")),
        ("started_at", Sql::Real(started)),
        ("hostname", text(r, "environment.hostname")),
        ("kernel", text(r, "environment.kernel")),
        ("iolab_version", text(r, "environment.iolab_version")),
        ("devices", if devices.is_empty() { Sql::Null } else { Sql::Text(devices.join(",")) }),
        ("interface", need("spec.interface", text(r, "spec.interface"))?),
        ("submit", need("spec.submit", text(r, "spec.submit"))?),
        ("complete", need("spec.complete", text(r, "spec.complete"))?),
        ("rw", need("spec.rw", text(r, "spec.rw"))?),
        ("write_mix", need("spec.write_mix", int(r, "spec.write_mix"))?),
        ("bs", need("spec.bs", int(r, "spec.bs"))?),
        ("qd", need("spec.qd", int(r, "spec.qd"))?),
        ("threads", need("spec.threads", int(r, "spec.threads"))?),
        ("batch_submit", need("spec.batch_submit", int(r, "spec.batch_submit"))?),
        ("batch_reap", need("spec.batch_reap", int(r, "spec.batch_reap"))?),
        ("direct", need("spec.direct", boolean(r, "spec.direct"))?),
        ("budget_kind", text(r, "spec.budget.kind")),
        ("budget_value", real(r, "spec.budget.value")),
        ("targets", Sql::Text(targets.to_string())),
    ];
    columns.extend(Metrics::of(&crate::record::read::Record::of(r)).values());

    let mut stripped = record.clone();
    let mut histograms = Vec::new();
    let mut series = Vec::new();
    if let Some(results) = stripped.get_mut("results").and_then(Value::as_object_mut) {
        for d in DIRECTIONS {
            if let Some(h) = results.get_mut(d).and_then(Value::as_object_mut).and_then(|o| o.get_mut("lat_histogram")) {
                match h.take() {
                    Value::String(s) => histograms.push((d, s)),
                    Value::Null => {}
                    other => return Err(format!("run record results.{d}.lat_histogram is not a string: {other}")),
                }
            }
        }
        if let Some(s) = results.get_mut("series") {
            match s {
                Value::Array(a) => series = std::mem::take(a),
                Value::Null => {}
                _ => return Err("run record results.series is not an array".into()),
            }
        }
    }
    Ok(Extracted { columns, stripped, histograms, series })
}

/// One per-second point split into its columns: (t, read_iops, write_iops, mean_lat_ns, extra).
pub fn series_point(p: &Value) -> Result<(i64, Sql, Sql, Sql, Sql), String> {
    let o = p.as_object().ok_or_else(|| format!("run record series point is not an object: {p}"))?;
    let t = o.get("t").and_then(Value::as_u64).ok_or_else(|| format!("run record series point has no second t: {p}"))?;
    let mut extra = Map::new();
    for (k, v) in o {
        if !matches!(k.as_str(), "t" | "read_iops" | "write_iops" | "mean_lat_ns") {
            extra.insert(k.clone(), v.clone());
        }
    }
    let n = |k: &str| o.get(k).and_then(Value::as_u64).map_or(Sql::Null, |x| Sql::Integer(x as i64));
    Ok((
        t as i64,
        n("read_iops"),
        n("write_iops"),
        o.get("mean_lat_ns").and_then(Value::as_f64).map_or(Sql::Null, Sql::Real),
        if extra.is_empty() { Sql::Null } else { Sql::Text(Value::Object(extra).to_string()) },
    ))
}

/// Rebuild a series point from its columns.
pub fn point(t: i64, read: Option<i64>, write: Option<i64>, mean: Option<f64>, extra: Option<String>) -> Value {
    let mut o = Map::new();
    o.insert("t".into(), Value::from(t));
    o.insert("read_iops".into(), read.map_or(Value::Null, Value::from));
    o.insert("write_iops".into(), write.map_or(Value::Null, Value::from));
    o.insert("mean_lat_ns".into(), mean.map_or(Value::Null, Value::from));
    if let Some(Ok(Value::Object(x))) = extra.map(|s| serde_json::from_str::<Value>(&s)) {
        o.extend(x);
    }
    Value::Object(o)
}

/// Put histograms (base64 text) and the series back into a stripped record.
pub fn reassemble(record: &mut Value, histograms: Vec<(String, String)>, series: Vec<Value>) {
    if let Some(results) = record.get_mut("results").and_then(Value::as_object_mut) {
        for (d, h) in histograms {
            if let Some(o) = results.get_mut(&d).and_then(Value::as_object_mut) {
                o.insert("lat_histogram".into(), Value::String(h));
            }
        }
        if let Some(s) = results.get_mut("series") {
            if s.is_array() {
                *s = Value::Array(series);
            }
        }
    }
}
