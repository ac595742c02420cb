//! The scheduler's HTTP server on `-rest.port`: status page, state, health, metrics, the
//! executor binary, and the executor API (design section 5).
//!
//! | method and path | what |
//! |---|---|
//! | `GET /`, `GET /ui` | HTML status page (refreshes itself) |
//! | `GET /version` | `{"versionint": N, "versionstr": "x.y.z", "release": tag, "commit": sha}` |
//! | `GET /health` | 200 when subscribed, else 503; JSON. The scheduler process alone: a degraded storage cluster leaves it 200, so the launcher never restarts the scheduler for it |
//! | `GET /api/health` | the storage cluster's health, its pools' and every node's that is not healthy, with reasons (`health.rs`) |
//! | `GET /api/events` | the last few hundred operator actions and plan changes, newest first (`operator.rs`) |
//! | `POST /api/plan/{pause,resume}`, `POST /api/nodes/<host>/{restart,retry,decommission,recommission,replace}`, `POST /api/nodes/<host>/devices/<name>/remove` | operators, with `Authorization: Bearer <operator token>`, over TLS only; 403 when no token is configured (`operator.rs`; the commands: `scheduler::operator`) |
//! | `GET /api/plan` | the plan: what it does (first rollout, upgrade, target change, idle), its target generation, the steps of every node with something left to do and why one waits or failed, counts by state (`scheduler::rollout::view`) |
//! | `GET /metrics` | Prometheus text format |
//! | `GET /api/state?offset=N&limit=N` | the cluster model as JSON (no secrets: they live outside the model); whole up to 1,000 nodes, else in pages (see `state.rs`) |
//! | `GET /api/nodes/<host>` | one node, as in `/api/state` (404 naming the host when unknown) |
//! | `GET /storage-executor` | the executor binary (ETag, `If-None-Match`, HEAD) |
//! | `GET /api/v1/executors/<id>/plan?version=N&wait=S` | node plan; with `version` equal to the current one and `wait` > 0 (seconds, at most 60), waits up to `wait` for a change: 200 with the new plan, or 304 when still unchanged |
//! | `POST /api/v1/executors/<id>/phase` | `{"phase": "packages", "message": "...", "error": "..."}` |
//! | `POST /api/v1/executors/<id>/devices` | `{"devices": ["/dev/sdb"]}` |
//! | `POST /api/v1/executors/<id>/heartbeat` | no body needed |
//! | `POST /api/v1/executors/<id>/health` | `{"problems": [{"check": "service", "subject": "sds", "detail": "not running"}]}` (a running executor, when its host's findings change) |
//!
//! With a certificate ([`RestConfig::tls`]) the same port serves TLS too, and the executor
//! API and every write are TLS only: over plain HTTP they get 403 before their body is read
//! (`plain.rs`).
//!
//! Executor calls carry `Authorization: Bearer <secret>` (the `executor_secret` of the task's `TaskInfo.data`): missing or wrong
//! is 401, and so is an executor that is not the current launch of a node, with the same
//! body (no one learns which executor ids exist); both are answered before the request's
//! body is read (`gate.rs`). Reports answer 200
//! `{"recorded": true}`. Errors are JSON `{"error": ..., "detail": ...}` (the HTML page
//! aside); bodies over 1 MiB get 413. When every long-poll slot is taken a plan wait gets 503
//! with `Retry-After`; so does a connection from an address that already has its share of
//! the workers and of the places waiting for them.

mod executor_api;
mod fdlimit;
mod gate;
mod health;
pub mod http;
mod json_cache;
mod operator;
mod page;
mod page_health;
mod page_plan;
mod page_row;
mod paging;
mod plain;
mod prom;
mod prom_health;
mod prom_plan;
mod state;
mod state_render;
mod view_cache;
mod waits;

use crate::clock::Clock;
use crate::contract::api;
use crate::contract::env;
pub use crate::scheduler::exchange::RestConfig;
use crate::scheduler::exchange::{Input, View};
use crate::scheduler::executor_binary::{ExecutorBinary, Served};
use crossbeam_channel::{select, Receiver, Sender};
use http::{Body, HttpStats, Request, Response};
use log::{info, warn};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use waits::Waits;

use json_cache::compress;
pub use json_cache::JsonCache;

