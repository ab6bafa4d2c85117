//! What a report is made of, read from the results database: the selected runs grouped by
//! sweep and, within a sweep, by configuration (its replicates), with each run's full record.
use crate::analysis::compare::{Metric, ENERGY_SCOPES};
use crate::analysis::stats::{self, Summary};
use crate::failure::Failure;
use crate::plan::matrix::{dimension, read_key, KeyValue, TARGET_SET};
use crate::record::read::{Counters, EnergySource, Record};
use crate::store::{Machine, RunFilter, RunRow, Store};

/// One stored run and its record, read once when loaded.
pub struct Run {
    pub row: RunRow,
    pub record: Record,
}

/// The replicates of one configuration.
pub struct Config {
    pub key: String,
    /// The key read once (`plan::matrix::read_key`): each dimension it names with its value.
    pub dims: Vec<(usize, KeyValue)>,
    pub runs: Vec<Run>,
    /// The machine (host, kernel or device) its runs were made on, when the section overlays
    /// several ([`overlay_machines`]); None otherwise.
    pub machine: Option<String>,
}

/// The selected runs of one sweep (or the lone runs, `id` None).
pub struct SweepRuns {
    pub id: Option<i64>,
    /// Sweeps of the same name joined into this one ([`join`]): a study part made on other
    /// machines of a merged database.
    pub joined: Vec<i64>,
    pub name: String,
    pub configs: Vec<Config>,
    /// Planned runs the machine could not do: (config key, reason).
    pub skipped: Vec<(String, String)>,
    /// Runs selected but not `ok` (failed, interrupted): left out of every figure, counted here.
    pub not_ok: usize,
}

/// Read the runs a filter selects, grouped by sweep then configuration, sweeps in id order
/// (lone runs last) and configurations in order of their first run.
pub fn load(store: &Store, filter: &RunFilter) -> Result<Vec<SweepRuns>, Failure> {
    let rows = store.list_runs(filter)?;
    let mut out: Vec<SweepRuns> = Vec::new();
    for row in rows {
        let idx = match out.iter().position(|s| s.id == row.sweep_id) {
            Some(i) => i,
            None => {
                let (name, skipped) = match row.sweep_id {
                    Some(id) => (store.sweep(id)?.map(|s| s.name).unwrap_or_else(|| format!("sweep {id}")), skipped_runs(store, id)?),
                    None => ("lone runs".to_string(), Vec::new()),
                };
                out.push(SweepRuns { id: row.sweep_id, joined: Vec::new(), name, configs: Vec::new(), skipped, not_ok: 0 });
                out.len() - 1
            }
        };
        let sweep = &mut out[idx];
        if row.status != "ok" {
            sweep.not_ok += 1;
            continue;
        }
        let raw = store.run_record(row.id)?;
        let record = raw.as_ref().map(Record::of).unwrap_or_default();
        // A lone run's key from its spec (block size mixes, distributions and file sets apart),
        // or from its columns where the spec cannot be read as a job.
        let spec = raw.as_ref().and_then(|v| v.get("spec")).and_then(|s| crate::plan::Job::from_spec(s).ok());
        let key = row.config_key.clone().unwrap_or_else(|| spec.as_ref().map_or_else(|| lone_key(&row), crate::plan::matrix::lone_key));
        match sweep.configs.iter_mut().find(|c| c.key == key) {
            Some(c) => c.runs.push(Run { row, record }),
            None => sweep.configs.push(Config { dims: read_key(&key), key, runs: vec![Run { row, record }], machine: None }),
        }
    }
    out.sort_by_key(|s| s.id.unwrap_or(i64::MAX));
    Ok(out)
}

/// One sweep's selected runs; a sweep none of whose runs is selected still comes back (empty),
/// so that what it could not run is reported.
pub fn load_sweep(store: &Store, sweep: i64, filter: &RunFilter) -> Result<SweepRuns, Failure> {
    let mut groups = load(store, &RunFilter { sweep: Some(sweep), ..filter.clone() })?;
    if let Some(g) = groups.pop() {
        return Ok(g);
    }
    let info = store
        .sweep(sweep)?
        .ok_or_else(|| Failure::invalid(format!("{} has no sweep {sweep} (see iolab results --sweeps)", store.path())))?;
    Ok(SweepRuns {
        id: Some(sweep),
        joined: Vec::new(),
        name: info.name,
        configs: Vec::new(),
        skipped: skipped_runs(store, sweep)?,
        not_ok: 0,
    })
}

