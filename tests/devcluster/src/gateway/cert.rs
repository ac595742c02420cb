//! The gateway's certificate, made the way a real gateway's is: self-signed, a CA
//! (`basicConstraints` critical `CA:TRUE`), its hostname as the common name and no subject
//! alternative name. A client that checks it as an ordinary server certificate fails twice
//! over (a CA used as an end entity, and no name matching the IP address it dialled), which is
//! what the framework's verifiers must cope with. The certificate can be replaced while the
//! gateway runs (a reinstalled gateway, another node behind a load balancer).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{
    ClientHello, ResolvesServerCert, ServerSessionMemoryCache, StoresServerSessions,
};
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

/// A certificate chain and key given in PEM (an operator's own, signed by a CA), served
/// leaf first.
pub fn from_pem(chain_pem: &str, key_pem: &str) -> Result<Served, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("gateway: the certificate chain is not PEM: {e}"))?;
    let Some(leaf) = chain.first().cloned() else {
        return Err("gateway: the certificate chain holds no certificate".to_string());
    };
    let private = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| format!("gateway: the key is not PEM: {e}"))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&private)
        .map_err(|e| format!("gateway: the key is unusable: {e}"))?;
    let start = chain_pem.find("-----BEGIN CERTIFICATE-----").unwrap_or(0);
    let end = chain_pem[start..]
        .find("-----END CERTIFICATE-----")
        .map_or(chain_pem.len(), |e| {
            start + e + "-----END CERTIFICATE-----\n".len()
        });
    Ok(Served {
        pem: chain_pem[start..end.min(chain_pem.len())].to_string(),
        der: leaf,
        key: Arc::new(CertifiedKey::new(chain, signer)),
    })
}

/// Hands every handshake the certificate in force at that moment, and keeps the TLS
/// sessions of that certificate only: a reinstalled gateway resumes no session of the old
/// one, so each client sees the new certificate at its next handshake.
#[derive(Debug)]
pub struct Current {
    key: RwLock<Arc<CertifiedKey>>,
    sessions: RwLock<Arc<ServerSessionMemoryCache>>,
}

const SESSIONS: usize = 256;

impl Current {
    pub fn new(served: &Served) -> Current {
        Current {
            key: RwLock::new(served.key.clone()),
            sessions: RwLock::new(ServerSessionMemoryCache::new(SESSIONS)),
        }
    }

    pub fn replace(&self, served: &Served) {
        // A poisoned lock only means a panicking writer; the values are whole Arcs anyway.
        *self.key.write().unwrap_or_else(|p| p.into_inner()) = served.key.clone();
        *self.sessions.write().unwrap_or_else(|p| p.into_inner()) =
            ServerSessionMemoryCache::new(SESSIONS);
    }

    fn sessions(&self) -> Arc<ServerSessionMemoryCache> {
        self.sessions
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.key.read().unwrap_or_else(|p| p.into_inner()).clone())
    }
}

impl StoresServerSessions for Current {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        self.sessions().put(key, value)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.sessions().get(key)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.sessions().take(key)
    }

    fn can_cache(&self) -> bool {
        true
    }
}
