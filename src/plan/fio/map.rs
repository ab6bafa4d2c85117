//! One fio job translated into an iolab plan (TOML, the keys `iolab sweep PLAN.toml` takes)
//! through the table, and a planned job written back as fio options. The `set` functions are the
//! table's forward direction, the `x_` functions its reverse.
use super::parse::{self, Opt};
use super::table::{find, How, TABLE};
use crate::interfaces::InterfaceKind;
use crate::plan::{Budget, Complete, Job, Numa, Submit};
use toml::Value;

/// The word `--fio-ignore` takes to run a file's jobs one after another where fio would run
/// them together (no stonewall between them).
pub const CONCURRENCY: &str = "concurrency";

/// Translates one option's value (None: a bare flag); returns what the dry run shows after `->`.
pub type SetFn = fn(&mut Tr, Option<&str>) -> Result<String, String>;

/// A job being translated: its options in effect (globals above it, then its own; the last
/// written wins) and the plan being built.
pub struct Tr<'a> {
    pub job: &'a str,
    /// (table name, the option as written), in the order written.
    opts: Vec<(&'static str, Opt)>,
    kb: u64,
    pub top: toml::Table,
    pub matrix: toml::Table,
    pub options: toml::Table,
    /// iolab's interface, its facts.
    kind: InterfaceKind,
    sync_engine: bool,
    ring: bool,
    diskless: bool,
    /// What the budget is made of, read from the options at the end.
    region: Option<u64>,
    /// Names of the jobs before this one, and whether something orders it after the previous.
    earlier: &'a [String],
    pub after_previous: bool,
    cli_targets: &'a [String],
    targets: Vec<String>,
    pub notes: Vec<(String, String)>,
}

/// A translated job: its plan text and the dry run's mapping lines.
pub struct Mapped {
    pub name: String,
    pub text: String,
    /// (fio option as written, what it became).
    pub lines: Vec<(String, String)>,
}

fn one<T: Into<Value>>(v: T) -> Value {
    Value::Array(vec![v.into()])
}

fn shown(v: &Value) -> String {
    v.to_string()
}

impl Tr<'_> {
    /// The value in effect of option `name` (a flag reads as "1"); None when not given.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.opts.iter().rev().find(|(n, _)| *n == name).map(|(_, o)| o.value.as_deref().unwrap_or("1"))
    }
    fn index(&self, name: &str) -> Option<usize> {
        self.opts.iter().rposition(|(n, _)| *n == name)
    }
    fn size(&self, v: &str) -> Result<u64, String> {
        parse::size(v, self.kb)
    }
    fn set_matrix(&mut self, key: &str, v: Value) -> String {
        let line = format!("matrix.{key} = {}", shown(&one(v.clone())));
        self.matrix.insert(key.into(), one(v));
        line
    }
    fn set_option(&mut self, key: &str, v: Value) -> String {
        let line = format!("options.{key} = {}", shown(&v));
        self.options.insert(key.into(), v);
        line
    }
    fn set_top(&mut self, key: &str, v: Value) -> String {
        let line = format!("{key} = {}", shown(&v));
        self.top.insert(key.into(), v);
        line
    }
    fn ring_only(&self, name: &str) -> Result<(), String> {
        if self.ring || (name == "hipri" && self.kind == InterfaceKind::Pvsync2) {
            return Ok(());
        }
        Err(format!("{name} is an option of fio's io_uring and io_uring_cmd engines, not of {}", self.kind.name()))
    }
}

fn count(v: Option<&str>) -> Result<i64, String> {
    let n = parse::int(v.unwrap_or("1"))?;
    if n < 0 {
        return Err(format!("{n} is negative"));
    }
    Ok(n)
}

fn flag(v: Option<&str>) -> Result<bool, String> {
    parse::boolean(v)
}

// ---- the forward direction: fio's value to plan keys ----

pub fn description(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    t.notes.push(("description".into(), v.unwrap_or("").to_string()));
    Ok("description".into())
}

pub fn name(_: &mut Tr, v: Option<&str>) -> Result<String, String> {
    Ok(format!("(fio's name for its report, '{}'; the plan is named after the section)", v.unwrap_or("")))
}

