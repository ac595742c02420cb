//! Offer mode: SUPPRESS when every known agent is covered, REVIVE when one needs a launch or
//! a rebooting host is due back under a new agent id.
//!
//! The master's filters outlive the offer mode: a covered agent is declined for an hour, and
//! what a launch leaves of its agent is refused as long by the ACCEPT, so an agent whose
//! executor fails later is not offered again until then, suppressed or not.
//! So a node that newly needs a launch always brings a REVIVE (which clears the filters),
//! rate-limited. The mode is believed only once the master took the call (the sender
//! reports each REVIVE/SUPPRESS); a lost one is sent again, and every SUBSCRIBED re-sends
//! the wanted mode.

use super::*;

/// At most one REVIVE per this long for nodes that newly need a launch.
const REVIVE_EVERY_MS: u64 = 5_000;
/// Wait before sending a REVIVE/SUPPRESS again after the master did not take it.
const MODE_RETRY_MS: u64 = 1_000;
/// How long offers stay revived for a host down for the reboot its executor claimed. The
/// master tells a framework of a new agent only by offering it, and a suppressed one hears of
/// it from the agent watcher's next poll (up to 30 s later, every rebooted host of a rollout
/// waiting for it); a host away longer than this is left to that poll, so that a host that
/// never comes back does not keep the framework revived.
const AWAIT_HOST_MS: u64 = 10 * 60 * 1000;
/// How long after SUBSCRIBED the agents without a node wait for the agent watcher's first
/// list before offers are revived for them unseen: the subscription leaves offers suppressed
/// (`subscription.rs`), the watcher lists the agents at once, and one that cannot list them
/// must not keep a new agent from its executor for longer than its own poll would.
const AGENT_LIST_WAIT_MS: u64 = 30_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Revived,
    Suppressed,
}

#[derive(Debug, Default)]
pub(super) struct OfferMode {
    /// What the master last took; `None` after SUBSCRIBED or a lost call: unknown.
    confirmed: Option<Mode>,
    /// Sent, outcome not yet reported.
    in_flight: Option<Mode>,
    /// Nodes that lost their launch -> when they may be relaunched: each owes a REVIVE
    /// then. (Tracked where coverage is lost rather than by comparing every agent's need
    /// after each batch, which would cost a pass over 10,000 agents per batch.)
    uncovered: BTreeMap<String, u64>,
    /// A node newly needs a launch: a REVIVE is owed even if offers are not suppressed.
    revive_owed: bool,
    last_revive_ms: Option<u64>,
    retry_at_ms: Option<u64>,
    /// The last SUBSCRIBED.
    subscribed_ms: Option<u64>,
}

impl OfferMode {
    pub(super) fn suppressed(&self) -> bool {
        self.confirmed == Some(Mode::Suppressed)
    }

    /// A new subscription: what the master believes is unknown, so the wanted mode is sent
    /// again; agents needing a launch now are covered by that.
    pub(super) fn subscribed(&mut self, now: u64) {
        *self = OfferMode {
            last_revive_ms: self.last_revive_ms,
            uncovered: std::mem::take(&mut self.uncovered),
            subscribed_ms: Some(now),
            ..OfferMode::default()
        };
    }

    /// When agents no list has shown yet count as needing offers.
    fn agent_list_due(&self) -> Option<u64> {
        self.subscribed_ms.map(|t| t + AGENT_LIST_WAIT_MS)
    }

    /// `agent`'s node lost its launch; it may be relaunched from `due_ms`.
    pub(super) fn uncovered(&mut self, agent: &str, due_ms: u64) {
        self.uncovered.insert(agent.to_owned(), due_ms);
    }

    /// The agent watcher saw an agent without a node for the first time.
    pub(super) fn new_agent(&mut self) {
        self.revive_owed = true;
    }

    /// When the dispatcher must look again (a rate-limited REVIVE, a retry).
    pub(super) fn deadline(&self) -> Option<u64> {
        let revive = self
            .revive_owed
            .then(|| self.last_revive_ms.map(|t| t + REVIVE_EVERY_MS))
            .flatten();
        let uncovered = self.uncovered.values().min().copied();
        [revive, self.retry_at_ms, uncovered]
            .into_iter()
            .flatten()
            .min()
    }
}

impl Dispatcher {
    /// Whether some agent the master lists needs a launch now (no node, or not covered and
    /// not in backoff), or a host down for its reboot is due back under a new agent id.
    /// Until the agent watcher has reported, agents without a node are unknown: only the
    /// nodes count, and after `AGENT_LIST_WAIT_MS` without a list, yes.
    pub(super) fn needs_offers(&self, now: u64) -> bool {
        let model = &self.state.model;
        // A node's agent is listed unless it is marked gone (`retire_gone_nodes`).
        // While paused no agent without a node is launched on.
        let new_agent = match &self.unmanaged_agents {
            Some(unmanaged) => {
                !model.paused && unmanaged.iter().any(|id| !model.nodes.contains_key(id))
            }
            None => self.offer_mode.agent_list_due().is_none_or(|t| now >= t),
        };
        // A rebooting host's old agent is gone (unlisted) until its new one takes the node.
        let host_since = now.saturating_sub(AWAIT_HOST_MS);
        new_agent
            || model.nodes.values().any(|n| {
                (n.gone_since_ms.is_none() && n.awaits_launch(now)) || n.awaits_host(host_since)
            })
    }

