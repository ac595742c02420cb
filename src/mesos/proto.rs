//! A small proto2 runtime for the Mesos messages in this crate.
//!
//! The messages are declared with [`message!`](crate::message) and
//! [`enumeration!`](crate::enumeration); each field says whether it is `req`, `opt` or `rep`
//! and carries its official field number. Reading goes through [`Reader`], a cursor over the
//! exact bytes of one message: quick-protobuf's `BytesReader` does not bound a nested field by
//! its parent's length, and its general varint routine was a tenth of the event decode time
//! (almost every key and length is a single byte). Unknown fields (and known numbers arriving with another wire type, as the
//! reference implementation treats them) are skipped; missing required fields are an error
//! that names the message path and the field.

use serde::de::{Deserialize, MapAccess};
use std::fmt;

pub const WIRE_VARINT: u8 = 0;
pub const WIRE_FIXED64: u8 = 1;
pub const WIRE_LEN: u8 = 2;
pub const WIRE_FIXED32: u8 = 5;

/// Nesting limit: Mesos messages are shallow; a hostile stream must not exhaust the stack
/// through recursive types such as `ContainerID.parent`.
pub const MAX_DEPTH: u32 = 32;

/// Why a protobuf message could not be decoded, with the path of fields leading to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// The outermost message being decoded.
    root: &'static str,
    /// Field names from the failing field outwards.
    fields: Vec<&'static str>,
    /// The innermost message, where the problem sits.
    message: &'static str,
    kind: DecodeErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeErrorKind {
    /// The bytes are not a well-formed protobuf encoding (truncation, bad varint, bad UTF-8).
    Malformed(String),
    /// A `required` field was absent.
    MissingField(&'static str),
    /// Messages nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl DecodeError {
    fn new(kind: DecodeErrorKind) -> Self {
        DecodeError {
            root: "",
            fields: Vec::new(),
            message: "",
            kind,
        }
    }

    fn malformed(why: impl Into<String>) -> Self {
        Self::new(DecodeErrorKind::Malformed(why.into()))
    }

    /// Adds the field through which the failing value was reached.
    fn within(mut self, field: &'static str) -> Self {
        self.fields.push(field);
        self
    }

    /// Called as the error leaves each message: the first call names the innermost message,
    /// the last the outermost.
    fn leaving(mut self, message: &'static str) -> Self {
        if self.message.is_empty() {
            self.message = message;
        }
        self.root = message;
        self
    }

    pub fn kind(&self) -> &DecodeErrorKind {
        &self.kind
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.root)?;
        for field in self.fields.iter().rev() {
            write!(f, ".{field}")?;
        }
        match &self.kind {
            DecodeErrorKind::Malformed(why) => write!(f, ": malformed protobuf: {why}")?,
            DecodeErrorKind::MissingField(field) => {
                write!(f, ": required field `{field}` missing")?
            }
            DecodeErrorKind::TooDeep => write!(f, ": nested deeper than {MAX_DEPTH} messages")?,
        }
        if self.message != self.root {
            write!(f, " (in {})", self.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for DecodeError {}

/// A cursor over the bytes of exactly one message.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    #[inline]
    pub fn is_eof(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[inline]
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        match self.buf.get(self.pos) {
            Some(&b) if b < 0x80 => {
                self.pos += 1;
                Ok(u64::from(b))
            }
            _ => self.varint_slow(),
        }
    }

    #[cold]
    fn varint_slow(&mut self) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(DecodeError::malformed(
                    "unexpected end of buffer in a varint",
                ));
            };
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(DecodeError::malformed("varint longer than 10 bytes"))
    }

    /// A length-delimited value: its bytes, which must lie inside this message.
    #[inline]
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.varint()?;
        let start = self.pos;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| start.checked_add(l))
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| {
                DecodeError::malformed(format!(
                    "length {len} runs past the end of the message ({} bytes left)",
                    self.buf.len() - start
                ))
            })?;
        self.pos = end;
        Ok(&self.buf[start..end])
    }

    #[inline]
    pub fn fixed64(&mut self) -> Result<u64, DecodeError> {
        let b = self
            .buf
            .get(self.pos..self.pos + 8)
            .ok_or_else(|| DecodeError::malformed("unexpected end of buffer in a fixed64"))?;
        self.pos += 8;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Skips a field this build does not know.
    pub fn skip(&mut self, wire: u8) -> Result<(), DecodeError> {
        let n = match wire {
            WIRE_VARINT => return self.varint().map(drop),
            WIRE_LEN => return self.bytes().map(drop),
            WIRE_FIXED64 => 8,
            WIRE_FIXED32 => 4,
            3 | 4 => {
                return Err(DecodeError::malformed(
                    "groups (wire types 3 and 4) are not supported",
                ))
            }
            other => return Err(DecodeError::malformed(format!("unknown wire type {other}"))),
        };
        if self.buf.len() - self.pos < n {
            return Err(DecodeError::malformed(
                "unexpected end of buffer in a fixed-width field",
            ));
        }
        self.pos += n;
        Ok(())
    }
}

