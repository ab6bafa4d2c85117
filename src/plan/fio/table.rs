//! The one table from fio's options to iolab's plan keys: every option fio 3.33 lists
//! (`fio --cmdhelp=all`), the options of the engines iolab has (`fio --enghelp=io_uring`, …), and
//! how each maps, why it changes nothing iolab measures, or why iolab refuses it. A job file is
//! translated through it (`map.rs`), a plan is written back through it (`export.rs`), and
//! docs/fio.md is generated from it (`options_md`).
use super::map;
use super::threads;
use crate::plan::Job;

/// How a fio option reaches an iolab plan.
pub enum How {
    /// It sets these plan keys (the words docs/fio.md shows); `set` translates a job's value
    /// (returning the dry run's `-> key = value` text), `export` writes a job's value back (None:
    /// not written for this job).
    Sets { keys: &'static str, set: map::SetFn, export: Option<ExportFn> },
    /// Accepted, and changes nothing iolab measures: why.
    Same(&'static str),
    /// Refused (why), unless its value is one of `fine` (fio's default, or a value that asks
    /// for nothing iolab lacks).
    Refused(&'static str, &'static [&'static str]),
}

/// Writes a planned job's value back as the option's (None: not written for this job).
pub type ExportFn = fn(&Job) -> Result<Option<String>, String>;

pub struct FioOption {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub how: How,
}

const fn sets(name: &'static str, aliases: &'static [&'static str], keys: &'static str, set: map::SetFn) -> FioOption {
    FioOption { name, aliases, how: How::Sets { keys, set, export: None } }
}
const fn both(name: &'static str, aliases: &'static [&'static str], keys: &'static str, set: map::SetFn, export: ExportFn) -> FioOption {
    FioOption { name, aliases, how: How::Sets { keys, set, export: Some(export) } }
}
const fn same(name: &'static str, why: &'static str) -> FioOption {
    FioOption { name, aliases: &[], how: How::Same(why) }
}
const fn same_a(name: &'static str, aliases: &'static [&'static str], why: &'static str) -> FioOption {
    FioOption { name, aliases, how: How::Same(why) }
}
const fn no(name: &'static str, why: &'static str, fine: &'static [&'static str]) -> FioOption {
    FioOption { name, aliases: &[], how: How::Refused(why, fine) }
}
const fn no_a(name: &'static str, aliases: &'static [&'static str], why: &'static str, fine: &'static [&'static str]) -> FioOption {
    FioOption { name, aliases, how: How::Refused(why, fine) }
}

const REPORT: &str = "how fio reports: iolab stores every run whole (totals, latency histogram, per-second series)";
const LOG: &str = "a fio log file: iolab keeps the per-second series and latency histogram in the record instead, and writes no fio log";
const LAYOUT: &str =
    "how fio lays out files it creates: iolab creates no named target (it must exist) and fills its own temporary target itself";
const ZONE: &str = "iolab has no zoned-device mode (zonemode=zbd); its strided zones take zonesize, zonerange and zoneskip";
const VERIFY: &str = "iolab's --verify has one form (its own checksummed blocks, every read checked, every written block read back)";
const REPLAY: &str = "iolab generates its workload; it does not record or replay I/O logs";
const DATA: &str = "iolab fills its buffers with seeded random data; it does not shape their contents";
const TRIM: &str = "iolab issues reads and writes, no trims";
const PRIO: &str = "iolab sets I/O priorities (prioclass, prio, cmdprio_percentage), not CPU priorities (nice) or priorities by block size";
const SYNC: &str = "iolab issues no fsync/fdatasync or O_SYNC writes";
const NO_TARGETS: &str = "iolab drives the targets it is given; it does not make or pick file names";

/// Every fio option, in fio's `--cmdhelp=all` order, then the engine options.
pub static TABLE: &[FioOption] = &[
    sets("description", &[], "description", map::description),
    sets("name", &[], "name", map::name),
    sets("wait_for", &[], "(run order)", map::wait_for),
    both("filename", &[], "targets", map::filename, map::x_filename),
    no("lockfile", "iolab does not lock its targets between threads", &["none"]),
    sets("directory", &[], "targets", map::directory),
    no("filename_format", NO_TARGETS, &[]),
    no("unique_filename", NO_TARGETS, &["1"]),
    no("opendir", NO_TARGETS, &[]),
    both("rw", &["readwrite"], "matrix.rw; its ':N' matrix.stride (sequential) or matrix.ios_per_offset (random)", map::rw, map::x_rw),
    both("bs", &["blocksize"], "matrix.bs", map::bs, map::x_bs),
    both("ba", &["blockalign"], "matrix.blockalign (random jobs; the smallest block size when the same)", map::ba, map::x_ba),
    both("bsrange", &["blocksize_range"], "matrix.bs or matrix.bssplit", map::bsrange, map::x_bsrange),
    both("bssplit", &[], "matrix.bssplit", map::bssplit, map::x_bssplit),
    no_a("bs_unaligned", &["blocksize_unaligned"], "iolab aligns every offset to the smallest block size", &["0"]),
    sets("randrepeat", &[], "seed (0: drawn when the job file is planned, and recorded)", map::randrepeat),
    both("randseed", &[], "seed", map::randseed, map::x_randseed),
    both("norandommap", &[], "(iolab's way: offsets drawn with repeats)", map::norandommap, map::x_norandommap),
    no("ignore_error", "iolab stops at the first failed I/O, or counts them all with continue_on_error", &[]),
    no("rw_sequencer", "iolab's sequential jobs go straight through and its random ones draw every offset", &["sequential"]),
    both("ioengine", &[], "matrix.interface", map::ioengine, map::x_ioengine),
    both("iodepth", &[], "matrix.qd", map::iodepth, map::x_iodepth),
    both("iodepth_batch", &["iodepth_batch_submit"], "matrix.batch", map::iodepth_batch, map::x_batch),
    both("iodepth_batch_complete_min", &["iodepth_batch_complete"], "options.batch_reap", map::batch_complete_min, map::x_batch_reap),
    sets("iodepth_batch_complete_max", &[], "(checked: iolab takes what is ready)", map::batch_complete_max),
    sets("iodepth_low", &[], "(checked: iolab refills at once)", map::iodepth_low),
    no("serialize_overlap", "iolab does not order overlapping I/Os", &["0"]),
    both(
        "io_submit_mode",
        &[],
        "matrix.pace (offload, with a rate: the job's thread paces and queues, iodepth submission threads at depth 1 submit; latency from when each I/O was queued)",
        map::io_submit_mode,
        map::x_io_submit_mode,
    ),
    both("size", &[], "size, bytes", map::size, map::x_size),
    both("io_size", &["io_limit"], "bytes", map::io_size, map::x_io_size),
    sets("fill_device", &["fill_fs"], "bytes (the target's whole size: fio writes until it is full; the target must exist)", map::fill_device),
    sets("filesize", &[], "size, bytes", map::filesize),
    no("file_append", "iolab uses the range from offset", &["0"]),
    both("offset", &["fileoffset"], "offset", map::offset, map::x_offset),
    no("offset_increment", "iolab's threads share one range", &["0"]),
    no("offset_align", "iolab aligns offsets to the block size", &["0"]),
    both("number_ios", &[], "ios", map::number_ios, map::x_number_ios),
    both(
        "random_generator",
        &[],
        "matrix.random_generator (lfsr: each block once per pass, in iolab's seeded order; tausworthe and tausworthe64: iolab's own uniform generator, fio's only promise for them)",
        map::random_generator,
        map::x_random_generator,
    ),
    both("random_distribution", &[], "matrix.distribution", map::random_distribution, map::x_random_distribution),
    no("percentage_random", "an iolab job is wholly sequential or wholly random", &["100", "0"]),
    no("allrandrepeat", "iolab's offsets always repeat from the seed", &["1", "0"]),
    sets("nrfiles", &["nr_files"], "(checked: one file)", map::nrfiles),
    no("file_service_type", "iolab's threads drive every target of the set", &["roundrobin"]),
    no("openfiles", "iolab opens every target once per thread", &[]),
    same("fallocate", LAYOUT),
    no("fadvise_hint", "iolab gives the kernel no fadvise hints", &["0"]),
    no("fsync", SYNC, &["0"]),
    no("fdatasync", SYNC, &["0"]),
    no("write_barrier", SYNC, &["0"]),
    no("sync_file_range", SYNC, &[]),
    both("direct", &[], "options.buffered", map::direct, map::x_direct),
    no("atomic", "iolab does not ask for atomic writes", &["0"]),
    sets("buffered", &[], "options.buffered", map::buffered),
    same("overwrite", LAYOUT),
    sets("loops", &[], "bytes", map::loops),
    both("numjobs", &[], "matrix.threads", map::numjobs, map::x_numjobs),
    sets("startdelay", &[], "(start delay in its group)", map::startdelay),
    both("runtime", &["timeout"], "runtime", map::runtime, map::x_runtime),
    both("time_based", &[], "runtime", map::time_based, map::x_time_based),
    no("verify_only", VERIFY, &["0"]),
    both("ramp_time", &[], "ramp", map::ramp_time, map::x_ramp_time),
    same("clocksource", "iolab picks its own clock (the invariant TSC or CLOCK_MONOTONIC) and records which"),
    no_a("mem", &["iomem"], "iolab's buffers are its own (heap, or hugepages where an interface needs them)", &["malloc"]),
    both(
        "verify",
        &[],
        "options.verify (meta or pattern: options.verify_fio, fio's header per verify_interval and its pattern; fio's checksums: iolab's own checksummed blocks)",
        map::verify,
        map::x_verify,
    ),
    both("do_verify", &[], "options.verify_fio (0: the written blocks are not read back)", map::do_verify, map::x_do_verify),
    both("verify_interval", &[], "options.verify_fio (bytes per header; a divisor of the block size)", map::verify_interval, map::x_verify_interval),
    no("verify_offset", VERIFY, &[]),
    both(
        "verify_pattern",
        &[],
        "options.verify_fio (0x hexadecimal or a quoted string, up to 32 bytes; written in every block, checked on every read)",
        map::verify_pattern,
        map::x_verify_pattern,
    ),
    no("verify_fatal", VERIFY, &[]),
    no("verify_dump", VERIFY, &["0"]),
    no("verify_async", VERIFY, &["0"]),
    no("verify_backlog", VERIFY, &[]),
    no("verify_backlog_batch", VERIFY, &[]),
    no("experimental_verify", VERIFY, &["0"]),
    no("verify_state_load", VERIFY, &["0"]),
    no("verify_state_save", VERIFY, &["0"]),
    no("trim_percentage", TRIM, &["0"]),
    no("trim_verify_zero", TRIM, &[]),
    no("trim_backlog", TRIM, &[]),
    no("trim_backlog_batch", TRIM, &[]),
    no("write_iolog", REPLAY, &[]),
    no("read_iolog", REPLAY, &[]),
    no("read_iolog_chunked", REPLAY, &[]),
    no("replay_no_stall", REPLAY, &[]),
    no("replay_redirect", REPLAY, &[]),
    no("replay_scale", REPLAY, &[]),
    no("replay_align", REPLAY, &[]),
    no("replay_time_scale", REPLAY, &[]),
    no("replay_skip", REPLAY, &[]),
    no("merge_blktrace_file", REPLAY, &[]),
    no("merge_blktrace_scalars", REPLAY, &[]),
    no("merge_blktrace_iters", REPLAY, &[]),
    no("exec_prerun", "iolab runs no commands of a job file", &[]),
    no("exec_postrun", "iolab runs no commands of a job file", &[]),
    both("ioscheduler", &[], "matrix.scheduler", map::ioscheduler, map::x_ioscheduler),
    both("zonemode", &[], "matrix.zones (strided; zbd is refused: no zoned-device mode)", map::zonemode, map::x_zonemode),
    both("zonesize", &[], "matrix.zones", map::zone_option, map::x_zonesize),
    no("zonecapacity", ZONE, &[]),
    both("zonerange", &[], "matrix.zones", map::zone_option, map::x_zonerange),
    both("zoneskip", &[], "matrix.zones", map::zone_option, map::x_zoneskip),
    no("read_beyond_wp", ZONE, &[]),
    no("max_open_zones", ZONE, &[]),
    no("job_max_open_zones", ZONE, &[]),
    no("ignore_zone_limits", ZONE, &[]),
    no("zone_reset_threshold", ZONE, &[]),
    no("zone_reset_frequency", ZONE, &[]),
    no("lockmem", "iolab does not pin memory away from the run", &["0"]),
    both("rwmixread", &[], "matrix.write_mix", map::rwmixread, map::x_rwmixread),
    sets("rwmixwrite", &[], "matrix.write_mix", map::rwmixwrite),
    no("nice", PRIO, &["0"]),
    both("prio", &[], "options.ioprio (its level: each thread's I/O priority, set with ioprio_set and read back)", threads::ioprio, threads::x_prio),
    both("prioclass", &[], "options.ioprio (its class; 0 is best-effort, as fio sets it)", threads::ioprio, threads::x_prioclass),
    both("thinktime", &[], "matrix.pace (a stall after every thinktime_blocks I/Os, once nothing is in flight)", map::thinktime, map::x_thinktime),
    both("thinktime_spin", &[], "matrix.pace (the part of the stall spent spinning)", map::thinktime_spin, map::x_thinktime_spin),
    both("thinktime_blocks", &[], "matrix.pace", map::thinktime_blocks, map::x_thinktime_blocks),
    both("thinktime_blocks_type", &[], "matrix.pace (complete or issue)", map::thinktime_blocks_type, map::x_thinktime_blocks_type),
    both("thinktime_iotime", &[], "matrix.pace", map::thinktime_iotime, map::x_thinktime_iotime),
    both("rate", &[], "matrix.pace (bytes per second per thread, reads,writes)", map::rate, map::x_rate),
    both("rate_min", &["ratemin"], "matrix.pace (the run fails below it over a cycle, as fio's job)", map::rate_min, map::x_rate_min),
    both("rate_process", &[], "matrix.pace (linear or poisson)", map::rate_process, map::x_rate_process),
    both("rate_cycle", &["ratecycle"], "matrix.pace (the floor's cycle)", map::rate_cycle, map::x_rate_cycle),
    no("rate_ignore_thinktime", "iolab's linear rate catches up after a think time, as fio's default", &["0"]),
    both("rate_iops", &[], "matrix.pace (I/Os per second per thread, reads,writes)", map::rate_iops, map::x_rate_iops),
    both("rate_iops_min", &[], "matrix.pace (the run fails below it over a cycle)", map::rate_iops_min, map::x_rate_iops_min),
    no("max_latency", "iolab does not stop a run on a latency bound", &["0"]),
    no("latency_target", "iolab does not search for a depth (a sweep over qd does)", &["0"]),
    no("latency_window", "iolab does not search for a depth (a sweep over qd does)", &[]),
    no("latency_percentile", "iolab does not search for a depth (a sweep over qd does)", &[]),
    no("latency_run", "iolab does not search for a depth (a sweep over qd does)", &[]),
    sets("invalidate", &[], "(checked against direct)", map::invalidate),
    no("sync", SYNC, &["0", "none"]),
    no("write_hint", "iolab sets no write lifetime hints", &["none"]),
    same("create_serialize", LAYOUT),
    same("create_fsync", LAYOUT),
    same("create_on_open", LAYOUT),
    no("create_only", "iolab measures I/O, not file creation", &["0"]),
    same("allow_file_create", "iolab never creates a named target: it must exist (as fio's allow_file_create=0)"),
    no("allow_mounted_write", "iolab's own write-safety rules decide (docs/safety.md)", &["0"]),
    no("pre_read", "iolab does not pre-read its targets into the page cache", &["0"]),
    no("cpumask", "give cpus_allowed= (iolab pins each thread to one CPU of the list)", &[]),
    both("cpus_allowed", &[], "options.cpus", map::cpus_allowed, map::x_cpus_allowed),
    both("cpus_allowed_policy", &[], "(checked with cpus_allowed)", map::cpus_allowed_policy, map::x_cpus_allowed_policy),
    both("numa_cpu_nodes", &[], "matrix.numa (a node or a list: the threads pinned to those nodes' CPUs)", threads::numa_cpu_nodes, map::x_numa),
    both(
        "numa_mem_policy",
        &[],
        "options.mem_policy (set_mempolicy on each thread before its I/O buffers, mbind on them, read back with get_mempolicy and move_pages)",
        threads::numa_mem_policy,
        threads::x_numa_mem_policy,
    ),
    no("end_fsync", SYNC, &["0"]),
    no("fsync_on_close", SYNC, &["0"]),
    no("unlink", "iolab never deletes a named target", &["0"]),
    no("unlink_each_loop", "iolab never deletes a named target", &["0"]),
    both("exitall", &[], "matrix.pace (its end stops the jobs exit_what names among those run together with it; set on one job, on every job of the file, as fio's is process-wide)", map::exitall, map::x_exitall),
    both("exit_what", &[], "matrix.pace (group: its reporting group; stonewall: every job started; all: every job, and the jobs after its group are not planned)", map::exit_what, map::x_exit_what),
    both("exitall_on_error", &[], "matrix.pace (as exitall, at a failed end only)", map::exitall_on_error, map::x_exitall_on_error),
    sets("stonewall", &["wait_for_previous"], "(run order)", map::stonewall),
    both("new_group", &[], "matrix.pace (a new reporting group, the reach of exit_what=group)", map::new_group, map::x_new_group),
    same("thread", "iolab's workers are always threads of one process"),
    same("per_job_logs", LOG),
    same("write_bw_log", LOG),
    same("bwavgtime", REPORT),
    same("write_lat_log", LOG),
    same("write_iops_log", LOG),
    same("iopsavgtime", REPORT),
    same("log_entries", LOG),
    same("log_avg_msec", LOG),
    same("log_hist_msec", LOG),
    same("log_hist_coarseness", LOG),
    same("write_hist_log", LOG),
    same("log_max_value", LOG),
    same("log_offset", LOG),
    same("log_prio", LOG),
    same("log_compression", LOG),
    same("log_compression_cpus", LOG),
    same("log_store_compressed", LOG),
    same("log_unix_epoch", LOG),
    same("log_alternate_epoch", LOG),
    same("log_alternate_epoch_clock_id", LOG),
    same("block_error_percentiles", REPORT),
    same("group_reporting", "iolab reports a run's threads together (and each thread too)"),
    same("stats", REPORT),
    no("zero_buffers", DATA, &["0"]),
    no("refill_buffers", DATA, &["0"]),
    no("scramble_buffers", DATA, &["1"]),
    no("buffer_pattern", DATA, &[]),
    no("buffer_compress_percentage", DATA, &["0"]),
    no("buffer_compress_chunk", DATA, &[]),
    no("dedupe_percentage", DATA, &["0"]),
    no("dedupe_mode", DATA, &["repeat"]),
    no("dedupe_working_set_percentage", DATA, &[]),
    no("dedupe_global", DATA, &["0"]),
    same("clat_percentiles", REPORT),
    same("lat_percentiles", REPORT),
    same("slat_percentiles", REPORT),
    same("percentile_list", REPORT),
    same("significant_figures", REPORT),
    same("disk_util", "iolab reads the device's counters itself"),
    same("gtod_reduce", "fio's way to read its clock less: iolab always times every I/O, with one clock read per batch"),
    same("disable_lat", REPORT),
    same("disable_clat", REPORT),
    same("disable_slat", REPORT),
    same_a("disable_bw_measurement", &["disable_bw"], REPORT),
    no("gtod_cpu", "iolab has no clock thread", &[]),
    same("unified_rw_reporting", REPORT),
    both("continue_on_error", &[], "options.continue_on_error", map::continue_on_error, map::x_continue_on_error),
    same("error_dump", REPORT),
    no("profile", "fio's built-in profiles are not job options iolab can read", &[]),
    no("cgroup", "iolab does not place its threads in a cgroup", &[]),
    no("cgroup_nodelete", "iolab does not place its threads in a cgroup", &[]),
    no("cgroup_weight", "iolab does not place its threads in a cgroup", &[]),
    no("uid", "iolab runs as the user who starts it", &[]),
    no("gid", "iolab runs as the user who starts it", &[]),
    same("kb_base", "read while parsing: it decides what k, m, g mean in this job's sizes"),
    same("unit_base", REPORT),
    no("hugepage-size", "iolab's buffers are its own (hugepages only where an interface needs them)", &[]),
    both("flow_id", &[], "matrix.pace (the flow shared by the jobs run together that name it)", map::flow_id, map::x_flow_id),
    both("flow", &[], "matrix.pace (the job's weight per thread in its flow: its jobs issue I/O in the ratio of their weights)", map::flow, map::x_flow),
    both("flow_sleep", &[], "matrix.pace (microseconds a thread held back by its flow sleeps; fio's 0: it looks again at once)", map::flow_sleep, map::x_flow_sleep),
    both(
        "steadystate",
        &["ss"],
        "options.steadystate (iops, iops_slope, bw or bw_slope and its limit, judged once a second on the run's threads together; the run ends when met)",
        threads::steadystate,
        threads::x_steadystate,
    ),
    both("steadystate_duration", &["ss_dur"], "options.steadystate (dur: the window judged, whole seconds)", threads::steadystate, threads::x_steadystate_duration),
    both(
        "steadystate_ramp_time",
        &["ss_ramp"],
        "options.steadystate (ramp: seconds of the measured window before the first is judged)",
        threads::steadystate,
        threads::x_steadystate_ramp_time,
    ),
    // The engines' own options (io_uring, io_uring_cmd, libaio, pvsync2).
    both("hipri", &[], "matrix.complete", map::hipri, map::x_hipri),
    no("hipri_percentage", "iolab polls every I/O of a polled run or none", &["100"]),
    both("fixedbufs", &[], "options.register_buffers", map::fixedbufs, map::x_fixedbufs),
    both("registerfiles", &[], "options.register_files", map::registerfiles, map::x_registerfiles),
    both("sqthread_poll", &[], "matrix.submit", map::sqthread_poll, map::x_sqthread_poll),
    both("sqthread_poll_cpu", &[], "options.sq_cpu", map::sqthread_poll_cpu, map::x_sq_cpu),
    no("nonvectored", "iolab's rings use non-vectored READ/WRITE (fio's nonvectored=1)", &["1", "-1"]),
    no("uncached", "iolab does not set RWF_UNCACHED", &["0"]),
    no("nowait", "iolab does not set RWF_NOWAIT", &["0"]),
    both("force_async", &[], "options.force_async", map::force_async, map::x_force_async),
    no("cmd_type", "iolab's io_uring_cmd (nvme-passthru) sends NVMe commands", &["nvme"]),
    both(
        "cmdprio_percentage",
        &[],
        "options.cmdprio (the share of commands that carry it, reads,writes: libaio's aio_reqprio, io_uring's SQE ioprio)",
        threads::cmdprio,
        threads::x_cmdprio_percentage,
    ),
    both("cmdprio_class", &[], "options.cmdprio (their class; 1, realtime, by default)", threads::cmdprio, threads::x_cmdprio_class),
    both("cmdprio", &[], "options.cmdprio (their level; 0 by default)", threads::cmdprio, threads::x_cmdprio),
    no("cmdprio_bssplit", PRIO, &[]),
    no("userspace_reap", "iolab's libaio reaps with io_getevents", &["0"]),
    // Not fio's own: an option of fio's tiobench profile, which fio also takes in a plain job.
    same("threads", "an option of fio's tiobench profile (its thread count): it sets nothing for a job that is not profile=tiobench"),
];

/// The table's entry for an option written by its name or one of its aliases.
pub fn find(name: &str) -> Option<&'static FioOption> {
    TABLE.iter().find(|o| o.name == name || o.aliases.contains(&name))
}

/// docs/fio.md: what iolab does with every fio option, from the table.
pub(crate) fn options_md() -> String {
    let mut out = String::from(
        "# fio job files in iolab\n\n\
         <!-- Generated from src/plan/fio/table.rs by `iolab export fio --options-md`; do not edit by hand\n     \
         (the unit test `plan::fio::table::tests::docs_fio_md_is_the_table` checks it). -->\n\n",
    );
    out += super::GUIDE;
    out += "\n## Every fio option\n\n\
            Options of fio 3.33 (`fio --cmdhelp=all`) and of the engines iolab has, in fio's order. *maps*: the plan keys it\n\
            sets; *same*: accepted, it changes nothing iolab measures; *refused*: the job is refused, in one line naming\n\
            the option, unless its value is one listed (fio's default or a value that asks for nothing), or\n\
            `--fio-ignore OPTION` drops it (recorded in the plan's description).\n\n\
            | option | aliases | how | iolab |\n|---|---|---|---|\n";
    for o in TABLE {
        let aliases = o.aliases.join(", ");
        let (how, what) = match &o.how {
            How::Sets { keys, .. } => ("maps", format!("`{keys}`")),
            How::Same(why) => ("same", why.to_string()),
            How::Refused(why, []) => ("refused", why.to_string()),
            How::Refused(why, fine) => {
                ("refused", format!("{why} (accepted: {})", fine.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")))
            }
        };
        out += &format!("| `{}` | {aliases} | {how} | {what} |\n", o.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_and_alias_once() {
        let mut seen = std::collections::HashSet::new();
        for o in TABLE {
            for n in std::iter::once(&o.name).chain(o.aliases) {
                assert!(seen.insert(*n), "{n} is in the table twice");
            }
        }
    }

    /// docs/fio.md is generated from the table: when they differ, the new text is printed.
    #[test]
    fn docs_fio_md_is_the_table() {
        let want = options_md();
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fio.md");
        let have = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            have == want,
            "docs/fio.md is not the table's text: run `iolab export fio --options-md > docs/fio.md`; the text is:\n{want}"
        );
    }
}
