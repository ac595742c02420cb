//! The Marathon-compatible launcher over raw HTTP: the deployment-spec definition is fetched
//! and run, duplicate and invalid definitions get Marathon's answers, tasks are relaunched
//! after they end and killed when their app is deleted or the launcher shuts down.

use std::collections::BTreeMap;
use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use devcluster::launcher::{self, LauncherConfig, LauncherHandle};
use serde_json::{json, Value};

const DEADLINE: Duration = Duration::from_secs(30);

const SPEC_CMD: &str = "chmod u+x storage-scheduler && ./storage-scheduler -loglevel=debug \
    -rest.port=$PORT -uri=127.0.0.1:5050 -storage.password=secret \
    -storage.protectiondomain=pd1 -storage.storagepool=sp1 \
    -storage.preconfig.primary=127.0.0.11 -storage.preconfig.secondary=127.0.0.12 \
    -storage.preconfig.tiebreaker=127.0.0.13 -storage.preconfig.gateway=127.0.0.14";

// ----- helpers ---------------------------------------------------------------------------------

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "devcluster-launcher-test-{}-{name}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A loopback HTTP server handing out fixed files, standing in for a release location.
struct FileServer {
    addr: SocketAddr,
    server: Arc<tiny_http::Server>,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FileServer {
    fn new(files: Vec<(&str, Vec<u8>)>) -> FileServer {
        let files: BTreeMap<String, Vec<u8>> = files
            .into_iter()
            .map(|(name, data)| (format!("/{name}"), data))
            .collect();
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").expect("file server"));
        let addr = server.server_addr().to_ip().expect("ip address");
        let stopping = Arc::new(AtomicBool::new(false));
        let (srv, stop) = (Arc::clone(&server), Arc::clone(&stopping));
        let thread = thread::spawn(move || loop {
            match srv.recv() {
                Ok(request) => {
                    let response = match files.get(request.url()) {
                        Some(data) => tiny_http::Response::from_data(data.clone()),
                        None => tiny_http::Response::from_data(b"no such file".to_vec())
                            .with_status_code(404),
                    };
                    let _ = request.respond(response);
                }
                Err(_) if stop.load(Ordering::SeqCst) => return,
                Err(_) => {}
            }
        });
        FileServer {
            addr,
            server,
            stopping,
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }
}

/// One raw HTTP/1.1 exchange, so that status lines and headers are seen exactly as sent.
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: &str,
) -> Resp {
    let mut stream = TcpStream::connect(addr).expect("connect to launcher");
    stream
        .set_read_timeout(Some(DEADLINE))
        .expect("read timeout");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(ct) = content_type {
        request.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("send request");
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).expect("read response");
    let text = String::from_utf8(raw).expect("UTF-8 response");
    let (head, body) = text.split_once("\r\n\r\n").expect("response head");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Resp {
        status,
        headers,
        body: body.to_string(),
    }
}

fn post_app(addr: SocketAddr, definition: &Value) -> Resp {
    http(
        addr,
        "POST",
        "/v2/apps",
        Some("application/json"),
        &definition.to_string(),
    )
}

/// Polls `probe` until it yields a value; panics with `what` after the deadline.
fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(20));
    }
}

/// The test double of the scheduler binary: records each start (arguments, environment, pid)
/// under `out`, exits with status 3 for its first `failing_starts` starts, then stays up.
fn scheduler_script(out: &Path, failing_starts: u32, prelude: &str) -> Vec<u8> {
    format!(
        "#!/bin/sh\n\
         {prelude}\n\
         out='{out}'\n\
         n=$(( $(cat \"$out/starts\" 2>/dev/null || echo 0) + 1 ))\n\
         echo \"$n\" > \"$out/starts\"\n\
         {{ echo \"pid=$$\"; echo \"args=$*\"; env; }} > \"$out/run.$n.tmp\"\n\
         mv \"$out/run.$n.tmp\" \"$out/run.$n\"\n\
         echo \"started $n\"\n\
         if [ \"$n\" -le {failing_starts} ]; then exit 3; fi\n\
         exec sleep 600\n",
        out = out.display()
    )
    .into_bytes()
}

