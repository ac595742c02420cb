//! A node's field that nearly every node leaves empty, one pointer until it holds something.
//!
//! Inline, an empty `Layout` (the global pool) was 48 bytes in every node, and the four device
//! lists that are empty on nearly every node (missing, in error, removed, being removed) 96:
//! at 10,000 nodes about 1.4 MB of the scheduler's heap for fields that hold nothing. A
//! [`Sparse`] is 8 bytes while empty and boxes its value once it holds one. It reads as the
//! value either way, and is saved and shown as the value always was.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a [`Sparse`] may hold: a value with an empty form that every unset field reads as.
pub trait Empty: Default + PartialEq + Serialize + DeserializeOwned + 'static {
    /// The empty value, shared.
    fn empty() -> &'static Self;
    fn is_empty(&self) -> bool;
    /// Made fit to keep for long (a list read back gives its spare room back).
    fn settle(&mut self) {}
}

/// A value kept boxed once it is not empty (see the module's doc).
#[derive(Debug, Clone, Default)]
pub struct Sparse<T>(Option<Box<T>>);

/// A node's device lists that are empty on nearly every node.
pub type DeviceNames = Sparse<Vec<String>>;

static NO_NAMES: Vec<String> = Vec::new();

impl Empty for Vec<String> {
    fn empty() -> &'static Self {
        &NO_NAMES
    }
    fn is_empty(&self) -> bool {
        <[String]>::is_empty(self)
    }
    fn settle(&mut self) {
        self.shrink_to_fit();
    }
}

impl<T: Empty> Sparse<T> {
    /// Whether it holds the empty value (for `skip_serializing_if`).
    pub fn is_empty(&self) -> bool {
        self.0.as_deref().is_none_or(T::is_empty)
    }
}

impl DeviceNames {
    /// Keeps the names `keep` says; an emptied list gives its box back.
    pub fn retain(&mut self, keep: impl FnMut(&String) -> bool) {
        if let Some(names) = &mut self.0 {
            names.retain(keep);
            if names.is_empty() {
                self.0 = None;
            }
        }
    }
}

impl<T: Empty> std::ops::Deref for Sparse<T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0.as_deref().unwrap_or(T::empty())
    }
}

impl<T: Empty> std::ops::DerefMut for Sparse<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0.get_or_insert_with(Box::default)
    }
}

impl<T: Empty> From<T> for Sparse<T> {
    fn from(mut value: T) -> Sparse<T> {
        if value.is_empty() {
            return Sparse(None);
        }
        value.settle();
        Sparse(Some(Box::new(value)))
    }
}

impl<T: Empty> PartialEq for Sparse<T> {
    fn eq(&self, other: &Sparse<T>) -> bool {
        **self == **other
    }
}

impl<T: Empty> Serialize for Sparse<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de, T: Empty> Deserialize<'de> for Sparse<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Sparse::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_list_holds_no_box_and_reads_saves_and_compares_as_the_list() {
        assert_eq!(std::mem::size_of::<DeviceNames>(), 8);
        let none = DeviceNames::from(Vec::new());
        assert!(none.0.is_none() && none.is_empty());
        assert_eq!(none, DeviceNames::default());
        assert_eq!(serde_json::to_string(&none).unwrap(), "[]");

        let mut some = DeviceNames::default();
        some.push("/dev/sdb".into());
        some.push("/dev/sdc".into());
        assert_eq!(*some, ["/dev/sdb", "/dev/sdc"]);
        let json = serde_json::to_string(&some).unwrap();
        assert_eq!(json, r#"["/dev/sdb","/dev/sdc"]"#);
        let back: DeviceNames = serde_json::from_str(&json).unwrap();
        assert_eq!(back, some);
        assert_eq!(back.capacity(), 2, "read back at its length");
        let empty: DeviceNames = serde_json::from_str("[]").unwrap();
        assert!(empty.0.is_none(), "an empty list read back holds no box");

        // Emptied by `retain`, the box goes, and the list is equal to one never filled.
        some.retain(|d| d != "/dev/sdb");
        assert_eq!(*some, ["/dev/sdc"]);
        some.retain(|_| false);
        assert!(some.0.is_none(), "an emptied list gives its box back");
        assert_eq!(some, none);
    }
}