pub fn wait_for(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let name = v.unwrap_or("").trim().to_string();
    if !t.earlier.contains(&name) {
        return Err(format!("waits for '{name}', which is no job above it"));
    }
    if t.earlier.last() == Some(&name) {
        t.after_previous = true;
        return Ok(format!("(runs after '{name}', as every job: {SEQUENCE_NOTE})"));
    }
    Ok(format!("(runs after '{name}')"))
}

const SEQUENCE_NOTE: &str = "one at a time, in file order";

pub fn stonewall(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if flag(v)? {
        t.after_previous = true;
    }
    Ok(format!("(run order: {SEQUENCE_NOTE})"))
}

/// fio's file names: ':' separates several, '\:' is a colon in a name.
fn file_names(v: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = v.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&':') => {
                out.last_mut().unwrap().push(':');
                chars.next();
            }
            ':' => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out.into_iter().filter(|s| !s.is_empty()).collect()
}

pub fn filename(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if t.diskless {
        return Ok(format!("(none: {} opens no file, in fio as in iolab)", t.kind.name()));
    }
    let dir = t.value("directory").map(str::to_string);
    let names: Vec<String> = file_names(v.unwrap_or(""))
        .into_iter()
        .map(|n| match &dir {
            Some(d) if !n.starts_with('/') => format!("{}/{n}", d.trim_end_matches('/')),
            _ => n,
        })
        .collect();
    if names.is_empty() {
        return Err("names no file".into());
    }
    if !t.cli_targets.is_empty() {
        return Ok(format!("targets = {:?} (the command line's, in place of {:?})", t.cli_targets, names));
    }
    t.targets = names.clone();
    Ok(format!("targets = {names:?}"))
}

pub fn directory(t: &mut Tr, _: Option<&str>) -> Result<String, String> {
    if t.value("filename").is_some() || !t.cli_targets.is_empty() || t.diskless {
        return Ok("(with filename)".into());
    }
    Err("without filename= fio makes a file per job clone in it, and iolab creates no named file: give filename= of an existing file or device (or a target on the command line)".into())
}

pub fn rw(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let v = v.unwrap_or("").trim().to_ascii_lowercase();
    if v.contains(':') {
        return Err("iolab's sequential jobs go straight through: it has no offset modifier (':N')".into());
    }
    let name = match v.as_str() {
        "read" | "write" | "randread" | "randwrite" | "randrw" => v.clone(),
        "rw" | "readwrite" => return Err("iolab mixes reads and writes only at random offsets (randrw), not sequentially".into()),
        "trim" | "randtrim" | "trimwrite" | "randtrimwrite" => return Err("iolab issues reads and writes, no trims".into()),
        other => return Err(format!("'{other}' is not an access pattern fio knows")),
    };
    Ok(t.set_matrix("rw", Value::String(name)))
}

/// The write percentage of a randrw job from rwmixread or rwmixwrite (whichever came last).
fn mix(t: &mut Tr, which: &str) -> Result<String, String> {
    if t.value("rw").map(str::to_ascii_lowercase).as_deref() != Some("randrw") {
        return Ok("(no effect: only a mixed job reads it)".into());
    }
    let other = if which == "rwmixread" { "rwmixwrite" } else { "rwmixread" };
    if t.index(other) > t.index(which) {
        return Ok(format!("(the later {other} decides)"));
    }
    let n = count(t.value(which))?;
    if n > 100 {
        return Err(format!("{n} is not a percentage"));
    }
    let writes = if which == "rwmixread" { 100 - n } else { n };
    Ok(t.set_matrix("write_mix", Value::Integer(writes)))
}

pub fn rwmixread(t: &mut Tr, _: Option<&str>) -> Result<String, String> {
    mix(t, "rwmixread")
}

pub fn rwmixwrite(t: &mut Tr, _: Option<&str>) -> Result<String, String> {
    mix(t, "rwmixwrite")
}

/// One block size from fio's `read,write[,trim]` list.
fn one_bs(t: &Tr, v: &str) -> Result<u64, String> {
    let sizes: Vec<u64> = v.split(',').filter(|s| !s.trim().is_empty()).map(|s| t.size(s)).collect::<Result<_, _>>()?;
    match sizes.as_slice() {
        [] => Err("gives no size".into()),
        [first, rest @ ..] if rest.iter().all(|s| s == first) => Ok(*first),
        _ => Err("iolab issues one block size for reads and writes".into()),
    }
}

pub fn bs(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = one_bs(t, v.unwrap_or(""))?;
    Ok(t.set_matrix("bs", Value::Integer(n as i64)))
}

