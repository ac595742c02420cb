//! Shared by the REST tests and bench: a stand-in for the dispatcher thread (it owns a
//! `Persisted`, answers `Input::View`, and runs a real `ExecutorApi` for `Input::Executor`),
//! sample clusters, and a raw HTTP/1.1 client.
#![allow(dead_code)]

use crossbeam_channel::{select, Receiver, Sender};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use storage_framework::clock::{Clock, SystemClock};
use storage_framework::mesos::types::TaskState;
use storage_framework::scheduler::dispatcher::executor_api::ExecutorApi;
use storage_framework::scheduler::exchange::{Input, View};
use storage_framework::scheduler::model::{Node, Persisted, Persona, Phase, TaskRecord};

type Change = Box<dyn FnOnce(&mut Persisted, &mut ExecutorApi) + Send>;
/// A change to apply right after the given number of views was handed out.
pub type AfterView = Option<(usize, Box<dyn FnOnce(&mut Persisted) + Send>)>;

pub struct Fake {
    pub inputs: Sender<Input>,
    changes: Sender<(Change, Sender<()>)>,
    thread: Option<JoinHandle<()>>,
}

pub struct Connection {
    pub subscribed: bool,
    pub master: Option<String>,
    pub reason: Option<String>,
}

impl Fake {
    pub fn start(state: Persisted, conn: Connection) -> Fake {
        Fake::scripted(state, conn, None)
    }

    /// Like `start`, and applies `change` right after the `n`th view was handed out, so that
    /// a client's next look differs from its first one.
    pub fn scripted(state: Persisted, conn: Connection, after_view: AfterView) -> Fake {
        let (inputs, rx) = crossbeam_channel::unbounded::<Input>();
        let (changes, changes_rx) = crossbeam_channel::unbounded::<(Change, Sender<()>)>();
        let thread = std::thread::spawn(move || run(state, conn, rx, changes_rx, after_view));
        Fake {
            inputs,
            changes,
            thread: Some(thread),
        }
    }

