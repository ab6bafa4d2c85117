//! The settings journal: the original value of every setting iolab changed, written durably
//! (temp file, fsync, rename, fsync of the directory) before the first change, so that
//! `iolab restore` can undo what a killed process left behind. One JSON file for every iolab
//! of the machine, guarded by an advisory lock on `<journal>.lock` held only for each
//! read-modify-write; each entry names the process that owns it, so two iolabs changing
//! different settings never wait for each other.
use super::{Setting, SettingsError};
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// 2: each entry carries its owner (settings are owned per setting, not per machine); 1 had one
/// owner for the whole journal, and is still read (its owner given to each entry).
pub const JOURNAL_VERSION: u32 = 2;

/// The journal file as stored.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Journal {
    pub version: u32,
    pub entries: Vec<JournalEntry>,
}

/// A version-1 journal: one owner for every entry.
#[derive(Deserialize)]
struct JournalV1 {
    #[serde(flatten)]
    owner: Holder,
    entries: Vec<JournalEntry>,
}

/// The process that changed a setting.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    /// Its start time in clock ticks since boot (/proc/<pid>/stat field 22), to tell a live
    /// owner from a reused pid.
    #[serde(default)]
    pub pid_start_ticks: Option<u64>,
    /// When it recorded its first change, seconds since the Unix epoch.
    #[serde(default)]
    pub started_at: u64,
    /// Its command line, for the user.
    #[serde(default)]
    pub command: String,
}

/// One changed file.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct JournalEntry {
    /// Who changed it (a version-1 journal's one owner, when read from one).
    #[serde(default)]
    pub owner: Holder,
    /// Which `AppliedGuard` of the owner made the change.
    pub guard: u64,
    pub setting: Setting,
    /// The block device, None for the governor.
    #[serde(default)]
    pub device: Option<String>,
    /// Who the file belongs to, for messages: the device ("nvme0n1") or the CPU ("cpu3").
    pub target: String,
    /// The sysfs file written.
    pub path: PathBuf,
    /// The value before iolab changed it (for the scheduler: the selected one's name); for a
    /// setting shared by several owners (a sysctl), the value before the first of them.
    pub original: String,
    /// The value iolab wrote (or found, where a sharing owner's value was low enough); where the
    /// kernel clamped what was asked (a CPU frequency), the value in force.
    pub new: String,
    /// What was asked, where the kernel put another value in force (`new`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<String>,
}

impl JournalEntry {
    pub fn label(&self) -> String {
        if self.setting.is_sysctl() {
            return format!("{}.{}", self.target, self.setting.name());
        }
        format!("{} {}", self.target, self.setting.name())
    }

    /// Who holds this entry, as seen from this process.
    pub fn owner(&self) -> Owner {
        self.owner.state()
    }

    /// Whether `other` is the same change: the same owner's same guard, on the same file.
    pub fn same(&self, other: &JournalEntry) -> bool {
        self.owner.pid == other.owner.pid && self.guard == other.guard && self.path == other.path
    }
}

/// Who holds a journal's entry, as seen from this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    Us,
    AliveOther(u32),
    Dead(u32),
}

impl Holder {
    /// This process.
    pub fn us() -> Holder {
        static US: std::sync::OnceLock<Holder> = std::sync::OnceLock::new();
        US.get_or_init(|| {
            let pid = std::process::id();
            Holder {
                pid,
                pid_start_ticks: proc_start_ticks(pid),
                started_at: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
                command: command(std::env::args_os().map(|a| a.to_string_lossy().into_owned())),
            }
        })
        .clone()
    }

    pub fn state(&self) -> Owner {
        let alive = pid_alive(self.pid, self.pid_start_ticks);
        if alive && self.pid == std::process::id() {
            Owner::Us
        } else if alive {
            Owner::AliveOther(self.pid)
        } else {
            Owner::Dead(self.pid)
        }
    }

    /// "iolab pid 4242 (iolab suite run S1)", for messages.
    pub fn describe(&self) -> String {
        match self.command.trim() {
            "" => format!("iolab pid {}", self.pid),
            c => format!("iolab pid {} ({c})", self.pid),
        }
    }
}

impl Journal {
    /// A new, empty journal.
    pub fn new() -> Journal {
        Journal { version: JOURNAL_VERSION, entries: Vec::new() }
    }
}

/// Start time of a process in clock ticks since boot, from /proc/<pid>/stat.
/// A command line as the journal keeps it (a file others may read): one line, every password a
/// database's URL or conninfo carries hidden (`crate::secret`).
fn command(args: impl IntoIterator<Item = String>) -> String {
    crate::secret::redact_args(args).join(" ")
}

pub(crate) fn proc_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts at field 3 (state); starttime is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether `pid` is alive and (when both are known) started at `start_ticks`.
pub fn pid_alive(pid: u32, start_ticks: Option<u64>) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid as i32, 0) };
    if rc != 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EPERM) {
        return false;
    }
    // A zombie never restores anything: an aborted iolab is one until its parent reaps it, and
    // its restore (`iolab restore --after`) must not wait for that.
    if proc_state(pid).is_some_and(|s| s == 'Z' || s == 'X') {
        return false;
    }
    match (start_ticks, proc_start_ticks(pid)) {
        (Some(want), Some(got)) => want == got,
        _ => true,
    }
}

