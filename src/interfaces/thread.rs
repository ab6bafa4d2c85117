//! What each issuing thread is given besides its CPU: the memory policy its I/O buffers are
//! allocated under (fio's `numa_mem_policy`), its I/O priority (fio's `prioclass`/`prio`), and a
//! priority carried by a fraction of its commands (fio's `cmdprio_percentage`/`cmdprio_class`/
//! `cmdprio`: libaio's `aio_reqprio` with IOCB_FLAG_IOPRIO, io_uring's SQE `ioprio`). Each
//! worker applies them before its buffers are allocated and reads them back from the kernel
//! (get_mempolicy, move_pages, ioprio_get); the record's `results.thread_settings` says what
//! was asked and what each thread had.
use super::{InterfaceKind, IoChoice};
use serde::{Deserialize, Serialize};

/// The NUMA nodes of a list such as "0-1,3" as a bit mask (nodes 0 to 63).
pub(crate) fn parse_nodes(s: &str) -> Result<u64, String> {
    let mut mask = 0u64;
    for part in s.split(',').map(str::trim) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (u32, u32) = match (a.trim().parse(), b.trim().parse()) {
            (Ok(a), Ok(b)) if a <= b && b < 64 => (a, b),
            _ => return Err(format!("'{part}' is not a NUMA node or range of nodes (0 to 63)")),
        };
        for n in a..=b {
            mask |= 1 << n;
        }
    }
    Ok(mask)
}

/// A node mask as the kernel writes lists: "0-1,3".
pub(crate) fn nodes_text(mask: u64) -> String {
    let nodes = mask_nodes(mask);
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < nodes.len() {
        let mut j = i;
        while j + 1 < nodes.len() && nodes[j + 1] == nodes[j] + 1 {
            j += 1;
        }
        parts.push(if j == i { nodes[i].to_string() } else { format!("{}-{}", nodes[i], nodes[j]) });
        i = j + 1;
    }
    parts.join(",")
}

/// The nodes of a mask, in order.
pub(crate) fn mask_nodes(mask: u64) -> Vec<u32> {
    (0..64).filter(|n| mask & (1 << n) != 0).collect()
}

macro_rules! by_words {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// The memory policy a thread's I/O buffers are allocated under, written as fio's
/// `numa_mem_policy`: `default`, `local`, `prefer:N`, `bind:NODES`, `interleave:NODES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemPolicy {
    Default,
    Local,
    Prefer(u32),
    Bind(u64),
    Interleave(u64),
}

by_words!(MemPolicy);

const MPOL_DEFAULT: i32 = 0;
const MPOL_PREFERRED: i32 = 1;
const MPOL_BIND: i32 = 2;
const MPOL_INTERLEAVE: i32 = 3;
const MPOL_LOCAL: i32 = 4;
const MPOL_MF_MOVE: u32 = 1 << 1;
/// Bits of the node masks passed to the kernel (it refuses a mask shorter than its node ids).
const MASK_BITS: usize = 1024;

impl MemPolicy {
    /// The kernel's mode and node mask.
    fn mode_mask(self) -> (i32, u64) {
        match self {
            MemPolicy::Default => (MPOL_DEFAULT, 0),
            MemPolicy::Local => (MPOL_LOCAL, 0),
            MemPolicy::Prefer(n) => (MPOL_PREFERRED, 1 << n),
            MemPolicy::Bind(m) => (MPOL_BIND, m),
            MemPolicy::Interleave(m) => (MPOL_INTERLEAVE, m),
        }
    }
    /// The nodes it names (none for default and local).
    pub(crate) fn nodes(self) -> Vec<u32> {
        mask_nodes(self.mode_mask().1)
    }
}

