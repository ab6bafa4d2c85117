//! A report's sections: one per selected sweep, built from its stored runs. What a section holds
//! beyond its notes and its configurations table comes from the caller: a sweep that is a study
//! part (src/studies/) gets that part's panels, any other sweep the configurations table only.
//! What the machine could not measure stays in place as a "not available here" panel or note
//! with the reason. Rules: docs/report.md.
use super::data::{Config, Run, SweepRuns};
use super::dimensions;
use super::panels::{cell, cores, iops, lat_mean_us, num, paths_taken, us};
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
    pub fn cited(&self, panel: &str) -> String {
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
fn id_ranges(ids: &[i64]) -> String {
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

/// What the caller knows of a sweep that is a study part, found by the sweep's stored name.
pub struct Part<'p> {
    /// Which of the paper's tables and figures the part feeds (the section's introduction).
    pub feeds: &'p str,
    /// What iolab cannot run of it, with the reason (a note at the top).
    pub unsupported: &'p [(&'p str, &'p str)],
    /// The part's own tables and figures, before the configurations table; None: that table only.
    pub panels: Option<fn(&mut Ctx)>,
}

/// Build the sections for the selected sweeps; `part` says which sweep names are study parts.
/// Every figure's and table's id is unique in the report (an anchor of the page and the stem of
/// its files, see `html::file_stem`): two sweeps' names can slug to the same prefix.
pub fn sections<'p>(sweeps: &[SweepRuns], part: impl Fn(&str) -> Option<Part<'p>>) -> Vec<Section> {
    let mut out: Vec<Section> =
        sweeps.iter().filter(|s| !s.configs.is_empty() || !s.skipped.is_empty()).map(|s| section(s, part(&s.name))).collect();
    let mut seen = std::collections::HashSet::new();
    for item in out.iter_mut().flat_map(|s| s.items.iter_mut()) {
        let id = match item {
            Item::Figure(f) => &mut f.id,
            Item::Table(t) => &mut t.id,
            Item::Note(_) => continue,
        };
        let mut n = 2;
        let base = id.clone();
        while !seen.insert(id.clone()) {
            *id = format!("{base}-{n}");
            n += 1;
        }
    }
    out
}

/// The section of a study part none of whose runs is in the report: what it feeds, what iolab
/// cannot run of it, and `why` it has no runs here, so that no part silently disappears.
pub fn absent(name: &str, part: Part, why: &str) -> Section {
    let mut items: Vec<Item> =
        part.unsupported.iter().map(|(what, reason)| Item::Note(format!("Not run by iolab: {what}: {reason}."))).collect();
    items.push(Item::Note(format!("No runs in this report: {why}")));
    Section { id: slug(&format!("{name}-absent")), title: format!("{name} (no runs)"), about: part.feeds.to_string(), items }
}

fn section(sweep: &SweepRuns, part: Option<Part>) -> Section {
    let prefix = slug(&match sweep.id {
        Some(id) => format!("{}-{id}", sweep.name),
        None => "lone".into(),
    });
    let mut ctx = Ctx { sweep, prefix: prefix.clone(), items: Vec::new(), cites: Vec::new() };
    for (what, why) in part.as_ref().map(|p| p.unsupported).unwrap_or_default() {
        ctx.note(format!("Not run by iolab: {what}: {why}."));
    }
    if !sweep.skipped.is_empty() {
        let mut why: BTreeMap<&str, usize> = BTreeMap::new();
        for (_, reason) in &sweep.skipped {
            *why.entry(reason.as_str()).or_default() += 1;
        }
        let list: Vec<String> = why.into_iter().map(|(r, n)| format!("{n} × {r}")).collect();
        ctx.note(format!("{} planned runs could not run on this machine and are in no figure: {}", sweep.skipped.len(), list.join(" · ")));
    }
    if sweep.not_ok > 0 {
        ctx.note(format!("{} selected runs did not finish ok (failed or interrupted) and are left out.", sweep.not_ok));
    }
    let mut drawn = false;
    if !sweep.configs.is_empty() {
        match &part {
            Some(p) => {
                if let Some(panels) = p.panels {
                    panels(&mut ctx);
                }
            }
            // A sweep of the user's own: each quantity against each swept numeric dimension.
            None if sweep.id.is_some() => drawn = dimensions::figures(&mut ctx),
            None => {}
        }
        super::profiles::panels(&mut ctx);
        configurations(&mut ctx);
    }
    let title = match sweep.id {
        Some(id) if sweep.joined.is_empty() => format!("{} (sweep {id})", sweep.name),
        Some(id) => format!(
            "{} (sweeps {}, one per machine)",
            sweep.name,
            std::iter::once(id).chain(sweep.joined.iter().copied()).map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
        ),
        None => "Runs outside any sweep".into(),
    };
    Section {
        id: prefix,
        title,
        about: match part {
            Some(p) => p.feeds.to_string(),
            None if drawn => "Not a suite part: each measured quantity against each swept numeric dimension, one series per combination of the swept categorical ones; then every configuration with its replicate statistics.".into(),
            None => "Not a suite part: every configuration with its replicate statistics.".into(),
        },
        items: ctx.items,
    }
}

