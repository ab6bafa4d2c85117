//! What a crash leaves changed. Release builds abort on panic, so no `AppliedGuard` drop runs:
//! a panic hook puts back the changes this process journaled. An abort that is not a panic
//! (allocation failure, `kill -ABRT`) can only be told: restoring from a signal handler could
//! deadlock on the allocator, so the handler names `iolab restore` and lets the process die.
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Set while this process has changes in the journal that it has not put back.
static ARMED: AtomicBool = AtomicBool::new(false);
static JOURNAL: Mutex<Option<PathBuf>> = Mutex::new(None);

const HINT: &str = "run `iolab restore` to put them back";

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
            Some(Ok(lines)) if !lines.is_empty() => {
                eprintln!("iolab: crashed with system settings changed; put back: {}", lines.join("; "))
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => eprintln!("iolab: crashed with system settings changed and could not put them back ({e}): {HINT}"),
            None => eprintln!("iolab: crashed with system settings changed: {HINT}"),
        }
    }));
    // SAFETY: the handler only calls write(2), signal(2) and raise(3), all async-signal-safe.
    unsafe { libc::signal(libc::SIGABRT, on_abort as extern "C" fn(libc::c_int) as libc::sighandler_t) };
}

extern "C" fn on_abort(_: libc::c_int) {
    if ARMED.load(Ordering::SeqCst) {
        const MSG: &[u8] = b"iolab: aborted with system settings changed: run `iolab restore` to put them back\n";
        // SAFETY: a static buffer written to stderr; the default action then ends the process.
        unsafe {
            libc::write(2, MSG.as_ptr().cast(), MSG.len());
        }
    }
    // SAFETY: restore the default action and re-raise, so the process dies by SIGABRT as asked.
    unsafe {
        libc::signal(libc::SIGABRT, libc::SIG_DFL);
        libc::raise(libc::SIGABRT);
    }
}
