//! Mesos maintenance: the master's inverse offers answered under the disruption budget (the
//! decision is `health/maintenance.rs`), one log line per change of a node's answer, and the
//! node's window forgotten once it is behind it.

use super::*;
use crate::mesos::types::InverseOffer;
use crate::scheduler::health::maintenance;

/// How long the master waits before asking again about an answered inverse offer: a
/// declined window is tried again this often.
const ASK_AGAIN_SECS: f64 = 5.0;

/// An accepted window the master has not asked about for this long, on an agent it still
/// lists, was taken out of the schedule: the node never went.
const WITHDRAWN_AFTER_MS: u64 = 60_000;

fn nanos_to_ms(ns: i64) -> i64 {
    ns / 1_000_000
}

impl Dispatcher {
    /// Answers each inverse offer, one at a time: an accepted one counts against the budget
    /// of those that follow in the same event.
    pub(super) fn on_inverse_offers(&mut self, offers: Vec<InverseOffer>) {
        let now = self.clock.now_ms();
        let (mut accept, mut decline) = (Vec::new(), Vec::new());
        for io in offers {
            let Some(agent) = io.agent_id.as_ref().map(|a| a.value.to_string()) else {
                // The whole framework is asked back: never, for a storage cluster.
                warn!(
                    "inverse offer {} names no agent: declining to give up every node",
                    io.id.value
                );
                decline.push(io.id);
                continue;
            };
            if self.state.model.nodes.contains_key(&agent) {
                self.maintenance_asked.insert(agent.clone(), now);
            }
            let answer = maintenance::answer(&self.state.model, &agent, &self.gate);
            let start_ms = nanos_to_ms(io.unavailability.start.nanoseconds);
            let duration_ms = io
                .unavailability
                .duration
                .as_ref()
                .map(|d| nanos_to_ms(d.nanoseconds).max(0) as u64);
            self.record_maintenance(&agent, &answer, start_ms, duration_ms, now);
            match answer {
                Ok(()) => accept.push(io.id),
                Err(_) => decline.push(io.id),
            }
        }
        let filters = Some(Filters {
            refuse_seconds: Some(ASK_AGAIN_SECS),
        });
        if !accept.is_empty() {
            let mut c = self.call(call::Type::AcceptInverseOffers);
            c.accept_inverse_offers = Some(call::AcceptInverseOffers {
                inverse_offer_ids: accept,
                filters: filters.clone(),
            });
            self.pending.push(c);
        }
        if !decline.is_empty() {
            let mut c = self.call(call::Type::DeclineInverseOffers);
            c.decline_inverse_offers = Some(call::DeclineInverseOffers {
                inverse_offer_ids: decline,
                filters,
            });
            self.pending.push(c);
        }
    }

    fn record_maintenance(
        &mut self,
        agent: &str,
        answer: &Result<(), String>,
        start_ms: i64,
        duration_ms: Option<u64>,
        now: u64,
    ) {
        let Some(node) = self.state.model.nodes.get(agent) else {
            debug!("inverse offer for agent {agent}, which has no node: accepted");
            return;
        };
        let Some(m) = maintenance::record(node, answer, start_ms, duration_ms, now) else {
            return;
        };
        let Some(node) = self.state.model.nodes.get_mut(agent) else {
            return;
        };
        match &m.reason {
            None => info!(
                "{}: accepts Mesos maintenance of agent {agent} (window from {start_ms} ms): its machine may go",
                node.hostname
            ),
            Some(why) => info!(
                "{}: declines Mesos maintenance of agent {agent} for now: {why}",
                node.hostname
            ),
        }
        node.maintenance = Some(Box::new(m));
        node.updated_ms = now;
        self.dirty = true;
        self.touch_view();
    }

    /// The master withdrew inverse offer `id`; what the node answered stays until its window
    /// is behind it.
    pub(super) fn on_inverse_offer_rescinded(&mut self, id: &str) {
        debug!("inverse offer {id} rescinded");
    }

