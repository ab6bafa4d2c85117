//! A workload's mixes beyond one block size at uniform offsets: skewed random offsets (fio's
//! `random_distribution`) and several block sizes in one run (fio's `bssplit` and `bsrange`).
//! Each is written as fio writes it, on the command line, in a plan and in the stored spec;
//! the engine's generators are in `engine::workload`.
use super::size::parse_size;
use super::PlanError;
use serde::{Deserialize, Serialize};

/// How random offsets spread over the range (`--distribution`, fio's `random_distribution`).
/// Zipf, pareto and normal take fio's optional center (0 to 1) after a second ':'.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Distribution {
    /// Uniform: every block equally likely.
    #[default]
    Random,
    /// Zipf with exponent `theta` (not 1): a few blocks take most accesses.
    Zipf { theta: f64, center: Option<f64> },
    /// Pareto with power `h` (0 < h < 1): h = 0.2 gives fio's 80/20.
    Pareto { h: f64, center: Option<f64> },
    /// fio's normal: a bell over the blocks, `dev` percent of them wide.
    Normal { dev: f64, center: Option<f64> },
    /// (percent of accesses, percent of the range), zone after zone from the range's start.
    Zoned(Vec<(u32, u32)>),
    /// (percent of accesses, bytes), zone after zone from the range's start.
    ZonedAbs(Vec<(u32, u64)>),
}

impl Distribution {
    pub(crate) fn is_random(&self) -> bool {
        *self == Distribution::Random
    }
}

fn number(what: &str, text: &str) -> Result<f64, String> {
    text.trim().parse::<f64>().ok().filter(|v| v.is_finite()).ok_or_else(|| format!("{what} '{text}' is not a number"))
}

/// `text`'s "value[:center]" for zipf, pareto and normal (fio's defaults when left out).
fn value_center(name: &str, rest: Option<&str>, default: f64) -> Result<(f64, Option<f64>), String> {
    let Some(rest) = rest else { return Ok((default, None)) };
    let (v, c) = match rest.split_once(':') {
        Some((v, c)) => (v, Some(c)),
        None => (rest, None),
    };
    let v = number(name, v)?;
    let c = c.map(|c| number("center", c)).transpose()?;
    if let Some(c) = c.filter(|c| !(0.0..=1.0).contains(c)) {
        return Err(format!("{name}'s center {c} is out of range: give 0 to 1"));
    }
    Ok((v, c))
}

fn percent(text: &str, what: &str) -> Result<u32, String> {
    text.trim().parse::<u32>().ok().filter(|p| *p <= 100).ok_or_else(|| format!("{what} '{text}' is not a whole percentage (0 to 100)"))
}

impl std::str::FromStr for Distribution {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Distribution, PlanError> {
        parse_distribution(s.trim()).map_err(|e| {
            PlanError::Value(format!(
                "distribution '{s}': {e} (random, zipf:THETA, pareto:H, normal:DEV%, zoned:ACCESS%/RANGE%:..., zoned_abs:ACCESS%/SIZE:...)"
            ))
        })
    }
}

