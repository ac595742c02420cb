//! Wire conformance with the official Mesos protos, judged by `protoc` itself.
//!
//! Calls we encode must decode with `protoc --decode` to the expected text and re-encode to
//! the very same bytes; Events that `protoc --encode` builds from text must decode into the
//! expected values. These tests never skip: without protoc and the protos they fail, naming
//! what to install (`scripts/test.sh` installs both).

#[path = "support/cluster.rs"]
mod cluster;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use storage_framework::mesos::proto::Message;
use storage_framework::mesos::scheduler::{self, call, event};
use storage_framework::mesos::types::*;
use storage_framework::mesos::{executor, Bytes, Encoding};

const SCHEDULER_PROTO: &str = "github.com/mesos/mesos-go/api/v1/lib/scheduler/scheduler.proto";
const EXECUTOR_PROTO: &str = "github.com/mesos/mesos-go/api/v1/lib/executor/executor.proto";

fn proto_root() -> PathBuf {
    let root = std::env::var_os("MESOS_PROTO_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/share/gocode/src"));
    assert!(
        root.join(SCHEDULER_PROTO).exists(),
        "official Mesos protos not found under {} (install Debian's golang-github-mesos-mesos-go-dev, \
         or run scripts/test.sh, which does)",
        root.display()
    );
    root
}

fn protoc(args: &[&str], input: &[u8]) -> Result<Vec<u8>, String> {
    let root = proto_root();
    let mut cmd = Command::new("protoc");
    cmd.arg(format!("-I{}", root.display()));
    if Path::new("/usr/include/google/protobuf/descriptor.proto").exists() {
        cmd.arg("-I/usr/include");
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run protoc ({e}): install Debian's protobuf-compiler or run scripts/test.sh")
        });
    child
        .stdin
        .take()
        .expect("stdin piped")
        .write_all(input)
        .expect("write to protoc");
    let out = child.wait_with_output().expect("protoc output");
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn decode_text(msg_type: &str, file: &str, bytes: &[u8]) -> String {
    let out = protoc(&[&format!("--decode={msg_type}"), file], bytes)
        .unwrap_or_else(|e| panic!("protoc rejected our {msg_type}: {e}"));
    String::from_utf8(out).expect("protoc text is UTF-8")
}

fn encode_text(msg_type: &str, file: &str, text: &str) -> Vec<u8> {
    protoc(&[&format!("--encode={msg_type}"), file], text.as_bytes())
        .unwrap_or_else(|e| panic!("protoc could not encode {msg_type}: {e}\n{text}"))
}

/// Our encoding must be what protoc makes of its own reading of it, byte for byte (both write
/// fields in number order), and must decode back to the same value.
fn check_call<M: Message + PartialEq + std::fmt::Debug>(
    msg_type: &str,
    file: &str,
    m: &M,
) -> String {
    let ours = m.encode();
    let text = decode_text(msg_type, file, &ours);
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())),
        "protoc saw fields it does not know in our {msg_type}:\n{text}"
    );
    let theirs = encode_text(msg_type, file, &text);
    assert_eq!(
        ours, theirs,
        "{msg_type}: bytes differ from protoc's\n{text}"
    );
    assert_eq!(&M::decode(&theirs).expect("decode protoc bytes"), m);
    text
}

