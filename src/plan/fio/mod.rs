//! fio job files as plans, and plans as fio job files. `parse.rs` reads fio's format as fio
//! does; `table.rs` is the one table from fio's options to iolab's plan keys; `map.rs` turns
//! one job into a plan (the TOML `iolab sweep` takes, checked by the plan's own parser) and a
//! planned job back into fio's options. Each job of a file is a plan of its own, run in file
//! order; fio's jobs without stonewall between them are one group, run together
//! (`session::group`).
pub mod map;
pub mod parse;
pub mod table;
pub mod threads;

use crate::interfaces::InterfaceKind;
pub use map::Mapped;
use map::{count, engine, flag, one_bs, Tr};
use parse::Opt;
use std::path::Path;
use table::{find, How, TABLE};
use toml::Value;

/// The word `--fio-ignore` takes to run a file's jobs one after another where fio would run
/// them together (no stonewall between them).
pub const CONCURRENCY: &str = "concurrency";

/// The guide at the head of docs/fio.md (the table of every option follows it).
pub const GUIDE: &str = "iolab reads fio job files: `iolab sweep JOB.fio [TARGET]` runs every job of the file, in file
order and together where fio runs them together, each as a sweep of its own (named `FILE/JOB`, stored with its plan), and
`iolab run --fio JOB.fio [--job NAME] [TARGET]` runs one job. `--dry-run` shows, for every job, each
fio option and the iolab plan key it became. `iolab export fio PLAN.toml` writes a plan's
configurations as a fio job file (one job per configuration, each after the previous), through the
same table.

How fio's format is read (fio's HOWTO is the reference): sections in order, every `[global…]`
section applying to the jobs below it (a later `[global]` changes only the jobs after it);
`include FILE` inside a section (relative to the job file when not found as given); comments from
`;` or `#` to the end of a line; `${VAR}` from the environment (empty when unset); `$pagesize`,
`$mb_memory`, `$ncpus` with simple math; arithmetic in parentheses (`(4k*2)`, `+ - * / % ^`; a bare
number in a time expression is microseconds); sizes with fio's suffixes (`k` = 1024, `ki` = 1000
unless `kb_base=1000`, which swaps them; `0x` hexadecimal); times with `d h m s ms us`.

What a job becomes:

- **Each job is a plan** of one configuration, with its own record. fio starts the jobs of a
  group together: a job joins the group of the job above unless `stonewall` (or
  `wait_for_previous`, or `wait_for=` the job just above; `wait_for` a job further up is refused)
  starts a new group, which starts when the jobs above have ended. iolab does the same: the jobs of
  a group (named `FILE/gN`; the dry run's `(group)` line says whom a job runs with) are checked
  and prepared one by one (targets acquired, each job its own temporary target where it names
  none), then started at one barrier, each `startdelay` seconds after it (a range, fio's random
  delay, is refused), each measured over its own window; one that cannot start keeps the whole
  group from running. The system settings (scheduler, set, setup) must be the same for every job
  of a group, and are applied once; `--profile` is refused with a group. Each run's record
  carries `group`: its name, its members, its place among them, its start delay, its window in
  Unix seconds, and a note that the machine-wide meters (CPU by class, iolab's process rusage,
  device counters, energy) cover the whole machine over the run's window and so are shared with
  the other members, while its worker threads and I/O counts are its own. `iolab run --fio
  JOB.fio` runs a file that is one group (with `--json`, an array of the members' records);
  `iolab sweep JOB.fio` runs each group together and stores each job as a sweep of its own, as
  the others. `--fio-ignore concurrency` runs every job one after another instead;
  `group_reporting` is reporting only (`new_group` bounds `exit_what=group`). A group is run whole: a sweep does not
  resume it member by member.
- **numjobs** are the run's threads (one process, threads sharing the job's targets and range).
- **The budget** is fio's: with `time_based`, `runtime` seconds (after `ramp_time`); without it,
  the job's bytes (`io_size`, else `size`, else `filesize`, else the whole target, read for its
  size before the run) x `loops` x `numjobs`, or `number_ios` x `numjobs` I/Os where that comes
  first; with a `runtime` (or `timeout`) too, whichever of the time and that count comes first,
  as fio ends such a job (the plan's `runtime` beside its `bytes` or `ios`; the record's
  `results.ended_by` says which limit ended the run).
- **Targets**: `filename` (several joined by `:`, in `directory` when relative); a target on the
  command line replaces every job's. Without a filename, iolab's temporary target of `size` bytes
  (fio would lay out a file of its own). The null engine opens none.
