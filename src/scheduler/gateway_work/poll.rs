//! What a health poll keeps of the gateway's listings: each SDS's storage as a node holds it
//! in the model, found by the SDS's id or address, and the addresses of the connected SDCs.
//!
//! Why not the listings themselves: at 10,000 nodes the typed lists of SDSs, devices and SDCs
//! were some 11 MB, and the index the dispatcher built over them 2 MB more, every poll, in a
//! scheduler given 32 MB (its heap peaked in the poll, `scheduler_peak_rss_mb_10k`). Kept as
//! the model keeps them, with the repeated words interned, they are about 2.5 MB, and an
//! unchanged node copies nothing out of them.
//!
//! The worker adds each item as its listing streams (`reconcile.rs`); the tests add typed
//! items the same way. Each SDS's storage is shared (`Arc`) with the node that takes it
//! (`health::assess::apply_poll`), not copied: the first poll of a big cluster changes every
//! node, and a copy held the storage twice, poll and model, at the scheduler's peak.

use crate::gateway::types::{Device, Sdc, Sds};
use crate::scheduler::model::interned::Word;
use crate::scheduler::model::{DeviceStatus, NodeStorage, SdsStatus};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Listed {
    /// Each SDS's storage by its id (a device is filed under its SDS; a device whose SDS
    /// is not listed has no node to show it). Behind a pointer: a map's slots are a power
    /// of two, and this value is 128 bytes.
    by_id: HashMap<String, Arc<NodeStorage>>,
    /// SDS id by each of its addresses (the last listed wins, as a node has one address).
    by_ip: HashMap<Box<str>, String>,
    /// Addresses of the SDCs connected to the MDMs.
    connected_sdcs: HashSet<Box<str>>,
    /// Pools that hold a listed device (their statistics are read).
    pools_on_devices: BTreeSet<String>,
    /// Of the device ids asked after ([`Listed::watching`]), those listed.
    watched_devices: HashMap<String, bool>,
    sdss: usize,
    devices: usize,
    sdcs: usize,
}