    /// Applies a change on the dispatcher thread (as a Mesos event would) and returns once
    /// it is applied and the batch closed (parked plan requests answered).
    pub fn change(&self, f: impl FnOnce(&mut Persisted, &mut ExecutorApi) + Send + 'static) {
        let (done, wait) = crossbeam_channel::bounded(1);
        self.changes
            .send((Box::new(f), done))
            .expect("fake dispatcher running");
        wait.recv_timeout(Duration::from_secs(10))
            .expect("fake dispatcher applied the change");
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.inputs.send(Input::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    mut state: Persisted,
    conn: Connection,
    inputs: Receiver<Input>,
    changes: Receiver<(Change, Sender<()>)>,
    mut after_view: AfterView,
) {
    let mut api = ExecutorApi::new();
    let mut view: Option<Arc<View>> = None;
    let mut views = 0;
    // Each view built is a new generation (the REST server caches by it).
    let mut generation = 0;
    let now_ms = || SystemClock.now_ms();
    loop {
        let mut done = Vec::new();
        let mut batch = Vec::new();
        select! {
            recv(inputs) -> i => match i {
                Ok(i) => batch.push(i),
                Err(_) => return,
            },
            recv(changes) -> c => match c {
                Ok((f, d)) => {
                    f(&mut state, &mut api);
                    view = None;
                    done.push(d);
                }
                Err(_) => return,
            },
        }
        while let Ok(i) = inputs.try_recv() {
            batch.push(i);
        }
        for input in batch {
            match input {
                Input::View(reply) => {
                    let v = view.get_or_insert_with(|| {
                        generation += 1;
                        Arc::new(View {
                            subscribed: conn.subscribed,
                            master: conn.master.clone(),
                            disconnected_reason: conn.reason.clone(),
                            suppressed: false,
                            attach_queue: Default::default(),
                            model: state.model.clone(),
                            generated_ms: now_ms(),
                            generation,
                            events: Default::default(),
                        })
                    });
                    let _ = reply.send(v.clone());
                    views += 1;
                    if after_view.as_ref().is_some_and(|(n, _)| *n == views) {
                        if let Some((_, f)) = after_view.take() {
                            f(&mut state);
                            view = None;
                        }
                    }
                }
                Input::Executor(req) => {
                    // Any executor call may refresh what the view shows (last contact).
                    api.handle(&mut state, req, now_ms());
                    view = None;
                }
                Input::Shutdown => return,
                _ => {}
            }
        }
        api.after_batch(&state, now_ms());
        for d in done {
            let _ = d.send(());
        }
    }
}

pub fn executor_id(host: &str) -> String {
    format!("storage-executor.{host}.1")
}

/// A 64-hex-digit secret, distinct per host, easy to search for in output.
pub fn secret_of(host: &str) -> String {
    let mut s = String::new();
    for (i, b) in host.bytes().cycle().take(32).enumerate() {
        s.push_str(&format!("{:02x}", b.wrapping_add(i as u8 * 7)));
    }
    s
}

pub fn node(i: usize, host: &str, persona: Persona, phase: Phase) -> Node {
    let now = SystemClock.now_ms();
    let agent_id = format!("9f1c2d3e-4b5a-6c7d-8e9f-0a1b2c3d4e5f-S{i}");
    Node {
        phase,
        task: Some(
            TaskRecord::new(
                &format!("storage.{host}.1"),
                &executor_id(host),
                TaskState::Running,
                now - 600_000,
            )
            .running_since(now - 590_000),
        ),
        updated_ms: now - 5_000,
        // Fields added later keep their defaults.
        ..Node::new(&agent_id, host, persona, now)
    }
}

pub fn add(state: &mut Persisted, mut n: Node) {
    if let Some(t) = n.task.as_mut() {
        t.secret = Some(secret_of(&n.hostname).as_str().into());
    }
    state.model.nodes.insert(n.agent_id.clone(), n);
}

/// Five nodes in various phases, one with an error: what the status page test shows.
pub fn five_nodes() -> Persisted {
    let now = SystemClock.now_ms();
    let mut s = Persisted::default();
    s.model.framework_id = Some("3f2a61e0-8c1b-4d2e-9a7f-5b6c7d8e9f00-0001".into());
    s.model.launch_seq = 5;
    let mut a = node(
        1,
        "storage-01.dc1.example",
        Persona::Primary,
        Phase::Running,
    );
    a.devices = vec!["/dev/sdb".into(), "/dev/sdc".into()];
    a.attached = a.devices.clone();
    a.last_contact_ms = Some(now - 4_000);
    add(&mut s, a);
    let mut b = node(
        2,
        "storage-02.dc1.example",
        Persona::Secondary,
        Phase::StorageAttach,
    );
    b.devices = vec!["/dev/nvme0n1".into()];
    b.last_contact_ms = Some(now - 12_000);
    add(&mut s, b);
    let mut c = node(
        3,
        "storage-03.dc1.example",
        Persona::Tiebreaker,
        Phase::Packages,
    );
    c.last_contact_ms = Some(now - 1_000);
    add(&mut s, c);
    let mut d = node(4, "storage-04.dc1.example", Persona::Data, Phase::Failed);
    d.last_error = Some(
        "packages: dpkg -i emc-scaleio-sds_2.0-12000.122_amd64.deb exited with status 1: \
         dependency problems - leaving unconfigured"
            .into(),
    );
    d.failures = 2;
    d.retry_after_ms = Some(now + 40_000);
    d.last_contact_ms = Some(now - 190_000);
    if let Some(t) = d.task.as_mut() {
        t.state = TaskState::Failed;
    }
    add(&mut s, d);
    let e = node(5, "storage-05.dc1.example", Persona::Data, Phase::Launching);
    add(&mut s, e);
    s
}

/// `n` data nodes, as for the bench.
pub fn many_nodes(n: usize) -> Persisted {
    let now = SystemClock.now_ms();
    let mut s = Persisted::default();
    s.model.framework_id = Some("3f2a61e0-8c1b-4d2e-9a7f-5b6c7d8e9f00-0001".into());
    for i in 0..n {
        let host = format!("agent-{i:05}.dc1.example.com");
        let phase = Phase::ALL[i % Phase::ALL.len()];
        let mut nd = node(i, &host, Persona::Data, phase);
        nd.devices = vec!["/dev/sdb".into(), "/dev/sdc".into()];
        nd.attached = vec!["/dev/sdb".into()];
        nd.last_contact_ms = Some(now - (i as u64 % 60) * 1000);
        if phase == Phase::Failed {
            nd.last_error = Some("packages: installation of the SDS package failed".into());
        }
        add(&mut s, nd);
    }
    s
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text()))
    }

    /// The error body every non-HTML error has.
    pub fn error(&self) -> (String, String) {
        let j = self.json();
        (
            j["error"]
                .as_str()
                .unwrap_or_else(|| panic!("no error in {j}"))
                .to_owned(),
            j["detail"]
                .as_str()
                .unwrap_or_else(|| panic!("no detail in {j}"))
                .to_owned(),
        )
    }
}

fn find_head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

/// Reads one response from a keep-alive connection; `buf` keeps bytes of the next one.
/// 1xx responses are skipped.
pub fn read_response(
    stream: &mut impl Read,
    buf: &mut Vec<u8>,
    head: bool,
) -> std::io::Result<Reply> {
    loop {
        let end = loop {
            if let Some(e) = find_head_end(buf) {
                break e;
            }
            fill(stream, buf)?;
        };
        let text = String::from_utf8_lossy(&buf[..end]).into_owned();
        let mut lines = text.split("\r\n");
        let status: u16 = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line in {text:?}")))?;
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
            .collect();
        buf.drain(..end);
        if (100..200).contains(&status) {
            continue;
        }
        let len = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse::<usize>().ok());
        let body = if head || status == 304 {
            Vec::new()
        } else if let Some(len) = len {
            while buf.len() < len {
                fill(stream, buf)?;
            }
            buf.drain(..len).collect()
        } else {
            // Delimited by the close.
            let _ = stream.read_to_end(buf);
            std::mem::take(buf)
        };
        return Ok(Reply {
            status,
            headers,
            body,
        });
    }
}

