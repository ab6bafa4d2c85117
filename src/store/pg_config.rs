//! A PostgreSQL connection configured as libpq configures one, so that a password need never be
//! written in the URL (where `ps` shows it): the URL's own settings first, then a service's
//! (`?service=NAME` or `PGSERVICE`, from `PGSERVICEFILE` or `~/.pg_service.conf`, then
//! `PGSYSCONFDIR/pg_service.conf`), then the environment (`PGHOST`, `PGPORT`, `PGDATABASE`,
//! `PGUSER`, `PGPASSWORD`), and a password still missing from the password file (`?passfile=`,
//! `PGPASSFILE` or `~/.pgpass`). The `postgres` crate reads none of these: the settings are
//! gathered here and handed to its `Config`. Nothing here puts a password in a message.
use super::StoreError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where Debian's libpq looks for the system-wide service file when `PGSYSCONFDIR` is unset.
const SYSCONFDIR: &str = "/etc/postgresql-common";
/// The directories libpq builds commonly put their socket in (Debian's, then the default).
const SOCKET_DIRS: &[&str] = &["/var/run/postgresql", "/run/postgresql", "/tmp"];
const DEFAULT_PORT: &str = "5432";

/// What the connection is configured from besides the URL: the process's environment, home
/// directory and user name (a test's own, in unit tests).
pub struct Env {
    pub vars: BTreeMap<String, String>,
    pub home: Option<PathBuf>,
    pub os_user: Option<String>,
}

impl Env {
    /// This process's.
    pub fn process() -> Env {
        let vars = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .filter(|(k, _)| k.starts_with("PG"))
            .collect();
        let (pw_home, os_user) = passwd_entry();
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from).or(pw_home);
        Env { vars, home, os_user }
    }

    fn var(&self, k: &str) -> Option<&str> {
        self.vars.get(k).map(String::as_str).filter(|v| !v.is_empty())
    }
}

/// This user's home directory and name, from the password database.
fn passwd_entry() -> (Option<PathBuf>, Option<String>) {
    let mut buf = vec![libc::c_char::default(); 16384];
    // SAFETY: `pwd` is plain data; getpwuid_r writes into it and into `buf` (of the length
    // given) and sets `result` to it or to null.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        if libc::getpwuid_r(libc::geteuid(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) != 0 || result.is_null() {
            return (None, None);
        }
        let s = |p: *const libc::c_char| (!p.is_null()).then(|| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned());
        (s(pwd.pw_dir).map(PathBuf::from), s(pwd.pw_name))
    }
}

/// A connection's configuration, and where its password came from (for a refused login).
pub struct Resolved {
    pub config: postgres::Config,
    /// The password file the password was read from, if it was.
    pub password_file: Option<PathBuf>,
}