impl std::str::FromStr for MemPolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<MemPolicy, String> {
        let bad = |why: String| format!("--mem-policy '{s}': {why}: write default, local, prefer:NODE, bind:NODES or interleave:NODES");
        let (mode, nodes) = s.trim().split_once(':').map_or((s.trim(), None), |(m, n)| (m, Some(n)));
        let nodes = |what: &str| nodes.ok_or_else(|| bad(format!("{what} needs its nodes"))).and_then(|n| parse_nodes(n).map_err(bad));
        Ok(match mode {
            "default" | "local" if s.contains(':') => return Err(bad(format!("{mode} takes no nodes"))),
            "default" => MemPolicy::Default,
            "local" => MemPolicy::Local,
            "prefer" => {
                let m = nodes("prefer")?;
                if m.count_ones() != 1 {
                    return Err(bad("prefer takes one node".into()));
                }
                MemPolicy::Prefer(m.trailing_zeros())
            }
            "bind" => MemPolicy::Bind(nodes("bind")?),
            "interleave" => MemPolicy::Interleave(nodes("interleave")?),
            other => return Err(bad(format!("'{other}' is not a policy"))),
        })
    }
}

impl std::fmt::Display for MemPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            MemPolicy::Default => f.write_str("default"),
            MemPolicy::Local => f.write_str("local"),
            MemPolicy::Prefer(n) => write!(f, "prefer:{n}"),
            MemPolicy::Bind(m) => write!(f, "bind:{}", nodes_text(*m)),
            MemPolicy::Interleave(m) => write!(f, "interleave:{}", nodes_text(*m)),
        }
    }
}

/// An I/O priority: its class (1 realtime, 2 best-effort, 3 idle) and level (0, the highest, to
/// 7), written `rt:0`, `be:4`, `idle` (or the class's number, fio's `prioclass`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ioprio {
    pub class: u8,
    pub level: u8,
}

by_words!(Ioprio);

const IOPRIO_CLASS_SHIFT: u16 = 13;
const IOPRIO_WHO_PROCESS: libc::c_long = 1;
/// `who`/`pid` 0: the calling thread (or process, for move_pages).
const SELF: libc::c_long = 0;
const CLASSES: [&str; 4] = ["none", "rt", "be", "idle"];

impl Ioprio {
    /// The kernel's 16-bit value: class << 13 | level.
    pub fn value(self) -> u16 {
        (u16::from(self.class) << IOPRIO_CLASS_SHIFT) | u16::from(self.level)
    }
    fn of_value(v: u16) -> String {
        let class = (v >> IOPRIO_CLASS_SHIFT) as usize;
        format!("{}:{}", CLASSES.get(class).copied().unwrap_or("?"), v & 7)
    }
}

impl std::str::FromStr for Ioprio {
    type Err = String;
    fn from_str(s: &str) -> Result<Ioprio, String> {
        let bad =
            || format!("'{s}' is not an I/O priority: write CLASS[:LEVEL], CLASS rt, be or idle (or 1, 2, 3), LEVEL 0 (highest) to 7");
        let (class, level) = s.trim().split_once(':').unwrap_or((s.trim(), "0"));
        let class = match class {
            "rt" | "1" => 1,
            "be" | "2" => 2,
            "idle" | "3" => 3,
            _ => return Err(bad()),
        };
        let level: u8 = level.trim().parse().ok().filter(|l| *l <= 7).ok_or_else(bad)?;
        Ok(Ioprio { class, level })
    }
}

impl std::fmt::Display for Ioprio {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&Ioprio::of_value(self.value()))
    }
}

/// A priority carried by a fraction of the commands, per direction (reads, writes): `percent`
/// of them, drawn from a seeded sequence, carry `prio`; the rest carry none (the thread's own).
/// Written `20%rt:0` (both directions) or `20%rt:0,10%be:3` (reads, writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmdPrio {
    pub percent: [u8; 2],
    pub prio: [Ioprio; 2],
}

by_words!(CmdPrio);

impl std::str::FromStr for CmdPrio {
    type Err = String;
    fn from_str(s: &str) -> Result<CmdPrio, String> {
        let one = |p: &str| -> Result<(u8, Ioprio), String> {
            let bad = |why: String| format!("--cmdprio '{s}': {why}: write PCT%CLASS[:LEVEL], or reads',writes' (20%rt:0,10%be:3)");
            let (pct, prio) = p.trim().split_once('%').ok_or_else(|| bad(format!("'{p}' has no %")))?;
            let pct: u8 = pct.trim().parse().ok().filter(|p| *p <= 100).ok_or_else(|| bad(format!("'{pct}' is not a percentage")))?;
            Ok((pct, prio.parse().map_err(bad)?))
        };
        let parts: Vec<&str> = s.split(',').collect();
        let (r, w) = match parts.as_slice() {
            [both] => (one(both)?, one(both)?),
            [r, w] => (one(r)?, one(w)?),
            _ => return Err(format!("--cmdprio '{s}': one priority for both directions, or two (reads, writes)")),
        };
        Ok(CmdPrio { percent: [r.0, w.0], prio: [r.1, w.1] })
    }
}

