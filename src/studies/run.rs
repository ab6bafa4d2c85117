//! A built-in suite run (`iolab suite run`): the study's preconditioning, then its parts in
//! order, each one sweep. A part measured at an earlier part's saturation points is planned from
//! that part's stored runs (`studies::Part::plan_at`), and refused before anything is done when
//! they are not there and the earlier part does not run first. What the caller shows comes
//! through [`SuiteUi`], which also runs each part's sweep; nothing here prints.
use super::{Given, Part, Saturations};
use crate::failure::Failure;
use crate::plan::Plan;
use crate::session::precondition::{precondition, Preconditioning};
use crate::session::sweep::SweepEnd;

pub use super::ui::{Event, SuiteRun, SuiteUi};

/// How one selected part ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PartEnd {
    Ran(SweepEnd),
    /// Nothing of it runs (its reasons were shown).
    NothingToRun,
}

/// How the suite run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuiteEnd {
    /// 0; otherwise the highest of its parts' sweeps' codes, or the code of the part that stopped.
    pub code: i32,
    /// The selected parts that were gone through, in order.
    pub parts: Vec<(&'static str, PartEnd)>,
    /// Every selected part was gone through: false when one stopped the suite (Ctrl-C, bad
    /// input, settings left changed); failed runs do not stop it.
    pub finished: bool,
}

/// Run the suite's selected parts. Err: one line, before anything is done when it is bad input
/// (no such part, a bad size, a part measured at saturation with nothing to read it from).
pub fn run(s: &SuiteRun, ui: &mut dyn SuiteUi) -> Result<SuiteEnd, Failure> {
    let suite = s.study;
    let parts: Vec<&'static Part> = suite.parts.iter().filter(|p| s.part.as_deref().is_none_or(|x| p.name.starts_with(x))).collect();
    if parts.is_empty() {
        return Err(Failure::invalid(format!("suite {} has no part starting with '{}'", suite.id, s.part.as_deref().unwrap_or(""))));
    }
    let size = suite_size(s)?;
    let given = Given { targets: &s.targets, size: s.size.as_deref(), destructive: &s.destructive };
    let fills = suite.fills.map(|(full, quick)| fill_plan(s, if s.quick { quick } else { full }, full));
    let preconditioned = fills.as_ref().map(|f| f.said.as_str());
    // A part measured at an earlier part's saturation points that is not run after it here needs
    // that part's stored result: refused before anything is done (the fills included).
    if !s.dry_run {
        for p in &parts {
            let Some(at) = p.at_saturation() else { continue };
            if !parts.iter().any(|q| q.name == at.of) {
                stored_saturations(s, p, &given, preconditioned)?.map_err(Failure::invalid)?;
            }
        }
    }
    ui.event(Event::Begin);
    if let Some(f) = &fills {
        if let Some(n) = f.fill {
            fill_targets(s, f, n, size, ui)?;
        }
        ui.event(Event::Preconditioning(&f.said));
    }
    let mut end = SuiteEnd { code: 0, parts: Vec::new(), finished: true };
    for p in parts {
        ui.event(Event::Part(p));
        let ran = match run_one_part(s, p, &given, preconditioned, ui)? {
            Some(ran) => ran,
            None => {
                end.parts.push((p.name, PartEnd::NothingToRun));
                continue;
            }
        };
        end.parts.push((p.name, PartEnd::Ran(ran)));
        // Failed runs do not stop the suite; a part that stopped (Ctrl-C, bad input, settings
        // left changed) does.
        if !ran.finished {
            end.code = ran.code;
            end.finished = false;
            return Ok(end);
        }
        end.code = end.code.max(ran.code);
    }
    Ok(end)
}

/// The size every part's runs and the temporary target use: checked here, once, as a dry run
/// reads it nowhere else (`--size 0 --dry-run` planned every part and exited 0).
fn suite_size(s: &SuiteRun) -> Result<Option<u64>, Failure> {
    Ok(match s.size.as_deref() {
        Some(text) => {
            let bytes = crate::plan::size::parse_size(text).map_err(|e| Failure::invalid(format!("--size: {e}")))?;
            if bytes < crate::plan::validate::MIN_BS {
                return Err(Failure::invalid(format!(
                    "--size {text} is smaller than one {}-byte block: give the bytes of each target to use, e.g. 1g",
                    crate::plan::validate::MIN_BS
                )));
            }
            Some(bytes)
        }
        None => None,
    })
}

