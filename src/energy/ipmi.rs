//! Whole-system power from the BMC through `ipmitool dcmi power reading`, run with LC_ALL=C.
//! Fields are parsed by label anywhere in the text, because ipmitool 1.8.19 prints the
//! timestamp without a newline ("... UTC    Sampling period: ..." on one line) while 1.8.18
//! used asctime(). A reading is rejected when the state is not "activated", the value is 0 or
//! 65535 W, or the timestamp is in 1970 (BMCs that never started power monitoring).
//! FreeIPMI's "Current Power : N Watts" is accepted too.
use super::{Channel, ChannelKind, EnergyError, Reading, Scope, Source};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Debug, PartialEq)]
pub struct DcmiReading {
    pub instantaneous_w: f64,
    pub average_w: Option<f64>,
    pub timestamp: Option<String>,
    pub state: Option<String>,
}

fn field_after<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let i = text.find(label)?;
    let rest = &text[i + label.len()..];
    Some(rest.split('\n').next().unwrap_or(rest))
}

fn watts_after(text: &str, label: &str) -> Option<f64> {
    let f = field_after(text, label)?;
    let num: String = f.trim_start().chars().take_while(|c| c.is_ascii_digit()).collect();
    num.parse().ok()
}

/// Parse `ipmitool dcmi power reading` output into a usable reading, or say why it is not one.
pub fn parse_dcmi(text: &str) -> Result<DcmiReading, EnergyError> {
    let inst = watts_after(text, "Instantaneous power reading:").or_else(|| {
        // FreeIPMI: "Current Power                        : 215 Watts"
        let f = field_after(text, "Current Power")?;
        let f = f.split_once(':')?.1;
        f.trim_start().chars().take_while(|c| c.is_ascii_digit()).collect::<String>().parse().ok()
    });
    let Some(inst) = inst else {
        return Err(EnergyError::Unreachable(format!(
            "no power reading in ipmitool output: {:?}",
            text.trim().chars().take(200).collect::<String>()
        )));
    };
    let state = field_after(text, "Power reading state is:").map(|s| s.trim().to_string());
    if let Some(st) = &state {
        if st != "activated" {
            return Err(EnergyError::Unreachable(format!(
                "BMC power reading state is {st:?}, not activated (power monitoring off); reading rejected"
            )));
        }
    }
    let timestamp = field_after(text, "IPMI timestamp:").map(|s| s.split("Sampling period").next().unwrap_or(s).trim().to_string());
    if let Some(ts) = &timestamp {
        if ts.contains("1970") || ts.starts_with("01/01/70") {
            return Err(EnergyError::Unreachable(format!(
                "BMC timestamp {ts:?} is in 1970 (power monitoring never started); reading rejected"
            )));
        }
    }
    if inst == 0.0 || inst >= 65535.0 {
        return Err(EnergyError::Unreachable(format!("BMC reports {inst} W (0 and 65535 mean no reading); rejected")));
    }
    let average_w = watts_after(text, "Average power reading over sample period:");
    Ok(DcmiReading { instantaneous_w: inst, average_w, timestamp, state })
}

/// Look a program up in a PATH-style list.
pub fn lookup_in_path(name: &str, path_var: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    path_var
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(name))
        .find(|p| p.metadata().map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0).unwrap_or(false))
}

/// Run a command with LC_ALL=C and a timeout; Ok(stdout) when it exits 0.
pub(crate) fn run_with_timeout(prog: &Path, args: &[String], timeout: Duration) -> Result<String, EnergyError> {
    let mut child = Command::new(prog)
        .args(args)
        .env("LC_ALL", "C")
        .env("LANG", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| EnergyError::Unreachable(format!("cannot run {}: {e}", prog.display())))?;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if t0.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(EnergyError::Unreachable(format!("{} timed out after {:?}", prog.display(), timeout)));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(EnergyError::Unreachable(format!("{}: {e}", prog.display()))),
        }
    };
    let stdout = t_out.join().unwrap_or_default();
    let stderr = t_err.join().unwrap_or_default();
    if !status.success() {
        return Err(EnergyError::Unreachable(format!("{} exited with {status}: {}", prog.display(), stderr.trim())));
    }
    Ok(stdout)
}

