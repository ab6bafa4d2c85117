//! `iolab report` end to end: a database made by real sweeps (tiny I/O budgets on a temporary
//! file, named after suite parts so each gets its study panels) is reported; the files are
//! checked (offline, one SVG per figure, CSV and Markdown per table, the S1 slowdown ordering,
//! provenance), and the page is rendered in headless Chromium, whose dumped DOM must show every
//! figure drawn and no script or console error. Bad input gets one line and exit code 2.

use crate::common::iolab;

use std::path::{Path, PathBuf};
use std::process::Command;

fn work_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("iolab-report-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Small plans with the names of suite parts: (name, budget, measure energy, matrix). Most runs
/// are a few hundred I/Os; the S3 map's runs last a second each with a fake BMC (a replayed
/// `ipmitool` reading of 215 W, as in tests/energy_run.rs) so the map is drawn from measured
/// joules; the GC part runs 2 s for a per-second series.
const PLANS: &[(&str, &str, bool, &str)] = &[
    (
        "S1.1-latency",
        "ios = 400",
        false,
        r#"replicates = 2
[matrix]
interface = ["psync", "pvsync2", "libaio", "io_uring"]
rw = ["randread", "randwrite"]
"#,
    ),
    (
        "S1.2-queue-depth",
        "ios = 400",
        false,
        r#"replicates = 1
[matrix]
interface = ["libaio", "io_uring"]
qd = [1, 4]
"#,
    ),
    (
        "S2.2-jcurve",
        "ios = 400",
        false,
        r#"replicates = 1
[matrix]
interface = ["libaio", "io_uring"]
qd = [1, 2, 4, 8]
"#,
    ),
    (
        "S2.3-cores",
        "ios = 400",
        false,
        r#"replicates = 2
[matrix]
interface = ["libaio"]
qd = [4]
threads = [1, 2]
"#,
    ),
    (
        "S3-map",
        "runtime = \"1s\"",
        true,
        r#"replicates = 2
[matrix]
interface = ["pvsync2", "io_uring"]
complete = ["irq", "poll"]
bs = ["4k", "8k"]
"#,
    ),
    (
        "S4.1-latency",
        "ios = 400",
        false,
        r#"replicates = 1
[matrix]
interface = ["libaio"]
rw = ["randread", "randwrite"]
qd = [1, 4]
"#,
    ),
    (
        "S4.4-gc",
        "runtime = \"2s\"",
        false,
        r#"replicates = 1
[matrix]
interface = ["libaio"]
rw = ["randwrite"]
qd = [4]
"#,
    ),
    (
        "ad-hoc",
        "ios = 400",
        false,
        r#"replicates = 3
[matrix]
interface = ["psync", "libaio"]
"#,
    ),
];

fn make_db(dir: &Path) -> PathBuf {
    let data = dir.join("data.img");
    std::fs::write(&data, vec![0x5au8; 16 << 20]).unwrap();
    let fake_bmc = dir.join("ipmitool");
    let reading = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/energy/ipmitool/dcmi_power_reading.1.8.19.C-locale.txt");
    std::fs::write(&fake_bmc, format!("#!/bin/sh\ncat '{}'\n", reading.display())).unwrap();
    std::fs::set_permissions(&fake_bmc, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let db = dir.join("iolab.db");
    for (name, budget, energy, matrix) in PLANS {
        let plan = dir.join(format!("{name}.toml"));
        std::fs::write(&plan, format!("name = \"{name}\"\nseed = 5\n{budget}\ntargets = [\"{}\"]\n{matrix}", data.display())).unwrap();
        let mut cmd = Command::new(crate::common::BIN);
        cmd.args(["sweep", plan.to_str().unwrap(), "--db", db.to_str().unwrap(), "--quiet"]);
        if *energy {
            cmd.env("IOLAB_IPMITOOL", &fake_bmc);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "sweep {name}: {}", String::from_utf8_lossy(&out.stderr));
    }
    db
}

/// Headless Chromium, installed from Debian's packages when missing (as the VM rig installs
/// QEMU); Err says why it cannot be had here, and only the rendering checks are then skipped.
fn chromium() -> Result<PathBuf, String> {
    let on_path = || std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join("chromium")).find(|c| c.is_file()));
    if let Some(found) = on_path() {
        return Ok(found);
    }
    if !crate::common::is_root() {
        return Err("chromium is not on PATH and only root can install it (Debian package chromium)".into());
    }
    crate::common::apt_install(&["chromium"]).map_err(|e| format!("chromium is not on PATH and {e}"))?;
    on_path().ok_or_else(|| "apt-get installed chromium but it is not on PATH".into())
}

