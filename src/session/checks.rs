//! What the kernel and the targets allow a job, and which completion path it will take.
use crate::device::{sysinfo::TargetInfo, Target};
use crate::failure::Failure;
use crate::interfaces::{InterfaceError, KernelSetup};
use crate::meters::Cost;
use crate::plan::{Complete, Job};
use crate::record::{CompletionPath, Path};

/// Checks that need the kernel: can this machine run the interface at all, and does the kernel
/// take what the job asks of it? Interfaces that set up kernel objects (rings) answer the setup
/// the run gets.
pub fn check_kernel(job: &Job) -> Result<Option<KernelSetup>, InterfaceError> {
    let rules = job.io.interface.rules();
    (rules.machine_support)().map_err(|e| InterfaceError::Unsupported(format!("{} is not usable here: {e}", job.io.interface)))?;
    (rules.check_kernel)(&job.io)
}

/// What completion path iolab expects the kernel to take (the interface's rule), and why if it
/// differs from the request.
pub fn expected_path(job: &Job, targets: &[TargetInfo]) -> CompletionPath {
    let rules = job.io.interface.rules();
    let (expected, reason) = (rules.expected_path)(&job.io, targets);
    let requested = job.io.complete.name().to_string();
    CompletionPath { requested, mechanism: (rules.mechanism)(&job.io), expected, reason, observed: None, evidence: None, fell_back: false }
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
        if let Some(st) = d.stat.filter(|st| (st.read_sectors + st.write_sectors) * 512 * 2 < d.iolab_ios * job.workload.bs) {
            blind.push(format!(
                "{} moved {} bytes for iolab's {}: the I/O did not reach it",
                name(d),
                (st.read_sectors + st.write_sectors) * 512,
                d.iolab_ios * job.workload.bs
            ));
        }
    }
    if !blind.is_empty() {
        path.observed = Some(Path::Unknown);
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
    let polled_asked = job.io.complete != Complete::Irq;
    let mut evidence = format!("{irqs} {} queue interrupts for {ios} I/Os", names.join("+"));
    // Classic polling spins; hybrid polling sleeps before it polls: the workload threads'
    // voluntary context switches tell the two apart.
    let workload = cost.classes.iter().find(|c| c.class == "workload");
    if let Some(sleeps) = workload.and_then(|w| w.voluntary_ctx_switches).filter(|_| polled_asked) {
        evidence += &format!("; the workload threads slept {:.2} times per I/O", sleeps as f64 / ios as f64);
    }
    if irqs == 0 && !polled_asked {
        // Interrupt completion asked for and none counted: these lines do not show this I/O.
        path.observed = Some(Path::Unknown);
        path.evidence = Some(format!("{evidence}, under interrupt completion: the lines did not count this I/O"));
        return;
    }
    // Polled completions raise no device interrupt at all; what remains is other traffic.
    let polled = polled_asked && (irqs as f64) < 0.01 * ios as f64;
    path.observed = Some(if polled { Path::Polled } else { Path::Interrupt });
    path.evidence = Some(evidence);
    path.fell_back = polled_asked && !polled;
}

/// Refuse polled completion on queues that cannot poll unless the user accepts the fallback:
/// what this machine cannot do (a sweep skips the run).
pub(super) fn check_polling(job: &Job, targets: &[Target]) -> Result<(), Failure> {
    if !job.io.interface.info().polls_device_queues || job.io.complete == Complete::Irq || job.policy.allow_fallback {
        return Ok(());
    }
    for t in targets {
        if t.info.io_poll == Some(false) {
            let dev = t.info.device.as_deref().unwrap_or("?");
            return Err(Failure::unsupported(format!("{} cannot poll: /sys/block/{dev}/queue/io_poll is 0 (the driver has no poll queues: load nvme with poll_queues=N, or null_blk with poll_queues=N); or pass --allow-fallback to run anyway (the kernel then completes by interrupt, or on recent kernels fails each I/O with EOPNOTSUPP; iolab reports which)",
                t.path.display())));
        }
    }
    Ok(())
}

/// Refuse a run whose up-front allocations (`engine::memory_needed`) do not fit the memory
/// available now or the address-space limit (`ulimit -v`): allocating them would abort the
/// process, after settings were changed. Err: what this machine cannot do now (unsupported here).
pub(super) fn check_memory(job: &Job) -> Result<(), Failure> {
    let need = crate::engine::memory_needed(job);
    let fmt = |b: u64| crate::plan::size::format_bytes(b as f64);
    let kib = |text: &str, key: &str| {
        text.lines().find_map(|l| l.strip_prefix(key)?.trim().trim_end_matches("kB").trim().parse::<u64>().ok()).map(|k| k * 1024)
    };
    let what = format!(
        "--threads {} × --qd {} × --bs {} needs {} of buffers and records",
        job.workload.threads,
        job.workload.qd,
        job.workload.bs,
        fmt(need)
    );
    if let Some(avail) = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| kib(&m, "MemAvailable:")) {
        if need > avail {
            return Err(Failure::unsupported(format!(
                "{what}, but only {} of memory is available: lower --threads, --qd or --bs",
                fmt(avail)
            )));
        }
    }
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: lim is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0 && lim.rlim_cur != libc::RLIM_INFINITY {
        let used = std::fs::read_to_string("/proc/self/status").ok().and_then(|m| kib(&m, "VmSize:")).unwrap_or(0);
        let room = lim.rlim_cur.saturating_sub(used);
        let extra = address_space_extra(job.workload.threads);
        if need.saturating_add(extra) > room {
            return Err(Failure::unsupported(format!("{what} and {} of address space for its threads' malloc arenas, but the address-space limit (ulimit -v) leaves {}: raise the limit or lower --threads, --qd or --bs", fmt(extra), fmt(room))));
        }
    }
    Ok(())
}

/// Address space a run reserves beyond `engine::memory_needed` without using it as memory, which
/// only `ulimit -v` counts: glibc gives each engine thread that allocates its own malloc arena,
/// 64 MiB reserved (up to 8 arenas per CPU), plus slack for the rings and the rest of the
/// process. Without it a run that fitted by 100 MB aborted allocating its buffers.
fn address_space_extra(threads: u32) -> u64 {
    const ARENA: u64 = 64 << 20;
    const SLACK: u64 = 32 << 20;
    (threads as u64).min(8 * crate::host::online_cpus() as u64) * ARENA + SLACK
}
