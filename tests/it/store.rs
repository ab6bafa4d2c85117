//! The results database: sweeps and planned runs, atomic run commits, resume, no duplicates,
//! filters, CSV/JSON export, schema migration, and survival of `kill -9`.
//! The record used throughout is real: produced by `iolab run` once per test binary.
use iolab::failure::Kinded;
use iolab::store::{schema, RunFilter, Store};
use rusqlite::Connection;
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

fn tmp() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("iolab-store-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// The JSON file of one real run record (kept for the whole test binary).
fn record_file() -> &'static Path {
    static FILE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &FILE
        .get_or_init(|| {
            let dir = tmp();
            let json = dir.path().join("run.json");
            let out = Command::new(env!("CARGO_BIN_EXE_iolab"))
                .args(["run", "--ios", "500", "--size", "16m", "-q", "--json"])
                .arg(&json)
                .current_dir(dir.path())
                .output()
                .unwrap();
            assert!(out.status.success(), "iolab run failed: {}", String::from_utf8_lossy(&out.stderr));
            (dir, json)
        })
        .1
}

pub(crate) fn real_record() -> Value {
    serde_json::from_slice(&std::fs::read(record_file()).unwrap()).unwrap()
}

/// A real record with some spec fields changed (as a different configuration would have).
fn record_with(interface: &str, rw: &str, bs: u64) -> Value {
    let mut r = real_record();
    r["spec"]["interface"] = json!(interface);
    r["spec"]["rw"] = json!(rw);
    r["spec"]["bs"] = json!(bs);
    r
}

/// The record of a run that failed before measuring anything.
fn failed_record() -> Value {
    let mut r = real_record();
    r["status"] = json!("failed");
    r["error"] = json!("read of 4096 bytes at offset 8192 on /dev/x failed: EIO, \"quoted\"");
    r["results"] = Value::Null;
    r["cost"] = Value::Null;
    r["completion_path"]["observed"] = Value::Null;
    r
}

fn plan(n: i64, replicates: u32) -> Vec<(i64, u32, String, Value)> {
    let mut v = Vec::new();
    for i in 0..n {
        for rep in 0..replicates {
            let key = format!("cfg{i}");
            v.push((i * replicates as i64 + rep as i64, rep, key, json!({"interface": "psync", "bs": 4096 * (i + 1)})));
        }
    }
    v
}

/// Two records are the same: same structure, strings, integers and booleans, and floats equal
/// to the last bit or two. (serde_json without its `float_roundtrip` feature may parse a float
/// one ulp off, so a float does not always survive text → value → text → value exactly.)
fn assert_same(a: &Value, b: &Value) {
    fn walk(a: &Value, b: &Value, path: &str) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let kx: Vec<_> = x.keys().collect();
                let ky: Vec<_> = y.keys().collect();
                assert_eq!(kx, ky, "keys differ at {path}");
                for (k, v) in x {
                    walk(v, &y[k], &format!("{path}.{k}"));
                }
            }
            (Value::Array(x), Value::Array(y)) => {
                assert_eq!(x.len(), y.len(), "lengths differ at {path}");
                for (i, (v, w)) in x.iter().zip(y).enumerate() {
                    walk(v, w, &format!("{path}[{i}]"));
                }
            }
            (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
                let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
                assert!(x == y || (x - y).abs() <= 4.0 * f64::EPSILON * x.abs().max(y.abs()), "{x} != {y} at {path}");
            }
            _ => assert_eq!(a, b, "differ at {path}"),
        }
    }
    walk(a, b, "record");
}

fn count(db: &Path, sql: &str) -> i64 {
    Connection::open(db).unwrap().query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn open_creates_a_versioned_wal_database() {
    let d = tmp();
    let db = d.path().join("iolab.db");
    assert!(Store::open_existing(&db).unwrap_err().to_string().contains("no results database"));
    let s = Store::open(&db).unwrap();
    assert_eq!(s.schema_version().unwrap(), schema::LATEST);
    assert_eq!(schema::LATEST, 8);
    drop(s);
    let c = Connection::open(&db).unwrap();
    let mode: String = c.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    let meta: String = c.query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0)).unwrap();
    assert_eq!(meta, "8");
    // Reopening an up-to-date database changes nothing.
    let s = Store::open_existing(&db).unwrap();
    assert_eq!(s.schema_version().unwrap(), 8);
}

#[test]
fn sweep_planned_runs_come_back_in_ordinal_order() {
    let d = tmp();
    let mut s = Store::open(&d.path().join("iolab.db")).unwrap();
    let mut runs = plan(4, 3);
    runs.reverse(); // given out of order
    let id = s.create_sweep("qd scan", "interface = [\"psync\"]\n", "hash-a", u64::MAX, &runs).unwrap();
    let planned = s.planned_runs(id).unwrap();
    assert_eq!(planned.len(), 12);
    assert!(planned.windows(2).all(|w| w[0].ordinal < w[1].ordinal));
    assert!(planned.iter().all(|p| p.status == "planned" && p.sweep_id == id));
    assert_eq!(planned[4].config_key, "cfg1");
    assert_eq!(planned[4].replicate, 1);
    assert_eq!(planned[4].spec, json!({"interface": "psync", "bs": 8192}));
    let info = s.sweep(id).unwrap().unwrap();
    assert_eq!((info.seed, info.total, info.pending, info.plan_hash.as_str()), (u64::MAX, 12, 12, "hash-a"));
    assert_eq!(s.sweeps().unwrap(), vec![(id, "qd scan".to_string(), info.created_at, 12, 0, 0)]);

    // A plan with an ordinal twice is refused whole: no sweep, no planned runs.
    let mut bad = plan(2, 1);
    bad[1].0 = bad[0].0;
    let e = s.create_sweep("bad", "", "hash-b", 1, &bad).unwrap_err().to_string();
    assert!(e.contains("ordinal 0 twice"), "{e}");
    assert!(!e.contains('\n'));
    assert_eq!(s.sweeps().unwrap().len(), 1);
    assert_eq!(count(&d.path().join("iolab.db"), "SELECT count(*) FROM planned_runs"), 12);
}

