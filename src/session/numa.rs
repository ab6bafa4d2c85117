//! `--numa`: the CPUs a job's threads run on, from the node the targets' devices hang off (or
//! the node named), and what the record says was asked, chosen and seen.
use crate::device::sysinfo::TargetInfo;
use crate::engine::Placement;
use crate::failure::Failure;
use crate::meters::placement::NumaPlacement;
use crate::plan::{Job, Numa, Submit};

/// The placement for `job` on a machine whose nodes are `nodes` (`host::numa_nodes`; empty
/// where the kernel shows none: one node of every CPU) over targets described by `targets`.
/// Err: a node that does not exist (bad input), or `local` where no device names its node on
/// a machine of several (unsupported here).
pub(crate) fn resolve(job: &Job, targets: &[TargetInfo], nodes: &[(u32, Vec<usize>)]) -> Result<(Placement, NumaPlacement), Failure> {
    let one_node;
    let nodes = if nodes.is_empty() {
        one_node = [(0, (0..crate::host::online_cpus()).collect())];
        &one_node[..]
    } else {
        nodes
    };
    let unpinned = |note: String| {
        let p = Placement::of_job(job);
        let record = NumaPlacement {
            numa: job.workload.numa,
            node: None,
            node_cpus: Vec::new(),
            nodes: nodes.len(),
            note,
            worker_cpus: p.workers.clone(),
            sq_cpus: p.sq.clone(),
            threads: Vec::new(),
        };
        (p, record)
    };
    // The memory policy's nodes, before anything changes.
    if let Some(p) = job.io.options.thread.mem_policy {
        if let Some(n) = p.nodes().into_iter().find(|n| !nodes.iter().any(|(have, _)| have == n)) {
            let why = crate::host::missing_node(nodes, n).unwrap_or_default();
            return Err(Failure::invalid(why.replacen(&format!("--numa {n}"), &format!("--mem-policy {p}"), 1)));
        }
    }
    let mut extra: Vec<u32> = Vec::new();
    let (node, note) = match job.workload.numa {
        Numa::Off => {
            let how = if job.workload.cpus.is_empty() { "threads not pinned" } else { "threads pinned by --cpus" };
            return Ok(unpinned(format!("--numa off: {how}")));
        }
        Numa::Node(n) => (n, format!("node {n}, as named")),
        Numa::Nodes(m) => {
            let all = crate::interfaces::thread::mask_nodes(m);
            for n in &all {
                if let Some(why) = crate::host::missing_node(nodes, *n) {
                    return Err(Failure::invalid(why.replacen(&format!("--numa {n}:"), &format!("--numa {}:", job.workload.numa), 1)));
                }
            }
            extra = all[1..].to_vec();
            (all[0], format!("nodes {}, as named: their CPUs together", job.workload.numa))
        }
        Numa::Local => match targets.iter().find_map(|t| t.numa_node.map(|n| (n, &t.path))) {
            Some((n, path)) => (n, format!("node {n}, the one {path}'s device hangs off")),
            None if nodes.len() == 1 => (nodes[0].0, format!("node {}: the only NUMA node on this machine", nodes[0].0)),
            None => {
                let paths: Vec<&str> = targets.iter().map(|t| t.path.as_str()).collect();
                return Err(Failure::unsupported(format!(
                    "--numa local: no target's device names its NUMA node ({}), and this machine has {} nodes: name one with --numa NODE",
                    paths.join(", "),
                    nodes.len()
                )));
            }
        },
    };
    if let Some(why) = crate::host::missing_node(nodes, node) {
        return Err(Failure::invalid(why));
    }
    let mut cpus = nodes.iter().find(|(n, _)| *n == node).expect("the node exists").1.clone();
    for n in &extra {
        cpus.extend(&nodes.iter().find(|(have, _)| have == n).expect("checked above").1);
    }
    let cpus = &cpus;
    if cpus.is_empty() {
        return Err(Failure::unsupported(format!("--numa: NUMA node {node} has no CPU online")));
    }
    let sqpoll = job.io.submit == Submit::Sqpoll;
    let (workers, sq) = crate::host::cpus_on_node(cpus, job.workload.threads as usize, sqpoll);
    let shared = if job.workload.threads as usize + sq.len() > cpus.len() {
        format!("; {} threads on {} CPUs: some share a CPU", job.workload.threads as usize + sq.len(), cpus.len())
    } else {
        String::new()
    };
    let p = Placement { workers, sq: sq.iter().map(|&c| c as u32).collect() };
    let record = NumaPlacement {
        numa: job.workload.numa,
        node: Some(node),
        node_cpus: cpus.clone(),
        nodes: nodes.len(),
        note: format!("{note}{shared}"),
        worker_cpus: p.workers.clone(),
        sq_cpus: p.sq.clone(),
        threads: Vec::new(),
    };
    Ok((p, record))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::FailureKind;

    fn target(path: &str, node: Option<u32>) -> TargetInfo {
        TargetInfo { path: path.into(), numa_node: node, ..Default::default() }
    }

    fn job(numa: Numa, threads: u32, submit: Submit) -> Job {
        let mut j = Job::default();
        j.workload.numa = numa;
        j.workload.threads = threads;
        j.io.submit = submit;
        j
    }

    /// The two-node server of `host`'s fixture: node 0 has CPUs 0-3,8-11, node 1 4-7,12-15.
    fn two_nodes() -> Vec<(u32, Vec<usize>)> {
        vec![(0, vec![0, 1, 2, 3, 8, 9, 10, 11]), (1, vec![4, 5, 6, 7, 12, 13, 14, 15])]
    }

    #[test]
    fn local_is_the_devices_node_with_sqpoll_threads_beside_the_workers() {
        let (p, r) = resolve(&job(Numa::Local, 2, Submit::Sqpoll), &[target("/dev/nvme0n1", Some(1))], &two_nodes()).unwrap();
        assert_eq!(p, Placement { workers: vec![4, 5], sq: vec![6, 7] });
        assert_eq!((r.node, r.nodes, r.numa), (Some(1), 2, Numa::Local));
        assert_eq!(r.note, "node 1, the one /dev/nvme0n1's device hangs off");
        let (p, r) = resolve(&job(Numa::Node(0), 9, Submit::Syscall), &[target("/dev/nvme0n1", Some(1))], &two_nodes()).unwrap();
        assert_eq!(p.workers, vec![0, 1, 2, 3, 8, 9, 10, 11, 0]);
        assert!(p.sq.is_empty());
        assert!(r.note.ends_with("9 threads on 8 CPUs: some share a CPU"), "{}", r.note);
    }

    #[test]
    fn a_node_that_does_not_exist_is_refused_and_local_needs_a_node() {
        let e = resolve(&job(Numa::Node(2), 1, Submit::Syscall), &[], &two_nodes()).unwrap_err();
        assert_eq!(e.kind, FailureKind::Invalid);
        assert_eq!(
            e.message,
            "--numa 2: this machine has no NUMA node 2; its nodes are 0 (CPUs 0,1,2,3,8,9,10,11), 1 (CPUs 4,5,6,7,12,13,14,15)"
        );
        let e = resolve(&job(Numa::Local, 1, Submit::Syscall), &[target("/dev/vda", None)], &two_nodes()).unwrap_err();
        assert_eq!(e.kind, FailureKind::Unsupported);
        assert!(e.message.starts_with("--numa local: no target's device names its NUMA node (/dev/vda)"), "{}", e.message);
    }

    /// fio's numa_cpu_nodes=0-1: both nodes' CPUs; a node or a memory policy's node that does
    /// not exist is refused before anything changes.
    #[test]
    fn several_nodes_pin_to_their_cpus_together_and_missing_ones_are_refused() {
        let (p, r) = resolve(&job(Numa::Nodes(3), 10, Submit::Syscall), &[], &two_nodes()).unwrap();
        assert_eq!(p.workers, vec![0, 1, 2, 3, 8, 9, 10, 11, 4, 5]);
        assert_eq!((r.node, r.node_cpus.len(), r.note.as_str()), (Some(0), 16, "nodes 0-1, as named: their CPUs together"));
        let e = resolve(&job(Numa::Nodes(5), 1, Submit::Syscall), &[], &two_nodes()).unwrap_err();
        assert_eq!(e.kind, FailureKind::Invalid);
        assert!(e.message.starts_with("--numa 0,2: this machine has no NUMA node 2; its nodes are 0"), "{}", e.message);
        let mut j = job(Numa::Off, 1, Submit::Syscall);
        j.io.options.thread.mem_policy = Some("interleave:0-2".parse().unwrap());
        let e = resolve(&j, &[], &two_nodes()).unwrap_err();
        assert!(e.message.starts_with("--mem-policy interleave:0-2: this machine has no NUMA node 2"), "{}", e.message);
    }

    #[test]
    fn on_one_node_local_is_that_node_and_off_pins_nothing() {
        let one = vec![(0, vec![0, 1])];
        let (p, r) = resolve(&job(Numa::Local, 1, Submit::Syscall), &[target("/tmp/f", None)], &one).unwrap();
        assert_eq!((p.workers, r.node, r.note.as_str()), (vec![0], Some(0), "node 0: the only NUMA node on this machine"));
        let (p, r) = resolve(&job(Numa::Off, 2, Submit::Syscall), &[], &one).unwrap();
        assert_eq!((p, r.node, r.note.as_str()), (Placement::default(), None, "--numa off: threads not pinned"));
        // No node directory at all (a kernel without NUMA): one node of every CPU.
        let (_, r) = resolve(&job(Numa::Node(0), 1, Submit::Syscall), &[], &[]).unwrap();
        assert_eq!((r.node, r.nodes, r.node_cpus.len()), (Some(0), 1, crate::host::online_cpus()));
    }
}
