//! End to end, taking storage out on the dev cluster (real scheduler and executors, host
//! stand-ins, the dev gateway, pre-configured mode), through the operator API: one device
//! removed from its node's SDS; a node decommissioned, whose SDS the gateway removes only once
//! its data has moved (its `sds` service stopped only after that), which then never launches
//! again, even when its host comes back under a new agent id; and a host killed for good,
//! replaced: its SDS removed at once, its node forgotten. Counted through the dev gateway:
//! no data ever unavailable.

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/devrig.rs"]
mod devrig;

use cluster::KillOnDrop;
use devrig::{json, until};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

const AGENTS: usize = 4;
const PASSWORD: &str = "E2e-Decom-Pa55";
const PLAN_WAIT_SECS: u64 = 2;
/// How long the dev gateway takes to move an SDS's data (and to rebuild after an outage).
const MOVE_SECS: u64 = 3;
/// Shorter than an idle executor's own plan requests (60 s ± a fifth at the default
/// `-health.stale`): a decommission that reaches the idle node's executor within it came by
/// the scheduler's nudge (framework MESSAGE).
const SOON: Duration = Duration::from_secs(30);

struct Rig {
    scheduler: KillOnDrop,
    control: devcluster::control::ControlHandle,
    _master: Arc<devcluster::master::MasterHandle>,
    _packages: Arc<tiny_http::Server>,
    base: String,
    dir: PathBuf,
}

