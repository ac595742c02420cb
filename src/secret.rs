//! Secrets (the gateway password, per-executor tokens) in a type that cannot leak by accident,
//! the digest kept of an executor's token, and the masking of credentials in URIs.
//!
//! `Debug` and `Display` print `<redacted>`, so a secret inside a logged struct stays hidden;
//! `Serialize` is deliberately not implemented, so a secret cannot end up in `/api/state` or
//! in the store without someone writing `expose()` on purpose.

use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Bytes of randomness in a token made by [`random_token`] (hex-encoded: twice as many chars).
pub const TOKEN_BYTES: usize = 32;

const REDACTED: &str = "<redacted>";

#[derive(Clone, Default)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The only way to read the value: every call site is a place where it may leave the
    /// process (an HTTP header, a child's environment), which is easy to audit with grep.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Compares without an early exit on the first differing byte, so the time taken does not
    /// tell an attacker how much of a guessed token was right. The length is not hidden: tokens
    /// have a fixed length, and a password's length is not what a remote timing probe learns.
    pub fn ct_eq(&self, other: &[u8]) -> bool {
        Secret::ct_eq_bytes(self.0.as_bytes(), other)
    }

    fn ct_eq_bytes(mine: &[u8], other: &[u8]) -> bool {
        if mine.len() != other.len() {
            return false;
        }
        let diff = mine
            .iter()
            .zip(other)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        // black_box keeps the optimiser from turning the fold back into a short-circuit compare.
        std::hint::black_box(diff) == 0
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Secret {
        Secret(value.to_owned())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        // Best effort: a freed buffer still holding the password would show up in a core dump.
        let mut bytes = std::mem::take(&mut self.0).into_bytes();
        bytes.fill(0);
        std::hint::black_box(&bytes);
    }
}

/// A fresh random token: [`TOKEN_BYTES`] bytes from `/dev/urandom`, lower-case hex.
pub fn random_token() -> io::Result<Secret> {
    random_token_from(Path::new("/dev/urandom"))
}

/// [`random_token`] reading from `source`; exists so the failure path can be tested.
pub fn random_token_from(source: &Path) -> io::Result<Secret> {
    let context = |e: io::Error| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot read random bytes for a token from {}: {e}",
                source.display()
            ),
        )
    };
    let mut raw = [0u8; TOKEN_BYTES];
    File::open(source)
        .and_then(|mut f| f.read_exact(&mut raw))
        .map_err(context)?;
    let token = Secret(lower_hex(&raw));
    raw.fill(0);
    Ok(token)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn lower_hex(bytes: &[u8]) -> String {
    let mut hex = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        hex.push(char::from(HEX[usize::from(b >> 4)]));
        hex.push(char::from(HEX[usize::from(b & 0x0f)]));
    }
    hex
}

/// What is kept of an executor's secret: its SHA-256, never the secret. The secret itself
/// leaves the scheduler once, in its launch's `TaskInfo.data`; the store, the dispatcher and
/// the REST side's early check hold and compare digests only, so a copy of the state (a
/// backup, a znode read without credentials) hands no one an executor's credentials.
/// The secrets are 32 random bytes: no salt or slow hash is needed against guessing.
/// Like [`Secret`], it prints redacted and has no `Serialize`.
#[cfg(feature = "scheduler")]
#[derive(Clone, Copy)]
pub struct Token([u8; TOKEN_BYTES]);

