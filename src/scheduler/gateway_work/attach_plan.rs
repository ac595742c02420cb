//! Pure reconciliation planning: given what a node should contribute and what the gateway
//! already holds, what to create or add. No I/O here; the gateway worker gathers the facts
//! and carries the steps out.
//!
//! Rules: objects are looked up before they are created; an SDS found by name must carry the
//! node's address to count as ours; a device already on the SDS is never added again.

use crate::gateway::types::{Device, Sds};
use crate::hash::ContentHasher;
use crate::scheduler::model::{Layout, Node};
use std::sync::Arc;

/// Longest object name the storage system accepts.
pub const MAX_NAME: usize = 31;

/// One device the node should contribute, and where.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceWant {
    pub path: String,
    pub protection_domain: String,
    pub pool: String,
}

/// What a node should look like in the storage cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeWant {
    /// The model's own key: the worker keys its work by it, not by a copy.
    pub agent_id: Arc<str>,
    pub hostname: String,
    pub ip: String,
    pub sds_name: String,
    /// The SDS's protection domain (an SDS belongs to one).
    pub protection_domain: String,
    pub devices: Vec<DeviceWant>,
}

/// The devices a node contributes: the imperative layout's when its attributes declare one,
/// else every reported device into the flags' domain and pool.
pub fn wanted_devices(node: &Node, default_pd: &str, default_pool: &str) -> Vec<DeviceWant> {
    let mut out = Vec::new();
    if node.layout.sds.is_empty() {
        for path in &node.devices {
            out.push(DeviceWant {
                path: path.clone(),
                protection_domain: default_pd.to_string(),
                pool: default_pool.to_string(),
            });
        }
    } else {
        imperative(&node.layout, &mut out);
    }
    out.sort();
    out.dedup_by(|a, b| a.path == b.path);
    out
}

/// The paths of [`wanted_devices`], as often as declared and without making the list (nor
/// a box: one of the two parts is empty).
pub fn wanted_paths(node: &Node) -> impl Iterator<Item = &String> {
    let discovered = if node.layout.sds.is_empty() {
        node.devices.len()
    } else {
        0
    };
    let declared = node
        .layout
        .sds
        .values()
        .flat_map(|pools| pools.values().flatten());
    node.devices.iter().take(discovered).chain(declared)
}

/// A content fingerprint of a node's wanted devices: whether they changed since they were
/// handed to the worker.
pub fn fingerprint(wanted: &[DeviceWant]) -> u64 {
    let mut h = ContentHasher::default();
    for d in wanted {
        for field in [&d.path, &d.protection_domain, &d.pool] {
            h.update(field.as_bytes());
            // A separator no path or name holds: ("ab", "c") and ("a", "bc") differ.
            h.update(&[0]);
        }
    }
    h.finish()
}

fn imperative(layout: &Layout, out: &mut Vec<DeviceWant>) {
    for (pd, pools) in &layout.sds {
        for (pool, devices) in pools {
            for path in devices {
                out.push(DeviceWant {
                    path: path.clone(),
                    protection_domain: pd.clone(),
                    pool: pool.clone(),
                });
            }
        }
    }
}

/// The node's SDS name: its hostname when that is a valid object name, else a shortened
/// hostname with a hash of the whole, so that it stays unique and stable across restarts.
pub fn sds_name(hostname: &str) -> String {
    let clean: String = hostname
        .chars()
        .map(|c| if c.is_ascii_graphic() { c } else { '_' })
        .collect();
    if !clean.is_empty() && clean.len() <= MAX_NAME {
        return clean;
    }
    let hash = crate::hash::content_hash(hostname.as_bytes()) as u32;
    let head: String = clean.chars().take(MAX_NAME - 9).collect();
    format!("{head}-{hash:08x}")
}

/// What the gateway holds about the node's SDS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdsFacts {
    pub id: String,
    pub ips: Vec<String>,
    /// `deviceCurrentPathName` of each device already on this SDS.
    pub devices: Vec<String>,
}

impl SdsFacts {
    /// From the gateway's SDS and its devices.
    pub fn of(sds: &Sds, devices: &[Device]) -> SdsFacts {
        SdsFacts {
            id: sds.id.clone(),
            ips: sds.ips().map(str::to_string).collect(),
            devices: SdsFacts::paths_of(devices),
        }
    }

    /// The paths of devices as the gateway lists them.
    pub fn paths_of(devices: &[Device]) -> Vec<String> {
        devices
            .iter()
            .map(|d| d.device_current_path_name.clone())
            .collect()
    }
}

/// What to do for a node, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Create the SDS with these devices (path, pool) in the same call.
    CreateSds { devices: Vec<(String, String)> },
    /// Add one device (path, pool) to the existing SDS.
    AddDevice { path: String, pool: String },
}

