//! The tracer over the window: every tracepoint found, on every CPU, into one ring per CPU;
//! enabled at the window's start, drained every tick, stopped at its end, and its events matched
//! and summarized into the record's stages.
use super::decode::Decoder;
use super::matching::{completion_untraced, match_split_requests, Matching};
use super::summary::{summarize, StageProfile, StagesResult};
use super::{Event, Kind};
use crate::meters::access::{Sysctls, PARANOID_RAW_TRACEPOINTS};
use crate::meters::ring::{enable, open_event, Ring};
use crate::meters::tracefs;
use crate::meters::MetersError;
use perf_event_open_sys as sys;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use sys::bindings as b;

/// Ring data pages per CPU: 64 MiB over all CPUs, 1 to 8 MiB each. 2 MiB lost ~30 % of the
/// records of a 100 000 IOPS psync run on zram (4 records per request, ~80 bytes each: ~32 MB/s
/// on one CPU) when a busy CPU delayed the 20 ms drain; 8 MiB holds ~250 ms of that.
fn ring_pages(ncpu: usize) -> usize {
    let per_cpu = 16384 / ncpu.max(1);
    let floor_pow2 = 1usize << (usize::BITS - 1 - per_cpu.max(1).leading_zeros());
    floor_pow2.clamp(256, 2048)
}
/// Events kept at most (40 bytes each, ~40 MB): ~130 000 requests. Past it, tracing stops and
/// the record says for how long it traced.
const MAX_EVENTS: usize = 1 << 20;
/// The tracepoints on every CPU over the measured window.
pub struct Tracer {
    root: std::path::PathBuf,
    decoder: Decoder,
    /// One ring per CPU, its event the first of that CPU's.
    rings: Vec<(Ring, Kind)>,
    /// The other events, writing into their CPU's ring.
    followers: Vec<(OwnedFd, Kind)>,
    events: Vec<Event>,
    lost: u64,
    started: Option<std::time::Instant>,
    capped_after_s: Option<f64>,
    buf: Vec<u8>,
    /// The threads whose system calls are traced, and every thread of ours known so far: a
    /// thread started inside the window (glibc's POSIX AIO helpers, made at the first
    /// aio_read) joins the filter at the next drain.
    traced_tids: Vec<i32>,
    known_tids: Vec<i32>,
    /// `IOLAB_STAGES_DUMP`, looked up once rather than at every drain.
    dump: Option<std::path::PathBuf>,
}

fn is_syscall(k: Kind) -> bool {
    matches!(k, Kind::SysEnter | Kind::SysExit)
}

/// The threads of this process now.
fn own_threads() -> Vec<i32> {
    let tasks = std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten();
    tasks.filter_map(|t| t.file_name().to_str()?.parse().ok()).collect()
}

