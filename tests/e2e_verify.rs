//! End to end, what runs on a node is what the operator and the scheduler named: the real
//! scheduler and executors on dev cluster agents (host stand-ins). A storage package whose
//! bytes differ from its `.sha256` flag fails the node naming the file and both digests, and
//! is not installed; an executor binary swapped on its way to the agent (a server at the
//! scheduler's advertised address handing out other bytes) is refused by the launch command
//! before it runs, and the task fails. A package URL without its digest stops the start
//! naming the flag, unless allowed, with one warning per package; without package URLs
//! (the customer's definition) neither.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{
    executor_bin, free_port, host_standins, scheduler_args, scheduler_bin, sha256_of,
    stage_packages, wait_for, KillOnDrop,
};
use devcluster::host::{self, FakeRoot};
use devcluster::master::{self, MasterHandle};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(120);
const PASSWORD: &str = "Scaleio123";

/// One RHEL 7 agent, the scheduler's state and logs, all under one directory.
struct Rig {
    /// The dev cluster, up while the rig is.
    _m: MasterHandle,
    dir: PathBuf,
    port: u16,
    args: Vec<String>,
    sched: Option<KillOnDrop>,
}

impl Rig {
    fn new(name: &str) -> Rig {
        let dir = std::env::temp_dir().join(format!("e2e-verify-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let m = master::start(master::MasterConfig {
            agents: 1,
            heartbeat_interval: Duration::from_secs(1),
            work_dir: dir.join("mesos"),
            status_update_retry: Duration::from_secs(1),
            host_standins: Some(host_standins(None)),
            ..Default::default()
        })
        .expect("dev cluster");
        let port = free_port();
        let args = scheduler_args(
            &m.addr().to_string(),
            port,
            &dir.join("state.json"),
            PASSWORD,
        );
        Rig {
            _m: m,
            dir,
            port,
            args,
            sched: None,
        }
    }

    fn spawn(&mut self) {
        let log = std::fs::File::create(self.dir.join("scheduler.log")).unwrap();
        let child = Command::new(scheduler_bin())
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start storage-scheduler");
        self.sched = Some(KillOnDrop(child));
    }

    /// The one node in `/api/state`, read from the address the scheduler listens on.
    fn node(&self) -> Option<Value> {
        let text = ureq::get(&format!("http://127.0.0.1:{}/api/state", self.port))
            .call()
            .ok()?
            .into_body()
            .read_to_string()
            .ok()?;
        let state: Value = serde_json::from_str(&text).ok()?;
        state["model"]["nodes"]
            .as_object()?
            .values()
            .next()
            .cloned()
    }