/// The state letter of a process (R, S, Z, ...), from /proc/<pid>/stat.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().next()?.chars().next()
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s: OsString = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn parent_dir(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn fsync_dir(dir: &Path) -> Result<(), SettingsError> {
    let d = File::open(dir).map_err(|e| SettingsError::Failed(format!("cannot open {} to sync it: {e}", dir.display())))?;
    d.sync_all().map_err(|e| SettingsError::Failed(format!("cannot sync directory {}: {e}", dir.display())))
}

/// An exclusive lock on the journal, held until dropped.
pub struct JournalLock {
    _file: File,
}

/// Take the journal lock, creating the journal's directory if needed.
pub fn lock(journal: &Path) -> Result<JournalLock, SettingsError> {
    lock_with(journal, libc::LOCK_EX).map(|l| l.expect("a blocking lock is taken"))
}

/// The journal lock if it is free now; None when it is held (never waits).
pub(crate) fn try_lock(journal: &Path) -> Result<Option<JournalLock>, SettingsError> {
    lock_with(journal, libc::LOCK_EX | libc::LOCK_NB)
}

fn lock_with(journal: &Path, how: libc::c_int) -> Result<Option<JournalLock>, SettingsError> {
    let dir = parent_dir(journal);
    std::fs::create_dir_all(&dir).map_err(|e| {
        SettingsError::Failed(format!(
            "cannot create the settings journal directory {}: {e} (set IOLAB_JOURNAL to a writable path)",
            dir.display()
        ))
    })?;
    let lp = with_suffix(journal, ".lock");
    let f = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&lp).map_err(|e| {
        SettingsError::Failed(format!("cannot open the settings journal lock {}: {e} (set IOLAB_JOURNAL to a writable path)", lp.display()))
    })?;
    loop {
        // SAFETY: f is an open file descriptor.
        let rc = unsafe { libc::flock(f.as_raw_fd(), how) };
        if rc == 0 {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock {
            return Ok(None);
        }
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(SettingsError::Failed(format!("cannot lock {}: {e}", lp.display())));
        }
    }
    Ok(Some(JournalLock { _file: f }))
}

/// Read the journal; None when there is none.
pub fn load(journal: &Path) -> Result<Option<Journal>, SettingsError> {
    let text = match std::fs::read_to_string(journal) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(SettingsError::Failed(format!("cannot read the settings journal {}: {e}", journal.display()))),
    };
    if text.trim().is_empty() {
        return Ok(None);
    }
    let damaged = |e: serde_json::Error| {
        SettingsError::Failed(format!(
            "the settings journal {} is damaged ({e}): put back the values it lists by hand, then delete it",
            journal.display()
        ))
    };
    let mut j: Journal = serde_json::from_str(&text).map_err(damaged)?;
    if j.version <= 1 {
        // Version 1: the owner is the journal's, given here to each entry.
        let v1: JournalV1 = serde_json::from_str(&text).map_err(damaged)?;
        j.entries = v1.entries.into_iter().map(|e| JournalEntry { owner: v1.owner.clone(), ..e }).collect();
        j.version = JOURNAL_VERSION;
    }
    if j.version > JOURNAL_VERSION {
        return Err(SettingsError::Failed(format!(
            "the settings journal {} has version {} (this iolab knows {JOURNAL_VERSION}): restore with a newer iolab",
            journal.display(),
            j.version
        )));
    }
    Ok(Some(j))
}

/// Write the journal atomically and durably: temp file + fsync + rename + fsync of the directory.
/// An empty journal removes the file (durably too).
pub fn store(journal: &Path, j: &Journal) -> Result<(), SettingsError> {
    let j = &Journal { version: JOURNAL_VERSION, entries: j.entries.clone() };
    let dir = parent_dir(journal);
    if j.entries.is_empty() {
        match std::fs::remove_file(journal) {
            Ok(()) => return fsync_dir(&dir),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(SettingsError::Failed(format!("cannot remove the settings journal {}: {e}", journal.display()))),
        }
    }
    let name = journal.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "journal".into());
    let tmp = dir.join(format!(".{name}.tmp.{}", std::process::id()));
    let text = serde_json::to_string_pretty(j).map_err(|e| SettingsError::Failed(format!("cannot encode the settings journal: {e}")))?;
    let write = || -> std::io::Result<()> {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, journal)
    };
    if let Err(e) = write() {
        let _ = std::fs::remove_file(&tmp);
        return Err(SettingsError::Failed(format!(
            "cannot write the settings journal {}: {e} (set IOLAB_JOURNAL to a writable path)",
            journal.display()
        )));
    }
    fsync_dir(&dir)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_journal_keeps_no_password_of_the_command_line() {
        let argv = ["iolab", "sweep", "--scheduler", "none", "--db", "postgresql://me:hunter2@db.lab/iolab?password=hunter3", "plan.toml"];
        let line = super::command(argv.map(String::from));
        assert_eq!(line, "iolab sweep --scheduler none --db postgresql://me:***@db.lab/iolab?password=*** plan.toml");
    }
}
