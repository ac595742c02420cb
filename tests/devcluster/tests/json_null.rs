//! Mesos JSON with `null` members, as the mesos-go v1 library's JSON codec writes every empty
//! slice: a real master and agent take `null` for an unset field, and so must ours. The bodies
//! are raw text, in the library's form (the SUBSCRIBE is the one the issue quotes).

mod master_support;

use master_support::*;
use storage_framework::mesos::executor::{self, event as eevent};
use storage_framework::mesos::scheduler::{self, event};
use storage_framework::mesos::types::*;
use storage_framework::mesos::Encoding;

const SUBSCRIBE: &str = r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"user":"root","name":"peer","failover_timeout":60,"checkpoint":true,"capabilities":null}}}"#;

/// An ACCEPT launching one executor task, with `uris` and `reservations` null; the executor
/// dumps its environment to `dump`, so the test can play it over raw HTTP.
fn accept_body(fid: &str, offer: &Offer, dump: &str) -> String {
    format!(
        r#"{{"framework_id":{{"value":"{fid}"}},"type":"ACCEPT","accept":{{"offer_ids":[{{"value":"{offer}"}}],"operations":[{{"type":"LAUNCH","launch":{{"task_infos":[{{"name":"peer-task","task_id":{{"value":"peer-task"}},"agent_id":{{"value":"{agent}"}},"resources":[{{"name":"cpus","type":"SCALAR","scalar":{{"value":0.1}},"reservations":null}},{{"name":"mem","type":"SCALAR","scalar":{{"value":32}},"reservations":null}}],"executor":{{"executor_id":{{"value":"peer-exec"}},"resources":null,"command":{{"uris":null,"environment":{{"variables":[{{"name":"DUMP","value":"{dump}"}}]}},"value":"env > \"$DUMP.tmp\" && mv \"$DUMP.tmp\" \"$DUMP\" && exec sleep 300"}}}},"labels":null}}]}}}}],"filters":null}}}}"#,
        offer = offer.id.value,
        agent = offer.agent_id.value,
    )
}

fn post_json(addr: std::net::SocketAddr, path: &str, stream_id: &str, body: &str) -> HttpResponse {
    request(
        addr,
        "POST",
        path,
        &[
            ("Content-Type", "application/json"),
            ("Mesos-Stream-Id", stream_id),
        ],
        body.as_bytes(),
    )
}

fn next_of(stream: &EventStream<scheduler::Event>, t: event::Type) -> scheduler::Event {
    wait_until(&format!("a {t:?} event"), || match stream.next(WAIT) {
        Next::Event(e) if e.r#type == Some(t) => Some(e),
        Next::Event(_) => None,
        _ => panic!("the stream ended before a {t:?} event"),
    })
}

#[test]
fn mesos_go_json_bodies_with_nulls_are_accepted_by_master_and_agent() {
    let dir = temp_dir("jsonnull");
    let c = cluster(1, |cfg| cfg.work_dir = dir.join("work"));

    // SUBSCRIBE, exactly as the issue quotes it.
    let stream = EventStream::<scheduler::Event>::open(
        c.addr(),
        "/api/v1/scheduler",
        Encoding::Json,
        Some("application/json"),
        SUBSCRIBE.as_bytes(),
    )
    .unwrap_or_else(|r| panic!("SUBSCRIBE refused: {} {}", r.status, r.text()));
    let stream_id = stream.header("Mesos-Stream-Id").unwrap().to_string();
    let fid = next_of(&stream, event::Type::Subscribed)
        .subscribed
        .unwrap()
        .framework_id
        .value
        .to_string();
    let offer = next_of(&stream, event::Type::Offers)
        .offers
        .unwrap()
        .offers
        .remove(0);

    // ACCEPT with `uris`, `reservations` and more null; the task reaches its executor.
    let dump = dir.join("peer.env");
    let body = accept_body(&fid, &offer, &dump.to_string_lossy());
    let r = post_json(c.addr(), "/api/v1/scheduler", &stream_id, &body);
    assert_eq!(r.status, 202, "ACCEPT refused: {}", r.text());
    wait_until("the executor's environment dump", || {
        dump.exists().then_some(())
    });
    let env = read_env_dump(&dump);
    assert_eq!(env["MESOS_EXECUTOR_ID"], "peer-exec");

    // Implicit reconciliation: `"tasks":null` is every task.
    let body = format!(
        r#"{{"framework_id":{{"value":"{fid}"}},"type":"RECONCILE","reconcile":{{"tasks":null}}}}"#
    );
    let r = post_json(c.addr(), "/api/v1/scheduler", &stream_id, &body);
    assert_eq!(r.status, 202, "RECONCILE refused: {}", r.text());
    let st = wait_until("the reconciliation update", || {
        let st = next_of(&stream, event::Type::Update).update.unwrap().status;
        (st.reason == Some(task_status::Reason::Reconciliation)).then_some(st)
    });
    assert_eq!(st.task_id.value, "peer-task");

    // The executor's SUBSCRIBE with both unacknowledged lists null.
    let body = format!(
        r#"{{"executor_id":{{"value":"peer-exec"}},"framework_id":{{"value":"{fid}"}},"type":"SUBSCRIBE","subscribe":{{"unacknowledged_tasks":null,"unacknowledged_updates":null}}}}"#
    );
    let agent: std::net::SocketAddr = env["MESOS_AGENT_ENDPOINT"].parse().unwrap();
    let exec = EventStream::<executor::Event>::open(
        agent,
        "/api/v1/executor",
        Encoding::Json,
        Some("application/json"),
        body.as_bytes(),
    )
    .unwrap_or_else(|r| panic!("executor SUBSCRIBE refused: {} {}", r.status, r.text()));
    let launched = wait_until("the executor's LAUNCH", || match exec.next(WAIT) {
        Next::Event(e) if e.r#type == Some(eevent::Type::Launch) => e.launch,
        Next::Event(_) => None,
        _ => panic!("the executor stream ended before LAUNCH"),
    });
    assert_eq!(launched.task.task_id.value, "peer-task");
    exec.close();
}

#[test]
fn a_required_field_given_as_null_is_refused_naming_it() {
    let c = cluster(1, |_| {});
    let body = r#"{"type":"SUBSCRIBE","subscribe":{"framework_info":{"user":null,"name":"peer"}}}"#;
    let r = request(
        c.addr(),
        "POST",
        "/api/v1/scheduler",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    );
    assert_eq!(r.status, 400);
    assert!(
        r.text()
            .starts_with("Failed to convert JSON into Call protobuf: missing field `user`"),
        "{}",
        r.text()
    );
}
