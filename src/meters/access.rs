//! What profiling needs the kernel to allow a process without CAP_PERFMON or CAP_SYSLOG, and the
//! two sysctls that decide it: `kernel.perf_event_paranoid` (which perf events it may open) and
//! `kernel.kptr_restrict` (whether /proc/kallsyms shows it addresses). Where the kernel refuses
//! and lowering the sysctl would help, it is lowered as far as needed and no further, through the
//! settings journal, for the rest of the run: put back with the run's other settings (or by the
//! guard's drop on an error, or by `iolab restore` after a kill).
use super::MetersError;
use crate::settings::{read_raw, AppliedGuard, Change, Setting, Settings, SettingsError};

/// The `perf_event_paranoid` an event needs without CAP_PERFMON (kernel/events/core.c):
/// sampling every CPU (`perf_allow_cpu`) with kernel call chains (`perf_allow_kernel`).
pub const PARANOID_CPU_WIDE: i32 = 0;
/// The same for tracepoints with their raw data (`perf_allow_tracepoint`).
pub const PARANOID_RAW_TRACEPOINTS: i32 = -1;

/// `CAP_SYSLOG` (linux/capability.h): /proc/kallsyms shows addresses at kptr_restrict 1.
const CAP_SYSLOG: u32 = 34;

/// The sysctls lowered for one run.
pub struct Sysctls {
    settings: Settings,
    /// One per lowered sysctl, in the order lowered.
    guards: Vec<AppliedGuard>,
    /// Lowerings that did not help and could not be put back at once: the run's restore reports them.
    not_restored: Vec<String>,
}

/// A sysctl as `lower` found it.
enum Lowered {
    /// It was above what is needed, and is lowered from this value.
    From(i32),
    /// It is this already, no higher than needed.
    Already(i32),
}

impl Sysctls {
    pub fn new(settings: Settings) -> Sysctls {
        Sysctls { settings, guards: Vec::new(), not_restored: Vec::new() }
    }

    /// What was lowered, as the record's `settings_changed` lines ("kernel.kptr_restrict: 2 -> 1").
    pub fn changes(&self) -> Vec<String> {
        self.guards.iter().flat_map(AppliedGuard::changes).collect()
    }

    /// Put back what was lowered, last first. Err: what stays changed, in one line (settings
    /// left changed: `iolab restore` puts them back).
    pub fn restore(&mut self) -> Result<Vec<String>, SettingsError> {
        let mut lines = Vec::new();
        while let Some(g) = self.guards.pop() {
            match g.restore() {
                Ok(l) => lines.extend(l),
                Err(e) => self.not_restored.push(e.to_string()),
            }
        }
        match self.not_restored.is_empty() {
            true => Ok(lines),
            false => Err(SettingsError::NotRestored(std::mem::take(&mut self.not_restored).join("; "))),
        }
    }

    fn current(&self, setting: Setting) -> Result<i32, SettingsError> {
        let path = self.settings.sysctl_path(setting);
        let raw = read_raw(&path)?;
        raw.parse().map_err(|_| SettingsError::Failed(format!("{} reads \"{raw}\", not a number", path.display())))
    }

    /// Lower `setting` to `want` for the run where it is higher. Err: why it could not be.
    fn lower(&mut self, setting: Setting, want: i32) -> Result<Lowered, SettingsError> {
        let mut now = self.current(setting)?;
        if now <= want {
            return Ok(Lowered::Already(now));
        }
        // Lowered already, not far enough (sampling needs 0, tracing then -1): put back and
        // lowered once more, so the journal and the record hold the original.
        if let Some(i) = self.guards.iter().position(|g| g.entries().iter().any(|e| e.setting == setting)) {
            self.guards.remove(i).restore().inspect_err(|e| self.not_restored.push(e.to_string()))?;
            now = self.current(setting)?;
        }
        self.guards.push(self.settings.apply(&[Change::new(setting, None, want.to_string())])?);
        Ok(Lowered::From(now))
    }

