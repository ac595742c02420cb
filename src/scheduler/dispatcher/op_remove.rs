//! Taking storage out: decommission (data moved away first, then the SDS removed and the node
//! ended for good), recommission, replace (a host gone for good: its SDS removed at once), and
//! one device's removal.

use super::operator::not_built;
use super::Dispatcher;
use crate::scheduler::operator::Outcome;

impl Dispatcher {
    pub(super) fn op_decommission(&mut self, _agent: &str) -> Outcome {
        not_built("decommission")
    }

    pub(super) fn op_recommission(&mut self, _agent: &str) -> Outcome {
        not_built("recommission")
    }

    pub(super) fn op_replace(&mut self, _agent: &str) -> Outcome {
        not_built("replace")
    }

    pub(super) fn op_remove_device(&mut self, _agent: &str, _device: &str) -> Outcome {
        not_built("device removal")
    }
}