    /// The node's last error once it holds every one of `needles`.
    fn wait_error(&self, needles: &[&str]) -> String {
        let last = std::cell::RefCell::new(String::new());
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_for(
                &format!("the node failing with {needles:?}"),
                SETTLE,
                || {
                    let e = self.node()?["last_error"].as_str()?.to_string();
                    *last.borrow_mut() = e.clone();
                    needles.iter().all(|w| e.contains(w)).then_some(e)
                },
            )
        }));
        found.unwrap_or_else(|_| panic!("last error seen: {}", last.borrow()))
    }

    fn host(&self) -> FakeRoot {
        FakeRoot::open(&host::agent_root(&self.dir.join("mesos/agent-1"))).unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("scheduler.log")).unwrap_or_default()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        self.sched = None;
        if std::thread::panicking() {
            eprintln!("scheduler log:\n{}", self.log());
            eprintln!(
                "executor stderr:\n{}",
                sandbox_stderr(&self.dir.join("mesos"))
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Every executor sandbox's `stderr` under `dir`.
fn sandbox_stderr(dir: &Path) -> String {
    let mut out = String::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else if p.file_name().is_some_and(|f| f == "stderr")
                && p.to_string_lossy().contains("storage-executor")
            {
                out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    out
}

#[test]
fn a_package_that_is_not_the_one_its_digest_names_fails_the_node_and_is_not_installed() {
    let mut rig = Rig::new("package");
    let packages = rig.dir.join("packages");
    let (flags, _server) = stage_packages(&packages);
    rig.args.extend(flags);
    // The operator's digest is of the vendor's file; the server now hands out other bytes.
    let file = "EMC-ScaleIO-sds-2.0-10000.2072.el7.x86_64.rpm";
    let expected = sha256_of(&packages.join(file));
    std::fs::write(packages.join(file), "not the vendor's package\n").unwrap();
    let served = sha256_of(&packages.join(file));
    rig.spawn();

    let e = rig.wait_error(&["packages", file, "SHA-256 mismatch"]);
    assert!(
        e.contains(&format!("downloaded {served}")) && e.contains(&format!("expected {expected}")),
        "both digests: {e}"
    );
    let state = rig.host().state().unwrap();
    assert!(
        state.installed("EMC-ScaleIO-sds").is_none(),
        "the package was installed"
    );
    assert!(
        !state
            .history
            .iter()
            .any(|i| i.argv.iter().any(|a| a.contains(file))),
        "the package tool was run on it: {:?}",
        state.history
    );
}

#[test]
fn a_swapped_executor_binary_never_runs_and_its_task_fails() {
    let mut rig = Rig::new("binary");
    // Agents reach the scheduler at 127.0.0.2 (its advertised address); it listens on
    // 127.0.0.1. At 127.0.0.2 sits whoever took that address, serving its own executor.
    for a in rig.args.iter_mut() {
        if a.starts_with("-rest.address=") {
            *a = "-rest.address=127.0.0.2".to_string();
        }
    }
    rig.args.push("-rest.listen=127.0.0.1".to_string());
    let marker = rig.dir.join("swapped-binary-ran");
    let swapped = format!("#!/bin/sh\necho ran > '{}'\nexit 0\n", marker.display());
    let swapped_path = rig.dir.join("swapped-storage-executor");
    std::fs::write(&swapped_path, &swapped).unwrap();
    std::fs::set_permissions(&swapped_path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let impostor = tiny_http::Server::http(("127.0.0.2", rig.port)).expect("impostor server");
    // Gzipped where the launch asks for it, as the scheduler serves it.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, swapped.as_bytes()).unwrap();
    let (plain, gzipped) = (swapped.clone().into_bytes(), gz.finish().unwrap());
    std::thread::spawn(move || {
        while let Ok(req) = impostor.recv() {
            let body = if req.url().ends_with(".gz") {
                &gzipped
            } else {
                &plain
            };
            let _ = req.respond(tiny_http::Response::from_data(body.clone()));
        }
    });
    rig.spawn();

    let e = rig.wait_error(&["TASK_FAILED"]);
    let stderr = wait_for("the launch command's refusal", SETTLE, || {
        let s = sandbox_stderr(&rig.dir.join("mesos"));
        s.contains("SHA-256 mismatch").then_some(s)
    });
    let expected = sha256_of(&executor_bin());
    let fetched = sha256_of(&swapped_path);
    assert!(
        stderr.contains(&format!(
            "storage-executor: not run: SHA-256 mismatch: fetched {fetched}, expected {expected}"
        )),
        "{stderr}"
    );
    assert!(!marker.exists(), "the swapped binary ran ({e})");
}

#[test]
fn a_package_without_its_digest_is_refused_at_start_unless_allowed_with_one_warning_each() {
    let mut rig = Rig::new("unverified");
    let urls = [
        "-storage.rhel7.sds=http://127.0.0.1:9/EMC-ScaleIO-sds-2.0-10000.2072.el7.x86_64.rpm",
        "-rexray.rhel7.rexray=http://127.0.0.1:9/rexray-0.11.4-1.x86_64.rpm",
    ];
    let refused = Command::new(scheduler_bin())
        .args(&rig.args)
        .args(urls)
        .output()
        .expect("storage-scheduler");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{stderr}");
    for (url, sha) in [
        ("-storage.rhel7.sds", "-storage.rhel7.sds.sha256"),
        ("-rexray.rhel7.rexray", "-rexray.rhel7.rexray.sha256"),
    ] {
        assert!(
            stderr.contains(&format!("{url}: no {sha}:")),
            "{url}: {stderr}"
        );
    }

    rig.args.extend(urls.map(String::from));
    rig.args.push("-storage.packages.unverified=true".into());
    rig.spawn();
    wait_for("the scheduler serving", SETTLE, || rig.node());
    let log = rig.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("installed unchecked"))
        .collect();
    assert_eq!(warnings.len(), 2, "{log}");
    assert!(warnings[0].contains("-storage.rhel7.sds: no SHA-256 given"));
    assert!(warnings[1].contains("-rexray.rhel7.rexray: no SHA-256 given"));
}

#[test]
fn without_package_urls_nothing_is_asked_and_nothing_warned() {
    let mut rig = Rig::new("no-packages");
    rig.spawn();
    wait_for("the scheduler serving", SETTLE, || rig.node());
    let log = rig.log();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && (l.contains("SHA-256") || l.contains("unverified")))
        .collect();
    assert!(warned.is_empty(), "{warned:?}");
}
