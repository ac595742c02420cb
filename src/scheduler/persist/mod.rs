//! The scheduler's state ([`Persisted`]) as records: a root record plus one per node.
//!
//! The dispatcher has many places that change the model (and is changed by others); rather
//! than have each mark what it touched, [`StateStore::save`] serializes every record and
//! writes those whose content hash differs from what the store holds. That costs the same CPU
//! as the earlier whole-file save but writes only what changed, never keeps a second copy of
//! the model (one `u64` per record), and cannot forget a change: the write-ahead rule holds
//! by construction.

mod load;
pub mod setup;

use crate::hash::content_hash;
use crate::scheduler::model::{
    once_each, ClusterModel, Node, Nodes, Persisted, Target, WriteMark, STATE_VERSION,
};
use crate::secret::Token;
use crate::store::{
    decode_versioned, node_key, Opened, RecordStore, StoreError, FORMAT, GATEWAY_KEY, ROOT_KEY,
};
use crate::tls::Fingerprint;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

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
    #[serde(default)]
    target: Target,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    paused: bool,
    // Earlier builds also kept `other_secrets` here: secrets of executors that were no node's
    // current launch, which could not authenticate anyway. They are ignored when read.
}

/// The gateway certificate trusted on first use.
#[derive(Serialize, Deserialize)]
struct GatewayRecord {
    fingerprint: Fingerprint,
}

/// A node with the digest of its current executor's secret, which serializing a `Node`
/// leaves out (`/api/state` serializes `Node` only, never this record). Earlier builds kept
/// the secret itself in `executor_secret`: read, and rewritten as its digest.
#[derive(Serialize, Deserialize)]
struct NodeRecord<N, S> {
    node: N,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    executor_secret_sha256: Option<S>,
    #[serde(default, skip_serializing)]
    executor_secret: Option<String>,
}

/// The single document of earlier builds (record version 1): the model, and the executor
/// secrets in a map beside it.
#[derive(Serialize, Deserialize, Default)]
pub(crate) struct LegacyDocument {
    pub model: ClusterModel,
    #[serde(default)]
    pub executor_secrets: BTreeMap<String, String>,
}

impl LegacyDocument {
    /// The state it holds: each secret moves to its launch; one of no current launch is
    /// dropped, since it could not authenticate (only a current launch's executor may).
    fn into_state(self) -> Persisted {
        let mut state = Persisted {
            model: self.model,
            gateway_certificate: None,
        };
        // Freshly read nodes are not shared: writing through them copies nothing.
        for mut node in state.model.nodes.values_mut() {
            if let Some(t) = node.task.as_mut() {
                let secret = self.executor_secrets.get(&*t.executor_id());
                t.secret = secret.map(|s| Token::from(s.as_str()));
            }
        }
        state
    }
}

pub struct StateStore {
    backend: Box<dyn RecordStore>,
    /// Content hash of the root record as the backend holds it.
    saved_root: Option<u64>,
    /// The gateway record as the backend holds it.
    saved_gateway: Option<Fingerprint>,
    /// Each node record as the backend holds it, in the model's order (by agent id), so that
    /// a save walks both side by side: a revision comparison per unchanged node, not a lookup.
    saved_nodes: BTreeSet<SavedNode>,
    /// Where the model's write log stood at the last save: what it lists since is all that
    /// can differ from `saved_nodes` (`None`: walk every node).
    saved_mark: Option<WriteMark>,
    /// How many nodes the last save looked at (tests).
    #[cfg(test)]
    looked: usize,
    buf: Vec<u8>,
    /// The store holds executor secrets in clear (an earlier build's): the next save rewrites
    /// all of it.
    clear_secrets: bool,
}

