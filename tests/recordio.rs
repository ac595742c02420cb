//! RecordIO framing through the public API: records must come out byte-exact whatever the
//! transport's chunking, and every kind of malformed stream must surface as its own error.

use std::io::{self, Read};

use storage_framework::mesos::recordio::{self, Reader, RecordIoError, DEFAULT_MAX_RECORD};

/// Hands out its data at most `chunk` bytes per `read`, like a socket delivering small
/// segments.
struct Chunked<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.chunk.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// Delivers `data` as exactly two reads, split at `at` (a read never crosses the split).
struct Split<'a> {
    parts: [&'a [u8]; 2],
}

impl Read for Split<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let part = if self.parts[0].is_empty() {
            &mut self.parts[1]
        } else {
            &mut self.parts[0]
        };
        let n = part.len().min(buf.len());
        buf[..n].copy_from_slice(&part[..n]);
        *part = &part[n..];
        Ok(n)
    }
}

/// Plays a script of read results: data, errors, then EOF.
struct Scripted {
    steps: Vec<io::Result<Vec<u8>>>,
}

impl Read for Scripted {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.steps.is_empty() {
            return Ok(0);
        }
        match self.steps.remove(0) {
            Ok(data) => {
                assert!(
                    data.len() <= buf.len(),
                    "script step larger than the buffer"
                );
                buf[..data.len()].copy_from_slice(&data);
                Ok(data.len())
            }
            Err(e) => Err(e),
        }
    }
}

/// Records whose contents look like framing: newlines, digits, a digit run followed by a
/// newline, and one record larger than the reader's initial buffer.
fn sample_records() -> Vec<Vec<u8>> {
    let mut big = Vec::with_capacity(70_000);
    for i in 0..70_000u32 {
        big.push(match i % 7 {
            0 => b'\n',
            1..=3 => b'0' + (i % 10) as u8,
            _ => (i * 31 % 251) as u8,
        });
    }
    vec![
        Vec::new(),
        b"\n".to_vec(),
        b"12\n3\n456\n".to_vec(),
        b"9\n99999999".to_vec(),
        (0..100u8)
            .map(|i| if i % 3 == 0 { b'\n' } else { b'0' + i % 10 })
            .collect(),
        big,
        Vec::new(),
    ]
}

fn encode_all(records: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        recordio::encode(r, &mut out);
    }
    out
}

/// Reads the stream to its end, failing on any error.
fn read_all<R: Read>(reader: &mut Reader<R>) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    loop {
        match reader.next_record() {
            Ok(Some(r)) => got.push(r.to_vec()),
            Ok(None) => return got,
            Err(e) => panic!("unexpected error after {} records: {e}", got.len()),
        }
    }
}

fn first_error(data: &[u8], max: usize) -> RecordIoError {
    let mut reader = Reader::with_max_record(data, max);
    loop {
        match reader.next_record() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("stream {data:?} ended cleanly, expected an error"),
            Err(e) => return e,
        }
    }
}

#[test]
fn encode_and_frame_agree_on_the_wire_form() {
    assert_eq!(recordio::frame(b"hello"), b"5\nhello");
    assert_eq!(recordio::frame(b""), b"0\n");
    let mut out = b"x".to_vec();
    recordio::encode(b"ab", &mut out);
    assert_eq!(out, b"x2\nab");
}

#[test]
fn chunk_sizes_do_not_change_the_records() {
    let records = sample_records();
    let stream = encode_all(&records);
    for chunk in [1, 2, 3, 7, 10, 11, 64, 4096, 65_535, 65_536, 1 << 20] {
        let mut reader = Reader::new(Chunked {
            data: &stream,
            chunk,
        });
        assert_eq!(read_all(&mut reader), records, "chunk size {chunk}");
        // A clean end stays clean.
        assert!(
            matches!(reader.next_record(), Ok(None)),
            "chunk size {chunk}"
        );
    }
}

