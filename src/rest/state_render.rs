//! The `/api/state` JSON of a view, built from the last render of the same window: the JSON
//! of each node that did not change is copied from it, and only the nodes that changed are
//! encoded again. A view changes with every executor report (tens a second on a busy
//! cluster), each report changing one node of thousands, and encoding a node costs far more
//! than copying its bytes (most of all with musl's allocator).
//!
//! The answer is byte for byte what `serde_json::to_vec` gives for the same value: the
//! "shell" (the answer with an empty `model.nodes`) is serde's own encoding, and the nodes
//! map is written as serde_json writes a map (`{"<id>":<node>,...}`, compact). Each node may
//! carry fields the model holds once for all (its `target_generation`): encoded once, they
//! close every node's object, and a render with other such fields reuses nothing.

use crate::scheduler::model::Node;
use serde::Serialize;
use std::ops::Range;
use std::sync::Arc;

/// What a render keeps of a node to tell, at the next render, whether its JSON still holds.
pub(super) type Key = u64;

/// A node as the model holds it, and how to tell it has not changed since a render.
pub(super) trait NodeVersion {
    fn version(&self) -> Key;
}

/// Nodes by value (the tests' plain maps): their content. The model holds its nodes shared
/// (below).
#[cfg(test)]
impl NodeVersion for Node {
    fn version(&self) -> Key {
        crate::hash::content_hash(&serde_json::to_vec(self).expect("a node encodes"))
    }
}

/// A model node: its revision, new at every write and never repeated. Not the node itself:
/// a render kept by the cache would make the model's next write to every node copy it
/// (`model/revision.rs`).
impl NodeVersion for Arc<Node> {
    fn version(&self) -> Key {
        self.revision.get()
    }
}

/// An encoded answer, and where each node's `"<id>":<node>` sits in it.
pub(super) struct Render {
    pub body: Arc<Vec<u8>>,
    /// The fields every node's object ends with.
    extra: Vec<u8>,
    /// In agent id order, as the model's map.
    nodes: Vec<Fragment>,
}

struct Fragment {
    id: String,
    key: Key,
    at: Range<usize>,
}

/// How many nodes a render encoded and copied (for tests and the bench's understanding).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct Reuse {
    pub encoded: usize,
    pub copied: usize,
}

/// Where `shell`'s empty nodes map opens: the first `"nodes":{}` is `model.nodes`, because
/// everything encoded before it is a scalar, a string (whose quotes are escaped) or the key
/// of an object that holds it (`model`).
fn nodes_slot(shell: &[u8]) -> Option<usize> {
    const EMPTY: &[u8] = b"\"nodes\":{}";
    let at = shell.windows(EMPTY.len()).position(|w| w == EMPTY)?;
    Some(at + EMPTY.len() - 1)
}

/// `shell` (the answer's JSON with an empty `model.nodes`) with `nodes` (in agent id order)
/// in its nodes map, each node's object ending with `extra` (encoded fields, `"a":1`, or
/// none), reusing the JSON of every node `previous` holds unchanged.
pub(super) fn render<'a, K: AsRef<str> + ?Sized + 'a, V: NodeVersion + Serialize + 'a>(
    shell: &[u8],
    nodes: impl Iterator<Item = (&'a K, &'a V)>,
    extra: &[u8],
    previous: Option<&Render>,
) -> Result<(Render, Reuse), String> {
    let previous = previous.filter(|p| p.extra == extra);
    let slot = nodes_slot(shell).ok_or("the state's JSON has no empty model.nodes to fill")?;
    let (head, tail) = shell.split_at(slot);
    let mut body = Vec::with_capacity(previous.map_or(shell.len() + 64 * 1024, |p| {
        p.body.len() + p.body.len() / 16
    }));
    body.extend_from_slice(head);
    let mut old = previous.map(|p| (&p.body, p.nodes.iter().peekable()));
    let mut fragments = Vec::with_capacity(previous.map_or(0, |p| p.nodes.len()));
    let mut reuse = Reuse::default();
    for (i, (id, node)) in nodes.enumerate() {
        let id = id.as_ref();
        if i > 0 {
            body.push(b',');
        }
        let start = body.len();
        let same = old.as_mut().and_then(|(bytes, frags)| {
            // Both in agent id order: fragments of nodes gone since are passed over.
            while frags.next_if(|f| f.id.as_str() < id).is_some() {}
            let f = frags.next_if(|f| f.id == id)?;
            (node.version() == f.key).then(|| (&bytes[f.at.clone()], f.key))
        });
        let key = match same {
            Some((bytes, key)) => {
                body.extend_from_slice(bytes);
                reuse.copied += 1;
                key
            }
            None => {
                serde_json::to_writer(&mut body, id).map_err(|e| e.to_string())?;
                body.push(b':');
                serde_json::to_writer(&mut body, node).map_err(|e| e.to_string())?;
                close_with(&mut body, extra)?;
                reuse.encoded += 1;
                node.version()
            }
        };
        fragments.push(Fragment {
            id: id.to_owned(),
            key,
            at: start..body.len(),
        });
    }
    body.extend_from_slice(tail);
    Ok((
        Render {
            body: Arc::new(body),
            extra: extra.to_vec(),
            nodes: fragments,
        },
        reuse,
    ))
}