- **fio's defaults where iolab's differ** are written into the plan: `direct=0` (buffered; libaio
  then runs as fio runs it, synchronously: buffered AIO in Linux does each I/O inside io_submit,
  and the record's `completion_path.mechanism` says so), `fixedbufs=0` and
  `registerfiles=0` for io_uring, `iodepth_batch_complete_min=1`, the psync engine.
- **Random offsets** are drawn with repeats, as fio's `norandommap`; fio's default random map
  (every block once per pass) is not reproduced. `random_distribution` (zipf, pareto, normal,
  zoned, zoned_abs) is the run's `distribution`, generated as fio's `lib/zipf.c`, `lib/gauss.c`
  and zoned code do; `bssplit` and `bsrange` are its block size mix (`bssplit`; one for reads and
  writes: fio's `read,write` form is refused where the two differ), offsets aligned to the
  smallest size as fio's default `blockalign`; `rw=rw` (`readwrite`) is the sequential read/write
  mix; `randrepeat=0` (fio seeds from the clock) is a seed drawn when the job file is planned,
  written in the plan and so in every run's record, which repeats it.
- **Where offsets go**: `rw`'s offset modifier is the run's `stride` for a sequential job (`rw=write:112k`:
  each next offset bs + 112k on; `rw=read:-8k` with bs=4k reads backwards, from the range's start
  to its last block and down) and its `ios_per_offset` for a random one (`rw=randread:8`: a new
  random offset every 8 I/Os, the 7 between following on, fio's `rw_sequencer=sequential`);
  `blockalign` aligns random offsets apart from the block size (`blockalign`, refused below the
  target's logical block size under O_DIRECT); `zonemode=strided` with `zonesize`, `zonerange` and
  `zoneskip` is the run's `zones` (zonesize bytes within each zonerange, then the next zone
  zoneskip bytes on, the first again past the end; each thread works its own share of a
  sequential range, as iolab splits it); `random_generator=lfsr` visits each block once per pass,
  in iolab's seeded order (a permutation, not fio's LFSR sequence), and `tausworthe` and
  `tausworthe64` are iolab's own uniform generator (fio promises no more of them).
- **Rates and think time** are the run's pacing (`matrix.pace`, fio's words: `rate_iops=300
  thinktime=2ms`; `iolab run --rate`, `--rate-iops`, `--rate-process`, `--rate-min`, `--thinktime`,
  `--thinktime-spin`, `--thinktime-blocks`), each thread paced on its own as fio paces each clone.
  `rate` (bytes per second) and `rate_iops` cap each direction (`a,b`: reads, writes; `a,` reads
  only, `,b` writes only; a third value, trims', is read and unused), linearly (the n-th I/O of a
  direction issued no earlier than n / rate after the start, so a stall is caught up, fio's default)
  or, with `rate_process=poisson`, at exponential gaps of the rate's mean; the next I/O waits for
  its direction's turn. `rate_min` and `rate_iops_min` fail the run when a direction's issued rate
  over a `rate_cycle` (1000 ms) of the measured window falls below them, as fio ends such a job.
  `thinktime` stalls after every `thinktime_blocks` I/Os (completed, or issued with
  `thinktime_blocks_type=issue`) or after `thinktime_iotime` of I/O, once nothing is in flight
  (fio's quiesce), spinning `thinktime_spin` of it on the CPU and sleeping the rest. Latency is
  measured from each I/O's submission, not from the instant it was due (fio does the same), so a
  rate below what the device can do measures the device, not the schedule. The record's
  `results.pace` gives the pacing asked and each thread's achieved IOPS and bandwidth per
  direction. The unpaced loop is compiled apart and pays nothing for it.
  `io_submit_mode=offload` (with a rate; `iolab run --io-submit-mode offload`) paces and queues on
  the job's thread and submits from `iodepth` submission threads, each with its own instance of the
  interface at depth 1, as fio's `rate-submit.c` (a synchronous engine keeps its iodepth); an I/O's
  latency counts from when it was queued, so a device that falls behind the schedule shows in the
  latency instead of slipping the schedule unseen (the record's `results.pace.submit_mode` is
  `offload` and its `latency_from` `queued`; the queue holds up to 65536 I/Os per thread, then the
  pacing waits). Offload with think time, `verify`, `sqthread_poll` or the user-space driver is
  refused.
- **Flows** (`flow`, `flow_id`, `flow_sleep`) are fio's `flow.c`: the jobs of a group that name
  one flow id share one counter (`matrix.pace`: `flow=8 flow_id=0 flow_sleep=1000us`); each
  thread (a fio clone, weighing its job's `flow`) adds every I/O it issues to it and is held back
  while its share of the counter is above its share of the weight, until nothing is in flight and
  then `flow_sleep` microseconds (fio's 0: it looks again at once, yielding the CPU); a thread's
  I/O and weight leave the flow when its loop ends, as in fio, so the jobs still running are held
  to their own ratio. Two jobs with `flow=8` and `flow=1` issue I/O about 8:1. A job alone (or
  `--fio-ignore concurrency`) shares no flow and runs unpaced. Each member's record says its flow
  (`group.flow`: the id, every member's weight, threads and measured I/Os, and its share of the
  flow's weight beside its share of the I/O).
- **exitall** ends the jobs beside a job when it ends (`exitall_on_error`: only when it fails),
  as `exit_what` says: `group` (fio's default) the jobs of its reporting group (the jobs run
  together with it, split by `new_group`), `stonewall` every job of the group already started
  (not one still in its `startdelay`), `all` every job of the group, and the jobs after the group
  are not planned (fio never starts them; the dry run names them). fio's `exitall` is
  process-wide: set on any job, every job of the file has it. The jobs stopped are told through
  the stop flag their loops already watch (no work per I/O); each keeps the I/O it did, and its
  record's `group.stopped_by` names the job whose exitall stopped it (`group.exits` says what a
  job's end stops; `results.ended_by` is absent: neither limit ended it). Alone, exitall stops
  nothing.
- **NUMA and priorities** are given to each issuing thread: `numa_cpu_nodes` (a node or a list,
  `0-1`) pins the threads to those nodes' CPUs (`iolab run --numa`); `numa_mem_policy` (`default`,
  `local`, `prefer:N`, `bind:NODES`, `interleave:NODES`) is set on each thread (set_mempolicy)
  before its I/O buffers are allocated and bound on them (mbind, moving pages already there;
  `--mem-policy`); `prioclass`/`prio` are the thread's I/O priority (ioprio_set; `--ioprio`);
  `cmdprio_percentage` with `cmdprio_class` (realtime by default) and `cmdprio` (level 0) give that
  share of the commands, per direction, that priority (`--cmdprio 20%rt:0`: libaio's
  `aio_reqprio` with IOCB_FLAG_IOPRIO, io_uring's SQE `ioprio`; refused for the other engines),
  drawn from a seeded sequence; a run without them does no per-command work. Each worker reads
  them back from the kernel (get_mempolicy, move_pages for the node of every buffer page,
  ioprio_get) and a difference fails the run; the record's `results.thread_settings` gives what
  was asked, each thread's read-back, and the commands sent and those that carried the priority.
  A node that does not exist is refused in one line when the run starts, before anything changes.
- **Steady state** (`ss`, `ss_dur`, `ss_ramp`) is the run's `steadystate` (`iolab run
  --steadystate 'iops:10% dur=30s ramp=10s'`): after `ss_ramp` seconds of the measured window
  (after `ramp_time`), at each second's boundary the coordinating thread takes that second's I/Os
  of all the run's threads together (never per I/O) and, once it holds the last `ss_dur` seconds,
  checks fio's criterion on them: `iops` or `bw`, every second within the limit of their mean, or
  `iops_slope` or `bw_slope`, their least-squares slope (per second) under it; a limit with `%` is
  a percentage of the mean (fio's steadystate.c). Met, the run ends there, as fio ends the job,
  whatever its budget; the record's `results.steadystate` gives `attained`, `attained_at_s`, the
  last window's `samples`, `mean`, `max_deviation` or `slope` and `criterion` (fio's
  `steadystate` object as a model), and `results.ended_by` is `steadystate`. `ss_dur` is
  required, in whole seconds (fio's `ss_interval` of 1 s).
- **Verify**: fio's checksums (`verify=crc32c`, `md5`, ...) are iolab's own checksummed blocks
  (every read checked, every written block read back after the run). `verify=meta` (fio's header
  at the start of every `verify_interval` bytes: its magic, type, length, the interval's own
  offset, the thread and the write's number, a crc32c over them) and `verify=pattern` (no header)
  with `verify_pattern` (`0x` hexadecimal or a quoted string, up to 32 bytes; alone it means
  fio's header and the pattern) are written as fio writes them (the pattern from each block's
  start, each header over it; the header's time and rand_seed are zero) and every read checks
  each interval's header (magic, length, offset, crc) and pattern: a read that fails is a failed
  I/O of kind verify (the record's `results.verify.mismatches`, and the run stops unless
  `continue_on_error`). `do_verify=0` writes the form and reads nothing back. The plan's
  `[options] verify_fio` carries it in fio's words. Blocks are filled only when verify is on.
  `fill_device=1` is the budget of the target's whole size (fio writes until the device or file is
  full; iolab's target must exist).
- An option iolab cannot honour is refused in one line naming the option and the job (exit 2);
  `--fio-ignore OPTION` (repeatable) drops it, shown in the dry run and recorded in the plan's
  description (a sweep stores it with the plan; `iolab run --fio` keeps it in the record's command
  line).

**fio's results beside iolab's**: `iolab import fio RESULT.json --db DB` stores fio's JSON output
(`--output-format=json`, or `json+`, whose latency bins become the run's histogram; of the several
documents `--status-interval` writes, the last, the whole run, and it says so) as runs of fio's,
one per job fio reports (with `group_reporting`, one for the group; numjobs clones reported one by
one are refused, since iolab's run is all of them together). Each job is a sweep of its own, named
`RESULT.json/JOB`, whose configuration comes from the options fio printed (its `global options`,
then the job's `job options`) through this same table, so fio's run and iolab's run of one job file
have one configuration key (`iolab results --config KEY` lists both; an option iolab refuses is
refused here too, and `--fio-ignore` drops it). fio prints no option written without a value
(`time_based`, `hipri`, `sqthread_poll`, `fixedbufs` as bare words): a bare `time_based` is seen in
what fio did (more bytes than the job's, which fio does only time_based, and the mapping line says
so); write the others with a value (`hipri=1`) for the import to see them. The record carries
`\"tool\": {\"name\": \"fio\", \"version\": \"fio-3.33\"}`, the options as fio printed them (`fio.options`)
and fio's numbers as printed, never recomputed: IOPS,
bytes per second, bytes and I/Os per direction (the total is the one direction that did I/O, or the
two added), mean, min, max and percentile latency (fio's completion latency `clat`, or `lat` where
`lat_percentiles` gave it the percentiles: `lat_source` says which; a percentile fio did not print
is null), the run time, and fio's `usr_cpu`, `sys_cpu` and `ctx` (`results.cpu.fio_usr_pct`,
`fio_sys_pct`, `fio_ctx`). What fio does not report is null: iolab's own CPU figures, the
completion path the device showed, the cost by thread class, energy, the host and kernel. A file
imported again stores nothing twice (each job's identity is derived from the file's content).
";

/// Is this plan file a fio job file: named `*.fio`, or holding a `[section]` that no plan has
/// (a plan's are `[matrix]`, `[options]`, `[fileset]`, `[energy]` and `[[rule]]`)?
pub(crate) fn is_fio(path: &Path, text: &str) -> bool {
    if path.extension().is_some_and(|e| e == "fio") {
        return true;
    }
    text.lines().map(|l| l.trim()).any(|l| {
        l.starts_with('[')
            && !l.starts_with("[[")
            && !matches!(l.trim_end_matches(|c| c != ']').trim_matches(['[', ']', ' ']), "matrix" | "options" | "fileset" | "energy")
            && !l.contains('=')
    })
}

/// The jobs of fio job file `path` (its `text`) as plans, in file order; `only`: just that job.
/// `ignore`: `--fio-ignore`'s options. `targets`: the command line's, replacing every job's.
pub fn plans(path: &Path, text: &str, only: Option<&str>, ignore: &[String], targets: &[String]) -> Result<Vec<Mapped>, String> {
    let env = |k: &str| std::env::var(k).ok();
    let sections = parse::parse_text(text, path, &env)?;
    let stem = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "fio".into());
    for i in ignore {
        if i != CONCURRENCY && table::find(i).is_none() {
            return Err(format!("--fio-ignore {i}: not a fio option (docs/fio.md lists them)"));
        }
        let used = sections
            .iter()
            .flat_map(|s| &s.options)
            .any(|o| table::find(&o.key).is_some_and(|e| e.name == i || e.aliases.contains(&i.as_str())));
        if i != CONCURRENCY && !used {
            return Err(format!("--fio-ignore {i}: no job of {} sets it", path.display()));
        }
    }
    let names: Vec<String> = sections.iter().filter(|s| !s.global).map(|s| s.name.clone()).collect();
    if names.is_empty() {
        return Err(format!("{}: no job in it (only [global] sections)", path.display()));
    }
    if let Some(o) = only {
        if !names.iter().any(|n| n == o) {
            return Err(format!("--job {o}: {} has no such job: its jobs are {}", path.display(), names.join(", ")));
        }
    }
    let mut out = Vec::new();
    let mut globals: Vec<parse::Opt> = Vec::new();
    let mut earlier: Vec<String> = Vec::new();
    let exitall = process_wide_exitall(&sections);
    for s in &sections {
        if s.global {
            globals.extend(s.options.iter().cloned());
            continue;
        }
        if only.is_none_or(|o| o == s.name) {
            let mut written: Vec<parse::Opt> = globals.iter().chain(&s.options).cloned().collect();
            if let Some(e) = &exitall {
                if !written.iter().any(|o| find(&o.key).is_some_and(|t| t.name == "exitall")) {
                    written.insert(0, e.clone());
                }
            }
            let mut ignore = ignore.to_vec();
            if only.is_some() {
                // One job alone runs beside nothing.
                ignore.push(CONCURRENCY.into());
            }
            out.push(translate(&stem, &s.name, &written, &earlier, &ignore, targets)?);
        }
        earlier.push(s.name.clone());
    }
    name_groups(&stem, &mut out)?;
    if !ignore.iter().any(|i| i == CONCURRENCY) {
        drop_after_exit_all(&mut out);
    }
    Ok(out)
}

/// fio's `exitall` is process-wide (its option sets one flag for the whole run): set on any job
/// of the file, every job's end stops what its own `exit_what` names. The option to add to the
/// jobs that do not set it, saying where it was set; None when no job sets it.
fn process_wide_exitall(sections: &[parse::Section]) -> Option<Opt> {
    let set = sections
        .iter()
        .flat_map(|s| &s.options)
        .find(|o| find(&o.key).is_some_and(|t| t.name == "exitall") && flag(o.value.as_deref()) == Ok(true))?;
    Some(Opt { key: "exitall".into(), value: Some("1".into()), at: format!("{}, process-wide in fio", set.at) })
}

/// The job's pace, as its plan says (`matrix.pace`).
fn pace_of(m: &Mapped) -> Option<crate::plan::pace::Pace> {
    let t: toml::Table = toml::from_str(&m.text).ok()?;
    t.get("matrix")?.get("pace")?.as_array()?.first()?.as_str()?.parse().ok()
}

/// fio's `exit_what=all` with exitall: the job's end stops every job, and those not yet started
/// never run. The jobs after its group are not planned, and its dry run says so.
fn drop_after_exit_all(jobs: &mut Vec<Mapped>) {
    use crate::plan::pace::ExitWhat;
    let Some(i) = jobs.iter().position(|m| pace_of(m).is_some_and(|p| p.exitall && p.exit_what == ExitWhat::All)) else { return };
    let end = match &jobs[i].group {
        Some(g) => jobs.iter().rposition(|j| j.group.as_ref() == Some(g)).unwrap_or(i),
        None => i,
    };
    if end + 1 >= jobs.len() {
        return;
    }
    let never: Vec<String> = jobs[end + 1..].iter().map(|j| j.name.rsplit('/').next().unwrap_or("").to_string()).collect();
    jobs.truncate(end + 1);
    jobs[i].lines.push((
        "(exit_what=all)".into(),
        format!("the jobs after its group ({}) never run: fio's exit_what=all stops every job when this one ends, those not yet started included, so iolab plans none of them", never.join(", ")),
    ));
}

/// The groups of jobs run together: a job that nothing orders after the one above joins its
/// group. A group of two or more is named `FILE/gN` (N counting every group from 1, one job
/// alone included) and each member's dry run says whom it starts with.
fn name_groups(stem: &str, jobs: &mut [Mapped]) -> Result<(), String> {
    let mut starts: Vec<usize> = (0..jobs.len()).filter(|&i| i == 0 || !jobs[i].joins_previous).collect();
    starts.push(jobs.len());
    for (g, w) in starts.windows(2).enumerate() {
        let members = &mut jobs[w[0]..w[1]];
        if members.len() < 2 {
            continue;
        }
        let id = format!("{stem}/g{}", g + 1);
        let names: Vec<String> = members.iter().map(|m| m.name.rsplit('/').next().unwrap_or("").to_string()).collect();
        exit_lines(members, &names);
        for m in members.iter_mut() {
            let delay = if m.start_delay_s > 0.0 { format!(", {} s after its start", m.start_delay_s) } else { String::new() };
            m.lines.push(("(group)".into(), format!("{id}: runs together with {}{delay} (fio starts them at once)", names.join(", "))));
            m.group = Some(id.clone());
        }
    }
    Ok(())
}

/// Each member with fio's exitall (or exitall_on_error): the dry run's line naming what its end
/// stops (`session::group` does it, by the same rule: `exit_what=group` reaches the members from
/// the last `new_group` to the next, `stonewall` and `all` every member).
fn exit_lines(members: &mut [Mapped], names: &[String]) {
    use crate::plan::pace::ExitWhat;
    let paces: Vec<crate::plan::pace::Pace> = members.iter().map(|m| pace_of(m).unwrap_or_default()).collect();
    let report: Vec<usize> = paces
        .iter()
        .enumerate()
        .scan(0, |g, (n, p)| {
            if n > 0 && p.new_group {
                *g += 1;
            }
            Some(*g)
        })
        .collect();
    for n in 0..members.len() {
        let p = &paces[n];
        let Some(opt) = members[n].exits_group.clone().filter(|_| p.exits()) else { continue };
        let stops: Vec<&str> = (0..members.len())
            .filter(|&o| o != n && (p.exit_what != ExitWhat::Group || report[o] == report[n]))
            .map(|o| names[o].as_str())
            .collect();
        let when = if p.exitall { "when it ends" } else { "when it ends in a failure" };
        let to = match (stops.is_empty(), p.exit_what) {
            (true, _) => format!("{when} it stops nothing: no other job is in its reporting group (new_group)"),
            (false, ExitWhat::Stonewall) => {
                format!("{when} it stops {} (those started by then; fio's exit_what=stonewall)", stops.join(", "))
            }
            (false, w) => format!(
                "{when} it stops {} (fio's exit_what={}); each keeps the I/O it did, its record saying who stopped it",
                stops.join(", "),
                w.name()
            ),
        };
        members[n].lines.push((format!("({opt})"), to));
    }
}

/// One job of fio's JSON output as a plan, through the same table as a job file: `printed` is
/// the job's options as fio printed them (its `global options`, then its `job options`), each
/// named with where it was printed (`at`). `ignore`: `--fio-ignore`'s options. The job stands
/// alone (a result, run beside nothing that iolab would run).
pub(crate) fn plan_of_printed(stem: &str, name: &str, printed: &[(String, String, String)], ignore: &[String]) -> Result<Mapped, String> {
    let written: Vec<Opt> =
        printed.iter().map(|(key, value, at)| Opt { key: key.clone(), value: Some(value.clone()), at: at.clone() }).collect();
    for i in ignore {
        if i != CONCURRENCY && table::find(i).is_none() {
            return Err(format!("--fio-ignore {i}: not a fio option (docs/fio.md lists them)"));
        }
    }
    let mut ignore = ignore.to_vec();
    ignore.push(CONCURRENCY.into());
    translate(stem, name, &written, &[], &ignore, &[])
}

/// A plan's configurations as a fio job file: one job per configuration, in the plan's order,
/// each after the one before (stonewall), through the table's reverse direction.
pub fn export(plan_name: &str, text: &str) -> Result<String, String> {
    let e = crate::plan::sweep::expand(text, &[])?;
    let mut out = format!(
        "; fio job file written by `iolab export fio` from plan '{}' ({plan_name}): one job per configuration,\n; each after the one before, with iolab's meaning of every value (docs/fio.md)\n[global]\nthread=1\ngroup_reporting=1\n",
        e.name
    );
    for (n, c) in e.configs.iter().enumerate() {
        let j = &c.job;
        let no = |what: &str| format!("configuration {}: {what}: fio has no equivalent", c.key);
        if !j.system.set.is_empty() || !j.system.setup.is_empty() {
            return Err(no(&format!(
                "the system settings {}",
                j.system.set.iter().chain(&j.system.setup).cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        if j.io.options.null.null_script.is_some() {
            return Err(no("null_script"));
        }
        if j.io.options.ring.sq_idle_ms != crate::interfaces::Options::default().ring.sq_idle_ms
            && j.io.submit == crate::plan::Submit::Sqpoll
        {
            return Err(no("sq_idle_ms"));
        }
        if j.io.options.ring.iowait == crate::interfaces::Iowait::Off {
            return Err(no("iowait off (IORING_ENTER_NO_IOWAIT)"));
        }
        out += &format!("\n; {}\n[{n}]\nstonewall\n", c.key);
        for o in table::TABLE {
            if let table::How::Sets { export: Some(x), .. } = &o.how {
                if let Some(v) = x(j).map_err(|why| format!("configuration {}: {why}", c.key))? {
                    out += &format!("{}={v}\n", o.name);
                }
            }
        }
    }
    Ok(out)
}

// ---- one job ----

/// The size of the file or device at `path` (its end, as fio's `get_file_size`), read only.
fn target_size(path: &str) -> Result<u64, String> {
    use std::io::Seek;
    let mut f = std::fs::File::open(path).map_err(|e| format!("cannot read {path} for its size: {e}"))?;
    f.seek(std::io::SeekFrom::End(0)).map_err(|e| format!("cannot read {path} for its size: {e}"))
}

/// Translate job `name` (its options in effect, in order) into a plan. `ignore`: options the
/// user drops (`--fio-ignore`). Err: one line naming the job, where and the option.
#[allow(clippy::too_many_arguments)]
fn translate(
    stem: &str,
    name: &str,
    written: &[Opt],
    earlier: &[String],
    ignore: &[String],
    cli_targets: &[String],
) -> Result<Mapped, String> {
    let refuse = |o: &Opt, why: &str| format!("fio job '{name}' ({}): {}: {why} (--fio-ignore {} drops it)", o.at, o.shown(), o.key);
    let mut lines: Vec<(String, String)> = Vec::new();
    let mut dropped: Vec<String> = Vec::new();
    let mut opts: Vec<(&'static str, Opt)> = Vec::new();
    for o in written {
        let Some(entry) = find(&o.key) else {
            return Err(format!(
                "fio job '{name}' ({}): '{}' is not a fio option (docs/fio.md lists fio 3.33's and the engines' options)",
                o.at, o.key
            ));
        };
        if ignore.iter().any(|i| i == entry.name || entry.aliases.contains(&i.as_str())) {
            lines.push((o.shown(), "(dropped: --fio-ignore)".into()));
            if !dropped.contains(&o.shown()) {
                dropped.push(o.shown());
            }
            continue;
        }
        opts.push((entry.name, o.clone()));
    }
    let value = |n: &str| opts.iter().rev().find(|(k, _)| *k == n).map(|(_, o)| o.value.as_deref().unwrap_or("1").to_string());
    let engine_name = value("ioengine").unwrap_or_else(|| "psync".into());
    let (kind, _) = match engine(engine_name.trim()) {
        Ok(k) => k,
        Err(why) => {
            let o = &opts.iter().rev().find(|(k, _)| *k == "ioengine").expect("an engine that is not the default was written").1;
            return Err(refuse(o, &why));
        }
    };
    let kb = match value("kb_base").as_deref().map(str::trim) {
        None | Some("1024") => 1024,
        Some("1000") => 1000,
        Some(other) => {
            let o = &opts.iter().rev().find(|(k, _)| *k == "kb_base").unwrap().1;
            return Err(refuse(o, &format!("'{other}' is not 1024 or 1000")));
        }
    };
    let info = kind.info();
    let mut t = Tr {
        job: name,
        opts: opts.clone(),
        kb,
        top: toml::Table::new(),
        matrix: toml::Table::new(),
        options: toml::Table::new(),
        kind,
        sync_engine: info.behaviour == crate::interfaces::Behaviour::Sync,
        ring: matches!(kind, InterfaceKind::IoUring | InterfaceKind::NvmePassthru),
        diskless: info.diskless,
        region: None,
        earlier,
        after_previous: false,
        cli_targets,
        targets: Vec::new(),
        notes: Vec::new(),
        exits_group: None,
    };
    // fio's defaults that differ from iolab's, set before the job's own options (not where the
    // user dropped the option: then iolab's own default stands).
    let untouched = |n: &str| !written.iter().any(|o| find(&o.key).is_some_and(|e| e.name == n));
    if untouched("ioengine") {
        lines
            .push(("(no ioengine)".into(), format!("{} (fio's default engine)", t.set_matrix("interface", Value::String("psync".into())))));
    }
    if untouched("direct") && untouched("buffered") && !t.diskless && kind != InterfaceKind::NvmePassthru {
        lines.push(("(no direct)".into(), format!("{} (fio's default direct=0)", t.set_option("buffered", Value::Boolean(true)))));
    }
    if t.ring {
        for (opt, key) in [("fixedbufs", "register_buffers"), ("registerfiles", "register_files")] {
            if untouched(opt) {
                lines.push((format!("(no {opt})"), format!("{} (fio's default {opt}=0)", t.set_option(key, Value::Boolean(false)))));
            }
        }
    }
    // Each option once, at its last writing, in the order written.
    let last: Vec<usize> = (0..opts.len()).filter(|&i| !opts[i + 1..].iter().any(|(k, _)| *k == opts[i].0)).collect();
    for i in last {
        let (key, o) = &opts[i];
        let entry = TABLE.iter().find(|e| e.name == *key).expect("found above");
        let line = match &entry.how {
            How::Sets { set, .. } => set(&mut t, o.value.as_deref()).map_err(|why| refuse(o, &why))?,
            How::Same(why) => format!("(same: {why})"),
            How::Refused(why, fine) => {
                let v = o.value.as_deref().unwrap_or("1").trim();
                if fine.iter().any(|f| f.eq_ignore_ascii_case(v)) {
                    "(accepted: this value asks for nothing iolab does not do)".into()
                } else {
                    return Err(refuse(o, why));
                }
            }
        };
        lines.push((o.shown(), line));
    }
    let find_opt = |n: &str| opts.iter().rev().find(|(k, _)| *k == n).map(|(_, o)| o.clone());
    // fill_device: until the target is full (fio's ENOSPC): its whole size, whatever size= says.
    if value("fill_device").is_some_and(|v| flag(Some(&v)).unwrap_or(false)) {
        if cli_targets.is_empty() && t.targets.is_empty() {
            return Err(refuse(&find_opt("fill_device").unwrap(), "iolab fills an existing target to its end: give filename= or a target"));
        }
        t.region = None;
    }
    // Run order: one job at a time, in file order.
    let sequential = ignore.iter().any(|i| i == CONCURRENCY);
    if sequential && !earlier.is_empty() && !t.after_previous {
        dropped.push(format!("{CONCURRENCY} (run after '{}', not beside it)", earlier.last().unwrap()));
    }
    // Without stonewall, fio starts the job together with the one above: one group.
    let joins_previous = !sequential && !earlier.is_empty() && !t.after_previous;
    let start_delay_s = value("startdelay")
        .map(|v| parse::seconds(&v))
        .transpose()
        .map_err(|w| refuse(&find_opt("startdelay").unwrap(), &w))?
        .unwrap_or(0.0);
    // Buffered libaio runs, as in fio, and the record says how the kernel ran it.
    if info.async_needs_direct && t.options.get("buffered").and_then(Value::as_bool) == Some(true) {
        lines.push((format!("(buffered {})", kind.name()), crate::interfaces::libaio::BUFFERED.into()));
    }
    if !t.diskless && t.cli_targets.is_empty() && t.targets.is_empty() {
        if t.region.is_none() {
            return Err(format!(
                "fio job '{name}': size: without filename= fio makes a file of size= bytes, and the job gives none: give size= (iolab makes a temporary file of that size) or filename="
            ));
        }
        lines.push((
            "(no filename)".into(),
            "the temporary target (fio would lay out its own file; iolab makes one, fills it, and removes it after)".into(),
        ));
    }
    let targets: Vec<String> = if t.diskless {
        Vec::new()
    } else if cli_targets.is_empty() {
        t.targets.clone()
    } else {
        cli_targets.to_vec()
    };
    if !targets.is_empty() {
        t.top.insert("targets".into(), Value::Array(targets.iter().cloned().map(Value::String).collect()));
    }
    // The budget.
    let clones =
        value("numjobs").map(|n| count(Some(&n))).transpose().map_err(|w| refuse(&find_opt("numjobs").unwrap(), &w))?.unwrap_or(1).max(1)
            as u64;
    let time_based =
        value("time_based").map(|v| flag(Some(&v))).transpose().map_err(|w| refuse(&find_opt("time_based").unwrap(), &w))?.unwrap_or(false);
    let runtime = value("runtime").map(|v| parse::seconds(&v)).transpose().map_err(|w| refuse(&find_opt("runtime").unwrap(), &w))?;
    if let Some(r) = t.region {
        t.top.insert("size".into(), Value::String(r.to_string()));
    }
    let budget_line = if time_based {
        let Some(r) = runtime.filter(|r| *r > 0.0) else {
            return Err(refuse(&find_opt("time_based").unwrap(), "runs until runtime=, and the job gives none"));
        };
        if let Some(o) = find_opt("number_ios") {
            return Err(refuse(&o, "with time_based fio ends at whichever comes first, number_ios or runtime; iolab ends at one"));
        }
        t.set_top("runtime", Value::String(format!("{r}s")))
    } else {
        if let Some(o) = find_opt("ramp_time") {
            return Err(refuse(&o, "without time_based fio counts the ramp's I/O in the job's size; iolab's budget starts after the ramp: add time_based with runtime="));
        }
        let io = match value("io_size") {
            Some(v) => Some(parse::size(&v, kb).map_err(|w| refuse(&find_opt("io_size").unwrap(), &w))?),
            None => t.region,
        };
        let per_clone = match io {
            Some(n) => n,
            None => {
                let Some(first) = targets.first() else {
                    return Err(format!("fio job '{name}': size: the job gives no size, io_size or runtime: give one"));
                };
                let whole = targets.iter().map(|p| target_size(p)).collect::<Result<Vec<u64>, String>>().map_err(|e| {
                    format!("fio job '{name}': size: the job gives no size, io_size or runtime, so fio covers all of {first} once, and {e}: give size=")
                })?;
                let off = value("offset").and_then(|o| parse::size(&o, kb).ok()).unwrap_or(0);
                whole.iter().map(|w| w.saturating_sub(off)).sum()
            }
        };
        let loops =
            value("loops").map(|v| count(Some(&v))).transpose().map_err(|w| refuse(&find_opt("loops").unwrap(), &w))?.unwrap_or(1) as u64;
        let bytes = per_clone.saturating_mul(loops).saturating_mul(clones);
        let bs = match value("bs") {
            Some(b) => one_bs(&t, &b).unwrap_or(4096),
            None => 4096,
        };
        let ios = value("number_ios").map(|v| count(Some(&v))).transpose().map_err(|w| refuse(&find_opt("number_ios").unwrap(), &w))?;
        let count = match ios {
            Some(n) if n > 0 && (n as u64).saturating_mul(clones).saturating_mul(bs) < bytes => {
                format!("{} (number_ios x numjobs)", t.set_top("ios", Value::Integer(n.saturating_mul(clones as i64))))
            }
            _ => format!("{} (size x loops x numjobs, as fio)", t.set_top("bytes", Value::String(bytes.to_string()))),
        };
        if bytes == 0 {
            return Err(format!("fio job '{name}': size: the job has no bytes to do"));
        }
        // Without time_based, a runtime (0: none) ends the job if it comes before the count.
        match runtime.filter(|r| *r > 0.0) {
            Some(r) => format!(
                "{} or {count}, whichever comes first (fio's runtime without time_based)",
                t.set_top("runtime", Value::String(format!("{r}s")))
            ),
            None => count,
        }
    };
    lines.push(("(budget)".into(), budget_line));
    // Unless the job sets batch_reap, fio waits for one completion (iodepth_batch_complete_min=1).
    if t.matrix.contains_key("batch") && !t.options.contains_key("batch_reap") {
        lines
            .push(("(no iodepth_batch_complete_min)".into(), format!("{} (fio's default)", t.set_option("batch_reap", Value::Integer(1)))));
    }
    let plan_name = format!("{stem}/{name}");
    let mut description = format!("fio job '{name}' of {stem}");
    for (_, d) in &t.notes {
        description += &format!(": {d}");
    }
    if !dropped.is_empty() {
        description += &format!("; dropped with --fio-ignore: {}", dropped.join(", "));
    }
    let mut plan = toml::Table::new();
    plan.insert("name".into(), Value::String(plan_name.clone()));
    plan.insert("description".into(), Value::String(description));
    plan.extend(t.top);
    plan.insert("matrix".into(), Value::Table(t.matrix));
    if !t.options.is_empty() {
        plan.insert("options".into(), Value::Table(t.options));
    }
    let text = toml::to_string(&plan).map_err(|e| format!("fio job '{name}': {e}"))?;
    let text = format!("# iolab's plan for fio job '{name}' of {stem} (iolab sweep --dry-run shows the mapping)\n{text}");
    // What iolab's own checks say of the job (validate), before anything runs.
    if let Err(e) = crate::plan::sweep::expand(&text, &[]) {
        // Named by the fio option behind the iolab flag the check names, where there is one.
        let e = e.to_string();
        let why = e.trim_start_matches("plan: ");
        let inner = why.split_once("(1 by: ").map(|(_, r)| r.trim_end_matches("): change the matrix or the rules")).unwrap_or(why);
        let behind = FLAGS.iter().filter(|(flag, _)| inner.contains(flag)).find_map(|(_, opt)| find_opt(opt));
        return Err(match behind {
            Some(o) => format!("fio job '{name}' ({}): {}: iolab refuses the job it maps to: {inner}", o.at, o.shown()),
            None => format!("fio job '{name}': iolab refuses the job it maps to: {inner}"),
        });
    }
    Ok(Mapped { name: plan_name, text, lines, group: None, start_delay_s, joins_previous, exits_group: t.exits_group })
}

/// iolab's flags, as its checks name them, and the fio options that set them.
const FLAGS: [(&str, &str); 14] = [
    ("--submit", "sqthread_poll"),
    ("sqpoll", "sqthread_poll"),
    ("--complete", "hipri"),
    ("--qd", "iodepth"),
    ("--batch", "iodepth_batch"),
    ("--buffered", "direct"),
    ("--verify", "verify"),
    ("--threads", "numjobs"),
    ("--bs", "bs"),
    ("--cpus", "cpus_allowed"),
    ("--sq-cpu", "sqthread_poll_cpu"),
    ("--numa", "numa_cpu_nodes"),
    ("--ramp", "ramp_time"),
    ("--runtime", "runtime"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Budget;

    fn plan(text: &str) -> Result<Vec<Mapped>, String> {
        plans(Path::new("t.fio"), text, None, &[], &[])
    }

    fn toml_of(m: &Mapped) -> toml::Table {
        toml::from_str(&m.text).unwrap()
    }

    /// Every `[global]` applies to the jobs below it, in order; a job's own options win.
    #[test]
    fn global_scoping_follows_the_file_order() {
        let text = "[global]\nbs=8k\nsize=1m\ndirect=1\n[a]\n[global]\nbs=16k\n[b]\nstonewall\n[c]\nstonewall\nbs=32k\n";
        let p = plan(text).unwrap();
        let bs: Vec<i64> = p.iter().map(|m| toml_of(m)["matrix"]["bs"][0].as_integer().unwrap()).collect();
        assert_eq!(bs, [8192, 16384, 32768]);
        assert_eq!(p[0].name, "t.fio/a");
    }

    #[test]
    fn jobs_fio_runs_together_are_one_group_or_sequenced() {
        let text = "[global]\nsize=1m\ndirect=1\n[a]\n[b]\nstartdelay=2\n[c]\nstonewall\n[d]\n";
        let p = plan(text).unwrap();
        let groups: Vec<Option<&str>> = p.iter().map(|m| m.group.as_deref()).collect();
        assert_eq!(groups, [Some("t.fio/g1"), Some("t.fio/g1"), Some("t.fio/g2"), Some("t.fio/g2")]);
        assert_eq!((p[0].start_delay_s, p[1].start_delay_s), (0.0, 2.0));
        assert!(
            p[1].lines.iter().any(|(o, to)| o == "(group)" && to.contains("runs together with a, b, 2 s after its start")),
            "{:?}",
            p[1].lines
        );
        // A job alone is in no group.
        assert_eq!(plan("[global]\nsize=1m\ndirect=1\n[a]\n[b]\nstonewall\n").unwrap()[1].group, None);
        let p = plans(Path::new("t.fio"), text, None, &[CONCURRENCY.into()], &[]).unwrap();
        assert!(p.iter().all(|m| m.group.is_none()));
        assert!(toml_of(&p[1])["description"].as_str().unwrap().contains("dropped with --fio-ignore: concurrency"));
        assert_eq!(plans(Path::new("t.fio"), text, Some("b"), &[], &[]).unwrap()[0].group, None);
        assert!(plan("[global]\nsize=1m\ndirect=1\n[a]\n[b]\nwait_for=a\n").unwrap()[1].group.is_none());
        let e = plan("[global]\nsize=1m\ndirect=1\n[a]\n[b]\n[c]\nwait_for=a\n").unwrap_err();
        assert!(e.contains("wait_for=a: waits for 'a', which is not the job just above it"), "{e}");
        assert!(
            plan("[global]\nsize=1m\ndirect=1\nstonewall\n[a]\n[b]\n").unwrap().iter().all(|m| m.group.is_none()),
            "a global stonewall orders every job"
        );
        let e = plan("[global]\nsize=1m\ndirect=1\n[a]\nstartdelay=1-4\n").unwrap_err();
        assert!(e.contains("startdelay=1-4: a range is a random delay"), "{e}");
    }

    #[test]
    fn the_budget_is_fios() {
        let t = |text: &str| toml_of(&plan(text).unwrap()[0]);
        let p = t("[j]\nsize=1m\nnumjobs=2\nloops=3\ndirect=1\n");
        assert_eq!(p["bytes"].as_str(), Some((6u64 << 20).to_string().as_str()));
        assert_eq!(p["size"].as_str(), Some("1048576"));
        assert_eq!(p["matrix"]["threads"][0].as_integer(), Some(2));
        let p = t("[j]\nsize=1m\nnumber_ios=10\nnumjobs=2\ndirect=1\n");
        assert_eq!(p["ios"].as_integer(), Some(20));
        let p = t("[j]\nsize=1g\ntime_based\nruntime=5m\nramp_time=2s\ndirect=1\n");
        assert_eq!((p["runtime"].as_str(), p["ramp"].as_str()), (Some("300s"), Some("2s")));
        // Without time_based, whichever comes first of the runtime and the size (or number_ios).
        let budget = |text: &str| {
            let m = &plan(text).unwrap()[0];
            crate::plan::sweep::expand(&m.text, &[]).unwrap().configs[0].job.timing.budget
        };
        assert_eq!(budget("[j]\nsize=1g\nruntime=60\ndirect=1\n"), Budget::SecondsOrBytes { seconds: 60.0, bytes: 1 << 30 });
        assert_eq!(
            budget("[j]\nsize=1g\ntimeout=1m\nnumber_ios=100\nnumjobs=2\ndirect=1\n"),
            Budget::SecondsOrIos { seconds: 60.0, ios: 200 }
        );
        assert_eq!(budget("[j]\nsize=1m\nruntime=0\ndirect=1\n"), Budget::Bytes(1 << 20), "runtime=0: no time limit");
        let e = plan("[j]\nsize=1g\nruntime=60\nramp_time=5\ndirect=1\n").unwrap_err();
        assert!(e.contains("ramp_time=5: without time_based fio counts the ramp's I/O"), "{e}");
        let e = plan("[j]\ndirect=1\n").unwrap_err();
        assert!(e.contains("size:"), "{e}");
    }

    #[test]
    fn defaults_refusals_and_ignores() {
        let p = &plan("[j]\nioengine=io_uring\nsize=1m\ndirect=1\nhipri\nsqthread_poll=1\niodepth=8\niodepth_batch=4\n").unwrap()[0];
        let t = toml_of(p);
        assert_eq!(t["matrix"]["complete"][0].as_str(), Some("poll"));
        assert_eq!(t["matrix"]["submit"][0].as_str(), Some("sqpoll"));
        assert_eq!(t["options"]["register_buffers"].as_bool(), Some(false));
        assert_eq!(t["options"]["batch_reap"].as_integer(), Some(1));
        let p = &plan("[j]\nioengine=libaio\nsize=1m\n").unwrap()[0];
        assert_eq!(toml_of(p)["options"]["buffered"].as_bool(), Some(true), "fio's default direct=0, run buffered as fio runs it");
        assert!(p.lines.iter().any(|(o, to)| o == "(buffered libaio)" && to.contains("synchronous")), "{:?}", p.lines);
        let e = plan("[j]\nsize=1m\ndirect=1\nflow=2000\n").unwrap_err();
        assert!(e.contains("flow 2000 is above fio's largest weight, 1000"), "{e}");
        let p = plans(Path::new("t.fio"), "[j]\nioengine=libaio\nsize=1m\ndirect=0\n", None, &["direct".into()], &[]).unwrap();
        assert!(
            toml_of(&p[0]).get("options").and_then(|o| o.get("buffered")).is_none(),
            "a dropped direct leaves iolab's O_DIRECT: {}",
            p[0].text
        );
        let p = plans(Path::new("t.fio"), "[j]\nsize=1m\ndirect=1\nflow=2\n", None, &["flow".into()], &[]).unwrap();
        assert!(toml_of(&p[0])["description"].as_str().unwrap().contains("dropped with --fio-ignore: flow=2"));
        assert!(plan("[j]\nsize=1m\nbogus=1\n").unwrap_err().contains("'bogus' is not a fio option"));
        assert!(plans(Path::new("t.fio"), "[j]\nsize=1m\n", None, &["flow".into()], &[]).unwrap_err().contains("no job of t.fio sets it"));
        assert!(plan("[j]\nsize=1m\ndirect=1\nzonemode=none\nthread\ngroup_reporting\n").is_ok());
        let e = plan("[j]\nioengine=psync\nsize=1m\ndirect=1\niodepth=4\n").unwrap();
        assert_eq!(toml_of(&e[0])["matrix"]["qd"][0].as_integer(), Some(1), "fio caps a sync engine's depth");
    }

    /// fio's rates and think time are the job's pacing (`matrix.pace`), in fio's units.
    #[test]
    fn rates_and_think_time_are_the_jobs_pace() {
        let p = &plan(
            "[j]\nsize=1m\ndirect=1\nrw=randrw\nrate=1m,500k,300\nratemin=1k\nrate_process=poisson\nthinktime=2000\nthinktime_blocks=4\n",
        )
        .unwrap()[0];
        let job = &crate::plan::sweep::expand(&p.text, &[]).unwrap().configs[0].job;
        let pace = job.workload.pattern.pace.clone().expect("paced");
        assert_eq!((pace.rate_bps, pace.rate_min_bps), ([1 << 20, 500 << 10], [1024, 1024]));
        assert_eq!((pace.rate_process, pace.thinktime_ns, pace.thinktime_blocks), (crate::plan::pace::RateProcess::Poisson, 2_000_000, 4));
        let p = &plan("[global]\nkb_base=1000\n[j]\nsize=1m\ndirect=1\nrate_iops=,300\n").unwrap()[0];
        let job = &crate::plan::sweep::expand(&p.text, &[]).unwrap().configs[0].job;
        assert_eq!(job.workload.pattern.pace.as_ref().unwrap().rate_iops, [0, 300]);
        let e = plan("[j]\nsize=1m\ndirect=1\nrate=1m\nrate_iops=10\n").unwrap_err();
        assert!(e.contains("not both"), "{e}");
        assert!(plan("[j]\nsize=1m\ndirect=1\nrate=0\n").is_ok());
        // exitall stops the jobs beside it: the dry run says whom; alone it stops nothing.
        let p = plan("[global]\nsize=1m\ndirect=1\nexitall=1\n[a]\n[b]\n").unwrap();
        assert!(
            p[0].lines.iter().any(|(o, to)| o == "(exitall)"
                && to == "when it ends it stops b (fio's exit_what=group); each keeps the I/O it did, its record saying who stopped it"),
            "{:?}",
            p[0].lines
        );
        assert!(plan("[global]\nsize=1m\ndirect=1\nexitall=1\nexit_what=all\n[a]\n").is_ok());
        // Written back as fio's options and read again: the same pacing.
        let text = "name = \"p\"\nios = 100\n[matrix]\ninterface = [\"null\"]\nrw = [\"randrw\"]\npace = [\"rate=1m,500k rate_process=poisson rate_min=1k thinktime=2ms thinktime_blocks=4\"]\n";
        let fio = export("p.toml", text).unwrap();
        assert!(fio.contains("rate=1048576,512000\n") && fio.contains("thinktime=2000us\n"), "{fio}");
        let back = &plans(Path::new("p.fio"), &fio, None, &[], &[]).unwrap()[0];
        let (a, b) = (crate::plan::sweep::expand(text, &[]).unwrap(), crate::plan::sweep::expand(&back.text, &[]).unwrap());
        assert_eq!(a.configs[0].job.workload.pattern.pace, b.configs[0].job.workload.pattern.pace, "{fio}");
    }

    /// fio's flow and exitall are the jobs' pace: a flow's weights and id; exitall set on one job
    /// is every job's (fio's flag is process-wide); exit_what=group reaches up to a new_group;
    /// exit_what=all leaves the jobs after its group unplanned, fio never starting them.
    #[test]
    fn flows_and_exitall_are_the_jobs_pace() {
        let pace = |m: &Mapped| pace_of(m).expect("paced");
        let p = plan("[global]\nsize=1m\ndirect=1\nflow_sleep=1000\n[a]\nflow=8\n[b]\nflow=1\nflow_id=0\n").unwrap();
        assert_eq!((pace(&p[0]).flow, pace(&p[1]).flow, pace(&p[0]).flow_sleep_ns), (8, 1, 1_000_000));
        assert_eq!(p[1].group.as_deref(), Some("t.fio/g1"));
        let text = "[global]\nsize=1m\ndirect=1\n[a]\nexitall=1\nexit_what=stonewall\n[b]\nnew_group=1\n[c]\nstonewall\n[d]\n";
        let p = plan(text).unwrap();
        assert!(p.iter().all(|m| pace(m).exitall), "process-wide: {:?}", p.iter().map(|m| &m.text).collect::<Vec<_>>());
        let line = |m: &Mapped| m.lines.iter().find(|(o, _)| o == "(exitall)").map(|(_, to)| to.clone()).unwrap_or_default();
        assert!(line(&p[0]).starts_with("when it ends it stops b (those started by then"), "{}", line(&p[0]));
        assert!(line(&p[1]).contains("stops nothing: no other job is in its reporting group"), "{}", line(&p[1]));
        assert!(line(&p[2]).starts_with("when it ends it stops d (fio's exit_what=group)"), "{}", line(&p[2]));
        let p = plan("[global]\nsize=1m\ndirect=1\nexitall=1\n[a]\nexit_what=all\n[b]\n[c]\nstonewall\n[d]\n").unwrap();
        assert_eq!(p.len(), 2, "c and d never run");
        assert!(p[0].lines.iter().any(|(o, to)| o == "(exit_what=all)" && to.starts_with("the jobs after its group (c, d) never run")));
        let p = plans(
            Path::new("t.fio"),
            "[global]\nsize=1m\ndirect=1\nexitall=1\n[a]\nexit_what=all\n[b]\nstonewall\n",
            None,
            &[CONCURRENCY.into()],
            &[],
        )
        .unwrap();
        assert_eq!(p.len(), 2, "one after another, exitall stops nothing");
        let p = plan("[global]\nsize=1m\ndirect=1\n[a]\nexitall_on_error=1\n[b]\n").unwrap();
        assert!(
            line(&p[0]).is_empty()
                && p[0].lines.iter().any(|(o, to)| o == "(exitall_on_error)" && to.starts_with("when it ends in a failure it stops b"))
        );
    }

    #[test]
    fn fio_files_are_told_from_plans() {
        assert!(is_fio(Path::new("x.fio"), ""));
        assert!(is_fio(Path::new("x"), "; c\n[global]\nbs=4k\n[job1]\n"));
        assert!(!is_fio(Path::new("p.toml"), "name = \"x\"\n[matrix]\nqd = [1]\n[options]\n[[rule]]\n"));
    }

    /// A plan written as fio and read back gives the same jobs.
    #[test]
    fn export_then_import_is_the_same_plan() {
        let plan_text = "name = \"rt\"\nruntime = \"2s\"\nramp = \"1s\"\nsize = \"64m\"\n[matrix]\ninterface = [\"io_uring\", \"psync\"]\nrw = [\"randrw\"]\nwrite_mix = [30]\nbs = [\"8k\"]\nthreads = [2]\n";
        let fio = export("p.toml", plan_text).unwrap();
        assert!(fio.contains("ioengine=io_uring\n") && fio.contains("rwmixread=70\n") && fio.contains("time_based=1\n"), "{fio}");
        let back = plans(Path::new("p.fio"), &fio, None, &[], &[]).unwrap();
        let a = crate::plan::sweep::expand(plan_text, &[]).unwrap();
        for (c, m) in a.configs.iter().zip(&back) {
            let b = crate::plan::sweep::expand(&m.text, &[]).unwrap();
            let (mut x, mut y) = (serde_json::to_value(&c.job).unwrap(), serde_json::to_value(&b.configs[0].job).unwrap());
            // The seed is written as randseed and read back; only the plan's name differs.
            x["seed"] = 0.into();
            y["seed"] = 0.into();
            assert_eq!(x, y, "{fio}\n{}", m.text);
        }
        assert!(export("p.toml", "[matrix]\ninterface = [\"vfio-nvme\"]\ntarget = [\"0000:01:00.0\"]\n").is_err());
    }
    /// io_submit_mode=offload with a rate is the pacing's submit mode; a synchronous engine
    /// keeps its iodepth (that many submission threads, as fio); without a rate it is refused.
    #[test]
    fn io_submit_mode_offload_is_paced_by_submission_threads() {
        let job = |text: &str| crate::plan::sweep::expand(&plan(text).unwrap()[0].text, &[]).unwrap().configs[0].job.clone();
        let j = job("[j]\nsize=1m\ndirect=1\nioengine=libaio\niodepth=32\nio_submit_mode=offload\nrate_iops=1000\n");
        assert_eq!(j.workload.pattern.pace.as_ref().unwrap().submit_mode, crate::plan::pace::SubmitMode::Offload);
        assert_eq!(j.workload.qd, 32);
        let j = job("[j]\nsize=1m\ndirect=1\nioengine=psync\niodepth=4\nio_submit_mode=offload\nrate=1m\n");
        assert_eq!(j.workload.qd, 4, "offloaded, fio keeps a sync engine's depth");
        assert!(plan("[j]\nsize=1m\ndirect=1\nio_submit_mode=inline\n").is_ok());
        let e = plan("[j]\nsize=1m\ndirect=1\nio_submit_mode=offload\n").unwrap_err();
        assert!(e.contains("give rate or rate_iops"), "{e}");
        let fio = export(
            "p.toml",
            "name = \"p\"\nios = 100\n[matrix]\ninterface = [\"null\"]\npace = [\"rate_iops=10 io_submit_mode=offload\"]\n",
        )
        .unwrap();
        assert!(fio.contains("io_submit_mode=offload\n"), "{fio}");
    }
}
