//! System settings per run: I/O scheduler, nomerges, io_poll_delay, read-ahead, wbt and the CPU
//! frequency governor; for the user-space NVMe driver, a PCI device's driver binding (`pci.rs`)
//! and the 2 MiB hugepages reserved for its DMA memory; for `--profile`, the sysctls
//! `kernel.perf_event_paranoid` and `kernel.kptr_restrict` (lowered where profiling needs it,
//! `meters/access.rs`). iolab records the original values durably in a journal before changing
//! anything, restores them when the run ends (the `AppliedGuard`'s drop, or `restore()`), rolls
//! back on a failure midway, and `Settings::restore_journal` (behind `iolab restore`) undoes what
//! a killed process left changed. See docs/settings.md.
mod cpu;
pub mod crash;
pub mod error;
mod journal;
mod nvme;
pub mod pci;
mod sysfs;
mod value;

pub use error::SettingsError;
pub use journal::{pid_alive, Holder, Journal, JournalEntry, Owner};
pub use sysfs::{parse_scheduler, read_raw};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The system settings a job asks for, applied before its run and restored after. Part of a
/// job, serialised flat.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Requested {
    /// I/O scheduler to select on every target's device.
    #[serde(default)]
    pub scheduler: Option<String>,
    /// Other settings, "name=value" (nomerges, io_poll_delay, read_ahead_kb, wbt_lat_usec on
    /// every target's device; governor on every CPU).
    #[serde(default)]
    pub set: Vec<String>,
    /// A study's set-up, "name=value" as `set` (its paper's scheduler none and performance
    /// governor): applied where this machine offers it, and where it does not the run goes on
    /// and its record says what was not applied and why. `set` and `scheduler` win over it.
    /// Left out of a spec when empty, so the stored specs of plans without one stay as they were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<String>,
    /// How long a run waits for a setting another live iolab holds, seconds (`--wait-settings`);
    /// None or 0: refused at once. This command's choice, not the plan's: never stored in a
    /// spec or record.
    #[serde(skip)]
    pub wait_settings_s: Option<u64>,
}

/// One setting iolab can change. Device settings live under `<sysfs>/block/<dev>/queue/`; the
/// governor under `<sysfs>/devices/system/cpu/cpu*/cpufreq/scaling_governor` (all CPUs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Setting {
    Scheduler,
    Nomerges,
    IoPollDelay,
    ReadAheadKb,
    WbtLatUsec,
    Governor,
    /// tracefs mounted at `<sysfs>/kernel/tracing` ("mounted" or "unmounted"), for
    /// `--profile stages` (which mounts it where it is not; `--set tracefs=mounted` also works).
    Tracefs,
    /// The driver a PCI device is bound to (`pci.rs`); set by the user-space NVMe driver, not
    /// by `--set`.
    PciDriver,
    /// The number of 2 MiB hugepages the kernel keeps (`nr_hugepages`); reserved on demand for
    /// the user-space NVMe driver's DMA memory, not by `--set`.
    Hugepages,
    /// `kernel.perf_event_paranoid`: lowered by `--profile` where `perf_event_open` is refused
    /// (`meters/access.rs`), not by `--set`.
    PerfEventParanoid,
    /// `kernel.kptr_restrict`: lowered by `--profile layers` where /proc/kallsyms hides the
    /// kernel's addresses from this process, not by `--set`.
    KptrRestrict,
    /// `cpu_freq_khz`: the frequency limits of every cpufreq policy, "N" (min = max = N) or
    /// "MIN-MAX" in kHz; one entry per policy, its `scaling_max_freq` standing for both files
    /// (`cpu.rs`).
    CpuFreqKhz,
    /// `cpuidle_max_state`: the deepest CPU idle state allowed; every deeper state's `disable`
    /// is set to 1 on every CPU, one entry per file (`cpu.rs`).
    CpuidleMaxState,
    /// `nvme_power_state`: the power state of the NVMe controller behind a target (Set Features
    /// 02h), one entry per controller (`nvme.rs`).
    NvmePowerState,
    /// `nvme_apst`: autonomous power state transitions of that controller, on or off (Set
    /// Features 0Ch).
    NvmeApst,
}

/// The pool of 2 MiB hugepages, under the sysfs root.
pub const HUGEPAGES_2M: &str = "kernel/mm/hugepages/hugepages-2048kB";

impl Setting {
    /// The settings users change (`--scheduler`, `--set`; tracefs is mounted by `--profile stages`).
    pub const ALL: [Setting; 11] = [
        Setting::Scheduler,
        Setting::Nomerges,
        Setting::IoPollDelay,
        Setting::ReadAheadKb,
        Setting::WbtLatUsec,
        Setting::Governor,
        Setting::Tracefs,
        Setting::CpuFreqKhz,
        Setting::CpuidleMaxState,
        Setting::NvmePowerState,
        Setting::NvmeApst,
    ];
    /// The settings iolab changes on its own, for the user-space NVMe driver.
    pub const DRIVER: [Setting; 2] = [Setting::PciDriver, Setting::Hugepages];
    /// The sysctls under `<proc_sys>/kernel/` iolab lowers on its own, for profiling.
    pub const SYSCTLS: [Setting; 2] = [Setting::PerfEventParanoid, Setting::KptrRestrict];

