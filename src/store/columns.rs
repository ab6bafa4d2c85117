//! Every column of `runs`, defined once, in two tables: the `runs!` table (identity, spec and
//! environment: the fields of `RunRow`) and the `metrics!` table (the measured values: the fields
//! of `Metrics`, `RunRow::metrics`). Each line gives a column's name (also its field and its CSV
//! header), its Rust type (which fixes its SQL type, see `Stored`), the schema version that added
//! it, and how it is read from a run record. From those lines come the INSERT of `record_run`
//! (`record_values`), the SELECT list and `RunRow::read`, the CSV header and cells (`csv_layout`),
//! the columns `ALTER TABLE` adds after version 1 (schema.rs `step`) and what a migration fills in
//! Rust from the runs already stored (schema.rs `fill`). The one column in neither table is
//! `record`, the stored record itself, which `record_run` writes (extract.rs).

use super::backend::{DbError, DbRow as Row};
use super::StoreError;
use crate::record::read::{Efficiency, Record};
use rusqlite::types::Value as Sql;
use serde::Serialize;
use serde_json::Value;

/// A column as the schema and the SELECT list see it.
pub struct Column {
    pub name: &'static str,
    /// Its type in `CREATE TABLE` (with NOT NULL where it has one).
    pub sql: &'static str,
    /// The schema version that added it: version 1 creates it with `runs`, a later version adds
    /// it with `ALTER TABLE` (schema.rs generates both).
    pub since: u32,
}

/// A Rust type a metric column holds, and how it goes to SQL, comes back and prints in CSV.
pub trait Stored: Sized {
    const SQL: &'static str;
    fn to_sql(&self) -> Sql;
    fn read(r: &Row, col: &str) -> Result<Self, DbError>;
    /// The CSV cell: empty when unknown.
    fn cell(&self) -> String;
}

/// A CSV cell: empty when unknown.
pub fn cell<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(ToString::to_string).unwrap_or_default()
}

/// `Stored` for a type a row reads back as it is, and for its `Option`: `$sql` its SQL type
/// (NOT NULL for the type itself; NULL for an `Option` that is unknown, whose CSV cell is then
/// empty), `$to` its value in SQL, from a reference to it.
macro_rules! stored {
    ($($ty:ty: $sql:literal, $to:expr;)*) => {$(
        impl Stored for $ty {
            const SQL: &'static str = concat!($sql, " NOT NULL");
            fn to_sql(&self) -> Sql {
                ($to)(self)
            }
            fn read(r: &Row, col: &str) -> Result<Self, DbError> {
                r.get(col)
            }
            fn cell(&self) -> String {
                self.to_string()
            }
        }

        impl Stored for Option<$ty> {
            const SQL: &'static str = $sql;
            fn to_sql(&self) -> Sql {
                self.as_ref().map_or(Sql::Null, $to)
            }
            fn read(r: &Row, col: &str) -> Result<Self, DbError> {
                r.get(col)
            }
            fn cell(&self) -> String {
                cell(self)
            }
        }
    )*};
}

stored! {
    f64: "REAL", |x: &f64| Sql::Real(*x);
    i64: "INTEGER", |x: &i64| Sql::Integer(*x);
    u32: "INTEGER", |x: &u32| Sql::Integer((*x).into());
    bool: "INTEGER", |b: &bool| Sql::Integer((*b).into());
    String: "TEXT", |s: &String| Sql::Text(s.clone());
}

/// Stored as i64 bit for bit (SQLite has no unsigned integer).
impl Stored for Option<u64> {
    const SQL: &'static str = "INTEGER";
    fn to_sql(&self) -> Sql {
        self.map_or(Sql::Null, |x| Sql::Integer(x as i64))
    }
    fn read(r: &Row, col: &str) -> Result<Self, DbError> {
        Ok(r.get::<Option<i64>>(col)?.map(|x| x as u64))
    }
    fn cell(&self) -> String {
        cell(self)
    }
}

