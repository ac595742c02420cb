//! Every record store the scheduler can use passes the one shared suite (ZooKeeper's run is
//! in `store_zk.rs`, beside the server it needs).

#[path = "support/store_suite.rs"]
mod store_suite;

use storage_framework::store::{JournalStore, MemoryStore};

#[test]
fn memory_store_passes_the_shared_suite() {
    let shared = MemoryStore::new();
    store_suite::run(&mut || Box::new(shared.clone()));
}

#[test]
fn journal_passes_the_shared_suite() {
    let dir = std::env::temp_dir().join(format!("stores-suite-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("state.journal");
    store_suite::run(&mut || Box::new(JournalStore::new(&path).expect("path")));
    let _ = std::fs::remove_dir_all(&dir);
}
