//! A verifier that trusts listed leaf certificates and nothing else. Names and dates are not
//! checked: a pinned certificate is the peer's identity by itself (the scheduler's is made at
//! start for whatever address it is reached at; a gateway's self-signed one often names no
//! address at all). The handshake signatures still are, so only the key's holder passes.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::Fingerprint;

/// The listed leaf certificates, the only ones [`PinnedVerifier`] accepts.
#[derive(Debug)]
pub struct Pins(Vec<Fingerprint>);

pub type PinnedVerifier = Checked<Pins>;

impl PinnedVerifier {
    pub fn new(pins: Vec<Fingerprint>) -> PinnedVerifier {
        Checked(Pins(pins))
    }

    pub fn pins(&self) -> &[Fingerprint] {
        &self.0 .0
    }
}

/// What [`refused`] says between the two fingerprints.
const NOT_PINNED: &str = " is not the pinned ";

/// Whether an error's text (a TLS client's, however it wraps the verifier's error) is a
/// certificate refused by [`PinnedVerifier`], not a peer that is away.
pub fn refused_certificate(error_text: &str) -> bool {
    error_text.contains(NOT_PINNED)
}

/// The error a refused certificate gives: both fingerprints, so that an operator can tell a
/// replaced certificate from a man in the middle, and pin the new one if it is theirs.
fn refused(seen: Fingerprint, pins: &[Fingerprint]) -> rustls::Error {
    let expected: Vec<String> = pins.iter().map(ToString::to_string).collect();
    rustls::Error::General(format!(
        "certificate {seen}{NOT_PINNED}{}",
        if expected.is_empty() {
            "(none)".to_string()
        } else {
            expected.join(" or ")
        }
    ))
}

/// What a verifier of the crate decides about a peer's certificate. The handshake
/// signatures are checked the same way for all of them, by [`Checked`].
pub trait LeafCheck: std::fmt::Debug + Send + Sync {
    fn check(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error>;
}

/// Every certificate: only for a peer the operator chose not to verify
/// (`-storage.gateway.insecure=true`).
#[derive(Debug)]
pub struct AnyCertificate;

impl LeafCheck for AnyCertificate {
    fn check(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
}

/// A [`LeafCheck`] as a rustls verifier, with ring's handshake signature checks.
#[derive(Debug)]
pub struct Checked<C>(pub C);

impl LeafCheck for Pins {
    fn check(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = Fingerprint::of(end_entity.as_ref());
        if self.0.contains(&seen) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(refused(seen, &self.0))
        }
    }
}

impl<C: LeafCheck> ServerCertVerifier for Checked<C> {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.0
            .check(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        supported_schemes()
    }
}

/// The handshake signature checks of ring's provider.
fn verify_tls12_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    rustls::crypto::verify_tls12_signature(
        message,
        cert,
        dss,
        &rustls::crypto::ring::default_provider().signature_verification_algorithms,
    )
}

fn verify_tls13_signature(
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &DigitallySignedStruct,
) -> Result<HandshakeSignatureValid, rustls::Error> {
    rustls::crypto::verify_tls13_signature(
        message,
        cert,
        dss,
        &rustls::crypto::ring::default_provider().signature_verification_algorithms,
    )
}

fn supported_schemes() -> Vec<SignatureScheme> {
    rustls::crypto::ring::default_provider()
        .signature_verification_algorithms
        .supported_schemes()
}
