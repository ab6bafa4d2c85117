//! Attribution: every sample charged to its layers (self and inclusive), the run's own CPU by
//! space, module and function, the hardware counts per layer, and the result types the record
//! keeps.
use super::decode::{Counter, Counts, Sample};
use super::events::{CYCLES, HW_SAMPLE_HZ, INSTRUCTIONS, LOADS, PERIOD_NS, STORES};
use super::frames::{frame, is_the_runs, self_frame};
use super::symbols::{is_kernel, KernelSymbols, UserMaps};
use serde::Serialize;
use std::collections::HashMap;

/// A profile in the record: the layers, or why there are none.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(untagged)]
pub enum ProfileResult {
    Measured(Box<LayerProfile>),
    Unavailable { unavailable: String },
}

/// One layer's share of the samples.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LayerShare {
    pub layer: String,
    /// Samples whose innermost frame is in this layer, as a share of all samples.
    pub self_share: f64,
    /// Samples with this layer anywhere in the chain.
    pub inclusive_share: f64,
    /// CPU time per I/O, self and inclusive (samples x period / I/Os), system-wide.
    pub self_ns_per_io: Option<f64>,
    pub inclusive_ns_per_io: Option<f64>,
    /// The functions with the most self samples in this layer, with their share of all samples.
    pub top_functions: Vec<(String, f64)>,
    /// Cycles and instructions per I/O, self and inclusive, where the CPUs count them (the
    /// hardware samples' counts, system-wide, / I/Os); absent where they do not (`hardware`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_cycles_per_io: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive_cycles_per_io: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_instructions_per_io: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive_instructions_per_io: Option<f64>,
    /// Load and store instructions per I/O, self and inclusive, where the PMU counts them
    /// (HotStorage'22 Table 2: loads and stores per kernel part); absent where it does not
    /// (`hardware.memory_unavailable` says which event was refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_loads_per_io: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive_loads_per_io: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_stores_per_io: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inclusive_stores_per_io: Option<f64>,
}

impl LayerShare {
    /// A layer no time sample landed in: no share, no counts yet.
    fn empty(layer: &str, ios: u64) -> LayerShare {
        let per_io = (ios > 0).then_some(0.0);
        LayerShare {
            layer: layer.to_string(),
            self_share: 0.0,
            inclusive_share: 0.0,
            self_ns_per_io: per_io,
            inclusive_ns_per_io: per_io,
            top_functions: Vec::new(),
            self_cycles_per_io: None,
            inclusive_cycles_per_io: None,
            self_instructions_per_io: None,
            inclusive_instructions_per_io: None,
            self_loads_per_io: None,
            inclusive_loads_per_io: None,
            self_stores_per_io: None,
            inclusive_stores_per_io: None,
        }
    }

    /// Its per-I/O counts from the counts charged to it, self and inclusive, for the counters
    /// the group had (`counted`).
    fn set_counts(&mut self, [own, inclusive]: &[Counts; 2], counted: &[Counter], ios: u64) {
        let per_io = |c: Counter, n: u64| (ios > 0 && counted.contains(&c)).then(|| n as f64 / ios as f64);
        self.self_cycles_per_io = per_io(Counter::Cycles, own.cycles);
        self.inclusive_cycles_per_io = per_io(Counter::Cycles, inclusive.cycles);
        self.self_instructions_per_io = per_io(Counter::Instructions, own.instructions);
        self.inclusive_instructions_per_io = per_io(Counter::Instructions, inclusive.instructions);
        self.self_loads_per_io = per_io(Counter::Loads, own.loads);
        self.inclusive_loads_per_io = per_io(Counter::Loads, inclusive.loads);
        self.self_stores_per_io = per_io(Counter::Stores, own.stores);
        self.inclusive_stores_per_io = per_io(Counter::Stores, inclusive.stores);
    }
}

