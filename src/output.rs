//! Files iolab writes for people (JSON records, exports, reports): whole or not at all, never
//! into a device, and never through a link another user planted in a shared directory.
//! docs/safety.md states the rule.
//!
//! A file is replaced, never written in place: its directory is opened without following a
//! link (`O_DIRECTORY|O_NOFOLLOW`), a temporary file is created in it with `openat`
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600), given the mode of the file it replaces (0644 for a
//! new one, never wider), written, fsynced and renamed over the name with `renameat` on the same
//! directory. A name that is a symbolic link is refused. Only sinks (/dev/null, terminals,
//! FIFOs) are written in place, and a FIFO nobody reads is refused after a short wait.
use crate::failure::{FailureKind, Kinded};
use std::ffi::{CString, OsStr};
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Why a file was not written, typed: a destination iolab refuses (a device, a link, a
/// directory, a name it cannot create a file next to) is bad input, exit 2 before anything is
/// done; an I/O error while the file is written is a failed command, exit 1. Each is one line
/// naming the file.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The destination is refused or cannot be used as given. Bad input.
    #[error("{0}")]
    Refused(String),
    /// Writing, syncing or renaming the file failed. A failed command.
    #[error("{0}")]
    Io(String),
}

impl Kinded for OutputError {
    /// What kind of failure this is: it decides the exit code.
    fn kind(&self) -> FailureKind {
        match self {
            OutputError::Refused(_) => FailureKind::Invalid,
            OutputError::Io(_) => FailureKind::Failed,
        }
    }
}

// For the callers that say an output's problem inside their own message (a report's `--out`, a
// run's `--json`): the line, the kind left to them.
crate::failure::into_text!(OutputError);

/// Where the bytes for `dest` really go: a sink (see `sink`) is written in place, because
/// renaming over it would replace a device node; anything else is replaced in its directory.
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
    } else if t.is_symlink() {
        "a symbolic link".into()
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

/// Why iolab will not write through the link at `path` (`shown` names it).
fn link_refusal(shown: &str, path: &Path) -> String {
    let to = std::fs::read_link(path).map(|t| format!(" (to {})", t.display())).unwrap_or_default();
    format!(
        "{shown} is a symbolic link{to}: iolab does not write through links (another user may have planted it); give the file's own path"
    )
}

/// Where `dest` goes, or why iolab will not write there (`flag` names the option in messages).
fn destination(flag: &str, dest: &str) -> Result<Destination, OutputError> {
    if dest == "-" {
        return Ok(Destination::Stdout);
    }
    if dest.is_empty() {
        return Err(OutputError::Refused(format!("{flag} is empty: give a file name, or - for standard output")));
    }
    let path = Path::new(dest);
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    // metadata follows symlinks: a link to a device is judged as the device.
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(OutputError::Refused(format!("{flag} {dest} is a directory: give a file name"))),
        // A link to a sink (/dev/stdout, ...) is written in place: nothing is replaced through it,
        // and what is opened is checked to be a sink again.
        Ok(m) if sink(&m) => Ok(Destination::InPlace(path.to_path_buf())),
        Ok(m) if link && !m.is_file() => {
            let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            Err(OutputError::Refused(refusal(flag, dest, &m, &format!(" (a link to {})", real.display()))))
        }
        _ if link => Err(OutputError::Refused(link_refusal(&format!("{flag} {dest}"), path))),
        Ok(m) if m.is_file() => Ok(Destination::Replace(path.to_path_buf())),
        Ok(m) => Err(OutputError::Refused(refusal(flag, dest, &m, ""))),
        Err(_) => Ok(Destination::Replace(path.to_path_buf())),
    }
}

/// The directory a file is created in (`.` for a bare name).
pub fn parent(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

fn cstr(s: &OsStr) -> std::io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "the name holds a NUL byte"))
}

/// -1 as an error with errno.
fn check(r: libc::c_int) -> std::io::Result<libc::c_int> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A directory opened without following a link at its last component: names in it are
/// created, replaced, read and removed relative to this descriptor (`openat`, `renameat`,
/// `unlinkat`), so a link planted on the way after it was opened leads nowhere.
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