#[test]
fn every_two_way_split_yields_the_same_records() {
    let records = sample_records();
    let stream = encode_all(&records);
    for at in 0..=stream.len() {
        let (a, b) = stream.split_at(at);
        let mut reader = Reader::new(Split { parts: [a, b] });
        for (i, want) in records.iter().enumerate() {
            match reader.next_record() {
                Ok(Some(got)) => assert!(got == want.as_slice(), "split {at}, record {i} differs"),
                other => panic!("split {at}, record {i}: got {other:?}"),
            }
        }
        assert!(matches!(reader.next_record(), Ok(None)), "split {at}");
    }
}

#[test]
fn max_record_is_inclusive() {
    let stream = encode_all(&[vec![7; 10], vec![8; 10]]);
    let mut reader = Reader::with_max_record(&stream[..], 10);
    assert_eq!(read_all(&mut reader), vec![vec![7; 10], vec![8; 10]]);
    assert_eq!(DEFAULT_MAX_RECORD, 16 * 1024 * 1024);
}

#[test]
fn non_numeric_length() {
    let e = first_error(b"1x\nab", DEFAULT_MAX_RECORD);
    assert!(
        matches!(&e, RecordIoError::NonNumericLength { prefix } if prefix == "1x"),
        "{e:?}"
    );
    assert!(e.to_string().contains("not a decimal number"), "{e}");
    assert!(e.to_string().contains("1x"), "{e}");
}

#[test]
fn non_numeric_length_is_caught_before_the_newline_arrives() {
    // A peer that never sends a newline must not keep the reader waiting for one.
    let mut reader = Reader::new(Scripted {
        steps: vec![Ok(b"3\nabcHTTP/1.1".to_vec())],
    });
    assert_eq!(reader.next_record().unwrap(), Some(&b"abc"[..]));
    let e = reader.next_record().unwrap_err();
    assert!(matches!(e, RecordIoError::NonNumericLength { .. }), "{e:?}");
}

#[test]
fn signs_and_spaces_are_not_digits() {
    for bad in [&b"-1\n"[..], b"+1\n", b" 1\n", b"1 \n", b"1\r\n", b"0x10\n"] {
        let e = first_error(bad, DEFAULT_MAX_RECORD);
        assert!(
            matches!(e, RecordIoError::NonNumericLength { .. }),
            "{bad:?}: {e:?}"
        );
    }
}

#[test]
fn empty_length() {
    let e = first_error(b"\n", DEFAULT_MAX_RECORD);
    assert!(matches!(e, RecordIoError::EmptyLength), "{e:?}");
    assert!(e.to_string().contains("empty record length"), "{e}");
    // Also after a good record.
    let e = first_error(b"1\na\n", DEFAULT_MAX_RECORD);
    assert!(matches!(e, RecordIoError::EmptyLength), "{e:?}");
}

#[test]
fn overlong_length() {
    let e = first_error(b"1234567890123456789012345\nx", DEFAULT_MAX_RECORD);
    assert!(
        matches!(e, RecordIoError::LengthTooLong { digits } if digits > 20),
        "{e:?}"
    );
    assert!(e.to_string().contains("digits"), "{e}");
    // Rejected without waiting for a newline that never comes.
    let e = first_error(b"1234567890123456789012345", DEFAULT_MAX_RECORD);
    assert!(matches!(e, RecordIoError::LengthTooLong { .. }), "{e:?}");
    // Twenty digits that overflow u64.
    let e = first_error(b"99999999999999999999\n", DEFAULT_MAX_RECORD);
    assert!(
        matches!(e, RecordIoError::LengthTooLong { digits: 20 }),
        "{e:?}"
    );
}

#[test]
fn leading_zeros_are_a_valid_length() {
    let mut reader = Reader::new(&b"0003\nabc"[..]);
    assert_eq!(read_all(&mut reader), vec![b"abc".to_vec()]);
}

