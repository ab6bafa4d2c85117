//! io_uring: shared submission/completion rings.
//! submit: `syscall` (io_uring_enter per batch) or `sqpoll` (a kernel thread polls the SQ).
//! complete: `irq`, `poll` (IORING_SETUP_IOPOLL) or `hybrid` (IORING_SETUP_HYBRID_IOPOLL, 6.13+).
//! The ring is created with a raw io_uring_setup so that flags the crate has no builder for
//! (HYBRID_IOPOLL) can be set, then handed to the `io-uring` crate.
use super::{raw_syscall, Behaviour, Completion, Interface, InterfaceInfo, InterfaceKind, IoInterface, Request, Setup};
use super::{Complete, Feature, InterfaceError, IoChoice, Submit};
use crate::host::kernel_release;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::AsRawFd;

pub const SETUP_IOPOLL: u32 = 1 << 0;
pub const SETUP_SQPOLL: u32 = 1 << 1;
pub const SETUP_SQ_AFF: u32 = 1 << 2;
pub const SETUP_CLAMP: u32 = 1 << 4;
pub const SETUP_COOP_TASKRUN: u32 = 1 << 8;
pub const SETUP_SQE128: u32 = 1 << 10;
pub const SETUP_CQE32: u32 = 1 << 11;
pub const SETUP_SINGLE_ISSUER: u32 = 1 << 12;
pub const SETUP_DEFER_TASKRUN: u32 = 1 << 13;
/// IORING_SETUP_NO_SQARRAY (Linux 6.6): the kernel takes SQEs in ring order, without the
/// indirection array (one memory read less per SQE). Every ring asks for it, as t/io_uring's do.
pub const SETUP_NO_SQARRAY: u32 = 1 << 16;
pub const SETUP_HYBRID_IOPOLL: u32 = 1 << 17;
const ENTER_GETEVENTS: u32 = 1 << 0;
const ENTER_SQ_WAKEUP: u32 = 1 << 1;
const ENTER_REGISTERED_RING: u32 = 1 << 4;
/// IORING_ENTER_NO_IOWAIT (Linux 6.15): the enter's wait for completions is not counted as
/// iowait (the sleeping task's `in_iowait` stays clear).
const ENTER_NO_IOWAIT: u32 = 1 << 7;
/// IORING_FEAT_NO_IOWAIT: the kernel takes [`ENTER_NO_IOWAIT`].
const FEAT_NO_IOWAIT: u32 = 1 << 17;
/// The enter flag's name in the record's `ring` (asked and used with `--iowait off`).
pub const NO_IOWAIT: &str = "ENTER_NO_IOWAIT";
const REGISTER_RING_FDS: u32 = 20;
const UNREGISTER_RING_FDS: u32 = 21;
/// The ring-setup name of a registered ring fd (IORING_REGISTER_RING_FDS, Linux 5.18) in the
/// record's `ring`.
pub const REGISTERED_RING: &str = "REGISTER_RING_FDS";

/// The kernel's `struct io_uring_rsrc_update`: which registered-ring slot holds which fd.
#[repr(C)]
struct RsrcUpdate {
    offset: u32,
    resv: u32,
    data: u64,
}

/// Register ring `fd` with this thread (IORING_REGISTER_RING_FDS, Linux 5.18), so that
/// io_uring_enter takes the returned index with IORING_ENTER_REGISTERED_RING and skips looking
/// the ring's file up on every call (t/io_uring's -X1). Registered rings belong to the thread
/// that registers them: only it may enter by the index.
pub(crate) fn register_ring_fd(fd: i32) -> io::Result<u32> {
    let mut up = RsrcUpdate { offset: u32::MAX, resv: 0, data: fd as u64 };
    // SAFETY: `up` is one valid io_uring_rsrc_update the kernel reads and fills in.
    let r = unsafe { libc::syscall(libc::SYS_io_uring_register, fd, REGISTER_RING_FDS, &mut up as *mut RsrcUpdate, 1) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(up.offset)
}

/// Give up this thread's registered ring `index` (the ring's file is held until then).
pub(crate) fn unregister_ring_fd(fd: i32, index: u32) {
    let mut up = RsrcUpdate { offset: index, resv: 0, data: 0 };
    // SAFETY: as in register_ring_fd.
    unsafe { libc::syscall(libc::SYS_io_uring_register, fd, UNREGISTER_RING_FDS, &mut up as *mut RsrcUpdate, 1) };
}

/// Whether this kernel lets a thread register a ring fd: tried on `fd` (a fresh ring) and given
/// back at once. Ok, or whether the kernel refused it (EINVAL: it has no such registration) and
/// what the record says in place of using it.
fn try_register_ring_fd(fd: i32) -> Result<(), (bool, String)> {
    match register_ring_fd(fd) {
        Ok(index) => {
            unregister_ring_fd(fd, index);
            Ok(())
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            Err((true, format!("{REGISTERED_RING} not used: the kernel refused it ({e}; it came in Linux 5.18): io_uring_enter looks the ring's file up on every call")))
        }
        Err(e) => Err((false, format!("{REGISTERED_RING} not used: registering the ring fd failed ({e}): io_uring_enter looks the ring's file up on every call"))),
    }
}

/// Setup flags that change what completing costs, not what is measured: a kernel without one
/// gets a ring without it ([`step_down`]). The others (IOPOLL, SQPOLL, HYBRID_IOPOLL) are the
/// mode asked for and are never dropped.
pub const COST_ONLY: u32 = SETUP_COOP_TASKRUN | SETUP_SINGLE_ISSUER | SETUP_DEFER_TASKRUN;

/// Setup flags by name (without IORING_SETUP_), with the Linux version that brought each.
const FLAGS: &[(u32, &str, &str)] = &[
    (SETUP_IOPOLL, "IOPOLL", "5.1"),
    (SETUP_SQPOLL, "SQPOLL", "5.1"),
    (SETUP_SQ_AFF, "SQ_AFF", "5.1"),
    (SETUP_CLAMP, "CLAMP", "5.6"),
    (SETUP_COOP_TASKRUN, "COOP_TASKRUN", "5.19"),
    (SETUP_SQE128, "SQE128", "5.19"),
    (SETUP_CQE32, "CQE32", "5.19"),
    (SETUP_SINGLE_ISSUER, "SINGLE_ISSUER", "6.0"),
    (SETUP_DEFER_TASKRUN, "DEFER_TASKRUN", "6.1"),
    (SETUP_NO_SQARRAY, "NO_SQARRAY", "6.6"),
    (SETUP_HYBRID_IOPOLL, "HYBRID_IOPOLL", "6.13"),
];

/// The names of the setup flags in `flags`.
pub(crate) fn flag_names(flags: u32) -> Vec<&'static str> {
    FLAGS.iter().filter(|f| flags & f.0 != 0).map(|f| f.1).collect()
}

/// "NAME (Linux V)" for each flag in `flags`, comma-separated.
fn flags_since(flags: u32) -> String {
    FLAGS.iter().filter(|f| flags & f.0 != 0).map(|f| format!("{} (Linux {})", f.1, f.2)).collect::<Vec<_>>().join(", ")
}

/// The flag sets to try for `flags`, best first, one cost-only flag given up at a time:
/// DEFER_TASKRUN (6.1) → COOP_TASKRUN (5.19) → neither, each with SINGLE_ISSUER (6.0) first and
/// then without it (DEFER_TASKRUN never without it: the kernel requires the pair). Every
/// combination is tried rather than guessed from the version: distribution kernels (RHEL 9's
/// 5.14) carry io_uring backports.
pub(crate) fn step_down_order(flags: u32) -> Vec<u32> {
    let base = flags & !COST_ONLY;
    let taskrun: &[u32] = if flags & SETUP_DEFER_TASKRUN != 0 {
        &[SETUP_DEFER_TASKRUN, SETUP_COOP_TASKRUN, 0]
    } else if flags & SETUP_COOP_TASKRUN != 0 {
        &[SETUP_COOP_TASKRUN, 0]
    } else {
        &[0]
    };
    let single: &[u32] = if flags & SETUP_SINGLE_ISSUER != 0 { &[SETUP_SINGLE_ISSUER, 0] } else { &[0] };
    let mut v = Vec::new();
    for &t in taskrun {
        for &s in single {
            if !(t == SETUP_DEFER_TASKRUN && s == 0 && single.len() == 2) {
                v.push(base | t | s);
            }
        }
    }
    v
}

