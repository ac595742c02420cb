//! The health model's inputs reach it here: a gateway poll or its failure, and the moment data
//! turns stale. The rules are the health module's (`scheduler/health/`); this file only calls
//! them and writes one log line per change. A change of health never touches a phase, a task
//! or a relaunch: an unhealthy node is shown, not acted upon.

use super::Dispatcher;
use crate::scheduler::gateway_work::report::HealthPoll;
use crate::scheduler::health::{assess, awaits_poll_only, reason_code, Change, HealthSettings};
use crate::scheduler::model::HealthState;
use log::{debug, log, Level};

impl Dispatcher {
    /// The `-health.*` thresholds.
    pub fn set_health_settings(&mut self, settings: HealthSettings) {
        self.executors.set_idle_poll(settings.stale);
        self.health = settings;
        self.stale_at.set(None);
    }

    pub(super) fn on_health_poll(&mut self, poll: &HealthPoll) {
        assess::apply_poll(&mut self.state.model, poll, &self.health);
        self.reassess_health();
        self.note_outages();
    }

    pub(super) fn on_health_failure(&mut self, error: &str) {
        // The worker logs the failure; the health it leads to is logged as a change.
        debug!("storage health poll failed: {error}");
        assess::apply_failure(&mut self.state.model, error);
        self.reassess_health();
    }

    /// Every node's, pool's and the cluster's health again; one log line per change.
    pub(super) fn reassess_health(&mut self) {
        let now = self.clock.now_ms();
        self.health_checked_ms = now;
        // A running executor's sign of life is its plan poll, which the executor API side
        // notes (not the model's `last_contact_ms`, which a poll does not write).
        let executors = &self.executors;
        let heard = |agent: &str| executors.heard_from(agent);
        let mut log_line = |change: Change| {
            let (level, line) = change_line(&change);
            log!(level, "{line}");
        };
        assess::reassess_heard_each(
            &mut self.state.model,
            &self.health,
            now,
            &heard,
            &mut log_line,
        );
        // Only the nodes whose facts or health changed were written to: the save writes
        // those, and the view shows the poll's time.
        self.dirty = true;
        self.touch_view();
    }

    /// What `executor` found on its host changed: its node's health and the cluster's (not
    /// every node's: host reports come hundreds a second on a large cluster). The stale
    /// deadline kept stays right: the node was just heard from, so its own moves later.
    pub(super) fn reassess_host_reported(&mut self, executor: &str) {
        let Some(agent) = self.executors.agent_of(&self.state, executor) else {
            return;
        };
        let now = self.clock.now_ms();
        let executors = &self.executors;
        let heard = |agent: &str| executors.heard_from(agent);
        let model = &mut self.state.model;
        for change in assess::reassess_node_heard(model, &agent, &self.health, now, &heard) {
            let (level, line) = change_line(&change);
            log!(level, "{line}");
        }
        self.touch_view();
    }

    /// When data next turns stale: the dispatcher wakes then and reassesses.
    ///
    /// Exact, it is a pass over every node, and it is asked twice per batch: 10,000 nodes
    /// under phase reports spent a tenth of the dispatcher's time on it. So it is kept until
    /// it arrives or health is reassessed. That is sound because, meanwhile, every
    /// candidate time only moves later: a contact or a gateway read only advances, a node
    /// that starts running was just heard from (now + stale, after any time kept), and a
    /// node shown stale drops out. The time kept is never later than the exact one: the
    /// dispatcher may wake early, never late.
    pub(super) fn health_deadline(&self) -> Option<u64> {
        let now = self.clock.now_ms();
        if let Some((checked, at)) = self.stale_at.get() {
            if checked == self.health_checked_ms && at > now {
                return due_after(Some(at), checked);
            }
        }
        let heard = |agent: &str| self.executors.heard_from(agent);
        let next = assess::next_stale_heard(&self.state.model, &self.health, &heard);
        // Nothing to turn stale is not kept: a first running node must be seen.
        self.stale_at
            .set(next.map(|at| (self.health_checked_ms, at)));
        due_after(next, self.health_checked_ms)
    }

    pub(super) fn reassess_health_when_stale(&mut self) {
        if self
            .health_deadline()
            .is_some_and(|t| t <= self.clock.now_ms())
        {
            self.reassess_health();
        }
    }
}

/// A deadline only when it lies after the last reassessment: one that did not move when it
/// was reached would wake the dispatcher again and again at once.
fn due_after(next: Option<u64>, checked_ms: u64) -> Option<u64> {
    next.filter(|t| *t > checked_ms)
}

