//! `iolab serve`: an NBD server (NetworkBlockDevice/nbd's protocol, fixed newstyle negotiation,
//! simple and structured replies) whose storage side is one of iolab's interfaces, so the
//! server's own storage stack is what two servers differ by: the kernel's (io_uring, psync) or
//! iolab's user-space NVMe driver (vfio-nvme). The target is acquired as a run acquires it (the
//! interface's target part: the same refusals, the controller taken through the journal and
//! given back), each connection opens the interface as a run's worker does.
//!
//! What it serves comes in as a [`ServeConfig`]; what it did comes back as a [`Summary`] (requests,
//! bytes, CPU by thread class and per request), so a study can start a server and store its
//! cost beside the client's results. Nothing here prints: notes come through [`ServeUi`].
pub mod backend;
pub mod client;
mod error;
pub mod proto;

use crate::cancel::Cancel;
use crate::failure::{Failure, FailureKind, Kinded};
use crate::interfaces::{Acquired, Interface, InterfaceKind, IoChoice, OpenTarget, VisitTarget};
use crate::plan::{Job, Rw};
use backend::{Backend, IoFailure, Through};
pub use error::ServeError;
use serde::Serialize;
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The interfaces a server can do its I/O through (kept with the interfaces, so a plan's file
/// set can name its server below `serve`).
pub const INTERFACES: &[InterfaceKind] = crate::interfaces::SERVED;

/// The port NBD servers listen on.
pub const NBD_PORT: u16 = 10809;

/// What to serve, and how.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub target: PathBuf,
    pub interface: InterfaceKind,
    pub listen: SocketAddr,
    /// An address other than loopback is allowed (the server authenticates no one).
    pub listen_any: bool,
    pub export: String,
    /// Clients may write (the target named as safe to overwrite); otherwise a read-only export.
    pub writable: bool,
    /// Connections served at once; more are closed as they come.
    pub connections: u32,
    /// O_DIRECT (true) or the page cache; the user-space driver has no page cache.
    pub direct: bool,
    /// -i vfio-nvme: allow VFIO's no-IOMMU mode.
    pub vfio_noiommu: bool,
}

/// What the server shows while it works.
pub trait ServeUi {
    /// Listening: the line saying where (the port chosen when 0 was asked for).
    fn ready(&mut self, _line: &str) {}
    fn note(&mut self, _line: &str) {}
}

/// CPU time of a class of threads, seconds.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Cpu {
    pub user_s: f64,
    pub system_s: f64,
}

impl Cpu {
    fn total(&self) -> f64 {
        self.user_s + self.system_s
    }
}

/// Requests served, by kind.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Requests {
    pub read: u64,
    pub write: u64,
    pub flush: u64,
    pub trim: u64,
    /// Refused or failed (answered with an error).
    pub errors: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Time spent in the storage side (the interface, fdatasync, discard), all requests.
    pub storage_ns: u64,
}

impl Requests {
    pub fn total(&self) -> u64 {
        self.read + self.write + self.flush + self.trim
    }

    fn add(&mut self, o: &Requests) {
        self.read += o.read;
        self.write += o.write;
        self.flush += o.flush;
        self.trim += o.trim;
        self.errors += o.errors;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.storage_ns += o.storage_ns;
    }
}

/// What a server did, from its start to its end.
#[derive(Clone, Debug, Serialize)]
pub struct Summary {
    pub target: String,
    pub interface: String,
    pub listen: String,
    pub export: String,
    pub writable: bool,
    pub connections: u64,
    /// Connections closed at once because `connections` were already being served.
    pub connections_refused: u64,
    pub requests: Requests,
    pub seconds: f64,
    /// The connection threads (negotiation, the socket, the interface's submit and reap).
    pub cpu_connections: Cpu,
    /// The rest of the process: the listening thread, io_uring's workers and SQPOLL threads.
    pub cpu_rest: Cpu,
    /// All of the server's CPU time per request served, microseconds.
    pub cpu_us_per_request: Option<f64>,
    /// The connection threads' CPU time per request, microseconds.
    pub connection_cpu_us_per_request: Option<f64>,
    /// Mean time in the storage side per request, microseconds.
    pub storage_us_per_request: Option<f64>,
    /// What acquiring the target changed (a controller taken from its kernel driver).
    pub changes: Vec<String>,
}

