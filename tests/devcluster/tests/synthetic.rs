//! Synthetic agents: executors emulated inside the devcluster, driven by a minimal scheduler
//! over raw HTTP. One test plays a scheduler against a couple of thousand of them; the others
//! check that emulated executors answer kills, shutdowns, crashes and agent faults the way
//! real ones do.

mod master_support;

use devcluster::master::{self, MasterConfig};
use master_support::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};
use storage_framework::contract::health::HostReport;
use storage_framework::mesos::scheduler::{self, call, event};
use storage_framework::mesos::types::*;
use storage_framework::mesos::Encoding;

/// Large enough that per-agent work in the master's hot paths shows, small enough for a debug
/// build to stay within seconds; 10,000 is the bench's business.
const MANY: usize = 2000;

/// One keep-alive connection to the master, so that thousands of calls do not cost thousands
/// of connections.
struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Conn {
    fn open(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).expect("connect to the master");
        s.set_read_timeout(Some(WAIT)).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
        }
    }

    /// POSTs a scheduler call on this connection and returns status and body.
    fn call(&mut self, sched: &Sched, mut c: scheduler::Call) -> (u16, String) {
        if c.framework_id.is_none() {
            c.framework_id = Some(sched.fid());
        }
        let body = Encoding::Protobuf.encode(&c);
        let head = format!(
            "POST /api/v1/scheduler HTTP/1.1\r\nHost: {}\r\nContent-Type: {}\r\n\
             Mesos-Stream-Id: {}\r\nContent-Length: {}\r\n\r\n",
            sched.master,
            Encoding::Protobuf.content_type(),
            sched.stream_id,
            body.len()
        );
        self.writer.write_all(head.as_bytes()).unwrap();
        self.writer.write_all(&body).unwrap();
        self.writer.flush().unwrap();
        let mut line = String::new();
        self.reader.read_line(&mut line).unwrap();
        let status: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {line:?}"));
        let mut len = 0;
        loop {
            let mut h = String::new();
            self.reader.read_line(&mut h).unwrap();
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((n, v)) = h.split_once(':') {
                if n.eq_ignore_ascii_case("Content-Length") {
                    len = v.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; len];
        self.reader.read_exact(&mut body).unwrap();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    fn call_ok(&mut self, sched: &Sched, c: scheduler::Call) {
        let (status, body) = self.call(sched, c);
        assert_eq!(status, 202, "{body}");
    }
}

fn acknowledge_call(status: &TaskStatus) -> scheduler::Call {
    scheduler::Call {
        r#type: Some(call::Type::Acknowledge),
        acknowledge: Some(call::Acknowledge {
            agent_id: status.agent_id.clone().expect("agent id"),
            task_id: status.task_id.clone(),
            uuid: status.uuid.clone().expect("uuid"),
        }),
        ..Default::default()
    }
}

/// The ExecutorInfo a storage scheduler would send: a command that would fetch and run the
/// executor, and the scheduler's address and secret in its environment.
fn storage_executor(id: &str) -> ExecutorInfo {
    let var = |name: &str, value: &str| environment::Variable {
        name: text(name),
        value: Some(text(value)),
        ..Default::default()
    };
    ExecutorInfo {
        executor_id: ExecutorID { value: text(id) },
        name: Some(text("storage-executor")),
        resources: vec![scalar("cpus", 0.1), scalar("mem", 64.0)],
        command: Some(CommandInfo {
            value: Some(text("./storage-executor")),
            environment: Some(Environment {
                variables: vec![
                    var("STORAGE_SCHEDULER_URL", "http://127.0.0.1:1"),
                    var("STORAGE_EXECUTOR_SECRET", "not-a-real-secret"),
                ],
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn offers_by_host(offers: &[Offer]) -> BTreeMap<String, Offer> {
    offers
        .iter()
        .map(|o| (o.hostname.to_string(), o.clone()))
        .collect()
}

/// Launches one storage executor task on each offer and acknowledges its TASK_RUNNING.
/// Returns the task ids by hostname.
fn launch_everywhere(s: &Sched, offers: &[Offer]) -> BTreeMap<String, String> {
    let mut tasks = BTreeMap::new();
    for o in offers {
        let host = o.hostname.to_string();
        let task = format!("storage.{host}");
        s.accept(
            &[o],
            vec![executor_task(
                &task,
                o,
                storage_executor(&format!("storage-executor.{host}")),
            )],
        );
        let st = s.update_for(&task, TaskState::Running);
        s.acknowledge(&st);
        tasks.insert(host, task);
    }
    tasks
}

fn agent_json<'a>(snapshot: &'a serde_json::Value, host: &str) -> &'a serde_json::Value {
    snapshot["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["hostname"] == host)
        .unwrap_or_else(|| panic!("no agent {host} in {snapshot}"))
}

#[test]
fn thousands_of_synthetic_agents_run_an_executor_each() {
    let c = cluster(0, |cfg| {
        cfg.synthetic_agents = MANY;
        // Retries would only add noise: every update is acknowledged.
        cfg.status_update_retry = Duration::from_secs(60);
    });
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("many", false));

    // The first allocation offers every agent, in one event.
    let offers = s.offers();
    assert_eq!(offers.len(), MANY, "one OFFERS event for the whole cluster");
    let hosts: BTreeSet<String> = offers.iter().map(|o| o.hostname.to_string()).collect();
    assert_eq!(hosts.len(), MANY);
    assert!(hosts.contains("synthetic-1") && hosts.contains(&format!("synthetic-{MANY}")));

    let mut conn = Conn::open(c.addr());
    let mut expected = BTreeMap::new();
    for (i, o) in offers.iter().enumerate() {
        let task = format!("task-{i}");
        expected.insert(task.clone(), o.agent_id.value.to_string());
        let executor = storage_executor(&format!("executor-{i}"));
        conn.call_ok(
            &s,
            accept_call(&[o], vec![executor_task(&task, o, executor)]),
        );
    }

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut running = BTreeSet::new();
    while running.len() < MANY {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(ev) = s.next_event(left) else {
            panic!(
                "only {} of {MANY} tasks reached TASK_RUNNING",
                running.len()
            );
        };
        let Some(u) = ev.update else { continue };
        let st = u.status;
        let task = st.task_id.value.to_string();
        assert_eq!(st.state, TaskState::Running, "{st:?}");
        assert_eq!(st.source, Some(task_status::Source::Executor), "{st:?}");
        assert!(st.uuid.is_some(), "an executor's update has a uuid: {st:?}");
        assert_eq!(
            st.agent_id.as_ref().map(|a| a.value.to_string()),
            expected.get(&task).cloned(),
            "{st:?}"
        );
        conn.call_ok(&s, acknowledge_call(&st));
        assert!(running.insert(task.clone()), "{task} ran twice");
    }

    let snap = c.snapshot().unwrap();
    let agents = snap["agents"].as_array().unwrap();
    assert_eq!(agents.len(), MANY);
    for a in agents {
        assert_eq!(a["synthetic"], true, "{a}");
        let execs = a["executors"].as_array().unwrap();
        assert_eq!(execs.len(), 1, "{a}");
        assert_eq!(execs[0]["state"], "RUNNING", "{a}");
        assert_eq!(execs[0]["subscribed"], true, "{a}");
        assert_eq!(execs[0]["pid"], serde_json::Value::Null, "{a}");
        assert_eq!(execs[0]["tasks"][0]["state"], "TASK_RUNNING", "{a}");
        assert_eq!(
            a["pending_updates"], 0,
            "every update was acknowledged: {a}"
        );
    }

    let state = get(c.addr(), "/master/state").json();
    assert_eq!(state["activated_slaves"], MANY);
    assert_eq!(state["slaves"].as_array().unwrap().len(), MANY);
    let tasks = state["frameworks"][0]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), MANY);
    assert!(tasks.iter().all(|t| t["state"] == "TASK_RUNNING"));
    assert_eq!(
        state["frameworks"][0]["executors"]
            .as_array()
            .unwrap()
            .len(),
        MANY
    );
}

#[test]
fn synthetic_agents_join_real_ones_with_ids_and_attributes() {
    let c = cluster(1, |cfg| {
        cfg.synthetic_agents = 2;
        cfg.attributes.insert(
            "synthetic-2".into(),
            BTreeMap::from([("storage-persona".to_string(), "primary".to_string())]),
        );
    });
    let agents = c.agents().unwrap();
    let names: Vec<(&str, bool)> = agents
        .iter()
        .map(|a| (a.hostname.as_str(), a.synthetic))
        .collect();
    assert_eq!(
        names,
        [
            ("agent-1", false),
            ("synthetic-1", true),
            ("synthetic-2", true)
        ]
    );
    assert_eq!(agents[2].index, 2);
    assert_eq!(
        agents[2].endpoint.port(),
        0,
        "a synthetic agent serves nothing"
    );
    let ids: BTreeSet<&str> = agents.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(ids.len(), 3);

    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("mixed", false));
    let offers = offers_by_host(&s.offers_from(3));
    let persona = |host: &str| {
        offers[host]
            .attributes
            .iter()
            .find(|a| a.name == "storage-persona")
            .and_then(|a| a.text.as_ref())
            .map(|t| t.value.to_string())
    };
    assert_eq!(persona("synthetic-2").as_deref(), Some("primary"));
    assert_eq!(persona("synthetic-1"), None);
    assert_eq!(offers["synthetic-1"].agent_id.value, agents[1].id);

    let state = get(c.addr(), "/master/state").json();
    let slaves = state["slaves"].as_array().unwrap();
    assert_eq!(slaves.len(), 3);
    let primary = slaves
        .iter()
        .find(|s| s["hostname"] == "synthetic-2")
        .unwrap();
    assert_eq!(primary["attributes"]["storage-persona"], "primary");

    let bad = master::start(MasterConfig {
        agents: 0,
        synthetic_agents: 0,
        ..Default::default()
    });
    assert!(bad.is_err(), "a cluster without agents is refused");
    let bad = master::start(MasterConfig {
        agents: 1,
        synthetic_agents: 1,
        attributes: BTreeMap::from([("synthetic-2".to_string(), BTreeMap::new())]),
        ..Default::default()
    });
    let err = bad.err().expect("attributes for a missing synthetic agent");
    assert!(err.contains("synthetic-2"), "{err}");
}

#[test]
fn emulated_executors_answer_kill_shutdown_and_crash() {
    let c = cluster(0, |cfg| cfg.synthetic_agents = 4);
    let s = Sched::subscribe(
        c.addr(),
        Encoding::Protobuf,
        framework_info("faults", false),
    );
    let offers = offers_by_host(&s.offers_from(4));
    let hosts = ["synthetic-1", "synthetic-2", "synthetic-3"];
    let picked: Vec<Offer> = hosts.iter().map(|h| offers[*h].clone()).collect();
    let tasks = launch_everywhere(&s, &picked);

    // KILL: the task is killed by its executor, which keeps running.
    let killed = &tasks["synthetic-1"];
    s.call_ok(scheduler::Call {
        r#type: Some(call::Type::Kill),
        kill: Some(call::Kill {
            task_id: TaskID {
                value: text(killed),
            },
            agent_id: Some(offers["synthetic-1"].agent_id.clone()),
            kill_policy: None,
        }),
        ..Default::default()
    });
    let st = s.update_for(killed, TaskState::Killed);
    assert_eq!(st.source, Some(task_status::Source::Executor));
    assert!(st.uuid.is_some());
    s.acknowledge(&st);
    let snap = c.snapshot().unwrap();
    let a1 = agent_json(&snap, "synthetic-1");
    assert_eq!(a1["executors"][0]["state"], "RUNNING", "{a1}");
    assert_eq!(a1["executors"][0]["tasks"], serde_json::json!([]), "{a1}");

    // SHUTDOWN: TASK_KILLED from the executor, then its clean exit as FAILURE.
    let exec2 = "storage-executor.synthetic-2";
    s.call_ok(scheduler::Call {
        r#type: Some(call::Type::Shutdown),
        shutdown: Some(call::Shutdown {
            executor_id: ExecutorID { value: text(exec2) },
            agent_id: offers["synthetic-2"].agent_id.clone(),
        }),
        ..Default::default()
    });
    let st = s.update_for(&tasks["synthetic-2"], TaskState::Killed);
    assert_eq!(st.source, Some(task_status::Source::Executor));
    s.acknowledge(&st);
    let failure = s.wait(event::Type::Failure).failure.unwrap();
    assert_eq!(
        failure.executor_id.map(|e| e.value.to_string()).as_deref(),
        Some(exec2)
    );
    assert_eq!(failure.status, Some(0));
    wait_until("the shut-down executor to be gone", || {
        let snap = c.snapshot().ok()?;
        let execs = agent_json(&snap, "synthetic-2")["executors"].clone();
        (execs == serde_json::json!([])).then_some(())
    });

    // A crash (the control API's kill-executor): the agent fails the task.
    let exec3 = "storage-executor.synthetic-3";
    c.kill_executor(3 - 1, exec3).unwrap();
    let st = s.update_for(&tasks["synthetic-3"], TaskState::Failed);
    assert_eq!(st.source, Some(task_status::Source::Agent));
    assert_eq!(st.reason, Some(task_status::Reason::ExecutorTerminated));
    s.acknowledge(&st);
    let failure = s.wait(event::Type::Failure).failure.unwrap();
    assert_eq!(failure.status, Some(9), "as if SIGKILLed");
    let err = c.kill_executor(3 - 1, exec3).unwrap_err();
    assert!(err.contains(exec3), "{err}");

    // A command task is the agent's own command executor's: RUNNING, then KILLED on KILL.
    let o4 = &offers["synthetic-4"];
    s.accept(&[o4], vec![command_task("cmd", o4, "sleep 1000")]);
    let st = s.update_for("cmd", TaskState::Running);
    s.acknowledge(&st);
    s.call_ok(scheduler::Call {
        r#type: Some(call::Type::Kill),
        kill: Some(call::Kill {
            task_id: TaskID { value: text("cmd") },
            agent_id: None,
            kill_policy: None,
        }),
        ..Default::default()
    });
    let st = s.update_for("cmd", TaskState::Killed);
    assert_eq!(st.source, Some(task_status::Source::Executor));
    s.acknowledge(&st);
    wait_until("the command executor to be gone", || {
        let snap = c.snapshot().ok()?;
        let execs = agent_json(&snap, "synthetic-4")["executors"].clone();
        (execs == serde_json::json!([])).then_some(())
    });

    // TEARDOWN shuts down the executor that is still running (on synthetic-1).
    s.simple(call::Type::Teardown);
    let snap = c.snapshot().unwrap();
    for a in snap["agents"].as_array().unwrap() {
        assert_eq!(a["executors"], serde_json::json!([]), "{a}");
    }
}

#[test]
fn unacknowledged_updates_of_emulated_executors_are_retried() {
    let c = cluster(0, |cfg| {
        cfg.synthetic_agents = 1;
        cfg.status_update_retry = Duration::from_millis(100);
    });
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("retry", false));
    let o = s.offers().remove(0);
    s.accept(&[&o], vec![executor_task("t", &o, storage_executor("e"))]);
    let first = s.update_for("t", TaskState::Running);
    let again = s.update_for("t", TaskState::Running);
    assert_eq!(first.uuid, again.uuid, "a retry repeats the same update");
    let snap = c.snapshot().unwrap();
    assert_eq!(agent_json(&snap, "synthetic-1")["pending_updates"], 1);
    s.acknowledge(&again);
    let snap = c.snapshot().unwrap();
    assert_eq!(agent_json(&snap, "synthetic-1")["pending_updates"], 0);
}

#[test]
fn a_stopped_synthetic_agent_loses_its_executor_and_reports_on_return() {
    let c = cluster(0, |cfg| cfg.synthetic_agents = 2);
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("stop", false));
    let offers = offers_by_host(&s.offers_from(2));
    let o = offers["synthetic-1"].clone();
    let tasks = launch_everywhere(&s, std::slice::from_ref(&o));
    let task = &tasks["synthetic-1"];

    c.stop_agent(0).unwrap();
    let snap = c.snapshot().unwrap();
    let a = agent_json(&snap, "synthetic-1");
    assert_eq!(a["up"], false);
    // The TASK_FAILED waits with the agent until it is back.
    assert_eq!(a["pending_updates"], 1, "{a}");

    c.start_agent(0).unwrap();
    let st = s.update_for(task, TaskState::Failed);
    assert_eq!(st.reason, Some(task_status::Reason::ExecutorTerminated));
    s.acknowledge(&st);
    // Its resources come back in a new offer.
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "no new offer from synthetic-1");
        let ev = s.next_event(WAIT).expect("an event");
        let back = ev
            .offers
            .is_some_and(|o| o.offers.iter().any(|x| x.hostname == "synthetic-1"));
        if back {
            break;
        }
    }
}