pub struct Ipmi {
    prog: PathBuf,
    args: Vec<String>,
    channels: Vec<Channel>,
}

pub const IPMI_INTERVAL: Duration = Duration::from_secs(1);

impl Ipmi {
    /// `prog`: explicit ipmitool path (config or IOLAB_IPMITOOL), else looked up on PATH.
    /// `extra_args`: e.g. ["-I","lanplus","-H","bmc","-U","user","-E"] (password from IPMI_PASSWORD).
    /// Err: no ipmitool (unsupported), or ipmitool or the BMC gave no reading (external).
    pub fn open(prog: Option<&Path>, extra_args: &[String]) -> Result<(Ipmi, Vec<String>), EnergyError> {
        let prog = match prog {
            Some(p) => p.to_path_buf(),
            None => lookup_in_path("ipmitool", &std::env::var("PATH").unwrap_or_default()).ok_or_else(|| {
                EnergyError::Unsupported(
                    "ipmitool not found on PATH (install ipmitool; needs a BMC with DCMI and /dev/ipmi0 or a LAN interface)".into(),
                )
            })?,
        };
        let mut args: Vec<String> = extra_args.to_vec();
        args.extend(["dcmi", "power", "reading"].map(String::from));
        let me = Ipmi {
            prog,
            args,
            channels: vec![Channel {
                scope: Scope::BmcSystem,
                label: "dcmi".into(),
                kind: ChannelKind::Power { max_gap_s: 5.0, edge_hold_s: 1.5 },
            }],
        };
        let out = run_with_timeout(&me.prog, &me.args, Duration::from_secs(10))?;
        let r = parse_dcmi(&out)?;
        Ok((me, vec![format!("first reading {} W", r.instantaneous_w)]))
    }
}

impl Source for Ipmi {
    fn name(&self) -> &'static str {
        "ipmi"
    }
    fn method(&self, _: Scope) -> String {
        format!("{} {} (LC_ALL=C), instantaneous watts polled ~1 Hz, trapezoid rule", self.prog.display(), self.args.join(" "))
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn interval(&self) -> Duration {
        IPMI_INTERVAL
    }
    fn read(&mut self) -> Vec<Result<Reading, EnergyError>> {
        vec![run_with_timeout(&self.prog, &self.args, Duration::from_secs(5))
            .and_then(|o| parse_dcmi(&o))
            .map(|r| Reading::Watts(r.instantaneous_w))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V18: &str = "\n    Instantaneous power reading:                   215 Watts\n    Minimum during sampling period:                162 Watts\n    Maximum during sampling period:                276 Watts\n    Average power reading over sample period:      176 Watts\n    IPMI timestamp:                           Thu Mar  6 19:30:35 2025\n    Sampling period:                          00000001 Seconds.\n    Power reading state is:                   activated\n\n\n";

    #[test]
    fn parses_1_8_18() {
        let r = parse_dcmi(V18).unwrap();
        assert_eq!(r.instantaneous_w, 215.0);
        assert_eq!(r.average_w, Some(176.0));
        assert_eq!(r.timestamp.as_deref(), Some("Thu Mar  6 19:30:35 2025"));
    }

    #[test]
    fn parses_freeipmi() {
        let r = parse_dcmi("Current Power                        : 342 Watts\nMinimum Power over sampling duration : 1 watts\n").unwrap();
        assert_eq!(r.instantaneous_w, 342.0);
    }

    #[test]
    fn rejects_65535() {
        let t = V18.replace("  215 Watts", "65535 Watts");
        assert!(parse_dcmi(&t).unwrap_err().to_string().contains("65535"));
    }
}
