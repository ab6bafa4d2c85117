//! Bringing results databases together: runs made on several machines (or several nodes of a
//! cluster, each writing its own database) into one, exactly once.
//!
//! A run is identified by its `run_uid` (schema version 6: random, made when the run was first
//! recorded, kept by every merge; derived from the stored record for runs recorded before): a
//! run merged a second time is found and not added again, however its record's JSON is written.
//! The same uid with a different record is a conflict, said and not added. A sweep is identified
//! by its `uid`, or by a run it shares with a sweep of the destination (a sweep merged before):
//! merged again, its new runs join it. Sweeps of the same plan otherwise join only when they are
//! shares of one split (the same `split`, which `iolab fleet submit` gives every task dividing
//! the work): the plan split over several machines comes back as one sweep, each planned run
//! taking the result of the machine that made it. Anything else, the same plan run whole on two
//! machines or twice on one (before and after a kernel change), is a sweep of its own, to be
//! compared (`iolab compare --by host`, `report --by kernel`).
//!
//! Into an SQLite file one merge at a time: an exclusive `flock` on `<db>.lock` beside it, held
//! from start to end (`MergeLock`); on a PostgreSQL server a session advisory lock. A source is
//! only read: opened read-only, an older schema read through a migrated temporary copy
//! (`Store::open_source`). Runs are copied one at a time, never every record at once.
use super::{schema, PlannedRun, PlannedStatus, Store, StoreError, SweepIdentity};
use rusqlite::types::Value as Sql;
use rusqlite::Connection;
use std::collections::HashMap;
use std::path::Path;

/// What a merge did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MergeReport {
    pub runs_added: usize,
    /// Runs the destination already had (merged before).
    pub runs_present: usize,
    pub sweeps_created: usize,
    /// Sweeps that joined one the destination already had (the same sweep, or a share of the
    /// same split).
    pub sweeps_joined: usize,
    /// Planned runs closed as skipped or failed from the source.
    pub planned_closed: usize,
    /// Runs not added, each in one line: a planned run that two shares both made (the first
    /// stays), or a run whose uid the destination has with another record.
    pub conflicts: Vec<String>,
}

/// A database `iolab merge` reads from: the store, and where its schema was older, the
/// temporary directory of the migrated copy it is read through (removed when dropped).
pub struct Source {
    store: Store,
    _copy: Option<tempfile::TempDir>,
}

impl std::ops::Deref for Source {
    type Target = Store;
    fn deref(&self) -> &Store {
        &self.store
    }
}

