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
//! pool of workers each serves one connection at a time, keep-alive included. The pool
//! starts with [`FIRST_WORKERS`] and grows, up to its bound, when connections wait and no
//! worker is idle: 64 threads started at once were a fifth of the scheduler's anonymous
//! memory at 100 agents, most of them never used. A
//! connection idle between requests gives its worker up as soon as other connections wait.
//! An answer that comes later (a long poll, [`Later`]) is sent by whoever holds it; a
//! keep-alive connection that took it whole goes back in the queue for its next request.
//! One source address gets a share of the workers only (`slots.rs`); answers a client is
//! slow to take and the lingering close after an error are finished by one thread
//! (`closer.rs`), not by a worker. TLS and plain HTTP share the port: a worker tells them
//! apart by a connection's first byte (`tls.rs`).

mod closer;
mod conn;
mod message;
mod parse;
mod slots;
mod tls;
mod write;

pub use message::{percent_decode, reason, Body, Later, Request, Response};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use log::warn;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use closer::Closer;
use conn::serve;
use slots::{Admit, Slots};
use write::write_response;

/// Request bodies larger than this are refused with 413.
pub const MAX_BODY: usize = 1024 * 1024;
/// Request line plus headers.
pub const MAX_HEAD: usize = 16 * 1024;
pub const MAX_HEADERS: usize = 100;

/// Workers started with the server; more are started as connections wait for one.
const FIRST_WORKERS: usize = 4;

/// How long stopping waits for connections to finish before cutting them.
const STOP_GRACE: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct Limits {
    /// Threads serving connections.
    pub workers: usize,
    /// Accepted connections waiting for a worker; beyond that, 503.
    pub queue: usize,
    /// Time to receive one whole request (head and body) once it has started.
    pub request_timeout: Duration,
    /// Time for a new connection's first byte: a client that connects and says nothing is
    /// cut off quickly.
    pub first_byte_timeout: Duration,
    /// Connections of one source address queued for or held by a worker at once.
    pub per_address: usize,
    /// Further connections of one address that wait for one of its places; beyond, 503.
    pub per_address_waiting: usize,
    /// Connections held while their answer is sent to a slow reader or while they linger
    /// after an error; beyond, they are closed at once.
    pub closing: usize,
    /// Keep-alive: how long a connection may sit idle between requests.
    pub idle_timeout: Duration,
    /// Longest time to send one whole response: one deadline per response, not per
    /// `write()`, so that a client that reads a byte now and then cannot hold a worker.
    pub write_timeout: Duration,
}

pub type Handler = dyn Fn(&Request) -> Response + Send + Sync;

/// Sees each request after its head is read and before its body is (the body is empty
/// here): an answer ends the request there, the body unread, and closes the connection.
pub type Gate = dyn Fn(&Request) -> Option<Response> + Send + Sync;

/// Counters for `/metrics`.
#[derive(Debug, Default)]
pub struct HttpStats {
    pub connections: AtomicU64,
    /// Refused with 503 because every worker was busy and the queue full, or because their
    /// source address had too many connections.
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
    /// Places per source address; connections waiting for one are held here.
    slots: Mutex<Slots<Opened>>,
    closer: Closer,
    /// Set when connections that open with a TLS handshake are served over TLS.
    tls: Option<Arc<rustls::ServerConfig>>,
    /// The workers' queue, for connections answered later that stay open; taken at stop
    /// (while it is here, the queue never closes and the workers never end).
    requeue: Mutex<Option<Sender<Queued>>>,
    /// The workers started, and the queue's receiving end for more; `None` once stopping.
    pool: Mutex<Option<Pool>>,
    /// Workers waiting for a connection.
    idle: AtomicUsize,
}

struct Pool {
    rx: Receiver<Queued>,
    workers: Vec<JoinHandle<()>>,
}

/// A connection for a worker: a new one, or one answered later that stays open (its TLS
/// session goes with it).
pub(super) enum Opened {
    New(TcpStream),
    Kept(TcpStream, Option<Box<rustls::ServerConnection>>),
}

impl Opened {
    fn stream(&self) -> &TcpStream {
        match self {
            Opened::New(s) | Opened::Kept(s, _) => s,
        }
    }
}

/// A connection for a worker, with the source address it counts under.
type Queued = (Opened, IpAddr);