#[test]
fn a_real_record_is_stored_whole_with_its_metrics_histograms_and_series() {
    let d = tmp();
    let db = d.path().join("iolab.db");
    let mut s = Store::open(&db).unwrap();
    let rec = real_record();
    let id = s.record_run(None, &rec).unwrap();

    // The record comes back exactly as given, histograms and series included.
    assert_same(&s.run_record(id).unwrap().unwrap(), &rec);
    assert_eq!(s.run_record(id + 1).unwrap(), None);

    let rows = s.list_runs(&RunFilter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!((r.id, r.sweep_id, r.planned_id, r.replicate, r.config_key.as_deref()), (id, None, None, None, None));
    assert_eq!(r.status, "ok");
    assert_eq!((r.interface.as_str(), r.submit.as_str(), r.complete.as_str(), r.rw.as_str()), ("psync", "syscall", "irq", "randread"));
    assert_eq!((r.bs, r.qd, r.threads, r.direct), (4096, 1, 1, true));
    assert_eq!((r.budget_kind.as_deref(), r.budget_value), (Some("ios"), Some(500.0)));
    assert_eq!(r.metrics.ios, Some(500));
    assert_eq!(r.metrics.iops, rec["results"]["total"]["iops"].as_f64());
    assert_eq!(r.metrics.read_iops, rec["results"]["read"]["iops"].as_f64());
    assert_eq!(r.metrics.write_iops, Some(0.0));
    assert_eq!(r.metrics.bw_bytes_per_s, rec["results"]["total"]["bw_bytes_per_s"].as_f64());
    assert_eq!(r.metrics.lat_mean_ns, rec["results"]["total"]["lat_ns"]["mean"].as_f64());
    assert_eq!(r.metrics.lat_p99_ns, rec["results"]["total"]["lat_ns"]["p99"].as_f64());
    assert_eq!(r.metrics.lat_p99_999_ns, rec["results"]["total"]["lat_ns"]["p99_999"].as_f64());
    assert_eq!(r.metrics.errors, 0);
    assert_eq!(r.metrics.cpu_cores, rec["results"]["cpu"]["cores"].as_f64());
    assert_eq!(r.metrics.busy_cores, rec["cost"]["system"]["busy_cores"].as_f64());
    assert_eq!(r.metrics.unaccounted_fraction, rec["cost"]["accounting"]["unaccounted_fraction"].as_f64());
    assert_eq!(r.metrics.completion_observed.as_deref(), rec["completion_path"]["observed"].as_str());
    assert_eq!(r.metrics.fell_back, Some(false));
    assert_eq!(r.kernel.as_deref(), rec["environment"]["kernel"].as_str());
    assert_eq!(r.hostname.as_deref(), rec["environment"]["hostname"].as_str());
    assert_eq!(r.started_at, rec["environment"]["started_at_unix_s"].as_f64().unwrap());
    assert!(r.targets.is_empty());

    // Histograms are their own rows, decodable HdrHistograms holding every I/O.
    let h = s.histograms(id).unwrap();
    let dirs: Vec<&str> = h.iter().map(|x| x.0.as_str()).collect();
    assert_eq!(dirs, ["read", "total"]); // randread: no write histogram
    use hdrhistogram::serialization::Deserializer;
    let total: hdrhistogram::Histogram<u64> = Deserializer::new().deserialize(&mut &h[1].1[..]).unwrap();
    assert_eq!(total.len(), 500);
    // The stored record text does not carry them twice.
    let stored: String = Connection::open(&db).unwrap().query_row("SELECT record FROM runs", [], |r| r.get(0)).unwrap();
    assert!(!stored.contains("HISTF"));
    // The series is its own rows.
    let series = s.series(id).unwrap();
    assert_eq!(series.len(), rec["results"]["series"].as_array().unwrap().len());
    assert_eq!(series.iter().map(|p| p.read_iops.unwrap()).sum::<u64>(), 500);
    assert_eq!(count(&db, "SELECT count(*) FROM series"), series.len() as i64);
}

#[test]
fn a_failed_run_without_results_is_stored_and_marks_its_planned_run_failed() {
    let d = tmp();
    let mut s = Store::open(&d.path().join("iolab.db")).unwrap();
    let sw = s.create_sweep("s", "", "h", 1, &plan(2, 1)).unwrap();
    let p = s.planned_runs(sw).unwrap();
    let id = s.record_run(Some(p[0].id), &failed_record()).unwrap();
    let r = s.list_runs(&RunFilter::default()).unwrap().remove(0);
    assert_eq!(r.id, id);
    assert_eq!(r.status, "failed");
    assert!(r.error.as_deref().unwrap().contains("EIO"));
    assert_eq!(
        (r.metrics.iops, r.metrics.lat_p99_ns, r.metrics.ios, r.metrics.busy_cores, r.metrics.completion_observed.as_deref()),
        (None, None, None, None, None)
    );
    assert_eq!((r.sweep_id, r.planned_id, r.config_key.as_deref()), (Some(sw), Some(p[0].id), Some("cfg0")));
    assert!(s.histograms(id).unwrap().is_empty());
    assert_same(&s.run_record(id).unwrap().unwrap(), &failed_record());
    assert_eq!(s.planned_runs(sw).unwrap()[0].status, "failed");
    // A failed run is final: --resume does not rerun it.
    assert_eq!(s.pending_runs(sw).unwrap().len(), 1);
}

#[test]
fn a_failure_part_way_through_a_commit_leaves_nothing_behind() {
    let d = tmp();
    let db = d.path().join("iolab.db");
    let mut s = Store::open(&db).unwrap();
    let sw = s.create_sweep("s", "", "h", 1, &plan(1, 1)).unwrap();
    let pid = s.planned_runs(sw).unwrap()[0].id;

    // The run row and the read histogram are inserted before the total histogram fails to decode.
    let mut bad = real_record();
    assert!(bad["results"]["read"]["lat_histogram"].is_string());
    bad["results"]["total"]["lat_histogram"] = json!("not base64 at all!");
    let e = s.record_run(Some(pid), &bad).unwrap_err().to_string();
    assert!(e.contains("results.total.lat_histogram is not base64"), "{e}");
    // A bad series point fails after both histograms went in.
    let mut bad2 = real_record();
    bad2["results"]["series"].as_array_mut().unwrap().push(json!({"read_iops": 1}));
    let e = s.record_run(Some(pid), &bad2).unwrap_err().to_string();
    assert!(e.contains("series point has no second"), "{e}");

    for t in ["runs", "histograms", "series"] {
        assert_eq!(count(&db, &format!("SELECT count(*) FROM {t}")), 0, "{t} has rows left from a failed commit");
    }
    assert_eq!(s.pending_runs(sw).unwrap().len(), 1);
    assert!(s.list_runs(&RunFilter::default()).unwrap().is_empty());
    // The same planned run then commits normally.
    s.record_run(Some(pid), &real_record()).unwrap();
    assert_eq!(count(&db, "SELECT count(*) FROM runs"), 1);
    assert_eq!(count(&db, "SELECT count(*) FROM histograms"), 2);
    assert!(s.pending_runs(sw).unwrap().is_empty());
}

#[test]
fn resume_finds_the_latest_unfinished_sweep_and_only_its_pending_runs() {
    let d = tmp();
    let mut s = Store::open(&d.path().join("iolab.db")).unwrap();
    let old = s.create_sweep("old", "p", "hash", 7, &plan(2, 1)).unwrap();
    let sw = s.create_sweep("s", "p", "hash", 7, &plan(3, 2)).unwrap();
    let _other = s.create_sweep("other", "q", "other-hash", 7, &plan(1, 1)).unwrap();
    assert_eq!(s.unfinished_sweep("hash").unwrap(), Some(sw));
    assert_eq!(s.unfinished_sweep("no-such-hash").unwrap(), None);

    let p = s.planned_runs(sw).unwrap();
    s.record_run(Some(p[0].id), &real_record()).unwrap();
    s.record_run(Some(p[1].id), &real_record()).unwrap();
    s.record_skip(p[3].id, "io_uring not available").unwrap();
    let pending: Vec<i64> = s.pending_runs(sw).unwrap().iter().map(|x| x.ordinal).collect();
    assert_eq!(pending, [2, 4, 5]);
    let all = s.planned_runs(sw).unwrap();
    assert_eq!(all[3].status, "skipped");
    assert_eq!(all[3].reason.as_deref(), Some("io_uring not available"));
    let i = s.sweep(sw).unwrap().unwrap();
    assert_eq!((i.total, i.pending, i.done, i.skipped, i.failed), (6, 3, 2, 1, 0));

    // A reopened store (as after a crash) sees the same.
    drop(s);
    let mut s = Store::open(&d.path().join("iolab.db")).unwrap();
    assert_eq!(s.unfinished_sweep("hash").unwrap(), Some(sw));
    for p in s.pending_runs(sw).unwrap() {
        s.record_run(Some(p.id), &real_record()).unwrap();
    }
    // This sweep is finished; the older one with the same plan still has planned runs.
    assert_eq!(s.unfinished_sweep("hash").unwrap(), Some(old));
    let sweeps = s.sweeps().unwrap();
    assert_eq!((sweeps[1].3, sweeps[1].4, sweeps[1].5), (6, 5, 1));
    assert_eq!(s.list_runs(&RunFilter { sweep: Some(sw), ..Default::default() }).unwrap().len(), 5);
}

#[test]
fn a_planned_run_is_never_stored_twice() {
    let d = tmp();
    let db = d.path().join("iolab.db");
    let mut s = Store::open(&db).unwrap();
    let sw = s.create_sweep("s", "", "h", 1, &plan(3, 1)).unwrap();
    let p = s.planned_runs(sw).unwrap();
    let first = s.record_run(Some(p[0].id), &real_record()).unwrap();
    let e = s.record_run(Some(p[0].id), &real_record()).unwrap_err().to_string();
    assert!(e.contains("already done") && e.contains(&format!("run {first}")), "{e}");
    assert!(s.record_skip(p[0].id, "x").unwrap_err().to_string().contains("already done"));
    s.record_skip(p[1].id, "no device").unwrap();
    assert!(s.record_run(Some(p[1].id), &real_record()).unwrap_err().to_string().contains("already skipped"));
    assert!(s.record_skip(p[1].id, "again").is_err());
    assert!(s.record_run(Some(9999), &real_record()).unwrap_err().to_string().contains("no planned run 9999"));
    assert_eq!(count(&db, "SELECT count(*) FROM runs"), 1);

    // An interrupted run is kept but leaves its planned run to be run again, once.
    let mut int = real_record();
    int["status"] = json!("interrupted");
    s.record_run(Some(p[2].id), &int).unwrap();
    assert_eq!(s.pending_runs(sw).unwrap().len(), 1);
    s.record_run(Some(p[2].id), &real_record()).unwrap();
    assert!(s.record_run(Some(p[2].id), &real_record()).is_err());
    assert_eq!(count(&db, "SELECT count(*) FROM runs WHERE planned_id IS NOT NULL AND status <> 'interrupted'"), 2);
    assert_eq!(
        count(&db, "SELECT count(*) FROM (SELECT planned_id FROM runs WHERE status = 'ok' GROUP BY planned_id HAVING count(*) > 1)"),
        0
    );

    // The database itself refuses a second result, whatever the code above it does.
    let c = Connection::open(&db).unwrap();
    let dup = c.execute(
        "INSERT INTO runs(planned_id, status, recorded_at, started_at, interface, submit, complete, rw, write_mix, bs, qd, threads, \
         batch_submit, batch_reap, direct, targets, errors, record) \
         SELECT planned_id, status, recorded_at, started_at, interface, submit, complete, rw, write_mix, bs, qd, threads, \
         batch_submit, batch_reap, direct, targets, errors, record FROM runs WHERE id = ?1",
        [first],
    );
    assert!(dup.is_err());
}

#[test]
fn filters_select_runs() {
    let d = tmp();
    let mut s = Store::open(&d.path().join("iolab.db")).unwrap();
    let sw = s.create_sweep("s", "", "h", 1, &plan(2, 2)).unwrap();
    let p = s.planned_runs(sw).unwrap();
    s.record_run(Some(p[0].id), &record_with("io_uring", "randread", 4096)).unwrap();
    s.record_run(Some(p[1].id), &record_with("io_uring", "randread", 4096)).unwrap();
    s.record_run(Some(p[2].id), &record_with("libaio", "randwrite", 65536)).unwrap();
    s.record_run(None, &record_with("psync", "randread", 4096)).unwrap();
    s.record_run(None, &failed_record()).unwrap();

    let n = |f: RunFilter| s.list_runs(&f).unwrap().len();
    let t = |x: &str| Some(x.to_string());
    assert_eq!(n(RunFilter::default()), 5);
    assert_eq!(n(RunFilter { sweep: Some(sw), ..Default::default() }), 3);
    assert_eq!(n(RunFilter { sweep: Some(sw + 1), ..Default::default() }), 0);
    assert_eq!(n(RunFilter { interface: t("io_uring"), ..Default::default() }), 2);
    assert_eq!(n(RunFilter { rw: t("randread"), ..Default::default() }), 4);
    assert_eq!(n(RunFilter { rw: t("randread"), interface: t("psync"), ..Default::default() }), 2);
    assert_eq!(n(RunFilter { status: t("failed"), ..Default::default() }), 1);
    assert_eq!(n(RunFilter { config_key: t("cfg0"), ..Default::default() }), 2);
    assert_eq!(n(RunFilter { bs: Some(65536), ..Default::default() }), 1);
    assert_eq!(n(RunFilter { qd: Some(1), threads: Some(1), ..Default::default() }), 5);
    assert_eq!(n(RunFilter { in_sweep: Some(false), ..Default::default() }), 2);
    assert_eq!(n(RunFilter { in_sweep: Some(true), ..Default::default() }), 3);
    assert_eq!(n(RunFilter { hostname: real_record()["environment"]["hostname"].as_str().map(String::from), ..Default::default() }), 5);
    let dev = s.list_runs(&RunFilter::default()).unwrap()[0].devices.clone();
    if let Some(dev) = dev {
        let first = dev.split(',').next().unwrap().to_string();
        assert_eq!(n(RunFilter { device: Some(first), ..Default::default() }), 5);
    }
    assert_eq!(n(RunFilter { device: t("no-such-dev"), ..Default::default() }), 0);
    assert_eq!(n(RunFilter { since: Some(0.0), until: Some(f64::MAX), ..Default::default() }), 5);
    assert_eq!(n(RunFilter { until: Some(0.0), ..Default::default() }), 0);
    // limit keeps the newest, oldest first.
    let last2: Vec<i64> = s.list_runs(&RunFilter { limit: Some(2), ..Default::default() }).unwrap().iter().map(|r| r.id).collect();
    let all: Vec<i64> = s.list_runs(&RunFilter::default()).unwrap().iter().map(|r| r.id).collect();
    assert_eq!(last2, all[3..]);
    let row = s.run(all[2]).unwrap().unwrap();
    assert_eq!((row.interface.as_str(), row.rw.as_str(), row.bs, row.replicate), ("libaio", "randwrite", 65536, Some(0)));
}

/// Split one CSV line (RFC 4180, no embedded newlines) into cells.
fn csv_cells(line: &str) -> Vec<String> {
    let (mut cells, mut cur, mut q, mut chars) = (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, q) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => q = !q,
            (',', false) => cells.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    cells.push(cur);
    cells
}

#[test]
fn csv_export_has_a_header_and_one_row_per_run() {
    let d = tmp();
    let mut s = Store::open(&d.path().join("iolab.db")).unwrap();
    s.record_run(None, &record_with("io_uring", "randread", 4096)).unwrap();
    s.record_run(None, &record_with("libaio", "randread", 8192)).unwrap();
    s.record_run(None, &failed_record()).unwrap();
    let mut out = Vec::new();
    s.export_csv(&RunFilter::default(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    let header = csv_cells(lines[0]);
    for col in [
        "run_id",
        "config_key",
        "interface",
        "rw",
        "bs",
        "qd",
        "threads",
        "iops",
        "bw_bytes_per_s",
        "lat_p99_ns",
        "lat_p99_999_ns",
        "busy_cores",
        "completion_observed",
        "status",
    ] {
        assert!(header.iter().any(|h| h == col), "no {col} column in {header:?}");
    }
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for l in &lines[1..] {
        assert_eq!(csv_cells(l).len(), header.len(), "{l}");
    }
    let r1 = csv_cells(lines[1]);
    assert_eq!(r1[col("interface")], "io_uring");
    assert_eq!(r1[col("iops")].parse::<f64>().unwrap(), real_record()["results"]["total"]["iops"].as_f64().unwrap());
    let r3 = csv_cells(lines[3]);
    assert_eq!(r3[col("status")], "failed");
    assert_eq!(r3[col("iops")], "");
    assert_eq!(r3[col("error")], failed_record()["error"].as_str().unwrap()); // commas and quotes survive
                                                                              // A filter narrows the export.
    let mut out = Vec::new();
    s.export_csv(&RunFilter { interface: Some("libaio".into()), ..Default::default() }, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap().lines().count(), 2);
}

#[test]
fn json_export_is_an_array_of_full_records_with_run_ids() {
    let d = tmp();
    let mut s = Store::open(&d.path().join("iolab.db")).unwrap();
    let mut out = Vec::new();
    s.export_json(&RunFilter::default(), &mut out).unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out).unwrap(), json!([]));

    let sw = s.create_sweep("s", "", "h", 1, &plan(1, 1)).unwrap();
    let pid = s.planned_runs(sw).unwrap()[0].id;
    let a = s.record_run(Some(pid), &real_record()).unwrap();
    let b = s.record_run(None, &failed_record()).unwrap();
    let mut out = Vec::new();
    s.export_json(&RunFilter::default(), &mut out).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    let arr = v.as_array().unwrap();
    assert_eq!(arr.len(), 2);
    assert_eq!(arr[0]["store"]["run_id"], json!(a));
    assert_eq!(arr[0]["store"]["sweep_id"], json!(sw));
    assert_eq!(arr[0]["store"]["planned_id"], json!(pid));
    assert_eq!(arr[0]["store"]["config_key"], json!("cfg0"));
    assert_eq!(arr[1]["store"]["run_id"], json!(b));
    assert_eq!(arr[1]["store"]["sweep_id"], Value::Null);
    let mut first = arr[0].clone();
    first.as_object_mut().unwrap().remove("store");
    assert_same(&first, &real_record());
    assert!(arr[0]["results"]["total"]["lat_histogram"].as_str().unwrap().starts_with("HISTF"));
}

/// The schema as released, before its `runs` columns came from `store::columns`: version 1, and
/// the step to version 2.
const RELEASED_V1: &str = include_str!("../fixtures/store/schema-v1.sql");
const RELEASED_V2: &str = include_str!("../fixtures/store/schema-v2.sql");
const RELEASED_V3: &str = include_str!("../fixtures/store/schema-v3.sql");

/// (table, PRAGMA table_info rows) and (index, SQL) of every table and index, by name.
#[allow(clippy::type_complexity)]
fn layout(c: &Connection) -> (Vec<(String, Vec<(i64, String, String, i64, Option<String>, i64)>)>, Vec<(String, Option<String>)>) {
    let names = |kind: &str| -> Vec<(String, Option<String>)> {
        let mut st = c.prepare("SELECT name, sql FROM sqlite_master WHERE type = ?1 ORDER BY name").unwrap();
        st.query_map([kind], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect()
    };
    let tables = names("table")
        .into_iter()
        .map(|(t, _)| {
            let mut st = c.prepare(&format!("PRAGMA table_info({t})")).unwrap();
            let cols = st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?))).unwrap();
            (t, cols.map(Result::unwrap).collect())
        })
        .collect();
    (tables, names("index"))
}

