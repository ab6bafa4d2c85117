//! Workload mixes end to end: block size mixes (`--bssplit`, `--bsrange`), skewed random
//! offsets (`--distribution`) and sequential read/write mixes (`--rw rw`) through `iolab run`.
use crate::common::{assert_clean, iolab, record, tempdir, u};
use std::os::unix::fs::MetadataExt;

/// A run with a block size mix records the bytes its I/Os moved, each at its own size: not
/// I/Os × the largest size, and near I/Os × the mix's mean.
#[test]
fn a_bssplit_run_records_the_bytes_of_each_io() {
    let dir = tempdir();
    let target = dir.path().join("t");
    std::fs::File::create(&target).unwrap().set_len(64 << 20).unwrap();
    let json = dir.path().join("r.json");
    let ios = 20_000u64;
    let args = ["run", "-i", "psync", "--buffered", "--rw", "randwrite", "--bssplit", "4k/50:64k/50", "--ios", "20000", "-q"];
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    args.extend([target.display().to_string(), "--json".into(), json.display().to_string()]);
    iolab(&args).assert_ok();
    let rec = record(&json);
    assert_clean(&rec, "bssplit run");
    assert_eq!(rec["spec"]["bssplit"], "4k/50:64k/50", "{:#}", rec["spec"]);
    assert_eq!(u(&rec, "/spec/bs"), 65536, "the mix's largest size is the block size");
    let bytes = u(&rec, "/results/write/bytes");
    assert_eq!(u(&rec, "/results/write/ios"), ios);
    assert_eq!(bytes % 4096, 0);
    let mean = bytes as f64 / ios as f64;
    assert!((mean - 34_816.0).abs() < 34_816.0 * 0.03, "{bytes} bytes for {ios} I/Os: {mean} per I/O, not the mix's 34816");
    // A byte budget with a mix ends near its bytes (counted by the mix's mean size).
    let json2 = dir.path().join("b.json");
    let run = iolab(&["run", "-i", "null", "--bsrange", "4k-16k", "--bytes", "100m", "-q", "--json", &json2.display().to_string()]);
    run.assert_ok();
    let rec = record(&json2);
    let got = u(&rec, "/results/read/bytes") as f64;
    assert!((got - (100u64 << 20) as f64).abs() < 0.05 * (100u64 << 20) as f64, "{got} bytes for --bytes 100m");
}

/// Bytes a sparse file has allocated after a buffered random-write run over it with `dist`:
/// the distinct blocks written.
fn blocks_written(dist: &str) -> u64 {
    let dir = tempdir();
    let target = dir.path().join("sparse");
    std::fs::File::create(&target).unwrap().set_len(64 << 20).unwrap();
    let run = iolab(&[
        "run",
        "-i",
        "psync",
        "--buffered",
        "--rw",
        "randwrite",
        "--distribution",
        dist,
        "--ios",
        "20000",
        "-q",
        &target.display().to_string(),
    ]);
    run.assert_ok();
    std::fs::metadata(&target).unwrap().blocks() * 512 / 4096
}

/// zipf:1.2 concentrates the accesses: 20 000 writes over 16 384 blocks touch about 70 % of them
/// when uniform, and far fewer under zipf.
#[test]
fn a_zipf_run_concentrates_its_accesses() {
    let uniform = blocks_written("random");
    let zipf = blocks_written("zipf:1.2");
    assert!(uniform > 10_000, "uniform touched {uniform} blocks");
    assert!(zipf * 3 < uniform, "zipf:1.2 touched {zipf} blocks, uniform {uniform}");
}

/// `--rw rw` runs sequentially with the write mix, and bad mixes and distributions are refused
/// in one line before anything runs.
#[test]
fn sequential_mixes_run_and_bad_mixes_are_refused() {
    let dir = tempdir();
    let json = dir.path().join("r.json");
    iolab(&["run", "-i", "null", "--rw", "rw", "--write-mix", "30", "--ios", "100000", "-q", "--json", &json.display().to_string()])
        .assert_ok();
    let rec = record(&json);
    assert_eq!(rec["spec"]["rw"], "rw");
    let writes = u(&rec, "/results/write/ios");
    assert!((28_000..32_000).contains(&writes), "writes {writes}");
    assert!(rec["spec"].get("distribution").is_none() && rec["spec"].get("bssplit").is_none(), "defaults are left out");
    for (args, says) in [
        (&["--bssplit", "4k/60:64k/60"][..], "more than 100"),
        (&["--distribution", "zipf:1"], "zipf theta"),
        (&["--distribution", "zipf:1.2", "--rw", "read"], "sequential"),
        (&["--bssplit", "4k/50:6k/50"], "multiple of the smallest"),
        (&["--bssplit", "4k/50:8k/50", "--bs", "8k"], "not both"),
    ] {
        let mut a = vec!["run", "-i", "null", "--ios", "10"];
        a.extend_from_slice(args);
        let line = iolab(&a).assert_usage_error();
        assert!(line.contains(says), "{args:?}: {line}");
    }
}