/// The sequential fills of every target (`n` each) before the first part, as the paper
/// preconditions its drives.
fn fill_targets(s: &SuiteRun, f: &Fills, n: u32, size: Option<u64>, ui: &mut dyn SuiteUi) -> Result<(), Failure> {
    for t in &s.targets {
        ui.event(Event::Filling { target: t, fills: n, scale: &f.scale });
        let p = Preconditioning {
            target: t.clone(),
            interface: crate::interfaces::InterfaceKind::IoUring,
            fills: n,
            fill_bs: 128 << 10,
            bs: 4096,
            qd: 32,
            round_s: 0.0,
            max_rounds: 0,
            size,
            destructive: s.destructive.clone(),
        };
        let r = precondition(&p, ui.precondition())?;
        let mean = r.fills.iter().sum::<f64>() / r.fills.len().max(1) as f64;
        ui.event(Event::Filled { target: t, bytes_per_s: mean });
    }
    Ok(())
}

/// One part: planned (from an earlier part's stored saturation points where it is measured at
/// them), then run, or served over NBD. None: nothing of it could run here (said through `ui`).
fn run_one_part(
    s: &SuiteRun,
    p: &'static Part,
    given: &Given,
    preconditioned: Option<&str>,
    ui: &mut dyn SuiteUi,
) -> Result<Option<SweepEnd>, Failure> {
    let unsupported: Vec<(String, String)> = p.unsupported.iter().map(|(w, r)| (w.to_string(), r.to_string())).collect();
    let plan = match p.at_saturation() {
        // A served part's file set is sized by its files, not by --size.
        None if super::served::is_served(p) => p.plan(s.quick, &Given { size: None, ..*given })?,
        None => p.plan(s.quick, given)?,
        Some(at) => match stored_saturations(s, p, given, preconditioned)? {
            Ok(found) => {
                ui.event(Event::AtSaturation { of: at.of, found: &found });
                p.plan_at(s.quick, given, &found)?
            }
            Err(why) if s.dry_run => {
                ui.event(Event::SaturationNotYet { of: at.of, why: &why });
                p.plan(s.quick, given)?
            }
            Err(why) => return Err(Failure::invalid(why)),
        },
    };
    let Some(plan) = plan else {
        for (what, why) in &unsupported {
            ui.event(Event::CannotRun { what, why });
        }
        return Ok(None);
    };
    let (plan, numa_kept) = as_run(&plan, s, preconditioned)?;
    if let (true, Some(n)) = (numa_kept, s.numa) {
        ui.event(Event::NumaNotApplied(n));
    }
    // A part whose file system is served over NBD: set up per server, or skipped with why.
    if super::served::is_served(p) && !s.dry_run {
        return super::served::run(s, p, &plan, &unsupported, ui);
    }
    // The targets are in the part's plan, as it uses them.
    Ok(Some(ui.run_part(&plan, &[], None, &unsupported, None)?))
}

/// A part's plan as this suite run runs it: with `--numa` (true: not applied, the part varies
/// numa itself), and the preconditioning in words (kept with the stored plan, whose text is the
/// sweep's identity: written as it always was, so a suite run again continues the sweeps an
/// earlier one stored).
fn as_run(text: &str, s: &SuiteRun, preconditioned: Option<&str>) -> Result<(Plan, bool), Failure> {
    // A plan's error is bad input (`e.to_string()`: the plan's error type, whatever it is, as its line).
    let invalid = |e: crate::plan::PlanError| Failure::invalid(e.to_string());
    let mut plan = Plan::parse(text).map_err(invalid)?;
    let kept = match s.numa {
        Some(n) => !plan.override_numa(n).map_err(invalid)?,
        None => false,
    };
    if let Some(p) = preconditioned {
        plan.set_preconditioned(p).map_err(invalid)?;
    }
    Ok((plan, kept))
}