/// The configuration `url` (`postgresql://…` or `postgres://…`) stands for in `env`. Warnings
/// (a password file others may read, which is then not read) go to `warn`, one line each.
pub(crate) fn resolve(url: &str, env: &Env, warn: &mut dyn FnMut(String)) -> Result<Resolved, StoreError> {
    let mut opts = parse_url(url)?;
    let service = opts.remove("service").or_else(|| env.var("PGSERVICE").map(String::from));
    if let Some(name) = service {
        for (k, v) in service_settings(&name, env)? {
            opts.entry(k).or_insert(v);
        }
    }
    for (key, var) in [("host", "PGHOST"), ("port", "PGPORT"), ("dbname", "PGDATABASE"), ("user", "PGUSER"), ("password", "PGPASSWORD")] {
        if let (false, Some(v)) = (opts.contains_key(key), env.var(var)) {
            opts.insert(key.into(), v.into());
        }
    }
    if !opts.contains_key("user") {
        let user =
            env.os_user.clone().ok_or_else(|| refused("no user name: give one in the URL (postgresql://USER@host/db) or in PGUSER"))?;
        opts.insert("user".into(), user);
    }
    if !opts.contains_key("host") {
        opts.insert("host".into(), default_host(opts.get("port").map(String::as_str)));
    }
    let passfile = opts.remove("passfile");
    let mut password_file = None;
    if !opts.contains_key("password") {
        let file = passfile
            .map(PathBuf::from)
            .or_else(|| env.var("PGPASSFILE").map(PathBuf::from))
            .or_else(|| env.home.as_ref().map(|h| h.join(".pgpass")));
        if let Some(file) = file {
            if let Some(pw) = password_from_file(&file, &opts, warn) {
                opts.insert("password".into(), pw);
                password_file = Some(file);
            }
        }
    }
    let conninfo: Vec<String> = opts.iter().map(|(k, v)| format!("{k}='{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))).collect();
    // The crate's messages name an option, never its value; redacted all the same.
    let config = conninfo.join(" ").parse::<postgres::Config>().map_err(|e| refused(crate::secret::redact(&e.to_string())))?;
    Ok(Resolved { config, password_file })
}

/// libpq's default server: the socket of `port` in the first directory that has it, else
/// `localhost`.
fn default_host(port: Option<&str>) -> String {
    let port = port.filter(|p| !p.is_empty()).and_then(|p| p.split(',').next()).unwrap_or(DEFAULT_PORT);
    SOCKET_DIRS
        .iter()
        .find(|d| Path::new(d).join(format!(".s.PGSQL.{port}")).exists())
        .map_or_else(|| "localhost".to_string(), |d| d.to_string())
}

fn decode(s: &str) -> Result<String, StoreError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
            // No value in the message: it may be the password.
            out.push(hex.ok_or_else(|| refused("the database URL has a % not followed by two hexadecimal digits"))?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| refused("the database URL is not UTF-8 once percent-decoded"))
}

/// A PostgreSQL URL as libpq reads it (`postgresql://[user[:password]@][host][:port][,…][/dbname][?key=value&…]`),
/// as conninfo settings: `user`, `password`, `host` and `port` (comma-separated lists, a port
/// left out empty), `dbname`, and each query parameter.
pub(crate) fn parse_url(url: &str) -> Result<BTreeMap<String, String>, StoreError> {
    let rest = url
        .strip_prefix("postgresql://")
        .or_else(|| url.strip_prefix("postgres://"))
        .ok_or_else(|| refused("a PostgreSQL URL begins with postgresql:// or postgres://"))?;
    let mut opts = BTreeMap::new();
    // The user information ends at an `@` before the path (libpq's reading).
    let path_at = rest.find(['/', '?']).unwrap_or(rest.len());
    let rest = match rest[..path_at].rfind('@') {
        Some(at) => {
            let (user, password) = match rest[..at].split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (&rest[..at], None),
            };
            if !user.is_empty() {
                opts.insert("user".into(), decode(user)?);
            }
            if let Some(p) = password {
                opts.insert("password".into(), decode(p)?);
            }
            &rest[at + 1..]
        }
        None => rest,
    };
    let host_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (mut hosts, mut ports) = (Vec::new(), Vec::new());
    if !rest[..host_end].is_empty() {
        for spec in rest[..host_end].split(',') {
            let (host, port) = match spec.strip_prefix('[') {
                Some(v6) => {
                    let (h, after) =
                        v6.split_once(']').ok_or_else(|| refused("the database URL has an IPv6 address without its closing ]"))?;
                    match after {
                        "" => (h, ""),
                        a => (
                            h,
                            a.strip_prefix(':')
                                .ok_or_else(|| refused("the database URL has something else than :PORT after an IPv6 address"))?,
                        ),
                    }
                }
                None => spec.split_once(':').unwrap_or((spec, "")),
            };
            hosts.push(decode(host)?);
            ports.push(decode(port)?);
        }
    }
    if hosts.iter().any(|h| !h.is_empty()) {
        opts.insert("host".into(), hosts.join(","));
    }
    if ports.iter().any(|p| !p.is_empty()) {
        opts.insert("port".into(), ports.join(","));
    }
    let rest = &rest[host_end..];
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    let dbname = path.strip_prefix('/').unwrap_or(path);
    if !dbname.is_empty() {
        opts.insert("dbname".into(), decode(dbname)?);
    }
    for param in query.into_iter().flat_map(|q| q.split('&')).filter(|p| !p.is_empty()) {
        // No key or value in the message: a mistyped `password` could be either.
        let (k, v) = param.split_once('=').ok_or_else(|| refused("the database URL has a query parameter without ="))?;
        opts.insert(decode(k)?, decode(v)?);
    }
    Ok(opts)
}

