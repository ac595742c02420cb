//! The simulated master's v1 scheduler API, driven with raw HTTP.

mod master_support;

use master_support::*;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use storage_framework::mesos::scheduler::{self, call, event};
use storage_framework::mesos::types::*;
use storage_framework::mesos::Encoding;

#[test]
fn protobuf_subscription_gets_subscribed_offers_from_every_agent_and_heartbeats() {
    let c = cluster(3, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("pb", false));
    assert_eq!(
        s.stream.header("Content-Type"),
        Some("application/x-protobuf")
    );
    assert_eq!(
        s.stream_id.len(),
        36,
        "stream id is a UUID: {}",
        s.stream_id
    );
    assert!(!s.framework_id.is_empty());

    let offers = s.offers_from(3);
    let hosts: BTreeSet<String> = offers.iter().map(|o| o.hostname.to_string()).collect();
    assert_eq!(
        hosts,
        ["agent-1", "agent-2", "agent-3"]
            .iter()
            .map(|h| h.to_string())
            .collect()
    );
    for o in &offers {
        assert_eq!(o.framework_id.value, s.framework_id);
        let cpus = o
            .resources
            .iter()
            .find(|r| r.name == "cpus")
            .and_then(|r| r.scalar.as_ref())
            .map(|x| x.value);
        assert_eq!(cpus, Some(4.0), "{o:?}");
        assert!(o.resources.iter().any(|r| r.name == "ports"));
    }
    // A heartbeat follows within a few intervals.
    let deadline = Instant::now() + WAIT;
    loop {
        match s
            .stream
            .next(deadline.saturating_duration_since(Instant::now()))
        {
            Next::Event(e) if e.r#type == Some(event::Type::Heartbeat) => break,
            Next::Event(_) => continue,
            _ => panic!("no HEARTBEAT"),
        }
    }
}

#[test]
fn json_subscription_streams_json_with_master_info() {
    let c = cluster(1, |cfg| cfg.heartbeat_interval = Duration::from_millis(700));
    let body = serde_json::json!({
        "type": "SUBSCRIBE",
        "subscribe": {"framework_info": {"user": "root", "name": "json"}}
    })
    .to_string();
    let stream = EventStream::<scheduler::Event>::open(
        c.addr(),
        "/api/v1/scheduler",
        Encoding::Json,
        Some("application/json"),
        body.as_bytes(),
    )
    .unwrap_or_else(|r| panic!("{} {}", r.status, r.text()));
    assert_eq!(stream.header("Content-Type"), Some("application/json"));
    let Next::Event(ev) = stream.next(WAIT) else {
        panic!("no event")
    };
    let sub = ev.subscribed.expect("SUBSCRIBED");
    assert_eq!(sub.heartbeat_interval_seconds, Some(0.7));
    let mi = sub.master_info.expect("master_info");
    assert_eq!(mi.port, u32::from(c.addr().port()));
    assert_eq!(mi.version.as_deref(), Some("1.4.0"));
    // Network byte order, as Mesos stores it.
    assert_eq!(mi.ip, u32::from_ne_bytes([127, 0, 0, 1]));
}

