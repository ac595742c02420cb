//! Task records and their state machine: status updates, executor and agent failures.

use super::*;
use crate::contract::ids;

impl Dispatcher {
    pub(super) fn on_update(&mut self, status: TaskStatus, now: u64) {
        let task_id = status.task_id.value.to_string();
        let state = status.state;
        let why = describe(&status);
        self.recon.answered(&task_id);
        let ours = current_launch_of(
            &self.state.model,
            &task_id,
            status.agent_id.as_ref().map(|a| a.value.as_str()),
        );
        match ours.and_then(|a| self.state.model.nodes.get_mut(&a)) {
            Some(node) => {
                let host = node.hostname.clone();
                let Some(task) = node.task.as_mut() else {
                    return;
                };
                let was_active = task.is_active();
                task.state = state;
                node.last_contact_ms = Some(now);
                node.updated_ms = now;
                match state {
                    TaskState::Running => {
                        task.running_since_ms.get_or_insert(now);
                        info!("agent {host}: task {task_id} running");
                    }
                    TaskState::Unreachable => {
                        warn!("agent {host}: task {task_id} unreachable ({why})");
                        node.phase = Phase::Lost;
                        node.last_error = Some(format!("TASK_UNREACHABLE: {why}").into());
                    }
                    s if s.is_terminal() || matches!(s, TaskState::Unknown) => {
                        let stable = task
                            .running_since_ms
                            .is_some_and(|since| now.saturating_sub(since) >= STABLE_RUN_MS);
                        if was_active {
                            node.failures = if stable { 1 } else { node.failures + 1 };
                            let delay = relaunch_delay(node.failures);
                            node.retry_after_ms = Some(now + delay.as_millis() as u64);
                            self.offer_mode
                                .uncovered(&node.agent_id, now + delay.as_millis() as u64);
                            warn!(
                                "agent {host}: task {task_id} ended {} ({why}); relaunch in {} s (failure {})",
                                state,
                                delay.as_secs(),
                                node.failures
                            );
                        }
                        node.phase = match s {
                            TaskState::Lost
                            | TaskState::Gone
                            | TaskState::GoneByOperator
                            | TaskState::Dropped
                            | TaskState::Unknown => Phase::Lost,
                            _ => Phase::Failed,
                        };
                        node.last_error = Some(format!("{state}: {why}").into());
                    }
                    _ => {
                        if self
                            .debug_tally
                            .note(now, "task update", || state.to_string())
                        {
                            debug!("agent {host}: task {task_id} {state}");
                        }
                    }
                }
                self.dirty = true;
            }
            None => self.on_stray_update(&status),
        }
        self.acknowledge(&status);
        self.touch_view();
    }

    pub(super) fn on_failure(&mut self, f: event::Failure, now: u64) {
        let agent = f.agent_id.map(|a| a.value.to_string());
        match (f.executor_id, agent) {
            (Some(exec), agent) => {
                let status = f
                    .status
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "?".into());
                warn!(
                    "executor {} on agent {} exited with status {status}",
                    exec.value,
                    agent.as_deref().unwrap_or("?")
                );
                if let Some(node) = agent.and_then(|a| self.state.model.nodes.get_mut(&a)) {
                    // A task that already ended said why (TASK_FAILED with the executor's
                    // reason); its executor's exit after that is no news.
                    if node
                        .task
                        .as_ref()
                        .is_some_and(|t| t.is_executor(&exec.value) && t.is_active())
                    {
                        node.last_error =
                            Some(format!("executor exited with status {status}").into());
                        node.updated_ms = now;
                        self.dirty = true;
                    }
                }
            }
            (None, Some(agent)) => {
                warn!("agent {agent} lost");
                if let Some(node) = self.state.model.nodes.get_mut(&agent) {
                    node.phase = Phase::Lost;
                    node.last_error = Some("agent lost".into());
                    node.updated_ms = now;
                    self.dirty = true;
                }
            }
            (None, None) => debug!("FAILURE event without agent or executor"),
        }
        self.touch_view();
    }
}

