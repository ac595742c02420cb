//! A Marathon-compatible launcher: the `/v2/apps` subset the framework's deployment uses, run
//! against local processes instead of a Mesos cluster.
//!
//! The behaviour follows Marathon 1.7 (1.6 and 1.7 are the releases with both the `IS`
//! constraint operator and the 1-hour default `maxLaunchDelaySeconds`):
//!
//! * `POST /v2/apps` reads the definition in two stages, as Marathon does. Shape errors (wrong
//!   JSON types, missing `id`, bounds declared in the API's type definitions) answer `422` with
//!   `{"message":"Invalid JSON","details":[{"path":"/cpus","errors":["error.expected.jsnumber"]}]}`
//!   (Play JSON error keys, paths like `/constraints(0)(1)`); rule violations (constraint
//!   operators, `cmd`/`args`, unique ports...) answer `422` with `"message":"Object is not
//!   valid"`. Unparseable bodies answer `400` `{"message":"Invalid JSON","details":"<parser
//!   text>"}`, a duplicate id `409` `{"message":"An app with id [/x] already exists."}`, a
//!   Content-Type other than `application/json` `415`. Unknown top-level fields are ignored,
//!   as Marathon's readers ignore them (the JSON schema's `additionalProperties: false` is not
//!   enforced by the server); they are logged.
//! * `201 Created` carries the stored app with zero counts, `tasks: []` and
//!   `deployments: [{"id": ...}]`, a `Marathon-Deployment-Id` header and
//!   `Location: http://<host>/<app-id>` (Marathon resolves its relative URI `/<app-id>` against
//!   the server root, not against `/v2/apps`).
//! * Each instance gets a supervisor thread: sandbox directory, fetch of every URI, then `cmd`
//!   under `/bin/sh -c` (or `args` executed directly) in its own process group, with the
//!   environment Marathon and Mesos give tasks. A task that ends or fails to fetch is relaunched
//!   after Marathon's launch delay (`backoffSeconds`, times `backoffFactor` per failure, capped
//!   at `maxLaunchDelaySeconds`, forgotten once a task outlives the cap).
//!
//! * `mem` and `cpus` are enforced as Mesos' cgroup isolators would (`isolation.rs`: RSS
//!   over `mem` kills the task, reported as the memory isolator words it, and the launch
//!   delay applies; CPU over `cpus` is throttled CFS-style); `GET /monitor/statistics` shows
//!   each running task's usage and limits, with the Mesos agent endpoint's field names.
//!
//! * `PUT /v2/apps/<id>` replaces the definition and restarts the app with it. As Marathon's
//!   default `partialUpdate=true`, the body's fields go over the app's current ones (a field
//!   left out keeps its value; `uris` replaces `fetch`, `cmd` replaces `args` and the reverse);
//!   `?partialUpdate=false` takes the body alone. The result is read as `POST` reads a
//!   definition; the path names the app, an `id` in the body is overridden by it. `200`
//!   `{"version": ..., "deploymentId": ...}` with a `Marathon-Deployment-Id` header. While a
//!   deployment of the app is in progress it answers `409` `{"message":"App is locked by one or
//!   more deployments. Override with the option '?force=true'. ...","deployments":[...]}`
//!   unless `?force=true`. An unknown id is created, as Marathon's PUT documents ("If no
//!   application with the given id exists, it will be created"), answered `201`. The restart
//!   follows `upgradeStrategy` as Marathon does for an app without health checks: when
//!   `maximumOverCapacity` leaves room above `instances` and `minimumHealthCapacity` keeps
//!   some running (the defaults 1 and 1), the new instances start first and the old ones are
//!   killed once every new one runs; otherwise the old ones are killed first and the new ones
//!   start once they are gone.
//!
//! Not emulated: health and readiness checks (stored, never run), containers (stored; the
//! command runs on the host), `user` (tasks run as the launcher's user), constraints (checked,
//! trivially satisfied by a single host), `PATCH`, groups, `/v2/tasks`, events.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::isolation::{self, Action, Isolator};
use crossbeam_channel::{bounded, select, unbounded, Receiver, RecvTimeoutError, Sender};
use serde_json::{json, Map, Value};

/// Settings of one launcher.
#[derive(Debug, Clone)]
pub struct LauncherConfig {
    /// Port on 127.0.0.1; 0 picks an ephemeral one.
    pub port: u16,
    /// Task sandboxes are created beneath this directory, one per task.
    pub work_dir: PathBuf,
    /// What tasks see as `HOST` and what the API reports as their `host`.
    pub host: String,
    /// SIGTERM-to-SIGKILL escalation when the app sets no `taskKillGracePeriodSeconds`
    /// (the Mesos command executor's default is 3 seconds).
    pub kill_grace_period: Duration,
    /// Upper bound for fetching one URI.
    pub fetch_timeout: Duration,
}

impl Default for LauncherConfig {
    fn default() -> Self {
        LauncherConfig {
            port: 0,
            work_dir: std::env::temp_dir().join("storage-devcluster-launcher"),
            host: "127.0.0.1".to_string(),
            kill_grace_period: Duration::from_secs(3),
            fetch_timeout: Duration::from_secs(60),
        }
    }
}

/// A running launcher. Dropping it shuts it down as [`LauncherHandle::shutdown`] does.
pub struct LauncherHandle {
    addr: SocketAddr,
    server: Arc<tiny_http::Server>,
    stopping: Arc<AtomicBool>,
    manager: Sender<Msg>,
    http_thread: Option<JoinHandle<()>>,
    manager_thread: Option<JoinHandle<()>>,
}

impl LauncherHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL, e.g. `http://127.0.0.1:41234`; the API lives under `/v2`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving and kills every task (SIGTERM, SIGKILL after the grace period).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        let Some(manager_thread) = self.manager_thread.take() else {
            return;
        };
        self.stopping.store(true, Ordering::SeqCst);
        self.server.unblock();
        if let Some(http) = self.http_thread.take() {
            let _ = http.join();
        }
        let (done_tx, done_rx) = bounded(1);
        if self.manager.send(Msg::Shutdown { done: done_tx }).is_ok() {
            let _ = done_rx.recv();
        }
        let _ = manager_thread.join();
    }
}

impl Drop for LauncherHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts the launcher's HTTP server and its app manager.
pub fn start(config: LauncherConfig) -> Result<LauncherHandle, String> {
    fs::create_dir_all(&config.work_dir).map_err(|e| {
        format!(
            "launcher: cannot create work dir {}: {e}",
            config.work_dir.display()
        )
    })?;
    let server = tiny_http::Server::http(("127.0.0.1", config.port))
        .map_err(|e| format!("launcher: cannot listen on 127.0.0.1:{}: {e}", config.port))?;
    let addr = server
        .server_addr()
        .to_ip()
        .ok_or_else(|| "launcher: server has no IP address".to_string())?;
    let server = Arc::new(server);
    let stopping = Arc::new(AtomicBool::new(false));

    let settings = Arc::new(Settings {
        work_dir: config.work_dir.clone(),
        host: config.host.clone(),
        agent_id: format!("{}-S0", uuid()),
        kill_grace_period: config.kill_grace_period,
        fetch_timeout: config.fetch_timeout,
    });
    let (manager_tx, manager_rx) = unbounded();
    let manager = Manager {
        settings,
        events: manager_tx.clone(),
        apps: BTreeMap::new(),
        retired: Vec::new(),
        next_generation: 0,
        next_service_port: FIRST_SERVICE_PORT,
    };
    let manager_thread = thread::Builder::new()
        .name("launcher-manager".into())
        .spawn(move || manager.run(manager_rx))
        .map_err(|e| format!("launcher: cannot start manager thread: {e}"))?;

    let http_server = Arc::clone(&server);
    let http_stopping = Arc::clone(&stopping);
    let http_manager = manager_tx.clone();
    let http_thread = thread::Builder::new()
        .name("launcher-http".into())
        .spawn(move || serve(&http_server, &http_stopping, &http_manager, addr));
    let http_thread = match http_thread {
        Ok(t) => t,
        Err(e) => {
            let (done_tx, done_rx) = bounded(1);
            if manager_tx.send(Msg::Shutdown { done: done_tx }).is_ok() {
                let _ = done_rx.recv();
            }
            return Err(format!("launcher: cannot start HTTP thread: {e}"));
        }
    };
    log::info!("launcher: listening on http://{addr}");
    Ok(LauncherHandle {
        addr,
        server,
        stopping,
        manager: manager_tx,
        http_thread: Some(http_thread),
        manager_thread: Some(manager_thread),
    })
}

// ---------------------------------------------------------------------------------------------
// HTTP layer
// ---------------------------------------------------------------------------------------------

const MAX_BODY: u64 = 4 * 1024 * 1024;

struct Reply {
    status: u16,
    body: Vec<u8>,
    content_type: &'static str,
    headers: Vec<(String, String)>,
}

impl Reply {
    fn json(status: u16, body: &Value) -> Reply {
        Reply {
            status,
            body: body.to_string().into_bytes(),
            content_type: "application/json",
            headers: Vec::new(),
        }
    }

    fn message(status: u16, message: &str) -> Reply {
        Reply::json(status, &json!({ "message": message }))
    }

    fn header(mut self, name: &str, value: String) -> Reply {
        self.headers.push((name.to_string(), value));
        self
    }
}

fn serve(
    server: &tiny_http::Server,
    stopping: &AtomicBool,
    manager: &Sender<Msg>,
    addr: SocketAddr,
) {
    loop {
        match server.recv() {
            Ok(mut request) => {
                // A thread per request: a client that stalls mid-body holds only its own.
                let manager = manager.clone();
                let spawned = thread::Builder::new()
                    .name("launcher-request".into())
                    .spawn(move || {
                        let reply = route(&mut request, &manager, addr);
                        respond(request, reply);
                    });
                if let Err(e) = spawned {
                    log::error!("launcher: cannot start a request thread: {e}");
                }
            }
            Err(e) => {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                log::warn!("launcher: accepting a request failed: {e}");
            }
        }
    }
}

fn respond(request: tiny_http::Request, reply: Reply) {
    let mut response = tiny_http::Response::from_data(reply.body).with_status_code(reply.status);
    let mut headers = vec![("Content-Type".to_string(), reply.content_type.to_string())];
    headers.extend(reply.headers);
    for (name, value) in headers {
        match tiny_http::Header::from_bytes(name.as_bytes(), value.as_bytes()) {
            Ok(h) => response.add_header(h),
            Err(()) => log::warn!("launcher: dropping unencodable header {name}"),
        }
    }
    if let Err(e) = request.respond(response) {
        log::debug!("launcher: client went away before the response: {e}");
    }
}

fn header_value(request: &tiny_http::Request, name: &str) -> Option<String> {
    request
        .headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str().to_string())
}

