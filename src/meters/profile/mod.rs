//! `--profile layers`: where the CPU time of a run goes, layer by layer of the I/O stack.
//!
//! Every online CPU is sampled over the measured window with the `cpu-clock` software event
//! (a timer, so it works without a PMU, as on this machine), each sample with its kernel and
//! user call chain, through `perf_event_open` and its ring buffer: no `perf` binary. Each
//! sample's functions are named from /proc/kallsyms (kernel and modules) and the process's
//! mappings (user space), and put in a layer by [`LAYERS`], a table kept as data. A layer's
//! *self* share counts samples whose innermost frame is in it; its *inclusive* share, samples
//! with it anywhere in the chain. Per I/O: samples x period / I/Os, system-wide.
pub mod attribute;
pub mod decode;
pub mod events;
pub mod frames;
pub mod layers;
pub mod symbols;

use super::access::{Sysctls, PARANOID_CPU_WIDE};
use super::ring::{enable, open_event, open_in_group, Ring};
use super::MetersError;
pub use attribute::{
    attribute, attribute_counts, FunctionShare, Hardware, HardwareCounts, LayerProfile, LayerShare, ModuleShare, ProfileResult, RunCpu,
    Space, Unprofiled, TOP_FUNCTIONS,
};
pub use decode::{decode, decode_group, Counter, Counts, Sample};
use events::{EventId, CYCLES, HW_SAMPLE_HZ, INSTRUCTIONS, LOADS, PERIOD_NS, STORES};
pub use layers::{kernel_layer, Layer, LAYERS, LOCKS};
use perf_event_open_sys as sys;
pub use symbols::{ElfImage, KernelSymbols, UserMaps};
use sys::bindings as b;

/// Ring buffer data pages per CPU (a power of two), plus the header page.
const RING_PAGES: usize = 256;

/// One CPU's sampling event and its ring buffer.
fn open_ring(cpu: i32) -> std::io::Result<Ring> {
    // SAFETY: zero is a valid perf_event_attr; the fields the kernel needs are set below.
    let mut attr: b::perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = b::PERF_TYPE_SOFTWARE;
    attr.config = b::PERF_COUNT_SW_CPU_CLOCK as u64;
    attr.__bindgen_anon_1.sample_period = PERIOD_NS;
    attr.sample_type = (b::PERF_SAMPLE_IP | b::PERF_SAMPLE_TID | b::PERF_SAMPLE_CALLCHAIN) as u64;
    Ring::map(open_event(&mut attr, -1, cpu)?, RING_PAGES)
}

/// The hardware group on every CPU (`{cycles,instructions,L1-dcache-loads,L1-dcache-stores}:S`,
/// less the memory events the PMU refuses): cycles sample, each sample reading every counter, so
/// its counts since the previous one are charged to where it landed. Beside the cpu-clock
/// samples, not instead of them: cycles stop while a CPU halts, so time (and idle) still comes
/// from the timer.
struct HardwareSampler {
    rings: Vec<Ring>,
    /// The members (instructions, loads, stores): open as long as their groups are.
    members: Vec<Vec<std::os::fd::OwnedFd>>,
    /// What the group's values count, leader first.
    layout: Vec<Counter>,
    /// The memory events the PMU refused, and why (None: loads and stores are counted).
    memory_refused: Option<String>,
    /// Per ring: the counts read so far.
    last: Vec<Counts>,
    samples: Vec<(Sample, Counts)>,
    lost: u64,
}

impl HardwareSampler {
    /// Open the group on every CPU: cycles, instructions, loads and stores, or, where the PMU
    /// refuses a memory event (it lacks it, or the group does not fit its counters), the group
    /// without it, the refusal kept. Err: why no group at all, the first refusal.
    fn open(ncpu: usize) -> Result<HardwareSampler, String> {
        let mut memory = vec![LOADS, STORES];
        let mut refused: Vec<String> = Vec::new();
        loop {
            let members: Vec<EventId> = [INSTRUCTIONS].into_iter().chain(memory.iter().copied()).collect();
            match (0..ncpu as i32).map(|cpu| open_hardware_group(cpu, &members)).collect::<Result<(Vec<_>, Vec<_>), _>>() {
                Ok((rings, fds)) => {
                    let layout = [CYCLES, INSTRUCTIONS].iter().chain(&memory).map(|e| counter_of(e.0)).collect();
                    let memory_refused = (!refused.is_empty()).then(|| refused.join("; "));
                    return Ok(HardwareSampler {
                        last: vec![Counts::default(); rings.len()],
                        rings,
                        members: fds,
                        layout,
                        memory_refused,
                        samples: Vec::new(),
                        lost: 0,
                    });
                }
                Err((event, why)) if memory.iter().any(|m| m.0 == event) => {
                    refused.push(why);
                    memory.retain(|m| m.0 != event);
                }
                Err((_, why)) => return Err(why),
            }
        }
    }

    fn drain(&mut self, data: &mut Vec<u8>) {
        for (r, last) in self.rings.iter().zip(&mut self.last) {
            data.clear();
            r.drain(data);
            decode_group(data, &self.layout, last, &mut self.samples, &mut self.lost);
        }
    }
}

fn counter_of(event: &str) -> Counter {
    match event {
        "cycles" => Counter::Cycles,
        "instructions" => Counter::Instructions,
        "L1-dcache-loads" => Counter::Loads,
        _ => Counter::Stores,
    }
}

