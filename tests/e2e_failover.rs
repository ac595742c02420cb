//! End to end, faults the framework lives through: the real scheduler and executors on the
//! dev cluster (host stand-ins, its own gateway).
//!
//! Executors outlive a scheduler that is away and follow it to a new address.
//! The first scheduler runs without package URLs, so every node waits at `packages` for a
//! new plan. It is killed; once every executor logs that the scheduler is unreachable, a
//! second scheduler starts from the same state on another REST port, this time with package
//! URLs (an operator redeploying with the fix). Its SUBSCRIBED sends each executor a
//! framework MESSAGE with the new address; the executors follow it and walk to `running`,
//! and no task ended and no second executor started meanwhile (the master's launch record).
//!
//! A lost announcement (every MESSAGE of that subscription refused) is repeated to the
//! executors that stay quiet, without a new subscription. A scheduler back on the same port
//! has a new certificate: executors that meet it before they are told wait for its
//! announcement rather than fail.
//!
//! Nodes follow hosts: a host that reboots and whose agent comes back under a new id
//! (control API `new-id`) keeps its node (persona, layout, devices, attachments) under the
//! new id, and gets exactly one new executor.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, host_standins, scheduler_args, scheduler_bin, stage_packages, wait_for};
use devcluster::control;
use devcluster::master::{self, max_concurrent_executors, LaunchEvent, LaunchRecord, MasterHandle};
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

/// Records of `kind` after record number `after` (the master's launch record).
fn events_after(m: &MasterHandle, after: u64, kind: LaunchEvent) -> Vec<LaunchRecord> {
    let record = m.launch_log().unwrap_or_default();
    record
        .into_iter()
        .filter(|r| r.seq > after && r.event == kind)
        .collect()
}

/// The number of the latest launch record.
fn last_seq(m: &MasterHandle) -> u64 {
    let record = m.launch_log().unwrap_or_default();
    record.last().map_or(0, |r| r.seq)
}

struct Rig {
    m: Arc<MasterHandle>,
    control: control::ControlHandle,
    dir: PathBuf,
    gateway_flag: String,
}

