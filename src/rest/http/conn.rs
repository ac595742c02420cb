//! Serving one connection: reading each request within its deadlines, calling the gate and
//! the handler, and keeping the connection alive only while no other one waits.

use super::message::{Later, Request, Response};
use super::parse::{head_end, parse_head, refuse, Refusal};
use super::tls;
use super::write::write_response;
use super::{lock, Opened, Queued, Shared, MAX_BODY, MAX_HEAD};
use crossbeam_channel::Receiver;
use log::debug;
use rustls::ServerConnection;
use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes asked of the socket per read of a plain connection (its head is read to its end,
/// a body until it is whole, so this bounds nothing but the syscalls).
const READ_CHUNK: usize = 4096;

/// How often an idle keep-alive connection checks whether others wait for a worker.
pub(super) const IDLE_SLICE: Duration = Duration::from_millis(500);

struct Conn {
    stream: TcpStream,
    /// Set when the client opened with a TLS handshake: every byte read and written goes
    /// through it.
    tls: Option<Box<ServerConnection>>,
    /// The source address it counts under.
    source: IpAddr,
    /// Bytes read but not consumed (a pipelined next request may start here).
    buf: Vec<u8>,
}

pub(super) enum Read1 {
    Data,
    Closed,
    TimedOut,
}

impl Conn {
    fn send_continue(&mut self, deadline: Instant) {
        const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
        let _ = match &mut self.tls {
            None => self.stream.write_all(CONTINUE),
            Some(t) => tls::seal(t, &[CONTINUE], false).and_then(|bytes| {
                let left = deadline.saturating_duration_since(Instant::now());
                self.stream
                    .set_write_timeout(Some(left.max(Duration::from_millis(1))))?;
                self.stream.write_all(&bytes)
            }),
        };
    }

    /// One read, giving up at `deadline`.
    fn fill(&mut self, deadline: Instant) -> io::Result<Read1> {
        if let Some(t) = &mut self.tls {
            return tls::fill(&mut self.stream, t, &mut self.buf, deadline);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Read1::TimedOut);
        }
        self.stream.set_read_timeout(Some(left))?;
        // Straight into the connection's buffer, not through an array on the stack: a stack
        // page once touched stays resident. With a 16 KB array each of the 64 workers kept
        // 28 KB of stack, without it 20 KB (smaps at 10,000 agents: 2.0 MB of stacks, 1.5).
        let start = self.buf.len();
        self.buf.resize(start + READ_CHUNK, 0);
        let read = self.stream.read(&mut self.buf[start..]);
        self.buf.truncate(start + read.as_ref().map_or(0, |n| *n));
        match read {
            Ok(0) => Ok(Read1::Closed),
            Ok(_) => Ok(Read1::Data),
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

pub(super) fn serve(
    stream: Opened,
    source: IpAddr,
    shared: &Arc<Shared>,
    queue: &Receiver<Queued>,
) {
    let (mut conn, mut first) = match stream {
        Opened::New(stream) => match open(stream, source, shared) {
            Some(conn) => (conn, true),
            None => return,
        },
        Opened::Kept(stream, tls) => {
            let buf = Vec::with_capacity(4096);
            (
                Conn {
                    stream,
                    tls,
                    source,
                    buf,
                },
                false,
            )
        }
    };
    loop {
        let req = match read_request(&mut conn, shared, queue, first) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(r) => return refuse_and_close(conn, shared, r),
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
            // Bytes past this request (a pipelined one) would be lost with the worker's buffer.
            let keep = req.keep_alive && conn.buf.is_empty();
            hand_over(Later {
                stream: conn.stream,
                tls: conn.tls,
                head_only,
                stats: shared.stats.clone(),
                write_timeout: shared.limits.write_timeout,
                closer: shared.closer.clone(),
                keep: keep.then(|| super::resume(shared, source)),
            });
            return;
        }
        // Keep-alive yields to connections waiting for a worker.
        let keep = req.keep_alive && !others_wait(&conn, shared, queue);
        count(shared, resp.status);
        // Method, path and status only: headers (credentials) and bodies never reach the log.
        // Trace: 10,000 executors' long polls would flood debug; /metrics counts requests.
        log::trace!(
            "{} {} -> {} ({} bytes, {:.1} ms)",
            req.method,
            req.path,
            resp.status,
            resp.body.size(),
            started.elapsed().as_secs_f64() * 1000.0
        );
        let deadline = Instant::now() + shared.limits.write_timeout;
        let tls = conn.tls.as_deref_mut();
        if write_response(&mut conn.stream, tls, &resp, head_only, keep, deadline).is_err() || !keep
        {
            return;
        }
    }
}

/// The connection once its first byte told which kind it is, a TLS one after its handshake;
/// `None` when it ended first. The handshake has the time of a request: a client that stops
/// or trickles in the middle of it holds its worker no longer than a request's would.
fn open(stream: TcpStream, source: IpAddr, shared: &Shared) -> Option<Conn> {
    let first_byte = shared.limits.first_byte_timeout;
    let kind = tls::peek_first(&stream, Instant::now() + first_byte, &shared.stopping)?;
    let mut conn = Conn {
        stream,
        tls: None,
        source,
        buf: Vec::with_capacity(4096),
    };
    // A server without a certificate reads a handshake as a malformed request (400).
    let (Some(config), tls::HANDSHAKE_RECORD) = (&shared.tls, kind) else {
        return Some(conn);
    };
    let mut session = tls::accept(config).ok()?;
    let deadline = Instant::now() + shared.limits.request_timeout;
    if let Err(why) = tls::handshake(&mut conn.stream, &mut session, &mut conn.buf, deadline) {
        if why == tls::TIMED_OUT {
            shared.stats.timeouts.fetch_add(1, Relaxed);
        }
        debug!("REST: TLS handshake with {source} {why}");
        return None;
    }
    conn.tls = Some(session);
    Some(conn)
}

/// Answers a request refused before the handler, and closes.
fn refuse_and_close(mut conn: Conn, shared: &Shared, r: Refusal) {
    if r.status == 408 {
        shared.stats.timeouts.fetch_add(1, Relaxed);
    }
    debug!("REST: refused a request: {} {}", r.status, r.detail);
    count(shared, r.status);
    let resp = r
        .answer
        .unwrap_or_else(|| Response::error(r.status, r.error, &r.detail));
    let deadline = Instant::now() + shared.limits.write_timeout;
    let tls = conn.tls.as_deref_mut();
    if write_response(&mut conn.stream, tls, &resp, false, false, deadline).is_ok() {
        shared.closer.linger(conn.stream);
    }
}

/// Whether this connection is to give its worker up: others wait for a worker or for its
/// address's place, or the server stops.
fn others_wait(conn: &Conn, shared: &Shared, queue: &Receiver<Queued>) -> bool {
    !queue.is_empty()
        || shared.stopping.load(Relaxed)
        || lock(&shared.slots).has_waiting(conn.source)
}

fn count(shared: &Shared, status: u16) {
    let class = usize::from(status / 100).min(5);
    shared.stats.responses[class].fetch_add(1, Relaxed);
}

/// `Ok(None)`: the connection ended (closed, idle too long, or yielding to waiting ones).
fn read_request(
    conn: &mut Conn,
    shared: &Shared,
    queue: &Receiver<Queued>,
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
        tls: conn.tls.is_some(),
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
        conn.send_continue(deadline);
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
fn await_request(conn: &mut Conn, shared: &Shared, queue: &Receiver<Queued>, first: bool) -> bool {
    let limits = &shared.limits;
    let idle = if first {
        limits.first_byte_timeout
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
                    || (!first && others_wait(conn, shared, queue))
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
