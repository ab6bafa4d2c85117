//! The CPU's energy knobs: the frequency limits of every cpufreq policy (`cpu_freq_khz`, both
//! `scaling_min_freq` and `scaling_max_freq`, one journal entry per policy) and the deepest idle
//! state allowed (`cpuidle_max_state`: every deeper state's `disable` set to 1 on every CPU, one
//! journal entry per file). Both apply to every CPU, as the governor does: the kernel's own work
//! for a run (completions, the SQPOLL thread, interrupts) runs on CPUs other than its threads'.
use super::sysfs::{read_raw, write_value};
use super::{SettingsError, Target};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// No CPU runs at 100 GHz: a value above this is a typo (a frequency in Hz, say).
const MAX_KHZ: u64 = 100_000_000;

/// "N" (min = max = N) or "MIN-MAX", in kHz: (min, max), or a one-line error (bad input).
pub(crate) fn parse_khz(v: &str) -> Result<(u64, u64), SettingsError> {
    let bad = || {
        SettingsError::Invalid(format!(
            "cpu_freq_khz must be a frequency in kHz (2000000 for 2 GHz) or a range MIN-MAX in kHz (800000-2000000), not \"{v}\""
        ))
    };
    let num = |s: &str| -> Result<u64, SettingsError> {
        let s = s.trim();
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let n: u64 = s.parse().map_err(|_| bad())?;
        if n == 0 || n > MAX_KHZ {
            return Err(SettingsError::Invalid(format!(
                "cpu_freq_khz {s} kHz is not a CPU frequency (1 to {MAX_KHZ} kHz): give it in kHz, 2000000 for 2 GHz"
            )));
        }
        Ok(n)
    };
    let (min, max) = match v.trim().split_once('-') {
        Some((a, b)) => (num(a)?, num(b)?),
        None => {
            let n = num(v)?;
            (n, n)
        }
    };
    if min > max {
        return Err(SettingsError::Invalid(format!("cpu_freq_khz {min}-{max}: the minimum is above the maximum: give MIN-MAX")));
    }
    Ok((min, max))
}

/// What a `cpu_freq_khz` value asks for: limits in kHz, or one frequency at a share of each
/// policy's hardware range (`min` 0, `max` 1, `P%`), resolved per policy when the run applies it,
/// so one plan names the lowest and highest frequency of any machine (IISWC'26's DVFS sweep).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum FreqAsk {
    Khz(u64, u64),
    Share(f64),
}

/// `cpu_freq_khz`'s value: `min`, `max`, `P%` (0 to 100, of cpuinfo_min_freq..cpuinfo_max_freq),
/// or [`parse_khz`]'s kHz forms; a one-line error otherwise.
pub(crate) fn parse_ask(v: &str) -> Result<FreqAsk, SettingsError> {
    let t = v.trim();
    match t {
        "min" => return Ok(FreqAsk::Share(0.0)),
        "max" => return Ok(FreqAsk::Share(1.0)),
        _ => {}
    }
    if let Some(p) = t.strip_suffix('%') {
        let ok = !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit() || b == b'.');
        return match p.parse::<f64>() {
            Ok(x) if ok && x.is_finite() && (0.0..=100.0).contains(&x) => Ok(FreqAsk::Share(x / 100.0)),
            _ => Err(SettingsError::Invalid(format!(
                "cpu_freq_khz {t}: a share of the hardware range is 0% to 100% (min and max name its ends)"
            ))),
        };
    }
    parse_khz(t).map(|(a, b)| FreqAsk::Khz(a, b))
}

/// `cpuidle_max_state`'s K: a state's index, or a one-line error (bad input).
pub(crate) fn parse_state(v: &str) -> Result<usize, SettingsError> {
    let v = v.trim();
    match v.parse::<usize>() {
        Ok(k) if v.bytes().all(|b| b.is_ascii_digit()) && k < 64 => Ok(k),
        _ => Err(SettingsError::Invalid(format!(
            "cpuidle_max_state must be the index of the deepest idle state allowed (0 for the shallowest, as in cpuidle/stateN), not \"{v}\""
        ))),
    }
}

/// The number after `prefix` in a directory entry's name ("policy3" -> 3).
fn numbered(dir: &Path, prefix: &str) -> Vec<(u32, PathBuf)> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix(prefix)?.parse::<u32>().ok()?;
            Some((n, e.path()))
        })
        .collect();
    found.sort_by_key(|(n, _)| *n);
    found
}

/// The cpufreq policies' directories, in order.
fn policies(sysfs: &Path) -> Vec<(u32, PathBuf)> {
    numbered(&sysfs.join("devices/system/cpu/cpufreq"), "policy").into_iter().filter(|(_, p)| p.join("scaling_max_freq").exists()).collect()
}

fn read_khz(path: &Path) -> Result<u64, SettingsError> {
    let raw = read_raw(path)?;
    raw.parse().map_err(|_| SettingsError::Failed(format!("{} reads \"{raw}\", not a frequency in kHz", path.display())))
}

