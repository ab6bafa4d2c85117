//! The `iolab` command line: argument definitions and the subcommands.
pub mod compare;
pub mod energy;
pub mod export;
pub mod fleet;
pub mod import;
pub mod interfaces_cmd;
pub mod merge;
pub mod precondition;
pub mod probe;
pub mod report;
pub mod results;
pub mod run;
pub mod serve;
pub mod suite;
pub mod sweep;

use crate::device::Targets;
use crate::energy::EnergyError;
use crate::interfaces::IoChoice;
use crate::plan::{size, Budget, Complete, Job, PlanError, Policy, Rw, Submit, Timing, Workload};
use crate::settings::Requested;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "iolab", version, about = "A laboratory for the Linux storage I/O stack: which way of doing I/O is best on this machine?")]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Cmd,
}

// Parsed once per process: boxing `RunArgs` to shrink the enum would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
pub enum Cmd {
    /// Run one workload through one interface and measure it.
    Run(RunArgs),
    /// Print each interface's design point and whether this machine can run it.
    Interfaces,
    /// Try every interface and mode on a target (read-only) and say what works, and why not.
    Probe {
        /// File or block device to probe; default: a small temporary file.
        target: Option<PathBuf>,
        /// Probe -i vfio-nvme in VFIO's unsafe no-IOMMU mode too, where the machine has no
        /// IOMMU (as `iolab run --vfio-noiommu` would run it).
        #[arg(long)]
        vfio_noiommu: bool,
    },
    /// Run a plan (TOML): a matrix of configurations with replicates, stored in a database.
    Sweep(sweep::SweepArgs),
    /// List, filter and export stored runs.
    Results(results::ResultsArgs),
    /// Fill a target and write it randomly until steady state (SNIA PTS rule).
    Precondition(precondition::PreconditionArgs),
    /// Put back system settings a killed iolab left changed.
    Restore {
        /// Started by an aborting iolab: wait for process PID to end, then restore.
        #[arg(long, hide = true, value_name = "PID")]
        after: Option<u32>,
    },
    /// The six studies as built-in sweeps.
    #[command(subcommand)]
    Suite(suite::SuiteCmd),
    /// Two configurations (or two databases) side by side with ratios and significance.
    Compare(compare::CompareArgs),
    /// Bring results databases from several machines together into one, each run exactly
    /// once; a sweep run in parts on several machines comes back as one sweep.
    Merge(merge::MergeArgs),
    /// A plan or suite across the nodes of a Slurm cluster: submit it, follow it.
    #[command(subcommand)]
    Fleet(fleet::FleetCmd),
    /// Energy measured apart from the runs: attach a power meter's log to stored runs.
    #[command(subcommand)]
    Energy(energy::EnergyCmd),
    /// One self-contained HTML report over a results database (a suite, sweeps or filtered
    /// runs), with every figure as SVG and every table as CSV and Markdown.
    Report(report::ReportArgs),
    /// A plan written as another tool's job file (`iolab export fio PLAN.toml`).
    #[command(subcommand)]
    Export(export::ExportCmd),
    /// Another tool's results stored beside iolab's (`iolab import fio RESULT.json`).
    #[command(subcommand)]
    Import(import::ImportCmd),
    /// Serve a target as a network block device (the NBD protocol) through one of iolab's
    /// interfaces, until Ctrl-C; then what it served and its CPU per request.
    Serve(serve::ServeArgs),
    /// The kernel's NBD client: connect /dev/nbdN to a server, disconnect it.
    #[command(subcommand)]
    Nbd(serve::NbdCmd),
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Files or block devices. None: a 1 GiB temporary file (or --size), filled, removed after.
    pub targets: Vec<PathBuf>,
    /// I/O interface (the list is `interfaces::help()`, from the interface table).
    #[arg(short = 'i', long, default_value = "psync", help = crate::interfaces::help())]
    pub interface: String,
    /// How requests reach the kernel.
    #[arg(long, value_enum, default_value = "syscall")]
    pub submit: Submit,
    /// How completions are detected.
    #[arg(long, value_enum, default_value = "irq")]
    pub complete: Complete,
    #[arg(long, value_enum, default_value = "randread")]
    pub rw: Rw,
    /// Percentage of writes for --rw randrw.
    #[arg(long)]
    pub write_mix: Option<u8>,
    /// Block size, 512 to 1m (e.g. 4k, 128k).
    #[arg(long, default_value = "4k")]
    pub bs: String,
    /// Several block sizes, each with its share of I/Os, as fio's bssplit (e.g. 4k/60:64k/40);
    /// the largest is the block size.
    #[arg(long, value_name = "SIZE/PCT:...", conflicts_with = "bsrange")]
    pub bssplit: Option<String>,
    /// Block sizes drawn from a range in steps of the smallest, as fio's bsrange (e.g. 4k-64k).
    #[arg(long, value_name = "MIN-MAX")]
    pub bsrange: Option<String>,
    /// How random offsets spread, as fio's random_distribution: random (uniform), zipf:THETA,
    /// pareto:H, normal:DEV%, zoned:ACCESS%/RANGE%:..., zoned_abs:ACCESS%/SIZE:...
    #[arg(long, default_value = "random")]
    pub distribution: String,
    /// Sequential: bytes to move beyond each I/O (fio's rw=read:8k); negative reads backwards
    /// (e.g. -8k with --bs 4k).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub stride: Option<String>,
    /// Random: I/Os per new random offset, the rest following on (fio's rw=randread:8).
    #[arg(long, value_name = "N")]
    pub ios_per_offset: Option<u32>,
    /// Random offsets' alignment, independent of the block size (fio's blockalign).
    #[arg(long, value_name = "SIZE")]
    pub blockalign: Option<String>,
    /// fio's strided zones: SIZE bytes of I/O within each zone of RANGE bytes (default SIZE),
    /// then the next zone, SKIP bytes on (default 0), e.g. 256m/256m/2g.
    #[arg(long, value_name = "SIZE[/RANGE[/SKIP]]")]
    pub zones: Option<String>,
    /// How random offsets are drawn: random (with repeats) or lfsr (each block once per pass).
    #[arg(long, value_enum, default_value = "random")]
    pub random_generator: crate::plan::Generator,
    /// Requests in flight per thread.
    #[arg(long, default_value_t = 1)]
    pub qd: u32,
    /// Threads, each with its own queue and random stream.
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    /// Requests per submission call.
    #[arg(long, default_value_t = 1)]
    pub batch_submit: u32,
    /// Completions to wait for when the queue is full.
    #[arg(long, default_value_t = 1)]
    pub batch_reap: u32,
    /// Measured time (e.g. 10s, 2m); default 10s unless --ios or --bytes is given. With --ios or
    /// --bytes, the run ends at whichever comes first.
    #[arg(long)]
    pub runtime: Option<String>,
    /// Warm-up time excluded from every figure.
    #[arg(long, default_value = "0")]
    pub ramp: String,
    /// Stop after this many measured I/Os (all threads together).
    #[arg(long)]
    pub ios: Option<u64>,
    /// Stop after this many measured bytes (e.g. 1g).
    #[arg(long)]
    pub bytes: Option<String>,
    /// Bytes of each target to use (and the size of the temporary target).
    #[arg(long)]
    pub size: Option<String>,
    /// Where in each target the range starts.
    #[arg(long, default_value = "0")]
    pub offset: String,
    /// Use the page cache (default is O_DIRECT).
    #[arg(long)]
    pub buffered: bool,
    /// CPUs to pin threads to, round-robin (e.g. 0,2 or 0-3).
    #[arg(long)]
    pub cpus: Option<String>,
    /// Pin every thread (and SQPOLL thread) to a NUMA node's CPUs: local (the targets' node), a
    /// node's number, or off.
    #[arg(long, value_name = "local|NODE|off", default_value = "off")]
    pub numa: crate::plan::Numa,
    /// Seed for the offset streams.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Rates and think time (--rate, --rate-iops, --thinktime, ...), fio's pacing.
    #[command(flatten)]
    pub pace: run::PaceArgs,
    /// The interfaces' own options (--sq-cpu, --null-script, --poll-delay, ...), each part's
    /// flags defined in its interface's file.
    #[command(flatten)]
    pub io_options: crate::interfaces::Options,
    /// Write checksummed blocks and check every read (and read back every written block).
    #[arg(long)]
    pub verify: bool,
    /// Count failed I/Os and go on instead of stopping at the first.
    #[arg(long)]
    pub continue_on_error: bool,
    /// Run a polled completion mode even where the queue cannot poll, reporting the fallback.
    #[arg(long)]
    pub allow_fallback: bool,
    /// I/O scheduler for every target's device during the run (none, mq-deadline, kyber, bfq); restored after.
    #[arg(long)]
    pub scheduler: Option<String>,
    /// A system setting for the run, restored after: nomerges=2, read_ahead_kb=0, wbt_lat_usec=0,
    /// io_poll_delay=-1, governor=performance, cpu_freq_khz=2000000 (or MIN-MAX), cpuidle_max_state=1,
    /// nvme_power_state=0, nvme_apst=off (repeatable).
    #[arg(long, value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    /// Fail when polling was asked for but completions were not observed to be polled.
    #[arg(long)]
    pub strict: bool,
    /// Allow writing to this exact block device, destroying its contents (repeatable).
    #[arg(long, value_name = "DEVICE")]
    pub destructive: Vec<String>,
    /// Wait up to DURATION (e.g. 30s, 10m) for a setting another live iolab holds, instead of
    /// failing at once.
    #[arg(long, value_name = "DURATION")]
    pub wait_settings: Option<String>,
    /// Write the full record as JSON to FILE ('-' for stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
    /// No progress display.
    #[arg(short, long)]
    pub quiet: bool,
    #[command(flatten)]
    pub energy: EnergyArgs,
    #[command(flatten)]
    pub profile: crate::plan::profile::ProfileArg,
    /// The file-set workload: make N files in the target directory (a fresh subdirectory,
    /// removed after), their creation measured apart, then open, transfer whole and close each
    /// (docs/server-client.md).
    #[arg(long, value_name = "N")]
    pub fileset: Option<u64>,
    /// With --fileset: the files' sizes, a range drawn in steps of --bs (4k-64k) or a list (4k,16k,64k).
    #[arg(long, value_name = "SIZES", requires = "fileset")]
    pub file_size: Option<String>,
    /// With --fileset: seq or random (default: random for --rw randread/randwrite, else seq).
    #[arg(long, value_name = "seq|random", requires = "fileset")]
    pub file_order: Option<String>,
    /// With --fileset and writes: none, each (every file before its close) or end (once, at the end).
    #[arg(long, value_name = "none|each|end", requires = "fileset")]
    pub fsync: Option<String>,
    /// Run one job of a fio job file (docs/fio.md); targets, --runtime/--ios/--bytes and --size may replace its own.
    #[arg(long, value_name = "JOB.fio")]
    pub fio: Option<PathBuf>,
    /// With --fio: which job of the file.
    #[arg(long, value_name = "NAME", requires = "fio")]
    pub job: Option<String>,
    /// With --fio: drop this fio option (repeatable; `concurrency`: run jobs fio runs together one after another).
    #[arg(long = "fio-ignore", value_name = "OPTION", requires = "fio")]
    pub fio_ignore: Vec<String>,
}

