//! A Mesos maintenance window on a node's machine, as the master's inverse offers announced
//! it, and the scheduler's answer. Data only; the decision lives in
//! `scheduler/health/maintenance.rs`.

use serde::{Deserialize, Serialize};

/// The scheduler's answer to the inverse offers for a node's agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MaintenanceAnswer {
    /// Ready to lose the agent: the node counts as disrupted until a later launch runs.
    Accepted,
    /// Taking the machine now would cost more than the disruption budget allows.
    Declined,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeMaintenance {
    pub answer: MaintenanceAnswer,
    /// Why it declines: the gate's refusal (`waiting: h1 of pd1 is drained for maintenance`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Box<str>>,
    /// The window's start (ms since the epoch; negative before it) and length (none: for
    /// ever), as the inverse offer says.
    pub start_ms: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// When the answer last changed.
    pub since_ms: u64,
    /// The launch that ran when the answer became `accepted`: the node is back once another
    /// launch reaches `running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drained_task: Option<Box<str>>,
}

impl NodeMaintenance {
    pub fn accepted(&self) -> bool {
        self.answer == MaintenanceAnswer::Accepted
    }
}
