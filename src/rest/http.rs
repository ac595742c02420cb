//! A small HTTP/1.1 server on std sockets for the REST API.
//!
//! Why not tiny_http: it cannot time out a client (no read timeout on its sockets, and none
//! can be set through its API), it starts a thread per connection without bound, and
//! dropping a request whose body was not read drains the whole declared `Content-Length`
//! into one buffer of that size, so a refused 1 TB upload blocks the worker, then aborts the
//! process on the allocation. Here every read has a deadline, the pool is bounded, and an
//! oversized body is refused from its headers and never read.
//!
//! Model: an acceptor thread puts connections in a bounded queue (full: 503 at once); a
//! fixed pool of workers each serves one connection at a time, keep-alive included. A
//! connection idle between requests gives its worker up as soon as other connections wait.

use crossbeam_channel::{Receiver, Sender, TrySendError};
use log::{debug, warn};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY: usize = 1024 * 1024;
/// Request line plus headers.
pub const MAX_HEAD: usize = 16 * 1024;
pub const MAX_HEADERS: usize = 100;

/// How often an idle keep-alive connection checks whether others wait for a worker.
const IDLE_SLICE: Duration = Duration::from_millis(500);
/// After an error that closes the connection, unread input is drained this long (or this
/// much) first, so that the close does not reset the connection before the client has
/// read the error.
const LINGER: Duration = Duration::from_secs(1);
const LINGER_BYTES: usize = 4 * 1024 * 1024;
/// How long stopping waits for connections to finish before cutting them.
const STOP_GRACE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct Limits {
    /// Threads serving connections.
    pub workers: usize,
    /// Accepted connections waiting for a worker; beyond that, 503.
    pub queue: usize,
    /// Time to receive one whole request (head and body) once it has started, and the first
    /// request on a new connection.
    pub request_timeout: Duration,
    /// Keep-alive: how long a connection may sit idle between requests.
    pub idle_timeout: Duration,
    /// Longest time to send one whole response: one deadline per response, not per
    /// `write()`, so that a client that reads a byte now and then cannot hold a worker.
    pub write_timeout: Duration,
}

pub struct Request {
    pub method: String,
    /// Path without the query, still percent-encoded.
    pub path: String,
    pub query: String,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    keep_alive: bool,
}

/// Method, path and header names only: header values carry credentials (Authorization),
/// bodies carry reports.
impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        write!(
            f,
            "Request {{ {} {}, headers: {names:?}, {} body bytes }}",
            self.method,
            self.path,
            self.body.len()
        )
    }
}

impl Request {
    /// The first header of that name (give it in lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `Accept-Encoding` allows gzip (not refused with `q=0`).
    pub fn accepts_gzip(&self) -> bool {
        self.header("accept-encoding").is_some_and(|v| {
            v.split(',').any(|item| {
                let mut parts = item.split(';');
                let coding = parts.next().unwrap_or("").trim();
                (coding.eq_ignore_ascii_case("gzip") || coding == "*")
                    && !parts.any(|p| {
                        p.trim()
                            .strip_prefix("q=")
                            .and_then(|q| q.trim().parse::<f32>().ok())
                            .is_some_and(|q| q == 0.0)
                    })
            })
        })
    }

    /// A query parameter, percent-decoded; `Err` when its encoding is broken.
    pub fn query_param(&self, name: &str) -> Result<Option<String>, String> {
        for pair in self.query.split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            if percent_decode(k).as_deref() == Ok(name) {
                return percent_decode(&v.replace('+', " ")).map(Some);
            }
        }
        Ok(None)
    }

    /// For building requests in tests of the handlers.
    pub fn new(method: &str, target: &str, headers: Vec<(String, String)>, body: Vec<u8>) -> Self {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        Request {
            method: method.to_owned(),
            path: path.to_owned(),
            query: query.to_owned(),
            headers,
            body,
            keep_alive: true,
        }
    }
}

/// Decodes `%XX` escapes; the result must be UTF-8.
pub fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape in {s:?}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} does not decode to UTF-8"))
}

