//! The storage cluster's health on every surface of the REST server: `/api/health`,
//! `/api/state`, the status page and `/metrics` (read back by a real Prometheus parser), over
//! a model whose health is set by hand; and the launcher's `/health`, which a degraded storage
//! cluster leaves alone. The dispatcher is the fake of `tests/rest.rs`.
#![cfg(feature = "scheduler")]

#[path = "support/rest_fake.rs"]
mod fake;
#[path = "support/prometheus.rs"]
mod prometheus;

use fake::{exchange, get, Connection, Fake};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use storage_framework::clock::{Clock, SystemClock};
use storage_framework::contract::health::{HostCheck, HostProblem};
use storage_framework::rest::{self, RestConfig, RestHandle, ServerOptions};
use storage_framework::scheduler::metrics::Metrics;
use storage_framework::scheduler::model::{
    DeviceStatus, Health, HostHealth, MdmStatus, NodeStorage, Persisted, Persona, Phase,
    PoolCapacity, SdsStatus,
};

const H1: &str = "storage-01.dc1.example";
const H2: &str = "storage-02.dc1.example";
/// A host name a dashboard must read back exactly: a quote, a backslash, markup.
const ODD: &str = "odd\"\\<b>host";

struct Server {
    _rest: RestHandle,
    _fake: Fake,
    addr: SocketAddr,
}

fn start(state: Persisted) -> Server {
    let fake = Fake::start(
        state,
        Connection {
            subscribed: true,
            master: Some("10.0.0.5:5050".into()),
            reason: None,
        },
    );
    let dir = std::env::temp_dir().join(format!("rest-health-{}", std::process::id()));
    let rest = rest::start_with(
        RestConfig {
            port: 0,
            executor_binary: Arc::new(
                storage_framework::scheduler::executor_binary::ExecutorBinary::new(
                    dir.join("storage-executor"),
                ),
            ),
            inputs: fake.inputs.clone(),
            metrics: Arc::new(Metrics::default()),
            secrets: None,
            state_warning: None,
            tls: None,
            operator_token: None,
        },
        ServerOptions {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            // Every read asks the fake dispatcher: tests read back at once what they changed.
            view_max_age: std::time::Duration::ZERO,
            ..ServerOptions::default()
        },
    )
    .expect("REST server starts");
    let addr = rest.local_addr();
    Server {
        _rest: rest,
        _fake: fake,
        addr,
    }
}

/// Five nodes; the cluster degraded (MDM cluster, a pool rebuilding); storage-02's SDS
/// disconnected and a disk in error, storage-03 unknown, an odd host's SDS service stopped.
fn degraded_cluster() -> Persisted {
    let now = SystemClock.now_ms();
    let mut s = fake::five_nodes();
    let m = &mut s.model;
    m.health.health = Health::degraded(vec![
        "MDM cluster ClusteredDegraded (2 of 3 members up)".into(),
        "pool pd1/sp1: 12.0 GiB degraded, rebuilding".into(),
    ]);
    m.health.read_ms = Some(now - 4_000);
    m.health.mdm = Some(MdmStatus {
        cluster_state: Some("ClusteredDegraded".into()),
        good_nodes: Some(2),
        ..Default::default()
    });
    m.pools.push(PoolCapacity {
        protection_domain: "pd1".into(),
        pool: "sp1".into(),
        capacity_bytes: 100 << 30,
        used_bytes: 40 << 30,
        used_pct: 40.0,
        degraded_healthy_bytes: 12 << 30,
        pending_rebuild_bytes: 10 << 30,
        moving_bytes: 2 << 30,
        health: Health::degraded(vec!["pool pd1/sp1: 12.0 GiB degraded, rebuilding".into()]),
        ..Default::default()
    });
    for mut n in m.nodes.values_mut() {
        n.health = Health::healthy();
        if n.hostname == H2 {
            n.phase = Phase::Running;
            n.health = Health::degraded(vec![
                "SDS sds-2 disconnected from the MDM".into(),
                "device /dev/sdb in error (DeviceFailed)".into(),
            ]);
            n.storage = Some(Arc::new(NodeStorage {
                sds: Some(SdsStatus {
                    id: "sds-2".into(),
                    mdm_connection: Some("Disconnected".into()),
                    ..Default::default()
                }),
                devices: vec![DeviceStatus {
                    path: "/dev/sdb".into(),
                    state: Some("Error".into()),
                    error: Some("DeviceFailed".into()),
                    ..Default::default()
                }],
            }));
        } else if n.hostname == "storage-03.dc1.example" {
            n.health = Health::unknown("no host report for 200s");
        }
    }
    let mut odd = fake::node(9, ODD, Persona::Data, Phase::Running);
    let problem = HostProblem::new(HostCheck::Service, "sds", "not running (status 3)");
    odd.health = Health::degraded(vec![problem.reason()]);
    odd.host = Some(Box::new(HostHealth {
        problems: vec![problem],
        reported_ms: now,
    }));
    fake::add(&mut s, odd);
    s
}

