//! Trying every interface and mode on a target with a short read-only job, and saying what works
//! here and why not for what does not. Nothing is written to the target; nothing is printed:
//! each tried mode comes back as a [`ProbeRow`].
use super::{execute, Quiet};
use crate::interfaces::{Behaviour, InterfaceKind, IoChoice, Options};
use crate::plan::{Budget, Complete, Job, Submit};
use crate::record::RunRecord;

/// A short read-only job: 256 random 4 KiB reads, QD4 where the interface is asynchronous.
pub(crate) fn probe_job(interface: InterfaceKind, submit: Submit, complete: Complete, sync: bool, target: &str) -> Job {
    let mut options = Options::default();
    options.ring.sq_idle_ms = 100;
    let mut job = Job { io: IoChoice { interface, submit, complete, options, ..Default::default() }, ..Default::default() };
    job.workload.write_mix = 0;
    job.workload.qd = if sync { 1 } else { 4 };
    job.timing.budget = Budget::Ios(256);
    job.targets.paths = vec![target.into()];
    job
}

/// One interface and mode tried on the target.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeRow {
    pub interface: &'static str,
    pub submit: Submit,
    pub complete: Complete,
    pub works: bool,
    /// What happened: the latency and completion path when it works, why not when it does not
    /// (for a polled mode, also what `--allow-fallback` does).
    pub detail: String,
}

/// Try every interface that drives a target (a diskless one, null, has nothing to probe) in
/// each of its submission and completion modes, handing each row to `row` as it is known.
/// `vfio_noiommu`: the user-space driver may use VFIO's no-IOMMU mode (`--vfio-noiommu`).
pub fn probe(target: &str, vfio_noiommu: bool, row: &mut dyn FnMut(ProbeRow)) {
    for (&kind, i) in InterfaceKind::ALL.iter().map(|k| (k, k.info())).filter(|(_, i)| !i.diskless) {
        for &s in i.submits {
            for &c in i.completes {
                let mut job = probe_job(kind, s, c, i.behaviour == Behaviour::Sync, target);
                // Each interface takes the options meant for it (the no-IOMMU consent only the
                // user-space driver's), the others' left at their defaults.
                job.io.options.vfio.vfio_noiommu = vfio_noiommu;
                job.io.options = job.io.options.kept_for(&job.io);
                let (works, mut detail) = outcome(&job);
                if !works && job.io.complete != Complete::Irq {
                    // Show what the kernel does when asked to poll anyway.
                    let mut anyway = job.clone();
                    anyway.policy.allow_fallback = true;
                    let (works2, detail2) = outcome(&anyway);
                    detail = format!("{detail}. With --allow-fallback: {}", if works2 { detail2 } else { format!("fails: {detail2}") });
                }
                row(ProbeRow { interface: i.name, submit: s, complete: c, works, detail });
            }
        }
    }
}

/// (works, what happened) for one short job.
pub(crate) fn outcome(job: &Job) -> (bool, String) {
    match execute(job, &mut Quiet, Default::default()) {
        Ok(rec) => describe(rec),
        Err(e) => (false, e.failure.message),
    }
}

/// (works, what happened) for a probe's record.
fn describe(rec: RunRecord) -> (bool, String) {
    if let Some(e) = rec.error {
        return (false, e);
    }
    let r = rec.results.as_ref().expect("a run's record has its results");
    let lat = r.read.lat_ns.as_ref().map(|l| crate::plan::size::format_ns(l.mean)).unwrap_or_default();
    let path = &rec.completion_path;
    let how = match &path.reason {
        Some(why) => format!("; completes by {}: {why}", path.expected),
        None => format!("; completes by {}", path.expected),
    };
    let ring = match rec.ring.as_ref().filter(|r| !r.dropped.is_empty()) {
        Some(r) => format!("; ring without {} (this kernel refuses them)", r.dropped.join(", ")),
        None => String::new(),
    };
    (true, format!("mean latency {lat}{how}{ring}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_job_is_short_and_reads_only() {
        let j = probe_job(InterfaceKind::Psync, Submit::Syscall, Complete::Irq, true, "/tmp/x");
        assert_eq!((j.workload.qd, j.timing.budget, j.workload.rw.writes(j.workload.write_mix)), (1, Budget::Ios(256), false));
        assert_eq!(probe_job(InterfaceKind::IoUring, Submit::Sqpoll, Complete::Poll, false, "/tmp/x").workload.qd, 4);
    }

    #[test]
    fn what_works_says_its_latency_and_path_and_what_does_not_says_why() {
        // The null interface needs neither root nor a device.
        let mut job = probe_job(InterfaceKind::Null, Submit::Syscall, Complete::Irq, true, "");
        job.targets.paths.clear();
        let (works, detail) = outcome(&job);
        assert!(works, "{detail}");
        assert!(detail.starts_with("mean latency ") && detail.contains("; completes by "), "{detail}");
        let missing = probe_job(InterfaceKind::Psync, Submit::Syscall, Complete::Irq, true, "/nonexistent/iolab-probe");
        let (works, detail) = outcome(&missing);
        assert!(!works && detail.contains("/nonexistent/iolab-probe"), "{detail}");
    }
}
