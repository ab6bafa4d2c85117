//! The studies iolab exists to run: the five papers (HotStorage'23, CHEOPS'23, HotStorage'22,
//! IISWC'19, FPL'18) and IISWC'26's energy study (S6), one file each. A study is a list of parts; a part is one sweep: its plan at the
//! papers' scale and at a `--quick` scale that finishes in minutes, and the report panels that
//! turn its stored runs into the paper's tables and figures. What iolab or the machine cannot run
//! is listed with the reason, never left out silently. `STUDIES` is the one table `iolab suite`
//! and `iolab report` read; report/ renders and knows no study.
// A panel or plan written in a study file but not given to a part is an error, not a warning.
#![deny(dead_code)]
pub mod run;
pub mod s1;
pub mod s2;
pub mod s3;
pub mod s4;
pub mod s5;
pub mod s6;
pub(crate) mod served;
pub mod ui;

use crate::analysis::saturation::{saturation_point, CurvePoint, Saturation, SaturationRule};
use crate::plan::matrix::{dimension, target_set, DIMENSIONS, TARGET_SET};
use crate::plan::PlanError;
use crate::report::data::{Config, SweepRuns};
use crate::report::panels::{iops, lat_mean_us};
use crate::report::sections::{self, Ctx, Section};

pub struct Study {
    pub id: &'static str,
    pub title: &'static str,
    /// The machine set-up the paper ran with ("name=value" settings), given to every run of its
    /// parts: applied where this machine offers it, recorded where it does not.
    pub setup: &'static [&'static str],
    /// Sequential fills of each target before the parts (full scale, `--quick`), as the paper
    /// preconditioned; done only on a device the user allows to be written (`--destructive`).
    pub fills: Option<(u32, u32)>,
    pub parts: &'static [Part],
}

/// Scheduler none and the performance governor, as S1, S3 and S4 ran.
const NO_SCHEDULER_FULL_SPEED: &[&str] = &["scheduler=none", "governor=performance"];

pub struct Part {
    /// The sweep's name, stored in users' databases: the report finds the part by it, so it
    /// never changes.
    pub name: &'static str,
    /// Which of the paper's tables and figures this part feeds.
    pub feeds: &'static str,
    /// Parts of the study iolab cannot run, with the reason.
    pub unsupported: &'static [(&'static str, &'static str)],
    /// What runs and how it is reported; None when the part exists only to say what cannot run.
    pub runs: Option<Runs>,
}

/// A part's sweep and its report, together so that neither exists without the other.
pub struct Runs {
    /// The plan's matrix and rules (TOML tables), shared by both scales.
    pub matrix: fn(quick: bool) -> String,
    /// Paper scale: (replicates, ramp, each run's budget); quick: the same, small.
    pub full: (u32, &'static str, Budget),
    pub quick: (u32, &'static str, Budget),
    pub report: Report,
    /// `layers`, `stages` or `layers,stages`: every run of the part profiled (the plan's
    /// `profile`), for the figures that explain where the time goes. Such a part is a sweep of
    /// its own, so its profiled runs never stand in a figure that compares configurations.
    pub profile: Option<&'static str>,
    /// How its runs use the devices the suite is given.
    pub devices: Devices,
}

/// How a part's runs use the devices a suite run is given (each command-line target is a device,
/// or a set joined by '+'). With one device every way is the same: that device in every run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Devices {
    /// All of them in every run, one set: the machine's storage as one (CHEOPS'23's 7 devices).
    Together,
    /// Each on its own, the `target` dimension's values: every figure draws a line per device
    /// (IISWC'19 overlays its two SSDs in Figs 4-11).
    Each,
    /// The first alone, and all of them together: 1 against N devices (CHEOPS'23 Fig 5).
    OneAndAll,
    /// The first only: the paper measured one device.
    First,
}

impl Devices {
    pub fn said(self) -> &'static str {
        match self {
            Devices::Together => "all devices together in every run",
            Devices::Each => "each device on its own, a line per device",
            Devices::OneAndAll => "the first device alone and all devices together",
            Devices::First => "the first device only",
        }
    }
}

/// What a suite run gives each of its parts' plans.
#[derive(Clone, Copy, Default)]
pub struct Given<'a> {
    /// The command line's targets: each a device or a set joined by '+' (none: a temporary file).
    pub targets: &'a [String],
    /// Bytes of each target to use (and the temporary target's size).
    pub size: Option<&'a str>,
    /// Devices named as safe to overwrite.
    pub destructive: &'a [String],
}

