//! The `storage-devcluster` command: help, addresses on startup, the ready file, and a clean
//! stop on SIGTERM that keeps a named work dir's sandboxes.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_storage-devcluster");

#[test]
fn help_lists_the_options() {
    let out = Command::new(BIN).arg("--help").output().expect("run");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for opt in [
        "--agents",
        "--synthetic-agents",
        "--ready-file",
        "--attributes",
        "--empty-gateway",
        "--agent-ping-timeout",
        "--reboot-outage",
        "--rebuild-seconds",
    ] {
        assert!(text.contains(opt), "--help lacks {opt}:\n{text}");
    }
    let bad = Command::new(BIN).arg("--agnets=3").output().expect("run");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--agnets"));
    for (flag, value) in [
        ("--agent-ping-timeout", "0"),
        ("--reboot-outage", "soon"),
        ("--rebuild-seconds", "-2"),
    ] {
        let bad = Command::new(BIN).args([flag, value]).output().expect("run");
        assert_eq!(bad.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(err.contains(flag) && err.contains(value), "{err}");
    }
}

#[test]
fn ready_file_then_clean_stop_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("devcluster-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ready = dir.join("ready.json");
    let mut child = Command::new(BIN)
        .args(["--agents", "2", "--synthetic-agents", "3", "--work-dir"])
        .arg(dir.join("work"))
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "no ready file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&ready).unwrap()).expect("ready file is JSON");
    for key in ["master", "standby_master", "launcher", "gateway", "control"] {
        assert!(
            doc[key].as_str().is_some_and(|v| !v.is_empty()),
            "{key} missing: {doc}"
        );
    }
    // What it serves answers: the master's /version.
    let version: serde_json::Value = serde_json::from_str(
        &ureq::get(&format!(
            "http://{}/version",
            doc["master"].as_str().unwrap()
        ))
        .call()
        .expect("master answers")
        .into_body()
        .read_to_string()
        .unwrap(),
    )
    .unwrap();
    assert!(version["version"]
        .as_str()
        .is_some_and(|v| v.starts_with("1.")));

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit}");
    // The work dir was named: the agents' sandboxes outlive the stop, for inspection.
    assert!(
        dir.join("work/mesos").is_dir(),
        "agent sandboxes removed from a named --work-dir"
    );
    let mut out = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    assert!(
        out.contains("master") && out.contains("agent-1") && out.contains("synthetic agents 3"),
        "{out}"
    );
}