#[test]
fn synthetic_agents_with_a_fetcher_download_the_executor_before_it_runs() {
    let binary = vec![7u8; 300_000];
    let files = FileServer::start(vec![("/storage-executor", binary.clone())]);
    let c = cluster(0, |cfg| {
        cfg.synthetic_agents = 2;
        cfg.synthetic_fetchers = 2;
    });
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("fetch", false));
    let offers = offers_by_host(&s.offers_from(2));
    let with_uri = |id: &str, url: String| {
        let mut e = storage_executor(id);
        e.command.as_mut().unwrap().uris = vec![command_info::Uri {
            value: text(&url),
            executable: Some(true),
            cache: Some(false),
            ..Default::default()
        }];
        e
    };

    // Served: RUNNING once the whole binary came over, counted in the snapshot.
    let o1 = &offers["synthetic-1"];
    let good = with_uri("e1", files.url("/storage-executor"));
    s.accept(&[o1], vec![executor_task("t1", o1, good)]);
    let st = s.update_for("t1", TaskState::Running);
    s.acknowledge(&st);
    let snap = c.snapshot().unwrap();
    assert_eq!(
        snap["synthetic_fetches"], 1,
        "{}",
        snap["synthetic_fetches"]
    );
    assert_eq!(snap["synthetic_fetched_bytes"], binary.len() as u64);

    // Not served: the launch fails as a real agent's does, naming the URI.
    let o2 = &offers["synthetic-2"];
    let missing = files.url("/no-such-executor");
    s.accept(
        &[o2],
        vec![executor_task("t2", o2, with_uri("e2", missing.clone()))],
    );
    let st = s.update_for("t2", TaskState::Failed);
    assert_eq!(st.reason, Some(task_status::Reason::ContainerLaunchFailed));
    let message = st.message.map(|m| m.to_string()).unwrap_or_default();
    assert!(
        message.contains(&missing) && message.contains("404"),
        "{message}"
    );
}