/// What ends each run of a part: a time after the ramp, as most papers ran, or a fixed number of
/// bytes, as FPL'18 did (1 MB per iteration).
#[derive(Clone, Copy, Debug)]
pub enum Budget {
    Runtime(&'static str),
    Bytes(&'static str),
}

pub enum Report {
    /// The part's own tables and figures; the section then ends with the configurations table.
    Panels(fn(&mut Ctx)),
    /// The configurations table alone is the part's result, for the reason given.
    ConfigurationsOnly(&'static str),
}

pub const STUDIES: &[Study] = &[s1::STUDY, s2::STUDY, s3::STUDY, s4::STUDY, s5::STUDY, s6::STUDY];

/// A study by its id (S1 to S6, any case).
pub fn find(id: &str) -> Option<&'static Study> {
    STUDIES.iter().find(|s| s.id.eq_ignore_ascii_case(id))
}

/// The part a stored sweep name belongs to.
pub fn part(sweep_name: &str) -> Option<&'static Part> {
    STUDIES.iter().flat_map(|s| s.parts.iter()).find(|p| p.name == sweep_name)
}

/// The report's sections for the selected sweeps: a sweep named after a part gets its panels,
/// and every other part of a study the selection touches gets a section saying why it has no
/// runs here (one that iolab cannot run, or one not run into this database).
pub fn sections(sweeps: &[SweepRuns]) -> Vec<Section> {
    let of = |p: &Part| sections::Part { feeds: p.feeds, unsupported: p.unsupported, panels: p.runs.as_ref().and_then(Runs::panels) };
    let mut out = sections::sections(sweeps, |name| part(name).map(of));
    let present = |p: &Part| sweeps.iter().any(|s| s.name == p.name);
    for study in STUDIES.iter().filter(|s| s.parts.iter().any(present)) {
        for p in study.parts.iter().filter(|p| !present(p)) {
            let why = match p.runs {
                None => "iolab cannot run this part (the reasons above).".to_string(),
                Some(_) => format!(
                    "its sweep is not in the selected runs (not run into this database, or filtered out): `iolab suite run {} --part {}` makes it.",
                    study.id, p.name
                ),
            };
            out.push(sections::absent(p.name, of(p), &why));
        }
    }
    // Study parts in their study's order, in the places the parts' sections hold (other sweeps stay put).
    let rank = |sec: &Section| STUDIES.iter().flat_map(|s| s.parts.iter()).position(|p| sec.title.starts_with(&format!("{} (", p.name)));
    let places: Vec<usize> = (0..out.len()).filter(|&i| rank(&out[i]).is_some()).collect();
    let mut parts: Vec<Section> = Vec::new();
    for &i in places.iter().rev() {
        parts.push(out.remove(i));
    }
    parts.sort_by_key(|s| rank(s));
    for (i, sec) in places.into_iter().zip(parts) {
        out.insert(i, sec);
    }
    out
}

impl Runs {
    fn panels(&self) -> Option<fn(&mut Ctx)> {
        match self.report {
            Report::Panels(f) => Some(f),
            Report::ConfigurationsOnly(_) => None,
        }
    }
}

impl Part {
    /// The part's plan text at the chosen scale, its targets in it (a plan's identity, so a
    /// suite run on other devices is another sweep); None when nothing of it runs. Err: a target
    /// that is not one (`plan::matrix::target_set`). A part measured at an earlier part's
    /// saturation points (`at_saturation`) gets here every queue depth of that part's J-curves;
    /// [`Part::plan_at`] keeps each stack's own.
    pub fn plan(&self, quick: bool, given: &Given) -> Result<Option<String>, PlanError> {
        let Some(runs) = self.runs.as_ref() else { return Ok(None) };
        let (replicates, ramp, budget) = if quick { runs.quick } else { runs.full };
        let budget = match budget {
            Budget::Runtime(t) => format!("runtime = \"{t}\""),
            Budget::Bytes(b) => format!("bytes = \"{b}\""),
        };
        let list = |items: &[String]| items.iter().map(|d| format!("{d:?}")).collect::<Vec<_>>().join(", ");
        let mut top = format!("name = \"{}\"\nreplicates = {replicates}\nramp = \"{ramp}\"\n{budget}\nseed = 1\n", self.name);
        if let Some(s) = given.size {
            top += &format!("size = \"{s}\"\n");
        }
        if !given.destructive.is_empty() {
            top += &format!("destructive = [{}]\n", list(given.destructive));
        }
        let (dimension, mut every_run) = device_use(runs.devices, given)?;
        // A served part's runs go to the client's file system, made on the device it serves.
        if every_run.is_empty() && served::is_served(self) {
            every_run.push(served::MOUNT.to_string());
        }
        if !every_run.is_empty() {
            top += &format!("targets = [{}]\n", list(&every_run));
        }
        let mut matrix = (runs.matrix)(quick);
        if !dimension.is_empty() {
            let at = matrix.find("[matrix]\n").expect("a part's plan has a matrix") + "[matrix]\n".len();
            matrix.insert_str(at, &format!("target = [{}]\n", list(&dimension)));
        }
        if let Some(p) = runs.profile {
            top += &format!("profile = \"{p}\"\n");
        }
        // By name, not by address: a `const` study's parts may be copied per codegen unit, so
        // `ptr::eq` found no study (and so no set-up) in a build with 16 codegen units.
        let study = STUDIES.iter().find(|s| s.parts.iter().any(|p| p.name == self.name));
        let setup = study.map(|s| s.setup).unwrap_or_default();
        if setup.is_empty() {
            return Ok(Some(top + &matrix));
        }
        let line = format!("setup = [{}]\n", setup.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", "));
        Ok(Some(match matrix.find("\n[options]\n") {
            Some(at) => format!("{top}{}{line}{}", &matrix[..at + 11], &matrix[at + 11..]),
            None => format!("{top}{matrix}\n[options]\n{line}"),
        }))
    }
}