#[test]
fn malformed_calls_get_the_masters_status_codes_and_text_bodies() {
    let c = cluster(1, |_| {});
    let m = c.addr();
    let post = |headers: &[(&str, &str)], body: &[u8]| {
        request(m, "POST", "/api/v1/scheduler", headers, body)
    };
    let r = post(&[("Content-Type", "text/plain")], b"x");
    assert_eq!(r.status, 415);
    assert!(
        r.text().contains("Expecting 'Content-Type' of"),
        "{}",
        r.text()
    );

    let r = post(&[], b"x");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("'Content-Type' to be present"));

    let r = post(&[("Content-Type", "application/x-protobuf")], &[0xff, 0xff]);
    assert_eq!(r.status, 400);
    assert!(r
        .text()
        .starts_with("Failed to parse body into Call protobuf"));

    let r = post(&[("Content-Type", "application/json")], b"{not json");
    assert_eq!(r.status, 400);
    assert!(r.text().starts_with("Failed to parse body into JSON"));

    let r = post(&[("Content-Type", "application/json")], b"{}");
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("Expecting 'type' to be present"),
        "{}",
        r.text()
    );

    let sub = Encoding::Json.encode(&subscribe_call(framework_info("x", false)));
    let r = post(
        &[
            ("Content-Type", "application/json"),
            ("Accept", "text/html"),
        ],
        &sub,
    );
    assert_eq!(r.status, 406);

    let r = post(
        &[
            ("Content-Type", "application/json"),
            ("Mesos-Stream-Id", "x"),
        ],
        &sub,
    );
    assert_eq!(r.status, 400);
    assert!(r
        .text()
        .contains("should not include the 'Mesos-Stream-Id'"));

    let r = get(m, "/api/v1/scheduler");
    assert_eq!(r.status, 405);

    let teardown = scheduler::Call {
        framework_id: Some(FrameworkID {
            value: text("nope"),
        }),
        r#type: Some(call::Type::Teardown),
        ..Default::default()
    };
    let r = post(
        &[("Content-Type", "application/json")],
        &Encoding::Json.encode(&teardown),
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.text(), "Framework cannot be found");

    // The server is still serving after all that.
    assert_eq!(get(m, "/version").status, 200);
}

#[test]
fn calls_need_the_subscriptions_stream_id() {
    let c = cluster(1, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("ids", false));
    let revive = scheduler::Call {
        framework_id: Some(s.fid()),
        r#type: Some(call::Type::Revive),
        ..Default::default()
    };
    let body = Encoding::Json.encode(&revive);
    let r = request(
        c.addr(),
        "POST",
        "/api/v1/scheduler",
        &[("Content-Type", "application/json")],
        &body,
    );
    assert_eq!(r.status, 400);
    assert!(r
        .text()
        .contains("should include the 'Mesos-Stream-Id' header"));

    let r = request(
        c.addr(),
        "POST",
        "/api/v1/scheduler",
        &[
            ("Content-Type", "application/json"),
            ("Mesos-Stream-Id", "00000000-0000-4000-8000-000000000000"),
        ],
        &body,
    );
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("didn't match the stream ID"),
        "{}",
        r.text()
    );

    assert_eq!(s.call(revive.clone()).status, 202);

    // An acknowledgement with a uuid that is not one fails validation.
    let ack = scheduler::Call {
        r#type: Some(call::Type::Acknowledge),
        acknowledge: Some(call::Acknowledge {
            agent_id: AgentID { value: text("a") },
            task_id: TaskID { value: text("t") },
            uuid: storage_framework::mesos::Bytes(vec![1, 2, 3]),
        }),
        ..Default::default()
    };
    let r = s.call(ack);
    assert_eq!(r.status, 400);
    assert!(r.text().contains("Not a valid UUID"));

    // After the stream is gone the framework is not subscribed: 403.
    let c2 = cluster(1, |_| {});
    let mut info = framework_info("gone", false);
    info.failover_timeout = Some(3600.0);
    let s2 = Sched::subscribe(c2.addr(), Encoding::Json, info);
    assert_eq!(c2.cut_scheduler_stream(Some(&s2.framework_id)).unwrap(), 1);
    let r = s2.call(scheduler::Call {
        r#type: Some(call::Type::Revive),
        ..Default::default()
    });
    assert_eq!(r.status, 403);
    assert_eq!(r.text(), "Framework is not subscribed");
}

