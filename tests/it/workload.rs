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
