//! Reports: what people read. The terminal summary of one run (`summary`), and `iolab report`:
//! a self-contained HTML page over a results database with every figure also as SVG and every
//! table as CSV and Markdown (`data` reads the store, `sections` builds one section per sweep
//! with the panels a study part brings (src/studies/), or for any other sweep `dimensions`' figures
//! against each swept numeric dimension, and `panels` has their building blocks,
//! `svg`/`tables`/`html` render). Never touches devices and knows no study.
pub mod data;
pub mod dimensions;
pub mod flame;
pub mod html;
pub mod panels;
pub mod profiles;
pub mod sections;
pub mod summary;
pub mod svg;
pub mod tables;

use std::path::{Path, PathBuf};

/// How the report's numbers were made, at the end of the page (docs/report.md has the long form).
pub const METHOD_NOTES: &str = "<p>Every number is measured by iolab on the machine named in each figure's provenance line; nothing is modelled or estimated. Where the machine could not measure something (no energy source, no performance counters, polling that fell back to interrupts, runs that could not be made), the place says so with the reason.</p>\
<p><b>Replicates.</b> Each configuration's replicates are summarised by the mean, the sample standard deviation and the 95 % confidence interval of the mean (Student t quantile with n − 1 degrees of freedom); error bars show that interval. Replicates whose modified z-score (median absolute deviation) exceeds 3.5 are flagged (hollow marks, the configurations table) and never dropped.</p>\
<p><b>Comparisons.</b> Two configurations are compared with Welch's unequal-variance t-test; a ranking of more than two tests every configuration against the best and corrects the p-values with Holm's step-down procedure (α = 0.05). In the S3 map, best and second of a tile are one comparison (Welch, no correction) and a tile is a tie when p &gt; 0.05. HotStorage'22 used a two-sample t-test; its map table lists Student's pooled-variance p beside Welch's and counts where the two calls differ.</p>\
<p><b>Saturation.</b> A J-curve saturates at the first queue depth whose next step gains less than 5 % IOPS per doubling of the queue while mean latency grows by more than 20 % per doubling, applied to replicate means.</p>";

/// Write `bytes` to `path` whole or not at all (see `crate::output`), creating its directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let dir = crate::output::parent(path);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    crate::output::write_bytes(&path.to_string_lossy(), bytes)
}

/// The list of files the last report wrote into its directory, one relative path per line, so
/// that a report written over it can remove what it no longer has and nothing else.
pub const MANIFEST: &str = ".iolab-report-files";

/// Write the page, each figure as SVG and each table as CSV and Markdown under `out`; returns the
/// paths written, the page first. Figures and tables an earlier report wrote there and this one
/// does not are removed (they are known from its manifest); no other file is touched.
pub fn write(out: &Path, header: &html::Header, sections: &[sections::Section]) -> Result<Vec<PathBuf>, String> {
    let written = write_files(out, header, sections)?;
    let now: Vec<String> = written.iter().filter_map(|p| p.strip_prefix(out).ok()).map(|p| p.to_string_lossy().into_owned()).collect();
    let manifest = out.join(MANIFEST);
    if let Ok(before) = std::fs::read_to_string(&manifest) {
        for stale in before.lines().filter(|l| !now.iter().any(|n| n == l)) {
            // Only what a report writes: figures/*.svg and tables/*.csv|md, no way out of `out`.
            let rel = Path::new(stale);
            let ours = rel.components().count() == 2
                && matches!(rel.components().next().and_then(|c| c.as_os_str().to_str()), Some("figures") | Some("tables"))
                && rel.extension().is_some_and(|e| e == "svg" || e == "csv" || e == "md");
            if ours {
                let _ = std::fs::remove_file(out.join(rel));
            }
        }
    }
    write_atomic(&manifest, (now.join("\n") + "\n").as_bytes())?;
    Ok(written)
}

fn write_files(out: &Path, header: &html::Header, sections: &[sections::Section]) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    let page = out.join("report.html");
    write_atomic(&page, html::page(header, sections, METHOD_NOTES).as_bytes())?;
    written.push(page);
    for item in sections.iter().flat_map(|s| s.items.iter()) {
        match item {
            sections::Item::Figure(f) => {
                let p = out.join(html::figure_file(&f.id));
                let standalone =
                    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- {} -->\n{}\n", f.provenance.replace("--", "-"), f.svg);
                write_atomic(&p, standalone.as_bytes())?;
                written.push(p);
            }
            sections::Item::Table(t) => {
                let (csv, md) = html::table_files(&t.id);
                for (name, text) in [(csv, t.table.csv()), (md, t.table.markdown() + &format!("\n{}\n", t.provenance))] {
                    let p = out.join(name);
                    write_atomic(&p, text.as_bytes())?;
                    written.push(p);
                }
            }
            sections::Item::Note(_) => {}
        }
    }
    Ok(written)
}
