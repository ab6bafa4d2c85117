//! Where sysfs is and the few ways the device checks read it: a leaf under `safety`, `nvme`,
//! `controller` and `sysinfo`, each of which reads sysfs through a root directory so it can be
//! tested against a fake tree.
use std::path::{Path, PathBuf};

/// Where sysfs is mounted.
pub const SYSFS: &str = "/sys";

/// The sysfs directory of device `major:minor` under the sysfs root `sys`.
pub(crate) fn sysfs_node(sys: &Path, major: u32, minor: u32) -> Option<PathBuf> {
    std::fs::canonicalize(sys.join(format!("dev/block/{major}:{minor}"))).ok().filter(|p| p.is_dir())
}

/// A sysfs attribute's text, trimmed; None when it is absent or empty.
pub(crate) fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// The names in a sysfs directory, sorted.
pub(crate) fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}