/// A node record as saved: the revision of the node value it was made from (an unchanged
/// node, its secret included, is the same revision and is skipped without serializing it) and
/// the record's content hash. Not the node itself: a kept node made the model's next write to
/// it copy it whole (`model/revision.rs`).
/// Keyed by the node's own agent id (the model's key for it), not by a copy of it.
struct SavedNode {
    agent: Arc<str>,
    revision: u64,
    hash: u64,
}

impl SavedNode {
    fn of(agent: &Arc<str>, node: &Node, hash: u64) -> SavedNode {
        SavedNode {
            agent: agent.clone(),
            revision: node.revision.get(),
            hash,
        }
    }

    fn agent(&self) -> &str {
        &self.agent
    }
}

impl std::borrow::Borrow<str> for SavedNode {
    fn borrow(&self) -> &str {
        self.agent()
    }
}

impl PartialEq for SavedNode {
    fn eq(&self, other: &SavedNode) -> bool {
        self.agent() == other.agent()
    }
}

impl Eq for SavedNode {}

impl Ord for SavedNode {
    fn cmp(&self, other: &SavedNode) -> std::cmp::Ordering {
        self.agent().cmp(other.agent())
    }
}

impl PartialOrd for SavedNode {
    fn partial_cmp(&self, other: &SavedNode) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// What a save has written so far; its two closures share it, hence the cells.
#[derive(Default)]
struct Tally {
    written: std::cell::Cell<usize>,
    new_nodes: std::cell::Cell<usize>,
    seen: std::cell::RefCell<Vec<SavedNode>>,
}

impl Tally {
    /// The record of `node`, put unless unchanged since `before`.
    fn node(
        &self,
        buf: &mut Vec<u8>,
        put: &mut dyn FnMut(&str, &[u8]),
        (agent, node): (&Arc<str>, &Arc<Node>),
        before: Option<&SavedNode>,
    ) {
        if before.is_some_and(|b| b.revision == node.revision.get()) {
            return;
        }
        encode_node(buf, node);
        let hash = content_hash(buf);
        // Written to but the same again (a write that put back what was there): remember
        // the new revision, write nothing.
        if before.map(|b| b.hash) != Some(hash) {
            put(&node_key(agent), buf);
            self.written.set(self.written.get() + 1);
        }
        let new = usize::from(before.is_none());
        self.new_nodes.set(self.new_nodes.get() + new);
        self.seen
            .borrow_mut()
            .push(SavedNode::of(agent, node, hash));
    }
}

/// The saved record of each model node, found by walking the saved records in step with the
/// model's nodes (both ordered by agent id).
struct SavedCursor<'a> {
    saved: std::iter::Peekable<std::collections::btree_set::Iter<'a, SavedNode>>,
}

impl<'a> SavedCursor<'a> {
    fn new(saved: &'a BTreeSet<SavedNode>) -> Self {
        SavedCursor {
            saved: saved.iter().peekable(),
        }
    }

    /// The saved record of `agent`; calls come in ascending agent order.
    fn find(&mut self, agent: &Arc<str>) -> Option<&'a SavedNode> {
        while let Some(s) = self.saved.peek() {
            // The model's key and the saved node's agent id are one `Arc` while the node is
            // unchanged: equal without comparing the text.
            if Arc::ptr_eq(&s.agent, agent) || s.agent() == &**agent {
                return self.saved.next();
            }
            if s.agent() > &**agent {
                return None;
            }
            self.saved.next();
        }
        None
    }
}