    /// The earliest deadline still ahead: a relaunch, the offer mode, reconciliation, data
    /// turning stale.
    pub(super) fn next_deadline(&self) -> Option<u64> {
        let now = self.clock.now_ms();
        let relaunch = self.node_deadlines(now).relaunch;
        let agent_list = self
            .unmanaged_agents
            .is_none()
            .then(|| self.offer_mode.agent_list_due())
            .flatten()
            .filter(|t| *t > now);
        [
            relaunch,
            agent_list,
            self.offer_mode.deadline(),
            self.reconcile_deadline(),
            self.reannounce_deadline(),
            self.health_deadline(),
            self.owed_walk_deadline(),
        ]
        .into_iter()
        .flatten()
        .map(|t| t.max(now))
        .min()
    }

    /// The deadlines only a walk of every node finds, walked again only once a node was
    /// written (or the earliest relaunch passed): `next_deadline` runs before every batch,
    /// and at 10,000 idle executors these two walks were a fifth of the dispatcher's CPU.
    /// While a walk is owed (`batch.rs`) they are not walked again either: its deadline, at
    /// most one gap away, is the latest a deadline written meanwhile is seen, and under a
    /// stream of reports these walks after every batch were the dispatcher's largest cost.
    pub(super) fn node_deadlines(&self, now: u64) -> NodeDeadlines {
        let revision = self.state.model.nodes.stamp();
        if let Some(d) = self.node_deadlines.get() {
            let current = d.revision == revision || self.walk_owed;
            if current && d.relaunch.is_none_or(|t| t > now) {
                return d;
            }
        }
        let nodes = || self.state.model.nodes.values();
        let d = NodeDeadlines {
            revision,
            relaunch: nodes()
                .filter(|n| !n.covered())
                .filter_map(|n| n.retry_after_ms)
                .filter(|t| *t > now)
                .min(),
            staging: nodes()
                .filter_map(|n| n.task.as_ref())
                .filter(|t| t.state == TaskState::Staging)
                .map(|t| t.launched_at_ms + super::reconcile::STAGING_TIMEOUT_MS)
                .min(),
        };
        self.node_deadlines.set(Some(d));
        d
    }

    /// SUPPRESS when every agent is covered (or waiting out its backoff); REVIVE when one
    /// needs us, and again (rate-limited) whenever a node newly needs a launch. Only while
    /// subscribed: the calls need a stream.
    pub(super) fn reconsider_offers(&mut self) {
        if !self.subscribed {
            return;
        }
        let now = self.clock.now_ms();
        let want = if self.needs_offers(now) {
            Mode::Revived
        } else {
            Mode::Suppressed
        };
        // Nodes whose relaunch is due and that still need it owe a REVIVE.
        let due: Vec<String> = self
            .offer_mode
            .uncovered
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(a, _)| a.clone())
            .collect();
        for agent in due {
            self.offer_mode.uncovered.remove(&agent);
            let needs = self
                .state
                .model
                .nodes
                .get(&agent)
                .is_some_and(|n| n.awaits_launch(now));
            if needs {
                self.offer_mode.revive_owed = true;
            }
        }
        let mode = &mut self.offer_mode;
        if want == Mode::Suppressed {
            mode.revive_owed = false;
        }
        if mode.in_flight.is_some() || mode.retry_at_ms.is_some_and(|t| t > now) {
            return;
        }
        let send = match want {
            Mode::Suppressed => mode.confirmed != Some(Mode::Suppressed),
            Mode::Revived => {
                mode.confirmed != Some(Mode::Revived)
                    || (mode.revive_owed
                        && mode
                            .last_revive_ms
                            .is_none_or(|t| now >= t + REVIVE_EVERY_MS))
            }
        };
        if !send {
            return;
        }
        mode.in_flight = Some(want);
        mode.retry_at_ms = None;
        let t = match want {
            Mode::Revived => {
                info!("reviving offers: an agent needs a storage executor");
                mode.revive_owed = false;
                mode.last_revive_ms = Some(now);
                call::Type::Revive
            }
            Mode::Suppressed => {
                info!("every agent is covered: suppressing offers");
                call::Type::Suppress
            }
        };
        let c = self.call(t);
        self.pending.push(c);
    }

    /// The master took (or did not take) a REVIVE or SUPPRESS.
    pub(super) fn on_mode_outcome(&mut self, sent: Mode, error: Option<&str>) {
        let mode = &mut self.offer_mode;
        mode.in_flight = None;
        match error {
            None => mode.confirmed = Some(sent),
            Some(e) => {
                warn!("{sent:?} call was not taken ({e}); sending it again");
                mode.confirmed = None;
                mode.retry_at_ms = Some(self.clock.now_ms() + MODE_RETRY_MS);
                if sent == Mode::Revived {
                    mode.revive_owed = true;
                }
            }
        }
        self.touch_view();
    }
}

/// What [`Dispatcher::node_deadlines`] found, at which `Nodes::stamp`:
/// without a node written, added or removed since, the nodes are the same (a relaunch's time
/// filters on `now`, so it is kept only while it lies ahead).
#[derive(Debug, Clone, Copy)]
pub(super) struct NodeDeadlines {
    revision: (u64, usize),
    /// The earliest relaunch still ahead.
    pub relaunch: Option<u64>,
    /// When the earliest launch still staging times out.
    pub staging: Option<u64>,
}