/// Tuning of the server; `Default` is what the scheduler runs with.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Address to listen on (the port comes from [`RestConfig::port`]; 0 picks a free one).
    pub bind: IpAddr,
    /// Threads serving connections: the most requests in progress at once.
    pub workers: usize,
    /// Connections waiting for a worker before new ones get 503.
    pub queue: usize,
    /// Time to receive one whole request once it started (a stalled client is cut off).
    pub request_timeout: Duration,
    /// Time for a new connection's first byte.
    pub first_byte_timeout: Duration,
    /// Connections of one source address served at once (an IPv6 /64 counts as one).
    pub per_address: usize,
    /// Further connections of one address waiting for its turn before it gets 503.
    pub per_address_waiting: usize,
    /// Connections held while a slow reader takes its answer or while one lingers after an
    /// error (off the workers); beyond, closed at once.
    pub closing: usize,
    /// Keep-alive connections idle longer than this are closed.
    pub idle_timeout: Duration,
    /// Time to send one whole response (one deadline per response, not per write).
    pub write_timeout: Duration,
    /// How long a request waits for the dispatcher before 503.
    pub dispatcher_timeout: Duration,
    /// Plan requests waiting for a change at once. Waiting requests hold no worker (one
    /// thread holds their connections), so this is a memory bound, not a thread bound.
    pub max_long_polls: usize,
    /// Longest plan wait an executor may ask for.
    pub max_wait: Duration,
    /// Time for ages on the status page and in `/metrics`.
    pub clock: Arc<dyn Clock>,
    /// How long reads share one view of the dispatcher's (`view_cache.rs`); zero: each read
    /// asks for its own.
    pub view_max_age: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            bind: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            workers: 64,
            queue: 1024,
            request_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(3),
            // A quarter of the workers: one address, however hostile, leaves most of them.
            per_address: 16,
            per_address_waiting: 256,
            closing: 4096,
            idle_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            dispatcher_timeout: Duration::from_secs(5),
            max_long_polls: 10_000,
            max_wait: api::MAX_PLAN_WAIT,
            clock: crate::clock::system(),
            // Far below what a person or a scraper tells apart, far above the time between
            // two executor reports on a large cluster.
            view_max_age: Duration::from_millis(100),
        }
    }
}

/// The running server; dropping it stops it (open connections are cut, waits end).
pub struct RestHandle {
    stop: Option<Sender<()>>,
    server: Option<http::Server>,
    addr: SocketAddr,
}

impl RestHandle {
    /// The address actually bound (the port is the ephemeral one when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for RestHandle {
    fn drop(&mut self) {
        // First end the long polls (their select sees the channel close), then the server.
        self.stop.take();
        self.server.take();
    }
}

/// Starts the server on `<listen>:<port>` with the default options, the open-file limit
/// raised first and the bounds on held connections sized from it.
pub fn start(config: RestConfig, listen: IpAddr) -> Result<RestHandle, String> {
    let files = match fdlimit::raise() {
        Ok((before, after)) => {
            if after != before {
                info!("open-file limit raised from {before} to {after}");
            }
            after
        }
        Err(e) => {
            warn!("{e}; the REST server's bounds assume 1024 open files");
            1024
        }
    };
    let options = fdlimit::size(
        ServerOptions {
            bind: listen,
            ..ServerOptions::default()
        },
        files,
    );
    info!(
        "REST server: up to {} waiting plan requests for {files} open files",
        options.max_long_polls
    );
    start_with(config, options)
}

