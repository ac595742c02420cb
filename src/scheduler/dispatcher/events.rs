//! `/api/events`: the last few hundred operator actions and plan changes, newest first. In
//! memory only: the log lines (one per entry) are the lasting record.

use crate::scheduler::exchange::LoggedEvent;
use std::collections::VecDeque;
use std::sync::Arc;

/// How many entries `/api/events` keeps.
pub const KEPT: usize = 500;

#[derive(Default)]
pub struct EventLog {
    /// Newest first.
    entries: VecDeque<LoggedEvent>,
    /// What the last view got, until the next entry.
    shared: Option<Arc<Vec<LoggedEvent>>>,
}

impl EventLog {
    pub fn push(&mut self, event: LoggedEvent) {
        self.entries.push_front(event);
        self.entries.truncate(KEPT);
        self.shared = None;
    }

    pub fn snapshot(&mut self) -> Arc<Vec<LoggedEvent>> {
        self.shared
            .get_or_insert_with(|| Arc::new(self.entries.iter().cloned().collect()))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(n: u64) -> LoggedEvent {
        LoggedEvent {
            at_ms: n,
            kind: "action",
            action: "pause".into(),
            target: "plan".into(),
            outcome: "accepted".into(),
            message: String::new(),
        }
    }

    #[test]
    fn newest_first_and_bounded() {
        let mut log = EventLog::default();
        for n in 0..(KEPT as u64 + 10) {
            log.push(ev(n));
        }
        let s = log.snapshot();
        assert_eq!(s.len(), KEPT);
        assert_eq!(s[0].at_ms, KEPT as u64 + 9);
        assert!(
            Arc::ptr_eq(&s, &log.snapshot()),
            "shared until the next entry"
        );
    }
}
