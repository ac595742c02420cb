//! End to end, an operator's restart through the operators' client (`storage-scheduler ctl`)
//! on the dev cluster: the real scheduler, executors, host stand-ins and dev gateway. The
//! restarted node's executor is replaced and its host walked again from the first phase, and
//! the host stand-ins' command logs are the judges: nothing installed, no service stopped or
//! restarted, no reboot, on any host; the dev gateway counts no data-unavailable event. A
//! second restart in the domain is refused while the first walks (the disruption budget);
//! the client prints one line per outcome and exits non-zero on a refusal. Pre-configured
//! data nodes, and in experimental mode the primary MDM node (its cluster-init walked again).

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/devrig.rs"]
mod devrig;

use cluster::KillOnDrop;
use devcluster::control::{self, ControlHandle};
use devcluster::host::{self, FakeRoot, HostState};
use devcluster::master::MasterHandle;
use devrig::PreconfigRig;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

const AGENTS: usize = 3;
const PASSWORD: &str = "E2e-Restart-Pa55";
const WITHIN: Duration = Duration::from_secs(120);
const TOKEN: Option<&str> = Some(devrig::OPERATOR_TOKEN);

/// The scheduler under test: its `http://` address, the directory of its log and agents,
/// the control API of its dev cluster.
struct Scheduler<'a> {
    base: &'a str,
    dir: &'a Path,
    control: &'a ControlHandle,
}

/// `storage-scheduler ctl <args>` against the scheduler (its https address, the certificate
/// its log names), the token from the environment when given: exit code and stdout.
fn ctl(s: &Scheduler, token: Option<&str>, args: &[&str]) -> (i32, String) {
    let pin = cluster::logged_fingerprint(&s.dir.join("scheduler.log")).expect("certificate");
    let mut c = Command::new(cluster::scheduler_bin());
    c.arg("ctl")
        .arg(format!(
            "-url={}",
            s.base.replacen("http://", "https://", 1)
        ))
        .arg(format!("-fingerprint={pin}"))
        .args(args)
        .env_remove("STORAGE_OPERATOR_TOKEN")
        .env_remove("STORAGE_SCHEDULER_URL");
    if let Some(t) = token {
        c.env("STORAGE_OPERATOR_TOKEN", t);
    }
    let out = c.output().expect("storage-scheduler ctl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stdout.contains(devrig::OPERATOR_TOKEN) && !stderr.contains(devrig::OPERATOR_TOKEN),
        "the token printed"
    );
    eprintln!("ctl {args:?}: {:?}\n{stdout}{stderr}", out.status.code());
    (out.status.code().unwrap_or(-1), stdout)
}

fn host_state(s: &Scheduler, n: usize) -> HostState {
    let root = host::agent_root(&s.dir.join("mesos").join(format!("agent-{n}")));
    FakeRoot::open(&root).unwrap().state().unwrap()
}

/// A host command that installs a package, stops or restarts a service, or reboots.
fn disruptive(argv: &[String]) -> bool {
    let a: Vec<&str> = argv.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["systemctl", verb, ..] | ["service", _, verb, ..] => matches!(*verb, "stop" | "restart"),
        ["dpkg", "-i", ..] | ["rpm", "-i" | "-ivh" | "-Uvh" | "-U", ..] => true,
        ["yum" | "apt-get", rest @ ..] => rest.contains(&"install"),
        ["reboot", ..] | ["shutdown", ..] => true,
        _ => false,
    }
}

/// Hostname -> node, from `/api/state`.
fn nodes(s: &Scheduler) -> Result<BTreeMap<String, Value>, String> {
    let state = devrig::json(s.base, "/api/state")?;
    let nodes = state["model"]["nodes"].as_object().ok_or("no nodes")?;
    Ok(nodes
        .values()
        .map(|n| (n["hostname"].as_str().unwrap_or("?").to_string(), n.clone()))
        .collect())
}