/// One CPU's hardware group (cycles leading, `members` following): its ring and the members.
/// Err: the event refused and why.
#[allow(clippy::type_complexity)]
fn open_hardware_group(cpu: i32, members: &[EventId]) -> Result<(Ring, Vec<std::os::fd::OwnedFd>), (&'static str, String)> {
    let (ring, fds) = open_sampling_group(-1, cpu, CYCLES, members).map_err(|(event, e)| (event, no_hardware(event, cpu, &e)))?;
    Ok((ring.map_err(|e| ("cycles", format!("mapping the ring of the cycles group on CPU {cpu} failed: {e}")))?, fds))
}

/// A group whose `leader` samples [`HW_SAMPLE_HZ`] times a second (freq mode), each sample with
/// ip, tid, the group's counts and the call chain, and whose `members` count along; a CPU's
/// (`pid` -1) or a thread's. Err: the event the kernel refused, and why.
#[allow(clippy::type_complexity)]
fn open_sampling_group(
    pid: i32,
    cpu: i32,
    leader: EventId,
    members: &[EventId],
) -> Result<(std::io::Result<Ring>, Vec<std::os::fd::OwnedFd>), (&'static str, std::io::Error)> {
    // SAFETY: zero is a valid perf_event_attr; the fields the kernel needs are set below.
    let mut attr: b::perf_event_attr = unsafe { std::mem::zeroed() };
    (attr.type_, attr.config) = (leader.1, leader.2);
    attr.set_freq(1);
    attr.__bindgen_anon_1.sample_freq = HW_SAMPLE_HZ;
    attr.sample_type = (b::PERF_SAMPLE_IP | b::PERF_SAMPLE_TID | b::PERF_SAMPLE_READ | b::PERF_SAMPLE_CALLCHAIN) as u64;
    attr.read_format = b::PERF_FORMAT_GROUP as u64;
    let leader_fd = open_in_group(&mut attr, pid, cpu, None).map_err(|e| (leader.0, e))?;
    let mut member_fds = Vec::new();
    for member in members {
        // SAFETY: as above.
        let mut attr: b::perf_event_attr = unsafe { std::mem::zeroed() };
        (attr.type_, attr.config) = (member.1, member.2);
        member_fds.push(open_in_group(&mut attr, pid, cpu, Some(&leader_fd)).map_err(|e| (member.0, e))?);
    }
    Ok((Ring::map(leader_fd, RING_PAGES), member_fds))
}

/// Why a hardware event cannot be opened, saying so plainly where the machine has no CPU PMU
/// (a VM without a virtual PMU: the kernel answers ENOENT).
fn no_hardware(event: &str, cpu: i32, e: &std::io::Error) -> String {
    let pmu = ["cpu", "cpu_core", "cpu_atom"].iter().any(|p| std::path::Path::new("/sys/bus/event_source/devices").join(p).exists());
    let why = if pmu { "" } else { "no PMU (no cpu in /sys/bus/event_source/devices): " };
    format!("{why}perf_event_open({event}) on CPU {cpu} failed: {e}")
}

/// The sampler over the measured window.
pub struct Profiler {
    rings: Vec<Ring>,
    samples: Vec<Sample>,
    lost: u64,
    /// Read as the events are opened: kptr_restrict may be lowered for it only while the run lasts.
    kernel_symbols: Result<KernelSymbols, MetersError>,
    /// Cycles and instructions where the CPUs count them, else why not.
    hardware: Result<HardwareSampler, String>,
    /// `IOLAB_PROFILE_DUMP`, looked up once rather than at every drain.
    dump: Option<std::path::PathBuf>,
}

impl Profiler {
    /// One sampling event per online CPU, not yet counting. Err: why profiling cannot be done.
    /// Where the kernel wants `perf_event_paranoid` or `kptr_restrict` lower, `sysctls` lowers them.
    pub fn open(ncpu: usize, sysctls: &mut Sysctls) -> Result<Profiler, MetersError> {
        let rings = (0..ncpu as i32)
            .map(|cpu| sysctls.open_perf(PARANOID_CPU_WIDE, || open_ring(cpu)))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.context(|m| format!("perf_event_open of a cpu-clock sampling event failed: {m}")))?;
        let kernel_symbols = sysctls.kallsyms(KernelSymbols::parse);
        // After the cpu-clock rings: they lowered perf_event_paranoid where it had to be.
        let hardware = HardwareSampler::open(ncpu);
        Ok(Profiler { rings, samples: Vec::new(), lost: 0, kernel_symbols, hardware, dump: super::ring::dump_dir(DUMP) })
    }

    pub fn start(&self) {
        self.rings.iter().chain(self.hardware.iter().flat_map(|h| &h.rings)).for_each(|r| enable(r.fd(), true));
    }

    /// Called every ~20 ms inside the window, so the rings never fill.
    pub fn drain(&mut self) {
        let mut data = Vec::new();
        for (cpu, r) in self.rings.iter().enumerate() {
            data.clear();
            r.drain(&mut data);
            if let Some(dir) = &self.dump {
                super::ring::dump_raw(dir, cpu, &data);
            }
            decode(&data, &mut self.samples, &mut self.lost);
        }
        if let Ok(h) = &mut self.hardware {
            h.drain(&mut data);
        }
    }

    /// Stop sampling and take the rest: the window has ended.
    pub fn stop(&mut self) {
        self.rings.iter().chain(self.hardware.iter().flat_map(|h| &h.rings)).for_each(|r| enable(r.fd(), false));
        self.drain();
        self.rings.clear();
        if let Ok(h) = &mut self.hardware {
            h.rings.clear();
            h.members.clear();
        }
    }

    /// Attribute every sample to its layers, for `ios` I/Os in the window.
    pub fn report(&self, own_pid: u32, ios: u64) -> ProfileResult {
        if let Some(dir) = &self.dump {
            self.dump_naming(dir, own_pid);
        }
        match self.layers(own_pid, ios) {
            Ok(p) => ProfileResult::Measured(Box::new(p)),
            Err(unavailable) => ProfileResult::Unavailable { unavailable },
        }
    }

    fn layers(&self, own_pid: u32, ios: u64) -> Result<LayerProfile, String> {
        let syms = self.kernel_symbols.as_ref().map_err(ToString::to_string)?;
        let maps = UserMaps::of_process(own_pid);
        if self.samples.is_empty() {
            return Err("no samples were taken in the window".into());
        }
        let mut p = attribute(&self.samples, self.lost, syms, &maps, own_pid, ios);
        p.flame = Some(super::flame::fold(&self.samples, syms, &maps, own_pid));
        p.hardware = match &self.hardware {
            Ok(h) => {
                let mut counted = attribute_counts(&mut p.layers, &h.samples, &h.layout, h.lost, syms, &maps, own_pid, ios);
                counted.memory_unavailable = h.memory_refused.clone();
                Hardware::Counted(Box::new(counted))
            }
            Err(unavailable) => Hardware::Unavailable { unavailable: unavailable.clone() },
        };
        Ok(p)
    }
}