/// The page as headless Chromium leaves it after load, and Chromium's stderr. The flags keep it
/// off the network (closed here) and out of any profile but a fresh one.
fn render(browser: &Path, page: &Path, scratch: &Path) -> (String, String) {
    let profile = tempfile::Builder::new().prefix("chromium-").tempdir_in(scratch).unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("cannot run chromium");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "chromium failed: {stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// An attribute of the dumped <body>.
fn body_attr(dom: &str, name: &str) -> String {
    let body = &dom[dom.find("<body").expect("no <body> in the dumped DOM")..];
    let body = &body[..body.find('>').unwrap()];
    let key = format!("{name}=\"");
    let start = body.find(&key).unwrap_or_else(|| panic!("<body> has no {name}: {body}")) + key.len();
    body[start..start + body[start..].find('"').unwrap()].to_string()
}

fn console_errors(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains("CONSOLE") && (l.contains("ERROR") || l.to_lowercase().contains("uncaught"))).collect()
}

/// Render the report in headless Chromium (skipped, saying why, where there is none): every one
/// of its `figures` drawn, nothing wrong in the page or on the console.
pub(crate) fn assert_renders(test: &str, out: &Path, figures: usize, scratch: &Path) {
    let browser = match chromium() {
        Err(why) => return crate::common::skip_or_fail(&format!("{test} (rendering in Chromium)"), &why),
        Ok(b) => b,
    };
    let (dom, stderr) = render(&browser, &out.join("report.html"), scratch);
    assert_eq!(body_attr(&dom, "data-checked"), "yes", "the page's check did not run");
    assert_eq!(body_attr(&dom, "data-figures"), figures.to_string());
    assert_eq!(body_attr(&dom, "data-drawn"), figures.to_string(), "figures not drawn: {}", body_attr(&dom, "data-not-drawn"));
    assert_eq!(body_attr(&dom, "data-errors"), "0", "errors in the page: {}", body_attr(&dom, "data-error-text"));
    assert!(console_errors(&stderr).is_empty(), "console errors: {:?}", console_errors(&stderr));
}