#[test]
fn accept_with_unknown_or_used_offers_drops_or_loses_the_tasks() {
    let c = cluster(1, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("old", false));
    let offer = s.offers().remove(0);
    let mut stale = offer.clone();
    stale.id = OfferID {
        value: text("no-such-offer"),
    };
    s.accept(&[&stale], vec![command_task("t1", &offer, "sleep 30")]);
    let st = s.update();
    assert_eq!(st.state, TaskState::Lost);
    assert_eq!(st.reason, Some(task_status::Reason::InvalidOffers));
    assert_eq!(st.source, Some(task_status::Source::Master));
    assert!(
        st.uuid.is_none(),
        "master-generated updates are not acknowledged"
    );
    assert!(st
        .message
        .as_deref()
        .unwrap_or("")
        .contains("Offer no-such-offer is no longer valid"));

    // A partition-aware framework gets TASK_DROPPED, also for an offer it already used.
    let pa = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("pa", true));
    s.simple(call::Type::Suppress);
    s.decline(&[&offer], Some(0.0));
    let o = pa.offers().remove(0);
    pa.decline(&[&o], Some(60.0));
    pa.accept(&[&o], vec![command_task("t2", &o, "sleep 30")]);
    let st = pa.update();
    assert_eq!(st.state, TaskState::Dropped);
    assert_eq!(st.reason, Some(task_status::Reason::InvalidOffers));
}

fn operation(kind: offer::operation::Type, id: Option<&str>) -> offer::Operation {
    offer::Operation {
        r#type: Some(kind),
        id: id.map(|v| OperationID { value: text(v) }),
        ..Default::default()
    }
}

fn accept_operations(offer: &Offer, operations: Vec<offer::Operation>) -> scheduler::Call {
    scheduler::Call {
        r#type: Some(call::Type::Accept),
        accept: Some(call::Accept {
            offer_ids: vec![offer.id.clone()],
            operations,
            filters: Some(Filters {
                refuse_seconds: Some(0.0),
            }),
        }),
        ..Default::default()
    }
}

#[test]
fn operations_the_dev_master_does_not_apply_fail_as_mesos_fails_them() {
    let c = cluster(1, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("ops", true));
    let offer = s.offers().remove(0);
    let mut group = operation(offer::operation::Type::LaunchGroup, None);
    group.launch_group = Some(offer::operation::LaunchGroup {
        executor: ExecutorInfo {
            executor_id: ExecutorID { value: text("e1") },
            r#type: Some(executor_info::Type::Default),
            ..Default::default()
        },
        task_group: TaskGroupInfo {
            tasks: vec![command_task("in-group", &offer, "sleep 30")],
        },
    });
    let mut launch_with_id = operation(offer::operation::Type::Launch, Some("op-launch"));
    launch_with_id.launch = Some(offer::operation::Launch {
        task_infos: vec![command_task("with-id", &offer, "sleep 30")],
    });
    s.call_ok(accept_operations(
        &offer,
        vec![
            operation(offer::operation::Type::Reserve, Some("op-1")),
            operation(offer::operation::Type::Unreserve, None),
            group,
            launch_with_id,
        ],
    ));
    // Feedback was asked for: OPERATION_ERROR, naming the operation.
    let ev = s.wait(event::Type::UpdateOperationStatus);
    let status = ev.update_operation_status.expect("the update").status;
    assert_eq!(
        status.operation_id.map(|i| i.value.to_string()).as_deref(),
        Some("op-1")
    );
    assert_eq!(status.state, OperationState::Error);
    assert!(status
        .message
        .is_some_and(|m| m.contains("RESOURCE_PROVIDER")));
    // Tasks of operations that cannot launch end in TASK_ERROR from the master.
    let grouped = s.update_for("in-group", TaskState::Error);
    assert_eq!(grouped.reason, Some(task_status::Reason::TaskGroupInvalid));
    assert_eq!(grouped.source, Some(task_status::Source::Master));
    let with_id = s.update_for("with-id", TaskState::Error);
    assert_eq!(with_id.reason, Some(task_status::Reason::TaskInvalid));
    // Nothing was launched or reserved: the whole offer comes back.
    let again = s.offers().remove(0);
    assert_eq!(again.resources.len(), offer.resources.len());
}