/// How a part's runs use the devices given: the `target` dimension's values (a configuration
/// each), or every run's devices.
fn device_use(devices: Devices, given: &Given) -> Result<(Vec<String>, Vec<String>), PlanError> {
    let sets: Vec<Vec<String>> = given.targets.iter().map(|t| target_set(t)).collect::<Result<_, _>>()?;
    let mut all: Vec<String> = Vec::new();
    for d in sets.iter().flatten() {
        if !all.contains(d) {
            all.push(d.clone());
        }
    }
    let join = |set: &[String]| set.join(&TARGET_SET.to_string());
    Ok(if sets.is_empty() {
        (vec![], vec![])
    } else if all.len() == sets[0].len() {
        // One device, or one set: the same for every part.
        (vec![], all.clone())
    } else {
        match devices {
            Devices::Together => (vec![], all.clone()),
            Devices::Each => (sets.iter().map(|s| join(s)).collect(), vec![]),
            Devices::OneAndAll => (vec![join(&sets[0]), join(&all)], vec![]),
            Devices::First => (vec![], sets[0].clone()),
        }
    })
}

/// A part measured where an earlier part's J-curves saturate (CHEOPS'23 measured Fig 5c and
/// Table 2 at each stack's saturation point): its plan is made from that part's stored runs
/// ([`Part::plan_at`]) by the suite, once the earlier part's sweep is stored.
pub struct AtSaturation {
    /// The part whose stored J-curves give each stack its saturation queue depth.
    pub of: &'static str,
    /// Queue depths every stack is measured at besides its saturation point (S2.5's QD1).
    pub keep: &'static [u32],
}

/// The parts planned from an earlier part's stored result, by name. A table beside the parts'
/// rather than a field of `Runs`, so that the parts that depend on nothing say nothing of it.
const AT_SATURATION: &[(&str, AtSaturation)] = s2::AT_SATURATION;

/// A J-curve's line: interface, submission and completion, as a configuration's first run
/// stored them (the plan's words, e.g. `io_uring`, `sqpoll`, `poll`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stack {
    pub interface: String,
    pub submit: String,
    pub complete: String,
}

impl std::fmt::Display for Stack {
    /// As the report names a configuration's method: `io_uring sqpoll poll`, `libaio irq`.
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.interface)?;
        if self.submit != "syscall" {
            write!(f, " {}", self.submit)?;
        }
        write!(f, " {}", self.complete)
    }
}

impl Stack {
    fn of(c: &Config) -> Stack {
        let r = c.first();
        Stack { interface: r.interface.clone(), submit: r.submit.clone(), complete: r.complete.clone() }
    }

    fn of_job(job: &crate::plan::Job) -> Stack {
        let word = |name: &str| {
            let v = (DIMENSIONS[dimension(name).expect("a dimension")].value)(job);
            v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())
        };
        Stack { interface: word("interface"), submit: word("submit"), complete: word("complete") }
    }
}