/// The steps for a node. `pool_ids` maps (domain, pool) to the pool's id (resolved or created
/// before). `Err` when the gateway holds something in the way that is not ours.
pub fn plan_node(
    want: &NodeWant,
    sds: Option<&SdsFacts>,
    pool_id: &dyn Fn(&str, &str) -> Option<String>,
) -> Result<Vec<Step>, String> {
    let mut wanted = Vec::new();
    for d in &want.devices {
        let Some(pool) = pool_id(&d.protection_domain, &d.pool) else {
            return Err(format!(
                "storage pool {:?} of protection domain {:?} is unknown",
                d.pool, d.protection_domain
            ));
        };
        if d.protection_domain != want.protection_domain {
            return Err(format!(
                "device {} is declared for protection domain {:?}, but the node's SDS is in {:?} (an SDS belongs to one domain)",
                d.path, d.protection_domain, want.protection_domain
            ));
        }
        wanted.push((d.path.clone(), pool));
    }
    match sds {
        None => Ok(vec![Step::CreateSds { devices: wanted }]),
        Some(facts) => {
            if !facts.ips.contains(&want.ip) {
                return Err(format!(
                    "an SDS named {:?} (id {}) exists with addresses {}, not this node's {}: it is not ours",
                    want.sds_name,
                    facts.id,
                    facts.ips.join(","),
                    want.ip
                ));
            }
            Ok(wanted
                .into_iter()
                .filter(|(path, _)| !facts.devices.contains(path))
                .map(|(path, pool)| Step::AddDevice { path, pool })
                .collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::Persona;

    fn want(devices: &[&str]) -> NodeWant {
        NodeWant {
            agent_id: "a1".into(),
            hostname: "h1".into(),
            ip: "10.0.0.5".into(),
            sds_name: "h1".into(),
            protection_domain: "pd".into(),
            devices: devices
                .iter()
                .map(|p| DeviceWant {
                    path: p.to_string(),
                    protection_domain: "pd".into(),
                    pool: "sp".into(),
                })
                .collect(),
        }
    }

    fn pools(pd: &str, pool: &str) -> Option<String> {
        (pd == "pd" && pool == "sp").then(|| "p1".to_string())
    }

    #[test]
    fn a_new_node_gets_one_sds_with_all_its_devices() {
        let steps = plan_node(&want(&["/dev/sdb", "/dev/sdc"]), None, &pools).unwrap();
        assert_eq!(
            steps,
            vec![Step::CreateSds {
                devices: vec![
                    ("/dev/sdb".into(), "p1".into()),
                    ("/dev/sdc".into(), "p1".into())
                ]
            }]
        );
    }

    #[test]
    fn an_existing_sds_gets_only_the_missing_devices() {
        let facts = SdsFacts {
            id: "s1".into(),
            ips: vec!["10.0.0.5".into()],
            devices: vec!["/dev/sdb".into()],
        };
        let steps = plan_node(&want(&["/dev/sdb", "/dev/sdc"]), Some(&facts), &pools).unwrap();
        assert_eq!(
            steps,
            vec![Step::AddDevice {
                path: "/dev/sdc".into(),
                pool: "p1".into()
            }]
        );
        // Everything there: nothing to do (a restart repeats nothing).
        let all = SdsFacts {
            devices: vec!["/dev/sdb".into(), "/dev/sdc".into()],
            ..facts
        };
        assert!(
            plan_node(&want(&["/dev/sdb", "/dev/sdc"]), Some(&all), &pools)
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn an_sds_of_the_same_name_elsewhere_is_not_ours() {
        let facts = SdsFacts {
            id: "s9".into(),
            ips: vec!["10.9.9.9".into()],
            devices: vec![],
        };
        let e = plan_node(&want(&["/dev/sdb"]), Some(&facts), &pools).unwrap_err();
        assert!(e.contains("not ours") && e.contains("10.9.9.9"), "{e}");
        let e = plan_node(&want(&["/dev/sdb"]), None, &|_: &str, _: &str| None).unwrap_err();
        assert!(e.contains("unknown"), "{e}");
    }

    #[test]
    fn devices_come_from_the_layout_or_the_report() {
        let mut n = Node::new("a1", "h1", Persona::Data, 0);
        n.devices = vec!["/dev/sdc".into(), "/dev/sdb".into()];
        let d = wanted_devices(&n, "pd", "sp");
        assert_eq!(d.len(), 2);
        assert_eq!(d[0].path, "/dev/sdb");
        assert_eq!(
            paths(&n),
            ["/dev/sdb", "/dev/sdc"],
            "the list's paths, unmade"
        );
        n.layout
            .sds
            .entry("d1".into())
            .or_default()
            .insert("p1".into(), vec!["/dev/xvdf".into()]);
        let d = wanted_devices(&n, "pd", "sp");
        assert_eq!(
            d,
            vec![DeviceWant {
                path: "/dev/xvdf".into(),
                protection_domain: "d1".into(),
                pool: "p1".into()
            }]
        );
        assert_eq!(paths(&n), ["/dev/xvdf"], "the layout's, not the report's");
    }

    fn paths(n: &Node) -> Vec<&str> {
        let mut p: Vec<&str> = wanted_paths(n).map(String::as_str).collect();
        p.sort();
        p
    }

    #[test]
    fn sds_names_are_valid_and_stable() {
        assert_eq!(sds_name("agent-1"), "agent-1");
        let long = "a-very-long-host-name.with.a.domain.example.com";
        let n = sds_name(long);
        assert_eq!(n.len(), MAX_NAME);
        assert_eq!(n, sds_name(long));
        assert_ne!(
            n,
            sds_name("a-very-long-host-name.with.a.domain.example.org")
        );
        assert_eq!(sds_name("h 1"), "h_1");
    }
}
