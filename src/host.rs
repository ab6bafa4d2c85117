//! Facts about this machine: kernel, CPUs. Read by the plan checks, interfaces, meters and the
//! session; it imports nothing of iolab.

pub(crate) fn kernel_release() -> String {
    // SAFETY: uts is a valid out-pointer.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    unsafe { libc::uname(&mut uts) };
    unsafe { std::ffi::CStr::from_ptr(uts.release.as_ptr()) }.to_string_lossy().into_owned()
}

/// (major, minor) of the running kernel.
pub fn kernel_version() -> (u32, u32) {
    let r = kernel_release();
    let mut it = r.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse().ok());
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

/// CPUs online now.
pub(crate) fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    (unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).max(1) as usize
}

/// The CPU model, from /proc/cpuinfo.
pub fn cpu_model() -> Option<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split_once(':')).map(|(_, v)| v.trim().to_string())
}

/// This machine's name.
pub fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname").ok().map(|s| s.trim().to_string())
}

/// The NUMA node a block device's I/O comes from (e.g. `nvme0n1`), read from sysfs under `sys`:
/// the first `numa_node` walking up from `block/DEV/device` (an NVMe controller has its own,
/// then its PCI function). None where the kernel gives none, or -1: one node, or a virtual device.
pub(crate) fn device_numa_node_in(sys: &std::path::Path, dev: &str) -> Option<u32> {
    let mut at = std::fs::canonicalize(sys.join("block").join(dev).join("device")).ok()?;
    let top = std::fs::canonicalize(sys.join("devices")).ok()?;
    while at.starts_with(&top) && at != top {
        if let Some(n) = std::fs::read_to_string(at.join("numa_node")).ok().and_then(|s| s.trim().parse::<i64>().ok()) {
            return u32::try_from(n).ok();
        }
        at = at.parent()?.to_path_buf();
    }
    None
}

/// [`device_numa_node_in`] on this machine's /sys.
pub(crate) fn device_numa_node(dev: &str) -> Option<u32> {
    device_numa_node_in(std::path::Path::new("/sys"), dev)
}

/// The NUMA nodes of the machine under `sys` and each node's CPUs, in node order (empty where
/// sysfs has no node directory).
pub(crate) fn numa_nodes_in(sys: &std::path::Path) -> Vec<(u32, Vec<usize>)> {
    let mut nodes: Vec<(u32, Vec<usize>)> = std::fs::read_dir(sys.join("devices/system/node"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_str()?.strip_prefix("node")?.parse().ok()?;
            Some((n, parse_cpulist(std::fs::read_to_string(e.path().join("cpulist")).ok()?.trim())?))
        })
        .collect();
    nodes.sort();
    nodes
}

/// [`numa_nodes_in`] on this machine's /sys.
pub(crate) fn numa_nodes() -> Vec<(u32, Vec<usize>)> {
    numa_nodes_in(std::path::Path::new("/sys"))
}

/// Why `node` cannot be asked for on a machine whose nodes are `nodes` (None: it exists).
pub(crate) fn missing_node(nodes: &[(u32, Vec<usize>)], node: u32) -> Option<String> {
    if nodes.iter().any(|(n, _)| *n == node) {
        return None;
    }
    let list = |c: &[usize]| c.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
    let have: Vec<String> = nodes.iter().map(|(n, c)| format!("{n} (CPUs {})", list(c))).collect();
    Some(format!("--numa {node}: this machine has no NUMA node {node}; its nodes are {}", have.join(", ")))
}

/// The CPUs for a job's threads on a node whose CPUs are `cpus` (in order): worker t on the
/// t-th, round-robin when there are more threads than CPUs; with `sqpoll`, each worker's SQ
/// thread on a CPU after the workers' (CHEOPS'23 ran iou-s on two cores per thread: fio and the
/// kernel's poller on one core collapsed), so no two share a CPU while the node has enough.
pub(crate) fn cpus_on_node(cpus: &[usize], threads: usize, sqpoll: bool) -> (Vec<usize>, Vec<usize>) {
    let at = |i: usize| cpus[i % cpus.len()];
    let workers = (0..threads).map(at).collect();
    let sq = if sqpoll { (0..threads).map(|t| at(threads + t)).collect() } else { Vec::new() };
    (workers, sq)
}

/// A kernel CPU list ("0-3,8,10-11") as CPU numbers; None when it is not one.
pub fn parse_cpulist(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.trim().parse::<usize>().ok()?..=b.trim().parse::<usize>().ok()?),
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture tree of a two-node server: NVMe on node 1 (its PCI function says so; with the
    /// controller's own attribute saying -1, no node), a virtio disk with no node.
    #[test]
    fn numa_nodes_and_a_devices_node_from_sysfs() {
        let sys = tempfile::tempdir().unwrap();
        let s = sys.path();
        for (n, cpus) in [(0, "0-3,8-11"), (1, "4-7,12-15")] {
            let d = s.join(format!("devices/system/node/node{n}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("cpulist"), format!("{cpus}\n")).unwrap();
        }
        std::fs::create_dir_all(s.join("devices/system/node/possible_not_a_node")).unwrap();
        let pci = s.join("devices/pci0000:80/0000:80:01.1/0000:81:00.0");
        let ctrl = pci.join("nvme/nvme0");
        std::fs::create_dir_all(&ctrl).unwrap();
        std::fs::write(pci.join("numa_node"), "1\n").unwrap();
        std::fs::write(ctrl.join("numa_node"), "-1\n").unwrap();
        let virt = s.join("devices/pci0000:00/0000:00:04.0/virtio1");
        std::fs::create_dir_all(&virt).unwrap();
        std::fs::write(virt.parent().unwrap().join("numa_node"), "-1\n").unwrap();
        for (dev, target) in [("nvme0n1", &ctrl), ("vda", &virt)] {
            let b = s.join("block").join(dev);
            std::fs::create_dir_all(&b).unwrap();
            std::os::unix::fs::symlink(target, b.join("device")).unwrap();
        }
        assert_eq!(numa_nodes_in(s), vec![(0, vec![0, 1, 2, 3, 8, 9, 10, 11]), (1, vec![4, 5, 6, 7, 12, 13, 14, 15])]);
        // The controller's -1 is "no node"; walking on, its PCI function names node 1.
        assert_eq!(device_numa_node_in(s, "nvme0n1"), None, "-1 is said by the first numa_node found");
        std::fs::remove_file(ctrl.join("numa_node")).unwrap();
        assert_eq!(device_numa_node_in(s, "nvme0n1"), Some(1));
        assert_eq!(device_numa_node_in(s, "vda"), None);
        assert_eq!(device_numa_node_in(s, "sdz"), None);
        // The device's node chooses the CPUs: node 1's, in order, SQPOLL threads after the workers'.
        let node1 = &numa_nodes_in(s)[1].1;
        assert_eq!(cpus_on_node(node1, 3, false), (vec![4, 5, 6], vec![]));
        assert_eq!(cpus_on_node(node1, 2, true), (vec![4, 5], vec![6, 7]));
        assert_eq!(cpus_on_node(node1, 10, false).0[8..], [4, 5], "more threads than CPUs: round-robin on the node");
        assert_eq!(cpus_on_node(node1, 5, true).1, vec![13, 14, 15, 4, 5]);
        assert_eq!(parse_cpulist("0"), Some(vec![0]));
        assert_eq!(parse_cpulist("x"), None);
    }
}
