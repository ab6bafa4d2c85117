//! The results database schema and its migrations.
//!
//! The schema version is kept twice: in SQLite's `PRAGMA user_version` (what `open` trusts) and
//! in the `meta` table (`schema_version`, readable with any SQL tool). `MIGRATIONS[i]`, with the
//! metric columns `columns.rs` adds in that version (`step`), takes a database from version `i`
//! to version `i + 1`; every pending step runs in one transaction together with the version
//! bump, so a database is always at exactly one version. Steps are never edited once released:
//! a change to the schema is a new step at the end.

use super::backend::{self, Db, DbError};
use super::columns::{RUN_COLUMNS, RUN_METRICS};
use super::StoreError;
use rusqlite::{Connection, OptionalExtension};

/// The schema version this code writes and reads.
pub const LATEST: u32 = MIGRATIONS.len() as u32;

/// Ordered migration steps; index i migrates version i to version i + 1 (with the metric
/// columns of version i + 1: `step`).
pub const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6, V7, V8];

/// The SQL taking a database from version `v - 1` to `v`: `MIGRATIONS[v - 1]` with its
/// `{metrics}` line replaced by the columns that version added: the metric columns
/// (`columns::RUN_METRICS`) as column definitions in version 1's `CREATE TABLE runs` and as
/// `ALTER TABLE` statements after it, and from version 7 on the `runs!` columns
/// (`columns::RUN_COLUMNS`) too (those of versions 1 to 6 are written out in their released text).
pub fn step(v: u32) -> String {
    let own = RUN_COLUMNS.iter().filter(|c| c.since == v && v > RUN_COLUMNS_WRITTEN_OUT).map(|c| (c.name, c.sql));
    let added = own.chain(RUN_METRICS.iter().filter(|c| c.since == v).map(|c| (c.name, c.sql)));
    let columns: String = if v == 1 {
        added.map(|(name, sql)| format!("    {name:<14} {sql},\n")).collect()
    } else {
        added.map(|(name, sql)| format!("ALTER TABLE runs ADD COLUMN {name} {sql};\n")).collect()
    };
    MIGRATIONS[v as usize - 1].replacen(METRICS_MARK, &columns, 1)
}

/// `step(v)` as PostgreSQL spells it (what `migrate` runs on a server).
pub fn step_for_postgres(v: u32) -> String {
    backend::postgres_sql(&step(v))
}

/// The last version whose `runs!` columns its released SQL writes out (`step` writes those of
/// later versions from `columns::RUN_COLUMNS`).
const RUN_COLUMNS_WRITTEN_OUT: u32 = 6;

/// Where a step's metric columns go.
const METRICS_MARK: &str = "{metrics}\n";

/// Version 1: sweeps, planned runs, runs with their key metrics, histograms and series.
const V1: &str = r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE sweeps (
    id         INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    plan_text  TEXT NOT NULL,
    plan_hash  TEXT NOT NULL,
    seed       INTEGER NOT NULL,       -- u64 stored bit for bit as i64
    created_at REAL NOT NULL           -- unix seconds
);
CREATE INDEX sweeps_plan_hash ON sweeps(plan_hash);

CREATE TABLE planned_runs (
    id         INTEGER PRIMARY KEY,
    sweep_id   INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
    ordinal    INTEGER NOT NULL,       -- execution order within the sweep
    replicate  INTEGER NOT NULL,
    config_key TEXT NOT NULL,
    spec       TEXT NOT NULL,          -- the Job as JSON
    status     TEXT NOT NULL DEFAULT 'planned'
               CHECK (status IN ('planned', 'done', 'skipped', 'failed')),
    reason     TEXT,                   -- why it was skipped
    updated_at REAL,
    UNIQUE (sweep_id, ordinal)
);
CREATE INDEX planned_runs_sweep_status ON planned_runs(sweep_id, status);