/// Where energy comes from. Credentials for Redfish come from IOLAB_REDFISH_USER and
/// IOLAB_REDFISH_PASSWORD or --redfish-credentials, never the command line.
#[derive(Args, Debug, Clone, Default)]
pub struct EnergyArgs {
    /// Energy sources to use: rapl, perf, ipmi, redfish, nvml, meter, powersensor, netio, generic (repeatable; default: all found).
    #[arg(long = "energy", value_name = "SOURCE")]
    pub energy_sources: Vec<String>,
    /// Refuse to start when no energy source can measure here; fail the run (exit 1) when none measured it.
    #[arg(long)]
    pub require_energy: bool,
    /// Measure idle power for this long first and report the dynamic part too (e.g. 10s).
    #[arg(long, value_name = "DURATION")]
    pub idle_baseline: Option<String>,
    /// In a sweep: measure the idle baseline once (before the first run, before any setting) or per-run (before each run's I/O, after its settings).
    #[arg(long, value_name = "once|per-run")]
    pub idle: Option<String>,
    /// An external power meter's log (HOBOware CSV or timestamp,watts CSV) covering the run: a regular file of at most 256 MiB, read at the run's end.
    #[arg(long, value_name = "FILE")]
    pub meter_log: Option<PathBuf>,
    /// hobo, hobo-dmy or csv (default: detect).
    #[arg(long, value_name = "FORMAT")]
    pub meter_format: Option<String>,
    /// Seconds to add to the meter's timestamps (within a year).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true, value_parser = crate::energy::parse_clock_offset_s)]
    pub meter_offset: f64,
    /// The meter clock's rate error in ppm (positive: it runs fast; within ±1000).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true, value_parser = crate::energy::parse_drift_ppm)]
    pub meter_drift_ppm: f64,
    /// Redfish BMC base URL, e.g. https://bmc.example.org.
    #[arg(long, value_name = "URL")]
    pub redfish_url: Option<String>,
    /// File with the Redfish user name and password.
    #[arg(long, value_name = "FILE")]
    pub redfish_credentials: Option<PathBuf>,
    /// PowerSensor3 serial device between slot and drive (scope ssd), e.g. /dev/ttyACM0.
    #[arg(long, value_name = "DEVICE")]
    pub powersensor: Option<PathBuf>,
    /// The PowerSensor3 sensor pairs (0-3) whose rails feed the drive, e.g. 0,1.
    #[arg(long, value_name = "PAIRS")]
    pub powersensor_rails: Option<String>,
    /// NETIO PDU JSON API URL (scope wall_ac); credentials from IOLAB_NETIO_USER/IOLAB_NETIO_PASSWORD or --netio-credentials.
    #[arg(long, value_name = "URL")]
    pub netio_url: Option<String>,
    /// The NETIO output IDs that feed the server, e.g. 1,2.
    #[arg(long, value_name = "IDS")]
    pub netio_outlets: Option<String>,
    /// File with the NETIO JSON API user and password.
    #[arg(long, value_name = "FILE")]
    pub netio_credentials: Option<PathBuf>,
    /// A command whose stdout prints `<unix_seconds> <watts>` lines (a generic meter).
    #[arg(long, value_name = "CMD")]
    pub energy_command: Option<String>,
    /// Or HOST:PORT of a TCP server sending those lines.
    #[arg(long, value_name = "HOST:PORT")]
    pub energy_socket: Option<String>,
    /// What the generic meter measures: ssd, wall_ac, cpu_package, dram, platform, bmc_system, gpu.
    #[arg(long, value_name = "SCOPE")]
    pub energy_scope: Option<String>,
}

