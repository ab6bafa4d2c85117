//! The file-set workload (issue 30, IISWC'19 Fig 23): a set of files made once in a fresh
//! directory iolab owns, their creation measured apart, then each file opened, transferred whole
//! through the job's interface and closed, in sequential or random order, with latency per I/O
//! (the run's recorder) and per file (open to close, its own histogram).
//!
//! A loop of its own, beside the shared hot loop: the data I/Os go through the interface's
//! `submit`/`reap` exactly as there, but each file's open, fsync and close are system calls of
//! the workload, made between them. The interface is set up once over one descriptor number,
//! and each file is put behind that number while it is open (`dup3`), so an interface that
//! reads its descriptors at each submission (psync, pvsync2, posix-aio, libaio, io_uring
//! without registered files) moves each file's I/O; io_uring's registered files bind the file
//! at set-up and are refused with a file set (`plan::fileset`).
use super::clock::Clock;
use super::hotloop::FailedIo;
use super::recorder::{new_histogram, Direction, Recorder};
use super::{Cancel, EngineError, EngineOutput, ProgressFn, WindowHooks};
use crate::interfaces::memory::AlignedBuf;
use crate::interfaces::{self, Completion, Interface, InterfaceKind, IoInterface, Request};
use crate::plan::fileset::{FileOrder, Fsync};
use crate::plan::{Budget, Job};
use crate::rng::Rng;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// What one phase did to the set's files: how many, their bytes, how long it took, and each
/// file's latency (its `ios` are files; `bytes` the files' bytes).
pub struct FilePhase {
    pub seconds: f64,
    pub files: Direction,
}

impl FilePhase {
    fn new() -> FilePhase {
        FilePhase { seconds: 0.0, files: Direction { ios: 0, bytes: 0, errors: 0, min_ns: u64::MAX, max_ns: 0, lat: new_histogram() } }
    }

    fn file_done(&mut self, bytes: u64, ns: u64) {
        let d = &mut self.files;
        d.ios += 1;
        d.bytes += bytes;
        d.min_ns = d.min_ns.min(ns);
        d.max_ns = d.max_ns.max(ns);
        d.lat.saturating_record(ns.max(1));
    }
}

/// The measured phase: the run's I/O (as any run's engine hands it back), the files it visited
/// and the fsyncs it made.
pub struct Measured {
    pub engine: EngineOutput,
    pub files: FilePhase,
    pub fsyncs: u64,
}

/// The directory a file set lives in, made fresh by iolab in the directory the job names, and
/// removed with its files when dropped (at the run's end, on an error return, after Ctrl-C).
pub struct SetDir {
    pub path: PathBuf,
    parent: OwnedFd,
    name: CString,
    fd: OwnedFd,
    /// The files made so far, in the set's order.
    names: Vec<CString>,
    pub sizes: Vec<u64>,
}

fn cstr(s: &str) -> CString {
    CString::new(s).expect("no NUL in a name iolab makes")
}

fn last_error(what: &str) -> EngineError {
    EngineError::FileSet(format!("{what}: {}", std::io::Error::last_os_error()))
}

