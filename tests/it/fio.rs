//! fio job files as plans (`iolab sweep JOB.fio`, `iolab run --fio`) with fio's own example job
//! files, and `iolab export fio` run by fio itself.
use crate::common::{iolab, skip_or_fail, tempdir, zero_file};
use std::path::{Path, PathBuf};

const EXAMPLES: &str = "/usr/share/doc/fio/examples";
/// The engines iolab has an interface for (no ioengine: fio's default, psync).
const ENGINES: [&str; 6] = ["libaio", "psync", "sync", "null", "io_uring", "io_uring_cmd"];

/// fio's example job files (Debian's fio-examples), or None with the test skipped (failed under CI).
fn examples(test: &str) -> Option<Vec<PathBuf>> {
    let Ok(dir) = std::fs::read_dir(EXAMPLES) else {
        skip_or_fail(test, &format!("{EXAMPLES} is missing: `apt-get install fio fio-examples` (.ci/run installs them)"));
        return None;
    };
    let mut files: Vec<PathBuf> = dir.map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "fio")).collect();
    files.sort();
    Some(files)
}

/// The engines a job file names.
fn engines(text: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split([';', '#']).next().unwrap().trim())
        .filter_map(|l| l.strip_prefix("ioengine"))
        .filter_map(|l| l.trim_start().strip_prefix('='))
        .map(|e| e.trim().to_string())
        .collect()
}

/// Every example whose engines iolab has either plans (`--dry-run`, exit 0) or is refused in one
/// line that names the job and the fio option (a name of docs/fio.md's table).
///
/// The issue asked that three quarters of them plan. Honestly mapped, 31 of the 41 do:
/// block size mixes, skewed distributions and sequential mixes are engine features
/// (iometer-file-access-server, rand-zones, zipf, fio-seq-RW); a runtime without time_based is
/// iolab's budget of a time or a size, whichever comes first (ssd-test, tiobench-example,
/// waitfor); buffered libaio, fio's default direct=0, runs as in fio, recorded as synchronous
/// (fio-rand-read, fio-rand-write, fio-seq-write, fio-rand-RW; fio-seq-RW with rw=rw); jobs
/// without stonewall run together as one group (aio-read's four depths); offset modifiers,
/// blockalign and strided zones are the run's stride, blockalign and zones (backwards-read,
/// jesd219, disk-zone-profile); rates and rate floors are the run's pacing (1mbs_clients), and
/// offloaded submission its own loop (fixed-rate-submission, poisson-rate-submission); fio's flow
/// is a counter the jobs of a group share (butterfly, flow) and exitall stops the jobs beside a
/// job as its exit_what says (exitwhat); NUMA nodes and memory policy, I/O priorities per thread
/// and per command, and steady state are the run's own (numa, cmdprio-percentage, steadystate);
/// fio's verify pattern with its header per interval, and fill_device, are the run's verify form
/// and whole-target budget (surface-scan). The others showcase what iolab does not have (zoned
/// devices, per-direction block size splits, verify backlogs, buffer contents shaped for dedupe,
/// continuing after failed writes, a latency target). Each refusal names the option, and
/// `--fio-ignore` drops it on request; none is ignored
/// silently.
#[test]
fn fio_examples_plan_or_are_refused_naming_the_option() {
    let Some(files) = examples("fio_examples_plan_or_are_refused_naming_the_option") else { return };
    let dir = tempdir();
    let scratch = zero_file(dir.path(), "scratch", 64 << 20);
    let table = iolab(&["export", "fio", "--options-md"]);
    table.assert_ok();
    let (mut planned, mut refused) = (Vec::new(), Vec::new());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        if !engines(&text).iter().all(|e| ENGINES.contains(&e.as_str())) {
            continue;
        }
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let db = dir.path().join("plans.db");
        let run =
            iolab(&["sweep", &f.display().to_string(), &scratch.display().to_string(), "--dry-run", "--db", &db.display().to_string()]);
        if run.code == 0 {
            planned.push(name);
            continue;
        }
        let line = run.assert_usage_error();
        // "fio job 'NAME' (FILE line N): OPTION=VALUE: why" or "fio job 'NAME': OPTION: why".
        let rest = line
            .strip_prefix("iolab: fio job '")
            .unwrap_or_else(|| panic!("{name}: the refusal does not name the job:\n{}", run.describe()));
        let after_name = rest.split_once('\'').map(|(_, a)| a).unwrap_or("");
        let after = match after_name.strip_prefix(": ") {
            Some(a) => a,
            None => after_name.split_once("): ").map(|(_, a)| a).unwrap_or(""),
        };
        let option: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-').collect();
        assert!(
            table.stdout.contains(&format!("| `{option}` |"))
                || table.stdout.contains(&format!(" {option},"))
                || table.stdout.contains(&format!("| {option} |")),
            "{name}: the refusal names no fio option ('{option}'):\n{}",
            run.describe()
        );
        refused.push((name, option));
    }
    let total = planned.len() + refused.len();
    eprintln!("fio examples with iolab's engines: {total}; planned {}: {planned:?}; refused {}: {refused:?}", planned.len(), refused.len());
    assert_eq!(total, 41, "Debian's fio-examples 3.33 has 41 job files whose engines iolab has");
    for want in [
        "basic-verify.fio",
        "fio-seq-read.fio",
        "fsx.fio",
        "null.fio",
        "ssd-steadystate.fio",
        "uring-cmd-ng.fio",
        "iometer-file-access-server.fio",
        "rand-zones.fio",
        "zipf.fio",
        "ssd-test.fio",
        "tiobench-example.fio",
        "waitfor.fio",
        "fio-rand-read.fio",
        "fio-rand-write.fio",
        "fio-seq-write.fio",
        "fio-rand-RW.fio",
        "fio-seq-RW.fio",
        "aio-read.fio",
        "backwards-read.fio",
        "disk-zone-profile.fio",
        "jesd219.fio",
        "1mbs_clients.fio",
        "numa.fio",
        "cmdprio-percentage.fio",
        "steadystate.fio",
        "butterfly.fio",
        "flow.fio",
        "exitwhat.fio",
        "fixed-rate-submission.fio",
        "poisson-rate-submission.fio",
        "surface-scan.fio",
    ] {
        assert!(planned.iter().any(|p| p == want), "{want} no longer plans: planned {planned:?}, refused {refused:?}");
    }
    assert!(planned.len() >= 31, "planned {planned:?}");
}