impl EnergyArgs {
    /// The energy options asked; Err (bad input) is one line naming the option.
    pub fn options(&self) -> Result<crate::energy::record::EnergyOptions, EnergyError> {
        let config = crate::energy::EnergyConfig {
            sources: self.energy_sources.clone(),
            meter_log: self.meter_log.clone(),
            meter_format: self.meter_format.clone(),
            meter_offset_s: self.meter_offset,
            meter_drift_ppm: self.meter_drift_ppm,
            redfish: self.redfish_url.as_ref().map(|url| crate::energy::redfish::RedfishConfig {
                url: url.clone(),
                chassis: None,
                username: std::env::var("IOLAB_REDFISH_USER").ok(),
                password: std::env::var("IOLAB_REDFISH_PASSWORD").ok(),
                credentials_file: self.redfish_credentials.clone(),
                timeout: None,
            }),
            ..Default::default()
        };
        let mut config = config;
        crate::energy::SourceArgs {
            powersensor: self.powersensor.clone(),
            powersensor_rails: self.powersensor_rails.clone(),
            netio_url: self.netio_url.clone(),
            netio_outlets: self.netio_outlets.clone(),
            netio_credentials: self.netio_credentials.clone(),
            command: self.energy_command.clone(),
            socket: self.energy_socket.clone(),
            scope: self.energy_scope.clone(),
        }
        .apply(&mut config)?;
        // What can be known about the meter log before the run; it is read at the run's end.
        check_meter_format(self.meter_format.as_deref())?;
        if let Some(why) = self.meter_log.as_deref().and_then(crate::energy::meter_log_problem) {
            return Err(EnergyError::Invalid(format!("--meter-log {why}")));
        }
        let idle_baseline_s = self
            .idle_baseline
            .as_deref()
            .map(size::parse_seconds)
            .transpose()
            .map_err(|e| EnergyError::Invalid(format!("--idle-baseline: {e}")))?;
        if let Some(s) = idle_baseline_s {
            crate::plan::validate::check_duration("--idle-baseline", s).map_err(|e| EnergyError::Invalid(e.to_string()))?;
        }
        let idle_when = self.idle.as_deref().map(str::parse).transpose().map_err(|e: String| EnergyError::Invalid(e))?;
        Ok(crate::energy::record::EnergyOptions { config, require: self.require_energy, idle_baseline_s, idle_when })
    }
}

