//! The agent watcher thread: asks the master which agents exist, so that the dispatcher can
//! tell when every agent is covered (and SUPPRESS) and notice a new agent (and REVIVE).
//! Offers alone cannot tell: a suppressed framework is offered nothing.
//!
//! It reads `GET /master/slaves`, not `/master/state`: the state (every framework and task)
//! is the master's most expensive endpoint and outgrows any small cap in a mid-size cluster.
//! A non-leading master answers 307 to the leader, which is followed once.

use crate::mesos::client::{base_url, get_json_streamed, ClientConfig, ClientError};
use crate::scheduler::exchange::{Input, KnownAgent};
use crossbeam_channel::{Receiver, Sender};
use log::{debug, warn};
use serde::Deserialize;
use std::time::Duration;

/// Body cap of `/master/slaves`: a Mesos 1.x entry (resources, attributes, capabilities) is
/// one to three kilobytes, so this holds 10,000 agents with room to spare. The body is
/// parsed as it streams in, so the cap bounds time, not memory.
pub const MAX_AGENTS_BODY: u64 = 64 * 1024 * 1024;

/// The parts of `GET /master/slaves` (or `/master/state`) the watcher reads; everything else
/// in an entry (resources, attributes, ...) is skipped while parsing, so 10,000 agents cost
/// their ids and host names only (as a generic JSON value the body of 10,000
/// agents took some 60 MB).
#[derive(Debug, Default, Deserialize)]
pub struct AgentList {
    pid: Option<String>,
    leader: Option<String>,
    /// Mesos 1.x.
    slaves: Option<Vec<AgentEntry>>,
    /// Later Mesos.
    agents: Option<Vec<AgentEntry>>,
}

#[derive(Debug, Default, Deserialize)]
struct AgentEntry {
    id: Option<String>,
    hostname: Option<String>,
    active: Option<bool>,
}

/// Extracts the active agents from the master's answer.
pub fn parse_agents(state: AgentList) -> Result<Vec<KnownAgent>, String> {
    // A standby master answers with its own, empty, view: taking that for the cluster would
    // make every agent look covered and suppress offers wrongly.
    if let (Some(pid), Some(leader)) = (&state.pid, &state.leader) {
        if pid != leader {
            return Err(format!("{pid} is not the leading master ({leader} is)"));
        }
    }
    let list = state
        .slaves
        .or(state.agents)
        .ok_or("no `slaves` list in the master state")?;
    let mut out = Vec::with_capacity(list.len());
    for (i, a) in list.into_iter().enumerate() {
        // Inactive (deactivated or disconnected) agents cannot take a launch.
        if a.active == Some(false) {
            continue;
        }
        match (a.id, a.hostname) {
            (Some(id), Some(hostname)) => out.push(KnownAgent { id, hostname }),
            (id, host) => {
                return Err(format!(
                    "agent entry {i} (id {id:?}, hostname {host:?}) lacks its id or hostname"
                ))
            }
        }
    }
    Ok(out)
}

/// Polls `masters` every `every` until `stop` fires or the dispatcher goes away. The first
/// answering master wins (a non-leader answers with its own view, which is close enough to
/// decide on suppression; the leader is asked first whenever it is the first in the list).
pub fn run(
    masters: Vec<String>,
    config: ClientConfig,
    every: Duration,
    to: Sender<Input>,
    stop: Receiver<()>,
) {
    loop {
        for m in &masters {
            match list_agents(m, &config)
                .map_err(|e| e.to_string())
                .and_then(parse_agents)
            {
                Ok(agents) => {
                    debug!("master {m} lists {} active agents", agents.len());
                    if to.send(Input::Agents(agents)).is_err() {
                        return;
                    }
                    break;
                }
                Err(e) => warn!("cannot list agents from {m}: {e}"),
            }
        }
        if crate::scheduler::stop::wait(&stop, every) {
            return;
        }
    }
}

/// `GET /master/slaves` of `master`, following one redirect to the leader.
fn list_agents(master: &str, config: &ClientConfig) -> Result<AgentList, ClientError> {
    let get = |m: &str| {
        base_url(m).and_then(|base| {
            get_json_streamed(&format!("{base}/master/slaves"), config, MAX_AGENTS_BODY)
        })
    };
    match get(master) {
        Err(ClientError::Redirect { leader, .. }) => get(&leader),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_stop_channel_ends_the_poll_loop() {
        let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
        drop(stop_tx);
        let (tx, _rx) = crossbeam_channel::unbounded();
        let (done_tx, done_rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            run(
                vec!["127.0.0.1:1".into()],
                ClientConfig::default(),
                Duration::from_secs(30),
                tx,
                stop_rx,
            );
            let _ = done_tx.send(());
        });
        assert!(
            done_rx.recv_timeout(Duration::from_secs(5)).is_ok(),
            "the agent watcher kept polling after the stop"
        );
    }

    #[test]
    fn reads_active_agents_from_master_state() {
        let parse = |v: serde_json::Value| parse_agents(serde_json::from_value(v).unwrap());
        let state = serde_json::json!({
            "slaves": [
                {"id": "a1", "hostname": "h1", "active": true, "resources": {"cpus": 4.0}},
                {"id": "a2", "hostname": "h2", "active": false},
                {"id": "a3", "hostname": "h3"}
            ],
            "recovered_slaves": []
        });
        let agents = parse(state).unwrap();
        assert_eq!(
            agents.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
            ["a1", "a3"]
        );
        assert!(parse(serde_json::json!({})).is_err());
        let later = serde_json::json!({"agents": [{"id": "b1", "hostname": "g1"}]});
        assert_eq!(parse(later).unwrap()[0].hostname, "g1");
        let standby = serde_json::json!({
            "pid": "master@10.0.0.2:5050", "leader": "master@10.0.0.1:5050", "slaves": []
        });
        assert!(parse(standby)
            .unwrap_err()
            .contains("not the leading master"));
        let leader = serde_json::json!({
            "pid": "master@10.0.0.1:5050", "leader": "master@10.0.0.1:5050", "slaves": []
        });
        assert!(parse(leader).unwrap().is_empty());
        let e = parse(serde_json::json!({"slaves": [{"id": "x"}]})).unwrap_err();
        assert!(e.contains("entry 0") && e.contains("\"x\""), "{e}");
    }
}