/// One request read from `stream`: its path, its Authorization header and its body.
fn read_request(stream: &mut impl Read) -> Option<(String, Option<String>, String)> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split(' ').nth(1)?.to_string();
    let (mut auth, mut length) = (None, 0);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        match name.to_ascii_lowercase().as_str() {
            "authorization" => auth = Some(value.trim().to_string()),
            "content-length" => length = value.trim().parse().ok()?,
            _ => {}
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    Some((path, auth, String::from_utf8(body).ok()?))
}

/// One emulated executor launched on a cluster whose executors report at 100/s (and, with
/// `health`, report host health once their node runs), against a stand-in of the scheduler's
/// executor API over TLS that records each report it is sent; `check` reads them.
fn with_one_reporting_executor(
    health: bool,
    check: impl FnOnce(&crossbeam_channel::Receiver<(String, Option<String>, String)>),
) {
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let pin = storage_framework::tls::Fingerprint::of(made.cert.der());
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(made.key_pair.serialize_der().into());
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![made.cert.der().clone()], key)
        .unwrap();
    let tls = std::sync::Arc::new(tls);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("https://{}", listener.local_addr().unwrap());
    let (tx, reports) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for sock in listener.incoming().flatten() {
            let conn = rustls::ServerConnection::new(tls.clone()).unwrap();
            let mut stream = rustls::StreamOwned::new(conn, sock);
            if let Some(report) = read_request(&mut stream) {
                let _ = tx.send(report);
                let _ = stream.write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n");
                stream.conn.send_close_notify();
                let _ = stream.flush();
            }
        }
    });
    let c = cluster(0, |cfg| {
        cfg.synthetic_agents = 1;
        cfg.synthetic_phase_reports = Some(100.0);
        cfg.synthetic_health_reports = health;
    });
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("phases", false));
    let o = s.offers().remove(0);
    let mut exec = storage_executor("e1");
    let env = exec.command.as_mut().unwrap().environment.as_mut().unwrap();
    env.variables[0].value = Some(text(&url));
    let mut task = executor_task("t1", &o, exec);
    let data = serde_json::json!({"executor_secret": "s3cret", "scheduler_fingerprint": pin});
    task.data = Some(storage_framework::mesos::Bytes(
        data.to_string().into_bytes(),
    ));
    s.accept(&[&o], vec![task]);
    let st = s.update_for("t1", TaskState::Running);
    s.acknowledge(&st);
    check(&reports);
}

