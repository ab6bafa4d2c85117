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
        Server::start_with(name, "trust")
    }

    /// As `start`, with `host_auth` (pg_hba's method) for TCP connections; the test's own
    /// connections as the postgres user go through the server's socket, which trusts it.
    pub fn start_with(name: &str, host_auth: &str) -> Result<Server, String> {
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
        server.as_postgres(
            &server.bin.join("initdb"),
            &["-D", &data, "--auth-local", "trust", "--auth-host", host_auth, "-U", "postgres", "-E", "UTF8", "--no-sync"],
        )?;
        let opts = format!("-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", server._dir.path().display());
        let log = server._dir.path().join("log").display().to_string();
        server
            .as_postgres(&server.bin.join("pg_ctl"), &["-D", &data, "-o", &opts, "-l", &log, "-w", "start"])
            .map_err(|e| format!("{e}; server log: {}", std::fs::read_to_string(&log).unwrap_or_default()))?;
        let socket = server.socket_dir();
        server.as_postgres(&server.bin.join("createdb"), &["-h", &socket, "-p", &port.to_string(), "-U", "postgres", name])?;
        server.port = port;
        Ok(server)
    }

    /// The directory of the server's socket.
    fn socket_dir(&self) -> String {
        self._dir.path().display().to_string()
    }

    /// `psql -c SQL` on database `db`, as the postgres user through the socket.
    pub fn sql(&self, db: &str, sql: &str) -> Result<String, String> {
        let port = self.port.to_string();
        self.as_postgres(&self.bin.join("psql"), &["-h", &self.socket_dir(), "-p", &port, "-U", "postgres", "-d", db, "-At", "-c", sql])
    }

    /// Everything of database `db` (`pg_dump`), as the postgres user through the socket.
    pub fn dump(&self, db: &str) -> Result<String, String> {
        let port = self.port.to_string();
        self.as_postgres(&self.bin.join("pg_dump"), &["-h", &self.socket_dir(), "-p", &port, "-U", "postgres", db])
    }

    /// Its stdout.
    fn as_postgres(&self, cmd: &Path, args: &[&str]) -> Result<String, String> {
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
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
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
        sqlite.list_planned(&RunFilter { bs: Some(4096), ..Default::default() }, iolab::store::PlannedStatus::Done).unwrap().len(),
        postgres.list_planned(&RunFilter { bs: Some(4096), ..Default::default() }, iolab::store::PlannedStatus::Done).unwrap().len()
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

/// The password of the test's server: an `@` and a `/`, so its URL form differs (`%40`, `%2F`).
const PASSWORD: &str = "Pw@7f3k/Qz9";
const PASSWORD_IN_URL: &str = "Pw%407f3k%2FQz9";

/// `iolab ARGS` in `dir` with only the PostgreSQL variables of `env` (none of the caller's) and
/// `dir` as its home (no ~/.pgpass or ~/.pg_service.conf of the machine's).
/// A server's store made by version 1 of iolab, with a run, migrates with what the later
/// versions fill from the stored records (the completion path, the profile parts, the tool and
/// the energy efficiencies): done in Rust,
/// on PostgreSQL as on SQLite (before, iolab refused: its fills were SQLite's JSON functions).
#[test]
fn a_version_1_postgres_store_with_runs_is_migrated_and_filled() {
    let test = "postgres::a_version_1_postgres_store_with_runs_is_migrated_and_filled";
    let pg = match Server::start("iolab_v1") {
        Ok(s) => s,
        Err(why) => return common::skip_or_fail(test, &why),
    };
    let rec = serde_json::json!({"status": "ok", "completion_path": {"observed": "polled", "fell_back": true},
        "tool": {"name": "fio", "version": "fio-3.33"},
        "energy": {"efficiency": [{"component": "cpu", "iops_per_joule": 250.0, "bytes_per_joule": 1024000.0}]},
        "cost": {"stages": {"stages": [{"from": "request issued", "to": "interrupt", "layer": "device (issue to interrupt)",
            "requests": 10, "p50_ns": 30000.0, "p99_ns": 60000.0, "mean_ns": 32000.0, "share": 0.4}]},
            "profile": {"layers": [{"layer": "block layer", "self_share": 0.05, "self_ns_per_io": 900.0}],
                "run": {"modules": [{"space": "kernel", "module": "nvme", "layer": "device driver", "share": 0.2, "ns_per_io": 500.0}],
                    "functions": [{"space": "kernel", "module": "nvme", "layer": "device driver", "function": "nvme_poll",
                        "share": 0.15, "ns_per_io": 400.0}]}}}});
    pg.sql("iolab_v1", &iolab::store::schema::step_for_postgres(1)).unwrap();
    pg.sql(
        "iolab_v1",
        &format!(
            "INSERT INTO meta VALUES ('schema_version', '1');
             INSERT INTO sweeps(id, name, plan_text, plan_hash, seed, created_at) VALUES (1, 's', 'p', 'h', 5, 1.0);
             INSERT INTO planned_runs(id, sweep_id, ordinal, replicate, config_key, spec, status) VALUES (1, 1, 0, 0, 'cfg0', '{{}}', 'done');
             INSERT INTO runs(id, planned_id, sweep_id, replicate, config_key, status, recorded_at, started_at, interface, submit,
                 complete, rw, write_mix, bs, qd, threads, batch_submit, batch_reap, direct, targets, iops, errors, record)
                 VALUES (1, 1, 1, 0, 'cfg0', 'ok', 2.0, 1.5, 'io_uring', 'syscall', 'poll', 'randread', 50, 4096, 32, 1, 1, 1, 1, '[]',
                 123456.0, 0, '{rec}');"
        ),
    )
    .unwrap();
    let url = pg.url("iolab_v1");
    let s = Store::open(Path::new(&url)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.schema_version().unwrap(), iolab::store::schema::LATEST);
    let rows = s.list_runs(&RunFilter::default()).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].metrics.completion_observed.as_deref(), Some("polled"));
    assert_eq!(rows[0].metrics.fell_back, Some(true));
    // Version 7's columns, filled in Rust as on SQLite: the tool, and the CPU's efficiency.
    assert_eq!((rows[0].tool.as_str(), rows[0].tool_version.as_deref()), ("fio", Some("fio-3.33")));
    let m = &rows[0].metrics;
    assert_eq!((m.cpu_iops_per_joule, m.cpu_bytes_per_joule, m.ssd_iops_per_joule), (Some(250.0), Some(1024000.0), None));
    let parts = pg.sql("iolab_v1", "SELECT kind || '|' || name || '|' || share FROM profile_parts ORDER BY kind").unwrap();
    assert_eq!(
        parts.lines().collect::<Vec<_>>(),
        [
            "function|kernel: nvme: nvme_poll|0.15",
            "layer|block layer|0.05",
            "module|kernel: nvme: device driver|0.2",
            "stage|request issued -> interrupt|0.4"
        ]
    );
    let uid = pg.sql("iolab_v1", "SELECT run_uid FROM runs WHERE id = 1").unwrap();
    assert_eq!(uid.trim(), iolab::store::schema::derived_run_uid(&rec.to_string()));
}