CREATE TABLE runs (
    id             INTEGER PRIMARY KEY,
    planned_id     INTEGER REFERENCES planned_runs(id),
    sweep_id       INTEGER REFERENCES sweeps(id),
    replicate      INTEGER,
    config_key     TEXT,
    status         TEXT NOT NULL,      -- the record's: ok, failed, interrupted
    error          TEXT,
    record_schema  INTEGER,
    recorded_at    REAL NOT NULL,
    started_at     REAL NOT NULL,
    hostname       TEXT,
    kernel         TEXT,
    iolab_version  TEXT,
    devices        TEXT,               -- environment.targets[].device, comma separated
    interface      TEXT NOT NULL,
    submit         TEXT NOT NULL,
    complete       TEXT NOT NULL,
    rw             TEXT NOT NULL,
    write_mix      INTEGER NOT NULL,
    bs             INTEGER NOT NULL,
    qd             INTEGER NOT NULL,
    threads        INTEGER NOT NULL,
    batch_submit   INTEGER NOT NULL,
    batch_reap     INTEGER NOT NULL,
    direct         INTEGER NOT NULL,
    budget_kind    TEXT,
    budget_value   REAL,
    targets        TEXT NOT NULL,      -- spec.targets as a JSON array
{metrics}
    record         TEXT NOT NULL       -- the run record, histograms and series moved out
);
CREATE INDEX runs_sweep ON runs(sweep_id);
-- A planned run has at most one stored result; interrupted runs do not count, they are rerun.
CREATE UNIQUE INDEX runs_planned ON runs(planned_id)
    WHERE planned_id IS NOT NULL AND status <> 'interrupted';

CREATE TABLE histograms (
    run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    direction TEXT NOT NULL CHECK (direction IN ('read', 'write', 'total')),
    encoding  TEXT NOT NULL,           -- 'hdr-v2-deflate'
    data      BLOB NOT NULL,
    PRIMARY KEY (run_id, direction)
) WITHOUT ROWID;

CREATE TABLE series (
    run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    t           INTEGER NOT NULL,
    read_iops   INTEGER,
    write_iops  INTEGER,
    mean_lat_ns REAL,
    extra       TEXT,                  -- fields of the point not in a column, as JSON
    PRIMARY KEY (run_id, t)
) WITHOUT ROWID;
"#;

/// Version 2: the completion path observed and the polling fallback become columns (from
/// `RUN_METRICS`, filled from the stored records by `fill`), and runs are indexed by
/// configuration for the replicate statistics.
const V2: &str = r#"
{metrics}
UPDATE runs SET
    completion_observed = json_extract(record, '$.completion_path.observed'),
    fell_back = json_extract(record, '$.completion_path.fell_back');
CREATE INDEX runs_config_key ON runs(config_key);
CREATE INDEX planned_runs_config_key ON planned_runs(config_key);
"#;

/// Version 3: where a profiled run's time went, one row per part: the layers of `--profile
/// layers` (self share of the CPU samples, self CPU ns per I/O) and the stages of `--profile
/// stages` (share of the end-to-end latency, mean, p50 and p99, requests), filled from the
/// stored records by `fill`.
const V3: &str = r#"
{metrics}
CREATE TABLE profile_parts (
    run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind      TEXT NOT NULL CHECK (kind IN ('layer', 'stage')),
    name      TEXT NOT NULL,           -- the layer; a stage's "from -> to"
    layer     TEXT NOT NULL,           -- the layer; what a stage's time was spent on
    share     REAL,                    -- layer: self share of the samples; stage: of the end to end
    ns_per_io REAL,                    -- layer: self CPU ns per I/O; stage: mean ns
    p50_ns    REAL,                    -- stages only
    p99_ns    REAL,
    requests  INTEGER,                 -- stages only: matched requests that passed it
    PRIMARY KEY (run_id, kind, name)
) WITHOUT ROWID;
INSERT OR IGNORE INTO profile_parts(run_id, kind, name, layer, share, ns_per_io)
    SELECT runs.id, 'layer', json_extract(l.value, '$.layer'), json_extract(l.value, '$.layer'),
           json_extract(l.value, '$.self_share'), json_extract(l.value, '$.self_ns_per_io')
    FROM runs, json_each(runs.record, '$.cost.profile.layers') AS l
    WHERE json_extract(l.value, '$.layer') IS NOT NULL;
