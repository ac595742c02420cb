//! The master's own record of every executor start and end and every task handed to an
//! agent, in the order the owner thread saw them. Tests read it to check invariants over a
//! whole run ("an agent never ran two executors of one framework at once") without sampling
//! the live state on a clock, which can miss an overlap shorter than its period.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchEvent {
    /// A new executor run was created on the agent (before fetch and spawn).
    ExecutorStarted,
    /// The agent handed a task to an executor (new or running).
    TaskLaunched,
    /// The executor run ended (process exit, registration timeout, agent loss, shutdown).
    ExecutorTerminated,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LaunchRecord {
    /// 1, 2, ...: the owner thread's order.
    pub seq: u64,
    pub event: LaunchEvent,
    pub agent: String,
    pub framework: String,
    pub executor: String,
    /// The executor run (unique per start), so that a restart under the same id is distinct.
    pub run: u64,
    /// Set for `TaskLaunched`.
    pub task: Option<String>,
    /// `TaskLaunched`: the executor secret in the task's data, as the executor reads it
    /// (tests call the executor API as that executor; the scheduler keeps only digests).
    #[serde(skip)]
    pub secret: Option<String>,
}

#[derive(Debug, Default)]
pub(super) struct LaunchLog {
    entries: Vec<LaunchRecord>,
    /// Task id -> the executor secret of its data, until the task is recorded.
    secrets: BTreeMap<String, String>,
}

impl LaunchLog {
    pub fn record(
        &mut self,
        event: LaunchEvent,
        agent: &str,
        framework: &str,
        executor: &str,
        run: u64,
        task: Option<&str>,
    ) {
        let seq = self.entries.len() as u64 + 1;
        let secret = task.and_then(|t| self.secrets.remove(t));
        self.entries.push(LaunchRecord {
            seq,
            event,
            agent: agent.to_string(),
            framework: framework.to_string(),
            executor: executor.to_string(),
            run,
            task: task.map(str::to_string),
            secret,
        });
    }

    /// The executor secret of task `task_id`'s data, for its `TaskLaunched` record.
    pub fn note_secret(&mut self, task_id: &str, secret: Option<String>) {
        if let Some(s) = secret {
            self.secrets.insert(task_id.to_string(), s);
        }
    }

    pub fn entries(&self) -> Vec<LaunchRecord> {
        self.entries.clone()
    }
}

/// The most executor runs whose id starts with `prefix` that were alive at once on one
/// agent, over the whole record, by agent hostname.
pub fn max_concurrent_executors(log: &[LaunchRecord], prefix: &str) -> BTreeMap<String, usize> {
    let mut live: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    let mut most: BTreeMap<String, usize> = BTreeMap::new();
    for r in log.iter().filter(|r| r.executor.starts_with(prefix)) {
        let runs = live.entry(&r.agent).or_default();
        match r.event {
            LaunchEvent::ExecutorStarted => {
                runs.insert(r.run);
            }
            LaunchEvent::ExecutorTerminated => {
                runs.remove(&r.run);
            }
            LaunchEvent::TaskLaunched => {}
        }
        let m = most.entry(r.agent.clone()).or_default();
        *m = (*m).max(runs.len());
    }
    most
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_runs_on_one_agent_count_twice() {
        let mut log = LaunchLog::default();
        log.record(LaunchEvent::ExecutorStarted, "a1", "f", "x.1", 1, None);
        log.record(LaunchEvent::TaskLaunched, "a1", "f", "x.1", 1, Some("t1"));
        log.record(LaunchEvent::ExecutorStarted, "a2", "f", "x.2", 2, None);
        log.record(LaunchEvent::ExecutorTerminated, "a1", "f", "x.1", 1, None);
        log.record(LaunchEvent::ExecutorStarted, "a1", "f", "x.3", 3, None);
        let most = max_concurrent_executors(&log.entries(), "x.");
        assert_eq!(most["a1"], 1);
        assert_eq!(most["a2"], 1);
        // The same, with the second start before the first end: an overlap, however short.
        log.record(LaunchEvent::ExecutorStarted, "a2", "f", "x.4", 4, None);
        let most = max_concurrent_executors(&log.entries(), "x.");
        assert_eq!(most["a2"], 2);
        assert_eq!(log.entries()[5].seq, 6);
        assert!(max_concurrent_executors(&log.entries(), "other").is_empty());
    }
}
