//! What a crash leaves changed. Release builds abort on panic, so no `AppliedGuard` drop runs:
//! a panic hook puts back the changes this process journaled. An abort that is not a panic
//! (allocation failure, `kill -ABRT`) cannot restore in its signal handler (the allocator may be
//! mid-call), so the handler starts `iolab restore --after PID`, which waits for this process to
//! end and restores from the journal; it prints the `iolab restore` command when that cannot
//! start. The handler only makes async-signal-safe calls with what `install` prepared.
use std::ffi::{c_char, CString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Set while this process has changes in the journal that it has not put back.
static ARMED: AtomicBool = AtomicBool::new(false);
static JOURNAL: Mutex<Option<PathBuf>> = Mutex::new(None);

const HINT: &str = "run `iolab restore` to put them back";
const RESTORING: &[u8] =
    b"iolab: aborted with system settings changed: restoring them from the journal (if that fails, run `iolab restore`)\n";
const ABORT_HINT: &[u8] = b"iolab: aborted with system settings changed: run `iolab restore` to put them back\n";

/// The restore command an abort starts, built before any abort can happen.
struct Prepared {
    exe: CString,
    _args: Vec<CString>,
    argv: Vec<*const c_char>,
}
// SAFETY: the pointers point into `_args`, never changed after `install`.
unsafe impl Sync for Prepared {}
unsafe impl Send for Prepared {}

static PREPARED: std::sync::OnceLock<Prepared> = std::sync::OnceLock::new();

pub(super) fn arm(journal: &Path) {
    if let Ok(mut j) = JOURNAL.lock() {
        *j = Some(journal.to_path_buf());
    }
    ARMED.store(true, Ordering::SeqCst);
}

pub(super) fn disarm() {
    ARMED.store(false, Ordering::SeqCst);
}

/// Install the panic hook (after the default one, which prints the panic) and the SIGABRT
/// handler. Call once, early in `main`.
pub fn install() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        if !ARMED.swap(false, Ordering::SeqCst) {
            return;
        }
        // try_lock: the panic may have happened while this thread held it.
        let journal = JOURNAL.try_lock().ok().and_then(|j| j.clone());
        match journal.map(|j| super::restore_own_after_crash(&j)) {
            Some(Ok((lines, left))) => {
                if !lines.is_empty() {
                    eprintln!("iolab: crashed with system settings changed; put back: {}", lines.join("; "));
                }
                if left {
                    // The abort that follows starts `iolab restore --after`, which binds it back.
                    ARMED.store(true, Ordering::SeqCst);
                    eprintln!("iolab: the NVMe controller taken from the kernel is given back once this process has ended");
                }
            }
            Some(Err(e)) => eprintln!("iolab: crashed with system settings changed and could not put them back ({e}): {HINT}"),
            None => eprintln!("iolab: crashed with system settings changed: {HINT}"),
        }
    }));
    let pid = std::process::id().to_string();
    let args: Vec<CString> = ["iolab", "restore", "--after", &pid].iter().map(|a| CString::new(*a).expect("no NUL")).collect();
    let mut argv: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let _ = PREPARED.set(Prepared { exe: CString::new("/proc/self/exe").expect("no NUL"), _args: args, argv });
    // SAFETY: the handler only calls write(2), clone(2), execv(3), _exit(2), signal(2) and
    // raise(3), all async-signal-safe.
    unsafe { libc::signal(libc::SIGABRT, on_abort as extern "C" fn(libc::c_int) as libc::sighandler_t) };
}

extern "C" fn on_abort(_: libc::c_int) {
    if ARMED.load(Ordering::SeqCst) {
        match PREPARED.get() {
            Some(p) => {
                say(RESTORING);
                // A bare clone: fork without the atfork handlers, which take malloc's locks.
                // SAFETY: the child only calls execv, write and _exit.
                let pid = unsafe { libc::syscall(libc::SYS_clone, libc::SIGCHLD as libc::c_long, 0, 0, 0, 0) } as libc::pid_t;
                if pid == 0 {
                    unsafe { libc::execv(p.exe.as_ptr(), p.argv.as_ptr()) };
                    say(ABORT_HINT);
                    unsafe { libc::_exit(127) };
                }
                if pid < 0 {
                    say(ABORT_HINT);
                }
            }
            None => say(ABORT_HINT),
        }
    }
    // SAFETY: restore the default action and re-raise, so the process dies by SIGABRT as asked.
    unsafe {
        libc::signal(libc::SIGABRT, libc::SIG_DFL);
        libc::raise(libc::SIGABRT);
    }
}

fn say(msg: &[u8]) {
    // SAFETY: write(2) of a static buffer.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

/// Wait (at most `limit`) for process `pid` to end: the aborting iolab whose settings a restore
/// process started by it puts back.
pub(crate) fn wait_for_exit(pid: u32, limit: std::time::Duration) {
    let deadline = std::time::Instant::now() + limit;
    while super::pid_alive(pid, None) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
