//! Taking a controller from the kernel for one run and giving it back: resolve the target, refuse
//! while the kernel's side of it is in use, journal and apply the binding to vfio-pci (and the
//! hugepages its queues need), open it through VFIO and attach the driver: the interface's target
//! part, whose attached controller every thread's open gets as its handle. Giving back runs in reverse: the queue pairs are gone with the workers, the
//! controller is disabled, every VFIO descriptor closed (vfio-pci will not let go of a device
//! that is still open), then the binding and hugepages are restored. `Drop` gives back too, so
//! an error return or Ctrl-C does; after kill -9, `iolab restore` binds it back from the journal.
use super::controller::{Controller, Options, PAGE};
pub use super::env::DriverEnv;
use super::vfio::{BarRegs, Dma, DmaHandle, Iommu, Vfio, HUGEPAGE};
use crate::device::controller::{self as ctrl, ControllerTarget};
use crate::device::sysinfo::TargetInfo;
use crate::failure::{Failure, FailureKind};
use crate::interfaces::memory::BufferMemory;
use crate::interfaces::target::{Acquire, Observation, OpenTarget, TargetPart, TargetRequest};
use crate::interfaces::Path as CompletionPath;
use crate::settings::{AppliedGuard, Change, Setting, Settings};
use std::path::Path;
use std::sync::Arc;

/// What a run needs of the controller.
pub struct Want<'a> {
    pub target: &'a str,
    pub writes: bool,
    pub destructive: &'a [String],
    pub threads: u32,
    pub qd: u32,
    pub bs: u64,
    pub allow_noiommu: bool,
}

/// A controller taken from the kernel and attached: the run's one target.
pub struct Taken {
    pub target: ControllerTarget,
    pub ctrl: Option<Arc<Controller<BarRegs, DmaHandle>>>,
    pub env: DriverEnv,
    /// The binding and hugepages, restored last.
    guard: Option<AppliedGuard>,
    /// Interrupts on the controller's vectors when it was taken.
    irqs_at_start: u64,
    /// The namespace as the record describes it, and the byte range the run uses.
    info: TargetInfo,
    range: (u64, u64),
}

/// Hugepages the admin queues and the queues and PRP lists of `threads` queue pairs need, with
/// one spare per thread (a region never spans two hugepages); with `buffers` (no IOMMU), also
/// each thread's slot buffers and the verify reader's block.
pub(crate) fn hugepages_needed(threads: u32, qd: u32, bs: u64, buffers: BufferMemory) -> u64 {
    let (entries, page) = (qd as u64 + 1, PAGE as u64);
    let per_thread = (entries * 64).div_ceil(page) + (entries * 16).div_ceil(page) + if bs > page { qd as u64 } else { 0 };
    let queues = (3 + threads as u64 * per_thread).div_ceil((HUGEPAGE / PAGE) as u64) + threads as u64;
    let huge = HUGEPAGE as u64;
    match buffers {
        BufferMemory::Heap => queues,
        BufferMemory::Hugepages => queues + threads as u64 * (qd as u64 * bs).div_ceil(huge) + bs.div_ceil(huge),
    }
}

/// Interrupts counted in /proc/interrupts on the lines naming PCI device `bdf` (vfio-pci names
/// its vectors "vfio-msix[N](BDF)"); None when it has none.
pub(crate) fn interrupts_of(bdf: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/interrupts").ok()?;
    let lines: Vec<&str> = text.lines().filter(|l| l.contains(bdf)).collect();
    (!lines.is_empty()).then(|| lines.iter().map(|l| l.split_whitespace().skip(1).map_while(|w| w.parse::<u64>().ok()).sum::<u64>()).sum())
}

