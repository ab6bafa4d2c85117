//! I/O interfaces: one file each behind [`IoInterface`] (the I/O) and [`Interface`] (its facts
//! and policy), listed once in `interface_table!`.
//!
//! Like fio's `ioengine_ops` and SPDK perf's `ns_fn_table`: an interface only moves requests to
//! the kernel and completions back. Timing, offsets, buffers and accounting live in the shared
//! hot loop (`engine::hotloop`), so every interface is measured the same way.
pub mod block_poll;
mod error;
pub mod io_uring;
pub mod libaio;
pub mod memory;
pub mod null;
pub mod nvme_passthru;
pub mod posixaio;
pub mod psync;
pub mod pvsync2;
pub mod steady;
pub mod target;
pub mod thread;
#[cfg(target_endian = "little")]
pub mod vfio_nvme;

pub use error::InterfaceError;

pub use self::io_uring::Iowait;
use crate::device::{sysinfo::TargetInfo, Target};
use crate::failure::Failure;
pub use block_poll::POLL_DELAY;
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::RawFd;
pub use target::{Acquire, Observation, OpenTarget, TargetPart, TargetRequest};
/// What the record says of a user-space driver's run (the controller, how it reached memory):
/// the record's `environment.user_space_driver`.
pub use vfio_nvme::env::DriverEnv;

/// How requests reach the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Submit {
    /// The application makes a system call per batch.
    Syscall,
    /// A kernel thread polls the submission queue (io_uring SQPOLL).
    Sqpoll,
}

/// How completions are detected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Complete {
    /// The device raises an interrupt; the application sleeps.
    Irq,
    /// Classic busy polling.
    Poll,
    /// Sleep for part of the expected latency, then poll.
    Hybrid,
}

impl Submit {
    pub fn name(self) -> &'static str {
        match self {
            Submit::Syscall => "syscall",
            Submit::Sqpoll => "sqpoll",
        }
    }
}

impl Complete {
    pub fn name(self) -> &'static str {
        match self {
            Complete::Irq => "irq",
            Complete::Poll => "poll",
            Complete::Hybrid => "hybrid",
        }
    }
}

/// How a job's I/O reaches the device: the interface, how it submits and completes, O_DIRECT or
/// the page cache, and the options only some interfaces take (each part defined in its own file,
/// gathered in [`Options`] by `interface_table!`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct IoChoice {
    pub interface: InterfaceKind,
    pub submit: Submit,
    pub complete: Complete,
    /// O_DIRECT (true) or through the page cache.
    pub direct: bool,
    /// The interfaces' own options, flattened: a stored job keeps each part's fields at its top
    /// level, as before the parts were gathered.
    #[serde(flatten)]
    pub options: Options,
}

impl Default for IoChoice {
    fn default() -> IoChoice {
        IoChoice {
            interface: InterfaceKind::Psync,
            submit: Submit::Syscall,
            complete: Complete::Irq,
            direct: true,
            options: Options::default(),
        }
    }
}

impl IoChoice {
    /// Every options part's checks on this choice (an option of another interface is refused,
    /// since it would silently do nothing).
    pub(crate) fn check_options(&self) -> Result<(), String> {
        self.options.check(self)
    }

    /// The CPUs the options pin the interface's own kernel threads to (io_uring's SQPOLL thread).
    pub(crate) fn pinned_cpus(&self) -> Vec<u32> {
        self.options.pinned_cpus()
    }
}