/// The settings of service `name`: from the user's service file, else the system's; an error
/// when neither defines it.
fn service_settings(name: &str, env: &Env) -> Result<Vec<(String, String)>, StoreError> {
    let user_file = env.var("PGSERVICEFILE").map(PathBuf::from).or_else(|| env.home.as_ref().map(|h| h.join(".pg_service.conf")));
    let system_file = Path::new(env.var("PGSYSCONFDIR").unwrap_or(SYSCONFDIR)).join("pg_service.conf");
    for file in user_file.iter().chain([&system_file]) {
        let text = match std::fs::read_to_string(file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(refused(format!("service file {}: {e}", file.display()))),
        };
        if let Some(settings) = service_section(&text, name).map_err(|e| e.context(|m| format!("service file {}: {m}", file.display())))? {
            return Ok(settings);
        }
    }
    Err(refused(format!(
        "definition of service \"{name}\" not found (in {}{})",
        user_file.map(|f| format!("{} or ", f.display())).unwrap_or_default(),
        system_file.display()
    )))
}

/// Section `[name]` of a service file's text (INI: `key=value` lines, `#` comments), if it has
/// one: the first such section, its keys as written.
pub(crate) fn service_section(text: &str, name: &str) -> Result<Option<Vec<(String, String)>>, StoreError> {
    let mut found: Option<Vec<(String, String)>> = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[') {
            if found.is_some() {
                break;
            }
            if section.strip_suffix(']').map(str::trim) == Some(name) {
                found = Some(Vec::new());
            }
            continue;
        }
        let Some(settings) = found.as_mut() else { continue };
        let (k, v) = line.split_once('=').ok_or_else(|| refused(format!("line {}: not key=value", n + 1)))?;
        let k = k.trim();
        if k == "service" {
            return Err(refused(format!("line {}: a service cannot name another service", n + 1)));
        }
        settings.push((k.to_string(), v.trim().to_string()));
    }
    Ok(found)
}

/// The password of the first line of the password file `file` that matches the connection, as
/// libpq reads it (`hostname:port:database:username:password`, `*` for any, `\` escaping `:`
/// and `\`); none when the file is missing, or others may read it (said through `warn`).
fn password_from_file(file: &Path, opts: &BTreeMap<String, String>, warn: &mut dyn FnMut(String)) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(file).ok()?;
    if !meta.is_file() {
        warn(format!("password file {} is not a plain file: it is not read", file.display()));
        return None;
    }
    if meta.permissions().mode() & 0o077 != 0 {
        warn(format!(
            "password file {} has group or world access; permissions should be u=rw (0600) or less: it is not read",
            file.display()
        ));
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    let first = |k: &str| opts.get(k).and_then(|v| v.split(',').next()).unwrap_or("").to_string();
    let host = match first("host") {
        h if h.is_empty() || SOCKET_DIRS.contains(&h.as_str()) => "localhost".to_string(),
        h => h,
    };
    let port = Some(first("port")).filter(|p| !p.is_empty()).unwrap_or_else(|| DEFAULT_PORT.into());
    let user = opts.get("user").cloned().unwrap_or_default();
    let dbname = opts.get("dbname").cloned().unwrap_or_else(|| user.clone());
    password_in(&text, [host.as_str(), port.as_str(), dbname.as_str(), user.as_str()])
}

/// The password of the first line of a password file's `text` whose four fields match `want`.
pub(crate) fn password_in(text: &str, want: [&str; 4]) -> Option<String> {
    'lines: for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut rest = line;
        for w in want {
            match field_matches(rest, w) {
                Some(after) => rest = after,
                None => continue 'lines,
            }
        }
        // The rest is the password, its escapes undone.
        let mut pw = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => pw.extend(chars.next()),
                c => pw.push(c),
            }
        }
        return Some(pw);
    }
    None
}