/// The run's own CPU time by user and kernel space, module and function, as IISWC'19 Fig 14
/// split it (VTune there): the samples of iolab's threads (workers, io-wq, SQPOLL, AIO helpers)
/// and interrupt work that landed on an idle CPU (charged to no task: a completion's interrupt
/// and softirq while the submitter sleeps); other processes and idle left out.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct RunCpu {
    pub samples: u64,
    /// Shares of `samples` whose innermost frame is in user space and in the kernel (they add up to 1).
    pub user_share: f64,
    pub kernel_share: f64,
    /// The run's CPU time per I/O (samples x period / I/Os).
    pub ns_per_io: Option<f64>,
    /// By space, module and layer, largest first: a module is the kernel module from
    /// /proc/kallsyms (`nvme`, `virtio_blk`; `vmlinux` for built-in code, split by layer, so
    /// blk-mq and the scheduler show apart) or the mapped file of a user frame (`iolab`, `libc.so.6`).
    pub modules: Vec<ModuleShare>,
    /// The functions with the most self samples (at most [`TOP_FUNCTIONS`]), largest first.
    pub functions: Vec<FunctionShare>,
}

/// Functions kept in [`RunCpu::functions`]: VTune's function view as IISWC'19 Fig 14(b) read it
/// (two functions held 84 % there).
pub const TOP_FUNCTIONS: usize = 20;

/// "user" or "kernel": where a sample's innermost frame ran.
pub type Space = &'static str;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ModuleShare {
    pub space: Space,
    pub module: String,
    pub layer: String,
    /// Self samples over the run's samples.
    pub share: f64,
    pub ns_per_io: Option<f64>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FunctionShare {
    pub space: Space,
    pub module: String,
    pub layer: String,
    pub function: String,
    pub share: f64,
    pub ns_per_io: Option<f64>,
}

/// `--profile layers` in the record (`cost.profile`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LayerProfile {
    /// "cpu-clock": a timer, not a hardware counter (no PMU is needed).
    pub event: &'static str,
    pub period_ns: u64,
    /// Samples taken on every CPU over the window, and samples the kernel dropped.
    pub samples: u64,
    pub lost: u64,
    /// The cycles and instructions samples beside the timer's, or why there are none.
    pub hardware: Hardware,
    /// Largest self share first; idle included, so the shares sum to 1.
    pub layers: Vec<LayerShare>,
    /// The run's own CPU by space, module and function.
    pub run: RunCpu,
    /// The same job run just before without profiling, so the profile's own cost shows: the
    /// profiled run's figures are never the ones to compare configurations by.
    pub unprofiled: Option<Unprofiled>,
    /// The run's own samples as a flame graph's stacks (`iolab report` draws it).
    pub flame: Option<crate::meters::flame::Flame>,
}

/// Hardware counts in the record: the cycles group's samples, or why the CPUs count none.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(untagged)]
pub enum Hardware {
    Counted(Box<HardwareCounts>),
    Unavailable { unavailable: String },
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct HardwareCounts {
    /// `{cycles,instructions,L1-dcache-loads,L1-dcache-stores}:S` in perf's words (the events the
    /// PMU took): cycles sample, each sample reads them all.
    pub event: String,
    /// Samples asked per CPU and second (the kernel sets the cycle period to meet it).
    pub sample_hz: u64,
    pub samples: u64,
    pub lost: u64,
    /// Every CPU's cycles and instructions over the window, and per I/O.
    pub cycles: u64,
    pub instructions: u64,
    pub cycles_per_io: Option<f64>,
    pub instructions_per_io: Option<f64>,
    /// Every CPU's retired loads and stores over the window, and per I/O, where the PMU counted
    /// them; else `memory_unavailable` says which event it refused and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loads: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stores: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loads_per_io: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stores_per_io: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_unavailable: Option<String>,
}

/// An unprofiled run of the same job, beside the profiled one.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Unprofiled {
    pub iops: f64,
    pub mean_latency_ns: Option<f64>,
    /// Profiled IOPS / unprofiled IOPS - 1 (negative: profiling slowed the run).
    pub iops_change: f64,
    /// Profiled mean latency / unprofiled - 1.
    pub mean_latency_change: Option<f64>,
}

impl Unprofiled {
    /// The comparison of a profiled run's IOPS and mean latency with an unprofiled run's.
    pub fn compare(profiled: (f64, Option<f64>), unprofiled: (f64, Option<f64>)) -> Unprofiled {
        let change = |a: f64, b: f64| if b > 0.0 { a / b - 1.0 } else { 0.0 };
        Unprofiled {
            iops: unprofiled.0,
            mean_latency_ns: unprofiled.1,
            iops_change: change(profiled.0, unprofiled.0),
            mean_latency_change: profiled.1.zip(unprofiled.1).map(|(a, b)| change(a, b)),
        }
    }
}

