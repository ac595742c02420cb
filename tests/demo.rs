//! `scripts/demo.sh`, the README's run command: it deploys through the dev cluster's launcher,
//! follows the rollout, and stops everything it started, whether it ends by itself
//! (`--exit-when-ready`) or by Ctrl-C.
//!
//! Until the executor and gateway work lets nodes reach `running`, `--exit-when-ready` ends
//! at its timeout, non-zero, naming the phase the nodes are stuck in; once they can, it exits
//! 0 with the status URL and the ready file. Both outcomes are checked for what they promise.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{executor_bin, scheduler_bin, wait_for};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const PHASES: [&str; 12] = [
    "launching",
    "environment",
    "reboot-prerequisites",
    "packages",
    "devices",
    "cluster-init",
    "storage-attach",
    "volume-driver",
    "reboot-final",
    "running",
    "failed",
    "lost",
];

/// The binaries demo.sh needs, all built into the scheduler's target directory.
fn bin_dir() -> PathBuf {
    executor_bin();
    let dir = scheduler_bin().parent().unwrap().to_path_buf();
    for b in ["storage-devcluster", "storage-host-standin"] {
        assert!(
            dir.join(b).exists(),
            "{b} missing in {}: cargo build --workspace (scripts/test.sh does)",
            dir.display()
        );
    }
    dir
}

fn work_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("demo-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Processes started for the demo: their command line names its work dir, or they run in it.
fn processes_under(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let cwd = std::fs::read_link(entry.path().join("cwd")).unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cwd.starts_with(dir) || cmdline.contains(&needle) {
            found.push(format!("{name}: {cmdline}"));
        }
    }
    found
}

fn demo(work: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/demo.sh"));
    c.arg("--bin-dir")
        .arg(bin_dir())
        .arg("--work-dir")
        .arg(work.join("run"))
        .args(extra);
    c
}

fn exit_when_ready(mode: &str, extra: &[&str]) {
    let work = work_dir(mode);
    let ready = work.join("ready.json");
    let mut args = vec![
        "--agents",
        "3",
        "--exit-when-ready",
        "--timeout",
        "20",
        "--ready-file",
        ready.to_str().unwrap(),
    ];
    args.extend(extra);
    let out = demo(&work, &args).output().expect("run demo.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);

    // Whatever the outcome: nothing it started is left running.
    let left = processes_under(&work);
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
    // It deployed through the launcher with deploy.sh.
    assert!(
        stderr.contains("deploy.sh: the launcher answered 201"),
        "{stderr}"
    );

    if out.status.success() {
        assert!(stdout.contains("status page: http://"), "{stdout}");
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&ready).expect("ready file")).unwrap();
        for key in ["scheduler", "master", "launcher", "gateway", "control"] {
            assert!(doc[key].is_string(), "{key} missing: {doc}");
        }
        assert_eq!(doc["agents"].as_array().map(Vec::len), Some(3));
        assert_eq!(stdout.matches(" running ").count(), 3, "{stdout}");
    } else {
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let line = stderr
            .lines()
            .find(|l| l.contains("not ready:") || l.contains("rollout failed:"))
            .unwrap_or_else(|| panic!("no reason given:\n{stderr}"));
        if let Some((_, rest)) = line.split_once("stuck in phase ") {
            let phase = rest.split([' ', ',']).next().unwrap();
            assert!(
                PHASES.contains(&phase) && phase != "running",
                "{phase}: {line}"
            );
        } else {
            assert!(line.contains("rollout failed:"), "{line}");
        }
        assert!(!ready.exists(), "no ready file unless every node runs");
        // The logs stay for whoever has to find out why.
        assert!(work.join("run/devcluster.log").is_file());
    }
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn exit_when_ready_reports_the_outcome_and_cleans_up() {
    exit_when_ready("preconfigured", &[]);
}

#[test]
fn experimental_mode_reports_the_outcome_and_cleans_up() {
    exit_when_ready("experimental", &["--experimental"]);
}

