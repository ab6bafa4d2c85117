//! Cancellation: a request to stop early, handed to whatever takes long. The engine's
//! coordinating thread checks it every ~20 ms and stops the workers; filling the temporary
//! target and measuring the idle baseline check it as they go. Ctrl-C and SIGTERM set the
//! process's one flag through [`install_interrupt_handler`]; tests hand in their own.
use std::sync::atomic::{AtomicBool, Ordering};

/// A borrowed stop flag: set it (from anywhere) and whatever was handed this stops cleanly,
/// keeping what it measured so far.
#[derive(Clone, Copy, Debug)]
pub struct Cancel<'a>(&'a AtomicBool);

impl<'a> Cancel<'a> {
    pub fn new(flag: &'a AtomicBool) -> Cancel<'a> {
        Cancel(flag)
    }

    pub(crate) fn is_cancelled(self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    #[cfg(test)]
    pub(crate) fn cancel(self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// The signal handler's flag: a handler may only store to an atomic (async-signal-safe), so
/// this one is static. Nothing else names it; everyone else is handed a [`Cancel`].
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// The flag Ctrl-C sets once [`install_interrupt_handler`] has run (before that, never set).
pub fn interrupt() -> Cancel<'static> {
    Cancel(&INTERRUPTED)
}

/// Make Ctrl-C (and SIGTERM) stop the run cleanly instead of killing it (results so far are
/// kept); returns the cancellation the handler sets, to hand to what should stop.
pub fn install_interrupt_handler() -> Cancel<'static> {
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_interrupt as extern "C" fn(libc::c_int) as libc::sighandler_t);
    }
    interrupt()
}
