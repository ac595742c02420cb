//! The main loop of one subscription: waiting for events and timers, dispatching each
//! event by type, and the events that only touch the loop's own state.

use super::{Executor, Flow, Incoming, StreamOutcome, EXIT_FAILURE, EXIT_OK};
use crate::updates::Ack;
use crate::uuid;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Instant;
use storage_framework::mesos::executor::{event, Event};

impl Executor {
    /// Handles the events of one subscription until it breaks or the executor is done.
    pub(super) fn serve(&mut self, rx: &Receiver<Incoming>) -> StreamOutcome {
        loop {
            let timer = [self.shutdown_deadline, self.resend_at]
                .into_iter()
                .flatten()
                .min();
            let received = match timer {
                Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
                None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            let flow = match received {
                Ok(Incoming::Event(g, event)) if g == self.generation => self.handle(*event),
                Ok(Incoming::Ended(g, why)) if g == self.generation => {
                    return StreamOutcome::Broken(why)
                }
                Ok(Incoming::Event(..) | Incoming::Ended(..)) => Flow::Continue,
                Ok(Incoming::Node(task_id, outcome)) => self.on_node_outcome(&task_id, outcome),
                Err(RecvTimeoutError::Disconnected) => {
                    return StreamOutcome::Broken("the event reader stopped".into())
                }
                Err(RecvTimeoutError::Timeout) => self.on_timer(),
            };
            if let Flow::Exit(code) = flow {
                return StreamOutcome::Exit(code);
            }
            if self.shutdown_deadline.is_some() && self.book.unacknowledged() == 0 {
                log::info!("every update acknowledged; shut down");
                return StreamOutcome::Exit(EXIT_OK);
            }
            if self.launched_any
                && self.book.unacknowledged() == 0
                && self.book.live_task_ids().is_empty()
            {
                log::info!("no live task left and every update acknowledged; exiting");
                return StreamOutcome::Exit(EXIT_OK);
            }
        }
    }

    fn on_timer(&mut self) -> Flow {
        let now = Instant::now();
        if self.shutdown_deadline.is_some_and(|d| now >= d) {
            log::warn!(
                "{} updates still unacknowledged at the end of the shutdown grace period; \
                 exiting",
                self.book.unacknowledged()
            );
            return Flow::Exit(EXIT_OK);
        }
        if self.resend_at.is_some_and(|at| now >= at) {
            self.resend_at = None;
            self.flush();
        }
        Flow::Continue
    }

    fn handle(&mut self, event: Event) -> Flow {
        let Some(kind) = event.r#type else {
            log::debug!("event without a type; ignored");
            return Flow::Continue;
        };
        use event::Type;
        match kind {
            Type::Subscribed => match event.subscribed {
                Some(s) => self.on_subscribed(s),
                None => log::warn!("SUBSCRIBED event without its body; ignored"),
            },
            Type::Launch => match event.launch {
                Some(l) => self.on_launch(l.task),
                None => log::warn!("LAUNCH event without its body; ignored"),
            },
            Type::LaunchGroup => match event.launch_group {
                Some(g) => self.on_launch_group(g.task_group.tasks),
                None => log::warn!("LAUNCH_GROUP event without its body; ignored"),
            },
            Type::Kill => match event.kill {
                Some(k) => self.on_kill(&k.task_id.value),
                None => log::warn!("KILL event without its body; ignored"),
            },
            Type::Acknowledged => match event.acknowledged {
                Some(a) => self.on_acknowledged(&a.task_id.value, &a.uuid.0),
                None => log::warn!("ACKNOWLEDGED event without its body; ignored"),
            },
            Type::Message => match event.message {
                Some(m) => self.on_message(&m.data.0),
                None => log::warn!("MESSAGE event without its body; ignored"),
            },
            Type::Error => {
                let message = event.error.map(|e| e.message.to_string());
                log::error!(
                    "ERROR from the agent: {}; exiting",
                    message.as_deref().unwrap_or("(no message)")
                );
                return Flow::Exit(EXIT_FAILURE);
            }
            Type::Shutdown => self.on_shutdown(),
            Type::Heartbeat => log::debug!("HEARTBEAT"),
            Type::Unknown | Type::Other(_) => {
                log::debug!("event of unknown type {kind}; ignored");
            }
        }
        Flow::Continue
    }

    fn on_subscribed(&mut self, s: event::Subscribed) {
        self.failures = 0;
        let container = s
            .container_id
            .as_ref()
            .map_or("-".to_string(), |c| c.value.to_string());
        log::info!(
            "SUBSCRIBED: agent {} ({}), framework {:?}, container {container}",
            s.agent_info.hostname,
            s.agent_info
                .id
                .as_ref()
                .map_or("no id", |id| id.value.as_str()),
            s.framework_info.name.as_str()
        );
        self.agent_hostname = Some(s.agent_info.hostname.to_string());
    }

    fn on_acknowledged(&mut self, task_id: &str, uuid: &[u8]) {
        match self.book.acknowledge(task_id, uuid) {
            Ack::Acknowledged { state, task_done } => log::info!(
                "ACKNOWLEDGED {state} of task {task_id} (uuid {}){}",
                uuid::to_text(uuid),
                if task_done { "; task finished" } else { "" }
            ),
            Ack::Unknown => log::info!(
                "ACKNOWLEDGED task {task_id} uuid {}, which is not pending; ignored",
                uuid::to_text(uuid)
            ),
        }
    }
}