/// A restart waits for the budget, which reads the gateway's data (a fresh, healthy poll),
/// and for its node to be at the target: a node just at `running` reaches it at its next
/// plan poll.
fn settled(s: &Scheduler) {
    devrig::until("a healthy storage cluster", WITHIN, || {
        let h = devrig::json(s.base, "/api/health")?;
        (h["state"] == "healthy")
            .then_some(())
            .ok_or(format!("{h}"))
    });
    devrig::until("every node at the target generation", WITHIN, || {
        let state = devrig::json(s.base, "/api/state")?;
        let target = &state["model"]["target"]["generation"];
        let nodes = state["model"]["nodes"].as_object().ok_or("no nodes")?;
        let behind: Vec<&Value> = nodes
            .values()
            .filter(|n| n["generation"] != *target)
            .map(|n| &n["hostname"])
            .collect();
        behind
            .is_empty()
            .then_some(())
            .ok_or(format!("behind {target}: {behind:?}"))
    });
}

/// Restarts `first` through `ctl`, sees `second` (of the same domain) refused while it walks,
/// and judges the walk: `first` relaunched and from the first phase, running again, having
/// queried its host; the other nodes untouched; no host installed, stopped, restarted or
/// rebooted anything; no data unavailable.
fn restart_and_judge(s: &Scheduler, tasks: &BTreeMap<String, String>, first: &str, second: &str) {
    let before: Vec<HostState> = (1..=AGENTS).map(|n| host_state(s, n)).collect();
    let log = || std::fs::read_to_string(s.dir.join("scheduler.log")).unwrap_or_default();
    let walk_line = format!("{first}: phase launching -> environment");
    let walks_before = log().matches(&walk_line).count();

    let (code, out) = ctl(s, TOKEN, &["restart", first]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.lines().count(), 1, "one line: {out}");
    assert!(
        out.starts_with(&format!("restart {first}: accepted: ")),
        "{out}"
    );
    let (code, out) = ctl(s, TOKEN, &["restart", second]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with(&format!("restart {second}: refused: ")) && out.contains(first),
        "{out}"
    );

    devrig::until("the restarted node running again", WITHIN, || {
        let n = nodes(s)?;
        let node = &n[first];
        let relaunched = node["task"]["task_id"] != tasks[first].as_str();
        (relaunched && node["phase"] == "running" && node["restart"].is_null())
            .then_some(())
            .ok_or(format!("{first}: {} {}", node["phase"], node["restart"]))
    });
    assert_eq!(log().matches(&walk_line).count(), walks_before + 1);
    let n = nodes(s).unwrap();
    for h in tasks.keys().filter(|h| *h != first) {
        assert_eq!(n[h.as_str()]["task"]["task_id"], tasks[h].as_str(), "{h}");
    }
    for (i, was) in before.iter().enumerate() {
        let now = host_state(s, i + 1);
        let since: Vec<&Vec<String>> = now.history[was.history.len()..]
            .iter()
            .map(|inv| &inv.argv)
            .collect();
        let bad: Vec<_> = since.iter().filter(|a| disruptive(a)).collect();
        assert!(bad.is_empty(), "{} ran {bad:?}", now.hostname);
        assert_eq!(now.boots, was.boots, "{} rebooted", now.hostname);
        assert_eq!(now.packages, was.packages, "{}", now.hostname);
        for (name, svc) in &now.services {
            let running = was.services.get(name).map(|w| w.running);
            assert_eq!(Some(svc.running), running, "{}: {name}", now.hostname);
        }
        if now.hostname == first {
            // It looked: the packages' phase queried the package database again.
            let queried = since.iter().any(|a| {
                a.first().is_some_and(|c| c == "dpkg-query")
                    || a.starts_with(&["rpm".to_string(), "-q".to_string()])
            });
            assert!(queried, "{first} checked no package: {since:?}");
        }
    }
    let events = devrig::control_json(s.control, "GET", "/control/gateway/events");
    assert_eq!(events["data_unavailable"], 0, "{events}");
}

