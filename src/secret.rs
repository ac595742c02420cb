//! Secrets (the gateway password, per-executor tokens) in a type that cannot leak by accident.
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

/// A token held as compactly as it allows: one [`random_token`] made (64 lowercase hex
/// digits) as its 32 bytes, anything else as its text: each launch holds its executor's
/// secret this way (10,000 launches, 10,000 times 40 bytes, not 10,000 strings in a map).
/// Like [`Secret`], it prints redacted and has no `Serialize`.
#[derive(Clone)]
pub struct Token(TokenRepr);

#[derive(Clone)]
enum TokenRepr {
    Bytes([u8; TOKEN_BYTES]),
    Text(Box<str>),
}

/// The bytes of `hex` when it is exactly what [`random_token`] makes.
fn token_bytes(hex: &[u8]) -> Option<[u8; TOKEN_BYTES]> {
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

impl Token {
    pub fn new(secret: &Secret) -> Token {
        Token(match token_bytes(secret.expose().as_bytes()) {
            Some(b) => TokenRepr::Bytes(b),
            None => TokenRepr::Text(secret.expose().into()),
        })
    }

    pub fn is_empty(&self) -> bool {
        matches!(&self.0, TokenRepr::Text(t) if t.is_empty())
    }

    /// Whether `presented` is this token, compared in constant time as [`Secret::ct_eq`].
    pub fn matches(&self, presented: &Secret) -> bool {
        match &self.0 {
            TokenRepr::Text(t) => presented.ct_eq(t.as_bytes()),
            // Not a token's shape: no comparison to time. Else the bytes, without an early
            // exit.
            TokenRepr::Bytes(mine) => token_bytes(presented.expose().as_bytes())
                .is_some_and(|theirs| Secret::ct_eq_bytes(mine, &theirs)),
        }
    }
}

impl Token {
    /// The token as the text it was made from: for the places it leaves the process on
    /// purpose (the store's node record, the REST side's index at start).
    pub fn reveal(&self) -> Secret {
        match &self.0 {
            TokenRepr::Text(t) => Secret::new(&**t),
            TokenRepr::Bytes(b) => Secret(lower_hex(b)),
        }
    }
}

impl From<&str> for Token {
    fn from(text: &str) -> Token {
        Token::new(&Secret::new(text))
    }
}

/// Constant time, as [`Token::matches`]: models holding tokens are compared in tests and in
/// the store's content checks, never on an attacker's clock, but the rule stays one rule.
impl PartialEq for Token {
    fn eq(&self, other: &Token) -> bool {
        match (&self.0, &other.0) {
            (TokenRepr::Bytes(a), TokenRepr::Bytes(b)) => Secret::ct_eq_bytes(a, b),
            (TokenRepr::Text(a), TokenRepr::Text(b)) => {
                Secret::ct_eq_bytes(a.as_bytes(), b.as_bytes())
            }
            _ => false,
        }
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_token_held_as_bytes_matches_its_text_only() {
        let made = random_token().unwrap();
        let t = Token::new(&made);
        assert!(matches!(t.0, TokenRepr::Bytes(_)));
        assert!(t.matches(&made));
        assert!(!t.is_empty());
        let mut other = made.expose().to_owned();
        other.replace_range(63.., if other.ends_with('0') { "1" } else { "0" });
        assert!(!t.matches(&Secret::new(other)));
        // Upper case is another text, not the same token.
        assert!(!t.matches(&Secret::new(made.expose().to_ascii_uppercase())));
        assert!(!t.matches(&Secret::new("")));
        assert_eq!(format!("{t:?}"), "<redacted>");
        // Anything else is kept as text and compared as such.
        let text = Token::new(&Secret::new("secret-1"));
        assert!(matches!(text.0, TokenRepr::Text(_)));
        assert!(text.matches(&"secret-1".into()));
        assert!(!text.matches(&"secret-2".into()));
        assert!(Token::new(&Secret::new("")).is_empty());
    }

    #[test]
    fn a_token_reveals_the_text_it_was_made_from() {
        let made = random_token().unwrap();
        let t = Token::new(&made);
        assert_eq!(t.reveal().expose(), made.expose());
        assert_eq!(Token::from("secret-1").reveal().expose(), "secret-1");
        assert_eq!(t, Token::new(&made));
        assert_ne!(t, Token::new(&random_token().unwrap()));
        assert_ne!(Token::from("a"), Token::from("b"));
    }
}