fn route(request: &mut tiny_http::Request, manager: &Sender<Msg>, addr: SocketAddr) -> Reply {
    let url = request.url().to_string();
    let path = url.split(['?', '#']).next().unwrap_or("").to_string();
    let method = request.method().as_str().to_ascii_uppercase();
    if path == "/ping" && method == "GET" {
        return Reply {
            status: 200,
            body: b"pong".to_vec(),
            content_type: "text/plain",
            headers: Vec::new(),
        };
    }
    if path == "/monitor/statistics" && method == "GET" {
        return ask(manager, |reply| Msg::Statistics { reply })
            .map(|stats| Reply::json(200, &stats))
            .unwrap_or_else(|r| r);
    }
    let app_path = if path == "/v2/apps" || path == "/v2/apps/" {
        None
    } else if let Some(rest) = path.strip_prefix("/v2/apps/") {
        Some(rest.to_string())
    } else {
        return Reply::message(404, "URI not found");
    };
    match (method.as_str(), app_path) {
        ("POST", None) => create(request, manager, addr),
        ("PUT", Some(raw)) => {
            let query = |kv: &str| {
                url.split_once('?')
                    .is_some_and(|(_, q)| q.split('&').any(|p| p == kv))
            };
            let (force, partial) = (query("force=true"), !query("partialUpdate=false"));
            update(
                request,
                manager,
                addr,
                &canonical_id(&raw),
                (force, partial),
            )
        }
        ("GET", None) => ask(manager, |reply| Msg::List { reply })
            .map(|apps| Reply::json(200, &apps))
            .unwrap_or_else(|r| r),
        ("GET", Some(raw)) => {
            let id = canonical_id(&raw);
            match ask(manager, |reply| Msg::Get {
                id: id.clone(),
                reply,
            }) {
                Ok(Some(app)) => Reply::json(200, &json!({ "app": app })),
                Ok(None) => unknown_app(&id),
                Err(r) => r,
            }
        }
        ("DELETE", Some(raw)) => {
            let id = canonical_id(&raw);
            match ask(manager, |reply| Msg::Delete {
                id: id.clone(),
                reply,
            }) {
                Ok(Some((version, deployment))) => Reply::json(
                    200,
                    &json!({ "version": version, "deploymentId": deployment }),
                )
                .header("Marathon-Deployment-Id", deployment),
                Ok(None) => unknown_app(&id),
                Err(r) => r,
            }
        }
        _ => Reply::message(405, "Method Not Allowed"),
    }
}

fn unknown_app(id: &str) -> Reply {
    Reply::message(404, &format!("App '{id}' does not exist"))
}

/// Sends a request to the manager and waits for its answer.
fn ask<T>(manager: &Sender<Msg>, make: impl FnOnce(Sender<T>) -> Msg) -> Result<T, Reply> {
    let (tx, rx) = bounded(1);
    let unavailable = || Reply::message(503, "launcher is shutting down");
    manager.send(make(tx)).map_err(|_| unavailable())?;
    rx.recv().map_err(|_| unavailable())
}

/// The request's JSON body, refused as Marathon refuses what is not one.
fn read_body(request: &mut tiny_http::Request) -> Result<Value, Reply> {
    // Jersey treats a request without Content-Type as matching any @Consumes type.
    if let Some(content_type) = header_value(request, "Content-Type") {
        let media = content_type.split(';').next().unwrap_or("").trim();
        if !media.eq_ignore_ascii_case("application/json") && media != "*/*" {
            return Err(Reply::message(415, "Unsupported Media Type"));
        }
    }
    let mut body = Vec::new();
    if let Err(e) = request
        .as_reader()
        .take(MAX_BODY + 1)
        .read_to_end(&mut body)
    {
        return Err(Reply::json(
            400,
            &json!({ "message": "Invalid JSON", "details": format!("cannot read request body: {e}") }),
        ));
    }
    if body.len() as u64 > MAX_BODY {
        return Err(Reply::message(413, "Request Entity Too Large"));
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Reply::json(
            400,
            &json!({
                "message": "Please specify data in JSON format",
                "details": "No content to map due to end-of-input",
            }),
        ));
    }
    serde_json::from_slice(&body).map_err(|e| {
        Reply::json(
            400,
            &json!({ "message": "Invalid JSON", "details": e.to_string() }),
        )
    })
}

/// An app definition read and validated as Marathon does.
fn definition(doc: &Value) -> Result<AppDef, Reply> {
    let raw =
        read_app(doc).map_err(|errors| Reply::json(422, &error_body("Invalid JSON", &errors)))?;
    validate_app(raw, &iso_timestamp(SystemTime::now()))
        .map_err(|errors| Reply::json(422, &error_body("Object is not valid", &errors)))
}

fn create(request: &mut tiny_http::Request, manager: &Sender<Msg>, addr: SocketAddr) -> Reply {
    let def = match read_body(request).and_then(|doc| definition(&doc)) {
        Ok(def) => def,
        Err(reply) => return reply,
    };
    let id = def.id.clone();
    match ask(manager, |reply| Msg::Create {
        def: Box::new(def),
        reply,
    }) {
        Ok(Ok(created)) => {
            let host = header_value(request, "Host").unwrap_or_else(|| addr.to_string());
            Reply::json(201, &created.body)
                .header("Location", format!("http://{host}{id}"))
                .header("Marathon-Deployment-Id", created.deployment)
        }
        Ok(Err(message)) => Reply::message(409, &message),
        Err(r) => r,
    }
}

/// `PUT /v2/apps/<id>`: the app restarted with the new definition (see the module's comment).
fn update(
    request: &mut tiny_http::Request,
    manager: &Sender<Msg>,
    addr: SocketAddr,
    id: &str,
    (force, partial): (bool, bool),
) -> Reply {
    let mut doc = match read_body(request) {
        Ok(doc) => doc,
        Err(reply) => return reply,
    };
    if partial {
        match ask(manager, |reply| Msg::Definition {
            id: id.to_string(),
            reply,
        }) {
            Ok(Some(current)) => doc = merged(current, doc),
            Ok(None) => {}
            Err(r) => return r,
        }
    }
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("id".into(), json!(id));
    }
    let def = match definition(&doc) {
        Ok(def) => def,
        Err(reply) => return reply,
    };
    match ask(manager, |reply| Msg::Update {
        def: Box::new(def),
        force,
        reply,
    }) {
        Ok(Updated::Changed {
            version,
            deployment,
        }) => Reply::json(
            200,
            &json!({ "version": version, "deploymentId": deployment }),
        )
        .header("Marathon-Deployment-Id", deployment),
        Ok(Updated::Created(created)) => {
            let host = header_value(request, "Host").unwrap_or_else(|| addr.to_string());
            let version = created.body["version"].clone();
            Reply::json(
                201,
                &json!({ "version": version, "deploymentId": created.deployment }),
            )
            .header("Location", format!("http://{host}{id}"))
            .header("Marathon-Deployment-Id", created.deployment)
        }
        Ok(Updated::Locked(deployments)) => {
            let first = deployments.first().cloned().unwrap_or_default();
            let ids: Vec<Value> = deployments.iter().map(|d| json!({ "id": d })).collect();
            Reply::json(
                409,
                &json!({
                    "message": format!("App is locked by one or more deployments. Override with the option '?force=true'. View details at '/v2/deployments/{first}'."),
                    "deployments": ids,
                }),
            )
        }
        Err(r) => r,
    }
}

/// A partial update: `update`'s fields over the app's `current` ones. A field the update
/// gives replaces those it supersedes (its deprecated or exclusive counterpart).
fn merged(mut current: Map<String, Value>, update: Value) -> Value {
    let Value::Object(update) = update else {
        return update;
    };
    current.remove("version");
    for key in update.keys() {
        let superseded: &[&str] = match key.as_str() {
            "uris" => &["fetch"],
            "fetch" => &["uris"],
            "cmd" => &["args"],
            "args" => &["cmd"],
            "ports" => &["portDefinitions"],
            "portDefinitions" => &["ports"],
            _ => &[],
        };
        for s in superseded {
            current.remove(*s);
        }
    }
    current.extend(update);
    Value::Object(current)
}

/// Marathon's error document: one entry per path, in the order the paths were first seen.
fn error_body(message: &str, errors: &[(String, String)]) -> Value {
    let mut grouped: Vec<(String, Vec<String>)> = Vec::new();
    for (path, error) in errors {
        match grouped.iter_mut().find(|(p, _)| p == path) {
            Some((_, list)) => {
                if !list.contains(error) {
                    list.push(error.clone());
                }
            }
            None => grouped.push((path.clone(), vec![error.clone()])),
        }
    }
    let details: Vec<Value> = grouped
        .into_iter()
        .map(|(path, errors)| json!({ "path": path, "errors": errors }))
        .collect();
    json!({ "message": message, "details": details })
}

// ---------------------------------------------------------------------------------------------
// Stage 1: shape of the definition (Marathon's generated JSON readers, Play JSON error keys)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Artifact {
    uri: String,
    extract: bool,
    executable: bool,
    cache: bool,
    dest_path: Option<String>,
}

#[derive(Debug, Clone)]
struct RawPortDef {
    port: u16,
    name: Option<String>,
    protocol: String,
    labels: BTreeMap<String, String>,
}

/// The definition after the shape check, before rule validation and defaults.
#[derive(Debug, Default)]
struct RawApp {
    id: String,
    cmd: Option<String>,
    args: Option<Vec<String>>,
    user: Option<String>,
    env: BTreeMap<String, String>,
    instances: Option<u32>,
    cpus: Option<f64>,
    mem: Option<f64>,
    disk: Option<f64>,
    gpus: Option<u32>,
    executor: Option<String>,
    constraints: Vec<Vec<String>>,
    uris: Option<Vec<String>>,
    fetch: Option<Vec<Artifact>>,
    ports: Option<Vec<u16>>,
    port_definitions: Option<Vec<RawPortDef>>,
    require_ports: bool,
    backoff_seconds: Option<u64>,
    backoff_factor: Option<f64>,
    max_launch_delay_seconds: Option<u64>,
    labels: BTreeMap<String, String>,
    health_checks: Vec<Value>,
    dependencies: Vec<String>,
    accepted_resource_roles: Option<Vec<String>>,
    upgrade_strategy: Option<(Option<f64>, Option<f64>)>,
    task_kill_grace_period_seconds: Option<u64>,
    /// Accepted fields the simulator stores and echoes but does not act on.
    passthrough: Map<String, Value>,
}

const INT32_MAX: i64 = i32::MAX as i64;

/// Collects shape errors as (path, Play JSON error key).
#[derive(Default)]
struct Shape {
    errors: Vec<(String, String)>,
}

fn child_path(path: &str, key: &str) -> String {
    format!("{path}/{key}")
}

fn index_path(path: &str, i: usize) -> String {
    format!("{path}({i})")
}

/// A present, non-null field (Play's optional readers treat `null` as absent).
fn field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).filter(|v| !v.is_null())
}

impl Shape {
    fn fail(&mut self, path: &str, error: &str) {
        self.errors.push((path.to_string(), error.to_string()));
    }

    fn string(&mut self, v: &Value, path: &str) -> Option<String> {
        match v.as_str() {
            Some(s) => Some(s.to_string()),
            None => {
                self.fail(path, "error.expected.jsstring");
                None
            }
        }
    }

