//! One setting's value, read, written and read back: most are one sysfs attribute (`sysfs.rs`),
//! the PCI driver binding is several (`pci.rs`), tracefs is a mount. A value that cannot be read,
//! written or made to take is a failure (`SettingsError::Failed`): what it means for the run
//! (rolled back, or left changed) is decided by whoever applies or restores it.
use super::sysfs::{parse_scheduler, read_raw, write_value};
use super::{Setting, SettingsError};
use std::path::Path;

/// The current value of a setting's file, as it would be written back (for the scheduler: the
/// selected one's name).
pub(crate) fn read_current(setting: Setting, path: &Path) -> Result<String, SettingsError> {
    if setting == Setting::Tracefs {
        return Ok(if crate::settings::tracefs_mounted(path) { "mounted" } else { "unmounted" }.into());
    }
    if setting == Setting::PciDriver {
        return super::pci::current(path);
    }
    if setting == Setting::CpuFreqKhz {
        return super::cpu::read_freq(path);
    }
    if setting.per_controller() {
        return super::nvme::read(setting, path);
    }
    let raw = read_raw(path)?;
    if setting == Setting::Scheduler {
        return parse_scheduler(&raw)
            .0
            .ok_or_else(|| SettingsError::Failed(format!("cannot tell the selected scheduler from \"{raw}\" in {}", path.display())));
    }
    Ok(raw)
}

/// Whether the value read back (`got`, as from `read_current`) shows `want` took effect.
pub(crate) fn value_matches(setting: Setting, want: &str, got: &str) -> bool {
    if want == got {
        return true;
    }
    match setting {
        Setting::Scheduler | Setting::Governor | Setting::PciDriver | Setting::CpuFreqKhz | Setting::NvmeApst => false,
        Setting::WbtLatUsec if want.trim() == "-1" => {
            // -1 asks for the kernel's default, which reads back as that default (or 0 when wbt
            // cannot run on this queue).
            got.parse::<i64>().map(|v| v >= 0).unwrap_or(false)
        }
        _ => match (want.trim().parse::<i64>(), got.trim().parse::<i64>()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        },
    }
}

/// Write and read back. Err when the write fails or the kernel kept another value.
pub(crate) fn write_verified(setting: Setting, path: &Path, value: &str, label: &str) -> Result<(), SettingsError> {
    if setting == Setting::PciDriver {
        return super::pci::bind(path, value, label);
    }
    if setting == Setting::Tracefs {
        mount_tracefs(path, value == "mounted")?;
    } else if setting == Setting::CpuFreqKhz {
        super::cpu::write_freq(path, value)?;
    } else if setting.per_controller() {
        super::nvme::write(setting, path, value)?;
    } else {
        write_value(path, value)?;
    }
    let got = read_current(setting, path)?;
    if value_matches(setting, value, &got) {
        return Ok(());
    }
    let hint = match setting {
        Setting::IoPollDelay => "; io_poll_delay does nothing on this kernel: drop it",
        Setting::Scheduler => "; is the scheduler's module loadable?",
        Setting::Hugepages => "; the kernel found too little free memory for them (fragmented, or too small)",
        _ => "; drop this setting",
    };
    let got = if got.is_empty() { "nothing".to_string() } else { got };
    Err(SettingsError::Failed(format!("the kernel ignored {}={value} on {label} (reads back {got}){hint}", setting.name())))
}

/// Write a change's value: Ok(None) when it reads back as written (`write_verified`), Ok(Some(in
/// force)) where the kernel clamped a CPU frequency within the hardware's range (the run goes on
/// with what is in force, recorded beside what was asked). Restoring uses `write_verified`: an
/// original is put back exactly.
pub(crate) fn write_in_force(setting: Setting, path: &Path, value: &str, label: &str) -> Result<Option<String>, SettingsError> {
    if setting != Setting::CpuFreqKhz {
        return write_verified(setting, path, value, label).map(|()| None);
    }
    let got = super::cpu::write_freq(path, value)?;
    Ok((got != value).then_some(got))
}

/// Mount tracefs on `path`, or unmount it.
fn mount_tracefs(path: &Path, mount: bool) -> Result<(), SettingsError> {
    use std::os::unix::ffi::OsStrExt;
    let at =
        std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| SettingsError::Failed(format!("bad path {}", path.display())))?;
    // SAFETY: NUL-terminated strings; a null data argument is what tracefs takes.
    let rc = unsafe {
        if mount {
            libc::mount(c"nodev".as_ptr(), at.as_ptr(), c"tracefs".as_ptr(), 0, std::ptr::null())
        } else {
            libc::umount2(at.as_ptr(), 0)
        }
    };
    if rc != 0 {
        let what = if mount { "mount tracefs on" } else { "unmount tracefs from" };
        return Err(SettingsError::Failed(format!("cannot {what} {}: {}", path.display(), std::io::Error::last_os_error())));
    }
    Ok(())
}