/// Which `bs`-byte blocks of `path` hold anything but zeros (what a buffered write left).
fn written_blocks(path: &std::path::Path, bs: usize) -> Vec<bool> {
    std::fs::read(path).unwrap().chunks(bs).map(|c| c.iter().any(|b| *b != 0)).collect()
}

/// `iolab run` writing `ios` I/Os (4 KiB unless `args` give --bs) through the page cache onto a zeroed file of `size`
/// bytes with `args`; the blocks left written, and the record.
fn write_pattern(size: u64, ios: u64, args: &[&str]) -> (Vec<bool>, serde_json::Value) {
    let dir = tempdir();
    let target = dir.path().join("t");
    std::fs::File::create(&target).unwrap().set_len(size).unwrap();
    let json = dir.path().join("r.json");
    let ios = ios.to_string();
    let mut a = vec!["run", "-i", "psync", "--buffered", "--ios", &ios, "-q", "--json", json.to_str().unwrap()];
    if !args.contains(&"--bs") {
        a.extend(["--bs", "4k"]);
    }
    a.extend_from_slice(args);
    a.push(target.to_str().unwrap());
    iolab(&a).assert_ok();
    let rec = record(&json);
    assert_clean(&rec, &format!("{args:?}"));
    (written_blocks(&target, 4096), rec)
}

/// fio's offset modifier: `rw=write:12k` writes every fourth block; `rw=write:-8k` (as
/// backwards-read.fio reads) writes the first block, then from the last block down.
#[test]
fn a_stride_writes_with_holes_or_backwards() {
    let (blocks, rec) = write_pattern(4 << 20, 512, &["--rw", "write", "--stride", "12k"]);
    assert_eq!(rec["spec"]["stride"], 12288, "{:#}", rec["spec"]);
    let want: Vec<bool> = (0..1024).map(|b| b % 4 == 0).collect();
    assert!(blocks == want, "written: {:?}", blocks.iter().enumerate().filter(|b| *b.1).map(|b| b.0).take(20).collect::<Vec<_>>());
    let (blocks, _) = write_pattern(4 << 20, 100, &["--rw", "write", "--stride", "-8k"]);
    let want: Vec<bool> = (0..1024).map(|b| b == 0 || b >= 1024 - 99).collect();
    assert!(blocks == want, "written: {:?}", blocks.iter().enumerate().filter(|b| *b.1).map(|b| b.0).take(20).collect::<Vec<_>>());
    // The default stream's spec has none of the pattern's keys; bad ones are refused in one line.
    let (_, rec) = write_pattern(1 << 20, 10, &["--rw", "write"]);
    for key in ["stride", "ios_per_offset", "blockalign", "zones", "random_generator"] {
        assert!(rec["spec"].get(key).is_none(), "{key} in {:#}", rec["spec"]);
    }
    for (args, says) in [
        (&["--rw", "randread", "--stride", "8k"][..], "sequential"),
        (&["--rw", "read", "--stride", "1000"], "multiple of 512"),
        (&["--rw", "read", "--ios-per-offset", "8"], "random"),
        (&["--rw", "read", "--blockalign", "4k"], "random"),
        (&["--blockalign", "1000"], "multiple of 512"),
        (&["--zones", "0"], "zone size of 0"),
        (&["--zones", "1m/1m/1m", "--distribution", "zipf:1.2"], "uniform"),
        (&["--rw", "read", "--random-generator", "lfsr"], "sequential"),
        (&["--random-generator", "lfsr", "--bssplit", "4k/50:8k/50"], "one size"),
    ] {
        let mut a = vec!["run", "-i", "null", "--ios", "10"];
        a.extend_from_slice(args);
        let line = iolab(&a).assert_usage_error();
        assert!(line.contains(says), "{args:?}: {line}");
    }
}

/// fio's `rw=randwrite:8`: runs of 8 blocks from each random offset.
#[test]
fn ios_per_offset_write_runs_of_blocks() {
    let (blocks, rec) = write_pattern(64 << 20, 64, &["--rw", "randwrite", "--ios-per-offset", "8"]);
    assert_eq!(rec["spec"]["ios_per_offset"], 8);
    let runs = blocks.split(|b| !b).filter(|r| !r.is_empty()).map(<[bool]>::len).collect::<Vec<_>>();
    assert!(runs.iter().all(|r| r % 8 == 0) && runs.iter().sum::<usize>() == 64, "runs of written blocks: {runs:?}");
}