    fn string_with(
        &mut self,
        v: &Value,
        path: &str,
        min_len: usize,
        max_len: Option<usize>,
        pattern: Option<fn(&str) -> bool>,
    ) -> Option<String> {
        let s = self.string(v, path)?;
        let len = s.chars().count();
        let mut ok = true;
        if len < min_len {
            self.fail(path, "error.minLength");
            ok = false;
        }
        if max_len.is_some_and(|max| len > max) {
            self.fail(path, "error.maxLength");
            ok = false;
        }
        if pattern.is_some_and(|matches| !matches(&s)) {
            self.fail(path, "error.pattern");
            ok = false;
        }
        ok.then_some(s)
    }

    fn one_of(&mut self, v: &Value, path: &str, allowed: &[&str]) -> Option<String> {
        let s = self.string(v, path)?;
        if allowed.contains(&s.as_str()) {
            Some(s)
        } else {
            self.fail(path, "error.unknown.enum.literal");
            None
        }
    }

    fn number(&mut self, v: &Value, path: &str, min: Option<f64>, max: Option<f64>) -> Option<f64> {
        let Some(n) = v.as_f64() else {
            self.fail(path, "error.expected.jsnumber");
            return None;
        };
        let mut ok = true;
        if min.is_some_and(|m| n < m) {
            self.fail(path, "error.min");
            ok = false;
        }
        if max.is_some_and(|m| n > m) {
            self.fail(path, "error.max");
            ok = false;
        }
        ok.then_some(n)
    }

    /// A 32-bit integer, as Marathon's `format: int32` fields are read.
    fn int(&mut self, v: &Value, path: &str, min: i64, max: i64) -> Option<i64> {
        let Some(f) = v.as_f64() else {
            self.fail(path, "error.expected.jsnumber");
            return None;
        };
        let n = match v.as_i64() {
            Some(n) if (-INT32_MAX - 1..=INT32_MAX).contains(&n) => n,
            None if f.fract() == 0.0 && f.abs() <= INT32_MAX as f64 => f as i64,
            _ => {
                self.fail(path, "error.expected.int");
                return None;
            }
        };
        if n < min {
            self.fail(path, "error.min");
            return None;
        }
        if n > max {
            self.fail(path, "error.max");
            return None;
        }
        Some(n)
    }

    fn boolean(&mut self, v: &Value, path: &str) -> Option<bool> {
        match v.as_bool() {
            Some(b) => Some(b),
            None => {
                self.fail(path, "error.expected.jsboolean");
                None
            }
        }
    }

