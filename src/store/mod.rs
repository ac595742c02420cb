//! The scheduler's durable state (framework id, cluster model) as keyed records.
//!
//! Why records: rewriting the whole model per save costs megabytes at 10,000 agents and does
//! not fit ZooKeeper (about 1 MB per znode). So the state is a small root record (framework
//! id, launch sequence, globals) plus one record per cluster node (with its executor secret's digest),
//! and a save writes only the records that changed (the scheduler's `StateStore`,
//! `scheduler/state_store.rs`, maps its model onto records and finds changes by content hash).
//!
//! A [`RecordStore`] only keeps keyed JSON documents and knows nothing of the model. The
//! single-document envelope of [`encode_versioned`] / [`decode_versioned`]
//! (`{"format": "storage-framework-state", "version": N, "state": ...}`) is the format of
//! earlier builds: it is still read (and migrated), and is refused with a clear error when it
//! was written by another program or a newer build, never silently replaced.

pub mod file;
pub mod journal;
mod lockfile;
pub mod memory;
mod settings;
pub mod zk;

pub use file::FileStore;
pub use journal::JournalStore;
pub use lockfile::WriterLock;
pub use memory::MemoryStore;
pub use settings::{StoreHelper, StoreKind, StoreSettings};

use std::collections::BTreeMap;

use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::fmt;
use std::io;
use std::path::PathBuf;

/// The `format` field of every envelope this crate writes.
pub const FORMAT: &str = "storage-framework-state";

/// Key of the root record; node records are `node/<agent id>` ([`node_key`]).
pub const ROOT_KEY: &str = "root";

/// Key of the record of the gateway certificate trusted on first use.
pub const GATEWAY_KEY: &str = "gateway";

pub fn node_key(agent_id: &str) -> String {
    format!("node/{agent_id}")
}

/// One write of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Create or replace the record (a JSON document).
    Put(String, Vec<u8>),
    /// Remove the record; removing one that is not there is not an error.
    Delete(String),
}

/// What a store held when it was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// Nothing stored yet (first start).
    Empty,
    /// Key -> JSON document.
    Records(BTreeMap<String, Vec<u8>>),
    /// A whole-state document of an earlier build ([`decode_versioned`], version 1): the caller
    /// migrates it and the store rewrites itself in records on the next save.
    Legacy(Vec<u8>),
}

/// One record as a store hands it over while loading ([`RecordStore::load_each`]), in the
/// order it was written: a later put of a key replaces an earlier one, a delete removes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay<'a> {
    Put(&'a str, &'a [u8]),
    Delete(&'a str),
}

/// What a store held when it was opened, its records handed over one at a time
/// ([`RecordStore::load_each`]); the variants mean what [`Loaded`]'s do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    Empty,
    Records,
    Legacy(Vec<u8>),
}

/// A store of keyed JSON records (see the module docs).
/// Takes one record (key, bytes).
pub type PutRecord<'a> = dyn FnMut(&str, &[u8]) + 'a;
/// Makes records one at a time, handing each to its argument.
pub type Records<'a> = dyn FnMut(&mut PutRecord<'_>) + 'a;

