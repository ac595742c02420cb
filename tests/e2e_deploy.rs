//! The operator's path, end to end, with what ships: `scripts/deploy.sh` posts the app
//! definition to the Marathon-compatible launcher, which fetches the static musl binaries
//! `scripts/build-release.sh` made and starts the scheduler with `$PORT` under the app's
//! `mem` and `cpus`, enforced as Mesos' isolators would; the scheduler then puts an executor
//! on every agent. A scheduler that outgrew its 32 MB would be OOM-killed here, as in
//! production, and fail this test.

#[path = "support/cluster.rs"]
mod cluster;

use cluster::{release_artifact, wait_for};
use devcluster::{launcher, master};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// Serves the two release binaries as `{base}/storage-scheduler` and `{base}/storage-executor`.
fn serve_binaries() -> (String, Arc<tiny_http::Server>) {
    let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("file server"));
    let addr = server.server_addr().to_ip().expect("ip");
    let (sched, exec) = (
        release_artifact("storage-scheduler"),
        release_artifact("storage-executor"),
    );
    let s = server.clone();
    std::thread::spawn(move || {
        while let Ok(req) = s.recv() {
            let file = match req.url() {
                "/v9.9.9/storage-scheduler" => Some(&sched),
                "/v9.9.9/storage-executor" => Some(&exec),
                _ => None,
            };
            let _ = match file.and_then(|f| std::fs::File::open(f).ok()) {
                Some(f) => req.respond(tiny_http::Response::from_file(f)),
                None => req.respond(tiny_http::Response::empty(404)),
            };
        }
    });
    (format!("http://{addr}/v9.9.9"), server)
}

#[test]
fn deploy_script_brings_up_scheduler_and_executors() {
    let dir = std::env::temp_dir().join(format!("e2e-deploy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let m = master::start(master::MasterConfig {
        agents: 3,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        ..Default::default()
    })
    .expect("master");
    let l = launcher::start(launcher::LauncherConfig {
        work_dir: dir.join("launcher"),
        ..Default::default()
    })
    .expect("launcher");
    let (base, _files) = serve_binaries();

    let deploy = |extra: &[&str]| {
        Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/deploy.sh"))
            .args([
                "--launcher",
                &l.addr().to_string(),
                "--master",
                &m.addr().to_string(),
                "--base",
                &base,
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
                "127.0.0.1",
            ])
            .args(extra)
            .env("STORAGE_GATEWAY_PASSWORD", "Scaleio123")
            .output()
            .expect("run deploy.sh")
    };
    let out = deploy(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "deploy.sh failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("created (201)"), "{stdout}");
    assert!(!stdout.contains("Scaleio123") && !stderr.contains("Scaleio123"));

    // The launcher runs the scheduler; the scheduler covers every agent.
    wait_for(
        "an executor running on each of the 3 agents",
        Duration::from_secs(90),
        || {
            let snap = m.snapshot().ok()?;
            let agents = snap["agents"].as_array()?;
            let covered = agents
                .iter()
                .filter(|a| {
                    a["executors"].as_array().is_some_and(|es| {
                        es.iter().any(|e| {
                            e["id"]
                                .as_str()
                                .unwrap_or("")
                                .starts_with("storage-executor.")
                                && e["tasks"].as_array().is_some_and(|ts| {
                                    ts.iter().any(|t| t["state"] == "TASK_RUNNING")
                                })
                        })
                    })
                })
                .count();
            (covered == 3).then_some(())
        },
    );

    // Under its limits all along: the first scheduler task still runs, none ever failed.
    let app = launcher_app(&l);
    assert!(
        app["lastTaskFailure"].is_null(),
        "the scheduler task failed: {}",
        app["lastTaskFailure"]
    );
    assert_eq!(app["tasks"].as_array().map(Vec::len), Some(1), "{app}");
    let stats = ureq::get(&format!("{}/monitor/statistics", l.url()))
        .call()
        .expect("statistics")
        .into_body()
        .read_to_string()
        .expect("statistics body");
    let stats: serde_json::Value = serde_json::from_str(&stats).expect("statistics JSON");
    let s = &stats[0]["statistics"];
    assert_eq!(s["mem_limit_bytes"], 32 * 1024 * 1024, "{stats}");
    eprintln!(
        "scheduler under the launcher: max RSS {} bytes, {} of {} periods throttled",
        s["mem_max_rss_bytes"], s["cpus_nr_throttled"], s["cpus_nr_periods"]
    );

    // Posting the same app again is refused, as Marathon does.
    let again = deploy(&[]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("409"));
    drop(l);
    drop(m);
}

fn launcher_app(l: &launcher::LauncherHandle) -> serde_json::Value {
    let body = ureq::get(&format!("{}/v2/apps/storage-scheduler", l.url()))
        .call()
        .expect("GET the app")
        .into_body()
        .read_to_string()
        .expect("app body");
    serde_json::from_str::<serde_json::Value>(&body).expect("app JSON")["app"].clone()
}