/// Set a ring up with `open` for each flag set of [`step_down_order`] in turn while the kernel
/// answers EINVAL (a flag it does not know): the ring and the flags it got, or the error for the
/// last set (only the flags the mode needs). Other errors are returned at once.
pub(crate) fn step_down<R>(flags: u32, mut open: impl FnMut(u32) -> io::Result<R>) -> io::Result<(R, u32)> {
    let mut last = io::Error::from_raw_os_error(libc::EINVAL);
    for f in step_down_order(flags) {
        match open(f) {
            Ok(r) => return Ok((r, f)),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Why no ring could be set up for a job.
#[derive(Debug)]
pub enum Refused {
    /// Not even a ring without the mode's flags.
    Bare(io::Error),
    /// The mode flag (SQPOLL, IOPOLL, HYBRID_IOPOLL) whose addition the kernel refused.
    Flag(u32, io::Error),
    /// Each mode flag alone is accepted, these together are not.
    Together(u32, io::Error),
}

/// [`step_down`], and when even the last set is refused, which flag of the mode is at fault: a
/// bare ring, then each of the mode's flags alone, so an error blames IOPOLL or hybrid polling
/// only when that is what the kernel refused.
pub(crate) fn setup_with<R>(flags: u32, mut open: impl FnMut(u32) -> io::Result<R>) -> Result<(R, u32), Refused> {
    let error = match step_down(flags, &mut open) {
        Ok(r) => return Ok(r),
        Err(e) => e,
    };
    // Each as the kernel needs it (HYBRID_IOPOLL with IOPOLL).
    for (f, with) in [(0, 0), (SETUP_SQPOLL, 0), (SETUP_IOPOLL, 0), (SETUP_HYBRID_IOPOLL, SETUP_IOPOLL)] {
        if f != 0 && flags & f == 0 {
            continue;
        }
        if let Err(e) = open(f | with) {
            return Err(if f == 0 { Refused::Bare(e) } else { Refused::Flag(f, e) });
        }
    }
    Err(Refused::Together(flags & !COST_ONLY, error))
}

/// The io_uring_setup flags of a run's rings (the record's `ring`), in the generic shape every
/// interface's `check_kernel` answers.
pub type RingSetup = super::KernelSetup;

/// From the job's flags and those [`step_down`] got; `extra` are the flags every ring of the
/// kind carries (CLAMP, SQ_AFF, SQE128 | CQE32).
pub(crate) fn ring_setup(asked: u32, used: u32, extra: u32) -> RingSetup {
    RingSetup {
        asked: flag_names(asked | extra),
        used: flag_names(used | extra),
        dropped: flag_names(asked & !used),
        features: Vec::new(),
        notes: Vec::new(),
    }
}

/// The record's ring setup with the ring fd's registration: asked for, and used, or dropped (the
/// kernel refused it: EINVAL) with the reason in `notes` either way it was not used.
pub(crate) fn with_registered_ring(setup: &mut RingSetup, registered: Result<(), (bool, String)>) {
    setup.asked.push(REGISTERED_RING);
    match registered {
        Ok(()) => setup.used.push(REGISTERED_RING),
        Err((refused, why)) => {
            if refused {
                setup.dropped.push(REGISTERED_RING);
            }
            setup.notes.push(why);
        }
    }
}

/// The flags every ring of a kind is set up with besides the mode's.
pub(crate) fn ring_extra(big: bool, flags: u32, sq_cpu: Option<u32>) -> u32 {
    let aff = if sq_cpu.is_some() && flags & SETUP_SQPOLL != 0 { SETUP_SQ_AFF } else { 0 };
    SETUP_CLAMP | aff | if big { SETUP_SQE128 | SETUP_CQE32 } else { 0 }
}

/// Set up a 2-entry ring as a job's would be (NVMe passthrough's big one if `big`): what setup it
/// gets and the kernel's parameters (its feature bits), or why not.
pub(crate) fn try_setup(big: bool, flags: u32, sq_cpu: Option<u32>, sq_idle_ms: u32) -> Result<(RingSetup, io_uring::Parameters), Refused> {
    let mut registered = Ok(());
    let (params, used) = setup_with(flags, |f| {
        if big {
            create_ring_big_exact(2, f, sq_cpu, sq_idle_ms).map(|r| r.params().clone())
        } else {
            let r = create_ring_exact(2, f, sq_cpu, sq_idle_ms)?;
            if f & SETUP_SQPOLL == 0 {
                registered = try_register_ring_fd(r.as_raw_fd());
            }
            Ok(r.params().clone())
        }
    })?;
    // NO_SQARRAY is asked of every ring and used where the kernel took it (6.6+).
    let got = setup_flags(&params) & SETUP_NO_SQARRAY;
    let ring = ring_setup(flags | SETUP_NO_SQARRAY, used | got, ring_extra(big, flags, sq_cpu));
    let mut setup = RingSetup { features: feature_bits(&params), ..ring };
    // Plain rings register their fd with their thread where the kernel lets them (Uring::open);
    // the SQPOLL thread submits for the others (they enter only to wake it).
    if !big && flags & SETUP_SQPOLL == 0 {
        with_registered_ring(&mut setup, registered);
    }
    Ok((setup, params))
}

/// The kernel's `struct io_uring_params` (120 bytes).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct RawParams {
    sq_entries: u32,
    cq_entries: u32,
    flags: u32,
    sq_thread_cpu: u32,
    sq_thread_idle: u32,
    features: u32,
    wq_fd: u32,
    resv: [u32; 3],
    sq_off: [u32; 10],
    cq_off: [u32; 10],
}
const _: () = assert!(std::mem::size_of::<RawParams>() == 120);
const _: () = assert!(std::mem::size_of::<io_uring::Parameters>() == 120);

/// Create a ring with these setup flags, less the cost-only ones the kernel lacks
/// ([`step_down`]); returns the ring and the flags it got, or the kernel's error.
pub(crate) fn create_ring(entries: u32, flags: u32, sq_cpu: Option<u32>, sq_idle_ms: u32) -> io::Result<(IoUring, u32)> {
    step_down(flags, |f| create_ring_exact(entries, f, sq_cpu, sq_idle_ms))
}

/// [`create_ring_raw`] with IORING_SETUP_NO_SQARRAY added, and without it where the kernel
/// refuses it (before Linux 6.6): a flag that changes what submitting costs, never what runs.
fn create_ring_exact(entries: u32, flags: u32, sq_cpu: Option<u32>, sq_idle_ms: u32) -> io::Result<IoUring> {
    match create_ring_raw(entries, flags | SETUP_NO_SQARRAY, sq_cpu, sq_idle_ms) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => create_ring_raw(entries, flags, sq_cpu, sq_idle_ms),
        r => r,
    }
}

/// The setup flags a ring was made with (the kernel keeps them in its parameters).
fn setup_flags(p: &io_uring::Parameters) -> u32 {
    // SAFETY: Parameters is repr(transparent) over the kernel's struct, as RawParams is (sizes
    // asserted above); both are plain integers.
    unsafe { std::mem::transmute_copy::<io_uring::Parameters, RawParams>(p) }.flags
}

/// A ring with exactly these setup flags (and CLAMP, and SQ_AFF where SQPOLL has a CPU).
fn create_ring_raw(entries: u32, flags: u32, sq_cpu: Option<u32>, sq_idle_ms: u32) -> io::Result<IoUring> {
    let mut p = RawParams { flags, sq_thread_idle: sq_idle_ms, ..Default::default() };
    // SQ_AFF without SQPOLL is EINVAL.
    if let Some(cpu) = sq_cpu.filter(|_| flags & SETUP_SQPOLL != 0) {
        p.flags |= SETUP_SQ_AFF;
        p.sq_thread_cpu = cpu;
    }
    p.flags |= SETUP_CLAMP;
    // SAFETY: p is a valid io_uring_params the kernel fills in.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, entries, &mut p as *mut RawParams) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: Parameters is repr(transparent) over the same kernel struct (sizes asserted);
    // fd is a fresh ring whose parameters the kernel just wrote.
    unsafe {
        let params: io_uring::Parameters = std::mem::transmute(p);
        IoUring::from_fd(fd as i32, params)
    }
}

/// A ring of 128-byte SQEs and 32-byte CQEs (IORING_SETUP_SQE128 | IORING_SETUP_CQE32, Linux
/// 5.19+), as NVMe passthrough needs: the 80-byte command rides in the SQE and the NVMe result
/// dwords in the CQE. Set up as [`create_ring`] does, stepping down the same way.
pub(crate) fn create_ring_big(
    entries: u32,
    flags: u32,
    sq_cpu: Option<u32>,
    sq_idle_ms: u32,
) -> io::Result<(IoUring<squeue::Entry128, cqueue::Entry32>, u32)> {
    step_down(flags, |f| create_ring_big_exact(entries, f, sq_cpu, sq_idle_ms))
}

/// The big ring with exactly these flags. Built with the crate's builder (its `from_fd` only
/// makes default-sized rings); flags it has no builder for (HYBRID_IOPOLL) are refused with
/// EINVAL, as an old kernel would.
pub(crate) fn create_ring_big_exact(
    entries: u32,
    flags: u32,
    sq_cpu: Option<u32>,
    sq_idle_ms: u32,
) -> io::Result<IoUring<squeue::Entry128, cqueue::Entry32>> {
    let known = SETUP_IOPOLL | SETUP_SQPOLL | SETUP_SQ_AFF | SETUP_CLAMP | SETUP_COOP_TASKRUN | SETUP_SINGLE_ISSUER | SETUP_DEFER_TASKRUN;
    if flags & !known != 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // NO_SQARRAY where the kernel takes it (6.6+), as for plain rings.
    match create_ring_big_with(entries, flags | SETUP_NO_SQARRAY, sq_cpu, sq_idle_ms) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => create_ring_big_with(entries, flags, sq_cpu, sq_idle_ms),
        r => r,
    }
}

