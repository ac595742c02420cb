//! Carries a node's storage out against the gateway for the worker thread: finds or creates
//! the protection domains and pools it needs (and remembers their ids), reads what the
//! gateway holds of the node's SDS, runs the steps [`attach_plan::plan_node`] decides; and reads
//! the gateway's health view in one poll. Every call goes through the typed [`api`].

use super::attach_plan::{self, NodeWant, SdsFacts, Step};
use super::poll::Listed;
use super::report::HealthPoll;
use crate::clock::Clock;
use crate::gateway::api;
use crate::gateway::client::{code, GatewayClient, GatewayError};
use crate::gateway::types::{
    DeviceInfo, NewDevice, NewProtectionDomain, NewSds, NewStoragePool, PoolStatistics,
};
use crate::scheduler::model::{NodeStorage, PoolCapacity};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

pub struct Reconciler {
    client: GatewayClient,
    /// Domain name -> id and (domain, pool) -> id, found or created.
    pd_ids: BTreeMap<String, String>,
    pool_ids: BTreeMap<(String, String), String>,
    /// Ids of the pools the framework uses (its devices' pools and the flags' pool): polled
    /// even while they hold no device.
    wanted_pools: BTreeSet<String>,
    /// The last health poll's storages that a node may still hold, sorted by SDS id: the
    /// next poll starts from them ([`Listed::take_sds`]).
    last_listed: Vec<Arc<NodeStorage>>,
}

impl Reconciler {
    pub fn new(client: GatewayClient) -> Reconciler {
        Reconciler {
            client,
            pd_ids: BTreeMap::new(),
            pool_ids: BTreeMap::new(),
            wanted_pools: BTreeSet::new(),
            last_listed: Vec::new(),
        }
    }

    /// The client beneath, for the worker's own calls (SDC checks, the gateway's address).
    pub fn client(&mut self) -> &mut GatewayClient {
        &mut self.client
    }