    fn object<'v>(&mut self, v: &'v Value, path: &str) -> Option<&'v Map<String, Value>> {
        match v.as_object() {
            Some(o) => Some(o),
            None => {
                self.fail(path, "error.expected.jsobject");
                None
            }
        }
    }

    /// An array whose items are all read by `item`; every item's errors are reported.
    fn list<T>(
        &mut self,
        v: &Value,
        path: &str,
        mut item: impl FnMut(&mut Shape, &Value, &str) -> Option<T>,
    ) -> Option<Vec<T>> {
        let Some(items) = v.as_array() else {
            self.fail(path, "error.expected.jsarray");
            return None;
        };
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        for (i, value) in items.iter().enumerate() {
            match item(self, value, &index_path(path, i)) {
                Some(t) => out.push(t),
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn string_map(&mut self, v: &Value, path: &str) -> Option<BTreeMap<String, String>> {
        let obj = self.object(v, path)?;
        let mut out = BTreeMap::new();
        let mut ok = true;
        for (key, value) in obj {
            match self.string(value, &child_path(path, key)) {
                Some(s) => {
                    out.insert(key.clone(), s);
                }
                None => ok = false,
            }
        }
        ok.then_some(out)
    }

    fn port(&mut self, v: &Value, path: &str) -> Option<u16> {
        self.int(v, path, 0, 65535)
            .and_then(|p| u16::try_from(p).ok())
    }

    fn artifact(&mut self, v: &Value, path: &str) -> Option<Artifact> {
        let obj = self.object(v, path)?;
        let uri = match obj.get("uri") {
            None => {
                self.fail(&child_path(path, "uri"), "error.path.missing");
                None
            }
            Some(u) => self.string_with(u, &child_path(path, "uri"), 1, Some(1024), None),
        };
        let flag = |shape: &mut Shape, key: &str, default: bool| match field(obj, key) {
            None => Some(default),
            Some(b) => shape.boolean(b, &child_path(path, key)),
        };
        let extract = flag(self, "extract", true);
        let executable = flag(self, "executable", false);
        let cache = flag(self, "cache", false);
        let dest_path = match field(obj, "destPath") {
            None => Some(None),
            Some(d) => self
                .string_with(d, &child_path(path, "destPath"), 1, None, None)
                .map(Some),
        };
        Some(Artifact {
            uri: uri?,
            extract: extract?,
            executable: executable?,
            cache: cache?,
            dest_path: dest_path?,
        })
    }

    fn port_definition(&mut self, v: &Value, path: &str) -> Option<RawPortDef> {
        let obj = self.object(v, path)?;
        let port = match field(obj, "port") {
            None => Some(0),
            Some(p) => self.port(p, &child_path(path, "port")),
        };
        let name = match field(obj, "name") {
            None => Some(None),
            Some(n) => self
                .string_with(n, &child_path(path, "name"), 1, None, Some(is_legacy_name))
                .map(Some),
        };
        let protocol = match field(obj, "protocol") {
            None => Some("tcp".to_string()),
            Some(p) => self.one_of(p, &child_path(path, "protocol"), &["tcp", "udp", "udp,tcp"]),
        };
        let labels = match field(obj, "labels") {
            None => Some(BTreeMap::new()),
            Some(l) => self.string_map(l, &child_path(path, "labels")),
        };
        Some(RawPortDef {
            port: port?,
            name: name?,
            protocol: protocol?,
            labels: labels?,
        })
    }

    fn health_check(&mut self, v: &Value, path: &str) -> Option<Value> {
        let obj = self.object(v, path)?;
        let mut ok = true;
        for key in [
            "gracePeriodSeconds",
            "intervalSeconds",
            "timeoutSeconds",
            "maxConsecutiveFailures",
            "delaySeconds",
            "portIndex",
        ] {
            if let Some(n) = field(obj, key) {
                ok &= self.int(n, &child_path(path, key), 0, INT32_MAX).is_some();
            }
        }
        if let Some(p) = field(obj, "port") {
            ok &= self.port(p, &child_path(path, "port")).is_some();
        }
        if let Some(p) = field(obj, "protocol") {
            let protocols = [
                "HTTP",
                "HTTPS",
                "TCP",
                "COMMAND",
                "MESOS_HTTP",
                "MESOS_HTTPS",
                "MESOS_TCP",
            ];
            ok &= self
                .one_of(p, &child_path(path, "protocol"), &protocols)
                .is_some();
        }
        if let Some(p) = field(obj, "path") {
            ok &= self.string(p, &child_path(path, "path")).is_some();
        }
        if let Some(b) = field(obj, "ignoreHttp1xx") {
            ok &= self
                .boolean(b, &child_path(path, "ignoreHttp1xx"))
                .is_some();
        }
        if let Some(c) = field(obj, "command") {
            ok &= self.object(c, &child_path(path, "command")).is_some();
        }
        ok.then(|| v.clone())
    }

    /// Stores a field the simulator does not act on, after checking its JSON type.
    fn passthrough(&mut self, out: &mut Map<String, Value>, key: &str, v: &Value) {
        let path = child_path("", key);
        let ok = match key {
            "networks" | "readinessChecks" => {
                v.is_array() || {
                    self.fail(&path, "error.expected.jsarray");
                    false
                }
            }
            "tty" => self.boolean(v, &path).is_some(),
            // Marathon stamps its own version on a new app and drops what the client sent.
            "version" => {
                self.string(v, &path);
                false
            }
            "versionInfo" => {
                self.object(v, &path);
                false
            }
            "killSelection" => self
                .one_of(v, &path, &["YOUNGEST_FIRST", "OLDEST_FIRST"])
                .is_some(),
            "unreachableStrategy" => {
                v.is_object() || v.as_str() == Some("disabled") || {
                    self.fail(&path, "error.expected.jsobject");
                    false
                }
            }
            _ => self.object(v, &path).is_some(),
        };
        if ok {
            out.insert(key.to_string(), v.clone());
        }
    }
}

/// Stage 1: the JSON shape. Errors are (path, Play JSON error key) pairs.
fn read_app(doc: &Value) -> Result<RawApp, Vec<(String, String)>> {
    let empty = Map::new();
    // A non-object document reads like an object without fields: only `id` is then missing.
    let obj = doc.as_object().unwrap_or(&empty);
    let mut s = Shape::default();
    let mut app = RawApp::default();

    match obj.get("id") {
        None => s.fail("/id", "error.path.missing"),
        Some(v) => {
            if let Some(id) = s.string_with(v, "/id", 1, None, Some(is_path_id)) {
                app.id = id;
            }
        }
    }
    for (key, v) in obj {
        if key == "id" || v.is_null() {
            continue;
        }
        let path = child_path("", key);
        let p = path.as_str();
        match key.as_str() {
            "acceptedResourceRoles" => {
                app.accepted_resource_roles = s.list(v, p, |s, v, p| s.string(v, p));
            }
            "args" => app.args = s.list(v, p, |s, v, p| s.string(v, p)),
            "backoffFactor" => app.backoff_factor = s.number(v, p, Some(1.0), None),
            "backoffSeconds" => {
                app.backoff_seconds = s.int(v, p, 0, INT32_MAX).map(|n| n.unsigned_abs());
            }
            "cmd" => app.cmd = s.string_with(v, p, 1, None, None),
            "constraints" => {
                app.constraints = s
                    .list(v, p, |s, v, p| {
                        let parts = s.list(v, p, |s, v, p| s.string(v, p))?;
                        if parts.len() < 2 {
                            s.fail(p, "error.minLength");
                            None
                        } else if parts.len() > 3 {
                            s.fail(p, "error.maxLength");
                            None
                        } else {
                            Some(parts)
                        }
                    })
                    .unwrap_or_default();
            }
            "cpus" => app.cpus = s.number(v, p, Some(0.001), None),
            "dependencies" => {
                app.dependencies = s
                    .list(v, p, |s, v, p| {
                        s.string_with(v, p, 1, None, Some(is_path_id))
                    })
                    .unwrap_or_default();
            }
            "disk" => app.disk = s.number(v, p, Some(0.0), None),
            "env" => {
                if let Some(env) = s.string_map(v, p) {
                    app.env = env;
                }
            }
            "executor" => app.executor = s.string_with(v, p, 0, None, Some(is_executor)),
            "fetch" => app.fetch = s.list(v, p, Shape::artifact),
            "gpus" => {
                app.gpus = s
                    .int(v, p, 0, INT32_MAX)
                    .and_then(|n| u32::try_from(n).ok());
            }
            "healthChecks" => {
                app.health_checks = s.list(v, p, Shape::health_check).unwrap_or_default();
            }
            "instances" => {
                app.instances = s
                    .int(v, p, 0, INT32_MAX)
                    .and_then(|n| u32::try_from(n).ok());
            }
            "labels" => {
                if let Some(labels) = s.string_map(v, p) {
                    app.labels = labels;
                }
            }
            "maxLaunchDelaySeconds" => {
                app.max_launch_delay_seconds = s.int(v, p, 0, INT32_MAX).map(|n| n.unsigned_abs());
            }
            "mem" => app.mem = s.number(v, p, Some(0.0), None),
            "portDefinitions" => app.port_definitions = s.list(v, p, Shape::port_definition),
            "ports" => app.ports = s.list(v, p, Shape::port),
            "requirePorts" => app.require_ports = s.boolean(v, p).unwrap_or(false),
            "taskKillGracePeriodSeconds" => {
                app.task_kill_grace_period_seconds =
                    s.int(v, p, 0, INT32_MAX).map(|n| n.unsigned_abs());
            }
            "upgradeStrategy" => {
                if let Some(o) = s.object(v, p) {
                    let bound = |s: &mut Shape, key: &str| {
                        field(o, key)
                            .and_then(|n| s.number(n, &child_path(p, key), Some(0.0), Some(1.0)))
                    };
                    let min_health = bound(&mut s, "minimumHealthCapacity");
                    let max_over = bound(&mut s, "maximumOverCapacity");
                    app.upgrade_strategy = Some((min_health, max_over));
                }
            }
            "uris" => {
                app.uris = s.list(v, p, |s, v, p| s.string_with(v, p, 1, Some(1024), None));
            }
            "user" => app.user = s.string(v, p),
            "check"
            | "container"
            | "executorResources"
            | "ipAddress"
            | "killSelection"
            | "networks"
            | "readinessChecks"
            | "residency"
            | "secrets"
            | "tty"
            | "unreachableStrategy"
            | "version"
            | "versionInfo" => {
                s.passthrough(&mut app.passthrough, key, v);
            }
            _ => log::warn!("launcher: ignoring unknown app field {key:?}, as Marathon does"),
        }
    }
    if s.errors.is_empty() {
        Ok(app)
    } else {
        Err(s.errors)
    }
}

/// Marathon's path-id pattern: segments separated by slashes, each empty, `..`, or
/// dot-separated labels of lowercase letters, digits and inner dashes.
fn is_path_id(s: &str) -> bool {
    !s.is_empty()
        && s.split('/')
            .all(|segment| segment.is_empty() || segment == ".." || is_dotted_labels(segment))
}

fn is_dotted_labels(segment: &str) -> bool {
    segment.split('.').all(|label| {
        let bytes = label.as_bytes();
        let edge_ok = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
        match (bytes.first(), bytes.last()) {
            (Some(&first), Some(&last)) => {
                edge_ok(first) && edge_ok(last) && bytes.iter().all(|&b| edge_ok(b) || b == b'-')
            }
            _ => false,
        }
    })
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, the port-name pattern.
fn is_legacy_name(s: &str) -> bool {
    is_dotted_labels(s) && !s.contains('.')
}

/// `^(//cmd)|(/?[^/]+(/[^/]+)*)|$` as a full match: `//cmd`, empty, or slash-separated
/// non-empty parts with an optional leading slash.
fn is_executor(s: &str) -> bool {
    if s.is_empty() || s == "//cmd" {
        return true;
    }
    let rest = s.strip_prefix('/').unwrap_or(s);
    !rest.is_empty() && rest.split('/').all(|part| !part.is_empty())
}

// ---------------------------------------------------------------------------------------------
// Stage 2: rules and defaults (Marathon's validators and normalisation)
// ---------------------------------------------------------------------------------------------

const FIRST_SERVICE_PORT: u32 = 10000;

#[derive(Debug, Clone)]
struct PortDef {
    /// Declared port; Marathon replaces 0 by an assigned service port when storing the app.
    port: u16,
    name: Option<String>,
    protocol: String,
    labels: BTreeMap<String, String>,
}

/// A stored app definition, normalised.
#[derive(Debug, Clone)]
struct AppDef {
    id: String,
    cmd: Option<String>,
    args: Vec<String>,
    user: Option<String>,
    env: BTreeMap<String, String>,
    instances: u32,
    cpus: f64,
    mem: f64,
    disk: f64,
    gpus: u32,
    executor: String,
    constraints: Vec<Vec<String>>,
    fetch: Vec<Artifact>,
    port_definitions: Vec<PortDef>,
    require_ports: bool,
    backoff_seconds: u64,
    backoff_factor: f64,
    max_launch_delay_seconds: u64,
    labels: BTreeMap<String, String>,
    health_checks: Vec<Value>,
    dependencies: Vec<String>,
    accepted_resource_roles: Option<Vec<String>>,
    minimum_health_capacity: f64,
    maximum_over_capacity: f64,
    task_kill_grace_period_seconds: Option<u64>,
    passthrough: Map<String, Value>,
    version: String,
}

const CONSTRAINT_OPERATOR_INVALID: &str =
    "operator must be one of the following UNIQUE, CLUSTER, GROUP_BY, LIKE, MAX_PER, UNLIKE or IS";

/// Stage 2: Marathon's rule validation, then defaults. Errors are (path, message) pairs.
fn validate_app(raw: RawApp, version: &str) -> Result<AppDef, Vec<(String, String)>> {
    let mut errors: Vec<(String, String)> = Vec::new();
    let mut fail = |path: &str, message: &str| errors.push((path.to_string(), message.to_string()));

    let id = canonical_id(&raw.id);
    if id == "/" {
        fail("/id", "Path must contain at least one path element");
        fail("/", "must not be root");
    }
    let has_cmd = raw.cmd.is_some();
    let has_args = raw.args.as_ref().is_some_and(|a| !a.is_empty());
    let has_container = raw.passthrough.contains_key("container");
    if !((has_cmd ^ has_args) || (!(has_cmd && has_args) && has_container)) {
        fail(
            "/",
            "AppDefinition must either contain one of 'cmd' or 'args', and/or a 'container'.",
        );
    }
    for (i, constraint) in raw.constraints.iter().enumerate() {
        if let Some(message) = constraint_violation(constraint) {
            fail(&index_path("/constraints", i), message);
        }
    }
    if let Some(uris) = &raw.uris {
        for (i, uri) in uris.iter().enumerate() {
            if !is_uri_syntax(uri) {
                fail(&index_path("/uris", i), "URI has invalid syntax.");
            }
        }
        if !uris.is_empty() && raw.fetch.as_ref().is_some_and(|f| !f.is_empty()) {
            fail("/uris", "may not be set in conjunction with fetch");
        }
    }
    for (i, artifact) in raw.fetch.iter().flatten().enumerate() {
        if !is_uri_syntax(&artifact.uri) {
            fail(&format!("/fetch({i})/uri"), "URI has invalid syntax.");
        }
    }
    if let Some(ports) = &raw.ports {
        if !unique(ports.iter().filter(|&&p| p != 0)) {
            fail("/", "ports must be unique");
        }
        if let Some(defs) = &raw.port_definitions {
            let same: Vec<u16> = defs.iter().map(|d| d.port).collect();
            if &same != ports {
                fail("/", "cannot specify both ports and port definitions");
            }
        }
    }
    if let Some(defs) = &raw.port_definitions {
        if !unique(defs.iter().filter_map(|d| d.name.as_ref())) {
            fail("/portDefinitions", "Port names must be unique.");
        }
        if !unique(defs.iter().map(|d| d.port).filter(|&p| p != 0)) {
            fail("/portDefinitions", "Ports must be unique.");
        }
    }

    let port_definitions: Vec<PortDef> = match (&raw.port_definitions, &raw.ports) {
        (Some(defs), _) => defs
            .iter()
            .map(|d| PortDef {
                port: d.port,
                name: d.name.clone(),
                protocol: d.protocol.clone(),
                labels: d.labels.clone(),
            })
            .collect(),
        (None, Some(ports)) => ports
            .iter()
            .map(|&port| PortDef {
                port,
                name: None,
                protocol: "tcp".into(),
                labels: BTreeMap::new(),
            })
            .collect(),
        (None, None) => vec![PortDef {
            port: 0,
            name: Some("default".into()),
            protocol: "tcp".into(),
            labels: BTreeMap::new(),
        }],
    };
    for (i, check) in raw.health_checks.iter().enumerate() {
        let index = check.get("portIndex").and_then(Value::as_u64);
        if index.is_some_and(|ix| ix >= port_definitions.len() as u64) {
            fail(
                &index_path("/healthChecks", i),
                "Health check port indices must address an element of the ports array or container port mappings.",
            );
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }

    let fetch = match (raw.fetch, raw.uris) {
        (Some(fetch), _) if !fetch.is_empty() => fetch,
        (_, Some(uris)) => uris
            .into_iter()
            .map(|uri| Artifact {
                extract: is_archive(&uri),
                uri,
                executable: false,
                cache: false,
                dest_path: None,
            })
            .collect(),
        _ => Vec::new(),
    };
    let (min_health, max_over) = raw.upgrade_strategy.unwrap_or((None, None));
    Ok(AppDef {
        id,
        cmd: raw.cmd,
        args: raw.args.unwrap_or_default(),
        user: raw.user,
        env: raw.env,
        instances: raw.instances.unwrap_or(1),
        cpus: raw.cpus.unwrap_or(1.0),
        mem: raw.mem.unwrap_or(128.0),
        disk: raw.disk.unwrap_or(0.0),
        gpus: raw.gpus.unwrap_or(0),
        executor: raw.executor.unwrap_or_default(),
        constraints: raw.constraints,
        fetch,
        port_definitions,
        require_ports: raw.require_ports,
        backoff_seconds: raw.backoff_seconds.unwrap_or(1),
        backoff_factor: raw.backoff_factor.unwrap_or(1.15),
        max_launch_delay_seconds: raw.max_launch_delay_seconds.unwrap_or(3600),
        labels: raw.labels,
        health_checks: raw.health_checks,
        dependencies: raw.dependencies.iter().map(|d| canonical_id(d)).collect(),
        accepted_resource_roles: raw.accepted_resource_roles,
        minimum_health_capacity: min_health.unwrap_or(1.0),
        maximum_over_capacity: max_over.unwrap_or(1.0),
        task_kill_grace_period_seconds: raw.task_kill_grace_period_seconds,
        passthrough: raw.passthrough,
        version: version.to_string(),
    })
}

fn unique<T: PartialEq>(items: impl Iterator<Item = T>) -> bool {
    let mut seen: Vec<T> = Vec::new();
    for item in items {
        if seen.contains(&item) {
            return false;
        }
        seen.push(item);
    }
    true
}

/// Marathon's app constraint rules; `None` when the constraint is acceptable.
fn constraint_violation(c: &[String]) -> Option<&'static str> {
    if c.len() < 2 || c.len() > 3 {
        return Some("Each constraint must have either 2 or 3 fields");
    }
    if c[0].is_empty() {
        return Some("illegal constraint specification");
    }
    let value = c.get(2).map(String::as_str);
    let is_int = |v: Option<&str>| v.is_some_and(|v| v.parse::<i32>().is_ok());
    match c[1].to_ascii_uppercase().as_str() {
        "UNIQUE" => value.map(|_| "UNIQUE does not accept a value"),
        "CLUSTER" => None,
        "GROUP_BY" => (value.is_some() && !is_int(value))
            .then_some("GROUP BY must define an integer value or else no value at all"),
        "MAX_PER" => (!is_int(value)).then_some("MAX_PER requires an integer value"),
        // Marathon also compiles the value as a Java regex; without a regex engine only the
        // presence of a value is checked here.
        "LIKE" | "UNLIKE" => value
            .is_none()
            .then_some("LIKE and UNLIKE require a non-empty, regular expression value"),
        "IS" => (!value.unwrap_or("").bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'/' | b'.' | b'-')
        }))
        .then_some(
            "IS only supports Mesos text and float values (see http://mesos.apache.org/documentation/latest/attributes-resources/)",
        ),
        _ => Some(CONSTRAINT_OPERATOR_INVALID),
    }
}