fn create_ring_big_with(
    entries: u32,
    flags: u32,
    sq_cpu: Option<u32>,
    sq_idle_ms: u32,
) -> io::Result<IoUring<squeue::Entry128, cqueue::Entry32>> {
    let mut b = IoUring::<squeue::Entry128, cqueue::Entry32>::builder();
    b.setup_clamp();
    if flags & SETUP_IOPOLL != 0 {
        b.setup_iopoll();
    }
    if flags & SETUP_SQPOLL != 0 {
        b.setup_sqpoll(sq_idle_ms);
        if let Some(cpu) = sq_cpu {
            b.setup_sqpoll_cpu(cpu);
        }
    }
    if flags & SETUP_COOP_TASKRUN != 0 {
        b.setup_coop_taskrun();
    }
    if flags & SETUP_SINGLE_ISSUER != 0 {
        b.setup_single_issuer();
    }
    // The shared driver enters with GETEVENTS every time, which deferred task running needs.
    if flags & SETUP_DEFER_TASKRUN != 0 {
        b.setup_defer_taskrun();
    }
    if flags & SETUP_NO_SQARRAY != 0 {
        b.setup_no_sqarray();
    }
    b.build(entries)
}

/// The opcodes iolab submits on plain rings, with the Linux version that brought each.
const OPCODES: &[(u8, &str, &str)] = &[
    (opcode::Read::CODE, "READ", "5.6"),
    (opcode::Write::CODE, "WRITE", "5.6"),
    (opcode::ReadFixed::CODE, "READ_FIXED", "5.1"),
    (opcode::WriteFixed::CODE, "WRITE_FIXED", "5.1"),
];

/// The opcodes of `want` this kernel's io_uring lacks, by IORING_REGISTER_PROBE (5.6; a kernel
/// without it is older than the READ and WRITE opcodes, so all of them are reported lacking).
pub(crate) fn missing_opcodes<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
    ring: &IoUring<S, C>,
    want: &[(u8, &'static str, &'static str)],
) -> Vec<String> {
    let mut probe = io_uring::Probe::new();
    let probed = ring.submitter().register_probe(&mut probe).is_ok();
    want.iter().filter(|o| !probed || !probe.is_supported(o.0)).map(|o| format!("IORING_OP_{} (Linux {})", o.1, o.2)).collect()
}

pub fn machine_support() -> Result<(), InterfaceError> {
    if let Ok(v) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        if v.trim() == "2" {
            return Err(InterfaceError::Unsupported("io_uring is disabled (kernel.io_uring_disabled = 2): set it to 0".into()));
        }
    }
    let ring = create_ring_exact(2, 0, None, 0).map_err(|e| {
        InterfaceError::Unsupported(match e.raw_os_error() {
            // CLAMP is the only flag of a bare ring.
            Some(libc::EINVAL) => {
                format!("io_uring_setup refused IORING_SETUP_CLAMP ({e}): this kernel's io_uring predates Linux 5.6, which iolab needs")
            }
            _ => format!("io_uring_setup failed: {e}"),
        })
    })?;
    let missing = missing_opcodes(&ring, OPCODES);
    if !missing.is_empty() {
        return Err(InterfaceError::Unsupported(format!("this kernel's io_uring lacks {}, which iolab submits", missing.join(", "))));
    }
    Ok(())
}

/// What this kernel's ring setup refuses, for `iolab interfaces` (None: everything iolab asks
/// for). A plain ring must already work (machine_support). `big`: NVMe passthrough's rings.
pub(crate) fn setup_notes(big: bool) -> Option<String> {
    let refuses = |f: u32| {
        // Exactly these flags: not NO_SQARRAY unless asked.
        let r = if big { create_ring_big_with(2, f, None, 1).map(drop) } else { create_ring_raw(2, f, None, 1).map(drop) };
        r.is_err_and(|e| e.raw_os_error() == Some(libc::EINVAL))
    };
    // Each cost-only flag as the kernel would need it (DEFER_TASKRUN with SINGLE_ISSUER).
    let mut cost = 0;
    let each = [(SETUP_COOP_TASKRUN, 0), (SETUP_SINGLE_ISSUER, 0), (SETUP_DEFER_TASKRUN, SETUP_SINGLE_ISSUER), (SETUP_NO_SQARRAY, 0)];
    for (f, with) in each {
        if refuses(f | with) {
            cost |= f;
        }
    }
    let modes = if !big && refuses(SETUP_IOPOLL | SETUP_HYBRID_IOPOLL) { SETUP_HYBRID_IOPOLL } else { 0 };
    let mut notes = Vec::new();
    if cost != 0 {
        notes.push(format!("rings set up without {} (this kernel refuses them)", flags_since(cost)));
    }
    if modes != 0 {
        notes.push(match hybrid_via() {
            Ok(_) => format!("hybrid polling by the block layer's io_poll_delay (no {})", flags_since(modes)),
            Err(_) => format!("no hybrid polling ({})", flags_since(modes)),
        });
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// Where io_uring's `--complete hybrid` sleeps before polling on this kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HybridVia {
    /// The ring's own IORING_SETUP_HYBRID_IOPOLL (Linux 6.13+).
    Ring,
    /// Plain IOPOLL, and the block layer's hybrid sleep (queue/io_poll_delay; before 5.16).
    BlockLayer,
}

/// How this kernel does io_uring hybrid polling, or why it cannot: the ring flag is tried
/// (feature detection: backports carry it), the block layer's sleep is what older kernels had.
/// Asked once per process.
pub(crate) fn hybrid_via() -> Result<HybridVia, String> {
    static VIA: std::sync::OnceLock<Result<HybridVia, String>> = std::sync::OnceLock::new();
    VIA.get_or_init(|| match create_ring_exact(2, SETUP_IOPOLL | SETUP_HYBRID_IOPOLL, None, 0) {
        Ok(_) => Ok(HybridVia::Ring),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => match super::block_poll::hybrid_unreachable(true) {
            None => Ok(HybridVia::BlockLayer),
            Some(why) => Err(format!("no IORING_SETUP_HYBRID_IOPOLL (Linux 6.13 or later), and {why}")),
        },
        Err(e) => Err(format!("io_uring_setup with HYBRID_IOPOLL failed: {e}")),
    })
    .clone()
}

/// The setup flags a job's rings get on this kernel: [`flags_for`], with hybrid polling left
/// to the block layer where that is how this kernel does it.
pub(crate) fn job_flags(submit: Submit, complete: Complete) -> u32 {
    let f = flags_for(submit, complete);
    if complete == Complete::Hybrid && hybrid_via() == Ok(HybridVia::BlockLayer) {
        f & !SETUP_HYBRID_IOPOLL
    } else {
        f
    }
}

/// The kernel's io_uring feature bits (IORING_FEAT_*) iolab relies on, by name.
fn feature_bits(p: &io_uring::Parameters) -> Vec<&'static str> {
    [
        (p.is_feature_nodrop(), "NODROP"),
        (p.is_feature_submit_stable(), "SUBMIT_STABLE"),
        (p.is_feature_fast_poll(), "FAST_POLL"),
        (p.is_feature_sqpoll_nonfixed(), "SQPOLL_NONFIXED"),
        (p.is_feature_native_workers(), "NATIVE_WORKERS"),
    ]
    .into_iter()
    .filter_map(|(has, name)| has.then_some(name))
    .collect()
}

