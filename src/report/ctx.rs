//! What one sweep's section is built with (`Ctx`: the study part's panels, the profile panels
//! and the dimension figures add to it) and what a section holds: figures, tables and notes, each
//! with the provenance of its runs. A leaf under `sections`, `panels`, `dimensions` and
//! `profiles`, so that they build on it without importing each other in a circle.
use super::data::{Config, Run, SweepRuns};
use super::svg;
use super::tables::Table;
use crate::store::RunRow;
use std::collections::BTreeMap;

pub struct Figure {
    pub id: String,
    pub title: String,
    pub svg: String,
    pub notes: Vec<String>,
    pub provenance: String,
}

pub struct TableItem {
    pub id: String,
    pub table: Table,
    pub provenance: String,
}

pub enum Item {
    Figure(Figure),
    Table(TableItem),
    Note(String),
}

pub struct Section {
    pub id: String,
    pub title: String,
    pub about: String,
    pub items: Vec<Item>,
}

/// What one sweep's section is built with: the study part's panels add to it.
pub struct Ctx<'a> {
    sweep: &'a SweepRuns,
    prefix: String,
    items: Vec<Item>,
    /// (a drawn-for-any-sweep panel's title, the paper's figure it stands for in this part).
    cites: Vec<(&'static str, &'static str)>,
}

pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

impl<'a> Ctx<'a> {
    pub(super) fn new(sweep: &'a SweepRuns, prefix: String) -> Self {
        Ctx { sweep, prefix, items: Vec::new(), cites: Vec::new() }
    }

    pub(super) fn into_items(self) -> Vec<Item> {
        self.items
    }

    pub(super) fn sweep(&self) -> &'a SweepRuns {
        self.sweep
    }

    fn id(&self, title: &str) -> String {
        let base = format!("{}-{}", self.prefix, slug(title));
        let taken =
            |id: &str| self.items.iter().any(|i| matches!(i, Item::Figure(f) if f.id == id) || matches!(i, Item::Table(t) if t.id == id));
        let mut id = base.clone();
        let mut n = 2;
        while taken(&id) {
            id = format!("{base}-{n}");
            n += 1;
        }
        id
    }

    pub fn figure(&mut self, title: &str, svg: String, runs: &[&Run], mut notes: Vec<String>) {
        let fell_back = runs.iter().filter(|r| r.fell_back()).count();
        if fell_back > 0 {
            notes.push(format!("Polling was asked for but completions came by interrupt in {fell_back} of these runs (hollow marks): those points measure the interrupt path."));
        }
        let id = self.id(title);
        self.items.push(Item::Figure(Figure { id, title: title.to_string(), svg, notes, provenance: provenance(runs) }));
    }

    pub fn unavailable(&mut self, title: &str, reason: &str, runs: &[&Run]) {
        let (svg, fits) = svg::unavailable(title, reason);
        let notes = if fits { Vec::new() } else { vec![format!("Not available here: {reason}")] };
        self.figure(title, svg, runs, notes);
    }

    pub fn table(&mut self, table: Table, runs: &[&Run]) {
        let id = self.id(&table.title);
        self.items.push(Item::Table(TableItem { id, table, provenance: provenance(runs) }));
    }

    pub fn note(&mut self, s: impl Into<String>) {
        self.items.push(Item::Note(s.into()));
    }

    /// Say which of its paper's figures a panel drawn for any sweep (`profiles`) stands for in
    /// this part, e.g. ("CPU time per I/O by layer of the stack", "CHEOPS'23 Fig 4"): the title
    /// then names it. Only the part that carries a panel cites its paper.
    pub fn cite(&mut self, panel: &'static str, figure: &'static str) {
        self.cites.push((panel, figure));
    }

    /// A panel's title with the figure the part said it stands for, if any.
    pub(crate) fn cited(&self, panel: &str) -> String {
        match self.cites.iter().find(|(p, _)| *p == panel) {
            Some((_, f)) => format!("{panel} ({f})"),
            None => panel.to_string(),
        }
    }

    /// The sweep's stored name (a study part's name): what a part's own titles are made from.
    pub fn name(&self) -> &'a str {
        &self.sweep.name
    }

    pub fn all_runs(&self) -> Vec<&'a Run> {
        self.sweep.configs.iter().flat_map(|c| c.runs.iter()).collect()
    }

    /// The sweep's planned runs this machine could not do: (configuration key, reason).
    pub fn skipped(&self) -> &'a [(String, String)] {
        &self.sweep.skipped
    }

    pub fn configs(&self, keep: impl Fn(&RunRow) -> bool) -> Vec<&'a Config> {
        self.sweep.configs.iter().filter(|c| keep(c.first())).collect()
    }
}

