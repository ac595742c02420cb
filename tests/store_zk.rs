//! The ZooKeeper store against a real ZooKeeper server.

#[path = "support/store_suite.rs"]
mod store_suite;
#[path = "support/zookeeper.rs"]
mod zookeeper;

use storage_framework::store::zk::{parse_uri, ZkStore};
use storage_framework::store::{Change, Loaded, RecordStore, StoreError, StoreKind, StoreSettings};
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

/// Plants `<base>/leader` holding `data`, as a holder whose session has not ended (the node is
/// persistent here, so only a steal removes it).
fn plant_lock(zk: &ZooKeeper, base: &str, data: &str) {
    use storage_framework::store::zk::wire::{op, Conn, Enc};
    let addr = format!("127.0.0.1:{}", zk.port);
    let mut c = Conn::connect(&addr, 10_000, None, std::time::Duration::from_secs(3))
        .unwrap()
        .expect("session");
    let mut at = String::new();
    let parts: Vec<&str> = base.split('/').filter(|p| !p.is_empty()).collect();
    for part in parts.iter().copied().chain(["leader"]) {
        at.push('/');
        at.push_str(part);
        let body = if part == "leader" { data } else { "" };
        let mut e = Enc::default();
        e.string(&at).buf(body.as_bytes()).open_acl().int(0);
        let r = c.call(op::CREATE, &e.0).unwrap();
        assert!(
            r.err == 0 || (r.err == -110 && part != "leader"),
            "{at}: {}",
            r.err
        );
    }
    let _ = c.call(op::CLOSE, &[]);
}

fn lock_data(zk: &ZooKeeper, base: &str) -> String {
    use storage_framework::store::zk::wire::{op, Conn, Dec, Enc};
    let addr = format!("127.0.0.1:{}", zk.port);
    let mut c = Conn::connect(&addr, 10_000, None, std::time::Duration::from_secs(3))
        .unwrap()
        .expect("session");
    let mut e = Enc::default();
    e.string(&format!("{base}/leader")).boolean(false);
    let r = c.call(op::GET_DATA, &e.0).unwrap();
    assert_eq!(r.err, 0, "{base}/leader");
    let _ = c.call(op::CLOSE, &[]);
    String::from_utf8(Dec::new(&r.body).buf().unwrap()).unwrap()
}

fn host_facts() -> (String, String, String) {
    let read = |p: &str| std::fs::read_to_string(p).unwrap().trim().to_owned();
    let ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
    (
        read("/proc/sys/kernel/hostname"),
        read("/proc/sys/kernel/random/boot_id"),
        ns.to_string_lossy().into_owned(),
    )
}

/// A pid that no process has now: one that ran and ended.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn a_lock_is_stolen_only_from_a_dead_holder_proven_dead_here() {
    let dir = tempdir("steal");
    let zk = ZooKeeper::start(&dir);
    let (host, boot, ns) = host_facts();
    let dead = dead_pid();
    let ours = format!("pid {dead} started 1 on {host} boot {boot} pidns {ns}");

    // Our host, boot and PID namespace, and the pid is gone: the holder is dead, the lock ours.
    plant_lock(&zk, "/sf/steal/dead", &ours);
    let mut s = store(&zk, "/sf/steal/dead");
    records(&mut s);
    let now = lock_data(&zk, "/sf/steal/dead");
    assert!(
        now.starts_with(&format!("pid {} ", std::process::id())),
        "{now}"
    );

    // A pid not visible here proves nothing when the holder may live in another PID namespace
    // (a container on this host), on another boot, or did not say which.
    let alive_elsewhere = [
        (
            "other-ns",
            format!("pid {dead} started 1 on {host} boot {boot} pidns pid:[1]"),
        ),
        (
            "other-boot",
            format!("pid {dead} started 1 on {host} boot 0-0-0 pidns {ns}"),
        ),
        ("unsaid", format!("pid {dead} started 1 on {host}")),
    ];
    std::thread::scope(|scope| {
        for (name, data) in &alive_elsewhere {
            let zk = &zk;
            scope.spawn(move || {
                let base = format!("/sf/steal/{name}");
                plant_lock(zk, &base, data);
                let err = store(zk, &base).load_all().expect_err(name);
                assert!(matches!(err, StoreError::Fenced { .. }), "{name}: {err}");
                assert!(err.to_string().contains(data.as_str()), "{name}: {err}");
                assert_eq!(&lock_data(zk, &base), data, "{name}: the lock was taken");
            });
        }
        // Two stealers of one dead lock: the second takes it between the first's decision
        // and its delete; the first's delete, made for the lock it read, loses.
        scope.spawn(|| {
            plant_lock(&zk, "/sf/steal/race", &ours);
            let second = std::sync::Arc::new(std::sync::Mutex::new(None));
            let mut first = store(&zk, "/sf/steal/race");
            let (hosts, base) = parse_uri(&zk.uri("/sf/steal/race"), "/unused").unwrap();
            let slot = second.clone();
            first.before_steal_for_test(move || {
                let mut s = ZkStore::new(hosts, base);
                s.load_all().expect("the second stealer takes the lock");
                *slot.lock().unwrap() = Some(s);
            });
            let err = first.load_all().expect_err("the first stealer must lose");
            assert!(matches!(err, StoreError::Fenced { .. }), "{err}");
            let mut second = second.lock().unwrap().take().expect("second stealer ran");
            second
                .apply(&[Change::Put("root".into(), ROOT.into())])
                .expect("the second stealer still leads");
        });
    });
}

