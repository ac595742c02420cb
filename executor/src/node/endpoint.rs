//! Where the scheduler's executor API is and the one certificate it may present: an
//! `https://host:port` URL and the SHA-256 of the scheduler's certificate, from the launch
//! (`STORAGE_SCHEDULER_URL` and `TaskInfo.data`) or from a framework MESSAGE after a
//! failover (a new scheduler has a new certificate). The client pins that certificate and
//! trusts no CA, so nobody between the executor and the scheduler reads a plan or a secret,
//! or answers in the scheduler's name. A plain `http://` URL is refused.
//!
//! A certificate other than the pinned one ([`on_mismatch`], pure) is waited through,
//! retrying as for an unreachable scheduler, and fails the node when the wait runs out: a
//! failed-over scheduler on the same address presents its new certificate before its MESSAGE
//! with the new pin arrives (it serves before it subscribes, and re-tells quiet executors at a
//! bounded rate). A pin that worked is waited on for [`PIN_GRACE`]; one that never worked for
//! [`NEW_PIN_GRACE`] only: the scheduler that launched this executor may have failed over
//! before the executor's first call, but past the first announcements the other certificate
//! is someone else's, and the node fails naming both. No secret is sent meanwhile: the
//! handshake fails before any request is written.

use std::sync::Arc;
use std::time::Duration;
use storage_framework::contract::env;
use storage_framework::tls::{self, Fingerprint, PinnedVerifier};

/// Far more than `{"scheduler_url":"https://<253-byte host>:65535","scheduler_fingerprint":"sha256:<64 hex>"}` needs.
const MAX_ANNOUNCEMENT: usize = 4096;

/// How long a pin that worked is kept through another certificate before the node fails:
/// enough for a failed-over scheduler to tell every executor its new one (at SUBSCRIBED,
/// then again to each quiet one, 100 per 5 s: 10,000 executors in under 9 minutes).
pub const PIN_GRACE: Duration = Duration::from_secs(15 * 60);

/// How long a pin that never worked is kept through another certificate. The new scheduler
/// of a failover tells every executor at its SUBSCRIBED, and again one quiet for 75 s since
/// its launch (the agent drops a message for an executor not yet registered with it): this
/// covers both, where failing at once turned a failover during a launch wave into a failed
/// node and a relaunch per executor that had not called yet.
pub const NEW_PIN_GRACE: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `https://host:port`, no trailing slash.
    pub url: String,
    pub pin: Fingerprint,
}

impl Endpoint {
    /// From a URL and a `sha256:<hex>` fingerprint; the error names what is wrong.
    pub fn new(url: &str, pin: &str) -> Result<Endpoint, String> {
        Ok(Endpoint {
            url: https_url(url)?,
            pin: Fingerprint::parse(pin)
                .map_err(|e| format!("the scheduler's certificate fingerprint: {e}"))?,
        })
    }

    /// An HTTP client for this scheduler that accepts its pinned certificate only, over TLS
    /// 1.2 so that its connections resume without a key exchange
    /// (`storage_framework::tls::executor_client_config`). Its sessions are its own: a new
    /// agent starts with a full handshake.
    pub fn agent(&self, config: ureq::config::Config) -> ureq::Agent {
        let verifier = Arc::new(PinnedVerifier::new(vec![self.pin]));
        tls::agent(config, tls::executor_client_config(verifier))
    }
}

/// `https://host:port` (one trailing slash dropped); no path, query or user.
fn https_url(url: &str) -> Result<String, String> {
    let authority = match url.strip_prefix("https://") {
        Some(a) => a,
        None if url.starts_with("http://") => {
            return Err(format!(
                "the scheduler URL {url:?} is plain http://: the executor API is reached over \
                 https:// only"
            ))
        }
        None => return Err(format!("the scheduler URL {url:?} is not an https:// URL")),
    };
    let authority = authority.strip_suffix('/').unwrap_or(authority);
    let host_port_chars = |c: char| c.is_ascii_alphanumeric() || ".-:[]_".contains(c);
    if authority.is_empty() || !authority.chars().all(host_port_chars) {
        return Err(format!(
            "the scheduler URL {url:?} must be https://host:port, with no path, query or user"
        ));
    }
    Ok(format!("https://{authority}"))
}

/// What a framework MESSAGE from the scheduler tells the node worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// The scheduler is at this address with this certificate (after every subscription).
    Moved(Endpoint),
    /// The node's plan moved on to this version: the nudge owed after a `nudge=1` request.
    PlanChanged(u64),
}

