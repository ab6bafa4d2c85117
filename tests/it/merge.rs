//! `iolab merge`: results from several machines in one database, each run exactly once.
use crate::common::Run;
use iolab::store::{RunFilter, Store};
use rusqlite::Connection;
use std::path::Path;

const PLAN: &str = r#"
name = "merge-test"
replicates = 2
seed = 5
ios = 2000
[matrix]
interface = ["null"]
qd = [1, 4]
"#;

/// iolab run in `dir`, so the databases and the plan are named as a user names them.
fn iolab_in(dir: &Path, args: &[&str]) -> Run {
    let out = std::process::Command::new(crate::common::BIN).args(args).current_dir(dir).env("TMPDIR", dir).output().unwrap();
    Run::from(out, args.iter().map(|a| a.to_string()).collect())
}

fn sweep_into(dir: &Path, db: &str) {
    std::fs::write(dir.join("plan.toml"), PLAN).unwrap();
    iolab_in(dir, &["sweep", "-q", "--db", db, "plan.toml"]).assert_ok();
}

/// What a node that made only some of the plan's runs leaves: the others still planned.
fn keep_only(db: &Path, ordinals: &[i64]) {
    let c = Connection::open(db).unwrap();
    let keep = ordinals.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(",");
    c.execute_batch(&format!(
        "DELETE FROM series WHERE run_id IN (SELECT r.id FROM runs r JOIN planned_runs p ON r.planned_id = p.id WHERE p.ordinal NOT IN ({keep}));
         DELETE FROM histograms WHERE run_id IN (SELECT r.id FROM runs r JOIN planned_runs p ON r.planned_id = p.id WHERE p.ordinal NOT IN ({keep}));
         DELETE FROM runs WHERE planned_id IN (SELECT id FROM planned_runs WHERE ordinal NOT IN ({keep}));
         UPDATE planned_runs SET status = 'planned' WHERE ordinal NOT IN ({keep});"
    ))
    .unwrap();
}

fn counts(db: &Path) -> (usize, usize, usize) {
    let s = Store::open_existing(db).unwrap();
    let sweeps = s.sweep_infos().unwrap();
    (s.list_runs(&RunFilter::default()).unwrap().len(), sweeps.len(), sweeps.iter().map(|w| w.done).sum())
}

