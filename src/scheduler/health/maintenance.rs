//! Mesos maintenance (pure): what to answer the master's inverse offer for a node's agent,
//! and when a node that let its machine go is back.
//!
//! Draining costs what a reboot costs: without SDS maintenance mode on the gateway the data
//! of the node's SDS is rebuilt from the other copies while the machine is away, so the node
//! may go only when the lifecycle's gate would let it reboot ([`super::gate::may_disrupt`]).
//! An accepted window counts as a disruption of its node (see [`super::gate::down`]) until a
//! later launch of the node runs, so that a second machine of the same protection domain is
//! declined meanwhile.

use super::gate::{may_disrupt, GateSettings};
use crate::scheduler::model::maintenance::{MaintenanceAnswer, NodeMaintenance};
use crate::scheduler::model::{ClusterModel, Node, Phase};

/// When the inverse offer for `agent` is answered now: accept, or decline with the gate's
/// refusal. An agent without a node holds nothing of ours; an accepted window stays accepted.
pub fn answer(model: &ClusterModel, agent: &str, settings: &GateSettings) -> Result<(), String> {
    let Some(node) = model.nodes.get(agent) else {
        return Ok(());
    };
    if node.maintenance.as_ref().is_some_and(|m| m.accepted()) {
        return Ok(());
    }
    may_disrupt(model, agent, settings).map_err(|r| r.0)
}

/// The node's record after answering a window (`start_ms`, `duration_ms`) with `answer`;
/// `None` when nothing changed (the master asks again every few seconds).
pub fn record(
    node: &Node,
    answer: &Result<(), String>,
    start_ms: i64,
    duration_ms: Option<u64>,
    now_ms: u64,
) -> Option<NodeMaintenance> {
    let (kind, reason) = match answer {
        Ok(()) => (MaintenanceAnswer::Accepted, None),
        Err(why) => (MaintenanceAnswer::Declined, Some(why.as_str().into())),
    };
    let old = node.maintenance.as_deref();
    let same = old.is_some_and(|m| {
        m.answer == kind
            && m.reason == reason
            && m.start_ms == start_ms
            && m.duration_ms == duration_ms
    });
    if same {
        return None;
    }
    let drained_task = match (kind, old) {
        (MaintenanceAnswer::Accepted, Some(m)) if m.accepted() => m.drained_task.clone(),
        (MaintenanceAnswer::Accepted, _) => node.task.as_ref().map(|t| t.task_id.clone()),
        (MaintenanceAnswer::Declined, _) => None,
    };
    let since_ms = match old {
        Some(m) if m.answer == kind => m.since_ms,
        _ => now_ms,
    };
    Some(NodeMaintenance {
        answer: kind,
        reason,
        start_ms,
        duration_ms,
        since_ms,
        drained_task,
    })
}

/// A node whose accepted window is behind it: a launch other than the drained one runs.
pub fn back(node: &Node) -> bool {
    let Some(m) = node.maintenance.as_deref().filter(|m| m.accepted()) else {
        return false;
    };
    let Some(task) = node.task.as_ref() else {
        return false;
    };
    node.phase == Phase::Running && m.drained_task.as_deref() != Some(&*task.task_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesos::types::TaskState;
    use crate::scheduler::model::TaskRecord;

    fn node(task: &str) -> Node {
        let mut n = Node::new("a1", "h1", Default::default(), 0);
        n.phase = Phase::Running;
        n.task = Some(TaskRecord::new(task, "e", TaskState::Running, 0));
        n
    }

    #[test]
    fn a_record_changes_only_with_the_answer_or_the_window() {
        let mut n = node("t1");
        let accepted = record(&n, &Ok(()), 5, Some(60_000), 100).expect("new");
        assert_eq!(accepted.answer, MaintenanceAnswer::Accepted);
        assert_eq!(accepted.drained_task.as_deref(), Some("t1"));
        assert_eq!(accepted.since_ms, 100);
        n.maintenance = Some(Box::new(accepted));
        assert_eq!(record(&n, &Ok(()), 5, Some(60_000), 200), None);
        let moved = record(&n, &Ok(()), 9, Some(60_000), 300).expect("a new window");
        assert_eq!(moved.since_ms, 100, "still accepted since then");
        let declined = record(&n, &Err("waiting: x".into()), 5, None, 400).unwrap();
        assert_eq!(declined.reason.as_deref(), Some("waiting: x"));
        assert_eq!(declined.drained_task, None);
    }

    #[test]
    fn a_node_is_back_once_another_launch_runs() {
        let mut n = node("t1");
        assert!(!back(&n), "no window");
        n.maintenance = record(&n, &Ok(()), 0, None, 1).map(Box::new);
        assert!(!back(&n), "still the drained launch");
        n.task = Some(TaskRecord::new("t2", "e", TaskState::Running, 0));
        n.phase = Phase::Devices;
        assert!(!back(&n), "not running yet");
        n.phase = Phase::Running;
        assert!(back(&n));
        n.maintenance = record(&n, &Err("no".into()), 0, None, 1).map(Box::new);
        assert!(!back(&n), "a declined window has nothing to come back from");
    }
}