pub enum Body {
    Empty,
    Static(&'static [u8]),
    Owned(Vec<u8>),
    /// Shared by many responses (the state JSON, the executor binary): never copied.
    Shared(Arc<dyn AsRef<[u8]> + Send + Sync>),
}

impl Body {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Body::Empty => &[],
            Body::Static(b) => b,
            Body::Owned(b) => b,
            Body::Shared(b) => (**b).as_ref(),
        }
    }
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Body,
    /// Set for an answer that comes later (a plan long poll): the worker hands the
    /// connection to this and is free at once; the receiver answers through [`Later`].
    pub later: Option<Box<dyn FnOnce(Later) + Send>>,
}

/// A connection whose answer comes later, held by whoever answers it (not by a worker).
pub struct Later {
    stream: TcpStream,
    head_only: bool,
    stats: Arc<HttpStats>,
    write_timeout: Duration,
}

impl Later {
    /// Writes `resp` (one deadline for the whole response) and closes the connection.
    pub fn answer(mut self, resp: &Response) {
        let class = usize::from(resp.status / 100).min(5);
        self.stats.responses[class].fetch_add(1, Relaxed);
        let deadline = Instant::now() + self.write_timeout;
        let _ = write_response(&mut self.stream, resp, self.head_only, false, deadline);
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}

impl Response {
    pub fn new(status: u16, content_type: &str, body: Body) -> Response {
        Response {
            status,
            // Room for the headers most answers get, so that adding them does not reallocate.
            headers: {
                let mut h = Vec::with_capacity(6);
                h.push(("Content-Type", content_type.to_owned()));
                h
            },
            body,
            later: None,
        }
    }

    /// An answer that comes later: `hand_over` receives the connection.
    pub fn later(hand_over: impl FnOnce(Later) + Send + 'static) -> Response {
        Response {
            later: Some(Box::new(hand_over)),
            ..Response::new(200, "application/json", Body::Empty)
        }
    }

    pub fn json(status: u16, body: Vec<u8>) -> Response {
        Response::new(status, "application/json", Body::Owned(body))
    }

    /// The JSON error shape of every non-HTML error: `{"error": ..., "detail": ...}`.
    pub fn error(status: u16, error: &str, detail: &str) -> Response {
        let body = serde_json::json!({ "error": error, "detail": detail }).to_string();
        Response::json(status, body.into_bytes())
    }

    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }
}

pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        204 => "No Content",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Payload Too Large",
        417 => "Expectation Failed",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}

pub type Handler = dyn Fn(&Request) -> Response + Send + Sync;

/// Sees each request after its head is read and before its body is (the body is empty
/// here): an answer ends the request there, the body unread, and closes the connection.
pub type Gate = dyn Fn(&Request) -> Option<Response> + Send + Sync;

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct HttpStats {
    pub connections: AtomicU64,
    /// Refused with 503 because every worker was busy and the queue full.
    pub rejected: AtomicU64,
    /// Requests answered, by status class (index 1 = 1xx ... 5 = 5xx).
    pub responses: [AtomicU64; 6],
    /// Requests that did not arrive in time (408).
    pub timeouts: AtomicU64,
}

struct Shared {
    handler: Arc<Handler>,
    gate: Option<Arc<Gate>>,
    limits: Limits,
    stats: Arc<HttpStats>,
    stopping: AtomicBool,
    /// Open connections, so that stopping can cut them.
    open: Mutex<HashMap<u64, TcpStream>>,
    /// Signalled when a connection ends.
    closed: Condvar,
    next_id: AtomicU64,
}

pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

impl Server {
    pub fn start(
        listener: TcpListener,
        limits: Limits,
        stats: Arc<HttpStats>,
        handler: Arc<Handler>,
    ) -> io::Result<Server> {
        Server::start_gated(listener, limits, stats, handler, None)
    }