/// One part of the interfaces' options, defined in the file of the interface(s) that take it and
/// listed once in `interface_table!`: its command-line flags (clap), its fields in a stored job
/// (serde, flattened into [`IoChoice`]), its keys in a plan's `[options]`, and its checks.
pub trait OptionsPart: Clone + Default + std::fmt::Debug + Serialize + serde::de::DeserializeOwned + clap::Args {
    /// Its keys in a plan's `[options]`.
    const PLAN_KEYS: &'static [&'static str] = &[];
    /// Reads the value of the plan `[options]` key `key` (one of [`Self::PLAN_KEYS`]) from the
    /// plan, typed, so a wrong value names its line.
    fn plan_value<'de, A: serde::de::MapAccess<'de>>(&mut self, key: &str, _map: &mut A) -> Result<(), A::Error> {
        Err(serde::de::Error::custom(format!("no plan key {key}")))
    }
    /// Its rules on a job's choice: an option the chosen interface or mode does not use is
    /// refused, naming the flag. The line is the value: the plan's checks (and the server's)
    /// wrap it as bad input.
    fn check(&self, _io: &IoChoice) -> Result<(), String> {
        Ok(())
    }
    /// The CPU it pins a kernel thread of the interface to, if any.
    fn pinned_cpu(&self) -> Option<u32> {
        None
    }
}

/// A whole-number option a plan's `[matrix]` may sweep, defined by the options part that owns it
/// (`block_poll::POLL_DELAY`): how a value goes into a job's choice, how it reads back, and when
/// a configuration's key shows it.
pub struct SweptOption {
    pub name: &'static str,
    pub set: fn(&mut IoChoice, i64),
    pub value: fn(&IoChoice) -> i64,
    pub shown: fn(&IoChoice) -> bool,
}

word_enum! {
    /// How I/O completes: `CompletionPath.expected` and `.observed`.
    Path {
        Interrupt = "interrupt",
        Polled = "polled",
        /// Nothing shows which (no interrupt lines, a device without poll information, ...).
        Unknown = "unknown",
    }
}

/// One I/O request. `tag` names the slot (buffer and timestamp) it belongs to.
#[derive(Clone, Copy, Debug)]
pub struct Request {
    pub tag: u32,
    pub write: bool,
    pub file: u32,
    pub offset: u64,
    pub len: u32,
    pub buf: *mut u8,
}

impl Default for Request {
    fn default() -> Self {
        Request { tag: 0, write: false, file: 0, offset: 0, len: 0, buf: std::ptr::null_mut() }
    }
}

/// A finished request: bytes transferred, a negative errno, or (at or below [`DEVICE_STATUS`])
/// a status the device itself returned.
#[derive(Clone, Copy, Debug, Default)]
pub struct Completion {
    pub tag: u32,
    pub result: i64,
}

/// What a synchronous interface holds between its `submit`, which did the I/O, and the loop's
/// `reap`, which takes the one completion.
#[derive(Default)]
pub(crate) struct Held(Option<Completion>);

impl Held {
    #[inline]
    pub(crate) fn hold(&mut self, tag: u32, result: i64) -> io::Result<usize> {
        self.0 = Some(Completion { tag, result });
        Ok(1)
    }

    #[inline]
    pub(crate) fn take(&mut self, out: &mut [Completion]) -> io::Result<usize> {
        match self.0.take() {
            Some(c) => {
                out[0] = c;
                Ok(1)
            }
            None => Ok(0),
        }
    }
}

/// Completion results at or below this carry a device status rather than an errno:
/// `result = DEVICE_STATUS - status` (an NVMe status for nvme-passthru).
pub use crate::device::nvme::DEVICE_STATUS;

/// The errno of a failed completion result, if it is one (not a device status).
pub(crate) fn errno_of(result: i64) -> Option<i32> {
    (result < 0 && result > DEVICE_STATUS).then_some(-result as i32)
}

/// A failed completion result in words.
pub(crate) fn error_text(result: i64) -> String {
    if result <= DEVICE_STATUS {
        crate::device::nvme::status_text((DEVICE_STATUS - result) as u64)
    } else {
        io::Error::from_raw_os_error(-result as i32).to_string()
    }
}