#[test]
fn restart_reinstalls_nothing_and_ctl_exits_non_zero_on_refusal() {
    let flags = vec!["-health.interval=1".into()];
    let mut rig = PreconfigRig::launch("e2e-restart", AGENTS, PASSWORD, 2, flags);
    let tasks = devrig::running_tasks(&mut rig.scheduler, &rig.dir, &rig.base, AGENTS);
    let s = Scheduler {
        base: &rig.base,
        dir: &rig.dir,
        control: &rig.control,
    };
    settled(&s);
    let (code, out) = ctl(&s, None, &["status"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("plan "), "{out}");

    let hosts: Vec<&String> = tasks.keys().collect();
    restart_and_judge(&s, &tasks, hosts[0], hosts[1]);

    let (code, out) = ctl(&s, TOKEN, &["restart", "no-such-host"]);
    assert_eq!(
        (code, out.trim()),
        (
            1,
            "restart no-such-host: unknown: no node on host no-such-host"
        )
    );
    let (code, out) = ctl(&s, Some("not-the-operator-token"), &["pause"]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("401"), "{out}");
    // Once the first runs again, the second may restart; the events list every outcome.
    let (code, out) = ctl(&s, TOKEN, &["restart", hosts[1]]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = ctl(&s, None, &["events"]);
    assert_eq!(code, 0, "{out}");
    for seen in [
        format!("action restart {}: accepted: ", hosts[0]),
        format!("action restart {}: refused: ", hosts[1]),
        "action restart no-such-host: unknown: ".to_string(),
    ] {
        assert!(out.contains(&seen), "{seen:?} not in:\n{out}");
    }
    // Plan control through the client: the status line says paused until resumed.
    let (code, out) = ctl(&s, TOKEN, &["pause"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("pause plan: accepted: "), "{out}");
    let (_, out) = ctl(&s, None, &["status"]);
    assert!(
        out.lines().next().is_some_and(|l| l.contains(", paused:")),
        "{out}"
    );
    let (code, out) = ctl(&s, TOKEN, &["resume"]);
    assert_eq!(code, 0, "{out}");
    let (_, out) = ctl(&s, None, &["status"]);
    assert!(!out.contains("paused"), "{out}");
}

/// Experimental mode: the executors built the MDM cluster; the scheduler on the test's own
/// empty gateway.
struct ExperimentalRig {
    scheduler: KillOnDrop,
    control: ControlHandle,
    _master: Arc<MasterHandle>,
    _packages: Arc<tiny_http::Server>,
    base: String,
    dir: PathBuf,
}

impl ExperimentalRig {
    fn launch() -> ExperimentalRig {
        let dir = devrig::fresh_dir(&format!("e2e-restart-mdm-{}", std::process::id()));
        let listener = control::bind(0).expect("control API");
        let standins = devrig::standins_with_plan_wait(listener.url(), 2);
        let master = devrig::start_master(devrig::master_config(AGENTS, &dir, standins));
        let gateway = devrig::start_gateway(PASSWORD, false);
        let gateway_addr = gateway.addr().to_string();
        let control = devrig::serve_control(listener, &master, gateway);
        let port = cluster::free_port();
        let mut args = devrig::preconfig_args(&master, port, &dir, PASSWORD, &gateway_addr);
        args.retain(|a| !a.starts_with("-storage.preconfig."));
        args.push("-experimental=true".into());
        args.push(format!("-storage.preconfig.gateway={gateway_addr}"));
        args.push("-health.interval=1".into());
        args.push(devrig::operator_token_flag(&dir, devrig::OPERATOR_TOKEN));
        let (package_flags, packages) = cluster::stage_packages(&dir.join("packages"));
        args.extend(package_flags);
        ExperimentalRig {
            scheduler: devrig::spawn_scheduler(args, devrig::new_log(&dir)),
            control,
            _master: master,
            _packages: packages,
            base: format!("http://127.0.0.1:{port}"),
            dir,
        }
    }
}

impl Drop for ExperimentalRig {
    fn drop(&mut self) {
        devrig::keep_dir_if_failed(&self.dir);
    }
}

#[test]
fn restart_of_the_primary_mdm_node_reinstalls_nothing() {
    let mut rig = ExperimentalRig::launch();
    let tasks = devrig::running_tasks(&mut rig.scheduler, &rig.dir, &rig.base, AGENTS);
    let s = Scheduler {
        base: &rig.base,
        dir: &rig.dir,
        control: &rig.control,
    };
    settled(&s);
    let n = nodes(&s).unwrap();
    let of = |persona: &str| {
        n.iter()
            .find(|(_, v)| v["persona"] == persona)
            .map(|(h, _)| h.clone())
            .unwrap_or_else(|| panic!("no {persona}"))
    };
    restart_and_judge(&s, &tasks, &of("primary"), &of("secondary"));
    settled(&s);
}
