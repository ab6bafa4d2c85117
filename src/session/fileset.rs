//! A file-set run (`--fileset`, `engine::fileset`): checks (the directory, the file system's
//! free space and inodes) → the set made in a fresh directory (its creation measured apart) →
//! the meters over the measured phase → the record, with the set's part → the set removed.
use super::{check, check_energy, check_kernel, environment, expected_path, idle_power, Measure, RunUi};
use crate::engine::{self, fileset};
use crate::failure::{Failure, FailureKind};
use crate::plan::fileset::{FileSet, FileSizes};
use crate::plan::size::format_bytes;
use crate::plan::Job;
use crate::record::assemble::{EnergyOutcome, Outcome};
use crate::record::fileset::{FilePhaseRecord, FileSetRecord};
use crate::record::RunRecord;
use std::path::Path;

/// The directory the job names, as a file set needs it: a directory, not a link to one, on a
/// file system with room and inodes for the whole set. Bad input (one line, exit 2) otherwise,
/// before anything is made.
fn check_dir(dir: &Path, set: &FileSet, sizes: &[u64]) -> Result<std::fs::Metadata, Failure> {
    use std::os::unix::ffi::OsStrExt;
    let shown = dir.display();
    let meta = std::fs::symlink_metadata(dir).map_err(|e| Failure::invalid(format!("--fileset: cannot use {shown}: {e}")))?;
    if meta.file_type().is_symlink() {
        return Err(Failure::invalid(format!(
            "--fileset: {shown} is a symbolic link: give the directory itself (iolab never makes files through a link)"
        )));
    }
    if !meta.is_dir() {
        return Err(Failure::invalid(format!("--fileset: {shown} is not a directory: give the directory to make the file set in")));
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| Failure::invalid(format!("{shown}: a NUL in the path")))?;
    // SAFETY: statvfs fills the zeroed struct; the path is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(Failure::failed(format!("--fileset: cannot read {shown}'s file system: {}", std::io::Error::last_os_error())));
    }
    // What the files take on the file system: each rounded up to its block size, and one
    // block for the set's directory.
    let block = (st.f_frsize as u64).max(1);
    let need: u128 = sizes.iter().map(|s| s.div_ceil(block) as u128 * block as u128).sum::<u128>() + block as u128;
    let free = st.f_bavail as u128 * block as u128;
    if need > free {
        return Err(Failure::invalid(format!(
            "--fileset {} of {}: the set needs {} and {shown}'s file system has {} free: use fewer or smaller files",
            set.files,
            set.file_size.describe(),
            format_bytes(need as f64),
            format_bytes(free as f64)
        )));
    }
    // A file system without a fixed inode count (btrfs, tmpfs) says 0 files.
    if st.f_files > 0 && set.files + 1 > st.f_favail as u64 {
        return Err(Failure::invalid(format!(
            "--fileset {}: {shown}'s file system has {} free inodes: use fewer files",
            set.files, st.f_favail
        )));
    }
    Ok(meta)
}

/// How the sizes were drawn, in words for the record.
fn sizes_drawn(set: &FileSet, bs: u64) -> String {
    match &set.file_size {
        FileSizes::Range(..) => {
            format!("{} uniformly in steps of {} (the block size), from the seed", set.file_size.describe(), format_bytes(bs as f64))
        }
        FileSizes::List(_) => format!("one of {} with equal chance, from the seed", set.file_size.describe()),
    }
}

/// The file-set run: as `run_job` for any other, with the set made first and removed after.
pub(super) fn run(job: &Job, ui: &mut dyn RunUi, measure: Measure) -> Result<(RunRecord, Option<String>), Failure> {
    let set = job.fileset.as_ref().ok_or_else(|| Failure::invalid("no file set in the job".into()))?;
    check(job)?;
    let ring = check_kernel(job)?;
    check_energy(measure.energy)?;
    let dir = Path::new(&job.targets.paths[0]);
    let sizes = set.sizes(job.workload.bs, job.workload.seed);
    let meta = check_dir(dir, set, &sizes)?;
    // A served run (S4.7): its server, or why it cannot run; before anything is made.
    let served = crate::meters::server::check(dir, set.server.as_deref(), measure.serving)?;
    let cancel = engine::install_interrupt_handler();
    let clock = engine::clock::Clock::calibrate();
    let total: u64 = sizes.iter().sum();
    ui.note(&format!("creating the file set: {} files, {}", set.files, format_bytes(total as f64)));
    let mut made = fileset::SetDir::make(dir, sizes)?;
    let created = made.create(&clock, job.workload.seed, cancel).map_err(|e| {
        if cancel.is_cancelled() {
            Failure::new(FailureKind::Interrupted, e.to_string())
        } else {
            e.into()
        }
    })?;
    let mut info = crate::device::sysinfo::describe(dir, &meta);
    info.kind = "directory".into();
    info.size_bytes = total;
    let infos = vec![info];
    let path = expected_path(job, &infos);
    let mut env = environment(infos);
    env.setup_not_applied = job.system.setup.iter().map(|s| format!("{s}: not taken with a file set")).collect();
    let idle = idle_power(ui, measure, cancel);
    let mut meters = crate::meters::Meters::new(&env.targets, measure.energy.map(|e| &e.config));
    let mut progress = |elapsed: f64, total: Option<f64>, done: u64, ramp: bool| ui.progress(elapsed, total, done, ramp);
    let window = served.as_ref().and_then(crate::meters::server::Window::begin);
    let ran = fileset::run(job, &made, cancel, &mut progress, &mut meters);
    let server = window.map(crate::meters::server::Window::end);
    ui.finish();
    let not_restored = meters.restore_settings().err().map(String::from);
    let ran = ran.map_err(|e| if cancel.is_cancelled() { Failure::new(FailureKind::Interrupted, e.to_string()) } else { e.into() })?;
    let measured = meters.measured(&ran.engine.rec.per_target);
    let energy = measure.energy.map(|e| EnergyOutcome { require: e.require, report: measured.energy, idle });
    let mut path = path;
    if let Some(c) = &measured.cost {
        super::observe_path(&mut path, job, c);
    }
    let outcome = Outcome {
        rusage: measured.rusage,
        meter_window_s: measured.window_s,
        engine: ran.engine,
        environment: env,
        cost: measured.cost,
        energy,
        path,
        observed: None,
        ring,
    };
    let mut rec = RunRecord::assemble(job, outcome);
    rec.fileset = Some(FileSetRecord {
        dir: made.path.display().to_string(),
        files: made.sizes.len() as u64,
        bytes: made.bytes(),
        sizes_drawn: sizes_drawn(set, job.workload.bs),
        create: FilePhaseRecord::of(&created),
        measured: FilePhaseRecord::of(&ran.files),
        fsyncs: ran.fsyncs,
        server,
    });
    drop(made);
    Ok((rec, not_restored.map(|e| format!("restoring system settings failed: {e}"))))
}