/// If the line's next field (up to an unescaped `:`) is `*` or equals `want`, the rest of the
/// line after that `:`.
fn field_matches<'a>(line: &'a str, want: &str) -> Option<&'a str> {
    if let Some(rest) = line.strip_prefix("*:") {
        return Some(rest);
    }
    let mut want = want.chars();
    let mut chars = line.char_indices();
    while let Some((i, c)) = chars.next() {
        let c = match c {
            ':' => return want.next().is_none().then_some(&line[i + 1..]),
            '\\' => chars.next()?.1,
            c => c,
        };
        if want.next() != Some(c) {
            return None;
        }
    }
    None
}

/// A configuration that cannot be used as given: bad input, naming no value (it may be the password).
fn refused(message: impl Into<String>) -> StoreError {
    StoreError::Refused(message.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str)], home: Option<&Path>) -> Env {
        Env {
            vars: vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            home: home.map(Path::to_path_buf),
            os_user: Some("osuser".into()),
        }
    }

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn a_url_reads_as_libpq_reads_it() {
        assert_eq!(
            parse_url("postgresql://me:p%40ss@db.lab:5433/iolab?application_name=x").unwrap(),
            opts(&[
                ("user", "me"),
                ("password", "p@ss"),
                ("host", "db.lab"),
                ("port", "5433"),
                ("dbname", "iolab"),
                ("application_name", "x")
            ])
        );
        assert_eq!(parse_url("postgres://h1,h2:6000/d").unwrap(), opts(&[("host", "h1,h2"), ("port", ",6000"), ("dbname", "d")]));
        assert_eq!(parse_url("postgresql://[::1]:5433/d").unwrap(), opts(&[("host", "::1"), ("port", "5433"), ("dbname", "d")]));
        assert_eq!(parse_url("postgresql://?service=lab").unwrap(), opts(&[("service", "lab")]));
        assert_eq!(parse_url("postgresql:///d?host=%2Frun%2Fpostgresql").unwrap(), opts(&[("dbname", "d"), ("host", "/run/postgresql")]));
        assert_eq!(
            parse_url("postgresql://me@h/d?password=s%26cret").unwrap(),
            opts(&[("user", "me"), ("host", "h"), ("dbname", "d"), ("password", "s&cret")])
        );
        // Errors say what is wrong, never a value.
        for bad in ["postgresql://me:s%zzcret@h/d", "postgresql://h/d?passwordsecret", "postgresql://[::1/d", "mysql://h/d"] {
            let e = parse_url(bad).unwrap_err().to_string();
            assert!(!e.contains("secret") && !e.contains("zz"), "{e}");
        }
    }

    #[test]
    fn a_password_file_line_matches_as_libpq_matches_it() {
        let text = "# comment\nother:5432:*:me:wrong\ndb.lab:5432:iolab:me:right\n*:*:*:me:fallback\n";
        assert_eq!(password_in(text, ["db.lab", "5432", "iolab", "me"]).as_deref(), Some("right"));
        assert_eq!(password_in(text, ["db.lab", "5433", "iolab", "me"]).as_deref(), Some("fallback"));
        assert_eq!(password_in(text, ["db.lab", "5432", "iolab", "you"]), None);
        // Escaped : and \ in a field and in the password.
        let text = "h\\:1:*:*:me:a\\:b\\\\c:d\n";
        assert_eq!(password_in(text, ["h:1", "5432", "x", "me"]).as_deref(), Some("a:b\\c:d"));
        assert_eq!(password_in(text, ["h", "5432", "x", "me"]), None);
    }

    #[test]
    fn a_service_section_is_read() {
        let text = "[other]\nhost=x\n\n# lab\n[lab]\nhost = db.lab\nport=5433\ndbname=iolab\nuser=me\npassword=s=cret\n[next]\nhost=y\n";
        assert_eq!(
            service_section(text, "lab").unwrap().unwrap(),
            [("host", "db.lab"), ("port", "5433"), ("dbname", "iolab"), ("user", "me"), ("password", "s=cret")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
        );
        assert_eq!(service_section(text, "none").unwrap(), None);
        assert!(service_section("[lab]\nservice=other\n", "lab").is_err());
        assert!(service_section("[lab]\nnonsense\n", "lab").unwrap_err().to_string().contains("line 2"));
    }

    #[test]
    fn settings_come_from_the_url_then_the_service_then_the_environment_then_the_password_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("services"), "[lab]\nhost=svc.lab\ndbname=svcdb\npassword=from-service\n").unwrap();
        std::fs::write(d.join(".pgpass"), "*:*:*:*:from-file\n").unwrap();
        std::fs::set_permissions(d.join(".pgpass"), std::fs::Permissions::from_mode(0o600)).unwrap();
        let warnings = std::cell::RefCell::new(Vec::new());
        let mut warn = |w: String| warnings.borrow_mut().push(w);
        let pw = |r: &Resolved| r.config.get_password().map(|p| String::from_utf8_lossy(p).into_owned());

        // The URL's own password first.
        let e = env(&[("PGPASSWORD", "from-env")], Some(d));
        let r = resolve("postgresql://me:from-url@h/d", &e, &mut warn).unwrap();
        assert_eq!((pw(&r).as_deref(), r.config.get_user(), r.config.get_dbname()), (Some("from-url"), Some("me"), Some("d")));
        // Then PGPASSWORD, then the password file.
        assert_eq!(pw(&resolve("postgresql://me@h/d", &e, &mut warn).unwrap()).as_deref(), Some("from-env"));
        let r = resolve("postgresql://me@h/d", &env(&[], Some(d)), &mut warn).unwrap();
        assert_eq!((pw(&r).as_deref(), r.password_file.as_deref()), (Some("from-file"), Some(d.join(".pgpass").as_path())));
        // A service's settings where the URL has none, before the environment's.
        let e = env(&[("PGSERVICEFILE", d.join("services").to_str().unwrap()), ("PGPASSWORD", "from-env"), ("PGHOST", "env.lab")], Some(d));
        let r = resolve("postgresql://me@/urldb?service=lab", &e, &mut warn).unwrap();
        assert_eq!(pw(&r).as_deref(), Some("from-service"));
        assert_eq!(r.config.get_dbname(), Some("urldb"));
        assert_eq!(r.config.get_hosts(), [postgres::config::Host::Tcp("svc.lab".into())]);
        // PGSERVICE names it too; PGHOST, PGPORT, PGUSER, PGDATABASE fill what is left.
        let e = env(&[("PGSERVICE", "none"), ("PGSERVICEFILE", d.join("services").to_str().unwrap())], Some(d));
        let err = resolve("postgresql://", &e, &mut warn).err().unwrap().to_string();
        assert!(err.contains("service \"none\" not found"), "{err}");
        let e = env(&[("PGHOST", "env.lab"), ("PGPORT", "6543"), ("PGUSER", "envuser"), ("PGDATABASE", "envdb")], None);
        let r = resolve("postgresql://", &e, &mut warn).unwrap();
        assert_eq!((r.config.get_user(), r.config.get_dbname(), r.config.get_ports()), (Some("envuser"), Some("envdb"), &[6543u16][..]));
        // The operating system's user name where nothing names one.
        assert_eq!(resolve("postgresql://h/d", &env(&[], None), &mut warn).unwrap().config.get_user(), Some("osuser"));
        assert!(warnings.borrow().is_empty(), "{warnings:?}");

        // A password file others may read is not read, and said so.
        std::fs::set_permissions(d.join(".pgpass"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let r = resolve("postgresql://me@h/d", &env(&[], Some(d)), &mut warn).unwrap();
        assert_eq!(pw(&r), None);
        let warnings = warnings.into_inner();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("group or world access") && !warnings[0].contains("from-file"), "{warnings:?}");
    }
}
