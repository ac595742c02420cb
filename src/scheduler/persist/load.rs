//! Stored records back into the state ([`super::StateStore::load`]). Each record is decoded
//! as the store hands it over ([`RecordStore::load_each`]), so the text of every node record
//! is never held beside the model it becomes: a restarted scheduler at 10,000 nodes held
//! both, and a copy of the text, in 94 MB under a `mem: 32` limit.
//!
//! [`RecordStore::load_each`]: crate::store::RecordStore::load_each

use super::{corrupt, GatewayRecord, NodeRecord, Root, RECORD_VERSION};
use crate::scheduler::model::{ClusterModel, Node, Nodes, Persisted};
use crate::secret::{Secret, Token};
use crate::store::{Replay, StoreError, FORMAT, GATEWAY_KEY, ROOT_KEY};
use crate::tls::Fingerprint;
use std::collections::BTreeMap;

/// The state records hold.
pub(super) struct FromRecords {
    pub state: Persisted,
    /// The root holds what this build would not write (an earlier build's `other_secrets`).
    pub stale_root: bool,
    /// A record held an executor's secret in clear (an earlier build's).
    pub clear_secrets: bool,
}

/// The state being rebuilt from records replayed in the order they were written.
#[derive(Default)]
pub(super) struct Replayed {
    root: Option<Vec<u8>>,
    gateway: Option<Fingerprint>,
    nodes: Nodes,
    /// Records that cannot be read, by key. What counts is the record the store holds in the
    /// end: one replaced or deleted later is no error, as when the store was loaded whole.
    bad: BTreeMap<String, StoreError>,
    /// Some record, even one replaced later, held an executor secret in clear: a journal
    /// keeps every line it was given, so the next save rewrites the store whole.
    clear_secrets: bool,
}

impl Replayed {
    pub fn replay(&mut self, record: Replay<'_>) {
        let key = match record {
            Replay::Put(key, _) | Replay::Delete(key) => key,
        };
        self.bad.remove(key);
        match record {
            Replay::Put(ROOT_KEY, bytes) => self.root = Some(bytes.to_vec()),
            Replay::Delete(ROOT_KEY) => self.root = None,
            Replay::Put(GATEWAY_KEY, bytes) => {
                self.gateway = None;
                match serde_json::from_slice::<GatewayRecord>(bytes) {
                    Ok(rec) => self.gateway = Some(rec.fingerprint),
                    Err(e) => self.fail(key, format!("record {key:?} is unreadable: {e}")),
                }
            }
            Replay::Delete(GATEWAY_KEY) => self.gateway = None,
            Replay::Put(key, bytes) => {
                let Some(agent) = key.strip_prefix("node/") else {
                    return self.fail(key, format!("unknown record {key:?}"));
                };
                match node_from_record(key, agent, bytes) {
                    Ok((node, clear)) => {
                        self.clear_secrets |= clear;
                        self.nodes.insert(agent, node);
                    }
                    Err(e) => {
                        self.nodes.remove(agent);
                        self.bad.insert(key.to_owned(), e);
                    }
                }
            }
            Replay::Delete(key) => {
                if let Some(agent) = key.strip_prefix("node/") {
                    self.nodes.remove(agent);
                }
            }
        }
    }

    fn fail(&mut self, key: &str, detail: String) {
        self.bad.insert(key.to_owned(), corrupt(detail));
    }

    /// The state, or why the records do not make one: the root's format and version are
    /// checked first (a newer build's records are reported as that, not as unreadable).
    pub fn finish(self) -> Result<FromRecords, StoreError> {
        let Some(root) = self.root else {
            let held = self.nodes.len() + usize::from(self.gateway.is_some()) + self.bad.len();
            return Err(corrupt(format!(
                "{held} record(s) but no {ROOT_KEY:?} record"
            )));
        };
        let (root, stale_root) = decode_root(&root)?;
        if let Some((_, e)) = self.bad.into_iter().next() {
            return Err(e);
        }
        Ok(FromRecords {
            state: Persisted {
                model: ClusterModel {
                    framework_id: root.framework_id,
                    nodes: self.nodes,
                    launch_seq: root.launch_seq,
                    heartbeat_secs: root.heartbeat_secs,
                    // Pool capacity is read from the gateway again at start; never stored.
                    pools: Vec::new(),
                    // Likewise the cluster's health: polled again; until then `unknown`.
                    health: Default::default(),
                    target: root.target,
                    paused: root.paused,
                },
                gateway_certificate: self.gateway,
            },
            stale_root,
            clear_secrets: self.clear_secrets,
        })
    }
}