/// `IOLAB_PROFILE_DUMP=DIR`: the rings' raw bytes (`cpuN.raw`) and what names their frames
/// (`Profiler::dump_naming`), so a kernel's samples can become a test fixture.
const DUMP: &str = "IOLAB_PROFILE_DUMP";

impl Profiler {
    /// Beside the rings' bytes: the run's pid, its mappings and executable, and the kallsyms
    /// lines that name the sampled kernel addresses (a few hundred of the file's ~200 000; none
    /// where kallsyms shows no addresses).
    fn dump_naming(&self, dir: &std::path::Path, own_pid: u32) {
        let kallsyms = std::fs::read_to_string("/proc/kallsyms").unwrap_or_default();
        let ips = self.samples.iter().flat_map(|s| s.chain.iter().copied());
        let exe = std::fs::read_link(format!("/proc/{own_pid}/exe")).map(|p| p.display().to_string()).unwrap_or_default();
        let _ = std::fs::create_dir_all(dir);
        let _ = std::fs::write(dir.join("pid"), format!("{own_pid}\n"));
        let _ = std::fs::write(dir.join("exe"), format!("{exe}\n"));
        let _ = std::fs::read(format!("/proc/{own_pid}/maps")).and_then(|m| std::fs::write(dir.join("maps"), m));
        let _ = std::fs::write(dir.join("kallsyms"), KernelSymbols::excerpt(&kallsyms, ips));
    }
}

#[cfg(test)]
mod tests {
    use super::symbols::is_kernel;
    use super::*;

    const KALLSYMS: &str = "ffffffff81000000 T _stext\n\
        ffffffff81100000 T do_syscall_64\n\
        ffffffff81200000 T blk_mq_submit_bio\n\
        ffffffff81300000 t ext4_file_read_iter\n\
        ffffffff81400000 T filemap_read\n\
        ffffffff81500000 T default_idle\n\
        ffffffff81600000 T io_issue_sqe\n\
        ffffffff81700000 d some_data\n\
        ffffffffc0001000 t nvme_queue_rq\t[nvme]\n\
        ffffffffc0002000 t zram_submit_bio\t[zram]\n\
        ffffffffc0003000 t dd_insert_requests\t[mq_deadline]\n";

    #[test]
    fn symbols_map_to_their_layers() {
        assert_eq!(kernel_layer("blk_mq_submit_bio", None), "block layer");
        assert_eq!(kernel_layer("ext4_file_read_iter", None), "file system");
        assert_eq!(kernel_layer("filemap_read", None), "page cache");
        assert_eq!(kernel_layer("nvme_queue_rq", Some("nvme")), "device driver");
        assert_eq!(kernel_layer("anything", Some("zram")), "device driver");
        assert_eq!(kernel_layer("io_issue_sqe", None), "io_uring");
        assert_eq!(kernel_layer("__io_read", None), "io_uring");
        assert_eq!(kernel_layer("dd_insert_requests", Some("mq_deadline")), "I/O scheduler");
        assert_eq!(kernel_layer("do_syscall_64", None), "system call entry and exit");
        assert_eq!(kernel_layer("default_idle", None), "idle");
        assert_eq!(kernel_layer("schedule", None), "scheduler and context switch");
        assert_eq!(kernel_layer("mystery_function", None), "rest of kernel");
        // Polling, as it lands on 6.1: io_uring's loop, the block layer's, the driver's.
        assert_eq!(kernel_layer("io_do_iopoll", None), "io_uring");
        assert_eq!(kernel_layer("iocb_bio_iopoll", None), "block layer");
        assert_eq!(kernel_layer("blk_mq_poll", None), "block layer");
        assert_eq!(kernel_layer("nvme_poll", Some("nvme")), "device driver");
        assert_eq!(kernel_layer("__ext4_new_inode", None), "file system");
    }