impl SetDir {
    /// A new directory `iolab-fileset-<pid>-<random>` under `parent`, which must be a directory
    /// and not a link (opened O_DIRECTORY|O_NOFOLLOW, so one swapped in since the checks is
    /// refused too); the new one is made with mkdir (which never reuses what exists) and opened
    /// the same way. Nothing is followed through a link planted by others.
    pub fn make(parent: &Path, sizes: Vec<u64>) -> Result<SetDir, EngineError> {
        use std::os::unix::ffi::OsStrExt;
        let p = CString::new(parent.as_os_str().as_bytes())
            .map_err(|_| EngineError::FileSet(format!("{}: a NUL in the path", parent.display())))?;
        let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: a valid C string; the descriptor is owned at once.
        let pfd = unsafe { libc::open(p.as_ptr(), flags) };
        if pfd < 0 {
            return Err(last_error(&format!("{}: cannot open the directory", parent.display())));
        }
        // SAFETY: pfd is a descriptor just opened and owned by nobody else.
        let parent_fd = unsafe { OwnedFd::from_raw_fd(pfd) };
        let mut tag = [0u8; 8];
        Rng::new(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)).fill(&mut tag);
        let name = format!("iolab-fileset-{}-{}", std::process::id(), tag.iter().map(|b| format!("{b:02x}")).collect::<String>());
        let c = cstr(&name);
        // SAFETY: a live descriptor and a valid C string.
        if unsafe { libc::mkdirat(parent_fd.as_raw_fd(), c.as_ptr(), 0o700) } != 0 {
            return Err(last_error(&format!("{}: cannot make the file set's directory {name}", parent.display())));
        }
        // SAFETY: as above.
        let fd = unsafe { libc::openat(parent_fd.as_raw_fd(), c.as_ptr(), flags) };
        if fd < 0 {
            let e = last_error(&format!("{}/{name}: cannot open the directory just made", parent.display()));
            // SAFETY: as above; removes the empty directory just made.
            unsafe { libc::unlinkat(parent_fd.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) };
            return Err(e);
        }
        // SAFETY: fd was just opened and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(SetDir { path: parent.join(&name), parent: parent_fd, name: c, fd, names: Vec::new(), sizes })
    }

    /// The set's total bytes.
    pub fn bytes(&self) -> u64 {
        self.sizes.iter().sum()
    }

    fn open(&self, i: usize, flags: libc::c_int) -> RawFd {
        // SAFETY: a live directory descriptor and a valid C string.
        unsafe { libc::openat(self.fd.as_raw_fd(), self.names[i].as_ptr(), flags | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0o600) }
    }

    /// The creation phase, measured apart from the run: each file made (O_CREAT|O_EXCL, never
    /// through a link), written whole with seeded incompressible data, and closed; then the file
    /// system synced (`syncfs`, inside the phase's time) and the set's pages dropped from the
    /// page cache (outside it), so the measured phase starts from the device.
    pub fn create(&mut self, clock: &Clock, seed: u64, cancel: Cancel) -> Result<FilePhase, EngineError> {
        let mut phase = FilePhase::new();
        let chunk = self.sizes.iter().copied().max().unwrap_or(0).min(1 << 20) as usize;
        let mut data = vec![0u8; chunk.max(1)];
        Rng::new(seed).fill(&mut data);
        let start = clock.now();
        for i in 0..self.sizes.len() {
            if cancel.is_cancelled() {
                return Err(EngineError::FileSet("interrupted while creating the file set; nothing was measured".to_string()));
            }
            self.names.push(cstr(&format!("f{i:09}")));
            let t0 = clock.now();
            let fd = self.open(i, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL);
            if fd < 0 {
                self.names.pop();
                return Err(last_error(&format!("{}: cannot create file {i} of the set", self.path.display())));
            }
            // SAFETY: fd was just opened and is owned by nobody else.
            let file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
            let mut left = self.sizes[i];
            while left > 0 {
                let n = left.min(data.len() as u64) as usize;
                std::os::unix::fs::FileExt::write_all_at(&file, &data[..n], self.sizes[i] - left)
                    .map_err(|e| EngineError::FileSet(format!("{}: writing file {i} of the set: {e}", self.path.display())))?;
                left -= n as u64;
            }
            drop(file);
            phase.file_done(self.sizes[i], clock.now() - t0);
        }
        // SAFETY: a live descriptor.
        if unsafe { libc::syncfs(self.fd.as_raw_fd()) } != 0 {
            return Err(last_error(&format!("{}: syncing the file set", self.path.display())));
        }
        phase.seconds = (clock.now() - start) as f64 / 1e9;
        for i in 0..self.names.len() {
            let fd = self.open(i, libc::O_RDONLY);
            if fd >= 0 {
                // SAFETY: fd was just opened; advice only, then closed.
                unsafe {
                    libc::posix_fadvise(fd, 0, 0, libc::POSIX_FADV_DONTNEED);
                    libc::close(fd);
                }
            }
        }
        Ok(phase)
    }
}

