//! `-loglevel` speaks for the scheduler only: at the app definition's `-loglevel=debug` its
//! dependencies (ureq, rustls) stay at warn, so their per-request debug lines are absent,
//! while `RUST_LOG` still brings them back for whoever asks.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{free_port, scheduler_args, scheduler_bin, wait_for};
use devcluster::master;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The target of each env_logger line (`[time LEVEL target] message`), with its level.
fn targets(log: &str) -> Vec<(String, String)> {
    log.lines()
        .filter_map(|l| l.strip_prefix('[')?.split_once(']'))
        .filter_map(|(head, _)| {
            let mut f = head.split_whitespace().skip(1);
            Some((f.next()?.to_string(), f.next()?.to_string()))
        })
        .collect()
}

/// Runs the scheduler at -loglevel=debug until it has checked the storage gateway over TLS
/// and subscribed, and returns its log.
fn debug_run(dir: &Path, rust_log: Option<&str>) -> String {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("dir");
    let m = master::start(master::MasterConfig {
        agents: 0,
        synthetic_agents: 2,
        work_dir: dir.join("mesos"),
        ..Default::default()
    })
    .expect("dev cluster");
    let log_path = dir.join("scheduler.log");
    let args = scheduler_args(
        &m.addr().to_string(),
        free_port(),
        &dir.join("state"),
        "Scaleio123",
    );
    assert_eq!(args[0], "-loglevel=debug");
    let mut cmd = Command::new(scheduler_bin());
    cmd.args(&args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).expect("log"));
    if let Some(v) = rust_log {
        cmd.env("RUST_LOG", v);
    }
    let _child = cluster::KillOnDrop(cmd.spawn().expect("scheduler"));
    wait_for(
        "the scheduler to subscribe",
        Duration::from_secs(60),
        || {
            let log = std::fs::read_to_string(&log_path).ok()?;
            log.contains("subscribed as framework").then_some(())
        },
    );
    drop(_child);
    std::fs::read_to_string(&log_path).expect("log")
}

fn dependency_lines(log: &str) -> Vec<(String, String)> {
    targets(log)
        .into_iter()
        .filter(|(_, t)| t.starts_with("ureq") || t.starts_with("rustls"))
        .collect()
}

#[test]
fn dependency_debug_lines_are_absent_at_loglevel_debug_unless_rust_log_asks() {
    let dir = std::env::temp_dir().join(format!("log-filter-{}", std::process::id()));
    let log = debug_run(&dir.join("plain"), None);
    let ours = targets(&log)
        .into_iter()
        .filter(|(l, t)| l == "DEBUG" && t.starts_with("storage_"))
        .count();
    assert!(
        ours > 0,
        "no debug line of our own at -loglevel=debug:\n{log}"
    );
    let deps = dependency_lines(&log);
    assert!(
        deps.is_empty(),
        "dependency lines at -loglevel=debug: {deps:?}"
    );

    // The gateway check went over TLS: with RUST_LOG asking, both crates speak again.
    let log = debug_run(&dir.join("asked"), Some("ureq=debug,rustls=debug"));
    for krate in ["ureq", "rustls"] {
        assert!(
            dependency_lines(&log)
                .iter()
                .any(|(_, t)| t.starts_with(krate)),
            "RUST_LOG brought no {krate} line back:\n{log}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