/// What an interface gets once, before the hot loop: already-open files and the slot buffers.
pub struct Setup<'a> {
    pub fds: &'a [RawFd],
    /// Start of the thread's buffer region: `qd` slots of `bs` bytes, aligned.
    pub buffers: *mut u8,
    pub buffers_len: usize,
    /// Bytes per slot (the job's block size): slot `tag` starts at `buffers + tag * bs`.
    pub bs: u32,
    pub qd: u32,
    pub submit: Submit,
    pub complete: Complete,
    pub batch_submit: u32,
    /// The job's choice, with the options only some interfaces take: each interface reads its
    /// own (io_uring's ring options, null's script) and the engine names none of them.
    pub io: &'a IoChoice,
    /// The CPU this thread's SQPOLL thread is pinned to, if any (the run's placement).
    pub sq_cpu: Option<u32>,
}

/// The whole contract between the hot loop and an interface.
pub trait IoInterface: Sized {
    /// What each thread's `open` is given of the run's acquired targets besides their
    /// descriptors: nothing for most (`()`), the attached controller for the user-space driver.
    type Handle: Sync;
    /// Set up rings, contexts and registrations once.
    fn open(setup: &Setup, handle: &Self::Handle) -> io::Result<Self>;
    /// Queue (async) or perform (sync) the requests; returns how many were accepted.
    fn submit(&mut self, reqs: &[Request]) -> io::Result<usize>;
    /// Collect at least `min` completions (0 = only what is ready), at most `out.len()`.
    fn reap(&mut self, min: usize, out: &mut [Completion]) -> io::Result<usize>;
    /// An interface that drives the device itself (the user-space driver): flush the device's
    /// volatile write cache, with nothing in flight, and wait for it. None: not this interface's
    /// to do (the kernel's, through the target's descriptor). For a server's FLUSH.
    fn flush(&mut self) -> Option<io::Result<()>> {
        None
    }
    /// As `flush`: deallocate the whole blocks within `len` bytes at byte `offset` (a server's TRIM).
    fn deallocate(&mut self, _offset: u64, _len: u64) -> Option<io::Result<()>> {
        None
    }
    /// With a per-command priority (`--cmdprio`): the commands sent per direction (reads,
    /// writes) and how many carried the priority. None: this interface carries none.
    fn cmdprio_counts(&self) -> Option<([u64; 2], [u64; 2])> {
        None
    }
}

/// What an interface that drives the device itself can send it besides reads and writes, as
/// the device says (`Interface::device_commands`); the kernel's interfaces send none themselves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceCommands {
    /// A flush means something: the device has a volatile write cache.
    pub flush: bool,
    /// Ranges can be deallocated (NVMe Dataset Management).
    pub deallocate: bool,
    /// A deallocated block then reads as zeroes.
    pub deallocated_reads_zeroes: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Behaviour {
    Sync,
    Async,
}

pub use crate::device::TargetKind;

/// The interfaces `iolab serve` does its I/O through (`serve::INTERFACES`).
pub const SERVED: &[InterfaceKind] = &[InterfaceKind::IoUring, InterfaceKind::Psync, InterfaceKind::VfioNvme];

/// What most interfaces drive: files and block devices.
pub const FILES_AND_BLOCKS: &[TargetKind] = &[TargetKind::File, TargetKind::BlockDevice];