impl Drop for SetDir {
    fn drop(&mut self) {
        for n in &self.names {
            // SAFETY: a live descriptor and valid C strings; failures leave a file behind, no more.
            unsafe { libc::unlinkat(self.fd.as_raw_fd(), n.as_ptr(), 0) };
        }
        // SAFETY: as above.
        unsafe { libc::unlinkat(self.parent.as_raw_fd(), self.name.as_ptr(), libc::AT_REMOVEDIR) };
    }
}

/// The measured phase through the job's interface (those that do I/O on files and bind no
/// descriptor at set-up).
pub fn run(job: &Job, set: &SetDir, cancel: Cancel, progress: ProgressFn, hooks: &mut dyn WindowHooks) -> Result<Measured, EngineError> {
    use interfaces::{io_uring::Uring, libaio::Libaio, posixaio::PosixAio, psync::Psync, pvsync2::Pvsync2};
    match job.io.interface {
        InterfaceKind::Psync => measure::<Psync>(job, set, cancel, progress, hooks),
        InterfaceKind::Pvsync2 => measure::<Pvsync2>(job, set, cancel, progress, hooks),
        InterfaceKind::PosixAio => measure::<PosixAio>(job, set, cancel, progress, hooks),
        InterfaceKind::Libaio => measure::<Libaio>(job, set, cancel, progress, hooks),
        InterfaceKind::IoUring => measure::<Uring>(job, set, cancel, progress, hooks),
        other => Err(EngineError::FileSet(format!("-i {other} cannot run a file set"))),
    }
}

/// One request in flight, and when it was submitted.
#[derive(Clone, Copy, Default)]
struct Slot {
    req: Request,
    submit_ns: u64,
}

/// Where the measured phase is: the clock, the budget, the recorder and what ended it.
struct Phase<'a> {
    clock: Clock,
    start: u64,
    end: Option<u64>,
    rec: Recorder,
    next_second_at: u64,
    first_error: Option<FailedIo>,
    stopping: bool,
    continue_on_error: bool,
    cancel: Cancel<'a>,
    progress: ProgressFn<'a>,
    next_report: u64,
    ios: u64,
}

impl<'a> Phase<'a> {
    /// The phase begun at `start` (the window open): the budget's end, a recorder of one
    /// target over the budget's seconds (a day for a count), the first second and report due.
    fn new(job: &Job, clock: Clock, start: u64, cancel: Cancel<'a>, progress: ProgressFn<'a>) -> Phase<'a> {
        let series = job.timing.budget.seconds().map_or(86_400, |s| s.ceil() as usize + 2);
        Phase {
            clock,
            start,
            end: job.timing.budget.seconds().map(|s| start + (s * 1e9) as u64),
            rec: Recorder::new(series, 1, job.workload.bs),
            next_second_at: start + 1_000_000_000,
            first_error: None,
            stopping: false,
            continue_on_error: job.policy.continue_on_error,
            cancel,
            progress,
            next_report: start + 1_000_000_000,
            ios: 0,
        }
    }

    /// The phase ended at `end`: the run's I/O as any run's engine hands it back, the files
    /// visited (timed over the window) and the fsyncs made.
    fn summary(mut self, end: u64, mut files: FilePhase, fsyncs: u64, interrupted: bool, ended_by_time: bool) -> Measured {
        files.seconds = (end - self.start) as f64 / 1e9;
        self.rec.finish();
        let engine = EngineOutput {
            rec: self.rec,
            window_s: files.seconds,
            interrupted,
            first_error: self.first_error,
            clock: self.clock.info(),
            verified_reads: 0,
            verified_written: 0,
            verify_mismatches: 0,
            ended_by_time,
            started_unix_s: 0.0,
            threads_applied: Vec::new(),
            steadystate: None,
        };
        Measured { engine, files, fsyncs }
    }
}

