//! Mesos JSON: `null` is an unset field, for every kind of field, as the master's
//! JSON-to-protobuf conversion treats it (the mesos-go encoder writes every empty slice as
//! `null`). A required field given as `null` is missing, and the error names it.

use serde_json::{json, Value};
use storage_framework::mesos::executor;
use storage_framework::mesos::proto::Message;
use storage_framework::mesos::scheduler::{self, call, event};
use storage_framework::mesos::types::*;
use storage_framework::mesos::{Bytes, Encoding};

fn decode<M: Message + serde::de::DeserializeOwned>(v: &Value) -> Result<M, String> {
    Encoding::Json
        .decode(v.to_string().as_bytes())
        .map_err(|e| e.to_string())
}

/// The same JSON with every member whose value is `null` removed, at any depth.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Decodes `with_nulls` and the same body without its null members; both must decode to
/// the same message, which is returned.
fn same_as_without_nulls<M>(with_nulls: Value) -> M
where
    M: Message + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let stripped = without_nulls(&with_nulls);
    assert_ne!(stripped, with_nulls, "the test body has no null in it");
    let a: M = decode(&with_nulls).unwrap_or_else(|e| panic!("{with_nulls} refused: {e}"));
    let b: M = decode(&stripped).unwrap_or_else(|e| panic!("{stripped} refused: {e}"));
    assert_eq!(a, b);
    a
}

fn framework_info(extra: Value) -> Value {
    let mut v = json!({"user": "root", "name": "peer"});
    v.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    v
}

#[test]
fn null_scalars_are_unset() {
    let fi: FrameworkInfo = same_as_without_nulls(framework_info(json!({
        "failover_timeout": null, // double
        "checkpoint": null,       // bool
        "principal": null,        // string
    })));
    assert_eq!(fi.failover_timeout, None);
    assert_eq!(fi.checkpoint, None);
    assert_eq!(fi.principal, None);
    // An integer scalar.
    let f: scheduler::event::Failure = same_as_without_nulls(json!({"status": null}));
    assert_eq!(f.status, None);
    // Given values are kept.
    let fi: FrameworkInfo = decode(&framework_info(json!({"failover_timeout": 60}))).unwrap();
    assert_eq!(fi.failover_timeout, Some(60.0));
}

