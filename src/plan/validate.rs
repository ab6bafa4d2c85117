//! Checks that reject a job before anything is created or opened, each with one line that says
//! what is wrong and what to do instead.
use super::{Complete, Job, PlanError};
use crate::host::online_cpus;
use crate::interfaces::{Behaviour, TargetKind};

pub const MIN_BS: u64 = 512;
pub const MAX_BS: u64 = 1 << 20;
pub const MAX_QD: u32 = 1024;
/// The longest `--runtime`, `--ramp` or `--idle-baseline`: a week. Longer is a typo (1e20s
/// used to run nothing and report ok, or abort converting it), and a week of per-second series
/// per thread is already tens of MB.
pub const MAX_SECONDS: f64 = 7.0 * 86_400.0;

/// Refuse a duration over [`MAX_SECONDS`], naming the option.
pub(crate) fn check_duration(option: &str, seconds: f64) -> Result<(), PlanError> {
    if seconds > MAX_SECONDS {
        return PlanError::job(format!(
            "{option} {seconds} s is longer than a week, the most iolab allows: give a shorter duration (e.g. 10m, 2h)"
        ));
    }
    Ok(())
}

/// Job-only checks (no target or kernel needed).
pub(crate) fn validate(job: &Job) -> Result<(), PlanError> {
    let info = job.io.interface.info();
    let name = info.name;
    if info.diskless {
        if let Some(t) = job.targets.paths.first() {
            return PlanError::job(format!("{name} does no I/O and opens no target, so {t} would not be used: drop it (--size sets {name}'s address space, default 1 GiB)"));
        }
        if job.policy.verify {
            return PlanError::job(format!("{name} moves no data, so there is nothing to verify: drop --verify"));
        }
    }
    job.io.check_options().map_err(PlanError::Job)?;
    if !info.submits.contains(&job.io.submit) {
        return PlanError::job(format!(
            "{name} cannot use --submit {}: only io_uring has a submission-polling kernel thread (use -i io_uring --submit sqpoll)",
            job.io.submit.name()
        ));
    }
    if !info.completes.contains(&job.io.complete) {
        let can: Vec<&str> = info.completes.iter().map(|c| c.name()).collect();
        return PlanError::job(format!("{name} cannot complete by {}: it supports --complete {}", job.io.complete.name(), can.join("|")));
    }
    if !(MIN_BS..=MAX_BS).contains(&job.workload.bs) || !job.workload.bs.is_multiple_of(512) {
        return PlanError::job(format!("--bs {} is out of range: use a multiple of 512 from 512 to 1m", job.workload.bs));
    }
    check_mixes(job)?;
    if !(1..=MAX_QD).contains(&job.workload.qd) {
        return PlanError::job(format!("--qd {} is out of range: use 1 to {MAX_QD}", job.workload.qd));
    }
    let offload = job.workload.pattern.pace.as_ref().is_some_and(|p| p.submit_mode == super::pace::SubmitMode::Offload);
    if offload {
        check_offload(job)?;
    }
    // Offloaded, the depth is the submission threads (fio's offload takes a sync engine's iodepth).
    if info.behaviour == Behaviour::Sync && job.workload.qd > 1 && !offload {
        return PlanError::job(format!(
            "{name} is synchronous and keeps one I/O in flight per thread, so --qd {} makes no sense: reach depth {} with --threads {}",
            job.workload.qd, job.workload.qd, job.workload.qd
        ));
    }
    if job.workload.threads == 0 || job.workload.threads > 4096 {
        return PlanError::job(format!("--threads {} is out of range: use 1 to 4096", job.workload.threads));
    }
    if job.workload.batch_submit == 0
        || job.workload.batch_submit > job.workload.qd
        || job.workload.batch_reap == 0
        || job.workload.batch_reap > job.workload.qd
    {
        return PlanError::job(format!("--batch-submit and --batch-reap must be between 1 and --qd ({})", job.workload.qd));
    }
    if job.workload.write_mix > 100 {
        return PlanError::job(format!("--write-mix {} is not a percentage: use 0 to 100", job.workload.write_mix));
    }
    (job.io.interface.rules().check_job)(&job.io).map_err(PlanError::Job)?;
    if job.targets.paths.is_empty() && !info.diskless && !info.targets.contains(&TargetKind::File) {
        let kinds: Vec<String> = info.targets.iter().map(|k| k.to_string()).collect();
        return PlanError::job(format!(
            "{name} drives only {}: give one as the target (the temporary default target is a file)",
            kinds.join(" or ")
        ));
    }
    if job.io.complete != Complete::Irq && !job.io.direct {
        return PlanError::job(format!(
            "--complete {} needs O_DIRECT: the page cache is never polled; drop --buffered",
            job.io.complete.name()
        ));
    }
    let pinned = job.io.pinned_cpus();
    if job.workload.numa != super::Numa::Off && (!job.workload.cpus.is_empty() || !pinned.is_empty()) {
        return PlanError::job(format!("--numa {} chooses the CPUs itself: give --numa or --cpus/--sq-cpu, not both", job.workload.numa));
    }
    if let super::Numa::Node(n) = job.workload.numa {
        let nodes = crate::host::numa_nodes();
        if let Some(why) = (!nodes.is_empty()).then(|| crate::host::missing_node(&nodes, n)).flatten() {
            return PlanError::job(why);
        }
    }
    let ncpu = online_cpus();
    if let Some(c) = job.workload.cpus.iter().copied().chain(pinned.iter().map(|c| *c as usize)).find(|c| *c >= ncpu) {
        return PlanError::job(format!("CPU {c} does not exist: this machine has CPUs 0 to {}", ncpu - 1));
    }
    if job.timing.ramp_s < 0.0 {
        return PlanError::job("--ramp must not be negative");
    }
    check_duration("--ramp", job.timing.ramp_s)?;
    match job.timing.budget.seconds() {
        Some(s) if s <= 0.0 => return PlanError::job("--runtime must be positive"),
        Some(s) => check_duration("--runtime", s)?,
        None => {}
    }
    if job.timing.budget.ios(job.workload.bs) == Some(0) {
        return PlanError::job("--ios/--bytes must be positive");
    }
    if job.policy.verify && !job.io.direct {
        return PlanError::job("--verify needs O_DIRECT so reads come from the device, not the page cache: drop --buffered");
    }
    if let Some(form) = job.policy.verify_fio {
        if !job.policy.verify {
            return PlanError::job(format!("verify_fio '{form}' shapes --verify: give verify = true"));
        }
        let sizes = job.workload.bssplit.bounds().map_or(vec![job.workload.bs], |(a, b)| vec![a, b, job.workload.bs]);
        for bs in sizes {
            form.check_for(bs).map_err(|e| PlanError::Job(format!("verify_fio '{form}': {e}")))?;
        }
    }
    // A setting's name and the form of its value, before anything is opened or changed.
    for spec in &job.system.set {
        crate::settings::Change::parse(spec, None).map_err(|e| PlanError::Job(e.to_string()))?;
    }
    if let Some(set) = &job.fileset {
        if let Some(p) = &job.workload.pattern.pace {
            return PlanError::job(format!("--pace '{p}': the file-set loop is not paced: drop the rate and think time or --fileset"));
        }
        if job.io.options.thread.any() || job.io.options.steady.steadystate.is_some() {
            return PlanError::job(
                "--mem-policy, --ioprio, --cmdprio and --steadystate are a run's I/O threads', not the file-set loop's: drop them or --fileset",
            );
        }
        set.check(job)?;
    }
    Ok(())
}

