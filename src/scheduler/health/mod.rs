//! The health model (pure): from the gateway's polls and the executors' host reports to a
//! `healthy` / `degraded` / `unknown` per node, per pool and for the cluster, and the gate
//! the lifecycle asks before it disrupts a node ([`gate::may_disrupt`]).
//!
//! The dispatcher owns the model and calls these; nothing here does I/O or reads a clock:
//! `now_ms` is always passed in, so every rule is tested on tables of states.

pub mod assess;
pub mod gate;

use std::time::Duration;

/// What operators set (`-health.*` flags).
#[derive(Debug, Clone, PartialEq)]
pub struct HealthSettings {
    /// A pool with more than this percent of its capacity in use is `degraded`
    /// (`-health.capacity.warn`).
    pub capacity_warn_pct: f64,
    /// Data older than this is `unknown` (`-health.stale`): the gateway's last answered
    /// poll, a running executor's last contact.
    pub stale: Duration,
}

impl Default for HealthSettings {
    fn default() -> HealthSettings {
        HealthSettings {
            capacity_warn_pct: 80.0,
            stale: Duration::from_secs(180),
        }
    }
}

/// A change of health, for the one log line each (`node h1`, `pool pd1/sp1`, `cluster`).
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub subject: String,
    pub from: crate::scheduler::model::Health,
    pub to: crate::scheduler::model::Health,
}
