//! Runs the real `storage-executor` binary against a stand-in agent: a plain TCP server on
//! 127.0.0.1 that speaks just enough HTTP/1.1 for `/api/v1/executor`. The test plays the
//! agent's side of the conversation step by step and checks every call the executor makes.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use storage_framework::mesos::executor::{call, event, Call, Event};
use storage_framework::mesos::proto::Message;
use storage_framework::mesos::recordio;
use storage_framework::mesos::types::{
    environment::Variable, task_status, AgentID, AgentInfo, CommandInfo, ContainerID, Environment,
    ExecutorID, ExecutorInfo, FrameworkID, FrameworkInfo, TaskID, TaskInfo, TaskState, TaskStatus,
};
use storage_framework::mesos::Bytes;

/// Generous: the machine is shared and debug builds are slow; a pass never waits this long.
const DEADLINE: Duration = Duration::from_secs(20);

const FRAMEWORK: &str = "fw-0001";
const EXECUTOR: &str = "storage-executor-agent-1";
const SECRET: &str = "hunter2-secret-value";
const PLAN: &[u8] = br#"{"persona":"data","devices":["/dev/xvdf"]}"#;

/// What the stand-in agent received.
enum Received {
    /// A SUBSCRIBE and the connection to stream events on.
    Subscribe(Call, TcpStream),
    /// Any other call; it has already been answered 202.
    Call(Call),
}

struct FakeAgent {
    addr: SocketAddr,
    rx: Receiver<Received>,
    /// Calls received and never answered (`start_holding_calls`), kept open.
    _held: Arc<Mutex<Vec<TcpStream>>>,
}

impl FakeAgent {
    fn start() -> FakeAgent {
        FakeAgent::serve(false)
    }

    /// An agent that takes every call but SUBSCRIBE and never answers it.
    fn start_holding_calls() -> FakeAgent {
        FakeAgent::serve(true)
    }

    fn serve(hold: bool) -> FakeAgent {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = mpsc::channel();
        let held = Arc::new(Mutex::new(Vec::new()));
        let keep = hold.then(|| Arc::clone(&held));
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let tx = tx.clone();
                let keep = keep.clone();
                thread::spawn(move || serve_connection(conn, tx, keep));
            }
        });
        FakeAgent {
            addr,
            rx,
            _held: held,
        }
    }

    fn next(&self, what: &str, exec: &Executor) -> Received {
        match self.rx.recv_timeout(DEADLINE) {
            Ok(r) => r,
            Err(e) => panic!("waiting for {what}: {e}\nexecutor log:\n{}", exec.log()),
        }
    }

    fn expect_subscribe(&self, exec: &Executor) -> (Call, Stream) {
        match self.next("SUBSCRIBE", exec) {
            Received::Subscribe(call, conn) => (call, Stream(conn)),
            Received::Call(call) => panic!(
                "expected SUBSCRIBE, got {:?}\nexecutor log:\n{}",
                call.r#type,
                exec.log()
            ),
        }
    }

    fn expect_update(&self, exec: &Executor) -> TaskStatus {
        match self.next("UPDATE", exec) {
            Received::Call(call) => {
                assert_eq!(call.r#type, Some(call::Type::Update), "{}", exec.log());
                assert_eq!(call.executor_id.value, EXECUTOR);
                assert_eq!(call.framework_id.value, FRAMEWORK);
                let status = call.update.expect("UPDATE carries `update`").status;
                check_status(&status);
                status
            }
            Received::Subscribe(..) => panic!("expected UPDATE, got SUBSCRIBE\n{}", exec.log()),
        }
    }
}