/// What `java.net.URI` rejects: whitespace, controls, characters outside the URI grammar,
/// malformed percent escapes and malformed schemes.
fn is_uri_syntax(uri: &str) -> bool {
    let bytes = uri.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_control() || b == b' ' || b"\"<>\\^`{|}".contains(&b) {
            return false;
        }
        if b == b'%' {
            let hex = |j: usize| bytes.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !hex(i + 1) || !hex(i + 2) {
                return false;
            }
        }
        i += 1;
    }
    let head_end = uri.find(['/', '?', '#']).unwrap_or(uri.len());
    match uri[..head_end].find(':') {
        None => true,
        Some(colon) => {
            let scheme = &uri[..colon];
            scheme
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic())
                && scheme
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
                && colon + 1 < uri.len()
        }
    }
}

/// The Mesos fetcher's archive extensions; Marathon sets `extract` from them for `uris`.
fn is_archive(name: &str) -> bool {
    let base = name.split(['?', '#']).next().unwrap_or(name);
    [
        ".tar", ".tar.gz", ".tar.bz2", ".tar.xz", ".gz", ".tgz", ".tbz2", ".txz", ".zip",
    ]
    .iter()
    .any(|ext| base.ends_with(ext))
}

/// Absolute, canonical form of an app id: `storage-scheduler` -> `/storage-scheduler`.
fn canonical_id(raw: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for segment in raw.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Marathon's "safe path" of an id, used in task ids: `/a/b` -> `a_b`.
fn safe_path(id: &str) -> String {
    id.trim_start_matches('/').replace('/', "_")
}

// ---------------------------------------------------------------------------------------------
// JSON rendering
// ---------------------------------------------------------------------------------------------

fn app_json(def: &AppDef) -> Map<String, Value> {
    let mut m = Map::new();
    for (key, value) in &def.passthrough {
        m.insert(key.clone(), value.clone());
    }
    m.insert("id".into(), json!(def.id));
    if let Some(cmd) = &def.cmd {
        m.insert("cmd".into(), json!(cmd));
    }
    if !def.args.is_empty() {
        m.insert("args".into(), json!(def.args));
    }
    if let Some(user) = &def.user {
        m.insert("user".into(), json!(user));
    }
    if !def.env.is_empty() {
        m.insert("env".into(), json!(def.env));
    }
    if !def.constraints.is_empty() {
        m.insert("constraints".into(), json!(def.constraints));
    }
    if !def.fetch.is_empty() {
        let fetch: Vec<Value> = def
            .fetch
            .iter()
            .map(|a| {
                let mut f = json!({
                    "uri": a.uri,
                    "extract": a.extract,
                    "executable": a.executable,
                    "cache": a.cache,
                });
                if let Some(dest) = &a.dest_path {
                    f["destPath"] = json!(dest);
                }
                f
            })
            .collect();
        m.insert("fetch".into(), Value::Array(fetch));
    }
    if !def.health_checks.is_empty() {
        m.insert("healthChecks".into(), json!(def.health_checks));
    }
    if !def.dependencies.is_empty() {
        m.insert("dependencies".into(), json!(def.dependencies));
    }
    if let Some(roles) = &def.accepted_resource_roles {
        m.insert("acceptedResourceRoles".into(), json!(roles));
    }
    if let Some(grace) = def.task_kill_grace_period_seconds {
        m.insert("taskKillGracePeriodSeconds".into(), json!(grace));
    }
    let port_definitions: Vec<Value> = def
        .port_definitions
        .iter()
        .map(|p| {
            let mut v = json!({ "port": p.port, "protocol": p.protocol });
            if let Some(name) = &p.name {
                v["name"] = json!(name);
            }
            if !p.labels.is_empty() {
                v["labels"] = json!(p.labels);
            }
            v
        })
        .collect();
    let fields = [
        ("instances", json!(def.instances)),
        ("cpus", json!(def.cpus)),
        ("mem", json!(def.mem)),
        ("disk", json!(def.disk)),
        ("gpus", json!(def.gpus)),
        ("executor", json!(def.executor)),
        ("backoffSeconds", json!(def.backoff_seconds)),
        ("backoffFactor", json!(def.backoff_factor)),
        ("maxLaunchDelaySeconds", json!(def.max_launch_delay_seconds)),
        ("labels", json!(def.labels)),
        ("portDefinitions", Value::Array(port_definitions)),
        ("requirePorts", json!(def.require_ports)),
        (
            "upgradeStrategy",
            json!({
                "minimumHealthCapacity": def.minimum_health_capacity,
                "maximumOverCapacity": def.maximum_over_capacity,
            }),
        ),
        ("version", json!(def.version)),
    ];
    for (key, value) in fields {
        m.insert(key.into(), value);
    }
    m.entry("networks")
        .or_insert_with(|| json!([{ "mode": "host" }]));
    m.entry("killSelection")
        .or_insert_with(|| json!("YOUNGEST_FIRST"));
    m.entry("unreachableStrategy")
        .or_insert_with(|| json!({ "inactiveAfterSeconds": 0, "expungeAfterSeconds": 0 }));
    m
}

// ---------------------------------------------------------------------------------------------
// Manager: owns every app record; the HTTP thread and the supervisors talk to it by message
// ---------------------------------------------------------------------------------------------

struct Settings {
    work_dir: PathBuf,
    host: String,
    agent_id: String,
    kill_grace_period: Duration,
    fetch_timeout: Duration,
}

struct Created {
    body: Value,
    deployment: String,
}

/// What a `PUT` did.
enum Updated {
    Changed {
        version: String,
        deployment: String,
    },
    /// The app did not exist: made as `POST` makes it.
    Created(Created),
    /// A deployment is in progress and `force` was not given: its ids.
    Locked(Vec<String>),
}

enum Msg {
    Create {
        def: Box<AppDef>,
        reply: Sender<Result<Created, String>>,
    },
    Update {
        def: Box<AppDef>,
        force: bool,
        reply: Sender<Updated>,
    },
    /// The app's definition as stored (what a partial update starts from).
    Definition {
        id: String,
        reply: Sender<Option<Map<String, Value>>>,
    },
    Get {
        id: String,
        reply: Sender<Option<Value>>,
    },
    List {
        reply: Sender<Value>,
    },
    Delete {
        id: String,
        reply: Sender<Option<(String, String)>>,
    },
    Task(TaskEvent),
    /// The agent's `/monitor/statistics`: the isolators' view of every running task.
    Statistics {
        reply: Sender<Value>,
    },
    Shutdown {
        done: Sender<()>,
    },
}

struct TaskEvent {
    app_id: String,
    generation: u64,
    instance: usize,
    kind: TaskEventKind,
}

enum TaskEventKind {
    Staging {
        task_id: String,
        ports: Vec<u16>,
        staged_at: String,
    },
    Running {
        task_id: String,
        started_at: String,
    },
    Ended {
        task_id: String,
        state: &'static str,
        message: String,
        at: String,
    },
    /// The isolators' view of the running task (`/monitor/statistics`).
    Statistics {
        task_id: String,
        statistics: Value,
    },
}

#[derive(Clone)]
struct TaskView {
    id: String,
    state: &'static str,
    ports: Vec<u16>,
    staged_at: String,
    started_at: Option<String>,
    statistics: Option<Value>,
}

struct AppRecord {
    def: Arc<AppDef>,
    generation: u64,
    deployments: Vec<String>,
    tasks: Vec<Option<TaskView>>,
    last_failure: Option<Value>,
    supervisors: Vec<(Sender<()>, JoinHandle<()>)>,
    /// The instances of the definition an update replaced, still running until every new one
    /// runs (an upgrade that starts the new instances first).
    replaced: Vec<(Sender<()>, JoinHandle<()>)>,
}

struct Manager {
    settings: Arc<Settings>,
    events: Sender<Msg>,
    apps: BTreeMap<String, AppRecord>,
    /// Supervisors of deleted apps, still terminating their tasks.
    retired: Vec<JoinHandle<()>>,
    next_generation: u64,
    next_service_port: u32,
}

impl Manager {
    fn run(mut self, inbox: Receiver<Msg>) {
        for msg in inbox.iter() {
            match msg {
                Msg::Create { def, reply } => {
                    let _ = reply.send(self.create(def));
                }
                Msg::Update { def, force, reply } => {
                    let _ = reply.send(self.update(def, force));
                }
                Msg::Definition { id, reply } => {
                    let _ = reply.send(self.apps.get(&id).map(|r| app_json(&r.def)));
                }
                Msg::Get { id, reply } => {
                    let _ = reply.send(self.apps.get(&id).map(|r| self.render(r, true)));
                }
                Msg::List { reply } => {
                    let apps: Vec<Value> =
                        self.apps.values().map(|r| self.render(r, false)).collect();
                    let _ = reply.send(json!({ "apps": apps }));
                }
                Msg::Delete { id, reply } => {
                    let _ = reply.send(self.delete(&id));
                }
                Msg::Task(event) => self.on_task_event(event),
                Msg::Statistics { reply } => {
                    let entries: Vec<Value> = self
                        .apps
                        .values()
                        .flat_map(|r| r.tasks.iter().flatten().map(move |t| (r, t)))
                        .filter_map(|(r, t)| {
                            Some(json!({
                                "executor_id": t.id,
                                "source": r.def.id,
                                "statistics": t.statistics.clone()?,
                            }))
                        })
                        .collect();
                    let _ = reply.send(Value::Array(entries));
                }
                Msg::Shutdown { done } => {
                    let ids: Vec<String> = self.apps.keys().cloned().collect();
                    for id in ids {
                        self.delete(&id);
                    }
                    for handle in self.retired.drain(..) {
                        let _ = handle.join();
                    }
                    let _ = done.send(());
                    return;
                }
            }
        }
    }

    /// Marathon hands out a service port for every dynamic port definition.
    fn assign_service_ports(&mut self, def: &mut AppDef) {
        if !def.require_ports {
            for pd in def.port_definitions.iter_mut().filter(|p| p.port == 0) {
                pd.port = u16::try_from(self.next_service_port).unwrap_or(0);
                self.next_service_port += 1;
            }
        }
    }

    /// A supervisor per instance of `def`; with a `gate`, each starts its task only once the
    /// gate's sender is gone (the instances it replaces have ended).
    fn spawn_supervisors(
        settings: &Arc<Settings>,
        events: &Sender<Msg>,
        def: &Arc<AppDef>,
        generation: u64,
        gate: Option<Receiver<()>>,
    ) -> Vec<(Sender<()>, JoinHandle<()>)> {
        let instances = def.instances as usize;
        let mut supervisors = Vec::with_capacity(instances);
        for instance in 0..instances {
            let (stop_tx, stop_rx) = bounded(1);
            let supervisor = Supervisor {
                def: Arc::clone(def),
                instance,
                generation,
                settings: Arc::clone(settings),
                events: events.clone(),
                stop: stop_rx,
                gate: gate.clone(),
            };
            let name = format!("launcher-{}-{instance}", safe_path(&def.id));
            match thread::Builder::new()
                .name(name)
                .spawn(move || supervisor.run())
            {
                Ok(handle) => supervisors.push((stop_tx, handle)),
                Err(e) => log::error!(
                    "launcher: cannot start supervisor for {} instance {instance}: {e}",
                    def.id
                ),
            }
        }
        supervisors
    }

    fn create(&mut self, def: Box<AppDef>) -> Result<Created, String> {
        let mut def = *def;
        if self.apps.contains_key(&def.id) {
            return Err(format!("An app with id [{}] already exists.", def.id));
        }
        self.assign_service_ports(&mut def);
        let def = Arc::new(def);
        let deployment = uuid();
        self.next_generation += 1;
        let generation = self.next_generation;
        let instances = def.instances as usize;
        let supervisors =
            Self::spawn_supervisors(&self.settings, &self.events, &def, generation, None);
        let mut body = app_json(&def);
        body.insert("tasksStaged".into(), json!(0));
        body.insert("tasksRunning".into(), json!(0));
        body.insert("tasksHealthy".into(), json!(0));
        body.insert("tasksUnhealthy".into(), json!(0));
        body.insert("deployments".into(), json!([{ "id": deployment }]));
        body.insert("tasks".into(), json!([]));
        let record = AppRecord {
            def: Arc::clone(&def),
            generation,
            deployments: if instances == 0 {
                Vec::new()
            } else {
                vec![deployment.clone()]
            },
            tasks: vec![None; instances],
            last_failure: None,
            supervisors,
            replaced: Vec::new(),
        };
        log::info!(
            "launcher: created {} ({} instance(s)), deployment {deployment}",
            def.id,
            def.instances
        );
        self.apps.insert(def.id.clone(), record);
        Ok(Created {
            body: Value::Object(body),
            deployment,
        })
    }

    /// `PUT`: the app restarted with `def` (see the module's comment for the order).
    fn update(&mut self, def: Box<AppDef>, force: bool) -> Updated {
        let Some(record) = self.apps.get(&def.id) else {
            return match self.create(def) {
                Ok(created) => Updated::Created(created),
                Err(message) => unreachable!("the app was not there: {message}"),
            };
        };
        if !record.deployments.is_empty() && !force {
            return Updated::Locked(record.deployments.clone());
        }
        let mut def = *def;
        self.assign_service_ports(&mut def);
        let def = Arc::new(def);
        let deployment = uuid();
        self.next_generation += 1;
        let generation = self.next_generation;
        let Some(record) = self.apps.get_mut(&def.id) else {
            unreachable!("looked up above")
        };
        // Instances an earlier update left running until its new ones ran: superseded too.
        for (stop, handle) in record.replaced.drain(..) {
            drop(stop);
            self.retired.push(handle);
        }
        let old = std::mem::take(&mut record.supervisors);
        let gate = if starts_new_first(&def) {
            record.replaced = old;
            None
        } else {
            let (gate_tx, gate_rx) = bounded::<()>(0);
            let handles: Vec<JoinHandle<()>> = old
                .into_iter()
                .map(|(stop, handle)| {
                    drop(stop);
                    handle
                })
                .collect();
            // Dropping the sender once the old instances are gone opens the gate.
            let waiter = thread::Builder::new()
                .name("launcher-upgrade".into())
                .spawn(move || {
                    for handle in handles {
                        let _ = handle.join();
                    }
                    drop(gate_tx);
                });
            if let Err(e) = waiter {
                log::error!("launcher: cannot start the upgrade's waiter: {e}");
            }
            Some(gate_rx)
        };
        record.supervisors =
            Self::spawn_supervisors(&self.settings, &self.events, &def, generation, gate);
        let instances = def.instances as usize;
        record.tasks = vec![None; instances];
        record.deployments = if instances == 0 {
            Vec::new()
        } else {
            vec![deployment.clone()]
        };
        record.generation = generation;
        record.def = Arc::clone(&def);
        log::info!(
            "launcher: updated {} to version {} ({}), deployment {deployment}",
            def.id,
            def.version,
            if record.replaced.is_empty() {
                "old instances killed first"
            } else {
                "new instances started first"
            }
        );
        Updated::Changed {
            version: def.version.clone(),
            deployment,
        }
    }

    fn delete(&mut self, id: &str) -> Option<(String, String)> {
        let record = self.apps.remove(id)?;
        for (stop, handle) in record.supervisors.into_iter().chain(record.replaced) {
            drop(stop); // a disconnected stop channel tells the supervisor to kill its task
            self.retired.push(handle);
        }
        let (finished, running): (Vec<_>, Vec<_>) =
            self.retired.drain(..).partition(|h| h.is_finished());
        for handle in finished {
            let _ = handle.join();
        }
        self.retired = running;
        log::info!("launcher: deleted {id}");
        Some((iso_timestamp(SystemTime::now()), uuid()))
    }

    fn on_task_event(&mut self, event: TaskEvent) {
        let Some(record) = self.apps.get_mut(&event.app_id) else {
            return;
        };
        if record.generation != event.generation || event.instance >= record.tasks.len() {
            return;
        }
        let slot = &mut record.tasks[event.instance];
        match event.kind {
            TaskEventKind::Staging {
                task_id,
                ports,
                staged_at,
            } => {
                *slot = Some(TaskView {
                    id: task_id,
                    state: "TASK_STAGING",
                    ports,
                    staged_at,
                    started_at: None,
                    statistics: None,
                });
            }
            TaskEventKind::Running {
                task_id,
                started_at,
            } => {
                if let Some(task) = slot.as_mut().filter(|t| t.id == task_id) {
                    task.state = "TASK_RUNNING";
                    task.started_at = Some(started_at);
                }
                let all_running = record
                    .tasks
                    .iter()
                    .all(|t| t.as_ref().is_some_and(|t| t.state == "TASK_RUNNING"));
                if all_running {
                    record.deployments.clear();
                    for (stop, handle) in record.replaced.drain(..) {
                        drop(stop);
                        self.retired.push(handle);
                    }
                }
            }
            TaskEventKind::Statistics {
                task_id,
                statistics,
            } => {
                if let Some(task) = slot.as_mut().filter(|t| t.id == task_id) {
                    task.statistics = Some(statistics);
                }
            }
            TaskEventKind::Ended {
                task_id,
                state,
                message,
                at,
            } => {
                if slot.as_ref().is_some_and(|t| t.id == task_id) {
                    *slot = None;
                }
                log::info!("launcher: task {task_id} ended ({state}): {message}");
                record.last_failure = Some(json!({
                    "appId": record.def.id,
                    "host": self.settings.host,
                    "message": message,
                    "state": state,
                    "taskId": task_id,
                    "timestamp": at,
                    "version": record.def.version,
                    "slaveId": self.settings.agent_id,
                }));
            }
        }
    }

    fn render(&self, record: &AppRecord, embed_tasks: bool) -> Value {
        let mut m = app_json(&record.def);
        let tasks: Vec<&TaskView> = record.tasks.iter().flatten().collect();
        let count = |state: &str| tasks.iter().filter(|t| t.state == state).count();
        m.insert("tasksStaged".into(), json!(count("TASK_STAGING")));
        m.insert("tasksRunning".into(), json!(count("TASK_RUNNING")));
        m.insert("tasksHealthy".into(), json!(0));
        m.insert("tasksUnhealthy".into(), json!(0));
        let deployments: Vec<Value> = record
            .deployments
            .iter()
            .map(|d| json!({ "id": d }))
            .collect();
        m.insert("deployments".into(), Value::Array(deployments));
        if embed_tasks {
            let service_ports: Vec<u16> =
                record.def.port_definitions.iter().map(|p| p.port).collect();
            let tasks: Vec<Value> = tasks
                .iter()
                .map(|t| {
                    let mut v = json!({
                        "id": t.id,
                        "appId": record.def.id,
                        "host": self.settings.host,
                        "ipAddresses": [{ "ipAddress": self.settings.host, "protocol": "IPv4" }],
                        "ports": t.ports,
                        "servicePorts": service_ports,
                        "slaveId": self.settings.agent_id,
                        "state": t.state,
                        "stagedAt": t.staged_at,
                        "version": record.def.version,
                        "healthCheckResults": [],
                        "localVolumes": [],
                    });
                    if let Some(started) = &t.started_at {
                        v["startedAt"] = json!(started);
                    }
                    v
                })
                .collect();
            m.insert("tasks".into(), Value::Array(tasks));
            if let Some(failure) = &record.last_failure {
                m.insert("lastTaskFailure".into(), failure.clone());
            }
        }
        Value::Object(m)
    }
}

// ---------------------------------------------------------------------------------------------
// Supervisor: one thread per instance, owning that instance's process
// ---------------------------------------------------------------------------------------------

/// Marathon's launch delay: `backoffSeconds` after the first failure, multiplied by
/// `backoffFactor` per further failure, capped at `maxLaunchDelaySeconds`, and dropped once it
/// is older than the cap (a launch refreshes its age).
struct Backoff {
    base: Duration,
    factor: f64,
    max: Duration,
    current: Option<(Duration, Instant)>,
}

impl Backoff {
    fn new(def: &AppDef) -> Backoff {
        Backoff {
            base: Duration::from_secs(def.backoff_seconds),
            factor: def.backoff_factor,
            max: Duration::from_secs(def.max_launch_delay_seconds),
            current: None,
        }
    }

    fn expire(&mut self, now: Instant) {
        if self
            .current
            .is_some_and(|(_, since)| now.saturating_duration_since(since) > self.max)
        {
            self.current = None;
        }
    }

    fn failed(&mut self, now: Instant) {
        self.expire(now);
        let delay = match self.current {
            None => self.base.min(self.max),
            Some((delay, _)) => delay.mul_f64(self.factor).min(self.max),
        };
        self.current = Some((delay, now));
    }

    fn launched(&mut self, now: Instant) {
        self.expire(now);
        if let Some((delay, _)) = self.current {
            self.current = Some((delay, now));
        }
    }

    fn wait(&self, now: Instant) -> Duration {
        self.current
            .map(|(delay, since)| (since + delay).saturating_duration_since(now))
            .unwrap_or_default()
    }
}

enum Flow {
    Relaunch,
    Stop,
}

struct Supervisor {
    def: Arc<AppDef>,
    instance: usize,
    generation: u64,
    settings: Arc<Settings>,
    events: Sender<Msg>,
    /// Disconnected (or sent to) when the task must be killed and the supervisor end.
    stop: Receiver<()>,
    /// Disconnected once the instances this one replaces have ended (see `Manager::update`).
    gate: Option<Receiver<()>>,
}

/// Whether an upgrade of `def` starts the new instances before killing the old ones:
/// Marathon keeps `ceil(instances * minimumHealthCapacity)` running and runs at most
/// `floor(instances * (1 + maximumOverCapacity))`.
fn starts_new_first(def: &AppDef) -> bool {
    let n = f64::from(def.instances);
    let keep = (n * def.minimum_health_capacity).ceil();
    let most = (n * (1.0 + def.maximum_over_capacity)).floor();
    keep > 0.0 && most > n
}

impl Supervisor {
    fn run(self) {
        if let Some(gate) = &self.gate {
            select! {
                recv(gate) -> _ => {}
                recv(self.stop) -> _ => return,
            }
        }
        let mut backoff = Backoff::new(&self.def);
        loop {
            let wait = backoff.wait(Instant::now());
            match self.stop.recv_timeout(wait) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            match self.run_task(&mut backoff) {
                Flow::Relaunch => {}
                Flow::Stop => return,
            }
        }
    }

    fn send(&self, kind: TaskEventKind) {
        let _ = self.events.send(Msg::Task(TaskEvent {
            app_id: self.def.id.clone(),
            generation: self.generation,
            instance: self.instance,
            kind,
        }));
    }

    fn ended(&self, task_id: &str, state: &'static str, message: String, backoff: &mut Backoff) {
        backoff.failed(Instant::now());
        self.send(TaskEventKind::Ended {
            task_id: task_id.to_string(),
            state,
            message,
            at: iso_timestamp(SystemTime::now()),
        });
    }

    fn run_task(&self, backoff: &mut Backoff) -> Flow {
        let task_id = format!("{}.{}", safe_path(&self.def.id), uuid());
        let sandbox = self.settings.work_dir.join(&task_id);
        let host_ports = match host_ports(&self.def) {
            Ok(p) => p,
            Err(e) => {
                self.ended(
                    &task_id,
                    "TASK_FAILED",
                    format!("cannot reserve ports: {e}"),
                    backoff,
                );
                return Flow::Relaunch;
            }
        };
        self.send(TaskEventKind::Staging {
            task_id: task_id.clone(),
            ports: host_ports.clone(),
            staged_at: iso_timestamp(SystemTime::now()),
        });

        // The fetch runs on its own thread so that a stop is honoured while a download hangs.
        let (fetched_tx, fetched_rx) = bounded(1);
        let artifacts = self.def.fetch.clone();
        let fetch_dir = sandbox.clone();
        let timeout = self.settings.fetch_timeout;
        let fetcher = thread::Builder::new()
            .name(format!("launcher-fetch-{task_id}"))
            .spawn(move || {
                let _ = fetched_tx.send(fetch_all(&artifacts, &fetch_dir, timeout));
            });
        if let Err(e) = fetcher {
            self.ended(
                &task_id,
                "TASK_FAILED",
                format!("cannot start fetcher: {e}"),
                backoff,
            );
            return Flow::Relaunch;
        }
        select! {
            recv(fetched_rx) -> result => {
                let failure = match result {
                    Ok(Ok(())) => None,
                    Ok(Err(message)) => Some(message),
                    Err(_) => Some("fetcher ended without a result".to_string()),
                };
                if let Some(message) = failure {
                    self.ended(&task_id, "TASK_FAILED", message, backoff);
                    return Flow::Relaunch;
                }
            }
            recv(self.stop) -> _ => return Flow::Stop,
        }

        let child = match self.spawn(&task_id, &sandbox, &host_ports) {
            Ok(child) => child,
            Err(message) => {
                self.ended(&task_id, "TASK_FAILED", message, backoff);
                return Flow::Relaunch;
            }
        };
        let pgid = child.id();
        backoff.launched(Instant::now());
        self.send(TaskEventKind::Running {
            task_id: task_id.clone(),
            started_at: iso_timestamp(SystemTime::now()),
        });
        log::info!(
            "launcher: started {task_id} (pid {pgid}) in {}",
            sandbox.display()
        );

        let exited = wait_in_background(child, &task_id);
        // The cgroup isolators' stand-in (see isolation.rs): every period, the group's
        // memory and CPU against the app's `mem` and `cpus`.
        let mut limits = Isolator::new(self.def.cpus, self.def.mem);
        loop {
            select! {
                recv(exited) -> status => {
                    // Mesos destroys the whole container when the command ends: take the
                    // leftovers of the process group with it.
                    signal_group(pgid, "KILL");
                    let (state, message) = match status {
                        Ok(Ok(status)) => describe_exit(status),
                        Ok(Err(e)) => ("TASK_FAILED", format!("cannot wait for the command: {e}")),
                        Err(_) => ("TASK_FAILED", "lost track of the command".to_string()),
                    };
                    self.ended(&task_id, state, message, backoff);
                    return Flow::Relaunch;
                }
                recv(self.stop) -> _ => {
                    let grace = self
                        .def
                        .task_kill_grace_period_seconds
                        .map(Duration::from_secs)
                        .unwrap_or(self.settings.kill_grace_period);
                    // A throttled (stopped) group must run to handle its SIGTERM.
                    signal_group(pgid, "CONT");
                    terminate(pgid, grace, &exited);
                    log::info!("launcher: killed {task_id}");
                    return Flow::Stop;
                }
                default(isolation::PERIOD) => {
                    match limits.tick(Instant::now(), isolation::group_usage(pgid)) {
                        Some(Action::Stop) => signal_group(pgid, "STOP"),
                        Some(Action::Continue) => signal_group(pgid, "CONT"),
                        Some(Action::OomKill) => {
                            signal_group(pgid, "KILL");
                            let _ = exited.recv();
                            let message = limits.oom_message();
                            log::warn!("launcher: {task_id}: {message}; killed");
                            self.ended(&task_id, "TASK_FAILED", message, backoff);
                            return Flow::Relaunch;
                        }
                        None => {}
                    }
                    self.send(TaskEventKind::Statistics {
                        task_id: task_id.clone(),
                        statistics: limits.statistics(),
                    });
                }
            }
        }
    }

    fn spawn(&self, task_id: &str, sandbox: &Path, host_ports: &[u16]) -> Result<Child, String> {
        let def = &self.def;
        let mut command = match (&def.cmd, def.args.split_first()) {
            (Some(cmd), _) => {
                let mut c = Command::new("/bin/sh");
                c.arg("-c").arg(cmd);
                c
            }
            (None, Some((program, rest))) => {
                let mut c = Command::new(program);
                c.args(rest);
                c
            }
            (None, None) => return Err("the app has neither cmd nor args".to_string()),
        };
        if def.user.is_some() || def.passthrough.contains_key("container") {
            log::warn!(
                "launcher: {task_id}: `user` and `container` are not emulated; running the command on the host"
            );
        }
        let stdout = File::create(sandbox.join("stdout"))
            .map_err(|e| format!("cannot create {}/stdout: {e}", sandbox.display()))?;
        let stderr = File::create(sandbox.join("stderr"))
            .map_err(|e| format!("cannot create {}/stderr: {e}", sandbox.display()))?;
        command
            .current_dir(sandbox)
            .envs(task_env(def, &self.settings, task_id, sandbox, host_ports))
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            // Its own process group, so that a kill reaches everything the command started.
            .process_group(0);
        command
            .spawn()
            .map_err(|e| format!("cannot start the command: {e}"))
    }
}

fn wait_in_background(mut child: Child, task_id: &str) -> Receiver<io::Result<ExitStatus>> {
    let (tx, rx) = bounded(1);
    let spawned = thread::Builder::new()
        .name(format!("launcher-wait-{task_id}"))
        .spawn(move || {
            let _ = tx.send(child.wait());
        });
    if let Err(e) = spawned {
        // The closure (and the child) is gone; the receiver reports a disconnect.
        log::error!("launcher: cannot start waiter for {task_id}: {e}");
    }
    rx
}

/// SIGTERM to the task's process group, SIGKILL once the grace period is over.
fn terminate(pgid: u32, grace: Duration, exited: &Receiver<io::Result<ExitStatus>>) {
    signal_group(pgid, "TERM");
    if let Err(RecvTimeoutError::Timeout) = exited.recv_timeout(grace) {
        signal_group(pgid, "KILL");
        let _ = exited.recv();
    }
    signal_group(pgid, "KILL");
}

/// Signals a whole process group through the shell's `kill`, which keeps this crate free of
/// a libc binding.
fn signal_group(pgid: u32, signal: &str) {
    // `kill -- -1` would signal every process we may signal: never let a bogus id through.
    if pgid <= 1 {
        return;
    }
    let status = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!("kill -s {signal} -- -{pgid}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if let Err(e) = status {
        log::warn!("launcher: cannot run kill -s {signal} for group {pgid}: {e}");
    }
}

/// The Mesos command executor's wording for a finished command.
fn describe_exit(status: ExitStatus) -> (&'static str, String) {
    match (status.code(), status.signal()) {
        (Some(0), _) => ("TASK_FINISHED", "Command exited with status 0".to_string()),
        (Some(code), _) => ("TASK_FAILED", format!("Command exited with status {code}")),
        (None, Some(signal)) => {
            let name = match signal {
                1 => "Hangup".to_string(),
                2 => "Interrupt".to_string(),
                6 => "Aborted".to_string(),
                9 => "Killed".to_string(),
                11 => "Segmentation fault".to_string(),
                15 => "Terminated".to_string(),
                n => format!("signal {n}"),
            };
            (
                "TASK_FAILED",
                format!("Command terminated with signal {name}"),
            )
        }
        (None, None) => ("TASK_FAILED", "Command ended without a status".to_string()),
    }
}

/// The ports a Mesos agent offers unless told otherwise (`--resources`' default
/// `ports:[31000-32000]`), from which Marathon takes a task's host ports.
const AGENT_PORTS: (u16, u16) = (31000, 32000);

/// Host ports: declared ports when `requirePorts`, free ones of [`AGENT_PORTS`] otherwise,
/// from a random place in it. Not the kernel's ephemeral ports: a port found free and let go
/// for the task to listen on could meanwhile become the local port of any outgoing
/// connection (a dev cluster of 100 agents makes thousands), and the task would fail to
/// listen. The listeners are held until all ports are chosen, and the declared ports are
/// passed over, so that one task never gets a port twice.
fn host_ports(def: &AppDef) -> io::Result<Vec<u16>> {
    use std::hash::{BuildHasher, Hasher};
    let declared_port = |pd: &PortDef| (def.require_ports && pd.port != 0).then_some(pd.port);
    let declared: Vec<u16> = def
        .port_definitions
        .iter()
        .filter_map(declared_port)
        .collect();
    let mut held = Vec::new();
    let mut ports = Vec::with_capacity(def.port_definitions.len());
    let (low, high) = AGENT_PORTS;
    let span = u64::from(high - low) + 1;
    let mut next = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    for pd in &def.port_definitions {
        if let Some(port) = declared_port(pd) {
            ports.push(port);
            continue;
        }
        let free = (0..span).find_map(|_| {
            let port = low + (next % span) as u16;
            next = next.wrapping_add(1);
            if declared.contains(&port) {
                return None;
            }
            TcpListener::bind(("127.0.0.1", port))
                .ok()
                .map(|l| (port, l))
        });
        let Some((port, listener)) = free else {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("no free port in {low}-{high}"),
            ));
        };
        ports.push(port);
        held.push(listener);
    }
    Ok(ports)
}