/// fio's verify with a pattern, surface-scan.fio's form: the write phase (fill_device=1, so the
/// whole scratch file; do_verify=0, so nothing read back) writes fio's header every 512 bytes
/// and the pattern after it; the read phase checks every block; one byte changed on the file is
/// one mismatch, a failed read of kind verify naming its offset.
#[test]
fn a_fio_verify_pattern_is_written_then_checked_and_a_corrupted_block_is_found() {
    let dir = tempdir();
    let scratch = zero_file(dir.path(), "scratch", 1 << 20);
    let target = scratch.display().to_string();
    let job = dir.path().join("scan.fio");
    std::fs::write(
        &job,
        "; surface-scan.fio's jobs\n[global]\nthread\nbs=64k\ndirect=1\nioengine=sync\nverify=meta\nverify_pattern=0xaa555aa5\nverify_interval=512\n\n\
         [write-phase]\nfilename=datafile.tmp\nrw=write\nfill_device=1\ndo_verify=0\n\n\
         [verify-phase]\nstonewall\ncreate_serialize=0\nfilename=datafile.tmp\nrw=read\ndo_verify=1\n",
    )
    .unwrap();
    let job = job.display().to_string();
    let phase = |name: &str| {
        let json = dir.path().join(format!("{name}.json"));
        let run = iolab(&["run", "--fio", &job, "--job", name, &target, "-q", "--json", &json.display().to_string()]);
        (run, json)
    };
    let (run, json) = phase("write-phase");
    run.assert_ok();
    let rec = crate::common::record(&json);
    assert_eq!(crate::common::u(&rec, "/results/write/ios"), 16, "fill_device: the whole 1 MiB file in 64 KiB blocks: {rec}");
    let verify = &rec["results"]["verify"];
    assert_eq!(verify["form"], "verify=meta verify_pattern=0xaa555aa5 verify_interval=512 do_verify=0", "{verify}");
    assert_eq!(verify["written_blocks_read_back"], 0, "do_verify=0: {verify}");
    let data = std::fs::read(&scratch).unwrap();
    for at in [0usize, 512, 5 * 65536 + 1024] {
        assert_eq!(&data[at..at + 2], &[0xca, 0xac], "fio's header magic at byte {at}");
        assert_eq!(u64::from_le_bytes(data[at + 16..at + 24].try_into().unwrap()), at as u64, "the header's offset at byte {at}");
        assert_eq!(&data[at + 40..at + 44], &[0xaa, 0x55, 0x5a, 0xa5], "the pattern after the header at byte {at}");
    }
    let (run, json) = phase("verify-phase");
    run.assert_ok();
    let rec = crate::common::record(&json);
    assert_eq!((rec["results"]["verify"]["reads_checked"].as_u64(), rec["results"]["verify"]["mismatches"].as_u64()), (Some(16), Some(0)));
    // One byte of block 5's pattern changed on the file: that read fails, of kind verify.
    let mut data = data;
    data[5 * 65536 + 3000] ^= 0x10;
    std::fs::write(&scratch, &data).unwrap();
    let (run, json) = phase("verify-phase");
    assert_eq!(run.code, 1, "a mismatch fails the run:\n{}", run.describe());
    let line = run.one_line_stderr();
    assert!(
        line.contains("verify failed") && line.contains(&format!("byte {} differs from the verify_pattern", 5 * 65536 + 3000)),
        "{line}"
    );
    let rec = crate::common::record(&json);
    assert_eq!(rec["results"]["verify"]["mismatches"], 1, "{rec}");
    assert_eq!(rec["results"]["read"]["errors"], 1, "{rec}");
}

