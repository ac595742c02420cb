//! The gateway's certificate, made the way a real gateway's is: self-signed, a CA
//! (`basicConstraints` critical `CA:TRUE`), its hostname as the common name and no subject
//! alternative name. A client that checks it as an ordinary server certificate fails twice
//! over (a CA used as an end entity, and no name matching the IP address it dialled), which is
//! what the framework's verifiers must cope with. The certificate can be replaced while the
//! gateway runs (a reinstalled gateway, another node behind a load balancer).

use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::sync::{Arc, RwLock};

/// A certificate and its PEM, as served.
#[derive(Clone)]
pub struct Served {
    pub pem: String,
    pub der: CertificateDer<'static>,
    key: Arc<CertifiedKey>,
}

/// A new self-signed CA certificate for `hostname`, with a new key.
pub fn make(hostname: &str) -> Result<Served, String> {
    let key_pair =
        rcgen::KeyPair::generate().map_err(|e| format!("gateway: cannot generate a key: {e}"))?;
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, hostname);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let cert = params
        .self_signed(&key_pair)
        .map_err(|e| format!("gateway: cannot make a self-signed certificate: {e}"))?;
    let der = cert.der().clone();
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_pair.serialize_der()));
    let signer = rustls::crypto::ring::sign::any_supported_type(&private)
        .map_err(|e| format!("gateway: the certificate's key is unusable: {e}"))?;
    Ok(Served {
        pem: cert.pem(),
        der: der.clone(),
        key: Arc::new(CertifiedKey::new(vec![der], signer)),
    })
}

/// Hands every handshake the certificate in force at that moment.
#[derive(Debug)]
pub struct Current(RwLock<Arc<CertifiedKey>>);

impl Current {
    pub fn new(served: &Served) -> Current {
        Current(RwLock::new(served.key.clone()))
    }

    pub fn replace(&self, served: &Served) {
        // A poisoned lock only means a panicking writer; the value is a whole Arc either way.
        let mut slot = self.0.write().unwrap_or_else(|p| p.into_inner());
        *slot = served.key.clone();
    }
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|p| p.into_inner()).clone())
    }
}