fn parse_distribution(s: &str) -> Result<Distribution, String> {
    let (name, rest) = match s.split_once(':') {
        Some((n, r)) => (n.trim().to_ascii_lowercase(), Some(r)),
        None => (s.to_ascii_lowercase(), None),
    };
    if rest.is_some_and(|r| r.contains(',')) {
        return Err("iolab has one distribution for reads and writes: give one, without ','".into());
    }
    match name.as_str() {
        "random" if rest.is_none() => Ok(Distribution::Random),
        "zipf" => {
            let (theta, center) = value_center("zipf theta", rest, 1.1)?;
            if theta <= 0.0 || theta == 1.0 {
                return Err(format!("zipf theta {theta} is out of range: give a positive number other than 1 (e.g. 1.2)"));
            }
            Ok(Distribution::Zipf { theta, center })
        }
        "pareto" => {
            let (h, center) = value_center("pareto h", rest, 0.2)?;
            if h <= 0.0 || h >= 1.0 {
                return Err(format!("pareto h {h} is out of range: give more than 0 and less than 1 (e.g. 0.2)"));
            }
            Ok(Distribution::Pareto { h, center })
        }
        "normal" | "gauss" => {
            let (dev, center) = value_center("normal deviation", rest, 0.0)?;
            if !(0.0..100.0).contains(&dev) {
                return Err(format!("normal deviation {dev} is out of range: give 0 to less than 100 (percent)"));
            }
            Ok(Distribution::Normal { dev, center })
        }
        "zoned" | "zoned_abs" => {
            let abs = name == "zoned_abs";
            let rest = rest.filter(|r| !r.trim().is_empty()).ok_or("zoned needs its zones, ACCESS%/RANGE (e.g. zoned:60/10:40/90)")?;
            let mut zones: Vec<(u32, Option<u64>)> = Vec::new();
            for part in rest.split(':') {
                let (a, r) = part.split_once('/').ok_or_else(|| format!("zone '{part}' is not ACCESS%/RANGE"))?;
                let a = percent(a, "a zone's access")?;
                // fio's zoned: a zone without its range percentage shares what the others leave.
                let r = match r.trim() {
                    "" if !abs => None,
                    r if abs => Some(parse_size(r).map_err(|e| e.to_string())?),
                    r => Some(percent(r, "a zone's range")? as u64),
                };
                if r == Some(0) {
                    return Err(format!("zone '{part}' covers nothing"));
                }
                zones.push((a, r));
            }
            let given: u64 = zones.iter().filter_map(|z| z.1).sum();
            let missing = zones.iter().filter(|z| z.1.is_none()).count() as u64;
            if missing > 0 && given >= 100 {
                return Err("the zones' range percentages leave nothing for a zone without one".into());
            }
            let zones: Vec<(u32, u64)> = zones.iter().map(|(a, r)| (*a, r.unwrap_or_else(|| (100 - given) / missing.max(1)))).collect();
            if zones.iter().map(|z| z.0).sum::<u32>() != 100 {
                return Err("the zones' access percentages must add up to 100".into());
            }
            if abs {
                Ok(Distribution::ZonedAbs(zones))
            } else {
                if zones.iter().map(|z| z.1).sum::<u64>() != 100 {
                    return Err("the zones' range percentages must add up to 100".into());
                }
                Ok(Distribution::Zoned(zones.into_iter().map(|(a, r)| (a, r as u32)).collect()))
            }
        }
        _ => Err(format!("'{name}' is no distribution iolab knows")),
    }
}

impl std::fmt::Display for Distribution {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let with_center = |f: &mut std::fmt::Formatter, name: &str, v: f64, c: &Option<f64>| match c {
            Some(c) => write!(f, "{name}:{v}:{c}"),
            None => write!(f, "{name}:{v}"),
        };
        match self {
            Distribution::Random => f.write_str("random"),
            Distribution::Zipf { theta, center } => with_center(f, "zipf", *theta, center),
            Distribution::Pareto { h, center } => with_center(f, "pareto", *h, center),
            Distribution::Normal { dev, center } => with_center(f, "normal", *dev, center),
            Distribution::Zoned(z) => {
                let parts: Vec<String> = z.iter().map(|(a, r)| format!("{a}/{r}")).collect();
                write!(f, "zoned:{}", parts.join(":"))
            }
            Distribution::ZonedAbs(z) => {
                let parts: Vec<String> = z.iter().map(|(a, r)| format!("{a}/{r}")).collect();
                write!(f, "zoned_abs:{}", parts.join(":"))
            }
        }
    }
}

impl Serialize for Distribution {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Distribution {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Distribution, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// The block sizes of a run (`--bssplit`, `--bsrange`; fio's `bssplit` and `bsrange`): the
/// job's one `bs`, shares of several sizes, or a range. With a mix, the job's `bs` is its
/// largest size (the slot buffers' size).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum BsMix {
    #[default]
    One,
    /// (size, percent of I/Os), the percentages adding up to 100, as given.
    Split(Vec<(u64, u32)>),
    /// Sizes from `min` to `max` in steps of `min`, drawn as fio draws them.
    Range(u64, u64),
}

impl BsMix {
    pub(crate) fn is_one(&self) -> bool {
        *self == BsMix::One
    }

    /// The smallest and largest size of a mix; None for one size.
    pub(crate) fn bounds(&self) -> Option<(u64, u64)> {
        match self {
            BsMix::One => None,
            BsMix::Split(s) => Some((s.iter().map(|p| p.0).min()?, s.iter().map(|p| p.0).max()?)),
            BsMix::Range(lo, hi) => Some((*lo, *hi)),
        }
    }