#[test]
fn duplicate_task_ids_and_oversized_tasks_are_task_errors() {
    let c = cluster(2, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("dup", false));
    let offers = s.offers_from(2);
    s.accept(
        &[&offers[0]],
        vec![command_task("same", &offers[0], "sleep 30")],
    );
    let running = s.update_for("same", TaskState::Running);
    s.acknowledge(&running);
    // Refuse nothing, so that the unused resources come back at once instead of after the
    // default 5s filter.
    let mut again = accept_call(
        &[&offers[1]],
        vec![command_task("same", &offers[1], "sleep 30")],
    );
    again.accept.as_mut().unwrap().filters = Some(Filters {
        refuse_seconds: Some(0.0),
    });
    s.call_ok(again);
    let st = s.update_for("same", TaskState::Error);
    assert_eq!(st.reason, Some(task_status::Reason::TaskInvalid));
    assert!(st
        .message
        .as_deref()
        .unwrap()
        .contains("Task has duplicate ID: same"));

    let o = s.offers().remove(0);
    let mut big = command_task("big", &o, "true");
    big.resources = vec![scalar("cpus", 64.0), scalar("mem", 32.0)];
    s.accept(&[&o], vec![big]);
    let st = s.update_for("big", TaskState::Error);
    assert!(
        st.message
            .as_deref()
            .unwrap()
            .contains("is more than available"),
        "{st:?}"
    );
}

/// Refuse filters held by the framework, from the master's snapshot.
fn filters(c: &devcluster::master::MasterHandle) -> u64 {
    c.snapshot().unwrap()["frameworks"][0]["filters"]
        .as_u64()
        .expect("filters")
}

#[test]
fn declined_resources_come_back_after_refuse_seconds_not_before() {
    let c = cluster(1, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("dec", false));
    let o = s.offers().remove(0);
    s.decline(&[&o], Some(1.0));
    // The decline installed a filter; the offer that ends the wait came from an allocation
    // that had dropped it as expired, not from one that ignored it.
    assert_eq!(filters(&c), 1);
    let again = s.offers().remove(0);
    assert_eq!(filters(&c), 0, "re-offered while the refuse filter stood");
    assert_eq!(again.agent_id, o.agent_id);
    assert_ne!(again.id, o.id, "a new offer, not the old one");

    // Without a filter (refuse 0) none is installed: the next allocation offers again.
    s.decline(&[&again], Some(0.0));
    assert_eq!(filters(&c), 0);
    let third = s.offers().remove(0);
    assert_eq!(third.agent_id, o.agent_id);
}

#[test]
fn suppress_stops_offers_until_revive() {
    let c = cluster(1, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("sup", false));
    let o = s.offers().remove(0);
    s.simple(call::Type::Suppress);
    s.decline(&[&o], Some(0.0));
    // The allocation interval is 50ms: an unsuppressed framework would be offered again.
    let quiet_until = Instant::now() + Duration::from_millis(600);
    while let Some(left) = quiet_until.checked_duration_since(Instant::now()) {
        if let Some(ev) = s.next_event(left) {
            panic!("event while suppressed: {ev:?}");
        }
    }
    let snap = c.snapshot().unwrap();
    assert_eq!(snap["frameworks"][0]["suppressed"], true);
    s.simple(call::Type::Revive);
    let again = s.offers();
    assert_eq!(again[0].agent_id, o.agent_id);
}

#[test]
fn updates_are_resent_until_acknowledged() {
    let c = cluster(1, |cfg| {
        cfg.status_update_retry = Duration::from_millis(150)
    });
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("ack", false));
    let o = s.offers().remove(0);
    s.accept(&[&o], vec![command_task("t", &o, "sleep 30")]);
    let first = s.update_for("t", TaskState::Running);
    let uuid = first.uuid.clone().expect("reliable update has a uuid");
    let again = s.update_for("t", TaskState::Running);
    assert_eq!(again.uuid.as_ref(), Some(&uuid), "the same update, resent");
    s.acknowledge(&again);
    // Retries back off 150, 300, 600ms: a second of silence shows they stopped.
    let quiet_until = Instant::now() + Duration::from_millis(1200);
    while let Some(left) = quiet_until.checked_duration_since(Instant::now()) {
        if let Some(ev) = s.next_event(left) {
            assert!(ev.update.is_none(), "update after ACK: {ev:?}");
        }
    }
    let snap = c.snapshot().unwrap();
    assert_eq!(snap["agents"][0]["pending_updates"], 0);
}