/// Every section ends with its configurations and their replicate statistics.
fn configurations(ctx: &mut Ctx) {
    let mut t = Table::new(
        format!("{}: configurations and replicate statistics", ctx.sweep.name),
        &[
            "configuration",
            "n",
            "IOPS mean",
            "IOPS sd",
            "IOPS 95 % CI",
            "MAD outliers",
            "mean latency µs",
            "p99 µs",
            "CPU cores",
            "completion path taken",
        ],
    );
    let (names, common) = short_names(&ctx.sweep.configs);
    for (c, name) in ctx.sweep.configs.iter().zip(names) {
        let s = c.summary(&iops);
        let (mean, sd, ci, out) = match &s {
            Some(s) => (
                num(s.mean),
                s.sd.map(num).unwrap_or("n < 2".into()),
                s.ci95.map(|(a, b)| format!("{} – {}", num(a), num(b))).unwrap_or("n < 2".into()),
                if s.outliers.is_empty() {
                    "none".into()
                } else {
                    s.outliers.iter().map(|i| format!("run {}", c.runs[*i].row.id)).collect::<Vec<_>>().join(", ")
                },
            ),
            None => ("not measured".into(), String::new(), String::new(), String::new()),
        };
        t.rows.push(vec![
            name,
            c.runs.len().to_string(),
            mean,
            sd,
            ci,
            out,
            cell(c, &lat_mean_us),
            cell(c, &|r| us(r.record.results.total.lat_ns.p99)),
            cell(c, &cores),
            paths_taken(c),
        ]);
    }
    if !common.is_empty() {
        t.notes.push(format!("Common to every configuration: {common}."));
    }
    t.notes.push("Mean ± half-width of the 95 % confidence interval of the mean (Student t, n − 1 df) over the replicates; MAD outliers are flagged, never dropped.".into());
    let runs = ctx.all_runs();
    ctx.table(t, &runs);
}

/// Each configuration named by the `key=value` parts of its key that vary within the sweep, and
/// the parts common to all (said once, under the table).
fn short_names(configs: &[Config]) -> (Vec<String>, String) {
    let parts: Vec<Vec<&str>> = configs.iter().map(|c| c.key.split(',').collect()).collect();
    let common: Vec<&str> =
        parts.first().map(|p| p.iter().filter(|kv| parts.iter().all(|o| o.contains(kv))).copied().collect()).unwrap_or_default();
    let names = parts
        .iter()
        .map(|p| {
            let varying: Vec<&str> = p.iter().filter(|kv| !common.contains(kv)).copied().collect();
            if varying.is_empty() {
                "(the only configuration)".to_string()
            } else {
                varying.join(", ")
            }
        })
        .collect();
    (names, common.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers() {
        assert_eq!(id_ranges(&[1, 2, 3, 5, 7, 8]), "1–3, 5, 7–8");
        assert_eq!(slug("S1.1-latency: IOPS (4k)"), "s1-1-latency-iops-4k");
        assert_eq!(num(123456.0), "123456");
        assert_eq!(num(1.23456), "1.23");
        assert_eq!(num(0.012345), "0.0123");
    }
}
