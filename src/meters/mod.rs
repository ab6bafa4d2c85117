//! Meters: what a run cost and where that cost landed, sampled at the start and end of the
//! measured window (never inside the hot loop). CPU by thread class and system-wide, context
//! switches, device interrupts, device counters and perf counters.
pub mod access;
pub mod cpu;
pub mod diskstat;
pub mod error;
pub mod flame;
pub mod interrupts;
pub mod perf;
pub mod placement;
pub mod procstat;
pub mod profile;
pub mod ring;
pub mod server;
pub mod stages;
pub mod tasks;
pub mod tracefs;

use crate::device::sysinfo::{sysfs_disk_for, TargetInfo};
use crate::engine::WindowHooks;
use diskstat::DiskStat;
pub use error::MetersError;
use interrupts::IrqLine;
use perf::{CounterSet, CounterValues};
use procstat::SystemCpu;
use serde::Serialize;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use tasks::TaskSample;

/// Where a target's I/O lands: the disk whose counters to read and the controller whose
/// interrupts to count.
#[derive(Clone, Debug, Default)]
pub struct DevicePath {
    /// The device iolab submits to (loop0, nvme0n1, vda1...).
    pub device: Option<String>,
    pub stat_path: Option<PathBuf>,
    /// The device that raises interrupts (vda behind a loop file, or the device itself).
    pub irq_device: Option<String>,
    pub controller: Option<String>,
    /// The interrupts are those of the disk under a loop device's backing file: they count the
    /// backing file's I/O, not how the loop device completes (its worker thread does that).
    pub behind_loop: bool,
}

fn sysfs_of_dev(dev: u64) -> Option<(PathBuf, Option<String>)> {
    sysfs_disk_for(libc::major(dev), libc::minor(dev))
}

/// Find the device behind a target: itself (or its partition) for block devices, the
/// filesystem's device for files, through loop devices to their backing file's device, and
/// for an NVMe generic character device its namespace's block device.
pub(crate) fn device_path(path: &Path) -> DevicePath {
    let Ok(meta) = std::fs::metadata(path) else { return DevicePath::default() };
    if meta.file_type().is_char_device() {
        // An NVMe generic device: its namespace's block device has the same queue and controller.
        // Its passthrough commands are not in the disk's stat unless queue/iostats_passthrough
        // (Linux 6.14+) says so: then there is no device count to compare with.
        return match crate::device::nvme::block_device_of(path) {
            Ok(b) => {
                let mut d = device_path(&b);
                let counted =
                    d.stat_path.as_deref().and_then(|s| std::fs::read_to_string(s.with_file_name("queue/iostats_passthrough")).ok());
                if counted.as_deref().map(str::trim) != Some("1") {
                    d.stat_path = None;
                }
                d
            }
            Err(_) => DevicePath::default(),
        };
    }
    let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    let Some((disk, part)) = sysfs_of_dev(dev) else { return DevicePath::default() };
    let name = disk.file_name().map(|n| n.to_string_lossy().into_owned());
    let stat_path = Some(match &part {
        Some(p) => disk.join(p).join("stat"),
        None => disk.join("stat"),
    });
    let mut out = DevicePath {
        device: part.clone().or(name.clone()),
        stat_path,
        irq_device: name.clone(),
        controller: interrupts::controller_of(&disk),
        behind_loop: false,
    };
    // A loop device raises no interrupts: follow it to the device holding its backing file.
    if let Ok(backing) = std::fs::read_to_string(disk.join("loop/backing_file")) {
        let inner = device_path(Path::new(backing.trim()));
        out.irq_device = inner.irq_device;
        out.controller = inner.controller;
        out.behind_loop = true;
    }
    out
}

/// One meter of the measured window: opened before it (`Meters::new`, `Meters::with_profile`),
/// started and stopped at the window's edges by the engine's coordinating thread, ticked in
/// between (never inside the hot loop), and adding what it measured to the run's [`Measured`].
/// Adding a meter is an implementation of this and one push in `Meters::new` or `with_profile`.
pub trait WindowMeter {
    /// The window begins; `workload_tids` are the worker threads.
    fn start(&mut self, workload_tids: &[i32]);
    /// About every few ms inside the window, on the coordinating thread.
    fn tick(&mut self) {}
    fn stop(&mut self);
    /// Add what was measured, given iolab's completions per target over the window. The
    /// meters add in their start order, the CPU and device meter first making `cost`.
    fn add_to(&mut self, measured: &mut Measured, ios_per_target: &[u64]);
}

