//! `cargo bench --bench node`: one node's install on the dev cluster.
//!
//! - `node_install_seconds`: from the scheduler's launch of the node's task to the node in
//!   phase `running`, on a RHEL 7 host stand-in whose commands take no time: the framework's
//!   own overhead (fetch, subscribe, plan, reports, downloads over loopback). Target <= 1 s.
//! - `executor_peak_rss_mb`: the executor's peak resident memory (`VmHWM`) after that full
//!   install. Target <= 10 MB, goal 6.

#[path = "../support/cluster.rs"]
mod cluster;

use devcluster::master;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `pid` or its first descendant whose command is `storage-executor`.
fn executor_pid(pid: u64) -> Option<u64> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    if comm.trim().starts_with("storage-execut") {
        return Some(pid);
    }
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children
        .split_whitespace()
        .filter_map(|c| c.parse().ok())
        .find_map(executor_pid)
}

fn main() {
    let dir = std::env::temp_dir().join(format!("bench-node-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The node's SDC stand-in registers with a dev gateway through the control API, as
    // `storage-attach` needs (see tests/e2e_node.rs' rig).
    let listener = devcluster::control::bind(0).expect("control API");
    let m = Arc::new(
        master::start(master::MasterConfig {
            agents: 1,
            heartbeat_interval: Duration::from_secs(1),
            work_dir: dir.join("mesos"),
            host_standins: Some(cluster::host_standins(Some(listener.url()))),
            ..Default::default()
        })
        .expect("dev cluster"),
    );
    let gateway = Arc::new(
        devcluster::gateway::start(devcluster::gateway::GatewayConfig::new(
            "Scaleio123",
            cluster::dev_mdms(),
        ))
        .expect("dev gateway"),
    );
    let gateway_addr = gateway.addr();
    let _control = listener
        .serve(devcluster::control::Targets {
            master: m.clone(),
            gateway: Some(gateway),
        })
        .expect("control API");
    let port = cluster::free_port();
    let mut args = cluster::scheduler_args(
        &m.addr().to_string(),
        port,
        &dir.join("state.json"),
        "Scaleio123",
    );
    args[0] = "-loglevel=info".to_string();
    // The shipped binaries: the static musl scheduler serving the static musl executor.
    let executor = cluster::release_artifact("storage-executor");
    for a in args.iter_mut() {
        if a.starts_with("-storage.preconfig.gateway=") {
            *a = format!("-storage.preconfig.gateway={gateway_addr}");
        } else if a.starts_with("-executor.altpath=") {
            *a = format!("-executor.altpath={}", executor.display());
        }
    }
    let scheduler = cluster::release_artifact("storage-scheduler");
    println!(
        "bench_binary {} and {} (static musl)",
        scheduler.display(),
        executor.display()
    );
    let (flags, _packages) = cluster::stage_packages(&dir.join("packages"));
    args.extend(flags);
    let mut child = Command::new(&scheduler)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("scheduler");
    let state = || -> Option<serde_json::Value> {
        let body = ureq::get(&format!("http://127.0.0.1:{port}/api/state"))
            .call()
            .ok()?
            .into_body()
            .read_to_string()
            .ok()?;
        serde_json::from_str(&body).ok()
    };
    let (launched, running) =
        cluster::wait_for("the node running", Duration::from_secs(60), || {
            let s = state()?;
            let node = s["model"]["nodes"].as_object()?.values().next()?.clone();
            let seen = now_ms();
            (node["phase"] == "running").then(|| (node["task"]["launched_at_ms"].as_u64(), seen))
        });
    let launched = launched.expect("launch time");
    println!(
        "bench node_install_seconds {:.3} s",
        running.saturating_sub(launched) as f64 / 1000.0
    );
    let snap = m.snapshot().expect("snapshot");
    let pid = snap["agents"][0]["executors"][0]["pid"]
        .as_u64()
        .expect("executor pid");
    // The agent may start it through `sh -c`: measure the executor itself, not the shell.
    let pid = executor_pid(pid).expect("the storage-executor process");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("executor status");
    let hwm_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM");
    println!(
        "bench executor_peak_rss_mb {:.1} MB",
        hwm_kb as f64 / 1024.0
    );
    let _ = child.kill();
    let _ = child.wait();
    // The control API holds the master too; dropping both stops the dev cluster.
    drop(_control);
    drop(m);
    let _ = std::fs::remove_dir_all(&dir);
}