#[test]
fn merging_is_exactly_once_and_a_split_sweep_comes_back_whole() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sweep_into(d, "a.db");
    sweep_into(d, "b.db");
    assert_eq!(counts(&d.join("a.db")), (4, 1, 4));

    let first = iolab_in(d, &["merge", "a.db", "--into", "all.db"]);
    first.assert_ok();
    assert!(first.stdout.contains("4 runs added, 0 already there; 1 sweeps created"), "{}", first.stdout);
    let again = iolab_in(d, &["merge", "a.db", "--into", "all.db"]);
    again.assert_ok();
    assert!(again.stdout.contains("0 runs added, 4 already there; 0 sweeps created, 1 joined"), "{}", again.stdout);
    assert_eq!(counts(&d.join("all.db")), (4, 1, 4));
    // Every run keeps its whole record: host, kernel and results.
    let all = Store::open_existing(&d.join("all.db")).unwrap();
    let rec = all.run_record(all.list_runs(&RunFilter::default()).unwrap()[0].id).unwrap().unwrap();
    assert!(rec["environment"]["hostname"].is_string() && rec["results"]["total"]["lat_histogram"].is_string(), "{rec}");

    // The same plan run whole again on this host (before and after a kernel change): a sweep
    // of its own, every run kept, both listed.
    let kernel_ab = iolab_in(d, &["merge", "b.db", "--into", "all.db"]);
    kernel_ab.assert_ok();
    assert!(kernel_ab.stdout.contains("4 runs added, 0 already there; 1 sweeps created, 0 joined"), "{}", kernel_ab.stdout);
    assert_eq!(counts(&d.join("all.db")), (8, 2, 8));
    let sweeps = iolab_in(d, &["results", "--db", "all.db", "--sweeps"]);
    sweeps.assert_ok();
    assert_eq!(sweeps.stdout.matches("merge-test").count(), 2, "{}", sweeps.describe());
    let listed = iolab_in(d, &["results", "--db", "all.db"]);
    assert!(listed.stdout.contains("8 runs"), "{}", listed.describe());

    // The plan split over two machines: each made half; merged, one whole sweep, but only as
    // shares of one split (what `iolab fleet submit` gives its tasks).
    std::fs::copy(d.join("a.db"), d.join("node1.db")).unwrap();
    std::fs::copy(d.join("b.db"), d.join("node2.db")).unwrap();
    keep_only(&d.join("node1.db"), &[0, 1]);
    keep_only(&d.join("node2.db"), &[2, 3]);
    iolab_in(d, &["merge", "node1.db", "node2.db", "--into", "apart.db"]).assert_ok();
    assert_eq!(counts(&d.join("apart.db")), (4, 2, 4), "not shares of one split: two sweeps");
    for node in ["node1.db", "node2.db"] {
        Connection::open(d.join(node)).unwrap().execute_batch("UPDATE sweeps SET split = 'fleet-1'").unwrap();
    }
    iolab_in(d, &["merge", "node1.db", "node2.db", "--into", "split.db"]).assert_ok();
    assert_eq!(counts(&d.join("split.db")), (4, 1, 4));
    // A third share of that split made the same planned runs again: not added twice, said, exit 1.
    std::fs::copy(d.join("a.db"), d.join("node3.db")).unwrap();
    Connection::open(d.join("node3.db")).unwrap().execute_batch("UPDATE sweeps SET split = 'fleet-1'").unwrap();
    let other = iolab_in(d, &["merge", "node3.db", "--into", "split.db"]);
    assert_eq!(other.code, 1, "{}", other.describe());
    assert_eq!(other.stderr.lines().filter(|l| l.contains("was not added")).count(), 2, "{}", other.stderr);
    assert_eq!(counts(&d.join("split.db")), (4, 1, 4));
}

/// `iolab sweep --share I/N --split ID` (a fleet task's command): the shares of one split come
/// back as one sweep; the same shares of another split stay apart.
#[test]
fn shares_of_one_split_join_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("plan.toml"), PLAN).unwrap();
    for (db, share, split) in [("s0.db", "0/2", "one"), ("s1.db", "1/2", "one"), ("t1.db", "1/2", "two")] {
        iolab_in(d, &["sweep", "-q", "--db", db, "plan.toml", "--share", share, "--split", split]).assert_ok();
    }
    iolab_in(d, &["merge", "s0.db", "s1.db", "t1.db", "--into", "all.db"]).assert_ok();
    let s = Store::open_existing(&d.join("all.db")).unwrap();
    let done: Vec<(usize, usize)> = s.sweep_infos().unwrap().iter().map(|w| (w.total, w.done)).collect();
    assert_eq!(done, [(4, 4), (4, 2)], "split one whole in one sweep, split two's share in its own");
    let bad = iolab_in(d, &["sweep", "-q", "--db", "x.db", "plan.toml", "--share", "0/2", "--split", "no spaces"]);
    assert_eq!(bad.code, 2, "{}", bad.describe());
    assert!(!d.join("x.db").exists());
}