/// The newest sweep named `name` of each machine (`by`) with runs in it, as one section
/// ([`join`]): in a merged database each machine made its own sweep of a study part. A machine's
/// runs come from its newest sweep only. None when no sweep of that name has a finished or
/// skipped run; when none has a selected run, the newest (its skipped runs say why).
pub(crate) fn newest_per_machine(store: &Store, name: &str, filter: &RunFilter, by: Machine) -> Result<Option<SweepRuns>, Failure> {
    let mut ids: Vec<i64> = store.sweep_infos()?.into_iter().filter(|s| s.name == name && s.done + s.skipped > 0).map(|s| s.id).collect();
    ids.sort_by_key(|id| std::cmp::Reverse(*id));
    let label = |r: &Run| by.of(&r.row).unwrap_or_else(|| "unknown".into());
    let mut covered: Vec<String> = Vec::new();
    let mut chosen: Vec<SweepRuns> = Vec::new();
    let mut newest: Option<SweepRuns> = None;
    for id in ids {
        let mut sweep = load_sweep(store, id, filter)?;
        let mut new: Vec<String> = sweep.configs.iter().flat_map(|c| c.runs.iter().map(label)).filter(|m| !covered.contains(m)).collect();
        new.sort();
        new.dedup();
        if new.is_empty() {
            if newest.is_none() && chosen.is_empty() {
                newest = Some(sweep);
            }
            continue;
        }
        for c in &mut sweep.configs {
            c.runs.retain(|r| new.contains(&label(r)));
        }
        sweep.configs.retain(|c| !c.runs.is_empty());
        covered.extend(new);
        chosen.push(sweep);
    }
    Ok(join(chosen).or(newest))
}

/// Sweeps of one study part made on several machines as one section: the first's id, the
/// others joined, each configuration's runs together ([`overlay_machines`] tells them apart).
pub fn join(mut sweeps: Vec<SweepRuns>) -> Option<SweepRuns> {
    sweeps.sort_by_key(|s| s.id);
    let mut it = sweeps.into_iter();
    let mut out = it.next()?;
    for s in it {
        out.joined.extend(s.id);
        out.skipped.extend(s.skipped);
        out.not_ok += s.not_ok;
        for c in s.configs {
            match out.configs.iter_mut().find(|o| o.key == c.key) {
                Some(o) => o.runs.extend(c.runs),
                None => out.configs.push(c),
            }
        }
    }
    Some(out)
}

/// Split each configuration by the machine its runs were made on (`by`: host, kernel or
/// device) when some configuration was measured on more than one, so that every figure draws
/// one series per machine; the machines overlaid, sorted (none: nothing is split). Where each
/// configuration was made on one machine only (a plan's shares on a cluster's nodes, runs made
/// elsewhere stored into a sweep), nothing compares machines: the configurations stay whole and
/// their provenance names the machines.
pub(crate) fn overlay_machines(sweep: &mut SweepRuns, by: Machine) -> Vec<String> {
    let label = |r: &Run| by.of(&r.row).unwrap_or_else(|| "unknown".into());
    let compared = sweep.configs.iter().any(|c| c.runs.iter().any(|r| label(r) != label(&c.runs[0])));
    if !compared {
        return Vec::new();
    }
    let mut machines: Vec<String> = sweep.configs.iter().flat_map(|c| c.runs.iter().map(label)).collect();
    machines.sort();
    machines.dedup();
    let mut split: Vec<Config> = Vec::new();
    for c in std::mem::take(&mut sweep.configs) {
        let mut parts: Vec<Config> = Vec::new();
        for r in c.runs {
            let m = label(&r);
            match parts.iter_mut().find(|p| p.machine.as_deref() == Some(m.as_str())) {
                Some(p) => p.runs.push(r),
                None => parts.push(Config { key: c.key.clone(), dims: c.dims.clone(), runs: vec![r], machine: Some(m) }),
            }
        }
        parts.sort_by(|a, b| a.machine.cmp(&b.machine));
        split.extend(parts);
    }
    sweep.configs = split;
    machines
}

fn skipped_runs(store: &Store, sweep: i64) -> Result<Vec<(String, String)>, crate::store::StoreError> {
    Ok(store
        .planned_runs(sweep)?
        .into_iter()
        .filter(|p| p.status == "skipped")
        .map(|p| (p.config_key, p.reason.unwrap_or_default()))
        .collect())
}

/// Lone runs have no config key; runs with the same spec columns are replicates of each other.
fn lone_key(r: &RunRow) -> String {
    format!(
        "interface={},submit={},complete={},rw={},bs={},qd={},threads={}",
        r.interface, r.submit, r.complete, r.rw, r.bs, r.qd, r.threads
    )
}

impl Run {
    pub fn scheduler(&self) -> String {
        self.record.spec.scheduler.clone().unwrap_or("unchanged".into())
    }

