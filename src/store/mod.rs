//! The results database: an embedded SQLite file (default `./iolab.db`) holding every run's
//! record (job spec, environment, results, cost), its key metrics as columns, its latency
//! histograms and its per-second series, and the sweeps with their planned runs so that
//! `iolab sweep --resume` continues where a crash or `kill -9` stopped it.
//!
//! Each run is committed in one transaction with `synchronous=FULL` in WAL mode: once
//! `record_run` returns, the run survives a kill or power loss, and a failure part-way leaves
//! nothing of it behind. One writer at a time (SQLite's lock, with a busy timeout); readers run
//! alongside it. Schema and migrations: `schema.rs`; layout and queries: docs/store.md.

mod backend;
pub mod columns;
mod error;
mod export;
mod extract;
mod merge;
mod pg_config;
pub mod schema;

pub use error::StoreError;
pub use merge::MergeReport;

use backend::{Db, DbError, DbRow};
use rusqlite::types::Value as Sql;
use rusqlite::Connection;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

pub use backend::is_postgres_url;
pub use columns::{Metrics, RunRow, RUN_METRICS};
pub use export::{csv_columns, quote as csv_quote};
pub use extract::DIRECTIONS;

/// The database file used when none is named.
pub const DEFAULT_PATH: &str = "iolab.db";

/// How long a writer waits for another writer's lock before giving up.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// Whether there is a database at `db` to read: a file that exists, or any PostgreSQL URL (the
/// server answers when it is opened).
pub fn exists(db: &Path) -> bool {
    db.to_str().is_some_and(is_postgres_url) || db.exists()
}

/// An error about the database `name`, said so first; its kind kept.
fn named(name: impl std::fmt::Display, e: StoreError) -> StoreError {
    e.context(|m| format!("results database {name}: {m}"))
}

/// A text parameter.
fn text(s: &str) -> Sql {
    Sql::Text(s.to_string())
}

pub fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

pub struct Store {
    db: Db,
    /// The file, or the server's URL with its password hidden.
    path: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// Where a planned run stands (`planned_runs.status`): still to run, or closed as done (a run
/// stored), skipped (this machine cannot do it, with the reason) or failed (with its stored
/// run, or before measuring with the error). It reads, serialises and compares as its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PlannedStatus {
    Planned,
    Done,
    Skipped,
    Failed,
}

impl PlannedStatus {
    pub const ALL: [PlannedStatus; 4] = [PlannedStatus::Planned, PlannedStatus::Done, PlannedStatus::Skipped, PlannedStatus::Failed];

    /// Its name, as the database stores it.
    pub fn name(self) -> &'static str {
        match self {
            PlannedStatus::Planned => "planned",
            PlannedStatus::Done => "done",
            PlannedStatus::Skipped => "skipped",
            PlannedStatus::Failed => "failed",
        }
    }

    pub fn parse(name: &str) -> Option<PlannedStatus> {
        PlannedStatus::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl std::fmt::Display for PlannedStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

impl PartialEq<&str> for PlannedStatus {
    fn eq(&self, name: &&str) -> bool {
        self.name() == *name
    }
}

impl rusqlite::types::FromSql for PlannedStatus {
    fn column_result(v: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        let name = v.as_str()?;
        PlannedStatus::parse(name)
            .ok_or_else(|| rusqlite::types::FromSqlError::Other(format!("{name:?} is not a planned-run status").into()))
    }
}

impl PlannedRun {
    /// The Job this run was planned from, read back from its stored spec; Err says why it
    /// cannot be (a spec no Job reads, or a configuration stored as unsupported here).
    pub fn job(&self) -> Result<crate::plan::Job, StoreError> {
        crate::plan::Job::from_spec(&self.spec)
            .map_err(|e| StoreError::Refused(format!("planned run {} has an unreadable spec: {e}", self.id)))
    }
}

/// One run of a sweep's plan, in execution order.
#[derive(Clone, Debug, Serialize)]
pub struct PlannedRun {
    pub id: i64,
    pub sweep_id: i64,
    /// Execution order within the sweep.
    pub ordinal: i64,
    pub replicate: u32,
    /// Identifies the configuration; the same for all its replicates.
    pub config_key: String,
    /// The Job.
    pub spec: Value,
    pub status: PlannedStatus,
    /// Why it was skipped.
    pub reason: Option<String>,
}

/// Who a sweep is, across databases (schema version 6): its own id, and the fleet submission
/// (split of one plan over several machines) it is a share of, if any. `iolab merge` joins two
/// sweeps only when they are the same sweep or shares of one split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepIdentity {
    pub uid: String,
    pub split: Option<String>,
}

impl SweepIdentity {
    /// A new sweep's: a new random id, and the split it is a share of.
    pub fn new(split: Option<&str>) -> SweepIdentity {
        SweepIdentity { uid: schema::new_uid(), split: split.map(String::from) }
    }
}

/// A sweep with its progress.
#[derive(Clone, Debug, Serialize)]
pub struct SweepInfo {
    pub id: i64,
    pub name: String,
    pub plan_text: String,
    pub plan_hash: String,
    pub seed: u64,
    pub created_at: f64,
    /// All planned runs of the sweep.
    pub total: usize,
    /// Still to run.
    pub pending: usize,
    pub done: usize,
    pub skipped: usize,
    pub failed: usize,
}

