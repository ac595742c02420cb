//! The storage cluster's health in `/metrics`: a table of families computed from the view.
//! Like the pools' capacity, the names are not prefixed (`storage_*`): they describe the
//! storage cluster, not the scheduler.

use super::health::node_codes;
use super::prom::label;
use crate::scheduler::exchange::View;
use crate::scheduler::model::{HealthState, Phase, PoolCapacity};
use std::fmt::Write;

/// A sample's labels (`a="x"`, escaped; empty for none) and value.
pub(super) type Sample = (String, String);

/// A `storage_*` gauge family computed from the view (and the time, in ms).
pub(super) struct Family {
    pub name: &'static str,
    pub help: &'static str,
    /// `None`: the family is left out (no data of its kind yet).
    pub samples: fn(&View, u64) -> Option<Vec<Sample>>,
}

const STATES: [HealthState; 3] = [
    HealthState::Healthy,
    HealthState::Degraded,
    HealthState::Unknown,
];

/// The MDM cluster states a dashboard may select on: each always has a sample.
const MDM_STATES: [&str; 3] = ["ClusteredNormal", "ClusteredDegraded", "NotClustered"];

pub(super) fn one(value: impl ToString) -> Option<Vec<Sample>> {
    Some(vec![(String::new(), value.to_string())])
}

/// `{state="..."}` 1 for `current`, 0 for the others.
fn one_of<'a>(all: impl Iterator<Item = &'a str>, current: &str) -> Vec<Sample> {
    all.map(|s| {
        (
            format!("state=\"{}\"", label(s)),
            u8::from(s == current).to_string(),
        )
    })
    .collect()
}

fn count(v: &View, f: impl Fn(&crate::scheduler::model::Node) -> bool) -> Option<Vec<Sample>> {
    one(v.model.nodes.values().filter(|n| f(n)).count())
}

fn sds_connection(n: &crate::scheduler::model::Node) -> Option<&str> {
    n.storage.as_ref()?.sds.as_ref()?.mdm_connection.as_deref()
}

fn per_pool(v: &View, field: fn(&PoolCapacity) -> u64) -> Option<Vec<Sample>> {
    if v.model.pools.is_empty() {
        return None;
    }
    let pools = v.model.pools.iter();
    Some(
        pools
            .map(|p| {
                (
                    format!(
                        "protection_domain=\"{}\",pool=\"{}\"",
                        label(&p.protection_domain),
                        label(&p.pool)
                    ),
                    field(p).to_string(),
                )
            })
            .collect(),
    )
}

