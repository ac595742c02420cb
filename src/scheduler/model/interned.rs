//! The gateway's words, kept once. A poll says the same few things of every node (`Connected`,
//! `Joined`, `Normal`, the pool's id, `/dev/sdb`): as a `String` each, they were two heap
//! chunks and 48 bytes per node times ten thousand. Here each distinct text is one `Arc<str>`
//! that every node's copy shares.
//!
//! One set per thread, so no lock: the dispatcher's thread makes all of them (a poll's
//! storage, the model loaded at start), and an `Arc` may go anywhere after. The set forgets
//! the texts no one holds any more whenever it has doubled since it last looked, so a
//! cluster whose device names churn for years keeps only those in use.

use serde::{Deserialize, Deserializer};
use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Arc;

/// Below this many texts the set is never swept.
const SWEEP_FROM: usize = 64;

#[derive(Default)]
struct Set {
    texts: HashSet<Arc<str>>,
    /// Size after the last sweep: the next one comes at twice that.
    swept_at: usize,
}

thread_local! {
    static SET: RefCell<Set> = RefCell::new(Set::default());
}

/// The one `Arc<str>` of this thread for `text`.
pub fn intern(text: &str) -> Arc<str> {
    SET.with(|set| {
        let mut set = set.borrow_mut();
        if let Some(known) = set.texts.get(text) {
            return known.clone();
        }
        if set.texts.len() >= SWEEP_FROM.max(2 * set.swept_at) {
            set.texts.retain(|t| Arc::strong_count(t) > 1);
            set.swept_at = set.texts.len();
        }
        let new: Arc<str> = Arc::from(text);
        set.texts.insert(new.clone());
        new
    })
}

/// [`intern`] of an optional text.
pub fn intern_opt(text: Option<&str>) -> Option<Arc<str>> {
    text.map(intern)
}

/// `deserialize_with` for an interned text.
pub fn de<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
    Ok(intern(&String::deserialize(d)?))
}

/// `deserialize_with` for an optional interned text.
pub fn de_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<str>>, D::Error> {
    Ok(<Option<String>>::deserialize(d)?.as_deref().map(intern))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_is_kept_once_and_forgotten_once_no_one_holds_it() {
        let a = intern("Connected");
        let b = intern("Connected");
        assert!(Arc::ptr_eq(&a, &b), "the same text is the same Arc");
        assert_eq!(&*a, "Connected");

        // Texts dropped at once: the set sweeps them as it grows, so it stays bounded.
        for i in 0..10_000 {
            drop(intern(&format!("/dev/disk/by-id/serial-{i}")));
        }
        let held = SET.with(|s| s.borrow().texts.len());
        assert!(held < 2 * SWEEP_FROM, "{held} texts kept for none in use");
        assert!(
            Arc::ptr_eq(&a, &intern("Connected")),
            "a text still held survives the sweeps"
        );
    }

    #[test]
    fn loaded_texts_are_shared_too() {
        #[derive(Deserialize)]
        struct Two {
            #[serde(deserialize_with = "de")]
            a: Arc<str>,
            #[serde(default, deserialize_with = "de_opt")]
            b: Option<Arc<str>>,
            #[serde(default, deserialize_with = "de_opt")]
            c: Option<Arc<str>>,
        }
        let two: Two = serde_json::from_str(r#"{"a":"Normal","b":"Normal","c":null}"#).unwrap();
        assert!(Arc::ptr_eq(&two.a, two.b.as_ref().unwrap()));
        assert!(two.c.is_none());
        let esc: Two = serde_json::from_str(r#"{"a":"N\u006frmal"}"#).unwrap();
        assert!(Arc::ptr_eq(&esc.a, &two.a));
    }
}