/// fio-rand-read.fio on a scratch file runs through iolab as fio runs it: buffered libaio (its
/// direct=0), which the record says the kernel ran synchronously, its 900 s and 10 GiB shortened
/// on the command line.
#[test]
fn fio_rand_read_runs_on_a_scratch_file() {
    let Some(files) = examples("fio_rand_read_runs_on_a_scratch_file") else { return };
    let job = files.iter().find(|f| f.ends_with("fio-rand-read.fio")).expect("fio-rand-read.fio is an example");
    let dir = tempdir();
    let scratch = zero_file(dir.path(), "scratch", 16 << 20);
    let out = dir.path().join("rec.json");
    let args = [
        "run",
        "--fio",
        &job.display().to_string(),
        &scratch.display().to_string(),
        "--runtime",
        "1s",
        "--size",
        "16m",
        "--json",
        &out.display().to_string(),
        "-q",
    ];
    iolab(&args).assert_ok();
    let rec = crate::common::record(&out);
    let spec = &rec["spec"];
    assert_eq!(spec["interface"], "libaio", "{rec}");
    assert_eq!(
        (spec["rw"].as_str(), spec["bs"].as_u64(), spec["qd"].as_u64(), spec["threads"].as_u64()),
        (Some("randread"), Some(4096), Some(16), Some(1))
    );
    assert_eq!(spec["direct"], false, "fio's direct=0: buffered, as fio runs it");
    let mechanism = rec["completion_path"]["mechanism"].as_str().unwrap_or_default();
    assert!(mechanism.starts_with("synchronous") && mechanism.contains("inside io_submit"), "never shown as asynchronous: {rec}");
    assert_eq!(spec["targets"][0].as_str(), Some(scratch.to_str().unwrap()));
    assert!(crate::common::u(&rec, "/results/total/ios") > 0, "{rec}");
}

/// cmdprio-percentage.fio on a scratch file: the thread's I/O priority is fio's prioclass=3 (idle),
/// read back with ioprio_get, and a fifth of its libaio commands carry the realtime class
/// (cmdprio_percentage=20, cmdprio_class=1), as the record counts them.
#[test]
fn cmdprio_percentage_runs_with_the_threads_and_the_commands_priorities() {
    let Some(files) = examples("cmdprio_percentage_runs_with_the_threads_and_the_commands_priorities") else { return };
    let job = files.iter().find(|f| f.ends_with("cmdprio-percentage.fio")).expect("cmdprio-percentage.fio is an example");
    let dir = tempdir();
    let scratch = zero_file(dir.path(), "scratch", 16 << 20);
    let out = dir.path().join("rec.json");
    let args = ["run", "--fio", &job.display().to_string(), &scratch.display().to_string(), "--runtime", "1s", "-q", "--json"];
    iolab(&[&args[..], &[out.to_str().unwrap()]].concat()).assert_ok();
    let rec = crate::common::record(&out);
    assert_eq!((&rec["spec"]["ioprio"], &rec["spec"]["cmdprio"]), (&"idle:0".into(), &"20%rt:0".into()), "{rec}");
    let s = &rec["results"]["thread_settings"];
    assert_eq!(s["threads"][0]["ioprio"], "idle:0", "read back from the kernel: {s:#}");
    let (sent, with) = (crate::common::u(s, "/commands/0"), crate::common::u(s, "/commands_with_prio/0"));
    assert!(sent >= crate::common::u(&rec, "/results/total/ios") && sent > 100, "{s:#}");
    let share = with as f64 / sent as f64;
    assert!((0.15..0.25).contains(&share), "{with} of {sent} commands carried the priority: {s:#}");
}

/// A fio job with steady state (ss=iops:50%, ss_dur=2s, ss_ramp=1s, as steadystate.fio's) on the
/// null engine ends once steady, long before its 60 s runtime, and the record says when.
#[test]
fn a_steady_state_job_ends_when_steady() {
    let dir = tempdir();
    let job = dir.path().join("ss.fio");
    std::fs::write(
        &job,
        "[ss-null]\nioengine=null\nsize=1m\nbs=4k\nnumjobs=2\ntime_based\nruntime=60\nss=iops:50%\nss_dur=2s\nss_ramp=1s\n",
    )
    .unwrap();
    let out = dir.path().join("rec.json");
    let started = std::time::Instant::now();
    iolab(&["run", "--fio", job.to_str().unwrap(), "-q", "--json", out.to_str().unwrap()]).assert_ok();
    let took = started.elapsed().as_secs_f64();
    let rec = crate::common::record(&out);
    let ss = &rec["results"]["steadystate"];
    assert_eq!((&ss["ss"], &ss["attained"]), (&"iops:50% dur=2s ramp=1s".into(), &true.into()), "{ss:#}");
    let at = crate::common::u(ss, "/attained_at_s");
    assert!((3..30).contains(&at), "steady after the 1 s ramp and a 2 s window: {ss:#}");
    assert!(took < 40.0, "the job ran {took} s of its 60");
    assert_eq!(rec["results"]["ended_by"], "steadystate", "{rec}");
    assert_eq!(ss["samples"].as_array().map(Vec::len), Some(2), "{ss:#}");
    let window = rec["results"]["window_s"].as_f64().unwrap();
    assert!((window - at as f64).abs() < 1.0, "the window ends when steady: {window} s, steady at {at} s");
}

