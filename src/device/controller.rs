//! NVMe controllers as PCI devices, for iolab's user-space driver: which controller and namespace
//! a target names (`/dev/nvmeXnY` or `PCI-ADDR/NSID`), what of it the kernel shows (block
//! devices, generic and controller character devices), and whether it may be taken from the
//! kernel. Unbinding a controller makes every one of its block devices disappear, so a mount,
//! swap, holder or open file on any of them refuses the run, even a read-only one; writes to the
//! target namespace follow `--destructive` as for a block device (`safety.rs`).
use super::safety::{self, Findings};
use super::sysfs::{names_in, read_trim};
use super::DeviceError;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// The PCI class code of an NVMe controller (mass storage, non-volatile memory, NVMe).
const CLASS_NVME: &str = "0x010802";

/// A namespace on a controller, as a target of the user-space driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerTarget {
    /// The controller's PCI address ("0000:00:04.0").
    pub bdf: String,
    pub nsid: u32,
}

impl std::fmt::Display for ControllerTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}/{}", self.bdf, self.nsid)
    }
}

/// A device node the kernel shows for a controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelDevice {
    /// "nvme0n1", "ng0n1", "nvme0", "nvme0n1p1"
    pub name: String,
    pub block: bool,
    pub rdev: u64,
    /// The namespace id, for a namespace's block device.
    pub nsid: Option<u32>,
}

/// "major:minor" as a device number.
fn devnum(s: &str) -> Option<u64> {
    let (a, b) = s.trim().split_once(':')?;
    Some(libc::makedev(a.parse().ok()?, b.parse().ok()?))
}

/// The controller and namespace `target` names: `PCI-ADDR/NSID` or an NVMe block device
/// (`/dev/nvmeXnY`, its controller found through sysfs under `sys`).
pub(crate) fn resolve(target: &str, sys: &Path) -> Result<ControllerTarget, DeviceError> {
    let t = match target.split_once('/') {
        Some((bdf, ns)) if is_pci_address(bdf) => {
            let nsid = ns.parse::<u32>().ok().filter(|n| *n >= 1 && *n != u32::MAX).ok_or_else(|| {
                DeviceError::Refused(format!(
                    "\"{ns}\" in {target} is not a namespace id: give PCI-ADDR/NSID with NSID from 1, e.g. {bdf}/1"
                ))
            })?;
            ControllerTarget { bdf: bdf.to_string(), nsid }
        }
        _ => of_block_device(Path::new(target), sys)?,
    };
    let dev = sys.join("bus/pci/devices").join(&t.bdf);
    match read_trim(&dev.join("class")) {
        None => Err(DeviceError::Refused(format!(
            "no PCI device {} ({} is missing): see lspci -D for the controllers here",
            t.bdf,
            dev.display()
        ))),
        Some(c) if c != CLASS_NVME => {
            Err(DeviceError::Refused(format!("PCI device {} is not an NVMe controller (class {c}, not {CLASS_NVME})", t.bdf)))
        }
        Some(_) => Ok(t),
    }
}

