//! An executor's rollout report onto its node's walk. Refused (with the reason, answered
//! 409) when it does not fit: another generation than the target's, a step not planned, a
//! step started without its grant. The executor then fetches its plan again and starts over
//! from what its host shows, which redoes nothing done.

use crate::contract::rollout::{RolloutEvent, RolloutReport};
use crate::scheduler::model::{ClusterModel, Node, NodeRollout, Step, StepState, StepStatus};

/// Applies `report` of node `agent`; `Ok(true)` when the model changed.
pub fn record(
    model: &mut ClusterModel,
    agent: &str,
    report: RolloutReport,
    now_ms: u64,
) -> Result<bool, String> {
    let target = model.target.generation;
    if report.generation != target {
        return Err(format!(
            "generation {} is not the target's ({target}); fetch the plan again",
            report.generation
        ));
    }
    let Some(node) = model.nodes.get_mut(agent) else {
        return Err(format!("no node of agent {agent}"));
    };
    if let RolloutEvent::Planned { steps } = report.event {
        return Ok(planned(node, target, steps, now_ms));
    }
    let rollout = match node.rollout.as_deref_mut() {
        Some(r) if r.generation == target => r,
        _ => return Err(format!("no walk to generation {target} was planned")),
    };
    let step_of = |e: &RolloutEvent| match e {
        RolloutEvent::Ask { step }
        | RolloutEvent::Started { step }
        | RolloutEvent::Done { step }
        | RolloutEvent::Failed { step, .. } => Some(*step),
        _ => None,
    };
    if let Some(step) = step_of(&report.event) {
        if rollout.step(step).is_none() {
            return Err(format!("step {step} was not planned"));
        }
    }
    match report.event {
        RolloutEvent::Planned { .. } => unreachable!("handled above"),
        RolloutEvent::Ask { step } => {
            let granted = rollout.granted == Some(step);
            let s = rollout.step_mut(step).expect("checked");
            if granted || matches!(s.state, StepState::Waiting | StepState::InProgress) {
                return Ok(false);
            }
            s.state = StepState::Waiting;
            s.reason = Some("waiting: not decided yet".into());
        }
        RolloutEvent::Started { step } => {
            if rollout.granted != Some(step) {
                return Err(format!("step {step} was not granted"));
            }
            let s = rollout.step_mut(step).expect("checked");
            s.state = StepState::InProgress;
            s.reason = None;
        }
        RolloutEvent::Done { step } => {
            let s = rollout.step_mut(step).expect("checked");
            s.state = StepState::Done;
            s.reason = None;
            s.done_ms = Some(now_ms);
            if rollout.granted == Some(step) {
                rollout.granted = None;
            }
        }
        RolloutEvent::Failed { step, reason } => {
            let s = rollout.step_mut(step).expect("checked");
            s.state = StepState::Failed;
            s.reason = Some(reason);
            s.done_ms = Some(now_ms);
            rollout.granted = None;
        }
        RolloutEvent::Reached => {
            if !rollout.complete() {
                return Err(format!("generation {target} reached with steps not done"));
            }
            node.generation = target;
        }
    }
    node.updated_ms = now_ms;
    Ok(true)
}

/// A new walk: every step pending; none at all means the node is at the target already.
fn planned(node: &mut Node, target: u64, steps: Vec<Step>, now_ms: u64) -> bool {
    let rollout = NodeRollout {
        generation: target,
        steps: steps.into_iter().map(StepStatus::pending).collect(),
        granted: None,
    };
    let reached = rollout.steps.is_empty() && node.generation != target;
    if reached {
        node.generation = target;
    }
    if node.rollout.as_deref() == Some(&rollout) {
        return reached;
    }
    node.rollout = Some(Box::new(rollout));
    node.updated_ms = now_ms;
    true
}