impl Phase<'_> {
    /// A completion: recorded in its second, or counted as an error (stopping the run unless
    /// errors are counted).
    fn complete(&mut self, slot: &Slot, result: i64, now: u64, file: usize) {
        let r = &slot.req;
        if result != r.len as i64 {
            self.rec.error(r.write);
            if self.first_error.is_none() {
                let what = if result < 0 { interfaces::error_text(result) } else { format!("short {result} of {} bytes", r.len) };
                let what = format!("{what} (file {file} of the set)");
                self.first_error = Some(FailedIo { file: 0, offset: r.offset, write: r.write, errno: interfaces::errno_of(result), what });
            }
            self.stopping |= !self.continue_on_error;
            return;
        }
        if now >= self.next_second_at {
            let second = (now - self.start) / 1_000_000_000;
            self.rec.at_second(second as usize);
            self.next_second_at = self.start + (second + 1) * 1_000_000_000;
        }
        self.rec.record(r.write, 0, now - slot.submit_ns);
        self.ios += 1;
    }
}

/// The measured phase over the set: set up (the buffers and the descriptor the interface is
/// set up over, `Rig`), the window opened, then passes over the set's files in its order until
/// the budget is spent, then the summary.
fn measure<T: Interface<Handle = ()>>(
    job: &Job,
    set: &SetDir,
    cancel: Cancel,
    progress: ProgressFn,
    hooks: &mut dyn WindowHooks,
) -> Result<Measured, EngineError> {
    let fileset = job.fileset.as_ref().ok_or_else(|| EngineError::FileSet("no file set in the job".into()))?;
    let write = job.workload.rw.writes(job.workload.write_mix);
    let Rig { bufs, null, slot_fd: _slot_fd, fds, flags } = Rig::new::<T>(job, write)?;
    let mut io = T::open(&super::setup_of(job, &fds, &bufs, None), &())
        .map_err(|e| EngineError::Prepare(format!("{}: setup failed: {e}", job.io.interface)))?;
    let clock = Clock::calibrate();
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    hooks.window_start(&[tid]);
    let start = clock.now();
    let mut ph = Phase::new(job, clock, start, cancel, progress);
    let mut files = FilePhase::new();
    let mut fsyncs = 0u64;
    let mut order: Vec<usize> = (0..set.sizes.len()).collect();
    let mut order_rng = Rng::for_thread(job.workload.seed, 1);
    let mut next_tick = start + 20_000_000;
    let (mut bytes_done, mut interrupted) = (0u64, false);
    // Set before every check of the budget, the only way out of the passes.
    let mut ended_by_time: bool;
    let result = 'passes: loop {
        if fileset.file_order == FileOrder::Random {
            // A new shuffled order each pass (Fisher-Yates): every file once per pass.
            for i in (1..order.len()).rev() {
                order.swap(i, order_rng.below(i as u64 + 1) as usize);
            }
        }
        for &f in &order {
            let now = ph.clock.now();
            // The time limit, or the count (a time with a count: whichever comes first).
            ended_by_time = ph.end.is_some_and(|e| now >= e);
            let spent = ended_by_time
                || match job.timing.budget {
                    Budget::Seconds(_) => false,
                    Budget::Ios(n) | Budget::SecondsOrIos { ios: n, .. } => ph.ios >= n,
                    Budget::Bytes(b) | Budget::SecondsOrBytes { bytes: b, .. } => bytes_done >= b,
                };
            if ph.cancel.is_cancelled() {
                interrupted = true;
            }
            if spent || interrupted || ph.stopping {
                break 'passes Ok(());
            }
            if now >= next_tick {
                hooks.window_tick();
                next_tick = now + 20_000_000;
            }
            if now >= ph.next_report {
                ph.next_report += 1_000_000_000;
                let total = ph.end.map(|e| (e - start) as f64 / 1e9);
                (ph.progress)((now - start) as f64 / 1e9, total, ph.ios, false);
            }
            match one_file(&mut io, &mut ph, set, f, flags, &fds, null.as_raw_fd(), &bufs, job, fileset.fsync == Fsync::Each) {
                Ok(Some((bytes, ns, synced))) => {
                    files.file_done(bytes, ns);
                    bytes_done += bytes;
                    fsyncs += synced;
                }
                Ok(None) => {}
                Err(e) => break 'passes Err(e),
            }
        }
    };
    if result.is_ok() && write && fileset.fsync == Fsync::End && !interrupted {
        if let Err(e) = sync_set(set, "syncing the file set at the end") {
            hooks.window_end();
            return Err(e);
        }
        fsyncs += 1;
    }
    let end = ph.clock.now();
    hooks.window_end();
    result?;
    Ok(ph.summary(end, files, fsyncs, interrupted, ended_by_time))
}

