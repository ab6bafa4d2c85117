//! Per-thread CPU time and context switches from /proc/PID/task/TID/{stat,status}.
use std::collections::HashMap;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskSample {
    pub pid: i32,
    pub tid: i32,
    pub comm: String,
    pub user_s: f64,
    pub system_s: f64,
    pub voluntary_ctx: u64,
    pub involuntary_ctx: u64,
}

/// Parse /proc/PID/task/TID/stat: (comm, utime ticks, stime ticks). comm may hold spaces and
/// parentheses, so fields are counted from the last ')'.
pub fn parse_stat(text: &str) -> Option<(String, u64, u64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After comm: state(0) ppid(1) ... utime is field 14 overall -> index 11 here, stime 12.
    Some((comm, rest.get(11)?.parse().ok()?, rest.get(12)?.parse().ok()?))
}

/// Parse voluntary and involuntary context switches from a status file.
pub fn parse_status_ctx(text: &str) -> (u64, u64) {
    let get = |key: &str| text.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    (get("voluntary_ctxt_switches:"), get("nonvoluntary_ctxt_switches:"))
}

fn sample_task(pid: i32, tid: i32, hz: f64) -> Option<TaskSample> {
    let base = format!("/proc/{pid}/task/{tid}");
    let (comm, ut, st) = parse_stat(&std::fs::read_to_string(format!("{base}/stat")).ok()?)?;
    let (v, n) = std::fs::read_to_string(format!("{base}/status")).map(|s| parse_status_ctx(&s)).unwrap_or((0, 0));
    Some(TaskSample { pid, tid, comm, user_s: ut as f64 / hz, system_s: st as f64 / hz, voluntary_ctx: v, involuntary_ctx: n })
}

fn numeric_entries(dir: &str) -> Vec<i32> {
    std::fs::read_dir(dir).into_iter().flatten().flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect()
}

/// Every thread of one process.
pub(crate) fn sample_process(pid: i32, hz: f64) -> Vec<TaskSample> {
    numeric_entries(&format!("/proc/{pid}/task")).into_iter().filter_map(|tid| sample_task(pid, tid, hz)).collect()
}

/// Every thread of every other process, kernel threads included.
pub(crate) fn sample_others(me: i32, hz: f64) -> Vec<TaskSample> {
    numeric_entries("/proc").into_iter().filter(|p| *p != me).flat_map(|pid| sample_process(pid, hz)).collect()
}

/// A process's own total (live and exited threads) from /proc/PID/stat.
pub(crate) fn process_total(pid: i32, hz: f64) -> Option<(f64, f64)> {
    let (_, ut, st) = parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    Some((ut as f64 / hz, st as f64 / hz))
}

/// Per-task change between two samples; tasks that appeared count from zero.
pub(crate) fn deltas(start: &[TaskSample], end: &[TaskSample]) -> Vec<TaskSample> {
    let before: HashMap<(i32, i32), &TaskSample> = start.iter().map(|t| ((t.pid, t.tid), t)).collect();
    end.iter()
        .map(|e| {
            let z = TaskSample::default();
            let b = before.get(&(e.pid, e.tid)).copied().unwrap_or(&z);
            TaskSample {
                pid: e.pid,
                tid: e.tid,
                comm: e.comm.clone(),
                user_s: (e.user_s - b.user_s).max(0.0),
                system_s: (e.system_s - b.system_s).max(0.0),
                voluntary_ctx: e.voluntary_ctx.saturating_sub(b.voluntary_ctx),
                involuntary_ctx: e.involuntary_ctx.saturating_sub(b.involuntary_ctx),
            }
        })
        .collect()
}

/// Process-level CPU: its own threads (live and exited) and its reaped children.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcSample {
    pub pid: i32,
    pub self_s: f64,
    pub children_s: f64,
}

/// (utime, stime, cutime, cstime) ticks from /proc/PID/stat.
pub(crate) fn parse_stat_with_children(text: &str) -> Option<(u64, u64, u64, u64)> {
    let close = text.rfind(')')?;
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let f = |i: usize| rest.get(i).and_then(|x| x.parse::<i64>().ok()).map(|v| v.max(0) as u64);
    Some((f(11)?, f(12)?, f(13)?, f(14)?))
}

/// Every process but `me`.
pub(crate) fn sample_other_processes(me: i32, hz: f64) -> Vec<ProcSample> {
    numeric_entries("/proc")
        .into_iter()
        .filter(|p| *p != me)
        .filter_map(|pid| {
            let (u, s, cu, cs) = parse_stat_with_children(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
            Some(ProcSample { pid, self_s: (u + s) as f64 / hz, children_s: (cu + cs) as f64 / hz })
        })
        .collect()
}

/// CPU time other processes spent inside the window, including processes that started or
/// exited in it: an exited child's whole time reaches its parent's children time when reaped,
/// so what it had already used at the start is taken off again.
pub(crate) fn others_window_time(start: &[ProcSample], end: &[ProcSample]) -> f64 {
    let before: HashMap<i32, &ProcSample> = start.iter().map(|p| (p.pid, p)).collect();
    let after: HashMap<i32, &ProcSample> = end.iter().map(|p| (p.pid, p)).collect();
    let mut total = 0.0;
    for e in end {
        let (s0, c0) = before.get(&e.pid).map_or((0.0, 0.0), |b| (b.self_s, b.children_s));
        total += (e.self_s - s0).max(0.0) + (e.children_s - c0).max(0.0);
    }
    for b in start {
        if !after.contains_key(&b.pid) {
            total -= b.self_s + b.children_s;
        }
    }
    total.max(0.0)
}