    /// Mean bytes per I/O (what a byte budget is divided by); None for one size.
    pub(crate) fn mean(&self) -> Option<f64> {
        match self {
            BsMix::One => None,
            BsMix::Split(s) => Some(s.iter().map(|(b, p)| *b as f64 * *p as f64 / 100.0).sum()),
            BsMix::Range(lo, hi) => {
                // fio's draw: lo + floor(u * hi) rounded down to a multiple of lo, capped at hi.
                let steps = (lo + hi) / lo; // multiples of lo below lo + hi, from 1
                let mut sum = 0.0;
                for k in 1..=steps {
                    let size = (k * lo).min(*hi);
                    let width = ((k + 1) * lo).min(lo + hi) - k * lo;
                    sum += size as f64 * width as f64;
                }
                Some(sum / *hi as f64)
            }
        }
    }
}

impl std::str::FromStr for BsMix {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<BsMix, PlanError> {
        parse_mix(s.trim()).map_err(|e| PlanError::Value(format!("block size mix '{s}': {e}")))
    }
}

fn parse_mix(s: &str) -> Result<BsMix, String> {
    if s.is_empty() {
        return Ok(BsMix::One);
    }
    if s.contains(',') {
        return Err("iolab has one mix for reads and writes: give one, without ','".into());
    }
    let size = |t: &str| parse_size(t.trim()).map_err(|e| e.to_string());
    if !s.contains('/') {
        let (lo, hi) = s.split_once('-').ok_or("give sizes with their shares (4k/60:64k/40) or a range (4k-64k)")?;
        let (lo, hi) = (size(lo)?, size(hi)?);
        if lo == 0 || lo > hi {
            return Err(format!("the range's smallest size {lo} must be above 0 and at most its largest {hi}"));
        }
        return Ok(BsMix::Range(lo, hi));
    }
    // fio's rules: a size without a share splits what the others leave equally, what is still
    // left goes to the last size, and sizes with share 0 are never issued.
    let mut parts: Vec<(u64, Option<u32>)> = Vec::new();
    for part in s.split(':') {
        let (b, p) = part.split_once('/').unwrap_or((part, ""));
        let p = if p.trim().is_empty() { None } else { Some(percent(p, "a share")?) };
        parts.push((size(b)?, p));
    }
    let given: u32 = parts.iter().filter_map(|p| p.1).sum();
    if given > 100 {
        return Err(format!("the shares add up to {given}, more than 100"));
    }
    let missing = parts.iter().filter(|p| p.1.is_none()).count() as u32;
    let mut split: Vec<(u64, u32)> = parts.iter().map(|(b, p)| (*b, p.unwrap_or_else(|| (100 - given) / missing.max(1)))).collect();
    let sum: u32 = split.iter().map(|p| p.1).sum();
    if let Some(last) = split.last_mut() {
        last.1 += 100 - sum;
    }
    split.retain(|p| p.1 > 0);
    if split.iter().any(|p| p.0 == 0) {
        return Err("a size of 0 bytes".into());
    }
    Ok(BsMix::Split(split))
}

impl std::fmt::Display for BsMix {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let size = |b: u64| match b {
            b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}m", b >> 20),
            b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}k", b >> 10),
            b => b.to_string(),
        };
        match self {
            BsMix::One => Ok(()),
            BsMix::Split(s) => {
                let parts: Vec<String> = s.iter().map(|(b, p)| format!("{}/{p}", size(*b))).collect();
                f.write_str(&parts.join(":"))
            }
            BsMix::Range(lo, hi) => write!(f, "{}-{}", size(*lo), size(*hi)),
        }
    }
}

impl Serialize for BsMix {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BsMix {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<BsMix, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// Where a workload's offsets go beyond its pattern and distribution, each as fio asks for it:
/// the offset modifier of `rw=read:8k` and `rw=randread:8`, `blockalign`, `zonemode=strided` and
/// `random_generator=lfsr`. Every field is left out of the spec when unset, so the specs (and
/// stored plans) of runs before it read the same; the default takes the plain stream.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pattern {
    /// Sequential: bytes added to the offset after each I/O, beyond its length (fio's
    /// `rw=write:112k`); negative goes backwards (`rw=read:-8k`). 0: straight through.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub stride: i64,
    /// Random: I/Os per new random offset, the ones between following on sequentially (fio's
    /// `rw=randread:8` with its default `rw_sequencer=sequential`). 0 or 1: each its own.
    #[serde(default, skip_serializing_if = "at_most_one")]
    pub ios_per_offset: u32,
    /// Random offsets' alignment in bytes (fio's `blockalign`); 0: the smallest block size.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub blockalign: u64,
    /// fio's `zonemode=strided`: `zonesize` bytes within each `zonerange`, then skip `zoneskip`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zones: Option<Zones>,
    /// How random offsets are drawn: iolab's seeded generator, or each block once per pass.
    #[serde(default, skip_serializing_if = "Generator::is_default")]
    pub random_generator: Generator,
    /// Rates and think time (`plan::pace`); None: as fast as the queue allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<super::pace::Pace>,
}

fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}
fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}
fn at_most_one(v: &u32) -> bool {
    *v <= 1
}

