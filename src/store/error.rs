//! The store's errors, typed by whose doing they are: a database named that cannot be used as
//! given is bad input (exit 2, as every refusal of the command line); a database that fails
//! while it is read or written (damaged, locked past the busy timeout, a full disk, a server
//! that cannot be reached) is the store's own kind (exit 3). Each error is one line naming the
//! database (its URL's password hidden).

use crate::failure::{FailureKind, Kinded};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database named cannot be used as given: not a regular file, not SQLite, not
    /// iolab's, from a newer iolab, none there, a directory that cannot be opened, a login the
    /// server refuses, a record that cannot be stored. Bad input.
    #[error("{0}")]
    Refused(String),
    /// The database failed while it was opened, read or written: damaged, locked past the busy
    /// timeout, out of space, a server that cannot be reached or that failed a statement.
    #[error("{0}")]
    Failed(String),
}

impl Kinded for StoreError {
    /// What kind of failure this is: it decides the exit code.
    fn kind(&self) -> FailureKind {
        match self {
            StoreError::Refused(_) => FailureKind::Invalid,
            StoreError::Failed(_) => FailureKind::Store,
        }
    }
}

impl StoreError {
    /// The same error, its message given context (`results database X: ...`), its kind kept.
    pub fn context(self, f: impl FnOnce(String) -> String) -> StoreError {
        match self {
            StoreError::Refused(m) => StoreError::Refused(f(m)),
            StoreError::Failed(m) => StoreError::Failed(f(m)),
        }
    }
}
