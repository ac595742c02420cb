//! Reading, sizing and writing a `repeated` field.

use super::*;

#[inline]
pub fn merge<T: Field>(
    f: &mut Vec<T>,
    name: &'static str,
    wire: u8,
    r: &mut Reader<'_>,
    depth: u32,
) -> Result<bool, DecodeError> {
    if wire == T::WIRE {
        f.push(T::default());
        let last = f.len() - 1;
        if let Err(e) = f[last].merge(r, depth) {
            f.pop();
            return Err(e.within(name));
        }
        return Ok(true);
    }
    // Parsers must accept the packed form of any repeated scalar, whichever form the
    // sender's schema declared.
    if wire == WIRE_LEN && T::WIRE != WIRE_LEN {
        let sub = r.bytes().map_err(|e| e.within(name))?;
        let mut sr = Reader::new(sub);
        while !sr.is_eof() {
            f.push(T::read(&mut sr, depth).map_err(|e| e.within(name))?);
        }
        return Ok(true);
    }
    Ok(false)
}
#[inline]
pub const fn is_required() -> bool {
    false
}
/// `null` is an empty list (the mesos-go encoder writes every empty slice so), and a
/// `null` element adds nothing, as in the master's conversion.
#[inline]
pub fn from_json<'de, T: Deserialize<'de>, A: MapAccess<'de>>(
    f: &mut Vec<T>,
    map: &mut A,
) -> Result<bool, A::Error> {
    f.clear();
    map.next_value_seed(json::List(f))?;
    Ok(!f.is_empty())
}
#[inline]
pub fn len<T: Field>(f: &[T], number: u32) -> usize {
    f.iter().map(|v| key_len(number) + v.value_len()).sum()
}
#[inline]
pub fn write<T: Field>(f: &[T], number: u32, out: &mut Vec<u8>) {
    for v in f {
        put_key(out, number, T::WIRE);
        v.write_value(out);
    }
}
