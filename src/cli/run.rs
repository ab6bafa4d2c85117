//! `iolab run`: plan → checks → targets → engine → record → summary/JSON.
use crate::device::{self, sysinfo::TargetInfo, Target};
use crate::engine::{self, OpenTarget};
use crate::interfaces::{self, io_uring};
use crate::plan::validate::{name_complete, validate};
use crate::plan::{Complete, Job, Submit};
use crate::record::{self, CompletionPath, Environment, Results, RunRecord, Verify};
use crate::report::summary;
use std::io::IsTerminal;

pub use crate::failure::{Failure, FailureKind};

pub fn kernel_release() -> String {
    // SAFETY: uts is a valid out-pointer.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    unsafe { libc::uname(&mut uts) };
    unsafe { std::ffi::CStr::from_ptr(uts.release.as_ptr()) }.to_string_lossy().into_owned()
}

/// (major, minor) of the running kernel.
pub fn kernel_version() -> (u32, u32) {
    let r = kernel_release();
    let mut it = r.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse().ok());
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

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
pub fn observe_path(path: &mut CompletionPath, job: &Job, cost: &crate::meters::Cost) {
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

/// The setting changes a job asks for, once per distinct device.
fn settings_changes(job: &Job, targets: &[TargetInfo]) -> Result<Vec<crate::settings::Change>, String> {
    use crate::settings::{Change, Setting};
    let mut devices: Vec<&str> = Vec::new();
    for t in targets {
        let Some(d) = t.device.as_deref() else {
            if job.scheduler.is_some() || !job.set.is_empty() {
                return Err(format!("{} has no block device behind it whose settings could be changed", t.path));
            }
            continue;
        };
        if !devices.contains(&d) {
            devices.push(d);
        }
    }
    let mut out = Vec::new();
    for d in &devices {
        if let Some(s) = &job.scheduler {
            out.push(Change::new(Setting::Scheduler, Some(d), s.clone()));
        }
        for spec in &job.set {
            let c = Change::parse(spec, Some(d))?;
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// `iolab restore`: put back what a killed iolab left changed. `after`: the pid of an aborting
/// iolab that started this one (settings::abort); wait for it to end, then say what was restored
/// on stderr, where its abort message went.
pub fn restore_main(after: Option<u32>) -> i32 {
    if let Some(pid) = after {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while crate::settings::pid_alive(pid, None) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        return match crate::settings::Settings::system().restore_journal() {
            Ok(lines) => {
                for l in lines {
                    eprintln!("iolab: restored after the abort: {l}");
                }
                0
            }
            Err(e) => {
                eprintln!("iolab: restoring after the abort failed: {e}");
                1
            }
        };
    }
    match crate::settings::Settings::system().restore_journal() {
        Ok(lines) if lines.is_empty() => {
            println!("nothing to restore: no system settings are recorded as changed");
            0
        }
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            0
        }
        Err(e) => {
            eprintln!("iolab: {e}");
            1
        }
    }
}

/// Apply the job's setting changes. What the device or kernel does not offer is unsupported;
/// settings left changed (by an earlier iolab, or by a change whose rollback failed) are
/// settings not restored, and no run may start on them.
fn apply_settings(
    system: &crate::settings::Settings,
    changes: &[crate::settings::Change],
) -> Result<Option<crate::settings::AppliedGuard>, Failure> {
    if changes.is_empty() {
        return Ok(None);
    }
    if let Some(left) = system.left_changed().map_err(Failure::failed)? {
        return Err(Failure::new(FailureKind::SettingsNotRestored, left));
    }
    // Only root writes the real /sys: without it every change fails, whatever the machine offers.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 && system.sysfs_root() == std::path::Path::new("/sys") {
        return Err(Failure::invalid(
            "changing system settings (scheduler, set) needs root: run iolab as root (sudo), or drop them".into(),
        ));
    }
    for c in changes {
        system.check(c).map_err(Failure::unsupported)?;
    }
    system.apply(changes).map(Some).map_err(|e| match system.left_changed() {
        Ok(None) => Failure::failed(e),
        _ => Failure::new(FailureKind::SettingsNotRestored, e),
    })
}

/// Refuse polled completion on queues that cannot poll unless the user accepts the fallback.
fn check_polling(job: &Job, targets: &[Target]) -> Result<(), String> {
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

fn environment(targets: Vec<TargetInfo>) -> Environment {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu_model =
        cpuinfo.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string());
    Environment {
        iolab_version: env!("CARGO_PKG_VERSION").to_string(),
        command_line: std::env::args().collect(),
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_string()),
        kernel: kernel_release(),
        cpu_model,
        cpu_count: crate::plan::validate::online_cpus(),
        started_at_unix_s: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0),
        clock: None,
        targets,
        device_settings: Vec::new(),
        settings_changed: Vec::new(),
    }
}