fn parse_cpus(text: &str) -> Result<Vec<usize>, PlanError> {
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let bad = || PlanError::Value(format!("--cpus '{text}' is not a CPU list: use e.g. 0,2 or 0-3"));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                // Checked before expanding (`0-99999999999` filled memory): an affinity mask
                // (cpu_set_t, as `pin_to_cpu` uses) holds CPU_SETSIZE CPUs.
                if b >= libc::CPU_SETSIZE as usize {
                    return Err(PlanError::Value(format!(
                        "--cpus '{text}': CPU {b} does not exist: Linux numbers CPUs below {}",
                        libc::CPU_SETSIZE
                    )));
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(PlanError::Value(format!("--cpus '{text}' names no CPU")));
    }
    Ok(out)
}

impl RunArgs {
    /// The job these arguments describe; Err is one line for the user. Every field comes from
    /// its flag, so all are named here; the flags' defaults are `Job::default()` (test `defaults`).
    pub fn to_job(&self) -> Result<Job, PlanError> {
        let seconds =
            self.runtime.as_deref().map(size::parse_seconds).transpose().map_err(|e| PlanError::Job(format!("--runtime: {e}")))?;
        let bytes = self.bytes.as_deref().map(size::parse_size).transpose().map_err(|e| PlanError::Job(format!("--bytes: {e}")))?;
        let budget = Budget::of(seconds, self.ios, bytes).ok_or_else(|| {
            PlanError::Job("give only one of --ios and --bytes (each with --runtime ends the run at whichever comes first)".into())
        })?;
        if self.write_mix.is_some() && !self.rw.mixed() {
            return Err(PlanError::Job("--write-mix applies only to --rw randrw and rw".into()));
        }
        let bssplit: crate::plan::BsMix = match (&self.bssplit, &self.bsrange) {
            (Some(m), _) => m.parse().map_err(|e| PlanError::Job(format!("--bssplit: {e}")))?,
            (None, Some(r)) if !r.contains('/') => r.parse().map_err(|e| PlanError::Job(format!("--bsrange: {e}")))?,
            (None, Some(r)) => return Err(PlanError::Job(format!("--bsrange '{r}' is not a range: give MIN-MAX (e.g. 4k-64k)"))),
            (None, None) => crate::plan::BsMix::One,
        };
        let mut bs = size::parse_size(&self.bs).map_err(|e| PlanError::Job(format!("--bs: {e}")))?;
        if let Some((_, largest)) = bssplit.bounds() {
            if self.bs != "4k" {
                return Err(PlanError::Job(
                    "give --bs or a block size mix (--bssplit, --bsrange), not both: a mix's block size is its largest".into(),
                ));
            }
            bs = largest;
        }
        let (rw, fileset) = self.fileset()?;
        Ok(Job {
            fileset,
            io: IoChoice {
                interface: self.interface.parse::<crate::interfaces::InterfaceKind>().map_err(|e| PlanError::Job(e.to_string()))?,
                submit: self.submit,
                complete: self.complete,
                direct: !self.buffered,
                options: self.io_options.clone(),
            },
            workload: Workload {
                rw,
                write_mix: self.write_mix.unwrap_or(50),
                bs,
                bssplit,
                distribution: self.distribution.parse().map_err(|e| PlanError::Job(format!("--distribution: {e}")))?,
                pattern: crate::plan::Pattern {
                    stride: self
                        .stride
                        .as_deref()
                        .map(crate::plan::mix::parse_signed_size)
                        .transpose()
                        .map_err(|e| PlanError::Job(format!("--stride: {e}")))?
                        .unwrap_or(0),
                    ios_per_offset: self.ios_per_offset.unwrap_or(0),
                    blockalign: self
                        .blockalign
                        .as_deref()
                        .map(size::parse_size)
                        .transpose()
                        .map_err(|e| PlanError::Job(format!("--blockalign: {e}")))?
                        .unwrap_or(0),
                    zones: self.zones.as_deref().map(str::parse).transpose().map_err(|e| PlanError::Job(format!("--zones: {e}")))?,
                    random_generator: self.random_generator,
                    pace: self.pace.to_pace().map_err(|e| PlanError::Job(e.to_string()))?,
                },
                qd: self.qd,
                threads: self.threads,
                batch_submit: self.batch_submit,
                batch_reap: self.batch_reap,
                cpus: self.cpus.as_deref().map(parse_cpus).transpose()?.unwrap_or_default(),
                numa: self.numa,
                seed: self.seed,
            },
            timing: Timing { ramp_s: size::parse_seconds(&self.ramp).map_err(|e| PlanError::Job(format!("--ramp: {e}")))?, budget },
            targets: Targets {
                paths: self.targets.iter().map(|p| p.display().to_string()).collect(),
                size: self.size.as_deref().map(size::parse_size).transpose().map_err(|e| PlanError::Job(format!("--size: {e}")))?,
                offset: size::parse_size(&self.offset).map_err(|e| PlanError::Job(format!("--offset: {e}")))?,
                destructive: self.destructive.clone(),
            },
            policy: Policy {
                verify: self.verify,
                continue_on_error: self.continue_on_error,
                allow_fallback: self.allow_fallback,
                strict: self.strict,
                verify_fio: None,
            },
            system: Requested {
                scheduler: self.scheduler.clone(),
                set: self.set.clone(),
                setup: Vec::new(),
                wait_settings_s: self.wait_settings.as_deref().map(wait_settings).transpose()?,
            },
        })
    }
}

