//! The perf `power` PMU (`<root>/bus/event_source/devices/power`, arch/x86/events/rapl.c):
//! events `energy-pkg`, `energy-ram`, `energy-psys` (and `energy-cores`, inside the package,
//! not reported) with `.scale` (joules per count) and `.unit` files. System-wide counters opened
//! on each CPU of `cpumask` (one per package); 64-bit counts that do not wrap on the user side.
//! Needs CAP_PERFMON or kernel.perf_event_paranoid <= 0.
use super::{Channel, ChannelKind, EnergyError, Reading, Scope, Source};
use perf_event_open_sys as sys;
use std::path::{Path, PathBuf};
use sys::bindings as b;

#[derive(Clone, Debug, PartialEq)]
pub struct PmuEvent {
    pub name: String,
    pub scope: Scope,
    pub config: u64,
    pub scale: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PmuDesc {
    pub pmu_type: u32,
    pub cpus: Vec<i32>,
    pub events: Vec<PmuEvent>,
    pub notes: Vec<String>,
}

pub(crate) fn pmu_dir(sysfs_root: &Path) -> PathBuf {
    sysfs_root.join("bus/event_source/devices/power")
}

/// "0", "0,28", "0-1,4" → CPUs.
pub fn parse_cpulist(s: &str) -> Option<Vec<i32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((x, y)) => out.extend(x.parse::<i32>().ok()?..=y.parse::<i32>().ok()?),
            None => out.push(part.parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

/// "event=0x02" → 2.
pub(crate) fn parse_event_config(s: &str) -> Option<u64> {
    let mut config = None;
    for term in s.trim().split(',') {
        let (k, v) = term.split_once('=')?;
        if k.trim() == "event" {
            let v = v.trim();
            config = Some(if let Some(h) = v.strip_prefix("0x") { u64::from_str_radix(h, 16).ok()? } else { v.parse().ok()? });
        }
    }
    config
}

pub fn describe(sysfs_root: &Path) -> Result<PmuDesc, EnergyError> {
    let dir = pmu_dir(sysfs_root);
    let rd = |p: PathBuf| std::fs::read_to_string(&p).map_err(|e| EnergyError::Failed(format!("{}: {e}", p.display())));
    if !dir.exists() {
        return Err(EnergyError::Unsupported(format!(
            "no {} (no RAPL perf PMU: not exposed in VMs; needs an Intel/AMD host kernel with the rapl PMU)",
            dir.display()
        )));
    }
    let pmu_type: u32 = rd(dir.join("type"))?.trim().parse().map_err(|_| EnergyError::Failed("power/type is not a number".into()))?;
    let cpus = parse_cpulist(&rd(dir.join("cpumask"))?).ok_or_else(|| EnergyError::Failed("power/cpumask is not a CPU list".into()))?;
    let mut events = Vec::new();
    let mut notes = Vec::new();
    for (name, scope) in [
        ("energy-pkg", Some(Scope::CpuPackage)),
        ("energy-ram", Some(Scope::Dram)),
        ("energy-psys", Some(Scope::Platform)),
        ("energy-cores", None),
    ] {
        let ev = dir.join("events").join(name);
        let Ok(spec) = std::fs::read_to_string(&ev) else { continue };
        let Some(scope) = scope else {
            notes.push(format!("{name}: part of energy-pkg; not reported separately"));
            continue;
        };
        let Some(config) = parse_event_config(&spec) else {
            notes.push(format!("{name}: cannot parse {spec:?}"));
            continue;
        };
        let scale: Option<f64> =
            std::fs::read_to_string(dir.join("events").join(format!("{name}.scale"))).ok().and_then(|s| s.trim().parse().ok());
        let unit = std::fs::read_to_string(dir.join("events").join(format!("{name}.unit"))).unwrap_or_default();
        match scale {
            Some(scale) if scale > 0.0 && unit.trim() == "Joules" => events.push(PmuEvent { name: name.into(), scope, config, scale }),
            _ => notes.push(format!("{name}: missing .scale or .unit is not Joules ({:?}); ignored", unit.trim())),
        }
    }
    if events.is_empty() {
        return Err(EnergyError::Unsupported(format!("{}: no usable energy events ({})", dir.display(), notes.join("; "))));
    }
    Ok(PmuDesc { pmu_type, cpus, events, notes })
}

fn paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").map(|s| s.trim().to_string()).unwrap_or_else(|_| "?".into())
}

pub struct PerfPower {
    desc: PmuDesc,
    fds: Vec<i32>,
    channels: Vec<Channel>,
}

impl Drop for PerfPower {
    fn drop(&mut self) {
        for &fd in &self.fds {
            // SAFETY: fds we opened and own.
            unsafe { libc::close(fd) };
        }
    }
}

impl PerfPower {
    pub fn open(sysfs_root: &Path) -> Result<(PerfPower, Vec<String>), EnergyError> {
        let desc = describe(sysfs_root)?;
        let mut me = PerfPower { desc: desc.clone(), fds: Vec::new(), channels: Vec::new() };
        for ev in &desc.events {
            for &cpu in &desc.cpus {
                // SAFETY: zero is a valid perf_event_attr.
                let mut attr: b::perf_event_attr = unsafe { std::mem::zeroed() };
                attr.type_ = desc.pmu_type;
                attr.size = std::mem::size_of::<b::perf_event_attr>() as u32;
                attr.config = ev.config;
                let fd = unsafe { sys::perf_event_open(&mut attr, -1, cpu, -1, b::PERF_FLAG_FD_CLOEXEC as libc::c_ulong) };
                if fd < 0 {
                    let e = std::io::Error::last_os_error();
                    let hint = match e.raw_os_error() {
                        Some(libc::EACCES) | Some(libc::EPERM) => {
                            format!("needs CAP_PERFMON (or root) or kernel.perf_event_paranoid <= 0 (it is {})", paranoid())
                        }
                        Some(libc::ENOENT) | Some(libc::EINVAL) | Some(libc::EOPNOTSUPP) => "event not supported by this CPU/kernel".into(),
                        _ => String::new(),
                    };
                    return Err(EnergyError::Failed(format!("perf_event_open({} on cpu {cpu}): {e}; {hint}", ev.name)));
                }
                me.fds.push(fd);
                me.channels.push(Channel {
                    scope: ev.scope,
                    label: format!("{} cpu{cpu}", ev.name),
                    kind: ChannelKind::Counter { scale_j: ev.scale, range: None, max_plausible_w: 5000.0 },
                });
            }
        }
        let notes = desc.notes.clone();
        Ok((me, notes))
    }
}

impl Source for PerfPower {
    fn name(&self) -> &'static str {
        "perf_power"
    }
    fn method(&self, scope: Scope) -> String {
        let evs: Vec<&str> = self.desc.events.iter().filter(|e| e.scope == scope).map(|e| e.name.as_str()).collect();
        format!("perf PMU power/{}/ system-wide on cpus {:?}, 64-bit counts x .scale", evs.join(","), self.desc.cpus)
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn fast(&self) -> bool {
        true
    }
    fn read(&mut self) -> Vec<Result<Reading, EnergyError>> {
        self.fds
            .iter()
            .map(|&fd| {
                let mut v = 0u64;
                // SAFETY: 8 bytes into a u64.
                let n = unsafe { libc::read(fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
                if n == 8 {
                    Ok(Reading::Raw(v as f64))
                } else {
                    Err(EnergyError::Failed(format!("perf read: {}", std::io::Error::last_os_error())))
                }
            })
            .collect()
    }
}
