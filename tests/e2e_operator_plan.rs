//! End to end, the operator's plan control on the dev cluster (three data nodes of one
//! protection domain, a pre-configured storage cluster): a pause mid-upgrade lets the step in
//! flight finish and starts no other, through a scheduler restart, and the resume finishes the
//! upgrade with no data made unavailable; a node whose launches keep failing is left `failed`
//! after `-node.max-failures` (5) of them, no longer relaunched, and `retry` brings it back.
//! The judges are the dev gateway's data-unavailable count, the host stand-ins' package
//! databases and the master's launch record.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/devrig.rs"]
mod devrig;

use cluster::{free_port, stage_packages, wait_for, KillOnDrop};
use devcluster::control::{self, ControlHandle};
use devcluster::host::{self, FakeRoot, HostState, Package};
use devcluster::master::{MasterConfig, MasterHandle};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

const AGENTS: usize = 3;
const PASSWORD: &str = "E2e-Operator-Plan-Pa55";
const OLD: &str = "2.0-10000.2072";
const NEW: &str = "2.0-12000.122";
const PLAN_WAIT_SECS: u64 = 2;
const PAUSED: &str = "waiting: the plan is paused by an operator";

struct Rig {
    /// First: the scheduler ends before the cluster it runs on.
    scheduler: Option<KillOnDrop>,
    control: ControlHandle,
    master: Arc<MasterHandle>,
    gateway: String,
    _packages: Arc<tiny_http::Server>,
    package_flags: Vec<String>,
    port: u16,
    dir: PathBuf,
}

impl Rig {
    fn start(name: &str) -> Rig {
        let dir = devrig::fresh_dir(&format!("e2e-operator-{name}-{}", std::process::id()));
        let listener = control::bind(0).expect("control API");
        let standins = devrig::standins_with_plan_wait(listener.url(), PLAN_WAIT_SECS);
        let master = devrig::start_master(MasterConfig {
            attributes: cluster::domain_layouts(AGENTS, &[("pd1", "sp1")]),
            ..devrig::master_config(AGENTS, &dir, standins)
        });
        let gw = devrig::start_gateway(PASSWORD, true);
        let gateway = gw.addr().to_string();
        let control = devrig::serve_control(listener, &master, gw);
        let (package_flags, packages) = stage_packages(&dir.join("packages"));
        Rig {
            scheduler: None,
            control,
            master,
            gateway,
            _packages: packages,
            package_flags,
            port: free_port(),
            dir,
        }
    }

    /// The scheduler on the same port and store every time, with the staged packages.
    fn start_scheduler(&mut self) {
        let mut args =
            devrig::preconfig_args(&self.master, self.port, &self.dir, PASSWORD, &self.gateway);
        args.push("-health.interval=1".into());
        args.push(devrig::operator_token_flag(
            &self.dir,
            devrig::OPERATOR_TOKEN,
        ));
        args.extend(self.package_flags.iter().cloned());
        let log = devrig::append_log(&self.dir);
        self.scheduler = Some(devrig::spawn_scheduler(args, log));
    }

    /// The storage packages at `NEW` beside the staged ones, and the flags that hand them out.
    fn stage_new_version(&mut self) {
        let dir = self.dir.join("packages");
        self.package_flags = devrig::storage_packages_at(&self.package_flags, &dir, OLD, NEW);
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn plan(&self) -> Option<Value> {
        devrig::json(&self.base(), "/api/plan").ok()
    }

    /// `/api/state`'s node on `host`.
    fn node(&self, host: &str) -> Option<Value> {
        let s = devrig::api_state(&self.base())?;
        let nodes = s.pointer("/model/nodes")?.as_object()?;
        nodes.values().find(|n| n["hostname"] == host).cloned()
    }

    fn operator(&self, path: &str) -> (u16, Value) {
        devrig::operator(&self.base(), &self.dir, devrig::OPERATOR_TOKEN, path)
    }

    fn control(&self, method: &str, path: &str) -> Value {
        devrig::control_json(&self.control, method, path)
    }

    fn root(&self, n: usize) -> FakeRoot {
        let agent = self.dir.join("mesos").join(format!("agent-{n}"));
        FakeRoot::open(&host::agent_root(&agent)).expect("host root")
    }

    fn host(&self, n: usize) -> HostState {
        self.root(n).state().expect("host state")
    }

    /// Every node running at the target generation, which is at least `generation`.
    fn wait_at(&self, generation: u64, within: Duration) {
        wait_for(
            &format!("every node running at generation {generation}"),
            within,
            || {
                let s = devrig::api_state(&self.base())?;
                let target = s.pointer("/model/target/generation")?.as_u64()?;
                let nodes = s.pointer("/model/nodes")?.as_object()?;
                let there = nodes.len() == AGENTS
                    && target >= generation
                    && nodes
                        .values()
                        .all(|n| n["phase"] == "running" && n["generation"] == target);
                there.then_some(())
            },
        )
    }

    /// Task launches the master recorded on the agent of `host`.
    fn launches_on(&self, host: &str) -> usize {
        let log = self.control("GET", "/control/master/launches");
        let log = log.as_array().expect("launch record");
        log.iter()
            .filter(|r| r["event"] == "task_launched" && r["agent"] == host)
            .count()
    }

    /// Executors waiting now on the scheduler for a change of their plan (`/metrics`).
    fn plan_waits(&self) -> Option<u64> {
        let text = devrig::get(&self.base(), "/metrics").ok()?;
        let line = text
            .lines()
            .find(|l| l.starts_with("storage_scheduler_executor_plan_waits "))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        devrig::keep_dir_if_failed(&self.dir);
    }
}

/// The storage components the host has at `NEW`.
fn at_new(state: &HostState) -> Vec<&'static str> {
    [("EMC-ScaleIO-sds", "sds"), ("EMC-ScaleIO-sdc", "sdc")]
        .into_iter()
        .filter(|(name, _)| {
            state.packages.get(*name).is_some_and(|p| {
                p.release
                    .as_deref()
                    .is_some_and(|r| r.starts_with("12000.122"))
            })
        })
        .map(|(_, c)| c)
        .collect()
}

