//! Restart: the node's executor replaced and its host verified again from the first phase,
//! skipping what is in place.
//!
//! The running executor is killed (the KILL leaves after the save) and the next offer
//! relaunches the node, whose plan then says to resume at the beginning ([`Node::resume`]):
//! every phase checks the host before it acts, so nothing in place is installed again. The
//! node's `progress` keeps what it had reached until the walk is back at `running`, so it stays
//! an MDM member and a node that holds data for the disruption budget throughout: a reboot the
//! walk finds needed waits for the budget through the usual reboot claim.
//!
//! Killing the executor stops no storage service, but the walk counts as a disruption of the
//! node (it is not back until `running`), so a node that holds data restarts only when the
//! budget has room for it now. Whether a restart may start is decided without I/O
//! ([`refusal`]).

use super::*;
use crate::scheduler::health::gate;
use crate::scheduler::model::{Restart, StepState};
use crate::scheduler::operator::Outcome;

/// Why `node` may not restart now, one line; `None` when it may. `target` is the declared
/// target's generation.
pub(super) fn refusal(node: &Node, target: u64) -> Option<String> {
    let host = &node.hostname;
    if let Some(r) = &node.restart {
        let at =
            r.at.map_or("its relaunch".to_string(), |p| format!("phase {p}"));
        return Some(format!("{host} is restarting already (at {at})"));
    }
    if node.decommissioned {
        return Some(format!("{host} is decommissioned; recommission it first"));
    }
    if let Some(removal) = node.removal {
        // Relaunching is held while its storage is taken out: a killed executor stays dead.
        return Some(format!(
            "{host}'s storage is being taken out ({}); it is not relaunched meanwhile",
            format!("{removal:?}").to_lowercase()
        ));
    }
    if node.maintenance.as_ref().is_some_and(|m| m.accepted()) {
        // A later launch at `running` is what says its machine is back from maintenance.
        return Some(format!(
            "{host} is drained for a Mesos maintenance window; restart it once its machine is up"
        ));
    }
    let task = match &node.task {
        Some(t) if t.state == TaskState::Running => t,
        Some(t) => {
            return Some(format!(
                "no executor runs on {host} (its launch is {}); retry relaunches a failed node",
                t.state
            ))
        }
        None => return Some(format!("no executor was launched on {host}")),
    };
    if node.rebooting || node.phase.is_reboot() {
        return Some(format!("{host} is in a reboot ({})", node.phase));
    }
    if node.phase != Phase::Running {
        return Some(format!(
            "{host} is at phase {}, not running: its executor {} walks its install",
            node.phase, task.task_id
        ));
    }
    if node.replacing.as_ref().is_some_and(|r| r.failed.is_none()) {
        return Some(format!(
            "{host}'s executor is being replaced by the binary served"
        ));
    }
    if let Some(r) = node.rollout.as_deref() {
        let busy = r.granted.or_else(|| {
            let s = r.steps.iter().find(|s| s.state == StepState::InProgress)?;
            Some(s.step)
        });
        if let Some(step) = busy {
            return Some(format!("{host} is in the middle of its {step} step"));
        }
    }
    if target > 0 && node.generation != target {
        // Its install phases would take the target's packages outside the vendor's order.
        return Some(format!(
            "{host} has not reached the target (generation {} of {target}): the rollout takes it there under the disruption budget",
            node.generation
        ));
    }
    None
}

/// A phase the node's executor reported (not `failed`): the node's progress, or the
/// restart's walk while one is under way, which ends at `running`.
pub(super) fn record_progress(node: &mut Node, phase: Phase) {
    let current = |r: &Restart| node.task.as_ref().is_some_and(|t| *t.task_id != *r.killed);
    match &node.restart {
        Some(r) if current(r) && phase == Phase::Running => {
            info!(
                "{}: restart done: the host was verified from the first phase and runs",
                node.hostname
            );
            node.restart = None;
            node.progress = Some(phase);
        }
        Some(r) if current(r) => {
            let killed = r.killed.clone();
            node.restart = Some(Box::new(Restart {
                killed,
                at: Some(phase),
            }));
        }
        // The killed launch's executor, before the KILL reached it.
        _ => node.progress = Some(phase),
    }
}

impl Dispatcher {
    pub(super) fn op_restart(&mut self, agent: &str) -> Outcome {
        let target = self.state.model.target.generation;
        let Some(node) = self.state.model.nodes.get(agent) else {
            return Outcome::not_found(format!("no node of agent {agent}"));
        };
        if let Some(why) = refusal(node, target) {
            return Outcome::refused(why);
        }
        if let Err(why) = gate::may_disrupt(&self.state.model, agent, &self.gate) {
            return Outcome::refused(format!("the disruption budget has no room now: {why}"));
        }
        let now = self.clock.now_ms();
        let Some(node) = self.state.model.nodes.get_mut(agent) else {
            return Outcome::not_found(format!("no node of agent {agent}"));
        };
        let Some(task) = node.task.as_ref() else {
            return Outcome::refused(format!("no executor runs on {}", node.hostname));
        };
        let killed = task.task_id.clone();
        node.restart = Some(Box::new(Restart {
            killed: killed.clone(),
            at: None,
        }));
        node.updated_ms = now;
        let mut c = self.call(call::Type::Kill);
        c.kill = Some(call::Kill {
            task_id: TaskID {
                value: (*killed).into(),
            },
            agent_id: Some(AgentID {
                value: agent.into(),
            }),
            kill_policy: None,
        });
        self.pending.push(c);
        self.dirty = true;
        self.touch_view();
        Outcome::done(format!(
            "executor of task {killed} killed; the node is relaunched on its next offer and verifies its host from the first phase, installing only what is missing"
        ))
    }

