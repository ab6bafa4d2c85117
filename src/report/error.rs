//! The report's errors: where it is written (`--out`) cannot be used as given (a link, not a
//! directory, a name there that cannot be replaced), or a file name the report would write is
//! unsafe or not unique: bad input (exit 2), nothing is written while any name is refused; a
//! file that cannot be written, synced or renamed: a failed command (exit 1), as `output`'s
//! `OutputError` says. Each error is one line naming the path.

use crate::failure::{FailureKind, Kinded};
use crate::output::OutputError;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    /// `--out`, or a name under it, cannot be used as asked. Bad input.
    #[error("{0}")]
    Out(String),
    /// A file under `--out` could not be written, synced or renamed. A failed command.
    #[error("{0}")]
    Io(String),
    /// A figure's or table's file name is too long, unsafe or not unique. Bad input.
    #[error("{0}")]
    Name(String),
}

impl Kinded for ReportError {
    /// What kind of failure this is: bad input, as every refusal of where to write.
    fn kind(&self) -> FailureKind {
        match self {
            ReportError::Out(_) | ReportError::Name(_) => FailureKind::Invalid,
            ReportError::Io(_) => FailureKind::Failed,
        }
    }
}

impl From<OutputError> for ReportError {
    /// The output's refusal or failure, its kind kept.
    fn from(e: OutputError) -> ReportError {
        match e {
            OutputError::Refused(m) => ReportError::Out(m),
            OutputError::Io(m) => ReportError::Io(m),
        }
    }
}

impl ReportError {
    /// The same error, its message given context (`--out: ...`), its kind kept.
    pub(crate) fn context(self, f: impl FnOnce(String) -> String) -> ReportError {
        match self {
            ReportError::Out(m) => ReportError::Out(f(m)),
            ReportError::Name(m) => ReportError::Name(f(m)),
            ReportError::Io(m) => ReportError::Io(f(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Failure;

    #[test]
    fn an_output_error_keeps_its_kind_into_a_report_error() {
        for (e, code) in [(OutputError::Refused("a link".into()), 2), (OutputError::Io("ENOSPC".into()), 1)] {
            let f = Failure::from(ReportError::from(e));
            assert_eq!(f.code(), code, "{}", f.message);
        }
    }
}
