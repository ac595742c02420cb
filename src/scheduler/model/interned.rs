//! The gateway's words, kept once. A poll says the same few things of every node (`Connected`,
//! `Joined`, `Normal`, the pool's id, `/dev/sdb`): as a `String` each, they were two heap
//! chunks and 48 bytes per node times ten thousand. Here each distinct text is kept once, and
//! every node's copy is a pointer to it. The digest of the executor binary that every node records
//! is one too.
//!
//! One set per thread, so no lock: the gateway worker's thread makes a poll's (as the listings
//! stream, `gateway_work/poll.rs`), the dispatcher's the model's loaded at start, and an `Arc`
//! may go anywhere after (two copies of a word at most, equal as texts). The set forgets
//! the texts no one holds any more whenever it has doubled since it last looked, so a
//! cluster whose device names churn for years keeps only those in use.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

/// Below this many texts the set is never swept.
const SWEEP_FROM: usize = 64;

#[derive(Default)]
struct Set {
    texts: HashSet<Key>,
    /// Size after the last sweep: the next one comes at twice that.
    swept_at: usize,
}

thread_local! {
    static SET: RefCell<Set> = RefCell::new(Set::default());
}

/// A text of the set, found by the `str` it holds.
struct Key(Arc<Box<str>>);

impl std::borrow::Borrow<str> for Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (**self.0).hash(h)
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.0 == other.0
    }
}

impl Eq for Key {}

/// The one text of this thread for `text`.
fn intern(text: &str) -> Arc<Box<str>> {
    SET.with(|set| {
        let mut set = set.borrow_mut();
        if let Some(known) = set.texts.get(text) {
            return known.0.clone();
        }
        if set.texts.len() >= SWEEP_FROM.max(2 * set.swept_at) {
            set.texts.retain(|t| Arc::strong_count(&t.0) > 1);
            set.swept_at = set.texts.len();
        }
        let new = Arc::new(Box::<str>::from(text));
        set.texts.insert(Key(new.clone()));
        new
    })
}

/// A text kept once: made from a `&str` or a `String`, read as a `str`, (de)serialized as a
/// JSON string (deserializing interns it too, so the model loaded at start shares them).
///
/// One pointer (to the shared `Box<str>`), so a `Word` and an `Option<Word>` are 8 bytes:
/// an `Arc<str>` is 16, and a node's polled storage holds nine words (its SDS's five states,
/// its device's four), at 10,000 nodes 0.7 MB more of them, and as much again in each poll
/// that changes every node. The texts are few, so their second indirection costs nothing
/// that shows.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Word(Arc<Box<str>>);

impl Word {
    /// [`Word`] of an optional text.
    pub fn of(text: Option<&str>) -> Option<Word> {
        text.map(Word::from)
    }
}

impl Default for Word {
    fn default() -> Word {
        Word::from("")
    }
}

impl From<&str> for Word {
    fn from(text: &str) -> Word {
        Word(intern(text))
    }
}

impl From<String> for Word {
    fn from(text: String) -> Word {
        Word(intern(&text))
    }
}

impl std::ops::Deref for Word {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self.0, f)
    }
}

impl fmt::Display for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for Word {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Word {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Word, D::Error> {
        d.deserialize_str(WordVisitor)
    }
}

/// Interns the text where the deserializer holds it, without a `String` of its own first: a
/// restart loads ten thousand nodes' words, nearly all of them known already.
struct WordVisitor;

impl serde::de::Visitor<'_> for WordVisitor {
    type Value = Word;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Word, E> {
        Ok(Word::from(text))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_kept_once_and_forgotten_once_no_one_holds_it() {
        assert_eq!(
            std::mem::size_of::<Option<Word>>(),
            8,
            "a word is one pointer"
        );
        let a = Word::from("Connected");
        let b = Word::from(String::from("Connected"));
        assert!(Arc::ptr_eq(&a.0, &b.0), "the same text is the same Arc");
        assert_eq!(&*a, "Connected");

        // Texts dropped at once: the set sweeps them as it grows, so it stays bounded.
        for i in 0..10_000 {
            drop(Word::from(format!("/dev/disk/by-id/serial-{i}")));
        }
        let held = SET.with(|s| s.borrow().texts.len());
        assert!(held < 2 * SWEEP_FROM, "{held} texts kept for none in use");
        assert!(
            Arc::ptr_eq(&a.0, &Word::from("Connected").0),
            "a text still held survives the sweeps"
        );
    }

    #[test]
    fn loaded_texts_are_shared_and_written_as_strings() {
        #[derive(Deserialize, Serialize)]
        struct Two {
            a: Word,
            #[serde(default)]
            b: Option<Word>,
            #[serde(default)]
            c: Option<Word>,
        }
        let text = r#"{"a":"Normal","b":"Normal","c":null}"#;
        let two: Two = serde_json::from_str(text).unwrap();
        assert!(Arc::ptr_eq(&two.a.0, &two.b.as_ref().unwrap().0));
        assert!(two.c.is_none());
        assert_eq!(serde_json::to_string(&two).unwrap(), text);
        let escaped: Two = serde_json::from_str(r#"{"a":"N\u006frmal"}"#).unwrap();
        assert!(Arc::ptr_eq(&escaped.a.0, &two.a.0));
    }
}
