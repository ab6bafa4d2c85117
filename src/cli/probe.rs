//! `iolab probe [TARGET]`: run a short read-only job for every interface and mode and say what
//! works here, and why not for what doesn't. Nothing is written to the target.
use crate::interfaces::{Behaviour, InterfaceKind, IoChoice};
use crate::plan::{Budget, Job, Submit};
use crate::session::execute;
use std::path::PathBuf;

/// A short read-only job: 256 random 4 KiB reads, QD4 where the interface is asynchronous.
pub fn probe_job(interface: InterfaceKind, submit: Submit, complete: crate::plan::Complete, sync: bool, target: &str) -> Job {
    let mut job = Job {
        io: IoChoice {
            interface,
            submit,
            complete,
            ring: crate::interfaces::io_uring::RingOptions { sq_idle_ms: 100, ..Default::default() },
            ..Default::default()
        },
        ..Default::default()
    };
    job.workload.write_mix = 0;
    job.workload.qd = if sync { 1 } else { 4 };
    job.timing.budget = Budget::Ios(256);
    job.targets.paths = vec![target.into()];
    job
}

pub fn main(target: Option<&PathBuf>) -> i32 {
    let temp = match target {
        Some(_) => None,
        None => match crate::device::create_default_target(16 << 20, crate::engine::interrupt()) {
            Ok(t) => Some(t),
            Err(e) => {
                eprintln!("iolab: {e}");
                return 2;
            }
        },
    };
    let path = target.cloned().unwrap_or_else(|| temp.as_ref().unwrap().path.clone());
    if !path.exists() {
        eprintln!("iolab: target {} does not exist: give an existing file or block device", path.display());
        return 2;
    }
    println!("probing {} (read-only, 256 random 4 KiB reads per mode)", path.display());
    println!("{:<13} {:<8} {:<7} {:<6} detail", "interface", "submit", "complete", "works");
    // A diskless interface (null) touches no target: there is nothing to probe.
    for (&kind, i) in InterfaceKind::ALL.iter().map(|k| (k, k.info())).filter(|(_, i)| !i.diskless) {
        for &s in i.submits {
            for &c in i.completes {
                let job = probe_job(kind, s, c, i.behaviour == Behaviour::Sync, &path.display().to_string());
                let sub = if s == Submit::Sqpoll { "sqpoll" } else { "syscall" };
                let (ok, mut detail) = outcome(&job);
                if ok == "no" && job.io.complete != crate::plan::Complete::Irq {
                    // Show what the kernel does when asked to poll anyway.
                    let mut anyway = job.clone();
                    anyway.policy.allow_fallback = true;
                    let (ok2, detail2) = outcome(&anyway);
                    detail =
                        format!("{detail}. With --allow-fallback: {}", if ok2 == "yes" { detail2 } else { format!("fails: {detail2}") });
                }
                println!("{:<13} {:<8} {:<7} {:<6} {}", i.name, sub, c.name(), ok, detail);
            }
        }
    }
    println!("\nenergy sources");
    for e in crate::energy::probe(&crate::energy::EnergyConfig::default()) {
        let scopes = if e.scopes.is_empty() { String::new() } else { format!(" [{}]", e.scopes.join(", ")) };
        println!("{:<10} {:<6} {}{scopes}", e.backend, if e.available { "yes" } else { "no" }, e.detail);
    }
    0
}

/// ("yes"|"no", what happened) for one short job.
fn outcome(job: &Job) -> (&'static str, String) {
    match execute(job, &mut crate::session::Quiet, None) {
        Ok(rec) if rec.error.is_none() => {
            let r = rec.results.as_ref().unwrap();
            let lat = r.read.lat_ns.as_ref().map(|l| crate::report::summary::format_ns(l.mean)).unwrap_or_default();
            let path = &rec.completion_path;
            let how = match &path.reason {
                Some(why) => format!("; completes by {}: {why}", path.expected),
                None => format!("; completes by {}", path.expected),
            };
            let ring = match rec.ring.as_ref().filter(|r| !r.dropped.is_empty()) {
                Some(r) => format!("; ring without {} (this kernel refuses them)", r.dropped.join(", ")),
                None => String::new(),
            };
            ("yes", format!("mean latency {lat}{how}{ring}"))
        }
        Ok(rec) => ("no", rec.error.unwrap_or_default()),
        Err(e) => ("no", e.failure.message),
    }
}
