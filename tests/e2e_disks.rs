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

use cluster::{free_port, scheduler_args, scheduler_bin, stage_packages, KillOnDrop};
use devcluster::control;
use devcluster::master::{self, MasterHandle};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

struct Rig {
    /// First: the scheduler ends before the cluster it runs on.
    scheduler: KillOnDrop,
    control: control::ControlHandle,
    _master: Arc<MasterHandle>,
    _packages: Arc<tiny_http::Server>,
    base: String,
    dir: PathBuf,
}

impl Rig {
    fn start() -> Rig {
        let dir = std::env::temp_dir().join(format!("e2e-disks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let listener = control::bind(0).expect("control API");
        let mut standins = cluster::host_standins(Some(listener.url()));
        let wait = (
            "STORAGE_EXECUTOR_PLAN_WAIT".into(),
            PLAN_WAIT_SECS.to_string(),
        );
        standins.extra_env.push(wait);
        let master = Arc::new(
            master::start(master::MasterConfig {
                agents: AGENTS,
                heartbeat_interval: Duration::from_secs(1),
                work_dir: dir.join("mesos"),
                host_standins: Some(standins),
                ..Default::default()
            })
            .unwrap_or_else(|e| panic!("dev cluster: {e}")),
        );
        // Its own gateway: the test reads and changes it.
        let gateway = Arc::new(
            devcluster::gateway::start(devcluster::gateway::GatewayConfig::new(
                PASSWORD,
                cluster::dev_mdms(),
            ))
            .unwrap_or_else(|e| panic!("dev gateway: {e}")),
        );
        let gateway_flag = format!("-storage.preconfig.gateway={}", gateway.addr());
        let control = listener
            .serve(control::Targets {
                master: master.clone(),
                gateway: Some(gateway),
            })
            .expect("control API");
        let port = free_port();
        let mut args = scheduler_args(
            &master.addr().to_string(),
            port,
            &dir.join("state.json"),
            PASSWORD,
        );
        args.retain(|a| !a.starts_with("-storage.preconfig.gateway="));
        args.push(gateway_flag);
        args.push(format!("-health.interval={POLL_SECS}"));
        let (package_flags, packages) = stage_packages(&dir.join("packages"));
        args.extend(package_flags);
        let log = std::fs::File::create(dir.join("scheduler.log")).expect("log");
        let child = Command::new(scheduler_bin())
            .args(args)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start storage-scheduler");
        Rig {
            scheduler: KillOnDrop(child),
            control,
            _master: master,
            _packages: packages,
            base: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }

    /// A control API call and its status and JSON answer.
    fn control_call(&self, post: bool, path: &str) -> (u16, Value) {
        let url = format!("{}{path}", self.control.url());
        let resp = if post {
            let req = ureq::post(&url).config().http_status_as_error(false);
            req.build().send_empty()
        } else {
            let req = ureq::get(&url).config().http_status_as_error(false);
            req.build().call()
        }
        .unwrap_or_else(|e| panic!("{path}: {e}"));
        let status = resp.status().as_u16();
        let body = resp.into_body().read_to_string().unwrap_or_default();
        let v = serde_json::from_str(&body).unwrap_or(Value::String(body));
        (status, v)
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
        let mut tasks = BTreeMap::new();
        until("every node running", Duration::from_secs(180), || {
            if let Ok(Some(status)) = self.scheduler.0.try_wait() {
                let log = std::fs::read_to_string(self.dir.join("scheduler.log"));
                panic!(
                    "the scheduler exited ({status}):\n{}",
                    log.unwrap_or_default()
                );
            }
            let s = json(&self.base, "/api/state")?;
            let nodes = s["model"]["nodes"].as_object().ok_or("no nodes")?;
            tasks = nodes
                .values()
                .filter(|n| n["phase"] == "running")
                .filter_map(|n| {
                    let task = n["task"]["task_id"].as_str()?;
                    Some((n["hostname"].as_str()?.to_string(), task.to_string()))
                })
                .collect();
            (tasks.len() == AGENTS)
                .then_some(())
                .ok_or_else(|| format!("{} of {AGENTS} running", tasks.len()))
        });
        tasks
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

impl Drop for Rig {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("scheduler log and sandboxes kept in {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn get(base: &str, path: &str) -> Result<String, String> {
    let resp = ureq::get(&format!("{base}{path}"))
        .config()
        .http_status_as_error(false)
        .build()
        .call()
        .map_err(|e| format!("GET {path}: {e}"))?;
    let status = resp.status().as_u16();
    let body = resp.into_body().read_to_string().unwrap_or_default();
    (status == 200)
        .then_some(body.clone())
        .ok_or_else(|| format!("GET {path}: {status} {body}"))
}

fn json(base: &str, path: &str) -> Result<Value, String> {
    let body = get(base, path)?;
    serde_json::from_str(&body).map_err(|e| format!("GET {path}: {e}: {body}"))
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

/// Polls `f` until it is `Ok`, failing at the deadline with its last complaint; how long it
/// took.
fn until(what: &str, within: Duration, mut f: impl FnMut() -> Result<(), String>) -> Duration {
    let start = Instant::now();
    loop {
        let last = match f() {
            Ok(()) => return start.elapsed(),
            Err(e) => e,
        };
        assert!(
            start.elapsed() < within,
            "{what}: not within {within:?}: {last}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
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