#[test]
fn the_schema_made_from_the_column_table_is_the_released_one() {
    // Step by step, as text: version 1's CREATE TABLE and version 2's ALTER TABLE lines are made
    // from store::columns, and must not change once released.
    assert_eq!(schema::step(1), RELEASED_V1);
    assert_eq!(schema::step(2), RELEASED_V2);
    assert_eq!(schema::step(3), RELEASED_V3);
    // Column for column (name, type, NOT NULL, default, key) and index for index: a new database,
    // one made by the released SQL, and one migrated from version 1.
    let d = tmp();
    drop(Store::open(&d.path().join("new.db")).unwrap());
    let released = Connection::open(d.path().join("released.db")).unwrap();
    released.execute_batch(RELEASED_V1).unwrap();
    released.execute_batch(RELEASED_V2).unwrap();
    released.execute_batch(RELEASED_V3).unwrap();
    // Steps not yet frozen as fixtures.
    (4..=schema::LATEST).for_each(|v| released.execute_batch(&schema::step(v)).unwrap());
    let old = Connection::open(d.path().join("v1.db")).unwrap();
    old.execute_batch(&format!("{RELEASED_V1}INSERT INTO meta VALUES ('schema_version', '1'); PRAGMA user_version = 1;")).unwrap();
    drop(old);
    drop(Store::open(&d.path().join("v1.db")).unwrap());
    let new = layout(&Connection::open(d.path().join("new.db")).unwrap());
    assert_eq!(new, layout(&released));
    assert_eq!(new, layout(&Connection::open(d.path().join("v1.db")).unwrap()));
    let runs = &new.0.iter().find(|t| t.0 == "runs").unwrap().1;
    // 48 up to version 6; version 7 adds the tool, its version and 12 energy efficiencies;
    // version 8 the file set's 4 spec columns and 9 of its creation and files.
    assert_eq!(runs.len(), 75);
}

