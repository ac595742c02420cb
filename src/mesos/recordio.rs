//! RecordIO framing of the Mesos v1 streams: `<decimal length>\n<record bytes>` repeated.
//!
//! [`Reader`] pulls records from any `Read` incrementally, whatever the chunk boundaries of
//! the underlying transport, and hands each one out as a slice of its own buffer so the hot
//! path allocates nothing per record. Every malformed input is a distinct error; none panics.

use std::fmt;
use std::io::{self, Read};

/// Default cap on one record: far above any real event, low enough that a corrupt length
/// cannot make the scheduler allocate gigabytes.
pub const DEFAULT_MAX_RECORD: usize = 16 * 1024 * 1024;

/// A length prefix longer than this many digits cannot be a real record size.
const MAX_LENGTH_DIGITS: usize = 20;

const READ_CHUNK: usize = 64 * 1024;

/// Appends one framed record to `out`.
pub fn encode(record: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(record.len().to_string().as_bytes());
    out.push(b'\n');
    out.extend_from_slice(record);
}

/// Frames one record into a new buffer.
pub fn frame(record: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(record.len() + 12);
    encode(record, &mut out);
    out
}

#[derive(Debug)]
pub enum RecordIoError {
    Io(io::Error),
    /// The length prefix held something other than ASCII digits.
    NonNumericLength {
        prefix: String,
    },
    /// The length prefix was empty (a bare newline).
    EmptyLength,
    /// More digits than any real length has (or a value that overflows).
    LengthTooLong {
        digits: usize,
    },
    /// A well-formed length above the configured cap.
    RecordTooLarge {
        length: u64,
        max: usize,
    },
    /// The stream ended in the middle of a length prefix or a record. Inside a prefix no
    /// length is known yet, so `expected` is 0 and `received` counts the prefix bytes seen;
    /// no record can be cut short with `expected` 0, so the two cases never collide.
    UnexpectedEof {
        expected: u64,
        received: u64,
    },
}

impl fmt::Display for RecordIoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordIoError::Io(e) => write!(f, "recordio: read failed: {e}"),
            RecordIoError::NonNumericLength { prefix } => {
                write!(
                    f,
                    "recordio: record length is not a decimal number: {prefix:?}"
                )
            }
            RecordIoError::EmptyLength => write!(f, "recordio: empty record length"),
            RecordIoError::LengthTooLong { digits } => {
                write!(
                    f,
                    "recordio: record length has {digits} digits, more than any valid length"
                )
            }
            RecordIoError::RecordTooLarge { length, max } => {
                write!(
                    f,
                    "recordio: record of {length} bytes exceeds the {max}-byte cap"
                )
            }
            RecordIoError::UnexpectedEof {
                expected: 0,
                received,
            } => write!(
                f,
                "recordio: stream ended inside a length prefix ({received} bytes of it received)"
            ),
            RecordIoError::UnexpectedEof { expected, received } => write!(
                f,
                "recordio: stream ended inside a record ({received} of {expected} bytes received)"
            ),
        }
    }
}

impl std::error::Error for RecordIoError {}

impl From<io::Error> for RecordIoError {
    fn from(e: io::Error) -> Self {
        RecordIoError::Io(e)
    }
}

/// Records of at least this size are taken with their buffer by [`Reader::take_last`].
const TAKE_BUFFER_FROM: usize = 64 * 1024;

/// Incremental RecordIO reader.
pub struct Reader<R> {
    inner: R,
    buf: Vec<u8>,
    /// Start of unconsumed data in `buf`.
    pos: usize,
    /// End of valid data in `buf`.
    end: usize,
    max_record: usize,
    eof: bool,
    /// Where the record [`Reader::next_record`] returned last lies in `buf`.
    last: std::ops::Range<usize>,
}

impl<R: Read> Reader<R> {
    pub fn new(inner: R) -> Self {
        Self::with_max_record(inner, DEFAULT_MAX_RECORD)
    }

