//! Nodes follow hosts, not agent ids. A rebooted host (the framework reboots hosts itself)
//! comes back as an agent with a new id: its node moves to the new id with its persona,
//! layout, devices and attachments, and its old launch is counted gone with the old agent.
//! A node whose agent has been gone longer than a grace period is retired, so that its
//! persona is free again.

use super::*;

/// How long a node may have no agent in the master's list before it is retired.
pub(super) const RETIRE_AFTER_MS: u64 = 24 * 60 * 60 * 1000;

impl Dispatcher {
    /// Moves the node of each `(agent id, hostname)` whose host is known under another
    /// agent id to the new id. Agents that already have a node are left alone.
    pub(super) fn follow_hosts<'a>(&mut self, agents: impl Iterator<Item = (&'a str, &'a str)>) {
        let now = self.clock.now_ms();
        // Host -> new agent id, of the agents without a node (all of a launch wave's).
        let mut unknown: HashMap<&str, &str> = HashMap::new();
        for (agent, host) in agents {
            if !self.state.model.nodes.contains_key(agent) {
                unknown.insert(host, agent);
            }
        }
        if unknown.is_empty() {
            return;
        }
        // One pass over the nodes, nothing copied but what moves (a wave asks this for every
        // few hundred offers of thousands of new agents).
        let moves: Vec<(String, String)> = self
            .state
            .model
            .nodes
            .values()
            .filter_map(|n| {
                // A new agent takes over one node (the first of its host, should two share it).
                let new = unknown.remove(n.hostname.as_str())?;
                Some((n.agent_id.to_string(), new.to_owned()))
            })
            .collect();
        for (old, new) in moves {
            self.move_node(&old, &new, now);
        }
    }

    fn move_node(&mut self, old: &str, new: &str, now: u64) {
        let Some(mut node) = self.state.model.nodes.remove(old) else {
            return;
        };
        info!(
            "{}: its agent came back as {new} (was {old}); the node moves with its persona {}, {} devices, {} attached",
            node.hostname,
            node.persona,
            node.devices.len(),
            node.attached.len()
        );
        if let Some(task) = node.task.as_mut() {
            if task.is_active() {
                // Its agent is gone, and the executor with it.
                task.state = TaskState::Gone;
                self.revoke_secret(task);
            }
        }
        node.agent_id = new.into();
        node.phase = Phase::Lost;
        node.last_error =
            Some(format!("agent {old} was replaced by {new} (host restarted)").into());
        node.retry_after_ms = None;
        node.gone_since_ms = None;
        node.updated_ms = now;
        self.state.model.nodes.insert(new, node);
        self.offer_mode.uncovered(new, now);
        self.dirty = true;
        self.touch_view();
    }

    /// Marks nodes whose agent the master no longer lists, and retires those gone longer
    /// than [`RETIRE_AFTER_MS`].
    pub(super) fn retire_gone_nodes(&mut self, known: &HashSet<&str>) {
        let now = self.clock.now_ms();
        let mut retire = Vec::new();
        for mut node in self.state.model.nodes.values_mut() {
            if known.contains(&*node.agent_id) {
                // Read first: a write copies a node a view shares.
                if node.gone_since_ms.is_some() {
                    node.gone_since_ms = None;
                    self.dirty = true;
                }
                continue;
            }
            let since = *node.gone_since_ms.get_or_insert_with(|| {
                self.dirty = true;
                now
            });
            if now.saturating_sub(since) >= RETIRE_AFTER_MS && !node.covered() {
                retire.push(node.agent_id.to_string());
            }
        }
        for agent in retire {
            if let Some(mut node) = self.state.model.nodes.remove(&agent) {
                warn!(
                    "{}: agent {agent} gone for over {} h; retiring the node (persona {} is free again)",
                    node.hostname,
                    RETIRE_AFTER_MS / 3_600_000,
                    node.persona
                );
                if let Some(t) = node.task.as_mut() {
                    self.revoke_secret(t);
                }
                self.dirty = true;
                self.touch_view();
            }
        }
    }
}