    /// The name users write ("read_ahead_kb").
    pub fn name(self) -> &'static str {
        match self {
            Setting::Scheduler => "scheduler",
            Setting::Nomerges => "nomerges",
            Setting::IoPollDelay => "io_poll_delay",
            Setting::ReadAheadKb => "read_ahead_kb",
            Setting::WbtLatUsec => "wbt_lat_usec",
            Setting::Governor => "governor",
            Setting::Tracefs => "tracefs",
            Setting::PciDriver => "pci_driver",
            Setting::Hugepages => "hugepages_2m",
            Setting::PerfEventParanoid => "perf_event_paranoid",
            Setting::KptrRestrict => "kptr_restrict",
            Setting::CpuFreqKhz => "cpu_freq_khz",
            Setting::CpuidleMaxState => "cpuidle_max_state",
            Setting::NvmePowerState => "nvme_power_state",
            Setting::NvmeApst => "nvme_apst",
        }
    }

    /// The sysfs file's name.
    pub fn file_name(self) -> &'static str {
        match self {
            Setting::Governor => "scaling_governor",
            Setting::Tracefs => "tracing",
            Setting::PciDriver => "driver_override",
            Setting::Hugepages => "nr_hugepages",
            Setting::CpuFreqKhz => "scaling_max_freq",
            Setting::CpuidleMaxState => "disable",
            s => s.name(),
        }
    }

    /// Whether the setting belongs to a block device.
    pub(crate) fn is_device_setting(self) -> bool {
        !matches!(
            self,
            Setting::Governor | Setting::Tracefs | Setting::PciDriver | Setting::Hugepages | Setting::CpuFreqKhz | Setting::CpuidleMaxState
        ) && !self.is_sysctl()
    }

    /// Whether the setting belongs to the NVMe controller behind a block device, which several
    /// namespaces share.
    pub(crate) fn per_controller(self) -> bool {
        matches!(self, Setting::NvmePowerState | Setting::NvmeApst)
    }

    /// Whether the setting is a sysctl, `kernel.NAME`.
    pub(crate) fn is_sysctl(self) -> bool {
        Setting::SYSCTLS.contains(&self)
    }

    /// The setting a user's name stands for; also accepts the sysfs file names and a few
    /// obvious short forms.
    pub(crate) fn from_name(s: &str) -> Option<Setting> {
        Some(match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "scheduler" | "sched" | "elevator" => Setting::Scheduler,
            "nomerges" | "no_merges" => Setting::Nomerges,
            "io_poll_delay" | "poll_delay" => Setting::IoPollDelay,
            "read_ahead_kb" | "read_ahead" | "readahead" | "readahead_kb" => Setting::ReadAheadKb,
            "wbt_lat_usec" | "wbt" => Setting::WbtLatUsec,
            "governor" | "scaling_governor" | "cpu_governor" => Setting::Governor,
            "tracefs" => Setting::Tracefs,
            "cpu_freq_khz" | "cpu_freq" | "cpufreq" => Setting::CpuFreqKhz,
            "cpuidle_max_state" | "cpuidle" | "max_cstate" => Setting::CpuidleMaxState,
            "nvme_power_state" | "nvme_ps" => Setting::NvmePowerState,
            "nvme_apst" | "apst" => Setting::NvmeApst,
            _ => return None,
        })
    }

    /// Whether `file_name` is the file of some setting (the journal only ever names these).
    fn known_file(file_name: &str) -> Option<Setting> {
        Setting::ALL.into_iter().chain(Setting::DRIVER).chain(Setting::SYSCTLS).find(|s| s.file_name() == file_name)
    }
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Setting {
    type Err = SettingsError;
    /// Err: bad input, the settings there are.
    fn from_str(s: &str) -> Result<Setting, SettingsError> {
        Setting::from_name(s).ok_or_else(|| {
            SettingsError::Invalid(format!("unknown setting \"{s}\": choose one of scheduler, nomerges, io_poll_delay, read_ahead_kb, wbt_lat_usec, governor, cpu_freq_khz, cpuidle_max_state, nvme_power_state, nvme_apst"))
        })
    }
}

/// One change: set `setting` (of `device`, a block device or for `PciDriver` a PCI address;
/// None for the governor and hugepages) to `value`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    pub setting: Setting,
    /// The whole disk, e.g. "nvme0n1" ("/dev/" is stripped); None for the governor.
    pub device: Option<String>,
    pub value: String,
}

impl Change {
    pub fn new(setting: Setting, device: Option<&str>, value: impl Into<String>) -> Change {
        Change { setting, device: device.map(str::to_string), value: value.into() }
    }

    /// Parse "name=value" ("scheduler=none", "read_ahead_kb=128", "governor=performance").
    /// `device` is used for device settings and ignored for the governor.
    pub fn parse(spec: &str, device: Option<&str>) -> Result<Change, SettingsError> {
        let Some((name, value)) = spec.split_once('=') else {
            return Err(SettingsError::Invalid(format!("setting \"{spec}\" needs the form name=value, e.g. scheduler=none")));
        };
        let setting: Setting = name.parse()?;
        // A value no machine takes is bad input, refused before anything (a sweep's plan) is stored.
        match setting {
            Setting::CpuFreqKhz => cpu::parse_ask(value).map(drop),
            Setting::CpuidleMaxState => cpu::parse_state(value).map(drop),
            Setting::NvmePowerState => nvme::parse_state(value).map(drop),
            Setting::NvmeApst => nvme::parse_apst(value).map(drop),
            _ => Ok(()),
        }?;
        let device = if setting.is_device_setting() { device } else { None };
        Ok(Change::new(setting, device, value.trim()))
    }
}

/// Put `setting`=`value` into a job's `set`, in place of an entry of the same setting: a matrix
/// dimension's value over the plan's `options.set` (`plan::matrix`).
pub(crate) fn put(set: &mut Vec<String>, setting: Setting, value: &str) {
    set.retain(|spec| spec.split_once('=').and_then(|(n, _)| Setting::from_name(n)) != Some(setting));
    set.push(format!("{}={value}", setting.name()));
}

/// The value a job's `set` gives `setting`, if any.
pub(crate) fn value_in(set: &[String], setting: Setting) -> Option<String> {
    set.iter().rev().find_map(|spec| {
        let (n, v) = spec.split_once('=')?;
        (Setting::from_name(n) == Some(setting)).then(|| v.trim().to_string())
    })
}

/// One file a change writes: the device's queue file, or one per CPU for the governor.
struct Target {
    path: PathBuf,
    /// The device or CPU name, for messages.
    label: String,
    /// What this file is set to, where it is not the change's value as given (a cpuidle state's
    /// `disable` is set to 1; a policy's frequency is "MIN-MAX").
    value: Option<String>,
}

static NEXT_GUARD: AtomicU64 = AtomicU64::new(1);

/// This process's guards not yet restored: their journal entries are a run's own changes in
/// force, not leftovers (a profiled run of the user-space driver holds the controller while its
/// tracing mounts tracefs, and was refused as "still changed").
static LIVE_GUARDS: std::sync::Mutex<Vec<u64>> = std::sync::Mutex::new(Vec::new());

fn live_guards() -> std::sync::MutexGuard<'static, Vec<u64>> {
    LIVE_GUARDS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Where settings live and where their originals are journaled.
#[derive(Clone, Debug)]
pub struct Settings {
    sysfs: PathBuf,
    /// Where sysctls live: /proc/sys, or a test's directory.
    proc_sys: PathBuf,
    journal: PathBuf,
}

impl Settings {
    pub fn new(sysfs_root: PathBuf, journal: PathBuf) -> Settings {
        Settings { sysfs: sysfs_root, proc_sys: "/proc/sys".into(), journal }
    }

    /// The same, with the sysctls under `root` instead of /proc/sys (for tests).
    pub fn with_proc_sys(self, root: PathBuf) -> Settings {
        Settings { proc_sys: root, ..self }
    }