/// An interface's design point (the HotStorage'23 paper's Table 1) and its capabilities, as
/// fio's engine flags: what the rest of iolab asks instead of comparing names.
#[derive(Debug, Serialize)]
pub struct InterfaceInfo {
    pub name: &'static str,
    /// A few words after the name in `iolab run --help`'s list, where the name alone says too
    /// little.
    #[serde(skip)]
    pub note: Option<&'static str>,
    pub execution: &'static str,
    pub behaviour: Behaviour,
    pub submits: &'static [Submit],
    pub completes: &'static [Complete],
    /// What the completion modes mean for this interface.
    pub how: &'static str,
    /// Asynchronous only with O_DIRECT (libaio runs each request inside io_submit otherwise: run
    /// so, and its record's mechanism says so).
    pub async_needs_direct: bool,
    /// Does no I/O and takes no target (fio's FIO_DISKLESSIO): `--size` is its address space.
    pub diskless: bool,
    /// The targets it can drive; an empty list for a diskless interface.
    pub targets: &'static [TargetKind],
    /// Polled completion reaps the device's own poll queues (IOPOLL), so a queue without them
    /// changes what happens: refused unless `--allow-fallback`.
    pub polls_device_queues: bool,
    /// Its I/O never enters the kernel (a user-space driver): no tracepoint sees a request, so
    /// `--profile stages` shows its own submit-to-completion time as one user-space stage.
    pub bypasses_kernel: bool,
}

/// What the rest of iolab asks of an interface besides moving I/O: its facts and its policy,
/// all in its own file. Every default is the common case; an interface overrides what differs.
pub trait Interface: IoInterface {
    const INFO: &'static InterfaceInfo;
    /// Its target part (`target.rs`): acquired for a run, described, given to each thread's open
    /// as its handle, released. Files and block devices through `device` for most.
    type Target: Acquire<Handle = Self::Handle>;
    /// Checks only this interface makes on a job, before any target or kernel is touched; the
    /// line is wrapped as bad input by the plan's checks (`PlanError::Job`) and the server's.
    fn check_job(_io: &IoChoice) -> Result<(), String> {
        Ok(())
    }
    /// Whether this machine can run the interface at all; Err (unsupported here) carries the reason.
    fn machine_support() -> Result<(), InterfaceError> {
        Ok(())
    }
    /// What this kernel refuses that iolab does without, for `iolab interfaces`.
    fn machine_notes() -> Option<String> {
        None
    }
    /// Checks on a target once it is open (an NVMe namespace's limits, say), for requests of
    /// `bs` bytes from `offset`.
    fn check_target(_io: &IoChoice, _bs: u64, _offset: u64, _target: &Target) -> Result<(), InterfaceError> {
        Ok(())
    }
    /// Checks that need the kernel. Interfaces that set up kernel objects with flags (io_uring's
    /// rings) answer the setup the run gets.
    fn check_kernel(_io: &IoChoice) -> Result<Option<KernelSetup>, InterfaceError> {
        Ok(None)
    }
    /// The completion path the kernel is expected to take, and why when that is not what was
    /// asked for.
    fn expected_path(io: &IoChoice, targets: &[TargetInfo]) -> (Path, Option<String>) {
        queue_path(io.complete, targets)
    }
    /// The `queue/io_poll_delay` the job's polling needs on its targets' queues, where the block
    /// layer's own polling decides whether to sleep first (`block_poll.rs`); None: it does not.
    fn block_poll_delay(_io: &IoChoice) -> Option<i64> {
        None
    }
    /// The kernel features this interface uses, as this kernel has them.
    fn kernel_features() -> Vec<Feature> {
        Vec::new()
    }
    /// How the job's I/O completes, in words: the record's `completion_path.mechanism`, the
    /// method a study's row really used.
    fn mechanism(io: &IoChoice) -> String {
        match io.complete {
            Complete::Irq => "interrupt",
            Complete::Poll => "classic polling",
            Complete::Hybrid => "hybrid polling",
        }
        .to_string()
    }
    /// What `flush` and `deallocate` can do on the attached device (`IoInterface`); nothing for
    /// an interface whose target the kernel holds.
    fn device_commands(_handle: &Self::Handle) -> DeviceCommands {
        DeviceCommands::default()
    }
    /// The memory the hot loop's slot buffers must be in (`memory.rs`).
    fn buffer_memory(_io: &IoChoice) -> memory::BufferMemory {
        memory::BufferMemory::Heap
    }
    /// Reads one block of target `fd` (of the run's `target`) synchronously for `--verify`
    /// read-back: bytes read or a negative result (`error_text` says what it means).
    fn sync_reader(_target: &Self::Target, _fd: RawFd) -> Result<SyncReader, String> {
        Ok(Box::new(|fd, buf, offset| {
            // SAFETY: buf is a live, writable slice of buf.len() bytes.
            let n = unsafe { libc::pread(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), offset as i64) };
            if n < 0 {
                neg_errno()
            } else {
                n as i64
            }
        }))
    }
}

