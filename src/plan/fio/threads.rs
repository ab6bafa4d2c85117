//! fio's options for what each issuing thread is given besides its CPU list: `numa_cpu_nodes`,
//! `numa_mem_policy`, `prioclass`/`prio` and `cmdprio_percentage`/`cmdprio_class`/`cmdprio`
//! (the table's forward and reverse functions for them; `interfaces::thread` applies them).
use super::map::Tr;
use super::parse;
use crate::interfaces::thread::{CmdPrio, Ioprio, MemPolicy, CMDPRIO_INTERFACES};
use crate::plan::{Job, Numa};
use toml::Value;

/// `numa_cpu_nodes=0` or `=0-1,3`: the threads pinned to those nodes' CPUs (a node that does not
/// exist is refused when the run starts).
pub(crate) fn numa_cpu_nodes(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let v = v.unwrap_or("").trim();
    match v.parse::<Numa>() {
        Ok(Numa::Node(n)) => Ok(t.set_matrix("numa", Value::Integer(n.into()))),
        Ok(n @ Numa::Nodes(_)) => Ok(t.set_matrix("numa", Value::String(n.to_string()))),
        _ => Err("iolab pins a run's threads to the CPUs of NUMA nodes: give a node or a list of nodes (0, 0-1, 0,2)".into()),
    }
}

pub(crate) fn numa_mem_policy(t: &mut Tr, v: Option<&str>) -> Result<String, String> {
    let p: MemPolicy = v.unwrap_or("").trim().parse()?;
    Ok(t.set_option("mem_policy", Value::String(p.to_string())))
}

/// `prioclass` and `prio` together: the thread's I/O priority (fio's class 0, none, is
/// best-effort, as fio sets it; the level 0 unless `prio` says).
pub(crate) fn ioprio(t: &mut Tr, _: Option<&str>) -> Result<String, String> {
    let class = match t.value("prioclass").map(str::trim) {
        None | Some("0") => 2,
        Some(c) => match parse::int(c)? {
            c @ 1..=3 => c,
            _ => return Err(format!("'{c}' is not an I/O priority class (1 realtime, 2 best-effort, 3 idle)")),
        },
    };
    let level = match t.value("prio").map(str::trim) {
        None => 0,
        Some(l) => match parse::int(l)? {
            l @ 0..=7 => l,
            _ => return Err(format!("'{l}' is not an I/O priority level (0, the highest, to 7)")),
        },
    };
    let p = Ioprio { class: class as u8, level: level as u8 };
    Ok(t.set_option("ioprio", Value::String(p.to_string())))
}

/// fio's `N` or `N,M` (reads, writes; one for both).
fn pair(v: &str) -> Result<[i64; 2], String> {
    let parts: Vec<&str> = v.split(',').map(str::trim).collect();
    match parts.as_slice() {
        [a] => Ok([parse::int(a)?; 2]),
        [a, b] => Ok([parse::int(a)?, parse::int(b)?]),
        _ => Err(format!("'{v}' is not one value or two (reads, writes)")),
    }
}

/// `cmdprio_percentage` with `cmdprio_class` (default 1, realtime, as fio) and `cmdprio`
/// (default 0): the commands' priority, per direction.
pub(crate) fn cmdprio(t: &mut Tr, _: Option<&str>) -> Result<String, String> {
    let Some(pct) = t.value("cmdprio_percentage") else {
        return Ok("(unused without cmdprio_percentage, as in fio)".into());
    };
    let pct = pair(pct)?;
    if pct == [0, 0] {
        return Ok("(cmdprio_percentage=0: no command carries a priority)".into());
    }
    if !CMDPRIO_INTERFACES.contains(&t.kind) {
        return Err(format!("a per-command priority is carried by iolab's libaio and io_uring engines, not {}", t.kind.name()));
    }
    let class = t.value("cmdprio_class").map(pair).transpose()?.unwrap_or([1, 1]);
    let level = t.value("cmdprio").map(pair).transpose()?.unwrap_or([0, 0]);
    let mut words = Vec::new();
    for d in 0..2 {
        if !(0..=100).contains(&pct[d]) || !(1..=3).contains(&class[d]) || !(0..=7).contains(&level[d]) {
            return Err(format!(
                "cmdprio_percentage {}, cmdprio_class {}, cmdprio {}: percentages 0 to 100, classes 1 to 3, levels 0 to 7",
                pct[d], class[d], level[d]
            ));
        }
        words.push(format!("{}%{}:{}", pct[d], class[d], level[d]));
    }
    let c: CmdPrio = words.join(",").parse()?;
    Ok(t.set_option("cmdprio", Value::String(c.to_string())))
}

