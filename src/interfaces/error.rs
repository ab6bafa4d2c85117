//! The interfaces' errors, typed by what they mean for a run: options or a job an interface
//! refuses are bad input (exit 2, the run left to do); what this machine, its kernel or a
//! target cannot do for the interface is unsupported here (exit 2, a sweep skips the run); a
//! device or driver that fails while it is set up or given back is a failed run (exit 1, a
//! sweep goes on). Each error is one line.

use crate::failure::{FailureKind, Kinded};

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InterfaceError {
    /// Asked wrongly: an option of another interface or mode, a value it does not take. Bad input.
    #[error("{0}")]
    Invalid(String),
    /// This machine, kernel or target cannot do it: no io_uring or AIO, a ring flag the kernel
    /// refuses, a namespace's block size, no IOMMU. Unsupported here.
    #[error("{0}")]
    Unsupported(String),
    /// The device or its driver failed while it was set up, used or given back. A failed run.
    #[error("{0}")]
    Failed(String),
}

impl Kinded for InterfaceError {
    /// What kind of failure this is: it decides the exit code and what a sweep does.
    fn kind(&self) -> FailureKind {
        match self {
            InterfaceError::Invalid(_) => FailureKind::Invalid,
            InterfaceError::Unsupported(_) => FailureKind::Unsupported,
            InterfaceError::Failed(_) => FailureKind::Failed,
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
            (InterfaceError::Invalid("--sq-cpu only applies with --submit sqpoll".into()), FailureKind::Invalid, 2),
            (InterfaceError::Unsupported("io_uring is disabled".into()), FailureKind::Unsupported, 2),
            (InterfaceError::Failed("the controller did not become ready".into()), FailureKind::Failed, 1),
        ] {
            let f = Failure::from(e);
            assert_eq!((f.kind, f.code()), (kind, code), "{}", f.message);
        }
    }
}