    #[test]
    fn kallsyms_lookup_finds_the_containing_function_and_module() {
        let k = KernelSymbols::parse(KALLSYMS).unwrap();
        assert_eq!(k.lookup(0xffffffff81200010), Some(("blk_mq_submit_bio", None)));
        assert_eq!(k.lookup(0xffffffffc0001234), Some(("nvme_queue_rq", Some("nvme"))));
        // Data symbols are not functions: the text symbol before them still contains the address.
        assert_eq!(k.lookup(0xffffffff81700010).map(|x| x.0), Some("io_issue_sqe"));
        assert!(KernelSymbols::parse("0000000000000000 T _stext\n0000000000000000 T foo\n").is_none(), "hidden addresses");
    }

    #[test]
    fn a_kallsyms_excerpt_keeps_each_address_s_function_and_the_next_in_file_order() {
        let ips = [0xffffffffc0001234, 0xffffffff81200010, 0xffffffff81200020, 0x400000];
        let cut = KernelSymbols::excerpt(KALLSYMS, ips.into_iter());
        assert_eq!(
            cut,
            "ffffffff81200000 T blk_mq_submit_bio\nffffffff81300000 t ext4_file_read_iter\n\
             ffffffffc0001000 t nvme_queue_rq\t[nvme]\nffffffffc0002000 t zram_submit_bio\t[zram]\n"
        );
        let k = KernelSymbols::parse(&cut).unwrap();
        assert_eq!(k.lookup(0xffffffffc0001234), Some(("nvme_queue_rq", Some("nvme"))));
    }

    #[test]
    fn a_lock_s_samples_are_its_caller_s() {
        let k = KernelSymbols::parse(&format!("{KALLSYMS}ffffffff81800000 T _raw_spin_unlock\n")).unwrap();
        let maps = UserMaps::parse("", None);
        let s = Sample { pid: 42, tid: 42, chain: vec![0xffffffff81800010, 0xffffffffc0001010, 0xffffffff81200010] };
        let p = attribute(&[s], 0, &k, &maps, 42, 1);
        assert_eq!(p.layers[0].layer, "device driver");
        assert_eq!(p.layers[0].top_functions[0].0, "nvme_queue_rq");
    }

    fn record(kind: u32, body: &[u64]) -> Vec<u8> {
        let size = 8 + 8 * body.len();
        let mut v = Vec::new();
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(&0u16.to_ne_bytes());
        v.extend_from_slice(&(size as u16).to_ne_bytes());
        for w in body {
            v.extend_from_slice(&w.to_ne_bytes());
        }
        v
    }

    #[test]
    fn ring_records_decode_into_samples_and_lost_counts() {
        let pidtid = |pid: u64, tid: u64| pid | (tid << 32);
        let marker = b::PERF_CONTEXT_MAX + 1; // PERF_CONTEXT_KERNEL is above PERF_CONTEXT_MAX
        let mut data =
            record(b::PERF_RECORD_SAMPLE, &[0xffffffff81200010, pidtid(7, 8), 3, marker, 0xffffffff81200010, 0xffffffff81100000]);
        data.extend(record(b::PERF_RECORD_LOST, &[1, 5]));
        data.extend(record(b::PERF_RECORD_SAMPLE, &[0x1000, pidtid(9, 9), 0]));
        let (mut out, mut lost) = (Vec::new(), 0);
        decode(&data, &mut out, &mut lost);
        assert_eq!(lost, 5);
        assert_eq!(out[0], Sample { pid: 7, tid: 8, chain: vec![0xffffffff81200010, 0xffffffff81100000] });
        assert_eq!(out[1], Sample { pid: 9, tid: 9, chain: vec![0x1000] }, "no chain: the sampled ip alone");
    }

    /// A PERF_RECORD_SAMPLE of the cycles group, byte for byte as perf_event_open(2) lays it out
    /// for IP | TID | READ | CALLCHAIN with read_format GROUP: struct perf_event_header { u32 type;
    /// u16 misc; u16 size; }, u64 ip, u32 pid, u32 tid, { u64 nr; u64 values[nr]; } (the leader's
    /// first), { u64 nr; u64 ips[nr]; }.
    fn group_sample(ip: u64, pid: u32, tid: u32, totals: &[u64], chain: &[u64]) -> Vec<u8> {
        let size = 8 + 8 + 8 + 8 * (1 + totals.len()) + 8 * (1 + chain.len());
        let mut v = Vec::new();
        v.extend_from_slice(&b::PERF_RECORD_SAMPLE.to_ne_bytes());
        v.extend_from_slice(&(b::PERF_RECORD_MISC_KERNEL as u16).to_ne_bytes());
        v.extend_from_slice(&(size as u16).to_ne_bytes());
        v.extend_from_slice(&ip.to_ne_bytes());
        v.extend_from_slice(&pid.to_ne_bytes());
        v.extend_from_slice(&tid.to_ne_bytes());
        v.extend_from_slice(&(totals.len() as u64).to_ne_bytes());
        totals.iter().for_each(|t| v.extend_from_slice(&t.to_ne_bytes()));
        v.extend_from_slice(&(chain.len() as u64).to_ne_bytes());
        chain.iter().for_each(|ip| v.extend_from_slice(&ip.to_ne_bytes()));
        assert_eq!(v.len(), size);
        v
    }

