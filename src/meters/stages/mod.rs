//! `--profile stages`: each request's latency split across the stack, from kernel tracepoints.
//!
//! Every tracepoint a request passes (system call entry and exit, io_uring submit and complete,
//! bio queued, request inserted, issued and completed, bio completed, the NVMe driver's command
//! setup and completion, the device interrupt) is opened on every CPU with `perf_event_open`
//! (PERF_TYPE_TRACEPOINT, ids and field layouts from tracefs' `format` files, [`super::tracefs`]),
//! its raw records written into one ring per CPU and drained by the coordinating thread. The
//! system-call events are filtered in the kernel to iolab's worker threads. After the window the
//! events are put in time order and matched request by request ([`matching`]); a request's
//! stages are the times between its consecutive points, so they add up to its end-to-end time.
//!
//! In named parts: this file holds the events and the points of a request's way (the types every
//! part shares) and the public face; [`decode`] reads the rings' records into [`Event`]s,
//! [`matching`] puts them together request by request ([`Matcher`](matching), a handler per kind
//! of event), [`summary`] turns matched requests into stage statistics and the record's types,
//! and [`tracer`] opens, drains and stops the tracepoints over the window.
mod decode;
mod matching;
mod summary;
mod tracer;

pub use decode::Decoder;
pub use matching::Matching;
pub use summary::{summarize, StageProfile, StageStats, StagesResult, USER_SPACE_DRIVER};
pub use tracer::Tracer;

/// What a tracepoint tells about a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    SysEnter,
    SysExit,
    UringSubmit,
    UringComplete,
    BioQueue,
    BlockSplit,
    RqInsert,
    RqIssue,
    RqComplete,
    BioComplete,
    NvmeSetup,
    NvmeComplete,
    IrqEntry,
}

/// The tracepoints, each with the names it has had across kernels (the first found is used).
pub const TRACEPOINTS: &[(Kind, &str, &[&str])] = &[
    (Kind::SysEnter, "raw_syscalls", &["sys_enter"]),
    (Kind::SysExit, "raw_syscalls", &["sys_exit"]),
    // io_uring_submit_sqe until 5.17, io_uring_submit_req since 5.18.
    (Kind::UringSubmit, "io_uring", &["io_uring_submit_req", "io_uring_submit_sqe"]),
    (Kind::UringComplete, "io_uring", &["io_uring_complete"]),
    (Kind::BioQueue, "block", &["block_bio_queue"]),
    (Kind::BlockSplit, "block", &["block_split"]),
    (Kind::RqInsert, "block", &["block_rq_insert"]),
    (Kind::RqIssue, "block", &["block_rq_issue"]),
    (Kind::RqComplete, "block", &["block_rq_complete"]),
    (Kind::BioComplete, "block", &["block_bio_complete"]),
    // Only while the nvme_core module is loaded.
    (Kind::NvmeSetup, "nvme", &["nvme_setup_cmd"]),
    (Kind::NvmeComplete, "nvme", &["nvme_complete_rq"]),
    (Kind::IrqEntry, "irq", &["irq_handler_entry"]),
];

/// `common_flags`: the event fired in hard or soft interrupt context (TRACE_FLAG_HARDIRQ 0x08,
/// TRACE_FLAG_SOFTIRQ 0x10, the same values on every kernel since 2.6). virtio-blk's requests
/// complete in the block softirq run as its interrupt handler exits (flags 0x10 on 6.18); polled
/// ones in the polling task (no flag).
const INTERRUPT_CONTEXT: u8 = 0x08 | 0x10;

/// One decoded tracepoint record, the fields matching needs in `a` and `b`: system calls
/// (id), io_uring (ctx, user_data), block (dev, sector; a split's `a` is dev | sectors split off
/// << 32, a bio completion's dev | error << 32), nvme (ctrl_id << 32 | qid, cid), irq (irq).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Event {
    pub time: u64,
    pub a: u64,
    pub b: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u16,
    pub kind: Kind,
    pub flags: u8,
}

/// The points of a request's way through the stack, in the order it passes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Point {
    Enter,
    UringSubmit,
    BioQueue,
    RqInsert,
    NvmeSetup,
    RqIssue,
    Irq,
    NvmeComplete,
    RqComplete,
    BioComplete,
    UringComplete,
    Exit,
}

const POINTS: usize = 12;
const ALL_POINTS: [Point; POINTS] = [
    Point::Enter,
    Point::UringSubmit,
    Point::BioQueue,
    Point::RqInsert,
    Point::NvmeSetup,
    Point::RqIssue,
    Point::Irq,
    Point::NvmeComplete,
    Point::RqComplete,
    Point::BioComplete,
    Point::UringComplete,
    Point::Exit,
];

impl Point {
    pub fn name(self) -> &'static str {
        match self {
            Point::Enter => "system call entry",
            Point::UringSubmit => "io_uring submit",
            Point::BioQueue => "bio queued",
            Point::RqInsert => "request inserted",
            Point::NvmeSetup => "nvme command set up",
            Point::RqIssue => "request issued",
            Point::Irq => "interrupt",
            Point::NvmeComplete => "nvme completion",
            Point::RqComplete => "request completed",
            Point::BioComplete => "bio completed",
            Point::UringComplete => "io_uring completion",
            Point::Exit => "system call exit",
        }
    }
}
/// One request's time at each point it passed (ns, the perf clock).
pub type Timeline = [Option<u64>; POINTS];