/// fio's `blockalign=4k` with 8 KiB blocks: writes start on odd 4 KiB blocks too.
#[test]
fn blockalign_puts_random_offsets_between_blocks() {
    let starts_odd = |blocks: &[bool]| (1..blocks.len()).filter(|&i| i % 2 == 1 && blocks[i] && !blocks[i - 1]).count();
    let (blocks, rec) = write_pattern(64 << 20, 200, &["--rw", "randwrite", "--bs", "8k", "--blockalign", "4k"]);
    assert_eq!(rec["spec"]["blockalign"], 4096);
    assert!(starts_odd(&blocks) > 50, "{} writes began on an odd 4k block", starts_odd(&blocks));
    let (blocks, _) = write_pattern(64 << 20, 200, &["--rw", "randwrite", "--bs", "8k"]);
    assert_eq!(starts_odd(&blocks), 0, "without blockalign, offsets are on 8k");
}

/// fio's zonemode=strided (disk-zone-profile.fio): 1 MiB of I/O in each zone, zones 4 MiB apart.
#[test]
fn strided_zones_write_only_their_zones() {
    let (blocks, rec) = write_pattern(16 << 20, 1024, &["--rw", "write", "--zones", "1m/1m/3m"]);
    assert_eq!(rec["spec"]["zones"], "1m/1m/3m");
    let want: Vec<bool> = (0..4096).map(|b| b % 1024 < 256).collect();
    assert!(blocks == want, "{} blocks written", blocks.iter().filter(|b| **b).count());
}

/// random_generator=lfsr: one pass of random writes touches every block; iolab's default draws
/// with repeats and misses about a third.
#[test]
fn lfsr_writes_every_block_in_one_pass() {
    let (blocks, rec) = write_pattern(16 << 20, 4096, &["--rw", "randwrite", "--random-generator", "lfsr"]);
    assert_eq!(rec["spec"]["random_generator"], "lfsr");
    assert!(blocks.iter().all(|b| *b), "{} of 4096 written", blocks.iter().filter(|b| **b).count());
    let (blocks, _) = write_pattern(16 << 20, 4096, &["--rw", "randwrite"]);
    assert!(blocks.iter().filter(|b| **b).count() < 3000);
}

/// The f64 at `ptr` of a record.
fn f(v: &serde_json::Value, ptr: &str) -> f64 {
    v.pointer(ptr).and_then(serde_json::Value::as_f64).unwrap_or_else(|| panic!("{ptr} is not a number in {v:#}"))
}

/// `--rate-iops` paces each thread (fio's per-clone rate): two threads at 1000 IOPS do 2000 in
/// all, and the record says the pacing asked and what each thread achieved, its latency from
/// submission.
#[test]
fn rate_iops_paces_each_thread_and_the_record_says_asked_and_achieved() {
    let dir = tempdir();
    let json = dir.path().join("r.json");
    let run = iolab(&[
        "run",
        "-i",
        "null",
        "--qd",
        "4",
        "--threads",
        "2",
        "--rate-iops",
        "1000",
        "--runtime",
        "1s",
        "-q",
        "--json",
        &json.display().to_string(),
    ]);
    run.assert_ok();
    let rec = record(&json);
    let iops = f(&rec, "/results/total/iops");
    assert!((iops - 2000.0).abs() < 100.0, "{iops} IOPS for 2 threads at --rate-iops 1000: {:#}", rec["results"]);
    assert_eq!(rec["spec"]["pace"]["rate_iops"], serde_json::json!([1000, 1000]), "{:#}", rec["spec"]);
    let pace = &rec["results"]["pace"];
    assert_eq!(pace["asked"]["rate_iops"], serde_json::json!([1000, 1000]), "{pace:#}");
    let per = f(pace, "/achieved_per_thread/read_iops");
    assert!((per - 1000.0).abs() < 50.0, "{pace:#}");
    assert_eq!(pace["latency_from"], "submission");
    // Unpaced runs carry no pace.
    let json2 = dir.path().join("u.json");
    iolab(&["run", "-i", "null", "--ios", "1000", "-q", "--json", &json2.display().to_string()]).assert_ok();
    let rec = record(&json2);
    assert!(rec["spec"].get("pace").is_none() && rec["results"].get("pace").is_none(), "{:#}", rec["spec"]);
}

