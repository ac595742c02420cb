//! `cargo bench --bench gateway`: the gateway worker against the dev cluster's HTTPS gateway
//! (in-process, loopback), fed over its channel as the dispatcher feeds it.
//!
//! - `gateway_attach_seconds_100`: 100 nodes with 4 devices each, from handing the 100
//!   device reports to the worker to every node reported attached with its SDC connected.
//! - `gateway_requests_per_device`: HTTP requests the gateway served in that time (logins,
//!   look-ups, creations, SDC checks, health polls included) per attached device.
//! - `gateway_requests_per_health_poll_1000`: the requests of one health poll (SDSs,
//!   devices, SDCs, the MDM cluster, every pool's figures) once 1,000 nodes with two devices
//!   each in 4 pools (2 protection domains) are attached, counted by the worker's client and
//!   checked against what the gateway served. This gateway answers without latency: the
//!   figure is a count, and 1,000 attachments would otherwise take a minute.
//!
//! The dispatcher side is left out: it only turns a device report into a job (no I/O).
//! Dev cluster agents share one loopback address, so the nodes here get their own
//! addresses (10.1.0.x), as real hosts have.

#[path = "../support/bench.rs"]
mod bench;

use devcluster::gateway::{self, GatewayConfig, MdmIps};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use storage_framework::gateway::client::{GatewayClient, GatewayConfig as ClientConfig};
use storage_framework::scheduler::exchange::Input;
use storage_framework::scheduler::gateway_work::attach_plan::{DeviceWant, NodeWant};
use storage_framework::scheduler::gateway_work::worker::{Job, Report, Worker, WorkerSettings};
use storage_framework::secret::Secret;

// The scheduler's allocator, as in the shipped binary: this bench times its code in-process.
storage_framework::scheduler_heap!();

const NODES: usize = 100;
const DEVICES: [&str; 4] = ["/dev/sdb", "/dev/sdc", "/dev/sdd", "/dev/sde"];
const PASSWORD: &str = "Bench-Pa55";

fn mdm() -> MdmIps {
    MdmIps {
        primary: "10.0.0.11".into(),
        secondary: "10.0.0.12".into(),
        tiebreaker: "10.0.0.13".into(),
    }
}

fn ip(i: usize) -> String {
    format!("10.1.{}.{}", i / 200, i % 200 + 1)
}

fn main() {
    bench::print_in_process_binary();
    attach_100();
    health_poll_1000();
}

fn attach_100() {
    let gw = gateway::start(GatewayConfig::new(PASSWORD, mdm())).expect("gateway");
    for i in 0..NODES {
        gw.sdc_installed(&ip(i), "10.0.0.11,10.0.0.12")
            .expect("SDC");
    }
    let client = GatewayClient::new(ClientConfig::new(
        &gw.addr().to_string(),
        Secret::new(PASSWORD),
        "2.0",
    ))
    .expect("client");
    let worker = Worker::new(client, WorkerSettings::new(Duration::from_secs(60), 80.0));
    let (jobs_tx, jobs_rx) = crossbeam_channel::unbounded();
    let (in_tx, in_rx) = crossbeam_channel::unbounded::<Input>();
    let thread =
        std::thread::spawn(move || worker.run(jobs_rx, |r| in_tx.send(Input::Storage(r)).is_ok()));

    let before = gw.snapshot()["requests"].as_u64().unwrap_or(0);
    let start = Instant::now();
    for i in 0..NODES {
        let host = format!("bench-{i}");
        let job = Job::Attach(NodeWant {
            agent_id: format!("agent-{i}").into(),
            hostname: host.clone(),
            ip: ip(i),
            sds_name: host,
            protection_domain: "default".into(),
            devices: DEVICES
                .iter()
                .map(|d| DeviceWant {
                    path: d.to_string(),
                    protection_domain: "default".into(),
                    pool: "default".into(),
                })
                .collect(),
        });
        jobs_tx.send(job).expect("worker");
    }
    let mut ready = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while ready.len() < NODES {
        let left = deadline.saturating_duration_since(Instant::now());
        match in_rx.recv_timeout(left) {
            Ok(Input::Storage(Report::Node(r))) => {
                if r.sdc_connected && r.attached.len() == DEVICES.len() {
                    ready.insert(r.agent_id);
                }
            }
            Ok(_) => {}
            Err(_) => panic!("only {} of {NODES} nodes attached", ready.len()),
        }
    }
    let elapsed = start.elapsed();
    let requests = gw.snapshot()["requests"].as_u64().unwrap_or(0) - before;
    let devices = gw.snapshot()["devices"]
        .as_array()
        .map(Vec::len)
        .unwrap_or(0);
    assert_eq!(devices, NODES * DEVICES.len(), "every device exactly once");
    println!(
        "bench gateway_attach_seconds_100 {:.3} s",
        elapsed.as_secs_f64()
    );
    println!(
        "bench gateway_requests_per_device {:.2} requests",
        requests as f64 / devices as f64
    );
    drop(jobs_tx);
    let _ = thread.join();
}

