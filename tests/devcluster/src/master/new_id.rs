//! A host reboot as Mesos 1.4 sees it: the agent's executors die with the host, and the agent
//! that comes back cannot recover its checkpointed state (it belongs to another boot id), so
//! it registers as a new agent, with a new id, from the same host and address.
//!
//! What the master does depends on how long the host was away:
//! - Longer than the agent ping timeout (`agent_ping_timeout` x `max_agent_ping_timeouts`,
//!   here `agent_removal_timeout`), which a real reboot is: the master has marked the old
//!   agent unreachable (TASK_UNREACHABLE with its `unreachable_time` for partition-aware
//!   frameworks, TASK_LOST for the others, and a FAILURE naming the agent) before the new one
//!   registers. The new registration then changes nothing for the old agent: it stays on the
//!   unreachable list and its tasks stay unreachable, out of implicit reconciliation; explicit
//!   reconciliation naming the old agent answers TASK_UNREACHABLE. No further update about
//!   those tasks ever comes (until the registry forgets the agent, weeks later).
//! - Shorter: the old agent is still registered (disconnected) when the new one registers at
//!   its address, so the master removes it, "a new agent registered at the same address":
//!   its tasks end (TASK_GONE for partition-aware frameworks, TASK_LOST for the others,
//!   reason REASON_AGENT_REMOVED) and every framework hears that it is lost (FAILURE).

use super::launches::LaunchEvent;
use super::process::{self, SIGKILL};
use super::state::*;
use std::time::Duration;
use storage_framework::mesos::scheduler::event;
use storage_framework::mesos::types::*;

impl Cluster {
    /// Agent `agent`'s host goes down now and comes back after `outage` (the configured
    /// one when `None`) as an agent with a new id, which is returned.
    pub(super) fn reboot(
        &mut self,
        agent: usize,
        outage: Option<Duration>,
    ) -> Result<String, String> {
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
        if let (false, Some(id)) = (a.up, &a.rebooting_as) {
            return Err(format!(
                "{} is already rebooting; its agent comes back as {id}",
                a.hostname
            ));
        }
        if a.up {
            self.take_down(agent, false)?;
        }
        // Every process of the host dies now; the agent that comes back knows none of them.
        self.forget_executors(agent);
        let new_id = self.fresh_agent_id();
        let outage = outage.unwrap_or_else(|| self.cfg.reboot_outage());
        let a = &mut self.agents[agent];
        log::info!(
            "{}: rebooting; agent {} is down, agent {new_id} registers in {outage:?}",
            a.hostname,
            a.id
        );
        a.rebooting_as = Some(new_id.clone());
        let generation = a.generation;
        self.schedule(outage, Timer::Reboot { agent, generation });
        Ok(new_id)
    }

    /// An id no agent had: for an agent that registers afresh on a known host.
    pub(super) fn fresh_agent_id(&mut self) -> String {
        self.renamed_agents += 1;
        format!(
            "{}-S{}",
            self.masters[0].id,
            self.agents.len() - 1 + self.renamed_agents
        )
    }

    /// The rebooted host is back: its agent registers under the new id. Void when the agent
    /// was started again meanwhile.
    pub(super) fn reboot_done(&mut self, agent: usize, generation: u64) {
        let a = &mut self.agents[agent];
        if a.up || a.generation != generation {
            return;
        }
        let Some(new_id) = a.rebooting_as.take() else {
            return;
        };
        let old_id = std::mem::replace(&mut a.id, new_id.clone());
        let host = a.hostname.clone();
        if a.unreachable {
            log::info!("{host}: agent {new_id} registers; agent {old_id} stays unreachable");
            a.unreachable = false;
            let since = a.unreachable_time.take().unwrap_or_else(|| TimeInfo {
                nanoseconds: (now_secs() * 1e9) as i64,
            });
            self.unreachable_agents.insert(old_id.clone(), since);
        } else {
            log::info!("{host}: agent {new_id} registers at the address of agent {old_id}, which is removed");
            let message =
                format!("Agent {host} removed: a new agent registered at the same address");
            self.end_tasks_of_removed_agent(agent, &old_id, &message);
        }
        self.tasks_keep_their_agent(agent, &old_id);
        self.agents[agent].registered_time = now_secs();
        if let Err(e) = self.start_agent(agent) {
            log::warn!("{host}: agent {new_id} cannot start: {e}");
        }
    }

    /// The tasks of the old agent keep naming it, and leave the framework's tasks (whose
    /// `agent` index now means the new agent): unreachable ones for the framework's
    /// unreachable tasks, the others (ended, their last update not acknowledged) for the
    /// completed ones.
    pub(super) fn tasks_keep_their_agent(&mut self, agent: usize, old_id: &str) {
        for fw in self.frameworks.values_mut() {
            let ids: Vec<String> = fw
                .tasks
                .iter()
                .filter(|(_, t)| t.agent == agent)
                .map(|(id, _)| id.clone())
                .collect();
            for id in ids {
                let Some(mut t) = fw.tasks.remove(&id) else {
                    continue;
                };
                t.replaced_agent = Some(old_id.to_string());
                if t.state == TaskState::Unreachable {
                    fw.unreachable_tasks.insert(id, t);
                } else {
                    fw.completed_tasks.push_back(t);
                }
            }
            for t in fw.completed_tasks.iter_mut() {
                if t.agent == agent && t.replaced_agent.is_none() {
                    t.replaced_agent = Some(old_id.to_string());
                }
            }
        }
    }

    /// The new agent knows nothing of the old one's executors and pending updates: each run
    /// that had not ended ends here (its process, killed with the host, is not waited for:
    /// its exit finds no run any more).
    pub(super) fn forget_executors(&mut self, agent: usize) {
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
    pub(super) fn end_tasks_of_removed_agent(&mut self, agent: usize, old_id: &str, message: &str) {
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