/// What an interface asked the kernel to set up for a run and what it got (io_uring's rings:
/// their setup flags): the record's `ring`. Flags are named, so the record reads the same
/// whichever interface made them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelSetup {
    /// What iolab asks for this mode.
    pub asked: Vec<&'static str>,
    /// What was created with.
    pub used: Vec<&'static str>,
    /// Asked for, refused by this kernel (EINVAL), and done without: cost-only flags.
    pub dropped: Vec<&'static str>,
    /// The kernel's feature bits iolab relies on that it has (IORING_FEAT_*, by name): without
    /// NATIVE_WORKERS the SQPOLL and io-wq threads are kernel threads.
    pub features: Vec<&'static str>,
    /// What was asked for and not used, and why (io_uring: the ring fd's registration).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One kernel feature an interface uses, as this kernel has it: `iolab probe` lists them with
/// what doing without each costs.
#[derive(Clone, Debug, Serialize)]
pub struct Feature {
    pub name: &'static str,
    /// The upstream Linux release that brought it (or took it away: `until`).
    pub since: &'static str,
    /// The last release that still has it, for behaviours the kernel dropped.
    pub until: Option<&'static str>,
    /// What this kernel does: None where nothing here can tell (no device to ask).
    pub present: Option<bool>,
    /// How iolab found out.
    pub detected_by: &'static str,
    /// What iolab does without it, and what that costs a measurement.
    pub without: &'static str,
}

/// A synchronous read of `buf.len()` bytes at an offset of an open target.
pub type SyncReader = Box<dyn FnMut(RawFd, &mut [u8], u64) -> i64>;

/// The completion path by the target queues' own say: interrupts unless polling was asked for
/// and every queue can poll.
pub(crate) fn queue_path(complete: Complete, targets: &[TargetInfo]) -> (Path, Option<String>) {
    if complete == Complete::Irq {
        return (Path::Interrupt, None);
    }
    let no_poll: Vec<&str> = targets.iter().filter(|t| t.io_poll == Some(false)).map(|t| t.device.as_deref().unwrap_or(&t.path)).collect();
    if !no_poll.is_empty() {
        (Path::Interrupt, Some(format!("{} has no poll queues (queue/io_poll = 0): polled I/O completes by interrupt", no_poll.join(", "))))
    } else if targets.iter().all(|t| t.io_poll == Some(true)) {
        (Path::Polled, None)
    } else {
        (Path::Unknown, Some("the device behind the target does not say whether it can poll".to_string()))
    }
}

/// Something done with an interface's type, for [`InterfaceKind::visit`]: the one place that
/// turns a kind chosen at run time into the type the hot loop is compiled for.
pub trait Visit {
    type Out;
    fn visit<T: Interface>(self) -> Self::Out;
}

/// Something done with an interface's type and its acquired target part, for
/// [`Acquired::visit`]: how the engine runs the monomorphised loop over what was acquired.
pub trait VisitTarget<'h> {
    type Out;
    fn visit<T: Interface>(self, target: &'h T::Target) -> Self::Out;
}

/// Acquires `T`'s target part and makes the checks its interface makes on open targets.
fn acquire<T: Interface>(req: &TargetRequest) -> Result<T::Target, Failure> {
    let target = T::Target::acquire(req)?;
    for t in target.files() {
        T::check_target(req.io, req.access.bs, req.access.targets.offset, t)?;
    }
    Ok(target)
}