/// Fields every update from this executor must carry, whatever the task and state.
fn check_status(status: &TaskStatus) {
    assert_eq!(status.source, Some(task_status::Source::Executor));
    assert_eq!(
        status.executor_id.as_ref().map(|e| e.value.as_str()),
        Some(EXECUTOR)
    );
    let uuid = &status.uuid.as_ref().expect("every update has a uuid").0;
    assert_eq!(uuid.len(), 16, "uuid is 16 bytes");
    assert_eq!(uuid[6] >> 4, 4, "UUID version 4");
    assert_eq!(uuid[8] >> 6, 0b10, "RFC 4122 variant");
}

/// `hold`: calls other than SUBSCRIBE are kept there unanswered.
fn serve_connection(
    conn: TcpStream,
    tx: Sender<Received>,
    hold: Option<Arc<Mutex<Vec<TcpStream>>>>,
) {
    let Ok(read_half) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
        return;
    }
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    assert!(
        request_line.starts_with("POST /api/v1/executor "),
        "{request_line}"
    );
    assert_eq!(
        headers.get("content-type").map(String::as_str),
        Some("application/x-protobuf")
    );
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .expect("the executor sends Content-Length");
    let mut body = vec![0; length];
    reader.read_exact(&mut body).expect("request body");
    let call = Call::decode(&body).expect("a valid executor Call");
    let mut conn = conn;
    if call.r#type == Some(call::Type::Subscribe) {
        let head = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n\
                    Transfer-Encoding: chunked\r\n\r\n";
        if conn.write_all(head.as_bytes()).is_ok() {
            let _ = tx.send(Received::Subscribe(call, conn));
        }
    } else if let Some(held) = hold {
        held.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
        let _ = tx.send(Received::Call(call));
    } else {
        let reply = "HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        let _ = conn.write_all(reply.as_bytes());
        let _ = conn.shutdown(Shutdown::Both);
        let _ = tx.send(Received::Call(call));
    }
}

/// The open SUBSCRIBE response: events go out as RecordIO records in HTTP chunks.
struct Stream(TcpStream);

impl Stream {
    fn send(&mut self, event: &Event) {
        let record = recordio::frame(&event.encode());
        let mut chunk = format!("{:x}\r\n", record.len()).into_bytes();
        chunk.extend_from_slice(&record);
        chunk.extend_from_slice(b"\r\n");
        self.0.write_all(&chunk).expect("write event");
        self.0.flush().expect("flush event");
    }

    /// Ends the response properly (last chunk): the agent closed the stream.
    fn end(mut self) {
        let _ = self.0.write_all(b"0\r\n\r\n");
        let _ = self.0.shutdown(Shutdown::Both);
    }

    /// Drops the connection in the middle of the response, as a dying agent does.
    fn cut(self) {
        let _ = self.0.shutdown(Shutdown::Both);
    }
}

fn event(kind: event::Type) -> Event {
    Event {
        r#type: Some(kind),
        ..Event::default()
    }
}

fn subscribed() -> Event {
    Event {
        subscribed: Some(event::Subscribed {
            executor_info: executor_info(),
            framework_info: FrameworkInfo {
                user: "root".into(),
                name: "storage-framework".into(),
                id: Some(FrameworkID {
                    value: FRAMEWORK.into(),
                }),
                ..FrameworkInfo::default()
            },
            agent_info: AgentInfo {
                hostname: "agent-1.test".into(),
                id: Some(AgentID {
                    value: "agent-S1".into(),
                }),
                ..AgentInfo::default()
            },
            container_id: Some(ContainerID {
                value: "container-1".into(),
                parent: None,
            }),
        }),
        ..event(event::Type::Subscribed)
    }
}

fn executor_info() -> ExecutorInfo {
    ExecutorInfo {
        executor_id: ExecutorID {
            value: EXECUTOR.into(),
        },
        framework_id: Some(FrameworkID {
            value: FRAMEWORK.into(),
        }),
        command: Some(CommandInfo {
            value: Some("./storage-executor".into()),
            environment: Some(Environment {
                variables: vec![
                    Variable {
                        name: "STORAGE_EXECUTOR_SECRET".into(),
                        value: Some(SECRET.into()),
                        r#type: None,
                    },
                    Variable {
                        name: "STORAGE_SCHEDULER_URL".into(),
                        value: Some("http://127.0.0.1:1/".into()),
                        r#type: None,
                    },
                ],
            }),
            ..CommandInfo::default()
        }),
        ..ExecutorInfo::default()
    }
}