#[test]
fn reconciliation_reports_known_and_unknown_tasks() {
    let c = cluster(1, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("rec", false));
    let o = s.offers().remove(0);
    s.accept(&[&o], vec![command_task("known", &o, "sleep 30")]);
    let running = s.update_for("known", TaskState::Running);
    s.acknowledge(&running);

    let reconcile = |tasks: Vec<call::reconcile::Task>| scheduler::Call {
        r#type: Some(call::Type::Reconcile),
        reconcile: Some(call::Reconcile { tasks }),
        ..Default::default()
    };
    s.call_ok(reconcile(vec![
        call::reconcile::Task {
            task_id: TaskID {
                value: text("known"),
            },
            agent_id: None,
        },
        call::reconcile::Task {
            task_id: TaskID {
                value: text("ghost"),
            },
            agent_id: Some(o.agent_id.clone()),
        },
    ]));
    let known = s.update_for("known", TaskState::Running);
    assert_eq!(known.reason, Some(task_status::Reason::Reconciliation));
    assert_eq!(known.source, Some(task_status::Source::Master));
    assert!(known.uuid.is_none());
    let ghost = s.update_for("ghost", TaskState::Lost);
    assert_eq!(ghost.reason, Some(task_status::Reason::Reconciliation));

    // Implicit: every task the master knows.
    s.call_ok(reconcile(vec![]));
    let implicit = s.update_for("known", TaskState::Running);
    assert_eq!(implicit.reason, Some(task_status::Reason::Reconciliation));

    // Partition-aware frameworks hear TASK_GONE instead of TASK_LOST: the agent is registered
    // and does not have the task.
    let pa = Sched::subscribe(c.addr(), Encoding::Json, framework_info("pa", true));
    pa.call_ok(reconcile(vec![call::reconcile::Task {
        task_id: TaskID {
            value: text("ghost"),
        },
        agent_id: Some(o.agent_id.clone()),
    }]));
    pa.update_for("ghost", TaskState::Gone);
}

#[test]
fn kill_ends_a_task_and_kill_of_an_unknown_task_reconciles() {
    let c = cluster(1, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("kill", false));
    let o = s.offers().remove(0);
    s.accept(&[&o], vec![command_task("k", &o, "sleep 30")]);
    let running = s.update_for("k", TaskState::Running);
    s.acknowledge(&running);
    let kill = |id: &str| scheduler::Call {
        r#type: Some(call::Type::Kill),
        kill: Some(call::Kill {
            task_id: TaskID { value: text(id) },
            agent_id: None,
            kill_policy: None,
        }),
        ..Default::default()
    };
    s.call_ok(kill("k"));
    let killed = s.update_for("k", TaskState::Killed);
    s.acknowledge(&killed);
    s.call_ok(kill("nobody"));
    let lost = s.update_for("nobody", TaskState::Lost);
    assert_eq!(lost.reason, Some(task_status::Reason::Reconciliation));
    // The killed task's resources are offered again.
    let snap = wait_until("task gone", || {
        let snap = c.snapshot().unwrap();
        snap["frameworks"][0]["tasks"]
            .as_array()
            .is_some_and(|t| t.is_empty())
            .then_some(snap)
    });
    assert_eq!(
        snap["frameworks"][0]["completed_tasks"][0]["state"],
        "TASK_KILLED"
    );
}