#[test]
fn a_version_1_database_is_migrated() {
    let d = tmp();
    let db = d.path().join("v1.db");
    {
        // A database as version 1 of iolab wrote it, with a sweep and a run in it.
        let c = Connection::open(&db).unwrap();
        c.execute_batch(RELEASED_V1).unwrap();
        c.execute_batch(
            "INSERT INTO meta VALUES ('schema_version', '1');
             PRAGMA user_version = 1;
             INSERT INTO sweeps(id, name, plan_text, plan_hash, seed, created_at) VALUES (1, 's', 'p', 'h', 5, 1.0);
             INSERT INTO planned_runs(id, sweep_id, ordinal, replicate, config_key, spec, status)
                 VALUES (1, 1, 0, 0, 'cfg0', '{}', 'done'), (2, 1, 1, 0, 'cfg1', '{}', 'planned');",
        )
        .unwrap();
        let rec = json!({"status": "ok", "completion_path": {"observed": "polled", "fell_back": true},
            "cost": {"stages": {"stages": [{"from": "request issued", "to": "interrupt", "layer": "device (issue to interrupt)",
                "requests": 10, "p50_ns": 30000.0, "p99_ns": 60000.0, "mean_ns": 32000.0, "share": 0.4}]},
                "profile": {"layers": [{"layer": "block layer", "self_share": 0.05, "self_ns_per_io": 900.0}],
                    "run": {"modules": [{"space": "kernel", "module": "nvme", "layer": "device driver", "share": 0.2, "ns_per_io": 500.0}],
                        "functions": [{"space": "kernel", "module": "nvme", "layer": "device driver", "function": "nvme_poll",
                            "share": 0.15, "ns_per_io": 400.0}]}}}});
        c.execute(
            "INSERT INTO runs(id, planned_id, sweep_id, replicate, config_key, status, recorded_at, started_at, interface, submit, \
             complete, rw, write_mix, bs, qd, threads, batch_submit, batch_reap, direct, targets, iops, errors, record) \
             VALUES (1, 1, 1, 0, 'cfg0', 'ok', 2.0, 1.5, 'io_uring', 'syscall', 'poll', 'randread', 50, 4096, 32, 1, 1, 1, 1, '[]', \
             123456.0, 0, ?1)",
            [rec.to_string()],
        )
        .unwrap();
        // No v2 column yet.
        assert!(c.prepare("SELECT completion_observed FROM runs").is_err());
    }
    let mut s = Store::open(&db).unwrap();
    assert_eq!(s.schema_version().unwrap(), schema::LATEST);
    // Version 3 filled the profile parts from the stored record, version 4 the run's modules
    // and functions.
    let parts: Vec<(String, String, f64)> = Connection::open(&db)
        .unwrap()
        .prepare("SELECT kind, name, share FROM profile_parts WHERE run_id = 1 ORDER BY kind")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(
        parts,
        vec![
            ("function".into(), "kernel: nvme: nvme_poll".into(), 0.15),
            ("layer".into(), "block layer".into(), 0.05),
            ("module".into(), "kernel: nvme: device driver".into(), 0.2),
            ("stage".into(), "request issued -> interrupt".into(), 0.4)
        ]
    );
    let rows = s.list_runs(&RunFilter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].metrics.completion_observed.as_deref(), Some("polled")); // filled from the record
    assert_eq!(rows[0].metrics.fell_back, Some(true));
    assert_eq!(rows[0].metrics.iops, Some(123456.0));
    assert_eq!(s.unfinished_sweep("h").unwrap(), Some(1));
    // The migrated database takes new runs and refuses a duplicate as before.
    s.record_run(Some(2), &real_record()).unwrap();
    assert!(s.record_run(Some(1), &real_record()).is_err());
    drop(s);
    let c = Connection::open(&db).unwrap();
    let meta: String = c.query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0)).unwrap();
    assert_eq!(meta, schema::LATEST.to_string());
    let idx: i64 =
        c.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'runs_config_key'", [], |r| r.get(0)).unwrap();
    assert_eq!(idx, 1);
    let uv: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(uv, i64::from(schema::LATEST));
    // Version 6 gave the old run and sweep ids derived from what they hold (the same on every
    // migration of this database); the new run has a random one.
    let (uid, rec): (String, String) =
        c.query_row("SELECT run_uid, record FROM runs WHERE id = 1", [], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
    assert_eq!(uid, schema::derived_run_uid(&rec));
    let sweep: String = c.query_row("SELECT uid FROM sweeps WHERE id = 1", [], |r| r.get(0)).unwrap();
    assert_eq!(sweep, schema::derived_sweep_uid("s", "h", 5, 1.0));
    let fresh: String = c.query_row("SELECT run_uid FROM runs WHERE id = 2", [], |r| r.get(0)).unwrap();
    assert!(fresh.len() == 32 && fresh != uid, "{fresh}");
}

