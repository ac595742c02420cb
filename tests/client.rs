//! The Mesos v1 HTTP client against scripted servers on real loopback sockets. The servers
//! are raw `TcpListener`s so that every byte of a response (chunking, odd statuses, odd
//! headers) is under the test's control, and they report each request they received so the
//! tests can assert on what actually went over the wire.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use storage_framework::mesos::client::{
    get_json, ClientConfig, ClientError, EventStream, ExecutorClient, SchedulerClient,
    SchedulerItem, StreamError, MAX_ERROR_MESSAGE,
};
use storage_framework::mesos::proto::Message;
use storage_framework::mesos::{
    executor, recordio, scheduler, AgentID, Bytes, Encoding, ExecutorID, FrameworkID,
    FrameworkInfo, Offer, OfferID,
};
use storage_framework::scheduler::master::client_config_for;

/// Generous bound for anything that should happen "promptly"; only hit when broken.
const DEADLINE: Duration = Duration::from_secs(10);

// ---------------------------------------------------------------------------------------
// Scripted server

#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

type Handler = dyn Fn(usize, &Received, &mut TcpStream) + Send + Sync;

struct Server {
    addr: String,
    requests: mpsc::Receiver<Received>,
    stop: Arc<AtomicBool>,
}

impl Server {
    /// Accepts connections until dropped; each one is read as one request, reported, and
    /// handed to `handler` with its connection index (0 for the first).
    fn start(handler: impl Fn(usize, &Received, &mut TcpStream) + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let addr = listener.local_addr().expect("local addr").to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, requests) = mpsc::channel();
        let handler: Arc<Handler> = Arc::new(handler);
        let stopping = stop.clone();
        thread::spawn(move || {
            for (index, conn) in listener.incoming().enumerate() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(mut conn) = conn else { continue };
                let tx = tx.clone();
                let handler = handler.clone();
                thread::spawn(move || {
                    conn.set_read_timeout(Some(DEADLINE)).ok();
                    let Ok(request) = read_request(&mut conn) else {
                        return;
                    };
                    tx.send(request.clone()).ok();
                    handler(index, &request, &mut conn);
                });
            }
        });
        Server {
            addr,
            requests,
            stop,
        }
    }

    /// The next request the server received (waits for it, within the deadline).
    fn request(&self) -> Received {
        self.requests
            .recv_timeout(DEADLINE)
            .expect("server received no request")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the blocking accept so the thread sees the flag.
        TcpStream::connect(&self.addr).ok();
    }
}

fn read_request(conn: &mut TcpStream) -> io::Result<Received> {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut start = lines.next().unwrap_or("").split(' ');
    let method = start.next().unwrap_or("").to_string();
    let path = start.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = raw[head_end + 4..].to_vec();
    while body.len() < length {
        let n = conn.read(&mut buf)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        body.extend_from_slice(&buf[..n]);
    }
    Ok(Received {
        method,
        path,
        headers,
        body,
    })
}

fn respond(conn: &mut TcpStream, status: &str, headers: &[(&str, &str)], body: &[u8]) {
    let mut out = format!("HTTP/1.1 {status}\r\n");
    for (n, v) in headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    conn.write_all(&bytes).ok();
}

/// Response head of an event stream in chunked transfer encoding.
fn stream_head(conn: &mut TcpStream, content_type: &str, stream_id: Option<&str>) {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n"
    );
    if let Some(id) = stream_id {
        out.push_str(&format!("Mesos-Stream-Id: {id}\r\n"));
    }
    out.push_str("\r\n");
    conn.write_all(out.as_bytes()).ok();
}

fn chunk(conn: &mut TcpStream, data: &[u8]) {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    conn.write_all(&out).ok();
    conn.flush().ok();
}

fn end_chunks(conn: &mut TcpStream) {
    conn.write_all(b"0\r\n\r\n").ok();
}

/// Lets a handler hold its connection open until the test says so (or ends).
fn gate() -> (mpsc::Sender<()>, Arc<Mutex<mpsc::Receiver<()>>>) {
    let (tx, rx) = mpsc::channel();
    (tx, Arc::new(Mutex::new(rx)))
}

fn wait_gate(gate: &Mutex<mpsc::Receiver<()>>) {
    if let Ok(rx) = gate.lock() {
        rx.recv_timeout(DEADLINE * 3).ok();
    }
}

// ---------------------------------------------------------------------------------------
// Messages

fn subscribe_call() -> scheduler::Call {
    scheduler::Call {
        r#type: Some(scheduler::call::Type::Subscribe),
        subscribe: Some(scheduler::call::Subscribe {
            framework_info: FrameworkInfo {
                user: "root".into(),
                name: "storage-framework".into(),
                failover_timeout: Some(604800.0),
                ..Default::default()
            },
            suppressed_roles: vec![],
        }),
        ..Default::default()
    }
}