#[test]
fn teardown_closes_the_stream_and_the_framework_id_cannot_come_back() {
    let c = cluster(1, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("td", false));
    s.simple(call::Type::Teardown);
    let deadline = Instant::now() + WAIT;
    loop {
        match s
            .stream
            .next(deadline.saturating_duration_since(Instant::now()))
        {
            Next::Closed => break,
            Next::Event(_) => continue,
            Next::Timeout => panic!("stream not closed after TEARDOWN"),
        }
    }
    let mut info = framework_info("td", false);
    info.id = Some(s.fid());
    let body = Encoding::Json.encode(&subscribe_call(info));
    let stream = EventStream::<scheduler::Event>::open(
        c.addr(),
        "/api/v1/scheduler",
        Encoding::Json,
        None,
        &body,
    )
    .unwrap_or_else(|r| panic!("{}", r.status));
    let Next::Event(ev) = stream.next(WAIT) else {
        panic!("no ERROR")
    };
    assert_eq!(ev.r#type, Some(event::Type::Error));
    assert_eq!(ev.error.unwrap().message, "Framework has been removed");
    assert!(matches!(stream.next(WAIT), Next::Closed));
}

#[test]
fn resubscribing_fails_over_the_old_stream_and_keeps_the_id() {
    let c = cluster(1, |_| {});
    let mut info = framework_info("fo", false);
    info.failover_timeout = Some(3600.0);
    let first = Sched::subscribe(c.addr(), Encoding::Json, info.clone());
    info.id = Some(first.fid());
    let second = Sched::subscribe(c.addr(), Encoding::Protobuf, info);
    assert_eq!(second.framework_id, first.framework_id);
    assert_ne!(second.stream_id, first.stream_id);
    let err = first.wait(event::Type::Error);
    assert_eq!(err.error.unwrap().message, "Framework failed over");
    // The old stream id no longer works; the new one does.
    let r = first.call(scheduler::Call {
        r#type: Some(call::Type::Revive),
        ..Default::default()
    });
    assert_eq!(r.status, 400);
    second.simple(call::Type::Revive);
}

#[test]
fn a_disconnected_framework_keeps_its_tasks_for_the_failover_timeout() {
    let c = cluster(1, |_| {});
    let mut info = framework_info("keep", false);
    info.failover_timeout = Some(3600.0);
    let s = Sched::subscribe(c.addr(), Encoding::Json, info.clone());
    let o = s.offers().remove(0);
    s.accept(&[&o], vec![command_task("survivor", &o, "sleep 30")]);
    let running = s.update_for("survivor", TaskState::Running);
    s.acknowledge(&running);
    s.stream.close();
    wait_until("framework disconnected", || {
        let snap = c.snapshot().unwrap();
        (snap["frameworks"][0]["connected"] == false).then_some(())
    });
    info.id = Some(s.fid());
    let back = Sched::subscribe(c.addr(), Encoding::Json, info);
    assert_eq!(back.framework_id, s.framework_id);
    back.call_ok(scheduler::Call {
        r#type: Some(call::Type::Reconcile),
        reconcile: Some(call::Reconcile { tasks: vec![] }),
        ..Default::default()
    });
    back.update_for("survivor", TaskState::Running);

    // With no failover timeout the framework goes at once, and its task with it.
    let s2 = Sched::subscribe(c.addr(), Encoding::Json, framework_info("brief", false));
    let o2 = s2.offers().remove(0);
    s2.accept(&[&o2], vec![command_task("doomed", &o2, "sleep 30")]);
    let r = s2.update_for("doomed", TaskState::Running);
    s2.acknowledge(&r);
    s2.stream.close();
    let id = s2.framework_id.clone();
    wait_until("framework removed", || {
        let snap = c.snapshot().unwrap();
        snap["completed_frameworks"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x == &serde_json::json!(id)))
            .then_some(())
    });
}

