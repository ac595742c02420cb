//! Taking storage out: decommission (data moved away first, then the SDS removed and the node
//! ended for good), recommission, replace (a host gone for good: its SDS removed at once), and
//! one device's removal. Each records what is under way in the node (`removal`,
//! `devices_removing`), so that the gateway work (`gateway_work/`) is sent after the save and
//! again after a restart; the worker's reports finish them here.

use super::Dispatcher;
use crate::mesos::types::TaskStatus;
use crate::scheduler::gateway_work::report::RemovalReport;
use crate::scheduler::health::{gate, room};
use crate::scheduler::model::{Node, Phase, Removal};
use crate::scheduler::operator::Outcome;
use log::{info, warn};

/// The node holds something in the storage cluster: an SDS the gateway gave us or lists.
fn in_cluster(n: &Node) -> bool {
    n.sds_id.is_some()
        || !n.attached.is_empty()
        || n.storage.as_ref().is_some_and(|s| s.sds.is_some())
}

impl Dispatcher {
    pub(super) fn op_decommission(&mut self, agent: &str) -> Outcome {
        let Some(node) = self.state.model.nodes.get(agent) else {
            return Outcome::not_found(format!("no node of agent {agent}"));
        };
        let host = node.hostname.clone();
        if node.decommissioned {
            return Outcome::done(format!("{host} is decommissioned already"));
        }
        match node.removal {
            Some(Removal::Draining | Removal::Stopping) => {
                return Outcome::done(format!("{host} is being decommissioned already"))
            }
            Some(Removal::Replacing) => {
                return Outcome::refused(format!("{host} is being replaced"))
            }
            None => {}
        }
        if node.persona.is_mdm() {
            return Outcome::refused(format!(
                "{host} is a member of the MDM cluster ({}): only data nodes are decommissioned",
                node.persona
            ));
        }
        let holds = in_cluster(node);
        if holds {
            if let Err(why) = gate::may_disrupt(&self.state.model, agent, &self.gate) {
                return Outcome::refused(format!("the disruption budget forbids it now: {why}"));
            }
            if let Err(why) = room::removal_room(&self.state.model, agent, None) {
                return Outcome::refused(format!("the other SDSs could not hold its data: {why}"));
            }
        }
        self.dirty = true;
        self.touch_view();
        let Some(node) = self.state.model.nodes.get_mut(agent) else {
            return Outcome::not_found(format!("no node of agent {agent}"));
        };
        if holds {
            node.removal = Some(Removal::Draining);
            return Outcome::done(format!(
                "{host}: its SDS's data moves to the others; the SDS is removed once that is \
                 done, then its services stop and it is never launched again"
            ));
        }
        node.removal = Some(Removal::Stopping);
        let covered = node.covered();
        if !covered {
            self.finish_decommission(agent);
        }
        Outcome::done(format!(
            "{host} holds nothing in the storage cluster: {}",
            if covered {
                "its services stop, and it is never launched again"
            } else {
                "decommissioned"
            }
        ))
    }

    pub(super) fn op_recommission(&mut self, agent: &str) -> Outcome {
        let now = self.clock.now_ms();
        let Some(node) = self.state.model.nodes.get_mut(agent) else {
            return Outcome::not_found(format!("no node of agent {agent}"));
        };
        let host = node.hostname.clone();
        if !node.decommissioned {
            return Outcome::refused(match node.removal {
                Some(Removal::Draining | Removal::Stopping) => {
                    format!("{host} is being decommissioned: recommission it once that is done")
                }
                _ => format!("{host} is not decommissioned"),
            });
        }
        node.decommissioned = false;
        // From the first phase: each checks the host before it acts, so what is in place
        // stays, and the services the decommission stopped start again.
        node.phase = Phase::Launching;
        node.progress = None;
        node.failures = 0;
        node.retry_after_ms = None;
        node.last_error = None;
        node.storage_ready = false;
        node.updated_ms = now;
        self.offer_mode.uncovered(agent, now);
        self.dirty = true;
        self.touch_view();
        Outcome::done(format!(
            "{host} is launched again on its agent's next offer; its SDS joins anew"
        ))
    }