    #[test]
    fn group_samples_decode_into_counts_since_the_previous_sample() {
        let marker = b::PERF_CONTEXT_MAX + 1;
        let layout = [Counter::Cycles, Counter::Instructions];
        let c = |cycles: u64, instructions: u64| Counts { cycles, instructions, ..Counts::default() };
        let mut data = group_sample(0xffffffff81200010, 7, 8, &[1_000_000, 400_000], &[marker, 0xffffffff81200010, 0xffffffff81100000]);
        data.extend(record(b::PERF_RECORD_LOST, &[1, 2]));
        data.extend(group_sample(0x400100, 7, 9, &[1_900_000, 1_300_000], &[0x400100]));
        let (mut out, mut lost, mut last) = (Vec::new(), 0, Counts::default());
        decode_group(&data[..data.len() - 1], &layout, &mut last, &mut out, &mut lost);
        assert_eq!(out.len(), 1, "a record cut short is not decoded");
        (out, lost, last) = (Vec::new(), 0, Counts::default());
        decode_group(&data, &layout, &mut last, &mut out, &mut lost);
        assert_eq!(lost, 2);
        assert_eq!(out[0].0, Sample { pid: 7, tid: 8, chain: vec![0xffffffff81200010, 0xffffffff81100000] });
        assert_eq!(out[0].1, c(1_000_000, 400_000), "the first sample: counts since the group was enabled");
        assert_eq!(out[1].0, Sample { pid: 7, tid: 9, chain: vec![0x400100] });
        assert_eq!(out[1].1, c(900_000, 900_000), "counts since the previous sample");
        // The next drain goes on from the totals read so far.
        let mut next = Vec::new();
        decode_group(&group_sample(0x400100, 7, 9, &[2_000_000, 1_350_000], &[]), &layout, &mut last, &mut next, &mut lost);
        assert_eq!(next[0].1, c(100_000, 50_000));
        assert_eq!(next[0].0.chain, vec![0x400100], "no chain: the sampled ip alone");
    }

    #[test]
    fn samples_are_attributed_self_and_inclusive() {
        let k = KernelSymbols::parse(KALLSYMS).unwrap();
        let maps = UserMaps::parse(
            "00400000-00500000 r-xp 00000000 08:01 1 /usr/bin/iolab\n7f0000000000-7f0000100000 r-xp 00000000 08:01 2 /usr/lib/libc.so.6\n",
            Some("/usr/bin/iolab".into()),
        );
        let s = |pid: u32, chain: &[u64]| Sample { pid, tid: pid, chain: chain.to_vec() };
        let samples = vec![
            // nvme under the block layer under a system call from iolab
            s(42, &[0xffffffffc0001010, 0xffffffff81200010, 0xffffffff81100010, 0x7f0000000100, 0x400100]),
            s(42, &[0x400200]),
            s(0, &[0xffffffff81500010]),
            s(42, &[0xffffffff81200020, 0xffffffff81100010]),
        ];
        let p = attribute(&samples, 0, &k, &maps, 42, 1000);
        let get = |n: &str| p.layers.iter().find(|l| l.layer == n).unwrap().clone();
        assert_eq!(p.samples, 4);
        assert_eq!(get("device driver").self_share, 0.25);
        assert_eq!(get("block layer").self_share, 0.25);
        assert_eq!(get("block layer").inclusive_share, 0.5);
        assert_eq!(get("iolab").inclusive_share, 0.5);
        assert_eq!(get("user libraries").inclusive_share, 0.25);
        assert_eq!(get("idle").self_share, 0.25);
        assert_eq!(get("block layer").self_ns_per_io, Some(PERIOD_NS as f64 / 1000.0));
        assert_eq!(get("device driver").top_functions, vec![("nvme_queue_rq".to_string(), 0.25)]);
        let sum: f64 = p.layers.iter().map(|l| l.self_share).sum();
        assert!((sum - 1.0).abs() < 1e-9);
        // The run's own CPU: iolab's three samples (the idle one is no one's), by module.
        assert_eq!(p.run.samples, 3);
        assert_eq!((p.run.user_share, p.run.kernel_share), (1.0 / 3.0, 2.0 / 3.0));
        let module = |m: &str, l: &str| p.run.modules.iter().find(|x| x.module == m && x.layer == l).map(|x| (x.space, x.share));
        assert_eq!(module("nvme", "device driver"), Some(("kernel", 1.0 / 3.0)));
        assert_eq!(module("vmlinux", "block layer"), Some(("kernel", 1.0 / 3.0)));
        assert_eq!(module("iolab", "iolab"), Some(("user", 1.0 / 3.0)));
        assert_eq!(p.run.functions[0].function, "nvme_queue_rq", "ties in (space, module) order");
        assert_eq!(p.run.ns_per_io, Some(3.0 * PERIOD_NS as f64 / 1000.0));
    }