/// A real record as another tool's run (`iolab import fio` stores fio's results so).
fn fio_record() -> Value {
    let mut r = real_record();
    r["tool"] = json!({"name": "fio", "version": "fio-3.33"});
    r
}

/// A real record with an energy report's efficiencies: the drive's, and the system's above idle.
fn efficient_record() -> Value {
    let mut r = real_record();
    r["energy"] = json!({"status": "measured", "sources": [], "efficiency": [
        {"component": "ssd", "source": "s", "scope": "ssd", "mean_watts": 5.0, "iops_per_joule": 1000.0, "bytes_per_joule": 4096000.0},
        {"component": "system", "source": "w", "scope": "wall_ac", "mean_watts": 50.0, "iops_per_joule": 100.0,
         "bytes_per_joule": 409600.0, "iops_per_dynamic_joule": 400.0, "bytes_per_dynamic_joule": 1638400.0}]});
    r
}

/// Every `runs` column of every row, by id, but the run's uid.
fn runs_values(db: &Path) -> Vec<Vec<(String, rusqlite::types::Value)>> {
    let c = Connection::open(db).unwrap();
    let cols: Vec<String> = c
        .prepare("SELECT name FROM pragma_table_info('runs') WHERE name <> 'run_uid' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut st = c.prepare(&format!("SELECT {} FROM runs ORDER BY id", cols.join(", "))).unwrap();
    let rows = st.query_map([], |r| (0..cols.len()).map(|i| Ok((cols[i].clone(), r.get(i)?))).collect()).unwrap();
    rows.map(Result::unwrap).collect()
}

/// The migrations fill in Rust through the reading `record_run` uses: runs stored in a database
/// of version 1 (its released SQL, each column `record_run` wrote then) and migrated to the
/// latest hold, column for column, what the same records stored fresh hold (the completion path
/// of version 2, the tool and efficiencies of version 7).
#[test]
fn a_database_migrated_from_version_1_holds_what_the_same_records_stored_fresh_hold() {
    let d = tmp();
    let fresh = d.path().join("fresh.db");
    let mut s = Store::open(&fresh).unwrap();
    for r in [real_record(), failed_record(), fio_record(), efficient_record()] {
        s.record_run(None, &r).unwrap();
    }
    drop(s);
    let old = d.path().join("v1.db");
    let c = Connection::open(&old).unwrap();
    c.execute_batch(&format!("{RELEASED_V1}INSERT INTO meta VALUES ('schema_version', '1'); PRAGMA user_version = 1;")).unwrap();
    let cols: Vec<String> =
        c.prepare("SELECT name FROM pragma_table_info('runs')").unwrap().query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    c.execute("ATTACH ?1 AS fresh", [fresh.to_str().unwrap()]).unwrap();
    c.execute_batch(&format!("INSERT INTO runs({0}) SELECT {0} FROM fresh.runs; DETACH fresh;", cols.join(", "))).unwrap();
    drop(c);
    let s = Store::open(&old).unwrap();
    assert_eq!(s.schema_version().unwrap(), schema::LATEST);
    let rows = s.list_runs(&RunFilter::default()).unwrap();
    let tools: Vec<(&str, Option<&str>)> = rows.iter().map(|r| (r.tool.as_str(), r.tool_version.as_deref())).collect();
    let iolab = real_record()["environment"]["iolab_version"].as_str().map(String::from);
    assert_eq!(tools, [("iolab", iolab.as_deref()), ("iolab", iolab.as_deref()), ("fio", Some("fio-3.33")), ("iolab", iolab.as_deref())]);
    let m = &rows[3].metrics;
    assert_eq!((m.ssd_iops_per_joule, m.ssd_bytes_per_joule, m.ssd_iops_per_dynamic_joule), (Some(1000.0), Some(4096000.0), None));
    assert_eq!((m.system_iops_per_dynamic_joule, m.cpu_iops_per_joule), (Some(400.0), None));
    assert_eq!(rows[0].metrics.ssd_iops_per_joule, None);
    assert_eq!(s.list_runs(&RunFilter { tool: Some("fio".into()), ..Default::default() }).unwrap().len(), 1);
    drop(s);
    let (a, b) = (runs_values(&fresh), runs_values(&old));
    assert_eq!(a.len(), 4);
    for (x, y) in a.iter().zip(&b) {
        for (cx, cy) in x.iter().zip(y) {
            assert_eq!(cx, cy);
        }
    }
    assert_eq!(a, b);
}

/// fio's runs of a configuration (as `iolab import fio` stores them, with a `tool` object) beside
/// iolab's: `results` says which tool made each and selects by tool, the CSV keeps its released
/// columns first and adds the tool and the efficiencies after them, and `compare --by tool`
/// compares the tools, energy efficiency among the metrics.
#[test]
fn results_and_compare_tell_another_tool_s_runs_apart() {
    let d = tmp();
    let db = d.path().join("iolab.db");
    let mut s = Store::open(&db).unwrap();
    let sw = s.create_sweep("s", "", "h", 1, &plan(1, 6)).unwrap();
    for (i, p) in s.planned_runs(sw).unwrap().iter().enumerate() {
        let mut r = if i < 3 { efficient_record() } else { fio_record() };
        r["results"]["total"]["iops"] = json!(1000.0 + 10.0 * i as f64);
        r["energy"] =
            json!({"efficiency": [{"component": "ssd", "iops_per_joule": if i < 3 { 100.0 + i as f64 } else { 200.0 + i as f64 }}]});
        s.record_run(Some(p.id), &r).unwrap();
    }
    drop(s);
    let db = db.to_str().unwrap();
    let list = crate::common::iolab_in(d.path(), &["results", "--db", db]);
    list.assert_ok();
    let lines: Vec<&str> = list.stdout.lines().collect();
    assert!(lines[0].contains(" tool"), "{}", list.describe());
    assert_eq!(lines.iter().filter(|l| l.contains(" fio ")).count(), 3, "{}", list.describe());
    let fio = crate::common::iolab_in(d.path(), &["results", "--db", db, "--tool", "fio"]);
    assert!(fio.assert_ok().stdout.contains("\n3 runs\n"), "{}", fio.describe());
    let csv = crate::common::iolab_in(d.path(), &["results", "--db", db, "--csv", "-"]);
    let header = csv_cells(csv.assert_ok().stdout.lines().next().unwrap());
    let at = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name} in {header:?}"));
    assert!(at("fell_back") < at("error") && at("error") < at("tool") && at("tool") < at("ssd_iops_per_joule"), "{header:?}");
    let by = crate::common::iolab_in(d.path(), &["compare", "cfg0", "--by", "tool", "--db", db]);
    by.assert_ok();
    assert!(by.stdout.contains("by tool, each against A = iolab") && by.stdout.contains("B = fio"), "{}", by.describe());
    let eff = by.stdout.lines().find(|l| l.starts_with("ssd_iops_per_joule")).unwrap_or_else(|| panic!("{}", by.describe()));
    assert!(eff.contains("faster"), "{}", by.describe());
}