pub trait RecordStore: Send {
    fn load_all(&mut self) -> Result<Loaded, StoreError>;
    /// [`RecordStore::load_all`] with the records handed to `each` as they are read, so that
    /// a store that reads them batch by batch (the journal) never holds their text whole
    /// beside what the caller makes of them: a restarted scheduler at 10,000 nodes held the
    /// 11 MB of record text, a copy of it and the decoded model at once (94 MB peak under
    /// `mem: 32`). By default they are loaded whole, then handed over.
    fn load_each(&mut self, each: &mut dyn FnMut(Replay<'_>)) -> Result<Opened, StoreError> {
        Ok(match self.load_all()? {
            Loaded::Empty => Opened::Empty,
            Loaded::Legacy(bytes) => Opened::Legacy(bytes),
            Loaded::Records(records) => {
                for (key, value) in &records {
                    each(Replay::Put(key, value));
                }
                Opened::Records
            }
        })
    }
    /// Applies the whole batch or, after a crash or an error, none of it: the write-ahead rule
    /// saves a launch (node record and launch sequence) as one batch before its ACCEPT leaves.
    fn apply(&mut self, batch: &[Change]) -> Result<(), StoreError>;
    /// [`RecordStore::apply`] with the puts made one at a time by `puts` and the deletes
    /// asked for after them, so a store that writes a batch as it is made (the journal) never
    /// holds its records twice; by default they are collected into one batch. Returns whether
    /// anything was written (an empty batch writes nothing).
    fn apply_with(
        &mut self,
        puts: &mut Records<'_>,
        deletes: &mut dyn FnMut() -> Vec<String>,
    ) -> Result<bool, StoreError> {
        let mut batch = Vec::new();
        puts(&mut |k, v| batch.push(Change::Put(k.to_owned(), v.to_vec())));
        batch.extend(deletes().into_iter().map(Change::Delete));
        if batch.is_empty() {
            return Ok(false);
        }
        self.apply(&batch).map(|()| true)
    }
    /// Replaces everything stored by `records` (compaction, migration, teardown, import).
    fn replace_all(&mut self, records: &[(String, Vec<u8>)]) -> Result<(), StoreError>;
    /// [`RecordStore::replace_all`] with records made one at a time: `each` calls its
    /// argument once per record. A store that writes them out as they come (the journal)
    /// never holds them all twice; by default they are collected, then replaced.
    fn replace_all_with(&mut self, each: &mut Records<'_>) -> Result<(), StoreError> {
        let mut records = Vec::new();
        each(&mut |k, v| records.push((k.to_owned(), v.to_vec())));
        self.replace_all(&records)
    }
    /// The store asks for a [`RecordStore::replace_all`] at the next save (journal grown,
    /// earlier format, a failed write left it unsure of its tail).
    fn wants_rewrite(&self) -> bool {
        false
    }
    /// Removes every record (`-store.delete`).
    fn destroy(&mut self) -> Result<(), StoreError>;
    /// Bytes written to durable storage so far (for the store benchmark).
    fn bytes_written(&self) -> u64 {
        0
    }
    /// For logs and errors, e.g. `file /var/lib/x/state.json`.
    fn describe(&self) -> String;
}

/// A store of one opaque document, replaced whole ([`FileStore`] implements it; the journal
/// uses it for its atomic rewrites).
pub trait Store: Send {
    /// `None` = nothing stored yet (first start).
    fn load(&mut self) -> Result<Option<Vec<u8>>, StoreError>;
    /// Replaces the stored state as a whole: after a crash either the old or the new state is
    /// there, never a mix.
    fn save(&mut self, state: &[u8]) -> Result<(), StoreError>;
    /// For logs and errors, e.g. `file /var/lib/x/state.json`.
    fn describe(&self) -> String;
}

/// Opens the store the flags ask for, to write: the file store's writer lock is taken here,
/// so a second scheduler on the same file stops before it reads anything.
pub fn open(settings: &StoreSettings) -> Result<Box<dyn RecordStore>, StoreError> {
    match settings.kind {
        StoreKind::File => {
            let mut journal = JournalStore::new(&settings.uri)?;
            journal.lock()?;
            Ok(Box::new(journal))
        }
        StoreKind::ZooKeeper => {
            let zk = open_zk(settings)?;
            if !zk.has_credentials() {
                log::warn!(
                    "{}: no credentials in the URI (zk://user:password@...): the framework's \
                     znodes are world-readable and world-writable by every client of the ensemble",
                    zk.describe()
                );
            }
            Ok(Box::new(zk))
        }
    }
}

/// Opens the store to read only (`-store.dump`): the file store takes no lock, so it reads
/// beside a running scheduler, and refuses every write.
pub fn open_read_only(settings: &StoreSettings) -> Result<Box<dyn RecordStore>, StoreError> {
    match settings.kind {
        StoreKind::File => Ok(Box::new(JournalStore::read_only(&settings.uri)?)),
        StoreKind::ZooKeeper => Ok(Box::new(open_zk(settings)?)),
    }
}

/// ZooKeeper's own leader lock decides who writes (taken at the first load).
fn open_zk(settings: &StoreSettings) -> Result<zk::ZkStore, StoreError> {
    let parsed = zk::parse_uri(&settings.uri, "/storage-framework")
        .and_then(|(hosts, path)| Ok((hosts, path, zk::credentials(&settings.uri)?)));
    let (hosts, path, credentials) = parsed.map_err(|what| StoreError::Unsupported { what })?;
    let store = zk::ZkStore::new(hosts, path);
    Ok(match credentials {
        Some(c) => store.with_credentials(c),
        None => store,
    })
}

#[derive(Debug)]
pub enum StoreError {
    /// An I/O step failed; `action` says which (e.g. "write temporary file").
    Io {
        action: &'static str,
        path: PathBuf,
        source: io::Error,
    },
    /// The stored bytes are not a readable envelope (bad JSON, truncated, fields missing, or a
    /// state that does not fit the version's layout).
    Corrupt {
        origin: Option<String>,
        detail: String,
    },
    /// Valid JSON, but not written by this framework.
    WrongFormat {
        origin: Option<String>,
        found: String,
    },
    /// Written by this framework with a layout version this build does not read.
    UnsupportedVersion {
        origin: Option<String>,
        found: u32,
        supported: u32,
    },
    /// A configuration this build cannot serve (bad path, unimplemented store type).
    Unsupported { what: String },
    /// Another scheduler holds or has written the state: this one must not write again.
    Fenced { why: String },
    /// Another process holds the file store's writer lock (`holder`: what it recorded).
    Locked {
        path: PathBuf,
        holder: Option<String>,
    },
}

impl StoreError {
    /// Names where the bytes came from (`store.describe()`), so that an error raised while
    /// decoding bytes still tells the operator which file to look at.
    pub fn at(mut self, store: &str) -> StoreError {
        match &mut self {
            StoreError::Corrupt { origin, .. }
            | StoreError::WrongFormat { origin, .. }
            | StoreError::UnsupportedVersion { origin, .. } => *origin = Some(store.to_owned()),
            StoreError::Io { .. }
            | StoreError::Unsupported { .. }
            | StoreError::Fenced { .. }
            | StoreError::Locked { .. } => {}
        }
        self
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let origin = |o: &Option<String>| match o {
            Some(o) => format!("stored state in {o}"),
            None => "stored state".to_owned(),
        };
        match self {
            StoreError::Io {
                action,
                path,
                source,
            } => write!(f, "cannot {action} {}: {source}", path.display()),
            StoreError::Corrupt { origin: o, detail } => {
                write!(
                    f,
                    "{} is unreadable: {detail}; fix or move the file away (the scheduler will not overwrite it)",
                    origin(o)
                )
            }
            StoreError::WrongFormat { origin: o, found } => write!(
                f,
                "{} was not written by this framework: format is {found:?}, expected {FORMAT:?}",
                origin(o)
            ),
            StoreError::UnsupportedVersion {
                origin: o,
                found,
                supported,
            } => {
                let why = if found > supported {
                    "written by a newer build"
                } else {
                    "written by an older build"
                };
                write!(
                    f,
                    "{} has format version {found} ({why}); this build reads version {supported}",
                    origin(o)
                )
            }
            StoreError::Unsupported { what } => f.write_str(what),
            StoreError::Fenced { why } => write!(f, "fenced: {why}"),
            StoreError::Locked { path, holder } => {
                let holder = holder
                    .as_deref()
                    .unwrap_or("a process that recorded no name");
                write!(
                    f,
                    "another scheduler ({holder}) holds the store's lock {}: refusing to write beside it (stop it first; -store.dump reads without the lock)",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

#[derive(Serialize)]
struct EnvelopeOut<'a, T> {
    format: &'static str,
    version: u32,
    state: &'a T,
}

/// Only the version (the format is checked on the untyped document), so the version can be
/// checked before the state is interpreted.
#[derive(Deserialize)]
struct Header {
    version: u32,
}

#[derive(Deserialize)]
struct EnvelopeIn<T> {
    state: T,
}

/// Wraps `value` in the versioned envelope (pretty-printed: operators read this file when
/// something goes wrong).
pub fn encode_versioned<T: Serialize>(version: u32, value: &T) -> Vec<u8> {
    let envelope = EnvelopeOut {
        format: FORMAT,
        version,
        state: value,
    };
    // The caller's state types are plain structs with string map keys; serde_json only fails
    // on non-string map keys or a failing custom Serialize, which would be a bug in this crate.
    match serde_json::to_vec_pretty(&envelope) {
        Ok(bytes) => bytes,
        Err(e) => panic!("state of version {version} cannot be serialized: {e}"),
    }
}

/// The `version` of an envelope, for a caller that migrates older layouts itself.
pub fn peek_version(bytes: &[u8]) -> Result<u32, StoreError> {
    Ok(read_header(bytes)?.version)
}

/// Reads an envelope written by [`encode_versioned`] with exactly version `supported`.
/// Errors carry no origin: attach one with [`StoreError::at`] (or use [`load_versioned`]).
pub fn decode_versioned<T: DeserializeOwned>(
    bytes: &[u8],
    supported: u32,
) -> Result<T, StoreError> {
    let header = read_header(bytes)?;
    if header.version != supported {
        return Err(StoreError::UnsupportedVersion {
            origin: None,
            found: header.version,
            supported,
        });
    }
    serde_json::from_slice::<EnvelopeIn<T>>(bytes)
        .map(|e| e.state)
        .map_err(|e| {
            corrupt(format!(
                "state does not match the version {supported} layout: {e}"
            ))
        })
}

/// Loads and decodes in one step; errors name the store. `None` = nothing stored yet.
pub fn load_versioned<T: DeserializeOwned>(
    store: &mut dyn Store,
    supported: u32,
) -> Result<Option<T>, StoreError> {
    match store.load()? {
        None => Ok(None),
        Some(bytes) => decode_versioned(&bytes, supported)
            .map(Some)
            .map_err(|e| e.at(&store.describe())),
    }
}

/// Encodes and saves in one step.
pub fn save_versioned<T: Serialize>(
    store: &mut dyn Store,
    version: u32,
    value: &T,
) -> Result<(), StoreError> {
    store.save(&encode_versioned(version, value))
}

fn read_header(bytes: &[u8]) -> Result<Header, StoreError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(corrupt("it is empty".into()));
    }
    // First as untyped JSON, so syntax damage and a wrong document shape get different messages.
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_eof() {
            corrupt(format!("it is truncated (the JSON ends early: {e})"))
        } else {
            corrupt(format!("it is not valid JSON: {e}"))
        }
    })?;
    let format = value.get("format").and_then(|f| f.as_str());
    match format {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(StoreError::WrongFormat {
                origin: None,
                found: other.to_owned(),
            })
        }
        None => {
            return Err(corrupt(format!(
                "it has no \"format\" string field (expected {FORMAT:?})"
            )))
        }
    }
    if value.get("state").is_none() {
        return Err(corrupt("it has no \"state\" field".into()));
    }
    serde_json::from_value::<Header>(value)
        .map_err(|e| corrupt(format!("its \"version\" is not a format version: {e}")))
}

