//! `iolab compare A B`: two configurations (or one configuration in two databases, e.g. two
//! kernels) side by side: replicate means with 95 % confidence intervals, the ratio, Welch's
//! test and a verdict.
use crate::analysis::compare::{compare, config_replicates, replicates_where, Metric, Replicates};
use crate::failure::Failure;
use crate::store::{Machine, RunFilter, Store};
use std::path::PathBuf;

pub const ALPHA: f64 = 0.05;

#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// Configuration key of A, as `iolab sweep --dry-run` or `iolab results` shows it.
    pub a: String,
    /// Configuration key of B (default: the same key, from --db-b).
    pub b: Option<String>,
    /// Database holding A.
    #[arg(long, default_value = "iolab.db")]
    pub db: PathBuf,
    /// Database holding B (default: --db).
    #[arg(long)]
    pub db_b: Option<PathBuf>,
    /// Configuration A across machines (a merged database) or tools: one column per host,
    /// kernel, target device or tool (iolab, fio for runs `iolab import fio` stored), each against
    /// the first.
    #[arg(long, value_enum, conflicts_with_all = ["b", "db_b"])]
    pub by: Option<By>,
}

/// What `--by` tells runs of one configuration apart by: a machine, or the tool that made them.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum By {
    Host,
    Kernel,
    Device,
    /// The tool that made the run (`runs.tool`).
    Tool,
}

impl By {
    fn machine(self) -> Option<Machine> {
        match self {
            By::Host => Some(Machine::Host),
            By::Kernel => Some(Machine::Kernel),
            By::Device => Some(Machine::Device),
            By::Tool => None,
        }
    }

    fn name(self) -> &'static str {
        self.machine().map_or("tool", Machine::name)
    }

    /// The run's host, kernel, device or tool.
    fn of(self, r: &crate::store::RunRow) -> Option<String> {
        self.machine().map_or_else(|| Some(r.tool.clone()), |m| m.of(r))
    }

    /// `f` narrowed to the runs of `value`.
    fn only(self, f: &RunFilter, value: &str) -> RunFilter {
        match self.machine() {
            Some(m) => m.only(f, value),
            None => RunFilter { tool: Some(value.into()), ..f.clone() },
        }
    }
}

fn fmt(m: Metric, x: f64) -> String {
    use crate::report::summary::{format_count, format_ns};
    match m {
        Metric::Iops => format_count(x),
        Metric::LatMeanNs | Metric::LatP99Ns | Metric::CpuNsPerIo | Metric::FileLatP50Ns | Metric::FileLatP99Ns => format_ns(x),
        Metric::JoulesPerIo => format!("{:.3} mJ", x * 1e3),
        m if m.is_bytes_per_joule() => format!("{}/J", crate::plan::size::format_bytes(x)),
        _ => format!("{} IO/J", format_count(x)),
    }
}

pub fn main(a: &CompareArgs) -> i32 {
    super::exit_code(run(a).map(|()| 0))
}

fn run(args: &CompareArgs) -> Result<(), Failure> {
    if let Some(by) = args.by {
        return across(args, by);
    }
    let db_b = args.db_b.clone().unwrap_or_else(|| args.db.clone());
    let key_b = args.b.clone().unwrap_or_else(|| args.a.clone());
    if args.b.is_none() && args.db_b.is_none() {
        return Err(Failure::invalid("give two configurations, or one configuration and --db-b with a second database".into()));
    }
    let (sa, sb) = (Store::open_existing(&args.db)?, Store::open_existing(&db_b)?);
    let ra = config_replicates(&sa, &args.a)?;
    let rb = config_replicates(&sb, &key_b)?;
    if ra.values.iter().all(|(_, v)| v.is_empty()) {
        return Err(Failure::invalid(format!("no finished runs of '{}' in {}", args.a, crate::secret::redact_path(&args.db))));
    }
    if rb.values.iter().all(|(_, v)| v.is_empty()) {
        return Err(Failure::invalid(format!("no finished runs of '{key_b}' in {}", crate::secret::redact_path(&db_b))));
    }
    println!("A: {} ({})\nB: {} ({})", args.a, crate::secret::redact_path(&args.db), key_b, crate::secret::redact_path(&db_b));
    table(&ra, &rb);
    println!("Welch's t-test (unequal variances), two-sided, alpha {ALPHA}; the papers' Student's test assumes equal variances.");
    Ok(())
}

/// The metrics of B against A, one line each.
fn table(ra: &Replicates, rb: &Replicates) {
    println!("{:<14} {:>24} {:>24} {:>8} {:>9}  verdict (B vs A)", "metric", "A mean ± 95% CI (n)", "B mean ± 95% CI (n)", "B/A", "p");
    for c in compare(ra, rb, ALPHA) {
        let side = |s: &crate::analysis::stats::Summary| {
            format!("{} ± {} ({})", fmt(c.metric, s.mean), s.ci95_half_width.map(|h| fmt(c.metric, h)).unwrap_or("-".into()), s.n)
        };
        println!(
            "{:<14} {:>24} {:>24} {:>8} {:>9}  {}",
            c.metric.name(),
            side(&c.a),
            side(&c.b),
            c.ratio.map(|r| format!("{r:.3}")).unwrap_or("-".into()),
            c.welch.as_ref().map(|w| format!("{:.2e}", w.p)).unwrap_or("-".into()),
            c.verdict.describe(ALPHA)
        );
    }
}

/// One configuration on every machine (or by every tool) of a database: the first (by name;
/// by tool, iolab) is A, each other B.
fn across(args: &CompareArgs, by: By) -> Result<(), Failure> {
    let store = Store::open_existing(&args.db)?;
    let rows = store.list_runs(&RunFilter { config_key: Some(args.a.clone()), status: Some("ok".into()), ..Default::default() })?;
    let mut machines: Vec<String> = rows.iter().filter_map(|r| by.of(r)).collect();
    // By tool, iolab's own runs are A where there are any.
    machines.sort_by_key(|m| (by == By::Tool && m != "iolab", m.clone()));
    machines.dedup();
    let what = by.name();
    if machines.len() < 2 {
        return Err(Failure::invalid(format!(
            "'{}' in {} was measured {} {} {what}{}: --by {what} needs runs {} two or more ({})",
            args.a,
            crate::secret::redact_path(&args.db),
            if by == By::Tool { "by" } else { "on" },
            machines.len(),
            machines.first().map(|m| format!(" ({m})")).unwrap_or_default(),
            if by == By::Tool { "of" } else { "from" },
            if by == By::Tool { "store another tool's runs with `iolab import`" } else { "merge databases with `iolab merge`" }
        )));
    }
    let select = |m: &str| by.only(&RunFilter { config_key: Some(args.a.clone()), status: Some("ok".into()), ..Default::default() }, m);
    let ra = replicates_where(&store, &select(&machines[0]))?;
    println!("{} in {}: by {what}, each against A = {}", args.a, crate::secret::redact_path(&args.db), machines[0]);
    for m in &machines[1..] {
        let rb = replicates_where(&store, &select(m))?;
        println!("\nB = {m}");
        table(&ra, &rb);
    }
    println!(
        "\nWelch's t-test (unequal variances), two-sided, alpha {ALPHA}, each {} against A without correction for the {} comparisons.",
        if by == By::Tool { "tool" } else { "machine" },
        machines.len() - 1
    );
    Ok(())
}