/// fio's own JSON output (json+) of fio-rand-read.fio on a scratch file imports with fio's
/// numbers exactly, once however often it is imported, and sits beside iolab's run of the same
/// job under the same configuration key.
#[test]
fn fio_json_of_fio_rand_read_imports_beside_iolabs_run() {
    let test = "fio_json_of_fio_rand_read_imports_beside_iolabs_run";
    let Some(files) = examples(test) else { return };
    let example = files.iter().find(|f| f.ends_with("fio-rand-read.fio")).expect("fio-rand-read.fio is an example");
    let dir = tempdir();
    // The example pointed at a scratch file (its relative filename, in this directory), 16 MiB
    // for its 10 GiB and 1 s for its 900 s, with O_DIRECT (to measure the device, not the cache), and
    // time_based written with a value: fio's JSON leaves out options written without one.
    let original = std::fs::read_to_string(example).unwrap();
    let mut text = original.clone();
    for (from, to) in [("size=10G", "size=16m"), ("runtime=900", "runtime=1"), ("direct=0", "direct=1"), ("time_based\n", "time_based=1\n")]
    {
        assert!(text.contains(from), "{} changed: no '{from}' in it:\n{original}", example.display());
        text = text.replace(from, to);
    }
    let job = write(dir.path(), "fio-rand-read.fio", &text);
    let scratch = zero_file(dir.path(), "fio-rand-read", 16 << 20);
    let result = dir.path().join("fio-rand-read.json").display().to_string();
    let Ok(fio) = std::process::Command::new("fio")
        .args(["--output-format=json+", &format!("--output={result}"), "fio-rand-read.fio"])
        .current_dir(dir.path())
        .output()
    else {
        skip_or_fail(test, "fio is not installed: `apt-get install fio` (.ci/run installs it)");
        return;
    };
    assert!(fio.status.success(), "{}", crate::common::said(&fio));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    let read = &json["jobs"][0]["read"];
    let (iops, bytes, p99) =
        (read["iops"].as_f64().unwrap(), read["io_bytes"].as_u64().unwrap(), read["clat_ns"]["percentile"]["99.000000"].as_f64().unwrap());
    assert!(read["clat_ns"]["bins"].is_object(), "json+ gives the bins: {json}");

    let db = dir.path().join("both.db").display().to_string();
    let import = iolab(&["import", "fio", &result, "--db", &db]);
    import.assert_ok();
    assert!(import.stdout.contains("1 fio runs stored"), "{}", import.describe());
    // Again, and under another name: the same output, stored once.
    let renamed = dir.path().join("renamed.json").display().to_string();
    std::fs::copy(&result, &renamed).unwrap();
    for f in [&result, &renamed] {
        let again = iolab(&["import", "fio", f, "--db", &db]);
        again.assert_ok();
        assert!(again.stdout.contains("already stored") && again.stdout.contains("0 fio runs stored"), "{}", again.describe());
    }

    let conn = rusqlite::Connection::open(&db).unwrap();
    let (n, stored_iops, stored_p99, record): (i64, f64, f64, String) = conn
        .query_row("SELECT count(*), max(iops), max(lat_p99_ns), max(record) FROM runs", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })
        .unwrap();
    assert_eq!(n, 1, "imported twice, stored once");
    assert_eq!(stored_iops, iops, "fio's IOPS, exactly");
    assert_eq!(stored_p99, p99, "fio's 99th percentile completion latency");
    let record: serde_json::Value = serde_json::from_str(&record).unwrap();
    assert_eq!(record["tool"], serde_json::json!({"name": "fio", "version": json["fio version"]}), "{record}");
    assert_eq!(record["results"]["read"]["bytes"].as_u64(), Some(bytes), "{record}");
    assert_eq!(record["results"]["read"]["lat_source"], "clat", "{record}");
    assert_eq!(record["results"]["cpu"]["fio_usr_pct"], json["jobs"][0]["usr_cpu"], "{record}");
    assert_eq!(record["results"]["cpu"]["cores"], serde_json::Value::Null, "iolab's own CPU figures: fio has none");
    assert_eq!(record["completion_path"]["observed"], serde_json::Value::Null, "{record}");
    let histograms: i64 = conn.query_row("SELECT count(*) FROM histograms", [], |r| r.get(0)).unwrap();
    assert!(histograms >= 1, "json+'s bins are the run's histogram");

    // The same job through iolab, into the same database: the same configuration.
    iolab(&["sweep", &job, &scratch.display().to_string(), "--db", &db, "-q"]).assert_ok();
    let keys: Vec<String> =
        conn.prepare("SELECT config_key FROM runs ORDER BY id").unwrap().query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(keys[0], keys[1], "fio's run and iolab's run of one job have one configuration");
    let listed = iolab(&["results", "--db", &db, "--config", &keys[0]]);
    listed.assert_ok();
    assert!(listed.stdout.contains("2 runs") && listed.stdout.contains("libaio"), "{}", listed.describe());
}

