//! Raw HTTP for the master and agent tests: plain std sockets, so that the simulator is
//! tested on its own, not through the framework's client.

#![allow(dead_code)]

use crossbeam_channel::{Receiver, RecvTimeoutError};
use devcluster::master::{self, MasterConfig, MasterHandle};
use serde::de::DeserializeOwned;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};
use storage_framework::mesos::proto::Message;
use storage_framework::mesos::scheduler::{self, call, event};
use storage_framework::mesos::types::*;
use storage_framework::mesos::{recordio, Bytes, Encoding};

pub const WAIT: Duration = Duration::from_secs(20);

#[derive(Debug)]
pub struct HttpResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpResponse {
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
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

fn write_request(
    s: &mut TcpStream,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    close: bool,
) {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\n",
        s.peer_addr().unwrap()
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    if close {
        head.push_str("Connection: close\r\n");
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    s.flush().unwrap();
}

fn read_head(r: &mut impl BufRead) -> (u16, Vec<(String, String)>) {
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (n, v) = h.split_once(':').expect("header");
        headers.push((n.trim().to_string(), v.trim().to_string()));
    }
    (status, headers)
}

fn is_chunked(headers: &[(String, String)]) -> bool {
    headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("Transfer-Encoding") && v.to_ascii_lowercase().contains("chunked")
    })
}

/// One request on its own connection (`Connection: close`), body read to the end.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResponse {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write_request(&mut s, method, path, headers, body, true);
    let mut r = BufReader::new(s);
    let (status, headers) = read_head(&mut r);
    let mut body = Vec::new();
    if is_chunked(&headers) {
        Chunked::new(r).read_to_end(&mut body).unwrap();
    } else if let Some(len) = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("Content-Length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        body.resize(len, 0);
        r.read_exact(&mut body).unwrap();
    } else {
        r.read_to_end(&mut body).unwrap();
    }
    HttpResponse {
        status,
        headers,
        body,
    }
}

pub fn get(addr: SocketAddr, path: &str) -> HttpResponse {
    request(addr, "GET", path, &[], &[])
}

/// Decodes an HTTP/1.1 chunked body.
pub struct Chunked<R> {
    inner: R,
    left: usize,
    done: bool,
}

impl<R: BufRead> Chunked<R> {
    pub fn new(inner: R) -> Self {
        Chunked {
            inner,
            left: 0,
            done: false,
        }
    }
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            if self.inner.read_line(&mut line)? == 0 {
                self.done = true;
                return Ok(0);
            }
            let size = usize::from_str_radix(line.trim(), 16).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("chunk {line:?}"))
            })?;
            if size == 0 {
                self.done = true;
                return Ok(0);
            }
            self.left = size;
        }
        let n = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..n])?;
        if n == 0 {
            self.done = true;
            return Ok(0);
        }
        self.left -= n;
        if self.left == 0 {
            let mut crlf = String::new();
            self.inner.read_line(&mut crlf)?;
        }
        Ok(n)
    }
}

pub enum Next<M> {
    Event(M),
    Closed,
    Timeout,
}

/// A RecordIO event stream read by a thread of its own, so that waiting with a deadline never
/// leaves a half-read record behind.
pub struct EventStream<M> {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    rx: Receiver<Result<M, String>>,
    socket: TcpStream,
}

