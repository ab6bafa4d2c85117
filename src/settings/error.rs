//! The settings layer's errors, typed by what they mean for a run: a setting asked for wrongly
//! is bad input (exit 2); one this machine does not offer is unsupported here (a sweep skips the
//! run); a change that could not be made, with nothing left changed, is a failed run (exit 1);
//! settings left changed (a rollback or restore failed, or an earlier iolab left them) stop a
//! sweep at once (exit 1, `iolab restore`). Each error is one line.

use crate::failure::{Failure, FailureKind};

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// A setting asked for wrongly: no such setting, not `name=value`. Bad input.
    #[error("{0}")]
    Invalid(String),
    /// This machine does not offer it: no such attribute, a value the device or kernel does
    /// not take. Unsupported here.
    #[error("{0}")]
    Unsupported(String),
    /// Not made, and nothing left changed: a write refused and rolled back, a setting another
    /// iolab held past the wait, a journal that cannot be read. A failed run.
    #[error("{0}")]
    Failed(String),
    /// System settings are left changed: no run may start until `iolab restore` puts them back.
    #[error("{0}")]
    NotRestored(String),
}

impl SettingsError {
    /// What kind of failure this is: it decides the exit code and what a sweep does.
    pub fn kind(&self) -> FailureKind {
        match self {
            SettingsError::Invalid(_) => FailureKind::Invalid,
            SettingsError::Unsupported(_) => FailureKind::Unsupported,
            SettingsError::Failed(_) => FailureKind::Failed,
            SettingsError::NotRestored(_) => FailureKind::SettingsNotRestored,
        }
    }
}

impl From<SettingsError> for Failure {
    fn from(e: SettingsError) -> Failure {
        Failure::new(e.kind(), e.to_string())
    }
}

/// For the callers that keep a setting's refusal as a line of text (a set-up not applied, said
/// in the record): the message, the kind left behind. A run turns a `SettingsError` into its
/// exit code through `Failure`, which keeps it.
impl From<SettingsError> for String {
    fn from(e: SettingsError) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_keeps_its_kind_into_a_failure() {
        for (e, kind, code) in [
            (SettingsError::Invalid("bogus=1".into()), FailureKind::Invalid, 2),
            (SettingsError::Unsupported("no such scheduler".into()), FailureKind::Unsupported, 2),
            (SettingsError::Failed("rolled back".into()), FailureKind::Failed, 1),
            (SettingsError::NotRestored("run `iolab restore`".into()), FailureKind::SettingsNotRestored, 1),
        ] {
            let f = Failure::from(e);
            assert_eq!((f.kind, f.code()), (kind, code), "{}", f.message);
        }
    }
}