/// What is not fio's JSON output is refused in one line, before a database is made.
#[test]
fn import_fio_refuses_what_is_not_fios_json() {
    let dir = tempdir();
    let db = dir.path().join("none.db");
    for (name, text, says) in [
        ("text.json", "fio: this is not JSON\n", "text.json: not JSON"),
        (
            "other.json",
            "{\"jobs\": [{\"jobname\": \"j\"}]}",
            "other.json: not fio's JSON output (--output-format=json): it has no \"fio version\"",
        ),
        ("empty.json", "{\"fio version\": \"fio-3.33\", \"jobs\": []}", "empty.json: fio's JSON output has no jobs"),
        ("nothing.json", "", "nothing.json: empty"),
    ] {
        let f = write(dir.path(), name, text);
        let line = iolab(&["import", "fio", &f, "--db", &db.display().to_string()]).assert_usage_error();
        assert!(line.starts_with(&format!("iolab: {says}")), "{name}: {line}");
        assert!(!db.exists(), "{name}: refused before anything was made");
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// A job file of two jobs runs as two sweeps in file order; an option iolab lacks is refused in
/// one line unless dropped, and the drop is shown and kept with the stored plan.
#[test]
fn a_fio_file_sweeps_its_jobs_in_order() {
    let dir = tempdir();
    let db = dir.path().join("fio.db").display().to_string();
    let job = write(
        dir.path(),
        "two.fio",
        "; two null jobs, one after the other\n[global]\nioengine=null\nsize=64m\nbs=4k\n[writes]\nrw=randwrite\nnumber_ios=2000\n[reads]\nstonewall\nrw=randread\nnumber_ios=(1000*3)\nread_iolog=x.log\n",
    );
    let e = iolab(&["sweep", &job, "--db", &db]).assert_usage_error();
    assert_eq!(e, format!("iolab: fio job 'reads' ({job} line 13): read_iolog=x.log: iolab generates its workload; it does not record or replay I/O logs (--fio-ignore read_iolog drops it)"));
    assert!(!Path::new(&db).exists(), "refused before anything was made");
    let dry = iolab(&["sweep", &job, "--db", &db, "--fio-ignore", "read_iolog", "--dry-run"]);
    dry.assert_ok();
    assert!(dry.stdout.contains("read_iolog=x.log") && dry.stdout.contains("(dropped: --fio-ignore)"), "{}", dry.describe());
    assert!(dry.stdout.contains("ios = 3000 (number_ios x numjobs)"), "{}", dry.describe());
    let run = iolab(&["sweep", &job, "--db", &db, "--fio-ignore", "read_iolog", "-q"]);
    run.assert_ok();
    let first = run.stdout.find("plan two.fio/writes").unwrap_or_else(|| panic!("{}", run.describe()));
    let second = run.stdout.find("plan two.fio/reads").unwrap_or_else(|| panic!("{}", run.describe()));
    assert!(first < second, "in file order:\n{}", run.describe());
    let conn = rusqlite::Connection::open(&db).unwrap();
    let plans: Vec<String> = conn
        .prepare("SELECT plan_text FROM sweeps ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(plans.len(), 2);
    assert!(plans[1].contains("dropped with --fio-ignore: read_iolog=x.log"), "{}", plans[1]);
    assert!(iolab(&["sweep", &job, "--db", &db, "--fio-ignore", "rat"])
        .assert_usage_error()
        .contains("--fio-ignore rat: not a fio option"));
}

/// fio's `runtime` without `time_based` ends the job at whichever comes first, the time or one
/// pass over its size: a 1 s limit over 1 MiB ends by the bytes, 100 ms over a PiB by the time,
/// and the record says which (`iolab run --runtime` with `--bytes` is the same budget).
#[test]
fn a_runtime_without_time_based_ends_at_the_time_or_the_size_whichever_first() {
    let dir = tempdir();
    let scratch = zero_file(dir.path(), "scratch", 1 << 20);
    let by_size = write(dir.path(), "size.fio", &format!("[j]\nfilename={}\nrw=read\nbs=4k\nsize=1m\nruntime=1\n", scratch.display()));
    let by_time = write(dir.path(), "time.fio", "[j]\nioengine=null\nrw=randread\nbs=4k\nsize=1p\ntimeout=100ms\n");
    let dry = iolab(&["sweep", &by_size, "--dry-run", "--db", &dir.path().join("d.db").display().to_string()]);
    dry.assert_ok();
    assert!(dry.stdout.contains("runtime = \"1s\" or bytes = \"1048576\""), "{}", dry.describe());
    let run = |args: &[&str], name: &str| {
        let out = dir.path().join(name);
        let mut all: Vec<&str> = args.to_vec();
        let path = out.display().to_string();
        all.extend(["--json", &path, "-q"]);
        iolab(&all).assert_ok();
        crate::common::record(&out)
    };
    let rec = run(&["run", "--fio", &by_size], "size.json");
    assert_eq!(
        rec["spec"]["budget"],
        serde_json::json!({"kind": "seconds_or_bytes", "value": {"seconds": 1.0, "bytes": 1 << 20}}),
        "{rec}"
    );
    assert_eq!((rec["results"]["ended_by"].as_str(), rec["results"]["total"]["ios"].as_u64()), (Some("bytes"), Some(256)), "{rec}");
    assert!(rec["results"]["window_s"].as_f64().unwrap() < 1.0, "ended at the last I/O, not at the time limit: {rec}");
    let rec = run(&["run", "--fio", &by_time], "time.json");
    assert_eq!(rec["spec"]["budget"]["kind"], "seconds_or_bytes", "{rec}");
    assert_eq!(rec["results"]["ended_by"], "seconds", "{rec}");
    assert!((0.09..1.0).contains(&rec["results"]["window_s"].as_f64().unwrap()), "{rec}");
    let rec = run(&["run", "-i", "null", "--runtime", "100ms", "--ios", "1000000000000"], "cli.json");
    assert_eq!(
        (rec["spec"]["budget"]["kind"].as_str(), rec["results"]["ended_by"].as_str()),
        (Some("seconds_or_ios"), Some("seconds")),
        "{rec}"
    );
    let rec = run(&["run", "-i", "null", "--runtime", "60s", "--ios", "1000"], "cli-ios.json");
    assert_eq!((rec["results"]["ended_by"].as_str(), rec["results"]["total"]["ios"].as_u64()), (Some("ios"), Some(1000)), "{rec}");
    let rec = run(&["run", "-i", "null", "--ios", "1000"], "ios.json");
    assert!(rec["results"].get("ended_by").is_none(), "a budget of one limit: {rec}");
}

/// `iolab export fio` writes a job file that fio runs, with the plan's I/O count.
#[test]
fn export_fio_writes_a_job_file_fio_runs() {
    let dir = tempdir();
    let plan = write(
        dir.path(),
        "p.toml",
        "name = \"x\"\nios = 4000\n[matrix]\ninterface = [\"null\"]\nrw = [\"randread\"]\nbs = [\"4k\"]\nqd = [4]\nthreads = [2]\n",
    );
    let out = dir.path().join("p.fio").display().to_string();
    iolab(&["export", "fio", &plan, "-o", &out]).assert_ok();
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("ioengine=null\n") && text.contains("number_ios=2000\n") && text.contains("numjobs=2\n"), "{text}");
    // Read back by iolab: the same job.
    iolab(&["sweep", &out, "--dry-run", "--db", &dir.path().join("d.db").display().to_string()]).assert_ok();
    assert!(iolab(&["export", "fio", &out]).assert_usage_error().contains("is a fio job file already"));
    let Ok(fio) = std::process::Command::new("fio").args(["--output-format=json", &out]).current_dir(dir.path()).output() else {
        skip_or_fail("export_fio_writes_a_job_file_fio_runs", "fio is not installed: `apt-get install fio` (.ci/run installs it)");
        return;
    };
    assert!(fio.status.success(), "{}", crate::common::said(&fio));
    let json: serde_json::Value =
        serde_json::from_slice(&fio.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&fio.stdout)));
    let ios: u64 = json["jobs"].as_array().unwrap().iter().map(|j| j["read"]["total_ios"].as_u64().unwrap()).sum();
    assert_eq!(ios, 4000, "{json}");
}

