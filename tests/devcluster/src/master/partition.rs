//! The fault "an agent is cut off from the master" (a network partition) and its healing.
//!
//! While cut off, the agent and its executors run on and talk to each other; the master
//! hears nothing: no status update reaches it (the agent's status update manager keeps
//! them), no call of the master reaches the agent, and no offer is made for it. After the
//! ping timeout (`agent_removal_timeout`) the master marks the agent unreachable
//! (`mark_unreachable`: TASK_UNREACHABLE, or TASK_LOST for a framework that is not
//! partition-aware; its offers rescinded, its filters dropped; the agent reported lost).
//!
//! When the partition heals the agent re-registers, as Mesos' master re-registers an
//! unreachable agent: every task the agent still has is the framework's again, and the
//! master says so by itself (an update in the task's current state, SOURCE_MASTER,
//! REASON_AGENT_REREGISTERED, message "Unreachable agent re-reregistered", no uuid); a task
//! the agent lost meanwhile is forgotten without a word, so that reconciliation about it
//! answers TASK_GONE ("task unknown, agent registered"). The agent then sends its held
//! updates again.

use super::state::*;
use storage_framework::mesos::types::*;

impl Cluster {
    /// Cuts agent `agent` off from the master.
    pub(super) fn partition_agent(&mut self, agent: usize) -> Result<(), String> {
        let a = self
            .agents
            .get_mut(agent)
            .ok_or_else(|| format!("there is no agent with index {agent}"))?;
        if a.synthetic {
            return Err(format!(
                "{} is synthetic: it has no link to cut",
                a.hostname
            ));
        }
        if a.partitioned {
            return Err(format!("{} is already cut off", a.hostname));
        }
        if !a.up {
            return Err(format!(
                "{} is stopped: there is no link to cut",
                a.hostname
            ));
        }
        log::info!("{}: cut off from the master", a.hostname);
        // `up` is the master's view: calls, offers and updates stop crossing.
        a.up = false;
        a.partitioned = true;
        a.generation += 1;
        let generation = a.generation;
        let timeout = self.cfg.agent_removal_timeout;
        self.schedule(timeout, Timer::Unreachable { agent, generation });
        Ok(())
    }

    /// Heals agent `agent`'s partition: it re-registers with its executors and tasks, or,
    /// with `keep_tasks` false, having lost them while cut off (only once the master has
    /// marked it unreachable: a registered agent's lost tasks take the agent's own
    /// reconciliation, which this dev master does not play).
    pub(super) fn heal_agent(&mut self, agent: usize, keep_tasks: bool) -> Result<(), String> {
        let a = self
            .agents
            .get(agent)
            .ok_or_else(|| format!("there is no agent with index {agent}"))?;
        if !a.partitioned {
            return Err(format!("{} is not cut off", a.hostname));
        }
        if !keep_tasks && !a.unreachable {
            return Err(format!(
                "{} is not unreachable yet: it can come back without its tasks only after the \
                 master marked it unreachable (agent_removal_timeout)",
                a.hostname
            ));
        }
        let was_unreachable = a.unreachable;
        if !keep_tasks {
            self.forget_executors(agent);
        }
        let a = &mut self.agents[agent];
        log::info!(
            "{}: the partition heals; the agent re-registers{}",
            a.hostname,
            if keep_tasks { "" } else { " without its tasks" }
        );
        a.up = true;
        a.partitioned = false;
        a.unreachable = false;
        a.generation += 1;
        if was_unreachable {
            self.reregister_unreachable(agent);
        }
        self.resend_pending(agent);
        self.allocate();
        Ok(())
    }

    /// The master's side of an unreachable agent's re-registration (see the module comment).
    fn reregister_unreachable(&mut self, agent: usize) {
        let agent_id = self.agents[agent].id.clone();
        // Task id -> (state, executor id) of what the agent still has.
        let kept: std::collections::BTreeMap<String, (TaskState, String)> = self.agents[agent]
            .frameworks
            .values()
            .flat_map(|af| af.executors.iter())
            .filter(|(_, e)| e.state != ExecState::Terminated)
            .flat_map(|(eid, e)| {
                e.launched
                    .iter()
                    .map(move |(t, s)| (t.clone(), (*s, eid.clone())))
            })
            .collect();
        let mut updates = Vec::new();
        for fw in self.frameworks.values_mut() {
            // A framework that is not partition-aware had these tasks completed as lost.
            let mut back = Vec::new();
            fw.completed_tasks.retain(|t| {
                let again = t.agent == agent && kept.contains_key(t.info.task_id.value.as_str());
                if again {
                    back.push(t.clone());
                }
                !again
            });
            for t in back {
                fw.tasks.insert(t.info.task_id.value.to_string(), t);
            }
            let mine: Vec<String> = fw
                .tasks
                .iter()
                .filter(|(_, t)| t.agent == agent && t.state == TaskState::Unreachable)
                .map(|(id, _)| id.clone())
                .chain(
                    fw.tasks
                        .iter()
                        .filter(|(id, t)| t.agent == agent && kept.contains_key(*id))
                        .filter(|(_, t)| t.state == TaskState::Lost)
                        .map(|(id, _)| id.clone()),
                )
                .collect();
            for id in mine {
                let Some((state, eid)) = kept.get(&id) else {
                    log::info!("task {id} is gone with what agent {agent_id} lost");
                    fw.tasks.remove(&id);
                    continue;
                };
                let Some(t) = fw.tasks.get_mut(&id) else {
                    continue;
                };
                let status = make_status(
                    &id,
                    *state,
                    task_status::Source::Master,
                    Some(task_status::Reason::AgentReregistered),
                    "Unreachable agent re-reregistered",
                    Some(&agent_id),
                    Some(eid),
                    None,
                );
                t.state = *state;
                t.statuses.push(status.clone());
                updates.push((fw.id.clone(), status));
            }
        }
        for (fw, status) in updates {
            self.send_update(&fw, status);
        }
    }
}
