//! A group of jobs run together (fio's jobs without stonewall between them): each job keeps its
//! own configuration, targets, threads and record; the group is checked and prepared member by
//! member (targets acquired, the settings, which every member must ask alike, applied once),
//! started at one barrier (`engine::run_in_group`, each member `start_delay_s` after it), measured
//! over each member's own window, put back, and each record says its group
//! (`record::group::GroupRecord`) and that the machine-wide meters are shared.
//!
//! fio's group words (in the job's pace, `plan::pace`) act here. The members in one flow
//! (`flow`, `flow_id`) share one counter (`engine::pace::Flow`) that holds each to its weight.
//! A member with `exitall` (or `exitall_on_error`, at a failed end) stops, when it ends, the
//! members its `exit_what` names (`group`: its reporting group, the members from the last
//! `new_group` up to the next; `stonewall`: every member started; `all`: every member): their
//! workers' stop flag is set (`engine::Exit`), and their records keep the I/O they did and say
//! who stopped them.
use super::{check, check_energy, check_kernel, finish, measure_window_with, prepare, restore, Failure, Measure, Prepared, RunUi};
use crate::engine::{self, Exit, GroupStart, Together};
use crate::plan::pace::{ExitWhat, Pace};
use crate::plan::Job;
use crate::record::group::{FlowMember, FlowRecord, GroupRecord, SHARED};
use crate::record::RunRecord;

/// One job of a group.
pub struct Member<'a> {
    /// Its name in the group (fio's job name).
    pub name: String,
    pub job: &'a Job,
    /// How long after the group's start it starts (fio's `startdelay`), seconds.
    pub start_delay_s: f64,
}

/// What a group of jobs cannot be, before anything is touched: one line naming the member.
pub fn check_group(members: &[Member], measure: &Measure) -> Result<(), Failure> {
    let Some(first) = members.first() else {
        return Err(Failure::invalid("a group of jobs run together needs at least one job".into()));
    };
    if measure.profile.any() {
        return Err(Failure::invalid(format!(
            "--profile is not taken with jobs run together (group of {}): profile them one at a time",
            names(members)
        )));
    }
    let system = |j: &Job| {
        let mut s = j.system.clone();
        s.wait_settings_s = None;
        serde_json::to_value(s).unwrap_or_default()
    };
    for m in members {
        if m.job.fileset.is_some() {
            return Err(Failure::invalid(format!("job '{}': a file-set run (--fileset) does not run together with other jobs", m.name)));
        }
        if !(m.start_delay_s.is_finite() && m.start_delay_s >= 0.0) {
            return Err(Failure::invalid(format!("job '{}': its start delay {} is not a number of seconds", m.name, m.start_delay_s)));
        }
        if system(m.job) != system(first.job) {
            return Err(Failure::invalid(format!(
                "job '{}' asks for other system settings than '{}' (scheduler, set, setup): the jobs of a group run on one machine at once, so they must ask alike",
                m.name, first.name
            )));
        }
    }
    Ok(())
}

fn names(members: &[Member]) -> String {
    members.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", ")
}

fn pace_of<'a>(m: &Member<'a>) -> Option<&'a Pace> {
    m.job.workload.pattern.pace.as_ref()
}

/// What each member's end stops (fio's exitall): None where it stops nothing. `group` reaches
/// the member's reporting group: from the last member at or before it that starts one
/// (`new_group`, the first member always) to the next.
pub(crate) fn exits(members: &[Member]) -> Vec<Option<Exit>> {
    let report_group: Vec<usize> = members
        .iter()
        .enumerate()
        .scan(0, |g, (n, m)| {
            if n > 0 && pace_of(m).is_some_and(|p| p.new_group) {
                *g += 1;
            }
            Some(*g)
        })
        .collect();
    members
        .iter()
        .enumerate()
        .map(|(n, m)| {
            let p = pace_of(m).filter(|p| p.exits())?;
            let stops: Vec<usize> =
                (0..members.len()).filter(|&o| o != n && (p.exit_what != ExitWhat::Group || report_group[o] == report_group[n])).collect();
            (!stops.is_empty()).then_some(Exit { stops, started_only: p.exit_what == ExitWhat::Stonewall, on_failure_only: !p.exitall })
        })
        .collect()
}

/// The flows members share: for each member, its flow's counter (one per flow id, shared only
/// where two or more members are in it).
fn flows(members: &[Member]) -> Vec<Option<std::sync::Arc<engine::pace::Flow>>> {
    let id = |m: &Member| pace_of(m).filter(|p| p.flow > 0).map(|p| p.flow_id);
    let mut made: Vec<(u32, std::sync::Arc<engine::pace::Flow>)> = Vec::new();
    members
        .iter()
        .map(|m| {
            let i = id(m)?;
            if members.iter().filter(|o| id(o) == Some(i)).count() < 2 {
                return None;
            }
            if let Some((_, f)) = made.iter().find(|(k, _)| *k == i) {
                return Some(f.clone());
            }
            let f = engine::pace::Flow::new();
            made.push((i, f.clone()));
            Some(f)
        })
        .collect()
}