impl<M: Message + DeserializeOwned + Send + 'static> EventStream<M> {
    /// POSTs `body`; a non-200 answer comes back as the error.
    pub fn open(
        addr: SocketAddr,
        path: &str,
        content_type: Encoding,
        accept: Option<&str>,
        body: &[u8],
    ) -> Result<EventStream<M>, HttpResponse> {
        let mut s = TcpStream::connect(addr).unwrap();
        let mut headers = vec![("Content-Type", content_type.content_type())];
        if let Some(a) = accept {
            headers.push(("Accept", a));
        }
        write_request(&mut s, "POST", path, &headers, body, false);
        let socket = s.try_clone().unwrap();
        let mut r = BufReader::new(s);
        let (status, headers) = read_head(&mut r);
        if status != 200 {
            let mut body = Vec::new();
            if let Some(len) = headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case("Content-Length"))
                .and_then(|(_, v)| v.parse::<usize>().ok())
            {
                body.resize(len, 0);
                r.read_exact(&mut body).unwrap();
            }
            return Err(HttpResponse {
                status,
                headers,
                body,
            });
        }
        let encoding = match headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("Content-Type"))
            .map(|(_, v)| v.as_str())
        {
            Some("application/json") => Encoding::Json,
            Some("application/x-protobuf") => Encoding::Protobuf,
            other => panic!("stream Content-Type {other:?}"),
        };
        assert!(is_chunked(&headers), "stream must be chunked: {headers:?}");
        let (tx, rx) = crossbeam_channel::unbounded();
        thread::spawn(move || {
            let mut reader = recordio::Reader::new(Chunked::new(r));
            loop {
                match reader.next_record() {
                    Ok(Some(rec)) => {
                        let ev = encoding.decode::<M>(rec).map_err(|e| e.to_string());
                        if tx.send(ev).is_err() {
                            return;
                        }
                    }
                    Ok(None) => return,
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                        return;
                    }
                }
            }
        });
        Ok(EventStream {
            status,
            headers,
            rx,
            socket,
        })
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn next(&self, timeout: Duration) -> Next<M> {
        match self.rx.recv_timeout(timeout) {
            Ok(Ok(m)) => Next::Event(m),
            Ok(Err(e)) => panic!("bad event on the stream: {e}"),
            Err(RecvTimeoutError::Timeout) => Next::Timeout,
            Err(RecvTimeoutError::Disconnected) => Next::Closed,
        }
    }

    /// Closes our end, as a scheduler that goes away does.
    pub fn close(&self) {
        let _ = self.socket.shutdown(std::net::Shutdown::Both);
    }
}

pub fn text(s: &str) -> storage_framework::mesos::Str {
    s.into()
}

pub fn framework_info(name: &str, partition_aware: bool) -> FrameworkInfo {
    let mut info = FrameworkInfo {
        user: text("root"),
        name: text(name),
        ..Default::default()
    };
    if partition_aware {
        info.capabilities.push(framework_info::Capability {
            r#type: Some(framework_info::capability::Type::PartitionAware),
        });
    }
    info
}

pub fn scalar(name: &str, v: f64) -> Resource {
    Resource {
        name: text(name),
        r#type: value::Type::Scalar,
        scalar: Some(value::Scalar { value: v }),
        ..Default::default()
    }
}

/// A started cluster with small timings for tests.
pub fn cluster(agents: usize, tweak: impl FnOnce(&mut MasterConfig)) -> MasterHandle {
    let mut cfg = MasterConfig {
        agents,
        heartbeat_interval: Duration::from_millis(200),
        allocation_interval: Duration::from_millis(50),
        ..Default::default()
    };
    tweak(&mut cfg);
    master::start(cfg).expect("cluster starts")
}

/// A subscribed scheduler on raw HTTP.
pub struct Sched {
    pub master: SocketAddr,
    pub encoding: Encoding,
    pub stream: EventStream<scheduler::Event>,
    pub stream_id: String,
    pub framework_id: String,
}

pub fn subscribe_call(info: FrameworkInfo) -> scheduler::Call {
    scheduler::Call {
        framework_id: info.id.clone(),
        r#type: Some(call::Type::Subscribe),
        subscribe: Some(call::Subscribe {
            framework_info: info,
            suppressed_roles: vec![],
        }),
        ..Default::default()
    }
}

