//! Hostile-input robustness of the wire layer: random bytes and mutated valid encodings go
//! through every decoder a peer can reach (RecordIO, protobuf and JSON Events and Calls).
//! A panic anywhere fails the test; inputs that do decode must survive re-encoding.
//!
//! The generator is a fixed-seed xorshift, so every run sees the same inputs and a failure
//! reproduces exactly; the assertion messages carry the offending input.

use std::fmt::Debug;

use serde::{de::DeserializeOwned, Serialize};
use storage_framework::mesos::proto::{DecodeErrorKind, Message, MAX_DEPTH};
use storage_framework::mesos::recordio::{self, Reader};
use storage_framework::mesos::{
    executor, scheduler, value, AgentID, AgentInfo, Attribute, Bytes, CodecError, CommandInfo,
    ContainerID, DurationInfo, Encoding, ExecutorID, ExecutorInfo, FrameworkID, FrameworkInfo,
    KillPolicy, Label, Labels, MasterInfo, Offer, OfferID, Resource, TaskGroupInfo, TaskID,
    TaskInfo, TaskState, TaskStatus, TimeInfo,
};

struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        // Zero is xorshift's one fixed point.
        XorShift(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

/// One random edit of `input`: bit flips, truncation, insertion, deletion, duplication or
/// an overwrite with a boundary byte.
fn mutate(rng: &mut XorShift, input: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    let edits = 1 + rng.below(3);
    for _ in 0..edits {
        match rng.below(7) {
            0 | 1 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] ^= 1 << rng.below(8);
            }
            2 => {
                let keep = rng.below(v.len() + 1);
                v.truncate(keep);
            }
            3 => {
                let at = rng.below(v.len() + 1);
                let n = 1 + rng.below(8);
                let ins = rng.bytes(n);
                v.splice(at..at, ins);
            }
            4 if !v.is_empty() => {
                let at = rng.below(v.len());
                let n = 1 + rng.below((v.len() - at).min(8));
                v.drain(at..at + n);
            }
            5 if !v.is_empty() => {
                let at = rng.below(v.len());
                let n = 1 + rng.below((v.len() - at).min(16));
                let dup = v[at..at + n].to_vec();
                v.splice(at..at, dup);
            }
            _ if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = [0x00, 0x7f, 0x80, 0xff, b'"', b'{', b'\n', b'9'][rng.below(8)];
            }
            _ => v.push(rng.next() as u8),
        }
    }
    v
}

/// Decodes `input` both ways. What protobuf accepts must re-encode to bytes that decode and
/// re-encode identically; what JSON accepts must survive a JSON round trip and cross over
/// to protobuf unchanged. Returns whether each encoding accepted the input.
fn exercise<M>(input: &[u8]) -> (bool, bool)
where
    M: Message + Serialize + DeserializeOwned + PartialEq + Debug,
{
    let proto_ok = match M::decode(input) {
        Ok(m) => {
            let again = m.encode();
            let m2 = M::decode(&again).unwrap_or_else(|e| {
                panic!("{}: re-encoding of {input:?} does not decode: {e}", M::NAME)
            });
            assert_eq!(m2.encode(), again, "{}: unstable re-encoding", M::NAME);
            true
        }
        Err(e) => {
            // Errors must render without panicking and name the message.
            assert!(e.to_string().starts_with(M::NAME), "{e}");
            false
        }
    };
    let json_ok = match Encoding::Json.decode::<M>(input) {
        Ok(m) => {
            let again = Encoding::Json.encode(&m);
            let m2: M = Encoding::Json.decode(&again).unwrap_or_else(|e| {
                panic!(
                    "{}: JSON re-encoding {again:?} does not decode: {e}",
                    M::NAME
                )
            });
            assert_eq!(m2, m, "{}: JSON round trip changed the message", M::NAME);
            match M::decode(&m.encode()) {
                Ok(via_proto) => {
                    assert_eq!(
                        via_proto,
                        m,
                        "{}: JSON -> protobuf changed the message",
                        M::NAME
                    )
                }
                // serde_json allows deeper nesting than the protobuf decoder does.
                Err(e) if *e.kind() == DecodeErrorKind::TooDeep => {}
                Err(e) => panic!("{}: JSON-accepted message fails protobuf: {e}", M::NAME),
            }
            true
        }
        Err(e) => {
            assert!(matches!(e, CodecError::Json { .. }));
            assert!(e.to_string().contains(M::NAME), "{e}");
            false
        }
    };
    (proto_ok, json_ok)
}