/// Takes the target's controller for the run, or says why not (nothing changed then).
pub fn take(w: &Want) -> Result<Taken, Failure> {
    let system = Settings::system();
    let sys = system.sysfs_root().to_path_buf();
    // A target that is there but is no NVMe namespace on a PCI controller (a file, another disk)
    // is a configuration this interface cannot run: a sweep skips it. A missing one is a typo.
    let target =
        ctrl::resolve(w.target, &sys)
            .map_err(|e| if Path::new(w.target).exists() { Failure::unsupported(e.to_string()) } else { e.into() })?;
    ctrl::check_takeover(&target, w.writes, w.destructive, &sys, Path::new("/dev"))?;
    super::vfio::check_iommu(&target.bdf, &sys, w.allow_noiommu)?;
    if let Some(left) = system.left_changed()? {
        return Err(Failure::new(FailureKind::SettingsNotRestored, left));
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Failure::invalid("taking an NVMe controller from the kernel needs root: run iolab as root (sudo)".into()));
    }
    let mut changes = vec![Change::new(Setting::PciDriver, Some(&target.bdf), "vfio-pci")];
    let buffers = if w.allow_noiommu { BufferMemory::Hugepages } else { BufferMemory::Heap };
    changes.extend(system.hugepages_for(hugepages_needed(w.threads, w.qd, w.bs, buffers))?);
    for c in &changes {
        system.check(c)?;
    }
    // Failed when nothing is left changed, settings not restored when something is.
    let guard = system.apply(&changes)?;
    let mut taken = Taken {
        target: target.clone(),
        ctrl: None,
        env: DriverEnv {
            controller: target.bdf.clone(),
            nsid: target.nsid,
            iommu: Iommu::Type1,
            iommu_group: String::new(),
            version: String::new(),
            max_queue_entries: 0,
            max_transfer_bytes: None,
            io_queues: 0,
            hugepages: 0,
            buffers,
        },
        guard: Some(guard),
        irqs_at_start: 0,
        info: TargetInfo::default(),
        range: (0, 0),
    };
    // From here a failure gives the controller back as `taken` drops.
    let vfio = Arc::new(Vfio::open(&target.bdf, &sys, w.allow_noiommu)?);
    vfio.enable_bus_master()?;
    let regs = BarRegs(Arc::new(vfio.bar0()?));
    let mem = DmaHandle(Arc::new(Dma::new(vfio.clone())));
    let c = Controller::attach(regs, mem.clone(), Options { nsid: target.nsid, io_queue_entries: None })
        .map_err(|e| Failure::failed(format!("NVMe controller {}: {e}", target.bdf)))?;
    let vs = c.version;
    let e = &mut taken.env;
    e.iommu = vfio.iommu;
    e.iommu_group = vfio.group.clone();
    e.version = format!("{}.{}.{}", vs >> 16, (vs >> 8) & 0xff, vs & 0xff);
    e.max_queue_entries = c.cap.max_entries;
    e.max_transfer_bytes = c.max_transfer;
    e.io_queues = c.io_queues;
    e.hugepages = mem.0.hugepages();
    taken.ctrl = Some(Arc::new(c));
    taken.irqs_at_start = interrupts_of(&target.bdf).unwrap_or(0);
    Ok(taken)
}

impl Taken {
    /// The namespace's size in bytes and its block size.
    pub fn namespace(&self) -> (u64, u32) {
        let c = self.ctrl.as_ref().expect("attached");
        (c.ns.size_bytes(), c.ns.lba_size)
    }

    /// 2 MiB hugepages the driver's queues and PRP lists took.
    pub fn hugepages(&self) -> usize {
        self.ctrl.as_ref().map_or(0, |c| c.mem.0.hugepages())
    }

    /// What was changed to take it, as lines for the user ("0000:00:04.0 pci_driver: nvme -> vfio-pci").
    pub fn changes(&self) -> Vec<String> {
        self.guard.as_ref().map(|g| g.changes()).unwrap_or_default()
    }

    /// Interrupts on the controller's vectors since it was taken: 0 when it has none at all.
    pub fn interrupts(&self) -> u64 {
        interrupts_of(&self.target.bdf).unwrap_or(0).saturating_sub(self.irqs_at_start)
    }

    fn give_back_now(&mut self) -> Result<Vec<String>, String> {
        if let Some(c) = self.ctrl.take() {
            if Arc::strong_count(&c) > 1 {
                // A queue pair outlived its worker: the device stays open and vfio-pci would
                // block the unbind. Never expected; said rather than hung.
                std::mem::forget(c);
                return Err(format!(
                    "NVMe controller {} is still in use inside iolab; it stays bound to vfio-pci until iolab exits: run `iolab restore` then",
                    self.target.bdf
                ));
            }
            drop(c);
        }
        let Some(g) = self.guard.take() else { return Ok(Vec::new()) };
        let to_nvme = g.entries().iter().any(|e| e.setting == Setting::PciDriver && e.original == "nvme");
        let lines = g.restore()?;
        if to_nvme {
            self.wait_for_namespace();
        }
        Ok(lines)
    }

