//! `cargo bench --bench host_health`: what keeping an eye on its host costs a running node's
//! executor on the wire.
//!
//! - `executor_health_bytes_per_hour`: the bytes one idle running node's executor exchanges
//!   with the scheduler (both directions, TLS records and handshakes included) in an hour at
//!   the default `-health.stale` of 180 s, which has an idle executor ask for its plan every
//!   60 s (`nudge=1`, each on a new connection; it checks its host in between and reports
//!   nothing unchanged). Counted by a TCP proxy between the two (the scheduler tells
//!   executors the proxy's address) over a window of requests made every 5 s (`-health.stale`
//!   of 15 s), per request (the scheduler's count of 304 answers), times the 60 of an hour.
//!   Target 100,000, goal 50,000.

#[path = "../support/cluster.rs"]
mod cluster;
#[path = "../support/proxy.rs"]
mod proxy;

use devcluster::master;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// An idle executor's plan requests at the default `-health.stale`, which the hour is made of.
const DEFAULT_IDLE_POLL_SECS: u64 = 60;
/// Requests measured.
const POLLS: u64 = 10;
/// The address executors are told; the proxy listens there, the scheduler on 127.0.0.1.
const ADVERTISED: &str = "127.0.0.2";

fn main() {
    let dir = std::env::temp_dir().join(format!("bench-host-health-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let listener = devcluster::control::bind(0).expect("control API");
    let mut standins = cluster::host_standins(Some(listener.url()));
    standins
        .extra_env
        .push(("STORAGE_EXECUTOR_PLAN_WAIT".into(), "1".into()));
    let m = Arc::new(
        master::start(master::MasterConfig {
            agents: 1,
            heartbeat_interval: Duration::from_secs(1),
            work_dir: dir.join("mesos"),
            host_standins: Some(standins),
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
    let control = listener
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
    for a in args.iter_mut() {
        if a.starts_with("-storage.preconfig.gateway=") {
            *a = format!("-storage.preconfig.gateway={gateway_addr}");
        } else if a.starts_with("-rest.address=") {
            *a = format!("-rest.address={ADVERTISED}");
        }
    }
    args.push("-rest.listen=127.0.0.1".to_string());
    // Idle requests every 5 s (a third of the stale bound), so that the window is short.
    args.push("-health.interval=2".to_string());
    args.push("-health.stale=15".to_string());
    let (flags, _packages) = cluster::stage_packages(&dir.join("packages"));
    args.extend(flags);
    let scheduler = cluster::scheduler_bin();
    println!(
        "bench_binary {} and {}",
        scheduler.display(),
        cluster::executor_bin().display()
    );
    let listen: SocketAddr = format!("{ADVERTISED}:{port}").parse().expect("address");
    let target: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    let wire = proxy::Proxy::start(listen, target, proxy::Tamper::default());
    let child = Command::new(&scheduler)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("scheduler");
    let _child = cluster::KillOnDrop(child);
    let local = |path: &str| -> Option<String> {
        ureq::get(&format!("http://127.0.0.1:{port}{path}"))
            .call()
            .ok()?
            .into_body()
            .read_to_string()
            .ok()
    };
    cluster::wait_for(
        "the node running and its first host report",
        Duration::from_secs(120),
        || {
            let s: serde_json::Value = serde_json::from_str(&local("/api/state")?).ok()?;
            let node = s["model"]["nodes"].as_object()?.values().next()?.clone();
            (node["phase"] == "running" && node.get("host").is_some()).then_some(())
        },
    );
    // 304 answers: the idle executor's plan polls (nothing else is answered 304).
    let polls = || -> Option<u64> {
        local("/metrics")?.lines().find_map(|l| {
            l.strip_prefix("storage_scheduler_http_responses_total{code=\"3xx\"} ")?
                .trim()
                .parse()
                .ok()
        })
    };
    let bytes = |w: &proxy::Proxy| -> (u64, usize) {
        let conns = w.recorded();
        let sum = conns
            .iter()
            .map(|c| (c.up.len() + c.down.len()) as u64)
            .sum();
        (sum, conns.len())
    };
    // Past the first report's exchange: a poll or two answered since.
    let settled = polls().unwrap_or(0) + 2;
    cluster::wait_for(
        "polls after the first report",
        Duration::from_secs(30),
        || polls().filter(|p| *p >= settled),
    );
    let (p0, (b0, c0)) = (polls().expect("metrics"), bytes(&wire));
    let p1 = cluster::wait_for("the polls measured", Duration::from_secs(120), || {
        polls().filter(|p| *p >= p0 + POLLS)
    });
    let (b1, c1) = bytes(&wire);
    let per_poll = (b1 - b0) as f64 / (p1 - p0) as f64;
    let per_hour = per_poll * (3600 / DEFAULT_IDLE_POLL_SECS) as f64;
    println!(
        "# {} polls, {} bytes ({per_poll:.0} a poll), {} connections opened in the window",
        p1 - p0,
        b1 - b0,
        c1 - c0
    );
    println!("bench executor_health_bytes_per_hour {per_hour:.0} bytes");
    drop(control);
    drop(m);
    let _ = std::fs::remove_dir_all(&dir);
}
