//! The server's outlet power from a NETIO PDU (PowerPDU 4C/8QS, ...) through its JSON API:
//! `GET /netio.json` (the NETIO JSON protocol, wiki.netio-products.com "JSON API", JSONVer 2.x)
//! answers `{"Agent": {..., "Time": "2026-11-27T10:00:00+01:00", ...}, "GlobalMeasure": {...},
//! "Outputs": [{"ID": 1, "Name": ..., "State": 1, "Current": mA, "PowerFactor": ..,
//! "Load": W, "Energy": Wh}, ...]}`.
//!
//! The outlets the user names (their `ID`s) feed the server; their `Load` (watts) is polled about
//! once a second, stamped with the host's clock on arrival (so the PDU's own clock, however far
//! off, moves nothing; its skew is noted), and integrated by the trapezoid rule; outlets are
//! disjoint parts of one scope and summed. The scope is `wall_ac`: an outlet measures what a
//! plug-in meter at the wall does. The `Energy` counter (whole Wh, 3600 J a step) is too coarse
//! for a run and is not used; an output that reports no `Load` (models or outputs without
//! metering) is refused at open.
//!
//! Credentials (Basic auth, the JSON API's read user): `IOLAB_NETIO_USER`/`IOLAB_NETIO_PASSWORD`,
//! or a file (`user:password` or two lines), or `user:password@` in the URL, which is taken out
//! of it at once. No password is shown: every URL and message iolab prints or records passes
//! `secret::redact`, and the URL kept has no user part.
use super::{Channel, ChannelKind, EnergyError, Reading, Scope, Source, MAX_SAMPLE_WATTS};
use crate::secret::redact;
use base64::Engine;
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Default)]
pub struct NetioConfig {
    /// e.g. "http://pdu.lab:8080" or ".../netio.json".
    pub url: String,
    /// Output IDs (from 1) that feed the server.
    pub outlets: Vec<u32>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub credentials_file: Option<PathBuf>,
    pub timeout: Option<Duration>,
}

impl std::fmt::Debug for NetioConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NetioConfig")
            .field("url", &redact(&self.url))
            .field("outlets", &self.outlets)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("credentials_file", &self.credentials_file)
            .finish()
    }
}

impl NetioConfig {
    /// (user, password) from the config, the file, or the URL's user part; and the URL without it.
    pub(crate) fn credentials(&self) -> Result<(Option<(String, String)>, String), EnergyError> {
        let (url, from_url) = split_userinfo(&self.url);
        if let (Some(u), Some(p)) = (&self.username, &self.password) {
            return Ok((Some((u.clone(), p.clone())), url));
        }
        if let Some(f) = &self.credentials_file {
            let c = super::read_credentials_file("netio", f)?;
            return Ok((Some(c), url));
        }
        Ok((from_url, url))
    }
}

/// `scheme://user:pass@host/...` → ("scheme://host/...", Some((user, pass))).
fn split_userinfo(url: &str) -> (String, Option<(String, String)>) {
    let Some((scheme, rest)) = url.split_once("://") else { return (url.to_string(), None) };
    let (authority, path) = rest.find('/').map(|i| rest.split_at(i)).unwrap_or((rest, ""));
    match authority.rsplit_once('@') {
        Some((user, host)) => {
            let (u, p) = user.split_once(':').unwrap_or((user, ""));
            (format!("{scheme}://{host}{path}"), Some((u.to_string(), p.to_string())))
        }
        None => (url.to_string(), None),
    }
}

pub struct Netio {
    agent: ureq::Agent,
    url: String,
    auth: Option<String>,
    outlets: Vec<u32>,
    channels: Vec<Channel>,
}

/// One outlet's `Load` in watts from a netio.json document.
pub(crate) fn outlet_load(v: &Value, id: u32) -> Result<f64, EnergyError> {
    let outs = v.get("Outputs").and_then(|o| o.as_array()).ok_or_else(|| EnergyError::Invalid("netio.json has no Outputs list".into()))?;
    let o = outs.iter().find(|o| o.get("ID").and_then(|i| i.as_u64()) == Some(id as u64)).ok_or_else(|| {
        let ids: Vec<String> = outs.iter().filter_map(|o| o.get("ID").and_then(|i| i.as_u64())).map(|i| i.to_string()).collect();
        EnergyError::Invalid(format!("the PDU has no output {id} (it has {})", ids.join(", ")))
    })?;
    let w = o.get("Load").ok_or_else(|| EnergyError::Invalid(format!("output {id} reports no Load (it does not meter)")))?;
    let w = w.as_f64().ok_or_else(|| EnergyError::Invalid(format!("output {id} Load is {w}, not a number")))?;
    if !(w.is_finite() && (0.0..=MAX_SAMPLE_WATTS).contains(&w)) {
        return Err(EnergyError::Invalid(format!("output {id} Load {w} W is not a power reading; rejected")));
    }
    Ok(w)
}

/// The PDU clock's lead over the host's, seconds, from `Agent.Time` (None when absent).
pub fn clock_skew_s(v: &Value, host_unix: f64) -> Option<f64> {
    let t = v.pointer("/Agent/Time")?.as_str()?;
    super::meterlog::parse_timestamp(t).map(|t| t - host_unix)
}

