//! One fio job translated into an iolab plan (TOML, the keys `iolab sweep PLAN.toml` takes)
//! through the table, and a planned job written back as fio options. The `set` functions are the
//! table's forward direction, the `x_` functions its reverse.
use super::parse::{self, Opt};
use crate::interfaces::InterfaceKind;
use crate::plan::{Budget, Complete, Job, Numa, Submit};
use toml::Value;

/// Translates one option's value (None: a bare flag); returns what the dry run shows after `->`.
pub type SetFn = fn(&mut Tr, Option<&str>) -> Result<String, String>;

/// A job being translated: its options in effect (globals above it, then its own; the last
/// written wins) and the plan being built.
pub struct Tr<'a> {
    pub job: &'a str,
    /// (table name, the option as written), in the order written.
    pub(super) opts: Vec<(&'static str, Opt)>,
    pub(super) kb: u64,
    pub top: toml::Table,
    pub matrix: toml::Table,
    pub options: toml::Table,
    /// iolab's interface, its facts.
    pub(super) kind: InterfaceKind,
    pub(super) sync_engine: bool,
    pub(super) ring: bool,
    pub(super) diskless: bool,
    /// What the budget is made of, read from the options at the end.
    pub(super) region: Option<u64>,
    /// Names of the jobs before this one, and whether something orders it after the previous.
    pub(super) earlier: &'a [String],
    pub after_previous: bool,
    pub(super) cli_targets: &'a [String],
    pub(super) targets: Vec<String>,
    pub notes: Vec<(String, String)>,
    /// The option by which the job's end (or failure) stops the jobs beside it (exitall).
    pub exits_group: Option<String>,
}