/// The environment Marathon and Mesos give a task; the app's `env` wins over all of it.
fn task_env(
    def: &AppDef,
    settings: &Settings,
    task_id: &str,
    sandbox: &Path,
    host_ports: &[u16],
) -> Vec<(String, String)> {
    let sandbox = sandbox.display().to_string();
    let mut env: Vec<(String, String)> = vec![
        ("MESOS_SANDBOX".into(), sandbox.clone()),
        ("MESOS_DIRECTORY".into(), sandbox),
        ("MESOS_TASK_ID".into(), task_id.into()),
        ("MARATHON_APP_ID".into(), def.id.clone()),
        ("MARATHON_APP_VERSION".into(), def.version.clone()),
        (
            "MARATHON_APP_RESOURCE_CPUS".into(),
            format!("{:?}", def.cpus),
        ),
        ("MARATHON_APP_RESOURCE_MEM".into(), format!("{:?}", def.mem)),
        (
            "MARATHON_APP_RESOURCE_DISK".into(),
            format!("{:?}", def.disk),
        ),
        ("MARATHON_APP_RESOURCE_GPUS".into(), def.gpus.to_string()),
    ];
    let mut label_names = Vec::new();
    for (key, value) in &def.labels {
        let name: String = key
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c.to_ascii_uppercase()
                } else {
                    '_'
                }
            })
            .collect();
        env.push((format!("MARATHON_APP_LABEL_{name}"), value.clone()));
        label_names.push(name);
    }
    env.push(("MARATHON_APP_LABELS".into(), label_names.join(" ")));
    if !host_ports.is_empty() {
        for (i, (pd, hp)) in def.port_definitions.iter().zip(host_ports).enumerate() {
            env.push((format!("PORT{i}"), hp.to_string()));
            let declared = if pd.port == 0 { *hp } else { pd.port };
            env.push((format!("PORT_{declared}"), hp.to_string()));
            if let Some(name) = &pd.name {
                env.push((
                    format!("PORT_{}", name.to_ascii_uppercase()),
                    hp.to_string(),
                ));
            }
        }
        env.push(("PORT".into(), host_ports[0].to_string()));
        let all: Vec<String> = host_ports.iter().map(u16::to_string).collect();
        env.push(("PORTS".into(), all.join(",")));
    }
    env.push(("HOST".into(), settings.host.clone()));
    for (key, value) in &def.env {
        env.push((key.clone(), value.clone()));
    }
    env
}