    pub(super) fn op_replace(&mut self, agent: &str) -> Outcome {
        let Some(node) = self.state.model.nodes.get(agent) else {
            return Outcome::not_found(format!("no node of agent {agent}"));
        };
        let host = node.hostname.clone();
        if node.removal == Some(Removal::Replacing) {
            return Outcome::done(format!("{host} is being replaced already"));
        }
        if node.persona.is_mdm() {
            return Outcome::refused(format!(
                "{host} is a member of the MDM cluster ({}): the framework does not replace MDM members",
                node.persona
            ));
        }
        let running = node
            .task
            .as_ref()
            .is_some_and(|t| t.state == crate::mesos::types::TaskState::Running);
        if running && node.gone_since_ms.is_none() {
            return Outcome::refused(format!(
                "{host} is up (its executor runs and its agent is listed): replace is for a host \
                 gone for good; decommission moves its data away first"
            ));
        }
        if !in_cluster(node) {
            self.forget_node(agent, "replaced");
            return Outcome::done(format!(
                "{host} held nothing in the storage cluster: forgotten; its agent, if it returns, is a new node"
            ));
        }
        if let Some(node) = self.state.model.nodes.get_mut(agent) {
            node.removal = Some(Removal::Replacing);
        }
        self.dirty = true;
        self.touch_view();
        Outcome::done(format!(
            "{host}: its SDS is removed at once (its data is rebuilt from the other copies), \
             then the node is forgotten; its agent, if it returns, is a new node"
        ))
    }

    pub(super) fn op_remove_device(&mut self, agent: &str, device: &str) -> Outcome {
        let Some(node) = self.state.model.nodes.get(agent) else {
            return Outcome::not_found(format!("no node of agent {agent}"));
        };
        let host = node.hostname.clone();
        if node.devices_removed.iter().any(|d| d == device) {
            return Outcome::done(format!("{device} of {host} is removed already"));
        }
        if node.devices_removing.iter().any(|d| d == device) {
            return Outcome::done(format!("{device} of {host} is being removed already"));
        }
        let attached = node.attached.iter().any(|d| d == device);
        if !attached && !node.devices.iter().any(|d| d == device) {
            let known = node.devices.join(", ");
            return Outcome::not_found(format!(
                "{host} has no device {device} (its devices: {})",
                if known.is_empty() { "none" } else { &known }
            ));
        }
        if node.removal.is_some() || node.decommissioned {
            return Outcome::refused(format!("{host} is being taken out as a whole"));
        }
        if attached {
            if let Err(why) = gate::may_disrupt(&self.state.model, agent, &self.gate) {
                return Outcome::refused(format!("the disruption budget forbids it now: {why}"));
            }
            if let Err(why) = room::removal_room(&self.state.model, agent, Some(device)) {
                return Outcome::refused(format!(
                    "the other devices could not hold its data: {why}"
                ));
            }
        }
        self.dirty = true;
        self.touch_view();
        let Some(node) = self.state.model.nodes.get_mut(agent) else {
            return Outcome::not_found(format!("no node of agent {agent}"));
        };
        if attached {
            node.devices_removing.push(device.to_string());
            return Outcome::done(format!(
                "{device} of {host}: its data moves to the pool's other devices; it is removed \
                 once that is done"
            ));
        }
        node.devices.retain(|d| d != device);
        node.devices_removed.push(device.to_string());
        Outcome::done(format!(
            "{device} of {host} was not in the pool: forgotten, never attached"
        ))
    }