    /// Where another live iolab lowered `setting` and this process relies on what it found
    /// (its event opened, its kallsyms read), share it: the other's end then leaves it lowered
    /// until this run ends too (the last owner puts the original back). Best effort: an error
    /// leaves the run as it was before sharing existed.
    fn share_if_held(&mut self, setting: Setting, need: i32) {
        let ours = self.guards.iter().any(|g| g.entries().iter().any(|e| e.setting == setting));
        if ours || !self.settings.held_by_others(setting).unwrap_or(false) {
            return;
        }
        if let Ok(g) = self.settings.apply(&[Change::new(setting, None, need.to_string())]) {
            self.guards.push(g);
        }
    }

    /// Put back the last lowering at once: it did not help.
    fn undo_last(&mut self) {
        if let Some(Err(e)) = self.guards.pop().map(AppliedGuard::restore) {
            self.not_restored.push(e.to_string());
        }
    }

    /// Open a perf event with `open`; where the kernel refuses it (EACCES, EPERM) and
    /// `perf_event_paranoid` is above `need`, lower it and try once more. Err: the kernel's
    /// answer, what the event needs and what was tried, in one line.
    pub(crate) fn open_perf<T>(&mut self, need: i32, mut open: impl FnMut() -> std::io::Result<T>) -> Result<T, MetersError> {
        let refused = match open() {
            Ok(t) => {
                self.share_if_held(Setting::PerfEventParanoid, need);
                return Ok(t);
            }
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) => e,
            Err(e) => return Err(MetersError::Refused(e.to_string())),
        };
        let needs = format!("needs CAP_PERFMON or kernel.perf_event_paranoid <= {need}");
        match self.lower(Setting::PerfEventParanoid, need) {
            Ok(Lowered::From(was)) => open().map_err(|e| {
                self.undo_last();
                MetersError::Refused(format!("{e} (refused even with kernel.perf_event_paranoid lowered from {was} to {need}; put back)"))
            }),
            Ok(Lowered::Already(now)) => Err(MetersError::Refused(format!(
                "{refused} (kernel.perf_event_paranoid is {now}, low enough: something else refused it, e.g. a security module)"
            ))),
            Err(why) => Err(MetersError::Refused(format!("{refused} ({needs}, and it could not be lowered: {why})"))),
        }
    }

    /// /proc/kallsyms, read while it shows this process addresses, as `parse` makes it (None: it
    /// shows none). Where kptr_restrict hides them it is lowered first: to 1 for a process with
    /// CAP_SYSLOG (root), else to 0, where the kernel also wants perf_event_paranoid <= 1
    /// (`kallsyms_show_value`, kernel/kallsyms.c). The addresses are shown to the reader as it
    /// opens the file, so this is read while the sysctl is lowered.
    pub fn kallsyms<T>(&mut self, parse: impl Fn(&str) -> Option<T>) -> Result<T, MetersError> {
        const PATH: &str = "/proc/kallsyms";
        let read = || std::fs::read_to_string(PATH).map_err(|e| MetersError::Unavailable(format!("cannot read {PATH}: {e}")));
        let want = if has_capability(CAP_SYSLOG) { 1 } else { 0 };
        if let Some(t) = parse(&read()?) {
            self.share_if_held(Setting::KptrRestrict, want);
            return Ok(t);
        }
        let hidden = |why: String| MetersError::Unavailable(format!("{PATH} shows no addresses ({why}): kernel frames cannot be named"));
        match self.lower(Setting::KptrRestrict, want) {
            Ok(Lowered::From(was)) => match parse(&read()?) {
                Some(t) => Ok(t),
                None => {
                    self.undo_last();
                    Err(hidden(format!("even with kernel.kptr_restrict lowered from {was} to {want}; put back")))
                }
            },
            Ok(Lowered::Already(now)) => {
                let paranoid = if want == 0 { ", and without CAP_SYSLOG kernel.perf_event_paranoid must be <= 1 too" } else { "" };
                Err(hidden(format!("kernel.kptr_restrict is {now}{paranoid}")))
            }
            Err(why) => Err(hidden(format!("needs kernel.kptr_restrict <= {want}, and it could not be lowered: {why}"))),
        }
    }
}

