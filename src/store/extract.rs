//! From a run record (the JSON value of `record::RunRecord`) to the columns, histograms and
//! series the database keeps, and back.

use super::columns::{self, need};
use super::StoreError;
use crate::record::read::{CpuPart, Record, RunCpu};
use rusqlite::types::Value as Sql;
use serde_json::{Map, Value};

pub const DIRECTIONS: [&str; 3] = ["read", "write", "total"];

/// What `record_run` writes for one record.
pub struct Extracted {
    /// (column, value) for the `runs` row, without the store's own columns (`columns::record_values`).
    pub columns: Vec<(&'static str, Sql)>,
    /// The record with histograms set to null and the series emptied (they live in their own
    /// tables and are put back by `reassemble`).
    pub stripped: Value,
    /// (direction, base64 text) as found in the record; decoded inside the transaction.
    pub histograms: Vec<(&'static str, String)>,
    /// The per-second points as found in the record.
    pub series: Vec<Value>,
    /// Where a profiled run's time went (`profile_parts`).
    pub profile_parts: Vec<ProfilePart>,
}

/// One row of `profile_parts`: a layer of `--profile layers` or a stage of `--profile stages`, or
/// a module or function of the run's own CPU (`--profile layers`).
pub struct ProfilePart {
    pub kind: &'static str,
    pub name: String,
    pub layer: String,
    pub share: Option<f64>,
    pub ns_per_io: Option<f64>,
    pub p50_ns: Option<f64>,
    pub p99_ns: Option<f64>,
    pub requests: Option<u64>,
    /// Layers only, where the CPUs counted them: self cycles and instructions per I/O.
    pub cycles_per_io: Option<f64>,
    pub instructions_per_io: Option<f64>,
}

/// Where a profiled run's time went, as `profile_parts` rows (also the migrations' fill).
pub fn profile_parts(r: &Record) -> Vec<ProfilePart> {
    let layers = r.cost.profile.iter().flat_map(|p| &p.layers).filter_map(|l| {
        let layer = l.layer.clone()?;
        Some(ProfilePart {
            kind: "layer",
            name: layer.clone(),
            layer,
            share: l.self_share,
            ns_per_io: l.self_ns_per_io,
            p50_ns: None,
            p99_ns: None,
            requests: None,
            cycles_per_io: l.self_cycles_per_io,
            instructions_per_io: l.self_instructions_per_io,
        })
    });
    let stages = r.cost.stages.iter().flat_map(|p| &p.stages).filter_map(|s| {
        Some(ProfilePart {
            kind: "stage",
            name: format!("{} -> {}", s.from.as_deref()?, s.to.as_deref()?),
            layer: s.layer.clone()?,
            share: s.share,
            ns_per_io: s.mean_ns,
            p50_ns: s.p50_ns,
            p99_ns: s.p99_ns,
            requests: s.requests,
            cycles_per_io: None,
            instructions_per_io: None,
        })
    });
    let run = r.cost.profile.iter().filter_map(|p| p.run.as_ref());
    let parts = |kind: &'static str, list: fn(&RunCpu) -> &Vec<CpuPart>| {
        run.clone().flat_map(list).filter_map(move |m| {
            let last = if kind == "module" { m.layer.as_deref()? } else { m.function.as_deref()? };
            Some(ProfilePart {
                kind,
                name: format!("{}: {}: {last}", m.space.as_deref()?, m.module.as_deref()?),
                layer: m.layer.clone()?,
                share: m.share,
                ns_per_io: m.ns_per_io,
                p50_ns: None,
                p99_ns: None,
                requests: None,
                cycles_per_io: None,
                instructions_per_io: None,
            })
        })
    };
    layers.chain(stages).chain(parts("module", |r| &r.modules)).chain(parts("function", |r| &r.functions)).collect()
}

pub(crate) fn extract(record: &Value) -> Result<Extracted, StoreError> {
    if !record.is_object() {
        return Err(StoreError::Refused("run record is not a JSON object".into()));
    }
    let r = Record::of(record);
    need("status", Sql::from(r.status.map(|s| s.name().to_string())))?;
    if !record.get("spec").is_some_and(Value::is_object) {
        return Err(StoreError::Refused("run record has no spec".into()));
    }
    let columns = columns::record_values(&r, record)?;

    let mut stripped = record.clone();
    let mut histograms = Vec::new();
    let mut series = Vec::new();
    if let Some(results) = stripped.get_mut("results").and_then(Value::as_object_mut) {
        for d in DIRECTIONS {
            if let Some(h) = results.get_mut(d).and_then(Value::as_object_mut).and_then(|o| o.get_mut("lat_histogram")) {
                match h.take() {
                    Value::String(s) => histograms.push((d, s)),
                    Value::Null => {}
                    other => return Err(StoreError::Refused(format!("run record results.{d}.lat_histogram is not a string: {other}"))),
                }
            }
        }
        if let Some(s) = results.get_mut("series") {
            match s {
                Value::Array(a) => series = std::mem::take(a),
                Value::Null => {}
                _ => return Err(StoreError::Refused("run record results.series is not an array".into())),
            }
        }
    }
    let profile_parts = profile_parts(&r);
    Ok(Extracted { columns, stripped, histograms, series, profile_parts })
}

/// One per-second point split into its columns: (t, read_iops, write_iops, mean_lat_ns, extra).
pub(crate) fn series_point(p: &Value) -> Result<(i64, Sql, Sql, Sql, Sql), StoreError> {
    let o = p.as_object().ok_or_else(|| StoreError::Refused(format!("run record series point is not an object: {p}")))?;
    let t =
        o.get("t").and_then(Value::as_u64).ok_or_else(|| StoreError::Refused(format!("run record series point has no second t: {p}")))?;
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
pub(crate) fn reassemble(record: &mut Value, histograms: Vec<(String, String)>, series: Vec<Value>) {
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
