//! Reading a journal back without ever holding a line whole. A compacted line holds every
//! record (11 MB at 10,000 nodes); read whole, it sat below the model being decoded, and the
//! allocator kept its pages after the load (a restarted scheduler's 52 MB peak under
//! `mem: 32`). So the journal is read twice, from one open file:
//! 1. [`scan`] streams each line through its checksum and finds where the good part ends (a
//!    torn last line, or damage with more lines after it);
//! 2. [`replay`] parses the good lines, handing each record over as it is parsed: one
//!    record's text at a time.

use super::super::Replay;
use crate::hash::ContentHasher;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;
use std::io::{self, BufRead, Read};

/// What [`scan`] found after the header.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Scanned {
    /// Bytes from the start of the file to the end of the last good line.
    pub good: u64,
    /// Why the last line is not good (a write cut short by a crash), if it is not.
    pub torn: Option<String>,
}

/// A damaged line with more lines after it.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Damaged {
    /// 1-based, the header being line 1.
    pub line: usize,
    pub at: u64,
    pub why: String,
}

/// Checks every line from the reader's position (just after the header, at byte `start`).
pub(super) fn scan(reader: &mut impl BufRead, start: u64) -> io::Result<Result<Scanned, Damaged>> {
    let mut good = start;
    let mut number = 1;
    let mut torn: Option<String> = None;
    while let Some((n, verdict)) = check_line(reader)? {
        number += 1;
        if let Some(why) = torn.take() {
            // Whatever the damage, the line was whole when the next one was appended after
            // it (each append is fsynced before the next starts): dropping it would lose a
            // batch that was reported saved.
            return Ok(Err(Damaged {
                line: number - 1,
                at: good,
                why,
            }));
        }
        match verdict {
            Ok(()) => good += n,
            Err(why) => torn = Some(why),
        }
    }
    Ok(Ok(Scanned { good, torn }))
}

/// Reads one line, `<16 hex digits> <json>\n`: its length and whether its checksum holds;
/// `None` at the end of the file.
fn check_line(reader: &mut impl BufRead) -> io::Result<Option<(u64, Result<(), String>)>> {
    let mut head = [0u8; 17];
    let mut head_len = 0;
    let mut hash = ContentHasher::default();
    let mut n = 0u64;
    let mut ended = false;
    while !ended {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let (chunk, used) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                ended = true;
                (&buf[..i], i + 1)
            }
            None => (buf, buf.len()),
        };
        let into_head = chunk.len().min(head.len() - head_len);
        head[head_len..head_len + into_head].copy_from_slice(&chunk[..into_head]);
        head_len += into_head;
        hash.update(&chunk[into_head..]);
        n += used as u64;
        reader.consume(used);
    }
    if n == 0 {
        return Ok(None);
    }
    let verdict = if !ended {
        Err("no end of line".to_owned())
    } else if head_len < head.len() || head[16] != b' ' {
        Err("no checksum".to_owned())
    } else {
        match std::str::from_utf8(&head[..16])
            .ok()
            .and_then(|s| u64::from_str_radix(s, 16).ok())
        {
            None => Err("checksum is not hexadecimal".to_owned()),
            Some(sum) if sum != hash.finish() => Err("checksum mismatch".to_owned()),
            Some(_) => Ok(()),
        }
    };
    Ok(Some((n, verdict)))
}

/// Hands over the records of the lines [`scan`] found good, the reader being just after the
/// header (at byte `start`) and the good part ending at `good`. Within a line, puts come in
/// the order written, then the deletes. A good line that is not a batch (its checksum holds,
/// so this build or another wrote it so) stops the load: `Err` says why.
pub(super) fn replay(
    reader: &mut impl BufRead,
    start: u64,
    good: u64,
    each: &mut dyn FnMut(Replay<'_>),
) -> io::Result<Result<(), Damaged>> {
    let mut at = start;
    let mut number = 1;
    while at < good {
        number += 1;
        let mut head = [0u8; 17];
        reader.read_exact(&mut head)?;
        let mut line = UpToNewline {
            inner: &mut *reader,
            len: head.len() as u64,
            ended: false,
        };
        // serde_json reads its input a byte at a time: through a `BufReader`, std's
        // `bytes()` takes each from its buffer, where `UpToNewline::read` alone would copy
        // them one call each (the journal's load of 10,000 nodes was mostly those copies).
        let mut de = serde_json::Deserializer::from_reader(io::BufReader::new(&mut line));
        let parsed = Batch { each: &mut *each }
            .deserialize(&mut de)
            .and_then(|()| de.end());
        // The parser and its buffer hold `line`; its length is read once they are gone.
        drop(de);
        if let Err(e) = parsed {
            if e.is_io() {
                return Err(io::Error::other(e));
            }
            return Ok(Err(Damaged {
                line: number,
                at,
                why: format!("not a batch: {e}"),
            }));
        }
        let len = line.len + 1;
        if !line.ended {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the journal changed while it was read",
            ));
        }
        at += len;
    }
    Ok(Ok(()))
}

/// The rest of one line, its newline consumed and not handed over: a parser reading it sees
/// the end of the line as the end of its input.
struct UpToNewline<'r, R: BufRead> {
    inner: &'r mut R,
    /// Bytes of the line consumed so far, its newline left out.
    len: u64,
    ended: bool,
}

