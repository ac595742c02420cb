//! End to end, an operator's restart through the operators' client (`storage-scheduler ctl`)
//! on the dev cluster: the real scheduler, executors, host stand-ins and dev gateway. The
//! restarted node's executor is replaced and its host walked again from the first phase, and
//! the host stand-ins' command logs are the judges: nothing installed, no service stopped or
//! restarted, no reboot, on any host; the dev gateway counts no data-unavailable event. The
//! client prints one line per outcome and exits non-zero on a refusal (the disruption budget
//! taken by the first restart, no such node, a wrong token).

#[path = "support/cluster.rs"]
mod cluster;
#[path = "support/devrig.rs"]
mod devrig;

use devcluster::host::{self, FakeRoot, HostState};
use devrig::PreconfigRig;
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

const AGENTS: usize = 3;
const PASSWORD: &str = "E2e-Restart-Pa55";
const WITHIN: Duration = Duration::from_secs(120);

/// `storage-scheduler ctl <args>` against the rig's scheduler (its https address, the
/// certificate its log names), the token from the environment when given: exit code, stdout.
fn ctl(rig: &PreconfigRig, token: Option<&str>, args: &[&str]) -> (i32, String) {
    let pin = cluster::logged_fingerprint(&rig.dir.join("scheduler.log")).expect("certificate");
    let mut c = Command::new(cluster::scheduler_bin());
    c.arg("ctl")
        .arg(format!(
            "-url={}",
            rig.base.replacen("http://", "https://", 1)
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

fn host_state(rig: &PreconfigRig, n: usize) -> HostState {
    let root = host::agent_root(&rig.dir.join("mesos").join(format!("agent-{n}")));
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

fn nodes(rig: &PreconfigRig) -> Result<BTreeMap<String, Value>, String> {
    let s = devrig::json(&rig.base, "/api/state")?;
    let nodes = s["model"]["nodes"].as_object().ok_or("no nodes")?;
    Ok(nodes
        .values()
        .map(|n| (n["hostname"].as_str().unwrap_or("?").to_string(), n.clone()))
        .collect())
}

#[test]
fn restart_reinstalls_nothing_and_ctl_exits_non_zero_on_refusal() {
    let mut rig = PreconfigRig::launch(
        "e2e-restart",
        AGENTS,
        PASSWORD,
        2,
        vec!["-health.interval=1".into()],
    );
    let tasks = devrig::running_tasks(&mut rig.scheduler, &rig.dir, &rig.base, AGENTS);
    // The budget reads the gateway's data: a restart waits for a fresh, healthy poll.
    devrig::until("a healthy storage cluster", WITHIN, || {
        let h = devrig::json(&rig.base, "/api/health")?;
        (h["state"] == "healthy")
            .then_some(())
            .ok_or(format!("{h}"))
    });
    let before: Vec<HostState> = (1..=AGENTS).map(|n| host_state(&rig, n)).collect();
    let hosts: Vec<String> = tasks.keys().cloned().collect();
    let (first, second) = (&hosts[0], &hosts[1]);
    let log = || std::fs::read_to_string(rig.dir.join("scheduler.log")).unwrap_or_default();
    let walk_line = format!("{first}: phase launching -> environment");
    let walks_before = log().matches(&walk_line).count();

    let (code, out) = ctl(&rig, None, &["status"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with("plan "), "{out}");

    let token = Some(devrig::OPERATOR_TOKEN);
    let (code, out) = ctl(&rig, token, &["restart", first]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.lines().count(), 1, "one line: {out}");
    assert!(
        out.starts_with(&format!("restart {first}: accepted: ")),
        "{out}"
    );
    // The first restart holds the domain's one disruption until its node runs again.
    let (code, out) = ctl(&rig, token, &["restart", second]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.starts_with(&format!("restart {second}: refused: ")) && out.contains(first.as_str()),
        "{out}"
    );
    let (code, out) = ctl(&rig, token, &["restart", "no-such-host"]);
    assert_eq!(
        (code, out.trim()),
        (
            1,
            "restart no-such-host: unknown: no node on host no-such-host"
        )
    );
    let (code, out) = ctl(&rig, Some("not-the-operator-token"), &["pause"]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("401"), "{out}");

    // Relaunched, walked from the first phase, running again; the others untouched.
    devrig::until("the restarted node running again", WITHIN, || {
        let n = nodes(&rig)?;
        let node = &n[first.as_str()];
        let relaunched = node["task"]["task_id"] != tasks[first].as_str();
        (relaunched && node["phase"] == "running" && node["restart"].is_null())
            .then_some(())
            .ok_or(format!("{}: {} {}", first, node["phase"], node["restart"]))
    });
    assert_eq!(log().matches(&walk_line).count(), walks_before + 1);
    let n = nodes(&rig).unwrap();
    for h in hosts.iter().filter(|h| *h != first) {
        assert_eq!(n[h.as_str()]["task"]["task_id"], tasks[h].as_str(), "{h}");
    }
    for (i, was) in before.iter().enumerate() {
        let now = host_state(&rig, i + 1);
        let since: Vec<&Vec<String>> = now.history[was.history.len()..]
            .iter()
            .map(|inv| &inv.argv)
            .collect();
        let bad: Vec<_> = since.iter().filter(|a| disruptive(a)).collect();
        assert!(bad.is_empty(), "{} ran {bad:?}", now.hostname);
        if now.hostname == *first {
            // It looked: the packages' phase queried the package database again.
            let queried = since.iter().any(|a| {
                a.first().is_some_and(|c| c == "dpkg-query")
                    || a.starts_with(&["rpm".to_string(), "-q".to_string()])
            });
            assert!(queried, "{first} checked no package: {since:?}");
        }
        assert_eq!(now.boots, was.boots, "{} rebooted", now.hostname);
        assert_eq!(now.packages, was.packages, "{}", now.hostname);
        for (name, s) in &now.services {
            assert_eq!(
                s.running, was.services[name].running,
                "{}: {name}",
                now.hostname
            );
        }
    }
    let events = devrig::control_json(&rig.control, "GET", "/control/gateway/events");
    assert_eq!(events["data_unavailable"], 0, "{events}");

    // Once it runs, the second may restart; the events list both outcomes.
    let (code, out) = ctl(&rig, token, &["restart", second]);
    assert_eq!(code, 0, "{out}");
    let (code, out) = ctl(&rig, None, &["events"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("action restart {first}: accepted: ")),
        "{out}"
    );
    assert!(
        out.contains(&format!("action restart {second}: refused: ")),
        "{out}"
    );
}
