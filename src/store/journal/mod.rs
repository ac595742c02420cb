//! The file store: an append-only journal of record batches, compacted now and then.
//!
//! Why a journal and not one file per node: a launch must reach the disk as one unit (the
//! node record and the launch sequence in the root), and a batch of a launch wave touches
//! thousands of nodes. One appended line per batch is atomic on reload (a line either checks
//! out or is the torn tail) and costs one fsync; per-node files would cost a
//! write-fsync-rename-fsync per node and give no atomicity across them.
//!
//! Format (text, so an operator can read it):
//!
//! ```text
//! storage-framework-journal 2
//! <16 hex digits: FNV-1a of the JSON> {"put":{"root":{...},"node/a1":{...}},"del":["node/a2"]}
//! ...
//! ```
//!
//! A line that is the last one and lacks its newline or fails its checksum is a write cut
//! short by a crash: it is dropped with a log line (its batch was never reported saved, so
//! nothing that depended on it left the scheduler). Any other bad line stops the load with an
//! error naming the file, the line and its byte offset. When the journal has grown to twice
//! its compacted size, the next save rewrites it as one batch of every record through
//! [`FileStore`] (write temp, fsync, rename, fsync the directory). A file in the
//! single-document format of earlier builds is read as [`Loaded::Legacy`] and rewritten as a
//! journal on the first save.
//!
//! One writer: every write first takes the [`WriterLock`] on `<journal>.lock` (the scheduler
//! takes it when it opens the store, through [`JournalStore::lock`]) and holds it for the
//! life of the store. A store made by [`JournalStore::read_only`] never locks and never
//! writes, not even to remove a stray temporary file, which may be a holder's compaction
//! under way.

use super::{
    Change, FileStore, Loaded, Opened, RecordStore, Replay, Store, StoreError, WriterLock,
};
#[cfg(test)]
use crate::hash::content_hash;
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

mod read;

const HEADER: &[u8] = b"storage-framework-journal 2\n";
/// Below this size the journal is never compacted (a small cluster's journal stays small).
const COMPACT_MIN_BYTES: u64 = 1 << 20;

pub struct JournalStore {
    file: FileStore,
    append: Option<File>,
    /// Length of the journal's good part (what a load accepted, plus our appends).
    len: u64,
    /// Length right after the last rewrite: the journal is compacted at twice that.
    compacted_len: u64,
    /// The file must be rewritten before the next append (earlier format, a failed append
    /// that could not be undone).
    rewrite: bool,
    /// A torn last line to cut off before the first append.
    truncate_to: Option<u64>,
    written: u64,
    /// Held from the first write (or [`JournalStore::lock`]) until the store is dropped.
    lock: Option<WriterLock>,
    read_only: bool,
}

impl JournalStore {
    pub fn new(path: impl AsRef<Path>) -> Result<JournalStore, StoreError> {
        Ok(JournalStore {
            file: FileStore::new(path)?,
            append: None,
            len: 0,
            compacted_len: 0,
            rewrite: false,
            truncate_to: None,
            written: 0,
            lock: None,
            read_only: false,
        })
    }

    /// A store that reads beside a running scheduler (`-store.dump`, tests): no lock, and
    /// every write is refused.
    pub fn read_only(path: impl AsRef<Path>) -> Result<JournalStore, StoreError> {
        let mut store = JournalStore::new(path)?;
        store.read_only = true;
        Ok(store)
    }

    /// Takes the writer lock now (it is held already after the first write), so that a
    /// second scheduler stops at its start rather than at its first save.
    pub fn lock(&mut self) -> Result<(), StoreError> {
        if self.lock.is_some() {
            return Ok(());
        }
        if self.read_only {
            return Err(StoreError::Unsupported {
                what: format!("{} was opened to read only", self.describe()),
            });
        }
        let path = WriterLock::path_for(self.file.path());
        self.lock = Some(WriterLock::take(&path, self.file.dir())?);
        Ok(())
    }

    pub fn path(&self) -> &Path {
        self.file.path()
    }