/// Whether this process has `cap` in its effective set (/proc/self/status `CapEff`).
fn has_capability(cap: u32) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|h| u64::from_str_radix(h.trim(), 16).ok());
    eff.is_some_and(|bits| bits & (1 << cap) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sysctls over a fake /proc/sys holding `paranoid` and `kptr`.
    fn fake(paranoid: &str, kptr: &str) -> (tempfile::TempDir, Sysctls) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("kernel")).unwrap();
        std::fs::write(d.path().join("kernel/perf_event_paranoid"), paranoid).unwrap();
        std::fs::write(d.path().join("kernel/kptr_restrict"), kptr).unwrap();
        let settings = Settings::new(d.path().join("sys"), d.path().join("journal.json")).with_proc_sys(d.path().into());
        (d, Sysctls::new(settings))
    }

    fn read(d: &tempfile::TempDir, name: &str) -> String {
        std::fs::read_to_string(d.path().join("kernel").join(name)).unwrap().trim().to_string()
    }

    #[test]
    fn an_event_that_opens_thanks_to_another_iolab_shares_its_lowered_sysctl() {
        let (d, mut s) = fake("-1", "2");
        // Another live iolab (a stand-in process) lowered it from 2 and holds it.
        let mut other = std::process::Command::new("sleep").arg("600").spawn().unwrap();
        let path = d.path().join("kernel/perf_event_paranoid");
        let j = serde_json::json!({ "version": 2, "entries": [{
            "owner": { "pid": other.id(), "pid_start_ticks": null, "started_at": 0, "command": "iolab run --profile stages" },
            "guard": 1, "setting": "perf_event_paranoid", "device": null, "target": "kernel", "path": path,
            "original": "2", "new": "-1" }] });
        std::fs::write(d.path().join("journal.json"), j.to_string()).unwrap();
        assert_eq!(s.open_perf(PARANOID_CPU_WIDE, || Ok(())), Ok(()));
        assert_eq!(s.changes(), ["kernel.perf_event_paranoid: 2 -> -1"], "joined as an owner, nothing written");
        // The other ends first (killed): this run still needs the value.
        other.kill().unwrap();
        other.wait().unwrap();
        // This run ends: the last owner puts the original back.
        assert_eq!(s.restore().unwrap(), ["kernel.perf_event_paranoid: -1 -> 2 (restored)"]);
        assert_eq!(read(&d, "perf_event_paranoid"), "2");
        assert!(!d.path().join("journal.json").exists(), "the dead owner's entry went with it");
        // Without another holder, an event that opens lowers and joins nothing.
        let (d, mut s) = fake("-1", "2");
        assert_eq!(s.open_perf(PARANOID_CPU_WIDE, || Ok(())), Ok(()));
        assert!(s.changes().is_empty());
        assert_eq!(read(&d, "perf_event_paranoid"), "-1");
    }

    fn refused<T>() -> std::io::Result<T> {
        Err(std::io::Error::from_raw_os_error(libc::EACCES))
    }

    #[test]
    fn a_refused_event_lowers_paranoid_to_its_need_retries_and_restores() {
        let (d, mut s) = fake("2\n", "0\n");
        let mut tries = 0;
        let opened = s.open_perf(PARANOID_RAW_TRACEPOINTS, || {
            tries += 1;
            if tries == 1 {
                refused()
            } else {
                Ok(read(&d, "perf_event_paranoid"))
            }
        });
        assert_eq!(opened.unwrap(), "-1", "retried while lowered");
        assert_eq!(s.changes(), ["kernel.perf_event_paranoid: 2 -> -1"]);
        assert!(d.path().join("journal.json").exists(), "journaled while lowered");
        assert_eq!(s.restore().unwrap(), ["kernel.perf_event_paranoid: -1 -> 2 (restored)"]);
        assert_eq!(read(&d, "perf_event_paranoid"), "2");
        assert!(!d.path().join("journal.json").exists());
    }

    /// An open the kernel refuses the first time only.
    fn refused_once() -> impl FnMut() -> std::io::Result<()> {
        let mut first = true;
        move || if std::mem::take(&mut first) { refused() } else { Ok(()) }
    }

    #[test]
    fn a_second_event_needing_less_lowers_from_the_original() {
        let (d, mut s) = fake("3\n", "0\n");
        s.open_perf(PARANOID_CPU_WIDE, refused_once()).unwrap();
        s.open_perf(PARANOID_RAW_TRACEPOINTS, refused_once()).unwrap();
        assert_eq!(s.changes(), ["kernel.perf_event_paranoid: 3 -> -1"]);
        s.restore().unwrap();
        assert_eq!(read(&d, "perf_event_paranoid"), "3");
    }

    #[test]
    fn paranoid_low_enough_or_another_error_changes_nothing() {
        let (d, mut s) = fake("0\n", "0\n");
        let e = s.open_perf(PARANOID_CPU_WIDE, refused::<()>).unwrap_err().to_string();
        assert!(e.contains("is 0, low enough"), "{e}");
        let e = s.open_perf(PARANOID_CPU_WIDE, || Err::<(), _>(std::io::Error::from_raw_os_error(libc::ENOENT))).unwrap_err().to_string();
        assert!(!e.contains("paranoid"), "not a permission problem: {e}");
        assert!(s.changes().is_empty());
        assert_eq!(read(&d, "perf_event_paranoid"), "0");
    }

    #[test]
    fn a_lowering_that_does_not_help_is_put_back_at_once() {
        let (d, mut s) = fake("3\n", "0\n");
        let e = s.open_perf(PARANOID_CPU_WIDE, refused::<()>).unwrap_err().to_string();
        assert!(e.contains("refused even with kernel.perf_event_paranoid lowered from 3 to 0; put back"), "{e}");
        assert!(s.changes().is_empty());
        assert_eq!(read(&d, "perf_event_paranoid"), "3");
        assert!(s.restore().unwrap().is_empty());
    }

    #[test]
    fn a_sysctl_that_cannot_be_put_back_is_an_error_naming_it() {
        let (d, mut s) = fake("2\n", "0\n");
        s.open_perf(PARANOID_CPU_WIDE, refused_once()).unwrap();
        // No longer a file the value can be written to.
        let path = d.path().join("kernel/perf_event_paranoid");
        std::fs::remove_file(&path).unwrap();
        std::fs::create_dir(&path).unwrap();
        let e = s.restore().unwrap_err().to_string();
        assert!(e.contains("kernel.perf_event_paranoid") && e.contains("iolab restore"), "{e}");
        assert!(d.path().join("journal.json").exists(), "it stays journaled");
    }

    #[test]
    fn hidden_kallsyms_lowers_kptr_restrict_and_is_read_while_lowered() {
        // The fake "kallsyms" parse looks at the fake sysctl: addresses only below 2.
        let (d, mut s) = fake("2\n", "2\n");
        let shown = || (read(&d, "kptr_restrict").parse::<i32>().unwrap() < 2).then_some("addresses");
        assert_eq!(s.kallsyms(|_| shown()).unwrap(), "addresses");
        let want = if has_capability(CAP_SYSLOG) { "1" } else { "0" };
        assert_eq!(s.changes(), [format!("kernel.kptr_restrict: 2 -> {want}")]);
        s.restore().unwrap();
        assert_eq!(read(&d, "kptr_restrict"), "2");
        // Nothing to lower: one line saying why.
        let (_d, mut s) = fake("2\n", "0\n");
        let e = s.kallsyms(|_| None::<()>).unwrap_err().to_string();
        assert!(e.starts_with("/proc/kallsyms shows no addresses (kernel.kptr_restrict is 0"), "{e}");
        assert!(s.changes().is_empty());
    }
}
