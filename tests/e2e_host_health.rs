//! End to end, the host's view of health: the real scheduler and executor on a dev cluster
//! agent whose host is a stand-in. Once the node runs, its executor keeps checking its host on
//! its plan cycle (shortened here) and reports what changes: a stopped service shows in
//! `/api/state` under the node's `host`, its start clears it, and neither relaunches the
//! executor.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, host_standins, scheduler_args, scheduler_bin, stage_packages, wait_for};
use devcluster::control;
use devcluster::master::{self, LaunchEvent, MasterHandle};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

const SETTLE: Duration = Duration::from_secs(120);
/// A few plan cycles of the shortened wait, and the scheduler's batch.
const NOTICE: Duration = Duration::from_secs(30);
const PASSWORD: &str = "Scaleio123";

struct Rig {
    m: Arc<MasterHandle>,
    _control: control::ControlHandle,
    control_url: String,
    _packages: Arc<tiny_http::Server>,
    _sched: cluster::KillOnDrop,
    port: u16,
    dir: PathBuf,
}

impl Rig {
    /// One RHEL 7 agent whose executors poll the plan every `plan_wait_secs`.
    fn start(name: &str, plan_wait_secs: u64) -> Rig {
        let dir = std::env::temp_dir().join(format!("e2e-host-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let listener = control::bind(0).unwrap();
        let mut standins = host_standins(Some(listener.url()));
        standins.extra_env.push((
            "STORAGE_EXECUTOR_PLAN_WAIT".into(),
            plan_wait_secs.to_string(),
        ));
        let m = Arc::new(
            master::start(master::MasterConfig {
                agents: 1,
                heartbeat_interval: Duration::from_secs(1),
                work_dir: dir.join("mesos"),
                status_update_retry: Duration::from_secs(1),
                host_standins: Some(standins),
                ..Default::default()
            })
            .expect("dev cluster"),
        );
        // The rig's own gateway: the SDC stand-in registers with it through the control API.
        let gateway = Arc::new(
            devcluster::gateway::start(devcluster::gateway::GatewayConfig::new(
                PASSWORD,
                cluster::dev_mdms(),
            ))
            .expect("dev gateway"),
        );
        let gateway_addr = gateway.addr();
        let control = listener
            .serve(control::Targets {
                master: m.clone(),
                gateway: Some(gateway),
            })
            .unwrap();
        let port = free_port();
        let mut args = scheduler_args(
            &m.addr().to_string(),
            port,
            &dir.join("state.json"),
            PASSWORD,
        );
        for a in args.iter_mut() {
            if a.starts_with("-storage.preconfig.gateway=") {
                *a = format!("-storage.preconfig.gateway={gateway_addr}");
            }
        }
        let (flags, packages) = stage_packages(&dir.join("packages"));
        args.extend(flags);
        let log = std::fs::File::create(dir.join("scheduler.log")).unwrap();
        let sched = Command::new(scheduler_bin())
            .args(&args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start storage-scheduler");
        Rig {
            m,
            control_url: control.url(),
            _control: control,
            _packages: packages,
            _sched: cluster::KillOnDrop(sched),
            port,
            dir,
        }
    }

    /// The node of `agent-1` in `/api/state`.
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
            .find(|v| v["hostname"] == "agent-1")
            .cloned()
    }

    /// The subjects of the node's host problems, once the executor has reported.
    fn host_problems(&self) -> Option<Vec<String>> {
        let node = self.node()?;
        let host = node.get("host")?;
        let problems = host["problems"].as_array().cloned().unwrap_or_default();
        Some(
            problems
                .iter()
                .map(|p| format!("{} {}", p["check"].as_str().unwrap_or(""), p["subject"]))
                .collect(),
        )
    }

    fn service(&self, name: &str, running: bool) {
        let url = format!(
            "{}/control/agents/1/service?name={name}&running={running}",
            self.control_url
        );
        let r = ureq::post(&url).send_empty().expect("control API");
        assert_eq!(r.status(), 200);
    }

    /// Executor starts on the agent, from the master's own record.
    fn executor_starts(&self) -> usize {
        self.m
            .launch_log()
            .unwrap()
            .iter()
            .filter(|r| r.event == LaunchEvent::ExecutorStarted)
            .count()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("scheduler.log")).unwrap_or_default()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("scheduler log:\n{}", self.log());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

#[test]
fn a_stopped_service_shows_on_its_node_and_clears_when_it_runs_again() {
    let rig = Rig::start("sds", 1);
    let running = wait_for("agent-1 running", SETTLE, || {
        rig.node().filter(|n| n["phase"] == "running")
    });
    let task = running["task"]["task_id"].clone();
    assert!(task.is_string(), "{running}");
    // The first report, on reaching running: nothing wrong.
    let first = wait_for("the first host report", NOTICE, || rig.host_problems());
    assert_eq!(first, Vec::<String>::new());
    let starts = rig.executor_starts();

    rig.service("sds", false);
    let seen = wait_for("service sds named on agent-1", NOTICE, || {
        rig.host_problems()
            .filter(|p| p.iter().any(|p| p == "service \"sds\""))
    });
    assert_eq!(seen, ["service \"sds\""]);
    let node = rig.node().unwrap();
    assert_eq!(
        node["host"]["problems"][0]["detail"], "not running",
        "{node}"
    );

    rig.service("sds", true);
    wait_for("agent-1's host problems cleared", NOTICE, || {
        rig.host_problems().filter(|p| p.is_empty())
    });
    let node = rig.node().unwrap();
    assert_eq!(node["phase"], "running");
    assert_eq!(node["task"]["task_id"], task, "the executor was relaunched");
    assert_eq!(rig.executor_starts(), starts, "an executor started again");
    let log = rig.log();
    assert!(
        log.contains("agent-1: host: service sds: not running"),
        "{log}"
    );
    assert!(
        log.contains("agent-1: host: every problem cleared"),
        "{log}"
    );
}