/// A translated job: its plan text and the dry run's mapping lines.
#[derive(Debug)]
pub struct Mapped {
    pub name: String,
    pub text: String,
    /// (fio option as written, what it became).
    pub lines: Vec<(String, String)>,
    /// The group of jobs it runs together with (fio's jobs without stonewall between them),
    /// named `FILE/gN`; None when it runs alone.
    pub group: Option<String>,
    /// fio's `startdelay`: how long after its group's start it starts, seconds.
    pub start_delay_s: f64,
    /// Nothing orders it after the job above, so fio starts it together with that one.
    pub joins_previous: bool,
    /// fio's exitall (or exitall_on_error): its end stops jobs run together with it (the
    /// option's name, for the dry run's line).
    pub exits_group: Option<String>,
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
    pub(super) fn set_matrix(&mut self, key: &str, v: Value) -> String {
        let line = format!("matrix.{key} = {}", shown(&one(v.clone())));
        self.matrix.insert(key.into(), one(v));
        line
    }
    pub(super) fn set_option(&mut self, key: &str, v: Value) -> String {
        let line = format!("options.{key} = {}", shown(&v));
        self.options.insert(key.into(), v);
        line
    }
    pub(super) fn set_top(&mut self, key: &str, v: Value) -> String {
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

pub(super) fn count(v: Option<&str>) -> Result<i64, String> {
    let n = parse::int(v.unwrap_or("1"))?;
    if n < 0 {
        return Err(format!("{n} is negative"));
    }
    Ok(n)
}

pub(super) fn flag(v: Option<&str>) -> Result<bool, String> {
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

pub(crate) fn wait_for(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let name = v.unwrap_or("").trim().to_string();
    if !t.earlier.contains(&name) {
        return Err(format!("waits for '{name}', which is no job above it"));
    }
    if t.earlier.last() != Some(&name) {
        return Err(format!(
            "waits for '{name}', which is not the job just above it: iolab starts a job with the jobs above it or after them all"
        ));
    }
    t.after_previous = true;
    Ok(format!("(runs after '{name}': {SEQUENCE_NOTE})"))
}

const SEQUENCE_NOTE: &str = "a new group, started when the jobs above have ended";

pub(crate) fn stonewall(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if flag(v)? {
        t.after_previous = true;
    }
    Ok(format!("(run order: {SEQUENCE_NOTE})"))
}

/// fio's `startdelay`: the job starts that long after its group (a range, fio's random delay,
/// is refused).
pub(crate) fn startdelay(_: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let v = v.unwrap_or("0");
    if v.contains('-') && !v.trim_start().starts_with('(') {
        return Err("a range is a random delay, and iolab's start delay is one duration".into());
    }
    let s = parse::seconds(v)?;
    Ok(format!("(starts {s} s after its group's start, its window its own)"))
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
    let (pattern, modifier) = match v.split_once(':') {
        Some((p, m)) => (p.trim().to_string(), Some(m.trim().to_string())),
        None => (v.clone(), None),
    };
    let name = match pattern.as_str() {
        "read" | "write" | "randread" | "randwrite" | "randrw" => pattern.clone(),
        "rw" | "readwrite" => "rw".into(),
        "trim" | "randtrim" | "trimwrite" | "randtrimwrite" => return Err("iolab issues reads and writes, no trims".into()),
        other => return Err(format!("'{other}' is not an access pattern fio knows")),
    };
    let mut line = t.set_matrix("rw", Value::String(name.clone()));
    // fio's offset modifier: bytes added after each sequential I/O, or I/Os per random offset.
    if let Some(m) = modifier {
        if name.starts_with("rand") {
            let n = parse::int(&m)?;
            if n < 1 {
                return Err(format!("':{m}' is not a number of I/Os per random offset"));
            }
            if n > 1 {
                line += &format!(
                    ", {} (a new random offset every {n} I/Os, the rest following on)",
                    t.set_matrix("ios_per_offset", Value::Integer(n))
                );
            }
        } else {
            let (neg, body) = m.strip_prefix('-').map_or((false, m.as_str()), |b| (true, b));
            let n = t.size(body)? as i64;
            let n = if neg { -n } else { n };
            if n != 0 {
                let what = if n < 0 { "backwards" } else { "with holes" };
                line += &format!(
                    ", {} (each I/O {what}: the next offset is bs + {n} on)",
                    t.set_matrix("stride", Value::String(n.to_string()))
                );
            }
        }
    }
    Ok(line)
}

/// Does the job's rw ask for random offsets?
fn random_rw(t: &Tr) -> bool {
    t.value("rw").is_some_and(|v| v.trim().to_ascii_lowercase().starts_with("rand"))
}

/// The write percentage of a randrw job from rwmixread or rwmixwrite (whichever came last).
fn mix(t: &mut Tr, which: &str) -> Result<String, String> {
    if !matches!(t.value("rw").map(str::to_ascii_lowercase).as_deref(), Some("randrw" | "rw" | "readwrite")) {
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

pub(crate) fn rwmixread(t: &mut Tr, _: Option<&str>) -> Result<String, String> {
    mix(t, "rwmixread")
}

pub(crate) fn rwmixwrite(t: &mut Tr, _: Option<&str>) -> Result<String, String> {
    mix(t, "rwmixwrite")
}

/// One block size from fio's `read,write[,trim]` list.
pub(super) fn one_bs(t: &Tr, v: &str) -> Result<u64, String> {
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

pub(crate) fn bsrange(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
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
        [(lo, hi), rest @ ..] if rest.iter().all(|r| *r == (*lo, *hi)) => {
            let mix: crate::plan::BsMix = format!("{lo}-{hi}").parse().map_err(|e: crate::plan::PlanError| e.to_string())?;
            Ok(t.set_matrix("bssplit", Value::String(mix.to_string())))
        }
        _ => Err("iolab has one block size range for reads and writes: give one range".into()),
    }
}

/// fio's `bssplit=4k/60:64k/40` (sizes in fio's units, shares as fio fills them in).
pub(crate) fn bssplit(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let v = v.unwrap_or("").trim();
    let mut forms: Vec<&str> = v.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
    forms.dedup();
    let [form] = forms.as_slice() else {
        return Err("iolab has one block size split for reads and writes: give one, without ','".into());
    };
    let mut parts = Vec::new();
    for part in form.split(':') {
        let (b, p) = part.split_once('/').unwrap_or((part, ""));
        parts.push(format!("{}/{}", t.size(b)?, p.trim()));
    }
    let mix: crate::plan::BsMix = parts.join(":").parse().map_err(|e: crate::plan::PlanError| e.to_string())?;
    Ok(t.set_matrix("bssplit", Value::String(mix.to_string())))
}

/// fio's `random_distribution` (zoned_abs sizes in fio's units).
pub(crate) fn random_distribution(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let v = v.unwrap_or("").trim();
    let text = match v.split_once(':') {
        Some((name, zones)) if name.trim().eq_ignore_ascii_case("zoned_abs") => {
            let mut parts = Vec::new();
            for z in zones.split(':') {
                let (a, r) = z.split_once('/').unwrap_or((z, ""));
                parts.push(format!("{a}/{}", t.size(r)?));
            }
            format!("zoned_abs:{}", parts.join(":"))
        }
        _ => v.to_string(),
    };
    let d: crate::plan::Distribution = text.parse().map_err(|e: crate::plan::PlanError| e.to_string())?;
    if d.is_random() {
        return Ok("(uniform: iolab's default)".into());
    }
    Ok(t.set_matrix("distribution", Value::String(d.to_string())))
}

/// fio's `randrepeat=0` seeds from the clock: a seed drawn now, written in the plan (and so in
/// every run's record), so the run can be repeated from it; randseed= wins, as in fio.
pub(crate) fn randrepeat(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if flag(v)? {
        return Ok("(iolab's way: the seed's stream)".into());
    }
    if t.value("randseed").is_some() {
        return Ok("(randseed= gives the seed)".into());
    }
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let seed = crate::rng::Rng::new(nanos ^ std::process::id() as u64).next_u64() >> 33;
    let line = t.set_top("seed", Value::Integer(seed as i64));
    Ok(format!("{line} (drawn now, as fio seeds from the clock; recorded with every run)"))
}

pub(crate) fn ba(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = one_bs(t, v.unwrap_or(""))?;
    if !random_rw(t) {
        return Ok("(no effect: fio aligns random offsets only)".into());
    }
    // A mix's offsets are aligned to its smallest size (fio's default blockalign).
    let smallest = |key: &str, t: &Tr| -> Result<Option<u64>, String> {
        let Some(v) = t.value(key) else { return Ok(None) };
        let sizes = v.split([',', ':', '/', '-']).filter(|p| !p.trim().is_empty()).filter_map(|p| t.size(p).ok());
        Ok(sizes.filter(|s| *s > 100).min())
    };
    let bs = match (smallest("bssplit", t)?, smallest("bsrange", t)?, t.value("bs")) {
        (Some(b), _, _) | (None, Some(b), _) => b,
        (None, None, Some(b)) => one_bs(t, b)?,
        (None, None, None) => 4096,
    };
    if n == bs {
        return Ok("(the block size: iolab's alignment)".into());
    }
    Ok(t.set_matrix("blockalign", Value::Integer(n as i64)))
}

/// fio's random_generator: lfsr visits each block once per pass; tausworthe's promise, uniform
/// offsets, is what iolab's own generator keeps.
pub(crate) fn random_generator(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    match v.unwrap_or("").trim() {
        "tausworthe" | "tausworthe64" => {
            Ok("(iolab's own seeded generator: uniform offsets, fio's only promise for tausworthe; not fio's sequence)".into())
        }
        "lfsr" if !random_rw(t) => Ok("(no effect: the job is sequential)".into()),
        "lfsr" => {
            let line = t.set_matrix("random_generator", Value::String("lfsr".into()));
            Ok(format!("{line} (each block once per pass, in iolab's seeded order, not fio's LFSR sequence)"))
        }
        other => Err(format!("'{other}' is not a generator fio has (tausworthe, lfsr, tausworthe64)")),
    }
}

/// fio's strided zones from zonesize, zonerange (default zonesize) and zoneskip, unless
/// zonemode says none (fio then ignores them).
fn zones(t: &mut Tr) -> Result<String, String> {
    match t.value("zonemode").map(str::trim) {
        Some("none") => return Ok("(zonemode=none: ignored, as fio ignores it)".into()),
        Some("zbd") => return Ok("(with zonemode)".into()),
        _ => {}
    }
    let Some(size) = t.value("zonesize") else { return Ok("(no zonesize: no zones, as fio)".into()) };
    let size = t.size(size)?;
    if size == 0 {
        return Ok("(zonesize=0: no zones, as fio)".into());
    }
    let range = t.value("zonerange").map(|r| t.size(r)).transpose()?.filter(|r| *r > 0).unwrap_or(size);
    let skip = t.value("zoneskip").map(|r| t.size(r)).transpose()?.unwrap_or(0);
    let z = crate::plan::Zones { size, range, skip };
    Ok(t.set_matrix("zones", Value::String(z.to_string())))
}

pub(crate) fn zonemode(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    match v.unwrap_or("").trim() {
        "none" => Ok("(no zones)".into()),
        "strided" => zones(t),
        "zbd" => Err("zbd works a zoned block device's zones (write pointers, zone resets, open-zone limits): iolab has no zoned-device mode; zonemode=strided (fio's old-style zones) it has".into()),
        other => Err(format!("'{other}' is not a zone mode fio has (none, strided, zbd)")),
    }
}

pub(crate) fn zone_option(t: &mut Tr, _: Option<&str>) -> Result<String, String> {
    zones(t)
}

pub(crate) fn randseed(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
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
pub(super) fn engine(name: &str) -> Result<(InterfaceKind, Option<&'static str>), String> {
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
    // Offloaded, fio keeps a synchronous engine's depth: that many submission threads.
    let offload = t.value("io_submit_mode").map(str::trim) == Some("offload");
    if t.sync_engine && n > 1 && !offload {
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

pub(crate) fn iodepth_batch(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = match count(v)? {
        0 => depth(t)?,
        n => n,
    };
    Ok(t.set_matrix("batch", Value::Integer(n)))
}

pub(crate) fn batch_complete_min(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let n = count(v)?;
    if n == 0 {
        return Err("0 reaps without waiting; iolab waits for at least one completion when the queue is full".into());
    }
    Ok(t.set_option("batch_reap", Value::Integer(n)))
}

pub(crate) fn batch_complete_max(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if count(v)? != depth(t)? {
        return Err("iolab takes every completion that is ready (fio's default, iodepth)".into());
    }
    Ok("(iodepth: iolab takes every completion that is ready)".into())
}

pub(crate) fn iodepth_low(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
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

pub(crate) fn filesize(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let v = v.unwrap_or("");
    if v.contains([':', '-']) && !v.starts_with('(') {
        return Err("iolab uses one range per target: give one size".into());
    }
    let n = t.size(v)?;
    t.region = Some(n);
    Ok(format!("size = \"{n}\" (the range used)"))
}

pub(crate) fn io_size(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
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

pub(crate) fn nrfiles(_: &mut Tr, v: Option<&str>) -> Result<String, String> {
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

pub(crate) fn ramp_time(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let s = parse::seconds(v.unwrap_or(""))?;
    Ok(t.set_top("ramp", Value::String(format!("{s}s"))))
}

pub fn verify(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let method = v.unwrap_or("").trim();
    if method == "0" || method == "none" {
        return Ok("(no verification)".into());
    }
    let line = t.set_option("verify", Value::Boolean(true));
    if let Some(form) = verify_form(t)? {
        return Ok(format!("{line}, {}", t.set_option("verify_fio", Value::String(form.to_string()))));
    }
    Ok(format!("{line} (iolab's own checksummed blocks, not {method})"))
}

/// fio's verify form from the job's verify options in effect (`verify`, `verify_pattern`,
/// `verify_interval`, `do_verify`): Some where iolab writes and checks fio's form (verify=meta
/// or verify=pattern, or a verify_pattern alone, which fio makes verify=pattern with its header);
/// None for iolab's own blocks (fio's checksums); Err where the options ask for what neither is.
fn verify_form(t: &Tr) -> Result<Option<crate::verify::FioForm>, String> {
    let method = t.value("verify").map(str::trim);
    let shaped = ["verify_pattern", "verify_interval"].into_iter().find(|o| t.value(o).is_some());
    let no_read_back = t.value("do_verify").is_some_and(|v| v.trim() == "0");
    let mut form = crate::verify::FioForm::default();
    match method {
        Some("meta") | Some("pattern") => form.set("verify", method.unwrap_or_default())?,
        None if t.value("verify_pattern").is_some() => {}
        None | Some("0") | Some("none") => return Ok(None),
        Some(m) => {
            if let Some(o) = shaped {
                return Err(format!("{o} with verify={m}: iolab's own checksummed blocks take none; fio's pattern is checked with verify=meta or verify=pattern"));
            }
            if no_read_back {
                return Err(format!("do_verify=0 with verify={m}: iolab reads back every block it wrote with its own checksummed blocks; give verify=meta or verify=pattern with a verify_pattern"));
            }
            return Ok(None);
        }
    }
    for o in ["verify_pattern", "verify_interval", "do_verify"] {
        if let Some(v) = t.value(o) {
            form.set(o, v)?;
        }
    }
    if !form.header && form.pattern().is_empty() {
        return Err("verify=pattern checks a pattern: give verify_pattern".into());
    }
    Ok(Some(form))
}

/// One of fio's verify options that shape the form (`verify_fio`): the form again, from all of them.
fn verify_shape(t: &mut Tr) -> Result<String, String> {
    match verify_form(t)? {
        Some(form) => {
            if t.value("verify").is_none() {
                t.set_option("verify", Value::Boolean(true));
            }
            Ok(t.set_option("verify_fio", Value::String(form.to_string())))
        }
        None => Ok("(no verification)".into()),
    }
}

pub(crate) fn verify_pattern(t: &mut Tr, _: Option<&str>) -> Result<String, String> {
    verify_shape(t)
}
pub(crate) fn verify_interval(t: &mut Tr, _: Option<&str>) -> Result<String, String> {
    verify_shape(t)
}
pub(crate) fn do_verify(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    flag(v)?;
    verify_shape(t)
}

/// fio's fill_device: write until the device or file is full. iolab's budget is then the
/// target's whole size, whatever size= says (translate drops the region); the target must exist.
pub(crate) fn fill_device(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if !flag(v)? {
        return Ok("(the job's size)".into());
    }
    if t.diskless {
        return Err("the null engine has no end to fill".into());
    }
    Ok("(the budget below: the whole target, read for its size, as fio writes until it is full)".into())
}

pub(crate) fn ioscheduler(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
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

pub(crate) fn cpus_allowed_policy(_: &mut Tr, v: Option<&str>) -> Result<String, String> {
    match v.unwrap_or("").trim() {
        "shared" | "split" => Ok("(with cpus_allowed)".into()),
        other => Err(format!("'{other}' is not a policy iolab has (it pins one thread to one CPU: split)")),
    }
}

pub fn continue_on_error(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    match v.unwrap_or("1").trim() {
        "none" | "0" => Ok("(stop at the first error, as iolab does)".into()),
        "all" | "1" => Ok(t.set_option("continue_on_error", Value::Boolean(true))),
        _ => Err("iolab counts every failed I/O and goes on, or stops at the first: give all or none".into()),
    }
}

pub(crate) fn hipri(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
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

pub(crate) fn sqthread_poll(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    t.ring_only("sqthread_poll")?;
    if !flag(v)? {
        return Ok("(submitted by system call)".into());
    }
    Ok(t.set_matrix("submit", Value::String("sqpoll".into())))
}

pub(crate) fn sqthread_poll_cpu(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    t.ring_only("sqthread_poll_cpu")?;
    let n = count(v)?;
    Ok(t.set_option("sq_cpu", Value::Integer(n)))
}

pub(crate) fn force_async(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    t.ring_only("force_async")?;
    match count(v)? {
        0 => Ok("(never)".into()),
        1 => Ok(t.set_option("force_async", Value::Boolean(true))),
        _ => Err("iolab sets IOSQE_ASYNC on every request or none (force_async=1 or 0)".into()),
    }
}

/// One of fio's pacing options (`plan::pace`): the job's `matrix.pace` with it set. Sizes are
/// read in fio's units (kb_base) and written as bytes.
fn pace(t: &mut Tr, key: &str, v: Option<&str>) -> Result<String, String> {
    let v = v.unwrap_or("").trim();
    let v = if matches!(key, "rate" | "rate_min") {
        v.split(',')
            .map(|p| if p.trim().is_empty() { Ok(String::new()) } else { t.size(p).map(|n| n.to_string()) })
            .collect::<Result<Vec<_>, _>>()?
            .join(",")
    } else {
        v.to_string()
    };
    let mut p = crate::plan::pace::Pace::default();
    if let Some(Value::String(now)) = t.matrix.get("pace").and_then(|a| a.as_array()).and_then(|a| a.first()) {
        for w in now.split_whitespace() {
            let (k, v) = w.split_once('=').unwrap_or((w, ""));
            p.set(k, v)?;
        }
    }
    p.set(key, &v)?;
    Ok(t.set_matrix("pace", Value::String(p.to_string())))
}

pub(crate) fn rate(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "rate", v)
}
pub(crate) fn rate_iops(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "rate_iops", v)
}
pub(crate) fn rate_min(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "rate_min", v)
}
pub(crate) fn rate_iops_min(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "rate_iops_min", v)
}
pub(crate) fn rate_process(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "rate_process", v)
}
pub(crate) fn rate_cycle(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "rate_cycle", v)
}
pub(crate) fn thinktime(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "thinktime", v)
}
pub(crate) fn thinktime_spin(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "thinktime_spin", v)
}
pub(crate) fn thinktime_blocks(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "thinktime_blocks", v)
}
pub(crate) fn thinktime_blocks_type(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "thinktime_blocks_type", v)
}
pub(crate) fn thinktime_iotime(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "thinktime_iotime", v)
}
/// fio's `io_submit_mode`: `offload` is the pacing's submit mode (`engine::offload`: paced by
/// the job's thread, submitted by iodepth threads, latency from when each I/O was queued).
pub(crate) fn io_submit_mode(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    match v.unwrap_or("").trim() {
        "inline" => Ok("(submitted by the thread that paces, as iolab does)".into()),
        "offload" => {
            let line = pace(t, "io_submit_mode", Some("offload"))?;
            Ok(format!("{line} (iodepth submission threads at depth 1; latency from when each I/O was queued)"))
        }
        o => Err(format!("'{o}' is not a submit mode (inline, offload)")),
    }
}

/// fio's `flow`, `flow_id` and `flow_sleep`: the job's weight in a flow shared with the jobs run
/// together with it (`matrix.pace`; alone, a flow holds nothing back).
pub(crate) fn flow(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "flow", v)
}
pub(crate) fn flow_id(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "flow_id", v)
}
pub(crate) fn flow_sleep(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "flow_sleep", v)
}