/// The export as every connection sees it.
struct Export {
    name: String,
    size: u64,
    flags: u16,
    /// Offsets and lengths must be multiples of this (O_DIRECT, or the namespace's blocks).
    align: u32,
    writable: bool,
    flush: bool,
    trim: bool,
}

/// Checks that need nothing but the configuration: Err is one line, bad input.
pub fn check(c: &ServeConfig) -> Result<(), ServeError> {
    if !INTERFACES.contains(&c.interface) {
        let names: Vec<&str> = INTERFACES.iter().map(|k| k.name()).collect();
        return Err(ServeError::Invalid(format!("iolab serve does its I/O through {}, not {}", names.join(", "), c.interface)));
    }
    if !c.listen.ip().is_loopback() && !c.listen_any {
        return Err(ServeError::Invalid(format!(
            "--listen {}: the server authenticates no one, so it listens only on loopback unless --listen-any is given",
            c.listen
        )));
    }
    if c.connections == 0 || c.connections > 64 {
        return Err(ServeError::Invalid(format!("--connections {}: serve 1 to 64 connections at once", c.connections)));
    }
    if c.export.len() > 4096 {
        return Err(ServeError::Invalid("--export: the protocol takes names of at most 4096 bytes".into()));
    }
    Ok(())
}

/// The job a server's target is acquired for: what a run with the same interface, writes and
/// depth would acquire, so the same refusals apply.
fn job_for(c: &ServeConfig) -> Job {
    let mut io = IoChoice {
        interface: c.interface,
        // The one completion mode the user-space driver takes (polling); interrupts for the rest.
        complete: c.interface.info().completes[0],
        direct: c.direct,
        ..IoChoice::default()
    };
    io.options.vfio.vfio_noiommu = c.vfio_noiommu;
    let workload = crate::plan::Workload {
        rw: if c.writable { Rw::Randwrite } else { Rw::Randread },
        bs: backend::CHUNK as u64,
        qd: c.interface.visit(Slots),
        threads: c.connections,
        ..Default::default()
    };
    let mut job = Job { io, workload, ..Default::default() };
    job.targets.paths = vec![c.target.display().to_string()];
    // Serving writable is consent to overwrite the one target named.
    if c.writable {
        job.targets.destructive = vec![c.target.display().to_string()];
    }
    job
}

struct Slots;
impl crate::interfaces::Visit for Slots {
    type Out = u32;
    fn visit<T: Interface>(self) -> u32 {
        backend::slots_for::<T>()
    }
}

