//! `iolab energy import LOG --db FILE`: a power meter's log attached to stored runs afterwards.
use crate::failure::Failure;
use crate::session::energy_import::{import, Attached};
use std::path::PathBuf;

#[derive(clap::Subcommand, Debug, Clone)]
pub enum EnergyCmd {
    /// Attach a power meter's log (HOBOware CSV or timestamp,watts CSV) to the stored runs whose
    /// windows it covers, as wall power; runs it does not cover keep no meter energy, with the reason.
    Import(ImportArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct ImportArgs {
    /// The meter's log, downloaded after the runs.
    pub log: PathBuf,
    #[arg(long, default_value = "iolab.db")]
    pub db: PathBuf,
    /// Only the runs of this sweep.
    #[arg(long)]
    pub sweep: Option<i64>,
    /// Seconds to add to the meter's timestamps to give this machine's clock (e.g. -3600 for a
    /// meter an hour ahead).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true, value_name = "S", value_parser = crate::energy::parse_clock_offset_s)]
    pub clock_offset: f64,
    /// The meter clock's rate error in ppm (positive: it runs fast; within ±1000).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true, value_parser = crate::energy::parse_drift_ppm)]
    pub drift_ppm: f64,
    /// hobo, hobo-dmy or csv (default: detect).
    #[arg(long, value_name = "FORMAT")]
    pub meter_format: Option<String>,
}

pub fn main(cmd: &EnergyCmd) -> i32 {
    match cmd {
        EnergyCmd::Import(a) => super::exit_code(run(a)),
    }
}

fn run(a: &ImportArgs) -> Result<i32, Failure> {
    super::check_meter_format(a.meter_format.as_deref())?;
    let cfg = crate::energy::EnergyConfig {
        meter_log: Some(a.log.clone()),
        meter_format: a.meter_format.clone(),
        meter_offset_s: a.clock_offset,
        meter_drift_ppm: a.drift_ppm,
        ..Default::default()
    };
    let done = import(&a.db, &a.log, a.sweep, &cfg)?;
    let measured = done.iter().filter(|(_, x)| matches!(x, Attached::Measured { .. })).count();
    for (id, x) in &done {
        match x {
            Attached::Measured { watts, coverage, iops_per_joule } => {
                let per_joule = iops_per_joule
                    .map(|r| format!(", {r:.1} I/Os per joule"))
                    .unwrap_or_else(|| ", no per-joule ratio (coverage under 90 %)".into());
                println!("run {id}: {watts:.1} W wall, {:.0} % of its window covered{per_joule}", coverage * 100.0);
            }
            Attached::Uncovered(why) => println!("run {id}: no energy: {why}"),
        }
    }
    println!("{} attached to {measured} of {} runs in {}", a.log.display(), done.len(), crate::secret::redact_path(&a.db));
    if measured == 0 {
        eprintln!("iolab: the log covers none of the runs: check that it spans them, and the meter's clock (--clock-offset S)");
        return Ok(1);
    }
    Ok(0)
}