/// Which runs `list_runs` and the exports return. Every field set must match (AND); the
/// default matches every run.
#[derive(Clone, Debug, Default)]
pub struct RunFilter {
    pub sweep: Option<i64>,
    pub interface: Option<String>,
    pub rw: Option<String>,
    /// The record's status: ok, failed, interrupted.
    pub status: Option<String>,
    pub config_key: Option<String>,
    pub submit: Option<String>,
    pub complete: Option<String>,
    pub bs: Option<u64>,
    pub qd: Option<u32>,
    pub threads: Option<u32>,
    pub hostname: Option<String>,
    /// The kernel release the run was made on.
    pub kernel: Option<String>,
    /// A device name among the run's target devices (e.g. `nvme0n1`).
    pub device: Option<String>,
    /// Some(true): only runs of a sweep; Some(false): only lone `iolab run`s.
    pub in_sweep: Option<bool>,
    /// Started at or after / before this unix time.
    pub since: Option<f64>,
    pub until: Option<f64>,
    /// The tool that made the run (`runs.tool`: iolab, or e.g. fio for a run `iolab import fio`
    /// stored).
    pub tool: Option<String>,
    /// Keep only the most recent N matching runs (still returned oldest first).
    pub limit: Option<usize>,
}

/// What tells the machines of a merged database apart: `compare --by`, `report --by`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Machine {
    #[default]
    Host,
    Kernel,
    Device,
}

impl Machine {
    pub fn name(self) -> &'static str {
        match self {
            Machine::Host => "host",
            Machine::Kernel => "kernel",
            Machine::Device => "device",
        }
    }

    /// The run's machine: its host name, kernel release, or first target device (a device
    /// filter matches one name among a run's targets, so a run on several is grouped by its first).
    pub fn of(self, r: &RunRow) -> Option<String> {
        match self {
            Machine::Host => r.hostname.clone(),
            Machine::Kernel => r.kernel.clone(),
            Machine::Device => r.devices.as_deref().and_then(|d| d.split(',').next()).map(String::from),
        }
    }

    /// `f` narrowed to the runs made on `value`.
    pub fn only(self, f: &RunFilter, value: &str) -> RunFilter {
        let mut f = f.clone();
        match self {
            Machine::Host => f.hostname = Some(value.into()),
            Machine::Kernel => f.kernel = Some(value.into()),
            Machine::Device => f.device = Some(value.into()),
        }
        f
    }
}

/// One second of a run's series.
#[derive(Clone, Debug, Serialize)]
pub struct SeriesPoint {
    pub t: u32,
    pub read_iops: Option<u64>,
    pub write_iops: Option<u64>,
    pub mean_lat_ns: Option<f64>,
}

/// The `runs` columns a `RunRow` holds (a SELECT list): `columns::select_list`.
const RUN_COLUMNS: RunColumns = RunColumns;

struct RunColumns;

impl std::fmt::Display for RunColumns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&columns::select_list())
    }
}

fn run_row(r: &DbRow) -> Result<RunRow, DbError> {
    RunRow::read(r)
}

fn planned_row(r: &DbRow) -> Result<PlannedRun, DbError> {
    let spec: String = r.get("spec")?;
    Ok(PlannedRun {
        id: r.get("id")?,
        sweep_id: r.get("sweep_id")?,
        ordinal: r.get("ordinal")?,
        replicate: r.get("replicate")?,
        config_key: r.get("config_key")?,
        spec: serde_json::from_str(&spec).map_err(|e| DbError::from(format!("planned run spec: {e}")))?,
        status: r.get("status")?,
        reason: r.get("reason")?,
    })
}

/// The WHERE clause (with a leading space, or empty) and its parameters for a filter.
fn filter_sql(f: &RunFilter) -> (String, Vec<Sql>) {
    let mut w: Vec<&str> = Vec::new();
    let mut p: Vec<Sql> = Vec::new();
    let mut eq = |col: &'static str, v: Option<Sql>| {
        if let Some(v) = v {
            w.push(col);
            p.push(v);
        }
    };
    let t = |s: &Option<String>| s.clone().map(Sql::Text);
    eq("sweep_id = ?", f.sweep.map(Sql::Integer));
    eq("interface = ?", t(&f.interface));
    eq("rw = ?", t(&f.rw));
    eq("status = ?", t(&f.status));
    eq("config_key = ?", t(&f.config_key));
    eq("submit = ?", t(&f.submit));
    eq("complete = ?", t(&f.complete));
    eq("bs = ?", f.bs.map(|x| Sql::Integer(x as i64)));
    eq("qd = ?", f.qd.map(|x| Sql::Integer(x as i64)));
    eq("threads = ?", f.threads.map(|x| Sql::Integer(x as i64)));
    eq("hostname = ?", t(&f.hostname));
    eq("kernel = ?", t(&f.kernel));
    eq("tool = ?", t(&f.tool));
    // One of the run's devices, exactly: the name's `%`, `_` and `\` are escaped, so they stand
    // for themselves and not for any device (`--device %` matched every run).
    let like = |s: &String| s.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    eq("(',' || devices || ',') LIKE ('%,' || CAST(? AS TEXT) || ',%') ESCAPE '\\'", f.device.as_ref().map(|d| Sql::Text(like(d))));
    eq("started_at >= ?", f.since.map(Sql::Real));
    eq("started_at < ?", f.until.map(Sql::Real));
    match f.in_sweep {
        Some(true) => w.push("sweep_id IS NOT NULL"),
        Some(false) => w.push("sweep_id IS NULL"),
        None => {}
    }
    let clause = if w.is_empty() { String::new() } else { format!(" WHERE {}", w.join(" AND ")) };
    (clause, p)
}

