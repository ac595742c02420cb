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
/// built with a default one. Of TLS 1.3's suites, AES-128-GCM with SHA-256 comes first
/// (ring's order starts with AES-256-GCM with SHA-384): a handshake runs about twenty HMACs
/// of its hash, server CPUs of recent years have SHA-256 instructions (AMD since Zen, Intel
/// since Ice Lake; ring uses them) but not SHA-512 ones, and at 10,000 executors the
/// scheduler makes a handshake for nearly every report. On such a CPU, SHA-384 in software
/// was 17% of a handshake's CPU. The other suites keep ring's order.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    let mut provider = rustls::crypto::ring::default_provider();
    provider
        .cipher_suites
        .sort_by_key(|s| s.suite() != rustls::CipherSuite::TLS13_AES_128_GCM_SHA256);
    Arc::new(provider)
}

/// A client configuration that trusts what `verifier` accepts, and nothing else.
pub fn client_config(
    verifier: Arc<dyn rustls::client::danger::ServerCertVerifier>,
) -> Arc<rustls::ClientConfig> {
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        // ring's default provider supports both safe protocol versions.
        .expect("ring supports TLS 1.2 and 1.3")
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Arc::new(config)
}
