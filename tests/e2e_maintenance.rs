//! End to end, Mesos maintenance on the dev cluster: three data nodes of one protection
//! domain (pre-configured mode, the real scheduler and executors on host stand-ins). A window
//! on agent-1's machine is accepted (its node says so in `/api/state`); a window on agent-2's
//! machine at the same time is declined, the node saying why, while agent-1 is away. The
//! operator takes agent-1's machine down and up; its node follows the host's new agent back to
//! `running` without installing anything, and only then is agent-2's window accepted. The dev
//! gateway counts no data-unavailable event throughout.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/devrig.rs"]
mod devrig;

use devrig::{json, until};
use serde_json::{json, Value};
use std::time::Duration;

const AGENTS: usize = 3;
const PASSWORD: &str = "E2e-Maint-Pa55";
const PLAN_WAIT_SECS: u64 = 2;
/// The master asks again about a declined window every 5 s; a node comes back within the
/// agent watcher's 30 s look plus a relaunch.
const WITHIN: Duration = Duration::from_secs(150);

type Rig = devrig::PreconfigRig;

fn master_post(rig: &Rig, path: &str, body: &Value) -> (u16, String) {
    let url = format!("http://{}{path}", rig.master.addr());
    let resp = ureq::post(&url)
        .config()
        .http_status_as_error(false)
        .build()
        .header("Content-Type", "application/json")
        .send(body.to_string())
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    let status = resp.status().as_u16();
    (
        status,
        resp.into_body().read_to_string().unwrap_or_default(),
    )
}

fn master_get(rig: &Rig, path: &str) -> Value {
    let url = format!("http://{}{path}", rig.master.addr());
    devrig::get_json(&url).unwrap_or_else(|| panic!("GET {path}"))
}

/// `{"hostname", "ip"}` of agent `n` (1-based), as its agent registers.
fn machine(rig: &Rig, n: usize) -> Value {
    let agents = rig.master.agents().expect("agents");
    let a = &agents[n - 1];
    json!({"hostname": a.hostname, "ip": a.ip.to_string()})
}

fn schedule(rig: &Rig, machines: &[Value]) {
    let start_ns = 1_900_000_000_000_000_000i64;
    let body = json!({"windows": [{"machine_ids": machines, "unavailability": {
        "start": {"nanoseconds": start_ns}, "duration": {"nanoseconds": 3_600_000_000_000i64}}}]});
    let (status, text) = master_post(rig, "/master/maintenance/schedule", &body);
    assert_eq!(status, 200, "schedule: {text}");
}

/// The answer the master recorded from our framework for `host`'s machine.
fn master_answer(rig: &Rig, host: &str) -> Option<String> {
    let status = master_get(rig, "/master/maintenance/status");
    let draining = status["draining_machines"].as_array()?;
    let m = draining.iter().find(|m| m["id"]["hostname"] == host)?;
    m["statuses"][0]["status"].as_str().map(str::to_string)
}

/// `/api/state`'s node on `host`.
fn node(base: &str, host: &str) -> Result<Value, String> {
    let s = json(base, "/api/state")?;
    s["model"]["nodes"]
        .as_object()
        .and_then(|m| m.values().find(|n| n["hostname"] == host).cloned())
        .ok_or_else(|| format!("no node {host} in /api/state"))
}

/// Waits until `host`'s node answers `answer` and the master has it.
fn answered(rig: &Rig, host: &str, answer: &str) -> Value {
    let mut seen = Value::Null;
    until(&format!("{host} {answer}"), WITHIN, || {
        let n = node(&rig.base, host)?;
        let m = &n["maintenance"];
        let master = master_answer(rig, host);
        let want = if answer == "accepted" {
            "ACCEPT"
        } else {
            "DECLINE"
        };
        if m["answer"] == answer && master.as_deref() == Some(want) {
            seen = m.clone();
            return Ok(());
        }
        Err(format!("node: {m}, master: {master:?}"))
    });
    seen
}

/// Every command agent `n`'s host ran, in order.
fn host_commands(rig: &Rig, n: usize) -> Vec<String> {
    let h = devrig::control_json(&rig.control, "GET", &format!("/control/agents/{n}/host"));
    h["history"]
        .as_array()
        .expect("host history")
        .iter()
        .map(|i| {
            let argv = i["argv"].as_array().into_iter().flatten();
            argv.filter_map(Value::as_str).collect::<Vec<_>>().join(" ")
        })
        .collect()
}

/// Installs, upgrades, removals and reboots among `commands`.
fn disruptive(commands: &[String]) -> Vec<&String> {
    const WORDS: [&str; 8] = [
        "rpm -i", "rpm -U", "rpm -e", "yum ", "dpkg -i", "apt-get", "reboot", "shutdown",
    ];
    commands
        .iter()
        .filter(|c| {
            WORDS
                .iter()
                .any(|w| c.starts_with(w) || c.contains(&format!(" {w}")))
        })
        .collect()
}

#[test]
fn a_window_drains_one_machine_of_a_domain_at_a_time_and_the_node_comes_back() {
    let mut rig = Rig::launch(
        "e2e-maintenance",
        AGENTS,
        PASSWORD,
        PLAN_WAIT_SECS,
        vec!["-health.interval=1".into()],
    );
    let tasks = devrig::running_tasks(&mut rig.scheduler, &rig.dir, &rig.base, AGENTS);
    devrig::control_json(&rig.control, "POST", "/control/gateway/events/reset");
    let before = node(&rig.base, "agent-1").unwrap();
    assert_eq!(before["maintenance"], Value::Null, "{before}");
    let commands = host_commands(&rig, 1).len();

    let (m1, m2) = (machine(&rig, 1), machine(&rig, 2));
    schedule(&rig, std::slice::from_ref(&m1));
    answered(&rig, "agent-1", "accepted");
    // The second machine of the domain at the same time: declined, the node says why.
    schedule(&rig, &[m1.clone(), m2.clone()]);
    let declined = answered(&rig, "agent-2", "declined");
    let why = declined["reason"].as_str().unwrap_or_default();
    assert!(why.contains("agent-1"), "{declined}");

    // The operator takes agent-1's machine: its task ends with the agent.
    let (status, text) = master_post(&rig, "/master/machine/down", &json!([m1]));
    assert_eq!(status, 200, "down: {text}");
    until("agent-1's task gone", WITHIN, || {
        let n = node(&rig.base, "agent-1")?;
        let same = n["task"]["task_id"] == tasks["agent-1"].as_str();
        let ended = !same || n["task"]["state"] != "TASK_RUNNING";
        ended.then_some(()).ok_or(format!("{n}"))
    });
    assert_eq!(master_answer(&rig, "agent-2").as_deref(), Some("DECLINE"));

    // Back up: agent-1's node follows its host's new agent to `running`, installing nothing.
    let (status, text) = master_post(&rig, "/master/machine/up", &json!([m1]));
    assert_eq!(status, 200, "up: {text}");
    until("agent-1 running again", WITHIN, || {
        let n = node(&rig.base, "agent-1")?;
        let back = n["phase"] == "running"
            && n["task"]["task_id"] != tasks["agent-1"].as_str()
            && n["maintenance"].is_null();
        back.then_some(()).ok_or(format!("{n}"))
    });
    let since = host_commands(&rig, 1).split_off(commands);
    let bad = disruptive(&since);
    assert!(bad.is_empty(), "agent-1 ran {bad:?}");

    // Only now may agent-2's machine go.
    answered(&rig, "agent-2", "accepted");
    let events = devrig::control_json(&rig.control, "GET", "/control/gateway/events");
    assert_eq!(events["data_unavailable"], 0, "{events}");
}
