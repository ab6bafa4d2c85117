//! Which driver a PCI device is bound to: the one setting that is not a value in a file.
//! iolab's user-space NVMe driver takes a controller from the kernel's `nvme` driver for
//! `vfio-pci` and gives it back (docs/nvme-driver.md). Its journal entry's path is the device's
//! `driver_override`, its values driver names ("" for none), so `iolab restore` after a kill -9
//! binds the controller back like any other setting.
//!
//! A bind is: unbind from the current driver, `driver_override` = the driver (no other may take
//! the device), `drivers_probe`, then `driver_override` cleared again. The override only matters
//! at probe time; cleared at once, the binding itself is all there is to restore.
use super::SettingsError;
use crate::device::controller::is_pci_address;
use std::path::{Path, PathBuf};

/// The `driver_override` file of device `bdf`, or why it cannot be rebound.
/// A name that is no PCI address is bad input; a device or kernel without it, unsupported here.
pub(super) fn override_path(sysfs: &Path, bdf: Option<&str>) -> Result<PathBuf, SettingsError> {
    let bdf = bdf.map(str::trim).unwrap_or("");
    if !is_pci_address(bdf) {
        return Err(SettingsError::Invalid(format!(
            "\"{bdf}\" is not a PCI address: give one as listed in /sys/bus/pci/devices, e.g. 0000:00:04.0"
        )));
    }
    let dev = sysfs.join("bus/pci/devices").join(bdf);
    if !dev.is_dir() {
        return Err(SettingsError::Unsupported(format!("no PCI device {bdf} ({} is missing)", dev.display())));
    }
    let path = dev.join("driver_override");
    if !path.exists() {
        return Err(SettingsError::Unsupported(format!(
            "{bdf} has no driver_override (Linux 3.16 or later has it): it cannot be rebound safely"
        )));
    }
    Ok(path)
}

/// Whether driver `driver` is registered with the PCI bus whose device `path` is: "" (no
/// driver) always is. Err: unsupported here.
pub(super) fn check_driver(path: &Path, driver: &str) -> Result<(), SettingsError> {
    if driver.is_empty() || bus(path).join("drivers").join(driver).is_dir() {
        return Ok(());
    }
    let hint = if driver == "vfio-pci" { ": load it with modprobe vfio-pci" } else { ": load its module" };
    Err(SettingsError::Unsupported(format!(
        "the PCI driver {driver} is not loaded (no {}){hint}",
        bus(path).join("drivers").join(driver).display()
    )))
}

/// The device's directory and its PCI address, from its `driver_override` path.
fn device(path: &Path) -> (&Path, String) {
    let dev = path.parent().unwrap_or(Path::new("/"));
    (dev, dev.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default())
}

/// `<sysfs>/bus/pci`, from a device's `driver_override` path (bus/pci/devices/BDF/...).
fn bus(path: &Path) -> PathBuf {
    path.ancestors().nth(3).unwrap_or(Path::new("/")).to_path_buf()
}

/// Whether the device whose `driver_override` is `path` is gone (hot-removed): nothing to bind.
pub(super) fn gone(path: &Path) -> bool {
    !device(path).0.exists()
}

