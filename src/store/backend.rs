//! The seam between the store and its two database engines: an SQLite file (the default) and a
//! PostgreSQL server (`postgresql://user@host/dbname`, a team's shared store). Every query of the
//! store is written once, in SQL both engines take, with `?N` or `?` parameters and
//! `rusqlite::types::Value` values; rows come back as `DbRow`s read with rusqlite's own
//! conversions, so the SQLite path converts exactly as before. What PostgreSQL spells otherwise
//! is translated here, in one place (`postgres_sql`, `without_fills`).
//!
//! Writers are one at a time on both: SQLite's `BEGIN IMMEDIATE` write lock, and on PostgreSQL a
//! transaction-scoped advisory lock taken first in every write transaction, so that the store's
//! check-then-write steps (a planned run still `planned`, a sweep not merged yet) hold on a
//! server shared by many nodes as they do in a file.

use super::StoreError;
use postgres::types::{IsNull, ToSql, Type};
use rusqlite::types::{FromSql, Value as Sql, ValueRef};
use rusqlite::{Connection, TransactionBehavior};
use std::sync::{Arc, Mutex};

/// The advisory lock every PostgreSQL write transaction takes (any fixed number: "iolb").
const WRITE_LOCK: i64 = 0x696f_6c62;
/// The advisory lock a merge into a PostgreSQL store holds from start to end ("iolm").
const MERGE_LOCK: i64 = 0x696f_6c6d;

/// Whether `--db` names a PostgreSQL server rather than an SQLite file.
pub fn is_postgres_url(s: &str) -> bool {
    s.starts_with("postgresql://") || s.starts_with("postgres://")
}

/// A failed statement: its message, whether a constraint (unique, check) refused it, and
/// whether the database named cannot be used as given (it cannot be opened, a login refused):
/// bad input rather than a database that failed (`StoreError`).
#[derive(Debug)]
pub struct DbError {
    pub msg: String,
    pub constraint: bool,
    pub refused: bool,
}

impl From<DbError> for StoreError {
    fn from(e: DbError) -> StoreError {
        if e.refused {
            StoreError::Refused(e.msg)
        } else {
            StoreError::Failed(e.msg)
        }
    }
}

impl std::fmt::Display for DbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.msg)
    }
}

impl From<rusqlite::Error> for DbError {
    fn from(e: rusqlite::Error) -> DbError {
        use rusqlite::ErrorCode as C;
        let code = match &e {
            rusqlite::Error::SqliteFailure(f, _) => Some(f.code),
            _ => None,
        };
        let constraint = code == Some(C::ConstraintViolation);
        // A file that cannot be opened (no such directory, no permission) or written (a
        // read-only mount) is the name given; a damaged or locked one is the database's.
        let refused = matches!(code, Some(C::CannotOpen | C::PermissionDenied | C::ReadOnly));
        DbError { msg: e.to_string(), constraint, refused }
    }
}

impl From<postgres::Error> for DbError {
    fn from(e: postgres::Error) -> DbError {
        // Class 23: integrity constraint violations (unique, check, foreign key).
        let constraint = e.code().is_some_and(|c| c.code().starts_with("23"));
        // Class 28: the login refused; 3D000: no such database. The URL given is wrong.
        let refused = e.code().is_some_and(|c| c.code().starts_with("28") || c.code() == "3D000");
        let msg = match e.as_db_error() {
            Some(d) => format!("{}: {}", d.severity(), d.message()),
            // "error connecting to server" alone does not say why: the cause follows.
            None => match std::error::Error::source(&e) {
                Some(cause) => format!("{e}: {cause}"),
                None => e.to_string(),
            },
        };
        DbError { msg, constraint, refused }
    }
}

impl From<String> for DbError {
    fn from(msg: String) -> DbError {
        DbError { msg, constraint: false, refused: false }
    }
}

/// A result row of either engine: its values by position or column name.
pub struct DbRow {
    names: Arc<[String]>,
    values: Vec<Sql>,
}

/// A column of a `DbRow`: its position or its name.
pub trait Col {
    fn position(&self, names: &[String]) -> Option<usize>;
}

impl Col for usize {
    fn position(&self, names: &[String]) -> Option<usize> {
        (*self < names.len()).then_some(*self)
    }
}

