//! The executor's tasks: LAUNCH (and the refused LAUNCH_GROUP), KILL, SHUTDOWN, the
//! scheduler's MESSAGE announcing its address, and the node worker each task starts.

use super::{after, show, Executor, Flow, Incoming, NEVER};
use crate::host::facts::Facts;
use crate::node::endpoint::{self, Endpoint, Signal};
use crate::node::{self, api::SchedulerApi, Outcome};
use crate::payload::TaskPayload;
use std::sync::mpsc;
use std::thread;
use std::time::Instant;
use storage_framework::contract::env;
use storage_framework::mesos::types::{task_status, TaskInfo, TaskState};

/// The setting naming the scheduler's REST server.
const SCHEDULER_URL: &str = env::SCHEDULER_URL;

impl Executor {
    /// The scheduler announces its REST address and certificate after every
    /// (re-)subscription, so that executors follow it to another host or port and to its new
    /// certificate; and it nudges an idle node whose plan moved on. The data is logged by
    /// size only.
    pub(super) fn on_message(&mut self, data: &[u8]) {
        let signal = match endpoint::message(data) {
            Ok(s) => s,
            Err(e) => {
                log::warn!(
                    "MESSAGE from the scheduler ({} bytes) ignored: {e}",
                    data.len()
                );
                return;
            }
        };
        match &signal {
            Signal::Moved(announced) if self.announced.as_ref() == Some(announced) => {
                log::debug!("MESSAGE: the scheduler is still at {}", announced.url);
            }
            Signal::Moved(announced) => {
                let Endpoint { url, pin } = announced;
                log::info!("MESSAGE: the scheduler is at {url}, certificate {pin}");
                self.announced = Some(announced.clone());
            }
            Signal::PlanChanged(v) => log::debug!("MESSAGE: the node's plan is at version {v}"),
        }
        // An unchanged address goes to the worker too: it may be a new scheduler on the same
        // address, which owes no nudge until the idle node asks it again.
        if let Some(moves) = &self.moves {
            // A finished worker has dropped its receiver; nothing is left to tell it.
            let _ = moves.send(signal);
        }
    }

    pub(super) fn on_launch(&mut self, task: TaskInfo) {
        self.launched_any = true;
        let id = task.task_id.value.to_string();
        let name = task.name.to_string();
        let payload = TaskPayload::from_task(&task, &self.inherited);
        if let Err(e) = self.book.launch(task, payload) {
            log::warn!("LAUNCH ignored: {e}");
            return;
        }
        // The payload stays in the book for the host phases; only its shape is logged.
        let shape = self
            .book
            .task(&id)
            .map_or_else(String::new, |t| t.payload.describe());
        log::info!("LAUNCH task {id} ({name:?}): {shape}");
        if self.shutdown_deadline.is_some() {
            self.send_status(
                &id,
                TaskState::Killed,
                "the executor is shutting down",
                None,
            );
            return;
        }
        let host = self
            .hostname
            .clone()
            .or_else(|| self.agent_hostname.clone())
            .unwrap_or_else(|| "an unnamed host".to_string());
        let message = format!("storage executor running on {host}");
        // The node worker starts before the agent has taken TASK_RUNNING: its first call, to
        // the scheduler, does not need it (the scheduler hears the executor while the task
        // is still staging), and an agent slow to answer held the whole walk back (0.45 s a
        // launch on the loaded dev cluster). Recorded first, the update still goes before any
        // the worker's outcome brings.
        self.record_status(&id, TaskState::Running, &message, None);
        self.start_node(&id);
        self.flush();
    }

    /// Starts the node worker for the task: it needs the scheduler's URL, its certificate's
    /// fingerprint and the executor secret; the scheduler puts the last two in the task's
    /// data (never in the environment).
    fn start_node(&mut self, task_id: &str) {
        if self.node_started {
            log::warn!("task {task_id}: the node worker already runs for an earlier task");
            return;
        }
        let Some(task) = self.book.task(task_id) else {
            return;
        };
        let data = task.payload.data.as_deref().unwrap_or_default();
        let url = task.payload.settings.get(SCHEDULER_URL).cloned();
        let secret = data_field(data, env::DATA_EXECUTOR_SECRET);
        let pin = data_field(data, env::DATA_SCHEDULER_FINGERPRINT);
        let (Some(url), Some(secret), Some(tx)) = (url, secret, self.tx.clone()) else {
            log::error!(
                "task {task_id}: no {SCHEDULER_URL} setting or no executor secret in the task \
                 data: this task is not from the storage scheduler; no host phases run"
            );
            return;
        };
        let launched = pin
            .ok_or_else(|| {
                format!(
                    "no {:?} in the task data: the scheduler's certificate is unknown, so its \
                     executor API cannot be reached safely",
                    env::DATA_SCHEDULER_FINGERPRINT
                )
            })
            .and_then(|pin| Endpoint::new(&url, &pin));
        // An announced endpoint is newer than the launch's.
        let endpoint = match (self.announced.clone(), launched) {
            (Some(e), _) | (None, Ok(e)) => e,
            (None, Err(e)) => {
                log::error!("task {task_id}: {e}");
                self.on_node_outcome(task_id, Outcome::Failed(e));
                return;
            }
        };
        let (moves, moved) = mpsc::channel();
        self.moves = Some(moves);
        let api = SchedulerApi::new(endpoint, &self.config.executor_id, &secret, moved)
            .with_plan_wait(self.config.plan_wait)
            .with_new_pin_grace(self.config.new_pin_grace);
        let mut worker = node::Node::new(api, Facts::from_env(), self.config.sandbox.clone());
        let id = task_id.to_string();
        let spawned = thread::Builder::new().name("node".into()).spawn(move || {
            let outcome = worker.run();
            let running = outcome == Outcome::Running;
            let _ = tx.send(Incoming::Node(id.clone(), outcome));
            // The task stays running whatever the host checks find, until decommissioned.
            if running {
                if let Some(end) = worker.watch() {
                    let _ = tx.send(Incoming::Node(id, end));
                }
            }
        });
        match spawned {
            Ok(_) => self.node_started = true,
            Err(e) => {
                let text = format!("cannot start the node worker thread: {e}");
                self.on_node_outcome(task_id, Outcome::Failed(text));
            }
        }
    }