impl StateStore {
    pub fn new(backend: Box<dyn RecordStore>) -> StateStore {
        StateStore {
            backend,
            saved_root: None,
            saved_gateway: None,
            saved_nodes: BTreeSet::new(),
            saved_mark: None,
            #[cfg(test)]
            looked: 0,
            buf: Vec::new(),
            clear_secrets: false,
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
        let mut stale_root = false;
        let mut clear = false;
        let mut empty = false;
        let mut replayed = load::Replayed::default();
        let state = match self.backend.load_each(&mut |r| replayed.replay(r))? {
            Opened::Empty => {
                empty = true;
                Persisted::default()
            }
            Opened::Legacy(bytes) => {
                let doc = decode_versioned::<LegacyDocument>(&bytes, STATE_VERSION)
                    .map_err(|e| e.at(&origin))?;
                clear = !doc.executor_secrets.is_empty();
                doc.into_state()
            }
            Opened::Records => {
                let loaded = replayed.finish().map_err(|e| e.at(&origin))?;
                stale_root = loaded.stale_root;
                clear = loaded.clear_secrets;
                loaded.state
            }
        };
        self.remember_all(&state);
        if empty {
            // The backend holds no root yet, although an empty state's root is what the
            // model says: the first save must write it, whatever else it writes.
            self.saved_root = None;
        }
        if stale_root {
            // Secrets an earlier build kept in the root go with the next save, not whenever
            // the root next changes.
            self.clear_secrets = true;
        }
        self.clear_secrets |= clear;
        Ok(state)
    }

    /// Writes the records that changed since the last load or save, as one batch. Returns
    /// how many records were written (0: nothing changed).
    pub fn save(&mut self, state: &Persisted) -> Result<usize, StoreError> {
        // Secrets in clear are rewritten whole: a journal keeps every line it was given.
        if self.backend.wants_rewrite() || self.clear_secrets {
            return self.replace(state).map(|()| self.saved_nodes.len() + 1);
        }
        // The changed records go to the store as they are made (a launch wave's
        // 10,000 records were copied into a batch, then again into the journal's line).
        let mut root_hash = None;
        let tally = Tally::default();
        let gateway = self.unsaved_gateway(state);
        let nodes = &state.model.nodes;
        let since = self.written_since(nodes);
        let mut deleted = self.removed_among(since.iter().flatten(), nodes);
        let (saved_root, saved_nodes, buf) = (self.saved_root, &self.saved_nodes, &mut self.buf);
        let result = self.backend.apply_with(
            &mut |put| {
                encode(buf, &root_record(state));
                let h = content_hash(buf);
                if saved_root != Some(h) {
                    put(ROOT_KEY, buf);
                    tally.written.set(tally.written.get() + 1);
                    root_hash = Some(h);
                }
                let gw = put_gateway(gateway, buf, put);
                tally.written.set(tally.written.get() + gw);
                if let Some(agents) = &since {
                    for agent in agents {
                        if let Some(node) = nodes.get_shared(agent) {
                            tally.node(buf, put, (agent, node), saved_nodes.get(&***agent));
                        }
                    }
                    return;
                }
                let mut cursor = SavedCursor::new(saved_nodes);
                for (agent, node) in nodes.iter_shared() {
                    tally.node(buf, put, (agent, node), cursor.find(agent));
                }
            },
            // Records of nodes no longer in the model (teardown clears them all).
            &mut || {
                if since.is_none() && saved_nodes.len() + tally.new_nodes.get() > nodes.len() {
                    deleted = saved_nodes
                        .iter()
                        .map(SavedNode::agent)
                        .filter(|agent| !nodes.contains_key(agent))
                        .map(str::to_owned)
                        .collect();
                }
                deleted.iter().map(|a| node_key(a)).collect()
            },
        );
        match result {
            Ok(_) => {}
            Err(StoreError::Fenced { why }) => {
                // Another scheduler leads now: nothing this one decided may leave. Exiting
                // here, before the dispatcher releases a single call, is what guarantees it.
                log::error!("{why}; exiting so that only one scheduler acts");
                std::process::exit(1);
            }
            Err(e) => return Err(e),
        }
        if let Some(h) = root_hash {
            self.saved_root = Some(h);
        }
        self.saved_gateway = gateway.or(self.saved_gateway);
        for agent in &deleted {
            self.saved_nodes.remove(agent.as_str());
        }
        // `replace`, not `insert`: an equal key must take the new revision and hash.
        for seen in tally.seen.into_inner() {
            self.saved_nodes.replace(seen);
        }
        self.saved_mark = Some(state.model.nodes.mark());
        Ok(tally.written.into_inner())
    }

    /// The agents of the nodes written since the last save, once each, when the
    /// model's log can tell (`None`: look at every node). A batch of one executor report
    /// looked at all 10,000 nodes.
    fn written_since<'a>(&mut self, nodes: &'a Nodes) -> Option<Vec<&'a Arc<str>>> {
        #[cfg(test)]
        {
            self.looked = nodes.len();
        }
        let agents = once_each(nodes.written_since(self.saved_mark?)?.iter());
        #[cfg(test)]
        {
            self.looked = agents.len();
        }
        Some(agents)
    }

    /// Of `agents`, those saved whose nodes are gone from `nodes`.
    fn removed_among<'a>(
        &self,
        agents: impl Iterator<Item = &'a &'a Arc<str>>,
        nodes: &Nodes,
    ) -> Vec<String> {
        agents
            .map(|a| -> &str { a })
            .filter(|a| !nodes.contains_key(a) && self.saved_nodes.contains(*a))
            .map(str::to_owned)
            .collect()
    }

    /// The gateway certificate of `state` when the backend does not hold it yet.
    fn unsaved_gateway(&self, state: &Persisted) -> Option<Fingerprint> {
        let stored = self.saved_gateway;
        state.gateway_certificate.filter(|g| stored != Some(*g))
    }

    /// Replaces everything stored by `state` (compaction, teardown, import).
    /// Records are handed to the store as they are made, not collected first (a
    /// compaction at 10,000 nodes held the state twice).
    pub fn replace(&mut self, state: &Persisted) -> Result<(), StoreError> {
        let buf = &mut self.buf;
        self.backend.replace_all_with(&mut |put| {
            for_each_record(state, buf, |key, bytes| put(key, bytes));
        })?;
        self.remember_all(state);
        self.clear_secrets = false;
        Ok(())
    }

    /// Whether the store holds executor secrets in clear, as an earlier build wrote them;
    /// the next [`StateStore::save`] replaces them by their digests.
    pub fn holds_clear_secrets(&self) -> bool {
        self.clear_secrets
    }

    /// Notes every record of `state` as what the backend holds.
    fn remember_all(&mut self, state: &Persisted) {
        encode(&mut self.buf, &root_record(state));
        self.saved_root = Some(content_hash(&self.buf));
        self.saved_gateway = state.gateway_certificate;
        let mut saved = BTreeSet::new();
        for (agent, node) in state.model.nodes.iter() {
            encode_node(&mut self.buf, node);
            saved.replace(SavedNode::of(agent, node, content_hash(&self.buf)));
        }
        self.saved_nodes = saved;
        self.saved_mark = Some(state.model.nodes.mark());
    }
}

