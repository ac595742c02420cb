//! Executors of an older binary replaced, one node at a time, after the scheduler was
//! upgraded: the binary it serves now has another SHA-256 than the one a node's launch
//! checked (`Node::executor_sha256`). Replacing an executor stops no storage service: the
//! executor is killed, its node keeps its phase, and the relaunch on the next offer resumes
//! at `running` (its recorded progress), so no phase is done again.
//!
//! One replacement is in flight at most: the next node goes only once the last one reports
//! `running` on the new binary. A relaunch that fails instead stops the sequence with the
//! reason on its node, until that node runs on the binary served (the usual relaunch after
//! its backoff) or another binary is served.
//!
//! What to do next is decided here without I/O ([`step`]); the dispatcher records it, saves,
//! and only then sends the KILL.

use super::*;
use crate::scheduler::model::Replacement;

/// The sequence's next move, for the binary served now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// Nothing to replace, or a replacement is still under way.
    Wait,
    /// The node's replacement runs on the new binary: done, the next may go.
    Finished { agent: Arc<str> },
    /// The node's new executor did not come back `running`: the sequence stops.
    Failed { agent: Arc<str>, reason: String },
    /// Kill this node's executor, to be relaunched on the binary served.
    Replace { agent: Arc<str> },
}

/// Whether `node` runs its executor at `running` on the binary of digest `served`.
fn runs_on(node: &Node, served: &str) -> bool {
    node.phase == Phase::Running
        && node.executor_sha256.as_deref() == Some(served)
        && node
            .task
            .as_ref()
            .is_some_and(|t| t.state == TaskState::Running)
}

/// The node's executor was let go on a day-two step it has not finished: killing it now
/// would cut an install or a restart in half.
fn mid_step(node: &Node) -> bool {
    node.rollout.as_deref().is_some_and(|r| {
        r.granted.is_some()
            || r.steps
                .iter()
                .any(|s| s.state == crate::scheduler::model::StepState::InProgress)
    })
}

/// The state of `node`'s replacement `r`, when it changed: finished or failed.
fn settle(node: &Node, r: &Replacement) -> Option<Step> {
    let agent = node.agent_id.clone();
    if runs_on(node, &r.to_sha256) {
        return Some(Step::Finished { agent });
    }
    // The new launch (it carries the new digest) ended or its executor failed a phase.
    let relaunched = node.executor_sha256.as_deref() == Some(&*r.to_sha256);
    let ended = matches!(node.phase, Phase::Failed | Phase::Lost);
    (r.failed.is_none() && relaunched && ended).then(|| Step::Failed {
        agent,
        reason: node
            .last_error
            .as_deref()
            .unwrap_or("the new executor ended")
            .to_string(),
    })
}

/// The next move over every node for the binary of digest `served`: first what became of
/// the replacement under way; then, with none under way and none failed for this binary,
/// the first node (by host name) running an older one.
pub(super) fn step<'a>(nodes: impl Iterator<Item = &'a Node>, served: &str) -> Step {
    let mut next: Option<&Node> = None;
    for node in nodes {
        if let Some(r) = &node.replacing {
            if let Some(s) = settle(node, r) {
                return s;
            }
            // One failed for an earlier binary: another binary is served now, try again.
            if r.failed.is_none() || *r.to_sha256 == *served {
                return Step::Wait;
            }
        }
        let older = node.executor_sha256.as_deref() != Some(served);
        let candidate = older
            && node.phase == Phase::Running
            && node
                .task
                .as_ref()
                .is_some_and(|t| t.state == TaskState::Running)
            && !mid_step(node)
            && node.restart.is_none();
        if candidate && next.is_none_or(|n| node.hostname < n.hostname) {
            next = Some(node);
        }
    }
    match next {
        Some(n) => Step::Replace {
            agent: n.agent_id.clone(),
        },
        None => Step::Wait,
    }
}

