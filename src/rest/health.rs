//! `GET /api/health`: the storage cluster's health and every node that is not healthy, from
//! the view (the health module derived it; nothing is decided here). Also what each kind of
//! reason is called in `/metrics` and what an operator does about it on the page.
//!
//! ```json
//! {"state":"degraded","reasons":["..."],"read_ms":1700000000000,"mdm":{...},
//!  "pools":[{"protection_domain":"pd1","pool":"sp1","state":"degraded","reasons":["..."]}],
//!  "nodes":[{"agent_id":"...","hostname":"...","phase":"running","state":"degraded","reasons":["..."]}],
//!  "more":0}
//! ```
//!
//! `nodes` holds at most [`NODES_MAX`] nodes, degraded before unknown, each group by host
//! name; `more` counts the unhealthy nodes left out.

use super::paging::natural_cmp;
use crate::scheduler::exchange::View;
use crate::scheduler::health::reason_code;
use crate::scheduler::model::{HealthState, Node};
use serde_json::{json, Value};

/// The most nodes one answer lists: the answer stays small when a whole cluster is unknown.
pub(super) const NODES_MAX: usize = 1_000;

/// The `/api/health` answer.
pub(super) fn render(v: &View) -> Value {
    let model = &v.model;
    let cluster = &model.health;
    let pools: Vec<Value> = model
        .pools
        .iter()
        .map(|p| {
            json!({
                "protection_domain": p.protection_domain,
                "pool": p.pool,
                "state": p.health.state,
                "reasons": p.health.reasons,
            })
        })
        .collect();
    let mut unhealthy: Vec<&Node> = model
        .nodes
        .values()
        .filter(|n| !n.health.is_healthy())
        .collect();
    let more = unhealthy.len().saturating_sub(NODES_MAX);
    if more > 0 {
        unhealthy.select_nth_unstable_by(NODES_MAX, |a, b| order(a, b));
        unhealthy.truncate(NODES_MAX);
    }
    unhealthy.sort_unstable_by(|a, b| order(a, b));
    let nodes: Vec<Value> = unhealthy
        .iter()
        .map(|n| {
            json!({
                "agent_id": &*n.agent_id,
                "hostname": n.hostname,
                "phase": n.phase.as_str(),
                "state": n.health.state,
                "reasons": n.health.reasons,
            })
        })
        .collect();
    json!({
        "state": cluster.health.state,
        "reasons": cluster.health.reasons,
        "read_ms": cluster.read_ms,
        "mdm": cluster.mdm,
        "pools": pools,
        "nodes": nodes,
        "more": more,
    })
}

/// Degraded before unknown (a fault before missing data), then by host name.
fn order(a: &Node, b: &Node) -> std::cmp::Ordering {
    a.health
        .state
        .cmp(&b.health.state)
        .then_with(|| natural_cmp(&a.hostname, &b.hostname))
        .then_with(|| a.agent_id.cmp(&b.agent_id))
}

/// What a reason is about: its short name in `/metrics` (the health model's
/// [`reason_code`], the one place reasons are classified) and the operator's next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Kind(&'static str);

impl Kind {
    pub(super) const STALE: Kind = Kind("stale");
    pub(super) const WAITING: Kind = Kind("waiting");
    pub(super) const OTHER: Kind = Kind("other");

    pub(super) fn of(reason: &str) -> Kind {
        Kind(reason_code(reason))
    }

    /// The `reason` label of `storage_node_unhealthy`.
    pub(super) fn code(self) -> &'static str {
        self.0
    }

    /// What an operator does about it, in a few words.
    pub(super) fn advice(self) -> Option<&'static str> {
        Some(match self.0 {
            "sds_disconnected" => "check the SDS's host and its network to the MDMs",
            "sds_state" => "see the SDS's state at the gateway: it is not serving its data",
            "sdc_disconnected" => {
                "check the host's SDC (the scini module loaded) and its network to the MDMs"
            }
            "device_error" => "check or replace the disk; its data is rebuilt from the other copies meanwhile",
            "host_service" => "start the service on the host and read its log",
            "host_device" => "the disk is gone from the host: check its cabling or replace it",
            "host_reboot" => "check the host's console: it did not come back from its reboot",
            "volume_driver" => "restart REX-Ray on the host and read its log",
            "stale" => {
                "check that the gateway is up and reachable from the scheduler (and, for a node, that its executor runs)"
            }
            "waiting" => "nothing: the gateway poll that follows an attach settles it",
            "pool_full" => "add devices or nodes to the pool, or free space in its volumes",
            "pool_degraded" => {
                "wait for the rebuild to finish; take no other node of the protection domain down meanwhile"
            }
            "mdm" => "bring the missing MDM member back (its host, its network, its service)",
            _ => return None,
        })
    }
}