INSERT OR IGNORE INTO profile_parts(run_id, kind, name, layer, share, ns_per_io, p50_ns, p99_ns, requests)
    SELECT runs.id, 'stage', json_extract(s.value, '$.from') || ' -> ' || json_extract(s.value, '$.to'),
           json_extract(s.value, '$.layer'), json_extract(s.value, '$.share'), json_extract(s.value, '$.mean_ns'),
           json_extract(s.value, '$.p50_ns'), json_extract(s.value, '$.p99_ns'), json_extract(s.value, '$.requests')
    FROM runs, json_each(runs.record, '$.cost.stages.stages') AS s
    WHERE json_extract(s.value, '$.layer') IS NOT NULL;
"#;

/// Version 4: `profile_parts` also holds the run's own CPU time by module and by function
/// (`--profile layers`' `run`, as IISWC'19 Fig 14 split it): kinds `module` (named "space:
/// module: layer") and `function` ("space: module: function"), share of the run's samples and
/// CPU ns per I/O, filled from the stored records by `fill`. SQLite cannot widen a CHECK, so
/// the table is made anew with its rows.
const V4: &str = r#"
{metrics}
CREATE TABLE profile_parts_v4 (
    run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    kind      TEXT NOT NULL CHECK (kind IN ('layer', 'stage', 'module', 'function')),
    name      TEXT NOT NULL,           -- the layer; a stage's "from -> to"; "space: module: layer"; "space: module: function"
    layer     TEXT NOT NULL,           -- the layer; what a stage's time was spent on
    share     REAL,                    -- layer: self share of the samples; stage: of the end to end; module, function: of the run's samples
    ns_per_io REAL,                    -- layer, module, function: self CPU ns per I/O; stage: mean ns
    p50_ns    REAL,                    -- stages only
    p99_ns    REAL,
    requests  INTEGER,                 -- stages only: matched requests that passed it
    PRIMARY KEY (run_id, kind, name)
) WITHOUT ROWID;
INSERT INTO profile_parts_v4 SELECT run_id, kind, name, layer, share, ns_per_io, p50_ns, p99_ns, requests FROM profile_parts;
DROP TABLE profile_parts;
ALTER TABLE profile_parts_v4 RENAME TO profile_parts;
INSERT OR IGNORE INTO profile_parts(run_id, kind, name, layer, share, ns_per_io)
    SELECT runs.id, 'module',
           json_extract(m.value, '$.space') || ': ' || json_extract(m.value, '$.module') || ': ' || json_extract(m.value, '$.layer'),
           json_extract(m.value, '$.layer'), json_extract(m.value, '$.share'), json_extract(m.value, '$.ns_per_io')
    FROM runs, json_each(runs.record, '$.cost.profile.run.modules') AS m
    WHERE json_extract(m.value, '$.layer') IS NOT NULL;
INSERT OR IGNORE INTO profile_parts(run_id, kind, name, layer, share, ns_per_io)
    SELECT runs.id, 'function',
           json_extract(f.value, '$.space') || ': ' || json_extract(f.value, '$.module') || ': ' || json_extract(f.value, '$.function'),
           json_extract(f.value, '$.layer'), json_extract(f.value, '$.share'), json_extract(f.value, '$.ns_per_io')
    FROM runs, json_each(runs.record, '$.cost.profile.run.functions') AS f
    WHERE json_extract(f.value, '$.layer') IS NOT NULL;
"#;

