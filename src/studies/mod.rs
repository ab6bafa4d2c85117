//! The five studies iolab exists to run (HotStorage'23, CHEOPS'23, HotStorage'22, IISWC'19,
//! FPL'18), one file each. A study is a list of parts; a part is one sweep: its plan at the
//! papers' scale and at a `--quick` scale that finishes in minutes, and the report panels that
//! turn its stored runs into the paper's tables and figures. What iolab or the machine cannot run
//! is listed with the reason, never left out silently. `STUDIES` is the one table `iolab suite`
//! and `iolab report` read; report/ renders and knows no study.
// A panel or plan written in a study file but not given to a part is an error, not a warning.
#![deny(dead_code)]
pub mod s1;
pub mod s2;
pub mod s3;
pub mod s4;
pub mod s5;

use crate::plan::matrix::{target_set, TARGET_SET};
use crate::report::data::SweepRuns;
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

pub const STUDIES: &[Study] = &[s1::STUDY, s2::STUDY, s3::STUDY, s4::STUDY, s5::STUDY];

/// A study by its id (S1 to S5, any case).
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
    /// that is not one (`plan::matrix::target_set`).
    pub fn plan(&self, quick: bool, given: &Given) -> Result<Option<String>, String> {
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
        let sets: Vec<Vec<String>> = given.targets.iter().map(|t| target_set(t)).collect::<Result<_, _>>()?;
        let mut all: Vec<String> = Vec::new();
        for d in sets.iter().flatten() {
            if !all.contains(d) {
                all.push(d.clone());
            }
        }
        let join = |set: &[String]| set.join(&TARGET_SET.to_string());
        // Several configurations' targets (the `target` dimension), or every run's.
        let (dimension, every_run): (Vec<String>, Vec<String>) = if sets.is_empty() {
            (vec![], vec![])
        } else if all.len() == sets[0].len() {
            // One device, or one set: the same for every part.
            (vec![], all.clone())
        } else {
            match runs.devices {
                Devices::Together => (vec![], all.clone()),
                Devices::Each => (sets.iter().map(|s| join(s)).collect(), vec![]),
                Devices::OneAndAll => (vec![join(&sets[0]), join(&all)], vec![]),
                Devices::First => (vec![], sets[0].clone()),
            }
        };
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
        let bad = crate::plan::sweep::expand("profile = \"cycles\"\n[matrix]\ninterface = [\"null\"]\n", &[]).unwrap_err();
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
        assert!(bad.unwrap_err().contains("has an empty name"));
        let plan = |t: &[&str]| part_named("S4.1-latency").plan(true, &Given { targets: &v(t), ..Given::default() }).unwrap();
        assert_ne!(plan(&["/dev/a", "/dev/b"]), plan(&["/dev/a", "/dev/c"]), "other devices, another plan");
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
