//! Each study's quick report rendered from a fixture database, and the drawing checked so that it
//! cannot drift back (issue 28): block-size axes in binary units, no two series of a figure in
//! the same colour and dash, no two bars or legend entries with the same label, titles that cite
//! only their own paper and are not another part's, integers printed as integers, and every part
//! of the study present (one that cannot run, or has no runs, with the reason).
//!
//! The fixture is made the way a suite makes its database, without a device: each part's quick
//! plan is expanded and stored as a sweep (two fake devices, so parts that draw a line per device
//! overlay two), and every planned run is stored through the store API as a real `iolab run`
//! record with its spec replaced by the planned job and deterministic synthetic numbers (the
//! report reads only the store). Profiled parts get a 13-layer split, stages and the run's CPU by
//! module. `IOLAB_REPORT_STUDIES_OUT=DIR` keeps each study's report in DIR/S1 … DIR/S6.
use crate::common::iolab;
use iolab::studies::{Given, STUDIES};
use serde_json::{json, Value};
use std::path::Path;

const PAPERS: [(&str, &str); 6] =
    [("S1", "HotStorage'23"), ("S2", "CHEOPS'23"), ("S3", "HotStorage'22"), ("S4", "IISWC'19"), ("S5", "FPL'18"), ("S6", "IISWC'26")];

/// Thirteen layers drawn (and idle, which the bars leave out): more than the old palette's ten.
const LAYERS: [&str; 14] = [
    "iolab",
    "user libraries",
    "system call",
    "io_uring",
    "libaio",
    "VFS",
    "block layer",
    "I/O scheduler",
    "driver",
    "interrupt",
    "softirq",
    "scheduler",
    "rest of kernel",
    "idle",
];

/// A number in [0, 1) from a text, the same every time.
fn spread(s: &str) -> f64 {
    // FNV-1a, then splitmix64's finaliser: keys that differ in their last character land far apart.
    let mut h = s.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100000001b3));
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d049bb133111eb);
    ((h ^ (h >> 31)) % 1000) as f64 / 1000.0
}

