//! Decoding perf's ring-buffer records: the cpu-clock samples (process, thread, call chain) and
//! the hardware group's samples with the values of each counter.
use perf_event_open_sys::bindings as b;

/// One decoded sample: process, thread and call chain (innermost first, context markers removed).
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub pid: u32,
    pub tid: u32,
    pub chain: Vec<u64>,
}

/// Decode the records of a ring buffer's data (already unwrapped): samples and the lost count.
/// Layout for sample_type IP | TID | CALLCHAIN: header, ip, pid, tid, nr, ips[nr].
pub fn decode(data: &[u8], out: &mut Vec<Sample>, lost: &mut u64) {
    walk(data, 0, lost, |s, _| out.push(s));
}

/// Decode the records of a hardware group's ring (sample_type IP | TID | READ | CALLCHAIN,
/// read_format GROUP: header, ip, pid, tid, nr, values[nr], nr, ips[nr]): each sample with the
/// group's counts since the ring's previous sample. `layout` names the group's values in the
/// order the kernel writes them (the leader's first, then the members' in the order they joined:
/// cycles, instructions, then the memory events the PMU took). `last` holds the counts read so
/// far (the kernel reports totals since the group was enabled) and carries over between drains; a
/// lost sample's counts fall to the next one, so the totals stay whole.
pub fn decode_group(data: &[u8], layout: &[Counter], last: &mut Counts, out: &mut Vec<(Sample, Counts)>, lost: &mut u64) {
    walk(data, layout.len(), lost, |s, values| {
        let total = match values {
            Some(values) if values.len() >= layout.len() => {
                let mut total = Counts::default();
                layout.iter().zip(values).for_each(|(&c, v)| total.set(c, v));
                total
            }
            _ => *last,
        };
        out.push((s, total.since(last)));
        *last = total;
    });
}

/// Every sample of drained ring data, in the order the kernel writes a sample's fields (ip, tid,
/// read, callchain), with the group's `values` where the group reads any (its totals: the leader's
/// value first, then the members' in the order they joined); lost records counted.
fn walk(data: &[u8], values: usize, lost: &mut u64, mut sample: impl FnMut(Sample, Option<Vec<u64>>)) {
    let u32_at = |d: &[u8], o: usize| u32::from_ne_bytes(d[o..o + 4].try_into().unwrap());
    let u64_at = |d: &[u8], o: usize| d.get(o..o + 8).map(|w| u64::from_ne_bytes(w.try_into().unwrap()));
    for (kind, rec) in crate::meters::ring::records(data) {
        if kind == b::PERF_RECORD_SAMPLE && rec.len() >= 32 {
            let (pid, tid) = (u32_at(rec, 16), u32_at(rec, 20));
            let mut at = 24;
            let mut totals = None;
            if values > 0 {
                let nr = u64_at(rec, at).unwrap_or(0) as usize;
                totals = (0..nr).map(|i| u64_at(rec, at + 8 + 8 * i)).collect::<Option<Vec<u64>>>();
                at = (at + 8).saturating_add(nr.saturating_mul(8)).min(rec.len());
            }
            let nr = u64_at(rec, at).unwrap_or(0) as usize;
            let chain = (0..nr).filter_map(|i| u64_at(rec, at + 8 + 8 * i)).filter(|&ip| ip < b::PERF_CONTEXT_MAX).collect::<Vec<_>>();
            let chain = if chain.is_empty() { vec![u64_at(rec, 8).unwrap_or(0)] } else { chain };
            sample(Sample { pid, tid, chain }, totals);
        } else if kind == b::PERF_RECORD_LOST {
            *lost += u64_at(rec, 16).unwrap_or(0);
        }
    }
}

/// What a value of a hardware group counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counter {
    Cycles,
    Instructions,
    /// Retired load instructions: the generic L1D read accesses (`L1-dcache-loads`; on Intel
    /// MEM_INST_RETIRED.ALL_LOADS).
    Loads,
    /// Retired store instructions: the generic L1D write accesses (`L1-dcache-stores`; on Intel
    /// MEM_INST_RETIRED.ALL_STORES).
    Stores,
}

/// Cycles, instructions, loads and stores: a hardware sample's since the previous sample on its
/// CPU (a counter the group lacks stays 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub cycles: u64,
    pub instructions: u64,
    pub loads: u64,
    pub stores: u64,
}

impl Counts {
    fn set(&mut self, c: Counter, v: u64) {
        *match c {
            Counter::Cycles => &mut self.cycles,
            Counter::Instructions => &mut self.instructions,
            Counter::Loads => &mut self.loads,
            Counter::Stores => &mut self.stores,
        } = v;
    }

    /// The counts since `earlier` totals.
    fn since(&self, earlier: &Counts) -> Counts {
        Counts {
            cycles: self.cycles.saturating_sub(earlier.cycles),
            instructions: self.instructions.saturating_sub(earlier.instructions),
            loads: self.loads.saturating_sub(earlier.loads),
            stores: self.stores.saturating_sub(earlier.stores),
        }
    }
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.cycles += o.cycles;
        self.instructions += o.instructions;
        self.loads += o.loads;
        self.stores += o.stores;
    }
}
