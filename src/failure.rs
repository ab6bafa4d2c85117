//! How a run can fail, typed: the kind decides the exit code and what a sweep does with it.
//! Kept below the command line so the layers a run goes through (targets, settings) can say
//! which kind their refusals are.

/// What kind of failure a run came to. It decides the exit code and what a sweep does: only
/// "this machine cannot do this configuration" is a skip (docs/safety.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The request is wrong: a bad option, a missing or wrong target, no consent to write.
    /// Exit 2; a sweep stops there (every later run would meet it too), the run left to do.
    Invalid,
    /// This machine cannot do this configuration: no such interface or kernel feature, a queue
    /// that cannot poll, a block size or setting the device does not offer. Exit 2; a sweep
    /// stores it as skipped, with the reason, and goes on.
    Unsupported,
    /// Tried and went wrong: the engine failed, a target could not be made or read. Exit 1; a
    /// sweep stores it as failed, with the error, and goes on.
    Failed,
    /// System settings are left changed: a restore (or a rollback) failed, or an earlier iolab
    /// left them. Exit 1; a sweep stops at once and prints the `iolab restore` command.
    SettingsNotRestored,
    /// Ctrl-C before the run could start. Exit 130.
    Interrupted,
    /// The results database failed while it was opened, read or written: damaged, locked past
    /// the busy timeout, out of space, a PostgreSQL server that cannot be reached (a database
    /// that cannot be used as given is `Invalid`). Exit 3; a sweep stops, the run left to do.
    Store,
    /// A program iolab drives failed or is missing: Slurm's `sbatch`, `scontrol`, `sinfo`,
    /// `squeue` or `sacct` (`iolab fleet`). Exit 4.
    External,
}

/// A run that could not be done or failed.
#[derive(Debug)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure { kind, message: message.into() }
    }
    pub fn invalid(message: String) -> Failure {
        Failure::new(FailureKind::Invalid, message)
    }
    pub fn unsupported(message: String) -> Failure {
        Failure::new(FailureKind::Unsupported, message)
    }
    pub fn failed(message: String) -> Failure {
        Failure::new(FailureKind::Failed, message)
    }
    pub fn external(message: String) -> Failure {
        Failure::new(FailureKind::External, message)
    }
    /// The process exit code for this failure (its kind's: `FailureKind::code`).
    pub fn code(&self) -> i32 {
        self.kind.code()
    }
}

impl FailureKind {
    /// The process exit code of a failure of this kind: 2 bad input or unsupported here, 1 a
    /// run failed or settings left changed, 3 the results database, 4 a program iolab drives
    /// (Slurm), 130 Ctrl-C. README.md and docs/safety.md list them.
    pub fn code(self) -> i32 {
        match self {
            FailureKind::Invalid | FailureKind::Unsupported => 2,
            FailureKind::Failed | FailureKind::SettingsNotRestored => 1,
            FailureKind::Store => 3,
            FailureKind::External => 4,
            FailureKind::Interrupted => 130,
        }
    }
}

/// A layer's error: one line (its `Display`) and the kind of failure it is. Every layer's error
/// type (`DeviceError`, `SettingsError`, `StoreError`, ...) implements it, and one `From` turns
/// any of them into a `Failure` with `?`, its kind kept; a layer adds no conversion of its own.
pub trait Kinded: std::fmt::Display {
    /// What kind of failure this is: it decides the exit code and what a sweep does.
    fn kind(&self) -> FailureKind;
}

impl<E: Kinded> From<E> for Failure {
    fn from(e: E) -> Failure {
        Failure::new(e.kind(), e.to_string())
    }
}

/// `From<E> for String`, the line with its kind left behind, for a layer's error that callers
/// still say inside a message of their own (a `Result<_, String>` reached with `?`): one line,
/// `crate::failure::into_text!(PlanError);`, in the error's own file. (`String` is not this
/// crate's, so no blanket impl can do it; `Failure` keeps the kind, and is what a command returns.)
macro_rules! into_text {
    ($e:ty) => {
        impl From<$e> for String {
            fn from(e: $e) -> String {
                e.to_string()
            }
        }
    };
}
pub(crate) use into_text;

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}