const FAMILIES: &[Family] = &[
    Family {
        name: "health_state",
        help: "The storage cluster's health: 1 for its state (healthy, degraded, unknown), 0 for the others.",
        samples: |v, _| {
            let states = STATES.iter().map(|s| s.as_str());
            Some(one_of(states, v.model.health.health.state.as_str()))
        },
    },
    Family {
        name: "nodes_health",
        help: "Nodes by health.",
        samples: |v, _| {
            let nodes = || v.model.nodes.values();
            let samples = STATES.iter().map(|s| {
                let n = nodes().filter(|n| n.health.state == *s).count();
                (format!("state=\"{}\"", s.as_str()), n.to_string())
            });
            Some(samples.collect())
        },
    },
    Family {
        name: "sds_connected",
        help: "Nodes whose SDS the gateway shows connected to the MDM.",
        samples: |v, _| count(v, |n| sds_connection(n) == Some("Connected")),
    },
    Family {
        name: "sds_disconnected",
        help: "Nodes whose SDS the gateway shows not connected to the MDM.",
        samples: |v, _| count(v, |n| sds_connection(n).is_some_and(|c| c != "Connected")),
    },
    Family {
        name: "sdc_connected",
        help: "Running nodes whose SDC the gateway shows connected.",
        samples: |v, _| count(v, |n| n.phase == Phase::Running && n.sdc_connected),
    },
    Family {
        name: "sdc_disconnected",
        help: "Running nodes whose SDC the gateway does not show connected.",
        samples: |v, _| count(v, |n| n.phase == Phase::Running && !n.sdc_connected),
    },
    Family {
        name: "device_errors",
        help: "Devices the gateway shows in error (deviceState Error, or an errorState other than None).",
        samples: |v, _| {
            let devices = v.model.nodes.values().filter_map(|n| n.storage.as_ref());
            let errors = devices
                .flat_map(|s| s.devices.iter())
                .filter(|d| {
                    d.state.as_deref() == Some("Error")
                        || d.error.as_deref().is_some_and(|e| e != "None")
                })
                .count();
            one(errors)
        },
    },
    Family {
        name: "pool_degraded_bytes",
        help: "Data of the pool with a copy missing (degraded healthy and degraded failed).",
        samples: |v, _| per_pool(v, |p| p.degraded_healthy_bytes + p.degraded_failed_bytes),
    },
    Family {
        name: "pool_rebuilding_bytes",
        help: "Data of the pool waiting to be rebuilt or moving now (pending rebuild and moving).",
        samples: |v, _| per_pool(v, |p| p.pending_rebuild_bytes + p.moving_bytes),
    },
    Family {
        name: "pool_failed_bytes",
        help: "Data of the pool with no copy left.",
        samples: |v, _| per_pool(v, |p| p.failed_bytes),
    },
    Family {
        name: "mdm_cluster_state",
        help: "The MDM cluster's state as the gateway names it: 1 for the current one, 0 for the others.",
        samples: |v, _| {
            let current = v.model.health.mdm.as_ref()?.cluster_state.as_deref()?;
            let mut states: Vec<&str> = MDM_STATES.to_vec();
            if !states.contains(&current) {
                states.push(current);
            }
            Some(one_of(states.into_iter(), current))
        },
    },
    Family {
        name: "mdm_members_up",
        help: "Members of the MDM cluster that are up (the gateway's goodNodesNum).",
        samples: |v, _| {
            let mdm = v.model.health.mdm.as_ref()?;
            let up = mdm.good_nodes.map(|n| n as usize).unwrap_or_else(|| {
                let members = mdm.members.iter();
                members
                    .filter(|m| m.status.as_deref().is_none_or(|s| s == "Normal"))
                    .count()
            });
            one(up)
        },
    },
    Family {
        name: "health_data_age_seconds",
        help: "Seconds since the gateway last answered a health poll (absent before the first).",
        samples: |v, now_ms| {
            let read = v.model.health.read_ms?;
            one(format!("{:.3}", now_ms.saturating_sub(read) as f64 / 1000.0))
        },
    },
    Family {
        name: "node_unhealthy",
        help: "1 for each node that is not healthy, by host and kind of reason (sds_disconnected, sdc_disconnected, device_error, host_service, host_device, volume_driver, stale).",
        samples: |v, _| {
            let mut out = Vec::new();
            for n in v.model.nodes.values().filter(|n| !n.health.is_healthy()) {
                for code in node_codes(n) {
                    let labels = format!("host=\"{}\",reason=\"{code}\"", label(&n.hostname));
                    out.push((labels, "1".to_string()));
                }
            }
            Some(out)
        },
    },
];

