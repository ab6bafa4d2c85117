//! A PostgreSQL server as the results store (`--db postgresql://...`): a private server started
//! by the test (Debian's `postgresql`: initdb and pg_ctl as the `postgres` user, its own port on
//! 127.0.0.1 and data directory in a temporary directory), installed when missing; skipped with
//! the reason where that cannot be (not root, no package registry).
use crate::common::{self, Run};
use iolab::store::{RunFilter, Store};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A private PostgreSQL server; stopped when dropped.
pub struct Server {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.as_postgres(&self.bin.join("pg_ctl"), &["-D", &self.data.display().to_string(), "-m", "immediate", "-w", "stop"]);
    }
}

fn postgres_bin() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql").ok()?.flatten().map(|e| e.path().join("bin")).collect();
    dirs.sort();
    dirs.into_iter().rev().find(|d| d.join("initdb").exists() && d.join("pg_ctl").exists())
}

fn install() -> Result<PathBuf, String> {
    if let Some(bin) = postgres_bin() {
        return Ok(bin);
    }
    if !common::is_root() {
        return Err("PostgreSQL is not installed and only root can install it".into());
    }
    common::apt_install(&["postgresql"])?;
    postgres_bin().ok_or_else(|| "postgresql is installed but no initdb under /usr/lib/postgresql".into())
}