/// The driver bound to the device whose `driver_override` is `path`: "" when none.
pub(super) fn current(path: &Path) -> Result<String, SettingsError> {
    let (dev, bdf) = device(path);
    match std::fs::read_link(dev.join("driver")) {
        Ok(l) => Ok(l.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        Err(e) => Err(SettingsError::Failed(format!("cannot tell which driver {bdf} is bound to: {e}"))),
    }
}

/// Binds the device whose `driver_override` is `path` to `driver` ("": leaves it unbound) and
/// checks that it took.
pub(super) fn bind(path: &Path, driver: &str, label: &str) -> Result<(), SettingsError> {
    let (dev, bdf) = device(path);
    let now = current(path)?;
    if now == driver {
        return Ok(());
    }
    if !now.is_empty() {
        poke(&dev.join("driver/unbind"), &bdf).map_err(|e| e.context(|m| format!("{label}: unbinding from {now}: {m}")))?;
    }
    if !driver.is_empty() {
        check_driver(path, driver)?;
        poke(path, driver)?;
        let probed = poke(&bus(path).join("drivers_probe"), &bdf);
        let cleared = poke(path, "");
        probed.and(cleared).map_err(|e| e.context(|m| format!("{label}: binding to {driver}: {m}")))?;
    }
    match current(path)? {
        got if got == driver => Ok(()),
        got if got.is_empty() => {
            Err(SettingsError::Failed(format!("{label}: the kernel did not bind it to {driver} (no driver took it; see dmesg)")))
        }
        got => Err(SettingsError::Failed(format!("{label}: the kernel bound it to {got}, not {driver}"))),
    }
}

/// One write to a PCI sysfs file.
fn poke(path: &Path, value: &str) -> Result<(), SettingsError> {
    super::sysfs::write_value(path, value)?;
    #[cfg(test)]
    tests::fake_pci_core(path, value);
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::{Change, Setting, Settings};
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// What the kernel's PCI core does on a write to a fake sysfs tree (a directory with a
    /// `.fake-pci` file): `unbind` drops the device's `driver` link; `drivers_probe` links the
    /// driver named in `driver_override`, else the one in the device's `.natural`, unless that
    /// driver's directory holds `.refuses`.
    pub(crate) fn fake_pci_core(path: &Path, value: &str) {
        let Some(root) = path.ancestors().find(|a| a.join(".fake-pci").exists()) else { return };
        let pci = root.join("bus/pci");
        let dev = pci.join("devices").join(value.trim());
        match path.file_name().and_then(|n| n.to_str()) {
            Some("unbind") => {
                let _ = fs::remove_file(dev.join("driver"));
            }
            Some("drivers_probe") if !dev.join("driver").exists() => {
                let over = fs::read_to_string(dev.join("driver_override")).unwrap_or_default();
                let natural = fs::read_to_string(dev.join(".natural")).unwrap_or_default();
                let want = if over.trim().is_empty() { natural } else { over };
                let drv = pci.join("drivers").join(want.trim());
                if !want.trim().is_empty() && drv.is_dir() && !drv.join(".refuses").exists() {
                    symlink(&drv, dev.join("driver")).unwrap();
                }
            }
            _ => {}
        }
    }

    pub const BDF: &str = "0000:00:04.0";

    /// A fake sysfs with NVMe controller `BDF` bound to `nvme`, and the vfio-pci driver.
    pub fn fake() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let sys = d.path().join("sys");
        fs::create_dir_all(&sys).unwrap();
        fs::write(sys.join(".fake-pci"), "").unwrap();
        for drv in ["nvme", "vfio-pci"] {
            fs::create_dir_all(sys.join("bus/pci/drivers").join(drv)).unwrap();
            fs::write(sys.join("bus/pci/drivers").join(drv).join("unbind"), "").unwrap();
        }
        fs::write(sys.join("bus/pci/drivers_probe"), "").unwrap();
        let dev = sys.join("bus/pci/devices").join(BDF);
        fs::create_dir_all(&dev).unwrap();
        fs::write(dev.join("driver_override"), "(null)\n").unwrap();
        fs::write(dev.join(".natural"), "nvme").unwrap();
        symlink(sys.join("bus/pci/drivers/nvme"), dev.join("driver")).unwrap();
        d
    }

    fn settings(d: &tempfile::TempDir) -> Settings {
        Settings::new(d.path().join("sys"), d.path().join("journal.json"))
    }

    fn driver(d: &tempfile::TempDir) -> String {
        current(&d.path().join("sys/bus/pci/devices").join(BDF).join("driver_override")).unwrap()
    }

    fn to_vfio() -> Change {
        Change::new(Setting::PciDriver, Some(BDF), "vfio-pci")
    }

    #[test]
    fn pci_addresses_are_recognised() {
        assert!(is_pci_address("0000:00:04.0") && is_pci_address("0001:af:1f.7"));
        for bad in ["00:04.0", "0000:00:04.8", "0000:00:04", "nvme0", "0000:0g:04.0", "/dev/nvme0n1"] {
            assert!(!is_pci_address(bad), "{bad}");
        }
    }

    #[test]
    fn binding_is_journaled_then_restored_to_nvme_with_the_override_cleared() {
        let d = fake();
        let s = settings(&d);
        let g = s.apply(&[to_vfio()]).unwrap();
        assert_eq!(driver(&d), "vfio-pci");
        assert_eq!(g.changes(), vec![format!("{BDF} pci_driver: nvme -> vfio-pci")]);
        let j: serde_json::Value = serde_json::from_str(&fs::read_to_string(s.journal_path()).unwrap()).unwrap();
        assert_eq!(j["entries"][0]["original"], "nvme");
        assert_eq!(j["entries"][0]["setting"], "pci_driver");
        g.restore().unwrap();
        assert_eq!(driver(&d), "nvme");
        let over = d.path().join("sys/bus/pci/devices").join(BDF).join("driver_override");
        assert_eq!(fs::read_to_string(over).unwrap().trim(), "");
        assert!(!s.journal_path().exists());
    }

    #[test]
    fn a_dropped_guard_binds_back() {
        let d = fake();
        drop(settings(&d).apply(&[to_vfio()]).unwrap());
        assert_eq!(driver(&d), "nvme");
    }

    /// A run's own binding, in force, is no leftover: a second change of the same run (a
    /// profiled run mounts tracefs while it holds the controller) may go ahead.
    #[test]
    fn a_binding_in_force_is_not_a_leftover() {
        let d = fake();
        let s = settings(&d);
        let g = s.apply(&[to_vfio()]).unwrap();
        assert_eq!(s.left_changed().unwrap(), None, "this process's binding in force");
        drop(g);
        assert_eq!(driver(&d), "nvme");
        assert_eq!(s.left_changed().unwrap(), None);
    }

    #[test]
    fn iolab_restore_binds_back_what_a_killed_run_left() {
        let d = fake();
        let s = settings(&d);
        let g = s.apply(&[to_vfio()]).unwrap();
        std::mem::forget(g); // as if killed
                             // A dead owner: rewrite the journal's pid to one that cannot be alive.
        let p = s.journal_path();
        let mut j: serde_json::Value = serde_json::from_str(&fs::read_to_string(p).unwrap()).unwrap();
        j["entries"][0]["owner"]["pid"] = serde_json::json!(i32::MAX as u32);
        fs::write(p, j.to_string()).unwrap();
        assert!(s.left_changed().unwrap().unwrap().contains("pci_driver: nvme -> vfio-pci"));
        let lines = s.restore_journal().unwrap();
        assert_eq!(lines, vec![format!("{BDF} pci_driver: vfio-pci -> nvme (restored)")]);
        assert_eq!(driver(&d), "nvme");
        super::super::crash::disarm();
    }

    #[test]
    fn a_driver_that_does_not_take_the_device_fails_and_rolls_back() {
        let d = fake();
        fs::write(d.path().join("sys/bus/pci/drivers/vfio-pci/.refuses"), "").unwrap();
        let s = settings(&d);
        let e = s.apply(&[to_vfio()]).unwrap_err().to_string();
        assert!(e.contains("did not bind it to vfio-pci"), "{e}");
        assert_eq!(driver(&d), "nvme");
        assert!(!s.journal_path().exists());
    }

    #[test]
    fn refusals_before_anything_changes() {
        let d = fake();
        let s = settings(&d);
        fs::remove_dir_all(d.path().join("sys/bus/pci/drivers/vfio-pci")).unwrap();
        let e = s.check(&to_vfio()).unwrap_err().to_string();
        assert!(e.contains("modprobe vfio-pci"), "{e}");
        let e = s.check(&Change::new(Setting::PciDriver, Some("0000:00:09.0"), "vfio-pci")).unwrap_err().to_string();
        assert!(e.contains("no PCI device 0000:00:09.0"), "{e}");
        let e = s.check(&Change::new(Setting::PciDriver, Some("nvme0"), "vfio-pci")).unwrap_err().to_string();
        assert!(e.contains("not a PCI address"), "{e}");
        assert_eq!(driver(&d), "nvme");
        assert!(!s.journal_path().exists());
    }

    #[test]
    fn hugepages_are_reserved_only_when_short_and_released() {
        let d = fake();
        let dir = d.path().join("sys").join(super::super::HUGEPAGES_2M);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("nr_hugepages"), "4\n").unwrap();
        fs::write(dir.join("free_hugepages"), "3\n").unwrap();
        let s = settings(&d);
        assert_eq!(s.hugepages_for(2).unwrap(), None);
        let c = s.hugepages_for(8).unwrap().unwrap();
        assert_eq!(c, Change::new(Setting::Hugepages, None, "9"));
        let g = s.apply(&[c]).unwrap();
        assert_eq!(fs::read_to_string(dir.join("nr_hugepages")).unwrap().trim(), "9");
        assert_eq!(g.changes(), vec!["hugepages-2048kB hugepages_2m: 4 -> 9".to_string()]);
        g.restore().unwrap();
        assert_eq!(fs::read_to_string(dir.join("nr_hugepages")).unwrap().trim(), "4");
    }

    #[test]
    fn after_a_panic_the_binding_is_left_for_the_restore_the_abort_starts() {
        let d = fake();
        let dir = d.path().join("sys").join(super::super::HUGEPAGES_2M);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("nr_hugepages"), "0\n").unwrap();
        let s = settings(&d);
        let g = s.apply(&[to_vfio(), Change::new(Setting::Hugepages, None, "2")]).unwrap();
        std::mem::forget(g); // as if the process panicked with the device still open
        let (lines, left) = super::super::restore_own_after_crash(s.journal_path()).unwrap();
        assert_eq!(lines, vec!["hugepages-2048kB hugepages_2m: 2 -> 0 (restored)".to_string()]);
        assert!(left);
        assert_eq!(driver(&d), "vfio-pci", "unbinding would wait for this process to close the device");
        assert!(fs::read_to_string(s.journal_path()).unwrap().contains("pci_driver"));
        super::super::crash::disarm();
    }

    #[test]
    fn a_removed_device_needs_no_restore() {
        let d = fake();
        let s = settings(&d);
        let g = s.apply(&[to_vfio()]).unwrap();
        fs::remove_dir_all(d.path().join("sys/bus/pci/devices").join(BDF)).unwrap();
        let lines = g.restore().unwrap();
        assert!(lines[0].contains("is gone"), "{lines:?}");
    }
}