/// fio's `exitall`: when this job ends, the jobs `exit_what` names among those run together with
/// it are stopped (`matrix.pace`; `session::group` stops them). Alone there is nothing to stop.
pub(crate) fn exitall(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if flag(v)? {
        t.exits_group = Some("exitall".into());
    }
    pace(t, "exitall", Some(if flag(v)? { "1" } else { "0" }))
}

pub(crate) fn exitall_on_error(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    if flag(v)? && t.exits_group.is_none() {
        t.exits_group = Some("exitall_on_error".into());
    }
    pace(t, "exitall_on_error", Some(if flag(v)? { "1" } else { "0" }))
}

pub(crate) fn exit_what(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "exit_what", v)
}

/// fio's `new_group`: a new reporting group, which bounds what `exit_what=group` stops.
pub(crate) fn new_group(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    pace(t, "new_group", Some(if flag(v)? { "1" } else { "0" }))
}

// ---- the reverse direction: a planned job's value as fio's ----

fn is_ring(j: &Job) -> bool {
    matches!(j.io.interface, InterfaceKind::IoUring | InterfaceKind::NvmePassthru)
}

pub(crate) fn x_filename(j: &Job) -> Result<Option<String>, String> {
    if j.targets.paths.is_empty() {
        return Ok(None);
    }
    Ok(Some(j.targets.paths.iter().map(|p| p.replace(':', "\\:")).collect::<Vec<_>>().join(":")))
}
pub(crate) fn x_rw(j: &Job) -> Result<Option<String>, String> {
    let p = &j.workload.pattern;
    Ok(Some(match (p.stride, p.ios_per_offset) {
        (0, 0 | 1) => j.workload.rw.name().into(),
        (0, n) => format!("{}:{n}", j.workload.rw.name()),
        (s, _) => format!("{}:{s}", j.workload.rw.name()),
    }))
}
pub(crate) fn x_ba(j: &Job) -> Result<Option<String>, String> {
    Ok((j.workload.pattern.blockalign > 0).then(|| j.workload.pattern.blockalign.to_string()))
}
pub(crate) fn x_random_generator(j: &Job) -> Result<Option<String>, String> {
    Ok((j.workload.pattern.random_generator == crate::plan::Generator::Lfsr).then(|| "lfsr".into()))
}
pub(crate) fn x_zonemode(j: &Job) -> Result<Option<String>, String> {
    Ok(j.workload.pattern.zones.map(|_| "strided".into()))
}
pub(crate) fn x_zonesize(j: &Job) -> Result<Option<String>, String> {
    Ok(j.workload.pattern.zones.map(|z| z.size.to_string()))
}
pub(crate) fn x_zonerange(j: &Job) -> Result<Option<String>, String> {
    Ok(j.workload.pattern.zones.map(|z| z.range.to_string()))
}
pub(crate) fn x_zoneskip(j: &Job) -> Result<Option<String>, String> {
    Ok(j.workload.pattern.zones.map(|z| z.skip.to_string()))
}
pub(crate) fn x_rwmixread(j: &Job) -> Result<Option<String>, String> {
    Ok(j.workload.rw.mixed().then(|| (100 - j.workload.write_mix.min(100)).to_string()))
}
pub(crate) fn x_bs(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.bs.to_string()))
}
pub(crate) fn x_bssplit(j: &Job) -> Result<Option<String>, String> {
    Ok(matches!(j.workload.bssplit, crate::plan::BsMix::Split(_)).then(|| j.workload.bssplit.to_string()))
}
pub(crate) fn x_bsrange(j: &Job) -> Result<Option<String>, String> {
    Ok(matches!(j.workload.bssplit, crate::plan::BsMix::Range(..)).then(|| j.workload.bssplit.to_string()))
}
pub(crate) fn x_random_distribution(j: &Job) -> Result<Option<String>, String> {
    Ok((!j.workload.distribution.is_random()).then(|| j.workload.distribution.to_string()))
}
pub(crate) fn x_randseed(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.seed.to_string()))
}
pub(crate) fn x_norandommap(j: &Job) -> Result<Option<String>, String> {
    Ok(j.workload.rw.is_random().then(|| "1".into()))
}
pub(crate) fn x_ioengine(j: &Job) -> Result<Option<String>, String> {
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
pub(crate) fn x_iodepth(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.qd.to_string()))
}
pub(crate) fn x_batch(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.batch_submit.to_string()))
}
pub(crate) fn x_batch_reap(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.batch_reap.to_string()))
}
pub(crate) fn x_size(j: &Job) -> Result<Option<String>, String> {
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
pub(crate) fn x_io_size(j: &Job) -> Result<Option<String>, String> {
    Ok(match j.timing.budget {
        Budget::Bytes(n) | Budget::SecondsOrBytes { bytes: n, .. } => Some(per_clone(j, n, "bytes")?.to_string()),
        Budget::Ios(n) | Budget::SecondsOrIos { ios: n, .. } => Some((per_clone(j, n, "ios")? * j.workload.bs).to_string()),
        Budget::Seconds(_) => None,
    })
}
pub(crate) fn x_offset(j: &Job) -> Result<Option<String>, String> {
    Ok((j.targets.offset > 0).then(|| j.targets.offset.to_string()))
}
pub(crate) fn x_number_ios(j: &Job) -> Result<Option<String>, String> {
    Ok(match j.timing.budget {
        Budget::Ios(n) | Budget::SecondsOrIos { ios: n, .. } => Some(per_clone(j, n, "ios")?.to_string()),
        _ => None,
    })
}
pub(crate) fn x_direct(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(if j.io.direct { "1" } else { "0" }.into()))
}
pub(crate) fn x_numjobs(j: &Job) -> Result<Option<String>, String> {
    Ok(Some(j.workload.threads.to_string()))
}
pub(crate) fn x_runtime(j: &Job) -> Result<Option<String>, String> {
    // Without time_based (a time with a count), fio ends at whichever comes first.
    Ok(j.timing.budget.seconds().map(|s| format!("{}ms", (s * 1000.0).round() as u64)))
}
pub(crate) fn x_time_based(j: &Job) -> Result<Option<String>, String> {
    Ok(matches!(j.timing.budget, Budget::Seconds(_)).then(|| "1".into()))
}
pub(crate) fn x_ramp_time(j: &Job) -> Result<Option<String>, String> {
    Ok((j.timing.ramp_s > 0.0).then(|| format!("{}ms", (j.timing.ramp_s * 1000.0).round() as u64)))
}
pub(crate) fn x_verify(j: &Job) -> Result<Option<String>, String> {
    let fio = j.policy.verify_fio.map(|f| if f.header { "meta" } else { "pattern" });
    Ok(j.policy.verify.then(|| fio.unwrap_or("crc32c").into()))
}
pub(crate) fn x_verify_pattern(j: &Job) -> Result<Option<String>, String> {
    let hex = |p: &[u8]| format!("0x{}", p.iter().map(|b| format!("{b:02x}")).collect::<String>());
    Ok(j.policy.verify_fio.filter(|f| !f.pattern().is_empty()).map(|f| hex(f.pattern())))
}
pub(crate) fn x_verify_interval(j: &Job) -> Result<Option<String>, String> {
    Ok(j.policy.verify_fio.filter(|f| f.interval > 0).map(|f| f.interval.to_string()))
}
pub(crate) fn x_do_verify(j: &Job) -> Result<Option<String>, String> {
    Ok(j.policy.verify_fio.filter(|f| !f.read_back).map(|_| "0".into()))
}
pub(crate) fn x_ioscheduler(j: &Job) -> Result<Option<String>, String> {
    Ok(j.system.scheduler.clone())
}
pub(crate) fn x_cpus_allowed(j: &Job) -> Result<Option<String>, String> {
    Ok((!j.workload.cpus.is_empty()).then(|| j.workload.cpus.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",")))
}
pub(crate) fn x_cpus_allowed_policy(j: &Job) -> Result<Option<String>, String> {
    Ok((j.workload.cpus.len() > 1).then(|| "split".into()))
}
pub(crate) fn x_numa(j: &Job) -> Result<Option<String>, String> {
    match j.workload.numa {
        Numa::Off => Ok(None),
        Numa::Node(n) => Ok(Some(n.to_string())),
        Numa::Nodes(m) => Ok(Some(crate::interfaces::thread::nodes_text(m))),
        Numa::Local => Err("numa local (the targets' node): fio takes a node's number: give numa = N".into()),
    }
}
pub(crate) fn x_continue_on_error(j: &Job) -> Result<Option<String>, String> {
    Ok(j.policy.continue_on_error.then(|| "all".into()))
}
pub(crate) fn x_hipri(j: &Job) -> Result<Option<String>, String> {
    match j.io.complete {
        Complete::Irq => Ok(None),
        Complete::Poll => Ok(Some("1".into())),
        other => Err(format!("complete {}: fio has no such completion", other.name())),
    }
}
pub(crate) fn x_fixedbufs(j: &Job) -> Result<Option<String>, String> {
    Ok(is_ring(j).then(|| if j.io.options.ring.register_buffers { "1" } else { "0" }.into()))
}
pub(crate) fn x_registerfiles(j: &Job) -> Result<Option<String>, String> {
    Ok(is_ring(j).then(|| if j.io.options.ring.register_files { "1" } else { "0" }.into()))
}
pub(crate) fn x_sqthread_poll(j: &Job) -> Result<Option<String>, String> {
    Ok((j.io.submit == Submit::Sqpoll).then(|| "1".into()))
}
pub(crate) fn x_sq_cpu(j: &Job) -> Result<Option<String>, String> {
    Ok(j.io.options.ring.sq_cpu.map(|c| c.to_string()))
}
pub(crate) fn x_force_async(j: &Job) -> Result<Option<String>, String> {
    Ok(j.io.options.ring.force_async.then(|| "1".into()))
}

