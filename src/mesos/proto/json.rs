//! Mesos JSON, read the way the master's JSON-to-protobuf conversion reads it: `null` is an
//! unset field whatever the field's kind (a required one is then missing), unknown keys are
//! ignored, a key given twice is an error.

use serde::de::{Deserialize, DeserializeSeed, Error, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// One field of a message as JSON knows it.
pub struct FieldDesc {
    pub name: &'static str,
    pub number: u32,
    pub required: bool,
}

/// The JSON key of a field: its proto name (`r#type` is `type`).
pub const fn name(ident: &'static str) -> &'static str {
    match ident.as_bytes() {
        [b'r', b'#', rest @ ..] => match std::str::from_utf8(rest) {
            Ok(s) => s,
            Err(_) => panic!("field name is not UTF-8"),
        },
        _ => ident,
    }
}

/// Reads an object key as the number of its field (`None` for a key the message does
/// not know) with the message's own lookup, which the macro unrolls over constant names:
/// a search through a table of names cost a tenth of the JSON decode time.
pub struct Key<F>(pub F);

impl<'de, F: Fn(&str) -> Option<u32>> DeserializeSeed<'de> for Key<F> {
    type Value = Option<u32>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<u32>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<F: Fn(&str) -> Option<u32>> Visitor<'_> for Key<F> {
    type Value = Option<u32>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    #[inline]
    fn visit_str<E: Error>(self, s: &str) -> Result<Option<u32>, E> {
        Ok((self.0)(s))
    }
}

/// Appends the non-null elements of a JSON list (or nothing for `null`) to a Vec.
pub struct List<'a, T>(pub &'a mut Vec<T>);

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for List<'_, T> {
    type Value = ();
    #[inline]
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_option(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for List<'_, T> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }
    fn visit_none<E: Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: Error>(self) -> Result<(), E> {
        Ok(())
    }
    #[inline]
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
    #[inline]
    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        while let Some(v) = seq.next_element::<Option<T>>()? {
            self.0.extend(v);
        }
        Ok(())
    }
}

#[inline]
const fn bit(number: u32) -> u64 {
    1u64 << (number % 64)
}

/// Whether no two fields share a bit of the masks `read_object` keeps.
pub const fn distinct_bits(fields: &[FieldDesc]) -> bool {
    let mut all = 0u64;
    let mut i = 0;
    while i < fields.len() {
        if all & bit(fields[i].number) != 0 {
            return false;
        }
        all |= bit(fields[i].number);
        i += 1;
    }
    true
}

/// Reads the fields of one message from a JSON object. `lookup` maps a key to its field
/// number; `read` stores the value of that field and says whether it was set (not `null`).
#[inline]
pub fn read_object<'de, A: MapAccess<'de>>(
    fields: &'static [FieldDesc],
    lookup: impl Fn(&str) -> Option<u32> + Copy,
    map: &mut A,
    mut read: impl FnMut(u32, &mut A) -> Result<bool, A::Error>,
) -> Result<(), A::Error> {
    let (mut keys, mut set) = (0u64, 0u64);
    while let Some(key) = map.next_key_seed(Key(lookup))? {
        let Some(number) = key else {
            map.next_value::<serde::de::IgnoredAny>()?;
            continue;
        };
        if keys & bit(number) != 0 {
            let name = fields
                .iter()
                .find(|d| d.number == number)
                .map_or("?", |d| d.name);
            return Err(A::Error::duplicate_field(name));
        }
        keys |= bit(number);
        if read(number, map)? {
            set |= bit(number);
        }
    }
    for d in fields {
        if d.required && set & bit(d.number) == 0 {
            return Err(A::Error::missing_field(d.name));
        }
    }
    Ok(())
}
