//! Counters through perf_event_open: hardware (instructions, cycles, cache references and
//! misses) where the machine has a PMU, software (task clock, context switches, page faults)
//! everywhere. Counted for the workload threads and system-wide (one counter per CPU).
use perf_event_open_sys as sys;
use serde::Serialize;
use sys::bindings as b;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Instructions,
    Cycles,
    CacheReferences,
    CacheMisses,
    TaskClock,
    ContextSwitches,
    PageFaults,
}

pub const EVENTS: [Event; 7] = [
    Event::Instructions,
    Event::Cycles,
    Event::CacheReferences,
    Event::CacheMisses,
    Event::TaskClock,
    Event::ContextSwitches,
    Event::PageFaults,
];

impl Event {
    fn type_config(self) -> (u32, u64) {
        match self {
            Event::Instructions => (b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_INSTRUCTIONS as u64),
            Event::Cycles => (b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_CPU_CYCLES as u64),
            Event::CacheReferences => (b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_CACHE_REFERENCES as u64),
            Event::CacheMisses => (b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_CACHE_MISSES as u64),
            Event::TaskClock => (b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_TASK_CLOCK as u64),
            Event::ContextSwitches => (b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64),
            Event::PageFaults => (b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_PAGE_FAULTS as u64),
        }
    }
    fn hardware(self) -> bool {
        self.type_config().0 == b::PERF_TYPE_HARDWARE
    }
}

/// Open one counter, counting from now. pid -1 + cpu N = that CPU system-wide; pid T + cpu -1 = thread T.
pub fn open(event: Event, pid: i32, cpu: i32) -> Result<i32, std::io::Error> {
    let (ty, config) = event.type_config();
    // SAFETY: zero is a valid perf_event_attr; we fill the fields the kernel needs.
    let mut attr: b::perf_event_attr = unsafe { std::mem::zeroed() };
    attr.type_ = ty;
    attr.size = std::mem::size_of::<b::perf_event_attr>() as u32;
    attr.config = config;
    attr.read_format = (b::PERF_FORMAT_TOTAL_TIME_ENABLED | b::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;
    let fd = unsafe { sys::perf_event_open(&mut attr, pid, cpu, -1, b::PERF_FLAG_FD_CLOEXEC as libc::c_ulong) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// Read a counter, scaled for multiplexing; None when it never ran.
pub fn read(fd: i32) -> Option<u64> {
    let mut v = [0u64; 3];
    // SAFETY: v has room for value, time_enabled, time_running.
    let n = unsafe { libc::read(fd, v.as_mut_ptr() as *mut libc::c_void, 24) };
    if n != 24 || v[2] == 0 {
        return None;
    }
    Some(if v[2] < v[1] { (v[0] as f64 * v[1] as f64 / v[2] as f64) as u64 } else { v[0] })
}

/// Counter totals for one scope.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CounterValues {
    pub instructions: Option<u64>,
    pub cycles: Option<u64>,
    pub cache_references: Option<u64>,
    pub cache_misses: Option<u64>,
    pub task_clock_ns: Option<u64>,
    pub context_switches: Option<u64>,
    pub page_faults: Option<u64>,
}

impl CounterValues {
    fn set(&mut self, e: Event, v: Option<u64>) {
        let slot = match e {
            Event::Instructions => &mut self.instructions,
            Event::Cycles => &mut self.cycles,
            Event::CacheReferences => &mut self.cache_references,
            Event::CacheMisses => &mut self.cache_misses,
            Event::TaskClock => &mut self.task_clock_ns,
            Event::ContextSwitches => &mut self.context_switches,
            Event::PageFaults => &mut self.page_faults,
        };
        *slot = match (*slot, v) {
            (Some(a), Some(b)) => Some(a + b),
            (None, x) | (x, None) => x,
        };
    }
}

/// Open counters for a set of threads and for every CPU; read them once at the end.
pub struct CounterSet {
    fds: Vec<(bool, Event, i32)>,
    pub hardware_unavailable: Option<String>,
    pub system_unavailable: Option<String>,
}

impl CounterSet {
    pub fn start(tids: &[i32], ncpu: usize) -> CounterSet {
        let mut set = CounterSet { fds: Vec::new(), hardware_unavailable: None, system_unavailable: None };
        for e in EVENTS {
            if e.hardware() && set.hardware_unavailable.is_some() {
                continue;
            }
            for &t in tids {
                match open(e, t, -1) {
                    Ok(fd) => set.fds.push((false, e, fd)),
                    Err(err) if e.hardware() => {
                        set.hardware_unavailable = Some(format!("no hardware performance counters (perf_event_open: {err}); a VM without a virtual PMU cannot count instructions or cycles"));
                        break;
                    }
                    Err(_) => {}
                }
            }
            if e.hardware() && set.hardware_unavailable.is_some() {
                continue;
            }
            for cpu in 0..ncpu as i32 {
                match open(e, -1, cpu) {
                    Ok(fd) => set.fds.push((true, e, fd)),
                    Err(err) => {
                        set.system_unavailable.get_or_insert_with(|| {
                            format!("system-wide counters unavailable (perf_event_open: {err}; see /proc/sys/kernel/perf_event_paranoid)")
                        });
                        break;
                    }
                }
            }
        }
        set
    }

    /// (workload threads, system-wide) totals; closes the counters.
    pub fn finish(self) -> (CounterValues, CounterValues) {
        let (mut threads, mut system) = (CounterValues::default(), CounterValues::default());
        for (sys_wide, e, fd) in self.fds {
            let v = read(fd);
            // SAFETY: fd came from perf_event_open and is closed once.
            unsafe { libc::close(fd) };
            if sys_wide {
                system.set(e, v)
            } else {
                threads.set(e, v)
            }
        }
        (threads, system)
    }
}