/// `ss` with `ss_dur` and `ss_ramp` (fio's steady state): `options.steadystate`, judged on the
/// run's threads together once a second (fio's ss_interval, 1 s).
pub(crate) fn steadystate(t: &mut Tr, _: Option<&str>) -> Result<String, String> {
    let Some(ss) = t.value("steadystate").map(|v| v.trim().to_string()) else {
        return Ok("(unused without ss, as in fio)".into());
    };
    let secs = |name: &str, v: Option<&str>| -> Result<Option<u64>, String> {
        let Some(v) = v else { return Ok(None) };
        let s = parse::seconds(v)?;
        if s.fract() != 0.0 || s < 0.0 {
            return Err(format!("{name}={v}: iolab judges steady state on whole seconds (fio's ss_interval, 1 s)"));
        }
        Ok(Some(s as u64))
    };
    let dur = secs("ss_dur", t.value("steadystate_duration"))?
        .ok_or_else(|| "needs ss_dur (the window judged): iolab does not guess one".to_string())?;
    let ramp = secs("ss_ramp", t.value("steadystate_ramp_time"))?.unwrap_or(0);
    let words = format!("{ss} dur={dur}s ramp={ramp}s");
    let s: crate::interfaces::steady::SteadyState = words.parse()?;
    Ok(t.set_option("steadystate", Value::String(s.to_string())))
}

// ---- the reverse direction ----

fn x_ss(j: &Job) -> Option<crate::interfaces::steady::SteadyState> {
    j.io.options.steady.steadystate
}
pub(crate) fn x_steadystate(j: &Job) -> Result<Option<String>, String> {
    Ok(x_ss(j).map(|s| format!("{}:{}{}", s.metric(), s.limit, if s.percent { "%" } else { "" })))
}
pub(crate) fn x_steadystate_duration(j: &Job) -> Result<Option<String>, String> {
    Ok(x_ss(j).map(|s| format!("{}s", s.dur_s)))
}
pub(crate) fn x_steadystate_ramp_time(j: &Job) -> Result<Option<String>, String> {
    Ok(x_ss(j).filter(|s| s.ramp_s > 0).map(|s| format!("{}s", s.ramp_s)))
}

pub(crate) fn x_numa_mem_policy(j: &Job) -> Result<Option<String>, String> {
    Ok(j.io.options.thread.mem_policy.map(|p| p.to_string()))
}
pub(crate) fn x_prioclass(j: &Job) -> Result<Option<String>, String> {
    Ok(j.io.options.thread.ioprio.map(|p| p.class.to_string()))
}
pub(crate) fn x_prio(j: &Job) -> Result<Option<String>, String> {
    Ok(j.io.options.thread.ioprio.map(|p| p.level.to_string()))
}
fn x_cmd(j: &Job, f: impl Fn(&CmdPrio, usize) -> u8) -> Option<String> {
    let c = j.io.options.thread.cmdprio?;
    let (r, w) = (f(&c, 0), f(&c, 1));
    Some(if r == w { r.to_string() } else { format!("{r},{w}") })
}
pub(crate) fn x_cmdprio_percentage(j: &Job) -> Result<Option<String>, String> {
    Ok(x_cmd(j, |c, d| c.percent[d]))
}
pub(crate) fn x_cmdprio_class(j: &Job) -> Result<Option<String>, String> {
    Ok(x_cmd(j, |c, d| c.prio[d].class))
}
pub(crate) fn x_cmdprio(j: &Job) -> Result<Option<String>, String> {
    Ok(x_cmd(j, |c, d| c.prio[d].level))
}

#[cfg(test)]
mod tests {
    use super::super::plans;
    use std::path::Path;

    fn options(text: &str) -> Result<toml::Table, String> {
        let p = plans(Path::new("t.fio"), text, None, &[], &[])?;
        let t: toml::Table = toml::from_str(&p[0].text).unwrap();
        crate::plan::sweep::expand(&p[0].text, &[]).map_err(|e| e.to_string())?;
        Ok(t)
    }