/// The log line of a change: a warning when something becomes degraded or unknown (or the
/// kinds of its reasons change), information when it is healthy again or only waits for the
/// next gateway poll ([`AWAITING_POLL`](crate::scheduler::health::AWAITING_POLL): every node of a rollout does). Only a figure moving
/// (a rebuild's GiB left, a pool's percent used) is a debug line: a rebuild would otherwise
/// log a warning at every poll.
fn change_line(c: &Change) -> (Level, String) {
    let reasons = |h: &crate::scheduler::model::Health| {
        if h.reasons.is_empty() {
            String::new()
        } else {
            format!(": {}", h.reasons.join("; "))
        }
    };
    if c.to.state == HealthState::Healthy {
        let was = format!("{}{}", c.from.state, reasons(&c.from));
        return (
            Level::Info,
            format!("{}: healthy again (was {was})", c.subject),
        );
    }
    let was = if c.from.state == c.to.state {
        String::new()
    } else {
        format!(" (was {})", c.from.state)
    };
    let kinds = |h: &crate::scheduler::model::Health| -> Vec<&'static str> {
        h.reasons.iter().map(|r| reason_code(r)).collect()
    };
    let level = if c.from.state == c.to.state && kinds(&c.from) == kinds(&c.to) {
        Level::Debug
    } else if awaits_poll_only(&c.to) {
        Level::Info
    } else {
        Level::Warn
    };
    (
        level,
        format!("{}: {}{}{was}", c.subject, c.to.state, reasons(&c.to)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::health::AWAITING_POLL;
    use crate::scheduler::model::Health;

    fn change(subject: &str, from: Health, to: Health) -> Change {
        Change {
            subject: subject.into(),
            from,
            to,
        }
    }

    #[test]
    fn a_figure_moving_is_a_debug_line_a_new_kind_of_reason_a_warning() {
        let left = |gib: &str| {
            Health::degraded(vec![format!("pool pd/sp: {gib} GiB degraded, rebuilding")])
        };
        let (level, line) = change_line(&change("pool pd/sp", left("12.0"), left("9.5")));
        assert_eq!(level, Level::Debug, "{line}");
        assert_eq!(
            line,
            "pool pd/sp: degraded: pool pd/sp: 9.5 GiB degraded, rebuilding"
        );
        let mut more = left("9.5");
        more.reasons
            .push("pool pd/sp is 91% used (warn at 80%)".into());
        assert_eq!(
            change_line(&change("pool pd/sp", left("9.5"), more)).0,
            Level::Warn
        );
    }

    #[test]
    fn a_change_is_one_line_naming_the_subject_and_the_reasons() {
        let sds = "SDS sds-2 disconnected from the MDM".to_string();
        let disk = "device /dev/sdb in error (DeviceFailed)".to_string();
        let cases = [
            (
                change(
                    "node h2",
                    Health::healthy(),
                    Health::degraded(vec![sds.clone(), disk.clone()]),
                ),
                Level::Warn,
                "node h2: degraded: SDS sds-2 disconnected from the MDM; device /dev/sdb in \
                 error (DeviceFailed) (was healthy)",
            ),
            (
                change(
                    "node h2",
                    Health::degraded(vec![sds.clone()]),
                    Health::degraded(vec![disk.clone()]),
                ),
                Level::Warn,
                "node h2: degraded: device /dev/sdb in error (DeviceFailed)",
            ),
            (
                change(
                    "cluster",
                    Health::healthy(),
                    Health::unknown("no gateway data for 200s (last poll failed: timeout)"),
                ),
                Level::Warn,
                "cluster: unknown: no gateway data for 200s (last poll failed: timeout) (was healthy)",
            ),
            (
                change("pool pd1/sp1", Health::degraded(vec![disk]), Health::healthy()),
                Level::Info,
                "pool pd1/sp1: healthy again (was degraded: device /dev/sdb in error (DeviceFailed))",
            ),
            (
                change("node h1", Health::default(), Health::healthy()),
                Level::Info,
                "node h1: healthy again (was unknown)",
            ),
            (
                change(
                    "node h1",
                    Health::healthy(),
                    Health::unknown(format!("{AWAITING_POLL}: the devices of h1 were attached")),
                ),
                Level::Info,
                "node h1: unknown: waiting for the gateway's next poll: the devices of h1 were \
                 attached (was healthy)",
            ),
        ];
        for (c, level, line) in cases {
            assert_eq!(change_line(&c), (level, line.to_string()));
        }
    }

    #[test]
    fn a_stale_deadline_already_reached_does_not_wake_the_dispatcher_again() {
        assert_eq!(due_after(None, 0), None);
        assert_eq!(due_after(Some(5_000), 1_000), Some(5_000));
        // Reassessed at 5,000 and the model still says 5,000: no wake-up loop.
        assert_eq!(due_after(Some(5_000), 5_000), None);
        assert_eq!(due_after(Some(4_000), 5_000), None);
    }
}
