//! Interrupt counts from /proc/interrupts, and which lines belong to a block device's queues.
use std::path::Path;

#[derive(Clone, Debug, PartialEq)]
pub struct IrqLine {
    /// "36", or "LOC", "RES"... for architecture interrupts.
    pub id: String,
    pub total: u64,
    /// The action name (last column), e.g. "nvme0q3", "virtio1-req.0"; for named lines the description.
    pub name: String,
}

/// Parse /proc/interrupts. The header gives the CPU count; each line has that many counters.
pub fn parse(text: &str) -> Vec<IrqLine> {
    let mut lines = text.lines();
    let ncpu = lines.next().map_or(0, |h| h.split_whitespace().count());
    lines
        .filter_map(|l| {
            let (id, rest) = l.split_once(':')?;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let counts: Vec<u64> = fields.iter().take(ncpu).map_while(|f| f.parse().ok()).collect();
            let name = fields.get(counts.len()..).map(|f| f.last().copied().unwrap_or("").to_string()).unwrap_or_default();
            Some(IrqLine { id: id.trim().to_string(), total: counts.iter().sum(), name })
        })
        .collect()
}

/// Does this interrupt line serve an I/O queue of the controller named `ctrl` (e.g. "nvme0",
/// "virtio1")? NVMe queue 0 is the admin queue and virtio's "-config" is not I/O.
pub fn is_queue_irq(ctrl: &str, name: &str) -> bool {
    let Some(rest) = name.strip_prefix(ctrl) else { return false };
    if ctrl.starts_with("nvme") {
        return rest.strip_prefix('q').is_some_and(|q| q != "0" && q.chars().all(|c| c.is_ascii_digit()) && !q.is_empty());
    }
    (rest.is_empty() || rest.starts_with('-')) && !rest.ends_with("-config")
}

/// The controller behind a whole-disk sysfs directory: the name of what `device` points at
/// (virtio1), or for NVMe namespaces the controller (nvme0). None for devices without one
/// (loop, zram, null_blk).
pub(crate) fn controller_of(disk_dir: &Path) -> Option<String> {
    let dev = std::fs::canonicalize(disk_dir.join("device")).ok()?;
    let name = dev.file_name()?.to_string_lossy().into_owned();
    Some(name)
}

pub fn sample() -> Vec<IrqLine> {
    parse(&std::fs::read_to_string("/proc/interrupts").unwrap_or_default())
}

/// (sum over the controller's queue interrupts, sum over all lines).
pub fn totals(lines: &[IrqLine], ctrl: Option<&str>) -> (Option<u64>, u64) {
    let all = lines.iter().map(|l| l.total).sum();
    let dev = ctrl.map(|c| lines.iter().filter(|l| is_queue_irq(c, &l.name)).map(|l| l.total).sum());
    (dev, all)
}
