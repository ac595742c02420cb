//! The walk of the parked plan requests after a batch (`ExecutorApi::after_batch`): every
//! request whose plan may have moved is rendered again and answered, or its executor owed a
//! nudge; a batch that wrote few nodes walks only their plans and the few that read other
//! nodes.

use super::*;
use crate::scheduler::dispatcher::parked::{node_of, replaced_executor, Parked};
use crate::scheduler::model::{once_each, WriteMark};
use std::collections::BTreeMap;

/// Whether a parked plan is rendered again after a batch: when its node changed (a new
/// node value), when an input every plan shares changed, or always when it reads other
/// nodes too (the scheduler's own node waits for the others; experimental mode's plans
/// carry the MDM trio).
pub(super) fn must_render(reads_others: bool, same_node: bool, same_shared: bool) -> bool {
    reads_others || !same_node || !same_shared
}

/// What one walk of the parked requests carries from request to request.
struct Walk<'t> {
    trio: Option<&'t mdm_cluster::Trio>,
    shared: u64,
    now: u64,
    rendered: u64,
    /// Requests to take out, with the reply owed to a held poll.
    done: Vec<(Arc<str>, Option<ExecutorReply>)>,
}

/// What the last full walk of the parked requests saw. Until the inputs every plan shares
/// change or a held poll's deadline comes, a plan that reads only its own node moves only
/// when its node is written: a batch then looks at the plans that read others (a reboot's
/// hold, the scheduler's own node) and at those of the nodes written since
/// (`Nodes::written_since`), not at all of them. At 10,000 idle executors asking for their
/// plans, the full walk after each batch was two fifths of the dispatcher's CPU; under a
/// stream of reports, each writing its own node, it was still a fifth.
#[derive(Debug)]
pub(super) struct Walked {
    /// Where the model's write log stood.
    mark: WriteMark,
    shared: u64,
    /// The earliest deadline of a held poll parked since.
    expiry_ms: u64,
    reading_others: Vec<Arc<str>>,
}

impl Walked {
    /// A request of a plan that reads only its node, parked since: answered from the model
    /// as it is, so only its deadline matters.
    pub(super) fn parked_since(&mut self, deadline_ms: u64) {
        self.expiry_ms = self.expiry_ms.min(deadline_ms);
    }

    fn still(&self, shared: u64, now: u64) -> bool {
        self.shared == shared && now < self.expiry_ms
    }
}

impl ExecutorApi {
    /// Answers the reports of the batch, then the parked plan requests whose plan changed.
    /// Reports are answered here rather than in `handle` so that, called after the batch is
    /// saved, an acknowledged report is a persisted one.
    pub fn after_batch(&mut self, state: &Persisted, now: u64) {
        for (reply, answer) in self.acks.drain(..) {
            let _ = reply.send(answer);
        }
        if self.parked.is_empty() {
            return;
        }
        // Once per batch, not per plan: it scans every node.
        let trio = self.trio(state);
        let shared = self.shared_inputs(state);
        let nodes = &state.model.nodes;
        let mut walk = Walk {
            trio: trio.as_ref(),
            shared,
            now,
            rendered: 0,
            done: Vec::new(),
        };
        // Taken out while `plan` borrows the rest. Both are in agent order: one walk.
        let mut parked = self.parked.take_all();
        // Taken out while `visit` borrows the rest; a quiet batch keeps it, a full walk makes
        // a new one.
        let quiet = self
            .walked
            .take()
            .filter(|w| w.still(shared, now))
            .and_then(|w| Some((nodes.written_since(w.mark)?, w)))
            .filter(|(written, w)| w.reading_others.len() + written.len() <= parked.len() / 16);
        if let Some((written, w)) = quiet {
            self.walk_written(state, &mut walk, &mut parked, w, written);
        } else {
            let mut next = Walked {
                mark: nodes.mark(),
                shared,
                expiry_ms: u64::MAX,
                reading_others: Vec::new(),
            };
            let mut in_order = nodes.iter_shared().peekable();
            for (agent, p) in parked.iter_mut() {
                let node = node_of(&mut in_order, agent);
                let before = walk.done.len();
                self.visit(state, &mut walk, agent, p, node);
                if walk.done.len() == before {
                    if p.reply.is_some() {
                        next.expiry_ms = next.expiry_ms.min(p.deadline_ms);
                    }
                    if node.is_some_and(|n| self.reads_others(n)) {
                        next.reading_others.push(agent.clone());
                    }
                }
            }
            self.walked = Some(next);
            self.full_walks += 1;
        }
        let Walk { rendered, done, .. } = walk;
        self.parked.put_back(parked);
        self.rerendered += rendered;
        for (agent, reply) in done {
            if let (
                Some(Parked {
                    reply: Some(to), ..
                }),
                Some(reply),
            ) = (self.parked.remove(&agent), reply)
            {
                let _ = to.send(reply);
            }
        }
    }

