//! The model's nodes, and the log of which were written (`Nodes::written_since`).

use super::{Node, NodeStorage, Revision};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The nodes by agent id, each shared (`Arc`) with the views until it changes: a view of
/// 10,000 nodes copies 10,000 pointers, not the nodes. Writing to a node
/// ([`Nodes::get_mut`], [`NodeMut`]) copies it first when a view shares it, so a view never
/// changes under a reader's feet, and gives it a new [`Revision`]: the store's save, the
/// parked plan requests and the `/api/state` render tell a changed node by it, and keep no
/// node (a kept node is copied by the next write to it).
///
/// Those that look at every node after a batch only to find the few written (the store's
/// save, the parked plan requests) ask [`Nodes::written_since`] instead: at 10,000 nodes and
/// a batch per executor report, their walks were a fifth of the dispatcher's CPU.
///
/// A node is keyed by its own `agent_id`, one shared `Arc<str>` (not a second copy
/// of every agent id).
#[derive(Debug, Default)]
pub struct Nodes {
    map: BTreeMap<Arc<str>, Arc<Node>>,
    log: WriteLog,
}

/// Where a reader of [`Nodes::written_since`] left off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteMark {
    instance: u64,
    seq: u64,
    bulk: u64,
}

/// The agents of the last writes one node at a time (get_mut, insert, remove), oldest first.
/// A write through [`Nodes::values_mut`] (a walk that writes where it must) or a `clear` is
/// not listed but counted: a reader from before one looks at every node, as it would without
/// the log.
#[derive(Debug)]
struct WriteLog {
    /// Tells one `Nodes` from another (a reload, a copy): a mark is only good for its own.
    instance: u64,
    /// Entry `i` is write number `base + i + 1`.
    agents: Vec<Arc<str>>,
    base: u64,
    /// An atomic only so that [`NodeMut`] can count through a shared reference while the
    /// map is borrowed; the model has one writer.
    bulk: AtomicU64,
}

/// Entries kept: a reader further behind walks every node. Readers catch up after every
/// batch, so this is only reached by a reader that stopped reading (or in bulk).
const LOG_CAP: usize = 4096;

impl Default for WriteLog {
    fn default() -> WriteLog {
        static INSTANCES: AtomicU64 = AtomicU64::new(1);
        WriteLog {
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            agents: Vec::new(),
            base: 0,
            bulk: AtomicU64::new(0),
        }
    }
}

impl WriteLog {
    fn note(&mut self, agent: &Arc<str>) {
        if self.agents.len() >= LOG_CAP {
            let half = LOG_CAP / 2;
            self.agents.drain(..half);
            self.base += half as u64;
        }
        self.agents.push(agent.clone());
    }

    fn bulk(&self) {
        self.bulk.fetch_add(1, Ordering::Relaxed);
    }
}

/// A copy is another `Nodes`, with a log of its own (views copy the nodes, never the log).
impl Clone for Nodes {
    fn clone(&self) -> Nodes {
        Nodes {
            map: self.map.clone(),
            log: WriteLog::default(),
        }
    }
}

/// Equal nodes are equal `Nodes`, whatever was written to get there.
impl PartialEq for Nodes {
    fn eq(&self, other: &Nodes) -> bool {
        self.map == other.map
    }
}

impl Nodes {
    pub fn get(&self, agent: &str) -> Option<&Node> {
        self.map.get(agent).map(|n| &**n)
    }

    /// The node to write to: copied first if a view shares it, and of a new revision.
    pub fn get_mut(&mut self, agent: &str) -> Option<&mut Node> {
        let node = written(self.map.get_mut(agent)?);
        self.log.note(&node.agent_id);
        Some(node)
    }

    /// Sets the node's last contact, a write left out of the log: a sign of life, which the
    /// log's readers (the store's save, the parked plan requests) need not act on; the
    /// node's next logged write saves it with the rest. It has a new revision all the same,
    /// so that a render of the node (`/api/state`) shows it, and so a reader that cannot use
    /// the log (after [`Nodes::values_mut`]) and looks at every revision sees it too. Copied
    /// first if a view shares it, as any write. `false`: no such node.
    pub fn note_contact(&mut self, agent: &str, at_ms: u64) -> bool {
        let Some(node) = self.map.get_mut(agent) else {
            return false;
        };
        written(node).last_contact_ms = Some(at_ms);
        true
    }

    /// Inserts `node` under its agent id, which `agent` must be, as a new revision.
    pub fn insert(&mut self, agent: impl AsRef<str>, mut node: Node) -> Option<Node> {
        node.revision = Revision::fresh();
        debug_assert_eq!(
            agent.as_ref(),
            &*node.agent_id,
            "a node is keyed by its agent"
        );
        self.log.note(&node.agent_id);
        self.map
            .insert(node.agent_id.clone(), Arc::new(node))
            .map(Arc::unwrap_or_clone)
    }

