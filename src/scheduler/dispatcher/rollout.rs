//! The lifecycle's inputs reach it here: the declared target at start, and after every batch
//! the waiting asks of running nodes, decided by `scheduler/rollout/` (the vendor's order and
//! the disruption budget) and written into the nodes' walks, whose plans then carry the
//! grant or the reason. One log line per grant and per changed reason.

use super::Dispatcher;
use crate::scheduler::health::gate::{self, GateSettings};
use crate::scheduler::model::{Step, StepState};
use crate::scheduler::rollout::decide::{self, Decision};
use crate::scheduler::rollout::target::{self, Declared};
use log::info;

/// At most this often a waiting step asks the gateway worker for a poll.
const POLL_ASK_GAP_MS: u64 = 250;

impl Dispatcher {
    /// What the disruption budget needs besides the model.
    pub fn set_gate_settings(&mut self, settings: GateSettings) {
        self.executors
            .set_max_disrupted_per_domain(settings.max_disrupted_per_domain);
        self.gate = settings;
    }

    /// The target this start declares; a change starts the next generation (saved with the
    /// first batch), which every running node then walks to.
    pub fn declare_target(&mut self, declared: &Declared<'_>) {
        let stored = &self.state.model.target;
        let next = target::advance(stored, declared);
        if &next == stored {
            info!(
                "target generation {} (unchanged since the last start)",
                next.generation
            );
            return;
        }
        info!(
            "target generation {} ({}; was {})",
            next.generation,
            next.change.map_or("first", |k| k.as_str()),
            next.previous
        );
        let message = format!(
            "{} since the last start",
            next.change.map_or("first", |k| k.as_str())
        );
        let generation = format!("generation {}", next.generation);
        self.state.model.target = next;
        self.note_plan_change("target", "plan", &generation, message);
        self.forgive_all();
        self.dirty = true;
        self.touch_view();
    }

    /// After a health poll: the disruptive steps under way or just ended whose outage the
    /// poll shows are marked seen (the budget then counts them back at the first clean poll).
    pub(super) fn note_outages(&mut self) {
        let target = self.state.model.target.generation;
        let seen: Vec<(std::sync::Arc<str>, Step)> = self
            .state
            .model
            .nodes
            .values()
            .filter_map(|n| {
                let walk = n.rollout.as_deref().filter(|r| r.generation == target)?;
                let s = walk.steps.iter().find(|s| {
                    s.step.disruptive()
                        && !s.seen_disrupted
                        && matches!(s.state, StepState::InProgress | StepState::Done)
                })?;
                gate::shows_disruption(&self.state.model, n, &self.gate)
                    .then(|| (n.agent_id.clone(), s.step))
            })
            .collect();
        for (agent, step) in seen {
            if let Some(node) = self.state.model.nodes.get_mut(&agent) {
                let walk = node.rollout.as_deref_mut();
                if let Some(s) = walk.and_then(|w| w.step_mut(step)) {
                    s.seen_disrupted = true;
                }
                node.updated_ms = self.clock.now_ms();
            }
            self.dirty = true;
        }
    }

    /// Decides every waiting ask and writes the answers into the nodes.
    pub(super) fn regrant(&mut self) {
        let decisions = decide::decide_all(&self.state.model, &self.gate);
        let mut changed = false;
        let mut awaits_gateway = false;
        for d in decisions {
            awaits_gateway |= d.awaits_gateway;
            changed |= self.apply(d);
        }
        let now = self.clock.now_ms();
        if awaits_gateway && now >= self.poll_asked_ms + POLL_ASK_GAP_MS {
            // A rebuild is watched closer than the health interval while a step waits on
            // it; the worker spaces these polls further (`poll_settle`).
            self.poll_asked_ms = now;
            self.storage.poll_soon();
        }
        if changed {
            self.dirty = true;
            self.touch_view();
        }
    }

    fn apply(&mut self, d: Decision) -> bool {
        let Some(node) = self.state.model.nodes.get_mut(&d.agent) else {
            return false;
        };
        let host = node.hostname.clone();
        let Some(walk) = node.rollout.as_deref_mut() else {
            return false;
        };
        match d.answer {
            Ok(()) => {
                walk.granted = Some(d.step);
                if let Some(s) = walk.step_mut(d.step) {
                    s.state = StepState::InProgress;
                    s.reason = None;
                }
                info!(
                    "node {host}: may start {} (generation {})",
                    d.step, walk.generation
                );
            }
            Err(why) => {
                let Some(s) = walk.step_mut(d.step) else {
                    return false;
                };
                if s.reason.as_deref() == Some(why.0.as_str()) {
                    return false;
                }
                info!("node {host}: {} {why}", d.step);
                s.reason = Some(why.0);
            }
        }
        node.updated_ms = self.clock.now_ms();
        true
    }
}