    /// The quiet walk: nothing shared changed, no held poll due, so only the plans that read
    /// more than their node, and those of the nodes `written`, can have moved.
    fn walk_written(
        &mut self,
        state: &Persisted,
        walk: &mut Walk,
        parked: &mut BTreeMap<Arc<str>, Parked>,
        mut w: Walked,
        written: &[Arc<str>],
    ) {
        let nodes = &state.model.nodes;
        let agents: Vec<Arc<str>> = once_each(w.reading_others.iter().chain(written))
            .into_iter()
            .cloned()
            .collect();
        for agent in &agents {
            let Some(p) = parked.get_mut(agent) else {
                continue;
            };
            let node = nodes.get_shared(agent);
            let before = walk.done.len();
            self.visit(state, walk, agent, p, node);
            // A node written may read others now, or no longer.
            let reads = walk.done.len() == before && node.is_some_and(|n| self.reads_others(n));
            let listed = w.reading_others.contains(agent);
            if reads && !listed {
                w.reading_others.push(agent.clone());
            } else if !reads && listed {
                w.reading_others.retain(|a| a != agent);
            }
        }
        w.mark = nodes.mark();
        self.walked = Some(w);
    }

    /// One parked request in a walk after a batch: dropped past its deadline, refused when
    /// its executor is no longer its node's, answered (or nudged) when its plan moved on.
    fn visit(
        &mut self,
        state: &Persisted,
        walk: &mut Walk,
        agent: &Arc<str>,
        p: &mut Parked,
        node: Option<&Arc<Node>>,
    ) {
        if p.deadline_ms <= walk.now {
            // The REST worker has given up by now and answered "unchanged" itself.
            walk.done.push((agent.clone(), None));
            return;
        }
        // The same node revision as when parked is the same task, so the same executor.
        let same_node = node.is_some_and(|n| Some(n.revision.get()) == p.revision);
        let task = node.and_then(|n| n.task.as_ref());
        let current = same_node || task.is_some_and(|t| t.executor_hash() == p.executor);
        let (Some(node), Some(task)) = (node.filter(|_| current), task) else {
            walk.done.push((
                agent.clone(),
                Some(ExecutorReply::Failed(replaced_executor())),
            ));
            return;
        };
        if !must_render(self.reads_others(node), same_node, p.shared == walk.shared) {
            return;
        }
        walk.rendered += 1;
        let executor_id = task.executor_id();
        match self.plan(state, &executor_id, agent, walk.trio) {
            Ok(plan) if plan.version != p.version && p.reply.is_none() => {
                self.nudges.push(Nudge {
                    agent_id: agent.clone(),
                    executor_id: executor_id.into_owned(),
                    version: plan.version,
                });
                walk.done.push((agent.clone(), None));
            }
            Ok(plan) if plan.version != p.version => walk
                .done
                .push((agent.clone(), Some(ExecutorReply::Plan(plan)))),
            Ok(_) => (p.revision, p.shared) = (Some(node.revision.get()), walk.shared),
            Err(e) => walk
                .done
                .push((agent.clone(), Some(ExecutorReply::Failed(e)))),
        }
    }
}