fn health_poll_1000() {
    const NODES: usize = 1000;
    let mut config = GatewayConfig::new(PASSWORD, mdm());
    config.latency = Duration::ZERO;
    let gw = gateway::start(config).expect("gateway");
    for i in 0..NODES {
        gw.sdc_installed(&ip(i), "10.0.0.11").expect("SDC");
    }
    let client = GatewayClient::new(ClientConfig::new(
        &gw.addr().to_string(),
        Secret::new(PASSWORD),
        "2.0",
    ))
    .expect("client");
    // Polls only when asked: the one measured is the only request in flight.
    let mut settings = WorkerSettings::new(Duration::from_secs(3600), 80.0);
    settings.poll_settle = Duration::from_secs(3600);
    let worker = Worker::new(client, settings);
    let (jobs_tx, jobs_rx) = crossbeam_channel::unbounded();
    let (in_tx, in_rx) = crossbeam_channel::unbounded::<Input>();
    let thread =
        std::thread::spawn(move || worker.run(jobs_rx, |r| in_tx.send(Input::Storage(r)).is_ok()));
    for i in 0..NODES {
        let host = format!("bench-{i}");
        let pd = format!("pd{}", i % 2);
        let device = |path: &str, pool: usize| DeviceWant {
            path: path.to_string(),
            protection_domain: pd.clone(),
            pool: format!("{pd}-pool{pool}"),
        };
        let job = Job::Attach(NodeWant {
            agent_id: format!("agent-{i}").into(),
            hostname: host.clone(),
            ip: ip(i),
            sds_name: host,
            protection_domain: pd.clone(),
            devices: vec![device("/dev/sdb", 0), device("/dev/sdc", 1)],
        });
        jobs_tx.send(job).expect("worker");
    }
    let mut ready = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(600);
    let next = |what: &str| {
        in_rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("no {what} in time"))
    };
    // The worker polls once as it starts: that poll's report comes before the measured one.
    let mut started = false;
    while ready.len() < NODES || !started {
        match next("node report") {
            Input::Storage(Report::Node(r)) if r.sdc_connected && r.attached.len() == 2 => {
                ready.insert(r.agent_id);
            }
            Input::Storage(Report::Health(_) | Report::HealthFailed { .. }) => started = true,
            _ => {}
        }
    }
    let before = gw.snapshot()["requests"].as_u64().unwrap_or(0);
    jobs_tx.send(Job::Poll).expect("worker");
    let poll = loop {
        match next("health poll") {
            Input::Storage(Report::Health(poll)) => break poll,
            Input::Storage(Report::HealthFailed { error, .. }) => panic!("poll failed: {error}"),
            _ => {}
        }
    };
    let served = gw.snapshot()["requests"].as_u64().unwrap_or(0) - before;
    assert_eq!(
        u64::from(poll.requests),
        served,
        "the client counts what was served"
    );
    assert_eq!(
        (poll.listed.counts(), poll.pools.len()),
        ((NODES, 2 * NODES, NODES), 4),
        "the poll saw every node and pool"
    );
    println!(
        "bench gateway_requests_per_health_poll_1000 {} requests",
        poll.requests
    );
    drop(jobs_tx);
    let _ = thread.join();
}
