//! How the gateway's certificate is checked. A real gateway serves a self-signed certificate
//! that is a CA (`CA:TRUE`) and names its host, not the address it is dialled at; an ordinary
//! chain check (webpki) refuses it twice over. So exactly one of these applies:
//!
//! - pinned (`-storage.gateway.fingerprint`): the leaf must be one of the listed fingerprints
//!   (a list: a load balancer over several gateways shows several certificates);
//! - CA file (`-storage.gateway.cacert`): a leaf that is one of the file's certificates is
//!   accepted as a pin; any other must chain to them and carry the dialled name;
//! - first use (neither): the first certificate seen is trusted and kept (the caller stores
//!   it); a different one later is refused naming both fingerprints;
//! - insecure (`-storage.gateway.insecure=true`): nothing is checked.
//!
//! Every verifier still checks the handshake signatures, so only the key's holder passes.

use crate::tls::{self, Fingerprint};
use rustls::client::danger::{ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::CertificateError;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub const FINGERPRINT_FLAG: &str = "-storage.gateway.fingerprint";
pub const CA_FLAG: &str = "-storage.gateway.cacert";
pub const INSECURE_FLAG: &str = "-storage.gateway.insecure";

/// How the gateway's certificate is checked, as the flags choose it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustMode {
    Pinned(Vec<Fingerprint>),
    Ca(PathBuf),
    FirstUse,
    Insecure,
}

/// The one mode the flags give; two at once is an error naming both flags.
pub fn select(
    pins: Vec<Fingerprint>,
    ca: Option<PathBuf>,
    insecure: bool,
) -> Result<TrustMode, String> {
    let given: Vec<&str> = [
        (!pins.is_empty()).then_some(FINGERPRINT_FLAG),
        ca.is_some().then_some(CA_FLAG),
        insecure.then_some(INSECURE_FLAG),
    ]
    .into_iter()
    .flatten()
    .collect();
    if given.len() > 1 {
        return Err(format!(
            "{} each choose how the gateway's certificate is checked: give one",
            given.join(" and ")
        ));
    }
    Ok(match (ca, insecure) {
        (Some(path), _) => TrustMode::Ca(path),
        (None, true) => TrustMode::Insecure,
        (None, false) if pins.is_empty() => TrustMode::FirstUse,
        (None, false) => TrustMode::Pinned(pins),
    })
}

/// What a client checks the certificate against: the mode with what it needs at run time.
#[derive(Debug, Clone)]
pub enum Trust {
    Pinned(Vec<Fingerprint>),
    Ca(PathBuf),
    FirstUse(Arc<FirstUse>),
    Insecure,
}

impl Trust {
    /// The flag an operator changes when the certificate is refused.
    pub fn flag(&self) -> &'static str {
        match self {
            Trust::Pinned(_) | Trust::FirstUse(_) => FINGERPRINT_FLAG,
            Trust::Ca(_) => CA_FLAG,
            Trust::Insecure => INSECURE_FLAG,
        }
    }

    /// The rustls configuration for this trust; `None` when nothing is verified. `chained`
    /// tells, after a handshake, whether the certificate passed an ordinary chain check
    /// (names included) rather than a pin.
    pub fn client_config(
        &self,
        chained: Arc<AtomicBool>,
    ) -> Result<Option<Arc<rustls::ClientConfig>>, String> {
        let verifier: Arc<dyn ServerCertVerifier> = match self {
            Trust::Insecure => return Ok(None),
            Trust::Pinned(pins) => Arc::new(tls::PinnedVerifier::new(pins.clone())),
            Trust::Ca(path) => Arc::new(tls::Checked(CaVerifier::from_file(path, chained)?)),
            Trust::FirstUse(first) => Arc::new(tls::Checked(FirstUseVerifier(first.clone()))),
        };
        Ok(Some(tls::client_config(verifier)))
    }
}

/// The one line that says a certificate is trusted on first use, and how to pin it.
pub fn first_use_line(fingerprint: Fingerprint, address: &str) -> String {
    format!(
        "trusting the storage gateway's certificate {fingerprint} at {address} on first use \
         and keeping it in the state store; give {FINGERPRINT_FLAG}={fingerprint} to pin it"
    )
}

/// The certificate trusted on first use, shared by the verifier (which fills it on the first
/// handshake) and whoever keeps it in the state store.
#[derive(Debug, Default)]
pub struct FirstUse {
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    trusted: Option<Fingerprint>,
    /// Trusted in this process and not yet taken to be stored.
    unsaved: bool,
}