pub fn start_with(mut config: RestConfig, options: ServerOptions) -> Result<RestHandle, String> {
    let listener = TcpListener::bind((options.bind, config.port)).map_err(|e| {
        format!(
            "cannot listen on {}:{} (-rest.listen, -rest.port): {e}",
            options.bind, config.port
        )
    })?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("cannot read the REST server's address: {e}"))?;
    let stats = Arc::new(HttpStats::default());
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let secrets_gate = match config.secrets.take() {
        Some(updates) => Some(
            gate::start(updates)
                .map_err(|e| format!("cannot start the REST secrets thread: {e}"))?,
        ),
        None => None,
    };
    let tls = config.tls.clone();
    // Plain HTTP is refused first: a secret sent in clear is not even checked.
    let gate: Option<Arc<http::Gate>> = match (&tls, secrets_gate) {
        (None, secrets) => secrets,
        (Some(_), secrets) => Some(Arc::new(move |req: &Request| {
            plain::refusal(req).or_else(|| secrets.as_ref().and_then(|check| check(req)))
        })),
    };
    let router = Arc::new(Router {
        binary: config.executor_binary.clone(),
        config,
        options: options.clone(),
        stats: stats.clone(),
        waits: Waits::start(stop_rx.clone(), options.dispatcher_timeout)
            .map_err(|e| format!("cannot start the REST waiter thread: {e}"))?,
        state_json: state::StateCache::default(),
        views: view_cache::ViewCache::start(options.view_max_age)
            .map_err(|e| format!("cannot start the REST view sweeper thread: {e}"))?,
        stop: stop_rx,
    });
    let limits = http::Limits {
        workers: options.workers,
        queue: options.queue,
        request_timeout: options.request_timeout,
        first_byte_timeout: options.first_byte_timeout,
        per_address: options.per_address,
        per_address_waiting: options.per_address_waiting,
        closing: options.closing,
        idle_timeout: options.idle_timeout,
        write_timeout: options.write_timeout,
    };
    let handler: Arc<http::Handler> = Arc::new(move |req: &Request| router.handle(req));
    let server = http::Server::start_gated(listener, limits, stats, handler, gate, tls)
        .map_err(|e| format!("cannot start the REST server threads: {e}"))?;
    info!("REST server listening on {addr}");
    Ok(RestHandle {
        stop: Some(stop_tx),
        server: Some(server),
        addr,
    })
}

/// `1.2.3` -> 10203 (the earlier framework's `versionint`).
pub fn version_int(v: &str) -> u64 {
    v.split('.')
        .take(3)
        .map(|p| {
            p.chars()
                .take_while(char::is_ascii_digit)
                .collect::<String>()
                .parse::<u64>()
                .unwrap_or(0)
        })
        .fold(0, |acc, p| acc * 100 + p)
}

const GET_HEAD: &[&str] = &["GET", "HEAD"];

type Route = fn(&Router, &Request) -> Response;

struct Router {
    config: RestConfig,
    options: ServerOptions,
    binary: Arc<ExecutorBinary>,
    stats: Arc<HttpStats>,
    waits: Arc<Waits>,
    state_json: state::StateCache,
    views: Arc<view_cache::ViewCache>,
    /// Closed when the server stops: ends long waits at once.
    stop: Receiver<()>,
}

fn not_found(path: &str) -> Response {
    Response::error(
        404,
        "not found",
        &format!(
            "no such path: {}",
            path.chars().take(200).collect::<String>()
        ),
    )
}

fn method_not_allowed(method: &str, allowed: &[&str]) -> Response {
    Response::error(
        405,
        "method not allowed",
        &format!(
            "{} is not allowed here; use {}",
            method.chars().take(20).collect::<String>(),
            allowed.join(" or ")
        ),
    )
    .with_header("Allow", allowed.join(", "))
}

fn unauthorized(detail: &str) -> Response {
    Response::error(401, "unauthorized", detail)
        .with_header("WWW-Authenticate", "Bearer realm=\"storage-scheduler\"")
}

fn json_value(status: u16, v: serde_json::Value) -> Response {
    Response::json(status, v.to_string().into_bytes())
}

/// Why a wait for the dispatcher ended without an answer.
enum Wait {
    Gone,
    Stopping,
    TimedOut(Duration),
}

impl Wait {
    fn describe(&self) -> (&'static str, String) {
        match self {
            Wait::Gone => (
                "scheduler stopping",
                "the dispatcher ended before answering".into(),
            ),
            Wait::Stopping => ("server stopping", "the REST server is shutting down".into()),
            Wait::TimedOut(t) => (
                "scheduler busy",
                format!("the dispatcher did not answer within {} s", t.as_secs_f64()),
            ),
        }
    }

    fn response(self) -> Response {
        let (error, detail) = self.describe();
        let resp = Response::error(503, error, &detail);
        match self {
            Wait::TimedOut(_) => resp.with_header("Retry-After", "1"),
            _ => resp,
        }
    }
}

