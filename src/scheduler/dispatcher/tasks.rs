//! Task records and their state machine: status updates, executor and agent failures.
//!
//! A partition-aware framework hears TASK_UNREACHABLE when the master loses its agent: the
//! task may still run there, so the node waits, still covered (no relaunch, no second
//! executor on that host), until Mesos says the task is gone (TASK_GONE, TASK_GONE_BY_OPERATOR,
//! TASK_UNKNOWN, TASK_LOST; an agent back without it answers reconciliation with TASK_GONE)
//! or that it runs (the agent came back with it: the node resumes where it was). A launch
//! that never started (TASK_DROPPED, or an ACCEPT whose offer the master had rescinded) is
//! no failure of the node: it is relaunched at once. Nor is the end of a launch whose host goes
//! down for the reboot its executor asked for (`node_plan::reboot_asked`): the node keeps its
//! phase and is relaunched as soon as the host is back. Nor is the end of a launch killed to
//! replace its executor by a newer binary (`replace.rs`) or for an operator's restart
//! (`op_restart.rs`): relaunched at once, phase kept.

use super::*;
use crate::contract::ids;
use crate::mesos::types::task_status::Reason;
use crate::scheduler::node_plan;

/// What a status update of a node's current launch means for the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The task runs; `resumed` when its agent had been unreachable.
    Running { resumed: bool },
    /// Its agent is cut off from the master: the node waits, covered.
    Unreachable,
    /// The launch never started: relaunch at once, not counted as a failure.
    Dropped,
    /// The task ended: relaunch after the failure backoff; `lost` when it did not fail by
    /// itself (its agent or the master ended it).
    Ended { lost: bool },
    /// Nothing to decide (staging, starting, killing).
    Other,
}

/// The verdict on `status` for a task last known in state `before`.
pub(super) fn verdict(before: TaskState, status: &TaskStatus) -> Verdict {
    let invalid_offers = status.reason == Some(Reason::InvalidOffers);
    match status.state {
        TaskState::Running => Verdict::Running {
            resumed: before == TaskState::Unreachable,
        },
        TaskState::Unreachable => Verdict::Unreachable,
        // A framework that is not partition-aware hears TASK_LOST for the same ACCEPT.
        TaskState::Dropped => Verdict::Dropped,
        TaskState::Lost if invalid_offers => Verdict::Dropped,
        s if s.is_terminal() || s == TaskState::Unknown => Verdict::Ended {
            lost: matches!(
                s,
                TaskState::Lost | TaskState::Gone | TaskState::GoneByOperator | TaskState::Unknown
            ),
        },
        _ => Verdict::Other,
    }
}

impl Dispatcher {
    pub(super) fn on_update(&mut self, status: TaskStatus, now: u64) {
        let task_id = status.task_id.value.to_string();
        self.recon.answered(&task_id);
        let ours = current_launch_of(
            &self.state.model,
            &task_id,
            status.agent_id.as_ref().map(|a| a.value.as_str()),
        );
        match ours {
            Some(agent) if self.decommission_ended(&agent, &status, now) => {}
            Some(agent) => self.on_current_update(&agent, &status, now),
            None => self.on_stray_update(&status),
        }
        self.acknowledge(&status);
        self.touch_view();
    }

    /// Whether `agent`'s node's host is down for the reboot its executor asked for.
    pub(super) fn reboot_asked(&self, agent: &str) -> bool {
        let nodes = &self.state.model.nodes;
        nodes
            .get(agent)
            .is_some_and(|n| node_plan::reboot_asked(n, self.executors.install(), nodes.values()))
    }

    /// An update of `agent`'s node's current launch.
    fn on_current_update(&mut self, agent: &str, status: &TaskStatus, now: u64) {
        if self.only_alive(agent, status, now) {
            return;
        }
        let state = status.state;
        let why = describe(status);
        let planned = self.planned_end(agent, status);
        let Some(node) = self.state.model.nodes.get_mut(agent) else {
            return;
        };
        let host = node.hostname.clone();
        let Some(task) = node.task.as_mut() else {
            return;
        };
        let task_id = task.task_id.clone();
        let was_active = task.is_active();
        let verdict = verdict(task.state, status);
        let as_known = task.state == state;
        task.state = state;
        let running_since = task.running_since_ms;
        node.last_contact_ms = Some(now);
        node.updated_ms = now;
        self.dirty = true;
        match verdict {
            Verdict::Running { resumed } => {
                if resumed {
                    info!("agent {host}: task {task_id} running again ({why}); the node resumes, nothing relaunched");
                } else if as_known {
                    // A repeated RUNNING `only_alive` left: no start time, or rebooting.
                    debug!("agent {host}: task {task_id} running ({why})");
                } else {
                    info!("agent {host}: task {task_id} running");
                }
                running(node, resumed, now);
            }
            Verdict::Unreachable | Verdict::Ended { .. } if planned.is_some() => {
                // The phase stays: the next launch resumes where this one was.
                let line = planned.unwrap_or_default();
                info!("agent {host}: task {task_id} {state} ({why}) {line}");
                if was_active && !node.covered() {
                    node.retry_after_ms = None;
                    self.offer_mode.uncovered(agent, now);
                }
            }
            Verdict::Unreachable => {
                // The phase stays: the task may still be at it on the far side.
                warn!("agent {host}: task {task_id} unreachable ({why}); the node waits for its agent");
                node.last_error = Some(
                    format!("TASK_UNREACHABLE: {why} (waiting for the agent or Mesos to say the task is gone)")
                        .into(),
                );
            }
            Verdict::Dropped => {
                node.phase = Phase::Lost;
                node.last_error = Some(format!("{state}: {why}").into());
                if was_active {
                    node.retry_after_ms = None;
                    self.offer_mode.uncovered(agent, now);
                    warn!("agent {host}: launch {task_id} {state} before it started ({why}); relaunch at once");
                }
            }
            Verdict::Ended { lost } => {
                node.phase = if lost { Phase::Lost } else { Phase::Failed };
                node.last_error = Some(format!("{state}: {why}").into());
                if was_active {
                    let after = self.failure_budget.count(node, running_since, now);
                    let what = format!("task {task_id} ended {state} ({why})");
                    self.after_failure(agent, after, now, &what);
                }
            }
            Verdict::Other => {
                if self
                    .debug_tally
                    .note(now, "task update", || state.to_string())
                {
                    debug!("agent {host}: task {task_id} {state}");
                }
            }
        }
    }