/// Serve until `cancel` (SIGINT, SIGTERM): bind, acquire the target, accept connections, and
/// at the end give the target back. Bad input and refusals come before anything is changed.
pub fn serve(c: &ServeConfig, cancel: Cancel, ui: &mut dyn ServeUi) -> Result<Summary, Failure> {
    check(c)?;
    let job = job_for(c);
    let rules = c.interface.rules();
    (rules.check_job)(&job.io).map_err(Failure::invalid)?;
    (rules.machine_support)().map_err(|e| Failure::new(e.kind(), format!("{} is not usable here: {e}", c.interface)))?;
    (rules.check_kernel)(&job.io)?;
    if !c.target.exists() {
        return Err(Failure::invalid(format!("target {} does not exist: give a file or block device to serve", c.target.display())));
    }
    // The socket before the target: a port in use changes nothing.
    let listener = TcpListener::bind(c.listen).map_err(|e| Failure::invalid(format!("cannot listen on {}: {e}", c.listen)))?;
    let local = listener.local_addr().map_err(|e| Failure::failed(format!("cannot read the listening address: {e}")))?;
    listener.set_nonblocking(true).map_err(|e| Failure::failed(format!("cannot make the listening socket non-blocking: {e}")))?;
    let drivers = crate::session::generic_drivers();
    let paths = [c.target.clone()];
    let request = crate::interfaces::TargetRequest {
        io: &job.io,
        access: crate::session::access(&job, &drivers),
        paths: &paths,
        temporary: false,
        qd: job.workload.qd,
    };
    let mut acquired = c.interface.acquire(&request)?;
    let changes = acquired.changes();
    let info = acquired.describe().into_iter().next().ok_or_else(|| Failure::failed("the target part acquired no target".into()))?;
    let [target] = acquired.open_targets()[..] else {
        return Err(Failure::failed("the target part acquired more than one target".into()));
    };
    let kernel = backend::Kernel::of(target.fd);
    let align = if c.direct || kernel == backend::Kernel::None {
        info.logical_block_size.max(info.dio_offset_align.unwrap_or(0)).max(1) as u32
    } else {
        1
    };
    let commands = device_commands(&acquired);
    let (flags, flush, trim) = export_flags(c.writable, kernel, commands);
    let export = Export { name: c.export.clone(), size: target.range_len, flags, align, writable: c.writable, flush, trim };
    let mode = if c.writable { "writable" } else { "read-only" };
    ui.ready(&format!(
        "serving {} ({} bytes, {mode}) as export '{}' on {local} through {}",
        c.target.display(),
        export.size,
        export.name,
        c.interface
    ));
    for line in &changes {
        ui.note(line);
    }
    if kernel == backend::Kernel::None {
        ui.note(&commands_note(commands, c.writable));
    }
    let started = Instant::now();
    let before = crate::meters::cpu::rusage_self();
    let shared = Shared {
        export,
        io: job.io.clone(),
        target,
        limit: c.connections,
        active: AtomicU32::new(0),
        open: Mutex::new(Vec::new()),
        totals: Mutex::new(Totals::default()),
    };
    acquired_visit(&acquired, &shared, &listener, cancel, ui);
    let after = crate::meters::cpu::rusage_self().minus(&before);
    let seconds = started.elapsed().as_secs_f64();
    let released = acquired.release();
    let totals = shared.totals.into_inner().unwrap_or_else(|p| p.into_inner());
    let all = Cpu { user_s: after.user_s, system_s: after.system_s };
    let rest = Cpu { user_s: (all.user_s - totals.cpu.user_s).max(0.0), system_s: (all.system_s - totals.cpu.system_s).max(0.0) };
    let n = totals.requests.total();
    let per = |x: f64| (n > 0).then(|| x / n as f64);
    let summary = Summary {
        target: c.target.display().to_string(),
        interface: c.interface.name().to_string(),
        listen: local.to_string(),
        export: c.export.clone(),
        writable: c.writable,
        connections: totals.connections,
        connections_refused: totals.refused,
        requests: totals.requests,
        seconds,
        cpu_connections: totals.cpu,
        cpu_rest: rest,
        cpu_us_per_request: per(all.total() * 1e6),
        connection_cpu_us_per_request: per(totals.cpu.total() * 1e6),
        storage_us_per_request: per(totals.requests.storage_ns as f64 / 1e3),
        changes,
    };
    match released {
        Ok(()) => Ok(summary),
        Err(e) => Err(Failure::new(FailureKind::SettingsNotRestored, e)),
    }
}

/// What the interface can send the device itself besides reads and writes (the user-space
/// driver: what its controller's Identify data says).
fn device_commands(acquired: &Acquired) -> crate::interfaces::DeviceCommands {
    struct Commands;
    impl<'h> VisitTarget<'h> for Commands {
        type Out = crate::interfaces::DeviceCommands;
        fn visit<T: Interface>(self, target: &'h T::Target) -> Self::Out {
            use crate::interfaces::Acquire;
            T::device_commands(target.handle())
        }
    }
    acquired.visit(Commands)
}

