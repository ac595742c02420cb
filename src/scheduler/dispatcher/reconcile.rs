//! Reconciliation with the master (Mesos' reconciliation guide): explicit reconciliation of
//! what we believe is live, repeated with backoff until every task has an answer (agents
//! that re-register late after a master failover answer late); implicit reconciliation
//! periodically, to learn of tasks we do not know; and a launch stuck in TASK_STAGING is
//! killed and replaced.

use super::*;

/// First wait for answers to an explicit reconciliation; doubles up to the cap.
const RETRY_FIRST_MS: u64 = 5_000;
const RETRY_MAX_MS: u64 = 5 * 60_000;
/// Implicit reconciliation this often while subscribed.
pub(super) const IMPLICIT_EVERY_MS: u64 = 15 * 60_000;
/// A launch still in TASK_STAGING this long after its ACCEPT is given up.
pub(super) const STAGING_TIMEOUT_MS: u64 = 5 * 60_000;

#[derive(Debug, Default)]
pub(super) struct Reconciliation {
    /// Task id -> agent id of the tasks asked about and not answered yet: after a restart,
    /// every task, at the moment the whole model has just been loaded, so the agent id is
    /// the model's own, shared.
    unanswered: BTreeMap<String, Arc<str>>,
    retry_at_ms: Option<u64>,
    delay_ms: u64,
    implicit_at_ms: Option<u64>,
}

impl Reconciliation {
    /// Any status of the task answers it.
    pub(super) fn answered(&mut self, task_id: &str) {
        self.unanswered.remove(task_id);
    }
}

impl Dispatcher {
    /// On SUBSCRIBED: explicit reconciliation of the active tasks, then implicit.
    pub(super) fn reconcile_all(&mut self) {
        let now = self.clock.now_ms();
        self.recon.unanswered = self
            .state
            .model
            .active_tasks()
            .map(|(n, t)| (t.task_id.to_string(), n.agent_id.clone()))
            .collect();
        self.recon.delay_ms = RETRY_FIRST_MS;
        self.send_explicit(now);
        self.send_implicit(now);
    }

    /// Asks about one task at once (a launch whose ACCEPT may not have reached the master).
    pub(super) fn reconcile_task(&mut self, task_id: &str, agent_id: &str) {
        self.recon
            .unanswered
            .insert(task_id.to_owned(), agent_id.into());
        self.recon.delay_ms = RETRY_FIRST_MS;
        self.recon.retry_at_ms = Some(self.clock.now_ms());
    }

    fn send_explicit(&mut self, now: u64) {
        // Only tasks that are still some node's current, active launch are worth asking.
        let model = &self.state.model;
        self.recon.unanswered.retain(|task, agent| {
            model
                .nodes
                .get(agent)
                .and_then(|n| n.task.as_ref())
                .is_some_and(|t| *t.task_id == **task && t.is_active())
        });
        if self.recon.unanswered.is_empty() {
            self.recon.retry_at_ms = None;
            return;
        }
        let tasks: Vec<call::reconcile::Task> = self
            .recon
            .unanswered
            .iter()
            .map(|(task, agent)| call::reconcile::Task {
                task_id: TaskID {
                    value: task.as_str().into(),
                },
                agent_id: Some(AgentID {
                    value: (&**agent).into(),
                }),
            })
            .collect();
        info!("reconciling {} known tasks", tasks.len());
        let mut c = self.call(call::Type::Reconcile);
        c.reconcile = Some(call::Reconcile { tasks });
        self.pending.push(c);
        self.recon.retry_at_ms = Some(now + self.recon.delay_ms);
        self.recon.delay_ms = (self.recon.delay_ms * 2).min(RETRY_MAX_MS);
    }

    /// Asks at once about each unreachable task whose agent `listed` names again: it came
    /// back with the task (the master says TASK_RUNNING by itself) or without it (Mesos says
    /// TASK_GONE only when asked).
    pub(super) fn ask_about_unreachable(&mut self, listed: &HashSet<&str>) {
        let back: Vec<(String, String)> = unreachable_tasks(&self.state.model)
            .filter(|(agent, _)| listed.contains(agent))
            .map(|(agent, task)| (task.to_owned(), agent.to_owned()))
            .collect();
        for (task, agent) in back {
            info!("agent {agent} is listed again; asking about its unreachable task {task}");
            self.reconcile_task(&task, &agent);
        }
    }

