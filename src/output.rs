//! Files iolab writes for people (JSON records, exports, reports): whole or not at all, and
//! never into a device. docs/safety.md states the rule.
use std::io::Write;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Where the bytes for `dest` really go. A symlink is followed so the link survives and its
/// target is replaced; a sink (see `sink`) is written in place, because renaming over it would
/// replace a device node.
enum Destination {
    Stdout,
    InPlace(PathBuf),
    Replace(PathBuf),
}

/// Whether a node that is not a regular file may be written in place: a FIFO (someone reads
/// it), or a character device that only takes bytes away: mem's null (1:3) and
/// zero (1:5), which discard them, and terminals (virtual consoles and serial ports, major 4;
/// /dev/tty and /dev/console, 5:0 and 5:1; pseudo-terminals, majors 136 to 143), which show
/// them. Block devices and every other character device (/dev/full, /dev/mem, /dev/kmsg, disks
/// through sg or nvme, ...) are refused: whatever is written there is kept or acted on.
fn sink(m: &std::fs::Metadata) -> bool {
    let t = m.file_type();
    if t.is_fifo() {
        return true;
    }
    if !t.is_char_device() {
        return false;
    }
    let (major, minor) = (libc::major(m.rdev()), libc::minor(m.rdev()));
    matches!((major, minor), (1, 3) | (1, 5) | (4, _) | (5, 0) | (5, 1) | (136..=143, _))
}

/// What kind of node `m` is, for messages: "a block device (7:0)", "a FIFO", ...
pub fn kind(m: &std::fs::Metadata) -> String {
    let t = m.file_type();
    let dev = format!("{}:{}", libc::major(m.rdev()), libc::minor(m.rdev()));
    if t.is_block_device() {
        format!("a block device ({dev})")
    } else if t.is_char_device() {
        format!("a character device ({dev})")
    } else if t.is_fifo() {
        "a FIFO".into()
    } else if t.is_socket() {
        "a socket".into()
    } else if t.is_dir() {
        "a directory".into()
    } else if t.is_file() {
        "a regular file".into()
    } else {
        "of an unknown kind".into()
    }
}

/// Why iolab will not write `dest`, a node that is not a sink (`via`: where a link led).
fn refusal(flag: &str, dest: &str, m: &std::fs::Metadata, via: &str) -> String {
    format!(
        "{flag} {dest}{via} is {}: iolab writes results only to regular files, /dev/null, terminals and FIFOs; give a file name",
        kind(m)
    )
}

/// Where `dest` goes, or why iolab will not write there (`flag` names the option in messages).
fn destination(flag: &str, dest: &str) -> Result<Destination, String> {
    if dest == "-" {
        return Ok(Destination::Stdout);
    }
    if dest.is_empty() {
        return Err(format!("{flag} is empty: give a file name, or - for standard output"));
    }
    let path = Path::new(dest);
    let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    // metadata follows symlinks: a link to a device is judged as the device.
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(Destination::Replace(real)),
        Ok(m) if m.is_dir() => Err(format!("{flag} {dest} is a directory: give a file name")),
        Ok(m) if sink(&m) => Ok(Destination::InPlace(path.to_path_buf())),
        Ok(m) => {
            let via = if real != path { format!(" (a link to {})", real.display()) } else { String::new() };
            Err(refusal(flag, dest, &m, &via))
        }
        Err(_) => Ok(Destination::Replace(real)),
    }
}

/// The directory a file is created in (`.` for a bare name).
pub fn parent(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// Check before any work that `dest` can be written (its directory exists and takes a new file,
/// or it is a sink that may be written), so a long run is not wasted on a typo and nothing is
/// done for an output iolab will refuse.
pub fn check_writable(flag: &str, dest: &str) -> Result<(), String> {
    match destination(flag, dest)? {
        Destination::Stdout => Ok(()),
        // access(2), not open: opening a FIFO for writing waits for its reader.
        Destination::InPlace(p) => {
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
                .map_err(|_| format!("{flag} {dest}: the name holds a NUL byte"))?;
            // SAFETY: c is a NUL-terminated path alive for the call.
            if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
                return Err(format!("cannot write {flag} {dest}: {}", std::io::Error::last_os_error()));
            }
            Ok(())
        }
        Destination::Replace(p) => {
            let dir = parent(&p);
            if !dir.is_dir() {
                return Err(format!("cannot write {flag} {dest}: directory {} does not exist", dir.display()));
            }
            tempfile::NamedTempFile::new_in(dir)
                .map(drop)
                .map_err(|e| format!("cannot write {flag} {dest}: {} is not writable ({})", dir.display(), std::io::Error::from(e.kind())))
        }
    }
}

/// Write `dest` atomically and durably: a temporary file beside it, fsync, rename. `-` is stdout.
pub fn write_with(dest: &str, f: impl FnOnce(&mut dyn Write) -> Result<(), String>) -> Result<(), String> {
    match destination("output", dest)? {
        Destination::Stdout => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            f(&mut lock)?;
            lock.flush().map_err(|e| format!("cannot write to stdout: {e}"))
        }
        Destination::InPlace(p) => {
            use std::os::unix::fs::OpenOptionsExt;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOCTTY)
                .open(&p)
                .map_err(|e| format!("cannot write {dest}: {e}"))?;
            // What was opened, not what the path named a moment ago (a link may have changed).
            let m = file.metadata().map_err(|e| format!("cannot write {dest}: {e}"))?;
            if !sink(&m) {
                return Err(refusal("output", dest, &m, ""));
            }
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
    fn only_sinks_are_written_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: c is a NUL-terminated path alive for the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Checked without opening: a FIFO with no reader yet must not block the check.
        check_writable("--json", fifo.to_str().unwrap()).unwrap();
        check_writable("--json", "/dev/zero").unwrap();
        for (dest, why) in [("/dev/full", "character device (1:7)"), ("", "is empty")] {
            assert!(check_writable("--json", dest).unwrap_err().contains(why), "{dest}");
            assert!(write_bytes(dest, b"{}").unwrap_err().contains(why), "{dest}");
        }
        let link = dir.path().join("full.json");
        std::os::unix::fs::symlink("/dev/full", &link).unwrap();
        let e = check_writable("--json", link.to_str().unwrap()).unwrap_err();
        assert!(e.contains("a link to /dev/full") && e.contains("1:7"), "{e}");
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
