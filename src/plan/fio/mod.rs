//! fio job files as plans, and plans as fio job files. `parse.rs` reads fio's format as fio
//! does; `table.rs` is the one table from fio's options to iolab's plan keys; `map.rs` turns
//! one job into a plan (the TOML `iolab sweep` takes, checked by the plan's own parser) and a
//! planned job back into fio's options. Each job of a file is a plan of its own, run in file
//! order (fio's jobs without stonewall run together; iolab runs one at a time and says so).
pub mod map;
pub mod parse;
pub mod table;

pub use map::{Mapped, CONCURRENCY};
use std::path::Path;

/// The guide at the head of docs/fio.md (the table of every option follows it).
pub const GUIDE: &str = "iolab reads fio job files: `iolab sweep JOB.fio [TARGET]` runs every job of the file, one after
another in file order, each as a sweep of its own (named `FILE/JOB`, stored with its plan), and
`iolab run --fio JOB.fio [--job NAME] [TARGET]` runs one job. `--dry-run` shows, for every job, each
fio option and the iolab plan key it became. `iolab export fio PLAN.toml` writes a plan's
configurations as a fio job file (one job per configuration, each after the previous), through the
same table.

How fio's format is read (fio's HOWTO is the reference): sections in order, every `[global…]`
section applying to the jobs below it (a later `[global]` changes only the jobs after it);
`include FILE` inside a section (relative to the job file when not found as given); comments from
`;` or `#` to the end of a line; `${VAR}` from the environment (empty when unset); `$pagesize`,
`$mb_memory`, `$ncpus` with simple math; arithmetic in parentheses (`(4k*2)`, `+ - * / % ^`; a bare
number in a time expression is microseconds); sizes with fio's suffixes (`k` = 1024, `ki` = 1000
unless `kb_base=1000`, which swaps them; `0x` hexadecimal); times with `d h m s ms us`.

What a job becomes:

- **Each job is a plan** of one configuration, and the jobs run one at a time in file order. fio
  starts jobs together unless `stonewall` (or `wait_for_previous`, or `wait_for=` the job above)
  separates them; a job that fio would start beside the one above is refused, naming `stonewall`,
  unless `--fio-ignore concurrency` asks to run them one after another.
- **numjobs** are the run's threads (one process, threads sharing the job's targets and range).
- **The budget** is fio's: with `time_based`, `runtime` seconds (after `ramp_time`); without it,
  the job's bytes (`io_size`, else `size`, else `filesize`, else the whole target, read for its
  size before the run) x `loops` x `numjobs`, or `number_ios` x `numjobs` I/Os where that comes
  first. fio ends a job with `runtime` but no `time_based` at whichever comes first, time or bytes;
  iolab's budget is one of them, so that is refused (naming `runtime`).
- **Targets**: `filename` (several joined by `:`, in `directory` when relative); a target on the
  command line replaces every job's. Without a filename, iolab's temporary target of `size` bytes
  (fio would lay out a file of its own). The null engine opens none.
- **fio's defaults where iolab's differ** are written into the plan: `direct=0` (buffered; and
  libaio is then refused, since iolab runs libaio only with O_DIRECT), `fixedbufs=0` and
  `registerfiles=0` for io_uring, `iodepth_batch_complete_min=1`, the psync engine.
- **Random offsets** are drawn with repeats, as fio's `norandommap`; fio's default random map
  (every block once per pass) is not reproduced.
- An option iolab cannot honour is refused in one line naming the option and the job (exit 2);
  `--fio-ignore OPTION` (repeatable) drops it, shown in the dry run and recorded in the plan's
  description (a sweep stores it with the plan; `iolab run --fio` keeps it in the record's command
  line).
";

/// Is this plan file a fio job file: named `*.fio`, or holding a `[section]` that no plan has
/// (a plan's are `[matrix]`, `[options]` and `[[rule]]`)?
pub fn is_fio(path: &Path, text: &str) -> bool {
    if path.extension().is_some_and(|e| e == "fio") {
        return true;
    }
    text.lines().map(|l| l.trim()).any(|l| {
        l.starts_with('[')
            && !l.starts_with("[[")
            && !matches!(l.trim_end_matches(|c| c != ']').trim_matches(['[', ']', ' ']), "matrix" | "options")
            && !l.contains('=')
    })
}