fn iolab_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = Command::new(common::BIN);
    c.args(args).current_dir(dir).env("TMPDIR", dir).env("HOME", dir);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PG") {
            c.env_remove(k);
        }
    }
    c.envs(env.iter().copied());
    Run::from(c.output().unwrap(), args.iter().map(|a| a.to_string()).collect())
}

/// Fails, showing where, if `bytes` (what `what` shows or stores) hold the password in either
/// form (or `other`, a second secret).
fn assert_hidden(what: &str, bytes: &[u8], other: &[&str]) {
    for secret in [PASSWORD, PASSWORD_IN_URL].iter().chain(other) {
        if let Some(at) = bytes.windows(secret.len()).position(|w| w == secret.as_bytes()) {
            let around = &bytes[at.saturating_sub(300)..(at + secret.len() + 100).min(bytes.len())];
            panic!("{what} holds the password {secret:?}: …{}…", String::from_utf8_lossy(around));
        }
    }
}

/// A run's output, both streams.
fn assert_run_hidden(what: &str, r: &Run) {
    assert_hidden(&format!("{what} (stdout)"), r.stdout.as_bytes(), &[]);
    assert_hidden(&format!("{what} (stderr)"), r.stderr.as_bytes(), &[]);
}

/// Every file under `dir` whose name starts with `prefix`.
fn files_under(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p, ""));
        } else if e.file_name().to_string_lossy().starts_with(prefix) {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_password_never_leaves_the_url_and_libpq_s_conventions_give_one() {
    let test = "postgres::a_password_never_leaves_the_url_and_libpq_s_conventions_give_one";
    let pg = match Server::start_with("iolab_secret", "scram-sha-256") {
        Ok(s) => s,
        Err(why) => return common::skip_or_fail(test, &why),
    };
    pg.sql("iolab_secret", &format!("ALTER ROLE postgres PASSWORD '{PASSWORD}'")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let port = pg.port.to_string();
    let url = format!("postgresql://postgres:{PASSWORD_IN_URL}@127.0.0.1:{port}/iolab_secret");
    let bare = format!("postgresql://postgres@127.0.0.1:{port}/iolab_secret");
    let iolab = |args: &[&str]| iolab_env(d, args, &[]);

    // The server asks for the password: none given, none found, refused (and said so).
    let refused = iolab(&["results", "--db", &bare]);
    assert_eq!(refused.code, 2, "{}", refused.describe());
    assert!(refused.stderr.contains("password"), "{}", refused.describe());
    // A wrong one in the URL is refused without being shown.
    let wrong = iolab(&["results", "--db", &format!("postgresql://postgres:Wr0ngPw@127.0.0.1:{port}/iolab_secret")]);
    assert_eq!(wrong.code, 2, "{}", wrong.describe());
    assert!(wrong.stderr.contains("password authentication failed"), "{}", wrong.describe());
    assert_hidden("a refused login's message", wrong.stderr.as_bytes(), &["Wr0ngPw"]);
    // A URL where clap takes none is refused without being shown.
    let misplaced = iolab(&["results", &url]);
    assert_eq!(misplaced.code, 2, "{}", misplaced.describe());
    assert_run_hidden("clap's refusal", &misplaced);

    // A sweep stored straight into the server, with the password in the URL.
    std::fs::write(d.join("plan.toml"), PLAN).unwrap();
    std::fs::write(d.join("target"), vec![0u8; 8 << 20]).unwrap();
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    let sweep = iolab(&["sweep", "--db", &url, "plan.toml", "target"]);
    sweep.assert_ok();
    assert_run_hidden("sweep", &sweep);
    let ended = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();

    // Every record's command line keeps the URL, its password hidden.
    let json = iolab(&["results", "--db", &url, "--json", "-"]);
    json.assert_ok();
    assert_run_hidden("results --json", &json);
    assert!(json.stdout.contains(&format!("postgresql://postgres:***@127.0.0.1:{port}/iolab_secret")), "{}", json.describe());
    for args in [vec!["results"], vec!["results", "--sweeps"], vec!["results", "--csv", "-"]] {
        let r = iolab(&[&args[..], &["--db", &url]].concat());
        r.assert_ok();
        assert_run_hidden(&format!("{args:?}"), &r);
    }
    // The ?password= form: connects, and hidden as well.
    let query = iolab(&["results", "--db", &format!("{bare}?password={PASSWORD_IN_URL}"), "--json", "-"]);
    query.assert_ok();
    assert_run_hidden("results with ?password=", &query);

    // The report: its output and every file it writes (the header names the database).
    let report = iolab(&["report", "--db", &url, "--out", "report"]);
    report.assert_ok();
    assert_run_hidden("report", &report);
    let written = files_under(&d.join("report"), "");
    assert!(!written.is_empty());
    for f in &written {
        assert_hidden(&f.display().to_string(), &std::fs::read(f).unwrap(), &[]);
    }
    let html = files_under(&d.join("report"), "").into_iter().find(|f| f.extension().is_some_and(|x| x == "html")).unwrap();
    assert!(std::fs::read_to_string(&html).unwrap().contains("postgres:***@127.0.0.1"), "the report's header names the database");

    // compare (A and B each named with their database).
    let store = Store::open_existing(Path::new(&url)).unwrap();
    let rows = store.list_runs(&RunFilter::default()).unwrap();
    drop(store);
    let key = rows.iter().find(|r| r.interface == "psync").unwrap().config_key.clone().unwrap();
    let other = rows.iter().find(|r| r.interface == "pvsync2").unwrap().config_key.clone().unwrap();
    let compare = iolab(&["compare", "--db", &url, &key, &other]);
    compare.assert_ok();
    assert_run_hidden("compare", &compare);
    assert!(compare.stdout.contains("postgres:***@"), "{}", compare.describe());
    let compare_b = iolab(&["compare", "--db", &url, "--db-b", &url, &key]);
    compare_b.assert_ok();
    assert_run_hidden("compare --db-b", &compare_b);

    // energy import: a wall meter's log over the sweep (whatever it covers, its lines).
    let mut log = String::from("timestamp,watts\n");
    let mut t = started - 1.0;
    while t < ended + 1.0 {
        log += &format!("{t:.3},120\n");
        t += 0.01;
    }
    std::fs::write(d.join("wall.csv"), log).unwrap();
    let import = iolab(&["energy", "import", "wall.csv", "--db", &url]);
    assert!(import.code == 0 || import.code == 1, "{}", import.describe());
    assert!(import.stdout.contains("postgres:***@"), "{}", import.describe());
    assert_run_hidden("energy import", &import);

    // merge from the server into a file: its output, and the file's bytes (records and all).
    let merge = iolab(&["merge", &url, "--into", "merged.db"]);
    merge.assert_ok();
    assert_run_hidden("merge", &merge);
    assert!(merge.stdout.contains("postgres:***@") && merge.stdout.contains("4 runs added"), "{}", merge.describe());
    let merged = files_under(d, "merged.db");
    assert!(!merged.is_empty());
    for f in merged {
        assert_hidden(&f.display().to_string(), &std::fs::read(&f).unwrap(), &[]);
    }

    // Nothing in the server's database either.
    let dump = pg.dump("iolab_secret").unwrap();
    assert!(dump.contains("command_line"), "the dump holds the records");
    assert_hidden("pg_dump of the database", dump.as_bytes(), &[]);

    // No password in the URL: libpq's conventions give it.
    let ok = |what: &str, r: Run| {
        r.assert_ok();
        assert_run_hidden(what, &r);
        assert!(r.stdout.lines().count() > 1, "{what}: {}", r.describe());
    };
    // PGPASSWORD.
    ok("PGPASSWORD", iolab_env(d, &["results", "--db", &bare], &[("PGPASSWORD", PASSWORD)]));
    // A password file (0600), matched by host, port, database and user.
    let pgpass = d.join("pgpass");
    std::fs::write(&pgpass, format!("# test\nother:*:*:*:nope\n127.0.0.1:{port}:iolab_secret:postgres:{PASSWORD}\n")).unwrap();
    std::fs::set_permissions(&pgpass, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let passfile = pgpass.display().to_string();
    ok("PGPASSFILE", iolab_env(d, &["results", "--db", &bare], &[("PGPASSFILE", &passfile)]));
    // ~/.pgpass, and PGHOST, PGPORT, PGDATABASE and PGUSER where the URL names none.
    std::fs::copy(&pgpass, d.join(".pgpass")).unwrap();
    let env = [("PGHOST", "127.0.0.1"), ("PGPORT", port.as_str()), ("PGDATABASE", "iolab_secret"), ("PGUSER", "postgres")];
    ok("~/.pgpass", iolab_env(d, &["results", "--db", "postgresql://"], &env));
    std::fs::remove_file(d.join(".pgpass")).unwrap();
    // One that others may read is not read, and said so in one line.
    std::fs::set_permissions(&pgpass, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let open = iolab_env(d, &["results", "--db", &bare], &[("PGPASSFILE", &passfile)]);
    assert_eq!(open.code, 2, "{}", open.describe());
    assert!(open.stderr.contains("group or world access"), "{}", open.describe());
    assert_run_hidden("a password file others may read", &open);
    // A service (?service= or PGSERVICE), from PGSERVICEFILE.
    let services = d.join("services.conf");
    std::fs::write(
        &services,
        format!("[other]\nhost=nowhere.invalid\n\n[lab]\nhost=127.0.0.1\nport={port}\ndbname=iolab_secret\nuser=postgres\npassword={PASSWORD}\n"),
    )
    .unwrap();
    let service_file = services.display().to_string();
    ok("?service=", iolab_env(d, &["results", "--db", "postgresql://?service=lab"], &[("PGSERVICEFILE", &service_file)]));
    ok("PGSERVICE", iolab_env(d, &["results", "--db", "postgresql://"], &[("PGSERVICEFILE", &service_file), ("PGSERVICE", "lab")]));
    let unknown = iolab_env(d, &["results", "--db", "postgresql://?service=nope"], &[("PGSERVICEFILE", &service_file)]);
    assert!(unknown.assert_usage_error().contains("service \"nope\" not found"), "{}", unknown.describe());
}