impl std::fmt::Display for CmdPrio {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}%{}", self.percent[0], self.prio[0])?;
        if self.percent[0] != self.percent[1] || self.prio[0] != self.prio[1] {
            write!(f, ",{}%{}", self.percent[1], self.prio[1])?;
        }
        Ok(())
    }
}

/// The interfaces that carry a per-command priority.
pub(crate) const CMDPRIO_INTERFACES: [InterfaceKind; 2] = [InterfaceKind::Libaio, InterfaceKind::IoUring];

/// What each issuing thread is given besides its CPU (fio's numa_mem_policy, prioclass/prio,
/// cmdprio_*).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, clap::Args)]
pub struct ThreadOptions {
    /// The memory policy each thread's I/O buffers are allocated under (fio's numa_mem_policy):
    /// default, local, prefer:NODE, bind:NODES or interleave:NODES (NODES: 0-1,3).
    #[arg(long, value_name = "POLICY")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mem_policy: Option<MemPolicy>,
    /// Each thread's I/O priority (fio's prioclass, prio): CLASS[:LEVEL], CLASS rt, be or idle,
    /// LEVEL 0 (highest) to 7.
    #[arg(long, value_name = "CLASS[:LEVEL]")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ioprio: Option<Ioprio>,
    /// -i libaio and io_uring: PCT% of the commands carry this priority (fio's
    /// cmdprio_percentage, cmdprio_class, cmdprio): PCT%CLASS[:LEVEL], or reads',writes'.
    #[arg(long, value_name = "PCT%CLASS[:LEVEL]")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdprio: Option<CmdPrio>,
}

impl super::OptionsPart for ThreadOptions {
    const PLAN_KEYS: &'static [&'static str] = &["mem_policy", "ioprio", "cmdprio"];

    fn plan_value<'de, A: serde::de::MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<(), A::Error> {
        match key {
            "mem_policy" => self.mem_policy = Some(map.next_value()?),
            "ioprio" => self.ioprio = Some(map.next_value()?),
            _ => self.cmdprio = Some(map.next_value()?),
        }
        Ok(())
    }

    fn check(&self, io: &IoChoice) -> Result<(), String> {
        if self.cmdprio.is_some() && !CMDPRIO_INTERFACES.contains(&io.interface) {
            return Err(format!(
                "--cmdprio: a per-command priority is carried by -i libaio (aio_reqprio) and -i io_uring (the SQE's ioprio), not -i {}",
                io.interface.name()
            ));
        }
        Ok(())
    }
}

impl ThreadOptions {
    pub(crate) fn any(&self) -> bool {
        self.mem_policy.is_some() || self.ioprio.is_some() || self.cmdprio.is_some()
    }
}