impl Pattern {
    /// Nothing asked beyond the pattern: the plain stream.
    pub(crate) fn is_plain(&self) -> bool {
        self.ios_per_offset <= 1 && Pattern { ios_per_offset: 0, pace: None, ..self.clone() } == Pattern::default()
    }

    /// What is wrong with it for a job of pattern `rw` (random or not), block sizes `min`..`max`,
    /// a skewed distribution or a mix, and `targets` targets: one line naming the flag.
    pub(crate) fn check(&self, random: bool, min: u64, max: u64, mixed: bool, skewed: bool, targets: usize) -> Result<(), String> {
        if self.stride != 0 {
            if random {
                return Err(format!("--stride {} moves sequential offsets; random jobs take --ios-per-offset", self.stride));
            }
            if self.stride % 512 != 0 {
                return Err(format!("--stride {}: give a multiple of 512 bytes", self.stride));
            }
        }
        if self.ios_per_offset > 1 && !random {
            return Err(format!("--ios-per-offset {} is for random jobs; sequential ones take --stride", self.ios_per_offset));
        }
        if self.blockalign != 0 {
            if !random {
                return Err(format!("--blockalign {} aligns random offsets, and the job is sequential: drop it", self.blockalign));
            }
            if !self.blockalign.is_multiple_of(512) || self.blockalign > max {
                return Err(format!("--blockalign {}: give a multiple of 512 bytes, at most the block size {max}", self.blockalign));
            }
        }
        if let Some(z) = &self.zones {
            if z.size < max || z.range < max {
                return Err(format!("--zones {z}: a zone's size and range must hold one {max}-byte I/O"));
            }
            if !z.size.is_multiple_of(min) || !z.range.is_multiple_of(min) || !z.skip.is_multiple_of(min) {
                return Err(format!("--zones {z}: give multiples of the block size {min}"));
            }
            if skewed || self.stride != 0 || self.ios_per_offset > 1 || self.random_generator != Generator::Random {
                return Err(format!("--zones {z} draws uniform offsets or goes straight through within each zone: drop --distribution, --stride, --ios-per-offset and --random-generator"));
            }
            if targets > 1 {
                return Err(format!("--zones {z} works on one target (fio's strided zones use one file)"));
            }
        }
        if let Some(p) = &self.pace {
            p.check().map_err(|e| format!("--pace '{p}': {e}"))?;
        }
        if self.random_generator == Generator::Lfsr {
            if !random {
                return Err("--random-generator lfsr draws random offsets, and the job is sequential: drop it".into());
            }
            if mixed || skewed {
                return Err(
                    "--random-generator lfsr visits blocks of one size uniformly: drop --bssplit/--bsrange and --distribution".into()
                );
            }
        }
        Ok(())
    }
}

/// fio's strided zones: `size` bytes of I/O within each zone of `range` bytes, then the next
/// zone, `skip` bytes after it; past the end, the first again. Written `SIZE/RANGE/SKIP`
/// (RANGE defaults to SIZE, SKIP to 0, as fio's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Zones {
    pub size: u64,
    pub range: u64,
    pub skip: u64,
}

impl std::str::FromStr for Zones {
    type Err = PlanError;
    fn from_str(s: &str) -> Result<Zones, PlanError> {
        let bad = |why: String| PlanError::Value(format!("zones '{s}': {why}: give SIZE[/RANGE[/SKIP]] (e.g. 256m/256m/2g)"));
        let parts: Vec<&str> = s.trim().split('/').collect();
        if parts.len() > 3 {
            return Err(bad("more than three sizes".into()));
        }
        let size = |t: &str| parse_size(t.trim()).map_err(|e| bad(e.to_string()));
        let z = Zones {
            size: size(parts[0])?,
            range: parts.get(1).map(|p| size(p)).transpose()?.unwrap_or(0),
            skip: parts.get(2).map(|p| size(p)).transpose()?.unwrap_or(0),
        };
        if z.size == 0 {
            return Err(bad("a zone size of 0".into()));
        }
        Ok(Zones { range: if z.range == 0 { z.size } else { z.range }, ..z })
    }
}

