//! A gateway listing (`[item, item, ...]`) cut into its items' text as it streams, so that
//! each item is typed from a slice and neither the listing's whole text nor a JSON tree of
//! it is ever held (at 10,000 SDSs the tree of one listing was some 54 MB of heap).
//!
//! Why not serde_json's reader: its parser asks a `Read` for one byte at a time and, to hand
//! an item over whole, copies it into a string of its own, which the item's type then parses
//! a second time; on a health poll of 10,000 nodes that was a tenth of the scheduler's CPU.
//! This only finds where each item ends (strings and nesting, nothing else), and the typed
//! parse, which checks everything, runs once per item on its bytes.

use std::io::{self, BufRead, BufReader, Read};

/// An item's text may not be longer than this: a gateway's object is a few KB.
pub const MAX_ITEM: usize = 1 << 20;

/// Why a listing could not be read.
#[derive(Debug)]
pub enum ListError {
    /// Not a listing, or an item its taker refused: the words to show.
    Bad(String),
    Io(io::Error),
}

/// Where the cutter stands between bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum At {
    /// Before the opening `[`.
    Start,
    /// After `[` or after a `,`: an item (or, after `[`, the closing `]`) comes next.
    NextItem {
        first: bool,
    },
    Item(InItem),
    /// After the closing `]`: only whitespace may follow.
    End,
}

/// Inside an item: how many brackets deep, in a string or not.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct InItem {
    depth: usize,
    string: bool,
    escaped: bool,
}

/// What a byte inside an item leads to.
enum Step {
    Next,
    /// A string's plain run this long: none of it needs a look.
    Skip(usize),
    /// The item ended before this byte, a `,` or (`list`) the list's closing `]`.
    Ends {
        list: bool,
    },
}

impl InItem {
    /// The byte `rest[0]` of item `place`.
    fn byte(&mut self, rest: &[u8], place: usize) -> Result<Step, ListError> {
        let b = rest[0];
        if self.string {
            if self.escaped {
                self.escaped = false;
            } else if b == b'\\' {
                self.escaped = true;
            } else if b == b'"' {
                self.string = false;
            } else {
                // The rest of a string's plain run at once: most of a listing is in its
                // strings.
                let run = rest.iter().position(|&c| c == b'"' || c == b'\\');
                return Ok(Step::Skip(run.unwrap_or(rest.len())));
            }
            return Ok(Step::Next);
        }
        match b {
            b'"' => self.string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' if self.depth > 0 => self.depth -= 1,
            b',' | b']' if self.depth == 0 => return Ok(Step::Ends { list: b == b']' }),
            b'}' => return Err(bad(&format!("not JSON (item {place}: '}}' without '{{')"))),
            _ => {}
        }
        Ok(Step::Next)
    }
}

/// The cutter's state across the reads of one listing.
struct Cutter {
    at: At,
    /// The current item's text so far (one buffer, reused for every item).
    item: Vec<u8>,
    place: usize,
}

/// Hands `take` the text of each item of the JSON list read from `body`, in order, with its
/// place. An error names the place of the item it concerns.
pub fn each_item(
    body: &mut dyn Read,
    take: &mut dyn FnMut(usize, &str) -> Result<(), String>,
) -> Result<(), ListError> {
    let mut reader = BufReader::with_capacity(8 * 1024, body);
    let mut cutter = Cutter {
        at: At::Start,
        item: Vec::new(),
        place: 0,
    };
    loop {
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ListError::Io(e)),
        };
        if chunk.is_empty() {
            return match cutter.at {
                At::End => Ok(()),
                At::Start => Err(bad("not JSON (the reply is empty)")),
                _ => Err(bad("not JSON (the list ends before its closing ']')")),
            };
        }
        let len = chunk.len();
        cutter.feed(chunk, take)?;
        reader.consume(len);
    }
}

impl Cutter {
    /// Takes the next bytes of the listing, handing over each item that ends in them.
    fn feed(
        &mut self,
        chunk: &[u8],
        take: &mut dyn FnMut(usize, &str) -> Result<(), String>,
    ) -> Result<(), ListError> {
        // Bytes of the current item not yet copied start here in `chunk`.
        let mut from = matches!(self.at, At::Item(_)).then_some(0);
        let mut i = 0;
        while i < chunk.len() {
            let b = chunk[i];
            match &mut self.at {
                At::Start => match b {
                    b'[' => self.at = At::NextItem { first: true },
                    _ if b.is_ascii_whitespace() => {}
                    _ => return Err(bad(&format!("expected a JSON list, got {}", kind(b)))),
                },
                At::NextItem { first } => match b {
                    _ if b.is_ascii_whitespace() => {}
                    b']' if *first => self.at = At::End,
                    b']' | b',' => {
                        return Err(bad(&format!("not JSON (item {} is empty)", self.place)));
                    }
                    _ => {
                        self.at = At::Item(InItem::default());
                        from = Some(i);
                        continue;
                    }
                },
                At::Item(inside) => match inside.byte(&chunk[i..], self.place)? {
                    Step::Next => {}
                    Step::Skip(n) => {
                        i += n;
                        continue;
                    }
                    Step::Ends { list } => {
                        let start = from.take().unwrap_or(i);
                        keep(&mut self.item, &chunk[start..i], self.place)?;
                        hand_over(&self.item, self.place, take)?;
                        self.item.clear();
                        self.place += 1;
                        self.at = if list {
                            At::End
                        } else {
                            At::NextItem { first: false }
                        };
                    }
                },
                At::End => {
                    if !b.is_ascii_whitespace() {
                        return Err(bad("not JSON (text after the list's closing ']')"));
                    }
                }
            }
            i += 1;
        }
        if let Some(start) = from {
            keep(&mut self.item, &chunk[start..], self.place)?;
        }
        Ok(())
    }
}