impl Listed {
    /// Device ids whose presence the poll records (removals awaiting their device's end).
    pub fn watching<'a>(ids: impl IntoIterator<Item = &'a str>) -> Listed {
        Listed {
            watched_devices: ids.into_iter().map(|id| (id.to_string(), false)).collect(),
            ..Listed::default()
        }
    }

    /// Adds one SDS (`None`: the SDS listing starts again, and so does everything). SDSs are
    /// listed before devices (a device is filed under its SDS).
    pub fn take_sds(&mut self, s: Option<Sds>) {
        match s {
            Some(s) => self.sds(s),
            None => {
                let mut watched = std::mem::take(&mut self.watched_devices);
                watched.values_mut().for_each(|listed| *listed = false);
                *self = Listed {
                    watched_devices: watched,
                    ..Listed::default()
                };
            }
        }
    }

    /// Adds one device (`None`: the device listing starts again).
    pub fn take_device(&mut self, d: Option<Device>) {
        match d {
            Some(d) => self.device(d),
            None => {
                self.by_id
                    .values_mut()
                    .for_each(|s| Arc::make_mut(s).devices.clear());
                self.pools_on_devices.clear();
                self.watched_devices.values_mut().for_each(|l| *l = false);
                self.devices = 0;
            }
        }
    }

    /// Adds one SDC (`None`: the SDC listing starts again).
    pub fn take_sdc(&mut self, c: Option<Sdc>) {
        match c {
            Some(c) => self.sdc(c),
            None => {
                self.connected_sdcs.clear();
                self.sdcs = 0;
            }
        }
    }

    /// Adds one SDS, before the devices.
    pub fn sds(&mut self, s: Sds) {
        self.sdss += 1;
        for ip in s.ips() {
            self.by_ip.insert(ip.into(), s.id.clone());
        }
        let status = SdsStatus {
            id: s.id.clone(),
            protection_domain_id: Word::of(s.protection_domain_id.as_deref()),
            mdm_connection: Word::of(s.mdm_connection_state.as_deref()),
            membership: Word::of(s.membership_state.as_deref()),
            state: Word::of(s.sds_state.as_deref()),
            maintenance: Word::of(s.maintenance_state.as_deref()),
        };
        // Not shared yet while the listing streams: `make_mut` copies nothing.
        Arc::make_mut(self.by_id.entry(s.id).or_default()).sds = Some(status);
    }

    /// Adds one device, after the SDSs.
    pub fn device(&mut self, d: Device) {
        self.devices += 1;
        if let Some(listed) = self.watched_devices.get_mut(&d.id) {
            *listed = true;
        }
        if let Some(pool) = &d.storage_pool_id {
            if !self.pools_on_devices.contains(pool) {
                self.pools_on_devices.insert(pool.clone());
            }
        }
        let Some(storage) = d.sds_id.as_ref().and_then(|id| self.by_id.get_mut(id)) else {
            return;
        };
        let storage = Arc::make_mut(storage);
        let status = DeviceStatus {
            path: Word::from(d.device_current_path_name.as_str()),
            storage_pool_id: Word::of(d.storage_pool_id.as_deref()),
            state: Word::of(d.device_state.as_deref()),
            error: Word::of(d.error_state.as_deref()),
        };
        // Kept in path order, as the model shows them: an SDS has a handful of devices, most
        // often one, and a first push would make room for four (192 bytes more per node).
        let at = storage.devices.partition_point(|x| x.path <= status.path);
        storage.devices.reserve_exact(1);
        storage.devices.insert(at, status);
    }

    /// Adds one SDC.
    pub fn sdc(&mut self, c: Sdc) {
        self.sdcs += 1;
        if c.connected() {
            self.connected_sdcs.insert(c.sdc_ip.into());
        }
    }

    /// The storage of the node whose SDS has `sds_id`, or else is at `ip`.
    pub fn storage_of(&self, sds_id: Option<&str>, ip: Option<&str>) -> Option<&Arc<NodeStorage>> {
        let by_id = sds_id.and_then(|id| self.by_id.get(id));
        by_id.or_else(|| {
            let id = self.by_ip.get(ip?)?;
            self.by_id.get(id)
        })
    }

    /// Whether an SDC at `ip` is connected to the MDMs.
    pub fn sdc_connected(&self, ip: &str) -> bool {
        self.connected_sdcs.contains(ip)
    }

    /// The addresses of the connected SDCs.
    pub fn connected_sdcs(&self) -> impl Iterator<Item = &str> {
        self.connected_sdcs.iter().map(|ip| &**ip)
    }

    /// Whether the gateway lists an SDS of this id.
    pub fn has_sds(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    /// Whether a device asked after with [`Listed::watching`] was listed; `None`: not asked.
    pub fn has_watched_device(&self, id: &str) -> Option<bool> {
        self.watched_devices.get(id).copied()
    }

    pub fn pools_on_devices(&self) -> &BTreeSet<String> {
        &self.pools_on_devices
    }

    /// How many SDSs, devices and SDCs the gateway listed.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.sdss, self.devices, self.sdcs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(id: &str, sds: &str, path: &str) -> Device {
        Device {
            id: id.into(),
            name: None,
            device_current_path_name: path.into(),
            storage_pool_id: Some("p1".into()),
            sds_id: Some(sds.into()),
            device_state: Some("Normal".into()),
            error_state: None,
        }
    }

    #[test]
    fn a_node_finds_its_sds_by_id_else_by_address_with_its_devices_in_path_order() {
        let mut l = Listed::watching(["d9", "d2"]);
        l.sds(Sds::joined("s1", "10.0.0.1"));
        l.sds(Sds::joined("s2", "10.0.0.2"));
        l.device(device("d1", "s1", "/dev/sdc"));
        l.device(device("d2", "s1", "/dev/sdb"));
        l.device(device("d3", "gone", "/dev/sdb"));
        let by_id = l.storage_of(Some("s1"), Some("10.0.0.2")).unwrap();
        let paths: Vec<&str> = by_id.devices.iter().map(|d| &*d.path).collect();
        assert_eq!(paths, ["/dev/sdb", "/dev/sdc"]);
        assert_eq!(
            by_id.sds.as_ref().unwrap().membership.as_deref(),
            Some("Joined")
        );
        let by_ip = l.storage_of(Some("unknown"), Some("10.0.0.2")).unwrap();
        assert_eq!(by_ip.sds.as_ref().unwrap().id, "s2");
        assert!(by_ip.devices.is_empty());
        assert!(l.storage_of(None, Some("10.0.0.3")).is_none());
        assert_eq!(l.has_watched_device("d2"), Some(true));
        assert_eq!(l.has_watched_device("d9"), Some(false));
        assert_eq!(l.has_watched_device("d1"), None);
        assert!(l.pools_on_devices().contains("p1"));
        assert_eq!(l.counts(), (2, 3, 0));
    }

    #[test]
    fn a_listing_started_again_forgets_what_its_first_attempt_handed_over() {
        let mut l = Listed::watching(["d1"]);
        l.take_sds(None);
        l.take_sds(Some(Sds::joined("s1", "10.0.0.1")));
        l.take_device(None);
        l.take_device(Some(device("d1", "s1", "/dev/sdb")));
        // The device listing was cut off and is read again, whole.
        l.take_device(None);
        assert_eq!(l.has_watched_device("d1"), Some(false));
        l.take_device(Some(device("d1", "s1", "/dev/sdb")));
        l.take_device(Some(device("d2", "s1", "/dev/sdc")));
        let storage = l.storage_of(Some("s1"), None).unwrap();
        assert_eq!(storage.devices.len(), 2, "{storage:?}");
        assert_eq!(l.counts(), (1, 2, 0));
        // An SDS listing started again starts everything again, and still watches.
        l.take_sds(None);
        assert!(l.storage_of(Some("s1"), None).is_none());
        assert_eq!(l.has_watched_device("d1"), Some(false));
        assert_eq!(l.counts(), (0, 0, 0));
    }

    #[test]
    fn only_connected_sdcs_count() {
        let mut l = Listed::default();
        l.sdc(Sdc::at("10.0.0.1", "Connected"));
        l.sdc(Sdc::at("10.0.0.2", "Disconnected"));
        assert!(l.sdc_connected("10.0.0.1"));
        assert!(!l.sdc_connected("10.0.0.2"));
        assert_eq!(l.counts(), (0, 0, 2));
    }
}