/// The bytes of lower-case `hex` of exactly [`TOKEN_BYTES`] bytes.
#[cfg(feature = "scheduler")]
fn hex_bytes(hex: &[u8]) -> Option<[u8; TOKEN_BYTES]> {
    if hex.len() != TOKEN_BYTES * 2 {
        return None;
    }
    let digit = |c: u8| HEX.iter().position(|h| *h == c).map(|d| d as u8);
    let mut out = [0u8; TOKEN_BYTES];
    for (o, pair) in out.iter_mut().zip(hex.chunks_exact(2)) {
        *o = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(feature = "scheduler")]
impl Token {
    /// The digest of `secret`.
    pub fn new(secret: &Secret) -> Token {
        Token(crate::sha256::digest(secret.expose().as_bytes()))
    }

    /// A digest as [`Token::digest_hex`] wrote it; `None` when `hex` is not one.
    pub fn from_digest_hex(hex: &str) -> Option<Token> {
        hex_bytes(hex.as_bytes()).map(Token)
    }

    /// The digest, lower-case hex: what the store keeps.
    pub fn digest_hex(&self) -> String {
        lower_hex(&self.0)
    }

    /// The digest's bytes (for the REST side's index).
    pub fn digest(&self) -> &[u8; TOKEN_BYTES] {
        &self.0
    }

    /// Whether this is the digest of the empty secret, which must never authenticate.
    pub fn is_empty(&self) -> bool {
        self.0 == crate::sha256::digest(b"")
    }

    /// Whether `presented` is the secret of this digest; the digests are compared without an
    /// early exit, as [`Secret::ct_eq`].
    pub fn matches(&self, presented: &Secret) -> bool {
        Secret::ct_eq_bytes(
            &self.0,
            &crate::sha256::digest(presented.expose().as_bytes()),
        )
    }
}

#[cfg(feature = "scheduler")]
impl From<&str> for Token {
    fn from(text: &str) -> Token {
        Token::new(&Secret::new(text))
    }
}

/// Constant time, as [`Token::matches`]: models holding tokens are compared in tests and in
/// the store's content checks, never on an attacker's clock, but the rule stays one rule.
#[cfg(feature = "scheduler")]
impl PartialEq for Token {
    fn eq(&self, other: &Token) -> bool {
        Secret::ct_eq_bytes(&self.0, &other.0)
    }
}

#[cfg(feature = "scheduler")]
impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// `text` with the password of every URI in it masked (`scheme://user:***@host`): the one
/// place URIs are masked, for logs, errors and `/api/state`. A URI's authority runs from its
/// `://` to the first `/`, `?`, `#`, quote or white space; its credentials end at the last `@`
/// in it. A user without a password is left as it is.
pub fn mask_uri_credentials(text: &str) -> std::borrow::Cow<'_, str> {
    let mut out = String::new();
    let mut copied = 0;
    let mut from = 0;
    while let Some(at) = text[from..].find("://") {
        let start = from + at + 3;
        let rest = &text[start..];
        let end = rest
            .find(|c: char| {
                matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>') || c.is_whitespace()
            })
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        from = start + end;
        let Some(userinfo_end) = authority.rfind('@') else {
            continue;
        };
        let Some(colon) = authority[..userinfo_end].find(':') else {
            continue;
        };
        out.push_str(&text[copied..start + colon + 1]);
        out.push_str("***");
        copied = start + userinfo_end;
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

/// No core dump of this process, and no other process of its user may read its memory: a
/// dump would hold the passwords and executor secrets it works with (the scheduler's, or an
/// executor's and its plan's). The limit is inherited by the commands an executor runs.
pub fn no_core_dumps() -> Result<(), String> {
    let zero = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: setrlimit and prctl on this process, with a valid rlimit and plain integers.
    if unsafe { libc::setrlimit(libc::RLIMIT_CORE, &zero) } != 0 {
        return Err(format!(
            "setrlimit(RLIMIT_CORE, 0): {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: as above.
    if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
        return Err(format!(
            "prctl(PR_SET_DUMPABLE, 0): {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run in the test process itself, which then cannot dump core either.
    #[test]
    fn no_core_file_and_not_dumpable() {
        no_core_dumps().expect("hardening");
        let mut limit = libc::rlimit {
            rlim_cur: 1,
            rlim_max: 1,
        };
        // SAFETY: getrlimit and prctl on this process, with a valid rlimit to fill.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_CORE, &mut limit) }, 0);
        assert_eq!((limit.rlim_cur, limit.rlim_max), (0, 0));
        // SAFETY: as above.
        assert_eq!(unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) }, 0);
    }

    #[test]
    fn debug_and_display_are_redacted() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "<redacted>");
        assert_eq!(format!("{s}"), "<redacted>");
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Holder {
            password: Secret,
        }
        let h = Holder {
            password: Secret::from("hunter2"),
        };
        assert!(!format!("{h:?}").contains("hunter2"));
        assert!(!format!("{h:#?}").contains("hunter2"));
    }

    #[test]
    fn expose_returns_the_value() {
        assert_eq!(Secret::from("hunter2").expose(), "hunter2");
        assert_eq!(Secret::from(String::from("x")).expose(), "x");
        assert!(Secret::default().is_empty());
        assert!(!Secret::new("a").is_empty());
    }

    #[test]
    fn ct_eq_compares_whole_values() {
        let s = Secret::new("abcdef");
        assert!(s.ct_eq(b"abcdef"));
        assert!(!s.ct_eq(b"abcdeg"));
        assert!(!s.ct_eq(b"bbcdef"));
        assert!(!s.ct_eq(b"abcde"));
        assert!(!s.ct_eq(b"abcdefg"));
        assert!(!s.ct_eq(b""));
        assert!(Secret::new("").ct_eq(b""));
    }

    // Fails to compile if someone adds `impl Serialize for Secret`: with that impl both
    // blanket impls below apply and the `_` in `NotSerialize<_>` becomes ambiguous.
    #[test]
    fn secret_does_not_implement_serialize() {
        trait NotSerialize<A> {
            fn check() -> bool {
                true
            }
        }
        impl<T: ?Sized> NotSerialize<()> for T {}
        impl<T: ?Sized + serde::Serialize> NotSerialize<u8> for T {}
        assert!(<Secret as NotSerialize<_>>::check());
    }

    #[test]
    fn random_tokens_are_hex_and_distinct() {
        let a = random_token().expect("/dev/urandom readable");
        let b = random_token().expect("/dev/urandom readable");
        assert_eq!(a.expose().len(), TOKEN_BYTES * 2);
        assert!(a
            .expose()
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
        assert!(!a.ct_eq(b.expose().as_bytes()));
    }

    #[test]
    fn unreadable_random_source_is_a_clear_error() {
        let missing = Path::new("/nonexistent/urandom-for-test");
        let err = random_token_from(missing).expect_err("missing source must fail");
        let text = err.to_string();
        assert!(text.contains("/nonexistent/urandom-for-test"), "{text}");
        assert!(text.contains("random"), "{text}");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn short_random_source_is_an_error() {
        let dir = std::env::temp_dir().join(format!("secret-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let short = dir.join("short");
        std::fs::write(&short, [1u8; 5]).expect("write");
        let err = random_token_from(&short).expect_err("5 bytes are not enough");
        assert!(err.to_string().contains("short"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[cfg(feature = "scheduler")]
    #[test]
    fn a_token_is_a_digest_that_matches_its_secret_only() {
        let made = random_token().unwrap();
        let t = Token::new(&made);
        assert!(t.matches(&made));
        assert!(!t.is_empty());
        let mut other = made.expose().to_owned();
        other.replace_range(63.., if other.ends_with('0') { "1" } else { "0" });
        assert!(!t.matches(&Secret::new(other)));
        assert!(!t.matches(&Secret::new(made.expose().to_ascii_uppercase())));
        assert!(!t.matches(&Secret::new("")));
        assert_eq!(format!("{t:?}"), "<redacted>");
        // What is kept is the SHA-256, never the secret.
        let kept = t.digest_hex();
        assert!(!kept.contains(made.expose()));
        assert_eq!(
            Token::from("abc").digest_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Token::from_digest_hex(&kept), Some(t));
        assert_eq!(Token::from_digest_hex("s1"), None);
        assert_eq!(Token::from_digest_hex(&kept.to_ascii_uppercase()), None);
        assert!(Token::new(&Secret::new("")).is_empty());
        assert_ne!(Token::from("a"), Token::from("b"));
    }

    #[test]
    fn uri_passwords_are_masked_wherever_they_are_in_a_text() {
        let m = |t: &str| mask_uri_credentials(t).into_owned();
        assert_eq!(
            m("zk://alice:S3cret@h1:2181,h2/p"),
            "zk://alice:***@h1:2181,h2/p"
        );
        assert_eq!(m("https://u:p@gw:443/api"), "https://u:***@gw:443/api");
        // A password holding ':' or '@' goes whole: the last '@' before the host ends it.
        assert_eq!(m("http://u:a:b@c@host/x"), "http://u:***@host/x");
        // A user without a password is not a secret; nothing else changes.
        assert_eq!(m("http://user@host/x"), "http://user@host/x");
        assert_eq!(m("file:///tmp/a@b"), "file:///tmp/a@b");
        assert_eq!(m("mail me@example.com"), "mail me@example.com");
        assert!(matches!(
            mask_uri_credentials("http://h/p"),
            std::borrow::Cow::Borrowed(_)
        ));
        // Inside a message, several, quoted or not.
        assert_eq!(
            m(r#"fetching "http://a:1@h/x.deb" failed; zk://b:2@z:1/p, http://h/y"#),
            r#"fetching "http://a:***@h/x.deb" failed; zk://b:***@z:1/p, http://h/y"#
        );
        assert_eq!(m("bad URI zk://alice:S3cret@"), "bad URI zk://alice:***@");
    }
}
