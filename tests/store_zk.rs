//! The ZooKeeper store against a real ZooKeeper server.

#[path = "support/store_suite.rs"]
mod store_suite;
#[path = "support/zookeeper.rs"]
mod zookeeper;

use storage_framework::store::zk::{parse_uri, ZkStore};
use storage_framework::store::{Change, Loaded, RecordStore, StoreError};
use zookeeper::ZooKeeper;

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("store-zk-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn store(zk: &ZooKeeper, path: &str) -> ZkStore {
    let (hosts, base) = parse_uri(&zk.uri(path), "/unused").unwrap();
    ZkStore::new(hosts, base)
}

fn records(s: &mut dyn RecordStore) -> std::collections::BTreeMap<String, Vec<u8>> {
    match s.load_all().expect("load") {
        Loaded::Records(r) => r,
        Loaded::Empty => Default::default(),
        Loaded::Legacy(_) => panic!("legacy"),
    }
}

const ROOT: &str = r#"{"format":"storage-framework-state","version":2}"#;

#[test]
fn zookeeper_store_passes_the_shared_suite() {
    let dir = tempdir("suite");
    let zk = ZooKeeper::start(&dir);
    store_suite::run(&mut || Box::new(store(&zk, "/sf/suite")));
}

#[test]
fn zookeeper_restart_during_operation_loses_nothing() {
    let dir = tempdir("restart");
    let mut zk = ZooKeeper::start(&dir);
    let mut s = store(&zk, "/sf/restart");
    assert_eq!(s.load_all().unwrap(), Loaded::Empty);
    s.apply(&[
        Change::Put("root".into(), ROOT.into()),
        Change::Put("node/a".into(), b"{\"n\":1}".to_vec()),
    ])
    .unwrap();
    zk.stop();
    // While ZooKeeper is down a write fails (the dispatcher then declines and holds ACKs).
    let down = s.apply(&[Change::Put("node/b".into(), b"{\"n\":2}".to_vec())]);
    assert!(matches!(down, Err(StoreError::Io { .. })), "{down:?}");
    zk.restart();
    // The same session resumes: the write goes through with its compare-and-set intact.
    s.apply(&[Change::Put("node/b".into(), b"{\"n\":2}".to_vec())])
        .unwrap();
    s.apply(&[Change::Put("node/a".into(), b"{\"n\":3}".to_vec())])
        .unwrap();
    drop(s);
    let got = records(&mut store(&zk, "/sf/restart"));
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got["node/a"], b"{\"n\":3}");
    assert_eq!(got["node/b"], b"{\"n\":2}");
}

#[test]
fn stale_second_scheduler_is_fenced() {
    let dir = tempdir("fence");
    let zk = ZooKeeper::start(&dir);
    let mut old = store(&zk, "/sf/fence");
    old.load_all().unwrap();
    old.apply(&[Change::Put("root".into(), ROOT.into())])
        .unwrap();
    // The old leader's session ends (a partition longer than the session timeout) while it
    // still believes it leads; a new scheduler takes over and writes.
    old.end_session_for_test();
    let mut new = store(&zk, "/sf/fence");
    records(&mut new);
    new.apply(&[Change::Put("node/a".into(), b"{\"by\":\"new\"}".to_vec())])
        .unwrap();
    // The old one comes back and tries to write: refused, never applied.
    let err = old
        .apply(&[Change::Put("node/a".into(), b"{\"by\":\"old\"}".to_vec())])
        .expect_err("stale write");
    assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
    assert!(err.to_string().contains("/sf/fence"), "{err}");
    drop(new);
    let got = records(&mut store(&zk, "/sf/fence"));
    assert_eq!(got["node/a"], b"{\"by\":\"new\"}");
}