    fn send_implicit(&mut self, now: u64) {
        // Implicit reconciliation does not answer for a task the master forgot: unreachable
        // tasks are asked about by name, in case their agent never comes back.
        let unreachable: Vec<(String, Arc<str>)> = unreachable_tasks(&self.state.model)
            .map(|(agent, task)| (task.to_owned(), agent.into()))
            .collect();
        for (task, agent) in unreachable {
            if self.recon.unanswered.insert(task, agent).is_none() {
                self.recon.delay_ms = RETRY_FIRST_MS;
                self.recon.retry_at_ms = Some(now);
            }
        }
        let mut c = self.call(call::Type::Reconcile);
        c.reconcile = Some(call::Reconcile::default());
        self.pending.push(c);
        self.recon.implicit_at_ms = Some(now + IMPLICIT_EVERY_MS);
    }

    pub(super) fn reconcile_deadline(&self) -> Option<u64> {
        if !self.subscribed {
            return None;
        }
        let staging = self.node_deadlines(self.clock.now_ms()).staging;
        [self.recon.retry_at_ms, self.recon.implicit_at_ms, staging]
            .into_iter()
            .flatten()
            .min()
    }

    /// Called after every batch: what is due of the above.
    pub(super) fn reconcile_due(&mut self) {
        if !self.subscribed {
            return;
        }
        let now = self.clock.now_ms();
        if self.recon.retry_at_ms.is_some_and(|t| t <= now) {
            self.send_explicit(now);
        }
        if self.recon.implicit_at_ms.is_some_and(|t| t <= now) {
            self.send_implicit(now);
        }
        self.kill_stuck_launches(now);
    }

    /// A launch in TASK_STAGING past the timeout: KILL it and count it as a failed launch,
    /// so the node is relaunched after its backoff under a new task id.
    fn kill_stuck_launches(&mut self, now: u64) {
        let stuck: Vec<String> = self
            .state
            .model
            .nodes
            .values()
            .filter(|n| {
                n.task.as_ref().is_some_and(|t| {
                    t.state == TaskState::Staging && t.launched_at_ms + STAGING_TIMEOUT_MS <= now
                })
            })
            .map(|n| n.agent_id.to_string())
            .collect();
        for agent in stuck {
            let Some(node) = self.state.model.nodes.get_mut(&agent) else {
                continue;
            };
            let Some(task) = node.task.as_mut() else {
                continue;
            };
            // Recorded as killed at once: the node is no longer covered by it, and its own
            // TASK_KILLED (if it ever comes) changes nothing.
            task.state = TaskState::Killed;
            let task_id = task.task_id.clone();
            node.phase = Phase::Failed;
            node.last_error = Some(
                format!(
                    "launch stuck in TASK_STAGING for {} s; killed",
                    STAGING_TIMEOUT_MS / 1000
                )
                .into(),
            );
            node.updated_ms = now;
            let after = self.failure_budget.count(node, None, now);
            let what = format!("task {task_id} stuck in TASK_STAGING; killing it");
            self.after_failure(&agent, after, now, &what);
            let mut c = self.call(call::Type::Kill);
            c.kill = Some(call::Kill {
                task_id: TaskID {
                    value: (*task_id).into(),
                },
                agent_id: Some(AgentID {
                    value: agent.as_str().into(),
                }),
                kill_policy: None,
            });
            self.pending.push(c);
            self.dirty = true;
            self.touch_view();
        }
    }
}

/// (agent id, task id) of every node's current launch that is TASK_UNREACHABLE.
pub(super) fn unreachable_tasks(model: &ClusterModel) -> impl Iterator<Item = (&str, &str)> {
    model.nodes.values().filter_map(|n| {
        let t = n.task.as_ref()?;
        (t.state == TaskState::Unreachable).then_some((&*n.agent_id, &*t.task_id))
    })
}