/// The export's transmission flags, and whether it takes FLUSH and TRIM. A target the kernel
/// holds is flushed (`fdatasync`) and discarded through its one descriptor, for every
/// connection. The user-space driver offers FLUSH (NVMe Flush) only where the controller has a
/// volatile write cache and TRIM (Dataset Management, Deallocate) only where it has Dataset
/// Management: a client is never offered what the device would not do. An NVMe Flush covers
/// every write the controller completed before it, on any queue pair, so both may say
/// `CAN_MULTI_CONN`.
fn export_flags(writable: bool, kernel: backend::Kernel, device: crate::interfaces::DeviceCommands) -> (u16, bool, bool) {
    use proto::*;
    let (flush, trim) = match kernel {
        backend::Kernel::None => (device.flush, device.deallocate),
        backend::Kernel::File | backend::Kernel::BlockDevice => (true, true),
    };
    let mut f = FLAG_HAS_FLAGS | FLAG_SEND_DF;
    if !writable {
        f |= FLAG_READ_ONLY;
    }
    if flush {
        f |= FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_CAN_MULTI_CONN;
    }
    if trim && writable {
        f |= FLAG_SEND_TRIM;
    }
    (f, flush, trim)
}

/// What the user-space driver's export offers of FLUSH and TRIM, and why, in one line.
fn commands_note(d: crate::interfaces::DeviceCommands, writable: bool) -> String {
    let flush = if d.flush {
        "FLUSH offered, sent as NVMe Flush (the controller has a volatile write cache)"
    } else {
        "FLUSH not offered (the controller has no volatile write cache: a completed write is durable)"
    };
    let trim = match (d.deallocate, writable) {
        (_, false) => "TRIM not offered (read-only)".to_string(),
        (false, true) => "TRIM not offered (the controller has no Dataset Management)".to_string(),
        (true, true) => format!(
            "TRIM offered, sent as NVMe Dataset Management (Deallocate); deallocated blocks {}",
            if d.deallocated_reads_zeroes { "read as zeroes (DLFEAT)" } else { "read as anything (DLFEAT promises nothing)" }
        ),
    };
    format!("{flush}; {trim}")
}

/// What every connection thread shares.
struct Shared {
    export: Export,
    io: IoChoice,
    target: OpenTarget,
    limit: u32,
    active: AtomicU32,
    /// The sockets being served (a clone of each), shut down when the server stops.
    open: Mutex<Vec<(u64, TcpStream)>>,
    totals: Mutex<Totals>,
}

#[derive(Default)]
struct Totals {
    connections: u64,
    refused: u64,
    requests: Requests,
    cpu: Cpu,
}

/// Runs the accept loop with the interface's type over its acquired target part.
fn acquired_visit(acquired: &Acquired, shared: &Shared, listener: &TcpListener, cancel: Cancel, ui: &mut dyn ServeUi) {
    struct Run<'a, 'u> {
        shared: &'a Shared,
        listener: &'a TcpListener,
        cancel: Cancel<'a>,
        ui: &'a mut (dyn ServeUi + 'u),
    }
    impl<'h, 'a: 'h, 'u> VisitTarget<'h> for Run<'a, 'u> {
        type Out = ();
        fn visit<T: Interface>(self, target: &'h T::Target) {
            use crate::interfaces::Acquire;
            let handle = target.handle();
            let (shared, io, t) = (self.shared, &self.shared.io, &self.shared.target);
            let open = move || Through::<T>::open(io, t, handle);
            accept_loop::<Through<T>>(shared, self.listener, self.cancel, self.ui, &open);
        }
    }
    acquired.visit(Run { shared, listener, cancel, ui });
}