impl Dispatcher {
    /// One move of the replacement sequence (see the module's comment), once subscribed.
    pub(super) fn replace_executors(&mut self) {
        if !self.subscribed {
            return;
        }
        let Some(served) = self.served_executor_digest() else {
            return;
        };
        match step(self.state.model.nodes.values(), &served) {
            Step::Wait => {}
            Step::Finished { agent } => {
                if let Some(node) = self.state.model.nodes.get_mut(&agent) {
                    node.replacing = None;
                    info!(
                        "agent {}: executor replaced, running on SHA-256 {served}",
                        node.hostname
                    );
                }
                self.dirty = true;
                self.touch_view();
            }
            Step::Failed { agent, reason } => {
                if let Some(node) = self.state.model.nodes.get_mut(&agent) {
                    error!("agent {}: executor replacement failed, no other executor is replaced until this node runs on SHA-256 {served}: {reason}", node.hostname);
                    if let Some(r) = node.replacing.as_mut() {
                        r.failed = Some(format!("executor replacement failed: {reason}").into());
                    }
                }
                self.dirty = true;
                self.touch_view();
            }
            // Paused: the next replacement waits for the resume.
            Step::Replace { .. } if self.state.model.paused => {}
            Step::Replace { agent } => self.start_replacement(&agent, &served),
        }
    }

    /// Records `agent`'s replacement and kills its task (the KILL leaves after the save).
    fn start_replacement(&mut self, agent: &str, served: &str) {
        let Some(node) = self.state.model.nodes.get_mut(agent) else {
            return;
        };
        let Some(task) = node.task.as_ref() else {
            return;
        };
        info!(
            "agent {}: replacing its executor (SHA-256 {}) by the one served (SHA-256 {served}): killing task {}",
            node.hostname,
            node.executor_sha256.as_deref().unwrap_or("not recorded"),
            task.task_id
        );
        let task_id = TaskID {
            value: (*task.task_id).into(),
        };
        node.replacing = Some(Box::new(Replacement {
            to_sha256: served.into(),
            failed: None,
        }));
        node.updated_ms = self.clock.now_ms();
        let mut c = self.call(call::Type::Kill);
        c.kill = Some(call::Kill {
            task_id,
            agent_id: Some(AgentID {
                value: agent.into(),
            }),
            kill_policy: None,
        });
        self.pending.push(c);
        self.dirty = true;
        self.touch_view();
    }

    /// The end of `agent`'s launch that its replacement killed: not a failure; the node keeps
    /// its phase and is relaunched on the next offer.
    pub(super) fn replaced_launch_ended(&self, agent: &str) -> bool {
        self.state.model.nodes.get(agent).is_some_and(|n| {
            n.replacing.as_ref().is_some_and(|r| {
                r.failed.is_none() && n.executor_sha256.as_deref() != Some(&*r.to_sha256)
            })
        })
    }