/// One line about a status: message, reason and source when Mesos gave them.
fn describe(s: &TaskStatus) -> String {
    let mut parts = Vec::new();
    if let Some(m) = s.message.as_ref().filter(|m| !m.is_empty()) {
        parts.push(m.to_string());
    }
    if let Some(r) = s.reason {
        parts.push(r.to_string());
    }
    if let Some(src) = s.source {
        parts.push(src.to_string());
    }
    if parts.is_empty() {
        "no detail".into()
    } else {
        parts.join(", ")
    }
}

impl Dispatcher {
    /// An update of a task that is not the current launch of any node.
    fn on_stray_update(&mut self, status: &TaskStatus) {
        let task_id = status.task_id.value.to_string();
        let state = status.state;
        let agent = status.agent_id.as_ref().map(|a| a.value.to_string());
        // Not the current launch of any node: a leftover of an earlier launch (its
        // record lost or superseded). Keep every agent at one executor: kill it.
        if !state.is_terminal() && !matches!(state, TaskState::Unknown) {
            let stray = ids::is_task_id(&task_id);
            if stray {
                warn!(
                    "agent {}: task {task_id} is not the current launch; killing it",
                    agent.as_deref().unwrap_or("?")
                );
                let mut c = self.call(call::Type::Kill);
                c.kill = Some(call::Kill {
                    task_id: status.task_id.clone(),
                    agent_id: status.agent_id.clone(),
                    kill_policy: None,
                });
                self.pending.push(c);
                // KILL ends the task, not its executor.
                let executor = status
                    .executor_id
                    .as_ref()
                    .map(|e| e.value.to_string())
                    .or_else(|| ids::executor_of_task(&task_id))
                    .unwrap_or_default();
                if let Some(agent) = &agent {
                    self.shutdown_executor(&executor, agent);
                }
            } else {
                debug!("update for a task we did not launch: {task_id}");
            }
        }
    }

    /// ACKNOWLEDGE of an update that carries a uuid (reconciliation answers carry none).
    fn acknowledge(&mut self, status: &TaskStatus) {
        let task_id = &status.task_id.value;
        if let Some(uuid) = status.uuid.clone() {
            match status.agent_id.clone() {
                Some(agent_id) => {
                    let mut c = self.call(call::Type::Acknowledge);
                    c.acknowledge = Some(call::Acknowledge {
                        agent_id,
                        task_id: status.task_id.clone(),
                        uuid,
                    });
                    self.pending.push(c);
                }
                None => {
                    warn!("update for {task_id} has a uuid but no agent id; cannot acknowledge")
                }
            }
        }
    }

    /// SHUTDOWN (v1 scheduler call) of one of our executors that is not the current launch
    /// of its node: KILL ends a task, not the executor that ran it.
    pub(super) fn shutdown_executor(&mut self, executor_id: &str, agent_id: &str) {
        let current = self
            .state
            .model
            .nodes
            .get(agent_id)
            .and_then(|n| n.task.as_ref())
            .is_some_and(|t| t.is_executor(executor_id) && t.is_active());
        if current || !ids::is_executor_id(executor_id) {
            return;
        }
        warn!(
            "agent {agent_id}: executor {executor_id} is not the current launch; shutting it down"
        );
        let mut c = self.call(call::Type::Shutdown);
        c.shutdown = Some(call::Shutdown {
            executor_id: crate::mesos::types::ExecutorID {
                value: executor_id.into(),
            },
            agent_id: AgentID {
                value: agent_id.into(),
            },
        });
        self.pending.push(c);
    }
}

/// The agent whose node's current launch is `task_id`. Mesos names the agent in every update
/// of a launched task, so that is a lookup; an update without one costs a scan. (An index
/// of task ids was 10,000 more copies of every task id and agent id.)
pub(super) fn current_launch_of(
    model: &ClusterModel,
    task_id: &str,
    agent: Option<&str>,
) -> Option<String> {
    let is_it = |n: &Node| n.task.as_ref().is_some_and(|t| *t.task_id == *task_id);
    match agent {
        Some(a) => model
            .nodes
            .get(a)
            .filter(|n| is_it(n))
            .map(|_| a.to_owned()),
        None => model
            .nodes
            .iter()
            .find(|(_, n)| is_it(n))
            .map(|(a, _)| a.to_string()),
    }
}
