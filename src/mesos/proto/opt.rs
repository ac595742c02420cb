//! Reading, sizing and writing an `optional` field.

use super::*;

#[inline]
pub fn merge<T: Field>(
    f: &mut Option<T>,
    name: &'static str,
    wire: u8,
    r: &mut Reader<'_>,
    depth: u32,
) -> Result<bool, DecodeError> {
    if wire != T::WIRE {
        return Ok(false);
    }
    // Merge in place: building the value on the stack and moving it in costs a copy of
    // the whole struct, which shows in the decode benchmark.
    f.get_or_insert_with(T::default)
        .merge(r, depth)
        .map_err(|e| e.within(name))?;
    Ok(true)
}
#[inline]
pub const fn is_required() -> bool {
    false
}
#[inline]
pub fn from_json<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
    f: &mut Option<T>,
    map: &mut A,
) -> Result<bool, A::Error> {
    *f = map.next_value::<Option<T>>()?;
    Ok(f.is_some())
}
#[inline]
pub fn len<T: Field>(f: &Option<T>, number: u32) -> usize {
    f.as_ref().map_or(0, |v| key_len(number) + v.value_len())
}
#[inline]
pub fn write<T: Field>(f: &Option<T>, number: u32, out: &mut Vec<u8>) {
    if let Some(v) = f {
        put_key(out, number, T::WIRE);
        v.write_value(out);
    }
}
