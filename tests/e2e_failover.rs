//! End to end, executors outlive a scheduler that is away and follow it to a new address:
//! the real scheduler and executors on the dev cluster (host stand-ins, its own gateway).
//!
//! The first scheduler runs without package URLs, so every node waits at `packages` for a
//! new plan. It is killed; once every executor logs that the scheduler is unreachable, a
//! second scheduler starts from the same state on another REST port, this time with package
//! URLs (an operator redeploying with the fix). Its SUBSCRIBED sends each executor a
//! framework MESSAGE with the new address; the executors follow it and walk to `running`,
//! and no task ended and no second executor started meanwhile (the master's launch record).

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, host_standins, scheduler_args, scheduler_bin, stage_packages, wait_for};
use devcluster::control;
use devcluster::master::{self, LaunchEvent, MasterHandle};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

const AGENTS: usize = 3;
const SETTLE: Duration = Duration::from_secs(120);
const PASSWORD: &str = "Scaleio123";

struct Sched(Child);

impl Drop for Sched {
    fn drop(&mut self) {
        let _ = self.0.kill(); // SIGKILL
        let _ = self.0.wait();
    }
}

fn spawn(args: &[String], log: &Path) -> Sched {
    let file = std::fs::File::create(log).expect("log");
    Sched(
        Command::new(scheduler_bin())
            .args(args)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("start storage-scheduler"),
    )
}

/// The nodes of `/api/state` of the scheduler on `port` (none while it does not answer).
fn nodes(port: u16) -> Vec<Value> {
    let text = ureq::get(&format!("http://127.0.0.1:{port}/api/state"))
        .call()
        .ok()
        .and_then(|r| r.into_body().read_to_string().ok())
        .unwrap_or_default();
    let state: Value = serde_json::from_str(&text).unwrap_or_default();
    state["model"]["nodes"]
        .as_object()
        .map(|m| m.values().cloned().collect())
        .unwrap_or_default()
}

/// Each executor's `stderr`, by sandbox path.
fn executor_logs(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else if p.file_name().is_some_and(|f| f == "stderr")
                && p.to_string_lossy().contains("storage-executor")
            {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                out.push((p, text));
            }
        }
    }
    out
}

fn events(m: &MasterHandle, kind: LaunchEvent) -> usize {
    let record = m.launch_log().unwrap_or_default();
    record.iter().filter(|r| r.event == kind).count()
}

#[test]
fn executors_outlive_an_absent_scheduler_and_follow_it_to_a_new_port() {
    let dir = std::env::temp_dir().join(format!("e2e-failover-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let listener = control::bind(0).unwrap();
    let work = dir.join("mesos");
    let m = Arc::new(
        master::start(master::MasterConfig {
            agents: AGENTS,
            heartbeat_interval: Duration::from_secs(1),
            work_dir: work.clone(),
            status_update_retry: Duration::from_secs(1),
            host_standins: Some(host_standins(Some(listener.url()))),
            ..Default::default()
        })
        .expect("dev cluster"),
    );
    // SDC stand-ins register with this gateway through the control API (storage-attach).
    let gateway = Arc::new(
        devcluster::gateway::start(devcluster::gateway::GatewayConfig::new(
            PASSWORD,
            cluster::dev_mdms(),
        ))
        .expect("dev gateway"),
    );
    let gateway_flag = format!("-storage.preconfig.gateway={}", gateway.addr());
    let _control = listener
        .serve(control::Targets {
            master: m.clone(),
            gateway: Some(gateway),
        })
        .unwrap();
    let args = |port: u16| -> Vec<String> {
        scheduler_args(
            &m.addr().to_string(),
            port,
            &dir.join("state.json"),
            PASSWORD,
        )
        .into_iter()
        .map(|a| {
            if a.starts_with("-storage.preconfig.gateway=") {
                gateway_flag.clone()
            } else {
                a
            }
        })
        .collect()
    };

    let first_port = free_port();
    let first = spawn(&args(first_port), &dir.join("first.log"));
    wait_for("every node waiting for package URLs", SETTLE, || {
        let n = nodes(first_port);
        let waiting = n.iter().filter(|v| {
            v["phase"] == "packages"
                && v["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains("package URL"))
        });
        (waiting.count() == AGENTS).then_some(())
    });
    drop(first); // SIGKILL
    wait_for(
        "every executor to find the scheduler unreachable",
        SETTLE,
        || {
            let logs = executor_logs(&work);
            let away = logs.iter().filter(|(_, t)| t.contains("unreachable"));
            (logs.len() == AGENTS && away.count() == AGENTS).then_some(())
        },
    );

    let second_port = free_port();
    assert_ne!(first_port, second_port);
    let (package_flags, _packages) = stage_packages(&dir.join("packages"));
    let mut second_args = args(second_port);
    second_args.extend(package_flags);
    let second = spawn(&second_args, &dir.join("second.log"));
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for("every node running via the new address", SETTLE, || {
            let n = nodes(second_port);
            let running = n.iter().filter(|v| v["phase"] == "running");
            (running.count() == AGENTS).then_some(())
        })
    }))
    .is_err();
    let logs = executor_logs(&work);
    let second_log = std::fs::read_to_string(dir.join("second.log")).unwrap_or_default();
    if failed {
        for (p, t) in &logs {
            eprintln!("== {}\n{t}", p.display());
        }
        panic!("nodes did not reach running via port {second_port}:\n{second_log}");
    }
    let new_url = format!("http://127.0.0.1:{second_port}");
    for (p, t) in &logs {
        assert!(
            t.contains(&format!("the scheduler is at {new_url}")),
            "{}:\n{t}",
            p.display()
        );
    }
    // No task ended, no executor ended, none started twice.
    assert_eq!(events(&m, LaunchEvent::ExecutorStarted), AGENTS);
    assert_eq!(events(&m, LaunchEvent::ExecutorTerminated), 0);
    assert!(!second_log.contains("ended TASK_"), "{second_log}");
    let snapshot = m.snapshot().unwrap().to_string();
    for bad in ["TASK_FAILED", "TASK_KILLED", "TASK_LOST", "TASK_FINISHED"] {
        assert!(!snapshot.contains(bad), "{bad} in the master's state");
    }
    drop(second);
    drop(_control);
    let _ = std::fs::remove_dir_all(&dir);
}