/// Ctrl-C (SIGINT to the foreground process group) stops everything the demo started.
#[test]
fn ctrl_c_stops_everything() {
    let work = work_dir("ctrl-c");
    let mut child = demo(&work, &["--agents", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("run demo.sh");
    // Up: the launcher has started the scheduler and the scheduler its executors.
    wait_for(
        "the scheduler and executors running under the demo",
        Duration::from_secs(60),
        || {
            let procs = processes_under(&work);
            let executors = procs
                .iter()
                .filter(|p| p.contains("storage-executor"))
                .count();
            (procs.iter().any(|p| p.contains("./storage-scheduler")) && executors >= 2)
                .then_some(())
        },
    );
    let pgid = format!("-{}", child.id());
    let killed = Command::new("kill")
        .args(["-INT", "--", &pgid])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = wait_for("demo.sh to exit", Duration::from_secs(30), || {
        child.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(130), "exit status after Ctrl-C");
    let left = processes_under(&work);
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
    let _ = std::fs::remove_dir_all(&work);
}

// ---- the follower's decisions (scripts/demo_follow.py) against a fake launcher and scheduler

/// Serves the launcher's app (its task on this server's own port) and `/api/state` = `state`.
fn fake_launcher_and_scheduler(
    state: serde_json::Value,
) -> (String, std::sync::Arc<tiny_http::Server>) {
    let server = std::sync::Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
    let addr = server.server_addr().to_ip().unwrap();
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.recv() {
            let body = match req.url() {
                "/v2/apps/storage-scheduler" => {
                    serde_json::json!({"app": {"id": "/storage-scheduler",
                    "tasks": [{"state": "TASK_RUNNING", "host": "127.0.0.1", "ports": [addr.port()]}]}})
                }
                "/api/state" => state.clone(),
                _ => {
                    let _ = req.respond(tiny_http::Response::empty(404));
                    continue;
                }
            };
            let _ = req.respond(tiny_http::Response::from_string(body.to_string()));
        }
    });
    (addr.to_string(), server)
}

fn node(host: &str, phase: &str, attached: &[&str], error: Option<&str>) -> serde_json::Value {
    serde_json::json!({"hostname": host, "persona": "data", "phase": phase,
        "devices": ["/dev/sdb", "/dev/sdc"], "attached": attached, "last_error": error})
}

fn follower(args: &[&str]) -> (String, String) {
    let out = Command::new("python3")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/demo_follow.py"
        ))
        .args(args)
        .output()
        .expect("python3");
    assert!(out.status.success(), "{out:?}");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn follower_reports_ready_with_a_summary_and_ready_file() {
    let state = serde_json::json!({"subscribed": true, "model": {"nodes": {
        "a1": node("agent-1", "running", &["/dev/sdb", "/dev/sdc"], None),
        "a2": node("agent-2", "running", &["/dev/sdb"], None),
    }}});
    let (launcher, _s) = fake_launcher_and_scheduler(state);
    let (stdout, stderr) = follower(&["follow", &launcher, "2", "10", "0"]);
    let url = format!("http://{launcher}");
    assert_eq!(stdout.trim(), format!("ready {url}"), "{stderr}");
    assert!(stderr.contains("nodes 2/2: running 2"), "{stderr}");

    let (summary, _) = follower(&["summary", &url]);
    let rows: Vec<&str> = summary.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{summary}");
    assert!(
        rows[0].starts_with("agent-1") && rows[0].contains(" running ") && rows[0].contains("2/2")
    );
    assert!(rows[1].starts_with("agent-2") && rows[1].contains("1/2 /dev/sdb"));

    let dir = work_dir("ready-file");
    let dc = dir.join("devcluster.json");
    std::fs::write(
        &dc,
        r#"{"master": "127.0.0.1:5050", "launcher": "127.0.0.1:8080", "agents": []}"#,
    )
    .unwrap();
    let ready = dir.join("ready.json");
    follower(&[
        "ready-file",
        dc.to_str().unwrap(),
        &url,
        ready.to_str().unwrap(),
    ]);
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ready).unwrap()).unwrap();
    assert_eq!(doc["scheduler"], url.as_str());
    assert_eq!(doc["master"], "127.0.0.1:5050");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn follower_names_failed_nodes_and_stuck_phases() {
    let state = serde_json::json!({"subscribed": true, "model": {"nodes": {
        "a1": node("agent-1", "running", &[], None),
        "a2": node("agent-2", "failed", &[], Some("packages: EMC-ScaleIO-sds: download failed (404)")),
        "a3": node("agent-3", "packages", &[], None),
    }}});
    let (launcher, _s) = fake_launcher_and_scheduler(state);
    let (stdout, _) = follower(&["follow", &launcher, "3", "10", "0"]);
    assert_eq!(
        stdout.trim(),
        "failed 1 node(s) failed: agent-2: packages: EMC-ScaleIO-sds: download failed (404)"
    );

    let state = serde_json::json!({"subscribed": true, "model": {"nodes": {
        "a1": node("agent-1", "storage-attach", &[], None),
        "a2": node("agent-2", "environment", &[], None),
        "a3": node("agent-3", "environment", &[], None),
    }}});
    let (launcher, _s) = fake_launcher_and_scheduler(state);
    let (stdout, _) = follower(&["follow", &launcher, "3", "1", "0"]);
    assert_eq!(
        stdout.trim(),
        "timeout after 1 s, 2 of 3 nodes are stuck in phase environment, 1 in storage-attach"
    );
}