/// The controller of NVMe block device `path`: the nearest PCI device above it in sysfs, or for
/// a multipath head, the one controller of its paths.
fn of_block_device(path: &Path, sys: &Path) -> Result<ControllerTarget, DeviceError> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| {
        DeviceError::Refused(format!(
            "cannot examine {shown} ({e}): give an NVMe namespace as /dev/nvmeXnY or PCI-ADDR/NSID (e.g. 0000:00:04.0/1)"
        ))
    })?;
    if !meta.file_type().is_block_device() {
        return Err(DeviceError::Refused(format!(
            "{shown} is not a block device: give an NVMe namespace as /dev/nvmeXnY or PCI-ADDR/NSID (e.g. 0000:00:04.0/1)"
        )));
    }
    let node = super::sysfs::sysfs_node(sys, libc::major(meta.rdev()), libc::minor(meta.rdev()))
        .ok_or_else(|| DeviceError::Refused(format!("sysfs does not know {shown}'s device number, so its controller cannot be found")))?;
    if node.join("partition").is_file() {
        return Err(DeviceError::Refused(format!("{shown} is a partition: give the whole namespace (its disk) or PCI-ADDR/NSID")));
    }
    let nsid = read_trim(&node.join("nsid"))
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| DeviceError::Refused(format!("{shown} is not an NVMe namespace (sysfs has no nsid for it)")))?;
    let mut ctrls: Vec<String> = match pci_ancestor(&node) {
        Some(bdf) => vec![bdf],
        None => names_in(&node.join("multipath"))
            .iter()
            .filter_map(|p| std::fs::canonicalize(node.join("multipath").join(p)).ok().and_then(|c| pci_ancestor(&c)))
            .collect(),
    };
    ctrls.dedup();
    match ctrls.len() {
        1 => Ok(ControllerTarget { bdf: ctrls.remove(0), nsid }),
        0 => Err(DeviceError::Refused(format!(
            "{shown} is not on a PCI NVMe controller (fabrics or a virtual device): iolab's driver takes PCI controllers"
        ))),
        _ => Err(DeviceError::Refused(format!(
            "{shown} is reached through {} controllers ({}): iolab's driver takes one; give PCI-ADDR/{nsid}",
            ctrls.len(),
            ctrls.join(", ")
        ))),
    }
}

/// The nearest directory above `node` named like a PCI device.
fn pci_ancestor(node: &Path) -> Option<String> {
    node.ancestors().filter_map(|a| a.file_name()?.to_str()).find(|n| is_pci_address(n)).map(str::to_string)
}

/// Every device node the kernel shows for controller `bdf`: its character device (nvmeX), its
/// namespaces' block devices (multipath heads whose paths are all on it included) with their
/// partitions, and their generic character devices (ngXnY). Empty when no kernel driver has it.
pub(crate) fn kernel_devices(bdf: &str, sys: &Path) -> Vec<KernelDevice> {
    let Ok(ctrl) = std::fs::canonicalize(sys.join("bus/pci/devices").join(bdf)) else { return Vec::new() };
    let mut out = Vec::new();
    let mut push = |dir: &Path, block: bool, nsid: Option<u32>| {
        let (Some(name), Some(rdev)) = (dir.file_name(), read_trim(&dir.join("dev")).and_then(|d| devnum(&d))) else { return };
        out.push(KernelDevice { name: name.to_string_lossy().into_owned(), block, rdev, nsid });
    };
    for c in names_in(&ctrl.join("nvme")) {
        push(&ctrl.join("nvme").join(&c), false, None);
    }
    for name in names_in(&sys.join("block")).into_iter().filter(|n| n.starts_with("nvme")) {
        let Ok(node) = std::fs::canonicalize(sys.join("block").join(&name)) else { continue };
        let paths = names_in(&node.join("multipath"));
        let ours = node.starts_with(&ctrl)
            || (!paths.is_empty()
                && paths.iter().all(|p| std::fs::canonicalize(node.join("multipath").join(p)).is_ok_and(|c| c.starts_with(&ctrl))));
        if !ours {
            continue;
        }
        push(&node, true, read_trim(&node.join("nsid")).and_then(|n| n.parse().ok()));
        for (p, _) in safety::partitions_of(&node) {
            push(&node.join(p), true, None);
        }
        if let Some(ng) = super::nvme::generic_sibling(&node) {
            push(&node.parent().unwrap_or(&node).join(ng), false, None);
        }
    }
    out
}

