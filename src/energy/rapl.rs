//! RAPL through powercap sysfs (`<root>/class/powercap`). Zones of the control types
//! `intel-rapl` (MSR; AMD and Hygon use it too), `intel-rapl-tpmi` and `intel-rapl-mmio` are
//! read; a zone whose (package, domain) was already seen under a higher-priority type is a copy
//! (the MMIO interface re-exposes package-0) and is dropped. Only disjoint zones are summed:
//! packages (sockets or dies) into `cpu_package`, their DRAM sub-zones into `dram`, psys alone
//! as `platform`. core/uncore are inside the package and are not reported. Counters wrap at
//! `max_energy_range_uj`, read per zone.
use super::{Channel, ChannelKind, EnergyError, Reading, Scope, Source};
use std::path::{Path, PathBuf};

/// Highest power one zone may plausibly draw: bounds the wrap-safe interval and rejects glitches.
pub const MAX_ZONE_WATTS: f64 = 1000.0;
const TYPE_PRIORITY: [&str; 3] = ["intel-rapl", "intel-rapl-tpmi", "intel-rapl-mmio"];

#[derive(Clone, Debug)]
pub struct Zone {
    /// e.g. intel-rapl:0:2
    pub id: String,
    pub control_type: String,
    /// e.g. "package-0/dram"
    pub key: String,
    pub scope: Scope,
    pub energy_path: PathBuf,
    pub range_uj: u64,
}

/// Why reading energy_uj failed, in words a user can act on.
pub fn explain_read_error(path: &Path, e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::PermissionDenied {
        format!("{}: permission denied: energy_uj is readable by root only since Linux 5.10 (CVE-2020-8694, PLATYPUS); run as root or grant read access to the energy_uj files (e.g. a udev rule); containers may also mask /sys/devices/virtual/powercap", path.display())
    } else {
        format!("{}: {e}", path.display())
    }
}

fn read_trim(p: &Path) -> std::io::Result<String> {
    std::fs::read_to_string(p).map(|s| s.trim_end_matches('\n').to_string())
}

pub(crate) fn read_energy_uj(p: &Path) -> Result<u64, EnergyError> {
    let s = read_trim(p).map_err(|e| EnergyError::Failed(explain_read_error(p, &e)))?;
    s.trim().parse::<u64>().map_err(|_| EnergyError::Failed(format!("{}: not a number: {s:?}", p.display())))
}