    /// Forgets the windows the master stopped asking about (none for a minute, the agents'
    /// list coming every 30 s): a declined one, and an accepted one whose agent it still
    /// lists (`known`) with the drained launch on it (the window was taken out of the
    /// schedule). A node whose machine went comes back through its executor's report
    /// (`executor_api.rs`).
    pub(super) fn end_quiet_maintenance(&mut self, known: &HashSet<&str>) {
        let now = self.clock.now_ms();
        let nodes = &self.state.model.nodes;
        // A node that moved to its host's new agent leaves the old id behind.
        self.maintenance_asked.retain(|a, _| nodes.contains_key(a));
        let mut ended = Vec::new();
        for node in self.state.model.nodes.values() {
            let Some(m) = node.maintenance.as_deref() else {
                continue;
            };
            let agent = &*node.agent_id;
            let asked = *self
                .maintenance_asked
                .entry(agent.to_string())
                .or_insert(now);
            if now.saturating_sub(asked) < WITHDRAWN_AFTER_MS {
                continue;
            }
            // The drained launch still runs where it ran: the machine never went.
            let live = node.task.as_ref().filter(|t| t.is_active());
            let task = live.map(|t| &*t.task_id);
            let stayed =
                known.contains(agent) && task.is_some() && m.drained_task.as_deref() == task;
            if !m.accepted() || stayed {
                ended.push(agent.to_string());
            }
        }
        for agent in ended {
            if let Some(node) = self.state.model.nodes.get_mut(&agent) {
                info!(
                    "{}: the master no longer asks for agent {agent}: its Mesos maintenance window is forgotten",
                    node.hostname
                );
                node.maintenance = None;
                node.updated_ms = now;
            }
            self.maintenance_asked.remove(&agent);
            self.dirty = true;
            self.touch_view();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::types::{TimeInfo, Unavailability};
    use crate::scheduler::model::maintenance::MaintenanceAnswer;
    use crate::store::MemoryStore;

    struct Rig {
        d: Dispatcher,
        out: Receiver<Outgoing>,
        clock: Arc<crate::clock::ManualClock>,
    }

    /// Two running nodes of one protection domain, each holding data, the gateway's data
    /// fresh: either may be disrupted, not both.
    fn rig() -> Rig {
        let clock = crate::clock::ManualClock::at(1_000_000);
        let (d, rx) = super::super::test_dispatcher(Persisted::default(), &MemoryStore::new());
        let mut d = d.with_clock(clock.clone());
        d.state.model.framework_id = Some("fw".into());
        for (agent, host) in [("a1", "h1"), ("a2", "h2")] {
            let mut n = Node::new(agent, host, Default::default(), 0);
            n.phase = Phase::Running;
            n.attached = vec!["/dev/sdb".into()];
            let task = TaskRecord::new(&format!("t-{agent}"), "e", TaskState::Running, 0);
            n.task = Some(task);
            d.state.model.nodes.insert(agent, n);
        }
        d.state.model.health.read_ms = Some(1_000_000);
        Rig { d, out: rx, clock }
    }

    fn inverse_offer(id: &str, agent: Option<&str>) -> InverseOffer {
        InverseOffer {
            id: OfferID { value: id.into() },
            url: None,
            framework_id: FrameworkID { value: "fw".into() },
            agent_id: agent.map(|a| AgentID { value: a.into() }),
            unavailability: Unavailability {
                start: TimeInfo {
                    nanoseconds: 2_000_000_000_000,
                },
                duration: None,
            },
        }
    }

    impl Rig {
        /// One INVERSE_OFFERS event; the answers sent: (accepted ids, declined ids).
        fn ask(&mut self, offers: Vec<InverseOffer>) -> (Vec<String>, Vec<String>) {
            self.d.handle(Input::Event(Box::new(Event {
                r#type: Some(event::Type::InverseOffers),
                inverse_offers: Some(event::InverseOffers {
                    inverse_offers: offers,
                }),
                ..Default::default()
            })));
            self.d.flush();
            let (mut accepted, mut declined) = (Vec::new(), Vec::new());
            for o in self.out.try_iter() {
                let Outgoing::Call(c) = o else { continue };
                assert_eq!(c.framework_id.as_ref().unwrap().value, "fw");
                let ids = |v: &[OfferID]| v.iter().map(|i| i.value.to_string()).collect();
                if let Some(a) = &c.accept_inverse_offers {
                    accepted.extend::<Vec<_>>(ids(&a.inverse_offer_ids));
                    assert_eq!(a.filters.as_ref().unwrap().refuse_seconds, Some(5.0));
                }
                if let Some(d) = &c.decline_inverse_offers {
                    declined.extend::<Vec<_>>(ids(&d.inverse_offer_ids));
                }
            }
            (accepted, declined)
        }

        fn maintenance(&self, agent: &str) -> Option<NodeMaintenance> {
            self.d.state.model.nodes[agent]
                .maintenance
                .as_deref()
                .cloned()
        }
    }

    use crate::scheduler::model::maintenance::NodeMaintenance;

    #[test]
    fn the_first_machine_of_a_domain_is_let_go_and_the_second_declined_with_the_reason() {
        let mut r = rig();
        let (accepted, declined) = r.ask(vec![
            inverse_offer("io-1", Some("a1")),
            inverse_offer("io-2", Some("a2")),
        ]);
        assert_eq!(accepted, ["io-1"]);
        assert_eq!(declined, ["io-2"]);
        let m1 = r.maintenance("a1").expect("a1 has a window");
        assert_eq!(m1.answer, MaintenanceAnswer::Accepted);
        assert_eq!(m1.start_ms, 2_000_000);
        assert_eq!(m1.drained_task.as_deref(), Some("t-a1"));
        let m2 = r.maintenance("a2").expect("a2 has a window");
        assert_eq!(m2.answer, MaintenanceAnswer::Declined);
        let why = m2.reason.as_deref().unwrap();
        assert!(
            why.contains("h1") && why.contains("Mesos maintenance"),
            "{why}"
        );

        // Asked again, each answers as before.
        let (accepted, declined) = r.ask(vec![
            inverse_offer("io-3", Some("a2")),
            inverse_offer("io-4", Some("a1")),
        ]);
        assert_eq!(
            (accepted, declined),
            (vec!["io-4".into()], vec!["io-3".into()])
        );

        // a1 is back (another launch runs): a2 may go.
        let n1 = r.d.state.model.nodes.get_mut("a1").unwrap();
        n1.task = Some(TaskRecord::new("t-a1-2", "e", TaskState::Running, 0));
        assert!(maintenance::back(n1));
        n1.maintenance = None;
        let (accepted, declined) = r.ask(vec![inverse_offer("io-5", Some("a2"))]);
        assert_eq!((accepted, declined), (vec!["io-5".into()], vec![]));
        assert!(r.maintenance("a2").unwrap().accepted());
    }

    #[test]
    fn an_inverse_offer_for_every_agent_is_declined_and_one_for_an_unknown_agent_accepted() {
        let mut r = rig();
        let (accepted, declined) = r.ask(vec![
            inverse_offer("io-all", None),
            inverse_offer("io-x", Some("not-ours")),
        ]);
        assert_eq!(
            (accepted, declined),
            (vec!["io-x".into()], vec!["io-all".into()])
        );
        assert_eq!(r.maintenance("a1"), None);
    }

    #[test]
    fn windows_the_master_stops_asking_about_are_forgotten() {
        let mut r = rig();
        r.ask(vec![
            inverse_offer("io-1", Some("a1")),
            inverse_offer("io-2", Some("a2")),
        ]);
        let known: HashSet<&str> = ["a1", "a2"].into_iter().collect();
        r.clock.advance(WITHDRAWN_AFTER_MS - 1);
        r.d.end_quiet_maintenance(&known);
        assert!(r.maintenance("a1").is_some() && r.maintenance("a2").is_some());
        r.clock.advance(1);
        // a1 went: its agent is no longer listed, so its window stays until it is back.
        let only_a2: HashSet<&str> = ["a2"].into_iter().collect();
        r.d.end_quiet_maintenance(&only_a2);
        assert!(r.maintenance("a1").is_some());
        assert_eq!(r.maintenance("a2"), None, "declined and no longer asked");
        r.d.end_quiet_maintenance(&known);
        assert_eq!(
            r.maintenance("a1"),
            None,
            "still there with its drained launch"
        );

        // A machine that went: its launch is over, so its window stays until a later launch
        // runs, however long the master is quiet.
        r.ask(vec![inverse_offer("io-3", Some("a2"))]);
        let n2 = r.d.state.model.nodes.get_mut("a2").unwrap();
        assert!(n2.maintenance.as_ref().unwrap().accepted());
        n2.task.as_mut().unwrap().state = TaskState::Gone;
        r.clock.advance(10 * WITHDRAWN_AFTER_MS);
        r.d.end_quiet_maintenance(&known);
        assert!(r.maintenance("a2").is_some());
    }

    /// A machine taken down for maintenance after its window was accepted ends its launch
    /// `TASK_GONE`: planned, so it costs the node none of its relaunches.
    #[test]
    fn a_launch_ended_by_an_accepted_window_is_no_failure() {
        let mut r = rig();
        r.ask(vec![inverse_offer("io-1", Some("a1"))]);
        r.d.handle(Input::Event(Box::new(Event {
            r#type: Some(event::Type::Update),
            update: Some(event::Update {
                status: crate::mesos::types::TaskStatus {
                    task_id: crate::mesos::types::TaskID {
                        value: "t-a1".into(),
                    },
                    state: TaskState::Gone,
                    agent_id: Some(AgentID { value: "a1".into() }),
                    message: Some("agent removed for maintenance".into()),
                    ..Default::default()
                },
            }),
            ..Default::default()
        })));
        r.d.flush();
        let n = &r.d.state.model.nodes["a1"];
        assert_eq!(n.failures, 0, "counted as a failure");
        assert!(!n.relaunch_stopped);
    }
}