/// `io_submit_mode=offload`: what iolab's submission threads (`engine::offload`) do not build.
fn check_offload(job: &Job) -> Result<(), PlanError> {
    let info = job.io.interface.info();
    let why = if info.bypasses_kernel {
        Some(format!("{} drives its controller's queues from the threads it set up, not from submission threads", info.name))
    } else if job.io.submit != super::Submit::Syscall {
        Some(format!("--submit {}: a submission-polling thread per submission thread is not built", job.io.submit.name()))
    } else if job.policy.verify {
        Some("--verify: the submission threads do not check data: drop one".to_string())
    } else {
        None
    };
    match why {
        Some(w) => PlanError::job(format!("io_submit_mode=offload: {w}")),
        None => Ok(()),
    }
}

/// A block size mix's sizes (each a block size, multiples of the smallest, the largest the
/// job's bs) and a distribution's pattern (random only).
fn check_mixes(job: &Job) -> Result<(), PlanError> {
    let w = &job.workload;
    if let Some((small, large)) = w.bssplit.bounds() {
        let mix = &w.bssplit;
        let sizes: Vec<u64> = match mix {
            super::BsMix::Split(s) => s.iter().map(|p| p.0).collect(),
            _ => vec![small, large],
        };
        if let Some(b) = sizes.iter().find(|b| !(MIN_BS..=MAX_BS).contains(*b) || !b.is_multiple_of(512)) {
            return PlanError::job(format!("--bssplit {mix}: size {b} is out of range: use multiples of 512 from 512 to 1m"));
        }
        if let Some(b) = sizes.iter().find(|b| !b.is_multiple_of(small)) {
            return PlanError::job(format!(
                "--bssplit {mix}: {b} is not a multiple of the smallest size {small}, the alignment of every offset (fio would round it down): give multiples of it"
            ));
        }
        if w.bs != large {
            return PlanError::job(format!("--bs {} with --bssplit {mix}: a mix's block size is its largest, {large}: drop --bs", w.bs));
        }
        if job.policy.verify {
            return PlanError::job(format!("--verify checks blocks of one size: drop --bssplit {mix} or --verify"));
        }
    }
    let (min, max) = w.bssplit.bounds().unwrap_or((w.bs, w.bs));
    w.pattern
        .check(w.rw.is_random(), min, max, !w.bssplit.is_one(), !w.distribution.is_random(), job.targets.paths.len())
        .or_else(PlanError::job)?;
    if !w.distribution.is_random() && !w.rw.is_random() {
        return PlanError::job(format!(
            "--distribution {} spreads random offsets, and --rw {} is sequential: use randread, randwrite or randrw, or drop it",
            w.distribution,
            w.rw.name()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interfaces::InterfaceKind;

    #[test]
    fn a_null_job_refuses_a_target_verify_and_scripts_elsewhere() {
        let mut job = Job::default();
        job.io.interface = InterfaceKind::Null;
        job.targets.paths = vec!["/dev/sda".into()];
        assert!(validate(&job).unwrap_err().to_string().contains("opens no target"));
        job.targets.paths.clear();
        validate(&job).unwrap();
        job.policy.verify = true;
        assert!(validate(&job).unwrap_err().to_string().contains("nothing to verify"));
        job.policy.verify = false;
        job.io.complete = Complete::Poll;
        assert!(validate(&job).is_err());
        let mut other = Job::default();
        other.io.options.null.null_script = Some("accept=1".into());
        assert_eq!(validate(&other).unwrap_err().to_string(), "--null-script applies only to -i null");
    }
}