/// Accepts until cancelled; each connection on its own thread, at most `limit` at once. At the
/// end every open socket is shut down and its thread joined.
fn accept_loop<B: Backend>(
    shared: &Shared,
    listener: &TcpListener,
    cancel: Cancel,
    ui: &mut dyn ServeUi,
    open: &(dyn Fn() -> Result<B, ServeError> + Sync),
) {
    std::thread::scope(|s| {
        let mut next_id = 0u64;
        while !cancel.is_cancelled() {
            let mut pfd = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut pfd, 1, 100) };
            if ready <= 0 {
                continue;
            }
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    ui.note(&format!("accept failed: {e}"));
                    continue;
                }
            };
            if shared.active.load(Ordering::Acquire) >= shared.limit {
                lock(&shared.totals).refused += 1;
                ui.note(&format!("closed a connection: {} are being served (--connections)", shared.limit));
                continue;
            }
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_nodelay(true);
            let Ok(clone) = stream.try_clone() else { continue };
            let id = next_id;
            next_id += 1;
            lock(&shared.open).push((id, clone));
            shared.active.fetch_add(1, Ordering::AcqRel);
            let spawned = std::thread::Builder::new().name(format!("iolab-nbd{id}")).spawn_scoped(s, move || {
                let (requests, served) = connection(stream, &shared.export, open);
                let cpu = thread_cpu();
                let mut t = lock(&shared.totals);
                t.connections += u64::from(served);
                t.requests.add(&requests);
                t.cpu.user_s += cpu.user_s;
                t.cpu.system_s += cpu.system_s;
                drop(t);
                lock(&shared.open).retain(|(i, _)| *i != id);
                shared.active.fetch_sub(1, Ordering::AcqRel);
            });
            if let Err(e) = spawned {
                ui.note(&format!("cannot start a connection thread: {e}"));
                lock(&shared.open).retain(|(i, _)| *i != id);
                shared.active.fetch_sub(1, Ordering::AcqRel);
            }
        }
        // Stopping: every client is cut off, so every connection thread ends.
        for (_, s) in lock(&shared.open).iter() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    });
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// This thread's CPU time so far.
fn thread_cpu() -> Cpu {
    // SAFETY: ru is a valid out-pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    Cpu { user_s: tv(ru.ru_utime), system_s: tv(ru.ru_stime) }
}

/// One connection: negotiation, then requests until the client disconnects. Returns what it
/// served, and whether it reached the transmission phase.
fn connection<B: Backend>(mut s: TcpStream, export: &Export, open: &(dyn Fn() -> Result<B, ServeError> + Sync)) -> (Requests, bool) {
    let structured = match negotiate(&mut s, export) {
        Ok(Some(structured)) => structured,
        Ok(None) | Err(_) => return (Requests::default(), false),
    };
    let mut backend = match open() {
        Ok(b) => b,
        // The client's requests would all fail: end the connection rather than lie.
        Err(_) => return (Requests::default(), false),
    };
    let mut req = Requests::default();
    let _ = transmission(&mut s, export, &mut backend, structured, &mut req);
    let _ = s.shutdown(std::net::Shutdown::Both);
    (req, true)
}

/// Option haggling: Ok(Some(structured replies)) to go on to transmission, Ok(None) when the
/// client aborted or asked for another export.
fn negotiate(s: &mut TcpStream, export: &Export) -> Result<Option<bool>, proto::WireError> {
    use proto::*;
    send(s, &[&server_greeting()])?;
    let client = read_client_flags(s)?;
    let no_zeroes = client & FLAG_C_NO_ZEROES != 0;
    let mut structured = false;
    // The empty name is the default export: this one.
    let ours = |name: &str| name.is_empty() || name == export.name;
    loop {
        let o = read_option(s)?;
        let reply = |s: &mut TcpStream, kind: u32, data: &[u8]| send(s, &[&option_reply(o.option, kind, data)]);
        match o.option {
            OPT_EXPORT_NAME => {
                let name = String::from_utf8_lossy(&o.data);
                if !ours(&name) {
                    // The protocol has no error reply here: the server closes.
                    return Ok(None);
                }
                send(s, &[&export_name_reply(export.size, export.flags, no_zeroes)])?;
                return Ok(Some(structured));
            }
            OPT_ABORT => {
                let _ = reply(s, REP_ACK, &[]);
                return Ok(None);
            }
            OPT_LIST if !o.data.is_empty() => reply(s, REP_ERR_INVALID, b"NBD_OPT_LIST takes no data")?,
            OPT_LIST => {
                reply(s, REP_SERVER, &server_entry(&export.name))?;
                reply(s, REP_ACK, &[])?;
            }
            OPT_STRUCTURED_REPLY if !o.data.is_empty() => reply(s, REP_ERR_INVALID, b"NBD_OPT_STRUCTURED_REPLY takes no data")?,
            OPT_STRUCTURED_REPLY => {
                structured = true;
                reply(s, REP_ACK, &[])?;
            }
            OPT_INFO | OPT_GO => match parse_info_request(&o.data) {
                Err(e) => reply(s, REP_ERR_INVALID, e.as_bytes())?,
                Ok(r) if !ours(&r.name) => reply(s, REP_ERR_UNKNOWN, format!("no export named '{}'", r.name).as_bytes())?,
                Ok(r) => {
                    reply(s, REP_INFO, &info_export(export.size, export.flags))?;
                    if r.requests.contains(&INFO_NAME) {
                        reply(s, REP_INFO, &info_name(&export.name))?;
                    }
                    if r.requests.contains(&INFO_DESCRIPTION) {
                        reply(s, REP_INFO, &info_description("served by iolab"))?;
                    }
                    if r.requests.contains(&INFO_BLOCK_SIZE) {
                        reply(s, REP_INFO, &info_block_size(export.align, export.align.max(4096), MAX_PAYLOAD))?;
                    }
                    reply(s, REP_ACK, &[])?;
                    if o.option == OPT_GO {
                        return Ok(Some(structured));
                    }
                }
            },
            other => reply(s, REP_ERR_UNSUP, format!("option {other} is not supported").as_bytes())?,
        }
    }
}

