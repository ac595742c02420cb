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

mod error;
mod field;
pub mod json;
mod macros;
mod reader;

// Field handling per label. The `message!` macro calls `req::…`, `opt::…` or `rep::…` by the
// label written in the declaration, so one macro arm serves all three.
pub mod opt;
pub mod rep;
pub mod req;

pub use error::{DecodeError, DecodeErrorKind};
pub use field::{put_varint, read_nested, varint_len, Field};
pub use reader::Reader;

// What the label modules reach through `use super::*`.
use field::{key_len, put_key};
use serde::de::{Deserialize, MapAccess};

pub const WIRE_VARINT: u8 = 0;
pub const WIRE_FIXED64: u8 = 1;
pub const WIRE_LEN: u8 = 2;
pub const WIRE_FIXED32: u8 = 5;

/// Nesting limit: Mesos messages are shallow; a hostile stream must not exhaust the stack
/// through recursive types such as `ContainerID.parent`.
pub const MAX_DEPTH: u32 = 32;

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

/// The error `check_required` returns.
pub fn missing(field: &'static str) -> DecodeError {
    DecodeError::new(DecodeErrorKind::MissingField(field))
}