/// What the meters measured over the window, each adding its part.
#[derive(Default)]
pub struct Measured {
    /// Where the cost landed; None when the window never started.
    pub cost: Option<Cost>,
    /// iolab's process rusage between the window's two samples.
    pub rusage: cpu::Rusage,
    /// Seconds between the window's two samples: what `rusage` covers, which is longer than
    /// the results window on a short run (97 610 "cores" on 1 ms when divided by that).
    pub window_s: Option<f64>,
    /// The energy measured over the window (None when not asked for or the window never started).
    pub energy: Option<crate::energy::EnergyReport>,
    /// Where the workers and SQPOLL threads ran over the window.
    pub placement: Vec<placement::ThreadPlacement>,
}

/// The window's meters, in the order they start: where the threads run, CPU time and device
/// counters (the window's two samples), energy, perf counters, then with `--profile` the layer
/// sampler and the stage tracer. They stop in the reverse order, so each meter's window holds
/// those started after it: the perf counters and the profilers closest to the workload's own
/// window, the CPU and device samples around them (the energy sources' threads start and stop
/// inside those samples).
pub struct Meters {
    meters: Vec<Box<dyn WindowMeter>>,
    ncpu: usize,
    /// The sysctls lowered for profiling (journaled; put back by `restore_settings` or on drop).
    sysctls: Option<access::Sysctls>,
}

impl Meters {
    /// `energy`: the sources to sample (None: measure no energy).
    pub fn new(targets: &[TargetInfo], energy: Option<&crate::energy::EnergyConfig>) -> Meters {
        let ncpu = crate::host::online_cpus();
        let mut meters: Vec<Box<dyn WindowMeter>> = vec![Box::new(Placement::default()), Box::new(CpuAndDevices::new(targets, ncpu))];
        if let Some(cfg) = energy {
            meters.push(Box::new(Energy::Prepared(crate::energy::PreparedEnergy::prepare(cfg))));
        }
        meters.push(Box::new(PerfCounters { ncpu, running: None, values: None }));
        Meters { meters, ncpu, sysctls: None }
    }

    /// Sample every CPU's call chains over the window (`--profile layers`) and trace every
    /// request through the stack (`--profile stages`, tracefs mounted where `system` says); opened
    /// now, before the window, so a refusal is known and the window only enables the events. The
    /// sysctls the kernel wanted lower for them stay lowered until `restore_settings`.
    pub(crate) fn with_profile(mut self, asked: crate::plan::profile::Profile, system: &crate::settings::Settings) -> Meters {
        let mut sysctls = access::Sysctls::new(system.clone());
        if asked.layers {
            self.meters.push(Box::new(LayerProfile(profile::Profiler::open(self.ncpu, &mut sysctls))));
        }
        if asked.stages {
            self.meters.push(Box::new(StageTrace(stages::Tracer::open(&system.tracefs(), self.ncpu, &mut sysctls))));
        }
        self.sysctls = Some(sysctls);
        self
    }

    /// The sysctls profiling lowered, as the record's `settings_changed` lines.
    pub fn settings_changed(&self) -> Vec<String> {
        self.sysctls.as_ref().map(access::Sysctls::changes).unwrap_or_default()
    }

    /// Put back the sysctls profiling lowered. Err: what stays changed.
    pub(crate) fn restore_settings(&mut self) -> Result<Vec<String>, crate::settings::SettingsError> {
        self.sysctls.as_mut().map_or(Ok(Vec::new()), access::Sysctls::restore)
    }

    /// Everything measured, given iolab's completion count per target over the window.
    pub fn measured(&mut self, ios_per_target: &[u64]) -> Measured {
        let mut m = Measured::default();
        for meter in &mut self.meters {
            meter.add_to(&mut m, ios_per_target);
        }
        m
    }
}

impl WindowHooks for Meters {
    fn window_start(&mut self, workload_tids: &[i32]) {
        self.meters.iter_mut().for_each(|m| m.start(workload_tids));
    }
    fn window_tick(&mut self) {
        self.meters.iter_mut().for_each(|m| m.tick());
    }
    fn window_end(&mut self) {
        self.meters.iter_mut().rev().for_each(|m| m.stop());
    }
}

