//! Operator commands (their token checked by the REST side): found to a node, handed to the
//! action's own file (`op_plan.rs`: pause, resume, retry; `op_remove.rs`: decommission,
//! recommission, replace, device removal; `op_restart.rs`: restart), and wrapped here in one
//! place: one log line per command, an `/api/events` entry, and the reply sent only once
//! what the command changed is saved.

use super::Dispatcher;
use crate::scheduler::exchange::{LoggedEvent, OperatorRequest};
use crate::scheduler::operator::{Command, NodeAction, Outcome};
use crossbeam_channel::Sender;
use log::{info, warn};
use std::sync::Arc;

impl Dispatcher {
    pub(super) fn on_operator(&mut self, req: OperatorRequest) {
        let outcome = self.operate(&req.command);
        let line = format!(
            "operator {} {}: {}: {}",
            req.command.action(),
            req.command.target(),
            outcome.word(),
            outcome.message
        );
        if outcome.accepted() {
            info!("{line}");
        } else {
            warn!("{line}");
        }
        self.note_event(LoggedEvent {
            at_ms: self.clock.now_ms(),
            kind: "action",
            action: req.command.action().into(),
            target: req.command.target(),
            outcome: outcome.word().into(),
            message: outcome.message.clone(),
        });
        self.operator_replies.push((req.reply, outcome));
    }

    /// A plan change of the scheduler's own (a target change, a failed step, a node out of
    /// relaunches): one `/api/events` entry; the caller logs its own line.
    pub(super) fn note_plan_change(
        &mut self,
        action: &str,
        target: &str,
        outcome: &str,
        message: String,
    ) {
        self.note_event(LoggedEvent {
            at_ms: self.clock.now_ms(),
            kind: "plan",
            action: action.into(),
            target: target.into(),
            outcome: outcome.into(),
            message,
        });
    }

    fn note_event(&mut self, event: LoggedEvent) {
        self.events.push(event);
        self.touch_view();
    }

    fn operate(&mut self, command: &Command) -> Outcome {
        let (host, action) = match command {
            Command::Pause => return self.op_pause(),
            Command::Resume => return self.op_resume(),
            Command::Node { host, action } => (host, action),
        };
        let Some(agent) = self.node_of_host(host) else {
            return Outcome::not_found(format!("no node on host {host}"));
        };
        match action {
            NodeAction::Restart => self.op_restart(&agent),
            NodeAction::Retry => self.op_retry(&agent),
            NodeAction::Decommission => self.op_decommission(&agent),
            NodeAction::Recommission => self.op_recommission(&agent),
            NodeAction::Replace => self.op_replace(&agent),
            NodeAction::RemoveDevice(device) => self.op_remove_device(&agent, device),
        }
    }

    /// The node on `host`: the one with a task when a host left older records behind.
    fn node_of_host(&self, host: &str) -> Option<Arc<str>> {
        let mut on_host = self
            .state
            .model
            .nodes
            .values()
            .filter(|n| n.hostname == host);
        let first = on_host.next()?;
        let best = on_host
            .chain(std::iter::once(first))
            .find(|n| n.task.is_some())
            .unwrap_or(first);
        Some(best.agent_id.clone())
    }

    /// After the save: the outcomes, or 503 when what they changed could not be saved.
    pub(super) fn answer_operators(&mut self, saved: bool) {
        for (reply, outcome) in std::mem::take(&mut self.operator_replies) {
            let outcome = if saved || !outcome.accepted() {
                outcome
            } else {
                warn!("operator command done in memory but not saved; answered 503");
                Outcome {
                    status: 503,
                    message: format!(
                        "{} (but the state could not be saved; it is retried)",
                        outcome.message
                    ),
                }
            };
            let _ = Sender::send(&reply, outcome);
        }
    }
}