/// The short names of a node's reasons, each once; one alone when the node is unknown:
/// `waiting` when the next gateway poll settles it, else `stale`.
pub(super) fn node_codes(n: &Node) -> Vec<&'static str> {
    if n.health.state == HealthState::Unknown {
        let waiting = crate::scheduler::health::awaits_poll_only(&n.health);
        return vec![if waiting { Kind::WAITING } else { Kind::STALE }.code()];
    }
    let mut codes: Vec<&'static str> = n
        .health
        .reasons
        .iter()
        .map(|r| Kind::of(r).code())
        .collect();
    codes.sort_unstable();
    codes.dedup();
    if codes.is_empty() {
        codes.push(Kind::OTHER.code());
    }
    codes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::health::{HostCheck, HostProblem};
    use crate::scheduler::model::{ClusterModel, Health, HostHealth, Persona, PoolCapacity};

    fn node(i: usize, health: Health) -> Node {
        let mut n = Node::new(&format!("a{i}"), &format!("h{i}"), Persona::Data, 0);
        n.health = health;
        n
    }

    fn view(model: ClusterModel) -> View {
        View::of(model, 0)
    }

    #[test]
    fn lists_the_cluster_pools_and_only_unhealthy_nodes() {
        let mut m = ClusterModel::default();
        m.health.health = Health::degraded(vec![
            "MDM cluster ClusteredDegraded (2 of 3 members up)".into(),
        ]);
        m.health.read_ms = Some(1_000);
        m.health.mdm = Some(crate::scheduler::model::MdmStatus {
            cluster_state: Some("ClusteredDegraded".into()),
            good_nodes: Some(2),
            ..Default::default()
        });
        m.pools.push(PoolCapacity {
            protection_domain: "pd1".into(),
            pool: "sp1".into(),
            health: Health::degraded(vec!["pool pd1/sp1 is 91% used (warn at 80%)".into()]),
            ..Default::default()
        });
        for n in [
            node(1, Health::healthy()),
            node(2, Health::unknown("no host report for 200s")),
            node(
                10,
                Health::degraded(vec!["SDS sds-10 disconnected from the MDM".into()]),
            ),
            node(3, Health::degraded(vec!["service sds: not running".into()])),
        ] {
            m.nodes.insert(n.agent_id.clone(), n);
        }
        let j = render(&view(m));
        assert_eq!(j["state"], "degraded");
        assert_eq!(
            j["reasons"][0],
            "MDM cluster ClusteredDegraded (2 of 3 members up)"
        );
        assert_eq!(j["read_ms"], 1_000);
        assert_eq!(j["mdm"]["cluster_state"], "ClusteredDegraded");
        assert_eq!(
            j["pools"],
            json!([{"protection_domain": "pd1", "pool": "sp1", "state": "degraded",
                    "reasons": ["pool pd1/sp1 is 91% used (warn at 80%)"]}])
        );
        let hosts: Vec<&str> = j["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["hostname"].as_str().unwrap())
            .collect();
        assert_eq!(hosts, ["h3", "h10", "h2"], "degraded first, natural order");
        assert_eq!(
            j["nodes"][0],
            json!({"agent_id": "a3", "hostname": "h3", "phase": "launching",
                   "state": "degraded", "reasons": ["service sds: not running"]})
        );
        assert_eq!(j["more"], 0);
        // Before any poll: unknown, no data.
        let j = render(&view(ClusterModel::default()));
        assert_eq!(j["state"], "unknown");
        assert_eq!(j["read_ms"], Value::Null);
        assert_eq!(j["nodes"], json!([]));
    }

    #[test]
    fn a_cluster_of_unknown_nodes_is_listed_a_thousand_at_a_time() {
        let mut m = ClusterModel::default();
        for i in 0..2_500 {
            let h = if i == 2_499 {
                Health::degraded(vec!["SDS x disconnected from the MDM".into()])
            } else {
                Health::default()
            };
            let n = node(i, h);
            m.nodes.insert(n.agent_id.clone(), n);
        }
        let j = render(&view(m));
        let nodes = j["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), NODES_MAX);
        assert_eq!(j["more"], 1_500);
        assert_eq!(
            nodes[0]["hostname"], "h2499",
            "the degraded node is never left out"
        );
        assert_eq!(nodes[1]["hostname"], "h0");
        assert_eq!(nodes[999]["hostname"], "h998");
    }

    #[test]
    fn every_reason_has_a_short_name_and_most_an_advice() {
        let host = HostHealth {
            problems: vec![
                HostProblem::new(HostCheck::Module, "scini", "not loaded"),
                HostProblem::new(HostCheck::Device, "/dev/sdc", "missing"),
            ],
            reported_ms: 0,
        };
        for (reason, code) in [
            ("SDS sds-2 disconnected from the MDM", "sds_disconnected"),
            ("SDC 10.0.0.4 disconnected from the MDM", "sdc_disconnected"),
            ("device /dev/sdb in error (DeviceFailed)", "device_error"),
            ("service sds: not running", "host_service"),
            ("module scini: not loaded", "host_service"),
            ("device /dev/sdc: missing", "host_device"),
            ("volume driver rexray: not running", "volume_driver"),
            (
                "no gateway data for 200s (last poll failed: timeout)",
                "stale",
            ),
            (
                "waiting for the gateway's next poll: the devices of h2 were attached after the last one",
                "waiting",
            ),
            ("pool pd1/sp1 is 91% used (warn at 80%)", "pool_full"),
            (
                "pool pd1/sp1: 12.0 GiB degraded, rebuilding",
                "pool_degraded",
            ),
            ("MDM cluster ClusteredDegraded (2 of 3 members up)", "mdm"),
            ("SDS h2 is RemovePending", "sds_state"),
            (
                "host h2 not back from its reboot (reboot-final) in 15 min",
                "host_reboot",
            ),
            ("something new", "other"),
        ] {
            let kind = Kind::of(reason);
            assert_eq!(kind.code(), code, "{reason}");
            assert_eq!(kind.advice().is_some(), code != "other", "{reason}");
        }
        let mut n = node(
            1,
            Health::degraded(vec![
                "module scini: not loaded".into(),
                "service sds: not running".into(),
                "SDS sds-1 disconnected from the MDM".into(),
            ]),
        );
        n.host = Some(Box::new(host));
        assert_eq!(node_codes(&n), ["host_service", "sds_disconnected"]);
        n.health = Health::unknown("no host report for 200s");
        assert_eq!(node_codes(&n), ["stale"]);
        n.health = Health::unknown("waiting for the gateway's next poll: the devices of h1");
        assert_eq!(node_codes(&n), ["waiting"]);
    }
}