/// Runs every message type over `input`; returns whether any accepted it as protobuf and
/// whether any accepted it as JSON.
fn exercise_all(input: &[u8]) -> (bool, bool) {
    [
        exercise::<scheduler::Event>(input),
        exercise::<executor::Event>(input),
        exercise::<scheduler::Call>(input),
        exercise::<executor::Call>(input),
    ]
    .into_iter()
    .fold((false, false), |(p, j), (p2, j2)| (p || p2, j || j2))
}

/// Reads `stream` as RecordIO to its end or first error, decoding every record as each
/// Event type. Returns the number of records read.
fn exercise_stream(stream: &[u8], max_record: usize) -> usize {
    let mut reader = Reader::with_max_record(stream, max_record);
    let mut n = 0;
    // Every record consumes at least its two prefix bytes, so this bound is never reached by
    // a reader that makes progress.
    for _ in 0..=stream.len() {
        match reader.next_record() {
            Ok(Some(record)) => {
                n += 1;
                exercise::<scheduler::Event>(record);
                exercise::<executor::Event>(record);
            }
            Ok(None) => return n,
            Err(e) => {
                assert!(e.to_string().starts_with("recordio: "), "{e}");
                return n;
            }
        }
    }
    panic!("recordio reader made no progress on {stream:?}");
}

fn labels() -> Option<Labels> {
    Some(Labels {
        labels: vec![
            Label {
                key: "k".into(),
                value: Some("v\n\"\u{e9}".into()),
            },
            Label {
                key: Default::default(),
                value: None,
            },
        ],
    })
}

fn resources() -> Vec<Resource> {
    vec![
        Resource {
            name: "cpus".into(),
            r#type: value::Type::Scalar,
            scalar: Some(value::Scalar { value: 0.25 }),
            role: Some("storage".into()),
            ..Default::default()
        },
        Resource {
            name: "ports".into(),
            r#type: value::Type::Ranges,
            ranges: Some(value::Ranges {
                range: vec![value::Range {
                    begin: 31000,
                    end: u64::MAX,
                }],
            }),
            ..Default::default()
        },
        Resource {
            name: "disks".into(),
            r#type: value::Type::Set,
            set: Some(value::Set {
                item: vec!["sdb".into(), "sdc".into()],
            }),
            ..Default::default()
        },
    ]
}

fn task_status() -> TaskStatus {
    TaskStatus {
        task_id: TaskID {
            value: "sds-agent-1".into(),
        },
        state: TaskState::Failed,
        message: Some("exit 1".into()),
        data: Some(Bytes(vec![0, 1, 2, 255])),
        agent_id: Some(AgentID {
            value: "a1-S0".into(),
        }),
        timestamp: Some(1.7e9),
        uuid: Some(Bytes(vec![0xab; 16])),
        healthy: Some(false),
        labels: labels(),
        unreachable_time: Some(TimeInfo { nanoseconds: -5 }),
        ..Default::default()
    }
}

fn task_info() -> TaskInfo {
    TaskInfo {
        name: "sds".into(),
        task_id: TaskID { value: "t1".into() },
        agent_id: AgentID { value: "a1".into() },
        resources: resources(),
        command: Some(CommandInfo {
            value: Some("/bin/true".into()),
            arguments: vec!["a".into(), "".into()],
            shell: Some(false),
            ..Default::default()
        }),
        kill_policy: Some(KillPolicy {
            grace_period: Some(DurationInfo {
                nanoseconds: 3_000_000_000,
            }),
        }),
        data: Some(Bytes(b"{\"mdm\":[]}".to_vec())),
        labels: labels(),
        ..Default::default()
    }
}