/// Puts `extra` at the end of the object `body` ends with.
pub(super) fn close_with(body: &mut Vec<u8>, extra: &[u8]) -> Result<(), String> {
    if extra.is_empty() {
        return Ok(());
    }
    if body.pop() != Some(b'}') {
        return Err("a node's JSON is not an object".into());
    }
    if body.last() != Some(&b'{') {
        body.push(b',');
    }
    body.extend_from_slice(extra);
    body.push(b'}');
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::{Persona, Phase};
    use std::collections::BTreeMap;

    #[derive(Serialize)]
    struct Shell<'a, V> {
        name: &'a str,
        model: Model<'a, V>,
        after: u32,
    }

    #[derive(Serialize)]
    struct Model<'a, V> {
        nodes: &'a BTreeMap<String, V>,
        tail: &'a str,
    }

    fn shell<V: Serialize>(name: &str) -> Vec<u8> {
        let empty = BTreeMap::<String, V>::new();
        serde_json::to_vec(&Shell {
            name,
            model: Model {
                nodes: &empty,
                tail: "t",
            },
            after: 7,
        })
        .unwrap()
    }

    fn whole<V: Serialize>(name: &str, nodes: &BTreeMap<String, V>) -> Vec<u8> {
        serde_json::to_vec(&Shell {
            name,
            model: Model { nodes, tail: "t" },
            after: 7,
        })
        .unwrap()
    }

    fn nodes(n: usize) -> BTreeMap<String, Node> {
        (0..n)
            .map(|i| {
                let id = format!("agent-{i:03}\"esc\\");
                let node = Node::new(&id, &format!("h{i}"), Persona::Data, 1000 + i as u64);
                (id, node)
            })
            .collect()
    }

    #[test]
    fn equals_serde_and_encodes_only_what_changed() {
        // A name holding the marker's text, escaped as serde escapes it, is no slot.
        let name = "\"nodes\":{}";
        let mut m = nodes(5);
        let (first, r) = render(&shell::<Node>(name), m.iter(), b"", None).unwrap();
        assert_eq!(*first.body, whole(name, &m));
        assert_eq!(
            r,
            Reuse {
                encoded: 5,
                copied: 0
            }
        );

        // One node changes, one goes, one comes.
        m.get_mut("agent-001\"esc\\").unwrap().phase = Phase::Failed;
        m.remove("agent-003\"esc\\");
        let (id, n) = nodes(7).into_iter().next_back().unwrap();
        m.insert(id, n);
        let (second, r) = render(&shell::<Node>(name), m.iter(), b"", Some(&first)).unwrap();
        assert_eq!(*second.body, whole(name, &m));
        assert_eq!(
            r,
            Reuse {
                encoded: 2,
                copied: 3
            }
        );
        let text = String::from_utf8(second.body.to_vec()).unwrap();
        assert!(text.contains("\"phase\":\"failed\""), "{text}");
        assert!(!text.contains("agent-003"), "{text}");

        // Nothing changed: everything copied, from a render that copied itself.
        let (third, r) = render(&shell::<Node>(name), m.iter(), b"", Some(&second)).unwrap();
        assert_eq!(third.body, second.body);
        assert_eq!(
            r,
            Reuse {
                encoded: 0,
                copied: 5
            }
        );

        // Every node gone.
        let none = BTreeMap::<String, Node>::new();
        let (empty, _) = render(&shell::<Node>(name), none.iter(), b"", Some(&third)).unwrap();
        assert_eq!(*empty.body, whole(name, &none));
    }

    /// A node's health, host report and gateway facts are encoded as serde encodes them.
    #[test]
    fn nodes_with_their_health_equal_serde() {
        use crate::contract::health::{HostCheck, HostProblem};
        use crate::scheduler::model::{DeviceStatus, Health, HostHealth, NodeStorage, SdsStatus};
        let name = "n";
        let mut m = nodes(3);
        let n = m.get_mut("agent-001\"esc\\").unwrap();
        n.health = Health::degraded(vec!["SDS s\"1 disconnected from the MDM".into()]);
        n.host = Some(Box::new(HostHealth {
            problems: vec![HostProblem::new(HostCheck::Module, "scini", "not loaded")],
            reported_ms: 5,
        }));
        n.storage = Some(Arc::new(NodeStorage {
            sds: Some(SdsStatus {
                id: "s1".into(),
                mdm_connection: Some("Disconnected".into()),
                ..Default::default()
            }),
            devices: vec![DeviceStatus {
                path: "/dev/sdb".into(),
                state: Some("Error".into()),
                ..Default::default()
            }],
        }));
        m.get_mut("agent-002\"esc\\").unwrap().health = Health::healthy();
        let (first, _) = render(&shell::<Node>(name), m.iter(), b"", None).unwrap();
        assert_eq!(*first.body, whole(name, &m));
        m.get_mut("agent-001\"esc\\").unwrap().health = Health::healthy();
        let (second, r) = render(&shell::<Node>(name), m.iter(), b"", Some(&first)).unwrap();
        assert_eq!(*second.body, whole(name, &m));
        assert_eq!(r.encoded, 1);
    }

    /// Fields the model holds once close every node's object; other ones reuse nothing.
    #[test]
    fn every_node_carries_the_extra_fields() {
        let m = nodes(3);
        let extra = br#""target_generation":2"#;
        let (first, _) = render(&shell::<Node>("n"), m.iter(), extra, None).unwrap();
        let j: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
        for (id, n) in &m {
            let mut want = serde_json::to_value(n).unwrap();
            want["target_generation"] = 2.into();
            assert_eq!(j["model"]["nodes"][id], want, "{id}");
        }
        let (same, r) = render(&shell::<Node>("n"), m.iter(), extra, Some(&first)).unwrap();
        assert_eq!((same.body, r.copied), (first.body.clone(), 3));
        let next = br#""target_generation":3"#;
        let (moved, r) = render(&shell::<Node>("n"), m.iter(), next, Some(&first)).unwrap();
        assert_eq!(r.encoded, 3, "a new target re-encodes every node");
        let j: serde_json::Value = serde_json::from_slice(&moved.body).unwrap();
        assert_eq!(
            j["model"]["nodes"]["agent-002\"esc\\"]["target_generation"],
            3
        );
        let mut body = b"{}".to_vec();
        close_with(&mut body, extra).unwrap();
        assert_eq!(body, br#"{"target_generation":2}"#);
        assert!(close_with(&mut b"[1]".to_vec(), extra).is_err());
    }

    #[test]
    fn shared_nodes_are_unchanged_while_they_are_the_same_revision() {
        let node = Arc::new(nodes(1).into_values().next().unwrap());
        let key = node.version();
        assert_eq!(node.clone().version(), key);
        // A copy is a change, even with the same content.
        let copy = Arc::new((*node).clone());
        assert_ne!(copy.version(), key);
        let mut changed = node.clone();
        Arc::make_mut(&mut changed).hostname = "moved".into();
        assert_ne!(changed.version(), key);
        assert_eq!(node.version(), key);
    }

    #[test]
    fn a_shell_without_an_empty_nodes_map_is_an_error() {
        let m = nodes(1);
        let e = render(b"{\"model\":{}}", m.iter(), b"", None)
            .err()
            .unwrap();
        assert!(e.contains("model.nodes"), "{e}");
    }
}