/// A protobuf message: implemented by [`message!`](crate::message).
pub trait Message: Default {
    /// Full proto name, e.g. `mesos.Offer`, used in error messages.
    const NAME: &'static str;

    /// Reads one occurrence of field `number`. Returns `Ok(false)` when the number (or its wire
    /// type) is not one this message knows, so that the caller skips it.
    fn merge_field(
        &mut self,
        number: u32,
        wire: u8,
        r: &mut Reader<'_>,
        depth: u32,
        seen: &mut u64,
    ) -> Result<bool, DecodeError>;

    /// Fails on the first required field that `seen` (bit = field number) lacks.
    fn check_required(seen: u64) -> Result<(), DecodeError>;

    /// Encoded length of the message body (without its own tag or length prefix).
    fn body_len(&self) -> usize;

    fn write_body(&self, out: &mut Vec<u8>);

    /// Merges the encoded message in `buf` into `self`, as protobuf parsing does.
    fn merge_from(&mut self, buf: &[u8], depth: u32) -> Result<(), DecodeError> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::new(DecodeErrorKind::TooDeep).leaving(Self::NAME));
        }
        let mut r = Reader::new(buf);
        let mut seen = 0u64;
        while !r.is_eof() {
            let key = r.varint().map_err(|e| e.leaving(Self::NAME))?;
            let number = u32::try_from(key >> 3).map_err(|_| {
                DecodeError::malformed(format!("field number {} out of range", key >> 3))
                    .leaving(Self::NAME)
            })?;
            let wire = (key & 7) as u8;
            if number == 0 {
                return Err(DecodeError::malformed("field number 0").leaving(Self::NAME));
            }
            let known = self
                .merge_field(number, wire, &mut r, depth, &mut seen)
                .map_err(|e| e.leaving(Self::NAME))?;
            if !known {
                r.skip(wire).map_err(|e| e.leaving(Self::NAME))?;
            }
        }
        Self::check_required(seen).map_err(|e| e.leaving(Self::NAME))
    }

    /// Decodes one message from exactly `buf`.
    fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        let mut m = Self::default();
        m.merge_from(buf, 0)?;
        Ok(m)
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.body_len());
        self.write_body(&mut out);
        out
    }
}

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
fn key_len(number: u32) -> usize {
    varint_len(u64::from(number) << 3)
}