pub(crate) fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == ext)).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn report_renders_every_figure_offline_without_errors() {
    let dir = work_dir();
    let db = make_db(dir.path());
    let out = dir.path().join("report");
    let run = iolab(&["report", "--db", db.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    run.assert_ok();
    let page = out.join("report.html");
    assert_eq!(run.stdout.lines().next(), Some(page.to_str().unwrap()), "the page's path comes first:\n{}", run.describe());
    let html = std::fs::read_to_string(&page).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&page).unwrap().permissions().mode() & 0o777, 0o644, "a report is readable by others");

    // Offline: nothing is fetched (the SVG namespace is a name, not a fetch).
    for attr in ["src=", "href=", "url("] {
        for quote in ["\"", "'", ""] {
            for scheme in ["http://", "https://", "//"] {
                let needle = format!("{attr}{quote}{scheme}");
                assert!(!html.contains(&needle), "the page references the network ({needle})");
            }
        }
    }
    assert!(!html.contains("@import") && !html.contains("@font-face"), "no external styles or fonts");

    // Every figure is also an SVG file and every table a CSV and a Markdown file.
    let figures = html.matches("<figure class=\"fig\"").count();
    let tables = html.matches("<div class=\"tbl\"").count();
    assert!(figures >= 6, "too few figures: {figures}");
    assert_eq!(files(&out.join("figures"), "svg").len(), figures);
    assert_eq!(files(&out.join("tables"), "csv").len(), tables);
    assert_eq!(files(&out.join("tables"), "md").len(), tables);
    assert_eq!(run.stdout.lines().count(), 1 + figures + 2 * tables, "every path written is printed");

    // Study panels, statistics and provenance.
    for want in [
        "HotStorage'23 Table 2",
        "J-curves",
        "Energy-efficiency map",
        "Fig 2a: context switches per second",
        "mean latency against queue depth",
        "ad-hoc (sweep 8)",
        "ad-hoc: configurations and replicate statistics",
        "Welch",
        "Holm",
        "Student",
        "IOPS against cores",
        "S2 cores to peak",
        "Garbage collection: per-second mean write latency (Fig 7b)",
        "replicates 3 per configuration",
    ] {
        assert!(html.contains(want), "the page lacks {want:?}");
    }
    assert_eq!(html.matches("<p class=\"prov\">machine ").count(), figures + tables, "provenance under every figure and table");
    assert!(html.contains("kernel ") && html.contains(" · runs "));
    // pvsync2 --complete poll on a file completes by interrupt: said where it is shown.
    assert!(html.contains("poll → interrupt, fell back"), "the fallen-back completion path is not shown");
    assert!(html.contains("Polling was asked for but completions came by interrupt"));
    // The S3 map is drawn from measured joules (the fake BMC), with the tie rule applied.
    let map = &html[html.find("id=\"s3-map-5-energy-efficiency-map").expect("no energy map figure")..];
    let map = &map[..map.find("</figure>").unwrap()];
    assert!(map.contains("data-kind=\"map\"") && map.contains("joules_per_io"), "the energy map is not drawn from joules: {map}");
    let tiles = map.matches("<g class=\"mark\">").count();
    assert_eq!(tiles, 2, "one tile per block size (4k, 8k) at one thread");
    // Without an energy source (the other sweeps here, unless the machine has RAPL or a BMC),
    // the panel stands in place with the reason.
    if html.contains("Power and IOPS per joule against queue depth") {
        assert!(html.contains("Not available here"));
    } else {
        assert!(html.contains("Power against queue depth") && html.contains("IOPS per joule against queue depth"));
    }

    // The S1 table is sorted by slowdown, every slowdown ≥ 1 and the first is the smallest.
    let s1 = files(&out.join("tables"), "csv")
        .into_iter()
        .find(|p| p.to_str().unwrap().contains("hotstorage-23-table-2"))
        .expect("no S1 latency table CSV");
    let text = std::fs::read_to_string(&s1).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "× the fastest").unwrap();
    // The user-space driver's row (the paper's baseline) stands last, saying why it has no numbers.
    let (user_space, measured): (Vec<&str>, Vec<&str>) = text.lines().skip(1).partition(|l| l.starts_with("iolab user-space driver"));
    assert!(user_space.len() == 1 && user_space[0].contains("not run: "), "{text}");
    let slowdowns: Vec<f64> = measured.iter().map(|l| l.split(',').nth(col).unwrap().trim_end_matches('×').parse().unwrap()).collect();
    assert_eq!(slowdowns.len(), 4, "{text}");
    assert!(slowdowns.windows(2).all(|w| w[0] <= w[1]) && slowdowns[0] >= 1.0, "{text}");
    let md = std::fs::read_to_string(s1.with_extension("md")).unwrap();
    assert!(md.contains("| configuration | mechanism (this kernel) | randread p50 |") && md.contains("machine "), "{md}");
    // No user-space row ran on a file: the table says the paper's baseline is missing, and why.
    assert!(md.contains("did not run here"), "{md}");

    // Headless Chromium: every figure drew (non-empty box and a data mark, or a "not available
    // here" panel) and nothing went wrong in the page or on the console.
    let broken = html.replacen(
        "<div id=\"readout\">",
        "<figure class=\"fig\" id=\"empty\"><svg></svg></figure><script>throw new Error('planted');</script><div id=\"readout\">",
        1,
    );
    let broken_page = out.join("broken.html");
    std::fs::write(&broken_page, broken).unwrap();
    match chromium() {
        Err(why) => crate::common::skip_or_fail("report_renders_every_figure_offline_without_errors (rendering in Chromium)", &why),
        Ok(browser) => {
            let (dom, stderr) = render(&browser, &page, dir.path());
            assert_eq!(body_attr(&dom, "data-checked"), "yes", "the page's check did not run");
            assert_eq!(body_attr(&dom, "data-figures"), figures.to_string());
            assert_eq!(body_attr(&dom, "data-drawn"), figures.to_string(), "figures not drawn: {}", body_attr(&dom, "data-not-drawn"));
            assert_eq!(body_attr(&dom, "data-errors"), "0", "errors in the page: {}", body_attr(&dom, "data-error-text"));
            assert!(console_errors(&stderr).is_empty(), "console errors: {:?}", console_errors(&stderr));

            // The check itself notices a broken page: a planted error and an empty figure.
            let (dom, _) = render(&browser, &broken_page, dir.path());
            assert_eq!(body_attr(&dom, "data-errors"), "1");
            assert!(body_attr(&dom, "data-error-text").contains("planted"));
            assert_eq!(body_attr(&dom, "data-not-drawn"), "empty");
        }
    }

    // A suite selects its parts' newest sweeps only.
    let only = dir.path().join("s3");
    iolab(&["report", "--db", db.to_str().unwrap(), "--suite", "s3", "--out", only.to_str().unwrap(), "--quiet"]).assert_ok();
    let s3 = std::fs::read_to_string(only.join("report.html")).unwrap();
    assert!(s3.contains("S3-map (sweep 5)") && !s3.contains("S1.1-latency"));
    // Each row says how this kernel carried out its completion method (pvsync2 poll: RWF_HIPRI,
    // polled or ignored depending on the kernel).
    assert!(s3.contains("mechanism on this kernel") && s3.contains("RWF_HIPRI"), "the S3 table does not name the mechanism");

    // A report written over another removes the figures and tables the first had and it has
    // not, and leaves everything else alone.
    let mine = out.join("figures/mine.svg");
    std::fs::write(&mine, "<svg/>").unwrap();
    let before: Vec<PathBuf> = files(&out.join("figures"), "svg");
    assert!(before.iter().any(|p| p.file_name().unwrap().to_string_lossy().starts_with("s1-")), "{before:?}");
    iolab(&["report", "--db", db.to_str().unwrap(), "--suite", "s3", "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    let after: Vec<PathBuf> = files(&out.join("figures"), "svg");
    let expected: Vec<PathBuf> = files(&only.join("figures"), "svg")
        .iter()
        .map(|p| out.join("figures").join(p.file_name().unwrap()))
        .chain([mine.clone()])
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(after, expected);
    assert_eq!(files(&out.join("tables"), "csv").len(), files(&only.join("tables"), "csv").len());
    assert!(out.join("broken.html").exists(), "a file the report did not write was removed");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = work_dir();
    let missing = dir.path().join("none.db");
    let out = dir.path().join("out");
    let r = iolab(&["report", "--db", missing.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(r.assert_usage_error().contains("no results database"));
    assert!(!missing.exists(), "a missing database must not be created");
    // An empty database (made by iolab itself) and selections that match nothing.
    let db = dir.path().join("iolab.db");
    iolab::store::Store::open(&db).unwrap();
    for (args, says) in [
        (vec![], "no finished runs"),
        (vec!["--suite", "S9"], "no suite 'S9'"),
        (vec!["--suite", "S1"], "no runs of suite S1"),
        (vec!["--sweep", "7"], "no sweep 7"),
        (vec!["--frobnicate"], "frobnicate"),
    ] {
        let mut all = vec!["report", "--db", db.to_str().unwrap(), "--out", out.to_str().unwrap()];
        all.extend(args);
        let r = iolab(&all);
        let line = r.assert_usage_error();
        assert!(line.contains(says), "{line}");
    }
    assert!(!out.exists(), "nothing is written on bad input");
}

/// A user's own sweep (no study part) over interface × bs × qd gets figures against bs and
/// against qd, one series per interface, with the other dimension held; the page renders.
#[test]
fn own_sweep_gets_figures_against_each_swept_dimension() {
    let dir = work_dir();
    let data = dir.path().join("data.img");
    std::fs::write(&data, vec![0x5au8; 16 << 20]).unwrap();
    let plan = dir.path().join("mine.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"mine\"\nseed = 5\nios = 200\nreplicates = 2\ntargets = [\"{}\"]\n[matrix]\ninterface = [\"libaio\", \"io_uring\"]\nbs = [\"4k\", \"16k\"]\nqd = [1, 4]\n",
            data.display()
        ),
    )
    .unwrap();
    let db = dir.path().join("iolab.db");
    iolab(&["sweep", plan.to_str().unwrap(), "--db", db.to_str().unwrap(), "--quiet"]).assert_ok();
    let out = dir.path().join("report");
    iolab(&["report", "--db", db.to_str().unwrap(), "--sweep", "1", "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let svgs = files(&out.join("figures"), "svg");
    let figures = html.matches("<figure class=\"fig\"").count();
    assert_eq!(svgs.len(), figures);
    // IOPS, bandwidth, mean and p99 latency (CPU per I/O where recorded) against bs at each qd
    // and against qd at each bs.
    let names: Vec<String> = svgs.iter().map(|p| p.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    for want in [
        "iops-against-bs-at-qd-1",
        "iops-against-bs-at-qd-4",
        "iops-against-qd-at-bs-4-kib",
        "iops-against-qd-at-bs-16-kib",
        "bandwidth-against-bs-at-qd-1",
        "mean-latency-against-qd-at-bs-4-kib",
        "p99-latency-against-qd-at-bs-16-kib",
    ] {
        let file = svgs.iter().find(|p| p.file_stem().unwrap().to_string_lossy().ends_with(want));
        let file = file.unwrap_or_else(|| panic!("no figure {want} in {names:?}"));
        let svg = std::fs::read_to_string(file).unwrap();
        // One series (line, legend entry) per interface, a mark per (interface, x).
        assert_eq!(svg.matches("<polyline").count(), 2, "{want}: {svg}");
        assert!(svg.contains(">libaio</text>") && svg.contains(">io_uring</text>"), "{want}: {svg}");
        assert_eq!(svg.matches("class=\"mark\"").count(), 4, "{want}");
        assert!(svg.contains("n = 2"), "{want}: replicate statistics in the tooltips");
        assert!(svg.contains("<!-- machine "), "{want}: provenance");
        if want.contains("-against-bs-") {
            // A block size on a log-2 axis with binary ticks.
            assert!(svg.contains(" KiB</text>") && !svg.contains("(KiB)"), "{want}: block size not in binary units: {svg}");
        }
    }
    assert!(figures >= 4 * 4, "{names:?}");
    assert!(html.contains("One series per interface; held at qd 4"), "figure notes say what is held");
    assert!(html.contains("Energy per I/O is not drawn") || html.contains("Energy per I/O against bs"));
    assert!(html.contains("mine: configurations and replicate statistics"));
    assert_eq!(html.matches("<p class=\"prov\">machine ").count(), figures + 1);

    assert_renders("own_sweep_gets_figures_against_each_swept_dimension", &out, figures, dir.path());
}

/// S5 from a real quick suite on a file: the block path's rows are measured here and the
/// passthrough rows skipped with the reason (a file has no NVMe namespace). Then the passthrough
/// records the same quick suite made on the VM rig's emulated NVMe namespace
/// (tests/vm/guest/s5.sh, `--append iolab_s5_capture`) are stored into those planned runs: Table
/// III has every row with its reduction against libaio, Figs 4 and 5 draw the six design points
/// for each pattern, and Chromium draws every figure.
#[test]
fn s5_report_draws_table_iii_and_figs_4_and_5() {
    let dir = work_dir();
    let data = dir.path().join("data.img");
    std::fs::write(&data, vec![0x5au8; 16 << 20]).unwrap();
    let db = dir.path().join("iolab.db");
    let (db_s, data_s) = (db.to_str().unwrap(), data.to_str().unwrap());
    // Only S5.2: Table III and Figs 4-5 are its; S5.1 traces every run (--profile stages, stages.rs).
    iolab(&["suite", "run", "S5", "--part", "S5.2", "--quick", data_s, "--db", db_s, "--quiet"]).assert_ok();
    let table_iii = |out: &Path| {
        let csv = files(&out.join("tables"), "csv").into_iter().find(|p| p.to_str().unwrap().contains("table-iii")).expect("no Table III");
        std::fs::read_to_string(csv).unwrap()
    };
    let first = dir.path().join("first");
    iolab(&["report", "--db", db_s, "--suite", "s5", "--out", first.to_str().unwrap(), "--quiet"]).assert_ok();
    let t = table_iii(&first);
    assert!(t.contains("not run: NVMe passthrough needs an NVMe namespace and") && t.contains("is a regular file"), "{t}");
    assert_eq!(t.lines().filter(|l| l.starts_with("nvme-passthru")).count(), 3, "the fast path's rows stand with the reason: {t}");

    // The passthrough records from the VM rig, into the planned runs this machine skipped.
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/s5/passthru-records.json.gz");
    let json = Command::new("gzip").arg("-dc").arg(&fixture).output().expect("cannot run gzip");
    assert!(json.status.success(), "gzip -dc {}", fixture.display());
    let records: Vec<serde_json::Value> = serde_json::from_slice(&json.stdout).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    let mut store = iolab::store::Store::open(&db).unwrap();
    for mut r in records.clone() {
        let at = r.as_object_mut().unwrap().remove("store").unwrap();
        let id: i64 = conn
            .query_row(
                "SELECT id FROM planned_runs WHERE config_key = ?1 AND replicate = ?2 AND status = 'skipped'",
                rusqlite::params![at["config_key"].as_str().unwrap(), at["replicate"].as_i64().unwrap()],
                |row| row.get(0),
            )
            .unwrap();
        conn.execute("UPDATE planned_runs SET status = 'planned', reason = NULL WHERE id = ?1", [id]).unwrap();
        store.record_run(Some(id), &r).unwrap();
    }
    assert_eq!(records.len(), 3 * 4 * 3 * 3, "3 passthrough design points x 4 patterns x 3 block sizes x 3 iterations");

    let out = dir.path().join("report");
    iolab(&["report", "--db", db_s, "--suite", "s5", "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let t = table_iii(&out);
    // Every row ran but the fast path's own, which needs an NVMe controller to take: it stands
    // with the reason.
    for l in t.lines().filter(|l| l.contains("not run")) {
        assert!(l.starts_with("iolab user-space driver") && l.contains("not run: vfio-nvme"), "{t}");
    }
    assert!(t.lines().any(|l| l.starts_with("iolab user-space driver")), "the fast path's row: {t}");
    for m in ["libaio irq", "psync irq", "io_uring irq", "nvme-passthru irq", "nvme-passthru poll", "nvme-passthru sqpoll poll"] {
        let row = t.lines().find(|l| l.starts_with(&format!("{m},"))).unwrap_or_else(|| panic!("no row {m}: {t}"));
        let reduction = if m == "libaio irq" { "baseline" } else { " %" };
        assert!(row.contains(reduction) && row.contains("gsd"), "{row}");
    }
    assert!(t.contains("polled"), "the polled passthrough rows say the path taken: {t}");
    assert!(
        html.contains("Where iolab&#x27;s method differs from the paper&#x27;s")
            || html.contains("Where iolab's method differs from the paper's")
    );
    assert!(html.contains("328.9"), "the paper's numbers beside iolab's");

    let figures = html.matches("<figure class=\"fig\"").count();
    let svgs = files(&out.join("figures"), "svg");
    assert_eq!(svgs.len(), figures);
    for fig in ["fig-4-bandwidth", "fig-5-iops"] {
        for rw in ["seq-read", "rand-read", "seq-write", "rand-write"] {
            let want = format!("{fig}-against-block-size-{rw}");
            let file = svgs.iter().find(|p| p.to_str().unwrap().ends_with(&format!("{want}.svg"))).unwrap_or_else(|| panic!("no {want}"));
            let svg = std::fs::read_to_string(file).unwrap();
            assert_eq!(svg.matches("<polyline").count(), 6, "{want}: one line per design point");
            assert_eq!(svg.matches("class=\"mark\"").count(), 6 * 3, "{want}: a mark per design point and block size");
            assert!(svg.contains("geometric mean of n = 3"), "{want}");
        }
    }
    assert_eq!(figures, 8, "Figs 4 and 5 for each of the four patterns");

    assert_renders("s5_report_draws_table_iii_and_figs_4_and_5", &out, figures, dir.path());
}

/// Power over time (IISWC'19 Fig 8): a wall meter's log whose power steps between 100 W and
/// 200 W at every whole UNIX second, sampled ten times a second. Each second of the run's window
/// is integrated alone, so neighbouring seconds (offset from the meter's by the window's start)
/// add up to 300 W; the GC part's report draws the per-second power beside its series.
#[test]
fn gc_power_over_time_from_a_meter_log() {
    let dir = work_dir();
    let data = dir.path().join("data.img");
    std::fs::write(&data, vec![0x5au8; 16 << 20]).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64().floor();
    let mut log = String::from("timestamp,watts\n");
    for i in -100..1200 {
        let t = now + i as f64 / 10.0;
        log += &format!("{t:.3},{}\n", if (t.floor() as i64) % 2 == 0 { 100 } else { 200 });
    }
    // A sample just before each step, so the step is sharp (linear between neighbours otherwise).
    let log_path = dir.path().join("wall.csv");
    std::fs::write(&log_path, log).unwrap();
    let plan = dir.path().join("gc.toml");
    std::fs::write(
        &plan,
        format!(
            "name = \"S4.4-gc\"\nseed = 5\nruntime = \"3s\"\ntargets = [\"{}\"]\n[matrix]\ninterface = [\"libaio\"]\nrw = [\"randwrite\"]\nqd = [4]\n",
            data.display()
        ),
    )
    .unwrap();
    let db = dir.path().join("iolab.db");
    let (db_s, log_s) = (db.to_str().unwrap(), log_path.to_str().unwrap());
    iolab(&["sweep", plan.to_str().unwrap(), "--db", db_s, "--quiet", "--energy", "meter", "--meter-log", log_s, "--require-energy"])
        .assert_ok();
    let store = iolab::store::Store::open(&db).unwrap();
    let run = store.list_runs(&iolab::store::RunFilter::default()).unwrap().remove(0);
    let rec = store.run_record(run.id).unwrap().unwrap();
    let s = &rec["energy"]["sources"][0];
    assert_eq!(s["scope"], "wall_ac", "{s}");
    let w: Vec<f64> = s["per_second_watts"].as_array().expect("per-second power").iter().map(|x| x.as_f64().unwrap()).collect();
    let window = s["window_s"].as_f64().unwrap();
    assert_eq!(w.len(), window.ceil() as usize, "{w:?} over {window} s");
    // Whole seconds only (the last may be partial): the step at each UNIX second is inside each.
    for pair in w[..window.floor() as usize].windows(2) {
        assert!((pair[0] + pair[1] - 300.0).abs() < 15.0, "neighbouring seconds {pair:?} should add to 300 W: {w:?}");
    }
    assert!(w.iter().all(|x| (100.0..=200.0).contains(x)), "{w:?}");

    let out = dir.path().join("report");
    iolab(&["report", "--db", db_s, "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Garbage collection: per-second power (Fig 8); scope: wall"), "{html}");
    let svg =
        files(&out.join("figures"), "svg").into_iter().find(|p| p.to_str().unwrap().contains("per-second-power")).expect("no power figure");
    let svg = std::fs::read_to_string(svg).unwrap();
    assert_eq!(svg.matches("class=\"mark\"").count(), w.len(), "a mark per second");
    assert!(html.contains("that second's own latency counts"), "the figure says where Fig 7b's per-second p99 comes from");
    // Each stored second keeps its own p50 and p99 (the series' extra column), read back whole.
    let series = rec["results"]["series"].as_array().unwrap();
    assert!(
        series.len() >= 3 && series.iter().all(|p| p["p50_lat_ns"].as_u64().unwrap() <= p["p99_lat_ns"].as_u64().unwrap()),
        "{series:?}"
    );
    let p99 =
        files(&out.join("figures"), "svg").into_iter().find(|p| p.to_str().unwrap().contains("per-second-p99")).expect("no p99 figure");
    assert_eq!(std::fs::read_to_string(p99).unwrap().matches("class=\"mark\"").count(), series.len(), "a p99 mark per second");
    let figures = html.matches("<figure class=\"fig\"").count();
    assert_renders("gc_power_over_time_from_a_meter_log", &out, figures, dir.path());
}

/// Where the user-space driver cannot run (a loop device has no NVMe controller to take), its
/// rows stand in S1's Table 2 and in S4.6's reduction table (Figs 17-18) with the reason, as in
/// S5's Table III, instead of vanishing: S1.1 (restricted to io_uring and the driver, a few
/// hundred I/Os) and S4.6 (the suite's quick part) on a loop device, then the report.
#[test]
fn user_space_rows_on_a_loop_device_say_why_they_did_not_run() {
    const NAME: &str = "user_space_rows_on_a_loop_device_say_why_they_did_not_run";
    if !crate::common::is_root() || !Path::new("/dev/loop-control").exists() {
        crate::common::skip(NAME, "needs root and loop devices");
        return;
    }
    let _loops = crate::common::LOOPS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = work_dir();
    let backing = dir.path().join("loop.img");
    std::fs::write(&backing, vec![0u8; 32 << 20]).unwrap();
    let out = Command::new("losetup").args(["-f", "--show"]).arg(&backing).output().expect("cannot run losetup");
    assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
    struct Detach(String);
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = Command::new("losetup").args(["-d", &self.0]).status();
        }
    }
    let dev = Detach(String::from_utf8_lossy(&out.stdout).trim().to_string());
    let db = dir.path().join("iolab.db");
    let db_s = db.to_str().unwrap();
    let plan = dir.path().join("s1.toml");
    std::fs::write(
        &plan,
        "name = \"S1.1-latency\"\nreplicates = 2\nios = 300\nsize = \"8m\"\n[matrix]\ninterface = [\"io_uring\", \"vfio-nvme\"]\ncomplete = [\"irq\", \"poll\"]\nrw = [\"randread\", \"randwrite\"]\n",
    )
    .unwrap();
    iolab(&["sweep", plan.to_str().unwrap(), &dev.0, "--destructive", &dev.0, "--db", db_s, "--quiet"]).assert_ok();
    iolab(&["suite", "run", "S4", "--quick", "--part", "S4.6", &dev.0, "--size", "8m", "--destructive", &dev.0, "--db", db_s, "--quiet"])
        .assert_ok();
    let out = dir.path().join("report");
    iolab(&["report", "--db", db_s, "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    let table = |part: &str| {
        let csv = files(&out.join("tables"), "csv")
            .into_iter()
            .find(|p| p.to_str().unwrap().contains(part))
            .unwrap_or_else(|| panic!("no table {part}: {:?}", files(&out.join("tables"), "csv")));
        std::fs::read_to_string(csv).unwrap()
    };
    // S1: the baseline's row, with the driver's own reason in the % slower column.
    let t = table("hotstorage-23-table-2");
    let row = t.lines().find(|l| l.starts_with("iolab user-space driver (SPDK class)")).unwrap_or_else(|| panic!("no user-space row: {t}"));
    assert!(row.contains("not run here") && row.contains("not run: vfio-nvme"), "{row}");
    assert!(t.lines().any(|l| l.starts_with("io_uring irq,") && l.contains("no user-space row")), "{t}");
    // S4.6: the driver against io_uring by interrupt, each pattern and block size, with the reason.
    let t = table("s4-6-user-space-mean-latency-saved");
    for rw in ["randread", "randwrite"] {
        for bs in ["4 KiB", "128 KiB"] {
            let row = t
                .lines()
                .find(|l| l.starts_with(&format!("{rw},{bs},iolab user-space driver (SPDK class),io_uring irq,")))
                .unwrap_or_else(|| panic!("no user-space row for {rw} {bs}: {t}"));
            assert!(row.contains("not run here") && row.contains("not run: vfio-nvme"), "{row}");
        }
    }
}

/// S4.6 as the VM rig ran it (tests/vm/guest/vfio-studies.sh booted with `--append
/// iolab_studies_capture`): the suite's quick part on the emulated NVMe namespace, the user-space
/// driver's runs made by iolab's own driver through VFIO, the kernel's through io_uring on the
/// same namespace. Stored as a sweep of the part's quick plan there and reported, the reduction
/// table (Figs 17-18) sets each driver row against io_uring by interrupt on that namespace,
/// although the driver's records name no block device (the kernel's is gone while the driver
/// holds the controller); the device column names the namespace for both.
#[test]
fn s4_6_sets_the_user_space_driver_against_io_uring_on_the_rig_s_namespace() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/s4/user-space-records.json.gz");
    let json = Command::new("gzip").arg("-dc").arg(&fixture).output().expect("cannot run gzip");
    assert!(json.status.success(), "gzip -dc {}", fixture.display());
    let records: Vec<serde_json::Value> = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(records.len(), 12, "io_uring irq and poll, and the driver, x randread, randwrite x 4 KiB, 128 KiB");
    let targets = vec![records[0]["spec"]["targets"][0].as_str().unwrap().to_string()];
    let part = iolab::studies::part("S4.6-user-space").unwrap();
    let given = iolab::studies::Given { targets: &targets, size: Some("8m"), destructive: &targets };
    let plan = part.plan(true, &given).unwrap().unwrap();
    let e = iolab::plan::sweep::expand(&plan, &[]).unwrap();
    let runs: Vec<(i64, u32, String, serde_json::Value)> = e
        .order
        .iter()
        .enumerate()
        .map(|(n, (rep, i))| (n as i64, *rep, e.configs[*i].key.clone(), serde_json::to_value(&e.configs[*i].job).unwrap()))
        .collect();
    let dir = work_dir();
    let db = dir.path().join("iolab.db");
    let mut store = iolab::store::Store::open(&db).unwrap();
    let sweep = store.create_sweep(&e.name, &plan, part.name, 1, &runs).unwrap();
    for p in store.planned_runs(sweep).unwrap() {
        let mut r = records
            .iter()
            .find(|r| r["store"]["config_key"] == p.config_key.as_str() && r["store"]["replicate"] == p.replicate)
            .unwrap_or_else(|| panic!("no record of {} in the fixture", p.config_key))
            .clone();
        r.as_object_mut().unwrap().remove("store");
        store.record_run(Some(p.id), &r).unwrap();
    }
    let out = dir.path().join("report");
    iolab(&["report", "--db", db.to_str().unwrap(), "--suite", "S4", "--out", out.to_str().unwrap(), "--quiet"]).assert_ok();
    let table = |part: &str| {
        let csv = files(&out.join("tables"), "csv")
            .into_iter()
            .find(|p| p.to_str().unwrap().contains(part))
            .unwrap_or_else(|| panic!("no table {part}: {:?}", files(&out.join("tables"), "csv")));
        std::fs::read_to_string(csv).unwrap()
    };
    let t = table("s4-6-user-space-mean-latency-saved");
    for rw in ["randread", "randwrite"] {
        for bs in ["4 KiB", "128 KiB"] {
            let row = t
                .lines()
                .find(|l| l.starts_with(&format!("{rw},{bs},iolab user-space driver (SPDK class),io_uring irq,")))
                .unwrap_or_else(|| panic!("no user-space row against io_uring irq for {rw} {bs}: {t}"));
            assert!(row.ends_with(" %") && !row.contains("not run"), "{row}");
        }
    }
    let t = table("s4-6-user-space-latency-and-cpu-per-i-o");
    let device = |l: &str| l.split(',').nth(3).map(str::to_string);
    let rows: Vec<&str> = t.lines().skip(1).collect();
    assert_eq!(rows.len(), 12, "{t}");
    assert!(rows.iter().all(|l| device(l).as_deref() == Some("nvme0n1")), "every row on the namespace: {t}");
}