    /// [`start`](Self::start), with a [`Gate`] in front of the handler.
    pub fn start_gated(
        listener: TcpListener,
        limits: Limits,
        stats: Arc<HttpStats>,
        handler: Arc<Handler>,
        gate: Option<Arc<Gate>>,
    ) -> io::Result<Server> {
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            handler,
            gate,
            limits: limits.clone(),
            stats,
            stopping: AtomicBool::new(false),
            open: Mutex::new(HashMap::new()),
            closed: Condvar::new(),
            next_id: AtomicU64::new(0),
        });
        let (tx, rx) = crossbeam_channel::bounded::<TcpStream>(limits.queue.max(1));
        let mut server = Server {
            addr,
            shared: shared.clone(),
            acceptor: None,
            workers: Vec::new(),
        };
        for i in 0..limits.workers.max(1) {
            let (rx, shared) = (rx.clone(), shared.clone());
            match std::thread::Builder::new()
                .name(format!("rest-{i}"))
                .spawn(move || worker(rx, shared))
            {
                Ok(h) => server.workers.push(h),
                Err(e) => {
                    // Closing the queue first lets `server`'s drop join the workers.
                    drop(tx);
                    return Err(e);
                }
            }
        }
        let acc_shared = shared.clone();
        server.acceptor = Some(
            std::thread::Builder::new()
                .name("rest-accept".into())
                .spawn(move || accept(listener, tx, acc_shared))?,
        );
        Ok(server)
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Relaxed);
        if let Some(acceptor) = self.acceptor.take() {
            // accept() has no timeout: a connection of our own wakes it to see the flag.
            let mut wake = self.addr;
            if wake.ip().is_unspecified() {
                wake.set_ip(match wake.ip() {
                    IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                    IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
                });
            }
            let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
            let _ = acceptor.join();
        }
        // Responses in progress get a moment to finish (connections close after them, and
        // idle ones notice the stop within IDLE_SLICE); then the rest are cut.
        let deadline = Instant::now() + STOP_GRACE;
        let mut open = self.shared.open.lock().unwrap_or_else(|e| e.into_inner());
        while !open.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            open = match self.shared.closed.wait_timeout(open, left) {
                Ok((guard, _)) => guard,
                Err(e) => e.into_inner().0,
            };
        }
        for s in open.values() {
            let _ = s.shutdown(Shutdown::Both);
        }
        drop(open);
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn accept(listener: TcpListener, tx: Sender<TcpStream>, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Relaxed) {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and the like: back off a little rather than spin.
                warn!("REST server: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        shared.stats.connections.fetch_add(1, Relaxed);
        let _ = stream.set_nodelay(true);
        match tx.try_send(stream) {
            Ok(()) => {}
            Err(TrySendError::Full(mut s)) => {
                shared.stats.rejected.fetch_add(1, Relaxed);
                shared.stats.responses[5].fetch_add(1, Relaxed);
                // A fresh socket's send buffer is empty: this small write does not block.
                let _ = write_response(
                    &mut s,
                    &Response::error(
                        503,
                        "server busy",
                        "every REST worker is busy and the queue is full; retry shortly",
                    )
                    .with_header("Retry-After", "1"),
                    false,
                    false,
                    Instant::now() + Duration::from_secs(1),
                );
                let _ = s.shutdown(Shutdown::Write);
            }
            Err(TrySendError::Disconnected(_)) => break,
        }
    }
}

fn worker(rx: Receiver<TcpStream>, shared: Arc<Shared>) {
    while let Ok(stream) = rx.recv() {
        let id = shared.next_id.fetch_add(1, Relaxed);
        match (stream.try_clone(), shared.open.lock()) {
            (Ok(clone), Ok(mut open)) => {
                open.insert(id, clone);
            }
            _ => continue,
        }
        // Checked after registering: a stop that swept the registry before sees it here.
        if !shared.stopping.load(Relaxed) {
            serve(stream, &shared, &rx);
        }
        if let Ok(mut open) = shared.open.lock() {
            open.remove(&id);
        }
        shared.closed.notify_all();
    }
}

/// Why a request could not be read: answered with this status (or the gate's `answer`)
/// and the connection closed.
struct Refusal {
    status: u16,
    error: &'static str,
    detail: String,
    answer: Option<Response>,
}

fn refuse(status: u16, error: &'static str, detail: impl Into<String>) -> Refusal {
    Refusal {
        status,
        error,
        detail: detail.into(),
        answer: None,
    }
}

struct Conn {
    stream: TcpStream,
    /// Bytes read but not consumed (a pipelined next request may start here).
    buf: Vec<u8>,
}

enum Read1 {
    Data,
    Closed,
    TimedOut,
}

impl Conn {
    /// One read, giving up at `deadline`.
    fn fill(&mut self, deadline: Instant) -> io::Result<Read1> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Read1::TimedOut);
        }
        self.stream.set_read_timeout(Some(left))?;
        let mut tmp = [0u8; 16 * 1024];
        match self.stream.read(&mut tmp) {
            Ok(0) => Ok(Read1::Closed),
            Ok(n) => {
                self.buf.extend_from_slice(&tmp[..n]);
                Ok(Read1::Data)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                Ok(Read1::TimedOut)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(Read1::Data),
            Err(e) => Err(e),
        }
    }
}