/// Requests until NBD_CMD_DISC or the socket closes. Err: the socket failed or the client broke
/// the protocol (the connection then ends).
fn transmission(
    s: &mut TcpStream,
    export: &Export,
    backend: &mut dyn Backend,
    structured: bool,
    stats: &mut Requests,
) -> Result<(), proto::WireError> {
    use proto::*;
    let mut data: Vec<u8> = Vec::new();
    loop {
        let mut h = [0u8; REQUEST_LEN];
        match s.read_exact(&mut h) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let r = parse_request(&h)?;
        if r.kind == CMD_WRITE {
            // The payload is read whatever the answer; one larger than the server takes cannot
            // be skipped safely, so the connection ends.
            if r.len > MAX_PAYLOAD {
                return Err(WireError::Protocol(format!("a write of {} bytes, more than {MAX_PAYLOAD}", r.len)));
            }
            data.resize(r.len as usize, 0);
            s.read_exact(&mut data)?;
        }
        let in_range = r.offset.checked_add(r.len as u64).is_some_and(|end| end <= export.size);
        let aligned = r.offset % export.align as u64 == 0 && r.len % export.align == 0;
        let t = Instant::now();
        let outcome: Result<(), IoFailure> = match r.kind {
            CMD_DISC => return Ok(()),
            CMD_READ => {
                stats.read += 1;
                if r.len > MAX_PAYLOAD {
                    Err(refused(EOVERFLOW, format!("a read of {} bytes, more than {MAX_PAYLOAD}", r.len)))
                } else if !in_range {
                    Err(refused(EINVAL, "a read beyond the export's end"))
                } else if !aligned {
                    Err(refused(EINVAL, format!("offset and length must be multiples of {} bytes", export.align)))
                } else {
                    data.resize(r.len as usize, 0);
                    backend.read(r.offset, &mut data)
                }
            }
            CMD_WRITE => {
                stats.write += 1;
                if !export.writable {
                    Err(refused(EPERM, "the export is read-only (serve with --destructive to accept writes)"))
                } else if !in_range {
                    Err(refused(ENOSPC, "a write beyond the export's end"))
                } else if !aligned {
                    Err(refused(EINVAL, format!("offset and length must be multiples of {} bytes", export.align)))
                } else {
                    let w = backend.write(r.offset, &data);
                    if w.is_ok() && r.flags & CMD_FLAG_FUA != 0 && export.flush {
                        backend.flush()
                    } else {
                        w
                    }
                }
            }
            CMD_FLUSH => {
                stats.flush += 1;
                if export.flush {
                    backend.flush()
                } else {
                    Err(refused(EINVAL, "this export takes no flush"))
                }
            }
            CMD_TRIM => {
                stats.trim += 1;
                if !export.writable {
                    Err(refused(EPERM, "the export is read-only"))
                } else if !in_range {
                    Err(refused(EINVAL, "a trim beyond the export's end"))
                } else if !export.trim {
                    Ok(())
                } else {
                    backend.trim(r.offset, r.len as u64)
                }
            }
            other => Err(refused(EINVAL, format!("command {other} is not supported"))),
        };
        stats.storage_ns += t.elapsed().as_nanos() as u64;
        match &outcome {
            Ok(()) if r.kind == CMD_READ => stats.bytes_read += r.len as u64,
            Ok(()) if r.kind == CMD_WRITE => stats.bytes_written += r.len as u64,
            Ok(()) => {}
            Err(_) => stats.errors += 1,
        }
        match (outcome, structured) {
            (Ok(()), true) if r.kind == CMD_READ && r.len > 0 => {
                send(s, &[&offset_data_header(r.cookie, r.offset, r.len, true), &data[..r.len as usize]])?
            }
            (Ok(()), true) => send(s, &[&none_chunk(r.cookie)])?,
            (Ok(()), false) if r.kind == CMD_READ => send(s, &[&simple_reply(0, r.cookie), &data[..r.len as usize]])?,
            (Ok(()), false) => send(s, &[&simple_reply(0, r.cookie)])?,
            (Err(f), true) => send(s, &[&error_chunk(r.cookie, wire_errno(f.errno), &f.what)])?,
            (Err(f), false) => send(s, &[&simple_reply(wire_errno(f.errno), r.cookie)])?,
        }
    }
}