/// The interfaces: the one table every dispatch comes from. Adding an interface is its file
/// (an `Interface` impl) and one line here; options it takes, one [`OptionsPart`] in its file
/// and one line under `options`.
macro_rules! interface_table {
    ($($kind:ident => $ty:ty,)* ; options { $($field:ident: $opt:ty,)* }) => {
        /// The interfaces' own options, one part each as the table lists them: the flags of
        /// `iolab run` (flattened), a stored job's fields (flattened into [`IoChoice`], so a job
        /// stored before the parts were gathered reads the same) and a plan's `[options]` keys.
        #[derive(Clone, Debug, Default, Serialize, Deserialize, clap::Args)]
        pub struct Options {
            $(#[serde(flatten)] #[command(flatten)] pub $field: $opt,)*
        }

        impl Options {
            /// Every plan `[options]` key some part reads, in table order.
            pub(crate) fn plan_keys() -> Vec<&'static str> {
                let mut keys = Vec::new();
                $(keys.extend_from_slice(<$opt as OptionsPart>::PLAN_KEYS);)*
                keys
            }

            /// Reads the plan `[options]` key `key` into the part that owns it; false: no part
            /// does (the value is left unread).
            pub(crate) fn plan_value<'de, A: serde::de::MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
                $(if <$opt as OptionsPart>::PLAN_KEYS.contains(&key) {
                    self.$field.plan_value(key, map)?;
                    return Ok(true);
                })*
                Ok(false)
            }

            /// Every part's checks, in table order.
            pub fn check(&self, io: &IoChoice) -> Result<(), String> {
                $(self.$field.check(io)?;)*
                Ok(())
            }

            /// The CPUs the parts pin kernel threads to.
            pub(crate) fn pinned_cpus(&self) -> Vec<u32> {
                let mut cpus = Vec::new();
                $(cpus.extend(self.$field.pinned_cpu());)*
                cpus
            }

            /// These options with each part the choice `io` would refuse back at its default:
            /// what one set of options means for each interface in turn (`iolab probe`).
            pub(crate) fn kept_for(&self, io: &IoChoice) -> Options {
                let mut kept = self.clone();
                $(if self.$field.check(io).is_err() {
                    kept.$field = Default::default();
                })*
                kept
            }
        }

        /// Which interface a job uses; serialised, parsed and printed by its `INFO.name`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum InterfaceKind { $($kind),* }

        impl InterfaceKind {
            pub const ALL: &'static [InterfaceKind] = &[$(InterfaceKind::$kind),*];

            pub(crate) fn visit<V: Visit>(self, v: V) -> V::Out {
                match self { $(InterfaceKind::$kind => v.visit::<$ty>()),* }
            }

            pub fn info(self) -> &'static InterfaceInfo {
                match self { $(InterfaceKind::$kind => <$ty as Interface>::INFO),* }
            }

            /// Acquires the run's targets through this interface's target part.
            pub(crate) fn acquire(self, req: &TargetRequest) -> Result<Acquired, Failure> {
                match self { $(InterfaceKind::$kind => acquire::<$ty>(req).map(Acquired::$kind)),* }
            }
        }

        /// A run's targets as its interface's target part acquired them: what the session holds
        /// for the run (and releases) and the engine runs the interface over.
        // One per run, made once and never moved on a hot path: boxing the controller's
        // variant would buy nothing.
        #[allow(clippy::large_enum_variant)]
        pub enum Acquired { $($kind(<$ty as Interface>::Target)),* }

        impl Acquired {
            pub fn kind(&self) -> InterfaceKind {
                match self { $(Acquired::$kind(_) => InterfaceKind::$kind),* }
            }

            pub(crate) fn visit<'h, V: VisitTarget<'h>>(&'h self, v: V) -> V::Out {
                match self { $(Acquired::$kind(t) => v.visit::<$ty>(t)),* }
            }
        }

        impl std::ops::Deref for Acquired {
            type Target = dyn TargetPart;
            fn deref(&self) -> &(dyn TargetPart + 'static) {
                match self { $(Acquired::$kind(t) => t),* }
            }
        }

        impl std::ops::DerefMut for Acquired {
            fn deref_mut(&mut self) -> &mut (dyn TargetPart + 'static) {
                match self { $(Acquired::$kind(t) => t),* }
            }
        }
    };
}