/// Jobs fio starts together (aio-read.fio's form: libaio jobs at different depths on their own
/// files, here with a psync job beside them, started 0.3 s later) run together: `--dry-run` shows
/// the group, `iolab run --fio` runs them at once, each with its own record (its own depth and
/// IOPS), their windows overlapping, each record naming its group; `iolab sweep` stores each as
/// a sweep of its own with its group.
#[test]
fn jobs_without_stonewall_run_together_each_with_its_record() {
    let dir = tempdir();
    let files: Vec<PathBuf> = ["f1", "f2", "f3"].iter().map(|n| zero_file(dir.path(), n, 8 << 20)).collect();
    let text = format!(
        "[global]\nioengine=libaio\ndirect=1\nrw=randread\nbs=4k\nsize=8m\ntime_based\nruntime=1\n[q4]\nfilename={}\niodepth=4\n[q32]\nfilename={}\niodepth=32\n[sync]\nioengine=psync\nfilename={}\nstartdelay=0.3\n",
        files[0].display(),
        files[1].display(),
        files[2].display()
    );
    let job = write(dir.path(), "together.fio", &text);
    let db = dir.path().join("g.db").display().to_string();
    let dry = iolab(&["sweep", &job, "--dry-run", "--db", &db]);
    dry.assert_ok();
    assert_eq!(dry.stdout.matches("together.fio/g1: runs together with q4, q32, sync").count(), 3, "{}", dry.describe());
    assert!(dry.stdout.contains("startdelay=0.3") && dry.stdout.contains("0.3 s after its start"), "{}", dry.describe());

    let out = dir.path().join("recs.json");
    iolab(&["run", "--fio", &job, "--json", &out.display().to_string(), "-q"]).assert_ok();
    let recs: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(recs.len(), 3, "one record per job");
    let qd: Vec<u64> = recs.iter().map(|r| r["spec"]["qd"].as_u64().unwrap()).collect();
    assert_eq!(qd, [4, 32, 1]);
    let mut windows = Vec::new();
    for (n, r) in recs.iter().enumerate() {
        let g = &r["group"];
        assert_eq!(g["id"], "together.fio/g1", "{r}");
        assert_eq!(g["members"], serde_json::json!(["together.fio/q4", "together.fio/q32", "together.fio/sync"]));
        assert_eq!(g["member"].as_u64(), Some(n as u64));
        assert!(g["shared"].as_str().unwrap().contains("energy"), "{g}");
        assert!(crate::common::u(r, "/results/total/ios") > 0, "{r}");
        assert!(r["results"]["total"]["iops"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["spec"]["targets"][0].as_str(), Some(files[n].to_str().unwrap()), "each its own file");
        windows.push((g["window_unix_s"][0].as_f64().unwrap(), g["window_unix_s"][1].as_f64().unwrap()));
    }
    assert_eq!(recs[2]["group"]["start_delay_s"].as_f64(), Some(0.3));
    // Started together: the two undelayed ones within a fraction of their window, the third
    // 0.3 s later; each window overlaps every other.
    assert!((windows[0].0 - windows[1].0).abs() < 0.2, "{windows:?}");
    assert!(windows[2].0 - windows[0].0 > 0.25, "startdelay: {windows:?}");
    for a in &windows {
        for b in &windows {
            assert!(a.0 < b.1 && b.0 < a.1, "the windows overlap: {windows:?}");
        }
    }

    let run = iolab(&["sweep", &job, "--db", &db, "-q"]);
    run.assert_ok();
    assert_eq!(run.stdout.matches("in group together.fio/g1").count(), 3, "{}", run.describe());
    let conn = rusqlite::Connection::open(&db).unwrap();
    let stored: Vec<String> = conn
        .prepare("SELECT json_extract(r.record, '$.group.id') FROM runs r ORDER BY r.id")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(stored, ["together.fio/g1"; 3]);
}

/// `--fio-ignore concurrency` runs the jobs fio would start together one after another, in no
/// group: `iolab run --fio` then takes one job (`--job`), and a sweep runs each alone.
#[test]
fn fio_ignore_concurrency_runs_a_group_one_job_after_another() {
    let dir = tempdir();
    let f = zero_file(dir.path(), "f", 4 << 20);
    let text = format!("[global]\nioengine=psync\ndirect=1\nrw=randread\nsize=4m\nnumber_ios=64\nfilename={}\n[a]\n[b]\n", f.display());
    let job = write(dir.path(), "two.fio", &text);
    let ignored = iolab(&["run", "--fio", &job, "--fio-ignore", "concurrency"]);
    let line = ignored.assert_usage_error();
    assert!(line.contains("holds 2 jobs"), "one after another, one job per run: {}", ignored.describe());
    let db = dir.path().join("s.db").display().to_string();
    let seq = iolab(&["sweep", &job, "--fio-ignore", "concurrency", "--db", &db, "-q"]);
    seq.assert_ok();
    assert!(!seq.stdout.contains("in group"), "{}", seq.describe());
    let conn = rusqlite::Connection::open(&db).unwrap();
    let grouped: i64 =
        conn.query_row("SELECT count(*) FROM runs WHERE json_extract(record, '$.group') IS NOT NULL", [], |r| r.get(0)).unwrap();
    let runs: i64 = conn.query_row("SELECT count(*) FROM runs", [], |r| r.get(0)).unwrap();
    assert_eq!((runs, grouped), (2, 0));
}

/// fio's offset modifiers, blockalign, random_generator and strided zones map to the run's
/// pattern keys; zonemode=zbd is refused for what it is (a zoned device's mode).
#[test]
fn offset_patterns_map_and_zbd_is_refused_for_what_it_is() {
    let dir = tempdir();
    let scratch = zero_file(dir.path(), "scratch", 16 << 20);
    let job = write(
        dir.path(),
        "p.fio",
        "[r]\nrw=randread:8\nbs=8k\nba=4k\nrandom_generator=lfsr\n[s]\nstonewall\nrw=write:-8k\n[z]\nstonewall\nrw=read\nzonesize=1m\nzoneskip=3m\n[t]\nstonewall\nrw=randread\nrandom_generator=tausworthe64\n",
    );
    let db = dir.path().join("p.db");
    let run = iolab(&["sweep", &job, &scratch.display().to_string(), "--dry-run", "--db", &db.display().to_string()]);
    run.assert_ok();
    for want in [
        "matrix.ios_per_offset = [8]",
        "matrix.blockalign = [4096]",
        "matrix.random_generator = [\"lfsr\"]",
        "matrix.stride = [\"-8192\"]",
        "matrix.zones = [\"1m/1m/3m\"]",
        "iolab's own seeded generator",
    ] {
        assert!(run.stdout.contains(want), "{want}:\n{}", run.describe());
    }
    let zbd = write(dir.path(), "zbd.fio", "[z]\nrw=randwrite\nzonemode=zbd\nzonesize=1m\n");
    let line = iolab(&["sweep", &zbd, &scratch.display().to_string(), "--dry-run", "--db", &db.display().to_string()]).assert_usage_error();
    assert!(line.contains("zonemode=zbd") && line.contains("zoned-device mode"), "{line}");
}

/// A fio job with a rate runs paced through `iolab run --fio`: rate_iops per clone, and the
/// record's `results.pace` says what was asked and achieved.
#[test]
fn a_fio_job_with_a_rate_runs_paced() {
    let dir = tempdir();
    let job = dir.path().join("paced.fio");
    std::fs::write(&job, "[paced]\nioengine=null\nsize=1g\nrw=randread\niodepth=4\nnumjobs=2\nrate_iops=500\ntime_based\nruntime=1\n")
        .unwrap();
    let json = dir.path().join("r.json");
    let run = iolab(&["run", "--fio", &job.display().to_string(), "-q", "--json", &json.display().to_string()]);
    run.assert_ok();
    let rec: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let iops = rec["results"]["total"]["iops"].as_f64().unwrap();
    assert!((iops - 1000.0).abs() < 60.0, "2 clones at rate_iops=500 did {iops} IOPS: {:#}", rec["results"]);
    assert_eq!(rec["results"]["pace"]["asked"]["rate_iops"], serde_json::json!([500, 500]));
}

/// fio's flow: two null jobs run together, flow=8 and flow=1 in one flow, issue I/O about 8:1
/// (each alone runs as fast as the other); each record says the flow's weights and I/Os.
/// The counter is cumulative and exact while both run; at the starts and ends one job may run
/// without the other (a thread's weight joins the flow when its loop starts and leaves when it
/// ends, as in fio's flow.c), for as long as the threads' starts are apart: tens of
/// milliseconds on a loaded 2-core machine, in which the light job alone does hundreds of
/// thousands of null I/Os. So the ratio is judged on the middle second of each job's per-second
/// series (both running then, whatever the skew under a second), within 10 %, and the whole
/// windows only for the light job held back.
#[test]
fn a_flow_holds_two_jobs_to_the_ratio_of_their_weights() {
    let dir = tempdir();
    let job = write(
        dir.path(),
        "flow.fio",
        "[global]\nioengine=null\nsize=1g\nrw=randread\ntime_based\nruntime=3\n[heavy]\nflow=8\n[light]\nflow=1\n",
    );
    let json = dir.path().join("r.json");
    iolab(&["run", "--fio", &job, "-q", "--json", &json.display().to_string()]).assert_ok();
    let recs: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ios: Vec<u64> = recs.iter().map(|r| crate::common::u(r, "/results/total/ios")).collect();
    let ratio = ios[0] as f64 / ios[1].max(1) as f64;
    assert!(ios[1] > 1000 && ratio > 2.0, "{ios:?}: ratio {ratio}, asked 8");
    let middle: Vec<f64> = recs.iter().map(|r| r["results"]["series"][1]["read_iops"].as_f64().unwrap()).collect();
    let ratio = middle[0] / middle[1].max(1.0);
    assert!((7.2..8.8).contains(&ratio), "the middle second's IOPS {middle:?}: ratio {ratio}, asked 8");
    let flow = &recs[0]["group"]["flow"];
    assert_eq!((flow["id"].as_u64(), flow["weight"].as_u64()), (Some(0), Some(8)), "{flow}");
    assert_eq!(flow["members"][1]["name"], "flow.fio/light");
    assert_eq!(flow["members"][1]["ios"].as_u64(), Some(ios[1]));
    assert!((flow["members"][0]["weight_share"].as_f64().unwrap() - 8.0 / 9.0).abs() < 1e-9, "{flow}");
    assert_eq!(recs[1]["spec"]["pace"]["flow"].as_u64(), Some(1));
}

/// fio's exitall: a short job's end stops the long one beside it well before its budget; the
/// stopped one keeps the I/O it did and its record says whose exitall stopped it.
#[test]
fn exitall_stops_the_jobs_beside_a_job_when_it_ends() {
    let dir = tempdir();
    let job = write(
        dir.path(),
        "exit.fio",
        "[global]\nioengine=null\nsize=1g\nrw=randread\nexitall\n[short]\nnumber_ios=1000\nthinktime=200\n[long]\ntime_based\nruntime=60\n",
    );
    let dry = iolab(&["sweep", &job, "--dry-run", "--db", &dir.path().join("d.db").display().to_string()]);
    dry.assert_ok();
    assert!(dry.stdout.contains("(exitall)") && dry.stdout.contains("when it ends it stops long"), "{}", dry.describe());
    let json = dir.path().join("r.json");
    let began = std::time::Instant::now();
    iolab(&["run", "--fio", &job, "-q", "--json", &json.display().to_string()]).assert_ok();
    assert!(began.elapsed() < std::time::Duration::from_secs(30), "the long job ran {:?}", began.elapsed());
    let recs: Vec<serde_json::Value> = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(crate::common::u(&recs[0], "/results/total/ios"), 1000);
    assert!(recs[0]["group"]["stopped_by"].is_null(), "{}", recs[0]["group"]);
    assert_eq!(
        recs[1]["group"]["stopped_by"].as_str(),
        Some("exit.fio/short's exitall (exit_what=group) stopped it when exit.fio/short ended"),
        "{}",
        recs[1]["group"]
    );
    assert!(crate::common::u(&recs[1], "/results/total/ios") > 0, "kept its I/O: {}", recs[1]["results"]["total"]);
    assert!(recs[1]["results"]["window_s"].as_f64().unwrap() < 20.0, "{}", recs[1]["results"]["window_s"]);
    assert!(recs[0]["group"]["exits"].as_str().unwrap().contains("it stops exit.fio/long"), "{}", recs[0]["group"]);
}