impl RunArgs {
    /// `--fileset` and its options as the job's file-set part, and the job's `rw`: with a set,
    /// read or write, the order taken from `--file-order` or else from `--rw`'s rand prefix.
    fn fileset(&self) -> Result<(Rw, Option<crate::plan::fileset::FileSet>), PlanError> {
        use crate::plan::fileset::{FileOrder, FileSet, Fsync};
        let Some(files) = self.fileset else { return Ok((self.rw, None)) };
        let rw = match self.rw {
            Rw::Read | Rw::Randread => Rw::Read,
            Rw::Write | Rw::Randwrite => Rw::Write,
            Rw::Randrw | Rw::ReadWrite => {
                return Err(PlanError::Job(format!(
                    "--rw {} with --fileset: a file set is read or written whole: use --rw read or write",
                    self.rw.name()
                )))
            }
        };
        let order = match self.file_order.as_deref() {
            None if self.rw.is_random() => FileOrder::Random,
            None => FileOrder::Seq,
            Some(o) => *FileOrder::ALL
                .iter()
                .find(|x| x.name() == o)
                .ok_or_else(|| PlanError::Job(format!("--file-order '{o}': use seq or random")))?,
        };
        let fsync = match self.fsync.as_deref() {
            None => Fsync::None,
            Some(f) => {
                *Fsync::ALL.iter().find(|x| x.name() == f).ok_or_else(|| PlanError::Job(format!("--fsync '{f}': use none, each or end")))?
            }
        };
        let file_size = self
            .file_size
            .as_deref()
            .unwrap_or("4k-64k")
            .parse::<crate::plan::fileset::FileSizes>()
            .map_err(|e| PlanError::Job(e.to_string()))?;
        Ok((rw, Some(FileSet { files, file_size, file_order: order, fsync, server: None })))
    }
}