impl Sched {
    pub fn subscribe(master: SocketAddr, encoding: Encoding, info: FrameworkInfo) -> Sched {
        let body = encoding.encode(&subscribe_call(info));
        let stream = EventStream::<scheduler::Event>::open(
            master,
            "/api/v1/scheduler",
            encoding,
            Some(encoding.content_type()),
            &body,
        )
        .unwrap_or_else(|r| panic!("SUBSCRIBE failed: {} {}", r.status, r.text()));
        let stream_id = stream
            .header("Mesos-Stream-Id")
            .expect("Mesos-Stream-Id header")
            .to_string();
        let ev = match stream.next(WAIT) {
            Next::Event(e) => e,
            _ => panic!("no SUBSCRIBED event"),
        };
        assert_eq!(ev.r#type, Some(event::Type::Subscribed), "{ev:?}");
        let framework_id = ev.subscribed.unwrap().framework_id.value.to_string();
        Sched {
            master,
            encoding,
            stream,
            stream_id,
            framework_id,
        }
    }

    pub fn fid(&self) -> FrameworkID {
        FrameworkID {
            value: text(&self.framework_id),
        }
    }

    /// Sends a call with this framework's id and stream id.
    pub fn call(&self, mut c: scheduler::Call) -> HttpResponse {
        if c.framework_id.is_none() {
            c.framework_id = Some(self.fid());
        }
        let body = self.encoding.encode(&c);
        request(
            self.master,
            "POST",
            "/api/v1/scheduler",
            &[
                ("Content-Type", self.encoding.content_type()),
                ("Mesos-Stream-Id", &self.stream_id),
            ],
            &body,
        )
    }

    pub fn call_ok(&self, c: scheduler::Call) {
        let r = self.call(c);
        assert_eq!(r.status, 202, "{}", r.text());
    }

    /// The next event that is not a heartbeat.
    pub fn next_event(&self, timeout: Duration) -> Option<scheduler::Event> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stream.next(left) {
                Next::Event(e) if e.r#type == Some(event::Type::Heartbeat) => continue,
                Next::Event(e) => return Some(e),
                Next::Closed | Next::Timeout => return None,
            }
        }
    }

    /// Waits for an event of type `t`, skipping others.
    pub fn wait(&self, t: event::Type) -> scheduler::Event {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stream.next(left) {
                Next::Event(e) if e.r#type == Some(t) => return e,
                Next::Event(e) => seen.push(e.r#type),
                Next::Closed => panic!("stream closed while waiting for {t:?}; saw {seen:?}"),
                Next::Timeout => panic!("no {t:?} event; saw {seen:?}"),
            }
        }
    }

    pub fn offers(&self) -> Vec<Offer> {
        self.wait(event::Type::Offers).offers.unwrap().offers
    }

    /// Collects offers until `n` distinct agents are covered.
    pub fn offers_from(&self, n: usize) -> Vec<Offer> {
        let mut all: Vec<Offer> = Vec::new();
        while all
            .iter()
            .map(|o| o.agent_id.value.to_string())
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            < n
        {
            all.extend(self.offers());
        }
        all
    }

    pub fn update(&self) -> TaskStatus {
        self.wait(event::Type::Update).update.unwrap().status
    }

    /// Waits for an update of `task` in `state`, skipping other updates and events.
    pub fn update_for(&self, task: &str, state: TaskState) -> TaskStatus {
        let deadline = Instant::now() + WAIT;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stream.next(left) {
                Next::Event(e) => {
                    if let Some(u) = e.update {
                        if u.status.task_id.value == task && u.status.state == state {
                            return u.status;
                        }
                        seen.push(format!("{}:{:?}", u.status.task_id.value, u.status.state));
                    }
                }
                _ => panic!("no {state:?} for task {task}; saw updates {seen:?}"),
            }
        }
    }

    pub fn accept(&self, offers: &[&Offer], tasks: Vec<TaskInfo>) {
        self.call_ok(accept_call(offers, tasks));
    }

    pub fn acknowledge(&self, status: &TaskStatus) {
        self.call_ok(scheduler::Call {
            r#type: Some(call::Type::Acknowledge),
            acknowledge: Some(call::Acknowledge {
                agent_id: status.agent_id.clone().expect("agent id"),
                task_id: status.task_id.clone(),
                uuid: status.uuid.clone().expect("uuid"),
            }),
            ..Default::default()
        });
    }

    pub fn decline(&self, offers: &[&Offer], refuse_seconds: Option<f64>) {
        self.call_ok(scheduler::Call {
            r#type: Some(call::Type::Decline),
            decline: Some(call::Decline {
                offer_ids: offers.iter().map(|o| o.id.clone()).collect(),
                filters: refuse_seconds.map(|s| Filters {
                    refuse_seconds: Some(s),
                }),
            }),
            ..Default::default()
        });
    }

    pub fn simple(&self, t: call::Type) {
        self.call_ok(scheduler::Call {
            r#type: Some(t),
            ..Default::default()
        });
    }
}