/// Hands a connection answered later back to the workers, under its address's places as a
/// new one would be; when there is no room it is closed (the client opens another).
pub(super) type Resume = Box<dyn FnOnce(TcpStream, Option<Box<rustls::ServerConnection>>) + Send>;

fn resume(shared: &Arc<Shared>, source: IpAddr) -> Resume {
    let shared = shared.clone();
    Box::new(move |stream, tls| {
        let Some(tx) = lock(&shared.requeue).clone() else {
            return;
        };
        let admitted = lock(&shared.slots).admit(source, Opened::Kept(stream, tls));
        if let Admit::Serve(conn) = admitted {
            if tx.try_send((conn, source)).is_err() {
                // It had a free place: nobody of its address waits for it.
                let _ = lock(&shared.slots).release(source);
            } else {
                grow(&shared, tx.len());
            }
        }
    })
}

pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

/// Starts a worker when `queued` connections wait and fewer workers are idle, up to the
/// bound. A worker that fails to start leaves the others serving.
fn grow(shared: &Arc<Shared>, queued: usize) {
    if queued <= shared.idle.load(Relaxed) {
        return;
    }
    let mut pool = lock(&shared.pool);
    let Some(pool) = pool.as_mut() else {
        return;
    };
    if pool.workers.len() >= shared.limits.workers.max(1) {
        return;
    }
    if let Err(e) = spawn_worker(pool, shared) {
        warn!(
            "REST server: could not start worker {} of {}: {e}",
            pool.workers.len() + 1,
            shared.limits.workers
        );
    }
}

fn spawn_worker(pool: &mut Pool, shared: &Arc<Shared>) -> io::Result<()> {
    let (rx, shared) = (pool.rx.clone(), shared.clone());
    let h = std::thread::Builder::new()
        .name(format!("rest-{}", pool.workers.len()))
        .spawn(move || worker(rx, shared))?;
    pool.workers.push(h);
    Ok(())
}

impl Server {
    pub fn start(
        listener: TcpListener,
        limits: Limits,
        stats: Arc<HttpStats>,
        handler: Arc<Handler>,
    ) -> io::Result<Server> {
        Server::start_gated(listener, limits, stats, handler, None, None)
    }

    /// [`start`](Self::start), with a [`Gate`] in front of the handler, and TLS (on the same
    /// port as plain HTTP, told apart by the first byte) when `tls` is given.
    pub fn start_gated(
        listener: TcpListener,
        limits: Limits,
        stats: Arc<HttpStats>,
        handler: Arc<Handler>,
        gate: Option<Arc<Gate>>,
        tls: Option<Arc<rustls::ServerConfig>>,
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
            slots: Mutex::new(Slots::new(limits.per_address, limits.per_address_waiting)),
            closer: Closer::start(limits.closing)?,
            tls,
            requeue: Mutex::new(None),
            pool: Mutex::new(None),
            idle: AtomicUsize::new(0),
        });
        let (tx, rx) = crossbeam_channel::bounded::<Queued>(limits.queue.max(1));
        *lock(&shared.requeue) = Some(tx.clone());
        let mut pool = Pool {
            rx,
            workers: Vec::new(),
        };
        for _ in 0..limits.workers.clamp(1, FIRST_WORKERS) {
            if let Err(e) = spawn_worker(&mut pool, &shared) {
                // Closing the queue lets the workers started end.
                drop(tx);
                lock(&shared.requeue).take();
                for w in pool.workers {
                    let _ = w.join();
                }
                return Err(e);
            }
        }
        *lock(&shared.pool) = Some(pool);
        let mut server = Server {
            addr,
            shared: shared.clone(),
            acceptor: None,
        };
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
        lock(&self.shared.requeue).take();
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
        let pool = lock(&self.shared.pool).take();
        for w in pool.into_iter().flat_map(|p| p.workers) {
            let _ = w.join();
        }
    }
}