/// io_uring's setup flags, feature bits and opcodes that iolab uses, as this kernel has them:
/// each flag tried on a real io_uring_setup, each bit read from the kernel's answer, each opcode
/// asked with IORING_REGISTER_PROBE; never guessed from the version (distribution kernels carry
/// backports: Debian's 5.10 has 5.15's io_uring).
pub(crate) fn kernel_features() -> Vec<Feature> {
    let accepts = |f: u32| create_ring_exact(2, f, None, 1).is_ok();
    let bare = create_ring_exact(2, 0, None, 1).ok();
    let bit = |name: &str| bare.as_ref().map(|r| feature_bits(r.params()).contains(&name));
    let opcode = |code: u8| bare.as_ref().map(|r| missing_opcodes(r, &[(code, "", "")]).is_empty());
    let setup = "a ring set up with the flag";
    let features = "the feature bits io_uring_setup answers";
    let probe = "IORING_REGISTER_PROBE";
    let f = |name, since, present, detected_by, without| Feature { name, since, until: None, present, detected_by, without };
    vec![
        f("IORING_OP_READ/WRITE", "5.6", opcode(opcode::Read::CODE), probe, "io_uring cannot run: iolab needs them"),
        f("IORING_SETUP_SQPOLL", "5.1", Some(accepts(SETUP_SQPOLL)), setup, "--submit sqpoll is refused"),
        f("IORING_SETUP_IOPOLL", "5.1", Some(accepts(SETUP_IOPOLL)), setup, "--complete poll is refused"),
        f("IORING_FEAT_SQPOLL_NONFIXED", "5.11", bit("SQPOLL_NONFIXED"), features, "the SQPOLL thread only takes registered files: --submit sqpoll needs --register-files true"),
        f("IORING_FEAT_NATIVE_WORKERS", "5.12", bit("NATIVE_WORKERS"), features,
          "the SQPOLL thread and io-wq workers are kernel threads outside iolab's process: iolab counts them by name (io_uring-sq, io_wqe_worker) among the system's threads"),
        f("IORING_SETUP_COOP_TASKRUN", "5.19", Some(accepts(SETUP_COOP_TASKRUN)), setup,
          "completions reach the submitter as task work signalled by an inter-processor interrupt, which can cut into its submissions"),
        f("IORING_SETUP_SINGLE_ISSUER", "6.0", Some(accepts(SETUP_SINGLE_ISSUER)), setup, "the kernel takes the ring's submission lock on every entry"),
        f("IORING_SETUP_DEFER_TASKRUN", "6.1", Some(accepts(SETUP_DEFER_TASKRUN | SETUP_SINGLE_ISSUER)), setup,
          "completion work runs when the kernel gets to it rather than in a batch when iolab reaps: more context switches per I/O"),
        f("IORING_SETUP_NO_SQARRAY", "6.6", Some(create_ring_raw(2, SETUP_NO_SQARRAY, None, 1).is_ok()), setup,
          "the kernel reads each SQE's index from the submission array: one memory read more per I/O"),
        f("IORING_SETUP_HYBRID_IOPOLL", "6.13", Some(accepts(SETUP_IOPOLL | SETUP_HYBRID_IOPOLL)), setup,
          "--complete hybrid polls through the block layer's io_poll_delay before Linux 5.16, and is refused after"),
        f("IORING_FEAT_NO_IOWAIT", "6.15", bare.as_ref().map(|r| raw_features(r.params()) & FEAT_NO_IOWAIT != 0), features,
          "--iowait off is refused: a task waiting in io_uring_enter always counts as iowait"),
    ]
}

/// Setup flags a job asks for, plus the cheap ones that change nothing but cost.
pub(crate) fn flags_for(submit: Submit, complete: Complete) -> u32 {
    let mut f = 0;
    match submit {
        Submit::Sqpoll => f |= SETUP_SQPOLL,
        // One submitting thread per ring, and completion work deferred to when it enters
        // the kernel to reap (it always does, with GETEVENTS): no task-work interruptions.
        // Kernels without them get less ([`step_down`]).
        Submit::Syscall => f |= SETUP_SINGLE_ISSUER | SETUP_DEFER_TASKRUN,
    }
    match complete {
        Complete::Irq => {}
        Complete::Poll => f |= SETUP_IOPOLL,
        Complete::Hybrid => f |= SETUP_IOPOLL | SETUP_HYBRID_IOPOLL,
    }
    f
}

/// io_uring's own options (nvme-passthru's rings take them too), with their command-line flags.
/// Flattened into the job, so the record's `spec` keeps them at its top level.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct RingOptions {
    /// CPU for the io_uring SQPOLL kernel thread.
    #[arg(long)]
    pub sq_cpu: Option<u32>,
    /// Milliseconds the SQPOLL thread spins idle before sleeping.
    #[arg(long = "sq-idle", value_name = "MS", default_value_t = 1000)]
    pub sq_idle_ms: u32,
    /// io_uring: register the I/O buffers (READ_FIXED/WRITE_FIXED).
    #[arg(long, action = clap::ArgAction::Set, default_value_t = true)]
    pub register_buffers: bool,
    /// io_uring: register the target files.
    #[arg(long, action = clap::ArgAction::Set, default_value_t = true)]
    pub register_files: bool,
    /// io_uring: IOSQE_ASYNC on every request, skipping the non-blocking first try (for devices
    /// that cannot take non-blocking reads and would punt every request to io-wq anyway).
    #[arg(long)]
    #[serde(default)]
    pub force_async: bool,
    /// io_uring: whether the ring's waits for completions count as iowait (`on`, the kernel's
    /// default) or not (`off`: IORING_ENTER_NO_IOWAIT, Linux 6.15+), which decides whether the
    /// CPU's frequency is boosted and deep idle states are avoided while it waits.
    #[arg(long, value_enum, value_name = "ON|OFF", default_value_t = Iowait::On)]
    #[serde(default, skip_serializing_if = "Iowait::is_on")]
    pub iowait: Iowait,
}

/// Whether io_uring's waits count as iowait (`RingOptions::iowait`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Iowait {
    /// The kernel's default: a task waiting in io_uring_enter with requests in flight is in iowait.
    #[default]
    On,
    /// IORING_ENTER_NO_IOWAIT on every enter.
    Off,
}

impl Iowait {
    pub fn is_on(&self) -> bool {
        *self == Iowait::On
    }
    pub fn name(self) -> &'static str {
        match self {
            Iowait::On => "on",
            Iowait::Off => "off",
        }
    }
}

impl Default for RingOptions {
    fn default() -> Self {
        RingOptions { sq_cpu: None, sq_idle_ms: 1000, register_buffers: true, register_files: true, force_async: false, iowait: Iowait::On }
    }
}

impl super::OptionsPart for RingOptions {
    const PLAN_KEYS: &'static [&'static str] = &["sq_cpu", "sq_idle_ms", "register_buffers", "register_files", "force_async", "iowait"];

    fn plan_value<'de, A: serde::de::MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "sq_cpu" => self.sq_cpu = Some(map.next_value()?),
            "sq_idle_ms" => self.sq_idle_ms = map.next_value()?,
            "register_buffers" => self.register_buffers = map.next_value()?,
            "register_files" => self.register_files = map.next_value()?,
            "iowait" => self.iowait = map.next_value()?,
            _ => self.force_async = map.next_value()?,
        }
        Ok(())
    }

    /// The ones only io_uring or SQPOLL use are refused elsewhere, since they would silently
    /// do nothing.
    fn check(&self, io: &IoChoice) -> Result<(), String> {
        if self.force_async && io.interface != InterfaceKind::IoUring {
            return Err("--force-async applies only to -i io_uring".into());
        }
        if self.sq_cpu.is_some() && io.submit != Submit::Sqpoll {
            return Err("--sq-cpu only applies with --submit sqpoll".into());
        }
        if self.iowait == Iowait::Off && !matches!(io.interface, InterfaceKind::IoUring | InterfaceKind::NvmePassthru) {
            return Err(format!(
                "--iowait off applies only to io_uring's rings (-i io_uring or nvme-passthru), not -i {}",
                io.interface.name()
            ));
        }
        Ok(())
    }

    fn pinned_cpu(&self) -> Option<u32> {
        self.sq_cpu
    }
}

/// Does this kernel accept the rings a job asks for? The ring setup the run gets (cost-only
/// flags the kernel lacks dropped); an error blames the flag of the mode the kernel refused.
/// `big`: nvme-passthru's rings (128-byte SQEs, 32-byte CQEs). Err: unsupported here.
pub(crate) fn check_ring(io: &IoChoice, big: bool) -> Result<Option<RingSetup>, InterfaceError> {
    setup_for(io, big).map(Some).map_err(InterfaceError::Unsupported)
}

