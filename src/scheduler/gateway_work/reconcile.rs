//! Carries a node's storage out against the gateway for the worker thread: finds or creates
//! the protection domains and pools it needs (and remembers their ids), reads what the
//! gateway holds of the node's SDS, runs the steps [`attach_plan::plan_node`] decides; and reads
//! pool capacity. Every call goes through the typed [`api`].

use super::attach_plan::{self, NodeWant, SdsFacts, Step};
use crate::clock::Clock;
use crate::gateway::api;
use crate::gateway::client::{code, GatewayClient, GatewayError};
use crate::gateway::types::{
    DeviceInfo, NewDevice, NewProtectionDomain, NewSds, NewStoragePool, PoolStatistics,
};
use crate::scheduler::model::PoolCapacity;
use std::collections::BTreeMap;

pub struct Reconciler {
    client: GatewayClient,
    /// Domain name -> id and (domain, pool) -> id, found or created.
    pd_ids: BTreeMap<String, String>,
    pool_ids: BTreeMap<(String, String), String>,
}

impl Reconciler {
    pub fn new(client: GatewayClient) -> Reconciler {
        Reconciler {
            client,
            pd_ids: BTreeMap::new(),
            pool_ids: BTreeMap::new(),
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

    /// Capacity of every pool the framework uses: `known_pools` and those found so far.
    pub fn capacity(
        &mut self,
        known_pools: &[(String, String)],
        threshold_pct: f64,
        clock: &dyn Clock,
    ) -> Result<Vec<PoolCapacity>, GatewayError> {
        for (pd, pool) in known_pools {
            self.pool_id(pd, pool)?;
        }
        let pools: Vec<((String, String), String)> = self
            .pool_ids
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if pools.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = pools.iter().map(|(_, id)| id.clone()).collect();
        let stats = api::pool_statistics(&mut self.client, &ids)?;
        let read_ms = clock.now_ms();
        Ok(pools
            .into_iter()
            .map(|((pd, pool), id)| {
                capacity_of(
                    &stats.get(&id).copied().unwrap_or_default(),
                    pd,
                    pool,
                    id,
                    threshold_pct,
                    read_ms,
                )
            })
            .collect())
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
}