/// Discover the zones to use. Ok((zones, notes)) or Err(why RAPL is unavailable).
pub(crate) fn discover(sysfs_root: &Path) -> Result<(Vec<Zone>, Vec<String>), EnergyError> {
    let class = sysfs_root.join("class/powercap");
    let entries = match std::fs::read_dir(&class) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(EnergyError::Unsupported(format!(
                "no {} (no RAPL: usual in VMs and containers, which do not expose or mask /sys/devices/virtual/powercap)",
                class.display()
            )))
        }
        Err(e) => return Err(EnergyError::Failed(format!("{}: {e}", class.display()))),
    };
    let mut ids: Vec<String> =
        entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.contains(':')).collect();
    // Priority order, then top-level zones before sub-zones, then by id.
    let prio = |id: &str| TYPE_PRIORITY.iter().position(|t| id.split(':').next() == Some(*t)).unwrap_or(usize::MAX);
    ids.sort_by(|x, y| (prio(x), x.matches(':').count(), x.as_str()).cmp(&(prio(y), y.matches(':').count(), y.as_str())));
    let mut notes = Vec::new();
    let mut zones: Vec<Zone> = Vec::new();
    let mut names: std::collections::HashMap<String, String> = Default::default();
    for id in &ids {
        let ctype = id.split(':').next().unwrap_or_default().to_string();
        if prio(id) == usize::MAX {
            notes.push(format!("{id}: control type {ctype} is not RAPL; ignored"));
            continue;
        }
        let dir = class.join(id);
        let Ok(name) = read_trim(&dir.join("name")) else {
            notes.push(format!("{id}: no readable name; ignored"));
            continue;
        };
        names.insert(id.clone(), name.clone());
        let depth = id.matches(':').count();
        let (key, scope) = if depth == 1 {
            let scope = if name.starts_with("package-") {
                Scope::CpuPackage
            } else if name == "psys" {
                Scope::Platform
            } else if name == "dram" {
                Scope::Dram
            } else {
                notes.push(format!("{id} ({name}): unknown top-level domain; ignored"));
                continue;
            };
            (name.clone(), scope)
        } else {
            let parent_id = id.rsplit_once(':').map(|p| p.0).unwrap_or_default();
            let parent = names.get(parent_id).cloned().unwrap_or_else(|| parent_id.to_string());
            match name.as_str() {
                "dram" => (format!("{parent}/dram"), Scope::Dram),
                "core" | "uncore" => {
                    notes.push(format!("{id} ({parent}/{name}): part of the package zone; not reported separately"));
                    continue;
                }
                _ => {
                    notes.push(format!("{id} ({parent}/{name}): unknown sub-domain; ignored"));
                    continue;
                }
            }
        };
        if let Some(first) = zones.iter().find(|z| z.key == key) {
            notes.push(format!("{id} ({key}) duplicates {} ({}); de-duplicated, not added", first.id, first.control_type));
            continue;
        }
        let energy_path = dir.join("energy_uj");
        if !energy_path.exists() {
            notes.push(format!("{id} ({key}): no energy_uj; ignored"));
            continue;
        }
        let range_uj = match read_trim(&dir.join("max_energy_range_uj")).ok().and_then(|s| s.trim().parse::<u64>().ok()) {
            Some(r) if r > 0 => r,
            _ => {
                notes.push(format!("{id} ({key}): no usable max_energy_range_uj, so wraps cannot be corrected; ignored"));
                continue;
            }
        };
        zones.push(Zone { id: id.clone(), control_type: ctype, key, scope, energy_path, range_uj });
    }
    if zones.is_empty() {
        let mut why = format!("{} has no RAPL energy zones", class.display());
        if !notes.is_empty() {
            why.push_str(&format!(" ({})", notes.join("; ")));
        }
        return Err(EnergyError::Unsupported(why));
    }
    Ok((zones, notes))
}

pub struct Rapl {
    zones: Vec<Zone>,
    channels: Vec<Channel>,
}

impl Rapl {
    /// Discover and read every zone once: a zone that cannot be read makes RAPL unavailable
    /// (a scope with a missing socket would under-count).
    pub fn open(sysfs_root: &Path) -> Result<(Rapl, Vec<String>), EnergyError> {
        let (zones, notes) = discover(sysfs_root)?;
        for z in &zones {
            read_energy_uj(&z.energy_path)?;
        }
        let channels = zones
            .iter()
            .map(|z| Channel {
                scope: z.scope,
                label: format!("{} {}", z.id, z.key),
                kind: ChannelKind::Counter { scale_j: 1e-6, range: Some(z.range_uj as f64), max_plausible_w: MAX_ZONE_WATTS },
            })
            .collect();
        Ok((Rapl { zones, channels }, notes))
    }
}

impl Source for Rapl {
    fn name(&self) -> &'static str {
        "rapl"
    }
    fn method(&self, scope: Scope) -> String {
        let zs: Vec<String> = self.zones.iter().filter(|z| z.scope == scope).map(|z| format!("{} ({})", z.key, z.id)).collect();
        format!("powercap sysfs energy_uj counters, wrap-corrected with max_energy_range_uj, sum of disjoint zones: {}", zs.join(" + "))
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn fast(&self) -> bool {
        true
    }
    fn read(&mut self) -> Vec<Result<Reading, EnergyError>> {
        self.zones.iter().map(|z| read_energy_uj(&z.energy_path).map(|v| Reading::Raw(v as f64))).collect()
    }
}