    fn path_buf(&self) -> PathBuf {
        self.file.path().to_path_buf()
    }

    fn corrupt(&self, detail: String) -> StoreError {
        StoreError::Corrupt {
            origin: Some(self.describe()),
            detail,
        }
    }

    fn io(&self, action: &'static str) -> impl FnOnce(io::Error) -> StoreError {
        let path = self.path_buf();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    }

    /// Hands each whole line's records to `each` ([`read`]): a line only once its checksum
    /// holds, and nothing of a torn last line.
    fn read_journal(
        &mut self,
        file: File,
        each: &mut dyn FnMut(Replay<'_>),
    ) -> Result<(), StoreError> {
        let start = HEADER.len() as u64;
        let mut reader = BufReader::new(file);
        reader
            .seek(SeekFrom::Start(start))
            .map_err(self.io("read"))?;
        let scanned = read::scan(&mut reader, start)
            .map_err(self.io("read"))?
            .map_err(|d| {
                self.damaged(
                    d,
                    "and more records follow it, so it is not a write cut short by a crash",
                )
            })?;
        reader
            .seek(SeekFrom::Start(start))
            .map_err(self.io("read"))?;
        read::replay(&mut reader, start, scanned.good, each)
            .map_err(self.io("read"))?
            .map_err(|d| {
                self.damaged(
                    d,
                    "although its checksum holds: it was written so (by another build, or by hand)",
                )
            })?;
        if let Some(why) = scanned.torn {
            log::warn!(
                "{}: dropped its last record, cut short by a crash ({why}); it was never reported saved",
                self.describe()
            );
            self.truncate_to = Some(scanned.good);
        }
        self.len = scanned.good;
        self.compacted_len = scanned.good;
        Ok(())
    }

    fn damaged(&self, d: read::Damaged, after: &str) -> StoreError {
        self.corrupt(format!(
            "line {} (at byte {}) is damaged ({}) {after}",
            d.line, d.at, d.why
        ))
    }

    fn open_append(&mut self) -> Result<&mut File, StoreError> {
        if self.append.is_none() {
            let f = OpenOptions::new()
                .write(true)
                .open(self.file.path())
                .map_err(self.io("open for writing"))?;
            if let Some(len) = self.truncate_to {
                f.set_len(len)
                    .and_then(|()| f.sync_data())
                    .map_err(self.io("cut the torn last record off"))?;
                self.truncate_to = None;
            }
            self.len = f.metadata().map_err(self.io("stat"))?.len();
            self.append = Some(f);
        }
        Ok(self.append.as_mut().expect("opened above"))
    }
}

/// One journal line built whole in a buffer: the tests' reference for what [`stream_line`]
/// writes.
#[cfg(test)]
#[derive(Default)]
struct Line {
    /// Where the checksum and the JSON start, once the first record is in.
    at: Option<(usize, usize)>,
}

#[cfg(test)]
impl Line {
    fn start(out: &mut Vec<u8>) -> (usize, usize) {
        let sum_at = out.len();
        out.extend_from_slice(b"0000000000000000 ");
        let json_at = out.len();
        out.extend_from_slice(b"{\"put\":{");
        (sum_at, json_at)
    }

    fn put(&mut self, out: &mut Vec<u8>, key: &str, value: &[u8]) {
        if self.at.is_none() {
            self.at = Some(Line::start(out));
        } else {
            out.push(b',');
        }
        // A string serializes without error.
        let _ = serde_json::to_writer(&mut *out, key);
        out.push(b':');
        out.extend_from_slice(value);
    }

