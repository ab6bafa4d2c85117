//! fio's job file format, read the way fio reads it (`init.c: __parse_jobs_ini`, `options.c`,
//! `parse.c`; fio's HOWTO is the reference): sections in order, each `[global…]` section
//! applying to the jobs below it, `include FILE` inside a section, `;` and `#` comments (also at
//! the end of a line), `${VAR}` from the environment (empty when unset), the keywords `$pagesize`,
//! `$mb_memory` and `$ncpus` with their simple math, arithmetic in parentheses, and sizes and
//! times with fio's suffixes (`k` = 1024 unless `kb_base=1000`).
use std::path::{Path, PathBuf};

/// One `name[=value]` line of a section, as written (after substitution).
#[derive(Clone, Debug, PartialEq)]
pub struct Opt {
    pub key: String,
    /// None for a bare flag (`time_based`), which fio reads as 1.
    pub value: Option<String>,
    /// Where it was written: the file and its line.
    pub at: String,
}

impl Opt {
    /// `key=value` or `key`, as shown in messages.
    pub fn shown(&self) -> String {
        match &self.value {
            Some(v) => format!("{}={v}", self.key),
            None => self.key.clone(),
        }
    }
}

/// A `[section]`: a job, or global options for the jobs below it.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    pub name: String,
    /// fio treats every section whose name starts with "global" as global options.
    pub global: bool,
    pub options: Vec<Opt>,
}

/// How deep includes may nest (an include of itself would never end).
const MAX_INCLUDE_DEPTH: usize = 16;

/// The sections of job file text read from `path` (includes are found relative to it).
pub(crate) fn parse_text(text: &str, path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Vec<Section>, String> {
    let mut sections: Vec<Section> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let at = format!("{} line {}", path.display(), n + 1);
        let line = strip_comment(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest.strip_suffix(']').ok_or_else(|| format!("{at}: section header '{line}' has no closing ']'"))?.trim();
            if name.is_empty() {
                return Err(format!("{at}: a section needs a name between [ and ]"));
            }
            sections.push(Section { name: name.to_string(), global: name.starts_with("global"), options: Vec::new() });
            continue;
        }
        let Some(section) = sections.last_mut() else {
            return Err(format!("{at}: option '{line}' outside of a [section] (fio: outside of [] job section)"));
        };
        read_option(line, path, &at, env, &mut section.options, 0)?;
    }
    Ok(sections)
}

/// One line of a section: an option, or `include FILE` (whose lines are this section's).
fn read_option(
    line: &str,
    path: &Path,
    at: &str,
    env: &dyn Fn(&str) -> Option<String>,
    out: &mut Vec<Opt>,
    depth: usize,
) -> Result<(), String> {
    if let Some(rest) = line.strip_prefix("include") {
        // fio takes what follows "include" and one separator character as the file name.
        let name = rest.get(1..).unwrap_or("").trim();
        if name.is_empty() {
            return Err(format!("{at}: include names no file"));
        }
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(format!("{at}: includes nest more than {MAX_INCLUDE_DEPTH} deep (does a file include itself?)"));
        }
        // As fio: the name as given when it exists, else relative to the including file.
        let mut file = PathBuf::from(name);
        if !file.exists() {
            if let Some(dir) = path.parent() {
                file = dir.join(name);
            }
        }
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{at}: cannot read included file {}: {e}", file.display()))?;
        for (n, raw) in text.lines().enumerate() {
            let inner_at = format!("{} line {}", file.display(), n + 1);
            let l = strip_comment(raw);
            if l.is_empty() {
                continue;
            }
            if l.starts_with('[') {
                return Err(format!(
                    "{inner_at}: an included file holds options only, not sections (fio: No new sections in included files)"
                ));
            }
            read_option(l, &file, &inner_at, env, out, depth + 1)?;
        }
        return Ok(());
    }
    let line = substitute(line, env)?;
    let (key, value) = match line.split_once('=') {
        Some((k, v)) => (k.trim().to_string(), Some(v.trim().to_string())),
        None => (line.trim().to_string(), None),
    };
    if key.is_empty() {
        return Err(format!("{at}: '{line}' sets no option"));
    }
    let value = value.map(|v| keywords(&v)).transpose().map_err(|e| format!("{at}: {key}: {e}"))?;
    out.push(Opt { key, value, at: at.to_string() });
    Ok(())
}

/// A line without its comment (from the first ';' or '#', as fio's `strip_blank_end`) and blanks.
fn strip_comment(line: &str) -> &str {
    let end = line.find([';', '#']).unwrap_or(line.len());
    line[..end].trim()
}