impl Tracer {
    /// Every tracepoint found, on every online CPU, into one ring per CPU; not yet enabled.
    /// Where the kernel wants `perf_event_paranoid` lower, `sysctls` lowers it.
    pub fn open(root: &Path, ncpu: usize, sysctls: &mut Sysctls) -> Result<Tracer, MetersError> {
        if !crate::settings::tracefs_mounted(root) {
            return Err(MetersError::Unavailable(format!("tracefs is not mounted at {} (mounting it needs root)", root.display())));
        }
        let decoder = Decoder::load(root);
        if decoder.by_id.is_empty() {
            return Err(MetersError::Unavailable(format!("no tracepoint of the I/O stack under {}", root.display())));
        }
        let mut ids: Vec<(u64, Kind)> = decoder.by_id.iter().map(|(&id, (k, _))| (id, *k)).collect();
        ids.sort_by_key(|x| x.0);
        let refused = |e: MetersError| e.context(|m| format!("perf_event_open of a tracepoint failed: {m}"));
        let (mut rings, mut followers) = (Vec::new(), Vec::new());
        for cpu in 0..ncpu as i32 {
            let mut leader: Option<(Ring, Kind)> = None;
            for &(id, kind) in &ids {
                // SAFETY: zero is a valid perf_event_attr; the fields the kernel needs are set below.
                let mut attr: b::perf_event_attr = unsafe { std::mem::zeroed() };
                attr.type_ = b::PERF_TYPE_TRACEPOINT;
                attr.config = id;
                attr.__bindgen_anon_1.sample_period = 1;
                attr.sample_type = (b::PERF_SAMPLE_TID | b::PERF_SAMPLE_TIME | b::PERF_SAMPLE_CPU | b::PERF_SAMPLE_RAW) as u64;
                // One clock for every CPU: perf's default (each CPU's sched_clock) drifted apart
                // between this VM's vCPUs under load, putting a completion on one CPU after the
                // system-call exit it caused on another (10 984 of 11 382 requests unmatched).
                attr.set_use_clockid(1);
                attr.clockid = libc::CLOCK_MONOTONIC;
                let fd = sysctls.open_perf(PARANOID_RAW_TRACEPOINTS, || open_event(&mut attr, -1, cpu)).map_err(refused)?;
                match &leader {
                    None => {
                        let ring = Ring::map(fd, ring_pages(ncpu))
                            .map_err(|e| MetersError::Io(format!("mapping a tracepoint ring failed: {e}")))?;
                        leader = Some((ring, kind));
                    }
                    Some((r, _)) => {
                        r.redirect(&fd).map_err(|e| MetersError::Io(format!("sharing a tracepoint ring failed: {e}")))?;
                        followers.push((fd, kind));
                    }
                }
            }
            rings.extend(leader);
        }
        Ok(Tracer {
            root: root.to_path_buf(),
            decoder,
            rings,
            followers,
            events: Vec::new(),
            lost: 0,
            started: None,
            capped_after_s: None,
            buf: Vec::new(),
            traced_tids: Vec::new(),
            known_tids: Vec::new(),
            dump: crate::meters::ring::dump_dir(DUMP),
        })
    }

    /// Every event with its kind.
    fn fds(&self) -> impl Iterator<Item = (&OwnedFd, Kind)> {
        self.rings.iter().map(|(r, k)| (r.fd(), *k)).chain(self.followers.iter().map(|(f, k)| (f, *k)))
    }

    fn enable_all(&self, on: bool) {
        self.fds().for_each(|(fd, _)| enable(fd, on));
    }

    /// Filter the system-call events to the workers' threads, and to every other thread of
    /// ours but this coordinating one (POSIX AIO's helpers live on from the unprofiled run made
    /// just before), then start.
    pub fn start(&mut self, workers: &[i32]) {
        self.known_tids = own_threads();
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        self.traced_tids = workers.to_vec();
        self.traced_tids.extend(self.known_tids.iter().filter(|t| **t != me && !workers.contains(t)));
        if let Err(e) = self.set_filter() {
            // Unfiltered, every process's system calls would flood the rings: none are traced then.
            self.decoder.missing.push(format!("raw_syscalls:sys_enter|sys_exit (the kernel refused the workers' filter: {e})"));
        }
        self.started = Some(std::time::Instant::now());
        let without_syscalls = self.without_syscalls();
        self.fds().filter(|x| !(without_syscalls && is_syscall(x.1))).for_each(|(fd, _)| enable(fd, true));
    }

    fn without_syscalls(&self) -> bool {
        self.decoder.missing.iter().any(|m| m.starts_with("raw_syscalls:"))
    }