/// Version 5: a layer's self cycles and instructions per I/O in `profile_parts`, where the CPUs
/// counted them (`--profile layers` on a machine with a PMU); nothing to fill, as no record made
/// before carried them.
const V5: &str = r#"
{metrics}
ALTER TABLE profile_parts ADD COLUMN cycles_per_io REAL;
ALTER TABLE profile_parts ADD COLUMN instructions_per_io REAL;
"#;

/// Version 6: identities that survive a merge. A run's `run_uid` (128 bits, hex) is made at
/// random when the run is recorded and travels with it into every database it is merged into:
/// `iolab merge` recognises a run by it, never by its record's text. A sweep's `uid` likewise;
/// its `split` names the fleet submission it is a share of (`iolab fleet submit`, `--split`),
/// NULL for a plan run whole: only shares of one split join one sweep in a merge. Runs and sweeps
/// stored before are given ids derived from what they hold (`fill_uids`), the same each time
/// the same database is migrated.
const V6: &str = r#"
{metrics}
ALTER TABLE runs ADD COLUMN run_uid TEXT;
ALTER TABLE sweeps ADD COLUMN uid TEXT;
ALTER TABLE sweeps ADD COLUMN split TEXT;
CREATE INDEX runs_run_uid ON runs(run_uid);
CREATE INDEX sweeps_uid ON sweeps(uid);
CREATE INDEX sweeps_split ON sweeps(split);
"#;

/// Version 7: the tool that made a run (`tool`, NOT NULL, 'iolab' for iolab's own runs;
/// `tool_version`) and the energy efficiency of the drive, the CPU and the system (I/Os and bytes
/// per joule, and per joule above idle), all from `columns.rs`, filled from the stored records in
/// Rust by `fill`.
const V7: &str = r#"
{metrics}
CREATE INDEX runs_tool ON runs(tool);
"#;

/// Version 8: the file-set workload (`--fileset`): its part of the spec (`fileset_files`,
/// `file_size`, `file_order`, `fsync`), its creation (`create_s`, per-file p50/p99) and its
/// measured files (`files`, `files_per_s`, per-file mean/p50/p99, `fsyncs`), all from
/// `columns.rs`, filled from the stored records in Rust by `fill` (NULL for other runs).
const V8: &str = r#"
{metrics}
"#;

/// The identity of a run stored before version 6: a 128-bit FNV-1a hash of its stored record
/// with its JSON written the one way serde_json writes it (so the same record re-indented gets
/// the same id); the record holds the host, start time and every measurement.
pub fn derived_run_uid(record: &str) -> String {
    let canonical = serde_json::from_str::<serde_json::Value>(record).map(|v| v.to_string());
    fnv128(&[b"iolab run\0", canonical.as_deref().unwrap_or(record).as_bytes()])
}

/// The identity of a sweep stored before version 6: its name, plan, seed and creation time.
pub fn derived_sweep_uid(name: &str, plan_hash: &str, seed: i64, created_at: f64) -> String {
    fnv128(&[
        b"iolab sweep\0",
        name.as_bytes(),
        b"\0",
        plan_hash.as_bytes(),
        b"\0",
        &seed.to_le_bytes(),
        &created_at.to_bits().to_le_bytes(),
    ])
}

/// A new run or sweep id: 128 random bits from the kernel (getrandom(2)), as hex.
pub(crate) fn new_uid() -> String {
    let mut b = [0u8; 16];
    let mut got = 0;
    while got < b.len() {
        // SAFETY: the pointer and length are those of the unfilled part of `b`.
        let n = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), b.len() - got, 0) };
        if n > 0 {
            got += n as usize;
        } else if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // No getrandom (a very old kernel): the time and process make an id no other run has.
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            return fnv128(&[&t.to_le_bytes(), &std::process::id().to_le_bytes(), &b]);
        }
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn fnv128(parts: &[&[u8]]) -> String {
    let mut h: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    for b in parts.iter().flat_map(|p| p.iter()) {
        h ^= u128::from(*b);
        h = h.wrapping_mul(0x0000_0000_0100_0000_0000_0000_0000_013b);
    }
    format!("{h:032x}")
}

