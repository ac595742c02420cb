//! Nodes follow hosts, not agent ids. A rebooted host (the framework reboots hosts itself)
//! comes back as an agent with a new id: its node moves to the new id with its persona,
//! layout, devices and attachments, and its old launch is counted gone with the old agent.
//! A node whose agent has been gone longer than a grace period is retired, so that its
//! persona is free again.

use super::*;

/// `(old agent id, new agent id)` for each node whose host now has an agent without a node.
///
/// A new agent id on a node's hostname proves the node's agent gone: Mesos gives a host's
/// agent a new id only when the agent could not recover the old one's state (the host
/// rebooted, or its work dir was wiped), and the old agent's executors died with the host,
/// whether the master still calls the old agent unreachable or has removed it. So the node
/// moves, and its task there is over, even while Mesos reports it TASK_UNREACHABLE (which it
/// keeps doing for weeks, until its registry forgets the old agent).
///
/// `agents` are `(agent id, hostname)` as the master names them now, `nodes` the same of the
/// nodes; `has_node` says whether an agent id has a node. One pass over the nodes, nothing
/// copied but what moves (a launch wave asks this for every few hundred offers of thousands
/// of new agents).
pub(super) fn host_moves<'a, 'n>(
    agents: impl Iterator<Item = (&'a str, &'a str)>,
    nodes: impl Iterator<Item = (&'n str, &'n str)>,
    has_node: impl Fn(&str) -> bool,
) -> Vec<(String, String)> {
    // Host -> new agent id, of the agents without a node (all of a launch wave's).
    let mut unknown: HashMap<&str, &str> = HashMap::new();
    for (agent, host) in agents {
        if !has_node(agent) {
            unknown.insert(host, agent);
        }
    }
    if unknown.is_empty() {
        return Vec::new();
    }
    nodes
        .filter_map(|(old, host)| {
            // A new agent takes over one node (the first of its host, should two share it).
            let new = unknown.remove(host)?;
            Some((old.to_owned(), new.to_owned()))
        })
        .collect()
}

/// How long a node may have no agent in the master's list before it is retired.
pub(super) const RETIRE_AFTER_MS: u64 = 24 * 60 * 60 * 1000;

impl Dispatcher {
    /// Moves the node of each `(agent id, hostname)` whose host is known under another
    /// agent id to the new id. Agents that already have a node are left alone.
    pub(super) fn follow_hosts<'a>(&mut self, agents: impl Iterator<Item = (&'a str, &'a str)>) {
        let now = self.clock.now_ms();
        let nodes = &self.state.model.nodes;
        let moves = host_moves(
            agents,
            nodes.values().map(|n| (&*n.agent_id, n.hostname.as_str())),
            |agent| nodes.contains_key(agent),
        );
        for (old, new) in moves {
            self.move_node(&old, &new, now);
        }
    }

    fn move_node(&mut self, old: &str, new: &str, now: u64) {
        let rebooted = self.reboot_asked(old);
        let Some(mut node) = self.state.model.nodes.remove(old) else {
            return;
        };
        info!(
            "{}: its agent came back as {new} (was {old}{}); the node moves with its persona {}, {} devices, {} attached",
            node.hostname,
            if rebooted { ", rebooted as its executor asked" } else { "" },
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
        if !rebooted && !node.decommissioned {
            // A reboot asked for keeps its phase: the next launch resumes after it; a
            // decommissioned node is not launched at all.
            node.phase = Phase::Lost;
            node.last_error =
                Some(format!("agent {old} was replaced by {new} (host restarted)").into());
        }
        // A new agent is a new start for the failure budget too.
        super::op_plan::forgive(&mut node);
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
            // A decommissioned node stays, so that its host is never launched on again.
            if now.saturating_sub(since) >= RETIRE_AFTER_MS
                && !node.covered()
                && !node.decommissioned
            {
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

#[cfg(test)]
mod tests {
    use super::host_moves;

    fn moves(agents: &[(&str, &str)], nodes: &[(&str, &str)]) -> Vec<(String, String)> {
        host_moves(agents.iter().copied(), nodes.iter().copied(), |a| {
            nodes.iter().any(|(id, _)| *id == a)
        })
    }

    fn pair(old: &str, new: &str) -> (String, String) {
        (old.to_string(), new.to_string())
    }

    #[test]
    fn a_new_agent_id_on_a_nodes_host_takes_the_node_over() {
        // The old agent may be listed no more (removed) or still be (unreachable): either way
        // the new id on its host proves it gone.
        let nodes = [("S0", "host-a"), ("S1", "host-b")];
        assert_eq!(moves(&[("S7", "host-a")], &nodes), [pair("S0", "S7")]);
        assert_eq!(
            moves(
                &[("S0", "host-a"), ("S7", "host-a"), ("S1", "host-b")],
                &nodes
            ),
            [pair("S0", "S7")]
        );
    }

    #[test]
    fn known_agents_and_new_hosts_move_nothing() {
        let nodes = [("S0", "host-a")];
        assert!(moves(&[("S0", "host-a")], &nodes).is_empty());
        assert!(moves(&[("S9", "host-z")], &nodes).is_empty());
        assert!(moves(&[], &nodes).is_empty());
        assert!(moves(&[("S9", "host-a")], &[]).is_empty());
    }

    #[test]
    fn one_host_never_gets_two_nodes_moved_onto_it() {
        // Two nodes on one host (left by an older version): one moves, the other stays to be
        // retired with its gone agent.
        let nodes = [("S0", "host-a"), ("S1", "host-a")];
        assert_eq!(moves(&[("S7", "host-a")], &nodes).len(), 1);
        // Two new agents on one host: one node, so one move.
        let got = moves(&[("S7", "host-a"), ("S8", "host-a")], &[("S0", "host-a")]);
        assert_eq!(got.len(), 1, "{got:?}");
    }
}