    /// The node as shared (a pointer copy keeps it as it is now).
    pub fn get_shared(&self, agent: &str) -> Option<&Arc<Node>> {
        self.map.get(agent)
    }

    /// Puts back a node kept with [`Nodes::get_shared`] (its revision is still what it held
    /// when kept).
    pub fn insert_shared(&mut self, node: Arc<Node>) {
        self.log.note(&node.agent_id);
        self.map.insert(node.agent_id.clone(), node);
    }

    pub fn remove(&mut self, agent: &str) -> Option<Node> {
        let (key, node) = self.map.remove_entry(agent)?;
        self.log.note(&key);
        Some(Arc::unwrap_or_clone(node))
    }

    pub fn contains_key(&self, agent: &str) -> bool {
        self.map.contains_key(agent)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Changes when a node is written, added or removed on this thread, the model's one
    /// writer (a write or an insert makes a revision, a removal leaves one node fewer): the
    /// dispatcher's walks after a batch are skipped while it holds.
    pub fn stamp(&self) -> (u64, usize) {
        (Revision::made_here(), self.map.len())
    }

    /// Where the log stands now: [`Nodes::written_since`] it lists what is written after.
    pub fn mark(&self) -> WriteMark {
        WriteMark {
            instance: self.log.instance,
            seq: self.log.base + self.log.agents.len() as u64,
            bulk: self.log.bulk.load(Ordering::Relaxed),
        }
    }

    /// The agents whose nodes were written, added or removed since `mark`, in the order of
    /// the writes and as often as written; `None` when the log cannot tell (a write through
    /// [`Nodes::values_mut`] or a `clear` since, a mark too old or of another `Nodes`): then
    /// every node may have changed.
    pub fn written_since(&self, mark: WriteMark) -> Option<&[Arc<str>]> {
        let log = &self.log;
        if mark.instance != log.instance || mark.bulk != log.bulk.load(Ordering::Relaxed) {
            return None;
        }
        let from = usize::try_from(mark.seq.checked_sub(log.base)?).ok()?;
        log.agents.get(from..)
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &Arc<str>> + ExactSizeIterator {
        self.map.keys()
    }

    pub fn values(&self) -> NodeValues<'_> {
        self.map.values().map(|n| &**n)
    }

    pub fn iter(&self) -> NodeIter<'_> {
        self.map.iter().map(|(k, n)| (k, &**n))
    }

    pub fn clear(&mut self) {
        self.log.bulk();
        self.log.agents.clear();
        self.map.clear();
    }

    /// Every node as shared (a view's `/api/state` render reads them).
    pub fn iter_shared(&self) -> impl Iterator<Item = (&Arc<str>, &Arc<Node>)> {
        self.map.iter()
    }

    pub fn values_shared(&self) -> impl Iterator<Item = &Arc<Node>> {
        self.map.values()
    }

    /// Every node, copied only if written to.
    pub fn values_mut(&mut self) -> impl Iterator<Item = NodeMut<'_>> {
        let bulk = &self.log.bulk;
        self.map
            .values_mut()
            .map(move |node| NodeMut { node, bulk })
    }
}

/// `agents` once each, in the order they first come: [`Nodes::written_since`] lists a node as
/// often as it was written, and its readers look at each once. A set, not a sort: a sort of
/// their own made the release binary 16 KB larger.
pub fn once_each<'a>(agents: impl Iterator<Item = &'a Arc<str>>) -> Vec<&'a Arc<str>> {
    let mut seen: HashSet<&str> = HashSet::new();
    agents.filter(|a| seen.insert(a)).collect()
}

impl std::ops::Index<&str> for Nodes {
    type Output = Node;
    fn index(&self, agent: &str) -> &Node {
        &self.map[agent]
    }
}

impl<'a> IntoIterator for &'a Nodes {
    type Item = (&'a Arc<str>, &'a Node);
    type IntoIter = NodeIter<'a>;
    fn into_iter(self) -> NodeIter<'a> {
        self.iter()
    }
}

impl FromIterator<Node> for Nodes {
    fn from_iter<I: IntoIterator<Item = Node>>(iter: I) -> Self {
        Nodes {
            map: iter
                .into_iter()
                .map(|n| (n.agent_id.clone(), Arc::new(n)))
                .collect(),
            log: WriteLog::default(),
        }
    }
}

impl Serialize for Nodes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

impl<'de> Deserialize<'de> for Nodes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Keyed by each node's own agent id. The record store checks a record's key against
        // it; an earlier build's single document is keyed by it as it loads.
        BTreeMap::<String, Node>::deserialize(d).map(|m| m.into_values().collect())
    }
}