/// Adds `bytes` to the item's text, within [`MAX_ITEM`].
fn keep(item: &mut Vec<u8>, bytes: &[u8], place: usize) -> Result<(), ListError> {
    if item.len() + bytes.len() > MAX_ITEM {
        return Err(bad(&format!(
            "item {place} is longer than {} KiB",
            MAX_ITEM / 1024
        )));
    }
    item.extend_from_slice(bytes);
    Ok(())
}

fn hand_over(
    item: &[u8],
    place: usize,
    take: &mut dyn FnMut(usize, &str) -> Result<(), String>,
) -> Result<(), ListError> {
    let text = std::str::from_utf8(item.trim_ascii_end())
        .map_err(|_| bad(&format!("not JSON (item {place} is not UTF-8)")))?;
    take(place, text).map_err(ListError::Bad)
}

fn bad(detail: &str) -> ListError {
    ListError::Bad(detail.to_string())
}

/// What a JSON value starting with `b` is, in the words of `api::kind`.
fn kind(b: u8) -> &'static str {
    match b {
        b'{' => "an object",
        b'"' => "a string",
        b't' | b'f' => "a boolean",
        b'n' => "null",
        b'-' | b'0'..=b'9' => "a number",
        _ => "no JSON value",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The items' texts of `text` read `chunk` bytes at a time, or the error's words.
    fn cut(text: &str, chunk: usize) -> Result<Vec<String>, String> {
        struct Trickle<'a>(&'a [u8], usize);
        impl Read for Trickle<'_> {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let n = self.0.len().min(self.1).min(buf.len());
                buf[..n].copy_from_slice(&self.0[..n]);
                self.0 = &self.0[n..];
                Ok(n)
            }
        }
        let mut got = Vec::new();
        each_item(&mut Trickle(text.as_bytes(), chunk), &mut |place, t| {
            assert_eq!(place, got.len());
            got.push(t.to_string());
            Ok(())
        })
        .map(|()| got)
        .map_err(|e| match e {
            ListError::Bad(d) => d,
            ListError::Io(e) => e.to_string(),
        })
    }

    #[test]
    fn items_are_cut_where_they_end_whatever_the_reads() {
        let text = r#" [ {"id": "a,]}", "n": [1, {"x": "\"]"}]}, "s\\", 3 , [] ,{} ] "#;
        let want = vec![
            r#"{"id": "a,]}", "n": [1, {"x": "\"]"}]}"#.to_string(),
            r#""s\\""#.to_string(),
            "3".to_string(),
            "[]".to_string(),
            "{}".to_string(),
        ];
        for chunk in [1, 2, 3, 7, 8192] {
            assert_eq!(cut(text, chunk), Ok(want.clone()), "reads of {chunk}");
        }
        assert_eq!(cut("[]", 1), Ok(vec![]));
        assert_eq!(cut("\n[ ]\n", 1), Ok(vec![]));
    }

    #[test]
    fn what_is_not_a_listing_is_named() {
        let err = |text: &str| cut(text, 3).unwrap_err();
        assert_eq!(
            err(r#"{"id": "c1"}"#),
            "expected a JSON list, got an object"
        );
        assert_eq!(err("null"), "expected a JSON list, got null");
        assert_eq!(err("  7"), "expected a JSON list, got a number");
        assert!(err("").contains("empty"), "{}", err(""));
        assert!(err("[1, 2").contains("ends before"), "{}", err("[1, 2"));
        assert!(err("[1,]").contains("item 1 is empty"), "{}", err("[1,]"));
        assert!(err("[,1]").contains("item 0 is empty"), "{}", err("[,1]"));
        assert!(err("[1] x").contains("after the list"), "{}", err("[1] x"));
        assert!(err("[1}]").contains("item 0"), "{}", err("[1}]"));
        assert!(err("[\"unclosed]").contains("ends before"));
    }

    #[test]
    fn an_item_past_the_bound_is_refused_without_holding_it() {
        let long = format!("[\"{}\"]", "x".repeat(MAX_ITEM));
        assert!(cut(&long, 8192).unwrap_err().contains("item 0 is longer"));
    }

    #[test]
    fn bytes_that_are_not_utf8_are_refused() {
        let mut got = 0;
        let e = each_item(&mut &b"[\"\xff\"]"[..], &mut |_, _| {
            got += 1;
            Ok(())
        })
        .unwrap_err();
        assert!(matches!(e, ListError::Bad(d) if d.contains("not UTF-8")));
        assert_eq!(got, 0);
    }
}
