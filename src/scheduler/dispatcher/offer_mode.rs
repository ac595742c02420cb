//! Offer mode: SUPPRESS when every known agent is covered, REVIVE when one needs a launch.

use super::*;

impl Dispatcher {
    /// Whether some agent needs a launch now (not in backoff).
    pub(super) fn needs_offers(&self, now: u64) -> bool {
        let Some(known) = &self.known_agents else {
            return true;
        };
        let model = &self.state.model;
        known.keys().any(|id| match model.nodes.get(id) {
            None => true,
            Some(n) => !n.covered() && n.retry_after_ms.is_none_or(|t| t <= now),
        })
    }

    /// The earliest relaunch deadline still ahead, if any node waits on one.
    pub(super) fn next_deadline(&self) -> Option<u64> {
        let now = self.clock.now_ms();
        self.state
            .model
            .nodes
            .values()
            .filter(|n| !n.covered())
            .filter_map(|n| n.retry_after_ms)
            .filter(|t| *t > now)
            .min()
    }

    /// SUPPRESS when every agent is covered (or waiting out its backoff); REVIVE when one
    /// needs us. Only while subscribed: the calls need a stream.
    pub(super) fn reconsider_offers(&mut self) {
        if !self.subscribed {
            return;
        }
        let needs = self.needs_offers(self.clock.now_ms());
        if needs && self.suppressed {
            info!("reviving offers: an agent needs a storage executor");
            let c = self.call(call::Type::Revive);
            self.pending.push(c);
            self.suppressed = false;
            self.touch_view();
        } else if !needs && !self.suppressed {
            info!("every agent is covered: suppressing offers");
            let c = self.call(call::Type::Suppress);
            self.pending.push(c);
            self.suppressed = true;
            self.touch_view();
        }
    }
}
