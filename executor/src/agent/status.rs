//! Status updates to the agent: recording each with a fresh uuid, sending them in order,
//! resending after a failed POST, and building the calls.

use super::{show, unix_now, Executor};
use crate::uuid;
use std::time::{Duration, Instant};
use storage_framework::mesos::client::ClientError;
use storage_framework::mesos::executor::{call, Call};
use storage_framework::mesos::types::{
    task_status, ExecutorID, FrameworkID, TaskID, TaskState, TaskStatus,
};
use storage_framework::mesos::Bytes;

/// Retries of an UPDATE whose POST failed while the stream stayed up.
pub(super) const RESEND_START: Duration = Duration::from_millis(500);
const RESEND_MAX: Duration = Duration::from_secs(10);

impl Executor {
    /// Records an update with a fresh uuid and sends whatever is pending.
    pub(super) fn send_status(
        &mut self,
        task_id: &str,
        state: TaskState,
        message: &str,
        reason: Option<task_status::Reason>,
    ) {
        self.record_status(task_id, state, message, reason);
        self.flush();
    }

    /// Records an update with a fresh uuid, to be sent by the next [`flush`](Self::flush)
    /// in the order recorded.
    pub(super) fn record_status(
        &mut self,
        task_id: &str,
        state: TaskState,
        message: &str,
        reason: Option<task_status::Reason>,
    ) {
        let agent_id = self
            .book
            .task(task_id)
            .map(|t| t.info.agent_id.clone())
            .filter(|a| !a.value.is_empty());
        let uuid = uuid::random();
        let status = TaskStatus {
            task_id: TaskID {
                value: task_id.into(),
            },
            state,
            message: Some(message.into()),
            agent_id,
            timestamp: Some(unix_now()),
            executor_id: Some(ExecutorID {
                value: self.config.executor_id.as_str().into(),
            }),
            source: Some(task_status::Source::Executor),
            reason,
            uuid: Some(Bytes(uuid.to_vec())),
            ..TaskStatus::default()
        };
        if let Err(e) = self.book.record(status) {
            log::error!("{state} for task {task_id} not sent: {e}");
            return;
        }
        log::info!(
            "UPDATE task {task_id}: {state} (uuid {})",
            uuid::to_text(&uuid)
        );
    }

    /// Sends pending updates oldest first and stops at the first failure, so that a task's
    /// updates never overtake each other; a failure schedules a resend.
    pub(super) fn flush(&mut self) {
        while let Some(out) = self.book.next_undelivered() {
            let state = out.update.status.state;
            let request = self.new_call(call::Type::Update, |c| c.update = Some(out.update));
            match self.client.call(&request) {
                Ok(()) => {
                    self.book.mark_delivered(&out.uuid);
                    self.resend_delay = RESEND_START;
                }
                Err(e @ ClientError::Rejected { .. }) => {
                    // Resending the same body gets the same answer; it stays pending and
                    // goes out again with the next SUBSCRIBE.
                    log::error!("UPDATE {state} of task {} refused: {e}", out.task_id);
                    self.book.mark_delivered(&out.uuid);
                }
                Err(e) => {
                    let delay = self.resend_delay;
                    log::warn!(
                        "UPDATE {state} of task {} failed: {e}; retrying in {}",
                        out.task_id,
                        show(delay)
                    );
                    self.resend_at = Some(Instant::now() + delay);
                    self.resend_delay = (delay * 2).min(RESEND_MAX);
                    return;
                }
            }
        }
    }

    pub(super) fn new_call(&self, kind: call::Type, fill: impl FnOnce(&mut Call)) -> Call {
        let mut c = Call {
            executor_id: ExecutorID {
                value: self.config.executor_id.as_str().into(),
            },
            framework_id: FrameworkID {
                value: self.config.framework_id.as_str().into(),
            },
            r#type: Some(kind),
            ..Call::default()
        };
        fill(&mut c);
        c
    }
}
