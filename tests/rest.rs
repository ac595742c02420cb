//! The scheduler's REST server over raw HTTP: every route, every error, robustness against
//! bad and slow clients, and that no secret leaks into responses or logs. The dispatcher is
//! a fake thread that runs the real `ExecutorApi` against a `Persisted` it owns.
#![cfg(feature = "scheduler")]

#[path = "support/rest_fake.rs"]
mod fake;

use fake::{call, exchange, get, read_response, request, secret_of, wait_until, Connection, Fake};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use storage_framework::rest::{self, RestConfig, RestHandle, ServerOptions};
use storage_framework::scheduler::exchange::SecretUpdate;
use storage_framework::scheduler::metrics::Metrics;
use storage_framework::scheduler::model::{Persisted, Persona, Phase};
use storage_framework::secret::Secret;

// ---- log capture: every test runs with logging on at trace level, into memory ----

static LINES: Mutex<Vec<String>> = Mutex::new(Vec::new());

struct Capture;

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, r: &log::Record) {
        let line = format!("{} {}: {}", r.level(), r.target(), r.args());
        LINES.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture;

fn capture_logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        log::set_logger(&CAPTURE).expect("no other logger in this test binary");
        log::set_max_level(log::LevelFilter::Trace);
    });
}

fn logged() -> Vec<String> {
    LINES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

// ---- a server with a fake dispatcher ----

struct Server {
    // Declared first: the REST server stops before the dispatcher it talks to.
    _rest: RestHandle,
    fake: Fake,
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    binary: PathBuf,
}

fn temp_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "rest-test-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Every read asks the fake dispatcher: these tests read back at once what they reported.
/// Reads sharing a view are `reads_share_a_view_until_it_ages_and_a_write_is_seen_at_once`'s.
fn options() -> ServerOptions {
    ServerOptions {
        bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
        view_max_age: Duration::ZERO,
        ..ServerOptions::default()
    }
}

fn subscribed() -> Connection {
    Connection {
        subscribed: true,
        master: Some("10.0.0.5:5050".into()),
        reason: None,
    }
}

fn start_full(state: Persisted, conn: Connection, opts: ServerOptions) -> Server {
    capture_logs();
    // The REST side's early check knows the secrets of the state, as the scheduler's does.
    let (secrets_tx, secrets) = crossbeam_channel::unbounded();
    for (executor_id, digest) in state.executor_secrets() {
        let _ = secrets_tx.send(SecretUpdate::Known {
            executor_id: executor_id.into_owned(),
            digest: *digest,
        });
    }
    let fake = Fake::start(state, conn);
    let metrics = Arc::new(Metrics::default());
    let binary = temp_dir().join("storage-executor");
    let rest = rest::start_with(
        RestConfig {
            port: 0,
            executor_binary: Arc::new(
                storage_framework::scheduler::executor_binary::ExecutorBinary::new(binary.clone()),
            ),
            inputs: fake.inputs.clone(),
            metrics: metrics.clone(),
            secrets: Some(secrets),
            state_warning: None,
            tls: None,
            operator_token: None,
        },
        opts,
    )
    .expect("REST server starts");
    let addr = rest.local_addr();
    assert_eq!(addr.ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_ne!(addr.port(), 0, "the bound ephemeral port is reported");
    Server {
        _rest: rest,
        fake,
        addr,
        metrics,
        binary,
    }
}

fn start() -> Server {
    start_full(fake::five_nodes(), subscribed(), options())
}

const H2: &str = "storage-02.dc1.example";
const H3: &str = "storage-03.dc1.example";

fn node_json(state: &serde_json::Value, host: &str) -> serde_json::Value {
    state["model"]["nodes"]
        .as_object()
        .expect("nodes object")
        .values()
        .find(|n| n["hostname"] == host)
        .unwrap_or_else(|| panic!("no node {host} in {state}"))
        .clone()
}

fn assert_json_error(r: &fake::Reply, status: u16, error: &str, detail_has: &str) {
    assert_eq!(r.status, status, "{}", r.text());
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{:?}",
        r.headers
    );
    let (e, d) = r.error();
    assert_eq!(e, error, "{}", r.text());
    assert!(d.contains(detail_has), "detail {d:?} lacks {detail_has:?}");
}

fn assert_still_serving(addr: SocketAddr) {
    let r = get(addr, "/version");
    assert_eq!(r.status, 200, "server stopped serving: {}", r.text());
}

// ---- plain routes ----

#[test]
fn version_has_the_earlier_shape() {
    let s = start();
    let r = get(s.addr, "/version");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let j = r.json();
    assert_eq!(j["versionstr"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        j["versionint"],
        rest::version_int(env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(j["release"], storage_framework::version::TAG);
    assert_eq!(j["commit"], storage_framework::version::COMMIT);
}

#[test]
fn health_follows_the_subscription() {
    let s = start();
    let r = get(s.addr, "/health");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "subscribed");
    assert_eq!(r.json()["master"], "10.0.0.5:5050");

    let down = start_full(
        Persisted::default(),
        Connection {
            subscribed: false,
            master: None,
            reason: Some("master 10.0.0.5:5050 refused the connection".into()),
        },
        options(),
    );
    let r = get(down.addr, "/health");
    assert_json_error(&r, 503, "not subscribed", "refused the connection");
}

#[test]
fn state_shows_every_node() {
    let s = start();
    let r = get(s.addr, "/api/state");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let j = r.json();
    assert_eq!(j["subscribed"], true);
    assert_eq!(j["master"], "10.0.0.5:5050");
    assert_eq!(
        j["model"]["framework_id"],
        "3f2a61e0-8c1b-4d2e-9a7f-5b6c7d8e9f00-0001"
    );
    assert_eq!(j["model"]["nodes"].as_object().unwrap().len(), 5);
    let n = node_json(&j, "storage-01.dc1.example");
    assert_eq!(n["persona"], "primary");
    assert_eq!(n["phase"], "running");
    assert_eq!(n["devices"], serde_json::json!(["/dev/sdb", "/dev/sdc"]));
    assert_eq!(n["attached"], serde_json::json!(["/dev/sdb", "/dev/sdc"]));
    assert!(n["last_contact_ms"].is_u64());
    assert!(n["updated_ms"].is_u64());
    let failed = node_json(&j, "storage-04.dc1.example");
    assert!(failed["last_error"].as_str().unwrap().contains("dpkg -i"));

    // HEAD: same headers, no body.
    let h = exchange(
        s.addr,
        b"HEAD /api/state HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(h.status, 200);
    assert_eq!(
        h.header("content-length"),
        Some(r.body.len().to_string().as_str())
    );
    assert!(h.body.is_empty());
}

/// A large cluster's state comes in pages; a small one's keeps its shape.
#[test]
fn state_pages_large_clusters() {
    let small = start();
    let whole = get(small.addr, "/api/state").json();
    assert!(whole.get("page").is_none(), "a small cluster is not paged");
    let two = get(small.addr, "/api/state?limit=2&offset=1").json();
    assert_eq!(two["model"]["nodes"].as_object().unwrap().len(), 2);
    assert_eq!(two["page"]["total"], 5);
    assert_eq!(two["page"]["offset"], 1);
    assert_eq!(two["page"]["next"], "/api/state?offset=3&limit=2");
    assert_eq!(two["counts"]["phase"]["failed"], 1);
    assert_eq!(two["subscribed"], true, "the page keeps the view's fields");

    let big = start_full(fake::many_nodes(1500), subscribed(), options());
    let first = get(big.addr, "/api/state").json();
    let page: Vec<String> = first["model"]["nodes"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(page.len(), 1000, "the default page holds 1,000 nodes");
    assert_eq!(first["page"]["total"], 1500);
    assert_eq!(first["page"]["limit"], 1000);
    let next = first["page"]["next"].as_str().unwrap().to_owned();
    let rest = get(big.addr, &next).json();
    assert_eq!(rest["model"]["nodes"].as_object().unwrap().len(), 500);
    assert!(
        rest["page"].get("next").is_none(),
        "the last page has no next"
    );
    assert_eq!(rest["counts"]["persona"]["data"], 1500);
    // Two pages cover every node once.
    let mut all: Vec<String> = page;
    all.extend(rest["model"]["nodes"].as_object().unwrap().keys().cloned());
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 1500);
    let past = get(big.addr, "/api/state?offset=9999").json();
    assert!(past["model"]["nodes"].as_object().unwrap().is_empty());
    assert_eq!(past["page"]["total"], 1500);

    for (query, detail) in [
        ("limit=0", "limit: 0 is not between 1 and 1000"),
        ("limit=1001", "limit: 1001"),
        ("offset=-3", "offset: \"-3\""),
        ("offset=ten", "offset: \"ten\" is not a whole number"),
    ] {
        let r = get(big.addr, &format!("/api/state?{query}"));
        assert_json_error(&r, 400, "bad query parameter", detail);
    }
}

/// Each window's answer is encoded once per view and built from the last one (only changed
/// nodes encoded again): every change shows in the next answer of every window, gzipped or
/// not, and no secret ever does.
#[test]
fn state_answers_follow_every_change_of_the_view() {
    let s = start();
    // Two windows: the server keeps the last render of two.
    let windows = ["/api/state", "/api/state?offset=1&limit=3"];
    let look = |path: &str| -> Vec<serde_json::Value> {
        let plain = get(s.addr, path);
        let zipped = request(s.addr, "GET", path, &[("Accept-Encoding", "gzip")], b"");
        assert_eq!(plain.status, 200, "{}", plain.text());
        assert_eq!(zipped.header("content-encoding"), Some("gzip"), "{path}");
        let unzipped = gunzip(&zipped.body);
        for body in [&plain.body, &unzipped] {
            let text = String::from_utf8_lossy(body);
            for host in ["storage-01.dc1.example", H2, H3, "storage-04.dc1.example"] {
                assert!(
                    !text.contains(&secret_of(host)),
                    "a secret in {path}: {text}"
                );
            }
        }
        let j = plain.json();
        let z: serde_json::Value = serde_json::from_slice(&unzipped).unwrap();
        assert_eq!(j["model"], z["model"], "{path}: gzip and plain differ");
        vec![j, z]
    };
    let hosts = |j: &serde_json::Value| -> Vec<String> {
        j["model"]["nodes"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n["hostname"].as_str().unwrap().to_owned())
            .collect()
    };
    for w in windows {
        for j in look(w) {
            assert_eq!(node_json(&j, H2)["phase"], "storage-attach", "{w}");
        }
    }
    // The same view again: the same bytes.
    assert_eq!(get(s.addr, windows[1]).body, get(s.addr, windows[1]).body);

    // A report through the executor API, then a change of the dispatcher's own.
    let r = call(
        s.addr,
        "POST",
        H2,
        "phase",
        br#"{"phase":"failed","error":"sds: no disk"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    for w in windows {
        for j in look(w) {
            let n = node_json(&j, H2);
            assert_eq!(
                (&n["phase"], &n["last_error"]),
                (&"failed".into(), &"sds: no disk".into()),
                "{w}"
            );
        }
    }
    s.fake.change(|st, _| {
        let gone = st
            .model
            .nodes
            .iter()
            .find(|(_, n)| n.hostname == H3)
            .unwrap()
            .0
            .clone();
        st.model.nodes.remove(&gone);
        fake::add(
            st,
            fake::node(0, "storage-00.dc1.example", Persona::Data, Phase::Devices),
        );
    });
    for w in windows {
        for j in look(w) {
            let shown = hosts(&j);
            assert!(
                !shown.contains(&H3.to_owned()),
                "{w}: a removed node shows: {shown:?}"
            );
            if w == windows[0] {
                assert_eq!(shown.len(), 5, "{shown:?}");
                assert_eq!(node_json(&j, "storage-00.dc1.example")["phase"], "devices");
            } else {
                assert_eq!(j["page"]["total"], 5, "{w}");
                assert_eq!(shown.len(), 3, "{w}: {shown:?}");
            }
            assert_eq!(node_json(&j, H2)["phase"], "failed", "{w}");
        }
    }
}

#[test]
fn one_node_by_host() {
    let s = start();
    let r = get(s.addr, "/api/nodes/storage-01.dc1.example");
    assert_eq!(r.status, 200, "{}", r.text());
    let n = r.json();
    assert_eq!(n["hostname"], "storage-01.dc1.example");
    assert_eq!(n["persona"], "primary");
    assert_eq!(
        n,
        node_json(&get(s.addr, "/api/state").json(), "storage-01.dc1.example")
    );
    let r = get(s.addr, "/api/nodes/storage-09.dc1.example");
    assert_json_error(&r, 404, "unknown node", "\"storage-09.dc1.example\"");
    let r = get(s.addr, "/api/nodes/");
    assert_eq!(r.status, 404);
    let r = get(s.addr, "/api/nodes/bad%zz");
    assert_eq!(r.status, 400);
    let r = request(
        s.addr,
        "POST",
        "/api/nodes/storage-01.dc1.example",
        &[],
        b"{}",
    );
    assert_eq!(r.status, 405);
    // The page's filters are checked too.
    let r = get(s.addr, "/ui?phase=dancing");
    assert_json_error(&r, 400, "bad query parameter", "phase: \"dancing\"");
    let r = get(s.addr, "/ui?limit=100000");
    assert_json_error(&r, 400, "bad query parameter", "limit: 100000");
}

fn gunzip(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(body), &mut out)
        .expect("a valid gzip body");
    out
}

#[test]
fn large_responses_are_gzipped_for_clients_that_accept_it() {
    let s = start_full(fake::many_nodes(200), subscribed(), options());
    let plain = get(s.addr, "/api/state");
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    let zipped = request(
        s.addr,
        "GET",
        "/api/state",
        &[("Accept-Encoding", "br, gzip;q=0.8")],
        b"",
    );
    assert_eq!(zipped.status, 200);
    assert_eq!(zipped.header("content-encoding"), Some("gzip"));
    assert_eq!(zipped.header("vary"), Some("Accept-Encoding"));
    assert!(
        zipped.body.len() * 5 < plain.body.len(),
        "gzip hardly helped"
    );
    assert_eq!(gunzip(&zipped.body), plain.body);
    // Refused with q=0: plain.
    let r = request(
        s.addr,
        "GET",
        "/api/state",
        &[("Accept-Encoding", "gzip;q=0")],
        b"",
    );
    assert_eq!(r.header("content-encoding"), None);
    // HEAD tells the length of what GET would send.
    let h = exchange(
        s.addr,
        b"HEAD /api/state HTTP/1.1\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(h.header("content-encoding"), Some("gzip"));
    assert_eq!(
        h.header("content-length"),
        Some(zipped.body.len().to_string().as_str())
    );
    // The page and the metrics too.
    let page = request(s.addr, "GET", "/ui", &[("Accept-Encoding", "gzip")], b"");
    assert_eq!(page.header("content-encoding"), Some("gzip"));
    let html = String::from_utf8(gunzip(&page.body)).unwrap();
    // A failed node is on the first page (failed first); the page shows 100 of the 200.
    assert!(html.contains("agent-00010.dc1.example.com"));
    assert!(html.contains("Showing 1–100 of 200 nodes"), "{html}");
    let m = request(
        s.addr,
        "GET",
        "/metrics",
        &[("Accept-Encoding", "gzip")],
        b"",
    );
    assert_eq!(m.header("content-encoding"), Some("gzip"));
    assert!(String::from_utf8(gunzip(&m.body))
        .unwrap()
        .contains("storage_scheduler_nodes{phase=\"running\"}"));
    // Small answers and errors stay plain.
    let v = request(
        s.addr,
        "GET",
        "/version",
        &[("Accept-Encoding", "gzip")],
        b"",
    );
    assert_eq!(v.header("content-encoding"), None);
    let e = request(s.addr, "GET", "/nope", &[("Accept-Encoding", "gzip")], b"");
    assert_eq!(e.header("content-encoding"), None);
}

#[test]
fn status_page_lists_nodes_and_escapes_values() {
    let mut state = fake::five_nodes();
    let mut evil = fake::node(
        9,
        "<script>alert('pwned')</script>",
        Persona::Data,
        Phase::Devices,
    );
    evil.last_error = Some("<img src=x onerror=alert(1)> & \"quoted\"".into());
    evil.devices = vec!["/dev/<b>".into()];
    fake::add(&mut state, evil);
    let s = start_full(state, subscribed(), options());
    for path in ["/", "/ui", "/ui/"] {
        let r = get(s.addr, path);
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
        let html = r.text();
        for host in [
            "storage-01.dc1.example",
            "storage-02.dc1.example",
            "storage-03.dc1.example",
            "storage-04.dc1.example",
            "storage-05.dc1.example",
        ] {
            assert!(html.contains(host), "{path}: {host} missing");
        }
        assert!(html.contains("3f2a61e0-8c1b-4d2e-9a7f-5b6c7d8e9f00-0001"));
        assert!(html.contains("10.0.0.5:5050"));
        assert!(html.contains("&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;"));
        assert!(!html.contains("<script>alert"), "unescaped host name");
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt; &amp; &quot;quoted&quot;"));
        assert!(!html.contains("<img"), "unescaped error");
        assert!(!html.contains("/dev/<b>"), "unescaped device");
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "external asset"
        );
    }
    // The in-place refresh gets the content only.
    let part = get(s.addr, "/ui?partial=1");
    assert_eq!(part.status, 200);
    assert!(part.text().contains("storage-05.dc1.example"));
    assert!(!part.text().contains("<html"));
}

#[test]
fn metrics_are_prometheus_text() {
    let s = start();
    s.metrics.event(
        "OFFERS",
        storage_framework::clock::Clock::now_ms(&storage_framework::clock::SystemClock) - 2_000,
    );
    s.metrics.event(
        "UPDATE",
        storage_framework::clock::Clock::now_ms(&storage_framework::clock::SystemClock),
    );
    s.metrics.call("ACCEPT", true);
    s.metrics.call("DECLINE", false);
    s.metrics.offers_accepted.fetch_add(4, Ordering::Relaxed);
    s.metrics.reconnects.fetch_add(1, Ordering::Relaxed);
    // Only counters the scheduler really increments (dispatcher, subscription): the real
    // scheduler's counts are checked end to end in tests/e2e_scheduler.rs.
    s.metrics.offers_declined.fetch_add(2, Ordering::Relaxed);
    let r = get(s.addr, "/metrics");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = r.text();
    for line in [
        "storage_scheduler_events_total{type=\"OFFERS\"} 1",
        "storage_scheduler_events_total{type=\"UPDATE\"} 1",
        "storage_scheduler_calls_total{type=\"ACCEPT\",result=\"ok\"} 1",
        "storage_scheduler_calls_total{type=\"DECLINE\",result=\"failed\"} 1",
        "storage_scheduler_offers_accepted_total 4",
        "storage_scheduler_offers_declined_total 2",
        "storage_scheduler_reconnects_total 1",
        "storage_scheduler_nodes{phase=\"running\"} 1",
        "storage_scheduler_nodes{phase=\"failed\"} 1",
        "storage_scheduler_nodes{phase=\"lost\"} 0",
        "storage_scheduler_nodes_with_error 1",
        "storage_scheduler_subscribed 1",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    let age: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("storage_scheduler_last_event_age_seconds "))
        .expect("last event age")
        .parse()
        .unwrap();
    assert!((0.0..60.0).contains(&age), "{age}");
    // Every family has HELP and TYPE before its samples.
    let mut typed = std::collections::HashSet::new();
    let mut helped = std::collections::HashSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.insert(rest.split(' ').next().unwrap().to_owned());
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut p = rest.split(' ');
            let name = p.next().unwrap().to_owned();
            assert!(matches!(p.next(), Some("counter" | "gauge")), "{line}");
            assert!(helped.contains(&name), "TYPE before HELP: {line}");
            typed.insert(name);
        } else {
            let name = line.split(['{', ' ']).next().unwrap();
            assert!(typed.contains(name), "sample without TYPE: {line}");
            if name.ends_with("_total") {
                assert!(text.contains(&format!("# TYPE {name} counter")), "{name}");
            }
        }
    }
}

#[test]
fn executor_binary_is_cached_with_etag_and_reloaded_on_change() {
    let s = start();
    // Missing: a clear 404.
    let r = get(s.addr, "/storage-executor");
    assert_json_error(
        &r,
        404,
        "executor binary not found",
        &s.binary.display().to_string(),
    );
    assert!(r.error().1.contains("-executor.altpath"), "{}", r.text());

    // Present: served with length and ETag.
    let content: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&s.binary, &content).unwrap();
    let r = get(s.addr, "/storage-executor");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_eq!(r.header("content-length"), Some("300000"));
    assert!(r.body == content, "body differs from the file");
    let etag = r.header("etag").expect("ETag").to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");

    let h = exchange(
        s.addr,
        b"HEAD /storage-executor HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(h.status, 200);
    assert_eq!(h.header("content-length"), Some("300000"));
    assert_eq!(h.header("etag"), Some(etag.as_str()));
    assert!(h.body.is_empty());

    let cached = request(
        s.addr,
        "GET",
        "/storage-executor",
        &[("If-None-Match", &etag)],
        b"",
    );
    assert_eq!(cached.status, 304);
    assert!(cached.body.is_empty());

    // Gzipped, what launches fetch: the same bytes once unpacked, in fewer, with an ETag
    // of its own.
    let gunzip = |gz: &[u8]| {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut out).unwrap();
        out
    };
    let z = get(s.addr, "/storage-executor.gz");
    assert_eq!(z.status, 200, "{}", z.text());
    assert_eq!(z.header("content-type"), Some("application/gzip"));
    assert_eq!(z.header("content-encoding"), None, "the file is the gzip");
    assert!(z.body.len() < content.len() / 2, "{} bytes", z.body.len());
    assert!(
        gunzip(&z.body) == content,
        "unpacked, it differs from the file"
    );
    let z_etag = z.header("etag").expect("ETag").to_owned();
    assert_ne!(z_etag, etag);
    let z_cached = request(
        s.addr,
        "GET",
        "/storage-executor.gz",
        &[("If-None-Match", &z_etag)],
        b"",
    );
    assert_eq!(z_cached.status, 304);

    // Changed (size differs): read again, new ETag.
    std::fs::write(&s.binary, b"#!/bin/sh\necho new executor\n").unwrap();
    let r = get(s.addr, "/storage-executor");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, b"#!/bin/sh\necho new executor\n");
    assert_ne!(r.header("etag"), Some(etag.as_str()));
    let z = get(s.addr, "/storage-executor.gz");
    assert_eq!(gunzip(&z.body), b"#!/bin/sh\necho new executor\n");

    // Removed again: 404 again, not the stale copy.
    std::fs::remove_file(&s.binary).unwrap();
    assert_eq!(get(s.addr, "/storage-executor").status, 404);
    assert_eq!(get(s.addr, "/storage-executor.gz").status, 404);
}