fn scheduler_events() -> Vec<scheduler::Event> {
    use scheduler::event::{self, Type};
    let ev = |t: Type| scheduler::Event {
        r#type: Some(t),
        ..Default::default()
    };
    vec![
        ev(Type::Heartbeat),
        scheduler::Event {
            subscribed: Some(event::Subscribed {
                framework_id: FrameworkID {
                    value: "fw-1".into(),
                },
                heartbeat_interval_seconds: Some(15.0),
                master_info: Some(MasterInfo {
                    id: "m".into(),
                    ip: 0x0100_007f,
                    port: 5050,
                    hostname: Some("master".into()),
                    ..Default::default()
                }),
            }),
            ..ev(Type::Subscribed)
        },
        scheduler::Event {
            offers: Some(event::Offers {
                offers: vec![Offer {
                    id: OfferID { value: "o1".into() },
                    framework_id: FrameworkID {
                        value: "fw-1".into(),
                    },
                    agent_id: AgentID { value: "a1".into() },
                    hostname: "agent1".into(),
                    resources: resources(),
                    attributes: vec![Attribute {
                        name: "rack".into(),
                        r#type: value::Type::Text,
                        text: Some(value::Text { value: "r1".into() }),
                        ..Default::default()
                    }],
                    executor_ids: vec![ExecutorID { value: "e".into() }],
                    ..Default::default()
                }],
            }),
            ..ev(Type::Offers)
        },
        scheduler::Event {
            rescind: Some(event::Rescind {
                offer_id: OfferID { value: "o1".into() },
            }),
            ..ev(Type::Rescind)
        },
        scheduler::Event {
            update: Some(event::Update {
                status: task_status(),
            }),
            ..ev(Type::Update)
        },
        scheduler::Event {
            message: Some(event::Message {
                agent_id: AgentID { value: "a1".into() },
                executor_id: ExecutorID { value: "e".into() },
                data: Bytes(b"\x00\n5\n".to_vec()),
            }),
            ..ev(Type::Message)
        },
        scheduler::Event {
            failure: Some(event::Failure {
                agent_id: Some(AgentID { value: "a1".into() }),
                executor_id: None,
                status: Some(-1),
            }),
            ..ev(Type::Failure)
        },
        scheduler::Event {
            error: Some(event::Error {
                message: "framework removed".into(),
            }),
            ..ev(Type::Error)
        },
    ]
}

fn executor_events() -> Vec<executor::Event> {
    use executor::event::{self, Type};
    let ev = |t: Type| executor::Event {
        r#type: Some(t),
        ..Default::default()
    };
    vec![
        ev(Type::Shutdown),
        executor::Event {
            subscribed: Some(event::Subscribed {
                executor_info: ExecutorInfo {
                    executor_id: ExecutorID { value: "e".into() },
                    resources: resources(),
                    data: Some(Bytes(vec![9; 40])),
                    ..Default::default()
                },
                framework_info: FrameworkInfo {
                    user: "root".into(),
                    name: "storage".into(),
                    roles: vec!["storage".into()],
                    checkpoint: Some(true),
                    failover_timeout: Some(604800.0),
                    labels: labels(),
                    ..Default::default()
                },
                agent_info: AgentInfo {
                    hostname: "agent1".into(),
                    port: Some(5051),
                    resources: resources(),
                    ..Default::default()
                },
                container_id: Some(ContainerID {
                    value: "child".into(),
                    parent: Some(Box::new(ContainerID {
                        value: "parent".into(),
                        parent: None,
                    })),
                }),
            }),
            ..ev(Type::Subscribed)
        },
        executor::Event {
            launch: Some(event::Launch { task: task_info() }),
            ..ev(Type::Launch)
        },
        executor::Event {
            launch_group: Some(event::LaunchGroup {
                task_group: TaskGroupInfo {
                    tasks: vec![task_info(), task_info()],
                },
            }),
            ..ev(Type::LaunchGroup)
        },
        executor::Event {
            kill: Some(event::Kill {
                task_id: TaskID { value: "t1".into() },
                kill_policy: None,
            }),
            ..ev(Type::Kill)
        },
        executor::Event {
            acknowledged: Some(event::Acknowledged {
                task_id: TaskID { value: "t1".into() },
                uuid: Bytes(vec![1; 16]),
            }),
            ..ev(Type::Acknowledged)
        },
        executor::Event {
            message: Some(event::Message {
                data: Bytes(vec![]),
            }),
            ..ev(Type::Message)
        },
        executor::Event {
            error: Some(event::Error {
                message: "e".into(),
            }),
            ..ev(Type::Error)
        },
    ]
}