/// One target per policy (its `scaling_max_freq`, standing for both limits), the value "MIN-MAX";
/// refused where there is no cpufreq, or the frequency is outside a policy's hardware range
/// (unsupported here).
pub(super) fn freq_targets(sysfs: &Path, value: &str) -> Result<Vec<Target>, SettingsError> {
    let ask = parse_ask(value)?;
    let found = policies(sysfs);
    if found.is_empty() {
        return Err(SettingsError::Unsupported(format!(
            "no CPU frequency scaling here ({}/policy* is missing; common in VMs): drop cpu_freq_khz",
            sysfs.join("devices/system/cpu/cpufreq").display()
        )));
    }
    let mut out = Vec::new();
    for (n, dir) in found {
        let (lo, hi) = (read_khz(&dir.join("cpuinfo_min_freq"))?, read_khz(&dir.join("cpuinfo_max_freq"))?);
        let (min, max) = match ask {
            FreqAsk::Khz(min, max) => (min, max),
            FreqAsk::Share(s) => {
                let f = lo + ((hi.saturating_sub(lo)) as f64 * s).round() as u64;
                (f, f)
            }
        };
        if min < lo || max > hi {
            return Err(SettingsError::Unsupported(format!(
                "cpu_freq_khz={value} is outside policy{n}'s range {lo}-{hi} kHz (cpuinfo_min_freq-cpuinfo_max_freq): give a frequency within it"
            )));
        }
        super::writable(&dir.join("scaling_min_freq"), super::Setting::CpuFreqKhz)?;
        out.push(Target { path: dir.join("scaling_max_freq"), label: format!("policy{n}"), value: Some(format!("{min}-{max}")) });
    }
    Ok(out)
}

/// A policy's limits in force, "MIN-MAX" (`path` is its `scaling_max_freq`).
pub(super) fn read_freq(path: &Path) -> Result<String, SettingsError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    Ok(format!("{}-{}", read_khz(&dir.join("scaling_min_freq"))?, read_khz(&dir.join("scaling_max_freq"))?))
}

/// Write a policy's limits "MIN-MAX" in the order that keeps min <= max at every step (the
/// maximum first where the new minimum is above the maximum in force, else the minimum first),
/// and return the limits in force after (the kernel may clamp them).
pub(super) fn write_freq(path: &Path, value: &str) -> Result<String, SettingsError> {
    let (min, max) = parse_khz(value)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let (min_file, max_file) = (dir.join("scaling_min_freq"), dir.join("scaling_max_freq"));
    let cur_max = read_khz(&max_file)?;
    if min > cur_max {
        write_value(&max_file, &max.to_string())?;
        write_value(&min_file, &min.to_string())?;
    } else {
        write_value(&min_file, &min.to_string())?;
        write_value(&max_file, &max.to_string())?;
    }
    read_freq(path)
}

/// The CPUs' idle state directories: (cpu, [(index, stateN dir)]), CPUs without cpuidle left out.
fn idle_states(sysfs: &Path) -> Vec<(u32, Vec<(u32, PathBuf)>)> {
    numbered(&sysfs.join("devices/system/cpu"), "cpu")
        .into_iter()
        .map(|(n, cpu)| (n, numbered(&cpu.join("cpuidle"), "state")))
        .filter(|(_, states)| !states.is_empty())
        .collect()
}

/// The `disable` file of every state deeper than K on every CPU, the value "1"; refused where
/// there is no cpuidle or a CPU has no state K.
pub(super) fn idle_targets(sysfs: &Path, value: &str) -> Result<Vec<Target>, SettingsError> {
    let k = parse_state(value)?;
    let cpus = idle_states(sysfs);
    if cpus.is_empty() {
        return Err(SettingsError::Unsupported(format!(
            "no CPU idle states here ({}/cpu*/cpuidle is missing: no cpuidle driver, common in VMs): drop cpuidle_max_state",
            sysfs.join("devices/system/cpu").display()
        )));
    }
    let mut out = Vec::new();
    for (cpu, states) in cpus {
        if !states.iter().any(|(i, _)| *i as usize == k) {
            let names: Vec<String> = states.iter().map(|(i, d)| format!("{i} {}", read_raw(&d.join("name")).unwrap_or_default())).collect();
            return Err(SettingsError::Unsupported(format!(
                "cpuidle_max_state={k}: cpu{cpu} has no idle state {k} (it has {}): pick one of those",
                names.join(", ")
            )));
        }
        for (i, d) in states.into_iter().filter(|(i, _)| *i as usize > k) {
            out.push(Target { path: d.join("disable"), label: format!("cpu{cpu}/state{i}"), value: Some("1".into()) });
        }
    }
    Ok(out)
}