    /// A sysctl's file (`Setting::SYSCTLS`), `<proc_sys>/kernel/NAME`.
    pub(crate) fn sysctl_path(&self, setting: Setting) -> PathBuf {
        self.proc_sys.join("kernel").join(setting.file_name())
    }

    /// The real system: `/sys` (or `$IOLAB_SYSFS`, for tests) and `default_journal_path()`.
    pub fn system() -> Settings {
        let sysfs = std::env::var_os("IOLAB_SYSFS").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| "/sys".into());
        Settings::new(sysfs, Settings::default_journal_path())
    }

    /// `$IOLAB_JOURNAL`; else /var/lib/iolab/settings-journal.json for root; else
    /// `$XDG_STATE_HOME/iolab/settings-journal.json` or `~/.local/state/iolab/settings-journal.json`.
    pub(crate) fn default_journal_path() -> PathBuf {
        const NAME: &str = "settings-journal.json";
        if let Some(p) = std::env::var_os("IOLAB_JOURNAL").filter(|v| !v.is_empty()) {
            return PathBuf::from(p);
        }
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            return Path::new("/var/lib/iolab").join(NAME);
        }
        if let Some(x) = std::env::var_os("XDG_STATE_HOME").map(PathBuf::from).filter(|p| p.is_absolute()) {
            return x.join("iolab").join(NAME);
        }
        if let Some(h) = std::env::var_os("HOME").map(PathBuf::from).filter(|p| p.is_absolute()) {
            return h.join(".local/state/iolab").join(NAME);
        }
        // SAFETY: getuid cannot fail.
        PathBuf::from(format!("/tmp/iolab-{}-{NAME}", unsafe { libc::getuid() }))
    }

    pub fn sysfs_root(&self) -> &Path {
        &self.sysfs
    }

    /// Where tracefs is mounted, or would be (`Setting::Tracefs`).
    pub fn tracefs(&self) -> PathBuf {
        self.sysfs.join("kernel/tracing")
    }

    #[cfg(test)]
    pub(crate) fn journal_path(&self) -> &Path {
        &self.journal
    }

    /// The device's sysfs directory, or a one-line error: a name that is none is bad input; no
    /// device (a target on a file system without one), or none such here, unsupported here.
    fn device_dir(&self, device: Option<&str>, setting: Setting) -> Result<(String, PathBuf), SettingsError> {
        let Some(dev) = device else {
            return Err(SettingsError::Unsupported(format!("{} needs a block device (e.g. nvme0n1)", setting.name())));
        };
        let dev = dev.trim();
        let dev = dev.strip_prefix("/dev/").unwrap_or(dev);
        if dev.is_empty() || dev.contains('/') || dev == "." || dev == ".." {
            return Err(SettingsError::Invalid(format!(
                "\"{dev}\" is not a block device name: give one as listed in /sys/block, e.g. nvme0n1"
            )));
        }
        let dir = self.sysfs.join("block").join(dev);
        if !dir.is_dir() {
            return Err(SettingsError::Unsupported(format!(
                "no block device {dev} ({} is missing): give a whole disk as listed in /sys/block (partitions have no queue settings)",
                dir.display()
            )));
        }
        Ok((dev.to_string(), dir))
    }

    /// The governor files of all CPUs (one per cpufreq policy). Err: unsupported here.
    fn governor_files(&self) -> Result<Vec<Target>, SettingsError> {
        let cpus = self.sysfs.join("devices/system/cpu");
        let mut found: Vec<(u32, Target)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        if let Ok(rd) = std::fs::read_dir(&cpus) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(n) = name.strip_prefix("cpu").and_then(|n| n.parse::<u32>().ok()) else { continue };
                let path = e.path().join("cpufreq/scaling_governor");
                if !path.exists() {
                    continue;
                }
                // CPUs of one policy share a file (cpuN/cpufreq -> ../cpufreq/policyM).
                let canon = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
                if seen.insert(canon) {
                    found.push((n, Target { path, label: name, value: None }));
                }
            }
        }
        found.sort_by_key(|(n, _)| *n);
        if found.is_empty() {
            return Err(SettingsError::Unsupported(format!(
                "no CPU frequency scaling here ({}/cpu*/cpufreq is missing; common in VMs): drop the governor setting",
                cpus.display()
            )));
        }
        Ok(found.into_iter().map(|(_, t)| t).collect())
    }

    /// The files a change writes, each checked to exist and be writable. Err: mostly what this
    /// machine does not offer (unsupported here).
    fn targets(&self, c: &Change) -> Result<Vec<Target>, SettingsError> {
        if c.setting == Setting::Tracefs {
            let path = self.tracefs();
            if !path.is_dir() {
                return Err(SettingsError::Unsupported(format!("{} is missing: this kernel has no tracefs mount point", path.display())));
            }
            return Ok(vec![Target { path, label: "tracefs".into(), value: None }]);
        }
        let targets = if c.setting == Setting::Governor {
            self.governor_files()?
        } else if c.setting == Setting::CpuFreqKhz {
            cpu::freq_targets(&self.sysfs, &c.value)?
        } else if c.setting == Setting::CpuidleMaxState {
            cpu::idle_targets(&self.sysfs, &c.value)?
        } else if matches!(c.setting, Setting::NvmePowerState | Setting::NvmeApst) {
            // Not a file: the controller's character device answers for it (`nvme::open`).
            let (dev, _) = self.device_dir(c.device.as_deref(), c.setting)?;
            return Ok(vec![nvme::target(&self.sysfs, &dev, c.setting, &c.value)?]);
        } else if c.setting == Setting::PciDriver {
            let path = pci::override_path(&self.sysfs, c.device.as_deref())?;
            vec![Target {
                label: path.parent().and_then(Path::file_name).unwrap_or_default().to_string_lossy().into_owned(),
                path,
                value: None,
            }]
        } else if c.setting.is_sysctl() {
            let path = self.sysctl_path(c.setting);
            if !path.exists() {
                return Err(SettingsError::Unsupported(format!(
                    "this kernel has no kernel.{} ({} is missing)",
                    c.setting.name(),
                    path.display()
                )));
            }
            vec![Target { path, label: "kernel".into(), value: None }]
        } else if c.setting == Setting::Hugepages {
            let path = self.sysfs.join(HUGEPAGES_2M).join("nr_hugepages");
            if !path.exists() {
                return Err(SettingsError::Unsupported(format!("this kernel has no 2 MiB hugepages ({} is missing)", path.display())));
            }
            vec![Target { path, label: "hugepages-2048kB".into(), value: None }]
        } else {
            let (dev, dir) = self.device_dir(c.device.as_deref(), c.setting)?;
            let path = dir.join("queue").join(c.setting.file_name());
            if !path.exists() {
                return Err(SettingsError::Unsupported(format!(
                    "{dev} has no queue/{} on this kernel or driver: drop the {} setting",
                    c.setting.file_name(),
                    c.setting.name()
                )));
            }
            vec![Target { path, label: dev, value: None }]
        };
        for t in &targets {
            writable(&t.path, c.setting)?;
        }
        Ok(targets)
    }

    /// Check a change is possible: the file exists and is writable, and the value is one the
    /// setting allows. The error is one line saying what is wrong and how to fix it, always of
    /// one kind, what this machine does not offer (unsupported here): a change this machine
    /// cannot make as asked, whatever the reason, skips the run (a sweep goes on), where the
    /// finer kind `check_value` gives would stop a sweep at a value one device refuses.
    pub fn check(&self, c: &Change) -> Result<(), SettingsError> {
        self.check_value(c).map_err(SettingsError::unsupported)
    }

    /// A value of the wrong form is bad input; one this machine does not offer, unsupported here.
    fn check_value(&self, c: &Change) -> Result<(), SettingsError> {
        let targets = self.targets(c)?;
        let v = c.value.trim();
        let name = c.setting.name();
        let invalid = |m: String| Err(SettingsError::Invalid(m));
        if v.is_empty() {
            return invalid(format!("{name} needs a value, e.g. {name}={}", example(c.setting)));
        }
        match c.setting {
            Setting::Scheduler => {
                let t = &targets[0];
                let (_, avail) = parse_scheduler(&sysfs::read_raw(&t.path)?);
                if !avail.iter().any(|a| a == v) {
                    return Err(SettingsError::Unsupported(format!(
                        "scheduler {v} is not available for {} (available: {}): pick one of those or load its kernel module",
                        t.label,
                        avail.join(" ")
                    )));
                }
            }
            Setting::Nomerges => {
                if !matches!(v, "0" | "1" | "2") {
                    return invalid(format!("nomerges must be 0 (merge), 1 (only simple merges) or 2 (no merges), not \"{v}\""));
                }
            }
            Setting::IoPollDelay => {
                if !v.parse::<i64>().map(|n| n >= -1).unwrap_or(false) {
                    return invalid(format!(
                        "io_poll_delay must be -1 (classic polling), 0 (hybrid polling) or a delay in microseconds, not \"{v}\""
                    ));
                }
            }
            Setting::ReadAheadKb => {
                let page_kb = page_kb();
                match v.parse::<u64>() {
                    Ok(n) if n % page_kb == 0 => {}
                    _ => {
                        return invalid(format!(
                            "read_ahead_kb must be a whole number of KiB, a multiple of {page_kb} (the page size), not \"{v}\""
                        ))
                    }
                }
            }
            Setting::WbtLatUsec => {
                if !v.parse::<i64>().map(|n| n >= -1).unwrap_or(false) {
                    return invalid(format!(
                        "wbt_lat_usec must be -1 (kernel default), 0 (writeback throttling off) or a target latency in microseconds, not \"{v}\""
                    ));
                }
            }
            Setting::Tracefs => {
                if v != "mounted" {
                    return invalid(format!("tracefs can only be mounted by a run, not \"{v}\""));
                }
            }
            Setting::PciDriver => pci::check_driver(&targets[0].path, v)?,
            Setting::Hugepages => {
                if v.parse::<u64>().is_err() {
                    return invalid(format!("hugepages_2m must be a number of pages, not \"{v}\""));
                }
            }
            // Checked with their targets: the value's form and the hardware's range.
            Setting::CpuFreqKhz | Setting::CpuidleMaxState | Setting::NvmePowerState | Setting::NvmeApst => {}
            Setting::PerfEventParanoid | Setting::KptrRestrict => {
                if v.parse::<i32>().is_err() {
                    return invalid(format!("kernel.{name} must be a number, not \"{v}\""));
                }
            }
            Setting::Governor => {
                for t in &targets {
                    let avail_path = t.path.with_file_name("scaling_available_governors");
                    let avail = sysfs::read_raw(&avail_path)
                        .map_err(|e| e.context(|m| format!("{m}: cannot tell which governors {} offers", t.label)))?;
                    if !avail.split_whitespace().any(|a| a == v) {
                        return Err(SettingsError::Unsupported(format!(
                            "governor {v} is not available on {} (available: {}): pick one of those or load its cpufreq module",
                            t.label, avail
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Record the original values durably, then apply the changes in order, verifying each by
    /// reading it back. On a failure midway, restore what was applied and return the error.
    /// The returned guard restores when dropped (or by `restore()`).
    /// Err: failed when nothing is left changed, settings not restored when something is (a
    /// rollback failed, or an earlier iolab left them).
    pub fn apply(&self, changes: &[Change]) -> Result<AppliedGuard, SettingsError> {
        self.try_apply(changes).map_err(|r| self.not_applied(r.into_message()))
    }

    /// A change not made, of its kind: whether it left settings changed.
    fn not_applied(&self, message: String) -> SettingsError {
        match self.left_changed() {
            Ok(None) => SettingsError::Failed(message),
            _ => SettingsError::NotRestored(message),
        }
    }

    /// `apply`, waiting up to `bound` while a setting is held by another live iolab (polled every
    /// 100 ms; `say` is told who holds it, once per holder). When the bound passes, the error
    /// says who held it and for how long this waited. `stop` ends the wait early (Ctrl-C).
    pub fn apply_waiting(
        &self,
        changes: &[Change],
        bound: std::time::Duration,
        stop: &dyn Fn() -> bool,
        say: &mut dyn FnMut(&str),
    ) -> Result<AppliedGuard, SettingsError> {
        let began = std::time::Instant::now();
        let mut told: Vec<String> = Vec::new();
        loop {
            match self.try_apply(changes) {
                Err(Refusal::Busy(msg)) if began.elapsed() < bound && !stop() => {
                    if !told.contains(&msg) {
                        say(&format!("waiting (at most {} s, --wait-settings) for {msg}", bound.as_secs_f64()));
                        told.push(msg);
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                Err(Refusal::Busy(msg)) if !bound.is_zero() => {
                    return Err(self.not_applied(format!(
                        "{msg}; waited {:.1} s for it (--wait-settings {}s)",
                        began.elapsed().as_secs_f64(),
                        bound.as_secs_f64()
                    )))
                }
                r => return r.map_err(|r| self.not_applied(r.into_message())),
            }
        }
    }

    /// One try at `apply`, in its steps: every change checked and its files found, the originals
    /// read and the journal's owners compared under the journal's lock, the journal stored (and
    /// the crash restore armed) before anything is written, then the writes, rolled back on the
    /// first that fails.
    fn try_apply(&self, changes: &[Change]) -> Result<AppliedGuard, Refusal> {
        let guard_id = NEXT_GUARD.fetch_add(1, Ordering::Relaxed);
        if changes.is_empty() {
            return Ok(self.guard(guard_id, Vec::new()));
        }
        // Everything checked before anything is recorded or written.
        let planned = self.planned(changes)?;
        // Held until the journal is stored: originals are read, and owners compared, under it.
        let lock = journal::lock(&self.journal)?;
        let mut entries = originals(&planned, guard_id)?;
        let mut j = journal::load(&self.journal)?.unwrap_or_default();
        let claims = self.claim(&j, &mut entries)?;
        j.entries.extend(entries.iter().cloned());
        journal::store(&self.journal, &j)?;
        crash::arm(&self.journal);
        self.write_all(&mut entries, &claims, &mut j)?;
        drop(lock);
        Ok(self.guard(guard_id, entries))
    }

    /// The guard of `entries`, counted live until it restores.
    fn guard(&self, guard_id: u64, entries: Vec<JournalEntry>) -> AppliedGuard {
        live_guards().push(guard_id);
        AppliedGuard { journal: self.journal.clone(), guard: guard_id, entries, done: false }
    }

    /// Each change checked, its value trimmed, with the files it writes.
    fn planned(&self, changes: &[Change]) -> Result<Vec<(Change, Vec<Target>)>, SettingsError> {
        let mut planned = Vec::new();
        for c in changes {
            self.check_value(c)?;
            let c = Change { value: c.value.trim().to_string(), ..c.clone() };
            let targets = self.targets(&c)?;
            planned.push((c, targets));
        }
        Ok(planned)
    }

    /// Each entry's place among the journal's owners of its file: another live owner's setting
    /// is busy (wait, or refuse naming it); a dead one's is left changed; a sysctl another live
    /// iolab lowered is shared (the entry takes the first owner's original, and writes only
    /// where what is in force is higher than asked).
    fn claim(&self, j: &Journal, entries: &mut [JournalEntry]) -> Result<Vec<Claim>, Refusal> {
        let mut claims = Vec::with_capacity(entries.len());
        for e in entries.iter_mut() {
            let mut claim = Claim { found: None, write: true };
            let held: Vec<&JournalEntry> = j.entries.iter().filter(|o| o.path == e.path).collect();
            if let Some(o) = held.first() {
                if let Some(dead) = held.iter().find(|o| matches!(o.owner(), Owner::Dead(_))) {
                    return Err(Refusal::Other(format!(
                        "a previous iolab run (pid {}) left {} changed: run `iolab restore` (journal {})",
                        dead.owner.pid,
                        dead.label(),
                        self.journal.display()
                    )));
                }
                if held.iter().any(|o| o.owner() == Owner::Us) {
                    return Err(Refusal::Other(format!("{} is already changed by this iolab: restore that change first", e.label())));
                }
                if !e.setting.is_sysctl() {
                    return Err(Refusal::Busy(format!("{} is held by {}, which puts it back when it ends", e.label(), o.owner.describe())));
                }
                // A sysctl profiling lowers is shared: lower is more permitting, so what another
                // iolab lowered it to serves this one where it is no higher than asked; the
                // original is the first owner's, and the last owner to leave puts it back.
                let low_enough = matches!((e.original.parse::<i64>(), e.new.parse::<i64>()), (Ok(now), Ok(want)) if now <= want);
                claim.found = Some(std::mem::replace(&mut e.original, o.original.clone()));
                if low_enough {
                    e.new = claim.found.clone().unwrap_or_default();
                    claim.write = false;
                }
            }
            claims.push(claim);
        }
        Ok(claims)
    }

    /// The entries' new values written in order (those `claims` says must be), each verified;
    /// a value the kernel clamped is recorded as in force, beside what was asked. On the first
    /// failure, what was written is rolled back.
    fn write_all(&self, entries: &mut [JournalEntry], claims: &[Claim], j: &mut Journal) -> Result<(), Refusal> {
        for i in (0..entries.len()).filter(|&i| claims[i].write) {
            let e = &mut entries[i];
            match value::write_in_force(e.setting, &e.path, &e.new, &e.target) {
                Ok(None) => {}
                Ok(Some(in_force)) => e.asked = Some(std::mem::replace(&mut e.new, in_force)),
                Err(err) => return Err(self.roll_back(entries, claims, i, j, err)),
            }
        }
        Ok(())
    }

    /// After the write of `entries[failed]` failed with `err`: the writes before it and the
    /// failed one (it may have half taken) put back, a shared sysctl to the value its other
    /// owner set; the entries settled (and those never written) dropped from the journal. The
    /// refusal says what failed, what was rolled back, and what stays changed.
    fn roll_back(&self, entries: &[JournalEntry], claims: &[Claim], failed: usize, j: &mut Journal, err: SettingsError) -> Refusal {
        let i = failed;
        let (guard_id, pid) = (entries[i].guard, entries[i].owner.pid);
        let back: Vec<JournalEntry> = entries[..=i]
            .iter()
            .zip(claims)
            .map(|(e, c)| JournalEntry { original: c.found.clone().unwrap_or_else(|| e.original.clone()), ..e.clone() })
            .collect();
        let outcomes = restore_entries(&back);
        let failed: Vec<&String> = outcomes.iter().filter_map(|o| o.failure()).collect();
        let settled: Vec<&JournalEntry> =
            entries[..=i].iter().zip(&outcomes).filter(|(_, o)| o.failure().is_none()).map(|(e, _)| e).collect();
        j.entries.retain(|x| {
            !(x.guard == guard_id
                && x.owner.pid == pid
                && (settled.iter().any(|s| s.path == x.path) || entries[i + 1..].iter().any(|n| n.path == x.path)))
        });
        let stored = journal::store(&self.journal, j);
        if failed.is_empty() && !j.entries.iter().any(|x| x.guard == guard_id) {
            crash::disarm();
        }
        let mut msg = err.into_message();
        if i > 0 {
            msg.push_str(&format!(" (rolled back the {i} change(s) made before it)"));
        }
        if !failed.is_empty() {
            msg.push_str(&format!(
                "; rolling back failed too: {}; run `iolab restore`",
                failed.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ")
            ));
        }
        if let Err(se) = stored {
            msg.push_str(&format!("; {se}"));
        }
        Refusal::Other(msg)
    }

    /// Whether another live iolab holds `setting` (a sysctl, `Setting::SYSCTLS`) in the journal:
    /// a value it lowered, which this process then relies on too and must share.
    pub(crate) fn held_by_others(&self, setting: Setting) -> Result<bool, SettingsError> {
        let path = self.sysctl_path(setting);
        let Some(j) = journal::load(&self.journal)? else { return Ok(false) };
        Ok(j.entries.iter().any(|e| e.path == path && matches!(e.owner(), Owner::AliveOther(_))))
    }

    /// Settings the journal still records as changed that no running iolab will put back: a
    /// killed iolab's, or this process's after a restore or rollback failed (not the changes of
    /// this process's guards still in force). One line naming them and `iolab restore`; None when
    /// nothing is left (or a live other iolab owns them).
    pub fn left_changed(&self) -> Result<Option<String>, SettingsError> {
        let Some(j) = journal::load(&self.journal)? else { return Ok(None) };
        let live = live_guards().clone();
        let left: Vec<&JournalEntry> = j
            .entries
            .iter()
            .filter(|e| match e.owner() {
                Owner::Us => !live.contains(&e.guard),
                Owner::Dead(_) => true,
                Owner::AliveOther(_) => false,
            })
            .collect();
        if left.is_empty() {
            return Ok(None);
        }
        let what: Vec<String> = left.iter().map(|e| format!("{}: {} -> {}", e.label(), e.original, e.new)).collect();
        Ok(Some(format!(
            "system settings are still changed ({}; journal {}): run `iolab restore`",
            what.join("; "),
            self.journal.display()
        )))
    }

    /// Undo what the journal records for processes no longer running (what a killed iolab left
    /// changed) and this process's own; the settings of other live iolabs are theirs and left
    /// alone (said in a line each). Returns what was done, as lines for the user; empty when
    /// there was nothing to restore. Idempotent; removes the journal when it is empty. Err: a
    /// journal that cannot be read or written (failed), or settings that stay changed (not
    /// restored).
    pub fn restore_journal(&self) -> Result<Vec<String>, SettingsError> {
        let _lock = journal::lock(&self.journal)?;
        let Some(mut j) = journal::load(&self.journal)? else { return Ok(Vec::new()) };
        if j.entries.is_empty() {
            journal::store(&self.journal, &j)?;
            return Ok(Vec::new());
        }
        let held = |e: &JournalEntry| matches!(e.owner(), Owner::AliveOther(_));
        let mut theirs: Vec<String> = Vec::new();
        for e in j.entries.iter().filter(|e| held(e)) {
            let line = format!("{}: left to {}, still running (it puts it back when it ends)", e.label(), e.owner.describe());
            if !theirs.contains(&line) {
                theirs.push(line);
            }
        }
        settle(&self.journal, &mut j, |e| !held(e))
            .map(|mut lines| {
                lines.extend(theirs);
                lines
            })
            .map_err(|failed| {
                SettingsError::NotRestored(format!(
                    "could not restore {} setting(s): {} (they stay in {}; fix and rerun `iolab restore`)",
                    failed.len(),
                    failed.join("; "),
                    self.journal.display()
                ))
            })
    }

    /// The change that makes `pages` free 2 MiB hugepages available (the pool grown by what is
    /// missing), or None when that many are free already. Err: unsupported here.
    pub(crate) fn hugepages_for(&self, pages: u64) -> Result<Option<Change>, SettingsError> {
        let dir = self.sysfs.join(HUGEPAGES_2M);
        let read = |f: &str| -> Result<u64, SettingsError> {
            let raw = sysfs::read_raw(&dir.join(f))
                .map_err(|e| SettingsError::Unsupported(format!("{e}: this kernel has no 2 MiB hugepages")))?;
            raw.parse().map_err(|_| SettingsError::Unsupported(format!("{} reads \"{raw}\", not a number", dir.join(f).display())))
        };
        let (total, free) = (read("nr_hugepages")?, read("free_hugepages")?);
        Ok((free < pages).then(|| Change::new(Setting::Hugepages, None, (total + pages - free).to_string())))
    }

    /// Current values of all settings for a device, for the environment record. Missing ones
    /// are null. `governor` is the CPUs' common governor (null when they differ or there is no
    /// cpufreq); `governors` maps each CPU to its governor.
    pub fn snapshot(&self, device: &str) -> Value {
        let dev = device.trim();
        let dev = dev.strip_prefix("/dev/").unwrap_or(dev);
        let q = self.sysfs.join("block").join(dev).join("queue");
        let ok_name = !dev.is_empty() && !dev.contains('/') && dev != "." && dev != "..";
        let raw = |f: &str| if ok_name { sysfs::read_raw(&q.join(f)).ok().filter(|s| !s.is_empty()) } else { None };
        let num = |f: &str| -> Value {
            match raw(f) {
                Some(s) => s.parse::<i64>().map(Value::from).unwrap_or(Value::String(s)),
                None => Value::Null,
            }
        };
        let (sched, avail) = match raw("scheduler") {
            Some(s) => parse_scheduler(&s),
            None => (None, Vec::new()),
        };
        let mut governors = serde_json::Map::new();
        if let Ok(files) = self.governor_files() {
            for t in files {
                if let Ok(g) = sysfs::read_raw(&t.path) {
                    governors.insert(t.label, Value::String(g));
                }
            }
        }
        let mut distinct: Vec<&Value> = governors.values().collect();
        distinct.dedup();
        let governor = if distinct.len() == 1 { distinct[0].clone() } else { Value::Null };
        let (cpufreq, cpuidle) = cpu::snapshot(&self.sysfs);
        json!({
            "device": dev,
            "scheduler": sched,
            "schedulers_available": avail,
            "nomerges": num("nomerges"),
            "io_poll": num("io_poll"),
            "io_poll_delay": num("io_poll_delay"),
            "read_ahead_kb": num("read_ahead_kb"),
            "wbt_lat_usec": num("wbt_lat_usec"),
            "nr_requests": num("nr_requests"),
            "governor": governor,
            "governors": if governors.is_empty() { Value::Null } else { Value::Object(governors) },
            "cpufreq": cpufreq,
            "cpuidle": cpuidle,
            "nvme_power": if ok_name { nvme::snapshot(&self.sysfs, dev) } else { Value::Null },
        })
    }
}

/// The journal entries of `planned`, each file's original read (under the journal's lock): one
/// per file, a controller two namespaces share asked once; a file changed twice is refused.
fn originals(planned: &[(Change, Vec<Target>)], guard_id: u64) -> Result<Vec<JournalEntry>, Refusal> {
    let us = Holder::us();
    let mut entries: Vec<JournalEntry> = Vec::new();
    for (c, targets) in planned {
        for t in targets {
            let new = t.value.clone().unwrap_or_else(|| c.value.clone());
            // Two namespaces of one controller ask the same of it: once.
            if entries.iter().any(|e| e.path == t.path && e.setting == c.setting && e.new == new && e.setting.per_controller()) {
                continue;
            }
            if let Some(prev) = entries.iter().find(|e| e.path == t.path) {
                return Err(Refusal::Other(format!("{} is changed twice in one run: give each setting once", prev.label())));
            }
            let original = value::read_current(c.setting, &t.path)?;
            entries.push(JournalEntry {
                owner: us.clone(),
                guard: guard_id,
                setting: c.setting,
                device: c.device.as_ref().map(|_| t.label.clone()),
                target: t.label.clone(),
                path: t.path.clone(),
                original,
                new,
                asked: None,
            });
        }
    }
    Ok(entries)
}

/// Where an entry's file stands in the journal (`Settings::claim`): the value it found where it
/// shares a sysctl another iolab lowered (a rollback puts that back, not the original), and
/// whether it must be written at all.
struct Claim {
    found: Option<String>,
    write: bool,
}

/// Whether tracefs is mounted at `path`: its `events` directory is there.
pub fn tracefs_mounted(path: &Path) -> bool {
    path.join("events").is_dir()
}

fn example(s: Setting) -> &'static str {
    match s {
        Setting::Scheduler => "none",
        Setting::Nomerges => "2",
        Setting::IoPollDelay => "-1",
        Setting::ReadAheadKb => "128",
        Setting::WbtLatUsec => "-1",
        Setting::Governor => "performance",
        Setting::Tracefs => "mounted",
        Setting::PciDriver => "vfio-pci",
        Setting::Hugepages => "16",
        Setting::PerfEventParanoid => "0",
        Setting::KptrRestrict => "1",
        Setting::CpuFreqKhz => "2000000",
        Setting::CpuidleMaxState => "1",
        Setting::NvmePowerState => "0",
        Setting::NvmeApst => "off",
    }
}

fn page_kb() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p >= 1024 {
        p as u64 / 1024
    } else {
        4
    }
}

/// A one-line error unless `path` is a file this process may write: unsupported here.
fn writable(path: &Path, setting: Setting) -> Result<(), SettingsError> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let no = |m: String| Err(SettingsError::Unsupported(m));
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) => return no(format!("cannot inspect {}: {e}", path.display())),
    };
    if meta.is_dir() {
        return no(format!("{} is not a settings file", path.display()));
    }
    if meta.permissions().mode() & 0o222 == 0 {
        return no(format!("{} is read-only: this kernel or driver does not let {} change", path.display(), setting.name()));
    }
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return no(format!("bad path {}", path.display())) };
    // SAFETY: c is NUL-terminated.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        let e = std::io::Error::last_os_error();
        return no(format!("cannot write {} ({e}): run iolab as root (sudo) to change {}", path.display(), setting.name()));
    }
    Ok(())
}

/// What restoring one entry came to.
enum Outcome {
    /// Restored, or nothing left to restore (the device is gone); the line says which.
    Done(String),
    /// Still changed: why.
    Failed(String),
}

impl Outcome {
    fn failure(&self) -> Option<&String> {
        match self {
            Outcome::Failed(m) => Some(m),
            Outcome::Done(_) => None,
        }
    }
}

/// Why `try_apply` refused: a setting another live iolab holds (worth waiting for), or else.
enum Refusal {
    Busy(String),
    Other(String),
}

impl Refusal {
    fn into_message(self) -> String {
        match self {
            Refusal::Busy(m) => format!("{m} (wait for it with --wait-settings, or run again when it has ended)"),
            Refusal::Other(m) => m,
        }
    }
}

/// A refusal of the layer's own, said as its line: `apply` gives it its kind (failed, or
/// settings not restored) by what is left changed.
impl From<SettingsError> for Refusal {
    fn from(e: SettingsError) -> Refusal {
        Refusal::Other(e.into_message())
    }
}

/// Whether another live owner's entry of `others` (not `e` itself) is on `e`'s file: a shared
/// sysctl it still needs. Its holder, for the line that says so.
fn shared_with<'a>(e: &JournalEntry, others: &'a [JournalEntry]) -> Option<&'a JournalEntry> {
    others.iter().find(|o| o.path == e.path && !o.same(e) && !matches!(o.owner(), Owner::Dead(_)))
}