/// Whether `every` has passed since `last` (and if so, now is the last time).
fn due(last: &mut Option<std::time::Instant>, every: std::time::Duration) -> bool {
    if last.is_some_and(|t| t.elapsed() < every) {
        return false;
    }
    *last = Some(std::time::Instant::now());
    true
}

/// Our own threads are sampled this often inside the window: a few small files, not the system.
const THREAD_SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Where the workers and SQPOLL threads ran: sampled at both edges and every 100 ms.
#[derive(Default)]
struct Placement {
    sampler: placement::PlacementSampler,
    workload_tids: Vec<i32>,
    last_tick: Option<std::time::Instant>,
}

impl WindowMeter for Placement {
    fn start(&mut self, workload_tids: &[i32]) {
        self.workload_tids = workload_tids.to_vec();
        self.sampler.sample(workload_tids);
    }
    fn tick(&mut self) {
        if due(&mut self.last_tick, THREAD_SAMPLE_EVERY) {
            self.sampler.sample(&self.workload_tids);
        }
    }
    fn stop(&mut self) {
        self.sampler.sample(&self.workload_tids);
    }
    fn add_to(&mut self, measured: &mut Measured, _: &[u64]) {
        measured.placement = self.sampler.threads();
    }
}

/// The energy sources: opened before the window, sampling from their own threads inside it.
enum Energy {
    Prepared(crate::energy::PreparedEnergy),
    Running(crate::energy::EnergyMeter),
    Stopped(crate::energy::EnergyReport),
    Taken,
}

impl WindowMeter for Energy {
    fn start(&mut self, _: &[i32]) {
        if let Energy::Prepared(p) = std::mem::replace(self, Energy::Taken) {
            *self = Energy::Running(p.start());
        }
    }
    fn stop(&mut self) {
        if let Energy::Running(m) = std::mem::replace(self, Energy::Taken) {
            *self = Energy::Stopped(m.stop());
        }
    }
    fn add_to(&mut self, measured: &mut Measured, _: &[u64]) {
        if let Energy::Stopped(r) = std::mem::replace(self, Energy::Taken) {
            measured.energy = Some(r);
        }
    }
}

/// perf counters of the workload's threads and system-wide.
struct PerfCounters {
    ncpu: usize,
    running: Option<CounterSet>,
    /// (workload, system), and why hardware / system-wide counters are missing, if they are.
    values: Option<(CounterValues, CounterValues, Option<String>, Option<String>)>,
}

impl WindowMeter for PerfCounters {
    fn start(&mut self, workload_tids: &[i32]) {
        self.running = Some(CounterSet::start(workload_tids, self.ncpu));
    }
    fn stop(&mut self) {
        if let Some(c) = self.running.take() {
            let notes = (c.hardware_unavailable.clone(), c.system_unavailable.clone());
            let (w, s) = c.finish();
            self.values = Some((w, s, notes.0, notes.1));
        }
    }
    fn add_to(&mut self, measured: &mut Measured, ios_per_target: &[u64]) {
        let (Some(cost), Some((w, s, hw, sys))) = (measured.cost.as_mut(), &self.values) else { return };
        let ios = ios_per_target.iter().sum();
        cost.counters = Some(Counters {
            hardware_unavailable: hw.clone(),
            system_wide_unavailable: sys.clone(),
            workload_per_io: PerIo::of(w, ios),
            system_per_io: PerIo::of(s, ios),
            workload: w.clone(),
            system: s.clone(),
        });
    }
}

/// `--profile layers`: the sampler, or why it could not be opened.
struct LayerProfile(Result<profile::Profiler, MetersError>);

impl WindowMeter for LayerProfile {
    fn start(&mut self, _: &[i32]) {
        if let Ok(p) = &self.0 {
            p.start();
        }
    }
    fn tick(&mut self) {
        if let Ok(p) = &mut self.0 {
            p.drain();
        }
    }
    fn stop(&mut self) {
        if let Ok(p) = &mut self.0 {
            p.stop();
        }
    }
    fn add_to(&mut self, measured: &mut Measured, ios_per_target: &[u64]) {
        let Some(cost) = measured.cost.as_mut() else { return };
        cost.profile = Some(match &self.0 {
            Ok(p) => p.report(std::process::id(), ios_per_target.iter().sum()),
            Err(unavailable) => profile::ProfileResult::Unavailable { unavailable: unavailable.to_string() },
        });
    }
}

