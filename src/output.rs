//! Files iolab writes for people (JSON records, exports, reports): whole or not at all.
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where the bytes for `dest` really go. A symlink is followed so the link survives and its
/// target is replaced; a destination that exists but is not a regular file (/dev/null, a FIFO,
/// a terminal) is written in place, because renaming over it would replace a device node.
enum Destination {
    Stdout,
    InPlace(PathBuf),
    Replace(PathBuf),
}

fn destination(dest: &str) -> Destination {
    if dest == "-" {
        return Destination::Stdout;
    }
    let path = Path::new(dest);
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    match std::fs::metadata(&real) {
        Ok(m) if !m.is_file() && !m.is_dir() => Destination::InPlace(real),
        _ => Destination::Replace(real),
    }
}

/// The directory a file is created in (`.` for a bare name).
pub fn parent(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Check before any work that `dest` can be written (its directory exists and takes a new file,
/// or it is a device or FIFO that opens for writing), so a long run is not wasted on a typo.
pub fn check_writable(flag: &str, dest: &str) -> Result<(), String> {
    if Path::new(dest).is_dir() {
        return Err(format!("{flag} {dest} is a directory: give a file name"));
    }
    match destination(dest) {
        Destination::Stdout => Ok(()),
        Destination::InPlace(p) => std::fs::OpenOptions::new().write(true).open(&p).map(drop)
            .map_err(|e| format!("cannot write {flag} {dest}: {e}")),
        Destination::Replace(p) => {
            let dir = parent(&p);
            if !dir.is_dir() {
                return Err(format!("cannot write {flag} {dest}: directory {} does not exist", dir.display()));
            }
            tempfile::NamedTempFile::new_in(dir).map(drop)
                .map_err(|e| format!("cannot write {flag} {dest}: {} is not writable ({})", dir.display(), std::io::Error::from(e.kind())))
        }
    }
}

/// Write `dest` atomically and durably: a temporary file beside it, fsync, rename. `-` is stdout.
pub fn write_with(dest: &str, f: impl FnOnce(&mut dyn Write) -> Result<(), String>) -> Result<(), String> {
    match destination(dest) {
        Destination::Stdout => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            f(&mut lock)?;
            lock.flush().map_err(|e| format!("cannot write to stdout: {e}"))
        }
        Destination::InPlace(p) => {
            let mut file = std::fs::OpenOptions::new().write(true).open(&p).map_err(|e| format!("cannot write {dest}: {e}"))?;
            f(&mut file)?;
            file.flush().map_err(|e| format!("cannot write {dest}: {e}"))
        }
        Destination::Replace(p) => {
            let mut tmp = tempfile::NamedTempFile::new_in(parent(&p)).map_err(|e| format!("cannot write {dest}: {e}"))?;
            // Temporary files start 0600; results are for sharing, readable like any new file.
            use std::os::unix::fs::PermissionsExt;
            tmp.as_file().set_permissions(std::fs::Permissions::from_mode(0o644)).map_err(|e| format!("cannot write {dest}: {e}"))?;
            f(&mut tmp)?;
            tmp.as_file().sync_all().map_err(|e| format!("cannot write {dest}: {e}"))?;
            tmp.persist(&p).map_err(|e| format!("cannot write {dest}: {}", e.error))?;
            Ok(())
        }
    }
}

pub fn write_bytes(dest: &str, bytes: &[u8]) -> Result<(), String> {
    write_with(dest, |w| w.write_all(bytes).map_err(|e| format!("cannot write {dest}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dev_null_stays_a_device() {
        use std::os::unix::fs::FileTypeExt;
        write_bytes("/dev/null", b"{}").unwrap();
        check_writable("--json", "/dev/null").unwrap();
        assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());
    }

    #[test]
    fn a_symlink_survives_and_its_target_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.json");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_bytes(link.to_str().unwrap(), b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    }

    #[test]
    fn a_new_file_is_written_whole_and_a_directory_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        write_bytes(p.to_str().unwrap(), b"abc").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"abc");
        assert!(check_writable("--json", dir.path().to_str().unwrap()).unwrap_err().contains("is a directory"));
        assert!(check_writable("--json", "/nonexistent-dir/x.json").unwrap_err().contains("does not exist"));
    }
}