pub type NodeValues<'a> = std::iter::Map<
    std::collections::btree_map::Values<'a, Arc<str>, Arc<Node>>,
    fn(&Arc<Node>) -> &Node,
>;
pub type NodeIter<'a> = std::iter::Map<
    std::collections::btree_map::Iter<'a, Arc<str>, Arc<Node>>,
    fn((&'a Arc<str>, &'a Arc<Node>)) -> (&'a Arc<str>, &'a Node),
>;

/// A node of [`Nodes::values_mut`]: read through it freely; the first write copies the node
/// if a view or the store shares it.
pub struct NodeMut<'a> {
    node: &'a mut Arc<Node>,
    bulk: &'a AtomicU64,
}

impl std::ops::Deref for NodeMut<'_> {
    type Target = Node;
    fn deref(&self) -> &Node {
        self.node
    }
}

impl std::ops::DerefMut for NodeMut<'_> {
    fn deref_mut(&mut self) -> &mut Node {
        self.bulk.fetch_add(1, Ordering::Relaxed);
        written(self.node)
    }
}

impl NodeMut<'_> {
    /// Takes `storage`, equal to the node's own, in place of it: not a write (no copy, no new
    /// revision, nothing to save), and skipped while a view or the store shares the node. So
    /// that the node and the gateway worker's next poll hold one storage, not two equal ones.
    pub fn share_storage(&mut self, storage: &Arc<NodeStorage>) {
        let Some(node) = Arc::get_mut(self.node) else {
            return;
        };
        debug_assert_eq!(node.storage.as_deref(), Some(&**storage));
        node.storage = Some(storage.clone());
    }
}

/// `node`, to be written to: its own copy (if a view shares it) and a new revision.
fn written(node: &mut Arc<Node>) -> &mut Node {
    let node = Arc::make_mut(node);
    node.revision = Revision::fresh();
    node
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(agent: &str) -> Node {
        Node::new(
            agent,
            &format!("host-{agent}"),
            super::super::Persona::Data,
            0,
        )
    }

    fn listed(nodes: &Nodes, mark: WriteMark) -> Option<Vec<&str>> {
        nodes
            .written_since(mark)
            .map(|l| l.iter().map(|a| &**a).collect())
    }

    /// Every write one node at a time is listed since a mark; a write through `values_mut`,
    /// a `clear`, a mark too far behind or of another `Nodes` cannot be told, and says so.
    #[test]
    fn the_log_lists_each_write_since_a_mark_or_says_it_cannot() {
        let mut nodes: Nodes = ["a1", "a2", "a3"].into_iter().map(node).collect();
        let start = nodes.mark();
        assert_eq!(listed(&nodes, start), Some(vec![]));
        nodes.get_mut("a2").unwrap().hostname = "h".into();
        assert!(nodes.get_mut("missing").is_none());
        nodes.insert("a4", node("a4"));
        let kept = nodes.get_shared("a1").unwrap().clone();
        nodes.remove("a1");
        let after_remove = nodes.mark();
        nodes.insert_shared(kept);
        assert_eq!(listed(&nodes, start), Some(vec!["a2", "a4", "a1", "a1"]));
        assert_eq!(listed(&nodes, after_remove), Some(vec!["a1"]));

        // Read through values_mut: nothing written, the log still tells.
        let before_bulk = nodes.mark();
        assert_eq!(nodes.values_mut().filter(|n| n.hostname == "h").count(), 1);
        assert_eq!(listed(&nodes, before_bulk), Some(vec![]));
        // Written through it: every reader from before walks everything.
        for mut n in nodes.values_mut() {
            if &*n.agent_id == "a3" {
                n.hostname = "h3".into();
            }
        }
        assert_eq!(listed(&nodes, before_bulk), None);
        assert_eq!(listed(&nodes, start), None);
        let after_bulk = nodes.mark();
        nodes.get_mut("a3").unwrap();
        assert_eq!(listed(&nodes, after_bulk), Some(vec!["a3"]));

        // A copy (a view's) is another Nodes: a mark of this one is no good there.
        let copy = nodes.clone();
        assert_eq!(copy, nodes);
        assert_eq!(listed(&copy, after_bulk), None);
        assert_eq!(listed(&copy, copy.mark()), Some(vec![]));

        // Too far behind: the oldest entries are gone.
        let old = nodes.mark();
        for _ in 0..LOG_CAP {
            nodes.get_mut("a2").unwrap();
        }
        assert_eq!(listed(&nodes, old), None);
        let recent = nodes.mark();
        nodes.get_mut("a4").unwrap();
        assert_eq!(listed(&nodes, recent), Some(vec!["a4"]));

        nodes.clear();
        assert_eq!(listed(&nodes, recent), None);
    }
}
