//! The meters' parsers on real file contents recorded from this project's machines
//! (tests/fixtures/host: a Linux 6.18 VM with a virtio disk; tests/fixtures/nvme-guest: the
//! emulated-NVMe QEMU guest running Debian's 6.1 kernel).
use iolab::meters::{classify, diskstat, interrupts, procstat, tasks};
use std::path::Path;

fn fixture(rel: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)).unwrap()
}

#[test]
fn proc_stat_aggregate_line() {
    let text = fixture("host/proc_stat");
    let s = procstat::parse(&text, 100.0).unwrap();
    let first = text.lines().next().unwrap();
    let fields: Vec<f64> = first.split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect();
    assert_eq!(s.user_s, fields[0] / 100.0);
    assert_eq!(s.system_s, fields[2] / 100.0);
    assert_eq!(s.idle_s, fields[3] / 100.0);
    assert_eq!(s.softirq_s, fields[6] / 100.0);
    let busy = (fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]) / 100.0;
    assert!((s.busy_s() - busy).abs() < 1e-9);
    assert!(procstat::parse("intr 1 2 3\n", 100.0).is_none());
}

#[test]
fn proc_interrupts_virtio_queue_lines() {
    let lines = interrupts::parse(&fixture("host/proc_interrupts"));
    let req = lines.iter().find(|l| l.name == "virtio1-req.0").expect("virtio1-req.0 line");
    assert!(req.total > 0);
    assert!(lines.iter().any(|l| l.id == "LOC" && l.total > 0), "architecture lines parse too");
    let queues: Vec<&str> = lines.iter().filter(|l| interrupts::is_queue_irq("virtio1", &l.name)).map(|l| l.name.as_str()).collect();
    assert_eq!(queues, vec!["virtio1-req.0"], "config interrupts and other devices are excluded");
    let (dev, all) = interrupts::totals(&lines, Some("virtio1"));
    assert_eq!(dev, Some(req.total));
    assert!(all > req.total);
}

#[test]
fn nvme_queue_names() {
    assert!(interrupts::is_queue_irq("nvme0", "nvme0q1"));
    assert!(interrupts::is_queue_irq("nvme0", "nvme0q12"));
    assert!(!interrupts::is_queue_irq("nvme0", "nvme0q0"), "admin queue");
    assert!(!interrupts::is_queue_irq("nvme0", "nvme10q1"));
    assert!(!interrupts::is_queue_irq("nvme1", "nvme10q1"));
    assert!(!interrupts::is_queue_irq("virtio1", "virtio10-req.0"));
    assert!(interrupts::is_queue_irq("virtio0", "virtio0"), "legacy single-vector virtio");
}

#[test]
fn nvme_guest_interrupts() {
    let lines = interrupts::parse(&fixture("nvme-guest/proc_interrupts"));
    let q: Vec<&interrupts::IrqLine> = lines.iter().filter(|l| interrupts::is_queue_irq("nvme0", &l.name)).collect();
    assert!(!q.is_empty(), "nvme0 I/O queue lines");
    assert!(lines.iter().any(|l| l.name == "nvme0q0"), "admin queue present but not an I/O queue");
}

#[test]
fn sys_block_stat() {
    let text = fixture("host/sys_block_vda_stat");
    let s = diskstat::parse(&text).unwrap();
    let v: Vec<u64> = text.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!((s.read_ios, s.read_sectors, s.write_ios, s.time_in_queue_ms), (v[0], v[2], v[4], v[10]));
    let later = diskstat::DiskStat { read_ios: s.read_ios + 10, ..s };
    assert_eq!(later.minus(&s).read_ios, 10);
    assert!(diskstat::parse("1 2 3").is_none());
}

fn task_dir(name: &str) -> Vec<tasks::TaskSample> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name);
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "stat") {
            let (comm, ut, st) = tasks::parse_stat(&std::fs::read_to_string(&p).unwrap()).unwrap();
            let (v, n) = tasks::parse_status_ctx(&std::fs::read_to_string(p.with_extension("status")).unwrap());
            let tid = p.file_stem().unwrap().to_str().unwrap().parse().unwrap();
            out.push(tasks::TaskSample {
                pid: 0,
                tid,
                comm,
                user_s: ut as f64 / 100.0,
                system_s: st as f64 / 100.0,
                voluntary_ctx: v,
                involuntary_ctx: n,
            });
        }
    }
    out.sort_by_key(|t| t.tid);
    out
}

#[test]
fn task_stat_classes_under_sqpoll() {
    let ts = task_dir("host/task-sqpoll");
    let worker = ts.iter().find(|t| t.comm == "iolab-w0").unwrap();
    let sqp = ts.iter().find(|t| t.comm.starts_with("iou-sqp-")).expect("SQPOLL thread recorded");
    assert_eq!(classify(worker, &[worker.tid]), "workload");
    assert_eq!(classify(sqp, &[worker.tid]), "sqpoll");
    assert_eq!(classify(&ts[0], &[worker.tid]), "other_threads", "the main thread coordinates");
    assert!(sqp.system_s > worker.system_s, "the SQ thread does the kernel work");
    assert!(worker.voluntary_ctx > 0 || worker.involuntary_ctx > 0 || sqp.involuntary_ctx > 0);
}

#[test]
fn task_stat_classes_under_posixaio() {
    let ts = task_dir("host/task-posixaio");
    let workers: Vec<&tasks::TaskSample> = ts.iter().filter(|t| t.comm == "iolab-w0").collect();
    assert_eq!(workers.len(), 2, "the worker and glibc's helper share a name");
    let (w, helper) = (workers[0], workers[1]);
    assert_eq!(classify(w, &[w.tid]), "workload");
    assert_eq!(classify(helper, &[w.tid]), "aio_helpers");
}

#[test]
fn stat_comm_with_spaces_and_parens() {
    let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 9 0 0 20 0 1 0 100 1000 10";
    let (comm, ut, st) = tasks::parse_stat(line).unwrap();
    assert_eq!((comm.as_str(), ut, st), ("a (b) c", 7, 9));
}

#[test]
fn nvme_guest_stat_files() {
    // Recorded in the emulated-NVMe guest (tests/vm/guest/capture-fixtures.sh) during an
    // io_uring SQPOLL run on nvme0n1.
    let s = procstat::parse(&fixture("nvme-guest/proc_stat"), 100.0).unwrap();
    assert!(s.busy_s() > 0.0 && s.idle_s > 0.0);
    let d = diskstat::parse(&fixture("nvme-guest/sys_block_stat")).unwrap();
    assert!(d.read_ios > 0, "the run's reads are counted");
    let ts = task_dir("nvme-guest/task-sqpoll");
    let worker = ts.iter().find(|t| t.comm == "iolab-w0").unwrap();
    let sqp = ts.iter().find(|t| t.comm == format!("iou-sqp-{}", worker.tid)).expect("SQ thread named after its creator");
    assert_eq!(classify(sqp, &[worker.tid]), "sqpoll");
    assert!(sqp.system_s > 0.0);
    let (dev, all) = interrupts::totals(&interrupts::parse(&fixture("nvme-guest/proc_interrupts")), Some("nvme0"));
    assert!(dev.unwrap() > 0 && all > dev.unwrap());
}
