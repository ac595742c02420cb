//! Book-keeping of launched tasks and of status updates the agent has not acknowledged.
//!
//! The executor HTTP API makes the executor responsible for reliability: every UPDATE stays
//! here until the agent's ACKNOWLEDGED names its uuid, and a re-SUBSCRIBE carries
//! - `unacknowledged_updates`: every such update, in the order they were first sent;
//! - `unacknowledged_tasks`: every launched task none of whose updates the agent has
//!   acknowledged yet ("a task is considered acknowledged if at least one of the status
//!   updates for this task is acknowledged by the agent").
//!
//! A task is forgotten once the agent acknowledged its terminal update. Pure: no I/O.

use crate::payload::TaskPayload;
use std::fmt;
use storage_framework::mesos::executor::call;
use storage_framework::mesos::types::{TaskInfo, TaskState, TaskStatus};

/// A task this executor runs.
#[derive(Debug)]
pub struct Task {
    pub info: TaskInfo,
    pub payload: TaskPayload,
    /// The agent acknowledged at least one update of this task.
    acknowledged: bool,
    /// A terminal update was recorded; no further update may follow.
    terminal: bool,
}

impl Task {
    pub fn id(&self) -> &str {
        &self.info.task_id.value
    }

    pub fn is_terminal(&self) -> bool {
        self.terminal
    }
}

#[derive(Debug)]
struct Pending {
    uuid: Vec<u8>,
    task_id: String,
    state: TaskState,
    update: call::Update,
    /// The agent answered 202 to this update's UPDATE (or it went out inside a SUBSCRIBE).
    delivered: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BookError {
    DuplicateTask(String),
    UnknownTask(String),
    /// The task already has a terminal update; Mesos drops anything after it.
    TaskTerminal(String),
    /// Only updates with a uuid are acknowledged, so only those can be tracked.
    NoUuid(String),
    DuplicateUuid(String),
}

impl fmt::Display for BookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BookError::DuplicateTask(id) => write!(f, "task {id} was already launched"),
            BookError::UnknownTask(id) => write!(f, "task {id} is not known to this executor"),
            BookError::TaskTerminal(id) => {
                write!(f, "task {id} already has a terminal update")
            }
            BookError::NoUuid(id) => write!(f, "update for task {id} has no uuid"),
            BookError::DuplicateUuid(id) => {
                write!(
                    f,
                    "update for task {id} reuses the uuid of a pending update"
                )
            }
        }
    }
}

impl std::error::Error for BookError {}

/// What an ACKNOWLEDGED event did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ack {
    /// The update with this uuid is no longer pending. `task_done`: it was the task's
    /// terminal update, so the task was forgotten.
    Acknowledged { state: TaskState, task_done: bool },
    /// No pending update of that task has this uuid (a duplicate acknowledgement).
    Unknown,
}

/// One update still to send: its uuid (for logs and [`Book::mark_delivered`]) and body.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub uuid: Vec<u8>,
    pub task_id: String,
    pub update: call::Update,
}

#[derive(Debug, Default)]
pub struct Book {
    /// In launch order, so that a re-SUBSCRIBE lists them as the agent sent them.
    tasks: Vec<Task>,
    /// In the order they were recorded: the agent requires a task's updates in order.
    updates: Vec<Pending>,
}

impl Book {
    pub fn new() -> Book {
        Book::default()
    }

    pub fn launch(&mut self, info: TaskInfo, payload: TaskPayload) -> Result<(), BookError> {
        let id = info.task_id.value.as_str();
        if self.task(id).is_some() {
            return Err(BookError::DuplicateTask(id.to_string()));
        }
        self.tasks.push(Task {
            info,
            payload,
            acknowledged: false,
            terminal: false,
        });
        Ok(())
    }