#[inline]
fn put_key(out: &mut Vec<u8>, number: u32, wire: u8) {
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

/// Mesos JSON, read the way the master's JSON-to-protobuf conversion reads it: `null` is an
/// unset field whatever the field's kind (a required one is then missing), unknown keys are
/// ignored, a key given twice is an error.
pub mod json {
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
}

/// Field handling per label. The `message!` macro calls `req::…`, `opt::…` or `rep::…` by the
/// label written in the declaration, so one macro arm serves all three.
pub mod req {
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
}

pub mod opt {
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
}

pub mod rep {
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
}

/// The error `check_required` returns.
pub fn missing(field: &'static str) -> DecodeError {
    DecodeError::new(DecodeErrorKind::MissingField(field))
}

/// Declares a protobuf message: a struct with serde (Mesos JSON) and [`Message`] impls.
///
/// ```ignore
/// message! {
///     /// doc
///     Offer = "mesos.Offer" {
///         req 1 id: OfferID,
///         opt 8 url: Url,        // Option<Url>
///         rep 5 resources: Resource, // Vec<Resource>
///     }
/// }
/// ```
#[macro_export]
macro_rules! message {
    (
        $(#[$meta:meta])*
        $name:ident = $full:literal {
            $( $label:ident $number:literal $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $crate::message_struct!(@munch [$(#[$meta])* $name] [] $( $label $field : $ty ; )*);

        impl $crate::mesos::proto::Message for $name {
            const NAME: &'static str = $full;

            #[inline]
            fn merge_field(
                &mut self,
                number: u32,
                wire: u8,
                r: &mut $crate::mesos::proto::Reader<'_>,
                depth: u32,
                seen: &mut u64,
            ) -> ::std::result::Result<bool, $crate::mesos::proto::DecodeError> {
                #[allow(unused_imports)]
                use $crate::mesos::proto::{req, opt, rep};
                let _ = (&r, &depth, &wire);
                match number {
                    $( $number => {
                        let known = $label::merge(&mut self.$field, stringify!($field), wire, r, depth)?;
                        if known { *seen |= 1u64 << ($number % 64); }
                        Ok(known)
                    } )*
                    _ => Ok(false),
                }
            }

            fn check_required(seen: u64) -> ::std::result::Result<(), $crate::mesos::proto::DecodeError> {
                #[allow(unused_imports)]
                use $crate::mesos::proto::{req, opt, rep};
                let _ = seen;
                $(
                    if $label::is_required() && seen & (1u64 << ($number % 64)) == 0 {
                        return Err($crate::mesos::proto::missing(stringify!($field)));
                    }
                )*
                Ok(())
            }

            #[inline]
            fn body_len(&self) -> usize {
                #[allow(unused_imports)]
                use $crate::mesos::proto::{req, opt, rep};
                0 $( + $label::len(&self.$field, $number) )*
            }

            #[inline]
            fn write_body(&self, out: &mut Vec<u8>) {
                #[allow(unused_imports)]
                use $crate::mesos::proto::{req, opt, rep};
                let _ = &out;
                $( $label::write(&self.$field, $number, out); )*
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(
                d: D,
            ) -> ::std::result::Result<Self, D::Error> {
                struct V;
                impl<'de> ::serde::de::Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("a ", $full, " object"))
                    }
                    fn visit_map<A: ::serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> ::std::result::Result<$name, A::Error> {
                        #[allow(unused_imports)]
                        use $crate::mesos::proto::{req, opt, rep};
                        use $crate::mesos::proto::json::{self, FieldDesc};
                        const FIELDS: &[FieldDesc] = &[$( FieldDesc {
                            name: json::name(stringify!($field)),
                            number: $number,
                            required: $label::is_required(),
                        } ),*];
                        const _: () = assert!(json::distinct_bits(FIELDS), "field numbers share a bit");
                        let lookup = |s: &str| -> Option<u32> {
                            $( {
                                const NAME: &str = json::name(stringify!($field));
                                if s == NAME {
                                    return Some($number);
                                }
                            } )*
                            None
                        };
                        let mut m = <$name as ::std::default::Default>::default();
                        json::read_object(FIELDS, lookup, &mut map, |number, map| match number {
                            $( $number => $label::from_json(&mut m.$field, map), )*
                            _ => unreachable!("a number from FIELDS"),
                        })?;
                        Ok(m)
                    }
                }
                d.deserialize_map(V)
            }
        }

        impl $crate::mesos::proto::Field for $name {
            const WIRE: u8 = $crate::mesos::proto::WIRE_LEN;
            #[inline]
            fn read(
                r: &mut $crate::mesos::proto::Reader<'_>,
                depth: u32,
            ) -> ::std::result::Result<Self, $crate::mesos::proto::DecodeError> {
                let mut m = Self::default();
                $crate::mesos::proto::read_nested(&mut m, r, depth)?;
                Ok(m)
            }
            #[inline]
            fn merge(
                &mut self,
                r: &mut $crate::mesos::proto::Reader<'_>,
                depth: u32,
            ) -> ::std::result::Result<(), $crate::mesos::proto::DecodeError> {
                $crate::mesos::proto::read_nested(self, r, depth)
            }
            #[inline]
            fn value_len(&self) -> usize {
                let n = <Self as $crate::mesos::proto::Message>::body_len(self);
                $crate::mesos::proto::varint_len(n as u64) + n
            }
            #[inline]
            fn write_value(&self, out: &mut Vec<u8>) {
                let n = <Self as $crate::mesos::proto::Message>::body_len(self);
                $crate::mesos::proto::put_varint(out, n as u64);
                <Self as $crate::mesos::proto::Message>::write_body(self, out);
            }
        }
    };
}

/// Builds the struct of a [`message!`]: `req` fields are plain, `opt` fields are `Option`,
/// `rep` fields are `Vec`; absent ones are left out of the JSON. (Reading JSON is
/// [`message!`]'s own `Deserialize`, so that `null` means absent for every field.)
#[doc(hidden)]
#[macro_export]
macro_rules! message_struct {
    (@munch [$(#[$meta:meta])* $name:ident] [$($out:tt)*]) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Default, ::serde::Serialize)]
        pub struct $name { $($out)* }
    };
    (@munch $hdr:tt [$($out:tt)*] req $field:ident : $ty:ty ; $($rest:tt)*) => {
        $crate::message_struct!(@munch $hdr [$($out)* pub $field: $ty,] $($rest)*);
    };
    (@munch $hdr:tt [$($out:tt)*] opt $field:ident : $ty:ty ; $($rest:tt)*) => {
        $crate::message_struct!(@munch $hdr [$($out)*
            #[serde(skip_serializing_if = "Option::is_none")]
            pub $field: Option<$ty>,] $($rest)*);
    };
    (@munch $hdr:tt [$($out:tt)*] rep $field:ident : $ty:ty ; $($rest:tt)*) => {
        $crate::message_struct!(@munch $hdr [$($out)*
            #[serde(skip_serializing_if = "Vec::is_empty")]
            pub $field: Vec<$ty>,] $($rest)*);
    };
}

/// Declares a proto2 enum. The first variant is the default, as in proto2. Values this build
/// does not know decode to `Other(n)` (protobuf) or `Other(-1)` (a JSON name), so that a
/// newer master's additions never break the stream; the caller decides what to do with them.
#[macro_export]
macro_rules! enumeration {
    (
        $(#[$meta:meta])*
        $name:ident { $( $variant:ident = $value:literal $json:literal ),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $variant, )+
            /// A value this build does not know.
            Other(i32),
        }

        impl Default for $name {
            fn default() -> Self {
                $crate::enumeration!(@first $($variant)+)
            }
        }

        impl $name {
            pub fn from_i32(v: i32) -> Self {
                match v {
                    $( $value => $name::$variant, )+
                    other => $name::Other(other),
                }
            }
            pub fn as_i32(self) -> i32 {
                match self {
                    $( $name::$variant => $value, )+
                    $name::Other(v) => v,
                }
            }
            /// The name Mesos uses for this value (in JSON and its docs).
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $json, )+
                    $name::Other(_) => "<unknown>",
                }
            }
            pub fn from_name(s: &str) -> Option<Self> {
                match s {
                    $( $json => Some($name::$variant), )+
                    _ => None,
                }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                match self {
                    $name::Other(v) => write!(f, "UNKNOWN({v})"),
                    other => f.write_str(other.as_str()),
                }
            }
        }

        impl $crate::mesos::proto::Field for $name {
            const WIRE: u8 = $crate::mesos::proto::WIRE_VARINT;
            #[inline]
            fn read(
                r: &mut $crate::mesos::proto::Reader<'_>,
                depth: u32,
            ) -> ::std::result::Result<Self, $crate::mesos::proto::DecodeError> {
                <i32 as $crate::mesos::proto::Field>::read(r, depth).map($name::from_i32)
            }
            #[inline]
            fn value_len(&self) -> usize {
                $crate::mesos::proto::Field::value_len(&self.as_i32())
            }
            #[inline]
            fn write_value(&self, out: &mut Vec<u8>) {
                $crate::mesos::proto::Field::write_value(&self.as_i32(), out)
            }
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> ::std::result::Result<S::Ok, S::Error> {
                match self {
                    $name::Other(v) => s.serialize_i32(*v),
                    other => s.serialize_str(other.as_str()),
                }
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> ::std::result::Result<Self, D::Error> {
                struct V;
                impl ::serde::de::Visitor<'_> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str(concat!("a ", stringify!($name), " name"))
                    }
                    fn visit_str<E: ::serde::de::Error>(self, s: &str) -> ::std::result::Result<$name, E> {
                        Ok($name::from_name(s).unwrap_or($name::Other(-1)))
                    }
                    fn visit_i64<E: ::serde::de::Error>(self, v: i64) -> ::std::result::Result<$name, E> {
                        i32::try_from(v).map($name::from_i32).map_err(|_| E::custom("enum value out of range"))
                    }
                    fn visit_u64<E: ::serde::de::Error>(self, v: u64) -> ::std::result::Result<$name, E> {
                        i32::try_from(v).map($name::from_i32).map_err(|_| E::custom("enum value out of range"))
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
    (@first $first:ident $($rest:ident)*) => { Self::$first };
}