/// A framework MESSAGE's data: the scheduler's address and certificate,
/// `{"scheduler_url":"https://host:port","scheduler_fingerprint":"sha256:<hex>"}`, or a
/// nudge, `{"plan_version":N}`. Anything else is refused with the reason (never the data
/// itself, which is not ours to log).
pub fn message(data: &[u8]) -> Result<Signal, String> {
    if data.len() > MAX_ANNOUNCEMENT {
        return Err(format!(
            "{} bytes, more than the {MAX_ANNOUNCEMENT} an address needs",
            data.len()
        ));
    }
    let value: serde_json::Value =
        serde_json::from_slice(data).map_err(|e| format!("not JSON: {e}"))?;
    if let Some(v) = value.get(env::NUDGE_PLAN_VERSION) {
        return v.as_u64().map(Signal::PlanChanged).ok_or(format!(
            "{:?} is not a plan version (a whole number)",
            env::NUDGE_PLAN_VERSION
        ));
    }
    let field = |name: &str| {
        value
            .get(name)
            .and_then(|u| u.as_str())
            .ok_or(format!("no {name:?} string in it"))
    };
    let url = field(env::ANNOUNCED_SCHEDULER_URL)?;
    let pin = field(env::ANNOUNCED_FINGERPRINT)?;
    Endpoint::new(url, pin).map(Signal::Moved)
}

/// What a call that met another certificate than the pinned one leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mismatch {
    /// Retry as for an unreachable scheduler: a MESSAGE may bring its new certificate.
    Wait,
    /// Fail the node.
    Fail,
}

/// How long another certificate is waited through: [`PIN_GRACE`] when a call with this pin
/// has succeeded, else `new_pin_grace` ([`NEW_PIN_GRACE`] unless tests shorten it).
pub fn pin_grace(worked: bool, new_pin_grace: Duration) -> Duration {
    if worked {
        PIN_GRACE
    } else {
        new_pin_grace
    }
}

/// `since`: how long calls have met another certificate; `grace`: from [`pin_grace`].
pub fn on_mismatch(grace: Duration, since: Duration) -> Mismatch {
    if since < grace {
        Mismatch::Wait
    } else {
        Mismatch::Fail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PIN: &str = "sha256:0000000000000000000000000000000000000000000000000000000000000000";

    fn data(url: &str, pin: &str) -> Vec<u8> {
        serde_json::json!({"scheduler_url": url, "scheduler_fingerprint": pin})
            .to_string()
            .into_bytes()
    }

    fn announced(data: &[u8]) -> Result<Endpoint, String> {
        match message(data)? {
            Signal::Moved(e) => Ok(e),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn announcements_are_checked() {
        let ok = announced(&data("https://10.0.0.7:31005/", PIN)).unwrap();
        assert_eq!(ok.url, "https://10.0.0.7:31005");
        assert_eq!(ok.pin.to_string(), PIN);
        let v6 = announced(&data("https://[::1]:8080", PIN)).unwrap();
        assert_eq!(v6.url, "https://[::1]:8080");
        assert_eq!(
            message(br#"{"plan_version":9007199254740991}"#),
            Ok(Signal::PlanChanged(9_007_199_254_740_991))
        );
        for bad in [&br#"{"plan_version":-1}"#[..], br#"{"plan_version":"7"}"#] {
            let e = message(bad).unwrap_err();
            assert!(e.contains("not a plan version"), "{e}");
        }
        for (bad, why) in [
            (b"not json".to_vec(), "not JSON"),
            (br#"{"url":"https://a:1"}"#.to_vec(), "no \"scheduler_url\""),
            (
                br#"{"scheduler_url":"https://a:1"}"#.to_vec(),
                "no \"scheduler_fingerprint\"",
            ),
            (data("http://a:1", PIN), "plain http://"),
            (data("ftp://a:1", PIN), "not an https://"),
            (data("https://", PIN), "host:port"),
            (data("https://a:1/api", PIN), "host:port"),
            (data("https://u:p@a:1", PIN), "host:port"),
            (data("https://a:1", "md5:00"), "fingerprint"),
        ] {
            let e = announced(&bad).unwrap_err();
            assert!(e.contains(why), "{e} for {}", String::from_utf8_lossy(&bad));
        }
        let huge = vec![b' '; MAX_ANNOUNCEMENT + 1];
        assert!(announced(&huge).unwrap_err().contains("bytes"));
    }

    #[test]
    fn another_certificate_is_waited_through_longer_once_the_pin_worked_and_not_forever() {
        let minute = Duration::from_secs(60);
        let new = pin_grace(false, NEW_PIN_GRACE);
        assert_eq!(new, NEW_PIN_GRACE);
        assert_eq!(on_mismatch(new, Duration::ZERO), Mismatch::Wait);
        assert_eq!(on_mismatch(new, minute), Mismatch::Wait);
        assert_eq!(on_mismatch(new, NEW_PIN_GRACE), Mismatch::Fail);
        let worked = pin_grace(true, NEW_PIN_GRACE);
        assert_eq!(on_mismatch(worked, NEW_PIN_GRACE), Mismatch::Wait);
        assert_eq!(on_mismatch(worked, PIN_GRACE), Mismatch::Fail);
        assert!(NEW_PIN_GRACE < PIN_GRACE);
    }
}