/// The processes other than this one that have any of `devs` open, as "pid 123 (fio) has
/// /dev/nvme0n1 open", reading `/proc` under `proc`.
pub(crate) fn openers(devs: &[KernelDevice], proc: &Path) -> Vec<String> {
    let me = std::process::id().to_string();
    let mut out = Vec::new();
    for pid in names_in(proc).into_iter().filter(|p| p.bytes().all(|b| b.is_ascii_digit()) && *p != me) {
        let fds = proc.join(&pid).join("fd");
        let mut held: Vec<&str> = Vec::new();
        for fd in names_in(&fds) {
            let Ok(m) = std::fs::metadata(fds.join(&fd)) else { continue };
            let (block, chr) = (m.file_type().is_block_device(), m.file_type().is_char_device());
            if let Some(d) = devs.iter().find(|d| m.rdev() == d.rdev && ((d.block && block) || (!d.block && chr))) {
                if !held.contains(&d.name.as_str()) {
                    held.push(&d.name);
                }
            }
        }
        if !held.is_empty() {
            let comm = read_trim(&proc.join(&pid).join("comm")).unwrap_or_else(|| "?".into());
            let what: Vec<String> = held.iter().map(|n| format!("/dev/{n}")).collect();
            out.push(format!("pid {pid} ({comm}) has {} open", what.join(", ")));
        }
    }
    out
}

/// Ok when controller `t.bdf` may be taken from the kernel for a run (that `writes` to
/// namespace `t.nsid`): nothing of it mounted, swap, held or open, and a write consented to with
/// `--destructive` naming the namespace's block device or `t` itself. Otherwise one line.
pub(crate) fn check_takeover(
    t: &ControllerTarget,
    writes: bool,
    destructive: &[String],
    sys: &Path,
    dev: &Path,
) -> Result<(), DeviceError> {
    let devs = kernel_devices(&t.bdf, sys);
    let mut why: Vec<String> = Vec::new();
    let mut target_findings: Option<(PathBuf, Findings)> = None;
    for d in devs.iter().filter(|d| d.block) {
        let node = dev.join(&d.name);
        let f = if std::fs::metadata(&node).is_ok_and(|m| m.file_type().is_block_device() && m.rdev() == d.rdev) {
            safety::examine(&node, sys)
        } else {
            Findings { in_use: vec![format!("it has no node {} to examine it by", node.display())], contents: vec![] }
        };
        why.extend(f.in_use.iter().map(|r| format!("{} {}", d.name, r.strip_prefix("it ").unwrap_or(r))));
        if d.nsid == Some(t.nsid) {
            target_findings = Some((node, f));
        }
    }
    why.extend(openers(&devs, Path::new("/proc")));
    if !why.is_empty() {
        return Err(DeviceError::Refused(format!(
            "refusing to take NVMe controller {} from the kernel: {}; its block devices disappear while iolab's driver has it: release them first",
            t.bdf,
            why.join("; ")
        )));
    }
    if !writes {
        return Ok(());
    }
    let consent = destructive.iter().any(|d| d.trim_end_matches('/') == t.to_string());
    match target_findings {
        Some((node, f)) => {
            let consent = consent || safety::named_destructive(&node, destructive);
            safety::decide(&node, &f, consent)
                .map_err(|e| e.context(|m| m.replace(&format!("--destructive {}", node.display()), &format!("--destructive {t}"))))
        }
        // Not bound to the kernel's driver (left to vfio-pci): nothing can be examined.
        None if consent => Ok(()),
        None => Err(DeviceError::Refused(format!(
            "refusing to write to NVMe namespace {t} without consent: its contents will be destroyed; pass --destructive {t} to allow it"
        ))),
    }
}

