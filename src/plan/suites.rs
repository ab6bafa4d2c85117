//! The five studies as built-in suites (../shared/STUDIES.md), with the papers' parameters and
//! a `--quick` scale that finishes in minutes. Each part is a sweep plan; what iolab or the
//! machine cannot run is listed with the reason, never left out silently.

pub struct Part {
    pub name: &'static str,
    /// Which of the paper's tables and figures this part feeds.
    pub feeds: &'static str,
    /// The plan's matrix and rules (TOML tables), shared by both scales.
    pub matrix: fn(quick: bool) -> String,
    /// Paper scale: (replicates, ramp, runtime); quick: the same, small.
    pub full: (u32, &'static str, &'static str),
    pub quick: (u32, &'static str, &'static str),
    /// Parts of the study iolab cannot run, with the reason.
    pub unsupported: &'static [(&'static str, &'static str)],
}

pub struct Suite {
    pub name: &'static str,
    pub title: &'static str,
    pub parts: &'static [Part],
}

const SPDK: (&str, &str) = ("interface=spdk", "iolab has no user-space (SPDK) NVMe driver interface: kernel-bypass runs cannot be made");

fn pick(quick: bool, full: &str, small: &str) -> String {
    (if quick { small } else { full }).to_string()
}

const ALL_MODES: &str = r#"
[[rule]]
when = { interface = ["psync", "libaio", "posixaio"], submit = "sqpoll" }
action = "drop"
reason = "only io_uring has a submission-polling thread"
"#;