/// Each stack's saturation point in the stored sweep of the part `p` is measured at
/// (`Part::at_saturation`), that sweep found by its plan as this suite run makes it (scale,
/// devices, --numa, preconditioning). Ok(Err): none to read, in one line that says which part to
/// run first.
fn stored_saturations(s: &SuiteRun, p: &Part, given: &Given, preconditioned: Option<&str>) -> Result<Result<Saturations, String>, Failure> {
    let at = p.at_saturation().expect("a part measured at saturation");
    let of = crate::studies::part(at.of).expect("the part it depends on is a part");
    let again = format!("iolab suite run {}{} --part {}", s.study.id, if s.quick { " --quick" } else { "" }, of.name);
    let db = crate::secret::redact_path(&s.db);
    let none = |what: String| {
        Ok(Err(format!(
            "{} is measured at each stack's saturation point in {}'s stored runs, and {what}: run `{again}` first (with the same devices)",
            p.name, of.name
        )))
    };
    let Some(text) = of.plan(s.quick, given)? else { return none(format!("{} runs nothing here", of.name)) };
    let (plan, _) = as_run(&text, s, preconditioned)?;
    if !crate::store::exists(&s.db) {
        return none(format!("{db} does not exist"));
    }
    let store = crate::store::Store::open_existing(&s.db)?;
    let hash = plan.hash(&[]);
    let Some(info) = store.sweep_infos()?.into_iter().filter(|x| x.plan_hash == hash).max_by_key(|x| x.id) else {
        return none(format!("{db} has no sweep of it at this scale on these devices"));
    };
    if info.pending > 0 {
        return none(format!("its sweep #{} in {db} is unfinished ({} runs left)", info.id, info.pending));
    }
    let sweep = crate::report::data::load_sweep(&store, info.id, &crate::store::RunFilter::default())?;
    Ok(Ok(Saturations::of(of.name, &sweep, p.every_run_target(given)?.as_deref())))
}

/// The study's preconditioning before its parts, decided before anything is done.
struct Fills {
    /// In words, for every part's stored plan: done, to be done (a dry run), or not done and why.
    said: String,
    /// Sequential fills of every target to make: the user named each with --destructive, and
    /// this is no dry run.
    fill: Option<u32>,
    /// How the fills differ from the paper's (`--quick`), or empty.
    scale: String,
}

/// `fills` sequential fills of every target through `iolab precondition`'s loop (no
/// random-write rounds), where the user named the target with --destructive; otherwise (and in a
/// dry run) what would be done or why it is not.
fn fill_plan(s: &SuiteRun, fills: u32, paper: u32) -> Fills {
    let targets = &s.targets;
    let scale = if fills == paper { String::new() } else { format!(" (--quick: {fills} of the paper's {paper})") };
    let why_not = if targets.is_empty() {
        Some("the suite runs on a temporary file; name the device and allow writing it with --destructive DEVICE".to_string())
    } else {
        targets.iter().find(|t| !s.destructive.contains(t)).map(|t| {
            format!("{t} was not named with --destructive (writing it destroys its contents); the paper filled its devices {paper} times")
        })
    };
    let (said, fill) = match why_not {
        Some(why) => (format!("not done: {why}"), None),
        None if s.dry_run => (format!("to be done: {fills} sequential fills of {} before the parts{scale}", targets.join(", ")), None),
        // Nothing measured in the words: the stored plan must read the same when the suite is
        // run again to continue it.
        None => (
            format!("done: {fills} sequential fills of {} (128 KiB writes, io_uring QD32) before the parts{scale}", targets.join(", ")),
            Some(fills),
        ),
    };
    Fills { said, fill, scale }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Numa;

    /// Each S2 part's plan as a suite run with `--numa local` and preconditioning stores it (and
    /// without them): the hashes iolab stored before plans were parsed once, pinned, so a suite
    /// run again finds and continues the sweeps an earlier one stored.
    #[test]
    fn a_suite_runs_each_part_under_the_identity_it_always_had() {
        let study = crate::studies::find("S2").unwrap();
        let targets = vec!["/dev/a".to_string(), "/dev/b".to_string()];
        let s = |numa| SuiteRun {
            study,
            targets: targets.clone(),
            quick: true,
            part: None,
            size: Some("1g".into()),
            destructive: targets.clone(),
            db: "unused.db".into(),
            dry_run: false,
            numa,
        };
        let given = Given { targets: &targets, size: Some("1g"), destructive: &targets };
        let mut got = Vec::new();
        for p in study.parts {
            let Some(text) = p.plan(true, &given).unwrap() else { continue };
            let (edited, kept) = as_run(&text, &s(Some(Numa::Local)), Some("done: 2 sequential fills")).unwrap();
            let (plain, _) = as_run(&text, &s(None), None).unwrap();
            assert_eq!(plain.text(), text);
            got.push(format!("{} {kept} {} {}", p.name, edited.hash(&[]), plain.hash(&[])));
        }
        assert_eq!(
            got,
            [
                "S2.1-qd1 false 9e4d850a837a1d20 81d5e29ada2546e8",
                "S2.2-jcurve false 1de466f012e07ab5 8cca6f2052f4f423",
                "S2.3-cores true a70c70405e74ecae 035dfd247f3288c5",
                "S2.4-schedulers true f99b4749e5d2969e 46b0a74a636963c9",
                "S2.5-where-the-time-goes false 87cb47729ac6f563 04264999df9889e8",
                "S2.6-request-stages false 144e1ca0610c6008 3128a2456aafbcd5",
            ]
        );
    }
}
