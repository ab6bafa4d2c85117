//! Bringing results databases together: runs made on several machines (or several nodes of a
//! cluster, each writing its own database) into one, exactly once.
//!
//! A run is identified by its stored record, which holds its host, kernel, CPU, devices, start
//! time and every measurement: two different runs never have the same one, and a run merged a
//! second time is found and not added again. A sweep is identified by its plan (hash and seed)
//! and name: the same plan run in parts on several machines comes back as one sweep, each
//! planned run taking the result of the machine that made it. The same plan run whole on two
//! machines (a run made on both) comes back as two sweeps, one per machine, to be compared
//! (`iolab compare --by host`).
use super::{PlannedRun, RunFilter, Store};
use rusqlite::types::Value as Sql;
use std::collections::{HashMap, HashSet};

/// What a merge did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MergeReport {
    pub runs_added: usize,
    /// Runs the destination already had (merged before).
    pub runs_present: usize,
    pub sweeps_created: usize,
    /// Sweeps that joined one the destination already had (the same plan, seed and name).
    pub sweeps_joined: usize,
    /// Planned runs closed as skipped or failed from the source.
    pub planned_closed: usize,
    /// Planned runs that two sources both made, different runs: the first stays, each other
    /// is listed here and not added.
    pub conflicts: Vec<String>,
}

impl Store {
    /// The stored records of every run, for telling which runs a database already has.
    fn stored_records(&self) -> Result<HashSet<String>, String> {
        Ok(self.query("SELECT record FROM runs", &[], |r| r.get::<String>(0))?.into_iter().collect())
    }

    fn stored_record(&self, run_id: i64) -> Result<String, String> {
        self.value("SELECT record FROM runs WHERE id = ?1", &[Sql::Integer(run_id)])?
            .ok_or_else(|| format!("results database {}: no run {run_id}", self.path))
    }

    /// This store's sweep for the source's sweep: the one with the same plan, seed and name,
    /// or a new one with the source's planned runs. Returns (sweep id, planned runs by ordinal,
    /// created).
    fn sweep_for(&mut self, src: &Store, sweep_id: i64) -> Result<(i64, HashMap<i64, PlannedRun>, bool), String> {
        let s = src.sweep(sweep_id)?.ok_or_else(|| format!("results database {}: no sweep {sweep_id}", src.path))?;
        let planned = src.planned_runs(sweep_id)?;
        // The same plan made by another machine (its runs made again elsewhere, not a share of
        // them) is a sweep of its own: the machines are compared, not mixed.
        let theirs = src.made_by(sweep_id)?;
        let mut existing = None;
        for d in self.sweep_infos()?.into_iter().filter(|d| d.plan_hash == s.plan_hash && d.seed == s.seed && d.name == s.name) {
            let mine = self.made_by(d.id)?;
            if !theirs.iter().any(|(ordinal, host)| mine.get(ordinal).is_some_and(|h| h != host)) {
                existing = Some(d);
                break;
            }
        }
        let (id, created) = match existing {
            Some(d) => (d.id, false),
            None => {
                let runs: Vec<_> = planned.iter().map(|p| (p.ordinal, p.replicate, p.config_key.clone(), p.spec.clone())).collect();
                (self.create_sweep(&s.name, &s.plan_text, &s.plan_hash, s.seed, &runs)?, true)
            }
        };
        let mine: HashMap<i64, PlannedRun> = self.planned_runs(id)?.into_iter().map(|p| (p.ordinal, p)).collect();
        for p in &planned {
            match mine.get(&p.ordinal) {
                Some(m) if m.config_key == p.config_key => {}
                _ => {
                    return Err(format!(
                        "sweep {:?} of {} has planned run {} ({}) that {}'s sweep of the same plan does not: not the same plan, not merged",
                        s.name, src.path, p.ordinal, p.config_key, self.path
                    ))
                }
            }
        }
        Ok((id, mine, created))
    }

    /// The host that made each made planned run of a sweep, by ordinal.
    fn made_by(&self, sweep_id: i64) -> Result<HashMap<i64, String>, String> {
        let rows = self.query(
            "SELECT p.ordinal, coalesce(r.hostname, '') FROM planned_runs p JOIN runs r ON r.planned_id = p.id \
             WHERE p.sweep_id = ?1 AND r.status <> 'interrupted'",
            &[Sql::Integer(sweep_id)],
            |r| Ok((r.get::<i64>(0)?, r.get::<String>(1)?)),
        )?;
        Ok(rows.into_iter().collect())
    }

    /// Merge every sweep and run of `src` into this store, exactly once (see the module). On a
    /// PostgreSQL server one merge at a time (a session lock), as the nodes of a fleet hand over
    /// together; into a file, `iolab fleet`'s tasks take a `flock` around the merge.
    pub fn merge_from(&mut self, src: &Store) -> Result<MergeReport, String> {
        self.db.merge_lock(true).map_err(self.e())?;
        let merged = self.merge_all(src);
        let unlocked = self.db.merge_lock(false).map_err(self.e());
        let report = merged?;
        unlocked?;
        Ok(report)
    }

    fn merge_all(&mut self, src: &Store) -> Result<MergeReport, String> {
        let mut report = MergeReport::default();
        let mut have = self.stored_records()?;
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
        for row in src.list_runs(&RunFilter::default())? {
            let stored = src.stored_record(row.id)?;
            if have.contains(&stored) {
                report.runs_present += 1;
                continue;
            }
            let record = src.run_record(row.id)?.ok_or_else(|| format!("results database {}: run {} vanished", src.path, row.id))?;
            let target = row.planned_id.and_then(|pid| planned_map.get(&pid));
            // A planned run already made here by another run is a conflict, not a second result.
            if let Some(m) = target.filter(|m| m.status != "planned" && row.status != "interrupted") {
                let by: Option<i64> =
                    self.value("SELECT id FROM runs WHERE planned_id = ?1 AND status <> 'interrupted'", &[Sql::Integer(m.id)])?;
                report.conflicts.push(format!(
                    "run {} of {} ({} #{}) was not added: {} already has {} for that planned run{}",
                    row.id,
                    src.path,
                    m.config_key,
                    m.replicate + 1,
                    self.path,
                    m.status,
                    by.map(|b| format!(" (run {b})")).unwrap_or_default()
                ));
                continue;
            }
            let id = self.record_run(target.map(|m| m.id), &record)?;
            have.insert(self.stored_record(id)?);
            // An interrupted run does not close its planned run (the sweep reruns it).
            if let Some(m) = row.planned_id.and_then(|pid| planned_map.get_mut(&pid)).filter(|_| row.status != "interrupted") {
                m.status = "done".into();
            }
            report.runs_added += 1;
        }
        // Planned runs the source closed without a run (skipped here, failed before measuring).
        for s in src.sweep_infos()? {
            for p in src.planned_runs(s.id)?.into_iter().filter(|p| p.status == "skipped" || p.status == "failed") {
                let Some(m) = planned_map.get_mut(&p.id) else { continue };
                if m.status != "planned" {
                    continue;
                }
                let why = p.reason.clone().unwrap_or_default();
                if p.status == "skipped" {
                    self.record_skip(m.id, &why)?;
                } else {
                    self.record_failure(m.id, &why)?;
                }
                m.status = p.status.clone();
                report.planned_closed += 1;
            }
        }
        Ok(report)
    }
}