/// Restore the entries of `j` (loaded from `path` under its lock) that `pick` chooses, and store
/// what is left: the lines done, or the failures (whose entries stay journaled). An entry whose
/// file another live owner shares (a sysctl) is dropped unwritten: the last owner puts the
/// original back. Entries not picked are left journaled, untouched.
fn settle(path: &Path, j: &mut Journal, pick: impl Fn(&JournalEntry) -> bool) -> Result<Vec<String>, Vec<String>> {
    let (now, mut keep): (Vec<JournalEntry>, Vec<JournalEntry>) = j.entries.drain(..).partition(|e| pick(e));
    let (mut lines, mut failed) = (Vec::new(), Vec::new());
    let mut write = Vec::new();
    for e in now {
        match shared_with(&e, &keep) {
            Some(o) => lines.push(format!("{}: left at {} for {}, which shares it", e.label(), e.new, o.owner.describe())),
            None => write.push(e),
        }
    }
    let outcomes = restore_entries(&write);
    for (e, o) in write.iter().zip(outcomes) {
        match o {
            Outcome::Done(line) => lines.push(line),
            Outcome::Failed(msg) => {
                failed.push(msg);
                keep.push(e.clone());
            }
        }
    }
    j.entries = keep;
    if let Err(e) = journal::store(path, j) {
        failed.push(e.into_message());
    }
    if failed.is_empty() {
        Ok(lines)
    } else {
        Err(failed)
    }
}

