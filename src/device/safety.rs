//! Write safety for block devices and the files behind loop devices.
//!
//! iolab never writes to a block device that is *in use* (mounted, active swap, held by another
//! device such as device-mapper, md or bcache, or exclusively claimed by the kernel): consent
//! cannot make that safe, the device must be released first. Any other block device is written
//! only when `--destructive DEVICE` names that exact device; the refusal says what would be
//! destroyed (a partition table, a filesystem/RAID/LVM/crypto signature) or that the device
//! looks unused.
//!
//! The same in-use rules reach through loop devices: a regular file backing a loop device in use
//! is not written, and a loop device is in use when another loop device over the same backing
//! file (compared by device and inode, not path) is. Files on pseudo-file systems (proc, sysfs,
//! debugfs...) are never targets.
//!
//! Everything read from sysfs goes through a root directory (normally [`SYSFS`]) so the holder
//! and partition detection can be tested against a fake tree.
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::sysfs::{names_in, read_trim, sysfs_node, SYSFS};
use super::DeviceError;

/// How much of the device's start is searched for signatures.
const HEAD_BYTES: usize = 68 * 1024;

/// (byte offset, magic bytes, what it means) for the signatures we recognise on our own.
const SIGNATURES: &[(u64, &[u8], &str)] = &[
    (1080, &[0x53, 0xEF], "an ext2/3/4 filesystem"),
    (0, b"XFSB", "an XFS filesystem"),
    (65600, b"_BHRfS_M", "a btrfs filesystem"),
    (1024, &[0x10, 0x20, 0xF5, 0xF2], "an F2FS filesystem"),
    (3, b"NTFS    ", "an NTFS filesystem"),
    (54, b"FAT1", "a FAT filesystem"),
    (82, b"FAT32   ", "a FAT32 filesystem"),
    (32769, b"CD001", "an ISO 9660 filesystem"),
    (0, b"hsqs", "a squashfs filesystem"),
    (0, b"LUKS\xba\xbe", "a LUKS encrypted volume"),
    (0, b"LABELONE", "an LVM physical volume"),
    (512, b"LABELONE", "an LVM physical volume"),
    (1024, b"LABELONE", "an LVM physical volume"),
    (1536, b"LABELONE", "an LVM physical volume"),
    (0, &[0xFC, 0x4E, 0x2B, 0xA9], "an md RAID (v1.1) member"),
    (4096, &[0xFC, 0x4E, 0x2B, 0xA9], "an md RAID (v1.2) member"),
    (4086, b"SWAPSPACE2", "a swap area"),
    (4086, b"SWAP-SPACE", "a swap area"),
    (512, b"EFI PART", "a GPT partition table"),
    (4096, b"EFI PART", "a GPT partition table"),
];

/// What sysfs says about a block device: its partitions and what is built on top of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SysfsFacts {
    /// The device's sysfs directory, if sysfs knows the device number.
    pub node: Option<PathBuf>,
    /// Whether the device is itself a partition.
    pub is_partition: bool,
    /// For a whole disk: its partitions as (name, "major:minor").
    pub partitions: Vec<(String, Option<String>)>,
    /// Devices built on this one (or, for a whole disk, on one of its partitions), as
    /// "holder" or "holder (on partition)".
    pub holders: Vec<String>,
}

/// The partitions of the whole disk whose sysfs directory is `disk`: (name, "major:minor").
pub(crate) fn partitions_of(disk: &Path) -> Vec<(String, Option<String>)> {
    let mut v: Vec<(String, Option<String>)> = std::fs::read_dir(disk)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("partition").is_file())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), read_trim(&e.path().join("dev"))))
        .collect();
    v.sort();
    v
}

/// The devices holding (built on) the device whose sysfs directory is `node`.
pub(crate) fn holders_of(node: &Path) -> Vec<String> {
    names_in(&node.join("holders"))
}

/// Partitions and holders of device `major:minor`, read from the sysfs root `sys`.
pub(crate) fn sysfs_facts(sys: &Path, major: u32, minor: u32) -> SysfsFacts {
    let Some(node) = sysfs_node(sys, major, minor) else { return SysfsFacts::default() };
    let is_partition = node.join("partition").is_file();
    let mut facts = SysfsFacts { is_partition, holders: holders_of(&node), ..Default::default() };
    if !is_partition {
        facts.partitions = partitions_of(&node);
        for (p, _) in &facts.partitions {
            facts.holders.extend(holders_of(&node.join(p)).into_iter().map(|h| format!("{h} (on {p})")));
        }
    }
    facts.node = Some(node);
    facts
}

/// Undo the octal escapes (`\040` for a space) the kernel uses in mountinfo and swaps.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Mount points in `mountinfo` (the text of /proc/self/mountinfo) of any of the device numbers
/// `devs` ("major:minor").
pub(crate) fn mount_points(mountinfo: &str, devs: &[String]) -> Vec<String> {
    let mut v = Vec::new();
    for l in mountinfo.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        if f.len() > 4 && devs.iter().any(|d| d == f[2]) {
            let m = unescape(f[4]);
            if !v.contains(&m) {
                v.push(m);
            }
        }
    }
    v
}

/// Whether `swaps` (the text of /proc/swaps) lists a block device with device number `rdev`.
fn in_swaps(swaps: &str, rdev: u64) -> bool {
    swaps
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .any(|dev| std::fs::metadata(unescape(dev)).is_ok_and(|m| m.file_type().is_block_device() && m.rdev() == rdev))
}

/// Why writing to the device would be wrong, split by whether `--destructive` can override it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Findings {
    /// The device is in use: no consent makes writing safe.
    pub in_use: Vec<String>,
    /// Data that writing would destroy: `--destructive` naming the device overrides these.
    pub contents: Vec<String>,
}

impl Findings {
    pub fn is_empty(&self) -> bool {
        self.in_use.is_empty() && self.contents.is_empty()
    }
}

fn push_unique(v: &mut Vec<String>, s: String) {
    if !v.contains(&s) {
        v.push(s);
    }
}

