//! The plan requests the executor API keeps, at most one per executor: a held long poll (a
//! node between steps), answered when its plan changes or dropped past its deadline; or an
//! idle executor's `nudge=1` request, which holds no connection and is owed one framework
//! MESSAGE when its plan changes ([`Nudge`]). Held polls are counted apart: each is a parked
//! connection on the REST side, and their number is bounded.

use crate::scheduler::exchange::ReplyTo;
use crate::scheduler::model::Node;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

pub(super) struct Parked {
    pub agent: String,
    pub version: u64,
    pub deadline_ms: u64,
    /// `None`: an idle executor's request (`nudge=1`), owed a MESSAGE, not an answer.
    pub reply: Option<ReplyTo>,
    /// What the plan of `version` was rendered from: its node as the model shares it (any
    /// write to the node makes a new one) and the inputs every plan shares.
    pub node: Option<Arc<Node>>,
    pub shared: u64,
}

impl fmt::Debug for Parked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Parked {{ agent: {}, version: {}, deadline_ms: {}, nudge: {} }}",
            self.agent,
            self.version,
            self.deadline_ms,
            self.reply.is_none()
        )
    }
}

/// A framework MESSAGE owed to an idle executor: its plan is now at `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nudge {
    pub agent_id: String,
    pub executor_id: String,
    pub version: u64,
}

/// Executor id -> its parked request.
#[derive(Debug, Default)]
pub(super) struct ParkedPlans {
    by_executor: HashMap<String, Parked>,
    /// Of `by_executor`, the held long polls.
    held: usize,
}

impl ParkedPlans {
    pub fn len(&self) -> usize {
        self.by_executor.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_executor.is_empty()
    }

    /// Held long polls.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Whether the executor holds a long poll (`None`: nothing parked).
    pub fn holds(&self, executor_id: &str) -> Option<bool> {
        self.by_executor.get(executor_id).map(|p| p.reply.is_some())
    }

    /// Parks `p` in place of the executor's earlier one, whose reply (a held poll) is given
    /// back to be answered.
    pub fn insert(&mut self, executor_id: String, p: Parked) -> Option<ReplyTo> {
        self.held += usize::from(p.reply.is_some());
        let old = self.by_executor.insert(executor_id, p)?;
        self.held -= usize::from(old.reply.is_some());
        old.reply
    }

    /// Takes the executor's parked request out.
    pub fn remove(&mut self, executor_id: &str) -> Option<Parked> {
        let old = self.by_executor.remove(executor_id)?;
        self.held -= usize::from(old.reply.is_some());
        Some(old)
    }

    /// Every parked request, to walk while the caller borrows itself; given back with
    /// [`ParkedPlans::put_back`], entries changed in place but none added or removed.
    pub fn take_all(&mut self) -> HashMap<String, Parked> {
        std::mem::take(&mut self.by_executor)
    }

    pub fn put_back(&mut self, all: HashMap<String, Parked>) {
        self.by_executor = all;
    }
}