/// Put back what this process journaled, after a panic (`crash`): only this process's
/// entries, and without waiting for the journal lock (the panic may have come while held).
/// A PCI device bound to vfio-pci is left (the bool says so): this process still has it open,
/// and vfio-pci's unbind waits for it to be closed, which would hang the panic here; the
/// restore the abort starts (`iolab restore --after`) binds it back once the process is gone.
fn restore_own_after_crash(path: &Path) -> Result<(Vec<String>, bool), SettingsError> {
    let _lock = journal::try_lock(path)?.ok_or_else(|| SettingsError::Failed("the settings journal is locked".into()))?;
    let Some(mut j) = journal::load(path)? else { return Ok((Vec::new(), false)) };
    let ours = |e: &JournalEntry| e.owner() == Owner::Us;
    if !j.entries.iter().any(ours) {
        return Ok((Vec::new(), false));
    }
    let held = |e: &JournalEntry| e.setting == Setting::PciDriver;
    let left = j.entries.iter().any(|e| ours(e) && held(e));
    settle(path, &mut j, |e| ours(e) && !held(e)).map(|lines| (lines, left)).map_err(|failed| SettingsError::NotRestored(failed.join("; ")))
}

fn restore_entries(entries: &[JournalEntry]) -> Vec<Outcome> {
    let mut out: Vec<Option<Outcome>> = entries.iter().map(|_| None).collect();
    for (i, e) in entries.iter().enumerate().rev() {
        let file = e.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        if Setting::known_file(&file) != Some(e.setting) {
            out[i] = Some(Outcome::Failed(format!(
                "{}: the journal names {} which is not a {} file; not touching it",
                e.label(),
                e.path.display(),
                e.setting.name()
            )));
            continue;
        }
        // The device (block/<dev>, bus/pci/devices/<bdf>) or CPU (cpu/cpuN) went away: nothing
        // left to restore.
        let owner_dir = e.path.parent().and_then(Path::parent);
        let gone = match e.setting {
            Setting::PciDriver => pci::gone(&e.path),
            Setting::NvmePowerState | Setting::NvmeApst => nvme::gone(&e.path),
            _ => !e.path.exists() && owner_dir.map(|d| !d.exists()).unwrap_or(true),
        };
        if gone {
            out[i] = Some(Outcome::Done(format!("{}: {} is gone, nothing to restore (was {})", e.label(), e.target, e.original)));
            continue;
        }
        out[i] = Some(match value::write_verified(e.setting, &e.path, &e.original, &e.target) {
            Ok(()) => Outcome::Done(format!("{}: {} -> {} (restored)", e.label(), e.new, e.original)),
            Err(err) => Outcome::Failed(format!("{}: {err}", e.label())),
        });
    }
    // Second pass: a later restore may have changed an earlier-restored file.
    for (i, e) in entries.iter().enumerate().rev() {
        if !matches!(out[i], Some(Outcome::Done(_))) || !e.path.exists() {
            continue;
        }
        match value::read_current(e.setting, &e.path) {
            Ok(got) if value::value_matches(e.setting, &e.original, &got) => {}
            _ => {
                if let Err(err) = value::write_verified(e.setting, &e.path, &e.original, &e.target) {
                    out[i] = Some(Outcome::Failed(format!("{}: {err}", e.label())));
                }
            }
        }
    }
    out.into_iter().map(|o| o.unwrap_or_else(|| Outcome::Failed("not restored".into()))).collect()
}

