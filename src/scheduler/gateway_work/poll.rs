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
//!
//! And a poll starts from the last one ([`Listed::take_sds`]): an SDS listed exactly as before
//! takes the storage the last poll gave its node again, so a steady poll of 10,000 nodes
//! builds no storage at all. Built anew, they were the most of each poll's 4 MB at that size,
//! all thrown away once the model found them equal to its own (heaptrack). The worker keeps
//! the last poll's storages (`reconcile.rs`), not this type: a field more here grew the
//! release scheduler by 170 KB (the compiler's inlining of the crate's drop code tips over;
//! see `scripts/build-release.sh`), passing them in does not.

use super::addrs::Addr;
use crate::gateway::types::{Device, Sdc, Sds};
use crate::scheduler::model::interned::Word;
use crate::scheduler::model::{DeviceStatus, NodeStorage, SdsStatus};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Listed {
    /// Each SDS's storage by its id (a device is filed under its SDS; a device whose SDS
    /// is not listed has no node to show it).
    by_id: HashMap<Arc<str>, Entry>,
    /// SDS id by each of its addresses (the last listed wins, as a node has one address).
    by_ip: HashMap<Addr, Arc<str>>,
    /// Addresses of the SDCs connected to the MDMs.
    connected_sdcs: HashSet<Addr>,
    /// Pools that hold a listed device (their statistics are read).
    pools_on_devices: BTreeSet<String>,
    /// Of the device ids asked after ([`Listed::watching`]), those listed.
    watched_devices: HashMap<String, bool>,
    sdss: usize,
    devices: usize,
    sdcs: usize,
}