/// The root record, and whether it holds what this build would not write.
fn decode_root(bytes: &[u8]) -> Result<(Root, bool), StoreError> {
    let header: serde_json::Value = serde_json::from_slice(bytes)
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
    let stale_root = header
        .get("other_secrets")
        .is_some_and(|s| s.as_object().is_none_or(|o| !o.is_empty()));
    let root: Root = serde_json::from_value(header)
        .map_err(|e| corrupt(format!("the root record does not fit its layout: {e}")))?;
    Ok((root, stale_root))
}

/// One node record: the node with its executor secret's digest, and whether the record held
/// the secret in clear (an earlier build's), which the next save replaces.
fn node_from_record(key: &str, agent: &str, bytes: &[u8]) -> Result<(Node, bool), StoreError> {
    let mut rec: NodeRecord<Node, String> = serde_json::from_slice(bytes)
        .map_err(|e| corrupt(format!("record {key:?} is unreadable: {e}")))?;
    if &*rec.node.agent_id != agent {
        return Err(corrupt(format!(
            "record {key:?} holds agent {:?}",
            rec.node.agent_id
        )));
    }
    let clear = rec.executor_secret.is_some();
    let kept = match (rec.executor_secret_sha256, rec.executor_secret) {
        (Some(hex), _) => Some(Token::from_digest_hex(&hex).ok_or_else(|| {
            corrupt(format!(
                "record {key:?}: executor_secret_sha256 is not a SHA-256 in hex"
            ))
        })?),
        (None, Some(clear)) => Some(Token::new(&Secret::new(clear))),
        (None, None) => None,
    };
    if let (Some(t), Some(kept)) = (rec.node.task.as_mut(), kept) {
        t.secret = Some(kept);
    }
    Ok((rec.node, clear))
}

#[cfg(test)]
mod tests {
    use super::super::{encode, encode_node, root_record};
    use super::*;
    use crate::scheduler::model::Persona;
    use crate::store::node_key;

    fn root(version: u32) -> Vec<u8> {
        let mut buf = Vec::new();
        encode(&mut buf, &root_record(&Persisted::default()));
        let text = String::from_utf8(buf).unwrap();
        text.replace(
            &format!("\"version\":{RECORD_VERSION}"),
            &format!("\"version\":{version}"),
        )
        .into_bytes()
    }

    fn node(agent: &str, failures: u32) -> Vec<u8> {
        let mut n = Node::new(agent, agent, Persona::Data, 1);
        n.failures = failures;
        let mut buf = Vec::new();
        encode_node(&mut buf, &n);
        buf
    }

    fn replay(records: &[Replay<'_>]) -> Result<FromRecords, StoreError> {
        let mut r = Replayed::default();
        for record in records {
            r.replay(*record);
        }
        r.finish()
    }

    #[test]
    fn a_later_record_replaces_an_earlier_one_and_a_delete_removes_it() {
        let (root, a1, a1_again, a2) = (
            root(RECORD_VERSION),
            node("a1", 1),
            node("a1", 2),
            node("a2", 0),
        );
        let (k1, k2) = (node_key("a1"), node_key("a2"));
        let got = replay(&[
            Replay::Put(ROOT_KEY, &root),
            Replay::Put(&k1, &a1),
            Replay::Put(&k2, &a2),
            Replay::Put(&k1, &a1_again),
            Replay::Delete(&k2),
        ])
        .unwrap();
        let nodes = &got.state.model.nodes;
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes["a1"].failures, 2);
        assert!(!got.clear_secrets && !got.stale_root);
    }

