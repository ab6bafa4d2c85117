//! Reading and writing single sysfs attribute files: the primitives every setting uses. A file
//! that cannot be read or written is a failure (`SettingsError::Failed`); the callers that know
//! better (a file this machine lacks) say so in their own kind.
use super::SettingsError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

/// Sysfs attributes are at most a page; never read more than this (a stray symlink to a
/// character device must not make us read forever).
const MAX_READ: u64 = 64 * 1024;

/// The file's content, trimmed.
pub fn read_raw(path: &Path) -> Result<String, SettingsError> {
    let unreadable = |e: std::io::Error| SettingsError::Failed(format!("cannot read {}: {e}", path.display()));
    let f = File::open(path).map_err(unreadable)?;
    let mut buf = Vec::new();
    f.take(MAX_READ).read_to_end(&mut buf).map_err(unreadable)?;
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

/// Write `value` to a sysfs file in one write(2), as `echo value > file` would.
pub(crate) fn write_value(path: &Path, value: &str) -> Result<(), SettingsError> {
    let mut f = OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| SettingsError::Failed(format!("cannot open {} for writing: {e}", path.display())))?;
    let data = format!("{value}\n");
    match f.write(data.as_bytes()) {
        Ok(n) if n == data.len() => Ok(()),
        Ok(n) => Err(SettingsError::Failed(format!("short write of {value} to {} ({n} of {} bytes)", path.display(), data.len()))),
        Err(e) => Err(SettingsError::Failed(format!("the kernel refused {value} for {}: {e}", path.display()))),
    }
}