/// The phases `reports` brings, up to `running`.
fn phases_to_running(
    reports: &crossbeam_channel::Receiver<(String, Option<String>, String)>,
) -> Vec<String> {
    let mut phases = Vec::new();
    while phases.last().map(String::as_str) != Some("running") {
        let (path, auth, body) = reports.recv_timeout(WAIT).expect("a phase report");
        assert_eq!(path, "/api/v1/executors/e1/phase");
        assert_eq!(auth.as_deref(), Some("Bearer s3cret"));
        let v: serde_json::Value = serde_json::from_str(&body).expect("JSON body");
        phases.push(v["phase"].as_str().expect("phase").to_string());
    }
    phases
}

const WALK: [&str; 6] = [
    "environment",
    "packages",
    "devices",
    "volume-driver",
    "storage-attach",
    "running",
];

#[test]
fn emulated_executors_report_phases_to_running_with_their_secret() {
    with_one_reporting_executor(false, |reports| {
        assert_eq!(phases_to_running(reports), WALK);
    });
}

#[test]
fn emulated_executors_asked_to_report_health_flap_a_host_check_once_running() {
    with_one_reporting_executor(true, |reports| {
        assert_eq!(phases_to_running(reports), WALK);
        let problems: Vec<usize> = (0..4)
            .map(|_| {
                let (path, auth, body) = reports.recv_timeout(WAIT).expect("a health report");
                assert_eq!(path, "/api/v1/executors/e1/health");
                assert_eq!(auth.as_deref(), Some("Bearer s3cret"));
                let r: HostReport = serde_json::from_str(&body).expect("a host report");
                r.problems.len()
            })
            .collect();
        assert_eq!(problems, [1, 0, 1, 0], "a problem found, then cleared");
    });
}