#[test]
fn api_health_lists_the_cluster_and_the_unhealthy_nodes() {
    let s = start(degraded_cluster());
    let r = get(s.addr, "/api/health");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    let j = r.json();
    assert_eq!(j["state"], "degraded");
    assert_eq!(
        j["reasons"][0],
        "MDM cluster ClusteredDegraded (2 of 3 members up)"
    );
    assert!(j["read_ms"].is_u64());
    assert_eq!(j["mdm"]["cluster_state"], "ClusteredDegraded");
    assert_eq!(j["pools"][0]["protection_domain"], "pd1");
    assert_eq!(j["pools"][0]["pool"], "sp1");
    assert_eq!(j["pools"][0]["state"], "degraded");
    let nodes = j["nodes"].as_array().expect("nodes");
    let hosts: Vec<&str> = nodes
        .iter()
        .map(|n| n["hostname"].as_str().unwrap())
        .collect();
    assert_eq!(hosts, [ODD, H2, "storage-03.dc1.example"]);
    let h2 = &nodes[1];
    assert!(h2["agent_id"].as_str().unwrap().ends_with("-S2"));
    assert_eq!(h2["phase"], "running");
    assert_eq!(h2["state"], "degraded");
    assert_eq!(
        h2["reasons"],
        serde_json::json!([
            "SDS sds-2 disconnected from the MDM",
            "device /dev/sdb in error (DeviceFailed)"
        ])
    );
    assert_eq!(nodes[2]["state"], "unknown");
    assert_eq!(j["more"], 0);
    // Read-only: HEAD yes, a write no.
    let h = exchange(
        s.addr,
        b"HEAD /api/health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(h.status, 200);
    let p = exchange(
        s.addr,
        b"POST /api/health HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(p.status, 405);
}

/// The launcher restarts the scheduler when `/health` fails: a degraded storage cluster is
/// no reason to.
#[test]
fn a_degraded_storage_cluster_leaves_the_process_health_green() {
    let s = start(degraded_cluster());
    let r = get(s.addr, "/health");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "subscribed");
}

#[test]
fn api_state_shows_each_node_health_and_the_cluster_health() {
    let s = start(degraded_cluster());
    for path in [
        "/api/state",
        "/api/state?limit=2",
        "/api/state?offset=4&limit=2",
    ] {
        let r = get(s.addr, path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        let j = r.json();
        assert_eq!(j["model"]["health"]["state"], "degraded", "{path}");
        assert_eq!(j["model"]["health"]["mdm"]["good_nodes"], 2, "{path}");
        assert_eq!(j["model"]["pools"][0]["health"]["state"], "degraded");
        for n in j["model"]["nodes"].as_object().unwrap().values() {
            assert!(n["health"]["state"].is_string(), "{path}: {n}");
            if n["hostname"] == H2 {
                assert_eq!(n["health"]["state"], "degraded");
                assert_eq!(
                    n["health"]["reasons"][0],
                    "SDS sds-2 disconnected from the MDM"
                );
                assert_eq!(n["storage"]["sds"]["mdm_connection"], "Disconnected");
            }
        }
    }
    let r = get(s.addr, &format!("/api/nodes/{H1}"));
    assert_eq!(r.json()["health"], serde_json::json!({"state": "healthy"}));
}

#[test]
fn the_page_shows_a_banner_with_what_to_do_and_a_badge_per_node() {
    let s = start(degraded_cluster());
    let html = get(s.addr, "/").text();
    assert!(
        html.contains("<div id=\"health-banner\" class=\"health-degraded\">"),
        "{html}"
    );
    assert!(html.contains("MDM cluster ClusteredDegraded (2 of 3 members up)"));
    assert!(html.contains("bring the missing MDM member back"));
    assert!(html.contains(
        "<span class=\"health-badge health-degraded\" title=\"SDS sds-2 disconnected from the MDM; \
         device /dev/sdb in error (DeviceFailed)\">degraded</span>"
    ));
    assert!(html.contains(
        "<span class=\"health-badge health-unknown\" title=\"no host report for 200s\">"
    ));
    assert!(html.contains("<span class=\"health-badge health-healthy\" title=\"\">healthy</span>"));
    assert!(!html.contains("<b>host"), "unescaped host");
    // The healthy cluster has no banner.
    let mut healthy = fake::five_nodes();
    healthy.model.health.health = Health::healthy();
    let s = start(healthy);
    let html = get(s.addr, "/").text();
    assert!(!html.contains("id=\"health-banner\""), "{html}");
}

#[test]
fn metrics_show_the_health_and_a_prometheus_parser_reads_them() {
    let s = start(degraded_cluster());
    let text = get(s.addr, "/metrics").text();
    for line in [
        "storage_health_state{state=\"degraded\"} 1",
        "storage_health_state{state=\"healthy\"} 0",
        "storage_nodes_health{state=\"degraded\"} 2",
        "storage_nodes_health{state=\"unknown\"} 1",
        "storage_sds_disconnected 1",
        "storage_device_errors 1",
        "storage_pool_degraded_bytes{protection_domain=\"pd1\",pool=\"sp1\"} 12884901888",
        "storage_pool_rebuilding_bytes{protection_domain=\"pd1\",pool=\"sp1\"} 12884901888",
        "storage_pool_failed_bytes{protection_domain=\"pd1\",pool=\"sp1\"} 0",
        "storage_mdm_cluster_state{state=\"ClusteredDegraded\"} 1",
        "storage_mdm_members_up 2",
        "storage_node_unhealthy{host=\"storage-02.dc1.example\",reason=\"sds_disconnected\"} 1",
        "storage_node_unhealthy{host=\"storage-02.dc1.example\",reason=\"device_error\"} 1",
        "storage_node_unhealthy{host=\"storage-03.dc1.example\",reason=\"stale\"} 1",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    let samples = prometheus::parse(&text);
    let unhealthy: Vec<&serde_json::Value> = samples
        .iter()
        .filter(|s| s["name"] == "storage_node_unhealthy")
        .collect();
    let odd = unhealthy.iter().find(|s| s["labels"]["host"] == ODD);
    assert_eq!(
        odd.map(|s| s["labels"]["reason"].clone()),
        Some("host_service".into()),
        "the odd host as the parser read it: {unhealthy:?}"
    );
    let age = samples
        .iter()
        .find(|s| s["name"] == "storage_health_data_age_seconds")
        .and_then(|s| s["value"].as_f64())
        .expect("data age");
    assert!((3.0..120.0).contains(&age), "{age}");
}