    /// Waits (at most 10 s) for the kernel's driver to show the namespace's block device again:
    /// it appears a few hundred ms after the bind, and the next run (a sweep's) may name it.
    fn wait_for_namespace(&self) {
        let sys = Settings::system().sysfs_root().to_path_buf();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < until {
            let devs = ctrl::kernel_devices(&self.target.bdf, &sys);
            if devs.iter().any(|d| d.block && d.nsid == Some(self.target.nsid) && Path::new("/dev").join(&d.name).exists()) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// The user-space driver's target part: the target's controller taken from the kernel for the
/// run and given back after it (`take`); the namespace is the run's one target.
impl Acquire for Taken {
    type Handle = Arc<Controller<BarRegs, DmaHandle>>;

    fn acquire(req: &TargetRequest) -> Result<Taken, Failure> {
        let a = &req.access;
        let [target] = a.targets.paths.as_slice() else {
            return Err(Failure::invalid(format!("{} drives one namespace per run: give one target", a.interface)));
        };
        let want = Want {
            target,
            writes: a.writes,
            destructive: &a.targets.destructive,
            threads: a.threads,
            qd: req.qd,
            bs: a.bs,
            allow_noiommu: req.io.options.vfio.vfio_noiommu,
        };
        let mut t = take(&want)?;
        let (size, lba) = t.namespace();
        let range_len = crate::device::usable_range(target, size, a)?;
        t.info = TargetInfo {
            path: target.clone(),
            kind: "nvme-pci".into(),
            size_bytes: size,
            logical_block_size: lba as u64,
            io_poll: Some(true),
            ..Default::default()
        };
        t.range = (a.targets.offset, range_len);
        Ok(t)
    }

    fn handle(&self) -> &Self::Handle {
        self.ctrl.as_ref().expect("attached until given back")
    }
}

impl TargetPart for Taken {
    fn describe(&self) -> Vec<TargetInfo> {
        vec![self.info.clone()]
    }

    /// The namespace has no descriptor: the driver reaches it through its handle.
    fn open_targets(&self) -> Vec<OpenTarget> {
        vec![OpenTarget { fd: -1, range_start: self.range.0, range_len: self.range.1 }]
    }

    fn changes(&self) -> Vec<String> {
        Taken::changes(self)
    }

    fn user_space_driver(&self) -> Option<DriverEnv> {
        Some(DriverEnv { hugepages: self.hugepages(), ..self.env.clone() })
    }

    /// No kernel driver completes anything: the controller's own vectors are the evidence.
    fn observed(&self) -> Option<Observation> {
        let irqs = self.interrupts();
        Some(Observation {
            path: if irqs == 0 { CompletionPath::Polled } else { CompletionPath::Interrupt },
            evidence: format!("{irqs} interrupts on {}'s vectors in /proc/interrupts while iolab's driver had it", self.env.controller),
        })
    }

    fn release(&mut self) -> Result<(), String> {
        self.give_back_now().map(|_| ()).map_err(|e| format!("giving the NVMe controller back to the kernel failed: {e}"))
    }
}

impl Drop for Taken {
    fn drop(&mut self) {
        if let Err(e) = self.give_back_now() {
            eprintln!("iolab: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hugepages_cover_the_queues_with_room_to_spare() {
        // QD32, 4 KiB: 33 entries take one SQ and one CQ page per thread.
        assert_eq!(hugepages_needed(1, 32, 4096, BufferMemory::Heap), 2);
        assert_eq!(hugepages_needed(4, 32, 4096, BufferMemory::Heap), 5);
        // QD1024 with 128 KiB blocks: 1024 PRP list pages + 17 + 5 ring pages per thread.
        assert_eq!(hugepages_needed(2, 1024, 128 << 10, BufferMemory::Heap), (3 + 2 * 1046u64).div_ceil(512) + 2);
    }

    #[test]
    fn without_an_iommu_the_slot_buffers_and_the_verify_block_take_hugepages_too() {
        // 2 threads x 32 x 4 KiB = 128 KiB each: one hugepage each, one for the verify block.
        assert_eq!(hugepages_needed(2, 32, 4096, BufferMemory::Hugepages), hugepages_needed(2, 32, 4096, BufferMemory::Heap) + 3);
        // QD4 x 1 MiB = 4 MiB: two each; the 1 MiB verify block one.
        assert_eq!(hugepages_needed(3, 4, 1 << 20, BufferMemory::Hugepages), hugepages_needed(3, 4, 1 << 20, BufferMemory::Heap) + 7);
    }
}
