//! The store helpers of the real binary: `-store.dump`, `-store.delete` (asks for
//! `-yes`), `-store.import` (a state file into ZooKeeper). None needs a master.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/zookeeper.rs"]
mod zookeeper;

use std::path::Path;
use std::process::{Command, Output};
use storage_framework::scheduler::model::{Node, Persisted, Persona};
use storage_framework::scheduler::persist::StateStore;
use storage_framework::store::JournalStore;

fn run(store_flags: &[String], extra: &[&str]) -> Output {
    let args: Vec<String> = cluster::scheduler_args("127.0.0.1:1", 1, Path::new("x"), "pw")
        .into_iter()
        .filter(|a| !a.starts_with("-store."))
        .chain(store_flags.iter().cloned())
        .chain(extra.iter().map(|s| s.to_string()))
        .collect();
    Command::new(cluster::scheduler_bin())
        .args(&args)
        .output()
        .expect("run storage-scheduler")
}

fn sample() -> Persisted {
    let mut p = Persisted::default();
    p.model.framework_id = Some("fw-helpers".into());
    p.model.launch_seq = 4;
    let mut n = Node::new("a1", "host-1", Persona::Primary, 1);
    n.task = Some(
        storage_framework::scheduler::model::TaskRecord::new(
            "storage.host-1.4",
            "storage-executor.host-1.4",
            storage_framework::mesos::types::TaskState::Running,
            1,
        )
        .with_secret("s3cr3t-never-shown".into()),
    );
    p.model.nodes.insert("a1", n);
    p
}

#[test]
fn dump_delete_and_import() {
    let dir = std::env::temp_dir().join(format!("store-helpers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("state.json");
    let mut s = StateStore::new(Box::new(JournalStore::new(&file).unwrap()));
    s.load().unwrap();
    s.save(&sample()).unwrap();
    let file_flags = vec![format!("-store.uri={}", file.display())];

    // While a writer holds the file (as a running scheduler does): a dump reads beside it,
    // a delete is refused naming the lock.
    let out = run(&file_flags, &["-store.delete", "-yes"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{}.lock", file.display())),
        "{stderr}"
    );
    assert!(file.exists());

    // Dump: the state as JSON, the secret masked.
    let out = run(&file_flags, &["-store.dump"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let json: serde_json::Value = serde_json::from_str(&text).expect("dump is JSON");
    assert_eq!(json["model"]["framework_id"], "fw-helpers");
    assert_eq!(json["model"]["nodes"]["a1"]["hostname"], "host-1");
    assert!(!text.contains("s3cr3t") && !String::from_utf8_lossy(&out.stderr).contains("s3cr3t"));
    drop(s);

    // Import into a real ZooKeeper, then dump from there.
    let zk = zookeeper::ZooKeeper::start(&dir.join("zk"));
    let zk_flags = vec![
        "-store.type=zk".to_string(),
        format!("-store.uri={}", zk.uri("/sf/helpers")),
    ];
    let import = format!("-store.import={}", file.display());
    let out = run(&zk_flags, &[import.as_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&zk_flags, &["-store.dump"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("dump is JSON");
    assert_eq!(
        json["model"]["nodes"]["a1"]["task"]["task_id"],
        "storage.host-1.4"
    );
    // A second import would overwrite state: refused.
    let out = run(&zk_flags, &[import.as_str()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already holds state"));

    // Delete asks for -yes, then deletes.
    let out = run(&zk_flags, &["-store.delete"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-yes"));
    let out = run(&zk_flags, &["-store.delete", "-yes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&zk_flags, &["-store.dump"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("dump is JSON");
    assert!(json["model"]["framework_id"].is_null(), "{json}");
    let _ = std::fs::remove_dir_all(&dir);
}