/// A first save of a 10,000-node cluster is several times ZooKeeper's request limit: it goes
/// out in parts, every record arrives, and the versions learnt from every part let the next
/// save of all nodes (updates) and a replacement (deletes across parts) through their
/// compare-and-set.
#[test]
fn a_batch_over_512_kib_is_saved_in_parts_and_stays_writable() {
    const NODES: usize = 10_000;
    let dir = tempdir("split");
    let zk = ZooKeeper::start(&dir);
    let node = |i: usize, gen: u32| -> (String, Vec<u8>) {
        let devices: Vec<String> = (0..4)
            .map(|d| format!("/dev/disk/by-id/scsi-{i:05}-{d}"))
            .collect();
        let v = serde_json::json!({"agent": format!("agent-{i}"), "gen": gen, "devices": devices});
        (format!("node/agent-{i:05}"), v.to_string().into_bytes())
    };
    let first: Vec<Change> = std::iter::once(Change::Put("root".into(), ROOT.into()))
        .chain((0..NODES).map(|i| {
            let (k, v) = node(i, 1);
            Change::Put(k, v)
        }))
        .collect();
    let bytes: usize = first
        .iter()
        .map(|c| match c {
            Change::Put(k, v) => k.len() + v.len(),
            Change::Delete(k) => k.len(),
        })
        .sum();
    assert!(
        bytes > 2 * 512 * 1024,
        "only {bytes} bytes: not a split save"
    );

    let mut s = store(&zk, "/sf/split");
    assert_eq!(s.load_all().unwrap(), Loaded::Empty);
    s.apply(&first).expect("first save of 10,000 nodes");
    // Every node again: each part's setData names the version the earlier parts left.
    let second: Vec<Change> = (0..NODES)
        .map(|i| {
            let (k, v) = node(i, 2);
            Change::Put(k, v)
        })
        .collect();
    s.apply(&second).expect("second save of every node");
    drop(s);
    let got = records(&mut store(&zk, "/sf/split"));
    assert_eq!(got.len(), NODES + 1);
    for i in [0, 1, NODES / 2, NODES - 1] {
        let (k, v) = node(i, 2);
        assert_eq!(got[&k], v, "{k}");
    }

    // A new writer (after a failover) replaces the state with half the nodes: thousands of
    // deletes, again in parts.
    let mut s = store(&zk, "/sf/split");
    assert_eq!(records(&mut s).len(), NODES + 1);
    let half: Vec<(String, Vec<u8>)> =
        std::iter::once(("root".to_string(), ROOT.as_bytes().to_vec()))
            .chain((0..NODES / 2).map(|i| node(i, 3)))
            .collect();
    s.replace_all(&half)
        .expect("replacement with half the nodes");
    drop(s);
    let got = records(&mut store(&zk, "/sf/split"));
    assert_eq!(got.len(), NODES / 2 + 1);
    assert_eq!(got[&node(NODES / 2 - 1, 3).0], node(NODES / 2 - 1, 3).1);
    assert!(!got.contains_key(&node(NODES / 2, 3).0));
}

/// A client of its own, without credentials, on `zk`.
fn anonymous(zk: &ZooKeeper) -> storage_framework::store::zk::wire::Conn {
    use storage_framework::store::zk::wire::Conn;
    let addr = format!("127.0.0.1:{}", zk.port);
    Conn::connect(&addr, 10_000, None, std::time::Duration::from_secs(3))
        .unwrap()
        .expect("session")
}

/// The error code of `op` on `path` by `c` (setData and delete of any version, create).
fn try_op(c: &mut storage_framework::store::zk::wire::Conn, o: i32, path: &str) -> i32 {
    use storage_framework::store::zk::wire::{op, Enc};
    let mut e = Enc::default();
    match o {
        op::SET_DATA => e.string(path).buf(b"{}").int(-1),
        op::DELETE => e.string(path).int(-1),
        op::GET_DATA => e.string(path).boolean(false),
        _ => e.string(path).buf(b"").open_acl().int(0),
    };
    c.call(o, &e.0).unwrap().err
}

const NO_AUTH: i32 = -102;

