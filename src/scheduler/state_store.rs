//! The scheduler's state ([`Persisted`]) as records: a root record plus one per node.
//!
//! The dispatcher has many places that change the model (and is changed by others); rather
//! than have each mark what it touched, [`StateStore::save`] serializes every record and
//! writes those whose content hash differs from what the store holds. That costs the same CPU
//! as the earlier whole-file save but writes only what changed, never keeps a second copy of
//! the model (one `u64` per record), and cannot forget a change: the write-ahead rule holds
//! by construction.

use crate::hash::content_hash;
use crate::scheduler::model::{ClusterModel, Node, Persisted, STATE_VERSION};
use crate::store::{decode_versioned, node_key, Loaded, RecordStore, StoreError, FORMAT, ROOT_KEY};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Layout version of the record form (version 1 is the single document of earlier builds).
pub const RECORD_VERSION: u32 = 2;

#[derive(Serialize, Deserialize)]
struct Root {
    format: String,
    version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    framework_id: Option<String>,
    #[serde(default)]
    launch_seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    heartbeat_secs: Option<f64>,
    /// Executor secrets that belong to no node's current launch (normally none).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    other_secrets: BTreeMap<String, String>,
}

/// A node with the secret of its current executor: the two change together at a launch and
/// are saved in one write. `/api/state` serializes `Node` only, never this record.
#[derive(Serialize, Deserialize)]
struct NodeRecord<N> {
    node: N,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    executor_secret: Option<String>,
}

pub struct StateStore {
    backend: Box<dyn RecordStore>,
    /// Key -> content hash of the record as the backend holds it.
    saved: HashMap<String, u64>,
    buf: Vec<u8>,
}

impl StateStore {
    pub fn new(backend: Box<dyn RecordStore>) -> StateStore {
        StateStore {
            backend,
            saved: HashMap::new(),
            buf: Vec::new(),
        }
    }

    pub fn describe(&self) -> String {
        self.backend.describe()
    }

    pub fn backend_mut(&mut self) -> &mut dyn RecordStore {
        self.backend.as_mut()
    }

    /// Reads the stored state (an empty one on first start). Errors name the store.
    pub fn load(&mut self) -> Result<Persisted, StoreError> {
        let origin = self.describe();
        let state = match self.backend.load_all()? {
            Loaded::Empty => Persisted::default(),
            Loaded::Legacy(bytes) => {
                decode_versioned::<Persisted>(&bytes, STATE_VERSION).map_err(|e| e.at(&origin))?
            }
            Loaded::Records(records) => from_records(records).map_err(|e| e.at(&origin))?,
        };
        self.saved.clear();
        for_each_record(&state, &mut self.buf, |key, bytes| {
            self.saved.insert(key.to_owned(), content_hash(bytes));
        });
        Ok(state)
    }

    /// Writes the records that changed since the last load or save, as one batch. Returns
    /// how many records were written (0: nothing changed).
    pub fn save(&mut self, state: &Persisted) -> Result<usize, StoreError> {
        if self.backend.wants_rewrite() {
            return self.replace(state).map(|()| self.saved.len());
        }
        // The changed records go to the store as they are made (issue 12: a launch wave's
        // 10,000 records were copied into a batch, then again into the journal's line).
        let mut hashes = Vec::new();
        let mut deleted = Vec::new();
        let puts = std::cell::Cell::new(0usize);
        let (saved, buf) = (&self.saved, &mut self.buf);
        let nodes = state.model.nodes.len();
        let written = self.backend.apply_with(
            &mut |put| {
                for_each_record(state, buf, |key, bytes| {
                    let h = content_hash(bytes);
                    if saved.get(key) != Some(&h) {
                        put(key, bytes);
                        puts.set(puts.get() + 1);
                        hashes.push((key.to_owned(), h));
                    }
                });
            },
            // Records of nodes no longer in the model (teardown clears them all).
            &mut || {
                if saved.len() + puts.get() > nodes + 1 {
                    deleted = saved
                        .keys()
                        .filter(|key| {
                            key.strip_prefix("node/")
                                .is_some_and(|agent| !state.model.nodes.contains_key(agent))
                        })
                        .cloned()
                        .collect();
                }
                deleted.clone()
            },
        );
        match written {
            Ok(false) => return Ok(0),
            Ok(true) => {}
            Err(StoreError::Fenced { why }) => {
                // Another scheduler leads now: nothing this one decided may leave. Exiting
                // here, before the dispatcher releases a single call, is what guarantees it.
                log::error!("{why}; exiting so that only one scheduler acts");
                std::process::exit(1);
            }
            Err(e) => return Err(e),
        }
        let written = hashes.len();
        for k in &deleted {
            self.saved.remove(k);
        }
        self.saved.extend(hashes);
        Ok(written)
    }