    pub fn task(&self, id: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.id() == id)
    }

    /// Ids of the tasks without a terminal update, in launch order.
    pub fn live_task_ids(&self) -> Vec<String> {
        self.tasks
            .iter()
            .filter(|t| !t.terminal)
            .map(|t| t.id().to_string())
            .collect()
    }

    /// Records an update about to be sent. It stays pending until acknowledged.
    pub fn record(&mut self, status: TaskStatus) -> Result<(), BookError> {
        let id = status.task_id.value.to_string();
        let Some(uuid) = status.uuid.as_ref().map(|u| u.0.clone()) else {
            return Err(BookError::NoUuid(id));
        };
        if self.updates.iter().any(|p| p.uuid == uuid) {
            return Err(BookError::DuplicateUuid(id));
        }
        let Some(task) = self.tasks.iter_mut().find(|t| t.id() == id) else {
            return Err(BookError::UnknownTask(id));
        };
        if task.terminal {
            return Err(BookError::TaskTerminal(id));
        }
        let state = status.state;
        task.terminal = state.is_terminal();
        self.updates.push(Pending {
            uuid,
            task_id: id,
            state,
            update: call::Update { status },
            delivered: false,
        });
        Ok(())
    }

    pub fn acknowledge(&mut self, task_id: &str, uuid: &[u8]) -> Ack {
        let Some(i) = self
            .updates
            .iter()
            .position(|p| p.uuid == uuid && p.task_id == task_id)
        else {
            return Ack::Unknown;
        };
        let done = self.updates.remove(i);
        let terminal = done.state.is_terminal();
        if terminal {
            self.tasks.retain(|t| t.id() != task_id);
        } else if let Some(task) = self.tasks.iter_mut().find(|t| t.id() == task_id) {
            task.acknowledged = true;
        }
        Ack::Acknowledged {
            state: done.state,
            task_done: terminal,
        }
    }

    /// The oldest update the agent has not taken yet. Sending strictly oldest first keeps
    /// each task's updates in order even when a send fails and is retried.
    pub fn next_undelivered(&self) -> Option<Outgoing> {
        self.updates
            .iter()
            .find(|p| !p.delivered)
            .map(|p| Outgoing {
                uuid: p.uuid.clone(),
                task_id: p.task_id.clone(),
                update: p.update.clone(),
            })
    }

    pub fn mark_delivered(&mut self, uuid: &[u8]) {
        if let Some(p) = self.updates.iter_mut().find(|p| p.uuid == uuid) {
            p.delivered = true;
        }
    }

    /// After a SUBSCRIBE carried every pending update.
    pub fn mark_all_delivered(&mut self) {
        for p in &mut self.updates {
            p.delivered = true;
        }
    }

    /// The `subscribe` part of a (re-)SUBSCRIBE call.
    pub fn subscribe(&self) -> call::Subscribe {
        call::Subscribe {
            unacknowledged_tasks: self
                .tasks
                .iter()
                .filter(|t| !t.acknowledged)
                .map(|t| t.info.clone())
                .collect(),
            unacknowledged_updates: self.updates.iter().map(|p| p.update.clone()).collect(),
        }
    }

    pub fn unacknowledged(&self) -> usize {
        self.updates.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use storage_framework::mesos::types::TaskID;
    use storage_framework::mesos::Bytes;

    fn info(id: &str) -> TaskInfo {
        TaskInfo {
            name: format!("name-{id}").into(),
            task_id: TaskID { value: id.into() },
            ..Default::default()
        }
    }

    fn status(id: &str, state: TaskState, uuid: u8) -> TaskStatus {
        TaskStatus {
            task_id: TaskID { value: id.into() },
            state,
            uuid: Some(Bytes(vec![uuid; 16])),
            ..Default::default()
        }
    }

    fn launched(ids: &[&str]) -> Book {
        let mut book = Book::new();
        for id in ids {
            book.launch(info(id), TaskPayload::default()).unwrap();
        }
        book
    }

    fn task_ids(s: &call::Subscribe) -> Vec<String> {
        s.unacknowledged_tasks
            .iter()
            .map(|t| t.task_id.value.to_string())
            .collect()
    }

    fn update_uuids(s: &call::Subscribe) -> Vec<u8> {
        s.unacknowledged_updates
            .iter()
            .map(|u| u.status.uuid.as_ref().unwrap().0[0])
            .collect()
    }

    #[test]
    fn fresh_tasks_are_unacknowledged_until_an_update_is_acknowledged() {
        let mut book = launched(&["t1", "t2"]);
        let s = book.subscribe();
        assert_eq!(task_ids(&s), ["t1", "t2"]);
        assert!(s.unacknowledged_updates.is_empty());

        book.record(status("t1", TaskState::Running, 1)).unwrap();
        book.record(status("t2", TaskState::Running, 2)).unwrap();
        let s = book.subscribe();
        assert_eq!(task_ids(&s), ["t1", "t2"], "sent is not acknowledged");
        assert_eq!(update_uuids(&s), [1, 2]);

        assert_eq!(
            book.acknowledge("t1", &[1; 16]),
            Ack::Acknowledged {
                state: TaskState::Running,
                task_done: false
            }
        );
        let s = book.subscribe();
        assert_eq!(task_ids(&s), ["t2"]);
        assert_eq!(update_uuids(&s), [2]);
        assert_eq!(book.unacknowledged(), 1);
    }

    #[test]
    fn acknowledged_terminal_update_forgets_the_task() {
        let mut book = launched(&["t1"]);
        book.record(status("t1", TaskState::Running, 1)).unwrap();
        book.record(status("t1", TaskState::Killed, 2)).unwrap();
        assert_eq!(book.live_task_ids(), Vec::<String>::new());
        assert!(book.task("t1").unwrap().is_terminal());

        book.acknowledge("t1", &[1; 16]);
        let s = book.subscribe();
        assert!(s.unacknowledged_tasks.is_empty());
        assert_eq!(update_uuids(&s), [2]);

        assert_eq!(
            book.acknowledge("t1", &[2; 16]),
            Ack::Acknowledged {
                state: TaskState::Killed,
                task_done: true
            }
        );
        assert!(book.task("t1").is_none());
        assert!(book.subscribe().unacknowledged_tasks.is_empty());
        assert_eq!(book.unacknowledged(), 0);
    }

    #[test]
    fn unknown_and_duplicate_acknowledgements_change_nothing() {
        let mut book = launched(&["t1"]);
        book.record(status("t1", TaskState::Running, 1)).unwrap();
        assert_eq!(book.acknowledge("t1", &[9; 16]), Ack::Unknown);
        assert_eq!(book.acknowledge("t2", &[1; 16]), Ack::Unknown, "wrong task");
        assert_eq!(book.unacknowledged(), 1);
        assert!(matches!(
            book.acknowledge("t1", &[1; 16]),
            Ack::Acknowledged { .. }
        ));
        assert_eq!(book.acknowledge("t1", &[1; 16]), Ack::Unknown);
    }

    #[test]
    fn invalid_updates_are_refused() {
        let mut book = launched(&["t1"]);
        assert_eq!(
            book.launch(info("t1"), TaskPayload::default()),
            Err(BookError::DuplicateTask("t1".into()))
        );
        assert_eq!(
            book.record(status("t9", TaskState::Running, 1)),
            Err(BookError::UnknownTask("t9".into()))
        );
        let mut no_uuid = status("t1", TaskState::Running, 1);
        no_uuid.uuid = None;
        assert_eq!(book.record(no_uuid), Err(BookError::NoUuid("t1".into())));
        book.record(status("t1", TaskState::Running, 1)).unwrap();
        assert_eq!(
            book.record(status("t1", TaskState::Running, 1)),
            Err(BookError::DuplicateUuid("t1".into()))
        );
        book.record(status("t1", TaskState::Failed, 2)).unwrap();
        assert_eq!(
            book.record(status("t1", TaskState::Killed, 3)),
            Err(BookError::TaskTerminal("t1".into()))
        );
        assert_eq!(book.unacknowledged(), 2);
    }

    #[test]
    fn delivery_goes_oldest_first() {
        let mut book = launched(&["t1", "t2"]);
        assert_eq!(book.next_undelivered(), None);
        book.record(status("t1", TaskState::Running, 1)).unwrap();
        book.record(status("t2", TaskState::Running, 2)).unwrap();
        book.record(status("t1", TaskState::Killed, 3)).unwrap();

        let first = book.next_undelivered().unwrap();
        assert_eq!((first.uuid[0], first.task_id.as_str()), (1, "t1"));
        assert_eq!(first.update.status.state, TaskState::Running);
        // Not delivered yet: asking again gives the same one.
        assert_eq!(book.next_undelivered().unwrap().uuid, first.uuid);

        book.mark_delivered(&first.uuid);
        assert_eq!(book.next_undelivered().unwrap().uuid[0], 2);
        book.mark_all_delivered();
        assert_eq!(book.next_undelivered(), None);
        // Delivered is still unacknowledged.
        assert_eq!(update_uuids(&book.subscribe()), [1, 2, 3]);
    }

    #[test]
    fn live_tasks_in_launch_order() {
        let mut book = launched(&["b", "a", "c"]);
        book.record(status("a", TaskState::Finished, 1)).unwrap();
        assert_eq!(book.live_task_ids(), ["b", "c"]);
    }
}
