//! A small HTTP/1.1 server on std sockets for the simulated master and agents.
//!
//! tiny_http buffers chunked bodies 8 KiB at a time and cannot close a keep-alive connection
//! on demand; the Mesos streams need every RecordIO record flushed as its own chunk at once,
//! and fault injection needs to cut a subscription mid-stream. So this server owns its
//! sockets: one thread per connection, keep-alive for plain requests, and a handler may turn
//! its response into an endless chunked stream fed by a channel.

use crossbeam_channel::Receiver;
use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};

/// Requests larger than this are refused with 413: far above any Mesos call.
pub const MAX_BODY: usize = 16 * 1024 * 1024;
const MAX_LINE: usize = 16 * 1024;
const MAX_HEADERS: usize = 128;

#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path without the query string.
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn has_header(&self, name: &str) -> bool {
        self.header(name).is_some()
    }
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    /// A response with a plain-text body, as libprocess sends for errors.
    pub fn text(status: u16, body: impl Into<String>) -> Response {
        Response::new(status)
            .header("Content-Type", "text/plain; charset=utf-8")
            .body(body.into().into_bytes())
    }

    pub fn json(status: u16, value: &serde_json::Value) -> Response {
        Response::new(status)
            .header("Content-Type", "application/json")
            .body(value.to_string().into_bytes())
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Response {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    pub fn body(mut self, body: Vec<u8>) -> Response {
        self.body = body;
        self
    }
}

/// What the owner of a stream sends to the connection writing it.
#[derive(Debug)]
pub enum StreamMsg {
    /// Bytes written as one chunk and flushed at once.
    Data(Vec<u8>),
    /// Ends the body properly (terminating chunk), then closes the connection. Dropping the
    /// sender instead cuts the connection without a terminating chunk, as a crash would.
    Close,
}

/// A 200 response whose chunked body is whatever arrives on `rx`.
pub struct Stream {
    pub headers: Vec<(String, String)>,
    pub rx: Receiver<StreamMsg>,
    /// Called once when the stream ends for any reason (peer gone, cut, closed).
    pub on_end: Box<dyn FnOnce() + Send>,
}

pub enum Reply {
    Full(Response),
    Stream(Stream),
}

impl From<Response> for Reply {
    fn from(r: Response) -> Reply {
        Reply::Full(r)
    }
}

pub type Handler = Arc<dyn Fn(Request) -> Reply + Send + Sync>;

/// A listening server; dropping it (or `stop`) closes the listener and every connection.
pub struct Server {
    addr: SocketAddr,
    stopped: Arc<AtomicBool>,
    conns: Arc<Mutex<HashMap<u64, TcpStream>>>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    pub fn bind(addr: SocketAddr, name: &str, handler: Handler) -> io::Result<Server> {
        Server::from_listener(TcpListener::bind(addr)?, name, handler)
    }

    pub fn from_listener(
        listener: TcpListener,
        name: &str,
        handler: Handler,
    ) -> io::Result<Server> {
        let addr = listener.local_addr()?;
        let stopped = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<HashMap<u64, TcpStream>>> = Arc::default();
        let accept = {
            let stopped = stopped.clone();
            let conns = conns.clone();
            let name = name.to_string();
            thread::Builder::new()
                .name(format!("{name}-accept"))
                .spawn(move || accept_loop(listener, &name, stopped, conns, handler))?
        };
        Ok(Server {
            addr,
            stopped,
            conns,
            accept: Some(accept),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes every open connection and frees the port.
    pub fn stop(&mut self) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Ok(conns) = self.conns.lock() {
            for c in conns.values() {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
        // The accept thread is blocked in accept(); a connection wakes it to see the flag.
        // Only then can it be joined, which frees the port for a restart on the same address.
        let woke = TcpStream::connect_timeout(&self.addr, std::time::Duration::from_secs(2));
        if let Some(t) = self.accept.take() {
            if woke.is_ok() {
                let _ = t.join();
            } else {
                log::warn!("{}: cannot wake the accept thread; leaving it", self.addr);
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn accept_loop(
    listener: TcpListener,
    name: &str,
    stopped: Arc<AtomicBool>,
    conns: Arc<Mutex<HashMap<u64, TcpStream>>>,
    handler: Handler,
) {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    for stream in listener.incoming() {
        if stopped.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        let Ok(clone) = stream.try_clone() else {
            continue;
        };
        if let Ok(mut map) = conns.lock() {
            map.insert(id, clone);
        }
        let conns = conns.clone();
        let handler = handler.clone();
        let spawned = thread::Builder::new()
            .name(format!("{name}-conn"))
            .spawn(move || {
                serve_connection(stream, &handler);
                if let Ok(mut map) = conns.lock() {
                    map.remove(&id);
                }
            });
        if spawned.is_err() {
            log::warn!("{name}: cannot spawn a connection thread");
        }
    }
}

fn serve_connection(stream: TcpStream, handler: &Handler) {
    let _ = stream.set_nodelay(true);
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut writer = write_half;
    let mut reader = BufReader::new(stream);
    loop {
        let request = match read_request(&mut reader, &mut writer) {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(ReadError::Io(_)) => return,
            Err(ReadError::Bad(status, why)) => {
                let _ = write_response(&mut writer, &Response::text(status, why), true);
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
        };
        let close = wants_close(&request);
        let head_only = request.method == "HEAD";
        match handler(request) {
            Reply::Full(mut response) => {
                if head_only {
                    response.body.clear();
                }
                if write_response(&mut writer, &response, close).is_err() || close {
                    let _ = writer.shutdown(Shutdown::Both);
                    return;
                }
            }
            Reply::Stream(s) => {
                run_stream(reader, writer, s);
                return;
            }
        }
    }
}

fn wants_close(r: &Request) -> bool {
    match r.header("Connection") {
        Some(v) if v.to_ascii_lowercase().contains("close") => true,
        Some(v) if v.to_ascii_lowercase().contains("keep-alive") => false,
        _ => false,
    }
}

/// Writes the stream until its channel says otherwise; a second thread watches the socket so
/// that a peer that goes away is noticed at once, not at the next write.
fn run_stream(reader: BufReader<TcpStream>, mut writer: TcpStream, s: Stream) {
    let on_end = Arc::new(Mutex::new(Some(s.on_end)));
    let fire = {
        let on_end = on_end.clone();
        move || {
            let f = on_end.lock().ok().and_then(|mut g| g.take());
            if let Some(f) = f {
                f();
            }
        }
    };
    let mut head = String::from("HTTP/1.1 200 OK\r\n");
    for (n, v) in &s.headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("Transfer-Encoding: chunked\r\n\r\n");
    if writer
        .write_all(head.as_bytes())
        .and_then(|_| writer.flush())
        .is_err()
    {
        let _ = writer.shutdown(Shutdown::Both);
        fire();
        return;
    }
    {
        let fire = fire.clone();
        let mut inner = reader.into_inner();
        let _ = inner.set_read_timeout(None);
        let watcher = thread::Builder::new()
            .name("stream-watch".into())
            .spawn(move || {
                let mut buf = [0u8; 4096];
                // Anything the peer sends on a stream connection is ignored; only its end
                // matters.
                while let Ok(n) = inner.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                }
                let _ = inner.shutdown(Shutdown::Both);
                fire();
            });
        if watcher.is_err() {
            log::warn!("cannot spawn a stream watcher thread");
        }
    }
    loop {
        match s.rx.recv() {
            Ok(StreamMsg::Data(bytes)) => {
                if bytes.is_empty() {
                    continue;
                }
                let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
                chunk.extend_from_slice(&bytes);
                chunk.extend_from_slice(b"\r\n");
                if writer
                    .write_all(&chunk)
                    .and_then(|_| writer.flush())
                    .is_err()
                {
                    break;
                }
            }
            Ok(StreamMsg::Close) => {
                let _ = writer.write_all(b"0\r\n\r\n").and_then(|_| writer.flush());
                break;
            }
            Err(_) => break,
        }
    }
    let _ = writer.shutdown(Shutdown::Both);
    fire();
}

enum ReadError {
    Io(#[allow(dead_code)] io::Error),
    Bad(u16, String),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// One line without its CRLF; `None` at a clean EOF before any byte.
fn read_line(reader: &mut impl BufRead) -> Result<Option<String>, ReadError> {
    let mut line = Vec::new();
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            if line.is_empty() {
                return Ok(None);
            }
            return Err(ReadError::Bad(
                400,
                "Connection closed inside a line".into(),
            ));
        }
        if let Some(i) = buf.iter().position(|&b| b == b'\n') {
            line.extend_from_slice(&buf[..i]);
            reader.consume(i + 1);
            break;
        }
        let n = buf.len();
        line.extend_from_slice(buf);
        reader.consume(n);
        if line.len() > MAX_LINE {
            return Err(ReadError::Bad(
                431,
                "Request line or header too long".into(),
            ));
        }
    }
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    String::from_utf8(line)
        .map(Some)
        .map_err(|_| ReadError::Bad(400, "Request head is not valid UTF-8".into()))
}

fn read_request(
    reader: &mut BufReader<TcpStream>,
    writer: &mut TcpStream,
) -> Result<Option<Request>, ReadError> {
    let line = loop {
        match read_line(reader)? {
            None => return Ok(None),
            // Tolerate stray CRLFs between requests (RFC 9112 section 2.2).
            Some(l) if l.is_empty() => continue,
            Some(l) => break l,
        }
    };
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad(
            400,
            format!("Malformed request line {line:?}"),
        ));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(ReadError::Bad(
            505,
            format!("Unsupported HTTP version {version:?}"),
        ));
    }
    let mut headers = Vec::new();
    loop {
        let Some(h) = read_line(reader)? else {
            return Err(ReadError::Bad(
                400,
                "Connection closed inside the headers".into(),
            ));
        };
        if h.is_empty() {
            break;
        }
        let Some((name, value)) = h.split_once(':') else {
            return Err(ReadError::Bad(400, format!("Malformed header {h:?}")));
        };
        if headers.len() >= MAX_HEADERS {
            return Err(ReadError::Bad(431, "Too many headers".into()));
        }
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target.to_string(), String::new()),
    };
    let mut request = Request {
        method: method.to_string(),
        path,
        query,
        headers,
        body: Vec::new(),
    };
    if version == "HTTP/1.0" && !request.has_header("Connection") {
        request
            .headers
            .push(("Connection".to_string(), "close".to_string()));
    }
    if request
        .header("Expect")
        .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"))
    {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        writer.flush()?;
    }
    let chunked = request
        .header("Transfer-Encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        request.body = read_chunked(reader)?;
    } else if let Some(len) = request.header("Content-Length") {
        let len: usize = len
            .parse()
            .map_err(|_| ReadError::Bad(400, format!("Invalid Content-Length {len:?}")))?;
        if len > MAX_BODY {
            return Err(ReadError::Bad(
                413,
                format!("Body of {len} bytes is too large"),
            ));
        }
        let mut body = vec![0u8; len];
        reader.read_exact(&mut body)?;
        request.body = body;
    }
    Ok(Some(request))
}

fn read_chunked(reader: &mut BufReader<TcpStream>) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        let Some(line) = read_line(reader)? else {
            return Err(ReadError::Bad(
                400,
                "Connection closed inside a chunked body".into(),
            ));
        };
        let size = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size, 16)
            .map_err(|_| ReadError::Bad(400, format!("Invalid chunk size {size:?}")))?;
        if size == 0 {
            // Trailers, up to the empty line.
            while let Some(l) = read_line(reader)? {
                if l.is_empty() {
                    break;
                }
            }
            return Ok(body);
        }
        if size > MAX_BODY.saturating_sub(body.len()) {
            return Err(ReadError::Bad(413, "Chunked body is too large".into()));
        }
        let start = body.len();
        body.resize(start + size, 0);
        reader.read_exact(&mut body[start..])?;
        let _ = read_line(reader)?;
    }
}

fn write_response(w: &mut TcpStream, r: &Response, close: bool) -> io::Result<()> {
    let mut out = format!("HTTP/1.1 {} {}\r\n", r.status, reason(r.status));
    for (n, v) in &r.headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str(&format!("Content-Length: {}\r\n", r.body.len()));
    if close {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(&r.body);
    w.write_all(&bytes)?;
    w.flush()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        204 => "No Content",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        413 => "Payload Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        _ => "Unknown",
    }
}