impl Col for &str {
    fn position(&self, names: &[String]) -> Option<usize> {
        names.iter().position(|n| n == self)
    }
}

impl DbRow {
    /// A column's value as `T`, converted as rusqlite converts an SQLite value.
    pub fn get<T: FromSql>(&self, c: impl Col) -> Result<T, DbError> {
        let i = c.position(&self.names).ok_or_else(|| DbError::from(format!("no such column in the result: {:?}", self.names)))?;
        T::column_result(ValueRef::from(&self.values[i])).map_err(|e| DbError::from(format!("column {}: {e}", self.names[i])))
    }
}

/// An open database of either engine.
pub enum Db {
    Sqlite(Connection),
    /// `postgres::Client` queries take `&mut`; the store reads through `&self`.
    Postgres(Mutex<postgres::Client>),
}

/// A write transaction of either engine; dropped without `commit`, it rolls back.
pub enum Tx<'a> {
    Sqlite(rusqlite::Transaction<'a>),
    Postgres(postgres::Transaction<'a>),
}

impl Db {
    /// Connect to a PostgreSQL server (no TLS: a team's server on its own network; libpq's
    /// `sslmode` is not read), configured as libpq would be (`pg_config`: a service, the
    /// environment, the password file). No message carries the password.
    pub fn connect(url: &str) -> Result<Db, DbError> {
        let r = super::pg_config::resolve(url, &super::pg_config::Env::process(), &mut |w| eprintln!("iolab: warning: {w}"))
            .map_err(|e| DbError { msg: e.to_string(), constraint: false, refused: true })?;
        let client = r.config.connect(postgres::NoTls).map_err(|e| {
            let refused = e.code() == Some(&postgres::error::SqlState::INVALID_PASSWORD);
            // Only a server that cannot be reached (the connection's I/O failed) is the store's
            // failure; a login refused, no password to give, no such database are the URL's.
            let unreachable = std::error::Error::source(&e).is_some_and(|c| c.is::<std::io::Error>());
            let mut e = DbError::from(e);
            e.refused |= !unreachable;
            e.msg = crate::secret::redact(&e.msg);
            if let (true, Some(f)) = (refused, &r.password_file) {
                e.msg.push_str(&format!(" (the password was read from {})", f.display()));
            }
            e
        })?;
        Ok(Db::Postgres(Mutex::new(client)))
    }

    pub fn is_postgres(&self) -> bool {
        matches!(self, Db::Postgres(_))
    }

    /// The SQLite connection, for what only SQLite has (pragmas, `VACUUM INTO`).
    pub fn sqlite(&self) -> Option<&Connection> {
        match self {
            Db::Sqlite(c) => Some(c),
            Db::Postgres(_) => None,
        }
    }

    pub fn rows(&self, sql: &str, p: &[Sql]) -> Result<Vec<DbRow>, DbError> {
        match self {
            Db::Sqlite(c) => sqlite_rows(c, sql, p),
            Db::Postgres(c) => pg_rows(&mut *c.lock().unwrap_or_else(|e| e.into_inner()), sql, p),
        }
    }

    /// The first row, if any.
    pub fn row(&self, sql: &str, p: &[Sql]) -> Result<Option<DbRow>, DbError> {
        Ok(self.rows(sql, p)?.into_iter().next())
    }

    /// One statement outside a transaction (it commits alone); returns the rows changed.
    pub fn exec(&self, sql: &str, p: &[Sql]) -> Result<u64, DbError> {
        match self {
            Db::Sqlite(c) => Ok(c.prepare_cached(sql)?.execute(rusqlite::params_from_iter(p))? as u64),
            Db::Postgres(c) => pg_exec(&mut *c.lock().unwrap_or_else(|e| e.into_inner()), sql, p),
        }
    }

    /// Take (`hold`) or give back the lock of a merge on a PostgreSQL server: a merge is many
    /// transactions (a sweep found or made, then its runs), so two at once could both make the
    /// same sweep. Nothing on SQLite, whose merges `Store::merge_from` serialises with a `flock`
    /// on `<db>.lock` beside the file (`merge::MergeLock`).
    pub(crate) fn merge_lock(&self, hold: bool) -> Result<(), DbError> {
        match self {
            Db::Sqlite(_) => Ok(()),
            Db::Postgres(c) => {
                let sql = if hold { "SELECT pg_advisory_lock($1)" } else { "SELECT pg_advisory_unlock($1)" };
                c.lock().unwrap_or_else(|e| e.into_inner()).execute(sql, &[&MERGE_LOCK])?;
                Ok(())
            }
        }
    }

    /// Run `f` in a write transaction, one writer at a time, committed when `f` succeeds.
    pub fn write<T>(&mut self, f: impl FnOnce(&mut Tx) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut tx = match self {
            Db::Sqlite(c) => Tx::Sqlite(c.transaction_with_behavior(TransactionBehavior::Immediate).map_err(DbError::from)?),
            Db::Postgres(c) => {
                let mut tx = c.get_mut().unwrap_or_else(|e| e.into_inner()).transaction().map_err(DbError::from)?;
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK]).map_err(DbError::from)?;
                Tx::Postgres(tx)
            }
        };
        let v = f(&mut tx)?;
        tx.commit()?;
        Ok(v)
    }
}