/// One line of a stored J-curve: its configurations that have IOPS and mean latency, in order of
/// queue depth, their replicate means, and where it saturates (`analysis::saturation`'s rule).
/// The report's saturation table and the parts measured at saturation both read it, so the
/// queue depth circled is the one measured.
pub struct Curve<'a> {
    pub configs: Vec<&'a Config>,
    pub points: Vec<CurvePoint>,
    pub saturation: Result<Saturation, String>,
}

pub fn curve<'a>(configs: &[&'a Config]) -> Curve<'a> {
    let mut sorted = configs.to_vec();
    sorted.sort_by_key(|c| c.first().qd);
    let (mut kept, mut points) = (Vec::new(), Vec::new());
    for c in sorted {
        let (Some(i), Some(l)) = (c.summary(&iops), c.summary(&lat_mean_us)) else { continue };
        points.push(CurvePoint { qd: c.first().qd as f64, iops: i.mean, mean_lat: l.mean });
        kept.push(c);
    }
    let saturation = saturation_point(&points, SaturationRule::default());
    Curve { configs: kept, points, saturation }
}

/// Where a stack's J-curve saturates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// The rule's saturation point.
    At(u32),
    /// No step met the rule: the deepest queue depth the curve reached.
    NotSaturated(u32),
}

impl Found {
    pub fn qd(self) -> u32 {
        match self {
            Found::At(q) | Found::NotSaturated(q) => q,
        }
    }
}

/// Each stack's saturation point in an earlier part's stored sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Saturations {
    /// The part whose sweep it is, and the sweep's id.
    pub part: &'static str,
    pub sweep: i64,
    /// Per stack, its point, or why its runs give none (fewer than two queue depths measured).
    pub stacks: Vec<(Stack, Result<Found, String>)>,
}

impl Saturations {
    /// The saturation points of `sweep`'s J-curves (a stored sweep of part `part`); where it swept
    /// targets, those of `target`'s (the devices the dependent part runs on).
    pub fn of(part: &'static str, sweep: &SweepRuns, target: Option<&str>) -> Saturations {
        let mine: Vec<&Config> = sweep.configs.iter().filter(|c| c.target().is_none_or(|t| Some(t) == target)).collect();
        let mut stacks: Vec<Stack> = mine.iter().map(|c| Stack::of(c)).collect();
        stacks.sort();
        stacks.dedup();
        let stacks = stacks
            .into_iter()
            .map(|s| {
                let line: Vec<&Config> = mine.iter().filter(|c| Stack::of(c) == s).copied().collect();
                let c = curve(&line);
                let found = c.saturation.map(|sat| match sat.index {
                    Some(i) => Found::At(c.points[i].qd as u32),
                    None => Found::NotSaturated(c.points[c.points.len() - 1].qd as u32),
                });
                (s, found)
            })
            .collect();
        Saturations { part, sweep: sweep.id.unwrap_or(0), stacks }
    }

    /// One line: each stack's queue depth, e.g. `libaio irq QD 16, io_uring sqpoll poll QD 64 (not
    /// saturated)`.
    pub fn said(&self) -> String {
        let each: Vec<String> = self
            .stacks
            .iter()
            .map(|(s, f)| match f {
                Ok(Found::At(q)) => format!("{s} QD {q}"),
                Ok(Found::NotSaturated(q)) => format!("{s} QD {q} (not saturated within the sweep: its deepest)"),
                Err(_) => format!("{s}: none"),
            })
            .collect();
        if each.is_empty() {
            "no stack has runs there".into()
        } else {
            each.join(", ")
        }
    }

    /// The plan rule (TOML) that leaves out the configurations of `stack` at `drop`, saying why.
    fn rule(&self, stack: &Stack, drop: &[u32], keep: &[u32]) -> String {
        let (of, id) = (self.part, self.sweep);
        let why = match self.stacks.iter().find(|(s, _)| s == stack).map(|(_, f)| f) {
            Some(Ok(Found::At(q))) => format!("{of} (sweep #{id}) found {stack}'s saturation point at QD {q}: this part measures it there"),
            Some(Ok(Found::NotSaturated(q))) => {
                format!("{stack} did not saturate in {of} (sweep #{id}) up to QD {q}: this part measures it at that deepest queue depth")
            }
            Some(Err(e)) => format!("{of} (sweep #{id}) gives {stack} no saturation point ({e})"),
            None => format!("{of} (sweep #{id}) has no J-curve of {stack}"),
        };
        let why = match (self.stacks.iter().any(|(s, f)| s == stack && f.is_ok()), keep) {
            (true, _) => why,
            (false, []) => format!("{why}: this part does not measure it"),
            (false, k) => {
                format!("{why}: this part measures it only at QD {}", k.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))
            }
        };
        let text = |s: &str| toml::Value::String(s.to_string()).to_string();
        let qds = drop.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
        format!(
            "\n[[rule]]\nwhen = {{ interface = {}, submit = {}, complete = {}, qd = [{qds}] }}\naction = \"drop\"\nreason = {}\n",
            text(&stack.interface),
            text(&stack.submit),
            text(&stack.complete),
            text(&why)
        )
    }
}

