//! The scheduler's own certificate: ECDSA P-256, self-signed, made at start with ring and
//! written by hand in DER (an X.509 crate would cost more binary than these few encoders).
//! Executors pin its SHA-256, so its names only matter to people pointing curl at it.

use std::fmt;
use std::net::IpAddr;

use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_ASN1_SIGNING};

/// A certificate and its private key (PKCS#8). The key lives in memory only.
pub struct SelfSigned {
    pub cert_der: Vec<u8>,
    key_pkcs8: Vec<u8>,
}

impl SelfSigned {
    pub fn key_pkcs8(&self) -> &[u8] {
        &self.key_pkcs8
    }
}

impl fmt::Debug for SelfSigned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelfSigned")
            .field("fingerprint", &super::Fingerprint::of(&self.cert_der))
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
pub struct MakeError(&'static str);

impl fmt::Display for MakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot make the TLS certificate: {}", self.0)
    }
}

impl std::error::Error for MakeError {}

const ECDSA_WITH_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const PRIME256V1: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];

/// A certificate for `names` (host names and IP addresses; the first is also the subject's
/// common name), valid from an hour ago (agents' clocks drift) with no expiry
/// (`99991231235959Z`, RFC 5280 4.1.2.5): the key is replaced at every start instead.
pub fn make(names: &[String]) -> Result<SelfSigned, MakeError> {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
        .map_err(|_| MakeError("no key from the system's random source"))?;
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng)
        .map_err(|_| MakeError("the new key does not load"))?;
    let mut serial = [0u8; 16];
    ring::rand::SecureRandom::fill(&rng, &mut serial)
        .map_err(|_| MakeError("no serial number from the system's random source"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| MakeError("the clock is before 1970"))?
        .as_secs();
    let tbs = tbs_certificate(
        names,
        &serial,
        now.saturating_sub(3600),
        key.public_key().as_ref(),
    );
    let signature = key
        .sign(&rng, &tbs)
        .map_err(|_| MakeError("signing failed"))?;
    let cert_der = seq(&[&tbs, &algorithm(), &bit_string(signature.as_ref())]);
    Ok(SelfSigned {
        cert_der,
        key_pkcs8: pkcs8.as_ref().to_vec(),
    })
}

fn tbs_certificate(names: &[String], serial: &[u8], not_before: u64, public: &[u8]) -> Vec<u8> {
    let common = names
        .first()
        .map(String::as_str)
        .unwrap_or("storage-scheduler");
    let name = seq(&[&tlv(
        0x31,
        &seq(&[&oid(COMMON_NAME), &tlv(0x0c, common.as_bytes())]),
    )]);
    let validity = seq(&[
        &tlv(0x17, utc_time(not_before).as_bytes()),
        &tlv(0x18, b"99991231235959Z"),
    ]);
    let key_info = seq(&[
        &seq(&[&oid(EC_PUBLIC_KEY), &oid(PRIME256V1)]),
        &bit_string(public),
    ]);
    let version = tlv(0xa0, &integer(&[2]));
    let extensions = tlv(
        0xa3,
        &seq(&[&seq(&[
            &oid(SUBJECT_ALT_NAME),
            &tlv(0x04, &alt_names(names)),
        ])]),
    );
    seq(&[
        &version,
        &integer(serial),
        &algorithm(),
        &name,
        &validity,
        &name,
        &key_info,
        &extensions,
    ])
}

/// dNSName for host names, iPAddress for addresses; anything else (a name with characters a
/// host name cannot have) is left out rather than make an invalid certificate.
fn alt_names(names: &[String]) -> Vec<u8> {
    let mut entries = Vec::new();
    for n in names {
        match n.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) => entries.push(tlv(0x87, &a.octets())),
            Ok(IpAddr::V6(a)) => entries.push(tlv(0x87, &a.octets())),
            Err(_) if is_host_name(n) => entries.push(tlv(0x82, n.as_bytes())),
            Err(_) => {}
        }
    }
    let parts: Vec<&[u8]> = entries.iter().map(Vec::as_slice).collect();
    seq(&parts)
}

fn is_host_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
}

fn algorithm() -> Vec<u8> {
    seq(&[&oid(ECDSA_WITH_SHA256)])
}

fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let len = content.len();
    if len < 0x80 {
        out.push(len as u8);
    } else {
        let bytes = len.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

fn seq(parts: &[&[u8]]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

fn oid(encoded: &[u8]) -> Vec<u8> {
    tlv(0x06, encoded)
}

fn bit_string(bytes: &[u8]) -> Vec<u8> {
    let mut content = vec![0u8];
    content.extend_from_slice(bytes);
    tlv(0x03, &content)
}

/// A positive INTEGER from big-endian bytes.
fn integer(bytes: &[u8]) -> Vec<u8> {
    let skip = bytes
        .iter()
        .take_while(|b| **b == 0)
        .count()
        .min(bytes.len() - 1);
    let mut content = Vec::new();
    if bytes[skip] & 0x80 != 0 {
        content.push(0);
    }
    content.extend_from_slice(&bytes[skip..]);
    tlv(0x02, &content)
}

/// UTCTime `YYMMDDHHMMSSZ` (years 1950-2049, as RFC 5280 requires for UTCTime).
fn utc_time(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{:02}{:02}{:02}{:02}{:02}{:02}Z",
        year % 100,
        month,
        day,
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_time_matches_known_dates() {
        assert_eq!(utc_time(0), "700101000000Z");
        // 2026-11-25 23:59:59 and a leap day.
        assert_eq!(utc_time(1_795_651_199), "261125235959Z");
        assert_eq!(utc_time(951_782_400), "000229000000Z");
    }

    #[test]
    fn long_contents_get_a_long_form_length() {
        assert_eq!(&tlv(0x04, &[0; 200])[..3], &[0x04, 0x81, 200]);
        assert_eq!(&tlv(0x04, &[0; 300])[..4], &[0x04, 0x82, 0x01, 0x2c]);
        assert_eq!(integer(&[0, 0, 0x80]), vec![0x02, 0x02, 0x00, 0x80]);
    }

    #[test]
    fn two_certificates_never_share_a_key() {
        let a = make(&["a".into()]).unwrap();
        let b = make(&["a".into()]).unwrap();
        assert_ne!(a.cert_der, b.cert_der);
        assert_ne!(a.key_pkcs8(), b.key_pkcs8());
        assert!(!format!("{a:?}").contains("key"), "{a:?}");
    }
}
