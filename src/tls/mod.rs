//! TLS pieces both binaries share: certificate fingerprints, a verifier that accepts only
//! pinned leaf certificates, and a ureq agent that takes any rustls verifier (ureq alone
//! offers public roots or no verification, and neither fits a self-signed peer). The
//! scheduler adds its self-signed certificate maker (`selfsigned.rs`).
//!
//! Pinning, not a CA chain, is how the executor trusts the scheduler: the scheduler's
//! certificate is made at start and its SHA-256 reaches the executor through Mesos
//! (`TaskInfo.data`, the re-announce message), which the executor already trusts.

mod connector;
mod fingerprint;
mod pin;
#[cfg(feature = "scheduler")]
pub mod selfsigned;

use std::sync::Arc;

pub use connector::{agent, agent_over};
pub use fingerprint::{Fingerprint, FingerprintError};
pub use pin::{refused_certificate, AnyCertificate, Checked, LeafCheck, PinnedVerifier, Pins};

/// The one crypto provider of the crate: ring, named here because neither ureq nor rustls is
/// built with a default one. AES-128-GCM with SHA-256 comes first in each protocol version
/// (ring's order starts with AES-256-GCM with SHA-384): a handshake runs about twenty HMACs
/// of its hash, server CPUs of recent years have SHA-256 instructions (AMD since Zen, Intel
/// since Ice Lake; ring uses them) but not SHA-512 ones, and at 10,000 executors the
/// scheduler makes a handshake for nearly every report. On such a CPU, SHA-384 in software
/// was 17% of a TLS 1.3 handshake's CPU, and a third of a resumed TLS 1.2 one's (49 against
/// 35 us on the scheduler's side). The other suites keep ring's order.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    use rustls::CipherSuite as S;
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites.sort_by_key(|s| {
        !matches!(
            s.suite(),
            S::TLS13_AES_128_GCM_SHA256
                | S::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                | S::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        )
    });
    Arc::new(provider)
}

/// The executor's client configuration toward the scheduler: TLS 1.2 only, trusting what
/// `verifier` accepts. An executor opens a new connection for each report and plan request
/// (it holds none while it waits), so at 10,000 executors the scheduler makes a handshake
/// for nearly every request. Resumed, a TLS 1.3 handshake still runs an X25519 exchange on
/// each side (rustls offers only `psk_dhe_ke`), and TLS 1.2's abbreviated one runs none:
/// on the static scheduler 35 us of CPU against 194 us, and on the executor 26 against
/// 125 (in-memory handshakes, musl builds with the release profile). Full handshakes are
/// ECDHE as in TLS 1.3, and the suites are the AEAD ones rustls has (no CBC, no RSA key
/// exchange, no renegotiation, the extended master secret on).
///
/// The cost: a resumed TLS 1.2 session has no key exchange of its own, so its traffic is as
/// safe as the session's master secret, which the executor holds and the scheduler's ticket
/// (its key rotated every 6 hours, in memory only) carries. So the executor starts a new
/// session with a full handshake every hour (`executor/src/node/api.rs`,
/// `SESSION_MAX_AGE`): a later theft of either process's memory opens at most the last hour
/// of one executor's recorded traffic, and what it holds (the plan's passwords, the
/// executor's own secret) is on that host or in that process already.
pub fn executor_client_config(
    verifier: Arc<dyn rustls::client::danger::ServerCertVerifier>,
) -> Arc<rustls::ClientConfig> {
    config_of(&[&rustls::version::TLS12], verifier)
}

/// A client configuration that trusts what `verifier` accepts, and nothing else.
pub fn client_config(
    verifier: Arc<dyn rustls::client::danger::ServerCertVerifier>,
) -> Arc<rustls::ClientConfig> {
    config_of(rustls::DEFAULT_VERSIONS, verifier)
}

/// A client configuration of `versions` that trusts what `verifier` accepts.
fn config_of(
    versions: &[&'static rustls::SupportedProtocolVersion],
    verifier: Arc<dyn rustls::client::danger::ServerCertVerifier>,
) -> Arc<rustls::ClientConfig> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(versions)
        // ring's default provider supports both safe protocol versions.
        .expect("ring supports TLS 1.2 and 1.3")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Arc::new(config)
}