/// Environment and arguments recorded by the script's `n`th start, once it exists.
fn recorded_run(out: &Path, n: u32) -> Option<BTreeMap<String, String>> {
    let text = fs::read_to_string(out.join(format!("run.{n}"))).ok()?;
    Some(
        text.lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn spec_definition(files: &FileServer) -> Value {
    json!({
        "id": "storage-scheduler",
        "uris": [
            format!("{}/storage-scheduler", files.url()),
            format!("{}/storage-executor", files.url()),
        ],
        "cmd": SPEC_CMD,
        "mem": 32,
        "cpus": 0.2,
        "instances": 1,
        "constraints": [["hostname", "UNIQUE"]],
    })
}

fn launcher(work: &Path) -> LauncherHandle {
    launcher::start(LauncherConfig {
        work_dir: work.to_path_buf(),
        kill_grace_period: Duration::from_secs(2),
        ..LauncherConfig::default()
    })
    .expect("launcher starts")
}

/// True once the process is gone (or only a zombie waiting for its reaper).
fn is_dead(pid: &str) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

fn get_app(addr: SocketAddr, id: &str) -> Resp {
    http(addr, "GET", &format!("/v2/apps/{id}"), None, "")
}

// ----- tests -----------------------------------------------------------------------------------

#[test]
fn deploys_the_spec_definition_and_deletes_it() {
    let tmp = TempDir::new("deploy");
    let out = tmp.path().join("out");
    fs::create_dir_all(&out).expect("out dir");
    let files = FileServer::new(vec![
        ("storage-scheduler", scheduler_script(&out, 0, "")),
        ("storage-executor", b"executor bytes".to_vec()),
    ]);
    let work = tmp.path().join("work");
    let l = launcher(&work);
    let addr = l.addr();

    let created = post_app(addr, &spec_definition(&files));
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(
        created.header("Location"),
        Some(format!("http://{addr}/storage-scheduler").as_str())
    );
    let app = created.json();
    assert_eq!(app["id"], "/storage-scheduler");
    assert_eq!(app["cmd"], SPEC_CMD);
    assert_eq!(app["mem"], 32.0);
    assert_eq!(app["cpus"], 0.2);
    assert_eq!(app["instances"], 1);
    assert_eq!(app["constraints"], json!([["hostname", "UNIQUE"]]));
    assert_eq!(
        app["fetch"][0]["uri"],
        format!("{}/storage-scheduler", files.url())
    );
    assert_eq!(app["fetch"][0]["executable"], false);
    assert_eq!(app["tasks"], json!([]));
    assert_eq!(app["tasksRunning"], 0);
    assert_eq!(app["backoffSeconds"], 1);
    assert_eq!(app["backoffFactor"], 1.15);
    assert_eq!(app["maxLaunchDelaySeconds"], 3600);
    assert!(app["version"].as_str().is_some_and(|v| v.ends_with('Z')));
    let deployment = app["deployments"][0]["id"]
        .as_str()
        .expect("deployment id")
        .to_string();
    assert_eq!(
        created.header("Marathon-Deployment-Id"),
        Some(deployment.as_str())
    );

    // The command ran in a sandbox holding both fetched files, with $PORT expanded.
    let run = wait_for("the scheduler script to start", || recorded_run(&out, 1));
    let port = run.get("PORT").expect("PORT set").clone();
    assert!(port.parse::<u16>().is_ok_and(|p| p > 0), "PORT={port}");
    assert!(
        run["args"].contains(&format!("-rest.port={port} ")),
        "args: {}",
        run["args"]
    );
    assert_eq!(run["MARATHON_APP_ID"], "/storage-scheduler");
    assert_eq!(run["PORT0"], port);
    assert_eq!(run["PORTS"], port);
    assert_eq!(run["HOST"], "127.0.0.1");
    let task_id = run["MESOS_TASK_ID"].clone();
    assert!(task_id.starts_with("storage-scheduler."), "{task_id}");
    let sandbox = PathBuf::from(&run["MESOS_SANDBOX"]);
    assert!(sandbox.starts_with(&work), "{}", sandbox.display());
    assert_eq!(
        fs::read(sandbox.join("storage-executor")).expect("executor fetched"),
        b"executor bytes"
    );
    wait_for("the script's stdout in the sandbox", || {
        fs::read_to_string(sandbox.join("stdout"))
            .ok()
            .filter(|s| s.contains("started 1"))
    });

    // The API reports the running task and, once it runs, no deployment.
    let shown = wait_for("tasksRunning 1 without deployments", || {
        let r = get_app(addr, "storage-scheduler");
        assert_eq!(r.status, 200, "{}", r.body);
        let app = r.json()["app"].clone();
        (app["tasksRunning"] == 1 && app["deployments"] == json!([])).then_some(app)
    });
    let task = &shown["tasks"][0];
    assert_eq!(task["id"], task_id.as_str());
    assert_eq!(task["state"], "TASK_RUNNING");
    assert_eq!(task["host"], "127.0.0.1");
    assert_eq!(task["ports"][0].to_string(), port);
    assert!(task["startedAt"].is_string());
    let listed = http(addr, "GET", "/v2/apps", None, "");
    assert_eq!(listed.status, 200);
    assert_eq!(listed.json()["apps"][0]["id"], "/storage-scheduler");

    // The same id again conflicts, with Marathon's message.
    let again = post_app(addr, &spec_definition(&files));
    assert_eq!(again.status, 409);
    assert_eq!(
        again.json(),
        json!({ "message": "An app with id [/storage-scheduler] already exists." })
    );

    let deleted = http(addr, "DELETE", "/v2/apps/storage-scheduler", None, "");
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let body = deleted.json();
    assert!(body["version"].is_string());
    let delete_deployment = body["deploymentId"].as_str().expect("deploymentId");
    assert_ne!(delete_deployment, deployment);
    let gone = get_app(addr, "storage-scheduler");
    assert_eq!(gone.status, 404);
    assert_eq!(
        gone.json(),
        json!({ "message": "App '/storage-scheduler' does not exist" })
    );
    let pid = run["pid"].clone();
    wait_for("the task process to be killed", || {
        is_dead(&pid).then_some(())
    });
    assert_eq!(
        http(addr, "DELETE", "/v2/apps/storage-scheduler", None, "").status,
        404
    );
    l.shutdown();
}

#[test]
fn relaunches_a_task_that_exits_after_the_backoff() {
    let tmp = TempDir::new("relaunch");
    let out = tmp.path().join("out");
    fs::create_dir_all(&out).expect("out dir");
    let files = FileServer::new(vec![
        ("storage-scheduler", scheduler_script(&out, 1, "")),
        ("storage-executor", b"x".to_vec()),
    ]);
    let l = launcher(&tmp.path().join("work"));
    let addr = l.addr();
    assert_eq!(post_app(addr, &spec_definition(&files)).status, 201);

    let first = wait_for("the first start", || recorded_run(&out, 1));
    let second = wait_for("the relaunch", || recorded_run(&out, 2));
    assert_ne!(first["MESOS_TASK_ID"], second["MESOS_TASK_ID"]);
    assert_eq!(second["MARATHON_APP_ID"], "/storage-scheduler");
    // Relaunched no earlier than backoffSeconds (1) after the failure.
    let written = |n: u32| {
        fs::metadata(out.join(format!("run.{n}")))
            .and_then(|m| m.modified())
            .expect("mtime")
    };
    let gap = written(2).duration_since(written(1)).unwrap_or_default();
    assert!(
        gap >= Duration::from_millis(900),
        "relaunched after {gap:?}"
    );

    let app = wait_for("the relaunched task running", || {
        let app = get_app(addr, "storage-scheduler").json()["app"].clone();
        (app["tasks"][0]["id"] == second["MESOS_TASK_ID"].as_str()
            && app["tasks"][0]["state"] == "TASK_RUNNING")
            .then_some(app)
    });
    let failure = &app["lastTaskFailure"];
    assert_eq!(failure["state"], "TASK_FAILED");
    assert_eq!(failure["message"], "Command exited with status 3");
    assert_eq!(failure["taskId"], first["MESOS_TASK_ID"].as_str());
    assert_eq!(failure["appId"], "/storage-scheduler");
    l.shutdown();
}

#[test]
fn a_fetch_failure_fails_the_task_and_is_retried() {
    let tmp = TempDir::new("fetchfail");
    let files = FileServer::new(vec![("storage-executor", b"x".to_vec())]);
    let l = launcher(&tmp.path().join("work"));
    let addr = l.addr();
    // storage-scheduler is missing on the file server: the fetch gets a 404.
    assert_eq!(post_app(addr, &spec_definition(&files)).status, 201);

    let first = wait_for("a failed task", || {
        let app = get_app(addr, "storage-scheduler").json()["app"].clone();
        app["lastTaskFailure"]["taskId"]
            .as_str()
            .map(str::to_string)
    });
    let app = get_app(addr, "storage-scheduler").json()["app"].clone();
    assert_eq!(app["lastTaskFailure"]["state"], "TASK_FAILED");
    let message = app["lastTaskFailure"]["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with(&format!(
            "Failed to fetch '{}/storage-scheduler'",
            files.url()
        )),
        "{message}"
    );
    assert_eq!(app["tasksRunning"], 0);
    let second = wait_for("a second failed task", || {
        let app = get_app(addr, "storage-scheduler").json()["app"].clone();
        app["lastTaskFailure"]["taskId"]
            .as_str()
            .filter(|id| *id != first)
            .map(str::to_string)
    });
    assert!(second.starts_with("storage-scheduler."));
    l.shutdown();
}

