//! The settings layer's errors, typed by what they mean for a run: a setting asked for wrongly
//! is bad input (exit 2); one this machine does not offer is unsupported here (a sweep skips the
//! run); a change that could not be made, with nothing left changed, is a failed run (exit 1);
//! settings left changed (a rollback or restore failed, or an earlier iolab left them) stop a
//! sweep at once (exit 1, `iolab restore`). Each error is one line.

use crate::failure::{FailureKind, Kinded};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A setting asked for wrongly: no such setting, not `name=value`. Bad input.
    #[error("{0}")]
    Invalid(String),
    /// This machine does not offer it: no such attribute, a value the device or kernel does
    /// not take. Unsupported here.
    #[error("{0}")]
    Unsupported(String),
    /// Not made, and nothing left changed: a write refused and rolled back, a setting another
    /// iolab held past the wait, a journal that cannot be read; inside the layer, a file that
    /// cannot be read or written, a value the kernel did not take. A failed run.
    #[error("{0}")]
    Failed(String),
    /// System settings are left changed: no run may start until `iolab restore` puts them back.
    #[error("{0}")]
    NotRestored(String),
}

impl Kinded for SettingsError {
    /// What kind of failure this is: it decides the exit code and what a sweep does.
    fn kind(&self) -> FailureKind {
        match self {
            SettingsError::Invalid(_) => FailureKind::Invalid,
            SettingsError::Unsupported(_) => FailureKind::Unsupported,
            SettingsError::Failed(_) => FailureKind::Failed,
            SettingsError::NotRestored(_) => FailureKind::SettingsNotRestored,
        }
    }
}

// For the callers that keep a setting's refusal as a line of text (a set-up not applied, said in
// the record): the line, the kind left behind.
crate::failure::into_text!(SettingsError);

impl SettingsError {
    /// The same error, its message given context (the device or controller it was about), its
    /// kind kept.
    pub(crate) fn context(self, f: impl FnOnce(String) -> String) -> SettingsError {
        match self {
            SettingsError::Invalid(m) => SettingsError::Invalid(f(m)),
            SettingsError::Unsupported(m) => SettingsError::Unsupported(f(m)),
            SettingsError::Failed(m) => SettingsError::Failed(f(m)),
            SettingsError::NotRestored(m) => SettingsError::NotRestored(f(m)),
        }
    }

    /// The same line, as what this machine does not offer (`Settings::check`: a change this
    /// machine cannot make as asked, for whatever reason, is a run skipped, not a sweep stopped).
    pub(crate) fn unsupported(self) -> SettingsError {
        SettingsError::Unsupported(self.into_message())
    }

    /// The line, its kind left behind (a refusal said inside a longer message).
    pub(crate) fn into_message(self) -> String {
        match self {
            SettingsError::Invalid(m) | SettingsError::Unsupported(m) | SettingsError::Failed(m) | SettingsError::NotRestored(m) => m,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Failure;

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