    /// Ends the line; a line with no put is written only when it deletes something.
    fn finish(self, out: &mut Vec<u8>, dels: &[&str]) {
        let (sum_at, json_at) = match self.at {
            Some(at) => at,
            None if dels.is_empty() => return,
            None => Line::start(out),
        };
        out.extend_from_slice(b"},\"del\":");
        let _ = serde_json::to_writer(&mut *out, dels);
        out.push(b'}');
        let sum = format!("{:016x}", content_hash(&out[json_at..]));
        out[sum_at..sum_at + 16].copy_from_slice(sum.as_bytes());
        out.push(b'\n');
    }
}

/// Counts and hashes what goes through to `out`: the JSON of a line, whose checksum leads it.
struct Hashing<'w, W: Write> {
    out: &'w mut W,
    hash: crate::hash::ContentHasher,
    len: u64,
}

impl<W: Write> Hashing<'_, W> {
    /// Starts a line: zeros where its checksum goes, then the JSON's opening.
    fn open_line(&mut self) -> io::Result<()> {
        self.out.write_all(b"0000000000000000 ")?;
        self.write_all(b"{\"put\":{")
    }
}

impl<W: Write> Write for Hashing<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.out.write(buf)?;
        self.hash.update(&buf[..n]);
        self.len += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Writes at a position of the file, whatever its offset (the journal's own handle is not
/// opened for appending: the checksum is written back at the line's start).
struct At<'f> {
    file: &'f File,
    pos: u64,
}

impl Write for At<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let n = self.file.write_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes one batch's line, `<hash> <json>\n`, into `out` as its records are made, with
/// zeros where the hash goes: a batch is megabytes in a 10,000-node launch wave or a
/// compaction, and built whole in memory it was the largest thing the scheduler held (6.6 MB
/// at 10,000 agents). The hash to write back at the line's start and the line's length;
/// `None`, and nothing written, when there is nothing to put or delete.
fn stream_line<W: Write>(
    out: &mut W,
    puts: &mut super::Records<'_>,
    deletes: &mut dyn FnMut() -> Vec<String>,
) -> io::Result<Option<(u64, u64)>> {
    let mut json = Hashing {
        out,
        hash: Default::default(),
        len: 0,
    };
    let mut failed = None;
    let mut put = |k: &str, v: &[u8]| {
        if failed.is_some() {
            return;
        }
        let first = json.len == 0;
        let written = (|| {
            if first {
                json.open_line()?;
            } else {
                json.write_all(b",")?;
            }
            serde_json::to_writer(&mut json, k)?;
            json.write_all(b":")?;
            json.write_all(v)
        })();
        failed = written.err();
    };
    puts(&mut put);
    if let Some(e) = failed {
        return Err(e);
    }
    let dels = deletes();
    if json.len == 0 {
        if dels.is_empty() {
            return Ok(None);
        }
        json.open_line()?;
    }
    json.write_all(b"},\"del\":")?;
    serde_json::to_writer(&mut json, &dels)?;
    json.write_all(b"}")?;
    let (sum, json_len) = (json.hash.finish(), json.len);
    out.write_all(b"\n")?;
    Ok(Some((sum, 17 + json_len + 1)))
}

/// Writes a journal of one line holding every record `each` gives into the empty `file`,
/// streamed as [`stream_line`] makes it, the checksum written back at the line's start.
/// Returns the bytes written.
fn write_compacted(file: &File, each: &mut super::Records<'_>) -> io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let mut out = io::BufWriter::with_capacity(64 * 1024, file);
    out.write_all(HEADER)?;
    let sum_at = HEADER.len() as u64;
    // Nothing to put: the header alone (a compaction deletes nothing).
    let line = stream_line(&mut out, each, &mut Vec::new)?;
    out.flush()?;
    drop(out);
    let Some((sum, line_len)) = line else {
        return Ok(sum_at);
    };
    file.write_at(format!("{sum:016x}").as_bytes(), sum_at)?;
    Ok(sum_at + line_len)
}