/// Three `iolab merge` of one database into one file at once store each run once: a merge holds
/// its lock (`<db>.lock`) from start to end.
#[test]
fn concurrent_merges_into_one_file_add_each_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = "name = \"many\"\nreplicates = 10\nseed = 5\nios = 100\ncooldown = \"0s\"\n[matrix]\ninterface = [\"null\"]\nrw = [\"randread\", \"randwrite\"]\nqd = [1, 2, 4, 8, 16, 32]\n";
    std::fs::write(d.join("plan.toml"), plan).unwrap();
    iolab_in(d, &["sweep", "-q", "--db", "src.db", "plan.toml"]).assert_ok();
    assert_eq!(counts(&d.join("src.db")).0, 120);
    let merges: Vec<_> = (0..3)
        .map(|_| {
            std::process::Command::new(crate::common::BIN)
                .args(["merge", "src.db", "--into", "all.db"])
                .current_dir(d)
                .env("TMPDIR", d)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for m in merges {
        let out = m.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(counts(&d.join("all.db")), (120, 1, 120));
    assert!(d.join("all.db.lock").is_file());
}

/// A run is its `run_uid`: its record written another way is the same run; the same uid with
/// another record is a conflict, said in one line.
#[test]
fn a_run_is_recognised_by_its_uid_not_its_record_text() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sweep_into(d, "a.db");
    iolab_in(d, &["merge", "a.db", "--into", "all.db"]).assert_ok();
    let c = Connection::open(d.join("a.db")).unwrap();
    let records: Vec<(i64, String)> = c
        .prepare("SELECT id, record FROM runs")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    for (id, rec) in &records {
        let v: serde_json::Value = serde_json::from_str(rec).unwrap();
        c.execute("UPDATE runs SET record = ?1 WHERE id = ?2", rusqlite::params![serde_json::to_string_pretty(&v).unwrap(), id]).unwrap();
    }
    let again = iolab_in(d, &["merge", "a.db", "--into", "all.db"]);
    again.assert_ok();
    assert!(again.stdout.contains("0 runs added, 4 already there"), "{}", again.stdout);
    c.execute("UPDATE runs SET record = json_set(record, '$.results.total.iops', 1.5) WHERE id = ?1", [records[0].0]).unwrap();
    let changed = iolab_in(d, &["merge", "a.db", "--into", "all.db"]);
    assert_eq!(changed.code, 1, "{}", changed.describe());
    let line = changed.one_line_stderr();
    assert!(line.contains("with that uid and a different record"), "{line}");
    assert!(changed.stdout.contains("0 runs added, 3 already there"), "{}", changed.stdout);
    assert_eq!(counts(&d.join("all.db")), (4, 1, 4));
}

/// A database as iolab wrote it at schema version 5 (before run and sweep ids, and version 7's
/// tool and efficiency columns), from one made now.
fn as_version_5(db: &Path) {
    let c = Connection::open(db).unwrap();
    let later = iolab::store::columns::RUN_COLUMNS
        .iter()
        .map(|c| (c.name, c.since))
        .chain(iolab::store::RUN_METRICS.iter().map(|c| (c.name, c.since)));
    let drops: String = later
        .filter(|(name, v)| *v >= 7 && *name != "run_uid")
        .map(|(name, _)| format!("ALTER TABLE runs DROP COLUMN {name};\n"))
        .collect();
    c.execute_batch(&format!(
        "DROP INDEX runs_tool;\n{drops}DROP INDEX runs_run_uid; DROP INDEX sweeps_uid; DROP INDEX sweeps_split;
         ALTER TABLE runs DROP COLUMN run_uid; ALTER TABLE sweeps DROP COLUMN uid; ALTER TABLE sweeps DROP COLUMN split;
         UPDATE meta SET value = '5' WHERE key = 'schema_version'; PRAGMA user_version = 5;",
    ))
    .unwrap();
}

/// A source is only read: one of an older schema is read through a migrated copy, and the file
/// keeps its bytes and its time; its runs get the same ids each time, so merged again they are
/// found.
#[test]
fn an_old_schema_source_is_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sweep_into(d, "old.db");
    as_version_5(&d.join("old.db"));
    let before = (std::fs::read(d.join("old.db")).unwrap(), std::fs::metadata(d.join("old.db")).unwrap().modified().unwrap());
    std::thread::sleep(std::time::Duration::from_millis(20));
    let first = iolab_in(d, &["merge", "old.db", "--into", "all.db"]);
    first.assert_ok();
    assert!(first.stdout.contains("4 runs added"), "{}", first.stdout);
    let again = iolab_in(d, &["merge", "old.db", "--into", "all.db"]);
    again.assert_ok();
    assert!(again.stdout.contains("0 runs added, 4 already there; 0 sweeps created, 1 joined"), "{}", again.stdout);
    let after = (std::fs::read(d.join("old.db")).unwrap(), std::fs::metadata(d.join("old.db")).unwrap().modified().unwrap());
    assert!(before.0 == after.0, "the source's bytes changed");
    assert_eq!(before.1, after.1, "the source's modification time changed");
    let v: i64 = Connection::open(d.join("old.db")).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(v, 5);
    assert_eq!(counts(&d.join("all.db")), (4, 1, 4));
    let left: Vec<_> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!left.iter().any(|n| n.starts_with("iolab-merge-")), "the temporary copy is removed: {left:?}");
}