// ---------------------------------------------------------------------------------------------
// Fetcher (the Mesos fetcher's observable behaviour for plain URIs)
// ---------------------------------------------------------------------------------------------

fn fetch_all(artifacts: &[Artifact], sandbox: &Path, timeout: Duration) -> Result<(), String> {
    fs::create_dir_all(sandbox)
        .map_err(|e| format!("cannot create sandbox {}: {e}", sandbox.display()))?;
    let agent = ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(timeout))
            .build(),
    );
    for artifact in artifacts {
        fetch_one(&agent, artifact, sandbox)
            .map_err(|e| format!("Failed to fetch '{}': {e}", artifact.uri))?;
    }
    Ok(())
}

fn fetch_one(agent: &ureq::Agent, artifact: &Artifact, sandbox: &Path) -> Result<(), String> {
    let uri = artifact.uri.as_str();
    let name = match &artifact.dest_path {
        Some(dest) => dest.clone(),
        None => uri_basename(uri).ok_or("the URI names no file")?,
    };
    let relative = Path::new(&name);
    if relative.is_absolute()
        || relative
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!("destination {name:?} leaves the sandbox"));
    }
    let target = sandbox.join(relative);
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    if uri.starts_with("http://") || uri.starts_with("https://") {
        let response = agent.get(uri).call().map_err(|e| e.to_string())?;
        crate::fetched::write_from(&mut response.into_body().into_reader(), &target)?;
    } else {
        let local = uri.strip_prefix("file://").unwrap_or(uri);
        if !local.starts_with('/') {
            return Err("unsupported URI scheme (http, https, file and absolute paths are)".into());
        }
        crate::fetched::copy_from(Path::new(local), &target)?;
    }
    if artifact.executable {
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755))
            .map_err(|e| format!("cannot make {} executable: {e}", target.display()))?;
    } else if artifact.extract && is_archive(&name) {
        extract(&target, sandbox)?;
    }
    if artifact.cache {
        log::debug!("launcher: fetch cache not emulated for {uri}");
    }
    Ok(())
}

