//! fio's JSON output (`--output-format=json` or `json+`, fio 3.x) read as iolab run records, one
//! per job fio reports (with `group_reporting`, one for the group), so a fio run is stored beside
//! iolab's. The job's configuration comes from the options fio printed, through the same table as
//! a job file (`plan::fio`), so the same workload has the same configuration key in both tools.
//! Every number is fio's as printed (IOPS, bytes per second, bytes, I/Os, mean and percentile
//! latency, the `json+` bins as the histogram, its CPU figures); what fio does not report (the
//! completion path the device showed, CPU by thread class, energy) is null.
use super::error::RecordError;
use crate::plan::fio::Mapped;
use serde_json::{json, Map, Value};

/// One fio job of the file, ready to store.
pub(crate) struct FioJob {
    /// fio's name for it.
    pub jobname: String,
    /// Its configuration as an iolab plan (one configuration).
    pub plan: Mapped,
    /// Its configuration's key and the job, as the plan's expansion gives them.
    pub key: String,
    pub job: crate::plan::Job,
    /// The run record (`record::RunRecord`'s shape, with fio's numbers and a `tool` object).
    pub record: Value,
    /// What identifies it across imports and databases: the fio document and the job's place.
    pub identity: String,
}

/// What a fio JSON file holds.
pub(crate) struct FioFile {
    /// `fio version`, e.g. fio-3.33.
    pub version: String,
    /// Which document was read, where the file has several (`--status-interval`), in words.
    pub note: Option<String>,
    pub jobs: Vec<FioJob>,
}

/// The documents of `text`: one, or the several `--status-interval` writes one after another
/// (each interval's, then the whole run's). Returns the last complete one and, where there were
/// several or the file ends inside one, what was taken.
fn last_document(text: &str) -> Result<(Value, Option<String>), String> {
    // fio may print a line of its own (a warning) before its JSON: the JSON starts at a '{' line.
    let start = if text.trim_start().starts_with('{') { 0 } else { text.find("\n{").map_or(0, |i| i + 1) };
    let mut docs = Vec::new();
    let mut cut = None;
    for d in serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>() {
        match d {
            Ok(v) => docs.push(v),
            Err(e) => {
                cut = Some(e);
                break;
            }
        }
    }
    let n = docs.len();
    let Some(last) = docs.pop() else {
        return Err(match cut {
            Some(e) => format!("not JSON ({e})"),
            None => "empty: no JSON in it".into(),
        });
    };
    let note = match (n, cut) {
        (_, Some(e)) => Some(format!("the last complete of {n} JSON documents (the file ends inside the next one: {e})")),
        (1, None) => None,
        (n, None) => Some(format!("the last of {n} JSON documents (--status-interval writes one per interval; the last is the whole run)")),
    };
    Ok((last, note))
}

/// A JSON value as fio's option text: strings as they are, numbers as written.
fn option_text(v: &Value) -> String {
    v.as_str().map_or_else(|| v.to_string(), str::to_string)
}