// ---- executor API ----

#[test]
fn executor_calls_need_the_right_secret() {
    let s = start();
    let path = format!("/api/v1/executors/{}/heartbeat", fake::executor_id(H2));
    let r = request(s.addr, "POST", &path, &[], b"");
    assert_json_error(&r, 401, "unauthorized", "missing credentials");
    assert!(r
        .header("www-authenticate")
        .is_some_and(|v| v.starts_with("Bearer")));
    // Credentials are checked before the body is parsed.
    let phase = format!("/api/v1/executors/{}/phase", fake::executor_id(H2));
    let r = request(s.addr, "POST", &phase, &[], b"{not json");
    assert_json_error(&r, 401, "unauthorized", "missing credentials");

    let r = request(
        s.addr,
        "POST",
        &path,
        &[("Authorization", "Basic dXNlcjpwYXNz")],
        b"",
    );
    assert_json_error(&r, 401, "unauthorized", "Bearer");

    // Another executor's secret is wrong for this one.
    let other = format!("Bearer {}", secret_of(H3));
    let r = request(s.addr, "POST", &path, &[("Authorization", &other)], b"");
    assert_json_error(&r, 401, "unauthorized", "not its secret");

    let r = request(
        s.addr,
        "POST",
        "/api/v1/executors/storage-executor.nowhere.7/heartbeat",
        &[("Authorization", &other)],
        b"",
    );
    assert_json_error(
        &r,
        401,
        "unauthorized",
        "unknown executor, or not its secret",
    );

    let before = node_json(&get(s.addr, "/api/state").json(), H2)["last_contact_ms"].clone();
    // Still the 12 s old contact of the sample: the refused calls did not count.
    assert!(
        before.as_u64().unwrap() + 10_000
            < storage_framework::clock::Clock::now_ms(&storage_framework::clock::SystemClock)
    );
    let r = call(s.addr, "POST", H2, "heartbeat", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["recorded"], true);
    let after = node_json(&get(s.addr, "/api/state").json(), H2)["last_contact_ms"].clone();
    assert!(
        after.as_u64() > before.as_u64(),
        "only the authenticated call counts as contact"
    );
}