pub fn accept_call(offers: &[&Offer], tasks: Vec<TaskInfo>) -> scheduler::Call {
    scheduler::Call {
        r#type: Some(call::Type::Accept),
        accept: Some(call::Accept {
            offer_ids: offers.iter().map(|o| o.id.clone()).collect(),
            operations: vec![offer::Operation {
                r#type: Some(offer::operation::Type::Launch),
                launch: Some(offer::operation::Launch { task_infos: tasks }),
                ..Default::default()
            }],
            filters: None,
        }),
        ..Default::default()
    }
}

/// A command task (the agent plays the command executor) on the offer's agent.
pub fn command_task(id: &str, offer: &Offer, cmd: &str) -> TaskInfo {
    TaskInfo {
        name: text(id),
        task_id: TaskID { value: text(id) },
        agent_id: offer.agent_id.clone(),
        resources: vec![scalar("cpus", 0.1), scalar("mem", 32.0)],
        command: Some(CommandInfo {
            value: Some(text(cmd)),
            ..Default::default()
        }),
        ..Default::default()
    }
}

pub fn executor_task(id: &str, offer: &Offer, executor: ExecutorInfo) -> TaskInfo {
    TaskInfo {
        name: text(id),
        task_id: TaskID { value: text(id) },
        agent_id: offer.agent_id.clone(),
        resources: vec![scalar("cpus", 0.1), scalar("mem", 32.0)],
        executor: Some(executor),
        ..Default::default()
    }
}

pub fn uuid_bytes() -> Bytes {
    // Version 4 in the version nibble, as every real update uuid.
    let mut b: Vec<u8> = (0..16u8)
        .map(|i| i.wrapping_mul(37).wrapping_add(11))
        .collect();
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    for (i, x) in t.to_le_bytes().iter().enumerate() {
        b[i] ^= x;
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    Bytes(b)
}

/// Polls `f` until it returns `Some`, failing after the deadline.
pub fn wait_until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// Serves fixed files over HTTP for the agents' fetcher; 404 for anything else.
pub struct FileServer {
    pub addr: SocketAddr,
}

impl FileServer {
    pub fn start(files: Vec<(&'static str, Vec<u8>)>) -> FileServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let files = files.clone();
                thread::spawn(move || {
                    let mut r = BufReader::new(conn.try_clone().unwrap());
                    let mut line = String::new();
                    if r.read_line(&mut line).is_err() {
                        return;
                    }
                    loop {
                        let mut h = String::new();
                        if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                            break;
                        }
                    }
                    let path = line.split(' ').nth(1).unwrap_or("").to_string();
                    let found = files.iter().find(|(p, _)| *p == path);
                    let (status, body) = match found {
                        Some((_, b)) => ("200 OK", b.clone()),
                        None => ("404 Not Found", b"not found".to_vec()),
                    };
                    let head = format!(
                        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(head.as_bytes());
                    let _ = conn.write_all(&body);
                });
            }
        });
        FileServer { addr }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// A scratch directory, removed afterwards unless the test failed.
pub struct TempDir(PathBuf);

impl std::ops::Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub fn temp_dir(name: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!(
        "devcluster-test-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

pub fn read_env_dump(path: &Path) -> std::collections::BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}