/// `${VAR}` replaced by the environment's value, or nothing when unset (fio's `fio_option_dup_subs`).
fn substitute(line: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        match rest[i + 2..].find('}') {
            Some(j) if j > 0 => {
                out.push_str(&env(&rest[i + 2..i + 2 + j]).unwrap_or_default());
                rest = &rest[i + 3 + j..];
            }
            _ => {
                out.push_str(&rest[i..i + 2]);
                rest = &rest[i + 2..];
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// fio's reserved keywords replaced by this machine's values; a value that held one and has
/// math in it is computed (fio hands it to `bc`, whole numbers).
fn keywords(value: &str) -> Result<String, String> {
    type Reader = fn() -> u64;
    let words: [(&str, Reader); 3] = [
        ("$pagesize", || {
            // SAFETY: sysconf has no preconditions.
            let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            if p > 0 {
                p as u64
            } else {
                4096
            }
        }),
        ("$mb_memory", || {
            // SAFETY: sysconf has no preconditions.
            let (pages, size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
            (pages.max(0) as u64 * size.max(0) as u64) >> 20
        }),
        ("$ncpus", || crate::host::online_cpus() as u64),
    ];
    let mut v = value.to_string();
    let mut any = false;
    for (word, get) in words {
        if v.contains(word) {
            v = v.replace(word, &get().to_string());
            any = true;
        }
    }
    if any && v.contains(['+', '-', '*', '/']) && !v.contains('\'') {
        let n = eval(&v, Units::Plain).map_err(|e| format!("'{value}': {e}"))?;
        return Ok(format!("{}", n.trunc() as i64));
    }
    Ok(v)
}

/// What a number's suffix means where it stands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Units {
    /// A count: no suffix.
    Plain,
    /// Bytes, with fio's prefixes for this `kb_base` (1024 or 1000).
    Bytes(u64),
    /// Time; a bare number counts this many seconds (1 for seconds, 1e-6 in expressions).
    Time(f64),
}

/// A size with fio's suffixes: `4k`, `4KiB`, `1m`, `0x1000`, `(4k*2)`. With kb_base=1024 (fio's
/// default) `k`, `m`… are binary and `ki`, `mi`… decimal, the other way round with kb_base=1000.
pub fn size(text: &str, kb_base: u64) -> Result<u64, String> {
    let t = text.trim();
    if t.ends_with('%') {
        return Err(format!("'{text}' is a percentage of the target, which iolab cannot size before it opens it"));
    }
    let v = if t.starts_with('(') { eval(t, Units::Bytes(kb_base))? } else { number(t, Units::Bytes(kb_base))? };
    if !(0.0..1.8e19).contains(&v) {
        return Err(format!("'{text}' is not a size in bytes"));
    }
    Ok(v as u64)
}

/// A time in seconds: `900`, `5m`, `500ms`, `10us`, `1h`, `2d`; in parentheses a bare number is
/// microseconds, as fio reads it.
pub fn seconds(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let v = if t.starts_with('(') { eval(t, Units::Time(1e-6))? } else { number(t, Units::Time(1.0))? };
    if !v.is_finite() || v < 0.0 {
        return Err(format!("'{text}' is not a duration"));
    }
    Ok(v)
}

/// A whole number (counts, percentages, CPUs), arithmetic in parentheses allowed.
pub fn int(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let v = if t.starts_with('(') { eval(t, Units::Plain)? } else { number(t, Units::Bytes(1024))? };
    if v.fract() != 0.0 || !v.is_finite() {
        return Err(format!("'{text}' is not a whole number"));
    }
    Ok(v as i64)
}

/// A boolean as fio reads one: a bare flag or 1 is true, 0 false (also true/false, yes/no, on/off).
pub(crate) fn boolean(value: Option<&str>) -> Result<bool, String> {
    match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
        None | Some("") | Some("1") | Some("true") | Some("yes") | Some("on") => Ok(true),
        Some("0") | Some("false") | Some("no") | Some("off") => Ok(false),
        Some(other) => match int(other) {
            Ok(n) => Ok(n != 0),
            Err(_) => Err(format!("'{other}' is not a boolean: use 1 or 0")),
        },
    }
}

/// One number with an optional unit suffix.
fn number(text: &str, units: Units) -> Result<f64, String> {
    let t = text.trim();
    let (num, suffix): (f64, &str) = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        let end = hex.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(hex.len());
        (u64::from_str_radix(&hex[..end], 16).map_err(|_| format!("'{text}' is not a number"))? as f64, &hex[end..])
    } else {
        let end = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        (t[..end].parse::<f64>().map_err(|_| format!("'{text}' is not a number"))?, &t[end..])
    };
    Ok(num * multiplier(suffix.trim(), units).ok_or_else(|| format!("'{text}' has a suffix '{suffix}' fio does not read here"))?)
}

/// What a suffix multiplies by, or None when fio would not take it.
fn multiplier(suffix: &str, units: Units) -> Option<f64> {
    let s = suffix.to_ascii_lowercase();
    match units {
        Units::Plain => s.is_empty().then_some(1.0),
        Units::Time(bare) => Some(match s.as_str() {
            "" => bare,
            "d" => 86_400.0,
            "h" => 3600.0,
            "m" => 60.0,
            "s" | "sec" => 1.0,
            "ms" | "msec" => 1e-3,
            "us" | "usec" => 1e-6,
            _ => return None,
        }),
        Units::Bytes(kb_base) => {
            let s = s.strip_suffix('b').unwrap_or(&s);
            if s.is_empty() {
                return Some(1.0);
            }
            let (prefix, i) = match s.strip_suffix('i') {
                Some(p) => (p, true),
                None => (s, false),
            };
            let power = "kmgtp".find(prefix).filter(|_| prefix.len() == 1)? as i32 + 1;
            // kb_base=1024: k binary, ki decimal (fio's compatibility); kb_base=1000: as SI.
            let binary = (kb_base == 1000) == i;
            Some(if binary { 1024f64.powi(power) } else { 1000f64.powi(power) })
        }
    }
}

/// fio's arithmetic: + - * / % ^ and parentheses over numbers with unit suffixes.
pub fn eval(text: &str, units: Units) -> Result<f64, String> {
    let mut p = Expr { s: text.as_bytes(), i: 0, units, text };
    let v = p.sum()?;
    p.blank();
    if p.i != p.s.len() {
        return Err(format!("'{text}': cannot read the expression from '{}'", &text[p.i..]));
    }
    Ok(v)
}

struct Expr<'a> {
    s: &'a [u8],
    i: usize,
    units: Units,
    text: &'a str,
}

