//! The NVMe controller's power knobs: its power state (`nvme_power_state`, Set Features 02h) and
//! autonomous power state transitions (`nvme_apst`, Set Features 0Ch), on the controller behind
//! a target's namespace, through the admin passthrough ioctl on its character device
//! (`/dev/nvmeN`). Neither is a file: the journal names `<sysfs>/class/nvme/<controller>/<setting>`
//! (one entry per controller and knob, so ownership works as for a sysfs file) and the value is
//! read with Get Features and written with Set Features. A controller the user-space driver holds
//! has no block device, so it is refused before this (out of scope).
use super::{Setting, SettingsError, Target};
use crate::device::nvme;
use serde_json::{json, Value};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

/// `nvme_power_state`'s value: a power state's number. Err: bad input.
pub(crate) fn parse_state(v: &str) -> Result<u8, SettingsError> {
    let v = v.trim();
    match v.parse::<u8>() {
        Ok(n) if n < 32 && v.bytes().all(|b| b.is_ascii_digit()) => Ok(n),
        _ => Err(SettingsError::Invalid(format!(
            "nvme_power_state must be a power state's number (0 is the fastest, as Identify Controller lists them), not \"{v}\""
        ))),
    }
}

/// `nvme_apst`'s value: on or off. Err: bad input.
pub(crate) fn parse_apst(v: &str) -> Result<bool, SettingsError> {
    match v.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        v => Err(SettingsError::Invalid(format!("nvme_apst must be on or off, not \"{v}\""))),
    }
}

fn is_controller(name: &str) -> bool {
    name.strip_prefix("nvme").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The controller ("nvme0") behind block device `dev`: its `device` link leads to the controller,
/// or to the subsystem of a multipath namespace (then its one controller). Err: unsupported here.
pub(super) fn controller_of(sysfs: &Path, dev: &str) -> Result<String, SettingsError> {
    let not = || {
        SettingsError::Unsupported(format!("{dev} is not an NVMe namespace: the NVMe power settings need one (they act on its controller)"))
    };
    let link = std::fs::canonicalize(sysfs.join("block").join(dev).join("device")).map_err(|_| not())?;
    let name = link.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if is_controller(&name) {
        return Ok(name);
    }
    if !name.starts_with("nvme-subsys") {
        return Err(not());
    }
    let mut ctrls: Vec<String> = std::fs::read_dir(&link)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| is_controller(n))
        .collect();
    ctrls.sort();
    match ctrls.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(SettingsError::Unsupported(format!("{dev}'s subsystem {name} lists no controller"))),
        many => Err(SettingsError::Unsupported(format!(
            "{dev} is reached through {} controllers ({}): iolab sets one controller's power state, not a multipath subsystem's",
            many.len(),
            many.join(", ")
        ))),
    }
}

/// The controller's character device, open for admin commands. Err: unsupported here (no such
/// device, or not this process's to open).
fn open(controller: &str) -> Result<std::fs::File, SettingsError> {
    if !is_controller(controller) {
        return Err(SettingsError::Unsupported(format!("\"{controller}\" is not an NVMe controller's name")));
    }
    let path = PathBuf::from("/dev").join(controller);
    let meta = std::fs::metadata(&path).map_err(|e| SettingsError::Unsupported(format!("cannot examine {}: {e}", path.display())))?;
    if !meta.file_type().is_char_device() {
        return Err(SettingsError::Unsupported(format!("{} is not a character device", path.display())));
    }
    std::fs::OpenOptions::new().read(true).write(true).open(&path).map_err(|e| {
        SettingsError::Unsupported(format!(
            "cannot open {} for admin commands ({e}): run iolab as root (sudo) to change the controller's power settings",
            path.display()
        ))
    })
}

