//! Whole-system power from a Redfish BMC: `/redfish/v1/Chassis/{id}/EnvironmentMetrics`
//! (`PowerWatts.Reading`) where the chassis links it, else the deprecated
//! `/redfish/v1/Chassis/{id}/Power` (`PowerControl[0].PowerConsumedWatts`; the other entries
//! may be sub-domains of it and are never added). Polled about once a second.
//!
//! Credentials come from the environment (`IOLAB_REDFISH_USER`, `IOLAB_REDFISH_PASSWORD`) or a
//! file (`IOLAB_REDFISH_CREDENTIALS` or `RedfishConfig::credentials_file`: "user:password" or
//! user and password on two lines), never from the command line. The scheme comes from the
//! URL: https (rustls, the webpki root certificates) or plain http (tests, lab networks).
use super::{Channel, ChannelKind, EnergyError, Reading, Scope, Source};
use base64::Engine;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Default)]
pub struct RedfishConfig {
    /// Base URL, e.g. "https://bmc.example.org" (or "http://127.0.0.1:8000").
    pub url: String,
    /// Chassis id (last path segment); None = the first chassis that reports power.
    pub chassis: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub credentials_file: Option<PathBuf>,
    pub timeout: Option<Duration>,
}

impl std::fmt::Debug for RedfishConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedfishConfig")
            .field("url", &self.url)
            .field("chassis", &self.chassis)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("credentials_file", &self.credentials_file)
            .finish()
    }
}

impl RedfishConfig {
    /// (user, password) if any are configured.
    pub(crate) fn credentials(&self) -> Result<Option<(String, String)>, EnergyError> {
        if let (Some(u), Some(p)) = (&self.username, &self.password) {
            return Ok(Some((u.clone(), p.clone())));
        }
        let Some(f) = &self.credentials_file else { return Ok(None) };
        super::read_credentials_file("redfish", f).map(Some)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Resource {
    EnvironmentMetrics,
    LegacyPower,
}

pub struct Redfish {
    agent: ureq::Agent,
    base: String,
    auth: Option<String>,
    /// The resource polled.
    pub path: String,
    pub resource: Resource,
    channels: Vec<Channel>,
}

fn link(v: &Value, key: &str) -> Option<String> {
    v.get(key)?.get("@odata.id")?.as_str().map(String::from)
}

pub(crate) fn reading_of(resource: Resource, v: &Value) -> Result<f64, EnergyError> {
    let w = match resource {
        Resource::EnvironmentMetrics => v
            .pointer("/PowerWatts/Reading")
            .ok_or_else(|| EnergyError::Unreachable("EnvironmentMetrics has no PowerWatts.Reading".into()))?,
        Resource::LegacyPower => v
            .pointer("/PowerControl/0/PowerConsumedWatts")
            .ok_or_else(|| EnergyError::Unreachable("Power has no PowerControl[0].PowerConsumedWatts".into()))?,
    };
    let w = w.as_f64().ok_or_else(|| EnergyError::Unreachable(format!("power reading is {w} (not a number)")))?;
    if w <= 0.0 || w >= 65535.0 {
        return Err(EnergyError::Unreachable(format!("BMC reports {w} W; rejected")));
    }
    Ok(w)
}

impl Redfish {
    fn get(&self, path: &str) -> Result<Value, EnergyError> {
        let url = format!("{}{}", self.base, path);
        let mut req = self.agent.get(&url).set("Accept", "application/json");
        if let Some(a) = &self.auth {
            req = req.set("Authorization", a);
        }
        match req.call() {
            Ok(r) => {
                let body = r.into_string().map_err(|e| EnergyError::Unreachable(format!("GET {url}: {e}")))?;
                serde_json::from_str(&body).map_err(|e| EnergyError::Unreachable(format!("GET {url}: not JSON: {e}")))
            }
            Err(ureq::Error::Status(401, _)) | Err(ureq::Error::Status(403, _)) => Err(EnergyError::Unreachable(format!(
                "GET {url}: authentication refused (set IOLAB_REDFISH_USER/IOLAB_REDFISH_PASSWORD or a credentials file)"
            ))),
            Err(e) => Err(EnergyError::Unreachable(format!("GET {url}: {e}"))),
        }
    }

    /// Err: a URL or credentials that cannot be used (bad input), or a BMC that does not answer
    /// with a power reading (external).
    pub fn open(cfg: &RedfishConfig) -> Result<(Redfish, Vec<String>), EnergyError> {
        if !(cfg.url.starts_with("https://") || cfg.url.starts_with("http://")) {
            return Err(EnergyError::Invalid(format!("redfish url {:?} must start with https:// or http://", cfg.url)));
        }
        let agent = ureq::AgentBuilder::new().timeout(cfg.timeout.unwrap_or(Duration::from_secs(5))).build();
        let auth =
            cfg.credentials()?.map(|(u, p)| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))));
        let mut me = Redfish {
            agent,
            base: cfg.url.trim_end_matches('/').to_string(),
            auth,
            path: String::new(),
            resource: Resource::EnvironmentMetrics,
            channels: Vec::new(),
        };
        let coll = me.get("/redfish/v1/Chassis")?;
        let members: Vec<String> = coll
            .get("Members")
            .and_then(|m| m.as_array())
            .map(|a| a.iter().filter_map(|m| m.get("@odata.id").and_then(|x| x.as_str()).map(String::from)).collect())
            .unwrap_or_default();
        let mut tried: Vec<String> = Vec::new();
        for m in members {
            if let Some(id) = &cfg.chassis {
                if m.trim_end_matches('/').rsplit('/').next() != Some(id.as_str()) {
                    continue;
                }
            }
            let ch = match me.get(&m) {
                Ok(c) => c,
                Err(e) => {
                    tried.push(e.to_string());
                    continue;
                }
            };
            for (key, res) in [("EnvironmentMetrics", Resource::EnvironmentMetrics), ("Power", Resource::LegacyPower)] {
                let Some(p) = link(&ch, key) else { continue };
                match me.get(&p).and_then(|v| reading_of(res, &v)) {
                    Ok(w) => {
                        me.path = p;
                        me.resource = res;
                        me.channels = vec![Channel {
                            scope: Scope::BmcSystem,
                            label: me.path.clone(),
                            kind: ChannelKind::Power { max_gap_s: 5.0, edge_hold_s: 1.5 },
                        }];
                        let note = format!("{} first reading {w} W", me.path);
                        return Ok((me, vec![note]));
                    }
                    Err(e) => tried.push(format!("{p}: {e}")),
                }
            }
        }
        Err(EnergyError::Unreachable(format!(
            "no chassis with a power reading at {}{}",
            cfg.url,
            if tried.is_empty() { String::new() } else { format!(" ({})", tried.join("; ")) }
        )))
    }
}

impl Source for Redfish {
    fn name(&self) -> &'static str {
        "redfish"
    }
    fn method(&self, _: Scope) -> String {
        let what = match self.resource {
            Resource::EnvironmentMetrics => "PowerWatts.Reading",
            Resource::LegacyPower => "PowerControl[0].PowerConsumedWatts (legacy Power resource)",
        };
        format!("Redfish {}{} {what}, polled ~1 Hz, trapezoid rule", self.base, self.path)
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn interval(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn read(&mut self) -> Vec<Result<Reading, EnergyError>> {
        vec![self.get(&self.path.clone()).and_then(|v| reading_of(self.resource, &v)).map(Reading::Watts)]
    }
}
