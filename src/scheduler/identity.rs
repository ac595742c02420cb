//! The REST server's TLS identity: the operator's certificate and key (`-rest.tls.cert`,
//! `-rest.tls.key`), or by default a self-signed certificate made at each start for the
//! address executors use and this machine's hostname. A made key lives in memory only: in
//! the state store it would be a secret at rest, and without ZooKeeper credentials the
//! framework's znodes are world-readable. A failed-over scheduler therefore has a new
//! certificate; it tells its executors the new fingerprint with its address (`announce.rs`).

use super::flags::{Config, TlsFiles};
use crate::tls::{selfsigned, Fingerprint};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

/// A key file holds a private key, not a document.
const MAX_PEM_FILE: u64 = 1 << 20;

/// What the REST server presents, and what executors pin.
pub struct Identity {
    pub fingerprint: Fingerprint,
    pub server: Arc<rustls::ServerConfig>,
    /// The leaf certificate (DER).
    pub cert_der: Vec<u8>,
}

/// The identity the flags ask for; the error names the file or step that failed.
pub fn load(config: &Config) -> Result<Identity, String> {
    match &config.rest_tls {
        Some(files) => from_files(files),
        None => self_signed(&names(&config.rest_address, hostname().as_deref())),
    }
}

/// The operator's certificate (chain) and key, from PEM files.
pub fn from_files(files: &TlsFiles) -> Result<Identity, String> {
    let (chain, key) = read_files(files)?;
    identity(chain, key).map_err(|e| {
        format!(
            "-rest.tls.cert {} and -rest.tls.key {}: {e}",
            files.cert.display(),
            files.key.display()
        )
    })
}

/// A new self-signed certificate for `names` (DNS names or IP addresses).
pub fn self_signed(names: &[String]) -> Result<Identity, String> {
    let made = selfsigned::make(names)
        .map_err(|e| format!("cannot make the REST server's self-signed certificate: {e}"))?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.key_pkcs8().to_vec()));
    identity(vec![CertificateDer::from(made.cert_der)], key)
        .map_err(|e| format!("the REST server's self-signed certificate: {e}"))
}

fn identity(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Identity, String> {
    let cert_der = chain[0].to_vec();
    let fingerprint = Fingerprint::of(&cert_der);
    Ok(Identity {
        fingerprint,
        server: server_config(chain, key)?,
        cert_der,
    })
}

/// The names a made certificate is for: the advertised address and the hostname, once each.
fn names(rest_address: &str, hostname: Option<&str>) -> Vec<String> {
    let mut names = vec![rest_address.to_owned()];
    if let Some(h) = hostname.filter(|h| !h.is_empty() && *h != rest_address) {
        names.push(h.to_owned());
    }
    names
}

fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
}

fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<rustls::ServerConfig>, String> {
    let mut config = rustls::ServerConfig::builder_with_provider(crate::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| e.to_string())?;
    // An idle executor asks for its plan on a new connection every minute: a resumed
    // session skips the certificate and its signature. Tickets, not a session cache: the
    // scheduler keeps nothing per executor (a cache of 256 would not hold 10,000 anyway).
    config.ticketer = rustls::crypto::ring::Ticketer::new().map_err(|e| e.to_string())?;
    config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
    // One ticket a connection is all the next one uses (rustls sends 2 by default).
    config.send_tls13_tickets = 1;
    Ok(Arc::new(config))
}

type Pair = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn read_files(files: &TlsFiles) -> Result<Pair, String> {
    let key_pem = read_pem(&files.key, "-rest.tls.key", true)?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        format!(
            "-rest.tls.key {}: no PEM private key in it ({e})",
            files.key.display()
        )
    })?;
    let cert_pem = read_pem(&files.cert, "-rest.tls.cert", false)?;
    let chain = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("-rest.tls.cert {}: {e}", files.cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "-rest.tls.cert {}: no PEM certificate in it",
            files.cert.display()
        ));
    }
    Ok((chain, key))
}