/// The controller a journal path names (`.../class/nvme/<controller>/<setting>`).
fn controller_in(path: &Path) -> String {
    path.parent().and_then(Path::file_name).map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

/// The one target of an NVMe power setting on `dev`'s controller, after checking the value
/// against what Identify Controller reports: a state the controller does not have, or APST on a
/// controller without it, is refused in one line before anything changes (unsupported here).
pub(super) fn target(sysfs: &Path, dev: &str, setting: Setting, value: &str) -> Result<Target, SettingsError> {
    let ctrl = controller_of(sysfs, dev)?;
    let f = open(&ctrl)?;
    let ps = nvme::power_states(f.as_raw_fd()).map_err(|e| SettingsError::Failed(format!("{ctrl}: {e}")))?;
    match setting {
        Setting::NvmePowerState => {
            let n = parse_state(value)?;
            if n as usize >= ps.states.len() {
                let have: Vec<String> = ps.states.iter().map(describe).collect();
                return Err(SettingsError::Unsupported(format!(
                    "{ctrl} has no power state {n}: it has {} ({}): pick one of those",
                    if ps.states.len() == 1 { "only state 0".to_string() } else { format!("states 0-{}", ps.states.len() - 1) },
                    have.join("; ")
                )));
            }
        }
        _ => {
            parse_apst(value)?;
            if !ps.apst_supported {
                return Err(SettingsError::Unsupported(format!(
                    "{ctrl} does not support autonomous power state transitions (APSTA is 0 in Identify Controller): drop nvme_apst"
                )));
            }
        }
    }
    let fid = if setting == Setting::NvmePowerState { nvme::FEATURE_POWER_MANAGEMENT } else { nvme::FEATURE_APST };
    if nvme::feature_changeable(f.as_raw_fd(), fid) == Some(false) {
        return Err(SettingsError::Unsupported(format!(
            "{ctrl} does not let {} change (Get Features {fid:#04x}, supported capabilities: not changeable): drop it",
            setting.name()
        )));
    }
    Ok(Target { path: sysfs.join("class/nvme").join(&ctrl).join(setting.file_name()), label: ctrl, value: None })
}

fn describe(s: &nvme::PowerState) -> String {
    format!(
        "{}: {} W{}, entry {} µs, exit {} µs",
        s.state,
        s.max_power_w,
        if s.non_operational { " non-operational" } else { "" },
        s.entry_latency_us,
        s.exit_latency_us
    )
}

/// The value in force: the power state's number, or APST "on"/"off".
pub(super) fn read(setting: Setting, path: &Path) -> Result<String, SettingsError> {
    let ctrl = controller_in(path);
    let f = open(&ctrl)?;
    let fd = f.as_raw_fd();
    let label = |e: crate::device::DeviceError| SettingsError::Failed(format!("{ctrl}: {e}"));
    if setting == Setting::NvmePowerState {
        return Ok((nvme::get_feature(fd, nvme::FEATURE_POWER_MANAGEMENT, None).map_err(label)? & 0x1f).to_string());
    }
    let mut table = vec![0u8; nvme::APST_TABLE];
    let on = nvme::get_feature(fd, nvme::FEATURE_APST, Some(&mut table)).map_err(label)? & 1 != 0;
    Ok(if on { "on" } else { "off" }.into())
}

/// Set Features: the power state (workload hint 0), or APST on/off with the table the
/// controller holds now (the kernel's, kept as it is).
pub(super) fn write(setting: Setting, path: &Path, value: &str) -> Result<(), SettingsError> {
    // Already in force: no Set Features (a restore of a value never changed, on a controller
    // that refuses the feature's change, must not fail).
    if read(setting, path).is_ok_and(|now| now == value.trim()) {
        return Ok(());
    }
    let ctrl = controller_in(path);
    let f = open(&ctrl)?;
    let fd = f.as_raw_fd();
    let label = |e: crate::device::DeviceError| SettingsError::Failed(format!("{ctrl}: {e}"));
    if setting == Setting::NvmePowerState {
        let n = parse_state(value)?;
        return nvme::set_feature(fd, nvme::FEATURE_POWER_MANAGEMENT, n as u32, None).map(drop).map_err(label);
    }
    let on = parse_apst(value)?;
    let mut table = vec![0u8; nvme::APST_TABLE];
    nvme::get_feature(fd, nvme::FEATURE_APST, Some(&mut table)).map_err(label)?;
    nvme::set_feature(fd, nvme::FEATURE_APST, on as u32, Some(&mut table)).map(drop).map_err(label)
}

/// Whether the controller a journal entry names is gone.
pub(super) fn gone(path: &Path) -> bool {
    !path.parent().is_some_and(Path::exists)
}

/// The controller's power states and the knobs in force, for the environment record; null where
/// `dev` is not an NVMe namespace or the controller cannot be asked (not root).
pub(super) fn snapshot(sysfs: &Path, dev: &str) -> Value {
    let Ok(ctrl) = controller_of(sysfs, dev) else { return Value::Null };
    let Ok(f) = open(&ctrl) else { return Value::Null };
    let Ok(ps) = nvme::power_states(f.as_raw_fd()) else { return Value::Null };
    let base = sysfs.join("class/nvme").join(&ctrl);
    let now = |s: Setting| read(s, &base.join(s.file_name())).ok();
    json!({
        "controller": ctrl,
        "power_states": ps.states,
        "apst_supported": ps.apst_supported,
        "power_state": now(Setting::NvmePowerState).and_then(|v| v.parse::<u8>().ok()),
        "apst": if ps.apst_supported { now(Setting::NvmeApst) } else { None },
    })
}