fn serve(stream: TcpStream, shared: &Shared, queue: &Receiver<TcpStream>) {
    let mut conn = Conn {
        stream,
        buf: Vec::with_capacity(4096),
    };
    let mut first = true;
    loop {
        let req = match read_request(&mut conn, shared, queue, first) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(r) => {
                if r.status == 408 {
                    shared.stats.timeouts.fetch_add(1, Relaxed);
                }
                debug!("REST: refused a request: {} {}", r.status, r.detail);
                count(shared, r.status);
                let resp = r
                    .answer
                    .unwrap_or_else(|| Response::error(r.status, r.error, &r.detail));
                let deadline = Instant::now() + shared.limits.write_timeout;
                if write_response(&mut conn.stream, &resp, false, false, deadline).is_ok() {
                    linger(&mut conn.stream);
                }
                return;
            }
        };
        first = false;
        let started = Instant::now();
        let head_only = req.method == "HEAD";
        let mut resp = match catch_unwind(AssertUnwindSafe(|| (shared.handler)(&req))) {
            Ok(r) => r,
            Err(_) => {
                log::error!("REST: handler panicked on {} {}", req.method, req.path);
                Response::error(
                    500,
                    "internal error",
                    "the request handler failed; see the scheduler log",
                )
            }
        };
        if let Some(hand_over) = resp.later.take() {
            // The answer comes later, from elsewhere: this worker is free for others.
            hand_over(Later {
                stream: conn.stream,
                head_only,
                stats: shared.stats.clone(),
                write_timeout: shared.limits.write_timeout,
            });
            return;
        }
        // Keep-alive yields to connections waiting for a worker.
        let keep = req.keep_alive && queue.is_empty() && !shared.stopping.load(Relaxed);
        count(shared, resp.status);
        // Method, path and status only: headers (credentials) and bodies never reach the log.
        // Trace: 10,000 executors' long polls would flood debug; /metrics counts requests.
        log::trace!(
            "{} {} -> {} ({} bytes, {:.1} ms)",
            req.method,
            req.path,
            resp.status,
            resp.body.bytes().len(),
            started.elapsed().as_secs_f64() * 1000.0
        );
        let deadline = Instant::now() + shared.limits.write_timeout;
        if write_response(&mut conn.stream, &resp, head_only, keep, deadline).is_err() || !keep {
            return;
        }
    }
}

fn count(shared: &Shared, status: u16) {
    let class = usize::from(status / 100).min(5);
    shared.stats.responses[class].fetch_add(1, Relaxed);
}

/// Reads the rest of a client's input for a moment before closing, so that the close does
/// not turn into a reset that destroys the error response in flight.
fn linger(stream: &mut TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let deadline = Instant::now() + LINGER;
    let mut drained = 0;
    let mut tmp = [0u8; 16 * 1024];
    while drained < LINGER_BYTES {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut tmp) {
            Ok(0) | Err(_) => return,
            Ok(n) => drained += n,
        }
    }
}