impl<R: BufRead> Read for UpToNewline<'_, R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.ended || out.is_empty() {
            return Ok(0);
        }
        let buf = self.inner.fill_buf()?;
        let window = &buf[..buf.len().min(out.len())];
        let (n, used) = match window.iter().position(|&b| b == b'\n') {
            Some(i) => {
                self.ended = true;
                (i, i + 1)
            }
            None => (window.len(), window.len()),
        };
        out[..n].copy_from_slice(&window[..n]);
        self.inner.consume(used);
        self.len += n as u64;
        Ok(n)
    }
}

/// One line's batch, `{"put": {key: record, ...}, "del": [key, ...]}`, handed over as parsed.
struct Batch<'e> {
    each: &'e mut dyn FnMut(Replay<'_>),
}

impl<'de> DeserializeSeed<'de> for Batch<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Batch<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(r#"a batch, {"put": {...}, "del": [...]}"#)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut dels: Vec<String> = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "put" => map.next_value_seed(Puts {
                    each: &mut *self.each,
                })?,
                "del" => dels = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        for key in &dels {
            (self.each)(Replay::Delete(key));
        }
        Ok(())
    }
}

/// The `put` object: each record's text is held only while it is handed over.
struct Puts<'e> {
    each: &'e mut dyn FnMut(Replay<'_>),
}

impl<'de> DeserializeSeed<'de> for Puts<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Puts<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of records")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            let record: Box<RawValue> = map.next_value()?;
            (self.each)(Replay::Put(&key, record.get().as_bytes()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::content_hash;

    fn line(json: &str) -> String {
        format!("{:016x} {json}\n", content_hash(json.as_bytes()))
    }

    fn replayed(text: &str) -> (io::Result<Result<Scanned, Damaged>>, Vec<String>) {
        let mut r = io::BufReader::with_capacity(7, text.as_bytes());
        let scanned = scan(&mut r, 0);
        let mut seen = Vec::new();
        if let Ok(Ok(s)) = &scanned {
            let mut r = io::BufReader::with_capacity(5, text.as_bytes());
            replay(&mut r, 0, s.good, &mut |rec| {
                seen.push(match rec {
                    Replay::Put(k, v) => format!("put {k}={}", String::from_utf8_lossy(v)),
                    Replay::Delete(k) => format!("del {k}"),
                })
            })
            .unwrap()
            .unwrap();
        }
        (scanned, seen)
    }

    /// Small buffers, so that lines, checksums and records straddle every refill.
    #[test]
    fn each_record_of_the_good_lines_is_handed_over_in_the_order_written() {
        let one = line(r#"{"put":{"b":{"x":[1,2]},"a":"s\n"},"del":[]}"#);
        let two = line(r#"{"put":{},"del":["b"],"later":{"ignored":true}}"#);
        let (scanned, seen) = replayed(&format!("{one}{two}"));
        let good = (one.len() + two.len()) as u64;
        assert_eq!(scanned.unwrap(), Ok(Scanned { good, torn: None }));
        assert_eq!(seen, [r#"put b={"x":[1,2]}"#, r#"put a="s\n""#, "del b"]);
    }

    #[test]
    fn a_bad_last_line_is_torn_and_a_bad_earlier_one_is_damage() {
        let one = line(r#"{"put":{"a":1}}"#);
        let two = line(r#"{"put":{"a":2}}"#);
        for (last, why) in [
            (two.trim_end().to_owned(), "no end of line"),
            ("0123 x\n".to_owned(), "no checksum"),
            (format!("g{}", &two[1..]), "checksum is not hexadecimal"),
            (two.replace('2', "3"), "checksum mismatch"),
        ] {
            let (scanned, seen) = replayed(&format!("{one}{last}"));
            let scanned = scanned.unwrap().unwrap();
            assert_eq!(scanned.good, one.len() as u64, "{why}");
            assert_eq!(scanned.torn.as_deref(), Some(why));
            assert_eq!(seen, ["put a=1"], "nothing of the torn line ({why})");
            if !last.ends_with('\n') {
                continue;
            }
            let (scanned, _) = replayed(&format!("{one}{last}{one}"));
            assert_eq!(
                scanned.unwrap(),
                Err(Damaged {
                    line: 3,
                    at: one.len() as u64,
                    why: why.to_owned()
                })
            );
        }
    }

    /// A line whose checksum holds was written so: it is not a torn write, whatever it holds.
    #[test]
    fn a_good_line_that_is_not_a_batch_stops_the_replay_naming_the_line() {
        let one = line(r#"{"put":{"a":1}}"#);
        let bad = line(r#"{"put":[1]}"#);
        let text = format!("{one}{bad}");
        let good = text.len() as u64;
        let mut r = io::BufReader::new(text.as_bytes());
        assert_eq!(scan(&mut r, 0).unwrap().unwrap().good, good);
        let mut r = io::BufReader::new(text.as_bytes());
        let err = replay(&mut r, 0, good, &mut |_| {}).unwrap().unwrap_err();
        assert_eq!((err.line, err.at), (3, one.len() as u64));
        assert!(err.why.contains("not a batch"), "{}", err.why);
    }
}