/// What one thread had, read back from the kernel.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Applied {
    pub thread: u32,
    /// The thread's memory policy read back (get_mempolicy), in `--mem-policy`'s words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_policy: Option<String>,
    /// The pages of the thread's I/O buffers by the NUMA node they are on (move_pages), in
    /// node order: [node, pages].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub buffer_pages_by_node: Vec<(i32, u64)>,
    /// The thread's I/O priority read back (ioprio_get).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ioprio: Option<String>,
    /// With a per-command priority: the commands this thread's interface sent, per direction
    /// (reads, writes), and how many of them carried the priority.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands: Option<[u64; 2]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commands_with_prio: Option<[u64; 2]>,
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// The calling thread's memory policy, in `--mem-policy`'s words.
fn read_mem_policy() -> Result<String, String> {
    let mut mode: libc::c_int = 0;
    let mut mask = [0u64; MASK_BITS / 64];
    // SAFETY: mode and mask are writable and mask holds MASK_BITS bits.
    let rc = unsafe {
        libc::syscall(libc::SYS_get_mempolicy, &mut mode, mask.as_mut_ptr(), MASK_BITS as libc::c_ulong, std::ptr::null_mut::<u8>(), 0)
    };
    if rc != 0 {
        return Err(os_err("get_mempolicy"));
    }
    Ok(match mode {
        MPOL_DEFAULT => "default".into(),
        MPOL_LOCAL => "local".into(),
        // Older kernels keep `local` as preferred with no node.
        MPOL_PREFERRED if mask[0] == 0 => "local".into(),
        MPOL_PREFERRED => format!("prefer:{}", nodes_text(mask[0])),
        MPOL_BIND => format!("bind:{}", nodes_text(mask[0])),
        MPOL_INTERLEAVE => format!("interleave:{}", nodes_text(mask[0])),
        other => format!("mode {other}:{}", nodes_text(mask[0])),
    })
}

/// On the calling worker `thread`, before its buffers are allocated: its memory policy and I/O
/// priority, each read back and compared with what was asked (a difference fails the run).
/// None when nothing is asked: the thread is left as the kernel made it.
pub(crate) fn apply(opts: &ThreadOptions, thread: u32) -> Result<Option<Applied>, String> {
    if !opts.any() {
        return Ok(None);
    }
    let mut a = Applied { thread, ..Applied::default() };
    if let Some(p) = opts.mem_policy {
        let (mode, mask) = p.mode_mask();
        let mut bits = [0u64; MASK_BITS / 64];
        bits[0] = mask;
        let (ptr, max) = if mask == 0 { (std::ptr::null(), 0) } else { (bits.as_ptr(), MASK_BITS as libc::c_ulong + 1) };
        // SAFETY: the mask holds MASK_BITS bits (the kernel reads maxnode - 1 of them) or is null.
        if unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, ptr, max) } != 0 {
            return Err(os_err(&format!("--mem-policy {p}: set_mempolicy")));
        }
        let got = read_mem_policy()?;
        if got != p.to_string() {
            return Err(format!("--mem-policy {p}: set, but the kernel reads the thread's policy back as {got}"));
        }
        a.mem_policy = Some(got);
    }
    if let Some(p) = opts.ioprio {
        // SAFETY: ioprio_set and ioprio_get take plain integers; who 0 is the calling thread.
        let (set, got) = unsafe {
            (
                libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, SELF, p.value() as libc::c_long),
                libc::syscall(libc::SYS_ioprio_get, IOPRIO_WHO_PROCESS, SELF),
            )
        };
        if set != 0 {
            return Err(os_err(&format!("--ioprio {p}: ioprio_set")));
        }
        if got != p.value() as libc::c_long {
            return Err(format!("--ioprio {p}: set, but ioprio_get reads the thread's back as {}", Ioprio::of_value(got.max(0) as u16)));
        }
        a.ioprio = Some(Ioprio::of_value(got as u16));
    }
    Ok(Some(a))
}

/// After the thread's buffers at `ptr` (`len` bytes, page aligned) were allocated and written:
/// under a memory policy, bound to it (mbind, moving pages faulted in before) and where each
/// page is read back (move_pages).
pub(crate) fn place_buffers(opts: &ThreadOptions, a: &mut Applied, ptr: *mut u8, len: usize) -> Result<(), String> {
    let Some(p) = opts.mem_policy else { return Ok(()) };
    let page = 4096usize;
    let len = len.next_multiple_of(page);
    let (mode, mask) = p.mode_mask();
    if mode != MPOL_DEFAULT {
        let mut bits = [0u64; MASK_BITS / 64];
        bits[0] = mask;
        let (mptr, max) = if mask == 0 { (std::ptr::null(), 0) } else { (bits.as_ptr(), MASK_BITS as libc::c_ulong + 1) };
        // SAFETY: [ptr, ptr + len) is this thread's own page-aligned buffer; the mask as above.
        if unsafe { libc::syscall(libc::SYS_mbind, ptr, len, mode, mptr, max, MPOL_MF_MOVE) } != 0 {
            return Err(os_err(&format!("--mem-policy {p}: mbind on the I/O buffers")));
        }
    }
    let pages: Vec<*mut u8> = (0..len / page).map(|i| ptr.wrapping_add(i * page)).collect();
    let mut status = vec![0i32; pages.len()];
    // SAFETY: pages and status have one entry per page; a null node list only reads placement.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            SELF,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            std::ptr::null::<i32>(),
            status.as_mut_ptr(),
            libc::c_long::default(),
        )
    };
    if rc != 0 {
        return Err(os_err("move_pages (reading where the I/O buffers are)"));
    }
    let mut by: Vec<(i32, u64)> = Vec::new();
    for s in status {
        match by.iter_mut().find(|(n, _)| *n == s) {
            Some((_, c)) => *c += 1,
            None => by.push((s, 1)),
        }
    }
    by.sort();
    a.buffer_pages_by_node = by;
    Ok(())
}