/// Last path segment of a URI, without query or fragment.
fn uri_basename(uri: &str) -> Option<String> {
    let without_query = uri.split(['?', '#']).next().unwrap_or(uri);
    let path = match without_query.find("://") {
        Some(i) => {
            let after = &without_query[i + 3..];
            after.find('/').map(|j| &after[j..]).unwrap_or("")
        }
        None => without_query,
    };
    path.rsplit('/')
        .next()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn extract(archive: &Path, sandbox: &Path) -> Result<(), String> {
    let name = archive.display().to_string();
    let tar_like = [
        ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz",
    ];
    let mut command = if tar_like.iter().any(|ext| name.ends_with(ext)) {
        let mut c = Command::new("tar");
        c.arg("-C").arg(sandbox).arg("-xf").arg(archive);
        c
    } else if name.ends_with(".zip") {
        let mut c = Command::new("unzip");
        c.arg("-o").arg("-d").arg(sandbox).arg(archive);
        c
    } else {
        let mut c = Command::new("gzip");
        c.arg("-d").arg("-f").arg(archive);
        c
    };
    let output = command
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run the extractor for {name}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "cannot extract {name}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Small utilities
// ---------------------------------------------------------------------------------------------

/// A random (version 4) UUID, from the kernel's generator when it is readable.
fn uuid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut bytes = [0u8; 16];
    let from_kernel = File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .is_ok();
    if !from_kernel {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mut x = (nanos as u64) ^ COUNTER.fetch_add(1, Ordering::Relaxed).rotate_left(32);
        for chunk in bytes.chunks_mut(8) {
            // splitmix64 step: spreads the seed over the bytes.
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
        }
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// `2024-05-01T12:00:00.123Z`, the form Marathon gives versions and task times.
fn iso_timestamp(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        since.subsec_millis()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_iso8601_with_millis() {
        let t = UNIX_EPOCH + Duration::from_millis(1_709_210_096_007);
        assert_eq!(iso_timestamp(t), "2024-02-29T12:34:56.007Z");
        assert_eq!(iso_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn ids_are_canonicalised_and_checked() {
        assert_eq!(canonical_id("storage-scheduler"), "/storage-scheduler");
        assert_eq!(canonical_id("/a//b/../c/"), "/a/c");
        assert!(is_path_id("storage-scheduler"));
        assert!(is_path_id("/prod/db.v2/x-1"));
        assert!(!is_path_id("Storage"));
        assert!(!is_path_id("-dash"));
        assert!(!is_path_id("dash-/x"));
        assert!(!is_path_id("a b"));
        assert!(!is_path_id("a/./b"));
    }

    /// App `x` running `true`, with the rest of `raw`, validated.
    fn test_app(raw: RawApp) -> AppDef {
        let raw = RawApp {
            id: "x".into(),
            cmd: Some("true".into()),
            ..raw
        };
        validate_app(raw, "v").expect("valid")
    }

    #[test]
    fn backoff_grows_by_the_factor_and_is_capped() {
        let def = test_app(RawApp {
            backoff_seconds: Some(2),
            backoff_factor: Some(2.0),
            max_launch_delay_seconds: Some(5),
            ..RawApp::default()
        });
        let mut b = Backoff::new(&def);
        let t0 = Instant::now();
        assert_eq!(b.wait(t0), Duration::ZERO);
        b.failed(t0);
        assert_eq!(b.wait(t0), Duration::from_secs(2));
        b.failed(t0);
        assert_eq!(b.wait(t0), Duration::from_secs(4));
        b.failed(t0);
        assert_eq!(b.wait(t0), Duration::from_secs(5));
        // A task that outlives the cap makes the next failure start from backoffSeconds again.
        b.launched(t0);
        b.failed(t0 + Duration::from_secs(6));
        assert_eq!(b.wait(t0 + Duration::from_secs(6)), Duration::from_secs(2));
    }

    /// Host ports come from the agents' port range, never from the kernel's ephemeral
    /// ports, which outgoing connections take their local ports from.
    #[test]
    fn host_ports_are_the_agents_not_ephemeral_ones() {
        let def = test_app(RawApp {
            ports: Some(vec![0, 0, 0]),
            ..RawApp::default()
        });
        let range = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
        let ephemeral: Vec<u16> = range
            .split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect();
        for _ in 0..20 {
            let ports = host_ports(&def).expect("ports");
            assert_eq!(ports.len(), 3);
            for p in &ports {
                assert!(
                    (AGENT_PORTS.0..=AGENT_PORTS.1).contains(p),
                    "{p} outside {AGENT_PORTS:?}"
                );
                assert!(
                    !(ephemeral[0]..=ephemeral[1]).contains(p),
                    "{p} is ephemeral"
                );
            }
            assert!(
                ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2],
                "{ports:?}"
            );
        }
    }

    /// A port the app declares (`requirePorts`) is never also given to one of its other
    /// ports: nine in ten of the range are declared here, and every choice is of the rest.
    #[test]
    fn a_declared_port_is_not_chosen_again() {
        let (low, high) = AGENT_PORTS;
        let (left, mut declared): (Vec<u16>, Vec<u16>) = (low..=high).partition(|p| p % 10 == 0);
        declared.push(0);
        let def = test_app(RawApp {
            ports: Some(declared),
            require_ports: true,
            ..RawApp::default()
        });
        for _ in 0..20 {
            let ports = host_ports(&def).expect("ports");
            let chosen = ports.last().copied().unwrap_or_default();
            assert!(left.contains(&chosen), "{chosen} is declared");
        }
    }

    #[test]
    fn uri_rules() {
        assert!(is_uri_syntax("http://127.0.0.1:8000/storage-scheduler"));
        assert!(is_uri_syntax("relative/file"));
        assert!(!is_uri_syntax("http://host/a b"));
        assert!(!is_uri_syntax("http://host/%zz"));
        assert!(!is_uri_syntax("1http://x"));
        assert_eq!(
            uri_basename("http://h:1/a/storage-executor?x=1").as_deref(),
            Some("storage-executor")
        );
        assert_eq!(uri_basename("http://h:1/"), None);
        assert_eq!(uri_basename("http://h:1"), None);
        assert!(is_archive("http://h/x.tar.gz"));
        assert!(!is_archive("http://h/storage-scheduler"));
    }

    #[test]
    fn uuids_have_the_v4_shape() {
        let a = uuid();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert_ne!(a, uuid());
    }
}