fn scheduler_calls() -> Vec<scheduler::Call> {
    use scheduler::call::{self, Type};
    let fw = || {
        Some(FrameworkID {
            value: "fw-1".into(),
        })
    };
    let call = |t: Type| scheduler::Call {
        framework_id: fw(),
        r#type: Some(t),
        ..Default::default()
    };
    vec![
        scheduler::Call {
            framework_id: None,
            subscribe: Some(call::Subscribe {
                framework_info: FrameworkInfo {
                    user: "root".into(),
                    name: "storage".into(),
                    ..Default::default()
                },
                suppressed_roles: vec!["r".into()],
            }),
            ..call(Type::Subscribe)
        },
        scheduler::Call {
            accept: Some(call::Accept {
                offer_ids: vec![OfferID { value: "o1".into() }],
                operations: vec![storage_framework::mesos::offer::Operation {
                    r#type: Some(storage_framework::mesos::offer::operation::Type::Launch),
                    launch: Some(storage_framework::mesos::offer::operation::Launch {
                        task_infos: vec![task_info()],
                    }),
                    ..Default::default()
                }],
                filters: Some(storage_framework::mesos::Filters {
                    refuse_seconds: Some(5.0),
                }),
            }),
            ..call(Type::Accept)
        },
        scheduler::Call {
            acknowledge: Some(call::Acknowledge {
                agent_id: AgentID { value: "a1".into() },
                task_id: TaskID { value: "t1".into() },
                uuid: Bytes(vec![7; 16]),
            }),
            ..call(Type::Acknowledge)
        },
        scheduler::Call {
            reconcile: Some(call::Reconcile {
                tasks: vec![call::reconcile::Task {
                    task_id: TaskID { value: "t1".into() },
                    agent_id: None,
                }],
            }),
            ..call(Type::Reconcile)
        },
        call(Type::Teardown),
    ]
}

/// Every valid sample, in both encodings, as (protobuf, JSON) pairs; also checks that each
/// decodes back to itself, so the mutation tests start from inputs known to be good.
fn valid_encodings() -> Vec<(Vec<u8>, Vec<u8>)> {
    fn both<M>(m: &M) -> (Vec<u8>, Vec<u8>)
    where
        M: Message + Serialize + DeserializeOwned + PartialEq + Debug,
    {
        let pb = Encoding::Protobuf.encode(m);
        let js = Encoding::Json.encode(m);
        assert_eq!(&Encoding::Protobuf.decode::<M>(&pb).unwrap(), m);
        assert_eq!(&Encoding::Json.decode::<M>(&js).unwrap(), m);
        assert!(exercise::<M>(&pb).0);
        assert!(exercise::<M>(&js).1);
        (pb, js)
    }
    let mut out = Vec::new();
    out.extend(scheduler_events().iter().map(both));
    out.extend(executor_events().iter().map(both));
    out.extend(scheduler_calls().iter().map(both));
    out
}