interface_table! {
    Psync => psync::Psync,
    Pvsync2 => pvsync2::Pvsync2,
    PosixAio => posixaio::PosixAio,
    Libaio => libaio::Libaio,
    IoUring => io_uring::Uring,
    NvmePassthru => nvme_passthru::Passthru,
    VfioNvme => vfio_nvme::UserDriver,
    Null => null::Null,
    ;
    options {
        // io_uring's rings (nvme-passthru's too); in this order, a stored job's fields too.
        ring: io_uring::RingOptions,
        // -i null's script.
        null: null::NullOptions,
        // The block layer's hybrid polling sleep.
        block_poll: block_poll::PollDelay,
        // -i vfio-nvme's no-IOMMU consent.
        vfio: vfio_nvme::VfioOptions,
        // Each issuing thread's memory policy and I/O priority, and a per-command priority.
        thread: thread::ThreadOptions,
        // Steady state: the run ends once it is steady (fio's ss).
        steady: crate::interfaces::steady::SteadyOptions,
    }
}

/// An interface's rules (its policy) as plain functions, taken from its `Interface` impl.
pub struct Rules {
    pub check_job: fn(&IoChoice) -> Result<(), String>,
    pub machine_support: fn() -> Result<(), InterfaceError>,
    pub machine_notes: fn() -> Option<String>,
    pub check_kernel: fn(&IoChoice) -> Result<Option<KernelSetup>, InterfaceError>,
    pub expected_path: fn(&IoChoice, &[TargetInfo]) -> (Path, Option<String>),
    pub block_poll_delay: fn(&IoChoice) -> Option<i64>,
    pub mechanism: fn(&IoChoice) -> String,
    pub kernel_features: fn() -> Vec<Feature>,
}

impl Rules {
    fn of<T: Interface>() -> Rules {
        Rules {
            check_job: T::check_job,
            machine_support: T::machine_support,
            machine_notes: T::machine_notes,
            check_kernel: T::check_kernel,
            expected_path: T::expected_path,
            block_poll_delay: T::block_poll_delay,
            mechanism: T::mechanism,
            kernel_features: T::kernel_features,
        }
    }
}

impl InterfaceKind {
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Its rules: `(kind.rules().check_job)(&job.io)`.
    pub fn rules(self) -> Rules {
        struct Get;
        impl Visit for Get {
            type Out = Rules;
            fn visit<T: Interface>(self) -> Rules {
                Rules::of::<T>()
            }
        }
        self.visit(Get)
    }
}

impl std::fmt::Display for InterfaceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for InterfaceKind {
    type Err = InterfaceError;
    /// An interface by its name; Err (bad input) names the known ones.
    fn from_str(s: &str) -> Result<Self, InterfaceError> {
        InterfaceKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == s)
            .ok_or_else(|| InterfaceError::Invalid(format!("unknown interface '{s}': choose one of {} (see `iolab interfaces`)", names())))
    }
}

impl Serialize for InterfaceKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for InterfaceKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// Whether the interface named `name` is a user-space driver (its I/O never enters the kernel:
/// `InterfaceInfo::bypasses_kernel`): what a study or report asks instead of naming one.
pub fn user_space(name: &str) -> bool {
    name.parse::<InterfaceKind>().is_ok_and(|k| k.info().bypasses_kernel)
}

/// Every interface's facts, in table order.
pub fn all() -> impl Iterator<Item = &'static InterfaceInfo> {
    InterfaceKind::ALL.iter().map(|k| k.info())
}