    #[test]
    fn the_kernel_writes_group_samples_as_the_decoder_reads_them() {
        // No PMU here, but software events form groups too: cpu-clock leading and task-clock
        // following on this thread, their samples laid out by the kernel exactly as the cycles
        // group's (IP | TID | READ | CALLCHAIN, read_format GROUP).
        let cpu_clock = ("cpu-clock", b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_CPU_CLOCK as u64);
        let task_clock = ("task-clock", b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_TASK_CLOCK as u64);
        let (ring, _member) = match open_sampling_group(0, -1, cpu_clock, &[task_clock]) {
            Ok((ring, member)) => (ring.unwrap(), member),
            Err((event, e)) => return eprintln!("skipped: perf_event_open({event}) on this thread: {e}"),
        };
        enable(ring.fd(), true);
        // Spin until this thread has run 50 ms: 200 samples at 4 kHz of its CPU time.
        let cpu_ns = || {
            let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: t is a valid timespec.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
            t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
        };
        let start = cpu_ns();
        while cpu_ns() - start < 50_000_000 {
            std::hint::black_box(0);
        }
        enable(ring.fd(), false);
        let (mut data, mut out, mut lost, mut last) = (Vec::new(), Vec::new(), 0, Counts::default());
        ring.drain(&mut data);
        decode_group(&data, &[Counter::Cycles, Counter::Instructions], &mut last, &mut out, &mut lost);
        assert!(out.len() >= 100, "{} samples in 50 ms of CPU at 4 kHz", out.len());
        // SAFETY: plain system calls.
        let (pid, tid) = unsafe { (libc::getpid() as u32, libc::gettid() as u32) };
        assert!(out.iter().all(|(s, _)| s.pid == pid && s.tid == tid && !s.chain.is_empty()));
        assert!(out.iter().any(|(s, _)| s.chain.iter().any(|&ip| !is_kernel(ip))), "user frames in the chains");
        // The leader's counts between samples are its period (250 µs of CPU); the member's, the
        // same time counted by the other clock.
        let mut periods: Vec<u64> = out.iter().skip(1).map(|(_, c)| c.cycles).collect();
        periods.sort();
        let median = periods[periods.len() / 2];
        assert!((200_000..=300_000).contains(&median), "median cpu-clock between samples {median} ns, want ~250 µs");
        let (leader, member): (u64, u64) = out.iter().fold((0, 0), |(a, b), (_, c)| (a + c.cycles, b + c.instructions));
        assert!(leader.abs_diff(member) * 20 < leader, "cpu-clock {leader} ns and task-clock {member} ns agree within 5 %");
        assert_eq!((last.cycles, last.instructions), (leader, member), "the totals read are the sums of the deltas");
    }

    #[test]
    fn cycles_and_instructions_are_charged_to_the_layers_self_and_inclusive() {
        let k = KernelSymbols::parse(KALLSYMS).unwrap();
        let maps = UserMaps::parse("00400000-00500000 r-xp 00000000 08:01 1 /usr/bin/iolab\n", Some("/usr/bin/iolab".into()));
        let s = |pid: u32, chain: &[u64]| Sample { pid, tid: pid, chain: chain.to_vec() };
        let c = |cycles: u64, instructions: u64| Counts { cycles, instructions, ..Counts::default() };
        let time = vec![s(42, &[0xffffffff81200010, 0xffffffff81100010]), s(0, &[0xffffffff81500010])];
        let hw = vec![
            // nvme under the block layer under a system call: all three inclusive, nvme self
            (s(42, &[0xffffffffc0001010, 0xffffffff81200010, 0xffffffff81200020, 0xffffffff81100010]), c(3000, 1000)),
            (s(42, &[0xffffffff81200010, 0xffffffff81100010]), c(2000, 1500)),
            (s(42, &[0x400200]), c(1000, 2500)),
        ];
        let mut p = attribute(&time, 0, &k, &maps, 42, 10);
        assert!(p.layers.iter().all(|l| l.self_cycles_per_io.is_none()), "no hardware samples: no counts");
        let h = attribute_counts(&mut p.layers, &hw, &[Counter::Cycles, Counter::Instructions], 1, &k, &maps, 42, 10);
        assert_eq!((h.samples, h.lost, h.cycles, h.instructions), (3, 1, 6000, 5000));
        assert_eq!((h.cycles_per_io, h.instructions_per_io), (Some(600.0), Some(500.0)));
        let get = |n: &str| p.layers.iter().find(|l| l.layer == n).unwrap().clone();
        let counts = |n: &str| {
            let l = get(n);
            (l.self_cycles_per_io, l.inclusive_cycles_per_io, l.self_instructions_per_io, l.inclusive_instructions_per_io)
        };
        assert_eq!(counts("device driver"), (Some(300.0), Some(300.0), Some(100.0), Some(100.0)));
        // Two frames of the block layer in one chain count once.
        assert_eq!(counts("block layer"), (Some(200.0), Some(500.0), Some(150.0), Some(250.0)));
        assert_eq!(counts("system call entry and exit"), (Some(0.0), Some(500.0), Some(0.0), Some(250.0)));
        assert_eq!(counts("iolab"), (Some(100.0), Some(100.0), Some(250.0), Some(250.0)));
        assert_eq!(counts("idle"), (Some(0.0), Some(0.0), Some(0.0), Some(0.0)), "cycles stop while halted: counted, none");
        // Layers only the cycles saw join with no time share; the time shares are the timer's.
        assert_eq!((get("iolab").self_share, get("device driver").self_share), (0.0, 0.0));
        assert_eq!(get("block layer").self_share, 0.5);
        let sum: f64 = p.layers.iter().filter_map(|l| l.self_cycles_per_io).sum();
        assert_eq!(sum, 600.0, "self cycles add up to every CPU's cycles per I/O");
        assert!(p.layers.iter().all(|l| l.self_loads_per_io.is_none() && l.self_stores_per_io.is_none()), "no memory events: no loads");
        assert_eq!((h.loads, h.stores, &h.event[..]), (None, None, "{cycles,instructions}:S"));
    }

