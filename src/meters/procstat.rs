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

pub fn sample() -> Option<SystemCpu> {
    parse(&std::fs::read_to_string("/proc/stat").ok()?, user_hz())
}