impl Router {
    fn handle(&self, req: &Request) -> Response {
        if let Some(rest) = req.path.strip_prefix(api::PREFIX) {
            return self.executor_route(req, rest);
        }
        if let Some(resp) = self.operator_route(req) {
            return resp;
        }
        if let Some(host) = req.path.strip_prefix("/api/nodes/") {
            if !GET_HEAD.contains(&req.method.as_str()) {
                return method_not_allowed(&req.method, GET_HEAD);
            }
            return match self.view() {
                Ok(v) => compress(req, state::node(&v, host)),
                Err(r) => r,
            };
        }
        let (allowed, route): (&[&str], Route) = match req.path.as_str() {
            "/" | "/ui" | "/ui/" => (GET_HEAD, Router::page),
            "/version" => (GET_HEAD, Router::version),
            "/health" => (GET_HEAD, Router::health),
            "/metrics" => (GET_HEAD, Router::metrics),
            "/api/state" => (GET_HEAD, Router::state),
            "/api/health" => (GET_HEAD, Router::storage_health),
            "/api/plan" => (GET_HEAD, Router::plan),
            "/api/events" => (GET_HEAD, Router::events),
            p if p.strip_prefix('/') == Some(env::EXECUTOR_BINARY) => {
                (GET_HEAD, Router::executor_binary)
            }
            p if p
                .strip_prefix('/')
                .and_then(|p| p.strip_prefix(env::EXECUTOR_BINARY))
                == Some(".gz") =>
            {
                (GET_HEAD, Router::executor_gzipped)
            }
            other => return not_found(other),
        };
        if !allowed.contains(&req.method.as_str()) {
            return method_not_allowed(&req.method, allowed);
        }
        compress(req, route(self, req))
    }

    /// Waits for a reply from the dispatcher, or the server's stop.
    fn wait<T>(&self, rx: &Receiver<T>, timeout: Duration) -> Result<T, Wait> {
        select! {
            recv(rx) -> r => r.map_err(|_| Wait::Gone),
            recv(self.stop) -> _ => Err(Wait::Stopping),
            default(timeout) => Err(Wait::TimedOut(timeout)),
        }
    }

    fn view(&self) -> Result<Arc<View>, Response> {
        self.try_view().map_err(Wait::response)
    }

    /// A view at most `view_max_age` old (`view_cache.rs`), else the dispatcher's.
    fn try_view(&self) -> Result<Arc<View>, Wait> {
        self.views.get(|| {
            let (tx, rx) = crossbeam_channel::bounded(1);
            self.config
                .inputs
                .send(Input::View(tx))
                .map_err(|_| Wait::Gone)?;
            let view = self.wait(&rx, self.options.dispatcher_timeout)?;
            // Before it is kept for the other reads, which meanwhile are served the last
            // view: so this read alone waits for `/api/state`'s encoding.
            if !self.options.view_max_age.is_zero() {
                self.state_json.prepare(&view);
            }
            Ok(view)
        })
    }

    fn page(&self, req: &Request) -> Response {
        let partial = req.query_param("partial").ok().flatten().is_some();
        let query = match page::PageQuery::parse(|n| req.query_param(n)) {
            Ok(q) => q,
            Err(e) => return Response::error(400, "bad query parameter", &e),
        };
        let (status, html) = match self.try_view() {
            Ok(v) => (
                200,
                page::render(
                    &v,
                    &query,
                    self.options.clock.now_ms(),
                    self.config.state_warning.as_deref(),
                    partial,
                ),
            ),
            Err(w) => {
                let (error, detail) = w.describe();
                (503, page::render_unavailable(error, &detail, partial))
            }
        };
        Response::new(status, "text/html; charset=utf-8", Body::Owned(html.into_bytes()))
            .with_header("Cache-Control", "no-store")
            .with_header("X-Content-Type-Options", "nosniff")
            .with_header(
                "Content-Security-Policy",
                "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src data:",
            )
    }

    fn version(&self, _req: &Request) -> Response {
        let v = env!("CARGO_PKG_VERSION");
        json_value(
            200,
            // The earlier framework's two fields, plus the release this binary is.
            serde_json::json!({
                "versionint": version_int(v),
                "versionstr": v,
                "release": crate::version::TAG,
                "commit": crate::version::COMMIT,
            }),
        )
    }

    fn health(&self, _req: &Request) -> Response {
        match self.view() {
            Ok(v) if v.subscribed => json_value(
                200,
                serde_json::json!({
                    "status": "subscribed",
                    "master": v.master,
                    "framework_id": v.model.framework_id,
                    // Null when the state survives a relaunch.
                    "state_warning": self.config.state_warning,
                }),
            ),
            Ok(v) => Response::error(
                503,
                "not subscribed",
                v.disconnected_reason
                    .as_deref()
                    .unwrap_or("connecting to the master"),
            ),
            Err(r) => r,
        }
    }