/// Why the block device `major:minor` (with sysfs `facts`) is in use, each as "it ...". `node`
/// is a device node to try an exclusive open on, when there is one.
fn in_use(node: Option<&Path>, major: u32, minor: u32, facts: &SysfsFacts) -> Vec<String> {
    let mut found = Vec::new();
    // This device and, for a whole disk, its partitions: a mount of any of them is in use.
    let mut devs = vec![format!("{major}:{minor}")];
    devs.extend(facts.partitions.iter().filter_map(|(_, d)| d.clone()));
    if let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") {
        for m in mount_points(&mounts, &devs) {
            push_unique(&mut found, format!("it is mounted on {m}"));
        }
    }
    if std::fs::read_to_string("/proc/swaps").is_ok_and(|s| in_swaps(&s, libc::makedev(major, minor))) {
        found.push("it is in use as swap".into());
    }
    if !facts.holders.is_empty() {
        found.push(format!("it has holders ({}): another device is built on it", facts.holders.join(", ")));
    }
    // The kernel's own word: an exclusive open fails with EBUSY while anything has claimed the
    // device (a mount in another namespace, swap, device-mapper, md, another exclusive opener).
    if let Some(node) = node.filter(|_| found.is_empty()) {
        if let Err(e) = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(node) {
            if e.raw_os_error() == Some(libc::EBUSY) {
                found.push("it is in use: the kernel refuses an exclusive open (EBUSY), so it is mounted, swap, or claimed by another device or program".into());
            }
        }
    }
    found
}

/// An attached loop device and what is behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopBacking {
    /// "loop3"
    pub name: String,
    /// (major, minor)
    pub dev: (u32, u32),
    /// The backing file's path as the kernel shows it now (`loop/backing_file`), byte for byte:
    /// it follows renames, and ends in " (deleted)" once the name it had is gone.
    pub backing: PathBuf,
    /// What is behind the loop device (see [`file_id`]): the kernel's own answer
    /// (`LOOP_GET_STATUS64` on its node, which knows the file when every name of it is gone)
    /// where the node can be opened, else what `backing` names now; None when neither works (a
    /// deleted name, not visible from here).
    pub id: Option<(u64, u64)>,
}

/// Identity of a file, so the same file is found under any path (hard links, bind mounts,
/// symlinks): (st_dev, st_ino), or for a block device (u64::MAX, its device number).
pub(crate) fn file_id(meta: &std::fs::Metadata) -> (u64, u64) {
    if meta.file_type().is_block_device() {
        (u64::MAX, meta.rdev())
    } else {
        (meta.dev(), meta.ino())
    }
}

/// The identity ([`file_id`]) of block device `major:minor`.
fn block_id(major: u32, minor: u32) -> (u64, u64) {
    (u64::MAX, libc::makedev(major, minor))
}

/// A sysfs attribute's bytes, less the one '\n' the kernel ends it with: a name read byte for
/// byte (a trailing space, a newline inside, bytes that are not UTF-8 stay as they are).
fn read_bytes(p: &Path) -> Option<Vec<u8>> {
    let mut b = std::fs::read(p).ok()?;
    if b.last() == Some(&b'\n') {
        b.pop();
    }
    (!b.is_empty()).then_some(b)
}

/// A path for a one-line message: control characters (a newline in a file name) and bytes that
/// are not UTF-8 escaped, everything else as it is.
pub fn shown(p: &Path) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for chunk in std::os::unix::ffi::OsStrExt::as_bytes(p.as_os_str()).utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                s.extend(c.escape_default());
            } else {
                s.push(c);
            }
        }
        for b in chunk.invalid() {
            let _ = write!(s, "\\x{b:02x}");
        }
    }
    s
}

/// The node in /dev of block device `name` (`major:minor`), when it is that device and `sys` is
/// the real sysfs (a fake sysfs's device numbers are not this machine's).
fn dev_node(sys: &Path, name: &str, dev: (u32, u32)) -> Option<PathBuf> {
    if sys != Path::new(SYSFS) {
        return None;
    }
    let node = Path::new("/dev").join(name);
    std::fs::metadata(&node).is_ok_and(|m| m.file_type().is_block_device() && m.rdev() == libc::makedev(dev.0, dev.1)).then_some(node)
}

/// What is behind the loop device at `node`, as the kernel knows it (`LOOP_GET_STATUS64`): the
/// backing file's (st_dev, st_ino), or (u64::MAX, rdev) for a backing block device. It holds
/// the file open, so this works when no name of it is left.
fn loop_status_id(node: &Path) -> Option<(u64, u64)> {
    use std::os::fd::AsRawFd;
    /// struct loop_info64 (linux/loop.h).
    #[repr(C)]
    struct LoopInfo64 {
        lo_device: u64,
        lo_inode: u64,
        lo_rdevice: u64,
        lo_offset: u64,
        lo_sizelimit: u64,
        lo_number: u32,
        lo_encrypt_type: u32,
        lo_encrypt_key_size: u32,
        lo_flags: u32,
        lo_file_name: [u8; 64],
        lo_crypt_name: [u8; 64],
        lo_encrypt_key: [u8; 32],
        lo_init: [u64; 2],
    }
    const LOOP_GET_STATUS64: u32 = 0x4C05;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(node).ok()?;
    // SAFETY: all-zero bytes are a valid LoopInfo64 (integers and byte arrays).
    let mut info: LoopInfo64 = unsafe { std::mem::zeroed() };
    // SAFETY: LOOP_GET_STATUS64 writes one struct loop_info64 through the pointer, alive here.
    if unsafe { libc::ioctl(f.as_raw_fd(), LOOP_GET_STATUS64 as _, &mut info as *mut LoopInfo64) } != 0 {
        return None;
    }
    // The kernel encodes both numbers as stat(2) does (new_encode_dev), so they compare with
    // st_dev and st_rdev as they are. A regular file has no rdev.
    Some(if info.lo_rdevice != 0 { (u64::MAX, info.lo_rdevice) } else { (info.lo_device, info.lo_inode) })
}

/// Every attached loop device under the sysfs root `sys` (`block/loop*/loop/backing_file`).
pub(crate) fn loop_backings(sys: &Path) -> Vec<LoopBacking> {
    use std::os::unix::ffi::OsStringExt;
    names_in(&sys.join("block"))
        .into_iter()
        .filter(|n| n.starts_with("loop"))
        .filter_map(|name| {
            let dir = sys.join("block").join(&name);
            let backing = PathBuf::from(std::ffi::OsString::from_vec(read_bytes(&dir.join("loop/backing_file"))?));
            let (ma, mi) = read_trim(&dir.join("dev"))?.split_once(':').map(|(a, b)| (a.parse().ok(), b.parse().ok()))?;
            let dev = (ma?, mi?);
            let id = dev_node(sys, &name, dev)
                .and_then(|n| loop_status_id(&n))
                .or_else(|| std::fs::metadata(&backing).ok().map(|m| file_id(&m)));
            Some(LoopBacking { name, dev, backing, id })
        })
        .collect()
}