/// Refuse a database path that is not a regular file or a new one, and a file that is not
/// SQLite, before SQLite opens it: SQLite would write its header into a device and create
/// `-journal`, `-wal` and `-shm` files beside it. True when the file exists.
fn check_path(path: &Path) -> Result<bool, StoreError> {
    let name = path.display();
    if path.as_os_str().is_empty() {
        return Err(StoreError::Refused("--db is empty: give the results database's file name".into()));
    }
    let m = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(x) if x.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(x) => return Err(StoreError::Refused(format!("results database {name}: {x}"))),
    };
    if !m.is_file() {
        return Err(StoreError::Refused(format!(
            "results database {name} is {}: give a regular file, or a new file name for a new database",
            crate::output::kind(&m)
        )));
    }
    let mut magic = [0u8; 16];
    let n = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut magic))
        .map_err(|x| StoreError::Refused(format!("results database {name}: {x}")))?;
    if n > 0 && (n < magic.len() || &magic != b"SQLite format 3\0") {
        return Err(StoreError::Refused(format!(
            "results database {name} is not a SQLite file: give an iolab results database, or a new file name"
        )));
    }
    Ok(true)
}

/// `file:` URI for `path` (percent-encoded), for the `immutable` parameter.
fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri
}

/// Whether this process may write `p` (access(2): false on a read-only mount, even for root).
fn may_write(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: c is a NUL-terminated path alive for the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// A connection for a command that only reads an existing database, checked
/// (`schema::check`), and its schema version. Its statements cannot write (`query_only`).
/// Where the file and its directory may be written it opens like any SQLite client, which
/// removes the `-wal` and `-shm` files it used when it closes; where they may not (a read-only
/// mount, another user's file) it opens read-only. A WAL database read-only needs a `-shm`
/// file; where none can be made and no `-wal` holds commits, the file alone is the whole
/// database and is read as immutable.
fn open_reader(path: &Path) -> Result<(Connection, u32), StoreError> {
    use rusqlite::OpenFlags as F;
    let name = path.display();
    let e = |x: rusqlite::Error| named(&name, DbError::from(x).into());
    let writable = may_write(path) && may_write(crate::output::parent(path));
    let mode = if writable { F::SQLITE_OPEN_READ_WRITE } else { F::SQLITE_OPEN_READ_ONLY };
    let flags = mode | F::SQLITE_OPEN_URI | F::SQLITE_OPEN_NO_MUTEX;
    // The first read is where SQLite finds it cannot open or create the -shm file.
    let attempt = |conn: Connection| -> rusqlite::Result<Connection> {
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.pragma_update(None, "query_only", true)?;
        schema::user_version(&conn)?;
        Ok(conn)
    };
    let first = attempt(Connection::open_with_flags(path, flags).map_err(e)?);
    let cannot_share = matches!(&first, Err(rusqlite::Error::SqliteFailure(f, _)) if matches!(f.code, rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly));
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal_empty = std::fs::metadata(&wal).map_or(true, |m| m.len() == 0);
    let conn = if cannot_share && !writable && wal_empty {
        attempt(Connection::open_with_flags(format!("{}?immutable=1", file_uri(path)), flags).map_err(e)?)
    } else {
        first
    }
    .map_err(e)?;
    let v = schema::check(&conn).map_err(|m| named(&name, m))?;
    Ok((conn, v))
}

/// Switch to write-ahead logging. SQLite answers "database is locked" at once, without waiting,
/// while another connection is creating the database (seen with four iolabs opening one new
/// file together), so this waits as a busy connection would.
fn wal_mode(conn: &Connection) -> rusqlite::Result<String> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
            Err(rusqlite::Error::SqliteFailure(f, _))
                if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            r => return r,
        }
    }
}