/// Check before any I/O that a JSON destination can be written, so a long or destructive run
/// is not wasted on a typo.
pub fn check_output(dest: &str) -> Result<(), String> {
    crate::output::check_writable("--json", dest)
}

/// Write JSON whole or not at all (see `output`).
pub fn write_json(dest: &str, value: &impl serde::Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| format!("cannot encode JSON: {e}"))?;
    crate::output::write_bytes(dest, format!("{text}\n").as_bytes())
}

/// What a run shows while it works: notes and about one progress call a second.
pub trait RunUi {
    fn note(&mut self, _msg: &str) {}
    /// (elapsed s, total s for time budgets, completions so far including the ramp, in ramp)
    fn progress(&mut self, _elapsed: f64, _total: Option<f64>, _done: u64, _ramp: bool) {}
    fn finish(&mut self) {}
}

/// Shows nothing.
pub struct Quiet;
impl RunUi for Quiet {}

/// Live IOPS from successive progress calls.
#[derive(Default)]
pub struct IopsMeter {
    last: (f64, u64),
}
impl IopsMeter {
    pub fn update(&mut self, elapsed: f64, done: u64) -> f64 {
        let iops = if elapsed > self.last.0 { done.saturating_sub(self.last.1) as f64 / (elapsed - self.last.0) } else { 0.0 };
        self.last = (elapsed, done);
        iops
    }
}