    /// The system-call events' kernel filter: the traced threads' ids.
    fn set_filter(&self) -> Result<(), std::io::Error> {
        let filter = match self.traced_tids.as_slice() {
            [] => "common_pid == -1".to_string(),
            tids => tids.iter().map(|t| format!("common_pid == {t}")).collect::<Vec<_>>().join(" || "),
        };
        let c = std::ffi::CString::new(filter).expect("no NUL");
        let mut refused = Ok(());
        for (fd, _) in self.fds().filter(|x| is_syscall(x.1)) {
            // SAFETY: fd is a tracepoint event; the filter is a NUL-terminated string.
            if unsafe { sys::ioctls::SET_FILTER(fd.as_raw_fd(), c.as_ptr() as *mut libc::c_char) } < 0 {
                refused = Err(std::io::Error::last_os_error());
            }
        }
        refused
    }

    /// Threads of ours started since the window began (POSIX AIO's helpers) join the filter.
    fn follow_new_threads(&mut self) {
        if self.without_syscalls() {
            return;
        }
        let new: Vec<i32> = own_threads().into_iter().filter(|t| !self.known_tids.contains(t)).collect();
        if new.is_empty() {
            return;
        }
        self.known_tids.extend(&new);
        self.traced_tids.extend(&new);
        if let Err(e) = self.set_filter() {
            self.decoder.missing.push(format!("raw_syscalls of threads started in the window (the kernel refused the filter: {e})"));
        }
    }

    /// Called every ~20 ms inside the window, so the rings never fill.
    pub fn drain(&mut self) {
        if self.capped_after_s.is_some() {
            return;
        }
        self.follow_new_threads();
        for (cpu, (r, _)) in self.rings.iter().enumerate() {
            self.buf.clear();
            r.drain(&mut self.buf);
            if let Some(dir) = &self.dump {
                crate::meters::ring::dump_raw(dir, cpu, &self.buf);
            }
            self.decoder.decode(&self.buf, &mut self.events, &mut self.lost);
        }
        if self.events.len() >= MAX_EVENTS {
            self.enable_all(false);
            self.capped_after_s = self.started.map(|s| s.elapsed().as_secs_f64());
        }
    }

    /// Stop tracing and take the rest: the window has ended.
    pub fn stop(&mut self) {
        self.enable_all(false);
        self.drain();
        self.rings.clear();
        self.followers.clear();
        self.events.sort_by_key(|e| e.time);
        if let Some(dir) = &self.dump {
            copy_formats(&self.root, dir, &self.decoder);
        }
    }

    /// Match the events of our process into requests and split their latency into stages.
    pub fn report(&self, own_pid: u32) -> StagesResult {
        let Matching { requests: matched, split, unmatched } = match_split_requests(&self.events, own_pid);
        if matched.is_empty() && unmatched == 0 {
            return StagesResult::Unavailable {
                unavailable: "no request of this run reached a traced point of the kernel's I/O stack".into(),
            };
        }
        let (end_to_end, stages) = summarize(&matched);
        StagesResult::Measured(Box::new(StageProfile {
            tracepoints: self.decoder.found.clone(),
            missing_tracepoints: self.decoder.missing.clone(),
            events: self.events.len() as u64,
            lost: self.lost,
            capped_after_s: self.capped_after_s,
            requests_matched: matched.len() as u64,
            requests_unmatched: unmatched,
            requests_split: split,
            requests_completion_untraced: matched.iter().filter(|at| completion_untraced(at)).count() as u64,
            end_to_end,
            stages,
            iolab_p50_ns: None,
            iolab_mean_ns: None,
            unprofiled: None,
        }))
    }
}

/// `IOLAB_STAGES_DUMP=DIR`: the rings' raw bytes (`cpuN.raw`, by ring) and the format files
/// used, laid out as under tracefs, so a kernel's records can become a test fixture.
const DUMP: &str = "IOLAB_STAGES_DUMP";

fn copy_formats(root: &Path, dir: &Path, decoder: &Decoder) {
    for name in &decoder.found {
        let (system, event) = name.split_once(':').unwrap_or(("", ""));
        let to = tracefs::format_path(dir, system, event);
        let _ = std::fs::create_dir_all(to.parent().unwrap_or(dir));
        let _ = std::fs::copy(tracefs::format_path(root, system, event), to);
    }
}