/// Why the loop device `l` is in use, each as "is ..." / "has ...".
fn loop_in_use(l: &LoopBacking, sys: &Path) -> Vec<String> {
    let facts = sysfs_facts(sys, l.dev.0, l.dev.1);
    let node = dev_node(sys, &l.name, l.dev);
    in_use(node.as_deref(), l.dev.0, l.dev.1, &facts).into_iter().map(|r| r.strip_prefix("it ").map(str::to_string).unwrap_or(r)).collect()
}

/// Why block device `major:minor` itself is in use, leaving out its partitions (writing one
/// partition does not write the others): each as "is ..." / "has ...".
fn in_use_alone(major: u32, minor: u32, sys: &Path) -> Vec<String> {
    let mut facts = sysfs_facts(sys, major, minor);
    facts.partitions.clear();
    facts.holders.retain(|h| !h.contains(" (on "));
    in_use(None, major, minor, &facts).into_iter().map(|r| r.strip_prefix("it ").map(str::to_string).unwrap_or(r)).collect()
}

/// The loop devices of this machine as a graph: what each sits on, by identity.
struct Stacks<'a> {
    sys: &'a Path,
    loops: Vec<LoopBacking>,
}

/// One level below a node: what it sits on, its name, and whether the hop is from a partition
/// to its whole disk.
struct Below {
    id: (u64, u64),
    name: String,
    file: bool,
    from_partition: bool,
}

impl Stacks<'_> {
    fn loop_of(&self, id: (u64, u64)) -> Option<&LoopBacking> {
        (id.0 == u64::MAX).then(|| self.loops.iter().find(|l| block_id(l.dev.0, l.dev.1) == id)).flatten()
    }

    /// What `id` sits on: a loop device's backing file or device; a partition's whole disk.
    fn below(&self, id: (u64, u64)) -> Option<Below> {
        if id.0 != u64::MAX {
            return None;
        }
        if let Some(l) = self.loop_of(id) {
            let b = l.id?;
            let name = match self.loop_of(b) {
                Some(under) => under.name.clone(),
                None => shown(&l.backing),
            };
            return Some(Below { id: b, name, file: b.0 != u64::MAX, from_partition: false });
        }
        let node = sysfs_node(self.sys, libc::major(id.1), libc::minor(id.1))?;
        if !node.join("partition").is_file() {
            return None;
        }
        let disk = node.parent()?;
        let (ma, mi) = read_trim(&disk.join("dev"))?.split_once(':').and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))?;
        let name = disk.file_name()?.to_string_lossy().into_owned();
        Some(Below { id: block_id(ma, mi), name, file: false, from_partition: true })
    }

    /// The loop devices directly over `id`, and, when `parts`, over `id`'s partitions: each
    /// with how to name it ("loop5", "loop5 (over partition loop3p1)").
    fn above(&self, id: (u64, u64), parts: bool) -> Vec<(&LoopBacking, String)> {
        let mut v: Vec<(&LoopBacking, String)> = self.loops.iter().filter(|l| l.id == Some(id)).map(|l| (l, l.name.clone())).collect();
        if parts && id.0 == u64::MAX {
            if let Some(node) = sysfs_node(self.sys, libc::major(id.1), libc::minor(id.1)) {
                for (p, dev) in partitions_of(&node) {
                    let Some((ma, mi)) =
                        dev.as_deref().and_then(|d| d.split_once(':')).and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
                    else {
                        continue;
                    };
                    let pid = block_id(ma, mi);
                    v.extend(self.loops.iter().filter(|l| l.id == Some(pid)).map(|l| (l, format!("{} (over partition {p})", l.name))));
                }
            }
        }
        v
    }
}

/// Why writing `target` (a [`file_id`]) would write under something in use, through loop
/// devices: every loop device whose chain reaches down to it, or to what it sits on, is
/// followed up to its top, and any of them mounted, swap, held or claimed counts. Each reason
/// names the chain and the device in use ("it backs loop3, which is under loop4, which is
/// mounted on /mnt"). The target's own mounts and holders are not among them.
fn stack_in_use(target: (u64, u64), sys: &Path) -> Vec<String> {
    let g = Stacks { sys, loops: loop_backings(sys) };
    let mut out = Vec::new();
    let mut seen = vec![target];
    // Down: what the target sits on, to the bottom; writing the target writes each of them.
    let mut downs: Vec<Below> = Vec::new();
    let mut cur = target;
    while let Some(b) = g.below(cur) {
        if seen.contains(&b.id) {
            break;
        }
        seen.push(b.id);
        cur = b.id;
        downs.push(b);
    }
    let mut prefix = String::new();
    for (k, d) in downs.iter().enumerate() {
        prefix = match k {
            0 if d.from_partition => format!("its whole disk {}", d.name),
            0 => format!("its backing device {}", d.name),
            1 => format!("{prefix} is over {}", d.name),
            _ => format!("{prefix}, which is over {}", d.name),
        };
        if d.file {
            continue;
        }
        let (ma, mi) = (libc::major(d.id.1), libc::minor(d.id.1));
        let why = match g.loop_of(d.id) {
            _ if d.from_partition => in_use_alone(ma, mi, sys),
            Some(l) => loop_in_use(l, sys),
            None => in_use(None, ma, mi, &sysfs_facts(sys, ma, mi))
                .into_iter()
                .map(|r| r.strip_prefix("it ").map(str::to_string).unwrap_or(r))
                .collect(),
        };
        for r in why {
            push_unique(&mut out, if k == 0 { format!("{prefix} {r}") } else { format!("{prefix}, which {r}") });
        }
    }
    // Up: every loop device over the target or over anything below it, to its top.
    // (loop device, the words that reach it, whether what follows needs ", which")
    let mut queue: Vec<((u64, u64), String, bool)> = Vec::new();
    let starts = std::iter::once((target, None)).chain(downs.iter().enumerate().map(|(k, d)| (d.id, Some((k, d)))));
    for (id, down) in starts {
        // A partition's disk: only what is over the disk as a whole (not its other partitions).
        let parts = down.is_none_or(|(k, _)| !downs[..=k].iter().any(|d| d.from_partition));
        for (l, name) in g.above(id, parts) {
            let lid = block_id(l.dev.0, l.dev.1);
            if seen.contains(&lid) {
                continue;
            }
            seen.push(lid);
            let (text, which) = match down {
                None if target.0 == u64::MAX => (format!("it is under {name}"), true),
                None => (format!("it backs {name}"), true),
                Some((_, d)) => (format!("{name} over the same backing {} {}", if d.file { "file" } else { "device" }, d.name), false),
            };
            queue.push((lid, text, which));
        }
    }
    let mut i = 0;
    while i < queue.len() {
        let (id, text, which) = queue[i].clone();
        i += 1;
        let l = g.loop_of(id).expect("queued nodes are loop devices");
        for r in loop_in_use(l, sys) {
            push_unique(&mut out, if which { format!("{text}, which {r}") } else { format!("{text} {r}") });
        }
        for (up, name) in g.above(id, true) {
            let uid = block_id(up.dev.0, up.dev.1);
            if seen.contains(&uid) {
                continue;
            }
            seen.push(uid);
            let next = if which { format!("{text}, which is under {name}") } else { format!("{text} is under {name}") };
            queue.push((uid, next, true));
        }
    }
    out
}

