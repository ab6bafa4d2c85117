//! System-wide CPU time from /proc/stat (the aggregate `cpu` line), in seconds.
use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct SystemCpu {
    pub user_s: f64,
    pub nice_s: f64,
    pub system_s: f64,
    pub idle_s: f64,
    pub iowait_s: f64,
    pub irq_s: f64,
    pub softirq_s: f64,
    pub steal_s: f64,
}

impl SystemCpu {
    /// Time some CPU was doing work (iowait is idle time with I/O outstanding; guest time is
    /// already inside user).
    pub fn busy_s(&self) -> f64 {
        self.user_s + self.nice_s + self.system_s + self.irq_s + self.softirq_s + self.steal_s
    }
    pub fn minus(&self, e: &SystemCpu) -> SystemCpu {
        SystemCpu {
            user_s: self.user_s - e.user_s,
            nice_s: self.nice_s - e.nice_s,
            system_s: self.system_s - e.system_s,
            idle_s: self.idle_s - e.idle_s,
            iowait_s: self.iowait_s - e.iowait_s,
            irq_s: self.irq_s - e.irq_s,
            softirq_s: self.softirq_s - e.softirq_s,
            steal_s: self.steal_s - e.steal_s,
        }
    }
}

/// Clock ticks per second of /proc's time fields (USER_HZ).
pub(crate) fn user_hz() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 {
        hz as f64
    } else {
        100.0
    }
}

/// Parse the aggregate `cpu ` line of /proc/stat.
pub fn parse(text: &str, hz: f64) -> Option<SystemCpu> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<f64> = line.split_whitespace().skip(1).map(|x| x.parse::<f64>().map(|t| t / hz)).collect::<Result<_, _>>().ok()?;
    let at = |i: usize| v.get(i).copied().unwrap_or(0.0);
    if v.len() < 4 {
        return None;
    }
    Some(SystemCpu {
        user_s: at(0),
        nice_s: at(1),
        system_s: at(2),
        idle_s: at(3),
        iowait_s: at(4),
        irq_s: at(5),
        softirq_s: at(6),
        steal_s: at(7),
    })
}

/// Each CPU's iowait (the fifth field of its `cpuN` line), in seconds, by CPU number: time the
/// CPU was idle while a task that sleeps on it waits for I/O with `in_iowait` set.
pub fn parse_iowait_by_cpu(text: &str, hz: f64) -> std::collections::BTreeMap<u32, f64> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let cpu = f.next()?.strip_prefix("cpu")?.parse::<u32>().ok()?;
            let ticks = f.nth(4)?.parse::<f64>().ok()?;
            Some((cpu, ticks / hz))
        })
        .collect()
}

/// The aggregate line and each CPU's iowait, from one read of /proc/stat.
pub fn sample() -> Option<(SystemCpu, std::collections::BTreeMap<u32, f64>)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let hz = user_hz();
    Some((parse(&text, hz)?, parse_iowait_by_cpu(&text, hz)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn iowait_by_cpu_is_each_cpu_lines_fifth_field() {
        let text = "cpu  10 0 20 300 45 1 2 0 0 0\ncpu0 5 0 10 150 40 1 1 0 0 0\ncpu1 5 0 10 150 5 0 1 0 0 0\nintr 1 2\nctxt 9\n";
        let m = super::parse_iowait_by_cpu(text, 100.0);
        assert_eq!(m.into_iter().collect::<Vec<_>>(), [(0, 0.4), (1, 0.05)]);
    }
}