    /// HotStorage'22 Table 2: loads and stores per kernel part. A group of cycles, instructions,
    /// L1-dcache-loads and L1-dcache-stores, its samples laid out byte for byte as perf_event_open(2)
    /// writes them (read_format GROUP: nr = 4, the leader's value first), decoded and charged per
    /// layer exactly as instructions are; and a group whose PMU refused the loads event (values
    /// shift: cycles, instructions, stores).
    #[test]
    fn loads_and_stores_are_decoded_from_the_group_and_charged_per_layer() {
        use Counter::*;
        let k = KernelSymbols::parse(KALLSYMS).unwrap();
        let maps = UserMaps::parse("00400000-00500000 r-xp 00000000 08:01 1 /usr/bin/iolab\n", Some("/usr/bin/iolab".into()));
        let all = [Cycles, Instructions, Loads, Stores];
        // nvme under the block layer under a system call; then the block layer alone; then iolab.
        let nvme = [0xffffffffc0001010, 0xffffffff81200010, 0xffffffff81100010];
        let mut data = group_sample(nvme[0], 42, 42, &[3000, 1000, 300, 100], &nvme);
        data.extend(group_sample(0xffffffff81200010, 42, 42, &[5000, 2500, 800, 250], &[0xffffffff81200010, 0xffffffff81100010]));
        data.extend(group_sample(0x400200, 42, 42, &[6000, 5000, 1800, 650], &[0x400200]));
        assert_eq!(&data[24..32], &4u64.to_ne_bytes(), "the group's nr: four values");
        let (mut hw, mut lost, mut last) = (Vec::new(), 0, Counts::default());
        decode_group(&data, &all, &mut last, &mut hw, &mut lost);
        let counts: Vec<(u64, u64)> = hw.iter().map(|(_, c)| (c.loads, c.stores)).collect();
        assert_eq!(counts, vec![(300, 100), (500, 150), (1000, 400)], "loads and stores since the previous sample");
        assert_eq!((last.loads, last.stores), (1800, 650));
        let time = vec![Sample { pid: 42, tid: 42, chain: nvme.to_vec() }];
        let mut p = attribute(&time, 0, &k, &maps, 42, 10);
        let h = attribute_counts(&mut p.layers, &hw, &all, 0, &k, &maps, 42, 10);
        assert_eq!(h.event, "{cycles,instructions,L1-dcache-loads,L1-dcache-stores}:S");
        assert_eq!((h.loads, h.stores, h.loads_per_io, h.stores_per_io), (Some(1800), Some(650), Some(180.0), Some(65.0)));
        let get = |n: &str| {
            let l = p.layers.iter().find(|l| l.layer == n).unwrap();
            (l.self_loads_per_io, l.inclusive_loads_per_io, l.self_stores_per_io, l.inclusive_stores_per_io)
        };
        assert_eq!(get("device driver"), (Some(30.0), Some(30.0), Some(10.0), Some(10.0)));
        assert_eq!(get("block layer"), (Some(50.0), Some(80.0), Some(15.0), Some(25.0)));
        assert_eq!(get("system call entry and exit"), (Some(0.0), Some(80.0), Some(0.0), Some(25.0)));
        assert_eq!(get("iolab"), (Some(100.0), Some(100.0), Some(40.0), Some(40.0)), "a layer only the cycles saw");
        let self_loads: f64 = p.layers.iter().filter_map(|l| l.self_loads_per_io).sum();
        assert_eq!(self_loads, 180.0, "self loads add up to every CPU's loads per I/O");
        // In the record: per layer and in the group's totals, by name.
        let json = serde_json::to_value(&p.layers).unwrap();
        assert!(json.as_array().unwrap().iter().any(|l| l["self_loads_per_io"] == 30.0 && l["self_stores_per_io"] == 10.0));

        // The PMU refused L1-dcache-loads: the group reads cycles, instructions, stores.
        let layout = [Cycles, Instructions, Stores];
        let data = group_sample(nvme[0], 42, 42, &[3000, 1000, 100], &nvme);
        let (mut hw, mut last) = (Vec::new(), Counts::default());
        decode_group(&data, &layout, &mut last, &mut hw, &mut lost);
        assert_eq!(hw[0].1, Counts { cycles: 3000, instructions: 1000, loads: 0, stores: 100 });
        let mut p = attribute(&time, 0, &k, &maps, 42, 10);
        let h = attribute_counts(&mut p.layers, &hw, &layout, 0, &k, &maps, 42, 10);
        assert_eq!((h.loads, h.stores), (None, Some(100)));
        assert_eq!(get_loads(&p, "device driver"), (None, Some(10.0)), "loads not counted: absent, never 0");
    }

    fn get_loads(p: &LayerProfile, n: &str) -> (Option<f64>, Option<f64>) {
        let l = p.layers.iter().find(|l| l.layer == n).unwrap();
        (l.self_loads_per_io, l.self_stores_per_io)
    }