/// A count that is always known (0 when the record gives none), stored as `Option<u64>` is.
impl Stored for u64 {
    const SQL: &'static str = "INTEGER NOT NULL";
    fn to_sql(&self) -> Sql {
        Sql::Integer(*self as i64)
    }
    fn read(r: &Row, col: &str) -> Result<Self, DbError> {
        Ok(r.get::<i64>(col)? as u64)
    }
    fn cell(&self) -> String {
        self.to_string()
    }
}

/// A list kept as a JSON array (`targets`); a stored text that is not an array of strings reads
/// as empty. Its CSV cell joins the items with `;`.
impl Stored for Vec<String> {
    const SQL: &'static str = "TEXT NOT NULL";
    fn to_sql(&self) -> Sql {
        Sql::Text(Value::from(self.clone()).to_string())
    }
    fn read(r: &Row, col: &str) -> Result<Self, DbError> {
        Ok(serde_json::from_str(&r.get::<String>(col)?).unwrap_or_default())
    }
    fn cell(&self) -> String {
        self.join(";")
    }
}

/// Where a `runs!` column goes in the CSV export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Csv {
    /// Not exported.
    No,
    /// Under its own name.
    Yes,
    /// Under another name (`id` is `run_id`).
    As(&'static str),
    /// After the metrics (`error`, last of the header as released).
    Last,
}

/// How a `runs!` column is read from a run record (the typed view and the JSON it was read
/// from): its SQL value, or why the record cannot be stored.
pub type Reader = fn(&Record, &Value) -> Result<Sql, StoreError>;

/// A `runs!` column: the schema's view, the CSV's, and where its value comes from.
pub struct RunColumn {
    pub name: &'static str,
    /// Its type in `CREATE TABLE`/`ALTER TABLE` (with NOT NULL where it has one).
    pub sql: &'static str,
    /// The schema version that added it. The columns of versions 1 to 6 are in those versions'
    /// released SQL text (schema.rs, a test holds them equal); from version 7 on `schema::step`
    /// writes the `ALTER TABLE` from this line.
    pub since: u32,
    pub csv: Csv,
    /// Read from the record (`record_run` and the migrations' fill); None: the store's own
    /// (the row's id, its sweep and planned run, when it was recorded, its uid).
    pub from: Option<Reader>,
}

/// The schema versions whose CSV header is released: columns added later come after `error`, so
/// every released header stays the first columns of the next one.
pub const CSV_RELEASED: u32 = 6;

/// A required field of the record (`spec.bs`), as text or integer: Null is refused (a record
/// that cannot be stored).
pub fn need(path: &str, col: Sql) -> Result<Sql, StoreError> {
    if matches!(col, Sql::Null) {
        Err(StoreError::Refused(format!("run record has no usable {path}")))
    } else {
        Ok(col)
    }
}

/// The SQL type of a column: its Rust type's, or the one its line gives.
macro_rules! sql_type {
    ($ty:ty) => {
        <$ty as Stored>::SQL
    };
    ($ty:ty, $sql:literal) => {
        $sql
    };
}

/// A column's reader: none for the store's own, else the expression, on the record (`$r`, the
/// typed view) and its JSON (`$v`).
macro_rules! reader {
    ([store]) => {
        None
    };
    ([|$r:ident, $v:ident| $get:expr]) => {
        Some(|$r: &Record, $v: &Value| -> Result<Sql, StoreError> { $get })
    };
}