#[test]
fn record_over_the_cap() {
    let e = first_error(b"2\nab11\nhello world", 10);
    assert!(
        matches!(
            e,
            RecordIoError::RecordTooLarge {
                length: 11,
                max: 10
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("11 bytes") && msg.contains("10-byte cap"),
        "{msg}"
    );
    // A huge declared length is refused from the prefix alone, before any allocation.
    let e = first_error(b"18446744073709551615\n", DEFAULT_MAX_RECORD);
    assert!(
        matches!(
            e,
            RecordIoError::RecordTooLarge {
                length: u64::MAX,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn eof_inside_a_record() {
    let e = first_error(b"10\nabc", DEFAULT_MAX_RECORD);
    assert!(
        matches!(
            e,
            RecordIoError::UnexpectedEof {
                expected: 10,
                received: 3
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("inside a record") && msg.contains("3 of 10"),
        "{msg}"
    );
    // With nothing of the record received at all.
    let e = first_error(b"1\na5\n", DEFAULT_MAX_RECORD);
    assert!(
        matches!(
            e,
            RecordIoError::UnexpectedEof {
                expected: 5,
                received: 0
            }
        ),
        "{e:?}"
    );
}

#[test]
fn eof_inside_a_length_prefix() {
    let e = first_error(b"3\nabc12", DEFAULT_MAX_RECORD);
    assert!(
        matches!(
            e,
            RecordIoError::UnexpectedEof {
                expected: 0,
                received: 2
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("inside a length prefix"), "{e}");
}

#[test]
fn empty_stream_is_a_clean_end() {
    let mut reader = Reader::new(&b""[..]);
    assert!(matches!(reader.next_record(), Ok(None)));
    assert!(matches!(reader.next_record(), Ok(None)));
}

#[test]
fn inner_io_error_surfaces_as_io() {
    let mut reader = Reader::new(Scripted {
        steps: vec![
            Ok(b"2\nhi1".to_vec()),
            Err(io::Error::new(
                io::ErrorKind::ConnectionReset,
                "peer went away",
            )),
        ],
    });
    assert_eq!(reader.next_record().unwrap(), Some(&b"hi"[..]));
    let e = reader.next_record().unwrap_err();
    match &e {
        RecordIoError::Io(inner) => assert_eq!(inner.kind(), io::ErrorKind::ConnectionReset),
        other => panic!("expected Io, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("read failed") && msg.contains("peer went away"),
        "{msg}"
    );
    // The error chain stays intact for callers that walk sources.
    let as_std: &dyn std::error::Error = &e;
    assert!(as_std.to_string().contains("recordio"));
}

#[test]
fn interrupted_reads_are_retried() {
    let interrupted = || Err(io::Error::from(io::ErrorKind::Interrupted));
    let mut reader = Reader::new(Scripted {
        steps: vec![
            interrupted(),
            Ok(b"5".to_vec()),
            interrupted(),
            interrupted(),
            Ok(b"\nhel".to_vec()),
            interrupted(),
            Ok(b"lo".to_vec()),
        ],
    });
    assert_eq!(reader.next_record().unwrap(), Some(&b"hello"[..]));
    assert!(matches!(reader.next_record(), Ok(None)));
    assert!(reader.get_ref().steps.is_empty());
}

#[test]
fn reader_that_overreports_is_an_error_not_a_panic() {
    struct Liar;
    impl Read for Liar {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            Ok(buf.len() + 1)
        }
    }
    let e = Reader::new(Liar).next_record().unwrap_err();
    assert!(matches!(e, RecordIoError::Io(_)), "{e:?}");
}

#[test]
fn into_inner_returns_the_reader() {
    let data = recordio::frame(b"abc");
    let mut reader = Reader::new(Chunked {
        data: &data,
        chunk: 2,
    });
    assert_eq!(reader.get_ref().chunk, 2);
    assert_eq!(reader.next_record().unwrap(), Some(&b"abc"[..]));
    let inner = reader.into_inner();
    assert!(inner.data.is_empty());
}