impl Tx<'_> {
    pub fn rows(&mut self, sql: &str, p: &[Sql]) -> Result<Vec<DbRow>, DbError> {
        match self {
            Tx::Sqlite(t) => sqlite_rows(t, sql, p),
            Tx::Postgres(t) => pg_rows(t, sql, p),
        }
    }

    pub fn row(&mut self, sql: &str, p: &[Sql]) -> Result<Option<DbRow>, DbError> {
        Ok(self.rows(sql, p)?.into_iter().next())
    }

    /// One statement; returns the rows changed.
    pub fn exec(&mut self, sql: &str, p: &[Sql]) -> Result<u64, DbError> {
        match self {
            Tx::Sqlite(t) => Ok(t.prepare_cached(sql)?.execute(rusqlite::params_from_iter(p))? as u64),
            Tx::Postgres(t) => pg_exec(t, sql, p),
        }
    }

    /// Statements without parameters, one after another (a migration step).
    pub fn batch(&mut self, sql: &str) -> Result<(), DbError> {
        match self {
            Tx::Sqlite(t) => Ok(t.execute_batch(sql)?),
            Tx::Postgres(t) => Ok(t.batch_execute(&postgres_sql(sql))?),
        }
    }

    /// The SQLite transaction, for what only SQLite has (`PRAGMA user_version`).
    pub fn sqlite(&self) -> Option<&Connection> {
        match self {
            Tx::Sqlite(t) => Some(t),
            Tx::Postgres(_) => None,
        }
    }

    fn commit(self) -> Result<(), DbError> {
        match self {
            Tx::Sqlite(t) => Ok(t.commit()?),
            Tx::Postgres(t) => Ok(t.commit()?),
        }
    }
}

fn sqlite_rows(c: &Connection, sql: &str, p: &[Sql]) -> Result<Vec<DbRow>, DbError> {
    let mut st = c.prepare_cached(sql)?;
    let names: Arc<[String]> = st.column_names().map(String::from).collect();
    let mut rows = st.query(rusqlite::params_from_iter(p))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let values = (0..names.len()).map(|i| r.get::<_, Sql>(i)).collect::<rusqlite::Result<Vec<_>>>()?;
        out.push(DbRow { names: names.clone(), values });
    }
    Ok(out)
}

fn pg_params(p: &[Sql]) -> Vec<PgValue<'_>> {
    p.iter().map(PgValue).collect()
}

fn pg_rows(c: &mut impl postgres::GenericClient, sql: &str, p: &[Sql]) -> Result<Vec<DbRow>, DbError> {
    let values = pg_params(p);
    let refs: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
    let rows = c.query(postgres_sql(sql).as_str(), &refs)?;
    let Some(first) = rows.first() else { return Ok(Vec::new()) };
    let names: Arc<[String]> = first.columns().iter().map(|c| c.name().to_string()).collect();
    rows.iter()
        .map(|r| {
            let values = (0..names.len()).map(|i| pg_value(r, i)).collect::<Result<Vec<_>, _>>()?;
            Ok(DbRow { names: names.clone(), values })
        })
        .collect()
}

