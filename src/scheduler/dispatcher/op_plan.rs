//! Plan control: pause (the step in flight finishes, no other starts; saved, so it survives a
//! restart), resume, and retry of a failed node.

use super::operator::not_built;
use super::Dispatcher;
use crate::scheduler::operator::Outcome;

impl Dispatcher {
    pub(super) fn op_pause(&mut self) -> Outcome {
        not_built("pause")
    }

    pub(super) fn op_resume(&mut self) -> Outcome {
        not_built("resume")
    }

    pub(super) fn op_retry(&mut self, _agent: &str) -> Outcome {
        not_built("retry")
    }
}