pub fn names() -> String {
    all().map(|i| i.name).collect::<Vec<_>>().join(", ")
}

/// The interfaces as `iolab run --help` lists them: each name, with its note.
pub fn help() -> String {
    let each: Vec<String> = all().map(|i| i.note.map_or(i.name.to_string(), |n| format!("{} ({n})", i.name))).collect();
    format!("I/O interface: {}.", each.join(", "))
}

/// Whether this machine can run the named interface at all; Err carries the reason (an unknown
/// name is bad input).
pub fn machine_support(name: &str) -> Result<(), InterfaceError> {
    (name.parse::<InterfaceKind>()?.rules().machine_support)()
}

/// The errno of the last failed libc call, as a negative completion result.
pub(crate) fn neg_errno() -> i64 {
    -(io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) as i64)
}

/// A system call made directly, returning the kernel's result (a count, or a negative errno).
///
/// For the system calls made per I/O: glibc's `pread`, `preadv2` and friends are cancellation
/// points, so each call enables and disables asynchronous thread cancellation around the
/// system call and turns the result into `errno` (about 55 instructions per I/O measured with
/// callgrind, against a handful here); `syscall()`, which the io-uring crate uses for
/// `io_uring_enter`, still shuffles arguments and goes through `errno` (about 14). iolab never
/// cancels threads, and wants the kernel's own result anyway.
///
/// # Safety
/// The arguments must be valid for system call `nr` (pointers to live memory of the right size).
#[inline(always)]
pub(crate) unsafe fn raw_syscall(nr: libc::c_long, a: [usize; 6]) -> i64 {
    #[cfg(target_arch = "x86_64")]
    {
        let ret: i64;
        // The x86_64 system call convention: number in rax, arguments in rdi, rsi, rdx, r10,
        // r8, r9; the kernel clobbers rcx and r11 and returns in rax.
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr => ret,
            in("rdi") a[0], in("rsi") a[1], in("rdx") a[2], in("r10") a[3], in("r8") a[4], in("r9") a[5],
            lateout("rcx") _, lateout("r11") _,
            options(nostack),
        );
        ret
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let r = libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
        if r < 0 {
            neg_errno()
        } else {
            r as i64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_check_their_options_and_keep_only_what_an_interface_takes() {
        let mut io = IoChoice::default();
        io.options.vfio.vfio_noiommu = true;
        assert!(io.check_options().unwrap_err().contains("--vfio-noiommu is for -i vfio-nvme"));
        assert!(!io.options.kept_for(&io).vfio.vfio_noiommu);
        io.interface = InterfaceKind::VfioNvme;
        io.complete = Complete::Poll;
        io.check_options().unwrap();
        assert!(io.options.kept_for(&io).vfio.vfio_noiommu);
        io.options.ring.sq_cpu = Some(1);
        assert_eq!(io.check_options().unwrap_err(), "--sq-cpu only applies with --submit sqpoll");
        io.submit = Submit::Sqpoll;
        assert_eq!(io.pinned_cpus(), [1]);
        let keys = ["sq_cpu", "sq_idle_ms", "register_buffers", "register_files", "force_async", "iowait"];
        assert_eq!(Options::plan_keys(), [&keys[..], &["mem_policy", "ioprio", "cmdprio", "steadystate"]].concat());
        // A per-command priority only where a command carries one.
        let mut io = IoChoice::default();
        io.options.thread.cmdprio = Some("20%rt:0".parse().unwrap());
        assert!(io.check_options().unwrap_err().starts_with("--cmdprio: a per-command priority is carried by -i libaio"));
        io.interface = InterfaceKind::Libaio;
        io.check_options().unwrap();
    }

    #[test]
    fn the_user_space_driver_is_found_by_its_facts() {
        assert!(user_space("vfio-nvme"));
        assert!(!user_space("io_uring") && !user_space("nonesuch"));
    }
}