impl FirstUse {
    /// `known`: the fingerprint stored by an earlier run, if any.
    pub fn new(known: Option<Fingerprint>) -> FirstUse {
        FirstUse {
            seen: Mutex::new(Seen {
                trusted: known,
                unsaved: false,
            }),
        }
    }

    pub fn trusted(&self) -> Option<Fingerprint> {
        self.lock().trusted
    }

    /// The fingerprint trusted since the last call, if one was: to be stored, once.
    pub fn take_new(&self) -> Option<Fingerprint> {
        let mut seen = self.lock();
        std::mem::take(&mut seen.unsaved)
            .then_some(seen.trusted)
            .flatten()
    }

    /// Trusts `fingerprint` when nothing is yet; otherwise it must be the trusted one.
    pub fn check(&self, fingerprint: Fingerprint) -> Result<(), String> {
        let mut seen = self.lock();
        match seen.trusted {
            None => {
                seen.trusted = Some(fingerprint);
                seen.unsaved = true;
                Ok(())
            }
            Some(t) if t == fingerprint => Ok(()),
            Some(t) => Err(format!(
                "the gateway's certificate changed: it presents {fingerprint}, but {t} was \
                 trusted on first use and is kept in the state store; if the new certificate is \
                 the gateway's own, accept it with {FINGERPRINT_FLAG}={fingerprint}"
            )),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        // The state is two plain fields, whole after any panic.
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Debug)]
struct FirstUseVerifier(Arc<FirstUse>);

impl tls::LeafCheck for FirstUseVerifier {
    fn check(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.0
            .check(Fingerprint::of(end_entity.as_ref()))
            .map(|()| ServerCertVerified::assertion())
            .map_err(rustls::Error::General)
    }
}

/// `-storage.gateway.cacert`: the file's certificates as pins first (the gateway's own
/// self-signed one, which webpki would refuse as a CA used as a server certificate and for
/// naming no IP address), then as roots of an ordinary chain check.
#[derive(Debug)]
struct CaVerifier {
    pins: Vec<Fingerprint>,
    chain: Arc<WebPkiServerVerifier>,
    /// The last certificate accepted passed the chain check, not as a pin.
    chained: Arc<AtomicBool>,
}

impl CaVerifier {
    fn from_file(path: &Path, chained: Arc<AtomicBool>) -> Result<CaVerifier, String> {
        let certs = read_certificates(path)?;
        let mut roots = rustls::RootCertStore::empty();
        let mut pins = Vec::new();
        for cert in certs {
            pins.push(Fingerprint::of(cert.as_ref()));
            roots.add(cert).map_err(|e| {
                format!(
                    "{CA_FLAG}: {} holds a certificate rustls refuses: {e}",
                    path.display()
                )
            })?;
        }
        let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), tls::provider())
            .build()
            .map_err(|e| format!("{CA_FLAG}: {}: {e}", path.display()))?;
        Ok(CaVerifier {
            pins,
            chain,
            chained,
        })
    }
}

/// The certificates of a PEM file; errors name the flag and the file.
fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path)
        .map_err(|e| format!("{CA_FLAG}: cannot read {}: {e}", path.display()))?;
    let mut certs = Vec::new();
    for item in CertificateDer::pem_slice_iter(&pem) {
        match item {
            Ok(c) => certs.push(c),
            Err(e) => return Err(format!("{CA_FLAG}: {} is not PEM: {e}", path.display())),
        }
    }
    if certs.is_empty() {
        return Err(format!(
            "{CA_FLAG}: {} holds no certificate",
            path.display()
        ));
    }
    Ok(certs)
}

impl tls::LeafCheck for CaVerifier {
    fn check(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = Fingerprint::of(end_entity.as_ref());
        if self.pins.contains(&seen) {
            self.chained.store(false, Ordering::Relaxed);
            return Ok(ServerCertVerified::assertion());
        }
        let verified = self
            .chain
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .map_err(|e| {
                rustls::Error::General(chain_refusal(&e, end_entity, seen, server_name))
            })?;
        self.chained.store(true, Ordering::Relaxed);
        Ok(verified)
    }
}