/// For a loop device `major:minor`: why what is behind it is in use. Writing it writes what it
/// sits on, down to the bottom of its stack, so any loop device over any of those (another loop
/// device over the same backing file, a loop device over this one) that is in use, up to the
/// top of its own stack, makes it in use (a mount claims only the device it is on); so do
/// mounts of a backing block device.
pub(crate) fn backing_in_use(major: u32, minor: u32, sys: &Path) -> Vec<String> {
    stack_in_use(block_id(major, minor), sys)
}

/// Examine the block device at `path`, reading sysfs under `sys`.
pub(crate) fn examine(path: &Path, sys: &Path) -> Findings {
    let mut found = Findings::default();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) => {
            found.in_use.push(format!("{} cannot be examined ({e})", shown(path)));
            return found;
        }
    };
    let rdev = meta.rdev();
    let (major, minor) = (libc::major(rdev), libc::minor(rdev));
    let facts = sysfs_facts(sys, major, minor);
    found.in_use = in_use(meta.file_type().is_block_device().then_some(path), major, minor, &facts);
    for r in backing_in_use(major, minor, sys) {
        push_unique(&mut found.in_use, r);
    }

    if !facts.partitions.is_empty() {
        let names: Vec<&str> = facts.partitions.iter().map(|(n, _)| n.as_str()).collect();
        found.contents.push(format!("it has a partition table (partitions {})", names.join(", ")));
    }
    for s in signatures_in(path) {
        push_unique(&mut found.contents, s);
    }
    if found.is_empty() {
        found.contents.extend(blkid_findings(path));
    }
    found
}

/// Pseudo-file systems by statfs f_type (linux/magic.h): their files are kernel interfaces, not
/// storage. devtmpfs is not among them: it reports tmpfs's magic, and tmpfs is a fair target.
const PSEUDO_FS: &[(i64, &str)] = &[
    (0x9fa0, "proc"),
    (0x62656572, "sysfs"),
    (0x64626720, "debugfs"),
    (0x74726163, "tracefs"),
    (0x27e0eb, "cgroup"),
    (0x63677270, "cgroup2"),
    (0x62656570, "configfs"),
    (0x73636673, "securityfs"),
    (0xcafe4a11, "bpf"),
    (0x6165676c, "pstore"),
    (0xde5e81e4, "efivarfs"),
    (0xf97cff8c, "selinuxfs"),
    (0x43415d53, "smackfs"),
    (0x1cd1, "devpts"),
    (0x42494e4d, "binfmt_misc"),
    (0x65735543, "fusectl"),
    (0x19800202, "mqueue"),
    (0x6e736673, "nsfs"),
];

/// The pseudo-file system `path` is on (proc, sysfs...), if it is on one.
pub(crate) fn pseudo_fs(path: &Path) -> Option<&'static str> {
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str())).ok()?;
    // SAFETY: statfs writes a struct statfs; c is a valid C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    PSEUDO_FS.iter().find(|(m, _)| *m == st.f_type as i64).map(|(_, n)| *n)
}

/// Examine the regular file at `path` as a write target: the loop devices it backs, directly or
/// under other loop devices, that are in use (writing the file writes their blocks under
/// whatever is mounted on them or on a loop device over them).
pub(crate) fn examine_file(path: &Path, sys: &Path) -> Findings {
    let mut found = Findings::default();
    let Ok(meta) = std::fs::metadata(path) else { return found };
    found.in_use = stack_in_use(file_id(&meta), sys);
    found
}

/// The one-line refusal for a regular file target, or Ok: never on a pseudo-file system
/// (`pseudo`), never written while it backs a loop device in use (`findings`, when writing).
pub(crate) fn decide_file(path: &Path, pseudo: Option<&str>, findings: &Findings, writes: bool) -> Result<(), DeviceError> {
    let shown = shown(path);
    if let Some(fs) = pseudo {
        return Err(DeviceError::Refused(format!(
            "target {shown} is on {fs}, a kernel pseudo-file system, not storage: give a file on a real file system or a block device"
        )));
    }
    if writes && !findings.in_use.is_empty() {
        return Err(DeviceError::Refused(format!("refusing to write to {shown}: {}; release it first (unmount it, detach the loop device with losetup -d): --destructive does not override a file in use", findings.in_use.join("; "))));
    }
    Ok(())
}

/// Ok if `path`, a regular file, may be a target (written, when `writes`).
pub(crate) fn check_file_target(path: &Path, writes: bool) -> Result<(), DeviceError> {
    check_file_target_in(path, writes, Path::new(SYSFS))
}

/// [`check_file_target`] reading sysfs under `sys`.
pub(crate) fn check_file_target_in(path: &Path, writes: bool, sys: &Path) -> Result<(), DeviceError> {
    let findings = if writes { examine_file(path, sys) } else { Findings::default() };
    decide_file(path, pseudo_fs(path), &findings, writes)
}

fn read_at(f: &mut std::fs::File, off: u64, len: usize) -> Option<Vec<u8>> {
    f.seek(SeekFrom::Start(off)).ok()?;
    let mut buf = vec![0u8; len];
    f.read_exact(&mut buf).ok()?;
    Some(buf)
}

/// Up to `len` bytes from the start (less on a smaller device).
fn read_head(f: &mut std::fs::File, len: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(len);
    if f.seek(SeekFrom::Start(0)).is_ok() {
        let _ = f.by_ref().take(len as u64).read_to_end(&mut buf);
    }
    buf
}

