//! Shared by the tests and benches that run the real binaries on the dev cluster.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Polls `f` until it returns `Some`, failing with `what` at the deadline.
pub fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

pub fn scheduler_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_storage-scheduler"))
}

/// The executor binary beside the scheduler's (built by `cargo build -p storage-executor`).
pub fn executor_bin() -> PathBuf {
    let p = scheduler_bin().with_file_name("storage-executor");
    assert!(
        p.exists(),
        "{} missing: build it first (cargo build -p storage-executor; scripts/test.sh does)",
        p.display()
    );
    p
}

/// Flags of a pre-configured deployment against the dev cluster.
pub fn scheduler_args(masters: &str, port: u16, store: &Path, password: &str) -> Vec<String> {
    vec![
        "-loglevel=debug".to_string(),
        format!("-rest.port={port}"),
        "-rest.address=127.0.0.1".to_string(),
        format!("-uri={masters}"),
        format!("-storage.password={password}"),
        "-storage.protectiondomain=default".to_string(),
        "-storage.storagepool=default".to_string(),
        "-storage.preconfig.primary=127.0.0.1".to_string(),
        "-storage.preconfig.secondary=127.0.0.2".to_string(),
        "-storage.preconfig.tiebreaker=127.0.0.3".to_string(),
        "-storage.preconfig.gateway=127.0.0.1".to_string(),
        format!("-store.uri={}", store.display()),
        format!("-executor.altpath={}", executor_bin().display()),
    ]
}

/// The state a scheduler saved in its file store, read with the scheduler's own loader.
pub fn stored_state(path: &Path) -> storage_framework::scheduler::model::Persisted {
    use storage_framework::store::{JournalStore, StateStore};
    let journal = JournalStore::new(path).expect("store path");
    StateStore::new(Box::new(journal))
        .load()
        .unwrap_or_else(|e| panic!("stored state: {e}"))
}
