//! A node's list of device names that is empty on nearly every node (the devices its
//! executor no longer finds, those in error, those an operator removed or is removing).
//!
//! Four `Vec<String>`s were 96 of the 600 bytes every node's record took, at 10,000 nodes
//! about 1 MB of the scheduler's heap for lists that hold nothing. This one is a pointer:
//! 8 bytes while empty, the list in a box of its own once it holds a name. It reads as the
//! list either way, and is saved and shown as the list always was (`[]` or left out).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Device names, most often none (see the module's doc).
// The boxed `Vec` is the point: one pointer where an empty `Vec` is three words.
#[allow(clippy::box_collection)]
#[derive(Debug, Clone, Default)]
pub struct DeviceNames(Option<Box<Vec<String>>>);

static NONE: Vec<String> = Vec::new();

impl DeviceNames {
    /// Whether it names no device (for `skip_serializing_if`, where the list's own method
    /// is not reached through `Deref`).
    pub fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(|names| names.is_empty())
    }

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

impl std::ops::Deref for DeviceNames {
    type Target = Vec<String>;
    fn deref(&self) -> &Vec<String> {
        self.0.as_deref().unwrap_or(&NONE)
    }
}

impl std::ops::DerefMut for DeviceNames {
    fn deref_mut(&mut self) -> &mut Vec<String> {
        self.0.get_or_insert_with(Box::default)
    }
}

impl From<Vec<String>> for DeviceNames {
    /// Held at its length (the list is read back 10,000 nodes at a time at a restart).
    fn from(mut names: Vec<String>) -> DeviceNames {
        if names.is_empty() {
            return DeviceNames(None);
        }
        names.shrink_to_fit();
        DeviceNames(Some(Box::new(names)))
    }
}

impl PartialEq for DeviceNames {
    fn eq(&self, other: &DeviceNames) -> bool {
        **self == **other
    }
}

impl Serialize for DeviceNames {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(s)
    }
}

impl<'de> Deserialize<'de> for DeviceNames {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Vec::<String>::deserialize(d).map(DeviceNames::from)
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