/// Writes every health family with samples, then the plan's.
pub(super) fn write(out: &mut String, v: &View, now_ms: u64) {
    for f in FAMILIES.iter().chain(super::prom_plan::FAMILIES) {
        let Some(samples) = (f.samples)(v, now_ms) else {
            continue;
        };
        let name = f.name;
        let _ = writeln!(out, "# HELP storage_{name} {}", f.help);
        let _ = writeln!(out, "# TYPE storage_{name} gauge");
        for (labels, value) in samples {
            if labels.is_empty() {
                let _ = writeln!(out, "storage_{name} {value}");
            } else {
                let _ = writeln!(out, "storage_{name}{{{labels}}} {value}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::health::{HostCheck, HostProblem};
    use crate::scheduler::model::{
        ClusterModel, DeviceStatus, Health, HostHealth, MdmMemberStatus, MdmStatus, Node,
        NodeStorage, Persona, SdsStatus,
    };
    use std::sync::Arc;

    /// A cluster with a bit of everything wrong, set by hand.
    fn troubled() -> ClusterModel {
        let mut m = ClusterModel::default();
        m.health.health = Health::degraded(vec![
            "MDM cluster ClusteredDegraded (2 of 3 members up)".into(),
        ]);
        m.health.read_ms = Some(10_000);
        m.health.mdm = Some(MdmStatus {
            cluster_state: Some("ClusteredDegraded".into()),
            members: vec![
                MdmMemberStatus {
                    role: "primary".into(),
                    ..Default::default()
                },
                MdmMemberStatus {
                    role: "secondary".into(),
                    status: Some("Disconnected".into()),
                    ..Default::default()
                },
                MdmMemberStatus {
                    role: "tie-breaker".into(),
                    status: Some("Normal".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        m.pools.push(PoolCapacity {
            protection_domain: "pd\"1".into(),
            pool: "sp1".into(),
            degraded_healthy_bytes: 1 << 30,
            degraded_failed_bytes: 1,
            pending_rebuild_bytes: 100,
            moving_bytes: 20,
            failed_bytes: 3,
            ..Default::default()
        });
        let storage = |sds: &str, conn: &str, devices: Vec<DeviceStatus>| {
            Some(Arc::new(NodeStorage {
                sds: Some(SdsStatus {
                    id: sds.into(),
                    mdm_connection: Some(conn.into()),
                    ..Default::default()
                }),
                devices,
            }))
        };
        let device = |path: &str, state: &str, error: &str| DeviceStatus {
            path: path.into(),
            state: Some(state.into()),
            error: Some(error.into()),
            ..Default::default()
        };
        let mut n1 = Node::new("a1", "h1", Persona::Data, 0);
        n1.phase = Phase::Running;
        n1.sdc_connected = true;
        n1.health = Health::healthy();
        n1.storage = storage(
            "s1",
            "Connected",
            vec![device("/dev/sdb", "Normal", "None")],
        );
        let mut n2 = Node::new("a2", "h2", Persona::Data, 0);
        n2.phase = Phase::Running;
        n2.health = Health::degraded(vec![
            "SDS s2 disconnected from the MDM".into(),
            "device /dev/sdb in error (DeviceFailed)".into(),
            "service sds: not running".into(),
        ]);
        n2.storage = storage(
            "s2",
            "Disconnected",
            vec![
                device("/dev/sdb", "Error", "DeviceFailed"),
                device("/dev/sdc", "Normal", "None"),
            ],
        );
        n2.host = Some(Box::new(HostHealth {
            problems: vec![HostProblem::new(HostCheck::Service, "sds", "not running")],
            reported_ms: 0,
        }));
        let mut n3 = Node::new("a3", "h\\3", Persona::Data, 0);
        n3.health = Health::unknown("no host report for 200s");
        for n in [n1, n2, n3] {
            m.nodes.insert(n.agent_id.clone(), n);
        }
        m
    }

    #[test]
    fn the_health_families_count_what_the_model_holds() {
        let v = View::of(troubled(), 0);
        let mut text = String::new();
        write(&mut text, &v, 12_500);
        let pool = "protection_domain=\"pd\\\"1\",pool=\"sp1\"";
        for line in [
            "# TYPE storage_health_state gauge".to_string(),
            "storage_health_state{state=\"healthy\"} 0".into(),
            "storage_health_state{state=\"degraded\"} 1".into(),
            "storage_health_state{state=\"unknown\"} 0".into(),
            "storage_nodes_health{state=\"healthy\"} 1".into(),
            "storage_nodes_health{state=\"degraded\"} 1".into(),
            "storage_nodes_health{state=\"unknown\"} 1".into(),
            "storage_sds_connected 1".into(),
            "storage_sds_disconnected 1".into(),
            "storage_sdc_connected 1".into(),
            "storage_sdc_disconnected 1".into(),
            "storage_device_errors 1".into(),
            format!("storage_pool_degraded_bytes{{{pool}}} 1073741825"),
            format!("storage_pool_rebuilding_bytes{{{pool}}} 120"),
            format!("storage_pool_failed_bytes{{{pool}}} 3"),
            "storage_mdm_cluster_state{state=\"ClusteredNormal\"} 0".into(),
            "storage_mdm_cluster_state{state=\"ClusteredDegraded\"} 1".into(),
            "storage_mdm_cluster_state{state=\"NotClustered\"} 0".into(),
            "storage_mdm_members_up 2".into(),
            "storage_health_data_age_seconds 2.500".into(),
            "storage_node_unhealthy{host=\"h2\",reason=\"device_error\"} 1".into(),
            "storage_node_unhealthy{host=\"h2\",reason=\"host_service\"} 1".into(),
            "storage_node_unhealthy{host=\"h2\",reason=\"sds_disconnected\"} 1".into(),
            "storage_node_unhealthy{host=\"h\\\\3\",reason=\"stale\"} 1".into(),
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(
            !text.contains("host=\"h1\""),
            "a healthy node is not listed"
        );
    }

    #[test]
    fn families_without_data_are_left_out() {
        let v = View::of(ClusterModel::default(), 0);
        let mut text = String::new();
        write(&mut text, &v, 0);
        assert!(text.contains("storage_health_state{state=\"unknown\"} 1\n"));
        for absent in [
            "storage_pool_degraded_bytes",
            "storage_mdm_cluster_state",
            "storage_mdm_members_up",
            "storage_health_data_age_seconds",
        ] {
            assert!(!text.contains(absent), "{absent} in\n{text}");
        }
    }
}