/// Signatures found in the device's first 68 KiB, and at its end (md v0.90/v1.0 superblocks,
/// the GPT backup header). The size is measured here, not taken from the caller.
pub(crate) fn signatures_in(path: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return vec![format!("{} cannot be read to look for signatures ({e})", shown(path))],
    };
    let size = f.seek(SeekFrom::End(0)).unwrap_or(0);
    let head = read_head(&mut f, HEAD_BYTES);
    for (off, magic, what) in SIGNATURES {
        let o = *off as usize;
        if head.len() >= o + magic.len() && &head[o..o + magic.len()] == *magic {
            push_unique(&mut found, format!("it holds {what}"));
        }
    }
    // MBR: boot signature plus at least one used partition entry.
    if head.len() >= 512 && head[510] == 0x55 && head[511] == 0xAA && (0..4).any(|i| head[446 + 16 * i + 4] != 0) {
        found.push("it holds an MBR partition table".into());
    }
    // md v0.90 (64 KiB aligned, last 64 KiB) and v1.0 (8 KiB from the end, 4 KiB aligned).
    if size >= 128 * 1024 {
        for off in [(size & !65535) - 65536, (size - 8192) & !4095] {
            if read_at(&mut f, off, 4).is_some_and(|b| b == [0xFC, 0x4E, 0x2B, 0xA9]) {
                push_unique(&mut found, "it holds an md RAID (v0.90/1.0) member".into());
            }
        }
    }
    // GPT backup header in the last logical block (512 or 4096 bytes).
    for lbs in [512u64, 4096] {
        if size >= 2 * lbs && read_at(&mut f, size - lbs, 8).is_some_and(|b| b == b"EFI PART") {
            push_unique(&mut found, "it holds a GPT partition table".into());
        }
    }
    found
}

/// A second opinion from util-linux's blkid where it is installed (it knows far more formats).
fn blkid_findings(path: &Path) -> Vec<String> {
    let Ok(out) = std::process::Command::new("blkid")
        .args(["-p", "-o", "export"])
        .arg(path)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
    else {
        return vec![];
    };
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            match k {
                "TYPE" => Some(format!("blkid finds a {v} signature on it")),
                "PTTYPE" => Some(format!("blkid finds a {v} partition table on it")),
                _ => None,
            }
        })
        .collect()
}

/// Does `--destructive` name exactly this device (by path, or by device number)?
pub(crate) fn named_destructive(path: &Path, destructive: &[String]) -> bool {
    let Ok(meta) = std::fs::metadata(path) else { return false };
    let canon = std::fs::canonicalize(path).ok();
    destructive.iter().any(|d| {
        let p = Path::new(d);
        (canon.is_some() && std::fs::canonicalize(p).ok() == canon)
            || (meta.file_type().is_block_device()
                && std::fs::metadata(p).is_ok_and(|m| m.file_type().is_block_device() && m.rdev() == meta.rdev()))
    })
}

/// The one-line refusal for `findings` on `path`, or Ok when writing is allowed.
pub fn decide(path: &Path, findings: &Findings, consent: bool) -> Result<(), DeviceError> {
    let p = shown(path);
    decide_as(&format!("block device {p}"), &p, &p, findings, consent)
}

/// [`decide`] with the words: `what` names the device in the no-consent line ("block device
/// /dev/sdz"), `shown` in the others, `pass` is what `--destructive` should name.
fn decide_as(what: &str, shown: &str, pass: &str, findings: &Findings, consent: bool) -> Result<(), DeviceError> {
    if !findings.in_use.is_empty() {
        let mut why = findings.in_use.clone();
        why.extend(findings.contents.iter().cloned());
        return Err(DeviceError::Refused(format!("refusing to write to {shown}: {}; release it first (unmount it, swapoff, remove what is built on it): --destructive does not override a device in use", why.join("; "))));
    }
    if consent {
        return Ok(());
    }
    if findings.contents.is_empty() {
        return Err(DeviceError::Refused(format!(
            "refusing to write to {what} without consent: its contents will be destroyed; pass --destructive {pass} to allow it"
        )));
    }
    Err(DeviceError::Refused(format!(
        "refusing to write to {shown}: {}; pass --destructive {pass} only if everything on it may be destroyed",
        findings.contents.join("; ")
    )))
}

/// Writing through an NVMe generic character device `generic` overwrites the blocks of its
/// namespace's block device `block`: the block device's rules apply (in use: never; contents:
/// only with consent), and `--destructive` may name either path.
pub(crate) fn check_passthru_write(generic: &Path, block: &Path, destructive: &[String]) -> Result<(), DeviceError> {
    check_passthru_write_in(generic, block, destructive, Path::new(SYSFS))
}

/// [`check_passthru_write`] reading sysfs under `sys`.
pub(crate) fn check_passthru_write_in(generic: &Path, block: &Path, destructive: &[String], sys: &Path) -> Result<(), DeviceError> {
    let (g, b) = (generic.display(), block.display());
    let consent = named_destructive(generic, destructive) || named_destructive(block, destructive);
    decide_as(
        &format!("NVMe namespace {g} (block device {b})"),
        &format!("{g} (the namespace of block device {b})"),
        &g.to_string(),
        &examine(block, sys),
        consent,
    )
}

/// Ok if writing is allowed; otherwise one line saying why not and what to do.
pub(crate) fn check_block_write(path: &Path, destructive: &[String]) -> Result<(), DeviceError> {
    check_block_write_in(path, destructive, Path::new(SYSFS))
}