/// The record of one planned run: a real record, its spec the planned job, its numbers made up
/// from the configuration (so configurations differ, replicates nearly agree).
fn record(base: &Value, job: &Value, key: &str, replicate: u32, profiled: (bool, bool)) -> Value {
    let mut r = base.clone();
    for (k, v) in job.as_object().unwrap() {
        r["spec"][k] = v.clone();
    }
    let (qd, bs, threads) =
        (job["qd"].as_f64().unwrap_or(1.0), job["bs"].as_f64().unwrap_or(4096.0), job["threads"].as_f64().unwrap_or(1.0));
    let iops =
        2e4 * (1.0 + spread(key)) * qd.min(32.0).sqrt() * threads.min(8.0) / (bs / 4096.0).powf(0.6) * (1.0 + 0.01 * replicate as f64);
    let lat = qd * threads / iops * 1e9;
    for d in ["total", "read"] {
        let t = &mut r["results"][d];
        t["iops"] = json!(iops);
        t["bw_bytes_per_s"] = json!(iops * bs);
        t["lat_ns"]["mean"] = json!(lat);
        t["lat_ns"]["p99"] = json!(lat * 3.0);
        t["lat_ns"]["p99_999"] = json!(lat * 9.0);
    }
    r["results"]["cpu"]["cores"] = json!(0.2 + spread(key));
    // Per-component efficiency, as the energy layer writes it where sources measured the drive
    // and the CPU (the whole system left unmeasured, as on most machines).
    let (ssd_w, cpu_w) = (5.0 + 3.0 * spread(&format!("{key} ssd")), 30.0 + 20.0 * spread(&format!("{key} cpu")));
    let eff = |component: &str, scope: &str, w: f64| {
        json!({"component": component, "source": "fixture", "scope": scope, "mean_watts": w,
               "iops_per_joule": iops / w, "bytes_per_joule": iops * bs / w})
    };
    r["energy"]["efficiency"] = json!([eff("ssd", "ssd", ssd_w), eff("cpu", "cpu_package", cpu_w)]);
    // S6.4: each run's own idle baseline, taken after its power state was set (state 1, a
    // non-operational one, draws a fraction of state 0's), the controller's states as the run
    // read them back, and the efficiency above that idle power.
    if let Some(state) = key.split(',').find_map(|kv| kv.strip_prefix("nvme_power_state=")).and_then(|s| s.parse::<u64>().ok()) {
        let (ssd_idle, cpu_idle) = (if state == 0 { 3.5 } else { 0.25 }, 12.0);
        let idle =
            |scope: &str, w: f64| json!({"source": "fixture", "scope": scope, "idle_watts": w, "idle_window_s": 2.0, "coverage": 1.0});
        r["energy"]["idle_baseline"] = json!([idle("ssd", ssd_idle), idle("cpu_package", cpu_idle)]);
        r["energy"]["idle_baseline_taken"] = json!("per_run");
        for (e, (w, i)) in r["energy"]["efficiency"].as_array_mut().unwrap().iter_mut().zip([(ssd_w, ssd_idle), (cpu_w, cpu_idle)]) {
            e["iops_per_dynamic_joule"] = json!(iops / (w - i));
            e["bytes_per_dynamic_joule"] = json!(iops * bs / (w - i));
        }
        let ps = |n: u64, w: f64, nops: bool| json!({"state": n, "max_power_w": w, "non_operational": nops, "entry_latency_us": 210 * n, "exit_latency_us": 1200 * n});
        r["environment"]["device_settings"] =
            json!([{"nvme_power": {"controller": "nvme0", "power_states": [ps(0, 8.0, false), ps(1, 0.07, true)], "power_state": state}}]);
    }
    let per_io = json!({"instructions": 4000.0 + 3000.0 * spread(key), "ipc": 1.1, "cache_miss_rate": 0.02});
    r["cost"]["counters"] = json!({"workload_per_io": per_io, "system_per_io": per_io});
    let complete = job["complete"].as_str().unwrap_or("irq");
    let observed = if complete == "irq" { "interrupt" } else { "polled" };
    r["completion_path"] = json!({"requested": complete, "mechanism": observed, "observed": observed, "fell_back": false});
    if profiled.0 {
        let layers: Vec<Value> = LAYERS
            .iter()
            .enumerate()
            .map(|(i, l)| json!({"layer": l, "self_share": 0.05, "self_ns_per_io": 200.0 + 100.0 * i as f64 + 500.0 * spread(key)}))
            .collect();
        let module = |m: &str, layer: &str, share: f64| json!({"space": "kernel", "module": m, "layer": layer, "share": share, "ns_per_io": share * 3000.0});
        r["cost"]["profile"] = json!({
            "samples": 400,
            "hardware": {"unavailable": "no PMU: this machine's CPUs count no cycles (fixture)"},
            "layers": layers,
            "run": {"samples": 400, "user_share": 0.3, "kernel_share": 0.7, "ns_per_io": 3000.0,
                    "modules": [module("vmlinux", "block layer", 0.5), module("nvme", "driver", 0.2)],
                    "functions": [{"space": "kernel", "module": "nvme", "layer": "driver", "function": "nvme_queue_rq", "share": 0.1}]},
            "unprofiled": {"iops": iops * 1.1, "mean_latency_ns": lat * 0.9, "iops_change": -0.09, "mean_latency_change": 0.1},
        });
    }
    if profiled.1 {
        let stage = |from: &str, to: &str, layer: &str, share: f64| json!({"from": from, "to": to, "layer": layer, "requests": 100, "mean_ns": share * lat, "share": share});
        r["cost"]["stages"] = json!({
            "requests_matched": 100,
            "end_to_end": {"from": "system call entry", "to": "system call exit", "layer": "all", "requests": 100, "mean_ns": lat},
            "stages": [stage("system call entry", "bio queued", "VFS and block layer", 0.2), stage("bio queued", "request issued", "block layer", 0.1),
                       stage("request issued", "interrupt", "device", 0.6), stage("interrupt", "system call exit", "completion", 0.1)],
            "iolab_p50_ns": lat,
        });
    }
    r
}