#[test]
fn valid_messages_decode_in_both_encodings() {
    let all = valid_encodings();
    assert_eq!(all.len(), 8 + 8 + 5);
    // Framed into one stream, every record comes back and decodes.
    let events = scheduler_events();
    let mut stream = Vec::new();
    for e in &events {
        recordio::encode(&e.encode(), &mut stream);
        recordio::encode(&Encoding::Json.encode(e), &mut stream);
    }
    let mut reader = Reader::new(&stream[..]);
    for e in &events {
        for enc in [Encoding::Protobuf, Encoding::Json] {
            let record = reader.next_record().unwrap().unwrap();
            assert_eq!(&enc.decode::<scheduler::Event>(record).unwrap(), e);
        }
    }
    assert!(reader.next_record().unwrap().is_none());
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = XorShift::new(0x5eed_0001);
    let mut proto_accepted = 0;
    for _ in 0..3000 {
        let len = rng.below(96);
        let input = rng.bytes(len);
        if exercise::<scheduler::Event>(&input).0 {
            proto_accepted += 1;
        }
        exercise::<executor::Event>(&input);
        exercise::<scheduler::Call>(&input);
        exercise::<executor::Call>(&input);
        exercise_stream(&input, 64);
    }
    // All-optional top-level messages accept plenty of random bytes (unknown fields are
    // skipped), so the success path with its round-trip checks is exercised too.
    assert!(proto_accepted > 0);
}

/// Field names of the Events and Calls and the messages inside them.
const JSON_KEYS: &[&str] = &[
    "type",
    "subscribed",
    "framework_id",
    "value",
    "parent",
    "update",
    "status",
    "task_id",
    "state",
    "uuid",
    "data",
    "offers",
    "resources",
    "id",
    "agent_id",
    "hostname",
    "name",
    "scalar",
    "ranges",
    "range",
    "begin",
    "end",
    "set",
    "item",
    "message",
    "executor_id",
    "container_id",
    "task",
    "kill_policy",
    "labels",
    "key",
    "reason",
    "source",
    "healthy",
    "heartbeat_interval_seconds",
    "master_info",
    "ip",
    "port",
    "nanoseconds",
    "launch",
    "task_group",
    "tasks",
    "executor_info",
    "framework_info",
    "agent_info",
    "acknowledged",
    "kill",
    "error",
    "failure",
    "rescind",
    "offer_id",
    "subscribe",
    "user",
    "roles",
    "capabilities",
    "accept",
    "operations",
    "offer_ids",
    "filters",
    "refuse_seconds",
];

/// Scalars that probe the typed deserializers' edges: enum names, base64, out-of-range
/// numbers, lone surrogates.
const JSON_SCALARS: &[&str] = &[
    "\"HEARTBEAT\"",
    "\"SUBSCRIBED\"",
    "\"TASK_RUNNING\"",
    "\"SCALAR\"",
    "\"NOPE\"",
    "\"AAEC\"",
    "\"Zm8\"",
    "\"Z\"",
    "\"=\"",
    "\"a=b\"",
    "\"\"",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"\u{e9}\"",
    "0",
    "1",
    "-1",
    "2",
    "0.5",
    "-0.0",
    "1e999",
    "1e-999",
    "4294967296",
    "-2147483649",
    "18446744073709551616",
    "9007199254740993",
    "true",
    "false",
    "null",
];

/// A random JSON value built from the Mesos field names, so that most of them parse as
/// JSON and get deep into the typed deserializers.
fn random_json(rng: &mut XorShift, depth: u32, out: &mut String) {
    match rng.below(if depth >= 5 { 1 } else { 4 }) {
        0 => out.push_str(JSON_SCALARS[rng.below(JSON_SCALARS.len())]),
        1 => {
            out.push('[');
            for i in 0..rng.below(3) {
                if i > 0 {
                    out.push(',');
                }
                random_json(rng, depth + 1, out);
            }
            out.push(']');
        }
        _ => {
            out.push('{');
            for i in 0..rng.below(5) {
                if i > 0 {
                    out.push(',');
                }
                out.push('"');
                out.push_str(JSON_KEYS[rng.below(JSON_KEYS.len())]);
                out.push_str("\":");
                random_json(rng, depth + 1, out);
            }
            out.push('}');
        }
    }
}