fn fill(stream: &mut impl Read, buf: &mut Vec<u8>) -> std::io::Result<()> {
    let mut tmp = [0u8; 64 * 1024];
    let n = stream.read(&mut tmp)?;
    if n == 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "connection closed before a complete response",
        ));
    }
    buf.extend_from_slice(&tmp[..n]);
    Ok(())
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to the REST server");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Sends raw bytes on a new connection and reads one response.
pub fn exchange(addr: SocketAddr, raw: &[u8]) -> Reply {
    let mut s = connect(addr);
    s.write_all(raw).expect("send request");
    let head = raw.starts_with(b"HEAD ");
    read_response(&mut s, &mut Vec::new(), head).expect("read response")
}

pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    let mut raw = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for (n, v) in headers {
        raw.push_str(&format!("{n}: {v}\r\n"));
    }
    if !body.is_empty() || method == "POST" {
        raw.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    raw.push_str("\r\n");
    let mut raw = raw.into_bytes();
    raw.extend_from_slice(body);
    exchange(addr, &raw)
}

pub fn get(addr: SocketAddr, path: &str) -> Reply {
    request(addr, "GET", path, &[], b"")
}

/// An executor call with its secret.
pub fn call(addr: SocketAddr, method: &str, host: &str, action: &str, body: &[u8]) -> Reply {
    let auth = format!("Bearer {}", secret_of(host));
    request(
        addr,
        method,
        &format!("/api/v1/executors/{}/{action}", executor_id(host)),
        &[("Authorization", &auth)],
        body,
    )
}

/// Polls `f` until it is true; panics naming `what` at the deadline.
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A REST server on a free local port whose dispatcher is `inputs` (a [`Fake`]'s), plain
/// HTTP, no executor binary.
pub fn serve(inputs: Sender<Input>) -> storage_framework::rest::RestHandle {
    use storage_framework::rest::{self, RestConfig, ServerOptions};
    rest::start_with(
        RestConfig {
            port: 0,
            executor_binary: Arc::new(
                storage_framework::scheduler::executor_binary::ExecutorBinary::new(
                    "/nonexistent/storage-executor".into(),
                ),
            ),
            inputs,
            metrics: Arc::new(storage_framework::scheduler::metrics::Metrics::default()),
            secrets: None,
            state_warning: None,
            tls: None,
            operator_token: None,
        },
        ServerOptions {
            bind: std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
            // Every read asks the fake dispatcher: tests read back at once what they changed.
            view_max_age: std::time::Duration::ZERO,
            ..ServerOptions::default()
        },
    )
    .expect("REST server starts")
}

/// The reason an SDS upgrade of [`upgrading`] waits for.
pub const WAITING: &str = "waiting: sds-2 of pd1 is rebuilding";

/// [`five_nodes`] in an upgrade to generation 2: storage-01 there already, storage-02's SDS
/// upgrade waiting for [`WAITING`], a sixth node's MDM upgrade failed (its reason holds
/// markup), the others still in their first install.
pub fn upgrading() -> Persisted {
    use storage_framework::scheduler::model::{
        NodeRollout, PlanKind, Step, StepState, StepStatus, Target,
    };
    let mut s = five_nodes();
    s.model.target = Target {
        generation: 2,
        previous: 1,
        change: Some(PlanKind::Upgrade),
        ..Target::default()
    };
    let walk = |steps: Vec<(Step, StepState, Option<&str>)>| {
        Some(Box::new(NodeRollout {
            generation: 2,
            steps: steps
                .into_iter()
                .map(|(step, state, reason)| StepStatus {
                    state,
                    reason: reason.map(Into::into),
                    ..StepStatus::pending(step)
                })
                .collect(),
            granted: None,
        }))
    };
    for mut n in s.model.nodes.values_mut() {
        match n.hostname.as_str() {
            "storage-01.dc1.example" => {
                n.generation = 2;
                n.rollout = walk(vec![(Step::UpgradeMdm, StepState::Done, None)]);
            }
            "storage-02.dc1.example" => {
                n.phase = Phase::Running;
                n.generation = 1;
                n.rollout = walk(vec![
                    (Step::UpgradeLia, StepState::Done, None),
                    (Step::UpgradeSds, StepState::Waiting, Some(WAITING)),
                    (Step::UpgradeSdc, StepState::Pending, None),
                ]);
            }
            _ => {}
        }
    }
    let mut six = node(6, "storage-06.dc1.example", Persona::Data, Phase::Running);
    six.generation = 1;
    six.rollout = walk(vec![(
        Step::UpgradeMdm,
        StepState::Failed,
        Some("rpm -Uvh <EMC-ScaleIO-mdm-2.5>.rpm exited with status 1"),
    )]);
    add(&mut s, six);
    s
}