/// A PEM file's bytes; a `private` one is refused when group or others may read it.
fn read_pem(path: &Path, flag: &str, private: bool) -> Result<Vec<u8>, String> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{flag} {shown}: {e}"))?;
    if !meta.is_file() || meta.len() > MAX_PEM_FILE {
        return Err(format!(
            "{flag} {shown}: not a regular file of at most {MAX_PEM_FILE} bytes"
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if private && mode & 0o077 != 0 {
        return Err(format!(
            "{flag} {shown}: group or others may read the private key (mode {mode:04o}); \
             make it readable by its owner only (chmod 600)"
        ));
    }
    std::fs::read(path).map_err(|e| format!("{flag} {shown}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(name: &str, key: &[u8], mode: u32) -> TlsFiles {
        let dir = std::env::temp_dir().join(format!("identity-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key_path = dir.join("key.pem");
        std::fs::write(&key_path, key).unwrap();
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(mode)).unwrap();
        TlsFiles {
            cert: dir.join("cert.pem"),
            key: key_path,
        }
    }

    #[test]
    fn a_key_file_others_may_read_is_refused_before_it_is_read() {
        let f = files("open", b"-----BEGIN PRIVATE KEY-----\n", 0o644);
        let e = from_files(&f).err().unwrap();
        assert!(
            e.contains("-rest.tls.key") && e.contains("group or others") && e.contains("0644"),
            "{e}"
        );
        let f = files("group", b"", 0o640);
        assert!(from_files(&f).err().unwrap().contains("group or others"));
    }

    #[test]
    fn files_without_a_key_or_a_certificate_are_named() {
        let f = files("nokey", b"not a key\n", 0o600);
        let e = from_files(&f).err().unwrap();
        assert!(
            e.contains("-rest.tls.key") && e.contains("no PEM private key"),
            "{e}"
        );
        // A real key (SEC1), no certificate file.
        let f = files("nocert", TEST_KEY, 0o600);
        let e = from_files(&f).err().unwrap();
        assert!(
            e.contains("-rest.tls.cert") && e.contains("cert.pem"),
            "{e}"
        );
        std::fs::write(&f.cert, b"no certificate here\n").unwrap();
        let e = from_files(&f).err().unwrap();
        assert!(e.contains("no PEM certificate"), "{e}");
    }

    /// A P-256 key (made with `openssl ecparam -genkey`), for the parser only.
    const TEST_KEY: &[u8] = b"-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIO/YkW5Wan+KedPYT85WKieSzkGle4KeNCmXnZ2F+GQAoAoGCCqGSM49
AwEHoUQDQgAEAHzLH0iUTf96UD5PSXOljOqDWrcWmEiAiUllpHPcGra905YEBbgG
fq8h2a+VsUwEy2ZCH5n6y7T7U9LDqJt+Kg==
-----END EC PRIVATE KEY-----
";

    #[test]
    fn a_made_certificate_names_the_address_and_the_hostname_once() {
        assert_eq!(names("10.0.0.5", Some("node-1")), ["10.0.0.5", "node-1"]);
        assert_eq!(names("node-1", Some("node-1")), ["node-1"]);
        assert_eq!(names("node-1", None), ["node-1"]);
    }

    /// Moves records between the two ends until neither has anything to send.
    fn exchange(c: &mut rustls::ClientConnection, s: &mut rustls::ServerConnection) {
        let mut wire = Vec::new();
        loop {
            wire.clear();
            c.write_tls(&mut wire).unwrap();
            let from_client = !wire.is_empty();
            s.read_tls(&mut &wire[..]).unwrap();
            s.process_new_packets().unwrap();
            wire.clear();
            s.write_tls(&mut wire).unwrap();
            let from_server = !wire.is_empty();
            c.read_tls(&mut &wire[..]).unwrap();
            c.process_new_packets().unwrap();
            if !from_client && !from_server {
                return;
            }
        }
    }

    /// The first and the second connection of one client configuration to `server`: a full
    /// handshake then a resumed one, both of `version` and `suite`.
    fn full_then_resumed(
        client: &Arc<rustls::ClientConfig>,
        server: &Arc<rustls::ServerConfig>,
        version: rustls::ProtocolVersion,
        suite: rustls::CipherSuite,
    ) -> [rustls::ClientConnection; 2] {
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let kinds = [rustls::HandshakeKind::Full, rustls::HandshakeKind::Resumed];
        kinds.map(|kind| {
            let mut c = rustls::ClientConnection::new(client.clone(), name.clone()).unwrap();
            let mut s = rustls::ServerConnection::new(server.clone()).unwrap();
            exchange(&mut c, &mut s);
            assert!(!c.is_handshaking() && !s.is_handshaking());
            assert_eq!(c.handshake_kind(), Some(kind));
            assert_eq!(c.protocol_version(), Some(version), "{kind:?}");
            let negotiated = c.negotiated_cipher_suite().map(|x| x.suite());
            assert_eq!(negotiated, Some(suite), "{kind:?}");
            c
        })
    }

    #[test]
    fn an_executor_resumes_its_tls12_session_with_aes128_and_sha256_and_no_key_exchange() {
        let id = self_signed(&["127.0.0.1".to_string()]).unwrap();
        let pins = crate::tls::PinnedVerifier::new(vec![id.fingerprint]);
        let client = crate::tls::executor_client_config(Arc::new(pins));
        let [first, second] = full_then_resumed(
            &client,
            &id.server,
            rustls::ProtocolVersion::TLSv1_2,
            rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        );
        // The full handshake's ECDHE, and none on resumption: what makes it cheap.
        assert_eq!(
            first.negotiated_key_exchange_group().map(|g| g.name()),
            Some(rustls::NamedGroup::X25519)
        );
        assert_eq!(
            second.negotiated_key_exchange_group().map(|g| g.name()),
            None
        );
    }

    #[test]
    fn an_operator_client_agrees_on_tls13_with_aes128_and_sha256_and_resumes() {
        let id = self_signed(&["127.0.0.1".to_string()]).unwrap();
        let pins = crate::tls::PinnedVerifier::new(vec![id.fingerprint]);
        let client = crate::tls::client_config(Arc::new(pins));
        full_then_resumed(
            &client,
            &id.server,
            rustls::ProtocolVersion::TLSv1_3,
            rustls::CipherSuite::TLS13_AES_128_GCM_SHA256,
        );
    }
}