fn decline_call() -> scheduler::Call {
    scheduler::Call {
        framework_id: Some(FrameworkID {
            value: "fw-1".into(),
        }),
        r#type: Some(scheduler::call::Type::Decline),
        decline: Some(scheduler::call::Decline {
            offer_ids: vec![OfferID {
                value: "offer-7".into(),
            }],
            filters: None,
        }),
        ..Default::default()
    }
}

fn scheduler_events() -> Vec<scheduler::Event> {
    use scheduler::event;
    vec![
        scheduler::Event {
            r#type: Some(event::Type::Subscribed),
            subscribed: Some(event::Subscribed {
                framework_id: FrameworkID {
                    value: "fw-1".into(),
                },
                heartbeat_interval_seconds: Some(15.0),
                master_info: None,
            }),
            ..Default::default()
        },
        scheduler::Event {
            r#type: Some(event::Type::Heartbeat),
            ..Default::default()
        },
        scheduler::Event {
            r#type: Some(event::Type::Error),
            error: Some(event::Error {
                message: "framework removed".into(),
            }),
            ..Default::default()
        },
    ]
}

fn framed<M: Message + serde::Serialize>(encoding: Encoding, events: &[M]) -> Vec<u8> {
    let mut out = Vec::new();
    for e in events {
        recordio::encode(&encoding.encode(e), &mut out);
    }
    out
}

fn config(encoding: Encoding) -> ClientConfig {
    ClientConfig {
        encoding,
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(5),
        stream_idle_timeout: Some(Duration::from_secs(5)),
        ..Default::default()
    }
}

const PROTOBUF: &str = "application/x-protobuf";
const JSON: &str = "application/json";

// ---------------------------------------------------------------------------------------
// Scheduler side