#[test]
fn foreign_newer_and_damaged_databases_are_refused_in_one_line() {
    let d = tmp();
    let newer = d.path().join("newer.db");
    Connection::open(&newer).unwrap().execute_batch("PRAGMA user_version = 99;").unwrap();
    let e = Store::open(&newer).err().unwrap().to_string();
    assert!(e.contains("newer than this iolab"), "{e}");
    let foreign = d.path().join("foreign.db");
    Connection::open(&foreign).unwrap().execute_batch("CREATE TABLE t(x);").unwrap();
    let e = Store::open(&foreign).err().unwrap().to_string();
    assert!(e.contains("not an iolab results database"), "{e}");
    let junk = d.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 4096]).unwrap();
    let e = Store::open(&junk).err().unwrap().to_string();
    assert!(e.contains("junk.db") && !e.contains('\n'), "{e}");
    let e = Store::open(&d.path().join("no/such/dir/iolab.db")).err().unwrap().to_string();
    assert!(e.contains("iolab.db") && !e.contains('\n'), "{e}");
}

/// The exit code says whose the failure is: a database named that iolab cannot use as given is
/// bad input (2), one that fails while it is read (damaged) is the store's (3); each one line.
#[test]
fn a_damaged_database_is_the_store_s_failure_and_a_wrong_one_bad_input() {
    let d = tmp();
    let iolab = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_iolab")).args(args).current_dir(d.path()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(err.lines().count(), 1, "one line on stderr: {err}");
        (out.status.code(), err)
    };
    let damaged = d.path().join("damaged.db");
    Store::open(&damaged).unwrap().record_run(None, &real_record()).unwrap();
    // The header is kept (it is still an SQLite file of iolab's version); the first page's
    // b-tree, which lists the tables, is overwritten.
    let mut bytes = std::fs::read(&damaged).unwrap();
    let page = u16::from_be_bytes([bytes[16], bytes[17]]) as usize;
    bytes[100..page].fill(0xff);
    std::fs::write(&damaged, bytes).unwrap();
    for args in [&["results", "--db", "damaged.db"][..], &["merge", "damaged.db", "--into", "all.db"]] {
        let (code, err) = iolab(args);
        assert_eq!(code, Some(3), "{args:?}: {err}");
        assert!(err.starts_with("iolab: results database") && err.contains("damaged.db") && err.contains("malformed"), "{err}");
    }
    let junk = d.path().join("junk.db");
    std::fs::write(&junk, vec![b'x'; 4096]).unwrap();
    let newer = d.path().join("newer.db");
    Connection::open(&newer).unwrap().execute_batch("PRAGMA user_version = 99;").unwrap();
    for db in ["junk.db", "newer.db", "none.db"] {
        let (code, err) = iolab(&["results", "--db", db]);
        assert_eq!(code, Some(2), "{db}: {err}");
    }
    assert_eq!(Store::open(&junk).unwrap_err().kind(), iolab::failure::FailureKind::Invalid);
    assert_eq!(Store::open_existing(&damaged).unwrap_err().kind(), iolab::failure::FailureKind::Store);
}