/// What the measured phase runs over: the I/O buffers (`bs` x `qd`, filled from the seed), the
/// descriptor number the interface is set up over (a duplicate of /dev/null until a file is put
/// behind it, and again after each file's close) and the flags each file is opened with.
struct Rig {
    bufs: AlignedBuf,
    null: std::fs::File,
    /// Owns `fds[0]`.
    slot_fd: OwnedFd,
    fds: [RawFd; 1],
    flags: libc::c_int,
}

impl Rig {
    fn new<T: Interface<Handle = ()>>(job: &Job, write: bool) -> Result<Rig, EngineError> {
        let (bs, qd) = (job.workload.bs, job.workload.qd as usize);
        let bufs = AlignedBuf::new(bs as usize * qd, T::buffer_memory(&job.io)).map_err(EngineError::Prepare)?;
        let mut rng = Rng::for_thread(job.workload.seed, 0);
        // SAFETY: the buffer region is bs * qd bytes, owned here.
        rng.fill(unsafe { std::slice::from_raw_parts_mut(bufs.ptr, bs as usize * qd) });
        let null = std::fs::File::open("/dev/null").map_err(|e| EngineError::Prepare(format!("cannot open /dev/null: {e}")))?;
        // SAFETY: a live descriptor; the duplicate is owned at once.
        let slot_fd = unsafe { libc::fcntl(null.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if slot_fd < 0 {
            return Err(last_error("cannot duplicate /dev/null"));
        }
        // SAFETY: slot_fd was just made and is owned by nobody else.
        let slot_fd = unsafe { OwnedFd::from_raw_fd(slot_fd) };
        let fds = [slot_fd.as_raw_fd()];
        let mut flags = if write { libc::O_WRONLY } else { libc::O_RDONLY };
        if job.io.direct {
            flags |= libc::O_DIRECT;
        }
        Ok(Rig { bufs, null, slot_fd, fds, flags })
    }
}

/// `syncfs` of the set's file system; Err says `what` failed.
fn sync_set(set: &SetDir, what: &str) -> Result<(), EngineError> {
    // SAFETY: a live descriptor of the set's directory, on the set's file system.
    if unsafe { libc::syncfs(set.fd.as_raw_fd()) } != 0 {
        return Err(last_error(&format!("{}: {what}", set.path.display())));
    }
    Ok(())
}

/// One file: opened and put behind the interface's descriptor, transferred whole in I/Os of
/// `bs` (up to `qd` in flight), fsynced where asked, closed. Its bytes, open-to-close time and
/// fsyncs; None when an I/O failed (the file is not counted as transferred).
#[allow(clippy::too_many_arguments)]
fn one_file<T: IoInterface>(
    io: &mut T,
    ph: &mut Phase,
    set: &SetDir,
    f: usize,
    flags: libc::c_int,
    fds: &[RawFd; 1],
    null: RawFd,
    bufs: &AlignedBuf,
    job: &Job,
    fsync_each: bool,
) -> Result<Option<(u64, u64, u64)>, EngineError> {
    let (bs, qd) = (job.workload.bs, job.workload.qd as usize);
    let write = flags & libc::O_ACCMODE == libc::O_WRONLY;
    let t0 = ph.clock.now();
    let fd = set.open(f, flags);
    if fd < 0 {
        return Err(last_error(&format!("{}: cannot open file {f} of the set", set.path.display())));
    }
    // SAFETY: both descriptors are live; the file now sits behind the interface's number too.
    let put = unsafe { libc::dup3(fd, fds[0], libc::O_CLOEXEC) };
    // SAFETY: fd was opened above and is closed once; the file stays open behind fds[0].
    unsafe { libc::close(fd) };
    if put < 0 {
        return Err(last_error("cannot put the file behind the interface's descriptor"));
    }
    let blocks = set.sizes[f] / bs;
    let mut slots = vec![Slot::default(); qd];
    let mut free: Vec<u32> = (0..qd as u32).rev().collect();
    let mut pending: Vec<Request> = Vec::with_capacity(qd);
    let mut done = vec![Completion::default(); qd];
    let (mut next, mut inflight, mut failed) = (0u64, 0usize, false);
    let errors_before = ph.rec.read.errors + ph.rec.write.errors;
    let batch = job.workload.batch_submit as usize;
    let outcome = loop {
        while next < blocks && !ph.stopping && pending.len() < batch {
            let Some(tag) = free.pop() else { break };
            // SAFETY: slot `tag` owns bytes [tag*bs, (tag+1)*bs) of the buffer region.
            let buf = unsafe { bufs.ptr.add(tag as usize * bs as usize) };
            let req = Request { tag, write, file: 0, offset: next * bs, len: bs as u32, buf };
            slots[tag as usize].req = req;
            pending.push(req);
            next += 1;
        }
        if !pending.is_empty() {
            let now = ph.clock.now();
            for r in &pending {
                slots[r.tag as usize].submit_ns = now;
            }
            match io.submit(&pending) {
                Ok(n) => {
                    inflight += n;
                    pending.drain(..n);
                }
                Err(e) => break Err(EngineError::Io(format!("submission failed: {e}"))),
            }
        }
        if inflight == 0 {
            if pending.is_empty() && (next >= blocks || ph.stopping) {
                break Ok(());
            }
            continue;
        }
        let can_issue = next < blocks && !ph.stopping && !free.is_empty() && pending.is_empty();
        let min = if can_issue { 0 } else { inflight.min(job.workload.batch_reap as usize) };
        let n = match io.reap(min, &mut done) {
            Ok(n) => n,
            Err(e) => break Err(EngineError::Io(format!("reaping completions failed: {e}"))),
        };
        if n == 0 {
            continue;
        }
        let now = ph.clock.now();
        for c in &done[..n] {
            let slot = slots[c.tag as usize];
            free.push(c.tag);
            inflight -= 1;
            ph.complete(&slot, c.result, now, f);
        }
        failed = ph.rec.read.errors + ph.rec.write.errors > errors_before;
    };
    let mut synced = 0;
    if outcome.is_ok() && fsync_each && !failed {
        // SAFETY: a live descriptor.
        if unsafe { libc::fsync(fds[0]) } != 0 {
            let e = std::io::Error::last_os_error();
            ph.rec.error(true);
            if ph.first_error.is_none() {
                let what = format!("fsync failed: {e} (file {f} of the set)");
                ph.first_error = Some(FailedIo { file: 0, offset: 0, write: true, errno: e.raw_os_error(), what });
            }
            ph.stopping |= !ph.continue_on_error;
            failed = true;
        } else {
            synced = 1;
        }
    }
    // The close: /dev/null put back behind the number drops the file's last reference.
    // SAFETY: both descriptors are live.
    let closed = unsafe { libc::dup3(null, fds[0], libc::O_CLOEXEC) };
    let t1 = ph.clock.now();
    outcome?;
    if closed < 0 {
        return Err(last_error("closing a file of the set"));
    }
    Ok((!failed && next == blocks).then_some((set.sizes[f], t1 - t0, synced)))
}