/// The JSON of `node`'s record (the node and its executor's secret's digest) into `buf`.
fn encode_node(buf: &mut Vec<u8>, node: &Node) {
    let digest = node
        .task
        .as_ref()
        .and_then(|t| t.secret.as_ref())
        .map(Token::digest_hex);
    encode(
        buf,
        &NodeRecord {
            node,
            executor_secret_sha256: digest,
            executor_secret: None,
        },
    );
}

/// The root record: framework facts.
fn root_record(state: &Persisted) -> Root {
    let model = &state.model;
    Root {
        format: FORMAT.to_owned(),
        version: RECORD_VERSION,
        framework_id: model.framework_id.clone(),
        launch_seq: model.launch_seq,
        heartbeat_secs: model.heartbeat_secs,
        target: model.target.clone(),
        paused: model.paused,
    }
}

/// Calls `f` with the key and JSON of every record of `state`, root first, reusing `buf`.
fn for_each_record(state: &Persisted, buf: &mut Vec<u8>, mut f: impl FnMut(&str, &[u8])) {
    encode(buf, &root_record(state));
    f(ROOT_KEY, buf);
    put_gateway(state.gateway_certificate, buf, &mut f);
    for (agent, node) in &state.model.nodes {
        encode_node(buf, node);
        f(&node_key(agent), buf);
    }
}

