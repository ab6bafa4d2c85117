//! What `--profile` asks of a run: part of the plan, so a sweep plan (and a suite part) can say
//! which runs are profiled; the meters do the profiling (`meters::profile`, `meters::stages`).
use super::PlanError;

/// What `--profile` asks for: `layers` (CPU time by layer of the stack, from call-chain samples
/// on every CPU), `stages` (each request's latency split across the stack, from tracepoints),
/// or both (`layers,stages`): one flag, because both share the unprofiled run they are compared
/// with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    pub layers: bool,
    pub stages: bool,
}

impl Profile {
    pub const OFF: Profile = Profile { layers: false, stages: false };

    pub fn any(self) -> bool {
        self.layers || self.stages
    }

    /// "off", or a comma-separated list of `layers` and `stages`.
    pub fn parse(s: &str) -> Result<Profile, PlanError> {
        let mut p = Profile::OFF;
        for word in s.split(',').map(str::trim) {
            match word {
                "off" | "none" if s.trim() == word => {}
                "layers" => p.layers = true,
                "stages" => p.stages = true,
                _ => return PlanError::value(format!("unknown profile \"{word}\": give layers, stages, layers,stages or off")),
            }
        }
        Ok(p)
    }

    /// Both asks together: what a sweep plan asks for and what `--profile` adds.
    pub(crate) fn union(self, other: Profile) -> Profile {
        Profile { layers: self.layers || other.layers, stages: self.stages || other.stages }
    }

    /// As the command line writes it ("layers,stages").
    pub fn name(self) -> String {
        let words: Vec<&str> = [(self.layers, "layers"), (self.stages, "stages")].iter().filter(|x| x.0).map(|x| x.1).collect();
        if words.is_empty() {
            "off".into()
        } else {
            words.join(",")
        }
    }
}

/// The `--profile` option, one definition for `iolab run`, `sweep` and `suite run`.
#[derive(Clone, Copy, Debug, Default, clap::Args)]
pub struct ProfileArg {
    /// Profile each run: `layers` samples every CPU's call chains over the window and splits
    /// the CPU time by layer of the I/O stack; `stages` traces each request through the kernel
    /// (system call, io_uring, block layer, scheduler, driver, device, interrupt) and splits
    /// its latency into stages; `layers,stages` does both. The same job runs first
    /// unprofiled, to show what profiling costs (needs root; see docs/profiling.md).
    #[arg(long, value_parser = Profile::parse, default_value = "off")]
    pub profile: Profile,
}