#[test]
fn version_state_and_flags_have_the_mesos_shapes() {
    let c = cluster(2, |cfg| {
        cfg.zk = Some("zk://127.0.0.1:2181/mesos".into());
        cfg.attributes.insert(
            "agent-2".into(),
            [("rack".to_string(), "r2".to_string())].into(),
        );
    });
    let v = get(c.addr(), "/version").json();
    assert_eq!(v["version"], "1.4.0");
    assert!(v["build_date"].is_string() && v["git_sha"].is_string());

    let f = get(c.addr(), "/flags").json();
    assert_eq!(f["flags"]["zk"], "zk://127.0.0.1:2181/mesos");
    assert_eq!(f["flags"]["port"], c.addr().port().to_string());

    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("st", false));
    let _ = s.offers_from(2);
    let state = get(c.addr(), "/master/state").json();
    assert_eq!(state["leader"], format!("master@{}", c.addr()));
    let slaves = state["slaves"].as_array().unwrap();
    assert_eq!(slaves.len(), 2);
    let a2 = slaves.iter().find(|x| x["hostname"] == "agent-2").unwrap();
    assert_eq!(a2["attributes"]["rack"], "r2");
    assert_eq!(a2["resources"]["cpus"], 4.0);
    assert!(a2["pid"].as_str().unwrap().starts_with("slave(1)@127.0.0."));
    let fw = &state["frameworks"][0];
    assert_eq!(fw["id"], s.framework_id.as_str());
    assert_eq!(fw["offers"].as_array().unwrap().len(), 2);
    assert_eq!(state["flags"]["zk"], "zk://127.0.0.1:2181/mesos");
    assert_eq!(get(c.addr(), "/state").json()["id"], state["id"]);
    let r = get(c.standby_addr(), "/master/redirect");
    assert_eq!(r.status, 307);
    assert_eq!(
        r.header("Location"),
        Some(format!("//127.0.0.1:{}", c.addr().port()).as_str())
    );
}

#[test]
fn the_standby_master_redirects_until_it_leads() {
    let c = cluster(1, |_| {});
    let standby = c.standby_addr();
    let body = Encoding::Json.encode(&subscribe_call(framework_info("ha", false)));
    let r = request(
        standby,
        "POST",
        "/api/v1/scheduler",
        &[("Content-Type", "application/json")],
        &body,
    );
    assert_eq!(r.status, 307);
    assert_eq!(
        r.header("Location"),
        Some(format!("//127.0.0.1:{}/master/api/v1/scheduler", c.addr().port()).as_str())
    );
    assert_eq!(get(standby, "/master/state").status, 307);
    assert_eq!(get(standby, "/version").status, 200);

    let mut info = framework_info("ha", false);
    info.failover_timeout = Some(60.0);
    let s = Sched::subscribe(c.addr(), Encoding::Json, info.clone());
    assert_eq!(c.fail_over().unwrap(), standby);
    let deadline = Instant::now() + WAIT;
    loop {
        match s
            .stream
            .next(deadline.saturating_duration_since(Instant::now()))
        {
            Next::Closed => break,
            Next::Event(_) => continue,
            Next::Timeout => panic!("stream survived the master failover"),
        }
    }
    let r = request(
        c.addr(),
        "POST",
        "/master/api/v1/scheduler",
        &[("Content-Type", "application/json")],
        &body,
    );
    assert_eq!(r.status, 307);
    assert_eq!(
        r.header("Location"),
        Some(format!("//127.0.0.1:{}/master/api/v1/scheduler", standby.port()).as_str())
    );
    info.id = Some(s.fid());
    let back = Sched::subscribe(standby, Encoding::Json, info);
    assert_eq!(back.framework_id, s.framework_id);
    let _ = back.offers();
}

