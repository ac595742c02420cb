//! The lifecycle part of the model: the declared target's generation and each node's walk
//! toward it (`contract::rollout`). Data only; the decisions live in `scheduler/rollout/`.

pub use crate::contract::rollout::{Step, StepState};
use serde::{Deserialize, Serialize};

/// The scheduler's declared target for every node: what its flags and executor binary ask
/// for. Stored in the root record, so that a restarted scheduler with the same flags keeps
/// the generation and one with new flags starts the next.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Target {
    /// 0 until the first start computes one.
    #[serde(default)]
    pub generation: u64,
    /// The content hash of everything the target declares (`rollout::target::digest`).
    #[serde(default)]
    pub digest: String,
    /// The storage packages' part of the digest: when it moved, the plan is an upgrade.
    #[serde(default)]
    pub packages_digest: String,
    /// The generation before the last change (0: none), to tell a change from a first rollout.
    #[serde(default)]
    pub previous: u64,
    /// The last change's kind, as `/api/plan` names it (`upgrade`, `target-change`).
    #[serde(default)]
    pub change: Option<PlanKind>,
}

/// What the current plan does, as `/api/plan` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlanKind {
    FirstRollout,
    Upgrade,
    TargetChange,
    Idle,
}

impl PlanKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PlanKind::FirstRollout => "first-rollout",
            PlanKind::Upgrade => "upgrade",
            PlanKind::TargetChange => "target-change",
            PlanKind::Idle => "idle",
        }
    }
}

/// A node's walk toward one generation, as its executor planned it and the scheduler
/// granted it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NodeRollout {
    pub generation: u64,
    #[serde(deserialize_with = "super::exact::vec")]
    pub steps: Vec<StepStatus>,
    /// The step this node may start now (the plan's `grant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granted: Option<Step>,
}

impl NodeRollout {
    pub fn step(&self, step: Step) -> Option<&StepStatus> {
        self.steps.iter().find(|s| s.step == step)
    }

    pub fn step_mut(&mut self, step: Step) -> Option<&mut StepStatus> {
        self.steps.iter_mut().find(|s| s.step == step)
    }

    /// The step asked for and not granted yet, with why it waits.
    pub fn waiting(&self) -> Option<&StepStatus> {
        self.steps.iter().find(|s| s.state == StepState::Waiting)
    }

    pub fn failed(&self) -> Option<&StepStatus> {
        self.steps.iter().find(|s| s.state == StepState::Failed)
    }

    /// Every step done (or none needed).
    pub fn complete(&self) -> bool {
        self.steps.iter().all(|s| s.state == StepState::Done)
    }
}

/// One step of a node's walk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepStatus {
    pub step: Step,
    pub state: StepState,
    /// Why it waits, or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it ended (ms since the epoch): a disruptive step's node counts as not back until
    /// a gateway poll later than this shows it serving.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_ms: Option<u64>,
    /// A disruptive step: a gateway poll since it was granted showed its outage (see
    /// `health::gate::shows_disruption`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub seen_disrupted: bool,
}

impl StepStatus {
    pub fn pending(step: Step) -> StepStatus {
        StepStatus {
            step,
            state: StepState::Pending,
            reason: None,
            done_ms: None,
            seen_disrupted: false,
        }
    }
}