impl Rig {
    fn start(name: &str) -> Rig {
        let dir = std::env::temp_dir().join(format!("e2e-failover-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let listener = control::bind(0).unwrap();
        let m = Arc::new(
            master::start(master::MasterConfig {
                agents: AGENTS,
                heartbeat_interval: Duration::from_secs(1),
                work_dir: dir.join("mesos"),
                status_update_retry: Duration::from_secs(1),
                // A reboot's outage is one ping past this: short, but the old agent is
                // unreachable before its host's new agent registers, as after a real reboot.
                agent_removal_timeout: Duration::from_secs(2),
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
        let control = listener
            .serve(control::Targets {
                master: m.clone(),
                gateway: Some(gateway),
            })
            .unwrap();
        Rig {
            m,
            control,
            dir,
            gateway_flag,
        }
    }

    /// The scheduler's flags with REST port `port`, the state in the rig's file store.
    fn args(&self, port: u16) -> Vec<String> {
        let store = self.dir.join("state.json");
        scheduler_args(&self.m.addr().to_string(), port, &store, PASSWORD)
            .into_iter()
            .map(|a| {
                if a.starts_with("-storage.preconfig.gateway=") {
                    self.gateway_flag.clone()
                } else {
                    a
                }
            })
            .collect()
    }

    fn work(&self) -> PathBuf {
        self.dir.join("mesos")
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }

    /// Every executor's log, then a panic with `what`.
    fn fail(&self, what: &str) -> ! {
        for (p, t) in executor_logs(&self.work()) {
            eprintln!("== {}\n{t}", p.display());
        }
        panic!("{what}");
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `wait_for`, and on time out every executor's log before the panic.
fn settle<T>(rig: &Rig, what: &str, f: impl FnMut() -> Option<T>) -> T {
    settle_within(rig, what, SETTLE, f)
}

/// Every executor has logged that the scheduler is unreachable. (A sandbox of an executor
/// that died at its start has no say: only the count of those that logged it matters.)
fn settle_every_executor_away(rig: &Rig) {
    settle(
        rig,
        "every executor to find the scheduler unreachable",
        || {
            let logs = executor_logs(&rig.work());
            let away = logs.iter().filter(|(_, t)| t.contains("unreachable"));
            (away.count() == AGENTS).then_some(())
        },
    );
}

/// [`settle`] with another time limit.
fn settle_within<T>(rig: &Rig, what: &str, limit: Duration, f: impl FnMut() -> Option<T>) -> T {
    let f = std::panic::AssertUnwindSafe(f);
    match std::panic::catch_unwind(move || {
        let mut f = f;
        wait_for(what, limit, &mut *f)
    }) {
        Ok(v) => v,
        Err(_) => rig.fail(&format!("timed out waiting for {what}")),
    }
}

#[test]
fn executors_outlive_an_absent_scheduler_and_follow_it_to_a_new_port() {
    let rig = Rig::start("away");
    let first_port = free_port();
    let first = spawn(&rig.args(first_port), &rig.dir.join("first.log"));
    settle(&rig, "every node waiting for package URLs", || {
        let n = nodes(first_port);
        let waiting = n.iter().filter(|v| {
            v["phase"] == "packages"
                && v["last_error"]
                    .as_str()
                    .is_some_and(|e| e.contains("package URL"))
        });
        (waiting.count() == AGENTS).then_some(())
    });
    // What happens to executors from here on is the scheduler's absence's doing.
    let mark = last_seq(&rig.m);
    drop(first); // SIGKILL
    settle_every_executor_away(&rig);

    let second_port = free_port();
    assert_ne!(first_port, second_port);
    let (package_flags, _packages) = stage_packages(&rig.dir.join("packages"));
    let mut second_args = rig.args(second_port);
    second_args.extend(package_flags);
    let second = spawn(&second_args, &rig.dir.join("second.log"));
    settle(&rig, "every node running via the new address", || {
        let n = nodes(second_port);
        let running = n.iter().filter(|v| v["phase"] == "running");
        (running.count() == AGENTS).then_some(())
    });
    // Told the new address and the new certificate, which they accept from then on.
    let new_url = format!("https://127.0.0.1:{second_port}");
    let pin = cluster::logged_fingerprint(&rig.dir.join("second.log")).expect("a certificate");
    let first_pin = cluster::logged_fingerprint(&rig.dir.join("first.log")).expect("a certificate");
    assert_ne!(pin, first_pin, "a new scheduler makes a new certificate");
    let logs = executor_logs(&rig.work());
    let told = logs
        .iter()
        .filter(|(_, t)| t.contains(&format!("the scheduler is at {new_url}, certificate {pin}")));
    assert_eq!(told.count(), AGENTS, "{logs:#?}");
    // No task ended, no executor ended, none started since the scheduler went away.
    assert_no_task_or_executor_ended_since(&rig, mark);
    drop(second);
}

/// A scheduler back on the same address presents a new certificate. Its first announcement
/// is lost (every MESSAGE of its subscription refused), so the executors' retries reach it
/// before they are told: their pin worked before, so they wait for a new one instead of
/// failing their node, and follow the new certificate once told again.
#[test]
fn a_scheduler_back_on_the_same_port_is_followed_to_its_new_certificate() {
    let rig = Rig::start("same-port");
    let port = free_port();
    let first = spawn(&rig.args(port), &rig.dir.join("first.log"));
    settle(&rig, "every node waiting for package URLs", || {
        let n = nodes(port);
        let waiting = n.iter().filter(|v| v["phase"] == "packages");
        (waiting.count() == AGENTS).then_some(())
    });
    let mark = last_seq(&rig.m);
    drop(first); // SIGKILL
    settle_every_executor_away(&rig);
    for _ in 0..AGENTS {
        rig.m.drop_next_call("MESSAGE").expect("fault");
    }
    let (package_flags, _packages) = stage_packages(&rig.dir.join("packages"));
    let mut second_args = rig.args(port);
    second_args.extend(package_flags);
    let second = spawn(&second_args, &rig.dir.join("second.log"));
    settle(&rig, "every executor to meet the new certificate", || {
        let logs = executor_logs(&rig.work());
        let met = logs
            .iter()
            .filter(|(_, t)| t.contains("presented another certificate"));
        (met.count() == AGENTS).then_some(())
    });
    // Quiet for 75 s, then told again.
    let limit = SETTLE + Duration::from_secs(75);
    settle_within(
        &rig,
        "every node running with the new certificate",
        limit,
        || {
            let n = nodes(port);
            let running = n.iter().filter(|v| v["phase"] == "running");
            (running.count() == AGENTS).then_some(())
        },
    );
    let pin = cluster::logged_fingerprint(&rig.dir.join("second.log")).expect("a certificate");
    let logs = executor_logs(&rig.work());
    let told = logs
        .iter()
        .filter(|(_, t)| t.contains(&format!("certificate {pin}")));
    assert_eq!(told.count(), AGENTS, "{logs:#?}");
    // No task ended, no executor ended, none started since the scheduler went away.
    assert_no_task_or_executor_ended_since(&rig, mark);
    drop(second);
}

/// The announcement is lost (the master refuses every MESSAGE of the new subscription): the
/// executors keep polling the dead address until the scheduler, finding them quiet for too
/// long, tells them again, without a new subscription.
#[test]
fn executors_that_missed_the_announcement_are_told_again() {
    let rig = Rig::start("missed");
    let first_port = free_port();
    let first = spawn(&rig.args(first_port), &rig.dir.join("first.log"));
    settle(&rig, "every node waiting for package URLs", || {
        let n = nodes(first_port);
        let waiting = n.iter().filter(|v| v["phase"] == "packages");
        (waiting.count() == AGENTS).then_some(())
    });
    drop(first); // SIGKILL
    settle_every_executor_away(&rig);
    for _ in 0..AGENTS {
        rig.m.drop_next_call("MESSAGE").expect("fault");
    }
    let second_port = free_port();
    let (package_flags, _packages) = stage_packages(&rig.dir.join("packages"));
    let mut second_args = rig.args(second_port);
    second_args.extend(package_flags);
    let second = spawn(&second_args, &rig.dir.join("second.log"));
    // Quiet for 75 s, then told again.
    let limit = SETTLE + Duration::from_secs(75);
    settle_within(
        &rig,
        "every node running via the new address",
        limit,
        || {
            let n = nodes(second_port);
            let running = n.iter().filter(|v| v["phase"] == "running");
            (running.count() == AGENTS).then_some(())
        },
    );
    let second_log = rig.log("second.log");
    assert!(
        second_log.contains("quiet executor(s) again"),
        "{second_log}"
    );
    assert_eq!(
        second_log.matches("subscribed as framework").count(),
        1,
        "one subscription: {second_log}"
    );
    drop(second);
}

/// The node of `hostname` in `nodes`.
fn node_of(nodes: &[Value], hostname: &str) -> Option<Value> {
    nodes.iter().find(|v| v["hostname"] == hostname).cloned()
}

#[test]
fn a_host_back_under_a_new_agent_id_keeps_its_node_and_gets_one_executor() {
    let rig = Rig::start("new-id");
    let port = free_port();
    let (package_flags, _packages) = stage_packages(&rig.dir.join("packages"));
    let mut args = rig.args(port);
    args.extend(package_flags);
    let _sched = spawn(&args, &rig.dir.join("scheduler.log"));
    let before = settle(&rig, "every node running with its devices attached", || {
        let n = nodes(port);
        let done = n.iter().filter(|v| {
            v["phase"] == "running" && v["attached"].as_array().is_some_and(|a| !a.is_empty())
        });
        (done.count() == AGENTS).then(|| node_of(&n, "agent-2"))?
    });
    let old_id = before["agent_id"].as_str().unwrap().to_string();
    let mark = last_seq(&rig.m);

    let url = format!("{}/control/agents/2/new-id", rig.control.url());
    let text = ureq::post(&url)
        .send_empty()
        .expect("new-id")
        .into_body()
        .read_to_string()
        .unwrap();
    let reply: Value = serde_json::from_str(&text).expect("a JSON reply");
    let new_id = reply["id"].as_str().expect("the new id").to_string();
    assert_ne!(new_id, old_id);

    let after = settle(
        &rig,
        "agent-2's node running under its new agent id",
        || {
            let n = nodes(port);
            node_of(&n, "agent-2")
                .filter(|v| v["agent_id"] == new_id.as_str() && v["phase"] == "running")
        },
    );
    let n = nodes(port);
    assert_eq!(n.len(), AGENTS, "one node per host: {n:#?}");
    assert!(!n.iter().any(|v| v["agent_id"] == old_id.as_str()));
    for field in ["persona", "layout", "devices"] {
        assert_eq!(after[field], before[field], "{field}");
    }
    let attached = |v: &Value| -> Vec<String> {
        let list = v["attached"].as_array().cloned().unwrap_or_default();
        list.iter()
            .filter_map(|d| d.as_str().map(str::to_string))
            .collect()
    };
    for d in attached(&before) {
        assert!(
            attached(&after).contains(&d),
            "{d} no longer attached: {after:#}"
        );
    }
    // Since the fault: exactly one new executor, on agent-2; never two at once anywhere.
    let started = events_after(&rig.m, mark, LaunchEvent::ExecutorStarted);
    let hosts: Vec<&str> = started.iter().map(|r| r.agent.as_str()).collect();
    assert_eq!(hosts, ["agent-2"], "{started:#?}");
    let record = rig.m.launch_log().unwrap();
    let most = max_concurrent_executors(&record, "storage-executor.");
    assert!(most.values().all(|n| *n == 1), "{most:?}");
}

/// Since `mark`, no executor started or ended, and the second scheduler saw no task end.
fn assert_no_task_or_executor_ended_since(rig: &Rig, mark: u64) {
    for kind in [
        LaunchEvent::ExecutorStarted,
        LaunchEvent::ExecutorTerminated,
    ] {
        let seen = events_after(&rig.m, mark, kind);
        assert!(seen.is_empty(), "{seen:#?}");
    }
    let second_log = rig.log("second.log");
    assert!(!second_log.contains("ended TASK_"), "{second_log}");
}
