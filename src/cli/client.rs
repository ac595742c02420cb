//! The one HTTPS request of a `ctl` command: the scheduler's certificate pinned (or checked
//! against a CA file), the token in the `Authorization` header of writes only.

use super::{Invocation, Request, Trust};
use crate::gateway::trust as gateway_trust;
use std::io::Read;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Answers past this size are cut: `/api/events` and `/api/plan` stay far below it.
const MAX_BODY: u64 = 4 << 20;
/// An operator waits for an answer, not for ever: a write is answered once saved.
const TIMEOUT: Duration = Duration::from_secs(60);

/// Why no answer came.
#[derive(Debug)]
pub enum Failure {
    /// A file the command names is wrong (the CA file).
    Usage(String),
    /// The scheduler was not reached or its certificate was refused.
    Unreached(String),
}

/// Sends the request; the HTTP status and the body.
pub fn send(inv: &Invocation) -> Result<(u16, Vec<u8>), Failure> {
    let tls = client_config(&inv.trust)?;
    let config = ureq::Agent::config_builder()
        // Refusals carry the scheduler's reason in their body: read them.
        .http_status_as_error(false)
        .max_redirects(0)
        .proxy(None)
        .user_agent(concat!("storage-scheduler-ctl/", env!("CARGO_PKG_VERSION")))
        .timeout_connect(Some(Duration::from_secs(10)))
        .timeout_global(Some(TIMEOUT))
        .build();
    let agent = crate::tls::agent(config, tls);
    let result = match &inv.request {
        Request::Status => agent.get(&format!("{}/api/plan", inv.url)).call(),
        Request::Events => agent.get(&format!("{}/api/events", inv.url)).call(),
        Request::Write(path) => {
            let token = inv.token.as_ref().map(|t| t.expose()).unwrap_or_default();
            agent
                .post(&format!("{}{path}", inv.url))
                .header("Authorization", &format!("Bearer {token}"))
                .send_empty()
        }
    };
    let response = result.map_err(|e| Failure::Unreached(e.to_string()))?;
    let status = response.status().as_u16();
    let mut body = Vec::new();
    response
        .into_body()
        .into_reader()
        .take(MAX_BODY)
        .read_to_end(&mut body)
        .map_err(|e| Failure::Unreached(format!("reading the answer: {e}")))?;
    Ok((status, body))
}

/// The TLS configuration for `trust`. A CA file is read as the gateway's is: a certificate
/// in it that is the scheduler's own is a pin, any other is a root of an ordinary check.
fn client_config(trust: &Trust) -> Result<Arc<rustls::ClientConfig>, Failure> {
    let verifier: Arc<dyn rustls::client::danger::ServerCertVerifier> = match trust {
        Trust::Pinned(pin) => Arc::new(crate::tls::PinnedVerifier::new(vec![*pin])),
        Trust::CaFile(path) => {
            let t = gateway_trust::Trust::Ca(path.clone());
            return t
                .client_config(Arc::new(AtomicBool::new(false)))
                .map_err(|e| Failure::Usage(e.replace(gateway_trust::CA_FLAG, "-cacert")))?
                .ok_or_else(|| Failure::Usage("-cacert: no verifier".into()));
        }
    };
    Ok(crate::tls::client_config(verifier))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_ca_file_is_a_usage_error_naming_the_option_and_the_file() {
        let dir = std::env::temp_dir().join(format!("ctl-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("missing.pem");
        let not_pem = dir.join("not.pem");
        std::fs::write(&not_pem, "hello\n").unwrap();
        for (path, says) in [
            (&missing, "cannot read"),
            (&not_pem, "holds no certificate"),
        ] {
            match client_config(&Trust::CaFile(path.clone())) {
                Err(Failure::Usage(e)) => {
                    assert!(e.starts_with("-cacert: ") && e.contains(says), "{e}");
                    assert!(e.contains(&path.display().to_string()), "{e}");
                    assert!(!e.contains("gateway"), "{e}");
                }
                other => panic!("{path:?}: {other:?}"),
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
