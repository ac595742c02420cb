//! Reading, sizing and writing a `required` field.

use super::*;

#[inline]
pub fn merge<T: Field>(
    f: &mut T,
    name: &'static str,
    wire: u8,
    r: &mut Reader<'_>,
    depth: u32,
) -> Result<bool, DecodeError> {
    if wire != T::WIRE {
        return Ok(false);
    }
    f.merge(r, depth).map_err(|e| e.within(name))?;
    Ok(true)
}
#[inline]
pub const fn is_required() -> bool {
    true
}
/// A required field given as `null` stays unset, so the message reports it missing.
#[inline]
pub fn from_json<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
    f: &mut T,
    map: &mut A,
) -> Result<bool, A::Error> {
    Ok(match map.next_value::<Option<T>>()? {
        Some(v) => {
            *f = v;
            true
        }
        None => false,
    })
}
#[inline]
pub fn len<T: Field>(f: &T, number: u32) -> usize {
    key_len(number) + f.value_len()
}
#[inline]
pub fn write<T: Field>(f: &T, number: u32, out: &mut Vec<u8>) {
    put_key(out, number, T::WIRE);
    f.write_value(out);
}