#[test]
fn random_json_never_panics() {
    let mut rng = XorShift::new(0x5eed_0002);
    let (mut accepted, mut total) = (0, 0);
    for _ in 0..4000 {
        let mut s = String::from("{");
        for i in 0..rng.below(4) {
            if i > 0 {
                s.push(',');
            }
            s.push('"');
            s.push_str(JSON_KEYS[rng.below(JSON_KEYS.len())]);
            s.push_str("\":");
            random_json(&mut rng, 1, &mut s);
        }
        s.push('}');
        total += 1;
        if exercise_all(s.as_bytes()).1 {
            accepted += 1;
        }
        // And a byte-level mutant of it, which is mostly no longer JSON.
        exercise_all(&mutate(&mut rng, s.as_bytes()));
    }
    assert!(
        accepted > total / 20 && accepted < total,
        "{accepted} of {total} random JSON documents decoded"
    );
}

#[test]
fn mutated_encodings_never_panic() {
    let valid = valid_encodings();
    let mut rng = XorShift::new(0x5eed_0003);
    let (mut proto_accepted, mut json_accepted, mut total) = (0, 0, 0);
    for (pb, js) in &valid {
        for _ in 0..150 {
            total += 1;
            if exercise_all(&mutate(&mut rng, pb)).0 {
                proto_accepted += 1;
            }
            if exercise_all(&mutate(&mut rng, js)).1 {
                json_accepted += 1;
            }
        }
    }
    // Both outcomes must be common, or the mutations are too weak (or too destructive) to
    // reach the decoders' deeper paths.
    for accepted in [proto_accepted, json_accepted] {
        assert!(
            accepted > total / 20 && accepted < total,
            "{proto_accepted} protobuf and {json_accepted} JSON mutants of {total} decoded"
        );
    }
}

#[test]
fn mutated_recordio_streams_never_panic() {
    let valid = valid_encodings();
    let mut stream = Vec::new();
    for (pb, js) in valid.iter().take(16) {
        recordio::encode(pb, &mut stream);
        recordio::encode(js, &mut stream);
    }
    assert_eq!(exercise_stream(&stream, 1 << 20), 32);
    let mut rng = XorShift::new(0x5eed_0004);
    let mut stopped_early = 0;
    for _ in 0..300 {
        let m = mutate(&mut rng, &stream);
        if exercise_stream(&m, 1 << 20) < 32 {
            stopped_early += 1;
        }
    }
    assert!(stopped_early > 0, "mutations never disturbed the framing");
}

/// A `ContainerID` chain of `levels` messages, built byte by byte so that no encoder limit
/// stands in the way.
fn nested_container_id(levels: usize) -> Vec<u8> {
    // Innermost: { value: "c" }.
    let mut msg = vec![0x0a, 1, b'c'];
    for _ in 1..levels {
        let mut outer = vec![0x0a, 1, b'c', 0x12];
        let mut len = msg.len() as u64;
        while len >= 0x80 {
            outer.push((len as u8) | 0x80);
            len >>= 7;
        }
        outer.push(len as u8);
        outer.extend_from_slice(&msg);
        msg = outer;
    }
    msg
}

#[test]
fn nesting_limit_is_exact() {
    let levels = MAX_DEPTH as usize + 1;
    let m = ContainerID::decode(&nested_container_id(levels)).unwrap();
    let mut depth = 1;
    let mut cur = &m;
    while let Some(p) = &cur.parent {
        depth += 1;
        cur = p;
    }
    assert_eq!(depth, levels);
    let e = ContainerID::decode(&nested_container_id(levels + 1)).unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::TooDeep);
}