impl Expr<'_> {
    fn blank(&mut self) {
        while self.s.get(self.i).is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.blank();
        self.s.get(self.i).copied()
    }
    fn sum(&mut self) -> Result<f64, String> {
        let mut v = self.product()?;
        while let Some(op @ (b'+' | b'-')) = self.peek() {
            self.i += 1;
            let r = self.product()?;
            v = if op == b'+' { v + r } else { v - r };
        }
        Ok(v)
    }
    fn product(&mut self) -> Result<f64, String> {
        let mut v = self.power()?;
        while let Some(op @ (b'*' | b'/' | b'%')) = self.peek() {
            self.i += 1;
            let r = self.power()?;
            v = match op {
                b'*' => v * r,
                _ if r == 0.0 => return Err(format!("'{}' divides by zero", self.text)),
                b'/' => v / r,
                _ => v % r,
            };
        }
        Ok(v)
    }
    fn power(&mut self) -> Result<f64, String> {
        let base = self.unary()?;
        if self.peek() == Some(b'^') {
            self.i += 1;
            return Ok(base.powf(self.power()?));
        }
        Ok(base)
    }
    fn unary(&mut self) -> Result<f64, String> {
        match self.peek() {
            Some(b'-') => {
                self.i += 1;
                Ok(-self.unary()?)
            }
            Some(b'(') => {
                self.i += 1;
                let v = self.sum()?;
                if self.peek() != Some(b')') {
                    return Err(format!("'{}' has a '(' without its ')'", self.text));
                }
                self.i += 1;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => {
                let start = self.i;
                while self.s.get(self.i).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'.') {
                    self.i += 1;
                }
                number(std::str::from_utf8(&self.s[start..self.i]).unwrap_or(""), self.units)
            }
            _ => Err(format!("'{}' is not an expression fio reads", self.text)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn sections_in_order_with_globals_and_comments() {
        let text = "; a comment\n# another\n[global]\nbs=4k ; trailing\nrw=read\n[a]\niodepth=2\t# tab comment\n[global2]\nbs=8k\n[b]\ntime_based\n";
        let s = parse_text(text, Path::new("x.fio"), &no_env).unwrap();
        let names: Vec<(&str, bool)> = s.iter().map(|s| (s.name.as_str(), s.global)).collect();
        assert_eq!(names, [("global", true), ("a", false), ("global2", true), ("b", false)]);
        assert_eq!(s[0].options[0].shown(), "bs=4k");
        assert_eq!(s[1].options[0].shown(), "iodepth=2");
        assert_eq!(s[3].options[0].value, None);
        assert_eq!(s[1].options[0].at, "x.fio line 7");
        let e = parse_text("bs=4k\n[a]\n", Path::new("x.fio"), &no_env).unwrap_err();
        assert!(e.contains("outside of a [section]"), "{e}");
        assert!(parse_text("[a\n", Path::new("x.fio"), &no_env).unwrap_err().contains("no closing"));
    }

    #[test]
    fn include_reads_options_relative_to_the_job_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("common.inc"), "bs=16k\n; comment\nrw=randread\n").unwrap();
        std::fs::write(dir.path().join("bad.inc"), "[x]\n").unwrap();
        std::fs::write(dir.path().join("self.inc"), "include self.inc\n").unwrap();
        let job = dir.path().join("j.fio");
        let s = parse_text("[a]\ninclude common.inc\niodepth=4\n", &job, &no_env).unwrap();
        let shown: Vec<String> = s[0].options.iter().map(Opt::shown).collect();
        assert_eq!(shown, ["bs=16k", "rw=randread", "iodepth=4"]);
        assert!(parse_text("[a]\ninclude bad.inc\n", &job, &no_env).unwrap_err().contains("options only"));
        assert!(parse_text("[a]\ninclude self.inc\n", &job, &no_env).unwrap_err().contains("nest more than"));
        assert!(parse_text("[a]\ninclude nothere.inc\n", &job, &no_env).unwrap_err().contains("cannot read included file"));
    }

    #[test]
    fn variables_from_the_environment() {
        let env = |k: &str| (k == "BS").then(|| "64k".to_string());
        let s = parse_text("[a]\nbs=${BS}\nrw=${UNSET}\nname=x${BS}y\n", Path::new("x.fio"), &env).unwrap();
        let shown: Vec<String> = s[0].options.iter().map(Opt::shown).collect();
        assert_eq!(shown, ["bs=64k", "rw=", "name=x64ky"]);
        let s = parse_text("[a]\nnumjobs=$ncpus\nsize=2*$pagesize\n", Path::new("x.fio"), &no_env).unwrap();
        assert_eq!(s[0].options[0].value.as_deref(), Some(crate::host::online_cpus().to_string().as_str()));
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
        assert_eq!(s[0].options[1].value.as_deref(), Some((2 * page).to_string().as_str()));
    }

    #[test]
    fn arithmetic_as_fio_reads_it() {
        assert_eq!(size("(4k*2)", 1024).unwrap(), 8192);
        assert_eq!(size("(1m+512)", 1024).unwrap(), (1 << 20) + 512);
        assert_eq!(size("((2+3)*2^10)", 1024).unwrap(), 5120);
        assert_eq!(int("(10%4)").unwrap(), 2);
        assert_eq!(int("(-2+5)").unwrap(), 3);
        assert_eq!(seconds("(1000000)").unwrap(), 1.0, "a bare number in an expression is microseconds");
        assert_eq!(seconds("(2s+500ms)").unwrap(), 2.5);
        assert!(size("(4k*", 1024).is_err());
        assert!(size("(1/0)", 1024).unwrap_err().contains("divides by zero"));
    }

    #[test]
    fn suffixes_as_fio_reads_them() {
        assert_eq!(size("4k", 1024).unwrap(), 4096);
        assert_eq!(size("4K", 1024).unwrap(), 4096);
        assert_eq!(size("4KB", 1024).unwrap(), 4096);
        assert_eq!(size("4kib", 1024).unwrap(), 4000, "kb_base=1024: ki is decimal (fio's compatibility)");
        assert_eq!(size("1m", 1000).unwrap(), 1_000_000);
        assert_eq!(size("1mi", 1000).unwrap(), 1 << 20);
        assert_eq!(size("10G", 1024).unwrap(), 10 << 30);
        assert_eq!(size("0x1000", 1024).unwrap(), 4096);
        assert_eq!(size("512", 1024).unwrap(), 512);
        assert!(size("50%", 1024).unwrap_err().contains("percentage"));
        assert!(size("4q", 1024).is_err());
        assert_eq!(seconds("900").unwrap(), 900.0);
        assert_eq!(seconds("5m").unwrap(), 300.0);
        assert_eq!(seconds("1h").unwrap(), 3600.0);
        assert_eq!(seconds("2d").unwrap(), 172_800.0);
        assert_eq!(seconds("500ms").unwrap(), 0.5);
        assert_eq!(seconds("250msec").unwrap(), 0.25);
        assert!((seconds("10us").unwrap() - 1e-5).abs() < 1e-15);
        assert!(seconds("3 fortnights").is_err());
        assert!(boolean(None).unwrap());
        assert!(!boolean(Some("0")).unwrap());
        assert!(boolean(Some("maybe")).is_err());
    }
}