    fn storage_health(&self, _req: &Request) -> Response {
        match self.view() {
            Ok(v) => json_value(200, health::render(&v)),
            Err(r) => r,
        }
    }

    fn plan(&self, _req: &Request) -> Response {
        let v = match self.view() {
            Ok(v) => v,
            Err(r) => return r,
        };
        match serde_json::to_vec(&crate::scheduler::rollout::view::plan_view(&v.model)) {
            Ok(body) => Response::json(200, body),
            Err(e) => Response::error(500, "cannot encode the plan", &e.to_string()),
        }
    }

    fn metrics(&self, _req: &Request) -> Response {
        let view = self.view().ok();
        let text = prom::render(&prom::Sources {
            metrics: &self.config.metrics,
            view: view.as_deref(),
            http: &self.stats,
            long_polls: self.waits.count.load(Ordering::Relaxed),
            now_ms: self.options.clock.now_ms(),
        });
        Response::new(
            200,
            "text/plain; version=0.0.4; charset=utf-8",
            Body::Owned(text.into_bytes()),
        )
    }

    fn state(&self, req: &Request) -> Response {
        let view = match self.view() {
            Ok(v) => v,
            Err(r) => return r,
        };
        state::respond(&view, req, &self.state_json)
    }

    fn executor_binary(&self, req: &Request) -> Response {
        match self.binary.get() {
            Ok(b) => serve_file(req, "application/octet-stream", b.plain),
            Err(detail) => Response::error(404, "executor binary not found", &detail),
        }
    }

    /// What launches fetch (`executor_binary.rs`): the same file gzipped.
    fn executor_gzipped(&self, req: &Request) -> Response {
        match self.binary.get() {
            Ok(b) => match b.gzipped() {
                Some(gz) => serve_file(req, "application/gzip", gz.clone()),
                None => Response::error(
                    404,
                    "executor binary not found gzipped",
                    "the scheduler could not make its gzip copy (its log says why); launches \
                     fetch /storage-executor",
                ),
            },
            Err(detail) => Response::error(404, "executor binary not found", &detail),
        }
    }
}

/// A file as it is, or 304 when the client holds it (`If-None-Match`).
fn serve_file(req: &Request, kind: &'static str, served: Served) -> Response {
    let Served { file, len, etag } = served;
    let fresh = req
        .header("if-none-match")
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let resp = if fresh {
        Response::new(304, kind, Body::Empty)
    } else {
        Response::new(200, kind, Body::File { file, len })
    };
    resp.with_header("ETag", etag)
}

#[cfg(test)]
mod tests {
    use super::executor_api::bearer;
    use super::*;

    #[test]
    fn version_int_matches_the_earlier_framework() {
        assert_eq!(version_int("1.2.3"), 10203);
        assert_eq!(version_int("0.1.0"), 100);
        assert_eq!(version_int("2.0.1-rc1"), 20001);
    }

    #[test]
    fn bearer_parsing() {
        let with =
            |v: &str| Request::new("GET", "/", vec![("authorization".into(), v.into())], vec![]);
        assert_eq!(bearer(&with("Bearer abc")).ok().unwrap().expose(), "abc");
        assert_eq!(bearer(&with("bearer  abc ")).ok().unwrap().expose(), "abc");
        assert_eq!(bearer(&with("Basic abc")).err().unwrap().status, 401);
        assert_eq!(bearer(&with("Bearer")).err().unwrap().status, 401);
        assert_eq!(
            bearer(&Request::new("GET", "/", vec![], vec![]))
                .err()
                .unwrap()
                .status,
            401
        );
    }

    #[test]
    fn json_cache_encodes_once() {
        let c = JsonCache::default();
        let a = c.get_or_encode(&vec![1, 2]).unwrap();
        let b = c.get_or_encode(&vec![3]).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&**a, b"[1,2]");
        assert_eq!(format!("{c:?}"), "JsonCache(5 bytes)");
        let z = c.get_or_encode_gzip(&vec![9]).unwrap();
        let mut plain = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&z[..]), &mut plain)
            .unwrap();
        assert_eq!(plain, "[1,2]");
    }
}