/// `check_ring`'s setup; Err is the line naming what the kernel refused.
fn setup_for(io: &IoChoice, big: bool) -> Result<RingSetup, String> {
    let k = kernel_release();
    if io.complete == Complete::Hybrid && !big {
        match hybrid_via() {
            Err(why) => return Err(format!("kernel {k} has no io_uring hybrid polling: {why}: use --complete poll")),
            Ok(HybridVia::Ring) if io.options.block_poll.poll_delay.is_some() => {
                return Err(format!("kernel {k}'s io_uring polls hybrid by its own HYBRID_IOPOLL, which takes no --poll-delay (the block layer's io_poll_delay): drop it"))
            }
            Ok(_) => {}
        }
    }
    let flags = if big { flags_for(io.submit, io.complete) } else { job_flags(io.submit, io.complete) };
    let what = if big { "io_uring with 128-byte SQEs and 32-byte CQEs" } else { "io_uring" };
    let (setup, params) = try_setup(big, flags, io.options.ring.sq_cpu, io.options.ring.sq_idle_ms).map_err(|r| match r {
        Refused::Flag(SETUP_HYBRID_IOPOLL, e) if e.raw_os_error() == Some(libc::EINVAL) => {
            format!("kernel {k} has no io_uring hybrid polling (IORING_SETUP_HYBRID_IOPOLL needs Linux 6.13 or later): use --complete poll")
        }
        Refused::Flag(SETUP_SQPOLL, e) if e.raw_os_error() == Some(libc::EPERM) => {
            format!("kernel {k} refused {what} SQPOLL: {e} (before Linux 5.11 only root may use it): run as root or use --submit syscall")
        }
        Refused::Flag(SETUP_SQPOLL, e) => match io.options.ring.sq_cpu {
            Some(c) => format!("kernel {k} refused {what} SQPOLL with its thread on CPU {c}: {e}"),
            None => format!("kernel {k} refused {what} SQPOLL: {e}"),
        },
        Refused::Flag(f, e) => {
            format!("kernel {k} refused {what} {} ({}): {e}", flag_names(f).join(" | "), format_args!("--complete {}", io.complete.name()))
        }
        Refused::Together(f, e) => {
            format!("kernel {k} refused {what} with {} together: {e}", flag_names(f).join(" | "))
        }
        Refused::Bare(e) => format!("kernel {k} refused to set up {what}: {e}"),
    })?;
    // Before 5.11 the SQ thread could only use registered files.
    if io.submit == Submit::Sqpoll && !io.options.ring.register_files && !params.is_feature_sqpoll_nonfixed() {
        return Err(format!("kernel {k}'s io_uring SQPOLL thread only takes registered files (IORING_FEAT_SQPOLL_NONFIXED came in Linux 5.11): use --register-files true or --submit syscall"));
    }
    let mut setup = setup;
    with_iowait(&mut setup, io.options.ring.iowait, raw_features(&params)).map_err(|why| format!("kernel {k}: {why}"))?;
    Ok(setup)
}

/// The feature bits (IORING_FEAT_*) the kernel answered io_uring_setup with.
fn raw_features(p: &io_uring::Parameters) -> u32 {
    // SAFETY: Parameters is repr(transparent) over the kernel's struct, as RawParams is (sizes
    // asserted above); both are plain integers.
    unsafe { std::mem::transmute::<io_uring::Parameters, RawParams>(p.clone()) }.features
}

/// The record's ring setup with the job's `--iowait`: `off` asks for [`NO_IOWAIT`] on every enter
/// and uses it, or is refused (Err, the reason) where the kernel's `features` lack
/// IORING_FEAT_NO_IOWAIT: such a kernel answers EINVAL to the enter flag, so the run could not
/// start. `on` (the default, every kernel's behaviour) adds nothing.
pub(crate) fn with_iowait(setup: &mut RingSetup, iowait: Iowait, features: u32) -> Result<(), String> {
    if iowait == Iowait::On {
        return Ok(());
    }
    if features & FEAT_NO_IOWAIT == 0 {
        return Err(
            "--iowait off needs Linux 6.15+; this kernel lacks IORING_FEAT_NO_IOWAIT (its io_uring waits always count as iowait)".into()
        );
    }
    setup.asked.push(NO_IOWAIT);
    setup.used.push(NO_IOWAIT);
    Ok(())
}

pub struct Uring {
    ring: IoUring,
    fixed_files: bool,
    fixed_bufs: bool,
    sqe_flags: io_uring::squeue::Flags,
    fds: Vec<i32>,
    driver: RingDriver,
    /// `--cmdprio`: which SQEs carry the priority (None: none do).
    cmdprio: Option<super::thread::CmdPrioDraw>,
}

/// How a ring is driven, shared by io_uring and NVMe passthrough: what was pushed and not yet
/// submitted, what is in flight, and whether completions are waited for, polled for inside the
/// enter (IOPOLL), or watched for on the CQ ring (SQPOLL + polling: the SQ thread reaps).
pub(crate) struct RingDriver {
    /// SQEs pushed since the last io_uring_enter.
    unsubmitted: u32,
    /// The ring's index among this thread's registered rings, entered with
    /// IORING_ENTER_REGISTERED_RING; None: entered by its fd.
    registered: Option<u32>,
    /// Requests pushed and not yet reaped.
    outstanding: usize,
    sqpoll: bool,
    /// Completions are only found by entering the kernel (IOPOLL without SQPOLL).
    enter_to_poll: bool,
    spin_on_cq: bool,
    /// The flags of every io_uring_enter iolab makes itself: GETEVENTS, and NO_IOWAIT with
    /// `--iowait off`; computed once, so the hot loop does no more per call.
    enter_flags: u32,
}

impl RingDriver {
    /// `iowait`: whether its waits count as iowait (`off` needs the kernel's
    /// IORING_FEAT_NO_IOWAIT, which `check_ring` checked before the run).
    pub fn new(submit: Submit, complete: Complete, iowait: Iowait) -> Self {
        let sqpoll = submit == Submit::Sqpoll;
        let polled = complete != Complete::Irq;
        RingDriver {
            unsubmitted: 0,
            registered: None,
            outstanding: 0,
            sqpoll,
            enter_to_poll: polled && !sqpoll,
            spin_on_cq: polled && sqpoll,
            enter_flags: ENTER_GETEVENTS | if iowait == Iowait::Off { ENTER_NO_IOWAIT } else { 0 },
        }
    }

