//! `Str`: the string type of every Mesos message field.
//!
//! Almost every string in the Mesos stream is short (`cpus`, `*`, attribute names, ids of a
//! few dozen bytes), and an OFFERS event carries a score of them. Keeping strings of up to
//! 22 bytes inline saves most of the allocations of a decode, which is where the time of the
//! event path went (glibc's allocator, and musl's, which the release binaries use, is slower
//! still). Longer strings live on the heap as before.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;

// 22 bytes inline keep `Str` at 24 bytes, the size of a `String`.
const INLINE: usize = 22;

#[derive(Clone)]
pub struct Str(Repr);

#[derive(Clone)]
enum Repr {
    Inline { len: u8, buf: [u8; INLINE] },
    Heap(Box<str>),
}

impl Str {
    pub fn new(s: &str) -> Self {
        if s.len() <= INLINE {
            let mut buf = [0u8; INLINE];
            buf[..s.len()].copy_from_slice(s.as_bytes());
            Str(Repr::Inline {
                len: s.len() as u8,
                buf,
            })
        } else {
            Str(Repr::Heap(s.into()))
        }
    }

    /// Validates and copies `bytes`. Mesos strings are nearly always ASCII, which a plain
    /// byte scan proves far faster than the general UTF-8 check, short or long (the ids of
    /// an offer are about 40 bytes: the general check was 4% of a one-offer decode).
    #[inline]
    pub fn from_utf8(bytes: &[u8]) -> Result<Self, std::str::Utf8Error> {
        if bytes.is_ascii() {
            // SAFETY: ASCII bytes are valid UTF-8.
            return Ok(Str::new(unsafe { std::str::from_utf8_unchecked(bytes) }));
        }
        std::str::from_utf8(bytes).map(Str::new)
    }

    #[inline]
    pub fn as_str(&self) -> &str {
        match &self.0 {
            // SAFETY: `Inline` is only built from the bytes of a `&str` (`new`) or from
            // ASCII bytes (`from_utf8`), and `len` is their length: the slice is valid UTF-8.
            Repr::Inline { len, buf } => unsafe {
                std::str::from_utf8_unchecked(&buf[..usize::from(*len)])
            },
            Repr::Heap(s) => s,
        }
    }
}

impl Default for Str {
    fn default() -> Self {
        Str(Repr::Inline {
            len: 0,
            buf: [0; INLINE],
        })
    }
}

impl Deref for Str {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Str {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Str {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Str {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for Str {
    fn eq(&self, other: &Str) -> bool {
        self.as_str() == other.as_str()
    }
}
impl Eq for Str {}

impl PartialOrd for Str {
    fn partial_cmp(&self, other: &Str) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Str {
    fn cmp(&self, other: &Str) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

// Hashes like `str`, as `Borrow<str>` requires.
impl Hash for Str {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl PartialEq<str> for Str {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}
impl PartialEq<&str> for Str {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}
impl PartialEq<String> for Str {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}
impl PartialEq<Str> for str {
    fn eq(&self, other: &Str) -> bool {
        self == other.as_str()
    }
}
impl PartialEq<Str> for &str {
    fn eq(&self, other: &Str) -> bool {
        *self == other.as_str()
    }
}
impl PartialEq<Str> for String {
    fn eq(&self, other: &Str) -> bool {
        self == other.as_str()
    }
}

impl From<&str> for Str {
    fn from(s: &str) -> Self {
        Str::new(s)
    }
}
impl From<&String> for Str {
    fn from(s: &String) -> Self {
        Str::new(s)
    }
}
impl From<String> for Str {
    fn from(s: String) -> Self {
        if s.len() <= INLINE {
            Str::new(&s)
        } else {
            Str(Repr::Heap(s.into_boxed_str()))
        }
    }
}
impl From<Str> for String {
    fn from(s: Str) -> String {
        match s.0 {
            Repr::Heap(b) => b.into_string(),
            Repr::Inline { .. } => s.as_str().to_owned(),
        }
    }
}

impl serde::Serialize for Str {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Str {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Str;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Str, E> {
                Ok(Str::new(s))
            }
            fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Str, E> {
                Ok(Str::from(s))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn inline_and_heap_behave_like_str() {
        for s in [
            "",
            "cpus",
            "exactly-twenty-three-by",
            "twenty-four-bytes-long!!",
            "é€𝄞",
        ] {
            let t = Str::from(s);
            assert_eq!(t, s);
            assert_eq!(t.as_str(), s);
            assert_eq!(String::from(t.clone()), s);
            assert_eq!(Str::from(s.to_string()), t);
            assert_eq!(t.len(), s.len());
        }
        assert_eq!(std::mem::size_of::<Str>(), 24);
        let mut m = HashMap::new();
        m.insert(Str::from("agent-1"), 1);
        assert_eq!(m.get("agent-1"), Some(&1));
        let json = serde_json::to_string(&Str::from("a\"b")).unwrap();
        assert_eq!(json, r#""a\"b""#);
        let back: Str = serde_json::from_str(&json).unwrap();
        assert_eq!(back, "a\"b");
    }

    /// ASCII takes the quick check, short or long; anything else the full one, which still
    /// refuses what is not UTF-8.
    #[test]
    fn from_utf8_takes_what_str_takes_and_refuses_the_rest() {
        let long_ascii = "5f2c1a7e-1d7b-4c55-9a8e-0d6f3b2a1c9e-O123";
        let long_utf8 = "h\u{f4}te-de-stockage-num\u{e9}ro-douze";
        for s in ["", "cpus", long_ascii, "\u{e9}\u{20ac}", long_utf8] {
            assert_eq!(Str::from_utf8(s.as_bytes()).unwrap(), s, "{s}");
        }
        let mut bad = long_ascii.as_bytes().to_vec();
        bad.push(0xff);
        assert!(Str::from_utf8(&bad).is_err());
        assert!(Str::from_utf8(&[b'a', 0xc3]).is_err(), "a cut sequence");
        assert!(Str::from_utf8(&[0xed, 0xa0, 0x80]).is_err(), "a surrogate");
    }
}