fn pg_exec(c: &mut impl postgres::GenericClient, sql: &str, p: &[Sql]) -> Result<u64, DbError> {
    let values = pg_params(p);
    let refs: Vec<&(dyn ToSql + Sync)> = values.iter().map(|v| v as &(dyn ToSql + Sync)).collect();
    Ok(c.execute(postgres_sql(sql).as_str(), &refs)?)
}

/// A PostgreSQL column as the SQLite value it stands for.
fn pg_value(r: &postgres::Row, i: usize) -> Result<Sql, DbError> {
    let ty = r.columns()[i].type_().clone();
    let v = match ty {
        Type::INT8 => r.try_get::<_, Option<i64>>(i)?.map(Sql::Integer),
        Type::INT4 => r.try_get::<_, Option<i32>>(i)?.map(|x| Sql::Integer(x.into())),
        Type::INT2 => r.try_get::<_, Option<i16>>(i)?.map(|x| Sql::Integer(x.into())),
        Type::BOOL => r.try_get::<_, Option<bool>>(i)?.map(|x| Sql::Integer(x.into())),
        Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?.map(Sql::Real),
        Type::FLOAT4 => r.try_get::<_, Option<f32>>(i)?.map(|x| Sql::Real(x.into())),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => r.try_get::<_, Option<String>>(i)?.map(Sql::Text),
        Type::BYTEA => r.try_get::<_, Option<Vec<u8>>>(i)?.map(Sql::Blob),
        other => return Err(format!("column {} has type {other}, which the store does not read", r.columns()[i].name()).into()),
    };
    Ok(v.unwrap_or(Sql::Null))
}

/// An SQLite value as a PostgreSQL parameter of the type the server inferred for it (an
/// integer compared with a JSON field's text goes as its digits, as SQLite compares them).
#[derive(Debug)]
struct PgValue<'a>(&'a Sql);

impl ToSql for PgValue<'_> {
    fn to_sql(&self, ty: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let text = |s: &str, out: &mut bytes::BytesMut| s.to_sql(&Type::TEXT, out);
        match (self.0, ty) {
            (Sql::Null, _) => Ok(IsNull::Yes),
            (Sql::Integer(i), &Type::INT8) => i.to_sql(ty, out),
            (Sql::Integer(i), &Type::INT4) => i32::try_from(*i)?.to_sql(ty, out),
            (Sql::Integer(i), &Type::INT2) => i16::try_from(*i)?.to_sql(ty, out),
            (Sql::Integer(i), &Type::FLOAT8) => (*i as f64).to_sql(ty, out),
            (Sql::Integer(i), &Type::BOOL) => (*i != 0).to_sql(ty, out),
            (Sql::Integer(i), &Type::TEXT | &Type::VARCHAR) => text(&i.to_string(), out),
            (Sql::Real(f), &Type::FLOAT8) => f.to_sql(ty, out),
            (Sql::Real(f), &Type::FLOAT4) => (*f as f32).to_sql(ty, out),
            (Sql::Real(f), &Type::TEXT | &Type::VARCHAR) => text(&f.to_string(), out),
            (Sql::Text(s), &Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::NAME) => text(s, out),
            (Sql::Blob(b), &Type::BYTEA) => b.to_sql(ty, out),
            (v, ty) => Err(format!("cannot pass {v:?} as a PostgreSQL {ty}").into()),
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

/// A statement of the store (written for both engines) as PostgreSQL spells it: `$N`
/// parameters, `json_extract(X, '$.a.b')` as `(X::jsonb #>> '{a,b}')` (the field as text), and
/// in the schema SQLite's types as PostgreSQL's of the same range (`INTEGER` is 64-bit in SQLite,
/// `REAL` a double) and its rowid key as an identity column.
pub(crate) fn postgres_sql(sql: &str) -> String {
    let sql = json_paths(sql);
    let mut out = String::with_capacity(sql.len() + 16);
    let (mut next, mut quoted) = (0, false);
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                quoted = !quoted;
                out.push(c);
            }
            '?' if !quoted => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    next += 1;
                    digits = next.to_string();
                }
                out.push('$');
                out.push_str(&digits);
            }
            _ => out.push(c),
        }
    }
    for (sqlite, pg) in [
        ("INTEGER PRIMARY KEY", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
        ("INTEGER", "BIGINT"),
        ("REAL", "DOUBLE PRECISION"),
        ("BLOB", "BYTEA"),
        (" WITHOUT ROWID", ""),
    ] {
        out = replace_words(&out, sqlite, pg);
    }
    out
}