/// `Ok(None)`: the connection ended (closed, idle too long, or yielding to waiting ones).
fn read_request(
    conn: &mut Conn,
    shared: &Shared,
    queue: &Receiver<TcpStream>,
    first: bool,
) -> Result<Option<Request>, Refusal> {
    if conn.buf.is_empty() && !await_request(conn, shared, queue, first) {
        return Ok(None);
    }
    let deadline = Instant::now() + shared.limits.request_timeout;
    let Some(head_len) = read_head(conn, shared, deadline)? else {
        return Ok(None);
    };
    let head = parse_head(&conn.buf[..head_len])?;
    let body_len = head.content_length;
    let mut req = Request {
        method: head.method,
        path: head.path,
        query: head.query,
        headers: head.headers,
        body: Vec::new(),
        keep_alive: head.keep_alive,
    };
    if let Some(answer) = shared.gate.as_ref().and_then(|gate| gate(&req)) {
        return Err(Refusal {
            status: answer.status,
            error: "refused before the body",
            detail: format!("{} {}", req.method, req.path),
            answer: Some(answer),
        });
    }
    if body_len > MAX_BODY {
        return Err(refuse(
            413,
            "request body too large",
            format!("the body has {body_len} bytes; at most {MAX_BODY} are accepted"),
        ));
    }
    let need = head_len + body_len;
    if head.expect_continue && conn.buf.len() < need {
        let _ = conn.stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    if !fill_to(conn, need, shared, deadline)? {
        return Ok(None);
    }
    req.body = conn.buf[head_len..need].to_vec();
    conn.buf.drain(..need);
    Ok(Some(req))
}

/// Waits for the first byte of the next request; `false`: the connection is to end (closed,
/// idle too long, the server stopping, or others waiting for this worker).
fn await_request(
    conn: &mut Conn,
    shared: &Shared,
    queue: &Receiver<TcpStream>,
    first: bool,
) -> bool {
    let limits = &shared.limits;
    let idle = if first {
        limits.request_timeout
    } else {
        limits.idle_timeout
    };
    let idle_deadline = Instant::now() + idle;
    loop {
        let slice = (Instant::now() + IDLE_SLICE).min(idle_deadline);
        match conn.fill(slice) {
            Ok(Read1::Data) if !conn.buf.is_empty() => return true,
            Ok(Read1::Data) => {}
            Ok(Read1::Closed) | Err(_) => return false,
            Ok(Read1::TimedOut) => {
                if Instant::now() >= idle_deadline
                    || shared.stopping.load(Relaxed)
                    || (!first && !queue.is_empty())
                {
                    return false;
                }
            }
        }
    }
}

/// Reads until the head is complete; its length, or `None` when the client closed.
fn read_head(
    conn: &mut Conn,
    shared: &Shared,
    deadline: Instant,
) -> Result<Option<usize>, Refusal> {
    let too_large = || {
        refuse(
            431,
            "request head too large",
            format!("request line and headers exceed {MAX_HEAD} bytes"),
        )
    };
    let mut scanned = 0;
    let head_len = loop {
        if let Some(end) = head_end(&conn.buf, scanned) {
            break end;
        }
        scanned = conn.buf.len().saturating_sub(3);
        if conn.buf.len() > MAX_HEAD {
            return Err(too_large());
        }
        match conn.fill(deadline).map_err(read_error)? {
            Read1::Data => {}
            Read1::Closed => return Ok(None),
            Read1::TimedOut => return Err(request_timeout(shared)),
        }
    };
    if head_len > MAX_HEAD {
        return Err(too_large());
    }
    Ok(Some(head_len))
}

/// Reads until `need` bytes are buffered; `false` when the client closed first.
fn fill_to(
    conn: &mut Conn,
    need: usize,
    shared: &Shared,
    deadline: Instant,
) -> Result<bool, Refusal> {
    while conn.buf.len() < need {
        match conn.fill(deadline).map_err(read_error)? {
            Read1::Data => {}
            Read1::Closed => return Ok(false),
            Read1::TimedOut => return Err(request_timeout(shared)),
        }
    }
    Ok(true)
}

fn read_error(e: io::Error) -> Refusal {
    refuse(400, "bad request", format!("reading the request: {e}"))
}

fn request_timeout(shared: &Shared) -> Refusal {
    refuse(
        408,
        "request timeout",
        format!(
            "the request was not received completely within {} s",
            shared.limits.request_timeout.as_secs_f64()
        ),
    )
}

/// End of the head (after the blank line), searching from `from`. Bare LF line ends are
/// accepted as well as CRLF.
fn head_end(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from;
    while i < buf.len() {
        if buf[i] == b'\n' {
            match buf.get(i + 1) {
                Some(b'\n') => return Some(i + 2),
                Some(b'\r') if buf.get(i + 2) == Some(&b'\n') => return Some(i + 3),
                _ => {}
            }
        }
        i += 1;
    }
    None
}

struct Head {
    method: String,
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    content_length: usize,
    expect_continue: bool,
    keep_alive: bool,
}

fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn bad_request(detail: String) -> Refusal {
    refuse(400, "bad request", detail)
}

fn parse_head(raw: &[u8]) -> Result<Head, Refusal> {
    let text = std::str::from_utf8(raw)
        .map_err(|_| bad_request("the request head is not valid UTF-8".into()))?;
    let mut lines = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let line = request_line(lines.next().unwrap_or(""))?;
    let headers = header_lines(lines)?;
    let (path, query) = line.target.split_once('?').unwrap_or((line.target, ""));
    let connection = headers
        .iter()
        .filter(|(n, _)| n == "connection")
        .map(|(_, v)| v.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(",");
    let keep_alive = if line.http10 {
        connection.contains("keep-alive")
    } else {
        !connection.contains("close")
    };
    Ok(Head {
        method: line.method.to_owned(),
        path: path.to_owned(),
        query: query.to_owned(),
        content_length: content_length(&headers)?,
        expect_continue: expect_continue(&headers)?,
        headers,
        keep_alive,
    })
}

struct RequestLine<'a> {
    method: &'a str,
    target: &'a str,
    http10: bool,
}

/// `METHOD /target HTTP/1.x`.
fn request_line(line: &str) -> Result<RequestLine<'_>, Refusal> {
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(bad_request(format!(
            "malformed request line {:?}",
            line.chars().take(200).collect::<String>()
        )));
    };
    if !is_token(method) {
        return Err(bad_request(format!("malformed method {method:?}")));
    }
    let http10 = match version {
        "HTTP/1.1" => false,
        "HTTP/1.0" => true,
        v if v.starts_with("HTTP/") => {
            return Err(refuse(
                505,
                "HTTP version not supported",
                format!("{v} is not supported; use HTTP/1.1"),
            ))
        }
        v => return Err(bad_request(format!("malformed HTTP version {v:?}"))),
    };
    if !target.starts_with('/') || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(bad_request(format!(
            "request target {:?} is not an absolute path",
            target.chars().take(200).collect::<String>()
        )));
    }
    Ok(RequestLine {
        method,
        target,
        http10,
    })
}