#[test]
fn shutdown_escalates_to_sigkill_for_a_task_ignoring_sigterm() {
    let tmp = TempDir::new("sigkill");
    let out = tmp.path().join("out");
    fs::create_dir_all(&out).expect("out dir");
    let files = FileServer::new(vec![
        (
            "storage-scheduler",
            scheduler_script(&out, 0, "trap '' TERM"),
        ),
        ("storage-executor", b"x".to_vec()),
    ]);
    let l = launcher(&tmp.path().join("work"));
    let mut definition = spec_definition(&files);
    definition["taskKillGracePeriodSeconds"] = json!(1);
    assert_eq!(post_app(l.addr(), &definition).status, 201);
    let run = wait_for("the script to start", || recorded_run(&out, 1));
    assert!(!is_dead(&run["pid"]));
    l.shutdown();
    wait_for("the TERM-ignoring task to be killed", || {
        is_dead(&run["pid"]).then_some(())
    });
}

#[test]
fn rejects_invalid_definitions_with_marathons_details() {
    let tmp = TempDir::new("invalid");
    let l = launcher(&tmp.path().join("work"));
    let addr = l.addr();
    let base = json!({
        "id": "storage-scheduler",
        "uris": ["http://127.0.0.1:9/storage-scheduler"],
        "cmd": "true",
        "mem": 32,
        "cpus": 0.2,
        "instances": 1,
        "constraints": [["hostname", "UNIQUE"]],
    });
    let with = |key: &str, value: Value| {
        let mut d = base.clone();
        d[key] = value;
        d
    };
    let without = |key: &str| {
        let mut d = base.clone();
        d.as_object_mut().expect("object").remove(key);
        d
    };
    let shape = "Invalid JSON";
    let rules = "Object is not valid";
    let cases: Vec<(&str, Value, &str, Value)> = vec![
        (
            "cpus is a string",
            with("cpus", json!("x")),
            shape,
            json!([{ "path": "/cpus", "errors": ["error.expected.jsnumber"] }]),
        ),
        (
            "cpus is zero",
            with("cpus", json!(0)),
            shape,
            json!([{ "path": "/cpus", "errors": ["error.min"] }]),
        ),
        (
            "mem is negative",
            with("mem", json!(-1)),
            shape,
            json!([{ "path": "/mem", "errors": ["error.min"] }]),
        ),
        (
            "instances is negative",
            with("instances", json!(-1)),
            shape,
            json!([{ "path": "/instances", "errors": ["error.min"] }]),
        ),
        (
            "instances is fractional",
            with("instances", json!(1.5)),
            shape,
            json!([{ "path": "/instances", "errors": ["error.expected.int"] }]),
        ),
        (
            "id is missing",
            without("id"),
            shape,
            json!([{ "path": "/id", "errors": ["error.path.missing"] }]),
        ),
        (
            "id has capitals",
            with("id", json!("Storage-Scheduler")),
            shape,
            json!([{ "path": "/id", "errors": ["error.pattern"] }]),
        ),
        (
            "id is a number",
            with("id", json!(7)),
            shape,
            json!([{ "path": "/id", "errors": ["error.expected.jsstring"] }]),
        ),
        (
            "uris is a string",
            with("uris", json!("http://127.0.0.1:9/x")),
            shape,
            json!([{ "path": "/uris", "errors": ["error.expected.jsarray"] }]),
        ),
        (
            "a uri is not a string",
            with("uris", json!(["http://127.0.0.1:9/x", 5])),
            shape,
            json!([{ "path": "/uris(1)", "errors": ["error.expected.jsstring"] }]),
        ),
        (
            "cmd is not a string",
            with("cmd", json!(["true"])),
            shape,
            json!([{ "path": "/cmd", "errors": ["error.expected.jsstring"] }]),
        ),
        (
            "a constraint has one element",
            with("constraints", json!([["hostname"]])),
            shape,
            json!([{ "path": "/constraints(0)", "errors": ["error.minLength"] }]),
        ),
        (
            "a constraint element is a number",
            with("constraints", json!([["hostname", 5]])),
            shape,
            json!([{ "path": "/constraints(0)(1)", "errors": ["error.expected.jsstring"] }]),
        ),
        (
            "constraints is not an array of arrays",
            with("constraints", json!(["hostname", "UNIQUE"])),
            shape,
            json!([
                { "path": "/constraints(0)", "errors": ["error.expected.jsarray"] },
                { "path": "/constraints(1)", "errors": ["error.expected.jsarray"] },
            ]),
        ),
        (
            "two shape errors at once",
            with("cpus", json!("x"))
                .as_object()
                .map(|o| {
                    let mut o = o.clone();
                    o.insert("instances".into(), json!(-1));
                    Value::Object(o)
                })
                .expect("object"),
            shape,
            json!([
                { "path": "/cpus", "errors": ["error.expected.jsnumber"] },
                { "path": "/instances", "errors": ["error.min"] },
            ]),
        ),
        (
            "an unknown constraint operator",
            with("constraints", json!([["hostname", "NEAR"]])),
            rules,
            json!([{
                "path": "/constraints(0)",
                "errors": ["operator must be one of the following UNIQUE, CLUSTER, GROUP_BY, LIKE, MAX_PER, UNLIKE or IS"],
            }]),
        ),
        (
            "UNIQUE with a value",
            with("constraints", json!([["hostname", "UNIQUE", "x"]])),
            rules,
            json!([{ "path": "/constraints(0)", "errors": ["UNIQUE does not accept a value"] }]),
        ),
        (
            "MAX_PER without a number",
            with(
                "constraints",
                json!([["hostname", "UNIQUE"], ["rack", "MAX_PER", "two"]]),
            ),
            rules,
            json!([{ "path": "/constraints(1)", "errors": ["MAX_PER requires an integer value"] }]),
        ),
        (
            "neither cmd nor args",
            without("cmd"),
            rules,
            json!([{
                "path": "/",
                "errors": ["AppDefinition must either contain one of 'cmd' or 'args', and/or a 'container'."],
            }]),
        ),
        (
            "both cmd and args",
            with("args", json!(["true"])),
            rules,
            json!([{
                "path": "/",
                "errors": ["AppDefinition must either contain one of 'cmd' or 'args', and/or a 'container'."],
            }]),
        ),
        (
            "a uri with a space",
            with("uris", json!(["http://127.0.0.1:9/a b"])),
            rules,
            json!([{ "path": "/uris(0)", "errors": ["URI has invalid syntax."] }]),
        ),
        (
            "the root as id",
            with("id", json!("/")),
            rules,
            json!([
                { "path": "/id", "errors": ["Path must contain at least one path element"] },
                { "path": "/", "errors": ["must not be root"] },
            ]),
        ),
    ];
    for (what, definition, message, details) in cases {
        let r = post_app(addr, &definition);
        assert_eq!(r.status, 422, "{what}: {}", r.body);
        assert_eq!(
            r.json(),
            json!({ "message": message, "details": details }),
            "{what}"
        );
    }

    // Bodies that are not JSON at all are 400s.
    let r = http(
        addr,
        "POST",
        "/v2/apps",
        Some("application/json"),
        "{\"id\": \"x\"",
    );
    assert_eq!(r.status, 400);
    let body = r.json();
    assert_eq!(body["message"], "Invalid JSON");
    assert!(
        body["details"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
    let r = http(
        addr,
        "POST",
        "/v2/apps",
        Some("application/json"),
        "not json",
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["message"], "Invalid JSON");
    let r = http(addr, "POST", "/v2/apps", Some("application/json"), "");
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["message"], "Please specify data in JSON format");

    // A form-encoded body (curl -d without -H) is refused before it is read.
    let r = http(
        addr,
        "POST",
        "/v2/apps",
        Some("application/x-www-form-urlencoded"),
        &base.to_string(),
    );
    assert_eq!(r.status, 415);
    assert_eq!(r.json(), json!({ "message": "Unsupported Media Type" }));

    // After all of that the launcher still serves, and stored nothing.
    let listed = http(addr, "GET", "/v2/apps", None, "");
    assert_eq!(listed.status, 200);
    assert_eq!(listed.json(), json!({ "apps": [] }));
    assert_eq!(
        get_app(addr, "nope").json(),
        json!({ "message": "App '/nope' does not exist" })
    );
    l.shutdown();
}

#[test]
fn normalises_ids_and_ignores_unknown_fields() {
    let tmp = TempDir::new("normalise");
    let l = launcher(&tmp.path().join("work"));
    let addr = l.addr();
    // No Content-Type at all is accepted, as Jersey matches it against any consumed type.
    let r = http(
        addr,
        "POST",
        "/v2/apps",
        None,
        &json!({
            "id": "tools/../storage/idle",
            "cmd": "sleep 600",
            "instances": 0,
            "instancez": 3,
        })
        .to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    let app = r.json();
    assert_eq!(app["id"], "/storage/idle");
    assert_eq!(app["instances"], 0);
    assert!(app.get("instancez").is_none());
    // Marathon's defaults for what the definition left out.
    assert_eq!(app["cpus"], 1.0);
    assert_eq!(app["mem"], 128.0);
    assert_eq!(app["portDefinitions"][0]["name"], "default");
    assert!(app["portDefinitions"][0]["port"]
        .as_u64()
        .is_some_and(|p| p >= 10000));
    assert_eq!(
        r.header("Location"),
        Some(format!("http://{addr}/storage/idle").as_str())
    );

    let shown = get_app(addr, "/storage/idle");
    assert_eq!(shown.status, 200);
    let shown = shown.json();
    assert_eq!(shown["app"]["tasks"], json!([]));
    assert_eq!(shown["app"]["deployments"], json!([]));
    assert_eq!(
        http(
            addr,
            "PUT",
            "/v2/apps/storage/idle",
            Some("application/json"),
            "{}"
        )
        .status,
        200,
        "a partial update (Marathon's default) that changes nothing"
    );
    assert_eq!(
        http(addr, "DELETE", "/v2/apps/storage/idle", None, "").status,
        200
    );
    l.shutdown();
}

/// The running task's entry of the launcher's `/monitor/statistics`.
fn task_statistics(addr: SocketAddr, app: &str) -> Option<Value> {
    let all = http(addr, "GET", "/monitor/statistics", None, "").json();
    all.as_array()?
        .iter()
        .find(|e| e["source"] == app)
        .map(|e| e["statistics"].clone())
}

#[test]
fn a_task_over_its_mem_is_killed_as_oom_and_relaunched_after_the_backoff() {
    let tmp = TempDir::new("oom");
    let files = FileServer::new(vec![("x", b"x".to_vec())]);
    let l = launcher(&tmp.path().join("work"));
    let addr = l.addr();
    // `tail` keeps the last 64 MB of an endless stream, against a 16 MB limit, until it is
    // killed: a hog that ends by itself can end between two samples (it did, in CI).
    let app = json!({
        "id": "hog",
        "uris": [format!("{}/x", files.url())],
        "cmd": "cat /dev/zero | tail -c 67108864",
        "mem": 16,
        "cpus": 1,
        "backoffSeconds": 1,
    });
    assert_eq!(post_app(addr, &app).status, 201);
    // How the wait ends: a failure with the memory isolator's words, then a new task.
    let failure = wait_for("the OOM kill", || {
        let app = get_app(addr, "hog").json()["app"].clone();
        Some(app["lastTaskFailure"].clone()).filter(|f| !f.is_null())
    });
    assert_eq!(failure["state"], "TASK_FAILED");
    let message = failure["message"].as_str().unwrap_or("");
    assert!(
        message.starts_with("Memory limit exceeded: Requested: 16MB Maximum Used: "),
        "{message}"
    );
    let killed = failure["taskId"].as_str().unwrap().to_string();
    wait_for("the relaunch", || {
        let app = get_app(addr, "hog").json()["app"].clone();
        let id = app["tasks"][0]["id"].as_str()?.to_string();
        (id != killed).then_some(())
    });
    l.shutdown();
}

#[test]
fn a_task_under_its_mem_runs_and_one_over_its_cpus_is_throttled() {
    let tmp = TempDir::new("cpu");
    let files = FileServer::new(vec![("x", b"x".to_vec())]);
    let l = launcher(&tmp.path().join("work"));
    let addr = l.addr();
    let app = json!({
        "id": "spinner",
        "uris": [format!("{}/x", files.url())],
        "cmd": "while :; do :; done",
        "mem": 16,
        "cpus": 0.01,
    });
    assert_eq!(post_app(addr, &app).status, 201);
    // A 1 ms quota per 100 ms period: any tick of CPU overruns it.
    let stats = wait_for("a throttled period", || {
        task_statistics(addr, "/spinner").filter(|s| s["cpus_nr_throttled"].as_u64() > Some(0))
    });
    assert_eq!(stats["cpus_limit"], 0.01);
    assert_eq!(stats["mem_limit_bytes"], 16 * 1024 * 1024);
    assert!(stats["mem_rss_bytes"].as_u64() > Some(0), "{stats}");
    let app = get_app(addr, "spinner").json()["app"].clone();
    assert!(app["lastTaskFailure"].is_null(), "{app}");
    assert_eq!(
        http(addr, "DELETE", "/v2/apps/spinner", None, "").status,
        200
    );
    l.shutdown();
}

fn put_app(addr: SocketAddr, path: &str, definition: &Value) -> Resp {
    http(
        addr,
        "PUT",
        path,
        Some("application/json"),
        &definition.to_string(),
    )
}

#[test]
fn put_replaces_the_definition_and_restarts_the_app() {
    let tmp = TempDir::new("put");
    let out = tmp.path().join("out");
    fs::create_dir_all(&out).expect("out dir");
    // Each start records whether the previous start's process still ran (a zombie, dead and
    // not yet reaped by whoever inherited it, does not).
    let prelude = format!(
        "prev=$(( $(cat '{out}/starts' 2>/dev/null || echo 0) )); \
         if [ \"$prev\" -gt 0 ]; then old=$(sed -n 's/^pid=//p' '{out}/run.'$prev); \
         st=$(sed 's/.*) //' /proc/$old/stat 2>/dev/null | cut -c1); \
         if [ -n \"$st\" ] && [ \"$st\" != Z ]; then echo yes; else echo no; fi > '{out}/overlap.'$prev; fi",
        out = out.display()
    );
    let files = FileServer::new(vec![
        ("storage-scheduler", scheduler_script(&out, 0, &prelude)),
        ("storage-executor", b"executor bytes".to_vec()),
        ("v2/storage-executor", b"executor bytes, build 2".to_vec()),
    ]);
    let l = launcher(&tmp.path().join("work"));
    let addr = l.addr();
    // Old instances killed before the new start: nothing may run beside them.
    let mut def = spec_definition(&files);
    def["upgradeStrategy"] = json!({ "minimumHealthCapacity": 0, "maximumOverCapacity": 0 });
    assert_eq!(post_app(addr, &def).status, 201);
    let first = wait_for("the first start", || recorded_run(&out, 1));
    let v1 = get_app(addr, "storage-scheduler").json()["app"]["version"].clone();

    // The new definition (a new executor URL, one more flag), without an id: the path names it.
    let mut new = def.clone();
    new.as_object_mut().unwrap().remove("id");
    new["uris"][1] = json!(format!("{}/v2/storage-executor", files.url()));
    new["cmd"] = json!(format!("{SPEC_CMD} -loglevel=info"));
    let put = wait_for("the first deployment to finish", || {
        let r = put_app(addr, "/v2/apps/storage-scheduler", &new);
        (r.status != 409).then_some(r)
    });
    assert_eq!(put.status, 200, "{}", put.body);
    let body = put.json();
    let deployment = body["deploymentId"].as_str().expect("deploymentId");
    assert_eq!(put.header("Marathon-Deployment-Id"), Some(deployment));
    assert!(
        body["version"].is_string() && body["version"] != v1,
        "{body}"
    );
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");

    // The old process stopped before the new one started, with the new command and files.
    let second = wait_for("the second start", || recorded_run(&out, 2));
    assert!(
        second["args"].ends_with("-loglevel=info"),
        "{}",
        second["args"]
    );
    assert!(is_dead(&first["pid"]));
    assert_eq!(
        fs::read_to_string(out.join("overlap.1")).unwrap().trim(),
        "no"
    );
    assert_eq!(
        fs::read(PathBuf::from(&second["MESOS_SANDBOX"]).join("storage-executor")).unwrap(),
        b"executor bytes, build 2"
    );
    let app = wait_for("the update's deployment to finish", || {
        let app = get_app(addr, "storage-scheduler").json()["app"].clone();
        (app["deployments"] == json!([]) && app["tasksRunning"] == 1).then_some(app)
    });
    assert_eq!(app["id"], "/storage-scheduler");
    assert_eq!(app["version"], body["version"]);
    assert!(app["cmd"].as_str().unwrap().ends_with("-loglevel=info"));
    assert_eq!(app["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(
        app["tasks"][0]["id"].as_str(),
        Some(&*second["MESOS_TASK_ID"])
    );

    // With the defaults (keep one running, one over): the new instance starts first, and the
    // old one is killed once it runs.
    new.as_object_mut().unwrap().remove("upgradeStrategy");
    let put = put_app(addr, "/v2/apps/storage-scheduler", &new);
    assert_eq!(put.status, 200, "{}", put.body);
    let third = wait_for("the third start", || recorded_run(&out, 3));
    wait_for("the second process killed", || {
        is_dead(&second["pid"]).then_some(())
    });
    assert!(!is_dead(&third["pid"]));
    l.shutdown();
}

#[test]
fn put_is_refused_during_a_deployment_unless_forced_and_reads_bodies_as_post_does() {
    let tmp = TempDir::new("put-locked");
    let files = FileServer::new(vec![("storage-executor", b"x".to_vec())]);
    let l = launcher(&tmp.path().join("work"));
    let addr = l.addr();
    // Its scheduler cannot be fetched: the task never runs, the deployment never ends.
    let def = spec_definition(&files);
    let created = post_app(addr, &def);
    assert_eq!(created.status, 201, "{}", created.body);
    let deployment = created.json()["deployments"][0]["id"].clone();
    let locked = put_app(addr, "/v2/apps/storage-scheduler", &def);
    assert_eq!(locked.status, 409, "{}", locked.body);
    let doc = locked.json();
    assert_eq!(doc["deployments"], json!([{ "id": deployment }]));
    assert_eq!(
        doc["message"],
        format!(
            "App is locked by one or more deployments. Override with the option '?force=true'. View details at '/v2/deployments/{}'.",
            deployment.as_str().unwrap()
        )
    );
    let forced = put_app(addr, "/v2/apps/storage-scheduler?force=true", &def);
    assert_eq!(forced.status, 200, "{}", forced.body);
    assert_ne!(forced.json()["deploymentId"], deployment);

    // Bodies are read as POST reads them.
    let bad = put_app(
        addr,
        "/v2/apps/storage-scheduler?force=true",
        &json!({"cpus": -1}),
    );
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert_eq!(bad.json()["message"], "Invalid JSON");
    assert_eq!(bad.json()["details"][0]["path"], "/cpus");
    let broken = http(
        addr,
        "PUT",
        "/v2/apps/storage-scheduler",
        Some("application/json"),
        "{",
    );
    assert_eq!(broken.status, 400, "{}", broken.body);
    let wrong_type = http(
        addr,
        "PUT",
        "/v2/apps/storage-scheduler",
        Some("text/plain"),
        "{}",
    );
    assert_eq!(wrong_type.status, 415);

    // A partial update (the default) keeps what the body leaves out; without it, the body
    // alone must be a whole definition.
    let partial = put_app(
        addr,
        "/v2/apps/storage-scheduler?force=true",
        &json!({"mem": 64}),
    );
    assert_eq!(partial.status, 200, "{}", partial.body);
    let app = get_app(addr, "storage-scheduler").json()["app"].clone();
    assert_eq!(
        (app["mem"].clone(), app["cmd"].clone()),
        (json!(64.0), json!(SPEC_CMD))
    );
    let whole = put_app(
        addr,
        "/v2/apps/storage-scheduler?force=true&partialUpdate=false",
        &json!({"mem": 64}),
    );
    assert_eq!(whole.status, 422, "{}", whole.body);
    assert_eq!(whole.json()["message"], "Object is not valid");

    // An unknown id is created, as Marathon's PUT does.
    let made = put_app(addr, "/v2/apps/other", &def);
    assert_eq!(made.status, 201, "{}", made.body);
    assert!(made.json()["deploymentId"].is_string());
    assert_eq!(get_app(addr, "other").json()["app"]["id"], "/other");
    l.shutdown();
}