/// The record of member `n`'s flow: every member in it, with its measured I/Os (`ios`).
fn flow_record(members: &[Member], n: usize, ios: &[Option<u64>]) -> Option<FlowRecord> {
    let p = pace_of(&members[n]).filter(|p| p.flow > 0)?;
    let ins: Vec<usize> =
        (0..members.len()).filter(|&o| pace_of(&members[o]).is_some_and(|q| q.flow > 0 && q.flow_id == p.flow_id)).collect();
    if ins.len() < 2 {
        return None;
    }
    let weight = |o: usize| pace_of(&members[o]).map_or(0, |q| q.flow as u64) * members[o].job.workload.threads as u64;
    let (all_weight, all_ios) = (ins.iter().map(|&o| weight(o)).sum::<u64>().max(1), ins.iter().map(|&o| ios[o].unwrap_or(0)).sum::<u64>());
    let members_in = ins
        .iter()
        .map(|&o| FlowMember {
            name: members[o].name.clone(),
            weight: pace_of(&members[o]).map_or(0, |q| q.flow),
            threads: members[o].job.workload.threads,
            ios: ios[o].unwrap_or(0),
            weight_share: weight(o) as f64 / all_weight as f64,
            io_share: if all_ios > 0 { ios[o].unwrap_or(0) as f64 / all_ios as f64 } else { 0.0 },
        })
        .collect();
    Some(FlowRecord { id: p.flow_id, weight: p.flow, sleep_us: p.flow_sleep_ns as f64 / 1e3, members: members_in })
}

/// What member `n`'s exit stops, in words.
fn exit_words(members: &[Member], n: usize, exit: &Exit) -> String {
    let p = pace_of(&members[n]).cloned().unwrap_or_default();
    let who: Vec<&str> = exit.stops.iter().map(|&o| members[o].name.as_str()).collect();
    let when = if exit.on_failure_only { "a failed end (exitall_on_error)" } else { "its end (exitall)" };
    let which = if exit.started_only { " (those started by then)" } else { "" };
    format!("at {when} it stops {}{which} (exit_what={})", who.join(", "), p.exit_what.name())
}

/// What a group's run gave: each member's record, or why it failed, in member order; and why
/// the settings were not put back, if they were not (the records were made under the settings
/// asked for, so they are kept).
pub struct GroupRun {
    pub runs: Vec<Result<RunRecord, Failure>>,
    pub not_restored: Option<String>,
}