    #[test]
    fn our_own_functions_are_named_from_the_binary() {
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        let image = ElfImage::parse(&std::fs::read(&me).unwrap());
        assert!(image.functions.iter().any(|f| f.2.contains("ElfImage::parse")), "the test binary's symbols hold this very function");
        let maps = UserMaps::of_process(std::process::id());
        let ip = ElfImage::parse as fn(&[u8]) -> ElfImage as usize as u64;
        let (layer, name) = maps.layer(ip);
        assert_eq!(layer, "iolab");
        assert!(name.contains("ElfImage::parse"), "{name}");
    }

    /// A profile recorded with `IOLAB_PROFILE_DUMP` (tests/fixtures/profile/NAME, a 2-CPU
    /// kernel): its samples, attributed as the run did (300 I/Os), and the kallsyms lines that name
    /// them. iolab's binary is not kept, so its own frames stay unnamed (`iolab`, the file).
    fn recorded(name: &str) -> (Vec<Sample>, LayerProfile, KernelSymbols) {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/profile").join(name);
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap();
        let (mut samples, mut lost) = (Vec::new(), 0);
        for cpu in 0..2 {
            decode(&std::fs::read(dir.join(format!("cpu{cpu}.raw"))).unwrap(), &mut samples, &mut lost);
        }
        assert_eq!(lost, 0, "{name}");
        let syms = KernelSymbols::parse(&read("kallsyms")).unwrap();
        let maps = UserMaps::parse(&read("maps"), Some(read("exe").trim().to_string()));
        let pid = read("pid").trim().parse().unwrap();
        let p = attribute(&samples, lost, &syms, &maps, pid, 300);
        (samples, p, syms)
    }

    /// Samples with `function` anywhere in their kernel chain.
    fn through(samples: &[Sample], syms: &KernelSymbols, function: &str) -> usize {
        let named = |ip: u64| is_kernel(ip).then(|| syms.lookup(ip)).flatten().map(|x| x.0);
        samples.iter().filter(|s| s.chain.iter().any(|&ip| named(ip) == Some(function))).count()
    }

    fn layer<'a>(p: &'a LayerProfile, name: &str) -> &'a LayerShare {
        p.layers.iter().find(|l| l.layer == name).unwrap_or_else(|| panic!("no layer {name}: {:?}", p.layers))
    }

    /// psync reads of a file on ext4 over virtio-blk on this VM's 6.18 (1578 samples, other
    /// developers' builds among them): the file system, block and virtio driver layers with their
    /// functions, the completions in the block softirq of virtio's interrupt.
    #[test]
    fn a_recorded_6_18_virtio_profile_shows_file_system_block_and_driver_layers() {
        let (samples, p, syms) = recorded("6.18-ext4-virtio-psync");
        assert_eq!(p.samples, 1578);
        for (l, f) in [("file system", "ext4_file_read_iter"), ("block layer", "blk_mq_submit_bio"), ("device driver", "virtio_queue_rq")] {
            assert!(layer(&p, l).inclusive_share > 0.0 && through(&samples, &syms, f) > 0, "{l}: {f}");
            assert_eq!(kernel_layer(f, None), l);
        }
        // virtio-blk is built in here: its queue notification, an MMIO write, is most of the driver.
        assert_eq!(layer(&p, "device driver").top_functions[0].0, "iowrite16");
        assert_eq!((p.run.modules[0].module.as_str(), p.run.modules[0].layer.as_str()), ("vmlinux", "device driver"));
        assert!(through(&samples, &syms, "virtblk_request_done") > 0 && through(&samples, &syms, "blk_done_softirq") > 0);
        assert!(through(&samples, &syms, "common_interrupt") > 50, "virtio's interrupt, then its softirq");
        // iolab's own frames without its binary: the layer is right, the function is the file.
        assert!(layer(&p, "iolab").top_functions.iter().all(|f| f.0 == "iolab"));
    }

    /// io_uring reads at QD1 on the emulated NVMe namespace of the rig's Debian 6.1 guest (nvme is
    /// a module there), by interrupt and with IOPOLL (tests/vm/guest/profile.sh).
    #[test]
    fn recorded_6_1_nvme_profiles_show_the_nvme_module_and_polling_only_when_polled() {
        let (irq, pi, si) = recorded("6.1-nvme-uring-irq");
        let (poll, pp, sp) = recorded("6.1-nvme-uring-poll");
        for (p, s, samples) in [(&pi, &si, &irq), (&pp, &sp, &poll)] {
            // nvme_queue_rq's doorbell write, with the unlock right after it counted as the driver's.
            assert_eq!(layer(p, "device driver").top_functions[0].0, "nvme_queue_rq");
            let nvme = p.run.modules.iter().find(|m| m.module == "nvme").unwrap();
            assert!(nvme.layer == "device driver" && nvme.share > 0.2, "{nvme:?}");
            assert!(layer(p, "rest of kernel").top_functions.iter().all(|f| !f.0.starts_with("_raw_spin")));
            // The nvme interrupt handler runs with interrupts off, where the cpu-clock timer's
            // interrupt waits: it is never sampled, and no device interrupt shows on 6.1.
            assert_eq!((through(samples, s, "nvme_irq"), through(samples, s, "common_interrupt")), (0, 0));
        }
        for f in ["io_do_iopoll", "bio_poll", "blk_mq_poll", "nvme_poll"] {
            assert_eq!(through(&irq, &si, f), 0, "{f} in the interrupt run");
            assert!(through(&poll, &sp, f) > 0, "{f} in the polled run");
        }
        assert!(layer(&pp, "device driver").top_functions.iter().any(|f| f.0 == "nvme_poll"));
    }
}