    /// The end of `agent`'s launch that a restart killed: not a failure; relaunched at once.
    pub(super) fn restarted_launch_ended(&self, agent: &str, task_id: &str) -> bool {
        self.state
            .model
            .nodes
            .get(agent)
            .is_some_and(|n| n.restart.as_ref().is_some_and(|r| *r.killed == *task_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::{NodeRollout, Persona, Step, StepStatus};

    fn running(host: &str) -> Node {
        let mut n = Node::new("a1", host, Persona::Data, 0);
        n.phase = Phase::Running;
        n.progress = Some(Phase::Running);
        n.generation = 3;
        n.task = Some(TaskRecord::new(
            &format!("storage.{host}.1"),
            &format!("storage-executor.{host}.1"),
            TaskState::Running,
            0,
        ));
        n
    }

    #[test]
    fn a_running_node_at_the_target_may_restart_others_say_why_not() {
        assert_eq!(refusal(&running("h1"), 3), None);
        let why = |f: &dyn Fn(&mut Node)| {
            let mut n = running("h1");
            f(&mut n);
            refusal(&n, 3).expect("refused")
        };
        assert!(why(&|n| n.task.as_mut().unwrap().state = TaskState::Failed)
            .contains("no executor runs on h1 (its launch is TASK_FAILED); retry"));
        assert!(why(&|n| n.task = None).contains("no executor was launched on h1"));
        assert!(why(&|n| n.decommissioned = true).contains("decommissioned; recommission"));
        assert!(
            why(&|n| n.removal = Some(crate::scheduler::model::Removal::Draining))
                .contains("being taken out (draining)")
        );
        assert!(why(&|n| {
            n.maintenance = Some(Box::new(
                crate::scheduler::model::maintenance::NodeMaintenance {
                    answer: crate::scheduler::model::maintenance::MaintenanceAnswer::Accepted,
                    reason: None,
                    start_ms: 0,
                    duration_ms: None,
                    since_ms: 0,
                    drained_task: Some("storage.h1.1".into()),
                },
            ))
        })
        .contains("drained for a Mesos maintenance window"));
        assert!(why(&|n| n.rebooting = true).contains("h1 is in a reboot"));
        assert!(why(&|n| n.phase = Phase::Packages).contains("at phase packages, not running"));
        assert!(why(&|n| n.generation = 2).contains("generation 2 of 3"));
        assert!(why(&|n| {
            n.replacing = Some(Box::new(crate::scheduler::model::Replacement {
                to_sha256: "new".into(),
                failed: None,
            }))
        })
        .contains("being replaced"));
        assert!(why(&|n| {
            n.rollout = Some(Box::new(NodeRollout {
                generation: 3,
                steps: vec![StepStatus::pending(Step::UpgradeSds)],
                granted: Some(Step::UpgradeSds),
            }))
        })
        .contains("in the middle of its upgrade-sds step"));
        assert!(why(&|n| {
            n.restart = Some(Box::new(Restart {
                killed: "storage.h1.1".into(),
                at: Some(Phase::Packages),
            }))
        })
        .contains("restarting already (at phase packages)"));
        // Before any target is declared (tests, a first start), the generation is no reason.
        let mut n = running("h1");
        n.generation = 0;
        assert_eq!(refusal(&n, 0), None);
    }

    #[test]
    fn the_restart_walk_is_recorded_apart_from_progress_until_running() {
        let mut n = running("h1");
        n.restart = Some(Box::new(Restart {
            killed: "storage.h1.1".into(),
            at: None,
        }));
        // The killed executor's last words change nothing of the walk.
        record_progress(&mut n, Phase::Running);
        assert_eq!(n.resume(), None, "the walk starts at the first phase");
        n.task = Some(TaskRecord::new(
            "storage.h1.2",
            "storage-executor.h1.2",
            TaskState::Running,
            0,
        ));
        for p in [Phase::Environment, Phase::Packages, Phase::StorageAttach] {
            record_progress(&mut n, p);
            assert_eq!(n.resume(), Some(p));
            assert_eq!(n.progress, Some(Phase::Running), "what it had reached");
        }
        record_progress(&mut n, Phase::Running);
        assert_eq!(n.restart, None);
        assert_eq!(n.resume(), Some(Phase::Running));
    }

    #[test]
    fn a_node_that_holds_data_counts_as_disrupted_from_the_restart_s_acceptance() {
        let mut n = running("h1");
        n.attached = vec!["/dev/sdb".into()];
        n.restart = Some(Box::new(Restart {
            killed: "storage.h1.1".into(),
            at: None,
        }));
        assert_eq!(gate::disruption(&n).as_deref(), Some("is restarting"));
        n.phase = Phase::Packages;
        assert_eq!(
            gate::disruption(&n).as_deref(),
            Some("is not back (packages)")
        );
    }
}