pub fn bsrange(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let v = v.unwrap_or("");
    let mut sizes = Vec::new();
    for part in v.split([',', '/']).filter(|p| !p.trim().is_empty()) {
        let (lo, hi) = part.split_once([':', '-']).ok_or_else(|| format!("'{part}' is not a range"))?;
        sizes.push((t.size(lo)?, t.size(hi)?));
    }
    match sizes.as_slice() {
        [(lo, hi), rest @ ..] if lo == hi && rest.iter().all(|r| *r == (*lo, *hi)) => {
            let n = *lo as i64;
            Ok(t.set_matrix("bs", Value::Integer(n)))
        }
        _ => Err("iolab issues one block size per run: give a range of one size (4k-4k) or bs=".into()),
    }
}

pub fn ba(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let bs = match t.value("bs") {
        Some(b) => one_bs(t, b)?,
        None => 4096,
    };
    if one_bs(t, v.unwrap_or(""))? != bs {
        return Err("iolab aligns offsets to the block size".into());
    }
    Ok("(the block size: iolab's alignment)".into())
}

pub fn randseed(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = count(v)?;
    Ok(t.set_top("seed", Value::Integer(n)))
}

pub fn norandommap(_: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if !flag(v)? {
        return Err("iolab draws random offsets with repeats (fio's norandommap); it keeps no map of blocks done".into());
    }
    Ok("(iolab's way: random offsets drawn with repeats)".into())
}

/// fio's engine as iolab's interface: (interface, synchronous, an io_uring ring, a note).
fn engine(name: &str) -> Result<(InterfaceKind, Option<&'static str>), String> {
    Ok(match name {
        "psync" => (InterfaceKind::Psync, None),
        "sync" => (InterfaceKind::Psync, Some("one pread/pwrite per I/O where fio's sync makes lseek then read/write")),
        "pvsync2" => (InterfaceKind::Pvsync2, None),
        "posixaio" => (InterfaceKind::PosixAio, None),
        "libaio" => (InterfaceKind::Libaio, None),
        "io_uring" => (InterfaceKind::IoUring, None),
        "io_uring_cmd" => (InterfaceKind::NvmePassthru, Some("iolab's nvme-passthru: NVMe commands through io_uring, as fio's io_uring_cmd")),
        "null" => (InterfaceKind::Null, None),
        other => return Err(format!("iolab has no interface for fio's {other} engine (it maps psync, sync, pvsync2, posixaio, libaio, io_uring, io_uring_cmd and null)")),
    })
}

pub fn ioengine(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let (kind, note) = engine(v.unwrap_or("").trim())?;
    let line = t.set_matrix("interface", Value::String(kind.name().into()));
    Ok(match note {
        Some(n) => format!("{line} ({n})"),
        None => line,
    })
}

pub fn iodepth(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = count(v)?;
    if t.sync_engine && n > 1 {
        let line = t.set_matrix("qd", Value::Integer(1));
        return Ok(format!("{line} (fio caps a synchronous engine's depth at 1, and says so)"));
    }
    Ok(t.set_matrix("qd", Value::Integer(n)))
}

fn depth(t: &Tr) -> Result<i64, String> {
    match t.value("iodepth") {
        Some(d) if !t.sync_engine => count(Some(d)),
        _ => Ok(1),
    }
}

pub fn iodepth_batch(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = match count(v)? {
        0 => depth(t)?,
        n => n,
    };
    Ok(t.set_matrix("batch", Value::Integer(n)))
}

pub fn batch_complete_min(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = count(v)?;
    if n == 0 {
        return Err("0 reaps without waiting; iolab waits for at least one completion when the queue is full".into());
    }
    Ok(t.set_option("batch_reap", Value::Integer(n)))
}

pub fn batch_complete_max(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if count(v)? != depth(t)? {
        return Err("iolab takes every completion that is ready (fio's default, iodepth)".into());
    }
    Ok("(iodepth: iolab takes every completion that is ready)".into())
}

pub fn iodepth_low(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if count(v)? != depth(t)? {
        return Err("iolab refills its queue as soon as a slot is free (fio's default, iodepth)".into());
    }
    Ok("(iodepth: iolab refills at once)".into())
}

pub fn size(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = t.size(v.unwrap_or(""))?;
    if t.value("filesize").is_none() {
        t.region = Some(n);
    }
    Ok(format!("size = \"{n}\" (the range used; the budget below)"))
}