impl Part {
    /// What the part's plan is made from, when it is measured at an earlier part's saturation
    /// points.
    pub(crate) fn at_saturation(&self) -> Option<&'static AtSaturation> {
        AT_SATURATION.iter().find(|(name, _)| *name == self.name).map(|(_, a)| a)
    }

    /// The target (a device, or a set joined by '+') every run of the part uses, as the earlier
    /// part's `target` dimension names it; None when no devices are given (a temporary file).
    pub(crate) fn every_run_target(&self, given: &Given) -> Result<Option<String>, PlanError> {
        let Some(runs) = self.runs.as_ref() else { return Ok(None) };
        let (_, every_run) = device_use(runs.devices, given)?;
        Ok((!every_run.is_empty()).then(|| every_run.join(&TARGET_SET.to_string())))
    }

    /// For counting a part measured at saturation before the part it depends on has run: every
    /// stack at one queue depth (the deepest of its J-curves) besides `keep`, as many runs as it
    /// will have. Any other part's plan is [`Part::plan`]'s.
    pub(crate) fn plan_counted(&self, quick: bool, given: &Given) -> Result<Option<String>, PlanError> {
        let Some(text) = self.plan(quick, given)? else { return Ok(None) };
        let Some(at) = self.at_saturation() else { return Ok(Some(text)) };
        let e = crate::plan::Plan::parse(&text)?.expand(&[])?;
        let mut stacks: Vec<(Stack, Result<Found, String>)> = Vec::new();
        for c in &e.configs {
            let (s, qd) = (Stack::of_job(&c.job), c.job.workload.qd);
            match stacks.iter_mut().find(|(t, _)| *t == s) {
                Some((_, Ok(f))) => *f = Found::NotSaturated(f.qd().max(qd)),
                Some(_) => {}
                None => stacks.push((s, Ok(Found::NotSaturated(qd)))),
            }
        }
        self.plan_at(quick, given, &Saturations { part: at.of, sweep: 0, stacks })
    }

    /// The part's size at a scale, as `iolab suite list` shows it: its runs and their estimated
    /// seconds (None for count budgets); None when nothing of it runs here. A part measured at
    /// saturation is counted at one queue depth per stack, as it will run ([`Part::plan_counted`]).
    pub(crate) fn counted(&self, quick: bool) -> Option<Result<(usize, Option<f64>), crate::plan::PlanError>> {
        let text = self.plan_counted(quick, &Given::default()).ok().flatten()?;
        Some(crate::plan::Plan::parse(&text).and_then(|p| p.expand(&[])).map(|e| (e.order.len(), e.estimate_s(e.order.len()))))
    }

    /// The plan of a part measured at saturation ([`Part::at_saturation`]): [`Part::plan`] with
    /// each stack kept at its own saturation point in `found` (and at the part's `keep` queue
    /// depths), its other queue depths left out by rules that say why; a stack `found` has no
    /// point for keeps only `keep`. Any other part's plan is [`Part::plan`]'s.
    pub(crate) fn plan_at(&self, quick: bool, given: &Given, found: &Saturations) -> Result<Option<String>, PlanError> {
        let Some(text) = self.plan(quick, given)? else { return Ok(None) };
        let Some(at) = self.at_saturation() else { return Ok(Some(text)) };
        let e = crate::plan::Plan::parse(&text)?.expand(&[])?;
        let mut stacks: Vec<Stack> = e.configs.iter().map(|c| Stack::of_job(&c.job)).collect();
        stacks.sort();
        stacks.dedup();
        let mut rules = String::new();
        for stack in &stacks {
            let mut qds: Vec<u32> = e.configs.iter().filter(|c| Stack::of_job(&c.job) == *stack).map(|c| c.job.workload.qd).collect();
            qds.sort();
            qds.dedup();
            let point = found.stacks.iter().find(|(s, _)| s == stack).and_then(|(_, f)| f.as_ref().ok()).map(|f| f.qd());
            let drop: Vec<u32> = qds.into_iter().filter(|q| !at.keep.contains(q) && Some(*q) != point).collect();
            if !drop.is_empty() {
                rules += &found.rule(stack, &drop, at.keep);
            }
        }
        Ok(Some(text + &rules))
    }
}

