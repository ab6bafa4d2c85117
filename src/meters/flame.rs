//! A profiled run's own samples as the stacks of a flame graph (`cost.profile.flame`): what
//! `perf script | stackcollapse` would give, with each frame's layer of the stack kept so the
//! report can colour it. The samples are the run's own, as in [`super::profile::RunCpu`]:
//! iolab's threads, and interrupt work that landed on an idle CPU.
use super::profile::decode::Sample;
use super::profile::frames::{frame, is_the_runs, self_frame};
use super::profile::symbols::{KernelSymbols, UserMaps};
use serde::Serialize;
use std::collections::HashMap;

/// Stacks kept in the record, most samples first. A 2 s psync run on virtio has ~600 distinct
/// stacks; the rest (rare ones) are summed into [`Flame::other_samples`] so a record stays small.
pub const MAX_STACKS: usize = 2000;

/// The root frame of the run's own threads and of interrupt work on an idle CPU.
pub const ROOT_OWN: &str = "iolab (the run's threads)";
pub const ROOT_IRQ_ON_IDLE: &str = "interrupts on an idle CPU";

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Flame {
    /// The run's own samples: every stack below, plus `other_samples`.
    pub samples: u64,
    /// Each distinct frame once; stacks refer to them by index.
    pub frames: Vec<FlameFrame>,
    /// (frame indices from the root outwards, samples), most samples first.
    pub stacks: Vec<(Vec<u32>, u64)>,
    /// Samples of stacks left out past [`MAX_STACKS`].
    pub other_samples: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq, Hash)]
pub struct FlameFrame {
    /// The function, with its kernel module or mapped file in brackets (`nvme_queue_rq [nvme]`).
    pub name: String,
    pub layer: String,
}

/// Fold the run's own samples into stacks, root first.
pub fn fold(samples: &[Sample], syms: &KernelSymbols, maps: &UserMaps, own_pid: u32) -> Flame {
    let mut frames: Vec<FlameFrame> = Vec::new();
    let mut index: HashMap<FlameFrame, u32> = HashMap::new();
    let mut intern = |f: FlameFrame| {
        *index.entry(f.clone()).or_insert_with(|| {
            frames.push(f);
            frames.len() as u32 - 1
        })
    };
    let mut stacks: HashMap<Vec<u32>, u64> = HashMap::new();
    // Other processes' names, read once each (`frame` names their user frames).
    let mut names = HashMap::new();
    for s in samples {
        let Some(&innermost) = s.chain.get(self_frame(&s.chain, syms)) else { continue };
        if !is_the_runs(s.pid, own_pid, frame(innermost, s.pid, syms, maps, own_pid, &mut names).0) {
            continue;
        }
        let root = if s.pid == own_pid { ROOT_OWN } else { ROOT_IRQ_ON_IDLE };
        let mut stack = vec![intern(FlameFrame { name: root.into(), layer: "iolab".into() })];
        for &ip in s.chain.iter().rev() {
            let (layer, module, function) = frame(ip, s.pid, syms, maps, own_pid, &mut names);
            // Built-in kernel code and a user file without symbols need no bracket.
            let name =
                if module.is_empty() || module == "vmlinux" || module == function { function } else { format!("{function} [{module}]") };
            stack.push(intern(FlameFrame { name, layer: layer.into() }));
        }
        *stacks.entry(stack).or_default() += 1;
    }
    let mut stacks: Vec<(Vec<u32>, u64)> = stacks.into_iter().collect();
    stacks.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let samples = stacks.iter().map(|s| s.1).sum();
    let other_samples = stacks.iter().skip(MAX_STACKS).map(|s| s.1).sum();
    stacks.truncate(MAX_STACKS);
    // Frames only the dropped stacks used stay listed: harmless, and renumbering costs more.
    Flame { samples, frames, stacks, other_samples }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "ffffffff81000000 T _stext\n\
        ffffffff81100000 T do_syscall_64\n\
        ffffffff81200000 T blk_mq_submit_bio\n\
        ffffffff81500000 T default_idle\n\
        ffffffff81600000 T handle_softirqs\n\
        ffffffff81700000 T blk_mq_end_request\n\
        ffffffffc0001000 t nvme_queue_rq\t[nvme]\n";

    #[test]
    fn samples_fold_into_stacks_of_the_run_root_first() {
        let syms = KernelSymbols::parse(KALLSYMS).unwrap();
        let maps = UserMaps::parse("", None);
        let ours = |chain: &[u64]| Sample { pid: 42, tid: 43, chain: chain.to_vec() };
        let samples = vec![
            // Innermost first, as perf writes a chain.
            ours(&[0xffffffffc0001010, 0xffffffff81200010, 0xffffffff81100010]),
            ours(&[0xffffffffc0001010, 0xffffffff81200010, 0xffffffff81100010]),
            ours(&[0xffffffff81200010, 0xffffffff81100010]),
            // A completion's softirq on an idle CPU: the run's; the idle loop itself is not.
            Sample { pid: 0, tid: 0, chain: vec![0xffffffff81700010, 0xffffffff81600010, 0xffffffff81500010] },
            Sample { pid: 0, tid: 0, chain: vec![0xffffffff81500010] },
            // Another process: not the run's.
            Sample { pid: 7, tid: 7, chain: vec![0xffffffff81100010] },
        ];
        let flame = fold(&samples, &syms, &maps, 42);
        assert_eq!(flame.samples, 4);
        assert_eq!(flame.other_samples, 0);
        let named = |stack: &[u32]| stack.iter().map(|&i| flame.frames[i as usize].name.as_str()).collect::<Vec<_>>();
        assert_eq!(named(&flame.stacks[0].0), [ROOT_OWN, "do_syscall_64", "blk_mq_submit_bio", "nvme_queue_rq [nvme]"]);
        assert_eq!(flame.stacks[0].1, 2);
        let irq = flame.stacks.iter().find(|s| flame.frames[s.0[0] as usize].name == ROOT_IRQ_ON_IDLE).unwrap();
        assert_eq!(named(&irq.0), [ROOT_IRQ_ON_IDLE, "default_idle", "handle_softirqs", "blk_mq_end_request"]);
        let nvme = flame.frames.iter().find(|f| f.name.starts_with("nvme_queue_rq")).unwrap();
        assert_eq!(nvme.layer, "device driver");
    }

    #[test]
    fn stacks_past_the_cap_are_summed() {
        let syms = KernelSymbols::parse(KALLSYMS).unwrap();
        let maps = UserMaps::parse("", None);
        // MAX_STACKS + 3 distinct stacks: unknown kernel addresses name themselves.
        let samples: Vec<Sample> =
            (0..MAX_STACKS as u64 + 3).map(|i| Sample { pid: 1, tid: 1, chain: vec![0xffffffff80000000 + i] }).collect();
        let flame = fold(&samples, &syms, &maps, 1);
        assert_eq!(flame.stacks.len(), MAX_STACKS);
        assert_eq!(flame.other_samples, 3);
        assert_eq!(flame.samples, MAX_STACKS as u64 + 3);
    }
}