/// The gateway record, when there is one to write, to `put`; how many records that is.
fn put_gateway(
    gateway: Option<Fingerprint>,
    buf: &mut Vec<u8>,
    put: &mut dyn FnMut(&str, &[u8]),
) -> usize {
    let Some(fingerprint) = gateway else {
        return 0;
    };
    encode(buf, &GatewayRecord { fingerprint });
    put(GATEWAY_KEY, buf);
    1
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

/// The stored state as one JSON document for operators (`-store.dump`): secrets masked.
pub fn dump_json(state: &Persisted) -> serde_json::Value {
    let masked: BTreeMap<std::borrow::Cow<str>, &str> = state
        .executor_secrets()
        .map(|(id, _)| (id, "********"))
        .collect();
    serde_json::json!({
        "format": FORMAT,
        "version": RECORD_VERSION,
        "model": &state.model,
        "executor_secrets": masked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::types::TaskState;
    use crate::scheduler::model::{Persona, TaskRecord};
    use crate::secret::Secret;
    use crate::store::{Loaded, MemoryStore};

    fn state() -> Persisted {
        let mut p = Persisted::default();
        for a in ["a1", "a2"] {
            let mut n = Node::new(a, a, Persona::Data, 1);
            n.task = Some(
                TaskRecord::new(&format!("t-{a}"), &format!("e-{a}"), TaskState::Running, 1)
                    .with_secret("s".repeat(64).as_str().into()),
            );
            p.model.nodes.insert(a, n);
        }
        p
    }

    #[test]
    fn a_save_writes_what_changed_found_by_revision_then_by_content() {
        let mut store = StateStore::new(Box::new(MemoryStore::new()));
        let mut st = state();
        assert_eq!(store.save(&st).unwrap(), 3, "root and two nodes");
        assert_eq!(store.save(&st).unwrap(), 0, "nothing changed");
        // A view holds the nodes: a write copies the node, and the copy is saved.
        let view = st.model.nodes.clone();
        st.model.nodes.get_mut("a1").unwrap().failures = 3;
        assert_eq!(store.save(&st).unwrap(), 1);
        assert_eq!(view["a1"].failures, 0, "the view's node did not change");
        // Written to, but the same again: nothing is written.
        st.model.nodes.get_mut("a2").unwrap().failures = 0;
        assert_eq!(store.save(&st).unwrap(), 0);
        // Only the secret changed: its node's record is written.
        let a2 = st.model.nodes.get_mut("a2").unwrap();
        a2.task.as_mut().unwrap().secret = Some("t".repeat(64).as_str().into());
        assert_eq!(store.save(&st).unwrap(), 1);
        // A removed node's record goes.
        st.model.nodes.remove("a1");
        store.save(&st).unwrap();
        let back = StateStore::new(Box::new(store_backend_clone(&mut store)))
            .load()
            .unwrap();
        assert_eq!(back.model.nodes.len(), 1);
        assert!(back
            .executor_secret("e-a2")
            .unwrap()
            .matches(&"t".repeat(64).into()));
        assert_eq!(back.model.nodes["a2"], st.model.nodes["a2"]);
    }

    /// A save looks at the nodes the model's log lists since the last one; when the log
    /// cannot tell (a write through `values_mut`, another model), it looks at every node.
    /// Either way what it saves is the model.
    #[test]
    fn a_save_looks_at_the_nodes_written_since_the_last_or_at_all_when_it_cannot_tell() {
        let mut store = StateStore::new(Box::new(MemoryStore::new()));
        let mut st = state();
        for a in ["a3", "a4", "a5"] {
            st.model.nodes.insert(a, Node::new(a, a, Persona::Data, 1));
        }
        store.save(&st).unwrap();
        assert_eq!(store.looked, 5, "the first save walks every node");
        // Listed: one written twice, one removed, one added.
        st.model.nodes.get_mut("a1").unwrap().failures = 1;
        st.model.nodes.get_mut("a1").unwrap().failures = 2;
        st.model.nodes.remove("a2");
        st.model
            .nodes
            .insert("a6", Node::new("a6", "a6", Persona::Data, 1));
        assert_eq!(store.save(&st).unwrap(), 2, "a1 and a6 written, a2 deleted");
        assert_eq!(store.looked, 3);
        assert_eq!(store.save(&st).unwrap(), 0);
        assert_eq!(store.looked, 0);
        // Not listed: a walk that writes one node in passing.
        for mut n in st.model.nodes.values_mut() {
            if &*n.agent_id == "a4" {
                n.failures = 5;
            }
        }
        assert_eq!(store.save(&st).unwrap(), 1, "a4, found by walking");
        assert_eq!(store.looked, 5);
        // Another model (a copy is one): walked whole, only what differs written.
        let mut other = Persisted {
            model: st.model.clone(),
            gateway_certificate: None,
        };
        other.model.nodes.get_mut("a3").unwrap().failures = 9;
        assert_eq!(store.save(&other).unwrap(), 1);
        assert_eq!(store.looked, 5);
        let back = StateStore::new(Box::new(store_backend_clone(&mut store)))
            .load()
            .unwrap();
        let agents: Vec<&str> = back.model.nodes.keys().map(|k| &**k).collect();
        assert_eq!(agents, ["a1", "a3", "a4", "a5", "a6"]);
        let failures = |a: &str| back.model.nodes[a].failures;
        assert_eq!((failures("a1"), failures("a3"), failures("a4")), (2, 9, 5));
    }

    /// The store keeps no node: the model's write to a saved node is made in place, not to a
    /// copy (a kept node made a health poll that writes every node hold the model twice).
    #[test]
    fn a_saved_node_is_written_in_place() {
        let mut store = StateStore::new(Box::new(MemoryStore::new()));
        let mut st = state();
        store.save(&st).unwrap();
        let at = |st: &Persisted| Arc::as_ptr(st.model.nodes.get_shared("a1").unwrap());
        let before = at(&st);
        st.model.nodes.get_mut("a1").unwrap().failures = 3;
        assert_eq!(at(&st), before, "written in place");
        assert_eq!(store.save(&st).unwrap(), 1, "and saved");
        assert_eq!(store.save(&st).unwrap(), 0);
    }

    /// The save walks the saved records beside the model's nodes: nodes removed, added and
    /// changed among unchanged ones, before, between and after them, are each found right.
    #[test]
    fn a_save_finds_each_saved_record_while_walking_beside_the_model() {
        let node = |a: &str| Node::new(a, a, Persona::Data, 1);
        let mut store = StateStore::new(Box::new(MemoryStore::new()));
        let mut st = Persisted::default();
        for a in ["b", "d", "f", "h"] {
            st.model.nodes.insert(a, node(a));
        }
        assert_eq!(store.save(&st).unwrap(), 5, "root and four nodes");
        // Added before, between and after; one removed; one replaced by an equal node under
        // another pointer (found by its text, and not written).
        for a in ["a", "e", "z"] {
            st.model.nodes.insert(a, node(a));
        }
        st.model.nodes.remove("d");
        st.model.nodes.insert("f", node("f"));
        st.model.nodes.get_mut("h").unwrap().failures = 2;
        assert_eq!(store.save(&st).unwrap(), 4, "a, e, z and h; d deleted");
        assert_eq!(
            store.save(&st).unwrap(),
            0,
            "every record found: nothing again"
        );
        let back = StateStore::new(Box::new(store_backend_clone(&mut store)))
            .load()
            .unwrap();
        let agents: Vec<&str> = back.model.nodes.keys().map(|k| &**k).collect();
        assert_eq!(agents, ["a", "b", "e", "f", "h", "z"]);
        assert_eq!(back.model.nodes["h"].failures, 2);
    }

    #[test]
    fn a_first_save_after_an_empty_load_writes_the_root_even_if_only_the_gateway_changed() {
        // ZooKeeper checks the root's version with every batch: a batch without a root it
        // never wrote fails there ("root was changed by someone else").
        let mut store = StateStore::new(Box::new(MemoryStore::new()));
        let mut st = store.load().unwrap();
        st.gateway_certificate = Some(Fingerprint::of(b"first gateway"));
        assert_eq!(
            store.save(&st).unwrap(),
            2,
            "the root and the gateway record"
        );
    }

    #[test]
    fn the_gateway_certificate_is_its_own_record_written_when_it_changes() {
        let backend = MemoryStore::new();
        let mut store = StateStore::new(Box::new(backend.clone()));
        let mut st = state();
        store.save(&st).unwrap();
        let fp = Fingerprint::of(b"gateway certificate");
        st.gateway_certificate = Some(fp);
        assert_eq!(store.save(&st).unwrap(), 1, "the gateway record alone");
        assert_eq!(store.save(&st).unwrap(), 0);
        let mut again = StateStore::new(Box::new(backend.clone()));
        let loaded = again.load().unwrap();
        assert_eq!(loaded.gateway_certificate, Some(fp));
        assert_eq!(again.save(&loaded).unwrap(), 0, "loaded as saved");
        assert_eq!(loaded.model.nodes.len(), 2);
        // A replacement (compaction, import) keeps it.
        again.replace(&loaded).unwrap();
        let reloaded = StateStore::new(Box::new(backend)).load().unwrap();
        assert_eq!(reloaded.gateway_certificate, Some(fp));
    }

    #[test]
    fn records_of_an_earlier_build_load_with_each_secret_on_its_launch() {
        // Version 2 records as the previous build wrote them: secrets of no current launch in
        // the root (ignored: they could not authenticate), the node's in its record.
        let root = format!(
            r#"{{"format":"{FORMAT}","version":{RECORD_VERSION},"launch_seq":3,"other_secrets":{{"e-old":"x"}}}}"#
        );
        let node = r#"{"node":{"agent_id":"a1","hostname":"h1","persona":"data","phase":"running","task":{"task_id":"t-a1","executor_id":"e-a1","state":"TASK_RUNNING","launched_at_ms":1},"updated_ms":1},"executor_secret":"s1"}"#;
        let mut backend = MemoryStore::new();
        backend
            .replace_all(&[
                (ROOT_KEY.to_owned(), root.into_bytes()),
                (node_key("a1"), node.as_bytes().to_vec()),
            ])
            .unwrap();
        let mut store = StateStore::new(Box::new(backend));
        let state = store.load().unwrap();
        assert_eq!(state.model.launch_seq, 3);
        let secrets: Vec<(String, bool)> = state
            .executor_secrets()
            .map(|(id, s)| (id.into_owned(), s.matches(&"s1".into())))
            .collect();
        assert_eq!(secrets, [("e-a1".to_owned(), true)]);
        // The stray secret and the clear one leave the store with the first save.
        assert!(store.holds_clear_secrets());
        assert_eq!(
            store.save(&state).unwrap(),
            2,
            "the root and the node, rewritten"
        );
        let Loaded::Records(records) = store.backend_mut().load_all().unwrap() else {
            panic!("records expected");
        };
        let root = String::from_utf8(records[ROOT_KEY].clone()).unwrap();
        assert!(!root.contains("e-old"), "{root}");
        let node = String::from_utf8(records[&node_key("a1")].clone()).unwrap();
        assert!(!node.contains("\"s1\""), "{node}");
        assert_eq!(store.save(&state).unwrap(), 0);
    }

    /// Every byte the journal file holds, as text.
    fn journal_text(path: &std::path::Path) -> String {
        String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned()
    }

    fn assert_secret_absent(text: &str, secret: &Secret) {
        let b64 = crate::mesos::base64::encode(secret.expose().as_bytes());
        assert!(
            !text.contains(secret.expose()) && !text.contains(&b64),
            "an executor secret is stored in clear: {text}"
        );
    }

    /// The store keeps what authenticates an executor, never the secret itself; records of
    /// an earlier build that hold it in clear are read, and the whole store is written again
    /// without it (a journal's older lines go too).
    #[test]
    fn executor_secrets_are_stored_as_digests_and_clear_ones_rewritten() {
        let dir = std::env::temp_dir().join(format!("persist-digest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let secret = crate::secret::random_token().unwrap();
        let path = dir.join("state.json");
        let mut p = Persisted::default();
        let mut n = Node::new("a1", "h1", Persona::Data, 1);
        n.task = Some(
            TaskRecord::new("t-a1", "e-a1", TaskState::Running, 1).with_secret(Token::new(&secret)),
        );
        p.model.nodes.insert("a1", n);
        {
            let mut journal = crate::store::JournalStore::new(&path).unwrap();
            journal.lock().unwrap();
            let mut store = StateStore::new(Box::new(journal));
            store.load().unwrap();
            store.save(&p).unwrap();
        }
        assert_secret_absent(&journal_text(&path), &secret);

        // As an earlier build wrote it: the secret in clear in the node's record.
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        let root = format!(r#"{{"format":"{FORMAT}","version":{RECORD_VERSION},"launch_seq":3}}"#);
        let node = format!(
            r#"{{"node":{{"agent_id":"a1","hostname":"h1","persona":"data","phase":"running","task":{{"task_id":"t-a1","executor_id":"e-a1","state":"TASK_RUNNING","launched_at_ms":1}},"updated_ms":1}},"executor_secret":"{}"}}"#,
            secret.expose()
        );
        {
            let mut journal = crate::store::JournalStore::new(&path).unwrap();
            journal.lock().unwrap();
            journal
                .replace_all(&[
                    (ROOT_KEY.to_owned(), root.into_bytes()),
                    (node_key("a1"), node.into_bytes()),
                ])
                .unwrap();
            // A later batch: the clear record stays in the journal's earlier line.
            let root =
                format!(r#"{{"format":"{FORMAT}","version":{RECORD_VERSION},"launch_seq":4}}"#);
            journal
                .apply(&[crate::store::Change::Put(
                    ROOT_KEY.into(),
                    root.into_bytes(),
                )])
                .unwrap();
        }
        assert!(journal_text(&path).contains(secret.expose()));
        let state = {
            let mut journal = crate::store::JournalStore::new(&path).unwrap();
            journal.lock().unwrap();
            let mut store = StateStore::new(Box::new(journal));
            let state = store.load().unwrap();
            store.save(&state).unwrap();
            state
        };
        assert!(state.executor_secret("e-a1").unwrap().matches(&secret));
        assert_secret_absent(&journal_text(&path), &secret);
        let mut journal = crate::store::JournalStore::new(&path).unwrap();
        journal.lock().unwrap();
        let back = StateStore::new(Box::new(journal)).load().unwrap();
        assert!(back.executor_secret("e-a1").unwrap().matches(&secret));
        std::fs::remove_dir_all(&dir).ok();
    }

    fn store_backend_clone(store: &mut StateStore) -> MemoryStore {
        let mut copy = MemoryStore::new();
        match store.backend_mut().load_all().unwrap() {
            Loaded::Records(r) => {
                let records: Vec<(String, Vec<u8>)> = r.into_iter().collect();
                copy.replace_all(&records).unwrap();
            }
            _ => panic!("records expected"),
        }
        copy
    }
}
