//! Plan control: pause (what is under way finishes, nothing else starts; saved in the root
//! record, so it survives a restart), resume, and the failure budget: a node whose launches
//! fail `-node.max-failures` times in a row is left `failed` until an operator's `retry`, a
//! target change (`rollout.rs`) or a new agent for its host (`hosts.rs`).
//!
//! A pause is read where each start is decided: day-two grants (`rollout/decide.rs`), executor
//! replacements (`replace.rs`), reboot claims (`executor_api.rs`), launches on agents without
//! a node (`placement/`). A granted step, a replacement already killed and relaunches of
//! existing nodes go on: stopping those halfway would leave a node worse off than either end.

use super::{Dispatcher, STABLE_RUN_MS};
use crate::backoff::{jittered_relaunch_delay, Jitter};
use crate::scheduler::model::{ClusterModel, Node, Phase, StepState};
use crate::scheduler::operator::Outcome;
use log::{info, warn};

/// How many launches of a node may fail in a row, and the jitter of the delays between them.
pub(super) struct FailureBudget {
    pub(super) max_failures: u32,
    jitter: Jitter,
}

impl Default for FailureBudget {
    fn default() -> FailureBudget {
        FailureBudget {
            max_failures: 5,
            jitter: Jitter::new(),
        }
    }
}

/// What becomes of a node whose launch failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterFailure {
    /// Relaunched once its backoff ends, at this time (ms since the epoch).
    RelaunchAt(u64),
    /// Out of relaunches.
    Stopped,
}

impl FailureBudget {
    /// One more failed launch of `node` counted (a stable run since `running_since` starts the
    /// count again), and what follows.
    pub(super) fn count(
        &mut self,
        node: &mut Node,
        running_since: Option<u64>,
        now: u64,
    ) -> AfterFailure {
        let stable = running_since.is_some_and(|s| now.saturating_sub(s) >= STABLE_RUN_MS);
        node.failures = if stable {
            1
        } else {
            node.failures.saturating_add(1)
        };
        if node.failures >= self.max_failures {
            node.relaunch_stopped = true;
            node.retry_after_ms = None;
            node.phase = Phase::Failed;
            return AfterFailure::Stopped;
        }
        let delay = jittered_relaunch_delay(node.failures, self.jitter.next_u64());
        let due = now + delay.as_millis() as u64;
        node.retry_after_ms = Some(due);
        AfterFailure::RelaunchAt(due)
    }
}

/// Clears `node`'s failure count and stop; true when it had been stopped.
pub(super) fn forgive(node: &mut Node) -> bool {
    let stopped = node.relaunch_stopped;
    node.relaunch_stopped = false;
    node.failures = 0;
    node.retry_after_ms = None;
    stopped
}

/// What a pause lets finish: the day-two steps granted, executor replacements and reboots
/// under way, one `host (what)` each.
pub(super) fn under_way(model: &ClusterModel) -> Vec<String> {
    let target = model.target.generation;
    let mut out = Vec::new();
    for n in model.nodes.values() {
        let walk = n.rollout.as_deref().filter(|r| r.generation == target);
        let steps = walk.into_iter().flat_map(|r| r.steps.iter());
        for s in steps.filter(|s| s.state == StepState::InProgress) {
            out.push(format!("{} ({})", n.hostname, s.step));
        }
        if n.replacing.as_ref().is_some_and(|r| r.failed.is_none()) {
            out.push(format!("{} (executor replacement)", n.hostname));
        }
        if n.rebooting {
            out.push(format!("{} (reboot, {})", n.hostname, n.phase));
        }
    }
    out
}

impl Dispatcher {
    pub(super) fn op_pause(&mut self) -> Outcome {
        if self.state.model.paused {
            return Outcome::done("the plan was paused already");
        }
        self.state.model.paused = true;
        self.dirty = true;
        self.touch_view();
        let busy = under_way(&self.state.model);
        let finishing = if busy.is_empty() {
            "nothing was under way".to_string()
        } else {
            format!("under way and let finish: {}", busy.join(", "))
        };
        Outcome::done(format!(
            "paused: no step, reboot, executor replacement or new node starts until resumed; \
             {finishing}"
        ))
    }

    pub(super) fn op_resume(&mut self) -> Outcome {
        if !self.state.model.paused {
            return Outcome::done("the plan was not paused");
        }
        self.state.model.paused = false;
        // Offers of agents without a node were declined while paused.
        self.offer_mode.new_agent();
        self.dirty = true;
        self.touch_view();
        let waiting = self
            .state
            .model
            .nodes
            .values()
            .filter(|n| n.rollout.as_deref().is_some_and(|r| r.waiting().is_some()))
            .count();
        Outcome::done(format!(
            "resumed: {waiting} node(s) with a waiting step are decided again"
        ))
    }

