//! The plan on every surface of the REST server: `/api/plan`, each node's generations in
//! `/api/state` and `/api/nodes/<host>`, and `/metrics` (read back by a real Prometheus
//! parser), over a model in an upgrade set by hand. The dispatcher is the fake of
//! `tests/rest.rs`.
#![cfg(feature = "scheduler")]

#[path = "support/rest_fake.rs"]
mod fake;
#[path = "support/prometheus.rs"]
mod prometheus;

use fake::{exchange, get, Connection, Fake};
use serde_json::json;

struct Server {
    _rest: storage_framework::rest::RestHandle,
    _fake: Fake,
    addr: std::net::SocketAddr,
}

fn start(state: storage_framework::scheduler::model::Persisted) -> Server {
    let fake = Fake::start(
        state,
        Connection {
            subscribed: true,
            master: Some("10.0.0.5:5050".into()),
            reason: None,
        },
    );
    let rest = fake::serve(fake.inputs.clone());
    Server {
        addr: rest.local_addr(),
        _rest: rest,
        _fake: fake,
    }
}

#[test]
fn api_plan_shows_the_upgrade_and_why_each_node_waits_or_failed() {
    let s = start(fake::upgrading());
    let r = get(s.addr, "/api/plan");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    let j = r.json();
    assert_eq!(j["kind"], "upgrade");
    assert_eq!(j["generation"], 2);
    let hosts: Vec<&str> = j["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["hostname"].as_str().unwrap())
        .collect();
    // Failed first, then waiting, then in progress; storage-01 is at the target.
    assert_eq!(
        hosts,
        [
            "storage-04.dc1.example",
            "storage-06.dc1.example",
            "storage-02.dc1.example",
            "storage-03.dc1.example",
            "storage-05.dc1.example",
        ]
    );
    let two = &j["nodes"][2];
    assert!(two["agent_id"].as_str().unwrap().ends_with("-S2"));
    assert_eq!(
        (two["generation"].clone(), two["target_generation"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(
        two["steps"],
        json!([{"step": "upgrade-lia", "state": "done"},
               {"step": "upgrade-sds", "state": "waiting", "reason": fake::WAITING},
               {"step": "upgrade-sdc", "state": "pending"}])
    );
    assert_eq!(
        j["nodes"][1]["steps"][0]["reason"],
        "rpm -Uvh <EMC-ScaleIO-mdm-2.5>.rpm exited with status 1"
    );
    // The failed first install shows as its failed phase, with the node's error.
    let four = j["nodes"][0]["steps"].as_array().unwrap();
    let failed = four
        .iter()
        .find(|s| s["state"] == "failed")
        .expect("failed");
    assert!(
        failed["reason"]
            .as_str()
            .unwrap()
            .contains("dpkg -i emc-scaleio-sds"),
        "{failed}"
    );
    let counts = &j["counts"];
    assert_eq!(
        (counts["waiting"].clone(), counts["failed"].clone()),
        (json!(1), json!(2))
    );
    assert_eq!(counts["in-progress"], 2, "{counts}");
    assert!(counts["pending"].as_u64().unwrap() > 0 && counts["done"].as_u64().unwrap() > 0);
    assert!(j.get("truncated").is_none(), "{j}");
    // Read-only: HEAD yes, a write no.
    let h = exchange(
        s.addr,
        b"HEAD /api/plan HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(h.status, 200);
    let p = exchange(
        s.addr,
        b"POST /api/plan HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(p.status, 405);
    // Nothing to do: idle, no node listed.
    let mut done = fake::upgrading();
    for mut n in done.model.nodes.values_mut() {
        n.generation = 2;
        n.rollout = None;
    }
    let s = start(done);
    let j = get(s.addr, "/api/plan").json();
    assert_eq!(
        (j["kind"].clone(), j["nodes"].clone()),
        (json!("idle"), json!([]))
    );
}

#[test]
fn api_state_shows_each_node_generation_target_and_walk() {
    let s = start(fake::upgrading());
    for path in [
        "/api/state",
        "/api/state?limit=2",
        "/api/state?offset=4&limit=2",
    ] {
        let r = get(s.addr, path);
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        let j = r.json();
        assert_eq!(j["model"]["target"]["generation"], 2, "{path}");
        let nodes = j["model"]["nodes"].as_object().unwrap();
        assert!(!nodes.is_empty(), "{path}");
        for n in nodes.values() {
            assert_eq!(n["target_generation"], 2, "{path}: {n}");
            assert!(n["generation"].is_u64(), "{path}: {n}");
            if n["hostname"] == "storage-02.dc1.example" {
                assert_eq!(n["generation"], 1);
                assert_eq!(n["rollout"]["steps"][1]["state"], "waiting");
                assert_eq!(n["rollout"]["steps"][1]["reason"], fake::WAITING);
            }
        }
    }
    let n = get(s.addr, "/api/nodes/storage-02.dc1.example").json();
    assert_eq!(
        (n["generation"].clone(), n["target_generation"].clone()),
        (json!(1), json!(2))
    );
}

#[test]
fn metrics_count_the_plan_steps_and_a_prometheus_parser_reads_them() {
    let s = start(fake::upgrading());
    let text = get(s.addr, "/metrics").text();
    for line in [
        "# TYPE storage_plan_steps gauge",
        "storage_plan_steps{state=\"waiting\"} 1",
        "storage_plan_steps{state=\"failed\"} 2",
        "storage_plan_steps{state=\"in-progress\"} 2",
        "storage_plan_generation 2",
        "storage_nodes_below_target 5",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    let samples = prometheus::parse(&text);
    let states: Vec<&str> = samples
        .iter()
        .filter(|s| s["name"] == "storage_plan_steps")
        .map(|s| s["labels"]["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        ["pending", "in-progress", "waiting", "done", "failed"]
    );
    let value = |name: &str| {
        samples
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| s["value"].as_f64())
    };
    assert_eq!(value("storage_plan_generation"), Some(2.0));
    assert_eq!(value("storage_nodes_below_target"), Some(5.0));
}
