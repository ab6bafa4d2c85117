//! Reports: what people read. The terminal summary of one run (`summary`), and `iolab report`:
//! a self-contained HTML page over a results database with every figure also as SVG and every
//! table as CSV and Markdown (`data` reads the store, `sections` builds one section per sweep
//! with the panels a study part brings (src/studies/), or for any other sweep `dimensions`' figures
//! against each swept numeric dimension, and `panels` has their building blocks,
//! `svg`/`tables`/`html` render). Never touches devices and knows no study.
pub mod ctx;
pub mod data;
pub mod dimensions;
pub mod efficiency;
pub mod error;
pub mod flame;
pub mod html;
pub mod panels;
pub mod profiles;
pub mod sections;
pub mod summary;
pub mod svg;
pub mod tables;

use error::ReportError;
use std::path::{Path, PathBuf};

/// How the report's numbers were made, at the end of the page (docs/report.md has the long form).
pub const METHOD_NOTES: &str = "<p>Every number is measured by iolab on the machine named in each figure's provenance line; nothing is modelled or estimated. Where the machine could not measure something (no energy source, no performance counters, polling that fell back to interrupts, runs that could not be made), the place says so with the reason.</p>\
<p><b>Replicates.</b> Each configuration's replicates are summarised by the mean, the sample standard deviation and the 95 % confidence interval of the mean (Student t quantile with n − 1 degrees of freedom); error bars show that interval. Replicates whose modified z-score (median absolute deviation) exceeds 3.5 are flagged (hollow marks, the configurations table) and never dropped.</p>\
<p><b>Comparisons.</b> Two configurations are compared with Welch's unequal-variance t-test; a ranking of more than two tests every configuration against the best and corrects the p-values with Holm's step-down procedure (α = 0.05). In the S3 map, best and second of a tile are one comparison (Welch, no correction) and a tile is a tie when p &gt; 0.05. HotStorage'22 used a two-sample t-test; its map table lists Student's pooled-variance p beside Welch's and counts where the two calls differ.</p>\
<p><b>Saturation.</b> A J-curve saturates at the first queue depth whose next step gains less than 5 % IOPS per doubling of the queue while mean latency grows by more than 20 % per doubling, applied to replicate means.</p>";

/// The list of files the last report wrote into its directory, one relative path per line, so
/// that a report written over it can remove what it no longer has and nothing else.
pub const MANIFEST: &str = ".iolab-report-files";

/// The sub-directories a report writes its files into.
const SUBDIRS: [&str; 2] = ["figures", "tables"];

/// One file of a report: its directory under `out` ("" for `out` itself), name and text.
struct File {
    sub: &'static str,
    name: String,
    text: String,
}

