//! Where iolab's I/O threads ran: each worker's and SQPOLL thread's allowed CPUs and the CPUs
//! it was seen on, read from /proc/self/task/TID/{stat,status} inside the window. A pin the
//! kernel narrowed or ignored shows here, whatever was asked.
use serde::Serialize;

/// One I/O thread over the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ThreadPlacement {
    pub name: String,
    pub tid: i32,
    /// "worker" or "sqpoll".
    pub role: &'static str,
    /// The CPUs the kernel lets it run on (status `Cpus_allowed_list`), at the window's end.
    pub allowed: Vec<usize>,
    /// Every CPU it was seen running on (stat's `processor`, sampled every ~100 ms and at the
    /// window's edges), in order.
    pub ran_on: Vec<usize>,
}

/// The record's `environment.placement`.
#[derive(Clone, Debug, Serialize)]
pub struct NumaPlacement {
    /// What was asked: off, local or a node's number.
    pub numa: crate::plan::Numa,
    /// The node whose CPUs the threads were pinned to; null when none was chosen.
    pub node: Option<u32>,
    pub node_cpus: Vec<usize>,
    /// NUMA nodes on this machine.
    pub nodes: usize,
    /// How the node was chosen (or why the threads were not pinned by node).
    pub note: String,
    /// The CPU each worker was pinned to (thread order; empty: not pinned).
    pub worker_cpus: Vec<usize>,
    /// The CPU each worker's SQPOLL thread was asked to run on (IORING_SETUP_SQ_AFF).
    pub sq_cpus: Vec<u32>,
    /// Where each worker and SQPOLL thread was allowed to run and was seen running over the
    /// window (from /proc), whatever was asked.
    pub threads: Vec<ThreadPlacement>,
}

/// (comm, CPU last run on) from /proc/PID/task/TID/stat; fields counted from the last ')'
/// as comm may hold either parenthesis. `processor` is field 39.
pub(crate) fn parse_processor(stat: &str) -> Option<(String, usize)> {
    let comm = stat.get(stat.find('(')? + 1..stat.rfind(')')?)?.to_string();
    let rest: Vec<&str> = stat.get(stat.rfind(')')? + 1..)?.split_whitespace().collect();
    Some((comm, rest.get(36)?.parse().ok()?))
}

/// `Cpus_allowed_list` of a status file.
pub(crate) fn parse_allowed(status: &str) -> Option<Vec<usize>> {
    crate::host::parse_cpulist(status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim())
}

/// The threads of ours that do I/O: the workers (by tid) and SQPOLL threads (`iou-sqp-TID`,
/// named after the thread that made the ring, since Linux 5.12; older kernels' SQ threads are
/// kernel threads outside the process and are not seen here).
#[derive(Default)]
pub struct PlacementSampler {
    threads: Vec<ThreadPlacement>,
}

impl PlacementSampler {
    pub fn sample(&mut self, workers: &[i32]) {
        let pid = std::process::id();
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return };
        for tid in dir.flatten().filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok()) {
            let base = format!("/proc/{pid}/task/{tid}");
            let Some((comm, cpu)) = std::fs::read_to_string(format!("{base}/stat")).ok().as_deref().and_then(parse_processor) else {
                continue;
            };
            let role = if workers.contains(&tid) {
                "worker"
            } else if comm.starts_with("iou-sqp-") {
                "sqpoll"
            } else {
                continue;
            };
            let allowed = std::fs::read_to_string(format!("{base}/status")).ok().as_deref().and_then(parse_allowed).unwrap_or_default();
            let t = match self.threads.iter_mut().position(|t| t.tid == tid) {
                Some(i) => &mut self.threads[i],
                None => {
                    self.threads.push(ThreadPlacement { name: comm, tid, role, ..Default::default() });
                    self.threads.last_mut().expect("just pushed")
                }
            };
            t.allowed = allowed;
            if !t.ran_on.contains(&cpu) {
                t.ran_on.push(cpu);
                t.ran_on.sort_unstable();
            }
        }
    }

    /// Workers first in thread order, then SQPOLL threads.
    pub fn threads(&self) -> Vec<ThreadPlacement> {
        let mut out = self.threads.clone();
        out.sort_by_key(|t| (t.role != "worker", t.name.clone()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processor_and_allowed_cpus_from_proc_files() {
        // A stat line as Linux writes it for an SQPOLL thread (on CPU 1), then one whose comm holds ") (".
        let stat = "4242 (iou-sqp-4240) S 1 4240 4240 0 -1 4194368 0 0 0 0 12 30 0 0 20 0 3 0 99 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0";
        assert_eq!(parse_processor(stat), Some(("iou-sqp-4240".into(), 1)));
        let odd = stat.replace("iou-sqp-4240", "a) (b");
        assert_eq!(parse_processor(&odd), Some(("a) (b".into(), 1)));
        assert_eq!(parse_allowed("Name:\tx\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1,4\n"), Some(vec![0, 1, 4]));
        assert_eq!(parse_allowed("Name:\tx\n"), None);
    }

    #[test]
    fn this_threads_placement_is_read_back() {
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        let mut s = PlacementSampler::default();
        s.sample(&[me]);
        let t = s.threads();
        assert_eq!(t.len(), 1);
        assert_eq!((t[0].tid, t[0].role), (me, "worker"));
        assert!(!t[0].allowed.is_empty() && t[0].ran_on.len() == 1 && t[0].ran_on[0] < crate::host::online_cpus());
    }
}