/// The jobs of fio job file `path` (its `text`) as plans, in file order; `only`: just that job.
/// `ignore`: `--fio-ignore`'s options. `targets`: the command line's, replacing every job's.
pub fn plans(path: &Path, text: &str, only: Option<&str>, ignore: &[String], targets: &[String]) -> Result<Vec<Mapped>, String> {
    let env = |k: &str| std::env::var(k).ok();
    let sections = parse::parse_text(text, path, &env)?;
    let stem = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "fio".into());
    for i in ignore {
        if i != CONCURRENCY && table::find(i).is_none() {
            return Err(format!("--fio-ignore {i}: not a fio option (docs/fio.md lists them)"));
        }
        let used = sections
            .iter()
            .flat_map(|s| &s.options)
            .any(|o| table::find(&o.key).is_some_and(|e| e.name == i || e.aliases.contains(&i.as_str())));
        if i != CONCURRENCY && !used {
            return Err(format!("--fio-ignore {i}: no job of {} sets it", path.display()));
        }
    }
    let names: Vec<String> = sections.iter().filter(|s| !s.global).map(|s| s.name.clone()).collect();
    if names.is_empty() {
        return Err(format!("{}: no job in it (only [global] sections)", path.display()));
    }
    if let Some(o) = only {
        if !names.iter().any(|n| n == o) {
            return Err(format!("--job {o}: {} has no such job: its jobs are {}", path.display(), names.join(", ")));
        }
    }
    let mut out = Vec::new();
    let mut globals: Vec<parse::Opt> = Vec::new();
    let mut earlier: Vec<String> = Vec::new();
    for s in &sections {
        if s.global {
            globals.extend(s.options.iter().cloned());
            continue;
        }
        if only.is_none_or(|o| o == s.name) {
            let written: Vec<parse::Opt> = globals.iter().chain(&s.options).cloned().collect();
            let mut ignore = ignore.to_vec();
            if only.is_some() {
                // One job alone runs beside nothing.
                ignore.push(CONCURRENCY.into());
            }
            out.push(map::translate(&stem, &s.name, &written, &earlier, &ignore, targets)?);
        }
        earlier.push(s.name.clone());
    }
    Ok(out)
}