/// A request the server refuses before any I/O.
fn refused(errno: u32, what: impl Into<String>) -> IoFailure {
    IoFailure { errno: errno as i32, what: what.into() }
}

#[cfg(test)]
mod tests {
    use super::backend::Kernel;
    use super::proto::*;
    use super::*;
    use crate::interfaces::DeviceCommands;

    /// The user-space driver's export offers FLUSH and TRIM exactly where the controller's
    /// Identify data says they mean something (VWC, ONCS's Dataset Management); the kernel's
    /// exports always offer both, through the target's descriptor.
    #[test]
    fn the_exports_flags_follow_what_the_device_does() {
        let all = DeviceCommands { flush: true, deallocate: true, deallocated_reads_zeroes: true };
        let (f, flush, trim) = export_flags(true, Kernel::None, all);
        assert!(flush && trim);
        for flag in [FLAG_SEND_FLUSH, FLAG_SEND_FUA, FLAG_SEND_TRIM, FLAG_CAN_MULTI_CONN] {
            assert_ne!(f & flag, 0, "flag {flag:#x} in {f:#x}");
        }
        let (f, flush, trim) = export_flags(true, Kernel::None, DeviceCommands::default());
        assert!(!flush && !trim);
        assert_eq!(f & (FLAG_SEND_FLUSH | FLAG_SEND_FUA | FLAG_SEND_TRIM), 0, "{f:#x}");
        let (f, _, _) = export_flags(true, Kernel::None, DeviceCommands { deallocate: true, ..Default::default() });
        assert_eq!((f & FLAG_SEND_FLUSH, f & FLAG_SEND_TRIM), (0, FLAG_SEND_TRIM));
        // Read-only: no TRIM offered, whatever the device.
        let (f, _, _) = export_flags(false, Kernel::None, all);
        assert_eq!((f & FLAG_SEND_TRIM, f & FLAG_READ_ONLY), (0, FLAG_READ_ONLY));
        for k in [Kernel::File, Kernel::BlockDevice] {
            let (f, flush, trim) = export_flags(true, k, DeviceCommands::default());
            assert!(flush && trim && f & FLAG_SEND_FLUSH != 0 && f & FLAG_SEND_TRIM != 0, "{k:?}: {f:#x}");
        }
        assert!(commands_note(all, true).contains("deallocated blocks read as zeroes"));
        assert!(commands_note(DeviceCommands::default(), true).contains("FLUSH not offered"));
    }
}