/// Defines `RunRow` (one typed field per column), `RUN_COLUMNS` and `RunRow::read`, from one
/// table.
macro_rules! runs {
    ($($(#[doc = $doc:literal])* $name:ident: $ty:ty $(as $sql:literal)?, since $since:literal, csv $csv:expr, from $from:tt;)*) => {
        /// A stored run: identity, spec and key metrics. Metrics are None when the run measured
        /// nothing.
        #[derive(Clone, Debug, Serialize)]
        pub struct RunRow {
            $($(#[doc = $doc])* pub $name: $ty,)*
            /// The metric columns (`metrics!`).
            #[serde(flatten)]
            pub metrics: Metrics,
        }

        /// The `runs` columns of `RunRow`, in their order there (the metrics follow, `RUN_METRICS`).
        pub const RUN_COLUMNS: &[RunColumn] = &[$(RunColumn {
            name: stringify!($name),
            sql: sql_type!($ty $(, $sql)?),
            since: $since,
            csv: $csv,
            from: reader!($from),
        }),*];

        impl RunRow {
            /// From a row selected with `select_list()`.
            pub(crate) fn read(r: &Row) -> Result<RunRow, DbError> {
                Ok(RunRow { $($name: Stored::read(r, stringify!($name))?,)* metrics: Metrics::read(r)? })
            }

            /// The CSV cells of the `runs!` columns, in `RUN_COLUMNS` order.
            fn own_cells(&self) -> Vec<String> {
                vec![$(self.$name.cell()),*]
            }
        }
    };
}

/// The value of an efficiency of the record's energy report (`energy.efficiency`) for one
/// component (ssd, cpu, system).
fn efficiency(r: &Record, component: &str, value: fn(&Efficiency) -> Option<f64>) -> Option<f64> {
    r.energy.as_ref()?.efficiency.iter().find(|e| e.component.as_deref() == Some(component)).and_then(value)
}

/// The record's `tool` object (`{"name": "fio", "version": "fio-3.33"}`, a run another tool made
/// and `iolab import` stored); None for iolab's own run, which has none.
fn tool(v: &Value) -> Option<&serde_json::Map<String, Value>> {
    v.get("tool").and_then(Value::as_object)
}

// Adding a column: one line here (or in `metrics!` for a measured value), `since` a new schema
// version whose step in schema::MIGRATIONS holds a `{metrics}` line (docs/store.md).
runs! {
    id: i64 as "INTEGER PRIMARY KEY", since 1, csv Csv::As("run_id"), from [store];
    sweep_id: Option<i64>, since 1, csv Csv::Yes, from [store];
    planned_id: Option<i64>, since 1, csv Csv::Yes, from [store];
    replicate: Option<u32>, since 1, csv Csv::Yes, from [store];
    config_key: Option<String>, since 1, csv Csv::Yes, from [store];
    /// The record's status: ok, failed, interrupted.
    status: String, since 1, csv Csv::Yes, from [|r, _v| need("status", Sql::from(r.status.map(|s| s.name().to_string())))];
    error: Option<String>, since 1, csv Csv::Last, from [|r, _v| Ok(Sql::from(r.error.clone()))];
    /// The record's schema version.
    record_schema: Option<u32>, since 1, csv Csv::No, from [|r, _v| Ok(Sql::from(r.schema_version))];
    started_at: f64, since 1, csv Csv::Yes, from [|r, _v| Ok(Sql::Real(r.environment.started_at_unix_s.unwrap_or_else(super::now)))];
    recorded_at: f64, since 1, csv Csv::No, from [store];
    hostname: Option<String>, since 1, csv Csv::Yes, from [|r, _v| Ok(Sql::from(r.environment.hostname.clone()))];
    kernel: Option<String>, since 1, csv Csv::Yes, from [|r, _v| Ok(Sql::from(r.environment.kernel.clone()))];
    iolab_version: Option<String>, since 1, csv Csv::Yes, from [|r, _v| Ok(Sql::from(r.environment.iolab_version.clone()))];
    /// The target devices (environment.targets[].device), comma separated.
    devices: Option<String>, since 1, csv Csv::Yes, from [|r, _v| {
        let devices: Vec<&str> = r.environment.targets.iter().filter_map(|t| t.device.as_deref()).collect();
        Ok(if devices.is_empty() { Sql::Null } else { Sql::Text(devices.join(",")) })
    }];
    interface: String, since 1, csv Csv::Yes, from [|r, _v| need("spec.interface", Sql::from(r.spec.interface.clone()))];
    submit: String, since 1, csv Csv::Yes, from [|r, _v| need("spec.submit", Sql::from(r.spec.submit.clone()))];
    complete: String, since 1, csv Csv::Yes, from [|r, _v| need("spec.complete", Sql::from(r.spec.complete.clone()))];
    rw: String, since 1, csv Csv::Yes, from [|r, _v| need("spec.rw", Sql::from(r.spec.rw.clone()))];
    write_mix: u32, since 1, csv Csv::Yes, from [|r, _v| need("spec.write_mix", Sql::from(r.spec.write_mix))];
    bs: u64, since 1, csv Csv::Yes, from [|r, _v| need("spec.bs", Sql::from(r.spec.bs))];
    qd: u32, since 1, csv Csv::Yes, from [|r, _v| need("spec.qd", Sql::from(r.spec.qd))];
    threads: u32, since 1, csv Csv::Yes, from [|r, _v| need("spec.threads", Sql::from(r.spec.threads))];
    batch_submit: u32, since 1, csv Csv::Yes, from [|r, _v| need("spec.batch_submit", Sql::from(r.spec.batch_submit))];
    batch_reap: u32, since 1, csv Csv::Yes, from [|r, _v| need("spec.batch_reap", Sql::from(r.spec.batch_reap))];
    direct: bool, since 1, csv Csv::Yes, from [|r, _v| need("spec.direct", Sql::from(r.spec.direct))];
    /// seconds | ios | bytes
    budget_kind: Option<String>, since 1, csv Csv::Yes, from [|r, _v| Ok(Sql::from(r.spec.budget.kind.clone()))];
    budget_value: Option<f64>, since 1, csv Csv::Yes, from [|r, _v| Ok(Sql::from(r.spec.budget.value))];
    /// spec.targets, kept as a JSON array.
    targets: Vec<String>, since 1, csv Csv::Yes, from [|r, _v| Ok(Sql::Text(r.spec.targets.clone().unwrap_or(Value::Array(vec![])).to_string()))];
    /// The run's own id across databases (32 hex digits), made when it is first recorded.
    run_uid: Option<String>, since 6, csv Csv::No, from [store];
    /// The tool that made the run: the record's `tool.name` (`fio` for a run `iolab import fio`
    /// stored), `iolab` for iolab's own run (a record without `tool`).
    tool: String as "TEXT NOT NULL DEFAULT 'iolab'", since 7, csv Csv::Yes, from [|_r, v| Ok(Sql::Text(
        tool(v).map_or("iolab", |t| t.get("name").and_then(Value::as_str).unwrap_or("iolab")).to_string()
    ))];
    /// Its version: the record's `tool.version`; for iolab's own run, the iolab version that made it.
    tool_version: Option<String>, since 7, csv Csv::Yes, from [|r, v| Ok(Sql::from(match tool(v) {
        Some(t) => t.get("version").and_then(Value::as_str).map(String::from),
        None => r.environment.iolab_version.clone(),
    }))];
    /// A file-set run's set (`spec.fileset`): how many files, their sizes in bytes (`4096-65536`
    /// or a list), the order visited (seq, random) and the fsync policy; NULL for other runs.
    fileset_files: Option<u64>, since 8, csv Csv::Yes, from [|r, _v| Ok(Sql::from(r.spec.fileset.files.map(|n| n as i64)))];
    file_size: Option<String>, since 8, csv Csv::Yes, from [|r, _v| Ok(Sql::from(r.spec.fileset.file_size.clone()))];
    file_order: Option<String>, since 8, csv Csv::Yes, from [|r, _v| Ok(Sql::from(r.spec.fileset.file_order.clone()))];
    fsync: Option<String>, since 8, csv Csv::Yes, from [|r, _v| Ok(Sql::from(r.spec.fileset.fsync.clone()))];
}

impl RunRow {
    /// The CSV cells, in `csv_layout` order.
    pub(crate) fn cells(&self) -> Vec<String> {
        let (own, metrics) = (self.own_cells(), self.metrics.cells());
        csv_layout().into_iter().map(|c| if c.metric { metrics[c.index].clone() } else { own[c.index].clone() }).collect()
    }
}

/// A CSV column: its header and where its cell comes from.
pub(crate) struct CsvColumn {
    pub header: &'static str,
    /// From `RUN_METRICS` rather than `RUN_COLUMNS`.
    pub metric: bool,
    pub index: usize,
}

/// The CSV columns: identity, spec and environment (`RUN_COLUMNS`), the metrics (`RUN_METRICS`),
/// the error, as released up to version `CSV_RELEASED`; then the columns added after it, in the
/// same order.
pub(crate) fn csv_layout() -> Vec<CsvColumn> {
    let own = |i: usize, c: &RunColumn| {
        let header = match c.csv {
            Csv::No => return None,
            Csv::Yes | Csv::Last => c.name,
            Csv::As(h) => h,
        };
        Some((c.csv == Csv::Last, CsvColumn { header, metric: false, index: i }))
    };
    let mut out = Vec::new();
    for released in [true, false] {
        let now = |since: u32| (since <= CSV_RELEASED) == released;
        let owns: Vec<(bool, CsvColumn)> =
            RUN_COLUMNS.iter().enumerate().filter(|(_, c)| now(c.since)).filter_map(|(i, c)| own(i, c)).collect();
        let (last, first): (Vec<_>, Vec<_>) = owns.into_iter().partition(|(l, _)| *l);
        out.extend(first.into_iter().map(|(_, c)| c));
        out.extend(RUN_METRICS.iter().enumerate().filter(|(_, c)| now(c.since)).map(|(i, c)| CsvColumn {
            header: c.name,
            metric: true,
            index: i,
        }));
        out.extend(last.into_iter().map(|(_, c)| c));
    }
    out
}

/// The SELECT list of a `RunRow`: its columns, then the metrics.
pub(crate) fn select_list() -> String {
    RUN_COLUMNS.iter().map(|c| c.name).chain(RUN_METRICS.iter().map(|c| c.name)).collect::<Vec<_>>().join(", ")
}

/// (column, value) of every column read from a record, for the INSERT: the `runs!` columns with a
/// reader (`status` first), then the metrics; the first field the record lacks refuses it.
pub(crate) fn record_values(r: &Record, v: &Value) -> Result<Vec<(&'static str, Sql)>, StoreError> {
    let mut out = Vec::with_capacity(RUN_COLUMNS.len() + RUN_METRICS.len());
    for c in RUN_COLUMNS {
        if let Some(get) = c.from {
            out.push((c.name, get(r, v)?));
        }
    }
    out.extend(Metrics::of(r).values());
    Ok(out)
}

/// (column, value) of the columns version `v` added, read from a record as `record_values` reads
/// them (a migration's fill); a field the record lacks leaves the column as it is (NULL, or its
/// default).
pub(crate) fn added_values(r: &Record, json: &Value, v: u32) -> Vec<(&'static str, Sql)> {
    let own = RUN_COLUMNS.iter().filter(|c| c.since == v).filter_map(|c| Some((c.name, c.from?(r, json).ok()?)));
    let added: Vec<&str> = RUN_METRICS.iter().filter(|c| c.since == v).map(|c| c.name).collect();
    let metrics = Metrics::of(r).values().into_iter().filter(|(name, _)| added.contains(name));
    own.chain(metrics).collect()
}

/// Defines `Metrics` (one typed field per column), `RUN_METRICS` (the columns) and the code
/// between them, the record and the database, from one table.
macro_rules! metrics {
    ($($(#[doc = $doc:literal])* $name:ident: $ty:ty, since $since:literal, |$r:ident| $get:expr;)*) => {
        /// A run's stored metrics, one field per metric column of `runs`: None where the run did
        /// not measure it (a failed run measures nothing).
        #[derive(Clone, Debug, Default, PartialEq, Serialize)]
        pub struct Metrics {
            $($(#[doc = $doc])* pub $name: $ty,)*
        }

        /// The metric columns of `runs`, in their order in the table.
        pub const RUN_METRICS: &[Column] = &[$(Column { name: stringify!($name), sql: <$ty as Stored>::SQL, since: $since }),*];

        impl Metrics {
            /// The metrics of a run record, read leniently (`record::read`): what the record
            /// lacks or gives as another type is None.
            pub fn of(record: &Record) -> Metrics {
                Metrics { $($name: { let $r = record; $get },)* }
            }

            /// (column, value) for the INSERT, in `RUN_METRICS` order.
            pub fn values(&self) -> Vec<(&'static str, Sql)> {
                vec![$((stringify!($name), self.$name.to_sql())),*]
            }

            /// From a row selected with `RUN_METRICS`' names.
            pub fn read(r: &Row) -> Result<Metrics, DbError> {
                Ok(Metrics { $($name: Stored::read(r, stringify!($name))?,)* })
            }

            /// The CSV cells, in `RUN_METRICS` order.
            pub fn cells(&self) -> Vec<String> {
                vec![$(self.$name.cell()),*]
            }
        }
    };
}

// Adding a metric: one line here, `since` a new schema version whose step in schema::MIGRATIONS
// places it with a `{metrics}` line (docs/store.md, "Adding a stored metric").
metrics! {
    window_s: Option<f64>, since 1, |r| r.results.window_s;
    ios: Option<u64>, since 1, |r| r.results.total.ios;
    iops: Option<f64>, since 1, |r| r.results.total.iops;
    read_iops: Option<f64>, since 1, |r| r.results.read.iops;
    write_iops: Option<f64>, since 1, |r| r.results.write.iops;
    bw_bytes_per_s: Option<f64>, since 1, |r| r.results.total.bw_bytes_per_s;
    lat_mean_ns: Option<f64>, since 1, |r| r.results.total.lat_ns.mean;
    lat_p50_ns: Option<f64>, since 1, |r| r.results.total.lat_ns.p50;
    lat_p99_ns: Option<f64>, since 1, |r| r.results.total.lat_ns.p99;
    lat_p99_9_ns: Option<f64>, since 1, |r| r.results.total.lat_ns.p99_9;
    lat_p99_999_ns: Option<f64>, since 1, |r| r.results.total.lat_ns.p99_999;
    lat_max_ns: Option<f64>, since 1, |r| r.results.total.lat_ns.max;
    /// The total's errors (the read's, then the write's, where it has none); 0 when none is given.
    errors: u64, since 1, |r| r.results.total.errors.or(r.results.read.errors).or(r.results.write.errors).unwrap_or(0);
    /// Cores kept busy by iolab's process (results.cpu.cores).
    cpu_cores: Option<f64>, since 1, |r| r.results.cpu.cores;
    /// Cores kept busy machine-wide (cost.system.busy_cores).
    busy_cores: Option<f64>, since 1, |r| r.cost.system.busy_cores;
    unaccounted_fraction: Option<f64>, since 1, |r| r.cost.accounting.unaccounted_fraction;
    /// The completion path the interrupt counters showed: polled, interrupt or unknown.
    completion_observed: Option<String>, since 2, |r| r.completion_path.observed.map(|p| p.name().to_string());
    /// Polling was asked for and completions came by interrupt anyway.
    fell_back: Option<bool>, since 2, |r| r.completion_path.fell_back;
    /// I/Os per joule of the drive (`energy.efficiency`, component ssd), of the CPU package
    /// (cpu) and of the whole system (system); per joule above idle (`dynamic`) where an idle
    /// baseline was taken. None where the record has no such component.
    ssd_iops_per_joule: Option<f64>, since 7, |r| efficiency(r, "ssd", |e| e.iops_per_joule);
    ssd_bytes_per_joule: Option<f64>, since 7, |r| efficiency(r, "ssd", |e| e.bytes_per_joule);
    ssd_iops_per_dynamic_joule: Option<f64>, since 7, |r| efficiency(r, "ssd", |e| e.iops_per_dynamic_joule);
    ssd_bytes_per_dynamic_joule: Option<f64>, since 7, |r| efficiency(r, "ssd", |e| e.bytes_per_dynamic_joule);
    cpu_iops_per_joule: Option<f64>, since 7, |r| efficiency(r, "cpu", |e| e.iops_per_joule);
    cpu_bytes_per_joule: Option<f64>, since 7, |r| efficiency(r, "cpu", |e| e.bytes_per_joule);
    cpu_iops_per_dynamic_joule: Option<f64>, since 7, |r| efficiency(r, "cpu", |e| e.iops_per_dynamic_joule);
    cpu_bytes_per_dynamic_joule: Option<f64>, since 7, |r| efficiency(r, "cpu", |e| e.bytes_per_dynamic_joule);
    system_iops_per_joule: Option<f64>, since 7, |r| efficiency(r, "system", |e| e.iops_per_joule);
    system_bytes_per_joule: Option<f64>, since 7, |r| efficiency(r, "system", |e| e.bytes_per_joule);
    system_iops_per_dynamic_joule: Option<f64>, since 7, |r| efficiency(r, "system", |e| e.iops_per_dynamic_joule);
    system_bytes_per_dynamic_joule: Option<f64>, since 7, |r| efficiency(r, "system", |e| e.bytes_per_dynamic_joule);
    /// A file-set run's creation, measured apart from its I/O (`fileset.create`): seconds (the
    /// final syncfs included) and each file's latency (create, write, close).
    create_s: Option<f64>, since 8, |r| r.fileset.create.seconds;
    create_file_lat_p50_ns: Option<f64>, since 8, |r| r.fileset.create.file_lat_ns.p50;
    create_file_lat_p99_ns: Option<f64>, since 8, |r| r.fileset.create.file_lat_ns.p99;
    /// Its measured phase (`fileset.measured`): files done whole, per second, and each file's
    /// latency (open, transfer, fsync where asked, close); the fsyncs made.
    files_done: Option<u64>, since 8, |r| r.fileset.measured.files;
    files_per_s: Option<f64>, since 8, |r| r.fileset.measured.files_per_s;
    file_lat_mean_ns: Option<f64>, since 8, |r| r.fileset.measured.file_lat_ns.mean;
    file_lat_p50_ns: Option<f64>, since 8, |r| r.fileset.measured.file_lat_ns.p50;
    file_lat_p99_ns: Option<f64>, since 8, |r| r.fileset.measured.file_lat_ns.p99;
    fsyncs: Option<u64>, since 8, |r| r.fileset.fsyncs;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_missing_null_or_of_another_type_read_as_unknown() {
        let of = |v: serde_json::Value| Metrics::of(&Record::of(&v));
        let m = of(json!({"results": {"total": {"iops": "fast", "ios": 7, "lat_ns": null}, "read": {"errors": 3}}, "cost": null}));
        assert_eq!((m.iops, m.ios, m.lat_p99_ns, m.busy_cores, m.fell_back), (None, Some(7), None, None, None));
        // The total's errors where given, else the read's, else the write's, else 0.
        assert_eq!(m.errors, 3);
        assert_eq!(of(json!("not an object")), Metrics::default());
        assert_eq!(of(json!({"results": {"total": {"errors": 1}, "read": {"errors": 3}}})).errors, 1);
    }
}