/// What a profiled part's section says first: its runs explain, they do not compare.
fn profiled_part(ctx: &mut Ctx) {
    ctx.note("Every run of this part was profiled (made twice: unprofiled, then profiled; what profiling cost is tabled below). Its figures say where the time goes; the IOPS and latency to compare configurations by are the other parts', whose runs are not profiled.");
}

fn pick(quick: bool, full: &str, small: &str) -> String {
    (if quick { small } else { full }).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_expands_at_both_scales() {
        for p in STUDIES.iter().flat_map(|s| s.parts.iter()) {
            for quick in [false, true] {
                let Some(plan) = p.plan(quick, &Given::default()).unwrap() else { continue };
                let e = crate::plan::sweep::expand(&plan, &[]).unwrap_or_else(|e| panic!("{}: {e}", p.name));
                assert!(!e.configs.is_empty(), "{}", p.name);
            }
        }
    }

    /// Plan and report are paired by the table: a part that runs carries its panels (or says why
    /// the configurations table is its result), a part that runs nothing says why, and every
    /// stored sweep name leads back to its own part. Panels no part carries do not compile
    /// (`deny(dead_code)` above).
    #[test]
    fn every_part_pairs_its_plan_with_its_report() {
        let mut names = std::collections::BTreeSet::new();
        for s in STUDIES {
            assert!(!s.parts.is_empty(), "{} has no parts", s.id);
            for p in s.parts {
                assert!(p.name.starts_with(s.id), "{} is not named after {}", p.name, s.id);
                assert!(names.insert(p.name), "two parts are named {}", p.name);
                assert_eq!(part(p.name).map(|q| q.name), Some(p.name));
                assert!(!p.feeds.is_empty(), "{} says nothing of what it feeds", p.name);
                match &p.runs {
                    Some(r) => match r.report {
                        Report::Panels(_) => {}
                        Report::ConfigurationsOnly(why) => assert!(!why.is_empty(), "{} has no panels and does not say why", p.name),
                    },
                    None => assert!(!p.unsupported.is_empty(), "{} runs nothing and does not say why", p.name),
                }
            }
        }
        // A stored sweep of each part gets the part's section: its introduction and its notes.
        let sweeps: Vec<SweepRuns> = names
            .iter()
            .map(|n| SweepRuns {
                id: Some(1),
                joined: Vec::new(),
                name: n.to_string(),
                configs: Vec::new(),
                skipped: vec![("k".into(), "r".into())],
                not_ok: 0,
            })
            .collect();
        let secs = sections(&sweeps);
        assert_eq!(secs.len(), sweeps.len(), "every part has its sweep here: none is added as absent");
        for sweep in &sweeps {
            let sec = secs.iter().find(|s| s.title.starts_with(&format!("{} (", sweep.name))).unwrap();
            let p = part(&sweep.name).unwrap();
            assert_eq!(sec.about, p.feeds, "{}", p.name);
            let notes = sec.items.iter().filter(|i| matches!(i, sections::Item::Note(n) if n.starts_with("Not run by iolab"))).count();
            assert_eq!(notes, p.unsupported.len(), "{}", p.name);
        }
    }

    /// The parts that explain a figure profile every run (their plan says so, the dry run and
    /// the sweep read it); no other part does.
    #[test]
    fn the_profiled_parts_are_those_of_the_figures_that_split_the_stack() {
        use crate::plan::profile::Profile;
        let profiled: Vec<(&str, Profile)> = STUDIES
            .iter()
            .flat_map(|s| s.parts.iter())
            .filter_map(|p| {
                let e = crate::plan::sweep::expand(&p.plan(true, &Given::default()).unwrap()?, &[]).unwrap();
                e.profile.any().then_some((p.name, e.profile))
            })
            .collect();
        assert_eq!(
            profiled,
            vec![
                ("S2.5-where-the-time-goes", Profile { layers: true, stages: false }),
                ("S2.6-request-stages", Profile { layers: false, stages: true }),
                ("S3-table2-loads-stores", Profile { layers: true, stages: false }),
                ("S4.8-cpu-by-module", Profile { layers: true, stages: false }),
                ("S5.1-breakdown", Profile { layers: false, stages: true })
            ]
        );
        let e = crate::plan::sweep::expand("profile = \"layers\"\nruntime = \"1s\"\n[matrix]\ninterface = [\"null\"]\n", &[]).unwrap();
        assert_eq!(e.estimate_s(1), Some(3.0), "a profiled run is made twice");
        let bad = crate::plan::sweep::expand("profile = \"cycles\"\n[matrix]\ninterface = [\"null\"]\n", &[]).unwrap_err().to_string();
        assert!(bad.starts_with("plan profile: unknown profile \"cycles\""), "{bad}");
    }

    /// Each part uses the devices given as its paper did; the targets are in the plan text, so
    /// they are its identity.
    #[test]
    fn parts_use_the_devices_given_as_their_papers_did() {
        let targets = |part: &str, given: &[&str]| -> Vec<Vec<String>> {
            let given: Vec<String> = given.iter().map(|s| s.to_string()).collect();
            let p = part_named(part);
            let plan = p.plan(true, &Given { targets: &given, ..Given::default() }).unwrap().unwrap();
            let e = crate::plan::sweep::expand(&plan, &[]).unwrap();
            let mut sets: Vec<Vec<String>> = e.configs.iter().map(|c| c.job.targets.paths.clone()).collect();
            sets.dedup();
            sets.sort();
            sets.dedup();
            sets
        };
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(targets("S4.1-latency", &["/dev/a", "/dev/b"]), [v(&["/dev/a"]), v(&["/dev/b"])]);
        assert_eq!(targets("S4.1-latency", &["/dev/a+/dev/b", "/dev/c"]), [v(&["/dev/a", "/dev/b"]), v(&["/dev/c"])]);
        assert_eq!(targets("S2.2-jcurve", &["/dev/a", "/dev/b", "/dev/c"]), [v(&["/dev/a"]), v(&["/dev/a", "/dev/b", "/dev/c"])]);
        assert_eq!(targets("S2.1-qd1", &["/dev/a", "/dev/b"]), [v(&["/dev/a"])]);
        assert_eq!(targets("S2.3-cores", &["/dev/a", "/dev/b"]), [v(&["/dev/a", "/dev/b"])]);
        assert_eq!(targets("S1.1-latency", &["/dev/a", "/dev/b"]), [v(&["/dev/a", "/dev/b"])]);
        // One device: every part's every run, and no target in the configurations' keys.
        for p in STUDIES.iter().flat_map(|s| s.parts.iter()).filter(|p| p.runs.is_some()) {
            assert_eq!(targets(p.name, &["/dev/a"]), [v(&["/dev/a"])], "{}", p.name);
            let plan = p.plan(true, &Given { targets: &v(&["/dev/a"]), ..Given::default() }).unwrap().unwrap();
            assert!(crate::plan::sweep::expand(&plan, &[]).unwrap().configs.iter().all(|c| !c.key.contains("target=")), "{}", p.name);
        }
        let bad = part_named("S4.1-latency").plan(true, &Given { targets: &v(&["/dev/a+"]), ..Given::default() });
        assert!(bad.unwrap_err().to_string().contains("has an empty name"));
        let plan = |t: &[&str]| part_named("S4.1-latency").plan(true, &Given { targets: &v(t), ..Given::default() }).unwrap();
        assert_ne!(plan(&["/dev/a", "/dev/b"]), plan(&["/dev/a", "/dev/c"]), "other devices, another plan");
    }

    /// A part measured at saturation keeps each stack at the queue depth found for it (and at
    /// its `keep` ones); a stack without a point keeps only those, each drop saying why.
    #[test]
    fn a_part_at_saturation_runs_each_stack_at_its_own_point() {
        let stack = |i: &str, s: &str, c: &str| Stack { interface: i.into(), submit: s.into(), complete: c.into() };
        let found = Saturations {
            part: "S2.2-jcurve",
            sweep: 7,
            stacks: vec![
                (stack("libaio", "syscall", "irq"), Ok(Found::At(16))),
                (stack("io_uring", "syscall", "irq"), Ok(Found::NotSaturated(64))),
                (stack("io_uring", "syscall", "poll"), Err("a J-curve needs at least two queue depths, got 1".into())),
            ],
        };
        // Each stack's queue depths, and the dropped configurations with their reasons.
        type Planned = (Vec<(String, Vec<u32>)>, Vec<(String, String)>);
        let qds = |name: &str| -> Planned {
            let p = part_named(name);
            assert_eq!(p.at_saturation().map(|a| a.of), Some("S2.2-jcurve"), "{name}");
            let e = crate::plan::sweep::expand(&p.plan_at(true, &Given::default(), &found).unwrap().unwrap(), &[]).unwrap();
            let mut by: Vec<(String, Vec<u32>)> = Vec::new();
            for c in &e.configs {
                let s = Stack::of_job(&c.job).to_string();
                match by.iter_mut().find(|(t, _)| *t == s) {
                    Some((_, v)) if v.contains(&c.job.workload.qd) => {}
                    Some((_, v)) => v.push(c.job.workload.qd),
                    None => by.push((s, vec![c.job.workload.qd])),
                }
            }
            by.sort();
            (by, e.dropped)
        };
        let v = |s: &str, q: &[u32]| (s.to_string(), q.to_vec());
        let (five, dropped) = qds("S2.5-where-the-time-goes");
        assert_eq!(
            five,
            [
                v("io_uring irq", &[1, 64]),
                v("io_uring poll", &[1]),
                v("io_uring sqpoll poll", &[1]),
                v("libaio irq", &[1, 16]),
                v("psync irq", &[1])
            ]
        );
        assert!(
            dropped.iter().any(|(k, why)| k.contains("interface=libaio")
                && k.contains("qd=4")
                && why == "S2.2-jcurve (sweep #7) found libaio irq's saturation point at QD 16: this part measures it there"),
            "{dropped:?}"
        );
        assert!(
            dropped.iter().any(|(_, why)| why.starts_with("io_uring irq did not saturate in S2.2-jcurve (sweep #7) up to QD 64")),
            "{dropped:?}"
        );
        assert!(
            dropped
                .iter()
                .any(|(_, why)| why.ends_with("(a J-curve needs at least two queue depths, got 1): this part measures it only at QD 1")),
            "{dropped:?}"
        );
        // Table 2: io_uring only, no QD kept besides the point.
        let (two, _) = qds("S2.4-schedulers");
        assert_eq!(two, [v("io_uring irq", &[64])]);
        // Any other part: its plan.
        let qd1 = part_named("S2.1-qd1");
        assert_eq!(qd1.plan_at(true, &Given::default(), &found).unwrap(), qd1.plan(true, &Given::default()).unwrap());
        // Counted before S2.2 has run: one queue depth per stack.
        let counted =
            crate::plan::sweep::expand(&part_named("S2.4-schedulers").plan_counted(true, &Given::default()).unwrap().unwrap(), &[])
                .unwrap();
        assert!(
            counted.configs.iter().all(|c| c.job.workload.qd == 64),
            "{:?}",
            counted.configs.iter().map(|c| &c.key).collect::<Vec<_>>()
        );
    }

    fn part_named(name: &str) -> &'static Part {
        part(name).unwrap_or_else(|| panic!("no part {name}"))
    }

    #[test]
    fn paper_parameters() {
        let s3 = &find("s3").unwrap().parts[0];
        let e = crate::plan::sweep::expand(&s3.plan(false, &Given::default()).unwrap().unwrap(), &[]).unwrap();
        // 8 block sizes x 7 thread counts x (pvsync2, io_uring) x (irq, poll, hybrid); the kernel
        // decides at run time which hybrid polling exists (skipped with the reason where none).
        assert_eq!(e.configs.len(), 8 * 7 * 6);
        assert_eq!(e.replicates, 10);
        assert_eq!(e.seconds_per_run, Some(130.0));
        let quick = crate::plan::sweep::expand(&s3.plan(true, &Given::default()).unwrap().unwrap(), &[]).unwrap();
        assert!(quick.estimate_s(quick.order.len()).unwrap() < 300.0, "quick S3 finishes in minutes");
        let s1 = &find("S1").unwrap().parts[0];
        let t2 = crate::plan::sweep::expand(&s1.plan(false, &Given::default()).unwrap().unwrap(), &[]).unwrap();
        // Table 2: psync, pvsync2 x3, posixaio x2, libaio, io_uring 2 submits x 3 completions = 13, x2 rw.
        assert_eq!(t2.configs.len(), 26);
        // The papers' set-up reaches every run of S1, S3 and S4, and no other study's.
        for study in STUDIES {
            for p in study.parts {
                let Some(plan) = p.plan(true, &Given::default()).unwrap() else { continue };
                let e = crate::plan::sweep::expand(&plan, &[]).unwrap();
                let want: Vec<String> = study.setup.iter().map(|s| s.to_string()).collect();
                assert!(e.configs.iter().all(|c| c.job.system.setup == want), "{}", p.name);
                assert_eq!(!want.is_empty(), ["S1", "S2", "S3", "S4"].contains(&study.id), "{}", p.name);
            }
        }
    }
}
