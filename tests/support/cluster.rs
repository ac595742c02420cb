//! Shared by the tests and benches that run the real binaries on the dev cluster.
#![allow(dead_code)]

use devcluster::gateway::{self, GatewayConfig, GatewayHandle, MdmIps};
use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
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

/// A static musl binary as `scripts/build-release.sh` ships it: the one place that knows
/// where that script leaves its artifacts. Fails (never skips) when it has not run.
pub fn release_artifact(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("dist/last-build")
        .join(name);
    assert!(
        p.exists(),
        "{} missing: run scripts/build-release.sh first (scripts/test.sh does)",
        p.display()
    );
    p
}

/// A dev cluster gateway (pre-configured: MDMs 127.0.0.1/2/3, domain and pool `default`)
/// accepting `password`, shared by the tests of this process and never stopped: the
/// scheduler checks the storage cluster before it subscribes.
pub fn shared_gateway(password: &str) -> &'static GatewayHandle {
    static GATEWAYS: OnceLock<Mutex<HashMap<String, &'static GatewayHandle>>> = OnceLock::new();
    let mut map = GATEWAYS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    map.entry(password.to_string()).or_insert_with(|| {
        let handle = gateway::start(GatewayConfig::new(password, dev_mdms()))
            .unwrap_or_else(|e| panic!("dev gateway: {e}"));
        Box::leak(Box::new(handle))
    })
}

/// The MDM addresses the pre-configured flags name.
pub fn dev_mdms() -> MdmIps {
    MdmIps {
        primary: "127.0.0.1".to_string(),
        secondary: "127.0.0.2".to_string(),
        tiebreaker: "127.0.0.3".to_string(),
    }
}

/// Flags of a pre-configured deployment against the dev cluster (and its gateway, see
/// [`shared_gateway`]).
pub fn scheduler_args(masters: &str, port: u16, store: &Path, password: &str) -> Vec<String> {
    let gateway = shared_gateway(password).addr();
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
        format!("-storage.preconfig.gateway={gateway}"),
        format!("-store.uri={}", store.display()),
        format!("-executor.altpath={}", executor_bin().display()),
    ]
}

/// The host stand-in binary built with the dev cluster (`storage-host-standin`).
pub fn standin_bin() -> PathBuf {
    let p = scheduler_bin().with_file_name("storage-host-standin");
    assert!(
        p.exists(),
        "{} missing: build it first (cargo build -p storage-devcluster; scripts/test.sh does)",
        p.display()
    );
    p
}

/// Host stand-ins for every agent, RHEL 7 unless `per_agent` says otherwise: the executor
/// prepares its host, and no executor may ever act on the machine running the tests.
pub fn host_standins(control_url: Option<String>) -> devcluster::host::HostStandins {
    let mut s = devcluster::host::HostStandins::new(standin_bin(), control_url);
    s.profile = devcluster::host::HostProfile::Rhel7;
    s
}

/// Package files of both platforms in `dir` (`tests/devcluster/packages.txt`), named as the
/// vendor names them, served over HTTP from loopback (the server lives as long as the
/// returned handle), and the scheduler flags that hand them out.
pub fn stage_packages(dir: &Path) -> (Vec<String>, std::sync::Arc<tiny_http::Server>) {
    std::fs::create_dir_all(dir).expect("package dir");
    let server = std::sync::Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("file server"));
    let addr = server.server_addr().to_ip().expect("ip");
    let (s, root) = (server.clone(), dir.to_path_buf());
    std::thread::spawn(move || {
        while let Ok(req) = s.recv() {
            let name = req.url().trim_start_matches('/').to_string();
            let file = (!name.contains('/') && !name.contains(".."))
                .then(|| std::fs::File::open(root.join(&name)).ok())
                .flatten();
            let _ = match file {
                Some(f) => req.respond(tiny_http::Response::from_file(f)),
                None => req.respond(tiny_http::Response::empty(404)),
            };
        }
    });
    let mut flags = Vec::new();
    // The one list of stand-in packages (scripts/demo.sh reads it too): `<flag> <file>`.
    let list = include_str!("../devcluster/packages.txt");
    for (flag, file) in list.lines().filter_map(|l| l.split_once(' ')) {
        std::fs::write(dir.join(file), format!("stand-in package {file}\n")).expect("package file");
        flags.push(format!("-storage.{flag}=http://{addr}/{file}"));
    }
    (flags, server)
}

/// A child process killed (and reaped) when dropped, also when the test or bench panics, so
/// that a failed run leaves no scheduler behind.
pub struct KillOnDrop(pub std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Agents on which some task is TASK_RUNNING, by the master's snapshot (0 when it does not
/// answer).
pub fn agents_running(m: &devcluster::master::MasterHandle) -> usize {
    let Ok(snap) = m.snapshot() else { return 0 };
    snap["agents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| {
            a["executors"].as_array().into_iter().flatten().any(|e| {
                e["tasks"]
                    .as_array()
                    .is_some_and(|ts| ts.iter().any(|t| t["state"] == "TASK_RUNNING"))
            })
        })
        .count()
}

/// The state a scheduler saved in its file store, read with the scheduler's own loader.
pub fn stored_state(path: &Path) -> storage_framework::scheduler::model::Persisted {
    use storage_framework::scheduler::state_store::StateStore;
    use storage_framework::store::JournalStore;
    let journal = JournalStore::new(path).expect("store path");
    StateStore::new(Box::new(journal))
        .load()
        .unwrap_or_else(|e| panic!("stored state: {e}"))
}