#[test]
fn a_reader_sees_committed_runs_while_a_writer_is_open() {
    let d = tmp();
    let db = d.path().join("iolab.db");
    let mut w = Store::open(&db).unwrap();
    let r = Store::open(&db).unwrap();
    assert!(r.list_runs(&RunFilter::default()).unwrap().is_empty());
    w.record_run(None, &real_record()).unwrap();
    assert_eq!(r.list_runs(&RunFilter::default()).unwrap().len(), 1);
    let mut w2 = Store::open(&db).unwrap();
    w2.record_run(None, &real_record()).unwrap();
    assert_eq!(r.list_runs(&RunFilter::default()).unwrap().len(), 2);
}

const CHILD_DB: &str = "IOLAB_STORE_TEST_CHILD_DB";
const CHILD_RECORD: &str = "IOLAB_STORE_TEST_CHILD_RECORD";

/// Not a test on its own: the writer process that `runs_survive_kill_9` kills.
#[test]
fn kill9_child_writer() {
    let (Ok(db), Ok(rec)) = (std::env::var(CHILD_DB), std::env::var(CHILD_RECORD)) else { return };
    let rec: Value = serde_json::from_slice(&std::fs::read(rec).unwrap()).unwrap();
    let mut s = Store::open(Path::new(&db)).unwrap();
    let sw = match s.unfinished_sweep("kill9").unwrap() {
        Some(sw) => sw,
        None => s.create_sweep("kill9", "", "kill9", 1, &plan(10_000, 1)).unwrap(),
    };
    let mut out = std::io::stdout().lock();
    use std::io::Write;
    for p in s.pending_runs(sw).unwrap() {
        let id = s.record_run(Some(p.id), &rec).unwrap();
        writeln!(out, "committed {} {id}", p.id).unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn runs_survive_kill_9_and_resume_loses_or_duplicates_none() {
    let d = tmp();
    let db = d.path().join("iolab.db");
    let mut committed = Vec::new();
    for round in 0..2 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["store::kill9_child_writer", "--exact", "--nocapture", "--test-threads=1"])
            .env(CHILD_DB, &db)
            .env(CHILD_RECORD, record_file())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let mut seen = 0;
        let mut parse = |l: String| {
            // The harness's "test kill9_child_writer ... " may precede the first report.
            if let Some(rest) = l.find("committed ").map(|i| &l[i + "committed ".len()..]) {
                let mut it = rest.split(' ').map(|x| x.parse::<i64>().unwrap());
                committed.push((it.next().unwrap(), it.next().unwrap()));
                return true;
            }
            false
        };
        while seen < 25 + round * 10 {
            if parse(lines.next().expect("the writer stopped early").unwrap()) {
                seen += 1;
            }
        }
        child.kill().unwrap(); // SIGKILL, most likely mid-way through a commit
        child.wait().unwrap();
        // What it reported before dying, still in the pipe.
        for l in lines {
            parse(l.unwrap());
        }
    }
    let s = Store::open(&db).unwrap();
    let sw = s.unfinished_sweep("kill9").unwrap().expect("the sweep is unfinished");
    // Every run reported committed is there, with its planned run done.
    for (pid, run) in &committed {
        let row = s.run(*run).unwrap().expect("a committed run was lost");
        assert_eq!(row.planned_id, Some(*pid));
    }
    let info = s.sweep(sw).unwrap().unwrap();
    let runs = s.list_runs(&RunFilter { sweep: Some(sw), ..Default::default() }).unwrap();
    // Nothing beyond what was committed went half in: one run per done planned run, no
    // duplicates, each with both histograms and its series.
    assert_eq!(runs.len(), info.done);
    // Each writer may have committed one run it did not live to report.
    assert!(info.done >= committed.len() && info.done <= committed.len() + 2, "{} done, {} reported", info.done, committed.len());
    let mut pids: Vec<i64> = runs.iter().map(|r| r.planned_id.unwrap()).collect();
    pids.dedup();
    assert_eq!(pids.len(), runs.len());
    // The second writer resumed where the first was killed: done runs are the first N ordinals.
    let planned = s.planned_runs(sw).unwrap();
    assert!(planned.iter().take(info.done).all(|p| p.status == "done"));
    assert!(planned.iter().skip(info.done).all(|p| p.status == "planned"));
    let n_series = real_record()["results"]["series"].as_array().unwrap().len() as i64;
    assert_eq!(count(&db, "SELECT count(*) FROM histograms"), 2 * runs.len() as i64);
    assert_eq!(count(&db, "SELECT count(*) FROM series"), n_series * runs.len() as i64);
    assert_same(&s.run_record(runs.last().unwrap().id).unwrap().unwrap(), &real_record());
}

