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

/// The report's sections for the selected sweeps: a sweep named after a part gets its panels.
pub fn sections(sweeps: &[SweepRuns]) -> Vec<Section> {
    sections::sections(sweeps, |name| {
        part(name).map(|p| sections::Part { feeds: p.feeds, unsupported: p.unsupported, panels: p.runs.as_ref().and_then(Runs::panels) })
    })
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
    /// The part's plan text at the chosen scale; None when nothing of it runs.
    pub fn plan(&self, quick: bool, size: Option<&str>, destructive: &[String]) -> Option<String> {
        let runs = self.runs.as_ref()?;
        let (replicates, ramp, budget) = if quick { runs.quick } else { runs.full };
        let budget = match budget {
            Budget::Runtime(t) => format!("runtime = \"{t}\""),
            Budget::Bytes(b) => format!("bytes = \"{b}\""),
        };
        let mut top = format!("name = \"{}\"\nreplicates = {replicates}\nramp = \"{ramp}\"\n{budget}\nseed = 1\n", self.name);
        if let Some(s) = size {
            top += &format!("size = \"{s}\"\n");
        }
        if !destructive.is_empty() {
            top += &format!("destructive = [{}]\n", destructive.iter().map(|d| format!("\"{d}\"")).collect::<Vec<_>>().join(", "));
        }
        let matrix = (runs.matrix)(quick);
        let study = STUDIES.iter().find(|s| s.parts.iter().any(|p| std::ptr::eq(p, self)));
        let setup = study.map(|s| s.setup).unwrap_or_default();
        if setup.is_empty() {
            return Some(top + &matrix);
        }
        let line = format!("setup = [{}]\n", setup.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", "));
        Some(match matrix.find("\n[options]\n") {
            Some(at) => format!("{top}{}{line}{}", &matrix[..at + 11], &matrix[at + 11..]),
            None => format!("{top}{matrix}\n[options]\n{line}"),
        })
    }
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
                let Some(plan) = p.plan(quick, None, &[]) else { continue };
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
                name: n.to_string(),
                configs: Vec::new(),
                skipped: vec![("k".into(), "r".into())],
                not_ok: 0,
            })
            .collect();
        for (sec, sweep) in sections(&sweeps).iter().zip(&sweeps) {
            let p = part(&sweep.name).unwrap();
            assert_eq!(sec.about, p.feeds, "{}", p.name);
            let notes = sec.items.iter().filter(|i| matches!(i, sections::Item::Note(n) if n.starts_with("Not run by iolab"))).count();
            assert_eq!(notes, p.unsupported.len(), "{}", p.name);
        }
    }

    #[test]
    fn paper_parameters() {
        let s3 = &find("s3").unwrap().parts[0];
        let e = crate::plan::sweep::expand(&s3.plan(false, None, &[]).unwrap(), &[]).unwrap();
        // 8 block sizes x 7 thread counts x (pvsync2, io_uring) x (irq, poll, hybrid); the kernel
        // decides at run time which hybrid polling exists (skipped with the reason where none).
        assert_eq!(e.configs.len(), 8 * 7 * 6);
        assert_eq!(e.replicates, 10);
        assert_eq!(e.seconds_per_run, Some(130.0));
        let quick = crate::plan::sweep::expand(&s3.plan(true, None, &[]).unwrap(), &[]).unwrap();
        assert!(quick.estimate_s(quick.order.len()).unwrap() < 300.0, "quick S3 finishes in minutes");
        let s1 = &find("S1").unwrap().parts[0];
        let t2 = crate::plan::sweep::expand(&s1.plan(false, None, &[]).unwrap(), &[]).unwrap();
        // Table 2: psync, pvsync2 x3, posixaio x2, libaio, io_uring 2 submits x 3 completions = 13, x2 rw.
        assert_eq!(t2.configs.len(), 26);
        // The papers' set-up reaches every run of S1, S3 and S4, and no other study's.
        for study in STUDIES {
            for p in study.parts {
                let Some(plan) = p.plan(true, None, &[]) else { continue };
                let e = crate::plan::sweep::expand(&plan, &[]).unwrap();
                let want: Vec<String> = study.setup.iter().map(|s| s.to_string()).collect();
                assert!(e.configs.iter().all(|c| c.job.system.setup == want), "{}", p.name);
                assert_eq!(!want.is_empty(), ["S1", "S3", "S4"].contains(&study.id), "{}", p.name);
            }
        }
    }
}
