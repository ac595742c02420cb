//! The operator API's gate and routes on the real REST server: no token configured (403
//! naming the settings), a missing or wrong token (401, the dispatcher never asked), the
//! right one (the command reaches the dispatcher, its outcome is the answer), and
//! `/api/events`. The dispatcher is a small stand-in that records the commands it gets.
#![cfg(feature = "scheduler")]

#[path = "support/rest_fake.rs"]
mod fake;

use crossbeam_channel::Receiver;
use fake::{request, Reply};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;
use storage_framework::rest::{self, RestConfig, RestHandle, ServerOptions};
use storage_framework::scheduler::exchange::{Input, LoggedEvent, View};
use storage_framework::scheduler::metrics::Metrics;
use storage_framework::scheduler::model::ClusterModel;
use storage_framework::scheduler::operator::{Command, Outcome};
use storage_framework::secret::Secret;

const TOKEN: &str = "rest-operator-test-token-5b1e";

struct Server {
    _rest: RestHandle,
    addr: SocketAddr,
    /// What the stand-in dispatcher was asked, in order.
    commands: Arc<Mutex<Vec<Command>>>,
    /// Views it gave.
    views: Arc<AtomicUsize>,
}

/// Answers views (one event in them) and commands (refusing to restart `busy`).
fn dispatcher(
    inputs: Receiver<Input>,
    commands: Arc<Mutex<Vec<Command>>>,
    views: Arc<AtomicUsize>,
) {
    let event = LoggedEvent {
        at_ms: 1,
        kind: "action",
        action: "pause".into(),
        target: "plan".into(),
        outcome: "accepted".into(),
        message: "paused".into(),
    };
    for input in inputs {
        match input {
            Input::View(reply) => {
                views.fetch_add(1, Ordering::SeqCst);
                let _ = reply.send(Arc::new(View {
                    subscribed: true,
                    master: None,
                    disconnected_reason: None,
                    suppressed: false,
                    attach_queue: Default::default(),
                    model: ClusterModel::default(),
                    generated_ms: 1,
                    generation: 1,
                    events: Arc::new(vec![event.clone()]),
                }));
            }
            Input::Operator(req) => {
                let busy = req.command.target() == "busy";
                commands.lock().unwrap().push(req.command);
                let _ = req.reply.send(if busy {
                    Outcome::refused("busy is upgrading")
                } else {
                    Outcome::done("done")
                });
            }
            _ => {}
        }
    }
}

fn start(token: Option<&str>) -> Server {
    start_with(token, ServerOptions::default().view_max_age)
}

fn start_with(token: Option<&str>, view_max_age: Duration) -> Server {
    let (tx, rx) = crossbeam_channel::unbounded();
    let commands = Arc::new(Mutex::new(Vec::new()));
    let views = Arc::new(AtomicUsize::new(0));
    let (seen, given) = (commands.clone(), views.clone());
    thread::spawn(move || dispatcher(rx, seen, given));
    let dir = std::env::temp_dir().join(format!("rest-operator-{}", std::process::id()));
    let rest = rest::start_with(
        RestConfig {
            port: 0,
            executor_binary: Arc::new(
                storage_framework::scheduler::executor_binary::ExecutorBinary::new(
                    dir.join("storage-executor"),
                ),
            ),
            inputs: tx,
            metrics: Arc::new(Metrics::default()),
            secrets: None,
            state_warning: None,
            tls: None,
            operator_token: token.map(Secret::new),
        },
        ServerOptions {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            view_max_age,
            ..ServerOptions::default()
        },
    )
    .expect("REST server starts");
    let addr = rest.local_addr();
    Server {
        _rest: rest,
        addr,
        commands,
        views,
    }
}

