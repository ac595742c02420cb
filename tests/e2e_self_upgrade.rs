//! The framework upgrades itself: `scripts/deploy.sh` deploys the scheduler through the dev
//! launcher, every agent reaches `running`; then deploy.sh deploys a new build, which the
//! launcher already holds (409), so deploy.sh updates the app (PUT) and says so. The launcher
//! restarts the scheduler with the new definition; the new scheduler takes over the stored
//! state and replaces every executor of the older binary, one at a time, and no host sees a
//! storage service stopped, a package installed again or a reboot.
//!
//! The new build differs from the old in the executor binary's SHA-256: it is the dev executor
//! with bytes appended. That is a runnable binary: the ELF loader maps only what the program
//! headers name, and nothing names bytes past the end of the file as built, so the appended
//! ones are never read; the fetched file is checked against its own SHA-256 before it runs,
//! as any build's is. The scheduler binary is the same in both builds; its definition changes
//! (the executor's URL), which is what makes the launcher restart it.
//!
//! The binaries are the dev builds (not `build-release.sh`'s): the app's `mem` is raised for
//! an unoptimised scheduler accordingly.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{executor_bin, scheduler_bin, sha256_of, stage_packages, wait_for};
use devcluster::host::{self, FakeRoot, HostState};
use devcluster::{control, launcher, master};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const PASSWORD: &str = "Scaleio123";
const AGENTS: usize = 3;
const SETTLE: Duration = Duration::from_secs(180);

/// Serves `files` (URL path -> file) over HTTP from loopback; the base URL.
fn serve(files: BTreeMap<String, PathBuf>) -> (String, Arc<tiny_http::Server>) {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("file server"));
    let addr = server.server_addr().to_ip().expect("ip");
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.recv() {
            let file = files
                .get(req.url())
                .and_then(|f| std::fs::File::open(f).ok());
            let _ = match file {
                Some(f) => req.respond(tiny_http::Response::from_file(f)),
                None => req.respond(tiny_http::Response::empty(404)),
            };
        }
    });
    (format!("http://{addr}"), server)
}

/// The custom definition deploy.sh ships, its binaries at `base`, with room for a dev build.
fn definition(dir: &Path, name: &str, base: &str) -> PathBuf {
    let template =
        std::fs::read_to_string(Path::new(ROOT).join("packaging/storage-scheduler-custom.json"))
            .expect("packaging/storage-scheduler-custom.json");
    let mut app: Value = serde_json::from_str(&template.replace("{custom_binary_url}", base))
        .expect("the custom definition is JSON");
    app["mem"] = 256.into();
    let file = dir.join(format!("{name}.json"));
    std::fs::write(&file, app.to_string()).unwrap();
    file
}

fn deploy(args: &[String]) -> Output {
    Command::new(Path::new(ROOT).join("scripts/deploy.sh"))
        .args(args)
        .env("STORAGE_GATEWAY_PASSWORD", PASSWORD)
        .env_remove("STORAGE_LAUNCHER")
        .env_remove("STORAGE_MASTER")
        .output()
        .expect("run deploy.sh")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn get_json(url: &str) -> Option<Value> {
    let body = ureq::get(url)
        .call()
        .ok()?
        .into_body()
        .read_to_string()
        .ok()?;
    serde_json::from_str(&body).ok()
}

/// The scheduler's nodes by host name, from `/api/state` of the scheduler the launcher runs
/// now (its port changes with each of its tasks).
fn nodes(l: &launcher::LauncherHandle) -> Option<BTreeMap<String, Value>> {
    let app = get_json(&format!("{}/v2/apps/storage-scheduler", l.url()))?;
    let tasks = app["app"]["tasks"].as_array()?;
    let [task] = tasks.as_slice() else {
        return None;
    };
    let port = task["ports"][0].as_u64()?;
    let state = get_json(&format!("http://127.0.0.1:{port}/api/state"))?;
    Some(
        state["model"]["nodes"]
            .as_object()?
            .values()
            .map(|n| (n["hostname"].as_str().unwrap_or("").to_string(), n.clone()))
            .collect(),
    )
}

/// The framework id the scheduler the launcher runs now knows.
fn framework_id(l: &launcher::LauncherHandle) -> Option<String> {
    let app = get_json(&format!("{}/v2/apps/storage-scheduler", l.url()))?;
    let port = app["app"]["tasks"][0]["ports"][0].as_u64()?;
    let state = get_json(&format!("http://127.0.0.1:{port}/api/state"))?;
    state["model"]["framework_id"].as_str().map(str::to_string)
}

/// Agents with none of our executors running a task (relaunching, or not yet launched).
fn agents_without_a_running_executor(m: &master::MasterHandle) -> Option<usize> {
    let snap = m.snapshot().ok()?;
    let agents = snap["agents"].as_array()?;
    Some(
        agents
            .iter()
            .filter(|a| {
                !a["executors"].as_array().is_some_and(|es| {
                    es.iter().any(|e| {
                        e["id"]
                            .as_str()
                            .unwrap_or("")
                            .starts_with("storage-executor.")
                            && e["tasks"]
                                .as_array()
                                .is_some_and(|ts| ts.iter().any(|t| t["state"] == "TASK_RUNNING"))
                    })
                })
            })
            .count(),
    )
}

fn host_state(work: &Path, n: usize) -> HostState {
    FakeRoot::open(&host::agent_root(&work.join(format!("agent-{n}"))))
        .unwrap()
        .state()
        .unwrap()
}

/// A host command that stops a service, installs a package or reboots.
fn disruptive(argv: &[String]) -> bool {
    let a: Vec<&str> = argv.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["systemctl", verb, ..] | ["service", _, verb, ..] => {
            matches!(*verb, "stop" | "restart")
        }
        ["dpkg", "-i", ..] | ["rpm", "-i" | "-ivh" | "-Uvh" | "-U", ..] => true,
        ["yum" | "apt-get", rest @ ..] => rest.contains(&"install"),
        ["reboot", ..] | ["shutdown", ..] => true,
        _ => false,
    }
}