/// `json_extract(X, '$.a.b')` → `(X::jsonb #>> '{a,b}')`.
fn json_paths(sql: &str) -> String {
    const F: &str = "json_extract(";
    let mut out = String::new();
    let mut rest = sql;
    while let Some(at) = rest.find(F) {
        out.push_str(&rest[..at]);
        let after = &rest[at + F.len()..];
        let parsed = after.split_once(", '$.").and_then(|(arg, tail)| tail.split_once("')").map(|(path, tail)| (arg, path, tail)));
        match parsed {
            Some((arg, path, tail)) if !arg.contains('(') => {
                out.push_str(&format!("({arg}::jsonb #>> '{{{}}}')", path.replace('.', ",")));
                rest = tail;
            }
            _ => {
                out.push_str(F);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Replace `from` where it stands as whole words (upper case, as the schema writes types).
fn replace_words(s: &str, from: &str, to: &str) -> String {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while let Some(at) = s[i..].find(from).map(|a| a + i) {
        let end = at + from.len();
        let whole = !word(s[..at].chars().next_back()) && !word(s[end..].chars().next());
        out.push_str(&s[i..at]);
        out.push_str(if whole { to } else { from });
        i = end;
    }
    out.push_str(&s[i..]);
    out
}

/// A released migration step less its statements that fill new columns or tables from the
/// stored records with SQLite's JSON functions (returned apart): `schema::fill` fills them in
/// Rust instead, alike on SQLite and PostgreSQL (which has no such functions; the rest is
/// translated by `postgres_sql` when the step runs).
pub(crate) fn without_fills(step: &str) -> (String, Vec<String>) {
    let (mut kept, mut fills) = (String::new(), Vec::new());
    let mut statement = String::new();
    for line in step.split_inclusive('\n') {
        statement.push_str(line);
        if line.trim_end().ends_with(';') {
            let s = std::mem::take(&mut statement);
            if s.contains("json_each(") || s.contains("json_extract(") {
                fills.push(s.trim().to_string());
            } else {
                kept.push_str(&s);
            }
        }
    }
    kept.push_str(&statement);
    (kept, fills)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_spelling_of_parameters_json_fields_and_types() {
        assert_eq!(postgres_sql("SELECT a FROM t WHERE b = ?1 AND c = ?2"), "SELECT a FROM t WHERE b = $1 AND c = $2");
        assert_eq!(postgres_sql("x = ? AND y = '?' AND z = ?"), "x = $1 AND y = '?' AND z = $2");
        assert_eq!(postgres_sql("json_extract(spec, '$.bs') = ?"), "(spec::jsonb #>> '{bs}') = $1");
        assert_eq!(postgres_sql("json_extract(record, '$.a.b')"), "(record::jsonb #>> '{a,b}')");
        assert_eq!(
            postgres_sql("CREATE TABLE t (\n    id INTEGER PRIMARY KEY,\n    n INTEGER NOT NULL,\n    x REAL, b BLOB, realm TEXT\n) WITHOUT ROWID;"),
            "CREATE TABLE t (\n    id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,\n    n BIGINT NOT NULL,\n    x DOUBLE PRECISION, b BYTEA, realm TEXT\n);"
        );
    }

    #[test]
    fn a_step_without_fills_leaves_out_what_fills_from_stored_json() {
        let (kept, fills) = without_fills(
            "ALTER TABLE runs ADD COLUMN a TEXT;\nUPDATE runs SET\n    a = json_extract(record, '$.a');\nCREATE INDEX i ON runs(a);\n",
        );
        assert_eq!(kept, "ALTER TABLE runs ADD COLUMN a TEXT;\nCREATE INDEX i ON runs(a);\n");
        assert_eq!(fills, vec!["UPDATE runs SET\n    a = json_extract(record, '$.a');"]);
    }
}