    /// The worker finished a removal, or the gateway refused it.
    pub(super) fn on_removed(&mut self, r: RemovalReport) {
        self.storage.removal_done(&r.agent_id, r.device.as_deref());
        let Some(node) = self.state.model.nodes.get(&r.agent_id) else {
            return;
        };
        let host = node.hostname.clone();
        let stage = node.removal;
        self.dirty = true;
        self.touch_view();
        if let Some(device) = r.device {
            return self.device_removed(&r.agent_id, &host, &device, r.outcome);
        }
        match (stage, r.outcome) {
            (Some(Removal::Replacing), Ok(())) => {
                info!("{host}: its SDS is removed; the node is forgotten (replaced)");
                self.forget_node(&r.agent_id, "replaced");
                self.note_plan_change(
                    "replace",
                    &host,
                    "done",
                    "SDS removed; node forgotten".into(),
                );
            }
            (Some(Removal::Draining), Ok(())) => {
                info!("{host}: its SDS is removed, its data moved; its services stop");
                let covered = self.state.model.nodes.get_mut(&r.agent_id).map(|n| {
                    n.removal = Some(Removal::Stopping);
                    n.sds_id = None;
                    n.attached.clear();
                    n.storage_ready = false;
                    n.covered()
                });
                self.note_plan_change(
                    "decommission",
                    &host,
                    "sds-removed",
                    "its data moved and its SDS is gone; its services stop".into(),
                );
                if covered == Some(false) {
                    self.finish_decommission(&r.agent_id);
                }
            }
            (stage, Err(why)) => {
                warn!("{host}: the gateway refused to remove its SDS: {why}");
                if let Some(n) = self.state.model.nodes.get_mut(&r.agent_id) {
                    n.removal = None;
                    n.last_error = Some(format!("SDS removal refused: {why}").into());
                }
                let action = if stage == Some(Removal::Replacing) {
                    "replace"
                } else {
                    "decommission"
                };
                self.note_plan_change(action, &host, "failed", why);
            }
            // Taken back meanwhile (a node recommissioned or forgotten): nothing to finish.
            (_, Ok(())) => {}
        }
    }

    fn device_removed(
        &mut self,
        agent: &str,
        host: &str,
        device: &str,
        outcome: Result<(), String>,
    ) {
        let Some(node) = self.state.model.nodes.get_mut(agent) else {
            return;
        };
        node.devices_removing.retain(|d| d != device);
        let target = format!("{host}:{device}");
        match outcome {
            Ok(()) => {
                info!("{host}: device {device} removed from the pool, its data moved");
                node.devices.retain(|d| d != device);
                node.attached.retain(|d| d != device);
                node.devices_removed.push(device.to_string());
                self.note_plan_change(
                    "remove-device",
                    &target,
                    "done",
                    "its data moved; removed".into(),
                );
            }
            Err(why) => {
                warn!("{host}: the gateway refused to remove device {device}: {why}");
                node.last_error = Some(format!("removal of {device} refused: {why}").into());
                self.note_plan_change("remove-device", &target, "failed", why);
            }
        }
    }

    /// Whether `status` ends the launch of a node whose executor was told to stop its services
    /// (then the node is decommissioned: no failure, no relaunch).
    pub(super) fn decommission_ended(
        &mut self,
        agent: &str,
        status: &TaskStatus,
        now: u64,
    ) -> bool {
        // Looked at before it is written to: a write copies a node shared with the last save.
        let stopping = |n: &Node| {
            n.removal == Some(Removal::Stopping) && n.task.as_ref().is_some_and(|t| t.is_active())
        };
        if !status.state.is_terminal() || !self.state.model.nodes.get(agent).is_some_and(stopping) {
            return false;
        }
        let Some(node) = self.state.model.nodes.get_mut(agent) else {
            return false;
        };
        let Some(task) = node.task.as_mut() else {
            return false;
        };
        task.state = status.state;
        let task_id = task.task_id.clone();
        node.last_contact_ms = Some(now);
        node.updated_ms = now;
        info!(
            "agent {}: task {task_id} {}: its services are stopped",
            node.hostname, status.state
        );
        self.finish_decommission(agent);
        true
    }

    /// The decommissioned node's executor has ended (or there was none): never launched again.
    pub(super) fn finish_decommission(&mut self, agent: &str) {
        let Some(node) = self.state.model.nodes.get_mut(agent) else {
            return;
        };
        node.removal = None;
        node.decommissioned = true;
        node.retry_after_ms = None;
        node.last_error = None;
        node.storage_ready = false;
        let host = node.hostname.clone();
        info!("{host}: decommissioned; it is not launched again until recommissioned");
        self.dirty = true;
        self.touch_view();
        self.note_plan_change("decommission", &host, "done", "decommissioned".into());
    }