/// What the CPUs' knobs are now, for the environment record: each cpufreq policy's limits, the
/// frequency it runs at and its hardware range (kHz); the idle states (cpu0's names and
/// latencies, µs) and which are disabled on which CPU. Null where the machine has none.
pub(super) fn snapshot(sysfs: &Path) -> (Value, Value) {
    let num = |p: PathBuf| read_khz(&p).map(Value::from).unwrap_or(Value::Null);
    let mut freq = serde_json::Map::new();
    for (n, d) in policies(sysfs) {
        freq.insert(
            format!("policy{n}"),
            json!({
                "scaling_min_khz": num(d.join("scaling_min_freq")),
                "scaling_max_khz": num(d.join("scaling_max_freq")),
                "cur_khz": num(d.join("scaling_cur_freq")),
                "cpuinfo_min_khz": num(d.join("cpuinfo_min_freq")),
                "cpuinfo_max_khz": num(d.join("cpuinfo_max_freq")),
            }),
        );
    }
    let cpus = idle_states(sysfs);
    let idle = match cpus.first() {
        None => Value::Null,
        Some((_, first)) => {
            let states: Vec<Value> = first
                .iter()
                .map(|(i, d)| {
                    json!({
                        "state": i,
                        "name": read_raw(&d.join("name")).ok(),
                        "exit_latency_us": num(d.join("latency")),
                        "target_residency_us": num(d.join("residency")),
                    })
                })
                .collect();
            let mut disabled = serde_json::Map::new();
            for (cpu, states) in &cpus {
                let off: Vec<u32> =
                    states.iter().filter(|(_, d)| read_raw(&d.join("disable")).is_ok_and(|v| v == "1")).map(|(i, _)| *i).collect();
                if !off.is_empty() {
                    disabled.insert(format!("cpu{cpu}"), json!(off));
                }
            }
            json!({ "states": states, "disabled": disabled })
        }
    };
    (if freq.is_empty() { Value::Null } else { Value::Object(freq) }, idle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequencies_parse_as_one_or_a_range_and_nothing_else() {
        assert_eq!(parse_khz("2000000"), Ok((2_000_000, 2_000_000)));
        assert_eq!(parse_khz(" 800000-2000000 "), Ok((800_000, 2_000_000)));
        for bad in ["NaN", "-5", "2e6", "", "1.5", "+5", "0", "200000000", "3000000-1000000", "1-", "-"] {
            let e = parse_khz(bad).unwrap_err();
            // Bad input: a value no machine takes.
            assert!(matches!(e, SettingsError::Invalid(_)), "{bad}: {e:?}");
            let e = e.to_string();
            assert!(e.starts_with("cpu_freq_khz") && !e.contains('\n'), "{bad}: {e}");
        }
        assert_eq!(parse_ask("min"), Ok(FreqAsk::Share(0.0)));
        assert_eq!(parse_ask(" max"), Ok(FreqAsk::Share(1.0)));
        assert_eq!(parse_ask("25%"), Ok(FreqAsk::Share(0.25)));
        assert_eq!(parse_ask("2000000"), Ok(FreqAsk::Khz(2_000_000, 2_000_000)));
        for bad in ["NaN%", "inf%", "101%", "-5%", "%", "1e2%", "mid"] {
            let e = parse_ask(bad).unwrap_err();
            assert!(matches!(e, SettingsError::Invalid(_)), "{bad}: {e:?}");
            let e = e.to_string();
            assert!(e.starts_with("cpu_freq_khz") && !e.contains('\n'), "{bad}: {e}");
        }
        assert_eq!(parse_state("2"), Ok(2));
        for bad in ["-1", "x", "1.0", "999"] {
            assert!(matches!(parse_state(bad), Err(SettingsError::Invalid(_))), "{bad}");
        }
    }

    /// `min`, `max` and `P%` resolve per policy against its own hardware range.
    #[test]
    fn a_share_of_the_range_resolves_per_policy() {
        let dir = std::env::temp_dir().join(format!("iolab-freq-{}", std::process::id()));
        for (n, lo, hi) in [(0, 800_000, 3_000_000), (1, 1_000_000, 2_000_000)] {
            let p = dir.join(format!("devices/system/cpu/cpufreq/policy{n}"));
            std::fs::create_dir_all(&p).unwrap();
            for (f, v) in [("cpuinfo_min_freq", lo), ("cpuinfo_max_freq", hi), ("scaling_min_freq", lo), ("scaling_max_freq", hi)] {
                std::fs::write(p.join(f), format!("{v}\n")).unwrap();
            }
        }
        let values = |v: &str| freq_targets(&dir, v).unwrap().into_iter().map(|t| t.value.unwrap()).collect::<Vec<_>>();
        assert_eq!(values("min"), ["800000-800000", "1000000-1000000"]);
        assert_eq!(values("max"), ["3000000-3000000", "2000000-2000000"]);
        assert_eq!(values("50%"), ["1900000-1900000", "1500000-1500000"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