    /// Whether `status` only says that a launch known to run still runs, which
    /// reconciliation answers for every task: explicitly after each restart, implicitly every
    /// 15 minutes. It changes nothing of the node but its last contact, which is then noted
    /// outside the write log (`Nodes::note_contact`): a save that reads the log writes no
    /// record for it (one after a write to every node still does, once), and the walk after
    /// the batch renders no plan again for it. A logged write each was 10,000 records every
    /// 15 minutes on an idle 10,000-node cluster, about 8 MB, in ZooKeeper when that is the
    /// store.
    fn only_alive(&mut self, agent: &str, status: &TaskStatus, now: u64) -> bool {
        if status.state != TaskState::Running {
            return false;
        }
        let nodes = &mut self.state.model.nodes;
        let Some(node) = nodes.get(agent) else {
            return false;
        };
        let known_running = node
            .task
            .as_ref()
            .is_some_and(|t| t.state == TaskState::Running && t.running_since_ms.is_some());
        if !known_running || node.rebooting {
            return false;
        }
        debug!(
            "agent {}: task {} running ({})",
            node.hostname,
            status.task_id.value,
            describe(status)
        );
        nodes.note_contact(agent, now)
    }

    /// Why the end (or loss) of `agent`'s current launch that `status` reports was asked for,
    /// when it was: its host reboots for its executor, or its executor is replaced by the
    /// binary served now.
    fn planned_end(&self, agent: &str, status: &TaskStatus) -> Option<String> {
        let node = self.state.model.nodes.get(agent)?;
        let before = node.task.as_ref()?.state;
        let ended = matches!(verdict(before, status), Verdict::Ended { .. });
        if ended && self.replaced_launch_ended(agent) {
            return Some("as its executor is replaced; relaunch on the next offer".into());
        }
        if ended && self.restarted_launch_ended(agent, &status.task_id.value) {
            return Some("as the operator restarts it; relaunch on the next offer".into());
        }
        if node.maintenance.as_ref().is_some_and(|m| m.accepted()) {
            return Some(
                "as its machine goes down for Mesos maintenance; the node waits for it".into(),
            );
        }
        self.reboot_asked(agent).then(|| {
            format!(
                "as its host reboots ({}); the node waits for it",
                node.phase
            )
        })
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
                // A task still covering the node (unreachable) says itself what became of it;
                // a host down for the reboot its executor asked for is expected to be lost.
                let rebooting = self.reboot_asked(&agent);
                if let Some(node) = self
                    .state
                    .model
                    .nodes
                    .get_mut(&agent)
                    .filter(|n| !n.covered() && !rebooting)
                {
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

/// A node whose task runs; `resumed` after its agent was unreachable.
fn running(node: &mut Node, resumed: bool, now: u64) {
    if let Some(task) = node.task.as_mut() {
        task.running_since_ms.get_or_insert(now);
    }
    if resumed {
        clear_unreachable(node);
    }
}

/// A node whose task runs again: the error saying it was unreachable is over.
fn clear_unreachable(node: &mut Node) {
    if node
        .last_error
        .as_deref()
        .is_some_and(|e| e.starts_with("TASK_UNREACHABLE"))
    {
        node.last_error = None;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn status(state: TaskState, reason: Option<Reason>) -> TaskStatus {
        TaskStatus {
            task_id: crate::mesos::types::TaskID { value: "t".into() },
            state,
            reason,
            ..Default::default()
        }
    }

    #[test]
    fn verdicts() {
        use TaskState as S;
        let v = |before, state, reason| verdict(before, &status(state, reason));
        assert_eq!(
            v(S::Unreachable, S::Running, Some(Reason::AgentReregistered)),
            Verdict::Running { resumed: true }
        );
        assert_eq!(
            v(S::Starting, S::Running, None),
            Verdict::Running { resumed: false }
        );
        assert_eq!(v(S::Running, S::Unreachable, None), Verdict::Unreachable);
        assert_eq!(
            v(S::Staging, S::Dropped, Some(Reason::InvalidOffers)),
            Verdict::Dropped
        );
        assert_eq!(v(S::Staging, S::Dropped, None), Verdict::Dropped);
        assert_eq!(
            v(S::Staging, S::Lost, Some(Reason::InvalidOffers)),
            Verdict::Dropped
        );
        for gone in [S::Gone, S::GoneByOperator, S::Unknown, S::Lost] {
            assert_eq!(
                v(S::Unreachable, gone, Some(Reason::Reconciliation)),
                Verdict::Ended { lost: true },
                "{gone}"
            );
        }
        for failed in [S::Failed, S::Killed, S::Error, S::Finished] {
            assert_eq!(v(S::Running, failed, None), Verdict::Ended { lost: false });
        }
        for other in [S::Staging, S::Starting, S::Killing] {
            assert_eq!(v(S::Staging, other, None), Verdict::Other);
        }
    }
}
