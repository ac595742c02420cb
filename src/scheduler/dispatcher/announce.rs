//! Executors follow the scheduler. An executor learns the scheduler's REST address from its
//! launch (`STORAGE_SCHEDULER_URL`), but a scheduler that fails over may come back on another
//! host or port, and Mesos keeps the executors running meanwhile. So after every SUBSCRIBED
//! (first subscription and every re-subscription) the dispatcher tells each executor of a
//! live launch where it is now, with a framework MESSAGE (v1 scheduler call `MESSAGE`:
//! master -> agent -> executor event `MESSAGE`).
//!
//! The data is `{"scheduler_url":"http://host:port"}`; it carries no secret, since the
//! executor already holds its own. Framework messages are best effort in Mesos (an agent
//! drops one for an executor that is not registered yet); such an executor was launched by
//! this instance, or gets the address again at the next SUBSCRIBED.

use super::*;
use crate::mesos::types::ExecutorID;
use crate::mesos::Bytes;

/// The MESSAGE data announcing `scheduler_url`.
pub(super) fn announcement(scheduler_url: &str) -> Vec<u8> {
    serde_json::json!({ crate::contract::env::ANNOUNCED_SCHEDULER_URL: scheduler_url })
        .to_string()
        .into_bytes()
}

impl Dispatcher {
    /// One MESSAGE per executor of a live launch, carrying this scheduler's address.
    pub(super) fn announce_address(&mut self) {
        let data = announcement(&self.ctx.scheduler_url);
        let targets: Vec<(String, String)> = self
            .state
            .model
            .active_tasks()
            .map(|(n, t)| (n.agent_id.to_string(), t.executor_id().into_owned()))
            .collect();
        if !targets.is_empty() {
            info!(
                "telling {} executor(s) this scheduler is at {}",
                targets.len(),
                self.ctx.scheduler_url
            );
        }
        for (agent_id, executor_id) in targets {
            let mut c = self.call(call::Type::Message);
            c.message = Some(call::Message {
                agent_id: AgentID {
                    value: agent_id.into(),
                },
                executor_id: ExecutorID {
                    value: executor_id.into(),
                },
                data: Bytes(data.clone()),
            });
            self.pending.push(c);
        }
    }
}