fn task(id: &str) -> TaskInfo {
    TaskInfo {
        name: format!("storage-node {id}").into(),
        task_id: TaskID { value: id.into() },
        agent_id: AgentID {
            value: "agent-S1".into(),
        },
        executor: Some(executor_info()),
        data: Some(Bytes(PLAN.to_vec())),
        ..TaskInfo::default()
    }
}

fn launch(id: &str) -> Event {
    Event {
        launch: Some(event::Launch { task: task(id) }),
        ..event(event::Type::Launch)
    }
}

fn kill(id: &str) -> Event {
    Event {
        kill: Some(event::Kill {
            task_id: TaskID { value: id.into() },
            kill_policy: None,
        }),
        ..event(event::Type::Kill)
    }
}

fn acknowledged(status: &TaskStatus) -> Event {
    Event {
        acknowledged: Some(event::Acknowledged {
            task_id: status.task_id.clone(),
            uuid: status.uuid.clone().expect("uuid"),
        }),
        ..event(event::Type::Acknowledged)
    }
}

/// The executor process; killed on drop if a test fails before it exits.
struct Executor {
    child: Child,
    log: Arc<Mutex<String>>,
    reader: Option<thread::JoinHandle<()>>,
}

impl Executor {
    fn start(agent: SocketAddr, extra: &[(&str, &str)]) -> Executor {
        let sandbox = std::env::temp_dir();
        let endpoint = agent.to_string();
        let mut vars: Vec<(&str, &str)> = vec![
            ("MESOS_FRAMEWORK_ID", FRAMEWORK),
            ("MESOS_EXECUTOR_ID", EXECUTOR),
            ("MESOS_AGENT_ENDPOINT", &endpoint),
            ("MESOS_CHECKPOINT", "0"),
            ("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD", "10secs"),
            ("STORAGE_EXECUTOR_LOGLEVEL", "debug"),
            ("STORAGE_EXECUTOR_SECRET", SECRET),
        ];
        vars.extend_from_slice(extra);
        Executor::spawn(&vars, &sandbox)
    }

    fn spawn(vars: &[(&str, &str)], sandbox: &std::path::Path) -> Executor {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_storage-executor"));
        cmd.env_clear()
            .env("MESOS_DIRECTORY", sandbox)
            .env("MESOS_SANDBOX", sandbox)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in vars {
            if value.is_empty() {
                cmd.env_remove(name);
            } else {
                cmd.env(name, value);
            }
        }
        let mut child = cmd.spawn().expect("start storage-executor");
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().expect("piped stderr");
        let sink = Arc::clone(&log);
        let reader = thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut log = sink.lock().unwrap_or_else(|p| p.into_inner());
                log.push_str(&line);
                log.push('\n');
            }
        });
        Executor {
            child,
            log,
            reader: Some(reader),
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Waits for the process to exit, then for the whole of its stderr.
    fn wait_exit(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                if let Some(reader) = self.reader.take() {
                    let _ = reader.join();
                }
                return status;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "executor still running after {DEADLINE:?}\nlog:\n{}",
                self.log()
            );
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn assert_log_is_clean(log: &str) {
    assert!(
        !log.contains(SECRET),
        "a setting's value was logged:\n{log}"
    );
    assert!(!log.contains("persona"), "the task data was logged:\n{log}");
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        assert!(
            line.contains(&format!("executor {EXECUTOR}:")),
            "log line without the executor id: {line}"
        );
    }
}