/// `running` registers the executor for a nudge past the plan it is served now, and the
/// answer says at which version; another phase registers nothing.
#[test]
fn a_running_report_says_past_which_plan_its_nudge_is_owed() {
    let s = start();
    let r = call(s.addr, "POST", H2, "phase", br#"{"phase":"volume-driver"}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), serde_json::json!({ "recorded": true }));
    let r = call(s.addr, "POST", H2, "phase", br#"{"phase":"running"}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    let answer = r.json();
    let past = answer[storage_framework::contract::api::NUDGE_PAST_FIELD].as_u64();
    let carried = &answer[storage_framework::contract::api::REPORT_PLAN_FIELD];
    let plan = call(s.addr, "GET", H2, "plan", b"").json();
    assert!(past.is_some(), "{answer}");
    assert_eq!(past, plan["version"].as_u64(), "{answer}");
    assert_eq!(carried, &plan, "the plan the plan route serves");
}

/// Devices a phase report carries become the node's, and the answer says so (an executor
/// that does not read that sends them by `POST devices`); a wrong one refuses the report
/// whole.
#[test]
fn a_phase_report_carries_the_devices_the_phase_before_found() {
    let s = start();
    let field = storage_framework::contract::api::DEVICES_RECORDED_FIELD;
    let body = br#"{"phase":"volume-driver","devices":["/dev/sdb","/dev/sdc"]}"#;
    let r = call(s.addr, "POST", H3, "phase", body);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json(),
        serde_json::json!({ "recorded": true, field: true })
    );
    let n = node_json(&get(s.addr, "/api/state").json(), H3);
    assert_eq!(n["devices"], serde_json::json!(["/dev/sdb", "/dev/sdc"]));
    assert_eq!(n["phase"], "volume-driver");

    let body = br#"{"phase":"storage-attach","devices":["/dev/sdb","/etc/passwd"]}"#;
    let r = call(s.addr, "POST", H3, "phase", body);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("/etc/passwd"), "{}", r.text());
    let n = node_json(&get(s.addr, "/api/state").json(), H3);
    assert_eq!(
        (&n["phase"], &n["devices"]),
        (
            &serde_json::json!("volume-driver"),
            &serde_json::json!(["/dev/sdb", "/dev/sdc"])
        )
    );
}