fn accept(listener: TcpListener, tx: Sender<Queued>, shared: Arc<Shared>) {
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
        let Ok(peer) = stream.peer_addr() else {
            continue;
        };
        let source = slots::source(peer.ip());
        // Not in the match: the lock would be held through it.
        let admitted = lock(&shared.slots).admit(source, Opened::New(stream));
        match admitted {
            Admit::Serve(stream) => match tx.try_send((stream, source)) {
                Ok(()) => grow(&shared, tx.len()),
                Err(TrySendError::Full((Opened::New(s) | Opened::Kept(s, _), source))) => {
                    busy(
                        &shared,
                        s,
                        "every REST worker is busy and the queue is full",
                    );
                    // Nobody of that address waits: it had a free place.
                    let _ = lock(&shared.slots).release(source);
                }
                Err(TrySendError::Disconnected(_)) => break,
            },
            Admit::Waits => {}
            Admit::Refuse(Opened::New(s) | Opened::Kept(s, _)) => {
                busy(&shared, s, "too many connections from your address")
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// 503 at once, without a worker.
fn busy(shared: &Shared, mut s: TcpStream, why: &str) {
    shared.stats.rejected.fetch_add(1, Relaxed);
    shared.stats.responses[5].fetch_add(1, Relaxed);
    // A fresh socket's send buffer is empty: this small write does not block.
    // Plain even to a client that opens with TLS: it sees a failed handshake, and retries
    // as after any connection error.
    let answered = write_response(
        &mut s,
        None,
        &Response::error(503, "server busy", &format!("{why}; retry shortly"))
            .with_header("Retry-After", "1"),
        false,
        false,
        Instant::now() + Duration::from_secs(1),
    );
    if answered.is_ok() {
        shared.closer.linger(s);
    }
}

fn worker(rx: Receiver<Queued>, shared: Arc<Shared>) {
    loop {
        shared.idle.fetch_add(1, Relaxed);
        let next = rx.recv();
        shared.idle.fetch_sub(1, Relaxed);
        let Ok((stream, source)) = next else {
            break;
        };
        // More waiting than idle workers to take them (a burst came faster than the
        // acceptor saw workers busy): one more.
        grow(&shared, rx.len());
        let mut next = Some(stream);
        // The connections of that address that waited for its place come next, here.
        while let Some(stream) = next {
            serve_one(stream, source, &shared, &rx);
            next = lock(&shared.slots).release(source);
        }
    }
}

fn serve_one(stream: Opened, source: IpAddr, shared: &Arc<Shared>, rx: &Receiver<Queued>) {
    let id = shared.next_id.fetch_add(1, Relaxed);
    match (stream.stream().try_clone(), shared.open.lock()) {
        (Ok(clone), Ok(mut open)) => {
            open.insert(id, clone);
        }
        _ => return,
    }
    // Checked after registering: a stop that swept the registry before sees it here.
    if !shared.stopping.load(Relaxed) {
        serve(stream, source, shared, rx);
    }
    if let Ok(mut open) = shared.open.lock() {
        open.remove(&id);
    }
    shared.closed.notify_all();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn limits(workers: usize) -> Limits {
        let t = Duration::from_secs(10);
        Limits {
            workers,
            queue: 64,
            request_timeout: t,
            first_byte_timeout: t,
            per_address: 64,
            per_address_waiting: 64,
            closing: 16,
            idle_timeout: t,
            write_timeout: t,
        }
    }

    fn started(server: &Server) -> usize {
        lock(&server.shared.pool)
            .as_ref()
            .map_or(0, |p| p.workers.len())
    }

    /// The pool starts small and grows to its bound when that many requests are in
    /// progress at once, no further.
    #[test]
    fn the_pool_grows_to_its_bound_as_connections_wait() {
        const BOUND: usize = 10;
        let (entered_tx, entered) = crossbeam_channel::unbounded::<()>();
        let (release, released) = crossbeam_channel::unbounded::<()>();
        let handler: Arc<Handler> = Arc::new(move |_req: &Request| {
            let _ = entered_tx.send(());
            let _ = released.recv_timeout(Duration::from_secs(10));
            Response::new(200, "text/plain", Body::Static(b"ok"))
        });
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = Server::start(
            listener,
            limits(BOUND),
            Arc::new(HttpStats::default()),
            handler,
        )
        .unwrap();
        assert_eq!(started(&server), FIRST_WORKERS);
        let clients: Vec<TcpStream> = (0..BOUND + 2)
            .map(|_| {
                let mut c = TcpStream::connect(addr).unwrap();
                c.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    .unwrap();
                c
            })
            .collect();
        // Every worker of the bound is in the handler at once, each on its own request.
        for i in 0..BOUND {
            entered
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("only {i} requests served at once"));
        }
        assert_eq!(started(&server), BOUND);
        for _ in 0..BOUND + 2 {
            release.send(()).unwrap();
        }
        for mut c in clients {
            let mut answer = String::new();
            c.read_to_string(&mut answer).unwrap();
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        }
        assert_eq!(started(&server), BOUND);
    }
}