    /// Drops the node (its launch's secret revoked): its agent, if it offers again, is new.
    fn forget_node(&mut self, agent: &str, why: &str) {
        if let Some(mut node) = self.state.model.nodes.remove(agent) {
            info!("{}: the node is forgotten ({why})", node.hostname);
            if let Some(t) = node.task.as_mut() {
                self.revoke_secret(t);
            }
        }
        self.storage.removal_done(agent, None);
        self.dirty = true;
        self.touch_view();
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::RemovalReport;
    use crate::mesos::types::*;
    use crate::scheduler::exchange::OperatorRequest;
    use crate::scheduler::gateway_work::report::Report;
    use crate::scheduler::gateway_work::worker::Job;
    use crate::scheduler::gateway_work::StorageSide;
    use crate::scheduler::model::{Persona, PoolCapacity, Removal};
    use crate::scheduler::operator::{Command, NodeAction, Outcome};
    use crate::store::MemoryStore;

    struct Rig {
        d: Dispatcher,
        out: Receiver<Outgoing>,
        jobs: Receiver<Job>,
        saved: MemoryStore,
        clock: Arc<crate::clock::ManualClock>,
    }

    fn dispatcher(state: Persisted, saved: &MemoryStore) -> (Dispatcher, Receiver<Outgoing>) {
        super::super::test_dispatcher(state, saved)
    }

    /// A running data node `a1` on `host-a1` with one device in the pool and its SDS `s1`,
    /// fresh gateway data, a second node `a2` like it.
    fn rig() -> Rig {
        let now = clock::SystemClock.now_ms();
        let mut state = Persisted::default();
        state.model.framework_id = Some("fw".into());
        for agent in ["a1", "a2"] {
            let mut n = Node::new(agent, &format!("host-{agent}"), Persona::Data, now);
            n.phase = Phase::Running;
            n.ip = Some(format!("10.0.0.{}", &agent[1..]).into());
            n.devices = vec!["/dev/sdb".into(), "/dev/sdc".into()];
            n.attached = n.devices.clone();
            n.sds_id = Some(format!("s-{agent}").into());
            n.sdc_connected = true;
            n.storage_ready = true;
            n.task = Some(
                TaskRecord::new(
                    &format!("t-{agent}"),
                    &format!("e-{agent}"),
                    TaskState::Running,
                    now,
                )
                .running_since(now),
            );
            state.model.nodes.insert(agent, n);
        }
        state.model.health.read_ms = Some(now);
        let saved = MemoryStore::new();
        let (mut d, out) = dispatcher(state, &saved);
        let clock = crate::clock::ManualClock::at(now);
        d = d.with_clock(clock.clone());
        let (jobs_tx, jobs) = crossbeam_channel::unbounded();
        d.set_storage(StorageSide::new(jobs_tx, "pd", "sp"));
        let mut r = Rig {
            d,
            out,
            jobs,
            saved,
            clock,
        };
        r.settle();
        let _ = r.jobs();
        r
    }

    impl Rig {
        /// The end of a batch, as the dispatcher's loop does it: the save, then the jobs.
        fn settle(&mut self) {
            self.d.after_inputs();
            self.d.flush();
            if !self.d.dirty {
                self.d.storage.release();
            }
        }
        fn input(&mut self, i: Input) {
            self.d.handle(i);
            self.settle();
        }
        fn operate(&mut self, host: &str, action: NodeAction) -> Outcome {
            let (reply, answer) = crossbeam_channel::bounded(1);
            let command = Command::Node {
                host: host.into(),
                action,
            };
            self.input(Input::Operator(OperatorRequest { command, reply }));
            answer.try_recv().expect("answered after the batch's save")
        }
        fn removed(&mut self, agent: &str, device: Option<&str>, outcome: Result<(), String>) {
            self.input(Input::Storage(Report::Removed(RemovalReport {
                agent_id: agent.into(),
                device: device.map(str::to_string),
                outcome,
            })));
        }
        fn jobs(&mut self) -> Vec<Job> {
            self.jobs.try_iter().collect()
        }
        fn node(&self, agent: &str) -> &Node {
            self.d.state.model.nodes.get(agent).expect("the node")
        }
        fn saved_node(&self, agent: &str) -> Option<Node> {
            let state = StateStore::new(Box::new(self.saved.clone()))
                .load()
                .unwrap();
            state.model.nodes.get(agent).cloned()
        }
        fn calls(&mut self) -> Vec<Call> {
            self.out
                .try_iter()
                .filter_map(Outgoing::into_call)
                .collect()
        }
        fn offer(&mut self, agent: &str) -> Vec<Call> {
            let _ = self.calls();
            let offer = Offer {
                id: OfferID {
                    value: format!("o-{agent}-{}", self.clock.now_ms()).into(),
                },
                framework_id: FrameworkID { value: "fw".into() },
                agent_id: AgentID {
                    value: agent.into(),
                },
                hostname: format!("host-{agent}").into(),
                resources: ["cpus", "mem"]
                    .map(|n| Resource {
                        name: n.into(),
                        r#type: value::Type::Scalar,
                        scalar: Some(value::Scalar { value: 8192.0 }),
                        role: Some("*".into()),
                        ..Default::default()
                    })
                    .to_vec(),
                ..Default::default()
            };
            self.input(Input::Event(Box::new(Event {
                r#type: Some(event::Type::Offers),
                offers: Some(event::Offers {
                    offers: vec![offer],
                }),
                ..Default::default()
            })));
            self.calls()
        }
        fn task_ended(&mut self, agent: &str, state: TaskState) {
            let task = self.node(agent).task.as_ref().unwrap().task_id.to_string();
            self.input(Input::Event(Box::new(Event {
                r#type: Some(event::Type::Update),
                update: Some(event::Update {
                    status: TaskStatus {
                        task_id: TaskID { value: task.into() },
                        state,
                        agent_id: Some(AgentID {
                            value: agent.into(),
                        }),
                        message: Some("test".into()),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            })));
        }
        fn events(&mut self) -> Vec<(String, String, String)> {
            let events = self.d.events.snapshot();
            events
                .iter()
                .map(|e| (e.action.clone(), e.target.clone(), e.outcome.clone()))
                .collect()
        }
    }

    fn launches(calls: &[Call]) -> usize {
        calls
            .iter()
            .filter_map(|c| c.accept.as_ref())
            .flat_map(|a| a.operations.iter())
            .filter(|o| o.launch.is_some())
            .count()
    }

    /// A task update only writes to a node being decommissioned: the others stay shared
    /// with the last save and the views. The check copied every node it looked at, so a
    /// 10,000-agent launch wave held every node twice (3.6 MB under massif) and saved each
    /// again.
    #[test]
    fn a_task_update_leaves_a_node_not_being_removed_shared() {
        let mut r = rig();
        let before = r.d.state.model.nodes.get_shared("a1").unwrap().clone();
        let status = TaskStatus {
            task_id: TaskID {
                value: "t-a1".into(),
            },
            state: TaskState::Failed,
            ..Default::default()
        };
        assert!(!r.d.decommission_ended("a1", &status, r.clock.now_ms()));
        let after = r.d.state.model.nodes.get_shared("a1").unwrap();
        assert!(Arc::ptr_eq(&before, after), "the node was copied");
    }

    #[test]
    fn decommission_removes_the_sds_after_its_data_moved_then_ends_the_node_for_good() {
        let mut r = rig();
        let o = r.operate("host-a1", NodeAction::Decommission);
        assert_eq!(o.status, 200, "{o:?}");
        assert_eq!(r.node("a1").removal, Some(Removal::Draining));
        // Write-ahead: saved before the gateway work leaves.
        assert_eq!(r.saved_node("a1").unwrap().removal, Some(Removal::Draining));
        let jobs = r.jobs();
        let [Job::Remove(want)] = jobs.as_slice() else {
            panic!("one removal job, got {jobs:?}");
        };
        assert_eq!(
            (want.sds_id.as_deref(), want.device.as_deref()),
            (Some("s-a1"), None)
        );
        assert_eq!(
            r.operate("host-a1", NodeAction::Decommission).status,
            200,
            "again: no-op"
        );
        assert!(r.jobs().is_empty(), "the removal is not sent twice");
        // Its data moved and the gateway no longer lists the SDS: the executor is told to stop.
        r.removed("a1", None, Ok(()));
        let n = r.node("a1");
        assert_eq!(n.removal, Some(Removal::Stopping));
        assert!(n.attached.is_empty() && n.sds_id.is_none());
        assert!(!n.decommissioned);
        // Its executor stopped the services and ended its task: decommissioned, no failure.
        r.task_ended("a1", TaskState::Finished);
        let n = r.node("a1").clone();
        assert!(n.decommissioned && n.removal.is_none(), "{n:?}");
        assert_eq!((n.failures, n.retry_after_ms), (0, None));
        assert!(r.saved_node("a1").unwrap().decommissioned);
        // Its agent offers again, later: never launched.
        r.clock.advance(3_600_000);
        assert_eq!(launches(&r.offer("a1")), 0);
        assert!(r
            .jobs()
            .iter()
            .all(|j| !matches!(j, Job::Attach(w) if &*w.agent_id == "a1")));
        let events = r.events();
        assert!(
            events.contains(&("decommission".into(), "host-a1".into(), "done".into())),
            "{events:?}"
        );
        // Recommissioned: launched again on the next offer, from the first phase.
        assert_eq!(r.operate("host-a1", NodeAction::Recommission).status, 200);
        assert!(r.node("a1").launchable() && r.node("a1").progress.is_none());
        assert_eq!(launches(&r.offer("a1")), 1);
    }

    #[test]
    fn decommission_is_refused_with_the_reason() {
        let mut r = rig();
        // The others could not hold its data.
        let g = 1u64 << 30;
        r.d.state.model.pools.push(PoolCapacity {
            protection_domain: "pd".into(),
            pool: "sp".into(),
            id: "p1".into(),
            capacity_bytes: 400 * g,
            spare_bytes: 40 * g,
            used_bytes: 300 * g,
            ..Default::default()
        });
        for agent in ["a1", "a2"] {
            let devices = ["/dev/sdb", "/dev/sdc"].map(|p| crate::scheduler::model::DeviceStatus {
                path: p.into(),
                storage_pool_id: Some("p1".into()),
                ..Default::default()
            });
            r.d.state.model.nodes.get_mut(agent).unwrap().storage =
                Some(Arc::new(crate::scheduler::model::NodeStorage {
                    sds: None,
                    devices: devices.to_vec(),
                }));
        }
        let o = r.operate("host-a1", NodeAction::Decommission);
        assert_eq!(o.status, 409, "{o:?}");
        assert!(
            o.message.contains("could not hold its data"),
            "{}",
            o.message
        );
        assert!(o.message.contains("pool pd/sp"), "{}", o.message);
        r.d.state.model.pools.clear();
        // No fresh word from the gateway: the budget cannot tell.
        r.d.state.model.health.read_ms = None;
        let o = r.operate("host-a1", NodeAction::Decommission);
        assert_eq!(o.status, 409);
        assert!(
            o.message.contains("disruption budget forbids it now"),
            "{}",
            o.message
        );
        assert!(r.node("a1").removal.is_none());
        assert!(r.jobs().is_empty());
        // An MDM member.
        r.d.state.model.nodes.get_mut("a2").unwrap().persona = Persona::Primary;
        let o = r.operate("host-a2", NodeAction::Decommission);
        assert_eq!(o.status, 409);
        assert!(o.message.contains("MDM cluster"), "{}", o.message);
        assert_eq!(r.operate("host-zz", NodeAction::Decommission).status, 404);
        assert_eq!(r.operate("host-a1", NodeAction::Recommission).status, 409);
        let events = r.events();
        assert!(events.iter().all(|e| e.2 != "accepted"), "{events:?}");
    }

    #[test]
    fn a_removal_the_gateway_refuses_takes_the_node_back() {
        let mut r = rig();
        assert_eq!(r.operate("host-a1", NodeAction::Decommission).status, 200);
        let _ = r.jobs();
        r.removed("a1", None, Err("Not enough capacity to remove SDS".into()));
        let n = r.node("a1");
        assert!(n.removal.is_none() && !n.decommissioned);
        assert!(n
            .last_error
            .as_deref()
            .unwrap()
            .contains("Not enough capacity"));
        assert!(r
            .events()
            .contains(&("decommission".into(), "host-a1".into(), "failed".into())));
        // It may be asked again, and the job goes out again.
        assert_eq!(r.operate("host-a1", NodeAction::Decommission).status, 200);
        assert!(matches!(r.jobs().as_slice(), [Job::Remove(_)]));
    }

    #[test]
    fn a_removal_under_way_goes_out_again_after_a_restart() {
        let mut r = rig();
        assert_eq!(r.operate("host-a1", NodeAction::Decommission).status, 200);
        let state = StateStore::new(Box::new(r.saved.clone())).load().unwrap();
        let (mut d, _out) = dispatcher(state, &r.saved);
        let (tx, jobs) = crossbeam_channel::unbounded();
        d.set_storage(StorageSide::new(tx, "pd", "sp"));
        d.after_inputs();
        d.flush();
        d.storage.release();
        let sent: Vec<Job> = jobs.try_iter().collect();
        assert!(
            sent.iter()
                .any(|j| matches!(j, Job::Remove(w) if w.agent_id == "a1")),
            "{sent:?}"
        );
    }

    #[test]
    fn replace_removes_the_sds_of_a_host_gone_and_forgets_the_node() {
        let mut r = rig();
        let o = r.operate("host-a1", NodeAction::Replace);
        assert_eq!(o.status, 409, "a running host is not replaced: {o:?}");
        assert!(o.message.contains("decommission"), "{}", o.message);
        r.task_ended("a1", TaskState::Lost);
        let o = r.operate("host-a1", NodeAction::Replace);
        assert_eq!(o.status, 200, "{o:?}");
        assert!(matches!(r.jobs().as_slice(), [Job::Remove(w)] if w.device.is_none()));
        // Not relaunched meanwhile.
        assert_eq!(launches(&r.offer("a1")), 0);
        r.removed("a1", None, Ok(()));
        assert!(r.d.state.model.nodes.get("a1").is_none());
        assert!(r.saved_node("a1").is_none());
        // Its agent, back, is a new node.
        assert_eq!(launches(&r.offer("a1")), 1);
        assert!(r
            .events()
            .contains(&("replace".into(), "host-a1".into(), "done".into())));
    }

    #[test]
    fn a_device_removed_leaves_the_pool_and_is_never_attached_again() {
        let mut r = rig();
        let o = r.operate("host-a1", NodeAction::RemoveDevice("/dev/sdx".into()));
        assert_eq!(o.status, 404);
        assert!(o.message.contains("/dev/sdb, /dev/sdc"), "{}", o.message);
        let o = r.operate("host-a1", NodeAction::RemoveDevice("/dev/sdc".into()));
        assert_eq!(o.status, 200, "{o:?}");
        let jobs = r.jobs();
        assert!(
            matches!(jobs.as_slice(), [Job::Remove(w)] if w.device.as_deref() == Some("/dev/sdc")),
            "{jobs:?}"
        );
        r.removed("a1", Some("/dev/sdc"), Ok(()));
        let n = r.node("a1").clone();
        assert_eq!(n.attached, ["/dev/sdb"]);
        assert_eq!(n.devices, ["/dev/sdb"]);
        assert_eq!(*n.devices_removed, ["/dev/sdc"]);
        assert!(n.devices_removing.is_empty());
        // The host still reports the disk: it is not attached again.
        r.d.state
            .model
            .nodes
            .get_mut("a1")
            .unwrap()
            .devices
            .push("/dev/sdc".into());
        r.settle();
        let again: Vec<Job> = r.jobs();
        assert!(
            again.iter().all(
                |j| !matches!(j, Job::Attach(w) if w.devices.iter().any(|d| d.path == "/dev/sdc"))
            ),
            "{again:?}"
        );
        assert!(r.events().contains(&(
            "remove-device".into(),
            "host-a1:/dev/sdc".into(),
            "done".into()
        )));
    }
}