    fn pd_id(&mut self, pd: &str) -> Result<String, GatewayError> {
        if let Some(id) = self.pd_ids.get(pd) {
            return Ok(id.clone());
        }
        let id = match api::protection_domain_id(&mut self.client, pd)? {
            Some(id) => id,
            None => {
                log::info!("creating protection domain {pd:?}");
                let new = NewProtectionDomain {
                    name: pd.to_string(),
                };
                match api::create_protection_domain(&mut self.client, &new) {
                    Ok(id) => id,
                    // Created meanwhile by someone else: a domain is shared, take it.
                    Err(e) if e.error_code() == Some(code::PD_NAME_IN_USE) => {
                        api::protection_domain_id(&mut self.client, pd)?.ok_or(e)?
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        self.pd_ids.insert(pd.to_string(), id.clone());
        Ok(id)
    }

    fn pool_id(&mut self, pd: &str, pool: &str) -> Result<String, GatewayError> {
        let key = (pd.to_string(), pool.to_string());
        if let Some(id) = self.pool_ids.get(&key) {
            self.wanted_pools.insert(id.clone());
            return Ok(id.clone());
        }
        let pd_id = self.pd_id(pd)?;
        let id = match api::storage_pool_id(&mut self.client, pd, pool)? {
            Some(id) => id,
            None => {
                log::info!("creating storage pool {pool:?} in protection domain {pd:?}");
                let new = NewStoragePool {
                    name: pool.to_string(),
                    protection_domain_id: pd_id,
                };
                match api::create_storage_pool(&mut self.client, &new) {
                    Ok(id) => id,
                    Err(e) if e.error_code() == Some(code::POOL_NAME_IN_USE) => {
                        api::storage_pool_id(&mut self.client, pd, pool)?.ok_or(e)?
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        self.pool_ids.insert(key, id.clone());
        self.wanted_pools.insert(id.clone());
        Ok(id)
    }

    /// The node's SDS as the gateway holds it, found by name.
    fn sds_facts(&mut self, name: &str) -> Result<Option<SdsFacts>, GatewayError> {
        let Some(id) = api::sds_id(&mut self.client, name)? else {
            return Ok(None);
        };
        let sds = api::sds(&mut self.client, &id)?;
        let devices = api::sds_devices(&mut self.client, &id)?;
        Ok(Some(SdsFacts::of(&sds, &devices)))
    }

    /// Makes the gateway hold the node's SDS and devices: (SDS id, attached, added any).
    pub fn attach(&mut self, want: &NodeWant) -> Result<(String, Vec<String>, bool), String> {
        let fail = |e: GatewayError| e.to_string();
        let pd_id = self.pd_id(&want.protection_domain).map_err(fail)?;
        for d in &want.devices {
            self.pool_id(&d.protection_domain, &d.pool).map_err(fail)?;
        }
        let facts = self.sds_facts(&want.sds_name).map_err(fail)?;
        let pools = self.pool_ids.clone();
        let lookup = |pd: &str, pool: &str| pools.get(&(pd.to_string(), pool.to_string())).cloned();
        let steps = attach_plan::plan_node(want, facts.as_ref(), &lookup)?;
        let mut sds_id = facts.as_ref().map(|f| f.id.clone());
        let mut present: Vec<String> = facts.map(|f| f.devices).unwrap_or_default();
        let added = !steps.is_empty();
        let mut errors = Vec::new();
        for step in steps {
            match step {
                Step::CreateSds { devices } => {
                    let (id, with_devices) = self.create_sds(want, &pd_id, &devices)?;
                    present = if with_devices {
                        devices.iter().map(|(path, _)| path.clone()).collect()
                    } else {
                        // Devices that did not go in with the SDS are added one by one below.
                        let on_sds = api::sds_devices(&mut self.client, &id).map_err(fail)?;
                        SdsFacts::paths_of(&on_sds)
                    };
                    for (path, pool) in devices {
                        if !present.contains(&path) {
                            match self.add_device(&id, &path, &pool) {
                                Ok(()) => present.push(path),
                                Err(e) => errors.push(format!("{path}: {e}")),
                            }
                        }
                    }
                    sds_id = Some(id);
                }
                Step::AddDevice { path, pool } => {
                    let Some(id) = sds_id.clone() else { continue };
                    match self.add_device(&id, &path, &pool) {
                        Ok(()) => present.push(path),
                        Err(e) => errors.push(format!("{path}: {e}")),
                    }
                }
            }
        }
        let sds_id = sds_id.ok_or_else(|| "no SDS".to_string())?;
        let attached: Vec<String> = want
            .devices
            .iter()
            .filter(|d| present.contains(&d.path))
            .map(|d| d.path.clone())
            .collect();
        if !errors.is_empty() {
            return Err(format!(
                "SDS {} ({sds_id}): {} of {} devices attached; {}",
                want.sds_name,
                attached.len(),
                want.devices.len(),
                errors.join("; ")
            ));
        }
        log::info!(
            "{}: SDS {} ({sds_id}) holds {} device(s)",
            want.hostname,
            want.sds_name,
            attached.len()
        );
        Ok((sds_id, attached, added))
    }

    /// Creates the SDS, with its devices in the same call. When the create fails because of
    /// a device, the SDS is created alone (devices are added one by one after). When the
    /// name or address is taken, the SDS at our address is ours (a restart after a create
    /// whose answer was lost).
    fn create_sds(
        &mut self,
        want: &NodeWant,
        pd_id: &str,
        devices: &[(String, String)],
    ) -> Result<(String, bool), String> {
        let alone = NewSds::at(&want.sds_name, pd_id, &want.ip);
        let with_devices = NewSds {
            device_info_list: devices
                .iter()
                .map(|(path, pool)| DeviceInfo {
                    device_path: path.clone(),
                    storage_pool_id: pool.clone(),
                })
                .collect(),
            ..alone.clone()
        };
        log::info!(
            "{}: creating SDS {} at {} with {} device(s)",
            want.hostname,
            want.sds_name,
            want.ip,
            devices.len()
        );
        let first = api::create_sds(&mut self.client, &with_devices);
        let e = match first {
            Ok(id) => return Ok((id, true)),
            Err(e) => e,
        };
        match e.error_code() {
            Some(code::SDS_NAME_IN_USE) | Some(code::SDS_ADDRESS_IN_USE) => {
                let id = self.sds_at(&want.ip).map_err(|e| e.to_string())?;
                id.map(|id| (id, false))
                    .ok_or_else(|| format!("{e}; and no SDS at {} was found to be ours", want.ip))
            }
            Some(c) if c != code::NONE && !devices.is_empty() => {
                log::warn!(
                    "{}: SDS with devices refused ({e}); creating it without them",
                    want.hostname
                );
                api::create_sds(&mut self.client, &alone)
                    .map(|id| (id, false))
                    .map_err(|e| e.to_string())
            }
            _ => Err(e.to_string()),
        }
    }

    /// The id of an SDS listening at `ip`, if any.
    fn sds_at(&mut self, ip: &str) -> Result<Option<String>, GatewayError> {
        let all = api::sdss(&mut self.client)?;
        Ok(all
            .into_iter()
            .find(|s| s.ips().any(|i| i == ip))
            .map(|s| s.id))
    }

    fn add_device(&mut self, sds_id: &str, path: &str, pool_id: &str) -> Result<(), GatewayError> {
        let new = NewDevice {
            device_current_pathname: path.to_string(),
            sds_id: sds_id.to_string(),
            storage_pool_id: pool_id.to_string(),
        };
        match api::create_device(&mut self.client, &new) {
            Ok(_) => Ok(()),
            // Already on this SDS (an earlier call whose answer was lost): what we wanted.
            Err(e) if e.error_code() == Some(code::DEVICE_ALREADY_EXISTS) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// One health poll: every SDS, device and SDC, the systems (for the MDM cluster), and
    /// the statistics of every pool in one `querySelectedStatistics` call. The pools read are
    /// `known_pools`, those found so far and those holding any listed device; a pool id not
    /// named yet costs one listing of domains and pools (then cached), so a steady poll is
    /// five requests whatever the number of nodes.
    ///
    /// The listings are kept as the model keeps them ([`Listed`]), with the presence of the
    /// devices `watched` (removals awaiting their device's end).
    pub fn health(
        &mut self,
        known_pools: &[(String, String)],
        threshold_pct: f64,
        clock: &dyn Clock,
        watched: &[String],
    ) -> Result<HealthPoll, GatewayError> {
        let before = self.client.requests();
        // What the poll shows may be as old as its first read: a step that ended after that
        // may not show in it, however late the last answer came.
        let read_ms = clock.now_ms();
        for (pd, pool) in known_pools {
            self.pool_id(pd, pool)?;
        }
        let systems = api::systems(&mut self.client)?;
        // A storage only this list still holds is no node's (another framework's SDS, a node
        // gone): not kept for another poll.
        let mut last = std::mem::take(&mut self.last_listed);
        last.retain(|s| Arc::strong_count(s) > 1);
        let mut listed = Listed::watching(watched.iter().map(String::as_str));
        api::each_sds(&mut self.client, &mut |s| listed.take_sds(s, &last))?;
        api::each_device(&mut self.client, &mut |d| listed.take_device(d))?;
        api::each_sdc(&mut self.client, &mut |c| listed.take_sdc(c))?;
        self.last_listed = listed.finish();
        let on_devices = listed.pools_on_devices();
        let named: BTreeSet<&String> = self.pool_ids.values().collect();
        if on_devices.iter().any(|id| !named.contains(id)) {
            self.name_every_pool()?;
        }
        let mut pools: BTreeMap<String, (String, String)> = self
            .pool_ids
            .iter()
            .map(|(k, id)| (id.clone(), k.clone()))
            .collect();
        pools.retain(|id, _| on_devices.contains(id) || self.wanted_pools.contains(id));
        let ids: Vec<String> = pools.keys().cloned().collect();
        let stats = api::pool_statistics(&mut self.client, &ids)?;
        let pools = pools
            .into_iter()
            .map(|(id, (pd, pool))| {
                let figures = stats.get(&id).copied().unwrap_or_default();
                capacity_of(&figures, pd, pool, id, threshold_pct, read_ms)
            })
            .collect();
        let requests = self.client.requests().saturating_sub(before);
        Ok(HealthPoll {
            read_ms,
            listed,
            pools,
            mdm: systems.into_iter().next().map(|s| s.mdm_cluster),
            requests: u32::try_from(requests).unwrap_or(u32::MAX),
        })
    }

    /// Lists every protection domain and pool once, naming each pool's id.
    fn name_every_pool(&mut self) -> Result<(), GatewayError> {
        let domains: BTreeMap<String, String> = api::protection_domains(&mut self.client)?
            .into_iter()
            .filter_map(|pd| Some((pd.id, pd.name?)))
            .collect();
        for pool in api::storage_pools(&mut self.client)? {
            let (Some(name), Some(pd)) = (pool.name, domains.get(&pool.protection_domain_id))
            else {
                continue;
            };
            self.pd_ids
                .insert(pd.clone(), pool.protection_domain_id.clone());
            self.pool_ids.insert((pd.clone(), name), pool.id);
        }
        Ok(())
    }
}

/// One pool's statistics in bytes, and whether its use is above the threshold (pure).
pub fn capacity_of(
    stats: &PoolStatistics,
    protection_domain: String,
    pool: String,
    id: String,
    threshold_pct: f64,
    read_ms: u64,
) -> PoolCapacity {
    let (max, used, available, spare) = (
        stats.max_capacity_in_kb,
        stats.capacity_in_use_in_kb,
        stats.capacity_available_for_volume_allocation_in_kb,
        stats.spare_capacity_in_kb,
    );
    let usable = max.saturating_sub(spare);
    let used_pct = if usable == 0 {
        0.0
    } else {
        used as f64 * 100.0 / usable as f64
    };
    PoolCapacity {
        protection_domain,
        pool,
        id,
        capacity_bytes: max * 1024,
        used_bytes: used * 1024,
        available_bytes: available * 1024,
        spare_bytes: spare * 1024,
        used_pct,
        over_threshold: used_pct > threshold_pct,
        read_ms,
        degraded_healthy_bytes: stats.degraded_healthy_capacity_in_kb * 1024,
        degraded_failed_bytes: stats.degraded_failed_capacity_in_kb * 1024,
        failed_bytes: stats.failed_capacity_in_kb * 1024,
        in_maintenance_bytes: stats.in_maintenance_capacity_in_kb * 1024,
        pending_rebuild_bytes: (stats.pending_fwd_rebuild_capacity_in_kb
            + stats.pending_bck_rebuild_capacity_in_kb)
            * 1024,
        pending_rebalance_bytes: stats.pending_rebalance_capacity_in_kb * 1024,
        moving_bytes: stats.moving_capacity_in_kb * 1024,
        ..PoolCapacity::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_is_in_bytes_and_flagged_above_the_threshold() {
        let stats = PoolStatistics {
            max_capacity_in_kb: 1000,
            capacity_in_use_in_kb: 810,
            capacity_available_for_volume_allocation_in_kb: 40,
            ..PoolStatistics::default()
        };
        let c = capacity_of(&stats, "pd".into(), "sp".into(), "id".into(), 80.0, 1);
        assert_eq!(c.capacity_bytes, 1_024_000);
        assert_eq!(c.used_bytes, 829_440);
        assert!(c.over_threshold);
        let c = capacity_of(&stats, "pd".into(), "sp".into(), "id".into(), 90.0, 1);
        assert!(!c.over_threshold);
        let empty = capacity_of(
            &PoolStatistics::default(),
            "pd".into(),
            "sp".into(),
            "id".into(),
            80.0,
            1,
        );
        assert_eq!(empty.used_pct, 0.0);
    }

    #[test]
    fn health_figures_are_in_bytes_and_pending_rebuild_is_both_directions() {
        let stats = PoolStatistics {
            degraded_healthy_capacity_in_kb: 1,
            degraded_failed_capacity_in_kb: 2,
            failed_capacity_in_kb: 3,
            in_maintenance_capacity_in_kb: 4,
            pending_fwd_rebuild_capacity_in_kb: 5,
            pending_bck_rebuild_capacity_in_kb: 6,
            pending_rebalance_capacity_in_kb: 7,
            moving_capacity_in_kb: 8,
            ..PoolStatistics::default()
        };
        let c = capacity_of(&stats, "pd".into(), "sp".into(), "id".into(), 80.0, 1);
        assert_eq!(
            [
                c.degraded_healthy_bytes,
                c.degraded_failed_bytes,
                c.failed_bytes,
                c.in_maintenance_bytes,
                c.pending_rebuild_bytes,
                c.pending_rebalance_bytes,
                c.moving_bytes,
            ],
            [1024, 2048, 3072, 4096, 11 * 1024, 7 * 1024, 8 * 1024]
        );
    }
}