/// The header lines up to the blank one, names lowercased. Header lines are never echoed
/// into errors (or the log): a mangled one may hold credentials.
fn header_lines<'a>(
    lines: impl Iterator<Item = &'a str>,
) -> Result<Vec<(String, String)>, Refusal> {
    let mut headers = Vec::with_capacity(8);
    for (i, l) in lines.enumerate() {
        if l.is_empty() {
            break;
        }
        if l.starts_with(' ') || l.starts_with('\t') {
            return Err(bad_request("folded header lines are not accepted".into()));
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(bad_request(format!("header line {} has no colon", i + 1)));
        };
        if !is_token(name) {
            return Err(bad_request(format!(
                "header line {} has a malformed name (spaces or other characters not allowed in a header name)",
                i + 1
            )));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
        if headers.len() > MAX_HEADERS {
            return Err(refuse(
                431,
                "too many headers",
                format!("at most {MAX_HEADERS} headers are accepted"),
            ));
        }
    }
    Ok(headers)
}

/// The body's length: `Content-Length` only (no chunked bodies), all copies agreeing.
fn content_length(headers: &[(String, String)]) -> Result<usize, Refusal> {
    if headers.iter().any(|(n, _)| n == "transfer-encoding") {
        return Err(refuse(
            411,
            "length required",
            "request bodies must be sent with Content-Length (Transfer-Encoding is not supported)",
        ));
    }
    let mut content_length: Option<usize> = None;
    for (_, v) in headers.iter().filter(|(n, _)| n == "content-length") {
        let n = v
            .parse::<u64>()
            .ok()
            .filter(|_| v.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| bad_request(format!("malformed Content-Length {v:?}")))?;
        // Anything beyond the limit is refused the same way; saturate rather than overflow.
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        if content_length.is_some_and(|c| c != n) {
            return Err(bad_request("conflicting Content-Length headers".into()));
        }
        content_length = Some(n);
    }
    Ok(content_length.unwrap_or(0))
}

/// `Expect: 100-continue` is the only expectation met.
fn expect_continue(headers: &[(String, String)]) -> Result<bool, Refusal> {
    match headers.iter().find(|(n, _)| n == "expect") {
        None => Ok(false),
        Some((_, v)) if v.eq_ignore_ascii_case("100-continue") => Ok(true),
        Some((_, v)) => Err(refuse(
            417,
            "expectation failed",
            format!("Expect: {v:?} is not supported"),
        )),
    }
}

fn write_response(
    stream: &mut TcpStream,
    resp: &Response,
    head_only: bool,
    keep_alive: bool,
    deadline: Instant,
) -> io::Result<()> {
    let body = resp.body.bytes();
    let mut head = String::with_capacity(256);
    let _ = write!(head, "HTTP/1.1 {} {}\r\n", resp.status, reason(resp.status));
    for (name, value) in &resp.headers {
        head.push_str(name);
        head.push_str(": ");
        // Values are ours, but a stray line break would split the response.
        head.extend(value.chars().filter(|c| *c != '\r' && *c != '\n'));
        head.push_str("\r\n");
    }
    if !(resp.status == 304 || resp.status == 204 || (100..200).contains(&resp.status)) {
        let _ = write!(head, "Content-Length: {}\r\n", body.len());
    }
    head.push_str(if keep_alive {
        "Connection: keep-alive\r\n\r\n"
    } else {
        "Connection: close\r\n\r\n"
    });
    let send_body = !head_only && resp.status != 304 && resp.status != 204;
    let body: &[u8] = if send_body { body } else { &[] };
    // Head and body in one system call (and so one segment for small answers) without
    // copying the body.
    let mut bufs = [io::IoSlice::new(head.as_bytes()), io::IoSlice::new(body)];
    let mut bufs = &mut bufs[..];
    while !bufs.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(left))?;
        match stream.write_vectored(bufs) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => io::IoSlice::advance_slices(&mut bufs, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_of_a_request_shows_no_header_value_or_body() {
        let r = Request::new(
            "POST",
            "/api/v1/executors/x/phase",
            vec![("authorization".into(), "Bearer s3cret-token".into())],
            b"{\"error\":\"private\"}".to_vec(),
        );
        let shown = format!("{r:?}");
        assert!(
            shown.contains("authorization") && shown.contains("/phase"),
            "{shown}"
        );
        assert!(
            !shown.contains("s3cret") && !shown.contains("private"),
            "{shown}"
        );
    }

    #[test]
    fn head_end_accepts_crlf_and_lf() {
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nrest", 0), Some(18));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\nrest", 0), Some(16));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: x\r\n", 0), None);
    }

    #[test]
    fn parses_a_head() {
        let h =
            parse_head(b"POST /a/b?x=1 HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\n")
                .ok()
                .unwrap();
        assert_eq!(
            (h.method.as_str(), h.path.as_str(), h.query.as_str()),
            ("POST", "/a/b", "x=1")
        );
        assert_eq!(h.content_length, 5);
        assert!(!h.keep_alive);
        let h = parse_head(b"GET / HTTP/1.0\r\n\r\n").ok().unwrap();
        assert!(!h.keep_alive);
    }

    #[test]
    fn refuses_bad_heads() {
        for (raw, status) in [
            (&b"GET /\r\n\r\n"[..], 400),
            (b"GET / HTTP/2.0\r\n\r\n", 505),
            (b"GET http://x/ HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
            (
                b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                400,
            ),
            (
                b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
                411,
            ),
            (b"POST / HTTP/1.1\r\nExpect: magic\r\n\r\n", 417),
        ] {
            match parse_head(raw) {
                Ok(_) => panic!("accepted {:?}", String::from_utf8_lossy(raw)),
                Err(r) => assert_eq!(
                    r.status,
                    status,
                    "{:?}: {}",
                    String::from_utf8_lossy(raw),
                    r.detail
                ),
            }
        }
    }

    #[test]
    fn huge_content_length_saturates() {
        let h = parse_head(b"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n");
        // Beyond u64: malformed, not a panic.
        assert!(h.is_err());
        let h = parse_head(b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n")
            .ok()
            .unwrap();
        assert!(h.content_length > MAX_BODY);
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%2Fb").unwrap(), "a/b");
        assert!(percent_decode("a%zz").is_err());
        assert!(percent_decode("a%").is_err());
        assert!(percent_decode("%ff").is_err());
        let ae = |v: &str| {
            Request::new(
                "GET",
                "/",
                vec![("accept-encoding".into(), v.into())],
                vec![],
            )
        };
        assert!(ae("gzip, deflate, br").accepts_gzip());
        assert!(ae("br;q=1.0, GZIP;q=0.5").accepts_gzip());
        assert!(ae("*").accepts_gzip());
        assert!(!ae("gzip;q=0").accepts_gzip());
        assert!(!ae("identity").accepts_gzip());
        assert!(!Request::new("GET", "/", vec![], vec![]).accepts_gzip());
        let r = Request::new("GET", "/p?version=12&wait=3&x=%41", vec![], vec![]);
        assert_eq!(r.query_param("version").unwrap().as_deref(), Some("12"));
        assert_eq!(r.query_param("x").unwrap().as_deref(), Some("A"));
        assert_eq!(r.query_param("none").unwrap(), None);
    }
}
