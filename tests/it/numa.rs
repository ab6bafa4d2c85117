//! `--numa` on this machine: every worker and SQPOLL thread pinned to the node's CPUs, read back
//! from /proc into the record; a node that does not exist refused in one line.
use crate::common::*;
use serde_json::Value;

fn cpus(v: &Value) -> Vec<u64> {
    v.as_array().unwrap_or_else(|| panic!("not a CPU list: {v}")).iter().map(|c| c.as_u64().unwrap()).collect()
}

/// Two workers under SQPOLL with `--numa local` on a file: the machine's one node (or the
/// device's), each worker alone on its CPU, each SQ thread on the CPU chosen for it.
#[test]
fn local_pins_workers_and_sqpoll_threads_and_the_record_shows_where_they_ran() {
    let dir = tempdir();
    let target = zero_file(dir.path(), "t", 8 << 20);
    let json = dir.path().join("r.json");
    let run = iolab(&[
        "run",
        "-i",
        "io_uring",
        "--submit",
        "sqpoll",
        "--threads",
        "2",
        "--numa",
        "local",
        "--runtime",
        "1s",
        "-q",
        "--json",
        json.to_str().unwrap(),
        target.to_str().unwrap(),
    ]);
    if run.code != 0 && run.stderr.contains("SQPOLL") {
        return skip("numa local with sqpoll", run.stderr.trim());
    }
    run.assert_ok();
    let rec = record(&json);
    let p = &rec["environment"]["placement"];
    assert_eq!(p["numa"], "local");
    let node_cpus = cpus(&p["node_cpus"]);
    let (workers, sq) = (cpus(&p["worker_cpus"]), cpus(&p["sq_cpus"]));
    assert_eq!((workers.len(), sq.len()), (2, 2), "{p:#}");
    assert!(workers.iter().chain(&sq).all(|c| node_cpus.contains(c)), "{p:#}");
    if p["nodes"] == 1 {
        assert!(p["note"].as_str().unwrap().contains("the only NUMA node"), "{p:#}");
    }
    let threads = p["threads"].as_array().unwrap();
    let of = |role: &str| threads.iter().filter(|t| t["role"] == role).collect::<Vec<_>>();
    let (w, s) = (of("worker"), of("sqpoll"));
    assert_eq!(w.len(), 2, "{p:#}");
    for (t, cpu) in w.iter().zip(&workers) {
        assert_eq!((cpus(&t["allowed"]), cpus(&t["ran_on"])), (vec![*cpu], vec![*cpu]), "{t:#}");
    }
    // Linux 5.12 made the SQ thread one of ours (iou-sqp-TID); before, it is not in /proc/self.
    if kernel_version() >= (5, 12) {
        assert_eq!(s.len(), 2, "{p:#}");
        for t in s {
            let worker = w.iter().position(|x| t["name"] == format!("iou-sqp-{}", x["tid"])).expect("named after its worker");
            assert_eq!(cpus(&t["allowed"]), vec![sq[worker]], "{t:#}");
            assert!(cpus(&t["ran_on"]).iter().all(|c| *c == sq[worker]), "{t:#}");
        }
    }
}

#[test]
fn a_node_that_does_not_exist_is_refused_and_off_pins_nothing() {
    let line = iolab(&["run", "-i", "null", "--numa", "4095", "--ios", "10"]).one_line_stderr();
    assert!(line.starts_with("iolab: --numa 4095: this machine has no NUMA node 4095; its nodes are 0 (CPUs"), "{line}");
    let dir = tempdir();
    let json = dir.path().join("r.json");
    iolab(&["run", "-i", "null", "--ios", "1000", "-q", "--json", json.to_str().unwrap()]).assert_ok();
    let p = &record(&json)["environment"]["placement"];
    assert_eq!((&p["numa"], &p["node"], cpus(&p["worker_cpus"]).len()), (&Value::from("off"), &Value::Null, 0), "{p:#}");
    assert!(record(&json)["spec"].get("numa").is_none(), "off is left out of the spec");
}

/// S2's dry run says its preconditioning is not done on a temporary file and why; a part that
/// varies numa itself (S2.4, Fig 8) keeps it against `--numa`, and says so.
#[test]
fn s2_dry_run_says_why_it_does_not_precondition_and_pins_to_the_node() {
    let dir = tempdir();
    let db = dir.path().join("s.db");
    let run = iolab(&["suite", "run", "S2", "--quick", "--part", "S2.1", "--dry-run", "--db", db.to_str().unwrap()]);
    run.assert_ok();
    assert!(run.stdout.contains("preconditioning: not done: the suite runs on a temporary file"), "{}", run.stdout);
    let off = iolab(&["suite", "run", "S2", "--quick", "--part", "S2.4", "--numa", "off", "--dry-run", "--db", db.to_str().unwrap()]);
    off.assert_ok();
    assert!(off.stdout.contains("--numa off not applied: this part varies numa itself"), "{}", off.stdout);
}

/// `--mem-policy` (fio's numa_mem_policy) and `--ioprio` (prioclass/prio): each worker's policy
/// and priority set before its buffers, read back from the kernel (get_mempolicy, ioprio_get)
/// with the node each buffer page is on (move_pages), in the record; a policy's node or a list
/// of nodes that does not exist refused in one line before the run.
#[test]
fn a_memory_policy_and_io_priority_are_applied_read_back_and_recorded() {
    let dir = tempdir();
    let json = dir.path().join("r.json");
    let args = ["run", "-i", "null", "--threads", "2", "--qd", "4", "--bs", "64k", "--ios", "2000", "-q"];
    let extra = ["--mem-policy", "bind:0", "--ioprio", "idle", "--numa", "0", "--json", json.to_str().unwrap()];
    iolab(&[&args[..], &extra[..]].concat()).assert_ok();
    let rec = record(&json);
    let s = &rec["results"]["thread_settings"];
    assert_eq!((&rec["spec"]["mem_policy"], &rec["spec"]["ioprio"]), (&Value::from("bind:0"), &Value::from("idle:0")), "{s:#}");
    let threads = s["threads"].as_array().unwrap_or_else(|| panic!("{s:#}"));
    assert_eq!(threads.len(), 2, "{s:#}");
    for t in threads {
        assert_eq!((&t["mem_policy"], &t["ioprio"]), (&Value::from("bind:0"), &Value::from("idle:0")), "{t:#}");
        // 4 x 64 KiB of buffers: 64 pages, every one on node 0.
        assert_eq!(t["buffer_pages_by_node"], serde_json::json!([[0, 64]]), "{t:#}");
    }
    let plain = dir.path().join("p.json");
    iolab(&["run", "-i", "null", "--ios", "100", "-q", "--json", plain.to_str().unwrap()]).assert_ok();
    assert!(record(&plain)["results"].get("thread_settings").is_none(), "nothing asked, nothing set");
    let line = iolab(&["run", "-i", "null", "--mem-policy", "interleave:0,63", "--ios", "10"]).one_line_stderr();
    assert!(line.starts_with("iolab: --mem-policy interleave:0,63: this machine has no NUMA node 63; its nodes are 0"), "{line}");
    if !std::path::Path::new("/sys/devices/system/node/node1").exists() {
        let line = iolab(&["run", "-i", "null", "--numa", "0-1", "--ios", "10"]).one_line_stderr();
        assert!(line.starts_with("iolab: --numa 0-1: this machine has no NUMA node 1; its nodes are 0"), "{line}");
    }
}