/// One run stored twice in a source (as an older merge could leave it) is refused in one line
/// naming it, before anything is written.
#[test]
fn a_run_twice_in_a_source_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sweep_into(d, "old.db");
    as_version_5(&d.join("old.db"));
    let c = Connection::open(d.join("old.db")).unwrap();
    let cols: Vec<String> = c
        .prepare("SELECT name FROM pragma_table_info('runs') WHERE name NOT IN ('id', 'planned_id')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let cols = cols.join(", ");
    c.execute_batch(&format!("INSERT INTO runs({cols}) SELECT {cols} FROM runs WHERE id = 2")).unwrap();
    drop(c);
    let twice = iolab_in(d, &["merge", "old.db", "--into", "all.db"]);
    let line = twice.assert_usage_error();
    assert!(line.contains("runs 2, 5 are one run (uid ") && line.contains("old.db"), "{line}");
    assert!(!d.join("all.db").exists(), "nothing written");
}

#[test]
fn merge_refuses_its_destination_as_a_source_and_a_missing_source() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sweep_into(d, "a.db");
    let same = iolab_in(d, &["merge", "a.db", "--into", "a.db"]);
    assert_eq!(same.code, 2, "{}", same.describe());
    assert!(same.stderr.contains("both a source and --into"));
    let missing = iolab_in(d, &["merge", "nope.db", "--into", "x.db"]);
    assert_eq!(missing.code, 2, "{}", missing.describe());
    assert!(!d.join("x.db").exists(), "nothing written when a source cannot be read");
}

/// What another machine running the same plan leaves: the same database, made on `host`.
fn made_on(db: &Path, host: &str) {
    let c = Connection::open(db).unwrap();
    let was: String = c.query_row("SELECT hostname FROM runs LIMIT 1", [], |r| r.get(0)).unwrap();
    c.execute(
        "UPDATE runs SET hostname = ?1, record = replace(record, '\"hostname\":\"' || ?2 || '\"', '\"hostname\":\"' || ?1 || '\"')",
        [host, &was],
    )
    .unwrap();
}

#[test]
fn the_same_plan_on_two_machines_stays_two_sweeps_compared_by_host() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sweep_into(d, "a.db");
    sweep_into(d, "b.db");
    made_on(&d.join("b.db"), "node-b");
    iolab_in(d, &["merge", "a.db", "b.db", "--into", "all.db"]).assert_ok();
    assert_eq!(counts(&d.join("all.db")), (8, 2, 8), "one sweep per machine, every run kept");
    let again = iolab_in(d, &["merge", "a.db", "b.db", "--into", "all.db"]);
    again.assert_ok();
    assert_eq!(counts(&d.join("all.db")), (8, 2, 8), "merging again adds nothing");

    let listed = iolab_in(d, &["results", "--db", "all.db"]);
    assert!(listed.stdout.contains("machine (host kernel)") && listed.stdout.contains("8 runs from 2 machines"), "{}", listed.stdout);
    let only_b = iolab_in(d, &["results", "--db", "all.db", "--host", "node-b"]);
    assert!(only_b.stdout.contains("4 runs\n"), "{}", only_b.stdout);

    let key = Store::open_existing(&d.join("all.db")).unwrap().list_runs(&RunFilter::default()).unwrap()[0].config_key.clone().unwrap();
    let by = iolab_in(d, &["compare", "--db", "all.db", "--by", "host", &key]);
    by.assert_ok();
    assert!(by.stdout.contains("B = ") && by.stdout.contains("iops") && by.stdout.contains("B/A"), "{}", by.stdout);
    // One machine only: said in one line, exit 2.
    let one = iolab_in(d, &["compare", "--db", "a.db", "--by", "kernel", &key]);
    assert_eq!(one.code, 2);
    assert!(one.one_line_stderr().contains("needs runs from two or more"));
}

