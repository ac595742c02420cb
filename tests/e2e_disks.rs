//! End to end, day two of a node's disks on the dev cluster: the real scheduler and executors
//! (host stand-ins, the dev gateway, pre-configured mode) walk the nodes to `running`; then a
//! disk plugged into one agent's host joins that node's SDS within one plan cycle, and a disk
//! pulled out shows on its node by path (`/api/state`, the status page) as missing, and in
//! error at the gateway; plugged back, it is missing no more. The node stays `running`
//! throughout: no executor ends or starts, and its host runs no install and no reboot.
//!
//! "Within one plan cycle": a running executor reads its devices once per plan long poll, so
//! a disk plugged in is found at most one plan wait later; its report changes the node, the
//! scheduler hands the attachment to the gateway worker at once (no second cycle), so the
//! deadline is one plan wait plus what the report, the save and the gateway's calls take.
//! The executors' plan wait is set short (`STORAGE_EXECUTOR_PLAN_WAIT`) only to keep the test
//! fast; the cycle it bounds is the same at the default wait.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/devrig.rs"]
mod devrig;

use devrig::{get, json, until};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

const AGENTS: usize = 3;
const PASSWORD: &str = "E2e-Disks-Pa55";
/// The executors' plan wait: a running node reads its host once per plan cycle.
const PLAN_WAIT_SECS: u64 = 2;
/// One plan cycle, and slack for the report, the save and the gateway's calls on a machine
/// that builds while the test runs.
const ONE_CYCLE: Duration = Duration::from_secs(PLAN_WAIT_SECS + 6);
/// The gateway is read every second; a device in error shows at the next read.
const POLL_SECS: u64 = 1;
/// The agent whose host gets and loses a disk, and the disk.
const AGENT: usize = 2;
const HOST: &str = "agent-2";
const NEW_DISK: &str = "/dev/sdd";

/// The dev cluster, its gateway and control API, and the scheduler under test.
type Rig = devrig::PreconfigRig;

impl Rig {
    fn start() -> Rig {
        let flags = vec![format!("-health.interval={POLL_SECS}")];
        Rig::launch("e2e-disks", AGENTS, PASSWORD, PLAN_WAIT_SECS, flags)
    }

    /// A control API call and its status and JSON answer.
    fn control_call(&self, post: bool, path: &str) -> (u16, Value) {
        devrig::control_call(&self.control, post, path)
    }

    /// A control API call that must answer 200.
    fn control(&self, post: bool, path: &str) -> Value {
        let (status, v) = self.control_call(post, path);
        assert_eq!(status, 200, "{path}: {v}");
        v
    }

    /// Hostname -> task id of every node, once all of them run. A scheduler that exited
    /// fails at once, with its log.
    fn running_tasks(&mut self) -> BTreeMap<String, String> {
        devrig::running_tasks(&mut self.scheduler, &self.dir, &self.base, AGENTS)
    }

    /// The devices the gateway lists on `host`'s SDS.
    fn gateway_devices(&self, host: &str) -> Vec<String> {
        let g = &self.control(false, "/control/state")["gateway"];
        let Some(sds) = g["sds"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|s| s["name"] == host)
        else {
            return Vec::new();
        };
        g["devices"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["sdsId"] == sds["id"])
            .filter_map(|d| d["path"].as_str().map(str::to_string))
            .collect()
    }