fn corrupt(detail: String) -> StoreError {
    StoreError::Corrupt {
        origin: None,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Serialize, Deserialize, PartialEq)]
    struct State {
        framework_id: Option<String>,
        nodes: Vec<String>,
    }

    fn sample() -> State {
        State {
            framework_id: Some("fw-1".into()),
            nodes: vec!["a".into(), "b".into()],
        }
    }

    #[test]
    fn envelope_round_trip() {
        let bytes = encode_versioned(3, &sample());
        let v: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
        assert_eq!(v["format"], FORMAT);
        assert_eq!(v["version"], 3);
        assert_eq!(v["state"]["framework_id"], "fw-1");
        assert_eq!(peek_version(&bytes).expect("header"), 3);
        let back: State = decode_versioned(&bytes, 3).expect("decode");
        assert_eq!(back, sample());
    }

    #[test]
    fn other_version_is_refused() {
        let bytes = encode_versioned(2, &sample());
        let newer = decode_versioned::<State>(&bytes, 1).expect_err("newer");
        assert!(matches!(
            newer,
            StoreError::UnsupportedVersion {
                found: 2,
                supported: 1,
                ..
            }
        ));
        assert!(newer.to_string().contains("newer build"), "{newer}");
        let older = decode_versioned::<State>(&bytes, 5).expect_err("older");
        assert!(older.to_string().contains("older build"), "{older}");
        assert!(older.to_string().contains("version 2"), "{older}");
    }

    #[test]
    fn wrong_format_is_refused() {
        let bytes = br#"{"format":"something-else","version":1,"state":{}}"#;
        let err = decode_versioned::<State>(bytes, 1).expect_err("wrong format");
        assert!(matches!(err, StoreError::WrongFormat { .. }));
        assert!(err.to_string().contains("something-else"), "{err}");
        let err = decode_versioned::<State>(br#"{"version":1,"state":{}}"#, 1).expect_err("x");
        assert!(err.to_string().contains("format"), "{err}");
    }

    #[test]
    fn damaged_documents_are_distinct_errors() {
        let good = encode_versioned(1, &sample());
        let truncated = decode_versioned::<State>(&good[..good.len() / 2], 1).expect_err("cut");
        assert!(truncated.to_string().contains("truncated"), "{truncated}");
        let garbage = decode_versioned::<State>(b"not json", 1).expect_err("garbage");
        assert!(garbage.to_string().contains("not valid JSON"), "{garbage}");
        let empty = decode_versioned::<State>(b"", 1).expect_err("empty");
        assert!(empty.to_string().contains("empty"), "{empty}");
        let no_state = decode_versioned::<State>(
            format!(r#"{{"format":"{FORMAT}","version":1}}"#).as_bytes(),
            1,
        )
        .expect_err("no state");
        assert!(no_state.to_string().contains("\"state\""), "{no_state}");
        let bad_version = decode_versioned::<State>(
            format!(r#"{{"format":"{FORMAT}","version":"one","state":{{}}}}"#).as_bytes(),
            1,
        )
        .expect_err("bad version");
        assert!(bad_version.to_string().contains("version"), "{bad_version}");
        let bad_layout = decode_versioned::<State>(
            format!(r#"{{"format":"{FORMAT}","version":1,"state":{{"nodes":7}}}}"#).as_bytes(),
            1,
        )
        .expect_err("layout");
        assert!(
            bad_layout.to_string().contains("version 1 layout"),
            "{bad_layout}"
        );
    }

    #[test]
    fn at_names_the_origin() {
        let err = decode_versioned::<State>(b"{", 1)
            .expect_err("bad")
            .at("file /x/state.json");
        assert!(err.to_string().contains("file /x/state.json"), "{err}");
    }

    #[test]
    fn bad_zookeeper_uri_is_refused_clearly() {
        let settings = StoreSettings::new(StoreKind::ZooKeeper, "http://h:2181/x");
        let err = open(&settings).err().expect("refused");
        assert!(err.to_string().contains("zk://"), "{err}");
    }
}