impl Rig {
    /// [`devrig::PreconfigRig`], with a master that calls a stopped agent's tasks unreachable
    /// after seconds, not minutes (the killed host).
    fn start() -> Rig {
        let dir = devrig::fresh_dir(&format!("e2e-decommission-{}", std::process::id()));
        let listener = devcluster::control::bind(0).expect("control API");
        let standins = devrig::standins_with_plan_wait(listener.url(), PLAN_WAIT_SECS);
        let master = devrig::start_master(devcluster::master::MasterConfig {
            agent_removal_timeout: Duration::from_secs(4),
            ..devrig::master_config(AGENTS, &dir, standins)
        });
        let gateway = devrig::start_gateway(PASSWORD, true);
        let gateway_addr = gateway.addr().to_string();
        let control = devrig::serve_control(listener, &master, gateway);
        let port = cluster::free_port();
        let mut args = devrig::preconfig_args(&master, port, &dir, PASSWORD, &gateway_addr);
        args.push(devrig::operator_token_flag(&dir, devrig::OPERATOR_TOKEN));
        args.push("-health.interval=1".into());
        let (package_flags, packages) = cluster::stage_packages(&dir.join("packages"));
        args.extend(package_flags);
        Rig {
            scheduler: devrig::spawn_scheduler(args, devrig::new_log(&dir)),
            control,
            _master: master,
            _packages: packages,
            base: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }

    fn control(&self, post: bool, path: &str) -> Value {
        let (status, v) = devrig::control_call(&self.control, post, path);
        assert_eq!(status, 200, "{path}: {v}");
        v
    }

    fn operator(&self, path: &str) -> (u16, Value) {
        devrig::operator(&self.base, &self.dir, devrig::OPERATOR_TOKEN, path)
    }

    /// The gateway's SDS of `host` (its snapshot entry), if it lists one.
    fn sds(&self, host: &str) -> Option<Value> {
        let g = &self.control(false, "/control/state")["gateway"];
        let list = g["sds"].as_array().cloned().unwrap_or_default();
        list.into_iter().find(|s| s["name"] == host)
    }

    /// The gateway's devices of `host`'s SDS.
    fn devices(&self, host: &str) -> Vec<Value> {
        let Some(sds) = self.sds(host) else {
            return Vec::new();
        };
        let g = &self.control(false, "/control/state")["gateway"];
        let list = g["devices"].as_array().cloned().unwrap_or_default();
        list.into_iter()
            .filter(|d| d["sdsId"] == sds["id"])
            .collect()
    }

    /// Every command agent `n`'s host ran (1-based), in order.
    fn host_commands(&self, n: usize) -> Vec<String> {
        let h = self.control(false, &format!("/control/agents/{n}/host"));
        let history = h["history"].as_array().cloned().unwrap_or_default();
        history
            .iter()
            .map(|i| {
                let argv = i["argv"].as_array().into_iter().flatten();
                argv.filter_map(Value::as_str).collect::<Vec<_>>().join(" ")
            })
            .collect()
    }

    fn launches_on(&self, agent: &str) -> usize {
        let log = self.control(false, "/control/master/launches");
        let all = log.as_array().cloned().unwrap_or_default();
        all.iter()
            .filter(|l| l["agent"] == agent && l["task"].is_string())
            .count()
    }

    fn data_unavailable(&self) -> u64 {
        let e = self.control(false, "/control/gateway/events");
        e["data_unavailable"].as_u64().expect("data_unavailable")
    }

    fn declined(&self) -> u64 {
        let text = devrig::get(&self.base, "/metrics").unwrap_or_default();
        let line = text
            .lines()
            .find(|l| l.contains("offers_declined_total") && !l.starts_with('#'));
        line.and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map_or(0, |v| v as u64)
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        devrig::keep_dir_if_failed(&self.dir);
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

fn sds_stopped(commands: &[String]) -> bool {
    commands
        .iter()
        .any(|c| c == "systemctl stop sds" || c == "service sds stop")
}

/// The `/api/events` entries naming `target`, as `action outcome`.
fn events(base: &str, target: &str) -> Vec<String> {
    let e = json(base, "/api/events").unwrap_or_default();
    let all = e["events"].as_array().cloned().unwrap_or_default();
    all.iter()
        .filter(|e| e["target"] == target)
        .map(|e| {
            format!(
                "{} {}",
                e["action"].as_str().unwrap_or(""),
                e["outcome"].as_str().unwrap_or("")
            )
        })
        .collect()
}

fn remove_a_device(rig: &Rig) {
    let base = &rig.base;
    let before = strings(&node(base, "agent-4").expect("node")["attached"]);
    assert!(before.len() >= 2, "agent-4 attached {before:?}");
    let device = before.last().unwrap().clone();
    let name = device.trim_start_matches("/dev/");
    let (status, answer) = rig.operator(&format!("/api/nodes/agent-4/devices/{name}/remove"));
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "accepted", "{answer}");
    until(
        "the device gone from the gateway and the node",
        SOON,
        || {
            let on_sds: Vec<String> = rig
                .devices("agent-4")
                .iter()
                .filter_map(|d| d["path"].as_str().map(str::to_string))
                .collect();
            let n = node(base, "agent-4")?;
            let ok = !on_sds.contains(&device)
                && !strings(&n["attached"]).contains(&device)
                && strings(&n["devices_removed"]) == [device.clone()]
                && n["phase"] == "running";
            ok.then_some(())
                .ok_or_else(|| format!("SDS {on_sds:?}; node {n}"))
        },
    );
    let target = format!("agent-4:{device}");
    assert!(
        events(base, &target).contains(&"remove-device done".to_string()),
        "{:?}",
        events(base, &target)
    );
}

/// The storage pool's data in use, as `/api/state` shows it.
fn used_bytes(base: &str) -> Result<u64, String> {
    let s = json(base, "/api/state")?;
    let pools = s["model"]["pools"].as_array().cloned().unwrap_or_default();
    Ok(pools.iter().filter_map(|p| p["used_bytes"].as_u64()).sum())
}

/// With the pool mostly full, the other SDSs could not hold agent-2's data: refused, naming
/// the pool; nothing starts.
fn a_decommission_without_room_is_refused(rig: &Rig) {
    let base = &rig.base;
    rig.control(true, "/control/gateway/fill?pct=80");
    until("the pool's data in use seen", SOON, || {
        match used_bytes(base)? {
            0 => Err("no data in use yet".into()),
            _ => Ok(()),
        }
    });
    let (status, answer) = rig.operator("/api/nodes/agent-2/decommission");
    assert_eq!(status, 409, "{answer}");
    assert_eq!(answer["outcome"], "refused", "{answer}");
    let why = answer["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("could not hold its data") && why.contains("pool"),
        "{why}"
    );
    assert_eq!(rig.sds("agent-2").expect("its SDS")["sdsState"], "Normal");
    rig.control(true, "/control/gateway/fill?pct=0");
    until("the pool empty again", SOON, || match used_bytes(base)? {
        0 => Ok(()),
        n => Err(format!("{n} bytes in use")),
    });
}

/// Decommissions agent-2; its new agent id.
fn decommission(rig: &Rig) -> String {
    let base = &rig.base;
    let agent_before = node(base, "agent-2").expect("node")["agent_id"].clone();
    let asked = Instant::now();
    let (status, answer) = rig.operator("/api/nodes/agent-2/decommission");
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["outcome"], "accepted", "{answer}");
    // The SDS stays, RemovePending, while its data moves; its service stops only after.
    let mut saw_pending = false;
    let gone_after = until("the SDS removed, then its service stopped", SOON, || {
        let sds = rig.sds("agent-2");
        let stopped = sds_stopped(&rig.host_commands(2));
        assert!(
            !(stopped && sds.is_some()),
            "agent-2's sds service stopped while the gateway still lists its SDS: {sds:?}"
        );
        saw_pending |= sds
            .as_ref()
            .is_some_and(|s| s["sdsState"] == "RemovePending");
        (sds.is_none() && stopped)
            .then_some(())
            .ok_or_else(|| format!("SDS {sds:?}, sds stopped: {stopped}"))
    });
    assert!(saw_pending, "the SDS was never seen RemovePending");
    assert!(
        asked.elapsed() >= Duration::from_secs(MOVE_SECS),
        "the SDS went {gone_after:?} after the command, before its data could move"
    );
    until("the node decommissioned, its task finished", SOON, || {
        let n = node(base, "agent-2")?;
        let ok = n["decommissioned"] == true
            && n.get("removal").is_none()
            && n["task"]["state"] == "TASK_FINISHED";
        ok.then_some(()).ok_or_else(|| format!("{n}"))
    });
    let seen = events(base, "agent-2");
    for want in [
        "decommission accepted",
        "decommission sds-removed",
        "decommission done",
    ] {
        assert!(seen.contains(&want.to_string()), "{want}: {seen:?}");
    }

    // Its host comes back under a new agent id: the node follows it, still decommissioned
    // (its offers come when the framework next wants some: see the replace below).
    rig.control(true, "/control/agents/2/new-id");
    let mut new_agent = String::new();
    until("the node on its new agent", Duration::from_secs(60), || {
        let n = node(base, "agent-2")?;
        new_agent = n["agent_id"].as_str().unwrap_or("").to_string();
        let ok = n["agent_id"] != agent_before && n["decommissioned"] == true;
        ok.then_some(()).ok_or_else(|| format!("{n}"))
    });
    new_agent
}

fn replace_a_killed_host(rig: &Rig) {
    let base = &rig.base;
    rig.control(true, "/control/agents/3/stop");
    until(
        "the killed host's task no longer running",
        Duration::from_secs(60),
        || {
            let n = node(base, "agent-3")?;
            (n["task"]["state"] != "TASK_RUNNING")
                .then_some(())
                .ok_or_else(|| format!("{n}"))
        },
    );
    let (status, answer) = rig.operator("/api/nodes/agent-3/replace");
    assert_eq!(status, 200, "{answer}");
    until("its SDS removed and the node forgotten", SOON, || {
        let gone = rig.sds("agent-3").is_none();
        let forgotten = node(base, "agent-3").is_err();
        (gone && forgotten)
            .then_some(())
            .ok_or_else(|| format!("SDS gone {gone}, node forgotten {forgotten}"))
    });
    assert!(
        events(base, "agent-3").contains(&"replace done".to_string()),
        "{:?}",
        events(base, "agent-3")
    );
}

/// The replaced host's agent returns: a new node, launched; the framework asks for offers for
/// it, and the decommissioned agent-2's offer is declined, never launched on.
fn the_replaced_host_returns_as_a_new_node(rig: &Rig, decommissioned_agent: &str) {
    let declined = rig.declined();
    rig.control(true, "/control/agents/3/start");
    let within = Duration::from_secs(120);
    until(
        "agent-3 running as a new node, offers declined",
        within,
        || {
            let n = node(&rig.base, "agent-3")?;
            let ok = n["phase"] == "running" && rig.declined() > declined;
            ok.then_some(()).ok_or_else(|| format!("{n}"))
        },
    );
    assert_eq!(
        rig.launches_on(decommissioned_agent),
        0,
        "launched on the decommissioned node's agent {decommissioned_agent}"
    );
    let n = node(&rig.base, "agent-2").expect("node");
    assert_eq!(n["decommissioned"], true, "{n}");
    assert!(n["task"]["state"] != "TASK_RUNNING", "{n}");
}

#[test]
fn storage_is_taken_out_without_data_ever_unavailable() {
    let mut rig = Rig::start();
    devrig::running_tasks(&mut rig.scheduler, &rig.dir, &rig.base, AGENTS);
    rig.control(
        true,
        &format!("/control/gateway/rebuild-time?seconds={MOVE_SECS}"),
    );
    rig.control(true, "/control/gateway/events/reset");

    remove_a_device(&rig);
    a_decommission_without_room_is_refused(&rig);
    let agent_2 = decommission(&rig);
    replace_a_killed_host(&rig);
    the_replaced_host_returns_as_a_new_node(&rig, &agent_2);

    // Recommission: the node launches again.
    let (status, answer) = rig.operator("/api/nodes/agent-2/recommission");
    assert_eq!(status, 200, "{answer}");
    until("agent-2 running again", Duration::from_secs(120), || {
        let n = node(&rig.base, "agent-2")?;
        let ok =
            n["decommissioned"] == false && n["phase"] == "running" && rig.sds("agent-2").is_some();
        ok.then_some(()).ok_or_else(|| format!("{n}"))
    });
    assert_eq!(
        rig.data_unavailable(),
        0,
        "{}",
        rig.control(false, "/control/gateway/events")
    );
}