#[test]
fn launch_kill_acknowledge_and_shutdown() {
    let agent = FakeAgent::start();
    let mut exec = Executor::start(agent.addr, &[]);

    let (call, mut stream) = agent.expect_subscribe(&exec);
    assert_eq!(call.executor_id.value, EXECUTOR);
    assert_eq!(call.framework_id.value, FRAMEWORK);
    let subscribe = call.subscribe.expect("SUBSCRIBE carries `subscribe`");
    assert!(subscribe.unacknowledged_tasks.is_empty());
    assert!(subscribe.unacknowledged_updates.is_empty());

    stream.send(&subscribed());
    stream.send(&event(event::Type::Heartbeat));
    stream.send(&launch("task-1"));
    let running = agent.expect_update(&exec);
    assert_eq!(running.task_id.value, "task-1");
    assert_eq!(running.state, TaskState::Running);
    let message = running.message.as_deref().unwrap_or("");
    assert!(
        message.starts_with("storage executor running on "),
        "{message}"
    );
    assert_eq!(
        running.agent_id.as_ref().map(|a| a.value.as_str()),
        Some("agent-S1")
    );
    stream.send(&acknowledged(&running));

    // A second task, killed on its own.
    stream.send(&launch("task-2"));
    let running_2 = agent.expect_update(&exec);
    assert_eq!(
        (running_2.task_id.value.as_str(), running_2.state),
        ("task-2", TaskState::Running)
    );
    assert_ne!(
        running_2.uuid, running.uuid,
        "every update has a fresh uuid"
    );
    stream.send(&kill("task-2"));
    let killed_2 = agent.expect_update(&exec);
    assert_eq!(
        (killed_2.task_id.value.as_str(), killed_2.state),
        ("task-2", TaskState::Killed)
    );
    stream.send(&acknowledged(&running_2));
    stream.send(&acknowledged(&killed_2));

    // SHUTDOWN kills what is still running: task-1 only.
    stream.send(&event(event::Type::Shutdown));
    let killed_1 = agent.expect_update(&exec);
    assert_eq!(
        (killed_1.task_id.value.as_str(), killed_1.state),
        ("task-1", TaskState::Killed)
    );
    assert_ne!(killed_1.uuid, running.uuid);
    stream.send(&acknowledged(&killed_1));

    let status = exec.wait_exit();
    let log = exec.log();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(
        agent.rx.try_recv().is_err(),
        "no call after the last update\n{log}"
    );
    assert!(log.contains("LAUNCH task task-1"), "{log}");
    assert!(
        log.contains(&format!("task data {} bytes", PLAN.len())),
        "{log}"
    );
    assert!(log.contains("STORAGE_EXECUTOR_SECRET"), "{log}");
    assert_log_is_clean(&log);
}

/// The node worker starts when the task is launched, not once the agent has taken its
/// TASK_RUNNING: an agent slow to answer held the whole walk back (0.45 s a launch on the
/// loaded dev cluster). Here the agent never answers the update; the worker starts (and, this
/// task data naming no scheduler, says that no host phases run) before the update's request
/// times out.
#[test]
fn the_node_worker_starts_while_the_agent_holds_the_running_update() {
    let agent = FakeAgent::start_holding_calls();
    let exec = Executor::start(agent.addr, &[]);
    let (_, mut stream) = agent.expect_subscribe(&exec);
    stream.send(&subscribed());
    stream.send(&launch("task-1"));
    let running = agent.expect_update(&exec);
    assert_eq!(running.state, TaskState::Running);
    let started = "no host phases run";
    let deadline = Instant::now() + DEADLINE;
    while !exec.log().contains(started) {
        assert!(Instant::now() < deadline, "no node worker:\n{}", exec.log());
        thread::sleep(Duration::from_millis(20));
    }
    let log = exec.log();
    let before = &log[..log.find(started).unwrap_or_default()];
    assert!(
        !before.contains("of task task-1 failed"),
        "the worker waited for the update's request to fail:\n{log}"
    );
}

