//! S5, FPL'18 FastPath: towards wire-speed NVMe. The kernel baseline the fast path is compared
//! with; the fast path itself runs with -i nvme-passthru on the namespace's generic device.
use super::{pick, Part, Report, Runs, Study};

pub const STUDY: Study = Study { id: "S5", title: "FPL'18 FastPath: towards wire-speed NVMe", parts: &[
    Part { name: "S5.1-breakdown", feeds: "latency breakdown of one 4 KiB I/O through the kernel",
        unsupported: &[("latency breakdown", "needs kernel tracepoints per layer; not implemented")], runs: None },
    Part { name: "S5.2-baseline", feeds: "kernel baseline latency (seq/rand read/write) and IOPS/bandwidth 4K-128K for the fast-path comparison",
        unsupported: &[("interface=nvme-passthru", "the fast path (-i nvme-passthru) runs on an NVMe generic device /dev/ngXnY while the suite's target is a block device; run the same matrix with -i nvme-passthru on the namespace's ng device")],
        runs: Some(Runs { matrix: baseline_matrix, full: (3, "5s", "30s"), quick: (1, "0.5s", "1s"),
            report: Report::ConfigurationsOnly("the baseline is each configuration's IOPS and latency, for comparison with a fast-path sweep") }) },
]};

fn baseline_matrix(q: bool) -> String {
    format!(
        r#"[matrix]
interface = ["psync", "io_uring"]
complete = ["irq", "poll"]
rw = ["read", "randread", "write", "randwrite"]
bs = {}
qd = [1]
"#,
        pick(q, r#"["4k", "8k", "16k", "32k", "64k", "128k"]"#, r#"["4k", "128k"]"#)
    )
}