/// `--wait-settings` of sweeps and suites when not given: longer than a study's run, so a sweep
/// waits out another iolab's run on the same setting (`iolab run` waits only when asked).
pub const WAIT_SETTINGS: &str = "10m";

/// `--wait-settings DURATION`, whole seconds (0: fail at once).
pub(crate) fn wait_settings(text: &str) -> Result<u64, PlanError> {
    match size::parse_seconds(text) {
        Ok(s) if s.is_finite() && (0.0..=86_400.0 * 7.0).contains(&s) => Ok(s.ceil() as u64),
        Ok(_) => Err(PlanError::Value(format!("--wait-settings: '{text}' is out of range (0 to 7 days)"))),
        Err(e) => Err(PlanError::Value(format!("--wait-settings: {e}"))),
    }
}

/// `--meter-format`: one of the formats the meter log parser knows.
pub(crate) fn check_meter_format(format: Option<&str>) -> Result<(), EnergyError> {
    match format.filter(|f| !crate::energy::meterlog::FORMATS.contains(f) && *f != "hoboware") {
        Some(f) => Err(EnergyError::Invalid(format!(
            "--meter-format {f:?} is not a meter log format: use one of {}",
            crate::energy::meterlog::FORMATS.join(", ")
        ))),
        None => Ok(()),
    }
}