impl Netio {
    fn get(&self) -> Result<Value, EnergyError> {
        let mut req = self.agent.get(&self.url).set("Accept", "application/json");
        if let Some(a) = &self.auth {
            req = req.set("Authorization", a);
        }
        let shown = redact(&self.url);
        match req.call() {
            Ok(r) => {
                let body = r.into_string().map_err(|e| EnergyError::Unreachable(redact(&format!("GET {shown}: {e}"))))?;
                serde_json::from_str(&body).map_err(|e| EnergyError::Unreachable(format!("GET {shown}: not JSON: {e}")))
            }
            Err(ureq::Error::Status(401, _)) | Err(ureq::Error::Status(403, _)) => Err(EnergyError::Unreachable(format!(
                "GET {shown}: authentication refused (set IOLAB_NETIO_USER/IOLAB_NETIO_PASSWORD or --netio-credentials, the JSON API's read user)"
            ))),
            Err(e) => Err(EnergyError::Unreachable(redact(&format!("GET {shown}: {e}")))),
        }
    }

    /// Err: a URL, credentials or outlets that cannot be used (bad input), or a PDU that does
    /// not answer (external).
    pub fn open(cfg: &NetioConfig) -> Result<(Netio, Vec<String>), EnergyError> {
        let (creds, url) = cfg.credentials()?;
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(EnergyError::Invalid(format!("netio url {:?} must start with https:// or http://", redact(&url))));
        }
        if cfg.outlets.is_empty() {
            return Err(EnergyError::Invalid("no NETIO outlets named (--netio-outlets, the output IDs that feed the server)".into()));
        }
        let url = if url.trim_end_matches('/').ends_with("/netio.json") {
            url.trim_end_matches('/').to_string()
        } else {
            format!("{}/netio.json", url.trim_end_matches('/'))
        };
        let agent = ureq::AgentBuilder::new().timeout(cfg.timeout.unwrap_or(Duration::from_secs(3))).build();
        let auth = creds.map(|(u, p)| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))));
        let me = Netio {
            agent,
            url,
            auth,
            outlets: cfg.outlets.clone(),
            channels: cfg
                .outlets
                .iter()
                .map(|o| Channel {
                    scope: Scope::WallAc,
                    label: format!("output {o}"),
                    kind: ChannelKind::Power { max_gap_s: 5.0, edge_hold_s: 1.5 },
                })
                .collect(),
        };
        let host = super::unix_now();
        let v = me.get()?;
        let mut notes = Vec::new();
        for &o in &me.outlets {
            // The PDU answered: an outlet it does not meter is one named wrongly.
            let w = outlet_load(&v, o)?;
            notes.push(format!("output {o} first reading {w} W"));
        }
        if let Some(skew) = clock_skew_s(&v, host) {
            if skew.abs() > 2.0 {
                notes.push(format!(
                    "the PDU's clock is {skew:+.1} s off the host's; samples are stamped with the host's clock on arrival, so this moves nothing"
                ));
            }
        }
        if let Some(m) = v.pointer("/Agent/Model").and_then(|m| m.as_str()) {
            notes.push(format!("model {m}"));
        }
        Ok((me, notes))
    }
}

impl Source for Netio {
    fn name(&self) -> &'static str {
        "netio"
    }
    fn method(&self, _: Scope) -> String {
        format!(
            "NETIO PDU {} outputs {} Load (W), polled ~1 Hz, stamped on arrival, trapezoid rule",
            redact(&self.url),
            self.outlets.iter().map(|o| o.to_string()).collect::<Vec<_>>().join("+")
        )
    }
    fn channels(&self) -> &[Channel] {
        &self.channels
    }
    fn interval(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn read(&mut self) -> Vec<Result<Reading, EnergyError>> {
        match self.get() {
            Ok(v) => self.outlets.iter().map(|&o| outlet_load(&v, o).map(Reading::Watts)).collect(),
            Err(e) => self.outlets.iter().map(|_| Err(e.clone())).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_in_the_url_is_taken_out_of_it() {
        let c = NetioConfig { url: "http://admin:s3cret@pdu:8080/netio.json".into(), ..Default::default() };
        let (creds, url) = c.credentials().unwrap();
        assert_eq!(url, "http://pdu:8080/netio.json");
        assert_eq!(creds, Some(("admin".into(), "s3cret".into())));
        assert!(!format!("{c:?}").contains("s3cret"), "{c:?}");
    }

    #[test]
    fn loads_and_refusals() {
        let v: Value = serde_json::from_str(
            r#"{"Agent":{"Time":"2026-11-27T11:00:00+01:00"},"Outputs":[{"ID":1,"Load":151,"Energy":3},{"ID":2,"State":0}]}"#,
        )
        .unwrap();
        assert_eq!(outlet_load(&v, 1).unwrap(), 151.0);
        assert!(outlet_load(&v, 2).unwrap_err().to_string().contains("no Load"));
        assert!(outlet_load(&v, 9).unwrap_err().to_string().contains("has no output 9"));
        let skew = clock_skew_s(&v, 1_795_773_600.0 - 30.0).unwrap();
        assert!((skew - 30.0).abs() < 1e-6, "{skew}");
    }
}
