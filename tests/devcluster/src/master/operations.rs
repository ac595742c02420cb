//! Offer operations other than a plain LAUNCH. The dev master applies none of them, and fails
//! each the way Mesos' master fails an operation it will not apply:
//!
//! - RESERVE, UNRESERVE, CREATE, DESTROY and the other resource operations are dropped: with
//!   an `id` (the framework asked for feedback) an UPDATE_OPERATION_STATUS event says
//!   OPERATION_ERROR, no agent or provider id, because no dev agent has the
//!   RESOURCE_PROVIDER capability operation feedback needs; without one, only the log says so.
//! - LAUNCH_GROUP (no dev agent runs task groups) and a LAUNCH carrying an `id`: TASK_ERROR
//!   for each task, from the master, as for any invalid launch.
//! - UNKNOWN is ignored with a warning.
//!
//! Offered resources an operation did not use go back to the allocator with the rest of the
//! offer.

use super::state::*;
use storage_framework::mesos::scheduler::event;
use storage_framework::mesos::types::*;

/// What becomes of one operation of an ACCEPT.
pub(super) enum Verdict {
    /// A LAUNCH the master runs.
    Launch(offer::operation::Launch),
    /// Failed or ignored here; nothing is launched.
    Done,
}

impl Cluster {
    /// Sorts out `op`: a plain LAUNCH goes on, every other operation is failed here.
    pub(super) fn judge_operation(&self, fw_id: &str, op: offer::Operation) -> Verdict {
        let kind = op.r#type.unwrap_or(offer::operation::Type::Unknown);
        match kind {
            offer::operation::Type::Launch if op.id.is_some() => {
                let tasks = op.launch.map(|l| l.task_infos).unwrap_or_default();
                self.fail_tasks(
                    fw_id,
                    &tasks,
                    task_status::Reason::TaskInvalid,
                    "The `id` field cannot be set on LAUNCH operations",
                );
                Verdict::Done
            }
            offer::operation::Type::Launch => match op.launch {
                Some(launch) => Verdict::Launch(launch),
                None => Verdict::Done,
            },
            offer::operation::Type::LaunchGroup => {
                let tasks = op
                    .launch_group
                    .map(|g| g.task_group.tasks)
                    .unwrap_or_default();
                self.fail_tasks(
                    fw_id,
                    &tasks,
                    task_status::Reason::TaskGroupInvalid,
                    "Task groups are not supported by this agent",
                );
                Verdict::Done
            }
            offer::operation::Type::Unknown => {
                log::warn!("framework {fw_id}: ignoring unknown operation");
                Verdict::Done
            }
            _ => {
                let message = match op.id {
                    Some(_) => "Operation requested feedback, but the agent does not have the \
                                required RESOURCE_PROVIDER capability"
                        .to_string(),
                    None => format!("{} is not implemented by the dev master", kind.as_str()),
                };
                self.drop_operation(fw_id, &op, &message);
                Verdict::Done
            }
        }
    }

    /// Mesos' `drop` of an operation: the log line, and OPERATION_ERROR when the framework
    /// gave the operation an id.
    pub(super) fn drop_operation(&self, fw_id: &str, op: &offer::Operation, message: &str) {
        let kind = op.r#type.unwrap_or(offer::operation::Type::Unknown);
        log::warn!(
            "dropping {} operation from framework {fw_id}: {message}",
            kind.as_str()
        );
        let Some(id) = &op.id else { return };
        let mut ev = sched_event(event::Type::UpdateOperationStatus);
        ev.update_operation_status = Some(event::UpdateOperationStatus {
            status: OperationStatus {
                operation_id: Some(id.clone()),
                state: OperationState::Error,
                message: Some(message.into()),
                agent_id: None,
            },
        });
        self.send(fw_id, &ev);
    }

    fn fail_tasks(
        &self,
        fw_id: &str,
        tasks: &[TaskInfo],
        reason: task_status::Reason,
        message: &str,
    ) {
        for task in tasks {
            let status = make_status(
                &task.task_id.value,
                TaskState::Error,
                task_status::Source::Master,
                Some(reason),
                message,
                Some(&task.agent_id.value),
                None,
                None,
            );
            self.send_update(fw_id, status);
        }
    }
}
