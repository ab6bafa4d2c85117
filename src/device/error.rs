//! The device layer's errors, typed by whose doing they are: a target that cannot be used as
//! asked is bad input (exit 2, the run left to do); what the device or file system cannot do is
//! unsupported here (a sweep skips the run); a device that fails while it is read is a failed
//! run (exit 1, a sweep goes on). Each error is one line naming the target.

use crate::failure::{FailureKind, Kinded};

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeviceError {
    /// The target cannot be used as asked: none there, the wrong kind, refused by the
    /// write-safety rules (in use, not named with `--destructive`), a range outside it, a file
    /// that cannot be opened. Bad input.
    #[error("{0}")]
    Refused(String),
    /// The device or file system cannot do what the run asks (O_DIRECT, its block size).
    /// Unsupported here.
    #[error("{0}")]
    Unsupported(String),
    /// The device failed while it was read (its size, its NVMe namespace). A failed run.
    #[error("{0}")]
    Io(String),
}

impl Kinded for DeviceError {
    /// What kind of failure this is: it decides the exit code and what a sweep does.
    fn kind(&self) -> FailureKind {
        match self {
            DeviceError::Refused(_) => FailureKind::Invalid,
            DeviceError::Unsupported(_) => FailureKind::Unsupported,
            DeviceError::Io(_) => FailureKind::Failed,
        }
    }
}

impl DeviceError {
    /// The same error, its message given context (the target it was about), its kind kept.
    pub(crate) fn context(self, f: impl FnOnce(String) -> String) -> DeviceError {
        match self {
            DeviceError::Refused(m) => DeviceError::Refused(f(m)),
            DeviceError::Unsupported(m) => DeviceError::Unsupported(f(m)),
            DeviceError::Io(m) => DeviceError::Io(f(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::Failure;

    #[test]
    fn each_error_keeps_its_kind_into_a_failure() {
        for (e, code) in [
            (DeviceError::Refused("in use".into()), 2),
            (DeviceError::Unsupported("no O_DIRECT".into()), 2),
            (DeviceError::Io("cannot read the size".into()), 1),
        ] {
            let kind = e.kind();
            let f = Failure::from(e);
            assert_eq!((f.kind, f.code()), (kind, code), "{}", f.message);
        }
        assert_eq!(DeviceError::Unsupported("x".into()).kind(), FailureKind::Unsupported);
    }
}