/// A study part made on two machines and merged: `report --suite` takes each machine's sweep and
/// overlays them, one series per host in every figure, the legend naming each; `--by kernel`
/// finds one kernel here and overlays nothing.
#[test]
fn a_merged_study_is_reported_with_one_series_per_machine() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = PLAN
        .replace("name = \"merge-test\"", "name = \"S4.1-latency\"")
        .replace("qd = [1, 4]", "rw = [\"randread\", \"randwrite\"]\nqd = [1, 4]");
    std::fs::write(d.join("plan.toml"), plan).unwrap();
    for db in ["a.db", "b.db"] {
        iolab_in(d, &["sweep", "-q", "--db", db, "plan.toml"]).assert_ok();
    }
    made_on(&d.join("b.db"), "node-b");
    iolab_in(d, &["merge", "a.db", "b.db", "--into", "all.db"]).assert_ok();
    let here = iolab::host::hostname().unwrap();

    let legend = |svg: &Path| -> Vec<String> {
        let text = std::fs::read_to_string(svg).unwrap();
        text.split("<g class=\"legend\"><title>").skip(1).map(|s| s[..s.find('<').unwrap()].to_string()).collect()
    };
    iolab_in(d, &["report", "--db", "all.db", "--suite", "S4", "--out", "rep", "-q"]).assert_ok();
    let html = std::fs::read_to_string(d.join("rep/report.html")).unwrap();
    let mut hosts = vec![here.clone(), "node-b".to_string()];
    hosts.sort();
    assert!(html.contains(&format!("one series per host: {}", hosts.join(", "))), "the selection says what is overlaid");
    assert!(html.contains("S4.1-latency (sweeps 1, 2, one per machine)"), "one section for the part of both machines");
    // The two latency figures (Fig 7a, power per pattern, is a panel saying why not: no energy).
    let svgs: Vec<_> =
        crate::report::files(&d.join("rep/figures"), "svg").into_iter().filter(|f| !f.to_string_lossy().contains("fig-7a")).collect();
    assert_eq!(svgs.len(), 2, "{svgs:?}");
    for svg in &svgs {
        let mut by_rw: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for name in legend(svg) {
            let (rw, host) = name.rsplit_once(" · ").unwrap_or_else(|| panic!("{name:?} names no host"));
            by_rw.entry(rw.to_string()).or_default().push(host.to_string());
        }
        assert_eq!(by_rw.len(), 2, "{by_rw:?}");
        for (rw, mut h) in by_rw {
            h.sort();
            assert_eq!(h, hosts, "{}: {rw} is not drawn once per host", svg.display());
        }
    }
    // One kernel: nothing to overlay (its newest sweep of the part), one series per rw.
    iolab_in(d, &["report", "--db", "all.db", "--suite", "S4", "--by", "kernel", "--out", "rep-k", "-q"]).assert_ok();
    for svg in crate::report::files(&d.join("rep-k/figures"), "svg").into_iter().filter(|f| !f.to_string_lossy().contains("fig-7a")) {
        assert_eq!(legend(&svg).len(), 2, "{}", svg.display());
        assert!(legend(&svg).iter().all(|n| !n.contains(" · ")));
    }
}

/// The merge's lock file is never opened through a symbolic link: refused in one line, the
/// link's target not made.
#[test]
fn a_symbolic_link_as_the_lock_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sweep_into(d, "a.db");
    std::os::unix::fs::symlink(d.join("elsewhere"), d.join("all.db.lock")).unwrap();
    let linked = iolab_in(d, &["merge", "a.db", "--into", "all.db"]);
    let line = linked.assert_usage_error();
    assert!(line.contains("all.db.lock") && line.contains("symbolic link"), "{line}");
    assert!(!d.join("elsewhere").exists());
    assert_eq!(counts(&d.join("all.db")).0, 0, "nothing merged");
}