pub fn filesize(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let v = v.unwrap_or("");
    if v.contains([':', '-']) && !v.starts_with('(') {
        return Err("iolab uses one range per target: give one size".into());
    }
    let n = t.size(v)?;
    t.region = Some(n);
    Ok(format!("size = \"{n}\" (the range used)"))
}

pub fn io_size(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    t.size(v.unwrap_or(""))?;
    Ok("(the budget below)".into())
}

pub fn offset(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = t.size(v.unwrap_or(""))?;
    Ok(t.set_top("offset", Value::String(n.to_string())))
}

pub fn number_ios(_: &mut Tr, v: Option<&str>) -> Result<String, String> {
    count(v)?;
    Ok("(the budget below)".into())
}

pub fn nrfiles(_: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if count(v)? != 1 {
        return Err("iolab drives the files it is named (filename=a:b), not files it makes".into());
    }
    Ok("(one file)".into())
}

/// NVMe commands never pass through the page cache, in fio's io_uring_cmd as in iolab.
const PASSTHRU_DIRECT: &str = "(no effect: NVMe commands bypass the page cache, in fio as in iolab)";

pub fn direct(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let d = flag(v)?;
    if t.kind == InterfaceKind::NvmePassthru {
        return Ok(PASSTHRU_DIRECT.into());
    }
    Ok(t.set_option("buffered", Value::Boolean(!d)))
}

pub fn buffered(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let b = flag(v)?;
    if t.kind == InterfaceKind::NvmePassthru {
        return Ok(PASSTHRU_DIRECT.into());
    }
    Ok(t.set_option("buffered", Value::Boolean(b)))
}

pub fn loops(_: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if count(v)? == 0 {
        return Err("0 loops does nothing".into());
    }
    Ok("(the budget below)".into())
}

pub fn numjobs(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = count(v)?;
    let line = t.set_matrix("threads", Value::Integer(n));
    Ok(format!("{line} (fio's clones of the job, iolab's threads of one run)"))
}

pub fn runtime(_: &mut Tr, v: Option<&str>) -> Result<String, String> {
    parse::seconds(v.unwrap_or(""))?;
    Ok("(the budget below)".into())
}

pub fn time_based(_: &mut Tr, v: Option<&str>) -> Result<String, String> {
    flag(v)?;
    Ok("(the budget below)".into())
}

pub fn ramp_time(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let s = parse::seconds(v.unwrap_or(""))?;
    Ok(t.set_top("ramp", Value::String(format!("{s}s"))))
}

pub fn verify(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let method = v.unwrap_or("").trim();
    if method == "0" || method == "none" {
        return Ok("(no verification)".into());
    }
    let line = t.set_option("verify", Value::Boolean(true));
    Ok(format!("{line} (iolab's own checksummed blocks, not {method})"))
}

pub fn ioscheduler(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let line = t.set_matrix("scheduler", Value::String(v.unwrap_or("").trim().to_string()));
    Ok(format!("{line} (set for the run, restored after)"))
}

pub fn invalidate(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let buffered = t.options.get("buffered").and_then(Value::as_bool).unwrap_or(true);
    if flag(v)? && buffered {
        return Err("iolab does not drop a target's page cache before a buffered run".into());
    }
    Ok("(nothing cached to drop: O_DIRECT, or asked not to)".into())
}

/// A CPU list as fio writes it: 0-3,5.
fn cpu_list(v: &str) -> Result<Vec<i64>, String> {
    let mut out = Vec::new();
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (parse::int(a)?, parse::int(b)?);
                if a > b || b >= libc::CPU_SETSIZE as i64 || a < 0 {
                    return Err(format!("'{part}' is not a CPU range"));
                }
                out.extend(a..=b);
            }
            None => out.push(parse::int(part)?),
        }
    }
    if out.is_empty() {
        return Err("names no CPU".into());
    }
    Ok(out)
}

pub fn cpus_allowed(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let cpus = cpu_list(v.unwrap_or(""))?;
    let split = t.value("cpus_allowed_policy").map(str::trim) == Some("split");
    if cpus.len() > 1 && !split {
        return Err("fio lets every thread run on any CPU of the list; iolab pins each thread to one CPU of it, round-robin (fio's cpus_allowed_policy=split)".into());
    }
    Ok(t.set_option("cpus", Value::Array(cpus.into_iter().map(Value::Integer).collect())))
}

