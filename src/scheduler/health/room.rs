//! Pure: whether the rest of a pool could hold what a removal takes out of it (a node's SDS,
//! or one of its devices). Each device is taken to hold an equal share of its pool, as the
//! MDM spreads data evenly; the data must keep its two copies on two other SDSs. The gateway
//! checks again when it is asked: this answers the operator before anything starts.

use super::gib;
use crate::scheduler::model::ClusterModel;
use std::collections::BTreeSet;

/// `Err(why)` when the pools holding the node `agent`'s devices (only `device`, when given)
/// could not keep their data without them.
pub fn removal_room(model: &ClusterModel, agent: &str, device: Option<&str>) -> Result<(), String> {
    let Some(node) = model.nodes.get(agent) else {
        return Ok(());
    };
    let leaving = |owner: &str, path: &str| owner == agent && device.is_none_or(|d| d == path);
    for pool in &model.pools {
        let mut total = 0u64;
        let mut gone = 0u64;
        let mut staying_sdss = BTreeSet::new();
        for n in model.nodes.values() {
            let devices = n.storage.as_deref().into_iter().flat_map(|s| &s.devices);
            for d in devices.filter(|d| d.storage_pool_id.as_deref() == Some(pool.id.as_str())) {
                total += 1;
                if leaving(&n.agent_id, &d.path) {
                    gone += 1;
                } else {
                    staying_sdss.insert(n.agent_id.clone());
                }
            }
        }
        if gone == 0 || pool.used_bytes == 0 {
            continue;
        }
        let usable = pool.capacity_bytes.saturating_sub(pool.spare_bytes);
        let staying = usable / total * (total - gone);
        let name = format!("{}/{}", pool.protection_domain, pool.pool);
        let what = match device {
            Some(d) => format!("{d} of {}", node.hostname),
            None => format!("{}'s SDS", node.hostname),
        };
        if staying_sdss.len() < 2 {
            return Err(format!(
                "pool {name} holds {} in use and, without {what}, {} SDS(s) would be left to keep two copies",
                gib(pool.used_bytes),
                staying_sdss.len()
            ));
        }
        if pool.used_bytes > staying {
            return Err(format!(
                "pool {name} holds {} in use; without {what} it could hold {}",
                gib(pool.used_bytes),
                gib(staying)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::model::{DeviceStatus, Node, NodeStorage, Persona, PoolCapacity};
    use std::sync::Arc;

    const GIB: u64 = 1 << 30;

    fn model(nodes: usize, used_gib: u64) -> ClusterModel {
        let mut m = ClusterModel::default();
        for i in 1..=nodes {
            let mut n = Node::new(&format!("a{i}"), &format!("h{i}"), Persona::Data, 0);
            n.storage = Some(Arc::new(NodeStorage {
                sds: None,
                devices: ["/dev/sdb", "/dev/sdc"]
                    .map(|p| DeviceStatus {
                        path: p.into(),
                        storage_pool_id: Some("p1".into()),
                        ..Default::default()
                    })
                    .to_vec(),
            }));
            m.nodes.insert(format!("a{i}"), n);
        }
        m.pools.push(PoolCapacity {
            protection_domain: "pd".into(),
            pool: "sp".into(),
            id: "p1".into(),
            // 100 GiB per device, 10 % spare.
            capacity_bytes: nodes as u64 * 200 * GIB,
            spare_bytes: nodes as u64 * 20 * GIB,
            used_bytes: used_gib * GIB,
            ..Default::default()
        });
        m
    }

    #[test]
    fn a_removal_the_rest_could_not_hold_is_refused_naming_the_pool() {
        // Three nodes of 180 GiB usable each: two hold 360 GiB.
        assert!(removal_room(&model(3, 300), "a1", None).is_ok());
        let e = removal_room(&model(3, 400), "a1", None).unwrap_err();
        assert!(
            e.contains(
                "pool pd/sp holds 400.0 GiB in use; without h1's SDS it could hold 360.0 GiB"
            ),
            "{e}"
        );
        // One device of six leaves 450 GiB.
        assert!(removal_room(&model(3, 400), "a1", Some("/dev/sdb")).is_ok());
        let e = removal_room(&model(2, 10), "a1", None).unwrap_err();
        assert!(e.contains("1 SDS(s) would be left"), "{e}");
        assert!(
            removal_room(&model(2, 0), "a1", None).is_ok(),
            "no data, no limit"
        );
    }
}