fn count(plan: &Value, state: &str) -> u64 {
    plan["counts"][state].as_u64().unwrap_or(0)
}

/// Every step `plan` shows waiting, with its reason.
fn waiting(plan: &Value) -> Vec<String> {
    let nodes = plan["nodes"].as_array().into_iter().flatten();
    let steps = nodes.flat_map(|n| n["steps"].as_array().into_iter().flatten());
    steps
        .filter(|s| s["state"] == "waiting")
        .map(|s| s["reason"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn a_pause_mid_upgrade_finishes_the_step_in_flight_survives_a_restart_and_resume_finishes() {
    let mut rig = Rig::start("pause");
    rig.start_scheduler();
    rig.wait_at(1, Duration::from_secs(300));
    // Each SDS back from its upgrade rebuilds a while: the upgrade is slow enough to catch.
    rig.control("POST", "/control/gateway/rebuild-time?seconds=4");
    rig.control("POST", "/control/gateway/events/reset");
    rig.scheduler = None;
    rig.stage_new_version();
    rig.start_scheduler();
    wait_for("the upgrade under way", Duration::from_secs(120), || {
        let plan = rig.plan()?;
        let started = count(&plan, "in-progress") + count(&plan, "done") > 0;
        (plan["kind"] == "upgrade" && started).then_some(())
    });
    let (status, answer) = rig.operator("/api/plan/pause");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "accepted", "{answer}");
    let message = answer["message"].as_str().unwrap_or("");
    assert!(message.starts_with("paused: "), "{answer}");

    // The step in flight finishes; then nothing is under way and every waiting step says why.
    let settled = wait_for("the paused plan settled", Duration::from_secs(120), || {
        let plan = rig.plan()?;
        let waits = waiting(&plan);
        let settled = plan["paused"] == true
            && count(&plan, "in-progress") == 0
            && !waits.is_empty()
            && waits.iter().all(|w| w == PAUSED);
        settled.then_some(plan)
    });
    assert!(
        count(&settled, "pending") + count(&settled, "waiting") > 0,
        "{settled}"
    );
    // What the pause named under way ("host (step)", ...) finished.
    let named = message.split("let finish: ").nth(1).unwrap_or("");
    for item in named.split(", ").filter(|i| !i.is_empty()) {
        let (host, step) = item
            .trim_end_matches(')')
            .split_once(" (")
            .expect("host (step)");
        let node = settled["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|n| n["hostname"] == host);
        let steps = node.map(|n| n["steps"].clone()).unwrap_or_default();
        let done = steps
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["step"] == step && s["state"] == "done");
        assert!(done, "{host}'s {step} did not finish: {settled}");
    }
    let upgraded: Vec<Vec<&str>> = (1..=AGENTS).map(|n| at_new(&rig.host(n))).collect();
    let page = devrig::get(&rig.base(), "/").expect("status page");
    assert!(page.contains(">paused</span>"), "the page says paused");

    // A scheduler restart keeps the pause: every executor is served a plan by the new one and
    // waits on it, none with a grant.
    rig.scheduler = None;
    rig.start_scheduler();
    wait_for(
        "every executor waiting on the restarted scheduler's plan",
        Duration::from_secs(120),
        || (rig.plan_waits()? == AGENTS as u64).then_some(()),
    );
    let plan = rig.plan().expect("plan");
    assert_eq!(plan["paused"], true, "{plan}");
    assert_eq!(count(&plan, "in-progress"), 0, "{plan}");
    assert_eq!(count(&plan, "done"), count(&settled, "done"), "{plan}");
    let now: Vec<Vec<&str>> = (1..=AGENTS).map(|n| at_new(&rig.host(n))).collect();
    assert_eq!(now, upgraded, "nothing was upgraded while paused");

    let (status, answer) = rig.operator("/api/plan/resume");
    assert_eq!(
        (status, &answer["outcome"]),
        (200, &Value::from("accepted")),
        "{answer}"
    );
    rig.wait_at(2, Duration::from_secs(300));
    for n in 1..=AGENTS {
        assert_eq!(at_new(&rig.host(n)), ["sds", "sdc"], "agent-{n}");
    }
    let events = rig.control("GET", "/control/gateway/events");
    assert_eq!(events["data_unavailable"], 0, "{events}");
    let logged = devrig::json(&rig.base(), "/api/events").expect("/api/events");
    let first = &logged["events"][0];
    assert_eq!(
        (&first["action"], &first["outcome"]),
        (&Value::from("resume"), &Value::from("accepted")),
        "{logged}"
    );
    assert_eq!(rig.plan().expect("plan")["paused"], false);
}

#[test]
fn a_node_failing_five_launches_in_a_row_stays_failed_until_retried() {
    let mut rig = Rig::start("budget");
    // agent-3 has a newer SDS than the one handed out: rpm refuses it, every launch fails.
    rig.root(3)
        .update(|s| {
            s.packages.insert(
                "EMC-ScaleIO-sds".into(),
                Package {
                    version: "2.0".into(),
                    release: Some("14000.231.el7".into()),
                    arch: "x86_64".into(),
                    status: "install ok installed".into(),
                },
            );
        })
        .expect("host root");
    rig.start_scheduler();
    let stopped = wait_for(
        "agent-3 out of relaunches",
        Duration::from_secs(300),
        || {
            let n = rig.node("agent-3")?;
            (n["relaunch_stopped"] == true).then_some(n)
        },
    );
    assert_eq!(stopped["phase"], "failed", "{stopped}");
    assert_eq!(stopped["failures"], 5, "{stopped}");
    assert!(stopped.get("retry_after_ms").is_none(), "{stopped}");
    let last = stopped["last_error"].as_str().unwrap_or("");
    assert!(last.contains("rpm") && last.contains("newer"), "{stopped}");
    assert_eq!(rig.launches_on("agent-3"), 5);
    // Nothing more wanted: the others run and the scheduler asks for no offers.
    wait_for("offers suppressed", Duration::from_secs(120), || {
        let s = devrig::api_state(&rig.base())?;
        let running = s
            .pointer("/model/nodes")?
            .as_object()?
            .values()
            .filter(|n| n["phase"] == "running")
            .count();
        (running == AGENTS - 1 && s["suppressed"] == true).then_some(())
    });
    assert_eq!(rig.launches_on("agent-3"), 5, "not relaunched");
    let logged = devrig::json(&rig.base(), "/api/events").expect("/api/events");
    let entry = logged["events"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["action"] == "relaunch" && e["target"] == "agent-3")
        .unwrap_or_else(|| panic!("no relaunch entry: {logged}"));
    assert_eq!(entry["outcome"], "stopped", "{entry}");

    let (status, answer) = rig.operator("/api/nodes/agent-1/retry");
    assert_eq!(status, 409, "a running node: {answer}");
    let (status, answer) = rig.operator("/api/nodes/no-such-host/retry");
    assert_eq!(status, 404, "{answer}");
    // The operator fixes the host, then retries.
    rig.root(3)
        .update(|s| {
            s.packages.remove("EMC-ScaleIO-sds");
        })
        .expect("host root");
    let (status, answer) = rig.operator("/api/nodes/agent-3/retry");
    assert_eq!(status, 200, "{answer}");
    let message = answer["message"].as_str().unwrap_or("");
    assert!(
        message.contains("was not relaunched after 5 failed launch(es)"),
        "{answer}"
    );
    rig.wait_at(1, Duration::from_secs(180));
    assert_eq!(rig.launches_on("agent-3"), 6);
    let node = rig.node("agent-3").expect("agent-3");
    assert_eq!(node["failures"], 0, "{node}");
    assert!(rig.host(3).packages.contains_key("EMC-ScaleIO-sds"));
    let events = rig.control("GET", "/control/gateway/events");
    assert_eq!(events["data_unavailable"], 0, "{events}");
}