impl std::fmt::Display for Zones {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}/{}/{}", short(self.size), short(self.range), short(self.skip))
    }
}

impl Serialize for Zones {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Zones {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Zones, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// A size as fio writes it, in its largest whole unit.
fn short(b: u64) -> String {
    match b {
        b if b >= 1 << 30 && b % (1 << 30) == 0 => format!("{}g", b >> 30),
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}m", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}k", b >> 10),
        b => b.to_string(),
    }
}

/// How random offsets are drawn (`--random-generator`, fio's `random_generator`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Generator {
    /// iolab's seeded generator: uniform, with repeats (fio's tausworthe with norandommap).
    #[default]
    Random,
    /// Each block once per pass, in a seeded order (fio's lfsr promise; not its sequence).
    Lfsr,
}

impl Generator {
    pub(crate) fn is_default(&self) -> bool {
        *self == Generator::Random
    }
    pub fn name(self) -> &'static str {
        match self {
            Generator::Random => "random",
            Generator::Lfsr => "lfsr",
        }
    }
}

/// A signed size ("-8k", "112k"): fio's offset modifier.
pub(crate) fn parse_signed_size(s: &str) -> Result<i64, PlanError> {
    let t = s.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let n = parse_size(body)?;
    let n = i64::try_from(n).map_err(|_| PlanError::Value(format!("'{s}' is too large")))?;
    Ok(if neg { -n } else { n })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_read_and_write_as_fio_writes_them() {
        for (text, want) in [
            ("random", Distribution::Random),
            ("zipf:1.2", Distribution::Zipf { theta: 1.2, center: None }),
            ("zipf", Distribution::Zipf { theta: 1.1, center: None }),
            ("pareto:0.2:0.5", Distribution::Pareto { h: 0.2, center: Some(0.5) }),
            ("normal:10", Distribution::Normal { dev: 10.0, center: None }),
            ("zoned:60/10:30/20:8/30:2/40", Distribution::Zoned(vec![(60, 10), (30, 20), (8, 30), (2, 40)])),
            ("zoned_abs:60/20m:40/100m", Distribution::ZonedAbs(vec![(60, 20 << 20), (40, 100 << 20)])),
            ("zoned:50/5:30/15:20/", Distribution::Zoned(vec![(50, 5), (30, 15), (20, 80)])),
        ] {
            let d: Distribution = text.parse().unwrap();
            assert_eq!(d, want, "{text}");
            assert_eq!(d.to_string().parse::<Distribution>().unwrap(), want, "{text} round trip");
        }
        for bad in ["zipf:1", "zipf:x", "pareto:1.5", "normal:100", "zoned:60/10:30/20", "zoned:50/50:50/40", "uniform", "zipf:1.2,1.1"] {
            let e = bad.parse::<Distribution>().unwrap_err().to_string();
            assert!(e.starts_with(&format!("distribution '{bad}'")) && !e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn mixes_read_as_fio_splits_them() {
        let m: BsMix = "4k/60:64k/40".parse().unwrap();
        assert_eq!(m, BsMix::Split(vec![(4096, 60), (65536, 40)]));
        assert_eq!(m.to_string(), "4k/60:64k/40");
        assert_eq!(m.bounds(), Some((4096, 65536)));
        assert_eq!("4k/:8k/:16k/".parse::<BsMix>().unwrap(), BsMix::Split(vec![(4096, 33), (8192, 33), (16384, 34)]));
        assert_eq!("4k/50:8k/".parse::<BsMix>().unwrap(), BsMix::Split(vec![(4096, 50), (8192, 50)]));
        assert_eq!("4k/10:8k/0:16k/10".parse::<BsMix>().unwrap(), BsMix::Split(vec![(4096, 10), (16384, 90)]), "what is left goes last");
        assert_eq!("4k-64k".parse::<BsMix>().unwrap(), BsMix::Range(4096, 65536));
        assert_eq!("4k-64k".parse::<BsMix>().unwrap().to_string(), "4k-64k");
        for bad in ["4k/60:64k/60", "4k", "4k/60,8k/40", "64k-4k", "4k/x"] {
            assert!(bad.parse::<BsMix>().is_err(), "{bad}");
        }
        let mean = BsMix::Range(4096, 8192).mean().unwrap();
        assert!((mean - 6144.0).abs() < 1.0, "{mean}");
    }
}