/// Write the page, each figure as SVG and each table as CSV and Markdown under `out`; returns the
/// paths written, the page first. Every name is checked before anything is written. `out`,
/// `figures/` and `tables/` are opened without following a link (a link is refused) and each
/// file replaced in them by `crate::output::Dir`. Figures and tables an earlier report wrote
/// there and this one does not are removed: they are known from its manifest, which is trusted
/// only as a regular file owned by this user in a directory owned by this user, and only plain
/// names `figures/*.svg` and `tables/*.csv|md` in directories of this user are removed from it;
/// no other file is touched.
pub fn write(out: &Path, header: &html::Header, sections: &[sections::Section]) -> Result<Vec<PathBuf>, ReportError> {
    let files = files(header, sections)?;
    let dir = crate::output::Dir::create(out).map_err(|e| ReportError::from(e).context(|m| format!("--out: {m}")))?;
    let mut subs = Vec::new();
    for sub in SUBDIRS {
        let needed = files.iter().any(|f| f.sub == sub);
        subs.push((sub, dir.sub(sub, needed).map_err(|e| ReportError::from(e).context(|m| format!("--out: {m}")))?));
    }
    let at = |sub: &str| if sub.is_empty() { Some(&dir) } else { subs.iter().find(|(s, _)| *s == sub).and_then(|(_, d)| d.as_ref()) };
    let shown = |f: &File| out.join(f.sub).join(&f.name);
    // Nothing is written while any name cannot be replaced (a link, a directory, a device).
    for f in &files {
        let d = at(f.sub).ok_or_else(|| ReportError::Out(format!("cannot write {}", shown(f).display())))?;
        d.check_name(std::ffi::OsStr::new(&f.name), &shown(f).display().to_string())?;
    }
    let mut written = Vec::new();
    for f in &files {
        let d = at(f.sub).ok_or_else(|| ReportError::Out(format!("cannot write {}", shown(f).display())))?;
        let p = shown(f);
        d.write_with(std::ffi::OsStr::new(&f.name), &p.display().to_string(), |w| {
            w.write_all(f.text.as_bytes()).map_err(|e| ReportError::Io(format!("cannot write {}: {e}", p.display())))
        })?;
        written.push(p);
    }
    let now: Vec<String> = files.iter().map(|f| if f.sub.is_empty() { f.name.clone() } else { format!("{}/{}", f.sub, f.name) }).collect();
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if dir.owner().is_ok_and(|u| u == me) {
        for stale in dir.read_own(MANIFEST).unwrap_or_default().lines().filter(|l| !now.iter().any(|n| n == l)) {
            // Only what a report writes: a plain name under figures/ or tables/, no way out.
            let Some((sub, name)) = stale.split_once('/') else { continue };
            let ext = name.rsplit_once('.').map(|(_, e)| e);
            let ours = match sub {
                "figures" => ext == Some("svg"),
                "tables" => ext == Some("csv") || ext == Some("md"),
                _ => false,
            };
            if !ours || name.contains('/') || name.starts_with('.') || name.contains('\0') {
                continue;
            }
            if let Some(d) = at(sub).filter(|d| d.owner().is_ok_and(|u| u == me)) {
                let _ = d.remove(name);
            }
        }
    }
    // A manifest that is a link (planted, not ours) is replaced, not written through.
    if dir.stat(std::ffi::OsStr::new(MANIFEST)).ok().flatten().is_some_and(|s| s.st_mode & libc::S_IFMT == libc::S_IFLNK) {
        dir.remove(MANIFEST).map_err(|e| ReportError::Io(format!("cannot replace {}: {e}", out.join(MANIFEST).display())))?;
    }
    dir.write_with(std::ffi::OsStr::new(MANIFEST), &out.join(MANIFEST).display().to_string(), |w| {
        w.write_all((now.join("\n") + "\n").as_bytes())
            .map_err(|e| ReportError::Io(format!("cannot write {}: {e}", out.join(MANIFEST).display())))
    })?;
    Ok(written)
}

/// Every file of the report, the page first, with names checked: each at most
/// `html::MAX_NAME` bytes of safe characters and no two alike.
fn files(header: &html::Header, sections: &[sections::Section]) -> Result<Vec<File>, ReportError> {
    let mut files = vec![File { sub: "", name: "report.html".into(), text: html::page(header, sections, METHOD_NOTES) }];
    let mut add = |rel: String, text: String| {
        let (sub, name) = rel.split_once('/').unwrap_or(("", &rel));
        let sub = SUBDIRS.into_iter().find(|s| *s == sub).unwrap_or("");
        files.push(File { sub, name: name.to_string(), text });
    };
    for item in sections.iter().flat_map(|s| s.items.iter()) {
        match item {
            sections::Item::Figure(f) => {
                let standalone =
                    format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!-- {} -->\n{}\n", svg::comment(&f.provenance), f.svg);
                add(html::figure_file(&f.id), standalone);
            }
            sections::Item::Table(t) => {
                let (csv, md) = html::table_files(&t.id);
                add(csv, t.table.csv());
                add(md, t.table.markdown() + &format!("\n{}\n", t.provenance));
            }
            sections::Item::Note(_) => {}
        }
    }
    let mut seen = std::collections::HashSet::new();
    for f in &files {
        let safe = f.name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) && !f.name.starts_with('.');
        if f.name.len() > html::MAX_NAME || !safe || !seen.insert((f.sub, f.name.as_str())) {
            return Err(ReportError::Name(format!(
                "report file name {}/{} is too long, unsafe or not unique (nothing was written)",
                f.sub, f.name
            )));
        }
    }
    Ok(files)
}