/// Which executor ids exist cannot be probed: a wrong secret and an unknown executor get one
/// answer, status, headers and body alike.
#[test]
fn a_wrong_secret_and_an_unknown_executor_get_the_same_answer() {
    let s = start();
    let wrong = format!("Bearer {}", secret_of(H3));
    let ask = |id: &str| {
        let path = format!("/api/v1/executors/{id}/heartbeat");
        request(s.addr, "POST", &path, &[("Authorization", &wrong)], b"")
    };
    let known = ask(&fake::executor_id(H2));
    let unknown = ask("storage-executor.nowhere.7");
    assert_eq!(known.status, 401, "{}", known.text());
    assert_eq!(
        (unknown.status, unknown.text()),
        (known.status, known.text())
    );
    assert_eq!(
        unknown.header("www-authenticate"),
        known.header("www-authenticate")
    );
}

/// The secret is compared before the body is read or parsed. A wrong secret with a
/// body announced at the full 1 MiB and never sent is answered at once (reading the body
/// would wait for it until the request timeout, 10 s), and a malformed body with a wrong
/// secret gets 401, not a parse error.
#[test]
fn a_wrong_secret_is_refused_before_the_body_is_read() {
    let s = start();
    let path = format!("/api/v1/executors/{}/phase", fake::executor_id(H2));
    let bearer = format!("Bearer {}", secret_of(H3));
    let wrong = format!("Authorization: {bearer}");
    let started = std::time::Instant::now();
    let r = exchange(
        s.addr,
        format!("POST {path} HTTP/1.1\r\nHost: t\r\n{wrong}\r\nContent-Length: 1048576\r\n\r\n")
            .as_bytes(),
    );
    assert_json_error(&r, 401, "unauthorized", "not its secret");
    assert!(r.header("www-authenticate").is_some());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    let r = request(
        s.addr,
        "POST",
        &path,
        &[("Authorization", &bearer)],
        b"{not json",
    );
    assert_json_error(&r, 401, "unauthorized", "not its secret");
    // An executor the scheduler does not know: the same answer, also before the body.
    let r = exchange(
        s.addr,
        format!(
            "POST /api/v1/executors/storage-executor.nowhere.7/phase HTTP/1.1\r\nHost: t\r\n{wrong}\r\nContent-Length: 1048576\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_json_error(
        &r,
        401,
        "unauthorized",
        "unknown executor, or not its secret",
    );
    // The right secret: the body is read and parsed.
    let r = call(s.addr, "POST", H2, "phase", b"{not json");
    assert_json_error(&r, 400, "malformed JSON", "");
    assert_still_serving(s.addr);
}

#[test]
fn heartbeat_sets_last_contact() {
    let s = start();
    let before = node_json(&get(s.addr, "/api/state").json(), "storage-05.dc1.example");
    assert!(before.get("last_contact_ms").is_none());
    let r = call(s.addr, "POST", "storage-05.dc1.example", "heartbeat", b"{}");
    assert_eq!(r.status, 200, "{}", r.text());
    let after = node_json(&get(s.addr, "/api/state").json(), "storage-05.dc1.example");
    assert!(after["last_contact_ms"].is_u64(), "{after}");
    assert_eq!(
        after["phase"], "launching",
        "a heartbeat is not a phase report"
    );
    let r = call(
        s.addr,
        "POST",
        "storage-05.dc1.example",
        "heartbeat",
        b"{oops",
    );
    assert_json_error(&r, 400, "malformed JSON", "line 1");
}

#[test]
fn phase_reports_update_the_node() {
    let s = start();
    let r = call(
        s.addr,
        "POST",
        H3,
        "phase",
        br#"{"phase":"devices","message":"packages installed"}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let n = node_json(&get(s.addr, "/api/state").json(), H3);
    assert_eq!(n["phase"], "devices");
    assert!(n["last_contact_ms"].is_u64());
    assert!(n.get("last_error").is_none());

    let r = call(
        s.addr,
        "POST",
        H3,
        "phase",
        br#"{"phase":"failed","error":"devices: lsblk exited with status 32"}"#,
    );
    assert_eq!(r.status, 200);
    let n = node_json(&get(s.addr, "/api/state").json(), H3);
    assert_eq!(n["phase"], "failed");
    assert_eq!(n["last_error"], "devices: lsblk exited with status 32");

    // A report without an error clears it.
    let r = call(s.addr, "POST", H3, "phase", br#"{"phase":"environment"}"#);
    assert_eq!(r.status, 200);
    let n = node_json(&get(s.addr, "/api/state").json(), H3);
    assert!(n.get("last_error").is_none(), "{n}");

    let r = call(s.addr, "POST", H3, "phase", br#"{"phase":"Packages!"}"#);
    assert_json_error(
        &r,
        400,
        "invalid phase report",
        "unknown phase \"Packages!\"",
    );
    assert!(r.error().1.contains("storage-attach"));
    let r = call(s.addr, "POST", H3, "phase", br#"{"phase":"lost"}"#);
    assert_json_error(&r, 400, "invalid phase report", "set by the scheduler");
    let r = call(s.addr, "POST", H3, "phase", br#"{"phase": "devices""#);
    assert_json_error(&r, 400, "malformed JSON", "EOF");
    let r = call(s.addr, "POST", H3, "phase", br#"{"phase": 7}"#);
    assert_json_error(&r, 400, "invalid phase report", "invalid type");
    let r = call(s.addr, "POST", H3, "phase", b"");
    assert_json_error(&r, 400, "malformed JSON", "EOF");
    let n = node_json(&get(s.addr, "/api/state").json(), H3);
    assert_eq!(
        n["phase"], "environment",
        "rejected reports changed nothing"
    );
}

#[test]
fn device_reports_are_validated() {
    let s = start();
    let r = call(
        s.addr,
        "POST",
        H3,
        "devices",
        br#"{"devices":["/dev/sdb","/dev/disk/by-id/wwn-0x5000c500a1b2c3d4"]}"#,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let n = node_json(&get(s.addr, "/api/state").json(), H3);
    assert_eq!(
        n["devices"],
        serde_json::json!(["/dev/sdb", "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4"])
    );
    let too_many: Vec<String> = (0..257).map(|i| format!("/dev/sd{i}")).collect();
    let too_many = serde_json::json!({ "devices": too_many }).to_string();
    for (body, detail) in [
        (r#"{"devices":["sdb"]}"#, "not an absolute path under /dev/"),
        (r#"{"devices":["/etc/passwd"]}"#, "/etc/passwd"),
        (r#"{"devices":["/dev/sdb","/dev/sdb"]}"#, "listed twice"),
        (r#"{"devices":["/dev/../etc/shadow"]}"#, "'..'"),
        (r#"{"disks":["/dev/sdb"]}"#, "missing field `devices`"),
        (too_many.as_str(), "at most 256"),
    ] {
        let r = call(s.addr, "POST", H3, "devices", body.as_bytes());
        assert_json_error(&r, 400, "invalid device report", detail);
    }
    let r = call(s.addr, "POST", H3, "devices", b"[1,2");
    assert_json_error(&r, 400, "malformed JSON", "EOF");
    let n = node_json(&get(s.addr, "/api/state").json(), H3);
    assert_eq!(
        n["devices"].as_array().unwrap().len(),
        2,
        "rejected reports changed nothing"
    );
}

#[test]
fn plan_is_returned_and_long_polls_until_it_changes() {
    let s = start();
    let r = call(s.addr, "GET", H2, "plan", b"");
    assert_eq!(r.status, 200, "{}", r.text());
    let plan = r.json();
    let version = plan["version"].as_u64().expect("numeric version");
    assert_eq!(r.header("etag"), Some(format!("\"{version}\"").as_str()));
    assert_eq!(plan["executor_id"], fake::executor_id(H2));
    assert_eq!(plan["hostname"], H2);
    assert_eq!(plan["persona"], "secondary");
    assert_eq!(plan["phase"], "storage-attach");
    assert!(plan["agent_id"].as_str().unwrap().ends_with("-S2"));
    assert!(plan.get("layout").is_some());
    assert!(
        plan.get("secrets").is_none(),
        "no secrets without the MDM hook"
    );

    // A stale version is answered at once.
    let r = call(s.addr, "GET", H2, "plan?version=1&wait=30", b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["version"], version);

    // The current version with a wait: unchanged after the wait.
    let r = call(
        s.addr,
        "GET",
        H2,
        &format!("plan?version={version}&wait=1"),
        b"",
    );
    assert_eq!(r.status, 304, "{}", r.text());
    assert!(r.body.is_empty());

    // A change while waiting answers the wait with the new plan.
    let addr = s.addr;
    let waiter = std::thread::spawn(move || {
        call(
            addr,
            "GET",
            H2,
            &format!("plan?version={version}&wait=30"),
            b"",
        )
    });
    wait_until("the plan request to wait", || {
        get(s.addr, "/metrics")
            .text()
            .contains("storage_scheduler_executor_plan_waits 1")
    });
    let r = call(s.addr, "POST", H2, "phase", br#"{"phase":"volume-driver"}"#);
    assert_eq!(r.status, 200);
    let r = waiter.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    let changed = r.json();
    assert_eq!(changed["phase"], "volume-driver");
    assert_ne!(changed["version"], version);

    // A change made by the scheduler itself wakes a wait too.
    let v2 = changed["version"].as_u64().unwrap();
    let waiter = std::thread::spawn(move || {
        call(addr, "GET", H2, &format!("plan?version={v2}&wait=30"), b"")
    });
    wait_until("the plan request to wait", || {
        get(s.addr, "/metrics")
            .text()
            .contains("storage_scheduler_executor_plan_waits 1")
    });
    // Give the dispatcher the parked request first: a change before parking would be
    // answered at once anyway, so either order must end in the new plan.
    s.fake.change(|state, _| {
        for mut n in state.model.nodes.values_mut() {
            if n.hostname == H2 {
                n.attached = vec!["/dev/nvme0n1".into()];
            }
        }
    });
    let r = waiter.join().unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["attached"], serde_json::json!(["/dev/nvme0n1"]));

    // An idle executor's request: answered at once, 304 with the current version.
    let v3 = r.json()["version"].as_u64().unwrap();
    let r = call(
        s.addr,
        "GET",
        H2,
        &format!("plan?version={v3}&nudge=1"),
        b"",
    );
    assert_eq!(r.status, 304, "{}", r.text());
    assert!(r.body.is_empty());
    let r = call(s.addr, "GET", H2, "plan?version=1&nudge=1", b"");
    assert_eq!(r.status, 200, "a stale version gets the plan");
    assert_eq!(r.json()["version"], v3);

    for q in ["plan?version=abc", "plan?wait=soon", "plan?wait=%zz"] {
        let r = call(s.addr, "GET", H2, q, b"");
        assert_json_error(&r, 400, "bad query parameter", "");
    }
    for (q, why) in [
        ("plan?version=1&nudge=yes", "neither 1 nor 0"),
        ("plan?nudge=1", "replaces the wait"),
        ("plan?version=1&wait=5&nudge=1", "replaces the wait"),
    ] {
        let r = call(s.addr, "GET", H2, q, b"");
        assert_json_error(&r, 400, "bad query parameter", why);
    }
}

/// An executor's next plan poll follows its last at once: the connection a long poll was
/// answered on stays open for it (no new connection, nor TLS handshake, per poll); a client
/// that asks for `Connection: close` gets its connection closed.
#[test]
fn a_long_poll_keeps_its_connection_for_the_next_poll() {
    let s = start();
    let version = call(s.addr, "GET", H2, "plan", b"").json()["version"]
        .as_u64()
        .unwrap();
    let connections = || {
        let text = get(s.addr, "/metrics").text();
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("storage_scheduler_http_connections_total "))
            .map(str::to_string);
        line.and_then(|n| n.trim().parse::<u64>().ok()).unwrap()
    };
    let poll = |close: bool| {
        format!(
            "GET /api/v1/executors/{}/plan?version={version}&wait=1 HTTP/1.1\r\nHost: t\r\n\
             Authorization: Bearer {}\r\n{}\r\n",
            fake::executor_id(H2),
            secret_of(H2),
            if close { "Connection: close\r\n" } else { "" }
        )
    };
    let before = connections();
    let mut conn = fake::connect(s.addr);
    let mut buf = Vec::new();
    for i in 0..3 {
        conn.write_all(poll(false).as_bytes()).unwrap();
        let r = read_response(&mut conn, &mut buf, false).unwrap();
        assert_eq!(r.status, 304, "poll {i}: {}", r.text());
        assert_eq!(r.header("connection"), Some("keep-alive"), "poll {i}");
    }
    conn.write_all(poll(true).as_bytes()).unwrap();
    let r = read_response(&mut conn, &mut buf, false).unwrap();
    assert_eq!(r.header("connection"), Some("close"));
    let mut rest = Vec::new();
    let n = std::io::Read::read_to_end(&mut conn, &mut rest).unwrap();
    assert_eq!(n, 0, "closed after the answer");
    // The metrics requests' own connections and the one of the polls.
    assert_eq!(connections() - before, 2);
}

/// Waiting plan requests hold no worker. With two workers, five executors wait at
/// once and `/health` still answers at once; a change answers every wait.
#[test]
fn waiting_plan_requests_hold_no_worker() {
    let s = start_full(
        fake::five_nodes(),
        subscribed(),
        ServerOptions {
            workers: 2,
            ..options()
        },
    );
    let hosts: Vec<String> = (1..=5)
        .map(|i| format!("storage-0{i}.dc1.example"))
        .collect();
    let mut waiting = Vec::new();
    for h in &hosts {
        let v = call(s.addr, "GET", h, "plan", b"").json()["version"]
            .as_u64()
            .unwrap();
        let (addr, h) = (s.addr, h.clone());
        waiting.push(std::thread::spawn(move || {
            call(addr, "GET", &h, &format!("plan?version={v}&wait=30"), b"")
        }));
    }
    wait_until("five waits", || {
        get(s.addr, "/metrics")
            .text()
            .contains("storage_scheduler_executor_plan_waits 5")
    });
    let started = std::time::Instant::now();
    let mut c = fake::connect(s.addr);
    c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    c.write_all(b"GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let r = read_response(&mut c, &mut Vec::new(), false).expect("health answered");
    assert_eq!(r.status, 200);
    assert!(started.elapsed() < Duration::from_secs(2));
    s.fake.change(|state, _| {
        for mut n in state.model.nodes.values_mut() {
            n.attached = vec!["/dev/sdz".into()];
        }
    });
    for w in waiting {
        let r = w.join().unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.json()["attached"], serde_json::json!(["/dev/sdz"]));
    }
}

/// A long poll whose reader takes nothing holds up no other: its answer (larger than any
/// socket buffer) goes out in the background while the next wait is answered at once.
#[test]
fn a_slow_long_poll_reader_does_not_delay_the_others() {
    let s = start_full(
        fake::five_nodes(),
        subscribed(),
        ServerOptions {
            write_timeout: Duration::from_secs(20),
            ..options()
        },
    );
    let version = |h: &str| call(s.addr, "GET", h, "plan", b"").json()["version"].as_u64();
    let (v2, v3) = (version(H2).unwrap(), version(H3).unwrap());
    // H2 asks and never reads.
    let mut slow = fake::connect(s.addr);
    let ask = format!(
        "GET /api/v1/executors/{}/plan?version={v2}&wait=30 HTTP/1.1\r\nHost: t\r\n\
         Authorization: Bearer {}\r\n\r\n",
        fake::executor_id(H2),
        fake::secret_of(H2)
    );
    slow.write_all(ask.as_bytes()).unwrap();
    let mut other = fake::connect(s.addr);
    let ask = format!(
        "GET /api/v1/executors/{}/plan?version={v3}&wait=30 HTTP/1.1\r\nHost: t\r\n\
         Authorization: Bearer {}\r\n\r\n",
        fake::executor_id(H3),
        fake::secret_of(H3)
    );
    other.write_all(ask.as_bytes()).unwrap();
    other
        .set_read_timeout(Some(Duration::from_secs(28)))
        .unwrap();
    let fast = std::thread::spawn(move || read_response(&mut other, &mut Vec::new(), false));
    wait_until("two waits", || {
        get(s.addr, "/metrics")
            .text()
            .contains("storage_scheduler_executor_plan_waits 2")
    });
    // H2's new plan is some 8 MB: far more than the kernel buffers between the two ends.
    s.fake.change(|state, _| {
        for mut n in state.model.nodes.values_mut() {
            if n.hostname == H2 {
                n.attached = (0..200_000)
                    .map(|i| format!("/dev/disk/by-id/scsi-0000000000000000{i:08}"))
                    .collect();
            }
        }
    });
    let changed = std::time::Instant::now();
    s.fake.change(|state, _| {
        for mut n in state.model.nodes.values_mut() {
            if n.hostname == H3 {
                n.attached = vec!["/dev/sdq".into()];
            }
        }
    });
    let r = fast.join().unwrap().expect("the other long poll answered");
    let took = changed.elapsed();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["attached"], serde_json::json!(["/dev/sdq"]));
    assert!(
        took < Duration::from_secs(3),
        "the other long poll was answered {:.1} s after its change",
        took.as_secs_f64()
    );
    // The slow reader still gets its whole answer once it reads.
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let r = read_response(&mut slow, &mut Vec::new(), false).expect("the large plan");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["attached"].as_array().map(Vec::len), Some(200_000));
}

#[test]
fn only_mdm_plans_carry_the_gateway_password() {
    let s = start();
    s.fake
        .change(|_, api| api.set_mdm_gateway_password(Some(Secret::new("Gateway-Pa55word!"))));
    let mdm = call(s.addr, "GET", "storage-01.dc1.example", "plan", b"");
    assert_eq!(mdm.status, 200);
    assert_eq!(
        mdm.json()["secrets"]["gateway_password"],
        "Gateway-Pa55word!"
    );
    let data = call(s.addr, "GET", "storage-04.dc1.example", "plan", b"");
    assert_eq!(data.status, 200);
    assert!(!data.text().contains("Gateway-Pa55word!"));
    assert!(data.json().get("secrets").is_none());
    for path in ["/api/state", "/ui", "/metrics", "/health"] {
        assert!(
            !get(s.addr, path).text().contains("Gateway-Pa55word!"),
            "{path}"
        );
    }
    assert!(!logged().iter().any(|l| l.contains("Gateway-Pa55word!")));
}

#[test]
fn long_polls_are_limited_and_end_when_the_server_stops() {
    let s = start_full(
        fake::five_nodes(),
        subscribed(),
        ServerOptions {
            max_long_polls: 1,
            ..options()
        },
    );
    let plan = call(s.addr, "GET", H2, "plan", b"").json();
    let v = plan["version"].as_u64().unwrap();
    let addr = s.addr;
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(call(
            addr,
            "GET",
            H2,
            &format!("plan?version={v}&wait=60"),
            b"",
        ));
    });
    wait_until("the first wait", || {
        get(addr, "/metrics")
            .text()
            .contains("storage_scheduler_executor_plan_waits 1")
    });
    let r = call(s.addr, "GET", H3, "plan?version=5&wait=60", b"");
    assert_json_error(&r, 503, "too many waiting executors", "retry later");
    assert_eq!(r.header("retry-after"), Some("5"));
    // A request without a wait still gets through.
    assert_eq!(call(s.addr, "GET", H3, "plan", b"").status, 200);

    drop(s);
    let r = rx
        .recv_timeout(Duration::from_secs(15))
        .expect("the waiting request ends when the server stops, not after its 60 s");
    assert_json_error(&r, 503, "server stopping", "shutting down");
}

// ---- HTTP errors and robustness ----

#[test]
fn unknown_paths_and_wrong_methods() {
    let s = start();
    let r = get(s.addr, "/nope");
    assert_json_error(&r, 404, "not found", "/nope");
    let r = get(
        s.addr,
        &format!("/api/v1/executors/{}/dance", fake::executor_id(H2)),
    );
    assert_json_error(
        &r,
        404,
        "not found",
        "expected plan, phase, devices, heartbeat, health or rollout",
    );
    let r = get(s.addr, "/api/v1/executors/just-an-id");
    assert_json_error(&r, 404, "not found", "/api/v1/executors/just-an-id");

    let r = request(s.addr, "POST", "/api/state", &[], b"{}");
    assert_json_error(&r, 405, "method not allowed", "GET or HEAD");
    assert_eq!(r.header("allow"), Some("GET, HEAD"));
    let r = request(s.addr, "DELETE", "/ui", &[], b"");
    assert_eq!(r.status, 405);
    let r = call(s.addr, "GET", H2, "phase", b"");
    assert_json_error(&r, 405, "method not allowed", "POST");
    assert_eq!(r.header("allow"), Some("POST"));
    let r = call(s.addr, "POST", H2, "plan", b"{}");
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET"));
    assert_still_serving(s.addr);
}

#[test]
fn oversized_bodies_get_413_without_being_read() {
    let s = start();
    let path = format!("/api/v1/executors/{}/phase", fake::executor_id(H2));
    // With the right secret: without it the call ends before its size matters.
    let auth = format!("Authorization: Bearer {}", secret_of(H2));
    // Announced far beyond the limit: refused from the headers alone.
    let r = exchange(
        s.addr,
        format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\n{auth}\r\nContent-Length: 1099511627776\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_json_error(&r, 413, "request body too large", "at most 1048576");
    // With Expect: 100-continue the client is told before it sends anything.
    let r = exchange(
        s.addr,
        format!(
            "POST {path} HTTP/1.1\r\nHost: t\r\n{auth}\r\nExpect: 100-continue\r\nContent-Length: 2097152\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_json_error(&r, 413, "request body too large", "2097152");
    // Actually sent: one byte over the limit.
    let mut conn = fake::connect(s.addr);
    let body = vec![b' '; 1024 * 1024 + 1];
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: t\r\n{auth}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let mut writer = conn.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let _ = writer.write_all(head.as_bytes());
        let _ = writer.write_all(&body);
    });
    let r = read_response(&mut conn, &mut Vec::new(), false).expect("a response");
    assert_json_error(&r, 413, "request body too large", "1048577");
    let _ = sender.join();
    // Exactly the limit is accepted (and then judged as JSON).
    let mut body = vec![b' '; 1024 * 1024];
    body.splice(0..2, *b"{}");
    let r = call(s.addr, "POST", H2, "heartbeat", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_still_serving(s.addr);
}

#[test]
fn malformed_requests_get_json_errors() {
    let s = start();
    for (raw, status, error) in [
        (&b"GARBAGE\r\n\r\n"[..], 400, "bad request"),
        (
            b"GET /version HTTP/9.9\r\n\r\n",
            505,
            "HTTP version not supported",
        ),
        (
            b"GET /version HTTP/1.1\r\nNo-Colon-Here\r\n\r\n",
            400,
            "bad request",
        ),
        (
            b"GET /version HTTP/1.1\r\nContent-Length: nine\r\n\r\n",
            400,
            "bad request",
        ),
        (
            b"POST /version HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            411,
            "length required",
        ),
        (
            b"GET /version HTTP/1.1\r\nExpect: tea\r\n\r\n",
            417,
            "expectation failed",
        ),
        (
            b"GET /version HTTP/1.1\r\nHost: \xff\xfe\r\n\r\n",
            400,
            "bad request",
        ),
        (
            b"GET /version HTTP/1.1\r\nAuthorization Bearer hidden-token-1234\r\n\r\n",
            400,
            "bad request",
        ),
    ] {
        let r = exchange(s.addr, raw);
        assert_eq!(
            r.status,
            status,
            "{:?}: {}",
            String::from_utf8_lossy(raw),
            r.text()
        );
        assert_eq!(r.error().0, error);
        assert!(
            !r.text().contains("hidden-token"),
            "a header line echoed: {}",
            r.text()
        );
        assert_still_serving(s.addr);
    }
    // A head beyond 16 KiB.
    let mut raw = b"GET /version HTTP/1.1\r\nX-Filler: ".to_vec();
    raw.extend(std::iter::repeat_n(b'a', 20_000));
    raw.extend_from_slice(b"\r\n\r\n");
    let r = exchange(s.addr, &raw);
    assert_json_error(&r, 431, "request head too large", "16384");
    let mut raw = b"GET /version HTTP/1.1\r\n".to_vec();
    for i in 0..150 {
        raw.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
    }
    raw.extend_from_slice(b"\r\n");
    let r = exchange(s.addr, &raw);
    assert_json_error(&r, 431, "too many headers", "100");
    assert_still_serving(s.addr);
}

#[test]
fn keep_alive_pipelining_and_http10() {
    let s = start();
    let mut conn = fake::connect(s.addr);
    conn.write_all(
        b"GET /version HTTP/1.1\r\nHost: t\r\n\r\nGET /health HTTP/1.1\r\nHost: t\r\n\r\n",
    )
    .unwrap();
    let mut buf = Vec::new();
    let a = read_response(&mut conn, &mut buf, false).unwrap();
    let b = read_response(&mut conn, &mut buf, false).unwrap();
    assert_eq!(a.status, 200);
    assert!(a.json().get("versionstr").is_some());
    assert_eq!(b.json()["status"], "subscribed");
    assert_eq!(b.header("connection"), Some("keep-alive"));
    // Same connection, once more.
    conn.write_all(b"GET /version HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let c = read_response(&mut conn, &mut buf, false).unwrap();
    assert_eq!(c.status, 200);
    assert_eq!(c.header("connection"), Some("close"));

    // Expect: 100-continue is answered before the body is sent.
    let mut conn = fake::connect(s.addr);
    let auth = format!("Bearer {}", secret_of(H2));
    conn.write_all(
        format!(
            "POST /api/v1/executors/{}/heartbeat HTTP/1.1\r\nHost: t\r\nAuthorization: {auth}\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
            fake::executor_id(H2)
        )
        .as_bytes(),
    )
    .unwrap();
    let mut interim = [0u8; 25];
    std::io::Read::read_exact(&mut conn, &mut interim).unwrap();
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    conn.write_all(b"{}").unwrap();
    let r = read_response(&mut conn, &mut Vec::new(), false).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());

    let r = exchange(s.addr, b"GET /version HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("connection"), Some("close"));
}

fn slow_options() -> ServerOptions {
    ServerOptions {
        workers: 2,
        queue: 8,
        request_timeout: Duration::from_millis(800),
        ..options()
    }
}

#[test]
fn stalled_bodies_are_cut_off_and_do_not_block_others() {
    let s = start_full(fake::five_nodes(), subscribed(), slow_options());
    let path = format!("/api/v1/executors/{}/phase", fake::executor_id(H2));
    let auth = format!("Authorization: Bearer {}", secret_of(H2));
    // Two clients send headers and part of the body, then stall: both workers are held.
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let mut c = fake::connect(s.addr);
        c.write_all(
            format!(
                "POST {path} HTTP/1.1\r\nHost: t\r\n{auth}\r\nContent-Length: 100\r\n\r\n{{\"pha"
            )
            .as_bytes(),
        )
        .unwrap();
        stalled.push(c);
    }
    // Others are still served once the stalled ones are cut off.
    assert_still_serving(s.addr);
    for mut c in stalled {
        let r = read_response(&mut c, &mut Vec::new(), false).expect("a 408 response");
        assert_json_error(&r, 408, "request timeout", "not received completely");
    }
    assert!(get(s.addr, "/metrics")
        .text()
        .contains("storage_scheduler_http_timeouts_total 2"));
}

/// One deadline per response. A client that reads the executor binary a little at a
/// time keeps every single write() short, yet is cut off once the response as a whole has
/// taken `write_timeout`; the worker is free again.
#[test]
fn a_slow_reader_is_cut_off_after_one_deadline_per_response() {
    let opts = ServerOptions {
        workers: 1,
        write_timeout: Duration::from_secs(1),
        ..slow_options()
    };
    let s = start_full(fake::five_nodes(), subscribed(), opts);
    // Far more than the socket buffers hold, so the server must wait for the reader.
    std::fs::write(&s.binary, vec![7u8; 32 << 20]).unwrap();
    let mut c = fake::connect(s.addr);
    c.write_all(b"GET /storage-executor HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    // The slow reader goes on in the background: about 1 MB/s, so every write the server
    // makes progresses well within the deadline, but the whole body takes half a minute.
    let (reading, started_reading) = crossbeam_channel::bounded(1);
    let reader = std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_secs(8) {
            match std::io::Read::read(&mut c, &mut buf) {
                Ok(0) | Err(_) => return true,
                Ok(_) => {
                    let _ = reading.try_send(());
                    std::thread::sleep(Duration::from_millis(50))
                }
            }
        }
        false
    });
    // The single worker is busy with the reader before the other client comes.
    started_reading
        .recv_timeout(Duration::from_secs(10))
        .expect("the slow reader got the start of the body");
    // The single worker is free again within about the deadline, while the reader still
    // reads: another client is served.
    let mut other = fake::connect(s.addr);
    other
        .set_read_timeout(Some(Duration::from_secs(4)))
        .unwrap();
    other
        .write_all(b"GET /version HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let r = read_response(&mut other, &mut Vec::new(), false)
        .expect("served while the slow reader still reads");
    assert_eq!(r.status, 200);
    assert!(reader.join().unwrap(), "the slow reader was never cut off");
}

#[test]
fn stalled_heads_and_silent_connections_are_cut_off() {
    let s = start_full(fake::five_nodes(), subscribed(), slow_options());
    let mut half = fake::connect(s.addr);
    half.write_all(b"GET /version HTTP/1.1\r\nHost: t\r\nX-Slow: ")
        .unwrap();
    let mut silent = fake::connect(s.addr);
    assert_still_serving(s.addr);
    let r = read_response(&mut half, &mut Vec::new(), false).expect("a 408 response");
    assert_eq!(r.status, 408);
    // A connection that never sends a byte is closed without a response.
    let mut buf = Vec::new();
    let n = std::io::Read::read_to_end(&mut silent, &mut buf).expect("closed, not timed out");
    assert_eq!(n, 0);
}

#[test]
fn idle_keep_alive_connections_yield_their_worker() {
    let s = start_full(
        fake::five_nodes(),
        subscribed(),
        ServerOptions {
            workers: 1,
            idle_timeout: Duration::from_secs(600),
            ..options()
        },
    );
    let mut idle = fake::connect(s.addr);
    idle.write_all(b"GET /version HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let r = read_response(&mut idle, &mut Vec::new(), false).unwrap();
    assert_eq!(r.header("connection"), Some("keep-alive"));
    // The only worker now waits on `idle`; a new client must still get an answer long
    // before the 600 s idle timeout.
    assert_still_serving(s.addr);
}

#[test]
fn a_full_queue_gets_503() {
    let s = start_full(
        fake::five_nodes(),
        subscribed(),
        ServerOptions {
            workers: 1,
            queue: 1,
            request_timeout: Duration::from_secs(30),
            // Every connection here comes from one address: its share is not the limit.
            per_address: 100,
            ..options()
        },
    );
    // The worker is held by a stalled request, the queue by a second connection.
    let mut holder = fake::connect(s.addr);
    holder
        .write_all(b"POST /api/state HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n")
        .unwrap();
    let _queued = fake::connect(s.addr);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let r = loop {
        // The acceptor may take a moment to queue `_queued`; until the queue is full a
        // probe is itself queued, so probe with fresh connections until one is refused.
        let mut probe = fake::connect(s.addr);
        probe
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        probe
            .write_all(b"GET /version HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        match read_response(&mut probe, &mut Vec::new(), false) {
            Ok(r) => break r,
            Err(_) => assert!(
                std::time::Instant::now() < deadline,
                "no 503 while the queue was full"
            ),
        }
    };
    assert_json_error(&r, 503, "server busy", "retry shortly");
    assert_eq!(r.header("retry-after"), Some("1"));
    holder.write_all(b"0123456789").unwrap();
    let r = read_response(&mut holder, &mut Vec::new(), false).unwrap();
    assert_eq!(r.status, 405, "the held request completes normally");
}

// ---- secrets ----

#[test]
fn no_secret_in_responses_or_logs() {
    let s = start();
    let secrets: Vec<String> = fake::five_nodes()
        .model
        .nodes
        .values()
        .map(|n| fake::secret_of(&n.hostname))
        .collect();
    assert_eq!(secrets.len(), 5);
    // Authenticated calls of every kind, and failed ones, so that every logging path runs.
    let wrong = "Bearer wrong-secret-0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f";
    for host in [H2, H3] {
        assert_eq!(call(s.addr, "POST", host, "heartbeat", b"").status, 200);
        assert_eq!(
            call(
                s.addr,
                "POST",
                host,
                "phase",
                br#"{"phase":"devices","error":"e"}"#
            )
            .status,
            200
        );
        assert_eq!(
            call(
                s.addr,
                "POST",
                host,
                "devices",
                br#"{"devices":["/dev/sdx"]}"#
            )
            .status,
            200
        );
        assert_eq!(call(s.addr, "GET", host, "plan", b"").status, 200);
        assert_eq!(call(s.addr, "POST", host, "phase", b"{bad").status, 400);
        let path = format!("/api/v1/executors/{}/heartbeat", fake::executor_id(host));
        assert_eq!(
            request(s.addr, "POST", &path, &[("Authorization", wrong)], b"").status,
            401
        );
    }
    for path in [
        "/api/state",
        "/",
        "/ui",
        "/ui?partial=1",
        "/metrics",
        "/health",
        "/version",
    ] {
        let body = get(s.addr, path).text();
        for secret in &secrets {
            assert!(
                !body.contains(secret.as_str()),
                "{path} shows an executor secret"
            );
        }
        assert!(!body.contains("wrong-secret-"), "{path}");
    }
    // A mangled Authorization line is refused without being echoed or logged.
    let r = exchange(
        s.addr,
        b"GET /version HTTP/1.1\r\nAuthorization Bearer hidden-token-1234\r\n\r\n",
    );
    assert_eq!(r.status, 400);
    let lines = logged();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("/api/v1/executors/") && l.contains("/heartbeat")),
        "request logging was not captured; the check below would prove nothing"
    );
    for line in &lines {
        for secret in &secrets {
            assert!(
                !line.contains(secret.as_str()),
                "secret in log line {line:?}"
            );
        }
        assert!(
            !line.contains("wrong-secret-"),
            "presented token in log line {line:?}"
        );
        assert!(
            !line.contains("hidden-token"),
            "a header line in log line {line:?}"
        );
        assert!(
            !line.to_ascii_lowercase().contains("bearer"),
            "credentials in log line {line:?}"
        );
        assert!(
            !line.contains("/dev/sdx\"]"),
            "request body in log line {line:?}"
        );
    }
}

// ---- a dispatcher that hangs or is gone ----

#[test]
fn a_stuck_or_gone_dispatcher_gives_503_not_a_hang() {
    capture_logs();
    let (tx, rx) = crossbeam_channel::unbounded();
    let rest = rest::start_with(
        RestConfig {
            port: 0,
            executor_binary: Arc::new(
                storage_framework::scheduler::executor_binary::ExecutorBinary::new(
                    temp_dir().join("storage-executor"),
                ),
            ),
            inputs: tx,
            metrics: Arc::new(Metrics::default()),
            secrets: None,
            state_warning: None,
            tls: None,
            operator_token: None,
        },
        ServerOptions {
            dispatcher_timeout: Duration::from_millis(300),
            ..options()
        },
    )
    .expect("REST server");
    let addr = rest.local_addr();
    // Nobody reads `rx`: every question to the dispatcher times out.
    let r = get(addr, "/api/state");
    assert_json_error(&r, 503, "scheduler busy", "did not answer within 0.3 s");
    assert_eq!(r.header("retry-after"), Some("1"));
    let r = get(addr, "/ui");
    assert_eq!(r.status, 503);
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    assert!(r.text().contains("scheduler busy"), "{}", r.text());
    let r = get(addr, "/metrics");
    assert_eq!(r.status, 200, "counters are served without the dispatcher");
    assert!(r.text().contains("storage_scheduler_events_total"));
    assert!(!r.text().contains("storage_scheduler_nodes{"));
    let r = call(addr, "POST", H2, "heartbeat", b"");
    assert_json_error(&r, 503, "scheduler busy", "did not answer");
    assert_still_serving(addr);

    drop(rx);
    let r = get(addr, "/health");
    assert_json_error(&r, 503, "scheduler stopping", "dispatcher");
    let r = call(addr, "POST", H2, "heartbeat", b"");
    assert_json_error(&r, 503, "scheduler stopping", "dispatcher");
}

/// Every route of the contract's table reaches the router's secret check with its method
/// (a missing secret is 401, not 404 or 405), and no other method is taken.
#[test]
fn every_route_of_the_contract_is_served() {
    use storage_framework::contract::api::{self, Method, ROUTES};
    let s = start();
    for r in ROUTES {
        let path = api::path(&fake::executor_id(H2), r.action);
        let reply = request(s.addr, r.method.as_str(), &path, &[], b"");
        assert_json_error(&reply, 401, "unauthorized", "Bearer");
        let other = match r.method {
            Method::Get => "POST",
            Method::Post => "GET",
        };
        let reply = request(s.addr, other, &path, &[], b"");
        assert_eq!(reply.status, 405, "{other} {path}: {}", reply.text());
    }
}
