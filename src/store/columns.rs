//! The metric columns of `runs`, defined once. Each line of the `metrics!` table at the end gives
//! a column's name (also its `Metrics` field and its CSV header), its Rust type (which fixes its
//! SQL type, see `Stored`), the schema version that added it, and how it is read from a run
//! record. From that one line come the column in `CREATE TABLE`/`ALTER TABLE` (schema.rs), the
//! value `record_run` inserts, the SELECT list and `RunRow::metrics`, and the CSV cell.

use super::backend::{DbError, DbRow as Row};
use crate::record::read::Record;
use rusqlite::types::Value as Sql;
use serde::Serialize;

/// A metric column as the schema and the SELECT list see it.
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

impl Stored for Option<f64> {
    const SQL: &'static str = "REAL";
    fn to_sql(&self) -> Sql {
        self.map_or(Sql::Null, Sql::Real)
    }
    fn read(r: &Row, col: &str) -> Result<Self, DbError> {
        r.get(col)
    }
    fn cell(&self) -> String {
        cell(self)
    }
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

/// A count that is always known (0 when the record gives none).
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

impl Stored for Option<String> {
    const SQL: &'static str = "TEXT";
    fn to_sql(&self) -> Sql {
        self.clone().map_or(Sql::Null, Sql::Text)
    }
    fn read(r: &Row, col: &str) -> Result<Self, DbError> {
        r.get(col)
    }
    fn cell(&self) -> String {
        cell(self)
    }
}

impl Stored for Option<bool> {
    const SQL: &'static str = "INTEGER";
    fn to_sql(&self) -> Sql {
        self.map_or(Sql::Null, |b| Sql::Integer(b as i64))
    }
    fn read(r: &Row, col: &str) -> Result<Self, DbError> {
        r.get(col)
    }
    fn cell(&self) -> String {
        cell(self)
    }
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