    pub fn with_max_record(inner: R, max_record: usize) -> Self {
        Reader {
            inner,
            buf: vec![0; READ_CHUNK],
            pos: 0,
            end: 0,
            max_record,
            eof: false,
            last: 0..0,
        }
    }

    pub fn get_ref(&self) -> &R {
        &self.inner
    }

    pub fn into_inner(self) -> R {
        self.inner
    }

    /// Reads more bytes after `end`, compacting or growing the buffer so that at least
    /// `want` more bytes past `pos` fit. Returns the number of bytes read (0 at EOF).
    fn fill(&mut self, want: usize) -> Result<usize, RecordIoError> {
        if self.pos > 0 && (self.end == self.pos || self.buf.len() - self.end < want) {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        let needed = self.end + want.max(1);
        // A big record (an OFFERS event of 10,000 offers is megabytes) needs a big buffer
        // once; give the room back as soon as what is left fits a normal one.
        if self.pos == 0 && self.buf.len() > 4 * READ_CHUNK && needed <= READ_CHUNK {
            self.buf.truncate(READ_CHUNK);
            self.buf.shrink_to_fit();
        }
        if needed > self.buf.len() {
            self.buf.resize(needed.max(READ_CHUNK), 0);
        }
        loop {
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(0);
                }
                Ok(n) => {
                    // A `Read` that claims more than it was given would send `end` past the
                    // buffer and every later slice would panic; refuse it instead.
                    if n > self.buf.len() - self.end {
                        return Err(RecordIoError::Io(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "inner reader reported more bytes than the buffer holds",
                        )));
                    }
                    self.end += n;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The next record, or `None` at a clean end of stream (between records).
    pub fn next_record(&mut self) -> Result<Option<&[u8]>, RecordIoError> {
        // Until a record is returned there is none to take.
        self.last = 0..0;
        // Length prefix: digits up to '\n'.
        let newline = loop {
            if let Some(i) = self.buf[self.pos..self.end]
                .iter()
                .position(|&b| b == b'\n')
            {
                break self.pos + i;
            }
            let pending = self.end - self.pos;
            check_prefix(&self.buf[self.pos..self.end])?;
            if self.eof || self.fill(MAX_LENGTH_DIGITS + 1)? == 0 {
                if pending == 0 {
                    return Ok(None);
                }
                return Err(RecordIoError::UnexpectedEof {
                    expected: 0,
                    received: pending as u64,
                });
            }
        };
        let prefix = &self.buf[self.pos..newline];
        check_prefix(prefix)?;
        if prefix.is_empty() {
            return Err(RecordIoError::EmptyLength);
        }
        let length = prefix
            .iter()
            .try_fold(0u64, |acc, &d| {
                acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })
            .ok_or(RecordIoError::LengthTooLong {
                digits: prefix.len(),
            })?;
        if length > self.max_record as u64 {
            return Err(RecordIoError::RecordTooLarge {
                length,
                max: self.max_record,
            });
        }
        let length = length as usize;
        self.pos = newline + 1;
        while self.end - self.pos < length {
            let missing = length - (self.end - self.pos);
            if self.eof || self.fill(missing)? == 0 {
                return Err(RecordIoError::UnexpectedEof {
                    expected: length as u64,
                    received: (self.end - self.pos) as u64,
                });
            }
        }
        let start = self.pos;
        self.pos += length;
        self.last = start..start + length;
        Ok(Some(&self.buf[start..start + length]))
    }

    /// The record [`Reader::next_record`] returned last (empty when it returned none).
    pub fn last(&self) -> &[u8] {
        &self.buf[self.last.clone()]
    }

    /// The record [`Reader::next_record`] returned last, owned, and where it lies in the
    /// vector. A large one (an OFFERS event of 10,000 offers is megabytes) takes the buffer
    /// it was read into, uncopied, and the reader goes on in a new one; a small one is copied.
    pub fn take_last(&mut self) -> (Vec<u8>, std::ops::Range<usize>) {
        let last = std::mem::replace(&mut self.last, 0..0);
        if last.len() < TAKE_BUFFER_FROM {
            let len = last.len();
            return (self.buf[last].to_vec(), 0..len);
        }
        // What was read past the record (the start of the next one) moves to the new buffer.
        let rest = self.end - self.pos;
        let mut fresh = vec![0; READ_CHUNK.max(rest)];
        fresh[..rest].copy_from_slice(&self.buf[self.pos..self.end]);
        let taken = std::mem::replace(&mut self.buf, fresh);
        self.pos = 0;
        self.end = rest;
        (taken, last)
    }
}

/// Rejects a (possibly partial) length prefix as soon as it cannot become valid.
fn check_prefix(prefix: &[u8]) -> Result<(), RecordIoError> {
    if prefix.iter().any(|b| !b.is_ascii_digit()) {
        let shown = &prefix[..prefix.len().min(MAX_LENGTH_DIGITS + 1)];
        return Err(RecordIoError::NonNumericLength {
            prefix: String::from_utf8_lossy(shown).into_owned(),
        });
    }
    if prefix.len() > MAX_LENGTH_DIGITS {
        return Err(RecordIoError::LengthTooLong {
            digits: prefix.len(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_of_a_big_record_is_given_back() {
        let mut stream = Vec::new();
        encode(&vec![b'x'; 20 * READ_CHUNK], &mut stream);
        for _ in 0..3 {
            encode(b"small", &mut stream);
        }
        let mut r = Reader::new(&stream[..]);
        assert_eq!(r.next_record().unwrap().unwrap().len(), 20 * READ_CHUNK);
        assert!(r.buf.len() >= 20 * READ_CHUNK);
        assert_eq!(r.next_record().unwrap().unwrap(), b"small");
        assert!(r.buf.len() <= READ_CHUNK, "{} bytes kept", r.buf.len());
        assert_eq!(r.next_record().unwrap().unwrap(), b"small");
        assert_eq!(r.next_record().unwrap().unwrap(), b"small");
        assert!(r.next_record().unwrap().is_none());
    }

    /// A reader that hands out at most `chunk` bytes a read.
    struct Chunked<'a>(&'a [u8], usize);

    impl Read for Chunked<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(out.len()).min(self.1);
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn bytes(len: usize, seed: usize) -> Vec<u8> {
        (0..len).map(|i| ((i + seed) % 253) as u8).collect()
    }

    #[test]
    fn a_large_record_is_taken_with_its_buffer_and_reading_goes_on() {
        // The first large record grows the buffer past the second's size, so the read that
        // brings the second also brings the records after it: they move to the new buffer.
        let (first, second) = (bytes(3 * READ_CHUNK + 100, 1), bytes(READ_CHUNK + 500, 2));
        let mut stream = Vec::new();
        encode(b"small", &mut stream);
        encode(&first, &mut stream);
        encode(&second, &mut stream);
        encode(b"after", &mut stream);
        encode(b"last", &mut stream);
        let mut r = Reader::new(Chunked(&stream, 8 * READ_CHUNK));

        assert_eq!(r.next_record().unwrap().unwrap(), b"small");
        let (small, at) = r.take_last();
        assert_eq!(&small[at], b"small", "a small record is copied");
        assert_eq!(r.next_record().unwrap().unwrap(), &first[..]);

        let read_at = r.next_record().unwrap().unwrap().as_ptr();
        assert!(r.end > r.pos, "the next records were read with it");
        let (taken, at) = r.take_last();
        assert_eq!(&taken[at.clone()], &second[..]);
        assert_eq!(
            taken[at].as_ptr(),
            read_at,
            "a large record is the buffer it was read into, not a copy"
        );
        assert_eq!(r.next_record().unwrap().unwrap(), b"after");
        assert_eq!(r.next_record().unwrap().unwrap(), b"last");
        assert!(r.next_record().unwrap().is_none());
        // Nothing returned, nothing to take.
        assert!(r.take_last().0.is_empty());
    }
}