pub fn cpus_allowed_policy(_: &mut Tr, v: Option<&str>) -> Result<String, String> {
    match v.unwrap_or("").trim() {
        "shared" | "split" => Ok("(with cpus_allowed)".into()),
        other => Err(format!("'{other}' is not a policy iolab has (it pins one thread to one CPU: split)")),
    }
}

pub fn numa_cpu_nodes(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = parse::int(v.unwrap_or("")).map_err(|_| "iolab pins a run's threads to one NUMA node: give one node".to_string())?;
    Ok(t.set_matrix("numa", Value::Integer(n)))
}

pub fn continue_on_error(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    match v.unwrap_or("1").trim() {
        "none" | "0" => Ok("(stop at the first error, as iolab does)".into()),
        "all" | "1" => Ok(t.set_option("continue_on_error", Value::Boolean(true))),
        _ => Err("iolab counts every failed I/O and goes on, or stops at the first: give all or none".into()),
    }
}

pub fn hipri(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    t.ring_only("hipri")?;
    if !flag(v)? {
        return Ok("(interrupts)".into());
    }
    Ok(t.set_matrix("complete", Value::String("poll".into())))
}

pub fn fixedbufs(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    t.ring_only("fixedbufs")?;
    let b = flag(v)?;
    Ok(t.set_option("register_buffers", Value::Boolean(b)))
}

pub fn registerfiles(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    t.ring_only("registerfiles")?;
    let b = flag(v)?;
    Ok(t.set_option("register_files", Value::Boolean(b)))
}

pub fn sqthread_poll(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    t.ring_only("sqthread_poll")?;
    if !flag(v)? {
        return Ok("(submitted by system call)".into());
    }
    Ok(t.set_matrix("submit", Value::String("sqpoll".into())))
}

pub fn sqthread_poll_cpu(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    t.ring_only("sqthread_poll_cpu")?;
    let n = count(v)?;
    Ok(t.set_option("sq_cpu", Value::Integer(n)))
}