    /// Every command agent `AGENT`'s host ran, in order.
    fn host_commands(&self) -> Vec<String> {
        let h = self.control(false, &format!("/control/agents/{AGENT}/host"));
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

    fn launches(&self) -> usize {
        let log = self.control(false, "/control/master/launches");
        log.as_array().expect("launch record").len()
    }
}

/// `/api/state`'s node on `host`.
fn node(base: &str, host: &str) -> Result<Value, String> {
    let s = json(base, "/api/state")?;
    s["model"]["nodes"]
        .as_object()
        .and_then(|m| m.values().find(|n| n["hostname"] == host).cloned())
        .ok_or_else(|| format!("no node {host} in /api/state"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_string)
        .collect()
}

/// The status page's row of `host`.
fn page_row(base: &str, host: &str) -> Result<String, String> {
    let page = get(base, "/ui")?;
    page.split("<tr")
        .find(|r| r.contains(&format!("class=\"host\">{host}<")))
        .map(|r| r.split("</tr>").next().unwrap_or(r).to_string())
        .ok_or_else(|| format!("no row of {host} on the page"))
}

/// An install, an upgrade, a removal or a reboot among `commands`.
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
fn a_plugged_disk_joins_within_one_plan_cycle_and_a_pulled_one_shows_on_its_node() {
    let mut rig = Rig::start();
    let base = rig.base.clone();
    let tasks = rig.running_tasks();
    let before = node(&base, HOST).expect("the node");
    let attached = strings(&before["attached"]);
    assert!(!attached.is_empty(), "{HOST} attached nothing: {before}");
    assert!(!attached.contains(&NEW_DISK.to_string()), "{before}");
    let launches = rig.launches();
    let commands = rig.host_commands().len();

    // A disk plugged in: on the SDS, and in the node's attached devices, within one cycle.
    let plugged = rig.control(
        true,
        &format!("/control/agents/{AGENT}/disk?path={NEW_DISK}&present=true"),
    );
    assert_eq!(plugged["changed"], true, "{plugged}");
    let t = until("the new disk on the SDS", ONE_CYCLE, || {
        let on_sds = rig.gateway_devices(HOST);
        on_sds
            .contains(&NEW_DISK.to_string())
            .then_some(())
            .ok_or_else(|| format!("the gateway lists {on_sds:?} on {HOST}"))
    });
    eprintln!("{NEW_DISK} on {HOST}'s SDS after {t:?} (plan wait {PLAN_WAIT_SECS} s)");
    until("the new disk attached in /api/state", ONE_CYCLE, || {
        let n = node(&base, HOST)?;
        let ok = strings(&n["attached"]).contains(&NEW_DISK.to_string())
            && strings(&n["devices"]).contains(&NEW_DISK.to_string())
            && n["phase"] == "running"
            && n.get("storage_intent").is_none();
        ok.then_some(()).ok_or_else(|| format!("{n}"))
    });
    for d in &attached {
        assert!(
            rig.gateway_devices(HOST).contains(d),
            "{d} still on the SDS"
        );
    }

    // The disk pulled out: missing on its node, by path, and in error at the gateway.
    let pulled = rig.control(
        true,
        &format!("/control/agents/{AGENT}/disk?path={NEW_DISK}&present=false"),
    );
    assert_eq!(pulled["gateway_device_failed"], true, "{pulled}");
    let t = until("the pulled disk missing on its node", ONE_CYCLE, || {
        let n = node(&base, HOST)?;
        let reasons = strings(&n["health"]["reasons"]);
        let ok = strings(&n["devices_missing"]) == [NEW_DISK]
            && strings(&n["device_errors"]) == [NEW_DISK]
            && reasons
                .iter()
                .any(|r| r == &format!("device {NEW_DISK}: missing"))
            && n["phase"] == "running";
        ok.then_some(()).ok_or_else(|| format!("{n}"))
    });
    eprintln!("{NEW_DISK} missing on {HOST} after {t:?}");
    let row = page_row(&base, HOST).expect("the page");
    assert!(
        row.contains(&format!("{NEW_DISK} missing")) && row.contains("missing from the host"),
        "{row}"
    );
    // Shown, not removed: still the node's device and still on the SDS.
    let n = node(&base, HOST).expect("the node");
    assert!(
        strings(&n["devices"]).contains(&NEW_DISK.to_string()),
        "{n}"
    );
    assert!(rig.gateway_devices(HOST).contains(&NEW_DISK.to_string()));
    // Plugged back: no longer missing; the gateway's error stays until it clears it.
    rig.control(
        true,
        &format!("/control/agents/{AGENT}/disk?path={NEW_DISK}&present=true"),
    );
    until("the disk back on its node", ONE_CYCLE, || {
        let n = node(&base, HOST)?;
        let ok = n.get("devices_missing").is_none()
            && strings(&n["device_errors"]) == [NEW_DISK]
            && n["phase"] == "running";
        ok.then_some(()).ok_or_else(|| format!("{n}"))
    });

    // Running throughout: no executor ended or started, no task launched, nothing installed
    // or rebooted on the host.
    assert_eq!(rig.launches(), launches, "the launch record grew");
    assert_eq!(rig.running_tasks(), tasks, "every node keeps its task");
    let since = rig.host_commands().split_off(commands);
    let bad = disruptive(&since);
    assert!(bad.is_empty(), "{HOST} ran {bad:?}");
    // The control API refuses what it cannot do, naming it.
    let (status, answer) = rig.control_call(
        true,
        &format!("/control/agents/{AGENT}/disk?path=sdd&present=true"),
    );
    assert_eq!(status, 400, "{answer}");
    assert!(answer.to_string().contains("not under /dev/"), "{answer}");
}

#[test]
fn disruptive_commands_are_told_from_checks() {
    let c = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert!(disruptive(&c(&["systemctl is-active sds", "rpm -q EMC-ScaleIO-sds"])).is_empty());
    assert_eq!(
        disruptive(&c(&["rpm -Uvh /x.rpm", "shutdown -r now"])).len(),
        2
    );
}