    /// Register ring `fd` with the calling thread (the one that will drive it) where the kernel
    /// has IORING_REGISTER_RING_FDS; a kernel without it (EINVAL, before 5.18) leaves the ring
    /// entered by its fd, as the run's record says (`with_registered_ring`). Other errors are
    /// returned. Give it back with [`RingDriver::unregister`].
    pub(crate) fn register(&mut self, fd: i32) -> io::Result<()> {
        match register_ring_fd(fd) {
            Ok(index) => self.registered = Some(index),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Give the registered ring index back (a registered ring holds its file until then).
    pub(crate) fn unregister(&mut self, fd: i32) {
        if let Some(index) = self.registered.take() {
            unregister_ring_fd(fd, index);
        }
    }

    /// Submit what was pushed and make at least `min` completions visible in the CQ ring.
    #[inline]
    fn complete<S: squeue::EntryMarker, C: cqueue::EntryMarker>(&mut self, ring: &mut IoUring<S, C>, min: usize) -> io::Result<()> {
        let mut ready = ring.completion().len();
        if self.spin_on_cq {
            while ring.completion().len() < min {
                std::hint::spin_loop();
            }
        } else if self.sqpoll {
            if ready < min {
                // The SQ thread submits: enter only to wait (and to wake it if it went idle), as
                // the crate's submit_and_wait would, with the run's enter flags.
                let flags = self.enter_flags | if ring.submission().need_wakeup() { ENTER_SQ_WAKEUP } else { 0 };
                let args = [ring.as_raw_fd() as usize, 0, min - ready, flags as usize, 0, 0];
                retry_eintr(|| {
                    // SAFETY: the SQ tail was published by `push`; no argument pointer is passed.
                    match unsafe { raw_syscall(libc::SYS_io_uring_enter, args) } {
                        r if r < 0 => Err(io::Error::from_raw_os_error(-r as i32)),
                        r => Ok(r as usize),
                    }
                })?;
            }
        } else if self.enter_to_poll {
            if self.unsubmitted > 0 || min > 0 {
                // Polling happens inside the enter: ask for the full `min`.
                self.enter(ring.as_raw_fd(), min)?;
            }
        } else {
            // Others in flight besides the SQEs about to be submitted: their completions may
            // be waiting in the deferred work list.
            let others_in_flight = self.outstanding > self.unsubmitted as usize + ready;
            if self.unsubmitted > 0 && (ready >= min || others_in_flight) {
                // Submit without waiting first. The enter runs the deferred completion work, so
                // the ring often holds enough afterwards, and its return lets a woken io-wq
                // worker run before the check. Submitting and sleeping in one call instead made
                // submitter and worker hand over after every completion on one CPU (zram:
                // 0.86-0.90 sleeps per I/O, now 0.62-0.69, fio 0.58-0.68). With nothing else in
                // flight (QD1) one call does both.
                self.enter(ring.as_raw_fd(), 0)?;
                ready = ring.completion().len();
            }
            if ready < min {
                self.enter(ring.as_raw_fd(), min - ready)?;
            }
        }
        Ok(())
    }

    /// Push one SQE per request, as many as the SQ ring takes, and hand them on per the mode.
    #[inline]
    pub(crate) fn push<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
        &mut self,
        ring: &mut IoUring<S, C>,
        reqs: &[Request],
        mut sqe: impl FnMut(&Request) -> S,
    ) -> io::Result<usize> {
        let mut sq = ring.submission();
        let mut pushed = 0;
        for r in reqs {
            // SAFETY: the buffer stays valid until the completion is reaped.
            if unsafe { sq.push(&sqe(r)) }.is_err() {
                break;
            }
            pushed += 1;
        }
        drop(sq);
        self.outstanding += pushed;
        if self.sqpoll {
            // Publishes the tail; enters only if the SQ thread went idle and needs a wakeup.
            ring.submit()?;
        } else {
            self.unsubmitted += pushed as u32;
        }
        Ok(pushed)
    }

    /// Make at least `min` completions visible (submitting what is pushed) and take every one
    /// the ring holds, up to `out.len()`.
    #[inline]
    pub(crate) fn reap<S: squeue::EntryMarker, C: cqueue::EntryMarker>(
        &mut self,
        ring: &mut IoUring<S, C>,
        min: usize,
        out: &mut [Completion],
        mut completion: impl FnMut(cqueue::Entry) -> Completion,
    ) -> io::Result<usize> {
        self.complete(ring, min)?;
        let mut cq = ring.completion();
        let mut n = 0;
        while n < out.len() {
            match cq.next() {
                Some(c) => {
                    out[n] = completion(c.into());
                    n += 1;
                }
                None => break,
            }
        }
        self.outstanding -= n;
        Ok(n)
    }

    /// One io_uring_enter: submits whatever was pushed since the last one and waits for (or,
    /// with IOPOLL, polls for) `want` completions. Always GETEVENTS, so deferred completion work
    /// runs on every entry. A bare system call (as `Submitter::enter` makes through glibc's
    /// `syscall()`, less its errno round trip), no signal mask.
    #[inline]
    fn enter(&mut self, fd: i32, want: usize) -> io::Result<()> {
        let to_submit = self.unsubmitted as usize;
        let (fd, flags) = match self.registered {
            Some(index) => (index as usize, self.enter_flags | ENTER_REGISTERED_RING),
            None => (fd as usize, self.enter_flags),
        };
        retry_eintr(|| {
            let args = [fd, to_submit, want, flags as usize, 0, 0];
            // SAFETY: the SQ tail was published when the submission queue was dropped.
            match unsafe { raw_syscall(libc::SYS_io_uring_enter, args) } {
                r if r < 0 => Err(io::Error::from_raw_os_error(-r as i32)),
                r => Ok(r as usize),
            }
        })?;
        self.unsubmitted = 0;
        Ok(())
    }
}

/// Repeat a system call interrupted by a signal or refused for want of resources.
#[inline]
fn retry_eintr(mut call: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        match call() {
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINTR) | Some(libc::EAGAIN)) => continue,
            r => return r,
        }
    }
}

impl Setup<'_> {
    /// The ring's options for this thread: the job's, with the SQPOLL thread's CPU the run's
    /// placement gives.
    pub fn ring(&self) -> RingOptions {
        RingOptions { sq_cpu: self.sq_cpu, ..self.io.options.ring }
    }
}

impl IoInterface for Uring {
    type Handle = ();

    fn open(setup: &Setup, _: &()) -> io::Result<Self> {
        let flags = job_flags(setup.submit, setup.complete);
        let opts = setup.ring();
        let (ring, _) = create_ring(setup.qd, flags, opts.sq_cpu, opts.sq_idle_ms)?;
        if opts.register_files {
            ring.submitter().register_files(setup.fds)?;
        }
        if opts.register_buffers {
            let iov = libc::iovec { iov_base: setup.buffers as *mut libc::c_void, iov_len: setup.buffers_len };
            // SAFETY: the buffer region outlives the ring (owned by the hot loop's caller).
            unsafe { ring.submitter().register_buffers(&[iov])? };
        }
        let mut driver = RingDriver::new(setup.submit, setup.complete, opts.iowait);
        // Opened on the thread that drives the ring: its io_uring_enter calls skip the fd lookup.
        if setup.submit == Submit::Syscall {
            driver.register(ring.as_raw_fd())?;
        }
        Ok(Uring {
            ring,
            fixed_files: opts.register_files,
            fixed_bufs: opts.register_buffers,
            sqe_flags: if opts.force_async { io_uring::squeue::Flags::ASYNC } else { io_uring::squeue::Flags::empty() },
            fds: setup.fds.to_vec(),
            driver,
            cmdprio: opts_cmdprio(setup),
        })
    }

    #[inline]
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize> {
        let (fds, fixed_bufs, fixed_files, flags) = (&self.fds, self.fixed_bufs, self.fixed_files, self.sqe_flags);
        let cmdprio = &mut self.cmdprio;
        self.driver.push(&mut self.ring, reqs, |r| {
            let sqe = match (r.write, fixed_bufs, fixed_files) {
                (false, true, true) => opcode::ReadFixed::new(types::Fixed(r.file), r.buf, r.len, 0).offset(r.offset).build(),
                (false, true, false) => opcode::ReadFixed::new(types::Fd(fds[r.file as usize]), r.buf, r.len, 0).offset(r.offset).build(),
                (false, false, true) => opcode::Read::new(types::Fixed(r.file), r.buf, r.len).offset(r.offset).build(),
                (false, false, false) => opcode::Read::new(types::Fd(fds[r.file as usize]), r.buf, r.len).offset(r.offset).build(),
                (true, true, true) => opcode::WriteFixed::new(types::Fixed(r.file), r.buf, r.len, 0).offset(r.offset).build(),
                (true, true, false) => opcode::WriteFixed::new(types::Fd(fds[r.file as usize]), r.buf, r.len, 0).offset(r.offset).build(),
                (true, false, true) => opcode::Write::new(types::Fixed(r.file), r.buf, r.len).offset(r.offset).build(),
                (true, false, false) => opcode::Write::new(types::Fd(fds[r.file as usize]), r.buf, r.len).offset(r.offset).build(),
            }
            .user_data(r.tag as u64)
            .flags(flags);
            with_cmdprio(sqe, cmdprio, r.write)
        })
    }

    fn cmdprio_counts(&self) -> Option<([u64; 2], [u64; 2])> {
        self.cmdprio.as_ref().map(|d| (d.commands, d.with_prio))
    }

    #[inline]
    fn reap(&mut self, min: usize, out: &mut [Completion]) -> io::Result<usize> {
        self.driver.reap(&mut self.ring, min, out, |c| Completion { tag: c.user_data() as u32, result: c.result() as i64 })
    }
}

/// `--cmdprio`'s draw for a ring's thread.
fn opts_cmdprio(setup: &Setup) -> Option<super::thread::CmdPrioDraw> {
    setup.io.options.thread.cmdprio.map(|c| super::thread::CmdPrioDraw::new(&c, super::libaio::CMDPRIO_SEED))
}

/// The SQE with the per-command priority where the draw gives it one (the SQE's `ioprio`, the
/// u16 at byte 2 of the kernel's `struct io_uring_sqe`, which the crate sets only in its
/// builders).
#[inline]
fn with_cmdprio(mut sqe: io_uring::squeue::Entry, draw: &mut Option<super::thread::CmdPrioDraw>, write: bool) -> io_uring::squeue::Entry {
    if let Some(p) = draw.as_mut().and_then(|d| d.next(write)) {
        // SAFETY: Entry is repr(C) over the kernel's 64-byte io_uring_sqe, whose bytes 2..4
        // are `ioprio`.
        unsafe { (&mut sqe as *mut io_uring::squeue::Entry).cast::<u8>().add(2).cast::<u16>().write_unaligned(p) };
    }
    sqe
}