/// `--profile stages`: the tracepoints, or why they could not be opened.
struct StageTrace(Result<stages::Tracer, MetersError>);

impl WindowMeter for StageTrace {
    fn start(&mut self, workload_tids: &[i32]) {
        if let Ok(t) = &mut self.0 {
            t.start(workload_tids);
        }
    }
    fn tick(&mut self) {
        if let Ok(t) = &mut self.0 {
            t.drain();
        }
    }
    fn stop(&mut self) {
        if let Ok(t) = &mut self.0 {
            t.stop();
        }
    }
    fn add_to(&mut self, measured: &mut Measured, _: &[u64]) {
        let Some(cost) = measured.cost.as_mut() else { return };
        cost.stages = Some(match &self.0 {
            Ok(t) => t.report(std::process::id()),
            Err(unavailable) => stages::StagesResult::Unavailable { unavailable: unavailable.to_string() },
        });
    }
}

/// One sample of the window's edge: CPU time of every thread and of the system, interrupts,
/// the target devices' counters, iolab's rusage.
struct Snapshot {
    at: std::time::Instant,
    own: Vec<TaskSample>,
    own_total: (f64, f64),
    others: Vec<TaskSample>,
    other_procs: Vec<tasks::ProcSample>,
    system: Option<SystemCpu>,
    /// Each CPU's iowait, seconds by CPU number (read with `system`).
    iowait_by_cpu: std::collections::BTreeMap<u32, f64>,
    irqs: Vec<IrqLine>,
    disks: Vec<Option<DiskStat>>,
    rusage: cpu::Rusage,
}

/// CPU time by thread class and system-wide, context switches, interrupts and the target
/// devices' counters: sampled at the window's two edges (and iolab's own threads every 100 ms,
/// so threads that end inside the window still count). It makes the run's `Cost`.
struct CpuAndDevices {
    pid: i32,
    hz: f64,
    ncpu: usize,
    devices: Vec<DevicePath>,
    paths: Vec<String>,
    workload_tids: Vec<i32>,
    start: Option<Snapshot>,
    end: Option<Snapshot>,
    /// The last sample of every thread of ours seen inside the window, so threads that exit
    /// before its end (io-wq workers, AIO helpers) still count in their class.
    seen: std::collections::HashMap<i32, TaskSample>,
    last_tick: Option<std::time::Instant>,
}

impl CpuAndDevices {
    fn new(targets: &[TargetInfo], ncpu: usize) -> CpuAndDevices {
        CpuAndDevices {
            pid: std::process::id() as i32,
            hz: procstat::user_hz(),
            ncpu,
            devices: targets.iter().map(|t| device_path(Path::new(&t.path))).collect(),
            paths: targets.iter().map(|t| t.path.clone()).collect(),
            workload_tids: Vec::new(),
            start: None,
            end: None,
            seen: std::collections::HashMap::new(),
            last_tick: None,
        }
    }

    fn snapshot(&self) -> Snapshot {
        // The instant and /proc/stat first, together: the window's length pairs with its idle time.
        let at = std::time::Instant::now();
        let (system, iowait_by_cpu) = procstat::sample().map_or((None, Default::default()), |(s, c)| (Some(s), c));
        // Device counters next, before the slower walk over every task.
        let disks = self.devices.iter().map(|d| d.stat_path.as_deref().and_then(diskstat::sample)).collect();
        let irqs = interrupts::sample();
        Snapshot {
            at,
            system,
            iowait_by_cpu,
            disks,
            irqs,
            own: tasks::sample_process(self.pid, self.hz),
            own_total: tasks::process_total(self.pid, self.hz).unwrap_or((0.0, 0.0)),
            others: tasks::sample_others(self.pid, self.hz),
            other_procs: tasks::sample_other_processes(self.pid, self.hz),
            rusage: cpu::rusage_self(),
        }
    }
}

