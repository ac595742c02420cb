//! The fault "an agent comes back with a new id": its host reboots and the agent cannot
//! recover its checkpointed state (a reboot changes the boot id, or an operator wiped the
//! agent's `meta` directory), so it registers as a new agent from the same host and address.
//!
//! What Mesos does then: the agent's executors died with the host; the master removes the
//! old agent when the new one registers at its address, which ends the old agent's tasks
//! (TASK_GONE for partition-aware frameworks, TASK_LOST for the others, reason
//! REASON_AGENT_REMOVED, from the master) and tells every framework the agent is lost
//! (FAILURE with the old agent id); the new agent id then makes offers of its own.

use super::launches::LaunchEvent;
use super::process::{self, SIGKILL};
use super::state::*;
use storage_framework::mesos::scheduler::event;
use storage_framework::mesos::types::*;

impl Cluster {
    /// Reboots agent `agent`'s host and brings its agent back under a new id; returns it.
    pub(super) fn restart_with_new_id(&mut self, agent: usize) -> Result<String, String> {
        let a = self
            .agents
            .get(agent)
            .ok_or_else(|| format!("there is no agent with index {agent}"))?;
        if a.synthetic {
            return Err(format!(
                "{} is synthetic: it has no host to reboot",
                a.hostname
            ));
        }
        if a.up {
            self.take_down(agent, false)?;
        }
        self.forget_executors(agent);
        let old_id = self.agents[agent].id.clone();
        let message = format!(
            "Agent {} removed: a new agent registered at the same address",
            self.agents[agent].hostname
        );
        self.end_tasks_of_removed_agent(agent, &old_id, &message);
        self.renamed_agents += 1;
        let new_id = format!(
            "{}-S{}",
            self.masters[0].id,
            self.agents.len() - 1 + self.renamed_agents
        );
        log::info!(
            "{}: agent {old_id} is gone, agent {new_id} registers in its place",
            self.agents[agent].hostname
        );
        let a = &mut self.agents[agent];
        a.id = new_id.clone();
        a.registered_time = now_secs();
        self.start_agent(agent)?;
        Ok(new_id)
    }

    /// The new agent knows nothing of the old one's executors and pending updates: each run
    /// that had not ended ends here (its process, killed with the host, is not waited for:
    /// its exit finds no run any more).
    fn forget_executors(&mut self, agent: usize) {
        let a = &mut self.agents[agent];
        let host = a.hostname.clone();
        let frameworks = std::mem::take(&mut a.frameworks);
        a.streams.clear();
        for (fw, af) in frameworks {
            for (eid, e) in af.executors {
                if e.state != ExecState::Terminated {
                    self.launch_log.record(
                        LaunchEvent::ExecutorTerminated,
                        &host,
                        &fw,
                        &eid,
                        e.run,
                        None,
                    );
                }
                if let Some(pid) = e.pid {
                    process::signal_group(pid, SIGKILL);
                }
            }
        }
    }

    /// The master's side of removing agent `old_id`: its live tasks end, every framework
    /// hears that the agent is lost.
    fn end_tasks_of_removed_agent(&mut self, agent: usize, old_id: &str, message: &str) {
        let mut updates = Vec::new();
        for fw in self.frameworks.values_mut() {
            let state = if fw.partition_aware() {
                TaskState::Gone
            } else {
                TaskState::Lost
            };
            let ids: Vec<String> = fw
                .tasks
                .iter()
                .filter(|(_, t)| t.agent == agent && !t.state.is_terminal())
                .map(|(id, _)| id.clone())
                .collect();
            for id in ids {
                let Some(mut t) = fw.tasks.remove(&id) else {
                    continue;
                };
                let s = make_status(
                    &id,
                    state,
                    task_status::Source::Master,
                    Some(task_status::Reason::AgentRemoved),
                    message,
                    Some(old_id),
                    t.executor_id.as_deref(),
                    None,
                );
                t.state = state;
                t.statuses.push(s.clone());
                fw.completed_tasks.push_back(t);
                updates.push((fw.id.clone(), s));
            }
        }
        for (fw, s) in updates {
            self.send_update(&fw, s);
        }
        let ids: Vec<String> = self.frameworks.keys().cloned().collect();
        for fw in ids {
            let mut ev = sched_event(event::Type::Failure);
            ev.failure = Some(event::Failure {
                agent_id: Some(AgentID {
                    value: old_id.into(),
                }),
                executor_id: None,
                status: None,
            });
            self.send(&fw, &ev);
        }
    }
}