/// One run's bar on the terminal: position, ETA and live IOPS.
pub struct RunBar {
    bar: indicatif::ProgressBar,
    iops: IopsMeter,
    budget: crate::plan::Budget,
    bs: u64,
}
impl RunBar {
    pub fn new(job: &Job) -> RunBar {
        let bar = indicatif::ProgressBar::new(1000);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {elapsed_precise} ETA {eta}  {msg}")
                .unwrap()
                .progress_chars("=> "),
        );
        RunBar { bar, iops: IopsMeter::default(), budget: job.budget, bs: job.bs }
    }
}
impl RunUi for RunBar {
    fn note(&mut self, msg: &str) {
        self.bar.set_message(msg.to_string());
        self.bar.tick();
    }
    fn progress(&mut self, elapsed: f64, total: Option<f64>, done: u64, ramp: bool) {
        let iops = self.iops.update(elapsed, done);
        let frac = match (total, self.budget) {
            (Some(t), _) => elapsed / t,
            (None, crate::plan::Budget::Ios(n)) => done as f64 / n as f64,
            (None, crate::plan::Budget::Bytes(n)) => done as f64 * self.bs as f64 / n as f64,
            _ => 0.0,
        };
        self.bar.set_position((frac * 1000.0).min(1000.0) as u64);
        self.bar.set_message(format!("{}{} IOPS", if ramp { "ramp " } else { "" }, summary::format_count(iops)));
    }
    fn finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// Run a job end to end: checks, targets, engine, meters, record.
/// `energy`: how to measure energy (None: not at all, as for probes).
pub fn execute(job: &Job, ui: &mut dyn RunUi, energy: Option<&crate::energy::record::EnergyOptions>) -> Result<RunRecord, Failure> {
    validate(job).map_err(Failure::invalid)?;
    // Too big for this machine's memory now: not the user's error, and a sweep goes on.
    crate::plan::validate::check_memory(job).map_err(Failure::unsupported)?;
    // Whatever the kernel lacks or refuses, this machine cannot do.
    let ring = check_kernel(job).map_err(Failure::unsupported)?;
    if let Some(e) = energy.filter(|e| e.require) {
        let found = crate::energy::probe(&e.config);
        if !found.iter().any(|s| s.available) {
            let why: Vec<String> = found.iter().map(|s| format!("{}: {}", s.backend, s.detail)).collect();
            return Err(Failure::unsupported(format!("--require-energy: no energy source can measure here ({})", why.join("; "))));
        }
    }
    // Ctrl-C from here on stops cleanly: the fill, the idle baseline and the run all check it.
    engine::install_interrupt_handler();
    // A diskless interface (null) opens nothing: its one target is an address space.
    let diskless = interfaces::find(&job.interface).is_some_and(|i| i.diskless);
    let temp = if job.targets.is_empty() && !diskless {
        let size = job.size.unwrap_or(device::DEFAULT_TARGET_SIZE);
        ui.note(&format!("creating and filling a {} temporary target", crate::plan::size::format_bytes(size as f64)));
        let made = device::create_default_target(size, &engine::STOP);
        Some(made.map_err(|m| {
            if engine::STOP.load(std::sync::atomic::Ordering::Relaxed) {
                Failure::new(FailureKind::Interrupted, m)
            } else {
                Failure::failed(m)
            }
        })?)
    } else {
        None
    };
    let paths: Vec<std::path::PathBuf> = match &temp {
        Some(t) => vec![t.path.clone()],
        None => job.targets.iter().map(Into::into).collect(),
    };
    let targets = device::open_targets(job, &paths, temp.is_some())?;
    check_polling(job, &targets).map_err(Failure::unsupported)?;
    let mut infos: Vec<TargetInfo> = targets.iter().map(|t| t.info.clone()).collect();
    infos.extend(diskless.then(|| interfaces::null::target_info(job)));
    // System settings: originals journaled before any change, restored when the guard drops
    // (at the end, on an error return, after Ctrl-C); `iolab restore` is the backstop.
    let system = crate::settings::Settings::system();
    let changes = settings_changes(job, &infos)?;
    let guard = apply_settings(&system, &changes)?;
    // Describe the targets after the change, so the record shows what the run ran with.
    let infos: Vec<TargetInfo> = if guard.is_some() {
        targets
            .iter()
            .map(|t| {
                crate::device::sysinfo::describe(&t.path, &std::fs::metadata(&t.path).expect("open target")).with_size(t.info.size_bytes)
            })
            .collect()
    } else {
        infos
    };
    let path = expected_path(job, &infos);
    let mut env = environment(infos);
    env.device_settings = env.targets.iter().filter_map(|t| t.device.as_deref()).map(|d| system.snapshot(d)).collect();
    env.settings_changed = guard.as_ref().map(|g| g.changes()).unwrap_or_default();
    let mut open: Vec<OpenTarget> = targets
        .iter()
        .map(|t| OpenTarget { fd: std::os::fd::AsRawFd::as_raw_fd(&t.file), range_start: t.range_start, range_len: t.range_len })
        .collect();
    open.extend(diskless.then(|| OpenTarget { fd: -1, range_start: job.offset, range_len: interfaces::null::address_space(job) }));
    let idle = energy.and_then(|e| {
        e.idle_baseline_s.map(|s| {
            ui.note(&format!("measuring idle power for {s} s"));
            crate::energy::record::measure_idle(&e.config, s, &engine::STOP)
        })
    });
    if engine::STOP.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(Failure::new(FailureKind::Interrupted, "interrupted before the first I/O; nothing was measured".to_string()));
    }
    // No device to meter for null: no device cost, no observed completion path.
    let mut meters = crate::meters::Meters::new(if diskless { &[] } else { &env.targets }, energy.map(|e| &e.config));
    let mut progress = |elapsed: f64, total: Option<f64>, done: u64, ramp: bool| ui.progress(elapsed, total, done, ramp);
    let out = engine::run(job, &open, &mut progress, &mut meters).map_err(|m| {
        // A worker's error while Ctrl-C stops the run is the interruption, not a failure.
        let kind = if engine::STOP.load(std::sync::atomic::Ordering::Relaxed) { FailureKind::Interrupted } else { FailureKind::Failed };
        Failure::new(kind, m)
    });
    ui.finish();
    let not_restored = match guard.map(|g| g.restore()) {
        Some(Err(e)) => Some(format!("restoring system settings failed: {e}")),
        _ => None,
    };
    let out = match (out, &not_restored) {
        (Ok(o), _) => o,
        (Err(f), None) => return Err(f),
        (Err(f), Some(r)) => return Err(Failure::new(FailureKind::SettingsNotRestored, format!("{}; {r}", f.message))),
    };
    env.clock = Some(out.clock.clone());
    let w = out.window_s;
    let mut total = out.rec.read.clone();
    total.ios += out.rec.write.ios;
    total.bytes += out.rec.write.bytes;
    total.errors += out.rec.write.errors;
    total.min_ns = total.min_ns.min(out.rec.write.min_ns);
    total.max_ns = total.max_ns.max(out.rec.write.max_ns);
    total.lat.add(&out.rec.write.lat).expect("same bounds");
    let results = Results {
        window_s: w,
        read: record::direction(&out.rec.read, w),
        write: record::direction(&out.rec.write, w),
        total: record::direction(&total, w),
        series: record::series(&out.rec.series),
        cpu: record::cpu(&meters.process_rusage(), meters.window_s().unwrap_or(w), total.ios),
        verify: job.verify.then_some(Verify { reads_checked: out.verified_reads, written_blocks_read_back: out.verified_written }),
    };
    let error = out.first_error.as_ref().map(|f| {
        let t = &env.targets[f.file as usize].path;
        let dir = if f.write { "write" } else { "read" };
        let hint = if f.errno == Some(libc::EOPNOTSUPP) && job.complete != Complete::Irq {
            " (this kernel rejects polled I/O on a queue without poll queues instead of falling back to interrupts)"
        } else {
            ""
        };
        let tail = if job.continue_on_error { "" } else { "; the run stopped (use --continue-on-error to count errors and go on)" };
        format!("{dir} of {} bytes at offset {} on {} failed: {}{hint}{tail}", job.bs, f.offset, t, f.what)
    });
    let cost = meters.cost(&out.rec.per_target);
    let energy_record = match (energy, meters.take_energy()) {
        (Some(_), Some(report)) => Some(crate::energy::record::finish(report, idle, total.ios, total.bytes)),
        _ => None,
    };
    // The check before the run only knew a source was there; this one knows what it measured.
    let energy_error = match (energy.filter(|e| e.require), &energy_record) {
        (Some(_), Some(r)) => r.report.require_measured().err(),
        (Some(_), None) => Some("no energy was measured (the window never started)".to_string()),
        _ => None,
    }
    .map(|e| format!("--require-energy: {e}"));
    let mut path = path;
    if let Some(c) = &cost {
        observe_path(&mut path, job, c);
    }
    let strict_error =
        (job.strict && job.complete != Complete::Irq && path.observed.as_deref().is_some_and(|o| o != "polled")).then(|| {
            format!(
                "--strict: asked for {} completion but the completion path observed was {} ({})",
                name_complete(job.complete),
                path.observed.as_deref().unwrap_or("?"),
                path.evidence.as_deref().unwrap_or("")
            )
        });
    let error = error.or(strict_error);
    let status = if out.interrupted {
        "interrupted"
    } else if energy_error.is_some() || (error.is_some() && (!job.continue_on_error || job.strict)) {
        "failed"
    } else {
        "ok"
    };
    let error = match (error, energy_error) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    };
    drop(temp);
    let rec = RunRecord {
        schema_version: record::SCHEMA_VERSION,
        status: status.into(),
        error,
        spec: job.clone(),
        environment: env,
        results: Some(results),
        cost,
        energy: energy_record,
        completion_path: path,
        ring,
    };
    match not_restored {
        // The measurement is whole; the machine is not as it was.
        Some(m) => Err(Failure { kind: FailureKind::SettingsNotRestored, message: m, record: Some(Box::new(rec)) }),
        None => Ok(rec),
    }
}