impl WindowMeter for CpuAndDevices {
    fn start(&mut self, workload_tids: &[i32]) {
        self.workload_tids = workload_tids.to_vec();
        self.start = Some(self.snapshot());
    }
    fn tick(&mut self) {
        if due(&mut self.last_tick, THREAD_SAMPLE_EVERY) {
            for t in tasks::sample_process(self.pid, self.hz) {
                self.seen.insert(t.tid, t);
            }
        }
    }
    fn stop(&mut self) {
        self.end = Some(self.snapshot());
    }
    fn add_to(&mut self, measured: &mut Measured, ios_per_target: &[u64]) {
        let (Some(a), Some(b)) = (&self.start, &self.end) else { return };
        measured.rusage = b.rusage.minus(&a.rusage);
        measured.window_s = Some(b.at.duration_since(a.at).as_secs_f64());
        measured.cost = Some(self.cost(a, b, ios_per_target));
    }
}

/// CPU time of one class of threads over the window.
#[derive(Clone, Debug, Serialize)]
pub struct ClassCost {
    /// workload, sqpoll, io_wq, aio_helpers, other_threads, exited_threads (iolab's own);
    /// rest_of_system (other processes' live threads), rest_of_system_exited
    pub class: &'static str,
    /// Threads seen in this class at the end of the window (null for exited threads).
    pub threads: Option<usize>,
    /// CPU seconds in the window (user + system).
    pub cpu_s: f64,
    /// The split, where the kernel keeps it.
    pub user_s: Option<f64>,
    pub system_s: Option<f64>,
    /// cpu_s / window.
    pub cores: f64,
    pub ns_per_io: Option<f64>,
    pub voluntary_ctx_switches: Option<u64>,
    pub involuntary_ctx_switches: Option<u64>,
    pub ctx_switches_per_io: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SystemCost {
    pub cpus: usize,
    /// Change of /proc/stat's aggregate line over the window.
    pub cpu: SystemCpu,
    /// cpus x window - idle - iowait (idle is tracked exactly; the busy fields are tick samples).
    pub busy_s: f64,
    pub busy_cores: f64,
    pub busy_ns_per_io: Option<f64>,
    /// Each CPU's iowait over the window (seconds, by CPU number; /proc/stat's `cpuN` lines): a
    /// run pinned with `--cpus` reads its own CPUs' here (io_uring's `--iowait off` keeps them
    /// at 0).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub iowait_by_cpu_s: std::collections::BTreeMap<u32, f64>,
}

/// Do the classes add up to what the whole system was busy for?
#[derive(Clone, Debug, Serialize)]
pub struct Accounting {
    pub classes_s: f64,
    pub busy_s: f64,
    /// busy - classes: interrupt time that landed on idle CPUs, tasks that exited in the
    /// window, clock-tick rounding.
    pub unaccounted_s: f64,
    pub unaccounted_fraction: Option<f64>,
    /// irq + softirq time from /proc/stat over the window. Without IRQ_TIME_ACCOUNTING, interrupt
    /// work that lands on an idle CPU (a completion IPI and its block softirq while the submitter
    /// sleeps) is charged to no task: this is the part of `unaccounted_s` that has a known home.
    pub interrupt_context_s: f64,
    /// unaccounted - interrupt context, as a fraction of busy time: what no counter explains.
    pub unexplained_fraction: Option<f64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct DeviceCost {
    pub target: String,
    pub device: Option<String>,
    /// The device whose interrupts were counted (the one behind a loop device or partition).
    pub irq_device: Option<String>,
    pub controller: Option<String>,
    /// /proc/interrupts lines of the controller's I/O queues.
    pub irq_lines: Vec<String>,
    /// Null where the device has no interrupt lines to count (loop, zram, null_blk bio mode).
    pub queue_interrupts: Option<u64>,
    /// queue_interrupts over the I/Os of every target on these lines (this one and `irq_shared_with`).
    pub queue_interrupts_per_io: Option<f64>,
    /// Other targets whose interrupts are counted on the same lines (the same disk or
    /// controller): the count above is theirs too, and is counted once.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub irq_shared_with: Vec<String>,
    /// The lines are those of the disk under a loop device's backing file (see `DevicePath`).
    pub irq_behind_loop: bool,
    /// Change of the device's /sys/block stat over the window.
    pub stat: Option<DiskStat>,
    /// Completed I/Os the device counted, and iolab's own count of completions on the target.
    pub device_ios: Option<u64>,
    pub iolab_ios: u64,
    /// device_ios - iolab_ios: other traffic, merges, splits, I/Os in flight at the window edges.
    pub difference: Option<i64>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PerIo {
    pub instructions: Option<f64>,
    pub cycles: Option<f64>,
    pub ipc: Option<f64>,
    pub cache_miss_rate: Option<f64>,
    pub task_clock_ns: Option<f64>,
    pub context_switches: Option<f64>,
    pub page_faults: Option<f64>,
}

impl PerIo {
    fn of(c: &CounterValues, ios: u64) -> PerIo {
        let per = |v: Option<u64>| v.filter(|_| ios > 0).map(|v| v as f64 / ios as f64);
        PerIo {
            instructions: per(c.instructions),
            cycles: per(c.cycles),
            ipc: match (c.instructions, c.cycles) {
                (Some(i), Some(c)) if c > 0 => Some(i as f64 / c as f64),
                _ => None,
            },
            cache_miss_rate: match (c.cache_misses, c.cache_references) {
                (Some(m), Some(r)) if r > 0 => Some(m as f64 / r as f64),
                _ => None,
            },
            task_clock_ns: per(c.task_clock_ns),
            context_switches: per(c.context_switches),
            page_faults: per(c.page_faults),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Counters {
    /// Null when hardware counters were counted; otherwise why not.
    pub hardware_unavailable: Option<String>,
    pub system_wide_unavailable: Option<String>,
    pub workload: CounterValues,
    pub workload_per_io: PerIo,
    pub system: CounterValues,
    pub system_per_io: PerIo,
}

#[derive(Clone, Debug, Serialize)]
pub struct Cost {
    pub window_s: f64,
    pub classes: Vec<ClassCost>,
    pub system: Option<SystemCost>,
    pub accounting: Option<Accounting>,
    pub devices: Vec<DeviceCost>,
    /// Every interrupt on the machine (all lines of /proc/interrupts) over the window.
    pub interrupts_total: u64,
    pub interrupts_total_per_io: Option<f64>,
    pub counters: Option<Counters>,
    /// `--profile layers`: CPU time by layer of the stack; absent when not asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<profile::ProfileResult>,
    /// `--profile stages`: each request's latency by stage of the stack; absent when not asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<stages::StagesResult>,
}

/// Which class a thread of our own process belongs to.
pub fn classify(t: &TaskSample, workload: &[i32]) -> &'static str {
    if workload.contains(&t.tid) {
        "workload"
    } else if t.comm.starts_with("iou-sqp-") {
        "sqpoll"
    } else if t.comm.starts_with("iou-wrk-") {
        "io_wq"
    } else if t.comm.starts_with("iolab-w") {
        // glibc's AIO threads are created by a worker and inherit its name.
        "aio_helpers"
    } else {
        "other_threads"
    }
}

/// The class of an io_uring kernel thread of a kernel before 5.12, which ran the SQPOLL thread
/// ("io_uring-sq") and the io-wq workers ("io_wqe_worker-N", "io_wq_manager") as kernel threads.
pub(crate) fn io_uring_kernel_thread(comm: &str) -> Option<&'static str> {
    if comm == "io_uring-sq" {
        Some("sqpoll")
    } else if comm.starts_with("io_wqe_worker") || comm == "io_wq_manager" {
        Some("io_wq")
    } else {
        None
    }
}

pub const CLASSES: [&str; 5] = ["workload", "sqpoll", "io_wq", "aio_helpers", "other_threads"];

fn class_cost(class: &'static str, ts: &[&TaskSample], window: f64, ios: u64) -> ClassCost {
    let (u, s) = ts.iter().fold((0.0, 0.0), |a, t| (a.0 + t.user_s, a.1 + t.system_s));
    let (v, n) = ts.iter().fold((0, 0), |a, t| (a.0 + t.voluntary_ctx, a.1 + t.involuntary_ctx));
    let per_io = |x: f64| (ios > 0).then(|| x / ios as f64);
    ClassCost {
        class,
        threads: Some(ts.len()),
        cpu_s: u + s,
        user_s: Some(u),
        system_s: Some(s),
        cores: if window > 0.0 { (u + s) / window } else { 0.0 },
        ns_per_io: per_io((u + s) * 1e9),
        voluntary_ctx_switches: Some(v),
        involuntary_ctx_switches: Some(n),
        ctx_switches_per_io: per_io((v + n) as f64),
    }
}
impl CpuAndDevices {
    /// The cost over the window between the samples `a` and `b`.
    fn cost(&self, a: &Snapshot, b: &Snapshot, ios_per_target: &[u64]) -> Cost {
        let window = b.at.duration_since(a.at).as_secs_f64();
        let ios: u64 = ios_per_target.iter().sum();
        let per_io = |x: f64| (ios > 0).then(|| x / ios as f64);
        let classes = self.classes(a, b, window, ios);
        let system = self.system_cost(a, b, window, ios);
        let accounting = system.as_ref().map(|s| accounting(s, &classes));
        let irq_total = interrupts::totals(&b.irqs, None).1.saturating_sub(interrupts::totals(&a.irqs, None).1);
        Cost {
            window_s: window,
            classes,
            system,
            accounting,
            devices: self.device_costs(a, b, ios_per_target),
            interrupts_total: irq_total,
            interrupts_total_per_io: per_io(irq_total as f64),
            counters: None,
            profile: None,
            stages: None,
        }
    }

    /// CPU time by class: iolab's own threads (live at the end, seen inside the window, exited),
    /// io_uring's kernel threads before Linux 5.12, the rest of the system (live and exited).
    fn classes(&self, a: &Snapshot, b: &Snapshot, window: f64, ios: u64) -> Vec<ClassCost> {
        // Threads alive at the end, plus those seen during the window that had exited by then.
        let mut last_seen: Vec<TaskSample> = b.own.clone();
        for (tid, t) in &self.seen {
            if !b.own.iter().any(|x| x.tid == *tid) {
                last_seen.push(t.clone());
            }
        }
        let own = tasks::deltas(&a.own, &last_seen);
        let mut classes: Vec<ClassCost> = CLASSES
            .iter()
            .map(|c| {
                let ts: Vec<&TaskSample> = own.iter().filter(|t| classify(t, &self.workload_tids) == *c).collect();
                class_cost(c, &ts, window, ios)
            })
            .collect();
        // Threads that ended inside the window: the process total minus its live threads.
        let (live_u, live_s) = own.iter().fold((0.0, 0.0), |acc, t| (acc.0 + t.user_s, acc.1 + t.system_s));
        let exited_u = (b.own_total.0 - a.own_total.0 - live_u).max(0.0);
        let exited_s = (b.own_total.1 - a.own_total.1 - live_s).max(0.0);
        classes.push(ClassCost {
            user_s: Some(exited_u),
            system_s: Some(exited_s),
            ..unsplit("exited_threads", exited_u + exited_s, window, ios)
        });
        let others = tasks::deltas(&a.others, &b.others);
        // Before Linux 5.12 (no IORING_FEAT_NATIVE_WORKERS) io_uring's SQPOLL thread and io-wq
        // workers are kernel threads, outside iolab's process: found by name among the system's.
        let (io_uring_kthreads, others): (Vec<TaskSample>, Vec<TaskSample>) =
            others.into_iter().partition(|t| io_uring_kernel_thread(&t.comm).is_some());
        for c in classes.iter_mut() {
            let ts: Vec<&TaskSample> = io_uring_kthreads.iter().filter(|t| io_uring_kernel_thread(&t.comm) == Some(c.class)).collect();
            if !ts.is_empty() {
                let mine: Vec<&TaskSample> = own.iter().filter(|t| classify(t, &self.workload_tids) == c.class).chain(ts).collect();
                *c = class_cost(c.class, &mine, window, ios);
            }
        }
        let other_refs: Vec<&TaskSample> = others.iter().collect();
        let mut rest = class_cost("rest_of_system", &other_refs, window, ios);
        rest.threads = Some(others.len());
        let live_rest = rest.cpu_s;
        classes.push(rest);
        // Work by other processes' threads and children that came and went inside the window:
        // the per-thread view loses them, process totals and reaped-children times keep them.
        let gone = (tasks::others_window_time(&a.other_procs, &b.other_procs) - live_rest).max(0.0);
        classes.push(unsplit("rest_of_system_exited", gone, window, ios));
        classes
    }

    fn system_cost(&self, a: &Snapshot, b: &Snapshot, window: f64, ios: u64) -> Option<SystemCost> {
        let d = b.system?.minus(&a.system?);
        // Idle and iowait are tracked exactly (NO_HZ idle accounting) while the busy fields
        // are sampled at timer ticks, which miss short bursts between idle periods. So busy
        // time is what the CPUs were not idle; the busy fields only give its split.
        let busy = (self.ncpu as f64 * window - d.idle_s - d.iowait_s).max(0.0);
        Some(SystemCost {
            cpus: self.ncpu,
            cpu: d,
            busy_s: busy,
            busy_cores: busy / window.max(1e-9),
            busy_ns_per_io: (ios > 0).then(|| busy * 1e9 / ios as f64),
            iowait_by_cpu_s: b
                .iowait_by_cpu
                .iter()
                .filter_map(|(cpu, end)| a.iowait_by_cpu.get(cpu).map(|start| (*cpu, ((end - start) * 1e6).round() / 1e6)))
                .collect(),
        })
    }

    /// Each target's device: its queue interrupts (shared with the targets on the same lines)
    /// and its counters, beside iolab's own count.
    fn device_costs(&self, a: &Snapshot, b: &Snapshot, ios_per_target: &[u64]) -> Vec<DeviceCost> {
        self.devices
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let lines: Vec<&IrqLine> = match &d.controller {
                    Some(c) => b.irqs.iter().filter(|l| interrupts::is_queue_irq(c, &l.name)).collect(),
                    None => vec![],
                };
                let count = |snap: &Snapshot, l: &IrqLine| snap.irqs.iter().find(|x| x.id == l.id).map_or(0, |x| x.total);
                let queue_interrupts =
                    (!lines.is_empty()).then(|| lines.iter().map(|l| count(b, l).saturating_sub(count(a, l))).sum::<u64>());
                let stat = match (a.disks.get(i).copied().flatten(), b.disks.get(i).copied().flatten()) {
                    (Some(x), Some(y)) => Some(y.minus(&x)),
                    _ => None,
                };
                let iolab_ios = ios_per_target.get(i).copied().unwrap_or(0);
                let device_ios = stat.map(|s| s.read_ios + s.write_ios);
                // Targets on the same controller share its lines: per I/O is over all their I/Os.
                let sharing: Vec<usize> = (0..self.devices.len())
                    .filter(|&j| j != i && queue_interrupts.is_some() && self.devices[j].controller == d.controller)
                    .collect();
                let line_ios = iolab_ios + sharing.iter().map(|&j| ios_per_target.get(j).copied().unwrap_or(0)).sum::<u64>();
                DeviceCost {
                    target: self.paths[i].clone(),
                    device: d.device.clone(),
                    irq_device: d.irq_device.clone(),
                    controller: d.controller.clone(),
                    irq_lines: lines.iter().map(|l| l.name.clone()).collect(),
                    queue_interrupts,
                    queue_interrupts_per_io: queue_interrupts.filter(|_| line_ios > 0).map(|q| q as f64 / line_ios as f64),
                    irq_shared_with: sharing.iter().map(|&j| self.paths[j].clone()).collect(),
                    irq_behind_loop: d.behind_loop,
                    stat,
                    device_ios,
                    iolab_ios,
                    difference: device_ios.map(|d| d as i64 - iolab_ios as i64),
                }
            })
            .collect()
    }
}

/// A class known only by its total CPU time (threads that exited: no split, no switches).
fn unsplit(class: &'static str, cpu_s: f64, window: f64, ios: u64) -> ClassCost {
    ClassCost {
        class,
        threads: None,
        cpu_s,
        user_s: None,
        system_s: None,
        cores: cpu_s / window.max(1e-9),
        ns_per_io: (ios > 0).then(|| cpu_s * 1e9 / ios as f64),
        voluntary_ctx_switches: None,
        involuntary_ctx_switches: None,
        ctx_switches_per_io: None,
    }
}

/// Do the classes add up to what the system was busy for?
fn accounting(s: &SystemCost, classes: &[ClassCost]) -> Accounting {
    let classes_s: f64 = classes.iter().map(|c| c.cpu_s).sum();
    let unaccounted_s = s.busy_s - classes_s;
    let interrupt_context_s = s.cpu.irq_s + s.cpu.softirq_s;
    let frac = |x: f64| (s.busy_s > 0.0).then(|| x / s.busy_s);
    Accounting {
        classes_s,
        busy_s: s.busy_s,
        unaccounted_s,
        unaccounted_fraction: frac(unaccounted_s),
        interrupt_context_s,
        unexplained_fraction: frac((unaccounted_s - interrupt_context_s).max(0.0)),
    }
}