pub fn force_async(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    t.ring_only("force_async")?;
    match count(v)? {
        0 => Ok("(never)".into()),
        1 => Ok(t.set_option("force_async", Value::Boolean(true))),
        _ => Err("iolab sets IOSQE_ASYNC on every request or none (force_async=1 or 0)".into()),
    }
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
pub fn translate(
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
    };
    // fio's defaults that differ from iolab's, set before the job's own options (not where the
    // user dropped the option: then iolab's own default stands).
    let untouched = |n: &str| !written.iter().any(|o| find(&o.key).is_some_and(|e| e.name == n));
    let value = |n: &str| if untouched(n) { None } else { value(n) };
    if value("ioengine").is_none() {
        lines
            .push(("(no ioengine)".into(), format!("{} (fio's default engine)", t.set_matrix("interface", Value::String("psync".into())))));
    }
    if value("direct").is_none() && value("buffered").is_none() && !t.diskless && kind != InterfaceKind::NvmePassthru {
        lines.push(("(no direct)".into(), format!("{} (fio's default direct=0)", t.set_option("buffered", Value::Boolean(true)))));
    }
    if t.ring {
        for (opt, key) in [("fixedbufs", "register_buffers"), ("registerfiles", "register_files")] {
            if value(opt).is_none() {
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
    // Run order: one job at a time, in file order.
    let sequential = ignore.iter().any(|i| i == CONCURRENCY);
    if sequential && !earlier.is_empty() && !t.after_previous {
        dropped.push(format!("{CONCURRENCY} (run after '{}', not beside it)", earlier.last().unwrap()));
    }
    if !sequential && !earlier.is_empty() && !t.after_previous {
        let prev = earlier.last().unwrap();
        return Err(format!(
            "fio job '{name}': stonewall: it has none, so fio starts it together with '{prev}', and iolab runs one job at a time: add stonewall to [{name}] (or --fio-ignore concurrency to run the jobs one after another)"
        ));
    }
    // The libaio rule, named by the option that made the job buffered.
    if info.async_needs_direct && t.options.get("buffered").and_then(Value::as_bool) == Some(true) {
        let why = format!(
            "{} runs asynchronously only with O_DIRECT, so iolab refuses it buffered: set direct=1, or use ioengine=psync or io_uring",
            kind.name()
        );
        return Err(match find_opt("direct").or_else(|| find_opt("buffered")) {
            Some(o) => refuse(&o, &why),
            None => format!(
                "fio job '{name}': direct: fio's default is direct=0 (buffered), and {why} (--fio-ignore direct runs it with O_DIRECT)"
            ),
        });
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
    let budget_line;
    if time_based {
        let Some(r) = runtime.filter(|r| *r > 0.0) else {
            return Err(refuse(&find_opt("time_based").unwrap(), "runs until runtime=, and the job gives none"));
        };
        if let Some(o) = find_opt("number_ios") {
            return Err(refuse(&o, "with time_based fio ends at whichever comes first, number_ios or runtime; iolab ends at one"));
        }
        budget_line = t.set_top("runtime", Value::String(format!("{r}s")));
    } else {
        if let Some(o) = find_opt("runtime") {
            return Err(refuse(&o, "without time_based fio ends at whichever comes first, runtime or the job's size; iolab ends at one: add time_based to run for the time, or drop runtime to run for the bytes"));
        }
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
        budget_line = match ios {
            Some(n) if n > 0 && (n as u64).saturating_mul(clones).saturating_mul(bs) < bytes => {
                format!("{} (number_ios x numjobs)", t.set_top("ios", Value::Integer(n.saturating_mul(clones as i64))))
            }
            _ => format!("{} (size x loops x numjobs, as fio)", t.set_top("bytes", Value::String(bytes.to_string()))),
        };
        if bytes == 0 {
            return Err(format!("fio job '{name}': size: the job has no bytes to do"));
        }
    }
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
        let why = e.trim_start_matches("plan: ");
        let inner = why.split_once("(1 by: ").map(|(_, r)| r.trim_end_matches("): change the matrix or the rules")).unwrap_or(why);
        let behind = FLAGS.iter().filter(|(flag, _)| inner.contains(flag)).find_map(|(_, opt)| find_opt(opt));
        return Err(match behind {
            Some(o) => format!("fio job '{name}' ({}): {}: iolab refuses the job it maps to: {inner}", o.at, o.shown()),
            None => format!("fio job '{name}': iolab refuses the job it maps to: {inner}"),
        });
    }
    Ok(Mapped { name: plan_name, text, lines })
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

// ---- the reverse direction: a planned job's value as fio's ----

fn is_ring(j: &Job) -> bool {
    matches!(j.io.interface, InterfaceKind::IoUring | InterfaceKind::NvmePassthru)
}

pub fn x_filename(j: &Job) -> Result<Option<String>, String> {
    if j.targets.paths.is_empty() {
        return Ok(None);
    }
    Ok(Some(j.targets.paths.iter().map(|p| p.replace(':', "\\:")).collect::<Vec<_>>().join(":")))
}
pub fn x_rw(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.rw.name().into()))
}
pub fn x_rwmixread(j: &Job) -> Result<Option<String>, String> {
    Ok((j.workload.rw == crate::plan::Rw::Randrw).then(|| (100 - j.workload.write_mix.min(100)).to_string()))
}
pub fn x_bs(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.bs.to_string()))
}
pub fn x_randseed(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.seed.to_string()))
}
pub fn x_norandommap(j: &Job) -> Result<Option<String>, String> {
    Ok(j.workload.rw.is_random().then(|| "1".into()))
}
pub fn x_ioengine(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(
        match j.io.interface {
            InterfaceKind::Psync => "psync",
            InterfaceKind::Pvsync2 => "pvsync2",
            InterfaceKind::PosixAio => "posixaio",
            InterfaceKind::Libaio => "libaio",
            InterfaceKind::IoUring => "io_uring",
            InterfaceKind::NvmePassthru => "io_uring_cmd",
            InterfaceKind::Null => "null",
            other => return Err(format!("interface {}: fio has no engine for it", other.name())),
        }
        .into(),
    ))
}
pub fn x_iodepth(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.qd.to_string()))
}
pub fn x_batch(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.batch_submit.to_string()))
}
pub fn x_batch_reap(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.batch_reap.to_string()))
}
pub fn x_size(j: &Job) -> Result<Option<String>, String> {
    Ok(match j.targets.size {
        Some(s) => Some(s.to_string()),
        // iolab's temporary target (and null's address space): 1 GiB.
        None if j.targets.paths.is_empty() => Some((1u64 << 30).to_string()),
        None => None,
    })
}
/// fio's numbers are per clone; iolab's budgets are all threads together.
fn per_clone(j: &Job, n: u64, what: &str) -> Result<u64, String> {
    let t = j.workload.threads.max(1) as u64;
    if !n.is_multiple_of(t) {
        return Err(format!("{what} {n} over {t} threads: fio's budget is per clone (numjobs), and {n} is not a multiple of {t}"));
    }
    Ok(n / t)
}
pub fn x_io_size(j: &Job) -> Result<Option<String>, String> {
    Ok(match j.timing.budget {
        Budget::Bytes(n) => Some(per_clone(j, n, "bytes")?.to_string()),
        Budget::Ios(n) => Some((per_clone(j, n, "ios")? * j.workload.bs).to_string()),
        Budget::Seconds(_) => None,
    })
}
pub fn x_offset(j: &Job) -> Result<Option<String>, String> {
    Ok((j.targets.offset > 0).then(|| j.targets.offset.to_string()))
}
pub fn x_number_ios(j: &Job) -> Result<Option<String>, String> {
    Ok(match j.timing.budget {
        Budget::Ios(n) => Some(per_clone(j, n, "ios")?.to_string()),
        _ => None,
    })
}
pub fn x_direct(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(if j.io.direct { "1" } else { "0" }.into()))
}
pub fn x_numjobs(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.threads.to_string()))
}
pub fn x_runtime(j: &Job) -> Result<Option<String>, String> {
    Ok(match j.timing.budget {
        Budget::Seconds(s) => Some(format!("{}ms", (s * 1000.0).round() as u64)),
        _ => None,
    })
}
pub fn x_time_based(j: &Job) -> Result<Option<String>, String> {
    Ok(matches!(j.timing.budget, Budget::Seconds(_)).then(|| "1".into()))
}
pub fn x_ramp_time(j: &Job) -> Result<Option<String>, String> {
    Ok((j.timing.ramp_s > 0.0).then(|| format!("{}ms", (j.timing.ramp_s * 1000.0).round() as u64)))
}
pub fn x_verify(j: &Job) -> Result<Option<String>, String> {
    Ok(j.policy.verify.then(|| "crc32c".into()))
}
pub fn x_ioscheduler(j: &Job) -> Result<Option<String>, String> {
    Ok(j.system.scheduler.clone())
}
pub fn x_cpus_allowed(j: &Job) -> Result<Option<String>, String> {
    Ok((!j.workload.cpus.is_empty()).then(|| j.workload.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")))
}
pub fn x_cpus_allowed_policy(j: &Job) -> Result<Option<String>, String> {
    Ok((j.workload.cpus.len() > 1).then(|| "split".into()))
}
pub fn x_numa(j: &Job) -> Result<Option<String>, String> {
    match j.workload.numa {
        Numa::Off => Ok(None),
        Numa::Node(n) => Ok(Some(n.to_string())),
        Numa::Local => Err("numa local (the targets' node): fio takes a node's number: give numa = N".into()),
    }
}
pub fn x_continue_on_error(j: &Job) -> Result<Option<String>, String> {
    Ok(j.policy.continue_on_error.then(|| "all".into()))
}
pub fn x_hipri(j: &Job) -> Result<Option<String>, String> {
    match j.io.complete {
        Complete::Irq => Ok(None),
        Complete::Poll => Ok(Some("1".into())),
        other => Err(format!("complete {}: fio has no such completion", other.name())),
    }
}
pub fn x_fixedbufs(j: &Job) -> Result<Option<String>, String> {
    Ok(is_ring(j).then(|| if j.io.ring.register_buffers { "1" } else { "0" }.into()))
}
pub fn x_registerfiles(j: &Job) -> Result<Option<String>, String> {
    Ok(is_ring(j).then(|| if j.io.ring.register_files { "1" } else { "0" }.into()))
}
pub fn x_sqthread_poll(j: &Job) -> Result<Option<String>, String> {
    Ok((j.io.submit == Submit::Sqpoll).then(|| "1".into()))
}
pub fn x_sq_cpu(j: &Job) -> Result<Option<String>, String> {
    Ok(j.io.ring.sq_cpu.map(|c| c.to_string()))
}
pub fn x_force_async(j: &Job) -> Result<Option<String>, String> {
    Ok(j.io.ring.force_async.then(|| "1".into()))
}
