//! The simulated master's maintenance primitives: the schedule, inverse offers and their
//! answers, machines down and up, and the requests Mesos refuses.

mod master_support;

use master_support::*;
use serde_json::{json, Value};
use std::net::SocketAddr;
use storage_framework::mesos::scheduler::{self, call, event};
use storage_framework::mesos::types::*;
use storage_framework::mesos::Encoding;

fn post(addr: SocketAddr, path: &str, body: &Value) -> HttpResponse {
    request(
        addr,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
}

fn window(machines: &[(&str, &str)], start_ns: i64) -> Value {
    let ids: Vec<Value> = machines
        .iter()
        .map(|(h, ip)| json!({"hostname": h, "ip": ip}))
        .collect();
    json!({"machine_ids": ids, "unavailability": {
        "start": {"nanoseconds": start_ns}, "duration": {"nanoseconds": 3_600_000_000_000i64}}})
}

fn answer(s: &Sched, accept: bool, id: &OfferID, refuse_seconds: f64) {
    let ids = vec![id.clone()];
    let filters = Some(Filters {
        refuse_seconds: Some(refuse_seconds),
    });
    let c = if accept {
        scheduler::Call {
            r#type: Some(call::Type::AcceptInverseOffers),
            accept_inverse_offers: Some(call::AcceptInverseOffers {
                inverse_offer_ids: ids,
                filters,
            }),
            ..Default::default()
        }
    } else {
        scheduler::Call {
            r#type: Some(call::Type::DeclineInverseOffers),
            decline_inverse_offers: Some(call::DeclineInverseOffers {
                inverse_offer_ids: ids,
                filters,
            }),
            ..Default::default()
        }
    };
    s.call_ok(c);
}

fn inverse_offer(s: &Sched) -> InverseOffer {
    let ev = s.wait(event::Type::InverseOffers);
    let mut all = ev.inverse_offers.expect("inverse_offers").inverse_offers;
    assert_eq!(all.len(), 1, "{all:?}");
    all.remove(0)
}

fn status(addr: SocketAddr) -> Value {
    let r = get(addr, "/master/maintenance/status");
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn listed_agents(addr: SocketAddr) -> Vec<(String, String)> {
    let slaves = get(addr, "/master/slaves").json();
    slaves["slaves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let id = s["id"].as_str().unwrap().to_string();
            (s["hostname"].as_str().unwrap().to_string(), id)
        })
        .collect()
}

/// A running task on agent-1, and agent-1's IP.
fn task_on_agent_1(s: &Sched) -> (Offer, String) {
    let offers = s.offers_from(2);
    let offer = offers
        .iter()
        .find(|o| o.hostname == "agent-1")
        .expect("an offer of agent-1")
        .clone();
    let ip = offer.url.as_ref().unwrap().address.ip.clone().unwrap();
    s.accept(&[&offer], vec![command_task("t1", &offer, "sleep 1000")]);
    let running = s.update_for("t1", TaskState::Running);
    s.acknowledge(&running);
    (offer, ip.to_string())
}

#[test]
fn a_draining_machine_gets_inverse_offers_and_goes_down_and_up() {
    let c = cluster(2, |_| {});
    // JSON: inverse offers in the master's JSON form.
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("mt", true));
    let (offer, ip) = task_on_agent_1(&s);
    let start = 1_900_000_000_000_000_000i64;
    let r = post(
        c.addr(),
        "/master/maintenance/schedule",
        &json!({"windows": [window(&[("agent-1", &ip)], start)]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let schedule = get(c.addr(), "/master/maintenance/schedule").json();
    assert_eq!(
        schedule["windows"][0]["machine_ids"][0]["hostname"],
        "agent-1"
    );

    // Only the framework with a task there is asked, for that agent.
    let io = inverse_offer(&s);
    assert_eq!(io.agent_id.as_ref().unwrap(), &offer.agent_id);
    assert_eq!(io.framework_id, s.fid());
    assert_eq!(io.unavailability.start.nanoseconds, start);
    let st = status(c.addr());
    assert_eq!(st["draining_machines"][0]["id"]["hostname"], "agent-1");
    assert!(st["draining_machines"][0].get("statuses").is_none(), "{st}");

    // A decline is recorded, and asked again once its filter expires.
    answer(&s, false, &io.id, 0.2);
    let again = inverse_offer(&s);
    assert_ne!(again.id, io.id);
    let st = status(c.addr());
    assert_eq!(
        st["draining_machines"][0]["statuses"][0]["status"],
        "DECLINE"
    );
    assert_eq!(
        st["draining_machines"][0]["statuses"][0]["framework_id"]["value"],
        s.framework_id.as_str()
    );
    answer(&s, true, &again.id, 60.0);
    let st = wait_until("the ACCEPT in the status", || {
        let st = status(c.addr());
        (st["draining_machines"][0]["statuses"][0]["status"] == "ACCEPT").then_some(st)
    });
    assert!(st.get("down_machines").is_none(), "{st}");

    // Down: the task ends as on a removed agent; the agent is no longer listed.
    let machine = json!([{"hostname": "agent-1", "ip": ip}]);
    let r = post(c.addr(), "/master/machine/down", &machine);
    assert_eq!(r.status, 200, "{}", r.text());
    let gone = s.update_for("t1", TaskState::Gone);
    assert_eq!(gone.reason, Some(task_status::Reason::AgentRemoved));
    let listed = listed_agents(c.addr());
    assert!(!listed.iter().any(|(h, _)| h == "agent-1"), "{listed:?}");
    let st = status(c.addr());
    assert_eq!(st["down_machines"][0]["hostname"], "agent-1", "{st}");
    assert!(st.get("draining_machines").is_none(), "{st}");
    // A down machine stays in the schedule until it is up.
    let r = post(c.addr(), "/master/maintenance/schedule", &json!({}));
    assert_eq!(r.status, 400);
    assert!(
        r.text()
            .contains("is deactivated and cannot be removed from the schedule"),
        "{}",
        r.text()
    );

    // Up: out of the schedule, and its agent registers again under a new id.
    let r = post(c.addr(), "/master/machine/up", &machine);
    assert_eq!(r.status, 200, "{}", r.text());
    let new_id = wait_until("agent-1 listed again", || {
        listed_agents(c.addr())
            .into_iter()
            .find(|(h, _)| h == "agent-1")
            .map(|(_, id)| id)
    });
    assert_ne!(new_id, offer.agent_id.value.as_str());
    assert_eq!(status(c.addr()), json!({}));
    let schedule = get(c.addr(), "/master/maintenance/schedule").json();
    assert_eq!(schedule, json!({}));
}

#[test]
fn offers_of_a_draining_agent_carry_its_unavailability() {
    let c = cluster(2, |_| {});
    let ip = c.agents().unwrap()[0].ip.to_string();
    let r = post(
        c.addr(),
        "/master/maintenance/schedule",
        &json!({"windows": [window(&[("AGENT-1", &ip)], 5)]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let s = Sched::subscribe(c.addr(), Encoding::Json, framework_info("mt", true));
    let offers = s.offers_from(2);
    for o in &offers {
        let start = o.unavailability.as_ref().map(|u| u.start.nanoseconds);
        let expected = (o.hostname == "agent-1").then_some(5);
        assert_eq!(start, expected, "{}", o.hostname);
    }
    // Holding an offer there is holding resources there: the framework is asked for them.
    let io = inverse_offer(&s);
    let agent_1 = offers.iter().find(|o| o.hostname == "agent-1").unwrap();
    assert_eq!(io.agent_id.as_ref(), Some(&agent_1.agent_id));
}

#[test]
fn requests_mesos_refuses_are_refused_with_its_messages() {
    let c = cluster(1, |_| {});
    let ip = c.agents().unwrap()[0].ip.to_string();
    let bad = |body: Value, what: &str| {
        let r = post(c.addr(), "/master/maintenance/schedule", &body);
        assert_eq!(r.status, 400, "{body}");
        assert!(r.text().contains(what), "{body}: {}", r.text());
    };
    bad(
        json!({"windows": [window(&[], 0)]}),
        "List of machines in the maintenance window is empty",
    );
    let mut negative = window(&[("agent-1", &ip)], 0);
    negative["unavailability"]["duration"]["nanoseconds"] = json!(-1);
    bad(
        json!({"windows": [negative]}),
        "Unavailability 'duration' is negative",
    );
    bad(
        json!({"windows": [window(&[("agent-1", &ip)], 0), window(&[("agent-1", &ip)], 9)]}),
        "appears more than once in the schedule",
    );
    bad(
        json!({"windows": [{"machine_ids": [{}], "unavailability": {"start": {"nanoseconds": 0}}}]}),
        "Both 'hostname' and 'ip' for a machine are empty",
    );
    bad(
        json!({"windows": [window(&[("agent-1", "not-an-ip")], 0)]}),
        "not-an-ip",
    );
    bad(json!({"windows": [{"machine_ids": []}]}), "unavailability");

    let machine = json!([{"hostname": "agent-1", "ip": ip}]);
    let r = post(c.addr(), "/master/machine/down", &machine);
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("is not part of a maintenance schedule"),
        "{}",
        r.text()
    );
    let r = post(c.addr(), "/master/machine/down", &json!([]));
    assert_eq!(r.status, 400);
    assert!(
        r.text().contains("List of machines is empty"),
        "{}",
        r.text()
    );
    let r = post(
        c.addr(),
        "/master/maintenance/schedule",
        &json!({"windows": [window(&[("agent-1", &ip)], 0)]}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(c.addr(), "/master/machine/up", &machine);
    assert_eq!(r.status, 400);
    assert!(
        r.text()
            .contains("is not in DOWN mode and cannot be brought up"),
        "{}",
        r.text()
    );
    let r = get(c.addr(), "/master/machine/down");
    assert_eq!(r.status, 405);
    let r = request(c.addr(), "DELETE", "/master/maintenance/status", &[], &[]);
    assert_eq!(r.status, 405);

    // The calls need their message.
    let s = Sched::subscribe(c.addr(), Encoding::Protobuf, framework_info("mt", true));
    for t in [
        call::Type::AcceptInverseOffers,
        call::Type::DeclineInverseOffers,
    ] {
        let r = s.call(scheduler::Call {
            r#type: Some(t),
            ..Default::default()
        });
        assert_eq!(r.status, 400, "{t:?}");
        assert!(
            r.text().contains("inverse_offers' to be present"),
            "{}",
            r.text()
        );
    }
    // An unknown inverse offer is skipped, as the master does.
    answer(
        &s,
        true,
        &OfferID {
            value: text("no-such-offer"),
        },
        1.0,
    );
}