/// Read fio's JSON output `text` (the file is called `file` in messages and names). `ignore`:
/// `--fio-ignore`'s options. Err: one line, bad input (not JSON, not fio's, no jobs, a job whose
/// options iolab refuses).
pub(crate) fn read(file: &str, text: &str, ignore: &[String]) -> Result<FioFile, RecordError> {
    let (doc, note) = last_document(text).map_err(|e| RecordError::Import(format!("{file}: {e}")))?;
    let not_fio = |why: &str| RecordError::Import(format!("{file}: not fio's JSON output (--output-format=json): {why}"));
    let version = doc.get("fio version").and_then(Value::as_str).ok_or_else(|| not_fio("it has no \"fio version\""))?.to_string();
    let jobs = doc.get("jobs").and_then(Value::as_array).ok_or_else(|| not_fio("it has no \"jobs\" list"))?;
    if jobs.is_empty() {
        return Err(RecordError::Import(format!("{file}: fio's JSON output has no jobs: nothing to import")));
    }
    let globals: Vec<(String, String)> = match doc.get("global options") {
        Some(Value::Object(o)) => o.iter().map(|(k, v)| (k.clone(), option_text(v))).collect(),
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for (n, j) in jobs.iter().enumerate() {
        let jobname = j.get("jobname").and_then(Value::as_str).ok_or_else(|| not_fio(&format!("job {} has no \"jobname\"", n + 1)))?;
        let own: Vec<(String, String)> = match j.get("job options") {
            Some(Value::Object(o)) => o.iter().map(|(k, v)| (k.clone(), option_text(v))).collect(),
            _ => Vec::new(),
        };
        let printed: Vec<(String, String, String)> = globals
            .iter()
            .map(|(k, v)| (k.clone(), v.clone(), format!("{file}: global options")))
            .chain(own.iter().map(|(k, v)| (k.clone(), v.clone(), format!("{file}: job {}'s options", n + 1))))
            .collect();
        // numjobs clones reported one by one (no group_reporting): each is a part of one run.
        let clones = printed.iter().rev().find(|(k, ..)| k == "numjobs").and_then(|(_, v, _)| v.trim().parse::<u64>().ok()).unwrap_or(1);
        let reported = jobs.iter().filter(|o| o.get("jobname") == j.get("jobname") && o.get("groupid") == j.get("groupid")).count();
        if clones > 1 && reported > 1 {
            return Err(RecordError::Import(format!(
                "fio job '{jobname}' ({file}): numjobs={clones}: fio reported each of its clones alone, and iolab's run is all {clones} together: run fio with group_reporting to import it"
            )));
        }
        let mut printed = printed;
        if let Some(why) = time_based_shown(&printed, j) {
            printed.push(("time_based".into(), "1".into(), format!("{file}: not printed; {why}")));
        }
        let plan = crate::plan::fio::plan_of_printed(file, jobname, &printed, ignore).map_err(RecordError::Import)?;
        let e =
            crate::plan::sweep::expand(&plan.text, &[]).map_err(|e| RecordError::Import(format!("fio job '{jobname}' ({file}): {e}")))?;
        let c = e
            .configs
            .into_iter()
            .next()
            .ok_or_else(|| RecordError::Import(format!("fio job '{jobname}' ({file}): its plan has no configuration")))?;
        let identity = json!({"fio json": doc, "job": n}).to_string();
        let record = record(&doc, &version, j, &c.job, file, note.as_deref(), &printed)?;
        out.push(FioJob { jobname: jobname.to_string(), plan, key: c.key, job: c.job, record, identity });
    }
    Ok(FioFile { version, note, jobs: out })
}

/// fio prints no option written without a value, so a bare `time_based` is missing from its
/// JSON. Without it fio never does more than the job's bytes (`io_size`, else `size`, times
/// `loops` and `numjobs`), so a job that did more ran time_based: Some(why) then, None when the
/// job printed time_based, has no runtime, or did no more than its bytes.
fn time_based_shown(printed: &[(String, String, String)], j: &Value) -> Option<String> {
    let value = |k: &str| printed.iter().rev().find(|(n, ..)| n == k).map(|(_, v, _)| v.as_str());
    value("runtime")?;
    if value("time_based").is_some() {
        return None;
    }
    let kb = if value("kb_base").map(str::trim) == Some("1000") { 1000 } else { 1024 };
    let per_clone = crate::plan::fio::parse::size(value("io_size").or(value("size"))?, kb).ok()?;
    let times = |k: &str| value(k).map_or(Some(1), |v| v.trim().parse::<u64>().ok());
    let bytes = per_clone.checked_mul(times("loops")?)?.checked_mul(times("numjobs")?.max(1))?;
    let done: u64 = ["read", "write", "trim"].iter().filter_map(|d| j.get(*d)?.get("io_bytes")?.as_u64()).sum();
    (done > bytes).then(|| format!("fio did {done} bytes, more than the job's {bytes}, which it does only with time_based"))
}

fn num(v: &Value, k: &str) -> Value {
    v.get(k).filter(|x| x.is_number()).cloned().unwrap_or(Value::Null)
}

/// fio's percentile `p` from its `percentile` map (keys as fio prints them, "99.900000").
fn percentile(map: Option<&Map<String, Value>>, p: f64) -> Value {
    map.and_then(|m| m.iter().find(|(k, _)| k.parse::<f64>().is_ok_and(|x| (x - p).abs() < 1e-9)).map(|(_, v)| v.clone()))
        .unwrap_or(Value::Null)
}

/// One direction of a fio job, its latency from fio's completion latency (`clat_ns`, with its
/// percentiles by default) or its total latency (`lat_ns`, where `lat_percentiles` gave those
/// the percentiles); the `json+` bins, where there are, as the mergeable histogram.
fn direction(d: Option<&Value>) -> Result<(Value, Option<hdrhistogram::Histogram<u64>>), String> {
    let Some(d) = d.filter(|d| d.is_object()) else { return Ok((Value::Null, None)) };
    let ios = d.get("total_ios").and_then(Value::as_u64).unwrap_or(0);
    let has_pct = |k: &str| d.get(k).and_then(|l| l.get("percentile")).is_some_and(Value::is_object);
    let source = if has_pct("clat_ns") || !has_pct("lat_ns") { "clat" } else { "lat" };
    let lat = d.get(format!("{source}_ns")).cloned().unwrap_or(Value::Null);
    let pct = lat.get("percentile").and_then(Value::as_object);
    let mut hist = None;
    if let Some(bins) = lat.get("bins").and_then(Value::as_object).filter(|_| ios > 0) {
        let mut h = crate::engine::recorder::new_histogram();
        for (v, n) in bins {
            let (Ok(v), Some(n)) = (v.parse::<u64>(), n.as_u64()) else {
                return Err(format!("{source}_ns bin '{v}' is not a latency and a count"));
            };
            h.saturating_record_n(v.max(1), n);
        }
        hist = Some(h);
    }
    let lat_ns = (ios > 0 && lat.is_object()).then(|| {
        json!({
            "mean": num(&lat, "mean"),
            "stdev": num(&lat, "stddev"),
            "min": num(&lat, "min"),
            "max": num(&lat, "max"),
            "p50": percentile(pct, 50.0),
            "p90": percentile(pct, 90.0),
            "p99": percentile(pct, 99.0),
            "p99_9": percentile(pct, 99.9),
            "p99_99": percentile(pct, 99.99),
            "p99_999": percentile(pct, 99.999),
        })
    });
    Ok((
        json!({
            "ios": ios,
            "bytes": num(d, "io_bytes"),
            "iops": num(d, "iops"),
            "bw_bytes_per_s": num(d, "bw_bytes"),
            "errors": Value::Null,
            "lat_ns": lat_ns,
            "lat_source": source,
            "lat_histogram": hist.as_ref().and_then(super::encode_histogram),
        }),
        hist,
    ))
}

/// The total of a job: the one direction that did I/O, as fio gave it; with reads and writes,
/// their counts and rates added and the bins merged (fio gives no latency of both together).
fn total(read: &Value, write: &Value, hr: Option<hdrhistogram::Histogram<u64>>, hw: Option<hdrhistogram::Histogram<u64>>) -> Value {
    let ios = |d: &Value| d.get("ios").and_then(Value::as_u64).unwrap_or(0);
    match (ios(read), ios(write)) {
        (_, 0) => read.clone(),
        (0, _) => write.clone(),
        _ => {
            let add = |k: &str| match (read.get(k).and_then(Value::as_f64), write.get(k).and_then(Value::as_f64)) {
                (Some(a), Some(b)) if k == "ios" || k == "bytes" => json!((a + b) as u64),
                (Some(a), Some(b)) => json!(a + b),
                _ => Value::Null,
            };
            let hist = match (hr, hw) {
                (Some(mut a), Some(b)) => a.add(&b).ok().map(|_| a),
                _ => None,
            };
            json!({
                "ios": add("ios"),
                "bytes": add("bytes"),
                "iops": add("iops"),
                "bw_bytes_per_s": add("bw_bytes_per_s"),
                "errors": Value::Null,
                "lat_ns": Value::Null,
                "lat_histogram": hist.as_ref().and_then(super::encode_histogram),
            })
        }
    }
}

/// The run record of fio job `j` of document `doc`.
fn record(
    doc: &Value,
    version: &str,
    j: &Value,
    job: &crate::plan::Job,
    file: &str,
    note: Option<&str>,
    printed: &[(String, String, String)],
) -> Result<Value, RecordError> {
    let name = j.get("jobname").and_then(Value::as_str).unwrap_or("");
    let bad = |e: String| RecordError::Import(format!("fio job '{name}' ({file}): {e}"));
    let (read, hr) = direction(j.get("read")).map_err(bad)?;
    let (write, hw) = direction(j.get("write")).map_err(bad)?;
    let total = total(&read, &write, hr, hw);
    let error = j.get("error").and_then(Value::as_i64).unwrap_or(0);
    // fio's timestamp is when it wrote the report; the job ran for `elapsed` seconds before it.
    let started = match (doc.get("timestamp_ms").and_then(Value::as_f64), j.get("elapsed").and_then(Value::as_f64)) {
        (Some(ms), Some(elapsed)) => json!(ms / 1000.0 - elapsed),
        _ => Value::Null,
    };
    let options: Map<String, Value> = printed.iter().map(|(k, v, _)| (k.clone(), Value::String(v.clone()))).collect();
    let spec = serde_json::to_value(job).map_err(|e| bad(e.to_string()))?;
    Ok(json!({
        "schema_version": super::SCHEMA_VERSION,
        "status": if error == 0 { "ok" } else { "failed" },
        "error": (error != 0).then(|| format!("fio reported error {error} for the job")),
        "tool": {"name": "fio", "version": version},
        "fio": {
            "jobname": name,
            "groupid": num(j, "groupid"),
            "options": options,
            "file": file,
            "document": note,
        },
        "spec": spec,
        "environment": {
            "iolab_version": Value::Null,
            "imported_by": format!("iolab {}", env!("CARGO_PKG_VERSION")),
            "command_line": [],
            "hostname": j.get("hostname").cloned().unwrap_or(Value::Null),
            "kernel": Value::Null,
            "cpu_model": Value::Null,
            "cpu_count": Value::Null,
            "started_at_unix_s": started,
            "clock": Value::Null,
            "targets": [],
            "device_settings": [],
            "settings_changed": [],
            "setup_not_applied": [],
            "placement": Value::Null,
        },
        "results": {
            "window_s": j.get("job_runtime").and_then(Value::as_f64).map(|ms| ms / 1000.0),
            "read": read,
            "write": write,
            "total": total,
            "series": Value::Null,
            "cpu": {
                "user_s": Value::Null,
                "system_s": Value::Null,
                "cores": Value::Null,
                "user_ns_per_io": Value::Null,
                "system_ns_per_io": Value::Null,
                "voluntary_ctx_switches": Value::Null,
                "involuntary_ctx_switches": Value::Null,
                "fio_usr_pct": num(j, "usr_cpu"),
                "fio_sys_pct": num(j, "sys_cpu"),
                "fio_ctx": num(j, "ctx"),
            },
            "verify": Value::Null,
        },
        "cost": Value::Null,
        "energy": Value::Null,
        "completion_path": {
            "requested": job.io.complete.name(),
            "mechanism": Value::Null,
            "expected": Value::Null,
            "reason": "fio reports no completion path",
            "observed": Value::Null,
            "evidence": Value::Null,
            "fell_back": Value::Null,
        },
        "ring": Value::Null,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"fio version": "fio-3.33", "timestamp_ms": 1000000, "global options": {"rw": "randread", "bs": "4K", "direct": "1", "size": "16m", "time_based": "1", "runtime": "1"},
      "jobs": [{"jobname": "j", "groupid": 0, "error": 0, "elapsed": 2, "job_runtime": 1000, "usr_cpu": 11.5, "sys_cpu": 40.25, "ctx": 191,
        "job options": {"ioengine": "libaio", "iodepth": "16"},
        "read": {"io_bytes": 4096000, "bw_bytes": 4091908, "iops": 999.000999, "total_ios": 1000,
          "clat_ns": {"min": 10, "max": 900, "mean": 123.5, "stddev": 4.5, "N": 1000,
            "percentile": {"50.000000": 100, "90.000000": 200, "99.000000": 800, "99.900000": 900, "99.990000": 900},
            "bins": {"100": 600, "200": 390, "800": 9, "900": 1}},
          "lat_ns": {"min": 11, "max": 901, "mean": 125.0, "stddev": 4.0, "N": 1000}},
        "write": {"io_bytes": 0, "bw_bytes": 0, "iops": 0.0, "total_ios": 0, "clat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0}}}]}"#;

    #[test]
    fn fios_numbers_are_kept_as_fio_printed_them() {
        let f = read("r.json", DOC, &[]).unwrap();
        assert_eq!(f.version, "fio-3.33");
        assert!(f.note.is_none());
        let j = &f.jobs[0];
        let r = &j.record;
        assert_eq!(r["tool"], json!({"name": "fio", "version": "fio-3.33"}));
        assert_eq!(r["results"]["read"]["iops"].as_f64(), Some(999.000999));
        assert_eq!(r["results"]["total"]["iops"].as_f64(), Some(999.000999));
        assert_eq!(r["results"]["read"]["lat_ns"]["p99"], 800);
        assert_eq!(r["results"]["read"]["lat_ns"]["p99_999"], Value::Null, "fio printed no 99.999th");
        assert_eq!(r["results"]["read"]["lat_source"], "clat");
        assert_eq!(r["results"]["cpu"]["fio_sys_pct"].as_f64(), Some(40.25));
        assert_eq!(r["results"]["write"]["lat_ns"], Value::Null);
        assert!(r["results"]["read"]["lat_histogram"].is_string());
        assert_eq!(r["environment"]["started_at_unix_s"].as_f64(), Some(998.0));
        assert!(j.key.contains("interface=libaio") && j.key.contains("qd=16") && j.key.contains("rw=randread"), "{}", j.key);
        // Read back as the store reads a record: fio's numbers, iolab's own CPU unknown.
        let back = super::super::read::Record::of(r);
        assert_eq!((back.results.total.iops, back.results.total.lat_ns.p99, back.results.cpu.cores), (Some(999.000999), Some(800.0), None));
    }

    /// A bare time_based, which fio's JSON leaves out, is seen in what fio did.
    #[test]
    fn a_time_based_fio_left_out_is_seen_in_its_bytes() {
        let bare = DOC.replace("\"time_based\": \"1\", ", "").replace("\"size\": \"16m\"", "\"size\": \"1m\"");
        assert!(!bare.contains("time_based"));
        let f = read("r.json", &bare, &[]).unwrap();
        assert_eq!(f.jobs[0].job.timing.budget, crate::plan::Budget::Seconds(1.0), "4096000 bytes done of a 1m job");
        assert!(f.jobs[0].plan.lines.iter().any(|(o, _)| o == "time_based=1"), "{:?}", f.jobs[0].plan.lines);
        // No more than its size done: the job ends at its runtime or its size, whichever first.
        let small = bare.replace("\"size\": \"1m\"", "\"size\": \"1g\"");
        let budget = read("r.json", &small, &[]).unwrap().jobs[0].job.timing.budget;
        assert_eq!(budget, crate::plan::Budget::SecondsOrBytes { seconds: 1.0, bytes: 1 << 30 });
    }

    #[test]
    fn status_interval_files_give_their_last_document() {
        let interim = DOC.replace("999.000999", "5.0");
        let f = read("r.json", &format!("{interim}\n{DOC}\n"), &[]).unwrap();
        assert!(f.note.as_deref().unwrap().starts_with("the last of 2 JSON documents"), "{:?}", f.note);
        assert_eq!(f.jobs[0].record["results"]["read"]["iops"].as_f64(), Some(999.000999));
        let f = read("r.json", &format!("{DOC}\n{}", &interim[..100]), &[]).unwrap();
        assert!(f.note.as_deref().unwrap().starts_with("the last complete of 1 JSON documents"), "{:?}", f.note);
        assert_eq!(f.jobs[0].record["results"]["read"]["iops"].as_f64(), Some(999.000999));
    }

    #[test]
    fn what_is_not_fios_is_refused_in_one_line() {
        let e = |t: &str| read("r.json", t, &[]).err().unwrap().to_string();
        assert!(e("hello").starts_with("r.json: not JSON"), "{}", e("hello"));
        assert!(e("").starts_with("r.json: empty"), "{}", e(""));
        assert!(e("{\"jobs\": []}").contains("not fio's JSON output (--output-format=json): it has no \"fio version\""));
        assert!(e("{\"fio version\": \"fio-3.33\", \"jobs\": []}").contains("has no jobs"));
        let replay = DOC.replace("\"iodepth\": \"16\"", "\"iodepth\": \"16\", \"read_iolog\": \"x.log\"");
        assert!(e(&replay).starts_with("fio job 'j' (r.json: job 1's options): read_iolog=x.log:"), "{}", e(&replay));
        let clones = DOC.replace("\"iodepth\": \"16\"", "\"iodepth\": \"16\", \"numjobs\": \"2\"");
        let v: Value = serde_json::from_str(&clones).unwrap();
        let mut two = v.clone();
        two["jobs"].as_array_mut().unwrap().push(v["jobs"][0].clone());
        assert!(e(&two.to_string()).contains("numjobs=2: fio reported each of its clones alone"));
        assert!(read("r.json", &clones, &[]).is_ok(), "one entry of two clones: group_reporting");
    }
}