/// A plan's configurations as a fio job file: one job per configuration, in the plan's order,
/// each after the one before (stonewall), through the table's reverse direction.
pub fn export(plan_name: &str, text: &str) -> Result<String, String> {
    let e = crate::plan::sweep::expand(text, &[])?;
    let mut out = format!(
        "; fio job file written by `iolab export fio` from plan '{}' ({plan_name}): one job per configuration,\n; each after the one before, with iolab's meaning of every value (docs/fio.md)\n[global]\nthread=1\ngroup_reporting=1\n",
        e.name
    );
    for (n, c) in e.configs.iter().enumerate() {
        let j = &c.job;
        let no = |what: &str| format!("configuration {}: {what}: fio has no equivalent", c.key);
        if !j.system.set.is_empty() || !j.system.setup.is_empty() {
            return Err(no(&format!(
                "the system settings {}",
                j.system.set.iter().chain(&j.system.setup).cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        if j.io.null_script.is_some() {
            return Err(no("null_script"));
        }
        if j.io.ring.sq_idle_ms != crate::interfaces::io_uring::RingOptions::default().sq_idle_ms
            && j.io.submit == crate::plan::Submit::Sqpoll
        {
            return Err(no("sq_idle_ms"));
        }
        out += &format!("\n; {}\n[{n}]\nstonewall\n", c.key);
        for o in table::TABLE {
            if let table::How::Sets { export: Some(x), .. } = &o.how {
                if let Some(v) = x(j).map_err(|why| format!("configuration {}: {why}", c.key))? {
                    out += &format!("{}={v}\n", o.name);
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Result<Vec<Mapped>, String> {
        plans(Path::new("t.fio"), text, None, &[], &[])
    }

    fn toml_of(m: &Mapped) -> toml::Table {
        toml::from_str(&m.text).unwrap()
    }

    /// Every `[global]` applies to the jobs below it, in order; a job's own options win.
    #[test]
    fn global_scoping_follows_the_file_order() {
        let text = "[global]\nbs=8k\nsize=1m\ndirect=1\n[a]\n[global]\nbs=16k\n[b]\nstonewall\n[c]\nstonewall\nbs=32k\n";
        let p = plan(text).unwrap();
        let bs: Vec<i64> = p.iter().map(|m| toml_of(m)["matrix"]["bs"][0].as_integer().unwrap()).collect();
        assert_eq!(bs, [8192, 16384, 32768]);
        assert_eq!(p[0].name, "t.fio/a");
    }

    #[test]
    fn jobs_fio_runs_together_are_refused_or_sequenced() {
        let text = "[global]\nsize=1m\ndirect=1\n[a]\n[b]\n";
        let e = plan(text).unwrap_err();
        assert!(e.starts_with("fio job 'b': stonewall: it has none, so fio starts it together with 'a'"), "{e}");
        let p = plans(Path::new("t.fio"), text, None, &[CONCURRENCY.into()], &[]).unwrap();
        assert!(toml_of(&p[1])["description"].as_str().unwrap().contains("dropped with --fio-ignore: concurrency"));
        assert_eq!(plans(Path::new("t.fio"), text, Some("b"), &[], &[]).unwrap().len(), 1);
        assert!(plan("[global]\nsize=1m\ndirect=1\n[a]\n[b]\nwait_for=a\n").is_ok());
        assert!(plan("[global]\nsize=1m\ndirect=1\nstonewall\n[a]\n[b]\n").is_ok(), "a global stonewall orders every job");
    }

    #[test]
    fn the_budget_is_fios() {
        let t = |text: &str| toml_of(&plan(text).unwrap()[0]);
        let p = t("[j]\nsize=1m\nnumjobs=2\nloops=3\ndirect=1\n");
        assert_eq!(p["bytes"].as_str(), Some((6u64 << 20).to_string().as_str()));
        assert_eq!(p["size"].as_str(), Some("1048576"));
        assert_eq!(p["matrix"]["threads"][0].as_integer(), Some(2));
        let p = t("[j]\nsize=1m\nnumber_ios=10\nnumjobs=2\ndirect=1\n");
        assert_eq!(p["ios"].as_integer(), Some(20));
        let p = t("[j]\nsize=1g\ntime_based\nruntime=5m\nramp_time=2s\ndirect=1\n");
        assert_eq!((p["runtime"].as_str(), p["ramp"].as_str()), (Some("300s"), Some("2s")));
        let e = plan("[j]\nsize=1g\nruntime=60\ndirect=1\n").unwrap_err();
        assert!(e.contains("runtime=60: without time_based fio ends at whichever comes first"), "{e}");
        let e = plan("[j]\ndirect=1\n").unwrap_err();
        assert!(e.contains("size:"), "{e}");
    }

    #[test]
    fn defaults_refusals_and_ignores() {
        let p = &plan("[j]\nioengine=io_uring\nsize=1m\ndirect=1\nhipri\nsqthread_poll=1\niodepth=8\niodepth_batch=4\n").unwrap()[0];
        let t = toml_of(p);
        assert_eq!(t["matrix"]["complete"][0].as_str(), Some("poll"));
        assert_eq!(t["matrix"]["submit"][0].as_str(), Some("sqpoll"));
        assert_eq!(t["options"]["register_buffers"].as_bool(), Some(false));
        assert_eq!(t["options"]["batch_reap"].as_integer(), Some(1));
        let e = plan("[j]\nioengine=libaio\nsize=1m\n").unwrap_err();
        assert!(e.starts_with("fio job 'j': direct: fio's default is direct=0"), "{e}");
        let e = plan("[j]\nsize=1m\ndirect=1\nrate=1m\n").unwrap_err();
        assert_eq!(e, "fio job 'j' (t.fio line 4): rate=1m: iolab issues I/O as fast as the queue allows: it has no rate or think time (--fio-ignore rate drops it)");
        let p = plans(Path::new("t.fio"), "[j]\nsize=1m\ndirect=1\nrate=1m\n", None, &["rate".into()], &[]).unwrap();
        assert!(toml_of(&p[0])["description"].as_str().unwrap().contains("dropped with --fio-ignore: rate=1m"));
        assert!(plan("[j]\nsize=1m\nbogus=1\n").unwrap_err().contains("'bogus' is not a fio option"));
        assert!(plans(Path::new("t.fio"), "[j]\nsize=1m\n", None, &["rate".into()], &[]).unwrap_err().contains("no job of t.fio sets it"));
        assert!(plan("[j]\nsize=1m\ndirect=1\nzonemode=none\nthread\ngroup_reporting\n").is_ok());
        let e = plan("[j]\nioengine=psync\nsize=1m\ndirect=1\niodepth=4\n").unwrap();
        assert_eq!(toml_of(&e[0])["matrix"]["qd"][0].as_integer(), Some(1), "fio caps a sync engine's depth");
    }

    #[test]
    fn fio_files_are_told_from_plans() {
        assert!(is_fio(Path::new("x.fio"), ""));
        assert!(is_fio(Path::new("x"), "; c\n[global]\nbs=4k\n[job1]\n"));
        assert!(!is_fio(Path::new("p.toml"), "name = \"x\"\n[matrix]\nqd = [1]\n[options]\n[[rule]]\n"));
    }

    /// A plan written as fio and read back gives the same jobs.
    #[test]
    fn export_then_import_is_the_same_plan() {
        let plan_text = "name = \"rt\"\nruntime = \"2s\"\nramp = \"1s\"\nsize = \"64m\"\n[matrix]\ninterface = [\"io_uring\", \"psync\"]\nrw = [\"randrw\"]\nwrite_mix = [30]\nbs = [\"8k\"]\nthreads = [2]\n";
        let fio = export("p.toml", plan_text).unwrap();
        assert!(fio.contains("ioengine=io_uring\n") && fio.contains("rwmixread=70\n") && fio.contains("time_based=1\n"), "{fio}");
        let back = plans(Path::new("p.fio"), &fio, None, &[], &[]).unwrap();
        let a = crate::plan::sweep::expand(plan_text, &[]).unwrap();
        for (c, m) in a.configs.iter().zip(&back) {
            let b = crate::plan::sweep::expand(&m.text, &[]).unwrap();
            let (mut x, mut y) = (serde_json::to_value(&c.job).unwrap(), serde_json::to_value(&b.configs[0].job).unwrap());
            // The seed is written as randseed and read back; only the plan's name differs.
            x["seed"] = 0.into();
            y["seed"] = 0.into();
            assert_eq!(x, y, "{fio}\n{}", m.text);
        }
        assert!(export("p.toml", "[matrix]\ninterface = [\"vfio-nvme\"]\ntarget = [\"0000:01:00.0\"]\n").is_err());
    }
}
