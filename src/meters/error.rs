//! The meters layer's errors, typed by whose doing they are, as the device layer's are: a
//! profiler this kernel cannot give (tracefs not mounted, no tracepoint of the I/O stack, a perf
//! event refused) is unsupported here; one whose opened events cannot be set up (a ring that
//! cannot be mapped or shared) is a failure. Each error is one line, and the run's record keeps
//! it as the profile's `unavailable` reason.

use crate::failure::{FailureKind, Kinded};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MetersError {
    /// What the meter needs is not there: tracefs not mounted, no tracepoint of the I/O stack.
    /// Unsupported here.
    #[error("{0}")]
    Unavailable(String),
    /// The kernel refused to open an event (`perf_event_open`), even with
    /// `kernel.perf_event_paranoid` lowered where that would help. Unsupported here.
    #[error("{0}")]
    Refused(String),
    /// An opened event could not be set up: its ring not mapped, or not shared. A failed run.
    #[error("{0}")]
    Io(String),
}

impl Kinded for MetersError {
    /// What kind of failure this is: it decides the exit code and what a sweep does.
    fn kind(&self) -> FailureKind {
        match self {
            MetersError::Unavailable(_) | MetersError::Refused(_) => FailureKind::Unsupported,
            MetersError::Io(_) => FailureKind::Failed,
        }
    }
}

impl MetersError {
    /// The same error, its message given context (the event it was about), its kind kept.
    pub(crate) fn context(self, f: impl FnOnce(String) -> String) -> MetersError {
        match self {
            MetersError::Unavailable(m) => MetersError::Unavailable(f(m)),
            MetersError::Refused(m) => MetersError::Refused(f(m)),
            MetersError::Io(m) => MetersError::Io(f(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Failure;

    #[test]
    fn each_error_keeps_its_kind_and_its_line_into_a_failure() {
        for (e, kind, code) in [
            (MetersError::Unavailable("tracefs is not mounted at /x".into()), FailureKind::Unsupported, 2),
            (MetersError::Refused("perf_event_open of a tracepoint failed: EACCES".into()), FailureKind::Unsupported, 2),
            (MetersError::Io("mapping a tracepoint ring failed: ENOMEM".into()), FailureKind::Failed, 1),
        ] {
            let line = e.to_string();
            assert_eq!(e.kind(), kind);
            let f = Failure::from(e);
            assert_eq!((f.kind, f.code(), f.message), (kind, code, line));
        }
    }
}