/// Run `members` together as group `id`. Err: the group was refused or could not be prepared
/// (nothing ran). A member's failure in its own window is its own; one that cannot start keeps
/// every member from running.
pub fn execute_group(id: &str, members: &[Member], ui: &mut dyn RunUi, measure: Measure) -> Result<GroupRun, Failure> {
    check_group(members, &measure)?;
    let mut rings = Vec::with_capacity(members.len());
    for m in members {
        check(m.job).map_err(|f| named(&m.name, f))?;
        rings.push(check_kernel(m.job).map_err(|e| named(&m.name, e.into()))?);
    }
    check_energy(measure.energy)?;
    let cancel = engine::install_interrupt_handler();
    ui.note(&format!("running {} jobs together: {}", members.len(), names(members)));
    // Prepared one after another; the first applies the settings every member asked alike
    // (the others ask none, so nothing is applied twice), and measures idle power once.
    let mut prepared: Vec<Prepared> = Vec::with_capacity(members.len());
    for (n, m) in members.iter().enumerate() {
        let job = if n == 0 {
            m.job.clone()
        } else {
            let mut j = m.job.clone();
            j.system.set.clear();
            j.system.setup.clear();
            j.system.scheduler = None;
            j
        };
        let idle = prepared.first().and_then(|p| p.idle.clone());
        let this = Measure { idle: idle.as_ref().or(measure.idle), ..measure };
        match prepare(&job, ui, this, cancel) {
            Ok(mut p) => {
                if let Some(first) = prepared.first() {
                    p.env.settings_changed = first.env.settings_changed.clone();
                }
                prepared.push(p)
            }
            Err(f) => {
                put_back(&mut prepared);
                return Err(named(&m.name, f));
            }
        }
    }
    let together = Together::new(members.len());
    let (exits, flows) = (exits(members), flows(members));
    // Each member's engine and meters on a thread of its own (the meters are made there: they
    // stay on the thread that samples them).
    let ran: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = members
            .iter()
            .zip(&prepared)
            .zip(exits.iter().zip(&flows))
            .enumerate()
            .map(|(n, ((m, p), (exit, flow)))| {
                let (placement, acquired, targets, together) = (&p.placement, &p.acquired, &p.env.targets, &together);
                let diskless = m.job.io.interface.info().diskless;
                s.spawn(move || {
                    let system = crate::settings::Settings::system();
                    let mut meters = crate::meters::Meters::new(if diskless { &[] } else { targets }, measure.energy.map(|e| &e.config))
                        .with_profile(measure.profile, &system);
                    let start = GroupStart { together, delay_s: m.start_delay_s, member: n, exit: exit.clone(), flow: flow.clone() };
                    let out = measure_window_with(m.job, &mut super::Quiet, placement, acquired, &mut meters, cancel, Some(&start));
                    out.map(|o| {
                        let measured = meters.measured(&o.rec.per_target);
                        (o, measured)
                    })
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Failure::failed("a group member's thread panicked".into())))).collect()
    });
    // Put back in the reverse order of making: the first member, which holds the settings, last.
    let mut restored: Vec<_> = prepared.iter_mut().rev().map(restore).collect();
    restored.reverse();
    let not_restored: Option<String> = restored.iter().filter_map(|r| r.not_restored.clone()).reduce(|a, b| format!("{a}; {b}"));
    let members_names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
    let ios: Vec<Option<u64>> = ran.iter().map(|r| r.as_ref().ok().map(|(o, _)| o.rec.read.ios + o.rec.write.ios)).collect();
    let mut out = Vec::with_capacity(members.len());
    for (n, ((((m, p), r), ran), ring)) in members.iter().zip(prepared).zip(restored).zip(ran).zip(rings).enumerate() {
        let rec = match ran {
            Ok((o, measured)) => {
                let window = [o.started_unix_s + m.job.timing.ramp_s, o.started_unix_s + m.job.timing.ramp_s + o.window_s];
                // Its energy is the machine's over its window: `group.shared` says so.
                let stopped_by = together.stopped_by(n).map(|b| {
                    let what = pace_of(&members[b]).map_or("group", |q| q.exit_what.name());
                    format!("{}'s exitall (exit_what={what}) stopped it when {} ended", members[b].name, members[b].name)
                });
                let mut rec = finish(m.job, p, o, measured, r, measure, ring);
                if stopped_by.is_some() {
                    // Stopped before either limit: neither ended it.
                    if let Some(x) = rec.results.as_mut() {
                        x.ended_by = None;
                    }
                }
                rec.group = Some(GroupRecord {
                    id: id.to_string(),
                    members: members_names.clone(),
                    member: n,
                    start_delay_s: m.start_delay_s,
                    window_unix_s: window,
                    shared: SHARED.to_string(),
                    exits: exits[n].as_ref().map(|e| exit_words(members, n, e)),
                    stopped_by,
                    flow: flow_record(members, n, &ios),
                });
                Ok(rec)
            }
            Err(f) => Err(named(&m.name, f)),
        };
        out.push(rec);
    }
    Ok(GroupRun { runs: out, not_restored })
}

/// Give back what was prepared, the last made first.
fn put_back(prepared: &mut Vec<Prepared>) {
    while let Some(mut p) = prepared.pop() {
        restore(&mut p);
    }
}

/// The failure, its message naming the member.
fn named(name: &str, f: Failure) -> Failure {
    Failure::new(f.kind, format!("job '{name}': {}", f.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member<'a>(name: &str, job: &'a Job) -> Member<'a> {
        Member { name: name.into(), job, start_delay_s: 0.0 }
    }

    /// A group's jobs share one machine: settings asked differently, a file set, a bad delay or
    /// profiling are refused in one line naming the job, before anything is touched.
    #[test]
    fn a_group_is_refused_before_anything_is_touched() {
        let a = Job::default();
        let mut b = Job::default();
        b.system.set = vec!["nomerges=2".into()];
        let none = Measure::default();
        let e = check_group(&[member("a", &a), member("b", &b)], &none).unwrap_err();
        assert_eq!(e.kind, crate::failure::FailureKind::Invalid);
        assert!(e.message.starts_with("job 'b' asks for other system settings than 'a'"), "{}", e.message);
        // How long to wait for a setting is not a setting.
        let mut c = Job::default();
        c.system.wait_settings_s = Some(30);
        assert!(check_group(&[member("a", &a), member("c", &c)], &none).is_ok());
        let late = Member { start_delay_s: f64::NAN, ..member("c", &c) };
        assert!(check_group(&[member("a", &a), late], &none).unwrap_err().message.contains("start delay"));
        let profiled = Measure { profile: crate::plan::profile::Profile { layers: false, stages: true }, ..none };
        assert!(check_group(&[member("a", &a)], &profiled).unwrap_err().message.starts_with("--profile is not taken"));
        assert!(check_group(&[], &none).is_err());
    }
}
