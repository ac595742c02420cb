//! The simulated agents: real executor processes with the Mesos environment, the v1 executor
//! API (the test plays the executor over raw HTTP), and executor and agent failures.

mod master_support;

use master_support::*;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use storage_framework::mesos::executor::{self, call as ecall, event as eevent};
use storage_framework::mesos::scheduler::{self, call, event};
use storage_framework::mesos::types::*;
use storage_framework::mesos::{Bytes, Encoding};

/// Dumps its environment where $DUMP says, then idles like an executor that never returns.
const DUMP_ENV_SCRIPT: &[u8] =
    b"#!/bin/sh\nenv > \"$DUMP.tmp\" && mv \"$DUMP.tmp\" \"$DUMP\"\nexec sleep 300\n";

fn executor_info(id: &str, files: &FileServer, dump: &Path) -> ExecutorInfo {
    ExecutorInfo {
        executor_id: ExecutorID { value: text(id) },
        name: Some(text("test executor")),
        resources: vec![scalar("cpus", 0.1), scalar("mem", 32.0)],
        command: Some(CommandInfo {
            uris: vec![
                command_info::Uri {
                    value: text(&files.url("/executor.sh")),
                    executable: Some(true),
                    ..Default::default()
                },
                command_info::Uri {
                    value: text(&files.url("/conf.txt")),
                    output_file: Some(text("conf/renamed.txt")),
                    extract: Some(false),
                    ..Default::default()
                },
            ],
            environment: Some(Environment {
                variables: vec![
                    environment::Variable {
                        name: text("DUMP"),
                        r#type: None,
                        value: Some(text(&dump.to_string_lossy())),
                    },
                    environment::Variable {
                        name: text("STORAGE_SECRET"),
                        r#type: Some(environment::variable::Type::Value),
                        value: Some(text("s3cr3t")),
                    },
                ],
            }),
            value: Some(text("./executor.sh")),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn files() -> FileServer {
    FileServer::start(vec![
        ("/executor.sh", DUMP_ENV_SCRIPT.to_vec()),
        ("/conf.txt", b"hello".to_vec()),
    ])
}

fn checkpointing(name: &str) -> FrameworkInfo {
    let mut info = framework_info(name, false);
    info.checkpoint = Some(true);
    info.failover_timeout = Some(3600.0);
    info
}

/// Launches one executor task on the first offer and waits for its environment dump.
struct Launched {
    sched: Sched,
    offer: Offer,
    env: BTreeMap<String, String>,
}

fn launch_dumping_executor(
    c: &devcluster::master::MasterHandle,
    info: FrameworkInfo,
    dir: &Path,
    eid: &str,
) -> Launched {
    let f = files();
    let dump = dir.join(format!("{eid}.env"));
    let sched = Sched::subscribe(c.addr(), Encoding::Protobuf, info);
    let offer = sched.offers().remove(0);
    sched.accept(
        &[&offer],
        vec![executor_task(
            &format!("{eid}-task"),
            &offer,
            executor_info(eid, &f, &dump),
        )],
    );
    wait_until("the executor's environment dump", || {
        dump.exists().then_some(())
    });
    let env = read_env_dump(&dump);
    Launched { sched, offer, env }
}

#[test]
fn executor_process_gets_the_agents_environment_and_a_fetched_sandbox() {
    let dir = temp_dir("env");
    let c = cluster(2, |cfg| cfg.work_dir = dir.join("work"));
    let l = launch_dumping_executor(&c, checkpointing("env"), &dir, "exec-1");
    let env = &l.env;
    let agents = c.agents().unwrap();
    let agent = agents
        .iter()
        .find(|a| a.id == l.offer.agent_id.value.as_str())
        .unwrap();
    assert_eq!(env["MESOS_FRAMEWORK_ID"], l.sched.framework_id);
    assert_eq!(env["MESOS_EXECUTOR_ID"], "exec-1");
    assert_eq!(env["MESOS_SLAVE_ID"], agent.id);
    assert_eq!(env["MESOS_AGENT_ENDPOINT"], agent.endpoint.to_string());
    assert_eq!(
        env["MESOS_SLAVE_PID"],
        format!("slave(1)@{}", agent.endpoint)
    );
    assert_eq!(env["MESOS_CHECKPOINT"], "1");
    assert_eq!(env["MESOS_RECOVERY_TIMEOUT"], "15mins");
    assert_eq!(env["MESOS_SUBSCRIPTION_BACKOFF_MAX"], "2secs");
    assert_eq!(env["MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD"], "5secs");
    assert_eq!(env["MESOS_HTTP_COMMAND_EXECUTOR"], "0");
    assert_eq!(env["STORAGE_SECRET"], "s3cr3t");
    assert_eq!(env["MESOS_SANDBOX"], env["MESOS_DIRECTORY"]);
    let sandbox = PathBuf::from(&env["MESOS_SANDBOX"]);
    assert!(sandbox.starts_with(dir.join("work")), "{sandbox:?}");
    assert!(sandbox.to_string_lossy().contains(&format!(
        "/frameworks/{}/executors/exec-1/runs/",
        l.sched.framework_id
    )));
    assert_eq!(
        std::fs::read(sandbox.join("conf/renamed.txt")).unwrap(),
        b"hello"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(sandbox.join("executor.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert!(mode & 0o111 != 0, "executable bit honoured: {mode:o}");
    assert!(sandbox.join("stdout").exists() && sandbox.join("stderr").exists());
}

#[test]
fn without_checkpointing_there_is_no_recovery_environment() {
    let dir = temp_dir("nockpt");
    let c = cluster(1, |cfg| cfg.work_dir = dir.join("work"));
    let l = launch_dumping_executor(&c, framework_info("plain", false), &dir, "exec-2");
    assert_eq!(l.env["MESOS_CHECKPOINT"], "0");
    assert!(!l.env.contains_key("MESOS_RECOVERY_TIMEOUT"));
    assert!(!l.env.contains_key("MESOS_SUBSCRIPTION_BACKOFF_MAX"));
}

fn ecall(env: &BTreeMap<String, String>, t: ecall::Type) -> executor::Call {
    executor::Call {
        executor_id: ExecutorID {
            value: text(&env["MESOS_EXECUTOR_ID"]),
        },
        framework_id: FrameworkID {
            value: text(&env["MESOS_FRAMEWORK_ID"]),
        },
        r#type: Some(t),
        ..Default::default()
    }
}

fn agent_addr(env: &BTreeMap<String, String>) -> SocketAddr {
    env["MESOS_AGENT_ENDPOINT"].parse().unwrap()
}

fn post_executor(env: &BTreeMap<String, String>, c: &executor::Call) -> HttpResponse {
    request(
        agent_addr(env),
        "POST",
        "/api/v1/executor",
        &[("Content-Type", "application/json")],
        &Encoding::Json.encode(c),
    )
}

fn running_update(env: &BTreeMap<String, String>, task: &str, state: TaskState) -> executor::Call {
    let mut c = ecall(env, ecall::Type::Update);
    c.update = Some(ecall::Update {
        status: TaskStatus {
            task_id: TaskID { value: text(task) },
            state,
            source: Some(task_status::Source::Executor),
            executor_id: Some(c.executor_id.clone()),
            uuid: Some(uuid_bytes()),
            ..Default::default()
        },
    });
    c
}

fn exec_next(stream: &EventStream<executor::Event>, t: eevent::Type) -> executor::Event {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    loop {
        match stream.next(deadline.saturating_duration_since(Instant::now())) {
            Next::Event(e) if e.r#type == Some(t) => return e,
            Next::Event(e) => seen.push(e.r#type),
            _ => panic!("executor got no {t:?}; saw {seen:?}"),
        }
    }
}

fn subscribe_executor(env: &BTreeMap<String, String>) -> EventStream<executor::Event> {
    let mut sub = ecall(env, ecall::Type::Subscribe);
    sub.subscribe = Some(ecall::Subscribe::default());
    EventStream::<executor::Event>::open(
        agent_addr(env),
        "/api/v1/executor",
        Encoding::Protobuf,
        Some("application/x-protobuf"),
        &Encoding::Protobuf.encode(&sub),
    )
    .unwrap_or_else(|r| panic!("executor SUBSCRIBE: {} {}", r.status, r.text()))
}

#[test]
fn the_executor_api_subscribes_launches_and_relays_updates_and_acknowledgements() {
    let dir = temp_dir("execapi");
    let c = cluster(1, |cfg| cfg.work_dir = dir.join("work"));
    let l = launch_dumping_executor(&c, checkpointing("api"), &dir, "exec-api");
    let env = &l.env;
    let task = "exec-api-task";

    // Before SUBSCRIBE an executor may not send anything else.
    let r = post_executor(env, &running_update(env, task, TaskState::Running));
    assert_eq!(r.status, 403);
    assert_eq!(r.text(), "Executor is not subscribed");
    let mut unknown = ecall(env, ecall::Type::Subscribe);
    unknown.subscribe = Some(ecall::Subscribe::default());
    unknown.executor_id = ExecutorID {
        value: text("stranger"),
    };
    let r = post_executor(env, &unknown);
    assert_eq!(r.status, 400);
    assert_eq!(r.text(), "Executor cannot be found");

    let stream = subscribe_executor(env);
    let subscribed = exec_next(&stream, eevent::Type::Subscribed)
        .subscribed
        .unwrap();
    assert_eq!(subscribed.executor_info.executor_id.value, "exec-api");
    assert_eq!(subscribed.framework_info.name, "api");
    assert_eq!(subscribed.agent_info.hostname, "agent-1");
    assert!(subscribed.container_id.is_some());
    let launch = exec_next(&stream, eevent::Type::Launch).launch.unwrap();
    assert_eq!(launch.task.task_id.value, task);

    // Malformed updates are refused with the agent's reasons.
    let mut no_uuid = running_update(env, task, TaskState::Running);
    no_uuid.update.as_mut().unwrap().status.uuid = None;
    let r = post_executor(env, &no_uuid);
    assert_eq!(r.status, 400);
    assert!(r.text().contains("Expecting 'uuid' to be present"));
    let mut wrong_source = running_update(env, task, TaskState::Running);
    wrong_source.update.as_mut().unwrap().status.source = Some(task_status::Source::Agent);
    let r = post_executor(env, &wrong_source);
    assert_eq!(r.status, 400);
    assert!(r.text().contains("expecting 'SOURCE_EXECUTOR'"));

    // UPDATE reaches the scheduler with the executor's uuid; its ACK comes back.
    let update = running_update(env, task, TaskState::Running);
    let uuid = update.update.as_ref().unwrap().status.uuid.clone().unwrap();
    assert_eq!(post_executor(env, &update).status, 202);
    let st = l.sched.update_for(task, TaskState::Running);
    assert_eq!(st.uuid.as_ref(), Some(&uuid));
    assert_eq!(st.source, Some(task_status::Source::Executor));
    assert_eq!(st.agent_id.as_ref(), Some(&l.offer.agent_id));
    l.sched.acknowledge(&st);
    let acked = exec_next(&stream, eevent::Type::Acknowledged)
        .acknowledged
        .unwrap();
    assert_eq!(acked.uuid, uuid);
    assert_eq!(acked.task_id.value, task);

    // MESSAGE both ways.
    let mut msg = ecall(env, ecall::Type::Message);
    msg.message = Some(ecall::Message {
        data: Bytes(b"to scheduler".to_vec()),
    });
    assert_eq!(post_executor(env, &msg).status, 202);
    let m = l.sched.wait(event::Type::Message).message.unwrap();
    assert_eq!(m.data.0, b"to scheduler");
    assert_eq!(m.executor_id.value, "exec-api");
    l.sched.call_ok(scheduler::Call {
        r#type: Some(call::Type::Message),
        message: Some(call::Message {
            agent_id: l.offer.agent_id.clone(),
            executor_id: ExecutorID {
                value: text("exec-api"),
            },
            data: Bytes(b"to executor".to_vec()),
        }),
        ..Default::default()
    });
    let m = exec_next(&stream, eevent::Type::Message).message.unwrap();
    assert_eq!(m.data.0, b"to executor");

    // KILL goes to the executor, which answers with TASK_KILLED.
    l.sched.call_ok(scheduler::Call {
        r#type: Some(call::Type::Kill),
        kill: Some(call::Kill {
            task_id: TaskID { value: text(task) },
            agent_id: Some(l.offer.agent_id.clone()),
            kill_policy: None,
        }),
        ..Default::default()
    });
    let k = exec_next(&stream, eevent::Type::Kill).kill.unwrap();
    assert_eq!(k.task_id.value, task);
    assert_eq!(
        post_executor(env, &running_update(env, task, TaskState::Killed)).status,
        202
    );
    let killed = l.sched.update_for(task, TaskState::Killed);
    l.sched.acknowledge(&killed);
    exec_next(&stream, eevent::Type::Acknowledged);
}

#[test]
fn a_resubscribing_executor_replaces_its_connection_without_duplicating_updates() {
    let dir = temp_dir("resub");
    let c = cluster(1, |cfg| {
        cfg.work_dir = dir.join("work");
        // No retries during the test: every update the scheduler sees is a first delivery.
        cfg.status_update_retry = Duration::from_secs(60);
    });
    let l = launch_dumping_executor(&c, checkpointing("resub"), &dir, "exec-re");
    let env = &l.env;
    let first = subscribe_executor(env);
    exec_next(&first, eevent::Type::Launch);
    let task = "exec-re-task";
    let update = running_update(env, task, TaskState::Running);
    assert_eq!(post_executor(env, &update).status, 202);
    let st = l.sched.update_for(task, TaskState::Running);

    let mut sub = ecall(env, ecall::Type::Subscribe);
    sub.subscribe = Some(ecall::Subscribe {
        unacknowledged_tasks: vec![],
        unacknowledged_updates: vec![update.update.clone().unwrap()],
    });
    let second = EventStream::<executor::Event>::open(
        agent_addr(env),
        "/api/v1/executor",
        Encoding::Json,
        None,
        &Encoding::Json.encode(&sub),
    )
    .unwrap_or_else(|r| panic!("{} {}", r.status, r.text()));
    assert_eq!(second.header("Content-Type"), Some("application/json"));
    exec_next(&second, eevent::Type::Subscribed);
    let deadline = Instant::now() + WAIT;
    while !matches!(
        first.next(deadline.saturating_duration_since(Instant::now())),
        Next::Closed
    ) {
        assert!(Instant::now() < deadline, "old executor stream still open");
    }
    l.sched.acknowledge(&st);
    let acked = exec_next(&second, eevent::Type::Acknowledged)
        .acknowledged
        .unwrap();
    assert_eq!(acked.uuid, st.uuid.unwrap());
    // The re-sent update had the same uuid: nothing is left to deliver.
    assert_eq!(c.snapshot().unwrap()["agents"][0]["pending_updates"], 0);
}

#[test]
fn an_executor_that_dies_fails_its_tasks_and_the_scheduler_hears_failure() {
    let dir = temp_dir("crash");
    let c = cluster(1, |cfg| cfg.work_dir = dir.join("work"));
    let l = launch_dumping_executor(&c, checkpointing("crash"), &dir, "exec-crash");
    let env = &l.env;
    let stream = subscribe_executor(env);
    exec_next(&stream, eevent::Type::Launch);
    let task = "exec-crash-task";
    assert_eq!(
        post_executor(env, &running_update(env, task, TaskState::Running)).status,
        202
    );
    let st = l.sched.update_for(task, TaskState::Running);
    l.sched.acknowledge(&st);

    c.kill_executor(0, "exec-crash").unwrap();
    let mut failed = None;
    let mut failure = None;
    let deadline = Instant::now() + WAIT;
    while failed.is_none() || failure.is_none() {
        let left = deadline.saturating_duration_since(Instant::now());
        let ev = l.sched.next_event(left).expect("FAILURE and TASK_FAILED");
        if let Some(u) = ev.update {
            if u.status.state == TaskState::Failed {
                failed = Some(u.status);
            }
        } else if let Some(f) = ev.failure {
            failure = Some(f);
        }
    }
    let failed = failed.unwrap();
    assert_eq!(failed.reason, Some(task_status::Reason::ExecutorTerminated));
    assert_eq!(failed.source, Some(task_status::Source::Agent));
    assert!(
        failed.uuid.is_some(),
        "agent-generated updates are reliable"
    );
    let failure = failure.unwrap();
    assert_eq!(failure.executor_id.unwrap().value, "exec-crash");
    assert_eq!(failure.agent_id.as_ref(), Some(&l.offer.agent_id));
    // Raw wait status of a SIGKILLed process.
    assert_eq!(failure.status, Some(9));
    // Its resources come back once the executor is gone.
    l.sched.acknowledge(&failed);
    let o = l.sched.offers().remove(0);
    assert_eq!(o.agent_id, l.offer.agent_id);

    // The master's record: start, task, end of that one run, in that order.
    let log = c.launch_log().unwrap();
    let events: Vec<_> = log
        .iter()
        .filter(|r| r.executor == "exec-crash")
        .map(|r| (r.event, r.task.as_deref(), r.agent.as_str()))
        .collect();
    use devcluster::master::LaunchEvent::*;
    assert_eq!(
        events,
        [
            (ExecutorStarted, None, "agent-1"),
            (TaskLaunched, Some(task), "agent-1"),
            (ExecutorTerminated, None, "agent-1"),
        ]
    );
    assert!(log.windows(2).all(|w| w[0].seq < w[1].seq));
}

#[test]
fn an_executor_that_never_subscribes_hits_the_registration_timeout() {
    let c = cluster(1, |cfg| {
        cfg.executor_registration_timeout = Duration::from_millis(300);
    });
    let f = FileServer::start(vec![("/idle.sh", b"#!/bin/sh\nexec sleep 300\n".to_vec())]);
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("reg", false));
    let o = s.offers().remove(0);
    let exec = ExecutorInfo {
        executor_id: ExecutorID {
            value: text("idle"),
        },
        command: Some(CommandInfo {
            uris: vec![command_info::Uri {
                value: text(&f.url("/idle.sh")),
                executable: Some(true),
                ..Default::default()
            }],
            value: Some(text("./idle.sh")),
            ..Default::default()
        }),
        ..Default::default()
    };
    s.accept(&[&o], vec![executor_task("waits", &o, exec)]);
    let st = s.update_for("waits", TaskState::Failed);
    assert_eq!(
        st.reason,
        Some(task_status::Reason::ExecutorRegistrationTimeout)
    );
    assert_eq!(
        st.message.as_deref(),
        Some("Executor did not register within 300ms")
    );
}

#[test]
fn a_failed_fetch_fails_the_launch() {
    let c = cluster(1, |_| {});
    let f = FileServer::start(vec![]);
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("fetch", false));
    let o = s.offers().remove(0);
    let exec = ExecutorInfo {
        executor_id: ExecutorID {
            value: text("missing"),
        },
        command: Some(CommandInfo {
            uris: vec![command_info::Uri {
                value: text(&f.url("/nothing-here")),
                ..Default::default()
            }],
            value: Some(text("./nothing-here")),
            ..Default::default()
        }),
        ..Default::default()
    };
    s.accept(&[&o], vec![executor_task("nofetch", &o, exec)]);
    let st = s.update_for("nofetch", TaskState::Failed);
    assert_eq!(st.reason, Some(task_status::Reason::ContainerLaunchFailed));
    assert!(
        st.message.as_deref().unwrap().contains("HTTP 404"),
        "{st:?}"
    );
}

#[test]
fn agent_attributes_come_from_a_json_file() {
    let dir = temp_dir("attrs");
    let file = dir.join("attributes.json");
    std::fs::write(
        &file,
        r#"{"agent-2": {"storage-sds-domains": "d1,d2", "storage-persona": "primary"},
            "1": {"disks": 2}}"#,
    )
    .unwrap();
    let c = cluster(2, |cfg| cfg.attributes_file = Some(file.clone()));
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("attr", false));
    let offers = s.offers_from(2);
    let by_host = |h: &str| offers.iter().find(|o| o.hostname == h).unwrap().clone();
    let a2 = by_host("agent-2");
    let domains = a2
        .attributes
        .iter()
        .find(|a| a.name == "storage-sds-domains")
        .unwrap();
    assert_eq!(domains.r#type, value::Type::Text);
    assert_eq!(domains.text.as_ref().unwrap().value, "d1,d2");
    let a1 = by_host("agent-1");
    let disks = a1.attributes.iter().find(|a| a.name == "disks").unwrap();
    assert_eq!(disks.r#type, value::Type::Scalar);
    assert_eq!(disks.scalar.as_ref().unwrap().value, 2.0);
    assert!(a1.attributes.iter().all(|a| a.name != "storage-persona"));

    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"agent-9": {"x": "y"}}"#).unwrap();
    let err = devcluster::master::start(devcluster::master::MasterConfig {
        agents: 2,
        attributes_file: Some(bad),
        ..Default::default()
    })
    .err()
    .expect("unknown agent refused");
    assert!(err.contains("agent-9"), "{err}");
}

#[test]
fn shutdown_asks_the_executor_then_kills_it_after_the_grace_period() {
    let dir = temp_dir("shutdown");
    let c = cluster(1, |cfg| {
        cfg.work_dir = dir.join("work");
        cfg.executor_shutdown_grace_period = Duration::from_millis(200);
    });
    let l = launch_dumping_executor(&c, checkpointing("sd"), &dir, "exec-sd");
    assert_eq!(l.env["MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD"], "200ms");
    let env = &l.env;
    let stream = subscribe_executor(env);
    exec_next(&stream, eevent::Type::Launch);
    l.sched.call_ok(scheduler::Call {
        r#type: Some(call::Type::Shutdown),
        shutdown: Some(call::Shutdown {
            executor_id: ExecutorID {
                value: text("exec-sd"),
            },
            agent_id: l.offer.agent_id.clone(),
        }),
        ..Default::default()
    });
    exec_next(&stream, eevent::Type::Shutdown);
    // The script ignores SHUTDOWN; the agent kills it and fails the task.
    let st = l.sched.update_for("exec-sd-task", TaskState::Failed);
    assert_eq!(st.reason, Some(task_status::Reason::ExecutorTerminated));
    l.sched.wait(event::Type::Failure);
}

#[test]
fn a_stopped_agent_rescinds_offers_loses_tasks_and_comes_back() {
    let c = cluster(2, |cfg| {
        cfg.agent_removal_timeout = Duration::from_millis(300);
    });
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("stop", false));
    let offers = s.offers_from(2);
    let on1 = offers.iter().find(|o| o.hostname == "agent-1").unwrap();
    let on2 = offers.iter().find(|o| o.hostname == "agent-2").unwrap();
    s.accept(&[on2], vec![command_task("on-2", on2, "sleep 300")]);
    let r = s.update_for("on-2", TaskState::Running);
    s.acknowledge(&r);

    c.stop_agent(0).unwrap();
    let rescind = s.wait(event::Type::Rescind).rescind.unwrap();
    assert_eq!(rescind.offer_id, on1.id);

    c.stop_agent(1).unwrap();
    let lost = s.update_for("on-2", TaskState::Lost);
    assert_eq!(lost.reason, Some(task_status::Reason::AgentRemoved));
    assert_eq!(lost.source, Some(task_status::Source::Master));
    assert!(lost
        .message
        .as_deref()
        .unwrap()
        .contains("Agent agent-2 is unreachable"));
    let failure = s.wait(event::Type::Failure).failure.unwrap();
    assert!(failure.executor_id.is_none());

    let snap = c.snapshot().unwrap();
    assert_eq!(snap["agents"][0]["up"], false);
    assert!(c.stop_agent(0).is_err(), "stopping twice is an error");
    c.start_agent(0).unwrap();
    let back = s.offers();
    assert!(back.iter().any(|o| o.agent_id == on1.agent_id));
    assert_eq!(get(c.agents().unwrap()[0].endpoint, "/health").status, 200);
}

/// Explicit reconciliation of `task` on `agent`: the one update it gets.
fn reconcile_one(s: &Sched, task: &str, agent: &str) -> TaskStatus {
    s.call_ok(scheduler::Call {
        r#type: Some(call::Type::Reconcile),
        reconcile: Some(call::Reconcile {
            tasks: vec![call::reconcile::Task {
                task_id: TaskID { value: text(task) },
                agent_id: Some(AgentID { value: text(agent) }),
            }],
        }),
        ..Default::default()
    });
    s.update()
}

/// A host reboot as Mesos 1.4 sees it. Away longer than the ping timeout, the old agent is
/// marked unreachable (TASK_UNREACHABLE with its time, FAILURE), then the host's agent
/// registers under a new id and the old one stays unreachable: no more updates, explicit
/// reconciliation still says TASK_UNREACHABLE. Back sooner, the new agent's registration at
/// the old one's address removes it: TASK_GONE.
#[test]
fn a_rebooted_host_comes_back_as_a_new_agent() {
    let c = cluster(2, |cfg| {
        cfg.agent_removal_timeout = Duration::from_millis(300);
    });
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("reboot", true));
    let offers = s.offers_from(2);
    let on1 = offers.iter().find(|o| o.hostname == "agent-1").unwrap();
    let on2 = offers.iter().find(|o| o.hostname == "agent-2").unwrap();
    s.accept(&[on1], vec![command_task("on-1", on1, "sleep 300")]);
    s.accept(&[on2], vec![command_task("on-2", on2, "sleep 300")]);
    for t in ["on-1", "on-2"] {
        let r = s.update_for(t, TaskState::Running);
        s.acknowledge(&r);
    }
    let old1 = on1.agent_id.value.to_string();

    let new1 = c.reboot_agent(0, Some(Duration::from_millis(900))).unwrap();
    assert_ne!(new1, old1);
    let u = s.update_for("on-1", TaskState::Unreachable);
    assert_eq!(u.reason, Some(task_status::Reason::AgentRemoved));
    assert_eq!(u.source, Some(task_status::Source::Master));
    let since = u.unreachable_time.clone().expect("unreachable_time");
    let f = s.wait(event::Type::Failure).failure.unwrap();
    assert_eq!(f.agent_id.unwrap().value, old1.as_str());
    let back = wait_until("agent-1 back under its new id", || {
        let a = c.agents().unwrap().remove(0);
        (a.up && a.id == new1).then_some(a)
    });
    assert_eq!(back.hostname, "agent-1");
    let r = reconcile_one(&s, "on-1", &old1);
    assert_eq!(r.state, TaskState::Unreachable);
    assert_eq!(r.unreachable_time, Some(since));
    let state = get(c.addr(), "/master/state").json();
    let slaves = state["slaves"].as_array().unwrap();
    assert!(
        slaves.iter().any(|a| a["id"] == new1.as_str()),
        "{slaves:?}"
    );
    assert!(
        !slaves.iter().any(|a| a["id"] == old1.as_str()),
        "{slaves:?}"
    );
    assert_eq!(state["unreachable_slaves"], 1);
    let fw = &state["frameworks"][0];
    assert_eq!(fw["unreachable_tasks"][0]["slave_id"], old1.as_str());
    assert_eq!(fw["tasks"].as_array().map(Vec::len), Some(1), "{fw}");

    // Back within the ping timeout: the old agent is removed, its task gone.
    let old2 = on2.agent_id.value.to_string();
    let new2 = c.reboot_agent(1, Some(Duration::from_millis(50))).unwrap();
    let g = s.update_for("on-2", TaskState::Gone);
    assert_eq!(g.reason, Some(task_status::Reason::AgentRemoved));
    assert_eq!(g.agent_id.as_ref().unwrap().value, old2.as_str());
    wait_until("agent-2 back under its new id", || {
        let a = c.agents().unwrap().remove(1);
        (a.up && a.id == new2).then_some(())
    });
    assert!(c.reboot_agent(5, None).is_err());
}

#[test]
fn a_restarted_agent_keeps_checkpointed_executors_that_reconnect_in_time() {
    let dir = temp_dir("restart");
    let c = cluster(1, |cfg| cfg.work_dir = dir.join("work"));
    let l = launch_dumping_executor(&c, checkpointing("rs"), &dir, "exec-rs");
    let env = &l.env;
    let stream = subscribe_executor(env);
    exec_next(&stream, eevent::Type::Launch);
    let task = "exec-rs-task";
    assert_eq!(
        post_executor(env, &running_update(env, task, TaskState::Running)).status,
        202
    );
    let st = l.sched.update_for(task, TaskState::Running);
    l.sched.acknowledge(&st);
    let before = c.agents().unwrap().remove(0);
    let pid = c.snapshot().unwrap()["agents"][0]["executors"][0]["pid"]
        .as_u64()
        .expect("executor pid");

    c.restart_agent(0).unwrap();
    // The connection ends with the agent process; the executor process lives on.
    let deadline = Instant::now() + WAIT;
    while !matches!(
        stream.next(deadline.saturating_duration_since(Instant::now())),
        Next::Closed
    ) {
        assert!(Instant::now() < deadline, "executor stream still open");
    }
    assert!(
        PathBuf::from(format!("/proc/{pid}")).exists(),
        "executor died with the agent"
    );
    let after = c.agents().unwrap().remove(0);
    assert_eq!(after.id, before.id);
    assert_eq!(after.endpoint, before.endpoint);
    assert!(after.up);
    // It subscribes again and carries on: its task was never failed.
    let again = subscribe_executor(env);
    exec_next(&again, eevent::Type::Subscribed);
    assert_eq!(
        post_executor(env, &running_update(env, task, TaskState::Running)).status,
        202
    );
    let st = l.sched.update_for(task, TaskState::Running);
    l.sched.acknowledge(&st);
    drop(again);

    // A second restart, and this time the executor does not come back in time: killed.
    c.restart_agent(0).unwrap();
    let failed = l.sched.update_for(task, TaskState::Failed);
    assert_eq!(
        failed.reason,
        Some(task_status::Reason::ExecutorReregistrationTimeout)
    );
    l.sched.acknowledge(&failed);
}

#[test]
fn a_stopped_agent_takes_its_executors_with_it() {
    let dir = temp_dir("host-down");
    let c = cluster(1, |cfg| cfg.work_dir = dir.join("work"));
    let l = launch_dumping_executor(&c, checkpointing("hd"), &dir, "exec-hd");
    let env = &l.env;
    let stream = subscribe_executor(env);
    exec_next(&stream, eevent::Type::Launch);
    let task = "exec-hd-task";
    assert_eq!(
        post_executor(env, &running_update(env, task, TaskState::Running)).status,
        202
    );
    let st = l.sched.update_for(task, TaskState::Running);
    l.sched.acknowledge(&st);
    // A host reboot: down, then up again.
    c.stop_agent(0).unwrap();
    c.start_agent(0).unwrap();
    let failed = l.sched.update_for(task, TaskState::Failed);
    assert_eq!(failed.reason, Some(task_status::Reason::ExecutorTerminated));
    assert_eq!(failed.source, Some(task_status::Source::Agent));
    l.sched.acknowledge(&failed);
    let o = l.sched.offers().remove(0);
    assert_eq!(o.agent_id, l.offer.agent_id);
}

#[test]
fn shutting_the_cluster_down_kills_executor_processes() {
    let dir = temp_dir("kill-all");
    let c = cluster(1, |cfg| cfg.work_dir = dir.join("work"));
    let _l = launch_dumping_executor(&c, checkpointing("bye"), &dir, "exec-bye");
    let snap = c.snapshot().unwrap();
    let pid = snap["agents"][0]["executors"][0]["pid"]
        .as_u64()
        .expect("executor pid");
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    assert!(proc_dir.exists());
    c.shutdown();
    wait_until("executor process gone", || {
        let stat = std::fs::read_to_string(proc_dir.join("stat")).unwrap_or_default();
        // Gone, or a zombie nobody reaps any more.
        (stat.is_empty() || stat.contains(") Z ")).then_some(())
    });
}

/// A partition-aware framework's running command task on agent-1, acknowledged.
fn running_on_agent_1(c: &devcluster::master::MasterHandle, name: &str) -> (Sched, TaskStatus) {
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info(name, true));
    let offers = s.offers_from(1);
    let on1 = offers.iter().find(|o| o.hostname == "agent-1").unwrap();
    s.accept(&[on1], vec![command_task("t1", on1, "sleep 300")]);
    let r = s.update_for("t1", TaskState::Running);
    s.acknowledge(&r);
    (s, r)
}

fn reconcile_call(status: &TaskStatus) -> scheduler::Call {
    scheduler::Call {
        r#type: Some(call::Type::Reconcile),
        reconcile: Some(call::Reconcile {
            tasks: vec![call::reconcile::Task {
                task_id: status.task_id.clone(),
                agent_id: status.agent_id.clone(),
            }],
        }),
        ..Default::default()
    }
}

/// Cut off, the agent's task runs on; after the ping timeout the master reports it
/// unreachable and the agent lost. Healed, the agent re-registers with the task and the
/// master says so by itself: TASK_RUNNING from the master, REASON_AGENT_REREGISTERED, no
/// uuid (nothing to acknowledge).
#[test]
fn a_partitioned_agent_turns_unreachable_and_comes_back_with_its_task() {
    let c = cluster(1, |cfg| {
        cfg.agent_removal_timeout = Duration::from_millis(300);
    });
    let (s, running) = running_on_agent_1(&c, "partition");
    c.partition_agent(0).unwrap();
    assert!(c.start_agent(0).is_err(), "a cut-off agent is not stopped");
    let u = s.update_for("t1", TaskState::Unreachable);
    assert_eq!(u.reason, Some(task_status::Reason::AgentRemoved));
    assert_eq!(u.source, Some(task_status::Source::Master));
    assert!(u.unreachable_time.is_some());
    assert!(s
        .wait(event::Type::Failure)
        .failure
        .unwrap()
        .executor_id
        .is_none());
    c.heal_agent(0, true).unwrap();
    let back = s.update_for("t1", TaskState::Running);
    assert_eq!(back.reason, Some(task_status::Reason::AgentReregistered));
    assert_eq!(back.source, Some(task_status::Source::Master));
    assert_eq!(back.agent_id, running.agent_id);
    assert!(back.uuid.is_none());
    s.call_ok(reconcile_call(&running));
    assert_eq!(
        s.update_for("t1", TaskState::Running).reason,
        Some(task_status::Reason::Reconciliation)
    );
    assert!(c.heal_agent(0, true).is_err(), "healing twice is an error");
}

/// Back without its task (the executor died on the far side and the agent kept nothing):
/// the master says nothing until asked, then TASK_GONE (task unknown, agent registered).
#[test]
fn a_partitioned_agent_back_without_its_task_answers_task_gone() {
    let c = cluster(1, |cfg| {
        cfg.agent_removal_timeout = Duration::from_secs(1);
    });
    let (s, running) = running_on_agent_1(&c, "partition-lost");
    c.partition_agent(0).unwrap();
    let early = c.heal_agent(0, false).unwrap_err();
    assert!(early.contains("not unreachable yet"), "{early}");
    s.update_for("t1", TaskState::Unreachable);
    c.heal_agent(0, false).unwrap();
    // The agent offers itself whole again: the task's resources are free.
    let o = s.offers().remove(0);
    assert_eq!(Some(&o.agent_id), running.agent_id.as_ref());
    let cpus = o.resources.iter().find(|r| r.name == "cpus").unwrap();
    assert_eq!(cpus.scalar.as_ref().unwrap().value, 4.0);
    s.call_ok(reconcile_call(&running));
    let gone = s.update();
    assert_eq!(
        (gone.task_id.value.as_str(), gone.state),
        ("t1", TaskState::Gone)
    );
    assert_eq!(gone.reason, Some(task_status::Reason::Reconciliation));
}

/// The offer is rescinded just before the ACCEPT lands: the framework hears RESCIND, then
/// TASK_DROPPED from the master with REASON_INVALID_OFFERS; the agent never sees the task.
#[test]
fn an_accept_that_crosses_a_rescind_is_answered_task_dropped() {
    let c = cluster(1, |_| {});
    c.rescind_before_next_accept(0).unwrap();
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("rescind", true));
    let o = s.offers().remove(0);
    s.accept(&[&o], vec![command_task("t1", &o, "sleep 300")]);
    assert_eq!(s.wait(event::Type::Rescind).rescind.unwrap().offer_id, o.id);
    let dropped = s.update_for("t1", TaskState::Dropped);
    assert_eq!(dropped.reason, Some(task_status::Reason::InvalidOffers));
    assert_eq!(dropped.source, Some(task_status::Source::Master));
    assert!(dropped.uuid.is_none());
    assert!(c
        .launch_log()
        .unwrap()
        .iter()
        .all(|r| r.task.as_deref() != Some("t1")));
    // Armed once: the next ACCEPT lands.
    let again = s.offers().remove(0);
    s.accept(&[&again], vec![command_task("t2", &again, "sleep 300")]);
    s.update_for("t2", TaskState::Running);
}
