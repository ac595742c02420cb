//! Restart: the node's executor replaced and its host verified again from the first phase,
//! skipping what is in place.

use super::operator::not_built;
use super::Dispatcher;
use crate::scheduler::operator::Outcome;

impl Dispatcher {
    pub(super) fn op_restart(&mut self, _agent: &str) -> Outcome {
        not_built("restart")
    }
}