#[test]
fn subscribe_reads_a_chunked_recordio_stream_until_its_clean_end() {
    let body = framed(Encoding::Protobuf, &scheduler_events());
    let server = Server::start(move |_, _, conn| {
        stream_head(conn, PROTOBUF, Some("stream-42"));
        // Odd chunk sizes so records straddle chunk boundaries.
        for piece in body.chunks(7) {
            chunk(conn, piece);
        }
        end_chunks(conn);
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    let sub = client.subscribe(&subscribe_call()).expect("subscribe");
    assert_eq!(sub.stream_id, "stream-42");
    assert_eq!(client.stream_id(), Some("stream-42"));

    let events: Vec<_> = sub.events.collect::<Result<_, _>>().expect("events");
    assert_eq!(events, scheduler_events());

    let req = server.request();
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/api/v1/scheduler");
    assert_eq!(req.header("Content-Type"), Some(PROTOBUF));
    assert_eq!(req.header("Accept"), Some(PROTOBUF));
    assert_eq!(req.header("Mesos-Stream-Id"), None);
    assert_eq!(
        scheduler::Call::decode(&req.body).expect("call decodes"),
        subscribe_call()
    );
}

#[test]
fn next_event_returns_none_at_end_and_works_with_content_length_bodies() {
    let body = framed(Encoding::Protobuf, &scheduler_events()[..2]);
    let server = Server::start(move |_, _, conn| {
        respond(
            conn,
            "200 OK",
            &[("Content-Type", PROTOBUF), ("Mesos-Stream-Id", "s1")],
            &body,
        );
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    let mut events = client.subscribe(&subscribe_call()).unwrap().events;
    assert_eq!(
        events.next_event().unwrap(),
        Some(scheduler_events()[0].clone())
    );
    assert_eq!(
        events.next_event().unwrap(),
        Some(scheduler_events()[1].clone())
    );
    assert_eq!(events.next_event().unwrap(), None);
}

#[test]
fn calls_after_subscribe_carry_the_stream_id_and_content_type() {
    let (release, held) = gate();
    let first = framed(Encoding::Protobuf, &scheduler_events()[..1]);
    let server = Server::start(move |_, req, conn| {
        if req.header("Mesos-Stream-Id").is_some() {
            respond(conn, "202 Accepted", &[], b"");
        } else {
            stream_head(conn, PROTOBUF, Some("c0ffee-1"));
            chunk(conn, &first);
            wait_gate(&held);
        }
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    let mut sub = client.subscribe(&subscribe_call()).unwrap();
    assert_eq!(
        sub.events.next_event().unwrap(),
        Some(scheduler_events()[0].clone())
    );
    // The stream is still open: the call must use another connection.
    client.call(&decline_call()).expect("202");
    let _ = server.request(); // SUBSCRIBE
    let call = server.request();
    assert_eq!(call.method, "POST");
    assert_eq!(call.path, "/api/v1/scheduler");
    assert_eq!(call.header("Mesos-Stream-Id"), Some("c0ffee-1"));
    assert_eq!(call.header("Content-Type"), Some(PROTOBUF));
    assert_eq!(scheduler::Call::decode(&call.body).unwrap(), decline_call());

    // A clone made now carries the id too.
    let other = client.clone();
    other.call(&decline_call()).expect("202 from the clone");
    assert_eq!(server.request().header("Mesos-Stream-Id"), Some("c0ffee-1"));
    drop(release);
}

#[test]
fn a_call_before_subscribe_is_refused_without_a_request() {
    let client = SchedulerClient::new("127.0.0.1:9", config(Encoding::Protobuf)).unwrap();
    match client.call(&decline_call()) {
        Err(ClientError::NotSubscribed { endpoint }) => {
            assert!(
                endpoint.contains("127.0.0.1:9/api/v1/scheduler"),
                "{endpoint}"
            )
        }
        other => panic!("expected NotSubscribed, got {other:?}"),
    }
}

#[test]
fn json_encoding_sends_json_and_decodes_a_json_stream() {
    let body = framed(Encoding::Json, &scheduler_events());
    let server = Server::start(move |_, req, conn| {
        if req.header("Mesos-Stream-Id").is_some() {
            respond(conn, "202 Accepted", &[], b"");
            return;
        }
        stream_head(conn, "application/json", Some("json-stream"));
        for piece in body.chunks(11) {
            chunk(conn, piece);
        }
        end_chunks(conn);
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Json)).unwrap();
    let mut sub = client.subscribe(&subscribe_call()).unwrap();
    let mut got = Vec::new();
    while let Some(e) = sub.events.next_event().expect("json event") {
        got.push(e);
    }
    assert_eq!(got, scheduler_events());
    client.call(&decline_call()).expect("202");

    let req = server.request();
    assert_eq!(req.header("Content-Type"), Some(JSON));
    assert_eq!(req.header("Accept"), Some(JSON));
    let sent: serde_json::Value = serde_json::from_slice(&req.body).expect("JSON body");
    assert_eq!(sent["type"], "SUBSCRIBE");
    assert_eq!(
        sent["subscribe"]["framework_info"]["name"],
        "storage-framework"
    );

    let call = server.request();
    assert_eq!(call.header("Content-Type"), Some(JSON));
    assert_eq!(call.header("Mesos-Stream-Id"), Some("json-stream"));
    let sent: scheduler::Call = serde_json::from_slice(&call.body).expect("JSON call");
    assert_eq!(sent, decline_call());
}

#[test]
fn redirect_307_names_the_leader_and_a_client_for_it_subscribes() {
    let leader = Server::start(|_, _, conn| {
        stream_head(conn, PROTOBUF, Some("from-leader"));
        chunk(conn, &framed(Encoding::Protobuf, &scheduler_events()[..1]));
        end_chunks(conn);
    });
    let location = format!("//{}/master/api/v1/scheduler", leader.addr);
    let follower = Server::start(move |_, _, conn| {
        respond(
            conn,
            "307 Temporary Redirect",
            &[("Location", &location)],
            b"",
        );
    });

    let mut client = SchedulerClient::new(&follower.addr, config(Encoding::Protobuf)).unwrap();
    let err = client.subscribe(&subscribe_call()).expect_err("redirect");
    match &err {
        ClientError::Redirect {
            endpoint,
            leader: l,
        } => {
            assert_eq!(l, &leader.addr);
            assert!(endpoint.contains(&follower.addr), "{endpoint}");
        }
        other => panic!("expected Redirect, got {other:?}"),
    }
    assert_eq!(err.status(), Some(307));
    assert_eq!(client.stream_id(), None);

    let ClientError::Redirect { leader: to, .. } = err else {
        unreachable!()
    };
    let mut client = SchedulerClient::new(&to, config(Encoding::Protobuf)).unwrap();
    assert_eq!(client.master(), leader.addr);
    let mut sub = client
        .subscribe(&subscribe_call())
        .expect("leader subscribes");
    assert_eq!(sub.stream_id, "from-leader");
    assert!(sub.events.next_event().unwrap().is_some());
    assert_eq!(leader.request().path, "/api/v1/scheduler");
}

#[test]
fn redirect_on_a_call_accepts_an_absolute_location() {
    let (release, held) = gate();
    let server = Server::start(move |_, req, conn| {
        if req.header("Mesos-Stream-Id").is_some() {
            respond(
                conn,
                "307 Temporary Redirect",
                &[("Location", "http://10.1.2.3:5050/master/api/v1/scheduler")],
                b"",
            );
        } else {
            stream_head(conn, PROTOBUF, Some("s"));
            wait_gate(&held);
        }
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    let _sub = client.subscribe(&subscribe_call()).unwrap();
    match client.call(&decline_call()) {
        Err(ClientError::Redirect { leader, .. }) => assert_eq!(leader, "10.1.2.3:5050"),
        other => panic!("expected Redirect, got {other:?}"),
    }
    drop(release);
}

#[test]
fn redirect_without_a_usable_location_is_a_protocol_error() {
    let server = Server::start(|i, _, conn| {
        if i == 0 {
            respond(conn, "307 Temporary Redirect", &[], b"");
        } else {
            let headers = [("Location", "/master/api/v1/scheduler")];
            respond(conn, "307 Temporary Redirect", &headers, b"");
        }
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    for expected in ["without a Location", "unusable Location"] {
        match client.subscribe(&subscribe_call()) {
            Err(ClientError::Protocol { detail, .. }) => {
                assert!(detail.contains(expected), "{detail}")
            }
            other => panic!("expected Protocol, got {other:?}"),
        }
    }
}

#[test]
fn client_errors_are_rejected_with_the_masters_message() {
    let statuses = [
        "400 Bad Request",
        "401 Unauthorized",
        "403 Forbidden",
        "404 Not Found",
        "409 Conflict",
        "422 Unprocessable Entity",
    ];
    let server = Server::start(move |i, _, conn| {
        let body = format!("  \nFailed to validate scheduler::Call: reason {i}\n\n");
        respond(conn, statuses[i % statuses.len()], &[], body.as_bytes());
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    for (i, status) in [400u16, 401, 403, 404, 409, 422].into_iter().enumerate() {
        let err = client.subscribe(&subscribe_call()).expect_err("4xx");
        match &err {
            ClientError::Rejected {
                status: s, message, ..
            } => {
                assert_eq!(*s, status);
                assert_eq!(
                    message,
                    &format!("Failed to validate scheduler::Call: reason {i}")
                );
            }
            other => panic!("expected Rejected, got {other:?}"),
        }
        let shown = err.to_string();
        assert!(shown.contains(&status.to_string()), "{shown}");
        assert!(shown.contains(&server.addr), "{shown}");
    }
}

#[test]
fn a_huge_error_body_is_capped() {
    let server = Server::start(|_, _, conn| {
        let body = "x".repeat(MAX_ERROR_MESSAGE * 3);
        respond(conn, "400 Bad Request", &[], body.as_bytes());
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    match client.subscribe(&subscribe_call()) {
        Err(ClientError::Rejected { message, .. }) => {
            assert!(message.starts_with("xxxx"));
            assert!(
                message.ends_with("[truncated]"),
                "{}",
                &message[message.len() - 20..]
            );
            assert!(message.len() <= MAX_ERROR_MESSAGE + 20, "{}", message.len());
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
}

#[test]
fn server_errors_keep_status_and_message() {
    let server = Server::start(|_, _, conn| {
        respond(conn, "503 Service Unavailable", &[], b"No leader elected");
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    let err = client.subscribe(&subscribe_call()).expect_err("503");
    assert_eq!(
        err,
        ClientError::ServerError {
            endpoint: format!("POST http://{}/api/v1/scheduler", server.addr),
            status: 503,
            message: "No leader elected".into(),
        }
    );
    assert!(err.to_string().contains("503"));
}

#[test]
fn connection_refused_is_a_transport_error_naming_the_url() {
    let addr = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().to_string()
    };
    let mut client = SchedulerClient::new(&addr, config(Encoding::Protobuf)).unwrap();
    match client.subscribe(&subscribe_call()) {
        Err(ClientError::Transport(detail)) => {
            assert!(
                detail.contains(&format!("http://{addr}/api/v1/scheduler")),
                "{detail}"
            )
        }
        other => panic!("expected Transport, got {other:?}"),
    }
}

#[test]
fn a_malformed_response_is_a_transport_error() {
    let server = Server::start(|i, _, conn| {
        let raw: &[u8] = if i == 0 {
            b"HTTP/1.1 abc Nonsense\r\n\r\n"
        } else {
            b"hello there\r\n\r\n"
        };
        conn.write_all(raw).ok();
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    for _ in 0..2 {
        match client.subscribe(&subscribe_call()) {
            Err(ClientError::Transport(detail)) => {
                assert!(detail.contains(&server.addr), "{detail}")
            }
            other => panic!("expected Transport, got {other:?}"),
        }
    }
}

#[test]
fn subscribe_without_a_stream_id_or_in_the_wrong_encoding_is_refused() {
    let server = Server::start(|i, _, conn| {
        if i == 0 {
            stream_head(conn, PROTOBUF, None);
        } else {
            stream_head(conn, JSON, Some("s"));
        }
        end_chunks(conn);
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    match client.subscribe(&subscribe_call()) {
        Err(ClientError::Protocol { detail, .. }) => {
            assert!(detail.contains("Mesos-Stream-Id"), "{detail}")
        }
        other => panic!("expected Protocol, got {other:?}"),
    }
    assert_eq!(client.stream_id(), None);
    match client.subscribe(&subscribe_call()) {
        Err(ClientError::Protocol { detail, .. }) => assert!(detail.contains(JSON), "{detail}"),
        other => panic!("expected Protocol, got {other:?}"),
    }
}

#[test]
fn an_undecodable_record_is_skipped_and_a_truncated_one_is_an_error() {
    let good = framed(Encoding::Protobuf, &scheduler_events()[1..2]);
    let server = Server::start(move |_, _, conn| {
        let mut body = recordio::frame(&[0xff, 0xff, 0xff]);
        body.extend_from_slice(&good);
        body.extend_from_slice(b"100\nabc");
        respond(
            conn,
            "200 OK",
            &[("Content-Type", PROTOBUF), ("Mesos-Stream-Id", "s")],
            &body,
        );
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    let mut events = client.subscribe(&subscribe_call()).unwrap().events;
    match events.next_event() {
        Err(StreamError::Decode { endpoint, .. }) => assert!(endpoint.contains(&server.addr)),
        other => panic!("expected Decode, got {other:?}"),
    }
    assert_eq!(
        events.next_event().unwrap(),
        Some(scheduler_events()[1].clone())
    );
    match events.next_event() {
        Err(StreamError::Framing { .. }) => {}
        other => panic!("expected Framing, got {other:?}"),
    }
}

#[test]
fn a_stream_cut_inside_the_chunked_framing_is_an_error_not_an_end() {
    let server = Server::start(|_, _, conn| {
        stream_head(conn, PROTOBUF, Some("s"));
        chunk(conn, b"12\nabc");
        // Connection closes without the terminating chunk.
    });
    let mut client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    let mut events = client.subscribe(&subscribe_call()).unwrap().events;
    let err = events.next_event().expect_err("cut stream");
    assert!(
        matches!(
            err,
            StreamError::Transport { .. } | StreamError::Framing { .. }
        ),
        "{err:?}"
    );
}

#[test]
fn a_stalled_stream_hits_the_idle_timeout() {
    let (release, held) = gate();
    let first = framed(Encoding::Protobuf, &scheduler_events()[..1]);
    let server = Server::start(move |_, _, conn| {
        stream_head(conn, PROTOBUF, Some("s"));
        chunk(conn, &first);
        wait_gate(&held);
    });
    let idle = Duration::from_millis(300);
    let cfg = ClientConfig {
        stream_idle_timeout: Some(idle),
        ..config(Encoding::Protobuf)
    };
    let mut client = SchedulerClient::new(&server.addr, cfg).unwrap();
    let mut events = client.subscribe(&subscribe_call()).unwrap().events;
    assert!(events.next_event().unwrap().is_some());
    let started = Instant::now();
    match events.next_event() {
        Err(StreamError::IdleTimeout { idle: i, endpoint }) => {
            assert_eq!(i, idle);
            assert!(endpoint.contains(&server.addr));
        }
        other => panic!("expected IdleTimeout, got {other:?}"),
    }
    let waited = started.elapsed();
    assert!(waited < DEADLINE, "took {waited:?}");
    assert!(waited >= idle / 2, "gave up after only {waited:?}");
    drop(release);
}

#[test]
fn the_request_timeout_does_not_cut_a_healthy_stream() {
    let (release, held) = gate();
    let events = scheduler_events();
    let server = Server::start(move |_, _, conn| {
        stream_head(conn, PROTOBUF, Some("s"));
        chunk(conn, &framed(Encoding::Protobuf, &events[..1]));
        wait_gate(&held);
        chunk(conn, &framed(Encoding::Protobuf, &events[1..2]));
        end_chunks(conn);
    });
    let request_timeout = Duration::from_millis(200);
    let cfg = ClientConfig {
        request_timeout,
        stream_idle_timeout: Some(DEADLINE),
        ..config(Encoding::Protobuf)
    };
    let mut client = SchedulerClient::new(&server.addr, cfg).unwrap();
    let started = Instant::now();
    let mut stream = client.subscribe(&subscribe_call()).unwrap().events;
    assert!(stream.next_event().unwrap().is_some());
    // The point of the test is that this much time passes on the open stream; the wait is
    // not synchronising with anything.
    while started.elapsed() < request_timeout * 3 {
        thread::sleep(Duration::from_millis(20));
    }
    release.send(()).unwrap();
    assert_eq!(
        stream.next_event().expect("stream still alive"),
        Some(scheduler_events()[1].clone())
    );
    assert_eq!(stream.next_event().unwrap(), None);
}

#[test]
fn an_unanswered_call_times_out() {
    let (release, held) = gate();
    let server = Server::start(move |_, req, conn| {
        if req.header("Mesos-Stream-Id").is_none() {
            stream_head(conn, PROTOBUF, Some("s"));
        }
        wait_gate(&held);
    });
    let cfg = ClientConfig {
        request_timeout: Duration::from_millis(300),
        ..config(Encoding::Protobuf)
    };
    let mut client = SchedulerClient::new(&server.addr, cfg).unwrap();
    let _sub = client.subscribe(&subscribe_call()).unwrap();
    let started = Instant::now();
    match client.call(&decline_call()) {
        Err(ClientError::Transport(detail)) => {
            assert!(detail.contains("timeout"), "{detail}");
            assert!(detail.contains(&server.addr), "{detail}");
        }
        other => panic!("expected Transport, got {other:?}"),
    }
    assert!(started.elapsed() < DEADLINE);
    drop(release);
}

#[test]
fn master_version_reads_get_version() {
    let server = Server::start(|i, _, conn| {
        match i {
        0 => respond(
            conn,
            "200 OK",
            &[("Content-Type", JSON)],
            br#"{"build_date":"2017-11-05 19:07:18","build_time":1509908838.0,"build_user":"","git_sha":"c844db9ac7c0cef59be87438c6781bfb71adcc42","git_tag":"1.4.1","version":"1.4.1"}"#,
        ),
        1 => respond(conn, "200 OK", &[], b"<html>not json</html>"),
        _ => respond(conn, "404 Not Found", &[], b"no such path"),
    }
    });
    let client = SchedulerClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    let version = client.master_version().expect("version");
    assert_eq!(version.version, "1.4.1");
    assert_eq!(version.git_tag.as_deref(), Some("1.4.1"));
    assert_eq!(version.numbers(), Ok((1, 4, 1)));
    assert_eq!(version.at_least(1, 0), Ok(true));
    let req = server.request();
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("GET", "/version")
    );

    let url = format!("http://{}/version", server.addr);
    match get_json(&url, &config(Encoding::Json)) {
        Err(ClientError::Protocol { endpoint, detail }) => {
            assert_eq!(endpoint, format!("GET {url}"));
            assert!(detail.contains("JSON"), "{detail}");
        }
        other => panic!("expected Protocol, got {other:?}"),
    }
    match get_json(&url, &config(Encoding::Json)) {
        Err(ClientError::Rejected {
            status, message, ..
        }) => assert_eq!((status, message.as_str()), (404, "no such path")),
        other => panic!("expected Rejected, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Event size caps, with the settings the scheduler subscribes with

/// One agent's offer as a large cluster's master sends it: unreserved and reserved resources
/// with their allocation, the agent's URL and the attributes the scheduler reads (and a few
/// it does not).
fn large_cluster_offer(i: usize) -> Offer {
    use storage_framework::mesos::types::{resource, value, Address, Attribute, Resource, Url};
    let uuid = "5f2c1a7e-1d7b-4c55-9a8e-0d6f3b2a1c9e";
    let alloc = || {
        Some(resource::AllocationInfo {
            role: Some("storage".into()),
        })
    };
    let scalar = |name: &str, v: f64, reserved: bool| Resource {
        name: name.into(),
        r#type: value::Type::Scalar,
        scalar: Some(value::Scalar { value: v }),
        allocation_info: alloc(),
        reservations: if reserved {
            vec![resource::ReservationInfo {
                r#type: Some(resource::reservation_info::Type::Static),
                role: Some("storage".into()),
                ..Default::default()
            }]
        } else {
            vec![]
        },
        ..Default::default()
    };
    let text = |name: &str, v: String| Attribute {
        name: name.into(),
        r#type: value::Type::Text,
        text: Some(value::Text { value: v.into() }),
        ..Default::default()
    };
    let hostname = format!("agent-{i:05}.rack-{:03}.dc1.example.com", i / 40);
    let mut resources = Vec::new();
    for reserved in [false, true] {
        resources.push(scalar("cpus", 16.0, reserved));
        resources.push(scalar("mem", 63_488.0, reserved));
        resources.push(scalar("disk", 1_843_200.0, reserved));
    }
    resources.push(Resource {
        name: "ports".into(),
        r#type: value::Type::Ranges,
        ranges: Some(value::Ranges {
            range: vec![
                value::Range {
                    begin: 31000,
                    end: 31499,
                },
                value::Range {
                    begin: 31600,
                    end: 32000,
                },
            ],
        }),
        allocation_info: alloc(),
        ..Default::default()
    });
    Offer {
        id: OfferID {
            value: format!("{uuid}-O{}", 1_000_000 + i).into(),
        },
        framework_id: FrameworkID {
            value: format!("{uuid}-0001").into(),
        },
        agent_id: AgentID {
            value: format!("{uuid}-S{i}").into(),
        },
        hostname: hostname.as_str().into(),
        url: Some(Url {
            scheme: "http".into(),
            address: Address {
                hostname: Some(hostname.as_str().into()),
                ip: Some(format!("10.{}.{}.{}", i / 65_536, (i / 256) % 256, i % 256).into()),
                port: 5051,
            },
            path: Some("/slave(1)".into()),
            ..Default::default()
        }),
        allocation_info: alloc(),
        resources,
        attributes: vec![
            text("rack", format!("rack-{:03}", i / 40)),
            text("zone", format!("zone-{}", i % 3)),
            text("storage-persona", "data".into()),
            text("storage-sds-domains", "pd1".into()),
            text(
                "storage-devices",
                "/dev/sdb,/dev/sdc,/dev/sdd,/dev/sde".into(),
            ),
            text("os", "ubuntu-14.04".into()),
            text("kernel", "4.4.0-142-generic".into()),
            text("hardware", "r740xd".into()),
        ],
        ..Default::default()
    }
}

fn offers_event(agents: usize) -> scheduler::Event {
    scheduler::Event {
        r#type: Some(scheduler::event::Type::Offers),
        offers: Some(scheduler::event::Offers {
            offers: (0..agents).map(large_cluster_offer).collect(),
        }),
        ..Default::default()
    }
}

/// Serves `body` as the event stream of every SUBSCRIBE, in chunks of 1 MiB.
fn stream_server(encoding: Encoding, body: Vec<u8>) -> Server {
    let body = Arc::new(body);
    Server::start(move |_, _, conn| {
        stream_head(conn, encoding.content_type(), Some("s"));
        for piece in body.chunks(1 << 20) {
            chunk(conn, piece);
        }
        end_chunks(conn);
    })
}

/// A subscription with the scheduler's own settings for talking to a master.
fn scheduler_subscription(server: &Server, encoding: Encoding) -> EventStream {
    let mut cfg = client_config_for(encoding);
    cfg.stream_idle_timeout = Some(DEADLINE);
    let mut client = SchedulerClient::new(&server.addr, cfg).unwrap();
    client
        .subscribe(&subscribe_call())
        .expect("subscribe")
        .events
}

#[test]
fn a_ten_thousand_agent_offers_event_passes_in_both_encodings() {
    const AGENTS: usize = 10_000;
    let event = offers_event(AGENTS);
    for encoding in [Encoding::Protobuf, Encoding::Json] {
        let record = encoding.encode(&event);
        eprintln!(
            "{encoding:?}: OFFERS of {AGENTS} agents is {} bytes",
            record.len()
        );
        assert!(
            record.len() > client_config_for(encoding).max_event_bytes,
            "{encoding:?}: the event must be over the cap of other events to prove anything"
        );
        let server = stream_server(encoding, recordio::frame(&record));
        let mut events = scheduler_subscription(&server, encoding);
        match events.next_item() {
            Ok(Some(SchedulerItem::Offers(raw))) => {
                assert_eq!(encoding, Encoding::Protobuf);
                assert_eq!(raw.len(), AGENTS);
            }
            Ok(Some(SchedulerItem::Event(ev))) => {
                assert_eq!(encoding, Encoding::Json);
                assert_eq!(ev.r#type, Some(scheduler::event::Type::Offers));
                let offers = ev.offers.expect("offers").offers;
                assert_eq!(offers.len(), AGENTS);
                assert_eq!(offers[AGENTS - 1], large_cluster_offer(AGENTS - 1));
            }
            other => panic!("{encoding:?}: expected the offers, got {other:?}"),
        }
        assert!(events.next_item().unwrap().is_none(), "{encoding:?}");
    }
}

#[test]
fn any_other_event_over_its_cap_is_refused_by_type_and_size_and_the_stream_goes_on() {
    for encoding in [Encoding::Protobuf, Encoding::Json] {
        let cap = client_config_for(encoding).max_event_bytes;
        let huge = scheduler::Event {
            r#type: Some(scheduler::event::Type::Error),
            error: Some(scheduler::event::Error {
                message: "x".repeat(cap + 1024).into(),
            }),
            ..Default::default()
        };
        let record = encoding.encode(&huge);
        let mut body = recordio::frame(&record);
        body.extend(framed(encoding, &scheduler_events()[1..2]));
        let server = stream_server(encoding, body);
        let mut events = scheduler_subscription(&server, encoding);
        let err = events.next_item().expect_err("over the cap");
        let text = err.to_string();
        for wanted in [
            "ERROR",
            &record.len().to_string(),
            &cap.to_string(),
            &server.addr,
        ] {
            assert!(
                text.contains(wanted),
                "{encoding:?}: {wanted:?} missing in: {text}"
            );
        }
        match events.next_item() {
            Ok(Some(SchedulerItem::Event(ev))) => assert_eq!(*ev, scheduler_events()[1]),
            other => panic!("{encoding:?}: expected the HEARTBEAT after it, got {other:?}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Executor side

fn executor_call(kind: executor::call::Type) -> executor::Call {
    executor::Call {
        executor_id: ExecutorID {
            value: "storage-executor-a1".into(),
        },
        framework_id: FrameworkID {
            value: "fw-1".into(),
        },
        r#type: Some(kind),
        subscribe: (kind == executor::call::Type::Subscribe)
            .then(executor::call::Subscribe::default),
        message: (kind == executor::call::Type::Message).then(|| executor::call::Message {
            data: Bytes(b"phase done".to_vec()),
        }),
        ..Default::default()
    }
}

fn executor_events() -> Vec<executor::Event> {
    use executor::event;
    vec![
        executor::Event {
            r#type: Some(event::Type::Message),
            message: Some(event::Message {
                data: Bytes(b"hello".to_vec()),
            }),
            ..Default::default()
        },
        executor::Event {
            r#type: Some(event::Type::Shutdown),
            ..Default::default()
        },
    ]
}

#[test]
fn executor_subscribes_and_calls_without_a_stream_id() {
    for encoding in [Encoding::Protobuf, Encoding::Json] {
        let body = framed(encoding, &executor_events());
        let media = encoding.content_type();
        let server = Server::start(move |_, req, conn| {
            let subscribing = !req.body.is_empty()
                && match encoding {
                    Encoding::Protobuf => executor::Call::decode(&req.body)
                        .map(|c| c.r#type == Some(executor::call::Type::Subscribe))
                        .unwrap_or(false),
                    Encoding::Json => String::from_utf8_lossy(&req.body).contains("SUBSCRIBE"),
                };
            if subscribing {
                stream_head(conn, media, None);
                for piece in body.chunks(5) {
                    chunk(conn, piece);
                }
                end_chunks(conn);
            } else {
                respond(conn, "202 Accepted", &[], b"");
            }
        });
        let client = ExecutorClient::new(&server.addr, config(encoding)).unwrap();
        let events: Vec<_> = client
            .subscribe(&executor_call(executor::call::Type::Subscribe))
            .expect("subscribe")
            .collect::<Result<_, _>>()
            .expect("events");
        assert_eq!(events, executor_events());
        client
            .call(&executor_call(executor::call::Type::Message))
            .expect("202");

        for _ in 0..2 {
            let req = server.request();
            assert_eq!(req.path, "/api/v1/executor");
            assert_eq!(req.header("Content-Type"), Some(media));
            assert_eq!(req.header("Accept"), Some(media));
            assert_eq!(req.header("Mesos-Stream-Id"), None);
        }
    }
}

#[test]
fn executor_call_rejection_keeps_the_agents_message() {
    let server = Server::start(|_, _, conn| {
        respond(
            conn,
            "400 Bad Request",
            &[],
            b"Received unexpected 'MESSAGE' call",
        );
    });
    let client = ExecutorClient::new(&server.addr, config(Encoding::Protobuf)).unwrap();
    let err = client
        .call(&executor_call(executor::call::Type::Message))
        .expect_err("400");
    assert_eq!(
        err,
        ClientError::Rejected {
            endpoint: format!("POST http://{}/api/v1/executor", server.addr),
            status: 400,
            message: "Received unexpected 'MESSAGE' call".into(),
        }
    );
}

#[test]
fn bad_addresses_are_rejected_up_front() {
    for bad in ["", "zk://zk1:2181/mesos", "host:port", "a b:5050"] {
        assert!(matches!(
            SchedulerClient::new(bad, ClientConfig::default()),
            Err(ClientError::InvalidAddress { .. })
        ));
        assert!(matches!(
            ExecutorClient::new(bad, ClientConfig::default()),
            Err(ClientError::InvalidAddress { .. })
        ));
    }
}
