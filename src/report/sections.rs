//! A report's sections: one per selected sweep, built from its stored runs. What a section holds
//! beyond its notes and its configurations table comes from the caller: a sweep that is a study
//! part (src/studies/) gets that part's panels, any other sweep the configurations table only.
//! What the machine could not measure stays in place as a "not available here" panel or note
//! with the reason. Rules: docs/report.md.
pub use super::ctx::{provenance, slug, Ctx, Figure, Item, Section, TableItem};
use super::data::{Config, SweepRuns};
use super::dimensions;
use super::panels::{cell, cores, iops, lat_mean_us, num, paths_taken, us};
use super::tables::Table;
use std::collections::BTreeMap;

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
    let mut ctx = Ctx::new(sweep, prefix.clone());
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
        super::efficiency::panels(&mut ctx);
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
        items: ctx.into_items(),
    }
}

/// Every section ends with its configurations and their replicate statistics.
fn configurations(ctx: &mut Ctx) {
    let mut t = Table::new(
        format!("{}: configurations and replicate statistics", ctx.name()),
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
    let (names, common) = short_names(ctx.sweep().configs.as_slice());
    for (c, name) in ctx.sweep().configs.iter().zip(names) {
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
        assert_eq!(super::super::ctx::id_ranges(&[1, 2, 3, 5, 7, 8]), "1–3, 5, 7–8");
        assert_eq!(slug("S1.1-latency: IOPS (4k)"), "s1-1-latency-iops-4k");
        assert_eq!(num(123456.0), "123456");
        assert_eq!(num(1.23456), "1.23");
        assert_eq!(num(0.012345), "0.0123");
    }
}
