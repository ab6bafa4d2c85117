//! What a suite run is asked (`SuiteRun`) and how it shows and runs each part (`SuiteUi`, its
//! `Event`s): shared by the suite's runner (`run`) and the served parts' (`served`).
use super::{Part, Saturations, Study};
use crate::failure::Failure;
use crate::plan::{Numa, Plan};
use crate::session::precondition::PreconditionUi;
use crate::session::sweep::{Share, SweepEnd};
use std::path::PathBuf;

/// What a suite run is asked to do (the command line's `suite run`, parsed).
pub struct SuiteRun {
    pub study: &'static Study,
    /// Devices, or sets joined by '+' (none: a temporary file).
    pub targets: Vec<String>,
    /// Small sweeps and short runs.
    pub quick: bool,
    /// Only the parts whose name starts with this.
    pub part: Option<String>,
    /// Bytes of each target to use (and the temporary target's size), as given.
    pub size: Option<String>,
    /// Devices named as safe to overwrite.
    pub destructive: Vec<String>,
    /// The results database the parts' sweeps are kept in (and an earlier part's are read from).
    pub db: PathBuf,
    /// Plan and list, run nothing, fill nothing.
    pub dry_run: bool,
    /// Every run pinned so, in place of what the parts ask (a part that varies numa keeps it).
    pub numa: Option<Numa>,
}

/// What the suite shows, in order.
pub enum Event<'a> {
    /// Input checked, nothing refused: the suite begins.
    Begin,
    /// A target's preconditioning fills begin (`scale`: how they differ from the paper's, or empty).
    Filling { target: &'a str, fills: u32, scale: &'a str },
    /// A target was filled, at this mean rate.
    Filled { target: &'a str, bytes_per_s: f64 },
    /// The preconditioning in words, as every part's stored plan keeps it.
    Preconditioning(&'a str),
    /// A part begins.
    Part(&'static Part),
    /// Something of the part that iolab or this machine cannot run, and why.
    CannotRun { what: &'a str, why: &'a str },
    /// `--numa` was not applied to this part: it varies numa itself.
    NumaNotApplied(Numa),
    /// The part runs each stack at the saturation points found in `of`'s stored runs.
    AtSaturation { of: &'static str, found: &'a Saturations },
    /// A dry run of a part measured at saturation before `of`'s runs are stored (`why`): listed at
    /// every queue depth of `of`'s J-curves.
    SaturationNotYet { of: &'static str, why: &'a str },
    /// A served part's step (a server started, a device connected, what a server cost).
    Served(&'a str),
}

/// The suite's display, and the runner of each part's sweep (a dry run lists it).
pub trait SuiteUi {
    fn event(&mut self, event: Event);
    /// How a preconditioning fill shows.
    fn precondition(&mut self) -> &mut dyn PreconditionUi;
    /// Run one part's sweep: its plan (its targets in it, unless `targets` replaces them), the
    /// share of its configurations to run now (a served part runs each server's apart: `served`),
    /// what of it cannot run here, and what serves its file sets' directory while it runs (a
    /// served part's server, handed to every run whose spec names that server; None elsewhere).
    fn run_part(
        &mut self,
        plan: &Plan,
        targets: &[String],
        share: Option<Share>,
        unsupported: &[(String, String)],
        serving: Option<&crate::meters::server::Serving>,
    ) -> Result<SweepEnd, Failure>;
}