/// Why a certificate that is none of the CA file's failed the chain check; a name mismatch
/// names what the certificate is for and the address dialled.
fn chain_refusal(
    e: &rustls::Error,
    cert: &CertificateDer<'_>,
    seen: Fingerprint,
    dialled: &ServerName<'_>,
) -> String {
    let name_mismatch = matches!(
        e,
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. }
        )
    );
    if !name_mismatch {
        return format!(
            "certificate {seen} is not one of {CA_FLAG}'s and does not chain to them: {e}"
        );
    }
    let mut names: Vec<String> = common_names(cert.as_ref())
        .into_iter()
        .map(|cn| format!("CN={cn}"))
        .collect();
    if let rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
        presented,
        ..
    }) = e
    {
        names.extend(presented.iter().map(|n| alt_name(n)));
    }
    format!(
        "certificate {seen} chains to {CA_FLAG} but is for {}, not for {}, the address the \
         gateway is dialled at (a common name alone does not count); dial it by a name it \
         carries, or pin it with {FINGERPRINT_FLAG}={seen}",
        if names.is_empty() {
            "no name".to_string()
        } else {
            names.join(", ")
        },
        dialled.to_str()
    )
}

/// A subject alternative name as webpki reports it (`DnsName("gw.example.com")`) in the
/// form openssl prints (`DNS:gw.example.com`).
fn alt_name(reported: &str) -> String {
    let Some((kind, rest)) = reported.split_once('(') else {
        return reported.to_string();
    };
    let value = rest.trim_end_matches(')').trim_matches('"');
    match kind {
        "DnsName" => format!("DNS:{value}"),
        "IpAddress" => format!("IP:{value}"),
        _ => format!("{kind}:{value}"),
    }
}

