//! Reading, writing and verifying single sysfs attribute files.
use super::Setting;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

/// Sysfs attributes are at most a page; never read more than this (a stray symlink to a
/// character device must not make us read forever).
const MAX_READ: u64 = 64 * 1024;

/// The file's content, trimmed.
pub fn read_raw(path: &Path) -> Result<String, String> {
    let f = File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut buf = Vec::new();
    f.take(MAX_READ).read_to_end(&mut buf).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(String::from_utf8_lossy(&buf).trim().to_string())
}

/// The scheduler file lists the available ones with the selected one in brackets:
/// "none [mq-deadline] kyber bfq". Returns (selected, available).
pub fn parse_scheduler(s: &str) -> (Option<String>, Vec<String>) {
    let mut current = None;
    let mut all = Vec::new();
    for tok in s.split_whitespace() {
        if let Some(name) = tok.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            current = Some(name.to_string());
            all.push(name.to_string());
        } else {
            all.push(tok.to_string());
        }
    }
    // A queue without elevator support reads just "none".
    if current.is_none() && all.len() == 1 {
        current = Some(all[0].clone());
    }
    (current, all)
}

/// The current value of a setting's file, as it would be written back (for the scheduler: the
/// selected one's name).
pub fn read_current(setting: Setting, path: &Path) -> Result<String, String> {
    if setting == Setting::Tracefs {
        return Ok(if crate::settings::tracefs_mounted(path) { "mounted" } else { "unmounted" }.into());
    }
    if setting == Setting::PciDriver {
        return super::pci::current(path);
    }
    let raw = read_raw(path)?;
    if setting == Setting::Scheduler {
        return parse_scheduler(&raw).0.ok_or_else(|| format!("cannot tell the selected scheduler from \"{raw}\" in {}", path.display()));
    }
    Ok(raw)
}

/// Write `value` to a sysfs file in one write(2), as `echo value > file` would.
pub fn write_value(path: &Path, value: &str) -> Result<(), String> {
    let mut f =
        OpenOptions::new().write(true).truncate(true).open(path).map_err(|e| format!("cannot open {} for writing: {e}", path.display()))?;
    let data = format!("{value}\n");
    match f.write(data.as_bytes()) {
        Ok(n) if n == data.len() => Ok(()),
        Ok(n) => Err(format!("short write of {value} to {} ({n} of {} bytes)", path.display(), data.len())),
        Err(e) => Err(format!("the kernel refused {value} for {}: {e}", path.display())),
    }
}

/// Whether the value read back (`got`, as from `read_current`) shows `want` took effect.
pub fn value_matches(setting: Setting, want: &str, got: &str) -> bool {
    if want == got {
        return true;
    }
    match setting {
        Setting::Scheduler | Setting::Governor | Setting::PciDriver => false,
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
pub fn write_verified(setting: Setting, path: &Path, value: &str, label: &str) -> Result<(), String> {
    if setting == Setting::PciDriver {
        return super::pci::bind(path, value, label);
    }
    if setting == Setting::Tracefs {
        mount_tracefs(path, value == "mounted")?;
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
    Err(format!("the kernel ignored {}={value} on {label} (reads back {got}){hint}", setting.name()))
}

/// Mount tracefs on `path`, or unmount it.
fn mount_tracefs(path: &Path, mount: bool) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let at = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| format!("bad path {}", path.display()))?;
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
        return Err(format!("cannot {what} {}: {}", path.display(), std::io::Error::last_os_error()));
    }
    Ok(())
}