    /// serde reads a list with room for four items from its first: a restarted scheduler
    /// holding that room in every node's lists was about 3 MB of its peak at 10,000 nodes.
    #[test]
    fn lists_read_back_hold_no_spare_room() {
        use crate::scheduler::model::{DeviceStatus, Health, NodeStorage};
        let mut n = Node::new("a1", "h1", Persona::Data, 1);
        n.devices = vec!["/dev/sdb".into()];
        n.attached = vec!["/dev/sdb".into()];
        n.devices_removed = vec!["/dev/sdc".into()].into();
        n.health = Health::degraded(vec!["its SDS is not listed".into()]);
        n.storage = Some(std::sync::Arc::new(NodeStorage {
            sds: None,
            devices: vec![DeviceStatus {
                path: "/dev/sdb".into(),
                ..DeviceStatus::default()
            }],
        }));
        let mut buf = Vec::new();
        encode_node(&mut buf, &n);
        let (k1, root) = (node_key("a1"), root(RECORD_VERSION));
        let got = replay(&[Replay::Put(ROOT_KEY, &root), Replay::Put(&k1, &buf)]).unwrap();
        let back = &got.state.model.nodes["a1"];
        let storage = back.storage.as_ref().unwrap();
        let rooms = [
            (back.devices.len(), back.devices.capacity()),
            (back.attached.len(), back.attached.capacity()),
            (back.devices_removed.len(), back.devices_removed.capacity()),
            (back.health.reasons.len(), back.health.reasons.capacity()),
            (storage.devices.len(), storage.devices.capacity()),
        ];
        assert_eq!(rooms, [(1, 1); 5], "(length, capacity) of each list");
    }

    /// What counts is the record the store holds in the end, as when it was loaded whole.
    #[test]
    fn an_unreadable_record_is_an_error_naming_it_unless_a_later_one_replaces_or_deletes_it() {
        let (root, a1) = (root(RECORD_VERSION), node("a1", 0));
        let (k1, k2) = (node_key("a1"), node_key("a2"));
        let bad = b"{\"node\":7}".as_slice();
        assert!(replay(&[
            Replay::Put(ROOT_KEY, &root),
            Replay::Put(&k1, bad),
            Replay::Put(&k1, &a1),
            Replay::Put(&k2, bad),
            Replay::Delete(&k2),
            Replay::Put("junk", bad),
            Replay::Delete("junk"),
        ])
        .is_ok());
        let err = replay(&[
            Replay::Put(ROOT_KEY, &root),
            Replay::Put(&k1, &a1),
            Replay::Put(&k2, bad),
        ])
        .err()
        .expect("an unreadable record left");
        assert!(
            err.to_string()
                .contains(&format!("record {k2:?} is unreadable")),
            "{err}"
        );
        // The node it replaced is gone with it: never the earlier node under a bad record.
        let err = replay(&[
            Replay::Put(ROOT_KEY, &root),
            Replay::Put(&k1, &a1),
            Replay::Put(&k1, bad),
        ]);
        assert!(err.is_err());
        let err = replay(&[Replay::Put(ROOT_KEY, &root), Replay::Put("junk", b"{}")])
            .err()
            .expect("an unknown record");
        assert!(err.to_string().contains("unknown record \"junk\""), "{err}");
    }

    /// Records of a newer build read as unreadable nodes; the version says why.
    #[test]
    fn the_root_is_checked_before_the_records_and_is_required() {
        let (newer, k1) = (root(RECORD_VERSION + 1), node_key("a1"));
        let err = replay(&[
            Replay::Put(&k1, b"{\"node\":{\"future\":1}}"),
            Replay::Put(ROOT_KEY, &newer),
        ])
        .err()
        .expect("a newer version");
        assert!(
            matches!(err, StoreError::UnsupportedVersion { found, .. } if found == RECORD_VERSION + 1),
            "{err}"
        );
        let a1 = node("a1", 0);
        let err = replay(&[Replay::Put(&k1, &a1)]).err().expect("no root");
        assert!(
            err.to_string()
                .contains("1 record(s) but no \"root\" record"),
            "{err}"
        );
    }

    /// A journal keeps every line it was given: a secret in clear in an earlier line stays in
    /// the file until the store is rewritten, even when a later line replaced its record.
    #[test]
    fn a_secret_in_clear_in_any_record_replayed_asks_for_a_rewrite() {
        let root = root(RECORD_VERSION);
        let k1 = node_key("a1");
        let mut clear = String::from_utf8(node("a1", 0)).unwrap();
        clear.insert_str(clear.len() - 1, ",\"executor_secret\":\"s1\"");
        let got = replay(&[
            Replay::Put(ROOT_KEY, &root),
            Replay::Put(&k1, clear.as_bytes()),
        ])
        .unwrap();
        assert!(got.clear_secrets);
        let digest = node("a1", 0);
        let got = replay(&[
            Replay::Put(ROOT_KEY, &root),
            Replay::Put(&k1, clear.as_bytes()),
            Replay::Put(&k1, &digest),
        ])
        .unwrap();
        assert!(got.clear_secrets);
    }
}