#[test]
fn deploy_updates_the_app_and_executors_are_replaced_one_at_a_time() {
    let dir = std::env::temp_dir().join(format!("e2e-self-upgrade-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let work = dir.join("mesos");
    let listener = control::bind(0).unwrap();
    let m = Arc::new(
        master::start(master::MasterConfig {
            agents: AGENTS,
            heartbeat_interval: Duration::from_secs(1),
            work_dir: work.clone(),
            status_update_retry: Duration::from_secs(1),
            host_standins: Some(cluster::host_standins(Some(listener.url()))),
            ..Default::default()
        })
        .expect("dev cluster"),
    );
    // The test's own gateway: SDC stand-ins register with it through the control API.
    let gateway = Arc::new(
        devcluster::gateway::start(devcluster::gateway::GatewayConfig::new(
            PASSWORD,
            cluster::dev_mdms(),
        ))
        .expect("dev gateway"),
    );
    let gateway_addr = gateway.addr().to_string();
    let _control = listener
        .serve(control::Targets {
            master: m.clone(),
            gateway: Some(gateway),
        })
        .unwrap();
    let l = launcher::start(launcher::LauncherConfig {
        work_dir: dir.join("launcher"),
        ..Default::default()
    })
    .expect("launcher");
    let (package_flags, _packages) = stage_packages(&dir.join("packages"));

    // Two builds: the same scheduler, the executor with bytes appended in the second.
    let new_executor = dir.join("storage-executor-v2");
    let mut bytes = std::fs::read(executor_bin()).unwrap();
    bytes.extend_from_slice(b"\nstorage-executor build 2\n");
    std::fs::write(&new_executor, bytes).unwrap();
    let (old_sha, new_sha) = (sha256_of(&executor_bin()), sha256_of(&new_executor));
    assert_ne!(old_sha, new_sha);
    let (base, _files) = serve(BTreeMap::from([
        ("/v1/storage-scheduler".to_string(), scheduler_bin()),
        ("/v1/storage-executor".to_string(), executor_bin()),
        ("/v2/storage-scheduler".to_string(), scheduler_bin()),
        ("/v2/storage-executor".to_string(), new_executor),
    ]));
    let store = dir.join("state").join("storage-scheduler-state.json");
    let args = |build: &str| -> Vec<String> {
        let mut a: Vec<String> = [
            "--definition",
            definition(&dir, build, &format!("{base}/{build}"))
                .to_str()
                .unwrap(),
            "--launcher",
            &l.addr().to_string(),
            "--master",
            &m.addr().to_string(),
            "--pd",
            "default",
            "--pool",
            "default",
            "--primary",
            "127.0.0.1",
            "--secondary",
            "127.0.0.2",
            "--tiebreaker",
            "127.0.0.3",
            "--gateway",
            &gateway_addr,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // The state outlives the scheduler's sandbox: each launcher task gets a new one.
        for flag in [format!("-store.uri={}", store.display())]
            .into_iter()
            .chain(package_flags.iter().cloned())
        {
            a.extend(["--flag".to_string(), flag]);
        }
        a
    };

    let out = deploy(&args("v1"));
    assert!(out.status.success(), "deploy.sh v1:\n{}", text(&out));
    assert!(text(&out).contains("answered 201"), "{}", text(&out));
    let before = wait_for("every node running on build 1", SETTLE, || {
        let n = nodes(&l)?;
        (n.len() == AGENTS
            && n.values()
                .all(|n| n["phase"] == "running" && n["executor_sha256"] == old_sha.as_str()))
        .then_some(n)
    });
    let history: Vec<usize> = (1..=AGENTS)
        .map(|i| host_state(&work, i).history.len())
        .collect();
    let boots: Vec<u32> = (1..=AGENTS).map(|i| host_state(&work, i).boots).collect();
    let running: Vec<BTreeMap<String, bool>> = (1..=AGENTS)
        .map(|i| {
            let h = host_state(&work, i);
            h.services
                .iter()
                .map(|(n, s)| (n.clone(), s.running))
                .collect()
        })
        .collect();
    let framework = framework_id(&l);
    assert!(framework.is_some());
    let first_app = get_json(&format!("{}/v2/apps/storage-scheduler", l.url())).unwrap();
    let first_task = first_app["app"]["tasks"][0]["id"].clone();

    // The app exists: deploy.sh updates it and says so, with the deployment's id.
    let out = deploy(&args("v2"));
    let said = text(&out);
    assert!(out.status.success(), "deploy.sh v2:\n{said}");
    let line = said
        .lines()
        .find(|l| l.contains("updated the existing app /storage-scheduler"))
        .unwrap_or_else(|| panic!("no update line:\n{said}"));
    assert!(
        line.contains("deploymentId ") && !line.contains("deploymentId ?"),
        "{line}"
    );
    assert!(!said.contains(PASSWORD), "{said}");

    // Replaced one at a time: at no poll two of our agents without a running executor, nor
    // two nodes with a replacement under way; none fails.
    let mut replaced_order: Vec<String> = Vec::new();
    let mut most_down = 0;
    let after = wait_for("every node running on build 2", SETTLE, || {
        let down = agents_without_a_running_executor(&m)?;
        most_down = most_down.max(down);
        assert!(
            down <= 1,
            "{down} agents without a running executor at once"
        );
        let n = nodes(&l)?;
        let under_way: Vec<&String> = n
            .iter()
            .filter(|(_, v)| !v["replacing"].is_null())
            .map(|(h, _)| h)
            .collect();
        assert!(
            under_way.len() <= 1,
            "replacements under way at once: {under_way:?}"
        );
        for (h, v) in &n {
            assert!(
                v["replacing"]["failed"].is_null(),
                "{h}: {}",
                v["replacing"]
            );
        }
        if let Some(h) = under_way.first() {
            if replaced_order.last() != Some(*h) {
                replaced_order.push(h.to_string());
            }
        }
        (n.len() == AGENTS
            && n.values().all(|v| {
                v["phase"] == "running"
                    && v["executor_sha256"] == new_sha.as_str()
                    && v["replacing"].is_null()
            }))
        .then_some(n)
    });
    eprintln!("replacements seen under way, in order: {replaced_order:?}; most agents down at once: {most_down}");

    // The new scheduler took over: the same nodes, each relaunched once, none redoing a phase.
    assert_eq!(
        before.keys().collect::<BTreeSet<_>>(),
        after.keys().collect::<BTreeSet<_>>()
    );
    for (h, v) in &after {
        assert_ne!(
            v["task"]["task_id"], before[h]["task"]["task_id"],
            "{h} not relaunched"
        );
        assert_eq!(v["agent_id"], before[h]["agent_id"], "{h}");
    }
    assert_eq!(
        framework_id(&l),
        framework,
        "the same framework, its state taken over"
    );
    let app = get_json(&format!("{}/v2/apps/storage-scheduler", l.url())).unwrap();
    let tasks = app["app"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "one scheduler: {tasks:?}");
    assert_ne!(tasks[0]["id"], first_task, "the scheduler was restarted");
    assert!(
        app["app"]["fetch"][1]["uri"]
            .as_str()
            .is_some_and(|u| u.ends_with("/v2/storage-executor")),
        "{}",
        app["app"]["fetch"]
    );

    // No storage service stopped, no package installed again, no reboot.
    for i in 1..=AGENTS {
        let h = host_state(&work, i);
        let since: Vec<&Vec<String>> = h.history[history[i - 1]..]
            .iter()
            .map(|inv| &inv.argv)
            .collect();
        let bad: Vec<_> = since.iter().filter(|a| disruptive(a)).collect();
        assert!(bad.is_empty(), "agent-{i} after the update ran {bad:?}");
        assert_eq!(h.boots, boots[i - 1], "agent-{i} rebooted");
        for (name, service) in &h.services {
            assert_eq!(
                service.running,
                running[i - 1][name],
                "agent-{i}: service {name} running before the update, not after"
            );
        }
    }
    drop(l);
    let _ = std::fs::remove_dir_all(&dir);
}