impl Dir {
    /// Open `path`, a directory that is not a symbolic link; the error is one line naming it.
    pub fn open(path: &Path) -> Result<Dir, OutputError> {
        let c = cstr(path.as_os_str()).map_err(|e| OutputError::Refused(format!("cannot open directory {}: {e}", path.display())))?;
        // SAFETY: c is a NUL-terminated path alive for the call.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
        match check(fd) {
            // SAFETY: fd was just opened and is owned by nothing else.
            Ok(fd) => Ok(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) }, path: path.to_path_buf() }),
            Err(e) => Err(Dir::why(path, e)),
        }
    }

    /// `open`, creating the directory (and its parents) first when it does not exist.
    pub fn create(path: &Path) -> Result<Dir, OutputError> {
        if std::fs::symlink_metadata(path).is_err() {
            std::fs::create_dir_all(path).map_err(|e| OutputError::Refused(format!("cannot create {}: {e}", path.display())))?;
        }
        Dir::open(path)
    }

    /// Why the directory cannot be opened: refused (a link, not a directory, none there, or
    /// not to be opened by this user).
    fn why(path: &Path, e: std::io::Error) -> OutputError {
        OutputError::Refused(match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => format!(
                "directory {} is a symbolic link: iolab does not write through links in a directory others may write; give its own path",
                path.display()
            ),
            Ok(m) if !m.is_dir() => format!("{} is {}, not a directory", path.display(), kind(&m)),
            Err(_) => format!("directory {} does not exist", path.display()),
            _ => format!("cannot open directory {}: {e}", path.display()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The sub-directory `name`, opened without following a link; created (0755) when missing
    /// if `create`, else None when missing.
    pub fn sub(&self, name: &str, create: bool) -> Result<Option<Dir>, OutputError> {
        let path = self.path.join(name);
        let c = cstr(OsStr::new(name)).map_err(|e| OutputError::Refused(format!("cannot open {}: {e}", path.display())))?;
        if create {
            // SAFETY: c is a NUL-terminated name alive for the call; self.fd is open.
            let r = unsafe { libc::mkdirat(self.fd.as_raw_fd(), c.as_ptr(), 0o755) };
            if let Err(e) = check(r) {
                if e.kind() != std::io::ErrorKind::AlreadyExists {
                    return Err(OutputError::Io(format!("cannot create {}: {e}", path.display())));
                }
            }
        }
        // SAFETY: as above.
        let fd = unsafe {
            libc::openat(self.fd.as_raw_fd(), c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        };
        match check(fd) {
            // SAFETY: fd was just opened and is owned by nothing else.
            Ok(fd) => Ok(Some(Dir { fd: unsafe { OwnedFd::from_raw_fd(fd) }, path })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !create => Ok(None),
            Err(e) => Err(match self.stat(OsStr::new(name)) {
                Ok(Some(st)) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => OutputError::Refused(format!(
                    "{} is a symbolic link: iolab does not write through links in a directory others may write; remove it",
                    path.display()
                )),
                Ok(Some(st)) if st.st_mode & libc::S_IFMT != libc::S_IFDIR => {
                    OutputError::Refused(format!("{} is not a directory: remove it", path.display()))
                }
                _ => OutputError::Io(format!("cannot open {}: {e}", path.display())),
            }),
        }
    }

    /// lstat of `name` in this directory (a link is not followed); None when there is none.
    pub fn stat(&self, name: &OsStr) -> std::io::Result<Option<libc::stat>> {
        let c = cstr(name)?;
        // SAFETY: st is plain data filled by the call; c is NUL-terminated; self.fd is open.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        match check(unsafe { libc::fstatat(self.fd.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) }) {
            Ok(_) => Ok(Some(st)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The owner of the directory itself.
    pub fn owner(&self) -> std::io::Result<libc::uid_t> {
        // SAFETY: st is plain data filled by the call; self.fd is open.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        check(unsafe { libc::fstat(self.fd.as_raw_fd(), &mut st) })?;
        Ok(st.st_uid)
    }

    /// Whether `name` may be replaced here: missing, or a regular file (never a link, a
    /// directory or a device); the error is one line naming `shown`.
    fn replaceable(&self, name: &OsStr, shown: &str) -> Result<Option<libc::stat>, OutputError> {
        let io = |e: std::io::Error| OutputError::Io(format!("cannot write {shown}: {e}"));
        let st = self.stat(name).map_err(io)?;
        match st {
            Some(s) if s.st_mode & libc::S_IFMT == libc::S_IFLNK => Err(OutputError::Refused(link_refusal(shown, &self.path.join(name)))),
            Some(s) if s.st_mode & libc::S_IFMT == libc::S_IFDIR => {
                Err(OutputError::Refused(format!("{shown} is a directory: give a file name")))
            }
            Some(s) if s.st_mode & libc::S_IFMT != libc::S_IFREG => {
                let m = std::fs::symlink_metadata(self.path.join(name)).map_err(io)?;
                Err(OutputError::Refused(format!("{shown} is {}: iolab writes results only to regular files; give a file name", kind(&m))))
            }
            other => Ok(other),
        }
    }

    /// Check that `name` may be replaced here (see `replaceable`), writing nothing.
    pub(crate) fn check_name(&self, name: &OsStr, shown: &str) -> Result<(), OutputError> {
        self.replaceable(name, shown).map(drop)
    }

    /// Make a new temporary file here (0600, O_EXCL, never through a link): its name and file.
    fn temporary(&self) -> std::io::Result<(CString, std::fs::File)> {
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut tries = 0;
        loop {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
            let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let name = cstr(OsStr::new(&format!(".iolab-tmp-{}-{n}-{nanos:08x}", std::process::id())))?;
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
            // SAFETY: name is NUL-terminated and alive for the call; self.fd is open.
            match check(unsafe { libc::openat(self.fd.as_raw_fd(), name.as_ptr(), flags, 0o600 as libc::c_uint) }) {
                // SAFETY: fd was just opened and is owned by nothing else.
                Ok(fd) => return Ok((name, unsafe { std::fs::File::from_raw_fd(fd) })),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && tries < 100 => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    fn unlink(&self, name: &CString) {
        // SAFETY: name is NUL-terminated and alive for the call; self.fd is open.
        unsafe { libc::unlinkat(self.fd.as_raw_fd(), name.as_ptr(), 0) };
    }

    /// Check that `name` could be written here now (it may be replaced, and a file can be
    /// created in the directory), leaving nothing behind. A directory that takes no new file is
    /// refused here: checked before any work, it is the destination given that is wrong.
    pub(crate) fn check_writable(&self, name: &OsStr, shown: &str) -> Result<(), OutputError> {
        self.replaceable(name, shown)?;
        let (tmp, file) = self
            .temporary()
            .map_err(|e| OutputError::Refused(format!("cannot write {shown}: {} is not writable ({e})", self.path.display())))?;
        drop(file);
        self.unlink(&tmp);
        Ok(())
    }

    /// Replace `name` here whole and durably with what `f` writes (`shown` names it in
    /// messages): a temporary file with the mode of the file it replaces (0644 for a new one),
    /// fsync, `renameat` over the name, fsync of the directory. `f`'s own error is the caller's
    /// (what it writes may fail its own way); this one's become it.
    pub(crate) fn write_with<E: From<OutputError>>(
        &self,
        name: &OsStr,
        shown: &str,
        f: impl FnOnce(&mut dyn Write) -> Result<(), E>,
    ) -> Result<(), E> {
        let old = self.replaceable(name, shown)?;
        // The mode of the file replaced, less set-id bits, never wider; results for sharing are
        // readable like any new file.
        let mode = old.map(|s| s.st_mode & 0o777).unwrap_or(0o644);
        let (tmp, file) = self.temporary().map_err(|e| OutputError::Io(format!("cannot write {shown}: {e}")))?;
        let written = self.fill(file, &tmp, name, shown, mode, f);
        if written.is_err() {
            self.unlink(&tmp);
            return written;
        }
        // The rename itself made durable; a directory that cannot be synced (some file systems)
        // still has the file.
        // SAFETY: self.fd is open.
        unsafe { libc::fsync(self.fd.as_raw_fd()) };
        Ok(())
    }

    /// Give the temporary file `tmp` its mode, `f`'s bytes and rename it over `name`.
    fn fill<E: From<OutputError>>(
        &self,
        file: std::fs::File,
        tmp: &CString,
        name: &OsStr,
        shown: &str,
        mode: libc::mode_t,
        f: impl FnOnce(&mut dyn Write) -> Result<(), E>,
    ) -> Result<(), E> {
        let err = |e: std::io::Error| OutputError::Io(format!("cannot write {shown}: {e}"));
        // SAFETY: file's descriptor is open.
        check(unsafe { libc::fchmod(file.as_raw_fd(), mode) }).map_err(err)?;
        let mut w = std::io::BufWriter::new(&file);
        f(&mut w)?;
        w.flush().map_err(err)?;
        drop(w);
        file.sync_all().map_err(err)?;
        let to = cstr(name).map_err(err)?;
        // SAFETY: both names are NUL-terminated and alive for the call; self.fd is open.
        check(unsafe { libc::renameat(self.fd.as_raw_fd(), tmp.as_ptr(), self.fd.as_raw_fd(), to.as_ptr()) }).map_err(err)?;
        Ok(())
    }

    /// The text of `name` if it is a regular file (not a link) owned by this process's user;
    /// None otherwise, or when it cannot be read.
    pub(crate) fn read_own(&self, name: &str) -> Option<String> {
        let c = cstr(OsStr::new(name)).ok()?;
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY;
        // SAFETY: c is NUL-terminated and alive for the call; self.fd is open.
        let fd = check(unsafe { libc::openat(self.fd.as_raw_fd(), c.as_ptr(), flags) }).ok()?;
        // SAFETY: fd was just opened and is owned by nothing else.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        let m = file.metadata().ok()?;
        // SAFETY: geteuid cannot fail.
        if !m.is_file() || m.uid() != unsafe { libc::geteuid() } {
            return None;
        }
        let mut s = String::new();
        std::io::Read::read_to_string(&mut file, &mut s).ok()?;
        Some(s)
    }

    /// Remove the entry `name` from this directory (a link is removed, never followed).
    pub fn remove(&self, name: &str) -> std::io::Result<()> {
        let c = cstr(OsStr::new(name))?;
        // SAFETY: c is NUL-terminated and alive for the call; self.fd is open.
        check(unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) }).map(drop)
    }
}

/// The directory of `p` and the name in it.
fn split(p: &Path) -> Result<(&Path, &OsStr), OutputError> {
    let name = p.file_name().ok_or_else(|| OutputError::Refused(format!("{} names no file: give a file name", p.display())))?;
    Ok((parent(p), name))
}

/// Check before any work that `dest` can be written (its directory exists and takes a new file,
/// or it is a sink that may be written), so a long run is not wasted on a typo and nothing is
/// done for an output iolab will refuse. Every error is a refusal (bad input): nothing is written.
pub(crate) fn check_writable(flag: &str, dest: &str) -> Result<(), OutputError> {
    match destination(flag, dest)? {
        Destination::Stdout => Ok(()),
        // access(2), not open: opening a FIFO for writing waits for its reader.
        Destination::InPlace(p) => {
            let c = cstr(p.as_os_str()).map_err(|_| OutputError::Refused(format!("{flag} {dest}: the name holds a NUL byte")))?;
            // SAFETY: c is a NUL-terminated path alive for the call.
            if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
                return Err(OutputError::Refused(format!("cannot write {flag} {dest}: {}", std::io::Error::last_os_error())));
            }
            Ok(())
        }
        Destination::Replace(p) => {
            let (dir, name) = split(&p).map_err(|e| OutputError::Refused(format!("{flag} {e}")))?;
            let dir = Dir::open(dir).map_err(|e| OutputError::Refused(format!("cannot write {flag} {dest}: {e}")))?;
            dir.check_writable(name, &format!("{flag} {dest}"))
        }
    }
}

/// How long a FIFO may go without a reader before the write is given up.
const FIFO_WAIT: Duration = Duration::from_secs(3);

/// Open the sink `p` for writing without blocking: a FIFO with no reader is retried for
/// `FIFO_WAIT` (an interrupt ends the wait) and then refused.
fn open_sink(p: &Path, dest: &str) -> Result<std::fs::File, OutputError> {
    use std::os::unix::fs::OpenOptionsExt;
    let start = Instant::now();
    loop {
        match std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NOCTTY | libc::O_NONBLOCK).open(p) {
            Ok(file) => {
                // Writes may block again, now that someone reads.
                // SAFETY: file's descriptor is open.
                unsafe {
                    let fl = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
                    libc::fcntl(file.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
                }
                return Ok(file);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                if start.elapsed() >= FIFO_WAIT || crate::cancel::interrupt().is_cancelled() {
                    return Err(OutputError::Refused(format!(
                        "cannot write {dest}: it is a FIFO and no process opened it for reading within {} s; start the reader first",
                        FIFO_WAIT.as_secs()
                    )));
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(OutputError::Io(format!("cannot write {dest}: {e}"))),
        }
    }
}

/// Write `dest` atomically and durably (see the module's comment). `-` is stdout. `f`'s own
/// error is the caller's (a database read while the bytes are made keeps its kind); this
/// module's become it.
pub(crate) fn write_with<E: From<OutputError>>(dest: &str, f: impl FnOnce(&mut dyn Write) -> Result<(), E>) -> Result<(), E> {
    let io = |e: std::io::Error| OutputError::Io(format!("cannot write {dest}: {e}"));
    match destination("output", dest)? {
        Destination::Stdout => {
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            f(&mut lock)?;
            lock.flush().map_err(|e| OutputError::Io(format!("cannot write to stdout: {e}")))?;
        }
        Destination::InPlace(p) => {
            let mut file = open_sink(&p, dest)?;
            // What was opened, not what the path named a moment ago (a link may have changed).
            let m = file.metadata().map_err(io)?;
            if !sink(&m) {
                return Err(OutputError::Refused(refusal("output", dest, &m, "")).into());
            }
            f(&mut file)?;
            file.flush().map_err(io)?;
        }
        Destination::Replace(p) => {
            let (dir, name) = split(&p)?;
            let dir = Dir::open(dir).map_err(|e| OutputError::Refused(format!("cannot write {dest}: {e}")))?;
            dir.write_with(name, dest, f)?;
        }
    }
    Ok(())
}

pub(crate) fn write_bytes(dest: &str, bytes: &[u8]) -> Result<(), OutputError> {
    write_with(dest, |w| w.write_all(bytes).map_err(|e| OutputError::Io(format!("cannot write {dest}: {e}"))))
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
            assert!(check_writable("--json", dest).unwrap_err().to_string().contains(why), "{dest}");
            assert!(write_bytes(dest, b"{}").unwrap_err().to_string().contains(why), "{dest}");
        }
        let link = dir.path().join("full.json");
        std::os::unix::fs::symlink("/dev/full", &link).unwrap();
        let e = check_writable("--json", link.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("a link to /dev/full") && e.contains("1:7"), "{e}");
    }

    #[test]
    fn a_symlink_is_refused_and_its_target_left_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("real.json");
        std::fs::write(&target, "old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink(dir.path().join("none"), &dangling).unwrap();
        for l in [&link, &dangling] {
            let e = check_writable("--csv", l.to_str().unwrap()).unwrap_err().to_string();
            assert!(e.contains("is a symbolic link") && !e.contains('\n'), "{e}");
            let e = write_bytes(l.to_str().unwrap(), b"new").unwrap_err().to_string();
            assert!(e.contains("is a symbolic link") && e.contains(l.to_str().unwrap()), "{e}");
        }
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
        assert_eq!(std::fs::metadata(&target).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(!dir.path().join("none").exists());
        // A directory that is a link is refused too (its last component at least).
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("via")).unwrap();
        let e = write_bytes(dir.path().join("via/x.json").to_str().unwrap(), b"x").unwrap_err().to_string();
        assert!(e.contains("is a symbolic link"), "{e}");
        assert!(std::fs::read_dir(&real).unwrap().next().is_none());
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_new_one_is_0644() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.csv");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4640)).unwrap();
        write_bytes(p.to_str().unwrap(), b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777, 0o640);
        let q = dir.path().join("new.csv");
        write_bytes(q.to_str().unwrap(), b"x").unwrap();
        assert_eq!(std::fs::metadata(&q).unwrap().permissions().mode() & 0o7777, 0o644);
        // A failed write leaves the old file and no temporary file.
        let e: String = write_with(p.to_str().unwrap(), |_| Err("boom".into())).unwrap_err();
        assert_eq!(e, "boom");
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn a_fifo_nobody_reads_is_refused_after_a_short_wait() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: c is a NUL-terminated path alive for the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let start = std::time::Instant::now();
        let e = write_bytes(fifo.to_str().unwrap(), b"{}").unwrap_err().to_string();
        assert!(start.elapsed() < std::time::Duration::from_secs(10), "waited {:?}", start.elapsed());
        assert!(e.contains("FIFO") && e.contains("no process"), "{e}");
        // With a reader, the bytes go through.
        let reader = std::thread::spawn(move || std::fs::read(&fifo).unwrap());
        write_bytes(dir.path().join("fifo").to_str().unwrap(), b"{}").unwrap();
        assert_eq!(reader.join().unwrap(), b"{}");
    }

    #[test]
    fn a_new_file_is_written_whole_and_a_directory_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.json");
        write_bytes(p.to_str().unwrap(), b"abc").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"abc");
        assert!(check_writable("--json", dir.path().to_str().unwrap()).unwrap_err().to_string().contains("is a directory"));
        assert!(check_writable("--json", "/nonexistent-dir/x.json").unwrap_err().to_string().contains("does not exist"));
    }
}
