//! Faults of the master toward a scheduler: calls the master does not take, and
//! agents that re-register over a window after a failover. A new leader knows an agent's
//! tasks only once that agent has re-registered; until then it does not answer
//! reconciliation about them (Mesos' reconciliation guide: no update is sent for tasks on
//! agents that are transitioning).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use storage_framework::mesos::scheduler::call;

#[derive(Debug, Default)]
pub(super) struct SchedulerFaults {
    /// Each entry refuses the next call of its type (503), as a master in trouble does.
    drop_next: Vec<call::Type>,
    /// Agent index -> when it re-registers with the new leader.
    reregisters_at: BTreeMap<usize, Instant>,
    /// Agents held back after a failover until a framework's second explicit
    /// reconciliation has been answered without them (the first comes with an implicit one
    /// at once): a test then knows the order of answers and re-registrations, whatever the
    /// machine's speed.
    held_until_asked: BTreeSet<usize>,
    asks_before_release: u32,
}

impl SchedulerFaults {
    pub(super) fn drop_next(&mut self, kind: call::Type) {
        self.drop_next.push(kind);
    }

    /// True (once) when a call of this type is to be refused.
    pub(super) fn take_drop(&mut self, kind: call::Type) -> bool {
        match self.drop_next.iter().position(|k| *k == kind) {
            Some(i) => {
                self.drop_next.remove(i);
                true
            }
            None => false,
        }
    }

    /// After a failover the `n` agents re-register one after another over `window`.
    pub(super) fn reregister_over(&mut self, n: usize, window: Duration) {
        self.held_until_asked.clear();
        let now = Instant::now();
        self.reregisters_at = (0..n)
            .map(|i| (i, now + window.mul_f64((i + 1) as f64 / n.max(1) as f64)))
            .collect();
    }

    /// After a failover the agents in `late` re-register only once two explicit
    /// reconciliations have been answered without them; the others at once.
    pub(super) fn reregister_after_asked(&mut self, late: impl IntoIterator<Item = usize>) {
        self.reregisters_at.clear();
        self.held_until_asked = late.into_iter().collect();
        self.asks_before_release = 2;
    }

    /// An explicit reconciliation was answered: the held agents re-register after the last.
    pub(super) fn asked(&mut self) {
        self.asks_before_release = self.asks_before_release.saturating_sub(1);
        if self.asks_before_release == 0 {
            self.held_until_asked.clear();
        }
    }

    /// Whether agent `index` has not re-registered yet.
    pub(super) fn transitioning(&mut self, index: usize) -> bool {
        if self.held_until_asked.contains(&index) {
            return true;
        }
        match self.reregisters_at.get(&index) {
            Some(at) if Instant::now() < *at => true,
            Some(_) => {
                self.reregisters_at.remove(&index);
                false
            }
            None => false,
        }
    }
}
