//! A certificate's identity as operators see it: `sha256:` and the lowercase hex of the
//! SHA-256 of its DER (what `openssl x509 -noout -fingerprint -sha256` prints, without colons).

use std::fmt;

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint([u8; 32]);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FingerprintError {
    given: String,
}

impl fmt::Display for FingerprintError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a certificate fingerprint: expected sha256: and 64 hex digits (colons allowed)",
            self.given
        )
    }
}

impl std::error::Error for FingerprintError {}

impl Fingerprint {
    /// The fingerprint of a certificate in DER.
    pub fn of(der: &[u8]) -> Fingerprint {
        Fingerprint(crate::sha256::digest(der))
    }

    /// `sha256:<hex>` or bare hex; upper or lower case; colons between bytes allowed, as
    /// openssl prints them.
    pub fn parse(text: &str) -> Result<Fingerprint, FingerprintError> {
        let err = || FingerprintError {
            given: text.chars().take(120).collect(),
        };
        let t = text.trim();
        let hex = t
            .strip_prefix("sha256:")
            .or_else(|| t.strip_prefix("SHA256:"))
            .unwrap_or(t);
        let digits: Vec<u8> = hex.bytes().filter(|b| *b != b':').collect();
        if digits.len() != 64 {
            return Err(err());
        }
        let mut out = [0u8; 32];
        for (i, pair) in digits.chunks(2).enumerate() {
            let hi = (pair[0] as char).to_digit(16).ok_or_else(err)?;
            let lo = (pair[1] as char).to_digit(16).ok_or_else(err)?;
            out[i] = (hi * 16 + lo) as u8;
        }
        Ok(Fingerprint(out))
    }

    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for Fingerprint {
    type Err = FingerprintError;
    fn from_str(s: &str) -> Result<Fingerprint, FingerprintError> {
        Fingerprint::parse(s)
    }
}

impl serde::Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Fingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Fingerprint, D::Error> {
        let text = String::deserialize(d)?;
        Fingerprint::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_of_empty_input_prints_as_sha256_prints_it() {
        assert_eq!(
            Fingerprint::of(b"").to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn openssl_and_bare_forms_parse_to_the_same_fingerprint() {
        let f = Fingerprint::of(b"x");
        let text = f.to_string();
        let hex = text.trim_start_matches("sha256:");
        let colons: Vec<String> = hex
            .as_bytes()
            .chunks(2)
            .map(|c| String::from_utf8_lossy(c).to_uppercase())
            .collect();
        assert_eq!(Fingerprint::parse(hex).unwrap(), f);
        assert_eq!(
            Fingerprint::parse(&format!("SHA256:{}", colons.join(":"))).unwrap(),
            f
        );
        assert_eq!(serde_json::to_string(&f).unwrap(), format!("\"{text}\""));
        assert_eq!(
            serde_json::from_str::<Fingerprint>(&format!("\"{text}\"")).unwrap(),
            f
        );
    }

    #[test]
    fn a_short_or_non_hex_fingerprint_is_refused_naming_it() {
        for bad in [
            "sha256:abc",
            "md5:00",
            &format!("sha256:{}", "g".repeat(64)),
        ] {
            let e = Fingerprint::parse(bad).unwrap_err().to_string();
            assert!(e.contains(bad) && e.contains("64 hex digits"), "{e}");
        }
    }
}
