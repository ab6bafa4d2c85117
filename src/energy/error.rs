//! The energy layer's errors, typed by whose doing they are: an option, a credentials file or
//! a meter log that cannot be used as given is bad input (exit 2); a source this machine does
//! not have (no RAPL, no NVIDIA driver, no ipmitool) is unsupported here; a meter, BMC or PDU
//! iolab asks over the network or through a program that does not answer is external (exit 4);
//! a source there that cannot be read, or a log that gives nothing for a window, is a failure
//! (exit 1). Each error is one line. Which backends measure is decided per run (`probe`,
//! `--require-energy`): an unavailable source is a reason in the record, never an exit of its
//! own, whatever its kind.

use crate::failure::{FailureKind, Kinded};

#[derive(Clone, Debug, thiserror::Error)]
pub enum EnergyError {
    /// Asked wrongly: an option's value, a credentials file, a meter log that is not a regular
    /// file of readings, a source named that is not configured. Bad input.
    #[error("{0}")]
    Invalid(String),
    /// Not on this machine: no powercap RAPL, no perf power PMU, no NVML, no ipmitool. Unsupported here.
    #[error("{0}")]
    Unsupported(String),
    /// A meter iolab asks over the network or through a program (a BMC through ipmitool or
    /// Redfish, a NETIO PDU, a meter's command or socket) cannot be reached or answers wrongly.
    /// External.
    #[error("{0}")]
    Unreachable(String),
    /// The source is there and cannot be read (a counter, a perf event, a sensor), or a meter
    /// log gives no energy for the window asked. Failed.
    #[error("{0}")]
    Failed(String),
}

impl Kinded for EnergyError {
    /// What kind of failure this is: it decides the exit code.
    fn kind(&self) -> FailureKind {
        match self {
            EnergyError::Invalid(_) => FailureKind::Invalid,
            EnergyError::Unsupported(_) => FailureKind::Unsupported,
            EnergyError::Unreachable(_) => FailureKind::External,
            EnergyError::Failed(_) => FailureKind::Failed,
        }
    }
}

impl EnergyError {
    /// The same error, its message given context (the source or device it was about), its kind kept.
    pub(crate) fn context(self, f: impl FnOnce(String) -> String) -> EnergyError {
        match self {
            EnergyError::Invalid(m) => EnergyError::Invalid(f(m)),
            EnergyError::Unsupported(m) => EnergyError::Unsupported(f(m)),
            EnergyError::Unreachable(m) => EnergyError::Unreachable(f(m)),
            EnergyError::Failed(m) => EnergyError::Failed(f(m)),
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
            (EnergyError::Invalid("--netio-outlets '0'".into()), FailureKind::Invalid, 2),
            (EnergyError::Unsupported("no RAPL".into()), FailureKind::Unsupported, 2),
            (EnergyError::Unreachable("the BMC does not answer".into()), FailureKind::External, 4),
            (EnergyError::Failed("energy_uj: not a number".into()), FailureKind::Failed, 1),
        ] {
            let f = Failure::from(e);
            assert_eq!((f.kind, f.code()), (kind, code), "{}", f.message);
        }
    }
}