impl Drop for Uring {
    fn drop(&mut self) {
        self.driver.unregister(self.ring.as_raw_fd());
    }
}

impl Interface for Uring {
    type Target = super::target::Files;

    const INFO: &'static InterfaceInfo = &InterfaceInfo {
        name: "io_uring",
        note: None,
        execution: "kernel",
        behaviour: Behaviour::Async,
        submits: &[Submit::Syscall, Submit::Sqpoll],
        completes: &[Complete::Irq, Complete::Poll, Complete::Hybrid],
        how: "shared rings; sqpoll = SQPOLL kernel thread; poll = IOPOLL; hybrid = HYBRID_IOPOLL (6.13+)",
        async_needs_direct: false,
        diskless: false,
        targets: super::FILES_AND_BLOCKS,
        polls_device_queues: true,
        bypasses_kernel: false,
    };

    fn machine_support() -> Result<(), InterfaceError> {
        machine_support()
    }
    fn machine_notes() -> Option<String> {
        setup_notes(false)
    }
    fn check_kernel(io: &IoChoice) -> Result<Option<RingSetup>, InterfaceError> {
        check_ring(io, false)
    }
    fn kernel_features() -> Vec<Feature> {
        if machine_support().is_err() {
            return Vec::new();
        }
        kernel_features()
    }
    fn block_poll_delay(io: &IoChoice) -> Option<i64> {
        // Kernels whose IOPOLL still takes the block layer's sleep: classic polling needs -1.
        match io.complete {
            Complete::Hybrid if hybrid_via() == Ok(HybridVia::BlockLayer) => super::block_poll::delay_for(io),
            Complete::Poll if super::block_poll::hybrid_unreachable(true).is_none() => super::block_poll::delay_for(io),
            _ => None,
        }
    }
    fn mechanism(io: &IoChoice) -> String {
        let sq = if io.submit == Submit::Sqpoll { "SQPOLL, " } else { "" };
        match (io.complete, Self::block_poll_delay(io)) {
            (Complete::Irq, _) => format!("{sq}interrupt"),
            (Complete::Poll, None) => format!("{sq}IOPOLL (classic polling)"),
            (Complete::Hybrid, None) => format!("{sq}HYBRID_IOPOLL (io_uring's hybrid polling)"),
            (Complete::Poll, Some(d)) => format!("{sq}IOPOLL ({})", super::block_poll::delay_words(d)),
            (Complete::Hybrid, Some(d)) => {
                format!("{sq}IOPOLL with the block layer's hybrid polling ({})", super::block_poll::delay_words(d))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: u32 = SETUP_IOPOLL | SETUP_SQPOLL | SETUP_SQ_AFF | SETUP_CLAMP;
    const K5_10: u32 = OLD;
    const K5_19: u32 = OLD | SETUP_COOP_TASKRUN;
    const K6_0: u32 = K5_19 | SETUP_SINGLE_ISSUER;
    const K6_1: u32 = K6_0 | SETUP_DEFER_TASKRUN;

    /// A kernel that knows the flags in `known` and answers EINVAL to any other, as
    /// io_uring_setup does; every set asked for is noted in `tried`.
    fn kernel(known: u32, tried: &mut Vec<u32>) -> impl FnMut(u32) -> io::Result<u32> + '_ {
        move |f| {
            tried.push(f);
            if f & !known == 0 {
                Ok(f)
            } else {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            }
        }
    }

    /// (the flag sets tried, in order; the set the ring got) on a kernel knowing `known`.
    fn steps(known: u32, flags: u32) -> (Vec<u32>, Option<u32>) {
        let mut tried = Vec::new();
        let got = step_down(flags, kernel(known, &mut tried)).ok().map(|(_, f)| f);
        (tried, got)
    }

    #[test]
    fn step_down_one_flag_at_a_time() {
        let (si, defer, coop) = (SETUP_SINGLE_ISSUER, SETUP_DEFER_TASKRUN, SETUP_COOP_TASKRUN);
        let syscall = flags_for(Submit::Syscall, Complete::Irq);
        assert_eq!(syscall, si | defer);
        // 6.1+: as asked, at the first try.
        assert_eq!(steps(K6_1, syscall), (vec![si | defer], Some(si | defer)));
        // 6.0: DEFER_TASKRUN → COOP_TASKRUN, SINGLE_ISSUER kept.
        assert_eq!(steps(K6_0, syscall), (vec![si | defer, si | coop], Some(si | coop)));
        // 5.19: then SINGLE_ISSUER goes.
        assert_eq!(steps(K5_19, syscall), (vec![si | defer, si | coop, coop], Some(coop)));
        // 5.10 (Debian 11), 5.14 (RHEL 9), 5.15 (Ubuntu 22.04): neither.
        assert_eq!(steps(K5_10, syscall), (vec![si | defer, si | coop, coop, si, 0], Some(0)));
        // A backport with SINGLE_ISSUER and no COOP_TASKRUN keeps what it has.
        assert_eq!(steps(OLD | si, syscall).1, Some(si));
        // The mode's flags are never dropped.
        let poll = flags_for(Submit::Syscall, Complete::Poll);
        assert_eq!(steps(K5_10, poll).1, Some(SETUP_IOPOLL));
        assert_eq!(steps(K5_10, poll).0.iter().filter(|f| *f & SETUP_IOPOLL == 0).count(), 0);
        let (tried, got) = steps(K6_1, flags_for(Submit::Syscall, Complete::Hybrid));
        assert_eq!(got, None, "hybrid polling is never stepped down to plain polling");
        assert!(tried.iter().all(|f| f & SETUP_HYBRID_IOPOLL != 0));
        // SQPOLL asks for no cost-only flag: one try.
        assert_eq!(
            steps(K5_10, flags_for(Submit::Sqpoll, Complete::Poll)),
            (vec![SETUP_SQPOLL | SETUP_IOPOLL], Some(SETUP_SQPOLL | SETUP_IOPOLL))
        );
        // Only EINVAL (an unknown flag) steps down: other errors are the answer.
        let mut tried = 0;
        let r = step_down(syscall, |_| -> io::Result<()> {
            tried += 1;
            Err(io::Error::from_raw_os_error(libc::ENOMEM))
        });
        assert_eq!((r.unwrap_err().raw_os_error(), tried), (Some(libc::ENOMEM), 1));
    }

    #[test]
    fn what_the_record_says() {
        let asked = flags_for(Submit::Syscall, Complete::Poll);
        let (_, used) = step_down(asked, kernel(K5_10, &mut Vec::new())).unwrap();
        let r = ring_setup(asked, used, ring_extra(false, asked, None));
        assert_eq!(r.asked, ["IOPOLL", "CLAMP", "SINGLE_ISSUER", "DEFER_TASKRUN"]);
        assert_eq!(r.used, ["IOPOLL", "CLAMP"]);
        assert_eq!(r.dropped, ["SINGLE_ISSUER", "DEFER_TASKRUN"]);
        let (_, used) = step_down(asked, kernel(K5_19, &mut Vec::new())).unwrap();
        let r = ring_setup(asked, used, ring_extra(true, asked, None));
        assert_eq!(r.used, ["IOPOLL", "CLAMP", "COOP_TASKRUN", "SQE128", "CQE32"]);
        assert_eq!(r.dropped, ["SINGLE_ISSUER", "DEFER_TASKRUN"]);
        let sq = flags_for(Submit::Sqpoll, Complete::Irq);
        let r = ring_setup(sq, sq, ring_extra(false, sq, Some(1)));
        assert_eq!((r.used.clone(), r.dropped.is_empty()), (vec!["SQPOLL", "SQ_AFF", "CLAMP"], true));
        assert_eq!(serde_json::to_value(&r).unwrap()["used"][0], "SQPOLL");
    }

    #[test]
    fn refusals_blame_the_flag_the_kernel_refused() {
        let blame = |known: u32, flags: u32| match setup_with(flags, kernel(known, &mut Vec::new())) {
            Ok(_) => "ok".to_string(),
            Err(Refused::Bare(_)) => "bare".into(),
            Err(Refused::Flag(f, _)) => flag_names(f).join("|"),
            Err(Refused::Together(f, _)) => format!("together {}", flag_names(f).join("|")),
        };
        // A 5.10 kernel runs polled and SQPOLL rings: no blame for IOPOLL there.
        assert_eq!(blame(K5_10, flags_for(Submit::Syscall, Complete::Poll)), "ok");
        assert_eq!(blame(K6_1, flags_for(Submit::Syscall, Complete::Hybrid)), "HYBRID_IOPOLL");
        assert_eq!(blame(K5_10, flags_for(Submit::Sqpoll, Complete::Hybrid)), "HYBRID_IOPOLL");
        assert_eq!(blame(SETUP_SQPOLL, flags_for(Submit::Syscall, Complete::Poll)), "IOPOLL");
        assert_eq!(blame(SETUP_IOPOLL, flags_for(Submit::Sqpoll, Complete::Poll)), "SQPOLL");
        let r = setup_with(flags_for(Submit::Syscall, Complete::Irq), |_| -> io::Result<()> {
            Err(io::Error::from_raw_os_error(libc::ENOSYS))
        });
        assert!(matches!(r, Err(Refused::Bare(e)) if e.raw_os_error() == Some(libc::ENOSYS)));
        // SQPOLL refused for want of privilege (before 5.11): the error stays EPERM.
        let r = setup_with(SETUP_SQPOLL, |f| if f & SETUP_SQPOLL != 0 { Err(io::Error::from_raw_os_error(libc::EPERM)) } else { Ok(()) });
        assert!(matches!(r, Err(Refused::Flag(SETUP_SQPOLL, e)) if e.raw_os_error() == Some(libc::EPERM)));
        // Each alone accepted, not together.
        let r = setup_with(SETUP_SQPOLL | SETUP_IOPOLL, |f| {
            if f == SETUP_SQPOLL | SETUP_IOPOLL {
                Err(io::Error::from_raw_os_error(libc::EINVAL))
            } else {
                Ok(())
            }
        });
        assert!(matches!(r, Err(Refused::Together(f, _)) if f == SETUP_SQPOLL | SETUP_IOPOLL));
    }

    /// On the kernel running the test: what a default io_uring ring gets.
    #[test]
    fn this_kernel() {
        if machine_support().is_err() {
            eprintln!("skipped: io_uring is not usable here");
            return;
        }
        let flags = flags_for(Submit::Syscall, Complete::Irq);
        let (setup, _) = try_setup(false, flags, None, 1).unwrap();
        if crate::host::kernel_version() >= (5, 18) {
            assert!(setup.used.contains(&REGISTERED_RING) && setup.notes.is_empty(), "{setup:?}");
        }
        if crate::host::kernel_version() >= (6, 6) {
            assert!(setup.dropped.is_empty() && setup.used.contains(&"NO_SQARRAY"), "{setup:?}");
            assert_eq!(setup_notes(false).is_some(), crate::host::kernel_version() < (6, 13));
        } else if crate::host::kernel_version() >= (6, 1) {
            assert_eq!(setup.dropped, ["NO_SQARRAY"], "{setup:?}");
        } else {
            assert!(setup.dropped.contains(&"DEFER_TASKRUN"), "{setup:?}");
        }
    }

    /// `--iowait off`: the enter flag is in the record's ring where the kernel advertises
    /// IORING_FEAT_NO_IOWAIT, and refused in one line naming 6.15 where it does not; `on` adds
    /// nothing. The driver's enter flags carry it, computed once.
    #[test]
    fn no_iowait_is_used_where_the_kernel_has_it_and_refused_where_not() {
        let mut s = ring_setup(0, 0, 0);
        with_iowait(&mut s, Iowait::On, 0).unwrap();
        assert!(!s.used.contains(&NO_IOWAIT) && !s.asked.contains(&NO_IOWAIT));
        let why = with_iowait(&mut s, Iowait::Off, FEAT_NO_IOWAIT - 1).unwrap_err();
        assert!(why.contains("needs Linux 6.15+; this kernel lacks IORING_FEAT_NO_IOWAIT") && !why.contains('\n'), "{why}");
        with_iowait(&mut s, Iowait::Off, FEAT_NO_IOWAIT).unwrap();
        assert_eq!((s.asked.last(), s.used.last()), (Some(&NO_IOWAIT), Some(&NO_IOWAIT)));
        assert_eq!(RingDriver::new(Submit::Syscall, Complete::Irq, Iowait::Off).enter_flags, ENTER_GETEVENTS | ENTER_NO_IOWAIT);
        assert_eq!(RingDriver::new(Submit::Sqpoll, Complete::Irq, Iowait::On).enter_flags, ENTER_GETEVENTS);
        // Only rings take it.
        let mut io = IoChoice { interface: InterfaceKind::Psync, ..IoChoice::default() };
        io.options.ring.iowait = Iowait::Off;
        assert!(io.check_options().unwrap_err().starts_with("--iowait off applies only to io_uring"));
        io.interface = InterfaceKind::IoUring;
        io.check_options().unwrap();
        // The option's value in a stored job: absent when on (jobs stored before read the same).
        assert!(serde_json::to_value(RingOptions::default()).unwrap().get("iowait").is_none());
        assert_eq!(serde_json::to_value(io.options.ring).unwrap()["iowait"], "off");
    }

    /// On this kernel (6.15+): a ring's waits kept out of iowait, checked and set up as a run's.
    #[test]
    fn no_iowait_on_this_kernel() {
        if machine_support().is_err() || crate::host::kernel_version() < (6, 15) {
            eprintln!("skipped: no IORING_FEAT_NO_IOWAIT before Linux 6.15");
            return;
        }
        let mut io = IoChoice { interface: InterfaceKind::IoUring, ..IoChoice::default() };
        io.options.ring.iowait = Iowait::Off;
        let setup = setup_for(&io, false).unwrap();
        assert!(setup.used.contains(&NO_IOWAIT), "{setup:?}");
        // A wait with the flag completes (the kernel takes it).
        let (mut ring, _) = create_ring(4, flags_for(Submit::Syscall, Complete::Irq), None, 1).unwrap();
        let mut d = RingDriver::new(Submit::Syscall, Complete::Irq, Iowait::Off);
        let mut out = [Completion::default(); 1];
        d.push(&mut ring, &[Request::default()], |r| opcode::Nop::new().build().user_data(r.tag as u64)).unwrap();
        assert_eq!(d.reap(&mut ring, 1, &mut out, |c| Completion { tag: c.user_data() as u32, result: c.result() as i64 }).unwrap(), 1);
    }

    /// A kernel that refuses the registration: the record says it was asked for, not used, and
    /// why; any other failure is not called a refusal by the kernel.
    #[test]
    fn an_unregistered_ring_says_why() {
        let mut s = ring_setup(0, 0, 0);
        with_registered_ring(&mut s, Ok(()));
        assert_eq!((s.used.last(), s.dropped.len(), s.notes.len()), (Some(&REGISTERED_RING), 0, 0));
        let mut s = ring_setup(0, 0, 0);
        with_registered_ring(&mut s, Err((true, "why".into())));
        assert_eq!(
            (s.asked.last(), s.used.contains(&REGISTERED_RING), s.dropped.clone(), s.notes.clone()),
            (Some(&REGISTERED_RING), false, vec![REGISTERED_RING], vec!["why".to_string()])
        );
        let mut s = ring_setup(0, 0, 0);
        with_registered_ring(&mut s, Err((false, "busy".into())));
        assert_eq!((s.dropped.len(), s.notes.clone()), (0, vec!["busy".to_string()]));
        assert_eq!(serde_json::to_value(&s).unwrap()["notes"][0], "busy");
        assert!(serde_json::to_value(ring_setup(0, 0, 0)).unwrap().get("notes").is_none());
    }

    /// The driver enters by the registered index on this kernel (5.18+) and still completes.
    #[test]
    fn the_driver_enters_a_registered_ring() {
        if machine_support().is_err() || crate::host::kernel_version() < (5, 18) {
            eprintln!("skipped: no registered rings here");
            return;
        }
        let (mut ring, _) = create_ring(4, flags_for(Submit::Syscall, Complete::Irq), None, 1).unwrap();
        let mut d = RingDriver::new(Submit::Syscall, Complete::Irq, Iowait::On);
        d.register(ring.as_raw_fd()).unwrap();
        assert!(d.registered.is_some());
        let mut out = [Completion::default(); 4];
        for round in 0..3u32 {
            let reqs = [Request { tag: round, ..Request::default() }, Request { tag: round + 10, ..Request::default() }];
            assert_eq!(d.push(&mut ring, &reqs, |r| opcode::Nop::new().build().user_data(r.tag as u64)).unwrap(), 2);
            let mut tags = Vec::new();
            while tags.len() < 2 {
                let n = d
                    .reap(&mut ring, 2 - tags.len(), &mut out, |c| Completion { tag: c.user_data() as u32, result: c.result() as i64 })
                    .unwrap();
                tags.extend(out[..n].iter().map(|c| c.tag));
            }
            tags.sort();
            assert_eq!(tags, [round, round + 10]);
        }
        d.unregister(ring.as_raw_fd());
        assert!(d.registered.is_none());
    }
}