    #[test]
    fn priorities_and_memory_policy_map_as_fio_reads_them() {
        let t = options("[j]\nioengine=libaio\ndirect=1\nsize=1m\nprioclass=3\ncmdprio_percentage=20\ncmdprio_class=1\n").unwrap();
        assert_eq!(t["options"]["ioprio"].as_str(), Some("idle:0"));
        assert_eq!(t["options"]["cmdprio"].as_str(), Some("20%rt:0"));
        let t = options("[j]\nioengine=io_uring\ndirect=1\nsize=1m\nprio=5\ncmdprio_percentage=10,30\ncmdprio=3\n").unwrap();
        assert_eq!(t["options"]["ioprio"].as_str(), Some("be:5"));
        assert_eq!(t["options"]["cmdprio"].as_str(), Some("10%rt:3,30%rt:3"));
        let e = options("[j]\nioengine=psync\nsize=1m\ncmdprio_percentage=20\n").unwrap_err();
        assert!(
            e.contains("cmdprio_percentage=20: a per-command priority is carried by iolab's libaio and io_uring engines, not psync"),
            "{e}"
        );
        let e = options("[j]\nsize=1m\nprio=9\n").unwrap_err();
        assert!(e.contains("'9' is not an I/O priority level"), "{e}");
        let t = options("[j]\nsize=1m\nnuma_cpu_nodes=0-1\nnuma_mem_policy=interleave:0-1\n").unwrap();
        assert_eq!((t["matrix"]["numa"][0].as_str(), t["options"]["mem_policy"].as_str()), (Some("0-1"), Some("interleave:0-1")));
        let t = options("[j]\nsize=1m\nnuma_cpu_nodes=0\nnuma_mem_policy=bind:0\n").unwrap();
        assert_eq!((t["matrix"]["numa"][0].as_integer(), t["options"]["mem_policy"].as_str()), (Some(0), Some("bind:0")));
        assert!(options("[j]\nsize=1m\nnuma_mem_policy=spread:0\n").unwrap_err().contains("numa_mem_policy=spread:0"));
        // Written back as fio's options and read again: the same.
        let text = "name = \"p\"\nios = 100\n[matrix]\ninterface = [\"libaio\"]\n[options]\nioprio = \"idle:0\"\ncmdprio = \"20%rt:0\"\nmem_policy = \"bind:0\"\n";
        let fio = super::super::export("p.toml", text).unwrap();
        assert!(
            fio.contains("prioclass=3\n") && fio.contains("cmdprio_percentage=20\n") && fio.contains("numa_mem_policy=bind:0\n"),
            "{fio}"
        );
        let back = &plans(Path::new("p.fio"), &fio, None, &[], &[]).unwrap()[0];
        let (a, b) = (crate::plan::sweep::expand(text, &[]).unwrap(), crate::plan::sweep::expand(&back.text, &[]).unwrap());
        assert_eq!(a.configs[0].job.io.options.thread, b.configs[0].job.io.options.thread, "{fio}");
    }

    #[test]
    fn steady_state_maps_with_its_window_and_ramp() {
        let t = options("[j]\nsize=1m\ntime_based\nruntime=5m\nss=iops:10%\nss_dur=30s\nss_ramp=10s\n").unwrap();
        assert_eq!(t["options"]["steadystate"].as_str(), Some("iops:10% dur=30s ramp=10s"));
        let t = options("[j]\nsize=1m\nsteadystate=bw_slope:1%\nsteadystate_duration=10\n").unwrap();
        assert_eq!(t["options"]["steadystate"].as_str(), Some("bw_slope:1% dur=10s"));
        assert!(options("[j]\nsize=1m\nss=iops:10%\n").unwrap_err().contains("needs ss_dur"));
        assert!(options("[j]\nsize=1m\nss=lat:10%\nss_dur=5\n").unwrap_err().contains("'lat' is not a metric"));
        assert!(options("[j]\nsize=1m\nss_dur=5\n").is_ok(), "ss_dur alone does nothing, as in fio");
        let text = "name = \"p\"\nruntime = \"60s\"\n[matrix]\ninterface = [\"null\"]\n[options]\nsteadystate = \"iops_slope:0.5 dur=5s ramp=2s\"\n";
        let fio = super::super::export("p.toml", text).unwrap();
        assert!(fio.contains("steadystate=iops_slope:0.5\n") && fio.contains("steadystate_duration=5s\n"), "{fio}");
        let back = &plans(Path::new("p.fio"), &fio, None, &[], &[]).unwrap()[0];
        let b = crate::plan::sweep::expand(&back.text, &[]).unwrap();
        assert_eq!(b.configs[0].job.io.options.steady.steadystate.unwrap().to_string(), "iops_slope:0.5 dur=5s ramp=2s");
    }
}