/// A thread's per-command priority draw: a cheap seeded sequence (xorshift) deciding which
/// commands carry the priority, and the counts of both.
#[derive(Clone, Debug)]
pub(crate) struct CmdPrioDraw {
    state: u64,
    /// Per direction: a draw below it carries the priority (percent of 2^32).
    below: [u64; 2],
    /// Per direction, the priority's value.
    pub value: [u16; 2],
    pub commands: [u64; 2],
    pub with_prio: [u64; 2],
}

impl CmdPrioDraw {
    pub(crate) fn new(c: &CmdPrio, seed: u64) -> CmdPrioDraw {
        CmdPrioDraw {
            state: seed | 1,
            below: c.percent.map(|p| (u64::from(p) << 32) / 100),
            value: c.prio.map(Ioprio::value),
            commands: [0; 2],
            with_prio: [0; 2],
        }
    }
    /// The priority the next command of this direction carries, if any.
    #[inline]
    pub(crate) fn next(&mut self, write: bool) -> Option<u16> {
        let d = write as usize;
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        self.commands[d] += 1;
        if (x >> 32) < self.below[d] {
            self.with_prio[d] += 1;
            Some(self.value[d])
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_parse_and_print_back() {
        for w in ["default", "local", "prefer:1", "bind:0", "interleave:0-1,3"] {
            assert_eq!(w.parse::<MemPolicy>().unwrap().to_string(), w);
        }
        assert_eq!("bind:1,0".parse::<MemPolicy>().unwrap(), MemPolicy::Bind(3));
        for bad in ["bind", "prefer:0-1", "local:0", "spread:0", "bind:x", "bind:64"] {
            assert!(bad.parse::<MemPolicy>().is_err(), "{bad}");
        }
        assert_eq!("idle".parse::<Ioprio>().unwrap(), Ioprio { class: 3, level: 0 });
        assert_eq!("2:4".parse::<Ioprio>().unwrap().to_string(), "be:4");
        assert_eq!("rt:0".parse::<Ioprio>().unwrap().value(), 1 << 13);
        assert!("be:8".parse::<Ioprio>().is_err() && "0".parse::<Ioprio>().is_err());
        let c: CmdPrio = "20%rt".parse().unwrap();
        assert_eq!((c.percent, c.to_string()), ([20, 20], "20%rt:0".to_string()));
        assert_eq!("20%rt:0,10%be:3".parse::<CmdPrio>().unwrap().to_string(), "20%rt:0,10%be:3");
        assert!("120%rt".parse::<CmdPrio>().is_err() && "20rt".parse::<CmdPrio>().is_err());
    }

    /// The draw gives the asked fraction, deterministically, and none at 0 %.
    #[test]
    fn the_draw_carries_the_fraction_asked() {
        let mut d = CmdPrioDraw::new(&"20%rt:0,0%be".parse().unwrap(), 7);
        for i in 0..100_000 {
            d.next(i % 2 == 1);
        }
        assert_eq!(d.commands, [50_000, 50_000]);
        assert_eq!(d.with_prio[1], 0);
        assert!((9_500..10_500).contains(&d.with_prio[0]), "{:?}", d.with_prio);
    }
}