// The pacing's reverse direction: fio's per-direction `a,b` and times in microseconds.
fn x_pace<T>(j: &Job, f: impl Fn(&crate::plan::pace::Pace) -> T) -> Option<T> {
    j.workload.pattern.pace.as_ref().map(f)
}
fn x_pair(v: [u64; 2]) -> Option<String> {
    (v != [0, 0]).then(|| if v[0] == v[1] { v[0].to_string() } else { format!("{},{}", v[0], v[1]) })
}
fn x_us(ns: u64, what: &str) -> Result<Option<String>, String> {
    if ns == 0 {
        return Ok(None);
    }
    if !ns.is_multiple_of(1000) {
        return Err(format!("{what} {ns} ns: fio's times are whole microseconds"));
    }
    Ok(Some(format!("{}us", ns / 1000)))
}
pub(crate) fn x_rate(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| x_pair(p.rate_bps)).flatten())
}
pub(crate) fn x_rate_iops(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| x_pair(p.rate_iops)).flatten())
}
pub(crate) fn x_rate_min(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| x_pair(p.rate_min_bps)).flatten())
}
pub(crate) fn x_rate_iops_min(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| x_pair(p.rate_min_iops)).flatten())
}
pub(crate) fn x_rate_process(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| p.rate_process == crate::plan::pace::RateProcess::Poisson).unwrap_or(false).then(|| "poisson".into()))
}
pub(crate) fn x_rate_cycle(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| (p.rate_cycle_ms != 1000).then(|| format!("{}ms", p.rate_cycle_ms))).flatten())
}
pub(crate) fn x_thinktime(j: &Job) -> Result<Option<String>, String> {
    x_us(x_pace(j, |p| p.thinktime_ns).unwrap_or(0), "thinktime")
}
pub(crate) fn x_thinktime_spin(j: &Job) -> Result<Option<String>, String> {
    x_us(x_pace(j, |p| p.thinktime_spin_ns).unwrap_or(0), "thinktime_spin")
}
pub(crate) fn x_thinktime_blocks(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| (p.thinktime_blocks > 0).then(|| p.thinktime_blocks.to_string())).flatten())
}
pub(crate) fn x_thinktime_blocks_type(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| p.thinktime_issue).unwrap_or(false).then(|| "issue".into()))
}
pub(crate) fn x_thinktime_iotime(j: &Job) -> Result<Option<String>, String> {
    x_us(x_pace(j, |p| p.thinktime_iotime_ns).unwrap_or(0), "thinktime_iotime")
}