/// KILL ends a task, not its executor: with no live task left and its last update
/// acknowledged, the executor exits on its own (issue 8, item 6).
#[test]
fn exits_once_its_last_task_ended_and_was_acknowledged() {
    let agent = FakeAgent::start();
    let mut exec = Executor::start(agent.addr, &[]);
    let (_, mut stream) = agent.expect_subscribe(&exec);
    stream.send(&subscribed());
    stream.send(&launch("task-1"));
    let running = agent.expect_update(&exec);
    stream.send(&acknowledged(&running));
    stream.send(&kill("task-1"));
    let killed = agent.expect_update(&exec);
    assert_eq!(killed.state, TaskState::Killed);
    stream.send(&acknowledged(&killed));
    let status = exec.wait_exit();
    let log = exec.log();
    assert_eq!(status.code(), Some(0), "{log}");
    assert!(log.contains("no live task left"), "{log}");
}

#[test]
fn resubscribes_with_what_the_agent_has_not_acknowledged() {
    let agent = FakeAgent::start();
    let mut exec = Executor::start(
        agent.addr,
        &[
            ("MESOS_CHECKPOINT", "1"),
            ("MESOS_RECOVERY_TIMEOUT", "15mins"),
            ("MESOS_SUBSCRIPTION_BACKOFF_MAX", "50ms"),
        ],
    );

    let (_, mut stream) = agent.expect_subscribe(&exec);
    stream.send(&subscribed());
    stream.send(&launch("task-1"));
    let running = agent.expect_update(&exec);
    assert_eq!(running.state, TaskState::Running);
    // The agent dies before acknowledging anything.
    stream.cut();

    let (call, mut stream) = agent.expect_subscribe(&exec);
    assert_eq!(call.r#type, Some(call::Type::Subscribe));
    let subscribe = call.subscribe.expect("SUBSCRIBE carries `subscribe`");
    let tasks: Vec<&str> = subscribe
        .unacknowledged_tasks
        .iter()
        .map(|t| t.task_id.value.as_str())
        .collect();
    assert_eq!(tasks, ["task-1"], "{}", exec.log());
    assert_eq!(
        subscribe.unacknowledged_tasks[0]
            .data
            .as_ref()
            .map(|d| &d.0[..]),
        Some(PLAN),
        "the task goes back as it was launched"
    );
    assert_eq!(subscribe.unacknowledged_updates.len(), 1, "{}", exec.log());
    let resent = &subscribe.unacknowledged_updates[0].status;
    assert_eq!(resent.uuid, running.uuid, "the same update, not a new one");
    assert_eq!(resent.state, TaskState::Running);
    assert_eq!(resent.task_id.value, "task-1");
    check_status(resent);

    stream.send(&subscribed());
    stream.send(&acknowledged(&running));
    stream.send(&event(event::Type::Shutdown));
    let killed = agent.expect_update(&exec);
    assert_eq!(
        (killed.task_id.value.as_str(), killed.state),
        ("task-1", TaskState::Killed)
    );
    stream.send(&acknowledged(&killed));

    let status = exec.wait_exit();
    let log = exec.log();
    assert_eq!(status.code(), Some(0), "{log}");
    assert_log_is_clean(&log);
}

#[test]
fn acknowledged_updates_are_not_carried_again() {
    let agent = FakeAgent::start();
    let mut exec = Executor::start(
        agent.addr,
        &[
            ("MESOS_CHECKPOINT", "true"),
            ("MESOS_RECOVERY_TIMEOUT", "1mins"),
            ("MESOS_SUBSCRIPTION_BACKOFF_MAX", "20ms"),
        ],
    );
    let (_, mut stream) = agent.expect_subscribe(&exec);
    stream.send(&subscribed());
    stream.send(&launch("task-1"));
    let running = agent.expect_update(&exec);
    stream.send(&acknowledged(&running));
    // KILL then a clean end of the stream: the TASK_KILLED is not acknowledged yet.
    stream.send(&kill("task-1"));
    let killed = agent.expect_update(&exec);
    stream.end();

    let (call, stream) = agent.expect_subscribe(&exec);
    let subscribe = call.subscribe.expect("subscribe");
    assert!(
        subscribe.unacknowledged_tasks.is_empty(),
        "task-1 had an acknowledged update\n{}",
        exec.log()
    );
    let uuids: Vec<_> = subscribe
        .unacknowledged_updates
        .iter()
        .map(|u| u.status.uuid.clone())
        .collect();
    assert_eq!(uuids, std::slice::from_ref(&killed.uuid), "{}", exec.log());

    // An ERROR from the agent ends the executor with a failure.
    let mut stream = stream;
    stream.send(&subscribed());
    let mut error = event(event::Type::Error);
    error.error = Some(event::Error {
        message: "framework removed".into(),
    });
    stream.send(&error);
    let status = exec.wait_exit();
    let log = exec.log();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("framework removed"), "{log}");
}