/// Machine, kernel, device, iolab version, run ids, replicate count and the completion path
/// actually taken, for the runs behind one figure or table.
pub fn provenance(runs: &[&Run]) -> String {
    fn join(mut v: Vec<String>) -> String {
        v.sort();
        v.dedup();
        if v.is_empty() {
            "unknown".into()
        } else {
            v.join(", ")
        }
    }
    let machine = join(
        runs.iter()
            .map(|r| {
                let host = r.row.hostname.clone().unwrap_or("?".into());
                let env = &r.record.environment;
                let cpu = env.cpu_model.clone().unwrap_or("unknown CPU".into());
                let n = env.cpu_count.map(|n| format!(", {n} CPUs")).unwrap_or_default();
                format!("{host} ({cpu}{n})")
            })
            .collect(),
    );
    let kernel = join(runs.iter().filter_map(|r| r.row.kernel.clone()).collect());
    let device = join(
        runs.iter()
            .map(|r| {
                let dev = r.row.devices.clone().unwrap_or("no device".into());
                let first = r.record.environment.targets.first();
                let model = first.and_then(|t| t.model.as_ref()).map(|m| format!(" {m}")).unwrap_or_default();
                let kind = first.and_then(|t| t.kind.as_ref()).map(|k| format!(" ({k})")).unwrap_or_default();
                format!("{dev}{model}{kind}")
            })
            .collect(),
    );
    let version = join(runs.iter().filter_map(|r| r.row.iolab_version.clone()).collect());
    let mut ids: Vec<i64> = runs.iter().map(|r| r.row.id).collect();
    ids.sort();
    ids.dedup();
    let mut per_config: BTreeMap<&str, usize> = BTreeMap::new();
    for r in runs {
        *per_config.entry(r.row.config_key.as_deref().unwrap_or("")).or_default() += 1;
    }
    let (lo, hi) = (per_config.values().min().copied().unwrap_or(0), per_config.values().max().copied().unwrap_or(0));
    let replicates = if lo == hi { format!("{lo}") } else { format!("{lo}–{hi}") };
    let mut paths: BTreeMap<String, usize> = BTreeMap::new();
    for r in runs {
        let req = r.record.completion_path.requested.clone().unwrap_or(r.row.complete.clone());
        let obs = r.row.metrics.completion_observed.clone().unwrap_or("not observed".into());
        let fb = if r.fell_back() { ", fell back" } else { "" };
        *paths.entry(format!("{req} → {obs}{fb}")).or_default() += 1;
    }
    let paths: Vec<String> = paths.into_iter().map(|(k, n)| format!("{k} ×{n}")).collect();
    format!("machine {machine} · kernel {kernel} · device {device} · iolab {version} · runs {} · replicates {replicates} per configuration · completion path (asked → taken) {}",
        id_ranges(&ids), paths.join("; "))
}

/// 1,2,3,5 → "1–3, 5".
pub(super) fn id_ranges(ids: &[i64]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}–{}", ids[i], ids[j]) } else { ids[i].to_string() });
        i = j + 1;
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(", ")
    }
}