    /// The digest of the binary served now; the launch context's when none is served (tests).
    fn served_executor_digest(&self) -> Option<String> {
        match &self.executor_binary {
            Some(binary) => binary.sha256().ok(),
            None => self.ctx.executor_sha256.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "old";
    const NEW: &str = "new";

    fn node(agent: &str, host: &str, phase: Phase, digest: Option<&str>) -> Node {
        let mut n = Node::new(agent, host, crate::scheduler::model::Persona::Data, 0);
        n.phase = phase;
        n.executor_sha256 = digest.map(Into::into);
        n.task = Some(TaskRecord::new(
            &format!("storage.{host}.1"),
            &format!("storage-executor.{host}.1"),
            TaskState::Running,
            0,
        ));
        n
    }

    fn replacing(mut n: Node, failed: Option<&str>) -> Node {
        n.replacing = Some(Box::new(Replacement {
            to_sha256: NEW.into(),
            failed: failed.map(Into::into),
        }));
        n
    }

    fn replace(agent: &str) -> Step {
        Step::Replace {
            agent: agent.into(),
        }
    }

    #[test]
    fn running_nodes_on_an_older_binary_go_one_at_a_time_by_host_name() {
        let nodes = [
            node("a2", "h2", Phase::Running, Some(OLD)),
            node("a1", "h3", Phase::Running, None),
            node("a3", "h1", Phase::Running, Some(OLD)),
            node("a4", "h0", Phase::Running, Some(NEW)),
        ];
        assert_eq!(step(nodes.iter(), NEW), replace("a3"));
        // Nodes not running yet wait for it: a node mid-install is not interrupted.
        let walking = [
            node("a1", "h1", Phase::Packages, Some(OLD)),
            node("a2", "h2", Phase::Running, Some(NEW)),
        ];
        assert_eq!(step(walking.iter(), NEW), Step::Wait);
        // Nor is a task that is not running (unreachable, staging).
        let mut away = node("a1", "h1", Phase::Running, Some(OLD));
        away.task.as_mut().unwrap().state = TaskState::Unreachable;
        assert_eq!(step([away].iter(), NEW), Step::Wait);
        // Nor an executor in the middle of a day-two step it was let go on.
        use crate::scheduler::model::{NodeRollout, Step as DayTwo, StepState, StepStatus};
        let mut upgrading = node("a1", "h1", Phase::Running, Some(OLD));
        upgrading.rollout = Some(Box::new(NodeRollout {
            generation: 2,
            steps: vec![StepStatus {
                state: StepState::InProgress,
                ..StepStatus::pending(DayTwo::UpgradeSds)
            }],
            granted: Some(DayTwo::UpgradeSds),
        }));
        assert_eq!(step([upgrading].iter(), NEW), Step::Wait);
    }

    #[test]
    fn one_replacement_in_flight_until_it_runs_on_the_new_binary() {
        // Killed, not relaunched yet (the old digest still recorded), or relaunched and
        // walking: the others wait.
        for in_flight in [
            replacing(node("a1", "h1", Phase::Running, Some(OLD)), None),
            replacing(node("a1", "h1", Phase::Launching, Some(NEW)), None),
        ] {
            let nodes = [in_flight, node("a2", "h2", Phase::Running, Some(OLD))];
            assert_eq!(step(nodes.iter(), NEW), Step::Wait);
        }
        // Running on the new binary: finished; the next goes on the following step.
        let mut nodes = [
            replacing(node("a1", "h1", Phase::Running, Some(NEW)), None),
            node("a2", "h2", Phase::Running, Some(OLD)),
        ];
        assert_eq!(
            step(nodes.iter(), NEW),
            Step::Finished { agent: "a1".into() }
        );
        nodes[0].replacing = None;
        assert_eq!(step(nodes.iter(), NEW), replace("a2"));
    }

    #[test]
    fn a_failed_replacement_stops_the_sequence_with_its_reason() {
        let mut failed = replacing(node("a1", "h1", Phase::Failed, Some(NEW)), None);
        failed.last_error = Some("running: cannot reach the scheduler".into());
        let mut nodes = [failed, node("a2", "h2", Phase::Running, Some(OLD))];
        assert_eq!(
            step(nodes.iter(), NEW),
            Step::Failed {
                agent: "a1".into(),
                reason: "running: cannot reach the scheduler".into()
            }
        );
        nodes[0].replacing.as_mut().unwrap().failed = Some("executor replacement failed".into());
        assert_eq!(step(nodes.iter(), NEW), Step::Wait, "stopped");
        // The old launch's end is no failure of the replacement.
        let killed = replacing(node("a1", "h1", Phase::Failed, Some(OLD)), None);
        assert_eq!(step([killed].iter(), NEW), Step::Wait);
        // The node back at running on the binary served (a later relaunch): finished.
        nodes[0].phase = Phase::Running;
        assert_eq!(
            step(nodes.iter(), NEW),
            Step::Finished { agent: "a1".into() }
        );
        // Another binary served: the failure for the earlier one no longer stops anything.
        nodes[0].phase = Phase::Failed;
        assert_eq!(step(nodes.iter(), "newer"), replace("a2"));
    }
}
