//! `--profile layers` on a real kernel: a file on this machine's disk shows its layers.
use crate::common::{self, iolab_in};
use serde_json::Value;

fn layer<'a>(p: &'a Value, name: &str) -> Option<&'a Value> {
    p["layers"].as_array()?.iter().find(|l| l["layer"] == name)
}

#[test]
fn a_profiled_run_on_a_disk_file_shows_the_file_system_block_and_driver_layers() {
    if !common::is_root() {
        return common::skip("a_profiled_run_on_a_disk_file_shows...", "sampling every CPU needs root");
    }
    // /var/tmp: on the root file system, a disk, never tmpfs.
    let dir = tempfile::tempdir_in("/var/tmp").unwrap();
    let target = common::verify_file(dir.path(), "t", 64 << 20);
    let json = dir.path().join("r.json");
    let run =
        iolab_in(dir.path(), &["run", "--profile", "layers", "--runtime", "1", target.to_str().unwrap(), "--json", json.to_str().unwrap()]);
    run.assert_ok();
    let rec = common::record(&json);
    let p = &rec["cost"]["profile"];
    assert!(p["samples"].as_u64().unwrap() > 100, "{p}");
    assert_eq!(p["event"], "cpu-clock");
    let shares: f64 = p["layers"].as_array().unwrap().iter().map(|l| l["self_share"].as_f64().unwrap()).sum();
    assert!((shares - 1.0).abs() < 1e-6, "self shares sum to 1: {shares}");
    assert!(layer(p, "system call entry and exit").is_some(), "{p}");
    cycles_and_instructions_where_the_cpus_count_them(p, &run.stdout);
    // The same job ran unprofiled first; the record compares the two.
    let u = &p["unprofiled"];
    assert!(u["iops"].as_f64().unwrap() > 0.0 && u["iops_change"].is_f64(), "{u}");
    assert!(run.stdout.contains("profiling cost: IOPS"), "{}", run.stdout);
    if rec["environment"]["targets"][0]["device"].is_null() {
        return common::skip("block and driver layers", "the temporary directory is on no block device here");
    }
    for name in ["file system", "block layer", "device driver"] {
        let l = layer(p, name).unwrap_or_else(|| panic!("no {name} layer in {p}"));
        assert!(l["inclusive_share"].as_f64().unwrap() > 0.0);
        assert!(l["inclusive_ns_per_io"].as_f64().unwrap() > 0.0);
    }
    assert!(run.stdout.contains("layers ") && run.stdout.contains("block layer"), "{}", run.stdout);
}

/// Where the machine has a CPU PMU every layer carries cycles and instructions per I/O; where it
/// has none (this VM) the record says why and carries none, never an estimate.
fn cycles_and_instructions_where_the_cpus_count_them(p: &Value, stdout: &str) {
    let pmu = ["cpu", "cpu_core", "cpu_atom"].iter().any(|d| std::path::Path::new("/sys/bus/event_source/devices").join(d).exists());
    let (hw, layers) = (&p["hardware"], p["layers"].as_array().unwrap());
    if pmu {
        assert_eq!(hw["event"], "{cycles,instructions}:S", "{hw}");
        assert!(hw["samples"].as_u64().unwrap() > 0 && hw["instructions_per_io"].as_f64().unwrap() > 0.0, "{hw}");
        let counted = |key: &str| layers.iter().all(|l| l[key].is_f64());
        assert!(counted("self_cycles_per_io") && counted("inclusive_instructions_per_io"), "{p}");
        let iolab = layer(p, "iolab").unwrap();
        assert!(iolab["inclusive_instructions_per_io"].as_f64().unwrap() > 0.0, "{iolab}");
    } else {
        let why = hw["unavailable"].as_str().unwrap_or_else(|| panic!("no PMU here, yet {hw}"));
        assert!(why.contains("no PMU") && why.contains("perf_event_open(cycles)"), "{why}");
        for key in ["self_cycles_per_io", "inclusive_cycles_per_io", "self_instructions_per_io", "inclusive_instructions_per_io"] {
            assert!(layers.iter().all(|l| l.get(key).is_none()), "{key} without a PMU: {p}");
        }
        assert!(stdout.contains("no cycles or instructions per layer: no PMU"), "{stdout}");
    }
}

#[test]
fn an_unprofiled_record_has_no_profile() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    iolab_in(dir.path(), &["run", "-i", "null", "--ios", "1000", "--json", json.to_str().unwrap()]).assert_ok();
    assert!(common::record(&json)["cost"].get("profile").is_none());
}

#[test]
fn a_profiled_sweep_profiles_every_run() {
    if !common::is_root() {
        return common::skip("a_profiled_sweep_profiles_every_run", "sampling every CPU needs root");
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.toml");
    std::fs::write(&plan, "name = \"profiled\"\nreplicates = 1\nruntime = \"300ms\"\n[matrix]\ninterface = [\"null\"]\nqd = [1, 4]\n")
        .unwrap();
    let db = dir.path().join("r.db");
    let dry = iolab_in(dir.path(), &["sweep", "--dry-run", "--profile", "layers", plan.to_str().unwrap()]);
    assert!(dry.stdout.contains("profile: layers"), "{}", dry.stdout);
    iolab_in(dir.path(), &["sweep", "-q", "--profile", "layers", "--db", db.to_str().unwrap(), plan.to_str().unwrap()]).assert_ok();
    let store = iolab::store::Store::open_existing(&db).unwrap();
    let runs = store.list_runs(&Default::default()).unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        let rec = store.run_record(r.id).unwrap().unwrap();
        let p = &rec["cost"]["profile"];
        assert!(layer(p, "iolab").is_some() && p["unprofiled"]["iops"].as_f64().unwrap() > 0.0, "{p}");
    }
}