#[test]
fn reserved_resources_go_to_their_role_and_launch_only_when_named() {
    let c = cluster(1, |cfg| {
        cfg.agent_resources.cpus = 0.1;
        cfg.agent_resources.mem = 64.0;
        cfg.agent_resources.reserved = Some(devcluster::master::Reservation {
            role: "storage".into(),
            cpus: 2.0,
            mem: 1024.0,
        });
    });
    // A framework of another role sees the unreserved part only.
    let other = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("other", false));
    let o = other.offers().remove(0);
    assert!(
        o.resources.iter().all(|r| r.role.as_deref() == Some("*")),
        "{o:?}"
    );
    other.decline(&[&o], Some(3600.0));

    let mut info = framework_info("storage", false);
    info.role = Some(text("storage"));
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, info);
    let o = s.offers().remove(0);
    let reserved: Vec<(String, f64)> = o
        .resources
        .iter()
        .filter(|r| r.role.as_deref() == Some("storage"))
        .map(|r| (r.name.to_string(), r.scalar.as_ref().unwrap().value))
        .collect();
    assert_eq!(
        reserved,
        [("cpus".to_string(), 2.0), ("mem".to_string(), 1024.0)]
    );

    // One cpu without the role: more than the unreserved 0.1, so the launch fails.
    let mut unnamed = command_task("unnamed", &o, "sleep 30");
    unnamed.resources = vec![scalar("cpus", 1.0), scalar("mem", 32.0)];
    s.accept(&[&o], vec![unnamed]);
    let st = s.update_for("unnamed", TaskState::Error);
    assert!(
        st.message
            .as_deref()
            .unwrap()
            .contains("more than available"),
        "{st:?}"
    );

    // The same with the reservation carried in the task's resources: it runs.
    let o = s.offers().remove(0);
    let mut named = command_task("named", &o, "sleep 30");
    let reserved = |name: &str, v: f64| Resource {
        role: Some(text("storage")),
        ..scalar(name, v)
    };
    named.resources = vec![reserved("cpus", 1.0), reserved("mem", 512.0)];
    s.accept(&[&o], vec![named]);
    let running = s.update_for("named", TaskState::Running);
    s.acknowledge(&running);
    // What is left of the reservation is offered again, diminished by the task's share.
    let o = s.offers().remove(0);
    let cpus: f64 = o
        .resources
        .iter()
        .filter(|r| r.name == "cpus" && r.role.as_deref() == Some("storage"))
        .map(|r| r.scalar.as_ref().unwrap().value)
        .sum();
    assert!((cpus - 1.0).abs() < 1e-9, "{o:?}");
}

#[test]
fn an_executor_over_its_memory_is_killed_and_its_task_fails_with_the_memory_limitation() {
    let c = cluster(1, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("hog", true));
    let offer = s.offers().remove(0);
    // 32 MB for the task and 32 MB for the command executor: 128 MB held by `tail` is over.
    s.accept(
        &[&offer],
        vec![command_task(
            "hog",
            &offer,
            "cat /dev/zero | tail -c 134217728",
        )],
    );
    // Updates of a task come in order: the agent holds the next until this one is acknowledged.
    s.acknowledge(&s.update_for("hog", TaskState::Running));
    let st = s.update_for("hog", TaskState::Failed);
    assert_eq!(
        st.reason,
        Some(task_status::Reason::ContainerLimitationMemory)
    );
    assert_eq!(st.source, Some(task_status::Source::Agent));
    let message = st.message.as_deref().unwrap_or("").to_string();
    assert!(
        message.starts_with("Memory limit exceeded: Requested: 64MB"),
        "{message}"
    );
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat`.
fn cpu_seconds(pid: u64) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

#[test]
fn an_executor_gets_no_more_cpu_than_its_container_has() {
    let c = cluster(1, |_| {});
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("spin", true));
    let offer = s.offers().remove(0);
    // 0.1 cpus for the task and 0.1 for the command executor.
    s.accept(
        &[&offer],
        vec![command_task("spin", &offer, "while :; do :; done")],
    );
    s.acknowledge(&s.update_for("spin", TaskState::Running));
    let pid = wait_until("the spinning command's pid", || {
        c.snapshot().ok()?["agents"][0]["executors"][0]["pid"].as_u64()
    });
    let (started, cpu_before) = (Instant::now(), cpu_seconds(pid));
    // Measured over a fixed stretch of wall time: the share is what is under test.
    let window = Duration::from_secs(4);
    let used = wait_until("the measuring window to pass", || {
        let used = cpu_seconds(pid) - cpu_before;
        (started.elapsed() >= window).then_some(used)
    });
    let allowed = 0.2 * started.elapsed().as_secs_f64() + 0.4;
    assert!(
        used <= allowed,
        "a 0.2-cpu container used {used:.2} CPU seconds in {:?} (at most {allowed:.2})",
        started.elapsed()
    );
}
