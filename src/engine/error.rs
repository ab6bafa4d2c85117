//! The engine's errors, typed by the phase that failed. Every one is a failed run (exit 1, a
//! sweep stores it and goes on): what a job may ask was checked before the engine was called,
//! and a cancel that stopped it is the caller's to say (`session` makes it an interruption).
//! Each error is one line.

use crate::failure::{FailureKind, Kinded};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// A worker could not be prepared or started: a thread not started or not pinned, its
    /// buffers, its workload stream, the interface not set up over the targets; or another
    /// member of its group could not prepare, so none ran. A failed run.
    #[error("{0}")]
    Prepare(String),
    /// The run's I/O failed (a request the loop could not go on from). A failed run.
    #[error("{0}")]
    Io(String),
    /// A worker thread panicked (debug builds; release builds abort). A failed run.
    #[error("{0}")]
    Panicked(String),
    /// The file set could not be made, written, synced or run through the interface. A failed run.
    #[error("{0}")]
    FileSet(String),
}

impl Kinded for EngineError {
    /// What kind of failure this is: a failed run, whichever phase it was.
    fn kind(&self) -> FailureKind {
        match self {
            EngineError::Prepare(_) | EngineError::Io(_) | EngineError::Panicked(_) | EngineError::FileSet(_) => FailureKind::Failed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Failure;

    #[test]
    fn each_error_is_a_failed_run_and_keeps_its_line() {
        for e in [
            EngineError::Prepare("cannot pin to CPU 7".into()),
            EngineError::Io("EIO at offset 0".into()),
            EngineError::Panicked("a worker thread panicked".into()),
            EngineError::FileSet("cannot create file 0 of the set".into()),
        ] {
            let line = e.to_string();
            let f = Failure::from(e);
            assert_eq!((f.kind, f.code(), f.message), (FailureKind::Failed, 1, line));
        }
    }
}