/// Put every sample in its layers.
pub fn attribute(samples: &[Sample], lost: u64, syms: &KernelSymbols, maps: &UserMaps, own_pid: u32, ios: u64) -> LayerProfile {
    let mut selfs: HashMap<&'static str, u64> = HashMap::new();
    let mut incl: HashMap<&'static str, u64> = HashMap::new();
    let mut funcs: HashMap<(&'static str, String), u64> = HashMap::new();
    let mut run: HashMap<RunFrame, u64> = HashMap::new();
    // Other processes by name, each read from /proc once, not once per frame.
    let mut names: HashMap<u32, String> = HashMap::new();
    for s in samples {
        let mut seen: Vec<&'static str> = Vec::new();
        for (depth, &ip) in s.chain[self_frame(&s.chain, syms)..].iter().enumerate() {
            let (layer, module, function) = frame(ip, s.pid, syms, maps, own_pid, &mut names);
            if depth == 0 {
                *selfs.entry(layer).or_default() += 1;
                let ours = is_the_runs(s.pid, own_pid, layer);
                if ours {
                    let space = if is_kernel(ip) { "kernel" } else { "user" };
                    *run.entry((space, module, layer, function.clone())).or_default() += 1;
                }
                *funcs.entry((layer, function)).or_default() += 1;
            }
            if !seen.contains(&layer) {
                seen.push(layer);
                *incl.entry(layer).or_default() += 1;
            }
        }
    }
    let total = samples.len() as u64;
    let share = |n: u64| if total == 0 { 0.0 } else { n as f64 / total as f64 };
    let per_io = |n: u64| (ios > 0).then(|| (n * PERIOD_NS) as f64 / ios as f64);
    let mut layers: Vec<LayerShare> = incl
        .iter()
        .map(|(&layer, &inc)| {
            let own = selfs.get(layer).copied().unwrap_or(0);
            let mut top: Vec<(String, u64)> = funcs.iter().filter(|((l, _), _)| *l == layer).map(|((_, f), n)| (f.clone(), *n)).collect();
            top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            LayerShare {
                layer: layer.to_string(),
                self_share: share(own),
                inclusive_share: share(inc),
                self_ns_per_io: per_io(own),
                inclusive_ns_per_io: per_io(inc),
                top_functions: top.into_iter().take(3).map(|(f, n)| (f, share(n))).collect(),
                self_cycles_per_io: None,
                inclusive_cycles_per_io: None,
                self_instructions_per_io: None,
                inclusive_instructions_per_io: None,
                self_loads_per_io: None,
                inclusive_loads_per_io: None,
                self_stores_per_io: None,
                inclusive_stores_per_io: None,
            }
        })
        .collect();
    layers.sort_by(|a, b| b.self_share.total_cmp(&a.self_share).then(a.layer.cmp(&b.layer)));
    let hardware = Hardware::Unavailable { unavailable: "not sampled".into() };
    LayerProfile {
        event: "cpu-clock",
        period_ns: PERIOD_NS,
        samples: total,
        lost,
        hardware,
        layers,
        run: run_cpu(&run, ios),
        unprofiled: None,
        flame: None,
    }
}

/// Charge every hardware sample's counts (cycles, instructions, and loads and stores where the
/// group had them: `counted`) to its layers, self (the innermost frame's) and inclusive (each
/// layer of its chain once), as the time is charged, and fill the layers' per-I/O counts; a layer
/// only the hardware samples saw joins with no time share.
#[allow(clippy::too_many_arguments)]
pub fn attribute_counts(
    layers: &mut Vec<LayerShare>,
    samples: &[(Sample, Counts)],
    counted: &[Counter],
    lost: u64,
    syms: &KernelSymbols,
    maps: &UserMaps,
    own_pid: u32,
    ios: u64,
) -> HardwareCounts {
    let mut by_layer: HashMap<&'static str, [Counts; 2]> = HashMap::new();
    let mut names: HashMap<u32, String> = HashMap::new();
    let mut total = Counts::default();
    for (s, counts) in samples {
        total += *counts;
        let mut seen: Vec<&'static str> = Vec::new();
        // A lock's counts are its caller's, as its time is (`self_frame`).
        for (depth, &ip) in s.chain[self_frame(&s.chain, syms)..].iter().enumerate() {
            let layer = frame(ip, s.pid, syms, maps, own_pid, &mut names).0;
            let entry = by_layer.entry(layer).or_default();
            if depth == 0 {
                entry[0] += *counts;
            }
            if !seen.contains(&layer) {
                seen.push(layer);
                entry[1] += *counts;
            }
        }
    }
    let per_io = |n: u64| (ios > 0).then(|| n as f64 / ios as f64);
    // Counted: a layer no hardware sample landed in has none, not unknown.
    layers.iter_mut().for_each(|l| l.set_counts(&[Counts::default(); 2], counted, ios));
    for (&layer, counts) in &by_layer {
        let at = match layers.iter().position(|l| l.layer == layer) {
            Some(at) => at,
            None => {
                layers.push(LayerShare::empty(layer, ios));
                layers.len() - 1
            }
        };
        layers[at].set_counts(counts, counted, ios);
    }
    let names: Vec<&str> = counted
        .iter()
        .map(|c| match c {
            Counter::Cycles => CYCLES.0,
            Counter::Instructions => INSTRUCTIONS.0,
            Counter::Loads => LOADS.0,
            Counter::Stores => STORES.0,
        })
        .collect();
    let has = |c: Counter, n: u64| counted.contains(&c).then_some(n);
    HardwareCounts {
        event: format!("{{{}}}:S", names.join(",")),
        sample_hz: HW_SAMPLE_HZ,
        samples: samples.len() as u64,
        lost,
        cycles: total.cycles,
        instructions: total.instructions,
        cycles_per_io: per_io(total.cycles),
        instructions_per_io: per_io(total.instructions),
        loads: has(Counter::Loads, total.loads),
        stores: has(Counter::Stores, total.stores),
        loads_per_io: has(Counter::Loads, total.loads).and_then(per_io),
        stores_per_io: has(Counter::Stores, total.stores).and_then(per_io),
        memory_unavailable: None,
    }
}

/// Where one of the run's own samples was: (space, module, layer, function).
type RunFrame = (Space, String, &'static str, String);

/// The run's samples by space, module and layer, and its busiest functions.
fn run_cpu(run: &HashMap<RunFrame, u64>, ios: u64) -> RunCpu {
    let total: u64 = run.values().sum();
    let share = |n: u64| if total == 0 { 0.0 } else { n as f64 / total as f64 };
    let per_io = |n: u64| (ios > 0).then(|| (n * PERIOD_NS) as f64 / ios as f64);
    let mut modules: HashMap<(Space, &str, &str), u64> = HashMap::new();
    for ((space, module, layer, _), n) in run {
        *modules.entry((space, module, layer)).or_default() += n;
    }
    let mut modules: Vec<ModuleShare> = modules
        .into_iter()
        .map(|((space, module, layer), n)| ModuleShare {
            space,
            module: module.to_string(),
            layer: layer.to_string(),
            share: share(n),
            ns_per_io: per_io(n),
        })
        .collect();
    modules.sort_by(|a, b| b.share.total_cmp(&a.share).then((a.space, &a.module, &a.layer).cmp(&(b.space, &b.module, &b.layer))));
    let mut functions: Vec<(&RunFrame, u64)> = run.iter().map(|(k, &n)| (k, n)).collect();
    functions.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let functions = functions
        .into_iter()
        .take(TOP_FUNCTIONS)
        .map(|((space, module, layer, function), n)| FunctionShare {
            space,
            module: module.clone(),
            layer: layer.to_string(),
            function: function.clone(),
            share: share(n),
            ns_per_io: per_io(n),
        })
        .collect();
    let user: u64 = run.iter().filter(|(k, _)| k.0 == "user").map(|(_, n)| n).sum();
    RunCpu { samples: total, user_share: share(user), kernel_share: share(total - user), ns_per_io: per_io(total), modules, functions }
}