fn post(s: &Server, path: &str, auth: Option<&str>) -> (u16, Value) {
    let header = auth.map(|a| ("Authorization", a));
    let headers: Vec<(&str, &str)> = header.into_iter().collect();
    let Reply { status, body, .. } = request(s.addr, "POST", path, &headers, b"");
    let text = String::from_utf8_lossy(&body).into_owned();
    assert!(!text.contains(TOKEN), "the token is echoed: {text}");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[test]
fn without_a_token_configured_every_write_answers_403_naming_the_settings() {
    let s = start(None);
    let bearer = format!("Bearer {TOKEN}");
    for path in [
        "/api/plan/pause",
        "/api/nodes/h1/restart",
        "/api/nodes/h1/devices/sdb/remove",
    ] {
        let (status, body) = post(&s, path, Some(&bearer));
        assert_eq!(status, 403, "{path}: {body}");
        let detail = body["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("-rest.operator.token.file")
                && detail.contains("STORAGE_OPERATOR_TOKEN"),
            "{detail}"
        );
    }
    assert!(s.commands.lock().unwrap().is_empty());
}

#[test]
fn a_missing_or_wrong_token_is_refused_before_the_dispatcher_hears_of_it() {
    let s = start(Some(TOKEN));
    let near = format!("Bearer {}X", &TOKEN[..TOKEN.len() - 1]);
    for auth in [
        None,
        Some("Basic b3A6b3A="),
        Some(near.as_str()),
        Some("Bearer "),
    ] {
        let (status, body) = post(&s, "/api/plan/pause", auth);
        assert_eq!(status, 401, "{auth:?}: {body}");
    }
    assert!(
        s.commands.lock().unwrap().is_empty(),
        "a refused command reached the dispatcher"
    );
}

#[test]
fn the_right_token_carries_the_command_and_its_outcome_is_the_answer() {
    let s = start(Some(TOKEN));
    let bearer = format!("Bearer {TOKEN}");
    let (status, body) = post(&s, "/api/plan/pause", Some(&bearer));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["action"], "pause");
    assert_eq!(body["outcome"], "accepted");
    let (status, body) = post(&s, "/api/nodes/busy/restart", Some(&bearer));
    assert_eq!(
        (status, body["outcome"].as_str()),
        (409, Some("refused")),
        "{body}"
    );
    assert_eq!(body["message"], "busy is upgrading");
    let (status, body) = post(&s, "/api/nodes/h1/reboot", Some(&bearer));
    assert_eq!(status, 400, "{body}");
    assert!(body["detail"]
        .as_str()
        .unwrap()
        .contains("unknown node action"));
    assert_eq!(s.commands.lock().unwrap().len(), 2);
    // A read of a write's path is not a write.
    let Reply { status, .. } = request(s.addr, "GET", "/api/plan/pause", &[], b"");
    assert_eq!(status, 405);
}

#[test]
fn events_are_served_to_anyone_newest_first() {
    let s = start(Some(TOKEN));
    let Reply { status, body, .. } = request(s.addr, "GET", "/api/events", &[], b"");
    assert_eq!(status, 200);
    let v: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["events"][0]["action"], "pause");
    assert_eq!(v["events"][0]["kind"], "action");
}

#[test]
fn reads_share_a_view_and_an_operators_write_is_seen_by_the_next_read() {
    // Long enough that no read here finds the view aged.
    let s = start_with(Some(TOKEN), Duration::from_secs(600));
    for path in ["/api/events", "/api/state", "/metrics", "/api/events"] {
        let Reply { status, .. } = request(s.addr, "GET", path, &[], b"");
        assert_eq!(status, 200, "{path}");
    }
    assert_eq!(s.views.load(Ordering::SeqCst), 1, "one view for every read");
    let (status, body) = post(&s, "/api/plan/pause", Some(&format!("Bearer {TOKEN}")));
    assert_eq!(status, 200, "{body}");
    let Reply { status, .. } = request(s.addr, "GET", "/api/events", &[], b"");
    assert_eq!(status, 200);
    assert_eq!(
        s.views.load(Ordering::SeqCst),
        2,
        "the read after the write asked the dispatcher"
    );
}