#[test]
fn a_layers_cycles_and_instructions_are_stored_where_counted() {
    let d = tmp();
    let db = d.path().join("iolab.db");
    let mut s = Store::open(&db).unwrap();
    let mut counted = real_record();
    counted["cost"]["profile"] = json!({"event": "cpu-clock", "hardware": {"event": "{cycles,instructions}:S"},
        "layers": [{"layer": "block layer", "self_share": 0.05, "self_ns_per_io": 900.0,
            "self_cycles_per_io": 2700.0, "self_instructions_per_io": 1500.0}]});
    let mut timed = record_with("psync", "randread", 4096);
    timed["cost"]["profile"] = json!({"event": "cpu-clock", "hardware": {"unavailable": "no PMU"},
        "layers": [{"layer": "block layer", "self_share": 0.05, "self_ns_per_io": 900.0}]});
    let (a, b) = (s.record_run(None, &counted).unwrap(), s.record_run(None, &timed).unwrap());
    let row = |id: i64| -> (Option<f64>, Option<f64>, f64) {
        Connection::open(&db)
            .unwrap()
            .query_row(
                "SELECT cycles_per_io, instructions_per_io, ns_per_io FROM profile_parts WHERE run_id = ?1 AND kind = 'layer'",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .unwrap()
    };
    assert_eq!(row(a), (Some(2700.0), Some(1500.0), 900.0));
    assert_eq!(row(b), (None, None, 900.0), "no PMU: no counts, never an estimate");
}

/// `--device` names one device exactly: `%`, `_` and `\` in it are not LIKE's wildcards (`--device %`
/// matched every run).
#[test]
fn device_filter_is_exact_not_a_pattern() {
    let d = tmp();
    let mut s = Store::open(&d.path().join("iolab.db")).unwrap();
    let mut r = real_record();
    r["environment"]["targets"][0]["device"] = json!("nvme0n1");
    s.record_run(None, &r).unwrap();
    r["environment"]["targets"][0]["device"] = json!("sd_a");
    s.record_run(None, &r).unwrap();
    let n = |dev: &str| s.list_runs(&RunFilter { device: Some(dev.to_string()), ..Default::default() }).unwrap().len();
    assert_eq!(n("nvme0n1"), 1);
    assert_eq!(n("sd_a"), 1, "an underscore that is part of the name still matches it");
    for pattern in ["%", "%%", "nvme%", "nvme0n_", "_", "sd\\_a", "\\"] {
        assert_eq!(n(pattern), 0, "--device {pattern:?} is a name, not a pattern");
    }
}