impl Server {
    /// initdb (trust authentication, this machine only), start on a free port, and make an
    /// empty database `name`.
    pub fn start(name: &str) -> Result<Server, String> {
        if !common::is_root() {
            return Err("starting a private PostgreSQL server needs root (initdb runs as the postgres user)".into());
        }
        let bin = install()?;
        let dir = tempfile::Builder::new().prefix("iolab-pg-").tempdir().unwrap();
        let data = dir.path().join("data");
        let chown = Command::new("chown").args(["-R", "postgres:postgres"]).arg(dir.path()).status();
        if !chown.is_ok_and(|s| s.success()) {
            return Err("cannot give the test's directory to the postgres user".into());
        }
        // A port nothing listens on now.
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map_err(|e| e.to_string())?.port();
        let mut server = Server { bin, data, port, _dir: dir };
        let data = server.data.display().to_string();
        server.as_postgres(&server.bin.join("initdb"), &["-D", &data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"])?;
        let opts = format!("-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", server._dir.path().display());
        let log = server._dir.path().join("log").display().to_string();
        server
            .as_postgres(&server.bin.join("pg_ctl"), &["-D", &data, "-o", &opts, "-l", &log, "-w", "start"])
            .map_err(|e| format!("{e}; server log: {}", std::fs::read_to_string(&log).unwrap_or_default()))?;
        server.as_postgres(&server.bin.join("createdb"), &["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "postgres", name])?;
        server.port = port;
        Ok(server)
    }

    fn as_postgres(&self, cmd: &Path, args: &[&str]) -> Result<(), String> {
        let out = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(cmd)
            .args(args)
            .current_dir("/")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", cmd.display()))?;
        if !out.status.success() {
            return Err(format!("{} {}: {}", cmd.display(), args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(())
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/{db}", self.port)
    }
}

const PLAN: &str = r#"
name = "pg-test"
replicates = 2
seed = 9
ios = 3000
[matrix]
interface = ["psync", "pvsync2"]
qd = [1]
bs = ["4k"]
"#;

fn iolab_in(dir: &Path, args: &[&str]) -> Run {
    let out = Command::new(common::BIN).args(args).current_dir(dir).env("TMPDIR", dir).output().unwrap();
    Run::from(out, args.iter().map(|a| a.to_string()).collect())
}

/// The report's tables (CSV and Markdown), file by file.
fn tables(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir.join("tables"))
        .unwrap()
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(e.path()).unwrap()))
        .collect();
    files.sort();
    files
}

#[test]
fn a_postgres_store_is_migrated_from_empty_and_answers_as_sqlite_does() {
    let pg = match Server::start("iolab_test") {
        Ok(s) => s,
        Err(why) => return common::skip_or_fail("postgres::a_postgres_store_is_migrated_from_empty_and_answers_as_sqlite_does", &why),
    };
    let url = pg.url("iolab_test");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // Migrations from an empty server: every step, translated, in one transaction.
    let store = Store::open(Path::new(&url)).unwrap();
    assert!(store.is_postgres());
    assert_eq!(store.schema_version().unwrap(), iolab::store::schema::LATEST);
    drop(store);
    // A second open finds it current and changes nothing.
    assert_eq!(Store::open(Path::new(&url)).unwrap().schema_version().unwrap(), iolab::store::schema::LATEST);

    // A small real sweep into SQLite (psync and pvsync2 on a file), merged into PostgreSQL.
    std::fs::write(d.join("plan.toml"), PLAN).unwrap();
    std::fs::write(d.join("target"), vec![0u8; 8 << 20]).unwrap();
    iolab_in(d, &["sweep", "-q", "--db", "local.db", "plan.toml", "target"]).assert_ok();
    let first = iolab_in(d, &["merge", "local.db", "--into", &url]);
    first.assert_ok();
    assert!(first.stdout.contains("4 runs added, 0 already there; 1 sweeps created"), "{}", first.describe());
    // Merging twice adds nothing: the same run is the same stored record on both engines.
    let again = iolab_in(d, &["merge", "local.db", "--into", &url]);
    again.assert_ok();
    assert!(again.stdout.contains("0 runs added, 4 already there; 0 sweeps created, 1 joined"), "{}", again.describe());

    // The same answers from both stores: results (text and CSV), one run's whole record,
    // compare, and the report's tables.
    for args in [
        vec!["results"],
        vec!["results", "--csv", "-"],
        vec!["results", "--sweeps"],
        vec!["results", "--status", "ok", "--interface", "psync"],
    ] {
        let sqlite = iolab_in(d, &[&args[..], &["--db", "local.db"]].concat());
        let postgres = iolab_in(d, &[&args[..], &["--db", &url]].concat());
        sqlite.assert_ok();
        postgres.assert_ok();
        assert_eq!(sqlite.stdout, postgres.stdout, "{args:?} differs:\n{}\n{}", sqlite.describe(), postgres.describe());
        assert!(sqlite.stdout.lines().count() > 1, "{}", sqlite.describe());
    }
    let (sqlite, postgres) = (Store::open_existing(&d.join("local.db")).unwrap(), Store::open_existing(Path::new(&url)).unwrap());
    let rows = sqlite.list_runs(&RunFilter::default()).unwrap();
    let pg_rows = postgres.list_runs(&RunFilter::default()).unwrap();
    assert_eq!(rows.len(), 4);
    for (a, b) in rows.iter().zip(&pg_rows) {
        assert_eq!(sqlite.run_record(a.id).unwrap(), postgres.run_record(b.id).unwrap(), "run {} differs", a.id);
        assert_eq!(sqlite.histograms(a.id).unwrap(), postgres.histograms(b.id).unwrap());
    }
    // The device filter is exact on both engines: `%` is a name, not LIKE's wildcard.
    let by = |s: &Store, d: &str| s.list_runs(&RunFilter { device: Some(d.into()), ..Default::default() }).unwrap().len();
    assert_eq!((by(&sqlite, "%"), by(&postgres, "%"), by(&sqlite, "_%"), by(&postgres, "_%")), (0, 0, 0, 0));
    if let Some(dev) = rows[0].devices.as_deref().and_then(|d| d.split(',').next()) {
        assert_eq!((by(&sqlite, dev), by(&postgres, dev)), (4, 4), "--device {dev}");
    }
    assert_eq!(
        sqlite.list_planned(&RunFilter { bs: Some(4096), ..Default::default() }, "done").unwrap().len(),
        postgres.list_planned(&RunFilter { bs: Some(4096), ..Default::default() }, "done").unwrap().len()
    );
    let key = rows.iter().find(|r| r.interface == "psync").unwrap().config_key.clone().unwrap();
    let other = rows.iter().find(|r| r.interface == "pvsync2").unwrap().config_key.clone().unwrap();
    let sqlite_cmp = iolab_in(d, &["compare", "--db", "local.db", &key, &other]);
    let pg_cmp = iolab_in(d, &["compare", "--db", &url, &key, &other]);
    sqlite_cmp.assert_ok();
    // The same but for the database each names.
    assert_eq!(
        sqlite_cmp.stdout.replace("local.db", "DB"),
        pg_cmp.stdout.replace(&url, "DB"),
        "{}\n{}",
        sqlite_cmp.describe(),
        pg_cmp.describe()
    );
    iolab_in(d, &["report", "--db", "local.db", "--out", "report-sqlite"]).assert_ok();
    iolab_in(d, &["report", "--db", &url, "--out", "report-pg"]).assert_ok();
    let (a, b) = (tables(&d.join("report-sqlite")), tables(&d.join("report-pg")));
    assert!(!a.is_empty());
    assert_eq!(a, b, "the report's tables differ");

    // A sweep stored straight into the server, its last run lost (as by a kill before its
    // commit), and resumed there: the lost run is made again, nothing twice.
    iolab_in(d, &["sweep", "-q", "--db", &url, "plan.toml", "target"]).assert_ok();
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(
        "UPDATE planned_runs SET status = 'planned' WHERE id = (SELECT planned_id FROM runs ORDER BY id DESC LIMIT 1);
         DELETE FROM runs WHERE id = (SELECT max(id) FROM runs);",
    )
    .unwrap();
    let resumed = iolab_in(d, &["sweep", "--resume", "--db", &url, "plan.toml", "target"]);
    resumed.assert_ok();
    let store = Store::open_existing(Path::new(&url)).unwrap();
    assert_eq!(store.list_runs(&RunFilter::default()).unwrap().len(), 8, "{}", resumed.describe());
    let sweeps = store.sweep_infos().unwrap();
    assert_eq!((sweeps.len(), sweeps[1].done, sweeps[1].pending), (2, 4, 0), "{}", resumed.describe());
    let done_again = iolab_in(d, &["sweep", "--resume", "--db", &url, "plan.toml", "target"]);
    assert!(done_again.stderr.contains("no unfinished sweep"), "{}", done_again.describe());

    // Two nodes' shares of one plan (one split, as a fleet's tasks) handed over at the same moment (two merges at once): one
    // sweep on the server, every planned run once.
    std::fs::write(
        d.join("split.toml"),
        "name = \"pg-split\"\nseed = 3\nios = 2000\n[matrix]\ninterface = [\"null\"]\nqd = [1, 2, 4, 8]\n",
    )
    .unwrap();
    for share in ["0/2", "1/2"] {
        let db = format!("share-{}.db", &share[..1]);
        iolab_in(d, &["sweep", "-q", "--db", &db, "split.toml", "--share", share, "--split", "pg-1"]).assert_ok();
    }
    let merges: Vec<_> = ["share-0.db", "share-1.db"]
        .iter()
        .map(|db| {
            Command::new(common::BIN)
                .args(["merge", db, "--into", &url])
                .current_dir(d)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut m in merges {
        assert!(m.wait().unwrap().success());
    }
    let store = Store::open_existing(Path::new(&url)).unwrap();
    let split: Vec<_> = store.sweep_infos().unwrap().into_iter().filter(|s| s.name == "pg-split").collect();
    assert_eq!(split.len(), 1, "one sweep, not one per share");
    assert_eq!((split[0].total, split[0].done), (4, 4));
    assert_eq!(store.list_runs(&RunFilter { sweep: Some(split[0].id), ..Default::default() }).unwrap().len(), 4);
}
