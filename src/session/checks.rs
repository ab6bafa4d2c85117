//! What the kernel and the targets allow a job, and which completion path it will take.
use crate::device::{sysinfo::TargetInfo, Target};
use crate::host::{kernel_release, kernel_version};
use crate::interfaces::{self, io_uring};
use crate::meters::Cost;
use crate::plan::validate::name_complete;
use crate::plan::{Complete, Job, Submit};
use crate::record::CompletionPath;

/// Checks that need the kernel: is the interface there, does it accept these ring flags? For
/// io_uring and nvme-passthru, the ring setup the run gets (cost-only flags the kernel lacks
/// dropped); an error blames the flag of the mode the kernel refused.
pub fn check_kernel(job: &Job) -> Result<Option<io_uring::RingSetup>, String> {
    interfaces::machine_support(&job.interface).map_err(|e| format!("{} is not usable here: {e}", job.interface))?;
    let big = match job.interface.as_str() {
        "io_uring" => false,
        "nvme-passthru" => true,
        _ => return Ok(None),
    };
    let flags = io_uring::flags_for(job.submit, job.complete);
    let k = kernel_release();
    let what = if big { "io_uring with 128-byte SQEs and 32-byte CQEs" } else { "io_uring" };
    let (setup, params) = io_uring::try_setup(big, flags, job.sq_cpu, job.sq_idle_ms).map_err(|r| match r {
        io_uring::Refused::Flag(io_uring::SETUP_HYBRID_IOPOLL, e) if e.raw_os_error() == Some(libc::EINVAL) => {
            format!("kernel {k} has no io_uring hybrid polling (IORING_SETUP_HYBRID_IOPOLL needs Linux 6.13 or later): use --complete poll")
        }
        io_uring::Refused::Flag(io_uring::SETUP_SQPOLL, e) if e.raw_os_error() == Some(libc::EPERM) => {
            format!("kernel {k} refused {what} SQPOLL: {e} (before Linux 5.11 only root may use it): run as root or use --submit syscall")
        }
        io_uring::Refused::Flag(io_uring::SETUP_SQPOLL, e) => match job.sq_cpu {
            Some(c) => format!("kernel {k} refused {what} SQPOLL with its thread on CPU {c}: {e}"),
            None => format!("kernel {k} refused {what} SQPOLL: {e}"),
        },
        io_uring::Refused::Flag(f, e) => format!(
            "kernel {k} refused {what} {} ({}): {e}",
            io_uring::flag_names(f).join(" | "),
            format_args!("--complete {}", name_complete(job.complete))
        ),
        io_uring::Refused::Together(f, e) => {
            format!("kernel {k} refused {what} with {} together: {e}", io_uring::flag_names(f).join(" | "))
        }
        io_uring::Refused::Bare(e) => format!("kernel {k} refused to set up {what}: {e}"),
    })?;
    // Before 5.11 the SQ thread could only use registered files.
    if job.submit == Submit::Sqpoll && !job.register_files && !params.is_feature_sqpoll_nonfixed() {
        return Err(format!("kernel {k}'s io_uring SQPOLL thread only takes registered files (IORING_FEAT_SQPOLL_NONFIXED came in Linux 5.11): use --register-files true or --submit syscall"));
    }
    Ok(Some(setup))
}

/// What completion path iolab expects the kernel to take, and why if it differs from the request.
pub fn expected_path(job: &Job, targets: &[TargetInfo]) -> CompletionPath {
    let requested = name_complete(job.complete).to_string();
    let (expected, reason) = match (job.interface.as_str(), job.complete) {
        (interfaces::null::NAME, _) => ("unknown", Some(interfaces::null::NO_DEVICE.to_string())),
        (_, Complete::Irq) => ("interrupt", None),
        ("pvsync2", _) if kernel_version() >= (5, 18) => {
            ("interrupt", Some("Linux ignores RWF_HIPRI on synchronous I/O since 5.18".to_string()))
        }
        ("posixaio", _) => {
            ("interrupt", Some("posixaio polling spins on aio_error in user space; the kernel still completes by interrupt".to_string()))
        }
        _ => {
            let no_poll: Vec<&str> =
                targets.iter().filter(|t| t.io_poll == Some(false)).map(|t| t.device.as_deref().unwrap_or(&t.path)).collect();
            if !no_poll.is_empty() {
                (
                    "interrupt",
                    Some(format!("{} has no poll queues (queue/io_poll = 0): polled I/O completes by interrupt", no_poll.join(", "))),
                )
            } else if targets.iter().all(|t| t.io_poll == Some(true)) {
                ("polled", None)
            } else {
                ("unknown", Some("the device behind the target does not say whether it can poll".to_string()))
            }
        }
    };
    CompletionPath { requested, expected: expected.to_string(), reason, observed: None, evidence: None, fell_back: false }
}