/// What migrating to version `to` fills from the runs already stored, done here in Rust through
/// the reading `record_run` uses (`record::read`, `columns::added_values`, which reads each column
/// as `record_run` does, `extract::profile_parts`), so it runs alike on SQLite and PostgreSQL,
/// one run at a time (a database of large records is never read whole): the columns version `to`
/// added (version 2: the completion path; version 7: the tool and the energy efficiencies), the
/// profile parts (version 3: layers and stages; version 4: the run's modules and functions), the
/// identities (version 6, `fill_uids`).
fn fill(tx: &mut backend::Tx, to: u32) -> Result<(), DbError> {
    use crate::record::read::Record;
    let kinds: &[&str] = match to {
        3 => &["layer", "stage"],
        4 => &["module", "function"],
        _ => &[],
    };
    let own = RUN_COLUMNS.iter().any(|c| c.since == to && c.from.is_some());
    let adds = to > 1 && (own || RUN_METRICS.iter().any(|c| c.since == to));
    if adds || !kinds.is_empty() {
        let mut last = i64::MIN;
        while let Some(r) = tx.row("SELECT id, record FROM runs WHERE id > ?1 ORDER BY id LIMIT 1", &[last.into()])? {
            last = r.get(0)?;
            let Ok(json) = serde_json::from_str::<serde_json::Value>(&r.get::<String>(1)?) else { continue };
            let record = Record::of(&json);
            let values = if adds { super::columns::added_values(&record, &json, to) } else { Vec::new() };
            if !values.is_empty() {
                let set: Vec<String> = values.iter().enumerate().map(|(i, (c, _))| format!("{c} = ?{}", i + 1)).collect();
                let mut p: Vec<rusqlite::types::Value> = values.into_iter().map(|(_, v)| v).collect();
                p.push(last.into());
                tx.exec(&format!("UPDATE runs SET {} WHERE id = ?{}", set.join(", "), p.len()), &p)?;
            }
            for part in super::extract::profile_parts(&record).into_iter().filter(|p| kinds.contains(&p.kind)) {
                // The columns the table has at this version (the counts came in version 5).
                tx.exec(
                    "INSERT INTO profile_parts(run_id, kind, name, layer, share, ns_per_io, p50_ns, p99_ns, requests) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT DO NOTHING",
                    &[
                        last.into(),
                        part.kind.to_string().into(),
                        part.name.into(),
                        part.layer.into(),
                        part.share.into(),
                        part.ns_per_io.into(),
                        part.p50_ns.into(),
                        part.p99_ns.into(),
                        part.requests.map(|n| n as i64).into(),
                    ],
                )?;
            }
        }
    }
    if to == 6 {
        fill_uids(tx)?;
    }
    Ok(())
}

/// Give every run and sweep stored before version 6 its derived id, one row at a time (a
/// database of large records is never read whole).
fn fill_uids(tx: &mut backend::Tx) -> Result<(), DbError> {
    let mut last = i64::MIN;
    while let Some(r) = tx.row("SELECT id, record FROM runs WHERE run_uid IS NULL AND id > ?1 ORDER BY id LIMIT 1", &[last.into()])? {
        last = r.get(0)?;
        let uid = derived_run_uid(&r.get::<String>(1)?);
        tx.exec("UPDATE runs SET run_uid = ?1 WHERE id = ?2", &[uid.into(), last.into()])?;
    }
    let sweeps = tx.rows("SELECT id, name, plan_hash, seed, created_at FROM sweeps WHERE uid IS NULL", &[])?;
    for r in sweeps {
        let uid = derived_sweep_uid(&r.get::<String>(1)?, &r.get::<String>(2)?, r.get(3)?, r.get(4)?);
        tx.exec("UPDATE sweeps SET uid = ?1 WHERE id = ?2", &[uid.into(), r.get::<i64>(0)?.into()])?;
    }
    Ok(())
}

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

