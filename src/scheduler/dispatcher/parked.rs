//! The plan requests the executor API keeps, at most one per node: a held long poll (a
//! node between steps), answered when its plan changes or dropped past its deadline; or an
//! idle executor's `nudge=1` request, which holds no connection and is owed one framework
//! MESSAGE when its plan changes ([`Nudge`]). Held polls are counted apart: each is a parked
//! connection on the REST side, and their number is bounded.
//!
//! Kept by agent id, in the model's order, so that a batch walks the parked requests and the
//! model's nodes side by side (`ExecutorApi::after_batch`) instead of looking every parked
//! executor's node up: at 10,000 idle executors, a lookup each per batch was the larger part
//! of the dispatcher's CPU. A node runs one current executor, so one request per agent is
//! all there is to keep: a request of another executor on the agent is of an earlier launch.

use crate::scheduler::exchange::{ApiError, ExecutorReply, PlanReply, ReplyTo};
use crate::scheduler::model::Node;
use std::collections::btree_map::{BTreeMap, Entry};
use std::fmt;
use std::sync::Arc;

pub(super) struct Parked {
    /// [`executor_key`] of the executor that asked. While its request is current the id is
    /// its node's task's (`TaskRecord::executor_id`), so it is not kept: a `String` each was
    /// a third of the parked requests' memory at 10,000 idle executors.
    pub executor: u64,
    pub version: u64,
    pub deadline_ms: u64,
    /// `None`: an idle executor's request (`nudge=1`), owed a MESSAGE, not an answer. Boxed:
    /// at 10,000 idle executors nearly every request is a nudge, and 32 bytes inline in each
    /// were a quarter of the parked requests' map.
    pub reply: Option<Box<ReplyTo>>,
    /// What the plan of `version` was rendered from: its node's revision (any write to the
    /// node makes a new one; the node itself is not kept, see `model/revision.rs`) and the
    /// inputs every plan shares.
    pub revision: Option<u64>,
    pub shared: u64,
}

impl fmt::Debug for Parked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Parked {{ executor: {:016x}, version: {}, deadline_ms: {}, nudge: {} }}",
            self.executor,
            self.version,
            self.deadline_ms,
            self.reply.is_none()
        )
    }
}

/// A framework MESSAGE owed to an idle executor: its plan is now at `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nudge {
    /// The model's own key, shared.
    pub agent_id: Arc<str>,
    pub executor_id: String,
    pub version: u64,
}

/// Agent id (the model's own key, shared) -> its executor's parked request.
#[derive(Debug, Default)]
pub(super) struct ParkedPlans {
    by_agent: BTreeMap<Arc<str>, Parked>,
    /// Of `by_agent`, the held long polls.
    held: usize,
}

impl ParkedPlans {
    pub fn len(&self) -> usize {
        self.by_agent.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_agent.is_empty()
    }

    /// Held long polls.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Whether `executor` holds a long poll on `agent` (`None`: nothing of its parked).
    pub fn holds(&self, agent: &str, executor: &str) -> Option<bool> {
        self.by_agent
            .get(agent)
            .filter(|p| p.executor == executor_key(executor))
            .map(|p| p.reply.is_some())
    }

    /// Parks `p` (its plan is `plan`) in place of the agent's earlier request. A held poll
    /// of the same executor is from a client that gave up or retried: it gets the
    /// (unchanged) plan so its worker is freed. One of another executor is of an earlier
    /// launch on the agent: it is gone.
    pub fn park(&mut self, agent: Arc<str>, p: Parked, plan: PlanReply) {
        self.held += usize::from(p.reply.is_some());
        let (old, same) = match self.by_agent.entry(agent) {
            Entry::Vacant(v) => {
                v.insert(p);
                return;
            }
            Entry::Occupied(mut o) => {
                let old = o.insert(p);
                let same = old.executor == o.get().executor;
                (old, same)
            }
        };
        self.held -= usize::from(old.reply.is_some());
        if let Some(to) = old.reply {
            let _ = to.send(if same {
                ExecutorReply::Plan(plan)
            } else {
                ExecutorReply::Failed(replaced_executor())
            });
        }
    }

    /// Takes the agent's parked request out.
    pub fn remove(&mut self, agent: &str) -> Option<Parked> {
        let old = self.by_agent.remove(agent)?;
        self.held -= usize::from(old.reply.is_some());
        Some(old)
    }

    /// Every parked request, to walk while the caller borrows itself; given back with
    /// [`ParkedPlans::put_back`], entries changed in place but none added or removed.
    pub fn take_all(&mut self) -> BTreeMap<Arc<str>, Parked> {
        std::mem::take(&mut self.by_agent)
    }

    pub fn put_back(&mut self, all: BTreeMap<Arc<str>, Parked>) {
        self.by_agent = all;
    }
}

/// The model's node of `agent`, the walk over the model's nodes (in agent order) moved up to
/// it: called with agents in increasing order, it passes over every node once. The keys
/// meet by pointer when the parked request holds the model's own key.
pub(super) fn node_of<'a, I>(
    nodes: &mut std::iter::Peekable<I>,
    agent: &Arc<str>,
) -> Option<&'a Arc<Node>>
where
    I: Iterator<Item = (&'a Arc<str>, &'a Arc<Node>)>,
{
    while let Some(&(key, node)) = nodes.peek() {
        if Arc::ptr_eq(key, agent) || **key == **agent {
            nodes.next();
            return Some(node);
        }
        if **key > **agent {
            return None;
        }
        nodes.next();
    }
    None
}

/// What a parked request keeps of its executor's id: the hash `TaskRecord::executor_hash`
/// gives of its launch's.
pub(super) fn executor_key(executor_id: &str) -> u64 {
    crate::hash::content_hash(executor_id.as_bytes())
}

/// The answer to a parked request whose executor another launch on its node replaced.
pub(super) fn replaced_executor() -> ApiError {
    ApiError::new(
        404,
        "unknown executor",
        "this executor is no longer the current launch of its node",
    )
}

/// The answer to an executor that is not the current launch of any node.
pub(super) fn gone_executor(executor_id: &str) -> ApiError {
    ApiError::new(
        404,
        "unknown executor",
        format!("executor {executor_id:?} is not the current launch of any node"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One per idle executor, 10,000 of them in a map: what only a held poll needs is boxed.
    #[test]
    fn a_parked_request_keeps_inline_only_what_every_request_has() {
        assert!(
            std::mem::size_of::<Parked>() <= 56,
            "a parked request is {} bytes",
            std::mem::size_of::<Parked>()
        );
    }
}