/// A study's quick suite stored as its parts' sweeps; returns the database's path.
fn fixture(study: &iolab::studies::Study, dir: &Path) -> std::path::PathBuf {
    let base = crate::store::real_record();
    let db = dir.join("fixture.db");
    let mut store = iolab::store::Store::open(&db).unwrap();
    let targets = ["/dev/fixture0".to_string(), "/dev/fixture1".to_string()];
    for part in study.parts {
        let Some(plan) = part.plan(true, &Given { targets: &targets, ..Given::default() }).unwrap() else { continue };
        let e = iolab::plan::sweep::expand(&plan, &[]).unwrap_or_else(|e| panic!("{}: {e}", part.name));
        let runs: Vec<(i64, u32, String, Value)> = e
            .order
            .iter()
            .enumerate()
            .map(|(n, (rep, i))| (n as i64, *rep, e.configs[*i].key.clone(), serde_json::to_value(&e.configs[*i].job).unwrap()))
            .collect();
        let sweep = store.create_sweep(&e.name, &plan, part.name, 1, &runs).unwrap();
        for p in store.planned_runs(sweep).unwrap() {
            let rec = record(&base, &p.spec, &p.config_key, p.replicate, (e.profile.layers, e.profile.stages));
            store.record_run(Some(p.id), &rec).unwrap_or_else(|e| panic!("{}: {e}", part.name));
        }
    }
    db
}

/// The texts of the elements of `svg` that open with `open` (e.g. `<text class="tick"`).
fn texts<'a>(svg: &'a str, open: &str) -> Vec<&'a str> {
    svg.match_indices(open)
        .filter_map(|(at, _)| {
            let rest = &svg[at..];
            let start = rest.find('>')? + 1;
            Some(&rest[start..start + rest[start..].find('<')?])
        })
        .collect()
}

/// Values of attribute `name` in `svg`'s elements that open with `open`.
fn attrs<'a>(svg: &'a str, open: &str, name: &str) -> Vec<&'a str> {
    let needle = format!("{name}=\"");
    svg.match_indices(open)
        .filter_map(|(at, _)| {
            let rest = &svg[at..svg[at..].find('>').map(|e| at + e)?];
            let v = &rest[rest.find(&needle)? + needle.len()..];
            Some(&v[..v.find('"')?])
        })
        .collect()
}

fn duplicates<'a>(v: &[&'a str]) -> Vec<&'a str> {
    let mut d: Vec<&str> = v.iter().enumerate().filter(|(i, x)| v[..*i].contains(x)).map(|(_, x)| *x).collect();
    d.dedup();
    d
}

/// A number printed after "QD" or "queue depth " that has a fraction where it is a whole.
fn fractional_queue_depths(text: &str) -> Vec<String> {
    let mut bad = Vec::new();
    for lead in ["QD", "QD ", "queue depth ", "qd "] {
        for (at, _) in text.match_indices(lead) {
            let n: String = text[at + lead.len()..].chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
            if n.contains('.') && n.chars().next().is_some_and(|c| c.is_ascii_digit()) {
                bad.push(format!("{lead}{n}"));
            }
        }
    }
    bad
}