impl JournalStore {
    /// Appends one batch's line, streamed as it is made, and syncs it; a failed write is cut
    /// off again. False when the batch had nothing to write.
    fn append_batch(
        &mut self,
        puts: &mut super::Records<'_>,
        deletes: &mut dyn FnMut() -> Vec<String>,
    ) -> Result<bool, StoreError> {
        use std::os::unix::fs::FileExt;
        if !self.file.path().exists() {
            self.replace_all(&[])?;
        }
        let path = self.path_buf();
        self.open_append()?;
        let start = self.len;
        let file = self.append.as_ref().expect("opened above");
        let written = (|| {
            let mut out = io::BufWriter::with_capacity(64 * 1024, At { file, pos: start });
            let line = stream_line(&mut out, puts, deletes)?;
            out.flush()?;
            if let Some((sum, _)) = line {
                // Until this is written and synced the line's checksum is zeros: a crash
                // before leaves a torn last line, which loading cuts off.
                file.write_at(format!("{sum:016x}").as_bytes(), start)?;
                file.sync_data()?;
            }
            Ok(line.map(|(_, len)| len))
        })();
        match written {
            Ok(None) => Ok(false),
            Ok(Some(len)) => {
                // The first batch of an empty journal is everything there is: measure growth
                // from there, or the first saves after it would compact at once.
                let was_empty = self.len <= HEADER.len() as u64;
                self.len += len;
                self.written += len;
                if was_empty {
                    self.compacted_len = self.len;
                }
                Ok(true)
            }
            Err(source) => {
                // Cut the partial line off so the next append does not follow garbage; if that
                // fails too, rewrite the whole file next time.
                if file.set_len(start).and_then(|()| file.sync_data()).is_err() {
                    self.rewrite = true;
                    self.append = None;
                }
                Err(StoreError::Io {
                    action: "append to",
                    path,
                    source,
                })
            }
        }
    }
}

impl RecordStore for JournalStore {
    fn load_all(&mut self) -> Result<Loaded, StoreError> {
        let mut records = BTreeMap::new();
        let opened = self.load_each(&mut |record| match record {
            Replay::Put(k, v) => {
                records.insert(k.to_owned(), v.to_vec());
            }
            Replay::Delete(k) => {
                records.remove(k);
            }
        })?;
        Ok(match opened {
            Opened::Empty => Loaded::Empty,
            Opened::Records => Loaded::Records(records),
            Opened::Legacy(bytes) => Loaded::Legacy(bytes),
        })
    }

    fn load_each(&mut self, each: &mut dyn FnMut(Replay<'_>)) -> Result<Opened, StoreError> {
        self.append = None;
        self.truncate_to = None;
        if self.lock.is_some() {
            self.file.remove_stray_temp();
        }
        let mut file = match File::open(self.file.path()) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Opened::Empty),
            Err(e) => return Err(self.io("read")(e)),
        };
        let mut head = vec![0; HEADER.len()];
        let n = read_up_to(&mut file, &mut head).map_err(self.io("read"))?;
        if head[..n] != *HEADER {
            // Not a journal: the single-document format of earlier builds, or damage that
            // its decoder names (empty, truncated, not JSON, another format or version).
            let bytes = fs::read(self.file.path()).map_err(self.io("read"))?;
            self.rewrite = true;
            return Ok(Opened::Legacy(bytes));
        }
        let file = File::open(self.file.path()).map_err(self.io("read"))?;
        self.read_journal(file, each)?;
        Ok(Opened::Records)
    }

    fn apply(&mut self, batch: &[Change]) -> Result<(), StoreError> {
        let dels: Vec<String> = batch
            .iter()
            .filter_map(|c| match c {
                Change::Delete(k) => Some(k.clone()),
                Change::Put(..) => None,
            })
            .collect();
        let mut dels = Some(dels);
        self.apply_with(
            &mut |put| {
                for c in batch {
                    if let Change::Put(k, v) = c {
                        put(k, v);
                    }
                }
            },
            &mut || dels.take().unwrap_or_default(),
        )
        .map(|_| ())
    }

    fn apply_with(
        &mut self,
        puts: &mut super::Records<'_>,
        deletes: &mut dyn FnMut() -> Vec<String>,
    ) -> Result<bool, StoreError> {
        self.lock()?;
        if self.rewrite {
            return Err(StoreError::Unsupported {
                what: format!("{} must be rewritten whole first", self.describe()),
            });
        }
        self.append_batch(puts, deletes)
    }
    fn replace_all(&mut self, records: &[(String, Vec<u8>)]) -> Result<(), StoreError> {
        self.replace_all_with(&mut |put| {
            for (k, v) in records {
                put(k, v);
            }
        })
    }

    fn replace_all_with(&mut self, each: &mut super::Records<'_>) -> Result<(), StoreError> {
        self.lock()?;
        let mut len = 0;
        self.append = None;
        self.file.save_with(&mut |file| {
            len = write_compacted(file, each)?;
            Ok(())
        })?;
        self.written += len;
        self.len = len;
        self.compacted_len = self.len;
        self.rewrite = false;
        self.truncate_to = None;
        Ok(())
    }

    fn wants_rewrite(&self) -> bool {
        self.rewrite || (self.len > COMPACT_MIN_BYTES && self.len > 2 * self.compacted_len)
    }

    fn destroy(&mut self) -> Result<(), StoreError> {
        self.lock()?;
        self.append = None;
        match fs::remove_file(self.file.path()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io("remove")(e)),
        }
    }

    fn bytes_written(&self) -> u64 {
        self.written
    }

    fn describe(&self) -> String {
        self.file.describe()
    }
}

