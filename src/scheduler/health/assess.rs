//! From facts to health: a gateway poll onto the model's nodes and pools, then every node's,
//! pool's and the cluster's health again, with the changes for the log.

use super::{Change, HealthSettings};
use crate::scheduler::gateway_work::report::HealthPoll;
use crate::scheduler::model::ClusterModel;

/// Puts a poll's answers into the model: each node's `storage` (its SDS found by id, else by
/// IP) and `sdc_connected`, the pools, the MDM cluster, `health.read_ms`. A node whose facts
/// did not change is not written to (it stays shared, nothing is saved for it).
pub fn apply_poll(model: &mut ClusterModel, poll: &HealthPoll, settings: &HealthSettings) {
    let _ = (model, poll, settings);
}

/// A failed poll: its error kept (the data ages into `unknown` by [`reassess`]).
pub fn apply_failure(model: &mut ClusterModel, error: &str) {
    let _ = (model, error);
}

/// Every node's, pool's and the cluster's health from the model's facts at `now_ms`; the
/// changes, in a stable order. Only nodes whose health changes are written to.
pub fn reassess(model: &mut ClusterModel, settings: &HealthSettings, now_ms: u64) -> Vec<Change> {
    let _ = (model, settings, now_ms);
    Vec::new()
}

/// When data in the model next turns stale (ms since the epoch), for the dispatcher's wait.
pub fn next_stale_ms(model: &ClusterModel, settings: &HealthSettings) -> Option<u64> {
    let _ = (model, settings);
    None
}