/// Fill in what the device interrupt counters say about the completion path. Only a count of
/// interrupt lines that the target's own I/O reaches says anything: zero interrupts from a
/// device that raises none for this I/O is "unknown", never "polled".
pub fn observe_path(path: &mut CompletionPath, job: &Job, cost: &Cost) {
    let ios: u64 = cost.devices.iter().map(|d| d.iolab_ios).sum();
    if ios == 0 {
        return;
    }
    let name = |d: &crate::meters::DeviceCost| d.device.clone().unwrap_or_else(|| d.target.clone());
    let mut blind = Vec::new();
    let no_lines: Vec<String> =
        cost.devices.iter().filter(|d| d.queue_interrupts.is_none()).map(|d| d.irq_device.clone().unwrap_or_else(|| name(d))).collect();
    if !no_lines.is_empty() {
        blind.push(format!(
            "no queue interrupt lines found for {} (loop, zram and null_blk complete without device interrupts)",
            no_lines.join(", ")
        ));
    }
    for d in cost.devices.iter().filter(|d| d.irq_behind_loop && d.queue_interrupts.is_some()) {
        blind.push(format!(
            "{} completes from the loop driver's worker, not by interrupt; the {} {} queue interrupts count its backing file's I/O",
            name(d),
            d.queue_interrupts.unwrap_or(0),
            d.controller.as_deref().unwrap_or("?")
        ));
    }
    // The page cache (or anything else in between) can serve I/O the device never sees.
    for d in cost.devices.iter().filter(|d| d.queue_interrupts.is_some() && !d.irq_behind_loop) {
        if let Some(st) = d.stat.filter(|st| (st.read_sectors + st.write_sectors) * 512 * 2 < d.iolab_ios * job.bs) {
            blind.push(format!(
                "{} moved {} bytes for iolab's {}: the I/O did not reach it",
                name(d),
                (st.read_sectors + st.write_sectors) * 512,
                d.iolab_ios * job.bs
            ));
        }
    }
    if !blind.is_empty() {
        path.observed = Some("unknown".into());
        path.evidence = Some(blind.join("; "));
        return;
    }
    // Each controller's lines once, however many targets sit on it.
    let mut names: Vec<&str> = Vec::new();
    let mut irqs = 0;
    for d in &cost.devices {
        let c = d.controller.as_deref().unwrap_or("?");
        if !names.contains(&c) {
            names.push(c);
            irqs += d.queue_interrupts.unwrap_or(0);
        }
    }
    let polled_asked = job.complete != Complete::Irq;
    let evidence = format!("{irqs} {} queue interrupts for {ios} I/Os", names.join("+"));
    if irqs == 0 && !polled_asked {
        // Interrupt completion asked for and none counted: these lines do not show this I/O.
        path.observed = Some("unknown".into());
        path.evidence = Some(format!("{evidence}, under interrupt completion: the lines did not count this I/O"));
        return;
    }
    // Polled completions raise no device interrupt at all; what remains is other traffic.
    let polled = polled_asked && (irqs as f64) < 0.01 * ios as f64;
    path.observed = Some(if polled { "polled" } else { "interrupt" }.into());
    path.evidence = Some(evidence);
    path.fell_back = polled_asked && !polled;
}

/// Refuse polled completion on queues that cannot poll unless the user accepts the fallback.
pub(super) fn check_polling(job: &Job, targets: &[Target]) -> Result<(), String> {
    if !matches!(job.interface.as_str(), "io_uring" | "nvme-passthru") || job.complete == Complete::Irq || job.allow_fallback {
        return Ok(());
    }
    for t in targets {
        if t.info.io_poll == Some(false) {
            let dev = t.info.device.as_deref().unwrap_or("?");
            return Err(format!("{} cannot poll: /sys/block/{dev}/queue/io_poll is 0 (the driver has no poll queues: load nvme with poll_queues=N, or null_blk with poll_queues=N); or pass --allow-fallback to run anyway (the kernel then completes by interrupt, or on recent kernels fails each I/O with EOPNOTSUPP; iolab reports which)",
                t.path.display()));
        }
    }
    Ok(())
}