/// With `user:pass@` in the URI the framework's znodes are its credentials' alone: a client
/// without them can neither read, write nor delete them, while the store, and the store of
/// a restarted scheduler, still can. Wrong credentials are a clear error naming the URI with
/// its password masked.
#[test]
fn with_credentials_only_the_framework_reaches_its_znodes() {
    use storage_framework::store::zk::wire::op;
    let dir = tempdir("acl");
    let zk = ZooKeeper::start(&dir);
    let uri = |pass: &str| format!("zk://sf-user:{pass}@127.0.0.1:{}/sf/acl", zk.port);
    let settings = StoreSettings::new(StoreKind::ZooKeeper, uri("Zk-Pa55"));
    let mut s = storage_framework::store::open(&settings).unwrap();
    assert_eq!(s.load_all().unwrap(), Loaded::Empty);
    s.apply(&[
        Change::Put("root".into(), ROOT.into()),
        Change::Put("node/a".into(), b"{\"n\":1}".to_vec()),
    ])
    .unwrap();
    let mut c = anonymous(&zk);
    for path in [
        "/sf/acl",
        "/sf/acl/state",
        "/sf/acl/nodes",
        "/sf/acl/nodes/a",
    ] {
        assert_eq!(
            try_op(&mut c, op::SET_DATA, path),
            NO_AUTH,
            "setData {path}"
        );
        assert_eq!(
            try_op(&mut c, op::GET_DATA, path),
            NO_AUTH,
            "getData {path}"
        );
    }
    assert_eq!(try_op(&mut c, op::DELETE, "/sf/acl/nodes/a"), NO_AUTH);
    assert_eq!(try_op(&mut c, op::DELETE, "/sf/acl/leader"), NO_AUTH);
    assert_eq!(try_op(&mut c, op::CREATE, "/sf/acl/nodes/b"), NO_AUTH);
    assert_eq!(try_op(&mut c, op::CREATE, "/sf/acl/other"), NO_AUTH);
    s.apply(&[Change::Put("node/a".into(), b"{\"n\":2}".to_vec())])
        .unwrap();
    drop(s);
    // A restarted scheduler with the same credentials reads and writes.
    let mut again = storage_framework::store::open(&settings).unwrap();
    assert_eq!(records(again.as_mut())["node/a"], b"{\"n\":2}");
    again
        .apply(&[Change::Put("node/a".into(), b"{\"n\":3}".to_vec())])
        .unwrap();
    drop(again);
    // Wrong credentials: refused, the URI named with its password masked.
    let wrong = StoreSettings::new(StoreKind::ZooKeeper, uri("Not-The-Pa55"));
    let err = storage_framework::store::open(&wrong)
        .and_then(|mut s| s.load_all())
        .expect_err("wrong credentials must not read");
    let text = err.to_string();
    assert!(text.contains("zk://sf-user:***@127.0.0.1"), "{text}");
    assert!(
        !text.contains("Not-The-Pa55") && !text.contains("Zk-Pa55"),
        "{text}"
    );
    assert!(text.contains("credentials"), "{text}");
}

/// A store an earlier start made without credentials (open to every client) is the
/// credentials' alone once a scheduler opens it with them, and keeps its records.
#[test]
fn znodes_made_without_credentials_become_the_credentials_alone() {
    use storage_framework::store::zk::wire::op;
    let dir = tempdir("adopt");
    let zk = ZooKeeper::start(&dir);
    let mut open = store(&zk, "/sf/adopt");
    assert_eq!(open.load_all().unwrap(), Loaded::Empty);
    open.apply(&[
        Change::Put("root".into(), ROOT.into()),
        Change::Put("node/a".into(), b"{\"n\":1}".to_vec()),
    ])
    .unwrap();
    drop(open);
    let mut c = anonymous(&zk);
    assert_eq!(try_op(&mut c, op::GET_DATA, "/sf/adopt/nodes/a"), 0);
    let uri = format!("zk://sf-user:Zk-Pa55@127.0.0.1:{}/sf/adopt", zk.port);
    let settings = StoreSettings::new(StoreKind::ZooKeeper, uri);
    let mut s = storage_framework::store::open(&settings).unwrap();
    assert_eq!(records(s.as_mut())["node/a"], b"{\"n\":1}");
    for path in [
        "/sf/adopt",
        "/sf/adopt/state",
        "/sf/adopt/nodes",
        "/sf/adopt/nodes/a",
    ] {
        assert_eq!(
            try_op(&mut c, op::SET_DATA, path),
            NO_AUTH,
            "setData {path}"
        );
        assert_eq!(
            try_op(&mut c, op::GET_DATA, path),
            NO_AUTH,
            "getData {path}"
        );
    }
    assert_eq!(try_op(&mut c, op::DELETE, "/sf/adopt/leader"), NO_AUTH);
    s.apply(&[Change::Put("node/a".into(), b"{\"n\":2}".to_vec())])
        .unwrap();
}