/// `iolab run`: returns the process exit code.
pub fn main(args: &super::RunArgs) -> i32 {
    let job = match args.to_job() {
        Ok(j) => j,
        Err(e) => {
            eprintln!("iolab: {e}");
            return 2;
        }
    };
    if let Some(Err(e)) = args.json.as_deref().map(check_output) {
        eprintln!("iolab: {e}");
        return 2;
    }
    let mut ui: Box<dyn RunUi> = if !args.quiet && std::io::stderr().is_terminal() { Box::new(RunBar::new(&job)) } else { Box::new(Quiet) };
    let energy = match args.energy.options() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("iolab: {e}");
            return 2;
        }
    };
    let (rec, not_restored) = match execute(&job, ui.as_mut(), Some(&energy)) {
        Ok(rec) => (rec, None),
        // The run was made; show it, then say the machine is left changed.
        Err(Failure { record: Some(rec), message, .. }) => (*rec, Some(message)),
        Err(f) => {
            eprintln!("iolab: {}", f.message);
            return f.code();
        }
    };
    let text = summary::render(&rec);
    if args.json.as_deref() == Some("-") {
        eprint!("{text}")
    } else {
        print!("{text}")
    }
    if let Some(dest) = &args.json {
        if let Err(e) = write_json(dest, &rec) {
            eprintln!("iolab: {e}");
            return 1;
        }
    }
    if let Some(e) = &rec.error {
        let errors = rec.results.as_ref().map_or(0, |r| r.total.errors);
        if job.continue_on_error && errors > 0 {
            eprintln!("iolab: {errors} I/O errors counted; the first: {e}")
        } else {
            eprintln!("iolab: {e}")
        }
    }
    if let Some(m) = not_restored {
        eprintln!("iolab: {m}");
        return 1;
    }
    // With --continue-on-error, errors are counted results, not a failed run.
    match rec.status.as_str() {
        "failed" => 1,
        "interrupted" => 130,
        _ => 0,
    }
}