/// The exclusive lock of a merge into an SQLite file, released when dropped.
struct MergeLock(#[allow(dead_code)] Option<std::fs::File>);

impl MergeLock {
    /// An exclusive `flock` on `<db>.lock` beside the database, waited for: a separate file,
    /// as SQLite's own locks are POSIX record locks on the database, which a `flock` on NFS
    /// (emulated by record locks there) would meet. It is made if missing, never through a
    /// symbolic link, and left in place (removing a lock file races with its next taker).
    fn take(db: &Path) -> Result<MergeLock, StoreError> {
        use std::os::unix::fs::OpenOptionsExt;
        use std::os::unix::io::AsRawFd;
        let mut name = db.as_os_str().to_owned();
        name.push(".lock");
        let path = std::path::PathBuf::from(name);
        let failed = |e: String| StoreError::Refused(format!("cannot lock {} for the merge: {e}", path.display()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| failed(if e.raw_os_error() == Some(libc::ELOOP) { "it is a symbolic link".into() } else { e.to_string() }))?;
        let m = file.metadata().map_err(|e| failed(e.to_string()))?;
        if !m.is_file() {
            return Err(failed(format!("it is {}, not a regular file", crate::output::kind(&m))));
        }
        loop {
            // SAFETY: flock on a descriptor `file` owns, open for the call.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(MergeLock(Some(file)));
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(StoreError::Failed(format!("cannot lock {} for the merge: {e}", path.display())));
            }
        }
    }
}

/// A source run as the merge goes through them: id, uid, planned run, status.
type SourceRun = (i64, String, Option<i64>, String);

impl Store {
    /// Open a database to merge from, changing nothing in it: an SQLite file is opened
    /// read-only (`mode=ro`; as immutable where its `-shm` cannot be made and no `-wal` holds
    /// commits), and one of an older schema is copied (`VACUUM INTO`, in `$TMPDIR`) and the copy
    /// migrated and read. A run uid twice in it (two copies of one run, as an older merge could
    /// store) is refused in one line naming it. A PostgreSQL source is opened as a reader.
    pub(crate) fn open_source(path: &Path) -> Result<Source, StoreError> {
        let (store, copy) = match path.to_str().filter(|s| super::is_postgres_url(s)) {
            Some(_) => (Store::open_existing(path)?, None),
            None => open_sqlite_source(path)?,
        };
        let dup: Option<String> =
            store.value("SELECT run_uid FROM runs GROUP BY run_uid HAVING count(*) > 1 ORDER BY min(id) LIMIT 1", &[])?;
        if let Some(uid) = dup {
            let ids: Vec<String> = store.query("SELECT id FROM runs WHERE run_uid = ?1 ORDER BY id", &[Sql::Text(uid.clone())], |r| {
                Ok(r.get::<i64>(0)?.to_string())
            })?;
            return Err(StoreError::Refused(format!(
                "results database {}: runs {} are one run (uid {uid}) stored {} times: not merged (keep one of them)",
                store.path,
                ids.join(", "),
                ids.len()
            )));
        }
        Ok(Source { store, _copy: copy })
    }

    /// The identity of one of this store's sweeps.
    fn sweep_identity(&self, sweep_id: i64) -> Result<SweepIdentity, StoreError> {
        let rows = self.query("SELECT uid, split FROM sweeps WHERE id = ?1", &[Sql::Integer(sweep_id)], |r| {
            Ok(SweepIdentity { uid: r.get::<Option<String>>(0)?.unwrap_or_default(), split: r.get(1)? })
        })?;
        rows.into_iter().next().ok_or_else(|| StoreError::Failed(format!("results database {}: no sweep {sweep_id}", self.path)))
    }

    /// This store's sweep for the source's sweep: the same sweep (its uid, or one of its runs
    /// here), a share of the same split of the same plan, or a new one with the source's
    /// identity and planned runs. Returns (sweep id, planned runs by ordinal, created).
    fn sweep_for(&mut self, src: &Store, sweep_id: i64) -> Result<(i64, HashMap<i64, PlannedRun>, bool), StoreError> {
        let s = src.sweep(sweep_id)?.ok_or_else(|| StoreError::Failed(format!("results database {}: no sweep {sweep_id}", src.path)))?;
        let identity = src.sweep_identity(sweep_id)?;
        let mut existing: Option<i64> =
            self.value("SELECT id FROM sweeps WHERE uid = ?1 ORDER BY id LIMIT 1", &[Sql::Text(identity.uid.clone())])?;
        if existing.is_none() {
            if let Some(split) = &identity.split {
                existing = self.value(
                    "SELECT id FROM sweeps WHERE split = ?1 AND plan_hash = ?2 AND seed = ?3 AND name = ?4 ORDER BY id LIMIT 1",
                    &[Sql::Text(split.clone()), Sql::Text(s.plan_hash.clone()), Sql::Integer(s.seed as i64), Sql::Text(s.name.clone())],
                )?;
            }
        }
        if existing.is_none() {
            // Merged before under another uid (both stored before version 6 gave sweeps one):
            // a run of it is here, in its sweep.
            let uids =
                src.query("SELECT run_uid FROM runs WHERE sweep_id = ?1 ORDER BY id", &[Sql::Integer(sweep_id)], |r| r.get::<String>(0))?;
            for uid in uids {
                let here: Option<i64> = self.value(
                    "SELECT r.sweep_id FROM runs r JOIN sweeps w ON w.id = r.sweep_id WHERE r.run_uid = ?1 AND w.plan_hash = ?2 LIMIT 1",
                    &[Sql::Text(uid), Sql::Text(s.plan_hash.clone())],
                )?;
                if here.is_some() {
                    existing = here;
                    break;
                }
            }
        }
        let planned = src.planned_runs(sweep_id)?;
        let (id, created) = match existing {
            Some(id) => (id, false),
            None => {
                let runs: Vec<_> = planned.iter().map(|p| (p.ordinal, p.replicate, p.config_key.clone(), p.spec.clone())).collect();
                (self.create_sweep_as(&identity, &s.name, &s.plan_text, &s.plan_hash, s.seed, &runs)?, true)
            }
        };
        let mine: HashMap<i64, PlannedRun> = self.planned_runs(id)?.into_iter().map(|p| (p.ordinal, p)).collect();
        for p in &planned {
            match mine.get(&p.ordinal) {
                Some(m) if m.config_key == p.config_key => {}
                _ => {
                    return Err(StoreError::Refused(format!(
                        "sweep {:?} of {} has planned run {} ({}) that {}'s sweep {id} of the same identity does not: not the same plan, not merged",
                        s.name, src.path, p.ordinal, p.config_key, self.path
                    )))
                }
            }
        }
        Ok((id, mine, created))
    }

    /// Merge every sweep and run of `src` into this store, exactly once (see the module), one
    /// merge at a time: into a file under `MergeLock`, on a PostgreSQL server under a session
    /// advisory lock, each held from start to end.
    pub(crate) fn merge_from(&mut self, src: &Store) -> Result<MergeReport, StoreError> {
        let _file_lock = match self.db.sqlite() {
            Some(_) => MergeLock::take(Path::new(&self.path))?,
            None => MergeLock(None),
        };
        self.db.merge_lock(true).map_err(self.e())?;
        let merged = self.merge_all(src);
        let unlocked = self.db.merge_lock(false).map_err(self.e());
        let report = merged?;
        unlocked?;
        Ok(report)
    }

    /// How one source run stands here: None when it is to be added, else whether it is
    /// already here (true) or conflicts (false, with the line saying so pushed).
    fn present(&self, src: &Store, run: &SourceRun, report: &mut MergeReport) -> Result<Option<bool>, StoreError> {
        let (id, uid, ..) = run;
        let Some(mine) = self.value::<i64>("SELECT id FROM runs WHERE run_uid = ?1 ORDER BY id LIMIT 1", &[Sql::Text(uid.clone())])? else {
            return Ok(None);
        };
        // The same text is the same record; otherwise each is read alone and compared as JSON
        // (the same record written another way is still the same run).
        let theirs: String = src.value("SELECT record FROM runs WHERE id = ?1", &[Sql::Integer(*id)])?.unwrap_or_default();
        let mut p = [Sql::Text(theirs), Sql::Integer(mine)];
        let same_text: bool = self.value("SELECT record = ?1 FROM runs WHERE id = ?2", &p)?.unwrap_or(false);
        let same = same_text || {
            let Sql::Text(theirs) = std::mem::replace(&mut p[0], Sql::Null) else { unreachable!("a text parameter") };
            let theirs = serde_json::from_str::<serde_json::Value>(&theirs).ok();
            let ours: Option<String> = self.value("SELECT record FROM runs WHERE id = ?1", &[Sql::Integer(mine)])?;
            theirs.is_some() && ours.and_then(|o| serde_json::from_str::<serde_json::Value>(&o).ok()) == theirs
        };
        if !same {
            report.conflicts.push(format!(
                "run {id} of {} (uid {uid}) was not added: {} has run {mine} with that uid and a different record",
                src.path, self.path
            ));
        }
        Ok(Some(same))
    }

    fn merge_all(&mut self, src: &Store) -> Result<MergeReport, StoreError> {
        let mut report = MergeReport::default();
        // Source planned run id -> this store's planned run, sweep by sweep.
        let mut planned_map: HashMap<i64, PlannedRun> = HashMap::new();
        for s in src.sweep_infos()? {
            let (_, mine, created) = self.sweep_for(src, s.id)?;
            if created {
                report.sweeps_created += 1;
            } else {
                report.sweeps_joined += 1;
            }
            for p in src.planned_runs(s.id)? {
                if let Some(m) = mine.get(&p.ordinal) {
                    planned_map.insert(p.id, m.clone());
                }
            }
        }
        // The runs' ids and uids only; each record is read when its run is copied.
        let runs: Vec<SourceRun> = src.query("SELECT id, run_uid, planned_id, status FROM runs ORDER BY id", &[], |r| {
            Ok((r.get(0)?, r.get::<Option<String>>(1)?.unwrap_or_default(), r.get(2)?, r.get(3)?))
        })?;
        for run in &runs {
            let (id, uid, planned_id, status) = run;
            match self.present(src, run, &mut report)? {
                Some(true) => {
                    report.runs_present += 1;
                    continue;
                }
                Some(false) => continue,
                None => {}
            }
            let target = planned_id.and_then(|pid| planned_map.get(&pid));
            // A planned run already made here by another run is a conflict, not a second result.
            if let Some(m) = target.filter(|m| m.status != PlannedStatus::Planned && status != "interrupted") {
                let by: Option<i64> =
                    self.value("SELECT id FROM runs WHERE planned_id = ?1 AND status <> 'interrupted'", &[Sql::Integer(m.id)])?;
                report.conflicts.push(format!(
                    "run {id} of {} ({} #{}) was not added: {} already has {} for that planned run{}",
                    src.path,
                    m.config_key,
                    m.replicate + 1,
                    self.path,
                    m.status,
                    by.map(|b| format!(" (run {b})")).unwrap_or_default()
                ));
                continue;
            }
            let record =
                src.run_record(*id)?.ok_or_else(|| StoreError::Failed(format!("results database {}: run {id} vanished", src.path)))?;
            self.record_run_as(target.map(|m| m.id), &record, uid)?;
            drop(record);
            // An interrupted run does not close its planned run (the sweep reruns it).
            if let Some(m) = planned_id.and_then(|pid| planned_map.get_mut(&pid)).filter(|_| status != "interrupted") {
                m.status = PlannedStatus::Done;
            }
            report.runs_added += 1;
        }
        // Planned runs the source closed without a run (skipped here, failed before measuring).
        for s in src.sweep_infos()? {
            for p in src.planned_runs(s.id)?.into_iter().filter(|p| matches!(p.status, PlannedStatus::Skipped | PlannedStatus::Failed)) {
                let Some(m) = planned_map.get_mut(&p.id) else { continue };
                if m.status != PlannedStatus::Planned {
                    continue;
                }
                let why = p.reason.clone().unwrap_or_default();
                if p.status == PlannedStatus::Skipped {
                    self.record_skip(m.id, &why)?;
                } else {
                    self.record_failure(m.id, &why)?;
                }
                m.status = p.status;
                report.planned_closed += 1;
            }
        }
        Ok(report)
    }
}

/// An SQLite source opened read-only (see `Store::open_source`), through a migrated temporary
/// copy where its schema is older.
fn open_sqlite_source(path: &Path) -> Result<(Store, Option<tempfile::TempDir>), StoreError> {
    use rusqlite::OpenFlags as F;
    let name = path.display().to_string();
    if !super::check_path(path)? {
        return Err(StoreError::Refused(format!("no results database at {name}")));
    }
    let e = |x: rusqlite::Error| super::named(&name, super::backend::DbError::from(x).into());
    let flags = F::SQLITE_OPEN_READ_ONLY | F::SQLITE_OPEN_URI | F::SQLITE_OPEN_NO_MUTEX;
    let open = |uri: String| -> rusqlite::Result<Connection> {
        let conn = Connection::open_with_flags(uri, flags)?;
        conn.busy_timeout(super::BUSY_TIMEOUT)?;
        // The first read is where SQLite finds it cannot open or make the -shm file.
        schema::user_version(&conn)?;
        Ok(conn)
    };
    let uri = super::file_uri(path);
    let conn = match open(format!("{uri}?mode=ro")) {
        Err(rusqlite::Error::SqliteFailure(f, _)) if matches!(f.code, rusqlite::ErrorCode::CannotOpen | rusqlite::ErrorCode::ReadOnly) => {
            let mut wal = path.as_os_str().to_owned();
            wal.push("-wal");
            if std::fs::metadata(&wal).map_or(true, |m| m.len() == 0) {
                open(format!("{uri}?mode=ro&immutable=1")).map_err(e)?
            } else {
                return Err(StoreError::Refused(format!(
                    "results database {name}: cannot be read without writing beside it (its -wal holds commits and no -shm can be made)"
                )));
            }
        }
        r => r.map_err(e)?,
    };
    let v = schema::check(&conn).map_err(|m| super::named(&name, m))?;
    if v == 0 {
        return Err(StoreError::Refused(format!("results database {name} is empty: it holds no iolab results")));
    }
    if v == schema::LATEST {
        return Ok((Store { db: super::Db::Sqlite(conn), path: name }, None));
    }
    // An older schema: read through a migrated copy, the source left as it is.
    let dir = tempfile::Builder::new().prefix("iolab-merge-").tempdir().map_err(|x| {
        StoreError::Failed(format!("results database {name} (schema version {v}): cannot make a temporary copy to migrate: {x}"))
    })?;
    let copy = dir.path().join("source.db");
    conn.execute("VACUUM INTO ?1", [copy.to_string_lossy()]).map_err(|x| {
        StoreError::from(super::backend::DbError::from(x))
            .context(|x| format!("results database {name} (schema version {v}): cannot copy it to {} to migrate: {x}", copy.display()))
    })?;
    drop(conn);
    let mut store =
        Store::open(&copy).map_err(|x| x.context(|x| format!("results database {name} (schema version {v}), migrated in a copy: {x}")))?;
    store.path = name;
    Ok((store, Some(dir)))
}
