//! The one test suite every [`RecordStore`] passes (memory, journal file, ZooKeeper).
//!
//! `open` gives a store over the same location each time it is called: a second call stands
//! for a restarted scheduler, so everything checked after it was durable. The suite starts by
//! destroying what is there, so a location may be reused.

use std::collections::BTreeMap;
use storage_framework::mesos::types::TaskState;
use storage_framework::scheduler::model::{Node, Persisted, Persona, Replacement, TaskRecord};
use storage_framework::scheduler::persist::StateStore;
use storage_framework::store::{Change, Loaded, RecordStore};

fn records(store: &mut dyn RecordStore) -> BTreeMap<String, Vec<u8>> {
    match store.load_all().expect("load_all") {
        Loaded::Empty => BTreeMap::new(),
        Loaded::Records(r) => r,
        Loaded::Legacy(_) => panic!("{}: legacy document in the suite", store.describe()),
    }
}

fn json(v: &str) -> Vec<u8> {
    v.as_bytes().to_vec()
}

fn put(k: &str, v: &str) -> Change {
    Change::Put(k.into(), json(v))
}

/// Runs every check; panics naming the first that fails.
pub fn run(open: &mut dyn FnMut() -> Box<dyn RecordStore>) {
    // Each store is dropped before the next is opened: a store may hold a lock (ZooKeeper),
    // and a reopened store is a restarted scheduler.
    open().destroy().expect("destroy");
    assert_eq!(open().load_all().expect("load_all"), Loaded::Empty);
    let value = |r: &BTreeMap<String, Vec<u8>>, k: &str| -> serde_json::Value {
        serde_json::from_slice(&r[k]).expect("stored JSON")
    };

    // A batch of puts, seen by a fresh store.
    {
        let mut s = open();
        records(s.as_mut());
        s.apply(&[
            put("root", r#"{"a":1}"#),
            put("node/x", r#"{"n":"x"}"#),
            put("node/y", r#"{"n":"y"}"#),
        ])
        .expect("apply");
    }
    {
        let mut s = open();
        let got = records(s.as_mut());
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(value(&got, "node/x"), serde_json::json!({"n":"x"}));
        // Replace one, delete one, add one: one batch.
        s.apply(&[
            put("node/x", r#"{"n":"x2"}"#),
            Change::Delete("node/y".into()),
            Change::Delete("node/never-there".into()),
            put("node/z", r#"{"n":"z"}"#),
        ])
        .expect("apply");
        // And a second batch on the same store.
        s.apply(&[put("node/w", r#"{"n":"w"}"#)]).expect("apply");
    }
    {
        let mut s = open();
        let got = records(s.as_mut());
        assert_eq!(
            got.keys().map(String::as_str).collect::<Vec<_>>(),
            ["node/w", "node/x", "node/z", "root"]
        );
        assert_eq!(value(&got, "node/x"), serde_json::json!({"n":"x2"}));
        // Replace all: only the new records remain.
        s.replace_all(&[("root".into(), json(r#"{"b":2}"#))])
            .expect("replace_all");
    }
    {
        let mut s = open();
        let got = records(s.as_mut());
        assert_eq!(got.len(), 1);
        assert_eq!(value(&got, "root"), serde_json::json!({"b":2}));
        // A big record (a node with many devices) and many records.
        let big = format!(r#"{{"devices":"{}"}}"#, "d".repeat(200_000));
        let mut batch = vec![put("node/big", &big)];
        for i in 0..300 {
            batch.push(put(&format!("node/agent-{i}"), &format!(r#"{{"i":{i}}}"#)));
        }
        s.apply(&batch).expect("apply many");
    }
    {
        let got = records(open().as_mut());
        assert_eq!(got.len(), 302);
        assert_eq!(
            value(&got, "node/big")["devices"].as_str().map(str::len),
            Some(200_000)
        );
    }

    state_round_trip(open);

    open().destroy().expect("destroy");
    assert_eq!(open().load_all().expect("load_all"), Loaded::Empty);
}

fn sample(nodes: usize) -> Persisted {
    let mut p = Persisted::default();
    p.model.framework_id = Some("fw-suite".into());
    p.model.launch_seq = nodes as u64;
    for i in 0..nodes {
        let agent = format!("agent-{i}");
        let mut node = Node::new(&agent, &format!("host-{i}"), Persona::Data, 1);
        let exec = format!("storage-executor.host-{i}.{i}");
        node.task = Some(
            TaskRecord::new(
                &format!("storage.host-{i}.{i}"),
                &exec,
                TaskState::Running,
                1,
            )
            .running_since(2)
            .with_secret(format!("secret-{i}").as_str().into()),
        );
        // What a scheduler upgrade's successor needs to go on replacing executors.
        node.executor_sha256 = Some(format!("{i:064x}").into());
        if i == 1 {
            node.replacing = Some(Box::new(Replacement {
                to_sha256: format!("{:064x}", 99).into(),
                failed: None,
            }));
        }
        p.model.nodes.insert(agent, node);
    }
    p
}

/// The scheduler's state through [`StateStore`]: what is saved is what loads, and a change to
/// one node writes that node's record only.
fn state_round_trip(open: &mut dyn FnMut() -> Box<dyn RecordStore>) {
    open().destroy().expect("destroy");
    let mut store = StateStore::new(open());
    assert!(store.load().expect("load").model.nodes.is_empty());
    let mut state = sample(5);
    assert_eq!(store.save(&state).expect("save"), 6);
    assert_eq!(store.save(&state).expect("save"), 0, "nothing changed");
    state.model.nodes.get_mut("agent-3").unwrap().failures = 4;
    assert_eq!(store.save(&state).expect("save"), 1);
    state.model.nodes.remove("agent-4");
    state.model.launch_seq += 1;
    assert_eq!(store.save(&state).expect("save"), 1, "root only");
    let gateway = storage_framework::tls::Fingerprint::of(b"gateway certificate");
    state.gateway_certificate = Some(gateway);
    assert_eq!(
        store.save(&state).expect("save"),
        1,
        "the gateway record only"
    );
    drop(store);
    let mut store = StateStore::new(open());
    let back = store.load().expect("load");
    assert_eq!(back.gateway_certificate, Some(gateway));
    // Secrets included: they are part of each launch.
    assert_eq!(back.model, state.model);
    assert_eq!(back.executor_secrets().count(), 4);
    // A teardown-like reset leaves nothing of the old nodes.
    store.replace(&Persisted::default()).expect("replace");
    drop(store);
    let back = StateStore::new(open()).load().expect("load");
    assert!(back.model.nodes.is_empty() && back.model.framework_id.is_none());
    assert_eq!(back.gateway_certificate, None);
}