/// The common names in a certificate, subject last (the issuer's comes first): read by the
/// attribute's OID, for error messages only.
fn common_names(der: &[u8]) -> Vec<String> {
    const CN_OID: [u8; 5] = [0x06, 0x03, 0x55, 0x04, 0x03];
    let mut names = Vec::new();
    let mut i = 0;
    while i + CN_OID.len() + 2 <= der.len() {
        if der[i..].starts_with(&CN_OID) {
            let at = i + CN_OID.len();
            let len = usize::from(der[at + 1]);
            // Short-form lengths only: a common name is at most 64 characters.
            if len < 0x80 {
                if let Some(value) = der.get(at + 2..at + 2 + len) {
                    names.push(String::from_utf8_lossy(value).into_owned());
                }
            }
            i = at;
        } else {
            i += 1;
        }
    }
    // Issuer and subject: keep the subject's only.
    if names.len() > 1 {
        names.drain(..names.len() - 1);
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    const SELF_SIGNED: &str = include_str!("testdata/gateway-selfsigned.pem");
    const SITE_CA: &str = include_str!("testdata/site-ca.pem");
    const BY_SITE_CA: &str = include_str!("testdata/gateway-by-site-ca.pem");

    fn der(pem: &str) -> CertificateDer<'static> {
        CertificateDer::pem_slice_iter(pem.as_bytes())
            .next()
            .and_then(Result::ok)
            .expect("a certificate in the fixture")
    }

    fn chained() -> Arc<AtomicBool> {
        Arc::new(AtomicBool::new(false))
    }

    fn fp(n: u8) -> Fingerprint {
        Fingerprint::of(&[n])
    }

    fn file(name: &str, pem: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gw-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(name);
        std::fs::write(&path, pem).expect("write PEM");
        path
    }

    fn verify(v: &dyn tls::LeafCheck, cert: &str, name: &str) -> Result<(), String> {
        let name = ServerName::try_from(name.to_string()).expect("server name");
        // Inside every fixture's validity (2026 to 2126).
        let now = UnixTime::since_unix_epoch(std::time::Duration::from_secs(1_900_000_000));
        v.check(&der(cert), &[], &name, &[], now)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn one_mode_applies_and_two_name_both_flags() {
        assert_eq!(select(vec![], None, false), Ok(TrustMode::FirstUse));
        assert_eq!(select(vec![], None, true), Ok(TrustMode::Insecure));
        assert_eq!(
            select(vec![fp(1), fp(2)], None, false),
            Ok(TrustMode::Pinned(vec![fp(1), fp(2)]))
        );
        assert_eq!(
            select(vec![], Some("ca.pem".into()), false),
            Ok(TrustMode::Ca("ca.pem".into()))
        );
        let e = select(vec![fp(1)], Some("ca.pem".into()), false).unwrap_err();
        assert!(e.contains(FINGERPRINT_FLAG) && e.contains(CA_FLAG), "{e}");
        let e = select(vec![], Some("ca.pem".into()), true).unwrap_err();
        assert!(e.contains(CA_FLAG) && e.contains(INSECURE_FLAG), "{e}");
        let e = select(vec![fp(1)], None, true).unwrap_err();
        assert!(
            e.contains(FINGERPRINT_FLAG) && e.contains(INSECURE_FLAG),
            "{e}"
        );
    }

    #[test]
    fn first_use_trusts_the_first_and_refuses_another_naming_both_and_the_flag() {
        let first = FirstUse::new(None);
        assert_eq!(first.check(fp(1)), Ok(()));
        assert_eq!(first.take_new(), Some(fp(1)));
        assert_eq!(first.take_new(), None, "taken once");
        assert_eq!(first.check(fp(1)), Ok(()));
        let e = first.check(fp(2)).unwrap_err();
        assert!(
            e.contains(&fp(1).to_string()) && e.contains(&fp(2).to_string()),
            "{e}"
        );
        assert!(e.contains(&format!("{FINGERPRINT_FLAG}={}", fp(2))), "{e}");
        assert_eq!(first.trusted(), Some(fp(1)));

        let stored = FirstUse::new(Some(fp(3)));
        assert!(stored.check(fp(4)).is_err());
        assert_eq!(stored.take_new(), None, "a stored fingerprint is not new");
        let v = FirstUseVerifier(Arc::new(FirstUse::new(Some(Fingerprint::of(
            der(SELF_SIGNED).as_ref(),
        )))));
        assert_eq!(verify(&v, SELF_SIGNED, "127.0.0.1"), Ok(()));
        assert!(verify(&v, SITE_CA, "127.0.0.1").is_err());
    }

    #[test]
    fn a_self_signed_ca_certificate_given_as_cacert_is_accepted_as_a_pin() {
        let v = CaVerifier::from_file(&file("gw.pem", SELF_SIGNED), chained()).expect("verifier");
        // Neither its CA flag nor the missing IP name matters: it is the certificate given.
        assert_eq!(verify(&v, SELF_SIGNED, "127.0.0.1"), Ok(()));
        assert!(
            !v.chained.load(Ordering::Relaxed),
            "a pin, which REX-Ray cannot check"
        );
        let e = verify(&v, SITE_CA, "127.0.0.1").unwrap_err();
        assert!(e.contains(CA_FLAG), "{e}");
        assert!(
            e.contains(&Fingerprint::of(der(SITE_CA).as_ref()).to_string()),
            "{e}"
        );
    }

    #[test]
    fn a_chain_is_checked_and_a_name_mismatch_names_the_names_and_the_address() {
        let v = CaVerifier::from_file(&file("site.pem", SITE_CA), chained()).expect("verifier");
        assert_eq!(verify(&v, BY_SITE_CA, "gw.example.com"), Ok(()));
        assert!(
            v.chained.load(Ordering::Relaxed),
            "a chain REX-Ray can check too"
        );
        let e = verify(&v, BY_SITE_CA, "10.1.2.3").unwrap_err();
        assert!(e.contains("CN=gw.example.com, DNS:gw.example.com"), "{e}");
        assert!(
            e.contains("gw.example.com") && e.contains("10.1.2.3"),
            "{e}"
        );
        assert!(e.contains(FINGERPRINT_FLAG), "{e}");
        // A self-signed gateway certificate that is not in the file does not chain.
        let e = verify(&v, SELF_SIGNED, "127.0.0.1").unwrap_err();
        assert!(e.contains("does not chain"), "{e}");
    }

    #[test]
    fn a_bad_ca_file_is_an_error_naming_the_flag_and_the_file() {
        for (name, text) in [("empty.pem", ""), ("key.pem", "not a certificate")] {
            let e = CaVerifier::from_file(&file(name, text), chained()).unwrap_err();
            assert!(e.contains(CA_FLAG) && e.contains(name), "{e}");
        }
        let e = CaVerifier::from_file(Path::new("/nonexistent/ca.pem"), chained()).unwrap_err();
        assert!(e.contains("cannot read /nonexistent/ca.pem"), "{e}");
    }

    #[test]
    fn the_common_name_read_is_the_subjects() {
        assert_eq!(
            common_names(der(BY_SITE_CA).as_ref()),
            vec!["gw.example.com"]
        );
        assert_eq!(
            common_names(der(SELF_SIGNED).as_ref()),
            vec!["scaleio-gateway"]
        );
        assert!(common_names(&[0x06, 0x03, 0x55, 0x04, 0x03, 0x0c]).is_empty());
    }
}