impl Store {
    /// Open the database at `path` for writing, creating it or migrating it to the current
    /// schema. The file is checked (`schema::check`) before anything is changed, so a database
    /// iolab refuses (not SQLite, not iolab's, from a newer iolab) is left as it was: not even
    /// switched to write-ahead logging. A `postgresql://` URL opens that server's database
    /// (`open_postgres`).
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(url) = path.to_str().filter(|s| is_postgres_url(s)) {
            return Store::open_postgres(url, true);
        }
        let name = path.display().to_string();
        check_path(path)?;
        let e = |x: rusqlite::Error| named(&name, DbError::from(x).into());
        let conn = Connection::open(path).map_err(e)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(e)?;
        schema::check(&conn).map_err(|x| named(&name, x))?;
        let mode = wal_mode(&conn).map_err(e)?;
        if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
            return Err(StoreError::Failed(format!("results database {name}: cannot use write-ahead logging (journal mode {mode})")));
        }
        conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;").map_err(e)?;
        let mut db = Db::Sqlite(conn);
        schema::migrate(&mut db).map_err(|x| named(&name, x))?;
        Ok(Store { db, path: name })
    }

    /// Open an existing database for reading (`iolab results`, `report`, `compare`): an error
    /// when there is none at `path` (a reader creates nothing); works on a read-only mount and
    /// for a user who may only read the file (see `open_reader`). A database of an older schema
    /// is migrated first, which needs write access.
    pub fn open_existing(path: &Path) -> Result<Store, StoreError> {
        if let Some(url) = path.to_str().filter(|s| is_postgres_url(s)) {
            return Store::open_postgres(url, false);
        }
        let name = path.display().to_string();
        if !check_path(path)? {
            return Err(StoreError::Refused(format!("no results database at {name}")));
        }
        let (conn, v) = open_reader(path)?;
        if v == 0 {
            return Err(StoreError::Refused(format!("results database {name} is empty: it holds no iolab results")));
        }
        if v < schema::LATEST {
            drop(conn);
            return Store::open(path).map_err(|x| {
                x.context(|x| format!("{x} (schema version {v} is upgraded to {} on first use, which needs write access)", schema::LATEST))
            });
        }
        Ok(Store { db: Db::Sqlite(conn), path: name })
    }

    /// A PostgreSQL server's database as the store: checked like a file (`schema::check_postgres`),
    /// then created or migrated with the same steps, translated (`backend::postgres_sql`). A
    /// reader (`create` false) refuses a database with no iolab schema yet.
    fn open_postgres(url: &str, create: bool) -> Result<Store, StoreError> {
        let name = crate::secret::redact(url);
        let e = |x: StoreError| named(&name, x);
        let mut db = Db::connect(url).map_err(|x| e(StoreError::from(x).context(|x| format!("cannot connect: {x}"))))?;
        let v = schema::check_postgres(&db).map_err(e)?;
        if v == 0 && !create {
            return Err(e(StoreError::Refused("it holds no iolab results (no iolab schema in it yet)".into())));
        }
        schema::migrate(&mut db).map_err(e)?;
        Ok(Store { db, path: name })
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// A consistent copy of the whole database at `dest`, whole or not at all: SQLite writes it
    /// beside `dest` (`VACUUM INTO`, a few ms for a sweep's database) and it is renamed over
    /// `dest`, so a reader of `dest` (a cluster's shared storage) never sees half a copy.
    pub(crate) fn copy_to(&self, dest: &Path) -> Result<(), StoreError> {
        let failed = |e: String| StoreError::Failed(format!("cannot copy {} to {}: {e}", self.path, dest.display()));
        let conn = self.db.sqlite().ok_or_else(|| {
            StoreError::Refused(format!(
                "cannot copy {} to {}: a PostgreSQL store is not copied to a file (`iolab merge` from it)",
                self.path,
                dest.display()
            ))
        })?;
        let name = dest
            .file_name()
            .ok_or_else(|| StoreError::Refused(format!("cannot copy the database to {}: not a file name", dest.display())))?;
        let tmp = dest.with_file_name(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        conn.execute("VACUUM INTO ?1", [tmp.to_string_lossy()]).map_err(|e| failed(e.to_string()))?;
        let done = std::fs::File::open(&tmp).and_then(|f| f.sync_all()).and_then(|_| std::fs::rename(&tmp, dest));
        if let Err(e) = done {
            let _ = std::fs::remove_file(&tmp);
            return Err(failed(e.to_string()));
        }
        Ok(())
    }

    fn e(&self) -> impl Fn(DbError) -> StoreError + '_ {
        move |x| named(&self.path, x.into())
    }

    /// Rows of a query, each made into a `T`.
    fn query<T>(&self, sql: &str, p: &[Sql], f: impl Fn(&DbRow) -> Result<T, DbError>) -> Result<Vec<T>, StoreError> {
        self.db.rows(sql, p).and_then(|rows| rows.iter().map(f).collect()).map_err(self.e())
    }

    /// The first column of the first row, if any.
    fn value<T: rusqlite::types::FromSql>(&self, sql: &str, p: &[Sql]) -> Result<Option<T>, StoreError> {
        self.db.row(sql, p).and_then(|r| r.map(|r| r.get(0)).transpose()).map_err(self.e())
    }

    pub fn schema_version(&self) -> Result<u32, StoreError> {
        match self.db.sqlite() {
            Some(conn) => schema::user_version(conn).map_err(|x| self.e()(x.into())),
            None => schema::check_postgres(&self.db).map_err(|x| named(&self.path, x)),
        }
    }

    /// Whether the store is a PostgreSQL server's.
    pub fn is_postgres(&self) -> bool {
        self.db.is_postgres()
    }

    /// A sweep and its planned runs in one transaction; returns the sweep id.
    pub fn create_sweep(
        &mut self,
        name: &str,
        plan_text: &str,
        plan_hash: &str,
        seed: u64,
        runs: &[(i64, u32, String, Value)],
    ) -> Result<i64, StoreError> {
        self.create_sweep_as(&SweepIdentity::new(None), name, plan_text, plan_hash, seed, runs)
    }

    /// `create_sweep` with the sweep's identity given: a new one with the fleet submission it is
    /// a share of, or a merged sweep's own.
    pub(crate) fn create_sweep_as(
        &mut self,
        id: &SweepIdentity,
        name: &str,
        plan_text: &str,
        plan_hash: &str,
        seed: u64,
        runs: &[(i64, u32, String, Value)],
    ) -> Result<i64, StoreError> {
        let path = self.path.clone();
        let e = |x: DbError| named(&path, x.into());
        self.db.write(|tx| {
            let sweep: i64 = tx
                .row(
                    "INSERT INTO sweeps(name, plan_text, plan_hash, seed, created_at, uid, split) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING id",
                    &[
                        text(name),
                        text(plan_text),
                        text(plan_hash),
                        Sql::Integer(seed as i64),
                        Sql::Real(now()),
                        text(&id.uid),
                        id.split.clone().map_or(Sql::Null, Sql::Text),
                    ],
                )
                .and_then(|r| r.ok_or_else(|| DbError::from("no sweep id returned".to_string()))?.get(0))
                .map_err(e)?;
            for (ordinal, replicate, key, spec) in runs {
                tx.exec(
                    "INSERT INTO planned_runs(sweep_id, ordinal, replicate, config_key, spec) VALUES (?1, ?2, ?3, ?4, ?5)",
                    &[Sql::Integer(sweep), Sql::Integer(*ordinal), Sql::Integer((*replicate).into()), text(key), spec.to_string().into()],
                )
                .map_err(|x| {
                    if x.constraint {
                        StoreError::Refused(format!("results database {path}: sweep plan has ordinal {ordinal} twice"))
                    } else {
                        e(x)
                    }
                })?;
            }
            Ok(sweep)
        })
    }

    /// The most recent sweep with this plan hash that still has planned runs (for --resume).
    pub fn unfinished_sweep(&self, plan_hash: &str) -> Result<Option<i64>, StoreError> {
        self.value(
            "SELECT s.id FROM sweeps s WHERE s.plan_hash = ?1 AND EXISTS \
             (SELECT 1 FROM planned_runs p WHERE p.sweep_id = s.id AND p.status = 'planned') \
             ORDER BY s.id DESC LIMIT 1",
            &[text(plan_hash)],
        )
    }

    fn planned_where(&self, sweep_id: i64, only_pending: bool) -> Result<Vec<PlannedRun>, StoreError> {
        let sql = format!(
            "SELECT id, sweep_id, ordinal, replicate, config_key, spec, status, reason FROM planned_runs \
             WHERE sweep_id = ?1{} ORDER BY ordinal",
            if only_pending { " AND status = 'planned'" } else { "" }
        );
        self.query(&sql, &[Sql::Integer(sweep_id)], planned_row)
    }

    /// All planned runs of a sweep, in ordinal (execution) order.
    pub fn planned_runs(&self, sweep_id: i64) -> Result<Vec<PlannedRun>, StoreError> {
        self.planned_where(sweep_id, false)
    }

    /// The planned runs of a sweep still to run (status `planned`), in ordinal order.
    pub fn pending_runs(&self, sweep_id: i64) -> Result<Vec<PlannedRun>, StoreError> {
        self.planned_where(sweep_id, true)
    }

    /// Store a finished run and mark its planned run, all in one transaction; returns the run id.
    ///
    /// The record's status decides the planned run's: `ok` → done, `failed` (or anything else)
    /// → failed, `interrupted` → stays planned (the run is kept but `--resume` runs it again).
    /// A planned run that is not `planned` any more is an error, never a second result.
    /// `planned_id` None stores a lone `iolab run`. The record is a `record::RunRecord` (or
    /// the JSON of one, as a merge copies it from another database): the store makes its JSON
    /// and columns, here and nowhere else.
    pub fn record_run(&mut self, planned_id: Option<i64>, record: &impl Serialize) -> Result<i64, StoreError> {
        let record = serde_json::to_value(record)
            .map_err(|e| StoreError::Refused(format!("results database {}: the run record cannot be written as JSON: {e}", self.path)))?;
        self.record_run_as(planned_id, &record, &schema::new_uid())
    }

    /// `record_run` of a run whose id (`run_uid`) it already has: a merged run keeps its own.
    pub(crate) fn record_run_as(&mut self, planned_id: Option<i64>, record: &Value, run_uid: &str) -> Result<i64, StoreError> {
        use base64::Engine;
        let x = extract::extract(record).map_err(|e| e.context(|m| format!("results database {}: {m}", self.path)))?;
        let path = self.path.clone();
        let e = |x: DbError| named(&path, x.into());
        let fail = |m: String| StoreError::Failed(format!("results database {path}: {m}"));
        let bad = |m: String| StoreError::Refused(format!("results database {path}: {m}"));
        self.db.write(|tx| {
            let (sweep, replicate, key) = match planned_id {
                None => (Sql::Null, Sql::Null, Sql::Null),
                Some(pid) => {
                    let row = tx
                        .row("SELECT sweep_id, replicate, config_key, status FROM planned_runs WHERE id = ?1", &[Sql::Integer(pid)])
                        .map_err(e)?
                        .ok_or_else(|| fail(format!("no planned run {pid}")))?;
                    let (s, rep, key, status): (i64, i64, String, PlannedStatus) =
                        (|| Ok::<_, DbError>((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)))().map_err(e)?;
                    if status != PlannedStatus::Planned {
                        let run: Option<i64> = tx
                            .row("SELECT id FROM runs WHERE planned_id = ?1 AND status <> 'interrupted'", &[Sql::Integer(pid)])
                            .and_then(|r| r.map(|r| r.get(0)).transpose())
                            .map_err(e)?;
                        let by = run.map(|r| format!(" (run {r})")).unwrap_or_default();
                        return Err(fail(format!("planned run {pid} is already {status}{by}; not storing it twice")));
                    }
                    (Sql::Integer(s), Sql::Integer(rep), Sql::Text(key))
                }
            };
            let mut cols: Vec<(&str, Sql)> = vec![
                ("planned_id", planned_id.map_or(Sql::Null, Sql::Integer)),
                ("sweep_id", sweep),
                ("replicate", replicate),
                ("config_key", key),
                ("recorded_at", Sql::Real(now())),
                ("run_uid", text(run_uid)),
                ("record", Sql::Text(x.stripped.to_string())),
            ];
            let status = match x.columns.iter().find(|c| c.0 == "status") {
                Some((_, Sql::Text(s))) => s.clone(),
                _ => unreachable!("extract refuses a record without a status"),
            };
            cols.extend(x.columns);
            let names: Vec<&str> = cols.iter().map(|c| c.0).collect();
            let marks = vec!["?"; cols.len()].join(", ");
            let values: Vec<Sql> = cols.into_iter().map(|c| c.1).collect();
            let run: i64 = tx
                .row(&format!("INSERT INTO runs({}) VALUES ({marks}) RETURNING id", names.join(", ")), &values)
                .and_then(|r| r.ok_or_else(|| DbError::from("no run id returned".to_string()))?.get(0))
                .map_err(|x| {
                    if x.constraint {
                        fail(format!("planned run {} already has a stored run; not storing it twice", planned_id.unwrap_or(0)))
                    } else {
                        e(x)
                    }
                })?;
            for (d, b64) in &x.histograms {
                let data = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|m| bad(format!("run record results.{d}.lat_histogram is not base64: {m}")))?;
                tx.exec(
                    "INSERT INTO histograms(run_id, direction, encoding, data) VALUES (?1, ?2, 'hdr-v2-deflate', ?3)",
                    &[Sql::Integer(run), text(d), Sql::Blob(data)],
                )
                .map_err(e)?;
            }
            for p in &x.series {
                let (t, r, w, m, extra) = extract::series_point(p).map_err(|e| bad(e.to_string()))?;
                tx.exec(
                    "INSERT INTO series(run_id, t, read_iops, write_iops, mean_lat_ns, extra) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    &[Sql::Integer(run), Sql::Integer(t), r, w, m, extra],
                )
                .map_err(|x| if x.constraint { bad(format!("run record series has second {t} twice")) } else { e(x) })?;
            }
            for p in &x.profile_parts {
                tx.exec(
                    "INSERT INTO profile_parts(run_id, kind, name, layer, share, ns_per_io, p50_ns, p99_ns, requests, \
                     cycles_per_io, instructions_per_io) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) ON CONFLICT DO NOTHING",
                    &[
                        Sql::Integer(run),
                        text(p.kind),
                        text(&p.name),
                        text(&p.layer),
                        p.share.into(),
                        p.ns_per_io.into(),
                        p.p50_ns.into(),
                        p.p99_ns.into(),
                        p.requests.map(|n| n as i64).into(),
                        p.cycles_per_io.into(),
                        p.instructions_per_io.into(),
                    ],
                )
                .map_err(e)?;
            }
            if let Some(pid) = planned_id {
                let new = match status.as_str() {
                    "ok" => Some(PlannedStatus::Done),
                    "interrupted" => None,
                    _ => Some(PlannedStatus::Failed),
                };
                if let Some(new) = new {
                    let n = tx
                        .exec(
                            "UPDATE planned_runs SET status = ?1, updated_at = ?2 WHERE id = ?3 AND status = 'planned'",
                            &[text(new.name()), Sql::Real(now()), Sql::Integer(pid)],
                        )
                        .map_err(e)?;
                    if n != 1 {
                        return Err(fail(format!("planned run {pid} changed while storing its run")));
                    }
                }
            }
            Ok(run)
        })
    }

    /// Mark a planned run skipped (e.g. not valid on this machine), with the reason.
    pub fn record_skip(&mut self, planned_id: i64, reason: &str) -> Result<(), StoreError> {
        self.close_planned(planned_id, PlannedStatus::Skipped, reason)
    }

    /// Mark a planned run failed before it measured anything (the engine did not start, a
    /// target could not be made), with the error. It stays failed: `--resume` does not redo it.
    pub(crate) fn record_failure(&mut self, planned_id: i64, error: &str) -> Result<(), StoreError> {
        self.close_planned(planned_id, PlannedStatus::Failed, error)
    }

    /// A planned run still to do becomes `status` (skipped or failed) with why, without a record.
    fn close_planned(&mut self, planned_id: i64, status: PlannedStatus, reason: &str) -> Result<(), StoreError> {
        let path = self.path.clone();
        let e = |x: DbError| named(&path, x.into());
        self.db.write(|tx| {
            let now_status: Option<PlannedStatus> = tx
                .row("SELECT status FROM planned_runs WHERE id = ?1", &[Sql::Integer(planned_id)])
                .and_then(|r| r.map(|r| r.get(0)).transpose())
                .map_err(e)?;
            match now_status {
                None => return Err(StoreError::Failed(format!("results database {path}: no planned run {planned_id}"))),
                Some(PlannedStatus::Planned) => {}
                Some(s) => {
                    return Err(StoreError::Failed(format!(
                        "results database {path}: planned run {planned_id} is already {s}; not marking it {status}"
                    )))
                }
            }
            tx.exec(
                "UPDATE planned_runs SET status = ?1, reason = ?2, updated_at = ?3 WHERE id = ?4",
                &[text(status.name()), text(reason), Sql::Real(now()), Sql::Integer(planned_id)],
            )
            .map_err(e)?;
            Ok(())
        })
    }

    /// Planned runs with this planned-run status (`skipped`, `planned`: still to run, or
    /// `failed`: only those that failed before measuring, which have no stored run) that
    /// match a filter, oldest first. They have no stored run, so `list_runs` cannot show them;
    /// the filter's sweep and configuration apply, and interface, rw, submit, complete, bs, qd
    /// and threads are read from the planned spec. A filter on what only a made run has (host,
    /// device, time, lone runs) matches none.
    pub fn list_planned(&self, f: &RunFilter, status: PlannedStatus) -> Result<Vec<PlannedRun>, StoreError> {
        if f.hostname.is_some()
            || f.kernel.is_some()
            || f.device.is_some()
            || f.since.is_some()
            || f.until.is_some()
            || f.in_sweep == Some(false)
        {
            return Ok(Vec::new());
        }
        let mut w = vec!["status = ?".to_string()];
        if status == PlannedStatus::Failed {
            w.push("NOT EXISTS (SELECT 1 FROM runs r WHERE r.planned_id = planned_runs.id)".into());
        }
        let mut p = vec![text(status.name())];
        let mut eq = |col: &str, v: Option<Sql>| {
            if let Some(v) = v {
                w.push(format!("{col} = ?"));
                p.push(v);
            }
        };
        let t = |s: &Option<String>| s.clone().map(Sql::Text);
        let n = |x: Option<u64>| x.map(|x| Sql::Integer(x as i64));
        eq("sweep_id", f.sweep.map(Sql::Integer));
        eq("config_key", t(&f.config_key));
        for (field, v) in [("interface", t(&f.interface)), ("rw", t(&f.rw)), ("submit", t(&f.submit)), ("complete", t(&f.complete))] {
            eq(&format!("json_extract(spec, '$.{field}')"), v);
        }
        for (field, v) in [("bs", n(f.bs)), ("qd", n(f.qd.map(u64::from))), ("threads", n(f.threads.map(u64::from)))] {
            eq(&format!("json_extract(spec, '$.{field}')"), v);
        }
        let select = format!(
            "SELECT id, sweep_id, ordinal, replicate, config_key, spec, status, reason FROM planned_runs WHERE {}",
            w.join(" AND ")
        );
        let sql = match f.limit {
            Some(l) => format!("SELECT * FROM ({select} ORDER BY id DESC LIMIT {}) AS newest ORDER BY id", l.min(i64::MAX as usize)),
            None => format!("{select} ORDER BY id"),
        };
        self.query(&sql, &p, planned_row)
    }

    /// The runs matching a filter, oldest first.
    pub fn list_runs(&self, f: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        let (clause, p) = filter_sql(f);
        let sql = match f.limit {
            Some(n) => format!(
                "SELECT * FROM (SELECT {RUN_COLUMNS} FROM runs{clause} ORDER BY id DESC LIMIT {}) AS newest ORDER BY id",
                n.min(i64::MAX as usize)
            ),
            None => format!("SELECT {RUN_COLUMNS} FROM runs{clause} ORDER BY id"),
        };
        self.query(&sql, &p, run_row)
    }

    /// One run, as a row.
    pub fn run(&self, run_id: i64) -> Result<Option<RunRow>, StoreError> {
        Ok(self.query(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"), &[Sql::Integer(run_id)], run_row)?.pop())
    }

    /// The full run record as it was given to `record_run` (histograms and series put back).
    pub fn run_record(&self, run_id: i64) -> Result<Option<Value>, StoreError> {
        use base64::Engine;
        let text: Option<String> = self.value("SELECT record FROM runs WHERE id = ?1", &[Sql::Integer(run_id)])?;
        let Some(text) = text else { return Ok(None) };
        let mut record: Value = serde_json::from_str(&text)
            .map_err(|m| StoreError::Failed(format!("results database {}: run {run_id}: stored record: {m}", self.path)))?;
        let hist = self.histograms(run_id)?.into_iter().map(|(d, b)| (d, base64::engine::general_purpose::STANDARD.encode(b))).collect();
        let series = self.query(
            "SELECT t, read_iops, write_iops, mean_lat_ns, extra FROM series WHERE run_id = ?1 ORDER BY t",
            &[Sql::Integer(run_id)],
            |r| Ok(extract::point(r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
        )?;
        extract::reassemble(&mut record, hist, series);
        Ok(Some(record))
    }

    /// Put a new energy report into a stored run's record (`iolab energy import`), with the
    /// columns read from it again; the rest of the record, its histograms and series stay.
    pub(crate) fn replace_energy(&mut self, run_id: i64, energy: &crate::energy::record::EnergyRecord) -> Result<(), StoreError> {
        let path = self.path.clone();
        let text: String = self
            .value("SELECT record FROM runs WHERE id = ?1", &[Sql::Integer(run_id)])?
            .ok_or_else(|| StoreError::Failed(format!("results database {path}: no run {run_id}")))?;
        let mut record: Value = serde_json::from_str(&text)
            .map_err(|m| StoreError::Failed(format!("results database {path}: run {run_id}: stored record: {m}")))?;
        record["energy"] = serde_json::to_value(energy)
            .map_err(|m| StoreError::Failed(format!("results database {path}: run {run_id}: energy record: {m}")))?;
        let x = extract::extract(&record).map_err(|e| e.context(|m| format!("results database {path}: run {run_id}: {m}")))?;
        let mut cols: Vec<(&str, Sql)> = vec![("record", Sql::Text(x.stripped.to_string()))];
        cols.extend(x.columns);
        let set: Vec<String> = cols.iter().enumerate().map(|(i, (c, _))| format!("{c} = ?{}", i + 1)).collect();
        let mut values: Vec<Sql> = cols.into_iter().map(|c| c.1).collect();
        values.push(Sql::Integer(run_id));
        self.db.exec(&format!("UPDATE runs SET {} WHERE id = ?{}", set.join(", "), values.len()), &values).map_err(self.e())?;
        Ok(())
    }

    /// A run's latency histograms: (direction, HdrHistogram V2 deflate bytes), read/write/total.
    pub fn histograms(&self, run_id: i64) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        self.query(
            "SELECT direction, data FROM histograms WHERE run_id = ?1 \
             ORDER BY CASE direction WHEN 'read' THEN 0 WHEN 'write' THEN 1 ELSE 2 END",
            &[Sql::Integer(run_id)],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
    }

    /// A run's per-second series.
    pub fn series(&self, run_id: i64) -> Result<Vec<SeriesPoint>, StoreError> {
        self.query("SELECT t, read_iops, write_iops, mean_lat_ns FROM series WHERE run_id = ?1 ORDER BY t", &[Sql::Integer(run_id)], |r| {
            Ok(SeriesPoint {
                t: r.get(0)?,
                read_iops: r.get::<Option<i64>>(1)?.map(|x| x as u64),
                write_iops: r.get::<Option<i64>>(2)?.map(|x| x as u64),
                mean_lat_ns: r.get(3)?,
            })
        })
    }

    /// One row per run (key metrics and spec columns) with a header row.
    pub fn export_csv(&self, f: &RunFilter, out: &mut dyn std::io::Write) -> Result<(), StoreError> {
        let rows = self.list_runs(f)?;
        export::csv(&rows, out).map_err(|m| StoreError::Refused(format!("writing CSV: {m}")))
    }

    /// A JSON array of the full run records, each with a `store` object naming its run id,
    /// sweep, planned run, replicate and configuration.
    pub fn export_json(&self, f: &RunFilter, out: &mut dyn std::io::Write) -> Result<(), StoreError> {
        let rows = self.list_runs(f)?;
        let w = |m: std::io::Error| StoreError::Refused(format!("writing JSON: {m}"));
        out.write_all(b"[").map_err(w)?;
        for (i, row) in rows.iter().enumerate() {
            let mut rec = self.run_record(row.id)?.unwrap_or(Value::Null);
            if let Some(o) = rec.as_object_mut() {
                o.insert(
                    "store".into(),
                    serde_json::json!({
                        "run_id": row.id,
                        "sweep_id": row.sweep_id,
                        "planned_id": row.planned_id,
                        "replicate": row.replicate,
                        "config_key": row.config_key,
                        "recorded_at": row.recorded_at,
                    }),
                );
            }
            out.write_all(if i == 0 { b"\n" } else { b",\n" }).map_err(w)?;
            serde_json::to_writer(&mut *out, &rec).map_err(|m| StoreError::Refused(format!("writing JSON: {m}")))?;
        }
        out.write_all(if rows.is_empty() { b"]\n" } else { b"\n]\n" }).map_err(w)?;
        out.flush().map_err(w)
    }

    /// Every sweep with its progress, oldest first.
    pub fn sweep_infos(&self) -> Result<Vec<SweepInfo>, StoreError> {
        self.sweep_query(None)
    }

    /// One sweep with its plan and progress.
    pub fn sweep(&self, sweep_id: i64) -> Result<Option<SweepInfo>, StoreError> {
        Ok(self.sweep_query(Some(sweep_id))?.pop())
    }

    fn sweep_query(&self, id: Option<i64>) -> Result<Vec<SweepInfo>, StoreError> {
        let count = |status: PlannedStatus| format!("count(CASE WHEN p.status = '{status}' THEN 1 END)");
        let sql = format!(
            "SELECT s.id, s.name, s.plan_text, s.plan_hash, s.seed, s.created_at, count(p.id), {}, {}, {}, {} \
             FROM sweeps s LEFT JOIN planned_runs p ON p.sweep_id = s.id {} GROUP BY s.id ORDER BY s.id",
            count(PlannedStatus::Planned),
            count(PlannedStatus::Done),
            count(PlannedStatus::Skipped),
            count(PlannedStatus::Failed),
            if id.is_some() { "WHERE s.id = ?1" } else { "" }
        );
        let p: Vec<Sql> = id.map(Sql::Integer).into_iter().collect();
        self.query(&sql, &p, |r| {
            Ok(SweepInfo {
                id: r.get(0)?,
                name: r.get(1)?,
                plan_text: r.get(2)?,
                plan_hash: r.get(3)?,
                seed: r.get::<i64>(4)? as u64,
                created_at: r.get(5)?,
                total: r.get::<i64>(6)? as usize,
                pending: r.get::<i64>(7)? as usize,
                done: r.get::<i64>(8)? as usize,
                skipped: r.get::<i64>(9)? as usize,
                failed: r.get::<i64>(10)? as usize,
            })
        })
    }

    /// Every sweep: (id, name, created_at, planned = all runs in its plan, done, skipped).
    #[allow(clippy::type_complexity)]
    pub fn sweeps(&self) -> Result<Vec<(i64, String, f64, usize, usize, usize)>, StoreError> {
        Ok(self.sweep_infos()?.into_iter().map(|s| (s.id, s.name, s.created_at, s.total, s.done, s.skipped)).collect())
    }
}

#[cfg(test)]
mod concurrent_opens {
    /// Four iolabs opening one new database file at once (two sweeps started together, or a
    /// reader polling a sweep that is creating it) all get it. Before the schema check read
    /// one snapshot and the switch to write-ahead logging waited, about a third of these
    /// rounds failed with "not an iolab results database" or "database is locked".
    #[test]
    fn concurrent_first_opens_of_a_new_database_all_succeed() {
        let mut fails = Vec::new();
        for i in 0..40 {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("x.db");
            std::fs::File::create(&p).unwrap();
            let errs: Vec<String> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..4).map(|_| s.spawn(|| super::Store::open(&p).err().map(|e| e.to_string()))).collect();
                hs.into_iter().filter_map(|h| h.join().unwrap()).collect()
            });
            if !errs.is_empty() {
                fails.push(format!("{i}: {errs:?}"));
            }
        }
        assert!(fails.is_empty(), "{fails:#?}");
    }
}