/// One SDS's storage as its listings stream.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    storage: Arc<NodeStorage>,
    /// `Some`: `storage` is the last poll's, shared and never written to, and bit `i` says
    /// that its device `i` was listed again. `None`: `storage` is this poll's own.
    again: Option<u64>,
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
    /// listed before devices (a device is filed under its SDS). `last`: the last poll's
    /// storages, sorted by SDS id, as [`Listed::finish`] gives them: an SDS listed exactly as
    /// before takes its storage again rather than a copy.
    pub fn take_sds(&mut self, s: Option<Sds>, last: &[Arc<NodeStorage>]) {
        match s {
            Some(s) => self.sds_after(s, last),
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
                self.by_id.values_mut().for_each(Entry::forget_devices);
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
        self.sds_after(s, &[]);
    }

    /// [`Listed::take_sds`] of one SDS.
    fn sds_after(&mut self, s: Sds, last: &[Arc<NodeStorage>]) {
        self.sdss += 1;
        let last = last_of(last, &s.id);
        // The id as the last poll's storage holds it, shared by the maps' keys and the new
        // status: a steady poll of 10,000 SDSs allocates no id (they were 0.4 MB of each).
        let id = match last.and_then(|l| l.sds.as_ref()) {
            Some(known) => known.id.clone(),
            None => Arc::from(s.id.as_str()),
        };
        for ip in s.ips() {
            self.by_ip.insert(Addr::of(ip), id.clone());
        }
        let status = SdsStatus {
            id: id.clone(),
            protection_domain_id: Word::of(s.protection_domain_id.as_deref()),
            mdm_connection: Word::of(s.mdm_connection_state.as_deref()),
            membership: Word::of(s.membership_state.as_deref()),
            state: Word::of(s.sds_state.as_deref()),
            maintenance: Word::of(s.maintenance_state.as_deref()),
        };
        let again =
            last.filter(|last| last.sds.as_ref() == Some(&status) && last.devices.len() <= 64);
        let entry = match again {
            Some(last) => Entry {
                storage: last.clone(),
                again: Some(0),
            },
            None => {
                let storage = NodeStorage {
                    sds: Some(status),
                    devices: Vec::new(),
                };
                Entry {
                    storage: Arc::new(storage),
                    again: None,
                }
            }
        };
        self.by_id.insert(id, entry);
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
        let Some(entry) = d.sds_id.as_deref().and_then(|id| self.by_id.get_mut(id)) else {
            return;
        };
        entry.add(DeviceStatus {
            path: Word::from(d.device_current_path_name.as_str()),
            storage_pool_id: Word::of(d.storage_pool_id.as_deref()),
            state: Word::of(d.device_state.as_deref()),
            error: Word::of(d.error_state.as_deref()),
        });
    }

    /// Adds one SDC.
    pub fn sdc(&mut self, c: Sdc) {
        self.sdcs += 1;
        if c.connected() {
            self.connected_sdcs.insert(Addr::of(&c.sdc_ip));
        }
    }

    /// The listings read whole: each SDS listed as before keeps the last poll's storage, the
    /// others have their own. Gives the storages, sorted by SDS id, for the next poll
    /// ([`Listed::take_sds`]).
    pub fn finish(&mut self) -> Vec<Arc<NodeStorage>> {
        let mut storages = Vec::with_capacity(self.by_id.len());
        for entry in self.by_id.values_mut() {
            entry.finish();
            storages.push(entry.storage.clone());
        }
        storages.sort_unstable_by(|a, b| sds_id(a).cmp(sds_id(b)));
        storages
    }

    /// The storage of the node whose SDS has `sds_id`, or else is at `ip` (once
    /// [`Listed::finish`]ed, when SDSs were taken after a last poll).
    pub fn storage_of(&self, sds_id: Option<&str>, ip: Option<&str>) -> Option<&Arc<NodeStorage>> {
        let by_id = sds_id.and_then(|id| self.by_id.get(id));
        let entry = by_id.or_else(|| {
            let id = self.by_ip.get(&Addr::of(ip?))?;
            self.by_id.get(id)
        })?;
        Some(&entry.storage)
    }

    /// Whether an SDC at `ip` is connected to the MDMs.
    pub fn sdc_connected(&self, ip: &str) -> bool {
        self.connected_sdcs.contains(&Addr::of(ip))
    }

    /// The addresses of the connected SDCs, those written canonically (`addrs.rs`).
    pub fn connected_ips(&self) -> Vec<IpAddr> {
        self.connected_sdcs.iter().filter_map(Addr::ip).collect()
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

impl Entry {
    /// Adds one device: on the last poll's storage, marked if it holds it unmarked; else on
    /// a storage of this poll's own, in path order.
    fn add(&mut self, status: DeviceStatus) {
        if let Some(again) = &mut self.again {
            let devices = &self.storage.devices;
            let from = devices.partition_point(|x| x.path < status.path);
            let same = devices[from..]
                .iter()
                .take_while(|x| x.path == status.path)
                .position(|x| *x == status)
                .map(|i| 1u64 << (from + i));
            if let Some(bit) = same.filter(|bit| *again & bit == 0) {
                *again |= bit;
                return;
            }
            self.own();
        }
        // This poll's own: nothing else holds it yet, so `make_mut` copies nothing.
        let devices = &mut Arc::make_mut(&mut self.storage).devices;
        // Kept in path order, as the model shows them: an SDS has a handful of devices, most
        // often one, and a first push would make room for four (192 bytes more per node).
        let at = devices.partition_point(|x| x.path <= status.path);
        devices.reserve_exact(1);
        devices.insert(at, status);
    }

    /// The device listing starts again.
    fn forget_devices(&mut self) {
        match &mut self.again {
            Some(again) => *again = 0,
            None => Arc::make_mut(&mut self.storage).devices.clear(),
        }
    }

    /// A storage of this poll's own, with the last poll's devices marked so far.
    fn own(&mut self) {
        let Some(again) = self.again.take() else {
            return;
        };
        let last = &self.storage;
        let mut devices = Vec::with_capacity(again.count_ones() as usize);
        let marked = last.devices.iter().enumerate();
        devices.extend(
            marked
                .filter(|(i, _)| again & (1 << i) != 0)
                .map(|(_, d)| d.clone()),
        );
        self.storage = Arc::new(NodeStorage {
            sds: last.sds.clone(),
            devices,
        });
    }

    /// The listings read whole: the last poll's storage is kept only if every one of its
    /// devices was listed again.
    fn finish(&mut self) {
        let Some(again) = self.again else {
            return;
        };
        let n = self.storage.devices.len();
        let all = u64::MAX.checked_shr(64 - n as u32).unwrap_or(0);
        if again == all {
            self.again = None;
        } else {
            self.own();
        }
    }
}

/// The storage of the SDS `id` in `last`, sorted by SDS id.
fn last_of<'a>(last: &'a [Arc<NodeStorage>], id: &str) -> Option<&'a Arc<NodeStorage>> {
    let i = last.binary_search_by(|s| sds_id(s).cmp(id)).ok()?;
    Some(&last[i])
}