/// [`check_block_write`] reading sysfs under `sys`.
pub(crate) fn check_block_write_in(path: &Path, destructive: &[String], sys: &Path) -> Result<(), DeviceError> {
    decide(path, &examine(path, sys), named_destructive(path, destructive))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::symlink;

    /// A fake sysfs: loop0 (7:0) with partitions loop0p1 (259:0, held by dm-0) and loop0p2
    /// (259:1); loop1 (7:1) held by md0; loop2 (7:2) with nothing; sda (8:0) a plain disk.
    fn fake_sysfs() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let blk = r.join("devices/virtual/block");
        let mk = |dir: &Path, dev: &str, partition: Option<&str>, holders: &[&str]| {
            std::fs::create_dir_all(dir.join("holders")).unwrap();
            std::fs::write(dir.join("dev"), format!("{dev}\n")).unwrap();
            if let Some(n) = partition {
                std::fs::write(dir.join("partition"), format!("{n}\n")).unwrap();
            }
            for h in holders {
                // Real holders entries are symlinks to the holder's directory.
                symlink(format!("../../../{h}"), dir.join("holders").join(h)).unwrap();
            }
            std::fs::create_dir_all(r.join("dev/block")).unwrap();
            let rel = Path::new("../..").join(dir.strip_prefix(r).unwrap());
            symlink(rel, r.join("dev/block").join(dev)).unwrap();
        };
        mk(&blk.join("loop0"), "7:0", None, &[]);
        mk(&blk.join("loop0/loop0p1"), "259:0", Some("1"), &["dm-0"]);
        mk(&blk.join("loop0/loop0p2"), "259:1", Some("2"), &[]);
        mk(&blk.join("loop1"), "7:1", None, &["md0"]);
        mk(&blk.join("loop2"), "7:2", None, &[]);
        // A whole disk's other directories (queue, holders, power) must not count as partitions.
        std::fs::create_dir_all(blk.join("loop2/queue")).unwrap();
        std::fs::create_dir_all(blk.join("loop2/power")).unwrap();
        mk(&r.join("devices/pci0000:00/0000:00:01.0/host0/block/sda"), "8:0", None, &[]);
        root
    }

    /// Loop devices over files under the fake sysfs `r`: (name, "major:minor", backing file, holders).
    fn fake_loops(r: &Path, loops: &[(&str, &str, &Path, &[&str])]) {
        for (name, dev, backing, holders) in loops {
            let dir = r.join("devices/virtual/block").join(name);
            std::fs::create_dir_all(dir.join("loop")).unwrap();
            std::fs::create_dir_all(dir.join("holders")).unwrap();
            std::fs::write(dir.join("dev"), format!("{dev}\n")).unwrap();
            // As the kernel writes it: the name's bytes and one '\n'.
            std::fs::write(dir.join("loop/backing_file"), [backing.as_os_str().as_bytes(), b"\n"].concat()).unwrap();
            for h in *holders {
                std::fs::create_dir_all(dir.join("holders").join(h)).unwrap();
            }
            std::fs::create_dir_all(r.join("block")).unwrap();
            symlink(Path::new("../devices/virtual/block").join(name), r.join("block").join(name)).unwrap();
            std::fs::create_dir_all(r.join("dev/block")).unwrap();
            symlink(Path::new("../../devices/virtual/block").join(name), r.join("dev/block").join(dev)).unwrap();
        }
    }

    #[test]
    fn files_backing_loop_devices_in_use() {
        let sys = tempfile::tempdir().unwrap();
        let d = tempfile::tempdir().unwrap();
        let (img, free, link) = (d.path().join("fs.img"), d.path().join("free.img"), d.path().join("hardlink.img"));
        std::fs::write(&img, b"x").unwrap();
        std::fs::write(&free, b"x").unwrap();
        std::fs::hard_link(&img, &link).unwrap();
        // loop60 over fs.img is held by dm-9; loop61 over the same file (by its other name) and
        // loop62 over free.img are not.
        fake_loops(sys.path(), &[("loop60", "7:60", &img, &["dm-9"]), ("loop61", "7:61", &link, &[]), ("loop62", "7:62", &free, &[])]);
        let all = loop_backings(sys.path());
        assert_eq!(
            all.iter().map(|l| (l.name.as_str(), l.dev)).collect::<Vec<_>>(),
            vec![("loop60", (7, 60)), ("loop61", (7, 61)), ("loop62", (7, 62))]
        );
        assert_eq!(all[0].id, all[1].id);
        // The file, under either name: it backs a loop device in use.
        for p in [&img, &link] {
            let f = examine_file(p, sys.path());
            assert_eq!(
                f.in_use,
                vec!["it backs loop60, which has holders (dm-9): another device is built on it".to_string()],
                "{}",
                p.display()
            );
            let e = decide_file(p, None, &f, true).unwrap_err().to_string();
            assert!(e.contains("backs loop60") && e.contains("does not override") && !e.contains('\n'), "{e}");
            assert_eq!(decide_file(p, None, &f, false), Ok(()));
        }
        assert!(examine_file(&free, sys.path()).is_empty());
        // The second loop device over that file is in use through the first; the first's own
        // holders are found by sysfs_facts, not here; the unrelated one is free.
        let r = backing_in_use(7, 61, sys.path());
        assert_eq!(
            r,
            vec![format!("loop60 over the same backing file {} has holders (dm-9): another device is built on it", link.display())]
        );
        assert!(backing_in_use(7, 60, sys.path()).is_empty());
        assert!(backing_in_use(7, 62, sys.path()).is_empty());
        assert!(backing_in_use(7, 99, sys.path()).is_empty());
    }

    #[test]
    fn backing_names_are_read_byte_for_byte() {
        use std::ffi::OsStr;
        let sys = tempfile::tempdir().unwrap();
        let d = tempfile::tempdir().unwrap();
        // Each odd name next to the plain name it would become if trimmed or read lossily.
        let plain = d.path().join("a.img");
        std::fs::write(&plain, b"x").unwrap();
        let names: [&OsStr; 4] = ["a.img ".as_ref(), "a.img\t".as_ref(), " a.img".as_ref(), OsStr::from_bytes(b"a\xff.img")];
        let paths: Vec<PathBuf> = names.iter().map(|n| d.path().join(n)).collect();
        let loops: Vec<(String, String)> = (0..paths.len()).map(|i| (format!("loop8{i}"), format!("7:8{i}"))).collect();
        let holders: Vec<String> = (0..paths.len()).map(|i| format!("dm-{i}")).collect();
        let mut spec = Vec::new();
        for (i, p) in paths.iter().enumerate() {
            std::fs::write(p, b"x").unwrap();
            spec.push((loops[i].0.as_str(), loops[i].1.as_str(), p.as_path(), vec![holders[i].as_str()]));
        }
        let spec: Vec<(&str, &str, &Path, &[&str])> = spec.iter().map(|(n, dv, p, h)| (*n, *dv, *p, h.as_slice())).collect();
        fake_loops(sys.path(), &spec);
        let all = loop_backings(sys.path());
        assert_eq!(all.iter().map(|l| l.backing.clone()).collect::<Vec<_>>(), paths);
        for (i, p) in paths.iter().enumerate() {
            let f = examine_file(p, sys.path());
            assert_eq!(f.in_use, vec![format!("it backs loop8{i}, which has holders (dm-{i}): another device is built on it")], "{p:?}");
        }
        assert!(examine_file(&plain, sys.path()).is_empty());
        // A name the kernel marks deleted is not looked up as another file.
        let gone = d.path().join("b.img (deleted)");
        fake_loops(sys.path(), &[("loop89", "7:89", &gone, &["dm-9"])]);
        std::fs::write(d.path().join("b.img"), b"x").unwrap();
        assert!(examine_file(&d.path().join("b.img"), sys.path()).is_empty());
        assert_eq!(loop_backings(sys.path()).last().map(|l| l.id), Some(None));
        // Messages stay one line whatever the name holds.
        let e = decide_file(&d.path().join("new\nline \u{1b}"), None, &Findings { in_use: vec!["x".into()], contents: vec![] }, true)
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n') && e.contains("new\\nline \\u{1b}"), "{e}");
        assert_eq!(shown(Path::new(OsStr::from_bytes(b"/a\xff b"))), "/a\\xff b");
    }

    /// A fake block device node with number `major:minor` in `dir`, or None where mknod is not
    /// allowed (not root).
    fn fake_node(dir: &Path, name: &str, major: u32, minor: u32) -> Option<PathBuf> {
        let p = dir.join(name);
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
        // SAFETY: c is a valid C string.
        (unsafe { libc::mknod(c.as_ptr(), libc::S_IFBLK | 0o600, libc::makedev(major, minor)) } == 0).then_some(p)
    }

    #[test]
    fn stacks_of_loop_devices() {
        let sys = tempfile::tempdir().unwrap();
        let d = tempfile::tempdir().unwrap();
        let img = d.path().join("fs.img");
        std::fs::write(&img, b"x").unwrap();
        let (Some(n70), Some(n71)) = (fake_node(d.path(), "loop70", 7, 70), fake_node(d.path(), "loop71", 7, 71)) else {
            eprintln!("SKIPPED stacks_of_loop_devices: mknod is not allowed here");
            return;
        };
        // img -> loop70 -> loop71 -> loop73 (held by dm-7); loop72 over img too; loop74 over
        // loop71 is free.
        fake_loops(
            sys.path(),
            &[
                ("loop70", "7:70", &img, &[]),
                ("loop71", "7:71", &n70, &[]),
                ("loop72", "7:72", &img, &[]),
                ("loop73", "7:73", &n71, &["dm-7"]),
                ("loop74", "7:74", &n71, &[]),
            ],
        );
        let held = "has holders (dm-7): another device is built on it";
        assert_eq!(
            examine_file(&img, sys.path()).in_use,
            vec![format!("it backs loop70, which is under loop71, which is under loop73, which {held}")]
        );
        assert_eq!(backing_in_use(7, 70, sys.path()), vec![format!("it is under loop71, which is under loop73, which {held}")]);
        assert_eq!(backing_in_use(7, 71, sys.path()), vec![format!("it is under loop73, which {held}")]);
        assert_eq!(
            backing_in_use(7, 72, sys.path()),
            vec![format!("loop70 over the same backing file {} is under loop71, which is under loop73, which {held}", img.display())]
        );
        // Writing the top or its sibling writes loop71, which loop73 is over.
        assert_eq!(backing_in_use(7, 74, sys.path()), vec![format!("loop73 over the same backing device loop71 {held}")]);
        assert!(backing_in_use(7, 73, sys.path()).is_empty());
        // The middle device held itself: whatever is over it, down to the file, is refused.
        let sys2 = tempfile::tempdir().unwrap();
        fake_loops(sys2.path(), &[("loop70", "7:70", &img, &[]), ("loop71", "7:71", &n70, &["dm-8"])]);
        let e = "has holders (dm-8): another device is built on it";
        assert_eq!(examine_file(&img, sys2.path()).in_use, vec![format!("it backs loop70, which is under loop71, which {e}")]);
        assert_eq!(backing_in_use(7, 70, sys2.path()), vec![format!("it is under loop71, which {e}")]);
    }

    #[test]
    fn pseudo_file_systems() {
        assert_eq!(pseudo_fs(Path::new("/proc/self/status")), Some("proc"));
        if Path::new("/sys/kernel").is_dir() {
            assert_eq!(pseudo_fs(Path::new("/sys/kernel")), Some("sysfs"));
        }
        let d = tempfile::tempdir().unwrap();
        assert_eq!(pseudo_fs(d.path()), None);
        let e = decide_file(Path::new("/proc/self/status"), Some("proc"), &Findings::default(), false).unwrap_err().to_string();
        assert!(e.contains("on proc, a kernel pseudo-file system"), "{e}");
    }

    #[test]
    fn whole_disk_lists_partitions_and_their_holders() {
        let sys = fake_sysfs();
        let f = sysfs_facts(sys.path(), 7, 0);
        assert!(f.node.as_ref().unwrap().ends_with("devices/virtual/block/loop0"));
        assert!(!f.is_partition);
        assert_eq!(f.partitions, vec![("loop0p1".into(), Some("259:0".into())), ("loop0p2".into(), Some("259:1".into()))]);
        assert_eq!(f.holders, vec!["dm-0 (on loop0p1)".to_string()]);
    }

    #[test]
    fn partition_has_no_children_and_its_own_holders() {
        let sys = fake_sysfs();
        let f = sysfs_facts(sys.path(), 259, 0);
        assert!(f.is_partition);
        assert!(f.partitions.is_empty());
        assert_eq!(f.holders, vec!["dm-0".to_string()]);
        let f = sysfs_facts(sys.path(), 259, 1);
        assert!(f.is_partition && f.partitions.is_empty() && f.holders.is_empty());
    }

    #[test]
    fn holders_of_a_whole_disk() {
        let sys = fake_sysfs();
        let f = sysfs_facts(sys.path(), 7, 1);
        assert_eq!(f.holders, vec!["md0".to_string()]);
        assert!(f.partitions.is_empty());
    }

    #[test]
    fn unused_disks_and_unknown_numbers() {
        let sys = fake_sysfs();
        for (ma, mi) in [(7, 2), (8, 0)] {
            let f = sysfs_facts(sys.path(), ma, mi);
            assert!(f.node.is_some(), "{ma}:{mi}");
            assert!(f.partitions.is_empty() && f.holders.is_empty(), "{ma}:{mi}: {f:?}");
        }
        assert_eq!(sysfs_facts(sys.path(), 9, 9), SysfsFacts::default());
        assert_eq!(sysfs_facts(&sys.path().join("nonexistent"), 7, 0), SysfsFacts::default());
    }

    #[test]
    fn the_real_sysfs_resolves_this_machines_disks() {
        // Whatever disk holds the current directory, sysfs must know it (when it is a block device).
        let Ok(meta) = std::fs::metadata(".") else { return };
        let (ma, mi) = (libc::major(meta.dev()), libc::minor(meta.dev()));
        if ma != 0 && Path::new(SYSFS).join("dev/block").is_dir() {
            assert!(sysfs_node(Path::new(SYSFS), ma, mi).is_some());
        }
    }

    #[test]
    fn mount_points_match_device_numbers() {
        let mi = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                  40 22 7:0 / /mnt/my\\040disk rw - ext4 /dev/loop0 rw\n\
                  41 22 259:1 / /srv rw - xfs /dev/loop0p2 rw\n\
                  42 22 259:1 /sub /bind rw - xfs /dev/loop0p2 rw\n";
        assert_eq!(mount_points(mi, &["7:0".into()]), vec!["/mnt/my disk".to_string()]);
        assert_eq!(mount_points(mi, &["7:1".into(), "259:1".into()]), vec!["/srv".to_string(), "/bind".to_string()]);
        assert!(mount_points(mi, &["7:10".into()]).is_empty());
        assert!(mount_points("", &["7:0".into()]).is_empty());
    }

    #[test]
    fn unescape_octal() {
        assert_eq!(unescape("/a\\040b\\011c"), "/a b\tc");
        assert_eq!(unescape("/plain\\"), "/plain\\");
        assert_eq!(unescape("\\04"), "\\04");
    }

    fn image(len: usize, edit: impl FnOnce(&mut Vec<u8>)) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("img");
        let mut b = vec![0u8; len];
        edit(&mut b);
        std::fs::write(&p, &b).unwrap();
        (d, p)
    }

    #[test]
    fn signatures_at_the_start() {
        let (_d, p) = image(1 << 20, |_| {});
        assert!(signatures_in(&p).is_empty());
        let (_d, p) = image(1 << 20, |b| b[1080..1082].copy_from_slice(&[0x53, 0xEF]));
        assert_eq!(signatures_in(&p), vec!["it holds an ext2/3/4 filesystem".to_string()]);
        let (_d, p) = image(1 << 20, |b| {
            b[0..8].copy_from_slice(b"LABELONE");
            b[512..520].copy_from_slice(b"LABELONE");
        });
        assert_eq!(signatures_in(&p), vec!["it holds an LVM physical volume".to_string()]);
        let (_d, p) = image(1 << 20, |b| b[65600..65608].copy_from_slice(b"_BHRfS_M"));
        assert_eq!(signatures_in(&p), vec!["it holds a btrfs filesystem".to_string()]);
    }

    #[test]
    fn partition_tables() {
        let mbr = |b: &mut Vec<u8>| {
            b[446 + 4] = 0x83;
            b[510] = 0x55;
            b[511] = 0xAA;
        };
        let (_d, p) = image(1 << 20, mbr);
        assert_eq!(signatures_in(&p), vec!["it holds an MBR partition table".to_string()]);
        // A boot signature with no used entry is not a partition table.
        let (_d, p) = image(1 << 20, |b| {
            b[510] = 0x55;
            b[511] = 0xAA;
        });
        assert!(signatures_in(&p).is_empty());
        // Devices smaller than the searched head are still searched.
        let (_d, p) = image(4096, mbr);
        assert_eq!(signatures_in(&p), vec!["it holds an MBR partition table".to_string()]);
        let (_d, p) = image(1 << 20, |b| b[512..520].copy_from_slice(b"EFI PART"));
        assert_eq!(signatures_in(&p), vec!["it holds a GPT partition table".to_string()]);
        // Only the backup GPT header (the primary was wiped).
        let (_d, p) = image(1 << 20, |b| {
            let n = b.len();
            b[n - 512..n - 504].copy_from_slice(b"EFI PART");
        });
        assert_eq!(signatures_in(&p), vec!["it holds a GPT partition table".to_string()]);
    }

    #[test]
    fn md_superblocks_at_the_end() {
        let magic = [0xFC, 0x4E, 0x2B, 0xA9];
        let size = (1 << 20) + 12345;
        let (_d, p) = image(size, |b| {
            let o = (size & !65535) - 65536;
            b[o..o + 4].copy_from_slice(&magic);
        });
        assert_eq!(signatures_in(&p), vec!["it holds an md RAID (v0.90/1.0) member".to_string()]);
        let (_d, p) = image(size, |b| {
            let o = (size - 8192) & !4095;
            b[o..o + 4].copy_from_slice(&magic);
        });
        assert_eq!(signatures_in(&p), vec!["it holds an md RAID (v0.90/1.0) member".to_string()]);
    }

    #[test]
    fn decisions() {
        let p = Path::new("/dev/sdz");
        let none = Findings::default();
        let e = decide(p, &none, false).unwrap_err().to_string();
        assert!(e.contains("without consent") && e.contains("--destructive /dev/sdz"), "{e}");
        assert_eq!(decide(p, &none, true), Ok(()));
        let fs = Findings { in_use: vec![], contents: vec!["it holds an XFS filesystem".into()] };
        let e = decide(p, &fs, false).unwrap_err().to_string();
        assert!(e.contains("XFS") && e.contains("--destructive /dev/sdz"), "{e}");
        assert_eq!(decide(p, &fs, true), Ok(()));
        let busy = Findings { in_use: vec!["it is mounted on /mnt".into()], contents: vec!["it holds an XFS filesystem".into()] };
        for consent in [false, true] {
            let e = decide(p, &busy, consent).unwrap_err().to_string();
            assert!(e.contains("mounted on /mnt") && e.contains("XFS") && e.contains("--destructive does not override"), "{e}");
        }
        for f in [&none, &fs, &busy] {
            for c in [false, true] {
                if let Err(e) = decide(p, f, c).map_err(|e| e.to_string()) {
                    assert!(!e.contains('\n'));
                }
            }
        }
    }

    #[test]
    fn passthru_decisions_name_both_paths() {
        let none = Findings::default();
        let e = decide_as(
            "NVMe namespace /dev/ng0n1 (block device /dev/nvme0n1)",
            "/dev/ng0n1 (the namespace of block device /dev/nvme0n1)",
            "/dev/ng0n1",
            &none,
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("without consent") && e.contains("--destructive /dev/ng0n1") && e.contains("/dev/nvme0n1"), "{e}");
        let busy = Findings { in_use: vec!["it is mounted on /mnt".into()], contents: vec![] };
        let e =
            decide_as("x", "/dev/ng0n1 (the namespace of block device /dev/nvme0n1)", "/dev/ng0n1", &busy, true).unwrap_err().to_string();
        assert!(e.contains("mounted on /mnt") && e.contains("/dev/nvme0n1") && e.contains("does not override"), "{e}");
    }

    #[test]
    fn destructive_must_name_the_same_file() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let b = d.path().join("b");
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(&b, b"x").unwrap();
        symlink(&a, d.path().join("link")).unwrap();
        let s = |p: &Path| p.display().to_string();
        assert!(named_destructive(&a, &[s(&a)]));
        assert!(named_destructive(&a, &[s(&b), s(&d.path().join("link"))]));
        assert!(!named_destructive(&a, &[s(&b)]));
        assert!(!named_destructive(&a, &[]));
        assert!(!named_destructive(&a, &["/nonexistent".into()]));
        assert!(!named_destructive(&d.path().join("gone"), &[s(&a)]));
    }
}