fn read_up_to(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    use std::io::Read;
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::super::{encode_versioned, node_key};
    use super::*;
    use crate::mesos::types::TaskState;
    use crate::scheduler::model::{Node, Persisted, Persona, TaskRecord, STATE_VERSION};
    use crate::scheduler::persist::{LegacyDocument, StateStore};

    /// An appended batch is the line the reference builds whole, puts and deletes alike,
    /// though it goes to the file record by record; a batch of nothing writes nothing.
    #[test]
    fn an_appended_batch_is_streamed_as_the_reference_line() {
        let path = temp_path("streamed");
        let mut j = JournalStore::new(&path).unwrap();
        j.replace_all(&[]).unwrap();
        let mut expected = fs::read(&path).unwrap();
        let batch = [
            Change::Put("node/a".into(), br#"{"x":1}"#.to_vec()),
            Change::Put("node/b".into(), b"{}".to_vec()),
            Change::Delete("node/c".into()),
        ];
        j.apply(&batch).unwrap();
        let mut line = Line::default();
        line.put(&mut expected, "node/a", br#"{"x":1}"#);
        line.put(&mut expected, "node/b", b"{}");
        line.finish(&mut expected, &["node/c"]);
        assert_eq!(fs::read(&path).unwrap(), expected);
        assert_eq!(j.len, expected.len() as u64);
        j.apply(&[Change::Delete("node/a".into())]).unwrap();
        Line::default().finish(&mut expected, &["node/a"]);
        j.apply(&[]).unwrap();
        assert_eq!(fs::read(&path).unwrap(), expected);
        match JournalStore::new(&path).unwrap().load_all().unwrap() {
            Loaded::Records(r) => assert_eq!(r.keys().collect::<Vec<_>>(), ["node/b"]),
            _ => panic!("records expected"),
        }
        let _ = fs::remove_dir_all(path.parent().unwrap());
    }

    fn temp_path(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "storage-journal-test-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("temp dir");
        dir.join("state.json")
    }

    fn state(nodes: &[&str]) -> Persisted {
        let mut p = Persisted::default();
        p.model.framework_id = Some("fw-j".into());
        for n in nodes {
            p.model.nodes.insert(n, Node::new(n, n, Persona::Data, 1));
        }
        p
    }

    #[test]
    fn a_compaction_written_as_it_is_made_is_the_line_made_in_memory() {
        let path = temp_path("streamed");
        let records: Vec<(String, Vec<u8>)> = vec![
            ("root".into(), br#"{"format":"x","version":2}"#.to_vec()),
            (
                "node/a\"1".into(),
                br#"{"node":{"agent_id":"a\"1"}}"#.to_vec(),
            ),
            ("node/b".into(), b"{}".to_vec()),
        ];
        let mut j = JournalStore::new(&path).unwrap();
        j.replace_all(&records).unwrap();
        let mut expected = HEADER.to_vec();
        let mut line = Line::default();
        for (k, v) in &records {
            line.put(&mut expected, k, v);
        }
        line.finish(&mut expected, &[]);
        assert_eq!(fs::read(&path).unwrap(), expected);
        assert_eq!(j.len, expected.len() as u64);
        // And it loads back.
        match JournalStore::new(&path).unwrap().load_all().unwrap() {
            Loaded::Records(r) => assert_eq!(r.len(), 3),
            _ => panic!("records expected"),
        }
        // No records: the header alone.
        j.replace_all(&[]).unwrap();
        assert_eq!(fs::read(&path).unwrap(), HEADER);
        let _ = fs::remove_dir_all(path.parent().unwrap());
    }

    /// A load hands over each line's records as the line is read, in the order written,
    /// and nothing of a torn last line.
    #[test]
    fn records_are_handed_over_line_by_line_in_the_order_written() {
        let path = temp_path("replay");
        let mut s = StateStore::new(Box::new(JournalStore::new(&path).unwrap()));
        s.load().unwrap();
        let mut st = state(&["a1", "a2"]);
        s.save(&st).unwrap();
        st.model.nodes.remove("a1");
        s.save(&st).unwrap();
        let good = fs::read(&path).unwrap().len();
        st.model.launch_seq = 5;
        s.save(&st).unwrap();
        drop(s);
        let full = fs::read(&path).unwrap();
        fs::write(&path, &full[..full.len() - 3]).unwrap();
        let mut seen = Vec::new();
        let opened = JournalStore::read_only(&path)
            .unwrap()
            .load_each(&mut |r| {
                seen.push(match r {
                    Replay::Put(k, _) => format!("put {k}"),
                    Replay::Delete(k) => format!("del {k}"),
                })
            })
            .unwrap();
        assert_eq!(opened, Opened::Records);
        assert_eq!(
            seen,
            ["put root", "put node/a1", "put node/a2", "del node/a1"],
            "the first line, the second, and nothing of the torn third ({good} good bytes)"
        );
    }

    #[test]
    fn torn_last_record_is_dropped_and_cut_off() {
        let path = temp_path("torn");
        let mut s = StateStore::new(Box::new(JournalStore::new(&path).unwrap()));
        s.load().unwrap();
        let mut st = state(&["a1", "a2"]);
        s.save(&st).unwrap();
        st.model.launch_seq = 7;
        s.save(&st).unwrap();
        let good = fs::read(&path).unwrap();
        // A crash half-way through the next append.
        st.model.launch_seq = 8;
        s.save(&st).unwrap();
        let full = fs::read(&path).unwrap();
        fs::write(&path, &full[..good.len() + (full.len() - good.len()) / 2]).unwrap();
        drop(s); // the crashed scheduler's lock goes with it
        let mut again = StateStore::new(Box::new(JournalStore::new(&path).unwrap()));
        assert_eq!(again.load().unwrap().model.launch_seq, 7);
        st.model.launch_seq = 9;
        again.save(&st).unwrap();
        // The torn part is gone, not buried under the new record.
        let back = StateStore::new(Box::new(JournalStore::new(&path).unwrap()))
            .load()
            .unwrap();
        assert_eq!(back.model.launch_seq, 9);
        assert_eq!(back.model.nodes.len(), 2);
        assert!(fs::read(&path).unwrap().starts_with(&good));
    }

    #[test]
    fn damage_before_the_last_record_stops_the_load_naming_the_file() {
        let path = temp_path("damaged");
        let mut s = StateStore::new(Box::new(JournalStore::new(&path).unwrap()));
        s.load().unwrap();
        let mut st = state(&["a1"]);
        s.save(&st).unwrap();
        st.model.launch_seq = 3;
        s.save(&st).unwrap();
        let mut bytes = fs::read(&path).unwrap();
        // Flip a byte inside the first batch (line 2).
        let at = HEADER.len() + 30;
        bytes[at] ^= 0x20;
        fs::write(&path, &bytes).unwrap();
        let err = StateStore::new(Box::new(JournalStore::new(&path).unwrap()))
            .load()
            .expect_err("damaged");
        let text = err.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("line 2"), "{text}");
        assert_eq!(fs::read(&path).unwrap(), bytes, "left untouched");
    }

    /// A journal of four batches (lines 2 to 5) and where each line starts.
    fn four_batches(name: &str) -> (PathBuf, Vec<u8>, Vec<usize>) {
        let path = temp_path(name);
        let mut s = StateStore::new(Box::new(JournalStore::new(&path).unwrap()));
        s.load().unwrap();
        let mut st = state(&["a1"]);
        for seq in 1..=4 {
            st.model.launch_seq = seq;
            s.save(&st).unwrap();
        }
        let bytes = fs::read(&path).unwrap();
        let starts: Vec<usize> = std::iter::once(0)
            .chain(
                bytes
                    .iter()
                    .enumerate()
                    .filter(|(_, &b)| b == b'\n')
                    .map(|(i, _)| i + 1),
            )
            .filter(|&i| i < bytes.len())
            .collect();
        assert_eq!(starts.len(), 5, "header and four batches");
        (path, bytes, starts)
    }

    /// Spoils the checksum of the line starting at `at`, leaving it whole.
    fn spoil_checksum(bytes: &mut [u8], at: usize) {
        bytes[at] = if bytes[at] == b'0' { b'1' } else { b'0' };
    }

    #[test]
    fn a_whole_line_failing_its_checksum_before_the_last_stops_the_load_naming_file_and_offset() {
        let (path, mut bytes, starts) = four_batches("middle-sum");
        // Line 3 is complete and followed by more: it was fsynced, not torn.
        spoil_checksum(&mut bytes, starts[2]);
        fs::write(&path, &bytes).unwrap();
        let err = StateStore::new(Box::new(JournalStore::new(&path).unwrap()))
            .load()
            .expect_err("a damaged middle line");
        let text = err.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("line 3"), "{text}");
        assert!(text.contains(&format!("byte {}", starts[2])), "{text}");
        assert!(text.contains("checksum"), "{text}");
        assert_eq!(fs::read(&path).unwrap(), bytes, "left untouched");
    }

    #[test]
    fn a_whole_last_line_failing_its_checksum_is_dropped_as_torn() {
        let (path, mut bytes, starts) = four_batches("last-sum");
        spoil_checksum(&mut bytes, starts[4]);
        fs::write(&path, &bytes).unwrap();
        let mut again = StateStore::new(Box::new(JournalStore::new(&path).unwrap()));
        assert_eq!(again.load().unwrap().model.launch_seq, 3);
        let mut st = state(&["a1"]);
        st.model.launch_seq = 9;
        again.save(&st).unwrap();
        assert!(fs::read(&path).unwrap().starts_with(&bytes[..starts[4]]));
        let back = StateStore::new(Box::new(JournalStore::new(&path).unwrap()))
            .load()
            .unwrap();
        assert_eq!(back.model.launch_seq, 9);
    }

    #[test]
    fn earlier_single_document_file_is_migrated() {
        let path = temp_path("legacy");
        let mut old = LegacyDocument {
            model: state(&["a1", "a2"]).model,
            ..Default::default()
        };
        old.model.launch_seq = 12;
        old.model.nodes.get_mut("a1").unwrap().task =
            Some(TaskRecord::new("t1", "e1", TaskState::Running, 1));
        old.executor_secrets.insert("e1".into(), "s1".into());
        // Of no current launch: it could not authenticate, and is not kept.
        old.executor_secrets.insert("e0".into(), "s0".into());
        fs::write(&path, encode_versioned(STATE_VERSION, &old)).unwrap();
        let mut s = StateStore::new(Box::new(JournalStore::new(&path).unwrap()));
        let loaded = s.load().unwrap();
        let mut expected = old.model.clone();
        let a1 = expected.nodes.get_mut("a1").and_then(|n| n.task.as_mut());
        a1.expect("a1's launch").secret = Some("s1".into());
        assert_eq!(loaded.model, expected);
        assert_eq!(loaded.executor_secrets().count(), 1);
        s.save(&loaded).unwrap();
        assert!(fs::read(&path).unwrap().starts_with(HEADER));
        let back = StateStore::new(Box::new(JournalStore::new(&path).unwrap()))
            .load()
            .unwrap();
        assert_eq!(back.model, expected);
    }

    #[test]
    fn one_node_update_appends_about_one_record() {
        let path = temp_path("small");
        let names: Vec<String> = (0..200).map(|i| format!("agent-{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut st = state(&refs);
        let mut s = StateStore::new(Box::new(JournalStore::new(&path).unwrap()));
        s.load().unwrap();
        s.save(&st).unwrap();
        let before = fs::metadata(&path).unwrap().len();
        st.model.nodes.get_mut("agent-7").unwrap().failures = 1;
        assert_eq!(s.save(&st).unwrap(), 1);
        let grew = fs::metadata(&path).unwrap().len() - before;
        let one = serde_json::to_vec(&st.model.nodes["agent-7"])
            .unwrap()
            .len() as u64;
        assert!(grew < one + 100, "grew {grew} for a record of {one}");
        let _ = node_key("x");
    }

    #[test]
    fn grown_journal_is_compacted() {
        let path = temp_path("compact");
        let mut st = state(&["a1"]);
        st.model.nodes.get_mut("a1").unwrap().devices = vec!["d".repeat(100_000)];
        let mut s = StateStore::new(Box::new(JournalStore::new(&path).unwrap()));
        s.load().unwrap();
        for i in 0..40 {
            st.model.nodes.get_mut("a1").unwrap().failures = i;
            s.save(&st).unwrap();
        }
        // 40 versions of a 100 KB record would be 4 MB uncompacted.
        let len = fs::metadata(&path).unwrap().len();
        assert!(len < 3 * COMPACT_MIN_BYTES, "{len}");
        let back = StateStore::new(Box::new(JournalStore::new(&path).unwrap()))
            .load()
            .unwrap();
        assert_eq!(back.model, st.model);
    }

    #[test]
    fn one_writer_at_a_time_and_readers_beside_it() {
        let path = temp_path("lock");
        let mut first = JournalStore::new(&path).unwrap();
        first.load_all().unwrap();
        first
            .apply(&[Change::Put("root".into(), b"{}".to_vec())])
            .unwrap();
        let lock = WriterLock::path_for(&path);
        let mut second = JournalStore::new(&path).unwrap();
        let err = second.lock().expect_err("second writer");
        let text = err.to_string();
        assert!(matches!(err, StoreError::Locked { .. }), "{text}");
        assert!(text.contains(&lock.display().to_string()), "{text}");
        assert!(
            text.contains(&format!("pid {} on ", std::process::id())),
            "{text}"
        );
        let write = second.apply(&[Change::Put("root".into(), b"[]".to_vec())]);
        assert!(matches!(write, Err(StoreError::Locked { .. })), "{write:?}");
        // A reader neither waits for the lock nor touches a compaction under way.
        fs::write(first.file.temp_path(), b"a compaction under way").unwrap();
        let mut reader = JournalStore::read_only(&path).unwrap();
        match reader.load_all().unwrap() {
            Loaded::Records(r) => assert_eq!(r["root"], b"{}"),
            other => panic!("{other:?}"),
        }
        assert!(first.file.temp_path().exists());
        let refused = reader.destroy().expect_err("read only");
        assert!(refused.to_string().contains("read only"), "{refused}");
        fs::remove_file(first.file.temp_path()).unwrap();
        // The lock goes with its store.
        drop(first);
        second.lock().unwrap();
        second
            .apply(&[Change::Put("root".into(), b"[]".to_vec())])
            .unwrap();
    }
}