    pub(super) fn op_retry(&mut self, agent: &str) -> Outcome {
        let now = self.clock.now_ms();
        let Some(node) = self.state.model.nodes.get(agent) else {
            return Outcome::not_found(format!("no node of agent {agent}"));
        };
        let host = node.hostname.clone();
        if node.covered() {
            return Outcome::refused(format!(
                "{host} has a launch under way (phase {}): nothing to retry",
                node.phase
            ));
        }
        if let Some(since) = node.gone_since_ms {
            return Outcome::refused(format!(
                "the master has not listed {host}'s agent {agent} for {} s: nothing to launch on",
                now.saturating_sub(since) / 1000
            ));
        }
        let failures = node.failures;
        let last = node.last_error.as_deref().unwrap_or("no error recorded");
        let was = format!("after {failures} failed launch(es) in a row; the last: {last}");
        let Some(node) = self.state.model.nodes.get_mut(agent) else {
            return Outcome::not_found(format!("no node of agent {agent}"));
        };
        let stopped = forgive(node);
        node.updated_ms = now;
        self.offer_mode.uncovered(agent, now);
        self.dirty = true;
        self.touch_view();
        let state = if stopped {
            "was not relaunched"
        } else {
            "waited for its relaunch"
        };
        Outcome::done(format!(
            "{host} is launched at its next offer (it {state} {was})"
        ))
    }

    /// A failed launch of `agent`'s node counted as `after`: the relaunch scheduled, or the
    /// node out of relaunches (a log line and an `/api/events` entry). `what` says what ended.
    pub(super) fn after_failure(&mut self, agent: &str, after: AfterFailure, now: u64, what: &str) {
        let Some(node) = self.state.model.nodes.get(agent) else {
            return;
        };
        let host = node.hostname.clone();
        let failures = node.failures;
        let max = self.failure_budget.max_failures;
        match after {
            AfterFailure::RelaunchAt(due) => {
                self.offer_mode.uncovered(agent, due);
                warn!(
                    "agent {host}: {what}; relaunch in {} s (failure {failures} of {max} in a row)",
                    due.saturating_sub(now) / 1000
                );
            }
            AfterFailure::Stopped => {
                let last = node.last_error.as_deref().unwrap_or("no error recorded");
                let message = format!(
                    "{failures} launches in a row failed (-node.max-failures={max}); the last: \
                     {last}; not relaunched until an operator's retry, a target change or a new \
                     agent for the host"
                );
                warn!("agent {host}: {what}; {message}");
                self.note_plan_change("relaunch", &host, "stopped", message);
            }
        }
    }

    /// `-node.max-failures`.
    pub fn set_max_failures(&mut self, max: u32) {
        self.failure_budget.max_failures = max.max(1);
    }

    /// A target change gives every node out of relaunches another round.
    pub(super) fn forgive_all(&mut self) {
        let now = self.clock.now_ms();
        let stopped: Vec<std::sync::Arc<str>> = self
            .state
            .model
            .nodes
            .values()
            .filter(|n| n.relaunch_stopped)
            .map(|n| n.agent_id.clone())
            .collect();
        for agent in stopped {
            if let Some(node) = self.state.model.nodes.get_mut(&agent) {
                forgive(node);
                node.updated_ms = now;
                info!(
                    "agent {}: the target changed: launched again at its next offer",
                    node.hostname
                );
            }
            self.offer_mode.uncovered(&agent, now);
            self.dirty = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::Persona;

    #[test]
    fn the_budget_stops_at_max_failures_and_a_stable_run_starts_it_again() {
        let mut budget = FailureBudget {
            max_failures: 3,
            jitter: Jitter::new(),
        };
        let mut n = Node::new("a1", "h1", Persona::Data, 0);
        let now = 1_000_000;
        for failures in 1..3u32 {
            let after = budget.count(&mut n, None, now);
            let full = crate::backoff::relaunch_delay(failures).as_millis() as u64;
            let AfterFailure::RelaunchAt(due) = after else {
                panic!("failure {failures}: {after:?}");
            };
            assert!(due >= now + full / 2 && due <= now + full, "{due}");
            assert_eq!(n.retry_after_ms, Some(due));
            assert!(!n.relaunch_stopped);
        }
        // A stable run before this failure: the count starts again.
        let stable = Some(now - STABLE_RUN_MS);
        assert!(matches!(
            budget.count(&mut n, stable, now),
            AfterFailure::RelaunchAt(_)
        ));
        assert_eq!(n.failures, 1);
        budget.count(&mut n, None, now);
        assert_eq!(budget.count(&mut n, None, now), AfterFailure::Stopped);
        assert_eq!(
            (n.failures, n.relaunch_stopped, n.retry_after_ms, n.phase),
            (3, true, None, Phase::Failed)
        );
        assert!(!n.awaits_launch(u64::MAX));
        assert!(forgive(&mut n));
        assert!(n.awaits_launch(now));
        assert_eq!(n.failures, 0);
    }
}