    /// Where the threads ran by NUMA node: "node-local" or "unrestricted".
    pub fn numa(&self) -> &'static str {
        if self.record.spec.numa.is_some() {
            "node-local"
        } else {
            "unrestricted"
        }
    }

    pub fn fell_back(&self) -> bool {
        self.row.metrics.fell_back == Some(true)
    }

    /// The energy source used for this run's figures: the first scope of [`ENERGY_SCOPES`] with
    /// a source that covered the window (it has `iops_per_joule`); the same choice as
    /// `Metric::JoulesPerIo`.
    fn energy_source(&self) -> Option<&EnergySource> {
        let sources = self.record.energy.as_ref()?.sources.as_ref()?;
        ENERGY_SCOPES.iter().find_map(|scope| sources.iter().find(|s| s.scope.as_deref() == Some(scope) && s.iops_per_joule.is_some()))
    }

    pub fn watts(&self) -> Option<f64> {
        self.energy_source()?.mean_watts
    }

    /// The scope of this run's energy figures (`ENERGY_SCOPES`' first with a covered source).
    pub(crate) fn energy_scope(&self) -> Option<&'static str> {
        crate::analysis::compare::joules_per_io_with_scope(&self.record).map(|(_, scope)| scope)
    }

    pub fn iops_per_joule(&self) -> Option<f64> {
        Metric::JoulesPerIo.of_record(&self.record).filter(|j| *j > 0.0).map(|j| 1.0 / j)
    }

    pub fn bytes_per_joule(&self) -> Option<f64> {
        self.iops_per_joule().map(|x| x * self.row.bs as f64)
    }

    /// Why the record has no energy figure (the energy layer's reasons), when it has none.
    pub(crate) fn energy_missing_reason(&self) -> Option<String> {
        if self.iops_per_joule().is_some() {
            return None;
        }
        let Some(e) = &self.record.energy else {
            return Some("the record has no energy report (recorded by an iolab without energy measurement)".into());
        };
        Some(if e.reasons.is_empty() { "no energy source covered enough of the measured window".into() } else { e.reasons.join("; ") })
    }

    /// A perf counter figure of the record, when it has counters.
    pub fn counter(&self, f: impl Fn(&Counters) -> Option<f64>) -> Option<f64> {
        self.record.cost.counters.as_ref().and_then(f)
    }

    /// Why hardware counters are missing, when they are.
    pub(crate) fn counters_missing_reason(&self) -> Option<String> {
        match &self.record.cost.counters {
            None => Some("the record has no perf counters".into()),
            Some(c) => c.hardware_unavailable.clone(),
        }
    }

    /// Context switches of iolab's worker threads per I/O.
    pub fn ctx_switches_per_io(&self) -> Option<f64> {
        self.record.cost.class("workload")?.ctx_switches_per_io
    }
}

/// A target as a legend says it: each device by its name, a set joined by '+'
/// (`/dev/nvme0n1+/dev/nvme1n1` is `nvme0n1+nvme1n1`).
pub(crate) fn devices_said(target: &str) -> String {
    target
        .split(TARGET_SET)
        .map(|p| std::path::Path::new(p).file_name().map_or(p.to_string(), |n| n.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(&TARGET_SET.to_string())
}

/// How a configuration of the user-space driver is named (`Config::method`).
pub const USER_SPACE_METHOD: &str = "iolab user-space driver (SPDK class)";

impl Config {
    pub fn first(&self) -> &RunRow {
        &self.runs[0].row
    }

    /// A measured value of every replicate that has it.
    pub fn values(&self, f: &dyn Fn(&Run) -> Option<f64>) -> Vec<f64> {
        self.runs.iter().filter_map(f).filter(|x| x.is_finite()).collect()
    }

    pub fn summary(&self, f: &dyn Fn(&Run) -> Option<f64>) -> Option<Summary> {
        stats::summarize(&self.values(f))
    }

    /// The value its key gives a dimension (an index in `plan::matrix::DIMENSIONS`).
    pub(crate) fn dim(&self, dimension: usize) -> Option<&KeyValue> {
        self.dims.iter().find(|(i, _)| *i == dimension).map(|(_, v)| v)
    }

    /// The target its key gives (one, or a set joined by '+'), when its sweep swept targets.
    pub fn target(&self) -> Option<&str> {
        match self.dim(dimension("target").expect("target is a dimension"))? {
            KeyValue::Text(t) => Some(t),
            KeyValue::Number(_) => None,
        }
    }

    /// What tells this configuration apart from others of its study's same series: the devices
    /// of its target (when its sweep swept targets) and its machine (when the section overlays
    /// machines), e.g. `nvme0n1 · node-b`; None when neither.
    pub fn overlay(&self) -> Option<String> {
        let parts: Vec<String> = self.target().map(devices_said).into_iter().chain(self.machine.clone()).collect();
        (!parts.is_empty()).then(|| parts.join(" · "))
    }

    /// The design point and, where devices or machines are overlaid, which: a table's row.
    pub fn labelled(&self) -> String {
        self.series(&self.method())
    }

    /// `name` followed by the overlay, as a series is named in a figure that overlays devices
    /// or machines.
    pub fn series(&self, name: &str) -> String {
        match self.overlay() {
            Some(o) => format!("{name} · {o}"),
            None => name.to_string(),
        }
    }

    pub(crate) fn any_fell_back(&self) -> bool {
        self.runs.iter().any(Run::fell_back)
    }

    /// Interface, submission and completion: the design point, e.g. `io_uring sqpoll poll`.
    pub fn method(&self) -> String {
        let r = self.first();
        if crate::interfaces::user_space(&r.interface) {
            // Where the papers had SPDK.
            return USER_SPACE_METHOD.into();
        }
        let mut s = r.interface.clone();
        if r.submit != "syscall" {
            s += &format!(" {}", r.submit);
        }
        s + &format!(" {}", r.complete)
    }
}