/// fio's `io_submit_mode=offload` (`--io-submit-mode offload`): the thread paces and queues,
/// submission threads submit, and latency counts from when each I/O was queued. Asked for 2000
/// IOPS of a device that does one I/O per millisecond at depth 1, the queue grows by about a
/// thousand I/Os a second and the latency with it (hundreds of milliseconds by the end), where
/// the inline loop, stamping at submission, shows the device's millisecond. The record says
/// which; offload without a rate is refused in one line.
#[test]
fn offloaded_submission_shows_a_backlog_in_the_latency_unlike_inline() {
    let dir = tempdir();
    let run = |mode: &str| {
        let json = dir.path().join(format!("{mode}.json"));
        let out = iolab(&[
            "run",
            "-i",
            "null",
            "--null-script",
            "delay=1ms",
            "--qd",
            "1",
            "--rate-iops",
            "2000",
            "--io-submit-mode",
            mode,
            "--runtime",
            "1s",
            "-q",
            "--json",
            &json.display().to_string(),
        ]);
        out.assert_ok();
        record(&json)
    };
    let inline = run("inline");
    let offload = run("offload");
    let p50 = |r: &serde_json::Value| u(r, "/results/read/lat_ns/p50");
    assert!(p50(&inline) < 20_000_000, "inline, latency from submission: {:#}", inline["results"]["read"]["lat_ns"]);
    assert!(p50(&offload) > 100_000_000, "offload, the backlog is in the latency: {:#}", offload["results"]["read"]["lat_ns"]);
    assert!(u(&offload, "/results/read/lat_ns/max") > 300_000_000, "{:#}", offload["results"]["read"]["lat_ns"]);
    let pace = &offload["results"]["pace"];
    assert_eq!((pace["submit_mode"].as_str(), pace["latency_from"].as_str()), (Some("offload"), Some("queued")), "{pace:#}");
    assert_eq!(offload["spec"]["pace"]["submit_mode"], "offload", "{:#}", offload["spec"]);
    assert_eq!(
        (inline["results"]["pace"]["submit_mode"].as_str(), inline["results"]["pace"]["latency_from"].as_str()),
        (Some("inline"), Some("submission"))
    );
    // Offloaded, a synchronous interface takes a depth: that many submission threads.
    let file = dir.path().join("f");
    std::fs::write(&file, vec![0u8; 1 << 20]).unwrap();
    let f = file.display().to_string();
    iolab(&["run", "-i", "psync", "--buffered", "--qd", "4", "--rate-iops", "400", "--io-submit-mode", "offload", "--ios", "40", "-q", &f])
        .assert_ok();
    let line = iolab(&["run", "-i", "null", "--io-submit-mode", "offload", "--ios", "10"]).assert_usage_error();
    assert!(line.contains("io_submit_mode=offload") && line.contains("give rate or rate_iops"), "{line}");
}

/// `--thinktime` stalls after every `--thinktime-blocks` I/Os once nothing is in flight: 100
/// I/Os in blocks of 4 with 5 ms stalls take at least 24 stalls' time, whatever the depth.
#[test]
fn thinktime_stalls_between_blocks_of_ios() {
    let dir = tempdir();
    let json = dir.path().join("t.json");
    let run = iolab(&[
        "run",
        "-i",
        "null",
        "--qd",
        "8",
        "--thinktime",
        "5ms",
        "--thinktime-blocks",
        "4",
        "--ios",
        "100",
        "-q",
        "--json",
        &json.display().to_string(),
    ]);
    run.assert_ok();
    let rec = record(&json);
    let w = f(&rec, "/results/window_s");
    assert!(w >= 0.12, "100 I/Os with a 5 ms stall every 4 took {w} s");
    assert_eq!(u(&rec, "/results/read/ios"), 100);
    // Latency is from submission: the stall is not in it.
    assert!(u(&rec, "/results/read/lat_ns/p50") < 1_000_000, "{:#}", rec["results"]["read"]["lat_ns"]);
    assert_eq!(rec["spec"]["pace"]["thinktime_ns"], 5_000_000);
}

/// `--rate-min` fails the run when a thread's rate over a second falls below it (fio ends such
/// a job), in one line; a pacing flag's bad value is refused before anything runs.
#[test]
fn a_rate_below_rate_min_fails_the_run_and_bad_pacing_is_refused() {
    let run = iolab(&["run", "-i", "null", "--rate-iops", "100", "--rate-min", "1m", "--runtime", "3s", "-q"]);
    assert_eq!(run.code, 1, "{}", run.describe());
    let line = run.one_line_stderr();
    assert!(line.contains("rate_min: thread 0 issued") && line.contains("below the 1048576 B/s asked"), "{line}");
    let line = iolab(&["run", "-i", "null", "--rate-iops", "x", "--ios", "10"]).assert_usage_error();
    assert!(line.contains("--rate-iops") && line.contains("'x'"), "{line}");
    let line = iolab(&["run", "-i", "null", "--rate-iops", "10", "--rate", "1m", "--ios", "10"]).assert_usage_error();
    assert!(line.contains("not both"), "{line}");
    let line = iolab(&["run", "-i", "null", "--thinktime", "1ms", "--thinktime-spin", "2ms", "--ios", "10"]).assert_usage_error();
    assert!(line.contains("thinktime_spin"), "{line}");
}