/// The changes of one `Settings::apply`. Dropping it restores the originals (errors go to
/// stderr); `restore()` does the same and reports. Drop does not run when the process is killed
/// or panics (release builds abort on panic): `Settings::restore_journal` is the backstop.
#[must_use = "dropping the guard restores the settings at once"]
pub struct AppliedGuard {
    journal: PathBuf,
    guard: u64,
    entries: Vec<JournalEntry>,
    done: bool,
}

impl AppliedGuard {
    /// What was changed, as lines for the user ("loop0 scheduler: none -> kyber").
    pub fn changes(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| match &e.asked {
                Some(asked) => format!("{}: {} -> {} (asked {asked}; the kernel clamped it)", e.label(), e.original, e.new),
                None => format!("{}: {} -> {}", e.label(), e.original, e.new),
            })
            .collect()
    }

    /// The journal entries this guard owns.
    pub fn entries(&self) -> &[JournalEntry] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Restore the originals now; returns what was restored, as lines for the user. Err:
    /// settings not restored where one stays changed (it stays journaled for `iolab restore`);
    /// where all were put back but the journal could not be rewritten, the journal's error, its
    /// kind kept.
    pub fn restore(mut self) -> Result<Vec<String>, SettingsError> {
        self.done = true;
        self.restore_inner()
    }

    fn restore_inner(&mut self) -> Result<Vec<String>, SettingsError> {
        // From here on what is left in the journal is a leftover, restored or not.
        live_guards().retain(|g| *g != self.guard);
        if self.entries.is_empty() {
            return Ok(Vec::new());
        }
        let _lock = journal::lock(&self.journal);
        let loaded = journal::load(&self.journal);
        // A sysctl another live iolab shares stays as it is: the last owner puts it back.
        let mut lines = Vec::new();
        let mut failed = Vec::new();
        let mut settled = Vec::new();
        let mut write = Vec::new();
        for e in &self.entries {
            match loaded.as_ref().ok().and_then(Option::as_ref).and_then(|j| shared_with(e, &j.entries)) {
                Some(o) => {
                    lines.push(format!("{}: left at {} for {}, which shares it", e.label(), e.new, o.owner.describe()));
                    settled.push(e.path.clone());
                }
                None => write.push(e.clone()),
            }
        }
        let outcomes = restore_entries(&write);
        for (e, o) in write.iter().zip(outcomes) {
            match o {
                Outcome::Done(l) => {
                    lines.push(l);
                    settled.push(e.path.clone());
                }
                Outcome::Failed(m) => failed.push(m),
            }
        }
        // Drop our settled entries from the journal.
        let mut store_err = None;
        match loaded {
            Ok(Some(mut j)) => {
                let before = j.entries.len();
                // A dead sharer's entry on a file put back goes too: its original was the same.
                j.entries.retain(|x| {
                    let ours = x.owner() == Owner::Us && x.guard == self.guard;
                    !(settled.contains(&x.path) && (ours || (x.setting.is_sysctl() && matches!(x.owner(), Owner::Dead(_)))))
                });
                if j.entries.len() != before || j.entries.is_empty() {
                    store_err = journal::store(&self.journal, &j).err();
                }
            }
            Ok(None) => {}
            Err(e) => store_err = Some(e),
        }
        self.entries.retain(|e| !settled.contains(&e.path));
        if self.entries.is_empty() {
            crash::disarm();
        }
        if !failed.is_empty() {
            return Err(SettingsError::NotRestored(format!(
                "could not restore {} setting(s): {} (they stay in {}; run `iolab restore`)",
                failed.len(),
                failed.join("; "),
                self.journal.display()
            )));
        }
        if let Some(e) = store_err {
            return Err(e.context(|m| format!("settings restored, but {m}")));
        }
        Ok(lines)
    }
}

impl Drop for AppliedGuard {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            if let Err(e) = self.restore_inner() {
                eprintln!("iolab: {e}");
            }
        }
    }
}

impl std::fmt::Debug for AppliedGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppliedGuard").field("journal", &self.journal).field("guard", &self.guard).field("entries", &self.entries).finish()
    }
}