pub fn user_version(conn: &Connection) -> rusqlite::Result<u32> {
    conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0)).map(|v| v as u32)
}

/// The schema version of a database from what it holds: its version (SQLite's `user_version`,
/// PostgreSQL's `meta.schema_version`), how many tables it has, and `meta.schema_version` if any.
/// Refuses a database written by a newer iolab and one with tables but no iolab schema.
fn verdict(v: u32, tables: i64, meta: Option<String>) -> Result<u32, StoreError> {
    if v > LATEST {
        return Err(StoreError::Refused(format!("schema version {v} is newer than this iolab understands ({LATEST}); use a newer iolab")));
    }
    if v == 0 {
        if tables > 0 {
            return Err(StoreError::Refused("not an iolab results database (it has tables but no iolab schema version)".into()));
        }
    } else if meta.as_deref() != Some(v.to_string().as_str()) {
        return Err(StoreError::Failed(format!(
            "inconsistent schema version: user_version {v}, meta {}",
            meta.as_deref().unwrap_or("missing")
        )));
    }
    Ok(v)
}

/// The schema version of an iolab results database (0: an empty SQLite file), reading only, so
/// that it can run on a read-only connection before anything is changed (`verdict`).
pub fn check(conn: &Connection) -> Result<u32, StoreError> {
    let e = |x: rusqlite::Error| StoreError::from(DbError::from(x));
    // One snapshot for every read below: another iolab creating the database at this moment
    // is seen before or after its creation, never half way (tables without their version).
    let snapshot = conn.unchecked_transaction().map_err(e)?;
    let conn: &Connection = &snapshot;
    let v = user_version(conn).map_err(e)?;
    let (mut tables, mut meta) = (0, None);
    if v == 0 {
        tables = conn.query_row("SELECT count(*) FROM sqlite_master WHERE name NOT LIKE 'sqlite_%'", [], |r| r.get(0)).map_err(e)?;
    } else if v <= LATEST {
        meta = conn.query_row("SELECT value FROM meta WHERE key = 'schema_version'", [], |r| r.get(0)).optional().map_err(e)?;
    }
    verdict(v, tables, meta)
}

/// The schema version of a PostgreSQL database (0: no tables in its schema), which keeps it in
/// `meta` alone (`verdict`).
pub(crate) fn check_postgres(db: &Db) -> Result<u32, StoreError> {
    let e = StoreError::from;
    let count = |sql: &str| db.row(sql, &[]).and_then(|r| r.map_or(Ok(0), |r| r.get::<i64>(0))).map_err(e);
    let tables = count("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()")?;
    let has_meta =
        count("SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'meta'")? > 0;
    let meta: Option<String> = match has_meta {
        true => {
            db.row("SELECT value FROM meta WHERE key = 'schema_version'", &[]).and_then(|r| r.map(|r| r.get(0)).transpose()).map_err(e)?
        }
        false => None,
    };
    let v = meta
        .as_deref()
        .map_or(Ok(0), |m| m.parse::<u32>().map_err(|_| StoreError::Failed(format!("meta.schema_version is {m:?}, not a version"))))?;
    verdict(v, tables, meta)
}