#[test]
fn without_checkpointing_a_broken_connection_ends_the_executor() {
    let agent = FakeAgent::start();
    let mut exec = Executor::start(agent.addr, &[]);
    let (_, mut stream) = agent.expect_subscribe(&exec);
    stream.send(&subscribed());
    stream.send(&launch("task-1"));
    agent.expect_update(&exec);
    stream.cut();

    let status = exec.wait_exit();
    let log = exec.log();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        agent.rx.try_recv().is_err(),
        "no re-subscription without checkpointing\n{log}"
    );
    assert!(log.contains("does not checkpoint"), "{log}");
}

#[test]
fn a_missing_variable_is_one_clear_line_and_exit_code_2() {
    let agent = FakeAgent::start();
    let mut exec = Executor::start(agent.addr, &[("MESOS_EXECUTOR_ID", "")]);
    let status = exec.wait_exit();
    let log = exec.log();
    assert_eq!(status.code(), Some(2), "{log}");
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("MESOS_EXECUTOR_ID"), "{log}");

    let mut exec = Executor::start(agent.addr, &[("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD", "5")]);
    let status = exec.wait_exit();
    let log = exec.log();
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(
        log.contains("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD") && log.contains("unit"),
        "{log}"
    );
    assert!(
        agent.rx.try_recv().is_err(),
        "no SUBSCRIBE with a bad environment"
    );
}

#[test]
fn an_agent_that_drops_every_subscription_is_retried_with_backoff_until_recovery_ends() {
    let agent = FakeAgent::start();
    let mut exec = Executor::start(
        agent.addr,
        &[
            ("MESOS_CHECKPOINT", "1"),
            ("MESOS_RECOVERY_TIMEOUT", "1.5secs"),
            ("MESOS_SUBSCRIPTION_BACKOFF_MAX", "100ms"),
        ],
    );
    // Accept every SUBSCRIBE and end the stream before SUBSCRIBED, until the executor
    // gives up.
    let mut subscriptions = 0;
    let start = Instant::now();
    let status = loop {
        if let Some(status) = exec.child.try_wait().expect("try_wait") {
            break status;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "executor never gave up\n{}",
            exec.log()
        );
        if let Ok(Received::Subscribe(_, conn)) = agent.rx.recv_timeout(Duration::from_millis(20)) {
            subscriptions += 1;
            Stream(conn).end();
        }
    };
    let _ = exec.wait_exit();
    let log = exec.log();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("giving up"), "{log}");
    // Without backoff this would be thousands; with it at most one per 100 ms after the
    // first few shorter waits.
    assert!(
        (1..=25).contains(&subscriptions),
        "{subscriptions} subscriptions\n{log}"
    );
    assert!(log.contains("ended before SUBSCRIBED"), "{log}");
}