/// A command's exit code: its own, or its error as one line on stderr and the code of the
/// error's kind (`FailureKind::code`: 2 bad input, 3 the results database, 4 Slurm, ...). Every
/// command's error is typed (`Failure`, or a layer's error with its kind): a bare message has no
/// exit code.
pub(crate) fn exit_code<E: Into<crate::failure::Failure>>(r: Result<i32, E>) -> i32 {
    match r {
        Ok(code) => code,
        Err(e) => {
            let f = e.into();
            // A message that quotes a database's URL or conninfo never shows its password.
            eprintln!("iolab: {}", crate::secret::redact(&f.message));
            f.code()
        }
    }
}

/// clap's multi-line error as one line (help and version pass through untouched).
pub fn one_line_error(e: &clap::Error) -> String {
    let text = e.to_string();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .collect();
    // clap quotes the arguments it refuses: a misplaced URL keeps its password hidden.
    crate::secret::redact(&format!("{} (see iolab --help)", lines.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Job, String> {
        let mut v = vec!["iolab", "run"];
        v.extend_from_slice(args);
        match Cli::try_parse_from(v) {
            Ok(Cli { cmd: Cmd::Run(a) }) => a.to_job().map_err(|e| e.to_string()),
            Ok(_) => unreachable!(),
            Err(e) => Err(one_line_error(&e)),
        }
    }

    #[test]
    fn defaults() {
        let j = parse(&[]).unwrap();
        assert_eq!(j.io.interface, crate::interfaces::InterfaceKind::Psync);
        assert_eq!(j.workload.bs, 4096);
        assert_eq!(j.workload.qd, 1);
        assert!(j.io.direct);
        assert_eq!(j.timing.budget, Budget::Seconds(10.0));
        assert!(j.io.options.ring.register_buffers && j.io.options.ring.register_files);
        let json = |j: &Job| serde_json::to_string(j).unwrap();
        assert_eq!(json(&j), json(&Job::default()), "Job::default() is iolab run's defaults");
    }

    #[test]
    fn the_help_lists_every_interface_of_the_table() {
        use clap::CommandFactory;
        let mut cli = Cli::command();
        let help = cli.find_subcommand_mut("run").expect("run").render_help().to_string();
        let line = "I/O interface: psync, pvsync2, posixaio, libaio, io_uring, nvme-passthru, vfio-nvme (iolab's own user-space NVMe driver), null (no I/O: iolab's own cost).";
        assert!(help.split_whitespace().collect::<Vec<_>>().join(" ").contains(line), "{help}");
        for i in crate::interfaces::all() {
            assert!(help.contains(i.name), "{} is missing from: {help}", i.name);
        }
    }

    #[test]
    fn full_job() {
        let j = parse(&[
            "-i",
            "io_uring",
            "--submit",
            "sqpoll",
            "--complete",
            "poll",
            "--rw",
            "randrw",
            "--write-mix",
            "30",
            "--bs",
            "128k",
            "--qd",
            "32",
            "--threads",
            "2",
            "--runtime",
            "2m",
            "--ramp",
            "500ms",
            "--cpus",
            "0-1",
            "--register-buffers",
            "false",
            "--size",
            "1g",
            "/dev/null",
        ])
        .unwrap();
        assert_eq!(j.io.submit, Submit::Sqpoll);
        assert_eq!(j.io.complete, Complete::Poll);
        assert_eq!(j.workload.write_mix, 30);
        assert_eq!(j.workload.bs, 131072);
        assert_eq!(j.timing.budget, Budget::Seconds(120.0));
        assert_eq!(j.timing.ramp_s, 0.5);
        assert_eq!(j.workload.cpus, vec![0, 1]);
        assert!(!j.io.options.ring.register_buffers);
        assert_eq!(j.targets.size, Some(1 << 30));
        assert_eq!(j.targets.paths, vec!["/dev/null"]);
    }

    #[test]
    fn count_budgets() {
        assert_eq!(parse(&["--ios", "1000"]).unwrap().timing.budget, Budget::Ios(1000));
        assert_eq!(parse(&["--bytes", "1m"]).unwrap().timing.budget, Budget::Bytes(1 << 20));
        assert!(parse(&["--ios", "10", "--bytes", "1m"]).unwrap_err().contains("only one of --ios and --bytes"));
    }

    /// A time with a count: the run ends at whichever comes first.
    #[test]
    fn a_time_with_a_count_is_whichever_comes_first() {
        let b = |args: &[&str]| parse(args).unwrap().timing.budget;
        assert_eq!(b(&["--runtime", "60s", "--bytes", "1g"]), Budget::SecondsOrBytes { seconds: 60.0, bytes: 1 << 30 });
        assert_eq!(b(&["--ios", "10", "--runtime", "1s"]), Budget::SecondsOrIos { seconds: 1.0, ios: 10 });
    }

    #[test]
    fn bad_input_is_one_line() {
        for args in [&["--frobnicate"][..], &["--rw", "sideways"], &["--bs", "4q"], &["--cpus", "x"], &["--write-mix", "10"]] {
            let e = parse(args).unwrap_err();
            assert!(!e.contains('\n'), "multi-line error: {e}");
            assert!(!e.is_empty());
        }
        assert!(parse(&["--rw", "sideways"]).unwrap_err().contains("possible values"));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("0,2,4-5").unwrap(), vec![0, 2, 4, 5]);
        assert!(parse_cpus("3-1").is_err());
        assert!(parse_cpus("").is_err());
        assert!(parse_cpus("0-99999999999").unwrap_err().to_string().contains("does not exist"));
    }
}
