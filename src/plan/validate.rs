//! Checks that reject a job before anything is created or opened, each with one line that says
//! what is wrong and what to do instead.
use super::{Complete, Job, Submit};
use crate::host::online_cpus;
use crate::interfaces::{self, Behaviour};

pub const MIN_BS: u64 = 512;
pub const MAX_BS: u64 = 1 << 20;
pub const MAX_QD: u32 = 1024;
/// The longest `--runtime`, `--ramp` or `--idle-baseline`: a week. Longer is a typo (1e20s
/// used to run nothing and report ok, or abort converting it), and a week of per-second series
/// per thread is already tens of MB.
pub const MAX_SECONDS: f64 = 7.0 * 86_400.0;

/// Refuse a duration over [`MAX_SECONDS`], naming the option.
pub fn check_duration(option: &str, seconds: f64) -> Result<(), String> {
    if seconds > MAX_SECONDS {
        return Err(format!("{option} {seconds} s is longer than a week, the most iolab allows: give a shorter duration (e.g. 10m, 2h)"));
    }
    Ok(())
}

fn name_submit(s: Submit) -> &'static str {
    match s {
        Submit::Syscall => "syscall",
        Submit::Sqpoll => "sqpoll",
    }
}
pub fn name_complete(c: Complete) -> &'static str {
    match c {
        Complete::Irq => "irq",
        Complete::Poll => "poll",
        Complete::Hybrid => "hybrid",
    }
}

/// Job-only checks (no target or kernel needed).
pub fn validate(job: &Job) -> Result<(), String> {
    let info = job.interface.info();
    let name = info.name;
    if info.diskless {
        if let Some(t) = job.targets.first() {
            return Err(format!("{name} does no I/O and opens no target, so {t} would not be used: drop it (--size sets {name}'s address space, default 1 GiB)"));
        }
        if job.verify {
            return Err(format!("{name} moves no data, so there is nothing to verify: drop --verify"));
        }
    }
    interfaces::null::check_script(job)?;
    if !info.submits.contains(&job.submit) {
        return Err(format!(
            "{name} cannot use --submit {}: only io_uring has a submission-polling kernel thread (use -i io_uring --submit sqpoll)",
            name_submit(job.submit)
        ));
    }
    if !info.completes.contains(&job.complete) {
        let can: Vec<&str> = info.completes.iter().map(|c| name_complete(*c)).collect();
        return Err(format!("{name} cannot complete by {}: it supports --complete {}", name_complete(job.complete), can.join("|")));
    }
    if !(MIN_BS..=MAX_BS).contains(&job.bs) || !job.bs.is_multiple_of(512) {
        return Err(format!("--bs {} is out of range: use a multiple of 512 from 512 to 1m", job.bs));
    }
    if !(1..=MAX_QD).contains(&job.qd) {
        return Err(format!("--qd {} is out of range: use 1 to {MAX_QD}", job.qd));
    }
    if info.behaviour == Behaviour::Sync && job.qd > 1 {
        return Err(format!(
            "{name} is synchronous and keeps one I/O in flight per thread, so --qd {} makes no sense: reach depth {} with --threads {}",
            job.qd, job.qd, job.qd
        ));
    }
    if job.threads == 0 || job.threads > 4096 {
        return Err(format!("--threads {} is out of range: use 1 to 4096", job.threads));
    }
    if job.batch_submit == 0 || job.batch_submit > job.qd || job.batch_reap == 0 || job.batch_reap > job.qd {
        return Err(format!("--batch-submit and --batch-reap must be between 1 and --qd ({})", job.qd));
    }
    if job.write_mix > 100 {
        return Err(format!("--write-mix {} is not a percentage: use 0 to 100", job.write_mix));
    }
    (job.interface.policy().check_job)(job)?;
    if info.async_needs_direct && !job.direct {
        return Err(format!(
            "{name} is only asynchronous with O_DIRECT: with --buffered io_submit blocks; drop --buffered or use -i io_uring"
        ));
    }
    if job.complete != Complete::Irq && !job.direct {
        return Err(format!("--complete {} needs O_DIRECT: the page cache is never polled; drop --buffered", name_complete(job.complete)));
    }
    job.ring.check(job.interface, job.submit)?;
    let ncpu = online_cpus();
    if let Some(c) = job.cpus.iter().chain(job.ring.sq_cpu.map(|c| c as usize).as_ref()).find(|c| **c >= ncpu) {
        return Err(format!("CPU {c} does not exist: this machine has CPUs 0 to {}", ncpu - 1));
    }
    if job.ramp_s < 0.0 {
        return Err("--ramp must not be negative".into());
    }
    check_duration("--ramp", job.ramp_s)?;
    match job.budget {
        super::Budget::Seconds(s) if s <= 0.0 => return Err("--runtime must be positive".into()),
        super::Budget::Seconds(s) => check_duration("--runtime", s)?,
        super::Budget::Ios(0) | super::Budget::Bytes(0) => return Err("--ios/--bytes must be positive".into()),
        _ => {}
    }
    if job.verify && !job.direct {
        return Err("--verify needs O_DIRECT so reads come from the device, not the page cache: drop --buffered".into());
    }
    Ok(())
}