pub(crate) fn x_flow(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| (p.flow > 0).then(|| p.flow.to_string())).flatten())
}
pub(crate) fn x_flow_id(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| (p.flow_id > 0).then(|| p.flow_id.to_string())).flatten())
}
pub(crate) fn x_flow_sleep(j: &Job) -> Result<Option<String>, String> {
    // An integer of microseconds (fio reads no unit here).
    Ok(x_us(x_pace(j, |p| p.flow_sleep_ns).unwrap_or(0), "flow_sleep")?.map(|us| us.trim_end_matches("us").to_string()))
}
pub(crate) fn x_exitall(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| p.exitall.then(|| "1".to_string())).flatten())
}
pub(crate) fn x_exitall_on_error(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| p.exitall_on_error.then(|| "1".to_string())).flatten())
}
pub(crate) fn x_exit_what(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| (p.exit_what != crate::plan::pace::ExitWhat::Group).then(|| p.exit_what.name().to_string())).flatten())
}
pub(crate) fn x_new_group(j: &Job) -> Result<Option<String>, String> {
    Ok(x_pace(j, |p| p.new_group.then(|| "1".to_string())).flatten())
}
pub(crate) fn x_io_submit_mode(j: &Job) -> Result<Option<String>, String> {
    let offload = x_pace(j, |p| p.submit_mode == crate::plan::pace::SubmitMode::Offload).unwrap_or(false);
    Ok(offload.then(|| "offload".into()))
}