fn sds_id(s: &NodeStorage) -> &str {
    s.sds.as_ref().map_or("", |s| &*s.id)
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
        assert_eq!(&*by_ip.sds.as_ref().unwrap().id, "s2");
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
        l.take_sds(None, &[]);
        l.take_sds(Some(Sds::joined("s1", "10.0.0.1")), &[]);
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
        l.take_sds(None, &[]);
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

    /// A poll of these SDSs (id, address, state) and devices (id, SDS, path), started on
    /// `last`, finished.
    fn poll(
        last: Vec<Arc<NodeStorage>>,
        sdss: &[Sds],
        devices: &[Device],
    ) -> (Listed, Vec<Arc<NodeStorage>>) {
        let mut l = Listed::default();
        sdss.iter()
            .cloned()
            .for_each(|s| l.take_sds(Some(s), &last));
        devices.iter().cloned().for_each(|d| l.take_device(Some(d)));
        let next = l.finish();
        (l, next)
    }

    fn storage<'a>(l: &'a Listed, id: &str) -> &'a Arc<NodeStorage> {
        l.storage_of(Some(id), None).unwrap()
    }

    #[test]
    fn an_sds_listed_as_before_takes_the_last_polls_storage_and_a_changed_one_its_own() {
        let sdss = [
            Sds::joined("s1", "10.0.0.1"),
            Sds::joined("s2", "10.0.0.2"),
            Sds::joined("s3", "10.0.0.3"),
        ];
        let devices = [
            device("d1", "s1", "/dev/sdb"),
            device("d2", "s2", "/dev/sdb"),
            device("d3", "s3", "/dev/sdb"),
        ];
        let (first, last) = poll(Vec::new(), &sdss, &devices);
        assert_eq!(
            last.iter().map(|s| sds_id(s)).collect::<Vec<_>>(),
            ["s1", "s2", "s3"]
        );
        // s2 leaves the cluster, s3's device fails.
        let mut sdss2 = sdss.clone();
        sdss2[1].membership_state = Some("Decoupled".into());
        let mut devices2 = devices.clone();
        devices2[2].device_state = Some("Error".into());
        let (second, _) = poll(last, &sdss2, &devices2);
        assert!(Arc::ptr_eq(storage(&first, "s1"), storage(&second, "s1")));
        for id in ["s2", "s3"] {
            assert!(
                !Arc::ptr_eq(storage(&first, id), storage(&second, id)),
                "{id}"
            );
            assert_ne!(storage(&first, id), storage(&second, id), "{id}");
        }
        // Every id, changed SDS or not, is the last poll's, in the storages and the maps:
        // a poll of SDSs listed before allocates no id.
        for id in ["s1", "s2", "s3"] {
            let known = &storage(&first, id).sds.as_ref().unwrap().id;
            assert!(
                Arc::ptr_eq(known, &storage(&second, id).sds.as_ref().unwrap().id),
                "{id}"
            );
            assert!(
                Arc::ptr_eq(known, second.by_id.get_key_value(id).unwrap().0),
                "{id}"
            );
        }
        assert!(second.by_ip.values().all(|id| second
            .by_id
            .get_key_value(&**id)
            .is_some_and(|(k, _)| Arc::ptr_eq(k, id))));
        // Each as a poll from nothing would have it.
        let (fresh, _) = poll(Vec::new(), &sdss2, &devices2);
        assert_eq!(second, fresh);
        assert_eq!(second.counts(), (3, 3, 0));
    }

    #[test]
    fn a_device_missing_or_changed_gives_its_sds_a_storage_of_its_own() {
        let sdss = [Sds::joined("s1", "10.0.0.1")];
        let all = [
            device("d1", "s1", "/dev/sdb"),
            device("d2", "s1", "/dev/sdc"),
            device("d3", "s1", "/dev/sdd"),
        ];
        let (first, last) = poll(Vec::new(), &sdss, &all);
        let mut failed = all[1].clone();
        failed.error_state = Some("Error".into());
        let cases: [(&str, Vec<Device>); 4] = [
            ("one missing", vec![all[0].clone(), all[2].clone()]),
            (
                "one in error, listed first",
                vec![failed, all[0].clone(), all[2].clone()],
            ),
            (
                "one listed twice",
                vec![
                    all[0].clone(),
                    all[1].clone(),
                    all[1].clone(),
                    all[2].clone(),
                ],
            ),
            (
                "one more",
                vec![
                    all[0].clone(),
                    all[1].clone(),
                    all[2].clone(),
                    device("d4", "s1", "/dev/sda"),
                ],
            ),
        ];
        for (case, devices) in cases {
            let (second, _) = poll(last.clone(), &sdss, &devices);
            let (fresh, _) = poll(Vec::new(), &sdss, &devices);
            assert_eq!(second, fresh, "{case}");
            assert_ne!(storage(&second, "s1"), storage(&first, "s1"), "{case}");
        }
        // Listed again in another order: the same storage.
        let reordered = [all[2].clone(), all[0].clone(), all[1].clone()];
        let (again, _) = poll(last.clone(), &sdss, &reordered);
        assert!(Arc::ptr_eq(storage(&again, "s1"), storage(&first, "s1")));
    }

    #[test]
    fn a_device_listing_started_again_counts_only_its_second_reading() {
        let sdss = [Sds::joined("s1", "10.0.0.1"), Sds::joined("s2", "10.0.0.2")];
        let devices = [
            device("d1", "s1", "/dev/sdb"),
            device("d2", "s2", "/dev/sdb"),
        ];
        let (first, last) = poll(Vec::new(), &sdss, &devices);
        let mut l = Listed::default();
        sdss.iter()
            .cloned()
            .for_each(|s| l.take_sds(Some(s), &last));
        // The first reading has both and one more on s2; the second only s1's.
        l.take_device(Some(devices[0].clone()));
        l.take_device(Some(devices[1].clone()));
        l.take_device(Some(device("d9", "s2", "/dev/sdz")));
        l.take_device(None);
        l.take_device(Some(devices[0].clone()));
        l.finish();
        assert!(Arc::ptr_eq(storage(&l, "s1"), storage(&first, "s1")));
        assert!(storage(&l, "s2").devices.is_empty());
        assert_eq!(l.counts(), (2, 1, 0));
    }

    #[test]
    fn an_sds_listing_started_again_still_starts_from_the_last_poll() {
        let sdss = [Sds::joined("s1", "10.0.0.1")];
        let (first, last) = poll(Vec::new(), &sdss, &[]);
        let mut l = Listed::watching(["d1"]);
        l.take_sds(Some(Sds::joined("s0", "10.0.0.9")), &last);
        l.take_sds(None, &last);
        l.take_sds(Some(sdss[0].clone()), &last);
        l.finish();
        assert!(Arc::ptr_eq(storage(&l, "s1"), storage(&first, "s1")));
        assert!(l.storage_of(Some("s0"), None).is_none());
        assert_eq!(l.has_watched_device("d1"), Some(false));
        assert_eq!(l.counts(), (1, 0, 0));
    }
}