    /// Replaces everything stored by `state` (compaction, teardown, import).
    /// Records are handed to the store as they are made, not collected first (issue 12: a
    /// compaction at 10,000 nodes held the state twice).
    pub fn replace(&mut self, state: &Persisted) -> Result<(), StoreError> {
        let mut saved = HashMap::with_capacity(state.model.nodes.len() + 1);
        let buf = &mut self.buf;
        self.backend.replace_all_with(&mut |put| {
            for_each_record(state, buf, |key, bytes| {
                saved.insert(key.to_owned(), content_hash(bytes));
                put(key, bytes);
            });
        })?;
        self.saved = saved;
        Ok(())
    }
}

/// Calls `f` with the key and JSON of every record of `state`, root first, reusing `buf`.
fn for_each_record(state: &Persisted, buf: &mut Vec<u8>, mut f: impl FnMut(&str, &[u8])) {
    let model = &state.model;
    let mut matched = 0;
    let mut other_secrets = BTreeMap::new();
    for node in model.nodes.values() {
        if let Some(t) = &node.task {
            matched += usize::from(state.executor_secrets.contains_key(&t.executor_id));
        }
    }
    if matched != state.executor_secrets.len() {
        let current: std::collections::HashSet<&str> = model
            .nodes
            .values()
            .filter_map(|n| Some(n.task.as_ref()?.executor_id.as_str()))
            .collect();
        for (id, s) in &state.executor_secrets {
            if !current.contains(id.as_str()) {
                other_secrets.insert(id.clone(), s.clone());
            }
        }
    }
    let root = Root {
        format: FORMAT.to_owned(),
        version: RECORD_VERSION,
        framework_id: model.framework_id.clone(),
        launch_seq: model.launch_seq,
        heartbeat_secs: model.heartbeat_secs,
        other_secrets,
    };
    encode(buf, &root);
    f(ROOT_KEY, buf);
    for (agent, node) in &model.nodes {
        let secret = node
            .task
            .as_ref()
            .and_then(|t| state.executor_secrets.get(&t.executor_id));
        encode(
            buf,
            &NodeRecord {
                node,
                executor_secret: secret.cloned(),
            },
        );
        f(&node_key(agent), buf);
    }
}

fn encode<T: Serialize>(buf: &mut Vec<u8>, value: &T) {
    buf.clear();
    // Plain structs with string map keys: serde_json cannot fail on them.
    if let Err(e) = serde_json::to_writer(&mut *buf, value) {
        panic!("state record cannot be serialized: {e}");
    }
}

fn corrupt(detail: String) -> StoreError {
    StoreError::Corrupt {
        origin: None,
        detail,
    }
}

fn from_records(records: BTreeMap<String, Vec<u8>>) -> Result<Persisted, StoreError> {
    let Some(root) = records.get(ROOT_KEY) else {
        return Err(corrupt(format!(
            "{} record(s) but no {ROOT_KEY:?} record",
            records.len()
        )));
    };
    let header: serde_json::Value = serde_json::from_slice(root)
        .map_err(|e| corrupt(format!("the root record is not valid JSON: {e}")))?;
    match header.get("format").and_then(|f| f.as_str()) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(StoreError::WrongFormat {
                origin: None,
                found: other.to_owned(),
            })
        }
        None => return Err(corrupt("the root record has no \"format\"".into())),
    }
    let version = header.get("version").and_then(|v| v.as_u64()).unwrap_or(0) as u32;
    if version != RECORD_VERSION {
        return Err(StoreError::UnsupportedVersion {
            origin: None,
            found: version,
            supported: RECORD_VERSION,
        });
    }
    let root: Root = serde_json::from_value(header)
        .map_err(|e| corrupt(format!("the root record does not fit its layout: {e}")))?;
    let mut state = Persisted {
        model: ClusterModel {
            framework_id: root.framework_id,
            nodes: BTreeMap::new(),
            launch_seq: root.launch_seq,
            heartbeat_secs: root.heartbeat_secs,
            // Pool capacity is read from the gateway again at start; never stored.
            pools: Vec::new(),
        },
        executor_secrets: root.other_secrets,
    };
    for (key, bytes) in &records {
        if key == ROOT_KEY {
            continue;
        }
        let Some(agent) = key.strip_prefix("node/") else {
            return Err(corrupt(format!("unknown record {key:?}")));
        };
        let rec: NodeRecord<Node> = serde_json::from_slice(bytes)
            .map_err(|e| corrupt(format!("record {key:?} is unreadable: {e}")))?;
        if rec.node.agent_id != agent {
            return Err(corrupt(format!(
                "record {key:?} holds agent {:?}",
                rec.node.agent_id
            )));
        }
        if let (Some(t), Some(s)) = (&rec.node.task, rec.executor_secret) {
            state.executor_secrets.insert(t.executor_id.clone(), s);
        }
        state.model.nodes.insert(agent.to_owned(), rec.node);
    }
    Ok(state)
}

/// The stored state as one JSON document for operators (`-store.dump`): secrets masked.
pub fn dump_json(state: &Persisted) -> serde_json::Value {
    let masked: BTreeMap<&str, &str> = state
        .executor_secrets
        .keys()
        .map(|k| (k.as_str(), "********"))
        .collect();
    serde_json::json!({
        "format": FORMAT,
        "version": RECORD_VERSION,
        "model": &state.model,
        "executor_secrets": masked,
    })
}