fn sched_call(text_check: &[&str], call: &scheduler::Call) {
    let text = check_call("mesos.scheduler.Call", SCHEDULER_PROTO, call);
    for needle in text_check {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

fn exec_call(text_check: &[&str], call: &executor::Call) {
    let text = check_call("mesos.executor.Call", EXECUTOR_PROTO, call);
    for needle in text_check {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

fn fw_id() -> FrameworkID {
    FrameworkID {
        value: "fw-1".into(),
    }
}
fn agent_id(v: &str) -> AgentID {
    AgentID { value: v.into() }
}
fn task_id(v: &str) -> TaskID {
    TaskID { value: v.into() }
}
fn scalar(name: &str, v: f64) -> Resource {
    Resource {
        name: name.into(),
        r#type: value::Type::Scalar,
        scalar: Some(value::Scalar { value: v }),
        ..Default::default()
    }
}

fn call_of(t: call::Type) -> scheduler::Call {
    scheduler::Call {
        framework_id: Some(fw_id()),
        r#type: Some(t),
        ..Default::default()
    }
}

#[test]
fn subscribe_call_matches_official_proto() {
    let mut c = call_of(call::Type::Subscribe);
    c.subscribe = Some(call::Subscribe {
        framework_info: FrameworkInfo {
            user: "root".into(),
            name: "storage-framework".into(),
            id: Some(fw_id()),
            failover_timeout: Some(604800.0),
            checkpoint: Some(true),
            role: Some("storage".into()),
            hostname: Some("sched-host".into()),
            capabilities: vec![
                framework_info::Capability {
                    r#type: Some(framework_info::capability::Type::PartitionAware),
                },
                framework_info::Capability {
                    r#type: Some(framework_info::capability::Type::TaskKillingState),
                },
            ],
            labels: Some(Labels {
                labels: vec![Label {
                    key: "owner".into(),
                    value: Some("ops".into()),
                }],
            }),
            ..Default::default()
        },
        suppressed_roles: vec![],
    });
    sched_call(
        &[
            "type: SUBSCRIBE",
            "user: \"root\"",
            "failover_timeout: 604800",
            "checkpoint: true",
            "type: PARTITION_AWARE",
            "type: TASK_KILLING_STATE",
            "hostname: \"sched-host\"",
            "key: \"owner\"",
        ],
        &c,
    );
}

fn launch_task() -> TaskInfo {
    TaskInfo {
        name: "storage-executor agent-1".into(),
        task_id: task_id("storage-agent-1-7"),
        agent_id: agent_id("agent-1"),
        resources: vec![scalar("cpus", 0.1), scalar("mem", 32.0)],
        executor: Some(ExecutorInfo {
            r#type: Some(executor_info::Type::Custom),
            executor_id: ExecutorID {
                value: "storage-executor-agent-1".into(),
            },
            framework_id: Some(fw_id()),
            command: Some(CommandInfo {
                uris: vec![command_info::Uri {
                    value: "http://10.0.0.1:8080/storage-executor".into(),
                    executable: Some(true),
                    extract: Some(false),
                    cache: Some(false),
                    ..Default::default()
                }],
                environment: Some(Environment {
                    variables: vec![environment::Variable {
                        name: "STORAGE_SCHEDULER_URL".into(),
                        r#type: Some(environment::variable::Type::Value),
                        value: Some("http://10.0.0.1:8080".into()),
                    }],
                }),
                value: Some("./storage-executor".into()),
                shell: Some(true),
                ..Default::default()
            }),
            resources: vec![scalar("cpus", 0.4), scalar("mem", 480.0)],
            name: Some("storage executor".into()),
            shutdown_grace_period: Some(DurationInfo {
                nanoseconds: 5_000_000_000,
            }),
            ..Default::default()
        }),
        data: Some(Bytes(vec![0, 1, 2, 255])),
        ..Default::default()
    }
}

#[test]
fn accept_with_launch_matches_official_proto() {
    let mut c = call_of(call::Type::Accept);
    c.accept = Some(call::Accept {
        offer_ids: vec![OfferID {
            value: "offer-1".into(),
        }],
        operations: vec![offer::Operation {
            r#type: Some(offer::operation::Type::Launch),
            launch: Some(offer::operation::Launch {
                task_infos: vec![launch_task()],
            }),
            ..Default::default()
        }],
        filters: Some(Filters {
            refuse_seconds: Some(5.0),
        }),
    });
    sched_call(
        &[
            "type: ACCEPT",
            "value: \"offer-1\"",
            "type: LAUNCH",
            "executable: true",
            "type: CUSTOM",
            "name: \"STORAGE_SCHEDULER_URL\"",
            "nanoseconds: 5000000000",
            "refuse_seconds: 5",
        ],
        &c,
    );
}

#[test]
fn small_calls_match_official_proto() {
    let mut decline = call_of(call::Type::Decline);
    decline.decline = Some(call::Decline {
        offer_ids: vec![
            OfferID { value: "o1".into() },
            OfferID { value: "o2".into() },
        ],
        filters: Some(Filters {
            refuse_seconds: Some(120.0),
        }),
    });
    sched_call(&["type: DECLINE", "refuse_seconds: 120"], &decline);

    let mut ack = call_of(call::Type::Acknowledge);
    ack.acknowledge = Some(call::Acknowledge {
        agent_id: agent_id("a1"),
        task_id: task_id("t1"),
        uuid: Bytes((0u8..16).collect()),
    });
    sched_call(&["type: ACKNOWLEDGE", "uuid: \"\\000\\001"], &ack);

    let mut rec = call_of(call::Type::Reconcile);
    rec.reconcile = Some(call::Reconcile {
        tasks: vec![
            call::reconcile::Task {
                task_id: task_id("t1"),
                agent_id: Some(agent_id("a1")),
            },
            call::reconcile::Task {
                task_id: task_id("t2"),
                agent_id: None,
            },
        ],
    });
    sched_call(&["type: RECONCILE", "value: \"t2\""], &rec);

    let mut kill = call_of(call::Type::Kill);
    kill.kill = Some(call::Kill {
        task_id: task_id("t1"),
        agent_id: Some(agent_id("a1")),
        kill_policy: None,
    });
    sched_call(&["type: KILL"], &kill);

    let mut shutdown = call_of(call::Type::Shutdown);
    shutdown.shutdown = Some(call::Shutdown {
        executor_id: ExecutorID { value: "e1".into() },
        agent_id: agent_id("a1"),
    });
    sched_call(&["type: SHUTDOWN", "value: \"e1\""], &shutdown);

    let mut revive = call_of(call::Type::Revive);
    revive.revive = Some(call::Revive {
        roles: vec!["storage".into()],
    });
    sched_call(&["type: REVIVE", "roles: \"storage\""], &revive);

    let mut suppress = call_of(call::Type::Suppress);
    suppress.suppress = Some(call::Suppress::default());
    sched_call(&["type: SUPPRESS"], &suppress);

    sched_call(&["type: TEARDOWN"], &call_of(call::Type::Teardown));

    let mut msg = call_of(call::Type::Message);
    msg.message = Some(call::Message {
        agent_id: agent_id("a1"),
        executor_id: ExecutorID { value: "e1".into() },
        data: Bytes(b"hello".to_vec()),
    });
    sched_call(&["type: MESSAGE", "data: \"hello\""], &msg);

    let mut req = call_of(call::Type::Request);
    req.request = Some(call::Request {
        requests: vec![Request {
            agent_id: Some(agent_id("a1")),
            resources: vec![scalar("cpus", 1.5)],
        }],
    });
    sched_call(&["type: REQUEST", "value: 1.5"], &req);

    let mut accept_io = call_of(call::Type::AcceptInverseOffers);
    accept_io.accept_inverse_offers = Some(call::AcceptInverseOffers {
        inverse_offer_ids: vec![OfferID { value: "i1".into() }],
        filters: Some(Filters {
            refuse_seconds: Some(5.0),
        }),
    });
    sched_call(
        &[
            "type: ACCEPT_INVERSE_OFFERS",
            "accept_inverse_offers {",
            "inverse_offer_ids {",
            "refuse_seconds: 5",
        ],
        &accept_io,
    );
    let mut decline_io = call_of(call::Type::DeclineInverseOffers);
    decline_io.decline_inverse_offers = Some(call::DeclineInverseOffers {
        inverse_offer_ids: vec![
            OfferID { value: "i2".into() },
            OfferID { value: "i3".into() },
        ],
        filters: None,
    });
    sched_call(
        &[
            "type: DECLINE_INVERSE_OFFERS",
            "decline_inverse_offers {",
            "value: \"i3\"",
        ],
        &decline_io,
    );
}

fn status(state: TaskState) -> TaskStatus {
    TaskStatus {
        task_id: task_id("t1"),
        state,
        message: Some("phase packages done".into()),
        source: Some(task_status::Source::Executor),
        executor_id: Some(ExecutorID { value: "e1".into() }),
        timestamp: Some(1_700_000_000.25),
        uuid: Some(Bytes(vec![9; 16])),
        data: Some(Bytes(b"{\"phase\":\"packages\"}".to_vec())),
        ..Default::default()
    }
}

#[test]
fn executor_calls_match_official_proto() {
    let base = || executor::Call {
        executor_id: ExecutorID { value: "e1".into() },
        framework_id: fw_id(),
        ..Default::default()
    };
    let mut sub = base();
    sub.r#type = Some(executor::call::Type::Subscribe);
    sub.subscribe = Some(executor::call::Subscribe {
        unacknowledged_tasks: vec![launch_task()],
        unacknowledged_updates: vec![executor::call::Update {
            status: status(TaskState::Running),
        }],
    });
    exec_call(
        &[
            "type: SUBSCRIBE",
            "unacknowledged_tasks {",
            "state: TASK_RUNNING",
        ],
        &sub,
    );

    let mut upd = base();
    upd.r#type = Some(executor::call::Type::Update);
    upd.update = Some(executor::call::Update {
        status: TaskStatus {
            reason: Some(task_status::Reason::ContainerLaunchFailed),
            ..status(TaskState::Failed)
        },
    });
    exec_call(
        &[
            "type: UPDATE",
            "state: TASK_FAILED",
            "source: SOURCE_EXECUTOR",
            "reason: REASON_CONTAINER_LAUNCH_FAILED",
            "timestamp: 1700000000.25",
        ],
        &upd,
    );

    let mut msg = base();
    msg.r#type = Some(executor::call::Type::Message);
    msg.message = Some(executor::call::Message {
        data: Bytes(b"x".to_vec()),
    });
    exec_call(&["type: MESSAGE"], &msg);
}

fn sched_event(text: &str) -> scheduler::Event {
    let bytes = encode_text("mesos.scheduler.Event", SCHEDULER_PROTO, text);
    let ev = scheduler::Event::decode(&bytes).unwrap_or_else(|e| panic!("{e}\n{text}"));
    // And the JSON form of the same event survives a round trip.
    let json = Encoding::Json.encode(&ev);
    let back: scheduler::Event = Encoding::Json.decode(&json).expect("JSON round trip");
    assert_eq!(back, ev);
    ev
}

fn exec_event(text: &str) -> executor::Event {
    let bytes = encode_text("mesos.executor.Event", EXECUTOR_PROTO, text);
    executor::Event::decode(&bytes).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

const OFFER_TEXT: &str = r#"
  id { value: "OFFER_ID" }
  framework_id { value: "fw-1" }
  agent_id { value: "AGENT_ID" }
  hostname: "HOST"
  url { scheme: "http" address { hostname: "HOST" ip: "10.0.0.5" port: 5051 } path: "/slave(1)" }
  resources { name: "cpus" type: SCALAR scalar { value: 4 } role: "*" }
  resources { name: "mem" type: SCALAR scalar { value: 15360 } role: "*" }
  resources { name: "disk" type: SCALAR scalar { value: 100000 } role: "*" }
  resources { name: "ports" type: RANGES ranges { range { begin: 31000 end: 31099 } range { begin: 32000 end: 32010 } } }
  attributes { name: "storage-sds-domains" type: TEXT text { value: "pd1,pd2" } }
  attributes { name: "rack" type: SCALAR scalar { value: 3 } }
  attributes { name: "zones" type: SET set { item: "a" item: "b" } }
  attributes { name: "slots" type: RANGES ranges { range { begin: 1 end: 4 } } }
  executor_ids { value: "storage-executor-HOST" }
  unavailability { start { nanoseconds: 1 } }
"#;

#[test]
fn offers_event_decodes() {
    let offer = |i: u32| {
        OFFER_TEXT
            .replace("OFFER_ID", &format!("offer-{i}"))
            .replace("AGENT_ID", &format!("agent-{i}"))
            .replace("HOST", &format!("host-{i}"))
    };
    let text = format!(
        "type: OFFERS\noffers {{\n offers {{ {} }}\n offers {{ {} }}\n offers {{ {} }}\n}}",
        offer(1),
        offer(2),
        offer(3)
    );
    let ev = sched_event(&text);
    assert_eq!(ev.r#type, Some(event::Type::Offers));
    let offers = &ev.offers.expect("offers").offers;
    assert_eq!(offers.len(), 3);
    let o = &offers[1];
    assert_eq!(o.id.value, "offer-2");
    assert_eq!(o.agent_id.value, "agent-2");
    assert_eq!(o.hostname, "host-2");
    assert_eq!(o.url.as_ref().unwrap().address.port, 5051);
    assert_eq!(o.resources.len(), 4);
    assert_eq!(o.resources[1].scalar.as_ref().unwrap().value, 15360.0);
    let ports = o.resources[3].ranges.as_ref().unwrap();
    assert_eq!(ports.range.len(), 2);
    assert_eq!((ports.range[1].begin, ports.range[1].end), (32000, 32010));
    assert_eq!(o.attributes.len(), 4);
    assert_eq!(o.attributes[0].r#type, value::Type::Text);
    assert_eq!(o.attributes[0].text.as_ref().unwrap().value, "pd1,pd2");
    assert_eq!(o.attributes[2].set.as_ref().unwrap().item, vec!["a", "b"]);
    assert_eq!(o.executor_ids[0].value, "storage-executor-host-2");
    assert_eq!(o.unavailability.as_ref().unwrap().start.nanoseconds, 1);
}

#[test]
fn update_subscribed_and_small_events_decode() {
    let ev = sched_event(
        r#"type: UPDATE update { status {
            task_id { value: "t1" } state: TASK_FAILED message: "no disks"
            source: SOURCE_EXECUTOR reason: REASON_EXECUTOR_TERMINATED
            agent_id { value: "a1" } executor_id { value: "e1" } timestamp: 12.5
            uuid: "\001\002\003\004\005\006\007\010\011\012\013\014\015\016\017\020" } }"#,
    );
    let st = ev.update.expect("update").status;
    assert_eq!(st.state, TaskState::Failed);
    assert_eq!(st.reason, Some(task_status::Reason::ExecutorTerminated));
    assert_eq!(st.uuid.as_ref().unwrap().0, (1u8..=16).collect::<Vec<_>>());
    assert_eq!(st.message.as_deref(), Some("no disks"));

    let ev = sched_event(
        r#"type: SUBSCRIBED subscribed { framework_id { value: "fw-9" } heartbeat_interval_seconds: 15
           master_info { id: "m1" ip: 16777343 port: 5050 hostname: "master" version: "1.4.0"
             address { hostname: "master" ip: "127.0.0.1" port: 5050 } } }"#,
    );
    let sub = ev.subscribed.expect("subscribed");
    assert_eq!(sub.framework_id.value, "fw-9");
    assert_eq!(sub.heartbeat_interval_seconds, Some(15.0));
    assert_eq!(sub.master_info.unwrap().version.as_deref(), Some("1.4.0"));

    let ev = sched_event(r#"type: RESCIND rescind { offer_id { value: "o7" } }"#);
    assert_eq!(ev.rescind.unwrap().offer_id.value, "o7");

    let ev = sched_event(
        r#"type: FAILURE failure { agent_id { value: "a1" } executor_id { value: "e1" } status: -9 }"#,
    );
    let f = ev.failure.unwrap();
    assert_eq!(f.status, Some(-9));
    assert_eq!(f.executor_id.unwrap().value, "e1");

    let ev = sched_event(r#"type: ERROR error { message: "Framework has been removed" }"#);
    assert_eq!(ev.error.unwrap().message, "Framework has been removed");

    let ev = sched_event("type: HEARTBEAT");
    assert_eq!(ev.r#type, Some(event::Type::Heartbeat));

    let ev = sched_event(
        r#"type: INVERSE_OFFERS inverse_offers { inverse_offers { id { value: "i1" }
           url { scheme: "http" address { hostname: "h1" ip: "10.0.0.1" port: 5051 } }
           framework_id { value: "fw-1" } agent_id { value: "a1" }
           unavailability { start { nanoseconds: 5 } duration { nanoseconds: 7 } } } }"#,
    );
    assert_eq!(ev.r#type, Some(event::Type::InverseOffers));
    let io = &ev.inverse_offers.expect("inverse_offers").inverse_offers[0];
    assert_eq!(io.id.value, "i1");
    assert_eq!(io.framework_id.value, "fw-1");
    assert_eq!(io.agent_id.as_ref().unwrap().value, "a1");
    assert_eq!(io.url.as_ref().unwrap().address.port, 5051);
    assert_eq!(io.unavailability.start.nanoseconds, 5);
    assert_eq!(io.unavailability.duration.as_ref().unwrap().nanoseconds, 7);

    let ev = sched_event(
        r#"type: RESCIND_INVERSE_OFFER rescind_inverse_offer { inverse_offer_id { value: "i1" } }"#,
    );
    assert_eq!(
        ev.rescind_inverse_offer.unwrap().inverse_offer_id.value,
        "i1"
    );
}

#[test]
fn missing_required_field_is_named() {
    // protoc refuses to encode a message lacking a required field, so build one by hand:
    // an UPDATE whose TaskStatus has a task_id but no state.
    let status = [0x0a, 0x04, 0x0a, 0x02, b't', b'1'];
    let mut update = vec![0x0a, status.len() as u8];
    update.extend_from_slice(&status);
    let mut ev = vec![0x08, 0x04, 0x2a, update.len() as u8];
    ev.extend_from_slice(&update);
    let err = scheduler::Event::decode(&ev).unwrap_err().to_string();
    assert!(err.contains("update.status"), "{err}");
    assert!(err.contains("`state`"), "{err}");
    assert!(err.contains("mesos.TaskStatus"), "{err}");
}

#[test]
fn executor_events_decode() {
    let ev = exec_event(
        r#"type: LAUNCH launch { task { name: "storage" task_id { value: "t1" } agent_id { value: "a1" }
           resources { name: "cpus" type: SCALAR scalar { value: 0.1 } }
           data: "plan" } }"#,
    );
    let task = ev.launch.unwrap().task;
    assert_eq!(task.task_id.value, "t1");
    assert_eq!(task.data.unwrap().0, b"plan");

    let ev = exec_event(
        r#"type: ACKNOWLEDGED acknowledged { task_id { value: "t1" } uuid: "0123456789abcdef" }"#,
    );
    assert_eq!(ev.acknowledged.unwrap().uuid.0, b"0123456789abcdef");

    let ev = exec_event("type: SHUTDOWN");
    assert_eq!(ev.r#type, Some(executor::event::Type::Shutdown));

    let ev = exec_event(r#"type: KILL kill { task_id { value: "t1" } }"#);
    assert_eq!(ev.kill.unwrap().task_id.value, "t1");

    let ev = exec_event(
        r#"type: SUBSCRIBED subscribed {
           executor_info { executor_id { value: "e1" } command { value: "./storage-executor" } }
           framework_info { user: "root" name: "storage-framework" id { value: "fw-1" } }
           agent_info { hostname: "host-1" id { value: "a1" }
             attributes { name: "storage-persona" type: TEXT text { value: "data" } } }
           container_id { value: "c1" parent { value: "c0" } } }"#,
    );
    let s = ev.subscribed.unwrap();
    assert_eq!(s.agent_info.hostname, "host-1");
    assert_eq!(s.container_id.unwrap().parent.unwrap().value, "c0");

    let ev = exec_event(r#"type: MESSAGE message { data: "hi" }"#);
    assert_eq!(ev.message.unwrap().data.0, b"hi");

    let ev = exec_event(r#"type: ERROR error { message: "bad" }"#);
    assert_eq!(ev.error.unwrap().message, "bad");
}

#[test]
fn json_form_matches_mesos() {
    // Shapes from Mesos' scheduler HTTP API documentation: proto field names, enum names,
    // bytes as base64.
    let mut ack = call_of(call::Type::Acknowledge);
    ack.acknowledge = Some(call::Acknowledge {
        agent_id: agent_id("a1"),
        task_id: task_id("t1"),
        uuid: Bytes(b"\x01\x02\x03".to_vec()),
    });
    let json: serde_json::Value = serde_json::from_slice(&Encoding::Json.encode(&ack)).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "framework_id": {"value": "fw-1"},
            "type": "ACKNOWLEDGE",
            "acknowledge": {"agent_id": {"value": "a1"}, "task_id": {"value": "t1"}, "uuid": "AQID"}
        })
    );

    let body = br#"{"type":"SUBSCRIBED","subscribed":{"framework_id":{"value":"fw"},
        "heartbeat_interval_seconds":15}}"#;
    let ev: scheduler::Event = Encoding::Json.decode(body).unwrap();
    assert_eq!(
        ev.subscribed.unwrap().heartbeat_interval_seconds,
        Some(15.0)
    );

    // Unknown fields and unknown enum names from a newer master are not fatal.
    let body = br#"{"type":"UPDATE_FROM_A_NEWER_MASTER","update_from_a_newer_master":{"x":1}}"#;
    let ev: scheduler::Event = Encoding::Json.decode(body).unwrap();
    assert!(matches!(ev.r#type, Some(event::Type::Other(_))));

    // A missing required field is an error that names it.
    let err = Encoding::Json
        .decode::<scheduler::Event>(br#"{"type":"RESCIND","rescind":{}}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("offer_id"), "{err}");
}

#[test]
fn protoc_unknown_field_check_has_teeth() {
    // The conformance check above relies on protoc printing fields it does not know as
    // numbers; make sure it does, with a field number that no Call has.
    let mut bytes = call_of(call::Type::Teardown).encode();
    bytes.extend_from_slice(&[0xf8, 0x07, 0x01]); // field 127, varint 1
    let text = decode_text("mesos.scheduler.Call", SCHEDULER_PROTO, &bytes);
    assert!(text.lines().any(|l| l.starts_with("127:")), "{text}");
}

/// Raw bytes some program sent, judged by protoc alone: every field is known to the official
/// schema, and protoc's re-encoding of its reading is the same bytes. Returns protoc's text.
fn check_wire(msg_type: &str, file: &str, bytes: &[u8], origin: &Path) -> String {
    let text = protoc(&[&format!("--decode={msg_type}"), file], bytes)
        .map(|t| String::from_utf8(t).expect("protoc text is UTF-8"))
        .unwrap_or_else(|e| panic!("protoc rejected {}: {e}", origin.display()));
    assert!(
        !text
            .lines()
            .any(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())),
        "protoc saw fields it does not know in {}:\n{text}",
        origin.display()
    );
    let theirs = encode_text(msg_type, file, &text);
    assert_eq!(
        bytes,
        &theirs[..],
        "{}: bytes differ from protoc's\n{text}",
        origin.display()
    );
    text
}

/// What the real binaries send, captured on the dev cluster's wire (its wire tap): the
/// scheduler's SUBSCRIBE (`framework_info` as the flags make it), the ACCEPTs of its
/// launches (`launch::task_info`: URIs, environment, labels, resources), acknowledgements,
/// SUPPRESS, reconciliation, a relaunch after an executor crash and the TEARDOWN of
/// `-teardown`; and the executor's SUBSCRIBE and UPDATEs. Every one goes through protoc.
#[test]
fn what_the_real_binaries_send_matches_official_proto() {
    use devcluster::master;
    use std::time::Duration;
    let dir = std::env::temp_dir().join(format!("conformance-wire-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let tap = dir.join("tap");
    let m = master::start(master::MasterConfig {
        agents: 3,
        heartbeat_interval: Duration::from_secs(1),
        work_dir: dir.join("mesos"),
        wire_tap: Some(tap.clone()),
        // The executors prepare fake hosts, never the machine running the tests.
        host_standins: Some(cluster::host_standins(None)),
        ..Default::default()
    })
    .expect("dev cluster");
    let store = dir.join("state.json");
    let port = cluster::free_port();
    let args = cluster::scheduler_args(&m.addr().to_string(), port, &store, "Scaleio123");
    let mut sched = Command::new(cluster::scheduler_bin())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start storage-scheduler");
    let running_tasks = |m: &master::MasterHandle| -> Vec<String> {
        let snap = m.snapshot().expect("snapshot");
        let mut out = Vec::new();
        for a in snap["agents"].as_array().into_iter().flatten() {
            for e in a["executors"].as_array().into_iter().flatten() {
                for t in e["tasks"].as_array().into_iter().flatten() {
                    if t["state"] == "TASK_RUNNING" {
                        out.push(t["id"].as_str().unwrap_or("").to_string());
                    }
                }
            }
        }
        out
    };
    let first = cluster::wait_for("3 running executors", Duration::from_secs(60), || {
        Some(running_tasks(&m)).filter(|t| t.len() == 3)
    });
    // A crash: the scheduler relaunches (a second ACCEPT of a new task id).
    let victim = first[0].replacen("storage.", "storage-executor.", 1);
    let agent = m
        .agents()
        .expect("agents")
        .into_iter()
        .find(|a| victim.contains(&a.hostname))
        .expect("victim's agent");
    m.kill_executor(agent.index, &victim)
        .expect("kill executor");
    cluster::wait_for("the relaunch", Duration::from_secs(60), || {
        let now = running_tasks(&m);
        (now.len() == 3 && !now.contains(&first[0])).then_some(())
    });
    let _ = sched.kill();
    let _ = sched.wait();
    let mut teardown = args.clone();
    teardown.push("-teardown".into());
    let out = Command::new(cluster::scheduler_bin())
        .args(&teardown)
        .output()
        .expect("-teardown");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut files: Vec<PathBuf> = std::fs::read_dir(&tap)
        .expect("tap dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let mut scheduler_text = String::new();
    let mut executor_text = String::new();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.ends_with(".pb"),
            "{name}: both binaries speak protobuf here"
        );
        let bytes = std::fs::read(f).expect("tapped call");
        if name.contains(".scheduler.") {
            scheduler_text += &check_wire("mesos.scheduler.Call", SCHEDULER_PROTO, &bytes, f);
        } else {
            executor_text += &check_wire("mesos.executor.Call", EXECUTOR_PROTO, &bytes, f);
        }
    }
    for needle in [
        "type: SUBSCRIBE",
        "webui_url: \"http://127.0.0.1:",
        "type: PARTITION_AWARE",
        "failover_timeout:",
        "type: ACCEPT",
        "type: LAUNCH",
        // The executor secret travels in TaskInfo.data, never in the environment.
        "data: ",
        "labels {",
        "shutdown_grace_period {",
        "type: ACKNOWLEDGE",
        "type: SUPPRESS",
        "type: TEARDOWN",
    ] {
        assert!(
            scheduler_text.contains(needle),
            "the scheduler never sent {needle:?}:\n{scheduler_text}"
        );
    }
    assert!(
        !scheduler_text.contains("STORAGE_EXECUTOR_SECRET"),
        "the executor secret is in an environment the master's state endpoints show"
    );
    assert!(
        scheduler_text.matches("type: LAUNCH").count() >= 4,
        "three launches and a relaunch"
    );
    for needle in ["type: SUBSCRIBE", "type: UPDATE", "state: TASK_RUNNING"] {
        assert!(
            executor_text.contains(needle),
            "the executor never sent {needle:?}:\n{executor_text}"
        );
    }
    drop(m);
    let _ = std::fs::remove_dir_all(&dir);
}
