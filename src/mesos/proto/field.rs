//! How each value type sits on the wire after its key: reading, sizing and writing scalars,
//! strings, bytes and nested messages.

use super::{DecodeError, Message, Reader, WIRE_FIXED64, WIRE_LEN, WIRE_VARINT};

/// One value of a field, as it sits on the wire after its key.
pub trait Field: Sized + Default {
    const WIRE: u8;
    fn read(r: &mut Reader<'_>, depth: u32) -> Result<Self, DecodeError>;
    /// Protobuf merges a repeated occurrence of a singular message field into the first one.
    fn merge(&mut self, r: &mut Reader<'_>, depth: u32) -> Result<(), DecodeError> {
        *self = Self::read(r, depth)?;
        Ok(())
    }
    /// Encoded length of the value, including its length prefix when it has one.
    fn value_len(&self) -> usize;
    fn write_value(&self, out: &mut Vec<u8>);
}

// ---- primitive writers ----

#[inline]
pub fn varint_len(v: u64) -> usize {
    quick_protobuf::sizeofs::sizeof_varint(v)
}

#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[inline]
pub(super) fn key_len(number: u32) -> usize {
    varint_len(u64::from(number) << 3)
}

#[inline]
pub(super) fn put_key(out: &mut Vec<u8>, number: u32, wire: u8) {
    put_varint(out, (u64::from(number) << 3) | u64::from(wire));
}

impl Field for String {
    const WIRE: u8 = WIRE_LEN;
    #[inline]
    fn read(r: &mut Reader<'_>, _: u32) -> Result<Self, DecodeError> {
        std::str::from_utf8(r.bytes()?)
            .map(str::to_owned)
            .map_err(|e| DecodeError::malformed(format!("string is not UTF-8: {e}")))
    }
    #[inline]
    fn value_len(&self) -> usize {
        varint_len(self.len() as u64) + self.len()
    }
    #[inline]
    fn write_value(&self, out: &mut Vec<u8>) {
        put_varint(out, self.len() as u64);
        out.extend_from_slice(self.as_bytes());
    }
}

impl Field for crate::mesos::Str {
    const WIRE: u8 = WIRE_LEN;
    #[inline]
    fn read(r: &mut Reader<'_>, _: u32) -> Result<Self, DecodeError> {
        crate::mesos::Str::from_utf8(r.bytes()?)
            .map_err(|e| DecodeError::malformed(format!("string is not UTF-8: {e}")))
    }
    #[inline]
    fn value_len(&self) -> usize {
        varint_len(self.len() as u64) + self.len()
    }
    #[inline]
    fn write_value(&self, out: &mut Vec<u8>) {
        put_varint(out, self.len() as u64);
        out.extend_from_slice(self.as_bytes());
    }
}

impl Field for crate::mesos::Bytes {
    const WIRE: u8 = WIRE_LEN;
    fn read(r: &mut Reader<'_>, _: u32) -> Result<Self, DecodeError> {
        r.bytes().map(|b| crate::mesos::Bytes(b.to_vec()))
    }
    fn value_len(&self) -> usize {
        varint_len(self.0.len() as u64) + self.0.len()
    }
    fn write_value(&self, out: &mut Vec<u8>) {
        put_varint(out, self.0.len() as u64);
        out.extend_from_slice(&self.0);
    }
}

impl Field for f64 {
    const WIRE: u8 = WIRE_FIXED64;
    #[inline]
    fn read(r: &mut Reader<'_>, _: u32) -> Result<Self, DecodeError> {
        r.fixed64().map(f64::from_bits)
    }
    fn value_len(&self) -> usize {
        8
    }
    fn write_value(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Field for bool {
    const WIRE: u8 = WIRE_VARINT;
    fn read(r: &mut Reader<'_>, _: u32) -> Result<Self, DecodeError> {
        r.varint().map(|v| v != 0)
    }
    fn value_len(&self) -> usize {
        1
    }
    fn write_value(&self, out: &mut Vec<u8>) {
        out.push(u8::from(*self));
    }
}

impl Field for u64 {
    const WIRE: u8 = WIRE_VARINT;
    #[inline]
    fn read(r: &mut Reader<'_>, _: u32) -> Result<Self, DecodeError> {
        r.varint()
    }
    fn value_len(&self) -> usize {
        varint_len(*self)
    }
    fn write_value(&self, out: &mut Vec<u8>) {
        put_varint(out, *self);
    }
}

impl Field for u32 {
    const WIRE: u8 = WIRE_VARINT;
    fn read(r: &mut Reader<'_>, _: u32) -> Result<Self, DecodeError> {
        // Protobuf truncates an over-wide varint to the field's width.
        r.varint().map(|v| v as u32)
    }
    fn value_len(&self) -> usize {
        varint_len(u64::from(*self))
    }
    fn write_value(&self, out: &mut Vec<u8>) {
        put_varint(out, u64::from(*self));
    }
}

impl Field for i64 {
    const WIRE: u8 = WIRE_VARINT;
    fn read(r: &mut Reader<'_>, _: u32) -> Result<Self, DecodeError> {
        r.varint().map(|v| v as i64)
    }
    fn value_len(&self) -> usize {
        varint_len(*self as u64)
    }
    fn write_value(&self, out: &mut Vec<u8>) {
        put_varint(out, *self as u64);
    }
}

impl Field for i32 {
    const WIRE: u8 = WIRE_VARINT;
    fn read(r: &mut Reader<'_>, _: u32) -> Result<Self, DecodeError> {
        r.varint().map(|v| v as i32)
    }
    fn value_len(&self) -> usize {
        // Negative int32 values are sign-extended to ten bytes on the wire.
        varint_len(i64::from(*self) as u64)
    }
    fn write_value(&self, out: &mut Vec<u8>) {
        put_varint(out, i64::from(*self) as u64);
    }
}

impl<T: Field> Field for Box<T> {
    const WIRE: u8 = T::WIRE;
    fn read(r: &mut Reader<'_>, depth: u32) -> Result<Self, DecodeError> {
        T::read(r, depth).map(Box::new)
    }
    fn merge(&mut self, r: &mut Reader<'_>, depth: u32) -> Result<(), DecodeError> {
        (**self).merge(r, depth)
    }
    fn value_len(&self) -> usize {
        (**self).value_len()
    }
    fn write_value(&self, out: &mut Vec<u8>) {
        (**self).write_value(out)
    }
}

/// Reads a nested message's bytes and decodes them into `m`.
pub fn read_nested<M: Message>(
    m: &mut M,
    r: &mut Reader<'_>,
    depth: u32,
) -> Result<(), DecodeError> {
    let sub = r.bytes()?;
    m.merge_from(sub, depth + 1)
}