#[test]
fn null_enums_are_unset() {
    let c: scheduler::Call = same_as_without_nulls(json!({"type": null}));
    assert_eq!(c.r#type, None);
    let cap: framework_info::Capability = same_as_without_nulls(json!({"type": null}));
    assert_eq!(cap.r#type, None);
}

#[test]
fn null_bytes_are_unset() {
    let s: TaskStatus = same_as_without_nulls(json!({
        "task_id": {"value": "t1"}, "state": "TASK_RUNNING", "uuid": null, "data": null,
    }));
    assert_eq!((s.uuid, s.data), (None, None));
}

#[test]
fn null_messages_are_unset() {
    let c: scheduler::Call = same_as_without_nulls(json!({
        "type": "SUBSCRIBE", "framework_id": null, "subscribe": null,
    }));
    assert_eq!(c.framework_id, None);
    assert_eq!(c.subscribe, None);
}

#[test]
fn null_repeated_fields_are_empty() {
    // Repeated messages, repeated strings.
    let fi: FrameworkInfo = same_as_without_nulls(framework_info(json!({
        "capabilities": null, "roles": null,
    })));
    assert!(fi.capabilities.is_empty() && fi.roles.is_empty());
    let r: call::Reconcile = same_as_without_nulls(json!({"tasks": null}));
    assert!(r.tasks.is_empty());
    // A null element adds nothing, as in the master's conversion.
    let fi: FrameworkInfo = decode(&framework_info(
        json!({"roles": [null, "a", null], "capabilities": [null]}),
    ))
    .unwrap();
    assert_eq!(
        fi.roles,
        vec!["a".into()] as Vec<storage_framework::mesos::Str>
    );
    assert!(fi.capabilities.is_empty());
    // A repeated field that has values keeps them.
    let fi: FrameworkInfo = decode(&framework_info(
        json!({"roles": ["a", "b"], "capabilities": []}),
    ))
    .unwrap();
    assert_eq!(fi.roles.len(), 2);
}

#[test]
fn a_required_field_given_as_null_is_missing_and_named() {
    for (field, body) in [
        ("user", json!({"user": null, "name": "peer"})),
        ("name", json!({"user": "root", "name": null})),
    ] {
        let e = decode::<FrameworkInfo>(&body).unwrap_err();
        assert!(e.contains(&format!("missing field `{field}`")), "{e}");
        assert!(e.contains("mesos.FrameworkInfo"), "{e}");
    }
    // Required fields of every kind: message, enum, bytes.
    let e = decode::<call::Subscribe>(&json!({"framework_info": null})).unwrap_err();
    assert!(e.contains("missing field `framework_info`"), "{e}");
    let e = decode::<TaskStatus>(&json!({"task_id": {"value": "t"}, "state": null})).unwrap_err();
    assert!(e.contains("missing field `state`"), "{e}");
    let e = decode::<call::Acknowledge>(&json!({
        "agent_id": {"value": "a"}, "task_id": {"value": "t"}, "uuid": null,
    }))
    .unwrap_err();
    assert!(e.contains("missing field `uuid`"), "{e}");
    // The same inside a Call.
    let e = decode::<scheduler::Call>(&json!({
        "type": "SUBSCRIBE", "subscribe": {"framework_info": null},
    }))
    .unwrap_err();
    assert!(e.contains("missing field `framework_info`"), "{e}");
}

#[test]
fn other_json_rules_still_hold() {
    // Wrong types are still refused, naming what was expected.
    let e = decode::<FrameworkInfo>(&framework_info(json!({"roles": "a"}))).unwrap_err();
    assert!(e.contains("invalid type"), "{e}");
    let e = decode::<FrameworkInfo>(&json!(["root", "peer"])).unwrap_err();
    assert!(e.contains("mesos.FrameworkInfo object"), "{e}");
    // A key given twice is refused.
    let raw = br#"{"user":"a","name":"b","name":"c"}"#;
    let e = Encoding::Json.decode::<FrameworkInfo>(raw).unwrap_err();
    assert!(e.to_string().contains("duplicate field `name`"), "{e}");
    // Unknown keys are ignored, null or not.
    let fi: FrameworkInfo = decode(&framework_info(
        json!({"reservations": null, "x": {"y": 1}}),
    ))
    .unwrap();
    assert_eq!(fi.user.as_str(), "root");
    // `type` is the JSON name of the `r#type` field.
    let c: scheduler::Call = decode(&json!({"type": "TEARDOWN"})).unwrap();
    assert_eq!(c.r#type, Some(call::Type::Teardown));
}

#[test]
fn json_round_trips_as_before() {
    let c = scheduler::Call {
        r#type: Some(call::Type::Acknowledge),
        framework_id: Some(FrameworkID {
            value: "f-1".into(),
        }),
        acknowledge: Some(call::Acknowledge {
            agent_id: AgentID { value: "a".into() },
            task_id: TaskID { value: "t".into() },
            uuid: Bytes(vec![0, 1, 2, 255]),
        }),
        ..Default::default()
    };
    let back: scheduler::Call = Encoding::Json.decode(&Encoding::Json.encode(&c)).unwrap();
    assert_eq!(back, c);
}

#[test]
fn events_accept_null_too() {
    let ev: scheduler::Event = same_as_without_nulls(json!({
        "type": "SUBSCRIBED",
        "subscribed": {
            "framework_id": {"value": "f-1"},
            "heartbeat_interval_seconds": null,
            "master_info": null,
        },
        "offers": null,
    }));
    assert_eq!(ev.r#type, Some(event::Type::Subscribed));
    let ev: scheduler::Event = same_as_without_nulls(json!({
        "type": "OFFERS", "offers": {"offers": null},
    }));
    assert!(ev.offers.unwrap().offers.is_empty());
    let ev: executor::Event = same_as_without_nulls(json!({
        "type": "ACKNOWLEDGED",
        "acknowledged": {"task_id": {"value": "t"}, "uuid": "AAEC"},
        "launch": null,
    }));
    assert_eq!(ev.acknowledged.unwrap().uuid, Bytes(vec![0, 1, 2]));
    let e = decode::<scheduler::Event>(&json!({
        "type": "SUBSCRIBED", "subscribed": {"framework_id": null},
    }))
    .unwrap_err();
    assert!(e.contains("missing field `framework_id`"), "{e}");
}

/// The bodies of the issue, as mesos-go's JSON codec writes them.
#[test]
fn the_bodies_of_the_issue_decode_as_without_their_nulls() {
    let c: scheduler::Call = same_as_without_nulls(json!(
        {"type":"SUBSCRIBE","subscribe":{"framework_info":{"user":"root","name":"peer",
         "failover_timeout":60,"checkpoint":true,"capabilities":null}}}
    ));
    let fi = c.subscribe.unwrap().framework_info;
    assert_eq!(
        (fi.failover_timeout, fi.checkpoint),
        (Some(60.0), Some(true))
    );
    let c: scheduler::Call = same_as_without_nulls(json!(
        {"framework_id":{"value":"f-1"},"type":"ACCEPT","accept":{"offer_ids":[{"value":"o1"}],
         "operations":[{"type":"LAUNCH","launch":{"task_infos":[{"name":"t",
         "task_id":{"value":"t1"},"agent_id":{"value":"a"},"resources":[{"name":"cpus",
         "type":"SCALAR","scalar":{"value":0.1},"reservations":null}],
         "command":{"uris":null,"value":"sleep 1"}}]}}]}}
    ));
    assert_eq!(c.accept.unwrap().operations.len(), 1);
    let c: scheduler::Call = same_as_without_nulls(json!(
        {"framework_id":{"value":"f-1"},"type":"RECONCILE","reconcile":{"tasks":null}}
    ));
    assert!(c.reconcile.unwrap().tasks.is_empty());
    let c: executor::Call = same_as_without_nulls(json!(
        {"executor_id":{"value":"e"},"framework_id":{"value":"f-1"},"type":"SUBSCRIBE",
         "subscribe":{"unacknowledged_tasks":null,"unacknowledged_updates":null}}
    ));
    let s = c.subscribe.unwrap();
    assert!(s.unacknowledged_tasks.is_empty() && s.unacknowledged_updates.is_empty());
}