    /// The node is running, or it failed: the task says so, with the same text the
    /// scheduler got as the phase's error. A finished task ends the executor once its
    /// update is acknowledged.
    pub(super) fn on_node_outcome(&mut self, task_id: &str, outcome: Outcome) -> Flow {
        match outcome {
            Outcome::Running => {
                self.send_status(task_id, TaskState::Running, "storage node running", None);
            }
            Outcome::Decommissioned(text) => {
                self.send_status(task_id, TaskState::Finished, &text, None);
                let wait = self.config.shutdown_grace_period.min(NEVER);
                self.shutdown_deadline = Some(after(Instant::now(), wait));
            }
            Outcome::Failed(text) | Outcome::Refused(text) => {
                self.send_status(task_id, TaskState::Failed, &text, None);
                let wait = self.config.shutdown_grace_period.min(NEVER);
                self.shutdown_deadline = Some(after(Instant::now(), wait));
            }
        }
        Flow::Continue
    }

    /// Task groups are for the default executor; this one runs single tasks. Each task is
    /// failed at once so that none of them stays in limbo.
    pub(super) fn on_launch_group(&mut self, tasks: Vec<TaskInfo>) {
        self.launched_any = true;
        log::warn!(
            "LAUNCH_GROUP of {} tasks: this executor does not run task groups",
            tasks.len()
        );
        for task in tasks {
            let id = task.task_id.value.to_string();
            let payload = TaskPayload::from_task(&task, &self.inherited);
            if let Err(e) = self.book.launch(task, payload) {
                log::warn!("LAUNCH_GROUP task ignored: {e}");
                continue;
            }
            self.send_status(
                &id,
                TaskState::Failed,
                "the storage executor does not run task groups",
                Some(task_status::Reason::TaskGroupInvalid),
            );
        }
    }

    pub(super) fn on_kill(&mut self, id: &str) {
        match self.book.task(id) {
            Some(t) if !t.is_terminal() => {
                log::info!("KILL task {id}");
                self.send_status(id, TaskState::Killed, "killed on request", None);
            }
            Some(_) => log::info!("KILL task {id}: already ended, nothing to do"),
            None => log::warn!("KILL of task {id}, which this executor does not run; ignored"),
        }
    }

    pub(super) fn on_shutdown(&mut self) {
        if self.shutdown_deadline.is_some() {
            log::info!("SHUTDOWN again; already shutting down");
            return;
        }
        let live = self.book.live_task_ids();
        // Leave part of the grace period for the process to exit before the agent kills it.
        let wait = self.config.shutdown_grace_period.min(NEVER).mul_f64(0.75);
        log::info!(
            "SHUTDOWN: killing {} tasks, exiting within {}",
            live.len(),
            show(wait)
        );
        self.shutdown_deadline = Some(after(Instant::now(), wait));
        for id in live {
            self.send_status(&id, TaskState::Killed, "the executor was shut down", None);
        }
    }
}

/// A non-empty string field of the task data's JSON object.
fn data_field(data: &[u8], name: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(data).ok()?;
    v.get(name)?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_secret_and_the_pin_come_from_the_task_data() {
        let secret = |data: &[u8]| data_field(data, env::DATA_EXECUTOR_SECRET);
        assert_eq!(
            secret(br#"{"executor_secret":"abc"}"#).as_deref(),
            Some("abc")
        );
        assert_eq!(secret(br#"{"executor_secret":""}"#), None);
        assert_eq!(secret(br#"{"persona":"data"}"#), None);
        assert_eq!(secret(b"not json"), None);
        assert_eq!(
            data_field(
                br#"{"executor_secret":"abc","scheduler_fingerprint":"sha256:00"}"#,
                env::DATA_SCHEDULER_FINGERPRINT
            )
            .as_deref(),
            Some("sha256:00")
        );
    }
}
