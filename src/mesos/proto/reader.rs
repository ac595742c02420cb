//! Reading the wire: a cursor bounded to one message's bytes, with a fast path for the
//! single-byte varints that make up almost every key and length.

use super::{DecodeError, WIRE_FIXED32, WIRE_FIXED64, WIRE_LEN, WIRE_VARINT};

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
