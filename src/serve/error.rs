//! The server's and the NBD client's errors, typed by whose doing they are: a configuration or
//! a request the server or the kernel refuses is bad input (exit 2, nothing changed); a kernel
//! without the NBD client is unsupported here (exit 2); a socket, the netlink conversation or
//! the connection journal failing is a failed command (exit 1). Each error is one line.

use crate::failure::{FailureKind, Kinded};

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Asked wrongly: a listen address or connection count refused, an export the server
    /// refuses, a server that cannot be reached, a device already connected. Bad input.
    #[error("{0}")]
    Invalid(String),
    /// This kernel has no NBD client. Unsupported here.
    #[error("{0}")]
    Unsupported(String),
    /// A netlink socket, the kernel's answer or the journal of connected devices failed; an
    /// interface could not be opened for a connection. A failed command.
    #[error("{0}")]
    Failed(String),
}

impl Kinded for ServeError {
    /// What kind of failure this is: it decides the exit code.
    fn kind(&self) -> FailureKind {
        match self {
            ServeError::Invalid(_) => FailureKind::Invalid,
            ServeError::Unsupported(_) => FailureKind::Unsupported,
            ServeError::Failed(_) => FailureKind::Failed,
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
            (ServeError::Invalid("--connections 0".into()), FailureKind::Invalid, 2),
            (ServeError::Unsupported("no nbd".into()), FailureKind::Unsupported, 2),
            (ServeError::Failed("cannot write the journal".into()), FailureKind::Failed, 1),
        ] {
            let f = Failure::from(e);
            assert_eq!((f.kind, f.code()), (kind, code), "{}", f.message);
        }
    }
}