#[test]
fn deep_protobuf_nesting_is_too_deep_not_a_stack_overflow() {
    let deep = nested_container_id(1000);
    let e = ContainerID::decode(&deep).unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::TooDeep);
    let msg = e.to_string();
    assert!(msg.starts_with("mesos.ContainerID.parent.parent"), "{msg}");
    assert!(msg.contains("nested deeper than"), "{msg}");

    // The same chain inside an executor Event.Subscribed, where an agent would send it.
    let mut subscribed = vec![0x22];
    push_len_prefixed(&mut subscribed, &deep);
    let mut event = vec![0x08, 1, 0x12];
    push_len_prefixed(&mut event, &subscribed);
    let e = executor::Event::decode(&event).unwrap_err();
    assert_eq!(e.kind(), &DecodeErrorKind::TooDeep);
    assert!(e
        .to_string()
        .starts_with("mesos.executor.Event.subscribed.container_id.parent"));

    // And through RecordIO and the codec, as the executor's event loop sees it.
    let stream = recordio::frame(&event);
    let mut reader = Reader::new(&stream[..]);
    let record = reader.next_record().unwrap().unwrap();
    match Encoding::Protobuf.decode::<executor::Event>(record) {
        Err(CodecError::Protobuf(e)) => assert_eq!(e.kind(), &DecodeErrorKind::TooDeep),
        other => panic!("expected TooDeep, got {other:?}"),
    }
}

fn push_len_prefixed(out: &mut Vec<u8>, body: &[u8]) {
    let mut len = body.len() as u64;
    while len >= 0x80 {
        out.push((len as u8) | 0x80);
        len >>= 7;
    }
    out.push(len as u8);
    out.extend_from_slice(body);
}

#[test]
fn deep_json_nesting_is_an_error_not_a_stack_overflow() {
    let levels = 1000;
    let mut s = String::new();
    for _ in 0..levels {
        s.push_str(r#"{"value":"c","parent":"#);
    }
    s.push_str(r#"{"value":"c"}"#);
    s.push_str(&"}".repeat(levels));
    let e = Encoding::Json
        .decode::<ContainerID>(s.as_bytes())
        .unwrap_err();
    assert!(e.to_string().contains("recursion limit"), "{e}");

    // serde_json skips an unknown field without recursing, so even far deeper nesting
    // there is harmless and the known fields still decode.
    let deep = 100_000;
    let ignored = format!(
        r#"{{"type":"HEARTBEAT","future_field":{}1{}}}"#,
        "[".repeat(deep),
        "]".repeat(deep)
    );
    let e = Encoding::Json
        .decode::<scheduler::Event>(ignored.as_bytes())
        .unwrap();
    assert_eq!(e.r#type, Some(scheduler::event::Type::Heartbeat));
}

#[test]
fn huge_declared_lengths_are_rejected_without_allocating() {
    // A length-delimited field claiming 4 GiB inside a 10-byte message.
    let e =
        scheduler::Event::decode(&[0x12, 0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0]).unwrap_err();
    assert!(matches!(e.kind(), DecodeErrorKind::Malformed(_)), "{e}");
    // An unknown field doing the same.
    let e = scheduler::Event::decode(&[0xfa, 0x01, 0xff, 0xff, 0xff, 0xff, 0x0f]).unwrap_err();
    assert!(matches!(e.kind(), DecodeErrorKind::Malformed(_)), "{e}");
    // Groups and the reserved wire types are malformed, not skipped forever.
    for wire in [3u8, 4, 6, 7] {
        let e = scheduler::Event::decode(&[(9 << 3) | wire, 0]).unwrap_err();
        assert!(
            matches!(e.kind(), DecodeErrorKind::Malformed(_)),
            "wire {wire}: {e}"
        );
    }
}
