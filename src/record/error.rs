//! The record layer's errors: a run record that cannot be made from what was given. fio's JSON
//! output imported (`iolab import`) that is not fio's, has no jobs, or a job iolab cannot take is
//! bad input (exit 2, nothing stored). Each error is one line naming the file.

use crate::failure::{FailureKind, Kinded};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// An imported file that cannot be a record: not JSON, not fio's output, no jobs, a job's
    /// options iolab refuses or its clones reported one by one. Bad input.
    #[error("{0}")]
    Import(String),
}

impl Kinded for RecordError {
    /// What kind of failure this is: bad input.
    fn kind(&self) -> FailureKind {
        match self {
            RecordError::Import(_) => FailureKind::Invalid,
        }
    }
}