/// Returns (figures, figures against block size).
fn check_study(study: &iolab::studies::Study, out: &Path) -> (usize, usize) {
    let mut blocks = 0;
    let page = std::fs::read_to_string(out.join("report.html")).unwrap();
    let own = PAPERS.iter().find(|(id, _)| *id == study.id).unwrap().1;
    let foreign: Vec<&str> = PAPERS.iter().filter(|(id, p)| *id != study.id && *p != own).map(|(_, p)| *p).collect();
    // Every part present: drawn, or with the reason it has no runs.
    for p in study.parts {
        assert!(page.contains(p.name), "{}: the report lacks part {}", study.id, p.name);
        if p.runs.is_none() {
            assert!(page.contains(&format!("{} (no runs)", p.name)) && page.contains("iolab cannot run this part"), "{}", p.name);
        }
    }
    // … in the study's order.
    let at: Vec<usize> = study.parts.iter().map(|p| page.find(&format!("<h2>{} (", p.name)).unwrap_or(usize::MAX)).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{}: sections not in the study's order: {at:?}", study.id);
    let svgs = crate::report::files(&out.join("figures"), "svg");
    assert!(!svgs.is_empty(), "{}: no figures", study.id);
    for f in &svgs {
        let svg = std::fs::read_to_string(f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        // Axes: a block size in binary units, never 4.1k / 8.19k.
        let ticks = texts(&svg, "<text class=\"tick x\"");
        if svg.contains(">block size<") {
            let binary = |t: &&str| [" B", " KiB", " MiB"].iter().any(|u| t.ends_with(u));
            assert!(!ticks.is_empty() && ticks.iter().all(binary), "{name}: block size not in binary units: {ticks:?}");
            blocks += 1;
        }
        // Colours: no two series (or bar parts) drawn alike.
        let swatches = |attr| attrs(&svg, " class=\"swatch\"", attr);
        let dashes = if svg.contains("data-dash=") { swatches("data-dash") } else { vec![""; swatches("data-colour").len()] };
        let looks: Vec<String> = swatches("data-colour").iter().zip(dashes).map(|(c, d)| format!("{c}/{d}")).collect();
        let looks: Vec<&str> = looks.iter().map(String::as_str).collect();
        assert!(duplicates(&looks).is_empty(), "{name}: series drawn alike: {:?}", duplicates(&looks));
        // Labels: every legend entry and every bar named, and never two alike.
        let legend: Vec<&str> = svg
            .match_indices("<g class=\"legend\"")
            .filter_map(|(at, _)| {
                let rest = &svg[at..];
                let name = &rest[rest.find("<title>")? + 7..];
                Some(&name[..name.find("</title>")?])
            })
            .collect();
        assert!(legend.len() >= looks.len(), "{name}: a legend entry without its name");
        // What each entry shows: its last text, whole.
        let shown: Vec<&str> = svg
            .match_indices("<g class=\"legend\"")
            .filter_map(|(at, _)| {
                let g = &svg[at..at + svg[at..].find("</g>")?];
                let text = &g[g.rfind("<text")?..];
                Some(&text[text.find('>')? + 1..text.find("</text>")?])
            })
            .collect();
        assert_eq!(shown, legend, "{name}: a legend entry not shown whole");
        assert!(duplicates(&legend).is_empty(), "{name}: legend names twice: {:?}", duplicates(&legend));
        let bars = texts(&svg, "<text class=\"bar-label\"");
        assert!(duplicates(&bars).is_empty(), "{name}: bars labelled alike: {:?}", duplicates(&bars));
        assert!(!bars.iter().any(|l| l.ends_with('…')), "{name}: a bar label cut short: {bars:?}");
        // Titles cite their own paper only.
        for p in &foreign {
            assert!(!svg.contains(p), "{name}: {} cites {p}", study.id);
        }
        assert!(fractional_queue_depths(&svg).is_empty(), "{name}: {:?}", fractional_queue_depths(&svg));
    }
    // Tables: each its own title, none citing another paper, queue depths whole.
    let mds = crate::report::files(&out.join("tables"), "md");
    let titles: Vec<String> = mds.iter().map(|m| std::fs::read_to_string(m).unwrap().lines().next().unwrap_or("").to_string()).collect();
    let refs: Vec<&str> = titles.iter().map(String::as_str).collect();
    assert!(duplicates(&refs).is_empty(), "{}: tables titled alike: {:?}", study.id, duplicates(&refs));
    for (m, t) in mds.iter().zip(&titles) {
        assert!(!foreign.iter().any(|p| t.contains(p)), "{}: {t}", m.display());
        let text = std::fs::read_to_string(m).unwrap();
        assert!(fractional_queue_depths(&text).is_empty(), "{}: {:?}", m.display(), fractional_queue_depths(&text));
    }
    (svgs.len(), blocks)
}

#[test]
fn every_study_quick_report_draws_its_parts_legibly() {
    let keep = std::env::var_os("IOLAB_REPORT_STUDIES_OUT").map(std::path::PathBuf::from);
    for study in STUDIES {
        let dir = tempfile::Builder::new().prefix("iolab-report-studies-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let db = fixture(study, dir.path());
        let out = keep.as_ref().map(|k| k.join(study.id)).unwrap_or_else(|| dir.path().join("report"));
        let run = iolab(&["report", "-q", "--db", db.to_str().unwrap(), "--suite", study.id, "--out", out.to_str().unwrap()]);
        run.assert_ok();
        let (figures, blocks) = check_study(study, &out);
        eprintln!("{}: {figures} figures checked, {blocks} against block size", study.id);
        if ["S4", "S5"].contains(&study.id) {
            assert!(blocks > 0, "{}: no figure against block size", study.id);
        }
        if study.id == "S2" {
            // One x (QD1, one thread) for every series: bars, not a line chart of single points.
            let qd1 = crate::report::files(&out.join("figures"), "svg")
                .into_iter()
                .find(|f| f.to_string_lossy().contains("instructions-per-i-o-at-qd1"));
            let qd1 = std::fs::read_to_string(qd1.expect("S2.1 draws instructions per I/O")).unwrap();
            assert!(qd1.contains("data-kind=\"stacked-bars\""), "S2.1 is not drawn as bars");
            // Fig 5's axes as the paper drew them: x IOPS, y mean latency.
            let jcurve = crate::report::files(&out.join("figures"), "svg")
                .into_iter()
                .find(|f| f.to_string_lossy().contains("j-curves"))
                .expect("S2.2 draws J-curves");
            let jcurve = std::fs::read_to_string(jcurve).unwrap();
            assert!(jcurve.contains("mean latency against IOPS"), "J-curve title");
            let x = jcurve.find("text-anchor=\"middle\">IOPS</text>").expect("x axis: IOPS");
            let y = jcurve.find(">mean latency (µs)</text>").expect("y axis: mean latency");
            assert!(x < y, "the x axis label comes first");
            // Fig 4 in %: the layer split's shares, a row adding up to 100.
            let html = std::fs::read_to_string(out.join("report.html")).unwrap();
            assert!(html.contains("each layer&#39;s share in %") || html.contains("each layer's share in %"), "no layer shares table");
            assert!(html.contains("S2.6-request-stages"), "the stages are a part of their own");
        }
        if study.id == "S3" {
            // Table 2 where no PMU counted loads and stores: the panel says so, with the reason.
            let t2 = s3_table2_svg(&out).expect("S3 draws Table 2's panel");
            assert!(t2.contains("unavailable: no PMU"), "Table 2 without the no-PMU reason: {t2}");
        }
    }
}

/// S3's Table 2 panel (its SVG), where the report drew it unavailable.
fn s3_table2_svg(out: &Path) -> Option<String> {
    crate::report::files(&out.join("figures"), "svg")
        .into_iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .find(|svg| svg.contains(iolab::studies::s3::TABLE2))
}

/// HotStorage'22 Table 2 from a database whose profiled S3 runs counted loads and stores (a PMU's
/// `L1-dcache-loads`/`L1-dcache-stores` per layer, as `meters::profile` records them): a row per
/// kernel part, loads and stores per I/O for each completion method, user space left out.
#[test]
fn s3_table_2_is_drawn_from_stored_loads_and_stores() {
    let study = iolab::studies::find("S3").unwrap();
    let dir = tempfile::Builder::new().prefix("iolab-report-s3-t2-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let base = crate::store::real_record();
    let db = dir.path().join("fixture.db");
    let mut store = iolab::store::Store::open(&db).unwrap();
    let targets = ["/dev/fixture0".to_string()];
    let part = study.parts.iter().find(|p| p.runs.as_ref().is_some_and(|r| r.profile == Some("layers"))).expect("S3 has a profiled part");
    let plan = part.plan(true, &Given { targets: &targets, ..Given::default() }).unwrap().unwrap();
    let e = iolab::plan::sweep::expand(&plan, &[]).unwrap();
    let runs: Vec<(i64, u32, String, Value)> = e
        .order
        .iter()
        .enumerate()
        .map(|(n, (rep, i))| (n as i64, *rep, e.configs[*i].key.clone(), serde_json::to_value(&e.configs[*i].job).unwrap()))
        .collect();
    let sweep = store.create_sweep(&e.name, &plan, part.name, 1, &runs).unwrap();
    for p in store.planned_runs(sweep).unwrap() {
        let mut rec = record(&base, &p.spec, &p.config_key, p.replicate, (true, false));
        // Polling executes more loads in the block layer than interrupts do, as the paper found.
        let polled = p.spec["complete"].as_str() != Some("irq");
        for l in rec["cost"]["profile"]["layers"].as_array_mut().unwrap() {
            let (loads, stores) = match l["layer"].as_str().unwrap() {
                "block layer" if polled => (900.0, 300.0),
                "block layer" => (400.0, 150.0),
                "iolab" => (5000.0, 2000.0),
                _ => (100.0, 40.0),
            };
            l["self_loads_per_io"] = json!(loads);
            l["self_stores_per_io"] = json!(stores);
        }
        rec["cost"]["profile"]["hardware"] =
            json!({"event": "{cycles,instructions,L1-dcache-loads,L1-dcache-stores}:S", "samples": 400, "loads": 1, "stores": 1});
        store.record_run(Some(p.id), &rec).unwrap();
    }
    drop(store);
    let out = dir.path().join("report");
    let run = iolab(&["report", "-q", "--db", db.to_str().unwrap(), "--suite", "S3", "--out", out.to_str().unwrap()]);
    run.assert_ok();
    assert!(s3_table2_svg(&out).is_none(), "Table 2 drawn as unavailable where loads and stores were counted");
    let md = crate::report::files(&out.join("tables"), "md")
        .into_iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .find(|t| t.contains(iolab::studies::s3::TABLE2))
        .expect("no Table 2 in the S3 report");
    let row = |part: &str| {
        md.lines().find(|l| l.starts_with(&format!("| {part} |"))).unwrap_or_else(|| panic!("no row {part}:\n{md}")).to_string()
    };
    let header = md.lines().find(|l| l.starts_with("| kernel part |")).unwrap_or_else(|| panic!("{md}"));
    for method in ["interrupt (pvsync2)", "classic polling", "hybrid polling"] {
        assert!(header.contains(method) && header.contains("loads per I/O"), "{method}: {header}");
    }
    assert!(header.contains("interrupt (pvsync2): loads per I/O | interrupt (pvsync2): stores per I/O"), "{header}");
    assert!(row("block layer").starts_with("| block layer | 400 | 150 | 900 | 300 |"), "{}", row("block layer"));
    assert!(md.lines().any(|l| l.starts_with("| kernel (all parts) |")), "{md}");
    assert!(
        !md.contains("| iolab |") && !md.contains("| idle |") && !md.contains("| user libraries |"),
        "user space is no kernel part:\n{md}"
    );
}

/// A study dry run says each reason rules dropped combinations for once, with a count and an
/// example; `--verbose` lists them all.
#[test]
fn a_dry_run_summarises_dropped_combinations_by_reason() {
    let dir = tempfile::Builder::new().prefix("iolab-dry-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = dir.path().join("dry.db");
    let args = |verbose: bool| {
        let mut a = vec!["suite", "run", "S2", "--quick", "--part", "S2.2", "--dry-run", "--db", db.to_str().unwrap()];
        if verbose {
            a.push("--verbose");
        }
        iolab(&a)
    };
    let short = args(false);
    short.assert_ok();
    let summary: Vec<&str> = short.stdout.lines().filter(|l| l.starts_with("  dropped ")).collect();
    let verbose = args(true);
    verbose.assert_ok();
    let all: Vec<&str> = verbose.stdout.lines().filter(|l| l.starts_with("  dropped ")).collect();
    let total: usize = summary.iter().map(|l| l["  dropped ".len()..].split(' ').next().unwrap().parse::<usize>().unwrap()).sum();
    assert_eq!(total, all.len(), "the counts add up to every dropped combination:\n{}", short.stdout);
    assert!(summary.len() < all.len() && summary.iter().all(|l| l.contains(" × ") && l.contains("(e.g. ")), "{}", short.stdout);
    assert!(short.stdout.contains("--verbose lists every dropped combination"), "{}", short.stdout);
}

/// S6.4's idle power per power state: a row per state (its configurations' runs together) with
/// each component a source measured in the runs' own baselines (SSD, CPU; the system "not
/// measured", named, never a zero), the state's kind as the controller listed it, a figure per
/// component, and the efficiency above idle; no "cannot run" entry for the idle power any more.
#[test]
fn s6_reports_the_idle_power_of_each_power_state() {
    let study = iolab::studies::find("S6").unwrap();
    let dir = tempfile::Builder::new().prefix("iolab-report-s6-idle-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let db = fixture(study, dir.path());
    let out = dir.path().join("report");
    iolab(&["report", "-q", "--db", db.to_str().unwrap(), "--suite", "S6", "--out", out.to_str().unwrap()]).assert_ok();
    let tables: Vec<String> =
        crate::report::files(&out.join("tables"), "md").into_iter().map(|f| std::fs::read_to_string(f).unwrap()).collect();
    let md = tables.iter().find(|t| t.starts_with("**Idle power per NVMe power state and component")).expect("no idle power table");
    let header = md.lines().find(|l| l.starts_with("| power state |")).unwrap_or_else(|| panic!("{md}"));
    assert_eq!(header, "| power state | kind | device | runs | SSD idle W | CPU idle W |", "{md}");
    // Two devices overlaid, two states: four rows, each the state's two configurations' runs.
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with("| 0 |") || l.starts_with("| 1 |")).collect();
    assert_eq!(rows.len(), 4, "{md}");
    let cells = |row: &str| row.trim_matches('|').split(" | ").map(|c| c.trim().to_string()).collect::<Vec<String>>();
    let first = |row: &str| cells(row).iter().map(|c| c.split(" ± ").next().unwrap().to_string()).collect::<Vec<String>>();
    assert_eq!(first(rows[0]), ["0", "operational", "fixture0", "2 of 2", "3.50", "12"], "{md}");
    assert_eq!(first(rows[3]), ["1", "non-operational", "fixture1", "2 of 2", "0.250", "12"], "{md}");
    assert!(md.contains("Not measured: system"), "{md}");
    let dynamic =
        tables.iter().find(|t| t.starts_with("**Efficiency above idle per component by NVMe power state")).expect("no above-idle table");
    assert!(dynamic.contains("SSD IOPS per dynamic J") && dynamic.contains("CPU MiB per dynamic J"), "{dynamic}");
    let measured = dynamic.lines().filter(|l| l.starts_with("| 0 |") || l.starts_with("| 1 |"));
    assert!(measured.clone().count() == 8 && measured.clone().all(|l| !l.contains("not measured")), "each run its own baseline: {dynamic}");
    let figures: Vec<String> = crate::report::files(&out.join("figures"), "svg").iter().map(|f| f.display().to_string()).collect();
    for component in ["ssd", "cpu"] {
        assert!(figures.iter().any(|f| f.contains(&format!("{component}-idle-power-per-nvme-power-state"))), "{component}: {figures:?}");
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!html.contains("idle power of the non-operational states"), "no longer a part iolab cannot run");
}

/// S4.7 (Fig 23) from records shaped like the rig's: each run's `fileset` with its per-file
/// latency and the server's window (`fileset.server`), the user-space server faster on reads
/// (38 %) than on writes (4 %). The section tables both servers' rows per rw and file order,
/// the server's CPU per request, and the reduction beside the paper's; where the user-space
/// server was skipped its rows say why.
#[test]
fn s4_7_draws_fig_23_per_server_back_end() {
    let part = iolab::studies::part("S4.7-server-client").unwrap();
    for skipped in [false, true] {
        let dir = tempfile::Builder::new().prefix("iolab-s47-").tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let base = crate::store::real_record();
        let db = dir.path().join("s47.db");
        let mut store = iolab::store::Store::open(&db).unwrap();
        let targets = ["/dev/nvme0n1".to_string()];
        let plan = part.plan(true, &Given { targets: &targets, destructive: &targets, ..Given::default() }).unwrap().unwrap();
        let e = iolab::plan::sweep::expand(&plan, &["/run/iolab/s4.7-client".to_string()]).unwrap();
        let runs: Vec<(i64, u32, String, Value)> = e
            .order
            .iter()
            .enumerate()
            .map(|(n, (rep, i))| (n as i64, *rep, e.configs[*i].key.clone(), serde_json::to_value(&e.configs[*i].job).unwrap()))
            .collect();
        let sweep = store.create_sweep(&e.name, &plan, part.name, 1, &runs).unwrap();
        for p in store.planned_runs(sweep).unwrap() {
            let server = p.spec["fileset"]["server"].as_str().unwrap().to_string();
            if skipped && server == "vfio-nvme" {
                store.record_skip(p.id, "iolab serve -i vfio-nvme did not start: no IOMMU is on").unwrap();
                continue;
            }
            let mut r = record(&base, &p.spec, &p.config_key, p.replicate, (false, false));
            let read = p.spec["rw"] == "read";
            let kernel_us = if read { 100.0 } else { 250.0 };
            let us = if server == "io_uring" {
                kernel_us
            } else if read {
                kernel_us * 0.62
            } else {
                kernel_us * 0.96
            };
            let lat = json!({"mean": us * 1e3, "p50": us * 900.0, "p99": us * 2500.0});
            r["fileset"] = json!({
                "dir": "/run/iolab/s4.7-client/iolab-fileset-1-x", "files": 200, "bytes": 6_800_000, "sizes_drawn": "4 KiB-64 KiB",
                "create": {"files": 200, "bytes": 6_800_000, "seconds": 0.5, "files_per_s": 400.0, "file_lat_ns": lat},
                "measured": {"files": 150, "bytes": 5_000_000, "seconds": 2.0, "files_per_s": 75.0, "file_lat_ns": lat},
                "fsyncs": 0,
                "server": {"server": server, "device": "/dev/nbd0", "seconds": 2.0,
                           "requests": {"read": 1200, "write": 10, "flush": 1, "trim": 0, "bytes_read": 5_000_000, "bytes_written": 40960},
                           "cpu_connections": {"user_s": 0.01, "system_s": 0.02}, "cpu_rest": {"user_s": 0.0, "system_s": 0.001},
                           "cpu_us_per_request": if server == "io_uring" { 12.5 } else { 8.25 }, "connection_cpu_us_per_request": 8.0},
            });
            store.record_run(Some(p.id), &r).unwrap();
        }
        drop(store);
        let out = dir.path().join("report");
        let run = iolab(&["report", "-q", "--db", db.to_str().unwrap(), "--suite", "S4", "--out", out.to_str().unwrap()]);
        run.assert_ok();
        let tables: Vec<String> =
            crate::report::files(&out.join("tables"), "md").iter().map(|m| std::fs::read_to_string(m).unwrap()).collect();
        let fig23 =
            tables.iter().find(|t| t.starts_with("**Fig 23: per-file latency")).unwrap_or_else(|| panic!("no Fig 23 table: {tables:?}"));
        let rows = |server: &str| fig23.lines().filter(|l| l.contains(&format!("| {server} |"))).count();
        assert_eq!(rows("io_uring"), 4, "{fig23}");
        assert_eq!(rows("vfio-nvme"), if skipped { 0 } else { 4 }, "{fig23}");
        assert!(fig23.contains("| 100 |") && fig23.contains("| 12.5 |"), "the kernel's read latency and server CPU: {fig23}");
        let reduction =
            tables.iter().find(|t| t.starts_with("**Fig 23: per-file mean latency the user-space server saves")).expect("the reduction");
        assert!(reduction.contains("loopback TCP"), "{reduction}");
        if skipped {
            assert_eq!(reduction.matches("not run: iolab serve -i vfio-nvme did not start: no IOMMU is on").count(), 4, "{reduction}");
        } else {
            let row =
                |rw: &str, order: &str| reduction.lines().find(|l| l.starts_with(&format!("| {rw} | {order} |"))).unwrap_or("").to_string();
            assert!(row("read", "seq").contains("| 38.0 % | 38-39 % |"), "{reduction}");
            assert!(row("read", "random").contains("| 38.0 % |"), "{reduction}");
            assert!(row("write", "seq").contains("| 4.0 % | 3.7-4.6 % |"), "{reduction}");
            assert!(row("write", "random").contains("| 4.0 % |"), "{reduction}");
        }
    }
}