fn s1_latency(_: bool) -> String {
    format!(r#"[matrix]
interface = ["psync", "pvsync2", "posixaio", "libaio", "io_uring"]
submit = ["syscall", "sqpoll"]
complete = ["irq", "poll", "hybrid"]
rw = ["randread", "randwrite"]
bs = ["4k"]
qd = [1]
{ALL_MODES}"#)
}

fn s1_depth(q: bool) -> String {
    format!(r#"[matrix]
interface = ["posixaio", "libaio", "io_uring"]
submit = ["syscall", "sqpoll"]
complete = ["irq", "poll"]
rw = ["randread", "randwrite"]
bs = {}
qd = {}
{ALL_MODES}"#, pick(q, r#"["4k", "16k", "128k"]"#, r#"["4k", "128k"]"#), pick(q, "[1, 2, 4, 8, 16, 31]", "[1, 8]"))
}

fn s1_threads(q: bool) -> String {
    format!(r#"[matrix]
interface = ["psync", "pvsync2", "posixaio", "libaio", "io_uring"]
submit = ["syscall", "sqpoll"]
complete = ["irq", "poll"]
rw = ["randread", "randwrite"]
bs = {}
threads = {}
qd = [1]
{ALL_MODES}"#, pick(q, r#"["4k", "16k", "128k"]"#, r#"["4k"]"#), pick(q, "[1, 2, 4, 8, 16, 31]", "[1, 2]"))
}

// CHEOPS'23 names: psync, libaio, iou (irq), iou-c (IOPOLL), iou-s (SQPOLL + IOPOLL).
const CHEOPS_RULES: &str = r#"
[[rule]]
when = { interface = ["psync", "libaio"], complete = "poll" }
action = "drop"
reason = "CHEOPS'23 polls only with io_uring"
[[rule]]
when = { interface = ["psync", "libaio"], submit = "sqpoll" }
action = "drop"
reason = "only io_uring has a submission-polling thread"
[[rule]]
when = { submit = "sqpoll", complete = "irq" }
action = "drop"
reason = "CHEOPS'23's iou-s is SQPOLL with IOPOLL"
"#;

fn s2_qd1(_: bool) -> String {
    format!("[matrix]\ninterface = [\"psync\", \"libaio\", \"io_uring\"]\nsubmit = [\"syscall\", \"sqpoll\"]\ncomplete = [\"irq\", \"poll\"]\nqd = [1]\n[options]\ncpus = [0]\n{CHEOPS_RULES}")
}

fn s2_jcurve(q: bool) -> String {
    format!("[matrix]\ninterface = [\"libaio\", \"io_uring\"]\nsubmit = [\"syscall\", \"sqpoll\"]\ncomplete = [\"irq\", \"poll\"]\nqd = {}\n[options]\ncpus = [0]\n{CHEOPS_RULES}",
        pick(q, "[1, 2, 4, 8, 16, 32, 64, 128]", "[1, 4, 16, 64]"))
}

fn s2_cores(q: bool) -> String {
    format!("[matrix]\ninterface = [\"libaio\", \"io_uring\"]\nsubmit = [\"syscall\", \"sqpoll\"]\ncomplete = [\"irq\", \"poll\"]\nqd = [128]\nthreads = {}\n{CHEOPS_RULES}",
        pick(q, "[1, 2, 4, 8, 16, 20]", "[1, 2]"))
}

fn s2_schedulers(q: bool) -> String {
    format!("[matrix]\ninterface = [\"io_uring\"]\nsubmit = [\"syscall\", \"sqpoll\"]\ncomplete = [\"irq\", \"poll\"]\nqd = [128]\nthreads = {}\nscheduler = [\"none\", \"mq-deadline\", \"kyber\", \"bfq\"]\n{CHEOPS_RULES}",
        pick(q, "[1, 2, 4, 8, 16, 20]", "[1]"))
}

fn s3_map(q: bool) -> String {
    format!(r#"[matrix]
interface = ["pvsync2", "io_uring"]
complete = ["irq", "poll", "hybrid"]
bs = {}
threads = {}
qd = [1]
scheduler = ["none"]
"#, pick(q, r#"["1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k"]"#, r#"["4k", "64k"]"#), pick(q, "[1, 2, 4, 8, 16, 32, 64]", "[1, 2]"))
}

fn s4_latency(q: bool) -> String {
    format!("[matrix]\ninterface = [\"libaio\"]\nrw = [\"read\", \"randread\", \"write\", \"randwrite\"]\nqd = {}\n", pick(q, "[1, 2, 4, 8, 16, 32]", "[1, 8]"))
}

fn s4_bandwidth(q: bool) -> String {
    format!("[matrix]\ninterface = [\"libaio\"]\nrw = [\"read\", \"randread\", \"write\", \"randwrite\"]\nqd = {}\n", pick(q, "[1, 2, 4, 8, 16, 32, 64, 128, 256]", "[1, 32]"))
}

fn s4_interference(q: bool) -> String {
    format!("[matrix]\ninterface = [\"libaio\"]\nrw = [\"randrw\"]\nwrite_mix = {}\nqd = [1]\n", pick(q, "[0, 20, 40, 60, 80]", "[0, 40, 80]"))
}

fn s4_gc(_: bool) -> String {
    "[matrix]\ninterface = [\"libaio\"]\nrw = [\"randwrite\"]\nqd = [32]\n".to_string()
}

fn s4_completion(q: bool) -> String {
    format!(r#"[matrix]
interface = ["pvsync2", "io_uring"]
complete = ["irq", "poll", "hybrid"]
rw = {}
bs = {}
qd = [1]
"#, pick(q, r#"["read", "randread", "write", "randwrite"]"#, r#"["randread", "randwrite"]"#), pick(q, r#"["4k", "8k", "16k", "32k"]"#, r#"["4k", "32k"]"#))
}

fn s5_baseline(q: bool) -> String {
    format!(r#"[matrix]
interface = ["psync", "io_uring"]
complete = ["irq", "poll"]
rw = ["read", "randread", "write", "randwrite"]
bs = {}
qd = [1]
"#, pick(q, r#"["4k", "8k", "16k", "32k", "64k", "128k"]"#, r#"["4k", "128k"]"#))
}

pub const SUITES: &[Suite] = &[
    Suite { name: "S1", title: "HotStorage'23: energy implications of I/O interface design choices", parts: &[
        Part { name: "S1.1-latency", feeds: "Table 2: p50/p99 latency per (interface, submission, completion), slowdown vs fastest", matrix: s1_latency, full: (5, "60s", "120s"), quick: (2, "0.5s", "2s"), unsupported: &[] },
        Part { name: "S1.2-queue-depth", feeds: "IOPS, W and IOPS/J against queue depth per block size; cores used", matrix: s1_depth, full: (5, "60s", "120s"), quick: (1, "0.5s", "1s"), unsupported: &[] },
        Part { name: "S1.3-threads", feeds: "multithreaded panels: IOPS, W, IOPS/J against threads; cores used", matrix: s1_threads, full: (5, "60s", "120s"), quick: (1, "0.5s", "1s"), unsupported: &[] },
    ]},
    Suite { name: "S2", title: "CHEOPS'23: performance characterization of storage stacks", parts: &[
        Part { name: "S2.1-qd1", feeds: "IOPS, instructions per I/O (process and system-wide), IPC, cache-miss rate at QD1 on one core", matrix: s2_qd1, full: (3, "20s", "120s"), quick: (2, "0.5s", "2s"),
            unsupported: &[SPDK, ("instructions split by layer", "needs perf sampling with kernel symbols; not implemented")] },
        Part { name: "S2.2-jcurve", feeds: "J-curve (IOPS against mean latency) with the saturation point, one core", matrix: s2_jcurve, full: (3, "20s", "120s"), quick: (1, "0.5s", "1s"), unsupported: &[SPDK] },
        Part { name: "S2.3-cores", feeds: "IOPS against cores at QD128; cores to peak", matrix: s2_cores, full: (3, "20s", "120s"), quick: (1, "0.5s", "1s"), unsupported: &[SPDK] },
        Part { name: "S2.4-schedulers", feeds: "Table 2: IOPS per scheduler and ratio to none; thread scaling per scheduler", matrix: s2_schedulers, full: (3, "20s", "120s"), quick: (1, "0.5s", "1s"),
            unsupported: &[("NUMA pinning", "not varied by the suite; pin with a plan's options.cpus")] },
    ]},
    Suite { name: "S3", title: "HotStorage'22: when poll is more energy efficient than interrupt", parts: &[
        Part { name: "S3-map", feeds: "Table: 4 KiB latency/IOPS per completion method at 1 and 8 threads; energy-efficiency map per (bs, threads); context switches per I/O", matrix: s3_map, full: (10, "10s", "120s"), quick: (2, "0.5s", "1s"), unsupported: &[] },
    ]},
    Suite { name: "S4", title: "IISWC'19: system challenges of ultra-low-latency SSDs", parts: &[
        Part { name: "S4.1-latency", feeds: "mean and p99.999 latency against QD, seq/rand read/write", matrix: s4_latency, full: (3, "10s", "60s"), quick: (1, "0.5s", "1s"), unsupported: &[] },
        Part { name: "S4.2-bandwidth", feeds: "bandwidth against QD, normalised to the device maximum", matrix: s4_bandwidth, full: (3, "10s", "60s"), quick: (1, "0.5s", "1s"), unsupported: &[] },
        Part { name: "S4.3-interference", feeds: "read latency (mean, p99.999) with 0-80 % writes mixed in", matrix: s4_interference, full: (3, "10s", "60s"), quick: (1, "0.5s", "1s"), unsupported: &[] },
        Part { name: "S4.4-gc", feeds: "garbage collection: per-second latency series of random writes after a fill (precondition first)", matrix: s4_gc, full: (1, "0s", "30m"), quick: (1, "0s", "3s"), unsupported: &[] },
        Part { name: "S4.5-completion", feeds: "interrupt vs polling vs hybrid: mean and p99.999 latency, CPU user and kernel", matrix: s4_completion, full: (3, "10s", "60s"), quick: (1, "0.5s", "1s"), unsupported: &[] },
        Part { name: "S4.6-user-space", feeds: "kernel vs user-space driver", matrix: s4_latency, full: (0, "0s", "0s"), quick: (0, "0s", "0s"), unsupported: &[SPDK] },
        Part { name: "S4.7-server-client", feeds: "network block device served by the kernel vs a user-space stack", matrix: s4_latency, full: (0, "0s", "0s"), quick: (0, "0s", "0s"),
            unsupported: &[("server-client", "iolab drives local devices only; a network block device (nbd) target can be given as an ordinary target")] },
    ]},
    Suite { name: "S5", title: "FPL'18 FastPath: towards wire-speed NVMe", parts: &[
        Part { name: "S5.1-breakdown", feeds: "latency breakdown of one 4 KiB I/O through the kernel", matrix: s5_baseline, full: (0, "0s", "0s"), quick: (0, "0s", "0s"),
            unsupported: &[("latency breakdown", "needs kernel tracepoints per layer; not implemented")] },
        Part { name: "S5.2-baseline", feeds: "kernel baseline latency (seq/rand read/write) and IOPS/bandwidth 4K-128K for the fast-path comparison", matrix: s5_baseline, full: (3, "5s", "30s"), quick: (1, "0.5s", "1s"),
            unsupported: &[("interface=nvme-passthru", "the fast path (-i nvme-passthru) runs on an NVMe generic device /dev/ngXnY while the suite's target is a block device; run the same matrix with -i nvme-passthru on the namespace's ng device")] },
    ]},
];

pub fn find(name: &str) -> Option<&'static Suite> {
    SUITES.iter().find(|s| s.name.eq_ignore_ascii_case(name))
}

impl Part {
    /// Whether the part has runs at all (some parts exist only to report what cannot run).
    pub fn runnable(&self) -> bool {
        self.full.0 > 0
    }

    /// The part's plan text at the chosen scale.
    pub fn plan(&self, quick: bool, size: Option<&str>, destructive: &[String]) -> String {
        let (replicates, ramp, runtime) = if quick { self.quick } else { self.full };
        let mut top = format!("name = \"{}\"\nreplicates = {replicates}\nramp = \"{ramp}\"\nruntime = \"{runtime}\"\nseed = 1\n", self.name);
        if let Some(s) = size {
            top += &format!("size = \"{s}\"\n");
        }
        if !destructive.is_empty() {
            top += &format!("destructive = [{}]\n", destructive.iter().map(|d| format!("\"{d}\"")).collect::<Vec<_>>().join(", "));
        }
        top + &(self.matrix)(quick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_expands_at_both_scales() {
        for s in SUITES {
            for p in s.parts.iter().filter(|p| p.runnable()) {
                for quick in [false, true] {
                    let e = crate::plan::sweep::expand(&p.plan(quick, None, &[]), &[]).unwrap_or_else(|e| panic!("{}: {e}", p.name));
                    assert!(!e.configs.is_empty(), "{}", p.name);
                }
            }
        }
    }

    #[test]
    fn paper_parameters() {
        let s3 = &find("s3").unwrap().parts[0];
        let e = crate::plan::sweep::expand(&s3.plan(false, None, &[]), &[]).unwrap();
        // 8 block sizes x 7 thread counts x (pvsync2: irq, poll; io_uring: irq, poll, hybrid).
        assert_eq!(e.configs.len(), 8 * 7 * 5);
        assert_eq!(e.replicates, 10);
        assert_eq!(e.seconds_per_run, Some(130.0));
        let quick = crate::plan::sweep::expand(&s3.plan(true, None, &[]), &[]).unwrap();
        assert!(quick.estimate_s(quick.order.len()).unwrap() < 300.0, "quick S3 finishes in minutes");
        let s1 = &find("S1").unwrap().parts[0];
        let t2 = crate::plan::sweep::expand(&s1.plan(false, None, &[]), &[]).unwrap();
        // Table 2: psync, pvsync2 x2, posixaio x2, libaio, io_uring 2 submits x 3 completions = 12, x2 rw.
        assert_eq!(t2.configs.len(), 24);
    }
}