/// Is `s` a PCI address as sysfs names devices, domain:bus:device.function ("0000:00:04.0")?
pub(crate) fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    let hex = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_hexdigit);
    b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.' && hex(0..4) && hex(5..7) && hex(8..10) && (b'0'..=b'7').contains(&b[11])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// A fake sysfs: controller 0000:00:04.0 (nvme0, 241:0) with namespaces nvme0n1 (259:0,
    /// nsid 1, partition nvme0n1p1 259:2) and nvme0n2 (259:1, nsid 2) and ng0n1 (242:0); a
    /// second controller 0000:00:05.0 (nvme1) whose nvme1n1 (259:3) is a multipath head under
    /// the subsystem with one path on it; sda, not NVMe.
    fn fake() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let s = d.path();
        let w = |p: &str, v: &str| {
            let p = s.join(p);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, v).unwrap();
        };
        let c0 = "devices/pci0000:00/0000:00:04.0";
        let c1 = "devices/pci0000:00/0000:00:05.0";
        w(&format!("{c0}/class"), "0x010802\n");
        w(&format!("{c1}/class"), "0x010802\n");
        w("devices/pci0000:00/0000:00:1f.2/class", "0x010601\n");
        w(&format!("{c0}/nvme/nvme0/dev"), "241:0\n");
        w(&format!("{c0}/nvme/nvme0/nvme0n1/dev"), "259:0\n");
        w(&format!("{c0}/nvme/nvme0/nvme0n1/nsid"), "1\n");
        w(&format!("{c0}/nvme/nvme0/nvme0n1/queue/nr_requests"), "64\n");
        w(&format!("{c0}/nvme/nvme0/nvme0n1/nvme0n1p1/dev"), "259:2\n");
        w(&format!("{c0}/nvme/nvme0/nvme0n1/nvme0n1p1/partition"), "1\n");
        w(&format!("{c0}/nvme/nvme0/nvme0n2/dev"), "259:1\n");
        w(&format!("{c0}/nvme/nvme0/nvme0n2/nsid"), "2\n");
        w(&format!("{c0}/nvme/nvme0/ng0n1/dev"), "242:0\n");
        w(&format!("{c1}/nvme/nvme1/dev"), "241:1\n");
        w(&format!("{c1}/nvme/nvme1/nvme1c1n1/nsid"), "1\n");
        w("devices/virtual/nvme-subsystem/nvme-subsys1/nvme1n1/dev", "259:3\n");
        w("devices/virtual/nvme-subsystem/nvme-subsys1/nvme1n1/nsid", "1\n");
        w("devices/pci0000:00/0000:00:1f.2/ata1/block/sda/dev", "8:0\n");
        fs::create_dir_all(s.join("bus/pci/devices")).unwrap();
        fs::create_dir_all(s.join("block")).unwrap();
        fs::create_dir_all(s.join("devices/virtual/nvme-subsystem/nvme-subsys1/nvme1n1/multipath")).unwrap();
        symlink(s.join(c1).join("nvme/nvme1/nvme1c1n1"), s.join("devices/virtual/nvme-subsystem/nvme-subsys1/nvme1n1/multipath/nvme1c1n1"))
            .unwrap();
        for (bdf, c) in [("0000:00:04.0", c0), ("0000:00:05.0", c1), ("0000:00:1f.2", "devices/pci0000:00/0000:00:1f.2")] {
            symlink(s.join(c), s.join("bus/pci/devices").join(bdf)).unwrap();
        }
        for (name, dir) in [
            ("nvme0n1", format!("{c0}/nvme/nvme0/nvme0n1")),
            ("nvme0n2", format!("{c0}/nvme/nvme0/nvme0n2")),
            ("nvme1n1", "devices/virtual/nvme-subsystem/nvme-subsys1/nvme1n1".to_string()),
            ("sda", "devices/pci0000:00/0000:00:1f.2/ata1/block/sda".to_string()),
        ] {
            symlink(s.join(&dir), s.join("block").join(name)).unwrap();
        }
        d
    }

    #[test]
    fn pci_address_targets_are_checked_against_sysfs() {
        let d = fake();
        assert_eq!(resolve("0000:00:04.0/2", d.path()).unwrap(), ControllerTarget { bdf: "0000:00:04.0".into(), nsid: 2 });
        let e = resolve("0000:00:1f.2/1", d.path()).unwrap_err().to_string();
        assert!(e.contains("not an NVMe controller"), "{e}");
        let e = resolve("0000:00:09.0/1", d.path()).unwrap_err().to_string();
        assert!(e.contains("no PCI device 0000:00:09.0"), "{e}");
        let e = resolve("0000:00:04.0/0", d.path()).unwrap_err().to_string();
        assert!(e.contains("not a namespace id"), "{e}");
        let e = resolve("/nonexistent/nvme9n1", d.path()).unwrap_err().to_string();
        assert!(e.contains("PCI-ADDR/NSID"), "{e}");
    }

    #[test]
    fn the_controllers_kernel_devices_include_partitions_generic_and_multipath_heads() {
        let d = fake();
        let names = |bdf| kernel_devices(bdf, d.path()).into_iter().map(|k| k.name).collect::<Vec<_>>();
        assert_eq!(names("0000:00:04.0"), ["nvme0", "nvme0n1", "nvme0n1p1", "ng0n1", "nvme0n2"]);
        assert_eq!(names("0000:00:05.0"), ["nvme1", "nvme1n1"]);
        assert!(names("0000:00:1f.2").is_empty());
        let k = kernel_devices("0000:00:04.0", d.path());
        assert_eq!(k[1].nsid, Some(1));
        assert_eq!(k[1].rdev, libc::makedev(259, 0));
        assert!(k[1].block && !k[0].block && !k[3].block);
    }

    #[test]
    fn a_multipath_head_resolves_to_its_one_controller() {
        let d = fake();
        let node = fs::canonicalize(d.path().join("block/nvme1n1")).unwrap();
        assert_eq!(pci_ancestor(&node), None);
        let paths = names_in(&node.join("multipath"));
        let c: Vec<String> =
            paths.iter().filter_map(|p| pci_ancestor(&fs::canonicalize(node.join("multipath").join(p)).unwrap())).collect();
        assert_eq!(c, ["0000:00:05.0"]);
    }

    #[test]
    fn other_processes_holding_a_device_open_are_named() {
        // /dev/null (char 1:3) stands in for a controller's device; a fake /proc holds it.
        let p = tempfile::tempdir().unwrap();
        for (pid, comm, target) in [("4242", "fio", "/dev/null"), ("4243", "bash", "/dev/zero")] {
            fs::create_dir_all(p.path().join(pid).join("fd")).unwrap();
            fs::write(p.path().join(pid).join("comm"), format!("{comm}\n")).unwrap();
            symlink(target, p.path().join(pid).join("fd/3")).unwrap();
        }
        symlink("/dev/null", p.path().join("4242/fd/7")).unwrap();
        let null = KernelDevice { name: "ng0n1".into(), block: false, rdev: libc::makedev(1, 3), nsid: None };
        assert_eq!(openers(std::slice::from_ref(&null), p.path()), ["pid 4242 (fio) has /dev/ng0n1 open"]);
        // A block device of the same number is another device.
        let block = KernelDevice { block: true, ..null };
        assert!(openers(&[block], p.path()).is_empty());
    }

    #[test]
    fn an_unbound_controller_needs_consent_naming_it_for_writes() {
        let d = fake();
        let t = ControllerTarget { bdf: "0000:00:09.0".into(), nsid: 1 };
        let dev = d.path().join("dev");
        check_takeover(&t, false, &[], d.path(), &dev).unwrap();
        let e = check_takeover(&t, true, &[], d.path(), &dev).unwrap_err().to_string();
        assert!(e.contains("--destructive 0000:00:09.0/1"), "{e}");
        check_takeover(&t, true, &["0000:00:09.0/1".into()], d.path(), &dev).unwrap();
    }

    #[test]
    fn a_namespace_without_a_node_refuses_the_takeover() {
        let d = fake();
        let t = ControllerTarget { bdf: "0000:00:04.0".into(), nsid: 1 };
        let e = check_takeover(&t, false, &[], d.path(), &d.path().join("dev")).unwrap_err().to_string();
        assert!(e.starts_with("refusing to take NVMe controller 0000:00:04.0 from the kernel: nvme0n1 has no node"), "{e}");
        assert!(!e.contains('\n'));
    }
}