/// Bring the database to `LATEST`, creating it when empty, after `check` (`check_postgres`).
/// On PostgreSQL each step is translated (`backend::postgres_sql`); what a step fills from the stored runs
/// is done in Rust (`fill`), alike on both.
pub(crate) fn migrate(db: &mut Db) -> Result<(), StoreError> {
    let v = match db.sqlite() {
        Some(conn) => check(conn)?,
        None => check_postgres(db)?,
    };
    if v == LATEST {
        return Ok(());
    }
    db.write(|tx| {
        let e = StoreError::from;
        // Someone else may have migrated between the read above and taking the write lock.
        let v = match tx.sqlite() {
            Some(conn) => user_version(conn).map_err(DbError::from)?,
            None => {
                let meta = tx
                    .rows(
                        "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'meta'",
                        &[],
                    )
                    .and_then(|r| r[0].get::<i64>(0))
                    .map_err(e)?;
                let version: Option<String> = match meta {
                    0 => None,
                    _ => tx
                        .row("SELECT value FROM meta WHERE key = 'schema_version'", &[])
                        .and_then(|r| r.map(|r| r.get(0)).transpose())
                        .map_err(e)?,
                };
                version.and_then(|v| v.parse().ok()).unwrap_or(0)
            }
        };
        if v >= LATEST {
            return Ok(());
        }
        for to in v + 1..=LATEST {
            // The released step less its statements that fill from the stored records with
            // SQLite's JSON functions (a server has none): `fill` does that, in Rust, on both
            // engines. `Tx::batch` translates the rest for PostgreSQL.
            let at = |x: DbError| StoreError::from(x).context(|m| format!("migration to schema version {to}: {m}"));
            let (sql, _filled_by_fill) = backend::without_fills(&step(to));
            tx.batch(&sql).map_err(at)?;
            fill(tx, to).map_err(at)?;
        }
        let t = now().to_string();
        let mut meta = vec![("schema_version".to_string(), LATEST.to_string()), (format!("migrated_to_{LATEST}_at"), t.clone())];
        if v == 0 {
            meta.push(("created_at".into(), t));
            meta.push(("created_by".into(), format!("iolab {}", env!("CARGO_PKG_VERSION"))));
        }
        for (k, val) in meta {
            tx.exec(
                "INSERT INTO meta(key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                &[k.into(), val.into()],
            )
            .map_err(e)?;
        }
        if let Some(conn) = tx.sqlite() {
            conn.pragma_update(None, "user_version", LATEST as i64).map_err(DbError::from)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each step's written-out text and the column tables cannot drift apart: the `runs` columns
    /// each step creates (version 1's `CREATE TABLE` as written, version 6's `run_uid`, the
    /// `ALTER TABLE`s made from the tables) are, name, type and NOT NULL, the `runs!` and
    /// `metrics!` columns of that version (and, in version 1, `record`).
    #[test]
    fn the_columns_each_step_creates_are_the_tables_columns_of_its_version() {
        let c = Connection::open_in_memory().unwrap();
        let mut have: Vec<String> = Vec::new();
        for v in 1..=LATEST {
            c.execute_batch(&step(v)).unwrap();
            let mut st = c.prepare("SELECT name, type, \"notnull\" FROM pragma_table_info('runs')").unwrap();
            let cols: Vec<(String, String, bool)> =
                st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).unwrap().map(Result::unwrap).collect();
            let mut made: Vec<(String, String, bool)> = cols.into_iter().filter(|c| !have.contains(&c.0)).collect();
            have.extend(made.iter().map(|c| c.0.clone()));
            let of = |name: &str, sql: &str| (name.to_string(), sql.split(' ').next().unwrap().to_string(), sql.contains("NOT NULL"));
            let mut want: Vec<(String, String, bool)> = RUN_COLUMNS
                .iter()
                .filter(|c| c.since == v)
                .map(|c| of(c.name, c.sql))
                .chain(RUN_METRICS.iter().filter(|c| c.since == v).map(|c| of(c.name, c.sql)))
                .collect();
            if v == 1 {
                want.push(of("record", "TEXT NOT NULL"));
            }
            made.sort();
            want.sort();
            assert_eq!(made, want, "the runs columns of version {v}");
        }
    }

    #[test]
    fn every_metric_column_belongs_to_a_step_that_places_it() {
        for c in RUN_METRICS {
            assert!((1..=LATEST).contains(&c.since), "{} is added in version {}, which has no step in MIGRATIONS", c.name, c.since);
            assert!(
                MIGRATIONS[c.since as usize - 1].contains(METRICS_MARK),
                "step {} has no {METRICS_MARK:?} line for {}",
                c.since,
                c.name
            );
        }
    }
}
